#!/usr/bin/env python3
"""Write the model-file corpus: tests/corpus/models/{good,hostile}/* + MANIFEST.tsv.

Real files made by real torch, numpy and joblib (run it in a venv that has them; CI does not:
the files are committed). Each file is small (a few KiB).

MANIFEST.tsv: a header line, then one tab-separated line per file:

    file  format  verdict  kind  description

- ``format``: what `picklewarden scan` must detect from the content (never the name):
  ``torch-zip``, ``torch-legacy``, ``torch-tar``, ``torchscript``, ``npy``, ``npz``, ``joblib``, ``pickle``;
- ``verdict``: ``clean``, ``refused`` or ``incomplete``;
- ``kind``: for ``refused``, the refusal kind (``ErrorKind::name()`` or a container kind such as
  ``storage_size_mismatch``); ``-`` otherwise;
- ``description``: one line.

The output is deterministic for one set of library versions (the script re-runs itself with
PYTHONHASHSEED=0 so that sets pickle in one order), except the legacy-format files, whose
storage keys torch takes from memory addresses (`str(storage._cdata)`).
The folder belongs to this script: stale files it no longer makes are removed.

Usage: /work/models-venv/bin/python tests/python/gen_models.py [OUTDIR]
(with lz4 importable, and JOBLIB_OLD naming a folder holding joblib 1.1.1: see
tests/python/numpy_models.py, which also rewrites only its own files when run alone)
"""

import io
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

import pickle
import pickletools
import zipfile
from collections import OrderedDict

import joblib
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_models  # noqa: E402
import torch_tar  # noqa: E402
import zip_quirks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "corpus", "models")

torch.manual_seed(0)
np.random.seed(0)

MANIFEST = []


