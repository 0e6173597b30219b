//! Python-like `repr()` text of a document, for people.
//!
//! Follows CPython's `repr` for scalars and containers (quoting and escapes of str and bytes,
//! float digits, `(1,)`, `set()`, `frozenset({...})`): a container inside itself is shown as
//! `[...]`, `{...}` or `(...)`, and a shared container is printed again in full, as CPython
//! does. Two differences keep the output finite and linear in the input: once the text is
//! longer than 16 bytes per value of the document (plus 1 KiB), a value that was already
//! printed is shown as `[...]`, `{...}`, `(...)` or `...` instead of again (a DAG of shared
//! tuples would otherwise print exponentially); and sets keep insertion order (CPython's order
//! depends on its hashes). Record objects print in angle brackets, as
//! `<callable args>` for REDUCE (`<collections.OrderedDict ()>`) and `<callable __new__args>`
//! for NEWOBJ and NEWOBJ_EX (`<myapp.Point __new__()>`), with `, **kwargs`, `; state=...`,
//! `; listitems=[...]` and `; dictitems={...}` when present (`<myapp.Point __new__(); state=
//! {'x': 3}>`). A visitor of the one document walk (`src/output/walk.rs`), which walks an
//! explicit stack.

use std::fmt::Write as _;
use std::io;
use std::time::Instant;

use crate::clock::Clock;
use crate::options::OutputBound;
use crate::output::sink::{Text, BIG_INT_WORK, SPILL_BYTES};
use crate::output::walk::{Marks, Slot, Step, Visitor, Walker};
use crate::text::float_repr;
use crate::value::{CallKind, Document, NodeId, Value};

mod text;
pub(crate) use text::str_repr;
use text::{bytes_repr, complex_repr};

#[cfg(test)]
mod tests;

/// The repr text of each root, one per line.
pub fn to_repr(doc: &Document<'_>) -> String {
    print(doc, usize::MAX, None).unwrap_or_default()
}

/// As [`to_repr`], but gives up (`None`) once the text passes `bound.max_bytes` (by at most
/// one scalar value) or `bound.deadline` has passed (looked at every 65,536 values, or 64 big
/// ints): the one bounded form of the printer.
pub fn to_repr_bounded(doc: &Document<'_>, bound: OutputBound) -> Option<String> {
    print(doc, bound.max_bytes, bound.deadline)
}

/// As [`to_repr`], but gives up (`None`) once the text passes `max_bytes` (it may pass it by
/// at most one scalar value before the printer stops), so a caller that must bound its memory
/// never holds much more than `max_bytes` of output.
#[deprecated(note = "use to_repr_bounded(doc, OutputBound::bytes(max_bytes))")]
pub fn to_repr_limited(doc: &Document<'_>, max_bytes: usize) -> Option<String> {
    print(doc, max_bytes, None)
}

/// As [`to_repr_limited`], and also gives up (`None`) once `deadline` has passed (looked at
/// every 65,536 values, or 64 big ints), for a caller that answers by a deadline.
#[deprecated(
    note = "use to_repr_bounded(doc, OutputBound::bytes(max_bytes).deadline(Some(deadline)))"
)]
pub fn to_repr_until(doc: &Document<'_>, max_bytes: usize, deadline: Instant) -> Option<String> {
    print(doc, max_bytes, Some(deadline))
}

/// Writes the repr text of `doc` to `out` as it is made, in pieces of about 1 MiB
/// ([`crate::json::SPILL_BYTES`]): the same bytes as [`to_repr`], without holding them all
/// (the command-line tool writes its standard output this way).
///
/// # Errors
/// The first error `out` returns; nothing more is written after it. The printer calls
/// `out.write_all` and never `flush`.
pub fn write_repr(doc: &Document<'_>, mut out: &mut (impl io::Write + ?Sized)) -> io::Result<()> {
    // `&mut W` is a sized writer whatever `W` is (a `dyn Write` included).
    write_in_pieces(doc, &mut out, SPILL_BYTES)
}

/// [`write_repr`] with pieces of about `piece` bytes (the tests cut at every few bytes).
pub(crate) fn write_in_pieces(
    doc: &Document<'_>,
    out: &mut dyn io::Write,
    piece: usize,
) -> io::Result<()> {
    let mut printer = Printer::new(doc, usize::MAX, None);
    printer.text.sink_to(out, piece);
    let mut walker = Walker::new(&doc.arena, Vec::new()).track_path();
    for &root in doc.roots() {
        if !walker.walk(root, &mut printer) {
            break;
        }
        printer.text.out.push('\n');
    }
    printer.text.finish()
}

fn print(doc: &Document<'_>, max_bytes: usize, deadline: Option<Instant>) -> Option<String> {
    let mut printer = Printer::new(doc, max_bytes, deadline);
    let mut walker = Walker::new(&doc.arena, Vec::new()).track_path();
    for &root in doc.roots() {
        if !walker.walk(root, &mut printer) {
            return None;
        }
        printer.text.out.push('\n');
    }
    Some(printer.text.out)
}

