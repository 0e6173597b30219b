//! The build's side of the one interpreter (`src/vm/`): [`Machine`] as a [`Vm`] whose values
//! are arena nodes, and the depth check at STOP.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem;

use num_bigint::BigInt;

use super::depth::walk_depth;
use super::ints::long_le;
use super::keys::KeyIndex;
use super::machine::Machine;
use crate::clock::Clock;
use crate::error::{ErrorKind, Result};
use crate::limits::{LimitName, Limits};
use crate::memo::Memo;
use crate::policy::{Policy, TextEncoding};
use crate::reader::Reader;
use crate::text::{self, IntTextOf, ParsedInt, Text};
use crate::value::{CallKind, Fat, Node, NodeId, Value, Word};
use crate::vm::{Empty, GlobalName, TextAt, Vm};

impl<'a, 'p> Machine<'a, 'p> {
    /// Enforces `max_nesting_depth` on the values of `roots` (src/limits.rs): the longest
    /// path from a root, a value shared through the memo counted at each place it is reached,
    /// an edge that closes a cycle a leaf ([`walk_depth`]).
    pub(super) fn check_depth(&self, roots: &[NodeId]) -> Result<()> {
        let max = self.limits.max_nesting_depth;
        // The root itself is depth 1 (src/limits.rs), so a maximum of 0 refuses any value.
        if max == 0 {
            return Err(self.limit(LimitName::MaxNestingDepth, 1));
        }
        // A path never holds a container twice (an edge back to one on it is a leaf), so it
        // holds at most every container, plus one leaf (which may be a container met again:
        // `l = [l]` is 2 deep): the depth is at most `containers + 1`. A flat list of
        // millions of ints is not walked.
        if self.containers.saturating_add(1) <= max {
            return Ok(());
        }
        // The heights of the containers are the longest paths from them (src/build/depth.rs).
        if self.heights.bound(roots).is_some_and(|h| h <= max) {
            return Ok(());
        }
        walk_depth(&self.arena, roots, max)
            .map_err(|depth| self.limit(LimitName::MaxNestingDepth, depth))
    }

    /// A parsed INT or LONG: held in its id when it fits, else a big int.
    fn int_node(&mut self, p: ParsedInt, extra: u64) -> Result<NodeId> {
        match p {
            ParsedInt::Small(v) => self.int(v, extra),
            ParsedInt::Big(b) => self.fat(Fat::BigInt(b), extra),
        }
    }

    /// The `surrogatepass` UTF-8 of the text of node `id` when it is a str, borrowed for as
    /// long as the input lives when it is in the input (else a copy).
    pub(super) fn str_text(&self, id: NodeId) -> Result<Option<Text<'a>>> {
        let input: &'a [u8] = self.r.input;
        let of_input = |start: u32, len: u32| {
            let start = start as usize;
            Cow::Borrowed(input.get(start..start + len as usize).unwrap_or_default())
        };
        Ok(match self.arena.node(id) {
            Some(Node::Str { start, len }) => Some(Text {
                bytes: of_input(start, len),
                surrogates: false,
            }),
            Some(Node::Surrogates { start, len }) => Some(Text {
                bytes: of_input(start, len),
                surrogates: true,
            }),
            _ => match self.get(id)? {
                Value::Str(s) => Some(Text {
                    bytes: Cow::Owned(s.as_bytes().to_vec()),
                    surrogates: s.has_surrogates(),
                }),
                _ => None,
            },
        })
    }
}

/// The bytes a value holds beyond its node when they are not in the input (a `Cow` is taken:
/// whether it is borrowed is what is asked).
#[allow(clippy::ptr_arg)]
fn owned_len(b: &Cow<'_, [u8]>) -> u64 {
    match b {
        Cow::Owned(o) => o.len() as u64,
        Cow::Borrowed(_) => 0,
    }
}

