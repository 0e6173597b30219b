//! The reports of `scan`: a text table for people (refusals first, the worst severity first;
//! the files skipped in one line), JSON (every file, the skipped ones included, and a
//! summary) and SARIF 2.1.0 (a result per refused global and per other refusal, its level
//! from the severity).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use picklewarden::formats::container::{
    global_severity, FileReport, Finding, GlobalUse, Severity, Verdict,
};
use serde_json::{json, Value};

use super::scan_files::Outcome;

fn finding_json(f: &Finding) -> Value {
    json!({
        "kind": f.kind,
        "category": f.category,
        "severity": f.severity.map(Severity::name),
        "message": f.message,
        "entry": f.entry,
        "offset": f.offset,
    })
}

/// Counts of the files by outcome, as the text summary and the JSON `summary` give them.
#[derive(Default)]
struct Counts {
    clean: usize,
    refused: usize,
    incomplete: usize,
    unreadable: usize,
    skipped: BTreeMap<&'static str, usize>,
    severities: BTreeMap<Severity, usize>,
}

fn counts(outcomes: &[Outcome]) -> Counts {
    let mut c = Counts::default();
    for o in outcomes {
        match o {
            Outcome::Io(_) => c.unreadable += 1,
            Outcome::Report(r) => match r.verdict {
                Verdict::Clean => c.clean += 1,
                Verdict::Incomplete => c.incomplete += 1,
                Verdict::Refused => {
                    c.refused += 1;
                    if let Some(s) = r.severity {
                        *c.severities.entry(s).or_default() += 1;
                    }
                }
                Verdict::Skipped => *c.skipped.entry(r.format.name()).or_default() += 1,
            },
        }
    }
    c
}

pub(crate) fn json_report(files: &[PathBuf], outcomes: &[Outcome]) -> Value {
    let list: Vec<Value> = files
        .iter()
        .zip(outcomes)
        .map(|(path, o)| match o {
            Outcome::Io(e) => json!({
                "path": path.display().to_string(),
                "format": null,
                "verdict": "error",
                "severity": null,
                "reason": {"kind": "io", "category": "io", "severity": null, "message": e,
                           "entry": "", "offset": null},
                "globals": [],
            }),
            Outcome::Report(r) => json!({
                "path": path.display().to_string(),
                "format": r.format.name(),
                "verdict": r.verdict.name(),
                "severity": r.severity.map(Severity::name),
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
    let c = counts(outcomes);
    let severities: serde_json::Map<String, Value> = c
        .severities
        .iter()
        .map(|(s, n)| (s.name().to_owned(), json!(n)))
        .collect();
    json!({
        "files": list,
        "summary": {
            "files": files.len(),
            "clean": c.clean,
            "refused": c.refused,
            "incomplete": c.incomplete,
            "unreadable": c.unreadable,
            "skipped": c.skipped.values().sum::<usize>(),
            "skipped_by_format": c.skipped,
            "refused_by_severity": severities,
        },
    })
}

/// The order of the text table: refused (the worst severity first), incomplete, unreadable,
/// clean; skipped files are not rows.
fn rank(o: &Outcome) -> Option<u8> {
    Some(match o {
        Outcome::Report(r) => match (r.verdict, r.severity) {
            (Verdict::Refused, Some(Severity::Code)) => 0,
            (Verdict::Refused, Some(Severity::Untrusted)) => 1,
            (Verdict::Refused, Some(Severity::Malformed)) => 2,
            (Verdict::Refused, _) => 3,
            (Verdict::Incomplete, _) => 4,
            (Verdict::Clean, _) => 6,
            (Verdict::Skipped, _) => return None,
        },
        Outcome::Io(_) => 5,
    })
}

pub(crate) fn text_report(files: &[PathBuf], outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let mut rows: Vec<(u8, usize)> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| rank(o).map(|r| (r, i)))
        .collect();
    rows.sort();
    for (_, i) in rows {
        let (Some(path), Some(o)) = (files.get(i), outcomes.get(i)) else {
            continue;
        };
        match o {
            Outcome::Io(e) => {
                let _ = writeln!(
                    s,
                    "{:<10} {:<9} {:<13} {}  ({e})",
                    "ERROR",
                    "-",
                    "-",
                    path.display()
                );
            }
            Outcome::Report(r) => text_row(&mut s, path, r),
        }
    }
    let c = counts(outcomes);
    let skipped: usize = c.skipped.values().sum();
    if skipped > 0 {
        let kinds: Vec<String> = c.skipped.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            s,
            "{skipped} files skipped, not pickle-bearing ({}): --format json lists them",
            kinds.join(", ")
        );
    }
    let by_severity: Vec<String> = c
        .severities
        .iter()
        .rev()
        .map(|(sev, n)| format!("{n} {}", sev.name()))
        .collect();
    let _ = writeln!(
        s,
        "{} files: {} clean, {} refused{}, {} incomplete, {} unreadable, {} skipped",
        files.len(),
        c.clean,
        c.refused,
        if by_severity.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_severity.join(", "))
        },
        c.incomplete,
        c.unreadable,
        skipped
    );
    s
}

