//! Command-line interface: options shared by the subcommands, input reading and exit codes.
//!
//! Exit status (documented in `--help` and docs/cli.md): 0 accepted, 1 refused (the reason on
//! stderr), 2 usage or I/O error.

mod check;
mod convert;
mod decode;
mod dis;
mod filter;
mod guard;
mod mitogen;
mod scan;
mod scan_files;
mod scan_report;
mod scan_trust;

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use picklewarden::{Document, Error, Limits, Policy};

const EXIT_STATUS: &str = "\
Exit status:
  0  accepted (decode: the value was written)
  1  refused: the input is malformed, truncated, over a limit or denied by the policy;
     the reason, its kind, category, byte offset and opcode are written to stderr
  2  usage error, unreadable policy file, or I/O error";

/// Decode Python pickle data from untrusted peers safely: no code runs, only allowlisted
/// globals are accepted, every resource is bounded.
#[derive(Parser, Debug)]
#[command(name = "picklewarden", version, about, after_help = EXIT_STATUS)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Fully decode a pickle under a policy, with every check, and discard the result.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden check tests/corpus/good/mixed_bag.p2.c.pkl\n",
        "  picklewarden check --policy strict --limit max_nesting_depth=50 data.pkl\n",
        "  cat stream.bin | picklewarden check --stream -\n\n",
        "Exit status:\n",
        "  0  accepted\n  1  refused (reason on stderr)\n  2  usage or I/O error"))]
    Check(check::Opts),
    /// Decode a pickle under a policy and print its value as typed JSON or Python-like repr.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden decode tests/corpus/good/mixed_bag.p2.c.pkl\n",
        "  picklewarden decode --format repr --policy strict data.pkl\n",
        "  picklewarden decode --stream --limit max_input_bytes=1M - < stream.bin\n\n",
        "Exit status:\n",
        "  0  decoded (the value is on stdout)\n  1  refused (reason on stderr)\n  2  usage or I/O error"))]
    Decode(decode::Opts),
    /// Model files and pickles, files and folders: each classified by content; pickle-bearing
    /// files (torch zip, TorchScript, legacy torch, torch tar, npy, npz, joblib, pickle)
    /// checked under their format's built-in policy, safetensors headers checked, the rest
    /// skipped; each file's verdict, a refusal's severity, and every global it names.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden scan tests/corpus/models\n",
        "  picklewarden scan --format json model.pt\n",
        "  picklewarden scan --format sarif checkpoints/ > scan.sarif\n",
        "  picklewarden scan --fail-on code ~/notebooks/\n",
        "  picklewarden scan --trust data.pkl > trusted.toml   # then check --policy ./trusted.toml\n\n",
        "Built-in policies: torch (torch.load(weights_only=True)'s allowlist, storages checked)\n",
        "for torch files, numpy for npy and npz, model (data plus numpy's and torch's globals)\n",
        "for joblib files and plain pickles. A zip archive is read through its directory: the\n",
        "storages of a checkpoint are not read. A file is a plain pickle only when its content\n",
        "parses as one; what carries no pickle is skipped (--all-as-pickle: read as a pickle).\n\n",
        "Severities, worst first: code (a global known to run code), untrusted (a class outside\n",
        "the policy), malformed, limit.\n\n",
        "Exit status (from the checked files; a skipped file never counts):\n",
        "  0  every checked file clean, or no refusal reaching --fail-on\n",
        "  1  a refusal reaching --fail-on (any refusal by default)\n",
        "  3  some file incomplete (part of it not understood), none refused (--fail-on any)\n",
        "  2  usage error, or a file could not be read"))]
    Scan(scan_files::Opts),
    /// A torch checkpoint's tensors as safetensors (names are key paths joined with `.`),
    /// after a clean scan, without running pickle code: the zip format, the legacy format and
    /// the older tar layout.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden convert model.pt model.safetensors\n",
        "  picklewarden convert --max-output 2G old_checkpoint.pth model.safetensors\n\n",
        "Exit status:\n",
        "  0  written\n  1  the checkpoint is refused or incomplete, or a dtype has no safetensors name\n",
        "  2  usage or I/O error"))]
    Convert(convert::Opts),
    /// Scan-only mode of one pickle: one validating pass, no values built; prints the
    /// verdict, the globals named and the opcode counts as JSON.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden scan-pickle tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl\n",
        "  picklewarden scan-pickle --policy strict --stream - < stream.bin\n\n",
        "The scan checks opcodes, frames, MARKs, the memo, every global and call against the\n",
        "policy, number and string syntax, UTF-8, and the limits it can see. Only `check` also\n",
        "checks constructor arguments, hashability, nesting depth and the value budgets.\n\n",
        "Exit status:\n",
        "  0  the scan accepted the input\n  1  refused (also in the JSON)\n  2  usage or I/O error"))]
    ScanPickle(scan::Opts),
    /// List a pickle's opcodes, one line each (offset, name, argument), as Python's
    /// `pickletools.dis` does; nothing is run and no policy applies.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden dis tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl\n",
        "  picklewarden dis - < stream.bin | less\n\n",
        "Text and bytes arguments show their first 64 bytes, escaped. A stream of pickles is\n",
        "listed one after another.\n\n",
        "Exit status:\n",
        "  0  listed to the end\n  1  stopped at a byte that is no opcode, or at an argument cut\n",
        "     short (reason on stderr)\n  2  usage or I/O error"))]
    Dis(dis::Opts),
    /// Validate a Mitogen stream frame by frame: accepted frames pass from stdin to stdout as
    /// picklewarden's canonical rewrite; a refused frame fails its call (or ends the stream, or
    /// is dropped), with an audit event on stderr.
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden filter --mitogen < child-stdout.bin > checked.bin\n",
        "  picklewarden filter --mitogen --policy mitogen-plus --on-reject drop < in > out\n\n",
        "Audit events are JSON lines on stderr (level from PICKLEWARDEN_LOG, default warn).\n\n",
        "Exit status:\n",
        "  0  end of input; every refused frame failed only its call or was dropped\n",
        "  1  a frame was refused and the stream cut off, or the stream ended inside a frame\n",
        "  2  usage or I/O error"))]
    Filter(filter::Opts),
    /// Run a Mitogen child behind the filter: stdin is relayed unchanged, the child's stdout
    /// passes the bootstrap handshake and then every frame is validated before it is relayed.
    #[command(after_help = concat!(
        "Examples (the command a Mitogen parent starts; run by hand, guard waits for the\n",
        "parent's bootstrap handshake on stdin):\n",
        "  # in the parent's Python:\n",
        "  #   router.local(python_path=[\"picklewarden\", \"guard\", \"--\", \"python3\"])\n",
        "  picklewarden guard -- python3\n",
        "  picklewarden guard --capture /tmp/cap --policy mitogen-plus -- python3\n\n",
        "Exit status:\n",
        "  the child's exit status when its stdout ends cleanly after the handshake\n",
        "  the child's status when it ends inside the handshake (1 if that was 0)\n",
        "  1  a frame was refused, or the handshake overran: the child was killed\n",
        "  2  usage error, or the command could not be started"))]
    Guard(guard::Opts),
    /// Run the sidecar validation service: HTTP on a Unix socket (POST /v1/check, /v1/decode;
    /// GET /v1/policies, /healthz, /metrics), sandboxed after start-up, one audit event per
    /// verdict.
    #[cfg(feature = "service")]
    #[command(after_help = concat!(
        "Examples:\n",
        "  picklewarden serve --listen unix:/run/picklewarden.sock\n",
        "  picklewarden serve --listen unix:/tmp/pw.sock --listen tcp:127.0.0.1:8750 \\\n",
        "      --policy-dir /etc/picklewarden/policies --audit-log /var/log/picklewarden/audit.jsonl\n",
        "  curl --unix-socket /tmp/pw.sock --data-binary @data.pkl 'http://x/v1/check?policy=data'\n\n",
        "After binding its sockets and reading its policies the server sandboxes itself (no new\n",
        "privileges, Landlock with no file access, a seccomp allowlist, rlimits) and refuses to\n",
        "start if it cannot, unless --insecure-no-sandbox. SIGTERM or SIGINT: stop accepting,\n",
        "finish in-flight requests, exit 0.\n\n",
        "Exit status:\n",
        "  0  stopped by SIGTERM/SIGINT after finishing in-flight requests\n",
        "  2  could not start (usage, policies, sockets, sandbox)"))]
    Serve(crate::service::ServeOpts),
    /// Apply the service's sandbox to this process and report, operation by operation, that
    /// it is enforced (file open, process spawn, socket, ...) while what the server needs
    /// still works.
    #[cfg(feature = "service")]
    #[command(after_help = concat!(
        "Exit status:\n",
        "  0  every layer applied, every forbidden operation denied\n",
        "  1  some layer or probe failed (see the JSON report)"))]
    SandboxCheck(crate::service::SandboxCheckOpts),
}

