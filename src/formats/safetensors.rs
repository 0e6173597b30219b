//! A torch checkpoint (the zip format `torch.save` writes, the legacy format of
//! `_use_new_zipfile_serialization=False` and torch before 1.6, and the older tar layout)
//! written as safetensors (the `safetensors` crate's and Python package's format: an 8-byte
//! little-endian header length, a JSON header naming each tensor's dtype, shape and byte
//! range, then the bytes), without running any pickle code. Each tensor is written contiguous,
//! in row-major order, gathered from its storage by its offset and strides, its bytes as the
//! file holds them (what `torch.load` gives on a little-endian machine: torch reads the legacy
//! and tar storages without looking at `sys_info`); tensors that share a storage are written
//! each on its own, so the output can be larger than the checkpoint: it is bounded
//! ([`convert`]'s `max_output_bytes`), and refused before anything is written when it would
//! pass the bound.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, Write};

use super::container::FileReport;
use super::tensors::{open, Storages, TensorInfo};

/// Why a checkpoint was not converted.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConvertError {
    /// The scan did not find the file clean (or it is not a torch checkpoint: zip, legacy or
    /// tar).
    Refused(Box<FileReport>),
    /// A tensor safetensors cannot hold (its dtype), or a big-endian checkpoint.
    Unsupported(String),
    /// Reading the checkpoint or writing the output failed.
    Io(std::io::Error),
    /// The safetensors file would be larger than the bound: `bytes` it would take, `max` the
    /// bound. Nothing was written.
    OutputTooLarge {
        /// Bytes the output would take.
        bytes: u64,
        /// The bound.
        max: u64,
    },
}

/// The default bound of [`convert`]'s output, per byte of the checkpoint's distinct storages
/// (each storage the tensors use, counted once): 4. A view writes its own elements, so 64
/// tensors that each view all of one storage write 64 times it (17 GB from a 264 KB file
/// whose storage was deflated; the scan refuses a compressed storage, and this bounds the
/// rest). Tied weights, the common sharing (an embedding and its output layer), write twice
/// their storage; a checkpoint of a tensor and five views of it (tests/corpus/models/good/
/// views.pt) 3.3 times.
pub const DEFAULT_OUTPUT_PER_STORAGE_BYTE: u64 = 4;

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Refused(r) if r.reason.is_none() => write!(
                f,
                "not a torch checkpoint (zip, legacy or tar) but {}",
                r.format.name()
            ),
            ConvertError::Refused(r) => write!(
                f,
                "the checkpoint is {} ({})",
                r.verdict.name(),
                r.reason.as_ref().map_or("", |x| x.message.as_str())
            ),
            ConvertError::Unsupported(why) => write!(f, "{why}"),
            ConvertError::Io(e) => write!(f, "{e}"),
            ConvertError::OutputTooLarge { bytes, max } => write!(
                f,
                "the safetensors file would take {bytes} bytes, more than the bound of {max} \
                 (tensors that share a storage are each written whole)"
            ),
        }
    }
}

/// The safetensors dtype name of a torch dtype.
fn safetensors_dtype(torch: &str) -> Option<&'static str> {
    Some(match torch {
        "float64" => "F64",
        "float32" => "F32",
        "float16" => "F16",
        "bfloat16" => "BF16",
        "int64" => "I64",
        "int32" => "I32",
        "int16" => "I16",
        "int8" => "I8",
        "uint64" => "U64",
        "uint32" => "U32",
        "uint16" => "U16",
        "uint8" => "U8",
        "bool" => "BOOL",
        "float8_e4m3fn" => "F8_E4M3",
        "float8_e5m2" => "F8_E5M2",
        "complex64" => "C64",
        _ => return None,
    })
}

