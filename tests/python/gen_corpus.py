#!/usr/bin/env python3
"""Write the GOOD corpus (real pickles made by CPython 3) into tests/corpus/good/.

    python3 tests/python/gen_corpus.py [OUT_DIR]

Deterministic: no timestamps, no randomness (the few pseudo-random values come from a seeded
random.Random), and the script re-executes itself with PYTHONHASHSEED=0 so that set and
frozenset iteration order (and so the pickled bytes) is the same on every run. Re-running on the
same CPython version produces identical files. Standard library only.

For every value in VALUES and protocol 0..5:
  NAME.pN.c.pkl    pickle.dumps(value, N)            (C pickler, _pickle)
  NAME.pN.py.pkl   pickle._Pickler(f, N).dump(value) (pure-Python pickler), only if its bytes
                   differ from the .c file
  NAME.pN.opt.pkl  pickletools.optimize(c bytes), only if it differs from the .c file and
                   optimize() does not raise
RECORDS (names start with record_) are the same, but hold instances of the classes in
recordtypes.py (and a few stdlib ones); check them with `oracle.py compare --mode records`.
STREAMS: stream_NAME.pN.pkl hold several pickles written one after another by ONE C Pickler
(its memo is kept across dump() calls, so later pickles refer to earlier objects by GET);
check them with --stream (or a {"values": [...]} document).
A combination the pickler refuses (e.g. a __slots__ class at protocol 0/1) is left out.
MANIFEST.tsv lists every file with its mode, stream flag, size and sha256.
"""

import collections
import hashlib
import io
import os
import pickle
import pickletools
import random
import sys

if os.environ.get("PYTHONHASHSEED") != "0":
    env = dict(os.environ, PYTHONHASHSEED="0")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import recordtypes as R  # noqa: E402

DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "corpus", "good"))
PROTOCOLS = range(0, 6)
sys.setrecursionlimit(10000)


# --------------------------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------------------------

def nested_list(depth):
    v = []
    for _ in range(depth):
        v = [v]
    return v


