//! `scan --trust`: a complete policy file that accepts what the scan refused, so that scan,
//! trust, scan again is clean in one round for every file whose globals run no code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use picklewarden::formats::container::Verdict;
use picklewarden::policy::is_python_name;

use super::scan_files::Outcome;
use super::scan_report::shown_entry;
use super::Fatal;

/// The policy `--trust` extends: its name and its TOML text. `--policy`'s (a built-in one or
/// the file), else the built-in policy the first refused file was checked under (`model`
/// when none was refused).
pub(crate) struct TrustBase {
    name: String,
    text: String,
}

pub(crate) fn trust_base(policy: Option<&str>, outcomes: &[Outcome]) -> Result<TrustBase, Fatal> {
    let checked_under = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Report(r) if r.verdict == Verdict::Refused => Some(r.policy.as_str()),
            _ => None,
        })
        .next();
    let name = policy.or(checked_under).unwrap_or("model");
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

/// The top-level keys `--trust` writes itself (the rest of the base is copied).
const REPLACED: [&str; 4] = ["name", "description", "python2_str", "python2_str_encoding"];

/// A complete policy file that accepts what was refused: `base`'s text (its top-level `name`
/// and `description` replaced) plus one `[[global]]` per refused global (as a `record`, which
/// runs nothing), with comments naming each file, pickle and offset that needs it; and, when a
/// file holds Python 2 strings that are not ASCII, `python2_str_encoding = "latin1"` (what
/// `pickle.loads(data, encoding="latin1")` and `numpy.load` read them as). A global known to
/// run code is written commented out, under a warning; one whose name could not be read is
/// named in a comment. Files refused under another policy than `base`'s are named in a
/// comment, their globals left out.
pub(crate) fn trust_toml(files: &[PathBuf], outcomes: &[Outcome], base: &TrustBase) -> String {
    let mut needed: BTreeMap<(String, String), (bool, Vec<String>)> = BTreeMap::new();
    let mut unreadable = Vec::new();
    let mut other = Vec::new();
    let mut elsewhere = Vec::new();
    let mut python2_text = Vec::new();
    for (path, o) in files.iter().zip(outcomes) {
        let Outcome::Report(r) = o else { continue };
        if r.verdict == Verdict::Refused && r.policy != base.name {
            elsewhere.push(format!("{} (policy {:?})", path.display(), r.policy));
            continue;
        }
        if r.python2_text {
            python2_text.push(path.display().to_string());
        }
        for g in r.globals.iter().filter(|g| !g.allowed) {
            let entry = if g.entry.is_empty() {
                String::new()
            } else {
                format!(" {}", shown_entry(&g.entry))
            };
            let at = format!("{}{entry} at offset {:#x}", path.display(), g.offset);
            if !is_python_name(&g.module) || !is_python_name(&g.name) {
                unreadable.push(format!("{at}: {}.{}", g.module, g.name));
                continue;
            }
            let e = needed
                .entry((g.module.clone(), g.name.clone()))
                .or_insert((g.runs_code, Vec::new()));
            e.1.push(at);
        }
        for f in r.reason.iter().chain(&r.findings) {
            if f.kind != "global_not_allowed" && f.kind != "invalid_ascii" {
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
    // Top-level keys come before the first table (`[limits]`, `[[global]]`, ...).
    let mut top_level = true;
    let mut python2 = Vec::new();
    let mut body = String::new();
    for line in base.text.lines() {
        top_level &= !line.trim_start().starts_with('[');
        let replaced = top_level && REPLACED.iter().any(|k| is_top_key(line, k));
        if replaced {
            if is_top_key(line, "python2_str") || is_top_key(line, "python2_str_encoding") {
                python2.push(line);
            }
        } else {
            body.push_str(line);
            body.push('\n');
        }
    }
    if python2_text.is_empty() {
        for line in python2 {
            let _ = writeln!(s, "{line}");
        }
    } else {
        s.push_str(
            "# Python 2 str (STRING, BINSTRING, SHORT_BINSTRING) with bytes above 0x7F, which \
             ASCII refuses, in:\n",
        );
        for p in python2_text.iter().take(20) {
            let _ = writeln!(s, "#   {p}");
        }
        s.push_str(
            "# read as Latin-1 text, every byte its code point, as pickle.loads(data, \
             encoding=\"latin1\")\n# and numpy.load read them.\npython2_str = \"str\"\n\
             python2_str_encoding = \"latin1\"\n",
        );
    }
    let _ = writeln!(s, "\n# ---- policy {:?} ----", base.name);
    s.push_str(&body);
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
    let comments = [
        (
            "Globals whose name could not be read (made by a call, or not a Python name): \
             left out, no entry could name them",
            unreadable,
        ),
        ("Refusals no policy entry can lift", other),
        (
            "Refused under another policy (run `picklewarden scan --trust` on them alone)",
            elsewhere,
        ),
    ];
    for (title, list) in comments {
        if !list.is_empty() {
            let _ = writeln!(s, "\n# {title}:");
            for o in list {
                let _ = writeln!(s, "# {}", o.replace('\n', " "));
            }
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
