//! The older torch tar layout (torch before 0.4), as `torch/serialization.py`'s `legacy_load`
//! still reads it under `torch.load(weights_only=False)`: it is tried first on any file that is
//! not a zip and that Python's `tarfile` opens, before the legacy pickle format.
//!
//! The tar holds regular files, each looked up by its exact name (`TarFile.getmember`: the last
//! member of that name):
//! - `storages`: pickle(number of storages); for each, pickle((key, location, storage_type))
//!   then the storage (`UntypedStorage._new_with_file`: numel as 8 bytes little-endian, then
//!   numel x the element size of `storage_type._dtype`); then pickle(storage views: a list of
//!   (target_key, root_key, offset, numel), each a slice of an earlier storage);
//! - `tensors`: pickle(number of tensors); for each, pickle((key, storage_key, tensor_type))
//!   then ndim (int32 LE), 4 bytes of padding, ndim sizes, ndim strides and the storage offset
//!   (int64 LE each);
//! - `pickle`: the object; a persistent id `saved_id` is `deserialized_objects[int(saved_id)]`,
//!   a storage or tensor of the two entries above (its tuple form, an `nn.Module` class with
//!   its source, is refused here);
//! - `sys_info`: a dict torch wrote and no longer reads (checked as plain data).
//!
//! The pickles of `storages` and `tensors` are read by plain `pickle.load` (no persistent
//! ids); the `pickle` entry by torch's unpickler. Every pickle is checked under the policy.
//!
//! The tar itself is read as Python's `tarfile` reads it (`src/formats/tar.rs`). Everything
//! outside the subset it reads is refused: links, directories, PAX and GNU headers, sparse
//! files, a bad header after the first, data past the end. When `tarfile` fails, torch reads
//! the file again as the legacy pickle format; a refusal covers that path too.

use std::collections::{HashMap, HashSet};

use crate::policy::{PersistentIds, Policy};
use crate::value::{Document, NodeId, Value};
use crate::Category;

use super::container::Format;
use super::report::Report;
use super::tar::{members, BLOCK};
use super::torch::{check_views, extent, storage_dtype, storage_itemsize};

/// A storage of the tar (or a storage view, a slice of one): its element count and size, its
/// dtype, and where its bytes start in the `storages` member.
#[derive(Clone, Copy)]
pub(crate) struct Storage {
    pub(crate) numel: u64,
    pub(crate) itemsize: u64,
    pub(crate) dtype: &'static str,
    pub(crate) start: usize,
}

/// A tensor of the `tensors` member: its storage (or storage view) key, sizes, strides and
/// storage offset (in elements).
pub(crate) struct Tensor {
    pub(crate) storage: i64,
    pub(crate) shape: Vec<u64>,
    pub(crate) stride: Vec<u64>,
    pub(crate) offset: u64,
}

/// What `legacy_load` reads from a tar in torch's layout: the object's pickle, the
/// `storages` member, and its storages and tensors by key.
pub(crate) struct Layout<'a> {
    pub(crate) object: &'a [u8],
    /// Where the `storages` member's data starts in the file.
    pub(crate) storages_at: usize,
    pub(crate) storages: HashMap<i64, Storage>,
    pub(crate) tensors: HashMap<i64, Tensor>,
}

/// The layout of a tar that [`scan_tar`] found clean (`None` for any other), read again
/// under `policy` (torch's).
pub(crate) fn layout<'a>(bytes: &'a [u8], policy: &Policy) -> Option<Layout<'a>> {
    let limits = super::container::ModelLimits::default();
    let (list, _) = members(bytes, limits.max_entries).ok()?;
    let get = |name: &[u8]| list.iter().rev().find(|m| m.name == name);
    let (storages, tensors, object) = (get(b"storages")?, get(b"tensors")?, get(b"pickle")?);
    let (storages_data, storages_at) = (storages.data, storages.at);
    let (tensors_data, object) = (tensors.data, object.data);
    let mut plain = policy.clone();
    plain.persistent_ids = PersistentIds::Reject;
    let mut report = Report::new(Format::TorchTar, &plain, limits);
    let storages = read_storages(storages_data, &mut report)?;
    let tensors = read_tensors(tensors_data, &storages, &mut report)?;
    Some(Layout {
        object,
        storages_at,
        storages,
        tensors,
    })
}

