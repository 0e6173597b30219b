//! What a file is (by its content) and its verdict: every pickle it holds checked under a
//! policy, every global it names listed with its offset, the container's own structure checked.
//!
//! A verdict is one of three ([`Verdict`]): `clean` only when every byte that a loader would
//! act on was understood and allowed; `refused` when something is malformed, over a limit, or
//! denied by the policy; `incomplete` when part of the file is not understood (an unknown zip
//! entry, TorchScript code, an unsupported compression), which is never reported clean.

use std::borrow::Cow;
use std::io::{Cursor, Read, Seek, SeekFrom};

use crate::policy::Policy;

use super::report::Report;
pub use super::severity::{global_severity, runs_code, Severity};
pub use super::sniff::Content;
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
    /// A plain pickle (or several one after another, as `pickle.dump` called again writes):
    /// content that starts with a PROTO header or parses to a STOP (`src/formats/sniff.rs`).
    Pickle,
    /// A safetensors file: no pickle, its header checked as its reader checks it.
    Safetensors,
    /// A file that carries no pickle any loader reads ([`Content`] says what it looks like):
    /// skipped.
    Other(Content),
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
            Format::Safetensors => "safetensors",
            Format::Other(c) => c.name(),
        }
    }

    /// The built-in policy a file of this format is checked under when none is given: `torch`
    /// for torch files (persistent ids resolved against the storages), `numpy` for npy and
    /// npz, and `model` for a plain pickle, compressed by joblib or not, so that the verdict on
    /// a pickle never depends on its container; `strict` for what holds no pickle.
    pub fn default_policy(self) -> &'static str {
        match self {
            Format::TorchZip | Format::TorchScript | Format::TorchLegacy | Format::TorchTar => {
                "torch"
            }
            Format::Npy | Format::Npz => "numpy",
            Format::Joblib(_) | Format::Pickle => "model",
            Format::Safetensors | Format::Other(_) => "strict",
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
/// Exhaustive on purpose: the verdicts are the scan's contract (and its exit codes), so a
/// new one must make every caller decide, not fall into a catch-all arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Not pickle-bearing ([`Format::Other`]): no loader reads a pickle from it, so it was not
    /// checked. Never counted as clean.
    Skipped,
    /// Every part a loader acts on was understood and allowed.
    Clean,
    /// Part of the file is not understood (never reported clean); nothing refused.
    Incomplete,
    /// Malformed, over a limit, or denied by the policy.
    Refused,
}

impl Verdict {
    /// `"skipped"`, `"clean"`, `"incomplete"` or `"refused"`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Skipped => "skipped",
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
    /// `decompress`, `container_limit`, `safetensors_header`, `python2_joblib`,
    /// `trailing_data` after the last pickle of a file, `not_understood`...).
    pub kind: String,
    /// `malformed`, `truncated`, `limit_exceeded`, `policy_denied`, `io` or `incomplete`.
    pub category: &'static str,
    /// What was found, for people.
    pub message: String,
    /// Where: the entry or pickle (as [`GlobalUse::entry`]).
    pub entry: String,
    /// The offset in that entry or pickle, when one applies.
    pub offset: Option<u64>,
    /// How bad a refusal is ([`Severity`]); `None` for a part not understood (`incomplete`).
    /// A refused global's is its own ([`global_severity`]).
    pub severity: Option<Severity>,
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
    /// How bad the refusal is, for a refused file: the worst of its refusals' and of every
    /// global it names that the policy refuses, those listed after the first refusal included
    /// ([`Severity`]). `None` for a file not refused.
    pub severity: Option<Severity>,
    /// The first refusal (for `refused`) or the first part not understood (`incomplete`).
    pub reason: Option<Finding>,
    /// Further findings after the first (every one that could be found).
    pub findings: Vec<Finding>,
    /// Every global the file's pickles name, in order, each with where it is.
    pub globals: Vec<GlobalUse>,
    /// The pickles checked (entries or places, as [`GlobalUse::entry`]).
    pub pickles: Vec<String>,
    /// Whether a pickle holds Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) with a
    /// byte above 0x7F, which a policy reading them as ASCII refuses (`invalid_ascii`), those
    /// after the first refusal included: a policy that reads the file needs
    /// `python2_str_encoding = "latin1"` (or `"bytes"`).
    pub python2_text: bool,
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
    /// Read every file that is no container (nor safetensors) as a plain pickle, as before
    /// content decided it: nothing is skipped, and a file that is no pickle is refused
    /// (`not_a_pickle`).
    pub all_as_pickle: bool,
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

