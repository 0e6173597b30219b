//! A deadline looked at once per so much work ([`crate::Decoder::deadline`]): the two passes
//! count opcodes and the writers count values, because an `Instant::now()` per opcode would
//! cost more than the opcode.

use std::time::Instant;

/// Work between two looks at the clock: opcodes in the scan and the build, values in the
/// typed-JSON and repr writers.
pub(crate) const CHECK_EVERY: u64 = 1 << 16;

/// An optional deadline, and the amount of work at which to look at it next.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Clock {
    at: Option<Instant>,
    next: u64,
}

impl Clock {
    /// A clock for `at` (`None`: it never passes).
    pub(crate) fn new(at: Option<Instant>) -> Clock {
        Clock {
            at,
            next: CHECK_EVERY,
        }
    }

    /// The deadline, if any (for a decode nested in this one).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.at
    }

    /// Whether the deadline has passed, looked at now.
    pub(crate) fn passed(&self) -> bool {
        self.at.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the deadline has passed, looked at only once `work` (a running count of
    /// opcodes or values, which may jump: a run of ints counts at once) reaches the next
    /// mark, [`CHECK_EVERY`] past the last look.
    #[inline]
    pub(crate) fn passed_after(&mut self, work: u64) -> bool {
        work >= self.next && self.look(work)
    }

    /// How much more work may be done before [`Clock::passed_after`] looks at the clock
    /// (for a caller that counts work in a local and checks in between).
    #[inline]
    pub(crate) fn room(&self, work: u64) -> u64 {
        if self.at.is_none() {
            return u64::MAX;
        }
        self.next.saturating_sub(work)
    }

    #[cold]
    fn look(&mut self, work: u64) -> bool {
        self.next = work.saturating_add(CHECK_EVERY);
        self.passed()
    }
}
