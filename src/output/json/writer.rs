//! The typed JSON writer: a visitor of the document walk ([`crate::output::walk`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use super::sets::{sets_in_post_order, SORT_KEY_BYTES};
use super::text::{write_json_string, write_scalar_fields, write_type};
use crate::clock::Clock;
use crate::output::sink::{Text, BIG_INT_WORK};
use crate::output::walk::{reachable_refs, Marks, Slot, Step, Visitor, Walker};
use crate::value::{Arena, NodeId, Value};

/// A document's typed JSON being written: the walk and the writer it drives.
pub(super) struct Output<'d, 'a, 's> {
    walker: Walker<'d, 'a>,
    pub(super) writer: Writer<'d, 'a, 's>,
}

impl<'d, 'a, 's> Output<'d, 'a, 's> {
    /// A writer of what `roots` reach in `arena`, with the in-degrees that decide which nodes
    /// get ids, and every reachable set's items already ordered (unless `deadline` passed
    /// meanwhile: `writer.text.timed_out`).
    pub(super) fn new(
        arena: &'d Arena<'a>,
        roots: &[NodeId],
        deadline: Option<Instant>,
    ) -> Output<'d, 'a, 's> {
        let (refs, any_set) = reachable_refs(arena, roots);
        let mut writer = Writer::new(arena, Text::new(usize::MAX, Clock::new(deadline)), false);
        if any_set {
            // A set's sort keys hold the orders of the sets inside its items, so those are
            // computed first: post-order. (Arena order is not enough: EMPTY_SET and ADDITEMS
            // make a set before its items, and a record's state comes after it.)
            let sets = sets_in_post_order(arena, roots);
            writer.sort_sets(&sets);
        }
        Output {
            walker: Walker::new(arena, refs),
            writer,
        }
    }

    /// Writes the node of `root` (ids go on from those of the roots written before).
    pub(super) fn write(&mut self, root: NodeId) {
        self.walker.walk(root, &mut self.writer);
    }

    /// Appends fixed text.
    pub(super) fn push(&mut self, s: &str) {
        self.writer.text.out.push_str(s);
    }
}

/// The visitor: the text, and the set orders its sorted sets are written in.
pub(super) struct Writer<'d, 'a, 's> {
    /// The arena written from.
    pub(super) arena: &'d Arena<'a>,
    pub(super) text: Text<'s>,
    /// The sorted item order of each reachable set and frozenset: an index into `orders`
    /// (looked up once per set, not once per item).
    pub(super) set_orders: HashMap<NodeId, u32>,
    pub(super) orders: Vec<Vec<NodeId>>,
    /// Writing a set item's sort key: every mutable value gets an id (so any cycle ends in a
    /// ref) and writing stops `key_bytes` past `key_start` (a text or bytes value is written
    /// only as far as the key needs it).
    pub(super) sort_key: bool,
    pub(super) key_start: usize,
    pub(super) key_bytes: usize,
    /// The first digits of each big int written into a sort key (at most [`SORT_KEY_BYTES`]
    /// and one more), by node, kept for the whole document: a key needs no more, and the
    /// decimal conversion is quadratic in the int's size (one 4096-byte int in 200,000 set
    /// items would be converted 200,000 times; A46).
    pub(super) decimals: HashMap<NodeId, String>,
}

impl<'d, 'a, 's> Writer<'d, 'a, 's> {
    pub(super) fn new(arena: &'d Arena<'a>, text: Text<'s>, sort_key: bool) -> Self {
        Writer {
            arena,
            text,
            set_orders: HashMap::new(),
            orders: Vec::new(),
            sort_key,
            key_start: 0,
            key_bytes: SORT_KEY_BYTES,
            decimals: HashMap::new(),
        }
    }

    /// The bytes of a sort key still to write, or `usize::MAX` outside a sort key.
    fn key_room(&self) -> usize {
        if self.sort_key {
            (self.key_start + self.key_bytes).saturating_sub(self.text.out.len())
        } else {
            usize::MAX
        }
    }

    /// Cuts a sort key that reached its length at a char boundary at or below it (the text
    /// is UTF-8).
    #[cold]
    pub(super) fn cut_key(&mut self) {
        let out = &mut self.text.out;
        let end = self.key_start + self.key_bytes;
        if out.len() > end {
            let cut = (self.key_start..=end)
                .rev()
                .find(|&i| out.is_char_boundary(i))
                .unwrap_or(self.key_start);
            out.truncate(cut);
        }
    }
}

