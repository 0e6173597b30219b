#!/usr/bin/env python3
"""picklewarden's verdicts on the model corpus side by side with picklescan's (and fickling's
and modelscan's when installed), against MANIFEST.tsv, and the time each takes over the folder.

Run in the venv that has the peers (``pip install picklescan fickling modelscan``):

    /work/models-venv/bin/python tests/python/compare_peers.py target/release/picklewarden

A verdict is "right" when a benign file is passed and a hostile one is flagged (refused,
infected, unsafe, or an error: a scanner that cannot read a file does not pass it). Times are
one run each over the whole folder, in the same run (the machine is noisy: compare ratios).
"""

import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "corpus", "models")


def bindir():
    return os.path.dirname(sys.executable)


def picklewarden(pw, path):
    out = subprocess.run([pw, "scan", "--format", "json", path], capture_output=True)
    v = json.loads(out.stdout)["files"][0]
    return v["verdict"] != "clean"


def picklescan(path):
    out = subprocess.run([os.path.join(bindir(), "picklescan"), "-p", path], capture_output=True)
    return out.returncode != 0


def fickling(path):
    out = subprocess.run([os.path.join(bindir(), "fickling"), "--check-safety", path],
                         capture_output=True)
    return out.returncode != 0


def modelscan(path):
    out = subprocess.run([os.path.join(bindir(), "modelscan"), "-p", path], capture_output=True)
    return out.returncode != 0


def main():
    pw = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/picklewarden")
    rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(ROOT, "MANIFEST.tsv"))][1:]
    peers = [("picklewarden", lambda p: picklewarden(pw, p))]
    for name, fn in [("picklescan", picklescan), ("fickling", fickling), ("modelscan", modelscan)]:
        if shutil.which(name, path=bindir()):
            peers.append((name, fn))
    right = {n: 0 for n, _ in peers}
    print("file\texpected\t" + "\t".join(n for n, _ in peers))
    for row in rows:
        path = os.path.join(ROOT, row[0])
        hostile = row[2] != "clean"
        cells = []
        for name, fn in peers:
            flagged = fn(path)
            ok = flagged == hostile
            right[name] += ok
            cells.append(("flagged" if flagged else "passed") + ("" if ok else " WRONG"))
        print(f"{row[0]}\t{'hostile' if hostile else 'benign'}\t" + "\t".join(cells))
    print()
    for name, _ in peers:
        print(f"{name}: {right[name]}/{len(rows)} right")
    t = time.perf_counter()
    subprocess.run([pw, "scan", ROOT], capture_output=True)
    t_pw = time.perf_counter() - t
    print(f"folder scan: picklewarden {t_pw:.3f} s")
    if any(n == "picklescan" for n, _ in peers):
        t = time.perf_counter()
        subprocess.run([os.path.join(bindir(), "picklescan"), "-p", ROOT], capture_output=True)
        t_ps = time.perf_counter() - t
        print(f"folder scan: picklescan {t_ps:.3f} s ({t_ps / t_pw:.1f}x picklewarden's time)")


if __name__ == "__main__":
    main()
