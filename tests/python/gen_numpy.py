#!/usr/bin/env python3
"""Write tests/corpus/numpy/*.tsv: numpy's own pickles of every dtype, array and scalar it
writes, and hand-made variants numpy never writes, for the numpy checks of the `numpy` policy
(src/policy/check/numpy.rs; tests/numpy_canonical.rs and src/policy/check/tests.rs read them).

Each file is a header line, then one tab-separated line per pickle:

    name  expect  kind  itemsize  alignment  flags  protocol  hex

- ``expect``: ``accept`` or ``refuse`` under the built-in `numpy` policy;
- ``kind``: for ``refuse``, the refusal kind (``non_canonical``...); ``-`` otherwise;
- ``itemsize``, ``alignment``, ``flags``: for a dtype, what numpy says of it (``dtype.itemsize``,
  ``dtype.alignment``, ``dtype.flags``); ``-`` otherwise;
- ``hex``: the pickle.

dtypes.tsv, arrays.tsv and scalars.tsv are `pickle.dumps` of real numpy values at protocols 0
to 5 (arrays: 2 to 4 and, for object arrays, 5; protocol 5 writes other arrays through
`numpy._core.numeric._frombuffer`, which the policy does not allow). hostile.tsv is made here
by pickling stand-ins whose `__reduce__` returns what numpy's would with one thing changed, and
a few pickles written opcode by opcode; tests/python/numpy_prove.py loads each with the real
numpy in a child process and prints what it does. The output is the same from run to run but
for the six padding bytes of each x87 `longdouble` (whatever memory held).

Usage: /work/venv-loaders/bin/python tests/python/gen_numpy.py [OUTDIR]
"""

import os
import pickle
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "corpus", "numpy")

ORDERS = "<>"


def plain_types():
    """Every built-in dtype numpy pickles by name, in every byte order it writes."""
    out = [("bool", np.dtype("?"))]
    for k in "iu":
        out.append((f"{k}1", np.dtype(f"{k}1")))
        for n in (2, 4, 8):
            for o in ORDERS:
                out.append((f"{o}{k}{n}", np.dtype(f"{o}{k}{n}")))
    for n in (2, 4, 8, 16):
        for o in ORDERS:
            out.append((f"{o}f{n}", np.dtype(f"{o}f{n}")))
    for n in (8, 16, 32):
        for o in ORDERS:
            out.append((f"{o}c{n}", np.dtype(f"{o}c{n}")))
    out.append(("object", np.dtype("O")))
    for n in (0, 1, 5, 255, 100000):
        out.append((f"S{n}", np.dtype(f"S{n}")))
        out.append((f"V{n}", np.dtype(f"V{n}")))
        for o in ORDERS:
            out.append((f"{o}U{n}", np.dtype(f"{o}U{n}")))
    for k in "Mm":
        for o in ORDERS:
            out.append((f"{o}{k}8", np.dtype(f"{o}{k}8")))
            for unit in ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as"):
                out.append((f"{o}{k}8[{unit}]", np.dtype(f"{o}{k}8[{unit}]")))
            out.append((f"{o}{k}8[10ms]", np.dtype(f"{o}{k}8[10ms]")))
    return out


def structured_types():
    """Structured dtypes and sub-arrays numpy writes (fields holding objects are refused)."""
    return [
        ("struct", np.dtype([("a", "<i4"), ("b", "<f4")]), "accept"),
        ("struct_subarray", np.dtype([("a", "<i4"), ("b", "<f4", (2,))]), "accept"),
        ("struct_subarray_2d", np.dtype([("m", ">f8", (2, 3))]), "accept"),
        ("struct_aligned", np.dtype([("a", "u1"), ("b", "<i8"), ("c", "<U2")], align=True), "accept"),
        ("struct_offsets", np.dtype({"names": ["a"], "formats": ["<i4"], "offsets": [4],
                                     "itemsize": 12}), "accept"),
        ("struct_nested", np.dtype([("n", [("x", "<i2"), ("y", "S3")]), ("t", "<M8[s]")]), "accept"),
        ("struct_unicode", np.dtype([("s", "<U3"), ("v", "V2")]), "accept"),
        ("struct_one_field", np.dtype([("only", "|b1")]), "accept"),
        ("struct_object_field", np.dtype([("o", "O"), ("x", "<i4")]), "refuse"),
        ("struct_title", np.dtype([(("title", "a"), "<i4")]), "refuse"),
        ("subarray_alone", np.dtype(("<f4", (2, 3))), "accept"),
        ("subarray_object", np.dtype(("O", (2,))), "refuse"),
    ]


