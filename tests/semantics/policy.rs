//! Policy refusals and records: constructor and form refusals name the global,
//! `[[extension]]` entries are checked at load, INST/OBJ records keep their kind, and a
//! callable made by a call is a policy refusal.

use picklewarden::{json::to_typed_json, Decoder, Policy, Value};

use crate::{decode, py, refusal, root, FMT};

/// A `constructor_rejected` refusal names the global and counts arguments from 1, at the
/// REDUCE's offset. (The pickle is the shape CPython's protocol 2 writes for an object whose
/// `__reduce__` returns `(Point, (1, 2000))`, without its BINPUTs.)
#[test]
fn constructor_refusals_name_the_global_and_the_argument() {
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"myapp.models\"\nname = \"Point\"\n\
         constructor = \"record\"\nforms = [\"reduce\"]\n\
         args = [{ type = \"int\", min = 0, max = 1000 }, { type = \"int\", min = 0, max = 1000 }]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // c myapp.models\nPoint\n K\x01 M\xd0\x07 \x86 R .
    let data = b"\x80\x02cmyapp.models\nPoint\nK\x01M\xd0\x07\x86R.";
    let e = refusal(data, &policy);
    assert_eq!(e.kind().name(), "constructor_rejected");
    assert_eq!(e.offset(), data.len() as u64 - 2);
    let msg = e.to_string();
    assert!(
        msg.contains("myapp.models.Point: argument 2 of 2: "),
        "{msg}"
    );
    // The first argument in range, the second out: nothing about argument 1.
    assert!(!msg.contains("argument 1"), "{msg}");
}

/// `[[extension]]` entries are checked when a policy loads: a code outside 1..=0x7fffffff (as
/// CPython's copyreg.add_extension), a code mapped twice, or a global no `[[global]]` allows
/// is a load error. A mapping made through the Rust API to a global the policy does not allow
/// still decodes to a `global_not_allowed` refusal.
#[test]
fn extension_entries_are_checked_when_the_policy_loads() {
    let point =
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"Point\"\nconstructor = \"record\"\n";
    let ext = |code: &str, module: &str| {
        format!("\n[[extension]]\ncode = {code}\nmodule = \"{module}\"\nname = \"Point\"\n")
    };
    assert!(Policy::from_toml_str(&format!("{point}{}", ext("240", "m"))).is_ok());
    for (bad, why) in [
        (ext("0", "m"), "codes run from 1"),
        (ext("2147483648", "m"), "codes run from 1"),
        (
            ext("240", "other"),
            "other.Point is not allowed by any [[global]]",
        ),
        (
            format!("{}{}", ext("240", "m"), ext("240", "m")),
            "mapped twice",
        ),
    ] {
        match Policy::from_toml_str(&format!("{point}{bad}")) {
            Ok(_) => panic!("loaded {bad:?}"),
            Err(e) => assert!(e.to_string().contains(why), "{bad:?}: {e}"),
        }
    }
    let mut policy = Policy::from_toml_str(point).unwrap_or_else(|e| panic!("{e}"));
    policy
        .extensions
        .insert(1, ("os".to_string(), "system".to_string()));
    // pickle.dumps at protocol 2 with copyreg.add_extension('os', 'system', 1): EXT1 1, then
    // arguments and REDUCE (hand-shortened to the EXT1).
    let e = refusal(b"\x80\x02\x82\x01.", &policy);
    assert_eq!(e.kind().name(), "global_not_allowed");
}

/// A form refusal names the global it was refused on (module.name), in the message and the
/// kind, for every form, in the scan and the decode alike; the names are escaped and cut at
/// 64 characters as other text from the input is.
#[test]
fn form_refusals_name_the_global() {
    let mitogen = Policy::builtin("mitogen").unwrap();
    let g = b"cmitogen.core\nCallError\n".to_vec();
    let record = [&b"\x80\x02"[..], &g, b"X\x01\x00\x00\x00x\x85R"].concat();
    let cases: [(&str, Vec<u8>); 7] = [
        ("NEWOBJ", [&b"\x80\x02"[..], &g, b")\x81."].concat()),
        ("NEWOBJ_EX", [&b"\x80\x04"[..], &g, b")}\x92."].concat()),
        ("INST/OBJ", b"\x80\x02(imitogen.core\nCallError\n.".to_vec()),
        ("INST/OBJ", [&b"\x80\x02("[..], &g, b"o."].concat()),
        ("BUILD", [&record[..], b"}b."].concat()),
        ("APPEND", [&record[..], b"K\x01a."].concat()),
        ("SETITEM", [&record[..], b"K\x01K\x02s."].concat()),
    ];
    for (form, p) in cases {
        let want = format!("{form} on mitogen.core.CallError is not allowed by policy \"mitogen\"");
        let e = refusal(&p, &mitogen);
        assert_eq!(e.kind().name(), "form_not_allowed", "{e}");
        assert!(e.to_string().starts_with(&want), "{form}: {e}");
        let kind = format!("{:?}", e.kind());
        assert!(
            kind.contains("module: \"mitogen.core\"") && kind.contains("name: \"CallError\""),
            "{kind}"
        );
        let scanned = picklewarden::scan(&p, &mitogen).result;
        assert_eq!(scanned.unwrap_err().to_string(), e.to_string());
    }
    // A policy's names are written as they are in the input: escaped and cut. (A policy file
    // or the builder refuses such names; `Policy::allow` takes a rule as it is.)
    let long = "n".repeat(100);
    let mut policy = Policy::empty("x");
    let mut rule = picklewarden::policy::GlobalRule::new(
        "m\u{7}",
        &long,
        picklewarden::policy::Constructor::Record,
    );
    rule.forms = picklewarden::policy::Forms::NONE;
    rule.forms.reduce = true;
    policy.allow(rule);
    let mut p = b"\x80\x04\x8c\x02m\x07\x8c\x64".to_vec();
    p.extend_from_slice(long.as_bytes());
    p.extend_from_slice(b"\x93)\x81.");
    let e = refusal(&p, &policy).to_string();
    let want = format!("NEWOBJ on m\\u{{7}}.{}... is not allowed", "n".repeat(64));
    assert!(e.starts_with(&want), "{e}");
}

