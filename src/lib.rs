//! picklewarden decodes Python pickle data from peers that are not trusted: no code ever runs,
//! only globals a [`Policy`] allows are accepted and each maps to a small closed set of safe
//! constructors, every resource is bounded by [`Limits`], memo indices are validated before use,
//! and every refusal is a typed [`Error`] with its byte offset and opcode.
//!
//! ```
//! use picklewarden::{decode, Policy};
//! // pickle.dumps({"a": (1, 2.5)}, protocol=2)
//! let bytes = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01G@\x04\x00\x00\x00\x00\x00\x00\x86q\x02s.";
//! let doc = decode(bytes, &Policy::data())?;
//! let json = picklewarden::json::to_typed_json(&doc);
//! assert!(json.starts_with("{\"format\":\"picklewarden-typed-json/1\""));
//!
//! // A global outside the policy is refused, with its offset and opcode.
//! let err = decode(b"cos\nsystem\n(S'id'\ntR.", &Policy::data()).unwrap_err();
//! assert_eq!(err.kind().name(), "global_not_allowed");
//! assert_eq!(err.offset(), 0);
//! # Ok::<(), picklewarden::Error>(())
//! ```
//!
//! Where to go next: [`value`] (the document's shape, and how to walk it), [`Decoder`] (limits,
//! deadlines, streams, out-of-band buffers), [`Policy`] (allowlists, from TOML text),
//! [`scan`](mod@scan) (validation without building values), [`mitogen`] (Mitogen message
//! frames), [`json`] and [`repr`] (output), [`Error`] (kinds, categories, offsets).
//!
//! # Features
//!
//! The default features, `cli` and `service`, build the `picklewarden` command and its
//! sidecar service, with their dependencies (clap, tokio, axum, hyper, landlock, seccompiler,
//! ...). A program that uses only the library should turn them off:
//!
//! ```toml
//! picklewarden = { version = "0.1", default-features = false }
//! ```
//!
//! Big ints are [`num_bigint::BigInt`] ([`Value::BigInt`]); the crate is re-exported as
//! [`num_bigint`] so that its version is always the one picklewarden was built with.
#![forbid(unsafe_code)]

mod build;
mod clock;
mod compat;
pub mod dis;
pub mod error;
pub mod formats;
mod latin1;
pub mod limits;
mod memo;
pub mod mitogen;
pub mod opcode;
mod output;
pub mod policy;
mod reader;
pub mod scan;
mod sniff;
pub mod text;
pub mod value;

pub use build::{decode, Decoder};
pub use error::{Category, Error, ErrorKind, Result};
pub use limits::{LimitName, Limits};
pub use opcode::Opcode;
pub use output::{canonical, json, repr};
pub use policy::Policy;
pub use scan::{scan, ScanReport, Scanner};
pub use value::{
    CallKind, Document, Global, NodeId, Object, PyBytes, PyStr, Scratch, Trailing, Value,
};

/// The big-int crate of [`Value::BigInt`], re-exported.
pub use num_bigint;
