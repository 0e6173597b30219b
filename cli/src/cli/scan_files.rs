//! `picklewarden scan PATH...`: model files and pickles, files and folders (recursive), each
//! detected by content (torch zip, TorchScript, legacy torch, npy, npz, joblib, pickle) and
//! checked under its format's built-in policy (or `--policy`), in parallel across files.
//! For each file: its format, its verdict (clean, refused, incomplete), the reason, and every
//! global its pickles name with the offset and whether the policy allows it. `--trust` prints
//! instead a policy file that would accept what was refused.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use clap::{Args, ValueEnum};
use picklewarden::formats::container::{
    scan_reader, FileReport, Finding, ModelLimits, ScanOptions, Verdict,
};
use serde_json::{json, Value};

use super::Fatal;

/// Output formats of `scan`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum OutFormat {
    /// A table for people.
    Text,
    /// `{"files": [{"path", "format", "verdict", "policy", "reason", "findings", "globals",
    /// "pickles"}]}`.
    Json,
    /// SARIF 2.1.0, for code-scanning services.
    Sarif,
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
    /// built-in policy of each file's format (torch, numpy, data).
    #[arg(long, value_name = "NAME|FILE")]
    policy: Option<String>,
    /// Print, instead of the report, a complete policy file (TOML) that would accept what was
    /// refused: the policy the files were checked under plus a `record` entry for each refused
    /// global, with the files and offsets that need it; a global known to run code is left
    /// commented out, under a warning.
    #[arg(long)]
    trust: bool,
    /// Files scanned at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Largest file read whole (zip archives are read through their directory and are not
    /// bounded by this), e.g. `4G`.
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = super::parse_size)]
    max_file_bytes: u64,
}