/// Options shared by `check` and `decode`.
#[derive(Args, Debug)]
pub(crate) struct Common {
    /// Policy: a built-in name or a TOML policy file (help text: [`policy_help`]).
    #[arg(long, value_name = "NAME|FILE", help = policy_help())]
    policy: Option<String>,
    /// Override one limit, e.g. `max_nesting_depth=100` or `max_input_bytes=64M`
    /// (repeatable). Names: max_input_bytes, max_nesting_depth, max_stack_len,
    /// max_memo_entries, max_container_items, max_nodes, max_alloc_bytes,
    /// max_long_text_digits, max_long_bytes, max_opcodes, max_key_steps,
    /// max_key_steps_per_byte, max_key_collisions.
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    limits: Vec<String>,
    /// How Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) decode, in place of the
    /// policy's `python2_str` setting: `ascii` (str; `data` and `strict`, as CPython's
    /// pickle.loads by default), `latin1` or `utf-8` (str, as `encoding=...`), or `bytes`
    /// (`mitogen`, as `encoding="bytes"`).
    #[arg(long, value_enum, value_name = "ENCODING")]
    python2_str: Option<Python2StrOpt>,
    /// The input holds several pickles one after another sharing one memo (as Mitogen's
    /// unpickle_iter reads a message); without it, anything after the first STOP is refused.
    #[arg(long)]
    stream: bool,
    /// Allow bytes after the pickle's STOP (padding or a newline at the end of a file, as
    /// numpy payloads from Python 2 have); they are left unread, and their offset and length
    /// reported (on standard error, in typed JSON as `trailing`, in `scan-pickle`'s report).
    /// Without it they are refused (trailing_data).
    #[arg(long, conflicts_with = "stream")]
    allow_trailing: bool,
    /// Out-of-band buffer for NEXT_BUFFER (protocol 5), in order (repeatable).
    #[arg(long = "buffer", value_name = "FILE")]
    buffers: Vec<PathBuf>,
    /// The pickle file, or `-` for standard input (the default when standard input is not a
    /// terminal).
    #[arg(value_name = "FILE|-")]
    input: Option<PathBuf>,
}

