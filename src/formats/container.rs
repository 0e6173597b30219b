//! What a file is (by its content) and its verdict: every pickle it holds checked under a
//! policy, every global it names listed with its offset, the container's own structure checked.
//!
//! A verdict is one of three ([`Verdict`]): `clean` only when every byte that a loader would
//! act on was understood and allowed; `refused` when something is malformed, over a limit, or
//! denied by the policy; `incomplete` when part of the file is not understood (an unknown zip
//! entry, TorchScript code, an unsupported compression), which is never reported clean.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{Cursor, Read, Seek, SeekFrom};

use crate::policy::Policy;
use crate::{Category, Document, Error, Scanner};

use super::globals::globals_after;
use super::zip_check::{CentralEntry, Refusal};

/// What a file's content says it is ([`detect`]); never decided by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// A torch zip checkpoint (`torch.save` since torch 1.6): one top folder holding
    /// `data.pkl`, `data/<key>` storages, `byteorder`, `version`, ...
    TorchZip,
    /// A TorchScript archive (`torch.jit.save`): a torch zip with `constants.pkl` and `code/`.
    TorchScript,
    /// The legacy torch format (before 1.6): five pickles one after another (magic number,
    /// protocol version, sys_info, the object, the storage keys), then the raw storages.
    TorchLegacy,
    /// The older tar layout of torch (`sys_info`, `pickle`, `storages`, `tensors`), detected as
    /// Python's `tarfile` detects a tar (a first header block whose checksum matches).
    TorchTar,
    /// A NumPy `.npy` file.
    Npy,
    /// A NumPy `.npz` file: a zip of `.npy` files.
    Npz,
    /// A joblib file, with its compression.
    Joblib(Compression),
    /// A plain pickle.
    Pickle,
    /// A zip archive that is neither a torch checkpoint nor an npz.
    Zip,
}

impl Format {
    /// The name shown in reports (`torch-zip`, `joblib-gzip`, `pickle`...).
    pub fn name(self) -> &'static str {
        match self {
            Format::TorchZip => "torch-zip",
            Format::TorchScript => "torchscript",
            Format::TorchLegacy => "torch-legacy",
            Format::TorchTar => "torch-tar",
            Format::Npy => "npy",
            Format::Npz => "npz",
            Format::Joblib(c) => c.joblib_name(),
            Format::Pickle => "pickle",
            Format::Zip => "zip",
        }
    }

    /// The built-in policy a file of this format is checked under when none is given: `torch`
    /// for torch files, `numpy` for npy, npz and joblib, `data` for plain pickles.
    pub fn default_policy(self) -> &'static str {
        match self {
            Format::TorchZip | Format::TorchScript | Format::TorchLegacy | Format::TorchTar => {
                "torch"
            }
            Format::Npy | Format::Npz | Format::Joblib(_) => "numpy",
            Format::Pickle | Format::Zip => "data",
        }
    }
}

/// The compressions joblib writes (`joblib/compressor.py`), told apart by their magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Not compressed.
    None,
    /// zlib (`\x78`).
    Zlib,
    /// gzip (`\x1f\x8b`).
    Gzip,
    /// bzip2 (`BZh`).
    Bz2,
    /// xz (`\xfd7zXZ\x00`).
    Xz,
    /// .lzma "alone" (`\x5d\x00\x00`).
    Lzma,
    /// LZ4 frame (`\x04\x22\x4d\x18`).
    Lz4,
}

