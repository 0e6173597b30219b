#!/usr/bin/env python3
"""picklewarden.loads against pickle.loads and an allowlist pickle.Unpickler, in one process,
on the same files in the same run; prints a markdown table with ratios.

    python3 bench/gen_workloads.py                    # once, from the repository's root
    python python/bench/bench.py [--runs N] [--tiny N] [DIR_OR_FILE ...]

Default files: every *.pkl in target/workloads/ (stream files are read as streams: repeated
Unpickler.load() against picklewarden.loads_stream). Each (tool, file) is timed RUNS times,
the tools interleaved run by run so that a noisy machine slows them alike; the median is
reported. Results are dropped after the clock stops.

CPython's cyclic GC, compared fairly: picklewarden pauses it while it builds a large document
(none of the objects can be garbage before it returns); pickle.loads leaves it on and pays its
passes as it goes (a young-generation pass every 700 containers, and full passes as the
long-lived objects grow, which on the many-objects workloads cost more than the decode). A
pause only defers work: every object made during it is still in the young generation, and the
first allocation after the call pays one pass over all of them. So by default each call is
timed with a gc.collect(0) right after it, inside the clock, which pays that deferred pass for
picklewarden (and the last few hundred objects' pass for pickle.loads): each tool pays the GC
work its call causes. --gc-off times every tool with the GC off and no collection, which
compares the object-building steps alone. `tiny` times pickles of a few hundred
bytes, one call each, N calls in a loop (per-call overhead). Needs picklewarden installed
(`pip install ./python`).

Tools:
  pickle.loads   CPython's C unpickler
  allowlist      a pickle.Unpickler subclass whose find_class allows only what the `data`
                 policy allows (what careful Python code uses today)
  picklewarden   picklewarden.loads (policy "data")
"""

import argparse
import gc
import glob
import io
import os
import pickle
import statistics
import sys
import time

import picklewarden

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))

ALLOWED = {
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
    ("builtins", "complex"), ("builtins", "bytes"),
    ("__builtin__", "set"), ("__builtin__", "frozenset"), ("__builtin__", "bytearray"),
    ("__builtin__", "complex"), ("__builtin__", "bytes"),
    ("_codecs", "encode"),
}


class AllowlistUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError("global %s.%s is not allowed" % (module, name))
        return super().find_class(module, name)


def _stream_loads(data, cls):
    f = io.BytesIO(data)
    u = cls(f)
    out = []
    n = len(data)
    while f.tell() < n:
        out.append(u.load())
    return out


def tools(stream):
    if stream:
        return [
            ("pickle.loads", lambda d: _stream_loads(d, pickle.Unpickler)),
            ("allowlist", lambda d: _stream_loads(d, AllowlistUnpickler)),
            ("picklewarden", picklewarden.loads_stream),
        ]
    return [
        ("pickle.loads", pickle.loads),
        ("allowlist", lambda d: AllowlistUnpickler(io.BytesIO(d)).load()),
        ("picklewarden", picklewarden.loads),
    ]


def time_file(data, stream, runs, gc_off=False):
    times = {name: [] for name, _ in tools(stream)}
    for _ in range(runs):
        for name, fn in tools(stream):
            if gc_off:
                gc.disable()
            t0 = time.perf_counter()
            value = fn(data)
            if not gc_off:
                # The young-generation pass the call leaves due, paid now (see the docstring).
                gc.collect(0)
            t1 = time.perf_counter()
            gc.enable()
            del value
            gc.collect()
            times[name].append(t1 - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def tiny_pickles():
    """A few pickles of a few hundred bytes, as an RPC or cache hands them over."""
    values = {
        "tiny-dict": {"id": 1234, "name": "alice", "tags": ["a", "b"], "ok": True,
                      "score": 0.5},
        "tiny-mitogen-reply": (0, 7, b"x" * 200, {"a": 1}),
        "tiny-list": list(range(50)),
    }
    out = []
    for name, v in values.items():
        for proto in (2, 4):
            out.append(("%s.p%d" % (name, proto), pickle.dumps(v, proto)))
    return out


def time_tiny(data, calls, runs):
    res = {}
    for name, fn in tools(False):
        best = []
        for _ in range(runs):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(data)
            best.append((time.perf_counter() - t0) / calls)
        res[name] = statistics.median(best)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tiny", type=int, default=20000, help="calls per tiny run (0: skip)")
    ap.add_argument("--gc-off", action="store_true",
                    help="time every tool with CPython's cyclic GC off (picklewarden pauses it "
                         "itself while it builds a large document; pickle.loads does not)")
    args = ap.parse_args()
    paths = args.paths or [os.path.join(REPO, "target", "workloads")]
    files = []
    for p in paths:
        if not os.path.exists(p):
            sys.exit("%s: not found (write the workloads with python3 bench/gen_workloads.py)" % p)
        if os.path.isdir(p):
            files.extend(sorted(glob.glob(os.path.join(p, "*.pkl"))))
        else:
            files.append(p)
    print("| file | MB | pickle.loads s | allowlist s | picklewarden s "
          "| vs pickle.loads | vs allowlist |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        stream = "_stream" in os.path.basename(path)
        t = time_file(data, stream, args.runs, args.gc_off)
        pw = t["picklewarden"]
        print("| %s | %.1f | %.4f | %.4f | %.4f | %.2fx | %.2fx |" % (
            os.path.basename(path), len(data) / 1e6, t["pickle.loads"], t["allowlist"], pw,
            t["pickle.loads"] / pw, t["allowlist"] / pw))
        sys.stdout.flush()
    if args.tiny:
        print()
        print("| tiny pickle | bytes | pickle.loads us | allowlist us | picklewarden us "
              "| vs pickle.loads | vs allowlist |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, data in tiny_pickles():
            t = time_tiny(data, args.tiny, args.runs)
            pw = t["picklewarden"]
            print("| %s | %d | %.2f | %.2f | %.2f | %.2fx | %.2fx |" % (
                name, len(data), t["pickle.loads"] * 1e6, t["allowlist"] * 1e6, pw * 1e6,
                t["pickle.loads"] / pw, t["allowlist"] / pw))


if __name__ == "__main__":
    main()
