//! The fast loop ([`Machine::fast`]): the opcodes of most pickles, each taken only when every
//! check of the careful path (`step.rs`) would pass, making the same values, counts and charges.

use super::budget::{ITEM_BYTES, NODE_BYTES};
use super::machine::Machine;
use crate::error::Result;
use crate::opcode::Opcode;
use crate::reader::{binint_at, le_at, prefixed_at};
use crate::text;
use crate::value::{Node, NodeId, Word, ARENA_END};
use crate::vm::{Interpreter, StackOps};

impl<'a, 'p> Machine<'a, 'p> {
    /// Whether a value may be made: within `max_nodes` and, with its node and `extra` bytes,
    /// the allocation budget (what [`Machine::count_value`] would refuse).
    #[inline(always)]
    pub(super) fn value_room(&self, extra: u64) -> bool {
        self.created < self.limits.max_nodes
            && self.alloc.saturating_add(NODE_BYTES + extra) <= self.limits.max_alloc_bytes
    }

    /// Counts, charges and adds a node that [`Machine::value_room`] found room for, when the
    /// arena has room for it without growing; `None` (nothing done) when it has not.
    #[inline(always)]
    pub(super) fn node_in_room(&mut self, n: Node, extra: u64) -> Option<NodeId> {
        let len = self.arena.nodes.len();
        if len == self.arena.nodes.capacity() || len >= ARENA_END as usize {
            return None;
        }
        self.created += 1;
        self.alloc += NODE_BYTES + extra;
        self.arena.nodes.push(n);
        Some(NodeId(len as u32))
    }

    /// The memo index a MEMOIZE, BINPUT, LONG_BINPUT, BINGET or LONG_BINGET at `pos` names,
    /// and where the next opcode starts, when its argument is there before `end`.
    #[inline(always)]
    pub(super) fn memo_index_at(
        &self,
        input: &[u8],
        pos: usize,
        end: usize,
    ) -> Option<(u64, usize)> {
        const MEMOIZE: u8 = Opcode::Memoize as u8;
        const BINPUT: u8 = Opcode::Binput as u8;
        const BINGET: u8 = Opcode::Binget as u8;
        match *input.get(pos)? {
            MEMOIZE => Some((self.memo.count, pos + 1)),
            BINPUT | BINGET => Some((le_at::<1>(input, pos + 1, end)?, pos + 2)),
            _ => Some((le_at::<4>(input, pos + 1, end)?, pos + 5)),
        }
    }

    /// In [`Machine::fast`], right after it pushed a value, with the next opcode at `pos`: a
    /// MEMOIZE, BINPUT or LONG_BINPUT that follows it (picklers memoize every text, bytes and
    /// container), taken in place of the next dispatch when the memo has room without
    /// growing, as the memo arm takes it. Returns where the opcode after it starts, if it
    /// took one (which the caller counts, from `budget`).
    #[inline(always)]
    pub(super) fn memoize_next(
        &mut self,
        input: &[u8],
        pos: usize,
        end: usize,
        budget: u64,
    ) -> Option<usize> {
        const MEMOIZE: u8 = Opcode::Memoize as u8;
        const BINPUT: u8 = Opcode::Binput as u8;
        const LONG_BINPUT: u8 = Opcode::LongBinput as u8;
        if pos >= end
            || budget < 2
            || !matches!(input.get(pos), Some(&(MEMOIZE | BINPUT | LONG_BINPUT)))
        {
            return None;
        }
        let (index, next) = self.memo_index_at(input, pos, end)?;
        let &top = self.stack.last()?;
        let new_allowed = self.memo.count < self.limits.max_memo_entries;
        if !self.memo.put_in_place(index, top, new_allowed) {
            return None;
        }
        Some(next)
    }

