//! What a file is when it is no container: a plain pickle, or a file no loader reads as one.
//!
//! A file is read as a plain pickle only when its content is one: it starts with a PROTO
//! header (`\x80` and a protocol CPython reads, 0 to 5), or a parse of its opcodes holds to
//! a STOP, or to a global, which `pickle.load` acts on (`find_class` imports its module)
//! whatever follows ([`parse_to_stop`]). The parse is CPython's
//! unpickler without values: each opcode known, each argument whole, the stack and MARKs as
//! `Lib/pickle.py` and `_pickle.c` keep them (a pop below the last MARK, an opcode that pops a
//! MARK where none is open, an odd SETITEMS, a memo index never put are all errors there
//! too), and the lines of GLOBAL and INST Python names (`find_class` imports the module:
//! `import numpy as np` is no module anyone can import). So a file it rejects is one
//! `pickle.load` fails on before it imports anything. It checks no policy: what it accepts is
//! then checked in full, under the policy, as a pickle. Text that happens to start with an
//! opcode letter (a Python file's `import`, read as INST) fails it within a few bytes.
//!
//! Anything else is not pickle-bearing: [`Content`] names what it looks like (text, an ELF
//! library, Python bytecode, ...), for the report of the files a scan skips.

use std::collections::HashSet;

use super::globals::arg_span;
use crate::opcode::Opcode;

/// How many bytes of a file are read first to tell what it is.
pub(crate) const SNIFF_BYTES: usize = 4 * 1024;

/// How many bytes of a file a parse of its opcodes reads before the rest is read to decide.
pub(crate) const PREFIX_BYTES: usize = 64 * 1024;

/// What a parse of the opcodes found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Parse {
    /// A STOP reached with a value on the stack, or a global named (what `pickle.load` acts
    /// on whatever follows).
    Pickle,
    /// Not a pickle: `pickle.load` fails here before the end.
    NotPickle,
    /// The bytes ran out before a STOP (only when they are a prefix of the file).
    NeedMore,
}

/// Whether `bytes` starts with a PROTO header CPython reads (`load_proto`: protocols 0 to 5).
pub(crate) fn has_proto_header(bytes: &[u8]) -> bool {
    matches!(bytes, [0x80, 0..=5, ..])
}

/// Whether `bytes` (the whole file when `complete`, else its start) is a pickle: a PROTO
/// header, or a parse to a STOP. `None` when the prefix does not decide it.
pub(crate) fn is_pickle(bytes: &[u8], complete: bool) -> Option<bool> {
    if has_proto_header(bytes) {
        return Some(true);
    }
    match parse_to_stop(bytes, complete) {
        Parse::Pickle => Some(true),
        Parse::NotPickle => Some(false),
        Parse::NeedMore => None,
    }
}

