//! The report on one file as its reader makes it ([`Report`]): the refusals, the parts not
//! understood, the globals named and the pickles checked, with the policy and bounds of the
//! file; [`Report::finish`] gives the [`FileReport`] and its verdict and severity.

use std::collections::HashSet;

use crate::policy::Policy;
use crate::{Category, Document, Error, Scanner};

use super::container::{
    global_severity, runs_code, FileReport, Finding, Format, GlobalUse, ModelLimits, Severity,
    Verdict,
};
use super::globals::list_after;

/// The report being made, with the policy and limits of the file.
pub(crate) struct Report<'p> {
    pub(crate) policy: &'p Policy,
    pub(crate) limits: ModelLimits,
    format: Format,
    refused: Vec<Finding>,
    /// The pickle refusals among `refused` (by index), kept so that [`Report::map_offsets`]
    /// can write their messages again with the mapped offset.
    errors: Vec<(usize, Error)>,
    incomplete: Vec<Finding>,
    globals: Vec<GlobalUse>,
    pickles: Vec<String>,
    /// The file carries no pickle: [`Verdict::Skipped`].
    skipped: bool,
    /// [`FileReport::python2_text`].
    python2_text: bool,
}

impl<'p> Report<'p> {
    /// A report on a file of `format`, checked under `policy`.
    pub(crate) fn new(format: Format, policy: &'p Policy, limits: ModelLimits) -> Report<'p> {
        Report {
            policy,
            limits,
            format,
            refused: Vec::new(),
            errors: Vec::new(),
            incomplete: Vec::new(),
            globals: Vec::new(),
            pickles: Vec::new(),
            skipped: false,
            python2_text: false,
        }
    }

    /// Notes that the file carries no pickle and was not checked ([`Verdict::Skipped`]).
    pub(crate) fn skip(&mut self) {
        self.skipped = true;
    }

    /// Notes a refusal of the container (not of a pickle).
    pub(crate) fn refuse(
        &mut self,
        kind: &str,
        category: &'static str,
        message: impl Into<String>,
        entry: &str,
        offset: Option<u64>,
    ) {
        self.refused.push(Finding {
            kind: kind.to_owned(),
            category,
            message: message.into(),
            entry: entry.to_owned(),
            offset,
            severity: None,
        });
    }

    /// Notes a refusal of the container that is the file's reason (the first), before those
    /// noted already.
    pub(crate) fn refuse_first(
        &mut self,
        kind: &str,
        category: &'static str,
        message: impl Into<String>,
        entry: &str,
        offset: Option<u64>,
    ) {
        self.refuse(kind, category, message, entry, offset);
        self.refused.rotate_right(1);
        for (i, _) in &mut self.errors {
            *i += 1;
        }
    }

    /// Notes a part not understood.
    pub(crate) fn incomplete(
        &mut self,
        kind: &str,
        message: impl Into<String>,
        entry: &str,
        offset: Option<u64>,
    ) {
        self.incomplete.push(Finding {
            kind: kind.to_owned(),
            category: "incomplete",
            message: message.into(),
            entry: entry.to_owned(),
            offset,
            severity: None,
        });
    }

    /// Notes a pickle's refusal.
    pub(crate) fn refuse_error(&mut self, entry: &str, e: &Error) {
        self.python2_text |= matches!(e.kind(), crate::ErrorKind::InvalidAscii);
        let category = match e.category() {
            Category::Malformed => "malformed",
            Category::Truncated => "truncated",
            Category::LimitExceeded => "limit_exceeded",
            Category::PolicyDenied => "policy_denied",
            Category::Io => "io",
        };
        self.errors.push((self.refused.len(), e.clone()));
        self.refused.push(Finding {
            kind: e.kind().name().to_owned(),
            category,
            message: e.to_string(),
            entry: entry.to_owned(),
            offset: Some(e.offset()),
            severity: None,
        });
    }

    /// Takes in what a report made beside this one found (pickles of a part checked under
    /// another policy).
    pub(crate) fn absorb(&mut self, other: Report<'_>) {
        let base = self.refused.len();
        self.errors
            .extend(other.errors.into_iter().map(|(i, e)| (base + i, e)));
        self.refused.extend(other.refused);
        self.incomplete.extend(other.incomplete);
        self.globals.extend(other.globals);
        self.pickles.extend(other.pickles);
        self.python2_text |= other.python2_text;
    }

    /// The limits of one pickle of the file: the policy's, with `max_input_bytes` at most
    /// [`ModelLimits::max_pickle_bytes`].
    pub(crate) fn pickle_limits(&self) -> crate::Limits {
        let mut limits = self.policy.limits;
        limits.max_input_bytes = limits.max_input_bytes.min(self.limits.max_pickle_bytes);
        limits
    }

    /// Lists the globals of one pickle named `entry` (offsets as the scan gives them), by the
    /// scan, and past its refusal by a listing pass over the opcodes. Returns the scan's
    /// result and, with `allow_trailing`, where the bytes after STOP start.
    pub(crate) fn list_globals(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
    ) -> (crate::Result<()>, usize) {
        let scan = Scanner::new(bytes, self.policy)
            .limits(self.pickle_limits())
            .allow_trailing(allow_trailing)
            .run();
        let mut seen: HashSet<u64> = HashSet::new();
        for g in &scan.globals {
            seen.insert(g.offset);
            self.globals.push(GlobalUse {
                entry: entry.to_owned(),
                runs_code: runs_code(&g.module, &g.name),
                module: g.module.clone(),
                name: g.name.clone(),
                offset: g.offset,
                allowed: g.allowed,
            });
        }
        if let Err(e) = &scan.result {
            let listed = list_after(bytes, e.offset());
            self.python2_text |=
                listed.python2_text || matches!(e.kind(), crate::ErrorKind::InvalidAscii);
            for (module, name, offset) in listed.globals {
                if seen.insert(offset) {
                    let allowed = self.policy.find(&module, &name).is_some();
                    self.globals.push(GlobalUse {
                        entry: entry.to_owned(),
                        runs_code: runs_code(&module, &name),
                        module,
                        name,
                        offset,
                        allowed,
                    });
                }
            }
        }
        let end = scan.trailing.map_or(bytes.len(), |t| {
            usize::try_from(t.offset).unwrap_or(bytes.len())
        });
        (scan.result, end)
    }

    /// Notes that the pickle `entry` was checked.
    pub(crate) fn checked(&mut self, entry: &str) {
        self.pickles.push(entry.to_owned());
    }

    /// Checks one pickle: the scan (every global listed, going on past a refusal with a
    /// listing pass), then, when the scan accepts, the full build, whose document is handed
    /// to `then` for the container's own checks. With `allow_trailing`, bytes after STOP are
    /// left for the caller: the offset where they start is returned (the pickle's length).
    pub(crate) fn pickle_then(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
        then: impl FnOnce(&mut Self, &Document<'_>),
    ) -> Option<usize> {
        self.checked(entry);
        let (scanned, end) = self.list_globals(entry, bytes, allow_trailing);
        if let Err(e) = &scanned {
            self.refuse_error(entry, e);
            return None;
        }
        match crate::Decoder::new(bytes, self.policy)
            .limits(self.pickle_limits())
            .allow_trailing(allow_trailing)
            .decode()
        {
            Ok(doc) => then(self, &doc),
            Err(e) => {
                self.refuse_error(entry, &e);
                return None;
            }
        }
        Some(end)
    }

    /// [`Report::pickle_then`] with no container check of the document.
    pub(crate) fn pickle(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
    ) -> Option<usize> {
        self.pickle_then(entry, bytes, allow_trailing, |_, _| {})
    }

    /// Maps every offset found so far (globals, findings) through `f`: a pickle checked with
    /// spans taken out reports offsets of the original. `f` never moves an offset back (the
    /// spans were taken out before it).
    pub(crate) fn map_offsets(&mut self, f: impl Fn(u64) -> u64) {
        for g in &mut self.globals {
            g.offset = f(g.offset);
        }
        for x in self.refused.iter_mut().chain(&mut self.incomplete) {
            x.offset = x.offset.map(&f);
        }
        // A pickle refusal's message names its offset: written again with the mapped one, so
        // that the message and the finding's offset agree.
        for (i, e) in &mut self.errors {
            let at = e.offset();
            *e = e.clone().shifted(f(at).saturating_sub(at));
            if let Some(x) = self.refused.get_mut(*i) {
                x.message = e.to_string();
            }
        }
    }

    pub(crate) fn finish(self) -> FileReport {
        let verdict = if self.skipped && self.refused.is_empty() && self.incomplete.is_empty() {
            Verdict::Skipped
        } else if !self.refused.is_empty() {
            Verdict::Refused
        } else if !self.incomplete.is_empty() {
            Verdict::Incomplete
        } else {
            Verdict::Clean
        };
        let mut refused = self.refused;
        for f in &mut refused {
            // A refused global's severity is its own: the global at the refusal's offset.
            let global = (f.kind == "global_not_allowed")
                .then(|| {
                    self.globals
                        .iter()
                        .find(|g| !g.allowed && g.entry == f.entry && Some(g.offset) == f.offset)
                })
                .flatten();
            f.severity = Some(match global {
                Some(g) => global_severity(&g.module, &g.name),
                None => Severity::of_refusal(&f.kind, f.category),
            });
        }
        let severity = (verdict == Verdict::Refused).then(|| {
            refused
                .iter()
                .filter_map(|f| f.severity)
                .chain(
                    self.globals
                        .iter()
                        .filter(|g| !g.allowed)
                        .map(|g| global_severity(&g.module, &g.name)),
                )
                .max()
                .unwrap_or(Severity::Malformed)
        });
        let mut all = refused.into_iter().chain(self.incomplete);
        let reason = all.next();
        FileReport {
            format: self.format,
            policy: self.policy.name.clone(),
            verdict,
            severity,
            reason,
            findings: all.collect(),
            globals: self.globals,
            pickles: self.pickles,
            python2_text: self.python2_text,
        }
    }
}