def data_values():
    rnd = random.Random(20240601)
    big = 2 ** (8 * 255 - 1)          # LONG1 holds at most 255 bytes of two's complement
    v = collections.OrderedDict()     # keeps the table order (file order does not matter)

    v["none"] = None
    v["true"] = True
    v["false"] = False

    ints = {
        "0": 0, "1": 1, "255": 255, "256": 256, "65535": 65535, "65536": 65536,
        "2p31m1": 2 ** 31 - 1, "m2p31": -2 ** 31, "2p31": 2 ** 31, "m2p31m1": -2 ** 31 - 1,
        "2p63m1": 2 ** 63 - 1, "m2p63": -2 ** 63, "2p63": 2 ** 63, "m2p63m1": -2 ** 63 - 1,
        "2p64": 2 ** 64, "m2p64": -2 ** 64,
        "m1": -1, "m255": -255, "m256": -256, "m65536": -65536,
        "long1_max": big - 1, "long4_min_pos": big, "long1_min": -big, "long4_max_neg": -big - 1,
        "300byte": rnd.getrandbits(8 * 300 - 1) | (1 << (8 * 300 - 2)),
        "m300byte": -(rnd.getrandbits(8 * 300 - 1) | (1 << (8 * 300 - 2))),
    }
    for k, x in ints.items():
        v["int_" + k] = x
    v["ints_all"] = list(ints.values())

    floats = {
        "0": 0.0, "m0": -0.0, "1_5": 1.5, "1e16": 1e16, "1em5": 1e-5, "0_1": 0.1,
        "nan": float("nan"), "inf": float("inf"), "minf": float("-inf"),
        "denorm_min": 5e-324, "max": 1.7976931348623157e308, "m2_5": -2.5,
    }
    for k, x in floats.items():
        v["float_" + k] = x
    v["floats_all"] = list(floats.values())

    strs = {
        "empty": "", "ascii": "hello, world", "latin1": "caf\xe9 \xff\xa0", "bmp": "\u0416\u4e2d\u20ac\uffff",
        "astral": "\U0001F600", "astral_mix": "a\U0001F600b\U00010000c\U0010FFFF",
        "surr_d800": "\ud800", "surr_dfff": "\udfff", "surr_mid": "a\udc80b",
        "surr_pair_split": "\ud83d\ude00",   # two lone surrogates that would pair in UTF-16
        "backslash": "a\\b", "newline": "a\nb", "cr": "a\rb", "nul": "a\x00b", "ctrl_z": "a\x1ab",
        "squote": "it's", "dquote": 'say "hi"', "lit_u1234": "\\u1234", "lit_x41": "\\x41",
        "quotes_mix": "'\"'\\'",
        "len255": "x" * 255, "len256": "y" * 256, "len65536": "z" * 65536,
        "eacute128": "\xe9" * 128,            # 128 chars, 256 UTF-8 bytes
        "eacute127": "\xe9" * 127 + "a",      # 255 UTF-8 bytes
    }
    for k, x in strs.items():
        v["str_" + k] = x
    v["strs_all"] = [s for s in strs.values() if len(s) < 1000]

    v["bytes_empty"] = b""
    v["bytes_all256"] = bytes(range(256))
    v["bytes_len255"] = bytes(rnd.getrandbits(8) for _ in range(255))
    v["bytes_len256"] = bytes(rnd.getrandbits(8) for _ in range(256))
    v["bytes_len70000"] = bytes(rnd.getrandbits(8) for _ in range(70000))
    v["bytes_text"] = b"hello\n\\'\""
    v["bytearray_empty"] = bytearray()
    v["bytearray_small"] = bytearray(b"abc\x00\xff")
    v["bytearray_300"] = bytearray(rnd.getrandbits(8) for _ in range(300))

    for n in range(5):
        v["list_%d" % n] = list(range(n))
        v["tuple_%d" % n] = tuple(range(10, 10 + n))
    v["tuple_nested"] = ((), ((),), (1, (2, (3, (4,)))))
    v["dict_empty"] = {}
    v["dict_small"] = {"a": 1, "b": [2, 3], "c": {"d": None}}
    v["dict_mixed_keys"] = {
        1: "int", "s": "str", (1, 2): "tuple", b"b": "bytes", 2.5: "float",
        frozenset({3, 4}): "frozenset", None: "none", -7: "neg", 2 ** 70: "bigint",
        (): "empty tuple", "": "empty str",
    }
    v["dict_1_and_1_0"] = {1: "a", 1.0: "b"}          # Python keeps one key: {1: 'b'}
    v["dict_true_and_1"] = {True: "t", 1: "one"}      # {True: 'one'}
    v["nested"] = {"list": [1, [2, [3, {"x": (4, 5)}]]], "tuple": ([], {}, set()), "n": None}

    shared_list = [1, 2, 3]
    v["shared_list_in_tuple"] = (shared_list, shared_list)
    shared_dict = {"k": "v"}
    v["shared_dict_values"] = {"a": shared_dict, "b": shared_dict}
    shared_tuple = (1, "two", 3.0)
    v["shared_tuple"] = [shared_tuple, shared_tuple, (shared_tuple,)]
    shared_str = "shared string"
    v["shared_str"] = [shared_str, shared_str]
    shared_ba = bytearray(b"ba")
    v["shared_bytearray"] = [shared_ba, shared_ba]
    shared_set = {1, 2}
    v["shared_set"] = [shared_set, (shared_set,), shared_set]
    shared_fs = frozenset({"x"})
    v["shared_frozenset"] = [shared_fs, shared_fs]

    rec_list = [1]
    rec_list.append(rec_list)
    v["recursive_list"] = rec_list
    rec_dict = {"name": "d"}
    rec_dict["self"] = rec_dict
    v["recursive_dict"] = rec_dict
    rec_lt = ["head"]
    rec_lt.append((rec_lt, "tail"))
    v["recursive_list_tuple"] = rec_lt
    mutual_a, mutual_b = [], {}
    mutual_a.append(mutual_b)
    mutual_b["a"] = mutual_a
    v["recursive_mutual"] = [mutual_a, mutual_b]
    rec_set_holder = []
    rec_set_holder.append({(1, 2)})
    rec_set_holder.append(rec_set_holder)
    v["recursive_with_set"] = rec_set_holder

    for n in (1000, 1001, 2500, 3000):
        v["list_%d" % n] = list(range(n))
        v["dict_%d" % n] = {i: str(i) for i in range(n)}
        v["set_%d" % n] = set(range(n))
    v["tuple_1001"] = tuple(range(1001))
    v["frozenset_1500"] = frozenset(range(-750, 750))
    v["set_1500_str"] = {"s%d" % i for i in range(1500)}

    v["set_empty"] = set()
    v["set_small"] = {1, "a", None, 2.5, b"b"}
    v["set_of_tuples"] = {(1, 2), (3, "x"), ((), ())}
    v["set_of_frozensets"] = {frozenset(), frozenset({1}), frozenset({1, 2}), frozenset({frozenset({3})})}
    v["frozenset_empty"] = frozenset()
    v["frozenset_small"] = frozenset({3, 2, 1, "c"})
    v["frozenset_of_tuples"] = frozenset({(1,), (2, 2), ("a", b"b")})

    v["complex_1p2j"] = 1 + 2j
    v["complex_m0j"] = -0.0j
    v["complex_nan"] = complex(float("nan"), float("nan"))
    v["complex_inf"] = complex(float("inf"), -0.0)
    v["complexes"] = [1 + 2j, -0.0j, complex(0.1, -1e300)]

    v["nested_200"] = nested_list(200)
    v["nested_tuples_50"] = _nested_tuple(50)
    v["mixed_bag"] = {
        "none": None, "bools": [True, False], "ints": [0, -1, 255, 2 ** 40, -2 ** 100],
        "floats": (0.5, -0.0, float("inf")), "str": "caf\xe9\U0001F600\udc80",
        "bytes": b"\x00\x01", "bytearray": bytearray(b"\xfe"), "tuple": (1, (2, 3)),
        "set": {1, 2}, "frozenset": frozenset({"a"}), "complex": 3 - 4j,
        "shared": [shared_list, shared_list], "recursive": rec_list,
        "dict": {(1, 2): [None], b"k": {}}, "empty": [[], (), {}, set(), frozenset(), "", b""],
    }
    return v


