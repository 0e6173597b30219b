//! Python-like `repr()` text of a document, for people.
//!
//! Follows CPython's `repr` for scalars and containers (quoting and escapes of str and bytes,
//! float digits, `(1,)`, `set()`, `frozenset({...})`): a container inside itself is shown as
//! `[...]`, `{...}` or `(...)`, and a shared container is printed again in full, as CPython
//! does. Two differences keep the output finite and linear in the input: once the text is
//! longer than 16 bytes per value of the document (plus 1 KiB), a value that was already
//! printed is shown as `[...]`, `{...}`, `(...)` or `...` instead of again (a DAG of shared
//! tuples would otherwise print exponentially); and sets keep insertion order (CPython's order
//! depends on its hashes). Record objects print as
//! `module.name(args)`, with `, **kwargs`, and `; state=...`, `; listitems=[...]`,
//! `; dictitems={...}` when present. Walks an explicit stack.

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::text::float_repr;
use crate::value::{CallKind, Document, NodeId, PyStr, Value};

enum Task<'d> {
    Node(NodeId),
    Raw(&'static str),
    /// A container's text is complete: it leaves the path of containers being printed.
    Exit(NodeId),
    /// The items of a sequence from index `.1` on, separated by `.2`: one task however long
    /// the sequence, so the stack grows with nesting, not with item count.
    Items(&'d [NodeId], usize, &'static str),
    /// The `k: v` pairs of a dict from index `.1` on.
    Pairs(&'d [(NodeId, NodeId)], usize),
}

/// The repr text of each root, one per line.
pub fn to_repr(doc: &Document<'_>) -> String {
    to_repr_limited(doc, usize::MAX).unwrap_or_default()
}

/// As [`to_repr`], but gives up (`None`) once the text passes `max_bytes` (it may pass it by
/// at most one scalar value before the printer stops), so a caller that must bound its memory
/// never holds much more than `max_bytes` of output.
pub fn to_repr_limited(doc: &Document<'_>, max_bytes: usize) -> Option<String> {
    let mut out = String::new();
    let mut printer = Printer {
        printed: HashSet::new(),
        on_path: HashSet::new(),
        limit: usize::try_from(doc.value_count())
            .unwrap_or(usize::MAX)
            .saturating_mul(16)
            .saturating_add(1024),
        max_bytes,
    };
    for &root in doc.roots() {
        if !printer.write_node(doc, root, &mut out) {
            return None;
        }
        out.push('\n');
    }
    Some(out)
}

struct Printer {
    /// Values printed at least once.
    printed: HashSet<NodeId>,
    /// Containers whose text is being printed (the path from the root).
    on_path: HashSet<NodeId>,
    /// Output length after which repeated values are cut short.
    limit: usize,
    /// Output length after which printing stops.
    max_bytes: usize,
}

impl Printer {
    /// Prints one root; `false` when the output passed `max_bytes`.
    fn write_node<'d>(&mut self, doc: &'d Document<'_>, root: NodeId, out: &mut String) -> bool {
        let mut tasks: Vec<Task<'d>> = vec![Task::Node(root)];
        while let Some(t) = tasks.pop() {
            if out.len() > self.max_bytes {
                return false;
            }
            let id = match t {
                Task::Raw(s) => {
                    out.push_str(s);
                    continue;
                }
                Task::Items(items, i, sep) => {
                    if let Some(&item) = items.get(i) {
                        if i > 0 {
                            out.push_str(sep);
                        }
                        tasks.push(Task::Items(items, i + 1, sep));
                        tasks.push(Task::Node(item));
                    }
                    continue;
                }
                Task::Pairs(pairs, i) => {
                    if let Some(&(k, v)) = pairs.get(i) {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        tasks.push(Task::Pairs(pairs, i + 1));
                        tasks.push(Task::Node(v));
                        tasks.push(Task::Raw(": "));
                        tasks.push(Task::Node(k));
                    }
                    continue;
                }
                Task::Exit(id) => {
                    self.on_path.remove(&id);
                    continue;
                }
                Task::Node(id) => id,
            };
            let Some(v) = doc.get(id) else { continue };
            let container = v.is_container();
            // Shared values (None, bools, small ints) are scalars: never cut as repeats.
            let repeat = !id.is_shared() && !self.printed.insert(id);
            if self.on_path.contains(&id) || (repeat && out.len() > self.limit) {
                out.push_str(match v {
                    Value::List(_) => "[...]",
                    Value::Tuple(_) => "(...)",
                    _ if container => "{...}",
                    _ => "...",
                });
                continue;
            }
            if container {
                self.on_path.insert(id);
                tasks.push(Task::Exit(id));
            }
            match v {
                Value::None => out.push_str("None"),
                Value::Bool(true) => out.push_str("True"),
                Value::Bool(false) => out.push_str("False"),
                Value::Int(i) => {
                    let _ = write!(out, "{i}");
                }
                Value::BigInt(b) => {
                    let _ = write!(out, "{b}");
                }
                Value::Float(x) => out.push_str(&float_repr(*x)),
                Value::Complex(re, im) => complex_repr(out, *re, *im),
                Value::Str(s) => str_repr(out, s),
                Value::Bytes(b) => bytes_repr(out, b),
                Value::ByteArray(b) => {
                    out.push_str("bytearray(");
                    bytes_repr(out, b);
                    out.push(')');
                }
                Value::Global(g) => {
                    let _ = write!(out, "{}.{}", g.module, g.name);
                }
                Value::List(items) => {
                    out.push('[');
                    tasks.push(Task::Raw("]"));
                    tasks.push(Task::Items(items, 0, ", "));
                }
                Value::Tuple(items) => {
                    out.push('(');
                    tasks.push(Task::Raw(if items.len() == 1 { ",)" } else { ")" }));
                    tasks.push(Task::Items(items, 0, ", "));
                }
                Value::Set(s) | Value::FrozenSet(s) => {
                    let frozen = matches!(v, Value::FrozenSet(_));
                    match (frozen, s.items.is_empty()) {
                        (false, true) => out.push_str("set()"),
                        (true, true) => out.push_str("frozenset()"),
                        (false, false) => {
                            out.push('{');
                            tasks.push(Task::Raw("}"));
                            tasks.push(Task::Items(&s.items, 0, ", "));
                        }
                        (true, false) => {
                            out.push_str("frozenset({");
                            tasks.push(Task::Raw("})"));
                            tasks.push(Task::Items(&s.items, 0, ", "));
                        }
                    }
                }
                Value::Dict(d) => {
                    out.push('{');
                    tasks.push(Task::Raw("}"));
                    tasks.push(Task::Pairs(&d.items, 0));
                }
                Value::Object(o) => {
                    // callable(args[, **kwargs])[; state=..][; listitems=[..]][; dictitems={..}]
                    tasks.push(Task::Raw(">"));
                    if !o.dictitems.is_empty() {
                        tasks.push(Task::Raw("}"));
                        tasks.push(Task::Pairs(&o.dictitems, 0));
                        tasks.push(Task::Raw("; dictitems={"));
                    }
                    if !o.listitems.is_empty() {
                        tasks.push(Task::Raw("]"));
                        tasks.push(Task::Items(&o.listitems, 0, ", "));
                        tasks.push(Task::Raw("; listitems=["));
                    }
                    if let Some(s) = o.state {
                        tasks.push(Task::Node(s));
                        tasks.push(Task::Raw("; state="));
                    }
                    if let Some(k) = o.kwargs {
                        tasks.push(Task::Node(k));
                        tasks.push(Task::Raw(", **"));
                    }
                    tasks.push(Task::Node(o.args));
                    tasks.push(Task::Raw(match o.kind {
                        CallKind::Reduce => " ",
                        CallKind::NewObj => " __new__",
                        CallKind::NewObjEx => " __new__",
                    }));
                    tasks.push(Task::Node(o.callable));
                    out.push('<');
                }
            }
        }
        true
    }
}

