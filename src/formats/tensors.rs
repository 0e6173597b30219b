//! The tensors of a torch checkpoint (the zip format, the legacy format and the older tar
//! layout), listed without running any pickle code: for Rust programs (candle, burn, ...) that
//! read checkpoints and want the storages' byte ranges from a reader that bounds and checks
//! everything first, and for `convert`.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek};
use std::ops::Range;

use super::container::{scan_reader, FileReport, Format, ScanOptions, Verdict};
use super::torch::{dtype_itemsize, extent, storage_dtype, tensors_of};
use crate::value::{Document, NodeId, Value};

/// One tensor of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// Its key path from the top: dict keys (and list indices) joined with `.`
    /// (`model.0.weight`); a tensor reached twice is listed once, under its first path.
    pub name: String,
    /// The dtype as torch names it (`float32`, `bfloat16`, `int64`...).
    pub dtype: String,
    /// Size of each dimension, in elements.
    pub shape: Vec<u64>,
    /// Stride of each dimension, in elements.
    pub stride: Vec<u64>,
    /// Offset of its first element in its storage, in elements.
    pub storage_offset: u64,
    /// The storage's key: in a zip checkpoint its bytes are the entry
    /// `<archive>/data/<key>`; in the legacy format, the storage record of that key after the
    /// list of keys; in the tar layout, the storage (or storage view) of that key in the
    /// `storages` member.
    pub storage_key: String,
    /// The bytes of the storage the tensor's elements lie in, from its first to past its last
    /// (the whole data of a contiguous tensor; a strided view's elements are inside it).
    pub byte_range: Range<u64>,
}

/// Where a checkpoint's storages' bytes are.
pub(crate) enum Storages<R> {
    /// A zip checkpoint: the entry `<top>/data/<key>` of each.
    Zip {
        archive: zip::ZipArchive<R>,
        top: String,
    },
    /// A legacy or tar checkpoint, read whole: each storage key's bytes in it.
    File {
        bytes: Vec<u8>,
        ranges: StorageRanges,
    },
}

/// Each storage key's bytes in a legacy or tar checkpoint read whole.
pub(crate) type StorageRanges = HashMap<String, Range<usize>>;

/// A checkpoint scanned clean: its tensors and where their storages are.
pub(crate) struct Checkpoint<R> {
    pub(crate) tensors: Vec<TensorInfo>,
    pub(crate) storages: Storages<R>,
}

/// Lists the tensors of a torch checkpoint (zip, legacy or tar) after scanning it under the
/// `torch` policy.
///
/// # Errors
/// The scan's report when the file is not a torch checkpoint of those formats or is not
/// clean; an I/O error of the reader as a refused report.
pub fn list_tensors<R: Read + Seek>(reader: R) -> Result<Vec<TensorInfo>, Box<FileReport>> {
    open(reader).map(|c| c.tensors)
}

/// Scans the checkpoint `reader` holds and, when it is a clean torch checkpoint (zip, legacy
/// or tar), reads its tensors and where their storages are.
pub(crate) fn open<R: Read + Seek>(mut reader: R) -> Result<Checkpoint<R>, Box<FileReport>> {
    let options = ScanOptions::default();
    let report = match scan_reader(&mut reader, u64::MAX, &options) {
        Ok(r) => r,
        Err(e) => return Err(Box::new(io_report(&e))),
    };
    let formats = [Format::TorchZip, Format::TorchLegacy, Format::TorchTar];
    if report.verdict != Verdict::Clean || !formats.contains(&report.format) {
        return Err(Box::new(report));
    }
    let failed = || Box::new(report.clone());
    let policy = crate::Policy::builtin("torch").unwrap_or_else(crate::Policy::strict);
    if report.format != Format::TorchZip {
        let mut bytes = Vec::new();
        reader
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| reader.read_to_end(&mut bytes))
            .map_err(|e| Box::new(io_report(&e)))?;
        let (tensors, ranges) = if report.format == Format::TorchLegacy {
            legacy(&bytes, &policy)
        } else {
            tar(&bytes, &policy)
        }
        .ok_or_else(failed)?;
        return Ok(Checkpoint {
            tensors,
            storages: Storages::File { bytes, ranges },
        });
    }
    let pickle = report
        .pickles
        .iter()
        .find(|p| p.ends_with("/data.pkl"))
        .cloned()
        .unwrap_or_default();
    let top = pickle
        .strip_suffix("/data.pkl")
        .unwrap_or_default()
        .to_owned();
    reader
        .seek(std::io::SeekFrom::Start(0))
        .map_err(|e| Box::new(io_report(&e)))?;
    let mut archive = zip::ZipArchive::new(reader).map_err(|_| failed())?;
    let mut data = Vec::new();
    archive
        .by_name(&pickle)
        .and_then(|f| {
            f.take(options.limits.max_pickle_bytes)
                .read_to_end(&mut data)
                .map_err(zip::result::ZipError::Io)
        })
        .map_err(|_| failed())?;
    let doc = crate::Decoder::new(&data, &policy)
        .decode()
        .map_err(|_| failed())?;
    Ok(Checkpoint {
        tensors: walk(&doc, &|_, _| None),
        storages: Storages::Zip { archive, top },
    })
}

/// A legacy checkpoint's tensors and its storages' bytes by key.
fn legacy(bytes: &[u8], policy: &crate::Policy) -> Option<(Vec<TensorInfo>, StorageRanges)> {
    let (object, ranges) = super::torch_legacy::legacy_layout(bytes, policy)?;
    let doc = crate::Decoder::new(bytes.get(object)?, policy)
        .decode()
        .ok()?;
    Some((walk(&doc, &|_, _| None), ranges))
}

