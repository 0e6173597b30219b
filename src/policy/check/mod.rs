//! Checks a policy rule adds to its `record` constructor ([`Check`], the TOML setting `check`):
//! the value a global's call and BUILD receive compared with what the real writer of that
//! global produces, computed with the reader's own rule from its source. A loader after
//! picklewarden (numpy, joblib) reads these values with rules of its own: a dtype's flags
//! from its pickled state, the bytes joblib reads after an array wrapper from the wrapper's
//! attributes. Guessing how it reads a form its writer never produces is how scanners are
//! bypassed, so the checks accept only the writer's forms (canonical or refused) and refuse
//! the rest as [`ErrorKind::NonCanonical`](crate::ErrorKind::NonCanonical).
//!
//! - [`numpy`]: `numpy.dtype`, `numpy._core.multiarray._reconstruct` (an ndarray) and
//!   `numpy._core.multiarray.scalar`, as numpy's `arraydescr_reduce`, `array_reduce` and the
//!   scalars' `__reduce__` write them;
//! - [`joblib`]: `joblib.numpy_pickle.NumpyArrayWrapper`, as joblib's `NumpyPickler` writes it,
//!   and the span of bytes `NumpyArrayWrapper.read_array` reads after its BUILD.
//!
//! The functions here are pure: they read arena values and return what they found or why
//! they refuse. The build (`src/build/checks.rs`) keeps what they found about each record (a
//! dtype's size and flags, whether a record was built) and calls them at the call and at the
//! BUILD. No function recurses: nested dtypes are checked when each is built, in the order
//! the pickle builds them, and looked up by node afterwards.

pub(crate) mod joblib;
pub(crate) mod numpy;

#[cfg(test)]
mod tests;

use super::Forms;

/// A check from the closed set implemented here, named by a policy rule (`check = "..."`).
/// Each applies to a `record` rule and to the forms its writer uses (refused at load time
/// otherwise). The checks work together: the ndarray, scalar and wrapper checks take a dtype
/// only from a record the `numpy_dtype` check saw, so a policy that names one without the
/// other refuses those pickles rather than trusting an unchecked dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Check {
    /// `"numpy_dtype"`: `numpy.dtype(type, False, True)` and its BUILD state, exactly as
    /// numpy's `arraydescr_reduce` writes them for that type (`src/policy/check/numpy.rs`).
    NumpyDtype,
    /// `"numpy_reconstruct"`: `_reconstruct(numpy.ndarray, (0,), b'b')` and one BUILD with
    /// `(1, shape, dtype, is_fortran, data)`, data a list of exactly `prod(shape)` items for a
    /// dtype holding objects and bytes of exactly `prod(shape) x itemsize` otherwise, as
    /// numpy's `array_reduce` writes them.
    NumpyReconstruct,
    /// `"numpy_scalar"`: `scalar(dtype, bytes)`, a dtype holding no objects and bytes of
    /// exactly its itemsize, as numpy's scalars' `__reduce__` write it.
    NumpyScalar,
    /// `"joblib_array_wrapper"`: `NumpyArrayWrapper` made by NEWOBJ with no arguments and
    /// built once with joblib's attributes; inside a joblib file the build reads the array
    /// bytes joblib's `read_array` reads after the BUILD (`src/policy/check/joblib.rs`).
    /// Outside a joblib file its BUILD is refused: `pickle.loads` would read those bytes as
    /// opcodes, `joblib.load` as an array.
    JoblibArrayWrapper,
}

impl Check {
    /// The TOML name of each check, in [`Check`]'s order.
    pub const NAMES: [(&'static str, Check); 4] = [
        ("numpy_dtype", Check::NumpyDtype),
        ("numpy_reconstruct", Check::NumpyReconstruct),
        ("numpy_scalar", Check::NumpyScalar),
        ("joblib_array_wrapper", Check::JoblibArrayWrapper),
    ];

    /// The check's name as policy files spell it.
    pub fn name(self) -> &'static str {
        match self {
            Check::NumpyDtype => "numpy_dtype",
            Check::NumpyReconstruct => "numpy_reconstruct",
            Check::NumpyScalar => "numpy_scalar",
            Check::JoblibArrayWrapper => "joblib_array_wrapper",
        }
    }

    /// Parses a check name.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, c)| c)
    }

    /// The forms the check's writer uses: a rule naming the check may allow no other (its
    /// forms are checked against these when the policy is loaded or built).
    pub fn forms(self) -> Forms {
        match self {
            Check::NumpyDtype | Check::NumpyReconstruct => Forms {
                reduce: true,
                build: true,
                ..Forms::NONE
            },
            Check::NumpyScalar => Forms {
                reduce: true,
                ..Forms::NONE
            },
            Check::JoblibArrayWrapper => Forms {
                newobj: true,
                build: true,
                ..Forms::NONE
            },
        }
    }
}
