//! The structure of a zip archive checked so that every reader sees the same entries with the
//! same bytes, before the zip crate reads it.
//!
//! Readers of the same zip disagree where its records disagree. torch's `PyTorchStreamReader`
//! (miniz) takes the last end-of-central-directory record, reads as many central headers as it
//! declares, finds an entry by name in the central directory, then skips the local header by
//! the local header's own name and extra lengths and reads the sizes and method of the
//! central directory. Python's `zipfile` (numpy's `np.load`, and most scanners) reads central
//! headers until the directory's declared size is used up, keeps the last entry of a name, and
//! refuses a local header whose name differs. Streaming readers walk local headers from the
//! start of the file and see entries the directory does not list. So an archive is refused
//! (`malformed`) unless all of them agree:
//!
//! - one end-of-central-directory record, ending the file exactly (its comment included):
//!   nothing after it, no second record in its comment (`zip_trailing_data`);
//! - with ZIP64, the locator right before it and the ZIP64 record right before the locator;
//!   each 16- or 32-bit field either equal to its 64-bit value or the ZIP64 placeholder
//!   (`zip_count_mismatch`);
//! - the central directory right before those records, holding exactly the declared number of
//!   headers in exactly its declared size (`zip_count_mismatch`);
//! - no name twice (`zip_duplicate_entry`);
//! - local entries (header, name, extra, data, data descriptor) one after another from the
//!   start of the file to the central directory, each in the directory once: no bytes before,
//!   between or hidden (`zip_layout`);
//! - each local header naming the same file with the same flags and method as its central
//!   header, and the same CRC-32 and sizes, in the header or in its data descriptor
//!   (`zip_local_header_mismatch`).

use std::io::{Read, Seek, SeekFrom};

/// A refusal: (kind, category, message).
pub(crate) type Refusal = (&'static str, &'static str, String);

/// One central directory header, as read here.
#[derive(Clone, Debug)]
pub(crate) struct CentralEntry {
    pub(crate) name: Vec<u8>,
    flags: u16,
    method: u16,
    crc: u32,
    compressed: u64,
    size: u64,
    local: u64,
    zip64: bool,
}

const EOCD: &[u8; 4] = b"PK\x05\x06";
const ZIP64_LOCATOR: &[u8; 4] = b"PK\x06\x07";
const ZIP64_EOCD: &[u8; 4] = b"PK\x06\x06";
const CENTRAL: &[u8; 4] = b"PK\x01\x02";
const LOCAL: &[u8; 4] = b"PK\x03\x04";
const DESCRIPTOR: &[u8; 4] = b"PK\x07\x08";

/// Most bytes of a central directory read here (64 MiB: 65 536 entries of 1 KiB).
const MAX_DIRECTORY_BYTES: u64 = 64 << 20;

fn refuse(kind: &'static str, message: impl Into<String>) -> Refusal {
    (kind, "malformed", message.into())
}

fn read_at<R: Read + Seek>(r: &mut R, at: u64, len: u64) -> Result<Vec<u8>, Refusal> {
    r.seek(SeekFrom::Start(at))
        .map_err(|e| refuse("zip_malformed", e.to_string()))?;
    let mut out = Vec::new();
    r.take(len)
        .read_to_end(&mut out)
        .map_err(|e| refuse("zip_malformed", e.to_string()))?;
    if out.len() as u64 != len {
        return Err(refuse("zip_malformed", "a record past the end of the file"));
    }
    Ok(out)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| <[u8; 2]>::try_from(s).ok())
        .map_or(0, u16::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map_or(0, u32::from_le_bytes)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_le_bytes)
}

/// The ZIP64 extended information extra field (id 1) of `extra`: its 8-byte values in order.
fn zip64_values(extra: &[u8]) -> Option<Vec<u64>> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16_at(extra, at);
        let len = usize::from(u16_at(extra, at + 2));
        let body = extra.get(at + 4..at + 4 + len)?;
        if id == 1 {
            return Some(body.chunks_exact(8).map(|c| u64_at(c, 0)).collect());
        }
        at += 4 + len;
    }
    None
}

