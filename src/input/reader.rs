//! The reader: a cursor over the input with protocol-4 framing, shared by the scan and build
//! passes. Every length is checked against the bytes that are left (in the current frame, or
//! in the input) before anything is read; every position is an absolute offset.

use crate::error::{Error, ErrorKind, Result};
use crate::opcode::Opcode;
use crate::text::{self, IntTextOf};

/// A cursor over one input.
pub(crate) struct Reader<'a> {
    pub(crate) input: &'a [u8],
    /// Next byte to read.
    pub(crate) pos: usize,
    /// End of the current FRAME, while one is active.
    pub(crate) frame_end: Option<usize>,
    /// Offset of the opcode being executed (errors report it).
    pub(crate) op_pos: usize,
    /// The opcode byte being executed.
    pub(crate) op: u8,
    /// The protocol of the last PROTO read (0 before any), as CPython's unpickler keeps it
    /// (`load_proto` sets `self.proto`): `find_class` maps Python 2 names only below 3.
    pub(crate) proto: u8,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(input: &'a [u8]) -> Reader<'a> {
        Reader {
            input,
            pos: 0,
            frame_end: None,
            op_pos: 0,
            op: 0,
            proto: 0,
        }
    }

    /// An error of `kind` at the current opcode.
    #[cold]
    pub(crate) fn err(&self, kind: ErrorKind) -> Error {
        Error::new(kind, self.op_pos as u64, Some(self.op))
    }

    /// Reads the next opcode byte and makes it current; leaving an exhausted frame first.
    ///
    /// # Errors
    /// [`ErrorKind::Truncated`] at the end of the input.
    #[inline]
    pub(crate) fn next_opcode(&mut self) -> Result<u8> {
        if self.frame_end == Some(self.pos) {
            self.frame_end = None;
        }
        self.op_pos = self.pos;
        match self.input.get(self.pos) {
            Some(&b) => {
                self.op = b;
                self.pos += 1;
                Ok(b)
            }
            None => {
                self.op = 0;
                Err(Error::new(ErrorKind::Truncated, self.pos as u64, None))
            }
        }
    }

    #[inline]
    pub(crate) fn read_end(&self) -> usize {
        self.frame_end.unwrap_or(self.input.len())
    }

    /// Bytes left before the end of the current frame (or of the input).
    #[inline]
    pub(crate) fn left(&self) -> u64 {
        self.read_end().saturating_sub(self.pos) as u64
    }

    /// Reading past the end: inside a frame that ends before the input does, the opcode
    /// straddles the frame; otherwise the input is truncated.
    #[cold]
    pub(crate) fn overrun(&self) -> Error {
        match self.frame_end {
            Some(end) if end < self.input.len() => self.err(ErrorKind::FrameStraddle),
            _ => self.err(ErrorKind::Truncated),
        }
    }

    /// The next `n` bytes, borrowed from the input.
    #[inline]
    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(self.overrun());
        }
        let start = self.pos;
        let stop = start + n as usize;
        let s = self.input.get(start..stop).ok_or_else(|| self.overrun())?;
        self.pos = stop;
        Ok(s)
    }

    #[inline]
    pub(crate) fn take_array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let s = self.take(N as u64)?;
        s.try_into().map_err(|_| self.overrun())
    }

    #[inline]
    pub(crate) fn take_u8(&mut self) -> Result<u8> {
        let [b] = self.take_array::<1>()?;
        Ok(b)
    }

    /// The argument of BININT1, BININT2 or BININT (`len` 1, 2 or 4 bytes, little-endian;
    /// unsigned, except BININT's 4 bytes, signed), as CPython's `load_binintx` reads it. With
    /// four bytes left in the input it reads without branching on `len`.
    #[inline]
    pub(crate) fn take_binint(&mut self, len: u8) -> Result<i64> {
        if !matches!(len, 1 | 2 | 4) {
            return Err(self.err(ErrorKind::UnknownOpcode));
        }
        let start = self.pos;
        self.take(u64::from(len))?;
        Ok(binint_at(self.input, start, len))
    }

    /// A length-prefixed argument: `N`-byte little-endian length, then that many bytes.
    #[inline]
    pub(crate) fn take_prefixed<const N: usize>(&mut self) -> Result<&'a [u8]> {
        let raw = self.take_array::<N>()?;
        let mut buf = [0u8; 8];
        for (slot, b) in buf.iter_mut().zip(raw) {
            *slot = b;
        }
        self.take(u64::from_le_bytes(buf))
    }

    /// A newline-terminated line, without its newline.
    pub(crate) fn read_line(&mut self) -> Result<&'a [u8]> {
        let rest = self
            .input
            .get(self.pos..self.read_end())
            .unwrap_or_default();
        match rest.iter().position(|&b| b == b'\n') {
            Some(n) => {
                let line = rest.get(..n).unwrap_or_default();
                self.pos += n + 1;
                Ok(line)
            }
            None => Err(self.overrun()),
        }
    }

    /// The memo index argument of GET/PUT (decimal text line), BINGET/BINPUT (1 byte) or
    /// LONG_BINGET/LONG_BINPUT (4 bytes, unsigned); any other opcode reads nothing (MEMOIZE's
    /// index is the memo's size, known to the caller).
    ///
    /// # Errors
    /// Truncation, or [`ErrorKind::InvalidNumber`] for text that is not decimal digits after
    /// an optional sign, a negative index (`-0` is 0), and one past 2**63 - 1: CPython's
    /// `load_put`/`load_get` read the text with `PyLong_FromString(s, NULL, 10)`, which takes
    /// a sign, then convert it with `PyLong_AsSsize_t`, which refuses more (OverflowError),
    /// and refuse a negative PUT; a negative GET finds no memo entry. (Whitespace, underscores
    /// and a NUL, which 3.11's `PyLong_FromString` also takes or stops at, are refused as in
    /// every other number text here.) [`ErrorKind::VersionDependentNumber`] for text of more
    /// than 4300 digits, which CPython 3.6 reads and later releases refuse
    /// ([`text::version_dependent_int_text`]).
    pub(crate) fn memo_arg(&mut self, op: Opcode) -> Result<u64> {
        match op {
            Opcode::Get | Opcode::Put => {
                let text = self.read_line()?;
                let (negative, digits) = match text.split_first() {
                    Some((b'-', rest)) => (true, rest),
                    Some((b'+', rest)) => (false, rest),
                    _ => (false, text),
                };
                if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                    return Err(self.err(ErrorKind::InvalidNumber));
                }
                if let Some(why) = text::version_dependent_int_text(text, IntTextOf::Memo) {
                    return Err(self.err(ErrorKind::VersionDependentNumber(why)));
                }
                std::str::from_utf8(digits)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .filter(|&i| i <= i64::MAX as u64 && !(negative && i != 0))
                    .ok_or_else(|| self.err(ErrorKind::InvalidNumber))
            }
            Opcode::Binget | Opcode::Binput => Ok(u64::from(self.take_u8()?)),
            Opcode::LongBinget | Opcode::LongBinput => {
                Ok(u64::from(u32::from_le_bytes(self.take_array::<4>()?)))
            }
            _ => Ok(0),
        }
    }

    /// FRAME: reads the 8-byte length and starts the frame.
    ///
    /// # Errors
    /// [`ErrorKind::FrameInsideFrame`] while a frame has bytes left; [`ErrorKind::Truncated`]
    /// when the frame runs past the input.
    pub(crate) fn frame(&mut self) -> Result<()> {
        if self.frame_end.is_some() {
            return Err(self.err(ErrorKind::FrameInsideFrame));
        }
        let n = u64::from_le_bytes(self.take_array::<8>()?);
        let left = self.input.len().saturating_sub(self.pos) as u64;
        if n > left {
            return Err(self.err(ErrorKind::Truncated));
        }
        self.frame_end = Some(self.pos + n as usize);
        Ok(())
    }

    /// After a STOP in stream mode: the frame must be used up; the next pickle starts fresh.
    pub(crate) fn end_pickle(&mut self) -> Result<()> {
        if self.frame_end.is_some_and(|end| end > self.pos) {
            return Err(self.err(ErrorKind::FrameStraddle));
        }
        self.frame_end = None;
        // The next pickle of a stream starts at protocol 0, as `Unpickler.load` does.
        self.proto = 0;
        Ok(())
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.input.len()
    }

    /// What is left after the STOP of a single pickle whose trailing bytes are allowed: none
    /// (`None`) or their offset and length. A FRAME may not run on past the STOP
    /// ([`ErrorKind::FrameStraddle`], as between the pickles of a stream), and 4 GiB or more
    /// is no padding: refused as [`ErrorKind::TrailingData`] (a document keeps the length in
    /// 32 bits).
    pub(crate) fn trailing(&mut self) -> Result<Option<crate::value::Trailing>> {
        self.end_pickle()?;
        if self.at_end() {
            return Ok(None);
        }
        let len = self.input.len().saturating_sub(self.pos);
        if u32::try_from(len).is_err() {
            return self.expect_end().map(|()| None);
        }
        Ok(Some(crate::value::Trailing {
            offset: self.pos as u64,
            len: len as u64,
        }))
    }

    /// Refuses anything after the STOP of a single pickle.
    pub(crate) fn expect_end(&self) -> Result<()> {
        if self.at_end() {
            return Ok(());
        }
        Err(Error::new(
            ErrorKind::TrailingData,
            self.pos as u64,
            self.input.get(self.pos).copied(),
        ))
    }
}

