//! Mitogen message framing and payloads, as `mitogen/core.py` (release 0.3.54) defines them.
//!
//! A Mitogen stream (after the bootstrap handshake, see [`bootstrap`]) is a sequence of
//! messages, each a 26-byte big-endian header `>hLLLLLL` (enc, dst_id, src_id, auth_id, handle,
//! reply_to, length) followed by `length` bytes of payload:
//! - `enc` is [`Enc::Legacy`] (0x4d49, "MI"), [`Enc::Pickle`] (0x4d4a) or [`Enc::Binary`]
//!   (0x4d4b); anything else is stream corruption (Mitogen disconnects);
//! - `length` is at most the router's maximum message size (128 MiB by default,
//!   [`DEFAULT_MAX_MESSAGE_BYTES`]); Mitogen disconnects a stream that announces more;
//! - `reply_to` = [`IS_DEAD`] (999) marks a dead message, whose payload is the UTF-8 reason;
//! - a pickled payload holds several protocol-2 pickles one after another that share one memo
//!   (`Message.unpickle_iter` calls `Unpickler.load()` until the payload is used up; an empty
//!   payload holds no value), unpickled with `encoding='bytes'`;
//! - a few legacy (0x4d49) handles carry raw bytes that Mitogen never unpickles
//!   ([`RAW_LEGACY_HANDLES`]: module names, log records, route updates).
//!
//! [`FrameReader`] cuts frames out of a byte stream that arrives in pieces of any size, checking
//! each header as soon as its 26 bytes are in (so an oversized frame is refused before its
//! payload is buffered). [`decode_payload`] decodes one payload under a policy (normally the
//! built-in `mitogen` policy). [`StreamCheck`] applies the policy's message policy
//! ([`crate::policy::MessagePolicy`]: handles, payload shapes, Context bounds) to a child's
//! frames as `filter` and `guard` do; [`FrameError::disposition`] says whether a refusal fails
//! one call ([`refusal_notices`]) or cuts the stream.

use std::borrow::Cow;
use std::fmt;

use crate::build::Decoder;
use crate::canonical::{self, Unwritable};
use crate::error::{Category, Error, ErrorKind};
use crate::limits::Limits;
use crate::policy::Policy;
use crate::value::{Arena, Document, Scratch};

mod stream;
pub use stream::{refusal_notices, Disposition, StreamCheck, MAX_NOTICE_REASON_BYTES};

/// Length of a message header in bytes (`struct.calcsize('>hLLLLLL')`).
pub const HEADER_LEN: usize = 26;

/// Mitogen's default maximum message size (`Router.max_message_size`), in bytes: 128 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 128 * 1024 * 1024;

/// `reply_to` of a dead message (`mitogen.core.IS_DEAD`).
pub const IS_DEAD: u32 = 999;

/// Standard handles of `mitogen/core.py`.
pub mod handle {
    /// A child asks for a module's source (raw module name).
    pub const GET_MODULE: u32 = 100;
    /// A function call (pickled `CallSpec` tuple).
    pub const CALL_FUNCTION: u32 = 101;
    /// A log record (raw `name\0level\0message`).
    pub const FORWARD_LOG: u32 = 102;
    /// A route was added (raw `id` or `id:name`).
    pub const ADD_ROUTE: u32 = 103;
    /// A route was removed (raw `id`).
    pub const DEL_ROUTE: u32 = 104;
    /// Ask for a context id (empty; the reply is pickled).
    pub const ALLOCATE_ID: u32 = 105;
    /// Shut down (empty).
    pub const SHUTDOWN: u32 = 106;
    /// A module's source (pickled).
    pub const LOAD_MODULE: u32 = 107;
    /// Forward a module to a grandchild (raw `id\0name`).
    pub const FORWARD_MODULE: u32 = 108;
    /// The context is detaching (empty).
    pub const DETACHING: u32 = 109;
    /// A service call (pickled).
    pub const CALL_SERVICE: u32 = 110;
}

/// Legacy-encoded handles whose payload is raw bytes that Mitogen's receivers split or decode
/// as text and never unpickle (`mitogen/core.py`, `mitogen/master.py`, `mitogen/parent.py`).
pub const RAW_LEGACY_HANDLES: [u32; 5] = [
    handle::GET_MODULE,
    handle::FORWARD_LOG,
    handle::ADD_ROUTE,
    handle::DEL_ROUTE,
    handle::FORWARD_MODULE,
];

