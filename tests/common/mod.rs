//! Helpers shared by the integration tests: running python3, listing the corpora, decoding
//! inside `catch_unwind`, writing the oracle's JSON-lines files and running the oracle.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::Command;

use picklewarden::{json, Decoder, ErrorKind, Limits, Policy};

/// The repository root: the library's folder, also when the tool's crate (`cli/`, one level
/// down) includes these helpers with `#[path]`.
pub fn repo() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    match dir.parent() {
        Some(up) if !dir.join("tests/corpus").is_dir() => up.to_path_buf(),
        _ => dir,
    }
}

/// A scratch folder for one test under Cargo's integration-test temp dir (emptied first).
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// Runs `python3 -c CODE ARGS...` from the repository root; returns stdout. Fails the test
/// (never skips) when python3 is missing or the code fails: CI has python3.
pub fn python(code: &str, args: &[&str]) -> String {
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (CI has it, the tests need it): {e}"));
    assert!(
        out.status.success(),
        "python3 failed ({}):\n--- code ---\n{code}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap_or_else(|e| panic!("python3 stdout is not UTF-8: {e}"))
}

/// Runs python code that prints one hex string; returns the bytes.
pub fn python_hex(code: &str) -> Vec<u8> {
    let text = python(code, &[]);
    hex_decode(text.trim())
}

pub fn hex_decode(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length: {text:?}");
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(text.get(i..i + 2).unwrap_or("zz"), 16)
                .unwrap_or_else(|e| panic!("bad hex {text:?}: {e}"))
        })
        .collect()
}

pub fn hex_encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

// ------------------------------------------------------------------------------- decoding

/// What one decode did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Decoded: typed JSON (when asked for) and the number of roots.
    Ok { json: Option<String>, roots: usize },
    /// Refused.
    Err {
        kind: &'static str,
        limit: Option<&'static str>,
        text: String,
        offset: u64,
    },
    /// The decoder (or the JSON writer) panicked.
    Panic(String),
}

impl Outcome {
    /// `kind` or `limit_exceeded(limit)` or `OK` or `PANIC`.
    pub fn label(&self) -> String {
        match self {
            Outcome::Ok { .. } => "OK (decoded)".to_owned(),
            Outcome::Err {
                kind,
                limit: Some(l),
                ..
            } => format!("{kind}({l})"),
            Outcome::Err { kind, .. } => (*kind).to_owned(),
            Outcome::Panic(_) => "PANIC".to_owned(),
        }
    }

    pub fn detail(&self) -> String {
        match self {
            Outcome::Ok { roots, .. } => format!("decoded with {roots} root(s)"),
            Outcome::Err { text, .. } => text.clone(),
            Outcome::Panic(msg) => format!("panic: {msg}"),
        }
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Decodes inside `catch_unwind` (one pickle, or a stream), optionally rendering typed JSON
/// (inside the same `catch_unwind`).
pub fn decode_outcome(
    data: &[u8],
    policy: &Policy,
    limits: Option<Limits>,
    stream: bool,
    want_json: bool,
) -> Outcome {
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut d = Decoder::new(data, policy);
        if let Some(l) = limits {
            d = d.limits(l);
        }
        let r = if stream {
            d.decode_stream()
        } else {
            d.decode()
        };
        match r {
            Ok(doc) => Outcome::Ok {
                json: want_json.then(|| json::to_typed_json(&doc)),
                roots: doc.roots().len(),
            },
            Err(e) => Outcome::Err {
                kind: e.kind().name(),
                limit: match e.kind() {
                    ErrorKind::LimitExceeded { limit, .. } => Some(limit.name()),
                    _ => None,
                },
                text: e.to_string(),
                offset: e.offset(),
            },
        }
    }));
    r.unwrap_or_else(|p| Outcome::Panic(panic_text(p.as_ref())))
}

// ------------------------------------------------------------------------------- good corpus

/// One file of `tests/corpus/good`.
#[derive(Debug, Clone)]
pub struct GoodFile {
    pub path: PathBuf,
    pub name: String,
    /// `record_*`: checked in the oracle's records mode under a records policy.
    pub records: bool,
    /// `stream_*`: several pickles sharing one memo, decoded with `decode_stream`.
    pub stream: bool,
}

/// Every `*.pkl` of `tests/corpus/good`, sorted, with its mode and stream flag (from the name,
/// cross-checked against MANIFEST.tsv).
pub fn good_corpus() -> Vec<GoodFile> {
    let dir = repo().join("tests/corpus/good");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv"))
        .unwrap_or_else(|e| panic!("read good MANIFEST.tsv: {e}"));
    let mut listed: BTreeMap<String, (String, String)> = BTreeMap::new();
    for line in manifest
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(cols.len() >= 3, "bad good MANIFEST line {line:?}");
        listed.insert(cols[0].to_owned(), (cols[1].to_owned(), cols[2].to_owned()));
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("read_dir: {e}")).path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
            continue;
        };
        if !name.ends_with(".pkl") {
            continue;
        }
        let records = name.starts_with("record_");
        let stream = name.starts_with("stream_");
        let (mode, st) = listed
            .get(&name)
            .unwrap_or_else(|| panic!("{name} is not in tests/corpus/good/MANIFEST.tsv"));
        assert_eq!(
            mode == "records",
            records,
            "{name}: MANIFEST mode {mode} vs its name"
        );
        assert_eq!(
            st == "1",
            stream,
            "{name}: MANIFEST stream flag {st} vs its name"
        );
        files.push(GoodFile {
            path,
            name,
            records,
            stream,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        files.len(),
        listed.len(),
        "tests/corpus/good holds {} .pkl files but MANIFEST.tsv lists {}",
        files.len(),
        listed.len()
    );
    files
}

