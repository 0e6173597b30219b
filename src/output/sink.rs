//! The text of the typed JSON and repr writers as it is made: held in a `String`, passed on to
//! a sink in pieces ([`crate::json::write_typed_json`], [`crate::repr::write_repr`]), or given
//! up past a byte bound or a deadline.

use std::io;

use crate::clock::Clock;

/// The text held before it is passed to the sink of [`crate::json::write_typed_json`] or
/// [`crate::repr::write_repr`]: it is passed on at the first look past this many bytes (every
/// value), so a piece is this plus at most one scalar value (a long text, or bytes written as
/// hex, is one piece of its own).
pub const SPILL_BYTES: usize = 1 << 20;

/// What one big int counts for, in the writers' work between two looks at the clock
/// ([`crate::clock::CHECK_EVERY`] values): a 4096-byte one takes about 0.2 ms to write.
pub(crate) const BIG_INT_WORK: u64 = 1024;

/// Where a writer passes its text on as it is made: the writer, the bytes passed on so far,
/// and its first error.
#[derive(Default)]
pub(crate) struct Sink<'s> {
    out: Option<&'s mut dyn io::Write>,
    /// Bytes passed on so far.
    pub(crate) passed: usize,
    error: Option<io::Error>,
}

impl<'s> Sink<'s> {
    pub(crate) fn new(out: &'s mut dyn io::Write) -> Sink<'s> {
        Sink {
            out: Some(out),
            ..Sink::default()
        }
    }

    /// Passes `text` on and empties it; `false` when there is no writer (the caller's text
    /// stays whole) or the writer failed (its error is kept, and it is never called again).
    #[cold]
    pub(crate) fn pass(&mut self, text: &mut String) -> bool {
        let Some(out) = self.out.as_mut() else {
            return false;
        };
        if let Err(e) = out.write_all(text.as_bytes()) {
            self.error = Some(e);
            self.out = None;
            return false;
        }
        self.passed += text.len();
        text.clear();
        true
    }

    /// Passes the rest of `text` on, unless the writer failed; gives its first error.
    pub(crate) fn finish(mut self, text: &mut String) -> io::Result<()> {
        if self.error.is_none() {
            self.pass(text);
        }
        self.error.map_or(Ok(()), Err)
    }
}

/// A writer's text and its bounds: the text not yet passed on, the length past which it looks
/// again, the sink, and the deadline with the work done so far.
#[derive(Default)]
pub(crate) struct Text<'s> {
    pub(crate) out: String,
    /// Length of `out` past which [`Text::go_on`] looks again: the caller's `max_bytes`, after
    /// which writing stops, or, with a sink, the piece size, after which `out` is passed to
    /// the sink and emptied.
    pub(crate) check_at: usize,
    pub(crate) sink: Sink<'s>,
    /// When to give up, and the values written so far (a big int counts as
    /// [`BIG_INT_WORK`]), by which the clock is looked at.
    pub(crate) clock: Clock,
    pub(crate) work: u64,
    /// Writing stopped: past `max_bytes`, at the sink's error or at the deadline.
    pub(crate) stopped: bool,
    /// Writing stopped at the deadline.
    pub(crate) timed_out: bool,
}

impl<'s> Text<'s> {
    /// An empty text bounded by `max_bytes`, and by `clock`.
    pub(crate) fn new(max_bytes: usize, clock: Clock) -> Text<'s> {
        Text {
            check_at: max_bytes,
            clock,
            ..Text::default()
        }
    }

    /// Passes the text on to `out` in pieces of about `piece` bytes.
    pub(crate) fn sink_to(&mut self, out: &'s mut dyn io::Write, piece: usize) {
        self.sink = Sink::new(out);
        self.check_at = piece;
        let _ = self.out.try_reserve(piece.saturating_add(piece / 8));
    }

    /// The length of the whole text so far (passed on and held).
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.sink.passed + self.out.len()
    }

    /// Counts one more value and tells whether writing goes on: it stops past `max_bytes`
    /// (`check_at`, without a sink), at a sink's error or past the deadline, and `stopped` is
    /// then set.
    #[inline]
    pub(crate) fn go_on(&mut self) -> bool {
        if self.stopped {
            return false;
        }
        if self.out.len() > self.check_at && !self.sink.pass(&mut self.out) {
            self.stopped = true;
            return false;
        }
        self.work += 1;
        if self.clock.passed_after(self.work) {
            self.timed_out = true;
            self.stopped = true;
            return false;
        }
        true
    }

    /// Passes the rest on to the sink; its first error.
    pub(crate) fn finish(self) -> io::Result<()> {
        let Text { mut out, sink, .. } = self;
        sink.finish(&mut out)
    }
}
