use super::text::{complex_repr, printable};
use super::*;

/// The standard output of `python3 -c code` (the tests need python3; CI has it).
fn python(code: &str) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (CI has it, the tests need it): {e}"));
    assert!(
        out.status.success(),
        "python3 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn repr_of(pickle: &[u8]) -> String {
    let policy = crate::Policy::data();
    let doc = crate::decode(pickle, &policy).unwrap();
    to_repr(&doc)
}

/// `write_repr` passes on the bytes `to_repr` makes, in pieces of about `SPILL_BYTES`, and
/// the repeat cut counts the text already passed on: [texts, s, s], with s a shared list
/// and 50,000 texts of 40 characters (2.2 MB of repr, past the cut at 16 bytes a value),
/// prints the second s as `[...]`.
#[test]
fn written_as_it_is_made_the_repr_is_the_same() {
    let mut p = b"\x80\x04](](".to_vec();
    for i in 0..50_000u32 {
        p.extend_from_slice(b"\x8c\x28");
        p.extend_from_slice(format!("{i:040}").as_bytes());
    }
    p.extend_from_slice(b"e]M\xe9\x03a\x94h\x00e.");
    let doc = crate::decode(&p, &crate::Policy::data()).unwrap();
    let want = to_repr(&doc);
    assert!(want.len() > 2 << 20, "{}", want.len());
    assert!(
        want.ends_with("'], [1001], [...]]\n"),
        "{}",
        &want[want.len() - 40..]
    );
    let mut sink = crate::json::tests::Pieces::default();
    write_repr(&doc, &mut sink).unwrap();
    assert!(sink.text == want.as_bytes());
    assert!(sink.sizes.len() >= 2, "{:?}", sink.sizes);
    assert!(
        sink.sizes.iter().all(|&n| n <= SPILL_BYTES + 64),
        "{:?}",
        sink.sizes
    );
}

/// A document of shared values (small ints) is not cut as if it were small: the repeat
/// threshold counts every value, not the arena's nodes. CPython prints this in full.
#[test]
fn a_repeated_tuple_of_small_ints_is_printed_in_full() {
    // pickle.dumps((t, t), 2) with t = tuple(range(257))
    let mut pickle = b"\x80\x02(".to_vec();
    for i in 0..=255u8 {
        pickle.extend_from_slice(&[b'K', i]);
    }
    pickle.extend_from_slice(b"M\x00\x01tq\x00h\x00\x86q\x01.");
    let t: Vec<String> = (0..=256).map(|i| i.to_string()).collect();
    let t = format!("({})", t.join(", "));
    assert_eq!(repr_of(&pickle), format!("({t}, {t})\n"));
}

