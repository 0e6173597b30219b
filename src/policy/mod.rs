//! Policies: the allowlist of globals, each mapped to one constructor from a closed set, plus
//! how Python 2 strings, persistent ids and extension codes are treated, and the limits.
//!
//! A policy is a TOML file (the shipped ones live in `policy/` and are built in) or the same
//! thing built in Rust. Globals are exact `(module, name)` pairs as written in the stream: no
//! dotted-name walking, no wildcards, no implicit `__builtin__` -> `builtins` mapping (list
//! both spellings where both are wanted).

mod builder;
mod lookup;
pub mod message;
mod schema;
mod toml_file;

use std::collections::HashMap;

pub use builder::PolicyBuilder;
pub use message::{HandleRule, MessagePolicy, PayloadRule};
pub(crate) use schema::Checked;
pub use schema::{ArgSpec, ArgType, ArgsSchema};

use crate::error::{escape_for_display, ErrorKind};
use crate::limits::Limits;
use crate::value::CallKind;

/// The closed set of constructors a policy can map a global to. Nothing else can ever be
/// called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Constructor {
    /// `_codecs.encode(text, 'latin1')` (or `'latin-1'`): bytes from text whose code points are
    /// all below U+0100. How Python 3 writes `bytes` at protocols 0-2.
    Latin1Bytes,
    /// `bytes()` -> `b''`, `bytes(b)` -> `b`.
    Bytes,
    /// `bytearray()`, `bytearray(bytes)`, `bytearray(text, 'latin-1')`.
    ByteArray,
    /// `set()`, `set(list|tuple|set|frozenset)`.
    Set,
    /// `frozenset()`, `frozenset(list|tuple|set|frozenset)`.
    FrozenSet,
    /// `complex()`, `complex(re)`, `complex(re, im)` with int, bool or float parts.
    Complex,
    /// Keeps the call as plain data (a record object), with an optional argument schema.
    Record,
}

impl Constructor {
    /// The constructor's name as policy files spell it.
    pub fn name(self) -> &'static str {
        match self {
            Constructor::Latin1Bytes => "latin1_bytes",
            Constructor::Bytes => "bytes",
            Constructor::ByteArray => "bytearray",
            Constructor::Set => "set",
            Constructor::FrozenSet => "frozenset",
            Constructor::Complex => "complex",
            Constructor::Record => "record",
        }
    }

    /// Parses a constructor name.
    pub fn from_name(name: &str) -> Option<Constructor> {
        [
            Constructor::Latin1Bytes,
            Constructor::Bytes,
            Constructor::ByteArray,
            Constructor::Set,
            Constructor::FrozenSet,
            Constructor::Complex,
            Constructor::Record,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }

    /// The forms the constructor can serve at all: natives are calls (REDUCE, INST/OBJ);
    /// a record can take every form.
    pub fn supported_forms(self) -> Forms {
        match self {
            Constructor::Record => Forms::ALL,
            _ => Forms {
                reduce: true,
                inst: true,
                ..Forms::NONE
            },
        }
    }
}

/// The ways a global may be used; a policy rule allows a subset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Forms {
    /// REDUCE: `callable(*args)`.
    pub reduce: bool,
    /// NEWOBJ: `cls.__new__(cls, *args)`.
    pub newobj: bool,
    /// NEWOBJ_EX: `cls.__new__(cls, *args, **kwargs)`.
    pub newobj_ex: bool,
    /// INST and OBJ (protocol 0/1 instance creation, a call).
    pub inst: bool,
    /// BUILD on an object made from this global.
    pub build: bool,
    /// APPEND(S) and SETITEM(S) on an object made from this global.
    pub items: bool,
}

impl Forms {
    /// Every form.
    pub const ALL: Forms = Forms {
        reduce: true,
        newobj: true,
        newobj_ex: true,
        inst: true,
        build: true,
        items: true,
    };
    /// No form (the global may only appear as a value).
    pub const NONE: Forms = Forms {
        reduce: false,
        newobj: false,
        newobj_ex: false,
        inst: false,
        build: false,
        items: false,
    };

