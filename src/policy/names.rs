//! Which texts can name a global: the module and the qualified name a pickler writes are
//! Python identifiers joined by dots (`pandas.core.frame`, `DataFrame`, `Outer.Inner`), as
//! `pickle.whichmodule` and `__qualname__` give them. A policy entry that is not one (`?`, a
//! space, an empty part) could never be what a pickler writes: refused when the policy is read.

use crate::error::escape_bytes_for_display;

/// The longest module or qualified name kept as written in a report, in characters (longer
/// ones are escaped and cut as error messages show input text). Python names no limit, but
/// no module path or qualified name a package ships comes near it.
pub const MAX_NAME_CHARS: usize = 256;

/// Whether `text` is Python identifiers joined by single dots: each part starts with a letter
/// or `_` and goes on with letters, digits and `_` (CPython's `str.isidentifier()`, whose
/// letters are Unicode's `XID_Start` and `XID_Continue`; outside ASCII this takes Rust's
/// `char::is_alphabetic` and `is_alphanumeric`, which hold every such letter).
pub fn is_python_name(text: &str) -> bool {
    !text.is_empty()
        && text.split('.').all(|part| {
            let mut chars = part.chars();
            chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
                && chars.all(|c| c == '_' || c.is_alphanumeric())
        })
}

/// A module or name from the input as reports show it: as written when it is a Python name
/// ([`is_python_name`]) of at most [`MAX_NAME_CHARS`] characters, so that a tool can write it
/// into a policy (`scan --trust`); otherwise escaped and cut at 64 characters as error
/// messages show input text.
pub(crate) fn shown_name(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) if is_python_name(t) && t.chars().count() <= MAX_NAME_CHARS => t.to_owned(),
        _ => escape_bytes_for_display(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_names() {
        for ok in [
            "os",
            "pandas.core.frame",
            "DataFrame",
            "Outer.Inner",
            "_private",
            "__builtin__",
            "caf\u{e9}",
            "x1",
        ] {
            assert!(is_python_name(ok), "{ok}");
        }
        for bad in [
            "?",
            "",
            "a b",
            "a..b",
            ".a",
            "a.",
            "1x",
            "import numpy as np",
            "a\nb",
            "a-b",
            "<lambda>",
        ] {
            assert!(!is_python_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn shown_names_keep_python_names_as_written() {
        let long = "a".repeat(100);
        assert_eq!(shown_name(long.as_bytes()), long);
        assert_eq!(shown_name("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(shown_name(b"a\x00b"), "a\\u{0}b");
        assert_eq!(shown_name(&[b'a'; 300]).len(), 67);
    }
}
