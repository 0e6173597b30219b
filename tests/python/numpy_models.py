#!/usr/bin/env python3
"""npy, npz and joblib files for tests/corpus/models, made by the real writers, and variants
the writers never make (each refused with its named kind). Called by gen_models.py; run alone,
it writes only its own files and replaces only its own MANIFEST.tsv rows:

    /work/venv-torch/bin/python tests/python/numpy_models.py [ROOT]

The files of an older joblib (1.1: no `numpy_array_alignment_bytes`, object arrays pickled at
protocol 2) come from joblib 1.1.1 itself, run in a child process from the folder given by
JOBLIB_OLD (`python -m pip install --target DIR joblib==1.1.1`); without it they are left out.
"""

import contextlib
import io
import os
import pickle
import subprocess
import sys
import zipfile

import joblib
import joblib.numpy_pickle as jnp
import numpy as np
import numpy.lib.format as npf

HERE = os.path.dirname(os.path.abspath(__file__))
COMPRESSIONS = ["zlib", "gzip", "bz2", "xz", "lzma", "lz4"]


class Unseekable(io.RawIOBase):
    """A file joblib cannot `tell()`: it writes `numpy_array_alignment_bytes = None`."""

    def __init__(self):
        self.data = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.data += b
        return len(b)

    def tell(self):
        raise io.UnsupportedOperation("tell")

    def seekable(self):
        return False


def dtype_arrays():
    """Arrays of every kind of dtype numpy writes, with the shapes that matter."""
    return {
        "f2": np.arange(3, dtype="<f2"), "f4": np.arange(3, dtype="<f4"),
        "f8_big": np.arange(3, dtype=">f8"), "f16": np.arange(2, dtype=np.longdouble),
        "c8": np.array([1j], dtype="<c8"), "c16": np.array([1 + 1j], dtype=">c16"),
        "c32": np.array([2j], dtype=np.clongdouble),
        "i1": np.arange(-2, 2, dtype="i1"), "u2": np.arange(3, dtype=">u2"),
        "i8": np.arange(4, dtype="<i8"), "u8": np.arange(2, dtype="<u8"),
        "bool": np.array([True, False]),
        "U": np.array(["a", "bcd"], dtype="<U3"), "U_big": np.array(["x"], dtype=">U2"),
        "S": np.array([b"ab", b""], dtype="S2"), "V": np.array([b"\x01\x02\x03"], dtype="V3"),
        "M8": np.array(["2020-01-01T00:00"], dtype="<M8[m]"),
        "m8": np.array([3, 4], dtype=">m8[10ms]"),
        "struct": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8", (2,)), ("c", "S3")]),
        "struct_aligned": np.zeros(2, dtype=np.dtype([("a", "u1"), ("b", "<i8")], align=True)),
        "struct_nested": np.zeros(1, dtype=[("n", [("x", "<i2"), ("y", "<U1")]), ("t", "<M8[s]")]),
        "fortran": np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3)),
        "zero_d": np.array(2.5), "empty": np.zeros((0,), dtype="<f8"),
        "empty_2d": np.zeros((3, 0), dtype="<i2"),
    }


def object_arrays():
    return {
        "objects": np.array([1, "two", (3.0,), None, b"\x00", {"k": [1]}], dtype=object),
        "objects_2d_fortran": np.asfortranarray(np.array([[1, "a"], [None, 2.5]], dtype=object)),
        "objects_zero_d": np.array([1, 2], dtype=object)[0:1].reshape(()),
        "objects_empty": np.zeros((0, 2), dtype=object),
    }


class Maker:
    def __init__(self, root, entry, out_path):
        self.root, self.entry, self.out_path = root, entry, out_path

    def write(self, folder, name, data, fmt, verdict, kind, desc):
        with open(self.out_path(self.root, folder, name), "wb") as f:
            f.write(data)
        self.entry(folder, name, fmt, verdict, kind, desc)


def npy_bytes(arr, allow_pickle=False):
    b = io.BytesIO()
    np.save(b, arr, allow_pickle=allow_pickle)
    return b.getvalue()


@contextlib.contextmanager
def growth(digits):
    """numpy's writer with another `GROWTH_AXIS_MAX_DIGITS` (0: numpy 1.14 to 1.23, which had
    none)."""
    impl = sys.modules[npf.write_array_header_1_0.__module__]
    old = impl.GROWTH_AXIS_MAX_DIGITS
    impl.GROWTH_AXIS_MAX_DIGITS = digits
    try:
        yield
    finally:
        impl.GROWTH_AXIS_MAX_DIGITS = old