/// Checks a file in the tar layout.
pub(crate) fn scan_tar(bytes: &[u8], report: &mut Report<'_>) {
    if let Some(other) = polyglot(bytes, report) {
        return report.refuse(
            "container_polyglot",
            "malformed",
            format!("a tar that is also {other}: loaders read it differently"),
            "",
            Some(0),
        );
    }
    let (list, end) = match members(bytes, report.limits.max_entries) {
        Ok(x) => x,
        Err((kind, why, at)) => {
            let category = if kind == "container_limit" {
                "limit_exceeded"
            } else {
                "malformed"
            };
            return report.refuse(kind, category, why, "", Some(at as u64));
        }
    };
    // POSIX ends an archive with two zero blocks; tarfile stops at the first zero block or at
    // the end of the input. Without them the file may be cut short: refused.
    let marker = bytes.get(end..end.saturating_add(2 * BLOCK));
    if !marker.is_some_and(|m| m.len() == 2 * BLOCK && m.iter().all(|&b| b == 0)) {
        return report.refuse(
            "tar_malformed",
            "truncated",
            "no end-of-archive blocks (two zero blocks) after the last member",
            "",
            Some(end as u64),
        );
    }
    if bytes
        .get(end..)
        .is_some_and(|rest| rest.iter().any(|&b| b != 0))
    {
        report.incomplete(
            "not_understood",
            "bytes after the end of the tar archive",
            "",
            Some(end as u64),
        );
    }
    let mut by_name: HashMap<&[u8], &[u8]> = HashMap::new();
    for m in &list {
        if by_name.insert(&m.name, m.data).is_some() {
            return report.refuse(
                "tar_duplicate_entry",
                "malformed",
                format!(
                    "member {:?} is in the tar twice (tarfile reads the last, other readers the first)",
                    String::from_utf8_lossy(&m.name)
                ),
                "",
                None,
            );
        }
        if !matches!(
            &m.name[..],
            b"sys_info" | b"pickle" | b"tensors" | b"storages"
        ) {
            report.incomplete(
                "not_understood",
                "a member the torch tar layout does not have",
                &String::from_utf8_lossy(&m.name),
                None,
            );
        }
    }
    let get = |name: &str| by_name.get(name.as_bytes()).copied();
    let (Some(storages_data), Some(tensors_data), Some(object)) =
        (get("storages"), get("tensors"), get("pickle"))
    else {
        return report.refuse(
            "tar_layout",
            "malformed",
            "a torch tar needs the members storages, tensors and pickle",
            "",
            None,
        );
    };
    if let Some(sys_info) = get("sys_info") {
        let data = Policy::data();
        let mut sub = Report::new(Format::TorchTar, &data, report.limits);
        sub.pickle("sys_info", sys_info, false);
        report.absorb(sub);
    }
    // `storages` and `tensors` are read by plain pickle.load: no persistent ids.
    let mut plain = report.policy.clone();
    plain.persistent_ids = PersistentIds::Reject;
    let mut sub = Report::new(Format::TorchTar, &plain, report.limits);
    let storages = read_storages(storages_data, &mut sub);
    let tensors = storages
        .as_ref()
        .and_then(|s| read_tensors(tensors_data, s, &mut sub));
    report.absorb(sub);
    let (Some(storages), Some(tensors)) = (storages, tensors) else {
        return;
    };
    // The object: persistent ids kept (when the policy records them) and resolved here.
    let mut object_policy = report.policy.clone();
    if matches!(object_policy.persistent_ids, PersistentIds::Record(_)) {
        object_policy.persistent_ids = PersistentIds::Record(None);
    }
    let mut sub = Report::new(Format::TorchTar, &object_policy, report.limits);
    let end = sub.pickle_then("pickle", object, true, |r, doc| {
        check_object(doc, &storages, &tensors, r);
    });
    report.absorb(sub);
    if end.is_some_and(|e| e < object.len()) {
        report.incomplete(
            "not_understood",
            "bytes after the object's pickle",
            "pickle",
            end.map(|e| e as u64),
        );
    }
}

