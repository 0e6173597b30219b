//! What the reader after picklewarden does with what a constructor is given and what BUILD
//! applies: the copies and insertions charged at **every** call and every BUILD, a value the
//! memo hands again included.
//!
//! A pickler makes each value once and hands it to one call, so a real pickle's copies cost a
//! few bytes per input byte. Through the memo a peer can hand one large value to many calls:
//! `bytearray(b)` of one 900 KB bytes object 2,300 times (912 KB of pickle, 2 GB built by
//! `pickle.loads`), Mitogen's `Kwargs(d)` 20,000 times on one 20,000-key dict (a Mitogen
//! parent took 80 s and 8 GB), a 20,000-key BUILD state given to 20,000 `OrderedDict`s. So
//! every copy is charged in two currencies:
//! - **bytes** the copy allocates in the reader after, to `max_copy_bytes_per_byte`: a text's
//!   or bytes' length, [`SEQ_ITEM_BYTES`] a list or tuple item, [`KEYED_ITEM_BYTES`] a dict pair
//!   or set item;
//! - **steps**, to the model of the reader's key work (`max_key_steps_per_byte`): one an item
//!   iterated, and for every key inserted into a new dict or set, its hash and comparisons as
//!   the model counts them (`keys/reader.rs`), since a copy inserts colliding keys again.
//!
//! The natives are charged by their own rule (`constructors.rs`); a record call and BUILD by
//! the [`Cost`] its policy rule gives (from the class's CPython source; the worst,
//! [`Cost::Walks`], when the policy does not say).

use std::collections::HashSet;

use super::keys::mix::MixState;
use super::machine::{internal, Machine};
use crate::error::Result;
use crate::limits::{LimitName, COPY_BYTES_FLOOR};
use crate::policy::Cost;
use crate::value::{NodeId, Value};

/// Bytes a list or tuple item costs the reader when copied: its pointer.
pub(super) const SEQ_ITEM_BYTES: u64 = 8;

/// Bytes a dict pair or set item costs the reader when copied or inserted: CPython's compact
/// dict entry (hash, key, value: 24 bytes) and its index slot; a set entry (hash, key: 16
/// bytes) at a load of at most 60%.
pub(super) const KEYED_ITEM_BYTES: u64 = 32;

/// What a charge adds up before it is made: bytes and steps.
#[derive(Default)]
struct Tally {
    bytes: u64,
    steps: u64,
}

impl Tally {
    fn add(&mut self, bytes: u64, steps: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.steps = self.steps.saturating_add(steps);
    }
}