/// The help of `--policy`, with the built-in names taken from the library's list.
fn policy_help() -> String {
    format!(
        "Policy: a built-in name ({}) or a TOML policy file (a built-in name wins: `./data` \
         names a file) [default: data; for `decode --mitogen`, mitogen]",
        picklewarden::policy::BUILTIN_POLICIES.join(", ")
    )
}

impl Common {
    /// The input's path (`-`: standard input, also when none was given and standard input is
    /// a pipe or a file; given none on a terminal, a usage error rather than a wait for
    /// typed bytes).
    pub(crate) fn input(&self) -> Result<&Path, Fatal> {
        input_path(self.input.as_deref())
    }
}

/// An optional FILE argument: the path, or `-` (standard input) when none was given and
/// standard input is a pipe or a file; none on a terminal is a usage error rather than a wait
/// for typed bytes.
pub(crate) fn input_path(given: Option<&Path>) -> Result<&Path, Fatal> {
    match given {
        Some(path) => Ok(path),
        None if io::stdin().is_terminal() => Err(Fatal(
            "no input: give a FILE, or `-` (or a pipe) for standard input".into(),
        )),
        None => Ok(Path::new("-")),
    }
}

/// The values of `--python2-str`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Python2StrOpt {
    /// str, refusing a byte above 0x7F (`invalid_ascii`).
    Ascii,
    /// str, every byte its code point.
    Latin1,
    /// str, refusing invalid UTF-8.
    #[value(name = "utf-8")]
    Utf8,
    /// bytes.
    Bytes,
}

