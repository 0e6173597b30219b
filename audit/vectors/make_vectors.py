#!/usr/bin/env python3
"""Writes the attack vectors of audit/ATTACKS.md into audit/vectors/ and their MANIFEST.tsv.

Standard library only. Hand-made vectors are built opcode by opcode here; some are copied from
tests/corpus/hostile/ (made by tests/python/gen_hostile.py). tests/audit_vectors.rs checks every
line of the manifest:

    file  expected  limit  policy  limits  mode  attack

expected: an error kind name or `ok` (accepted within bounds); limit: the limit a
limit_exceeded names, or -; policy: a built-in policy name; limits: `-` or comma-separated
NAME=VALUE overrides; mode: `single`, `stream`, `mitogen` (a Mitogen child's stdout) or `model`
(a model file, scanned as `picklewarden scan` scans it; expected is the kind of its first
refusal, or of the first part not understood); attack: the ATTACKS.md id (A01...).

Run from the repository root: python3 audit/vectors/make_vectors.py
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
HOSTILE = os.path.join(ROOT, "tests", "corpus", "hostile")

rows = []


def put(name, data, expected, attack, limit="-", policy="data", limits="-", mode="single"):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    rows.append((name, expected, limit, policy, limits, mode, attack))


def copy(hostile_name, expected, attack, **kw):
    with open(os.path.join(HOSTILE, hostile_name), "rb") as f:
        data = f.read()
    put(hostile_name, data, expected, attack, **kw)


def sbu(s):
    b = s.encode("utf-8")
    return b"\x8c" + bytes([len(b)]) + b


def binunicode(s):
    b = s.encode("utf-8")
    return b"X" + struct.pack("<I", len(b)) + b


def long1(n):
    # two's complement little-endian, minimal length (as pickle.encode_long)
    if n == 0:
        return b"\x8a\x00"
    nbytes = (n.bit_length() >> 3) + 1
    b = n.to_bytes(nbytes, "little", signed=True)
    if n < 0 and nbytes > 1 and b[-1] == 0xFF and (b[-2] & 0x80):
        b = b[:-1]
    return b"\x8a" + bytes([len(b)]) + b


P2 = b"\x80\x02"
P4 = b"\x80\x04"

# A01 code-running global, the classic os.system REDUCE
copy("global-os.system-GLOBAL_REDUCE.pkl", "global_not_allowed", "A01")
put("a01-os-system-strict.pkl", b"cos\nsystem\n(S'id'\ntR.", "global_not_allowed", "A01", policy="strict")
put("a01-os-system-mitogen.pkl", P2 + b"cos\nsystem\nX\x02\x00\x00\x00id\x85R.", "global_not_allowed", "A01", policy="mitogen")
# A02 aliases of code-running callables
for g in ["posix.system", "nt.system", "__builtin__.eval", "builtins.exec", "subprocess.Popen",
          "runpy._run_code", "types.FunctionType", "ctypes.CDLL", "webbrowser.open", "socket.socket",
          "shutil.rmtree", "code.InteractiveInterpreter"]:
    copy(f"global-{g}-GLOBAL_REDUCE.pkl", "global_not_allowed", "A02")
for g in ["_posixsubprocess.fork_exec", "pty.spawn", "timeit.timeit", "pdb.run", "builtins.compile",
          "builtins.breakpoint", "builtins.setattr", "builtins.globals",
          "numpy.core.multiarray._reconstruct", "torch._utils._rebuild_tensor_v2"]:
    copy(f"global-misc-{g}.pkl", "global_not_allowed", "A02")
# A03 dotted names walked by protocol 4's getattr
for f in ["global-dotted-builtins.eval.__call__.pkl", "global-dotted-_codecs.encode.__self__.pkl",
          "global-dotted-builtins.set.__class__.pkl", "global-dotted-os.path.join.pkl",
          "global-dotted-GLOBAL-builtins.eval.__call__.pkl", "global-dotted-builtins.bytearray.fromhex.pkl"]:
    copy(f, "global_not_allowed", "A03")
# A04 generic resolvers
for g in ["pkgutil.resolve_name", "importlib.import_module", "builtins.__import__", "builtins.getattr",
          "operator.attrgetter", "functools.partial"]:
    copy(f"global-{g}-GLOBAL_REDUCE.pkl", "global_not_allowed", "A04")
copy("global-misc-copyreg._reconstructor.pkl", "global_not_allowed", "A04")
# A05 STACK_GLOBAL fed through the memo
copy("global-os.system-STACK_GLOBAL_BINPUT_BINGET_REDUCE.pkl", "global_not_allowed", "A05")
copy("global-os.system-STACK_GLOBAL_MEMOIZE_GET_REDUCE.pkl", "global_not_allowed", "A05")
copy("global-stack_global-long_binput-names.pkl", "global_not_allowed", "A05")
# names memoized in a list, fetched through DUP/GET of another value: module via memo, name inline
put("a05-stack-global-memo-in-list.pkl",
    P4 + b"]" + sbu("os") + b"\x94a" + b"0" + b"h\x00" + sbu("system") + b"\x93" + sbu("id") + b"\x85R.",
    "global_not_allowed", "A05")
# A06 STACK_GLOBAL names written by other string opcodes
for f in ["global-stack_global-binunicode8-names.pkl",
          "global-stack_global-unicode-escaped-names.pkl", "global-os.system-STACK_GLOBAL_BINUNICODE_REDUCE.pkl"]:
    copy(f, "global_not_allowed", "A06")
# Python 2 strings are ASCII str under data (CPython's default encoding='ASCII')
copy("global-stack_global-short_binstring-names.pkl", "global_not_allowed", "A06")
# A07 STACK_GLOBAL with names that are not str
put("a07-stack-global-bytes-names.pkl", P4 + b"C\x02osC\x06system\x93.", "type_mismatch", "A07")
# Python 2 strings are bytes under mitogen (Mitogen's encoding='bytes')
put("a07-stack-global-short-binstring-names-mitogen.pkl", P4 + b"U\x02osU\x06system\x93.",
    "type_mismatch", "A07", policy="mitogen")
put("a07-stack-global-int-names.pkl", P4 + b"K\x01K\x02\x93.", "type_mismatch", "A07")
# A08 INST
copy("global-os.system-INST.pkl", "global_not_allowed", "A08")
copy("global-builtins.eval-INST.pkl", "global_not_allowed", "A08")
copy("mark-missing-INST.pkl", "mark_missing", "A08")
# A09 OBJ
copy("global-os.system-OBJ.pkl", "global_not_allowed", "A09")
copy("mark-missing-OBJ.pkl", "mark_missing", "A09")
# A10 NEWOBJ on an allowed native constructor
copy("form-newobj-builtins.set.pkl", "form_not_allowed", "A10")
copy("form-newobj-_codecs.encode.pkl", "form_not_allowed", "A10")
copy("global-os.system-GLOBAL_NEWOBJ.pkl", "global_not_allowed", "A10")
# A11 NEWOBJ_EX
copy("form-newobj_ex-builtins.set.pkl", "form_not_allowed", "A11")
copy("global-os.system-STACK_GLOBAL_NEWOBJ_EX.pkl", "global_not_allowed", "A11")
# A12 BUILD (__setstate__ / instance __dict__ update) on values
for f in ["build-on-builtins.set.pkl", "build-on-dict.pkl", "build-on-list.pkl", "build-on-int.pkl"]:
    copy(f, "build_not_allowed", "A12")
# mitogen records are reduce-only: BUILD on a Secret is refused by form
put("a12-build-on-mitogen-secret.pkl",
    P2 + b"cmitogen.core\nSecret\nX\x01\x00\x00\x00x\x85R}b.", "form_not_allowed", "A12", policy="mitogen")
# A13 allowed constructors with hostile arguments
put("a13-bytes-of-int-1e9.pkl", P2 + b"c__builtin__\nbytes\nJ\x00\xca\x9a;\x85R.", "constructor_rejected", "A13")
copy("ctor-_codecs.encode-utf8.pkl", "constructor_rejected", "A13")
copy("ctor-builtins.set-int.pkl", "constructor_rejected", "A13")
put("a13-mitogen-blob-1e9.pkl", P2 + b"cmitogen.core\nBlob\nJ\x00\xca\x9a;\x85R.", "constructor_rejected", "A13", policy="mitogen")
# A14 extension codes (copyreg's extension registry and its cache)
copy("ext-EXT1.pkl", "extension_code_rejected", "A14")
copy("ext-EXT2.pkl", "extension_code_rejected", "A14")
copy("ext-EXT4.pkl", "extension_code_rejected", "A14")
put("a14-ext4-negative.pkl", P2 + b"\x84\xff\xff\xff\xff.", "extension_code_rejected", "A14")
# A15 persistent ids
copy("persid-PERSID.pkl", "persistent_id_rejected", "A15")
copy("persid-BINPERSID.pkl", "persistent_id_rejected", "A15")
# A16 a nested pickle passed to a loader, or carried as data
copy("global-pickle.loads-GLOBAL_REDUCE.pkl", "global_not_allowed", "A16")
copy("global-_pickle.loads-STACK_GLOBAL_SBU_REDUCE.pkl", "global_not_allowed", "A16")
inner = b"cos\nsystem\n(S'id'\ntR."
put("a16-nested-pickle-as-bytes.pkl", b"\x80\x03C" + bytes([len(inner)]) + inner + b".", "ok", "A16")
# A17 a refused global that is never called (dead code, popped, only memoized)
copy("global-dead-code-popped.pkl", "global_not_allowed", "A17")
copy("global-dead-code-pop_mark.pkl", "global_not_allowed", "A17")
copy("global-memo-only.pkl", "global_not_allowed", "A17")
copy("global-hidden-in-allowed-call-args.pkl", "global_not_allowed", "A17")
# A18 payload after STOP
copy("trailing-second-pickle-with-global.pkl", "trailing_data", "A18")
copy("trailing-second-pickle-with-global.pkl", "global_not_allowed", "A18", mode="stream")
copy("trailing-junk.pkl", "trailing_data", "A18")
# A19 memo-index DoS (CPython 3.11 allocates an array as long as the index)
put("a19-long-binput-huge-index.pkl", P2 + b"]r\xff\xff\xff\x0f.", "ok", "A19")
put("a19-long-binput-max-index.pkl", P2 + b"]r\xff\xff\xff\xff.", "ok", "A19")
copy("limit-memo-binput-11.pkl", "limit_exceeded", "A19", limit="max_memo_entries", limits="max_memo_entries=10")
# A20 GET of an index never set
copy("memo-missing-LONG_BINGET-huge.pkl", "memo_key_missing", "A20")
copy("memo-missing-GET-after-PUT.pkl", "memo_key_missing", "A20")
# A21 DUP/GET amplification ("billion laughs"): 40 levels, each a list holding the previous twice
laughs = bytearray(P2 + b"]q\x00")
for i in range(1, 41):
    laughs += b"]" + b"h" + bytes([i - 1]) + b"a" + b"h" + bytes([i - 1]) + b"a" + b"q" + bytes([i])
laughs += b"."
# the stack holds all 41 lists; keep only the last: rebuild as a proper single value
laughs = bytearray(P2)
laughs += b"]q\x00"                       # level 0, memo 0
for i in range(1, 41):
    laughs += b"0"                         # drop the previous level from the stack (it is memoized)
    laughs += b"](h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"eq" + bytes([i])
laughs += b"."
put("a21-billion-laughs-lists.pkl", bytes(laughs), "ok", "A21")
dup = bytearray(P2 + b"](")
dup += b"]" + b"2" * 4000 + b"e."
put("a21-dup-4000.pkl", bytes(dup), "ok", "A21")
# A22 depth bombs
copy("limit-nesting-lists-1001.pkl", "limit_exceeded", "A22", limit="max_nesting_depth")
copy("limit-nesting-tuples-mark-1500.pkl", "limit_exceeded", "A22", limit="max_nesting_depth")
put("a22-nesting-20k-lists.pkl", P2 + b"]" * 20000 + b"a" * 19999 + b".", "limit_exceeded", "A22",
    limit="max_nesting_depth")
# Against the depth check's shortcuts: a container filled after it was put into another, a
# cycle, and set items in another order than typed JSON writes them.
copy("limit-nesting-list-filled-after-contained.pkl", "limit_exceeded", "A22",
     limit="max_nesting_depth")
copy("limit-nesting-cycle-1000-lists.pkl", "limit_exceeded", "A22", limit="max_nesting_depth")
copy("limit-nesting-frozenset-sorted-order.pkl", "limit_exceeded", "A22",
     limit="max_nesting_depth", limits="max_nesting_depth=15")

# A41: a frozenset of 5,000 tuples (i, S) sharing one 16 KiB text S: each set sort key once
# held all of S (80 MB for 56 KB of input; cli/tests/cli.rs runs a larger form in 256 MiB).
_a41 = b"\x80\x04X" + struct.pack("<I", 16384) + b"z" * 16384 + b"\x940("
_a41 += b"".join(b"J" + struct.pack("<i", i) + b"h\x00\x86" for i in range(5000))
put("a41-set-of-tuples-sharing-a-text.pkl", _a41 + b"\x91.", "ok", "A41")

# A42: hashing what was hashed before. 20,000 frozensets, each holding the one before (40 KB):
# each FROZENSET hashed the whole chain below it (10 s before the depth refusal at STOP).
put("a42-nested-frozensets-20000.pkl", P4 + b"(" * 20000 + b"\x91" * 20000 + b".",
    "limit_exceeded", "A42", limit="max_nesting_depth")
# 5,000 set items (i, s) sharing one 16 KiB text s: each item hashed s again.
_a42 = P4 + b"X" + struct.pack("<I", 16384) + b"q" * 16384 + b"\x940("
_a42 += b"".join(b"J" + struct.pack("<i", i) + b"h\x00\x86" for i in range(5000))
put("a42-set-of-tuples-sharing-a-text.pkl", _a42 + b"\x91.", "ok", "A42")
# A23 stack bombs: MARK and DUP without building values
copy("limit-stack-mark-bomb.pkl", "limit_exceeded", "A23", limit="max_stack_len", limits="max_stack_len=100")
copy("limit-stack-dup-bomb.pkl", "limit_exceeded", "A23", limit="max_stack_len", limits="max_stack_len=100")
# A24 hash flooding: 5000 int keys that all hash to 0 under CPython (k * (2**61 - 1))
flood = bytearray(P2 + b"}(")
for k in range(5000):
    flood += long1(k * (2 ** 61 - 1)) + b"K\x01"
flood += b"u."
put("a24-dict-5000-cpython-colliding-int-keys.pkl", bytes(flood), "ok", "A24")
fset = bytearray(P4 + b"\x8f(")
for k in range(5000):
    fset += long1(k * (2 ** 61 - 1))
fset += b"\x90."
put("a24-set-5000-cpython-colliding-int-keys.pkl", bytes(fset), "ok", "A24")
# equal keys of different types collapse, as CPython's dict does: {1: a, 1.0: b, True: c} has 1 item
put("a24-equal-keys-of-three-types.pkl", P2 + b"}(K\x01K\x01G?\xf0\x00\x00\x00\x00\x00\x00K\x02\x88K\x03u.", "ok", "A24")
# A25 huge length prefixes
put("a25-binbytes8-2pow63.pkl", P4 + b"\x8e" + struct.pack("<Q", 2 ** 63) + b"abc.", "truncated", "A25")
put("a25-binunicode8-2pow64-1.pkl", P4 + b"\x8d" + b"\xff" * 8 + b".", "truncated", "A25")
put("a25-bytearray8-1tb.pkl", P4 + b"\x96" + struct.pack("<Q", 2 ** 40) + b".", "truncated", "A25")
copy("trunc-BINBYTES-ffffffff.pkl", "truncated", "A25")
copy("number-BINSTRING-negative-length.pkl", "invalid_number", "A25")
copy("number-LONG4-negative-length.pkl", "invalid_number", "A25")
put("a25-frame-2pow64-1.pkl", P4 + b"\x95" + b"\xff" * 8 + b"N.", "truncated", "A25")
# A26 frame straddling (the C and Python unpicklers disagree on these)
copy("frame-straddle-argument.pkl", "frame_straddle", "A26")
copy("frame-straddle-length-prefix.pkl", "frame_straddle", "A26")
copy("frame-straddle-text-line.pkl", "frame_straddle", "A26")
copy("frame-inside-frame.pkl", "frame_inside_frame", "A26")
# A27 truncation
put("a27-truncated-mid-binunicode.pkl", P2 + b"X\x10\x00\x00\x00abc", "truncated", "A27")
put("a27-no-stop.pkl", P2 + b"N", "truncated", "A27")
put("a27-empty.pkl", b"", "not_a_pickle", "A27")
# A28 big-int DoS (CVE-2020-10735: decimal text to int is quadratic)
put("a28-long-text-20k-digits.pkl", b"L" + b"9" * 20000 + b"L\n.", "limit_exceeded", "A28", limit="max_long_text_digits")
put("a28-int-text-4300-digits.pkl", b"I" + b"9" * 4300 + b"\n.", "ok", "A28")
copy("limit-long4_5000_bytes.pkl", "limit_exceeded", "A28", limit="max_long_bytes")
# A29 protocol confusion
copy("proto-6.pkl", "unsupported_protocol", "A29")
copy("proto-255.pkl", "unsupported_protocol", "A29")
# A30 unhashable keys (CPython raises TypeError; a loader that hashes by identity would not)
put("a30-list-as-dict-key.pkl", P2 + b"}]K\x01s.", "unhashable_key", "A30")
put("a30-tuple-holding-list-in-set.pkl", P4 + b"\x8f(]\x85\x90.", "unhashable_key", "A30")
# A31 out-of-band buffers the caller did not supply
copy("buffers-NEXT_BUFFER.pkl", "buffers_not_supplied", "A31")
copy("buffers-NEXT_BUFFER-READONLY_BUFFER.pkl", "buffers_not_supplied", "A31")
# A32 number-text parse differentials between unpicklers and scanners
for f in ["number-INT-underscore.pkl", "number-INT-leading-space.pkl", "number-INT-nul.pkl",
          "number-INT-hex.pkl", "number-GET-hex.pkl", "number-PUT-negative.pkl"]:
    copy(f, "invalid_number", "A32")
# A33 text-encoding tricks in global names (scanners compare bytes, loaders compare decoded str)
copy("global-GLOBAL-non-ascii-module.pkl", "global_not_allowed", "A33")
copy("global-GLOBAL-nul-in-module.pkl", "global_not_allowed", "A33")
copy("global-misc-_codecs.encode-trailing-space.pkl", "global_not_allowed", "A33")
copy("global-misc-Builtins.set.pkl", "global_not_allowed", "A33")
copy("utf8-SHORT_BINUNICODE-stack_global-name.pkl", "invalid_utf8", "A33")
# A34 latin1 constructor with text it cannot encode
copy("ctor-_codecs.encode-non-latin1-text.pkl", "constructor_rejected", "A34")
# A35 allocation budget
copy("limit-alloc.pkl", "limit_exceeded", "A35", limit="max_alloc_bytes", limits="max_alloc_bytes=4096")
put("a35-bytearray8-copies.pkl", P4 + (b"\x96" + struct.pack("<Q", 1024) + b"\x00" * 1024 + b"0") * 8 + b"N.",
    "limit_exceeded", "A35", limit="max_alloc_bytes", limits="max_alloc_bytes=4096")
# A36 container items and node bombs
copy("limit-items-list-appends.pkl", "limit_exceeded", "A36", limit="max_container_items", limits="max_container_items=10")
copy("limit-nodes.pkl", "limit_exceeded", "A36", limit="max_nodes", limits="max_nodes=100")
copy("limit-opcodes.pkl", "limit_exceeded", "A36", limit="max_opcodes", limits="max_opcodes=100")
# A37 stack left behind at STOP / open MARK (parser differential with loaders that ignore it)
copy("stack-not-empty-two-values.pkl", "stack_not_empty", "A37")
copy("stack-not-empty-open-mark.pkl", "stack_not_empty", "A37")
# A38 input size
copy("limit-input-bytes.pkl", "limit_exceeded", "A38", limit="max_input_bytes", limits="max_input_bytes=64")

# A39 a record on a cycle through a set, all popped (typed JSON looped forever before 67b5088)
put("a39-record-cycle-through-set-mitogen.pkl",
    P4 + b"cmitogen.core\nKwargs\n}q\x00\x85Rq\x010h\x00X\x01\x00\x00\x00k\x8f(h\x01\x90s0N.",
    "ok", "A39", policy="mitogen")

# A40 a tuple DAG as a set item / dict key (hashing was exponential before the fix in keys.rs)
put("a40-tuple-dag-set-strict.pkl",
    P4 + b"\x8f(K\x00" + b"22\x87" * 40 + b"\x90.",
    "ok", "A40", policy="strict")
put("a40-tuple-dag-dict-key.pkl",
    b"\x80\x02}K\x00" + b"2\x86" * 60 + b"K\x01s.",
    "ok", "A40")

# A71 2-tuples of ints that collide under the tuple hash of CPython 3.7 and before (and 2.7):
# x1(a) = (0x345678 ^ hash(a)) * 1000003 after the first item, so (a', b') collides with
# (a, b) when hash(b') = x1(a) ^ x1(a') ^ hash(b)
def old_tuple_hash_collisions(n):
    m64, p61 = (1 << 64) - 1, (1 << 61) - 1
    h = lambda i: (-2 if i == -1 else i) & m64
    x1 = lambda a: ((0x345678 ^ h(a)) * 1000003) & m64
    target = x1(1) ^ h(7)
    out, state = [(1, 7)], 0x123456789ABCDEF0
    while len(out) < n:
        state = (state * 6364136223846793005 + 1) & m64
        a = (state >> 4) | 2
        v = target ^ x1(a)
        s = v - (1 << 64) if v >= 1 << 63 else v
        if abs(s) < p61 - 1 and s not in (-1, -2):
            out.append((a, s))
    return out


def long1_8(i):
    return b"\x8a\x08" + struct.pack("<q", i)


put("a71-set-2000-tuples-colliding-under-cpython-3.7-tuple-hash.pkl",
    P4 + b"\x8f(" + b"".join(long1_8(a) + long1_8(b) + b"\x86"
                          for a, b in old_tuple_hash_collisions(2000)) + b"\x90.",
    "limit_exceeded", "A71", limit="max_key_steps_per_byte")

# A72 two equal 512 KiB texts, the second inserted again and again through the memo: CPython
# compares the two whole at every insertion
TEXT_512K = b"X" + struct.pack("<I", 1 << 19) + b"a" * (1 << 19)
put("a72-dict-meets-an-equal-512kib-text-60000-times.pkl",
    P4 + b"}" + TEXT_512K + b"\x94Ns" + TEXT_512K + b"\x94Ns" + b"h\x01Ns" * 60000 + b".",
    "limit_exceeded", "A72", limit="max_key_steps_per_byte")

# A73 SETITEMS of CPython-colliding int keys into a record that takes items (OrderedDict under
# torch): the reader inserts each into a dict
def long1(v):
    b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


put("a73-torch-ordereddict-2000-colliding-int-keys.pkl",
    P2 + b"ccollections\nOrderedDict\n)R(" + b"".join(long1(k * (2**61 - 1)) + b"N"
                                               for k in range(1, 2001)) + b"u.",
    "limit_exceeded", "A73", limit="max_key_collisions", policy="torch")

# A62 REDUCE on what a call made (a record), which CPython would call
put("a62-reduce-on-a-record-mitogen.pkl", P2 + b"cmitogen.core\nBlob\nC\x01x\x85R)R.",
    "callable_not_allowed", "A62", policy="mitogen")

# A63-A70 zip and tar quirks of model files (mode `model`: scanned as `picklewarden scan` does,
# under the torch policy). The zip ones are tests/python/zip_quirks.py's and gen_models.py's
# fixtures; the tar ones are tests/corpus/models/good/tar_state_dict.pt's members written again
# by tarfile with one quirk each.
MODELS = os.path.join(ROOT, "tests", "corpus", "models")


def model(name, data, expected, attack):
    put(name, data, expected, attack, policy="torch", mode="model")


def model_copy(fixture, name, expected, attack):
    with open(os.path.join(MODELS, "hostile", fixture), "rb") as f:
        model(name, f.read(), expected, attack)


model_copy("zip_local_name_differs.pt", "a63-zip-local-name-differs.pt", "zip_local_header_mismatch", "A63")
model_copy("zip_local_method_differs.pt", "a63-zip-local-method-differs.pt", "zip_local_header_mismatch", "A63")
model_copy("zip_hidden_local_entry.pt", "a64-zip-hidden-local-entry.pt", "zip_layout", "A64")
model_copy("zip_trailing_after_end.pt", "a65-zip-archive-after-end-record.pt", "zip_trailing_data", "A65")
model_copy("zip64_lying_count.pt", "a66-zip64-count-one-short.pt", "zip_count_mismatch", "A66")
model_copy("duplicate_data_pkl.pt", "a67-zip-data-pkl-twice.pt", "zip_duplicate_entry", "A67")
model_copy("two_top_folders.pt", "a67-zip-two-top-folders.pt", "zip_layout", "A67")


def tar_vectors():
    import io
    import math
    import tarfile

    with open(os.path.join(MODELS, "good", "tar_state_dict.pt"), "rb") as f:
        good = f.read()
    t = tarfile.open(fileobj=io.BytesIO(good))
    members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    evil = b"\x80\x02cposix\nsystem\nq\x00X\x04\x00\x00\x00echoq\x01\x85q\x02Rq\x03."

    def info(name, **kw):
        i = tarfile.TarInfo(name)
        i.mtime = 1500000000
        i.mode = 0o644
        for k, v in kw.items():
            setattr(i, k, v)
        return i

    def tar(pre=(), extra=(), fmt=tarfile.PAX_FORMAT):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=fmt) as z:
            for i, d in list(pre) + members + list(extra):
                z.addfile(i, io.BytesIO(d) if d is not None else None)
        return out.getvalue()

    # A68 members that are not regular files
    model("a68-tar-symlink.pt",
          tar(extra=[(info("link", type=tarfile.SYMTYPE, linkname="/etc/passwd"), None)]),
          "tar_layout", "A68")
    model("a68-tar-directory.pt",
          tar(pre=[(info("archive", type=tarfile.DIRTYPE, mode=0o755), None)]),
          "tar_layout", "A68")
    pax = info("decoy", size=len(evil))
    pax.pax_headers = {"path": "pickle"}  # tarfile names it `pickle`, a reader without PAX `decoy`
    model("a68-tar-pax-header-renames.pt", tar(extra=[(pax, evil)]), "tar_layout", "A68")
    model("a68-tar-gnu-long-name.pt",
          tar(extra=[(info("x" * 120, size=len(evil)), evil)], fmt=tarfile.GNU_FORMAT),
          "tar_layout", "A68")
    # A69 a name twice: tarfile reads the last `pickle`, a streaming reader the first
    model("a69-tar-pickle-twice.pt", tar(extra=[(info("pickle", size=len(evil)), evil)]),
          "tar_duplicate_entry", "A69")
    # A70 where the archive ends
    last = members[-1][0]
    end = last.offset_data + math.ceil(last.size / 512) * 512
    assert not any(good[end:])
    model("a70-tar-no-end-blocks.pt", good[:end], "tar_malformed", "A70")
    model("a70-tar-member-past-end.pt", good[:last.offset_data + last.size // 2],
          "tar_malformed", "A70")
    model("a70-tar-bytes-after-end.pt", good + b"trailing", "not_understood", "A70")


tar_vectors()


# A79-A84: numpy and joblib read with rules of their own (mode `single` under the numpy
# policy: numpy's pickles, from tests/corpus/numpy/hostile.tsv, made by
# tests/python/gen_numpy.py; mode `model`: tests/python/numpy_models.py's files).
def numpy_pickle(row_name, name, attack):
    with open(os.path.join(ROOT, "tests", "corpus", "numpy", "hostile.tsv")) as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split("\t")
            if cols[0] == row_name:
                put(name, bytes.fromhex(cols[7]), cols[2], attack, policy="numpy")
                return
    raise KeyError(row_name)


def numpy_model(fixture, name, expected, attack):
    with open(os.path.join(MODELS, "hostile", fixture), "rb") as f:
        put(name, f.read(), expected, attack, policy="numpy", mode="model")


numpy_pickle("object_flags_zero", "a79-object-dtype-without-its-flags.pkl", "A79")
numpy_pickle("dtype_f8_elsize", "a79-f8-dtype-with-elsize-16.pkl", "A79")
numpy_pickle("dtype_v8_elsize", "a79-v8-dtype-whose-state-says-16.pkl", "A79")
numpy_pickle("dtype_built_after_use", "a79-dtype-built-after-an-array-used-it.pkl", "A79")
numpy_model("np_object_flags_zero.npy", "a79-npy-object-dtype-without-its-flags.npy",
            "non_canonical", "A79")
numpy_model("jl_nested_flags_zero.joblib", "a79-joblib-object-dtype-without-its-flags.joblib",
            "non_canonical", "A79")
numpy_pickle("object_array_bytes", "a80-object-array-given-bytes.pkl", "A80")
numpy_pickle("object_list_short", "a80-object-array-list-shorter-than-shape.pkl", "A80")
numpy_pickle("scalar_long_bytes", "a80-scalar-given-longer-bytes.pkl", "A80")
numpy_pickle("scalar_object", "a80-object-scalar-given-bytes.pkl", "A80")
numpy_model("jl_object_flags_zero.joblib", "a80-joblib-wrapper-of-object-dtype-without-flags.joblib",
            "non_canonical", "A80")
for label in ("float", "str", "true", "17"):
    numpy_model(f"jl_alignment_{label}.joblib", f"a81-joblib-alignment-{label}.joblib",
                "non_canonical", "A81")
numpy_model("jl_padding_length.joblib", "a81-joblib-padding-length.joblib", "non_canonical", "A81")
numpy_model("jl_padding_bytes.joblib", "a81-joblib-padding-bytes.joblib", "non_canonical", "A81")
numpy_model("jl_built_twice.joblib", "a81-joblib-wrapper-built-twice.joblib", "non_canonical",
            "A81")
numpy_model("jl_objects_allow_mmap.joblib", "a81-joblib-objects-allow-mmap.joblib",
            "non_canonical", "A81")
numpy_model("jl_frame_past_build.joblib", "a82-joblib-frame-past-the-build.joblib",
            "non_canonical", "A82")
numpy_model("jl_nested_frame.joblib", "a82-joblib-nested-protocol-2-with-frame.joblib",
            "non_canonical", "A82")
numpy_model("jl_nested_protocol4.joblib", "a82-joblib-nested-protocol-4.joblib",
            "non_canonical", "A82")
for c in ("zlib", "gzip", "bz2", "xz", "lzma", "lz4"):
    numpy_model(f"jl_second_stream.{c}.joblib", f"a83-joblib-second-{c}-stream.joblib",
                "decompress_trailing_data", "A83")
numpy_model("np_header_extra_space.npy", "a84-npy-header-extra-space.npy", "npy_header", "A84")
numpy_model("np_header_key_order.npy", "a84-npy-header-key-order.npy", "npy_header", "A84")
numpy_model("np_header_descr_spelling.npy", "a84-npy-header-descr-f8.npy", "npy_header", "A84")
numpy_model("np_object_not_an_array.npy", "a84-npy-object-pickle-not-the-array.npy",
            "npy_pickle_mismatch", "A84")
numpy_model("np_member_not_npy.npz", "a84-npz-member-not-npy.npz", "npz_member", "A84")


with open(os.path.join(HERE, "MANIFEST.tsv"), "w") as f:
    f.write("file\texpected\tlimit\tpolicy\tlimits\tmode\tattack\n")
    seen = set()
    for r in rows:
        key = (r[0], r[5])
        assert key not in seen, key
        seen.add(key)
        f.write("\t".join(r) + "\n")
print(f"{len(rows)} vectors, {len(set(r[6] for r in rows))} attacks")
