//! Numbers and text as CPython reads them: lone surrogates, INT text with a leading zero and
//! INT lines that are bools, PUT/GET text indices, runs of int opcodes, float repr, FLOAT text
//! with long exponents, and Python 2 STRING under each policy setting.

use picklewarden::{json::to_typed_json, Decoder, NodeId, Policy, Value};

use crate::common::{self, python, python_hex};
use crate::{decode, py, refusal, root, value, FMT};

#[test]
fn lone_surrogates_round_trip_as_surrogatepass_hex() {
    let policy = Policy::data();
    for proto in [0, 1, 2, 3, 4, 5] {
        let data = python_hex(&format!(
            "import pickle\nprint(pickle.dumps('a\\ud800b\\udfff', {proto}).hex())"
        ));
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        assert!(
            matches!(r, Value::Str(s) if s.has_surrogates()),
            "p{proto}: {r:?}"
        );
        assert_eq!(
            to_typed_json(&doc),
            format!("{FMT}{{\"type\":\"str\",\"surrogatepass_hex\":\"61eda08062edbfbf\"}}}}"),
            "p{proto}"
        );
    }
    // a proper pair spelled as two surrogates stays two code points (no UTF-16 joining)
    let data = python_hex("import pickle\nprint(pickle.dumps('\\ud83d\\ude00', 3).hex())");
    let doc = decode(&data, &policy);
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"str\",\"surrogatepass_hex\":\"eda0bdedb880\"}}}}")
    );
}

/// Protocol-0 INT text "010" is refused as version_dependent_number: CPython <= 3.13's C
/// unpickler reads INT with base 0 through strtol and gives 8 (octal), its pure-Python
/// unpickler raises ValueError, later CPython releases read decimal (10). Asked here of the
/// machine's CPython; tests/number_text.rs has the rest of the table and the survey.
#[test]
fn int_text_with_leading_zero_is_refused() {
    let out = python(
        "import io, pickle\nd = b'I010\\n.'\nprint(pickle.loads(d))\ntry:\n    pickle._Unpickler(io.BytesIO(d)).load()\n    print('loaded')\nexcept ValueError:\n    print('ValueError')",
        &[],
    );
    eprintln!(
        "CPython {}: C unpickler / pure-Python unpickler: {:?}",
        python("import sys; print(sys.version.split()[0])", &[]).trim(),
        out.trim()
    );
    let policy = Policy::data();
    for data in [&b"I010\n."[..], b"I-007\n."] {
        let e = refusal(data, &policy);
        assert_eq!(e.kind().name(), "version_dependent_number", "{e}");
        assert_eq!((e.offset(), e.opcode()), (0, Some(b'I')));
    }
    // "00" and "01" are protocol 0's False and True, not ints
    assert!(matches!(
        root(&decode(b"I01\n.", &policy)).1,
        Value::Bool(true)
    ));
    assert!(matches!(
        root(&decode(b"I00\n.", &policy)).1,
        Value::Bool(false)
    ));
    // base prefixes are not decimal
    assert_eq!(
        refusal(b"I0x10\n.", &policy).kind().name(),
        "invalid_number"
    );
}

/// PUT and GET text indices as CPython reads them (`PyLong_FromString(s, NULL, 10)`, then
/// `PyLong_AsSsize_t`): a sign is taken (`+1`, `-0`), a negative index and one past
/// 2**63 - 1 are refused (found by a differential helper: 2**63 to 2**64 - 1 were accepted).
/// Each verdict is CPython's own, asked here.
#[test]
fn put_and_get_text_indices_are_read_as_cpython_reads_them() {
    let policy = Policy::data();
    for text in [
        "+1",
        "-0",
        "0",
        "007",
        "9223372036854775807",
        "-1",
        "+-1",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "",
        "+",
        "-",
    ] {
        let pickle = format!("]p{text}\n0g{text}\n.");
        let cpython = python(
            "import pickle, sys\ntry:\n    print(pickle.loads(sys.argv[1].encode()))\nexcept Exception as e:\n    print('refused', type(e).__name__)",
            &[&pickle],
        );
        let ours = Decoder::new(pickle.as_bytes(), &policy).decode();
        if text == "9223372036854775807" {
            // CPython sizes its memo array by the largest index (MemoryError here): refused,
            // as the reader after picklewarden must not be handed it (src/vm/memo.rs).
            let e = ours.err().unwrap_or_else(|| panic!("{text:?} accepted"));
            assert_eq!(e.kind().name(), "memo_index_ahead", "{text:?}");
            continue;
        }
        match ours {
            Ok(doc) => {
                assert_eq!(cpython.trim(), "[]", "{text:?}: CPython {cpython}");
                assert!(matches!(root(&doc).1, Value::List(l) if l.is_empty()));
            }
            Err(e) => {
                assert!(
                    cpython.starts_with("refused"),
                    "{text:?}: CPython {cpython}, ours {e}"
                );
                assert_eq!(e.kind().name(), "invalid_number", "{text:?}: {e}");
            }
        }
    }
}

