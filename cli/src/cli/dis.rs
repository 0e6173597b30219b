//! `picklewarden dis`: the opcode listing of a pickle ([`picklewarden::dis`]), nothing run.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use picklewarden::limits::DEFAULT_MAX_INPUT_BYTES;
use picklewarden::Error;

use super::{input_path, read_input, Fatal};

/// Options of `dis`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// The pickle file, or `-` for standard input (the default when standard input is not a
    /// terminal); at most `max_input_bytes` of the default limits, 256 MiB.
    #[arg(value_name = "FILE|-")]
    input: Option<PathBuf>,
}

/// Runs `dis`; its exit status (1 with the reason on stderr when the listing stopped early).
pub(crate) fn exit(opts: &Opts) -> ExitCode {
    let mut stderr = io::stderr().lock();
    match run(opts) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            let _ = writeln!(
                stderr,
                "picklewarden: {}: listing stopped ({}, {}): {e}",
                input_path(opts.input.as_deref())
                    .unwrap_or(Path::new("-"))
                    .display(),
                e.category().name(),
                e.kind().name()
            );
            ExitCode::from(1)
        }
        Err(Fatal(msg)) => {
            let _ = writeln!(stderr, "picklewarden: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(opts: &Opts) -> Result<Result<(), Error>, Fatal> {
    let path = input_path(opts.input.as_deref())?;
    let input = read_input(path, DEFAULT_MAX_INPUT_BYTES)?;
    if input.len() as u64 > DEFAULT_MAX_INPUT_BYTES {
        return Err(Fatal(format!(
            "{} is over {DEFAULT_MAX_INPUT_BYTES} bytes",
            path.display()
        )));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    match picklewarden::dis::write_dis(&input, &mut out).and_then(|r| out.flush().map(|()| r)) {
        Ok(r) => Ok(r),
        // Quiet exit when the reader of our output went away (e.g. `| head`).
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Ok(())),
        Err(e) => Err(Fatal(format!("cannot write output: {e}"))),
    }
}
