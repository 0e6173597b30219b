//! torch checkpoints: the zip format of `torch.save` (torch 1.6 and later; also TorchScript's
//! `torch.jit.save` archives) and the legacy format before it, as `torch/serialization.py`
//! writes them.
//!
//! Zip: one top folder `<archive>/` holding `data.pkl` (the object, whose tensors refer to
//! their storages by persistent id `('storage', storage_type, key, location, numel)`),
//! `data/<key>` (each storage's raw bytes), `byteorder` (`little` or `big`), `version`,
//! `.format_version`, `.storage_alignment`, `.data/version` and `.data/serialization_id`.
//! TorchScript archives add `constants.pkl`, `code/`, `constants/`, `extra/`: the pickles are
//! checked, but TorchScript code is not understood, so such a file is never clean.
//!
//! Legacy: five pickles one after another (the magic number 0x1950a86a20f9469cfc6c, the
//! protocol version 1001, `sys_info`, the object, the list of storage keys), then for each key
//! the storage: its element count (8 bytes, little-endian) and its bytes.
//!
//! Each persistent id is checked against what the file holds: a tuple of that shape, a storage
//! type the policy allows and whose element size is known, a key naming a storage that exists,
//! `numel x itemsize` equal to the storage's size, one type and size per key, and every tensor
//! built on it (`torch._utils._rebuild_tensor`, `_v2`, `_v3`, `_rebuild_qtensor`) inside it.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek};

use crate::value::{Document, NodeId, Value};

use super::container::Format;
use super::report::Report;

/// The magic number the legacy format starts with (`torch/serialization.py` `MAGIC_NUMBER`).
const LEGACY_MAGIC: u128 = 0x1950a86a20f9469cfc6c;

/// The legacy format's protocol version (`PROTOCOL_VERSION`).
const LEGACY_PROTOCOL: i64 = 1001;

/// A legacy file starts with the pickle of its magic number: PROTO 2, LONG1 of 10 bytes.
const LEGACY_START: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// Whether `bytes` starts as a legacy torch file does.
pub(crate) fn is_legacy(bytes: &[u8]) -> bool {
    bytes.starts_with(LEGACY_START)
}

/// The element size of a storage type (module, name) as torch names them, and whether its
/// `numel` counts bytes (`UntypedStorage`). From `torch/storage.py` (`_dtype_to_storage_type_map`)
/// and `torch._utils._element_size`.
pub fn storage_itemsize(module: &str, name: &str) -> Option<u64> {
    if !matches!(module, "torch" | "torch.cuda") {
        return (module == "torch.storage" && name == "UntypedStorage").then_some(1);
    }
    Some(match name {
        "DoubleStorage" | "LongStorage" | "ComplexFloatStorage" => 8,
        "FloatStorage" | "IntStorage" | "QInt32Storage" => 4,
        "HalfStorage" | "BFloat16Storage" | "ShortStorage" => 2,
        "CharStorage" | "ByteStorage" | "BoolStorage" | "QUInt8Storage" | "QInt8Storage"
        | "QUInt4x2Storage" | "QUInt2x4Storage" => 1,
        "ComplexDoubleStorage" => 16,
        _ => return None,
    })
}

/// The dtype name (as `torch.<name>`) a typed storage type holds.
pub fn storage_dtype(name: &str) -> Option<&'static str> {
    Some(match name {
        "DoubleStorage" => "float64",
        "FloatStorage" => "float32",
        "HalfStorage" => "float16",
        "BFloat16Storage" => "bfloat16",
        "LongStorage" => "int64",
        "IntStorage" => "int32",
        "ShortStorage" => "int16",
        "CharStorage" => "int8",
        "ByteStorage" => "uint8",
        "BoolStorage" => "bool",
        "ComplexFloatStorage" => "complex64",
        "ComplexDoubleStorage" => "complex128",
        "QUInt8Storage" => "quint8",
        "QInt8Storage" => "qint8",
        "QInt32Storage" => "qint32",
        "QUInt4x2Storage" => "quint4x2",
        "QUInt2x4Storage" => "quint2x4",
        _ => return None,
    })
}