def row(name, expect, kind, value, protocol, dtype=None):
    data = pickle.dumps(value, protocol=protocol)
    facts = ["-", "-", "-"]
    if dtype is not None:
        facts = [str(dtype.itemsize), str(dtype.alignment), str(dtype.flags)]
    return [name, expect, kind] + facts + [str(protocol), data.hex()]


def dtypes_rows():
    rows = []
    for name, dt in plain_types():
        for p in (0, 2, 4):
            rows.append(row(name, "accept", "-", dt, p, dt))
    for name, dt, expect in structured_types():
        kind = "-" if expect == "accept" else "non_canonical"
        for p in (2, 4):
            rows.append(row(name, expect, kind, dt, p, dt))
    return rows


def array_values():
    return [
        ("f8_3x4", np.arange(12, dtype="<f8").reshape(3, 4)),
        ("i4_fortran", np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3))),
        ("big_endian", np.arange(5, dtype=">i2")),
        ("zero_d", np.array(3.5)),
        ("empty", np.zeros((0,), dtype="<f4")),
        ("empty_2d", np.zeros((3, 0), dtype="<i8")),
        ("bool", np.array([True, False, True])),
        ("complex", np.array([1 + 2j, 3j], dtype="<c16")),
        ("f16", np.arange(3, dtype=np.longdouble)),
        ("unicode", np.array(["ab", "c\u00e9"], dtype="<U3")),
        ("bytes", np.array([b"x", b"yz"], dtype="S2")),
        ("void", np.array([b"\x01\x02", b"\x03\x04"], dtype="V2")),
        ("datetime", np.array(["2020-01-01", "2021-06-30"], dtype="<M8[D]")),
        ("timedelta", np.array([1, 2], dtype="<m8[ms]")),
        ("structured", np.zeros(3, dtype=[("a", "<i4"), ("b", "<f4", (2,))])),
        ("structured_aligned", np.zeros(2, dtype=np.dtype([("a", "u1"), ("b", "<i8")], align=True))),
        ("structured_nested", np.zeros(2, dtype=[("n", [("x", "<i2")]), ("t", "S3")])),
        ("object", np.array([1, "two", (3.0,), None, b"\x00"], dtype=object)),
        ("object_2d_fortran", np.asfortranarray(np.array([[1, 2], [3, {"a": 1}]], dtype=object))),
        ("object_zero_d", np.array({"k": [1, 2]}, dtype=object)),
        ("object_empty", np.zeros((2, 0), dtype=object)),
        ("shared_dtype", [np.zeros(2, dtype="<f8"), np.ones(3, dtype="<f8")]),
    ]


def arrays_rows():
    rows = []
    for name, value in array_values():
        objects = name.startswith("object")
        for p in (2, 3, 4) + ((5,) if objects else ()):
            rows.append(row(name, "accept", "-", value, p))
    return rows


def scalars_rows():
    rows = []
    values = [
        ("float64", np.float64(1.5)), ("float32", np.float32(-2)), ("float16", np.float16(2)),
        ("longdouble", np.longdouble(3)), ("int8", np.int8(-3)), ("uint64", np.uint64(2**64 - 1)),
        ("bool", np.bool_(True)), ("complex64", np.complex64(1j)), ("str", np.str_("ab")),
        ("bytes", np.bytes_(b"xy")), ("void", np.void(b"\x01\x02")),
        ("datetime", np.datetime64("2020-01-01", "ns")), ("timedelta", np.timedelta64(5, "s")),
        ("structured", np.zeros(1, dtype=[("a", "<i4"), ("b", "S2")])[0]),
    ]
    for name, value in values:
        for p in (2, 4):
            rows.append(row(name, "accept", "-", value, p))
    return rows


# ---- hostile: numpy's pickles with one thing changed -------------------------------------

class Reduce:
    """Pickles as `func(*args)` with BUILD `state` (when not None), as numpy's own reduce."""

    def __init__(self, func, args, state=None):
        self.func, self.args, self.state = func, args, state

    def __reduce__(self):
        if self.state is None:
            return (self.func, self.args)
        return (self.func, self.args, self.state)


