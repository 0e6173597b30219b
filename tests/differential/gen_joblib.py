"""joblib: files written by joblib's own NumpyPickler (subclassed only to mutate, for chosen
arrays, the NumpyArrayWrapper's state and the bytes joblib writes after its BUILD), compressed
by joblib's own compressor files (`_write_fileobject`): none, zlib, gzip, bz2, xz, lzma, lz4.

Mutations:
- the wrapper state: `numpy_array_alignment_bytes` as None/int/float/str/bool/other ints,
  missing, duplicated (first or second wins), the BUILD state as a (dict, slots) pair; shape,
  order, and the dtype as a mutated numpy reduce value (gen_numpy.mutate_dtype_state);
- the padding byte and padding bytes;
- the bytes after the BUILD, written so that joblib's reading and a plausible other reading
  (the mutated field taken at its word, the padding present or not, the original shape or
  itemsize) part ways: where the other reading takes more bytes than joblib, joblib reads a
  tripwire payload as opcodes there; where it takes fewer, it reads a BINBYTES that hides
  the payload joblib runs;
- opcodes between arrays: a FRAME whose length runs past the BUILD into the array bytes
  (joblib's pure-Python unpickler then runs the rest of that frame after reading the array
  from the file), a second BUILD on a GET of the wrapper (joblib reads another array), and
  the pickle-level mutations of common.py on the pickle with the arrays taken out;
- the nested object-array pickle: protocol, reduce-level mutations, pickle-level mutations
  (FRAME lengths among them), payloads;
- compressed streams: split in two concatenated streams, or a second stream appended.
"""
import copyreg
import io
import os
import pickle
import struct
import tempfile

import numpy as np
import joblib
from joblib import numpy_pickle as jnp

import gen_numpy
from common import Case, PAYLOADS, filler, mutate_pickle, payload, read_ops, enc_get

COMPRESSIONS = ["none", "zlib", "gzip", "bz2", "xz", "lzma"]
try:
    import lz4.frame  # noqa: F401
    COMPRESSIONS.append("lz4")
except ImportError:
    pass

COST_FAMILIES = []
ALIGN = "numpy_array_alignment_bytes"
MISSING = object()


class DtypeProxy:
    """Pickles as the given (mutated) numpy dtype reduce value."""

    def __init__(self, rv):
        self.rv = rv

    def __reduce_ex__(self, proto):
        return self.rv