/// The element size of a dtype named `torch.<name>` (sub-byte dtypes such as `int4` have none).
pub fn dtype_itemsize(name: &str) -> Option<u64> {
    Some(match name {
        "float64" | "int64" | "uint64" | "complex64" => 8,
        "float32" | "int32" | "uint32" | "complex32" | "qint32" => 4,
        "float16" | "bfloat16" | "int16" | "uint16" | "bits16" => 2,
        "int8" | "uint8" | "bool" | "qint8" | "quint8" | "quint4x2" | "quint2x4" | "bits8"
        | "bits1x8" | "bits2x4" | "bits4x2" | "float8_e4m3fn" | "float8_e4m3fnuz"
        | "float8_e5m2" | "float8_e5m2fnuz" | "float8_e8m0fnu" | "float4_e2m1fn_x2" => 1,
        "complex128" => 16,
        _ => return None,
    })
}

/// What a zip archive is from its entry names: a torch checkpoint (an entry
/// `<top>/data.pkl`), a TorchScript archive (`<top>/constants.pkl` too), an npz (every entry a
/// `.npy`), or another zip.
pub(crate) fn zip_kind_names<'a>(names: impl Iterator<Item = &'a [u8]>) -> Format {
    let names: Vec<&[u8]> = names.collect();
    let npy = names.iter().any(|n| n.ends_with(b".npy"));
    let has = |suffix: &[u8]| {
        names.iter().any(|n| {
            n.ends_with(suffix)
                && n.len() > suffix.len()
                && n.iter().filter(|&&b| b == b'/').count() == 1
        })
    };
    if has(b"/constants.pkl") {
        Format::TorchScript
    } else if has(b"/data.pkl") {
        Format::TorchZip
    } else if npy {
        // An npz: `numpy.load` reads any zip as one, and its scan refuses what is not a
        // member `savez` writes.
        Format::Npz
    } else {
        Format::Other(super::container::Content::Zip)
    }
}

/// One storage of a checkpoint: its key and size in bytes.
struct Storages {
    sizes: HashMap<String, u64>,
}

/// Checks a torch zip checkpoint (or TorchScript archive), opened by
/// [`super::zip_check::open`]. Reads the central directory and the pickles, never the storages
/// (their sizes come from the directory).
pub(crate) fn scan_zip<R: Read + Seek>(mut archive: zip::ZipArchive<R>, report: &mut Report<'_>) {
    let names: Vec<String> = archive
        .file_names_raw()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    let Some(top) = names
        .first()
        .and_then(|n| n.split_once('/'))
        .map(|(t, _)| t.to_owned())
    else {
        return report.refuse("zip_layout", "malformed", "no top folder", "", None);
    };
    let prefix = format!("{top}/");
    let mut storages = Storages {
        sizes: HashMap::new(),
    };
    let mut pickles = Vec::new();
    let mut script = false;
    for (i, name) in names.iter().enumerate() {
        let Some(rest) = name.strip_prefix(&prefix) else {
            return report.refuse(
                "zip_layout",
                "malformed",
                format!("entry {name:?} is outside the archive's one top folder {top:?}"),
                name,
                None,
            );
        };
        let (size, method, encrypted) = match archive.by_index_raw(i) {
            Ok(f) => (f.size(), f.compression(), f.encrypted()),
            Err(e) => {
                return report.refuse("zip_malformed", "malformed", e.to_string(), name, None)
            }
        };
        if encrypted {
            return report.refuse(
                "zip_malformed",
                "malformed",
                "an encrypted entry",
                name,
                None,
            );
        }
        // torch writes every record stored (`caffe2/serialize/inline_container.cc`
        // `PyTorchStreamWriter::writeRecord`: no compression, data aligned for mmap; what
        // `torch.save` wrote in torch 1.6 to 2.15 lists method 0 for every entry). A
        // compressed entry is not what the writer makes, and a deflated storage makes
        // `torch.load` allocate its whole size from a small file (1 GB from 1 MB): refused.
        if method != zip::CompressionMethod::Stored {
            report.refuse(
                "zip_entry_compressed",
                "malformed",
                format!(
                    "a {method:?} entry: torch writes every record stored, and a compressed \
                     storage costs torch.load its whole size"
                ),
                name,
                None,
            );
            continue;
        }
        match rest {
            "data.pkl" | "constants.pkl" => pickles.push((i, name.clone())),
            "byteorder" => match read_entry(&mut archive, i, 16, report, name).as_deref() {
                Some(b"little" | b"big") => {}
                Some(other) => report.refuse(
                    "zip_layout",
                    "malformed",
                    format!(
                        "byteorder is {:?}, not little or big",
                        String::from_utf8_lossy(other)
                    ),
                    name,
                    None,
                ),
                None => return,
            },
            "version" | ".format_version" | ".storage_alignment" | ".data/version" => {
                match read_entry(&mut archive, i, 32, report, name) {
                    Some(v) if is_decimal_line(&v) => {}
                    Some(_) => report.refuse(
                        "zip_layout",
                        "malformed",
                        "not a decimal number",
                        name,
                        None,
                    ),
                    None => return,
                }
            }
            ".data/serialization_id" => {}
            _ => {
                if let Some(key) = rest.strip_prefix("data/") {
                    storages.sizes.insert(key.to_owned(), size);
                } else if rest.starts_with("code/")
                    || rest.starts_with("constants/")
                    || rest.starts_with("extra/")
                    || rest.starts_with(".data/")
                {
                    script = true;
                } else {
                    report.incomplete(
                        "not_understood",
                        "an entry a torch checkpoint does not have",
                        name,
                        None,
                    );
                }
            }
        }
    }
    if script {
        report.incomplete(
            "not_understood",
            "TorchScript code (code/, constants/, extra/) is not read: loading it runs it",
            &prefix,
            None,
        );
    }
    if !pickles.iter().any(|(_, n)| n.ends_with("/data.pkl")) {
        report.refuse("zip_layout", "malformed", "no data.pkl", &prefix, None);
    }
    for (i, name) in pickles {
        let Some(data) = read_entry(
            &mut archive,
            i,
            report.limits.max_pickle_bytes,
            report,
            &name,
        ) else {
            return;
        };
        report.pickle_then(&name, &data, false, |report, doc| {
            check_storages(doc, &storages, false, &name, report);
        });
    }
}