def make_npy(m):
    for name, arr in dtype_arrays().items():
        m.write("good", f"np_{name}.npy", npy_bytes(arr), "npy", "clean", "-",
                f"np.save of a {name} array ({arr.dtype.str if arr.dtype.names is None else 'structured'}, shape {arr.shape})")
    for name, arr in object_arrays().items():
        m.write("good", f"np_{name}.npy", npy_bytes(arr, True), "npy", "clean", "-",
                f"np.save of an object array ({name}): a protocol-4 pickle after the header")
    with growth(0):
        m.write("good", "np_no_growth_space.npy", npy_bytes(np.arange(5.0)), "npy", "clean", "-",
                "an npy header without the growth spaces (as numpy 1.14 to 1.23 wrote it)")
    many = np.zeros(1, dtype=[(f"field_{i:05d}", "u1") for i in range(3200)])
    m.write("good", "np_v2_header.npy", npy_bytes(many), "npy", "clean", "-",
            "format 2.0: a header longer than 65535 bytes (3200 fields)")
    m.write("good", "np_v3_header.npy", npy_bytes(np.zeros(2, dtype=[("\u03c0", "<f8")])), "npy",
            "clean", "-", "format 3.0: a field name that is not Latin-1")
    # ---- npy: variants numpy reads but never writes ----
    good = npy_bytes(np.zeros((3, 4)))
    end = good.index(b"\n") + 1
    head, data = good[:end], good[end:]
    # One space more inside, one less before the newline: the same length.
    spaced = head.replace(b"'descr': '<f8'", b"'descr':  '<f8'", 1)[:-2] + b"\n" + data
    m.write("hostile", "np_header_extra_space.npy", spaced, "npy", "refused", "npy_header",
            "one space more after 'descr': (ast.literal_eval reads it the same)")
    swapped = good.replace(b"'descr': '<f8', 'fortran_order': False",
                           b"'fortran_order': False, 'descr': '<f8'", 1)
    m.write("hostile", "np_header_key_order.npy", swapped, "npy", "refused", "npy_header",
            "the header's keys in another order")
    spelled = head.replace(b"'descr': '<f8'", b"'descr': 'f8'", 1)[:-1] + b" \n" + data
    m.write("hostile", "np_header_descr_spelling.npy", spelled, "npy", "refused", "npy_header",
            "descr 'f8' where numpy writes '<f8'")
    o8 = npy_bytes(np.array([1, 2], dtype=object), True).replace(b"'|O'", b"'|O8'", 1)
    o8 = o8[:10] + o8[10:].replace(b" \n", b"\n", 1)
    m.write("hostile", "np_header_descr_o8.npy", o8, "npy", "refused", "npy_header",
            "descr '|O8' where numpy writes '|O'")
    pointers = ndarray_pickle_flags_zero()
    obj_header = npy_bytes(np.array([1, 2], dtype=object), True)
    obj_header = obj_header[:obj_header.index(b"\n") + 1]
    m.write("hostile", "np_object_flags_zero.npy", obj_header + pointers, "npy", "refused",
            "non_canonical", "an object npy whose pickle gives an object dtype without its "
            "flags and the array's data as bytes (numpy.load reads them as pointers)")
    m.write("hostile", "np_object_not_an_array.npy", obj_header + pickle.dumps([1, 2], 4),
            "npy", "refused", "npy_pickle_mismatch",
            "an object npy whose pickle is a list, not the array")


def ndarray_pickle_flags_zero(protocol=4):
    """The pickle of a 2-element object array whose dtype's state clears its flags and whose
    data is 16 bytes (tests/python/gen_numpy.py, object_flags_zero)."""
    sys.path.insert(0, HERE)
    import gen_numpy
    value = gen_numpy.ndarray((2,), gen_numpy.dtype_of("O8", gen_numpy.plain_state("|", flags=0)),
                              b"\x41" * 16)
    return pickle.dumps(value, protocol=protocol)


