#!/usr/bin/env python2.7
"""Write the Python 2.7 corpus (pickles made by CPython 2.7) into tests/corpus/py27/.

    python2.7 tests/python/gen_py27.py [OUT_DIR]

Runs under CPython 2.7 only (pyenv: ~/.pyenv/versions/2.7.18/bin/python). These are the
pickles a Python 2 peer sends: str as STRING/BINSTRING/SHORT_BINSTRING, unicode as
UNICODE/BINUNICODE, long as LONG/LONG1, __builtin__ and copy_reg names, classic classes as
INST/OBJ. The kinds of values are those of the pickle-fuzz cpython27 collection
(../shared/corpus/README.md), at sizes that keep the folder small.

For every value in VALUES and protocol 0, 1 and 2:
  NAME.pN.c.pkl    cPickle.dumps(value, N)
  NAME.pN.py.pkl   pickle.dumps(value, N) (pure-Python pickler), only if its bytes differ
Deterministic (the script re-executes itself with PYTHONHASHSEED=0): re-running it with
CPython 2.7.18 on 64-bit Linux gives identical files; tests/py27.rs checks that when it finds
Python 2.7. Standard library only.
"""

from __future__ import print_function

import collections
import cPickle
import datetime
import decimal
import os
import pickle
import re
import sys
from array import array

if sys.version_info[:2] != (2, 7):
    sys.exit("gen_py27.py needs CPython 2.7, not %s" % sys.version.split()[0])
if os.environ.get("PYTHONHASHSEED") != "0":
    env = dict(os.environ, PYTHONHASHSEED="0")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import py27types as T  # noqa: E402

DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "corpus", "py27"))
PROTOCOLS = (0, 1, 2)

ALL_BYTES = "".join(chr(i) for i in range(256))
TEXT_256 = u"".join(unichr(i) for i in range(256))
STRS_256 = [chr(i) for i in range(256)]


def recursive_list():
    l = [1]
    l.append(l)
    return l


def recursive_dict():
    d = {"k": None}
    d["self"] = d
    return d


def tuple_through_list():
    l = []
    t = (l, "t")
    l.append(t)
    return t


def shared():
    x = [1, 2]
    s = u"shared"
    return [x, x, (x, s), s]