impl Compression {
    fn joblib_name(self) -> &'static str {
        match self {
            Compression::None => "joblib",
            Compression::Zlib => "joblib-zlib",
            Compression::Gzip => "joblib-gzip",
            Compression::Bz2 => "joblib-bz2",
            Compression::Xz => "joblib-xz",
            Compression::Lzma => "joblib-lzma",
            Compression::Lz4 => "joblib-lz4",
        }
    }

    /// The compression whose magic bytes `bytes` starts with, if any.
    pub fn sniff(bytes: &[u8]) -> Option<Compression> {
        Some(if bytes.starts_with(b"\x1f\x8b") {
            Compression::Gzip
        } else if bytes.starts_with(b"BZh") {
            Compression::Bz2
        } else if bytes.starts_with(b"\xfd7zXZ\x00") {
            Compression::Xz
        } else if bytes.starts_with(b"\x5d\x00\x00") {
            Compression::Lzma
        } else if bytes.starts_with(b"\x04\x22\x4d\x18") {
            Compression::Lz4
        } else if let Some(&[0x78, flg]) = bytes.get(..2) {
            // zlib's header check: CMF * 256 + FLG is a multiple of 31 (RFC 1950).
            if !(0x7800u16 | u16::from(flg)).is_multiple_of(31) {
                return None;
            }
            Compression::Zlib
        } else {
            return None;
        })
    }
}

/// A file's verdict.
///
/// Exhaustive on purpose: the three verdicts are the scan's contract (and its exit codes), so a
/// new one must make every caller decide, not fall into a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Every part a loader acts on was understood and allowed.
    Clean,
    /// Part of the file is not understood (never reported clean); nothing refused.
    Incomplete,
    /// Malformed, over a limit, or denied by the policy.
    Refused,
}

impl Verdict {
    /// `"clean"`, `"incomplete"` or `"refused"`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Incomplete => "incomplete",
            Verdict::Refused => "refused",
        }
    }
}

/// One global a pickle of the file names.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GlobalUse {
    /// Where the pickle is: the zip entry (`archive/data.pkl`), `pickle 4` for the fourth
    /// pickle of a legacy torch file, or empty for the file itself.
    pub entry: String,
    /// Module, as written (escaped and cut at 64 characters when the policy refuses it).
    pub module: String,
    /// Qualified name, as `module` is kept.
    pub name: String,
    /// Offset of the opcode that names it, from the start of the pickle.
    pub offset: u64,
    /// Whether the policy allows it. Globals found after the first refusal (by a listing
    /// pass over the opcodes, `src/formats/globals.rs`) are checked against the policy's allowlist
    /// by name only.
    pub allowed: bool,
    /// Whether the global is known to run code or touch the system when called
    /// ([`runs_code`]).
    pub runs_code: bool,
}

/// Why a file is refused or incomplete.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Finding {
    /// The refusal kind: an [`crate::ErrorKind::name`] for a pickle's refusal, or a
    /// container kind (`zip_malformed`, `zip_duplicate_entry`, `zip_layout`, `storage_missing`,
    /// `storage_size_mismatch`, `view_out_of_storage`, `npy_header`, `npy_size_mismatch`,
    /// `decompress`, `container_limit`, `not_understood`...).
    pub kind: String,
    /// `malformed`, `truncated`, `limit_exceeded`, `policy_denied`, `io` or `incomplete`.
    pub category: &'static str,
    /// What was found, for people.
    pub message: String,
    /// Where: the entry or pickle (as [`GlobalUse::entry`]).
    pub entry: String,
    /// The offset in that entry or pickle, when one applies.
    pub offset: Option<u64>,
}

/// The report of one file.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FileReport {
    /// What the content is.
    pub format: Format,
    /// The name of the policy the pickles were checked under.
    pub policy: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The first refusal (for `refused`) or the first part not understood (`incomplete`).
    pub reason: Option<Finding>,
    /// Further findings after the first (every one that could be found).
    pub findings: Vec<Finding>,
    /// Every global the file's pickles name, in order, each with where it is.
    pub globals: Vec<GlobalUse>,
    /// The pickles checked (entries or places, as [`GlobalUse::entry`]).
    pub pickles: Vec<String>,
}