/// Lists the globals (module, name) that pickles name through GLOBAL, INST and STACK_GLOBAL,
/// with `pickletools.genops` and a small stack/memo simulation (for STACK_GLOBAL operands that
/// come from the memo). Files may be `.xz`; streams of several pickles are followed.
pub const LIST_GLOBALS_PY: &str = r#"
import io, lzma, pickletools, sys
sys.set_int_max_str_digits(0)
# STRING args of Python 2 pickles need not be ASCII, and int text need not be converted
pickletools.stringnl.reader = lambda f: pickletools.read_stringnl(f, decode=False)
for _d in (pickletools.decimalnl_short, pickletools.decimalnl_long):
    _d.reader = lambda f: f.readline()
MARK = object()
def globals_of(data, out):
    f = io.BytesIO(data)
    memo = {}
    while f.tell() < len(data):
        stack = []
        def pop():
            return stack.pop() if stack else None
        for op, arg, pos in pickletools.genops(f):
            n = op.name
            if n in ("GLOBAL", "INST"):
                m, _, q = arg.partition(" ")
                out.add((m, q))
            if n == "STACK_GLOBAL":
                q = pop(); m = pop()
                if not (isinstance(m, str) and isinstance(q, str)):
                    raise SystemExit("STACK_GLOBAL operands not resolved at %d" % pos)
                out.add((m, q))
                stack.append(None)
            elif n == "MARK":
                stack.append(MARK)
            elif n == "DUP":
                stack.append(stack[-1] if stack else None)
            elif n in ("GET", "BINGET", "LONG_BINGET"):
                stack.append(memo.get(int(arg)))
            elif n in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg)] = stack[-1] if stack else None
            elif n == "MEMOIZE":
                memo[len(memo)] = stack[-1] if stack else None
            elif n == "POP":
                pop()
            elif n in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"):
                stack.append(arg)
            else:
                before, after = op.stack_before, op.stack_after
                if pickletools.markobject in before:
                    while stack and stack[-1] is not MARK:
                        stack.pop()
                    pop()
                    k = before.index(pickletools.markobject)
                else:
                    k = len(before)
                for _ in range(k):
                    pop()
                stack.extend([None] * len(after))
out = set()
for p in sys.argv[1:]:
    d = open(p, "rb").read()
    if p.endswith(".xz"):
        d = lzma.decompress(d)
    globals_of(d, out)
for m, q in sorted(out):
    print(m + "\t" + q)
"#;

pub fn list_globals(paths: &[PathBuf]) -> BTreeSet<(String, String)> {
    let args: Vec<&str> = paths
        .iter()
        .map(|p| {
            p.to_str()
                .unwrap_or_else(|| panic!("non-UTF-8 path {}", p.display()))
        })
        .collect();
    python(LIST_GLOBALS_PY, &args)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (m, n) = l
                .split_once('\t')
                .unwrap_or_else(|| panic!("bad globals line {l:?}"));
            (m.to_owned(), n.to_owned())
        })
        .collect()
}

/// The globals the oracle's records mode decodes natively (oracle.py `NATIVE_GLOBALS` and
/// `_codecs.encode`), with the picklewarden constructor that does the same.
pub const NATIVE_GLOBALS: [(&str, &str, &str); 11] = [
    ("_codecs", "encode", "latin1_bytes"),
    ("builtins", "bytes", "bytes"),
    ("__builtin__", "bytes", "bytes"),
    ("builtins", "bytearray", "bytearray"),
    ("__builtin__", "bytearray", "bytearray"),
    ("builtins", "set", "set"),
    ("__builtin__", "set", "set"),
    ("builtins", "frozenset", "frozenset"),
    ("__builtin__", "frozenset", "frozenset"),
    ("builtins", "complex", "complex"),
    ("__builtin__", "complex", "complex"),
];

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|e| panic!("quote {s:?}: {e}"))
}

