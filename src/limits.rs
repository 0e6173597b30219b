//! Resource limits: the configuration ([`Limits`]) and its defaults.
//!
//! Every limit is strict (never best-effort): reaching `max` is allowed, passing it is refused
//! with [`crate::ErrorKind::LimitExceeded`], naming the limit, the value that would have been
//! reached and the offset. One [`Limits::default()`] serves the library, the CLI and the service.
//!
//! Peak memory of a decode is bounded by `max_alloc_bytes` for the values built, plus the input
//! itself, plus at most 16 bytes per stack entry (`max_stack_len`) and per memo entry
//! (`max_memo_entries`).

use std::fmt;
use std::str::FromStr;

/// Default for [`Limits::max_input_bytes`]: 256 MiB. Without it a peer could make the decoder
/// read without end; 256 MiB is twice Mitogen's default maximum message size (128 MiB).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 256 * 1024 * 1024;
/// Default for [`Limits::max_nesting_depth`]: 1000 levels, CPython's default recursion limit
/// (a deeper value cannot be pickled by CPython, and consumers that recurse would overflow).
pub const DEFAULT_MAX_NESTING_DEPTH: u64 = 1000;
/// Default for [`Limits::max_stack_len`]: 4 Mi entries (values and marks). Without it DUP or
/// MARK bombs grow the stack by 4-16 bytes per input byte.
pub const DEFAULT_MAX_STACK_LEN: u64 = 4 * 1024 * 1024;
/// Default for [`Limits::max_memo_entries`]: 16 Mi entries set by PUT/BINPUT/LONG_BINPUT/MEMOIZE.
pub const DEFAULT_MAX_MEMO_ENTRIES: u64 = 16 * 1024 * 1024;
/// Default for [`Limits::max_container_items`]: 64 Mi items in one list, tuple, dict, set or
/// record.
pub const DEFAULT_MAX_CONTAINER_ITEMS: u64 = 64 * 1024 * 1024;
/// Default for [`Limits::max_nodes`]: 64 Mi values created in one decode.
pub const DEFAULT_MAX_NODES: u64 = 64 * 1024 * 1024;
/// Default for [`Limits::max_alloc_bytes`]: 2 GiB charged for values (node slots, owned bytes
/// and text, container item slots, big-int digits, dict indexes).
pub const DEFAULT_MAX_ALLOC_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default for [`Limits::max_long_text_digits`]: 4300 digits, CPython's own
/// `sys.int_info.default_max_str_digits` (CVE-2020-10735): decimal-to-binary conversion is
/// quadratic, so a megabyte of digits would take seconds.
pub const DEFAULT_MAX_LONG_TEXT_DIGITS: u64 = 4300;
/// Default for [`Limits::max_long_bytes`]: 4096 bytes of a LONG1/LONG4 payload (a 9864-digit
/// number). Reading is linear, but writing it as decimal text (typed JSON, repr) is not.
pub const DEFAULT_MAX_LONG_BYTES: u64 = 4096;
/// Default for [`Limits::max_opcodes`]: 256 Mi opcodes executed in one decode.
pub const DEFAULT_MAX_OPCODES: u64 = 256 * 1024 * 1024;
/// Default for [`Limits::max_key_steps`]: 1 Mi steps (a few milliseconds of CPython) for one
/// dict key or set item. Without it a 130-byte key that is a DAG of tuples makes CPython hash
/// 3**40 items at one SETITEM, holding the GIL for good.
pub const DEFAULT_MAX_KEY_STEPS: u64 = 1024 * 1024;
/// Default for [`Limits::max_key_steps_per_byte`]: 64 steps per input byte for the whole
/// document. Without it a key used again and again (a 40,000-item tuple as the key of 40,000
/// dicts) makes CPython's work quadratic in the input.
pub const DEFAULT_MAX_KEY_STEPS_PER_BYTE: u64 = 64;
/// Default for [`Limits::max_key_collisions`]: 32 distinct keys of one dict or set with one
/// CPython hash value. Without it keys chosen to collide (`k * (2**61 - 1)` all hash to 0)
/// make CPython's dict quadratic: 40,000 of them (519 KB) took CPython 42 s. Plain data
/// collides too, because `hash(-1) == hash(-2)` in CPython: tuples of d small ints holding -1
/// or -2 share a hash 2**d at a time (the points of `range(-8, 8)` in 4 dimensions, 16), so
/// the cap admits 5 dimensions; the keys it admits cost CPython at most 31 comparisons an
/// insertion, which `max_key_steps_per_byte` bounds over the document.
pub const DEFAULT_MAX_KEY_COLLISIONS: u64 = 32;

