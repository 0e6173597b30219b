#!/usr/bin/env python3
"""Prints KNOWN_OPEN.tsv rows from the found.tsv files of harness runs: for each reader, every
mutation class or cost family that failed, with what it produced and a note on its cause.

    python3 tests/differential/known_open.py /tmp/diff-*/found.tsv > /tmp/rows.tsv

(Rows to add by hand when a class is open; rows to delete when a fix lands.)
"""
import json
import sys
from collections import Counter, defaultdict

NOTES = [
    ("cost.", "record calls or BUILDs repeated through the memo, or a storage that inflates: "
              "picklewarden does not charge the reader's work"),
    ("stream.", "a compressed stream in two members, or a second one appended: joblib.load "
                "runs away (19 GB and 63 s from 251 bytes of gzip without a cap)"),
    ("wrapper.", "NumpyArrayWrapper states joblib reads otherwise than picklewarden (alignment "
                 "not an int, duplicated or missing; a (dict, slots) state; a second BUILD)"),
    ("padding.", "a padding byte or padding bytes joblib does not write"),
    ("frame-past-build", "a FRAME running past the wrapper's BUILD: joblib runs the rest of "
                         "the frame after reading the array from the file"),
    ("dtype.", "dtype states numpy never writes (elsize numpy ignores, object bits missing from "
               "the flags, an object subarray, version, length, byte order): a desync in "
               "joblib, crashes in numpy"),
    ("ndarray.", "ndarray states numpy never writes (raw bytes for objects under changed "
                 "flags, shapes that disagree with the data, _reconstruct's shape allocated "
                 "up front)"),
    ("nested.", "the same dtype and ndarray states inside joblib's object-array pickle"),
    ("npy.", "npy header spellings over an object-array pickle with one of the states above"),
    ("npz.", "npz entries over a member with one of the states above"),
    ("scalar.", "numpy scalars from bytes of another length, or for an object dtype"),
]


def note(c):
    for prefix, text in NOTES:
        if c.startswith(prefix):
            return text
    return ("a pickle-level mutation of a numpy pickle that lands on one of the dtype or "
            "ndarray states above")


def main(paths):
    seen = defaultdict(Counter)
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            kinds = sorted({f.split(":")[0] for f in r["fail"]})
            for c in r["classes"]:
                for k in kinds:
                    seen[(r["reader"], c)][k] += 1
    for (reader, c), kinds in sorted(seen.items()):
        print("\t".join([reader, c, ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
                         note(c)]))


if __name__ == "__main__":
    main(sys.argv[1:])
