//! The one error type of picklewarden: a kind, its category, the absolute byte offset and the
//! opcode it was found at.
//!
//! The shape follows wasmparser and serde_json: the error is one pointer wide
//! (`Error(Box<Inner>)`) so that `Result<T, Error>` stays small on the hot path, and every
//! constructor is `#[cold]`.

use std::fmt;

use crate::limits::LimitName;
use crate::opcode::Opcode;

/// The broad class of a refusal. Exhaustive: every [`ErrorKind`] belongs to exactly one.
///
/// The CLI's exit status and the service's answers are derived from it (docs/errors.md, docs/cli.md, docs/service.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Category {
    /// The bytes are not a well-formed pickle (CPython would also refuse them, or they break a
    /// rule picklewarden enforces more strictly, such as frame boundaries).
    Malformed,
    /// The input ends before the pickle does.
    Truncated,
    /// A resource limit of [`crate::Limits`] would be passed.
    LimitExceeded,
    /// The pickle is well formed but names or does something the policy does not allow.
    PolicyDenied,
    /// Reading the input failed (CLI and service only).
    Io,
}

impl Category {
    /// The category's name in snake case, as used in JSON output (`"policy_denied"`).
    pub fn name(self) -> &'static str {
        match self {
            Category::Malformed => "malformed",
            Category::Truncated => "truncated",
            Category::LimitExceeded => "limit_exceeded",
            Category::PolicyDenied => "policy_denied",
            Category::Io => "io",
        }
    }
}

