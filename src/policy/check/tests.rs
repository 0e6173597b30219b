#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashMap;

use super::numpy::{dtype_args, dtype_state, Dtype};
use super::Check;
use crate::value::{NodeId, Value};
use crate::{Decoder, Policy};

/// The dtype each record of `numpy.dtype` in the document is, by the check's functions: what
/// the build found, worked out again from the records (states refer to dtypes made after the
/// record they build, so the records are taken until none is left that can be).
fn dtypes_of(doc: &crate::Document<'_>) -> HashMap<NodeId, Dtype> {
    let arena = &doc.arena;
    let records: Vec<(NodeId, NodeId, Option<NodeId>)> = (0..arena.len())
        .filter_map(|i| {
            let id = NodeId(u32::try_from(i).unwrap());
            match arena.get(id) {
                Some(Value::Object(o)) => match arena.get(o.callable) {
                    Some(Value::Global(g)) if g.module == "numpy" && g.name == "dtype" => {
                        Some((id, o.args, o.state))
                    }
                    _ => None,
                },
                _ => None,
            }
        })
        .collect();
    let mut done: HashMap<NodeId, Dtype> = HashMap::new();
    for _ in 0..records.len() {
        for &(id, args, state) in &records {
            if done.contains_key(&id) {
                continue;
            }
            let Some(Value::Tuple(argv)) = arena.get(args) else {
                panic!("args")
            };
            let base = dtype_args(arena, argv).unwrap();
            let made = match state {
                None => Ok(base),
                Some(s) => dtype_state(arena, s, &base, &mut |d| {
                    done.get(&d).copied().ok_or_else(|| "later".to_owned())
                }),
            };
            if let Ok(d) = made {
                done.insert(id, d);
            }
        }
    }
    done
}

/// Each dtype numpy pickles (tests/corpus/numpy/dtypes.tsv, from real numpy) is, to the
/// check, the size, alignment and flags numpy gives it.
#[test]
fn the_checks_dtypes_are_numpys() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/corpus/numpy/dtypes.tsv"
    ))
    .unwrap();
    let policy = Policy::builtin("numpy").unwrap();
    let mut seen = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f[1] != "accept" {
            continue;
        }
        let bytes: Vec<u8> = (0..f[7].len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&f[7][i..i + 2], 16).unwrap())
            .collect();
        let doc = Decoder::new(&bytes, &policy).decode().unwrap();
        let root = doc.roots()[0];
        let d = dtypes_of(&doc)[&root];
        let want: (u64, u64, u64) = (
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
            f[5].parse().unwrap(),
        );
        assert_eq!(
            (d.itemsize, d.alignment, d.flags),
            want,
            "{} protocol {}",
            f[0],
            f[6]
        );
        seen += 1;
    }
    assert!(seen > 300, "{seen}");
}

#[test]
fn names_and_forms() {
    for (name, c) in Check::NAMES {
        assert_eq!(Check::from_name(name), Some(c));
        assert_eq!(c.name(), name);
    }
    assert_eq!(Check::from_name("numpy"), None);
    let bad = "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"n\"\nconstructor = \"record\"\n";
    let unknown = Policy::from_toml_str(&format!("{bad}check = \"numpy_array\"\n"));
    assert!(unknown.unwrap_err().to_string().contains("unknown check"));
    let forms = Policy::from_toml_str(&format!(
        "{bad}forms = [\"reduce\", \"items\"]\ncheck = \"numpy_dtype\"\n"
    ));
    assert!(forms
        .unwrap_err()
        .to_string()
        .contains("applies to the forms reduce, build only"));
    let set = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"builtins\"\nname = \"set\"\nconstructor = \"set\"\n\
         check = \"numpy_dtype\"\n",
    );
    assert!(set.unwrap_err().to_string().contains("record globals only"));
    // A rule in Rust is held to the same.
    let rule = crate::policy::GlobalRule::new("m", "n", crate::Constructor::Record)
        .check(Check::NumpyScalar);
    let p = Policy::builder().allow_rule(rule.clone()).build().unwrap();
    assert_eq!(p.rules()[0].check, Some(Check::NumpyScalar));
    assert_eq!(p.rules()[0].forms, Check::NumpyScalar.forms());
    let wide = rule.forms(crate::policy::Forms::ALL.intersect(crate::policy::Forms {
        items: false,
        ..crate::policy::Forms::ALL
    }));
    assert!(Policy::builder().allow_rule(wide).build().is_err());
}

/// A `U` array's or scalar's data must be UCS4 code points of its byte order, at most
/// U+10FFFF, as numpy stores them: real numpy 2.4 pickles (protocol 3) of
/// `np.array(['ab', 'c'], '<U2')`, of the same as `>U2`, and of `np.str_('hi')` are accepted;
/// with one unit set to 0x00110000 they are `non_canonical` (numpy raises `SystemError` reading
/// the element).
#[test]
fn unicode_data_holds_code_points() {
    let hex = |h: &str| -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    };
    let little = hex("8003636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e7374727563740a7100636e756d70790a6e6461727261790a71014b008571024301627103877104527105284b014b02857106636e756d70790a64747970650a7107580200000055327108898887710952710a284b0358010000003c710b4e4e4e4b084b044b0874710c6289431061000000620000006300000000000000710d74710e622e");
    let big = hex("8003636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e7374727563740a7100636e756d70790a6e6461727261790a71014b008571024301627103877104527105284b014b02857106636e756d70790a64747970650a7107580200000055327108898887710952710a284b0358010000003e710b4e4e4e4b084b044b0874710c6289431000000061000000620000006300000000710d74710e622e");
    let scalar = hex("8003636e756d70792e5f636f72652e6d756c746961727261790a7363616c61720a7100636e756d70790a64747970650a71015802000000553271028988877103527104284b0358010000003c71054e4e4e4b084b044b08747106624308680000006900000071078671085271092e");
    let policy = Policy::builtin("numpy").unwrap();
    // Where the first code unit ('a' or 'h') is, and how 0x110000 is written in that order.
    for (pickle, unit, bad) in [
        (&little, &b"a\x00\x00\x00"[..], &b"\x00\x00\x11\x00"[..]),
        (&big, b"\x00\x00\x00a", b"\x00\x11\x00\x00"),
        (&scalar, b"h\x00\x00\x00", b"\x00\x00\x11\x00"),
    ] {
        assert!(Decoder::new(pickle, &policy).decode().is_ok());
        let at = pickle.windows(4).position(|w| w == unit).unwrap();
        let mut mutated = pickle.clone();
        mutated[at..at + 4].copy_from_slice(bad);
        let e = Decoder::new(&mutated, &policy).decode().unwrap_err();
        assert_eq!(e.kind().name(), "non_canonical", "{e}");
        assert!(e.to_string().contains("U+10FFFF"), "{e}");
    }
}