fn text_row(s: &mut String, path: &Path, r: &FileReport) {
    let _ = write!(
        s,
        "{:<10} {:<9} {:<13} {}",
        r.verdict.name().to_uppercase(),
        r.severity.map_or("-", Severity::name),
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
                global_note(g),
            );
        }
    }
}

/// What a global's row adds: that it runs code, or that its name could not be read.
fn global_note(g: &GlobalUse) -> &'static str {
    if g.runs_code {
        "  (runs code)"
    } else if !g.allowed && global_severity(&g.module, &g.name) == Severity::Code {
        "  (name not readable: could be anything)"
    } else {
        ""
    }
}

/// An entry's name as the text report shows it: an npz member's pickle is named
/// `MEMBER:` in the JSON report, shown as `MEMBER` before the `: ` or `, offset` that follows.
pub(crate) fn shown_entry(entry: &str) -> &str {
    entry.strip_suffix(':').unwrap_or(entry)
}

/// The SARIF level of a severity: `code` an error, `untrusted` and `malformed` warnings,
/// `limit` a note.
fn level(s: Option<Severity>) -> &'static str {
    match s {
        Some(Severity::Code) => "error",
        Some(Severity::Untrusted | Severity::Malformed) => "warning",
        _ => "note",
    }
}

/// GitHub code scanning's `security-severity` of a rule (a CVSS-like score: 9.0 and above
/// critical, 7.0 high, 4.0 medium, below low).
fn security_severity(s: Option<Severity>) -> &'static str {
    match s {
        Some(Severity::Code) => "9.8",
        Some(Severity::Untrusted) => "5.0",
        Some(Severity::Malformed) => "5.0",
        _ => "2.0",
    }
}

pub(crate) fn sarif_report(files: &[PathBuf], outcomes: &[Outcome]) -> Value {
    let mut results = Vec::new();
    // rule id -> (description, severity).
    let mut rules: BTreeMap<String, (String, Option<Severity>)> = BTreeMap::new();
    // Offsets are within a pickle (a zip entry, a decompressed stream), not the file: they
    // go in the result's properties, not in a region of the file.
    let location = |path: &Path| json!([{ "physicalLocation": {"artifactLocation": {"uri": path.display().to_string()}} }]);
    for (path, o) in files.iter().zip(outcomes) {
        match o {
            Outcome::Io(e) => {
                rules.insert("io".into(), ("The file could not be read".into(), None));
                results.push(json!({
                    "ruleId": "io", "level": "error",
                    "message": {"text": e}, "locations": location(path),
                }));
            }
            Outcome::Report(r) => {
                for g in r.globals.iter().filter(|g| !g.allowed) {
                    let severity = global_severity(&g.module, &g.name);
                    let (id, text) = if g.runs_code {
                        ("runs_code", "A pickle names a global known to run code")
                    } else if severity == Severity::Code {
                        (
                            "global_not_readable",
                            "A pickle names a global whose name could not be read",
                        )
                    } else {
                        (
                            "global_not_allowed",
                            "A pickle names a global the policy does not allow",
                        )
                    };
                    rules.insert(id.into(), (text.into(), Some(severity)));
                    results.push(json!({
                        "ruleId": id,
                        "level": level(Some(severity)),
                        "message": {"text": format!(
                            "{}: global {}.{} is not allowed by policy {:?}{}",
                            if g.entry.is_empty() { r.format.name() } else { &g.entry },
                            g.module, g.name, r.policy,
                            match id {
                                "runs_code" => " (known to run code)",
                                "global_not_readable" => " (its name could not be read)",
                                _ => "",
                            },
                        )},
                        "locations": location(path),
                        "properties": {"pickleOffset": g.offset, "entry": g.entry,
                                       "severity": severity.name()},
                    }));
                }
                if let Some(f) = &r.reason {
                    if f.kind == "global_not_allowed" {
                        continue;
                    }
                    let entry = rules
                        .entry(f.kind.clone())
                        .or_insert_with(|| (f.category.to_owned(), f.severity));
                    entry.1 = entry.1.max(f.severity);
                    results.push(json!({
                        "ruleId": f.kind,
                        "level": level(f.severity),
                        "message": {"text": format!("{} ({}): {}", r.format.name(), r.verdict.name(), f.message)},
                        "locations": location(path),
                        "properties": {"entry": f.entry, "offset": f.offset,
                                       "severity": f.severity.map(Severity::name)},
                    }));
                }
            }
        }
    }
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(id, (text, severity))| {
            json!({
                "id": id,
                "shortDescription": {"text": text},
                "defaultConfiguration": {"level": level(severity)},
                "properties": {
                    "security-severity": security_severity(severity),
                    "severity": severity.map(Severity::name),
                },
            })
        })
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
