//! The picklewarden library's API as the Python functions use it: decoding (with the GIL
//! released for a long input), policies, limits, refusals, scans. With `convert.rs` (a decoded
//! document to Python objects), the only files that call the library, so that a change of the
//! library's API is adapted there alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use picklewarden::policy::{Constructor, Forms, GlobalRule, Python2Str, TextEncoding};
use picklewarden::{Decoder, Document, Error, ErrorKind, LimitName, Limits, Policy};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString, PyType};

/// Inputs at least this long are decoded with the GIL released; a shorter one decodes in
/// less time than releasing and taking back the GIL costs.
const DETACH_BYTES: usize = 16 * 1024;

thread_local! {
    /// The arena of this thread's last short decode, for the next one to build into
    /// (`Decoder::scratch`): a short pickle's decode then allocates no arena of its own.
    static SCRATCH: std::cell::RefCell<Option<picklewarden::Scratch>> =
        const { std::cell::RefCell::new(None) };
}

/// The largest arena kept for the next short decode.
const SCRATCH_MAX_BYTES: usize = 256 * 1024;

/// Documents of at least this many nodes are built with CPython's cyclic GC paused.
const GC_PAUSE_NODES: usize = 4096;

/// Pauses CPython's cyclic garbage collector (`gc.disable()`) until dropped, when it was on.
struct GcPause<'py> {
    gc: Option<Bound<'py, PyModule>>,
}

impl<'py> GcPause<'py> {
    fn new(py: Python<'py>) -> PyResult<GcPause<'py>> {
        let gc = py.import("gc")?;
        if gc.call_method0("isenabled")?.is_truthy()? {
            gc.call_method0("disable")?;
            Ok(GcPause { gc: Some(gc) })
        } else {
            Ok(GcPause { gc: None })
        }
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if let Some(gc) = &self.gc {
            // Drop cannot report an error; gc.enable() raises none.
            let _ = gc.call_method0("enable");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Policies

/// A policy as Python sees it: the library's policy behind a lock, so that `allow` can change
/// it while a decode holds the version it started with.
#[pyclass(frozen, module = "picklewarden", name = "Policy")]
pub(crate) struct PyPolicy {
    inner: Mutex<Arc<Policy>>,
}

fn builtin(name: &str) -> Option<Arc<Policy>> {
    static CACHE: OnceLock<Vec<(String, Arc<Policy>)>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        picklewarden::policy::BUILTIN_POLICIES
            .iter()
            .filter_map(|n| Policy::builtin(n).map(|p| ((*n).to_owned(), Arc::new(p))))
            .collect()
    });
    all.iter()
        .find(|(n, _)| n == name)
        .map(|(_, p)| Arc::clone(p))
}

fn builtin_or_err(name: &str) -> PyResult<Arc<Policy>> {
    builtin(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "no built-in policy {name:?} (built in: {})",
            picklewarden::policy::BUILTIN_POLICIES.join(", ")
        ))
    })
}

