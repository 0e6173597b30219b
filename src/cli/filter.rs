//! `picklewarden filter --mitogen`: a validating filter on a Mitogen stream. Reads frames from
//! stdin and writes every accepted frame unchanged to stdout; a refused frame produces an
//! audit event (JSON on stderr) and ends the stream (exit 1), or with `--on-reject drop` is
//! dropped. A stream that starts with a child's bootstrap handshake (`MITO000\n`) has it
//! passed on unchanged first, up to and including `MITO002\n`, as `guard` does.

use std::io::{self, Read};

use clap::Args;
use picklewarden::mitogen::bootstrap::DEFAULT_MAX_BOOTSTRAP_BYTES;
use picklewarden::mitogen::FrameReader;

use super::mitogen::{
    init_audit_log, pass_handshake, relay_frames, Checker, FrameOpts, HandshakeEnd, HANDSHAKE_START,
};
use super::Fatal;

/// Options of `filter`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// The stream is Mitogen frames (the only kind of stream `filter` reads for now).
    #[arg(long, required = true)]
    mitogen: bool,
    #[command(flatten)]
    frames: FrameOpts,
    /// Most bytes of a bootstrap handshake (a stream that starts with `MITO000\n`) before
    /// `MITO002\n`; past it the stream is cut off (exit 1).
    #[arg(long, default_value_t = DEFAULT_MAX_BOOTSTRAP_BYTES, value_name = "BYTES", value_parser = super::parse_size_usize)]
    max_bootstrap_bytes: usize,
}

/// Returns whether the stream ended cleanly with no refusal that cut it off.
pub(crate) fn run(opts: &Opts) -> Result<bool, Fatal> {
    init_audit_log(&opts.frames)?;
    let checker = Checker::new(&opts.frames, "stdin")?;
    let mut reader = FrameReader::with_max_message_bytes(opts.frames.max_message_bytes);
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    let io_error = |e: io::Error| Fatal(format!("I/O error: {e}"));
    // The first bytes, until they tell a handshake from a frame header.
    let mut head = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while head.len() < HANDSHAKE_START.len() && HANDSHAKE_START.starts_with(&head) {
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
    if head.starts_with(HANDSHAKE_START) {
        let max = opts.max_bootstrap_bytes;
        match pass_handshake(&mut input, &mut output, None, max, &head) {
            Ok(HandshakeEnd::Done(len, rest)) => {
                // Offsets in audit events stay absolute in the stream.
                reader = FrameReader::with_max_message_bytes(opts.frames.max_message_bytes)
                    .starting_at(len);
                reader.push(&rest);
            }
            Ok(HandshakeEnd::Ended) => {
                tracing::warn!(
                    target: "picklewarden::audit",
                    event = "mitogen_bootstrap_truncated",
                    "the stream ended inside the bootstrap handshake (no MITO002 line)"
                );
                return Ok(false);
            }
            Ok(HandshakeEnd::TooLong) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(true),
            Err(e) => return Err(io_error(e)),
        }
    } else {
        reader.push(&head);
    }
    match relay_frames(
        &checker,
        opts.frames.on_reject,
        &mut reader,
        &mut input,
        &mut output,
        None,
    ) {
        Ok(clean) => Ok(clean),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(true),
        Err(e) => Err(io_error(e)),
    }
}
