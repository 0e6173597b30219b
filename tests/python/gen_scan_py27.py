# -*- coding: utf-8 -*-
"""Write tests/corpus/scan/py27/: files Python 2.7 writes, and their MANIFEST.tsv lines.

- py2_str.pkl: cPickle of a dict holding a Python 2 str with a byte above 0x7F (refused as
  `invalid_ascii` under an ASCII policy; `scan --trust` writes `python2_str_encoding =
  "latin1"`, under which it is clean);
- py2_joblib_latin1.pkl: joblib 0.10's dump of an array and such a str (joblib.load in Python 3
  refuses it: "You may be trying to read with python 3 a joblib pickle generated with python
  2");
- py2_joblib_ascii.pkl: joblib 0.10's dump of an array and ASCII str (joblib.load reads it).

Run with Python 2.7 and joblib 0.10.0 and numpy 1.16 on its path (pip install --target DIR
joblib==0.10.0 numpy==1.16.6; JOBLIB_PY27 names DIR):

    JOBLIB_PY27=/work/venv-h35-py27 ~/.pyenv/versions/2.7.18/bin/python tests/python/gen_scan_py27.py
"""

import cPickle
import os
import sys

sys.path.insert(0, os.environ.get("JOBLIB_PY27", ""))
import joblib  # noqa: E402
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "corpus", "scan")
OUT = os.path.join(ROOT, "py27")

ROWS = [
    ("py27/py2_str.pkl", "pickle", "refused", "invalid_ascii", "untrusted",
     "cPickle protocol 2 of a Python 2 str with a byte above 0x7F (Python 2.7)"),
    ("py27/py2_joblib_latin1.pkl", "joblib", "refused", "python2_joblib", "malformed",
     "joblib 0.10 under Python 2.7: an array and a str with a byte above 0x7F"),
    ("py27/py2_joblib_ascii.pkl", "joblib", "clean", "-", "-",
     "joblib 0.10 under Python 2.7: an array and ASCII str, which joblib.load reads"),
]


def main():
    if not os.path.isdir(OUT):
        os.makedirs(OUT)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))
    with open(os.path.join(OUT, "py2_str.pkl"), "wb") as f:
        cPickle.dump({"name": "caf\xe9", "n": 3}, f, 2)
    joblib.dump({"w": np.arange(4.0), "name": "caf\xe9"}, os.path.join(OUT, "py2_joblib_latin1.pkl"))
    joblib.dump({"w": np.arange(4.0), "name": "cafe"}, os.path.join(OUT, "py2_joblib_ascii.pkl"))
    manifest = os.path.join(ROOT, "MANIFEST.tsv")
    lines = []
    if os.path.exists(manifest):
        with open(manifest) as f:
            lines = [l for l in f if not l.startswith("py27/")]
    if not lines:
        lines = ["file\tformat\tverdict\tkind\tseverity\tdescription\n"]
    with open(manifest, "w") as f:
        f.writelines(lines)
        for r in ROWS:
            f.write("\t".join(r) + "\n")
    print("wrote %d files under %s (joblib %s, numpy %s)" % (len(ROWS), OUT, joblib.__version__,
                                                             np.__version__))


if __name__ == "__main__":
    main()
