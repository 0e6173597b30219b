//! The Mitogen frame reader over a byte stream arriving in pieces, and every payload decoded
//! under the `mitogen` policy; see `check_mitogen_frames` in `src/harness/mitogen.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    picklewarden_fuzz::harness::check_mitogen_frames(data);
});
