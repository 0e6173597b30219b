//! Policies: the allowlist of globals, each mapped to one constructor from a closed set, plus
//! how Python 2 strings, persistent ids and extension codes are treated, and the limits.
//!
//! A policy is a TOML file (the shipped ones live in `policy/` and are built in) or the same
//! thing built in Rust. Globals are exact `(module, name)` pairs as written in the stream: no
//! dotted-name walking, no wildcards, no implicit `__builtin__` -> `builtins` mapping (list
//! both spellings where both are wanted).

mod builder;
pub(crate) mod check;
mod lookup;
pub mod message;
mod names;
mod rule;
mod schema;
mod toml_file;

use std::collections::HashMap;

pub use builder::PolicyBuilder;
pub use check::Check;
pub use message::{HandleRule, MessagePolicy, PayloadRule};
pub(crate) use names::shown_name;
pub use names::{is_python_name, MAX_NAME_CHARS};
pub use rule::{Constructor, Cost, Forms, GlobalRule, RecordKey};
pub(crate) use schema::Checked;
pub use schema::{ArgSpec, ArgType, ArgsSchema};

use crate::error::{escape_for_display, ErrorKind};
use crate::limits::Limits;

/// How STRING, BINSTRING and SHORT_BINSTRING (Python 2 `str`) decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Python2Str {
    /// As bytes (the default; CPython's `encoding='bytes'`, which Mitogen uses).
    Bytes,
    /// As str, decoded strictly with the encoding (CPython's `encoding=...`).
    Str(TextEncoding),
}

/// Encodings a policy may name for Python 2 strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextEncoding {
    /// `ascii` (CPython's default for `pickle.loads`).
    Ascii,
    /// `latin1` / `latin-1`: every byte is a code point.
    Latin1,
    /// `utf-8`.
    Utf8,
}

/// How PERSID and BINPERSID (persistent ids, `Pickler.persistent_id` /
/// `Unpickler.persistent_load`) are treated: the TOML setting `persistent_ids`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PersistentIds {
    /// `"reject"` (the default): every persistent id is refused (`persistent_id_rejected`).
    #[default]
    Reject,
    /// `"record"`: a BINPERSID's id (the value it pops) is kept as plain data in the place of
    /// the object `persistent_load` would return, and listed by
    /// [`Document::persistent_ids`](crate::Document::persistent_ids) so that the reader of the
    /// container (a torch checkpoint's storages) resolves and checks it. With a schema
    /// (`persistent_id_args`), the id must be a tuple whose items match it
    /// (`constructor_rejected` otherwise). PERSID (protocol 0, a text line) stays refused.
    /// A document holding a recorded persistent id has no canonical pickle (`Unwritable::Record`):
    /// CPython would read the id where the input meant the loaded object.
    Record(Option<ArgsSchema>),
}

/// A policy: see the module docs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Policy {
    /// Short name (`"data"`), shown in refusals.
    pub name: String,
    /// One line on what it is for.
    pub description: String,
    /// How Python 2 strings decode.
    pub python2_str: Python2Str,
    /// Extension codes (EXT1/EXT2/EXT4) the policy maps to a global, which must itself be an
    /// allowed global. Empty by default: every extension code is refused.
    pub extensions: HashMap<u32, (String, String)>,
    /// The limits decodes under this policy use by default.
    pub limits: Limits,
    /// How persistent ids are treated ([`PersistentIds::Reject`] by default).
    pub persistent_ids: PersistentIds,
    /// What a Mitogen child may send to its parent (handles, payloads, Context bounds): the
    /// `[mitogen]` section, or [`MessagePolicy::mitogen`] when the file has none. Applied by
    /// `filter` and `guard` ([`crate::mitogen::StreamCheck`]), not by decoding alone.
    pub mitogen: MessagePolicy,
    rules: Vec<GlobalRule>,
    lookup: lookup::GlobalTable,
}