class RunsCode:
    """Pickles as `posix.system('echo pwned')` (os.system's real module on Linux)."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


class RunsEval:
    def __reduce__(self):
        return (eval, ("print('pwned')",))


def entry(folder, name, fmt, verdict, kind, description):
    MANIFEST.append((f"{folder}/{name}", fmt, verdict, kind, description))


def out_path(root, folder, name):
    d = os.path.join(root, folder)
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, name)


def torch_save(root, folder, name, obj, fmt, verdict, kind, description, legacy=False):
    p = out_path(root, folder, name)
    if legacy:
        torch.save(obj, p, _use_new_zipfile_serialization=False)
    else:
        torch.save(obj, p)
    entry(folder, name, fmt, verdict, kind, description)
    return p


def rewrite_zip(src, dst, change):
    """Copies the zip at `src` to `dst`, each entry through `change(name, data)`, which returns
    a list of (name, data) to write in its place."""
    with zipfile.ZipFile(src) as zin:
        items = [(i.filename, zin.read(i.filename)) for i in zin.infolist()]
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for name, data in items:
            for n, d in change(name, data):
                info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
                zout.writestr(info, d)


def small_model():
    return torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2)
    )


DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64, torch.complex128,
]


def all_dtypes():
    out = OrderedDict()
    for dt in DTYPES:
        t = torch.arange(6).reshape(2, 3)
        if dt is torch.bool:
            t = t % 2 == 0
        out[str(dt).replace("torch.", "")] = t.to(dt)
    for dt in ["float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"]:
        if hasattr(torch, dt):
            out[dt] = torch.arange(4).to(torch.float32).to(getattr(torch, dt))
    return out


def torch_canonical(root):
    """A storage written deflated (torch writes every record stored: a deflated storage makes
    torch.load allocate its whole size from a small file), and 64 tensors viewing all of one
    storage (clean, but `convert` would write 64 times the storage: refused past its bound)."""
    good = os.path.join(root, "good", "state_dict.pt")
    with zipfile.ZipFile(good) as zin:
        items = [(i.filename, zin.read(i.filename)) for i in zin.infolist()]
    p = out_path(root, "hostile", "storage_deflated.pt")
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as zout:
        for name, data in items:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if "/data/" in name else zipfile.ZIP_STORED
            zout.writestr(info, data)
    assert torch.load(p, weights_only=True).keys() == torch.load(good, weights_only=True).keys()
    entry("hostile", "storage_deflated.pt", "torch-zip", "refused", "zip_entry_compressed",
          "the storages deflated (torch.load reads them; torch writes them stored)")
    # A legacy file whose storage keys list names its first storage twice (torch.load reads
    # the storage twice, from the bytes after it; _legacy_save writes sorted keys, each once).
    with open(os.path.join(root, "good", "legacy_state_dict.pt"), "rb") as f:
        legacy = f.read()
    f = io.BytesIO(legacy)
    for _ in range(3):
        pickle.load(f)
    # The object pickle, to its STOP (its persistent ids name storages: not loaded here).
    keys_at = f.tell() + max(pos for _, _, pos in pickletools.genops(legacy[f.tell():])) + 1
    f.seek(keys_at)
    keys = pickle.load(f)
    records_at = f.tell()
    numel = int.from_bytes(legacy[records_at:records_at + 8], "little")
    first = legacy[records_at:records_at + 8 + numel * 4]  # float32 storages
    with open(out_path(root, "hostile", "legacy_storage_key_twice.pt"), "wb") as out:
        out.write(legacy[:keys_at] + pickle.dumps([keys[0]] + keys, protocol=2) + first
                  + legacy[records_at:])
    entry("hostile", "legacy_storage_key_twice.pt", "torch-legacy", "refused", "legacy_layout",
          "legacy format: the storage keys list names the first storage twice")
    base = torch.arange(1000, dtype=torch.float32)
    torch_save(root, "good", "views_64_of_one_storage.pt",
               {f"v{i}": base.view(10, 100) for i in range(64)}, "torch-zip", "clean", "-",
               "64 tensors viewing all of one storage (convert refuses: 64 times the storage)")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT)
    for folder in ("good", "hostile"):
        d = os.path.join(root, folder)
        if os.path.isdir(d):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))

    # ---- torch zip: benign ----
    model = small_model()
    torch_save(root, "good", "state_dict.pt", model.state_dict(), "torch-zip", "clean", "-",
               "state dict of Linear+BatchNorm1d+Linear (OrderedDict with _metadata)")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    torch_save(root, "good", "optimizer.pt", opt.state_dict(), "torch-zip", "clean", "-",
               "Adam optimizer state after one step (state, param_groups)")
    torch_save(root, "good", "dtypes.pt", all_dtypes(), "torch-zip", "clean", "-",
               "one tensor of every dtype torch writes")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(), "tail": base.view(-1)[7:],
             "strided": base[::2, ::3]}
    torch_save(root, "good", "views.pt", views, "torch-zip", "clean", "-",
               "views sharing one storage (row, column, transpose, offset, strided)")
    torch_save(root, "good", "scalars_empty.pt",
               {"zero_d": torch.tensor(3.5), "empty": torch.empty(0), "empty2d": torch.empty(3, 0),
                "int0": torch.tensor(7)}, "torch-zip", "clean", "-", "0-d and empty tensors")
    torch_save(root, "good", "parameter.pt",
               {"w": torch.nn.Parameter(torch.ones(2, 2)),
                "frozen": torch.nn.Parameter(torch.zeros(3), requires_grad=False)},
               "torch-zip", "clean", "-", "nn.Parameter with and without requires_grad")
    torch_save(root, "good", "checkpoint_mixed.pt",
               {"epoch": 3, "loss": 0.25, "name": "run-7", "flags": [True, None], "shape": (2, 3),
                "blob": b"\x00\x01", "model": model.state_dict(), "size": torch.Size([2, 3]),
                "device": torch.device("cpu"), "dtype": torch.float16, "tags": {"a", "b"}},
               "torch-zip", "clean", "-", "checkpoint mixing Python data, torch.Size, device, dtype, tensors")
    torch_save(root, "good", "bare_tensor.pt", torch.randn(3, 3), "torch-zip", "clean", "-",
               "a single tensor as the whole file")
    # Misleading names: a torch zip named .npy, a state dict named .pkl.
    torch_save(root, "good", "looks_like_numpy.npy", {"x": torch.ones(2)}, "torch-zip", "clean",
               "-", "a torch zip checkpoint named .npy (format is by content)")

    # ---- legacy torch: benign ----
    torch_save(root, "good", "legacy_state_dict.pt", model.state_dict(), "torch-legacy", "clean",
               "-", "legacy (pre-1.6) format: magic, protocol, sys_info, object, keys, storages",
               legacy=True)
    torch_save(root, "good", "legacy_views.pt", views, "torch-legacy", "clean", "-",
               "legacy format with views sharing a storage", legacy=True)

    # ---- the older torch tar layout (tests/python/torch_tar.py) ----
    torch_tar.make(root, entry, out_path)

    # ---- torch: hostile ----
    torch_save(root, "hostile", "torch_os_system.pt", {"w": torch.ones(2), "x": RunsCode()},
               "torch-zip", "refused", "global_not_allowed", "posix.system REDUCE inside data.pkl")
    torch_save(root, "hostile", "torch_eval_after_tensors.pt",
               {"a": torch.ones(2), "b": [1, 2, RunsEval()], "c": RunsCode()},
               "torch-zip", "refused", "global_not_allowed",
               "builtins.eval and posix.system after tensors (both listed)")
    torch_save(root, "hostile", "legacy_os_system.pt", {"w": torch.ones(2), "x": RunsCode()},
               "torch-legacy", "refused", "global_not_allowed",
               "posix.system inside the legacy format's object pickle", legacy=True)
    good = os.path.join(root, "good", "state_dict.pt")
    evil = pickle.dumps(RunsCode(), protocol=2)

    def swap(name, data):
        return [(name, evil if name.endswith("/data.pkl") else data)]

    rewrite_zip(good, out_path(root, "hostile", "swapped_data_pkl.pt"), swap)
    entry("hostile", "swapped_data_pkl.pt", "torch-zip", "refused", "global_not_allowed",
          "data.pkl swapped for a pickle calling posix.system")

    def shrink(name, data):
        return [(name, data[: len(data) // 2] if "/data/" in name else data)]

    rewrite_zip(good, out_path(root, "hostile", "storage_size_lies.pt"), shrink)
    entry("hostile", "storage_size_lies.pt", "torch-zip", "refused", "storage_size_mismatch",
          "every storage half as long as numel x itemsize says")

    def missing(name, data):
        return [] if name.endswith("/data/0") else [(name, data)]

    rewrite_zip(good, out_path(root, "hostile", "storage_missing.pt"), missing)
    entry("hostile", "storage_missing.pt", "torch-zip", "refused", "storage_missing",
          "a persistent id names a storage key the archive does not hold")

    def dup(name, data):
        if name.endswith("/data.pkl"):
            return [(name, data), (name, evil)]
        return [(name, data)]

    rewrite_zip(good, out_path(root, "hostile", "duplicate_data_pkl.pt"), dup)
    entry("hostile", "duplicate_data_pkl.pt", "torch-zip", "refused", "zip_duplicate_entry",
          "two data.pkl entries (one benign, one hostile): readers differ on which wins")

    def two_tops(name, data):
        return [(name, data)] + ([("other/data.pkl", evil)] if name.endswith("/data.pkl") else [])

    rewrite_zip(good, out_path(root, "hostile", "two_top_folders.pt"), two_tops)
    entry("hostile", "two_top_folders.pt", "torch-zip", "refused", "zip_layout",
          "a second top folder with its own data.pkl")

    # Zip records that disagree (tests/python/zip_quirks.py).
    zip_quirks.make(root, entry, out_path, evil)

    # Canonical or refused, and convert's bound.
    torch_canonical(root)

    # A view whose extent leaves its storage: hand-written data.pkl over a real storage.
    def view_out(name, data):
        if name.endswith("/data.pkl"):
            return [(name, oob_pickle())]
        return [(name, data)]

    rewrite_zip(os.path.join(root, "good", "bare_tensor.pt"),
                out_path(root, "hostile", "view_out_of_storage.pt"), view_out)
    entry("hostile", "view_out_of_storage.pt", "torch-zip", "refused", "view_out_of_storage",
          "a 3x3 float tensor at storage offset 5 in a 9-element storage")

    # Misleading name: a hostile plain pickle named like safetensors.
    with open(out_path(root, "hostile", "model.safetensors"), "wb") as f:
        f.write(evil)
    entry("hostile", "model.safetensors", "pickle", "refused", "global_not_allowed",
          "a plain pickle calling posix.system, named .safetensors")

    # ---- numpy ----
    def npsave(folder, name, arr, verdict, kind, desc, allow_pickle=False):
        p = out_path(root, folder, name)
        with open(p, "wb") as f:
            np.save(f, arr, allow_pickle=allow_pickle)
        entry(folder, name, "npy", verdict, kind, desc)

    npsave("good", "floats.npy", np.arange(12, dtype="<f8").reshape(3, 4), "clean", "-",
           "float64 3x4 array (no pickle)")
    npsave("good", "fortran_int.npy", np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3)),
           "clean", "-", "Fortran-order int32 array")
    npsave("good", "structured.npy", np.zeros(3, dtype=[("a", "<i4"), ("b", "<f4")]), "clean",
           "-", "structured dtype")
    npsave("good", "object_plain.npy", np.array([1, "two", (3.0,), None], dtype=object), "clean",
           "-", "object array of plain Python data (a pickle after the header)", allow_pickle=True)
    npsave("hostile", "object_os_system.npy", np.array([1, RunsCode()], dtype=object), "refused",
           "global_not_allowed", "object array holding posix.system", allow_pickle=True)
    p = out_path(root, "hostile", "npy_short_data.npy")
    buf = io.BytesIO()
    np.save(buf, np.arange(100, dtype="<f8"))
    with open(p, "wb") as f:
        f.write(buf.getvalue()[:-8])
    entry("hostile", "npy_short_data.npy", "npy", "refused", "npy_size_mismatch",
          "array data 8 bytes shorter than the header's shape says")

    p = out_path(root, "good", "arrays.npz")
    np.savez(p, a=np.arange(5), b=np.ones((2, 2), dtype="<f4"))
    entry("good", "arrays.npz", "npz", "clean", "-", "np.savez of two arrays (stored)")
    p = out_path(root, "good", "arrays_compressed.npz")
    np.savez_compressed(p, a=np.arange(50), c=np.array(["x", "yy"]))
    entry("good", "arrays_compressed.npz", "npz", "clean", "-", "np.savez_compressed (deflate)")
    p = out_path(root, "good", "objects.npz")
    np.savez(p, o=np.array([{"k": 1}, [2]], dtype=object), f=np.zeros(2))
    entry("good", "objects.npz", "npz", "clean", "-", "npz with an object array member")
    p = out_path(root, "hostile", "objects_os_system.npz")
    np.savez(p, ok=np.zeros(2), bad=np.array([RunsCode()], dtype=object))
    entry("hostile", "objects_os_system.npz", "npz", "refused", "global_not_allowed",
          "npz whose object-array member calls posix.system")

    # ---- joblib ----
    payload = {"weights": np.arange(10, dtype="<f8"), "ints": np.arange(6, dtype="<i8").reshape(2, 3),
               "meta": {"name": "m", "n": 3}, "objs": np.array([1, "a"], dtype=object)}
    plain = {"name": "m", "layers": [1, 2, 3], "ratio": 0.5}
    comps = [("none", 0), ("zlib", ("zlib", 3)), ("gzip", ("gzip", 3)), ("bz2", ("bz2", 3)),
             ("xz", ("xz", 3)), ("lzma", ("lzma", 3))]
    try:
        import lz4  # noqa: F401
        comps.append(("lz4", ("lz4", 3)))
    except ImportError:
        pass
    for cname, comp in comps:
        name = f"plain.{cname}.joblib"
        joblib.dump(plain, out_path(root, "good", name), compress=comp)
        # Uncompressed and without arrays, a joblib file is a plain pickle.
        entry("good", name, "pickle" if cname == "none" else "joblib", "clean", "-",
              f"joblib dump of Python data, compress={cname}")
        name = f"arrays.{cname}.joblib"
        joblib.dump(payload, out_path(root, "good", name), compress=comp)
        entry("good", name, "joblib", "clean", "-",
              f"joblib dump with numpy arrays written between pickle opcodes, compress={cname}")
        name = f"os_system.{cname}.joblib"
        joblib.dump({"a": np.ones(3), "x": RunsCode()}, out_path(root, "hostile", name), compress=comp)
        entry("hostile", name, "joblib", "refused", "global_not_allowed",
              f"joblib dump calling posix.system after an array, compress={cname}")

    joblib.dump({"o": np.array([1, RunsCode()], dtype=object)},
                out_path(root, "hostile", "object_array_os_system.joblib"))
    entry("hostile", "object_array_os_system.joblib", "joblib", "refused", "global_not_allowed",
          "posix.system inside the pickle joblib writes for an object array")
    buf = io.BytesIO()
    joblib.dump({"w": np.arange(64, dtype="<f8")}, buf)
    with open(out_path(root, "hostile", "array_cut_short.joblib"), "wb") as f:
        f.write(buf.getvalue()[:200])
    entry("hostile", "array_cut_short.joblib", "joblib", "refused", "truncated",
          "a joblib file cut inside its array bytes")

    # ---- npy, npz and joblib of every kind of dtype, and variants their writers never make
    # (tests/python/numpy_models.py) ----
    numpy_models.make(root, entry, out_path)

    # ---- plain pickles ----
    with open(out_path(root, "good", "plain_data.pkl"), "wb") as f:
        pickle.dump({"a": [1, 2.5, "x"], "b": b"\x00"}, f, protocol=4)
    entry("good", "plain_data.pkl", "pickle", "clean", "-", "a plain protocol-4 pickle of Python data")

    with open(os.path.join(root, "MANIFEST.tsv"), "w") as f:
        f.write("file\tformat\tverdict\tkind\tdescription\n")
        for row in MANIFEST:
            f.write("\t".join(row) + "\n")
    print(f"wrote {len(MANIFEST)} files under {root}")


def oob_pickle():
    """data.pkl of one float tensor (3, 3) at storage offset 5 of storage '0' (9 floats)."""

    class Storage:
        pass

    st = Storage()

    class P(pickle.Pickler):
        def persistent_id(self, obj):
            if obj is st:
                return ("storage", torch.FloatStorage, "0", "cpu", 9)
            return None

    class T:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2, (st, 5, (3, 3), (3, 1), False, OrderedDict()))

    buf = io.BytesIO()
    P(buf, protocol=2).dump(T())
    return buf.getvalue()


if __name__ == "__main__":
    main()