/// What exactly was refused. Public and `#[non_exhaustive]`, so callers can match on it and new
/// kinds can be added without a breaking change. [`ErrorKind::category`] is exhaustive.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    // ---- Malformed ----
    /// The input is not a pickle at all: empty, or starting like text, JSON, an archive,
    /// compressed data or a NumPy file, or with a byte no pickle starts with, and refused at
    /// its first opcode (the rule is in `src/input/sniff.rs`; it changes which refusal is
    /// reported, never whether the input is refused). Always at offset 0, with no opcode;
    /// [`Error::read_as_pickle`] is the refusal the input met read as opcodes.
    #[error("{}", not_a_pickle_message(looks_like, start))]
    NotAPickle {
        /// What the input looks like: `"the input is empty"`, `"text"`, `"JSON"`, `"a zip
        /// archive (...)"`, `"gzip-compressed data"`, `"bzip2-compressed data"`,
        /// `"xz-compressed data"`, `"zstd-compressed data"`, `"a NumPy .npy file"`, or
        /// `"binary data: no pickle starts with its first byte"`.
        looks_like: &'static str,
        /// Its first 16 bytes, printable ASCII as it is and other bytes as `\xNN`, `...`
        /// after when there are more.
        start: String,
    },
    /// A byte that is not one of the 68 opcodes of `Lib/pickletools.py`.
    #[error("unknown opcode")]
    UnknownOpcode,
    /// PROTO names a protocol above 5 (the highest CPython 3 writes).
    #[error("unsupported pickle protocol {0} (highest is 5)")]
    UnsupportedProtocol(u8),
    /// An opcode needs more values than the stack holds above the topmost MARK.
    #[error("stack underflow")]
    StackUnderflow,
    /// An opcode that works on the items after a MARK found no MARK open.
    #[error("no MARK open")]
    MarkMissing,
    /// GET/BINGET/LONG_BINGET of a memo index that no PUT/BINPUT/LONG_BINPUT/MEMOIZE set.
    #[error("memo index {0} was never set")]
    MemoKeyMissing(u64),
    /// PUT/BINPUT/LONG_BINPUT of an index far past the entries set so far: at least 2**20 and
    /// at least twice their number plus 256. Every pickler numbers its memo 0, 1, 2, ...
    /// (`len(memo)`, in `Lib/pickle.py` and `_pickle.c`), but CPython's unpickler sizes its
    /// memo array by the largest index it is given (`_Unpickler_MemoPut`: twice the index, 8
    /// bytes a slot), so 7 bytes of LONG_BINPUT make the reader after picklewarden allocate and
    /// clear gigabytes. Below the bound, that array stays linear in the entries, or under 16
    /// MiB.
    #[error("memo index {index} is too far ahead of the {entries} entries set (at most 2**20 - 1, or twice the entries plus 255)")]
    MemoIndexAhead {
        /// The index written.
        index: u64,
        /// The entries set so far.
        entries: u64,
    },
    /// Text that must be a number (INT, LONG, FLOAT, PUT, GET) is not one, or a count is negative.
    #[error("invalid number text")]
    InvalidNumber,
    /// INT, LONG, PUT or GET text that is plain decimal, but that CPython's releases read
    /// differently (the reason says how: `I010` is 10 to the newest CPython and
    /// picklewarden, 8 to the C unpickler of CPython <= 3.13 and refused by its Python
    /// unpickler; `I+1` is `True` to the C unpickler of CPython <= 3.13 and 1 to newer; see
    /// `version_dependent_int_text` in `src/text.rs`). Refused under every policy, because
    /// the bytes picklewarden accepts may be handed on to any CPython 3, which must read
    /// them as the same value. Malformed, not a policy refusal: like FRAME boundaries, it
    /// is a rule picklewarden holds every pickle to, on input no CPython pickler writes.
    #[error("number text read differently by CPython versions: {0}")]
    VersionDependentNumber(&'static str),
    /// A global named by its Python 2 name (`__builtin__.set`, `copy_reg._reconstructor`: a key
    /// of CPython's `Lib/_compat_pickle.py` tables) after PROTO 3 or higher. CPython's
    /// `find_class` maps such names only while the last PROTO is below 3 (`Lib/pickle.py`
    /// `Unpickler.find_class`, `if self.proto < 3 and self.fix_imports`); past it, it imports
    /// the Python 2 module and fails (`ModuleNotFoundError: No module named '__builtin__'`),
    /// so no CPython 3 reads these bytes as the value the policy would allow.
    #[error("global {module}.{name} is a Python 2 name, which CPython 3 reads only before protocol 3 (the last PROTO here is {protocol})")]
    Python2NameAtProtocol3 {
        /// Module, as written (escaped and cut as in [`ErrorKind::GlobalNotAllowed`]).
        module: String,
        /// Qualified name, as `module` is kept.
        name: String,
        /// The last PROTO's protocol.
        protocol: u8,
    },
    /// The argument of STRING is not quoted with matching quotes.
    #[error("STRING argument is not quoted")]
    InvalidString,
    /// A bad escape in STRING (`\x` without two hex digits) or UNICODE (a truncated `\u`/`\U`
    /// escape, or a code point above U+10FFFF).
    #[error("invalid escape")]
    InvalidEscape,
    /// Text that must be UTF-8 (with lone surrogates allowed, as CPython's `surrogatepass`)
    /// is not.
    #[error("text is not valid UTF-8")]
    InvalidUtf8,
    /// An opcode found a value of the wrong type (APPEND onto a non-list, STACK_GLOBAL with a
    /// non-str name, REDUCE of a value that cannot be called, arguments that are not a tuple...).
    #[error("type mismatch: {0}")]
    TypeMismatch(&'static str),
    /// SETITEMS with an odd number of items after its MARK.
    #[error("odd number of items for SETITEMS")]
    OddItemCount,
    /// A list, dict, set or bytearray (or a tuple holding one) used as a dict key or set item;
    /// CPython raises `TypeError: unhashable type`.
    #[error("unhashable dict key or set item")]
    UnhashableKey,
    /// An opcode and its argument cross the end of a protocol-4 FRAME.
    #[error("opcode crosses the end of its FRAME")]
    FrameStraddle,
    /// A FRAME opcode before the current frame is used up.
    #[error("FRAME before the end of the current frame")]
    FrameInsideFrame,
    /// Bytes after the STOP that ends the pickle (outside stream mode).
    #[error("trailing data after STOP")]
    TrailingData,
    /// STOP with more than the result on the stack, or with a MARK still open.
    #[error("stack not empty at STOP")]
    StackNotEmpty,
    /// A value that a policy rule's `check` ([`crate::policy::Check`]) compares with what
    /// the real writer produces, and that differs: a `numpy.dtype` state that is not the one
    /// numpy pickles for its type string, an ndarray state whose data does not fit its dtype,
    /// a joblib array wrapper joblib's writer never writes, padding that disagrees with the
    /// position... (the reason says which, and the source rule it follows). Malformed, not a
    /// policy refusal: the global is allowed, the bytes are not a form its writer produces,
    /// and the loader after picklewarden would read them with rules of its own (numpy takes
    /// a dtype's flags from the state; joblib resumes at another byte).
    #[error("not the form its writer produces: {0}")]
    NonCanonical(String),

    // ---- Truncated ----
    /// The input ends inside an opcode, its argument, a text line or a frame, or a declared
    /// length runs past the end of the input.
    #[error("input truncated")]
    Truncated,

    // ---- LimitExceeded ----
    /// The allocator could not give the decoded document the memory it needed (`bytes`), below
    /// the configured limits: the process has less memory (or address space, RLIMIT_AS) than
    /// `max_alloc_bytes` assumes. Refused instead of aborting the process.
    #[error("memory allocation of {bytes} bytes failed")]
    AllocationFailed {
        /// Size of the failed request.
        bytes: u64,
    },
    /// The decode passed the deadline its caller gave it ([`crate::Decoder::deadline`]):
    /// checked every 65,536 opcodes and every 256 pairs an equality walk compares, so a
    /// refusal comes within a few milliseconds of the deadline.
    #[error("the decode passed its deadline")]
    DeadlineExceeded,
    /// A limit of [`crate::Limits`] would be passed.
    /// Its message names what was measured, the value seen, the limit by name, its maximum
    /// and what the numbers count ([`LimitName::measure`], [`LimitName::meaning`]): `nesting
    /// depth 1001 is over max_nesting_depth 1000 (a value nested deeper than the limit; the
    /// root is at depth 1)`.
    #[error("{} {seen} is over {} {max} ({})", limit.measure(), limit.name(), limit.meaning())]
    LimitExceeded {
        /// Which limit.
        limit: LimitName,
        /// The value that would have been reached.
        seen: u64,
        /// The configured maximum.
        max: u64,
    },

    // ---- PolicyDenied ----
    /// GLOBAL, STACK_GLOBAL, INST or an extension code names a global the policy lacks.
    #[error("global {module}.{name} is not allowed by policy")]
    GlobalNotAllowed {
        /// Module name as written in the stream (escaped and truncated for display).
        module: String,
        /// Qualified name as written in the stream (escaped and truncated for display).
        name: String,
    },
    /// An allowed global used in a form (REDUCE, NEWOBJ, NEWOBJ_EX, INST/OBJ, BUILD, APPEND,
    /// SETITEM) that the policy does not allow on it.
    #[error("{form} on {module}.{name} is not allowed by policy")]
    FormNotAllowed {
        /// The form, as the policy names its opcodes: `REDUCE`, `NEWOBJ`, `NEWOBJ_EX`,
        /// `INST/OBJ`, `BUILD`, `APPEND` (APPEND, APPENDS) or `SETITEM` (SETITEM, SETITEMS).
        form: &'static str,
        /// Module of the global (escaped and truncated for display).
        module: String,
        /// Qualified name of the global (escaped and truncated for display).
        name: String,
    },
    /// BUILD on a value that is not a record object.
    #[error("BUILD on a value that is not a record")]
    BuildNotAllowed,
    /// A constructor was given arguments it does not accept (shape or schema).
    #[error("constructor rejected its arguments: {0}")]
    ConstructorRejected(String),
    /// REDUCE, NEWOBJ, NEWOBJ_EX or OBJ whose callable (or class) is not a global but the
    /// object a call made (a record: dill writes `dill._dill._load_type('set')(...)`).
    /// CPython calls whatever that call returned; picklewarden never calls what a call
    /// returned, under any policy. A value CPython cannot call either (a list, a str) is a
    /// [`ErrorKind::TypeMismatch`].
    #[error("a callable that is not a global (the object a call made) is not allowed by policy")]
    CallableNotAllowed,
    /// PERSID or BINPERSID while the policy rejects persistent ids.
    #[error("persistent ids are rejected by policy")]
    PersistentIdRejected,
    /// EXT1, EXT2 or EXT4 with a code the policy does not map, as written (EXT4's is signed;
    /// 0 and negative codes are never mapped: `Lib/pickle.py` refuses them, "EXT specifies
    /// code <= 0").
    #[error("extension code {0} is not mapped by policy")]
    ExtensionCodeRejected(i64),
    /// A Python 2 `str` (STRING, BINSTRING, SHORT_BINSTRING) with a byte above 0x7F, under a
    /// policy that reads such strings as ASCII text (`python2_str = "str"` with
    /// `python2_str_encoding = "ascii"`, as the built-in `data` and `strict` policies do,
    /// following CPython's `pickle.loads` and its default `encoding="ASCII"`, which raises
    /// `UnicodeDecodeError`). A policy refusal, not malformed input: the pickle is well
    /// formed, and a policy reading Python 2 strings as bytes (`mitogen`) or Latin-1 text
    /// accepts it.
    #[error(
        "Python 2 str has a byte above 0x7F, and Python 2 strings are read as ASCII text by policy"
    )]
    InvalidAscii,
    /// NEXT_BUFFER when every out-of-band buffer the caller supplied is used (or none was
    /// supplied). CPython raises `UnpicklingError("not enough out-of-band buffers")`, or
    /// "pickle stream refers to out-of-band data but no *buffers* argument was given" without
    /// buffers. (READONLY_BUFFER acts on the value below it, in-band or not, and needs none.)
    #[error("out-of-band buffer requested but none is left (each NEXT_BUFFER takes the next one supplied)")]
    BuffersNotSupplied,

    // ---- Io ----
    /// Reading the input failed.
    #[error("I/O error: {0}")]
    Io(String),
}