impl Python2StrOpt {
    fn setting(self) -> picklewarden::policy::Python2Str {
        use picklewarden::policy::{Python2Str, TextEncoding};
        match self {
            Python2StrOpt::Ascii => Python2Str::Str(TextEncoding::Ascii),
            Python2StrOpt::Latin1 => Python2Str::Str(TextEncoding::Latin1),
            Python2StrOpt::Utf8 => Python2Str::Str(TextEncoding::Utf8),
            Python2StrOpt::Bytes => Python2Str::Bytes,
        }
    }
}

/// A usage or I/O failure (exit 2).
pub(crate) struct Fatal(pub(crate) String);

/// A byte-count option: digits, `_` allowed, with an optional K, M or G in either case
/// (binary: 1K = 1024), as `--limit` reads sizes ([`picklewarden::limits::parse_size`]).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    picklewarden::limits::parse_size(s).ok_or_else(|| format!("bad size {s:?}"))
}

/// [`parse_size`] for an option held as `usize`.
pub(crate) fn parse_size_usize(s: &str) -> Result<usize, String> {
    usize::try_from(parse_size(s)?).map_err(|_| format!("size {s:?} is too large"))
}

impl Common {
    fn policy(&self) -> Result<Policy, Fatal> {
        self.policy_or("data")
    }

    /// The policy named by `--policy`, or the built-in `default` without it.
    fn policy_or(&self, default: &str) -> Result<Policy, Fatal> {
        let mut policy = self.named_policy(default)?;
        if let Some(p2) = self.python2_str {
            policy.python2_str = p2.setting();
        }
        Ok(policy)
    }

    fn named_policy(&self, default: &str) -> Result<Policy, Fatal> {
        let name = self.policy.as_deref().unwrap_or(default);
        if let Some(p) = Policy::builtin(name) {
            return Ok(p);
        }
        let path = Path::new(name);
        if !path.exists() {
            // A name with a separator or an extension was meant as a file.
            return Err(Fatal(if name.contains('/') || name.contains('.') {
                format!("no policy file {}", path.display())
            } else {
                format!(
                    "no built-in policy {:?} (built-in: {}) and no such file",
                    name,
                    picklewarden::policy::BUILTIN_POLICIES.join(", ")
                )
            }));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Fatal(format!("cannot read policy {}: {e}", path.display())))?;
        Policy::from_toml_str(&text).map_err(|e| Fatal(format!("{}: {e}", path.display())))
    }

    fn limits(&self, policy: &Policy) -> Result<Limits, Fatal> {
        let mut limits = policy.limits;
        for l in &self.limits {
            limits
                .set_from_str(l)
                .map_err(|e| Fatal(format!("--limit: {e}")))?;
        }
        Ok(limits)
    }
}

