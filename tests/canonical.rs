//! Canonical pickle output (`picklewarden::canonical`): for every file of the good corpus (real
//! pickles written by CPython 3), the canonical pickle decodes under the same policy to the same
//! typed JSON, is its own canonical form, and CPython's `pickle.loads` reads it as the value
//! picklewarden decoded from the input (`tests/python/oracle.py compare`, identity included).
//! Hand-made inputs pin the exact bytes of the form and show that what a consumer's unpickler
//! could be attacked with (a far memo index, values popped unseen) does not pass through.

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

mod common;

use common::{
    good_corpus, good_policies, list_globals, python, python_hex, records_policy_toml, run_oracle,
    scratch,
};
use picklewarden::{canonical, json, Decoder, Document, OutputBound, Policy, Value};

fn decode<'a>(bytes: &'a [u8], policy: &Policy, stream: bool) -> Document<'a> {
    let d = Decoder::new(bytes, policy);
    let r = if stream {
        d.decode_stream()
    } else {
        d.decode()
    };
    r.unwrap_or_else(|e| panic!("decode: {e}"))
}

/// The typed JSON the canonical pickle of `doc` decodes to at protocol 5: `doc`'s, where a
/// global read at protocol 0-2 (every global of a `.p0.`, `.p1.` or `.p2.` file) has its
/// Python 3 name. At protocol 2 every global has the Python 2 name of that
/// ([`canonical::python2_name`]).
fn expected_json(doc: &Document<'_>, file: &str, protocol: canonical::Protocol) -> String {
    let mut text = json::to_typed_json(doc);
    let old = [".p0.", ".p1.", ".p2."].iter().any(|p| file.contains(p));
    if old || protocol == canonical::Protocol::V2 {
        for v in doc.nodes() {
            if let Value::Global(g) = v {
                let mut to = (&*g.module, &*g.name);
                if old {
                    to = canonical::python3_name(to.0, to.1);
                }
                if protocol == canonical::Protocol::V2 {
                    to = canonical::python2_name(to.0, to.1);
                }
                if to != (&*g.module, &*g.name) {
                    let field = |m: &str, n: &str| {
                        let q = |t: &str| serde_json::to_string(t).unwrap();
                        format!("\"module\":{},\"name\":{}}}", q(m), q(n))
                    };
                    text = text.replace(&field(&g.module, &g.name), &field(to.0, to.1));
                }
            }
        }
    }
    text
}

#[test]
fn good_corpus_round_trips_and_cpython_agrees() {
    corpus_round_trip(canonical::Protocol::V5);
}

/// As [`good_corpus_round_trips_and_cpython_agrees`], at protocol 2 (Mitogen's and Python 2's
/// form): the same files, the same oracle.
#[test]
fn good_corpus_round_trips_at_protocol_2() {
    corpus_round_trip(canonical::Protocol::V2);
}

