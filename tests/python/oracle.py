#!/usr/bin/env python3
"""Test oracle for picklewarden: compares the Rust decoder's typed JSON with CPython.

Usage:
  python3 tests/python/oracle.py compare  --mode data|records [--encoding ENC]
          [--python2-str bytes|str] [--stream] [--no-lint] [--ignore-float-repr]
          [--context N] [-v] LINES_FILE
  python3 tests/python/oracle.py expected --mode data|records [--encoding ENC]
          [--python2-str bytes|str] [--stream] FILE...
  python3 tests/python/oracle.py selftest

LINES_FILE holds JSON lines, each {"file": PATH, "json": <typed-JSON document>} or
{"file": PATH, "error": TEXT}. PATH is a .pkl file or an xz-compressed .xz file; a relative PATH is
looked up from the current directory, then from the LINES_FILE's directory. `expected` prints
lines in the same format (the CPython side), so its output can be fed back to `compare`.

Modes:
  data     the value is what CPython's C unpickler returns. Python 2 STRING opcodes: with
           --python2-str bytes (the default unless --encoding is given) encoding="bytes",
           with --python2-str str encoding=--encoding (default latin1).
  records  first pickle.loads(data, encoding=ENC) (ENC = --encoding, default latin1); if that
           raises, the file is skipped. Otherwise the file is loaded again by the pure-Python
           unpickler, where only the natively decoded globals ((builtins|__builtin__).{set,
           frozenset, bytearray, complex, bytes} and _codecs.encode) are real and every other
           global becomes a record (see TYPED_JSON.md "object" nodes). If this record model
           refuses the file (e.g. REDUCE whose callable is a record, not a global), CPython's
           expectation is an error.

Both sides are rendered to canonical typed JSON (see render_* below) and compared as text.
A stream ({"values": [...]} in the Rust document, or --stream) is compared against every
pickle in the file loaded by one Unpickler (the memo is kept across load() calls).

Exit status: 0 when nothing mismatched, 1 otherwise (2 for usage errors).
Standard library only.
"""

import argparse
import decimal
import io
import json
import lzma
import re
import os
import pickle
import struct
import sys
import threading

FORMAT = "picklewarden-typed-json/1"
MUTABLE = frozenset({"list", "dict", "set", "bytearray", "object"})
NODE_TYPES = frozenset({
    "none", "bool", "int", "float", "str", "bytes", "bytearray", "list", "tuple", "dict",
    "set", "frozenset", "complex", "global", "object", "ref",
})
RECORD_KINDS = ("reduce", "newobj", "newobj_ex", "inst", "obj")
# expansion budget (immutable nodes are written out in full, so a DAG of shared tuples can be
# exponential); past this the oracle gives up on the file instead of hanging.
MAX_EXPANDED_NODES = 20_000_000


class CanonError(Exception):
    """The value cannot be put into canonical typed JSON."""


class RecordModelError(Exception):
    """The records-mode unpickler refuses the stream (the record model cannot express it)."""


# --------------------------------------------------------------------------------------------
# Intermediate graph (both sides are converted into this, then rendered by one renderer)
# --------------------------------------------------------------------------------------------

class N:
    """One node of the value graph.

    t: node type (TYPED_JSON.md names, plus "complex").
    f: scalar JSON fields (e.g. {"value": "12"} for int, {"hex": ...} for bytes, {"kind": ...}
       for object).
    items: children of list/tuple/set/frozenset/complex ([real, imag]).
    pairs: (key, value) children of dict.
    object nodes: callable, args, kwargs (or None), state/has_state, listitems, dictitems.
    """

    __slots__ = ("t", "f", "items", "pairs", "callable", "args", "kwargs", "state",
                 "has_state", "listitems", "dictitems")

    def __init__(self, t, f=None):
        self.t = t
        self.f = f if f is not None else {}
        self.items = None
        self.pairs = None
        self.callable = None
        self.args = None
        self.kwargs = None
        self.state = None
        self.has_state = False
        self.listitems = None
        self.dictitems = None

    def children(self):
        t = self.t
        if self.items is not None:
            return self.items
        if t == "dict":
            out = []
            for k, v in self.pairs:
                out.append(k)
                out.append(v)
            return out
        if t == "object":
            out = [self.callable, self.args]
            if self.kwargs is not None:
                out.append(self.kwargs)
            if self.has_state:
                out.append(self.state)
            out.extend(self.listitems or ())
            for k, v in self.dictitems or ():
                out.append(k)
                out.append(v)
            return out
        return ()


def int_text(n):
    """Decimal text of any int, without the 4300-digit limit, fast for huge ints (divide and
    conquer through the decimal module, as CPython 3.12's _pylong does)."""
    if n.bit_length() <= 10000:
        return str(n)
    D = decimal.Decimal
    D2 = D(2)
    mem = {}

    def w2pow(w):
        r = mem.get(w)
        if r is None:
            if w <= 128:
                r = D2 ** w
            else:
                h = w >> 1
                r = w2pow(h) * w2pow(w - h)
            mem[w] = r
        return r

    def inner(m, w):
        if w <= 128:
            return D(m)
        h = w >> 1
        hi = m >> h
        lo = m - (hi << h)
        return inner(lo, h) + inner(hi, w - h) * w2pow(h)

    with decimal.localcontext() as ctx:
        ctx.prec = decimal.MAX_PREC
        ctx.Emax = decimal.MAX_EMAX
        ctx.Emin = decimal.MIN_EMIN
        ctx.traps[decimal.Inexact] = 1
        d = inner(-n if n < 0 else n, n.bit_length())
    text = format(d, "f")
    return "-" + text if n < 0 else text