/// Python's complex repr: `2j`, `(1+2j)`, `(-0-1j)`, parts without a trailing `.0`.
fn complex_repr(out: &mut String, re: f64, im: f64) {
    let part = |x: f64| {
        let s = float_repr(x);
        s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
    };
    let imag = part(im);
    if re == 0.0 && re.is_sign_positive() {
        let _ = write!(out, "{imag}j");
    } else {
        let sign = if imag.starts_with('-') { "" } else { "+" };
        let _ = write!(out, "({}{sign}{imag}j)", part(re));
    }
}

fn quote_for(has_single: bool, has_double: bool) -> char {
    if has_single && !has_double {
        '"'
    } else {
        '\''
    }
}

/// Whether CPython's `str.isprintable()` would call `c` printable (approximated: control,
/// separator and format characters other than space are not).
fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    !(c.is_control()
        || c.is_whitespace()
        || matches!(c as u32, 0xAD | 0x200B..=0x200F | 0x2060..=0x2064 | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF))
}

fn str_repr(out: &mut String, s: &PyStr<'_>) {
    // Decode surrogatepass bytes to code points.
    let cps = code_points(s.as_bytes());
    let has_single = cps.contains(&u32::from('\''));
    let has_double = cps.contains(&u32::from('"'));
    let q = quote_for(has_single, has_double);
    out.push(q);
    for cp in cps {
        match char::from_u32(cp) {
            Some('\\') => out.push_str("\\\\"),
            Some('\n') => out.push_str("\\n"),
            Some('\r') => out.push_str("\\r"),
            Some('\t') => out.push_str("\\t"),
            Some(c) if c == q => {
                out.push('\\');
                out.push(c);
            }
            Some(c) if printable(c) => out.push(c),
            _ if cp < 0x100 => {
                let _ = write!(out, "\\x{cp:02x}");
            }
            _ if cp < 0x10000 => {
                let _ = write!(out, "\\u{cp:04x}");
            }
            _ => {
                let _ = write!(out, "\\U{cp:08x}");
            }
        }
    }
    out.push(q);
}

