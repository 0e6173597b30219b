#!/usr/bin/env python3
"""Writes the vectors of audit/ATTACKS.md A74-A76 (copies and insertions the reader after
does at every call and BUILD, and sparse memo indices below 2**20). Their rows are in
MANIFEST.tsv (added by hand, as make_mitogen_vectors.py's: make_vectors.py writes the rows up
to A40)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
P2 = b"\x80\x02"
M61 = 2**61 - 1  # k * M61 hashes to 0 in CPython for every int k


def put(name, data):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)


def put_i(i):
    return b"r" + struct.pack("<I", i)


def get_i(i):
    return b"j" + struct.pack("<I", i)


def binunicode(b):
    return b"X" + struct.pack("<I", len(b)) + b


def long1(v):
    b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


def calls(global_line, arg, n, tuple_op=b"\x85"):
    """[G(arg)] * n, G and arg memoized once (G as 1, arg as 2)."""
    return (P2 + b"]q\x00(c" + global_line + put_i(1) + b"0" + arg + put_i(2) + b"0"
            + (get_i(1) + get_i(2) + tuple_op + b"R") * n + b"e.")


# A74: one value handed again and again through the memo to a constructor that copies it.
# bytearray(b) of one 20 KB bytes 200 times (protocol 3 for BINBYTES): 4 MB built from 21 KB.
put("a74-bytearray-of-one-bytes-200-times.pkl",
    b"\x80\x03]q\x00(cbuiltins\nbytearray\n" + put_i(1) + b"0B" + struct.pack("<I", 20000)
    + b"x" * 20000 + put_i(2) + b"0" + (get_i(1) + get_i(2) + b"\x85R") * 200 + b"e.")
# _codecs.encode(t, 'latin1') of one 20 KB text 200 times, under mitogen.
put("a74-latin1-of-one-text-200-times-mitogen.pkl",
    P2 + b"]q\x00(c_codecs\nencode\n" + put_i(1) + b"0" + binunicode(b"a" * 20000) + put_i(2)
    + b"0" + binunicode(b"latin1") + put_i(3) + b"0"
    + (get_i(1) + get_i(2) + get_i(3) + b"\x86R") * 200 + b"e.")
# Kwargs(d) of one 1,000-key dict 500 times, under mitogen (Kwargs.__init__ sets every key).
d = b"}" + b"(" + b"".join(binunicode(b"k%d" % i) + b"N" for i in range(1000)) + b"u"
put("a74-kwargs-of-one-1000-key-dict-500-times-mitogen.pkl",
    calls(b"mitogen.core\nKwargs\n", d, 500))

# A75: one BUILD state given to many objects: OrderedDict() then BUILD of one 1,000-key dict
# (the weights_only unpickler's `inst.__dict__.update(state)`), 500 times, under torch.
put("a75-ordereddict-build-of-one-1000-key-state-500-times-torch.pkl",
    P2 + b"]q\x00(ccollections\nOrderedDict\n" + put_i(1) + b"0" + d + put_i(2) + b"0"
    + (get_i(1) + b")R" + get_i(2) + b"b") * 500 + b"e.")
# Counter(l) counts the items of l as keys: 100 ints that collide in CPython's hash, under
# torch (OrderedDict's pairs were modelled, A73; a Counter's items were not).
put("a75-counter-of-100-colliding-ints-torch.pkl",
    P2 + b"ccollections\nCounter\n](" + b"".join(long1(k * M61) for k in range(1, 101))
    + b"e\x85R.")

# A76: memo indices below 2**20 with an empty memo, as CPython's own tests write them
# (Lib/test/pickletester.py test_long_binget: LONG_BINPUT 65536): accepted; 2**20 refused.
put("a76-long-binput-65536-of-an-empty-memo.pkl", P2 + b"]r\x00\x00\x01\x00j\x00\x00\x01\x00\x86.")
put("a76-long-binput-2-20-of-an-empty-memo.pkl", P2 + b"]r\x00\x00\x10\x00.")
