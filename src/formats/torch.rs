//! torch checkpoints: the zip format of `torch.save` (torch 1.6 and later; also TorchScript's
//! `torch.jit.save` archives), as `torch/serialization.py` writes it, and the storage checks
//! the legacy format (`src/formats/torch_legacy.rs`) shares.
//!
//! Zip: one top folder `<archive>/` holding `data.pkl` (the object, whose tensors refer to
//! their storages by persistent id `('storage', storage_type, key, location, numel)`),
//! `data/<key>` (each storage's raw bytes), `byteorder` (`little` or `big`), `version`,
//! `.format_version`, `.storage_alignment`, `.data/version` and `.data/serialization_id`.
//! TorchScript archives add `constants.pkl`, `code/`, `constants/`, `extra/`: the pickles are
//! checked, but TorchScript code is not understood, so such a file is never clean.
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
pub(crate) struct Storages {
    pub(crate) sizes: HashMap<String, u64>,
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
pub(crate) struct StorageRef<'d> {
    pub(crate) key: &'d str,
    type_name: String,
    pub(crate) itemsize: u64,
    pub(crate) numel: u64,
}

/// Reads a persistent id as a storage reference, or says why it is not one.
pub(crate) fn storage_ref<'d>(
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
pub(crate) fn check_storages(
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
