#!/usr/bin/env python3
"""Benchmark input for a Mitogen-like file transfer, and CPython's own figure.

Writes OUT: 512 chunks of 128 KiB of random bytes (fixed seed), each pickled by this Python 3
with protocol 2 (so each chunk is `_codecs.encode(<latin-1 text>, 'latin1')`), each as one
Mitogen frame (enc 0x4d4a, handle 1000), and prints one JSON line with CPython's pickle.loads
throughput over the same payloads (best of --repeat runs, MB = 10**6 bytes of chunk data).

Used by tests/mitogen_bench.rs (`cargo test --release --test mitogen_bench -- --ignored
--nocapture`), which decodes the same file with picklewarden in the same run.
"""
import argparse
import json
import pickle
import random
import struct
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--chunks", type=int, default=512)
    ap.add_argument("--chunk-bytes", type=int, default=128 * 1024)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rng = random.Random(20240501)
    chunks = [rng.randbytes(a.chunk_bytes) for _ in range(a.chunks)]
    payloads = [pickle.dumps(c, protocol=2) for c in chunks]
    with open(a.out, "wb") as f:
        for p in payloads:
            f.write(struct.pack(">hLLLLLL", 0x4D4A, 0, 1, 1, 1000, 0, len(p)))
            f.write(p)
    best = None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        for p in payloads:
            v = pickle.loads(p, encoding="bytes")
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    assert v == chunks[-1]
    data = a.chunks * a.chunk_bytes
    print(json.dumps({
        "python": sys.version.split()[0],
        "chunks": a.chunks,
        "chunk_bytes": a.chunk_bytes,
        "data_bytes": data,
        "wire_bytes": sum(len(p) for p in payloads),
        "cpython_seconds": best,
        "cpython_mb_s": data / best / 1e6,
    }))


if __name__ == "__main__":
    main()