/// Code points of `surrogatepass` UTF-8 (input already validated by the decoder).
fn code_points(b: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&lead) = b.get(i) {
        let (len, init) = match lead {
            0x00..=0x7F => (1, u32::from(lead)),
            0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
            0xE0..=0xEF => (3, u32::from(lead & 0x0F)),
            _ => (4, u32::from(lead & 0x07)),
        };
        let mut cp = init;
        for k in 1..len {
            cp = (cp << 6) | u32::from(b.get(i + k).copied().unwrap_or(0x80) & 0x3F);
        }
        out.push(cp);
        i += len;
    }
    out
}

fn bytes_repr(out: &mut String, b: &[u8]) {
    let q = quote_for(b.contains(&b'\''), b.contains(&b'"'));
    out.push('b');
    out.push(q);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ if char::from(c) == q => {
                out.push('\\');
                out.push(q);
            }
            0x20..=0x7E => out.push(char::from(c)),
            _ => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(q);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr_of(pickle: &[u8]) -> String {
        let policy = crate::Policy::data();
        let doc = crate::decode(pickle, &policy).unwrap();
        to_repr(&doc)
    }

    /// A document of shared values (small ints) is not cut as if it were small: the repeat
    /// threshold counts every value, not the arena's nodes. CPython prints this in full.
    #[test]
    fn a_repeated_tuple_of_small_ints_is_printed_in_full() {
        // pickle.dumps((t, t), 2) with t = tuple(range(257))
        let mut pickle = b"\x80\x02(".to_vec();
        for i in 0..=255u8 {
            pickle.extend_from_slice(&[b'K', i]);
        }
        pickle.extend_from_slice(b"M\x00\x01tq\x00h\x00\x86q\x01.");
        let t: Vec<String> = (0..=256).map(|i| i.to_string()).collect();
        let t = format!("({})", t.join(", "));
        assert_eq!(repr_of(&pickle), format!("({t}, {t})\n"));
    }

    #[test]
    fn reprs_look_like_python() {
        // pickle.dumps([1, 'a\n', b"x'", (2,), None, 1.5], 2)
        assert_eq!(
            repr_of(b"\x80\x02]q\x00(K\x01X\x02\x00\x00\x00a\nq\x01c_codecs\nencode\nq\x02X\x02\x00\x00\x00x'q\x03X\x06\x00\x00\x00latin1q\x04\x86q\x05Rq\x06K\x02\x85q\x07NG?\xf8\x00\x00\x00\x00\x00\x00e."),
            "[1, 'a\\n', b\"x'\", (2,), None, 1.5]\n"
        );
        // v = {1: [2, (3,), ()], 'k': {4}, 'f': frozenset(), 'e': {}, 't': (5, 6)}
        // pickle.dumps(v, 4), and repr(v) as CPython prints it.
        assert_eq!(
            repr_of(b"\x80\x04\x953\x00\x00\x00\x00\x00\x00\x00}\x94(K\x01]\x94(K\x02K\x03\x85\x94)e\x8c\x01k\x94\x8f\x94(K\x04\x90\x8c\x01f\x94(\x91\x94\x8c\x01e\x94}\x94\x8c\x01t\x94K\x05K\x06\x86\x94u."),
            "{1: [2, (3,), ()], 'k': {4}, 'f': frozenset(), 'e': {}, 't': (5, 6)}\n"
        );
        let mut s = String::new();
        complex_repr(&mut s, 1.0, -2.0);
        complex_repr(&mut s, 0.0, 2.0);
        assert_eq!(s, "(1-2j)2j");
    }
}