impl<'a, 'p> Vm<'a> for Machine<'a, 'p> {
    type V = NodeId;

    #[inline(always)]
    fn reader(&self) -> &Reader<'a> {
        &self.r
    }
    #[inline(always)]
    fn reader_mut(&mut self) -> &mut Reader<'a> {
        &mut self.r
    }
    #[inline(always)]
    fn stack(&self) -> &Vec<NodeId> {
        &self.stack
    }
    #[inline(always)]
    fn stack_mut(&mut self) -> &mut Vec<NodeId> {
        &mut self.stack
    }
    #[inline(always)]
    fn marks(&self) -> &Vec<usize> {
        &self.marks
    }
    #[inline(always)]
    fn marks_mut(&mut self) -> &mut Vec<usize> {
        &mut self.marks
    }
    #[inline(always)]
    fn memo(&self) -> &Memo<NodeId> {
        &self.memo
    }
    #[inline(always)]
    fn memo_mut(&mut self) -> &mut Memo<NodeId> {
        &mut self.memo
    }
    #[inline(always)]
    fn limits(&self) -> &Limits {
        &self.limits
    }
    #[inline(always)]
    fn policy(&self) -> &Policy {
        self.policy
    }
    #[inline(always)]
    fn opcodes_mut(&mut self) -> &mut u64 {
        &mut self.opcodes
    }
    #[inline(always)]
    fn clock_mut(&mut self) -> &mut Clock {
        &mut self.clock
    }

    #[inline(always)]
    fn after_int(&mut self) {
        // Up to the deadline's next look, which the opcode after the run then makes.
        self.int_run(self.clock.room(self.opcodes));
    }

    #[inline(always)]
    fn fast(&mut self) -> Result<Option<NodeId>> {
        if self.careful {
            return Ok(None);
        }
        Machine::fast(self)
    }

    fn root(&mut self, root: NodeId) -> Result<NodeId> {
        // In a stream, a later pickle can reach into this one's values through the memo (and
        // append to them): the writer sees the final graph, so the check waits for it.
        if !self.stream {
            self.check_depth(&[root])?;
        }
        Ok(root)
    }

    fn protocol(&mut self, p: u8) {
        self.proto = p;
    }

    fn charge_memo(&mut self, grown: u64) -> Result<()> {
        self.charge(grown)
    }

    fn none(&mut self) -> Result<NodeId> {
        self.shared(NodeId::NONE, 0)
    }

    fn bool(&mut self, b: bool) -> Result<NodeId> {
        self.shared(NodeId::bool(b), 0)
    }

    #[inline(always)]
    fn int(&mut self, x: i64) -> Result<NodeId> {
        Machine::int(self, x, 0)
    }

    fn int_text(&mut self, digits: &[u8], of: IntTextOf) -> Result<NodeId> {
        let p = text::parse_decimal_int(digits, self.limits.max_long_text_digits, of)
            .map_err(|e| self.number_err(e))?;
        let extra = match (&p, of) {
            (ParsedInt::Big(b), IntTextOf::Long) => b.bits() / 8,
            _ => 0,
        };
        self.int_node(p, extra)
    }

    fn long_le(&mut self, bytes: &'a [u8]) -> Result<NodeId> {
        let n = bytes.len() as u64;
        if bytes.len() <= 8 {
            Machine::int(self, long_le(bytes), n)
        } else if let Some(x) = long_le_i128(bytes) {
            // Up to 16 bytes (the commonest big ints) through an i128: the digits made at
            // once, without `from_signed_bytes_le`'s copy and normalising passes.
            match i64::try_from(x) {
                Ok(v) => Machine::int(self, v, n),
                Err(_) => self.fat(Fat::BigInt(BigInt::from(x)), n),
            }
        } else {
            let b = BigInt::from_signed_bytes_le(bytes);
            match i64::try_from(&b) {
                Ok(v) => Machine::int(self, v, n),
                Err(_) => self.fat(Fat::BigInt(b), n),
            }
        }
    }

    fn float(&mut self, x: f64) -> Result<NodeId> {
        self.node(Node::Float(Word::float(x)), 0)
    }

    fn str(&mut self, text: Text<'a>, _at: TextAt) -> Result<NodeId> {
        let extra = owned_len(&text.bytes);
        self.str_node(text, extra)
    }

    fn python2_str(
        &mut self,
        raw: Cow<'a, [u8]>,
        enc: TextEncoding,
        _at: TextAt,
    ) -> Result<NodeId> {
        // Valid in `enc` (the interpreter checked): Latin-1 maps each byte to its code point.
        let bytes = if enc == TextEncoding::Latin1 && !raw.is_ascii() {
            Cow::Owned(
                raw.iter()
                    .map(|&b| char::from(b))
                    .collect::<String>()
                    .into_bytes(),
            )
        } else {
            raw
        };
        let extra = owned_len(&bytes);
        self.str_node(
            Text {
                bytes,
                surrogates: false,
            },
            extra,
        )
    }

    fn bytes(&mut self, b: Cow<'a, [u8]>) -> Result<NodeId> {
        let extra = owned_len(&b);
        self.bytes_node(b, extra)
    }

    fn bytearray(&mut self, b: &'a [u8]) -> Result<NodeId> {
        self.fat_fits(b.len() as u64)?;
        self.fat(Fat::ByteArray(b.to_vec()), b.len() as u64)
    }

    fn next_buffer(&mut self) -> Result<NodeId> {
        let buf = self
            .buffers
            .as_ref()
            .and_then(|b| b.front().copied())
            .ok_or_else(|| self.err(ErrorKind::BuffersNotSupplied))?;
        let id = self.bytes_node(Cow::Borrowed(buf), 0)?;
        // Taken once its node is made (a refusal leaves it for `Machine::rescan`).
        self.buffers.as_mut().and_then(VecDeque::pop_front);
        Ok(id)
    }

    fn is_buffer(&self, v: NodeId) -> Result<bool> {
        Ok(matches!(
            self.get(v)?,
            Value::Bytes(_) | Value::ByteArray(_)
        ))
    }

    fn empty(&mut self, kind: Empty) -> Result<NodeId> {
        self.new_empty(match kind {
            Empty::List => Node::List { start: 0, len: 0 },
            Empty::Tuple => Node::Tuple { start: 0, len: 0 },
            Empty::Dict => Node::Dict { start: 0, len: 0 },
            Empty::Set => Node::Set { start: 0, len: 0 },
        })
    }

    fn seq(&mut self, start: usize, tuple: bool) -> Result<NodeId> {
        let stack = mem::take(&mut self.stack);
        let r = self.new_seq(stack.get(start..).unwrap_or_default(), tuple);
        self.stack = stack;
        r
    }

    fn dict(&mut self, start: usize) -> Result<NodeId> {
        let mut d = mem::take(&mut self.new_pairs);
        d.clear();
        let mut index = KeyIndex::default();
        let stack = mem::take(&mut self.stack);
        let container = self.reader_keys.get_mut().fresh_container();
        let r = self.dict_insert(
            container,
            &mut d,
            &mut index,
            stack.get(start..).unwrap_or_default(),
        );
        self.stack = stack;
        let placed = r.and_then(|()| self.pool_pairs(&d));
        self.new_pairs = d;
        let (pool_start, len) = placed?;
        self.stack.truncate(start);
        let id = self.node(
            Node::Dict {
                start: pool_start,
                len,
            },
            0,
        )?;
        self.keep_index(id, index);
        Ok(id)
    }

    fn frozenset(&mut self, start: usize) -> Result<NodeId> {
        let stack = mem::take(&mut self.stack);
        let r = self.new_set(stack.get(start..).unwrap_or_default(), true);
        self.stack = stack;
        let id = r?;
        self.stack.truncate(start);
        Ok(id)
    }

    fn append(&mut self, target: NodeId, start: usize) -> Result<()> {
        self.touch(target);
        self.extend(target, start)
    }

    fn set_items(&mut self, target: NodeId, start: usize) -> Result<()> {
        self.touch(target);
        self.fill_items(target, start)
    }

    fn add_items(&mut self, target: NodeId, start: usize) -> Result<()> {
        self.touch(target);
        if let Some(done) = self.fill_fast::<false>(target, start) {
            return done;
        }
        if !matches!(self.get(target)?, Value::Set(_)) {
            return Err(self.err(ErrorKind::TypeMismatch("ADDITEMS target is not a set")));
        }
        let stack = mem::take(&mut self.stack);
        let r = self.set_add(target, stack.get(start..).unwrap_or_default());
        self.stack = stack;
        r?;
        self.heights
            .filled(target, self.stack.get(start..).unwrap_or_default());
        self.stack.truncate(start);
        Ok(())
    }

    fn persistent_id(&mut self, pid: NodeId) -> Result<NodeId> {
        self.persistent_id_node(pid)
    }

    fn set_state(&mut self, target: NodeId, state: NodeId) -> Result<()> {
        self.touch(target);
        self.build_state(target, state)
    }

    fn call(
        &mut self,
        callable: NodeId,
        args: NodeId,
        kwargs: Option<NodeId>,
        kind: CallKind,
    ) -> Result<NodeId> {
        Machine::call(self, callable, args, kwargs, kind)
    }

    fn global(&mut self, module: Cow<'a, str>, name: Cow<'a, str>, rule: usize) -> Result<NodeId> {
        self.global_node(module, name, rule)
    }

    fn global_name(&self, v: NodeId) -> Result<GlobalName<'a>> {
        let Some(t) = self.str_text(v)? else {
            return Ok(GlobalName::NotStr);
        };
        let text = if t.surrogates {
            None
        } else {
            match &t.bytes {
                Cow::Borrowed(b) => std::str::from_utf8(b).ok().map(Cow::Borrowed),
                Cow::Owned(b) => String::from_utf8(b.clone()).ok().map(Cow::Owned),
            }
        };
        Ok(match text {
            Some(t) => GlobalName::Text(t),
            None => GlobalName::Unnamed(crate::error::escape_bytes_for_display(&t.bytes)),
        })
    }
}

/// A LONG1/LONG4 payload of 9 to 16 bytes as an i128 (two's complement, little-endian, as
/// CPython's `decode_long` reads it); `None` for a longer one.
fn long_le_i128(bytes: &[u8]) -> Option<i128> {
    if bytes.len() > 16 {
        return None;
    }
    let negative = bytes.last().is_some_and(|&b| b & 0x80 != 0);
    let mut word = [if negative { 0xff } else { 0 }; 16];
    for (w, &b) in word.iter_mut().zip(bytes) {
        *w = b;
    }
    Some(i128::from_le_bytes(word))
}

#[cfg(test)]
#[path = "step_test.rs"]
mod tests;
