//! A generated sequence of opcodes with arguments (valid and invalid), serialised and decoded
//! as the `decode` target decodes raw bytes; see `src/gen.rs` and `src/harness/`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use picklewarden_fuzz::gen::Program;

fuzz_target!(|program: Program| {
    picklewarden_fuzz::harness::check_program(&program);
});
