//! joblib files (`joblib.dump`), as `joblib/numpy_pickle.py` and `joblib/compressor.py` write
//! them: a pickle, compressed or not (zlib, gzip, bz2, xz, lzma, lz4), in which each numpy
//! array is a `joblib.numpy_pickle.NumpyArrayWrapper` object whose BUILD is followed by the
//! array, outside the pickle's opcodes: a padding byte, padding and `prod(shape) x itemsize`
//! bytes, or, for an array of objects, a pickle of its own.
//!
//! The pickle is decoded by the machine itself in joblib's way ([`crate::Decoder`]'s
//! `decode_joblib`): at each wrapper's BUILD the `joblib_array_wrapper` check of the policy
//! (`src/policy/check/joblib.rs`) requires the wrapper joblib's writer writes, computes the
//! span joblib's `read_array` reads from the state the build made, checks the padding, decodes
//! an object array's pickle with the machine, and moves the reader past the array. So the
//! bytes checked as opcodes are exactly the ones joblib reads as opcodes. The globals are
//! listed by a scan of the pickle with those spans taken out (offsets are the pickle's), and
//! of each object array's pickle.

use super::container::Compression;
use super::decompress::{decompress, Failure};
use super::globals::list_after;
use super::report::Report;
use crate::policy::check::joblib::ArraySpan;

/// The global joblib writes for each array, and the one joblib before 0.10 wrote (its arrays
/// in files of their own, which `joblib.load` still reads).
const WRAPPERS: [&[u8]; 2] = [b"NumpyArrayWrapper", b"NDArrayWrapper"];

/// Whether an uncompressed pickle names joblib's array wrapper (then it is a joblib file whose
/// arrays sit between opcodes).
pub(crate) fn names_wrapper(bytes: &[u8]) -> bool {
    WRAPPERS
        .iter()
        .any(|w| bytes.windows(w.len()).any(|x| x == *w))
        && bytes.windows(19).any(|w| w == b"joblib.numpy_pickle")
}

/// Checks a joblib file.
pub(crate) fn scan(bytes: &[u8], compression: Compression, report: &mut Report<'_>) {
    let entry = if compression == Compression::None {
        ""
    } else {
        "decompressed"
    };
    if bytes.starts_with(b"ZF") {
        // A Python 2 file is refused as joblib refuses it; any other is not read.
        if let Some(data) = zfile(bytes, &report.limits) {
            if list_after(&data, 0).python2_text {
                report.checked("decompressed");
                return refuse_python2(report);
            }
        }
        return report.incomplete(
            "not_understood",
            "the joblib format before 0.9.3 (ZF) is not read",
            "",
            None,
        );
    }
    let data = match decompress(bytes, compression, &report.limits) {
        Ok(d) => d,
        Err(Failure::Malformed(why)) => {
            return report.refuse("decompress", "malformed", why, "", None)
        }
        Err(Failure::Trailing(why)) => {
            return report.refuse("decompress_trailing_data", "malformed", why, "", None)
        }
        Err(Failure::Limit(why)) => {
            return report.refuse("container_limit", "limit_exceeded", why, "", None)
        }
    };
    scan_pickle(&data, entry, report);
}

/// The name of the `i`-th object array's pickle (from 1) at `start`, in reports.
fn array_entry(entry: &str, i: usize, start: usize) -> String {
    format!(
        "{entry}{}array {i} at {start:#x}",
        if entry.is_empty() { "" } else { " " }
    )
}

/// Checks a joblib pickle (decompressed): the decode in joblib's way, then the listing of its
/// globals.
fn scan_pickle(data: &[u8], entry: &str, report: &mut Report<'_>) {
    report.checked(entry);
    let (decoded, arrays) = crate::Decoder::new(data, report.policy)
        .limits(report.pickle_limits())
        .decode_joblib();
    // Every byte after STOP is refused by the decode; the listing takes the pickle as one.
    let listed = list_outer(data, entry, &arrays, report);
    for (i, a) in arrays.iter().filter(|a| a.pickle).enumerate() {
        let name = array_entry(entry, i + 1, a.start);
        let end = a.end.unwrap_or(data.len());
        report.checked(&name);
        let _ = report.list_globals(&name, data.get(a.start..end).unwrap_or_default(), true);
    }
    if python2_text(data, &arrays) {
        // The reason joblib refuses it; the `invalid_ascii` under it says no more.
        refuse_python2(report);
        if matches!(&decoded, Err(e) if matches!(e.kind(), crate::ErrorKind::InvalidAscii)) {
            return;
        }
    }
    match decoded {
        Ok(_) => {
            // The decode read the file as joblib does; a scan of the same opcodes that refuses
            // would be a disagreement of the two passes: refused, never clean.
            if let Err(e) = listed {
                report.refuse_error(entry, &e);
            }
        }
        Err(e) => {
            let at = usize::try_from(e.offset()).unwrap_or(usize::MAX);
            let nested = arrays
                .iter()
                .filter(|a| a.pickle)
                .enumerate()
                .find(|(_, a)| at >= a.start && a.end.is_none_or(|end| at < end));
            match nested {
                // A refusal inside an object array's pickle, as that pickle's own offset.
                Some((i, a)) => {
                    let at = e.offset().saturating_sub(a.start as u64);
                    let e = e.moved_to(at);
                    report.refuse_error(&array_entry(entry, i + 1, a.start), &e);
                }
                None => report.refuse_error(entry, &e),
            }
        }
    }
}

