//! [`Frame`] and [`FrameReader`]: whole frames cut from a byte stream that arrives in pieces of
//! any size, each header checked as soon as its 26 bytes are in.

use super::{decode_payload, Content, FrameError, Header, DEFAULT_MAX_MESSAGE_BYTES, HEADER_LEN};
use crate::canonical::{self, Unwritable};
use crate::limits::Limits;
use crate::policy::Policy;

/// One whole frame cut from a stream: header and payload, as received.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Frame {
    /// Absolute offset of the header in the stream.
    pub offset: u64,
    /// The parsed header.
    pub header: Header,
    bytes: Vec<u8>,
}

impl Frame {
    /// The frame's bytes as received (header then payload), for relaying unchanged.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        self.bytes.get(HEADER_LEN..).unwrap_or_default()
    }

    /// Absolute offset of the first payload byte.
    pub fn payload_offset(&self) -> u64 {
        self.offset + HEADER_LEN as u64
    }

    /// The frame as a bastion hands it on when it rewrites what it accepted: for a payload of
    /// pickles, `content` (this frame's [`Frame::decode`]) written back as one canonical
    /// protocol-2 pickle per value sharing one memo ([`canonical::Protocol::V2`], the form
    /// Mitogen's Python 3 side writes), behind the same header
    /// with the new length; binary, raw and dead messages as received. The parent's unpickler
    /// then reads bytes picklewarden wrote, not the child's: none of the child's opcodes, memo
    /// indices or declared lengths (a far `LONG_BINPUT` that CPython 3.11 sizes its memo by,
    /// a BINBYTES length it allocates before reading) reach it.
    ///
    /// The rewrite is decoded again under `policy` and `limits` (those that accepted the
    /// frame) before it is given, so that it is handed on only if it is accepted as the
    /// child's frame was.
    ///
    /// # Errors
    /// [`FrameError::NoCanonical`] when the document has no canonical pickle
    /// ([`canonical::Unwritable`]), or when the rewritten payload is over
    /// `max_message_bytes` (Mitogen's `max_message_size`: the parent would refuse it);
    /// [`FrameError::CanonicalRefused`] when `policy` and `limits` refuse the rewrite.
    pub fn canonical(
        &self,
        content: &Content<'_>,
        policy: &Policy,
        limits: Limits,
        max_message_bytes: u64,
    ) -> Result<Vec<u8>, FrameError> {
        let Content::Values(doc) = content else {
            return Ok(self.bytes.clone());
        };
        let max = usize::try_from(max_message_bytes).unwrap_or(usize::MAX);
        let no = |reason| FrameError::NoCanonical {
            reason,
            offset: self.offset,
        };
        let payload = canonical::to_pickle_bounded(
            doc,
            canonical::Protocol::V2,
            crate::OutputBound::bytes(max),
        )
        .map_err(no)?;
        let length = u32::try_from(payload.len())
            .ok()
            .filter(|&n| u64::from(n) <= max_message_bytes)
            .ok_or_else(|| no(Unwritable::TooLarge(max)))?;
        let header = Header {
            length,
            ..self.header
        };
        if let Err(error) = decode_payload(&header, &payload, policy, limits) {
            return Err(FrameError::CanonicalRefused {
                error,
                offset: self.offset,
            });
        }
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&header.to_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Decodes the payload (see [`decode_payload`]); error offsets are absolute in the stream.
    ///
    /// # Errors
    /// [`FrameError::Payload`].
    pub fn decode<'f>(
        &'f self,
        policy: &Policy,
        limits: Limits,
    ) -> Result<Content<'f>, FrameError> {
        decode_payload(&self.header, self.payload(), policy, limits)
            .map_err(|e| FrameError::Payload(e.shifted(self.payload_offset())))
    }
}

/// Cuts frames out of a byte stream that arrives in pieces of any size.
///
/// Feed it with [`FrameReader::push`] and drain it with [`FrameReader::next_frame`] after every
/// push: it then never holds more than one frame (at most the maximum message size plus the
/// header) plus the last piece. After an error the reader refuses the same header again.
///
/// ```
/// use picklewarden::mitogen::{FrameReader, Header, Enc};
/// let header = Header { enc: Enc::Pickle, dst_id: 0, src_id: 1, auth_id: 1, handle: 1000,
///                       reply_to: 0, length: 3 };
/// let mut bytes = header.to_bytes().to_vec();
/// bytes.extend_from_slice(b"N.");  // one byte short
/// let mut reader = FrameReader::new();
/// reader.push(&bytes);
/// assert!(reader.next_frame()?.is_none());
/// reader.push(b"x");
/// let frame = reader.next_frame()?.unwrap();
/// assert_eq!(frame.payload(), b"N.x");
/// assert!(reader.finish().is_ok());
/// # Ok::<(), picklewarden::mitogen::FrameError>(())
/// ```
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    /// Absolute stream offset of `buf[start]`.
    offset: u64,
    max_message_bytes: u64,
    header: Option<Header>,
}

impl Default for FrameReader {
    fn default() -> FrameReader {
        FrameReader::new()
    }
}

impl FrameReader {
    /// A reader with Mitogen's default maximum message size (128 MiB).
    pub fn new() -> FrameReader {
        FrameReader::with_max_message_bytes(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A reader refusing payloads longer than `max` bytes.
    pub fn with_max_message_bytes(max: u64) -> FrameReader {
        FrameReader {
            buf: Vec::new(),
            start: 0,
            offset: 0,
            max_message_bytes: max,
            header: None,
        }
    }

    /// A reader whose stream starts at absolute offset `offset` (e.g. after a bootstrap
    /// handshake), for error offsets.
    pub fn starting_at(mut self, offset: u64) -> FrameReader {
        self.offset = offset;
        self
    }

    /// Appends the next piece of the stream.
    pub fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received but not yet returned in a frame.
    pub fn buffered(&self) -> usize {
        self.buf.len().saturating_sub(self.start)
    }

    /// Absolute stream offset of the next frame.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next whole frame, or `None` when more bytes are needed.
    ///
    /// # Errors
    /// A bad enc or an oversized length, as soon as the header is in (and again on every later
    /// call: nothing is consumed).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let avail = self.buf.get(self.start..).unwrap_or_default();
        let header = match self.header {
            Some(h) => h,
            None => {
                let Some(head) = avail.first_chunk::<HEADER_LEN>() else {
                    return Ok(None);
                };
                // On error nothing is consumed, so the next call refuses the same header again.
                let h = Header::parse(head, self.offset, self.max_message_bytes)?;
                self.header = Some(h);
                h
            }
        };
        let total = HEADER_LEN + header.length as usize;
        let Some(bytes) = avail.get(..total) else {
            return Ok(None);
        };
        let frame = Frame {
            offset: self.offset,
            header,
            bytes: bytes.to_vec(),
        };
        self.start += total;
        self.offset += total as u64;
        self.header = None;
        Ok(Some(frame))
    }

    /// Call at the end of the stream: an error if it ended inside a frame.
    ///
    /// # Errors
    /// [`FrameError::Truncated`].
    pub fn finish(&self) -> Result<(), FrameError> {
        let have = self.buffered() as u64;
        if have == 0 {
            return Ok(());
        }
        let need = self.header.map_or(HEADER_LEN as u64, |h| {
            HEADER_LEN as u64 + u64::from(h.length)
        });
        Err(FrameError::Truncated {
            offset: self.offset,
            have,
            need,
        })
    }
}