_CANON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)\Z")
_ANY_INT = re.compile(r"[+-]?[0-9]+\Z")


def canonical_int_text(v):
    """Canonical decimal text of a decimal string (None if it is not one)."""
    if _CANON_INT.match(v):
        return "0" if v == "-0" else v
    if not _ANY_INT.match(v):
        return None
    neg = v.startswith("-")
    digits = v.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if neg and digits != "0" else digits


def float_fields(x):
    return {"bits": struct.pack(">d", x).hex(), "repr": repr(x)}


def str_fields(s):
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return {"surrogatepass_hex": s.encode("utf-8", "surrogatepass").hex()}
    return {"value": s}


# --------------------------------------------------------------------------------------------
# Records-mode unpickler
# --------------------------------------------------------------------------------------------

NATIVE_GLOBALS = {
    ("builtins", "set"): set, ("__builtin__", "set"): set,
    ("builtins", "frozenset"): frozenset, ("__builtin__", "frozenset"): frozenset,
    ("builtins", "bytearray"): bytearray, ("__builtin__", "bytearray"): bytearray,
    ("builtins", "complex"): complex, ("__builtin__", "complex"): complex,
    ("builtins", "bytes"): bytes, ("__builtin__", "bytes"): bytes,
}


def _codecs_encode():
    import _codecs
    return _codecs.encode


class RecordGlobal:
    """A non-native global: calling it records a REDUCE/INST/OBJ; as a value it is the global."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise RecordModelError("keyword call of a global")
        return Record("reduce", self, args)

    def __repr__(self):
        return "RecordGlobal(%r, %r)" % (self.module, self.name)


class NativeGlobal:
    """A natively decoded global: calls the real builtin; as a value it is the global (with the
    module/name spelling of the stream)."""

    __slots__ = ("module", "name", "real")

    def __init__(self, module, name, real):
        self.module = module
        self.name = name
        self.real = real

    def __call__(self, *args, **kwargs):
        return self.real(*args, **kwargs)


class Record:
    """How a record global was used: kind, callable, args (+ kwargs, state, items)."""

    __slots__ = ("kind", "callable", "args", "kwargs", "state", "has_state", "listitems",
                 "dictitems", "__weakref__")

    def __init__(self, kind, callable_, args, kwargs=None):
        if not isinstance(args, tuple):
            raise RecordModelError("%s arguments are a %s, not a tuple" % (kind, type(args).__name__))
        if kwargs is not None and not isinstance(kwargs, dict):
            raise RecordModelError("NEWOBJ_EX kwargs are a %s, not a dict" % type(kwargs).__name__)
        self.kind = kind
        self.callable = callable_
        self.args = args
        self.kwargs = kwargs
        self.state = None
        self.has_state = False
        self.listitems = []
        self.dictitems = []

    # BUILD (pickle looks up __setstate__ on the instance); a later BUILD replaces the state
    def __setstate__(self, state):
        self.state = state
        self.has_state = True

    # APPEND / APPENDS
    def append(self, item):
        self.listitems.append(item)

    def extend(self, items):
        self.listitems.extend(items)

    # SETITEM / SETITEMS
    def __setitem__(self, key, value):
        self.dictitems.append((key, value))

    def __call__(self, *args, **kwargs):
        raise RecordModelError("a record object is called (REDUCE/OBJ callable is not a global)")

    def __repr__(self):
        return "Record(%s %s.%s)" % (self.kind, self.callable.module, self.callable.name)


class RecordUnpickler(pickle._Unpickler):
    """Pure-Python unpickler in which non-native globals become records."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._globals = {}

    def find_class(self, module, name):
        key = (module, name)
        g = self._globals.get(key)
        if g is None:
            real = NATIVE_GLOBALS.get(key)
            if key == ("_codecs", "encode"):
                real = _codecs_encode()
            g = NativeGlobal(module, name, real) if real is not None else RecordGlobal(module, name)
            self._globals[key] = g
        return g

    def persistent_load(self, pid):
        raise RecordModelError("persistent id %r" % (pid,))

    def get_extension(self, code):
        raise RecordModelError("extension code %r" % (code,))

    def load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(_newobj(cls, args, None, "newobj"))
    dispatch[pickle.NEWOBJ[0]] = load_newobj

    def load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(_newobj(cls, args, kwargs, "newobj_ex"))
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex

    # INST and OBJ records say which opcode made them (CPython runs them as _instantiate,
    # which calls cls.__new__ for no arguments, where REDUCE calls the class).
    def load_inst(self):
        self._inst_kind = "inst"
        pickle._Unpickler.load_inst(self)
    dispatch[pickle.INST[0]] = load_inst

    def load_obj(self):
        self._inst_kind = "obj"
        pickle._Unpickler.load_obj(self)
    dispatch[pickle.OBJ[0]] = load_obj

    def _instantiate(self, klass, args):
        if isinstance(klass, RecordGlobal):
            self.append(Record(self._inst_kind, klass, tuple(args)))
            return
        pickle._Unpickler._instantiate(self, klass, args)

    def load_build(self):
        inst = self.stack[-1]
        if isinstance(inst, (RecordGlobal, NativeGlobal)):
            raise RecordModelError("BUILD on a global")
        pickle._Unpickler.load_build(self)
    dispatch[pickle.BUILD[0]] = load_build


def _newobj(cls, args, kwargs, kind):
    if isinstance(cls, RecordGlobal):
        return Record(kind, cls, args, kwargs if kind == "newobj_ex" else None)
    if isinstance(cls, NativeGlobal):
        real = cls.real
        if not isinstance(real, type):
            raise RecordModelError("%s on a non-class native" % kind)
        if kwargs:
            return real.__new__(real, *args, **kwargs)
        return real.__new__(real, *args)
    raise RecordModelError("%s on a %s" % (kind, type(cls).__name__))


