//! Unit tests of the container readers: prefixes of real files, decompression bounds, the npy
//! header, view extents.

use std::io::Write;
use std::path::Path;

use super::container::{scan_bytes, Compression, Format, ModelLimits, ScanOptions, Verdict};
use super::npy_header::read_header;

fn corpus(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/models")
        .join(name);
    std::fs::read(p).unwrap_or_default()
}

/// Every prefix of every good model file (every byte for small files, every 13th for larger)
/// is refused or incomplete, never clean, and never panics.
#[test]
fn prefixes_of_good_files_are_never_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/models/good");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    assert!(files.len() >= 30, "{}", files.len());
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let full = scan_bytes(&bytes, &ScanOptions::default());
        assert_eq!(full.verdict, Verdict::Clean, "{}", f.display());
        let step = if bytes.len() < 1024 { 1 } else { 13 };
        // A tar's zero padding after its two end-of-archive blocks is not part of the archive:
        // prefixes cut inside it are the same archive.
        let tar_end = (full.format == Format::TorchTar).then(|| {
            let last = bytes.iter().rposition(|&b| b != 0).unwrap_or(0);
            (last / 512 + 1) * 512 + 1024
        });
        for len in (0..bytes.len()).step_by(step) {
            if tar_end.is_some_and(|e| len >= e) {
                break;
            }
            let r = scan_bytes(
                bytes.get(..len).unwrap_or_default(),
                &ScanOptions::default(),
            );
            assert_ne!(r.verdict, Verdict::Clean, "{} cut at {len}", f.display());
        }
    }
}

/// A pickle's PROTO header then 16 MiB of zeros: as bzip2 (a few dozen bytes, a ratio deflate
/// cannot reach) refused over `max_ratio`; as zlib refused over a `max_decompressed_bytes` of
/// 1 MiB. (Zeros alone are no pickle: compressed, they are skipped, and joblib's unpickler
/// stops at the first byte.)
#[test]
fn decompression_is_bounded() {
    let mut zeros = vec![0u8; 16 << 20];
    zeros[..2].copy_from_slice(b"\x80\x04");
    let mut b = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    assert!(b.write_all(&zeros).is_ok());
    let bomb = b.finish().unwrap_or_default();
    assert!(bomb.len() < 1024, "{}", bomb.len());
    let r = scan_bytes(&bomb, &ScanOptions::default());
    assert_eq!(r.format, Format::Joblib(Compression::Bz2));
    assert_eq!(r.verdict, Verdict::Refused);
    let reason = r.reason.unwrap_or_else(|| unreachable!());
    assert_eq!(reason.kind, "container_limit");
    assert!(reason.message.contains("max_ratio"), "{}", reason.message);

    let limits = ModelLimits {
        max_ratio: u64::MAX,
        max_decompressed_bytes: 1 << 20,
        ..ModelLimits::default()
    };
    let options = ScanOptions::new().limits(limits);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    assert!(z.write_all(&zeros).is_ok());
    let bomb = z.finish().unwrap_or_default();
    assert_eq!(Compression::sniff(&bomb), Some(Compression::Zlib));
    let r = scan_bytes(&bomb, &options);
    assert_eq!(r.verdict, Verdict::Refused);
    let reason = r.reason.unwrap_or_else(|| unreachable!());
    assert!(
        reason.message.contains("max_decompressed_bytes"),
        "{}",
        reason.message
    );
}

#[test]
fn npy_headers() {
    let h = read_header(&corpus("good/floats.npy")).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(h.shape, vec![3, 4]);
    assert_eq!((h.itemsize, h.objects), (8, false));
    let h = read_header(&corpus("good/structured.npy")).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!((h.itemsize, h.objects), (8, false));
    let h = read_header(&corpus("good/object_plain.npy")).unwrap_or_else(|e| unreachable!("{e}"));
    assert!(h.objects);
    // Each header written as numpy writes it, then changed.
    let make = |header: &str| {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        let padded = format!("{header}{}\n", " ".repeat(63 - (10 + header.len()) % 64));
        v.extend_from_slice(&(padded.len() as u16).to_le_bytes());
        v.extend_from_slice(padded.as_bytes());
        v
    };
    for (bad, why) in [
        (
            "{'descr': '<f8', 'fortran_order': False}",
            "'fortran_order': bool",
        ),
        (
            "{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }",
            "'fortran_order': bool",
        ),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }",
            "literal",
        ),
        (
            "{'descr': '<q9', 'fortran_order': False, 'shape': (), }",
            "not one numpy writes",
        ),
        (&format!("{}{}", "[".repeat(20), "]".repeat(20)), "deeply"),
        (
            "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }",
            "64 bits",
        ),
        (
            "{'descr': '<f8',  'fortran_order': False, 'shape': (2,), }",
            "not the bytes numpy writes",
        ),
    ] {
        let e = read_header(&make(bad)).err().unwrap_or_default();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // Without the growth spaces (numpy 1.14 to 1.23): read.
    let ok = make("{'descr': '<U3', 'fortran_order': True, 'shape': (2, 5), }");
    let h = read_header(&ok).unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!((h.itemsize, h.shape), (12, vec![2, 5]));
}

