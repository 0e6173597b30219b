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
//! - [`container`]: what a file is by its content ([`container::detect`]) and its verdict
//!   ([`container::scan_bytes`], [`container::scan_reader`]): [`container::FileReport`], with
//!   a refusal's [`container::Severity`] (`severity.rs`, from `policy/runs-code.tsv`). A file
//!   that is no container is a plain pickle only when it parses as one (`sniff.rs`); one that
//!   carries no pickle is skipped, named by what it looks like ([`container::Content`]).
//! - [`torch`]: torch zip checkpoints (`torch.save` since 1.6) and TorchScript archives; the
//!   legacy format (before 1.6, `torch_legacy.rs`) and the older tar layout (`torch_tar.rs`,
//!   the tar read as `tarfile` reads it in `tar.rs`); storage references checked.
//! - [`numpy`]: `.npy` (object arrays carry a pickle after the header) and `.npz`.
//! - [`joblib`]: joblib files, plain and compressed, with the array bytes joblib writes
//!   between pickle opcodes.
//! - [`safetensors`]: a torch checkpoint written as safetensors (`convert`); a safetensors
//!   file's header checked as its reader checks it (`safetensors_header.rs`).
//! - [`tensors`]: the tensors of a torch checkpoint (name, dtype, shape, stride, storage
//!   offset, storage key, byte range), for Rust programs that read checkpoints.
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
mod torch_legacy;
mod torch_tar;
mod zip_check;

#[cfg(test)]
mod tests;
