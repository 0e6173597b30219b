//! The writers of a decoded document: typed JSON ([`json`]), Python-like repr text ([`repr`])
//! and the canonical pickle ([`canonical`]). Each is a visitor of one explicit-stack walk
//! over the document ([`walk`]), which keeps the bookkeeping they share (in-degrees, the ids
//! or memo indices of shared values, the path of open containers); [`sink`] holds the text
//! writers' output bounds.

pub mod canonical;
#[cfg(feature = "serde")]
pub mod de;
#[cfg(feature = "serde")]
mod de_error;
pub mod json;
pub mod repr;
#[cfg(feature = "serde")]
pub mod ser;
#[cfg(feature = "serde")]
pub(crate) mod serde_path;
pub(crate) mod sink;
pub(crate) mod walk;
