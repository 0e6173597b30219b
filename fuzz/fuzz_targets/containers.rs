//! The model-file readers (torch zip, legacy and tar, npy, npz, joblib with its decompressors)
//! over arbitrary bytes, shaped by `picklewarden_fuzz::containers::container_input`: the first
//! byte picks a container magic to put in front of the rest, or a torch tar whose header
//! checksums are fixed. No input may panic; the verdict and format are stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    picklewarden_fuzz::containers::check_containers(data);
});