/// Names of the built-in policies, each shipped as `policy/NAME.toml`.
pub const BUILTIN_POLICIES: [&str; 7] = [
    "data",
    "strict",
    "mitogen",
    "mitogen-plus",
    "torch",
    "numpy",
    "model",
];

const DATA_TOML: &str = include_str!("../../policy/data.toml");
const STRICT_TOML: &str = include_str!("../../policy/strict.toml");
const MITOGEN_TOML: &str = include_str!("../../policy/mitogen.toml");
const MITOGEN_PLUS_TOML: &str = include_str!("../../policy/mitogen-plus.toml");
const TORCH_TOML: &str = include_str!("../../policy/torch.toml");
const NUMPY_TOML: &str = include_str!("../../policy/numpy.toml");
const MODEL_TOML: &str = include_str!("../../policy/model.toml");

/// The text of the built-in policy file `policy/NAME.toml` (names: [`BUILTIN_POLICIES`]), or
/// `None` for a name that is not one: the base a tool extends into a policy file of its own
/// (`picklewarden scan --trust`).
pub fn builtin_toml(name: &str) -> Option<&'static str> {
    Some(match name {
        "data" => DATA_TOML,
        "strict" => STRICT_TOML,
        "mitogen" => MITOGEN_TOML,
        "mitogen-plus" => MITOGEN_PLUS_TOML,
        "torch" => TORCH_TOML,
        "numpy" => NUMPY_TOML,
        "model" => MODEL_TOML,
        _ => return None,
    })
}

/// A policy file could not be read.
#[derive(Clone, Debug, thiserror::Error)]
#[error("policy: {0}")]
#[non_exhaustive]
pub struct PolicyError(pub String);

impl Policy {
    /// A policy with no global allowed and default limits.
    pub fn empty(name: &str) -> Policy {
        Policy {
            name: name.to_owned(),
            description: String::new(),
            python2_str: Python2Str::Bytes,
            extensions: HashMap::new(),
            limits: Limits::default(),
            persistent_ids: PersistentIds::Reject,
            mitogen: MessagePolicy::mitogen(),
            rules: Vec::new(),
            lookup: lookup::GlobalTable::new(),
        }
    }

    /// A built-in policy by name (`"data"`, `"strict"`, `"mitogen"`, `"mitogen-plus"`,
    /// `"torch"`, `"numpy"`, `"model"`), or `None`.
    /// Parsed once per process and cloned from then on ([`Policy::builtin_ref`]).
    pub fn builtin(name: &str) -> Option<Policy> {
        Policy::builtin_ref(name).ok().flatten().cloned()
    }