#[test]
fn view_extents() {
    use super::torch::extent;
    assert_eq!(extent(0, &[2, 3], &[3, 1]), Some(6));
    assert_eq!(extent(5, &[3, 3], &[3, 1]), Some(14));
    assert_eq!(extent(7, &[0, 3], &[3, 1]), Some(7));
    assert_eq!(extent(0, &[], &[]), Some(1));
    assert_eq!(extent(0, &[u64::MAX, 2], &[u64::MAX, 1]), None);
}

/// A torch file checked under a policy that rejects persistent ids is refused for them.
#[test]
fn torch_under_data_policy_refuses_persistent_ids() {
    let options = ScanOptions::new().policy(crate::Policy::builtin("data"));
    let r = scan_bytes(&corpus("good/state_dict.pt"), &options);
    assert_eq!(r.verdict, Verdict::Refused);
    let kind = r.reason.map(|f| f.kind).unwrap_or_default();
    assert_eq!(kind, "global_not_allowed");
}

/// The tensors of a real checkpoint: names from the key paths, dtypes from the storage types,
/// views of one storage with their offsets and byte ranges.
#[test]
fn tensors_of_checkpoints() {
    use super::tensors::list_tensors;
    let views = list_tensors(std::io::Cursor::new(corpus("good/views.pt")))
        .unwrap_or_else(|r| unreachable!("{:?}", r.reason));
    let names: Vec<&str> = views.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["base", "row", "col", "t", "tail", "strided"]);
    let col = views
        .iter()
        .find(|t| t.name == "col")
        .unwrap_or_else(|| unreachable!());
    assert_eq!(
        (col.dtype.as_str(), col.shape.clone(), col.stride.clone()),
        ("float32", vec![4], vec![6])
    );
    assert_eq!(col.storage_offset, 2);
    assert_eq!(col.byte_range, 8..(2 + 3 * 6 + 1) * 4);
    assert!(views.iter().all(|t| t.storage_key == "0"));

    let sd = list_tensors(std::io::Cursor::new(corpus("good/parameter.pt")))
        .unwrap_or_else(|r| unreachable!("{:?}", r.reason));
    assert_eq!(sd.len(), 2);
    assert_eq!(sd[0].name, "w");
    assert_eq!(sd[0].byte_range, 0..16);

    let all = list_tensors(std::io::Cursor::new(corpus("good/dtypes.pt")))
        .unwrap_or_else(|r| unreachable!("{:?}", r.reason));
    let dtypes: Vec<&str> = all.iter().map(|t| t.dtype.as_str()).collect();
    assert!(
        dtypes.contains(&"bfloat16") && dtypes.contains(&"float8_e4m3fn"),
        "{dtypes:?}"
    );

    let hostile = list_tensors(std::io::Cursor::new(corpus("hostile/storage_size_lies.pt")));
    assert!(hostile.is_err());
}

