//! [`decode_payload`]: one payload decoded under a policy, as `Message.unpickle_iter` reads it.

use std::borrow::Cow;

use super::{Enc, Header, PayloadKind};
use crate::build::Decoder;
use crate::error::{Error, ErrorKind};
use crate::limits::Limits;
use crate::policy::Policy;
use crate::value::{Arena, Document, Scratch};

/// The decoded content of one payload.
///
/// Exhaustive on purpose: a message content the caller does not handle must not be passed on by
/// a catch-all arm; a new kind (a new Mitogen encoding) is a breaking change.
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
/// are relative to the payload (see [`Frame::decode`](super::Frame::decode) for absolute ones).
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
            kept: None,
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