/// Default for [`Limits::max_copy_bytes_per_byte`]: 32 bytes copied per input byte for the
/// whole document. Without it one value handed again and again through the memo to a
/// constructor that copies it (`bytearray(b)`, `_codecs.encode(t, 'latin1')`, Mitogen's
/// `Kwargs(d)`, a BUILD with one big state) makes the memory of the reader after (and of
/// picklewarden, where it copies too) quadratic in the input: 2,300 `bytearray(b)` of one
/// 900 KB bytes object are 2 GB from 912 KB of pickle. A pickler hands each value to one call,
/// which costs at most 16 bytes per input byte (a set item, 32 bytes, from a 2-byte BINGET;
/// CPython 3's protocol-2 sets of ints reach 10-13); the default leaves twice that.
pub const DEFAULT_MAX_COPY_BYTES_PER_BYTE: u64 = 32;
/// What [`Limits::max_copy_bytes_per_byte`] allows whatever the input's length: 64 KiB, so
/// that a short pickle that copies what it holds once is never refused by the ratio.
pub const COPY_BYTES_FLOOR: u64 = 64 * 1024;

/// The name of one limit; `name()` is the field name of [`Limits`] and the key accepted by
/// `--limit NAME=VALUE` and by the `[limits]` table of a policy file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitName {
    /// [`Limits::max_input_bytes`].
    MaxInputBytes,
    /// [`Limits::max_nesting_depth`].
    MaxNestingDepth,
    /// [`Limits::max_stack_len`].
    MaxStackLen,
    /// [`Limits::max_memo_entries`].
    MaxMemoEntries,
    /// [`Limits::max_container_items`].
    MaxContainerItems,
    /// [`Limits::max_nodes`].
    MaxNodes,
    /// [`Limits::max_alloc_bytes`].
    MaxAllocBytes,
    /// [`Limits::max_long_text_digits`].
    MaxLongTextDigits,
    /// [`Limits::max_long_bytes`].
    MaxLongBytes,
    /// [`Limits::max_opcodes`].
    MaxOpcodes,
    /// [`Limits::max_key_steps`].
    MaxKeySteps,
    /// [`Limits::max_key_steps_per_byte`].
    MaxKeyStepsPerByte,
    /// [`Limits::max_key_collisions`].
    MaxKeyCollisions,
    /// [`Limits::max_copy_bytes_per_byte`].
    MaxCopyBytesPerByte,
}

impl LimitName {
    /// Every limit, in documentation order.
    pub const ALL: [LimitName; 14] = [
        LimitName::MaxInputBytes,
        LimitName::MaxNestingDepth,
        LimitName::MaxStackLen,
        LimitName::MaxMemoEntries,
        LimitName::MaxContainerItems,
        LimitName::MaxNodes,
        LimitName::MaxAllocBytes,
        LimitName::MaxLongTextDigits,
        LimitName::MaxLongBytes,
        LimitName::MaxOpcodes,
        LimitName::MaxKeySteps,
        LimitName::MaxKeyStepsPerByte,
        LimitName::MaxKeyCollisions,
        LimitName::MaxCopyBytesPerByte,
    ];

