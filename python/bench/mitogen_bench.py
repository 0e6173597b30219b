#!/usr/bin/env python3
"""Mitogen transfers into the parent, stock Mitogen against picklewarden in-process
(picklewarden.mitogen.install()), same child, same run, interleaved; prints the medians.

    python python/bench/mitogen_bench.py [--mib 16] [--runs 5]

Needs mitogen and picklewarden installed. Three transfers of MIB MiB from the child:
  reply        a call whose reply is the bytes (Mitogen's pickler writes a top-level bytes
               reply as BINSTRING: no transcoding on either side)
  Blob chunks  a call whose reply is a list of 128 KiB mitogen.core.Blob chunks: pickled at
               protocol 2, where Python 3 writes each chunk as _codecs.encode(<latin-1 text>)
               (the transcoded transfer the seed problem is about)
  FileService  mitogen.service.FileService.get in the parent fetching a file the child
               serves: mitogen 0.3.54 sends its 128 KiB chunks as raw ENC_BIN messages, which
               Message.decode() returns as they are, with no pickle: both sides run the same
               code, so this row shows the transfer is unchanged, not a decode
The time is the whole transfer: the child pickling, the pipe, and the parent's decode.
"""

import argparse
import io
import os
import tempfile
import statistics
import sys
import threading
import time

import mitogen.core
import mitogen.master
import mitogen.service

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
        path = os.path.join(tempfile.mkdtemp(), "payload.bin")
        ctx.call(C.write_file, path, n)
        ctx.call(C.serve_file, path)

        def fetch():
            out = io.BytesIO()
            ok, _ = mitogen.service.FileService.get(ctx, path, out)
            assert ok
            return out.getvalue()

        def blobs():
            return b"".join(ctx.call(C.blob_chunks, n))

        for label, fn in (("reply", lambda: ctx.call(C.pattern, n)), ("Blob chunks", blobs),
                          ("FileService", fetch)):
            times = {"stock": [], "picklewarden": []}
            for _ in range(args.runs):
                for name in times:
                    if name == "picklewarden":
                        pwm.install()
                    t0 = time.perf_counter()
                    value = fn()
                    times[name].append(time.perf_counter() - t0)
                    pwm.uninstall()
                    assert len(value) == n
                    del value
            s = statistics.median(times["stock"])
            p = statistics.median(times["picklewarden"])
            print("| %s %d MiB | stock Mitogen %.3f s | picklewarden in-process %.3f s | %.2fx |"
                  % (label, args.mib, s, p, s / p))
    finally:
        t = threading.Thread(target=broker.shutdown, daemon=True)
        t.start()
        broker.join()


if __name__ == "__main__":
    main()