/// Checks the archive's records (module docs) and returns its central directory, in order.
pub(crate) fn check<R: Read + Seek>(
    r: &mut R,
    max_entries: u64,
) -> Result<Vec<CentralEntry>, Refusal> {
    let len = r
        .seek(SeekFrom::End(0))
        .map_err(|e| refuse("zip_malformed", e.to_string()))?;
    let tail_len = len.min(22 + 65535);
    let tail = read_at(r, len - tail_len, tail_len)?;
    let at = tail
        .windows(4)
        .rposition(|w| w == EOCD)
        .ok_or_else(|| refuse("zip_malformed", "no end of central directory record"))?;
    let eocd = tail.get(at..).unwrap_or_default();
    let eocd_at = len - tail_len + at as u64;
    if eocd.len() < 22 || eocd.len() != 22 + usize::from(u16_at(eocd, 20)) {
        return Err(refuse(
            "zip_trailing_data",
            "the end of central directory record (with its comment) does not end the file",
        ));
    }
    let (disk_entries, entries) = (u64::from(u16_at(eocd, 8)), u64::from(u16_at(eocd, 10)));
    let (mut dir_size, mut dir_at) = (u64::from(u32_at(eocd, 12)), u64::from(u32_at(eocd, 16)));
    let mut count = entries;
    let mut dir_end = eocd_at;
    let locator = (eocd_at >= 20)
        .then(|| read_at(r, eocd_at - 20, 20))
        .transpose()?
        .filter(|l| l.starts_with(ZIP64_LOCATOR));
    if let Some(loc) = locator {
        let record_at = u64_at(&loc, 8);
        let record = read_at(r, record_at, 56)?;
        if !record.starts_with(ZIP64_EOCD)
            || u64_at(&record, 4)
                .checked_add(12)
                .and_then(|n| record_at.checked_add(n))
                != Some(eocd_at - 20)
        {
            return Err(refuse(
                "zip_count_mismatch",
                "a ZIP64 record that does not end at its locator",
            ));
        }
        let (d64, n64, size64, at64) = (
            u64_at(&record, 24),
            u64_at(&record, 32),
            u64_at(&record, 40),
            u64_at(&record, 48),
        );
        let agrees = |small: u64, big: u64, placeholder: u64| small == big || small == placeholder;
        if d64 != n64
            || !agrees(disk_entries, d64, 0xFFFF)
            || !agrees(entries, n64, 0xFFFF)
            || !agrees(dir_size, size64, 0xFFFF_FFFF)
            || !agrees(dir_at, at64, 0xFFFF_FFFF)
        {
            return Err(refuse(
                "zip_count_mismatch",
                "the ZIP64 record and the end of central directory record disagree",
            ));
        }
        (count, dir_size, dir_at, dir_end) = (n64, size64, at64, record_at);
    } else if disk_entries != entries {
        return Err(refuse(
            "zip_count_mismatch",
            "the entry counts of the end of central directory record disagree",
        ));
    }
    if count > max_entries {
        return Err((
            "container_limit",
            "limit_exceeded",
            format!("{count} zip entries, more than max_entries {max_entries}"),
        ));
    }
    if dir_size > MAX_DIRECTORY_BYTES {
        return Err((
            "container_limit",
            "limit_exceeded",
            format!("a central directory of {dir_size} bytes"),
        ));
    }
    if dir_at.checked_add(dir_size) != Some(dir_end) {
        return Err(refuse(
            "zip_layout",
            "the central directory does not end where the end records start",
        ));
    }
    let dir = read_at(r, dir_at, dir_size)?;
    let mut out: Vec<CentralEntry> = Vec::new();
    let mut pos = 0usize;
    while pos < dir.len() {
        let h = dir
            .get(pos..pos + 46)
            .ok_or_else(|| refuse("zip_count_mismatch", "a central header cut short"))?;
        if !h.starts_with(CENTRAL) {
            return Err(refuse(
                "zip_count_mismatch",
                "bytes in the central directory that are not a central header",
            ));
        }
        let (nl, el, cl) = (
            usize::from(u16_at(h, 28)),
            usize::from(u16_at(h, 30)),
            usize::from(u16_at(h, 32)),
        );
        let name = dir
            .get(pos + 46..pos + 46 + nl)
            .ok_or_else(|| refuse("zip_count_mismatch", "a name past the central directory"))?;
        let extra = dir.get(pos + 46 + nl..pos + 46 + nl + el).ok_or_else(|| {
            refuse(
                "zip_count_mismatch",
                "an extra field past the central directory",
            )
        })?;
        let (mut size, mut compressed, mut local) = (
            u64::from(u32_at(h, 24)),
            u64::from(u32_at(h, 20)),
            u64::from(u32_at(h, 42)),
        );
        let mut zip64 = false;
        if size == 0xFFFF_FFFF || compressed == 0xFFFF_FFFF || local == 0xFFFF_FFFF {
            let mut v = zip64_values(extra).unwrap_or_default().into_iter();
            for field in [&mut size, &mut compressed, &mut local] {
                if *field == 0xFFFF_FFFF {
                    *field = v.next().ok_or_else(|| {
                        refuse(
                            "zip_malformed",
                            "a ZIP64 value missing from its extra field",
                        )
                    })?;
                }
            }
            zip64 = true;
        }
        out.push(CentralEntry {
            name: name.to_vec(),
            flags: u16_at(h, 8),
            method: u16_at(h, 10),
            crc: u32_at(h, 16),
            compressed,
            size,
            local,
            zip64,
        });
        pos += 46 + nl + el + cl;
        if out.len() as u64 > count {
            break;
        }
    }
    if out.len() as u64 != count || pos != dir.len() {
        return Err(refuse(
            "zip_count_mismatch",
            format!("the central directory holds {} headers in its {} bytes, the end record says {count}", out.len(), dir.len()),
        ));
    }
    let mut names: Vec<&[u8]> = out.iter().map(|e| e.name.as_slice()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w.first() == w.get(1)) {
        return Err(refuse("zip_duplicate_entry", "the central directory lists a name more than once (readers differ on which entry they read)"));
    }
    check_local(r, &out, dir_at)?;
    Ok(out)
}