VALUES = [
    # builtins/none, bool
    ("none", None),
    ("bool_true", True),
    ("bool_false", False),
    # builtins/int (Python 2 int: INT text at protocol 0, BININT* at 1/2, INT text past 32 bits)
    ("int_zero", 0),
    ("int_h2g2", 42),
    ("int_neg", -1),
    ("int_1e3", 1000),
    ("int_1e6", 10 ** 6),
    ("int_1e9", 10 ** 9),
    ("int_2p31m1", 2 ** 31 - 1),
    ("int_m2p31", -2 ** 31),
    ("int_2p31", 2 ** 31),
    ("int_1e12", 10 ** 12),
    ("int_1e18", 10 ** 18),
    ("int_maxint", sys.maxint),
    ("int_minint", -sys.maxint - 1),
    # builtins/long (LONG text with an L at protocol 0/1, LONG1 at 2)
    ("long_zero", 0L),
    ("long_h2g2", 42L),
    ("long_neg", -7L),
    ("long_2p63", 2 ** 63),
    ("long_m2p63m1", -2 ** 63 - 1),
    ("long_2p64", 2 ** 64),
    ("long_1e21", 10 ** 21),
    ("long_1e100", 10 ** 100),
    ("long_m1e100", -10 ** 100),
    ("long_1e1000", 10 ** 1000),
    # builtins/float (protocol 0 writes repr() text: 17 significant digits in 2.7's pickle)
    ("float_zero", 0.0),
    ("float_nzero", -0.0),
    ("float_h2g2", 42.0),
    ("float_tenth", 0.1),
    ("float_third", 1.0 / 3),
    ("float_big", 1e300),
    ("float_tiny", 5e-324),
    ("float_pinf", float("inf")),
    ("float_ninf", float("-inf")),
    ("float_nan", float("nan")),
    # builtins/complex (__builtin__.complex REDUCE)
    ("complex_zero", 0j),
    ("complex_h2g2", 42 + 42j),
    ("complex_odd", complex(-0.0, float("inf"))),
    # builtins/bytes: Python 2 str (STRING text with escapes at 0, BINSTRING at 1/2)
    ("bytes_empty", ""),
    ("bytes_abc", "abc"),
    ("bytes_quotes", "it's \"quoted\"\n\\ \t\r"),
    ("bytes_2e8", ALL_BYTES),
    ("bytes_2e10", ALL_BYTES * 4),
    # builtins/text: unicode (raw-unicode-escape UNICODE at 0, BINUNICODE at 1/2)
    ("text_empty", u""),
    ("text_abc", u"abc"),
    ("text_escapes", u"back\\slash\nnew line \u20ac \x00"),
    ("text_2e8", TEXT_256),
    ("text_bmp", u"".join(unichr(i) for i in range(0x370, 0x3ff)) + u"\u4e2d\u6587\uffff"),
    ("text_astral", u"\U0001f600 \U0010ffff"),
    ("text_lone_surrogate", u"a\ud800b"),
    # builtins/bytearray (__builtin__.bytearray with a latin-1 unicode argument)
    ("bytearray_empty", bytearray()),
    ("bytearray_abc", bytearray("abc")),
    ("bytearray_2e8", bytearray(ALL_BYTES)),
    # builtins/list, tuple
    ("list_empty", []),
    ("list_abc", ["a", "b", "c"]),
    ("list_2e8", STRS_256),
    ("list_ints", range(-5, 300, 7)),
    ("list_nested", [1, [2, [3, [4, [5, []]]]]]),
    ("list_mixed", [None, True, 1, 2L, 3.5, "s", u"u", (1,), {"k": "v"}]),
    ("list_recursive", recursive_list()),
    ("list_shared", shared()),
    ("tuple_empty", ()),
    ("tuple_one", (1,)),
    ("tuple_abc", ("a", "b", "c")),
    ("tuple_2e8", tuple(STRS_256)),
    ("tuple_through_list", tuple_through_list()),
    # builtins/dict
    ("dict_empty", {}),
    ("dict_abc123", {"a": 1, "b": 2, "c": 3}),
    ("dict_2e8", dict((unichr(i), i) for i in range(256))),
    ("dict_keys", {1: "int", 2L: "long", (1, 2): "tuple", u"u": "unicode", "s": None, 1.5: "f"}),
    ("dict_recursive", recursive_dict()),
    # builtins/set, frozenset (__builtin__.set / frozenset REDUCE of a list)
    ("set_empty", set()),
    ("set_abc", set("abc")),
    ("set_ints", set(range(0, 256, 3))),
    ("set_2e8", set(STRS_256)),
    ("frozenset_empty", frozenset()),
    ("frozenset_abc", frozenset("abc")),
    ("frozenset_tuples", frozenset([(1, "a"), (2, "b"), (10, u"c")])),
    ("set_of_frozensets", set([frozenset([1, 2]), frozenset(), frozenset(["x"])])),
    # stdlib
    ("Counter_empty", collections.Counter()),
    ("Counter_abracadabra", collections.Counter("abracadabra")),
    ("OrderedDict_empty", collections.OrderedDict()),
    ("OrderedDict_abc", collections.OrderedDict([("c", 3), ("a", 1), ("b", 2)])),
    ("defaultdict_int", collections.defaultdict(int, {"a": 1, "b": 2})),
    ("defaultdict_list", collections.defaultdict(list, {"k": [1, 2]})),
    ("namedtuple_pair", T.Pair(1, u"two")),
    ("Decimal_h2g2", decimal.Decimal("42")),
    ("Decimal_tenth", decimal.Decimal("-0.1")),
    ("Decimal_nan", decimal.Decimal("NaN")),
    ("date_epoch", datetime.date(1970, 1, 1)),
    ("date_contact", datetime.date(2001, 1, 1)),
    ("datetime_epoch", datetime.datetime(1970, 1, 1)),
    ("datetime_micro", datetime.datetime(2001, 2, 3, 4, 5, 6, 7)),
    ("datetime_utc", datetime.datetime(2010, 10, 10, 10, 10, 10, tzinfo=T.UTC())),
    ("time_midnight", datetime.time(0, 0)),
    ("time_odd", datetime.time(12, 30, 15, 500)),
    ("timedelta_zero", datetime.timedelta(0)),
    ("timedelta_neg", datetime.timedelta(days=-1, seconds=5, microseconds=7)),
    ("array_ints", array("i", range(16))),
    ("array_doubles", array("d", [0.5, -1.0, 1e300])),
    ("SRE_Pattern_abc", re.compile("a+b", re.I)),
    # classes (copy_reg._reconstructor, INST/OBJ, NEWOBJ, REDUCE, BUILD)
    ("classic", T.Classic(1, "two")),
    ("plain", T.Plain(3, [4])),
    ("reduced", T.Reduced(u"name", 7)),
    ("with_state", T.WithState("a", (1, 2))),
    ("objects_shared", [T.Plain(1, 2)] * 2),
]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT
    if not os.path.isdir(out):
        os.makedirs(out)
    for old in os.listdir(out):
        if old.endswith(".pkl"):
            os.remove(os.path.join(out, old))
    names = set()
    written = 0
    for name, value in VALUES:
        assert name not in names, name
        names.add(name)
        for proto in PROTOCOLS:
            c = cPickle.dumps(value, proto)
            py = pickle.dumps(value, proto)
            files = [("c", c)] + ([("py", py)] if py != c else [])
            for impl, data in files:
                with open(os.path.join(out, "%s.p%d.%s.pkl" % (name, proto, impl)), "wb") as f:
                    f.write(data)
                written += 1
    print("gen_py27: %d files in %s" % (written, out))


if __name__ == "__main__":
    main()
