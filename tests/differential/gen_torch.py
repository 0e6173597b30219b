"""torch: checkpoints written by torch.save (zip, and legacy with
`_use_new_zipfile_serialization=False`) and by tests/python/torch_tar.py (the tar layout, as
torch's `legacy_load` reads it), then structure-aware mutations of data.pkl (the persistent
ids' numel and storage type, the tensors' storage offset, sizes and strides), of the zip
(storage entries deflated, names, order) and pickle-level mutations; and the cost families:
`OrderedDict` with one memoized N-key BUILD state N times, `Counter` of N ints that collide in
CPython's hash (k * (2**61 - 1)), N views of one storage (what `convert` writes), and a
deflated storage of N MiB (what torch.load allocates). Reader `torch`: torch.load with
weights_only True and False vs `scan`, and `convert`'s output size. Local only (torch is too
big for CI).
"""
import io
import os
import pickle
import sys
import tempfile
import zipfile
from collections import OrderedDict

import torch

from common import Case, HERE, enc_int, inject_payload, mutate_pickle, read_ops, enc_get

torch.set_num_threads(1)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import torch_tar  # noqa: E402  (tests/python/torch_tar.py)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128]
for _n in ["float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"]:
    if hasattr(torch, _n):
        DTYPES.append(getattr(torch, _n))
STORAGE_TYPES = ["FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "ByteStorage",
                 "CharStorage", "ShortStorage", "IntStorage", "LongStorage", "BoolStorage",
                 "ComplexFloatStorage", "ComplexDoubleStorage"]


def tensor(rng, dt):
    shape = rng.choice([(), (0,), (3,), (2, 3), (4, 1, 2)])
    t = torch.arange(max(1, int(torch.tensor(shape).prod().item()) if shape else 1))
    t = t[: int(torch.tensor(shape).prod().item())] if shape else t[0]
    t = t.reshape(shape)
    if dt is torch.bool:
        return t % 2 == 0
    return t.to(torch.float32).to(dt)


def sample_obj(rng):
    k = rng.randrange(6)
    if k == 0:
        m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
        return m.state_dict()
    if k == 1:
        return OrderedDict((str(dt).replace("torch.", ""), tensor(rng, dt)) for dt in
                           rng.sample(DTYPES, 4))
    if k == 2:
        base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        return {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(),
                "tail": base.view(-1)[7:], "strided": base[::2, ::3]}
    if k == 3:
        return {"p": torch.nn.Parameter(torch.ones(2)), "n": 3, "s": "x", "l": [1.5, None],
                "size": torch.Size([2, 3]), "dtype": torch.float16}
    if k == 4:
        return [tensor(rng, rng.choice(DTYPES)) for _ in range(3)]
    return tensor(rng, rng.choice(DTYPES))


def save(obj, layout):
    buf = io.BytesIO()
    if layout == "zip":
        torch.save(obj, buf)
        return buf.getvalue()
    if layout == "legacy":
        torch.save(obj, buf, _use_new_zipfile_serialization=False)
        return buf.getvalue()
    fd, path = tempfile.mkstemp(suffix=".pt")
    os.close(fd)
    try:
        torch_tar.write(path, obj)
        return open(path, "rb").read()
    finally:
        os.unlink(path)


def zip_entries(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i.filename), i.compress_type) for i in z.infolist()]


def write_zip(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, method in entries:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       compress_type=method)
    return buf.getvalue()


# ---------------------------------------------------------------- data.pkl mutations

INT_OPS = ("BININT1", "BININT2", "BININT", "LONG1")


def persid_fields(ops):
    """For each BINPERSID: (index of its numel op, index of its storage-type GLOBAL op)."""
    out = []
    for i, o in enumerate(ops):
        if o.name != "BINPERSID":
            continue
        j = i - 1
        while j > 0 and ops[j].name in ("BINPUT", "LONG_BINPUT", "MEMOIZE", "PUT"):
            j -= 1
        if ops[j].name != "TUPLE":
            continue
        k = j - 1
        numel = glob = None
        while k >= 0 and ops[k].name != "MARK":
            if numel is None and ops[k].name in INT_OPS:
                numel = k
            if ops[k].name == "GLOBAL":
                glob = k
            k -= 1
        out.append((i, numel, glob))
    return out


def mutate_data_pkl(rng, pkl):
    ops = read_ops(pkl)
    fields = persid_fields(ops)
    if not fields:
        return None
    i, numel, glob = rng.choice(fields)
    k = rng.randrange(4)
    repl = {}
    if k == 0 and numel is not None:
        v = rng.choice([0, 1, ops[numel].arg + 1, ops[numel].arg * 2, 2**31, 2**62,
                        max(ops[numel].arg - 1, 0)])
        repl[numel] = enc_int(v)
        lab = "storage.numel"
    elif k == 1 and glob is not None:
        st = rng.choice(STORAGE_TYPES + ["UntypedStorage", "QInt8Storage"])
        mod = "torch.storage" if st == "UntypedStorage" else "torch"
        repl[glob] = b"c%s\n%s\n" % (mod.encode(), st.encode())
        lab = "storage.dtype=%s" % st
    else:
        # the k-th int after the persistent id: storage offset, sizes, strides
        after = [j for j in range(i + 1, min(i + 14, len(ops))) if ops[j].name in INT_OPS]
        if not after:
            return None
        j = rng.choice(after)
        v = rng.choice([0, 1, -1, ops[j].arg + 1, ops[j].arg * 4, 2**31, 2**40])
        repl[j] = enc_int(v)
        lab = "tensor.%s" % ("offset" if j == after[0] else "size-stride")
    out = b"".join(repl.get(n, o.raw) for n, o in enumerate(ops))
    return out, lab