/// The visitor: the text, and which values were printed. Containers on the path from the root
/// are the walk's ([`Marks::on_path`]).
struct Printer<'s> {
    /// Whether each arena node was printed at least once, a byte a node by index (with a
    /// hash set of ids, `decode --format repr` of ints.p4 took 0.72 s against 0.33 s).
    printed: Vec<bool>,
    /// Output length after which repeated values are cut short.
    limit: usize,
    text: Text<'s>,
}

impl<'s> Printer<'s> {
    fn new(doc: &Document<'_>, max_bytes: usize, deadline: Option<Instant>) -> Printer<'s> {
        Printer {
            printed: vec![false; doc.len()],
            limit: usize::try_from(doc.value_count())
                .unwrap_or(usize::MAX)
                .saturating_mul(16)
                .saturating_add(1024),
            text: Text::new(max_bytes, Clock::new(deadline)),
        }
    }
}

impl<'d> Visitor<'d> for Printer<'_> {
    /// Stops when the output passed `max_bytes`, the sink failed or the deadline passed.
    #[inline]
    fn go_on(&mut self, _: &Marks) -> bool {
        self.text.go_on()
    }

    /// The printer numbers nothing.
    #[inline]
    fn may_have_number(&self, _: &Marks, _: NodeId, _: &Value<'d>) -> bool {
        false
    }

    /// The printer numbers nothing, so it is never told of a reference.
    fn reference(&mut self, _: NodeId, _: u32) {}

    fn enter(&mut self, marks: &mut Marks, id: NodeId, v: Value<'d>) -> Step {
        let container = v.is_container();
        // Shared values (None, bools, small ints) are scalars: never cut as repeats.
        let repeat = !id.is_shared()
            && self
                .printed
                .get_mut(id.index())
                .is_some_and(|p| std::mem::replace(p, true));
        let cut = marks.on_path(id) || (repeat && self.text.len() > self.limit);
        let out = &mut self.text.out;
        if cut {
            out.push_str(match v {
                Value::List(_) => "[...]",
                Value::Tuple(_) => "(...)",
                _ if container => "{...}",
                _ => "...",
            });
            return Step::Leaf;
        }
        match v {
            Value::None => out.push_str("None"),
            Value::Bool(true) => out.push_str("True"),
            Value::Bool(false) => out.push_str("False"),
            Value::Int(i) => out.push_str(itoa::Buffer::new().format(i)),
            Value::BigInt(b) => {
                self.text.work += BIG_INT_WORK;
                let _ = write!(out, "{b}");
            }
            Value::Float(x) => out.push_str(&float_repr(x)),
            Value::Complex(re, im) => complex_repr(out, re, im),
            Value::Str(s) => str_repr(out, &s),
            Value::Bytes(b) => bytes_repr(out, &b.to_cow(), false),
            Value::ByteArray(b) => {
                out.push_str("bytearray(");
                bytes_repr(out, b, true);
                out.push(')');
            }
            Value::Global(g) => {
                let _ = write!(out, "{}.{}", g.module, g.name);
            }
            Value::Set([]) => out.push_str("set()"),
            Value::FrozenSet([]) => out.push_str("frozenset()"),
            Value::List(_) => out.push('['),
            Value::Tuple(_) => out.push('('),
            Value::Set(_) | Value::Dict(_) => out.push('{'),
            Value::FrozenSet(_) => out.push_str("frozenset({"),
            // <callable [__new__]args[, **kwargs][; state=..][; listitems=[..]]
            //  [; dictitems={..}]>
            Value::Object(_) => out.push('<'),
        }
        match v {
            Value::Set([]) | Value::FrozenSet([]) => Step::Leaf,
            _ if container => Step::Open,
            _ => Step::Leaf,
        }
    }

    fn item(&mut self, parent: &Value<'d>, slot: Slot) {
        let out = &mut self.text.out;
        match slot {
            Slot::Item(0) | Slot::Key(0) | Slot::Callable => {}
            Slot::Item(_) | Slot::Key(_) | Slot::ListItem(_) | Slot::DictKey(_) => {
                match slot {
                    Slot::ListItem(0) => out.push_str("; listitems=["),
                    Slot::DictKey(0) => {
                        // After the record's listitems, if it has any.
                        if matches!(parent, Value::Object(o) if !o.listitems.is_empty()) {
                            out.push(']');
                        }
                        out.push_str("; dictitems={");
                    }
                    _ => out.push_str(", "),
                }
            }
            Slot::Value(_) | Slot::DictValue(_) => out.push_str(": "),
            Slot::Args => out.push_str(match parent {
                Value::Object(o) if matches!(o.kind, CallKind::NewObj | CallKind::NewObjEx) => {
                    " __new__"
                }
                _ => " ",
            }),
            Slot::Kwargs => out.push_str(", **"),
            Slot::State => out.push_str("; state="),
        }
    }

    fn exit(&mut self, _: &mut Marks, _: NodeId, v: Value<'d>) {
        let out = &mut self.text.out;
        match v {
            Value::List(_) => out.push(']'),
            Value::Tuple(items) => out.push_str(if items.len() == 1 { ",)" } else { ")" }),
            Value::FrozenSet(_) => out.push_str("})"),
            Value::Object(o) => {
                if !o.dictitems.is_empty() {
                    out.push('}');
                } else if !o.listitems.is_empty() {
                    out.push(']');
                }
                out.push('>');
            }
            _ => out.push('}'),
        }
    }
}
