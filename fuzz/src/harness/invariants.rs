//! The invariants on one decode's result: a refusal's offset, opcode, limit and message; an
//! accepted document's arena, item counts, allocation lower bound and nesting depth; its
//! typed JSON and repr.

use picklewarden::limits::LimitName;
use picklewarden::{json, repr, Category, Document, Error, ErrorKind, Limits};
use picklewarden::{NodeId, Value};

use super::Outcome;

/// Checks one decode's result; returns its outcome for the cross-checks.
pub(super) fn check_result(
    data: &[u8],
    limits: &Limits,
    stream: bool,
    r: &Result<Document<'_>, Error>,
) -> Outcome {
    match r {
        Ok(doc) => Outcome::Ok(check_document(data, limits, stream, doc)),
        Err(e) => {
            check_error(data, limits, e);
            Outcome::Err(e.kind().name(), e.offset())
        }
    }
}

pub(super) fn check_error(data: &[u8], limits: &Limits, e: &Error) {
    let len = data.len() as u64;
    assert!(
        e.offset() <= len,
        "error offset {} past input length {len}: {e}",
        e.offset()
    );
    if let Some(op) = e.opcode() {
        let at = usize::try_from(e.offset()).ok().and_then(|i| data.get(i));
        assert_eq!(
            at,
            Some(&op),
            "error names opcode byte {op:#04x} but offset {} holds {at:?}: {e}",
            e.offset()
        );
    }
    assert_ne!(
        e.category(),
        Category::Io,
        "I/O error from a byte slice: {e}"
    );
    if let ErrorKind::LimitExceeded { limit, seen, max } = e.kind() {
        assert_eq!(
            *max,
            limits.get(*limit),
            "limit {limit} reported max {max}, configured {}",
            limits.get(*limit)
        );
        assert!(seen > max, "limit {limit} refused at {seen} <= max {max}");
        if *limit == LimitName::MaxInputBytes {
            assert_eq!(*seen, len, "max_input_bytes seen is not the input length");
        }
    }
    // Input that is not a pickle (src/input/sniff.rs) is reported at offset 0 with no opcode, in
    // place of a refusal at its first opcode (or the second, after zstd's MARK) that is not a
    // limit's.
    if let ErrorKind::NotAPickle { .. } = e.kind() {
        assert_eq!((e.offset(), e.opcode()), (0, None), "{e}");
        let under = e.read_as_pickle();
        assert!(
            under.is_some_and(|u| u.offset() <= 1
                && u.category() != Category::LimitExceeded
                && !matches!(u.kind(), ErrorKind::NotAPickle { .. })),
            "not_a_pickle in place of {under:?}: {e}"
        );
        if let Some(u) = under {
            check_error(data, limits, u);
        }
    } else {
        assert!(e.read_as_pickle().is_none(), "{e}");
    }
    let message = e.to_string();
    assert!(
        message.len() < 2048,
        "error message of {} bytes (attacker text not truncated?)",
        message.len()
    );
}

