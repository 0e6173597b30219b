#!/usr/bin/env python3
"""picklewarden's verdicts on the model corpus side by side with picklescan's, modelscan's and
fickling's, against MANIFEST.tsv, and the time each takes to scan a folder of model files.

Run by hand with the peers installed in a venv of their own (CI does not install them):

    python3 -m venv /work/peers-venv
    /work/peers-venv/bin/pip install picklescan modelscan fickling
    /work/peers-venv/bin/python tests/python/compare_peers.py target/release/picklewarden \
        [--runs 7] [--big CHECKPOINT]

A verdict is "right" when a benign file is passed and a hostile one is flagged (refused,
infected, unsafe, or an error: a scanner that cannot read a file does not pass it), so
`WRONG` on a hostile file means the scanner passed it. picklewarden's "incomplete" counts as
flagged (it is never "clean").

Times: each command run `--runs` times, interleaved (picklewarden, picklescan, modelscan, ...
then again), the median of each reported with its ratio to picklewarden's (the machine is
shared and noisy: compare the ratios of one run, not times across runs). `--big` times one
large checkpoint the same way (scanning it must read only the zip directory and data.pkl).
The output is a Markdown table that docs/models.md keeps with the command and the date.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "corpus", "models"))


def bindir():
    return os.path.dirname(sys.executable)


def tool(name):
    return os.path.join(bindir(), name)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, timeout=600)


def picklewarden(pw, path):
    out = run([pw, "scan", "--format", "json", path])
    return json.loads(out.stdout)["files"][0]["verdict"] != "clean"


def picklescan(path):
    return run([tool("picklescan"), "-p", path]).returncode != 0


def fickling(path):
    return run([tool("fickling"), "--check-safety", path]).returncode != 0


def modelscan(path):
    return run([tool("modelscan"), "-p", path]).returncode != 0


def timed(cmds, runs):
    """Median wall time (s) of each command, runs interleaved."""
    times = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            t = time.perf_counter()
            run(cmd)
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pw", nargs="?", default="target/release/picklewarden")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--big", help="a large checkpoint to time (not committed)")
    args = ap.parse_args()
    pw = os.path.abspath(args.pw)
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(ROOT, "MANIFEST.tsv"))][1:]
    peers = [("picklewarden", lambda p: picklewarden(pw, p))]
    for name, fn in [("picklescan", picklescan), ("modelscan", modelscan), ("fickling", fickling)]:
        if shutil.which(name, path=bindir()):
            peers.append((name, fn))
        else:
            print(f"({name} not installed in {bindir()}: left out)", file=sys.stderr)
    right = {n: 0 for n, _ in peers}
    print("| file | expected | " + " | ".join(n for n, _ in peers) + " |")
    print("|---|---|" + "---|" * len(peers))
    for row in rows:
        path = os.path.join(ROOT, row[0])
        hostile = row[2] != "clean"
        cells = []
        for name, fn in peers:
            flagged = fn(path)
            ok = flagged == hostile
            right[name] += ok
            cells.append(("flagged" if flagged else "passed") + ("" if ok else " **WRONG**"))
        print(f"| {row[0]} | {'hostile' if hostile else 'benign'} | " + " | ".join(cells) + " |")
    print()
    for name, _ in peers:
        print(f"- {name}: {right[name]}/{len(rows)} right")
    print()
    folder = {"picklewarden": [pw, "scan", ROOT]}
    if shutil.which("picklescan", path=bindir()):
        folder["picklescan"] = [tool("picklescan"), "-p", ROOT]
    if shutil.which("modelscan", path=bindir()):
        folder["modelscan"] = [tool("modelscan"), "-p", ROOT]
    med = timed(folder, args.runs)
    print(f"Folder scan of tests/corpus/models ({len(rows)} files), median of {args.runs} "
          "interleaved runs:")
    for name, t in med.items():
        print(f"- {name}: {t * 1000:.1f} ms ({t / med['picklewarden']:.1f}x picklewarden's time)")
    if args.big:
        size = os.path.getsize(args.big)
        big = {"picklewarden": [pw, "scan", args.big]}
        if "picklescan" in folder:
            big["picklescan"] = [tool("picklescan"), "-p", args.big]
        med = timed(big, args.runs)
        print(f"\nOne checkpoint of {size / 2**30:.2f} GiB, median of {args.runs} runs:")
        for name, t in med.items():
            print(f"- {name}: {t * 1000:.1f} ms")


if __name__ == "__main__":
    main()
