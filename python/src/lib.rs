//! picklewarden's Python extension, `picklewarden._picklewarden`: the functions the Python
//! package `picklewarden` re-exports (python/picklewarden/__init__.py documents them for
//! Python users). Every call into the picklewarden library is in `api.rs` and `convert.rs`.

mod api;
mod convert;
mod text;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use api::{Options, PyPolicy};

/// loads(data, *, policy="data", limits=None, buffers=None, classes=None, encoding=None)
///
/// Decodes one pickle from ``data`` (a bytes-like object) and returns its value.
///
/// Args:
///     data: the pickle's bytes. Nothing may follow its STOP opcode (CPython ignores what
///         follows; picklewarden refuses it as ``trailing_data``).
///     policy: a built-in policy's name (``"data"``, ``"strict"``, ``"mitogen"``,
///         ``"mitogen-plus"``) or a ``Policy``.
///     limits: ``{limit_name: value}`` over the policy's limits, e.g.
///         ``{"max_input_bytes": "1M", "max_nesting_depth": 100}``.
///     buffers: out-of-band buffers for protocol 5's NEXT_BUFFER, as for ``pickle.loads``;
///         each arrives as ``bytes``.
///     classes: ``{"module.Name": cls}`` (or ``{(module, name): cls}``): globals to rebuild
///         as instances of ``cls`` with the steps CPython's unpickler takes (``cls(*args)``
///         for REDUCE, ``cls.__new__(cls, *args)`` for NEWOBJ, ``__setstate__`` or a
///         ``__dict__`` update for BUILD). Naming a class here allows that global (as a
///         record) when the policy does not already. Other records come back as
///         ``Record``; no class the caller did not name is ever touched.
///     encoding: how Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) decode, as for
///         ``pickle.loads``: ``"bytes"``, ``"ASCII"``, ``"latin1"`` or ``"utf-8"`` (strict);
///         default: the policy's setting (``data``: ASCII, as ``pickle.loads``).
///
/// Returns:
///     The value: int, float, complex, str, bytes, bytearray, list, tuple, dict, set,
///     frozenset, None, bool, ``Record``, ``Global`` or an instance of a class in
///     ``classes``, with shared references and cycles as ``pickle.loads`` makes them.
///
/// Raises:
///     RefusedError: the input is malformed, truncated, over a limit or not allowed.
#[pyfunction]
#[pyo3(signature = (data, *, policy = None, limits = None, buffers = None, classes = None, encoding = None, stream = false))]
#[allow(clippy::too_many_arguments)]
fn loads<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    policy: Option<&Bound<'py, PyAny>>,
    limits: Option<&Bound<'py, PyDict>>,
    buffers: Option<&Bound<'py, PyAny>>,
    classes: Option<&Bound<'py, PyDict>>,
    encoding: Option<&str>,
    stream: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = Options::new(policy, limits, buffers, classes, encoding)?;
    api::loads(py, data, &opts, stream)
}

/// check(data, *, policy="data", limits=None, buffers=None, encoding=None, stream=False)
/// -> (accepted, error, pickles)
#[pyfunction]
#[pyo3(signature = (data, *, policy = None, limits = None, buffers = None, encoding = None, stream = false))]
fn check<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    policy: Option<&Bound<'py, PyAny>>,
    limits: Option<&Bound<'py, PyDict>>,
    buffers: Option<&Bound<'py, PyAny>>,
    encoding: Option<&str>,
    stream: bool,
) -> PyResult<(bool, Option<Bound<'py, PyAny>>, usize)> {
    let opts = Options::new(policy, limits, buffers, None, encoding)?;
    api::check(py, data, &opts, stream)
}

/// scan(data, *, policy="data", limits=None, stream=False, max_rounds=64)
/// -> ([(module, name, allowed, offset)], error, protocol)
#[pyfunction]
#[pyo3(signature = (data, *, policy = None, limits = None, stream = false, max_rounds = 64))]
fn scan<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    policy: Option<&Bound<'py, PyAny>>,
    limits: Option<&Bound<'py, PyDict>>,
    stream: bool,
    max_rounds: usize,
) -> PyResult<(Vec<api::FoundGlobal>, Option<Bound<'py, PyAny>>, u8)> {
    let opts = Options::new(policy, limits, None, None, None)?;
    api::scan(py, data, &opts, stream, max_rounds)
}

#[pymodule]
fn _picklewarden(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(loads, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_class::<PyPolicy>()?;
    Ok(())
}