fn check_document(data: &[u8], limits: &Limits, stream: bool, doc: &Document<'_>) -> Vec<String> {
    let nodes = doc.nodes();
    let n = nodes.len();
    if stream {
        assert!(!doc.roots().is_empty(), "stream accepted with no root");
    } else {
        assert_eq!(doc.roots().len(), 1, "one pickle with several roots");
    }
    assert!(
        n as u64 <= limits.max_nodes,
        "{n} nodes past max_nodes {}",
        limits.max_nodes
    );
    // Shared values (None, bools, small ints) have ids past the arena; `get` resolves them.
    for &r in doc.roots() {
        assert!(
            r.index() < n || (r.is_shared() && doc.get(r).is_some()),
            "root {} outside the arena of {n}",
            r.index()
        );
    }
    // A lower bound of what the decoder charges: a node slot per value (16 bytes, the size of
    // an arena node in src/value.rs), 4 bytes per list or tuple item, 24 per dict pair or set
    // item, and the bytes of every bytearray.
    let slot = 16u64;
    let mut charged: u64 = 0;
    for v in nodes {
        let mut bad: Option<NodeId> = None;
        v.for_each_child(|c| {
            if c.index() >= n && !(c.is_shared() && doc.get(c).is_some()) {
                bad = Some(c);
            }
        });
        assert!(bad.is_none(), "child id {bad:?} outside the arena of {n}");
        let (items, per_item) = match v {
            Value::List(items) | Value::Tuple(items) => (items.len(), 4),
            Value::Dict(d) => (d.len(), 24),
            Value::Set(s) | Value::FrozenSet(s) => (s.len(), 24),
            Value::ByteArray(b) => (b.len(), 1),
            _ => (0, 0),
        };
        if per_item != 1 {
            assert!(
                items as u64 <= limits.max_container_items,
                "container of {items} items past max_container_items {}",
                limits.max_container_items
            );
        }
        charged = charged
            .saturating_add(slot)
            .saturating_add(items as u64 * per_item);
    }
    assert!(
        charged <= limits.max_alloc_bytes,
        "document needs at least {charged} bytes, past max_alloc_bytes {}",
        limits.max_alloc_bytes
    );
    // The writers that pass their text on as it is made give the same bytes.
    let printed = repr::to_repr(doc);
    let mut streamed = Vec::new();
    assert!(repr::write_repr(doc, &mut streamed).is_ok() && streamed == printed.as_bytes());
    if KNOWN_OPEN_JSON_SET_CYCLE && has_set_and_record(doc) {
        return vec![format!("(typed JSON skipped: {n} nodes)")];
    }
    let text = json::to_typed_json(doc);
    let mut streamed = Vec::new();
    assert!(json::write_typed_json(doc, &mut streamed).is_ok() && streamed == text.as_bytes());
    check_json(&text, limits);
    let depth = nesting_depth(doc);
    assert!(
        depth <= limits.max_nesting_depth,
        "accepted a document {depth} deep, past max_nesting_depth {}: {data:?}",
        limits.max_nesting_depth
    );
    let written = json_node_depth(&text);
    assert!(
        written <= depth,
        "typed JSON nests {written} node objects in a document {depth} deep: {data:?}"
    );
    // One text per document (json::node_to_typed_json per root would cost the whole arena per
    // root: quadratic for a stream of many small pickles). A single pickle's text is put in
    // the stream form, so the two modes compare equal.
    let single = format!("{{\"format\":\"{}\",\"value\":", json::FORMAT);
    match text.strip_prefix(&single).and_then(|t| t.strip_suffix('}')) {
        Some(value) if !stream => vec![format!(
            "{{\"format\":\"{}\",\"values\":[{value}]}}",
            json::FORMAT
        )],
        _ => vec![text],
    }
}

/// The nesting depth of `doc` as `max_nesting_depth` counts it (src/limits.rs): the values on
/// the longest path from a root, a shared value counted at every place it is reached, an
/// edge back to a value on the path (a cycle) a leaf; roots in order, depth first, children
/// in [`Value::for_each_child`]'s order. Computed here apart from the library's check (its
/// heights and its walk), with one frame per open value holding its children and the index
/// of the next, so the two can be compared.
pub fn nesting_depth(doc: &Document<'_>) -> u64 {
    use std::collections::HashMap;
    /// A value's children, in order.
    fn children(doc: &Document<'_>, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        if let Some(v) = doc.get(id) {
            v.for_each_child(|c| out.push(c));
        }
        out
    }
    // None: on the path; Some(h): its height.
    let mut height: HashMap<NodeId, Option<u64>> = HashMap::new();
    let mut deepest = 0;
    for &root in doc.roots() {
        // (value, its children, index of the next child, tallest child so far)
        let mut frames: Vec<(NodeId, Vec<NodeId>, usize, u64)> = Vec::new();
        let root_height = match height.get(&root) {
            Some(&h) => h.unwrap_or(1),
            None => {
                height.insert(root, None);
                frames.push((root, children(doc, root), 0, 0));
                0
            }
        };
        let mut finished = root_height;
        while let Some(frame) = frames.last_mut() {
            let Some(&c) = frame.1.get(frame.2) else {
                // Every child seen: the height is known.
                let Some((id, _, _, tallest)) = frames.pop() else {
                    break;
                };
                let h = tallest + 1;
                height.insert(id, Some(h));
                match frames.last_mut() {
                    Some(parent) => parent.3 = parent.3.max(h),
                    None => finished = h,
                }
                continue;
            };
            frame.2 += 1;
            match height.get(&c) {
                // On the path (a cycle), or a leaf's entry never made: one level.
                Some(None) => frame.3 = frame.3.max(1),
                Some(Some(h)) => frame.3 = frame.3.max(*h),
                None => {
                    let kids = children(doc, c);
                    if kids.is_empty() {
                        frame.3 = frame.3.max(1);
                    } else {
                        height.insert(c, None);
                        frames.push((c, kids, 0, 0));
                    }
                }
            }
        }
        deepest = deepest.max(finished.max(1));
    }
    deepest
}

