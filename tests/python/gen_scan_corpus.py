#!/usr/bin/env python3
"""Write tests/corpus/scan/: real files, made by the packages themselves, that `picklewarden
scan` meets in real folders, and MANIFEST.tsv.

- model/: a Hugging Face model folder as transformers writes it (a tiny BERT:
  `save_pretrained` with safetensors and again as `pytorch_model.bin`, and its tokenizer's
  `save_pretrained`), plus a model card README.md: every model file clean, the rest skipped;
- pickles/: pandas DataFrames and scikit-learn Pipelines pickled at protocols 2, 4 and 5 (the
  `--trust` round trip: refused, then clean under the policy `--trust` writes), one ndarray
  pickled plain and dumped by joblib with gzip (one verdict whatever the container), and a file
  of two pickles, as `pickle.dump` called twice writes it.

The Python 2 files (py27/) are written by tests/python/gen_scan_py27.py under Python 2.7.

MANIFEST.tsv: a header line, then one tab-separated line per file:

    file  format  verdict  kind  severity  description

(`kind` the refusal kind and `severity` its severity for a refused file, `-` otherwise).

Run in a virtualenv with torch, transformers, tokenizers, safetensors, pandas, scikit-learn and
joblib (versions in the manifest's comment line):

    /work/venv-h35-all/bin/python tests/python/gen_scan_corpus.py
"""

import json
import os
import pickle
import sys

import joblib
import numpy as np
import pandas as pd
import sklearn
import torch
import transformers
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "corpus", "scan")
ROWS = []


def row(path, fmt, verdict, kind, severity, description):
    ROWS.append((path, fmt, verdict, kind, severity, description))


def model_folder():
    d = os.path.join(OUT, "model")
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    words = ["the", "a", "model", "file", "scan", "pickle", "safe", "tensor", "##s", "##ed"]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words
    vocab_path = os.path.join(d, "vocab.txt")
    with open(vocab_path, "w") as f:
        f.write("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(vocab_file=vocab_path)
    tok.save_pretrained(d)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16,
                                     max_position_embeddings=16, type_vocab_size=1)
    model = transformers.BertModel(config)
    model.save_pretrained(d)
    # The checkpoint torch writes for the same weights, as older model folders hold it.
    torch.save(model.state_dict(), os.path.join(d, "pytorch_model.bin"))
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("---\nlicense: mit\n---\n\n# tiny-bert\n\nA BERT of one layer, for tests.\n")
    for name in sorted(os.listdir(d)):
        if name == "model.safetensors":
            row(f"model/{name}", "safetensors", "clean", "-", "-",
                "transformers save_pretrained: the weights as safetensors")
        elif name == "pytorch_model.bin":
            row(f"model/{name}", "torch-zip", "clean", "-", "-",
                "torch.save of the model's state dict")
        else:
            row(f"model/{name}", "text", "skipped", "-", "-",
                "written by transformers or tokenizers save_pretrained (or the model card)")


def pickles():
    d = os.path.join(OUT, "pickles")
    os.makedirs(d, exist_ok=True)
    df = pd.DataFrame({"a": [1, 2, 3], "b": [1.5, 2.5, 3.5], "c": ["x", "y", "z"]})
    rng = np.random.RandomState(0)
    X = rng.rand(20, 3)
    y = (X[:, 0] > 0.5).astype(int)
    pipe = Pipeline([("scale", StandardScaler()), ("lr", LogisticRegression())]).fit(X, y)
    for p in (2, 4, 5):
        for name, obj, what in (("dataframe", df, "a pandas DataFrame"),
                                ("pipeline", pipe, "a scikit-learn Pipeline")):
            fn = f"{name}.p{p}.pkl"
            with open(os.path.join(d, fn), "wb") as f:
                pickle.dump(obj, f, protocol=p)
            row(f"pickles/{fn}", "pickle", "refused", "global_not_allowed", "untrusted",
                f"pickle.dump of {what}, protocol {p}: classes outside the policy")
    arr = np.arange(12, dtype="<f8").reshape(3, 4)
    with open(os.path.join(d, "ndarray.pkl"), "wb") as f:
        pickle.dump(arr, f, protocol=4)
    row("pickles/ndarray.pkl", "pickle", "clean", "-", "-",
        "pickle.dump of an ndarray, protocol 4")
    joblib.dump(arr, os.path.join(d, "ndarray.gz.joblib"), compress=("gzip", 3))
    row("pickles/ndarray.gz.joblib", "joblib-gzip", "clean", "-", "-",
        "joblib.dump of the same ndarray, gzip: the same verdict")
    with open(os.path.join(d, "two_pickles.pkl"), "wb") as f:
        pickle.dump({"epoch": 3, "loss": 0.25}, f, protocol=4)
        pickle.dump([1, 2, 3], f, protocol=4)
    row("pickles/two_pickles.pkl", "pickle", "clean", "-", "-",
        "pickle.dump called twice on one file: two pickles, each checked")


def main():
    for sub in ("model", "pickles"):
        d = os.path.join(OUT, sub)
        if os.path.isdir(d):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
    model_folder()
    pickles()
    old = []
    manifest = os.path.join(OUT, "MANIFEST.tsv")
    if os.path.exists(manifest):
        with open(manifest) as f:
            old = [l.rstrip("\n").split("\t") for l in f if l.startswith("py27/")]
    with open(manifest, "w") as f:
        f.write("file\tformat\tverdict\tkind\tseverity\tdescription\n")
        for r in ROWS + [tuple(o) for o in old]:
            f.write("\t".join(r) + "\n")
    versions = (f"torch {torch.__version__}, transformers {transformers.__version__}, "
                f"pandas {pd.__version__}, scikit-learn {sklearn.__version__}, "
                f"numpy {np.__version__}, joblib {joblib.__version__}")
    print(f"wrote {len(ROWS)} files under {OUT} ({versions})")


if __name__ == "__main__":
    sys.exit(main())
