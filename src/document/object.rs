//! Records and globals: what the policy's constructors keep.

use std::borrow::Cow;

use super::NodeId;
use crate::policy::RecordKey;

/// How a record object was made (the opcode that made it), as typed JSON's `kind` field
/// names it ([`crate::json`], docs/typed-json.md). More kinds may come, as opcodes are told
/// apart that CPython runs differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallKind {
    /// REDUCE: `callable(*args)`.
    Reduce,
    /// NEWOBJ: `cls.__new__(cls, *args)`.
    NewObj,
    /// NEWOBJ_EX: `cls.__new__(cls, *args, **kwargs)`.
    NewObjEx,
    /// INST (protocol 0: the class named by the opcode, the arguments after the MARK):
    /// `cls(*args)`, but `cls.__new__(cls)` with no arguments when `cls` is a class without
    /// `__getinitargs__` (`Lib/pickle.py` `_instantiate`).
    Inst,
    /// OBJ (protocol 1: the class is the first item after the MARK), as INST.
    Obj,
}

impl CallKind {
    /// `"reduce"`, `"newobj"`, `"newobj_ex"`, `"inst"` or `"obj"`.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Reduce => "reduce",
            CallKind::NewObj => "newobj",
            CallKind::NewObjEx => "newobj_ex",
            CallKind::Inst => "inst",
            CallKind::Obj => "obj",
        }
    }

    /// INST or OBJ (the policy's `inst` form).
    pub fn is_inst(self) -> bool {
        matches!(self, CallKind::Inst | CallKind::Obj)
    }
}

/// An object that the policy keeps as a record (constructor `record`): the call that made it
/// and what was done to it afterwards, as plain data. Nothing is ever called.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Object {
    /// How it was made.
    pub kind: CallKind,
    /// The global that was called (a [`Value::Global`](super::Value::Global) node).
    pub callable: NodeId,
    /// The positional arguments (a [`Value::Tuple`](super::Value::Tuple) node).
    pub args: NodeId,
    /// The keyword arguments (a [`Value::Dict`](super::Value::Dict) node), NEWOBJ_EX only.
    pub kwargs: Option<NodeId>,
    /// The state given by the last BUILD, if any.
    pub state: Option<NodeId>,
    /// Items added by APPEND/APPENDS.
    pub listitems: Vec<NodeId>,
    /// Pairs added by SETITEM/SETITEMS.
    pub dictitems: Vec<(NodeId, NodeId)>,
    /// How it is compared as a dict key or set item: its policy rule's `key`.
    pub key: RecordKey,
}

/// A global (class or function) named by GLOBAL, STACK_GLOBAL, INST or an extension code and
/// allowed by the policy. Module and name are exactly as written in the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Global<'a> {
    /// Module name (`"__builtin__"`, `"collections"`).
    pub module: Cow<'a, str>,
    /// Qualified name (`"set"`, `"OrderedDict"`).
    pub name: Cow<'a, str>,
    /// Index of the policy rule that allowed it.
    pub(crate) rule: usize,
    /// Read at a protocol below 3, where CPython's `find_class` maps Python 2 names to Python
    /// 3 ones (`fix_imports`); the canonical writer, whose protocol 5 maps nothing, writes the
    /// mapped name ([`crate::canonical::python3_name`]).
    pub(crate) fix_imports: bool,
}

impl Global<'_> {
    /// The (module, name) CPython 3 finds this global under: as written, except that one read
    /// at protocol 0-2 has the Python 3 name `find_class` maps it to there
    /// ([`crate::canonical::python3_name`]). Two globals are one dict key or set item when these
    /// agree, as CPython finds one object for `__builtin__.set` at protocol 2 and `builtins.set`.
    pub fn python3_name(&self) -> (&str, &str) {
        if self.fix_imports {
            crate::compat::python3_name(&self.module, &self.name)
        } else {
            (&self.module, &self.name)
        }
    }
}
