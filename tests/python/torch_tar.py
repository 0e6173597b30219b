"""The older torch tar layout (torch before 0.4), written exactly as torch's own reader reads it.

Torch 2.15 can no longer write this layout, but `torch.load(weights_only=False)` still reads it
(`torch/serialization.py`, `_legacy_load` -> `legacy_load`, tried first on any file that is not
a zip and that Python's `tarfile` opens). What that reader reads, and so what this writes:

- a tar (`tarfile.PAX_FORMAT`, as torch wrote it) of four regular files, in the order old torch
  added them: `sys_info`, `pickle`, `tensors`, `storages` (the reader never reads `sys_info`);
- `storages`: pickle(number of storages); for each, pickle((key, location, storage_type)) then
  the storage as `UntypedStorage._write_file` writes it (numel as 8 bytes little-endian, then
  numel x element-size bytes); then pickle(storage views: [(target_key, root_key, offset,
  numel)]);
- `tensors`: pickle(number of tensors); for each, pickle((key, storage_key, tensor_type)) then
  ndim (int32 LE), 4 bytes of padding, the sizes and strides (ndim int64 LE each), the storage
  offset (int64 LE);
- `pickle`: the object, whose tensors and storages are persistent ids `str(key)`
  (`deserialized_objects[int(saved_id)]`).

The pickles are made by the real `pickle` module (a `Pickler` with `persistent_id`, as torch's
`_save` had); the storage bytes by torch's own `UntypedStorage._write_file`. Each benign file is
loaded back with `torch.load(weights_only=False)` and its tensors compared with the originals.
"""

import io
import os
import pickle
import struct
import tarfile
import tempfile

import torch

SYS_INFO = dict(protocol_version=1001, little_endian=True,
                type_sizes=dict(short=2, int=4, long=4))


def _storage_bytes(t):
    """numel (8 bytes LE) + the storage's bytes, by torch's own writer (needs a real file)."""
    s = t.untyped_storage()
    with tempfile.TemporaryFile() as f:
        s._write_file(f, True, True, t.element_size())
        f.seek(0)
        return f.read()


def _tensor_meta(t, offset=None):
    n = t.dim()
    return (struct.pack("<i", n) + b"\0" * 4 + struct.pack(f"<{n}q", *t.size())
            + struct.pack(f"<{n}q", *t.stride())
            + struct.pack("<q", t.storage_offset() if offset is None else offset))


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 1500000000
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write(path, obj, *, storage_type_of=None, views=(), extra_in_storages=None,
          meta_override=None):
    """Writes `obj` (tensors anywhere inside plain data) in the tar layout.

    - ``views``: (tensor, root_tensor, offset) triples: that tensor's storage is written as a
      storage view of the root tensor's storage (a `storage_views` row), not as its own storage;
    - ``storage_type_of``: replaces the storage type object pickled for each storage (hostile);
    - ``meta_override``: {tensor key: bytes} replacing a tensor's metadata record (hostile).
    Returns the {key: tensor} of the tensors written.
    """
    tensors = {}   # key -> tensor, in order of first use
    storages = {}  # storage data_ptr -> (key, tensor owning it)
    view_of = {id(t): (root, off) for t, root, off in views}
    next_key = [1]

    def storage_key(t):
        ptr = t.untyped_storage().data_ptr()
        if id(t) in view_of:
            ptr = ("view", id(t))
        if ptr not in storages:
            storages[ptr] = (next_key[0], t)
            next_key[0] += 1
        return storages[ptr][0]

    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, torch.Tensor):
                for k, t in tensors.items():
                    if t is o:
                        return str(k)
                k = 1000 + len(tensors)
                tensors[k] = o
                return str(k)
            return None

    buf = io.BytesIO()
    P(buf, protocol=2).dump(obj)
    object_pickle = buf.getvalue()

    tens = io.BytesIO()
    pickle.dump(len(tensors), tens, protocol=2)
    for k, t in tensors.items():
        if id(t) in view_of:
            root, off = view_of[id(t)]
            sk = storage_key(t)
            offset = 0
            storage_key(root)
        else:
            sk = storage_key(t)
            offset = None
        # The tensor's legacy type object (torch.FloatTensor...), as type(tensor) was then.
        ttype = getattr(torch, t.type().rsplit(".", 1)[-1])
        pickle.dump((k, sk, ttype), tens, protocol=2)
        tens.write((meta_override or {}).get(k) or _tensor_meta(t, offset))

    st = io.BytesIO()
    roots = [(k, t) for p, (k, t) in storages.items() if not (isinstance(p, tuple) and p[0] == "view")]
    pickle.dump(len(roots), st, protocol=2)
    for k, t in roots:
        stype = storage_type_of(t) if storage_type_of else _legacy_storage_type(t.dtype)
        pickle.dump((k, "cpu", stype), st, protocol=2)
        st.write(_storage_bytes(t))
    view_rows = []
    for t, root, off in views:
        vk = storages[("view", id(t))][0]
        rk = storages[root.untyped_storage().data_ptr()][0]
        view_rows.append((vk, rk, off, t.numel()))
    pickle.dump(view_rows, st, protocol=2)
    if extra_in_storages is not None:
        st.write(extra_in_storages)

    with tarfile.open(path, "w:", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "sys_info", pickle.dumps(SYS_INFO, protocol=2))
        _add(tar, "pickle", object_pickle)
        _add(tar, "tensors", tens.getvalue())
        _add(tar, "storages", st.getvalue())
    return tensors


