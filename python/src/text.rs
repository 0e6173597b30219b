//! A decoded text ([`PyStr`]) made into a Python `str`.
//!
//! The document holds text as UTF-8 that the decoder has checked. Under the stable ABI
//! (abi3) the ways to make a `str` from it are CPython's decoders, which check it again;
//! `PyUnicode_FromKindAndData` and `PyUnicode_New`, which would copy code points without a
//! second check, are not in the stable ABI. Measured floors (python/bench/RESULTS.md): on
//! long non-ASCII text CPython's UTF-8 decoder alone takes as long as `pickle.loads`, and
//! its UTF-32 decoder is 2.3-2.5x faster, but transcoding to UTF-32 first in safe scalar
//! Rust (one sequence at a time: each step waits for the length of the one before) costs
//! more than that saves, so the UTF-8 decoder it is.

use picklewarden::PyStr;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

/// The `str` of `s`: CPython's strict UTF-8 decoder, or, for text holding lone surrogates
/// (which pickle can carry and the strict decoder refuses), `surrogatepass`, as CPython's
/// unpickler decodes BINUNICODE.
pub(crate) fn str_of<'py>(py: Python<'py>, s: &PyStr<'_>) -> PyResult<Bound<'py, PyAny>> {
    let bytes = s.as_bytes();
    if s.has_surrogates() {
        return PyBytes::new(py, bytes).call_method1(
            intern!(py, "decode"),
            (intern!(py, "utf-8"), intern!(py, "surrogatepass")),
        );
    }
    Ok(PyString::from_bytes(py, bytes)?.into_any())
}
