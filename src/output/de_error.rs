//! [`DeError`], why a serde walk of a document (or the decode before it) failed.

use std::fmt;

use serde::de;

/// Why a deserialization failed.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum DeError {
    /// The decode refused the input (only from [`from_slice`](super::de::from_slice)): the same error
    /// [`decode`](crate::decode) gives.
    Decode(crate::Error),
    /// A container was met again on its own path: the value holds itself.
    Cycle {
        /// The container's Python type name.
        type_name: &'static str,
    },
    /// More values were visited than [`Deserializer::max_visits`](super::de::Deserializer::max_visits) allows (shared values count
    /// once per place they are reached).
    TooManyVisits {
        /// The budget.
        max: u64,
    },
    /// The walk went deeper than [`Deserializer::max_depth`](super::de::Deserializer::max_depth) containers.
    TooDeep {
        /// The bound.
        max: u64,
    },
    /// An int that does not fit 128 bits (signed or unsigned).
    IntTooBig {
        /// Its size in bits.
        bits: u64,
    },
    /// A str with lone surrogates, which is not UTF-8.
    Surrogates,
    /// The target type refused the value (a type mismatch, a missing field, an int out of its
    /// range...): serde's message.
    Message(String),
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeError::Decode(e) => e.fmt(f),
            DeError::Cycle { type_name } => {
                write!(f, "a {type_name} holds itself (a cycle), which a tree cannot hold")
            }
            DeError::TooManyVisits { max } => write!(
                f,
                "more than {max} values visited (shared values count at every place they are reached)"
            ),
            DeError::TooDeep { max } => write!(f, "nested deeper than {max} containers"),
            DeError::IntTooBig { bits } => write!(f, "an int of {bits} bits does not fit 128 bits"),
            DeError::Surrogates => f.write_str("a str with lone surrogates is not UTF-8"),
            DeError::Message(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for DeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DeError::Decode(e) => Some(e),
            _ => None,
        }
    }
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> DeError {
        DeError::Message(msg.to_string())
    }
}

impl From<crate::Error> for DeError {
    fn from(e: crate::Error) -> DeError {
        DeError::Decode(e)
    }
}
