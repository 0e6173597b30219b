//! Unit tests of [`Policy`](super::Policy): the built-in policies parse, forms a constructor
//! lacks are refused or dropped, settings that could never apply and bad files are refused,
//! limit suffixes, and the `[mitogen]` sections against [`MessagePolicy::mitogen`].

use super::*;

#[test]
fn builtins_parse() {
    for name in BUILTIN_POLICIES {
        let p = Policy::from_toml_str(builtin_toml(name).unwrap()).unwrap();
        assert_eq!(p.name, name);
    }
    let data = Policy::data();
    let i = data.find("_codecs", "encode").unwrap();
    assert_eq!(data.rule(i).unwrap().constructor, Constructor::Latin1Bytes);
    assert!(data.find("__builtin__", "set").is_some());
    assert!(data.find("builtins", "set").is_some());
    assert!(data.find("os", "system").is_none());
    assert!(Policy::strict().rules().is_empty());
}

#[test]
fn native_forms_cannot_be_widened() {
    // A file naming a form the constructor lacks is refused, with what it supports...
    let e = Policy::from_toml_str(
        "name = \"x\"\n[[global]]\nmodule = \"builtins\"\nname = \"set\"\nconstructor = \"set\"\nforms = [\"reduce\", \"newobj\", \"build\"]\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("supports only the forms reduce, inst (not newobj, build)"),
        "{e}"
    );
    // ... and a rule built in code loses it in `allow`.
    let mut p = Policy::empty("x");
    p.allow(GlobalRule {
        module: "builtins".into(),
        name: "set".into(),
        constructor: Constructor::Set,
        forms: Forms::ALL,
        args: None,
        key: RecordKey::Identity,
        call_cost: Cost::Walks,
        build_cost: Cost::Walks,
        check: None,
    });
    let r = p.rule(p.find("builtins", "set").unwrap()).unwrap();
    assert!(r.forms.reduce && r.forms.inst);
    assert!(!r.forms.newobj && !r.forms.newobj_ex && !r.forms.build && !r.forms.items);
}

