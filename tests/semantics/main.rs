//! Targeted CPython semantics, with pickles made (and checked against CPython) by python3 at
//! test time: dict key and set item equality, shared references and cycles, unhashable keys,
//! lone surrogates, INT text (tests/number_text.rs has the rest), FRAME boundaries, Python 2 STRING.
//! One test binary; the tests are in modules by topic: [`keys`], [`identity`], [`text`],
//! [`policy`], [`framing`]. This file holds the helpers they share.

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

#[path = "../common/mod.rs"]
mod common;
mod framing;
mod identity;
mod keys;
mod policy;
mod text;

use common::python_hex;
use picklewarden::{json::to_typed_json, Decoder, Document, NodeId, Policy, Value};

const FMT: &str = "{\"format\":\"picklewarden-typed-json/1\",\"value\":";

fn decode<'a>(data: &'a [u8], policy: &Policy) -> Document<'a> {
    Decoder::new(data, policy)
        .decode()
        .unwrap_or_else(|e| panic!("refused {}: {e}", common::hex_encode(data)))
}

fn refusal(data: &[u8], policy: &Policy) -> picklewarden::Error {
    match Decoder::new(data, policy).decode() {
        Ok(doc) => panic!(
            "decoded {} to {}",
            common::hex_encode(data),
            to_typed_json(&doc)
        ),
        Err(e) => e,
    }
}

fn root<'d>(doc: &'d Document<'_>) -> (NodeId, Value<'d>) {
    let id = doc.root().unwrap_or_else(|| panic!("no root"));
    (
        id,
        doc.get(id)
            .unwrap_or_else(|| panic!("root id out of range")),
    )
}

fn value<'d>(doc: &'d Document<'_>, id: NodeId) -> Value<'d> {
    doc.get(id).unwrap_or_else(|| panic!("id out of range"))
}

/// Python helpers shared by the snippets: `u(s)` is BINUNICODE, `f(x)` is BINFLOAT.
const PY_PRELUDE: &str = r#"
import io, pickle, struct
def u(s):
    b = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(b)) + b
def f(x):
    return b"G" + struct.pack(">d", x)
def py_load(d):
    return pickle._Unpickler(io.BytesIO(d)).load()
"#;

fn py(code: &str) -> Vec<u8> {
    python_hex(&format!("{PY_PRELUDE}\n{code}"))
}