# --------------------------------------------------------------------------------------------
# Python value -> graph
# --------------------------------------------------------------------------------------------

_NONE_FIELDS = {}


def from_python(value, memo):
    """Convert a CPython value (data or records mode) into the graph. memo: id -> (obj, N)."""
    if value is None:
        return N("none")
    t = type(value)
    if t is bool:
        return N("bool", {"value": value})
    if t is int:
        return N("int", {"value": int_text(value)})
    if t is float:
        return N("float", float_fields(value))
    if t is str:
        return N("str", str_fields(value))
    if t is bytes:
        return N("bytes", {"hex": value.hex()})
    if t is complex:
        n = N("complex")
        n.items = [N("float", float_fields(value.real)), N("float", float_fields(value.imag))]
        return n
    if t is RecordGlobal or t is NativeGlobal:
        return N("global", {"module": value.module, "name": value.name})
    key = id(value)
    hit = memo.get(key)
    if hit is not None:
        return hit[1]
    if t is bytearray:
        n = N("bytearray", {"hex": bytes(value).hex()})
        memo[key] = (value, n)
        return n
    if t is list or t is tuple or t is set or t is frozenset:
        n = N({list: "list", tuple: "tuple", set: "set", frozenset: "frozenset"}[t])
        memo[key] = (value, n)
        n.items = [from_python(x, memo) for x in value]
        return n
    if t is dict:
        n = N("dict")
        memo[key] = (value, n)
        n.pairs = [(from_python(k, memo), from_python(v, memo)) for k, v in value.items()]
        return n
    if t is Record:
        n = N("object", {"kind": value.kind})
        memo[key] = (value, n)
        n.callable = from_python(value.callable, memo)
        n.args = from_python(value.args, memo)
        if value.kind == "newobj_ex":
            n.kwargs = from_python(value.kwargs, memo)
        if value.has_state:
            n.has_state = True
            n.state = from_python(value.state, memo)
        n.listitems = [from_python(x, memo) for x in value.listitems]
        n.dictitems = [(from_python(k, memo), from_python(v, memo)) for k, v in value.dictitems]
        return n
    if isinstance(value, type) or t.__name__ in ("builtin_function_or_method", "function"):
        # a real global (data mode); module/name as Python 3 spells them
        return N("global", {"module": value.__module__, "name": value.__qualname__})
    raise CanonError("no typed-JSON form for a Python %s.%s" % (t.__module__, t.__qualname__))


# --------------------------------------------------------------------------------------------
# Rust typed-JSON document -> graph (with a lint of the document's form)
# --------------------------------------------------------------------------------------------

_HEX = frozenset("0123456789abcdef")
_ALLOWED_KEYS = {
    "none": set(), "bool": {"value"}, "int": {"value"}, "float": {"bits", "repr"},
    "str": {"value", "surrogatepass_hex"}, "bytes": {"hex"}, "bytearray": {"hex"},
    "list": {"items"}, "tuple": {"items"}, "set": {"items"}, "frozenset": {"items"},
    "dict": {"items"}, "complex": {"real", "imag"}, "global": {"module", "name"},
    "object": {"kind", "callable", "args", "kwargs", "state", "listitems", "dictitems"},
}