/// Converts the checkpoint read from `reader` to safetensors on `out`; returns the number of
/// tensors written. The output may take at most `max_output_bytes` (header included), or by
/// default [`DEFAULT_OUTPUT_PER_STORAGE_BYTE`] times the bytes of the distinct storages the
/// tensors use; past it nothing is written.
///
/// # Errors
/// [`ConvertError`]: [`ConvertError::OutputTooLarge`] past the bound.
pub fn convert<R: Read + Seek, W: Write>(
    reader: R,
    mut out: W,
    max_output_bytes: Option<u64>,
) -> Result<usize, ConvertError> {
    let checkpoint = open(reader).map_err(ConvertError::Refused)?;
    let tensors = checkpoint.tensors;
    let mut storages = checkpoint.storages;
    if let Storages::Zip { archive, top } = &mut storages {
        if let Ok(mut f) = archive.by_name(&format!("{top}/byteorder")) {
            let mut b = String::new();
            f.read_to_string(&mut b).map_err(ConvertError::Io)?;
            if b != "little" {
                return Err(ConvertError::Unsupported(format!(
                    "a {b}-endian checkpoint"
                )));
            }
        }
    }
    let mut header = String::from("{");
    let mut begin = 0u64;
    for (i, t) in tensors.iter().enumerate() {
        let dt = safetensors_dtype(&t.dtype).ok_or_else(|| {
            ConvertError::Unsupported(format!(
                "{}: dtype {} has no safetensors name",
                t.name, t.dtype
            ))
        })?;
        let size = element_size(t)?.saturating_mul(
            t.shape
                .iter()
                .try_fold(1u64, |a, &n| a.checked_mul(n))
                .unwrap_or(u64::MAX),
        );
        if i > 0 {
            header.push(',');
        }
        json_str(&mut header, &t.name);
        let shape: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let _ = write!(
            header,
            ":{{\"dtype\":\"{dt}\",\"shape\":[{}],\"data_offsets\":[{begin},{}]}}",
            shape.join(","),
            begin.saturating_add(size)
        );
        begin = begin.saturating_add(size);
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let max = match max_output_bytes {
        Some(m) => m,
        None => {
            let mut distinct = 0u64;
            let mut seen = std::collections::HashSet::new();
            for t in &tensors {
                if seen.insert(t.storage_key.as_str()) {
                    distinct = distinct.saturating_add(storage_len(&mut storages, &t.storage_key)?);
                }
            }
            distinct
                .saturating_mul(DEFAULT_OUTPUT_PER_STORAGE_BYTE)
                .saturating_add(8 + header.len() as u64)
        }
    };
    let bytes = (8 + header.len() as u64).saturating_add(begin);
    if bytes > max {
        return Err(ConvertError::OutputTooLarge { bytes, max });
    }
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(ConvertError::Io)?;
    out.write_all(header.as_bytes()).map_err(ConvertError::Io)?;
    let mut read: HashMap<String, Vec<u8>> = HashMap::new();
    for t in &tensors {
        let data: &[u8] = match &mut storages {
            Storages::Zip { archive, top } => {
                if !read.contains_key(&t.storage_key) {
                    let mut data = Vec::new();
                    archive
                        .by_name(&format!("{top}/data/{}", t.storage_key))
                        .map_err(|e| ConvertError::Io(std::io::Error::other(e)))?
                        .read_to_end(&mut data)
                        .map_err(ConvertError::Io)?;
                    read.insert(t.storage_key.clone(), data);
                }
                read.get(&t.storage_key)
                    .map(Vec::as_slice)
                    .unwrap_or_default()
            }
            Storages::File { bytes, ranges } => ranges
                .get(&t.storage_key)
                .and_then(|r| bytes.get(r.clone()))
                .unwrap_or_default(),
        };
        write_contiguous(t, element_size(t)?, data, &mut out)?;
    }
    out.flush().map_err(ConvertError::Io)?;
    Ok(tensors.len())
}

/// The bytes of the storage `key`.
fn storage_len<R: Read + Seek>(storages: &mut Storages<R>, key: &str) -> Result<u64, ConvertError> {
    match storages {
        Storages::Zip { archive, top } => Ok(archive
            .by_name(&format!("{top}/data/{key}"))
            .map_err(|e| ConvertError::Io(std::io::Error::other(e)))?
            .size()),
        Storages::File { ranges, .. } => Ok(ranges.get(key).map_or(0, |r| r.len() as u64)),
    }
}

fn element_size(t: &TensorInfo) -> Result<u64, ConvertError> {
    super::torch::dtype_itemsize(&t.dtype)
        .ok_or_else(|| ConvertError::Unsupported(format!("dtype {}", t.dtype)))
}

/// Writes the tensor's elements in row-major order, gathered through its strides (the scan
/// checked every element lies inside the storage).
fn write_contiguous(
    t: &TensorInfo,
    itemsize: u64,
    data: &[u8],
    out: &mut impl Write,
) -> Result<(), ConvertError> {
    if t.shape.contains(&0) {
        return Ok(());
    }
    let outside =
        || ConvertError::Unsupported(format!("{}: an element outside its storage", t.name));
    let mut index = vec![0u64; t.shape.len()];
    loop {
        let element =
            t.storage_offset + index.iter().zip(&t.stride).map(|(i, s)| i * s).sum::<u64>();
        let start = usize::try_from(element * itemsize).map_err(|_| outside())?;
        let end = start + usize::try_from(itemsize).map_err(|_| outside())?;
        out.write_all(data.get(start..end).ok_or_else(outside)?)
            .map_err(ConvertError::Io)?;
        // The next index, last dimension fastest.
        let mut d = index.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            let (Some(i), Some(&n)) = (index.get_mut(d), t.shape.get(d)) else {
                return Ok(());
            };
            *i += 1;
            if *i < n {
                break;
            }
            *i = 0;
        }
    }
}

/// A JSON string literal of `s`.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
