//! What one allowed global is: [`GlobalRule`] (a `[[global]]` entry of a policy file), the
//! closed set of [`Constructor`]s it maps to, the [`Forms`] it may be used in, how a `record`
//! object is compared as a key ([`RecordKey`]) and what the reader after does with a record's
//! arguments and state ([`Cost`]).

use super::{ArgsSchema, Check};
#[cfg(doc)]
use super::{Policy, PolicyBuilder};
use crate::error::{escape_for_display, ErrorKind};
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

    pub(super) fn set_by_name(&mut self, name: &str) -> bool {
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
    pub(super) fn names(self) -> Vec<&'static str> {
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

    pub(super) fn intersect(self, other: Forms) -> Forms {
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
    /// For `record`: what the class's constructor does with the call's arguments in the
    /// reader after (the TOML setting `call_cost`; [`Cost::Walks`], the worst, when not
    /// given).
    pub call_cost: Cost,
    /// For `record`: what BUILD does with the state in the reader after (the TOML setting
    /// `build_cost`; [`Cost::Walks`] when not given).
    pub build_cost: Cost,
    /// For `record`: a check of the call and BUILD against what the global's real writer
    /// produces ([`Check`], the TOML setting `check`), applied by the build; `None` for none.
    pub check: Option<Check>,
}

/// What the reader after picklewarden does with a record's call arguments or BUILD state, as
/// the class's `__new__`/`__init__` or `__setstate__` (or CPython's default BUILD) does it in
/// CPython: the work and memory the build charges at **every** call and every BUILD, a value
/// handed again through the memo included, to `max_key_steps_per_byte` (one step an item
/// iterated or inserted, and the model of the keys' hashing and comparisons for an
/// insertion) and to `max_copy_bytes_per_byte` (the bytes the copy allocates: a text's or
/// bytes' length, 8 a list, tuple or sequence item, 32 a dict pair or set item). A policy
/// sets it from the class's source; the built-in policies cite the lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Cost {
    /// `"keeps"`: keeps references to its arguments (or state) without iterating them
    /// (`Exception.__init__`, a factory that looks its arguments up). Charged nothing.
    Keeps,
    /// `"copies"`: copies each argument (each item of a state tuple) one level deep: a str or
    /// bytes subclass made from a text or bytes, `tuple(t)`, `dict(d)` into a new object
    /// (whose keys are inserted again: modelled as a new dict's), `torch.Size(t)`.
    Copies,
    /// `"inserts_items"`: inserts each item of its first argument (each key of a dict) as a key
    /// of a new dict or set: `collections.Counter(iterable)` (`Counter.update`), `set(it)`.
    InsertsItems,
    /// `"inserts_pairs"`: inserts the first item of each pair of its first argument (each key
    /// of a dict) as a key of a new dict: `dict(pairs)`, `collections.OrderedDict(pairs)`,
    /// a dict subclass's `dict.__init__` (Mitogen's `Kwargs`).
    InsertsPairs,
    /// `"sets_attributes"`, for BUILD: CPython's BUILD of an object without `__setstate__`
    /// (`Modules/_pickle.c` `load_build`): each key of a state dict, and of the slot-state dict
    /// of a `(state, slotstate)` pair, set on the instance (`inst.__dict__[k] = v`,
    /// `setattr`).
    SetsAttributes,
    /// `"walks"` (the default, for a class whose source was not read): walks every plain value
    /// its arguments (or state) reach, once each (lists, tuples, dicts, sets, frozensets,
    /// texts and bytes; not into other record objects, whose own calls were charged), as a
    /// deep copy would, and inserts every dict's and set's keys again.
    #[default]
    Walks,
}

impl Cost {
    /// The TOML name of each setting, in [`Cost`]'s order.
    pub const NAMES: [(&'static str, Cost); 6] = [
        ("keeps", Cost::Keeps),
        ("copies", Cost::Copies),
        ("inserts_items", Cost::InsertsItems),
        ("inserts_pairs", Cost::InsertsPairs),
        ("sets_attributes", Cost::SetsAttributes),
        ("walks", Cost::Walks),
    ];

    /// The setting's TOML name.
    pub fn name(self) -> &'static str {
        Cost::NAMES
            .iter()
            .find(|(_, c)| *c == self)
            .map_or("walks", |(n, _)| n)
    }
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
            call_cost: Cost::Walks,
            build_cost: Cost::Walks,
            check: None,
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

    /// Sets the check of its calls and BUILDs (for `record`; its forms must be within
    /// [`Check::forms`]).
    pub fn check(mut self, check: Check) -> GlobalRule {
        self.check = Some(check);
        self
    }

    /// Sets how the object is compared as a dict key or set item (for `record`).
    pub fn key(mut self, key: RecordKey) -> GlobalRule {
        self.key = key;
        self
    }

    /// Sets what the reader after does with the call's arguments and with BUILD's state (for
    /// `record`; [`Cost`]).
    pub fn cost(mut self, call: Cost, build: Cost) -> GlobalRule {
        self.call_cost = call;
        self.build_cost = build;
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
