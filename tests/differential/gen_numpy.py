"""numpy: real arrays, dtypes and scalars written by the real writers (np.save, np.savez,
pickle), and structure-aware mutations of what numpy's own `__reduce__` returns (the dtype's
state tuple, the ndarray's state, a scalar's bytes), pickled by the real pickler so that every
byte but the mutated field is the writer's own. Also npy headers and npz zip entries.

Readers: `numpy` (np.load(allow_pickle=True) of .npy and .npz, vs `picklewarden scan`) and
`pickle-numpy` (pickle.loads of pickles of ndarrays, dtypes, scalars, vs `check --policy
numpy`).
"""
import io
import pickle
import struct
import zipfile

import numpy as np

from common import Case, inject_payload, mutate_pickle, payload

OBJECT_FLAGS = 63  # NPY_OBJECT_DTYPE_FLAGS: refcount, list pickle, pointer, init, pyapi, get/setitem


def sample_dtypes():
    out = ["?", "b", "B", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8", ">u8", "<f2",
           "<f4", ">f4", "<f8", ">f8", "<g", "<c8", "<c16", "<G", "S5", "<U3", ">U2", "V4",
           "<M8[ns]", "<m8[s]", "<M8[D]", "O",
           [("a", "<i4"), ("b", "<f8", (2,))],
           [("o", "O"), ("i", "<i4")],
           [("n", [("x", "<i2"), ("y", "S2")]), ("z", "<f4")],
           ("<i4", (2, 3)),
           ("O", (2,))]
    dts = [np.dtype(d) for d in out]
    dts.append(np.dtype([("a", "u1"), ("b", "<i4")], align=True))
    dts.append(np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i2"], "offsets": [4, 0],
                         "itemsize": 12}))
    return dts


OBJECTS = [1, "two", (3.0,), None, b"x", {"k": [1, 2]}, 2**70, 1.5j, frozenset({1}),
           bytearray(b"ab")]


def make_array(rng, dt, shape):
    n = int(np.prod(shape)) if shape else 1
    if dt.subdtype is not None:
        a = np.zeros(shape, dtype=dt)
        if dt.hasobject:
            for i in range(a.size):
                a.flat[i] = rng.choice(OBJECTS)
        return a
    if dt.hasobject:
        a = np.empty(n, dtype=dt)
        if dt.names is None and dt.subdtype is None:
            for i in range(n):
                a[i] = rng.choice(OBJECTS)
        else:
            a[...] = np.zeros(n, dtype=dt)  # zeros for every field (objects become 0)
    elif dt.kind in "SUV" or dt.names is not None:
        raw = bytes(32 + b % 95 for b in rng.randbytes(n * dt.itemsize))
        a = np.frombuffer(raw, dtype=dt).copy() if n else np.empty(0, dtype=dt)
        if dt.kind == "U":
            a = np.array(["%x" % rng.randrange(99) for _ in range(n)], dtype=dt)
    elif dt.kind == "b":
        a = (np.arange(n) % 2 == 0).astype(dt)
    else:
        a = (np.arange(n) * 3 % 97).astype(dt)
    a = a.reshape(shape) if shape else a.reshape(())
    if rng.random() < 0.25 and a.ndim >= 2:
        a = np.asfortranarray(a)
    return a


SHAPES = [(), (0,), (3, 0), (1,), (5,), (2, 3), (2, 3, 4), (17,), (64,)]


def sample_array(rng, object_bias=0.3):
    dts = sample_dtypes()
    if rng.random() < object_bias:
        dts = [d for d in dts if d.hasobject]
    dt = rng.choice(dts)
    return make_array(rng, dt, rng.choice(SHAPES))


# ---------------------------------------------------------------- reduce-level mutations