/// The deepest nesting of JSON objects whose first key is `"type"` in `text` (compact JSON as
/// the typed-JSON writer writes it), counting only those, and not a complex's two parts;
/// iterative.
fn json_node_depth(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut open: Vec<bool> = Vec::new();
    let (mut nodes, mut deepest) = (0u64, 0u64);
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                while let Some(&c) = bytes.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == b'"' {
                        break;
                    }
                }
                continue;
            }
            b'{' | b'[' => {
                // A complex's parts ("real", "imag") are float objects but not values of the
                // tree: a complex is a scalar (found by a review helper).
                let part = matches!(
                    i.checked_sub(7).and_then(|j| bytes.get(j..i)),
                    Some(b"\"real\":" | b"\"imag\":")
                );
                let node = b == b'{' && !part && bytes.get(i + 1..i + 7) == Some(b"\"type\"");
                open.push(node);
                nodes += u64::from(node);
                deepest = deepest.max(nodes);
            }
            b'}' | b']' => nodes -= u64::from(open.pop() == Some(true)),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// Fixed bug (tests/regression/crash-7ad36186..., crash-8e5c786f..., status `fixed` in
/// 67b5088): the typed JSON writer looped without end when a set held a record object on a
/// cycle of once-referenced nodes that no root reached. While it was open the harness skipped
/// typed JSON for documents holding both a set and a record; the switch stays so a
/// regression can be fuzzed around again.
pub const KNOWN_OPEN_JSON_SET_CYCLE: bool = false;

pub(super) fn has_set_and_record(doc: &Document<'_>) -> bool {
    doc.nodes()
        .any(|v| matches!(v, Value::Set(_) | Value::FrozenSet(_)))
        && doc.nodes().any(|v| matches!(v, Value::Object(_)))
}

/// The text must be JSON. serde_json stops at 128 levels; past that an iterative check of
/// strings and brackets stands in. The bracket depth must be bounded by the nesting limit.
pub(super) fn check_json(text: &str, limits: &Limits) {
    let depth = json_depth(text);
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => {
            assert!(v.is_object(), "typed JSON is not an object");
            // Drop a deep value without recursion trouble: it is at most ~128 levels here.
        }
        Err(e) => {
            assert!(
                e.to_string().contains("recursion limit") && depth.is_some_and(|d| d > 100),
                "typed JSON does not parse: {e}: {}",
                text.get(..text.len().min(300)).unwrap_or("")
            );
        }
    }
    let depth = depth.unwrap_or_else(|| panic!("typed JSON brackets do not balance"));
    // Each value level is at most an object, an items array and a [k, v] pair array (3
    // levels); records add callable/args wrappers. 4 per level plus the wrapper is generous.
    let bound = limits.max_nesting_depth.saturating_mul(4).saturating_add(4);
    assert!(
        depth <= bound,
        "typed JSON {depth} brackets deep, past {bound} for max_nesting_depth {}",
        limits.max_nesting_depth
    );
}

/// The maximum bracket depth of JSON text, or `None` if brackets or strings do not balance.
fn json_depth(text: &str) -> Option<u64> {
    let mut stack: Vec<u8> = Vec::new();
    let mut max = 0u64;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                stack.push(b);
                max = max.max(stack.len() as u64);
            }
            b'}' => (stack.pop()? == b'{').then_some(())?,
            b']' => (stack.pop()? == b'[').then_some(())?,
            _ => {}
        }
    }
    (stack.is_empty() && !in_string).then_some(max)
}