/// safetensors from a checkpoint of views: the header names each view with its shape and
/// range, and a strided view's bytes are its elements gathered in row-major order.
#[test]
fn convert_views_to_safetensors() {
    let mut out = Vec::new();
    let n = super::safetensors::convert(
        std::io::Cursor::new(corpus("good/views.pt")),
        &mut out,
        None,
    )
    .unwrap_or_else(|e| unreachable!("{e}"));
    assert_eq!(n, 6);
    let len = u64::from_le_bytes(
        out.get(..8)
            .and_then(|b| b.try_into().ok())
            .unwrap_or_default(),
    );
    let header =
        std::str::from_utf8(out.get(8..8 + len as usize).unwrap_or_default()).unwrap_or_default();
    assert!(
        header.contains(r#""col":{"dtype":"F32","shape":[4],"data_offsets":[120,136]}"#),
        "{header}"
    );
    // base is arange(24).reshape(4, 6): column 2 is 2, 8, 14, 20.
    let data = out.get(8 + len as usize..).unwrap_or_default();
    let col: Vec<f32> = data
        .get(120..136)
        .unwrap_or_default()
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    assert_eq!(col, [2.0, 8.0, 14.0, 20.0]);
    let refused = super::safetensors::convert(
        std::io::Cursor::new(corpus("hostile/view_out_of_storage.pt")),
        &mut Vec::new(),
        None,
    );
    assert!(refused.is_err());
    // The output is 8 + header + 316 bytes (79 elements of 4): refused below, written at.
    let total = out.len() as u64;
    for (max, ok) in [(total - 1, false), (total, true)] {
        let mut again = Vec::new();
        let r = super::safetensors::convert(
            std::io::Cursor::new(corpus("good/views.pt")),
            &mut again,
            Some(max),
        );
        match r {
            Ok(_) if ok => assert_eq!(again, out),
            Err(super::safetensors::ConvertError::OutputTooLarge { bytes, max: m }) if !ok => {
                assert_eq!((bytes, m), (total, max));
                assert!(again.is_empty(), "nothing is written past the bound");
            }
            other => unreachable!("max {max}: {other:?}"),
        }
    }
}

/// Fuzz finds of the `containers` target (tests/corpus/models/regression, the selector byte
/// taken off): read without a panic, never clean. crash-b60a4547...: an xz stream whose index
/// made lzma-rs 0.3 overflow an add (the reason it was replaced by lzma-rust2).
/// crash-d9f6a089...zip: a ZIP64 record whose size field overflowed the
/// add that locates its end (src/formats/zip_check.rs).
#[test]
fn container_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/models/regression");
    let files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(!files.is_empty());
    for f in files {
        let r = scan_bytes(
            &std::fs::read(&f).unwrap_or_default(),
            &ScanOptions::default(),
        );
        assert_ne!(r.verdict, Verdict::Clean, "{}", f.display());
    }
}

/// A file read through a reader (its first 4 KiB, then 64 KiB, then whole, as `scan` reads
/// files) gets the format and verdict of the same bytes read whole: every model and scan
/// corpus file, and files past the prefixes (text with a control character after 4 KiB, a
/// protocol-0 pickle of 100 KiB, a large pickle of code after 64 KiB of text-like opcodes).
#[test]
fn a_file_read_by_its_start_is_read_as_whole() {
    use super::container::scan_reader;
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    for dir in [
        "tests/corpus/models/good",
        "tests/corpus/models/hostile",
        "tests/corpus/scan/model",
        "tests/corpus/scan/pickles",
        "tests/corpus/scan/py27",
    ] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let p = e.path();
            inputs.push((
                p.display().to_string(),
                std::fs::read(&p).unwrap_or_default(),
            ));
        }
    }
    let mut text = "x".repeat(5000).into_bytes();
    text.push(0x01);
    inputs.push(("text, then a control character".into(), text));
    let mut p0 = b"(lp0\n".to_vec();
    for i in 0..20_000 {
        p0.extend_from_slice(format!("I{i}\na").as_bytes());
    }
    p0.push(b'.');
    inputs.push(("a protocol-0 list of 20,000 ints".into(), p0.clone()));
    p0.pop();
    p0.extend_from_slice(b"0cposix\nsystem\n(S'id'\ntR.");
    inputs.push((
        "a protocol-0 pickle naming posix.system after 100 KiB".into(),
        p0,
    ));
    assert!(inputs.len() > 100, "{}", inputs.len());
    for (name, bytes) in inputs {
        let whole = scan_bytes(&bytes, &ScanOptions::default());
        let read = scan_reader(
            std::io::Cursor::new(&bytes),
            u64::MAX,
            &ScanOptions::default(),
        );
        let read = read.unwrap_or_else(|e| unreachable!("{name}: {e}"));
        assert_eq!(
            (read.format, read.verdict, read.severity),
            (whole.format, whole.verdict, whole.severity),
            "{name}"
        );
    }
}