    /// The limit's name (the field name of [`Limits`]).
    pub fn name(self) -> &'static str {
        match self {
            LimitName::MaxInputBytes => "max_input_bytes",
            LimitName::MaxNestingDepth => "max_nesting_depth",
            LimitName::MaxStackLen => "max_stack_len",
            LimitName::MaxMemoEntries => "max_memo_entries",
            LimitName::MaxContainerItems => "max_container_items",
            LimitName::MaxNodes => "max_nodes",
            LimitName::MaxAllocBytes => "max_alloc_bytes",
            LimitName::MaxLongTextDigits => "max_long_text_digits",
            LimitName::MaxLongBytes => "max_long_bytes",
            LimitName::MaxOpcodes => "max_opcodes",
            LimitName::MaxKeySteps => "max_key_steps",
            LimitName::MaxKeyStepsPerByte => "max_key_steps_per_byte",
            LimitName::MaxKeyCollisions => "max_key_collisions",
            LimitName::MaxCopyBytesPerByte => "max_copy_bytes_per_byte",
        }
    }

    /// The unit the limit counts in.
    pub fn unit(self) -> &'static str {
        match self {
            LimitName::MaxInputBytes | LimitName::MaxAllocBytes | LimitName::MaxLongBytes => {
                "bytes"
            }
            LimitName::MaxNestingDepth => "levels",
            LimitName::MaxStackLen | LimitName::MaxMemoEntries => "entries",
            LimitName::MaxContainerItems => "items",
            LimitName::MaxNodes => "values",
            LimitName::MaxLongTextDigits => "digits",
            LimitName::MaxOpcodes => "opcodes",
            LimitName::MaxKeySteps => "steps",
            LimitName::MaxKeyStepsPerByte => "steps per input byte",
            LimitName::MaxKeyCollisions => "keys",
            LimitName::MaxCopyBytesPerByte => "bytes per input byte",
        }
    }

    /// What the limit measures, as a refusal names it before the value seen: `nesting
    /// depth` 1001 is over max_nesting_depth 1000.
    pub fn measure(self) -> &'static str {
        match self {
            LimitName::MaxInputBytes => "input size",
            LimitName::MaxNestingDepth => "nesting depth",
            LimitName::MaxStackLen => "stack length",
            LimitName::MaxMemoEntries => "memo size",
            LimitName::MaxContainerItems => "container size",
            LimitName::MaxNodes => "value count",
            LimitName::MaxAllocBytes => "memory",
            LimitName::MaxLongTextDigits => "number text length",
            LimitName::MaxLongBytes => "LONG1/LONG4 length",
            LimitName::MaxOpcodes => "opcode count",
            LimitName::MaxKeySteps => "key work",
            LimitName::MaxKeyStepsPerByte => "key work",
            LimitName::MaxKeyCollisions => "colliding keys",
            LimitName::MaxCopyBytesPerByte => "copy work",
        }
    }

    /// What the numbers of a refusal count, in its unit: `(a value nested deeper than the
    /// limit; the root is at depth 1)`.
    pub fn meaning(self) -> &'static str {
        match self {
            LimitName::MaxInputBytes => "bytes of input",
            LimitName::MaxNestingDepth => {
                "a value nested deeper than the limit; the root is at depth 1"
            }
            LimitName::MaxStackLen => "values and MARKs on the stack at once",
            LimitName::MaxMemoEntries => "memo entries set by PUT, BINPUT, LONG_BINPUT, MEMOIZE",
            LimitName::MaxContainerItems => {
                "items of one list, tuple, dict, set or record; a dict pair is one"
            }
            LimitName::MaxNodes => "values created by the decode",
            LimitName::MaxAllocBytes => "bytes charged for the decoded values and the memo",
            LimitName::MaxLongTextDigits => "digits of one INT or LONG text",
            LimitName::MaxLongBytes => "bytes of one LONG1 or LONG4 payload",
            LimitName::MaxOpcodes => "opcodes executed",
            LimitName::MaxKeySteps => {
                "steps CPython takes to hash and compare one dict key or set item"
            }
            LimitName::MaxKeyStepsPerByte => {
                "steps CPython takes to hash and compare keys, per byte of input"
            }
            LimitName::MaxKeyCollisions => {
                "distinct keys of one dict or set with one CPython hash value"
            }
            LimitName::MaxCopyBytesPerByte => {
                "bytes the reader after allocates copying arguments and states, per byte of input"
            }
        }
    }

    /// Why the limit exists: what an attacker could do without it.
    pub fn reason(self) -> &'static str {
        match self {
            LimitName::MaxInputBytes => "bounds the reading itself and every cost linear in it",
            LimitName::MaxNestingDepth => {
                "deep values overflow consumers that recurse (CPython's own recursion limit is 1000)"
            }
            LimitName::MaxStackLen => "DUP and MARK bombs grow the stack without building values",
            LimitName::MaxMemoEntries => "the memo keeps every PUT value alive",
            LimitName::MaxContainerItems => "one huge container is a memory bomb for consumers",
            LimitName::MaxNodes => "every value costs a node slot",
            LimitName::MaxAllocBytes => "bounds the memory of the decoded document",
            LimitName::MaxLongTextDigits => {
                "decimal text to int is quadratic (CPython's max_str_digits, CVE-2020-10735)"
            }
            LimitName::MaxLongBytes => "big ints are quadratic to print as decimal",
            LimitName::MaxOpcodes => "bounds CPU time independently of memory",
            LimitName::MaxKeySteps => {
                "CPython does not cache tuple hashes: one key that is a DAG of tuples freezes the reader after picklewarden"
            }
            LimitName::MaxKeyStepsPerByte => {
                "keys hashed and compared again and again make the reader's work quadratic in the input"
            }
            LimitName::MaxKeyCollisions => {
                "numbers and tuples of them hash deterministically in CPython, so colliding keys make its dicts quadratic"
            }
            LimitName::MaxCopyBytesPerByte => {
                "a value handed again and again through the memo to a constructor that copies it makes memory quadratic in the input"
            }
        }
    }

    /// The built-in default value.
    pub fn default_value(self) -> u64 {
        Limits::default().get(self)
    }
}