RECONSTRUCT = np._core.multiarray._reconstruct
SCALAR = np._core.multiarray.scalar


def dtype_of(ty, state):
    return Reduce(np.dtype, (ty, False, True), state)


def plain_state(order="<", elsize=-1, align=-1, flags=0):
    return (3, order, None, None, None, elsize, align, flags)


def ndarray(shape, dtype, data, fortran=False, version=1):
    return Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"), (version, shape, dtype, fortran, data))


def hostile_values():
    f8 = dtype_of("f8", plain_state())
    obj = dtype_of("O8", plain_state("|", flags=63))
    yield ("dtype_f8_elsize", dtype_of("f8", plain_state(elsize=16)),
           "f8 with elsize 16 (numpy ignores it; the old locating pass read it)")
    yield ("dtype_f8_alignment", dtype_of("f8", plain_state(align=16)), "f8 with alignment 16")
    yield ("dtype_f8_flags", dtype_of("f8", plain_state(flags=1)), "f8 claiming NPY_ITEM_REFCOUNT")
    yield ("dtype_f8_byteorder", dtype_of("f8", plain_state("|")), "f8 with byte order '|'")
    yield ("dtype_i1_byteorder", dtype_of("i1", plain_state("<")), "i1 with byte order '<'")
    yield ("dtype_u3_flags", dtype_of("U3", plain_state("<", 12, 4, 0)), "U3 without NPY_NEEDS_INIT")
    yield ("dtype_v8_elsize", dtype_of("V8", plain_state("|", 16, 1)), "V8 whose state says 16 bytes")
    yield ("dtype_s5_alignment", dtype_of("S5", plain_state("|", 5, 8)), "S5 with alignment 8")
    yield ("dtype_type_f08", dtype_of("f08", plain_state()), "type string 'f08'")
    yield ("dtype_type_o4", dtype_of("O4", plain_state("|", flags=63)), "type string 'O4'")
    yield ("dtype_args_align", Reduce(np.dtype, ("f8", True, True), plain_state()),
           "numpy.dtype('f8', True, True)")
    yield ("dtype_version_4", dtype_of("f8", (4,) + plain_state()[1:] + (None,)),
           "a version 4 state with metadata None for f8")
    yield ("dtype_datetime_unit", dtype_of("M8", (4, "<", None, None, None, -1, -1, 0,
                                                  (None, (b"xs", 1, 1, 1)))),
           "M8 with unit 'xs'")
    yield ("dtype_datetime_metadata", dtype_of("M8", (4, "<", None, None, None, -1, -1, 0,
                                                      ({"a": 1}, (b"ns", 1, 1, 1)))),
           "M8 with a metadata dict")
    yield ("object_flags_zero", ndarray((2,), dtype_of("O8", plain_state("|", flags=0)),
                                        b"\x41" * 16),
           "an object dtype whose flags drop the object bits, its array given bytes (pointers)")
    yield ("object_array_bytes", ndarray((2,), obj, b"\x41" * 16),
           "an object array given its data as bytes (read as pointers)")
    yield ("object_list_short", ndarray((3,), obj, [1, 2]),
           "an object array of 3 whose list holds 2 (numpy reads past the list)")
    yield ("f8_array_list", ndarray((2,), f8, [1.0, 2.0]), "an f8 array given a list")
    yield ("f8_array_short", ndarray((2,), f8, b"\x00" * 8), "an f8 array of 2 given 8 bytes")
    yield ("reconstruct_args_shape", Reduce(RECONSTRUCT, (np.ndarray, (1,), b"b"),
                                            (1, (1,), f8, False, b"\x00" * 8)),
           "_reconstruct(numpy.ndarray, (1,), b'b')")
    yield ("reconstruct_args_code", Reduce(RECONSTRUCT, (np.ndarray, (0,), b"f"),
                                           (1, (1,), f8, False, b"\x00" * 8)),
           "_reconstruct(numpy.ndarray, (0,), b'f')")
    yield ("ndarray_version_0", ndarray((1,), f8, b"\x00" * 8, version=0), "state version 0")
    yield ("ndarray_fortran_int", Reduce(RECONSTRUCT, (np.ndarray, (0,), b"b"),
                                         (1, (1,), f8, 0, b"\x00" * 8)),
           "is_fortran the int 0")
    yield ("ndarray_negative_dim", ndarray((-1,), f8, b""), "a negative dimension")
    yield ("scalar_long_bytes", Reduce(SCALAR, (f8, b"\x00" * 16)),
           "a float64 scalar given 16 bytes")
    yield ("scalar_short_bytes", Reduce(SCALAR, (f8, b"\x00" * 4)), "a float64 scalar given 4 bytes")
    yield ("scalar_object", Reduce(SCALAR, (obj, b"\x41" * 8)),
           "an object scalar given bytes (a pointer)")
    yield ("struct_field_past_end", dtype_of("V4", (3, "|", None, ("a",), {"a": (f8, 0)},
                                                    4, 1, 16)),
           "a V4 with an f8 field")
    yield ("struct_flags", dtype_of("V8", (3, "|", None, ("a",), {"a": (f8, 0)}, 8, 1, 0)),
           "a structured V8 without NPY_NEEDS_PYAPI")
    yield ("struct_object_field_flags_zero",
           dtype_of("V8", (3, "|", None, ("o",), {"o": (obj, 0)}, 8, 1, 16)),
           "a structured dtype whose object field's flags are dropped")
    yield ("subarray_elsize", dtype_of("V8", (3, "|", (f8, (2,)), None, None, 8, 8, 0)),
           "a sub-array of 2 f8 in 8 bytes")


