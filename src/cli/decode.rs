//! `picklewarden decode`: the value as typed JSON (`docs/typed-json.md`) or Python-like repr.

use std::io::{self, Write};

use clap::{Args, ValueEnum};
use picklewarden::Error;

use super::{with_document, Common, Fatal};

/// Output formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// Typed JSON (picklewarden-typed-json/1), one document followed by a newline.
    Json,
    /// Python-like repr text, one line per pickle.
    Repr,
}

/// Options of `decode`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) fn run(opts: &Opts) -> Result<Result<(), Error>, Fatal> {
    with_document(&opts.common, |doc| {
        let mut text = match opts.format {
            Format::Json => picklewarden::json::to_typed_json(doc),
            Format::Repr => picklewarden::repr::to_repr(doc),
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    })
}
