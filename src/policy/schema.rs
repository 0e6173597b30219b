//! Argument schemas for `record` globals: the types, ranges and lengths a call may carry.

use std::collections::HashSet;

use crate::value::{Arena, NodeId, Value};

/// The type an argument must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgType {
    /// Anything.
    Any,
    /// `None`.
    None,
    /// `bool`.
    Bool,
    /// `int` (not bool), with optional `min`/`max`.
    Int,
    /// `float` (ints are not floats here).
    Float,
    /// `str`, with optional `max_len` in code points.
    Str,
    /// `bytes`, with optional `max_len` in bytes.
    Bytes,
    /// `tuple`, with optional `max_len` in items.
    Tuple,
    /// `list`, with optional `max_len` in items.
    List,
    /// `dict`, with optional `max_len` in items and `keys` (the type of every key).
    Dict,
}

impl ArgType {
    /// Parses a type name as policy files spell it.
    pub fn from_name(name: &str) -> Option<ArgType> {
        Some(match name {
            "any" => ArgType::Any,
            "none" => ArgType::None,
            "bool" => ArgType::Bool,
            "int" => ArgType::Int,
            "float" => ArgType::Float,
            "str" => ArgType::Str,
            "bytes" => ArgType::Bytes,
            "tuple" => ArgType::Tuple,
            "list" => ArgType::List,
            "dict" => ArgType::Dict,
            _ => return None,
        })
    }
}

/// One positional argument's constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// Required type.
    pub ty: ArgType,
    /// `None` is also accepted.
    pub nullable: bool,
    /// Smallest int allowed (inclusive).
    pub min: Option<i64>,
    /// Largest int allowed (inclusive).
    pub max: Option<i64>,
    /// Longest str (code points), bytes (bytes) or container (items) allowed.
    pub max_len: Option<u64>,
    /// For dicts: the type every key must have.
    pub keys: Option<ArgType>,
}

/// The accepted positional arguments of a record call: between `min_args` and `args.len()`
/// arguments, each matching its spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgsSchema {
    /// Specs of the positional arguments, in order.
    pub args: Vec<ArgSpec>,
    /// Fewest arguments accepted (the rest are optional).
    pub min_args: usize,
}

impl ArgsSchema {
    /// Checks the items of an args tuple. Returns a reason on mismatch. `keys_checked` holds
    /// the (dict, key type) pairs found to match before, which are not walked again (the
    /// build seals a checked dict, so it cannot have changed), and gains the new ones.
    pub(crate) fn check(
        &self,
        arena: &Arena<'_>,
        args: &[NodeId],
        keys_checked: &mut HashSet<(NodeId, ArgType)>,
    ) -> Result<(), String> {
        if args.len() < self.min_args || args.len() > self.args.len() {
            return Err(format!(
                "expected {} to {} arguments, got {}",
                self.min_args,
                self.args.len(),
                args.len()
            ));
        }
        for (i, (spec, &id)) in self.args.iter().zip(args).enumerate() {
            let v = arena.get(id).ok_or("dangling argument")?;
            spec.check(arena, id, v, keys_checked)
                .map_err(|why| format!("argument {} of {}: {why}", i + 1, args.len()))?;
        }
        Ok(())
    }
}

fn type_matches(ty: ArgType, v: Value<'_>) -> bool {
    match ty {
        ArgType::Any => true,
        ArgType::None => matches!(v, Value::None),
        ArgType::Bool => matches!(v, Value::Bool(_)),
        ArgType::Int => matches!(v, Value::Int(_) | Value::BigInt(_)),
        ArgType::Float => matches!(v, Value::Float(_)),
        ArgType::Str => matches!(v, Value::Str(_)),
        ArgType::Bytes => matches!(v, Value::Bytes(_)),
        ArgType::Tuple => matches!(v, Value::Tuple(_)),
        ArgType::List => matches!(v, Value::List(_)),
        ArgType::Dict => matches!(v, Value::Dict(_)),
    }
}

impl ArgSpec {
    /// A spec of type `ty` with no other constraint.
    pub fn of(ty: ArgType) -> ArgSpec {
        ArgSpec {
            ty,
            nullable: false,
            min: None,
            max: None,
            max_len: None,
            keys: None,
        }
    }

    fn check(
        &self,
        arena: &Arena<'_>,
        id: NodeId,
        v: Value<'_>,
        keys_checked: &mut HashSet<(NodeId, ArgType)>,
    ) -> Result<(), String> {
        if self.nullable && matches!(v, Value::None) {
            return Ok(());
        }
        if !type_matches(self.ty, v) {
            return Err(format!("expected {:?}, got {}", self.ty, v.type_name()).to_lowercase());
        }
        match v {
            Value::Int(i) if self.min.is_some_and(|m| i < m) || self.max.is_some_and(|m| i > m) => {
                return Err(format!("{i} out of range"));
            }
            Value::BigInt(_) if self.min.is_some() || self.max.is_some() => {
                return Err("int out of range".into());
            }
            _ => {}
        }
        if let Some(max) = self.max_len {
            // Code points counted only up to one past the maximum: a long text passed to many
            // calls through the memo costs the maximum per call, not its length (A46).
            let cap = usize::try_from(max).unwrap_or(usize::MAX).saturating_add(1);
            let len = match v {
                // One code point per byte that is not a UTF-8 continuation byte, in valid
                // UTF-8 and in `surrogatepass` UTF-8 alike, each surrogate encoded on its own
                // (a text with surrogates was once counted in bytes, which refused real
                // Mitogen CallErrors holding `surrogateescape` file names as 3x their length).
                Value::Str(s) => Some(
                    s.as_bytes()
                        .iter()
                        .filter(|&&b| b & 0xC0 != 0x80)
                        .take(cap)
                        .count() as u64,
                ),
                Value::Bytes(b) => Some(b.len() as u64),
                Value::Tuple(t) | Value::List(t) => Some(t.len() as u64),
                Value::Dict(d) => Some(d.len() as u64),
                _ => None,
            };
            if let Some(len) = len.filter(|&len| len > max) {
                let more = if matches!(v, Value::Str(_)) {
                    "at least "
                } else {
                    ""
                };
                return Err(format!("length {more}{len} over {max}"));
            }
        }
        if let (Value::Dict(d), Some(kt)) = (v, self.keys) {
            if keys_checked.contains(&(id, kt)) {
                return Ok(());
            }
            for &(k, _) in d {
                let kv = arena.get(k).ok_or("dangling key")?;
                if !type_matches(kt, kv) {
                    return Err(format!("dict key of type {}", kv.type_name()));
                }
            }
            keys_checked.insert((id, kt));
        }
        Ok(())
    }
}