/// TOML of a records policy: the natives with their native constructors, every other global in
/// `globals` as `constructor = "record"` (all forms); Python 2 str as latin1 str (as the
/// oracle's records mode loads with encoding="latin1").
pub fn records_policy_toml(name: &str, globals: &BTreeSet<(String, String)>) -> String {
    let mut t = format!(
        "name = {}\ndescription = \"test records policy\"\npython2_str = \"str\"\npython2_str_encoding = \"latin1\"\n",
        toml_str(name)
    );
    let natives: BTreeSet<(String, String)> = NATIVE_GLOBALS
        .iter()
        .map(|(m, n, _)| ((*m).to_owned(), (*n).to_owned()))
        .collect();
    for (m, n, c) in NATIVE_GLOBALS {
        let _ = write!(
            t,
            "\n[[global]]\nmodule = {}\nname = {}\nconstructor = \"{c}\"\n",
            toml_str(m),
            toml_str(n)
        );
    }
    for (m, n) in globals.difference(&natives) {
        let _ = write!(
            t,
            "\n[[global]]\nmodule = {}\nname = {}\nconstructor = \"record\"\n",
            toml_str(m),
            toml_str(n)
        );
    }
    t
}

/// The policies the good corpus is decoded under: `data` for plain files, and a records
/// policy allowing every global the `record_*` files name.
pub fn good_policies(files: &[GoodFile]) -> (Policy, Policy) {
    let record_paths: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.records)
        .map(|f| f.path.clone())
        .collect();
    assert!(
        !record_paths.is_empty(),
        "no record_* files in the good corpus"
    );
    let globals = list_globals(&record_paths);
    assert!(
        globals.contains(&("recordtypes".to_owned(), "Point".to_owned())),
        "the globals listing missed recordtypes.Point: {globals:?}"
    );
    let toml = records_policy_toml("good-records", &globals);
    let records =
        Policy::from_toml_str(&toml).unwrap_or_else(|e| panic!("records policy: {e}\n{toml}"));
    (Policy::data(), records)
}

// ------------------------------------------------------------------------------- oracle

/// One JSON line for the oracle.
pub fn oracle_line(file: &Path, outcome: &Outcome) -> String {
    let f = serde_json::to_string(&file.to_string_lossy()).unwrap_or_default();
    match outcome {
        Outcome::Ok { json: Some(j), .. } => format!("{{\"file\":{f},\"json\":{j}}}"),
        other => {
            let e = serde_json::to_string(&format!("{}: {}", other.label(), other.detail()))
                .unwrap_or_default();
            format!("{{\"file\":{f},\"error\":{e}}}")
        }
    }
}

/// The result of one `oracle.py compare` run.
#[derive(Debug)]
pub struct OracleRun {
    pub success: bool,
    pub status: String,
    pub stdout: String,
    pub stderr: String,
    pub compared: u64,
    pub mismatched: u64,
    pub skipped: u64,
}

/// Writes `lines` to `dir/name` and runs `python3 tests/python/oracle.py compare ARGS LINES`.
pub fn run_oracle(dir: &Path, name: &str, lines: &[String], args: &[&str]) -> OracleRun {
    let file = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&file, text).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    let out = Command::new("python3")
        .arg(repo().join("tests/python/oracle.py"))
        .arg("compare")
        .args(args)
        .arg(&file)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 (CI has it, the tests need it): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("oracle: "))
        .unwrap_or_else(|| {
            panic!(
                "no `oracle:` summary line (status {})\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status
            )
        })
        .to_owned();
    // oracle: N compared, M mismatched, S skipped
    let nums: Vec<u64> = summary
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(u64::MAX))
        .collect();
    assert_eq!(nums.len(), 3, "unexpected summary line {summary:?}");
    OracleRun {
        success: out.status.success(),
        status: out.status.to_string(),
        stdout,
        stderr,
        compared: nums[0],
        mismatched: nums[1],
        skipped: nums[2],
    }
}

/// Positions just after each STOP of a file holding one or more pickles (pickletools.genops,
/// pure Python, so the positions are exact).
pub fn stop_ends(path: &Path) -> Vec<usize> {
    let code = r#"
import io, pickletools, sys
sys.set_int_max_str_digits(0)
data = open(sys.argv[1], "rb").read()
f = io.BytesIO(data)
while f.tell() < len(data):
    for op, arg, pos in pickletools.genops(f):
        pass
    print(f.tell())
"#;
    python(code, &[path.to_str().unwrap_or_default()])
        .lines()
        .map(|l| {
            l.trim()
                .parse()
                .unwrap_or_else(|e| panic!("bad position {l:?}: {e}"))
        })
        .collect()
}

/// CPython hashes an int by reducing it modulo 2**61 - 1 (`Objects/longobject.c`,
/// `_PyHASH_MODULUS`), so `k * CPYTHON_HASH_MODULUS` hashes to 0 for every int k.
pub const CPYTHON_HASH_MODULUS: u128 = (1u128 << 61) - 1;

/// LONG1 of a non-negative value, minimal two's complement little-endian, as
/// `pickle.encode_long` writes it.
pub fn long1(v: u128) -> Vec<u8> {
    let bits = 128 - v.leading_zeros() as usize;
    let n = bits / 8 + 1;
    let mut out = vec![0x8a, n as u8];
    out.extend_from_slice(&v.to_le_bytes()[..n]);
    out
}
