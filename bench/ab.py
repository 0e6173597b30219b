#!/usr/bin/env python3
"""Compare two builds of picklewarden's decode on the same files in one run; prints markdown.

    cargo build --release --no-default-features --example bench_decode       # the new build
    # the base build, from another checkout or worktree, into its own target dir, e.g.
    #   git worktree add ../base REV && (cd ../base && cargo build --release
    #     --no-default-features --example bench_decode)
    python3 bench/ab.py BASE_BINARY NEW_BINARY FILE...

For each file: three rounds, each running BASE then NEW (`bench_decode FILE 5`: the median of
five decodes in one process), and the median of the three medians of each; then CPython's
`pickle.loads` of the same file (the best of three, in a process of its own) for the ratio. A
refused file shows the refusal instead. Ratios, not absolute times, are what carries over
between runs on a shared machine.

Key workloads (dicts and sets whose keys the model of CPython's key work looks at) are made by
`bench/gen_key_workloads.py`.
"""

import json
import statistics
import subprocess
import sys

LOADS = (
    "import pickle, sys, time\n"
    "d = open(sys.argv[1], 'rb').read()\n"
    "best = None\n"
    "for _ in range(3):\n"
    "    t = time.perf_counter(); x = pickle.loads(d); t = time.perf_counter() - t; del x\n"
    "    best = t if best is None else min(best, t)\n"
    "print(best)\n"
)


def decode(binary, path):
    """The median seconds of a decode, or the refusal's text."""
    out = subprocess.run([binary, path, "5"], capture_output=True, text=True)
    if out.returncode != 0:
        return out.stderr.strip()[:120]
    return json.loads(out.stdout.strip().splitlines()[-1])["median_s"]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    base, new, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    print("| file | base ms | new ms | new/base | pickle.loads ms | loads/new |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in files:
        name = path.rsplit("/", 1)[-1]
        rounds = [(decode(base, path), decode(new, path)) for _ in range(3)]
        refused = [r for pair in rounds for r in pair if isinstance(r, str)]
        if refused:
            print(f"| {name} | refused: {refused[0]} | | | | |")
            continue
        b = statistics.median(r[0] for r in rounds)
        n = statistics.median(r[1] for r in rounds)
        loads = float(subprocess.run([sys.executable, "-c", LOADS, path],
                                     capture_output=True, text=True).stdout)
        print(f"| {name} | {b * 1e3:.1f} | {n * 1e3:.1f} | {n / b:.3f} | {loads * 1e3:.1f} "
              f"| {loads / n:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
