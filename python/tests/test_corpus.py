"""The repository's corpora through picklewarden.loads: every good file gives what
pickle.loads gives (values, types, sharing, cycles); every hostile file is refused with the
kind its MANIFEST names."""

import copyreg
import io
import os
import pickle
import subprocess
import sys

import pytest

import picklewarden
from graph import same_graph

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GOOD = os.path.join(REPO, "tests", "corpus", "good")
HOSTILE = os.path.join(REPO, "tests", "corpus", "hostile")


def _manifest(folder):
    rows = []
    with open(os.path.join(folder, "MANIFEST.tsv")) as f:
        header = None
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            cells = line.lstrip("# ").split("\t")
            if header is None:
                header = cells
                continue
            rows.append(dict(zip(header, cells)))
    return rows


GOOD_ROWS = _manifest(GOOD)
DATA_ROWS = [r for r in GOOD_ROWS if r["mode"] == "data"]
RECORD_ROWS = [r for r in GOOD_ROWS if r["mode"] == "records"]


def _read(folder, name):
    with open(os.path.join(folder, name), "rb") as f:
        return f.read()


def _cpython_stream(data, **kw):
    f = io.BytesIO(data)
    u = pickle.Unpickler(f, **kw)
    out = []
    while f.tell() < len(data):
        out.append(u.load())
    return out


def test_corpus_is_there():
    assert len(DATA_ROWS) > 1000
    assert len(RECORD_ROWS) > 100


@pytest.mark.parametrize("row", DATA_ROWS, ids=[r["file"] for r in DATA_ROWS])
def test_good_data(row):
    data = _read(GOOD, row["file"])
    if row["stream"] == "1":
        expected = _cpython_stream(data)
        got = picklewarden.loads_stream(data)
    else:
        expected = pickle.loads(data)
        got = picklewarden.loads(data)
    same_graph(got, expected)


# The classes and functions the record files name, mapped to the real ones: picklewarden
# rebuilds them with pickle's own steps, so the result must be what pickle.loads gives.
import recordtypes  # noqa: E402  (tests/python, put on sys.path by conftest.py)
import collections  # noqa: E402

RECORD_CLASSES = {
    "copy_reg._reconstructor": copyreg._reconstructor,
    "copyreg._reconstructor": copyreg._reconstructor,
    "copyreg.__newobj__": copyreg.__newobj__,
    "__builtin__.object": object,
    "builtins.object": object,
    "__builtin__.list": list,
    "builtins.list": list,
    "__builtin__.dict": dict,
    "builtins.dict": dict,
    "collections.OrderedDict": collections.OrderedDict,
    "collections.defaultdict": collections.defaultdict,
    "__builtin__.int": int,
    "builtins.int": int,
    "__builtin__.str": str,
    "builtins.str": str,
    "__builtin__.len": len,
    "builtins.len": len,
}
for _name in dir(recordtypes):
    _obj = getattr(recordtypes, _name)
    if callable(_obj) and getattr(_obj, "__module__", None) == "recordtypes":
        RECORD_CLASSES["recordtypes." + _name] = _obj

# Below protocol 4 CPython writes __getnewargs_ex__ keyword arguments as a REDUCE of
# functools.partial(...) whose callable is itself an object: the record model cannot express
# it and the library refuses it (tests/corpus/good/README.md).
RECORDS_REFUSED = ("record_kwpoint.p2", "record_kwpoint.p3")


@pytest.mark.parametrize("row", RECORD_ROWS, ids=[r["file"] for r in RECORD_ROWS])
def test_good_records_rebuilt(row):
    data = _read(GOOD, row["file"])
    if row["file"].startswith(RECORDS_REFUSED):
        with pytest.raises(picklewarden.RefusedError):
            picklewarden.loads(data, classes=RECORD_CLASSES)
        return
    expected = pickle.loads(data)
    got = picklewarden.loads(data, classes=RECORD_CLASSES)
    same_graph(got, expected)


@pytest.mark.parametrize("row", RECORD_ROWS[:40], ids=[r["file"] for r in RECORD_ROWS[:40]])
def test_good_records_inert(row):
    """Without classes=, record files are refused by the data policy (their globals are not
    allowed), and with a policy allowing them come back as Record objects."""
    data = _read(GOOD, row["file"])
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data)
    assert e.value.kind in ("global_not_allowed",)
    names = picklewarden.scan(data).refused
    pol = picklewarden.Policy("data")
    for g in names:
        pol.allow(g.module, g.name)
    if row["file"].startswith(RECORDS_REFUSED):
        return
    value = picklewarden.loads(data, policy=pol)
    assert _has_record(value)
    assert not isinstance(value, type)


def _has_record(value):
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if isinstance(v, (picklewarden.Record, picklewarden.Global)):
            return True
        if isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return False


HOSTILE_ROWS = _manifest(HOSTILE)


def _hostile_args(row):
    policy = row.get("policy", "-")
    kw = {}
    if policy not in ("-", "data", ""):
        if policy in picklewarden.BUILTIN_POLICIES:
            kw["policy"] = policy
        else:
            return None
    limits = row.get("limits", "-")
    if limits not in ("-", ""):
        if "=" not in limits:
            return None
        kw["limits"] = dict(
            (k, int(v)) for k, v in (item.split("=", 1) for item in limits.split(","))
        )
    return kw


@pytest.mark.parametrize("row", HOSTILE_ROWS, ids=[r["file"] for r in HOSTILE_ROWS])
def test_hostile_refused(row):
    kw = _hostile_args(row)
    if kw is None:
        pytest.skip("needs policy %r / limits %r" % (row.get("policy"), row.get("limits")))
    data = _read(HOSTILE, row["file"])
    with pytest.raises(picklewarden.RefusedError) as e:
        picklewarden.loads(data, **kw)
    assert e.value.kind == row["kind"], str(e.value)
    assert isinstance(e.value, pickle.UnpicklingError)
    if row.get("limit", "-") not in ("-", ""):
        assert e.value.limit == row["limit"]
    verdict = picklewarden.check(data, **kw)
    assert not verdict
    assert verdict.error.kind == row["kind"]
