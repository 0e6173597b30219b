//! Raw bytes through every shipped policy (and the fuzz policy), default and tight limits, one
//! pickle and a stream; see `src/harness/` for the invariants checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    picklewarden_fuzz::harness::check_decode(data);
});
