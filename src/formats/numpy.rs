//! NumPy's `.npy` and `.npz` files, as `numpy/lib/_format_impl.py` writes them.
//!
//! `.npy`: the magic `\x93NUMPY`, a version, the header (a Python dict literal, canonical or
//! refused: `src/formats/npy_header.rs`), then the data: `prod(shape) x itemsize` raw bytes,
//! or, for a dtype that holds Python objects, a pickle of the whole array, which numpy reads
//! with `pickle.load` (`read_array`, line 782): checked under the `numpy` policy, whose
//! checks hold it to numpy's own pickle of an ndarray, and required to be that array (the
//! header's shape and order). `.npz`: a zip of `.npy` members (`savez`: stored;
//! `savez_compressed`: deflated), each named `NAME.npy`.

use std::io::{Read, Seek};

use super::npy_header::read_header;
use super::report::Report;
use crate::policy::{Check, Policy};
use crate::value::{Document, Value};

/// Checks an `.npy` file (or an npz member named `entry`).
pub(crate) fn scan_npy(bytes: &[u8], entry: &str, report: &mut Report<'_>) {
    let header = match read_header(bytes) {
        Ok(h) => h,
        Err(why) => return report.refuse("npy_header", "malformed", why, entry, None),
    };
    let data = bytes.get(header.data_start..).unwrap_or_default();
    let numel = header.shape.iter().try_fold(1u64, |acc, &n| {
        acc.checked_mul(n).filter(|&p| p <= i64::MAX as u64)
    });
    if header.objects {
        let name = format!("{entry}{}", if entry.is_empty() { "" } else { ":" });
        let policy = report.policy;
        report.pickle_then(&name, data, false, |report, doc| {
            if let Err(why) = same_array(doc, policy, &header.shape, header.fortran) {
                report.refuse("npy_pickle_mismatch", "malformed", why, &name, Some(0));
            }
        });
        return;
    }
    let want = numel.and_then(|n| n.checked_mul(header.itemsize));
    if want != Some(data.len() as u64) {
        report.refuse(
            "npy_size_mismatch",
            "malformed",
            format!(
                "shape {:?} of {}-byte elements needs {} bytes, the file holds {}",
                header.shape,
                header.itemsize,
                want.map_or("more than 2**63".to_owned(), |w| w.to_string()),
                data.len()
            ),
            entry,
            Some(header.data_start as u64),
        );
    }
}

/// Whether the pickle of an object array is what `write_array` writes
/// (`pickle.dump(array, fp, protocol=...)`, `_format_impl.py:762`): the array itself, an
/// ndarray the `numpy_reconstruct` check accepted, holding objects, of the header's shape and
/// order (`header_data_from_array_1_0`: `fortran_order` is what `array_reduce` writes as
/// `is_fortran`).
fn same_array(
    doc: &Document<'_>,
    policy: &Policy,
    shape: &[u64],
    fortran: bool,
) -> Result<(), String> {
    let root = doc.roots().first().and_then(|&r| doc.get(r));
    let Some(Value::Object(o)) = root else {
        return Err("the pickle of an object array is not an ndarray".into());
    };
    let checked = match doc.get(o.callable) {
        Some(Value::Global(g)) => {
            policy.rule(g.rule).and_then(|r| r.check) == Some(Check::NumpyReconstruct)
        }
        _ => false,
    };
    let items = match o.state.and_then(|s| doc.get(s)) {
        Some(Value::Tuple(items)) => items,
        _ => &[],
    };
    let same = match items {
        &[_, s, _, f, data] if checked => {
            let dims: Option<Vec<u64>> = match doc.get(s) {
                Some(Value::Tuple(d)) => d
                    .iter()
                    .map(|&x| match doc.get(x) {
                        Some(Value::Int(n)) => u64::try_from(n).ok(),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            };
            dims.as_deref() == Some(shape)
                && matches!(doc.get(f), Some(Value::Bool(b)) if b == fortran)
                && matches!(doc.get(data), Some(Value::List(_)))
        }
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(
            "the pickle of an object array is not that array (an ndarray of objects of the \
             header's shape and order)"
                .into(),
        )
    }
}

/// Checks an `.npz` file: every member named `NAME.npy` (what `savez` writes; `numpy.load`
/// hands any other member back as raw bytes, and a name with and without `.npy` as one key)
/// and an `.npy` file, stored or deflated.
pub(crate) fn scan_npz<R: Read + Seek>(mut archive: zip::ZipArchive<R>, report: &mut Report<'_>) {
    let count = archive.len();
    for i in 0..count {
        let limits = report.limits;
        let (name, data) = {
            let file = match archive.by_index(i) {
                Ok(f) => f,
                Err(e) => {
                    return report.refuse("zip_malformed", "malformed", e.to_string(), "", None)
                }
            };
            let name = String::from_utf8_lossy(file.name_raw()).into_owned();
            let npy_name = file
                .name_raw()
                .strip_suffix(b".npy")
                .is_some_and(|stem| !stem.is_empty());
            if !npy_name {
                report.refuse(
                    "npz_member",
                    "malformed",
                    "a member not named NAME.npy (numpy.savez writes no other)",
                    &name,
                    None,
                );
                continue;
            }
            if !matches!(
                file.compression(),
                zip::CompressionMethod::Stored | zip::CompressionMethod::Deflated
            ) || file.encrypted()
            {
                report.incomplete(
                    "not_understood",
                    "a compression method not read",
                    &name,
                    None,
                );
                continue;
            }
            let compressed = file.compressed_size();
            match super::decompress::read_bounded(file, compressed, &limits) {
                Ok(d) => (name, d),
                Err(
                    super::decompress::Failure::Malformed(why)
                    | super::decompress::Failure::Trailing(why),
                ) => return report.refuse("zip_malformed", "malformed", why, &name, None),
                Err(super::decompress::Failure::Limit(why)) => {
                    return report.refuse("container_limit", "limit_exceeded", why, &name, None)
                }
            }
        };
        scan_npy(&data, &name, report);
    }
}