impl PyPolicy {
    fn get(&self) -> Arc<Policy> {
        match self.inner.lock() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

#[pymethods]
impl PyPolicy {
    /// Policy(name="data"): a built-in policy by name: "data", "strict", "mitogen",
    /// "mitogen-plus".
    #[new]
    #[pyo3(signature = (name = "data"))]
    fn new(name: &str) -> PyResult<PyPolicy> {
        let p = builtin_or_err(name)?;
        Ok(PyPolicy {
            inner: Mutex::new(Arc::new((*p).clone())),
        })
    }

    /// Policy.from_toml(text_or_path): a policy from TOML text, or from the file at a path
    /// (a str holding no newline that names an existing file, or an os.PathLike).
    #[staticmethod]
    fn from_toml(py: Python<'_>, text_or_path: &Bound<'_, PyAny>) -> PyResult<PyPolicy> {
        let text: String = if let Ok(s) = text_or_path.cast::<PyString>() {
            let s: String = s.extract()?;
            if !s.contains('\n') && std::path::Path::new(&s).is_file() {
                std::fs::read_to_string(&s)?
            } else {
                s
            }
        } else {
            let os = py.import("os")?;
            let path: String = os.call_method1("fspath", (text_or_path,))?.extract()?;
            std::fs::read_to_string(path)?
        };
        let p = Policy::from_toml_str(&text).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyPolicy {
            inner: Mutex::new(Arc::new(p)),
        })
    }

    /// allow(module, name, constructor="record", forms=None): allows one more global, as
    /// torch's add_safe_globals does; returns the policy. `module` may also be a class or
    /// function, whose __module__ and __qualname__ are used (then leave `name` out).
    /// `constructor` is one of the policy file's constructors ("record", "set", "frozenset",
    /// "bytes", "bytearray", "complex", "latin1_bytes"); `forms` a list of "reduce", "newobj",
    /// "newobj_ex", "inst", "build", "items" (default: every form the constructor supports).
    /// A record is kept as an inert picklewarden.Record unless loads() is given the class.
    #[pyo3(signature = (module, name = None, constructor = "record", forms = None))]
    fn allow<'py>(
        slf: &Bound<'py, Self>,
        module: &Bound<'py, PyAny>,
        name: Option<String>,
        constructor: &str,
        forms: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, Self>> {
        let (module, name) = match name {
            Some(n) => (module.extract::<String>()?, n),
            None => (
                module.getattr("__module__")?.extract::<String>()?,
                module.getattr("__qualname__")?.extract::<String>()?,
            ),
        };
        let constructor = Constructor::from_name(constructor)
            .ok_or_else(|| PyValueError::new_err(format!("unknown constructor {constructor:?}")))?;
        let forms = match forms {
            None => Forms::ALL,
            Some(list) => {
                let mut f = Forms::NONE;
                for name in &list {
                    match name.as_str() {
                        "reduce" => f.reduce = true,
                        "newobj" => f.newobj = true,
                        "newobj_ex" => f.newobj_ex = true,
                        "inst" => f.inst = true,
                        "build" => f.build = true,
                        "items" => f.items = true,
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "unknown form {other:?} (forms: {})",
                                Forms::NAMES.join(", ")
                            )))
                        }
                    }
                }
                f
            }
        };
        let rule = GlobalRule::new(&module, &name, constructor).forms(forms);
        let this = slf.get();
        let mut guard = match this.inner.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        Arc::make_mut(&mut guard).allow(rule);
        drop(guard);
        Ok(slf.clone())
    }

    /// The policy's name.
    #[getter]
    fn name(&self) -> String {
        self.get().name.clone()
    }

    /// The allowed globals as (module, name, constructor) tuples, in order.
    #[getter]
    fn globals(&self) -> Vec<(String, String, &'static str)> {
        self.get()
            .rules()
            .iter()
            .map(|r| (r.module.clone(), r.name.clone(), r.constructor.name()))
            .collect()
    }

    /// The policy's limits as a dict of name to value.
    #[getter]
    fn limits(&self) -> Vec<(&'static str, u64)> {
        let p = self.get();
        LimitName::ALL
            .iter()
            .map(|&l| (l.name(), p.limits.get(l)))
            .collect()
    }

    fn __repr__(&self) -> String {
        let p = self.get();
        format!("Policy({:?}, {} globals)", p.name, p.rules().len())
    }
}

/// The policy argument: a name, a Policy, or None for "data".
fn policy_of(policy: Option<&Bound<'_, PyAny>>) -> PyResult<Arc<Policy>> {
    match policy {
        None => builtin_or_err("data"),
        Some(p) => {
            if let Ok(pp) = p.cast::<PyPolicy>() {
                Ok(pp.get().get())
            } else if let Ok(s) = p.extract::<String>() {
                builtin_or_err(&s)
            } else {
                Err(PyTypeError::new_err(
                    "policy must be a built-in policy's name or a picklewarden.Policy",
                ))
            }
        }
    }
}