impl<'d> Visitor<'d> for Writer<'d, '_, '_> {
    #[inline]
    fn go_on(&mut self, _: &Marks) -> bool {
        if !self.text.go_on() {
            return false;
        }
        if self.sort_key && self.text.out.len() >= self.key_start + self.key_bytes {
            self.cut_key();
            return false;
        }
        true
    }

    /// Ids go to nodes referenced twice or more, and in a sort key to mutable values.
    #[inline]
    fn may_have_number(&self, marks: &Marks, id: NodeId, value: &Value<'d>) -> bool {
        marks.is_shared(id) || (self.sort_key && value.is_mutable())
    }

    fn reference(&mut self, _: NodeId, number: u32) {
        let out = &mut self.text.out;
        out.push_str("{\"type\":\"ref\",\"id\":");
        out.push_str(itoa::Buffer::new().format(number));
        out.push('}');
    }

    #[inline]
    fn enter(&mut self, marks: &mut Marks, id: NodeId, v: Value<'d>) -> Step {
        let shared = marks.is_shared(id);
        match v {
            // The commonest nodes in one piece each (the same text as below): never with an
            // id when not shared (an int is not mutable, so a sort key gives it none either).
            Value::Int(i) if !shared => {
                let out = &mut self.text.out;
                out.push_str("{\"type\":\"int\",\"value\":\"");
                out.push_str(itoa::Buffer::new().format(i));
                out.push_str("\"}");
                return Step::Leaf;
            }
            Value::None if !shared => {
                self.text.out.push_str("{\"type\":\"none\"}");
                return Step::Leaf;
            }
            _ => {}
        }
        write_type(&mut self.text.out, v);
        // Only a mutable value can close a cycle (a tuple or frozenset is made after its
        // items), so only those get ids in a sort key: a tuple met twice in an item is written
        // twice, and the key is the same whether the pickle shared it or not. The key's cut
        // bounds what a DAG of tuples unfolds to.
        let numbered = if self.sort_key {
            v.is_mutable()
        } else {
            shared
        };
        if numbered {
            let n = marks.give(id);
            self.text.out.push_str(",\"id\":");
            self.text.out.push_str(itoa::Buffer::new().format(n));
        }
        // A sort key needs only the first bytes of a text or a bytes value: each byte is at
        // least one byte of JSON (two of hex), and the key is cut where it ends (`sort_sets`
        // cuts an item that is itself a text, after which the walk has no next step).
        let room = self.key_room();
        if write_scalar_fields(&mut self.text.out, v, room) {
            return Step::Leaf;
        }
        let out = &mut self.text.out;
        match v {
            Value::BigInt(b) if self.sort_key => {
                // Digits (and a sign) are one byte each: `room` and one more make the key
                // what the whole text would, once cut (no key is longer than SORT_KEY_BYTES).
                let cap = SORT_KEY_BYTES + 1;
                let digits = self.decimals.entry(id).or_insert_with(|| {
                    let mut d = b.to_string();
                    d.truncate(cap);
                    d
                });
                out.push_str(",\"value\":\"");
                out.push_str(digits.get(..room.saturating_add(1)).unwrap_or(digits));
                out.push_str("\"}");
                Step::Leaf
            }
            Value::BigInt(b) => {
                // Quadratic in its size to convert: counted as many values.
                self.text.work += BIG_INT_WORK;
                let _ = write!(out, ",\"value\":\"{b}\"}}");
                Step::Leaf
            }
            Value::Global(g) => {
                out.push_str(",\"module\":");
                write_json_string(out, &g.module);
                out.push_str(",\"name\":");
                write_json_string(out, &g.name);
                out.push('}');
                Step::Leaf
            }
            Value::List(_) | Value::Tuple(_) | Value::Dict(_) => {
                out.push_str(",\"items\":[");
                Step::Open
            }
            Value::Set(_) | Value::FrozenSet(_) => {
                out.push_str(",\"items\":[");
                self.set_orders
                    .get(&id)
                    .map_or(Step::Open, |&i| Step::Sorted(i))
            }
            Value::Object(o) => {
                out.push_str(",\"kind\":\"");
                out.push_str(o.kind.name());
                out.push_str("\",\"callable\":");
                Step::Open
            }
            // Written by `write_scalar_fields` above.
            Value::None
            | Value::Bool(_)
            | Value::Int(_)
            | Value::Float(_)
            | Value::Complex(..)
            | Value::Str(_)
            | Value::Bytes(_)
            | Value::ByteArray(_) => Step::Leaf,
        }
    }

    /// The separators: `,` between items, `[k,v]` for a pair, and a record's field names.
    #[inline]
    fn item(&mut self, parent: &Value<'d>, slot: Slot) {
        let out = &mut self.text.out;
        match slot {
            Slot::Item(0) | Slot::Callable => {}
            Slot::Item(_) | Slot::Value(_) | Slot::DictValue(_) | Slot::ListItem(_) => {
                if slot == Slot::ListItem(0) {
                    out.push_str(",\"listitems\":[");
                } else {
                    out.push(',');
                }
            }
            Slot::Key(0) => out.push('['),
            Slot::DictKey(0) => {
                // After the record's listitems, if it has any.
                if matches!(parent, Value::Object(o) if !o.listitems.is_empty()) {
                    out.push(']');
                }
                out.push_str(",\"dictitems\":[[");
            }
            Slot::Key(_) | Slot::DictKey(_) => out.push_str("],["),
            Slot::Args => out.push_str(",\"args\":"),
            Slot::Kwargs => out.push_str(",\"kwargs\":"),
            Slot::State => out.push_str(",\"state\":"),
        }
    }

    fn exit(&mut self, _: &mut Marks, _: NodeId, v: Value<'d>) {
        let out = &mut self.text.out;
        match v {
            Value::Dict(d) if !d.is_empty() => out.push_str("]]}"),
            Value::Object(o) => {
                if !o.dictitems.is_empty() {
                    out.push_str("]]");
                } else if !o.listitems.is_empty() {
                    out.push(']');
                }
                out.push('}');
            }
            _ => out.push_str("]}"),
        }
    }

    fn sorted_item(&self, order: u32, k: usize) -> Option<NodeId> {
        self.orders.get(order as usize)?.get(k).copied()
    }
}
