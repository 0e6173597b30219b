//! Input: the bytes as pickle instructions, before any rule about values applies.
//!
//! ```text
//! input/
//!   reader.rs   Reader: a cursor over &[u8] with protocol-4 framing; every length checked
//!               against the bytes left before anything is read; absolute offsets
//!   opcode.rs   the opcode table (names as in CPython's pickletools), one source of truth
//!   text.rs     text and number codecs: UTF-8 with surrogatepass, raw-unicode-escape,
//!               STRING escapes, decimal ints and floats, float repr (tests in text_test.rs)
//!   latin1.rs   Latin-1 and the UTF-8 text that stands for it (protocols 0-2's bytes)
//!   compat.rs   CPython's names for Python 2 globals (Lib/_compat_pickle.py)
//!   sniff.rs    input that is not a pickle at all, said so
//! ```

pub(crate) mod compat;
pub(crate) mod latin1;
pub mod opcode;
pub(crate) mod reader;
pub(crate) mod sniff;
// Internal: only `float_repr` is public (re-exported by lib.rs).
#[allow(unreachable_pub)]
pub(crate) mod text;
