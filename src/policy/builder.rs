//! [`PolicyBuilder`]: a policy written in Rust, checked as a policy file is; and the built-in
//! policies, parsed once.

use std::sync::OnceLock;

use super::{
    Check, Constructor, Forms, GlobalRule, Policy, PolicyError, Python2Str, RecordKey,
    BUILTIN_POLICIES,
};
use crate::limits::Limits;

/// Builds a [`Policy`] in code: [`Policy::builder`].
///
/// ```
/// use picklewarden::{decode, Constructor, Policy};
/// let policy = Policy::builder()
///     .name("points")
///     .allow("geometry", "Point", Constructor::Record)
///     .allow("builtins", "set", Constructor::Set)
///     .build()?;
/// // Point(3, 4) pickled by a class whose __reduce__ returns (Point, (3, 4)), protocol 2
/// assert!(decode(b"\x80\x02cgeometry\nPoint\nq\x00K\x03K\x04\x86q\x01Rq\x02.", &policy).is_ok());
/// # Ok::<(), picklewarden::policy::PolicyError>(())
/// ```
#[derive(Debug)]
#[must_use]
pub struct PolicyBuilder {
    policy: Policy,
    extensions: Vec<(u32, String, String)>,
    error: Option<PolicyError>,
}

impl Policy {
    /// A builder of a policy that allows nothing yet, with default limits (named `custom`
    /// until [`PolicyBuilder::name`]).
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder {
            policy: Policy::empty("custom"),
            extensions: Vec::new(),
            error: None,
        }
    }
}

impl PolicyBuilder {
    /// The policy's name, shown in refusals.
    pub fn name(mut self, name: &str) -> PolicyBuilder {
        name.clone_into(&mut self.policy.name);
        self
    }

    /// One line on what the policy is for.
    pub fn description(mut self, text: &str) -> PolicyBuilder {
        text.clone_into(&mut self.policy.description);
        self
    }

    /// Allows the global `module.name` (exact, as written in the pickle), mapped to
    /// `constructor`, in every form the constructor supports
    /// ([`Constructor::supported_forms`]); a record with no argument schema, each object a key
    /// of its own ([`RecordKey::Identity`]).
    pub fn allow(self, module: &str, name: &str, constructor: Constructor) -> PolicyBuilder {
        self.allow_rule(GlobalRule::new(module, name, constructor))
    }

    /// Allows a global with every setting given. [`PolicyBuilder::build`] refuses a rule a
    /// policy file could not hold: a form its constructor does not support, a `key` on a
    /// constructor other than `record`, [`RecordKey::Datetime`] on another global than
    /// `datetime.date`, `time`, `datetime`, `timedelta` or `timezone`.
    pub fn allow_rule(mut self, rule: GlobalRule) -> PolicyBuilder {
        if self.error.is_none() {
            if let Err(e) = check_rule(&rule) {
                self.error = Some(e);
            }
        }
        let mut rule = rule;
        // A rule given Forms::ALL (through `allow`) means "every form it supports": with a
        // check, every form the check follows.
        if rule.forms == Forms::ALL {
            rule.forms = match rule.check {
                Some(check) => check.forms(),
                None => rule.constructor.supported_forms(),
            };
        }
        self.policy.allow(rule);
        self
    }

    /// Replaces the limits.
    pub fn limits(mut self, limits: Limits) -> PolicyBuilder {
        self.policy.limits = limits;
        self
    }

    /// How Python 2 strings decode.
    pub fn python2_str(mut self, how: Python2Str) -> PolicyBuilder {
        self.policy.python2_str = how;
        self
    }

    /// Maps extension code `code` (EXT1/EXT2/EXT4) to `module.name`, which the policy must
    /// allow by [`PolicyBuilder::build`].
    pub fn extension(mut self, code: u32, module: &str, name: &str) -> PolicyBuilder {
        self.extensions
            .push((code, module.to_owned(), name.to_owned()));
        self
    }

    /// The policy.
    ///
    /// # Errors
    /// [`PolicyError`] for the first setting that could never take effect (as
    /// [`Policy::from_toml_str`] refuses it): see [`PolicyBuilder::allow_rule`]; an extension
    /// code outside 1..=2147483647, mapped twice, or to a global the policy does not allow.
    pub fn build(mut self) -> Result<Policy, PolicyError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        for (code, module, name) in self.extensions {
            if code == 0 || code > 0x7fff_ffff {
                return Err(PolicyError(format!(
                    "extension code {code}: codes run from 1 to 2147483647"
                )));
            }
            if self.policy.find(&module, &name).is_none() {
                return Err(PolicyError(format!(
                    "extension code {code}: {module}.{name} is not allowed by this policy"
                )));
            }
            if self.policy.extensions.contains_key(&code) {
                return Err(PolicyError(format!(
                    "extension code {code} is mapped twice"
                )));
            }
            self.policy.extensions.insert(code, (module, name));
        }
        Ok(self.policy)
    }
}