fn is_decimal_line(v: &[u8]) -> bool {
    let t = v.strip_suffix(b"\n").unwrap_or(v);
    !t.is_empty() && t.iter().all(u8::is_ascii_digit)
}

/// Reads entry `i` whole, within `max` bytes (its declared size) and the decompression bounds.
pub(crate) fn read_entry<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    i: usize,
    max: u64,
    report: &mut Report<'_>,
    name: &str,
) -> Option<Vec<u8>> {
    let limits = report.limits;
    let file = match archive.by_index(i) {
        Ok(f) => f,
        Err(e) => {
            report.refuse("zip_malformed", "malformed", e.to_string(), name, None);
            return None;
        }
    };
    if file.size() > max {
        report.refuse(
            "container_limit",
            "limit_exceeded",
            format!(
                "{} bytes, more than the {max} this entry may have",
                file.size()
            ),
            name,
            None,
        );
        return None;
    }
    let compressed = file.compressed_size();
    let mut bounded = limits;
    bounded.max_decompressed_bytes = bounded.max_decompressed_bytes.min(max);
    match super::decompress::read_bounded(file, compressed, &bounded) {
        Ok(v) => Some(v),
        Err(
            super::decompress::Failure::Malformed(why) | super::decompress::Failure::Trailing(why),
        ) => {
            report.refuse("zip_malformed", "malformed", why, name, None);
            None
        }
        Err(super::decompress::Failure::Limit(why)) => {
            report.refuse("container_limit", "limit_exceeded", why, name, None);
            None
        }
    }
}

/// A persistent id read back: `('storage', type, key, location, numel[, view_metadata])`.
struct StorageRef<'d> {
    key: &'d str,
    type_name: String,
    itemsize: u64,
    numel: u64,
}

