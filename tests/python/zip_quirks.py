"""Zip quirks on a real torch checkpoint: archives whose records disagree, so that two zip
readers see different entries or different bytes.

Each file is made from good/state_dict.pt by rewriting bytes of the archive; what torch
(`torch.load`, miniz: central directory, then the local header's own lengths) and Python's
`zipfile` (numpy, most scanners) do with it is printed when the script runs, and recorded in
docs/models.md. picklewarden refuses every one (src/formats/zip_check.rs).
"""

import io
import pickle
import struct
import zipfile

EVIL = None  # set by make()


def _central(data):
    """(offset of the end record, its fields, offset of the central directory, its size)."""
    eocd = data.rfind(b"PK\x05\x06")
    fields = list(struct.unpack("<IHHHHIIH", data[eocd:eocd + 22]))
    return eocd, fields, fields[6], fields[5]


def local_name_differs(good):
    """The local header of data.pkl names another file of the same length."""
    data = bytearray(good)
    name = b"/data.pkl"
    at = data.find(name)  # the first local header's name (data.pkl is the first entry)
    assert data[:4] == b"PK\x03\x04" and at < 64
    data[at:at + len(name)] = b"/xata.pkl"
    return bytes(data)


def local_method_differs(good):
    """The local header of data.pkl says deflate where the central directory says stored."""
    data = bytearray(good)
    assert struct.unpack_from("<H", data, 8)[0] == 0
    struct.pack_into("<H", data, 8, 8)
    return bytes(data)


def hidden_local_entry(good, evil):
    """A local entry `<top>/data.pkl` holding a hostile pickle before the listed entries, that
    the central directory does not list: a streaming reader meets it first."""
    with zipfile.ZipFile(io.BytesIO(good)) as z:
        top = z.namelist()[0].split("/")[0]
    hidden = io.BytesIO()
    with zipfile.ZipFile(hidden, "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo(f"{top}/data.pkl", date_time=(2020, 1, 1, 0, 0, 0)), evil)
    h = hidden.getvalue()
    _, _, hdir, _ = _central(h)
    local = h[:hdir]
    shift = len(local)
    data = bytearray(local + good)
    eocd, fields, cdir, csize = _central(bytes(data))
    # Every central header's local offset, and the directory's own offset, move by `shift`.
    pos = cdir + shift
    end = pos + csize
    while pos < end:
        assert data[pos:pos + 4] == b"PK\x01\x02"
        off = struct.unpack_from("<I", data, pos + 42)[0]
        struct.pack_into("<I", data, pos + 42, off + shift)
        nl, el, cl = struct.unpack_from("<HHH", data, pos + 28)
        pos += 46 + nl + el + cl
    if fields[6] != 0xFFFFFFFF:
        fields[6] = cdir + shift
    struct.pack_into("<IHHHHIIH", data, eocd, *fields)
    # torch writes ZIP64 end records: the locator's record offset and the record's directory
    # offset move too.
    loc = eocd - 20
    if data[loc:loc + 4] == b"PK\x06\x07":
        rec = struct.unpack_from("<Q", data, loc + 8)[0] + shift
        struct.pack_into("<Q", data, loc + 8, rec)
        assert data[rec:rec + 4] == b"PK\x06\x06"
        struct.pack_into("<Q", data, rec + 48, struct.unpack_from("<Q", data, rec + 48)[0] + shift)
    return bytes(data)


def trailing_after_end(good, evil):
    """A second archive appended after the end of central directory record."""
    extra = io.BytesIO()
    with zipfile.ZipFile(extra, "w") as z:
        z.writestr("archive/data.pkl", evil)
    return good + b"\0" * 16 + extra.getvalue()[:-22]


def zip64_lying_count(good):
    """ZIP64 end records (as zipfile writes them past 65 535 entries) whose entry counts are one
    less than the central directory holds: miniz reads that many, zipfile reads the directory
    to its declared size."""
    with zipfile.ZipFile(io.BytesIO(good)) as zin:
        items = [(i, zin.read(i.filename)) for i in zin.infolist()]
    out = io.BytesIO()
    limit = zipfile.ZIP_FILECOUNT_LIMIT
    zipfile.ZIP_FILECOUNT_LIMIT = 1  # forces the ZIP64 end records
    try:
        with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
            for info, d in items:
                z.writestr(zipfile.ZipInfo(info.filename, date_time=(2020, 1, 1, 0, 0, 0)), d)
    finally:
        zipfile.ZIP_FILECOUNT_LIMIT = limit
    data = bytearray(out.getvalue())
    rec = data.rfind(b"PK\x06\x06")
    n = struct.unpack_from("<Q", data, rec + 24)[0]
    struct.pack_into("<QQ", data, rec + 24, n - 1, n - 1)
    eocd = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, eocd + 8, 0xFFFF, 0xFFFF)
    return bytes(data)


def readers(data, name_suffix="/data.pkl"):
    """What torch.load(weights_only=True) and zipfile make of `data`, for the record."""
    import torch
    try:
        torch.load(io.BytesIO(data), weights_only=True)
        t = "loads"
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        t = f"fails ({type(e).__name__})"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = [n for n in z.namelist() if n.endswith(name_suffix)]
            z.read(names[-1])
            p = f"reads {len(z.namelist())} entries"
    except Exception as e:  # noqa: BLE001
        p = f"fails ({type(e).__name__})"
    return t, p


def make(root, entry, out_path, evil):
    with open(out_path(root, "good", "state_dict.pt"), "rb") as f:
        good = f.read()
    cases = [
        ("zip_local_name_differs.pt", local_name_differs(good), "zip_local_header_mismatch",
         "the local header of data.pkl names another file than the central directory"),
        ("zip_local_method_differs.pt", local_method_differs(good), "zip_local_header_mismatch",
         "the local header of data.pkl says deflate, the central directory stored"),
        ("zip_hidden_local_entry.pt", hidden_local_entry(good, evil), "zip_layout",
         "a hostile data.pkl local entry before the listed ones, not in the central directory"),
        ("zip_trailing_after_end.pt", trailing_after_end(good, evil), "zip_trailing_data",
         "a second archive's entries after the end of central directory record"),
        ("zip64_lying_count.pt", zip64_lying_count(good), "zip_count_mismatch",
         "ZIP64 end records counting one entry less than the central directory holds"),
    ]
    for name, data, kind, desc in cases:
        with open(out_path(root, "hostile", name), "wb") as f:
            f.write(data)
        t, p = readers(data)
        print(f"{name}: torch.load {t}; zipfile {p}")
        entry("hostile", name, "torch-zip", "refused", kind, desc)
