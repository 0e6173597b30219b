#!/usr/bin/env python3
"""What the real loaders do with the variants picklewarden refuses (not run by cargo test).

For each hostile pickle of tests/corpus/numpy/hostile.tsv, and each hostile npy, npz or joblib
file of tests/corpus/models/hostile made by tests/python/numpy_models.py, this loads it with
the real loader in a child process (`pickle.loads` then `repr`, `numpy.load(allow_pickle=True)`
or `joblib.load`) and prints one line: the process killed by a signal (SIGSEGV: numpy read an
attacker's bytes as pointers), an exception, or what it loaded; and for the joblib files, a
marker a desynchronised read would run (`builtins.print('DESYNC ...')`: joblib read bytes as
opcodes that picklewarden would have checked as data, or the other way round).

Usage: /work/venv-loaders/bin/python tests/python/numpy_prove.py
Without numpy (or joblib) it says SKIPPED and exits 0.
"""

import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "corpus")

CHILD = r"""
import sys, pickle, io
kind, path = sys.argv[1], sys.argv[2]
data = open(path, 'rb').read()
if kind == 'pickle':
    data = bytes.fromhex(data.decode())
    obj = pickle.loads(data)
elif kind == 'npy':
    import numpy
    obj = numpy.load(io.BytesIO(data), allow_pickle=True)
    if hasattr(obj, 'files'):
        obj = {k: obj[k] for k in obj.files}
else:
    import joblib
    obj = joblib.load(io.BytesIO(data))
text = repr(obj)
print('loaded: ' + text[:100].replace('\n', ' '))
"""


def run(kind, path):
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, kind, path], capture_output=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return "hung (killed after 60 s)"
    out = (p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")).strip()
    if p.returncode < 0:
        return f"KILLED by {signal.Signals(-p.returncode).name}" + (
            f" after: {out.splitlines()[0][:80]}" if out else "")
    lines = [l for l in out.splitlines() if l.strip()]
    desync = [l for l in lines if "DESYNC" in l]
    last = lines[-1] if lines else ""
    return ("; ".join(desync) + " | " if desync else "") + last[:160]


def main():
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("SKIPPED: numpy is not installed in this Python")
        return
    table = os.path.join(CORPUS, "numpy", "hostile.tsv")
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"numpy_prove_{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    with open(table) as f:
        next(f)
        for line in f:
            name, *_, hexdata = line.rstrip("\n").split("\t")
            path = os.path.join(tmp, name + ".hex")
            with open(path, "w") as h:
                h.write(hexdata)
            print(f"{name:36} pickle.loads: {run('pickle', path)}")
    with open(os.path.join(CORPUS, "models", "MANIFEST.tsv")) as f:
        rows = [l.split("\t") for l in f.read().splitlines()[1:]]
    for rel, fmt, verdict, kind, _desc in rows:
        name = rel.split("/")[-1]
        if not rel.startswith("hostile/") or not name.startswith(("np_", "jl_")):
            continue
        loader = "joblib" if fmt == "joblib" else "npy"
        if loader == "joblib":
            try:
                import joblib  # noqa: F401
            except ImportError:
                print(f"{rel:50} SKIPPED: joblib is not installed")
                continue
        path = os.path.join(CORPUS, "models", rel)
        shown = {"npy": "numpy.load", "joblib": "joblib.load"}[loader]
        print(f"{rel:50} ({kind}) {shown}: {run(loader, path)}")


if __name__ == "__main__":
    main()