def built_twice():
    """`numpy.dtype('f8')` with two BUILDs (protocol 2, written opcode by opcode)."""
    state = b"(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"
    return (b"\x80\x02cnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R" + state + b"b"
            + state + b"b.")


def built_after_use():
    """An array of `numpy.dtype('O8')` (no BUILD yet, a real object dtype) holding a list,
    then a BUILD of that dtype clearing its flags (protocol 2, written opcode by opcode)."""
    dtype = b"cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87Rq\x01"
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R"
             b"(K\x01K\x01\x85" + dtype + b"\x89]K\x07atb")
    state = b"(K\x03X\x01\x00\x00\x00|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00t"
    return b"\x80\x03" + array + b"h\x01" + state + b"b0."


def array_built_twice():
    """An f8 array of one element built twice (protocol 3, opcode by opcode)."""
    dtype = (b"cnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R(K\x03X\x01\x00\x00\x00<NNN"
             b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tbq\x01")
    state = b"(K\x01K\x01\x85h\x01\x89C\x08" + b"\x00" * 8 + b"t"
    return (b"\x80\x03cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b"
            b"\x87R(K\x01K\x01\x85" + dtype + b"\x89C\x08" + b"\x00" * 8 + b"tb" + state + b"b.")


def fields_changed():
    """A structured dtype, built, then a field added to its fields dict (fetched from the
    memo) at offset 100 of its 4 bytes: numpy keeps that dict as the dtype's fields, so the
    field would read past each element (protocol 2, opcode by opcode after numpy's own)."""
    import pickletools
    data = pickle.dumps(np.dtype([("a", "<i4")]), protocol=2)
    ops = list(pickletools.genops(data))
    fields = next(ops[k + 1][1] for k in range(len(ops)) if ops[k][0].name == "EMPTY_DICT")
    f8 = b"cnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R"
    return (data[:-1] + b"h" + bytes([fields]) + b"X\x01\x00\x00\x00b" + f8 + b"Kd\x86s0.")


def hostile_rows():
    rows = []
    for name, value, _desc in hostile_values():
        rows.append(row(name, "refuse", "non_canonical", value, 2))
    for name, data in (("dtype_built_twice", built_twice()),
                       ("dtype_built_after_use", built_after_use()),
                       ("ndarray_built_twice", array_built_twice())):
        rows.append([name, "refuse", "non_canonical", "-", "-", "-", "-", data.hex()])
    rows.append(["struct_fields_changed", "refuse", "constructor_rejected", "-", "-", "-", "-",
                 fields_changed().hex()])
    return rows


def write(path, rows):
    with open(path, "w") as f:
        f.write("name\texpect\tkind\titemsize\talignment\tflags\tprotocol\thex\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


def main():
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_OUT)
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "dtypes.tsv"), dtypes_rows())
    write(os.path.join(out, "arrays.tsv"), arrays_rows())
    write(os.path.join(out, "scalars.tsv"), scalars_rows())
    write(os.path.join(out, "hostile.tsv"), hostile_rows())
    print(f"numpy {np.__version__}: wrote {out}")


if __name__ == "__main__":
    main()