/// One file's outcome.
enum Outcome {
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
        .limits(ModelLimits::default());
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
    let worst = outcomes.iter().fold(0u8, |w, o| {
        w.max(match o {
            Outcome::Io(_) => 3,
            Outcome::Report(r) => match r.verdict {
                Verdict::Clean => 0,
                Verdict::Incomplete => 1,
                Verdict::Refused => 2,
            },
        })
    });
    Ok(ExitCode::from(match worst {
        0 => 0,
        1 => 3,
        2 => 1,
        _ => 2,
    }))
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

fn finding_json(f: &Finding) -> Value {
    json!({
        "kind": f.kind,
        "category": f.category,
        "message": f.message,
        "entry": f.entry,
        "offset": f.offset,
    })
}

fn json_report(files: &[PathBuf], outcomes: &[Outcome]) -> Value {
    let list: Vec<Value> = files
        .iter()
        .zip(outcomes)
        .map(|(path, o)| match o {
            Outcome::Io(e) => json!({
                "path": path.display().to_string(),
                "format": null,
                "verdict": "error",
                "reason": {"kind": "io", "category": "io", "message": e, "entry": "", "offset": null},
                "globals": [],
            }),
            Outcome::Report(r) => json!({
                "path": path.display().to_string(),
                "format": r.format.name(),
                "verdict": r.verdict.name(),
                "policy": r.policy,
                "reason": r.reason.as_ref().map(finding_json),
                "findings": r.findings.iter().map(finding_json).collect::<Vec<_>>(),
                "globals": r.globals.iter().map(|g| json!({
                    "entry": g.entry,
                    "module": g.module,
                    "name": g.name,
                    "offset": g.offset,
                    "allowed": g.allowed,
                    "runs_code": g.runs_code,
                })).collect::<Vec<_>>(),
                "pickles": r.pickles,
            }),
        })
        .collect();
    json!({ "files": list })
}

fn text_report(files: &[PathBuf], outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let (mut clean, mut incomplete, mut refused, mut unreadable) = (0, 0, 0, 0);
    for (path, o) in files.iter().zip(outcomes) {
        match o {
            Outcome::Io(e) => {
                unreadable += 1;
                let _ = writeln!(s, "{:<10} {:<13} {}  ({e})", "ERROR", "-", path.display());
            }
            Outcome::Report(r) => {
                match r.verdict {
                    Verdict::Clean => clean += 1,
                    Verdict::Incomplete => incomplete += 1,
                    Verdict::Refused => refused += 1,
                }
                let _ = write!(
                    s,
                    "{:<10} {:<13} {}",
                    r.verdict.name().to_uppercase(),
                    r.format.name(),
                    path.display()
                );
                if let Some(f) = &r.reason {
                    // `in ENTRY, offset 0x..` (an entry's name may itself end in `at 0x..`).
                    let at = match (f.entry.is_empty(), f.offset) {
                        (true, Some(o)) => format!(" at {o:#x}"),
                        (false, Some(o)) => format!(", offset {o:#x}"),
                        (_, None) => String::new(),
                    };
                    let entry = if f.entry.is_empty() {
                        String::new()
                    } else {
                        format!(" in {}", shown_entry(&f.entry))
                    };
                    let _ = write!(s, "  ({}{entry}{at}: {})", f.kind, f.message);
                }
                s.push('\n');
                if r.verdict != Verdict::Clean {
                    for g in &r.globals {
                        let _ = writeln!(
                            s,
                            "    {:>10}  {}{}.{}  {}{}",
                            format!("{:#x}", g.offset),
                            if g.entry.is_empty() {
                                String::new()
                            } else {
                                format!("{}: ", shown_entry(&g.entry))
                            },
                            g.module,
                            g.name,
                            if g.allowed { "allowed" } else { "NOT ALLOWED" },
                            if g.runs_code { "  (runs code)" } else { "" },
                        );
                    }
                }
            }
        }
    }
    let _ = writeln!(
        s,
        "{} files: {} clean, {} refused, {} incomplete, {} unreadable",
        files.len(),
        clean,
        refused,
        incomplete,
        unreadable
    );
    s
}

/// An entry's name as the text report shows it: an npz member's pickle is named
/// `MEMBER:` in the JSON report, shown as `MEMBER` before the `: ` or `, offset` that follows.
fn shown_entry(entry: &str) -> &str {
    entry.strip_suffix(':').unwrap_or(entry)
}

fn sarif_report(files: &[PathBuf], outcomes: &[Outcome]) -> Value {
    let mut results = Vec::new();
    let mut rules: BTreeMap<String, String> = BTreeMap::new();
    // Offsets are within a pickle (a zip entry, a decompressed stream), not the file: they
    // go in the result's properties, not in a region of the file.
    let location = |path: &Path| json!([{ "physicalLocation": {"artifactLocation": {"uri": path.display().to_string()}} }]);
    for (path, o) in files.iter().zip(outcomes) {
        match o {
            Outcome::Io(e) => {
                rules.insert("io".into(), "The file could not be read".into());
                results.push(json!({
                    "ruleId": "io", "level": "error",
                    "message": {"text": e}, "locations": location(path),
                }));
            }
            Outcome::Report(r) => {
                for g in r.globals.iter().filter(|g| !g.allowed) {
                    rules.insert(
                        "global_not_allowed".into(),
                        "A pickle names a global the policy does not allow".into(),
                    );
                    let code = if g.runs_code {
                        " (known to run code)"
                    } else {
                        ""
                    };
                    results.push(json!({
                        "ruleId": "global_not_allowed",
                        "level": "error",
                        "message": {"text": format!(
                            "{}: global {}.{} is not allowed by policy {:?}{code}",
                            if g.entry.is_empty() { r.format.name() } else { &g.entry },
                            g.module, g.name, r.policy
                        )},
                        "locations": location(path),
                        "properties": {"pickleOffset": g.offset, "entry": g.entry},
                    }));
                }
                if let Some(f) = &r.reason {
                    if f.kind == "global_not_allowed" {
                        continue;
                    }
                    rules.insert(f.kind.clone(), f.category.to_owned());
                    results.push(json!({
                        "ruleId": f.kind,
                        "level": if r.verdict == Verdict::Refused { "error" } else { "warning" },
                        "message": {"text": format!("{} ({}): {}", r.format.name(), r.verdict.name(), f.message)},
                        "locations": location(path),
                        "properties": {"entry": f.entry, "offset": f.offset},
                    }));
                }
            }
        }
    }
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(id, text)| json!({"id": id, "shortDescription": {"text": text}}))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "picklewarden",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "results": results,
        }],
    })
}

/// The policy `--trust` extends: its name and its TOML text. `--policy`'s (a built-in one or
/// the file), else the built-in policy the first refused file was checked under (`data` when
/// none was refused).
struct TrustBase {
    name: String,
    text: String,
}

fn trust_base(policy: Option<&str>, outcomes: &[Outcome]) -> Result<TrustBase, Fatal> {
    let checked_under = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Report(r) if r.verdict == Verdict::Refused => Some(r.policy.as_str()),
            _ => None,
        })
        .next();
    let name = policy.or(checked_under).unwrap_or("data");
    if let Some(text) = picklewarden::policy::builtin_toml(name) {
        return Ok(TrustBase {
            name: name.to_owned(),
            text: text.to_owned(),
        });
    }
    let text = std::fs::read_to_string(name)
        .map_err(|e| Fatal(format!("cannot read policy {name}: {e}")))?;
    let parsed =
        picklewarden::Policy::from_toml_str(&text).map_err(|e| Fatal(format!("{name}: {e}")))?;
    Ok(TrustBase {
        name: parsed.name,
        text,
    })
}