fn corpus_round_trip(protocol: canonical::Protocol) {
    let v2 = protocol == canonical::Protocol::V2;
    let files = good_corpus();
    assert!(files.len() >= 1000, "only {} good files", files.len());
    let (data, records) = good_policies(&files);
    // Re-decoding a records file's canonical pickle names the Python 3 spelling of each global
    // read at protocol 0-2 (`copy_reg._reconstructor` -> `copyreg._reconstructor`): the
    // records policy, with those spellings too.
    let record_paths: Vec<_> = files
        .iter()
        .filter(|f| f.records)
        .map(|f| f.path.clone())
        .collect();
    let mut globals = list_globals(&record_paths);
    let mapped: Vec<(String, String)> = globals
        .iter()
        .flat_map(|(m, n)| {
            let (m3, n3) = canonical::python3_name(m, n);
            let (m2, n2) = canonical::python2_name(m3, n3);
            [
                (m3.to_owned(), n3.to_owned()),
                (m2.to_owned(), n2.to_owned()),
            ]
        })
        .collect();
    globals.extend(mapped);
    let records3 = Policy::from_toml_str(&records_policy_toml("good-records-3", &globals)).unwrap();
    let dir = scratch(if v2 { "canonical2" } else { "canonical" });
    let mut lines: [Vec<String>; 3] = Default::default();
    let mut failures = Vec::new();
    let (mut input_bytes, mut output_bytes) = (0usize, 0usize);
    // Streams whose later pickles change earlier values, documents with records that are more
    // than their call, and (at protocol 2) globals without a Python 2 name have no canonical
    // pickle.
    let mut unwritable = (0, 0, 0);
    let mut records_written = 0;
    for f in &files {
        let bytes = std::fs::read(&f.path).unwrap();
        let policy = if f.records { &records } else { &data };
        // Records files the record model cannot express are refused (tests/good_corpus.rs).
        let d = Decoder::new(&bytes, policy);
        let Ok(doc) = (if f.stream {
            d.decode_stream()
        } else {
            d.decode()
        }) else {
            assert!(f.records, "{}: refused", f.name);
            continue;
        };
        let before = expected_json(&doc, &f.name, protocol);
        let out = match canonical::to_pickle_bounded(&doc, protocol, OutputBound::NONE) {
            Ok(out) => out,
            Err(canonical::Unwritable::Stream) => {
                assert!(
                    f.stream && doc.changed_earlier(),
                    "{}: not a changed stream",
                    f.name
                );
                unwritable.0 += 1;
                continue;
            }
            Err(canonical::Unwritable::Record) => {
                let replayable = doc.records_replayable()
                    && doc.nodes().all(|v| match v {
                        Value::Object(o) => {
                            o.state.is_none()
                                && o.listitems.is_empty()
                                && o.dictitems.is_empty()
                                && o.kind != picklewarden::CallKind::NewObjEx
                        }
                        _ => true,
                    });
                assert!(f.records && !replayable, "{}: a replayable record", f.name);
                unwritable.1 += 1;
                continue;
            }
            Err(canonical::Unwritable::Protocol { protocol: 2, what }) if v2 => {
                assert!(what.contains("global"), "{}: {what}", f.name);
                unwritable.2 += 1;
                continue;
            }
            Err(e) => panic!("{}: {e}", f.name),
        };
        input_bytes += bytes.len();
        output_bytes += out.len();
        records_written += usize::from(doc.nodes().any(|v| matches!(v, Value::Object(_))));
        let again = Decoder::new(&out, if f.records { &records3 } else { policy });
        let redecoded = if f.stream {
            again.decode_stream()
        } else {
            again.decode()
        };
        match redecoded {
            Ok(doc2) => {
                let after = json::to_typed_json(&doc2);
                if after != before {
                    failures.push(format!(
                        "{}: typed JSON differs after the round trip:\n  {}\n  {}",
                        f.name,
                        before.chars().take(300).collect::<String>(),
                        after.chars().take(300).collect::<String>()
                    ));
                }
                if canonical::to_pickle_bounded(&doc2, protocol, OutputBound::NONE).as_ref()
                    != Ok(&out)
                {
                    failures.push(format!(
                        "{}: the canonical form is not a fixed point",
                        f.name
                    ));
                }
            }
            Err(e) => failures.push(format!("{}: its canonical pickle is refused: {e}", f.name)),
        }
        let path = dir.join(&f.name);
        std::fs::write(&path, &out).unwrap();
        // The oracle loads the canonical file with CPython and compares it with the typed
        // JSON picklewarden gave for the input (Python 3 names for Python 2 globals).
        let line = format!(
            "{{\"file\":{},\"json\":{before}}}",
            serde_json::to_string(&path.to_string_lossy()).unwrap()
        );
        lines[usize::from(f.records) + 2 * usize::from(f.stream)].push(line);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "good corpus, protocol {}: {input_bytes} bytes of input, {output_bytes} bytes of \
         canonical pickle ({records_written} with records); {} changed streams, {} documents \
         with records and {} with globals protocol 2 cannot name have none",
        protocol.number(),
        unwritable.0,
        unwritable.1,
        unwritable.2
    );
    assert!(records_written >= 30, "{records_written} {unwritable:?}");
    assert!(unwritable.1 >= 10, "{unwritable:?}");
    assert!(
        lines[0].len() >= 1400 && lines[1].len() >= 10 && lines[2].len() >= 10,
        "{} {} {}",
        lines[0].len(),
        lines[1].len(),
        lines[2].len()
    );
    let modes: [(&str, &[&str]); 3] = [
        ("data", &["--mode", "data"]),
        ("records", &["--mode", "records"]),
        ("stream", &["--mode", "data", "--stream"]),
    ];
    for (i, (label, args)) in modes.iter().enumerate() {
        if lines[i].is_empty() {
            continue;
        }
        let run = run_oracle(&dir, &format!("{label}.jsonl"), &lines[i], args);
        eprintln!(
            "oracle {label}, protocol {}: {} compared, {} mismatched, {} skipped",
            protocol.number(),
            run.compared,
            run.mismatched,
            run.skipped
        );
        assert!(
            run.success && run.mismatched == 0,
            "oracle {label} on canonical pickles:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert_eq!(
            run.compared,
            lines[i].len() as u64,
            "oracle {label} skipped files"
        );
    }
}