/// Parses `input` as CPython's unpickler would, without values (module docs), up to its
/// first STOP or global. With `complete` false, running out of bytes is [`Parse::NeedMore`].
pub(crate) fn parse_to_stop(input: &[u8], complete: bool) -> Parse {
    let ran_out = if complete {
        Parse::NotPickle
    } else {
        Parse::NeedMore
    };
    // Items above the innermost MARK, and the counts below each open MARK.
    let mut depth: usize = 0;
    let mut marks: Vec<usize> = Vec::new();
    // The memo indices put, while every one is known (a PUT or GET of text stops the check).
    let mut memo: Option<HashSet<u64>> = Some(HashSet::new());
    let mut pos = 0usize;
    loop {
        let Some(&byte) = input.get(pos) else {
            return ran_out;
        };
        let Some(op) = Opcode::from_byte(byte) else {
            return Parse::NotPickle;
        };
        let Some((arg_start, arg_end)) = arg_span(input, pos + 1, op.arg()) else {
            // A GLOBAL or INST whose name line the input cuts short: `_pickle.c`'s readline
            // hands back the rest without a newline, and `find_class` imports the module.
            if complete && matches!(op, Opcode::Global | Opcode::Inst) {
                let rest = input.get(pos + 1..).unwrap_or_default();
                let mut lines = rest.splitn(2, |&b| b == b'\n');
                let module = lines.next().and_then(|t| std::str::from_utf8(t).ok());
                if lines.next().is_some_and(|n| n.len() >= 2)
                    && module.is_some_and(crate::policy::is_python_name)
                {
                    return Parse::Pickle;
                }
            }
            // An argument cut short: at the end of a prefix, more may follow.
            return ran_out;
        };
        let arg = input.get(arg_start..arg_end).unwrap_or_default();
        pos = arg_end;
        // (items needed above the MARK, items after): the stack effects of Lib/pickletools.py.
        let (need, after) = match op {
            // A protocol CPython does not read is refused by the check, as a pickle's.
            Opcode::Proto | Opcode::Frame => (0, 0),
            Opcode::Stop => {
                return if depth >= 1 {
                    Parse::Pickle
                } else {
                    Parse::NotPickle
                };
            }
            Opcode::Global | Opcode::Inst => {
                let mut lines = arg.split(|&b| b == b'\n');
                let name = |l: Option<&[u8]>| {
                    l.and_then(|t| std::str::from_utf8(t).ok())
                        .is_some_and(crate::policy::is_python_name)
                };
                return if name(lines.next()) && name(lines.next()) {
                    Parse::Pickle
                } else {
                    Parse::NotPickle
                };
            }
            Opcode::StackGlobal => {
                return if depth >= 2 {
                    Parse::Pickle
                } else {
                    Parse::NotPickle
                };
            }
            // A persistent id goes to the loader's `persistent_load`, which `pickle.load`,
            // `numpy.load` and `joblib.load` do not have (they raise), and which torch gives
            // only the object pickle of a legacy file (detected by its magic, and checked);
            // CPython decodes PERSID's line as ASCII first. An extension code is looked up in
            // copyreg's registry, empty unless a program fills it. Neither makes the file a
            // pickle on its own: the parse goes on.
            Opcode::Persid if !arg.is_ascii() => return Parse::NotPickle,
            Opcode::Binpersid => (1, 1),
            Opcode::Mark => {
                marks.push(depth);
                depth = 0;
                continue;
            }
            Opcode::Pop => {
                if depth > 0 {
                    depth -= 1;
                } else if let Some(below) = marks.pop() {
                    // CPython's load_pop pops a MARK when nothing is above it.
                    depth = below;
                } else {
                    return Parse::NotPickle;
                }
                continue;
            }
            Opcode::PopMark
            | Opcode::Appends
            | Opcode::Setitems
            | Opcode::Additems
            | Opcode::List
            | Opcode::Tuple
            | Opcode::Dict
            | Opcode::Frozenset
            | Opcode::Obj => {
                let Some(below) = marks.pop() else {
                    return Parse::NotPickle;
                };
                let items = depth;
                let pairs_odd = items % 2 == 1;
                depth = below;
                let ok = match op {
                    Opcode::PopMark => true,
                    Opcode::Appends | Opcode::Additems => depth >= 1,
                    Opcode::Setitems => depth >= 1 && !pairs_odd,
                    Opcode::Dict => !pairs_odd,
                    Opcode::Obj => items >= 1,
                    _ => true,
                };
                if !ok {
                    return Parse::NotPickle;
                }
                if !matches!(
                    op,
                    Opcode::PopMark | Opcode::Appends | Opcode::Setitems | Opcode::Additems
                ) {
                    depth += 1;
                }
                continue;
            }
            Opcode::Put | Opcode::Binput | Opcode::LongBinput | Opcode::Memoize => {
                if depth == 0 {
                    return Parse::NotPickle;
                }
                if let Some(m) = &mut memo {
                    match op {
                        Opcode::Put => memo = None,
                        Opcode::Memoize => {
                            let i = m.len() as u64;
                            m.insert(i);
                        }
                        _ => {
                            m.insert(le_uint(arg));
                        }
                    }
                }
                continue;
            }
            Opcode::Get => {
                memo = None;
                (0, 1)
            }
            Opcode::Binget | Opcode::LongBinget => {
                if memo.as_ref().is_some_and(|m| !m.contains(&le_uint(arg))) {
                    return Parse::NotPickle;
                }
                (0, 1)
            }
            Opcode::Append | Opcode::Tuple2 | Opcode::Reduce | Opcode::Build => (2, 1),
            Opcode::Newobj => (2, 1),
            Opcode::Setitem | Opcode::Tuple3 | Opcode::NewobjEx => (3, 1),
            Opcode::Tuple1 | Opcode::ReadonlyBuffer => (1, 1),
            Opcode::Dup => (1, 2),
            // Every other opcode pushes one value and needs none.
            _ => (0, 1),
        };
        if depth < need {
            return Parse::NotPickle;
        }
        depth = depth - need + after;
    }
}