def make_npz(m):
    def npz(write, **arrays):
        b = io.BytesIO()
        write(b, **arrays)
        return b.getvalue()

    m.write("good", "np_dtypes.npz", npz(np.savez, **dtype_arrays()), "npz", "clean", "-",
            "np.savez of an array of each kind of dtype")
    m.write("good", "np_dtypes_compressed.npz", npz(np.savez_compressed, **dtype_arrays()), "npz",
            "clean", "-", "np.savez_compressed of the same")
    m.write("good", "np_objects.npz", npz(np.savez, **object_arrays()), "npz", "clean", "-",
            "np.savez of object arrays")
    base = npz(np.savez, a=np.arange(3))
    with zipfile.ZipFile(io.BytesIO(base)) as z:
        items = [(i.filename, z.read(i)) for i in z.infolist()]

    def rezip(extra):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
            for n, d in items + extra:
                z.writestr(zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0)), d)
        return b.getvalue()

    m.write("hostile", "np_member_not_npy.npz", rezip([("b", b"raw bytes")]), "npz", "refused",
            "npz_member", "an npz member not named NAME.npy (numpy.load hands it back as bytes)")
    spaced = npy_bytes(np.zeros(2)).replace(b"'descr': '<f8'", b"'descr':  '<f8'", 1)
    spaced = spaced[:spaced.index(b"\n") - 1] + spaced[spaced.index(b"\n"):]
    m.write("hostile", "np_member_header.npz", rezip([("b.npy", spaced)]), "npz", "refused",
            "npy_header", "an npz member whose header numpy never writes")


# ---- joblib ----

def write_array(pad=None, fill=b"\xff", nested_protocol=5):
    """joblib's `NumpyArrayWrapper.write_array` (joblib/numpy_pickle.py:118), with the padding
    length changed by `pad`, the padding bytes `fill`, or the object array's pickle protocol."""

    def w(self, array, pickler):
        if array.dtype.hasobject:
            pickle.dump(array, pickler.file_handle, protocol=nested_protocol)
            return
        if self.safe_get_numpy_array_alignment_bytes() is not None:
            pos = pickler.file_handle.tell()
            n = 16 - ((pos + 1) % 16)
            if pad:
                n = pad(n)
            pickler.file_handle.write(bytes([n]) + fill * n)
        pickler.file_handle.write(array.tobytes(order=self.order))

    return w


@contextlib.contextmanager
def patched(attrs=None, writer=None):
    """joblib's writer with the wrappers' attributes set from `attrs` and `write_array`
    replaced by `writer`."""
    create = jnp.NumpyPickler._create_array_wrapper
    old_write = jnp.NumpyArrayWrapper.write_array

    def new_create(self, array):
        wrapper = create(self, array)
        for k, v in (attrs or {}).items():
            setattr(wrapper, k, v)
        return wrapper

    jnp.NumpyPickler._create_array_wrapper = new_create
    if writer:
        jnp.NumpyArrayWrapper.write_array = writer
    try:
        yield
    finally:
        jnp.NumpyPickler._create_array_wrapper = create
        jnp.NumpyArrayWrapper.write_array = old_write


def dump(value, compress=0, protocol=None, unseekable=False):
    if unseekable:
        f = Unseekable()
        joblib.dump(value, f, protocol=protocol)
        return bytes(f.data)
    b = io.BytesIO()
    joblib.dump(value, b, compress=compress, protocol=protocol)
    return b.getvalue()


def old_joblib(value_code, compress):
    """A file joblib 1.1.1 writes (JOBLIB_OLD), `value_code` evaluated with numpy as np."""
    where = os.environ.get("JOBLIB_OLD")
    if not where:
        return None
    code = ("import io, sys, joblib, numpy as np\n"
            f"b = io.BytesIO(); joblib.dump({value_code}, b, compress={compress!r})\n"
            "assert joblib.__version__ == '1.1.1'\n"
            "sys.stdout.buffer.write(b.getvalue())\n")
    env = dict(os.environ, PYTHONPATH=where)
    return subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True).stdout