/// Reads at most `max + 1` bytes, so that an oversized input is refused by the decoder's
/// `max_input_bytes` check without reading it all.
///
/// A regular file (standard input included, when it is one) is read into a buffer sized once
/// from its length, so that the read does not grow and copy the buffer step by step (and
/// fault in its pages again at each step); a pipe's buffer grows as it fills.
fn read_input(path: &Path, max: u64) -> Result<Vec<u8>, Fatal> {
    let mut buf = Vec::new();
    let cap = max.saturating_add(1);
    // The capacity a regular file of `len` bytes needs: its bytes (at most `cap`), and one
    // more so that the read finds the end without growing the buffer.
    let size_for = |len: u64| usize::try_from(len.min(cap).saturating_add(1)).unwrap_or(0);
    let res = if path.as_os_str() == "-" {
        use std::os::fd::AsFd;
        // A second descriptor of the same open file, only for its length.
        let len = io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .and_then(|f| f.metadata())
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map_or(0, |m| m.len());
        let _ = buf.try_reserve_exact(size_for(len));
        io::stdin().lock().take(cap).read_to_end(&mut buf)
    } else {
        File::open(path).and_then(|f| {
            if let Ok(m) = f.metadata().map(|m| m.is_file().then_some(m.len())) {
                let _ = buf.try_reserve_exact(size_for(m.unwrap_or(0)));
            }
            f.take(cap).read_to_end(&mut buf)
        })
    };
    res.map_err(|e| Fatal(format!("cannot read {}: {e}", path.display())))?;
    Ok(buf)
}