/// The exact bytes of the form (module docs of `picklewarden::canonical`).
#[test]
fn form_is_exact() {
    let cases: &[(&str, &[u8])] = &[
        // PROTO 2, EMPTY_LIST, LONG_BINPUT 255 (ahead of the entries set, within the bound a
        // PUT may reach), STOP: the canonical form has no memo entry at all.
        ("80025d72ff0000002e", b"\x80\x05]."),
        // A value popped unseen (a text, then POP) is gone.
        ("80024e8c03616263302e", b"\x80\x05N."),
        // ints: BININT1, BININT2, BININT, LONG1 (2**31: five bytes, sign byte 0), -1.
        (
            "80025d284b014d2c014a70110100 8a050000008000 4affffffff 65 2e",
            b"\x80\x05](K\x01M,\x01Jp\x11\x01\x00\x8a\x05\x00\x00\x00\x80\x00J\xff\xff\xff\xffe.",
        ),
        // A list holding itself: EMPTY_LIST, MEMOIZE, BINGET 0, APPEND.
        ("80025d7100680061 2e", b"\x80\x05]\x94h\x00a."),
        // A text: protocol 0's UNICODE and PUT in, SHORT_BINUNICODE and no memo out.
        ("56616263 0a 70300a 2e", b"\x80\x05\x8c\x03abc."),
    ];
    let policy = Policy::data();
    for (hex, want) in cases {
        let input = common::hex_decode(&hex.replace(' ', ""));
        let doc = decode(&input, &policy, false);
        let out = canonical::to_pickle(&doc).unwrap();
        assert_eq!(
            out,
            *want,
            "{hex}: {}",
            String::from_utf8_lossy(&out).escape_debug()
        );
    }
}

/// Shapes CPython makes: a tuple reached again from inside itself (through a list), shared
/// items, a set of tuples, a self-referencing dict, complex and bytearray, every int width.
/// CPython reads the canonical pickle back to a value that repr()s the same and shares what
/// the original shared.
#[test]
fn cpython_reads_back_cycles_and_sharing() {
    let code = r#"
import pickle, sys
l = []
t = (l, 1)
l.append(t)
s = 'shared text'
b = b'shared bytes'
d = {}
d['self'] = d
v = [t, l, s, s, b, b, d, {(1, 2), (3, s)}, frozenset({s, b}), complex(1.5, -0.0),
     bytearray(b'xyz'), bytearray(), float('nan'), -0.0, 2**63, -2**63 - 1, 2**100, -(2**100),
     255, 256, 65535, 65536, -1, 2**31 - 1, -2**31, 'caf\u00e9 \ud800', (), ()]
v.append(v)
sys.stdout.write(pickle.dumps(v, protocol=int(sys.argv[1])).hex())
"#;
    let check = r#"
import pickle, sys
a = pickle.loads(bytes.fromhex(sys.argv[1]))
b = pickle.loads(bytes.fromhex(sys.argv[2]))
assert repr(a) == repr(b), (repr(a), repr(b))
def shape(v):
    # Which positions of the top list are the same object, and the cycles.
    ids = [id(x) for x in v]
    return [ids.index(i) for i in ids], v[0][0][0] is v[0], v[1][0] is v[0], v[-1] is v, \
        v[6]['self'] is v[6], v[2] is v[3], v[4] is v[5]
assert shape(a) == shape(b), (shape(a), shape(b))
# Every opcode is of the protocol asked for or older (pickletools' own table).
import pickletools
ops = list(pickletools.genops(bytes.fromhex(sys.argv[2])))
assert ops[0][0].name == 'PROTO' and ops[0][1] == int(sys.argv[3]), ops[0]
newer = {op.name for op, _, _ in ops if op.proto > int(sys.argv[3])}
assert not newer, newer
print("ok")
"#;
    let policy = Policy::data();
    for protocol in [canonical::Protocol::V5, canonical::Protocol::V2] {
        for proto in ["0", "2", "4", "5"] {
            let input = common::hex_decode(python(code, &[proto]).trim());
            let doc = decode(&input, &policy, false);
            let out = canonical::to_pickle_bounded(&doc, protocol, OutputBound::NONE).unwrap();
            let verdict = python(
                check,
                &[
                    &common::hex_encode(&input),
                    &common::hex_encode(&out),
                    &protocol.number().to_string(),
                ],
            );
            assert_eq!(
                verdict.trim(),
                "ok",
                "input protocol {proto}, output {protocol:?}"
            );
        }
    }
}