/// Bounds on what reading a container may cost, beyond the pickle limits of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelLimits {
    /// Most entries in a zip archive (default 65 536): a torch checkpoint has one per storage
    /// plus a few; a central directory of millions of entries costs memory to list.
    pub max_entries: u64,
    /// Most bytes of one pickle, decompressed (default 1 GiB; the policy's `max_input_bytes`
    /// applies too): a pickle is read into memory whole.
    pub max_pickle_bytes: u64,
    /// Most bytes decompressed from one compressed stream or zip entry that is read (default
    /// 1 GiB): a small deflate or bzip2 stream can expand a thousandfold.
    pub max_decompressed_bytes: u64,
    /// Largest ratio of decompressed to compressed bytes accepted once more than 1 MiB has
    /// come out (default 1032, deflate's own maximum; bzip2 can reach millions).
    pub max_ratio: u64,
}

impl Default for ModelLimits {
    fn default() -> ModelLimits {
        ModelLimits {
            max_entries: 1 << 16,
            max_pickle_bytes: 1 << 30,
            max_decompressed_bytes: 1 << 30,
            max_ratio: 1032,
        }
    }
}

/// How [`scan_bytes`] reads a file.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ScanOptions {
    /// The policy for every pickle, in place of the format's built-in one
    /// ([`Format::default_policy`]).
    pub policy: Option<Policy>,
    /// Container bounds.
    pub limits: ModelLimits,
}

impl ScanOptions {
    /// Each format's built-in policy and the default [`ModelLimits`].
    pub fn new() -> ScanOptions {
        ScanOptions::default()
    }

    /// Uses `policy` for every pickle, in place of the format's built-in one.
    pub fn policy(mut self, policy: Option<Policy>) -> ScanOptions {
        self.policy = policy;
        self
    }

    /// Sets the container bounds.
    pub fn limits(mut self, limits: ModelLimits) -> ScanOptions {
        self.limits = limits;
        self
    }
}

/// Tells what `bytes` holds from its first bytes (and, for a zip, its entry names).
pub fn detect(bytes: &[u8]) -> Format {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return zip_format(&mut Cursor::new(bytes), &ModelLimits::default()).0;
    }
    // Before every other format: torch.load tries tarfile first on anything not a zip.
    if super::torch_tar::is_tar(bytes) {
        return Format::TorchTar;
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return Format::Npy;
    }
    if let Some(c) = Compression::sniff(bytes) {
        return Format::Joblib(c);
    }
    if bytes.starts_with(b"ZF") {
        // joblib before 0.9.3: "ZF", then the size, then zlib data.
        return Format::Joblib(Compression::Zlib);
    }
    if super::torch::is_legacy(bytes) {
        return Format::TorchLegacy;
    }
    if super::joblib::names_wrapper(bytes) {
        return Format::Joblib(Compression::None);
    }
    Format::Pickle
}

/// The policy a file of `format` is checked under: `options.policy`, or the format's built-in
/// one (parsed once for the process); `strict` should a built-in policy not parse.
fn policy_for(format: Format, options: &ScanOptions) -> Cow<'_, Policy> {
    match &options.policy {
        Some(p) => Cow::Borrowed(p),
        None => match Policy::builtin_ref(format.default_policy()) {
            Ok(Some(p)) => Cow::Borrowed(p),
            _ => Cow::Owned(Policy::strict()),
        },
    }
}

/// A zip's format from the names of its checked central directory; when the records are
/// refused, from the names the zip crate lists (or [`Format::Zip`]), so that the refusal is
/// reported under the format the file claims.
fn zip_format<R: Read + Seek>(
    reader: &mut R,
    limits: &ModelLimits,
) -> (Format, Result<Vec<CentralEntry>, Refusal>) {
    let checked = super::zip_check::check(reader, limits.max_entries);
    let format = match &checked {
        Ok(entries) => super::torch::zip_kind_names(entries.iter().map(|e| e.name.as_slice())),
        Err(_) => match zip::ZipArchive::new(&mut *reader) {
            Ok(a) => super::torch::zip_kind_names(a.file_names_raw()),
            Err(_) => Format::Zip,
        },
    };
    (format, checked)
}