/// The value of the `len`-byte (1, 2 or 4) BININT1/BININT2/BININT argument at `start` in
/// `input` (little-endian; unsigned, except BININT's 4 bytes, signed), as CPython's
/// `load_binintx` reads it; the caller has checked that the argument is there. With four
/// bytes left in the input it reads without branching on `len`.
#[inline]
pub(crate) fn binint_at(input: &[u8], start: usize, len: u8) -> i64 {
    let word = match input.get(start..start + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => {
            let mut w = [0u8; 4];
            let arg = input
                .get(start..start + usize::from(len))
                .unwrap_or_default();
            for (slot, &x) in w.iter_mut().zip(arg) {
                *slot = x;
            }
            u32::from_le_bytes(w)
        }
    };
    let bits = 8 * u32::from(len.min(4));
    let x = word & u32::MAX.checked_shr(32 - bits).unwrap_or(0);
    if len == 4 {
        i64::from(x as i32)
    } else {
        i64::from(x)
    }
}

/// The `N`-byte (at most 8) little-endian unsigned argument at `pos` in `input` (a length, a
/// memo index), when it is there before `end`. The fast loop's reading of what
/// [`Reader::take_array`] and [`Reader::take_prefixed`] read, without their errors: `None`
/// leaves the opcode to the interpreter, which reports what is wrong.
#[inline(always)]
pub(crate) fn le_at<const N: usize>(input: &[u8], pos: usize, end: usize) -> Option<u64> {
    let stop = pos.checked_add(N).filter(|&s| s <= end)?;
    let raw = <[u8; N]>::try_from(input.get(pos..stop)?).ok()?;
    let mut buf = [0u8; 8];
    for (slot, b) in buf.iter_mut().zip(raw) {
        *slot = b;
    }
    Some(u64::from_le_bytes(buf))
}

/// The length-prefixed argument (`N`-byte little-endian length, then that many bytes) at `pos`
/// in `input`, when all of it is there before `end`: the bytes, and where the next opcode
/// starts. [`Reader::take_prefixed`] without its errors, as [`le_at`].
#[inline(always)]
pub(crate) fn prefixed_at<const N: usize>(
    input: &[u8],
    pos: usize,
    end: usize,
) -> Option<(&[u8], usize)> {
    let len = usize::try_from(le_at::<N>(input, pos, end)?).ok()?;
    let start = pos + N;
    let stop = start.checked_add(len).filter(|&s| s <= end)?;
    Some((input.get(start..stop)?, stop))
}