/// The exact bytes of protocol 2's forms (`canonical::Protocol::V2`): what CPython 3.11's
/// `pickle.dumps(v, 2)` writes, less the memo entries of values reached once.
#[test]
fn protocol_2_form_is_exact() {
    let cases: &[(&str, &[u8])] = &[
        // b'': __builtin__.bytes(); b'a\xff': _codecs.encode('a\xff', 'latin1'), the global
        // and 'latin1' memoized once for both.
        (
            "out = pickle.dumps([b'', b'a\\xff', b'\\x80'], 4)",
            b"\x80\x02](c__builtin__\nbytes\nq\x00)Rc_codecs\nencode\nq\x01X\x03\x00\x00\x00a\xc3\xbfX\x06\x00\x00\x00latin1q\x02\x86Rh\x01X\x02\x00\x00\x00\xc2\x80h\x02\x86Re.",
        ),
        // A set and a frozenset by a call on a list; a str as BINUNICODE; a shared list by
        // BINPUT / BINGET.
        (
            "l = []; out = pickle.dumps([{1}, frozenset(), 'ab', l, l], 4)",
            b"\x80\x02](c__builtin__\nset\nq\x00]K\x01a\x85Rc__builtin__\nfrozenset\nq\x01]\x85RX\x02\x00\x00\x00ab]q\x02h\x02e.",
        ),
        // bytearray(b'z'): bytearray(_codecs.encode('z', 'latin1')); complex; a global value
        // under its Python 2 name.
        (
            "out = pickle.dumps([bytearray(b'z'), 1j, set], 4)",
            b"\x80\x02](c__builtin__\nbytearray\nq\x00c_codecs\nencode\nq\x01X\x01\x00\x00\x00zX\x06\x00\x00\x00latin1q\x02\x86R\x85Rc__builtin__\ncomplex\nq\x03G\x00\x00\x00\x00\x00\x00\x00\x00G?\xf0\x00\x00\x00\x00\x00\x00\x86Rc__builtin__\nset\ne.",
        ),
    ];
    let policy = Policy::data();
    for (code, want) in cases {
        let input = python_hex(&format!(
            "import pickle, sys\n{code}\nsys.stdout.write(out.hex())"
        ));
        let input = input.as_slice();
        let doc = decode(input, &policy, false);
        let out =
            canonical::to_pickle_bounded(&doc, canonical::Protocol::V2, OutputBound::NONE).unwrap();
        assert_eq!(
            out,
            *want,
            "{code}: {}",
            String::from_utf8_lossy(&out).escape_debug()
        );
        let again = decode(&out, &policy, false);
        // The same value, but for the Python 2 name of the global.
        assert_eq!(
            json::to_typed_json(&again),
            expected_json(&doc, "", canonical::Protocol::V2),
            "{code}"
        );
    }
}

/// What protocol 2 cannot write is refused, never written as something else: a global whose
/// Python 2 name reads back as another (`builtins.FileNotFoundError` is written
/// `exceptions.OSError` by CPython's pickler) and a nested (dotted) name (found by a review
/// helper).
#[test]
fn protocol_2_refuses_what_it_cannot_name() {
    let toml = r#"
name = "t"
[[global]]
module = "builtins"
name = "FileNotFoundError"
constructor = "record"
forms = []
[[global]]
module = "a"
name = "Outer.Inner"
constructor = "record"
forms = []
"#;
    let policy = Policy::from_toml_str(toml).unwrap();
    // A dotted name: below protocol 4 `find_class` does one getattr and does not find it.
    // (A name holding a newline is refused when a policy is read: no policy can allow it.)
    for (module, name) in [("builtins", "FileNotFoundError"), ("a", "Outer.Inner")] {
        let mut input = vec![0x80, 4];
        for t in [module, name] {
            input.extend([0x8c, t.len() as u8]);
            input.extend(t.as_bytes());
        }
        input.extend(b"\x93.");
        let doc = decode(&input, &policy, false);
        assert!(canonical::to_pickle(&doc).is_ok(), "{name}");
        assert_eq!(
            canonical::to_pickle_bounded(&doc, canonical::Protocol::V2, OutputBound::NONE),
            Err(canonical::Unwritable::Protocol {
                protocol: 2,
                what: "a global that has no protocol-2 name reading back as itself"
            }),
            "{name}"
        );
    }
}