/// Whether the file also reads as another format a loader would take it for: the name of
/// that format, or `None`. A torch tar starts with the name `sys_info`, none of these.
fn polyglot(bytes: &[u8], report: &Report<'_>) -> Option<&'static str> {
    if bytes.starts_with(b"\x93NUMPY") {
        return Some("an npy file");
    }
    if super::container::Compression::sniff(bytes).is_some() || bytes.starts_with(b"ZF") {
        return Some("a compressed (joblib) stream");
    }
    if super::torch_legacy::is_legacy(bytes) {
        return Some("a legacy torch file");
    }
    // A pickle at the start (what pickle.load reads, trailing bytes ignored) that gets as far
    // as naming a global the policy refuses, or that is complete.
    let scan = crate::Scanner::new(bytes, report.policy)
        .limits(report.policy.limits)
        .allow_trailing(true)
        .run();
    match &scan.result {
        Ok(_) => Some("a pickle"),
        Err(e)
            if matches!(
                e.category(),
                Category::PolicyDenied | Category::LimitExceeded
            ) =>
        {
            Some("a pickle")
        }
        Err(_) => None,
    }
}

/// Reads one pickle of an entry at `*pos` (entry name with its offset), advancing `*pos`, and
/// hands its root value to `then`; `None` when the pickle is refused or `then` refuses.
fn next_pickle<T>(
    data: &[u8],
    pos: &mut usize,
    member: &str,
    report: &mut Report<'_>,
    then: impl FnOnce(&Document<'_>, Option<Value<'_>>) -> Result<T, String>,
) -> Option<T> {
    let entry = format!("{member} (pickle at {:#x})", *pos);
    let mut out = None;
    let mut why = None;
    let end = report.pickle_then(
        &entry,
        data.get(*pos..).unwrap_or_default(),
        true,
        |_, doc| match then(doc, doc.root().and_then(|r| doc.get(r))) {
            Ok(v) => out = Some(v),
            Err(w) => why = Some(w),
        },
    )?;
    if let Some(w) = why {
        report.refuse("tar_layout", "malformed", w, &entry, None);
        return None;
    }
    *pos += end;
    out
}

fn int_of(doc: &Document<'_>, id: Option<&NodeId>) -> Option<i64> {
    match id.and_then(|&i| doc.get(i)) {
        Some(Value::Int(n)) => Some(n),
        _ => None,
    }
}

/// A count pickle: an int from 0 to the entry's length (each item takes bytes).
fn count(v: Option<Value<'_>>, len: usize) -> Result<u64, String> {
    match v {
        Some(Value::Int(n)) if n >= 0 && (n as u64) <= len as u64 => Ok(n as u64),
        _ => Err("a count that is not an int between 0 and the member's size".into()),
    }
}

/// Little-endian i64 at `*pos`, advancing it.
fn le_i64(data: &[u8], pos: &mut usize) -> Option<i64> {
    let b: [u8; 8] = data.get(*pos..*pos + 8)?.try_into().ok()?;
    *pos += 8;
    Some(i64::from_le_bytes(b))
}

/// The `storages` member: every storage (key -> element count and size) and storage view.
fn read_storages(data: &[u8], report: &mut Report<'_>) -> Option<HashMap<i64, Storage>> {
    let mut pos = 0usize;
    let n = next_pickle(data, &mut pos, "storages", report, |_, v| {
        count(v, data.len())
    })?;
    let mut out: HashMap<i64, Storage> = HashMap::new();
    for _ in 0..n {
        let at = pos;
        let (key, itemsize, dtype) = next_pickle(data, &mut pos, "storages", report, |doc, v| {
            let Some(Value::Tuple(t)) = v else {
                return Err("a storage record that is not a tuple".into());
            };
            let [k, loc, ty] = t else {
                return Err("a storage record of other than 3 items".into());
            };
            let key = int_of(doc, Some(k)).ok_or("a storage key that is not an int")?;
            if !matches!(doc.get(*loc), Some(Value::Str(_))) {
                return Err("a storage location that is not a str".into());
            }
            match doc.get(*ty) {
                Some(Value::Global(g))
                    if g.module == "torch" && storage_dtype(&g.name).is_some() =>
                {
                    let size = storage_itemsize(&g.module, &g.name).ok_or("no element size")?;
                    let dtype = storage_dtype(&g.name).ok_or("no dtype")?;
                    Ok((key, size, dtype))
                }
                _ => Err("a storage type that is not a typed torch storage class".into()),
            }
        })?;
        let entry = format!("storages (storage at {:#x})", pos);
        let Some(numel) = le_i64(data, &mut pos).and_then(|n| u64::try_from(n).ok()) else {
            report.refuse(
                "storage_size_mismatch",
                "malformed",
                "a storage size that is missing or negative",
                &entry,
                Some(pos as u64),
            );
            return None;
        };
        let start = pos;
        let len = numel
            .checked_mul(itemsize)
            .and_then(|l| usize::try_from(l).ok());
        match len
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= data.len())
        {
            Some(e) => pos = e,
            None => {
                report.refuse(
                    "storage_size_mismatch",
                    "malformed",
                    format!("storage {key}: {numel} elements of {itemsize} bytes run past the member's end"),
                    &entry,
                    Some(at as u64),
                );
                return None;
            }
        }
        let storage = Storage {
            numel,
            itemsize,
            dtype,
            start,
        };
        if out.insert(key, storage).is_some() {
            report.refuse(
                "storage_size_mismatch",
                "malformed",
                format!("storage key {key} written twice"),
                &entry,
                None,
            );
            return None;
        }
    }
    // The storage views: (target, root, offset, numel), each inside its root.
    let views = next_pickle(data, &mut pos, "storages", report, |doc, v| {
        let Some(Value::List(rows)) = v else {
            return Err("storage views that are not a list".into());
        };
        let mut out = Vec::new();
        for &row in rows {
            let Some(Value::Tuple(f)) = doc.get(row) else {
                return Err("a storage view that is not a tuple".into());
            };
            let [a, b, c, d] = f else {
                return Err("a storage view of other than 4 items".into());
            };
            let ints = [a, b, c, d].map(|x| int_of(doc, Some(x)));
            let [Some(t), Some(r), Some(o), Some(n)] = ints else {
                return Err("a storage view whose items are not ints".into());
            };
            out.push((t, r, o, n));
        }
        Ok(out)
    })?;
    for (target, root, offset, numel) in views {
        let entry = "storages (storage views)";
        let Some(&r) = out.get(&root) else {
            report.refuse(
                "storage_missing",
                "malformed",
                format!("storage view of storage {root}, which is not in the file"),
                entry,
                None,
            );
            return None;
        };
        let (Ok(o), Ok(n)) = (u64::try_from(offset), u64::try_from(numel)) else {
            report.refuse(
                "view_out_of_storage",
                "malformed",
                "a storage view with a negative offset or size",
                entry,
                None,
            );
            return None;
        };
        if o.checked_add(n).is_none_or(|e| e > r.numel) {
            report.refuse(
                "view_out_of_storage",
                "malformed",
                format!(
                    "storage view {target}: elements {o}..+{n} of a storage of {}",
                    r.numel
                ),
                entry,
                None,
            );
            return None;
        }
        if out
            .insert(
                target,
                Storage {
                    numel: n,
                    itemsize: r.itemsize,
                    dtype: r.dtype,
                    // o x itemsize <= the root's bytes, which are in the member.
                    start: r.start + (o * r.itemsize) as usize,
                },
            )
            .is_some()
        {
            report.refuse(
                "storage_size_mismatch",
                "malformed",
                format!("storage key {target} written twice"),
                entry,
                None,
            );
            return None;
        }
    }
    if pos < data.len() {
        report.incomplete(
            "not_understood",
            "bytes after the storage views",
            "storages",
            Some(pos as u64),
        );
    }
    Some(out)
}