    /// In [`Machine::fast`], the SETITEMS (`dict`) or ADDITEMS at `pos`, when
    /// [`Machine::fill_fast`] takes its group and the careful path's arm would have reached
    /// it (a mark, the target above the fence, for SETITEMS an even count of items): whether
    /// it was taken (the mark popped, the group in the container; an error of the insertion
    /// is reported at `pos`). `false` leaves the opcode, nothing done, to the careful arm,
    /// which then takes it or reports what is wrong with it.
    #[inline(always)]
    pub(super) fn fill_group(&mut self, pos: usize, dict: bool) -> Result<bool> {
        let Some((start, fence)) = self.group_bounds() else {
            return Ok(false);
        };
        if start <= fence || (dict && !(self.stack.len() - start).is_multiple_of(2)) {
            return Ok(false);
        }
        let Some(&target) = start.checked_sub(1).and_then(|i| self.stack.get(i)) else {
            return Ok(false);
        };
        self.r.op_pos = pos;
        self.r.op = if dict {
            Opcode::Setitems.byte()
        } else {
            Opcode::Additems.byte()
        };
        self.r.pos = pos + 1;
        self.touch(target);
        let filled = if dict {
            self.fill_distinct::<true>(target, start)
                .or_else(|| self.fill_fast::<true>(target, start))
        } else {
            self.fill_distinct::<false>(target, start)
                .or_else(|| self.fill_fast::<false>(target, start))
        };
        match filled {
            None => Ok(false),
            Some(done) => {
                // Popped once the group is in (a refusal leaves it for `Machine::rescan`).
                done?;
                self.marks.pop();
                Ok(true)
            }
        }
    }

    /// In [`Machine::fast`], TUPLE1, TUPLE2 or TUPLE3 (`n` items) when every check of the
    /// careful path's arm would pass and the pools have room without growing: the tuple is
    /// made from the top `n` items as the interpreter's TUPLE arm makes it ([`Machine::new_seq`]) (same node, items,
    /// counts, charges and height) and pushed. `false` leaves the opcode, nothing done, to the
    /// careful arm.
    #[inline(always)]
    pub(super) fn tuple_in_room(&mut self, n: usize) -> bool {
        let len = self.stack.len();
        let extra = n as u64 * ITEM_BYTES;
        let start = self.arena.items.len();
        let id = self.arena.nodes.len();
        if len < self.fence() + n
            || n as u64 > self.limits.max_container_items
            || !self.value_room(extra)
            || self.arena.items.capacity() - start < n
            || start + n > u32::MAX as usize
            || id == self.arena.nodes.capacity()
            || id >= ARENA_END as usize
        {
            return false;
        }
        let Some(items) = self.stack.get(len - n..) else {
            return false;
        };
        self.arena.items.extend_from_slice(items);
        let id = NodeId(id as u32);
        self.containers += 1;
        self.heights.made_with(id, items);
        self.created += 1;
        self.alloc += NODE_BYTES + extra;
        self.arena.nodes.push(Node::Tuple {
            start: start as u32,
            len: n as u32,
        });
        self.stack.truncate(len - n);
        self.stack.push(id);
        true
    }

    /// In [`Machine::fast`], APPENDS (`group`) or APPEND into a list whose items are the last
    /// of the items pool (a list being filled, as picklers fill one) when every check of the
    /// careful path's arm and [`Machine::extend`] would pass and the pool has room without
    /// growing: the items go to the pool, as `extend` puts them, with the same charges and
    /// height. `false` leaves the opcode, nothing done, to the careful arm.
    #[inline(always)]
    pub(super) fn append_in_room(&mut self, group: bool) -> bool {
        let len = self.stack.len();
        // Where the items start and the fence below them, as `group` and `top_group` see it.
        let (start, fence) = if group {
            let Some(bounds) = self.group_bounds() else {
                return false;
            };
            bounds
        } else {
            (len.saturating_sub(1), self.fence())
        };
        let n = len - start;
        if start <= fence || (!group && n != 1) || !self.sealed.is_empty() {
            return false;
        }
        let Some(&target) = start.checked_sub(1).and_then(|i| self.stack.get(i)) else {
            return false;
        };
        let pool_len = self.arena.items.len();
        let (s, l) = match self.arena.nodes.get(target.index()) {
            Some(&Node::List { len: 0, .. }) => (pool_len, 0),
            Some(&Node::List { start: s, len: l }) if s as usize + l as usize == pool_len => {
                (s as usize, l as usize)
            }
            _ => return false,
        };
        let extra = n as u64 * ITEM_BYTES;
        if (l + n) as u64 > self.limits.max_container_items
            || self.alloc.saturating_add(extra) > self.limits.max_alloc_bytes
            || self.arena.items.capacity() - pool_len < n
            || s + l + n > u32::MAX as usize
        {
            return false;
        }
        self.touch(target);
        let Some(items) = self.stack.get(start..) else {
            return false;
        };
        self.arena.items.extend_from_slice(items);
        if let Some(node) = self.arena.nodes.get_mut(target.index()) {
            *node = Node::List {
                start: s as u32,
                len: (l + n) as u32,
            };
        }
        self.alloc += extra;
        self.heights.filled(target, items);
        self.stack.truncate(start);
        if group {
            self.marks.pop();
        }
        true
    }