    /// Names as policy files spell them.
    pub const NAMES: [&'static str; 6] =
        ["reduce", "newobj", "newobj_ex", "inst", "build", "items"];

    fn set_by_name(&mut self, name: &str) -> bool {
        let slot = match name {
            "reduce" => &mut self.reduce,
            "newobj" => &mut self.newobj,
            "newobj_ex" => &mut self.newobj_ex,
            "inst" => &mut self.inst,
            "build" => &mut self.build,
            "items" => &mut self.items,
            _ => return false,
        };
        *slot = true;
        true
    }

    /// The names of the forms set, in [`Forms::NAMES`] order.
    fn names(self) -> Vec<&'static str> {
        let set = [
            self.reduce,
            self.newobj,
            self.newobj_ex,
            self.inst,
            self.build,
            self.items,
        ];
        Forms::NAMES
            .iter()
            .zip(set)
            .filter_map(|(&n, on)| on.then_some(n))
            .collect()
    }

    fn intersect(self, other: Forms) -> Forms {
        Forms {
            reduce: self.reduce && other.reduce,
            newobj: self.newobj && other.newobj,
            newobj_ex: self.newobj_ex && other.newobj_ex,
            inst: self.inst && other.inst,
            build: self.build && other.build,
            items: self.items && other.items,
        }
    }
}

/// One allowed global.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GlobalRule {
    /// Module name, exact.
    pub module: String,
    /// Qualified name, exact.
    pub name: String,
    /// What calling it does.
    pub constructor: Constructor,
    /// The forms allowed: within [`Constructor::supported_forms`] once the rule is in a policy
    /// ([`Policy::allow`] drops any other, and a policy file that names one is refused).
    pub forms: Forms,
    /// For `record`: the accepted positional arguments, if constrained.
    pub args: Option<ArgsSchema>,
    /// For `record`: how the object is compared as a dict key or set item ([`RecordKey`];
    /// [`RecordKey::Identity`] for every other constructor).
    pub key: RecordKey,
}

/// How a `record` object is hashed and compared as a dict key or set item: what the class it
/// stands for inherits or defines as `__hash__` and `__eq__` (the TOML setting `key`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecordKey {
    /// `"identity"` (the default): each object is a key of its own, as a plain class's
    /// instances are (`object.__hash__`, `object.__eq__`).
    #[default]
    Identity,
    /// `"unhashable"`: refused as a key or item (`unhashable_key`), as instances of a `dict`
    /// or `list` subclass are (Mitogen's `Kwargs`).
    Unhashable,
    /// `"first_argument"`: hashed and compared as its first positional argument, as a `str`
    /// or `bytes` subclass made from it is (Mitogen's `Secret` and `Blob`: `Secret('a') ==
    /// 'a'`). Unhashable when called without arguments.
    FirstArgument,
    /// `"one_per_first_argument"`: calls of this global with equal first arguments are one
    /// object, as a factory that keeps one per argument makes them (Mitogen's parent's
    /// `_unpickle_context`, through `Router.context_by_id`): equal to an object of the same
    /// global whose first argument is equal, to nothing else. The first argument must be a
    /// scalar (None, bool, int, float, complex, str, bytes, global), else the object is
    /// unhashable.
    OnePerFirstArgument,
    /// `"datetime"`: compared and hashed by value, as CPython compares the `datetime` type
    /// the global names (`datetime.date`, `time`, `datetime`, `timedelta`, `timezone`; the
    /// rules are in `src/build/keys/datetime.rs`): two equal dates are one key. A record
    /// whose value cannot be read (a state CPython would reject, a tzinfo that is not a
    /// `timezone` record) is unhashable. Only for those five globals.
    Datetime,
}

