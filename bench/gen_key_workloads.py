#!/usr/bin/env python3
"""Writes the key workloads to target/workloads/keys/ (or the folder given): dicts and sets
whose keys the model of CPython's key work (src/build/keys/reader.rs) looks at, pickled by
CPython at protocol 4. Standard library only; deterministic.

    python3 bench/gen_key_workloads.py [DIR]

  tuplekeys.p4.pkl   {(i, i * 7 % 1000): i for i in range(500000)}   small tuples of ints
  floatkeys.p4.pkl   {i * 0.5 + 0.25: i for i in range(500000)}      floats
  fskeys.p4.pkl      {frozenset((i, i + 1)): i for i in range(200000)}
  bigintkeys.p4.pkl  {(1 << 70) + i: i for i in range(300000)}       ints past 64 bits
  tupleset.p4.pkl    set((i, str(i)) for i in range(300000))         tuples holding a text
"""

import os
import pickle
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    "tuplekeys.p4.pkl": lambda: {(i, i * 7 % 1000): i for i in range(500000)},
    "floatkeys.p4.pkl": lambda: {i * 0.5 + 0.25: i for i in range(500000)},
    "fskeys.p4.pkl": lambda: {frozenset((i, i + 1)): i for i in range(200000)},
    "bigintkeys.p4.pkl": lambda: {(1 << 70) + i: i for i in range(300000)},
    "tupleset.p4.pkl": lambda: set((i, str(i)) for i in range(300000)),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "target", "workloads", "keys")
    os.makedirs(out, exist_ok=True)
    for name, make in WORKLOADS.items():
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(pickle.dumps(make(), 4))
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