/// A little-endian unsigned int of up to 8 bytes.
fn le_uint(b: &[u8]) -> u64 {
    let mut v = [0u8; 8];
    for (d, s) in v.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(v)
}

/// What a file that carries no pickle looks like, by its first bytes: the name a scan reports
/// for a file it skips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Content {
    /// No bytes.
    Empty,
    /// UTF-8 text (source code, JSON, configuration, a tokenizer's vocabulary...).
    Text,
    /// A zip archive that is neither a torch checkpoint nor an npz (a wheel, a jar...).
    Zip,
    /// A tar archive without the torch layout's members.
    Tar,
    /// Compressed data (gzip, bzip2, xz, lzma, LZ4, zlib, zstd) that is not a pickle.
    Compressed,
    /// An executable or shared library (ELF, Mach-O, PE).
    Executable,
    /// Python bytecode (`.pyc`): two bytes of version, then `\r\n`.
    PythonBytecode,
    /// An image (PNG, JPEG, GIF, WebP).
    Image,
    /// A PDF document.
    Pdf,
    /// A SQLite database.
    Sqlite,
    /// HDF5 (Keras `.h5` models).
    Hdf5,
    /// GGUF (llama.cpp models).
    Gguf,
    /// WebAssembly.
    Wasm,
    /// Anything else.
    Binary,
}

impl Content {
    /// The name a report shows (`text`, `executable`, `python-bytecode`...).
    pub fn name(self) -> &'static str {
        match self {
            Content::Empty => "empty",
            Content::Text => "text",
            Content::Zip => "zip",
            Content::Tar => "tar",
            Content::Compressed => "compressed",
            Content::Executable => "executable",
            Content::PythonBytecode => "python-bytecode",
            Content::Image => "image",
            Content::Pdf => "pdf",
            Content::Sqlite => "sqlite",
            Content::Hdf5 => "hdf5",
            Content::Gguf => "gguf",
            Content::Wasm => "wasm",
            Content::Binary => "binary",
        }
    }
}

/// What `head`, the start of a file that holds no pickle, looks like, from its first
/// [`SNIFF_BYTES`] (so that a file read whole and one read by its start are named alike).
pub(crate) fn content_of(head: &[u8]) -> Content {
    let head = head.get(..SNIFF_BYTES).unwrap_or(head);
    let starts = |m: &[u8]| head.starts_with(m);
    if head.is_empty() {
        Content::Empty
    } else if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") {
        Content::Zip
    } else if super::tar::is_tar(head) {
        Content::Tar
    } else if super::container::Compression::sniff(head).is_some() || starts(b"\x28\xb5\x2f\xfd") {
        Content::Compressed
    } else if starts(b"\x7fELF")
        || starts(b"\xcf\xfa\xed\xfe")
        || starts(b"\xce\xfa\xed\xfe")
        || starts(b"\xca\xfe\xba\xbe")
        || starts(b"MZ")
    {
        Content::Executable
    } else if head.get(2..4) == Some(b"\r\n") && !is_text(head) {
        Content::PythonBytecode
    } else if starts(b"\x89PNG\r\n\x1a\n")
        || starts(b"\xff\xd8\xff")
        || starts(b"GIF8")
        || (starts(b"RIFF") && head.get(8..12) == Some(b"WEBP"))
    {
        Content::Image
    } else if starts(b"%PDF-") {
        Content::Pdf
    } else if starts(b"SQLite format 3\0") {
        Content::Sqlite
    } else if starts(b"\x89HDF\r\n\x1a\n") {
        Content::Hdf5
    } else if starts(b"GGUF") {
        Content::Gguf
    } else if starts(b"\0asm") {
        Content::Wasm
    } else if is_text(head) {
        Content::Text
    } else {
        Content::Binary
    }
}

/// Whether `head` reads as UTF-8 text with no control characters but whitespace (a character
/// cut at the end of the prefix allowed).
fn is_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(s) => s,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(head.get(..e.valid_up_to()).unwrap_or_default()).unwrap_or("")
        }
        Err(_) => return false,
    };
    !valid.is_empty()
        && valid
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r' | '\x0c'))
}

#[cfg(test)]
#[path = "sniff_test.rs"]
mod tests;
