//! `picklewarden scan PATH...`: files and folders (recursive), each classified by content
//! (`picklewarden::formats::container`): a pickle-bearing format checked under its format's
//! built-in policy (or `--policy`), in parallel across files, with its verdict (clean,
//! refused, incomplete), the reason and its severity, and every global its pickles name; a
//! safetensors file checked and clean; anything else skipped (counted, listed in JSON).
//! `--trust` prints instead a policy file that would accept what was refused
//! (`scan_trust.rs`); the reports are `scan_report.rs`.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use picklewarden::formats::container::{
    scan_reader, FileReport, ModelLimits, ScanOptions, Severity, Verdict,
};

use super::scan_report::{json_report, sarif_report, text_report};
use super::scan_trust::{trust_base, trust_toml};
use super::Fatal;

/// Output formats of `scan`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum OutFormat {
    /// A table for people: refusals first, the worst first; skipped files in one line.
    Text,
    /// `{"files": [{"path", "format", "verdict", "severity", "policy", "reason", "findings",
    /// "globals", "pickles"}], "summary": {...}}`.
    Json,
    /// SARIF 2.1.0, for code-scanning services.
    Sarif,
}

/// What fails the scan (`--fail-on`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FailOn {
    /// Only a file with a global known to run code (severity `code`).
    Code,
    /// A file of severity `code` or `untrusted` (a class outside the policy).
    Untrusted,
    /// Any refused file (exit 1), or, with none, any incomplete one (exit 3).
    Any,
}

/// Options of `scan`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// Files or folders (read recursively; symbolic links to folders are not followed).
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: OutFormat,
    /// Check every pickle under this policy (a built-in name or a TOML file) instead of the
    /// built-in policy of each file's format (torch, numpy, model).
    #[arg(long, value_name = "NAME|FILE")]
    policy: Option<String>,
    /// Print, instead of the report, a complete policy file (TOML) that would accept what was
    /// refused: the policy the files were checked under plus a `record` entry for each refused
    /// global, with the files and offsets that need it (and the Python 2 string setting when
    /// a file needs it); a global known to run code is left commented out, under a warning.
    #[arg(long)]
    trust: bool,
    /// What makes the exit status 1: `code` (a refusal of severity code: a global known to
    /// run code), `untrusted` (code, or a class outside the policy), or `any` refusal.
    #[arg(long, value_enum, default_value = "any", value_name = "SEVERITY")]
    fail_on: FailOn,
    /// Read every file that is no container (torch, numpy, joblib, safetensors) as a plain
    /// pickle, as content did not decide it: nothing is skipped, and a file that is no pickle
    /// is refused (not_a_pickle).
    #[arg(long)]
    all_as_pickle: bool,
    /// Files scanned at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Largest file read whole (zip archives are read through their directory, safetensors
    /// files through their header, files that are not pickle-bearing only as far as it takes
    /// to tell; none of these is bounded by this), e.g. `4G`.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = super::parse_size)]
    max_file_bytes: u64,
}

/// One file's outcome.
pub(crate) enum Outcome {
    Report(Box<FileReport>),
    Io(String),
}

pub(crate) fn run(opts: &Opts) -> ExitCode {
    match scan_all(opts) {
        Ok(code) => code,
        Err(Fatal(msg)) => {
            let _ = writeln!(io::stderr().lock(), "picklewarden: error: {msg}");
            ExitCode::from(2)
        }
    }
}

fn scan_all(opts: &Opts) -> Result<ExitCode, Fatal> {
    let policy = match &opts.policy {
        None => None,
        Some(name) => Some(load_policy(name)?),
    };
    let options = ScanOptions::new()
        .policy(policy)
        .limits(ModelLimits::default())
        .all_as_pickle(opts.all_as_pickle);
    let files = collect(&opts.paths)?;
    let outcomes = scan_parallel(&files, opts, &options);
    let mut out = io::stdout().lock();
    let written = if opts.trust {
        let base = trust_base(opts.policy.as_deref(), &outcomes)?;
        out.write_all(trust_toml(&files, &outcomes, &base).as_bytes())
    } else {
        match opts.format {
            OutFormat::Text => out.write_all(text_report(&files, &outcomes).as_bytes()),
            OutFormat::Json => writeln!(out, "{}", json_report(&files, &outcomes)),
            OutFormat::Sarif => writeln!(out, "{}", sarif_report(&files, &outcomes)),
        }
    };
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Fatal(format!("cannot write output: {e}"))),
    }
    Ok(ExitCode::from(exit_status(&outcomes, opts.fail_on)))
}

