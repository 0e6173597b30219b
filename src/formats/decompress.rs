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

/// Decompresses `data` as `compression` writes it (joblib's compressors, `joblib/compressor.py`).
pub(crate) fn decompress(
    data: &[u8],
    compression: Compression,
    limits: &ModelLimits,
) -> Result<Vec<u8>, Failure> {
    let len = data.len() as u64;
    match compression {
        Compression::None => Ok(data.to_vec()),
        Compression::Zlib => read_bounded(flate2::read::ZlibDecoder::new(data), len, limits),
        // joblib writes one gzip member; MultiGzDecoder also reads concatenated members as
        // Python's gzip module does.
        Compression::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data), len, limits),
        Compression::Bz2 => read_bounded(bzip2::read::MultiBzDecoder::new(data), len, limits),
        Compression::Lz4 => {
            // lz4_flex ends a frame cut short after a whole block without an error; Python's
            // lz4.frame (joblib's reader) refuses it. The frame must end in its EndMark (and
            // the content checksum its FLG byte announces).
            if !lz4_frame_complete(data) {
                return Err(Failure::Malformed(
                    "the LZ4 frame ends before its end mark".into(),
                ));
            }
            read_bounded(lz4_flex::frame::FrameDecoder::new(data), len, limits)
        }
        Compression::Xz => read_bounded(
            lzma_rust2::XzReader::new_mem_limit(data, true, LZMA_MEM_LIMIT_KIB),
            len,
            limits,
        ),
        Compression::Lzma => {
            let reader = lzma_rust2::LzmaReader::new_mem_limit(data, LZMA_MEM_LIMIT_KIB, None)
                .map_err(|e| Failure::Malformed(e.to_string()))?;
            read_bounded(reader, len, limits)
        }
    }
}

/// Whether an LZ4 frame ends with its EndMark (four zero bytes), followed by the 4-byte
/// content checksum when the frame descriptor's FLG byte (bit 2) announces one. A cheap check
/// of the end only: the decoder checks the blocks.
fn lz4_frame_complete(data: &[u8]) -> bool {
    let checksum = data.get(4).is_some_and(|flg| flg & 0x04 != 0);
    let tail = if checksum { 8 } else { 4 };
    data.len() >= 7 + tail
        && data
            .get(data.len() - tail..data.len() - tail + 4)
            .is_some_and(|m| m == [0, 0, 0, 0])
}
