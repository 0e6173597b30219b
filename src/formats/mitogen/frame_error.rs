//! [`FrameError`]: a refused frame (bad framing, or a payload the decoder refused), with its
//! category and whether it fails one call or cuts the stream.

use std::fmt;

use crate::canonical::Unwritable;
use crate::error::{Category, Error, ErrorKind};

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
    /// The payload was accepted but has no canonical pickle ([`Frame::canonical`](super::Frame::canonical)): a record
    /// that is more than its call, a stream whose later pickle changed an earlier value, a
    /// value protocol 2 cannot write, or a rewritten payload over the maximum message size.
    NoCanonical {
        /// Why.
        reason: Unwritable,
        /// Absolute offset of the header.
        offset: u64,
    },
    /// The canonical rewrite of an accepted frame is refused by the policy that accepted the
    /// frame ([`Frame::canonical`](super::Frame::canonical)): it needs a global the policy does not allow (a set the
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
    /// handle ([`StreamCheck::check_frame`](super::StreamCheck::check_frame)), or not a dead message there.
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
