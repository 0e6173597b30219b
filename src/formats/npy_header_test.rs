#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;

/// The header numpy 2.4 writes for `np.save(f, np.zeros((3, 4)))`.
const F8_3X4: &[u8] = b"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }                                                          \x0a";

#[test]
fn numpy_header_read_and_written_again() {
    let h = read_header(F8_3X4).unwrap();
    assert_eq!((h.itemsize, h.objects, h.fortran), (8, false, false));
    assert_eq!(h.shape, vec![3, 4]);
    assert_eq!(h.data_start, 128);
    assert_eq!(
        written("'<f8'", false, &[3, 4], true, 64).as_deref(),
        Some(F8_3X4)
    );
}

/// One more space, another key order, another spelling of the descr: each read the same by
/// `ast.literal_eval` and `descr_to_dtype`, none what numpy writes.
#[test]
fn other_spellings_are_refused() {
    let spaced = [&F8_3X4[..12], b" ", &F8_3X4[12..F8_3X4.len() - 2], b"\n"].concat();
    assert!(read_header(&spaced).is_err());
    let text = String::from_utf8(F8_3X4[10..].to_vec()).unwrap();
    let swapped = text.replace(
        "'descr': '<f8', 'fortran_order': False",
        "'fortran_order': False, 'descr': '<f8'",
    );
    let swapped = [&F8_3X4[..10], swapped.as_bytes()].concat();
    assert!(read_header(&swapped).is_err());
    let spelled = String::from_utf8(F8_3X4[10..].to_vec())
        .unwrap()
        .replace("'<f8'", "'f8' ");
    let spelled = [&F8_3X4[..10], spelled.as_bytes()].concat();
    assert!(read_header(&spelled).is_err());
}

#[test]
fn plain_descrs() {
    for (d, size, objects) in [
        ("<f8", 8, false),
        ("|b1", 1, false),
        ("|O", 8, true),
        ("<U3", 12, false),
        ("|S5", 5, false),
        ("|V8", 8, false),
        ("<M8[ns]", 8, false),
        ("<m8", 8, false),
        ("<M8[10ms]", 8, false),
        (">i4", 4, false),
        ("<c32", 32, false),
    ] {
        assert_eq!(plain_descr(d), Ok((size, objects)), "{d}");
    }
    for d in [
        "f8", "<b1", "|O8", "<i1", "|f8", "<U03", "<M8[1ns]", "<M8[xs]", "<f3", "<S5",
    ] {
        assert!(plain_descr(d).is_err(), "{d}");
    }
}