/// The policy's limits with the caller's `limits={name: value}` over them (a value may be
/// an int or a size text such as "64M").
fn limits_of(base: &Limits, limits: Option<&Bound<'_, PyDict>>) -> PyResult<Limits> {
    let mut out = *base;
    if let Some(d) = limits {
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            let name = LimitName::ALL
                .iter()
                .copied()
                .find(|l| l.name() == key)
                .ok_or_else(|| {
                    let names: Vec<&str> = LimitName::ALL.iter().map(|l| l.name()).collect();
                    PyKeyError::new_err(format!(
                        "unknown limit {key:?} (limits: {})",
                        names.join(", ")
                    ))
                })?;
            let value = if let Ok(n) = v.extract::<u64>() {
                n
            } else {
                let text: String = v.extract()?;
                picklewarden::limits::parse_size(&text).ok_or_else(|| {
                    PyValueError::new_err(format!("limit {key}: not a size: {text:?}"))
                })?
            };
            out.set(name, value);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Refusals

static REFUSED: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
pub(crate) static RECORD: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub(crate) static GLOBAL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
pub(crate) static REBUILD: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

pub(crate) fn types_attr<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<Bound<'py, PyType>> {
    cell.get_or_try_init(py, || {
        py.import("picklewarden._types")?
            .getattr(name)?
            .cast_into::<PyType>()
            .map(Bound::unbind)
            .map_err(PyErr::from)
    })
    .map(|t| t.bind(py).clone())
}

/// `picklewarden._types.refused`, which picks the RefusedError subclass for a kind.
fn refused_factory(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    REFUSED
        .get_or_try_init(py, || {
            py.import("picklewarden._types")?
                .getattr("refused")
                .map(Bound::unbind)
        })
        .map(|f| f.bind(py).clone())
}

/// The picklewarden.RefusedError (not raised) for a refusal of the library.
pub(crate) fn refused_error<'py>(py: Python<'py>, e: &Error) -> PyResult<Bound<'py, PyAny>> {
    let limit = match e.kind() {
        ErrorKind::LimitExceeded { limit, .. } => Some(limit.name()),
        _ => None,
    };
    refused_factory(py)?.call1((
        e.to_string(),
        e.kind().name(),
        e.category().name(),
        e.offset(),
        e.opcode_name(),
        e.opcode(),
        limit,
    ))
}

fn refused(py: Python<'_>, e: &Error) -> PyErr {
    match refused_error(py, e) {
        Ok(obj) => PyErr::from_value(obj),
        Err(err) => err,
    }
}

/// A refusal of this package's own (not the library's), as a RefusedError.
pub(crate) fn refused_own(py: Python<'_>, kind: &str, message: String) -> PyErr {
    let made = refused_factory(py).and_then(|t| {
        t.call1((
            message,
            kind,
            "policy_denied",
            Option::<u64>::None,
            Option::<&str>::None,
            Option::<u8>::None,
            Option::<&str>::None,
        ))
    });
    match made {
        Ok(obj) => PyErr::from_value(obj),
        Err(err) => err,
    }
}

// ---------------------------------------------------------------------------------------------
// Input

/// The bytes to decode: borrowed from a bytes object, or a copy of another bytes-like object
/// (bytearray, memoryview: copied so that nothing can change them during the decode).
pub(crate) enum Input<'py> {
    Borrowed(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl Input<'_> {
    pub(crate) fn of<'py>(data: &Bound<'py, PyAny>) -> PyResult<Input<'py>> {
        if let Ok(b) = data.cast::<PyBytes>() {
            return Ok(Input::Borrowed(b.clone()));
        }
        if let Ok(b) = data.cast::<PyByteArray>() {
            return Ok(Input::Owned(b.to_vec()));
        }
        if data.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "a bytes-like object is required, not 'str'",
            ));
        }
        let copy = data.py().get_type::<PyBytes>().call1((data,))?;
        Ok(Input::Owned(copy.cast::<PyBytes>()?.as_bytes().to_vec()))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Input::Borrowed(b) => b.as_bytes(),
            Input::Owned(v) => v,
        }
    }
}

/// Everything a call's keyword arguments say about the decode.
pub(crate) struct Options<'py> {
    policy: Arc<Policy>,
    limits: Limits,
    buffers: Option<Vec<Input<'py>>>,
    /// `None` without `classes=` (no map made: a `HashMap` seeds its hasher from a
    /// thread-local on every `new`).
    classes: Option<HashMap<String, Bound<'py, PyAny>>>,
}

impl<'py> Options<'py> {
    /// The caller's classes by dotted name (`classes=`), `None` when none were given.
    pub(crate) fn classes(&self) -> Option<&HashMap<String, Bound<'py, PyAny>>> {
        self.classes.as_ref().filter(|m| !m.is_empty())
    }

    pub(crate) fn new(
        policy: Option<&Bound<'py, PyAny>>,
        limits: Option<&Bound<'py, PyDict>>,
        buffers: Option<&Bound<'py, PyAny>>,
        classes: Option<&Bound<'py, PyDict>>,
        encoding: Option<&str>,
    ) -> PyResult<Options<'py>> {
        let mut policy = policy_of(policy)?;
        if let Some(enc) = encoding {
            let want = python2_str_of(enc)?;
            if policy.python2_str != want {
                let mut p = (*policy).clone();
                p.python2_str = want;
                policy = Arc::new(p);
            }
        }
        let limits = limits_of(&policy.limits, limits)?;
        let buffers = match buffers {
            None => None,
            Some(b) if b.is_none() => None,
            Some(b) => {
                let mut out = Vec::new();
                for item in b.try_iter()? {
                    out.push(Input::of(&item?)?);
                }
                Some(out)
            }
        };
        let mut map = None;
        if let Some(c) = classes {
            let map = map.insert(HashMap::new());
            for (k, v) in c.iter() {
                let key = if let Ok((m, n)) = k.extract::<(String, String)>() {
                    format!("{m}.{n}")
                } else {
                    k.extract::<String>().map_err(|_| {
                        PyTypeError::new_err("classes keys are \"module.Name\" or (module, name)")
                    })?
                };
                map.insert(key, v);
            }
            policy = with_classes(&policy, map.keys());
        }
        Ok(Options {
            policy,
            limits,
            buffers,
            classes: map,
        })
    }
}

