//! `picklewarden filter --mitogen`: a validating filter on a Mitogen stream. Reads frames from
//! stdin, checks each under the policy's message policy and globals, and writes every accepted
//! frame to stdout as picklewarden's canonical rewrite (the child's bytes with
//! `--pass-through`); a refused frame produces an audit event (JSON on stderr) and, by default,
//! dead messages that fail its call in its place (`picklewarden::mitogen::refusal_notices`),
//! or ends the stream (exit 1) when it shows a hostile child or with `--on-reject disconnect`;
//! with `--on-reject drop` it is dropped. The stream is a child's stdout, read as Mitogen's parent reads it: its bootstrap
//! handshake first, passed on unchanged up to the first line Mitogen takes for its end (see
//! `picklewarden::mitogen::bootstrap`), then frames, as `guard` does. With `--framed` the
//! stream is frames from its first byte (a stream whose handshake was passed elsewhere).

use std::io;

use clap::Args;
use picklewarden::mitogen::bootstrap::DEFAULT_MAX_BOOTSTRAP_BYTES;
use picklewarden::mitogen::FrameReader;

use super::mitogen::{
    init_audit_log, pass_handshake, relay_frames, Checker, FrameOpts, HandshakeEnd,
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
    /// Most bytes of the bootstrap handshake, which is passed on unchecked (Mitogen's parent
    /// reads it as the handshake, never as pickles) up to the first line holding `MITO002`,
    /// whatever the stream starts with; past it, or at the stream's end without that line,
    /// the stream is cut off (exit 1). A stream of frames alone needs `--framed`.
    #[arg(long, default_value_t = DEFAULT_MAX_BOOTSTRAP_BYTES, value_name = "BYTES", value_parser = super::parse_size_usize)]
    max_bootstrap_bytes: usize,
    /// The stream is frames from its first byte, its handshake passed elsewhere. Without it
    /// the stream is a child's stdout, handshake first, as Mitogen's parent reads it (which
    /// needs no MITO000: the first line holding MITO002 starts the frames).
    #[arg(long)]
    framed: bool,
}

/// Returns whether the stream ended cleanly with no refusal that cut it off.
pub(crate) fn run(opts: &Opts) -> Result<bool, Fatal> {
    init_audit_log(&opts.frames)?;
    let mut checker = Checker::new(&opts.frames, "stdin")?;
    let mut reader = FrameReader::with_max_message_bytes(opts.frames.max_message_bytes);
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
    let io_error = |e: io::Error| Fatal(format!("I/O error: {e}"));
    if !opts.framed {
        let max = opts.max_bootstrap_bytes;
        match pass_handshake(&mut input, &mut output, None, max, &[]) {
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
    }
    match relay_frames(
        &mut checker,
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