    /// Reads every file that is no container as a plain pickle ([`ScanOptions::all_as_pickle`]).
    pub fn all_as_pickle(mut self, all: bool) -> ScanOptions {
        self.all_as_pickle = all;
        self
    }
}

/// What the first bytes of a file decide, and what must be read to decide the rest.
enum Class {
    /// A zip archive: read through its central directory.
    Zip,
    /// A safetensors file: its header read.
    Safetensors,
    /// A tar header first: its member names decide (the torch layout, or not pickle-bearing).
    Tar,
    /// Compressed data: what it decompresses to decides (a joblib pickle, or not).
    Compressed(Compression),
    /// The file is of this format (a plain pickle may still be a joblib one): read whole.
    Whole(Format),
    /// A parse of the start that ran out of bytes: read whole and parse again.
    Undecided,
    /// Not pickle-bearing.
    Other(Content),
}

/// What `head` (the whole file when `complete`) is, as far as it tells (module docs of
/// `src/formats/sniff.rs`). Containers are told by their magic; anything else is a plain
/// pickle only when its content is one, or with `all_as_pickle`.
fn classify(head: &[u8], complete: bool, all_as_pickle: bool) -> Class {
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Class::Zip;
    }
    // Before every other format: torch.load tries tarfile first on anything not a zip.
    if super::tar::is_tar(head) {
        return Class::Tar;
    }
    if head.starts_with(b"\x93NUMPY") {
        return Class::Whole(Format::Npy);
    }
    if let Some(c) = Compression::sniff(head) {
        return Class::Compressed(c);
    }
    if head.starts_with(b"ZF0x") {
        // joblib before 0.9.3: "ZF", the size in hex, then zlib data.
        return Class::Whole(Format::Joblib(Compression::Zlib));
    }
    if super::torch_legacy::is_legacy(head) {
        return Class::Whole(Format::TorchLegacy);
    }
    if super::safetensors_header::looks_like(head) {
        return Class::Safetensors;
    }
    if all_as_pickle {
        return Class::Whole(Format::Pickle);
    }
    match super::sniff::is_pickle(head, complete) {
        Some(true) => Class::Whole(Format::Pickle),
        Some(false) => Class::Other(super::sniff::content_of(head)),
        None => Class::Undecided,
    }
}

/// Tells what `bytes` holds from its content (for a zip, its entry names; for a tar, its
/// member names; for compressed data, what it decompresses to), as [`scan_bytes`] does.
pub fn detect(bytes: &[u8]) -> Format {
    detect_with(bytes, false)
}

fn detect_with(bytes: &[u8], all_as_pickle: bool) -> Format {
    match classify(bytes, true, all_as_pickle) {
        Class::Zip => zip_format(&mut Cursor::new(bytes), &ModelLimits::default()).0,
        Class::Safetensors => Format::Safetensors,
        Class::Tar => {
            let block = |at: u64| {
                let at = usize::try_from(at).ok()?;
                bytes.get(at..at.checked_add(512)?)?.try_into().ok()
            };
            if super::tar::torch_layout(block, ModelLimits::default().max_entries) {
                Format::TorchTar
            } else if super::sniff::is_pickle(bytes, true) == Some(true) {
                Format::Pickle
            } else {
                Format::Other(Content::Tar)
            }
        }
        Class::Compressed(c) => {
            if all_as_pickle || decompresses_to_pickle(Cursor::new(bytes), c) {
                Format::Joblib(c)
            } else {
                Format::Other(Content::Compressed)
            }
        }
        Class::Whole(Format::Pickle) if super::joblib::names_wrapper(bytes) => {
            Format::Joblib(Compression::None)
        }
        Class::Whole(f) => f,
        Class::Undecided => Format::Pickle,
        Class::Other(c) => Format::Other(c),
    }
}

