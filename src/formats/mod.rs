//! Formats that carry pickles: readers around the machine that find the pickles, bound what
//! they read and apply the format's own rules.
//!
//! - [`mitogen`]: Mitogen message frames (also `picklewarden::mitogen`).
//!
//! Model files: the containers machine-learning tools wrap pickles in, read by content (never by
//! file name) with bounded reads, their pickles checked by the scan and the build under a
//! policy, and what the pickles refer to outside themselves (torch storages) checked against
//! what the container holds.
//!
//! - [`container`]: detection ([`container::detect`]), the verdict of one file
//!   ([`container::scan_bytes`]): [`container::FileReport`].
//! - [`torch`]: torch zip checkpoints (`torch.save` since 1.6), TorchScript archives, the
//!   legacy format (before 1.6) and the older tar layout (`torch_tar`); storage references
//!   checked, tensors listed.
//! - [`numpy`]: `.npy` (object arrays carry a pickle after the header) and `.npz`.
//! - [`tensors`]: the tensors of a torch checkpoint (name, dtype, shape, stride, storage
//!   offset, storage key, byte range), for Rust programs that read checkpoints.
//! - [`joblib`]: joblib files, plain and compressed, with the array bytes joblib writes
//!   between pickle opcodes.
//!
//! Everything a container could make a reader do is bounded by [`container::ModelLimits`]:
//! entry counts, entry sizes, decompressed bytes and the compression ratio.

pub mod container;
mod decompress;
mod globals;
pub mod joblib;
pub mod mitogen;
mod npy_header;
pub mod numpy;
mod report;
pub mod safetensors;
mod safetensors_header;
mod severity;
pub(crate) mod sniff;
mod tar;
pub mod tensors;
pub mod torch;
mod torch_tar;
mod zip_check;

#[cfg(test)]
mod tests;
