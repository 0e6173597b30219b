#!/usr/bin/env python3
"""Write tests/corpus/models/convert/: checkpoints of the legacy format and the older tar
layout for `picklewarden convert`, and EXPECTED.tsv, what torch itself loads from them and from
the torch checkpoints of tests/corpus/models/good (zip, legacy and tar).

Made by the real writers: `torch.save(..., _use_new_zipfile_serialization=False)` for the
legacy format, tests/python/torch_tar.py (real pickles, storages by torch's own
`UntypedStorage._write_file`) for the tar layout, which torch 2.15 no longer writes.

EXPECTED.tsv: a header line, then one line per tensor:

    file  tensor  dtype  shape  hex

- ``tensor``: its key path, keys joined with ``.`` (as `convert` names it);
- ``dtype``: torch's name (``float32``, ``bfloat16``...); ``shape``: sizes joined with ``,``;
- ``hex``: its elements' bytes, row-major, as `torch.load` gives them: with
  ``weights_only=True``, except for the tar layout, which torch loads only with
  ``weights_only=False`` (these files are this script's own).

cli/tests/models.rs converts each file and compares every tensor with its lines, without torch.

    /work/venv-torch/bin/python tests/python/gen_convert.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_tar  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "corpus", "models")
OUT = os.path.join(MODELS, "convert")

# The dtypes safetensors names (as `convert` writes them) that each layout can store.
LEGACY = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]
# (The tar layout pickles each tensor's legacy type, torch.FloatTensor...: complex has none.)
TAR = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16,
       torch.int32, torch.int64, torch.uint8, torch.bool]


# The torch dtypes safetensors names (src/formats/safetensors.rs `safetensors_dtype`).
SAFETENSORS = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
               "uint64", "uint32", "uint16", "uint8", "bool", "float8_e4m3fn", "float8_e5m2",
               "complex64"}


def sample(dtype):
    t = torch.arange(-3, 9).reshape(3, 4)
    if dtype is torch.bool:
        return t % 3 == 0
    if dtype.is_complex:
        return torch.complex(t.float(), -t.float() / 2).to(dtype)
    if dtype is torch.uint8:
        return (t + 3).to(dtype)
    return (t * 1.25).to(dtype) if dtype.is_floating_point else t.to(dtype)


def flatten(obj, path, out):
    if isinstance(obj, torch.Tensor):
        out.setdefault(path, obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        for i, v in enumerate(obj):
            flatten(v, f"{path}.{i}" if path else str(i), out)


def raw(t):
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    return bytes(t.reshape(-1).view(torch.uint8).tolist())


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))

    # The legacy format: a tensor of each dtype, views sharing one storage, 0-d and empty.
    obj = {str(dt).replace("torch.", ""): sample(dt) for dt in LEGACY}
    base = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    obj["views"] = {"t": base.t(), "col": base[:, 1], "tail": base.view(-1)[13:], "base": base}
    obj["scalar"] = torch.tensor(2.5)
    obj["empty"] = torch.zeros(0, 3)
    torch.save(obj, os.path.join(OUT, "legacy_dtypes.pt"), _use_new_zipfile_serialization=False)

    # The tar layout: a tensor of each dtype, and a storage view.
    obj = {str(dt).replace("torch.", ""): sample(dt) for dt in TAR}
    root = torch.arange(20, dtype=torch.int32)
    tail = root[5:].clone()
    obj["tail"] = tail
    def storage_type_of(t):
        if t.dtype is torch.bfloat16:
            return torch.BFloat16Storage
        return torch_tar._legacy_storage_type(t.dtype)

    p = os.path.join(OUT, "tar_dtypes.pt")
    torch_tar.write(p, obj, storage_type_of=storage_type_of, views=[(tail, root, 5)])
    want = dict(obj)
    want["tail"] = root[5:]
    torch_tar.check_loads(p, want)

    rows = []
    files = [("convert", n) for n in sorted(os.listdir(OUT))]
    good = os.path.join(MODELS, "good")
    for n in sorted(os.listdir(good)):
        # (views_64_of_one_storage.pt: `convert` refuses its output past the bound.)
        if n.endswith(".pt") and not n.startswith("views_64"):
            files.append(("good", n))
    for folder, n in files:
        path = os.path.join(MODELS, folder, n)
        tar = n.startswith("tar_")
        try:
            loaded = torch.load(path, weights_only=not tar)
        except Exception as e:  # not a torch checkpoint convert reads
            print(f"skip {folder}/{n}: {type(e).__name__}")
            continue
        flat = {}
        flatten(loaded, "", flat)
        if any(str(t.dtype).replace("torch.", "") not in SAFETENSORS for t in flat.values()):
            print(f"skip {folder}/{n}: a dtype safetensors has no name for")
            continue
        for k, t in flat.items():
            shape = ",".join(str(s) for s in t.shape)
            rows.append((f"{folder}/{n}", k, str(t.dtype).replace("torch.", ""), shape,
                         raw(t).hex()))
    with open(os.path.join(OUT, "EXPECTED.tsv"), "w") as f:
        f.write("file\ttensor\tdtype\tshape\thex\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    print(f"wrote {len(rows)} tensors of {len(files)} files")


if __name__ == "__main__":
    main()