/// The `tensors` member: every tensor, checked inside its storage.
fn read_tensors(
    data: &[u8],
    storages: &HashMap<i64, Storage>,
    report: &mut Report<'_>,
) -> Option<HashMap<i64, Tensor>> {
    let mut pos = 0usize;
    let n = next_pickle(data, &mut pos, "tensors", report, |_, v| {
        count(v, data.len())
    })?;
    let mut out = HashMap::new();
    for _ in 0..n {
        let (key, sid) = next_pickle(data, &mut pos, "tensors", report, |doc, v| {
            let Some(Value::Tuple(t)) = v else {
                return Err("a tensor record that is not a tuple".into());
            };
            let [k, s, _ty] = t else {
                return Err("a tensor record of other than 3 items".into());
            };
            let key = int_of(doc, Some(k)).ok_or("a tensor key that is not an int")?;
            let sid = int_of(doc, Some(s)).ok_or("a tensor's storage key that is not an int")?;
            Ok((key, sid))
        })?;
        let entry = format!("tensors (tensor {key} at {pos:#x})");
        let Some(storage) = storages.get(&sid).copied() else {
            report.refuse(
                "storage_missing",
                "malformed",
                format!("tensor {key} names storage {sid}, which is not in the file"),
                &entry,
                None,
            );
            return None;
        };
        let meta_at = pos as u64;
        let bad = |report: &mut Report<'_>, why: &str| {
            report.refuse(
                "tar_layout",
                "malformed",
                format!("tensor {key}: {why}"),
                &entry,
                Some(meta_at),
            );
        };
        let ndim = match data
            .get(pos..pos + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
        {
            Some(b) => i32::from_le_bytes(b),
            None => {
                bad(report, "its metadata runs past the member's end");
                return None;
            }
        };
        let Ok(ndim) = usize::try_from(ndim) else {
            bad(report, "a negative ndim");
            return None;
        };
        // ndim, padding, sizes, strides, offset: all inside the member before any is read.
        if ndim
            .checked_mul(16)
            .and_then(|b| b.checked_add(16))
            .is_none_or(|b| b > data.len() - pos)
        {
            bad(report, "its metadata runs past the member's end");
            return None;
        }
        pos += 8;
        let mut read = |k: usize| -> Option<Vec<u64>> {
            (0..k)
                .map(|_| le_i64(data, &mut pos).and_then(|v| u64::try_from(v).ok()))
                .collect()
        };
        let (Some(shape), Some(stride), Some(offset)) = (read(ndim), read(ndim), read(1)) else {
            bad(report, "a negative size, stride or storage offset");
            return None;
        };
        let offset = offset.first().copied().unwrap_or(0);
        match extent(offset, &shape, &stride) {
            Some(end) if end <= storage.numel => {}
            _ => {
                report.refuse(
                    "view_out_of_storage",
                    "malformed",
                    format!(
                        "tensor {key} at storage offset {offset} with shape {shape:?} and stride {stride:?} \
                         leaves its storage of {} elements",
                        storage.numel
                    ),
                    &entry,
                    Some(meta_at),
                );
                return None;
            }
        }
        let tensor = Tensor {
            storage: sid,
            shape,
            stride,
            offset,
        };
        if out.insert(key, tensor).is_some() {
            report.refuse(
                "tar_layout",
                "malformed",
                format!("tensor key {key} written twice"),
                &entry,
                None,
            );
            return None;
        }
    }
    if pos < data.len() {
        report.incomplete(
            "not_understood",
            "bytes after the last tensor",
            "tensors",
            Some(pos as u64),
        );
    }
    Some(out)
}

