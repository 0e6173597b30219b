//! The message header: 26 bytes, big-endian `>hLLLLLL` (enc, dst_id, src_id, auth_id, handle,
//! reply_to, length), read and checked ([`Header::parse`]).

use super::{FrameError, HEADER_LEN, IS_DEAD, RAW_LEGACY_HANDLES};

/// The payload encoding of a message (`Message.ENC_MGC`, `ENC_PKL`, `ENC_BIN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
///
/// Not `#[non_exhaustive]`: the fields are those of Mitogen's wire header
/// (`Message.HEADER_FMT`), and callers build headers by struct literal (tests, fuzzing); a new
/// field comes only with a new wire format.
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
#[non_exhaustive]
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
