use super::*;
use crate::decode;

#[test]
fn builder_allows_what_it_lists_and_nothing_else() {
    let policy = Policy::builder()
        .name("pts")
        .allow("geometry", "Point", Constructor::Record)
        .extension(240, "geometry", "Point")
        .build()
        .unwrap();
    assert_eq!(policy.name, "pts");
    assert_eq!(policy.rules().len(), 1);
    let rule = policy
        .rule(policy.find("geometry", "Point").unwrap())
        .unwrap();
    // Every form a record supports, none it does not.
    assert_eq!(rule.forms, Constructor::Record.supported_forms());
    assert_eq!(
        policy.extensions.get(&240),
        Some(&("geometry".to_owned(), "Point".to_owned()))
    );
    // Point(3, 4) through REDUCE decodes; os.system does not.
    assert!(decode(
        b"\x80\x02cgeometry\nPoint\nq\x00K\x03K\x04\x86q\x01Rq\x02.",
        &policy
    )
    .is_ok());
    let e = decode(b"cos\nsystem\n(S'id'\ntR.", &policy).unwrap_err();
    assert_eq!(e.kind().name(), "global_not_allowed");
}

#[test]
fn builder_refuses_what_a_policy_file_would() {
    let unknown_ext = Policy::builder().extension(7, "a", "b").build();
    assert!(unknown_ext.unwrap_err().0.contains("not allowed"));
    let zero = Policy::builder()
        .allow("a", "b", Constructor::Record)
        .extension(0, "a", "b")
        .build();
    assert!(zero.unwrap_err().0.contains("1 to 2147483647"));
    let twice = Policy::builder()
        .allow("a", "b", Constructor::Record)
        .extension(3, "a", "b")
        .extension(3, "a", "b")
        .build();
    assert!(twice.unwrap_err().0.contains("twice"));
    let mut keyed = GlobalRule {
        module: "builtins".to_owned(),
        name: "set".to_owned(),
        constructor: Constructor::Set,
        forms: Forms::ALL,
        args: None,
        key: RecordKey::FirstArgument,
        call_cost: crate::policy::Cost::Walks,
        build_cost: crate::policy::Cost::Walks,
        check: None,
    };
    let e = Policy::builder()
        .allow_rule(keyed.clone())
        .build()
        .unwrap_err();
    assert!(e.0.contains("record globals only"), "{e}");
    keyed.constructor = Constructor::Record;
    keyed.key = RecordKey::Datetime;
    let e = Policy::builder().allow_rule(keyed).build().unwrap_err();
    assert!(e.0.contains("datetime"), "{e}");
    let mut newobj_set = GlobalRule {
        module: "builtins".to_owned(),
        name: "set".to_owned(),
        constructor: Constructor::Set,
        forms: Forms::NONE,
        args: None,
        key: RecordKey::Identity,
        call_cost: crate::policy::Cost::Walks,
        build_cost: crate::policy::Cost::Walks,
        check: None,
    };
    newobj_set.forms.newobj = true;
    assert!(Policy::builder().allow_rule(newobj_set).build().is_err());
}

#[test]
fn builtins_are_parsed_once_and_kept() {
    for name in BUILTIN_POLICIES {
        let a = Policy::builtin_ref(name).unwrap().unwrap();
        let b = Policy::builtin_ref(name).unwrap().unwrap();
        assert!(std::ptr::eq(a, b), "{name} parsed twice");
        assert_eq!(a.name, name);
    }
    assert!(Policy::builtin_ref("nope").unwrap().is_none());
    assert_eq!(
        Policy::data().rules().len(),
        Policy::builtin_ref("data").unwrap().unwrap().rules().len()
    );
    // The stand-in for a built-in TOML that would not parse refuses every input.
    let stand_in = refuse_everything("data");
    assert!(stand_in.rules().is_empty());
    assert_eq!(
        decode(b"N.", &stand_in).unwrap_err().kind().name(),
        "limit_exceeded"
    );
}