impl<'a> Machine<'a, '_> {
    /// Charges `bytes` copied to `max_copy_bytes_per_byte`: the document's total may reach that
    /// many times the input's length, or [`COPY_BYTES_FLOOR`].
    pub(super) fn charge_copy(&mut self, bytes: u64) -> Result<()> {
        let total = self.copied.saturating_add(bytes);
        let input = self.arena.input.len() as u64;
        let allowed = self
            .limits
            .max_copy_bytes_per_byte
            .saturating_mul(input)
            .max(COPY_BYTES_FLOOR);
        if total > allowed {
            return Err(self.limit(LimitName::MaxCopyBytesPerByte, total.div_ceil(input.max(1))));
        }
        self.copied = total;
        Ok(())
    }

    /// The bytes [`Machine::charge_copy`] has room for.
    fn copy_room(&self) -> u64 {
        let input = self.arena.input.len() as u64;
        self.limits
            .max_copy_bytes_per_byte
            .saturating_mul(input)
            .max(COPY_BYTES_FLOOR)
            .saturating_sub(self.copied)
    }

    /// Charges a record call's arguments `argv` (with `pairs`: its rule takes items, the
    /// first argument's pairs are modelled as a new dict's keys when the cost is the default)
    /// as `cost` says.
    pub(super) fn charge_call(&mut self, cost: Cost, argv: &[NodeId], pairs: bool) -> Result<()> {
        if cost == Cost::Keeps {
            return Ok(());
        }
        self.open_keys();
        let r = self.cost_of(cost, argv, false).and_then(|t| {
            if pairs && cost == Cost::Walks {
                self.model_record_argument(argv)?;
            }
            Ok(t.bytes)
        });
        self.charge_tally(r)
    }

    /// Charges BUILD's `state` as `cost` says.
    pub(super) fn charge_build(&mut self, cost: Cost, state: NodeId) -> Result<()> {
        if cost == Cost::Keeps {
            return Ok(());
        }
        self.open_keys();
        let r = self.cost_of(cost, &[state], true).map(|t| t.bytes);
        self.charge_tally(r)
    }

    /// Closes the key work opened for a charge (`close_keys`), then charges its bytes.
    fn charge_tally(&mut self, bytes: Result<u64>) -> Result<()> {
        let (bytes, r) = match bytes {
            Ok(b) => (b, Ok(())),
            Err(e) => (0, Err(e)),
        };
        self.close_keys(r)?;
        self.charge_copy(bytes)
    }

    /// The bytes and steps of `cost` on `values` (a call's arguments, or BUILD's state when
    /// `build`); the steps and the keys inserted are counted by the model as they are met,
    /// the bytes returned to be charged.
    fn cost_of(&self, cost: Cost, values: &[NodeId], build: bool) -> Result<Tally> {
        let mut t = Tally::default();
        match cost {
            Cost::Keeps => {}
            Cost::Copies => {
                for &v in values {
                    self.copy_one_level(v, &mut t)?;
                    if let Value::Tuple(items) = self.get(v)? {
                        for &item in items {
                            self.copy_one_level(item, &mut t)?;
                        }
                    }
                }
            }
            Cost::InsertsItems => {
                if let Some(&first) = values.first() {
                    self.insert_items(first, false, &mut t)?;
                }
            }
            Cost::InsertsPairs => {
                if let Some(&first) = values.first() {
                    self.insert_items(first, true, &mut t)?;
                }
            }
            Cost::SetsAttributes => {
                let Some(&state) = values.first() else {
                    return Ok(t);
                };
                // `load_build`: a `(state, slotstate)` pair sets both dicts' keys; a dict sets
                // its own. A call given this cost treats its first argument the same way.
                let parts: Vec<NodeId> = match self.get(state)? {
                    Value::Tuple(&[a, b]) if build => vec![a, b],
                    _ => vec![state],
                };
                for part in parts {
                    if let Value::Dict(pairs) = self.get(part)? {
                        t.add(KEYED_ITEM_BYTES.saturating_mul(pairs.len() as u64), 0);
                        self.model_new_keys(pairs.iter().map(|&(k, _)| k))?;
                    }
                }
            }
            Cost::Walks => {
                for &v in values {
                    self.walk(v, &mut t)?;
                }
            }
        }
        Ok(t)
    }

    /// One value copied one level deep: a text's or bytes' length, a sequence's item slots, a
    /// dict's or set's entries (its keys inserted again into the copy).
    fn copy_one_level(&self, v: NodeId, t: &mut Tally) -> Result<()> {
        match self.get(v)? {
            Value::Str(s) => t.add(s.as_bytes().len() as u64, 1),
            Value::Bytes(b) => t.add(b.len() as u64, 1),
            Value::ByteArray(b) => t.add(b.len() as u64, 1),
            Value::List(items) | Value::Tuple(items) => {
                t.add(SEQ_ITEM_BYTES.saturating_mul(items.len() as u64), 0);
                self.model_items(items.len())?;
            }
            Value::Set(items) | Value::FrozenSet(items) => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(items.len() as u64), 0);
                self.model_new_keys(items.iter().copied())?;
            }
            Value::Dict(pairs) => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(pairs.len() as u64), 0);
                self.model_new_keys(pairs.iter().map(|&(k, _)| k))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The items of `it` (with `pairs`, the first item of each pair; a dict's keys either way)
    /// inserted as the keys of a new dict or set; a text or bytes iterates its characters or
    /// byte values, which are cheap keys.
    fn insert_items(&self, it: NodeId, pairs: bool, t: &mut Tally) -> Result<()> {
        match self.get(it)? {
            Value::List(items) | Value::Tuple(items) if pairs => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(items.len() as u64), 0);
                let keys = items.iter().filter_map(|&p| match self.get(p) {
                    Ok(Value::Tuple(&[k, _]) | Value::List(&[k, _])) => Some(k),
                    _ => None,
                });
                self.model_items(items.len())?;
                self.model_new_keys(keys)?;
            }
            Value::List(items)
            | Value::Tuple(items)
            | Value::Set(items)
            | Value::FrozenSet(items) => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(items.len() as u64), 0);
                self.model_new_keys(items.iter().copied())?;
            }
            Value::Dict(d) => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(d.len() as u64), 0);
                self.model_new_keys(d.iter().map(|&(k, _)| k))?;
            }
            Value::Str(s) => {
                let n = s.as_bytes().len();
                t.add(KEYED_ITEM_BYTES.saturating_mul(n as u64), 0);
                self.model_items(n)?;
            }
            Value::Bytes(b) => {
                t.add(KEYED_ITEM_BYTES.saturating_mul(b.len() as u64), 0);
                self.model_items(b.len())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// `keys` inserted into a new dict or set: one step each, and each through the model of
    /// the reader's key work as a key of a fresh container (each counted as one not there
    /// yet, as `model_record_argument` does); a text or bytes key costs its length there.
    fn model_new_keys(&self, keys: impl Iterator<Item = NodeId>) -> Result<()> {
        let ops = self.keys();
        let container = match self.reader_keys.try_borrow_mut() {
            Ok(mut m) => m.fresh_container(),
            Err(_) => return Err(self.err(internal())),
        };
        let mut n = 0usize;
        for k in keys {
            n += 1;
            self.model_key(&ops, container, k, None, None, None)?;
            self.model_record_text_key(k)?;
        }
        self.model_items(n)
    }

    /// Everything plain that `root` reaches, once each, as a deep copy walks it (not into
    /// record objects, whose calls were charged when they were made): texts and bytes their
    /// length, containers their items, every dict's and set's keys inserted again. The walk
    /// stops, refusing, as soon as its bytes pass the room `max_copy_bytes_per_byte` leaves
    /// (its steps are refused by the model as they are counted), so that its own work is
    /// bounded by what the limits allow, however often the memo hands `root` again.
    fn walk(&self, root: NodeId, t: &mut Tally) -> Result<()> {
        let room = self.copy_room();
        let mut seen: HashSet<NodeId, MixState> = HashSet::with_hasher(MixState::random());
        let mut todo = vec![root];
        while let Some(id) = todo.pop() {
            if !id.is_shared() && !seen.insert(id) {
                continue;
            }
            // Each node charged as one copied one level deep, then its children walked.
            self.copy_one_level(id, t)?;
            match self.get(id)? {
                Value::List(items)
                | Value::Tuple(items)
                | Value::Set(items)
                | Value::FrozenSet(items) => todo.extend_from_slice(items),
                Value::Dict(pairs) => {
                    for &(k, v) in pairs {
                        todo.push(k);
                        todo.push(v);
                    }
                }
                _ => {}
            }
            if t.bytes > room {
                let input = self.arena.input.len() as u64;
                return Err(self.limit(
                    LimitName::MaxCopyBytesPerByte,
                    self.copied.saturating_add(t.bytes).div_ceil(input.max(1)),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "copies_test.rs"]
mod tests;
