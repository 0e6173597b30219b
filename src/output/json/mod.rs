//! Typed JSON, picklewarden's lossless output format (`picklewarden-typed-json/1`, described in
//! the repository's `docs/typed-json.md`).
//!
//! The writer is a visitor of the one document walk (`src/output/walk.rs`: an explicit
//! stack, never the call stack). It writes every node referenced more than once with an
//! `"id"` on its first appearance and as `{"type":"ref","id":N}` after, so the output is
//! linear in the size of the arena and cycles are representable. Set and frozenset items are
//! sorted by the compact JSON text of each item written on its own.

use std::io;
use std::time::Instant;

use crate::options::OutputBound;
use crate::value::{Document, NodeId};

pub use crate::output::sink::SPILL_BYTES;

mod sets;
mod text;
mod writer;

use writer::Output;

#[cfg(test)]
pub(crate) mod tests;

/// The format tag written at the top of every document.
pub const FORMAT: &str = "picklewarden-typed-json/1";

/// The typed JSON text of a document: `{"format": ..., "value": node}` for one pickle, or
/// `{"format": ..., "values": [...]}` for a document decoded as a stream.
pub fn to_typed_json(doc: &Document<'_>) -> String {
    write_document(doc, usize::MAX, None).unwrap_or_default()
}

/// As [`to_typed_json`], but gives up (`None`) once the text passes `bound.max_bytes` or
/// `bound.deadline` has passed: the one bounded form of the writer.
///
/// A caller that must bound its memory (the service) never holds much more than `max_bytes`
/// of output: typed JSON can be many times the size of the pickle (a 1-byte NONE is 15 bytes
/// of JSON); the text may pass `max_bytes` by at most one scalar node before the writer stops.
/// The deadline is looked at every 256 set items while ordering sets, every 65,536 values, or
/// 64 big ints, while writing, as [`crate::Decoder::deadline`] is for the decode. Ordering the
/// sets can cost up to a sort key (1 KiB) per set item before anything is written, which
/// `max_bytes` does not bound.
pub fn to_typed_json_bounded(doc: &Document<'_>, bound: OutputBound) -> Option<String> {
    write_document(doc, bound.max_bytes, bound.deadline)
}

/// As [`to_typed_json`], but gives up (`None`) once the text passes `max_bytes`, so a caller
/// that must bound its memory (the service) never holds much more than `max_bytes` of output.
/// Typed JSON can be many times the size of the pickle (a 1-byte NONE is 15 bytes of JSON);
/// the text may pass `max_bytes` by at most one scalar node before the writer stops.
#[deprecated(note = "use to_typed_json_bounded(doc, OutputBound::bytes(max_bytes))")]
pub fn to_typed_json_limited(doc: &Document<'_>, max_bytes: usize) -> Option<String> {
    write_document(doc, max_bytes, None)
}

/// As [`to_typed_json_limited`], and also gives up (`None`) once `deadline` has passed (looked
/// at every 256 set items while ordering sets, every 65,536 values, or 64 big ints, while
/// writing): for a caller that answers by a deadline, as [`crate::Decoder::deadline`] is for
/// the decode. Ordering the sets can cost up to a sort key (1 KiB) per set item before
/// anything is written, which `max_bytes` does not bound.
#[deprecated(
    note = "use to_typed_json_bounded(doc, OutputBound::bytes(max_bytes).deadline(Some(deadline)))"
)]
pub fn to_typed_json_until(
    doc: &Document<'_>,
    max_bytes: usize,
    deadline: Instant,
) -> Option<String> {
    write_document(doc, max_bytes, Some(deadline))
}

/// Writes typed JSON of `doc` to `out` as the text is made, in pieces of about 1 MiB
/// ([`SPILL_BYTES`]): the same bytes as [`to_typed_json`] (no newline after), without ever
/// holding them all. Typed JSON is often several times the size of its pickle (the 20 MB of
/// small objects of bench/gen_workloads.py are 141 MB of it), so a program that passes the
/// text on (the command-line tool, to its standard output) holds the document and one piece,
/// not the document and the whole text.
///
/// # Errors
/// The first error `out` returns; nothing more is written after it (the text is then cut
/// short). The writer calls `out.write_all` and never `flush`.
pub fn write_typed_json(
    doc: &Document<'_>,
    mut out: &mut (impl io::Write + ?Sized),
) -> io::Result<()> {
    // `&mut W` is a sized writer whatever `W` is (a `dyn Write` included).
    write_in_pieces(doc, &mut out, SPILL_BYTES)
}

/// [`write_typed_json`] with pieces of about `piece` bytes (the tests cut at every few bytes).
pub(crate) fn write_in_pieces(
    doc: &Document<'_>,
    out: &mut dyn io::Write,
    piece: usize,
) -> io::Result<()> {
    let mut o = Output::new(&doc.arena, &doc.roots, None);
    o.writer.text.sink_to(out, piece);
    write_wrapped(&mut o, doc);
    o.writer.text.finish()
}

fn write_document(
    doc: &Document<'_>,
    max_bytes: usize,
    deadline: Option<Instant>,
) -> Option<String> {
    let mut o = Output::new(&doc.arena, &doc.roots, deadline);
    if o.writer.text.timed_out {
        return None;
    }
    let text = &mut o.writer.text;
    text.check_at = max_bytes;
    // Room for ~24 bytes a value up front (a small int is 31): fewer regrowth copies while the
    // text is small enough to be copied when it grows. At most 64 MiB (past that glibc grows
    // it by remapping, without a copy), so popped values, which `values` counts but nothing
    // writes, cannot make a short text hold a large reservation; never past `max_bytes`.
    const HINT_MAX: usize = 64 << 20;
    let hint = usize::try_from(doc.values)
        .unwrap_or(usize::MAX)
        .saturating_mul(24)
        .min(HINT_MAX)
        .min(max_bytes.saturating_add(64));
    let _ = text.out.try_reserve(hint);
    write_wrapped(&mut o, doc);
    let text = &mut o.writer.text;
    // A text far shorter than its reservation (values popped, or shared) gives the rest back.
    if text.out.capacity() > text.out.len().saturating_mul(2).saturating_add(4096) {
        text.out.shrink_to_fit();
    }
    (!text.stopped).then(|| std::mem::take(&mut text.out))
}

/// Writes `{"format": ..., "value": node}` (or `"values": [...]` for a stream) for `doc`.
fn write_wrapped(o: &mut Output<'_, '_, '_>, doc: &Document<'_>) {
    o.push("{\"format\":\"");
    o.push(FORMAT);
    if doc.stream {
        o.push("\",\"values\":[");
        for (i, &root) in doc.roots.iter().enumerate() {
            if i > 0 {
                o.push(",");
            }
            o.write(root);
        }
        o.push("]}");
    } else {
        o.push("\",\"value\":");
        match doc.root() {
            Some(root) => o.write(root),
            None => o.push("null"),
        }
        if let Some(t) = doc.trailing() {
            o.push(&format!(
                ",\"trailing\":{{\"offset\":{},\"length\":{}}}",
                t.offset, t.len
            ));
        }
        o.push("}");
    }
}

/// The typed JSON node of one value of a document (no `format` wrapper), with ids numbered
/// from 0 within this text.
pub fn node_to_typed_json(doc: &Document<'_>, id: NodeId) -> String {
    let mut o = Output::new(&doc.arena, &[id], None);
    o.write(id);
    std::mem::take(&mut o.writer.text.out)
}