/// Whether the compressed stream `reader` holds starts as a pickle (joblib writes one): a
/// PROTO header, or a parse to a STOP within its first [`super::sniff::PREFIX_BYTES`] (a
/// parse still going there counts as a pickle: the check decides).
fn decompresses_to_pickle(reader: impl Read, c: Compression) -> bool {
    let (out, ended) = super::decompress::prefix(reader, c, super::sniff::PREFIX_BYTES);
    super::sniff::is_pickle(&out, ended) != Some(false)
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
/// refused, from the names the zip crate lists (or another zip's), so that the refusal is
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
            Err(_) => Format::Other(Content::Zip),
        },
    };
    (format, checked)
}

/// The verdict on a zip archive: its records checked (src/formats/zip_check.rs), then its
/// entries read through the central directory by the reader of its format. A zip that is
/// neither a torch checkpoint nor an npz is skipped: no loader reads a pickle from it.
fn scan_zip_file<R: Read + Seek>(mut reader: R, options: &ScanOptions) -> FileReport {
    let (format, checked) = zip_format(&mut reader, &options.limits);
    let policy = policy_for(format, options);
    let mut report = Report::new(format, &policy, options.limits);
    match checked {
        Ok(_) if format == Format::Other(Content::Zip) => report.skip(),
        Err((kind, category, why)) => report.refuse(kind, category, why, "", None),
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

/// The verdict on one file's bytes: its format detected by content ([`detect`]), its pickles
/// checked under the format's built-in policy (or `options.policy`), its structure checked;
/// a file that carries no pickle skipped ([`Verdict::Skipped`]).
pub fn scan_bytes(bytes: &[u8], options: &ScanOptions) -> FileReport {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        return scan_zip_file(Cursor::new(bytes), options);
    }
    let format = detect_with(bytes, options.all_as_pickle);
    let policy = policy_for(format, options);
    let mut report = Report::new(format, &policy, options.limits);
    match format {
        Format::TorchLegacy => super::torch_legacy::scan_legacy(bytes, &mut report),
        Format::TorchTar => super::torch_tar::scan_tar(bytes, &mut report),
        Format::Npy => super::numpy::scan_npy(bytes, "", &mut report),
        Format::Joblib(c) => super::joblib::scan(bytes, c, &mut report),
        Format::Pickle => scan_pickles(bytes, &mut report),
        Format::Safetensors => {
            let n = super::safetensors_header::header_len(bytes).unwrap_or(0);
            let after = (bytes.len() as u64).saturating_sub(8);
            match usize::try_from(n).ok().filter(|&n| n as u64 <= after) {
                Some(n) => super::safetensors_header::check(
                    bytes.get(8..8 + n).unwrap_or_default(),
                    after - n as u64,
                    &mut report,
                ),
                None => report.refuse(
                    "safetensors_header",
                    "truncated",
                    format!("a header of {n} bytes in a file of {}", bytes.len()),
                    "header",
                    None,
                ),
            }
        }
        Format::Other(_) => report.skip(),
        // Zip formats are read above.
        Format::TorchZip | Format::TorchScript | Format::Npz => {
            return scan_zip_file(Cursor::new(bytes), options);
        }
    }
    report.finish()
}

/// A plain pickle file: one pickle, or several one after another (what `pickle.dump` called
/// again on one file writes; `pickle.load` called again reads each with a memo of its own),
/// each checked on its own. The first is the file's entry `""`; the next are `pickle N at
/// 0x..` with offsets from their start. Bytes after a STOP that are not a pickle are refused
/// (`trailing_data`).
fn scan_pickles(bytes: &[u8], report: &mut Report<'_>) {
    let mut pos = 0usize;
    let mut count = 1usize;
    loop {
        let rest = bytes.get(pos..).unwrap_or_default();
        let entry = if pos == 0 {
            String::new()
        } else {
            format!("pickle {count} at {pos:#x}")
        };
        let Some(end) = report.pickle(&entry, rest, true) else {
            return;
        };
        pos += end;
        if pos >= bytes.len() {
            return;
        }
        let after = bytes.get(pos..).unwrap_or_default();
        if super::sniff::is_pickle(after, true) != Some(true) {
            return report.refuse(
                "trailing_data",
                "malformed",
                format!(
                    "{} bytes after the STOP of pickle {count} are not a pickle",
                    after.len()
                ),
                &entry,
                Some(end as u64),
            );
        }
        count += 1;
    }
}

/// The verdict on a file read through `reader`, looking at its first bytes first: a zip
/// archive (torch checkpoint, npz) is read through its central directory, so only the
/// directory and the pickles are read, never the storages; a safetensors file through its
/// header; a file that carries no pickle ([`Format::Other`]) no further than it takes to tell
/// (its first 4 KiB, or 64 KiB when a parse of its opcodes runs past them; a tar's headers;
/// the start of what compressed data decompresses to);
/// any other file is read whole, up to `max_file_bytes` (over it: refused).
///
/// # Errors
/// The reader's I/O errors.
pub fn scan_reader<R: Read + Seek>(
    mut reader: R,
    max_file_bytes: u64,
    options: &ScanOptions,
) -> std::io::Result<FileReport> {
    let len = reader.seek(SeekFrom::End(0))?;
    reader.seek(SeekFrom::Start(0))?;
    // The first 4 KiB tell most files; a parse that runs past them reads up to 64 KiB.
    let mut head = Vec::new();
    (&mut reader)
        .take(super::sniff::SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    let mut complete = head.len() as u64 >= len;
    let mut class = classify(&head, complete, options.all_as_pickle);
    if matches!(class, Class::Undecided) && !complete {
        (&mut reader)
            .take((super::sniff::PREFIX_BYTES - head.len()) as u64)
            .read_to_end(&mut head)?;
        complete = head.len() as u64 >= len;
        class = classify(&head, complete, options.all_as_pickle);
    }
    let skipped = |c: Content| {
        let policy = Policy::strict();
        let mut report = Report::new(Format::Other(c), &policy, options.limits);
        report.skip();
        report.finish()
    };
    match class {
        Class::Zip => {
            reader.seek(SeekFrom::Start(0))?;
            return Ok(scan_zip_file(reader, options));
        }
        Class::Safetensors => return scan_safetensors(reader, len, options),
        Class::Tar if !complete => {
            let mut block = |at: u64| -> Option<[u8; 512]> {
                let mut b = [0u8; 512];
                reader.seek(SeekFrom::Start(at)).ok()?;
                reader.read_exact(&mut b).ok()?;
                Some(b)
            };
            let torch = super::tar::torch_layout(&mut block, options.limits.max_entries);
            if !torch && super::sniff::is_pickle(&head, false) == Some(false) {
                return Ok(skipped(Content::Tar));
            }
        }
        Class::Compressed(c) if !complete && !options.all_as_pickle => {
            reader.seek(SeekFrom::Start(0))?;
            if !decompresses_to_pickle(&mut reader, c) {
                return Ok(skipped(Content::Compressed));
            }
        }
        Class::Other(c) if !complete => return Ok(skipped(c)),
        _ => {}
    }
    let mut bytes = head;
    if !complete {
        reader.seek(SeekFrom::Start(bytes.len() as u64))?;
        reader
            .take(
                max_file_bytes
                    .saturating_add(1)
                    .saturating_sub(bytes.len() as u64),
            )
            .read_to_end(&mut bytes)?;
    }
    if bytes.len() as u64 > max_file_bytes {
        let format = detect_with(&bytes, options.all_as_pickle);
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

/// A safetensors file of `len` bytes read through its header only.
fn scan_safetensors<R: Read + Seek>(
    mut reader: R,
    len: u64,
    options: &ScanOptions,
) -> std::io::Result<FileReport> {
    let policy = policy_for(Format::Safetensors, options);
    let mut report = Report::new(Format::Safetensors, &policy, options.limits);
    let mut n = [0u8; 8];
    reader.seek(SeekFrom::Start(0))?;
    reader.read_exact(&mut n)?;
    let n = u64::from_le_bytes(n);
    let after = len.saturating_sub(8);
    if n > after {
        report.refuse(
            "safetensors_header",
            "truncated",
            format!("a header of {n} bytes in a file of {len}"),
            "header",
            None,
        );
        return Ok(report.finish());
    }
    // `looks_like` bounded n by the reader's 100,000,000 bytes.
    let mut header = Vec::new();
    (&mut reader).take(n).read_to_end(&mut header)?;
    super::safetensors_header::check(&header, after - n, &mut report);
    Ok(report.finish())
}