/// Reads a persistent id as a storage reference, or says why it is not one.
fn storage_ref<'d>(
    doc: &'d Document<'_>,
    pid: NodeId,
    legacy: bool,
) -> Result<StorageRef<'d>, String> {
    let Some(Value::Tuple(items)) = doc.get(pid) else {
        return Err("a persistent id that is not a tuple".into());
    };
    let want = if legacy { 6 } else { 5 };
    if items.len() != want {
        return Err(format!(
            "a persistent id of {} items, not {want}",
            items.len()
        ));
    }
    let item = |i: usize| items.get(i).and_then(|&id| doc.get(id));
    match item(0) {
        Some(Value::Str(s)) if s.as_bytes() == b"storage" => {}
        _ => return Err("a persistent id whose first item is not 'storage'".into()),
    }
    let (module, name) = match item(1) {
        Some(Value::Global(g)) => (g.module.to_string(), g.name.to_string()),
        _ => return Err("a persistent id whose storage type is not a global".into()),
    };
    let itemsize = storage_itemsize(&module, &name)
        .ok_or_else(|| format!("storage type {module}.{name} has no known element size"))?;
    let key = match item(2) {
        Some(Value::Str(s)) => s.as_str().ok_or("a storage key that is not UTF-8")?,
        _ => return Err("a storage key that is not a str".into()),
    };
    if !matches!(item(3), Some(Value::Str(_))) {
        return Err("a storage location that is not a str".into());
    }
    let numel = match item(4) {
        Some(Value::Int(n)) => u64::try_from(n).map_err(|_| "a negative numel".to_owned())?,
        _ => return Err("a numel that is not an int of 64 bits".into()),
    };
    if legacy && !matches!(item(5), Some(Value::None)) {
        return Err("a legacy storage view (view_metadata) is not read".into());
    }
    Ok(StorageRef {
        key,
        type_name: format!("{module}.{name}"),
        itemsize,
        numel,
    })
}

/// The checks of the module docs over a checkpoint's document: each persistent id against the
/// storages, each tensor against its storage. With `legacy`, storage sizes are what the
/// legacy file's storage records declare.
fn check_storages(
    doc: &Document<'_>,
    storages: &Storages,
    legacy: bool,
    entry: &str,
    report: &mut Report<'_>,
) {
    // key -> (type, numel): one per key.
    let mut seen: HashMap<&str, (String, u64)> = HashMap::new();
    // pid node -> elements of the storage, for the views.
    let mut elements: HashMap<NodeId, (u64, u64)> = HashMap::new();
    for &pid in doc.persistent_ids() {
        let r = match storage_ref(doc, pid, legacy) {
            Ok(r) => r,
            Err(why) => return report.refuse("persistent_id", "policy_denied", why, entry, None),
        };
        let Some(&size) = storages.sizes.get(r.key) else {
            return report.refuse(
                "storage_missing",
                "malformed",
                format!("storage {:?} is not in the file", r.key),
                entry,
                None,
            );
        };
        let bytes = r.numel.checked_mul(r.itemsize);
        if bytes != Some(size) {
            return report.refuse(
                "storage_size_mismatch",
                "malformed",
                format!(
                    "storage {:?}: {} elements of {} x {} bytes, but the file holds {size} bytes",
                    r.key, r.numel, r.type_name, r.itemsize
                ),
                entry,
                None,
            );
        }
        match seen.get(r.key) {
            Some((t, n)) if *t != r.type_name || *n != r.numel => {
                return report.refuse(
                    "storage_size_mismatch",
                    "malformed",
                    format!("storage {:?} is named with two types or sizes", r.key),
                    entry,
                    None,
                );
            }
            Some(_) => {}
            None => {
                seen.insert(r.key, (r.type_name.clone(), r.numel));
            }
        }
        elements.insert(pid, (size, r.itemsize));
    }
    let referenced: HashSet<NodeId> = elements.keys().copied().collect();
    if let Err(why) = check_views(doc, &elements, &referenced) {
        report.refuse("view_out_of_storage", "malformed", why, entry, None);
    }
}

/// Every `_rebuild_tensor*` and `_rebuild_qtensor` call of the document: its storage a
/// persistent id, its offset, size and stride non-negative ints, its extent inside the storage.
pub(crate) fn check_views(
    doc: &Document<'_>,
    storages: &HashMap<NodeId, (u64, u64)>,
    referenced: &HashSet<NodeId>,
) -> Result<(), String> {
    for t in tensors_of(doc) {
        let t = t?;
        if !referenced.contains(&t.storage) {
            return Err("a tensor whose storage is not a persistent id".into());
        }
        let (bytes, storage_itemsize) = storages.get(&t.storage).copied().unwrap_or((0, 1));
        let itemsize = t.itemsize.unwrap_or(storage_itemsize);
        if itemsize == 0 {
            return Err("a tensor of a dtype with no known element size".into());
        }
        let capacity = bytes / itemsize;
        if let Some(end) = extent(t.offset, &t.shape, &t.stride) {
            if end > capacity {
                return Err(format!(
                    "a tensor at storage offset {} with shape {:?} and stride {:?} reaches \
                     element {end} of a storage of {capacity}",
                    t.offset, t.shape, t.stride
                ));
            }
        } else {
            return Err("a tensor whose extent overflows 64 bits".into());
        }
    }
    Ok(())
}

