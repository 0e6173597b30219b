//! Bounded decompression: at most [`ModelLimits::max_decompressed_bytes`] out of any stream,
//! and at most [`ModelLimits::max_ratio`] times the compressed size once more than
//! [`RATIO_FREE_BYTES`] have come out.

use std::io::Read;

use super::container::{Compression, ModelLimits};

/// The most memory (KiB) an xz or .lzma decoder may take for its dictionary, which the stream's
/// header declares (up to 4 GiB) and the decoder allocates before any output: 128 MiB, above
/// the 64 MiB of xz's largest preset.
const LZMA_MEM_LIMIT_KIB: u32 = 128 * 1024;

/// Output below which the ratio is not checked (small files compress well legitimately).
pub(crate) const RATIO_FREE_BYTES: u64 = 1 << 20;

/// Why decompression stopped.
pub(crate) enum Failure {
    /// The data is not valid for its format (the decoder's message).
    Malformed(String),
    /// Bytes after the end of the first compressed stream. joblib's writer writes one; its
    /// readers go on into what follows (Python's `bz2`, `lzma` and `lz4.frame` files read
    /// concatenated streams as one, joblib's own zlib and gzip file loops without end on
    /// them), so what they read is not what one stream holds.
    Trailing(String),
    /// Over a bound (which, and the value reached).
    Limit(String),
}

/// Reads all of `reader` (which decompresses `compressed_len` bytes) within the bounds.
pub(crate) fn read_bounded(
    mut reader: impl Read,
    compressed_len: u64,
    limits: &ModelLimits,
) -> Result<Vec<u8>, Failure> {
    // Read straight into `out`, in steps that start small and double up to 64 KiB: a zip
    // entry of a few bytes (`byteorder`, `version`) does not pay for zeroing a large buffer.
    let mut out: Vec<u8> = Vec::new();
    let mut step = 4096usize;
    loop {
        let len = out.len();
        out.try_reserve(step)
            .map_err(|_| Failure::Limit("out of memory for the decompressed data".into()))?;
        out.resize(len + step, 0);
        let read = reader.read(out.get_mut(len..).unwrap_or_default());
        let n = match read {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                out.truncate(len);
                continue;
            }
            Err(e) => return Err(Failure::Malformed(e.to_string())),
        };
        out.truncate(len + n);
        if n == 0 {
            return Ok(out);
        }
        let total = out.len() as u64;
        if total > limits.max_decompressed_bytes {
            return Err(Failure::Limit(format!(
                "more than {} bytes decompressed (max_decompressed_bytes)",
                limits.max_decompressed_bytes
            )));
        }
        if total > RATIO_FREE_BYTES && total / compressed_len.max(1) > limits.max_ratio {
            return Err(Failure::Limit(format!(
                "{total} bytes out of {compressed_len} compressed: a ratio above {} \
                 (max_ratio)",
                limits.max_ratio
            )));
        }
        step = (step * 2).min(64 * 1024);
    }
}

