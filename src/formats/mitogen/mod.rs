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

//!
//! ```text
//! formats/mitogen/
//!   mod.rs          the constants of mitogen/core.py: header length, sizes, handles
//!   header.rs       Header, Enc, PayloadKind: the 26-byte header read and checked
//!   frame_error.rs  FrameError: every refusal of a frame, its category and disposition
//!   frame.rs        Frame and FrameReader: frames cut from a stream arriving in pieces
//!   payload.rs      decode_payload and Content: a payload decoded under a policy
//!   bootstrap.rs    the handshake before framing starts (MITO000/1/2 lines)
//!   stream.rs       StreamCheck: the policy's message rules over a child's frames
//!   tests.rs, stream_test.rs   unit tests
//! ```

pub mod bootstrap;
mod frame;
mod frame_error;
mod header;
mod payload;
mod stream;

pub use frame::{Frame, FrameReader};
pub use frame_error::FrameError;
pub use header::{Enc, Header, PayloadKind};
pub use payload::{decode_payload, Content};
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

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