/// How Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) decode for pickle's
/// `encoding` argument: "bytes", or text in ASCII, Latin-1 or UTF-8 (strict errors).
fn python2_str_of(encoding: &str) -> PyResult<Python2Str> {
    let norm = encoding.to_ascii_lowercase().replace('_', "-");
    Ok(match norm.as_str() {
        "bytes" => Python2Str::Bytes,
        "ascii" | "us-ascii" => Python2Str::Str(TextEncoding::Ascii),
        "latin1" | "latin-1" | "iso-8859-1" | "iso8859-1" | "l1" => {
            Python2Str::Str(TextEncoding::Latin1)
        }
        "utf-8" | "utf8" => Python2Str::Str(TextEncoding::Utf8),
        _ => {
            return Err(PyValueError::new_err(format!(
            "encoding {encoding:?} is not supported (\"bytes\", \"ASCII\", \"latin1\", \"utf-8\")"
        )))
        }
    })
}

/// The policy, with a `record` rule added for each class the caller mapped that it does not
/// allow under any (module, name) reading of the dotted name, under every such reading:
/// whichever the pickle uses, the object made is the caller's class, never anything imported.
fn with_classes<'k>(policy: &Arc<Policy>, keys: impl Iterator<Item = &'k String>) -> Arc<Policy> {
    let mut extra = Vec::new();
    for key in keys {
        let splits = || {
            key.match_indices('.')
                .filter_map(|(i, _)| Some((key.get(..i)?, key.get(i + 1..)?)))
        };
        if splits().any(|(m, n)| policy.find(m, n).is_some()) {
            continue; // the policy's own rule (with its argument checks) stands
        }
        for (i, _) in key.match_indices('.') {
            let (module, name) = (key.get(..i), key.get(i + 1..));
            if let (Some(m), Some(n)) = (module, name) {
                if !m.is_empty() && !n.is_empty() && policy.find(m, n).is_none() {
                    extra.push(GlobalRule::new(m, n, Constructor::Record));
                }
            }
        }
    }
    if extra.is_empty() {
        return Arc::clone(policy);
    }
    let mut p = (**policy).clone();
    for rule in extra {
        p.allow(rule);
    }
    Arc::new(p)
}

fn decoder<'a>(
    input: &'a [u8],
    policy: &'a Policy,
    limits: Limits,
    buffers: &'a Option<Vec<Input<'_>>>,
) -> Decoder<'a, 'a> {
    let mut d = Decoder::new(input, policy).limits(limits);
    if let Some(b) = buffers {
        d = d.buffers(b.iter().map(Input::bytes).collect());
    }
    d
}

/// Decodes `input` (one pickle, or a stream of pickles when `stream`), with the GIL released
/// for a long input.
fn decode_doc<'a>(
    py: Python<'_>,
    input: &'a [u8],
    opts: &'a Options<'_>,
    stream: bool,
) -> PyResult<Document<'a>> {
    let policy: &Policy = &opts.policy;
    let buffers = &opts.buffers;
    let d = decoder(input, policy, opts.limits, buffers);
    let one = move |d: Decoder<'a, 'a>| {
        if stream {
            d.decode_stream()
        } else {
            d.decode()
        }
    };
    // One pass (no scan first: for a short input the scan's pass costs more than the
    // bookkeeping it saves the build). A short input builds into the arena this thread's last
    // short decode left.
    let result = if input.len() >= DETACH_BYTES {
        py.detach(move || one(d))
    } else {
        match SCRATCH.with(|s| s.borrow_mut().take()) {
            Some(scratch) => one(d.scratch(scratch)),
            None => one(d),
        }
    };
    result.map_err(|e| refused(py, &e))
}