/// The object's persistent ids resolved against the storages and tensors, and every
/// `_rebuild_tensor*` call in it checked inside its storage.
fn check_object(
    doc: &Document<'_>,
    storages: &HashMap<i64, Storage>,
    tensors: &HashMap<i64, Tensor>,
    report: &mut Report<'_>,
) {
    let mut elements: HashMap<NodeId, (u64, u64)> = HashMap::new();
    for &pid in doc.persistent_ids() {
        let key = match doc.get(pid) {
            Some(Value::Int(n)) => Some(n),
            Some(Value::Str(s)) => s
                .as_str()
                .filter(|t| !t.is_empty() && t.len() <= 18 && t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse::<i64>().ok()),
            _ => None,
        };
        let Some(key) = key else {
            return report.refuse(
                "persistent_id",
                "policy_denied",
                "a persistent id that is not a storage or tensor key (int or decimal str)",
                "pickle",
                None,
            );
        };
        if let Some(s) = storages.get(&key) {
            elements.insert(pid, (s.numel.saturating_mul(s.itemsize), s.itemsize));
        } else if !tensors.contains_key(&key) {
            return report.refuse(
                "storage_missing",
                "malformed",
                format!("persistent id {key} names no storage or tensor of the file"),
                "pickle",
                None,
            );
        }
    }
    let referenced: HashSet<NodeId> = elements.keys().copied().collect();
    if let Err(why) = check_views(doc, &elements, &referenced) {
        report.refuse("view_out_of_storage", "malformed", why, "pickle", None);
    }
}

#[cfg(test)]
#[path = "torch_tar_test.rs"]
mod tests;
