//! How bad a refusal is ([`Severity`]), for people and CI jobs triaging a folder: a pickle
//! refused for `os.system` and one refused for `pandas.DataFrame` are both refused, but only
//! the first is known to run code.
//!
//! The globals known to run code are data: `policy/runs-code.tsv`, each with its sources
//! (picklescan's and modelscan's lists, the standard library's documentation, loaders that
//! load another pickle).

use std::collections::HashMap;
use std::sync::OnceLock;

use super::globals::UNREAD;

/// How bad a refusal is, worst first (the order of [`Ord`]: `Code` is the greatest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Over a limit: the file was not read to its end (`limit_exceeded`).
    Limit,
    /// Not what the format's writer writes: malformed, truncated, not canonical, a container
    /// whose readers would disagree.
    Malformed,
    /// Denied by the policy but not known to run code: a class outside the policy
    /// (`pandas.DataFrame`), a persistent id, an extension code, a form, a Python 2 string
    /// the policy's encoding refuses. `scan --trust` can lift it.
    Untrusted,
    /// A global known to run code ([`runs_code`]), a global whose name the listing could not
    /// read (anything could be behind it), or a call of something a call returned (CPython
    /// would call whatever that is: `callable_not_allowed`).
    Code,
}

impl Severity {
    /// `"code"`, `"untrusted"`, `"malformed"` or `"limit"`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Code => "code",
            Severity::Untrusted => "untrusted",
            Severity::Malformed => "malformed",
            Severity::Limit => "limit",
        }
    }

    /// The severity named `name` ([`Severity::name`]).
    pub fn from_name(name: &str) -> Option<Severity> {
        [
            Severity::Code,
            Severity::Untrusted,
            Severity::Malformed,
            Severity::Limit,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// The severity of a refusal of `kind` in `category` (a [`super::container::Finding`]'s
    /// fields): `callable_not_allowed` is code; other policy refusals untrusted (a refused
    /// global's own severity comes from [`global_severity`]); limits limit; the rest
    /// malformed.
    pub fn of_refusal(kind: &str, category: &str) -> Severity {
        match (kind, category) {
            ("callable_not_allowed", _) => Severity::Code,
            (_, "policy_denied") => Severity::Untrusted,
            (_, "limit_exceeded") => Severity::Limit,
            _ => Severity::Malformed,
        }
    }
}

/// The severity of naming the global `module.name` that the policy refuses: code when it is
/// known to run code or could not be read, else untrusted.
pub fn global_severity(module: &str, name: &str) -> Severity {
    if module == UNREAD || name == UNREAD || runs_code(module, name) {
        Severity::Code
    } else {
        Severity::Untrusted
    }
}

/// Which names of a module `policy/runs-code.tsv` lists.
enum Names {
    /// Every name, and every module under it.
    All,
    Some(Vec<String>),
}

const RUNS_CODE_TSV: &str = include_str!("../../policy/runs-code.tsv");

/// `policy/runs-code.tsv`, read once: module -> names. `None` if a line does not parse (a
/// defect of the build, which the unit tests catch): then every global is taken to run code.
fn table() -> Option<&'static HashMap<String, Names>> {
    static TABLE: OnceLock<Option<HashMap<String, Names>>> = OnceLock::new();
    TABLE.get_or_init(|| parse(RUNS_CODE_TSV)).as_ref()
}

fn parse(text: &str) -> Option<HashMap<String, Names>> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut cols = line.split('\t');
        let (module, names, sources, why) =
            (cols.next()?, cols.next()?, cols.next()?, cols.next()?);
        if cols.next().is_some() || sources.is_empty() || why.is_empty() {
            return None;
        }
        if !crate::policy::is_python_name(module) {
            return None;
        }
        let names = if names == "*" {
            Names::All
        } else {
            let list: Vec<String> = names.split(',').map(str::to_owned).collect();
            if !list.iter().all(|n| crate::policy::is_python_name(n)) {
                return None;
            }
            Names::Some(list)
        };
        if out.insert(module.to_owned(), names).is_some() {
            return None;
        }
    }
    Some(out)
}

/// Whether calling `module.name` is known to run code, start processes, touch files or the
/// network, import modules or load another pickle: the globals of `policy/runs-code.tsv`
/// (picklescan's and modelscan's lists and the sources it names). A module listed with `*`
/// covers the modules under it (`os` covers `os.path`). A warning for people reading a
/// report; the policy decides, and the built-in ones allow none of these.
pub fn runs_code(module: &str, name: &str) -> bool {
    let Some(table) = table() else {
        return true;
    };
    if let Some(names) = table.get(module) {
        match names {
            Names::All => return true,
            Names::Some(list) => {
                if list.iter().any(|n| n == name) {
                    return true;
                }
            }
        }
    }
    // A parent module listed with `*`.
    let mut at = module.len();
    while let Some(dot) = module.get(..at).and_then(|m| m.rfind('.')) {
        let parent = module.get(..dot).unwrap_or_default();
        if matches!(table.get(parent), Some(Names::All)) {
            return true;
        }
        at = dot;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_parses() {
        let t = parse(RUNS_CODE_TSV).expect("policy/runs-code.tsv parses");
        assert!(t.len() > 60, "{}", t.len());
    }

    #[test]
    fn what_runs_code() {
        for (m, n) in [
            ("posix", "system"),
            ("os", "system"),
            ("os.path", "join"),
            ("builtins", "eval"),
            ("__builtin__", "getattr"),
            ("subprocess", "Popen"),
            ("torch.serialization", "load"),
            ("numpy", "load"),
            ("uuid", "_get_command_stdout"),
            ("functools", "partial"),
        ] {
            assert!(runs_code(m, n), "{m}.{n}");
            assert_eq!(global_severity(m, n), Severity::Code);
        }
        for (m, n) in [
            ("pandas.core.frame", "DataFrame"),
            ("builtins", "slice"),
            ("numpy", "ndarray"),
            ("uuid", "UUID"),
            ("osx", "system"),
            ("collections", "OrderedDict"),
        ] {
            assert!(!runs_code(m, n), "{m}.{n}");
            assert_eq!(global_severity(m, n), Severity::Untrusted);
        }
        assert_eq!(global_severity("?", "Index"), Severity::Code);
    }

    #[test]
    fn severities_order_worst_first() {
        assert!(Severity::Code > Severity::Untrusted);
        assert!(Severity::Untrusted > Severity::Malformed);
        assert!(Severity::Malformed > Severity::Limit);
        assert_eq!(
            Severity::of_refusal("callable_not_allowed", "policy_denied"),
            Severity::Code
        );
        assert_eq!(
            Severity::of_refusal("global_not_allowed", "policy_denied"),
            Severity::Untrusted
        );
        assert_eq!(
            Severity::of_refusal("zip_layout", "malformed"),
            Severity::Malformed
        );
        assert_eq!(
            Severity::of_refusal("container_limit", "limit_exceeded"),
            Severity::Limit
        );
        assert_eq!(
            Severity::of_refusal("truncated", "truncated"),
            Severity::Malformed
        );
        for s in ["code", "untrusted", "malformed", "limit"] {
            assert_eq!(Severity::from_name(s).map(Severity::name), Some(s));
        }
    }
}
