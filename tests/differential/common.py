"""Shared pieces of the differential harness: the case record, the tripwire payloads, an
opcode reader that reads any run of opcodes (not only a whole pickle), and the pickle-level
mutations (opcode insert/delete/duplicate/splice, memo indices, FRAME lengths, byte flips).

Standard library only.
"""
import io
import os
import pickletools
import struct
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
TRIPWIRE_DIR = os.path.join(HERE, "tripwire")

CODE2OP = {op.code.encode("latin-1"): op for op in pickletools.opcodes}


@dataclass
class Case:
    """One input: the bytes picklewarden's entry point reads and, when it accepts them, the real
    loader reads."""

    reader: str  # joblib | numpy | pickle-numpy | pickle-data | mitogen | torch
    fmt: str  # what was written: joblib-zlib, npy, npz, pickle-p2, mitogen-msg, torch-zip...
    data: bytes
    ext: str  # file name ending the loader sees (.joblib, .npy, .npz, .pkl, .pt)
    entry: list  # picklewarden arguments before the path, e.g. ["scan"]
    loader: str  # the loader the child runs (sandbox.LOADERS)
    muts: list = field(default_factory=list)  # mutation labels, "family" or "family=detail"
    family: str = ""  # a cost family's name (its N grows), else ""
    n: int = 0

    def classes(self):
        """The mutation classes (label families), without the labels that only say how a
        payload was placed (`payload`, `desync`) or what the writer chose (`writer.`)."""
        return sorted({m.split("=", 1)[0] for m in self.muts
                       if not m.startswith(("payload", "desync", "writer."))})


# ---------------------------------------------------------------- tripwire payloads
#
# Each payload pushes exactly one object when a real unpickler runs it (so `payload + b"0"` is
# stack-neutral), and reaches the tripwire: the pw_tripwire module (imported => marked), or
# a classic code-running global redirected to write a mark.

SYSTEM_CMD = b'echo x > "$PW_TRIPWIRE_DIR/mark-os-system"'
EVAL_CODE = (b"open(__import__('os').environ['PW_TRIPWIRE_DIR']+'/mark-eval','w').close()")


def _su(s):  # SHORT_BINUNICODE
    return b"\x8c" + bytes([len(s)]) + s


def _bu(s):  # BINUNICODE
    return b"X" + struct.pack("<I", len(s)) + s


PAYLOADS = {
    # form name: bytes pushing one object
    "GLOBAL-REDUCE": b"cpw_tripwire\nmark\n)R",
    "STACK_GLOBAL-REDUCE": _su(b"pw_tripwire") + _su(b"mark") + b"\x93)R",
    "NEWOBJ": b"cpw_tripwire\nObj\n)\x81",
    "NEWOBJ-BUILD": b"cpw_tripwire\nObj\n)\x81}b",
    "OBJ": b"(cpw_tripwire\nObj\no",
    "INST": b"(ipw_tripwire\nObj\n",
    "GLOBAL-only": b"cpw_tripwire\nanything\n",
    "os.system": b"cos\nsystem\n" + _bu(SYSTEM_CMD) + b"\x85R",
    "posix.system": b"cposix\nsystem\n" + _bu(SYSTEM_CMD) + b"\x85R",
    "builtins.eval": b"cbuiltins\neval\n" + _bu(EVAL_CODE) + b"\x85R",
    "__builtin__.eval": b"c__builtin__\neval\n" + _bu(EVAL_CODE) + b"\x85R",
}
# The forms a protocol 4 or 5 writer uses (STACK_GLOBAL, SHORT_BINUNICODE), for the streams
# whose real writer writes those (joblib); CPython reads every form in any protocol.
MODERN = {
    "STACK_GLOBAL-NEWOBJ": _su(b"pw_tripwire") + _su(b"Obj") + b"\x93)\x81",
    "STACK_GLOBAL-NEWOBJ-BUILD": _su(b"pw_tripwire") + _su(b"Obj") + b"\x93)\x81}b",
    "STACK_GLOBAL-posix.system": _su(b"posix") + _su(b"system") + b"\x93" + _su(SYSTEM_CMD)
    + b"\x85R",
    "STACK_GLOBAL-builtins.eval": _su(b"builtins") + _su(b"eval") + b"\x93" + _su(EVAL_CODE)
    + b"\x85R",
}
PAYLOADS.update(MODERN)
PAYLOAD_NAMES = sorted(PAYLOADS)
MODERN_NAMES = sorted(MODERN) + ["STACK_GLOBAL-REDUCE"]


def payload(rng, neutral=True, modern=False):
    """(form name, bytes) of a payload pushing one object (then POP when `neutral`); with
    `modern`, mostly the forms a protocol 4 writer uses."""
    names = MODERN_NAMES if modern and rng.random() < 0.7 else PAYLOAD_NAMES
    name = rng.choice(names)
    return name, PAYLOADS[name] + (b"0" if neutral else b"")


