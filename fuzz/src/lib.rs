//! picklewarden's fuzz harness as a library, so each fuzz target is a few lines. The same
//! files are compiled into the main crate's `tests/fuzz_smoke.rs` (through `#[path]`), which
//! runs the target bodies under plain `cargo test`.
#![forbid(unsafe_code)]

pub mod containers;
pub mod gen;
pub mod harness;
