#!/usr/bin/env python3
"""The time picklewarden, picklescan and modelscan take to scan one folder (a site-packages, a
model folder), in the same run, and what each reports.

Each command runs `--runs` times, interleaved (picklewarden, picklescan, modelscan, then
again); the median of each is printed with its ratio to picklewarden's (the machine is shared:
compare the ratios of one run, not times across runs). Then what each said: picklewarden's
summary line and the length of its text report, picklescan's and modelscan's summaries.

Run with the peers installed in a venv of their own (CI does not install them):

    /work/peers-venv/bin/python tests/python/time_folder_scan.py target/release/picklewarden \\
        FOLDER [--runs 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def tool(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pw")
    ap.add_argument("folder")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    pw = os.path.abspath(args.pw)
    files = sum(len(f) for _, _, f in os.walk(args.folder))
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, f in os.walk(args.folder) for n in f
               if not os.path.islink(os.path.join(d, n)))
    cmds = {
        "picklewarden": [pw, "scan", args.folder],
        "picklescan": [tool("picklescan"), "-p", args.folder],
        "modelscan": [tool("modelscan"), "-p", args.folder],
    }
    times = {n: [] for n in cmds}
    last = {}
    for _ in range(args.runs):
        for name, cmd in cmds.items():
            t = time.perf_counter()
            last[name] = run(cmd)
            times[name].append(time.perf_counter() - t)
    med = {n: statistics.median(ts) for n, ts in times.items()}
    print(f"Scan of {args.folder}: {files} files, {size / 2**20:.0f} MiB; median of "
          f"{args.runs} interleaved runs:")
    for name, t in med.items():
        print(f"- {name}: {t:.2f} s ({t / med['picklewarden']:.1f}x picklewarden's time), "
              f"exit {last[name].returncode}")
    text = last["picklewarden"].stdout
    print(f"\npicklewarden's report: {len(text.splitlines())} lines; its last two:")
    for line in text.splitlines()[-2:]:
        print(f"    {line}")
    for name in ("picklescan", "modelscan"):
        out = (last[name].stdout + last[name].stderr).splitlines()
        summary = [l for l in out if any(w in l.lower() for w in
                   ("scanned files", "infected", "dangerous", "total issues", "skipped",
                    "total ", "no issues", "summary"))]
        print(f"\n{name}: {len(out)} lines of output; summary lines:")
        for line in summary[:12]:
            print(f"    {line.strip()}")


if __name__ == "__main__":
    main()