    /// The built-in policy `name`, parsed on first use and kept for the process: `Ok(None)`
    /// for a name that is not one.
    ///
    /// # Errors
    /// The [`PolicyError`] of a built-in policy's TOML that does not parse: a defect of the
    /// build (every build's unit tests parse them all), reported, never replaced by a looser
    /// policy.
    pub fn builtin_ref(name: &str) -> Result<Option<&'static Policy>, PolicyError> {
        builder::builtin(name).map_err(Clone::clone)
    }

    /// The default policy, `data`: plain Python data and the globals needed to express it.
    /// Should its built-in TOML not parse (see [`Policy::builtin_ref`]) this is a policy that
    /// refuses every input, never a looser one.
    pub fn data() -> Policy {
        Policy::builtin("data").unwrap_or_else(|| builder::refuse_everything("data"))
    }

    /// The `strict` policy: no global at all (as [`Policy::data`], it refuses every input
    /// should its built-in TOML not parse).
    pub fn strict() -> Policy {
        Policy::builtin("strict").unwrap_or_else(|| builder::refuse_everything("strict"))
    }

    /// Parses a policy from TOML text (format: see `policy/data.toml` and docs/policies.md).
    ///
    /// # Errors
    /// [`PolicyError`] naming the first problem: bad TOML, an unknown key, constructor, form,
    /// limit or encoding, a duplicate global; and settings that could never take effect, which
    /// are refused rather than ignored: a form the constructor does not support (`newobj` on
    /// `set`, whose only forms are `reduce` and `inst`), `min`/`max` on an argument that is
    /// neither an int nor `any` or `min` above `max`, `max_len` on one without a length, `keys`
    /// on one that is neither a dict nor `any` or naming an unhashable type, `min_args`
    /// without `args`, `python2_str_encoding` without `python2_str = "str"`.
    ///
    /// ```
    /// use picklewarden::{decode, Policy};
    /// let policy = Policy::from_toml_str(r#"
    ///     name = "points"
    ///     [limits]
    ///     max_input_bytes = "1M"
    ///     [[global]]
    ///     module = "geometry"
    ///     name = "Point"
    ///     constructor = "record"
    ///     forms = ["reduce"]
    ///     args = [{ type = "int", min = 0, max = 1000 }, { type = "int", min = 0, max = 1000 }]
    /// "#)?;
    /// assert_eq!(policy.limits.max_input_bytes, 1 << 20);
    /// // Point(3, 4) pickled by a class whose __reduce__ returns (Point, (3, 4)), protocol 2
    /// let ok = b"\x80\x02cgeometry\nPoint\nq\x00K\x03K\x04\x86q\x01Rq\x02.";
    /// assert!(decode(ok, &policy).is_ok());
    /// // Point(3, 4000): the second argument is over its max
    /// let over = b"\x80\x02cgeometry\nPoint\nq\x00K\x03M\xa0\x0f\x86q\x01Rq\x02.";
    /// assert_eq!(decode(over, &policy).unwrap_err().kind().name(), "constructor_rejected");
    ///
    /// let never = Policy::from_toml_str(r#"
    ///     name = "mistake"
    ///     [[global]]
    ///     module = "builtins"
    ///     name = "set"
    ///     constructor = "set"
    ///     forms = ["newobj"]
    /// "#);
    /// assert!(never.unwrap_err().to_string().contains("supports only"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Policy, PolicyError> {
        toml_file::parse(text)
    }

    /// Adds (or replaces) an allowed global.
    pub fn allow(&mut self, mut rule: GlobalRule) {
        rule.forms = rule.forms.intersect(rule.constructor.supported_forms());
        match self.find(&rule.module, &rule.name) {
            Some(i) => {
                if let Some(slot) = self.rules.get_mut(i) {
                    *slot = rule;
                }
            }
            None => {
                let i = self.rules.len();
                self.rules.push(rule);
                if let Some(r) = self.rules.last() {
                    self.lookup.insert(&self.rules, &r.module, &r.name, i);
                }
            }
        }
    }

    /// The rule index allowing `(module, name)`, if any (exact match, as written).
    pub fn find(&self, module: &str, name: &str) -> Option<usize> {
        self.lookup.find(&self.rules, module, name)
    }

    /// The rule index allowing `(module, name)`, or the refusal naming them (escaped for
    /// display).
    ///
    /// # Errors
    /// [`ErrorKind::GlobalNotAllowed`].
    pub fn resolve(&self, module: &str, name: &str) -> Result<usize, ErrorKind> {
        self.find(module, name)
            .ok_or_else(|| ErrorKind::GlobalNotAllowed {
                module: escape_for_display(module),
                name: escape_for_display(name),
            })
    }

    /// The rule at an index returned by [`Policy::find`].
    pub fn rule(&self, index: usize) -> Option<&GlobalRule> {
        self.rules.get(index)
    }

    /// Every allowed global, in file order.
    pub fn rules(&self) -> &[GlobalRule] {
        &self.rules
    }
}

/// The built-in `data` policy ([`Policy::data`]).
impl Default for Policy {
    fn default() -> Policy {
        Policy::data()
    }
}

#[cfg(test)]
mod tests;