/// One past the last element a view reaches (`offset` when it has no element), or `None` on
/// overflow.
pub(crate) fn extent(offset: u64, shape: &[u64], stride: &[u64]) -> Option<u64> {
    if shape.contains(&0) {
        return Some(offset);
    }
    let mut last = offset;
    for (&n, &s) in shape.iter().zip(stride) {
        last = last.checked_add(n.checked_sub(1)?.checked_mul(s)?)?;
    }
    last.checked_add(1)
}

/// A tensor call found in a document.
pub(crate) struct TensorCall {
    /// The call's record node.
    pub(crate) node: NodeId,
    pub(crate) storage: NodeId,
    pub(crate) offset: u64,
    pub(crate) shape: Vec<u64>,
    pub(crate) stride: Vec<u64>,
    /// The dtype's element size when the call names the dtype (`_rebuild_tensor_v3`).
    pub(crate) itemsize: Option<u64>,
    pub(crate) dtype: Option<String>,
}

/// The `_rebuild_tensor*` / `_rebuild_qtensor` calls of a document, each read (or why not).
/// An explicit-stack walk over every node reachable from the roots, each visited once.
pub(crate) fn tensors_of(doc: &Document<'_>) -> Vec<Result<TensorCall, String>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack: Vec<NodeId> = doc.roots().to_vec();
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Some(v) = doc.get(id) else { continue };
        v.for_each_child(|c| stack.push(c));
        if let Value::Object(o) = v {
            let Some(Value::Global(g)) = doc.get(o.callable) else {
                continue;
            };
            if g.module != "torch._utils" {
                continue;
            }
            let v3 = g.name == "_rebuild_tensor_v3";
            if !matches!(
                &*g.name,
                "_rebuild_tensor"
                    | "_rebuild_tensor_v2"
                    | "_rebuild_tensor_v3"
                    | "_rebuild_qtensor"
            ) {
                continue;
            }
            out.push(read_tensor_call(doc, id, o.args, v3));
        }
    }
    out
}

fn read_tensor_call(
    doc: &Document<'_>,
    node: NodeId,
    args: NodeId,
    v3: bool,
) -> Result<TensorCall, String> {
    let Some(Value::Tuple(a)) = doc.get(args) else {
        return Err("tensor arguments that are not a tuple".into());
    };
    let arg = |i: usize| a.get(i).and_then(|&id| doc.get(id));
    let storage = *a.first().ok_or("a tensor call without arguments")?;
    let offset = match arg(1) {
        Some(Value::Int(n)) => {
            u64::try_from(n).map_err(|_| "a negative storage offset".to_owned())?
        }
        _ => return Err("a storage offset that is not an int".into()),
    };
    let ints = |i: usize, what: &str| -> Result<Vec<u64>, String> {
        let items = match arg(i) {
            Some(Value::Tuple(items)) => items,
            // torch.Size((..)) is a record of torch.Size over a tuple.
            Some(Value::Object(o)) => match doc.get(o.args) {
                Some(Value::Tuple(outer)) => match outer.first().and_then(|&id| doc.get(id)) {
                    Some(Value::Tuple(items) | Value::List(items)) => items,
                    _ => return Err(format!("a tensor {what} that is not a tuple of ints")),
                },
                _ => return Err(format!("a tensor {what} that is not a tuple of ints")),
            },
            _ => return Err(format!("a tensor {what} that is not a tuple of ints")),
        };
        items
            .iter()
            .map(|&id| match doc.get(id) {
                Some(Value::Int(n)) => {
                    u64::try_from(n).map_err(|_| format!("a negative {what} item"))
                }
                _ => Err(format!("a tensor {what} item that is not an int")),
            })
            .collect()
    };
    let shape = ints(2, "size")?;
    let stride = ints(3, "stride")?;
    if shape.len() != stride.len() {
        return Err("a tensor whose size and stride differ in length".into());
    }
    let (itemsize, dtype) = if v3 {
        match arg(6) {
            Some(Value::Global(g)) if g.module == "torch" => {
                let size = dtype_itemsize(&g.name)
                    .ok_or_else(|| format!("dtype torch.{} has no known element size", g.name))?;
                (Some(size), Some(g.name.to_string()))
            }
            _ => return Err("a _rebuild_tensor_v3 whose dtype is not a torch dtype".into()),
        }
    } else {
        (None, None)
    };
    Ok(TensorCall {
        node,
        storage,
        offset,
        shape,
        stride,
        itemsize,
        dtype,
    })
}