def mutate_dtype_state(rng, rv):
    """rv = numpy's (np.dtype, (str, False, True), state): one field of the state changed."""
    f, args, state = rv[0], rv[1], list(rv[2])
    k = rng.choices(range(10), [2, 1, 2, 1, 1, 1, 0.5, 0.5, 1, 1])[0]
    if k == 0:  # elsize
        v = rng.choice([0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 2**31 - 1, -2, 3 * 8])
        state[5] = v
        lab = "dtype.elsize=%d" % v
    elif k == 1:
        v = rng.choice([0, 1, 2, 3, 16, 4096, -2])
        state[6] = v
        lab = "dtype.alignment=%d" % v
    elif k == 2:  # flags: object bits dropped or added
        cur = state[7]
        v = rng.choice([0, cur & ~OBJECT_FLAGS, cur | OBJECT_FLAGS, 1, 16, 8, 27, 255,
                        cur ^ 1, cur & ~1])
        state[7] = v
        lab = "dtype.flags=%d->%d" % (cur, v)
    elif k == 3:
        v = rng.choice(["<", ">", "|", "=", "x"])
        state[1] = v
        lab = "dtype.byteorder=%s" % v
    elif k == 4 and state[3] is not None:  # names / fields
        names, fields = list(state[3]), dict(state[4])
        j = rng.randrange(4)
        if j == 0:
            names.reverse()
            lab = "dtype.names=reversed"
        elif j == 1:
            names = names[:-1]
            lab = "dtype.names=dropped"
        elif j == 2:
            n = rng.choice(names)
            d, off = fields[n][:2]
            fields[n] = (d, off + rng.choice([1, -1, 4, 8, 1000]))
            lab = "dtype.fields=offset"
        else:
            n = rng.choice(names)
            off = fields[n][1]
            fields[n] = (np.dtype(rng.choice(["O", "<f8", "S1", "<i8"])), off)
            lab = "dtype.fields=dtype"
        state[3], state[4] = tuple(names), fields
    elif k == 5 and state[2] is not None:  # subarray
        base, shape = state[2]
        v = rng.choice([(), (0,), (3,), shape + (2,), (2**20,), (-1,)])
        if rng.random() < 0.3:
            base = np.dtype(rng.choice(["O", "<f8", "u1"]))
        state[2] = (base, v)
        lab = "dtype.subarray=%r" % (v,)
    elif k == 6:
        v = rng.choice([0, 1, 2, 4, 5, -1])
        state[0] = v
        lab = "dtype.version=%d" % v
    elif k == 7:
        if rng.random() < 0.5:
            state = state[:-1]
            lab = "dtype.state-len=short"
        else:
            state = state + [None]
            lab = "dtype.state-len=long"
    elif k == 8:  # the constructor's arguments
        s = rng.choice(["O8", "f8", "V8", "i4", "S0", "U0", "V0", args[0] + "x", "M8[s]"])
        args = (s,) + tuple(args[1:])
        lab = "dtype.args=%s" % s
    else:
        state[2] = (np.dtype("O"), (2,))
        lab = "dtype.subarray=object"
    return (f, args, tuple(state)), lab