impl RecordKey {
    /// The TOML name of each setting, in [`RecordKey`]'s order.
    pub const NAMES: [(&'static str, RecordKey); 5] = [
        ("identity", RecordKey::Identity),
        ("unhashable", RecordKey::Unhashable),
        ("first_argument", RecordKey::FirstArgument),
        ("one_per_first_argument", RecordKey::OnePerFirstArgument),
        ("datetime", RecordKey::Datetime),
    ];
}

impl GlobalRule {
    /// A rule allowing `module.name` with `constructor`: every form (narrowed to the
    /// constructor's own, [`Constructor::supported_forms`], once in a policy), no argument
    /// schema, each object a key of its own ([`RecordKey::Identity`]); what
    /// [`PolicyBuilder::allow`] adds. Change a setting with [`GlobalRule::forms`],
    /// [`GlobalRule::args`] or [`GlobalRule::key`].
    ///
    /// ```
    /// use picklewarden::policy::{GlobalRule, RecordKey};
    /// use picklewarden::{Constructor, Policy};
    /// let rule = GlobalRule::new("geometry", "Point", Constructor::Record).key(RecordKey::Unhashable);
    /// let policy = Policy::builder().name("points").allow_rule(rule).build()?;
    /// assert_eq!(policy.rules().len(), 1);
    /// assert_eq!(policy.rules()[0].key, RecordKey::Unhashable);
    /// # Ok::<(), picklewarden::policy::PolicyError>(())
    /// ```
    pub fn new(module: &str, name: &str, constructor: Constructor) -> GlobalRule {
        GlobalRule {
            module: module.to_owned(),
            name: name.to_owned(),
            constructor,
            forms: Forms::ALL,
            args: None,
            key: RecordKey::Identity,
        }
    }

    /// Replaces the forms allowed.
    pub fn forms(mut self, forms: Forms) -> GlobalRule {
        self.forms = forms;
        self
    }

    /// Sets the argument schema (for `record`).
    pub fn args(mut self, args: ArgsSchema) -> GlobalRule {
        self.args = Some(args);
        self
    }

    /// Sets how the object is compared as a dict key or set item (for `record`).
    pub fn key(mut self, key: RecordKey) -> GlobalRule {
        self.key = key;
        self
    }

    /// Checks that a call of the given kind is allowed (INST and OBJ are the form `inst`).
    ///
    /// # Errors
    /// [`ErrorKind::FormNotAllowed`] naming the opcode family and the global.
    pub fn check_call(&self, kind: CallKind) -> Result<(), ErrorKind> {
        let (allowed, form) = match kind {
            CallKind::Inst | CallKind::Obj => (self.forms.inst, "INST/OBJ"),
            CallKind::Reduce => (self.forms.reduce, "REDUCE"),
            CallKind::NewObj => (self.forms.newobj, "NEWOBJ"),
            CallKind::NewObjEx => (self.forms.newobj_ex, "NEWOBJ_EX"),
        };
        if allowed {
            Ok(())
        } else {
            Err(self.form_refused(form))
        }
    }