def torch_case(rng):
    layout = rng.choices(["zip", "legacy", "tar"], weights=[6, 2, 1])[0]
    obj = sample_obj(rng)
    data = save(obj, layout)
    muts = []
    if layout == "zip":
        entries = zip_entries(data)
        r = rng.random()
        pi = next(n for n, e in enumerate(entries) if e[0].endswith("/data.pkl"))
        name, pkl, method = entries[pi]
        if r < 0.35:
            got = mutate_data_pkl(rng, pkl)
            if got:
                pkl, lab = got
                muts.append(lab)
        elif r < 0.5:
            pkl, lab = inject_payload(rng, pkl)
            muts.append(lab)
        elif r < 0.7:
            pkl, labs = mutate_pickle(rng, pkl)
            muts += labs
        elif r < 0.8:
            entries = [(n, d, zipfile.ZIP_DEFLATED if "/data/" in n else m)
                       for n, d, m in entries]
            muts.append("zip.storages-deflated")
        elif r < 0.85:
            rng.shuffle(entries)
            muts.append("zip.order")
        elif r < 0.92:
            j = rng.randrange(len(entries))
            n, d, m = entries[j]
            new = rng.choice([n + "0", n.upper(), "./" + n, n.replace("/", "//", 1),
                              n.split("/", 1)[-1], n + "/"])
            entries[j] = (new, d, m)
            muts.append("zip.name")
        else:
            j = rng.randrange(len(entries))
            entries.insert(j, entries[j])
            muts.append("zip.duplicate")
        if muts and muts[0] not in ("zip.order", "zip.name", "zip.duplicate"):
            entries[pi] = (name, pkl, method)
        if muts:
            data = write_zip(entries)
    else:
        if rng.random() < 0.4:
            data, labs = mutate_pickle(rng, data)
            muts += labs
    return Case("torch", "torch-" + layout, data, ".pt", ["scan"], "torch", muts)


# ---------------------------------------------------------------- cost families

class Family:
    def __init__(self, name, n0, n_max, make):
        self.name, self.n0, self.n_max, self._make = name, n0, n_max, make

    def make(self, n):
        return self._make(n)


_EMPTY = None


def with_data_pkl(pkl, extra=()):
    """A torch zip checkpoint (torch.save of {} for the records) whose data.pkl is `pkl`."""
    global _EMPTY
    if _EMPTY is None:
        _EMPTY = zip_entries(save({}, "zip"))
    entries = [(n, pkl if n.endswith("/data.pkl") else d, m) for n, d, m in _EMPTY]
    top = entries[0][0].split("/")[0]
    entries += [(top + "/" + n, d, m) for n, d, m in extra]
    return write_zip(entries)


def ordered_dict_build(n):
    """[d, OrderedDict() BUILD d, ...]: d (n keys) memoized at 0, the class at 1; no POP,
    which torch's weights_only unpickler does not read."""
    out = bytearray(b"\x80\x02](}q\x00(")
    for i in range(n):
        out += b"X" + len(b"k%d" % i).to_bytes(4, "little") + b"k%d" % i + b"K\x00"
    out += b"uccollections\nOrderedDict\nq\x01)R" + enc_get(0) + b"b"
    out += (enc_get(1) + b")R" + enc_get(0) + b"b") * (n - 1)
    out += b"e."
    return Case("torch", "cost", with_data_pkl(bytes(out)), ".pt", ["scan"], "torch",
                ["cost.ordereddict-build"])


def counter_collide(n):
    m = 2**61 - 1
    out = bytearray(b"\x80\x02ccollections\nCounter\n(](")
    for k in range(1, n + 1):
        out += enc_int(k * m)
    out += b"etR."
    return Case("torch", "cost", with_data_pkl(bytes(out)), ".pt", ["scan"], "torch",
                ["cost.counter-collide"])


def views_of_one_storage(n):
    base = torch.zeros(64 * 1024)  # 256 KiB
    return Case("torch", "torch-zip", save({"v%d" % i: base[:] for i in range(n)}, "zip"),
                ".pt", ["scan"], "torch", ["cost.views-one-storage"])


def deflated_storage(mib):
    """One float32 tensor of `mib` MiB of zeros, its storage entry deflated."""
    numel = mib * (1 << 20) // 4
    entries = zip_entries(save({"w": torch.zeros(1)}, "zip"))
    pi = next(n for n, e in enumerate(entries) if e[0].endswith("/data.pkl"))
    ops = read_ops(entries[pi][1])
    i, numel_at, _ = persid_fields(ops)[0]
    after = [j for j in range(i + 1, len(ops)) if ops[j].name in INT_OPS]
    repl = {numel_at: enc_int(numel), after[1]: enc_int(numel)}  # numel; size (offset first)
    pkl = b"".join(repl.get(n, o.raw) for n, o in enumerate(ops))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, method in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            if name.endswith("/data/0"):
                info.compress_type = zipfile.ZIP_DEFLATED
                with z.open(info, "w", force_zip64=True) as f:
                    chunk = bytes(1 << 20)
                    for _ in range(mib):
                        f.write(chunk)
            else:
                z.writestr(info, pkl if name.endswith("/data.pkl") else data)
    return Case("torch", "cost", buf.getvalue(), ".pt", ["scan"], "torch",
                ["cost.deflated-storage"])


VIEWS = Family("cost.views-one-storage", 2, 1 << 10, views_of_one_storage)
VIEWS.output = True  # about convert's output: ends at convert's bound
COST_FAMILIES = [Family("cost.ordereddict-build", 64, 1 << 17, ordered_dict_build),
                 Family("cost.counter-collide", 64, 1 << 17, counter_collide),
                 VIEWS,
                 Family("cost.deflated-storage", 16, 4096, deflated_storage)]
