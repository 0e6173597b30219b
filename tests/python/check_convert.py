#!/usr/bin/env python3
"""`picklewarden convert` against torch: every torch checkpoint of the good model corpus and
of tests/corpus/models/convert (zip, legacy and tar) converted to safetensors, each tensor
compared byte for byte with what `torch.load(weights_only=True)` gives at the same key path
(keys joined with `.`); for the tar layout, which torch reads only with `weights_only=False`,
with that (the files are the repository's own). Needs torch and safetensors:

    /work/models-venv/bin/python tests/python/check_convert.py target/debug/picklewarden
"""

import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "corpus", "models")


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
    return t.detach().contiguous().reshape(-1).view(torch.uint8).tolist()


def main():
    pw = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/picklewarden")
    failures = 0
    paths = [os.path.join(MODELS, folder, n) for folder in ("good", "convert")
             for n in sorted(os.listdir(os.path.join(MODELS, folder))) if n.endswith(".pt")]
    for path in paths:
        name = os.path.relpath(path, MODELS)
        tar = os.path.basename(path).startswith("tar_")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out.safetensors")
            r = subprocess.run([pw, "convert", path, out], capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: not converted: {r.stderr.strip()}")
                continue
            got = load_file(out)
        want = {}
        flatten(torch.load(path, weights_only=not tar), "", want)
        bad = [k for k in got if k not in want or got[k].dtype != want[k].dtype
               or list(got[k].shape) != list(want[k].shape) or raw(got[k]) != raw(want[k])]
        missing = [k for k in want if k not in got]
        if bad or missing:
            failures += 1
            print(f"{name}: WRONG {bad} missing {missing}")
        else:
            print(f"{name}: {len(got)} tensors byte-equal to torch.load(weights_only={not tar})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
