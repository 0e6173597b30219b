//! Argument schemas for `record` globals: the types, ranges and lengths a call may carry.

use std::collections::{HashMap, HashSet};

use crate::value::{Arena, NodeId, Value};

/// The type an argument must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// A global used as a value (a class or function the policy allows, as torch's storage
    /// types in a persistent id).
    Global,
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
            "global" => ArgType::Global,
            _ => return None,
        })
    }
}

/// One positional argument's constraints.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct ArgsSchema {
    /// Specs of the positional arguments, in order.
    pub args: Vec<ArgSpec>,
    /// Fewest arguments accepted (the rest are optional).
    pub min_args: usize,
}

/// What argument checks of one document found before, so that a value passed to many calls
/// through the memo is not walked or counted again at each (A46, A52).
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// The (dict, key type) pairs whose keys all matched (the build seals a checked dict, so
    /// it cannot have changed): the first [`RECENT_KEYS`] in `recent_keys` (a Mitogen call's
    /// one or two keyword dicts, checked without hashing or allocating), the rest in `keys`.
    recent_keys: [Option<(NodeId, ArgType)>; RECENT_KEYS],
    keys: HashSet<(NodeId, ArgType)>,
    /// Texts longer in bytes than a `max_len` they were checked against: their code points,
    /// counted once (texts do not change), up to one past the largest `max_len` asked.
    chars: HashMap<NodeId, (u64, u64)>,
}

/// How many checked (dict, key type) pairs [`Checked`] keeps before its hash set.
const RECENT_KEYS: usize = 4;

impl Checked {
    /// Whether the keys of `dict` were found to be all of type `ty`.
    fn keys_checked(&self, dict: NodeId, ty: ArgType) -> bool {
        self.recent_keys.contains(&Some((dict, ty)))
            || (!self.keys.is_empty() && self.keys.contains(&(dict, ty)))
    }

    /// Notes that the keys of `dict` are all of type `ty`.
    fn note_keys(&mut self, dict: NodeId, ty: ArgType) {
        match self.recent_keys.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some((dict, ty)),
            None => {
                self.keys.insert((dict, ty));
            }
        }
    }
}

impl ArgsSchema {
    /// Checks the items of an args tuple. Returns a reason on mismatch. `checked` holds what
    /// earlier checks found (dict keys matched, texts' lengths), which is not found again, and
    /// gains what this one finds.
    pub(crate) fn check(
        &self,
        arena: &Arena<'_>,
        args: &[NodeId],
        checked: &mut Checked,
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
            spec.check(arena, id, v, checked)
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
        ArgType::Global => matches!(v, Value::Global(_)),
    }
}

impl Checked {
    /// The code points of the text `bytes` (node `id`) as far as a check against `max` needs
    /// them: for a text of at most `max` bytes, its byte length (an upper bound: the text
    /// passes uncounted); else its exact count when that is at most `max + 1`, and at least
    /// `max + 1` otherwise. One code
    /// point per byte that is not a UTF-8 continuation byte, in valid UTF-8 and in
    /// `surrogatepass` UTF-8 alike, each surrogate encoded on its own (a text with surrogates
    /// was once counted in bytes, which refused real Mitogen CallErrors holding
    /// `surrogateescape` file names as 3x their length). A text of at most `max` bytes is not
    /// counted; a longer one is counted once per document, up to one past the largest `max`
    /// it was checked against (a review helper passed one text of 9,999 emoji to a million
    /// Mitogen CallError calls, 5 MB: counting it at each call took 16.9 s, Mitogen 2.0 s).
    fn chars(&mut self, id: NodeId, bytes: &[u8], max: u64) -> u64 {
        if bytes.len() as u64 <= max {
            return bytes.len() as u64;
        }
        let cap = max.saturating_add(1);
        // (count, how far it was counted: exact when below that)
        if let Some(&(count, upto)) = self.chars.get(&id) {
            if count < upto || count >= cap {
                return count;
            }
        }
        let take = usize::try_from(cap).unwrap_or(usize::MAX);
        let count = bytes
            .iter()
            .filter(|&&b| b & 0xC0 != 0x80)
            .take(take)
            .count() as u64;
        self.chars.insert(id, (count, cap));
        count
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
        checked: &mut Checked,
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
            let len = match v {
                Value::Str(s) => Some(checked.chars(id, s.as_bytes(), max)),
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
            if checked.keys_checked(id, kt) {
                return Ok(());
            }
            for &(k, _) in d {
                let kv = arena.get(k).ok_or("dangling key")?;
                if !type_matches(kt, kv) {
                    return Err(format!("dict key of type {}", kv.type_name()));
                }
            }
            checked.note_keys(id, kt);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text's code points are counted once per document, as far as the largest maximum
    /// asked needs them; a text no longer in bytes than the maximum is not counted.
    #[test]
    fn text_lengths_are_counted_once_as_far_as_needed() {
        let mut c = Checked::default();
        let text = "é".repeat(10); // 20 bytes, 10 code points
        let id = NodeId(7);
        assert_eq!(c.chars(id, text.as_bytes(), 20), 20);
        assert!(c.chars.is_empty());
        // Counted up to max + 1 = 4: "at least 4".
        assert_eq!(c.chars(id, text.as_bytes(), 3), 4);
        assert_eq!(c.chars.get(&id), Some(&(4, 4)));
        // A smaller maximum reuses the count (4 >= 3).
        assert_eq!(c.chars(id, text.as_bytes(), 2), 4);
        // A larger one counts further, then exactly.
        assert_eq!(c.chars(id, text.as_bytes(), 15), 10);
        assert_eq!(c.chars.get(&id), Some(&(10, 16)));
        assert_eq!(c.chars(id, text.as_bytes(), 9), 10);
        assert_eq!(c.chars(id, text.as_bytes(), 12), 10);
        // Surrogates (surrogatepass UTF-8, 3 bytes each) count one each.
        assert_eq!(c.chars(NodeId(8), b"\xed\xa0\x80\xed\xa0\x80a", 2), 3);
    }

    /// Checked dicts are found again past the first few kept without hashing, and an
    /// unchecked one or another key type is not.
    #[test]
    fn checked_dict_keys_are_found_past_the_recent_ones() {
        let mut c = Checked::default();
        for i in 0..10 {
            assert!(!c.keys_checked(NodeId(i), ArgType::Str));
            c.note_keys(NodeId(i), ArgType::Str);
        }
        assert_eq!(c.keys.len(), 10 - RECENT_KEYS);
        for i in 0..10 {
            assert!(c.keys_checked(NodeId(i), ArgType::Str), "{i}");
            assert!(!c.keys_checked(NodeId(i), ArgType::Int), "{i}");
        }
        assert!(!c.keys_checked(NodeId(10), ArgType::Str));
    }
}