class DocReader:
    def __init__(self, lint=True, float_repr=True):
        self.lint = lint
        self.float_repr = float_repr
        self.problems = []
        self.defs = {}        # id -> json node dict
        self.next_id = 0
        self.built = {}       # id(json dict) -> N

    def problem(self, msg):
        if len(self.problems) < 20:
            self.problems.append(msg)

    def fatal(self, msg):
        raise CanonError("bad document: " + msg)

    # pass 1: collect id definitions, check the form
    def scan(self, node, where):
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            self.fatal("%s: not a node object: %.80r" % (where, node))
        t = node["type"]
        if t not in NODE_TYPES:
            self.fatal("%s: unknown node type %r" % (where, t))
        if t == "ref":
            rid = node.get("id")
            if type(rid) is not int:
                self.fatal("%s: ref without an integer id" % where)
            if set(node) != {"type", "id"}:
                self.problem("%s: ref with extra keys %s" % (where, sorted(set(node) - {"type", "id"})))
            if rid not in self.defs:
                self.problem("%s: ref to id %d before (or without) its definition" % (where, rid))
            return
        if "id" in node:
            nid = node["id"]
            if type(nid) is not int:
                self.fatal("%s: non-integer id %r" % (where, nid))
            if nid in self.defs:
                self.fatal("%s: id %d defined twice" % (where, nid))
            if nid != self.next_id:
                self.problem("%s: id %d where the next dense id in document order is %d"
                             % (where, nid, self.next_id))
            self.next_id = max(self.next_id, nid) + 1
            self.defs[nid] = node
        extra = set(node) - _ALLOWED_KEYS[t] - {"type", "id"}
        if extra:
            self.problem("%s: %s node with unexpected keys %s" % (where, t, sorted(extra)))
        w = where + "/" + t
        if t == "bool":
            if type(node.get("value")) is not bool:
                self.fatal("%s: bool value is not true/false" % w)
        elif t == "int":
            v = node.get("value")
            if not isinstance(v, str):
                self.fatal("%s: int value is not a string" % w)
            c = canonical_int_text(v)
            if c is None:
                self.fatal("%s: int value %.60r is not decimal" % (w, v))
            if c != v:
                self.problem("%s: int value %.60r is not canonical decimal" % (w, v))
        elif t == "float":
            b = node.get("bits")
            if not (isinstance(b, str) and len(b) == 16 and set(b.lower()) <= _HEX):
                self.fatal("%s: float bits %r are not 16 hex digits" % (w, b))
            if b != b.lower():
                self.problem("%s: float bits %r not lowercase" % (w, b))
            if not isinstance(node.get("repr"), str):
                self.problem("%s: float without a repr string" % w)
        elif t == "str":
            has_v, has_h = "value" in node, "surrogatepass_hex" in node
            if has_v == has_h:
                self.fatal("%s: str needs exactly one of value / surrogatepass_hex" % w)
            if has_v:
                v = node["value"]
                if not isinstance(v, str):
                    self.fatal("%s: str value is not a string" % w)
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    self.problem("%s: str value holds a lone surrogate (must use surrogatepass_hex)" % w)
            else:
                self._hex(node["surrogatepass_hex"], w)
                try:
                    s = bytes.fromhex(node["surrogatepass_hex"]).decode("utf-8", "surrogatepass")
                except UnicodeDecodeError as e:
                    self.fatal("%s: surrogatepass_hex does not decode: %s" % (w, e))
                try:
                    s.encode("utf-8")
                    self.problem("%s: surrogatepass_hex used for a str without lone surrogates" % w)
                except UnicodeEncodeError:
                    pass
        elif t in ("bytes", "bytearray"):
            self._hex(node.get("hex"), w)
        elif t == "global":
            if not isinstance(node.get("module"), str) or not isinstance(node.get("name"), str):
                self.fatal("%s: global needs string module and name" % w)
        elif t in ("list", "tuple", "set", "frozenset"):
            items = node.get("items")
            if not isinstance(items, list):
                self.fatal("%s: items is not an array" % w)
            for i, x in enumerate(items):
                self.scan(x, "%s[%d]" % (w, i))
        elif t == "dict":
            self._pairs(node.get("items"), w)
        elif t == "complex":
            for k in ("real", "imag"):
                x = node.get(k)
                self.scan(x, w + "." + k)
                if not (isinstance(x, dict) and x.get("type") in ("float", "ref")):
                    self.fatal("%s.%s is not a float node" % (w, k))
        elif t == "object":
            kind = node.get("kind")
            if kind not in RECORD_KINDS:
                self.fatal("%s: object kind %r" % (w, kind))
            for k in ("callable", "args"):
                if k not in node:
                    self.fatal("%s: object without %s" % (w, k))
                self.scan(node[k], w + "." + k)
            if "kwargs" in node:
                if kind != "newobj_ex":
                    self.problem("%s: kwargs on a %s object" % (w, kind))
                self.scan(node["kwargs"], w + ".kwargs")
            elif kind == "newobj_ex":
                self.problem("%s: newobj_ex object without kwargs" % w)
            if "state" in node:
                self.scan(node["state"], w + ".state")
            if "listitems" in node:
                li = node["listitems"]
                if not isinstance(li, list):
                    self.fatal("%s: listitems is not an array" % w)
                if not li:
                    self.problem("%s: empty listitems (omit it)" % w)
                for i, x in enumerate(li):
                    self.scan(x, "%s.listitems[%d]" % (w, i))
            if "dictitems" in node:
                if not node["dictitems"]:
                    self.problem("%s: empty dictitems (omit it)" % w)
                self._pairs(node["dictitems"], w + ".dictitems")

    def _hex(self, h, w):
        if not (isinstance(h, str) and len(h) % 2 == 0 and set(h.lower()) <= _HEX):
            self.fatal("%s: bad hex %.60r" % (w, h))
        if h != h.lower():
            self.problem("%s: hex not lowercase" % w)

    def _pairs(self, pairs, w):
        if not isinstance(pairs, list):
            self.fatal("%s: items is not an array" % w)
        for i, p in enumerate(pairs):
            if not (isinstance(p, list) and len(p) == 2):
                self.fatal("%s[%d]: not a [key, value] pair" % (w, i))
            self.scan(p[0], "%s[%d].key" % (w, i))
            self.scan(p[1], "%s[%d].value" % (w, i))

    # pass 2: build the graph, resolving refs to the node that carried the id
    def build(self, node):
        t = node["type"]
        if t == "ref":
            target = self.defs.get(node["id"])
            if target is None:
                raise CanonError("bad document: ref to undefined id %d" % node["id"])
            node = target
            t = node["type"]
        key = id(node)
        n = self.built.get(key)
        if n is not None:
            return n
        if t == "none":
            n = N("none")
        elif t == "bool":
            n = N("bool", {"value": node["value"]})
        elif t == "int":
            n = N("int", {"value": canonical_int_text(node["value"])})
        elif t == "float":
            if self.float_repr:
                n = N("float", {"bits": node["bits"].lower(), "repr": node.get("repr")})
            else:   # --ignore-float-repr: the repr is recomputed from the authoritative bits
                n = N("float", float_fields(struct.unpack(">d", bytes.fromhex(node["bits"]))[0]))
        elif t == "str":
            if "value" in node:
                s = node["value"]
            else:
                s = bytes.fromhex(node["surrogatepass_hex"]).decode("utf-8", "surrogatepass")
            n = N("str", str_fields(s))
        elif t in ("bytes", "bytearray"):
            n = N(t, {"hex": node["hex"].lower()})
        elif t == "global":
            n = N("global", {"module": node["module"], "name": node["name"]})
        else:
            n = N(t)
        self.built[key] = n   # before the children: refs to ancestors (cycles) find it
        if t in ("list", "tuple", "set", "frozenset"):
            n.items = [self.build(x) for x in node["items"]]
        elif t == "dict":
            n.pairs = [(self.build(k), self.build(v)) for k, v in node["items"]]
        elif t == "complex":
            n.items = [self.build(node["real"]), self.build(node["imag"])]
            if any(x.t != "float" for x in n.items):
                raise CanonError("bad document: complex part is not a float")
        elif t == "object":
            n.f = {"kind": node["kind"]}
            n.callable = self.build(node["callable"])
            if n.callable.t != "global":
                self.problem("object callable is a %s node, not a global" % n.callable.t)
            n.args = self.build(node["args"])
            if n.args.t != "tuple":
                self.problem("object args is a %s node, not a tuple" % n.args.t)
            if "kwargs" in node:
                n.kwargs = self.build(node["kwargs"])
            elif node["kind"] == "newobj_ex":
                n.kwargs = N("dict")
                n.kwargs.pairs = []
            if "state" in node:
                n.has_state = True
                n.state = self.build(node["state"])
            n.listitems = [self.build(x) for x in node.get("listitems", ())]
            n.dictitems = [(self.build(k), self.build(v)) for k, v in node.get("dictitems", ())]
        return n


