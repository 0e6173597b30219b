//! `picklewarden filter --mitogen`: a validating filter on a Mitogen stream. Reads frames from
//! stdin and writes every accepted frame unchanged to stdout; a refused frame produces an
//! audit event (JSON on stderr) and ends the stream (exit 1), or with `--on-reject drop` is
//! dropped.

use std::io;

use clap::Args;
use picklewarden::mitogen::FrameReader;

use super::mitogen::{init_audit_log, relay_frames, Checker, FrameOpts};
use super::Fatal;

/// Options of `filter`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// The stream is Mitogen frames (the only kind of stream `filter` reads for now).
    #[arg(long, required = true)]
    mitogen: bool,
    #[command(flatten)]
    frames: FrameOpts,
}

/// Returns whether the stream ended cleanly with no refusal that cut it off.
pub(crate) fn run(opts: &Opts) -> Result<bool, Fatal> {
    init_audit_log(&opts.frames)?;
    let checker = Checker::new(&opts.frames, "stdin")?;
    let mut reader = FrameReader::with_max_message_bytes(opts.frames.max_message_bytes);
    let mut input = io::stdin().lock();
    let mut output = io::stdout().lock();
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
        Err(e) => Err(Fatal(format!("I/O error: {e}"))),
    }
}