/// Decompresses `data` as `compression` writes it (joblib's compressors, `joblib/compressor.py`):
/// exactly one stream (zlib, gzip member, bzip2 stream, xz stream, .lzma stream, LZ4 frame),
/// which must end where `data` ends ([`Failure::Trailing`] otherwise).
pub(crate) fn decompress(
    data: &[u8],
    compression: Compression,
    limits: &ModelLimits,
) -> Result<Vec<u8>, Failure> {
    let len = data.len() as u64;
    // What a decoder of one stream left of `data` (a `bufread` decoder reads only its stream).
    let one = |rest: usize| -> Result<(), Failure> {
        if rest == 0 {
            return Ok(());
        }
        Err(Failure::Trailing(format!(
            "{rest} bytes after the end of the {} stream (joblib writes one)",
            compression_name(compression)
        )))
    };
    match compression {
        Compression::None => Ok(data.to_vec()),
        Compression::Zlib => {
            let mut d = flate2::bufread::ZlibDecoder::new(data);
            let out = read_bounded(&mut d, len, limits)?;
            one(d.into_inner().len()).map(|()| out)
        }
        // joblib reads gzip with zlib (`BinaryGzipFile`, wbits 31): one member.
        Compression::Gzip => {
            let mut d = flate2::bufread::GzDecoder::new(data);
            let out = read_bounded(&mut d, len, limits)?;
            one(d.into_inner().len()).map(|()| out)
        }
        Compression::Bz2 => {
            let mut d = bzip2::bufread::BzDecoder::new(data);
            let out = read_bounded(&mut d, len, limits)?;
            one(d.into_inner().len()).map(|()| out)
        }
        Compression::Lz4 => {
            // lz4_flex reads frame after frame, and ends a frame cut short after a whole
            // block without an error; Python's lz4.frame (joblib's reader) refuses it. The
            // frame's own structure says where it ends: there, and with its EndMark.
            let end = lz4_frame_end(data).ok_or_else(|| {
                Failure::Malformed("the LZ4 frame ends before its end mark".into())
            })?;
            one(data.len().saturating_sub(end))?;
            read_bounded(lz4_flex::frame::FrameDecoder::new(data), len, limits)
        }
        Compression::Xz => {
            let mut d = lzma_rust2::XzReader::new_mem_limit(data, false, LZMA_MEM_LIMIT_KIB);
            let out = read_bounded(&mut d, len, limits)?;
            one(d.into_inner().len()).map(|()| out)
        }
        Compression::Lzma => {
            let mut d = lzma_rust2::LzmaReader::new_mem_limit(data, LZMA_MEM_LIMIT_KIB, None)
                .map_err(|e| Failure::Malformed(e.to_string()))?;
            let out = read_bounded(&mut d, len, limits)?;
            // The range decoder reads ahead: what it holds unread is left too.
            let (rest, held) = d.into_parts();
            one(rest.len() + held.len()).map(|()| out)
        }
    }
}

/// The first `max` bytes (or fewer) `reader`'s compressed stream decompresses to, and whether
/// the stream ended (or failed) there: enough to tell whether it holds a pickle without
/// decompressing it all. The xz and .lzma decoders keep their dictionary bound.
pub(crate) fn prefix(reader: impl Read, compression: Compression, max: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let limit = max as u64;
    let result = match compression {
        Compression::None => reader.take(limit).read_to_end(&mut out),
        Compression::Zlib => flate2::read::ZlibDecoder::new(reader)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Gzip => flate2::read::GzDecoder::new(reader)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Bz2 => bzip2::read::BzDecoder::new(reader)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Lz4 => lz4_flex::frame::FrameDecoder::new(reader)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Xz => lzma_rust2::XzReader::new_mem_limit(reader, false, LZMA_MEM_LIMIT_KIB)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Lzma => {
            match lzma_rust2::LzmaReader::new_mem_limit(reader, LZMA_MEM_LIMIT_KIB, None) {
                Ok(d) => d.take(limit).read_to_end(&mut out),
                Err(e) => Err(e),
            }
        }
    };
    let ended = result.is_err() || out.len() < max;
    (out, ended)
}

/// The name of a compression in messages.
fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "uncompressed",
        Compression::Zlib => "zlib",
        Compression::Gzip => "gzip",
        Compression::Bz2 => "bzip2",
        Compression::Xz => "xz",
        Compression::Lzma => "lzma",
        Compression::Lz4 => "LZ4 frame",
    }
}

/// Where the LZ4 frame at the start of `data` ends, walking its structure (the LZ4 frame
/// format, `lz4/doc/lz4_Frame_format.md`): magic, FLG (bit 3: a content size of 8 bytes,
/// bit 0: a dictionary id of 4, bit 4: a checksum after each block, bit 2: a content checksum
/// after the EndMark), BD, the header checksum, then blocks (a 4-byte size, high bit
/// "uncompressed", and that many bytes) up to the EndMark (a size of 0). `None` when the
/// data ends first. The decoder checks the blocks themselves.
fn lz4_frame_end(data: &[u8]) -> Option<usize> {
    let flg = *data.get(4)?;
    let mut pos = 4 + 2 + 1;
    if flg & 0x08 != 0 {
        pos += 8;
    }
    if flg & 0x01 != 0 {
        pos += 4;
    }
    loop {
        let size = u32::from_le_bytes(data.get(pos..pos + 4)?.try_into().ok()?);
        pos += 4;
        if size == 0 {
            break;
        }
        pos = pos.checked_add((size & 0x7fff_ffff) as usize)?;
        if flg & 0x10 != 0 {
            pos += 4;
        }
        if pos > data.len() {
            return None;
        }
    }
    if flg & 0x04 != 0 {
        pos += 4;
    }
    (pos <= data.len()).then_some(pos)
}

#[cfg(test)]
#[path = "decompress_test.rs"]
mod tests;
