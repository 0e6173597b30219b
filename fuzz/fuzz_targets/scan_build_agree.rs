//! Whenever the validating scan accepts an input, the build pass must not refuse it on memo,
//! stack or policy grounds (only on limits and argument checks the scan cannot see); see
//! `check_scan_build_agree` in `src/harness/scan_build.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    picklewarden_fuzz::harness::check_scan_build_agree(data);
});