    /// In [`Machine::fast`], a MARK followed at once by APPENDS (an empty group, `(e`) into a
    /// list whose items are the last of the pool (or none): both taken when every check of
    /// the careful path's arms would pass (room for the MARK, a target above the fence, no
    /// sealed list), with the same effects (the target touched, the heights told of a fill
    /// with no child); `false` leaves both opcodes, nothing done, to the loop's own arms.
    #[inline(always)]
    pub(super) fn empty_appends_in_room(&mut self) -> bool {
        let len = self.stack.len();
        if !self.stack_room() || len <= self.fence() || !self.sealed.is_empty() {
            return false;
        }
        let Some(&target) = self.stack.last() else {
            return false;
        };
        let pool_len = self.arena.items.len();
        match self.arena.nodes.get(target.index()) {
            Some(&Node::List { len: 0, .. }) => {}
            Some(&Node::List { start, len }) if start as usize + len as usize == pool_len => {}
            _ => return false,
        }
        self.touch(target);
        self.heights.filled(target, &[]);
        true
    }

    /// Runs the opcodes of most pickles, from the reader's position, with the cursor in a
    /// local and each opcode's checks folded into one test of room: MARK, the memo opcodes,
    /// PROTO, POP_MARK, POP, DUP, an empty FRAME, short texts, bytes, floats and singletons, empty containers, ints (through
    /// [`Machine::int_run`]), SETITEMS and ADDITEMS of a few plain keys into an empty dict or
    /// set (through [`Machine::fill_group`]), APPENDS and APPEND to a list being filled
    /// ([`Machine::append_in_room`]), TUPLE1 to TUPLE3 ([`Machine::tuple_in_room`]), and,
    /// through [`Machine::step`], the other opcodes that fill containers. It takes an opcode only when it can see that every check of the careful
    /// path would pass (the opcode fits before the end of the frame or input; the stack,
    /// memo, node and allocation limits have room; the text is valid), and makes the same
    /// values, counts and charges; anything else (an error to report, a limit, a FRAME with bytes, the
    /// end of a frame, an opcode it does not take) it leaves unread for [`Machine::run`]'s
    /// careful path. Opcodes are counted in a local, and it stops before `max_opcodes` and
    /// before the deadline's next look. Returns the pickle's value at STOP.
    #[inline(never)]
    pub(super) fn fast(&mut self) -> Result<Option<NodeId>> {
        const MARK: u8 = Opcode::Mark as u8;
        const POP_MARK: u8 = Opcode::PopMark as u8;
        const POP: u8 = Opcode::Pop as u8;
        const DUP: u8 = Opcode::Dup as u8;
        const FRAME: u8 = Opcode::Frame as u8;
        const PROTO: u8 = Opcode::Proto as u8;
        const MEMOIZE: u8 = Opcode::Memoize as u8;
        const BINGET: u8 = Opcode::Binget as u8;
        const BINPUT: u8 = Opcode::Binput as u8;
        const LONG_BINGET: u8 = Opcode::LongBinget as u8;
        const LONG_BINPUT: u8 = Opcode::LongBinput as u8;
        const REDUCE: u8 = Opcode::Reduce as u8;
        const SHORT_BINUNICODE: u8 = Opcode::ShortBinunicode as u8;
        const BINUNICODE: u8 = Opcode::Binunicode as u8;
        const SHORT_BINBYTES: u8 = Opcode::ShortBinbytes as u8;
        const BINFLOAT: u8 = Opcode::Binfloat as u8;
        const NONE: u8 = Opcode::None as u8;
        const NEWTRUE: u8 = Opcode::Newtrue as u8;
        const NEWFALSE: u8 = Opcode::Newfalse as u8;
        const EMPTY_DICT: u8 = Opcode::EmptyDict as u8;
        const EMPTY_LIST: u8 = Opcode::EmptyList as u8;
        const EMPTY_SET: u8 = Opcode::EmptySet as u8;
        const EMPTY_TUPLE: u8 = Opcode::EmptyTuple as u8;
        const BININT: u8 = Opcode::Binint as u8;
        const BININT1: u8 = Opcode::Binint1 as u8;
        const BININT2: u8 = Opcode::Binint2 as u8;
        const LONG1: u8 = Opcode::Long1 as u8;
        const SETITEMS: u8 = Opcode::Setitems as u8;
        const SETITEM: u8 = Opcode::Setitem as u8;
        const ADDITEMS: u8 = Opcode::Additems as u8;
        const APPENDS: u8 = Opcode::Appends as u8;
        const APPEND: u8 = Opcode::Append as u8;
        const TUPLE: u8 = Opcode::Tuple as u8;
        const TUPLE1: u8 = Opcode::Tuple1 as u8;
        const TUPLE2: u8 = Opcode::Tuple2 as u8;
        const TUPLE3: u8 = Opcode::Tuple3 as u8;
        const STOP: u8 = Opcode::Stop as u8;

        let input: &'a [u8] = self.r.input;
        // The end of the current frame (or of the input): an opcode that would read past it
        // is left to the careful path, which leaves the frame or reports the straddle.
        let end = self.r.read_end().min(input.len());
        let mut pos = self.r.pos;
        // Opcodes that may run before `max_opcodes`, and before the deadline's next look
        // (the careful path looks when the count reaches the mark, before that opcode).
        let mut budget = self
            .limits
            .max_opcodes
            .saturating_sub(self.opcodes)
            .min(self.clock.room(self.opcodes).saturating_sub(1));
        // The opcodes are counted by the budget alone: `top - budget` have run, which
        // `self.opcodes` is set to where it is read (the int runs) and on the way out.
        let top = self.opcodes + budget;
        while budget > 0 {
            let Some(&op) = input.get(pos).filter(|_| pos < end) else {
                break;
            };
            match op {
                MARK if self.stack_room() => {
                    // MARK and at once POP_MARK or an empty APPENDS (floods of them cost
                    // a dispatch each otherwise): one step of two opcodes.
                    let next = input.get(pos + 1).filter(|_| pos + 1 < end && budget > 1);
                    if next == Some(&POP_MARK)
                        || (next == Some(&APPENDS) && self.empty_appends_in_room())
                    {
                        pos += 2;
                        budget -= 1;
                    } else {
                        self.mark()?;
                        pos += 1;
                    }
                }
                PROTO => {
                    // A protocol CPython reads (`UnsupportedProtocol` otherwise, from the
                    // careful path).
                    match input.get(pos + 1) {
                        Some(&p) if p <= 5 && pos + 2 <= end => {
                            self.proto = p;
                            self.r.proto = p;
                            pos += 2;
                        }
                        _ => break,
                    }
                }
                FRAME if self.r.frame_end.is_none() => {
                    // An empty frame (`Reader::frame` with a length of 0), used up where it
                    // starts: floods of them cost a trip through the careful path each
                    // otherwise. A frame with bytes is the careful path's (the loop's end
                    // stays fixed, which keeps its registers for the common opcodes).
                    if le_at::<8>(input, pos + 1, end) != Some(0) {
                        break;
                    }
                    pos += 9;
                }
                DUP if self.stack_room() && self.stack.len() > self.fence() => {
                    // `top()`: an item above the innermost MARK. DUP and at once POP change
                    // nothing: one step of two opcodes.
                    if input.get(pos + 1) == Some(&POP) && pos + 1 < end && budget > 1 {
                        pos += 2;
                        budget -= 1;
                    } else {
                        let Some(&top) = self.stack.last() else {
                            break;
                        };
                        self.stack.push(top);
                        pos += 1;
                    }
                }
                POP => {
                    // A MARK on top is popped (`load_pop`); else an item above the fence.
                    let len = self.stack.len();
                    if self.marks.last() == Some(&len) {
                        self.marks.pop();
                    } else if len > self.fence() {
                        self.stack.pop();
                    } else {
                        break;
                    }
                    pos += 1;
                }
                POP_MARK => {
                    let Some(&mark) = self.marks.last() else {
                        break;
                    };
                    let start = mark.min(self.stack.len());
                    self.marks.pop();
                    self.stack.truncate(start);
                    pos += 1;
                }
                MEMOIZE | BINPUT | LONG_BINPUT => {
                    let Some((index, next)) = self.memo_index_at(input, pos, end) else {
                        break;
                    };
                    let Ok(top) = self.top() else {
                        break;
                    };
                    let new_allowed = self.memo.count < self.limits.max_memo_entries;
                    if !self.memo.put_in_place(index, top, new_allowed) {
                        break;
                    }
                    pos = next;
                }
                BINGET | LONG_BINGET => {
                    let Some((index, next)) = self.memo_index_at(input, pos, end) else {
                        break;
                    };
                    match self.memo.get(index) {
                        Some(id) if self.stack_room() => {
                            self.stack.push(id);
                            pos = next;
                        }
                        _ => break,
                    }
                }
                SHORT_BINUNICODE | BINUNICODE | SHORT_BINBYTES => {
                    let arg = if op == BINUNICODE {
                        prefixed_at::<4>(input, pos + 1, end)
                    } else {
                        prefixed_at::<1>(input, pos + 1, end)
                    };
                    let Some((text, next)) = arg else {
                        break;
                    };
                    let (start, len) = (next - text.len(), text.len());
                    if len == 0 {
                        // The one empty str or bytes of every document (`''` and `b''` are
                        // single objects in CPython): no node.
                        if !(self.value_room(0) && self.stack_room()) {
                            break;
                        }
                        self.created += 1;
                        self.alloc += NODE_BYTES;
                        self.stack.push(if op == SHORT_BINBYTES {
                            NodeId::EMPTY_BYTES
                        } else {
                            NodeId::EMPTY_STR
                        });
                        pos = next;
                        if let Some(next) = self.memoize_next(input, pos, end, budget) {
                            pos = next;
                            budget -= 1;
                        }
                        budget -= 1;
                        continue;
                    }
                    let (Ok(start32), Ok(len32)) = (u32::try_from(start), u32::try_from(len))
                    else {
                        break;
                    };
                    let n = if op == SHORT_BINBYTES {
                        Node::Bytes {
                            start: start32,
                            len: len32,
                        }
                    } else if len < 64 && short_ascii(text) {
                        Node::Str {
                            start: start32,
                            len: len32,
                        }
                    } else {
                        match text::decode_utf8_surrogatepass(text) {
                            Ok(false) => Node::Str {
                                start: start32,
                                len: len32,
                            },
                            Ok(true) => Node::Surrogates {
                                start: start32,
                                len: len32,
                            },
                            Err(()) => break,
                        }
                    };
                    if !(self.value_room(0) && self.stack_room()) {
                        break;
                    }
                    let Some(id) = self.node_in_room(n, 0) else {
                        break;
                    };
                    self.stack.push(id);
                    pos = next;
                    if let Some(next) = self.memoize_next(input, pos, end, budget) {
                        pos = next;
                        budget -= 1;
                    }
                }
                BINFLOAT => {
                    let Some(b) = input
                        .get(pos + 1..pos + 9)
                        .filter(|_| pos + 9 <= end)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    else {
                        break;
                    };
                    if !(self.value_room(0) && self.stack_room()) {
                        break;
                    }
                    let Some(id) =
                        self.node_in_room(Node::Float(Word::float(f64::from_be_bytes(b))), 0)
                    else {
                        break;
                    };
                    self.stack.push(id);
                    pos += 9;
                }
                NONE | NEWTRUE | NEWFALSE if self.value_room(0) && self.stack_room() => {
                    self.created += 1;
                    self.alloc += NODE_BYTES;
                    self.stack.push(match op {
                        NONE => NodeId::NONE,
                        _ => NodeId::bool(op == NEWTRUE),
                    });
                    pos += 1;
                }
                EMPTY_DICT | EMPTY_LIST | EMPTY_SET | EMPTY_TUPLE
                    if self.value_room(0) && self.stack_room() =>
                {
                    let n = match op {
                        EMPTY_DICT => Node::Dict { start: 0, len: 0 },
                        EMPTY_LIST => Node::List { start: 0, len: 0 },
                        EMPTY_SET => Node::Set { start: 0, len: 0 },
                        _ => Node::Tuple { start: 0, len: 0 },
                    };
                    let Some(id) = self.node_in_room(n, 0) else {
                        break;
                    };
                    self.containers += 1;
                    self.heights.made_empty(id);
                    self.stack.push(id);
                    pos += 1;
                    if let Some(next) = self.memoize_next(input, pos, end, budget) {
                        pos = next;
                        budget -= 1;
                        // A container is most often filled next: MARK.
                        if pos < end
                            && budget > 1
                            && input.get(pos) == Some(&MARK)
                            && self.stack_room()
                        {
                            self.mark()?;
                            pos += 1;
                            budget -= 1;
                        }
                    }
                }
                BININT | BININT1 | BININT2 => {
                    // One int, held in its id, or a node; the loop takes the next. Runs of
                    // them are not sent to `int_run`, as a LONG1 is below: in mixed data most
                    // runs are short, and a run's setup costs more than this arm.
                    let size = match op {
                        BININT1 => 1,
                        BININT2 => 2,
                        _ => 4,
                    };
                    if pos + 1 + size > end || !(self.value_room(0) && self.stack_room()) {
                        break;
                    }
                    let x = binint_at(input, pos + 1, size as u8);
                    let id = match NodeId::int(x) {
                        Some(id) => {
                            self.created += 1;
                            self.alloc += NODE_BYTES;
                            id
                        }
                        None => match self.node_in_room(Node::Int(Word::int(x)), 0) {
                            Some(id) => id,
                            None => break,
                        },
                    };
                    self.stack.push(id);
                    pos += 1 + size;
                }
                LONG1 => {
                    // A run of ints from a LONG1, read with its own checks; an int it does not
                    // take (one that would pass a limit, a LONG1 past 8 bytes) is the careful
                    // path's.
                    // At most `budget` of them (this one included), so that the budget's
                    // count stays exact: the deadline is looked at when it is spent.
                    self.opcodes = top - budget;
                    let before = self.opcodes;
                    self.r.pos = pos;
                    self.int_run(budget);
                    let ran = self.opcodes - before;
                    if ran == 0 {
                        break;
                    }
                    pos = self.r.pos;
                    // `ran` <= `budget`: the last is counted below.
                    budget -= ran - 1;
                }
                SETITEMS | ADDITEMS
                    if {
                        self.opcodes = top - budget + 1;
                        self.fill_group(pos, op == SETITEMS)?
                    } =>
                {
                    pos += 1;
                }
                APPENDS | APPEND if self.append_in_room(op == APPENDS) => {
                    pos += 1;
                }
                TUPLE1 | TUPLE2 | TUPLE3 if self.tuple_in_room(usize::from(op - TUPLE1) + 1) => {
                    pos += 1;
                    if let Some(next) = self.memoize_next(input, pos, end, budget) {
                        pos = next;
                        budget -= 1;
                    }
                }
                SETITEMS | SETITEM | ADDITEMS | APPENDS | APPEND | TUPLE | TUPLE1 | TUPLE2
                | TUPLE3 | REDUCE => {
                    // The careful path's own code for these, called as it calls it.
                    let Some(o) = Opcode::from_byte(op) else {
                        break;
                    };
                    self.r.op_pos = pos;
                    self.r.op = op;
                    self.r.pos = pos + 1;
                    self.opcodes = top - budget + 1;
                    self.step(o)?;
                    pos = self.r.pos;
                }
                STOP => {
                    self.r.op_pos = pos;
                    self.r.op = op;
                    self.r.pos = pos + 1;
                    self.opcodes = top - budget + 1;
                    return self.stop().map(Some);
                }
                _ => break,
            }
            budget -= 1;
        }
        self.opcodes = top - budget;
        self.r.pos = pos;
        Ok(None)
    }
}

/// Whether a text shorter than 64 bytes is ASCII (`<[u8]>::is_ascii`, which reads the bytes
/// past the last whole word one at a time): read as words, the last word (or half-word)
/// overlapping the one before, every byte of the text read and none past it.
#[inline(always)]
pub(super) fn short_ascii(text: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    if let Some(last) = text.last_chunk::<8>() {
        let (words, _) = text.as_chunks::<8>();
        let all = words
            .iter()
            .fold(u64::from_le_bytes(*last), |a, w| a | u64::from_le_bytes(*w));
        return all & HIGH == 0;
    }
    match (text.first_chunk::<4>(), text.last_chunk::<4>()) {
        (Some(a), Some(b)) => (u32::from_le_bytes(*a) | u32::from_le_bytes(*b)) & HIGH as u32 == 0,
        _ => text.iter().fold(0, |a, &b| a | b) < 0x80,
    }
}
