//! The bootstrap handshake of a Mitogen child (`mitogen/parent.py`): before framing starts,
//! the child writes lines on its stdout. The first stage writes `MITO000\n` when it is ready
//! for the compressed core source, `MITO001\n` once it has it; the new interpreter writes
//! `MITO002\n` (`ExternalContext.main`) right before the first frame.
//!
//! Mitogen's parent (`BootstrapProtocol`, a `RegexProtocol` over `DelimitedProtocol` in
//! mitogen 0.3.54) splits the bytes at `\n` and, for each whole line (without its `\n`),
//! tries `re.search` for `MITO000`, then `MITO001`, then `MITO002`, and runs the handler of the
//! first that matches: so a line *containing* `MITO002` and neither of the others (` MITO002`,
//! `xMITO002y`, `MITO002\r`) ends the handshake, and everything after its `\n` is framed. A
//! checker must end it at exactly the same byte, or frames the parent reads would pass as
//! handshake text. Other lines, and a last line without `\n`, are text.

/// The line Mitogen's child writes last before framing starts (any line holding `MITO002`
/// and neither `MITO000` nor `MITO001` ends the handshake; see the module docs).
pub const EC2_LINE: &[u8] = b"MITO002\n";
/// The default bound on the bytes a child may write before the handshake ends.
pub const DEFAULT_MAX_BOOTSTRAP_BYTES: usize = 1024 * 1024;

/// The three markers, in the order Mitogen's parent tries them.
const MARKERS: [&[u8; 7]; 3] = [b"MITO000", b"MITO001", b"MITO002"];

/// Tracks the handshake on a child's stdout.
#[derive(Debug, Default)]
pub struct Handshake {
    /// The last (up to) 7 bytes of the current line.
    tail: Vec<u8>,
    /// Which markers the current line holds so far.
    found: [bool; 3],
    seen: usize,
    done: bool,
}

/// What [`Handshake::feed`] found.
///
/// Exhaustive on purpose: a new state of the handshake must make every caller decide where
/// the bytes go, not fall into a catch-all arm.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Still in the handshake: all of the piece is handshake text.
    Pending,
    /// The handshake ended; the first `usize` bytes of the piece are handshake text, the
    /// rest is framed.
    Done(usize),
    /// The child wrote more than the bound before the handshake ended.
    TooLong,
}

impl Handshake {
    /// A handshake not yet begun (the same as `Handshake::default()`).
    pub fn new() -> Handshake {
        Handshake::default()
    }

    /// The bytes of handshake text read so far: once [`Handshake::is_done`], the offset in
    /// the child's stdout where the framed messages begin (what
    /// [`crate::mitogen::FrameReader::starting_at`] takes).
    pub fn text_bytes(&self) -> usize {
        self.seen
    }

    /// Whether the handshake ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Reads the next piece of the child's stdout; `max` bounds the handshake's length.
    pub fn feed(&mut self, piece: &[u8], max: usize) -> Step {
        if self.done {
            return Step::Done(0);
        }
        for (i, &b) in piece.iter().enumerate() {
            self.seen += 1;
            if self.seen > max {
                return Step::TooLong;
            }
            if b == b'\n' {
                // The first marker the line holds decides, as Mitogen's PATTERNS order.
                let ended = self.found == [false, false, true];
                self.tail.clear();
                self.found = [false; 3];
                if ended {
                    self.done = true;
                    return Step::Done(i + 1);
                }
                continue;
            }
            if self.tail.len() == 7 {
                self.tail.remove(0);
            }
            self.tail.push(b);
            for (found, marker) in self.found.iter_mut().zip(MARKERS) {
                *found |= self.tail.as_slice() == marker.as_slice();
            }
        }
        Step::Pending
    }
}