/// Python 2 STRING: ASCII str under `data` and `strict`, as CPython's `pickle.loads` reads it
/// by default (`encoding="ASCII"`), a non-ASCII byte refused (as a policy refusal, since the
/// policy's encoding refuses it: CPython raises `UnicodeDecodeError`); bytes under `mitogen`
/// and a policy with python2_str = "bytes" (CPython's encoding="bytes"), str under a policy
/// with python2_str = "str" and latin1 (CPython's encoding="latin1").
#[test]
fn python2_string_is_ascii_str_by_default_bytes_or_latin1_str_by_policy() {
    let data = py(r#"
d = b"S'abc\\xe9'\n."
assert pickle.loads(d, encoding="bytes") == b"abc\xe9"
assert pickle.loads(d, encoding="latin1") == "abc\xe9"
try:
    pickle.loads(d)
    raise SystemExit("CPython's default read non-ASCII")
except UnicodeDecodeError:
    pass
assert pickle.loads(b"S'abc'\n.") == "abc"
print(d.hex())
"#);
    assert_eq!(data, b"S'abc\\xe9'\n.");
    // The built-in data and strict policies: CPython's default.
    for policy in [Policy::data(), Policy::strict()] {
        for ascii in [&b"S'abc'\n."[..], b"U\x03abc.", b"T\x03\x00\x00\x00abc."] {
            let doc = decode(ascii, &policy);
            assert_eq!(
                to_typed_json(&doc),
                format!("{FMT}{{\"type\":\"str\",\"value\":\"abc\"}}}}"),
                "{}",
                policy.name
            );
        }
        for bad in [&data[..], b"U\x04abc\xe9.", b"T\x04\x00\x00\x00abc\xe9."] {
            let e = refusal(bad, &policy);
            assert_eq!(e.kind().name(), "invalid_ascii", "{e}");
            assert_eq!(e.category(), picklewarden::Category::PolicyDenied, "{e}");
            let text = e.to_string();
            assert!(
                text.contains("byte above 0x7F")
                    && text.contains(&format!("policy \"{}\"", policy.name)),
                "{text}"
            );
            // The scan gives the same refusal.
            let report = picklewarden::scan(bad, &policy);
            assert_eq!(report.result.unwrap_err().kind().name(), "invalid_ascii");
        }
    }

    // Bytes, as Mitogen reads them (`Unpickler(encoding='bytes')`) and a policy may choose.
    let bytes_file = Policy::from_toml_str("name = \"b\"\npython2_str = \"bytes\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    for bytes_policy in [
        Policy::builtin("mitogen").unwrap(),
        Policy::builtin("mitogen-plus").unwrap(),
        bytes_file,
    ] {
        let doc = decode(&data, &bytes_policy);
        assert!(
            matches!(root(&doc).1, Value::Bytes(b) if b.to_cow().as_ref() == b"abc\xe9"),
            "{:?}",
            root(&doc).1
        );
        assert_eq!(
            to_typed_json(&doc),
            format!("{FMT}{{\"type\":\"bytes\",\"hex\":\"616263e9\"}}}}")
        );
        // BINSTRING and SHORT_BINSTRING follow the same rule
        for d in [&b"U\x04abc\xe9."[..], &b"T\x04\x00\x00\x00abc\xe9."[..]] {
            assert!(
                matches!(root(&decode(d, &bytes_policy)).1, Value::Bytes(b) if b.to_cow().as_ref() == b"abc\xe9")
            );
        }
    }

    let str_policy = Policy::from_toml_str(
        "name = \"py2str\"\npython2_str = \"str\"\npython2_str_encoding = \"latin1\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let doc = decode(&data, &str_policy);
    assert!(
        matches!(root(&doc).1, Value::Str(s) if s.as_str() == Some("abc\u{e9}")),
        "{:?}",
        root(&doc).1
    );
    assert_eq!(
        to_typed_json(&doc),
        format!("{FMT}{{\"type\":\"str\",\"value\":\"abc\u{e9}\"}}}}")
    );
    for d in [&b"U\x04abc\xe9."[..], &b"T\x04\x00\x00\x00abc\xe9."[..]] {
        assert!(
            matches!(root(&decode(d, &str_policy)).1, Value::Str(s) if s.as_str() == Some("abc\u{e9}"))
        );
    }
}

/// Runs of int opcodes (BININT1, BININT2, BININT, LONG1), read by the build's and the scan's
/// run loops: 60,000 ints of every width and sign, as `pickle.dumps` writes them at protocols
/// 2, 4 and 5 (protocols 4 and 5 cut them into 64 KiB FRAMEs, so runs meet frame ends and
/// ints straddle none), decode to the ints CPython's `pickle.loads` gives, in order: ints of
/// 31 bits held in their ids (shared values, equal ones one id), the others distinct nodes.
#[test]
fn runs_of_ints_of_every_width_match_cpython() {
    let out = python(
        r#"
import pickle, random
rnd = random.Random(6_0004)
vals = []
for _ in range(60_000):
    bits = rnd.choice([3, 8, 9, 16, 17, 31, 32, 40, 63, 64, 65, 80])
    v = rnd.randrange(1 << bits) - (1 << (bits - 1)) * rnd.randrange(2)
    vals.append(v)
vals += [-5, 256, 257, -6, 255, 65535, 65536, -2**31, 2**31 - 1, 2**31, -2**63, 2**63 - 1, 2**63]
for p in (2, 4, 5):
    d = pickle.dumps(vals, p)
    assert pickle.loads(d) == vals
    print(d.hex())
print(" ".join(map(str, vals)))
"#,
        &[],
    );
    let lines: Vec<&str> = out.lines().collect();
    let want: Vec<&str> = lines.last().unwrap().split(' ').collect();
    assert!(want.len() > 60_000);
    let policy = Policy::data();
    for hex in &lines[..3] {
        let data = common::hex_decode(hex);
        let doc = decode(&data, &policy);
        let (_, r) = root(&doc);
        let Value::List(items) = r else {
            panic!("not a list: {r:?}")
        };
        assert_eq!(items.len(), want.len());
        for (i, (&id, w)) in items.iter().zip(&want).enumerate() {
            let got = match value(&doc, id) {
                Value::Int(v) => v.to_string(),
                Value::BigInt(b) => b.to_string(),
                other => panic!("item {i}: {other:?}"),
            };
            assert_eq!(&got, w, "item {i}");
            let small = got
                .parse::<i64>()
                .is_ok_and(|v| (-(1 << 30)..1 << 30).contains(&v));
            assert_eq!(id.is_shared(), small, "item {i} ({got})");
        }
        // Equal ints from separate opcodes are separate objects in CPython (unless -5..=256),
        // and separate nodes here unless held in their ids.
        let arena: std::collections::HashSet<NodeId> =
            items.iter().copied().filter(|id| !id.is_shared()).collect();
        assert_eq!(
            arena.len(),
            items.iter().filter(|id| !id.is_shared()).count()
        );
    }
}

/// `float_repr` (typed JSON's `repr` of a float, and the repr output) is CPython's
/// `repr(float)` on 120,000 doubles: random bit patterns, the range 1e13 to 1e16 where exact
/// ties between two shortest candidates are common (the old digits broke them upwards: 742
/// of 250,000 random doubles differed), and short dyadic fractions.
#[test]
fn float_repr_is_cpythons_on_many_doubles() {
    let out = python(
        "import random, struct\n\
         random.seed(6)\n\
         for i in range(120000):\n\
         \x20   k = i % 3\n\
         \x20   if k == 0: x = random.uniform(1e13, 1e16) * random.choice((1, -1))\n\
         \x20   elif k == 1: x = struct.unpack('<d', random.getrandbits(64).to_bytes(8, 'little'))[0]\n\
         \x20   else: x = random.randint(-10**6, 10**6) / random.choice((2, 4, 8, 1024, 3, 10))\n\
         \x20   print(struct.pack('>d', x).hex(), repr(x))\n",
        &[],
    );
    let mut differ = Vec::new();
    let mut n = 0;
    for line in out.lines() {
        let (bits, want) = line.split_once(' ').unwrap_or_default();
        let x = f64::from_bits(u64::from_str_radix(bits, 16).unwrap_or_default());
        n += 1;
        let got = picklewarden::float_repr(x);
        if got != want {
            differ.push(format!("{bits}: {got} != {want}"));
        }
    }
    assert_eq!(n, 120_000);
    assert!(
        differ.is_empty(),
        "{} differ: {:?}",
        differ.len(),
        &differ[..differ.len().min(5)]
    );
}

/// INT lines that are bools: only "00" and "01", as Lib/pickle.py reads them and, since
/// gh-135241 (merged June 2025), `_pickle.c` too. Before that fix the C unpickler made a bool
/// of any two-character line valued 0 or 1 ("+0", "-0", "+1"), so those three are read
/// differently by CPython versions and refused (version_dependent_number); the rest are
/// checked against both of the machine's unpicklers.
#[test]
fn int_lines_are_bools_only_when_00_or_01() {
    // (No leading zeros but "00"/"01": CPython <= 3.13's Lib/pickle.py reads INT text in
    // base 0.)
    let texts = ["00", "01", "-1", "0", "1", "10", "-10"];
    let want = python(
        &format!(
            "import pickle\n\
             for t in {texts:?}:\n\
             \x20   d = b'I' + t.encode() + b'\\n.'\n\
             \x20   c, p = pickle.loads(d), pickle._loads(d)\n\
             \x20   assert type(c) is type(p) and c == p, t\n\
             \x20   print(repr(p))"
        ),
        &[],
    );
    for (t, want) in texts.iter().zip(want.lines()) {
        let data = format!("I{t}\n.");
        let doc = decode(data.as_bytes(), &Policy::data());
        assert_eq!(picklewarden::repr::to_repr(&doc).trim_end(), want, "I{t}");
    }
    assert_eq!(want.lines().count(), texts.len());
    for t in ["+0", "-0", "+1"] {
        let data = format!("I{t}\n.");
        let e = refusal(data.as_bytes(), &Policy::data());
        assert_eq!(e.kind().name(), "version_dependent_number", "I{t}: {e}");
    }
}

/// FLOAT text with exponents of every size, mantissas that offset them (up to 700,000
/// digits: `0.000...1e655360` is 1.0), signs and zeros, against CPython's `pickle.loads` of the
/// same opcode: the same bits, or both refuse. `str::parse::<f64>` alone stops reading
/// exponent digits past 65,536 and gave 0.0 there (src/input/text.rs `long_exponent`).
#[test]
fn float_text_with_long_exponents_is_read_as_cpython_reads_it() {
    let dir = common::scratch("float_exponents");
    let file = dir.join("floats.txt");
    python(
        r#"
import pickle, random, struct, sys
rnd = random.Random(655360)
texts = [b"0." + b"0" * 655359 + b"1e655360", b"1" + b"0" * 655360 + b"e-655360",
         b"0." + b"0" * 655358 + b"1e655360", b"1" + b"0" * 655360 + b"e-655361"]
for _ in range(300):
    zeros = rnd.choice([0, 1, 9, 300, 4000, 65535, 65536, 70000, 100000])
    exp = rnd.choice([9999, 10000, 65535, 65536, 65537, 99999, 100000, 123456, 10**6, 10**19])
    digits = str(rnd.randrange(1, 10**rnd.randrange(1, 30))).encode()
    sign = rnd.choice([b"", b"-", b"+"])
    esign = rnd.choice([b"", b"-", b"+"])
    pad = b"0" * rnd.choice([0, 0, 3, 30])
    if rnd.random() < 0.5:
        # small mantissa after many zeros, pushed back up by the exponent
        text = sign + b"0." + b"0" * zeros + digits + b"e" + esign + pad + str(exp).encode()
    else:
        # many digits before the point, pushed back down
        text = sign + digits + b"0" * zeros + rnd.choice([b"", b".", b".5"]) + b"E" + esign + pad + str(exp).encode()
    texts.append(text)
    # near the edges: shift such that the value is around 1e308 or 1e-320
    edge = rnd.choice([308, 309, -307, -320, -323, -324, -330])
    texts.append(sign + b"0." + b"0" * zeros + digits + b"e" + str(zeros + edge).encode())
with open(sys.argv[1], "wb") as f:
    for t in texts:
        try:
            r = struct.pack(">d", pickle.loads(b"F" + t + b"\n.")).hex().encode()
        except Exception as e:
            r = b"refused"
        f.write(t + b"\t" + r + b"\n")
"#,
        &[file.to_str().unwrap()],
    );
    let text = std::fs::read(&file).unwrap();
    let policy = Policy::data();
    let mut checked = 0;
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let tab = line.iter().rposition(|&b| b == b'\t').unwrap();
        let (t, want) = (&line[..tab], std::str::from_utf8(&line[tab + 1..]).unwrap());
        let mut pickle = b"F".to_vec();
        pickle.extend_from_slice(t);
        pickle.extend_from_slice(b"\n.");
        let got = match Decoder::new(&pickle, &policy).decode() {
            Ok(doc) => match root(&doc).1 {
                Value::Float(x) => common::hex_encode(&x.to_bits().to_be_bytes()),
                other => panic!("not a float: {other:?}"),
            },
            Err(e) => {
                assert_eq!(e.kind().name(), "invalid_number", "{e}");
                "refused".to_owned()
            }
        };
        let shown = String::from_utf8_lossy(&t[..t.len().min(40)]).into_owned();
        assert_eq!(got, want, "FLOAT {shown}... ({} bytes)", t.len());
        checked += 1;
    }
    assert!(checked >= 600, "{checked} texts");
}