/// Checks a legacy torch file: its five pickles in order, then its storages.
pub(crate) fn scan_legacy(bytes: &[u8], report: &mut Report<'_>) {
    let data = crate::Policy::data();
    let mut pos = 0usize;
    // magic number, protocol version, sys_info: plain data under the `data` policy.
    for (i, what) in ["magic number", "protocol version", "sys_info"]
        .iter()
        .enumerate()
    {
        let entry = format!("pickle {} ({what})", i + 1);
        let rest = bytes.get(pos..).unwrap_or_default();
        let mut ok = true;
        let mut sub = Report::new(Format::TorchLegacy, &data, report.limits);
        let end = sub.pickle_then(&entry, rest, true, |_, doc| {
            let v = doc.root().and_then(|r| doc.get(r));
            ok = match i {
                0 => matches!(v, Some(Value::BigInt(b)) if b == &num_bigint::BigInt::from(LEGACY_MAGIC)),
                1 => matches!(v, Some(Value::Int(LEGACY_PROTOCOL))),
                _ => matches!(v, Some(Value::Dict(_))),
            };
        });
        report.absorb(sub);
        let Some(end) = end else { return };
        if !ok {
            return report.refuse(
                "legacy_layout",
                "malformed",
                format!("not the {what} torch writes"),
                &entry,
                None,
            );
        }
        pos += end;
    }
    let object = bytes.get(pos..).unwrap_or_default();
    let mut pids: Vec<(String, u64, u64)> = Vec::new();
    let entry = "pickle 4 (object)".to_owned();
    let end = report.pickle_then(&entry, object, true, |_, doc| {
        for &pid in doc.persistent_ids() {
            if let Ok(r) = storage_ref(doc, pid, true) {
                pids.push((r.key.to_owned(), r.numel, r.itemsize));
            }
        }
    });
    let Some(end) = end else { return };
    pos += end;
    // The storage keys: a list of str.
    let mut keys: Vec<String> = Vec::new();
    let entry_keys = "pickle 5 (storage keys)";
    let mut sub = Report::new(Format::TorchLegacy, &data, report.limits);
    let end = sub.pickle_then(
        entry_keys,
        bytes.get(pos..).unwrap_or_default(),
        true,
        |_, doc| {
            if let Some(Value::List(items)) = doc.root().and_then(|r| doc.get(r)) {
                for &k in items {
                    if let Some(Value::Str(s)) = doc.get(k) {
                        keys.push(s.as_str().unwrap_or_default().to_owned());
                    }
                }
            }
        },
    );
    report.absorb(sub);
    let Some(end) = end else { return };
    pos += end;
    // `_legacy_save` writes `sorted(serialized_storages.keys())`: every storage the object
    // names, once, in order (torch/serialization.py). torch.load reads a storage again for a
    // key listed twice, and leaves one never listed empty: neither is what the writer makes.
    let mut named: Vec<&str> = pids.iter().map(|(k, _, _)| k.as_str()).collect();
    named.sort_unstable();
    named.dedup();
    if keys.windows(2).any(|w| matches!(w, [a, b] if a >= b))
        || keys.iter().map(String::as_str).ne(named.iter().copied())
    {
        return report.refuse(
            "legacy_layout",
            "malformed",
            "the storage keys are not the sorted keys of the storages the object names, each once",
            entry_keys,
            None,
        );
    }
    // The storages, in key order: numel (8 bytes LE), then numel x itemsize bytes.
    let itemsize_of: HashMap<&str, u64> = pids.iter().map(|(k, _, s)| (k.as_str(), *s)).collect();
    let mut sizes = HashMap::new();
    for key in &keys {
        let at = pos as u64;
        let Some(&itemsize) = itemsize_of.get(key.as_str()) else {
            return report.refuse(
                "storage_missing",
                "malformed",
                format!("storage key {key:?} is named by no persistent id"),
                "storages",
                Some(at),
            );
        };
        let Some(count) = bytes.get(pos..pos + 8) else {
            return report.refuse(
                "storage_size_mismatch",
                "truncated",
                format!("storage {key:?}: the file ends before its size"),
                "storages",
                Some(at),
            );
        };
        let mut n = [0u8; 8];
        n.copy_from_slice(count);
        let numel = u64::from_le_bytes(n);
        let Some(len) = numel
            .checked_mul(itemsize)
            .and_then(|l| usize::try_from(l).ok())
        else {
            return report.refuse(
                "storage_size_mismatch",
                "malformed",
                format!("storage {key:?}: {numel} elements overflow"),
                "storages",
                Some(at),
            );
        };
        pos += 8;
        if bytes.len().saturating_sub(pos) < len {
            return report.refuse("storage_size_mismatch", "truncated", format!("storage {key:?}: {numel} elements of {itemsize} bytes, past the end of the file"), "storages", Some(at));
        }
        pos += len;
        sizes.insert(key.clone(), numel * itemsize);
    }
    if pos != bytes.len() {
        report.incomplete(
            "not_understood",
            format!("{} bytes after the last storage", bytes.len() - pos),
            "storages",
            Some(pos as u64),
        );
    }
    // Now the storage checks of the object pickle, against the sizes the file declares.
    let storages = Storages { sizes };
    let limits = report.limits;
    let policy = report.policy;
    let mut check = Report::new(Format::TorchLegacy, policy, limits);
    if let Ok(doc) = crate::Decoder::new(object, policy)
        .limits(policy.limits)
        .allow_trailing(true)
        .decode()
    {
        check_storages(&doc, &storages, true, &entry, &mut check);
    }
    report.absorb(check);
}