def read_document(doc, lint=True, float_repr=True):
    """Rust document -> (list of root N, is_stream, lint problems)."""
    if not isinstance(doc, dict):
        raise CanonError("bad document: not a JSON object")
    r = DocReader(lint, float_repr)
    if doc.get("format") != FORMAT:
        r.problem("format is %r, expected %r" % (doc.get("format"), FORMAT))
    if ("value" in doc) == ("values" in doc):
        raise CanonError("bad document: needs exactly one of value / values")
    extra = set(doc) - {"format", "value", "values"}
    if extra:
        r.problem("document has unexpected keys %s" % sorted(extra))
    stream = "values" in doc
    roots = doc["values"] if stream else [doc["value"]]
    if not isinstance(roots, list):
        raise CanonError("bad document: values is not an array")
    for i, x in enumerate(roots):
        r.scan(x, "values[%d]" % i if stream else "value")
    built = [r.build(x) for x in roots]
    return built, stream, (r.problems if lint else [])


# --------------------------------------------------------------------------------------------
# Canonical renderer
# --------------------------------------------------------------------------------------------

_esc = json.encoder.encode_basestring_ascii
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                            allow_nan=False)
LEAF_TYPES = frozenset({"none", "bool", "int", "float", "str", "bytes", "bytearray", "global"})


def dumps(obj):
    """Canonical compact JSON text (sorted keys, ASCII)."""
    return _ENCODER.encode(obj)


def leaf_text(t, fields):
    """dumps({"type": t, **fields}) for a leaf node, without the general encoder (leaf
    fields are str or bool), which is most of the time spent sorting big sets."""
    if len(fields) == 1:
        v = fields.get("value")
        if type(v) is str:   # str and int leaves: "type" sorts before "value"
            return '{"type":' + _esc(t) + ',"value":' + _esc(v) + "}"
    items = sorted([("type", t), *fields.items()])
    parts = []
    for k, v in items:
        if isinstance(v, str):
            val = _esc(v)
        elif v is True:
            val = "true"
        elif v is False:
            val = "false"
        else:
            val = dumps(v)
        parts.append(_esc(k) + ":" + val)
    return "{" + ",".join(parts) + "}"


class Renderer:
    """Renders graph nodes as canonical typed JSON.

    Mutable nodes (list, dict, set, bytearray, object) reached more than once get "id" on their
    first appearance in document order and {"type":"ref"} afterwards; immutable nodes are always
    written in full. Set/frozenset items are sorted by their standalone canonical text.
    """

    def __init__(self):
        self._standalone = {}   # id(N) -> (N, text)
        self._budget = MAX_EXPANDED_NODES

    def standalone_text(self, n):
        if n.t in LEAF_TYPES:       # no children, never an id when standalone; not cached
            return leaf_text(n.t, n.f)
        hit = self._standalone.get(id(n))
        if hit is not None:
            return hit[1]
        text = dumps(self.render_roots([n])[0])
        self._standalone[id(n)] = (n, text)
        return text

    def render_roots(self, roots):
        """Render several roots as one document (shared identity across them)."""
        counts = {}
        for r in roots:
            self._count(r, counts, set())
        ids = {}
        return [self._emit(r, counts, ids) for r in roots]

    def _count(self, n, counts, path):
        self._budget -= 1
        if self._budget < 0:
            raise CanonError("value too large when written out in full (shared immutables?)")
        if n.t in LEAF_TYPES:       # no children: nothing to count, no cycle through it
            return
        if n.t in MUTABLE:
            k = id(n)
            c = counts.get(k)
            if c:
                counts[k] = c + 1
                return
            counts[k] = 1
            # A path of immutables ends at a mutable (written once, then a ref): a tuple
            # reached again through a list is no cycle of immutables. (Passing `path` on
            # made the oracle skip every value like `l = []; t = (l,); l.append(t)`, found
            # by a differential helper.)
            for c in n.children():
                self._count(c, counts, set())
        else:
            k = id(n)
            if k in path:
                raise CanonError("cycle through immutable nodes only")
            path.add(k)
            for c in n.children():
                self._count(c, counts, path)
            path.discard(k)

    def _emit(self, n, counts, ids):
        t = n.t
        k = id(n)
        if t in MUTABLE:
            if k in ids:
                return {"type": "ref", "id": ids[k]}
            out = {"type": t}
            if counts.get(k, 0) > 1:
                ids[k] = out["id"] = len(ids)
        else:
            out = {"type": t}
        out.update(n.f)
        if t in ("list", "tuple"):
            out["items"] = [self._emit(c, counts, ids) for c in n.items]
        elif t in ("set", "frozenset"):
            order = sorted(n.items, key=self.standalone_text)
            out["items"] = [self._emit(c, counts, ids) for c in order]
        elif t == "dict":
            out["items"] = [[self._emit(a, counts, ids), self._emit(b, counts, ids)]
                            for a, b in n.pairs]
        elif t == "complex":
            out["real"] = self._emit(n.items[0], counts, ids)
            out["imag"] = self._emit(n.items[1], counts, ids)
        elif t == "object":
            out["callable"] = self._emit(n.callable, counts, ids)
            out["args"] = self._emit(n.args, counts, ids)
            if n.kwargs is not None:
                out["kwargs"] = self._emit(n.kwargs, counts, ids)
            if n.has_state:
                out["state"] = self._emit(n.state, counts, ids)
            if n.listitems:
                out["listitems"] = [self._emit(c, counts, ids) for c in n.listitems]
            if n.dictitems:
                out["dictitems"] = [[self._emit(a, counts, ids), self._emit(b, counts, ids)]
                                    for a, b in n.dictitems]
        return out

    def document_obj(self, roots, stream):
        rendered = self.render_roots(roots)
        if stream:
            return {"format": FORMAT, "values": rendered}
        return {"format": FORMAT, "value": rendered[0]}

    def document(self, roots, stream):
        return dumps(self.document_obj(roots, stream))