/// Decodes the input named by `common`, then hands the document to `then`.
fn with_document(
    common: &Common,
    then: impl FnOnce(&Document<'_>) -> io::Result<()>,
) -> Result<Result<(), Error>, Fatal> {
    let policy = common.policy()?;
    let limits = common.limits(&policy)?;
    let input = read_input(common.input()?, limits.max_input_bytes)?;
    let mut buffers = Vec::new();
    for b in &common.buffers {
        buffers.push(read_input(b, limits.max_input_bytes)?);
    }
    let mut decoder = picklewarden::Decoder::new(&input, &policy)
        .limits(limits)
        .allow_trailing(common.allow_trailing);
    if !common.buffers.is_empty() {
        decoder = decoder.buffers(buffers.iter().map(Vec::as_slice).collect());
    }
    let doc = match if common.stream {
        decoder.decode_stream()
    } else {
        decoder.decode()
    } {
        Ok(doc) => doc,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(t) = doc.trailing() {
        report_trailing(common, t);
    }
    match then(&doc) {
        Ok(()) => Ok(Ok(())),
        // Quiet exit when the reader of our output went away (e.g. `| head`).
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Ok(())),
        Err(e) => Err(Fatal(format!("cannot write output: {e}"))),
    }
}

/// The note that bytes after STOP were left unread (`--allow-trailing`).
fn report_trailing(common: &Common, t: picklewarden::Trailing) {
    let _ = writeln!(
        io::stderr().lock(),
        "picklewarden: {}: {} bytes after STOP left unread, from offset {} ({:#x}) (--allow-trailing)",
        common.input().unwrap_or(Path::new("-")).display(),
        t.len,
        t.offset,
        t.offset,
    );
}

fn report_refusal(common: &Common, e: &Error) {
    let mut stderr = io::stderr().lock();
    // For a limit, the limit's name says more than the kind (which repeats the category).
    let what = match e.kind() {
        picklewarden::ErrorKind::LimitExceeded { limit, .. } => limit.name(),
        kind => kind.name(),
    };
    // Bytes after STOP are most often the next pickle of a Pickler that dumped several.
    let hint = match e.kind() {
        picklewarden::ErrorKind::TrailingData if !common.stream => {
            " (several pickles one after another? --stream reads them all; padding after the \
             pickle? --allow-trailing leaves it unread)"
        }
        // A model file (torch zip, npy, a compressed joblib file) is read by `scan`, which
        // knows its container.
        picklewarden::ErrorKind::NotAPickle { looks_like, .. }
            if looks_like.starts_with("a zip archive")
                || looks_like.starts_with("a NumPy")
                || looks_like.ends_with("-compressed data") =>
        {
            " (use `picklewarden scan` for model files)"
        }
        _ => "",
    };
    let _ = writeln!(
        stderr,
        "picklewarden: {}: refused ({}, {what}): {e}{hint}",
        common.input().unwrap_or(Path::new("-")).display(),
        e.category().name(),
    );
}

pub(crate) fn run(cli: Cli) -> ExitCode {
    let (common, result) = match &cli.command {
        Command::Check(o) => (&o.common, check::run(o)),
        Command::Scan(o) => return scan_files::run(o),
        Command::Convert(o) => return convert::run(o),
        Command::ScanPickle(o) => (&o.common, scan::run(o)),
        Command::Dis(o) => return dis::exit(o),
        Command::Decode(o) if o.mitogen => return exit_of(decode::run_mitogen(o)),
        Command::Decode(o) => (&o.common, decode::run(o)),
        Command::Filter(o) => return exit_of(filter::run(o)),
        #[cfg(feature = "service")]
        Command::Serve(o) => {
            return match crate::service::run(o) {
                Ok(()) => ExitCode::SUCCESS,
                Err(Fatal(msg)) => {
                    crate::service::report_fatal(&msg);
                    ExitCode::from(2)
                }
            }
        }
        #[cfg(feature = "service")]
        Command::SandboxCheck(o) => return crate::service::sandbox_check(o),
        Command::Guard(o) => {
            return guard::run(o).unwrap_or_else(|Fatal(msg)| {
                let _ = writeln!(io::stderr().lock(), "picklewarden: error: {msg}");
                ExitCode::from(2)
            })
        }
    };
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            report_refusal(common, &e);
            ExitCode::from(1)
        }
        Err(Fatal(msg)) => {
            let _ = writeln!(io::stderr().lock(), "picklewarden: error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Exit status of a command that reports acceptance as a bool (refusals already reported).
fn exit_of(result: Result<bool, Fatal>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Fatal(msg)) => {
            let _ = writeln!(io::stderr().lock(), "picklewarden: error: {msg}");
            ExitCode::from(2)
        }
    }
}

/// The level names `PICKLEWARDEN_LOG` accepts, as `tracing`'s `LevelFilter` spells them.
const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The target of audit events (verdicts, refused frames, handshake refusals).
const AUDIT_TARGET: &str = "picklewarden::audit";

/// The event filter from `PICKLEWARDEN_LOG`, or `default` (a level) when it is unset or empty.
///
/// The value is a level (`LOG_LEVELS`, any case) or a comma-separated list of `LEVEL` and
/// `TARGET=LEVEL` directives (`picklewarden::audit=info`), a target being Rust path segments
/// joined by `::`. Anything else is refused (exit 2) instead of being read as
/// `tracing_subscriber`'s `EnvFilter` would read it: a bare word such as `infoo` is a valid
/// `EnvFilter` directive that enables one target nobody logs to, which would silently switch
/// off every audit event. For the same reason audit events cannot be lost to a mistyped
/// target (`picklewardn::audit=info`): unless a bare level or a directive for
/// `picklewarden::audit` (or `picklewarden`) is given, `picklewarden::audit` stays at
/// `default`. Turning audit events off takes saying so: `off`, or `picklewarden::audit=off`.
pub(crate) fn log_filter(default: &str) -> Result<tracing_subscriber::EnvFilter, Fatal> {
    match std::env::var("PICKLEWARDEN_LOG") {
        Ok(v) if !v.trim().is_empty() => parse_log_filter(&v, default),
        Ok(_) | Err(std::env::VarError::NotPresent) => parse_log_filter(default, default),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Fatal("PICKLEWARDEN_LOG is not valid UTF-8".into()))
        }
    }
}