/// Where a legacy file's pickle of the object is, and each storage's bytes, by key, as
/// `_legacy_load` reads them (each record: numel, 8 bytes little-endian, then its bytes), for
/// a file [`scan_legacy`] found clean (`None` for any other). `policy` is torch's.
pub(crate) fn legacy_layout(
    bytes: &[u8],
    policy: &crate::Policy,
) -> Option<(
    std::ops::Range<usize>,
    HashMap<String, std::ops::Range<usize>>,
)> {
    let data = crate::Policy::data();
    let end_of = |at: usize, policy: &crate::Policy| -> Option<usize> {
        let rest = bytes.get(at..)?;
        let scan = crate::Scanner::new(rest, policy).allow_trailing(true).run();
        scan.result.ok()?;
        let len = scan
            .trailing
            .map_or(Some(rest.len()), |t| usize::try_from(t.offset).ok())?;
        at.checked_add(len)
    };
    let mut pos = 0;
    for _ in 0..3 {
        pos = end_of(pos, &data)?;
    }
    let object = pos..end_of(pos, policy)?;
    let doc = crate::Decoder::new(bytes.get(object.clone())?, policy)
        .decode()
        .ok()?;
    let mut itemsize: HashMap<String, u64> = HashMap::new();
    for &pid in doc.persistent_ids() {
        let r = storage_ref(&doc, pid, true).ok()?;
        itemsize.insert(r.key.to_owned(), r.itemsize);
    }
    pos = object.end;
    let keys_end = end_of(pos, &data)?;
    let keys_doc = crate::Decoder::new(bytes.get(pos..keys_end)?, &data)
        .decode()
        .ok()?;
    let Some(Value::List(items)) = keys_doc.root().and_then(|r| keys_doc.get(r)) else {
        return None;
    };
    pos = keys_end;
    let mut ranges = HashMap::new();
    for &k in items {
        let Some(Value::Str(s)) = keys_doc.get(k) else {
            return None;
        };
        let key = s.as_str()?.to_owned();
        let numel = u64::from_le_bytes(bytes.get(pos..pos.checked_add(8)?)?.try_into().ok()?);
        let len = usize::try_from(numel.checked_mul(*itemsize.get(&key)?)?).ok()?;
        let start = pos + 8;
        let end = start.checked_add(len).filter(|&e| e <= bytes.len())?;
        ranges.insert(key, start..end);
        pos = end;
    }
    Some((object, ranges))
}
