//! Where a pickle ends: an opcode crossing its FRAME's end is refused, and data after STOP is
//! refused unless allowed, and then reported.

use picklewarden::{json::to_typed_json, Decoder, Policy, Value};

use crate::{decode, py, refusal, root};

/// An opcode whose argument crosses the end of its FRAME: refused as frame_straddle, as
/// `Lib/pickle.py`'s _Unframer refuses it; CPython's C unpickler does not check frame ends
/// and loads 'a'.
#[test]
fn frame_straddle_is_refused_though_the_c_unpickler_accepts_it() {
    let data = py(r#"
d = b"\x80\x04\x95" + struct.pack("<Q", 3) + b"X\x01\x00" + b"\x00\x00a."
assert pickle.loads(d) == "a"
try:
    py_load(d)
except pickle.UnpicklingError:
    pass
else:
    raise SystemExit("pickle._Unpickler accepted a frame straddle")
print(d.hex())
"#);
    let policy = Policy::data();
    let e = refusal(&data, &policy);
    assert_eq!(e.kind().name(), "frame_straddle", "{e}");
    assert_eq!(e.offset(), 11, "at the BINUNICODE inside the frame: {e}");
    assert_eq!(e.opcode(), Some(b'X'));
    // the same bytes with a frame that covers the whole opcode decode
    let ok = py(r#"
d = b"\x80\x04\x95" + struct.pack("<Q", 7) + b"X\x01\x00\x00\x00a."
assert pickle.loads(d) == "a" and py_load(d) == "a"
print(d.hex())
"#);
    let doc = decode(&ok, &policy);
    assert!(matches!(root(&doc).1, Value::Str(s) if s.as_str() == Some("a")));
}

/// Bytes after STOP: refused by default; with `allow_trailing` (files padded or ending in a
/// newline, as numpy payloads from Python 2 do) decoded, and what was left reported: its
/// offset and length, in the document, the scan report and typed JSON. CPython's
/// `pickle.loads` ignores them.
#[test]
fn trailing_data_is_refused_unless_allowed_and_then_reported() {
    let data = py(r#"
d = pickle.dumps([1], protocol=2) + b"\n\x00\x00"
assert pickle.loads(d) == [1]
print(d.hex())
"#);
    let policy = Policy::data();
    let stop = data.len() as u64 - 3;
    let e = refusal(&data, &policy);
    assert_eq!((e.kind().name(), e.offset()), ("trailing_data", stop));
    let doc = Decoder::new(&data, &policy)
        .allow_trailing(true)
        .decode()
        .unwrap_or_else(|e| panic!("{e}"));
    let t = doc.trailing().unwrap_or_else(|| panic!("no trailing"));
    assert_eq!((t.offset, t.len), (stop, 3));
    let json = to_typed_json(&doc);
    assert!(
        json.ends_with(&format!(
            ",\"trailing\":{{\"offset\":{stop},\"length\":3}}}}"
        )),
        "{json}"
    );
    // Without trailing bytes, nothing is reported.
    let clean = data.get(..data.len() - 3).unwrap();
    let doc = Decoder::new(clean, &policy)
        .allow_trailing(true)
        .decode()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(doc.trailing().is_none());
    assert!(!to_typed_json(&doc).contains("trailing"));
    // The scan alike.
    let report = picklewarden::Scanner::new(&data, &policy)
        .allow_trailing(true)
        .run();
    assert!(report.result.is_ok());
    assert_eq!(report.trailing.map(|t| (t.offset, t.len)), Some((stop, 3)));
    let report = picklewarden::Scanner::new(&data, &policy).run();
    assert_eq!(report.result.unwrap_err().kind().name(), "trailing_data");
    // With the report (scan first), too.
    let (doc, report) = Decoder::new(&data, &policy)
        .allow_trailing(true)
        .decode_and_report(picklewarden::Pickles::One);
    assert!(report.result.is_ok());
    assert_eq!(doc.unwrap().trailing().map(|t| t.len), Some(3));
}
