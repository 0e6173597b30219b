#!/usr/bin/env python3
"""The floors under picklewarden.loads' speed targets (issue 25) that it cannot pass: the time
of the work no decoder of these files can skip, against pickle.loads, in one process, the
same run, interleaved, medians; prints markdown.

    python3 bench/gen_workloads.py                     # once, from the repository's root
    python python/bench/floors.py [--runs N] [WORKLOADS_DIR]

ints.p4.pkl (5 million ints; target 1.2x pickle.loads):
  check (decode only)   picklewarden.check: the library's whole decode, every check, no
                        Python object made
  tolist (ints only)    array('q', values).tolist(): CPython making the 5 million int objects
                        and their list from machine integers, nothing decoded
  floor                 the sum: what picklewarden.loads cannot go below while it decodes first
                        and then makes the objects (as it must: nothing is made before the
                        whole input is accepted)
small.p4.pkl (about 20 MB of small nested objects; target 1.2x), the GC off for all:
  check (decode only)   as above
  marshal.loads         CPython's marshal reading the same value (marshal.dumps of it): the
  (objects only)        tightest loop CPython has that makes these objects from a byte
                        stream, standing for the object-making work alone
longstr.p4.pkl (2,000 str of 64 KiB of non-ASCII UTF-8; target 3x):
  utf-8 decode          bytes.decode('utf-8') of the 2,000 texts: CPython's UTF-8 decoder,
                        the only way under the stable ABI (abi3) to make a str from UTF-8
  utf-32 decode         bytes.decode('utf-32-le') of the same texts already in UTF-32 (the
                        fastest checked decoder; getting the text into UTF-32 costs more)
  alloc only            chr(0x1F389) * len: making 2,000 str objects of the same lengths and
                        width with no decoding at all
"""

import argparse
import array
import gc
import marshal
import os
import pickle
import statistics
import time

import picklewarden

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def table(fns, runs):
    times = {k: [] for k in fns}
    for _ in range(runs):
        for k, f in fns.items():
            t0 = time.perf_counter()
            x = f()
            times[k].append(time.perf_counter() - t0)
            del x
            gc.collect()
    return {k: statistics.median(ts) for k, ts in times.items()}


def show(title, m, extra=()):
    print("| %s | s | pickle.loads / this |" % title)
    print("|---|---:|---:|")
    base = m["pickle.loads"]
    for k, v in list(m.items()) + list(extra):
        print("| %s | %.3f | %.2fx |" % (k, v, base / v))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", default=os.path.join(REPO, "target", "workloads"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    with open(os.path.join(args.dir, "ints.p4.pkl"), "rb") as f:
        d = f.read()
    a = array.array("q", pickle.loads(d))
    m = table({
        "pickle.loads": lambda: pickle.loads(d),
        "picklewarden.loads": lambda: picklewarden.loads(d),
        "check (decode only)": lambda: picklewarden.check(d),
        "tolist (ints only)": a.tolist,
    }, args.runs)
    floor = m["check (decode only)"] + m["tolist (ints only)"]
    show("ints.p4.pkl", m, [("floor: check + tolist", floor)])

    # Small objects with CPython's cyclic GC off for every tool (the object-making steps
    # alone; with it on, pickle.loads' objects are walked again and again by its passes while
    # picklewarden pauses it).
    with open(os.path.join(args.dir, "small.p4.pkl"), "rb") as f:
        d = f.read()
    m_data = marshal.dumps(pickle.loads(d))
    gc.disable()
    try:
        m = table({
            "pickle.loads": lambda: pickle.loads(d),
            "picklewarden.loads": lambda: picklewarden.loads(d),
            "check (decode only)": lambda: picklewarden.check(d),
            "marshal.loads (objects only)": lambda: marshal.loads(m_data),
        }, args.runs)
    finally:
        gc.enable()
    floor = m["check (decode only)"] + m["marshal.loads (objects only)"]
    show("small.p4.pkl, GC off", m, [("floor: check + marshal.loads", floor)])

    with open(os.path.join(args.dir, "longstr.p4.pkl"), "rb") as f:
        d = f.read()
    texts = pickle.loads(d)
    b8 = [s.encode("utf-8") for s in texts]
    b32 = [s.encode("utf-32-le") for s in texts]
    lens = [len(s) for s in texts]
    wide = chr(0x1F389)
    m = table({
        "pickle.loads": lambda: pickle.loads(d),
        "picklewarden.loads": lambda: picklewarden.loads(d),
        "utf-8 decode": lambda: [b.decode("utf-8") for b in b8],
        "utf-32 decode": lambda: [b.decode("utf-32-le") for b in b32],
        "alloc only": lambda: [wide * n for n in lens],
    }, args.runs)
    show("longstr.p4.pkl", m)


if __name__ == "__main__":
    main()
