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
//! {'x': 3}>`). Walks an explicit stack.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io;
use std::time::Instant;

use crate::clock::Clock;
use crate::json::{Sink, SPILL_BYTES};
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
    print(doc, max_bytes, None)
}

/// As [`to_repr_limited`], and also gives up (`None`) once `deadline` has passed (looked at
/// every 65,536 values, or 64 big ints), for a caller that answers by a deadline.
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
    let mut text = String::new();
    let _ = text.try_reserve(piece.saturating_add(piece / 8));
    let mut printer = Printer::new(doc, usize::MAX, None);
    printer.sink = Sink::new(out);
    printer.check_at = piece;
    for &root in doc.roots() {
        if !printer.write_node(doc, root, &mut text) {
            break;
        }
        text.push('\n');
    }
    printer.sink.finish(&mut text)
}

fn print(doc: &Document<'_>, max_bytes: usize, deadline: Option<Instant>) -> Option<String> {
    let mut out = String::new();
    let mut printer = Printer::new(doc, max_bytes, deadline);
    for &root in doc.roots() {
        if !printer.write_node(doc, root, &mut out) {
            return None;
        }
        out.push('\n');
    }
    Some(out)
}

struct Printer<'s> {
    /// Whether each arena node was printed at least once, a byte a node by index (with a
    /// hash set of ids, `decode --format repr` of ints.p4 took 0.72 s against 0.33 s).
    printed: Vec<bool>,
    /// Containers whose text is being printed (the path from the root).
    on_path: HashSet<NodeId>,
    /// Output length after which repeated values are cut short.
    limit: usize,
    /// Length of `out` past which the printer looks again: the caller's `max_bytes`, after
    /// which printing stops, or, with a `sink`, [`SPILL_BYTES`], after which `out` is passed to
    /// the sink and emptied.
    check_at: usize,
    /// Where [`write_repr`] passes the text on (without a writer, it stays in `out`); the
    /// output's length is what it passed on and `out`'s.
    sink: Sink<'s>,
    /// When to give up, and the tasks run so far (a big int counts as
    /// [`crate::json::BIG_INT_WORK`]), by which the clock is looked at.
    clock: Clock,
    work: u64,
}

