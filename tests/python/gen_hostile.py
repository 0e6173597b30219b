#!/usr/bin/env python3
"""Write the hand-made hostile pickle corpus: tests/corpus/hostile/*.pkl + MANIFEST.tsv.

Every input is assembled by hand from opcode bytes; the opcode bytes come from
``pickletools.opcodes`` by name (never typed in as literals), so a typo is a KeyError here and
not a silently wrong corpus.

MANIFEST.tsv: a header line, then one tab-separated line per file:

    file  kind  limit  policy  limits  description

- ``kind``: the refusal kind picklewarden must report (``ErrorKind::name()`` in src/error.rs);
- ``limit``: the limit's name when kind is ``limit_exceeded``, else ``-``;
- ``policy``: ``data`` (the built-in default) or ``strict`` (no global at all);
- ``limits``: ``-`` or comma-separated ``name=value`` overrides of the default limits;
- ``description``: one line saying what the attack is.

The output is deterministic: re-running writes identical bytes. Stale ``*.pkl`` files in the
folder that this script no longer produces are removed (the folder belongs to this script).

Usage: python3 tests/python/gen_hostile.py [OUTDIR]   (default: tests/corpus/hostile)
"""

import os
import pickletools
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "corpus", "hostile")

MAX_FILE = 64 * 1024
MAX_TOTAL = 3 * 1024 * 1024
BIG_OK = {"limit-long_text_1m_digits.pkl"}  # the one file allowed past MAX_FILE

KINDS = {
    # Malformed
    "not_a_pickle", "unknown_opcode", "unsupported_protocol", "stack_underflow", "mark_missing",
    "memo_key_missing", "memo_index_ahead", "invalid_number", "invalid_string", "invalid_escape",
    "invalid_utf8",
    "type_mismatch", "odd_item_count", "unhashable_key", "frame_straddle",
    "frame_inside_frame", "trailing_data", "stack_not_empty",
    # Truncated
    "truncated",
    # LimitExceeded
    "limit_exceeded",
    # PolicyDenied
    "global_not_allowed", "form_not_allowed", "build_not_allowed", "constructor_rejected",
    "persistent_id_rejected", "extension_code_rejected", "buffers_not_supplied",
    "invalid_ascii", "callable_not_allowed",
}
LIMITS = {
    "max_input_bytes", "max_nesting_depth", "max_stack_len", "max_memo_entries",
    "max_container_items", "max_nodes", "max_alloc_bytes", "max_long_text_digits",
    "max_long_bytes", "max_opcodes",
}

# --------------------------------------------------------------------------------------------
# Opcode helpers
# --------------------------------------------------------------------------------------------

_OPS = {o.name: o.code.encode("latin-1") for o in pickletools.opcodes}
_USED_BYTES = {o.code.encode("latin-1")[0] for o in pickletools.opcodes}


def op(name):
    """The one byte of opcode NAME, as pickletools spells the name."""
    return _OPS[name]


def u8(n):
    return struct.pack("<B", n)


def u16(n):
    return struct.pack("<H", n)


def u32(n):
    return struct.pack("<I", n)


def i32(n):
    return struct.pack("<i", n)


def u64(n):
    return struct.pack("<Q", n)


def proto(n):
    return op("PROTO") + u8(n)


def frame(body_len):
    return op("FRAME") + u64(body_len)


