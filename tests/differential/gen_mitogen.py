"""Mitogen: replies a child sends its parent, pickled by Mitogen's own `Message.pickled`
(protocol 2, Mitogen's classes), pickle-level mutations and payloads, and the cost family of
`Kwargs(d)` called N times on one memoized N-key dict. Reader `mitogen`: the real
`Message.unpickle` (its `_find_global`, a Router stub that keeps one Context per id, as
tests/python/mitogen_keys.py has it) vs `check --policy mitogen` on the payload, and vs
`filter --mitogen --framed` on a frame, the parent loading the filter's canonical rewrite."""
import struct
import threading

import mitogen.core as mc

from common import Case, inject_payload, mutate_pickle, enc_get

HEADER = struct.Struct(">hLLLLLL")
REPLY_HANDLE = 1000


def router_stub():
    r = mc.Router.__new__(mc.Router)
    r._context_by_id = {}
    r._write_lock = threading.Lock()
    r.context_class = mc.Context
    return r


def unpickle_file(path):
    with open(path, "rb") as f:
        data = f.read()
    m = mc.Message(data=data, handle=REPLY_HANDLE)
    m.router = router_stub()
    return m.unpickle(throw=False)


def frame(payload, handle=REPLY_HANDLE, reply_to=0, enc=mc.Message.ENC_MGC):
    return HEADER.pack(enc, 0, 1, 1, handle, reply_to, len(payload)) + payload


def accepted_payloads(stream):
    """The payloads of the frames `filter` handed on (not its dead refusal notices)."""
    out, pos = [], 0
    while pos + HEADER.size <= len(stream):
        enc, dst, src, auth, handle, reply_to, length = HEADER.unpack_from(stream, pos)
        body = stream[pos + HEADER.size:pos + HEADER.size + length]
        pos += HEADER.size + length
        if reply_to != mc.IS_DEAD:
            out.append(body)
    return out


def sample_value(rng, depth=0):
    k = rng.randrange(12 if depth < 3 else 6)
    if k == 0:
        return rng.choice([None, True, 0, -7, 2**40, 1.5, "text", "é" * 5])
    if k == 1:
        return rng.choice([b"", b"bytes\x00\xff", b"x" * 300])
    if k == 2:
        return mc.Blob(b"blob" * rng.randrange(5))
    if k == 3:
        return mc.Secret("s3cret")
    if k == 4:
        return mc.CallError("boom %d" % rng.randrange(9))
    if k == 5:
        return mc.Context(None, rng.randrange(1, 20), rng.choice([None, "ctx"]))
    if k == 6:
        return mc.Kwargs({"a": sample_value(rng, depth + 1), "b": [1]})
    if k == 7:
        return [sample_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if k == 8:
        return tuple(sample_value(rng, depth + 1) for _ in range(rng.randrange(4)))
    if k == 9:
        return {rng.choice(["k", 1, (2, "x")]): sample_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    if k == 10:
        return mc.Sender(mc.Context(None, 5), 1234)
    return mc.Kwargs({})


def mitogen_case(rng):
    obj = sample_value(rng)
    data = mc.Message.pickled(obj).data
    muts = []
    if rng.random() < 0.25:
        data, lab = inject_payload(rng, data)
        muts.append(lab)
    if rng.random() < 0.6 or not muts:
        data, labs = mutate_pickle(rng, data, n=rng.choice([1, 1, 2]))
        muts += labs
    if rng.random() < 0.5:
        return Case("mitogen", "mitogen-payload", data, ".bin", ["check", "--policy", "mitogen"],
                    "mitogen", muts)
    return Case("mitogen", "mitogen-filter", frame(data), ".bin",
                ["filter", "--mitogen", "--framed", "--on-reject", "drop"], "mitogen", muts)


# ---------------------------------------------------------------- cost family

class Family:
    def __init__(self, name, n0, n_max, make):
        self.name, self.n0, self.n_max, self._make = name, n0, n_max, make

    def make(self, n):
        return self._make(n)


def kwargs_payload(n):
    """{k0: 0, ...} memoized at 0, Kwargs memoized at 1, then [Kwargs(d)] * n through the
    memo: n dict copies of n keys (protocol 2, as Mitogen writes)."""
    out = bytearray(b"\x80\x02}q\x00(")
    for i in range(n):
        k = b"k%d" % i
        out += b"X" + struct.pack("<I", len(k)) + k + b"K\x00"
    out += b"u0cmitogen.core\nKwargs\nq\x01" + b"0](" 
    out += (enc_get(1) + enc_get(0) + b"\x85R") * n
    out += b"e."
    return bytes(out)


def kwargs_check(n):
    return Case("mitogen", "cost", kwargs_payload(n), ".bin", ["check", "--policy", "mitogen"],
                "mitogen", ["cost.kwargs-memo"])


def kwargs_filter(n):
    return Case("mitogen", "cost", frame(kwargs_payload(n)), ".bin",
                ["filter", "--mitogen", "--framed", "--on-reject", "drop"], "mitogen",
                ["cost.kwargs-memo-filter"])


COST_FAMILIES = [Family("cost.kwargs-memo", 64, 1 << 17, kwargs_check),
                 Family("cost.kwargs-memo-filter", 64, 1 << 17, kwargs_filter)]