/// CPython makes the calls of the canonical pickle's records as it makes the input's: the same
/// calls in the same order, each once, a record the value does not reach included (a class
/// that logs its calls, in `__main__`). Found by a review helper: calls in the output's order
/// (Mitogen's Router hands out the first Context it made for an id, so the order decides the
/// name), a record in a tuple on a cycle called again for the tuple's outer copy, and a cycle
/// reached only through a record's arguments written without end.
#[test]
fn records_are_called_as_the_input_calls_them() {
    let toml =
        "name = \"t\"\n[[global]]\nmodule = \"__main__\"\nname = \"K\"\nconstructor = \"record\"\n";
    let policy = Policy::from_toml_str(toml).unwrap();
    let k = "635f5f6d61696e5f5f0a4b0a"; // GLOBAL '__main__ K'
    let cases = [
        // K('b') made, memoized and popped; then [K('a'), K('b')].
        format!(
            "8002 {k} 5801000000 62 85 52 7100 30 5d 7101 28 {k} 5801000000 61 85 52 6800 65 2e"
        ),
        // T = (K(1), L) with L = [T]: a tuple on a cycle holding a record; the value is T.
        format!("8002 5d 7100 {k} 4b01 85 52 6800 86 7101 61 30 6801 2e"),
        // K('z') made and popped: the value is None, the call was made.
        format!("8002 {k} 5801000000 7a 85 52 30 4e 2e"),
        // K({'a': t}) with t = ([t],): a cycle reached only through a record's arguments
        // (the cycle walk did not look into records, so the list was not memoized and the
        // writer wrote t inside itself without end: a second review helper).
        format!("8002 5d 7100 85 7101 30 6800 6801 61 30 {k} 7d 5801000000 61 6801 73 85 52 2e"),
    ];
    let check = r#"
import pickle, sys
log = []
class K:
    def __init__(self, *a):
        log.append(a)
        self.a = a
    def __repr__(self):
        return 'K%r' % (self.a,)
def load(hex):
    del log[:]
    v = pickle.loads(bytes.fromhex(hex))
    return repr(v), repr(log)
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a == b, (a, b)
print("ok", a[1])
"#;
    for hex in &cases {
        let input = common::hex_decode(&hex.replace(' ', ""));
        let doc = decode(&input, &policy, false);
        for protocol in [canonical::Protocol::V5, canonical::Protocol::V2] {
            // Bounded, so that a writer that does not end fails here (TooLarge) rather than
            // filling the machine.
            let out =
                canonical::to_pickle_bounded(&doc, protocol, OutputBound::bytes(1 << 20)).unwrap();
            let verdict = python(
                check,
                &[&common::hex_encode(&input), &common::hex_encode(&out)],
            );
            assert!(verdict.starts_with("ok ["), "{hex} {protocol:?}: {verdict}");
        }
    }
}