#[test]
fn settings_that_could_never_apply_are_refused() {
    let record = |arg: &str| {
        format!(
            "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nargs = [{arg}]\n"
        )
    };
    for (text, says) in [
        (
            record("{ type = \"int\", min = 5, max = 1 }"),
            "min 5 is above max 1",
        ),
        (
            record("{ type = \"str\", min = 0 }"),
            "min and max apply to int",
        ),
        (
            record("{ type = \"int\", max_len = 3 }"),
            "max_len applies to",
        ),
        (
            record("{ type = \"list\", keys = \"str\" }"),
            "keys applies to dict",
        ),
        (
            record("{ type = \"dict\", keys = \"list\" }"),
            "can match no key",
        ),
        (
            "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"record\"\nmin_args = 2\n"
                .to_owned(),
            "min_args applies only with an args list",
        ),
        (
            "name = \"x\"\npython2_str_encoding = \"utf-8\"\n".to_owned(),
            "python2_str_encoding applies only",
        ),
        (
            "name = \"x\"\npython2_str = \"bytes\"\npython2_str_encoding = \"latin1\"\n"
                .to_owned(),
            "python2_str_encoding applies only",
        ),
        (
            "name = \"x\"\n[limits]\nmax_input_bytes = \"64X\"\n".to_owned(),
            "is not a count",
        ),
        (
            "name = \"x\"\n[limits]\nmax_input_bytes = -1\n".to_owned(),
            "limit max_input_bytes: -1 is not a count",
        ),
        (
            "name = \"x\"\n[limits]\nmax_input_bytes = 1.5\n".to_owned(),
            "limit max_input_bytes: 1.5 is not a count",
        ),
        (
            "name = \"x\"\n[limits]\nmax_input_bytes = \"99999999999G\"\n".to_owned(),
            "is not a count from 0 to 2**64 - 1",
        ),
    ] {
        let e = Policy::from_toml_str(&text).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
    // What does apply is still accepted: on `any`, every constraint applies to the values
    // it fits (a review helper found `any` with max_len refused at load).
    let p = Policy::from_toml_str(&record(
        "{ type = \"int\", min = 1, max = 1 }, { type = \"dict\", max_len = 2, keys = \"str\" }, { type = \"any\", min = 0, max = 9, max_len = 3, keys = \"int\" }",
    ))
    .unwrap();
    assert!(p.find("m", "C").is_some());
}

#[test]
fn limits_take_suffixes_as_the_command_line_does() {
    let p = Policy::from_toml_str(
        "name = \"x\"\n[limits]\nmax_input_bytes = \"64M\"\nmax_memo_entries = \"2k\"\nmax_nesting_depth = 7\nmax_container_items = \"1_000\"\n",
    )
    .unwrap();
    assert_eq!(p.limits.max_input_bytes, 64 << 20);
    assert_eq!(p.limits.max_memo_entries, 2048);
    assert_eq!(p.limits.max_nesting_depth, 7);
    assert_eq!(p.limits.max_container_items, 1000);
}

#[test]
fn bad_files_are_refused() {
    for text in [
        "name = 1",
        "name = \"x\"\nbogus = 1",
        "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"eval\"\n",
        "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"record\"\nforms = [\"call\"]\n",
        "name = \"x\"\n[limits]\nmax_bogus = 1\n",
        "name = \"x\"\npython2_str = \"str\"\npython2_str_encoding = \"cp1252\"\n",
        "name = \"x\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"set\"\n[[global]]\nmodule = \"a\"\nname = \"b\"\nconstructor = \"set\"\n",
    ] {
        assert!(Policy::from_toml_str(text).is_err(), "{text}");
    }
}

/// A module or name that no pickler writes (`?` from a listing that could not read a name,
/// text with spaces, an empty part) is refused when the file is read, and by the builder.
#[test]
fn names_that_are_not_python_names_are_refused() {
    for (module, name) in [
        ("?", "Index"),
        ("pandas", "?"),
        ("import numpy as np", "x"),
        ("a..b", "c"),
        ("", "c"),
    ] {
        let text = format!(
            "name = \"x\"\n[[global]]\nmodule = {module:?}\nname = {name:?}\nconstructor = \"record\"\n"
        );
        let e = Policy::from_toml_str(&text).unwrap_err().to_string();
        assert!(e.contains("Python identifiers joined by dots"), "{e}");
        let built = Policy::builder()
            .allow(module, name, Constructor::Record)
            .build();
        assert!(built.is_err(), "{module}.{name}");
    }
    let ok = "name = \"x\"\n[[global]]\nmodule = \"pandas.core.frame\"\nname = \"DataFrame\"\nconstructor = \"record\"\n";
    assert!(Policy::from_toml_str(ok).is_ok());
}

/// The `[mitogen]` sections of the shipped Mitogen policies are the Rust twin
/// (`MessagePolicy::mitogen`), and a policy without the section gets it too.
#[test]
fn the_mitogen_message_policy_files_match_the_rust_twin() {
    for name in BUILTIN_POLICIES {
        let p = Policy::builtin(name).unwrap();
        assert_eq!(p.mitogen, MessagePolicy::mitogen(), "{name}");
    }
    let twin = MessagePolicy::mitogen();
    let handles: Vec<(u32, &str, &str)> = twin
        .handles
        .iter()
        .map(|(&h, r)| (h, r.name.as_str(), r.payload.name()))
        .collect();
    assert_eq!(
        handles,
        [
            (100, "GET_MODULE", "module_name"),
            (102, "FORWARD_LOG", "raw"),
            (103, "ADD_ROUTE", "route"),
            (104, "DEL_ROUTE", "route_id"),
            (105, "ALLOCATE_ID", "empty"),
            (109, "DETACHING", "empty"),
            (110, "CALL_SERVICE", "service_call"),
            (112, "GET_RESOURCE", "resource_request"),
        ]
    );
    assert_eq!(
        twin.handles.get(&112).map(|r| &r.payload),
        Some(&PayloadRule::ResourceRequest {
            packages: Vec::new()
        })
    );
    assert!(twin.reply_handles);
    assert_eq!(twin.max_new_contexts_per_frame, 100);
    assert_eq!(twin.max_new_contexts_per_stream, 10_000);
}

#[test]
fn mitogen_sections_that_could_never_apply_are_refused() {
    let section = |handles: &str| {
        format!(
            "name = \"x\"\n[mitogen]\nreply_handles = true\nmax_new_contexts_per_frame = 1\n\
             max_new_contexts_per_stream = 2\n{handles}"
        )
    };
    let handle = |h: u32, payload: &str, extra: &str| {
        format!("[[mitogen.handle]]\nhandle = {h}\nname = \"H\"\npayload = \"{payload}\"\n{extra}")
    };
    for (text, says) in [
        (section(&handle(1000, "pickles", "")), "are reply handles"),
        (
            section(&(handle(100, "raw", "") + &handle(100, "raw", ""))),
            "listed twice",
        ),
        (
            section(&handle(100, "code", "")),
            "unknown payload \"code\"",
        ),
        (
            section(&handle(100, "raw", "packages = [\"a\"]")),
            "packages applies to payload = \"resource_request\" only",
        ),
        (
            section(&handle(
                112,
                "resource_request",
                "top_level_packages = [\"a\"]",
            )),
            "top_level_packages applies to payload = \"module_name\" only",
        ),
        (
            "name = \"x\"\n[mitogen]\nreply_handles = true\n".to_owned(),
            "missing field",
        ),
        (section("bogus = 1\n"), "unknown field"),
    ] {
        let e = Policy::from_toml_str(&text).unwrap_err().to_string();
        assert!(e.contains(says), "{text}: {e}");
    }
    // A section is the whole allowlist: here GET_RESOURCE for one package, nothing else.
    let p = Policy::from_toml_str(&section(&handle(
        112,
        "resource_request",
        "packages = [\"ansible_mitogen\"]",
    )))
    .unwrap();
    assert_eq!(p.mitogen.handles.len(), 1);
    assert_eq!(p.mitogen.max_new_contexts_per_frame, 1);
    assert_eq!(p.mitogen.max_new_contexts_per_stream, 2);
    assert_eq!(
        p.mitogen.handles.get(&112).map(|r| &r.payload),
        Some(&PayloadRule::ResourceRequest {
            packages: vec!["ansible_mitogen".into()]
        })
    );
}

#[test]
fn costs_are_read_from_the_file_and_default_to_the_worst() {
    let file = |extra: &str, constructor: &str| {
        format!(
            "name = \"x\"\n[[global]]\nmodule = \"m\"\nname = \"C\"\nconstructor = \"{constructor}\"\n{extra}"
        )
    };
    let p = Policy::from_toml_str(&file(
        "call_cost = \"inserts_pairs\"\nbuild_cost = \"sets_attributes\"\n",
        "record",
    ))
    .unwrap();
    let r = p.rule(p.find("m", "C").unwrap()).unwrap();
    assert_eq!(
        (r.call_cost, r.build_cost),
        (Cost::InsertsPairs, Cost::SetsAttributes)
    );
    let p = Policy::from_toml_str(&file("", "record")).unwrap();
    let r = p.rule(p.find("m", "C").unwrap()).unwrap();
    assert_eq!((r.call_cost, r.build_cost), (Cost::Walks, Cost::Walks));
    let e = Policy::from_toml_str(&file("call_cost = \"cheap\"\n", "record"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown call_cost \"cheap\"") && e.contains("keeps"),
        "{e}"
    );
    let e = Policy::from_toml_str(&file("build_cost = \"keeps\"\n", "set"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("build_cost applies to record globals only"),
        "{e}"
    );
    // The built-in ones say what their classes do (policy/mitogen.toml, policy/torch.toml).
    let m = Policy::builtin("mitogen").unwrap();
    let kwargs = m.rule(m.find("mitogen.core", "Kwargs").unwrap()).unwrap();
    assert_eq!(kwargs.call_cost, Cost::InsertsPairs);
    let t = Policy::builtin("torch").unwrap();
    let od = t
        .rule(t.find("collections", "OrderedDict").unwrap())
        .unwrap();
    assert_eq!(
        (od.call_cost, od.build_cost),
        (Cost::InsertsPairs, Cost::SetsAttributes)
    );
    for (name, cost) in Cost::NAMES {
        assert_eq!(cost.name(), name);
    }
}

/// `model` (policy/model.toml, tests/python/gen_model_policy.py) is exactly `data`, `numpy`
/// and `torch`'s globals, each rule as its source policy has it (forms, check, key, costs,
/// schema): a plain pickle gets what those policies allow, never more and never looser.
#[test]
fn model_is_the_merge_of_data_numpy_and_torch() {
    let model = Policy::builtin("model").unwrap();
    let mut want: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for source in ["data", "numpy", "torch"] {
        let p = Policy::builtin(source).unwrap();
        for r in p.rules() {
            let shown = format!("{r:?}");
            if seen.insert((r.module.clone(), r.name.clone())) {
                want.push(shown);
            } else {
                // A global two sources list is the same rule in both.
                let i = model.find(&r.module, &r.name).unwrap();
                assert_eq!(format!("{:?}", model.rule(i).unwrap()), shown);
            }
        }
    }
    let got: Vec<String> = model.rules().iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(got, want);
    assert_eq!(model.persistent_ids, PersistentIds::Reject);
    assert_eq!(model.python2_str, Policy::data().python2_str);
    assert_eq!(
        format!("{:?}", model.limits),
        format!("{:?}", Policy::data().limits)
    );
    let numpy = Policy::builtin("numpy").unwrap();
    assert_eq!(format!("{:?}", model.limits), format!("{:?}", numpy.limits));
}