def canonical_from_python(values, stream):
    memo = {}
    roots = [from_python(v, memo) for v in values]
    return Renderer().document(roots, stream)


def canonical_from_rust(doc, lint=True, float_repr=True):
    roots, stream, problems = read_document(doc, lint, float_repr)
    return Renderer().document(roots, stream), stream, problems


def canonical_obj_from_python(values, stream):
    """The canonical document as Python objects (compare with ==, dumps() for text)."""
    memo = {}
    roots = [from_python(v, memo) for v in values]
    return Renderer().document_obj(roots, stream)


def canonical_obj_from_rust(doc, lint=True, float_repr=True):
    roots, stream, problems = read_document(doc, lint, float_repr)
    return Renderer().document_obj(roots, stream), stream, problems


# --------------------------------------------------------------------------------------------
# Loading with CPython
# --------------------------------------------------------------------------------------------

def read_pickle_file(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if path.endswith(".xz"):
        data = lzma.decompress(data)
    return data


class _CountingUnpickler(pickle.Unpickler):
    """CPython's C unpickler, counting the globals it looks up."""

    globals_named = 0

    def find_class(self, module, name):
        self.globals_named += 1
        return super().find_class(module, name)


def _load_all(make_unpickler, data, stream):
    f = io.BytesIO(data)
    u = make_unpickler(f)
    if not stream:
        return [u.load()]
    out = []
    while f.tell() < len(data):
        out.append(u.load())
    return out


class Options:
    def __init__(self, mode, encoding=None, python2_str=None, stream=False, lint=True, context=200):
        self.mode = mode
        if python2_str is None:
            python2_str = "str" if (mode == "records" or encoding is not None) else "bytes"
        if python2_str == "bytes":
            if encoding not in (None, "bytes"):
                raise SystemExit("oracle: --python2-str bytes conflicts with --encoding %s" % encoding)
            self.encoding = "bytes"
        else:
            self.encoding = encoding or "latin1"
        self.stream = stream
        self.lint = lint
        self.context = context


def python_expectation(path, opts, stream, as_obj=False):
    """-> ("ok", canonical_text or object) | ("error", msg) | ("skip", msg)"""
    data = read_pickle_file(path)
    enc = opts.encoding
    if opts.mode == "data":
        try:
            values = _load_all(lambda f: pickle.Unpickler(f, encoding=enc), data, stream)
        except Exception as e:  # noqa: BLE001 - any refusal by CPython
            return ("error", "CPython refused: %s: %s" % (type(e).__name__, e))
    else:
        first = []

        def counting(f):
            first.append(_CountingUnpickler(f, encoding=enc))
            return first[-1]
        try:
            values = _load_all(counting, data, stream)
        except Exception as e:  # noqa: BLE001
            return ("skip", "CPython cannot load it: %s: %s" % (type(e).__name__, e))
        try:
            # A file that names no global (no find_class call: no GLOBAL, INST, STACK_GLOBAL,
            # and EXT* fail above) is the same value in the record model, whose unpickler
            # differs from CPython's only in how globals are found and used; skip reloading it
            # in pure Python (minutes and gigabytes for the 2**20-item corpus files).
            if first[-1].globals_named:
                values = _load_all(lambda f: RecordUnpickler(f, encoding=enc), data, stream)
        except RecordModelError as e:
            return ("error", "record model refuses: %s" % e)
        except Exception as e:  # noqa: BLE001
            return ("error", "record unpickler failed: %s: %s" % (type(e).__name__, e))
    try:
        if as_obj:
            return ("ok", canonical_obj_from_python(values, stream))
        return ("ok", canonical_from_python(values, stream))
    except CanonError as e:
        return ("skip", "CPython value has no canonical form: %s" % e)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def first_diff(a, b):
    n = min(len(a), len(b))
    i = 0
    step = 4096
    while i < n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    return i


def show_diff(a, b, ctx):
    p = first_diff(a, b)

    def around(s):
        lo = max(0, p - ctx)
        return ("..." if lo else "") + s[lo:p] + "<<HERE>>" + s[p:p + ctx] + ("..." if p + ctx < len(s) else "")
    return "first difference at char %d | python: %s | rust: %s" % (p, around(a), around(b))


def resolve_path(path, base_dir):
    if os.path.isabs(path) or os.path.exists(path):
        return path
    alt = os.path.join(base_dir, path)
    return alt if os.path.exists(alt) else path


def cmd_compare(args):
    opts = Options(args.mode, args.encoding, args.python2_str, args.stream, not args.no_lint, args.context)
    base_dir = os.path.dirname(os.path.abspath(args.lines_file))
    compared = mismatched = skipped = 0
    with open(args.lines_file, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                fname = entry["file"]
            except (ValueError, KeyError, TypeError) as e:
                print("MISMATCH %s:%d: unreadable line: %s" % (args.lines_file, lineno, e))
                compared += 1
                mismatched += 1
                continue
            path = resolve_path(fname, base_dir)
            has_json = "json" in entry
            if not has_json and "error" not in entry:
                print("MISMATCH %s: line has neither json nor error" % fname)
                compared += 1
                mismatched += 1
                continue
            stream = opts.stream or (has_json and isinstance(entry["json"], dict) and "values" in entry["json"])
            try:
                status, expect = python_expectation(path, opts, stream, as_obj=True)
            except OSError as e:
                print("MISMATCH %s: cannot read the pickle: %s" % (fname, e))
                compared += 1
                mismatched += 1
                continue
            if status == "skip":
                skipped += 1
                if args.verbose:
                    print("skip %s: %s" % (fname, expect))
                continue
            compared += 1
            if status == "error":
                if has_json:
                    mismatched += 1
                    print("MISMATCH %s: rust decoded it but %s" % (fname, expect))
                continue
            if not has_json:
                mismatched += 1
                print("MISMATCH %s: rust refused (%s) a file CPython loads" % (fname, str(entry["error"])[:300]))
                continue
            try:
                got, got_stream, problems = canonical_obj_from_rust(entry["json"], opts.lint,
                                                                    not args.ignore_float_repr)
            except CanonError as e:
                mismatched += 1
                print("MISMATCH %s: %s" % (fname, e))
                continue
            if got != expect:
                mismatched += 1
                print("MISMATCH %s: %s" % (fname, show_diff(dumps(expect), dumps(got), opts.context)))
            elif problems:
                mismatched += 1
                print("MISMATCH %s: same value, but the document's form is wrong: %s"
                      % (fname, "; ".join(problems)))
    print("oracle: %d compared, %d mismatched, %d skipped" % (compared, mismatched, skipped))
    return 0 if mismatched == 0 else 1


def cmd_expected(args):
    opts = Options(args.mode, args.encoding, args.python2_str, args.stream)
    for path in args.files:
        status, text = python_expectation(path, opts, opts.stream)
        if status == "ok":
            print('{"file":%s,"json":%s}' % (json.dumps(path), text))
        else:
            print(json.dumps({"file": path, "error": "%s: %s" % (status, text)}))
    return 0


# --------------------------------------------------------------------------------------------
# selftest
# --------------------------------------------------------------------------------------------

def _selftest_cases():
    cases = []
    shared = [1, 2]
    cases.append(("shared list", [(shared, shared)],
                  '{"items":[{"id":0,"items":[{"type":"int","value":"1"},'
                  '{"type":"int","value":"2"}],"type":"list"},{"id":0,"type":"ref"}],"type":"tuple"}'))
    rec = [0]
    rec.append(rec)
    cases.append(("recursive list", [rec],
                  '{"id":0,"items":[{"type":"int","value":"0"},{"id":0,"type":"ref"}],"type":"list"}'))
    t = (1,)
    cases.append(("shared tuple is inlined", [[t, t]],
                  '{"items":[{"items":[{"type":"int","value":"1"}],"type":"tuple"},'
                  '{"items":[{"type":"int","value":"1"}],"type":"tuple"}],"type":"list"}'))
    cases.append(("set of tuples is sorted", [{(2, "b"), (1, "a"), (10, "c")}], None))
    g = RecordGlobal("m", "C")
    r = Record("newobj", g, (1,))
    r.__setstate__({"k": None})
    r.append(5)
    r["a"] = r
    cases.append(("record", [r],
                  '{"args":{"items":[{"type":"int","value":"1"}],"type":"tuple"},'
                  '"callable":{"module":"m","name":"C","type":"global"},"dictitems":[[{"type":"str",'
                  '"value":"a"},{"id":0,"type":"ref"}]],"id":0,"kind":"newobj","listitems":[{"type":'
                  '"int","value":"5"}],"state":{"items":[[{"type":"str","value":"k"},{"type":"none"}]],'
                  '"type":"dict"},"type":"object"}'))
    lt = []
    tl = (lt,)
    lt.append(tl)
    cases.append(("tuple reached again through a list", [tl],
                  '{"items":[{"id":0,"items":[{"items":[{"id":0,"type":"ref"}],"type":"tuple"}],'
                  '"type":"list"}],"type":"tuple"}'))
    cases.append(("scalars", [[None, True, -0.0, float("nan"), "a\udc80b", b"\x00\xff",
                               bytearray(b"x"), 2 ** 70, 1 + 2j]], None))
    return cases


def cmd_selftest(_args):
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail and not ok else ""))
        if not ok:
            failures += 1

    for name, values, want in _selftest_cases():
        text = canonical_from_python(values, False)
        doc = json.loads(text)
        if want is not None:
            check(name + " (python side)", dumps(doc["value"]) == want, dumps(doc["value"]))
        back, _, problems = canonical_from_rust(doc)
        check(name + " (round trip)", back == text and not problems, "%s %s" % (back, problems))

    # set ordering is by standalone text, not by insertion
    doc = json.loads(canonical_from_python([{(2, "b"), (1, "a"), (10, "c")}], False))
    firsts = [it["items"][0]["value"] for it in doc["value"]["items"]]
    check("set order by canonical text", firsts == ["1", "10", "2"], str(firsts))

    # rust side may share immutables through id/ref; must equal the inlined form
    t = (1, "x")
    want = canonical_from_python([[t, t, t]], False)
    rust = {"format": FORMAT, "value": {"type": "list", "items": [
        {"type": "tuple", "id": 0, "items": [{"type": "int", "value": "1"}, {"type": "str", "value": "x"}]},
        {"type": "ref", "id": 0}, {"type": "ref", "id": 0}]}}
    got, _, problems = canonical_from_rust(rust)
    check("immutable ref is inlined", got == want and not problems, got + str(problems))

    # tuple inside a recursive list, rust shares the tuple and the list
    lst = []
    tup = (lst,)
    lst.append(tup)
    want = canonical_from_python([lst], False)
    rust = {"format": FORMAT, "value": {"type": "list", "id": 0, "items": [
        {"type": "tuple", "id": 1, "items": [{"type": "ref", "id": 0}]}]}}
    got, _, problems = canonical_from_rust(rust)
    check("recursive list through a tuple", got == want and not problems, got + str(problems))

    # ids renumbered: a rust id that is only used by an immutable shifts the numbering
    shared = [1]
    want = canonical_from_python([((2,), shared, shared, (2,))], False)
    rust = {"format": FORMAT, "value": {"type": "tuple", "items": [
        {"type": "tuple", "id": 0, "items": [{"type": "int", "value": "2"}]},
        {"type": "list", "id": 1, "items": [{"type": "int", "value": "1"}]},
        {"type": "ref", "id": 1}, {"type": "ref", "id": 0}]}}
    got, _, problems = canonical_from_rust(rust)
    check("ids renumbered", got == want and not problems, got + str(problems))

    # a wrong value must differ
    rust["value"]["items"][1]["items"][0]["value"] = "3"
    got, _, _ = canonical_from_rust(rust)
    check("wrong value differs", got != want)

    # a mutable with identity that is not shared: two equal lists are not one list
    want2 = canonical_from_python([[shared, shared]], False)
    rust2 = {"format": FORMAT, "value": {"type": "list", "items": [
        {"type": "list", "items": [{"type": "int", "value": "1"}]},
        {"type": "list", "items": [{"type": "int", "value": "1"}]}]}}
    got, _, _ = canonical_from_rust(rust2)
    check("lost sharing differs", got != want2)

    # lint: lone surrogate in "value", forward ref
    _, _, problems = canonical_from_rust({"format": FORMAT, "value": {"type": "str", "value": "\ud800"}})
    check("lint lone surrogate in value", bool(problems))
    try:
        canonical_from_rust({"format": FORMAT, "value": {"type": "tuple", "id": 0, "items": [{"type": "ref", "id": 0}]}})
        check("immutable-only cycle rejected", False)
    except CanonError:
        check("immutable-only cycle rejected", True)

    # records unpickler on a real pickle of a plain class (NEWOBJ + BUILD)
    data = b"\x80\x02cm\nC\nq\x00)\x81q\x01}q\x02X\x01\x00\x00\x00xq\x03K\x01sb."
    values = _load_all(lambda f: RecordUnpickler(f, encoding="latin1"), data, False)
    got = json.loads(canonical_from_python(values, False))["value"]
    check("record unpickler newobj+build",
          got["kind"] == "newobj" and got["callable"]["name"] == "C" and got["state"]["type"] == "dict",
          dumps(got))
    data = pickle.dumps({1, 2}, 2)   # __builtin__.set native
    values = _load_all(lambda f: RecordUnpickler(f, encoding="latin1"), data, False)
    check("record unpickler native set", values == [{1, 2}], repr(values))

    print("selftest: %d failure(s)" % failures)
    return 0 if failures == 0 else 1