/// A complete policy file that accepts what was refused: `base`'s text (its top-level `name`
/// and `description` replaced) plus one `[[global]]` per refused global (as a `record`, which
/// runs nothing), with comments naming each file, pickle and offset that needs it. A global
/// known to run code is written commented out, under a warning. Files refused under another
/// policy than `base`'s are named in a comment, their globals left out.
fn trust_toml(files: &[PathBuf], outcomes: &[Outcome], base: &TrustBase) -> String {
    let mut needed: BTreeMap<(String, String), (bool, Vec<String>)> = BTreeMap::new();
    let mut other = Vec::new();
    let mut elsewhere = Vec::new();
    for (path, o) in files.iter().zip(outcomes) {
        let Outcome::Report(r) = o else { continue };
        if r.verdict == Verdict::Refused && r.policy != base.name {
            elsewhere.push(format!("{} (policy {:?})", path.display(), r.policy));
            continue;
        }
        for g in r.globals.iter().filter(|g| !g.allowed) {
            let e = needed
                .entry((g.module.clone(), g.name.clone()))
                .or_insert((g.runs_code, Vec::new()));
            let entry = if g.entry.is_empty() {
                String::new()
            } else {
                format!(" {}", shown_entry(&g.entry))
            };
            e.1.push(format!(
                "{}{entry} at offset {:#x}",
                path.display(),
                g.offset
            ));
        }
        if let Some(f) = &r.reason {
            if f.kind != "global_not_allowed" {
                other.push(format!("{}: {} ({})", path.display(), f.kind, f.message));
            }
        }
    }
    let mut s = format!(
        "# A policy made by `picklewarden scan --trust`: policy {:?} and the globals these \
         files name\n# that it refused. Use it with `picklewarden check --policy FILE` or \
         `picklewarden scan --policy FILE`.\n# Each added global is a record: picklewarden keeps \
         the call as data and runs nothing;\n# trusting it means trusting whatever program \
         loads these files to call it.\n",
        base.name
    );
    let _ = writeln!(s, "name = {}", toml_str(&format!("{}-trusted", base.name)));
    let _ = writeln!(
        s,
        "description = {}",
        toml_str(&format!(
            "{} and the globals picklewarden scan --trust listed",
            base.name
        ))
    );
    let _ = writeln!(s, "\n# ---- policy {:?} ----", base.name);
    // Top-level keys come before the first table (`[limits]`, `[[global]]`, ...).
    let mut top_level = true;
    for line in base.text.lines() {
        top_level &= !line.trim_start().starts_with('[');
        if !(top_level && (is_top_key(line, "name") || is_top_key(line, "description"))) {
            s.push_str(line);
            s.push('\n');
        }
    }
    let _ = writeln!(s, "\n# ---- the globals these files need ----");
    for ((module, name), (runs_code, wheres)) in &needed {
        s.push('\n');
        for w in wheres.iter().take(20) {
            let _ = writeln!(s, "# needed by {w}");
        }
        if wheres.len() > 20 {
            let _ = writeln!(s, "# ... and {} more", wheres.len() - 20);
        }
        let entry = format!(
            "[[global]]\nmodule = {}\nname = {}\nconstructor = \"record\"",
            toml_str(module),
            toml_str(name)
        );
        if *runs_code {
            let _ = writeln!(
                s,
                "# WARNING: {module}.{name} runs code or touches the system when called: a file \
                 that needs it is\n# almost certainly an attack. Left out; do not add it."
            );
            for line in entry.lines() {
                let _ = writeln!(s, "# {line}");
            }
        } else {
            let _ = writeln!(s, "{entry}");
        }
    }
    if !other.is_empty() {
        s.push_str("\n# Refusals no policy entry can lift:\n");
        for o in other {
            let _ = writeln!(s, "# {}", o.replace('\n', " "));
        }
    }
    if !elsewhere.is_empty() {
        s.push_str(
            "\n# Refused under another policy (run `picklewarden scan --trust` on them alone):\n",
        );
        for o in elsewhere {
            let _ = writeln!(s, "# {o}");
        }
    }
    s
}

/// Whether `line` sets the top-level key `key` (`key = ...`), as a policy file's `name` and
/// `description` lines do.
fn is_top_key(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .is_some_and(|rest| rest.trim_start().starts_with('='))
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