/// The verdict on a zip archive: its records checked (src/formats/zip_check.rs), then its
/// entries read through the central directory by the reader of its format.
fn scan_zip_file<R: Read + Seek>(mut reader: R, options: &ScanOptions) -> FileReport {
    let (format, checked) = zip_format(&mut reader, &options.limits);
    let policy = policy_for(format, options);
    let mut report = Report::new(format, &policy, options.limits);
    match checked {
        Err((kind, category, why)) => report.refuse(kind, category, why, "", None),
        Ok(_) if format == Format::Zip => report.incomplete(
            "not_understood",
            "a zip archive that is neither a torch checkpoint nor an npz",
            "",
            None,
        ),
        Ok(entries) => {
            if let Some(archive) = super::zip_check::open(reader, &entries, &mut report) {
                if format == Format::Npz {
                    super::numpy::scan_npz(archive, &mut report);
                } else {
                    super::torch::scan_zip(archive, &mut report);
                }
            }
        }
    }
    report.finish()
}

/// The verdict on one file's bytes: its format detected, its pickles checked under the
/// format's built-in policy (or `options.policy`), its structure checked.
pub fn scan_bytes(bytes: &[u8], options: &ScanOptions) -> FileReport {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return scan_zip_file(Cursor::new(bytes), options);
    }
    let format = detect(bytes);
    let policy = policy_for(format, options);
    let mut report = Report::new(format, &policy, options.limits);
    match format {
        Format::TorchLegacy => super::torch::scan_legacy(bytes, &mut report),
        Format::TorchTar => super::torch_tar::scan_tar(bytes, &mut report),
        Format::Npy => super::numpy::scan_npy(bytes, "", &mut report),
        Format::Joblib(c) => super::joblib::scan(bytes, c, &mut report),
        Format::Pickle => {
            report.pickle("", bytes, false);
        }
        // Zip formats are read above.
        Format::TorchZip | Format::TorchScript | Format::Npz | Format::Zip => {
            return scan_zip_file(Cursor::new(bytes), options);
        }
    }
    report.finish()
}

/// The verdict on a file read through `reader`: a zip archive (torch checkpoint, npz) is read
/// through its central directory, so only the directory and the pickles are read, never the
/// storages; any other file is read whole, up to `max_file_bytes` (over it: refused).
///
/// # Errors
/// The reader's I/O errors.
pub fn scan_reader<R: Read + Seek>(
    mut reader: R,
    max_file_bytes: u64,
    options: &ScanOptions,
) -> std::io::Result<FileReport> {
    let mut head = Vec::new();
    (&mut reader).take(4).read_to_end(&mut head)?;
    reader.seek(SeekFrom::Start(0))?;
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Ok(scan_zip_file(reader, options));
    }
    let mut bytes = Vec::new();
    reader
        .take(max_file_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_file_bytes {
        let format = detect(&bytes);
        let policy = Policy::strict();
        let mut report = Report::new(format, &policy, options.limits);
        report.refuse(
            "container_limit",
            "limit_exceeded",
            format!("a file of more than {max_file_bytes} bytes (max_file_bytes)"),
            "",
            None,
        );
        return Ok(report.finish());
    }
    Ok(scan_bytes(&bytes, options))
}

/// The report being made, with the policy and limits of the file.
pub(crate) struct Report<'p> {
    pub(crate) policy: &'p Policy,
    pub(crate) limits: ModelLimits,
    format: Format,
    refused: Vec<Finding>,
    /// The pickle refusals among `refused` (by index), kept so that [`Report::map_offsets`]
    /// can write their messages again with the mapped offset.
    errors: Vec<(usize, Error)>,
    incomplete: Vec<Finding>,
    globals: Vec<GlobalUse>,
    pickles: Vec<String>,
}