impl ErrorKind {
    /// The category this kind belongs to.
    pub fn category(&self) -> Category {
        use ErrorKind::*;
        match self {
            NotAPickle { .. }
            | UnknownOpcode
            | UnsupportedProtocol(_)
            | StackUnderflow
            | MarkMissing
            | MemoKeyMissing(_)
            | MemoIndexAhead { .. }
            | InvalidNumber
            | VersionDependentNumber(_)
            | Python2NameAtProtocol3 { .. }
            | InvalidString
            | InvalidEscape
            | InvalidUtf8
            | TypeMismatch(_)
            | OddItemCount
            | UnhashableKey
            | FrameStraddle
            | FrameInsideFrame
            | TrailingData
            | StackNotEmpty
            | NonCanonical(_) => Category::Malformed,
            Truncated => Category::Truncated,
            LimitExceeded { .. } | AllocationFailed { .. } | DeadlineExceeded => {
                Category::LimitExceeded
            }
            GlobalNotAllowed { .. }
            | FormNotAllowed { .. }
            | BuildNotAllowed
            | ConstructorRejected(_)
            | CallableNotAllowed
            | PersistentIdRejected
            | ExtensionCodeRejected(_)
            | InvalidAscii
            | BuffersNotSupplied => Category::PolicyDenied,
            Io(_) => Category::Io,
        }
    }

