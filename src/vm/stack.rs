//! The stack and its MARKs ([`StackOps`]): every push checks `max_stack_len` (items and MARKs
//! together), every pop the fence of the innermost MARK, as CPython's unpickler does (a pop
//! below a MARK is a stack underflow, `Modules/_pickle.c` `Pdata_pop`).

use super::Vm;
use crate::error::{ErrorKind, Result};
use crate::limits::LimitName;

/// The stack operations of the interpreter, for every [`Vm`].
pub(crate) trait StackOps<'a>: Vm<'a> {
    /// Where the items above the innermost MARK start (0 without one).
    #[inline(always)]
    fn fence(&self) -> usize {
        self.marks().last().copied().unwrap_or(0)
    }

    /// Whether one more item (or MARK) fits within `max_stack_len`.
    #[inline(always)]
    fn stack_room(&self) -> bool {
        ((self.stack().len() + self.marks().len()) as u64) < self.limits().max_stack_len
    }

    /// The refusal of one more item when [`StackOps::stack_room`] says there is none.
    #[cold]
    fn stack_full(&self) -> crate::Error {
        let depth = (self.stack().len() + self.marks().len()) as u64;
        self.limit(LimitName::MaxStackLen, depth + 1)
    }

    #[inline]
    fn push(&mut self, v: Self::V) -> Result<()> {
        if !self.stack_room() {
            return Err(self.stack_full());
        }
        self.stack_mut().push(v);
        Ok(())
    }

    /// MARK.
    fn mark(&mut self) -> Result<()> {
        if !self.stack_room() {
            return Err(self.stack_full());
        }
        let len = self.stack().len();
        self.marks_mut().push(len);
        Ok(())
    }

    fn pop(&mut self) -> Result<Self::V> {
        if self.stack().len() <= self.fence() {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        self.stack_mut()
            .pop()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    fn top(&self) -> Result<Self::V> {
        if self.stack().len() <= self.fence() {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        self.stack()
            .last()
            .copied()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    /// Where the group above the topmost MARK starts; the MARK stays until
    /// [`StackOps::end_group`].
    fn group_start(&self) -> Result<usize> {
        let mark = self
            .marks()
            .last()
            .copied()
            .ok_or_else(|| self.err(ErrorKind::MarkMissing))?;
        Ok(mark.min(self.stack().len()))
    }

    /// Ends the group that starts at `start`: its MARK popped, its items removed.
    fn end_group(&mut self, start: usize) {
        self.marks_mut().pop();
        self.stack_mut().truncate(start);
    }

    /// Ends APPEND(S)' or SETITEM(S)' items at `start`: removed, and the MARK popped when
    /// they were a `group` (APPENDS, SETITEMS).
    fn end_items(&mut self, group: bool, start: usize) {
        if group {
            self.marks_mut().pop();
        }
        self.stack_mut().truncate(start);
    }

    /// The target of the group above the topmost MARK (which is not popped yet), the item just
    /// below `start`: it must be above the MARK before that one, as [`StackOps::below`] checks
    /// once the MARK is popped.
    fn group_target(&self, start: usize) -> Result<Self::V> {
        let fence = self.group_bounds().map_or(0, |(_, fence)| fence);
        self.below_fence(start, fence)
    }

    /// The stack item just below `start` (the target of a group), which must be above the
    /// current fence: what `top()` gives once the group is popped.
    fn below(&self, start: usize) -> Result<Self::V> {
        self.below_fence(start, self.fence())
    }

    /// The stack item just below `start`, which must be above `fence`.
    fn below_fence(&self, start: usize, fence: usize) -> Result<Self::V> {
        if start <= fence {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        start
            .checked_sub(1)
            .and_then(|i| self.stack().get(i))
            .copied()
            .ok_or_else(|| self.err(ErrorKind::StackUnderflow))
    }

    /// Where the group above the innermost MARK starts and the fence below it (the MARK
    /// before it, or 0), without popping the MARK: what [`StackOps::group`] and then
    /// [`StackOps::below`] would see. `None` without a MARK.
    #[inline(always)]
    fn group_bounds(&self) -> Option<(usize, usize)> {
        let marks = self.marks();
        let &mark = marks.last()?;
        let fence = marks
            .len()
            .checked_sub(2)
            .and_then(|i| marks.get(i))
            .copied()
            .unwrap_or(0);
        Some((mark.min(self.stack().len()), fence))
    }

    /// Starts a group of the top `n` items (APPEND: 1, SETITEM: 2, TUPLE1-3) after checking
    /// that they are above the current fence, as `n` pops would.
    fn top_group(&self, n: usize) -> Result<usize> {
        if self.stack().len() < self.fence() + n {
            return Err(self.err(ErrorKind::StackUnderflow));
        }
        Ok(self.stack().len() - n)
    }
}

impl<'a, T: Vm<'a> + ?Sized> StackOps<'a> for T {}