/// The local entries, in file order, one after another from 0 to the central directory, each
/// agreeing with its central header.
fn check_local<R: Read + Seek>(
    r: &mut R,
    dir: &[CentralEntry],
    dir_at: u64,
) -> Result<(), Refusal> {
    let mut order: Vec<&CentralEntry> = dir.iter().collect();
    order.sort_by_key(|e| e.local);
    let mut next = 0u64;
    for e in order {
        let shown = String::from_utf8_lossy(&e.name);
        if e.local != next {
            return Err(refuse("zip_layout", format!("{} bytes before the local header of {shown:?} belong to no listed entry (or entries overlap)", e.local.wrapping_sub(next))));
        }
        let h = read_at(r, e.local, 30)?;
        let (nl, el) = (u64::from(u16_at(&h, 26)), u64::from(u16_at(&h, 28)));
        let rest = read_at(r, e.local + 30, nl + el)?;
        let (name, extra) = rest.split_at(usize::try_from(nl).unwrap_or(0).min(rest.len()));
        let mismatch = |what: &str| {
            refuse(
                "zip_local_header_mismatch",
                format!("the local header of {shown:?} differs from the central directory: {what}"),
            )
        };
        if !h.starts_with(LOCAL) {
            return Err(mismatch("no local header signature"));
        }
        if name != e.name.as_slice() {
            return Err(mismatch(&format!(
                "it names {:?}",
                String::from_utf8_lossy(name)
            )));
        }
        let flags = u16_at(&h, 6);
        if flags != e.flags || u16_at(&h, 8) != e.method {
            return Err(mismatch("flags or compression method"));
        }
        let data_end = (e.local + 30 + nl + el)
            .checked_add(e.compressed)
            .ok_or_else(|| mismatch("sizes overflow"))?;
        let descriptor = flags & 8 != 0;
        next = data_end;
        if descriptor {
            // CRC-32 and sizes after the data, with or without a signature, with 4-byte or
            // (ZIP64) 8-byte sizes: the form whose values match the central header.
            let d = read_at(r, data_end, 24u64.min(dir_at.saturating_sub(data_end)))?;
            let skip = if d.starts_with(DESCRIPTOR) { 4 } else { 0 };
            let body = d.get(skip..).unwrap_or_default();
            let narrow = (
                u32_at(body, 0),
                u64::from(u32_at(body, 4)),
                u64::from(u32_at(body, 8)),
            );
            let wide = (u32_at(body, 0), u64_at(body, 4), u64_at(body, 12));
            let want = (e.crc, e.compressed, e.size);
            let len = if body.len() >= 12 && narrow == want && !e.zip64 {
                12
            } else if body.len() >= 20 && wide == want {
                20
            } else {
                return Err(mismatch("its data descriptor's CRC-32 or sizes"));
            };
            next += (skip + len) as u64;
        } else {
            let (mut csize, mut usize_) = (u64::from(u32_at(&h, 18)), u64::from(u32_at(&h, 22)));
            if csize == 0xFFFF_FFFF || usize_ == 0xFFFF_FFFF {
                let v = zip64_values(extra).unwrap_or_default();
                (usize_, csize) = (
                    v.first().copied().unwrap_or(u64::MAX),
                    v.get(1).copied().unwrap_or(u64::MAX),
                );
            }
            if (u32_at(&h, 14), csize, usize_) != (e.crc, e.compressed, e.size) {
                return Err(mismatch("CRC-32 or sizes"));
            }
        }
    }
    if next != dir_at {
        return Err(refuse("zip_layout", format!("{} bytes between the last entry and the central directory belong to no listed entry", dir_at.wrapping_sub(next))));
    }
    Ok(())
}

/// Opens a zip archive whose records [`check`] accepted (`entries`) with the zip crate, whose
/// listing must be the one checked (same names in the same order). `None` once refused.
pub(crate) fn open<R: Read + Seek>(
    reader: R,
    entries: &[CentralEntry],
    report: &mut super::report::Report<'_>,
) -> Option<zip::ZipArchive<R>> {
    let archive = match zip::ZipArchive::new(reader) {
        Ok(a) => a,
        Err(e) => {
            report.refuse("zip_malformed", "malformed", e.to_string(), "", None);
            return None;
        }
    };
    if archive.len() != entries.len()
        || archive.offset() != 0
        || !archive
            .file_names_raw()
            .zip(entries)
            .all(|(n, e)| n == e.name.as_slice())
    {
        report.refuse(
            "zip_count_mismatch",
            "malformed",
            "the zip reader lists other entries than the central directory holds",
            "",
            None,
        );
        return None;
    }
    Some(archive)
}
