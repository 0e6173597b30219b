//! The `containers` target's input shaping: the first byte picks a container magic to put in
//! front of the rest (so the readers behind each magic are reached), or, for the last choice,
//! a torch tar: the rest is taken as tar blocks whose header checksums are recomputed (so that
//! mutations of header fields reach the tar reader rather than fail its checksum) and two
//! end-of-archive blocks are added.

use picklewarden::formats::container::{scan_bytes, scan_reader, ScanOptions};

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

/// The selector byte value (modulo the number of choices) that makes a torch tar.
pub const TAR_SELECTOR: u8 = MAGICS.len() as u8;

/// The file the target scans, from the fuzzer's bytes.
pub fn container_input(data: &[u8]) -> Vec<u8> {
    let Some((&pick, rest)) = data.split_first() else {
        return Vec::new();
    };
    let choice = usize::from(pick) % (MAGICS.len() + 1);
    match MAGICS.get(choice) {
        Some(magic) => {
            let mut input = magic.to_vec();
            input.extend_from_slice(rest);
            input
        }
        None => tar_input(rest),
    }
}

/// `rest` with every member header's checksum recomputed (members walked by their octal size
/// fields, read leniently), then two zero blocks.
fn tar_input(rest: &[u8]) -> Vec<u8> {
    let mut b = rest.to_vec();
    let mut pos = 0usize;
    while let Some(block) = pos.checked_add(512).and_then(|end| b.get_mut(pos..end)) {
        if block.iter().all(|&x| x == 0) {
            break;
        }
        let size = block
            .get(124..136)
            .unwrap_or_default()
            .iter()
            .take_while(|c| (b'0'..=b'7').contains(c))
            .fold(0usize, |n, &c| {
                n.saturating_mul(8).saturating_add(usize::from(c - b'0'))
            });
        if let Some(field) = block.get_mut(148..156) {
            field.fill(b' ');
        }
        let sum: u32 = block.iter().map(|&x| u32::from(x)).sum();
        if let Some(field) = block.get_mut(148..156) {
            field.copy_from_slice(format!("{:06o}\0 ", sum % 0o1000000).as_bytes());
        }
        pos = pos
            .saturating_add(512)
            .saturating_add(size.div_ceil(512).saturating_mul(512));
    }
    b.extend_from_slice(&[0u8; 1024]);
    b
}

/// The target's body: no input may panic, the verdict and format are stable, and a file read
/// through a reader (by its first bytes, as `scan` reads files) gets the verdict and format of
/// the same bytes read whole.
pub fn check_containers(data: &[u8]) {
    let input = container_input(data);
    let a = scan_bytes(&input, &ScanOptions::default());
    let b = scan_bytes(&input, &ScanOptions::default());
    assert_eq!(a.verdict, b.verdict);
    assert_eq!(a.format, b.format);
    if let Ok(c) = scan_reader(
        std::io::Cursor::new(&input),
        u64::MAX,
        &ScanOptions::default(),
    ) {
        assert_eq!((c.verdict, c.format), (a.verdict, a.format));
    }
}