/// `loads`: the value of one pickle (or a list of the values of a stream's pickles).
pub(crate) fn loads<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    opts: &Options<'py>,
    stream: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let input = Input::of(data)?;
    let doc = decode_doc(py, input.bytes(), opts, stream)?;
    let mut b = crate::convert::Builder::new(py, &doc, opts)?;
    {
        // CPython's cyclic GC would walk the objects being made again and again (it runs
        // every 700 allocations) while none of them can be garbage: they are all held until
        // the build returns. Paused for a large document, as it was.
        let _pause = (doc.len() >= GC_PAUSE_NODES)
            .then(|| GcPause::new(py))
            .transpose()?;
        b.build_all()?;
    }
    let value = if stream {
        let roots: PyResult<Vec<_>> = doc.roots().iter().map(|&r| b.obj(r)).collect();
        PyList::new(py, roots?)?.into_any()
    } else {
        match doc.root() {
            Some(r) => b.obj(r)?,
            None => return Err(PyValueError::new_err("the document has no value")),
        }
    };
    drop(b);
    if input.bytes().len() < DETACH_BYTES {
        let scratch = doc.recycle();
        if scratch.capacity_bytes() <= SCRATCH_MAX_BYTES {
            SCRATCH.with(|s| *s.borrow_mut() = Some(scratch));
        }
    }
    Ok(value)
}

/// `check`: (accepted, the RefusedError or None, pickles) without building Python objects.
pub(crate) fn check<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    opts: &Options<'py>,
    stream: bool,
) -> PyResult<(bool, Option<Bound<'py, PyAny>>, usize)> {
    let input = Input::of(data)?;
    let bytes = input.bytes();
    let policy: &Policy = &opts.policy;
    let buffers = &opts.buffers;
    let d = decoder(bytes, policy, opts.limits, buffers);
    let run = move || {
        if stream {
            d.decode_stream().map(|doc| doc.roots().len())
        } else {
            d.decode().map(|doc| doc.roots().len())
        }
    };
    // The GIL released for a long input only, as `loads` does.
    let result = if bytes.len() >= DETACH_BYTES {
        py.detach(run)
    } else {
        run()
    };
    match result {
        Ok(n) => Ok((true, None, n)),
        Err(e) => Ok((false, Some(refused_error(py, &e)?), 0)),
    }
}

/// One global a scan found: (module, name, allowed, offset).
pub(crate) type FoundGlobal = (String, String, bool, u64);

/// `scan`: every global the input names, going on past each global the policy refuses (it is
/// allowed as a record in a copy of the policy and the scan runs again), until the scan
/// passes or stops at another refusal. At most `max_rounds` scans.
pub(crate) fn scan<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    opts: &Options<'py>,
    stream: bool,
    max_rounds: usize,
) -> PyResult<(Vec<FoundGlobal>, Option<Bound<'py, PyAny>>, u8)> {
    let input = Input::of(data)?;
    let bytes = input.bytes();
    let original = Arc::clone(&opts.policy);
    let nbuf = opts.buffers.as_ref().map(Vec::len);
    let limits = opts.limits;
    let (report, refused_names) = py.detach(move || {
        let mut policy: Policy = (*original).clone();
        let mut refused_names: Vec<(String, String)> = Vec::new();
        let mut rounds = 0;
        loop {
            let report = picklewarden::Scanner::new(bytes, &policy)
                .limits(limits)
                .pickles(if stream {
                    picklewarden::Pickles::Stream
                } else {
                    picklewarden::Pickles::One
                })
                .buffers(nbuf)
                .run();
            rounds += 1;
            let next = match &report.result {
                Err(e) => match e.kind() {
                    ErrorKind::GlobalNotAllowed { module, name }
                        if rounds < max_rounds && policy.find(module, name).is_none() =>
                    {
                        Some((module.clone(), name.clone()))
                    }
                    _ => None,
                },
                Ok(()) => None,
            };
            match next {
                Some((m, n)) => {
                    policy.allow(GlobalRule::new(&m, &n, Constructor::Record));
                    refused_names.push((m, n));
                }
                None => return (report, refused_names),
            }
        }
    });
    let globals = report
        .globals
        .iter()
        .map(|g| {
            let allowed = g.allowed
                && !refused_names
                    .iter()
                    .any(|(m, n)| *m == g.module && *n == g.name);
            (g.module.clone(), g.name.clone(), allowed, g.offset)
        })
        .collect();
    let error = match &report.result {
        Ok(()) => None,
        Err(e) => Some(refused_error(py, e)?),
    };
    Ok((globals, error, report.protocol))
}