impl<'p> Report<'p> {
    /// A report on a file of `format`, checked under `policy`.
    pub(crate) fn new(format: Format, policy: &'p Policy, limits: ModelLimits) -> Report<'p> {
        Report {
            policy,
            limits,
            format,
            refused: Vec::new(),
            errors: Vec::new(),
            incomplete: Vec::new(),
            globals: Vec::new(),
            pickles: Vec::new(),
        }
    }

    /// Notes a refusal of the container (not of a pickle).
    pub(crate) fn refuse(
        &mut self,
        kind: &str,
        category: &'static str,
        message: impl Into<String>,
        entry: &str,
        offset: Option<u64>,
    ) {
        self.refused.push(Finding {
            kind: kind.to_owned(),
            category,
            message: message.into(),
            entry: entry.to_owned(),
            offset,
        });
    }

    /// Notes a part not understood.
    pub(crate) fn incomplete(
        &mut self,
        kind: &str,
        message: impl Into<String>,
        entry: &str,
        offset: Option<u64>,
    ) {
        self.incomplete.push(Finding {
            kind: kind.to_owned(),
            category: "incomplete",
            message: message.into(),
            entry: entry.to_owned(),
            offset,
        });
    }

    /// Notes a pickle's refusal.
    pub(crate) fn refuse_error(&mut self, entry: &str, e: &Error) {
        let category = match e.category() {
            Category::Malformed => "malformed",
            Category::Truncated => "truncated",
            Category::LimitExceeded => "limit_exceeded",
            Category::PolicyDenied => "policy_denied",
            Category::Io => "io",
        };
        self.errors.push((self.refused.len(), e.clone()));
        self.refused.push(Finding {
            kind: e.kind().name().to_owned(),
            category,
            message: e.to_string(),
            entry: entry.to_owned(),
            offset: Some(e.offset()),
        });
    }

    /// Takes in what a report made beside this one found (pickles of a part checked under
    /// another policy).
    pub(crate) fn absorb(&mut self, other: Report<'_>) {
        let base = self.refused.len();
        self.errors
            .extend(other.errors.into_iter().map(|(i, e)| (base + i, e)));
        self.refused.extend(other.refused);
        self.incomplete.extend(other.incomplete);
        self.globals.extend(other.globals);
        self.pickles.extend(other.pickles);
    }

    /// The limits of one pickle of the file: the policy's, with `max_input_bytes` at most
    /// [`ModelLimits::max_pickle_bytes`].
    pub(crate) fn pickle_limits(&self) -> crate::Limits {
        let mut limits = self.policy.limits;
        limits.max_input_bytes = limits.max_input_bytes.min(self.limits.max_pickle_bytes);
        limits
    }

    /// Lists the globals of one pickle named `entry` (offsets as the scan gives them), by the
    /// scan, and past its refusal by a listing pass over the opcodes. Returns the scan's
    /// result and, with `allow_trailing`, where the bytes after STOP start.
    pub(crate) fn list_globals(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
    ) -> (crate::Result<()>, usize) {
        let scan = Scanner::new(bytes, self.policy)
            .limits(self.pickle_limits())
            .allow_trailing(allow_trailing)
            .run();
        let mut seen: HashSet<u64> = HashSet::new();
        for g in &scan.globals {
            seen.insert(g.offset);
            self.globals.push(GlobalUse {
                entry: entry.to_owned(),
                runs_code: runs_code(&g.module, &g.name),
                module: g.module.clone(),
                name: g.name.clone(),
                offset: g.offset,
                allowed: g.allowed,
            });
        }
        if let Err(e) = &scan.result {
            for (module, name, offset) in globals_after(bytes, e.offset()) {
                if seen.insert(offset) {
                    let allowed = self.policy.find(&module, &name).is_some();
                    self.globals.push(GlobalUse {
                        entry: entry.to_owned(),
                        runs_code: runs_code(&module, &name),
                        module,
                        name,
                        offset,
                        allowed,
                    });
                }
            }
        }
        let end = scan.trailing.map_or(bytes.len(), |t| {
            usize::try_from(t.offset).unwrap_or(bytes.len())
        });
        (scan.result, end)
    }

    /// Notes that the pickle `entry` was checked.
    pub(crate) fn checked(&mut self, entry: &str) {
        self.pickles.push(entry.to_owned());
    }

    /// Checks one pickle: the scan (every global listed, going on past a refusal with a
    /// listing pass), then, when the scan accepts, the full build, whose document is handed
    /// to `then` for the container's own checks. With `allow_trailing`, bytes after STOP are
    /// left for the caller: the offset where they start is returned (the pickle's length).
    pub(crate) fn pickle_then(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
        then: impl FnOnce(&mut Self, &Document<'_>),
    ) -> Option<usize> {
        self.checked(entry);
        let (scanned, end) = self.list_globals(entry, bytes, allow_trailing);
        if let Err(e) = &scanned {
            self.refuse_error(entry, e);
            return None;
        }
        match crate::Decoder::new(bytes, self.policy)
            .limits(self.pickle_limits())
            .allow_trailing(allow_trailing)
            .decode()
        {
            Ok(doc) => then(self, &doc),
            Err(e) => {
                self.refuse_error(entry, &e);
                return None;
            }
        }
        Some(end)
    }

    /// [`Report::pickle_then`] with no container check of the document.
    pub(crate) fn pickle(
        &mut self,
        entry: &str,
        bytes: &[u8],
        allow_trailing: bool,
    ) -> Option<usize> {
        self.pickle_then(entry, bytes, allow_trailing, |_, _| {})
    }

    /// Maps every offset found so far (globals, findings) through `f`: a pickle checked with
    /// spans taken out reports offsets of the original. `f` never moves an offset back (the
    /// spans were taken out before it).
    pub(crate) fn map_offsets(&mut self, f: impl Fn(u64) -> u64) {
        for g in &mut self.globals {
            g.offset = f(g.offset);
        }
        for x in self.refused.iter_mut().chain(&mut self.incomplete) {
            x.offset = x.offset.map(&f);
        }
        // A pickle refusal's message names its offset: written again with the mapped one, so
        // that the message and the finding's offset agree.
        for (i, e) in &mut self.errors {
            let at = e.offset();
            *e = e.clone().shifted(f(at).saturating_sub(at));
            if let Some(x) = self.refused.get_mut(*i) {
                x.message = e.to_string();
            }
        }
    }

    pub(crate) fn finish(self) -> FileReport {
        let verdict = if !self.refused.is_empty() {
            Verdict::Refused
        } else if !self.incomplete.is_empty() {
            Verdict::Incomplete
        } else {
            Verdict::Clean
        };
        let mut all = self.refused.into_iter().chain(self.incomplete);
        let reason = all.next();
        FileReport {
            format: self.format,
            policy: self.policy.name.clone(),
            verdict,
            reason,
            findings: all.collect(),
            globals: self.globals,
            pickles: self.pickles,
        }
    }
}

/// Whether calling `module.name` is known to run code, start processes, touch files or the
/// network, or import modules: the globals every published pickle exploit uses. A warning
/// for people reading a report; the policy decides, and it allows none of these by default.
pub fn runs_code(module: &str, name: &str) -> bool {
    const MODULES: [&str; 22] = [
        "os",
        "posix",
        "nt",
        "subprocess",
        "pty",
        "runpy",
        "commands",
        "sys",
        "socket",
        "shutil",
        "importlib",
        "ctypes",
        "code",
        "pdb",
        "bdb",
        "timeit",
        "webbrowser",
        "marshal",
        "pickle",
        "_pickle",
        "types",
        "multiprocessing",
    ];
    const BUILTINS: [&str; 14] = [
        "eval",
        "exec",
        "execfile",
        "compile",
        "open",
        "getattr",
        "setattr",
        "delattr",
        "__import__",
        "apply",
        "input",
        "breakpoint",
        "globals",
        "vars",
    ];
    let top = module.split('.').next().unwrap_or(module);
    MODULES.contains(&top)
        || (matches!(module, "builtins" | "__builtin__") && BUILTINS.contains(&name))
        || (module == "torch.serialization" && name == "load")
        || (module == "numpy" && name == "load")
}