/// A tar checkpoint's tensors (persistent ids naming a tensor record of the `tensors`
/// member, or `_rebuild_tensor*` calls on a storage) and its storages' bytes by key (a storage
/// view's are a slice of its root's, as `legacy_load` slices them).
fn tar(bytes: &[u8], policy: &crate::Policy) -> Option<(Vec<TensorInfo>, StorageRanges)> {
    let layout = super::torch_tar::layout(bytes, policy)?;
    let base = layout.storages_at;
    let mut ranges = HashMap::new();
    for (key, s) in &layout.storages {
        let len = usize::try_from(s.numel.checked_mul(s.itemsize)?).ok()?;
        let start = base.checked_add(s.start)?;
        ranges.insert(key.to_string(), start..start.checked_add(len)?);
    }
    let mut object_policy = policy.clone();
    object_policy.persistent_ids = crate::policy::PersistentIds::Record(None);
    let doc = crate::Decoder::new(layout.object, &object_policy)
        .decode()
        .ok()?;
    let pids: HashSet<NodeId> = doc.persistent_ids().iter().copied().collect();
    let tensor = |id: NodeId, path: &str| -> Option<TensorInfo> {
        if !pids.contains(&id) {
            return None;
        }
        let key = match doc.get(id)? {
            Value::Int(n) => n,
            Value::Str(s) => s.as_str()?.parse::<i64>().ok()?,
            _ => return None,
        };
        let t = layout.tensors.get(&key)?;
        let storage = layout.storages.get(&t.storage)?;
        let end = extent(t.offset, &t.shape, &t.stride)?;
        Some(TensorInfo {
            name: path.to_owned(),
            dtype: storage.dtype.to_owned(),
            shape: t.shape.clone(),
            stride: t.stride.clone(),
            storage_offset: t.offset,
            storage_key: t.storage.to_string(),
            byte_range: t.offset.checked_mul(storage.itemsize)?
                ..end.checked_mul(storage.itemsize)?,
        })
    };
    Some((walk(&doc, &tensor), ranges))
}

fn io_report(e: &std::io::Error) -> FileReport {
    let policy = crate::Policy::strict();
    let mut r = super::report::Report::new(Format::Pickle, &policy, Default::default());
    r.refuse("io", "io", e.to_string(), "", None);
    r.finish()
}

/// The tensors reachable from the document's root, each with its first key path: each
/// `_rebuild_tensor*` call, and each node `pid` makes a tensor of (a tar's persistent ids).
fn walk(doc: &Document<'_>, pid: &dyn Fn(NodeId, &str) -> Option<TensorInfo>) -> Vec<TensorInfo> {
    let calls = tensors_of(doc);
    let by_node: std::collections::HashMap<NodeId, &super::torch::TensorCall> = calls
        .iter()
        .filter_map(|c| c.as_ref().ok())
        .map(|t| (t.node, t))
        .collect();
    let mut out = Vec::new();
    let mut seen: HashSet<NodeId> = HashSet::new();
    let mut stack: Vec<(NodeId, String)> =
        doc.roots().iter().map(|&r| (r, String::new())).collect();
    let join = |path: &str, k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let key_text = |k: NodeId| match doc.get(k) {
        Some(Value::Str(s)) => s.as_str().map(str::to_owned),
        Some(Value::Int(i)) => Some(i.to_string()),
        _ => None,
    };
    while let Some((id, path)) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        if let Some(info) = pid(id, &path) {
            out.push(info);
            continue;
        }
        let mut children: Vec<(NodeId, String)> = Vec::new();
        match doc.get(id) {
            Some(Value::Dict(pairs)) => {
                for &(k, v) in pairs {
                    if let Some(t) = key_text(k) {
                        children.push((v, join(&path, &t)));
                    }
                }
            }
            Some(Value::List(items) | Value::Tuple(items)) => {
                for (i, &v) in items.iter().enumerate() {
                    children.push((v, join(&path, &i.to_string())));
                }
            }
            Some(Value::Object(o)) => {
                if let Some(t) = by_node.get(&id) {
                    if let Some(info) = describe(doc, t, &path) {
                        out.push(info);
                    }
                } else if let Some(Value::Global(g)) = doc.get(o.callable) {
                    if g.module == "torch._utils" && g.name.starts_with("_rebuild_parameter") {
                        if let Some(Value::Tuple(a)) = doc.get(o.args) {
                            if let Some(&t) = a.first() {
                                children.push((t, path.clone()));
                            }
                        }
                    } else {
                        for &(k, v) in &o.dictitems {
                            if let Some(t) = key_text(k) {
                                children.push((v, join(&path, &t)));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        // Depth-first in document order.
        stack.extend(children.into_iter().rev());
    }
    out
}

fn describe(doc: &Document<'_>, t: &super::torch::TensorCall, path: &str) -> Option<TensorInfo> {
    let Some(Value::Tuple(pid)) = doc.get(t.storage) else {
        return None;
    };
    let item = |i: usize| pid.get(i).and_then(|&id| doc.get(id));
    let key = match item(2) {
        Some(Value::Str(s)) => s.as_str()?.to_owned(),
        _ => return None,
    };
    let dtype = match (&t.dtype, item(1)) {
        (Some(d), _) => d.clone(),
        (None, Some(Value::Global(g))) => storage_dtype(&g.name)?.to_owned(),
        _ => return None,
    };
    let itemsize = dtype_itemsize(&dtype)?;
    let end = extent(t.offset, &t.shape, &t.stride)?;
    Some(TensorInfo {
        name: path.to_owned(),
        dtype,
        shape: t.shape.clone(),
        stride: t.stride.clone(),
        storage_offset: t.offset,
        storage_key: key,
        byte_range: t.offset.checked_mul(itemsize)?..end.checked_mul(itemsize)?,
    })
}