    /// The kind's stable name in snake case, as used in JSON output and in the hostile corpus
    /// manifest (`"global_not_allowed"`).
    pub fn name(&self) -> &'static str {
        use ErrorKind::*;
        match self {
            NotAPickle { .. } => "not_a_pickle",
            UnknownOpcode => "unknown_opcode",
            UnsupportedProtocol(_) => "unsupported_protocol",
            StackUnderflow => "stack_underflow",
            MarkMissing => "mark_missing",
            MemoKeyMissing(_) => "memo_key_missing",
            MemoIndexAhead { .. } => "memo_index_ahead",
            InvalidNumber => "invalid_number",
            VersionDependentNumber(_) => "version_dependent_number",
            Python2NameAtProtocol3 { .. } => "python2_name_at_protocol_3",
            InvalidString => "invalid_string",
            InvalidEscape => "invalid_escape",
            InvalidUtf8 => "invalid_utf8",
            InvalidAscii => "invalid_ascii",
            TypeMismatch(_) => "type_mismatch",
            OddItemCount => "odd_item_count",
            UnhashableKey => "unhashable_key",
            FrameStraddle => "frame_straddle",
            FrameInsideFrame => "frame_inside_frame",
            TrailingData => "trailing_data",
            StackNotEmpty => "stack_not_empty",
            NonCanonical(_) => "non_canonical",
            Truncated => "truncated",
            LimitExceeded { .. } => "limit_exceeded",
            AllocationFailed { .. } => "allocation_failed",
            DeadlineExceeded => "deadline_exceeded",
            GlobalNotAllowed { .. } => "global_not_allowed",
            FormNotAllowed { .. } => "form_not_allowed",
            BuildNotAllowed => "build_not_allowed",
            ConstructorRejected(_) => "constructor_rejected",
            CallableNotAllowed => "callable_not_allowed",
            PersistentIdRejected => "persistent_id_rejected",
            ExtensionCodeRejected(_) => "extension_code_rejected",
            BuffersNotSupplied => "buffers_not_supplied",
            Io(_) => "io",
        }
    }
}

