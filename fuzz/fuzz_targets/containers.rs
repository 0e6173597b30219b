//! The model-file readers (torch zip and legacy, npy, npz, joblib with its decompressors) over
//! arbitrary bytes: the first byte picks a container magic to put in front of the rest, so the
//! readers behind each magic are reached. No input may panic, and none may be reported clean
//! unless the scan of the same bytes by format is stable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use picklewarden::formats::container::{scan_bytes, ScanOptions};

const MAGICS: [&[u8]; 10] = [
    b"",
    b"PK\x03\x04",
    b"\x93NUMPY\x01\x00",
    b"\x1f\x8b\x08\x00",
    b"BZh9",
    b"\xfd7zXZ\x00",
    b"\x5d\x00\x00",
    b"\x04\x22\x4d\x18",
    b"\x78\x9c",
    b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let magic = MAGICS.get(usize::from(pick) % MAGICS.len()).copied().unwrap_or_default();
    let mut input = magic.to_vec();
    input.extend_from_slice(rest);
    let a = scan_bytes(&input, &ScanOptions::default());
    let b = scan_bytes(&input, &ScanOptions::default());
    assert_eq!(a.verdict, b.verdict);
    assert_eq!(a.format, b.format);
});
