//! [`PyStr`] and [`PyBytes`]: text and bytes as the document holds them.

use std::borrow::Cow;

use crate::latin1;

/// A Python `str`, as the document holds it: its UTF-8 bytes. Pickle can carry lone
/// surrogates (CPython decodes BINUNICODE with `surrogatepass`), which Rust's `str` cannot
/// hold, so such text is its `surrogatepass` UTF-8 bytes (surrogates as 3-byte sequences
/// ED A0 80 ... ED BF BF). Each code point is encoded on its own, so two `PyStr` are equal as
/// Python strings exactly when their bytes are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyStr<'d> {
    bytes: &'d [u8],
    surrogates: bool,
}

impl<'d> PyStr<'d> {
    /// A text of `bytes`: valid UTF-8 when `surrogates` is false, else `surrogatepass` UTF-8
    /// holding at least one lone surrogate (the decoder checked which).
    pub(crate) fn new(bytes: &'d [u8], surrogates: bool) -> PyStr<'d> {
        PyStr { bytes, surrogates }
    }

    /// The `surrogatepass` UTF-8 bytes of the text (plain UTF-8 when it has no surrogates).
    pub fn as_bytes(&self) -> &'d [u8] {
        self.bytes
    }

    /// The text as `&str`, or `None` when it holds a lone surrogate. The document keeps text
    /// as bytes it validated once; this validates them again (SIMD, several GB/s), since safe
    /// Rust has no other way to turn bytes into `&str`.
    #[inline]
    pub fn as_str(&self) -> Option<&'d str> {
        if self.surrogates {
            return None;
        }
        // The decode checked the bytes; a `&str` needs the check again (no unsafe code).
        // Short text goes straight to std's check, which simdutf8 calls for it anyway after
        // its own dispatch.
        if self.bytes.len() < 64 {
            std::str::from_utf8(self.bytes).ok()
        } else {
            simdutf8::basic::from_utf8(self.bytes).ok()
        }
    }

    /// Whether the text holds a lone surrogate (and so has no `&str`).
    pub fn has_surrogates(&self) -> bool {
        self.surrogates
    }

    /// The number of code points (each byte that is not a UTF-8 continuation byte begins one;
    /// a surrogate is one 3-byte sequence).
    pub fn chars_count(&self) -> usize {
        self.bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
    }
}

/// A Python `bytes` value as the document holds it: bytes of the input, or text whose code
/// points are all below U+0100 standing for its Latin-1 encoding (what protocols 0-2 write
/// for bytes: `_codecs.encode(text, 'latin1')`, the bytes are each code point's value). The
/// text was checked when it was decoded; its bytes are made only when they are asked for
/// ([`PyBytes::to_cow`], [`PyBytes::for_each_chunk`]), so a decode that only checks and passes
/// a Mitogen transfer on never transcodes it.
#[derive(Clone, Copy, Debug)]
pub struct PyBytes<'d> {
    repr: BytesRepr<'d>,
}

#[derive(Clone, Copy, Debug)]
enum BytesRepr<'d> {
    Raw(&'d [u8]),
    /// UTF-8 text with code points below U+0100 only, one of them at least above U+007F
    /// (ASCII text is held as [`BytesRepr::Raw`]: its bytes are the text's), and the length
    /// of its Latin-1 encoding.
    Latin1 {
        text: &'d [u8],
        len: usize,
    },
}

impl<'d> PyBytes<'d> {
    /// Bytes held as they are.
    pub(crate) fn raw(bytes: &'d [u8]) -> PyBytes<'d> {
        PyBytes {
            repr: BytesRepr::Raw(bytes),
        }
    }

    /// The Latin-1 encoding, `len` bytes long, of `text`: valid UTF-8 whose code points are
    /// all below U+0100, one at least above U+007F (the arena holds ASCII text's encoding as
    /// the text's own bytes, [`PyBytes::raw`]).
    pub(crate) fn latin1(text: &'d [u8], len: usize) -> PyBytes<'d> {
        PyBytes {
            repr: BytesRepr::Latin1 { text, len },
        }
    }

    /// The number of bytes (for the Latin-1 encoding of text, counted when the text was
    /// checked or viewed, not again).
    pub fn len(&self) -> usize {
        match self.repr {
            BytesRepr::Raw(b) => b.len(),
            BytesRepr::Latin1 { len, .. } => len,
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes as a slice of the document, when it holds them as they are (always, but for
    /// the Latin-1 encoding of text that is not all ASCII: then `None`; see [`PyBytes::to_cow`]).
    pub fn as_slice(&self) -> Option<&'d [u8]> {
        match self.repr {
            BytesRepr::Raw(b) => Some(b),
            BytesRepr::Latin1 { .. } => None,
        }
    }

    /// The bytes: borrowed where the document holds them as they are, else made from the text
    /// (one allocation of [`PyBytes::len`] bytes).
    pub fn to_cow(&self) -> Cow<'d, [u8]> {
        match self.repr {
            BytesRepr::Raw(b) => Cow::Borrowed(b),
            BytesRepr::Latin1 { text, len } => Cow::Owned(latin1::pack(text, len)),
        }
    }

    /// The bytes in an owned `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.to_cow().into_owned()
    }

    /// The UTF-8 text the bytes are the Latin-1 encoding of, when the document holds them so
    /// (the protocol 0-2 form, `_codecs.encode(text, 'latin1')`, of text that is not all
    /// ASCII).
    pub fn latin1_text(&self) -> Option<&'d [u8]> {
        match self.repr {
            BytesRepr::Raw(_) => None,
            BytesRepr::Latin1 { text, .. } => Some(text),
        }
    }

    /// Calls `f` on the bytes in order, in one or more pieces that together are the bytes
    /// (without allocating: Latin-1 text is transcoded 4 KiB at a time on the stack). Empty
    /// bytes make no call.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[u8])) {
        match self.repr {
            BytesRepr::Raw(b) => {
                if !b.is_empty() {
                    f(b)
                }
            }
            BytesRepr::Latin1 { text, .. } => latin1::for_each_chunk(text, f),
        }
    }

    /// [`PyBytes::for_each_chunk`] of the first `n` bytes (all of them when there are fewer):
    /// nothing past them is transcoded.
    pub fn for_each_chunk_of(&self, n: usize, mut f: impl FnMut(&[u8])) {
        match self.repr {
            BytesRepr::Raw(b) => {
                let head = b.get(..n).unwrap_or(b);
                if !head.is_empty() {
                    f(head)
                }
            }
            BytesRepr::Latin1 { text, .. } => {
                let mut left = n;
                latin1::for_each_chunk_while(text, |piece| {
                    let take = piece.len().min(left);
                    if take > 0 {
                        f(piece.get(..take).unwrap_or(piece));
                    }
                    left -= take;
                    left > 0
                });
            }
        }
    }
}

impl PartialEq for PyBytes<'_> {
    /// Byte equality, whichever way each side is held.
    fn eq(&self, other: &PyBytes<'_>) -> bool {
        if self.len() != other.len() {
            return false;
        }
        match (self.as_slice(), other.as_slice()) {
            (Some(a), Some(b)) => a == b,
            (Some(raw), None) => other.latin1_text().is_some_and(|t| latin1::eq(t, raw)),
            (None, Some(raw)) => self.latin1_text().is_some_and(|t| latin1::eq(t, raw)),
            // Two texts, each with a code point above U+007F: equal bytes are equal text.
            (None, None) => self.latin1_text() == other.latin1_text(),
        }
    }
}

impl Eq for PyBytes<'_> {}
