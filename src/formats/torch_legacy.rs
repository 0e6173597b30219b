//! The legacy torch format (torch before 1.6, and `_use_new_zipfile_serialization=False`), as
//! `torch/serialization.py`'s `_legacy_save` writes it and `_legacy_load` reads it: five
//! pickles one after another (the magic number 0x1950a86a20f9469cfc6c, the protocol version
//! 1001, `sys_info`, the object, the list of storage keys), then for each key the storage: its
//! element count (8 bytes, little-endian) and its bytes. The object's persistent ids are checked
//! against the storages as a zip checkpoint's are (`src/formats/torch.rs`).

use std::collections::HashMap;
use std::ops::Range;

use crate::value::Value;

use super::container::Format;
use super::report::Report;
use super::tensors::StorageRanges;
use super::torch::{check_storages, storage_ref, Storages};

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
) -> Option<(Range<usize>, StorageRanges)> {
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