fn check_rule(rule: &GlobalRule) -> Result<(), PolicyError> {
    if !super::is_python_name(&rule.module) || !super::is_python_name(&rule.name) {
        return Err(PolicyError(format!(
            "global {:?}.{:?}: a module and a name are Python identifiers joined by dots, as a \
             pickler writes them",
            crate::error::escape_for_display(&rule.module),
            crate::error::escape_for_display(&rule.name)
        )));
    }
    let supported = rule.constructor.supported_forms();
    if rule.forms != Forms::ALL && rule.forms.intersect(supported) != rule.forms {
        return Err(PolicyError(format!(
            "{}.{}: a form {} does not support",
            rule.module,
            rule.name,
            rule.constructor.name()
        )));
    }
    if rule.key != RecordKey::Identity && rule.constructor != Constructor::Record {
        return Err(PolicyError(format!(
            "key applies to record globals only ({}.{})",
            rule.module, rule.name
        )));
    }
    let datetime_type = rule.module == "datetime"
        && ["date", "time", "datetime", "timedelta", "timezone"].contains(&rule.name.as_str());
    if rule.key == RecordKey::Datetime && !datetime_type {
        return Err(PolicyError(format!(
            "key \"datetime\" applies to datetime.date, time, datetime, timedelta and timezone \
             only ({}.{})",
            rule.module, rule.name
        )));
    }
    if rule.args.is_some() && rule.constructor != Constructor::Record {
        return Err(PolicyError(format!(
            "args applies to record globals only ({}.{})",
            rule.module, rule.name
        )));
    }
    if let Some(check) = rule.check {
        let forms = if rule.forms == Forms::ALL {
            check.forms()
        } else {
            rule.forms
        };
        check_forms(&rule.module, &rule.name, rule.constructor, forms, check)?;
    }
    Ok(())
}

/// Refuses a `check` on a rule it cannot apply to: a constructor other than `record`, or a
/// form the check's writer never uses (the check would not see that form's calls or BUILDs).
pub(super) fn check_forms(
    module: &str,
    name: &str,
    constructor: Constructor,
    forms: Forms,
    check: Check,
) -> Result<(), PolicyError> {
    if constructor != Constructor::Record {
        return Err(PolicyError(format!(
            "check applies to record globals only ({module}.{name})"
        )));
    }
    if forms.intersect(check.forms()) != forms {
        return Err(PolicyError(format!(
            "{module}.{name}: check {:?} applies to the forms {} only",
            check.name(),
            check.forms().names().join(", ")
        )));
    }
    Ok(())
}

/// The built-in policies, parsed once (their TOML is part of the crate; a unit test parses
/// each in every build).
static BUILTINS: OnceLock<Result<Vec<Policy>, PolicyError>> = OnceLock::new();

/// The built-in policy `name`, parsed on first use and kept: `Ok(None)` for a name that is
/// not one; `Err` if its TOML does not parse (a defect of the build, which the crate's tests
/// catch), never a looser stand-in.
pub(crate) fn builtin(name: &str) -> Result<Option<&'static Policy>, &'static PolicyError> {
    let all = BUILTINS.get_or_init(|| {
        BUILTIN_POLICIES
            .iter()
            .map(|n| Policy::from_toml_str(super::builtin_toml(n).unwrap_or_default()))
            .collect()
    });
    match all {
        Ok(all) => Ok(BUILTIN_POLICIES
            .iter()
            .position(|n| *n == name)
            .and_then(|i| all.get(i))),
        Err(e) => Err(e),
    }
}

/// What [`Policy::data`] and [`Policy::strict`] give should their built-in TOML ever fail to
/// parse: a policy that refuses every input (no global, and `max_input_bytes` 0), not an
/// empty policy with default limits, which would be looser than the shipped one.
pub(crate) fn refuse_everything(name: &str) -> Policy {
    let mut p = Policy::empty(name);
    p.limits.max_input_bytes = 0;
    p
}

#[cfg(test)]
#[path = "builder_test.rs"]
mod tests;