/// A record is written back as the call that made it (REDUCE or NEWOBJ of its global on its
/// arguments) when that call, made again, receives what it received: not when it was changed
/// after the call, made by INST or OBJ, or called with a container that changed after.
#[test]
fn records_are_written_back_as_their_call_when_nothing_changed_after_it() {
    let toml = r#"
name = "t"
[[global]]
module = "m"
name = "R"
constructor = "record"
"#;
    let policy = Policy::from_toml_str(toml).unwrap();
    // R = m.R, written by STACK_GLOBAL (protocol 4 input).
    let r = "8c016d8c0152 93";
    let cases: &[(&str, &str, Option<&str>)] = &[
        // [R(1), R(1)]: a list made before its items, appended after (the common case).
        (
            "list of two records",
            &format!("80045d28 {r}4b0185 52 {r}4b0185 52 65 2e"),
            // Each call made before the list, as the input made them, memoized, popped.
            Some("8005 8c016d8c0152 93 4b0185 52 94 30 8c016d8c0152 93 4b0185 52 94 30 5d28 6800 6801 65 2e"),
        ),
        // R(d) with d = {} changed after the call: CPython's R got an empty dict.
        (
            "argument changed after the call",
            &format!("8004 7d 94 30 {r} 6800 85 52 6800 4b01 4b02 73 302e"),
            None,
        ),
        // The same through a tuple: R(([],)) and the list appended to after.
        (
            "argument changed through a tuple",
            &format!("8004 5d 94 30 {r} 6800 85 85 52 6800 4b01 61 302e"),
            None,
        ),
        // A change before the call is what the call received.
        (
            "argument changed before the call",
            &format!("8004 7d 94 4b01 4b02 73 30 {r} 6800 85 52 2e"),
            Some("8005 8c016d8c0152 93 7d 4b01 4b02 73 85 52 94 30 6800 2e"),
        ),
        // NEWOBJ: cls.__new__(cls, 1).
        (
            "NEWOBJ",
            &format!("8004 {r} 4b0185 81 2e"),
            Some("8005 8c016d8c0152 93 4b0185 81 94 30 6800 2e"),
        ),
        // BUILD on the record: its state is not its call.
        ("BUILD", &format!("8004 {r} 29 52 7d 62 2e"), None),
        // OBJ with no argument: CPython calls R.__new__(R), not R().
        ("OBJ", &format!("8004 28 {r} 6f 2e"), None),
    ];
    for (label, hex, want) in cases {
        let input = common::hex_decode(&hex.replace(' ', ""));
        let doc = decode(&input, &policy, false);
        let got = canonical::to_pickle(&doc);
        match want {
            Some(w) => {
                assert_eq!(got, Ok(common::hex_decode(&w.replace(' ', ""))), "{label}");
                assert!(doc.records_replayable(), "{label}");
            }
            None => assert_eq!(got, Err(canonical::Unwritable::Record), "{label}"),
        }
        // Protocol 2 writes the same calls by GLOBAL.
        let v2 = canonical::to_pickle_bounded(&doc, canonical::Protocol::V2, OutputBound::NONE);
        assert_eq!(v2.is_ok(), want.is_some(), "{label}: {v2:?}");
        if let Ok(out) = v2 {
            assert!(out.windows(5).any(|w| w == b"cm\nR\n"), "{label}");
        }
    }
}

#[test]
fn limited_output_gives_up_past_max_bytes() {
    let policy = Policy::data();
    let input = common::hex_decode("80025d284b014b024b0365 2e".replace(' ', "").as_str());
    let doc = decode(&input, &policy, false);
    let full = canonical::to_pickle(&doc).unwrap();
    assert_eq!(full, b"\x80\x05](K\x01K\x02K\x03e.");
    assert_eq!(
        canonical::to_pickle_bounded(
            &doc,
            canonical::Protocol::V5,
            OutputBound::bytes(full.len())
        ),
        Ok(full.clone())
    );
    assert_eq!(
        canonical::to_pickle_bounded(
            &doc,
            canonical::Protocol::V5,
            OutputBound::bytes(full.len() - 1)
        ),
        Err(canonical::Unwritable::TooLarge(full.len() - 1))
    );
    let past = std::time::Instant::now() - std::time::Duration::from_secs(1);
    // A deadline is looked at every 65,536 values: a small document is written anyway.
    assert_eq!(
        canonical::to_pickle_bounded(
            &doc,
            canonical::Protocol::V5,
            OutputBound::NONE.deadline(Some(past))
        ),
        Ok(full.clone())
    );
    // 100,000 values: the deadline is seen.
    let big = python_hex("import pickle; print(pickle.dumps(list(range(1000, 101000)), 4).hex())");
    let doc = decode(&big, &policy, false);
    assert_eq!(
        canonical::to_pickle_bounded(
            &doc,
            canonical::Protocol::V5,
            OutputBound::NONE.deadline(Some(past))
        ),
        Err(canonical::Unwritable::Deadline)
    );
}