/// [`log_filter`]'s check and parse of one value (`default`: the audit level kept when the
/// value does not set it).
fn parse_log_filter(value: &str, default: &str) -> Result<tracing_subscriber::EnvFilter, Fatal> {
    let is_level = |l: &str| LOG_LEVELS.iter().any(|n| n.eq_ignore_ascii_case(l.trim()));
    let is_target = |t: &str| {
        t.split("::").all(|seg| {
            !seg.is_empty() && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    };
    let bad = || {
        Fatal(format!(
            "PICKLEWARDEN_LOG={value:?}: expected a level ({}) or TARGET=LEVEL directives \
             (TARGET as a Rust path, e.g. picklewarden::audit), comma-separated",
            LOG_LEVELS.join(", ")
        ))
    };
    // Rebuilt without spaces around a directive, its target or its level: `EnvFilter` would
    // read ` warn` as a target name, and `picklewarden::audit =warn` as a target nobody logs to.
    let mut directives: Vec<String> = Vec::new();
    let mut sets_audit = false;
    for directive in value.split(',').map(str::trim) {
        match directive.split_once('=') {
            None if is_level(directive) => {
                sets_audit = true;
                directives.push(directive.to_string());
            }
            Some((target, level)) if is_target(target.trim()) && is_level(level) => {
                let t = target.trim();
                sets_audit |= t == AUDIT_TARGET || AUDIT_TARGET.starts_with(&format!("{t}::"));
                directives.push(format!("{t}={}", level.trim()));
            }
            _ => return Err(bad()),
        }
    }
    if !sets_audit {
        directives.push(format!("{AUDIT_TARGET}={default}"));
    }
    tracing_subscriber::EnvFilter::builder()
        .parse(directives.join(","))
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        super::Cli::command().debug_assert();
    }

    /// `PICKLEWARDEN_LOG` values: levels and directives load, typos and junk are refused, and
    /// a directive list that does not set the audit target keeps it at the default.
    #[test]
    fn log_filter_refuses_what_is_not_a_level_or_directive() {
        let parse = |v: &str| super::parse_log_filter(v, "warn").map(|f| f.to_string());
        assert_eq!(parse("info").ok().as_deref(), Some("info"));
        assert_eq!(parse("DEBUG").ok().as_deref(), Some("debug"));
        assert_eq!(parse(" warn ").ok().as_deref(), Some("warn"));
        assert_eq!(parse("off").ok().as_deref(), Some("off"));
        assert!(parse("warn,picklewarden::audit=info").is_ok());
        for bad in [
            "infoo",
            "bogus%%",
            "warn,",
            "=info",
            "picklewarden=loud",
            "a b=info",
            "picklewarden:audit=warn",
            "::=warn",
            "picklewarden::=warn",
        ] {
            let e = parse(bad).err().map(|e| e.0).unwrap_or_default();
            assert!(e.contains("PICKLEWARDEN_LOG"), "{bad:?}: {e:?}");
        }
        // A mistyped target does not take the audit events with it.
        let f = parse("picklewardn::audit=info").unwrap_or_default();
        assert!(f.contains("picklewarden::audit=warn"), "{f}");
        let f = parse("hyper=debug").unwrap_or_default();
        assert!(f.contains("picklewarden::audit=warn"), "{f}");
        // Spaces or tabs around `=` are not part of the target.
        for v in ["picklewarden::audit =info", "picklewarden\t= info"] {
            let f = parse(v).unwrap_or_default();
            assert!(
                f.contains("picklewarden::audit=info") || f.contains("picklewarden=info"),
                "{v}: {f}"
            );
            assert!(!f.contains(' ') && !f.contains('\t'), "{v}: {f}");
        }
        // Naming the audit target, or a prefix of it, is taken as meant.
        for v in ["picklewarden::audit=off", "picklewarden=error"] {
            let f = parse(v).unwrap_or_default();
            assert!(!f.contains("picklewarden::audit=warn"), "{v}: {f}");
        }
    }
}