    /// [`ErrorKind::FormNotAllowed`] of `form` on this global, its names escaped and cut as
    /// error messages show text from the input.
    pub fn form_refused(&self, form: &'static str) -> ErrorKind {
        ErrorKind::FormNotAllowed {
            form,
            module: escape_for_display(&self.module),
            name: escape_for_display(&self.name),
        }
    }
}

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
pub const BUILTIN_POLICIES: [&str; 6] = [
    "data",
    "strict",
    "mitogen",
    "mitogen-plus",
    "torch",
    "numpy",
];

const DATA_TOML: &str = include_str!("../../policy/data.toml");
const STRICT_TOML: &str = include_str!("../../policy/strict.toml");
const MITOGEN_TOML: &str = include_str!("../../policy/mitogen.toml");
const MITOGEN_PLUS_TOML: &str = include_str!("../../policy/mitogen-plus.toml");
const TORCH_TOML: &str = include_str!("../../policy/torch.toml");
const NUMPY_TOML: &str = include_str!("../../policy/numpy.toml");

/// The built-in policy file `name`'s text.
fn builtin_toml(name: &str) -> Option<&'static str> {
    Some(match name {
        "data" => DATA_TOML,
        "strict" => STRICT_TOML,
        "mitogen" => MITOGEN_TOML,
        "mitogen-plus" => MITOGEN_PLUS_TOML,
        "torch" => TORCH_TOML,
        "numpy" => NUMPY_TOML,
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
    /// `"torch"`, `"numpy"`), or `None`.
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
mod tests {
    use super::*;

    #[test]
    fn builtins_parse() {
        for name in BUILTIN_POLICIES {
            let p = Policy::from_toml_str(builtin_toml(name).unwrap()).unwrap();
            assert_eq!(p.name, name);
        }
        let data = Policy::data();
        let i = data.find("_codecs", "encode").unwrap();
        assert_eq!(data.rule(i).unwrap().constructor, Constructor::Latin1Bytes);
        assert!(data.find("__builtin__", "set").is_some());
        assert!(data.find("builtins", "set").is_some());
        assert!(data.find("os", "system").is_none());
        assert!(Policy::strict().rules().is_empty());
    }

    #[test]
    fn native_forms_cannot_be_widened() {
        // A file naming a form the constructor lacks is refused, with what it supports...
        let e = Policy::from_toml_str(
            "name = \"x\"\n[[global]]\nmodule = \"builtins\"\nname = \"set\"\nconstructor = \"set\"\nforms = [\"reduce\", \"newobj\", \"build\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("supports only the forms reduce, inst (not newobj, build)"),
            "{e}"
        );
        // ... and a rule built in code loses it in `allow`.
        let mut p = Policy::empty("x");
        p.allow(GlobalRule {
            module: "builtins".into(),
            name: "set".into(),
            constructor: Constructor::Set,
            forms: Forms::ALL,
            args: None,
            key: RecordKey::Identity,
        });
        let r = p.rule(p.find("builtins", "set").unwrap()).unwrap();
        assert!(r.forms.reduce && r.forms.inst);
        assert!(!r.forms.newobj && !r.forms.newobj_ex && !r.forms.build && !r.forms.items);
    }

    #[test]
    fn settings_that_could_never_apply_are_refused() {
        let record = |arg: &str| {
            format!(
                "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nargs = [{arg}]\n"
            )
        };
        for (text, says) in [
            (
                record("{ type = \"int\", min = 5, max = 1 }"),
                "min 5 is above max 1",
            ),
            (
                record("{ type = \"str\", min = 0 }"),
                "min and max apply to int",
            ),
            (
                record("{ type = \"int\", max_len = 3 }"),
                "max_len applies to",
            ),
            (
                record("{ type = \"list\", keys = \"str\" }"),
                "keys applies to dict",
            ),
            (
                record("{ type = \"dict\", keys = \"list\" }"),
                "can match no key",
            ),
            (
                "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nmin_args = 2\n"
                    .to_owned(),
                "min_args applies only with an args list",
            ),
            (
                "name = \"x\"\npython2_str_encoding = \"utf-8\"\n".to_owned(),
                "python2_str_encoding applies only",
            ),
            (
                "name = \"x\"\npython2_str = \"bytes\"\npython2_str_encoding = \"latin1\"\n"
                    .to_owned(),
                "python2_str_encoding applies only",
            ),
            (
                "name = \"x\"\n[limits]\nmax_input_bytes = \"64X\"\n".to_owned(),
                "is not a count",
            ),
            (
                "name = \"x\"\n[limits]\nmax_input_bytes = -1\n".to_owned(),
                "limit max_input_bytes: -1 is not a count",
            ),
            (
                "name = \"x\"\n[limits]\nmax_input_bytes = 1.5\n".to_owned(),
                "limit max_input_bytes: 1.5 is not a count",
            ),
            (
                "name = \"x\"\n[limits]\nmax_input_bytes = \"99999999999G\"\n".to_owned(),
                "is not a count from 0 to 2**64 - 1",
            ),
        ] {
            let e = Policy::from_toml_str(&text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        // What does apply is still accepted: on `any`, every constraint applies to the values
        // it fits (a review helper found `any` with max_len refused at load).
        let p = Policy::from_toml_str(&record(
            "{ type = \"int\", min = 1, max = 1 }, { type = \"dict\", max_len = 2, keys = \"str\" }, { type = \"any\", min = 0, max = 9, max_len = 3, keys = \"int\" }",
        ))
        .unwrap();
        assert!(p.find("m", "C").is_some());
    }

    #[test]
    fn limits_take_suffixes_as_the_command_line_does() {
        let p = Policy::from_toml_str(
            "name = \"x\"\n[limits]\nmax_input_bytes = \"64M\"\nmax_memo_entries = \"2k\"\nmax_nesting_depth = 7\nmax_container_items = \"1_000\"\n",
        )
        .unwrap();
        assert_eq!(p.limits.max_input_bytes, 64 << 20);
        assert_eq!(p.limits.max_memo_entries, 2048);
        assert_eq!(p.limits.max_nesting_depth, 7);
        assert_eq!(p.limits.max_container_items, 1000);
    }

    #[test]
    fn bad_files_are_refused() {
        for text in [
            "name = 1",
            "name = \"x\"\nbogus = 1",
            "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"eval\"\n",
            "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"record\"\nforms = [\"call\"]\n",
            "name = \"x\"\n[limits]\nmax_bogus = 1\n",
            "name = \"x\"\npython2_str = \"str\"\npython2_str_encoding = \"cp1252\"\n",
            "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"set\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"set\"\n",
        ] {
            assert!(Policy::from_toml_str(text).is_err(), "{text}");
        }
    }

    /// The `[mitogen]` sections of the shipped Mitogen policies are the Rust twin
    /// (`MessagePolicy::mitogen`), and a policy without the section gets it too.
    #[test]
    fn the_mitogen_message_policy_files_match_the_rust_twin() {
        for name in BUILTIN_POLICIES {
            let p = Policy::builtin(name).unwrap();
            assert_eq!(p.mitogen, MessagePolicy::mitogen(), "{name}");
        }
        let twin = MessagePolicy::mitogen();
        let handles: Vec<(u32, &str, &str)> = twin
            .handles
            .iter()
            .map(|(&h, r)| (h, r.name.as_str(), r.payload.name()))
            .collect();
        assert_eq!(
            handles,
            [
                (100, "GET_MODULE", "module_name"),
                (102, "FORWARD_LOG", "raw"),
                (103, "ADD_ROUTE", "route"),
                (104, "DEL_ROUTE", "route_id"),
                (105, "ALLOCATE_ID", "empty"),
                (109, "DETACHING", "empty"),
                (110, "CALL_SERVICE", "service_call"),
                (112, "GET_RESOURCE", "resource_request"),
            ]
        );
        assert_eq!(
            twin.handles.get(&112).map(|r| &r.payload),
            Some(&PayloadRule::ResourceRequest {
                packages: Vec::new()
            })
        );
        assert!(twin.reply_handles);
        assert_eq!(twin.max_new_contexts_per_frame, 100);
        assert_eq!(twin.max_new_contexts_per_stream, 10_000);
    }

    #[test]
    fn mitogen_sections_that_could_never_apply_are_refused() {
        let section = |handles: &str| {
            format!(
                "name = \"x\"\n[mitogen]\nreply_handles = true\nmax_new_contexts_per_frame = 1\n\
                 max_new_contexts_per_stream = 2\n{handles}"
            )
        };
        let handle = |h: u32, payload: &str, extra: &str| {
            format!(
                "[[mitogen.handle]]\nhandle = {h}\nname = \"H\"\npayload = \"{payload}\"\n{extra}"
            )
        };
        for (text, says) in [
            (section(&handle(1000, "pickles", "")), "are reply handles"),
            (
                section(&(handle(100, "raw", "") + &handle(100, "raw", ""))),
                "listed twice",
            ),
            (
                section(&handle(100, "code", "")),
                "unknown payload \"code\"",
            ),
            (
                section(&handle(100, "raw", "packages = [\"a\"]")),
                "packages applies to payload = \"resource_request\" only",
            ),
            (
                section(&handle(
                    112,
                    "resource_request",
                    "top_level_packages = [\"a\"]",
                )),
                "top_level_packages applies to payload = \"module_name\" only",
            ),
            (
                "name = \"x\"\n[mitogen]\nreply_handles = true\n".to_owned(),
                "missing field",
            ),
            (section("bogus = 1\n"), "unknown field"),
        ] {
            let e = Policy::from_toml_str(&text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        // A section is the whole allowlist: here GET_RESOURCE for one package, nothing else.
        let p = Policy::from_toml_str(&section(&handle(
            112,
            "resource_request",
            "packages = [\"ansible_mitogen\"]",
        )))
        .unwrap();
        assert_eq!(p.mitogen.handles.len(), 1);
        assert_eq!(p.mitogen.max_new_contexts_per_frame, 1);
        assert_eq!(p.mitogen.max_new_contexts_per_stream, 2);
        assert_eq!(
            p.mitogen.handles.get(&112).map(|r| &r.payload),
            Some(&PayloadRule::ResourceRequest {
                packages: vec!["ansible_mitogen".into()]
            })
        );
    }
}