def _legacy_storage_type(dtype):
    return {
        torch.float32: torch.FloatStorage, torch.float64: torch.DoubleStorage,
        torch.float16: torch.HalfStorage, torch.int64: torch.LongStorage,
        torch.int32: torch.IntStorage, torch.int16: torch.ShortStorage,
        torch.int8: torch.CharStorage, torch.uint8: torch.ByteStorage,
        torch.bool: torch.BoolStorage,
    }[dtype]


def check_loads(path, want):
    """torch.load(weights_only=False) reads the file back; every tensor of `want` (a flat dict)
    equals the loaded one (dtype, shape, values)."""
    got = torch.load(path, weights_only=False)
    assert set(got) == set(want), (got.keys(), want.keys())
    for k, t in want.items():
        g = got[k]
        assert g.dtype == t.dtype and g.shape == t.shape and torch.equal(g, t), (path, k, g, t)
    return got


def make(root, entry, out_path):
    """The torch-tar fixtures: benign ones loaded back by torch.load, hostile variants."""
    torch.manual_seed(1)
    lin = torch.nn.Linear(4, 3)
    sd = {"weight": lin.weight.detach().clone(), "bias": lin.bias.detach().clone(),
          "steps": torch.tensor([3, 4], dtype=torch.int64),
          "mask": torch.tensor([True, False, True])}
    p = out_path(root, "good", "tar_state_dict.pt")
    write(p, sd)
    check_loads(p, sd)
    entry("good", "tar_state_dict.pt", "torch-tar", "clean", "-",
          "older torch tar layout (sys_info, pickle, tensors, storages); torch.load reads it back")

    base = torch.arange(24, dtype=torch.float32)
    grid = base.view(4, 6)
    col = grid[:, 2]
    tail = base[7:].clone()  # written as a storage view of base's storage at offset 7
    p = out_path(root, "good", "tar_views.pt")
    write(p, {"grid": grid, "col": col, "tail": tail}, views=[(tail, base, 7)])
    got = check_loads(p, {"grid": grid, "col": col, "tail": base[7:]})
    assert got["grid"].untyped_storage().data_ptr() == got["col"].untyped_storage().data_ptr()
    entry("good", "tar_views.pt", "torch-tar", "clean", "-",
          "tar layout: tensors sharing a storage, and a storage view (storage_views row)")

    class RunsCode:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    p = out_path(root, "hostile", "tar_os_system.pt")
    write(p, {"w": torch.ones(2), "x": RunsCode()})
    entry("hostile", "tar_os_system.pt", "torch-tar", "refused", "global_not_allowed",
          "tar layout: posix.system inside the `pickle` entry")
    p = out_path(root, "hostile", "tar_storage_type_os_system.pt")
    write(p, {"w": torch.ones(2)}, storage_type_of=lambda t: RunsCode())
    entry("hostile", "tar_storage_type_os_system.pt", "torch-tar", "refused",
          "global_not_allowed",
          "tar layout: posix.system as the storage type in the `storages` entry (plain pickle.load)")
    w = torch.ones(3, 3)
    bad = struct.pack("<i", 2) + b"\0" * 4 + struct.pack("<2q", 3, 3) + struct.pack("<2q", 3, 1) \
        + struct.pack("<q", 5)
    p = out_path(root, "hostile", "tar_view_out_of_storage.pt")
    write(p, {"w": w}, meta_override={1000: bad})
    entry("hostile", "tar_view_out_of_storage.pt", "torch-tar", "refused", "view_out_of_storage",
          "tar layout: a 3x3 tensor at storage offset 5 of a 9-element storage")