/// Lists the globals of the joblib pickle `data` with the arrays' spans taken out, at their
/// offsets in `data`; returns the scan's result (offsets in `data` too).
fn list_outer(
    data: &[u8],
    entry: &str,
    arrays: &[ArraySpan],
    report: &mut Report<'_>,
) -> crate::Result<()> {
    let (spliced, runs) = splice(data, arrays);
    let original = |at: u64| -> u64 {
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        let (s, o) = runs
            .iter()
            .rev()
            .find(|(s, _)| *s <= at)
            .copied()
            .unwrap_or((0, 0));
        (at - s + o) as u64
    };
    let mut sub = super::report::Report::new(
        super::container::Format::Pickle,
        report.policy,
        report.limits,
    );
    let (result, _) = sub.list_globals(entry, &spliced, false);
    sub.map_offsets(original);
    report.absorb(sub);
    result.map_err(|e| {
        let at = original(e.offset());
        e.moved_to(at)
    })
}

/// Whether a Python 2 str that is not ASCII is anywhere in the joblib pickle `data` or its
/// object arrays' pickles (then joblib.load in Python 3 refuses the file). A nested pickle the
/// decode refused before its end is known ends at its STOP, where the outer pickle goes on.
fn python2_text(data: &[u8], arrays: &[ArraySpan]) -> bool {
    let mut spans = Vec::with_capacity(arrays.len());
    for a in arrays {
        let mut span = *a;
        if a.pickle {
            let nested = data.get(a.start..a.end.unwrap_or(data.len()));
            let listed = list_after(nested.unwrap_or_default(), 0);
            if listed.python2_text {
                return true;
            }
            span.end = a.end.or(listed.end.map(|e| a.start + e));
        }
        spans.push(span);
    }
    list_after(&splice(data, &spans).0, 0).python2_text
}

/// The pickle `data` without the arrays' spans, and where each kept run starts: (in it, in
/// `data`).
fn splice(data: &[u8], arrays: &[ArraySpan]) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut spliced = Vec::new();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut pos = 0;
    for a in arrays {
        runs.push((spliced.len(), pos));
        spliced.extend_from_slice(data.get(pos..a.start).unwrap_or_default());
        pos = a.end.unwrap_or(data.len());
    }
    runs.push((spliced.len(), pos));
    spliced.extend_from_slice(data.get(pos..).unwrap_or_default());
    (spliced, runs)
}

/// Refuses a joblib file written by Python 2 whose str are not ASCII, first, as joblib does:
/// its unpickler reads Python 2 str as ASCII, and `joblib/numpy_pickle.py` `_unpickle` turns
/// the `UnicodeDecodeError` into this `ValueError`.
fn refuse_python2(report: &mut Report<'_>) {
    report.refuse_first(
        "python2_joblib",
        "malformed",
        "a joblib file written by Python 2, whose str (STRING, BINSTRING, SHORT_BINSTRING) are \
         not ASCII: joblib.load refuses it in Python 3 (ValueError: You may be trying to read \
         with python 3 a joblib pickle generated with python 2. This feature is not supported \
         by joblib.)",
        "",
        None,
    );
}

/// The pickle of a joblib file before 0.9.3 (`joblib/numpy_pickle_compat.py` `read_zfile`):
/// `ZF`, the pickle's length in hex padded to 19 bytes (and, from Python 2's joblib 0.8.4 and
/// before, one more space), then zlib data of exactly that length. `None` when it is not
/// that, or over the bounds.
fn zfile(bytes: &[u8], limits: &super::container::ModelLimits) -> Option<Vec<u8>> {
    const HEADER: usize = 2 + 19;
    let text = std::str::from_utf8(bytes.get(2..HEADER)?).ok()?;
    let length = u64::from_str_radix(text.trim_end().strip_prefix("0x")?, 16).ok()?;
    let mut at = HEADER;
    if bytes.get(at) == Some(&b' ') {
        at += 1;
    }
    let data = super::decompress::decompress(bytes.get(at..)?, Compression::Zlib, limits).ok()?;
    (data.len() as u64 == length).then_some(data)
}
