#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::Write;

use super::*;

fn models(path: &str) -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus/models/").to_owned() + path)
        .unwrap()
}

fn kind(r: Result<Vec<u8>, Failure>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(Failure::Malformed(_)) => "malformed",
        Err(Failure::Trailing(_)) => "trailing",
        Err(Failure::Limit(_)) => "limit",
    }
}

/// One stream of each compression joblib writes decompresses; the same with a second stream,
/// or a byte, after it is refused as trailing data (joblib's readers read on into it).
#[test]
fn one_stream_only() {
    let limits = ModelLimits::default();
    for (file, c) in [
        ("good/plain.zlib.joblib", Compression::Zlib),
        ("good/plain.gzip.joblib", Compression::Gzip),
        ("good/plain.bz2.joblib", Compression::Bz2),
        ("good/plain.xz.joblib", Compression::Xz),
        ("good/plain.lzma.joblib", Compression::Lzma),
        ("good/plain.lz4.joblib", Compression::Lz4),
    ] {
        let one = models(file);
        let out = decompress(&one, c, &limits);
        let plain = match out {
            Ok(p) => p,
            Err(_) => panic!("{file}: refused"),
        };
        assert_eq!(plain.first(), Some(&0x80), "{file}: a pickle");
        assert_eq!(plain.last(), Some(&b'.'), "{file}: to its STOP");
        let twice = [one.as_slice(), one.as_slice()].concat();
        assert_eq!(
            kind(decompress(&twice, c, &limits)),
            "trailing",
            "{file} twice"
        );
        let byte = [one.as_slice(), b"\x00"].concat();
        assert_eq!(
            kind(decompress(&byte, c, &limits)),
            "trailing",
            "{file} and a byte"
        );
    }
}

/// A zlib stream written here, cut short: malformed; an LZ4 frame cut before its end mark:
/// malformed.
#[test]
fn cut_streams() {
    let limits = ModelLimits::default();
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b"\x80\x02K\x01.").unwrap();
    let z = e.finish().unwrap();
    assert_eq!(
        decompress(&z, Compression::Zlib, &limits).ok(),
        Some(b"\x80\x02K\x01.".to_vec())
    );
    assert_eq!(
        kind(decompress(&z[..z.len() - 2], Compression::Zlib, &limits)),
        "malformed"
    );
    let lz4 = models("good/plain.lz4.joblib");
    assert_eq!(
        kind(decompress(&lz4[..lz4.len() - 4], Compression::Lz4, &limits)),
        "malformed"
    );
    assert_eq!(lz4_frame_end(&lz4), Some(lz4.len()));
}
