//! The arrays joblib writes between a pickle's opcodes (see [`super::joblib`]).

use super::container::Report;

/// Checks a joblib pickle that holds arrays between its opcodes.
pub(crate) fn scan(data: &[u8], entry: &str, report: &mut Report<'_>) {
    let _ = data;
    report.incomplete(
        "not_understood",
        "joblib array bytes between pickle opcodes are not read yet",
        entry,
        None,
    );
}
