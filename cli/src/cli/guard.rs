//! `picklewarden guard -- COMMAND ARGS...`: runs a Mitogen child behind the filter. The
//! child's stdin is our stdin, relayed unchanged; the child's stdout goes through the
//! bootstrap handshake (lines up to `MITO002\n`, passed unchanged) and then through the frame
//! checker (the one `filter` runs: message policy, globals, canonical hand-over) before it
//! reaches our stdout. A refused frame fails only its own call (dead messages in its place);
//! one that shows a hostile child (or any refusal, with `--on-reject disconnect`) gets the
//! child killed and our stdout closed, so the Mitogen parent sees the child disconnect
//! without ever reading the frame.
//!
//! Use it as the child's Python: `router.local(python_path=["picklewarden", "guard", "--",
//! "python3"])`.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;

use clap::Args;
use picklewarden::mitogen::bootstrap::DEFAULT_MAX_BOOTSTRAP_BYTES;
use picklewarden::mitogen::FrameReader;

use super::mitogen::{
    init_audit_log, pass_handshake, relay_frames, Checker, FrameOpts, HandshakeEnd,
};
use super::Fatal;

/// Options of `guard`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    #[command(flatten)]
    frames: FrameOpts,
    /// Also write both directions, as received, to DIR: `down.bin` (our stdin, i.e. what the
    /// parent sent), `up.bin` (what the child wrote, handshake included) and `argv.json`.
    #[arg(long, value_name = "DIR")]
    capture: Option<PathBuf>,
    /// Most bytes the child may write before `MITO002\n`.
    #[arg(long, default_value_t = DEFAULT_MAX_BOOTSTRAP_BYTES, value_name = "BYTES", value_parser = super::parse_size_usize)]
    max_bootstrap_bytes: usize,
    /// The child command and its arguments.
    #[arg(required = true, last = true, value_name = "COMMAND ARGS")]
    command: Vec<String>,
}

fn create(dir: &Option<PathBuf>, name: &str) -> Result<Option<File>, Fatal> {
    match dir {
        None => Ok(None),
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| Fatal(format!("cannot create {}: {e}", d.display())))?;
            let p = d.join(name);
            File::create(&p)
                .map(Some)
                .map_err(|e| Fatal(format!("cannot create {}: {e}", p.display())))
        }
    }
}

/// Copies the parent's bytes to the child's stdin, unchanged.
fn pump_down(mut child_in: impl Write, mut tap: Option<File>) {
    let mut stdin = io::stdin().lock();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let piece = buf.get(..n).unwrap_or_default();
        if let Some(t) = tap.as_mut() {
            let _ = t.write_all(piece);
        }
        if child_in
            .write_all(piece)
            .and_then(|()| child_in.flush())
            .is_err()
        {
            break;
        }
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) fn run(opts: &Opts) -> Result<ExitCode, Fatal> {
    init_audit_log(&opts.frames)?;
    let mut checker = Checker::new(&opts.frames, "child stdout")?;
    let (program, args) = opts
        .command
        .split_first()
        .ok_or_else(|| Fatal("no command given after --".into()))?;
    if let Some(mut f) = create(&opts.capture, "argv.json")? {
        let _ = writeln!(f, "{}", serde_json::json!(opts.command));
    }
    let down_tap = create(&opts.capture, "down.bin")?;
    let mut up_tap = create(&opts.capture, "up.bin")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Fatal(format!("cannot start {program}: {e}")))?;
    let (Some(child_in), Some(mut child_out)) = (child.stdin.take(), child.stdout.take()) else {
        stop(&mut child);
        return Err(Fatal("child has no stdin/stdout pipe".into()));
    };
    // Detached: it ends when the parent closes our stdin or the child's stdin breaks.
    thread::spawn(move || pump_down(child_in, down_tap));

    let mut out = io::stdout().lock();
    let passed = pass_handshake(
        &mut child_out,
        &mut out,
        up_tap.as_mut().map(|f| f as &mut dyn Write),
        opts.max_bootstrap_bytes,
        &[],
    );
    let (handshake_len, rest) = match passed {
        Ok(HandshakeEnd::Done(len, rest)) => (len, rest),
        Ok(HandshakeEnd::Ended) | Err(_) => {
            if matches!(passed, Ok(HandshakeEnd::Ended)) {
                tracing::warn!(
                    target: "picklewarden::audit",
                    event = "mitogen_bootstrap_truncated",
                    "the child's stdout ended inside the bootstrap handshake (no MITO002 line)"
                );
            }
            // The child ended or failed during bootstrap: pass on its exit status (ssh's 255,
            // Python's 1 tell the parent why), but never a success, as `filter` exits 1 on
            // the same bytes.
            let status = child.wait().ok().and_then(|s| s.code()).unwrap_or(1);
            let status = u8::try_from(status).ok().filter(|&s| s != 0).unwrap_or(1);
            return Ok(ExitCode::from(status));
        }
        Ok(HandshakeEnd::TooLong) => {
            // Cut off (the audit event is written): the child goes, as on a refused frame.
            stop(&mut child);
            return Ok(ExitCode::from(1));
        }
    };
    // Offsets in audit events are absolute in the child's stdout (handshake included).
    let mut reader = FrameReader::with_max_message_bytes(opts.frames.max_message_bytes)
        .starting_at(handshake_len);
    reader.push(&rest);
    let tap = up_tap.as_mut().map(|f| f as &mut dyn Write);
    let result = relay_frames(
        &mut checker,
        opts.frames.on_reject,
        &mut reader,
        &mut child_out,
        &mut out,
        tap,
    );
    match result {
        Ok(true) => {
            let status = child.wait().ok().and_then(|s| s.code()).unwrap_or(0);
            Ok(ExitCode::from(u8::try_from(status).unwrap_or(1)))
        }
        Ok(false) => {
            stop(&mut child);
            Ok(ExitCode::from(1))
        }
        Err(_) => {
            // Our stdout went away (the parent disconnected): stop the child.
            stop(&mut child);
            Ok(ExitCode::from(1))
        }
    }
}