def frame_past_build():
    """A protocol-4 joblib file (written to an unseekable file: no padding) whose FRAME,
    which joblib's writer ends at the wrapper's BUILD, is made to run on over the array's
    bytes; after it, as many bytes again. joblib's unpickler holds the frame in memory and
    reads the array from the file after it, then runs the array's bytes as opcodes: here
    `builtins.print('DESYNC ...')`."""
    marker = b"cbuiltins\nprint\n(VDESYNC: joblib ran the array's bytes\ntR0"
    data = dump({"a": np.frombuffer(marker, dtype="u1")}, protocol=4, unseekable=True)
    build = data.index(b"ub" + marker) + 1  # the wrapper's BUILD
    assert data[2] == 0x95, "a FRAME first"
    after = data[build + 1 + len(marker):]
    frame_end = 11 + int.from_bytes(data[3:11], "little")
    assert frame_end == build + 1, "joblib ends the frame at the BUILD"
    body = data[11:build + 1] + marker + after[:-1]  # all but the STOP
    return data[:3] + len(body).to_bytes(8, "little") + body + b"\x00" * len(marker) + b"."


def built_twice():
    """The wrapper fetched from the memo (BINGET) and built again with its state: joblib reads
    a second array after the second BUILD (protocol 2, written to a stream without `tell()`:
    no padding)."""
    import pickletools
    data = dump({"a": np.arange(2, dtype="u1")}, protocol=2, unseekable=True)
    ops = []
    for op, arg, pos in pickletools.genops(data):  # up to the wrapper's BUILD (its state
        # dict closed by SETITEMS; the dtype's BUILD comes before it)
        ops.append((op.name, arg, pos))
        if op.name == "BUILD" and ops[-2][0] == "SETITEMS":
            break
    i = next(k for k, (name, _, _) in enumerate(ops) if name == "NEWOBJ")
    wrapper = ops[i + 1][1]
    state = next(ops[k + 1][1] for k in range(i, len(ops)) if ops[k][0] == "EMPTY_DICT")
    build = ops[-1][2]
    after = build + 1 + 2  # the array's 2 bytes
    again = b"h" + bytes([wrapper]) + b"h" + bytes([state]) + b"b" + b"\x07\x08" + b"0"
    return data[:after] + again + data[after:]