/// The payload encoding of a message (`Message.ENC_MGC`, `ENC_PKL`, `ENC_BIN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enc {
    /// 0x4d49 (`ENC_MGC`): the implicit legacy encoding, pickled except on
    /// [`RAW_LEGACY_HANDLES`].
    Legacy,
    /// 0x4d4a (`ENC_PKL`): pickled.
    Pickle,
    /// 0x4d4b (`ENC_BIN`): raw bytes.
    Binary,
}

impl Enc {
    /// The enc of a header field, or `None` for a value Mitogen treats as corruption.
    pub fn from_u16(v: u16) -> Option<Enc> {
        match v {
            0x4d49 => Some(Enc::Legacy),
            0x4d4a => Some(Enc::Pickle),
            0x4d4b => Some(Enc::Binary),
            _ => None,
        }
    }

    /// The header field value.
    pub fn value(self) -> u16 {
        match self {
            Enc::Legacy => 0x4d49,
            Enc::Pickle => 0x4d4a,
            Enc::Binary => 0x4d4b,
        }
    }
}

/// A message header (26 bytes, big-endian `>hLLLLLL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Payload encoding.
    pub enc: Enc,
    /// Destination context id.
    pub dst_id: u32,
    /// Source context id.
    pub src_id: u32,
    /// Context id under whose authority the message acts.
    pub auth_id: u32,
    /// Destination handle.
    pub handle: u32,
    /// Handle for the reply, or [`IS_DEAD`].
    pub reply_to: u32,
    /// Payload length in bytes.
    pub length: u32,
}

/// How a payload is to be read, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadKind {
    /// Pickles one after another sharing one memo (possibly none).
    Pickles,
    /// Raw bytes of an [`Enc::Binary`] message.
    Binary,
    /// Raw bytes of a legacy message on one of the [`RAW_LEGACY_HANDLES`].
    Raw,
    /// A dead message: the payload is the UTF-8 reason (possibly empty).
    Dead,
}

fn be_u32(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        word.copy_from_slice(s);
    }
    u32::from_be_bytes(word)
}

impl Header {
    /// Reads a header. `offset` is the header's absolute position in the stream (for errors);
    /// `max_message_bytes` is the largest payload accepted.
    ///
    /// # Errors
    /// [`FrameError::BadEnc`] for an unknown enc, [`FrameError::TooLarge`] for a payload over
    /// the maximum, as Mitogen's `MitogenProtocol._receive_one` refuses them.
    pub fn parse(
        bytes: &[u8; HEADER_LEN],
        offset: u64,
        max_message_bytes: u64,
    ) -> Result<Header, FrameError> {
        let raw_enc = u16::from_be_bytes([bytes[0], bytes[1]]);
        let enc = Enc::from_u16(raw_enc).ok_or(FrameError::BadEnc {
            enc: raw_enc,
            offset,
        })?;
        let length = be_u32(bytes, 22);
        if u64::from(length) > max_message_bytes {
            return Err(FrameError::TooLarge {
                length: u64::from(length),
                max: max_message_bytes,
                offset,
            });
        }
        Ok(Header {
            enc,
            dst_id: be_u32(bytes, 2),
            src_id: be_u32(bytes, 6),
            auth_id: be_u32(bytes, 10),
            handle: be_u32(bytes, 14),
            reply_to: be_u32(bytes, 18),
            length,
        })
    }

    /// The 26 header bytes (`Message.pack`).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let fields = [
            self.dst_id,
            self.src_id,
            self.auth_id,
            self.handle,
            self.reply_to,
            self.length,
        ];
        let (enc, rest) = out.split_at_mut(2);
        enc.copy_from_slice(&self.enc.value().to_be_bytes());
        for (chunk, v) in rest.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        out
    }

    /// Whether `reply_to` is [`IS_DEAD`] (`Message.is_dead`).
    pub fn is_dead(&self) -> bool {
        self.reply_to == IS_DEAD
    }

    /// How the payload is read: dead messages first, then binary, raw legacy handles, and
    /// pickles for everything else.
    pub fn payload_kind(&self) -> PayloadKind {
        if self.is_dead() {
            PayloadKind::Dead
        } else if self.enc == Enc::Binary {
            PayloadKind::Binary
        } else if self.enc == Enc::Legacy && RAW_LEGACY_HANDLES.contains(&self.handle) {
            PayloadKind::Raw
        } else {
            PayloadKind::Pickles
        }
    }
}