#[derive(Clone, Debug)]
struct Inner {
    kind: ErrorKind,
    offset: u64,
    opcode: Option<u8>,
    policy: Option<String>,
    /// For [`ErrorKind::NotAPickle`]: the refusal it stands in for.
    read_as: Option<Error>,
}

/// A refusal: its [`ErrorKind`], the absolute byte offset of the opcode it was found at (from the
/// start of the input; for a stream, from the start of the whole stream) and that opcode's byte.
///
/// Display: `global os.system is not allowed by policy "data" at offset 2 (0x2, opcode 0x63
/// GLOBAL)`.
/// Text taken from the input is escaped and truncated to 64 characters.
#[derive(Clone, Debug)]
pub struct Error(Box<Inner>);

/// `Result` with picklewarden's [`Error`] by default (`Result<T, E>` for another error type, so
/// that `use picklewarden::*` leaves `Result<(), Box<dyn std::error::Error>>` working).
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` at absolute byte `offset`, at the opcode byte `opcode` if any.
    #[cold]
    pub fn new(kind: ErrorKind, offset: u64, opcode: Option<u8>) -> Error {
        Error(Box::new(Inner {
            kind,
            offset,
            opcode,
            policy: None,
            read_as: None,
        }))
    }

    /// An I/O error (no offset into the pickle applies; offset 0).
    #[cold]
    pub fn io(err: &std::io::Error) -> Error {
        Error::new(ErrorKind::Io(err.to_string()), 0, None)
    }

    /// Names the policy in the error's message (for policy refusals).
    #[cold]
    pub(crate) fn with_policy(mut self, name: &str) -> Error {
        self.0.policy = Some(name.to_owned());
        self
    }

    /// Keeps `refusal` as the one this error stands in for ([`Error::read_as_pickle`]).
    #[cold]
    pub(crate) fn read_as(mut self, refusal: Error) -> Error {
        self.0.read_as = Some(refusal);
        self
    }

    /// For [`ErrorKind::NotAPickle`], the refusal the input met read as a pickle (at its
    /// first opcode: "memo index 101 was never set" for `hello`), which it is reported in
    /// place of; `None` for every other kind.
    pub fn read_as_pickle(&self) -> Option<&Error> {
        self.0.read_as.as_ref()
    }

    /// Moves the offset by `base` bytes (used when a payload sits inside a larger stream).
    #[cold]
    pub fn shifted(mut self, base: u64) -> Error {
        self.0.offset = self.0.offset.saturating_add(base);
        self.0.read_as = self.0.read_as.take().map(|e| e.shifted(base));
        self
    }

    /// The same refusal at `offset` instead (a pickle read inside a larger input, reported at
    /// its own offsets, or one whose offsets were taken out of a larger input).
    #[cold]
    pub(crate) fn moved_to(mut self, offset: u64) -> Error {
        let from = self.0.offset;
        self.0.offset = offset;
        self.0.read_as = self.0.read_as.take().map(|e| {
            let at = e.offset().saturating_sub(from).saturating_add(offset);
            e.moved_to(at)
        });
        self
    }

    /// What was refused.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The kind's category.
    pub fn category(&self) -> Category {
        self.0.kind.category()
    }

    /// Absolute byte offset of the opcode (or input position) where the refusal happened.
    pub fn offset(&self) -> u64 {
        self.0.offset
    }

    /// The byte at [`Error::offset`] where the decoder was reading an opcode, if it was: for
    /// most kinds the opcode that was refused; for [`ErrorKind::UnknownOpcode`] the byte that is
    /// no opcode, and for [`ErrorKind::TrailingData`] the first byte after STOP (neither has an
    /// [`Error::opcode_name`] unless it happens to be an opcode's byte). `None` for refusals
    /// not at an opcode (a frame header, the input size, I/O).
    pub fn opcode(&self) -> Option<u8> {
        self.0.opcode
    }

    /// The opcode's name as `Lib/pickletools.py` spells it, if it is a known opcode.
    pub fn opcode_name(&self) -> Option<&'static str> {
        self.0
            .opcode
            .and_then(Opcode::from_byte)
            .map(|op| op.name())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.0.kind, &self.0.policy) {
            (ErrorKind::GlobalNotAllowed { module, name }, Some(policy)) => write!(
                f,
                "global {module}.{name} is not allowed by policy \"{}\"",
                escape_for_display(policy)
            )?,
            (kind, Some(policy)) if kind.category() == Category::PolicyDenied => {
                // "... by policy" names the policy, as for a global.
                let text = kind.to_string();
                match text.strip_suffix("by policy") {
                    Some(head) => write!(f, "{head}by policy \"{}\"", escape_for_display(policy))?,
                    None => write!(f, "{text} (policy \"{}\")", escape_for_display(policy))?,
                }
                if matches!(kind, ErrorKind::InvalidAscii) {
                    // The setting that reads it, where the refusal is read.
                    write!(
                        f,
                        " (its setting python2_str_encoding, or --python2-str; \"latin1\" reads \
                         every byte, as pickle.loads(data, encoding=\"latin1\") does)"
                    )?;
                }
            }
            (kind, _) => write!(f, "{kind}")?,
        }
        if !matches!(self.0.kind, ErrorKind::Io(_)) {
            // Decimal as `pickletools.dis` and the JSON `offset` fields write it, and hex.
            write!(f, " at offset {} ({:#x}", self.0.offset, self.0.offset)?;
            if let Some(op) = self.0.opcode {
                match Opcode::from_byte(op) {
                    Some(o) => write!(f, ", opcode {op:#04x} {}", o.name())?,
                    None => write!(f, ", byte {op:#04x}")?,
                }
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// The message of [`ErrorKind::NotAPickle`].
fn not_a_pickle_message(looks_like: &str, start: &str) -> String {
    if start.is_empty() {
        format!("not a pickle: {looks_like}")
    } else {
        format!("not a pickle: it looks like {looks_like}, starting \"{start}\"")
    }
}

/// Escapes attacker-supplied text for a message: non-printable and non-ASCII characters are
/// written as Rust escapes, and the result is cut to 64 characters with `...` appended.
pub(crate) fn escape_for_display(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count >= 64 {
            out.push_str("...");
            break;
        }
        if c.is_ascii_graphic() || c == ' ' {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    out
}

/// Escapes attacker-supplied bytes (lossy UTF-8) for a message, as [`escape_for_display`].
pub(crate) fn escape_bytes_for_display(bytes: &[u8]) -> String {
    escape_for_display(&String::from_utf8_lossy(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every policy refusal names the policy, not only a refused global.
    #[test]
    fn policy_refusals_name_the_policy() {
        let form_of = |form| ErrorKind::FormNotAllowed {
            form,
            module: "builtins".into(),
            name: "set".into(),
        };
        let form = Error::new(form_of("NEWOBJ"), 0x15, Some(0x81)).with_policy("example");
        assert_eq!(
            form.to_string(),
            "NEWOBJ on builtins.set is not allowed by policy \"example\" at offset 21 \
             (0x15, opcode 0x81 NEWOBJ)"
        );
        let rejected =
            Error::new(ErrorKind::ConstructorRejected("x".into()), 3, None).with_policy("data");
        assert!(
            rejected
                .to_string()
                .ends_with("(policy \"data\") at offset 3 (0x3)"),
            "{rejected}"
        );
        // Without a policy (or for other categories) the text is the kind's own.
        let plain = Error::new(form_of("BUILD"), 0, None);
        assert_eq!(
            plain.to_string(),
            "BUILD on builtins.set is not allowed by policy at offset 0 (0x0)"
        );
    }
}