def _nested_tuple(depth):
    v = ()
    for i in range(depth):
        v = (i, v)
    return v


def record_values():
    v = collections.OrderedDict()
    v["record_point"] = R.Point(1, 2)
    v["record_point_strs"] = R.Point("x", b"y")
    v["record_point2"] = R.Point2(3, 4)
    v["record_kwpoint"] = R.KwPoint(5, y=6)
    v["record_slotted"] = R.Slotted(1, "b")
    v["record_withstate"] = R.WithState([1], {"two": 2})
    ml = R.MyList([1, "two", 3.0])
    v["record_mylist"] = ml
    ml2 = R.MyList(range(1500))
    ml2.tag = "big"
    v["record_mylist_attr_1500"] = ml2
    v["record_mydict"] = R.MyDict(a=1, b=[2])
    md2 = R.MyDict({i: i * i for i in range(1200)})
    md2.note = "n"
    v["record_mydict_attr_1200"] = md2
    v["record_ordereddict"] = collections.OrderedDict([("z", 1), ("a", 2)])
    v["record_defaultdict"] = collections.defaultdict(list, {"k": [1]})
    p = R.Point(0, 0)
    v["record_shared"] = [p, p, (p,)]
    n = R.Node("loop")
    n.link = n
    v["record_recursive"] = n
    a, b = R.Node("a"), R.Node("b")
    a.link, b.link = b, a
    v["record_mutual"] = [a, b]
    v["record_nested"] = R.Node("outer", R.Node("inner", R.Point(1, [2])))
    v["record_in_frozenset"] = frozenset({R.Point2(1, 2), R.Point2(3, 4)})
    v["record_globals"] = [R.Point, R.helper, len, collections.OrderedDict]
    v["record_natives_inside"] = R.Point(b"bytes\x00\xff", {1, frozenset({2})})
    v["record_natives_inside2"] = R.Node(bytearray(b"ba"), [1 + 2j, b"", set()])
    v["record_in_list_shared_state"] = [R.Point(shared_l := [1], shared_l), shared_l]
    return v


def stream_values():
    v = collections.OrderedDict()
    lst = [1, 2, 3]
    v["stream_shared"] = [lst, lst, {"again": lst}, (lst,)]   # 2nd pickle is just a GET
    v["stream_simple"] = [1, "two", [3.0], None, b"\x04"]
    d = {"x": [1]}
    v["stream_mutated_between"] = [d, d["x"], d]
    return v


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------

def py_dumps(value, proto):
    f = io.BytesIO()
    pickle._Pickler(f, proto).dump(value)
    return f.getvalue()


def main(argv):
    out = argv[1] if len(argv) > 1 else DEFAULT_OUT
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.endswith(".pkl") or name == "MANIFEST.tsv":
            os.remove(os.path.join(out, name))
    manifest = []
    left_out = []

    def write(fname, data, mode, stream):
        with open(os.path.join(out, fname), "wb") as fh:
            fh.write(data)
        manifest.append((fname, mode, "1" if stream else "0", str(len(data)),
                         hashlib.sha256(data).hexdigest()))

    for table, mode in ((data_values(), "data"), (record_values(), "records")):
        for name, value in table.items():
            for proto in PROTOCOLS:
                try:
                    c = pickle.dumps(value, proto)
                except Exception as e:  # noqa: BLE001
                    left_out.append("%s.p%d: %s: %s" % (name, proto, type(e).__name__, e))
                    continue
                write("%s.p%d.c.pkl" % (name, proto), c, mode, False)
                py = py_dumps(value, proto)
                if py != c:
                    write("%s.p%d.py.pkl" % (name, proto), py, mode, False)
                try:
                    opt = pickletools.optimize(c)
                except Exception as e:  # noqa: BLE001
                    left_out.append("%s.p%d.opt: %s: %s" % (name, proto, type(e).__name__, e))
                    opt = c
                if opt != c:
                    write("%s.p%d.opt.pkl" % (name, proto), opt, mode, False)

    for name, items in stream_values().items():
        for proto in PROTOCOLS:
            f = io.BytesIO()
            p = pickle.Pickler(f, proto)
            for i, item in enumerate(items):
                if name == "stream_mutated_between" and i == 1:
                    d = items[0]
                    d["x"].append(2)      # the 2nd pickle refers to d["x"] by GET
                p.dump(item)
            if name == "stream_mutated_between":
                items[0]["x"].pop()        # restore for the next protocol
            write("%s.p%d.pkl" % (name, proto), f.getvalue(), "data", True)

    manifest.sort()
    with open(os.path.join(out, "MANIFEST.tsv"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("# file\tmode\tstream\tsize\tsha256\n")
        for row in manifest:
            fh.write("\t".join(row) + "\n")
    total = sum(int(r[3]) for r in manifest)
    print("gen_corpus: %d files, %d bytes in %s" % (len(manifest), total, out))
    for msg in left_out:
        print("  left out: " + msg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