/// A refused frame: bad framing, or a payload the decoder refused.
#[derive(Debug)]
#[non_exhaustive]
pub enum FrameError {
    /// The enc field is not one of the three Mitogen encodings (stream corruption).
    BadEnc {
        /// The value seen.
        enc: u16,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The payload length is over the maximum message size.
    TooLarge {
        /// The length announced.
        length: u64,
        /// The maximum.
        max: u64,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The stream ended inside a frame.
    Truncated {
        /// Absolute offset of the frame.
        offset: u64,
        /// Bytes of the frame that are there.
        have: u64,
        /// Bytes the frame needs.
        need: u64,
    },
    /// The payload was refused; the error's offset is absolute in the stream.
    Payload(Error),
    /// The payload was accepted but has no canonical pickle ([`Frame::canonical`]): a record
    /// that is more than its call, a stream whose later pickle changed an earlier value, a
    /// value protocol 2 cannot write, or a rewritten payload over the maximum message size.
    NoCanonical {
        /// Why.
        reason: Unwritable,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The canonical rewrite of an accepted frame is refused by the policy that accepted the
    /// frame ([`Frame::canonical`]): it needs a global the policy does not allow (a set the
    /// child made with protocol 4's EMPTY_SET is `__builtin__.set([...])` at protocol 2, which
    /// the `mitogen` policy, like Mitogen's `_find_global`, does not allow), or passes a limit.
    /// The error's offset is relative to the rewritten payload.
    CanonicalRefused {
        /// The refusal of the rewrite.
        error: Error,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The message policy ([`crate::policy::MessagePolicy`]) does not let a child send to this
    /// handle ([`StreamCheck::check_frame`]), or not a dead message there.
    HandleNotAllowed {
        /// The handle.
        handle: u32,
        /// Its name (`"CALL_FUNCTION"`, `"reply"`).
        name: String,
        /// Whether the frame was a dead message.
        dead: bool,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The payload is not what the handle's [`crate::policy::PayloadRule`] allows.
    PayloadNotAllowed {
        /// The handle.
        handle: u32,
        /// Its name.
        name: String,
        /// What is wrong (attacker text in it escaped and truncated).
        why: String,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// A bound of the message policy would be passed (`max_new_contexts_per_frame`,
    /// `max_new_contexts_per_stream`).
    MessageLimit {
        /// The setting's name in the policy file.
        setting: &'static str,
        /// The count the frame would reach.
        seen: u64,
        /// The setting's value.
        max: u64,
        /// Absolute offset of the header.
        offset: u64,
    },
}

impl FrameError {
    /// A stable name: `bad_enc`, `message_too_large`, `truncated`, `no_canonical_pickle`,
    /// `handle_not_allowed`, `payload_not_allowed`, `limit_exceeded` (a message policy bound,
    /// named by [`FrameError::limit_name`]), or the payload error's kind name
    /// (`global_not_allowed`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            FrameError::HandleNotAllowed { .. } => "handle_not_allowed",
            FrameError::PayloadNotAllowed { .. } => "payload_not_allowed",
            FrameError::MessageLimit { .. } => "limit_exceeded",
            FrameError::BadEnc { .. } => "bad_enc",
            FrameError::TooLarge { .. } => "message_too_large",
            FrameError::Truncated { .. } => "truncated",
            FrameError::Payload(e) => e.kind().name(),
            FrameError::NoCanonical { .. } | FrameError::CanonicalRefused { .. } => {
                "no_canonical_pickle"
            }
        }
    }

    /// The category of the refusal.
    pub fn category(&self) -> Category {
        match self {
            FrameError::BadEnc { .. } => Category::Malformed,
            FrameError::TooLarge { .. } => Category::LimitExceeded,
            FrameError::Truncated { .. } => Category::Truncated,
            FrameError::Payload(e) => e.category(),
            FrameError::NoCanonical {
                reason: Unwritable::TooLarge(_) | Unwritable::Deadline,
                ..
            } => Category::LimitExceeded,
            FrameError::NoCanonical { .. } => Category::PolicyDenied,
            FrameError::CanonicalRefused { error, .. } => error.category(),
            FrameError::HandleNotAllowed { .. } | FrameError::PayloadNotAllowed { .. } => {
                Category::PolicyDenied
            }
            FrameError::MessageLimit { .. } => Category::LimitExceeded,
        }
    }

    /// The name of the limit or setting passed, for a refusal of category `limit_exceeded`
    /// that has one (`max_nesting_depth`, `max_new_contexts_per_frame`, ...).
    pub fn limit_name(&self) -> Option<&'static str> {
        match self {
            FrameError::MessageLimit { setting, .. } => Some(setting),
            FrameError::Payload(e) | FrameError::CanonicalRefused { error: e, .. } => {
                match e.kind() {
                    ErrorKind::LimitExceeded { limit, .. } => Some(limit.name()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Absolute byte offset in the stream: the frame's header, or the refused opcode.
    pub fn offset(&self) -> u64 {
        match self {
            FrameError::BadEnc { offset, .. }
            | FrameError::TooLarge { offset, .. }
            | FrameError::Truncated { offset, .. }
            | FrameError::NoCanonical { offset, .. }
            | FrameError::CanonicalRefused { offset, .. }
            | FrameError::HandleNotAllowed { offset, .. }
            | FrameError::PayloadNotAllowed { offset, .. }
            | FrameError::MessageLimit { offset, .. } => *offset,
            FrameError::Payload(e) => e.offset(),
        }
    }

    /// The payload error, if the refusal came from the decoder.
    pub fn payload_error(&self) -> Option<&Error> {
        match self {
            FrameError::Payload(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadEnc { enc, offset } => write!(
                f,
                "enc {enc:#06x} is not a Mitogen encoding (0x4d49, 0x4d4a, 0x4d4b) in the header at offset {offset} ({offset:#x})"
            ),
            FrameError::TooLarge {
                length,
                max,
                offset,
            } => write!(
                f,
                "message length {length} is over the maximum message size {max} in the header at offset {offset} ({offset:#x})"
            ),
            FrameError::Truncated { offset, have, need } => write!(
                f,
                "stream ends inside the frame at offset {offset} ({offset:#x}; {have} of {need} bytes)"
            ),
            FrameError::Payload(e) => write!(f, "{e}"),
            FrameError::NoCanonical { reason, offset } => write!(
                f,
                "the frame at offset {offset} ({offset:#x}) has no canonical pickle: {reason}"
            ),
            FrameError::CanonicalRefused { error, offset } => write!(
                f,
                "the canonical pickle of the frame at offset {offset} ({offset:#x}) is refused by \
                 the policy (offsets in the rewrite): {error}"
            ),
            FrameError::HandleNotAllowed {
                handle,
                name,
                dead,
                offset,
            } => write!(
                f,
                "{}handle {handle} ({name}) is not one a child may send to under the Mitogen \
                 message policy, in the frame at offset {offset} ({offset:#x})",
                if *dead { "a dead message to " } else { "" }
            ),
            FrameError::PayloadNotAllowed {
                handle,
                name,
                why,
                offset,
            } => write!(
                f,
                "the payload to handle {handle} ({name}) is not allowed: {why}, in the frame at \
                 offset {offset} ({offset:#x})"
            ),
            FrameError::MessageLimit {
                setting,
                seen,
                max,
                offset,
            } => write!(
                f,
                "Mitogen message policy setting {setting} exceeded: {seen} > {max} new Context \
                 ids, in the frame at offset {offset} ({offset:#x})"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// One whole frame cut from a stream: header and payload, as received.
#[derive(Clone, Debug)]
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
        let payload =
            canonical::to_pickle_with(doc, canonical::Protocol::V2, max, None).map_err(no)?;
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

/// The decoded content of one payload.
#[derive(Debug)]
pub enum Content<'a> {
    /// The values of the pickles in the payload (a stream document, possibly with no root).
    Values(Document<'a>),
    /// The raw bytes of a binary message.
    Binary(&'a [u8]),
    /// The raw bytes of a legacy message on a raw handle.
    Raw(&'a [u8]),
    /// The reason of a dead message.
    Dead(Cow<'a, str>),
}

/// Decodes one payload as its header says ([`Header::payload_kind`]): pickles one after
/// another sharing one memo under `policy` and `limits` (as `Message.unpickle_iter`), raw
/// bytes for binary and raw legacy messages, the UTF-8 reason of a dead message. Error offsets
/// are relative to the payload (see [`Frame::decode`] for absolute ones).
///
/// # Errors
/// Any decoder refusal; [`ErrorKind::InvalidUtf8`] for a dead message whose reason is not
/// UTF-8 (Mitogen writes `utf_8_encode(reason)`); for a dead message whose enc is not binary,
/// the decoder's refusal of its reason unless the reason decodes or fails at its first opcode
/// (a receiver that unpickles with `throw_dead=False` runs it until it fails).
pub fn decode_payload<'a>(
    header: &Header,
    payload: &'a [u8],
    policy: &Policy,
    limits: Limits,
) -> Result<Content<'a>, Error> {
    match header.payload_kind() {
        PayloadKind::Binary => Ok(Content::Binary(payload)),
        PayloadKind::Raw => Ok(Content::Raw(payload)),
        PayloadKind::Dead => {
            let reason = std::str::from_utf8(payload)
                .map_err(|e| Error::new(ErrorKind::InvalidUtf8, e.valid_up_to() as u64, None))?;
            dead_reason_is_not_a_refused_pickle(header, payload, policy, limits)?;
            Ok(Content::Dead(Cow::Borrowed(reason)))
        }
        PayloadKind::Pickles if payload.is_empty() => Ok(Content::Values(Document {
            arena: Arena::new(payload, Scratch::new()),
            roots: Vec::new(),
            stream: true,
            values: 0,
            changed_earlier: false,
            records_replayable: true,
            pickle_starts: Box::default(),
            trailing_len: None,
            persistent_ids: None,
        })),
        PayloadKind::Pickles => Decoder::new(payload, policy)
            .limits(limits)
            .decode_stream()
            .map(Content::Values),
    }
}

/// A dead message's reason is text, but `Message.unpickle(throw_dead=False)` and
/// `unpickle_iter(throw_dead=False)` unpickle it like any other payload when its enc is not
/// binary (mitogen/core.py; `Context.call` reaches it only for messages that are not dead,
/// since `Receiver.get` raises on those first). CPython's unpickler runs the opcodes in order
/// until one fails, so what matters is what comes before the first error, not the error. A
/// reason passes when it decodes under the policy (then unpickling it is harmless), or when it
/// fails at its first byte the way CPython fails there too (an unknown opcode, the input
/// ending, no MARK, an empty stack: nothing runs): every reason Mitogen 0.3.54 writes
/// (`'the respondent Context has disconnected'`, `'no route to ...'`, `'Channel closed by
/// ...'`) fails at its first opcode. Anything else is refused: a policy's or a limit's
/// refusal, or a malformation past the first opcode, behind which a refused call may already
/// have run. (An audit helper found `cmitogen.core\nBlob\n(I1000000000\ntR.` passing as a
/// reason, and a review helper the same without its STOP or with bytes after it, which
/// CPython runs as far as the REDUCE.)
fn dead_reason_is_not_a_refused_pickle(
    header: &Header,
    payload: &[u8],
    policy: &Policy,
    limits: Limits,
) -> Result<(), Error> {
    if header.enc == Enc::Binary || payload.is_empty() {
        return Ok(());
    }
    match Decoder::new(payload, policy).limits(limits).decode_stream() {
        Ok(_) => Ok(()),
        // Only failures CPython's unpickler has at the first opcode too: an unknown opcode,
        // the input ending, no MARK or an empty stack. Not a refusal where CPython is looser
        // (number text with spaces, say), after which it would go on to the next opcode.
        // A reason that is no pickle at all is judged by the refusal its first opcode met.
        Err(e)
            if e.read_as_pickle().unwrap_or(&e).offset() == 0
                && matches!(
                    e.read_as_pickle().unwrap_or(&e).kind(),
                    ErrorKind::UnknownOpcode
                        | ErrorKind::Truncated
                        | ErrorKind::MarkMissing
                        | ErrorKind::StackUnderflow
                ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The bootstrap handshake of a Mitogen child (`mitogen/parent.py`): before framing starts,
/// the child writes lines on its stdout. The first stage writes `MITO000\n` when it is ready
/// for the compressed core source, `MITO001\n` once it has it; the new interpreter writes
/// `MITO002\n` (`ExternalContext.main`) right before the first frame.
///
/// Mitogen's parent (`BootstrapProtocol`, a `RegexProtocol` over `DelimitedProtocol` in
/// mitogen 0.3.54) splits the bytes at `\n` and, for each whole line (without its `\n`),
/// tries `re.search` for `MITO000`, then `MITO001`, then `MITO002`, and runs the handler of the
/// first that matches: so a line *containing* `MITO002` and neither of the others (` MITO002`,
/// `xMITO002y`, `MITO002\r`) ends the handshake, and everything after its `\n` is framed. A
/// checker must end it at exactly the same byte, or frames the parent reads would pass as
/// handshake text. Other lines, and a last line without `\n`, are text.
pub mod bootstrap {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(enc: Enc, handle: u32, reply_to: u32, length: u32) -> Header {
        Header {
            enc,
            dst_id: 0,
            src_id: 1,
            auth_id: 1,
            handle,
            reply_to,
            length,
        }
    }

    fn frame(h: Header, payload: &[u8]) -> Vec<u8> {
        let mut v = h.to_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    fn mitogen() -> Policy {
        Policy::builtin("mitogen").unwrap()
    }

    #[test]
    fn header_round_trip_matches_struct_pack() {
        // struct.pack('>hLLLLLL', 0x4d4a, 1, 2, 3, 4, 5, 6)
        let want = b"\x4d\x4a\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00\x05\x00\x00\x00\x06";
        let h = Header::parse(want, 0, 100).unwrap();
        assert_eq!(
            h,
            Header {
                enc: Enc::Pickle,
                dst_id: 1,
                src_id: 2,
                auth_id: 3,
                handle: 4,
                reply_to: 5,
                length: 6
            }
        );
        assert_eq!(&h.to_bytes(), want);
    }

    #[test]
    fn bad_enc_and_size_limit() {
        let mut bytes = header(Enc::Pickle, 1, 0, 10).to_bytes();
        bytes[1] = 0x4c;
        assert!(matches!(
            Header::parse(&bytes, 7, 100),
            Err(FrameError::BadEnc {
                enc: 0x4d4c,
                offset: 7
            })
        ));
        bytes[1] = 0x4e;
        assert!(Header::parse(&bytes, 0, 100).is_err());
        let ok = header(Enc::Binary, 1, 0, 10).to_bytes();
        assert!(Header::parse(&ok, 0, 10).is_ok());
        let e = Header::parse(&ok, 0, 9).unwrap_err();
        assert_eq!(e.kind_name(), "message_too_large");
        assert_eq!(e.category(), Category::LimitExceeded);
    }

    #[test]
    fn reader_takes_any_piece_sizes() {
        let mut stream = Vec::new();
        let payloads: [&[u8]; 4] = [b"", b"N.", b"\x80\x02K\x05.\x80\x02K\x06.", b"raw"];
        for (i, p) in payloads.iter().enumerate() {
            let enc = if i == 3 { Enc::Binary } else { Enc::Pickle };
            stream.extend(frame(header(enc, 1000 + i as u32, 0, p.len() as u32), p));
        }
        for piece in [1, 2, 3, 7, 25, 26, 27, 1000] {
            let mut r = FrameReader::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(piece) {
                r.push(chunk);
                while let Some(f) = r.next_frame().unwrap() {
                    got.push(f);
                }
            }
            r.finish().unwrap();
            assert_eq!(got.len(), 4, "piece {piece}");
            let mut offset = 0;
            for (f, p) in got.iter().zip(payloads) {
                assert_eq!(f.payload(), p);
                assert_eq!(f.offset, offset);
                offset += f.as_bytes().len() as u64;
            }
            assert_eq!(r.offset(), stream.len() as u64);
        }
    }

    #[test]
    fn reader_refuses_oversized_header_before_payload() {
        let mut r = FrameReader::with_max_message_bytes(4);
        r.push(&header(Enc::Pickle, 1, 0, 5).to_bytes());
        let e = r.next_frame().unwrap_err();
        assert!(matches!(
            e,
            FrameError::TooLarge {
                length: 5,
                max: 4,
                offset: 0
            }
        ));
        assert!(r.next_frame().is_err());
    }

    #[test]
    fn truncated_stream() {
        let bytes = frame(header(Enc::Pickle, 1, 0, 2), b"N.");
        for cut in 1..bytes.len() {
            let mut r = FrameReader::new();
            r.push(&bytes[..cut]);
            assert!(r.next_frame().unwrap().is_none());
            let e = r.finish().unwrap_err();
            assert_eq!(e.kind_name(), "truncated");
            assert_eq!(e.category(), Category::Truncated);
        }
    }

    #[test]
    fn payload_kinds() {
        let p = mitogen();
        let l = p.limits;
        let dead = header(Enc::Legacy, 1000, IS_DEAD, 0);
        assert!(matches!(
            decode_payload(&dead, b"Channel closed", &p, l),
            Ok(Content::Dead(r)) if r == "Channel closed"
        ));
        // A reason that is a pickle the policy refuses is refused as it would be in a live
        // message (Message.unpickle(throw_dead=False) unpickles it); one it accepts, and text
        // that starts like a pickle but is not one, pass.
        let bad = b"cmitogen.core\nBlob\n(I1000000000\ntR.";
        let e = decode_payload(&dead, bad, &p, l).unwrap_err();
        assert_eq!(e.kind().name(), "constructor_rejected", "{e}");
        let e = decode_payload(&dead, b"cos\nsystem\n(S'id'\ntR.", &p, l).unwrap_err();
        assert_eq!(e.kind().name(), "global_not_allowed", "{e}");
        // Without its STOP, or with bytes after it, CPython still runs it as far as the
        // REDUCE: refused too, at the first malformation past the first opcode. So is text
        // that is malformed only past its first opcode.
        for bad in [
            &bad[..bad.len() - 1],
            // CPython 3.11 reads "I 5" as 5 and goes on to the GLOBAL.
            b"I 5\ncmitogen.core\nBlob\n(I1000000000\ntR.",
            b"cmitogen.core\nBlob\n(I1000000000\ntR.junk",
            b"cmitogen.core\nBlob\n(I1000000000\ntR0",
            b"(S'x'\n",
        ] {
            assert!(decode_payload(&dead, bad, &p, l).is_err(), "{bad:?}");
        }
        // Every reason Mitogen 0.3.54's core.py writes fails at its first opcode, or decodes.
        for ok in [
            &b"I5\n."[..],
            b"context 3 is gone",
            b"the respondent Context has disconnected",
            b"Channel closed by remote end.",
            b"Channel closed by local end.",
            b"Sender was explicitly closed",
            b"the Receiver has been closed",
            b"An attempt was made to enqueue a message with a Broker that has already exitted.",
            b"cannot register a handle that already exists",
            b"refused by policy",
            b"invalid handle",
            b"message too large (max 134217728 bytes)",
            b"Broker has exitted",
            b"no route to 5, my ID is 1",
            b"routing mode prevents forward of message from context 2 to context 3 via context 1",
            b"reply from unexpected context",
        ] {
            assert!(
                matches!(decode_payload(&dead, ok, &p, l), Ok(Content::Dead(r)) if r.as_bytes() == ok),
                "{ok:?}"
            );
        }
        // With enc binary it is never unpickled.
        let dead_bin = header(Enc::Binary, 1000, IS_DEAD, 0);
        assert!(matches!(
            decode_payload(&dead_bin, bad, &p, l),
            Ok(Content::Dead(_))
        ));
        assert_eq!(
            decode_payload(&dead, b"\xff", &p, l)
                .unwrap_err()
                .kind()
                .name(),
            "invalid_utf8"
        );
        let log = header(Enc::Legacy, handle::FORWARD_LOG, 0, 0);
        assert!(matches!(
            decode_payload(&log, b"mitogen\x0020\x00hi", &p, l),
            Ok(Content::Raw(_))
        ));
        let bin = header(Enc::Binary, 1000, 0, 0);
        assert!(matches!(
            decode_payload(&bin, b"\x00\x01", &p, l),
            Ok(Content::Binary(b"\x00\x01"))
        ));
        let pkl = header(Enc::Pickle, 1000, 0, 0);
        match decode_payload(&pkl, b"", &p, l).unwrap() {
            Content::Values(d) => assert!(d.roots().is_empty()),
            other => panic!("{other:?}"),
        }
        // Two pickles sharing one memo: the second GETs what the first PUT.
        match decode_payload(&pkl, b"\x80\x02]q\x00.\x80\x02h\x00.", &p, l).unwrap() {
            Content::Values(d) => {
                assert_eq!(d.roots().len(), 2);
                assert_eq!(d.roots()[0], d.roots()[1]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn payload_errors_are_absolute() {
        let p = mitogen();
        let mut stream = frame(header(Enc::Pickle, 1000, 0, 2), b"N.");
        let evil = b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R.";
        stream.extend(frame(header(Enc::Pickle, 1000, 0, evil.len() as u32), evil));
        let mut r = FrameReader::new();
        r.push(&stream);
        let first = r.next_frame().unwrap().unwrap();
        assert!(first.decode(&p, p.limits).is_ok());
        let second = r.next_frame().unwrap().unwrap();
        let e = second.decode(&p, p.limits).unwrap_err();
        assert_eq!(e.kind_name(), "global_not_allowed");
        assert_eq!(e.offset(), 28 + 26 + 2);
        assert!(e.to_string().contains("os.system"), "{e}");
    }

    #[test]
    fn handshake() {
        use bootstrap::{Handshake, Step};
        let mut h = Handshake::default();
        assert_eq!(h.feed(b"MITO000\nMITO0", 100), Step::Pending);
        assert_eq!(h.feed(b"01\nnoise\nMITO", 100), Step::Pending);
        assert_eq!(h.feed(b"002\n\x4d\x4a", 100), Step::Done(4));
        assert!(h.is_done());
        // 13 + 13 + 4 bytes of handshake text: the frames start at offset 30.
        assert_eq!(h.text_bytes(), 30);
        assert_eq!(h.feed(b"more", 100), Step::Done(0));
        assert_eq!(h.text_bytes(), 30);
        let mut h = Handshake::new();
        assert_eq!(h.feed(&[b'x'; 11], 10), Step::TooLong);
    }

    /// The handshake ends where Mitogen's parent ends it: at the `\n` of the first line that
    /// holds `MITO002` and neither `MITO000` nor `MITO001` (its patterns are tried in that
    /// order with `re.search`), fed whole or a byte at a time. (A review helper found the
    /// old rule, a line exactly `MITO002`, let ` MITO002\n` and then frames pass as text
    /// while the parent read them as frames.)
    #[test]
    fn handshake_ends_on_any_line_mitogen_takes_for_ec2() {
        use bootstrap::{Handshake, Step};
        let ends = |input: &[u8]| -> Option<usize> {
            let mut h = Handshake::default();
            match h.feed(input, 1 << 20) {
                Step::Done(k) => {
                    // Byte by byte gives the same end.
                    let mut g = Handshake::default();
                    let at = input
                        .iter()
                        .position(|&b| matches!(g.feed(&[b], 1 << 20), Step::Done(_)));
                    assert_eq!(at.map(|p| p + 1), Some(k), "{input:?}");
                    Some(k)
                }
                _ => None,
            }
        };
        assert_eq!(ends(b"MITO002\nMJ"), Some(8));
        assert_eq!(ends(b"MITO000\nMITO001\n MITO002\nMJ"), Some(25));
        assert_eq!(ends(b"xMITO002y\n"), Some(10));
        assert_eq!(ends(b"MITO002\r\nMJ"), Some(9));
        assert_eq!(ends(b"noise\nMITMITO002\n"), Some(17));
        // A line that also holds MITO000 or MITO001 is theirs, not the end.
        assert_eq!(ends(b"MITO002 MITO000\n"), None);
        assert_eq!(ends(b"MITO001MITO002\n"), None);
        assert_eq!(ends(b"MITO001MITO002\nMITO002\n"), Some(23));
        // Split markers and no newline yet.
        assert_eq!(ends(b"MITO00\n2\n"), None);
        assert_eq!(ends(b"MITO002"), None);
    }
}