/// The exit status from the files checked (a skipped file never counts): 2 when one could not
/// be read; else 1 when a refusal reaches `--fail-on`'s severity; else, under `any`, 3 when
/// one is incomplete; else 0.
fn exit_status(outcomes: &[Outcome], fail_on: FailOn) -> u8 {
    let reports = || {
        outcomes.iter().filter_map(|o| match o {
            Outcome::Report(r) => Some(r),
            Outcome::Io(_) => None,
        })
    };
    if outcomes.iter().any(|o| matches!(o, Outcome::Io(_))) {
        return 2;
    }
    let threshold = match fail_on {
        FailOn::Code => Some(Severity::Code),
        FailOn::Untrusted => Some(Severity::Untrusted),
        FailOn::Any => None,
    };
    let fails = |r: &FileReport| {
        r.verdict == Verdict::Refused
            && threshold.is_none_or(|t| r.severity.is_some_and(|s| s >= t))
    };
    if reports().any(|r| fails(r)) {
        1
    } else if fail_on == FailOn::Any && reports().any(|r| r.verdict == Verdict::Incomplete) {
        3
    } else {
        0
    }
}

fn load_policy(name: &str) -> Result<picklewarden::Policy, Fatal> {
    if let Some(p) = picklewarden::Policy::builtin(name) {
        return Ok(p);
    }
    let text = std::fs::read_to_string(name).map_err(|e| {
        Fatal(format!(
            "no built-in policy {name:?} and cannot read it: {e}"
        ))
    })?;
    picklewarden::Policy::from_toml_str(&text).map_err(|e| Fatal(format!("{name}: {e}")))
}

/// The files under `paths`, folders walked with an explicit stack, in a sorted order.
fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Fatal> {
    let mut files = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| Fatal(format!("cannot read {}: {e}", p.display())))?;
        if !meta.is_dir() {
            files.push(p.clone());
            continue;
        }
        let mut stack = vec![p.clone()];
        let mut found = Vec::new();
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| Fatal(format!("cannot read {}: {e}", dir.display())))?;
            for entry in entries {
                let entry =
                    entry.map_err(|e| Fatal(format!("cannot read {}: {e}", dir.display())))?;
                let ty = entry
                    .file_type()
                    .map_err(|e| Fatal(format!("cannot read {}: {e}", dir.display())))?;
                if ty.is_dir() {
                    stack.push(entry.path());
                } else if ty.is_file() {
                    found.push(entry.path());
                }
            }
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Scans `files` on `--jobs` threads; a progress count on standard error when it is a
/// terminal and there is more than one file.
fn scan_parallel(files: &[PathBuf], opts: &Opts, options: &ScanOptions) -> Vec<Outcome> {
    let jobs = opts
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .clamp(1, 256)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> =
        Mutex::new(std::iter::repeat_with(|| None).take(files.len()).collect());
    let progress = files.len() > 1 && io::stderr().is_terminal();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let outcome = scan_one(path, opts.max_file_bytes, options);
                if let Ok(mut r) = results.lock() {
                    if let Some(slot) = r.get_mut(i) {
                        *slot = Some(outcome);
                    }
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if progress {
                    let _ = write!(io::stderr().lock(), "\rscanned {n}/{}", files.len());
                }
            });
        }
    });
    if progress {
        let _ = writeln!(io::stderr().lock());
    }
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Outcome::Io("not scanned".into())))
        .collect()
}

fn scan_one(path: &Path, max_file_bytes: u64, options: &ScanOptions) -> Outcome {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Outcome::Io(e.to_string()),
    };
    match scan_reader(BufReader::new(file), max_file_bytes, options) {
        Ok(r) => Outcome::Report(Box::new(r)),
        Err(e) => Outcome::Io(e.to_string()),
    }
}