/// INST and OBJ records keep how they were made: CPython calls `cls(*args)` for REDUCE, but
/// `cls.__new__(cls)` for INST and OBJ with no arguments (`Lib/pickle.py` `_instantiate`), so
/// typed JSON and `Object::kind` say `inst` and `obj`, not `reduce`.
#[test]
fn inst_and_obj_records_keep_their_kind() {
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let global = "{\"type\":\"global\",\"module\":\"m\",\"name\":\"C\"}";
    for (data, kind, args) in [
        (&b"(im\nC\n."[..], "inst", "[]"),
        (
            b"(I1\nim\nC\n.",
            "inst",
            "[{\"type\":\"int\",\"value\":\"1\"}]",
        ),
        (b"(cm\nC\no.", "obj", "[]"),
        (
            b"(cm\nC\nI1\no.",
            "obj",
            "[{\"type\":\"int\",\"value\":\"1\"}]",
        ),
        (b"cm\nC\n)R.", "reduce", "[]"),
    ] {
        let doc = decode(data, &policy);
        match root(&doc).1 {
            Value::Object(o) => assert_eq!(o.kind.name(), kind),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            to_typed_json(&doc),
            format!(
                "{FMT}{{\"type\":\"object\",\"kind\":\"{kind}\",\"callable\":{global},\
                 \"args\":{{\"type\":\"tuple\",\"items\":{args}}}}}}}"
            ),
        );
    }
    // The policy's `inst` form covers both.
    let no_inst = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nforms = [\"reduce\"]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for data in [&b"(im\nC\n."[..], b"(cm\nC\no."] {
        assert_eq!(refusal(data, &no_inst).kind().name(), "form_not_allowed");
    }
}

/// A callable that is not a global (REDUCE, NEWOBJ or OBJ on the object a call made, as dill
/// writes `dill._dill._load_type('set')(...)`): CPython calls it, picklewarden never calls
/// what a call returned, so it is a policy refusal (`callable_not_allowed`), in the scan and
/// the build alike; a value that cannot be called in CPython either (a list) stays a
/// `type_mismatch`.
#[test]
fn a_callable_made_by_a_call_is_a_policy_refusal() {
    // getattr(str, 'upper')('a'), at protocol 0: CPython gives 'A'.
    let data = py(r#"
d = b"c__builtin__\ngetattr\n(c__builtin__\nstr\nVupper\ntR(Va\ntR."
assert pickle.loads(d) == "A"
print(d.hex())
"#);
    let policy = Policy::from_toml_str(
        "name = \"p\"\n[[global]]\nmodule = \"__builtin__\"\nname = \"getattr\"\nconstructor = \"record\"\n\
         [[global]]\nmodule = \"__builtin__\"\nname = \"str\"\nconstructor = \"record\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let reduce_at = data.len() as u64 - 2;
    // NEWOBJ on it (protocol 2), and OBJ (protocol 1) with it as the class.
    let mut newobj = b"\x80\x02".to_vec();
    newobj.extend_from_slice(data.get(..data.len() - 7).unwrap());
    newobj.extend_from_slice(b")\x81.");
    let mut obj = b"(".to_vec();
    obj.extend_from_slice(data.get(..data.len() - 7).unwrap());
    obj.extend_from_slice(b"o.");
    for (input, at) in [
        (&data[..], reduce_at),
        (&newobj[..], newobj.len() as u64 - 2),
        (&obj[..], obj.len() as u64 - 2),
    ] {
        let e = refusal(input, &policy);
        assert_eq!(e.kind().name(), "callable_not_allowed", "{e}");
        assert_eq!(e.category(), picklewarden::Category::PolicyDenied);
        assert_eq!(e.offset(), at, "{e}");
        assert!(e.to_string().contains("policy \"p\""), "{e}");
        let careful = Decoder::new(input, &policy).careful_only().decode();
        assert_eq!(careful.unwrap_err().kind().name(), "callable_not_allowed");
        let scanned = picklewarden::scan(input, &policy).result.unwrap_err();
        assert_eq!(
            (scanned.kind().name(), scanned.offset()),
            ("callable_not_allowed", at)
        );
    }
    // A list is no callable in CPython either.
    let list = b"]\x94)R.";
    assert_eq!(refusal(list, &policy).kind().name(), "type_mismatch");
}
