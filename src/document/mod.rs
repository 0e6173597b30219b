//! The decoded document: an arena of values, and the views [`Document::get`] gives of them.
//!
//! Values are nodes of 12 bytes in one `Vec`; containers hold [`NodeId`]s. The memo holds node
//! ids too, so a value reached through the memo twice is the same node (shared references and
//! cycles are kept as the graph they are, never deep-copied). Text and bytes are offsets into
//! the input where the pickle holds them verbatim (so a [`Document`] lives no longer than the
//! input bytes it was decoded from: keep both together, or turn what you need into owned data
//! of your own; typed JSON, [`crate::json::to_typed_json`], is one owned form). The items of
//! lists, tuples, sets and dicts sit side by side in a few shared pools rather than in an
//! allocation each. [`Document::get`] gives a [`Value`]: a small `Copy` view that borrows the
//! document (a text as its bytes, a list as a slice of ids).
//!
//! # Walking a document
//!
//! A document is a graph, not a tree: a value the pickle shares (a memo GET, or what CPython
//! shares itself, such as small ints) is one node reached from several places, and a
//! container can hold itself. Walk it with an explicit stack and a set of the ids already seen
//! (`NodeId` is `Copy + Hash + Eq`), not by recursion, whose depth the input would choose:
//!
//! ```
//! use std::collections::HashSet;
//! use picklewarden::{decode, Policy, Value};
//! // a = [1, "x"]; a.append(a); pickle.dumps({"k": a, "again": a}, 2)
//! let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00kq\x01]q\x02(K\x01X\x01\x00\x00\x00xq\x03h\x02eX\x05\x00\x00\x00againq\x04h\x02u.";
//! let doc = decode(bytes, &Policy::data())?;
//! let mut seen = HashSet::new();
//! let mut stack: Vec<_> = doc.root().into_iter().collect();
//! let (mut lists, mut strs) = (0, Vec::new());
//! while let Some(id) = stack.pop() {
//!     if !seen.insert(id) {
//!         continue; // shared, or a cycle: already visited
//!     }
//!     let Some(value) = doc.get(id) else { continue };
//!     match value {
//!         Value::List(_) => lists += 1,
//!         Value::Str(s) => strs.push(s.as_str().unwrap_or("<surrogates>").to_owned()),
//!         _ => {}
//!     }
//!     value.for_each_child(|child| stack.push(child));
//! }
//! assert_eq!(lists, 1); // the list is one node, met three times
//! strs.sort();
//! assert_eq!(strs, ["again", "k", "x"]);
//! # Ok::<(), picklewarden::Error>(())
//! ```
//!
//! Without the set of ids seen, a walk can take exponential time on a small input that every
//! limit accepts: `t = (t, t)` sixty times over pickles in 252 bytes (protocol 4) and is 61
//! nodes, but 2^60 paths from the root. Typed JSON ([`crate::json`]) writes every mutable value
//! once and refers to it by id after that; [`crate::repr`] stops printing a value again once
//! its text passes a size bound. Dict keys and set items are node ids too: compare them
//! through the values they refer to.

//!
//! ```text
//! document/ (the public module `value`)
//!   mod.rs       this page; the re-exports
//!   id.rs        NodeId: an arena index, or a value every document shares (None, bools, small ints)
//!   text.rs      PyStr and PyBytes: views of text and bytes as Python holds them
//!   object.rs    Object, Global, CallKind: records and globals the policy allowed
//!   value.rs     Value: the public view of one node, and its children
//!   arena.rs     the private encoding: 12-byte nodes, side table, pools; views made from it
//!   document.rs  Document (roots, stream facts, trailing bytes), Scratch, Trailing
//!   tests.rs     unit tests
//! ```

mod arena;
mod document;
mod id;
mod object;
mod text;
#[allow(clippy::module_inception)]
mod value;

#[cfg(test)]
pub(crate) use arena::Owned;
pub(crate) use arena::{Arena, Fat, Node, Word};
pub(crate) use document::Kept;
pub use document::{Document, Scratch, Trailing};
pub use id::NodeId;
pub(crate) use id::ARENA_END;
pub use object::{CallKind, Global, Object};
pub use text::{PyBytes, PyStr};
pub use value::Value;

/// The UTF-8 text of a [`Node::Latin1`] is shorter than this: counting its Latin-1 length
/// when it is viewed costs little. A longer one is a [`Fat::Latin1`], which keeps its length,
/// so that hashing, comparing or writing a long one does not count it again each time.
pub(crate) const LATIN1_NODE_BYTES: usize = 4096;

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