def mutate_array_state(rng, rv, arr):
    """rv = (_reconstruct, (ndarray, (0,), b'b'), (version, shape, dtype, is_fortran, data))."""
    f, args, state = rv[0], rv[1], list(rv[2])
    k = rng.choices(range(9), [1, 1, 1, 1, 0.5, 1, 0.5, 0.5, 2])[0]
    shape = tuple(state[1])
    if k == 8:
        # the dtype's flags and the data's form changed together, as a writer following the
        # flags would write them: without NPY_LIST_PICKLE (2) the data is raw bytes
        drt = state[2].__reduce__()
        if not (isinstance(drt, tuple) and len(drt) == 3 and isinstance(drt[2], tuple)):
            return rv, "ndarray.none"
        dst = list(drt[2])
        v = rng.choice([0, dst[7] & ~2, dst[7] & ~OBJECT_FLAGS, 1, 16, 63])
        dst[7] = v
        state[2] = ReduceProxy((drt[0], drt[1], tuple(dst)))
        n = int(np.prod(shape)) if shape else 1
        isz = 8 if arr.dtype.hasobject else arr.dtype.itemsize
        state[4] = rng.randbytes(n * isz) if v & 2 == 0 else arr.ravel().tolist()
        return (f, args, tuple(state)), "ndarray.flags+data=%d" % v
    if k == 0:  # data as bytes where numpy writes a list, or the other way round
        if isinstance(state[4], list):
            n = int(np.prod(shape)) if shape else 1
            state[4] = rng.randbytes(n * 8) if rng.random() < 0.5 \
                else b"\x00" * (n * arr.dtype.itemsize)
            lab = "ndarray.data=bytes-for-objects"
        else:
            state[4] = arr.ravel().tolist() if arr.dtype.names is None else [0]
            lab = "ndarray.data=list"
    elif k == 1 and isinstance(state[4], (bytes, bytearray)):
        d = bytes(state[4])
        v = rng.choice([d[:-1], d + b"\x00", d[: len(d) // 2], b"", d * 2])
        state[4] = v
        lab = "ndarray.data=length"
    elif k == 2:
        v = rng.choice([(), (0,), shape + (1,), tuple(x * 2 for x in shape), (2**31,),
                        (-1,), (2**62, 2**62), shape[::-1]])
        state[1] = v
        lab = "ndarray.shape=%r" % (v,)
    elif k == 3:
        v = rng.choice([True, False, 2, None])
        state[3] = v
        lab = "ndarray.is_fortran=%r" % (v,)
    elif k == 4:
        v = rng.choice([0, 2, 3, -1])
        state[0] = v
        lab = "ndarray.version=%d" % v
    elif k == 5:  # another dtype, same data
        v = np.dtype(rng.choice(["O", "<f8", "u1", "<i4", "S3", "V8", "<U1"]))
        state[2] = v
        lab = "ndarray.dtype=%s" % v.str
    elif k == 6:
        state = state[:4] if rng.random() < 0.5 else state[1:]
        lab = "ndarray.state-len"
    else:
        v = rng.choice([(1,), (2**40,), (0, 0), ("x",)])
        args = (args[0], v, args[2])
        lab = "ndarray.reconstruct-args=%r" % (v,)
    return (f, args, tuple(state)), lab


def mutate_scalar(rng, rv):
    f, (dt, data) = rv[0], rv[1]
    k = rng.randrange(3)
    if k == 0:
        v = rng.choice([data[:-1], data + b"\x00", b"", data * 2])
        return (f, (dt, v)), "scalar.bytes-length"
    if k == 1:
        return (f, (np.dtype("O"), bytes(8))), "scalar.object-from-bytes"
    return (f, (dt,)), "scalar.args"


class ReduceProxy:
    """Pickles as the given reduce value."""

    def __init__(self, rv):
        self.rv = rv

    def __reduce__(self):
        return self.rv


class ReducePickler(pickle.Pickler):
    """The C pickler, with numpy objects' reduce values mutated at chosen positions (the
    `targets`: indices in the order the objects are met). With no targets it writes what
    pickle.dumps writes."""

    def __init__(self, f, protocol, rng, targets=(), count_only=False):
        super().__init__(f, protocol=protocol)
        self.rng, self.targets, self.labels, self.seen = rng, set(targets), [], 0
        self.proto = protocol
        self.arrays = {}

    def reducer_override(self, obj):
        t = type(obj)
        kind = None
        if isinstance(obj, np.dtype) and t.__module__.startswith("numpy"):
            kind = "dtype"
        elif t is np.ndarray:
            kind = "ndarray"
        elif isinstance(obj, np.generic):
            kind = "scalar"
        if kind is None:
            return NotImplemented
        i = self.seen
        self.seen += 1
        if i not in self.targets:
            return NotImplemented
        rv = obj.__reduce_ex__(self.proto) if kind == "ndarray" else obj.__reduce__()
        try:
            if kind == "dtype" and len(rv) == 3 and isinstance(rv[2], tuple):
                rv, lab = mutate_dtype_state(self.rng, rv)
            elif kind == "ndarray" and len(rv) == 3 and isinstance(rv[2], tuple):
                rv, lab = mutate_array_state(self.rng, rv, obj)
            elif kind == "scalar" and len(rv) == 2 and len(rv[1]) == 2:
                rv, lab = mutate_scalar(self.rng, rv)
            else:
                return NotImplemented
        except (IndexError, TypeError, ValueError):
            return NotImplemented
        self.labels.append(lab)
        return rv


def dumps_mutated(rng, obj, protocol, n_mut):
    """pickle.dumps(obj) by the real pickler, with up to n_mut numpy objects' reduce values
    mutated. Returns (bytes, labels)."""
    counter = ReducePickler(io.BytesIO(), protocol, rng)
    counter.dump(obj)
    total = counter.seen
    targets = rng.sample(range(total), min(n_mut, total)) if total else []
    buf = io.BytesIO()
    p = ReducePickler(buf, protocol, rng, targets)
    p.dump(obj)
    return buf.getvalue(), p.labels


# ---------------------------------------------------------------- npy

DESCR_SPELLINGS = {
    "|O": ["'|O'", "'O'", "'object'", "'O8'", "'|O8'", "'=O'", "'object_'", "('|O', ())",
           "[('f0', '|O')]"],
    "<f8": ["'<f8'", "'float64'", "'f8'", "'d'", "'=f8'", "'<d'", "'double'"],
    "<i8": ["'<i8'", "'int64'", "'i8'", "'l'", "'q'", "'=i8'"],
    "|b1": ["'|b1'", "'?'", "'bool'", "'b1'"],
}


def npy_bytes(arr, pickled=None, descr=None, version=None, key_order=None, spacing=False,
              fortran=None, shape=None):
    """An npy file as np.save writes it, each header part replaceable: `descr` as text,
    `version` 1-3, the key order, extra spaces, the fortran flag and shape text."""
    if pickled is None and descr is None and version is None and key_order is None \
            and not spacing and fortran is None and shape is None:
        b = io.BytesIO()
        np.save(b, arr, allow_pickle=True)
        return b.getvalue()
    d = np.lib.format.header_data_from_array_1_0(arr)
    parts = {
        "descr": descr if descr is not None else repr(np.lib.format.dtype_to_descr(arr.dtype)),
        "fortran_order": fortran if fortran is not None else repr(d["fortran_order"]),
        "shape": shape if shape is not None else repr(d["shape"]),
    }
    keys = key_order or ["descr", "fortran_order", "shape"]
    sp = "  " if spacing else " "
    text = "{" + ("," + sp).join("'%s':%s%s" % (k, sp, parts[k]) for k in keys) + ", }"
    version = version or (1 if len(text) < 65000 else 2)
    hlen_size = 2 if version == 1 else 4
    pad = 64 - (6 + 2 + hlen_size + len(text) + 1) % 64
    text = text + " " * (pad % 64) + "\n"
    raw = text.encode("latin1" if version < 3 else "utf8")
    head = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H" if version == 1 else "<I",
                                                            len(raw)) + raw
    if pickled is not None:
        body = pickled
    elif arr.dtype.hasobject:
        body = pickle.dumps(arr, protocol=3)
    else:
        body = arr.tobytes("F" if d["fortran_order"] else "C")
    return head + body


def numpy_npy_case(rng):
    for _ in range(20):
        try:
            return _numpy_npy_case(rng)
        except ValueError:  # a dtype np.save cannot describe (overlapping fields)
            continue
    raise RuntimeError("no npy case")


def _numpy_npy_case(rng):
    arr = sample_array(rng, object_bias=0.5)
    muts = []
    kw = {}
    pickled = None
    family = rng.choices(["reduce", "header", "inject", "pickle", "none"], [5, 3, 1.5, 1.5, 1])[0]
    if arr.dtype.hasobject:
        proto = rng.choice([2, 3, 4, 5]) if rng.random() < 0.3 else 3
        if proto != 3:
            muts.append("writer.objpickle-protocol=%d" % proto)
        pickled = pickle.dumps(arr, protocol=proto)
        if family == "reduce":
            pickled, labs = dumps_mutated(rng, arr, proto, 1)
            muts += labs
        elif family == "inject":
            pickled, lab = inject_payload(rng, pickled)
            muts.append(lab)
        elif family == "pickle":
            pickled, labs = mutate_pickle(rng, pickled)
            muts += labs
    if family == "header" or (not arr.dtype.hasobject and family != "none"):
        what = rng.randrange(5)
        if what == 0:
            base = arr.dtype.str if arr.dtype.names is None else None
            key = "|O" if arr.dtype.hasobject and arr.dtype.names is None else base
            if key in DESCR_SPELLINGS and rng.random() < 0.6:
                kw["descr"] = rng.choice(DESCR_SPELLINGS[key])
                muts.append("npy.descr=%s" % kw["descr"])
            else:
                # an object descr over a non-object body, or the other way round
                kw["descr"] = rng.choice(DESCR_SPELLINGS["|O"] + DESCR_SPELLINGS["<f8"])
                muts.append("npy.descr-swap=%s" % kw["descr"])
        elif what == 1:
            kw["version"] = rng.choice([1, 2, 3])
            muts.append("npy.version=%d" % kw["version"])
        elif what == 2:
            kw["key_order"] = rng.sample(["descr", "fortran_order", "shape"], 3)
            kw["spacing"] = rng.random() < 0.5
            muts.append("npy.keys")
        elif what == 3:
            kw["fortran"] = rng.choice(["True", "False", "1", "0", "None"])
            muts.append("npy.fortran=%s" % kw["fortran"])
        else:
            n = arr.size
            kw["shape"] = rng.choice(["(%d,)" % n, "(%d, )" % n, "[%d]" % n, "(%d,1)" % n,
                                      "(%d,)" % (n + 1), "()", "(0,)", "(%d, 2)" % n])
            muts.append("npy.shape=%s" % kw["shape"])
        descr = kw.get("descr", "")
        if "O" in descr.upper() and "object" in descr or "O'" in descr or "O8" in descr:
            if not arr.dtype.hasobject:
                # the header says objects: give numpy a pickle to read, with a payload in it
                pickled = pickle.dumps(np.array([1, "a"], dtype=object), protocol=3)
                pickled, lab = inject_payload(rng, pickled)
                muts.append("payload=" + lab)
    data = npy_bytes(arr, pickled=pickled, **kw)
    return Case("numpy", "npy", data, ".npy", ["scan"], "numpy", muts)


def plain_npy(rng):
    for _ in range(20):
        try:
            return npy_bytes(sample_array(rng))
        except ValueError:
            continue
    return npy_bytes(np.arange(3))


def numpy_npz_case(rng):
    """An npz of 1-3 members: one member's npy mutated as numpy_npy_case mutates it, or the
    zip's entries (names, methods, an extra member), not both."""
    members = [("a%d.npy" % i, plain_npy(rng)) for i in range(rng.randrange(1, 4))]
    muts = []
    method = zipfile.ZIP_DEFLATED if rng.random() < 0.3 else zipfile.ZIP_STORED
    k = rng.random()
    if k < 0.7:
        j = rng.randrange(len(members))
        c = numpy_npy_case(rng)
        members[j] = (members[j][0], c.data)
        muts += c.muts
    elif k < 0.8:
        j = rng.randrange(len(members))
        new = rng.choice(["a%d" % j, "dir/a%d.npy" % j, "a%d.NPY" % j, "a%d.npy.txt" % j,
                          members[0][0]])
        members[j] = (new, members[j][1])
        muts.append("npz.name=%s" % new)
    elif k < 0.9:
        members.append(("extra.bin", b"\x80\x02" + rng.choice([b"N.", b"cos\nsystem\n."])))
        muts.append("npz.extra-member")
    else:
        method = rng.choice([zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
        muts.append("npz.method=%d" % method)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       compress_type=method)
    return Case("numpy", "npz", buf.getvalue(), ".npz", ["scan"], "npz", muts)


def numpy_case(rng):
    return numpy_npy_case(rng) if rng.random() < 0.65 else numpy_npz_case(rng)


# ---------------------------------------------------------------- pickle-numpy

def pickle_numpy_case(rng):
    k = rng.random()
    if k < 0.55:
        obj = sample_array(rng, object_bias=0.35)
        if rng.random() < 0.3:
            obj = {"a": obj, "b": [sample_array(rng)], "n": 3}
    elif k < 0.8:
        obj = rng.choice(sample_dtypes())
        if rng.random() < 0.3:
            obj = [obj, rng.choice(sample_dtypes())]
    else:
        obj = rng.choice([np.float64(1.5), np.int8(-3), np.uint64(2**63), np.complex64(1j),
                          np.bool_(True), np.datetime64("2020-01-01"), np.str_("ab"),
                          np.bytes_(b"xy"), np.float16(0.5), np.longdouble(2.5),
                          np.zeros(1, dtype=[("a", "<i4"), ("b", "S2")])[0],
                          np.timedelta64(5, "s")])
    proto = rng.randrange(0, 6)
    muts = []
    family = rng.choices(["reduce", "inject", "pickle"], [6, 1.5, 2])[0]
    data = pickle.dumps(obj, protocol=proto)
    if family == "reduce":
        data, labs = dumps_mutated(rng, obj, proto, 1)
        muts += labs
    elif family == "inject":
        data, lab = inject_payload(rng, data)
        muts.append(lab)
    else:
        data, labs = mutate_pickle(rng, data)
        muts += labs
    return Case("pickle-numpy", "pickle-p%d" % proto, data, ".pkl",
                ["check", "--policy", "numpy"], "pickle", muts)
