//! Reading a safetensors file (a format that carries no pickle) as its reader does, to report
//! it clean only when that reader takes it: the `safetensors` crate's `read_metadata` and
//! `Metadata::validate` (`safetensors/src/tensor.rs`, which the Python package calls too).
//!
//! - 8 bytes: the header's length N, little-endian, at most 100,000,000 (`MAX_HEADER_SIZE`);
//! - N bytes: UTF-8 JSON, an object: `__metadata__` (an object of str, or null) and, for each
//!   tensor, an object with `dtype` (one of the crate's names), `shape` (ints) and
//!   `data_offsets` (two ints); other fields are ignored, as serde ignores them;
//! - the data: the tensors, sorted by offsets, each starting where the one before ends (the
//!   first at 0), each `nelements x bits / 8` bytes long (a whole number of bytes), the last
//!   ending where the file ends.
//!
//! The header is parsed with serde_json, the crate's own parser. One rule is stricter than the
//! reader: a tensor named twice (serde keeps the last, other readers may keep the first) is
//! refused. Only the header is read: the data's size is the file's.

use std::collections::HashSet;

use serde::de::{MapAccess, Visitor};
use serde::Deserialize;

use super::report::Report;

/// The largest header the reader takes (`MAX_HEADER_SIZE`), in bytes.
pub(crate) const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Whether a file starts as a safetensors file: a header length the reader takes, and the
/// header's `{` (what every writer writes first).
pub(crate) fn looks_like(head: &[u8]) -> bool {
    header_len(head).is_some_and(|n| (2..=MAX_HEADER_BYTES).contains(&n))
        && head.get(8) == Some(&b'{')
}

/// The header length the first 8 bytes declare.
pub(crate) fn header_len(head: &[u8]) -> Option<u64> {
    let b: [u8; 8] = head.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// The bits of one element of a safetensors dtype (the crate's `Dtype::bitsize`).
fn dtype_bits(name: &str) -> Option<u64> {
    Some(match name {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "C64" | "F64" | "I64" | "U64" => 64,
        _ => return None,
    })
}

/// One tensor's entry, as the crate's `TensorInfo` reads it (unknown fields ignored).
#[derive(Deserialize)]
struct Info {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

/// The header's entries, in order, tensors and `__metadata__` apart.
struct Header {
    tensors: Vec<(String, Info)>,
    duplicate: Option<String>,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Header, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Header;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a safetensors header object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
                let mut tensors = Vec::new();
                let mut seen = HashSet::new();
                let mut duplicate = None;
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key.clone()) && duplicate.is_none() {
                        duplicate = Some(key.clone());
                    }
                    if key == "__metadata__" {
                        map.next_value::<Option<std::collections::BTreeMap<String, String>>>()?;
                    } else {
                        let info = map.next_value::<Info>()?;
                        tensors.push((key, info));
                    }
                }
                Ok(Header { tensors, duplicate })
            }
        }
        d.deserialize_map(V)
    }
}

/// Checks a safetensors file whose header (the N bytes after the length) is `header` and
/// whose data section (the bytes after the header) is `data_len` bytes long.
pub(crate) fn check(header: &[u8], data_len: u64, report: &mut Report<'_>) {
    report.checked("header");
    let refuse = |report: &mut Report<'_>, why: String| {
        report.refuse("safetensors_header", "malformed", why, "header", None);
    };
    let Ok(text) = std::str::from_utf8(header) else {
        return refuse(report, "the header is not UTF-8".into());
    };
    let parsed: Header = match serde_json::from_str(text) {
        Ok(h) => h,
        Err(e) => {
            return refuse(
                report,
                format!("the header is not what the reader takes: {e}"),
            )
        }
    };
    if let Some(name) = parsed.duplicate {
        return refuse(
            report,
            format!(
                "{:?} is in the header twice (the reader keeps the last)",
                crate::error::escape_for_display(&name)
            ),
        );
    }
    let mut tensors = parsed.tensors;
    tensors.sort_by_key(|(_, info)| info.data_offsets);
    let mut end = 0u64;
    for (name, info) in &tensors {
        let shown = crate::error::escape_for_display(name);
        let (start, stop) = info.data_offsets;
        if start != end || stop < start {
            return refuse(
                report,
                format!(
                    "tensor {shown:?}: data_offsets [{start}, {stop}] leave a hole or overlap \
                     (the tensors must follow one another from 0)"
                ),
            );
        }
        let Some(bits) = dtype_bits(&info.dtype) else {
            return refuse(
                report,
                format!(
                    "tensor {shown:?}: dtype {:?} is none the reader knows",
                    crate::error::escape_for_display(&info.dtype)
                ),
            );
        };
        let total_bits = info
            .shape
            .iter()
            .try_fold(1u64, |a, &n| a.checked_mul(n))
            .and_then(|n| n.checked_mul(bits));
        let Some(total_bits) = total_bits else {
            return refuse(report, format!("tensor {shown:?}: its size overflows"));
        };
        if total_bits % 8 != 0 || total_bits / 8 != stop - start {
            return refuse(
                report,
                format!(
                    "tensor {shown:?}: {} x {:?} takes {total_bits} bits, not the {} bytes of \
                     its data_offsets",
                    info.dtype,
                    info.shape,
                    stop - start
                ),
            );
        }
        end = stop;
    }
    if end != data_len {
        refuse(
            report,
            format!("the tensors cover {end} bytes of the {data_len} after the header"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::container::{Format, ModelLimits, Verdict};

    fn verdict(header: &str, data_len: u64) -> (Verdict, String) {
        let policy = crate::Policy::strict();
        let mut r = Report::new(Format::Safetensors, &policy, ModelLimits::default());
        check(header.as_bytes(), data_len, &mut r);
        let r = r.finish();
        (r.verdict, r.reason.map(|f| f.message).unwrap_or_default())
    }

    #[test]
    fn headers_the_reader_takes_are_clean() {
        // As safetensors.numpy.save writes them (sorted by dtype alignment, then name).
        let h = r#"{"__metadata__":{"format":"np"},"b":{"dtype":"I64","shape":[3],"data_offsets":[0,24]},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[24,48]},"e":{"dtype":"F16","shape":[0],"data_offsets":[48,48]}}  "#;
        assert_eq!(verdict(h, 48).0, Verdict::Clean);
        assert_eq!(verdict("{}", 0).0, Verdict::Clean);
        // Sub-byte dtypes: a whole number of bytes.
        let f4 = r#"{"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}}"#;
        assert_eq!(verdict(f4, 2).0, Verdict::Clean);
    }

    #[test]
    fn headers_the_reader_refuses_are_refused() {
        for (h, len, why) in [
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
                5,
                "cover 4 bytes",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
                4,
                "64 bits",
            ),
            (
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
                2,
                "12 bits",
            ),
            (
                r#"{"a":{"dtype":"C128","shape":[1],"data_offsets":[0,16]}}"#,
                16,
                "none the reader knows",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
                8,
                "hole",
            ),
            (r#"{"__metadata__":{"a":1}}"#, 0, "not what"),
            (
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                1,
                "twice",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}"#,
                1,
                "not what",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,1]}}"#,
                1,
                "overflows",
            ),
            ("{} x", 0, "not what"),
        ] {
            let (v, msg) = verdict(h, len);
            assert_eq!(v, Verdict::Refused, "{h}");
            assert!(msg.contains(why), "{h}: {msg}");
        }
    }
}