impl<'s> Printer<'s> {
    fn new(doc: &Document<'_>, max_bytes: usize, deadline: Option<Instant>) -> Printer<'s> {
        Printer {
            clock: Clock::new(deadline),
            work: 0,
            printed: vec![false; doc.len()],
            on_path: HashSet::new(),
            limit: usize::try_from(doc.value_count())
                .unwrap_or(usize::MAX)
                .saturating_mul(16)
                .saturating_add(1024),
            check_at: max_bytes,
            sink: Sink::default(),
        }
    }

    /// Prints one root; `false` when the output passed `max_bytes`, the sink failed or the
    /// deadline passed.
    fn write_node<'d>(&mut self, doc: &'d Document<'_>, root: NodeId, out: &mut String) -> bool {
        let mut tasks: Vec<Task<'d>> = vec![Task::Node(root)];
        while let Some(t) = tasks.pop() {
            if out.len() > self.check_at && !self.sink.pass(out) {
                return false;
            }
            self.work += 1;
            if self.clock.passed_after(self.work) {
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
            let repeat = !id.is_shared()
                && self
                    .printed
                    .get_mut(id.index())
                    .is_some_and(|p| std::mem::replace(p, true));
            if self.on_path.contains(&id) || (repeat && self.sink.passed + out.len() > self.limit) {
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
                    self.work += crate::json::BIG_INT_WORK;
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
                    match (frozen, s.is_empty()) {
                        (false, true) => out.push_str("set()"),
                        (true, true) => out.push_str("frozenset()"),
                        (false, false) => {
                            out.push('{');
                            tasks.push(Task::Raw("}"));
                            tasks.push(Task::Items(s, 0, ", "));
                        }
                        (true, false) => {
                            out.push_str("frozenset({");
                            tasks.push(Task::Raw("})"));
                            tasks.push(Task::Items(s, 0, ", "));
                        }
                    }
                }
                Value::Dict(d) => {
                    out.push('{');
                    tasks.push(Task::Raw("}"));
                    tasks.push(Task::Pairs(d, 0));
                }
                Value::Object(o) => {
                    // <callable [__new__]args[, **kwargs][; state=..][; listitems=[..]]
                    //  [; dictitems={..}]>
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

/// Whether CPython's `str.isprintable()` calls `c` printable, so its repr writes `c` itself
/// rather than an escape.
///
/// CPython's rule (`_PyUnicode_IsPrintable` in Objects/unicodectype.c, from the
/// `PRINTABLE_MASK` that Tools/unicode/makeunicodedata.py sets): a character is printable
/// unless its Unicode General_Category is Cc, Cf, Cs, Co, Cn, Zl, Zp or Zs, except that
/// U+0020 SPACE is printable. The categories come from `unicode-general-category` 1.1.0, which
/// has Unicode 16.0.0 (a test checks its `UNICODE_VERSION`), the version of CPython 3.14, the
/// newest release and the oracle. So this matches CPython 3.14's repr; an older CPython uses
/// an older Unicode and escapes the characters assigned since then as unassigned (Cn): the
/// machine's python3 (3.11, Unicode 14.0.0) escapes e.g. U+1C89 CYRILLIC CAPITAL LETTER TJE
/// (Unicode 16.0), which this prints raw, as 3.14 does. A character assigned after Unicode
/// 16.0 is escaped here until the crate, and CPython, move on.
fn printable(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    c == ' '
        || !matches!(
            get_general_category(c),
            G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
        )
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

/// `b'...'` as CPython writes bytes (Objects/bytesobject.c: the quote not in the text, `'`
/// when both or neither are, and only the chosen quote escaped) or, for a bytearray, as
/// Objects/bytearrayobject.c writes it inside `bytearray(...)`: the same quote, but `'`
/// escaped whichever quote is used (`bytearray(b"\'")`).
fn bytes_repr(out: &mut String, b: &[u8], bytearray: bool) {
    let q = quote_for(b.contains(&b'\''), b.contains(&b'"'));
    out.push('b');
    out.push(q);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ if char::from(c) == q || (bytearray && c == b'\'') => {
                out.push('\\');
                out.push(char::from(c));
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

    /// The standard output of `python3 -c code` (the tests need python3; CI has it).
    fn python(code: &str) -> String {
        let out = std::process::Command::new("python3")
            .args(["-c", code])
            .output()
            .unwrap_or_else(|e| panic!("cannot run python3 (CI has it, the tests need it): {e}"));
        assert!(
            out.status.success(),
            "python3 failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn repr_of(pickle: &[u8]) -> String {
        let policy = crate::Policy::data();
        let doc = crate::decode(pickle, &policy).unwrap();
        to_repr(&doc)
    }

    /// `write_repr` passes on the bytes `to_repr` makes, in pieces of about `SPILL_BYTES`, and
    /// the repeat cut counts the text already passed on: [texts, s, s], with s a shared list
    /// and 50,000 texts of 40 characters (2.2 MB of repr, past the cut at 16 bytes a value),
    /// prints the second s as `[...]`.
    #[test]
    fn written_as_it_is_made_the_repr_is_the_same() {
        let mut p = b"\x80\x04](](".to_vec();
        for i in 0..50_000u32 {
            p.extend_from_slice(b"\x8c\x28");
            p.extend_from_slice(format!("{i:040}").as_bytes());
        }
        p.extend_from_slice(b"e]M\xe9\x03a\x94h\x00e.");
        let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
        let want = to_repr(&doc);
        assert!(want.len() > 2 << 20, "{}", want.len());
        assert!(
            want.ends_with("'], [1001], [...]]\n"),
            "{}",
            &want[want.len() - 40..]
        );
        let mut sink = crate::json::tests::Pieces::default();
        write_repr(&doc, &mut sink).unwrap();
        assert!(sink.text == want.as_bytes());
        assert!(sink.sizes.len() >= 2, "{:?}", sink.sizes);
        assert!(
            sink.sizes.iter().all(|&n| n <= SPILL_BYTES + 64),
            "{:?}",
            sink.sizes
        );
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

    /// CPython's repr escapes unassigned (Cn) and format (Cf) code points, private use (Co)
    /// too, in every plane: repr('\u0378'), repr('\u0600') (ARABIC NUMBER SIGN, Cf),
    /// repr('\U000e0001') (LANGUAGE TAG, Cf), repr('\U0010ffff') (a noncharacter, Cn).
    #[test]
    fn unassigned_and_format_code_points_are_escaped_as_cpython_does() {
        // pickle.dumps(s, 4) for each s
        assert_eq!(
            repr_of(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x8c\x02\xcd\xb8\x94."),
            "'\\u0378'\n"
        );
        assert_eq!(
            repr_of(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x8c\x02\xd8\x80\x94."),
            "'\\u0600'\n"
        );
        assert_eq!(
            repr_of(b"\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04\xf3\xa0\x80\x81\x94."),
            "'\\U000e0001'\n"
        );
        assert_eq!(
            repr_of(b"\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04\xf4\x8f\xbf\xbf\x94."),
            "'\\U0010ffff'\n"
        );
    }

    /// bytes and bytearray reprs against CPython's, quotes and escapes: a bytearray escapes
    /// `'` even inside double quotes, bytes only the quote it uses.
    #[test]
    fn bytes_and_bytearray_quote_as_cpython_does() {
        const CODE: &str = r#"
import pickle
for b in [b"'", b'"', b"'\"", b"a'b", b'\\', b'\x00\x7f\x80\xff', b'\t\n\r', b'']:
    for v in (b, bytearray(b)):
        print(pickle.dumps(v, 5).hex(), repr(v))
"#;
        let text = python(CODE);
        let mut n = 0;
        for line in text.lines() {
            let (hex, want) = line.split_once(' ').unwrap();
            let bytes: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            assert_eq!(repr_of(&bytes), format!("{want}\n"), "{hex}");
            n += 1;
        }
        assert_eq!(n, 16);
    }

    /// `printable`'s doc comment names the crate's Unicode version: keep them in step.
    #[test]
    fn the_general_category_table_is_unicode_16() {
        assert_eq!(unicode_general_category::UNICODE_VERSION, (16, 0, 0));
    }

    /// `printable` against the machine's CPython `str.isprintable()` for every code point
    /// U+0000..=U+10FFFF. Surrogates are no `char`: `str_repr` escapes them (`char::from_u32`
    /// is `None`) and CPython calls them unprintable (Cs), which is checked too.
    ///
    /// Skipped are only the code points whose category the two Unicode versions disagree on
    /// because one side has not assigned them yet: python3 says Cn and the crate a category
    /// (python3 older), or the reverse (python3 newer). Figures with python3 3.11 (Unicode
    /// 14.0.0) and the crate's Unicode 16.0.0: 1,114,112 code points, 1,103,811 compared, all
    /// agree; 10,301 skipped, exactly the characters Unicode 15.0 (4,489), 15.1 (627) and 16.0
    /// (5,185) added, all unassigned (so escaped) for python3; 10,294 of them are printable
    /// here, as in CPython 3.14, and 7 are format characters (U+13439..=U+1343F, Egyptian
    /// hieroglyph format controls, Cf) that both escape. The approximation this replaced
    /// disagreed on 950,749 of the compared code points (819,533 unassigned, 131,068 private
    /// use in planes 15 and 16, 148 format characters), all printed raw.
    #[test]
    fn printable_agrees_with_cpython_for_every_code_point() {
        use unicode_general_category::{get_general_category, GeneralCategory, UNICODE_VERSION};
        // Line 1: unicodedata's version; then `p FIRST LAST` for each run of code points that
        // are not printable, and `n FIRST LAST` for each run of unassigned (Cn) ones, in hex.
        const CODE: &str = r#"
import sys, unicodedata
out = [unicodedata.unidata_version]
for tag, test in (("p", lambda c: not chr(c).isprintable()),
                  ("n", lambda c: unicodedata.category(chr(c)) == "Cn")):
    start = None
    for c in range(0x110001):
        hit = c < 0x110000 and test(c)
        if hit and start is None:
            start = c
        elif not hit and start is not None:
            out.append(f"{tag} {start:x} {c - 1:x}")
            start = None
sys.stdout.write("\n".join(out) + "\n")
"#;
        let text = python(CODE);
        let mut lines = text.lines();
        let py_version: Vec<u64> = lines
            .next()
            .unwrap()
            .split('.')
            .map(|n| n.parse().unwrap())
            .collect();
        let crate_version = vec![UNICODE_VERSION.0, UNICODE_VERSION.1, UNICODE_VERSION.2];

        const N: usize = 0x11_0000;
        let mut py_unprintable = vec![false; N];
        let mut py_unassigned = vec![false; N];
        for line in lines {
            let mut f = line.split(' ');
            let table = match f.next() {
                Some("p") => &mut py_unprintable,
                Some("n") => &mut py_unassigned,
                _ => panic!("bad line from python3: {line:?}"),
            };
            let mut hex = || usize::from_str_radix(f.next().unwrap(), 16).unwrap();
            let (first, last) = (hex(), hex());
            table[first..=last].fill(true);
        }

        let (mut compared, mut new_in_crate, mut new_in_python, mut new_printable) = (0, 0, 0, 0);
        let mut wrong = Vec::new();
        for cp in 0..N {
            let c = char::from_u32(cp as u32);
            let crate_unassigned =
                c.is_some_and(|c| get_general_category(c) == GeneralCategory::Unassigned);
            match (py_unassigned[cp], crate_unassigned) {
                (true, false) => {
                    new_in_crate += 1;
                    new_printable += usize::from(c.is_some_and(printable));
                    continue;
                }
                (false, true) => {
                    new_in_python += 1;
                    continue;
                }
                _ => {}
            }
            compared += 1;
            // A surrogate (no char) is escaped by str_repr.
            if c.is_some_and(printable) == py_unprintable[cp] {
                wrong.push(format!("U+{cp:04X}"));
            }
        }
        assert!(
            wrong.is_empty(),
            "{} code points disagree: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(50)]
        );
        eprintln!(
            "python3 Unicode {py_version:?}, crate {crate_version:?}: {compared} compared, \
             {new_in_crate} assigned only in the crate ({new_printable} printable), \
             {new_in_python} assigned only in python3"
        );
        assert_eq!(compared + new_in_crate + new_in_python, N);
        // Characters Unicode added in each version after 14.0 up to the crate's 16.0.
        let added: [(&[u64], usize); 3] =
            [(&[15, 0, 0], 4489), (&[15, 1, 0], 627), (&[16, 0, 0], 5185)];
        if py_version <= crate_version {
            // Assigned characters stay assigned: python3 knows none the crate does not.
            assert_eq!(new_in_python, 0);
            if py_version >= vec![14, 0, 0] {
                let expected: usize = added
                    .iter()
                    .filter(|(v, _)| *v > py_version.as_slice())
                    .map(|&(_, n)| n)
                    .sum();
                assert_eq!(
                    new_in_crate, expected,
                    "not exactly the characters added since {py_version:?}"
                );
            } else {
                // An older python3: still only a few percent of the code space.
                assert!(
                    new_in_crate < N / 50,
                    "{new_in_crate} code points assigned only in the crate"
                );
            }
        } else {
            // A python3 newer than the crate: time to move the crate to its Unicode version.
            assert_eq!(new_in_crate, 0);
            assert!(
                new_in_python < N / 50,
                "{new_in_python} code points assigned only in python3"
            );
        }
        // Characters whose Unicode is newer than python3's are printed as CPython 3.14 does:
        // U+1C89 CYRILLIC CAPITAL LETTER TJE (Unicode 16.0) raw.
        assert!(printable('\u{1C89}'));
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
