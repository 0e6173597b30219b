//! picklewarden decodes Python pickle data from peers that are not trusted: no code ever runs,
//! only globals a [`Policy`] allows are accepted and each maps to a small closed set of safe
//! constructors, every resource is bounded by [`Limits`], memo indices are validated before use,
//! and every refusal is a typed [`Error`] with its byte offset and opcode.
//!
//! # Guide
//!
//! ## Decode a file
//!
//! [`decode`] reads one pickle under a policy and gives a [`Document`]: the values, as a graph
//! (shared values and cycles kept). [`Document::root_ref`] gives its root with accessors
//! ([`ValueRef::get`], [`ValueRef::items`], [`ValueRef::pairs`], `as_str`, `as_i64`...).
//!
//! ```
//! use picklewarden::{decode, Policy};
//! # let dir = std::env::temp_dir().join("picklewarden-guide-1");
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("config.pkl");
//! // pickle.dumps({"a": (1, 2.5)}, protocol=2)
//! # std::fs::write(&path, b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01K\x01G@\x04\x00\x00\x00\x00\x00\x00\x86q\x02s.")?;
//! let bytes = std::fs::read(&path)?;
//! let doc = decode(&bytes, &Policy::data())?;
//! let root = doc.root_ref().expect("one pickle, one root");
//! let a = root.get("a").expect("a key a");
//! assert_eq!(a.index(0).and_then(|v| v.as_i64()), Some(1));
//! assert_eq!(a.index(1).and_then(|v| v.as_f64()), Some(2.5));
//! // Lossless output: typed JSON (also repr text and a canonical pickle).
//! assert!(picklewarden::json::to_typed_json(&doc).starts_with("{\"format\":\"picklewarden-typed-json/1\""));
//!
//! // A global outside the policy is refused, with its offset and opcode.
//! let err = decode(b"cos\nsystem\n(S'id'\ntR.", &Policy::data()).unwrap_err();
//! assert_eq!(err.kind().name(), "global_not_allowed");
//! assert_eq!(err.offset(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Decode into a struct
//!
//! With the `serde` feature (on by default), [`from_slice`] decodes and deserializes into any
//! `Deserialize` type: structs from dicts with str keys, enums, tuples, sequences, maps,
//! sets, bytes, `Option` from `None`, ints of every width with range checks. [`de`] gives the
//! data model and its bounds (a cycle is an error, shared values are visited within a budget);
//! [`ser`] goes the other way, to JSON, CBOR or MessagePack through their serde crates.
//!
//! ```
//! # #[cfg(feature = "serde")] {
//! use std::collections::BTreeSet;
//! #[derive(serde::Deserialize, Debug, PartialEq)]
//! struct Job { name: String, retries: u8, tags: BTreeSet<String>, owner: Option<String> }
//! // pickle.dumps({"name": "backup", "retries": 3, "tags": {"nightly"}, "owner": None}, 4)
//! let bytes = b"\x80\x04\x95?\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x04name\x94\x8c\x06backup\x94\x8c\x07retries\x94K\x03\x8c\x04tags\x94\x8f\x94(\x8c\x07nightly\x94\x90\x8c\x05owner\x94Nu.";
//! let job: Job = picklewarden::from_slice(bytes, &picklewarden::Policy::data())?;
//! assert_eq!(job.name, "backup");
//! assert_eq!(job.retries, 3);
//! assert!(job.tags.contains("nightly") && job.owner.is_none());
//! // 300 does not fit a u8: refused with serde's message, as any type mismatch is.
//! // pickle.dumps({"name": "x", "retries": 300, "tags": set(), "owner": None}, 4)
//! let over = b"\x80\x04\x95/\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x04name\x94\x8c\x01x\x94\x8c\x07retries\x94M,\x01\x8c\x04tags\x94\x8f\x94\x8c\x05owner\x94Nu.";
//! assert!(picklewarden::from_slice::<Job>(over, &picklewarden::Policy::data()).is_err());
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Write a policy
//!
//! A policy lists the globals a pickle may name, each mapped to one [`Constructor`]; a record
//! keeps the call as data. Build one in code with [`Policy::builder`], or read TOML with
//! [`Policy::from_toml_str`] (the format of `policy/*.toml`, which also sets limits and
//! argument schemas). The built-in ones are [`Policy::data`] (the default), [`Policy::strict`]
//! and [`Policy::builtin`] by name.
//!
//! ```
//! use picklewarden::{decode, Constructor, Policy, Value};
//! let policy = Policy::builder()
//!     .name("shapes")
//!     .allow("geometry", "Point", Constructor::Record)
//!     .build()?;
//! // Point(3, 4) pickled by a class whose __reduce__ returns (Point, (3, 4)), protocol 2
//! let doc = decode(b"\x80\x02cgeometry\nPoint\nq\x00K\x03K\x04\x86q\x01Rq\x02.", &policy)?;
//! let Value::Object(point) = doc.root_ref().unwrap().value() else { panic!("a record") };
//! let args = doc.value_ref(point.args).unwrap();
//! assert_eq!(args.items().filter_map(|v| v.as_i64()).collect::<Vec<_>>(), [3, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Bound a decode
//!
//! Every decode is bounded by its policy's [`Limits`] (input size, nesting depth, memo, nodes,
//! bytes allocated, opcodes, dict-key work...). [`DecodeOptions`] changes them per call and
//! adds a deadline, a stream of pickles, out-of-band buffers or trailing bytes; [`decode_with`],
//! [`scan_with`] and [`from_slice_with`] take it. A refusal names the limit.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use picklewarden::{decode_with, DecodeOptions, ErrorKind, LimitName, Limits, Policy};
//! let mut limits = Limits::default();
//! limits.max_nesting_depth = 2;
//! let options = DecodeOptions::default()
//!     .limits(limits)
//!     .deadline(Some(Instant::now() + Duration::from_millis(100)));
//! // pickle.dumps([[[]]], protocol=2): three levels
//! let err = decode_with(b"\x80\x02]q\x00]q\x01]q\x02aa.", &Policy::data(), &options).unwrap_err();
//! assert!(matches!(err.kind(), ErrorKind::LimitExceeded { limit: LimitName::MaxNestingDepth, .. }));
//! ```
//!
//! Output is bounded the same way: [`OutputBound`] (bytes and deadline) for
//! [`json::to_typed_json_bounded`], [`repr::to_repr_bounded`] and
//! [`canonical::to_pickle_bounded`].
//!
//! ## Read a Mitogen stream
//!
//! [`mitogen::FrameReader`] cuts Mitogen's message frames out of a byte stream arriving in
//! pieces; each frame's payload decodes under a policy (the built-in `mitogen` one allows what
//! Mitogen's own unpickler allows).
//!
//! ```
//! use picklewarden::mitogen::{Content, Enc, FrameReader, Header};
//! use picklewarden::Policy;
//! let policy = Policy::builtin("mitogen").unwrap();
//! let payload = b"\x80\x02X\x02\x00\x00\x00hiq\x00."; // pickle.dumps("hi", 2)
//! let header = Header { enc: Enc::Pickle, dst_id: 0, src_id: 1, auth_id: 1, handle: 1000,
//!                       reply_to: 0, length: payload.len() as u32 };
//! let mut reader = FrameReader::new();
//! reader.push(&header.to_bytes());
//! reader.push(payload);
//! let frame = reader.next_frame()?.expect("a whole frame");
//! let Content::Values(doc) = frame.decode(&policy, policy.limits)? else { panic!("pickles") };
//! assert_eq!(doc.root_ref().and_then(|v| v.as_str()), Some("hi"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where to go next: [`value`] (the document's shape, and how to walk it), [`Decoder`] (the
//! builder behind [`decode`]), [`policy`] (allowlists, TOML), [`scan`](mod@scan) (validation
//! without building values), [`mitogen`] (frames, the stream check), [`json`], [`repr`] and
//! [`canonical`] (output), [`Error`] (kinds, categories, offsets).
//!
//! # Features
//!
//! `serde` (default): [`from_slice`], [`de`] and [`ser`]. The command-line tool and the sidecar
//! service are the separate crate `picklewarden-cli` (`cli/` in the repository); this crate
//! depends on none of their crates (clap, tokio, axum, hyper, landlock, seccompiler...).
//!
//! Big ints are [`num_bigint::BigInt`] ([`Value::BigInt`]); the crate is re-exported as
//! [`num_bigint`] so that its version is always the one picklewarden was built with.
#![forbid(unsafe_code)]