/// A stream is one canonical pickle per root sharing one memo, read back by one
/// `pickle.Unpickler` calling `load()` again; a stream whose later pickle changes a value of an
/// earlier one (APPEND through the shared memo) has none.
#[test]
fn streams_share_one_memo_unless_a_later_pickle_changes_an_earlier_value() {
    let policy = Policy::data();
    // [7], then a GET of it, then a tuple holding it.
    let shared = b"\x80\x02]q\x00K\x07a.\x80\x02h\x00.\x80\x02h\x00\x85.";
    let doc = decode(shared, &policy, true);
    assert!(!doc.changed_earlier());
    let out = canonical::to_pickle(&doc).unwrap();
    assert_eq!(out, b"\x80\x05]\x94K\x07a.\x80\x05h\x00.\x80\x05h\x00\x85.");
    let check = r#"
import io, pickle, sys
def loads_all(b):
    u = pickle.Unpickler(io.BytesIO(b)); out = []
    while True:
        try: out.append(u.load())
        except EOFError: return out
a = loads_all(bytes.fromhex(sys.argv[1])); b = loads_all(bytes.fromhex(sys.argv[2]))
print(a == b, b[0] is b[1], b[2][0] is b[0])
"#;
    let verdict = python(
        check,
        &[&common::hex_encode(shared), &common::hex_encode(&out)],
    );
    assert_eq!(verdict.trim(), "True True True");
    // The second pickle appends 2 to the first one's list, then returns None.
    let changed = b"\x80\x02]q\x00K\x01a.\x80\x02h\x00K\x02a0N.";
    let doc = decode(changed, &policy, true);
    assert!(doc.changed_earlier());
    assert_eq!(
        canonical::to_pickle(&doc),
        Err(canonical::Unwritable::Stream)
    );
}

/// Cycles that pass through a tuple and a container reached by one reference only (`t = ([t],)`,
/// a review helper's 15-byte pickle, which the writer wrote without end): the containers on a
/// cycle are memoized, and CPython reads back the same graph (every object in the same place,
/// compared by a walk that numbers objects as it first meets them).
#[test]
fn cycles_through_tuples_end_and_keep_their_shape() {
    let make = r#"
import pickle, sys
cases = []
l = []; t = (l,); l.append(t); cases.append(t)
cases.append([t])
d = {}; t2 = (1, d); d['k'] = t2; cases.append(t2)
l3 = []; u = (l3,); T = (u,); l3.append(T); cases.append(T)
a = []; b = []; t4 = (a, b); a.append(t4); b.append(t4); cases.append(t4)
s = []; t3 = (s, s); s.append(t3); cases.append(t3)
l5 = []; t5 = (l5, [list(range(5))], 'x' * 300); l5.append(t5); cases.append(t5)
st = set(); f = frozenset({(1, 2)}); fl = []; t6 = (f, fl, frozenset({f})); fl.append(t6); cases.append(t6)
proto = int(sys.argv[1])
print(" ".join(pickle.dumps(c, proto).hex() for c in cases))
"#;
    let shape = r#"
import pickle, sys
def shape(root):
    seen, out, work = {}, [], [root]
    while work:
        x = work.pop()
        if isinstance(x, (int, float, str, bytes, type(None))):
            out.append(repr(x)); continue
        if id(x) in seen:
            out.append(('ref', seen[id(x)])); continue
        seen[id(x)] = len(seen)
        out.append(type(x).__name__)
        items = list(x.items()) if isinstance(x, dict) else sorted(x, key=repr) if isinstance(x, (set, frozenset)) else list(x)
        for i in reversed(items):
            work.extend(reversed(i) if isinstance(x, dict) else [i])
    return out
a = pickle.loads(bytes.fromhex(sys.argv[1])); b = pickle.loads(bytes.fromhex(sys.argv[2]))
print(shape(a) == shape(b))
"#;
    let policy = Policy::data();
    for proto in ["2", "4"] {
        let hexes = python(make, &[proto]);
        for (i, hex) in hexes.split_whitespace().enumerate() {
            let input = common::hex_decode(hex);
            let doc = decode(&input, &policy, false);
            let out = canonical::to_pickle(&doc).unwrap();
            let again = decode(&out, &policy, false);
            assert_eq!(
                json::to_typed_json(&again),
                json::to_typed_json(&doc),
                "case {i}, protocol {proto}"
            );
            let verdict = python(shape, &[hex, &common::hex_encode(&out)]);
            assert_eq!(verdict.trim(), "True", "case {i}, protocol {proto}");
        }
    }
}
