//! The tensors of a torch zip checkpoint, listed without running any pickle code: for Rust
//! programs (candle, burn, ...) that read checkpoints and want the storages' byte ranges from
//! a reader that bounds and checks everything first.

use std::collections::HashSet;
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
    /// The storage's key: its bytes are the zip entry `<archive>/data/<key>`.
    pub storage_key: String,
    /// The bytes of the storage the tensor's elements lie in, from its first to past its last
    /// (the whole data of a contiguous tensor; a strided view's elements are inside it).
    pub byte_range: Range<u64>,
}

/// Lists the tensors of a torch zip checkpoint after scanning it under the `torch` policy.
///
/// # Errors
/// The scan's report when the file is not a torch zip checkpoint or is not clean; an I/O
/// error of the reader as an incomplete report.
pub fn list_tensors<R: Read + Seek>(mut reader: R) -> Result<Vec<TensorInfo>, Box<FileReport>> {
    let options = ScanOptions::default();
    let report = match scan_reader(&mut reader, u64::MAX, &options) {
        Ok(r) => r,
        Err(e) => return Err(Box::new(io_report(&e))),
    };
    if report.verdict != Verdict::Clean || report.format != Format::TorchZip {
        return Err(Box::new(report));
    }
    let policy = crate::Policy::builtin("torch").unwrap_or_else(crate::Policy::strict);
    let pickle = report
        .pickles
        .iter()
        .find(|p| p.ends_with("/data.pkl"))
        .cloned()
        .unwrap_or_default();
    let mut archive = zip::ZipArchive::new(reader).map_err(|_| Box::new(report.clone()))?;
    let mut data = Vec::new();
    archive
        .by_name(&pickle)
        .and_then(|f| {
            f.take(options.limits.max_pickle_bytes)
                .read_to_end(&mut data)
                .map_err(zip::result::ZipError::Io)
        })
        .map_err(|_| Box::new(report.clone()))?;
    let doc = crate::Decoder::new(&data, &policy)
        .decode()
        .map_err(|_| Box::new(report.clone()))?;
    Ok(walk(&doc))
}

fn io_report(e: &std::io::Error) -> FileReport {
    let policy = crate::Policy::strict();
    let mut r = super::report::Report::new(Format::Pickle, &policy, Default::default());
    r.refuse("io", "io", e.to_string(), "", None);
    r.finish()
}

/// The tensors reachable from the document's root, each with its first key path.
fn walk(doc: &Document<'_>) -> Vec<TensorInfo> {
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