impl fmt::Display for LimitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LimitName {
    type Err = String;
    fn from_str(s: &str) -> Result<LimitName, String> {
        LimitName::ALL
            .into_iter()
            .find(|l| l.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = LimitName::ALL.iter().map(|l| l.name()).collect();
                format!("unknown limit {s:?}; known: {}", names.join(", "))
            })
    }
}

/// The resource limits of one decode. Configuration only; the running counts live in the
/// decoder. Every field is a strict maximum (the value itself is allowed, one more is refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Bytes of input. Default [`DEFAULT_MAX_INPUT_BYTES`].
    pub max_input_bytes: u64,
    /// Depth of the decoded values: the number of values on the longest path from a root (a
    /// scalar at top level is depth 1; each container adds one, `[[1]]` is 3). A value
    /// reached again through the memo counts at every place it is reached, as a consumer
    /// that walks the loaded value without regard to sharing meets it (CPython's `hash`,
    /// `repr`, `==`, `json.dumps`, which recurse: a chain of a million tuples each holding
    /// the one before, all kept in one list, is a million deep, and hashing it overflows
    /// CPython 3.11's C stack). An edge back to a container on the path, which closes a
    /// cycle, is a leaf, so `l = [l]` is 2 deep (which edge of a cycle is cut follows a walk
    /// from the roots in order, depth first, items in the order they were added). Checked at
    /// STOP; for a stream, once after the last pickle, over every root in order. The walk that
    /// checks it is linear in the document, however many paths sharing makes (each value's
    /// height is found once). Default [`DEFAULT_MAX_NESTING_DEPTH`].
    pub max_nesting_depth: u64,
    /// Entries on the pickle machine's stack, values and MARKs together.
    /// Default [`DEFAULT_MAX_STACK_LEN`].
    pub max_stack_len: u64,
    /// Distinct memo indices set. Default [`DEFAULT_MAX_MEMO_ENTRIES`].
    pub max_memo_entries: u64,
    /// Items of one container (a dict item is one key-value pair). Counted as the items are
    /// given to the container, before equal keys or set items are merged, so it may refuse a
    /// container whose final size is below the limit (never one above it).
    /// Default [`DEFAULT_MAX_CONTAINER_ITEMS`].
    pub max_container_items: u64,
    /// Values created in one decode. Default [`DEFAULT_MAX_NODES`].
    pub max_nodes: u64,
    /// Bytes charged for the decoded document. Default [`DEFAULT_MAX_ALLOC_BYTES`].
    pub max_alloc_bytes: u64,
    /// Digits of the decimal text of an INT or LONG opcode. Default
    /// [`DEFAULT_MAX_LONG_TEXT_DIGITS`].
    pub max_long_text_digits: u64,
    /// Bytes of a LONG1 or LONG4 payload. Default [`DEFAULT_MAX_LONG_BYTES`].
    pub max_long_bytes: u64,
    /// Opcodes executed. Default [`DEFAULT_MAX_OPCODES`].
    pub max_opcodes: u64,
    /// Steps of CPython's work for one dict key or set item at one insertion (SETITEM,
    /// SETITEMS, ADDITEMS, FROZENSET, `set()`, `frozenset()`): its hash (a tuple's unfolded
    /// size, as CPython does not cache tuple hashes; a big int's 30-bit digits; a frozenset's
    /// length the first time) and its comparisons with the keys CPython compares it to (keys
    /// sharing its CPython hash value, or one equal to it but another object), each its size;
    /// a tuple's hash value is taken both as CPython 3.8+ and as CPython 3.7 and before
    /// compute it (a Mitogen parent on CPython 3.6), and it costs the larger count.
    /// The model is in `src/build/keys/reader.rs`. It bounds the reader after picklewarden
    /// (CPython's `pickle.loads`, a Mitogen parent), not picklewarden, whose own hashing is
    /// linear. Default [`DEFAULT_MAX_KEY_STEPS`].
    pub max_key_steps: u64,
    /// The document's total of those steps per input byte (rounded up), with one step per
    /// item of every `set()` or `frozenset()` call (CPython inserts each again): the total
    /// may reach this many times the input's length, or `max_key_steps`, whichever is more.
    /// Default [`DEFAULT_MAX_KEY_STEPS_PER_BYTE`].
    pub max_key_steps_per_byte: u64,
    /// Distinct keys of one dict or set that share one CPython hash value, counted for keys
    /// whose CPython hash is deterministic (ints outside -2**30..2**30, floats, complex
    /// numbers, tuples and frozensets of numbers, `None`, bools and empty texts).
    /// Default [`DEFAULT_MAX_KEY_COLLISIONS`].
    pub max_key_collisions: u64,
    /// The bytes the reader after allocates when constructors copy what they are given and
    /// BUILD applies a state, at every call and every BUILD (a value handed again through the
    /// memo included), per input byte (rounded up): the total may reach this many times the
    /// input's length, or [`COPY_BYTES_FLOOR`], whichever is more. Charged: `bytearray()` and
    /// `_codecs.encode()` their result's length, `set()` and `frozenset()` 32 bytes an item,
    /// and a record call and BUILD what its rule's [`crate::policy::Cost`] says (a text's or
    /// bytes' length, 8 bytes a sequence item, 32 a dict pair or set item). Everything else a
    /// decode builds is at most a constant per opcode, so with this limit the memory of
    /// picklewarden and of the reader after is linear in the input (docs/limits.md).
    /// Default [`DEFAULT_MAX_COPY_BYTES_PER_BYTE`].
    pub max_copy_bytes_per_byte: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            max_nesting_depth: DEFAULT_MAX_NESTING_DEPTH,
            max_stack_len: DEFAULT_MAX_STACK_LEN,
            max_memo_entries: DEFAULT_MAX_MEMO_ENTRIES,
            max_container_items: DEFAULT_MAX_CONTAINER_ITEMS,
            max_nodes: DEFAULT_MAX_NODES,
            max_alloc_bytes: DEFAULT_MAX_ALLOC_BYTES,
            max_long_text_digits: DEFAULT_MAX_LONG_TEXT_DIGITS,
            max_long_bytes: DEFAULT_MAX_LONG_BYTES,
            max_opcodes: DEFAULT_MAX_OPCODES,
            max_key_steps: DEFAULT_MAX_KEY_STEPS,
            max_key_steps_per_byte: DEFAULT_MAX_KEY_STEPS_PER_BYTE,
            max_key_collisions: DEFAULT_MAX_KEY_COLLISIONS,
            max_copy_bytes_per_byte: DEFAULT_MAX_COPY_BYTES_PER_BYTE,
        }
    }
}