mod access;
mod build;
pub mod dis;
pub mod error;
pub mod formats;
mod input;
pub mod limits;
mod options;
mod output;
pub mod policy;
pub mod scan;
// The decoded document and its views: the files under src/document/.
#[path = "document/mod.rs"]
pub mod value;
mod vm;

pub use formats::mitogen;
pub use input::latin1::copy_bytes_into;
pub use input::opcode;
// Internal text helpers (escapes, number text); only `float_repr` is public, re-exported below.
use input::text;
// Crate-wide short paths of the modules that live under input/ and vm/.
use input::{compat, latin1, reader, sniff};
use vm::{clock, memo};

pub use access::ValueRef;
pub use build::{decode, Decoder};
pub use error::{Category, Error, ErrorKind, Result};
pub use limits::{LimitName, Limits};
pub use opcode::Opcode;
pub use options::{decode_with, scan, scan_with, DecodeOptions, OutputBound, Pickles};
#[cfg(feature = "serde")]
pub use output::de::{from_document, from_slice, from_slice_with, DeError};
pub use output::{canonical, json, repr};
#[cfg(feature = "serde")]
pub use output::{de, ser};
pub use policy::{Constructor, Policy, PolicyBuilder};
pub use scan::{ScanReport, Scanner};
pub use text::float_repr;
pub use value::{
    CallKind, Document, Global, NodeId, Object, PyBytes, PyStr, Scratch, Trailing, Value,
};

/// The big-int crate of [`Value::BigInt`], re-exported.
pub use num_bigint;
