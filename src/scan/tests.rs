//! Unit tests of the scan.

use crate::policy::Policy;

/// A refused global's names are kept as the error shows them, so a report (and the
/// service's verdict built from it) does not grow with a GLOBAL line of the input.
#[test]
fn refused_global_names_are_cut_for_display() {
    let policy = Policy::data();
    let mut input = b"c".to_vec();
    input.extend(std::iter::repeat_n(1u8, 1 << 20));
    input.extend_from_slice(b"\nx\n.");
    let report = crate::scan(&input, &policy);
    assert_eq!(
        report.result.unwrap_err().kind().name(),
        "global_not_allowed"
    );
    let g = report.globals.first().unwrap();
    assert!(!g.allowed);
    // 64 characters, each \u{1} (6 bytes), then "..."
    assert_eq!(g.module, format!("{}...", "\\u{1}".repeat(64)));
    assert_eq!(g.name, "x");
    // An allowed global is kept as written.
    let ok = crate::scan(b"c__builtin__\nset\n)\x85R.", &policy);
    assert!(ok.result.is_ok());
    let g = ok.globals.first().unwrap();
    assert_eq!(
        (g.module.as_str(), g.name.as_str(), g.allowed),
        ("__builtin__", "set", true)
    );
}