impl Limits {
    /// The value of one limit.
    pub fn get(&self, name: LimitName) -> u64 {
        match name {
            LimitName::MaxInputBytes => self.max_input_bytes,
            LimitName::MaxNestingDepth => self.max_nesting_depth,
            LimitName::MaxStackLen => self.max_stack_len,
            LimitName::MaxMemoEntries => self.max_memo_entries,
            LimitName::MaxContainerItems => self.max_container_items,
            LimitName::MaxNodes => self.max_nodes,
            LimitName::MaxAllocBytes => self.max_alloc_bytes,
            LimitName::MaxLongTextDigits => self.max_long_text_digits,
            LimitName::MaxLongBytes => self.max_long_bytes,
            LimitName::MaxOpcodes => self.max_opcodes,
            LimitName::MaxKeySteps => self.max_key_steps,
            LimitName::MaxKeyStepsPerByte => self.max_key_steps_per_byte,
            LimitName::MaxKeyCollisions => self.max_key_collisions,
            LimitName::MaxCopyBytesPerByte => self.max_copy_bytes_per_byte,
        }
    }

    /// Sets one limit.
    pub fn set(&mut self, name: LimitName, value: u64) {
        let slot = match name {
            LimitName::MaxInputBytes => &mut self.max_input_bytes,
            LimitName::MaxNestingDepth => &mut self.max_nesting_depth,
            LimitName::MaxStackLen => &mut self.max_stack_len,
            LimitName::MaxMemoEntries => &mut self.max_memo_entries,
            LimitName::MaxContainerItems => &mut self.max_container_items,
            LimitName::MaxNodes => &mut self.max_nodes,
            LimitName::MaxAllocBytes => &mut self.max_alloc_bytes,
            LimitName::MaxLongTextDigits => &mut self.max_long_text_digits,
            LimitName::MaxLongBytes => &mut self.max_long_bytes,
            LimitName::MaxOpcodes => &mut self.max_opcodes,
            LimitName::MaxKeySteps => &mut self.max_key_steps,
            LimitName::MaxKeyStepsPerByte => &mut self.max_key_steps_per_byte,
            LimitName::MaxKeyCollisions => &mut self.max_key_collisions,
            LimitName::MaxCopyBytesPerByte => &mut self.max_copy_bytes_per_byte,
        };
        *slot = value;
    }