def main(argv):
    ap = argparse.ArgumentParser(prog="oracle.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p):
        p.add_argument("--mode", choices=("data", "records"), required=True)
        p.add_argument("--encoding", default=None,
                       help="encoding for Python 2 STRING opcodes (records default: latin1)")
        p.add_argument("--python2-str", choices=("bytes", "str"), default=None,
                       help="bytes: encoding='bytes' (data-mode default); str: decode with --encoding")
        p.add_argument("--stream", action="store_true",
                       help="every file is a stream of pickles (auto when the rust doc has 'values')")

    p = sub.add_parser("compare", help="compare a LINES_FILE of rust results against CPython")
    common(p)
    p.add_argument("--no-lint", action="store_true", help="do not report form problems of the rust document")
    p.add_argument("--ignore-float-repr", action="store_true",
                   help="recompute float repr from bits instead of comparing the rust repr text")
    p.add_argument("--context", type=int, default=200, help="chars of context around a difference")
    p.add_argument("-v", "--verbose", action="store_true", help="also print skipped files")
    p.add_argument("lines_file")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("expected", help="print CPython's canonical typed JSON as LINES_FILE lines")
    common(p)
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_expected)
    p = sub.add_parser("selftest", help="built-in checks of the canonicaliser")
    p.set_defaults(func=cmd_selftest)
    args = ap.parse_args(argv)
    return args.func(args)


def run_with_big_stack(fn, *a):
    sys.setrecursionlimit(200_000)
    threading.stack_size(512 * 1024 * 1024)
    result = {}

    def target():
        try:
            result["rc"] = fn(*a)
        except SystemExit as e:
            result["exit"] = e
        except BaseException as e:  # noqa: BLE001
            result["exc"] = e

    th = threading.Thread(target=target)
    th.start()
    th.join()
    if "exit" in result:
        raise result["exit"]
    if "exc" in result:
        raise result["exc"]
    return result.get("rc", 0)


if __name__ == "__main__":
    sys.exit(run_with_big_stack(main, sys.argv[1:]))
