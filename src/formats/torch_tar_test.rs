//! The tar header rules against CPython's `tarfile`, and tars that two readers could read
//! differently.

use std::path::Path;

use crate::formats::container::{scan_bytes, Format, ScanOptions, Verdict};
use crate::formats::tar::{is_tar, nti, py_int_base8};

/// `int(s.strip() or "0", 8)` as CPython 3.11 gives it.
#[test]
fn octal_fields_as_python_reads_them() {
    let cases: [(&[u8], Option<i128>); 14] = [
        (b"0o_17", Some(15)),
        (b" 17 ", Some(15)),
        (b"1__7", None),
        (b"_7", None),
        (b"", Some(0)),
        (b"+7", Some(7)),
        (b"-7", Some(-7)),
        (b"8", None),
        (b"0o", None),
        (b"0_7", Some(7)),
        (b"7_", None),
        (b"\x1c17\x1f", Some(15)),
        (b"0O17", Some(15)),
        (b"00017", Some(15)),
    ];
    for (s, want) in cases {
        assert_eq!(py_int_base8(s), want, "{:?}", String::from_utf8_lossy(s));
    }
    // nts cuts at the first NUL; non-ASCII text is refused; base-256 for 0o200 / 0o377.
    assert_eq!(nti(b"0000644\0junk"), Some(0o644));
    assert_eq!(nti(b"12\xff\0"), None);
    assert_eq!(nti(b"\x80\0\0\0\0\0\0\0\0\0\x01\x00"), Some(256));
    assert_eq!(
        nti(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"),
        Some(-1)
    );
}

/// A ustar header for a regular file (or `typeflag`) of `size` bytes, checksum filled in.
fn header(name: &[u8], size: usize, typeflag: u8) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = typeflag;
    h[257..265].copy_from_slice(b"ustar\x0000");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

fn member(out: &mut Vec<u8>, name: &[u8], data: &[u8], typeflag: u8) {
    out.extend(header(name, data.len(), typeflag));
    out.extend(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

/// The members of the real fixture `good/tar_state_dict.pt`, as (name, data).
fn fixture_members() -> Vec<(Vec<u8>, Vec<u8>)> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/models/good/tar_state_dict.pt");
    let bytes = std::fs::read(p).unwrap_or_default();
    let (list, _) = super::members(&bytes, 100).unwrap_or_default();
    list.into_iter()
        .map(|m| (m.name, m.data.to_vec()))
        .collect()
}

fn tar_of(members: &[(Vec<u8>, Vec<u8>)], typeflag: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, d) in members {
        member(&mut out, n, d, typeflag);
    }
    out.extend([0u8; 1024]);
    out
}

fn scan(bytes: &[u8]) -> (Format, Verdict, String) {
    let r = scan_bytes(bytes, &ScanOptions::default());
    let kind = r.reason.map_or_else(|| "-".to_owned(), |f| f.kind);
    (r.format, r.verdict, kind)
}

#[test]
fn rebuilt_fixture_is_clean_and_quirks_are_refused() {
    let m = fixture_members();
    assert_eq!(m.len(), 4, "{m:?}");
    let good = tar_of(&m, b'0');
    assert!(is_tar(&good));
    assert_eq!(scan(&good), (Format::TorchTar, Verdict::Clean, "-".into()));
    // AREGTYPE (NUL typeflag) is a regular file too.
    assert_eq!(scan(&tar_of(&m, 0)).1, Verdict::Clean);

    // A second `pickle` member: tarfile reads the last, a streaming reader the first.
    let mut dup = m.clone();
    dup.push((b"pickle".to_vec(), b"\x80\x02cposix\nsystem\n.".to_vec()));
    assert_eq!(scan(&tar_of(&dup, b'0')).2, "tar_duplicate_entry");

    // Symbolic links (typeflag 2) are followed by extract: not read.
    assert_eq!(scan(&tar_of(&m, b'2')).2, "tar_layout");

    // The ustar prefix field joins the name: "x/pickle" is not "pickle".
    let mut prefixed = tar_of(&m, b'0');
    prefixed[345] = b'x';
    let sum: u32 = prefixed[..512]
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    prefixed[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let (_, v, _) = scan(&prefixed);
    assert_ne!(v, Verdict::Clean);

    // No end-of-archive blocks; data past the end; bytes after the end.
    let cut = &good[..good.len() - 1024];
    assert_eq!(scan(cut).2, "tar_malformed");
    let mut past = tar_of(&m, b'0');
    past.truncate(past.len() - 1024 - 100);
    assert_eq!(scan(&past).2, "tar_malformed");
    let mut after = good.clone();
    after.extend(b"trailing");
    assert_eq!(scan(&after).1, Verdict::Incomplete);

    // A missing member.
    assert_eq!(scan(&tar_of(&m[..3], b'0')).2, "tar_layout");

    // A bad checksum on the first block: not a tar at all (torch reads it as a pickle).
    let mut bad = good.clone();
    bad[150] ^= 1;
    assert_ne!(scan(&bad).0, Format::TorchTar);
}

/// A tar whose first member's name is also a pickle calling posix.system: pickle.load reads
/// the pickle, torch.load the tar.
#[test]
fn a_tar_that_is_also_a_pickle_is_refused() {
    let mut m = fixture_members();
    m.push((b"cposix\nsystem\n(S'echo'\ntR.".to_vec(), Vec::new()));
    m.rotate_right(1);
    let bytes = tar_of(&m, b'0');
    assert_eq!(
        scan(&bytes),
        (
            Format::TorchTar,
            Verdict::Refused,
            "container_polyglot".into()
        )
    );
}