    /// Parses `NAME=VALUE` (as `--limit` takes it) and sets that limit. VALUE is a decimal
    /// integer, optionally with a binary suffix `K`, `M` or `G` (KiB, MiB, GiB).
    ///
    /// # Errors
    /// A message naming the unknown limit or the bad value.
    pub fn set_from_str(&mut self, assignment: &str) -> Result<(), String> {
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=VALUE, got {assignment:?}"))?;
        let name: LimitName = name.trim().parse()?;
        let value = parse_size(value.trim())
            .ok_or_else(|| format!("bad value {value:?} for limit {name}"))?;
        self.set(name, value);
        Ok(())
    }
}

/// Parses a size as `--limit` takes it: a decimal integer (`_` separators allowed), optionally
/// with a binary suffix `K`, `M` or `G` in either case (KiB, MiB, GiB). `None` when malformed
/// or over `u64`.
pub fn parse_size(text: &str) -> Option<u64> {
    let (digits, scale) = match text.as_bytes().last()? {
        b'K' | b'k' => (text.get(..text.len() - 1)?, 1u64 << 10),
        b'M' | b'm' => (text.get(..text.len() - 1)?, 1u64 << 20),
        b'G' | b'g' => (text.get(..text.len() - 1)?, 1u64 << 30),
        _ => (text, 1),
    };
    digits
        .replace('_', "")
        .parse::<u64>()
        .ok()?
        .checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_from_str_parses_names_and_suffixes() {
        let mut l = Limits::default();
        l.set_from_str("max_nesting_depth=10").unwrap();
        assert_eq!(l.max_nesting_depth, 10);
        l.set_from_str("max_input_bytes=2M").unwrap();
        assert_eq!(l.max_input_bytes, 2 << 20);
        assert!(l.set_from_str("max_bogus=1").is_err());
        assert!(l.set_from_str("max_nodes=x").is_err());
        assert!(l.set_from_str("max_nodes").is_err());
    }

    #[test]
    fn every_limit_round_trips_by_name() {
        for name in LimitName::ALL {
            assert_eq!(name.name().parse::<LimitName>().unwrap(), name);
            let mut l = Limits::default();
            l.set(name, 7);
            assert_eq!(l.get(name), 7);
        }
    }
}
