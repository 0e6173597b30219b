"""Plain Python data: real pickles of many shapes by CPython's pickler at protocols 0-5,
pickle-level mutations, tripwire payloads; and the cost families of the `data` policy
(record calls repeated through the memo). Reader `pickle-data`: pickle.loads vs `check
--policy data`."""
import pickle
import struct

from common import Case, inject_payload, mutate_pickle, enc_get


def sample_value(rng, depth=0):
    k = rng.randrange(16 if depth < 4 else 10)
    if k == 0:
        return rng.choice([None, True, False])
    if k == 1:
        return rng.choice([0, 1, -1, 255, 256, 2**31, -2**63, 2**64 + 1, 10**30])
    if k == 2:
        return rng.choice([0.0, -0.0, 1.5, float("inf"), 1e308, float("nan")])
    if k == 3:
        return rng.choice(["", "a", "é", "\u20ac" * 3, "x" * 300, "z"])
    if k == 4:
        return rng.choice([b"", b"\x00", b"\xff" * 40, bytes(range(256))])
    if k == 5:
        return bytearray(rng.choice([b"", b"ab", b"\x80" * 9]))
    if k == 6:
        return complex(rng.choice([0, 1.5]), rng.choice([-1, 2e10]))
    if k in (7, 8):
        return rng.choice(["str", 3, (1, 2)]) if depth > 5 else "s%d" % rng.randrange(9)
    if k == 9:
        return frozenset(rng.choice([(), (1, 2), ("a",)]))
    if k == 10:
        return [sample_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if k == 11:
        return tuple(sample_value(rng, depth + 1) for _ in range(rng.randrange(4)))
    if k == 12:
        return {rng.choice(["a", "b", 1, 2.5, (1, "x"), None, b"k"]): sample_value(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    if k == 13:
        return set(rng.choice([(), (1, 2), ("a", 3)]))
    if k == 14:
        shared = [1, "x"]
        return [shared, shared, (shared,)]
    r = []
    r.append(r)
    return r


def data_case(rng):
    obj = sample_value(rng)
    proto = rng.randrange(0, 6)
    data = pickle.dumps(obj, protocol=proto)
    muts = []
    if rng.random() < 0.3:
        data, lab = inject_payload(rng, data)
        muts.append(lab)
    if rng.random() < 0.7 or not muts:
        data, labs = mutate_pickle(rng, data, n=rng.choice([1, 1, 2]))
        muts += labs
    return Case("pickle-data", "pickle-p%d" % proto, data, ".pkl", ["check", "--policy", "data"],
                "pickle", muts)


# ---------------------------------------------------------------- cost families

class Family:
    def __init__(self, name, n0, n_max, make):
        self.name, self.n0, self.n_max, self._make = name, n0, n_max, make

    def make(self, n):
        return self._make(n)


def repeated_call(glob, arg_ops, n, proto=4):
    """PROTO, the argument pushed and memoized at 0, the global memoized at 1, then a list of
    n calls global(arg) through the memo: `[g(a), g(a), ...]`."""
    out = bytearray(b"\x80" + bytes([proto]))
    out += arg_ops + b"q\x00"  # BINPUT 0
    out += b"0" + glob + b"q\x01" + b"0"
    out += b"](" 
    call = enc_get(1) + enc_get(0) + b"\x85R"
    out += call * n
    out += b"e."
    return bytes(out)


def bytes_op(b):
    return (b"C" + bytes([len(b)]) if len(b) < 256 else b"B" + struct.pack("<I", len(b))) + b


def text_op(s):
    return b"X" + struct.pack("<I", len(s)) + s


BIG = 900 * 1024


def bytearray_memo(n):
    data = repeated_call(b"cbuiltins\nbytearray\n", bytes_op(b"\xab" * BIG), n)
    return Case("pickle-data", "cost", data, ".pkl", ["check", "--policy", "data"], "pickle",
                ["cost.bytearray-memo"])


def latin1_memo(n):
    # _codecs.encode(t, 'latin1'): the argument is a pair, memoized; each call makes n bytes
    arg = b"(" + text_op(b"\xc3\xa9" * (BIG // 2)) + text_op(b"latin1") + b"t"
    out = bytearray(b"\x80\x02" + arg + b"q\x00" + b"0" + b"c_codecs\nencode\nq\x01" + b"0" + b"](")
    out += (enc_get(1) + enc_get(0) + b"R") * n
    out += b"e."
    return Case("pickle-data", "cost", bytes(out), ".pkl", ["check", "--policy", "data"],
                "pickle", ["cost.latin1-memo"])


COST_FAMILIES = [Family("cost.bytearray-memo", 16, 1 << 16, bytearray_memo),
                 Family("cost.latin1-memo", 16, 1 << 16, latin1_memo)]