class MutPickler(jnp.NumpyPickler):
    """joblib's NumpyPickler; for the arrays in `plan` it writes the wrapper and the bytes
    after it as the plan says, and records where each array's bytes are."""

    def __init__(self, fp, protocol, rng, plan):
        super().__init__(fp, protocol=protocol)
        self.rng, self.plan, self.labels = rng, plan, []
        self.n_arrays = 0
        # (start, end, padding) of what joblib reads after each BUILD (raw stream); padding is
        # the padding length read, or None (no padding byte, or an object array's pickle)
        self.spans = []
        self._keep = []

    def save(self, obj):
        if type(obj) is not np.ndarray:
            return jnp.Pickler.save(self, obj)
        idx = self.n_arrays
        self.n_arrays += 1
        wrapper = self._create_array_wrapper(obj)
        mut = self.plan.get(idx)
        if mut is None:
            jnp.Pickler.save(self, wrapper)
            if self.proto >= 4:
                self.framer.commit_frame(force=True)
            start = self.file_handle.tell()
            wrapper.write_array(obj, self)
            end = self.file_handle.tell()
            pad = None
            if not obj.dtype.hasobject and wrapper.safe_get_numpy_array_alignment_bytes():
                self.file_handle.seek(start)
                pad = self.file_handle.read(1)[0]
                self.file_handle.seek(end)
            self.spans.append((start, end, pad))
            return
        self.write_mutated(obj, wrapper, mut)

    # -- the wrapper
    def write_mutated(self, arr, wrapper, mut):
        rng = self.rng
        pairs = list(wrapper.__dict__.items())
        # the alignment attribute
        k = mut.get("align")
        if k is not None:
            val = {"none": None, "int8": 8, "int1": 1, "int0": 0, "int32": 32, "int255": 255,
                   "int256": 256, "big": 2**64 + 16, "neg": -16, "float": 16.0, "str": "16",
                   "true": True, "false": False, "bytes": b"\x10", "tuple": (16,)}.get(k)
            pairs = [(a, b) for a, b in pairs if a != ALIGN]
            if k == "missing":
                pass
            elif k == "dup-none-first":
                pairs += [(ALIGN, None), (ALIGN, 16)]
            elif k == "dup-none-last":
                pairs += [(ALIGN, 16), (ALIGN, None)]
            elif k == "first":
                pairs = [(ALIGN, 16)] + pairs
            else:
                pairs.append((ALIGN, val))
            self.labels.append("wrapper.align=%s" % k)
        # the dtype
        dtype_written = DInfo(bool(arr.dtype.hasobject), arr.dtype.itemsize)
        if mut.get("dtype"):
            rv, lab = gen_numpy.mutate_dtype_state(rng, arr.dtype.__reduce__())
            pairs = [(a, DtypeProxy(rv) if a == "dtype" else b) for a, b in pairs]
            self.labels.append(lab)
            dtype_written = resolve_dtype(rv)
            if lab.startswith("dtype.elsize="):
                mut["elsize_alt"] = int(lab.split("=")[1])
        # shape / order
        shape = arr.shape
        if mut.get("shape"):
            shape = rng.choice([shape + (1,), (arr.size + 1,), (0,), (2 * arr.size,),
                                (arr.size // 2,), (2**40,), (-1,), list(shape), (True,) * 2])
            pairs = [(a, shape if a == "shape" else b) for a, b in pairs]
            self.labels.append("wrapper.shape=%r" % (shape,))
        if mut.get("order"):
            o = rng.choice(["F", "C", "A", "K", "x", None])
            pairs = [(a, o if a == "order" else b) for a, b in pairs]
            self.labels.append("wrapper.order=%r" % (o,))
        state_form = mut.get("state_form", "dict")
        if state_form != "dict":
            self.labels.append("wrapper.state=%s" % state_form)
        # what joblib will see
        final = {}
        for a, b in pairs:
            final[a] = b
        if state_form == "slots-align":
            final[ALIGN] = None
        self.write_wrapper(wrapper, pairs, state_form)
        if self.proto >= 4:
            self.framer.commit_frame(force=True)
        start = self.file_handle.tell()
        region, alts, info = self.region(arr, final, dtype_written, mut, start)
        if region is None:
            return
        body = self.desync(region, alts, info)
        self.file_handle.write(body)
        self.spans.append((start, start + len(region),
                           region[0] if info.get("has_pad") else None))
        if mut.get("second_build"):
            memo_idx = self.memo[id(wrapper)][0]
            ops = enc_get(memo_idx) + b"}b"
            self.file_handle.write(ops)
            start2 = self.file_handle.tell()
            region2, _, info2 = self.region(arr, final, dtype_written, {}, start2)
            if region2 is not None:
                body2 = self.desync(region2, [(1, 0)], info2, force=True)
                self.file_handle.write(body2 + b"0")
                self.labels.append("wrapper.second-build")

    def write_wrapper(self, wrapper, pairs, state_form):
        # cls, (), NEWOBJ, memoize: what save_reduce writes for copyreg.__newobj__
        self.save_reduce(copyreg.__newobj__, (type(wrapper),), obj=wrapper)
        if state_form == "dict":
            self.write_pairs(pairs)
        elif state_form == "slots-align":  # (dict, {align: None}): setattr after update
            self.write_pairs(pairs)
            self.write_pairs([(ALIGN, None)])
            self.write(pickle.TUPLE2)
        else:  # "slots": (None, dict): every attribute by setattr
            self.save(None)
            self.write_pairs(pairs)
            self.write(pickle.TUPLE2)
        self.write(pickle.BUILD)

    def write_pairs(self, pairs):
        holder = object()
        self._keep.append(holder)
        if self.bin:
            self.write(pickle.EMPTY_DICT)
        else:
            self.write(pickle.MARK + pickle.DICT)
        self.memoize(holder)
        if self.bin:
            self.write(pickle.MARK)
            for a, b in pairs:
                self.save(a)
                self.save(b)
            self.write(pickle.SETITEMS)
        else:
            for a, b in pairs:
                self.save(a)
                self.save(b)
                self.write(pickle.SETITEM)

    # -- the bytes after the BUILD
    def region(self, arr, final, dtype_j, mut, pos):
        """What joblib reads after the BUILD, as joblib reads it (its own rule), and the lengths
        another reading might take."""
        rng = self.rng
        if dtype_j is None:
            return None, [], {}
        align = final.get(ALIGN, MISSING)
        has_pad = align is not MISSING and align is not None
        shape = final.get("shape")
        try:
            count = int(np.multiply.reduce([np.int64(x) for x in shape])) if len(shape) else 1
        except Exception:
            return None, [], {}
        if dtype_j.hasobject:
            proto = mut.get("nested_proto", 5)
            if mut.get("nested_mut"):
                nested, labs = gen_numpy.dumps_mutated(rng, arr, proto, 1)
                self.labels += ["nested." + x for x in labs]
            else:
                nested = pickle.dumps(arr if arr.dtype.hasobject else arr.astype(object),
                                      protocol=proto)
            if proto != 5:
                self.labels.append("nested.protocol=%d" % proto)
            if mut.get("nested_ops"):
                nested, labs = mutate_pickle(rng, nested)
                self.labels += ["nested." + x for x in labs]
            if mut.get("nested_payload"):
                from common import inject_payload
                nested, lab = inject_payload(rng, nested)
                self.labels.append("nested." + lab)
            alts = [(1, count * arr.dtype.itemsize), (1, count * 8)]
            return nested, alts, {"free_from": None, "has_pad": False}
        if count < 0 or count * dtype_j.itemsize > 1 << 20:
            return None, [], {}
        nbytes = count * dtype_j.itemsize
        if nbytes < 0:
            return None, [], {}
        src = arr.tobytes()
        data = (src + bytes(max(0, nbytes - len(src))))[:nbytes]
        if dtype_j.itemsize and nbytes and data == bytes(nbytes):
            data = rng.randbytes(nbytes)
        canon_p = 16 - ((pos + 1) % 16)
        head = b""
        if has_pad:
            p = canon_p
            if mut.get("pad"):
                p = rng.choice([0, 1, 15, 16, 17, 66, 255, canon_p + 16])
                self.labels.append("padding.length=%d" % p)
            padbytes = b"\xff" * p
            if mut.get("padbytes"):
                padbytes = rng.randbytes(p)
                self.labels.append("padding.bytes")
            head = bytes([p]) + padbytes
        region = head + data
        R = len(region)
        hp = len(head)
        # (weight, length): the readings the mutated fields suggest first
        alts = []
        if has_pad:
            alts.append((3, R - hp))  # the padding not read
        else:
            alts.append((3, 1 + canon_p + nbytes))  # padding read where joblib reads none
        if mut.get("elsize_alt"):
            alts.append((4, hp + count * mut["elsize_alt"]))
        if mut.get("shape") or mut.get("dtype"):
            alts.append((2, hp + arr.size * arr.dtype.itemsize))
        if mut.get("pad"):
            alts.append((2, 1 + canon_p + nbytes))
        alts += [(0.25, R + d) for d in (2, 4, 8, 16, -2, -4, -8, -16)]
        alts = [(w, a) for w, a in alts if a >= 0 and a != R]
        return region, alts, {"free_from": 1 if has_pad else 0, "has_pad": has_pad}

    def desync(self, region, alts, info, force=False):
        """The region, then (maybe) bytes that make another reading of its length part ways
        with joblib's: see the module docs."""
        rng = self.rng
        if not alts or (not force and rng.random() < 0.3):
            return region
        A = rng.choices([a for _, a in alts], weights=[w for w, _ in alts])[0]
        R = len(region)
        name, push1 = payload(rng, neutral=False, modern=True)
        if A > R:
            gap = A - R
            if gap > 1 << 20:
                return region
            neutral = push1 + b"0"
            if gap < len(neutral) + 2 and gap != len(neutral):
                return region
            self.labels.append("desync=longer")
            self.labels.append("payload=%s" % name)
            return region + neutral + filler(gap - len(neutral))
        free = info.get("free_from")
        if free is None:
            return region
        if A == 0 and info.get("has_pad"):
            # the other reading takes the padding byte as an opcode: make it BINBYTES ('B'),
            # so that joblib reads 66 padding bytes, the first four the BINBYTES length
            region = b"B" + b"\xff" * 66 + region[1 + region[0]:]
            R = len(region)
            body = bytearray(region)
            body[1:5] = struct.pack("<I", R - 5 + len(push1))
        else:
            if A < free or A + 5 > R:
                return region
            body = bytearray(region)
            body[A:A + 1] = b"B"
            body[A + 1:A + 5] = struct.pack("<I", R - (A + 5) + len(push1))
        self.labels.append("desync=shorter")
        self.labels.append("payload=%s" % name)
        return bytes(body) + push1 + b"0"


class DInfo:
    """What joblib's read_array uses of a dtype."""

    def __init__(self, hasobject, itemsize):
        self.hasobject, self.itemsize = hasobject, itemsize


def resolve_dtype(rv):
    """(hasobject, itemsize) of the dtype joblib's unpickler gets from a (mutated) dtype
    reduce value, or None. Computed in a forked child: some mutated dtypes crash numpy."""
    data = pickle.dumps(DtypeProxy(rv), protocol=2)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            d = pickle.loads(data)
            os.write(w, ("%d %d" % (bool(d.hasobject), d.itemsize)).encode())
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 100)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    if not out:
        return None
    h, n = out.split()
    return DInfo(bool(int(h)), int(n))


def sample_value(rng):
    arrays = {}
    for i in range(rng.randrange(1, 4)):
        arrays["a%d" % i] = gen_numpy.sample_array(rng, object_bias=0.2)
    v = {"meta": {"name": "m", "n": rng.randrange(9)}, **arrays}
    if rng.random() < 0.3:
        v["list"] = [gen_numpy.sample_array(rng, object_bias=0.1), 1.5]
    return v


FAMILIES = [  # (weight, family): one per case, so that a failure names its cause
    (4, "align"), (4, "dtype"), (1, "shape"), (0.5, "order"), (1.5, "pad"), (1, "padbytes"),
    (1.5, "second_build"), (1, "state_form"), (1.5, "nested_mut"), (1, "nested_payload"), (1, "nested_ops"),
    (0.5, "nested_proto"), (2, "frame-past-build"), (2, "ops-between"), (1, "stream.split"),
    (0.5, "stream.appended"), (1, "none")]
ALIGN_FORMS = ["none", "missing", "dup-none-first", "dup-none-last", "first", "int8", "int1",
               "int0", "int32", "int255", "int256", "big", "neg", "float", "str", "true",
               "false", "bytes", "tuple"]


def plan_for(rng, family, n_arrays):
    """The per-array plan of a wrapper family: {array index: {key: value}}."""
    m = {}
    if family == "align":
        m["align"] = rng.choice(ALIGN_FORMS)
    elif family == "nested_proto":
        m["nested_proto"] = rng.randrange(0, 5)
    elif family == "state_form":
        m["state_form"] = rng.choice(["slots", "slots-align"])
    elif family in ("dtype", "shape", "order", "pad", "padbytes", "second_build", "nested_mut",
                    "nested_payload", "nested_ops"):
        m[family] = True
    else:
        return {}
    return {rng.randrange(max(n_arrays, 1)): m}


def dump_raw(rng, value, protocol, plan):
    buf = io.BytesIO()
    p = MutPickler(buf, protocol, rng, plan)
    p.dump(value)
    return buf.getvalue(), p.spans, p.labels


def compress(raw, method, level=3):
    if method == "none":
        return raw
    fd, path = tempfile.mkstemp(suffix=".joblib")
    os.close(fd)
    try:
        with jnp._write_fileobject(path, compress=(method, level)) as f:
            f.write(raw)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


# ---------------------------------------------------------------- opcodes between arrays

def op_segments(raw, spans):
    """[(start, end)] of the opcode runs between the array spans."""
    out, pos = [], 0
    for s, e, _ in spans:
        out.append((pos, s))
        pos = e
    out.append((pos, len(raw)))
    return out


def frame_past_build(rng, raw, spans):
    """A FRAME that ends at an array's BUILD made longer by K injected bytes put right after
    the BUILD: joblib reads the array from the file after the frame, then runs the K bytes
    from the frame (a tripwire payload). A reader that takes the array right after the BUILD
    consumes L bytes from there (the same R bytes joblib reads; or, reading the padding length
    from the first injected byte, 1 + that byte + the data; or no padding at all; or, reading
    the array after the frame as joblib does but not the frame's rest, K + R) and lands L - K
    bytes into joblib's array bytes, which are made stack-neutral opcodes from there, or at
    their end."""
    cands = []
    for s, e, pad in spans:
        try:
            ops = read_ops(raw, 0, s, stop=False)
        except ValueError:
            continue
        frames = [o for o in ops if o.name == "FRAME" and o.pos + 9 + o.arg == s]
        if frames and pad is not None:
            cands.append((frames[-1], s, e, pad))
    if not cands:
        return None
    fr, s, e, p = rng.choice(cands)
    R = e - s
    nbytes = R - 1 - p
    name, push1 = payload(rng, neutral=False, modern=True)
    reading = rng.choice(["same", "padding-from-payload", "no-padding", "after-frame"])
    prefix = b""
    if reading == "padding-from-payload":
        # stack-neutral first opcodes, by the byte value a padding-length reading takes
        prefix = rng.choice([b"(1", b")0", b"N0", b"]0", b"}0", b"\x80\x02", b"\x88" b"0",
                             b"\x89" b"0", b"\x8c\x00" b"0"])
    core = prefix + push1 + b"0"
    L = {"same": R, "padding-from-payload": 1 + prefix[:1][0] + nbytes if prefix else R,
         "no-padding": nbytes, "after-frame": len(core) + R}[reading]
    if L - R >= len(core) and (L - R - len(core)) != 1:
        K = L - R  # the other reading lands where joblib's next opcode is
    else:
        # K: at least the core, and the landing point L - K in the array's data
        K = max(len(core), L - R + 2)
        if (K - len(core)) == 1:
            K += 1
    land = L - K
    if land != R and (land < 1 + p or R - land < 2):
        return None
    injected = core + filler(K - len(core))
    region = raw[s:e]
    new_region = region[:land] + filler(R - land)
    out = (raw[:fr.pos] + b"\x95" + struct.pack("<Q", fr.arg + K) + raw[fr.pos + 9:s]
           + injected + new_region + raw[e:])
    return out, ["frame-past-build", "desync=%s" % reading, "payload=%s" % name]


def mutate_ops_between(rng, raw, spans):
    """A pickle-level mutation of one opcode run between arrays."""
    segs = [(s, e) for s, e in op_segments(raw, spans) if e - s > 2]
    if not segs:
        return None
    s, e = rng.choice(segs)
    seg, labels = mutate_pickle(rng, raw[s:e])
    return raw[:s] + seg + raw[e:], labels


def joblib_case(rng):
    value = sample_value(rng)
    n_arrays = sum(1 for v in value.values() if isinstance(v, np.ndarray)) + \
        (1 if "list" in value else 0)
    family = rng.choices([f for _, f in FAMILIES], weights=[w for w, _ in FAMILIES])[0]
    if family in ("nested_mut", "nested_payload", "nested_proto", "nested_ops"):
        value["objects"] = gen_numpy.make_array(rng, np.dtype("O"), (rng.randrange(1, 5),))
        n_arrays += 1
    protocol = rng.choice([2, 3, 4, 5]) if rng.random() < 0.3 else pickle.DEFAULT_PROTOCOL
    if family == "frame-past-build":
        protocol = rng.choice([4, 5])
    raw, spans, labels = dump_raw(rng, value, protocol, plan_for(rng, family, n_arrays))
    labels = list(labels)
    if protocol != pickle.DEFAULT_PROTOCOL:
        labels.append("writer.protocol=%d" % protocol)
    if family == "frame-past-build":
        got = frame_past_build(rng, raw, spans)
        if got:
            raw, labs = got
            labels += labs
    elif family == "ops-between":
        got = mutate_ops_between(rng, raw, spans)
        if got:
            raw, labs = got
            labels += labs
    methods = COMPRESSIONS if family not in ("stream.split", "stream.appended") \
        else COMPRESSIONS[1:]
    method = rng.choice(methods)
    data = compress(raw, method)
    if family == "stream.split":
        cut = rng.randrange(1, len(raw))
        data = compress(raw[:cut], method) + compress(raw[cut:], method)
        labels.append("stream.split")
    elif family == "stream.appended":
        evil = b"\x80\x02" + PAYLOADS["os.system"] + b"."
        data = data + compress(evil, method)
        labels.append("stream.appended")
    return Case("joblib", "joblib-" + method, data, ".joblib", ["scan"], "joblib", labels)


# A write check: joblib reads what the unmutated writer writes.
def _selfcheck():
    import random
    rng = random.Random(0)
    v = sample_value(rng)
    raw, spans, _ = dump_raw(rng, v, pickle.DEFAULT_PROTOCOL, {})
    ref = io.BytesIO()
    joblib.dump(v, ref)
    assert raw == ref.getvalue(), "MutPickler without a plan differs from joblib.dump"