/// CPython's repr escapes unassigned (Cn) and format (Cf) code points, private use (Co)
/// too, in every plane: repr('\u0378'), repr('\u0600') (ARABIC NUMBER SIGN, Cf),
/// repr('\U000e0001') (LANGUAGE TAG, Cf), repr('\U0010ffff') (a noncharacter, Cn).
#[test]
fn unassigned_and_format_code_points_are_escaped_as_cpython_does() {
    // pickle.dumps(s, 4) for each s
    assert_eq!(
        repr_of(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x8c\x02\xcd\xb8\x94."),
        "'\\u0378'\n"
    );
    assert_eq!(
        repr_of(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x8c\x02\xd8\x80\x94."),
        "'\\u0600'\n"
    );
    assert_eq!(
        repr_of(b"\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04\xf3\xa0\x80\x81\x94."),
        "'\\U000e0001'\n"
    );
    assert_eq!(
        repr_of(b"\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04\xf4\x8f\xbf\xbf\x94."),
        "'\\U0010ffff'\n"
    );
}

/// bytes and bytearray reprs against CPython's, quotes and escapes: a bytearray escapes
/// `'` even inside double quotes, bytes only the quote it uses.
#[test]
fn bytes_and_bytearray_quote_as_cpython_does() {
    const CODE: &str = r#"
import pickle
for b in [b"'", b'"', b"'\"", b"a'b", b'\\', b'\x00\x7f\x80\xff', b'\t\n\r', b'']:
    for v in (b, bytearray(b)):
        print(pickle.dumps(v, 5).hex(), repr(v))
"#;
    let text = python(CODE);
    let mut n = 0;
    for line in text.lines() {
        let (hex, want) = line.split_once(' ').unwrap();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(repr_of(&bytes), format!("{want}\n"), "{hex}");
        n += 1;
    }
    assert_eq!(n, 16);
}

/// `printable`'s doc comment names the crate's Unicode version: keep them in step.
#[test]
fn the_general_category_table_is_unicode_16() {
    assert_eq!(unicode_general_category::UNICODE_VERSION, (16, 0, 0));
}

/// `printable` against the machine's CPython `str.isprintable()` for every code point
/// U+0000..=U+10FFFF. Surrogates are no `char`: `str_repr` escapes them (`char::from_u32`
/// is `None`) and CPython calls them unprintable (Cs), which is checked too.
///
/// Skipped are only the code points whose category the two Unicode versions disagree on
/// because one side has not assigned them yet: python3 says Cn and the crate a category
/// (python3 older), or the reverse (python3 newer). Figures with python3 3.11 (Unicode
/// 14.0.0) and the crate's Unicode 16.0.0: 1,114,112 code points, 1,103,811 compared, all
/// agree; 10,301 skipped, exactly the characters Unicode 15.0 (4,489), 15.1 (627) and 16.0
/// (5,185) added, all unassigned (so escaped) for python3; 10,294 of them are printable
/// here, as in CPython 3.14, and 7 are format characters (U+13439..=U+1343F, Egyptian
/// hieroglyph format controls, Cf) that both escape. The approximation this replaced
/// disagreed on 950,749 of the compared code points (819,533 unassigned, 131,068 private
/// use in planes 15 and 16, 148 format characters), all printed raw.
#[test]
fn printable_agrees_with_cpython_for_every_code_point() {
    use unicode_general_category::{get_general_category, GeneralCategory, UNICODE_VERSION};
    // Line 1: unicodedata's version; then `p FIRST LAST` for each run of code points that
    // are not printable, and `n FIRST LAST` for each run of unassigned (Cn) ones, in hex.
    const CODE: &str = r#"
import sys, unicodedata
out = [unicodedata.unidata_version]
for tag, test in (("p", lambda c: not chr(c).isprintable()),
                  ("n", lambda c: unicodedata.category(chr(c)) == "Cn")):
    start = None
    for c in range(0x110001):
        hit = c < 0x110000 and test(c)
        if hit and start is None:
            start = c
        elif not hit and start is not None:
            out.append(f"{tag} {start:x} {c - 1:x}")
            start = None
sys.stdout.write("\n".join(out) + "\n")
"#;
    let text = python(CODE);
    let mut lines = text.lines();
    let py_version: Vec<u64> = lines
        .next()
        .unwrap()
        .split('.')
        .map(|n| n.parse().unwrap())
        .collect();
    let crate_version = vec![UNICODE_VERSION.0, UNICODE_VERSION.1, UNICODE_VERSION.2];

    const N: usize = 0x11_0000;
    let mut py_unprintable = vec![false; N];
    let mut py_unassigned = vec![false; N];
    for line in lines {
        let mut f = line.split(' ');
        let table = match f.next() {
            Some("p") => &mut py_unprintable,
            Some("n") => &mut py_unassigned,
            _ => panic!("bad line from python3: {line:?}"),
        };
        let mut hex = || usize::from_str_radix(f.next().unwrap(), 16).unwrap();
        let (first, last) = (hex(), hex());
        table[first..=last].fill(true);
    }

    let (mut compared, mut new_in_crate, mut new_in_python, mut new_printable) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for cp in 0..N {
        let c = char::from_u32(cp as u32);
        let crate_unassigned =
            c.is_some_and(|c| get_general_category(c) == GeneralCategory::Unassigned);
        match (py_unassigned[cp], crate_unassigned) {
            (true, false) => {
                new_in_crate += 1;
                new_printable += usize::from(c.is_some_and(printable));
                continue;
            }
            (false, true) => {
                new_in_python += 1;
                continue;
            }
            _ => {}
        }
        compared += 1;
        // A surrogate (no char) is escaped by str_repr.
        if c.is_some_and(printable) == py_unprintable[cp] {
            wrong.push(format!("U+{cp:04X}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} code points disagree: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(50)]
    );
    eprintln!(
        "python3 Unicode {py_version:?}, crate {crate_version:?}: {compared} compared, \
         {new_in_crate} assigned only in the crate ({new_printable} printable), \
         {new_in_python} assigned only in python3"
    );
    assert_eq!(compared + new_in_crate + new_in_python, N);
    // Characters Unicode added in each version after 14.0 up to the crate's 16.0.
    let added: [(&[u64], usize); 3] =
        [(&[15, 0, 0], 4489), (&[15, 1, 0], 627), (&[16, 0, 0], 5185)];
    if py_version <= crate_version {
        // Assigned characters stay assigned: python3 knows none the crate does not.
        assert_eq!(new_in_python, 0);
        if py_version >= vec![14, 0, 0] {
            let expected: usize = added
                .iter()
                .filter(|(v, _)| *v > py_version.as_slice())
                .map(|&(_, n)| n)
                .sum();
            assert_eq!(
                new_in_crate, expected,
                "not exactly the characters added since {py_version:?}"
            );
        } else {
            // An older python3: still only a few percent of the code space.
            assert!(
                new_in_crate < N / 50,
                "{new_in_crate} code points assigned only in the crate"
            );
        }
    } else {
        // A python3 newer than the crate: time to move the crate to its Unicode version.
        assert_eq!(new_in_crate, 0);
        assert!(
            new_in_python < N / 50,
            "{new_in_python} code points assigned only in python3"
        );
    }
    // Characters whose Unicode is newer than python3's are printed as CPython 3.14 does:
    // U+1C89 CYRILLIC CAPITAL LETTER TJE (Unicode 16.0) raw.
    assert!(printable('\u{1C89}'));
}

#[test]
fn reprs_look_like_python() {
    // pickle.dumps([1, 'a\n', b"x'", (2,), None, 1.5], 2)
    assert_eq!(
        repr_of(b"\x80\x02]q\x00(K\x01X\x02\x00\x00\x00a\nq\x01c_codecs\nencode\nq\x02X\x02\x00\x00\x00x'q\x03X\x06\x00\x00\x00latin1q\x04\x86q\x05Rq\x06K\x02\x85q\x07NG?\xf8\x00\x00\x00\x00\x00\x00e."),
        "[1, 'a\\n', b\"x'\", (2,), None, 1.5]\n"
    );
    // v = {1: [2, (3,), ()], 'k': {4}, 'f': frozenset(), 'e': {}, 't': (5, 6)}
    // pickle.dumps(v, 4), and repr(v) as CPython prints it.
    assert_eq!(
        repr_of(b"\x80\x04\x953\x00\x00\x00\x00\x00\x00\x00}\x94(K\x01]\x94(K\x02K\x03\x85\x94)e\x8c\x01k\x94\x8f\x94(K\x04\x90\x8c\x01f\x94(\x91\x94\x8c\x01e\x94}\x94\x8c\x01t\x94K\x05K\x06\x86\x94u."),
        "{1: [2, (3,), ()], 'k': {4}, 'f': frozenset(), 'e': {}, 't': (5, 6)}\n"
    );
    let mut s = String::new();
    complex_repr(&mut s, 1.0, -2.0);
    complex_repr(&mut s, 0.0, 2.0);
    assert_eq!(s, "(1-2j)2j");
}
