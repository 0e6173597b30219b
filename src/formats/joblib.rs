//! joblib files (`joblib.dump`), as `joblib/numpy_pickle.py` and `joblib/compressor.py` write
//! them: a pickle, compressed or not (zlib, gzip, bz2, xz, lzma, lz4), in which each numpy
//! array is a `joblib.numpy_pickle.NumpyArrayWrapper` object whose BUILD is followed by the
//! array's bytes, outside the pickle's opcodes: one byte giving a padding length, that many
//! padding bytes, then `prod(shape) x itemsize` bytes; or, for an array of objects, a pickle of
//! its own.

use super::container::{Compression, Report};
use super::decompress::{decompress, Failure};

/// The global joblib writes for each array.
const WRAPPER: &[u8] = b"NumpyArrayWrapper";

/// Whether an uncompressed pickle names joblib's array wrapper (then it is a joblib file whose
/// arrays sit between opcodes).
pub(crate) fn names_wrapper(bytes: &[u8]) -> bool {
    bytes.windows(WRAPPER.len()).any(|w| w == WRAPPER)
        && bytes.windows(19).any(|w| w == b"joblib.numpy_pickle")
}

/// Checks a joblib file.
pub(crate) fn scan(bytes: &[u8], compression: Compression, report: &mut Report<'_>) {
    let entry = if compression == Compression::None {
        ""
    } else {
        "decompressed"
    };
    let data = if bytes.starts_with(b"ZF") {
        return report.incomplete(
            "not_understood",
            "the joblib format before 0.9.3 (ZF) is not read",
            "",
            None,
        );
    } else {
        match decompress(bytes, compression, &report.limits) {
            Ok(d) => d,
            Err(Failure::Malformed(why)) => {
                return report.refuse("decompress", "malformed", why, "", None)
            }
            Err(Failure::Limit(why)) => {
                return report.refuse("container_limit", "limit_exceeded", why, "", None)
            }
        }
    };
    if names_wrapper(&data) {
        super::joblib_arrays::scan(&data, entry, report);
    } else {
        report.pickle(entry, &data, false);
    }
}
