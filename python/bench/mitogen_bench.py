#!/usr/bin/env python3
"""A Mitogen file transfer into the parent, stock Mitogen against picklewarden in-process
(picklewarden.mitogen.install()), same child, same run, interleaved; prints the medians.

    python python/bench/mitogen_bench.py [--mib 16] [--runs 5]

Needs mitogen and picklewarden installed. The child returns MIB MiB of bytes (protocol 2:
_codecs.encode of Latin-1 text, as Python 3 writes bytes for Mitogen); the time is the whole
call: the child pickling, the transfer, and the parent's decode.
"""

import argparse
import os
import statistics
import sys
import threading
import time

import mitogen.core
import mitogen.master

import picklewarden.mitogen as pwm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import mitogen_child as C  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    n = args.mib * 1024 * 1024
    broker = mitogen.master.Broker()
    router = mitogen.master.Router(broker)
    try:
        ctx = router.local(python_path=[sys.executable])
        ctx.call(C.pattern, 10)  # warm: module sent, child ready
        times = {"stock": [], "picklewarden": []}
        for _ in range(args.runs):
            for name in times:
                if name == "picklewarden":
                    pwm.install()
                t0 = time.perf_counter()
                value = ctx.call(C.pattern, n)
                times[name].append(time.perf_counter() - t0)
                pwm.uninstall()
                assert len(value) == n
                del value
        s, p = statistics.median(times["stock"]), statistics.median(times["picklewarden"])
        print("| %d MiB transfer | stock Mitogen %.3f s | picklewarden in-process %.3f s | %.2fx |"
              % (args.mib, s, p, s / p))
    finally:
        t = threading.Thread(target=broker.shutdown, daemon=True)
        t.start()
        broker.join()


if __name__ == "__main__":
    main()
