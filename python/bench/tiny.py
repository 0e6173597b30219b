#!/usr/bin/env python3
"""Tiny pickles, one call each: picklewarden.loads against pickle.loads, interleaved run by
run in one process; prints the median microseconds a call and pickle.loads' time over
picklewarden's (above 1.00x: picklewarden is faster).

    python python/bench/tiny.py [--calls N] [--runs R] FILE[:POLICY] ...

A FILE with POLICY "mitogen..." is decoded with that policy (and mitogen.core imported, so
that pickle.loads finds Mitogen's classes). Without FILE: bench.py's tiny-dict (81 bytes).
"""

import argparse
import pickle
import statistics
import time

import picklewarden


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    inputs = []
    for spec in args.files:
        path, _, policy = spec.partition(":")
        with open(path, "rb") as f:
            inputs.append((path.rsplit("/", 1)[-1], f.read(), policy or None))
    if not inputs:
        inputs.append(("tiny-dict.p4", pickle.dumps(
            {"id": 1234, "name": "alice", "tags": ["a", "b"], "ok": True, "score": 0.5}, 4),
            None))
    print("| input | bytes | pickle.loads us | picklewarden us | pickle.loads / picklewarden |")
    print("|---|---:|---:|---:|---:|")
    for name, data, policy in inputs:
        if policy and policy.startswith("mitogen"):
            import mitogen.core  # noqa: F401

        def pw(d, policy=policy):
            return picklewarden.loads(d, policy=policy)

        fns = {"pickle": pickle.loads,
               "picklewarden": pw if policy else picklewarden.loads}
        if not policy:  # the data policy's values equal pickle.loads' (Mitogen's: records)
            assert fns["pickle"](data) == fns["picklewarden"](data), name
        times = {k: [] for k in fns}
        for _ in range(args.runs):
            for k, fn in fns.items():
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    fn(data)
                times[k].append((time.perf_counter() - t0) / args.calls * 1e6)
        p = statistics.median(times["pickle"])
        w = statistics.median(times["picklewarden"])
        print("| %s | %d | %.2f | %.2f | %.2fx |" % (name, len(data), p, w, p / w))


if __name__ == "__main__":
    main()
