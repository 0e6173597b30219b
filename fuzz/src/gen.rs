//! Structured pickle programs: a sequence of opcodes with arguments, valid and invalid, that
//! `arbitrary` generates and [`serialise`] turns into bytes. The `structured` fuzz target and
//! the main crate's `tests/fuzz_smoke.rs` (through `#[path]`) both compile this file, so it
//! uses only `arbitrary` and std.
//!
//! The generator leans towards well-formed arguments (real lengths, quoted strings, decimal
//! text, small memo indices, globals the shipped and fuzz policies name) so that the decoder
//! gets past the reader into deep machine states, and keeps a few ways to be wrong (lying
//! length prefixes, raw text lines, raw bytes, any opcode byte, FRAME lengths that do not
//! match) so that the error paths are reached from those states too.

use arbitrary::Arbitrary;

/// Globals the generator names by index: allowed by `data`, by the fuzz policy's records, and
/// refused ones.
pub const KNOWN_GLOBALS: [(&str, &str); 19] = [
    ("_codecs", "encode"),
    ("builtins", "set"),
    ("__builtin__", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("__builtin__", "bytes"),
    ("builtins", "bytes"),
    ("builtins", "complex"),
    ("fuzz", "Rec"),
    ("fuzz", "Schema"),
    ("fuzz", "Plain"),
    ("fuzz", "AsArg"),
    ("fuzz", "OnePer"),
    ("fuzz", "NoHash"),
    ("os", "system"),
    ("builtins", "eval"),
    ("copyreg", "_reconstructor"),
    ("builtins", "getattr"),
    ("__main__", "Exploit"),
];

/// Text that is meant to be a number, or might not be.
#[derive(Arbitrary, Clone, Debug)]
pub enum NumText {
    /// A decimal integer.
    Int(i64),
    /// Many digits: `count` repetitions of a digit, with an optional sign.
    Digits {
        count: u16,
        digit: u8,
        negative: bool,
    },
    /// Any bytes (a newline inside ends the line early, as it would in a stream).
    Raw(Vec<u8>),
}

/// A memo index.
#[derive(Arbitrary, Clone, Debug)]
pub enum MemoIndex {
    /// 0 to 15: what a real pickler writes.
    Small(u8),
    /// Anything a 4-byte index can hold.
    Any(u32),
}

impl MemoIndex {
    fn value(&self) -> u32 {
        match self {
            MemoIndex::Small(i) => u32::from(i % 16),
            MemoIndex::Any(i) => *i,
        }
    }
}

/// A global's name.
#[derive(Arbitrary, Clone, Debug)]
pub enum GlobalName {
    /// One of [`KNOWN_GLOBALS`].
    Known(u8),
    /// Any module and name.
    Raw(String, String),
}

impl GlobalName {
    fn parts(&self) -> (Vec<u8>, Vec<u8>) {
        match self {
            GlobalName::Known(i) => {
                let idx = usize::from(*i) % KNOWN_GLOBALS.len();
                let (m, n) = KNOWN_GLOBALS.get(idx).copied().unwrap_or(("", ""));
                (m.as_bytes().to_vec(), n.as_bytes().to_vec())
            }
            GlobalName::Raw(m, n) => (m.as_bytes().to_vec(), n.as_bytes().to_vec()),
        }
    }
}

/// The length of a FRAME.
#[derive(Arbitrary, Clone, Debug)]
pub enum FrameLen {
    /// Exactly the bytes of the next `n` encoded operations (fewer if the program ends).
    Ops(u8),
    /// The bytes of the next `n` operations plus `delta` (which may cut one in half).
    OpsPlus(u8, i8),
    /// Any length.
    Raw(u64),
}

/// A length-prefixed opcode, for [`Op::BadLength`].
#[derive(Arbitrary, Clone, Copy, Debug)]
pub enum LenOp {
    /// BINSTRING (int4).
    Binstring,
    /// SHORT_BINSTRING (uint1).
    ShortBinstring,
    /// BINUNICODE (uint4).
    Binunicode,
    /// SHORT_BINUNICODE (uint1).
    ShortBinunicode,
    /// BINUNICODE8 (uint8).
    Binunicode8,
    /// BINBYTES (uint4).
    Binbytes,
    /// SHORT_BINBYTES (uint1).
    ShortBinbytes,
    /// BINBYTES8 (uint8).
    Binbytes8,
    /// BYTEARRAY8 (uint8).
    Bytearray8,
    /// LONG1 (uint1).
    Long1,
    /// LONG4 (int4).
    Long4,
}

/// One operation of a program: mostly one opcode with its argument.
#[derive(Arbitrary, Clone, Debug)]
pub enum Op {
    Proto(u8),
    Frame(FrameLen),
    Mark,
    Stop,
    Pop,
    PopMark,
    Dup,
    Int(NumText),
    Bool(bool),
    Long(NumText),
    Float(f64),
    FloatText(Vec<u8>),
    Binfloat(f64),
    Binint(i32),
    Binint1(u8),
    Binint2(u16),
    Long1(Vec<u8>),
    Long4(Vec<u8>),
    /// LONG4 with `len` bytes of `fill` (big ints past `max_long_bytes`).
    BigLong4 {
        len: u16,
        fill: u8,
    },
    String(Vec<u8>),
    StringRaw(Vec<u8>),
    Binstring(Vec<u8>),
    ShortBinstring(Vec<u8>),
    Unicode(String),
    UnicodeRaw(Vec<u8>),
    Binunicode(String),
    ShortBinunicode(String),
    Binunicode8(String),
    /// SHORT_BINUNICODE with bytes that may not be UTF-8.
    UnicodeBytes(Vec<u8>),
    Binbytes(Vec<u8>),
    ShortBinbytes(Vec<u8>),
    Binbytes8(Vec<u8>),
    Bytearray8(Vec<u8>),
    /// A length-prefixed opcode whose prefix says `declared` but carries `body`.
    BadLength {
        op: LenOp,
        declared: u64,
        body: Vec<u8>,
    },
    NextBuffer,
    ReadonlyBuffer,
    EmptyList,
    EmptyTuple,
    EmptyDict,
    EmptySet,
    List,
    Tuple,
    Tuple1,
    Tuple2,
    Tuple3,
    Dict,
    Frozenset,
    Append,
    Appends,
    Setitem,
    Setitems,
    Additems,
    Get(MemoIndex),
    GetText(NumText),
    Binget(u8),
    LongBinget(MemoIndex),
    Put(MemoIndex),
    PutText(NumText),
    Binput(u8),
    LongBinput(MemoIndex),
    Memoize,
    Global(GlobalName),
    /// Pushes the two names as SHORT_BINUNICODE, then STACK_GLOBAL.
    StackGlobalNamed(GlobalName),
    StackGlobal,
    Inst(GlobalName),
    Obj,
    Reduce,
    Newobj,
    NewobjEx,
    Build,
    Ext1(u8),
    Ext2(u16),
    Ext4(i32),
    Persid(Vec<u8>),
    Binpersid,
    /// Any single byte (an opcode or not).
    Byte(u8),
    /// Any bytes.
    Raw(Vec<u8>),
    /// Repeats the encoding of the previous `span` operations `times` times (bounded by
    /// [`MAX_PROGRAM_BYTES`]): reaches depth, stack, memo and item limits.
    Repeat {
        span: u8,
        times: u16,
    },
}

/// A program: operations, whether to end with STOP, and out-of-band buffers.
#[derive(Arbitrary, Clone, Debug)]
pub struct Program {
    /// Start with PROTO of this protocol (mod 6), if set.
    pub proto: Option<u8>,
    /// The operations.
    pub ops: Vec<Op>,
    /// Append a STOP.
    pub stop: bool,
    /// Out-of-band buffers for NEXT_BUFFER, if supplied at all.
    pub buffers: Option<Vec<Vec<u8>>>,
}

/// A program's bytes never grow past this (the `Repeat` operation stops there): 64 KiB is
/// past every tight limit and the default nesting limit, and keeps the target fast (at 1 MiB
/// it ran at 60 inputs a second).
pub const MAX_PROGRAM_BYTES: usize = 64 << 10;

fn line(out: &mut Vec<u8>, op: u8, text: &[u8]) {
    out.push(op);
    out.extend_from_slice(text);
    out.push(b'\n');
}

fn num_text(t: &NumText) -> Vec<u8> {
    match t {
        NumText::Int(i) => i.to_string().into_bytes(),
        NumText::Digits {
            count,
            digit,
            negative,
        } => {
            let mut v = Vec::new();
            if *negative {
                v.push(b'-');
            }
            v.extend(std::iter::repeat_n(b'0' + digit % 10, usize::from(*count)));
            v
        }
        NumText::Raw(b) => b.clone(),
    }
}

/// Python 2 `repr`-style quoting for STRING: `'...'` with `\\`, `\'` and `\xNN` escapes.
fn quote_string(body: &[u8]) -> Vec<u8> {
    let mut v = vec![b'\''];
    for &b in body {
        match b {
            b'\\' => v.extend_from_slice(b"\\\\"),
            b'\'' => v.extend_from_slice(b"\\'"),
            0x20..=0x7e => v.push(b),
            _ => v.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    v.push(b'\'');
    v
}

/// `raw-unicode-escape` as protocol 0 writes UNICODE: code points below U+0100 as one byte
/// (except `\` and newline), others as `\uXXXX` / `\UXXXXXXXX`.
fn raw_unicode_escape(s: &str) -> Vec<u8> {
    let mut v = Vec::new();
    for c in s.chars() {
        let cp = u32::from(c);
        match cp {
            0x5c | 0x0a => v.extend_from_slice(format!("\\u{cp:04x}").as_bytes()),
            0..=0xff => v.push(cp as u8),
            0x100..=0xffff => v.extend_from_slice(format!("\\u{cp:04x}").as_bytes()),
            _ => v.extend_from_slice(format!("\\U{cp:08x}").as_bytes()),
        }
    }
    v
}

fn len_op(out: &mut Vec<u8>, op: LenOp, declared: u64, body: &[u8]) {
    let (byte, width) = match op {
        LenOp::Binstring => (b'T', 4),
        LenOp::ShortBinstring => (b'U', 1),
        LenOp::Binunicode => (b'X', 4),
        LenOp::ShortBinunicode => (0x8c, 1),
        LenOp::Binunicode8 => (0x8d, 8),
        LenOp::Binbytes => (b'B', 4),
        LenOp::ShortBinbytes => (b'C', 1),
        LenOp::Binbytes8 => (0x8e, 8),
        LenOp::Bytearray8 => (0x96, 8),
        LenOp::Long1 => (0x8a, 1),
        LenOp::Long4 => (0x8b, 4),
    };
    out.push(byte);
    let le = declared.to_le_bytes();
    out.extend_from_slice(le.get(..width).unwrap_or(&le));
    out.extend_from_slice(body);
}

/// `op` with a correct length prefix for `body` (cut to what the prefix can say).
fn counted(out: &mut Vec<u8>, op: LenOp, body: &[u8]) {
    let max: usize = match op {
        LenOp::ShortBinstring | LenOp::ShortBinunicode | LenOp::ShortBinbytes | LenOp::Long1 => 255,
        _ => usize::MAX,
    };
    let body = body.get(..body.len().min(max)).unwrap_or(body);
    len_op(out, op, body.len() as u64, body);
}

/// The bytes of one operation. `Frame` and `Repeat` are handled by [`serialise`].
fn encode(op: &Op, out: &mut Vec<u8>) {
    match op {
        Op::Proto(p) => out.extend_from_slice(&[0x80, *p]),
        Op::Frame(_) | Op::Repeat { .. } => {}
        Op::Mark => out.push(b'('),
        Op::Stop => out.push(b'.'),
        Op::Pop => out.push(b'0'),
        Op::PopMark => out.push(b'1'),
        Op::Dup => out.push(b'2'),
        Op::Int(t) => line(out, b'I', &num_text(t)),
        Op::Bool(b) => line(out, b'I', if *b { b"01" } else { b"00" }),
        Op::Long(t) => {
            let mut t = num_text(t);
            t.push(b'L');
            line(out, b'L', &t);
        }
        Op::Float(x) => line(out, b'F', format!("{x:?}").as_bytes()),
        Op::FloatText(t) => line(out, b'F', t),
        Op::Binfloat(x) => {
            out.push(b'G');
            out.extend_from_slice(&x.to_be_bytes());
        }
        Op::Binint(i) => {
            out.push(b'J');
            out.extend_from_slice(&i.to_le_bytes());
        }
        Op::Binint1(i) => out.extend_from_slice(&[b'K', *i]),
        Op::Binint2(i) => {
            out.push(b'M');
            out.extend_from_slice(&i.to_le_bytes());
        }
        Op::Long1(b) => counted(out, LenOp::Long1, b),
        Op::Long4(b) => counted(out, LenOp::Long4, b),
        Op::BigLong4 { len, fill } => {
            let body = vec![*fill; usize::from(*len)];
            counted(out, LenOp::Long4, &body);
        }
        Op::String(b) => line(out, b'S', &quote_string(b)),
        Op::StringRaw(b) => line(out, b'S', b),
        Op::Binstring(b) => counted(out, LenOp::Binstring, b),
        Op::ShortBinstring(b) => counted(out, LenOp::ShortBinstring, b),
        Op::Unicode(s) => line(out, b'V', &raw_unicode_escape(s)),
        Op::UnicodeRaw(b) => line(out, b'V', b),
        Op::Binunicode(s) => counted(out, LenOp::Binunicode, s.as_bytes()),
        Op::ShortBinunicode(s) => counted(out, LenOp::ShortBinunicode, s.as_bytes()),
        Op::Binunicode8(s) => counted(out, LenOp::Binunicode8, s.as_bytes()),
        Op::UnicodeBytes(b) => counted(out, LenOp::ShortBinunicode, b),
        Op::Binbytes(b) => counted(out, LenOp::Binbytes, b),
        Op::ShortBinbytes(b) => counted(out, LenOp::ShortBinbytes, b),
        Op::Binbytes8(b) => counted(out, LenOp::Binbytes8, b),
        Op::Bytearray8(b) => counted(out, LenOp::Bytearray8, b),
        Op::BadLength { op, declared, body } => len_op(out, *op, *declared, body),
        Op::NextBuffer => out.push(0x97),
        Op::ReadonlyBuffer => out.push(0x98),
        Op::EmptyList => out.push(b']'),
        Op::EmptyTuple => out.push(b')'),
        Op::EmptyDict => out.push(b'}'),
        Op::EmptySet => out.push(0x8f),
        Op::List => out.push(b'l'),
        Op::Tuple => out.push(b't'),
        Op::Tuple1 => out.push(0x85),
        Op::Tuple2 => out.push(0x86),
        Op::Tuple3 => out.push(0x87),
        Op::Dict => out.push(b'd'),
        Op::Frozenset => out.push(0x91),
        Op::Append => out.push(b'a'),
        Op::Appends => out.push(b'e'),
        Op::Setitem => out.push(b's'),
        Op::Setitems => out.push(b'u'),
        Op::Additems => out.push(0x90),
        Op::Get(i) => line(out, b'g', i.value().to_string().as_bytes()),
        Op::GetText(t) => line(out, b'g', &num_text(t)),
        Op::Binget(i) => out.extend_from_slice(&[b'h', *i]),
        Op::LongBinget(i) => {
            out.push(b'j');
            out.extend_from_slice(&i.value().to_le_bytes());
        }
        Op::Put(i) => line(out, b'p', i.value().to_string().as_bytes()),
        Op::PutText(t) => line(out, b'p', &num_text(t)),
        Op::Binput(i) => out.extend_from_slice(&[b'q', *i]),
        Op::LongBinput(i) => {
            out.push(b'r');
            out.extend_from_slice(&i.value().to_le_bytes());
        }
        Op::Memoize => out.push(0x94),
        Op::Global(g) => {
            let (m, n) = g.parts();
            line(out, b'c', &m);
            out.extend_from_slice(&n);
            out.push(b'\n');
        }
        Op::StackGlobalNamed(g) => {
            let (m, n) = g.parts();
            counted(out, LenOp::ShortBinunicode, &m);
            counted(out, LenOp::ShortBinunicode, &n);
            out.push(0x93);
        }
        Op::StackGlobal => out.push(0x93),
        Op::Inst(g) => {
            let (m, n) = g.parts();
            line(out, b'i', &m);
            out.extend_from_slice(&n);
            out.push(b'\n');
        }
        Op::Obj => out.push(b'o'),
        Op::Reduce => out.push(b'R'),
        Op::Newobj => out.push(0x81),
        Op::NewobjEx => out.push(0x92),
        Op::Build => out.push(b'b'),
        Op::Ext1(c) => out.extend_from_slice(&[0x82, *c]),
        Op::Ext2(c) => {
            out.push(0x83);
            out.extend_from_slice(&c.to_le_bytes());
        }
        Op::Ext4(c) => {
            out.push(0x84);
            out.extend_from_slice(&c.to_le_bytes());
        }
        Op::Persid(t) => line(out, b'P', t),
        Op::Binpersid => out.push(b'Q'),
        Op::Byte(b) => out.push(*b),
        Op::Raw(b) => out.extend_from_slice(b),
    }
}

/// The bytes of a program.
pub fn serialise(program: &Program) -> Vec<u8> {
    // Pass 1: one chunk per operation (Repeat expands into copies of earlier chunks, FRAME is
    // a placeholder filled in pass 2).
    let mut chunks: Vec<Vec<u8>> = Vec::with_capacity(program.ops.len() + 2);
    let mut frames: Vec<(usize, &FrameLen)> = Vec::new();
    let mut total = 0usize;
    if let Some(p) = program.proto {
        chunks.push(vec![0x80, p % 6]);
    }
    for op in &program.ops {
        if total >= MAX_PROGRAM_BYTES {
            break;
        }
        match op {
            Op::Frame(len) => {
                frames.push((chunks.len(), len));
                chunks.push(Vec::new());
                total += 9;
            }
            Op::Repeat { span, times } => {
                let span = usize::from(*span).clamp(1, 8).min(chunks.len());
                let start = chunks.len() - span;
                let unit: Vec<u8> = chunks.iter().skip(start).flatten().copied().collect();
                if unit.is_empty() {
                    continue;
                }
                let mut body = Vec::new();
                for _ in 0..*times {
                    if total + body.len() + unit.len() > MAX_PROGRAM_BYTES {
                        break;
                    }
                    body.extend_from_slice(&unit);
                }
                total += body.len();
                chunks.push(body);
            }
            _ => {
                let mut c = Vec::new();
                encode(op, &mut c);
                total += c.len();
                chunks.push(c);
            }
        }
    }
    if program.stop {
        chunks.push(vec![b'.']);
    }
    // Pass 2: FRAME lengths.
    for (at, len) in frames {
        let following = |n: u8| -> u64 {
            chunks
                .iter()
                .skip(at + 1)
                .take(usize::from(n))
                .map(|c| c.len() as u64)
                .sum()
        };
        let n = match len {
            FrameLen::Ops(n) => following(*n),
            FrameLen::OpsPlus(n, d) => following(*n).saturating_add_signed(i64::from(*d)),
            FrameLen::Raw(n) => *n,
        };
        if let Some(c) = chunks.get_mut(at) {
            c.push(0x95);
            c.extend_from_slice(&n.to_le_bytes());
        }
    }
    chunks.concat()
}