def make_joblib(m):
    arrays = dict(dtype_arrays())
    arrays.update(object_arrays())
    for c in ["none"] + COMPRESSIONS:
        comp = 0 if c == "none" else (c, 3)
        m.write("good", f"jl_dtypes.{c}.joblib", dump(arrays, comp), "joblib", "clean", "-",
                f"joblib.dump of an array of each kind of dtype and object arrays, compress={c}")
    m.write("good", "jl_protocol2.joblib", dump(arrays, protocol=2), "joblib", "clean", "-",
            "joblib.dump(protocol=2): no frames")
    m.write("good", "jl_protocol5.joblib", dump(arrays, protocol=5), "joblib", "clean", "-",
            "joblib.dump(protocol=5)")
    m.write("good", "jl_alignment_none.joblib", dump(arrays, unseekable=True), "joblib", "clean",
            "-", "joblib.dump to a stream without tell(): numpy_array_alignment_bytes = None, "
            "no padding")
    for c in ["none", "gzip"]:
        old = old_joblib("{'a': np.arange(5.0), 'o': np.array([1, 'x', None], dtype=object), "
                         "'s': np.zeros(2, dtype=[('a', '<i4')])}", 0 if c == "none" else (c, 3))
        if old is not None:
            m.write("good", f"jl_joblib_1.1.{c}.joblib", old, "joblib", "clean", "-",
                    f"written by joblib 1.1.1 (no alignment attribute, object arrays at "
                    f"protocol 2), compress={c}")
    # ---- variants joblib's writer never writes ----
    small = {"a": np.arange(4, dtype="<f8")}
    for label, value in [("float", 16.0), ("str", "16"), ("true", True), ("17", 17)]:
        with patched({"numpy_array_alignment_bytes": value}, write_array()):
            data = dump(small)
        m.write("hostile", f"jl_alignment_{label}.joblib", data, "joblib", "refused",
                "non_canonical", f"numpy_array_alignment_bytes = {value!r} (joblib reads the "
                "padding byte whenever it is not None)")
    with patched(writer=write_array(pad=lambda n: n % 16 + 1)):
        data = dump(small)
    m.write("hostile", "jl_padding_length.joblib", data, "joblib", "refused", "non_canonical",
            "a padding byte other than 16 - (position + 1) % 16 (joblib skips what it says)")
    with patched(writer=write_array(fill=b"\x00")):
        data = dump(small)
    m.write("hostile", "jl_padding_bytes.joblib", data, "joblib", "refused", "non_canonical",
            "padding bytes 0x00 where joblib writes 0xff")
    m.write("hostile", "jl_frame_past_build.joblib", frame_past_build(), "joblib", "refused",
            "non_canonical", "a FRAME that runs on past the wrapper's BUILD: joblib runs the "
            "array's bytes as opcodes")
    with patched(writer=write_array(nested_protocol=4)):
        data = dump({"o": np.array([1, "x"], dtype=object)})
    m.write("hostile", "jl_nested_protocol4.joblib", data, "joblib", "refused", "non_canonical",
            "an object array's pickle at protocol 4 (joblib writes 2, or 5 since 1.5)")
    nested = pickle.dumps(np.array([1, "x"], dtype=object), protocol=2)
    framed = nested[:2] + b"\x95" + (len(nested) - 2).to_bytes(8, "little") + nested[2:]
    data = dump_with_nested({"o": np.array([1, "x"], dtype=object)}, framed)
    m.write("hostile", "jl_nested_frame.joblib", data, "joblib", "refused", "non_canonical",
            "an object array's protocol-2 pickle with a FRAME")
    data = dump_with_nested({"o": np.array([1, "x"], dtype=object)},
                            ndarray_pickle_flags_zero(protocol=2))
    m.write("hostile", "jl_nested_flags_zero.joblib", data, "joblib", "refused", "non_canonical",
            "an object array whose pickle gives an object dtype without its flags and its data "
            "as bytes (joblib's numpy reads them as pointers)")
    m.write("hostile", "jl_built_twice.joblib", built_twice(), "joblib", "refused",
            "non_canonical", "the wrapper fetched again from the memo and built a second time "
            "(joblib reads a second array)")
    with patched({"allow_mmap": True}):
        data = dump({"o": np.array([1, "x"], dtype=object)})
    m.write("hostile", "jl_objects_allow_mmap.joblib", data, "joblib", "refused", "non_canonical",
            "allow_mmap True for an array of objects")
    sys.path.insert(0, HERE)
    import gen_numpy
    obj0 = gen_numpy.dtype_of("O8", gen_numpy.plain_state("|", flags=0))
    with patched({"dtype": obj0}, write_array()):
        data = dump({"p": np.frombuffer(b"\x41" * 16, dtype="<i8")})
    m.write("hostile", "jl_object_flags_zero.joblib", data, "joblib", "refused", "non_canonical",
            "a wrapper whose object dtype's flags are dropped, followed by 16 bytes (joblib reads "
            "them as an array of that dtype)")
    for c in COMPRESSIONS:
        one = dump({"a": 1}, (c, 3))
        m.write("hostile", f"jl_second_stream.{c}.joblib", one + one, "joblib", "refused",
                "decompress_trailing_data", f"a second {c} stream after the first (joblib's "
                "reader reads on into it)")


def dump_with_nested(value, nested):
    """joblib.dump of `value` (one object array) with its object array's pickle `nested`."""

    def w(self, array, pickler):
        pickler.file_handle.write(nested)

    with patched(writer=w):
        return dump(value)


def make(root, entry, out_path):
    m = Maker(root, entry, out_path)
    make_npy(m)
    make_npz(m)
    make_joblib(m)


def standalone(root):
    """Rewrites this module's files and its MANIFEST rows, keeping every other row."""
    manifest = os.path.join(root, "MANIFEST.tsv")
    with open(manifest) as f:
        lines = f.read().splitlines()
    rows = []

    def entry(folder, name, fmt, verdict, kind, description):
        rows.append("\t".join((f"{folder}/{name}", fmt, verdict, kind, description)))

    def out_path(r, folder, name):
        d = os.path.join(r, folder)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, name)

    for folder in ("good", "hostile"):
        for f in os.listdir(os.path.join(root, folder)):
            if f.startswith(("np_", "jl_")):
                os.unlink(os.path.join(root, folder, f))
    make(root, entry, out_path)
    keep = [l for l in lines[1:] if not l.split("\t")[0].split("/")[-1].startswith(("np_", "jl_"))]
    with open(manifest, "w") as f:
        f.write("\n".join([lines[0]] + keep + rows) + "\n")
    print(f"wrote {len(rows)} files under {root}")


if __name__ == "__main__":
    standalone(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                               os.path.join(HERE, "..", "corpus", "models")))
