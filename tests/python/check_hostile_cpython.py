#!/usr/bin/env python3
"""Show what CPython's own unpickler does with each hostile corpus file.

For every file listed in tests/corpus/hostile/MANIFEST.tsv, a fresh subprocess loads it with
``pickle.Unpickler`` (the C accelerator, as ``pickle.loads`` uses) and with the pure-Python
``pickle._Unpickler`` (which enforces frame boundaries), both with a ``find_class`` and a
``persistent_load`` that refuse everything, so no global is ever imported and nothing runs.
The child runs under a 512 MiB address-space limit (RLIMIT_AS) and a 5-second timeout.

Output: one block per file: the expected kind from the manifest, then what each unpickler did
(exception type and message, or the loaded value, with how many bytes it consumed), or
``killed/timeout``. This is a sanity check for the manifest, not a test: CPython 3.11 has known
bugs (INT text read with base 0, number text cut at a NUL, frame boundaries unchecked by the C
unpickler, trailing data ignored) where picklewarden deliberately differs.

Usage: python3 tests/python/check_hostile_cpython.py [DIR] [--summary]
"""

import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(HERE, "..", "corpus", "hostile")
MEMORY_LIMIT = 512 * 1024 * 1024
TIMEOUT_S = 5

CHILD = r'''
import io, pickle, reprlib, sys

class Refused(Exception):
    pass

def refuse_class(module, name):
    raise Refused(f"find_class refused {module}.{name}")

def refuse_persid(pid):
    raise Refused(f"persistent_load refused {pid!r}"[:200])

class CRefusing(pickle.Unpickler):
    def find_class(self, module, name):
        refuse_class(module, name)
    def persistent_load(self, pid):
        refuse_persid(pid)

class PyRefusing(pickle._Unpickler):
    def find_class(self, module, name):
        refuse_class(module, name)
    def persistent_load(self, pid):
        refuse_persid(pid)

def show(value):
    r = reprlib.Repr()
    r.maxlevel = 4
    r.maxstring = r.maxother = r.maxlong = 60
    try:
        return r.repr(value)
    except BaseException as e:  # huge ints, deep values
        return f"<{type(value).__name__}: repr failed: {type(e).__name__}>"

data = open(sys.argv[1], "rb").read()
for label, cls in (("C ", CRefusing), ("py", PyRefusing)):
    f = io.BytesIO(data)
    try:
        value = cls(f).load()
    except BaseException as e:
        msg = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(e))
        if len(msg) > 160:
            msg = msg[:160] + "..."
        print(f"{label}: {type(e).__name__}: {msg}", flush=True)
    else:
        print(f"{label}: LOADED {show(value)} (consumed {f.tell()} of {len(data)} bytes)",
              flush=True)
'''


def limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_one(path):
    try:
        proc = subprocess.run(
            [sys.executable, "-I", "-c", CHILD, path],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S,
            preexec_fn=limit_memory, text=True,
        )
    except subprocess.TimeoutExpired:
        return ["killed/timeout"]
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        lines.append(f"killed/exit status {proc.returncode} {tail[0][:160]}")
    return lines


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    summary = "--summary" in argv
    folder = os.path.abspath(args[0] if args else DEFAULT_DIR)
    with open(os.path.join(folder, "MANIFEST.tsv"), encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    for file, kind, limit, policy, limits, desc in rows:
        expected = kind if limit == "-" else f"{kind}({limit})"
        extra = "" if (policy == "data" and limits == "-") else f" [policy={policy} limits={limits}]"
        results = run_one(os.path.join(folder, file))
        if summary:
            print(f"{file}\t{expected}\t{' | '.join(results)}")
        else:
            print(f"{file}: expect {expected}{extra}")
            print(f"    {desc}")
            for r in results:
                print(f"    {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