def filler(n):
    """n >= 2 bytes of stack-neutral opcodes (NONE POP pairs, a BININT1 POP triple when n is
    odd)."""
    assert n >= 2 or n == 0
    if n % 2:
        return b"K\x000" + b"N0" * ((n - 3) // 2)
    return b"N0" * (n // 2)


# ---------------------------------------------------------------- opcodes


@dataclass
class Op:
    pos: int
    name: str
    arg: object
    raw: bytes


def read_ops(data, start=0, end=None, stop=True):
    """The opcodes of data[start:end], in order; after STOP it ends when `stop`. Raises
    ValueError on an unknown opcode or an argument running past `end`."""
    end = len(data) if end is None else end
    f = io.BytesIO(data[:end])
    pos = start
    out = []
    while pos < end:
        code = data[pos:pos + 1]
        op = CODE2OP.get(code)
        if op is None:
            raise ValueError("no opcode %r at %d" % (code, pos))
        f.seek(pos + 1)
        try:
            arg = op.arg.reader(f) if op.arg is not None else None
        except Exception as e:
            raise ValueError("bad argument of %s at %d: %s" % (op.name, pos, e))
        new = f.tell()
        if new > end:
            raise ValueError("argument past the end")
        out.append(Op(pos, op.name, arg, data[pos:new]))
        pos = new
        if stop and op.name == "STOP":
            break
    return out


def enc_int(n):
    """A stack push of int n in the shortest binary form (protocol 1+)."""
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if 0 <= n < 65536:
        return b"M" + struct.pack("<H", n)
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


def enc_get(i):
    return b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)


def enc_put(i):
    return b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)


INSERTABLE = [b"N", b"0", b"(", b"1", b"2", b")", b"]", b"}", b"t", b"R", b"b", b"s", b"u",
              b"a", b"e", b"\x94", b"\x85", b"\x86", b"\x87", b"K\x01", b"\x88", b"l", b"d",
              b"\x8f", b"\x90", b"\x91", b"\x81", b"o", b".", b"\x80\x02", b"\x95" + bytes(8)]


def mutate_pickle(rng, data, n=1):
    """Pickle-level mutations of one pickle (or a run of opcodes): returns (bytes, labels).
    Unreadable input gets byte-level mutations only."""
    labels = []
    for _ in range(n):
        try:
            ops = read_ops(data, stop=False)
        except ValueError:
            ops = None
        choice = rng.random()
        if ops and len(ops) > 2 and choice < 0.7:
            i = rng.randrange(1, len(ops))
            op = ops[i]
            k = rng.randrange(9)
            if k == 0:
                data = data[:op.pos] + data[op.pos + len(op.raw):]
                labels.append("op-delete=%s" % op.name)
            elif k == 1:
                ins = rng.choice(INSERTABLE)
                data = data[:op.pos] + ins + data[op.pos:]
                labels.append("op-insert=%s" % CODE2OP[ins[:1]].name)
            elif k == 2:
                data = data[:op.pos] + op.raw + data[op.pos:]
                labels.append("op-duplicate=%s" % op.name)
            elif k == 3:
                j = rng.randrange(1, len(ops))
                o2 = ops[j]
                data = data[:op.pos] + o2.raw + data[op.pos:]
                labels.append("op-splice=%s" % o2.name)
            elif k == 4 and op.name in ("BINGET", "LONG_BINGET", "BINPUT", "LONG_BINPUT"):
                idx = rng.choice([0, 1, op.arg + 1, max(op.arg - 1, 0), 255, 256, 2**16, 2**27])
                new = enc_get(idx) if "GET" in op.name else enc_put(idx)
                data = data[:op.pos] + new + data[op.pos + len(op.raw):]
                labels.append("memo-index=%s" % op.name)
            elif k == 5:
                frames = [o for o in ops if o.name == "FRAME"]
                if frames:
                    o = rng.choice(frames)
                    ln = rng.choice([0, 1, o.arg - 1, o.arg + 1, o.arg + rng.randrange(1, 64),
                                     2**31, 2**63])
                    data = data[:o.pos] + b"\x95" + struct.pack("<Q", ln) + data[o.pos + 9:]
                    labels.append("frame-length")
                else:
                    rest = len(data) - op.pos
                    data = data[:op.pos] + b"\x95" + struct.pack("<Q", max(rest - 1, 0)) + data[op.pos:]
                    labels.append("frame-insert")
            elif k == 6:
                name, p = payload(rng)
                data = data[:op.pos] + p + data[op.pos:]
                labels.append("inject=%s" % name)
            elif k == 7:
                # change an int argument
                ints = [o for o in ops if o.name in ("BININT1", "BININT2", "BININT", "LONG1")]
                if ints:
                    o = rng.choice(ints)
                    v = rng.choice([0, 1, -1, 2, 255, 256, 2**31 - 1, -2**31, 2**63, o.arg * 2,
                                    o.arg + 1, o.arg - 1])
                    data = data[:o.pos] + enc_int(v) + data[o.pos + len(o.raw):]
                    labels.append("int-arg")
            else:
                data = data[:op.pos]
                labels.append("truncate")
        elif data:
            i = rng.randrange(len(data))
            if rng.random() < 0.5:
                data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
                labels.append("byte-flip")
            else:
                data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
                labels.append("byte-set")
    return data, labels


def inject_payload(rng, data):
    """A stack-neutral payload at a random opcode boundary of a pickle (not before PROTO)."""
    ops = read_ops(data, stop=True)
    i = rng.randrange(1, len(ops)) if len(ops) > 1 else 0
    name, p = payload(rng)
    at = ops[i].pos
    return data[:at] + p + data[at:], "inject=%s" % name


def drop_frames(data):
    """The pickle without its FRAME opcodes (framing is optional)."""
    ops = read_ops(data)
    return b"".join(o.raw for o in ops if o.name != "FRAME")