def line(text):
    """A newline-terminated text argument (bytes or ASCII str)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    assert b"\n" not in text
    return text + b"\n"


# -- constants -------------------------------------------------------------------------------

def none():
    return op("NONE")


def binint1(n):
    return op("BININT1") + u8(n)


def binint(n):
    return op("BININT") + i32(n)


def sbu(s):
    """SHORT_BINUNICODE of str S (or raw bytes, for bad UTF-8)."""
    b = s.encode("utf-8") if isinstance(s, str) else s
    assert len(b) < 256
    return op("SHORT_BINUNICODE") + u8(len(b)) + b


def bu(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return op("BINUNICODE") + u32(len(b)) + b


def bu8(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return op("BINUNICODE8") + u64(len(b)) + b


def sbb(b):
    assert len(b) < 256
    return op("SHORT_BINBYTES") + u8(len(b)) + b


def sbs(b):
    assert len(b) < 256
    return op("SHORT_BINSTRING") + u8(len(b)) + b


def unicode_text(s):
    """UNICODE ('V'): raw-unicode-escape text; only plain ASCII without backslashes here."""
    assert all(32 <= ord(c) < 127 for c in s) and "\\" not in s
    return op("UNICODE") + line(s)


def string_text(s):
    """STRING ('S') with single quotes; plain ASCII without quotes or backslashes."""
    assert all(32 <= ord(c) < 127 for c in s) and "\\" not in s and "'" not in s
    return op("STRING") + line("'" + s + "'")


# -- memo -------------------------------------------------------------------------------------

def binput(i):
    return op("BINPUT") + u8(i)


def binget(i):
    return op("BINGET") + u8(i)


def long_binput(i):
    return op("LONG_BINPUT") + u32(i)


def long_binget(i):
    return op("LONG_BINGET") + u32(i)


def put_text(i):
    return op("PUT") + line(str(i))


def get_text(i):
    return op("GET") + line(str(i))


def memoize():
    return op("MEMOIZE")


# -- globals ----------------------------------------------------------------------------------

def glob(module, name):
    """GLOBAL: two text lines (bytes allowed, for bad UTF-8)."""
    m = module.encode("utf-8") if isinstance(module, str) else module
    n = name.encode("utf-8") if isinstance(name, str) else name
    return op("GLOBAL") + line(m) + line(n)


def inst(module, name):
    m = module.encode("utf-8") if isinstance(module, str) else module
    n = name.encode("utf-8") if isinstance(name, str) else name
    return op("INST") + line(m) + line(n)


def stack_global_sbu(module, name):
    return sbu(module) + sbu(name) + op("STACK_GLOBAL")


def tuple_of(items):
    """MARK items TUPLE (items: already-encoded pushes)."""
    return op("MARK") + b"".join(items) + op("TUPLE")


def str_tuple(args):
    return tuple_of([sbu(a) for a in args])


def stop():
    return op("STOP")


# --------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------

CASES = []


def add(file, kind, data, desc, limit="-", policy="data", limits="-"):
    assert file.endswith(".pkl") and "\t" not in file and "/" not in file, file
    assert kind in KINDS, kind
    assert (limit in LIMITS) if kind == "limit_exceeded" else limit == "-", (file, limit)
    assert policy in ("data", "strict"), policy
    assert "\t" not in desc and "\n" not in desc and desc, file
    if limits != "-":
        for item in limits.split(","):
            name, value = item.split("=")
            assert name in LIMITS and value.isdigit(), item
    assert isinstance(data, bytes)
    CASES.append((file, kind, limit, policy, limits, desc, data))


# -- 1. code-running globals through every opcode that can name or call a global --------------

CODE_GLOBALS = [
    ("os", "system", ("id",)),
    ("posix", "system", ("id",)),
    ("nt", "system", ("calc.exe",)),
    ("subprocess", "Popen", ("id",)),
    ("subprocess", "check_output", ("id",)),
    ("builtins", "eval", ("__import__('os').system('id')",)),
    ("builtins", "exec", ("import os; os.system('id')",)),
    ("__builtin__", "eval", ("__import__('os').system('id')",)),
    ("builtins", "getattr", ("x", "upper")),
    ("builtins", "__import__", ("os",)),
    ("builtins", "open", ("/tmp/pwned", "w")),
    ("importlib", "import_module", ("os",)),
    ("pkgutil", "resolve_name", ("os:system",)),
    ("pickle", "loads", ("second-stage payload",)),
    ("_pickle", "loads", ("second-stage payload",)),
    ("shutil", "rmtree", ("/",)),
    ("runpy", "_run_code", ("import os; os.system('id')",)),
    ("code", "InteractiveInterpreter", ()),
    ("webbrowser", "open", ("http://attacker.invalid/",)),
    ("operator", "attrgetter", ("__globals__",)),
    ("functools", "partial", ("x",)),
    ("types", "FunctionType", ("x",)),
    ("ctypes", "CDLL", ("libc.so.6",)),
    ("socket", "socket", ()),
]


def v_args(args):
    """Protocol-0 arguments for INST/OBJ: one UNICODE line each (newline-free ones only)."""
    return b"".join(unicode_text(a) for a in args)


def form_global_reduce(m, n, args):
    return proto(2) + glob(m, n) + str_tuple(args) + op("REDUCE") + stop()


def form_sg_short_reduce(m, n, args):
    return proto(4) + sbu(m) + sbu(n) + op("STACK_GLOBAL") + str_tuple(args) + op("REDUCE") + stop()


def form_sg_binunicode_reduce(m, n, args):
    return proto(4) + bu(m) + bu(n) + op("STACK_GLOBAL") + str_tuple(args) + op("REDUCE") + stop()


def form_sg_binput_binget_reduce(m, n, args):
    return (proto(4) + sbu(m) + binput(1) + op("POP") + sbu(n) + binput(2) + op("POP")
            + binget(1) + binget(2) + op("STACK_GLOBAL") + str_tuple(args) + op("REDUCE")
            + stop())


def form_sg_memoize_get_reduce(m, n, args):
    return (proto(4) + sbu(m) + memoize() + op("POP") + sbu(n) + memoize() + op("POP")
            + get_text(0) + get_text(1) + op("STACK_GLOBAL") + str_tuple(args) + op("REDUCE")
            + stop())


def form_inst(m, n, args):
    return op("MARK") + v_args(args) + inst(m, n) + stop()


def form_obj(m, n, args):
    return op("MARK") + glob(m, n) + v_args(args) + op("OBJ") + stop()


def form_global_newobj(m, n, args):
    return proto(2) + glob(m, n) + str_tuple(args) + op("NEWOBJ") + stop()


def form_sg_newobj_ex(m, n, args):
    return (proto(4) + sbu(m) + sbu(n) + op("STACK_GLOBAL") + str_tuple(args)
            + op("EMPTY_DICT") + op("NEWOBJ_EX") + stop())


FORMS = [
    ("GLOBAL_REDUCE", form_global_reduce, "GLOBAL then REDUCE"),
    ("STACK_GLOBAL_SBU_REDUCE", form_sg_short_reduce,
     "STACK_GLOBAL with SHORT_BINUNICODE names then REDUCE"),
    ("STACK_GLOBAL_BINUNICODE_REDUCE", form_sg_binunicode_reduce,
     "STACK_GLOBAL with BINUNICODE names then REDUCE"),
    ("STACK_GLOBAL_BINPUT_BINGET_REDUCE", form_sg_binput_binget_reduce,
     "STACK_GLOBAL with names memoized by BINPUT, popped and fetched back by BINGET, then REDUCE"),
    ("STACK_GLOBAL_MEMOIZE_GET_REDUCE", form_sg_memoize_get_reduce,
     "STACK_GLOBAL with names memoized by MEMOIZE, popped and fetched back by text GET, then REDUCE"),
    ("INST", form_inst, "INST (protocol 0 call of the named class)"),
    ("OBJ", form_obj, "OBJ of a GLOBAL under a MARK"),
    ("GLOBAL_NEWOBJ", form_global_newobj, "GLOBAL then NEWOBJ"),
    ("STACK_GLOBAL_NEWOBJ_EX", form_sg_newobj_ex, "STACK_GLOBAL then NEWOBJ_EX with empty kwargs"),
]

for _m, _n, _args in CODE_GLOBALS:
    for _tag, _fn, _how in FORMS:
        add(f"global-{_m}.{_n}-{_tag}.pkl", "global_not_allowed", _fn(_m, _n, _args),
            f"{_m}.{_n}({', '.join(map(repr, _args))}) via {_how}; refused at the global")


# -- 2. other global tricks -------------------------------------------------------------------

add("global-dotted-os.path.join.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("os", "path.join") + str_tuple(["a", "b"]) + op("REDUCE") + stop(),
    "STACK_GLOBAL os + 'path.join' (dotted name walks attributes in CPython)")
add("global-dotted-builtins.eval.__call__.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("builtins", "eval.__call__") + str_tuple(["1+1"]) + op("REDUCE")
    + stop(),
    "STACK_GLOBAL builtins + 'eval.__call__' (dotted name reaching eval)")
add("global-dotted-GLOBAL-builtins.eval.__call__.pkl", "global_not_allowed",
    proto(2) + glob("builtins", "eval.__call__") + str_tuple(["1+1"]) + op("REDUCE") + stop(),
    "GLOBAL builtins + 'eval.__call__' (dotted name in a protocol-0 GLOBAL)")
add("global-dotted-builtins.set.__class__.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("builtins", "set.__class__") + stop(),
    "dotted walk off an allowed global: builtins + 'set.__class__' (= type); exact pairs only")
add("global-dotted-_codecs.encode.__self__.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("_codecs", "encode.__self__") + stop(),
    "dotted walk off an allowed global: _codecs + 'encode.__self__' (= the _codecs module)")
add("global-dotted-builtins.bytearray.fromhex.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("builtins", "bytearray.fromhex") + str_tuple(["41"])
    + op("REDUCE") + stop(),
    "dotted name under an allowed class: builtins + 'bytearray.fromhex' is not an allowed pair")
add("global-stack_global-binunicode8-names.pkl", "global_not_allowed",
    proto(4) + bu8("os") + bu8("system") + op("STACK_GLOBAL") + str_tuple(["id"]) + op("REDUCE")
    + stop(),
    "os.system via STACK_GLOBAL with BINUNICODE8 names")
add("global-stack_global-long_binput-names.pkl", "global_not_allowed",
    proto(4) + sbu("os") + long_binput(200) + op("POP") + sbu("system") + long_binput(3)
    + op("POP") + long_binget(200) + long_binget(3) + op("STACK_GLOBAL") + str_tuple(["id"])
    + op("REDUCE") + stop(),
    "os.system via STACK_GLOBAL with names fetched by LONG_BINGET after LONG_BINPUT")
add("memo-long_binput-far-ahead.pkl", "memo_index_ahead",
    proto(2) + op("EMPTY_LIST") + long_binput(0x0FFFFFFF) + stop(),
    "[] then LONG_BINPUT 0x0fffffff: CPython sizes its memo array by the index (4 GiB); "
    "refused for the reader after picklewarden")
add("global-stack_global-unicode-escaped-names.pkl", "global_not_allowed",
    proto(4) + op("UNICODE") + line(b"\\u006fs") + op("UNICODE") + line(b"sy\\u0073tem")
    + op("STACK_GLOBAL") + str_tuple(["id"]) + op("REDUCE") + stop(),
    "os.system via STACK_GLOBAL with UNICODE names spelled with raw-unicode-escape (\\u006fs = os)")
add("global-stack_global-names-under-popped-mark.pkl", "global_not_allowed",
    proto(4) + op("MARK") + sbu("os") + memoize() + sbu("system") + memoize() + op("POP_MARK")
    + get_text(0) + get_text(1) + op("STACK_GLOBAL") + str_tuple(["id"]) + op("REDUCE") + stop(),
    "os.system names memoized inside a MARK that POP_MARK discards, fetched back by GET")
add("global-stack_global-short_binstring-names.pkl", "global_not_allowed",
    proto(4) + sbs(b"os") + sbs(b"system") + op("STACK_GLOBAL") + str_tuple(["id"])
    + op("REDUCE") + stop(),
    "os.system via STACK_GLOBAL with SHORT_BINSTRING names: the data policy decodes Python 2 "
    "strings as ASCII str (as CPython's default encoding='ASCII' does), so the names are "
    "os and system; refused at the global")
add("global-GLOBAL-crlf.pkl", "global_not_allowed",
    proto(2) + op("GLOBAL") + b"os\r\nsystem\r\n" + str_tuple(["id"]) + op("REDUCE") + stop(),
    "GLOBAL with CRLF line ends: names 'os\\r' and 'system\\r' are not allowed pairs")
add("global-GLOBAL-nul-in-module.pkl", "global_not_allowed",
    proto(2) + glob(b"os\x00", b"system") + str_tuple(["id"]) + op("REDUCE") + stop(),
    "GLOBAL module 'os\\x00' (NUL inside the name)")
add("global-GLOBAL-non-ascii-module.pkl", "global_not_allowed",
    proto(2) + glob("\u00f6s", "system") + str_tuple(["id"]) + op("REDUCE") + stop(),
    "GLOBAL with valid non-ASCII UTF-8 module name")
add("global-dead-code-popped.pkl", "global_not_allowed",
    proto(2) + glob("os", "system") + op("POP") + none() + stop(),
    "os.system pushed then POPed, never called: every global is resolved, used or not")
add("global-dead-code-pop_mark.pkl", "global_not_allowed",
    proto(2) + op("MARK") + glob("os", "system") + op("POP_MARK") + none() + stop(),
    "os.system pushed inside a MARK that POP_MARK discards")
add("global-memo-only.pkl", "global_not_allowed",
    proto(2) + glob("os", "system") + binput(0) + op("POP") + none() + stop(),
    "os.system only stored in the memo, never used")
add("global-hidden-in-allowed-call-args.pkl", "global_not_allowed",
    proto(2) + glob("_codecs", "encode") + op("MARK") + glob("os", "system") + str_tuple(["id"])
    + op("REDUCE") + sbu("latin1") + op("TUPLE") + op("REDUCE") + stop(),
    "_codecs.encode(os.system('id'), 'latin1'): forbidden call hidden in an allowed call's args")
for _m, _n, _why in [
    ("_codecs", "decode", "near miss of the allowed _codecs.encode"),
    ("codecs", "encode", "near miss of the allowed _codecs.encode (wrong module)"),
    ("_codecs", "encode ", "allowed name with a trailing space"),
    ("Builtins", "set", "allowed name with a different case"),
    ("builtins", "setattr", "classic attribute-setting gadget"),
    ("builtins", "compile", "code object factory"),
    ("builtins", "globals", "module globals"),
    ("builtins", "breakpoint", "starts a debugger"),
    ("copyreg", "_reconstructor", "common in ordinary pickles but not in the data policy"),
    ("copy_reg", "_reconstructor", "Python 2 spelling of copyreg._reconstructor"),
    ("collections", "OrderedDict", "harmless class that the data policy still lacks"),
    ("__main__", "Exploit", "class of the attacker's script"),
    ("_posixsubprocess", "fork_exec", "low-level process spawn"),
    ("pty", "spawn", "process spawn"),
    ("timeit", "timeit", "runs a statement string"),
    ("pdb", "run", "runs a statement string"),
    ("torch._utils", "_rebuild_tensor_v2", "model checkpoint global"),
    ("numpy.core.multiarray", "_reconstruct", "numpy array global"),
]:
    add(f"global-misc-{_m}.{_n.strip()}{'-trailing-space' if _n != _n.strip() else ''}.pkl",
        "global_not_allowed", proto(2) + glob(_m, _n) + op("EMPTY_TUPLE") + op("REDUCE") + stop(),
        f"GLOBAL {_m}.{_n!r} called with (): {_why}")

# strict policy: no global at all, even the data policy's own.
add("global-strict-_codecs.encode.pkl", "global_not_allowed",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "latin1"]) + op("REDUCE") + stop(),
    "_codecs.encode('abc', 'latin1') (how protocol 2 writes bytes) under the strict policy",
    policy="strict")
add("global-strict-builtins.set.pkl", "global_not_allowed",
    proto(4) + stack_global_sbu("builtins", "set") + op("EMPTY_TUPLE") + op("REDUCE") + stop(),
    "builtins.set() via STACK_GLOBAL under the strict policy", policy="strict")
add("global-strict-inst-__builtin__.complex.pkl", "global_not_allowed",
    op("MARK") + op("FLOAT") + line("1.0") + op("FLOAT") + line("2.0")
    + inst("__builtin__", "complex") + stop(),
    "INST __builtin__.complex(1.0, 2.0) under the strict policy", policy="strict")


# -- 3. form / build / constructor refusals of allowed globals --------------------------------

add("form-newobj-builtins.set.pkl", "form_not_allowed",
    proto(2) + glob("builtins", "set") + op("EMPTY_TUPLE") + op("NEWOBJ") + stop(),
    "NEWOBJ on builtins.set (set.__new__ ignores its arguments; the set constructor takes calls only)")
add("form-newobj-__builtin__.frozenset.pkl", "form_not_allowed",
    proto(2) + glob("__builtin__", "frozenset") + op("EMPTY_TUPLE") + op("NEWOBJ") + stop(),
    "NEWOBJ on __builtin__.frozenset")
add("form-newobj_ex-builtins.set.pkl", "form_not_allowed",
    proto(4) + stack_global_sbu("builtins", "set") + op("EMPTY_TUPLE") + op("EMPTY_DICT")
    + op("NEWOBJ_EX") + stop(),
    "NEWOBJ_EX on builtins.set")
add("form-newobj-_codecs.encode.pkl", "form_not_allowed",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "latin1"]) + op("NEWOBJ") + stop(),
    "NEWOBJ on _codecs.encode (a function, not a class)")
add("form-newobj_ex-_codecs.encode.pkl", "form_not_allowed",
    proto(4) + stack_global_sbu("_codecs", "encode") + str_tuple(["abc", "latin1"])
    + op("EMPTY_DICT") + op("NEWOBJ_EX") + stop(),
    "NEWOBJ_EX on _codecs.encode (a function, not a class)")

add("build-on-dict.pkl", "build_not_allowed",
    proto(2) + op("EMPTY_DICT") + op("EMPTY_DICT") + sbu("k") + none() + op("SETITEM")
    + op("BUILD") + stop(),
    "BUILD on a plain dict (CPython would setattr on it)")
add("build-on-list.pkl", "build_not_allowed",
    proto(2) + op("EMPTY_LIST") + op("EMPTY_DICT") + sbu("__class__") + none() + op("SETITEM")
    + op("BUILD") + stop(),
    "BUILD on a plain list with a state that sets __class__")
add("build-on-list-none-state.pkl", "build_not_allowed",
    proto(2) + op("EMPTY_LIST") + none() + op("BUILD") + stop(),
    "BUILD with state None on a list (CPython 3.11 accepts it as a no-op; not a record)")
add("build-on-int.pkl", "build_not_allowed",
    proto(2) + binint1(1) + op("EMPTY_DICT") + op("BUILD") + stop(),
    "BUILD on an int")
add("build-on-tuple.pkl", "build_not_allowed",
    proto(2) + op("EMPTY_TUPLE") + op("EMPTY_DICT") + op("BUILD") + stop(),
    "BUILD on a tuple")
add("build-on-builtins.set.pkl", "build_not_allowed",
    proto(2) + glob("builtins", "set") + op("EMPTY_TUPLE") + op("REDUCE") + op("EMPTY_DICT")
    + sbu("x") + binint1(1) + op("SETITEM") + op("BUILD") + stop(),
    "BUILD on a set built by builtins.set()")
add("build-on-_codecs.encode-bytes.pkl", "build_not_allowed",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "latin1"]) + op("REDUCE")
    + op("EMPTY_DICT") + op("BUILD") + stop(),
    "BUILD on the bytes made by _codecs.encode('abc', 'latin1')")

add("ctor-_codecs.encode-utf8.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "utf-8"]) + op("REDUCE") + stop(),
    "_codecs.encode('abc', 'utf-8'): only latin1/latin-1 accepted")
add("ctor-_codecs.encode-ascii.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "ascii"]) + op("REDUCE") + stop(),
    "_codecs.encode('abc', 'ascii'): only latin1/latin-1 accepted")
add("ctor-_codecs.encode-non-latin1-text.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + str_tuple(["\u0100", "latin1"]) + op("REDUCE") + stop(),
    "_codecs.encode('\\u0100', 'latin1'): text not encodable as latin-1")
add("ctor-_codecs.encode-bytes-arg.pkl", "constructor_rejected",
    proto(3) + glob("_codecs", "encode") + tuple_of([sbb(b"x"), sbu("latin1")]) + op("REDUCE")
    + stop(),
    "_codecs.encode(b'x', 'latin1'): first argument is bytes, not str")
add("ctor-_codecs.encode-int-arg.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + tuple_of([binint1(1), sbu("latin1")]) + op("REDUCE")
    + stop(),
    "_codecs.encode(1, 'latin1'): first argument is an int")
add("ctor-_codecs.encode-one-arg.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc"]) + op("REDUCE") + stop(),
    "_codecs.encode('abc') without an encoding (CPython defaults to utf-8)")
add("ctor-_codecs.encode-three-args.pkl", "constructor_rejected",
    proto(2) + glob("_codecs", "encode") + str_tuple(["abc", "latin1", "strict"]) + op("REDUCE")
    + stop(),
    "_codecs.encode('abc', 'latin1', 'strict'): three arguments")
add("ctor-builtins.set-int.pkl", "constructor_rejected",
    proto(2) + glob("builtins", "set") + binint1(1) + op("TUPLE1") + op("REDUCE") + stop(),
    "builtins.set(1): argument is not an iterable")
add("ctor-__builtin__.set-two-args.pkl", "constructor_rejected",
    proto(2) + glob("__builtin__", "set") + tuple_of([op("EMPTY_LIST"), op("EMPTY_LIST")])
    + op("REDUCE") + stop(),
    "__builtin__.set([], []): two arguments")
add("ctor-inst-__builtin__.set-int.pkl", "constructor_rejected",
    op("MARK") + op("INT") + line("5") + inst("__builtin__", "set") + stop(),
    "INST __builtin__.set with argument 5 (INST is an accepted call form; the argument is not)")
add("ctor-builtins.complex-str.pkl", "constructor_rejected",
    proto(2) + glob("builtins", "complex") + str_tuple(["1"]) + op("REDUCE") + stop(),
    "builtins.complex('1'): string argument (CPython would parse it)")
add("ctor-builtins.bytearray-str-utf8.pkl", "constructor_rejected",
    proto(2) + glob("builtins", "bytearray") + str_tuple(["x", "utf-8"]) + op("REDUCE") + stop(),
    "builtins.bytearray('x', 'utf-8'): text with an encoding")
add("ctor-builtins.frozenset-int.pkl", "constructor_rejected",
    proto(2) + glob("builtins", "frozenset") + binint1(7) + op("TUPLE1") + op("REDUCE") + stop(),
    "builtins.frozenset(7): argument is not an iterable")

add("persid-PERSID.pkl", "persistent_id_rejected",
    op("PERSID") + line("some-object-id") + stop(),
    "PERSID 'some-object-id' (persistent ids are rejected by default)")
add("persid-BINPERSID.pkl", "persistent_id_rejected",
    proto(2) + sbu("some-object-id") + op("BINPERSID") + stop(),
    "BINPERSID of a str")
add("persid-BINPERSID-tuple.pkl", "persistent_id_rejected",
    proto(2) + str_tuple(["storage", "0", "cpu"]) + op("BINPERSID") + stop(),
    "BINPERSID of a tuple, as torch checkpoints write")
add("persid-PERSID-strict.pkl", "persistent_id_rejected",
    op("PERSID") + line("x") + stop(),
    "PERSID under the strict policy", policy="strict")

add("ext-EXT1.pkl", "extension_code_rejected",
    proto(2) + op("EXT1") + u8(1) + stop(),
    "EXT1 code 1 (extension codes are rejected by default)")
add("ext-EXT2.pkl", "extension_code_rejected",
    proto(2) + op("EXT2") + u16(0x1234) + stop(),
    "EXT2 code 0x1234")
add("ext-EXT4.pkl", "extension_code_rejected",
    proto(2) + op("EXT4") + u32(0x7FFFFFFF) + stop(),
    "EXT4 code 0x7fffffff (the largest CPython accepts)")
add("ext-EXT1-reduce.pkl", "extension_code_rejected",
    proto(2) + op("EXT1") + u8(0xF0) + str_tuple(["id"]) + op("REDUCE") + stop(),
    "EXT1 code 240 called with REDUCE (an extension code standing for a global)")
add("ext-EXT2-strict.pkl", "extension_code_rejected",
    proto(2) + op("EXT2") + u16(2) + stop(),
    "EXT2 code 2 under the strict policy", policy="strict")

add("buffers-NEXT_BUFFER.pkl", "buffers_not_supplied",
    proto(5) + op("NEXT_BUFFER") + stop(),
    "NEXT_BUFFER with no out-of-band buffers supplied")
add("buffers-NEXT_BUFFER-READONLY_BUFFER.pkl", "buffers_not_supplied",
    proto(5) + op("NEXT_BUFFER") + op("READONLY_BUFFER") + stop(),
    "NEXT_BUFFER then READONLY_BUFFER with no out-of-band buffers supplied")


# -- 4. malformed -----------------------------------------------------------------------------

for _b in (0xFF, 0x00, 0x99):
    assert _b not in _USED_BYTES
    add(f"unknown-opcode-0x{_b:02x}.pkl", "not_a_pickle", bytes([_b]) + stop(),
        f"byte 0x{_b:02x} (not an opcode) at top level: no pickle starts with it")
assert 0xFE not in _USED_BYTES and ord("\n") not in _USED_BYTES
add("unknown-opcode-0xfe-after-proto.pkl", "unknown_opcode",
    proto(2) + none() + b"\xfe" + stop(),
    "byte 0xfe (not an opcode) after PROTO 2 and NONE")
add("unknown-opcode-newline.pkl", "unknown_opcode",
    proto(2) + b"\n" + none() + stop(),
    "a newline byte where an opcode is expected")

add("proto-6.pkl", "unsupported_protocol", proto(6) + none() + stop(), "PROTO 6")
add("proto-255.pkl", "unsupported_protocol", proto(255) + none() + stop(), "PROTO 255")
add("proto-6-midstream.pkl", "unsupported_protocol",
    proto(2) + none() + op("POP") + proto(6) + none() + stop(),
    "PROTO 2, then a second PROTO 6 in the middle of the stream")

add("underflow-pop-empty.pkl", "not_a_pickle", op("POP") + none() + stop(),
    "POP on an empty stack")
add("underflow-reduce-one-item.pkl", "stack_underflow",
    proto(2) + op("EMPTY_TUPLE") + op("REDUCE") + stop(),
    "REDUCE with only one item on the stack")
add("underflow-tuple2-one-item.pkl", "stack_underflow",
    proto(2) + binint1(1) + op("TUPLE2") + stop(),
    "TUPLE2 with only one item on the stack")
add("underflow-stop-empty.pkl", "not_a_pickle", stop(), "STOP on an empty stack: no pickle starts with it")
add("underflow-dup-empty.pkl", "not_a_pickle", op("DUP") + none() + stop(),
    "DUP on an empty stack")
add("underflow-tuple1-below-mark.pkl", "stack_underflow",
    proto(2) + binint1(1) + op("MARK") + op("TUPLE1") + stop(),
    "TUPLE1 right after a MARK: the item below the MARK may not be taken")
add("underflow-append-below-mark.pkl", "stack_underflow",
    proto(2) + op("EMPTY_LIST") + op("MARK") + op("APPEND") + stop(),
    "APPEND right after a MARK")
add("underflow-stack_global-one-name.pkl", "stack_underflow",
    proto(4) + sbu("os") + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL with one name on the stack")
add("underflow-stack_global-across-mark.pkl", "stack_underflow",
    proto(4) + sbu("os") + op("MARK") + sbu("system") + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL whose module name lies below a MARK")
add("underflow-setitem-two-items.pkl", "stack_underflow",
    proto(2) + binint1(1) + binint1(2) + op("SETITEM") + stop(),
    "SETITEM with key and value but no dict under them")
add("underflow-binput-empty.pkl", "stack_underflow",
    proto(2) + binput(0) + none() + stop(),
    "BINPUT on an empty stack")

add("mark-missing-APPENDS.pkl", "mark_missing",
    proto(2) + op("EMPTY_LIST") + binint1(1) + op("APPENDS") + stop(), "APPENDS with no MARK open")
add("mark-missing-SETITEMS.pkl", "mark_missing",
    proto(2) + op("EMPTY_DICT") + binint1(1) + binint1(2) + op("SETITEMS") + stop(),
    "SETITEMS with no MARK open")
add("mark-missing-TUPLE.pkl", "mark_missing",
    proto(2) + binint1(1) + op("TUPLE") + stop(), "TUPLE with no MARK open")
add("mark-missing-LIST.pkl", "mark_missing",
    op("INT") + line("1") + op("LIST") + stop(), "LIST with no MARK open")
add("mark-missing-DICT.pkl", "mark_missing",
    op("INT") + line("1") + op("INT") + line("2") + op("DICT") + stop(), "DICT with no MARK open")
add("mark-missing-POP_MARK.pkl", "mark_missing",
    none() + op("POP_MARK") + none() + stop(), "POP_MARK with no MARK open")
add("mark-missing-ADDITEMS.pkl", "mark_missing",
    proto(4) + op("EMPTY_SET") + binint1(1) + op("ADDITEMS") + stop(),
    "ADDITEMS with no MARK open")
add("mark-missing-FROZENSET.pkl", "mark_missing",
    proto(4) + binint1(1) + op("FROZENSET") + stop(), "FROZENSET with no MARK open")
add("mark-missing-INST.pkl", "mark_missing",
    op("INT") + line("1") + inst("__builtin__", "set") + stop(),
    "INST of the allowed __builtin__.set with no MARK open")
add("mark-missing-OBJ.pkl", "mark_missing",
    proto(1) + glob("__builtin__", "set") + op("OBJ") + stop(),
    "OBJ of the allowed __builtin__.set with no MARK open")

add("memo-missing-GET.pkl", "not_a_pickle", op("GET") + line("0") + stop(),
    "GET 0 with an empty memo")
add("memo-missing-BINGET.pkl", "memo_key_missing", proto(2) + binget(0) + stop(),
    "BINGET 0 with an empty memo")
add("memo-missing-LONG_BINGET.pkl", "memo_key_missing", proto(2) + long_binget(0) + stop(),
    "LONG_BINGET 0 with an empty memo")
add("memo-missing-LONG_BINGET-huge.pkl", "memo_key_missing",
    proto(2) + long_binget(0xFFFFFFFF) + stop(), "LONG_BINGET 0xffffffff with an empty memo")
add("memo-missing-BINGET-5-after-BINPUT-4.pkl", "memo_key_missing",
    proto(2) + none() + binput(4) + op("POP") + binget(5) + stop(),
    "BINGET 5 after only BINPUT 4")
add("memo-missing-GET-after-PUT.pkl", "memo_key_missing",
    none() + put_text(1) + op("POP") + get_text(10) + stop(),
    "GET 10 after only PUT 1 (text memo opcodes)")

add("number-INT-hex.pkl", "invalid_number", op("INT") + line("0x10") + stop(),
    "INT '0x10': CPython 3.11 parses INT with base 0 and loads 16 (bug); decimal only")
add("number-INT-underscore.pkl", "invalid_number", op("INT") + line("1_000") + stop(),
    "INT '1_000': CPython 3.11 accepts underscores (int() syntax); decimal digits only")
add("number-INT-leading-space.pkl", "invalid_number", op("INT") + line(" 5") + stop(),
    "INT ' 5': CPython 3.11 skips leading whitespace (strtol); sign and digits only")
add("number-INT-nul.pkl", "invalid_number", op("INT") + line(b"12\x0034") + stop(),
    "INT '12\\x0034': CPython 3.11 cuts number text at the NUL and loads 12 (bug)")
add("number-INT-letters.pkl", "invalid_number", op("INT") + line("abc") + stop(),
    "INT 'abc'")
add("number-INT-double-sign.pkl", "invalid_number", op("INT") + line("+-5") + stop(),
    "INT '+-5'")
add("number-INT-non-ascii-digits.pkl", "invalid_number",
    op("INT") + line("\u0661\u0662") + stop(),
    "INT of Arabic-Indic digits (Python's int() would accept them in a str)")
add("number-LONG-hex.pkl", "invalid_number", op("LONG") + line("0x10L") + stop(),
    "LONG '0x10L'")
add("number-LONG-fraction.pkl", "invalid_number", op("LONG") + line("1.5L") + stop(),
    "LONG '1.5L'")
add("number-FLOAT-garbage.pkl", "invalid_number", op("FLOAT") + line("1.2.3") + stop(),
    "FLOAT '1.2.3'")
add("number-PUT-negative.pkl", "invalid_number",
    none() + op("PUT") + line("-1") + stop(), "PUT '-1' (negative memo index)")
add("number-PUT-letters.pkl", "invalid_number",
    none() + op("PUT") + line("abc") + stop(), "PUT 'abc'")
add("number-GET-hex.pkl", "invalid_number",
    none() + put_text(1) + op("GET") + line("0x1") + op("POP") + stop(),
    "GET '0x1' after PUT 1")
add("number-BINSTRING-negative-length.pkl", "invalid_number",
    proto(1) + op("BINSTRING") + i32(-1) + b"abcd" + stop(),
    "BINSTRING with a negative byte count (-1): pickle.py says negative byte count; the C "
    "unpickler reads it as unsigned and reports truncation")
add("number-LONG4-negative-length.pkl", "invalid_number",
    proto(2) + op("LONG4") + i32(-5) + b"abcd" + stop(),
    "LONG4 with a negative byte count (-5)")

add("string-unquoted.pkl", "invalid_string", op("STRING") + line("abc") + stop(),
    "STRING argument without quotes")
add("string-unterminated.pkl", "invalid_string", op("STRING") + line("'abc") + stop(),
    "STRING argument with an opening quote only")
add("string-mismatched-quotes.pkl", "invalid_string", op("STRING") + line("'abc\"") + stop(),
    "STRING argument opened with ' and closed with \"")
add("string-lone-quote.pkl", "invalid_string", op("STRING") + line("'") + stop(),
    "STRING argument that is a single quote character")

add("escape-STRING-short-hex.pkl", "invalid_escape", op("STRING") + line("'\\x4'") + stop(),
    "STRING with '\\x4' (one hex digit)")
add("escape-STRING-hex-at-end.pkl", "invalid_escape", op("STRING") + line("'ab\\x'") + stop(),
    "STRING ending in '\\x' with no hex digits")
add("escape-UNICODE-truncated-u.pkl", "invalid_escape", op("UNICODE") + line("a\\u12") + stop(),
    "UNICODE with a truncated \\u escape")
add("escape-UNICODE-truncated-U.pkl", "invalid_escape",
    op("UNICODE") + line("\\U0001F60") + stop(),
    "UNICODE with a truncated \\U escape (7 hex digits)")
add("escape-UNICODE-above-max.pkl", "invalid_escape",
    op("UNICODE") + line("\\U00110000") + stop(),
    "UNICODE with \\U00110000 (above U+10FFFF)")

add("utf8-BINUNICODE-overlong.pkl", "invalid_utf8", proto(2) + bu(b"\xc0\x80") + stop(),
    "BINUNICODE payload C0 80 (overlong NUL)")
add("utf8-SHORT_BINUNICODE-ff.pkl", "invalid_utf8", proto(4) + sbu(b"ab\xff") + stop(),
    "SHORT_BINUNICODE payload with byte FF")
add("utf8-BINUNICODE8-truncated-seq.pkl", "invalid_utf8",
    proto(4) + bu8(b"x\xe2\x82") + stop(),
    "BINUNICODE8 payload ending inside a 3-byte sequence")
add("utf8-SHORT_BINUNICODE-above-max.pkl", "invalid_utf8",
    proto(4) + sbu(b"\xf4\x90\x80\x80") + stop(),
    "SHORT_BINUNICODE payload F4 90 80 80 (above U+10FFFF)")
add("utf8-SHORT_BINUNICODE-stack_global-name.pkl", "invalid_utf8",
    proto(4) + sbu("os") + sbu(b"sys\xfftem") + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL name pushed as SHORT_BINUNICODE that is not UTF-8")
add("utf8-GLOBAL-module.pkl", "invalid_utf8", proto(2) + glob(b"\xff\xfe", "system") + stop(),
    "GLOBAL module name that is not UTF-8")
add("utf8-INST-name.pkl", "invalid_utf8",
    op("MARK") + inst("__builtin__", b"s\xc0\x80t") + stop(),
    "INST class name that is not UTF-8")

add("type-APPEND-onto-int.pkl", "type_mismatch",
    proto(2) + binint1(1) + binint1(2) + op("APPEND") + stop(), "APPEND onto an int")
add("type-APPEND-onto-dict.pkl", "type_mismatch",
    proto(2) + op("EMPTY_DICT") + binint1(2) + op("APPEND") + stop(), "APPEND onto a dict")
add("type-APPENDS-onto-tuple.pkl", "type_mismatch",
    proto(2) + op("EMPTY_TUPLE") + op("MARK") + binint1(1) + op("APPENDS") + stop(),
    "APPENDS onto a tuple")
add("type-SETITEM-onto-list.pkl", "type_mismatch",
    proto(2) + op("EMPTY_LIST") + binint1(0) + binint1(1) + op("SETITEM") + stop(),
    "SETITEM onto a list (CPython would do list[0] = 1)")
add("type-SETITEMS-onto-int.pkl", "type_mismatch",
    proto(2) + binint1(3) + op("MARK") + binint1(0) + binint1(1) + op("SETITEMS") + stop(),
    "SETITEMS onto an int")
add("type-ADDITEMS-onto-list.pkl", "type_mismatch",
    proto(4) + op("EMPTY_LIST") + op("MARK") + binint1(1) + op("ADDITEMS") + stop(),
    "ADDITEMS onto a list")
add("type-ADDITEMS-onto-frozenset.pkl", "type_mismatch",
    proto(4) + op("MARK") + binint1(1) + op("FROZENSET") + op("MARK") + binint1(2)
    + op("ADDITEMS") + stop(),
    "ADDITEMS onto a frozenset")
add("type-STACK_GLOBAL-int-module.pkl", "type_mismatch",
    proto(4) + binint1(1) + sbu("system") + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL with an int module name")
add("type-STACK_GLOBAL-bytes-names.pkl", "type_mismatch",
    proto(4) + sbb(b"os") + sbb(b"system") + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL with bytes (SHORT_BINBYTES) names")
add("type-STACK_GLOBAL-none-names.pkl", "type_mismatch",
    proto(4) + none() + none() + op("STACK_GLOBAL") + stop(),
    "STACK_GLOBAL with None names")
add("type-REDUCE-list-callable.pkl", "type_mismatch",
    proto(2) + op("EMPTY_LIST") + op("EMPTY_TUPLE") + op("REDUCE") + stop(),
    "REDUCE whose callable is a list")
add("type-REDUCE-str-callable.pkl", "type_mismatch",
    proto(2) + sbu("os.system") + str_tuple(["id"]) + op("REDUCE") + stop(),
    "REDUCE whose callable is the str 'os.system'")
add("type-NEWOBJ-list-class.pkl", "type_mismatch",
    proto(2) + op("EMPTY_LIST") + op("EMPTY_TUPLE") + op("NEWOBJ") + stop(),
    "NEWOBJ whose class is a list")
add("type-REDUCE-args-list.pkl", "type_mismatch",
    proto(2) + glob("builtins", "set") + op("EMPTY_LIST") + op("REDUCE") + stop(),
    "REDUCE of the allowed builtins.set with a list, not a tuple, as arguments")

add("odd-SETITEMS-three.pkl", "odd_item_count",
    proto(2) + op("EMPTY_DICT") + op("MARK") + binint1(1) + binint1(2) + binint1(3)
    + op("SETITEMS") + stop(),
    "SETITEMS with three items after the MARK")
add("odd-SETITEMS-one.pkl", "odd_item_count",
    proto(2) + op("EMPTY_DICT") + op("MARK") + binint1(1) + op("SETITEMS") + stop(),
    "SETITEMS with one item after the MARK")

add("unhashable-list-key.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + op("EMPTY_LIST") + binint1(1) + op("SETITEM") + stop(),
    "dict key that is a list (SETITEM)")
add("unhashable-dict-key.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + op("EMPTY_DICT") + binint1(1) + op("SETITEM") + stop(),
    "dict key that is a dict (SETITEM)")
add("unhashable-list-key-DICT.pkl", "unhashable_key",
    op("MARK") + op("EMPTY_LIST") + op("INT") + line("1") + op("DICT") + stop(),
    "dict key that is a list (MARK ... DICT)")
add("unhashable-list-key-SETITEMS.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + op("MARK") + binint1(1) + binint1(1) + op("EMPTY_LIST")
    + binint1(2) + op("SETITEMS") + stop(),
    "second dict key of a SETITEMS is a list")
add("unhashable-tuple-with-list-key.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + op("EMPTY_LIST") + op("TUPLE1") + none() + op("SETITEM")
    + stop(),
    "dict key that is a tuple containing a list")
add("unhashable-nested-tuple-with-list-key.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + op("MARK") + binint1(1) + op("MARK") + op("EMPTY_LIST")
    + op("TUPLE") + op("TUPLE") + none() + op("SETITEM") + stop(),
    "dict key that is (1, ([],)): a list two tuples deep")
add("unhashable-set-item-list.pkl", "unhashable_key",
    proto(4) + op("EMPTY_SET") + op("MARK") + op("EMPTY_LIST") + op("ADDITEMS") + stop(),
    "set item that is a list (ADDITEMS)")
add("unhashable-frozenset-item-dict.pkl", "unhashable_key",
    proto(4) + op("MARK") + op("EMPTY_DICT") + op("FROZENSET") + stop(),
    "frozenset item that is a dict (FROZENSET)")
add("unhashable-set-item-set.pkl", "unhashable_key",
    proto(4) + op("EMPTY_SET") + op("MARK") + op("EMPTY_SET") + op("ADDITEMS") + stop(),
    "set item that is a set (ADDITEMS)")
add("unhashable-bytearray-key.pkl", "unhashable_key",
    proto(5) + op("EMPTY_DICT") + op("BYTEARRAY8") + u64(1) + b"x" + none() + op("SETITEM")
    + stop(),
    "dict key that is a bytearray (BYTEARRAY8)")
add("unhashable-builtins.set-key.pkl", "unhashable_key",
    proto(2) + op("EMPTY_DICT") + glob("builtins", "set") + op("EMPTY_TUPLE") + op("REDUCE")
    + none() + op("SETITEM") + stop(),
    "dict key that is a set built by builtins.set()")

add("frame-straddle-argument.pkl", "frame_straddle",
    proto(4) + frame(5) + op("SHORT_BINUNICODE") + u8(5) + b"hel" + b"lo" + stop(),
    "SHORT_BINUNICODE argument crosses the FRAME end (CPython 3.11's C unpickler does not "
    "check frame boundaries)")
add("frame-straddle-opcode-byte-last.pkl", "frame_straddle",
    proto(4) + frame(1) + op("BININT1") + u8(7) + stop(),
    "FRAME ends right after a BININT1 opcode byte; its argument lies outside (PEP 3154 forbids "
    "an opcode overlapping a frame boundary; both CPython 3.11 unpicklers load 7)")
add("frame-straddle-text-line.pkl", "frame_straddle",
    proto(4) + frame(3) + op("INT") + b"12" + b"3\n" + stop(),
    "FRAME ends inside the text line of an INT")
add("frame-straddle-length-prefix.pkl", "frame_straddle",
    proto(4) + frame(3) + op("BINUNICODE") + b"\x02\x00" + b"\x00\x00" + b"hi" + stop(),
    "FRAME ends inside the 4-byte length prefix of BINUNICODE")

_inner = op("POP") + none() + stop()
add("frame-inside-frame.pkl", "frame_inside_frame",
    proto(4) + frame(1 + 9 + len(_inner)) + none() + frame(len(_inner)) + _inner,
    "a second FRAME opens while the first still has bytes left (CPython 3.11's C unpickler "
    "does not check)")
add("frame-inside-frame-first-byte.pkl", "frame_inside_frame",
    proto(4) + frame(9 + 2) + frame(2) + none() + stop(),
    "a FRAME as the very first opcode of another FRAME")

add("trailing-junk.pkl", "trailing_data", none() + stop() + b"junk",
    "'junk' after STOP (CPython's loads ignores it)")
add("trailing-nul.pkl", "trailing_data", proto(2) + none() + stop() + b"\x00",
    "one NUL byte after STOP")
add("trailing-second-pickle-with-global.pkl", "trailing_data",
    proto(2) + none() + stop() + proto(2) + glob("os", "system") + str_tuple(["id"])
    + op("REDUCE") + stop(),
    "a second pickle calling os.system after STOP (outside stream mode, trailing data is "
    "refused first)")

add("stack-not-empty-two-values.pkl", "stack_not_empty",
    proto(2) + binint1(1) + binint1(2) + stop(),
    "STOP with two values on the stack (CPython returns the top one)")
add("stack-not-empty-open-mark.pkl", "stack_not_empty",
    proto(2) + op("MARK") + binint1(1) + stop(),
    "STOP with a MARK still open below the result")
add("stack-not-empty-many.pkl", "stack_not_empty",
    none() + none() + none() + op("MARK") + op("MARK") + none() + stop(),
    "STOP with three values and two MARKs under the result")


# -- 5. truncated -----------------------------------------------------------------------------

add("trunc-empty.pkl", "not_a_pickle", b"", "empty input: no pickle at all")
add("trunc-proto-no-arg.pkl", "truncated", op("PROTO"), "PROTO without its argument byte")
add("trunc-proto-only.pkl", "truncated", proto(2), "PROTO 2 and nothing else")
add("trunc-no-stop.pkl", "truncated", proto(2) + none(), "NONE without a STOP")
add("trunc-no-stop-open-list.pkl", "truncated",
    proto(2) + op("EMPTY_LIST") + op("MARK") + binint1(1) + binint1(2),
    "open APPENDS batch and no STOP")
add("trunc-BININT-short.pkl", "truncated", proto(2) + op("BININT") + b"\x01\x00",
    "BININT with 2 of its 4 bytes")
add("trunc-INT-no-newline.pkl", "truncated", op("INT") + b"123",
    "INT text line without its newline")
add("trunc-STRING-no-newline.pkl", "truncated", op("STRING") + b"'abc'",
    "STRING text line without its newline")
add("trunc-GLOBAL-name-no-newline.pkl", "truncated", op("GLOBAL") + b"os\nsys",
    "GLOBAL whose name line is cut (input ends before the name is known)")
add("trunc-LONG_BINPUT-short.pkl", "truncated",
    proto(2) + none() + op("LONG_BINPUT") + b"\x01\x00", "LONG_BINPUT with 2 of its 4 bytes")
add("trunc-BINUNICODE8-2pow63.pkl", "truncated",
    proto(4) + op("BINUNICODE8") + u64(2 ** 63) + b"0123456789",
    "BINUNICODE8 declaring 2**63 bytes with 10 following")
add("trunc-BINUNICODE8-2pow64-1.pkl", "truncated",
    proto(4) + op("BINUNICODE8") + u64(2 ** 64 - 1) + b"0123456789",
    "BINUNICODE8 declaring 2**64-1 bytes with 10 following")
add("trunc-BINBYTES8-2pow63.pkl", "truncated",
    proto(4) + op("BINBYTES8") + u64(2 ** 63) + b"0123456789",
    "BINBYTES8 declaring 2**63 bytes with 10 following")
add("trunc-BYTEARRAY8-2pow63.pkl", "truncated",
    proto(5) + op("BYTEARRAY8") + u64(2 ** 63) + b"0123456789",
    "BYTEARRAY8 declaring 2**63 bytes with 10 following")
add("trunc-FRAME-2pow63.pkl", "truncated",
    proto(4) + frame(2 ** 63) + none() + op("POP") * 8 + stop(),
    "FRAME declaring 2**63 bytes with 10 following")
add("trunc-FRAME-100.pkl", "truncated",
    proto(4) + frame(100) + op("EMPTY_LIST") + binint1(1) + op("APPEND") + stop(),
    "FRAME declaring 100 bytes with 4 following (a complete pickle inside a short frame; "
    "pickle.py loads it, the C unpickler reports truncation)")
add("trunc-BINUNICODE-ffffffff.pkl", "truncated",
    proto(2) + op("BINUNICODE") + u32(0xFFFFFFFF) + b"abc" + stop(),
    "BINUNICODE declaring 0xffffffff bytes")
add("trunc-BINBYTES-ffffffff.pkl", "truncated",
    proto(3) + op("BINBYTES") + u32(0xFFFFFFFF) + b"abc" + stop(),
    "BINBYTES declaring 0xffffffff bytes")
add("trunc-BINSTRING-7fffffff.pkl", "truncated",
    proto(1) + op("BINSTRING") + i32(0x7FFFFFFF) + b"abc" + stop(),
    "BINSTRING declaring 0x7fffffff bytes")
add("trunc-LONG4-7fffffff.pkl", "truncated",
    proto(2) + op("LONG4") + i32(0x7FFFFFFF) + b"abc" + stop(),
    "LONG4 declaring 0x7fffffff bytes")
add("trunc-SHORT_BINBYTES-255.pkl", "truncated",
    proto(3) + op("SHORT_BINBYTES") + u8(255) + b"abc",
    "SHORT_BINBYTES declaring 255 bytes with 3 following")


# -- 6. limits --------------------------------------------------------------------------------

add("limit-long_text_1m_digits.pkl", "limit_exceeded",
    op("LONG") + line("1" * 1_000_000 + "L") + stop(),
    "LONG text with a million digits (quadratic decimal conversion, CVE-2020-10735)",
    limit="max_long_text_digits")
add("limit-long_text_4301_digits.pkl", "limit_exceeded",
    op("LONG") + line("9" * 4301 + "L") + stop(),
    "LONG text with 4301 digits (limit 4300 + 1)", limit="max_long_text_digits")
add("limit-int_text_5000_digits.pkl", "limit_exceeded",
    op("INT") + line("-" + "7" * 5000) + stop(),
    "INT text with a sign and 5000 digits", limit="max_long_text_digits")
add("limit-int_text_leading_zeros.pkl", "limit_exceeded",
    op("INT") + line("0" * 5000 + "1") + stop(),
    "INT text '000...0001' with 5001 digits, all but one leading zeros (pickle.py counts them; "
    "the C unpickler's strtol path loads 1)",
    limit="max_long_text_digits")
add("limit-long4_5000_bytes.pkl", "limit_exceeded",
    proto(2) + op("LONG4") + i32(5000) + b"\xab" * 5000 + stop(),
    "LONG4 with a 5000-byte payload", limit="max_long_bytes")
add("limit-long4_4097_bytes.pkl", "limit_exceeded",
    proto(2) + op("LONG4") + i32(4097) + b"\x01" * 4096 + b"\x7f" + stop(),
    "LONG4 with a 4097-byte payload (limit 4096 + 1)", limit="max_long_bytes")

_N = 1001
add("limit-nesting-lists-1001.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") * _N + binint1(1) + op("APPEND") * _N + stop(),
    "1001 lists nested by EMPTY_LIST/APPEND with an int innermost (depth 1002)",
    limit="max_nesting_depth")
_N = 1500
add("limit-nesting-tuples-mark-1500.pkl", "limit_exceeded",
    op("MARK") * _N + op("TUPLE") * _N + stop(),
    "1500 tuples nested by MARK ... TUPLE", limit="max_nesting_depth")
_N = 1200
add("limit-nesting-dicts-1200.pkl", "limit_exceeded",
    proto(2) + (op("EMPTY_DICT") + sbu("k")) * _N + none() + op("SETITEM") * _N + stop(),
    "1200 dicts nested by EMPTY_DICT/SETITEM", limit="max_nesting_depth")
_N = 2000
add("limit-nesting-tuple1-memo-2000.pkl", "limit_exceeded",
    proto(2) + none() + b"".join(op("TUPLE1") + long_binput(i) for i in range(_N)) + op("POP")
    + long_binget(_N - 1) + stop(),
    "2000 tuples nested by TUPLE1, each memoized, the outermost fetched back by LONG_BINGET",
    limit="max_nesting_depth")
# Against a depth check that keeps heights as containers are made and filled (src/build/depth.rs):
# a container already inside the root is filled through the memo with a deep chain, so the
# root's height, taken when the container was put into it, is stale.
_N = 1001
add("limit-nesting-list-filled-after-contained.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") + op("EMPTY_LIST") + binput(0) + op("APPEND") + binget(0)
    + op("EMPTY_LIST") * _N + binint1(1) + op("APPEND") * _N + op("APPEND") + op("POP")
    + stop(),
    "a list put into the root, then fetched by BINGET and given 1001 nested lists "
    "(depth 1004: the root's height was taken before)", limit="max_nesting_depth")
add("limit-nesting-dict-filled-after-contained.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") + op("EMPTY_DICT") + binput(0) + op("APPEND") + binget(0)
    + sbu("k") + (op("EMPTY_DICT") + sbu("k")) * _N + none() + op("SETITEM") * (_N + 1)
    + op("POP") + stop(),
    "a dict put into the root, then fetched by BINGET and given 1001 nested dicts by "
    "SETITEM (depth 1004)", limit="max_nesting_depth")
# A cycle counts one level past its last list (found by a review helper: with the number of
# values as a bound, 1000 values that nest 1001 deep were accepted).
add("limit-nesting-cycle-1000-lists.pkl", "limit_exceeded",
    proto(4) + op("EMPTY_LIST") + op("MEMOIZE") + op("EMPTY_LIST") * 999 + binget(0)
    + op("APPEND") * 1000 + stop(),
    "l = [[...[l]...]] with 1000 lists in all: the innermost holds l again, a leaf at depth "
    "1001", limit="max_nesting_depth")
# Set items count where typed JSON writes them (sorted), not in the order they were added
# (found by a review helper): x_i = (i, x_(i+1)), x15 = (); frozenset({x14, ..., x1}) adds
# x14 first, and in that order no path is deeper than 3, but typed JSON writes x1 first, with
# every x_i inside it: 16 deep. (15 memo entries: within the fuzz harness's tight limits.)
_chain = proto(4) + op("EMPTY_TUPLE") + op("MEMOIZE") + op("POP")
for _i in range(14, 0, -1):
    _chain += binint1(_i) + binget(14 - _i) + op("TUPLE2") + op("MEMOIZE") + op("POP")
_chain += op("MARK") + b"".join(binget(15 - _i) for _i in range(14, 0, -1))
add("limit-nesting-frozenset-sorted-order.pkl", "limit_exceeded",
    _chain + op("FROZENSET") + stop(),
    "frozenset of a chain of 14 memoized tuples, added shallowest first, 16 deep as typed "
    "JSON writes it, under max_nesting_depth=15", limit="max_nesting_depth",
    limits="max_nesting_depth=15")
add("limit-nesting-tight-12.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") * 12 + op("APPEND") * 11 + stop(),
    "12 nested lists under max_nesting_depth=10", limit="max_nesting_depth",
    limits="max_nesting_depth=10")

add("limit-stack-dup-bomb.pkl", "limit_exceeded",
    proto(2) + op("MARK") + none() + op("DUP") * 200 + op("TUPLE") + stop(),
    "DUP bomb: 200 DUPs of None under max_stack_len=100", limit="max_stack_len",
    limits="max_stack_len=100")
add("limit-stack-mark-bomb.pkl", "limit_exceeded",
    op("MARK") * 200 + op("POP_MARK") * 200 + none() + stop(),
    "MARK bomb: 200 MARKs under max_stack_len=100", limit="max_stack_len",
    limits="max_stack_len=100")

add("limit-memo-binput-11.pkl", "limit_exceeded",
    proto(2) + none() + b"".join(binput(i) for i in range(11)) + stop(),
    "11 distinct BINPUT indices under max_memo_entries=10", limit="max_memo_entries",
    limits="max_memo_entries=10")
add("limit-memo-memoize-11.pkl", "limit_exceeded",
    proto(4) + none() + memoize() * 11 + stop(),
    "11 MEMOIZEs under max_memo_entries=10", limit="max_memo_entries",
    limits="max_memo_entries=10")
add("limit-memo-put-text-11.pkl", "limit_exceeded",
    none() + b"".join(put_text(i * 20) for i in range(11)) + stop(),
    "11 distinct PUT indices (0, 20, ... 200) under max_memo_entries=10",
    limit="max_memo_entries", limits="max_memo_entries=10")

_items = b"".join(binint1(i) for i in range(11))
add("limit-items-list-appends.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") + op("MARK") + _items + op("APPENDS") + stop(),
    "list of 11 items (one APPENDS) under max_container_items=10",
    limit="max_container_items", limits="max_container_items=10")
add("limit-items-list-append-each.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") + b"".join(binint1(i) + op("APPEND") for i in range(11)) + stop(),
    "list of 11 items (11 APPENDs) under max_container_items=10",
    limit="max_container_items", limits="max_container_items=10")
add("limit-items-tuple.pkl", "limit_exceeded",
    proto(2) + op("MARK") + _items + op("TUPLE") + stop(),
    "tuple of 11 items under max_container_items=10",
    limit="max_container_items", limits="max_container_items=10")
add("limit-items-dict.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_DICT") + op("MARK")
    + b"".join(binint1(i) + none() for i in range(11)) + op("SETITEMS") + stop(),
    "dict of 11 pairs under max_container_items=10",
    limit="max_container_items", limits="max_container_items=10")
add("limit-items-set.pkl", "limit_exceeded",
    proto(4) + op("EMPTY_SET") + op("MARK") + _items + op("ADDITEMS") + stop(),
    "set of 11 items under max_container_items=10",
    limit="max_container_items", limits="max_container_items=10")

add("limit-nodes.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST")
    + b"".join(op("MARK") + b"".join(binint1(j) for j in range(50)) + op("APPENDS")
               for _ in range(4)) + stop(),
    "list of 200 ints (201 values) under max_nodes=100", limit="max_nodes",
    limits="max_nodes=100")
add("limit-alloc.pkl", "limit_exceeded",
    proto(5) + op("BYTEARRAY8") + u64(8192) + b"A" * 8192 + stop(),
    "8192-byte BYTEARRAY8 (an owned copy; BINBYTES borrows the input and costs no allocation) "
    "under max_alloc_bytes=4096", limit="max_alloc_bytes",
    limits="max_alloc_bytes=4096")
add("limit-input-bytes.pkl", "limit_exceeded",
    proto(2) + op("EMPTY_LIST") + op("MARK") + b"".join(binint1(i) for i in range(100))
    + op("APPENDS") + stop(),
    "a valid 206-byte pickle under max_input_bytes=64", limit="max_input_bytes",
    limits="max_input_bytes=64")
add("limit-opcodes.pkl", "limit_exceeded",
    op("MARK") + none() * 150 + op("TUPLE") + stop(),
    "153 opcodes under max_opcodes=100", limit="max_opcodes", limits="max_opcodes=100")


# --------------------------------------------------------------------------------------------

def main(argv):
    out = os.path.abspath(argv[1] if len(argv) > 1 else DEFAULT_OUT)
    os.makedirs(out, exist_ok=True)
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)), "duplicate file names"
    total = 0
    for file, kind, limit, policy, limits, desc, data in CASES:
        assert len(data) < MAX_FILE or file in BIG_OK, (file, len(data))
        total += len(data)
        path = os.path.join(out, file)
        # Write only when different, so re-running leaves files (and mtimes) untouched.
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except FileNotFoundError:
            same = False
        if not same:
            with open(path, "wb") as f:
                f.write(data)
    assert total < MAX_TOTAL, total
    keep = set(names)
    for stale in sorted(os.listdir(out)):
        if stale.endswith(".pkl") and stale not in keep:
            os.remove(os.path.join(out, stale))
    rows = ["file\tkind\tlimit\tpolicy\tlimits\tdescription"]
    rows += ["\t".join(c[:6]) for c in CASES]
    manifest = ("\n".join(rows) + "\n").encode("utf-8")
    with open(os.path.join(out, "MANIFEST.tsv"), "wb") as f:
        f.write(manifest)
    counts = {}
    for c in CASES:
        counts[c[1]] = counts.get(c[1], 0) + 1
    print(f"wrote {len(CASES)} files ({total} bytes) to {out}")
    for kind in sorted(counts):
        print(f"  {kind:26} {counts[kind]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
