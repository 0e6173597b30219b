//! `picklewarden decode`: the value as typed JSON (`docs/typed-json.md`), Python-like repr, or
//! a canonical pickle ([`picklewarden::canonical`]).

use std::io::{self, IsTerminal, Write};

use clap::{Args, ValueEnum};
use picklewarden::{Error, OutputBound};

use super::{with_document, Common, Fatal};

/// Output formats.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// Typed JSON (picklewarden-typed-json/1), one document followed by a newline.
    Json,
    /// Python-like repr text, one line per pickle.
    Repr,
    /// A canonical pickle of the value (binary; not written to a terminal), protocol 5 unless
    /// --protocol 2: only what the policy allowed, no memo entry but for shared values, one
    /// form per value.
    Pickle,
}

/// Protocols of `--format pickle`.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Protocol {
    /// Protocol 2, as Python 3 writes it for Python 2 and Mitogen (bytes as
    /// `_codecs.encode`, globals under their Python 2 names).
    #[value(name = "2")]
    V2,
    /// Protocol 5.
    #[value(name = "5")]
    V5,
}

/// Options of `decode`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// With --format pickle: the protocol of the canonical pickle
    /// (`picklewarden::canonical::Protocol`).
    #[arg(long, value_enum, default_value = "5")]
    protocol: Protocol,
    /// The input is a Mitogen stream: one JSON line per frame, `{"offset", "header",
    /// "values"}` (or `binary`, `raw`, `dead`, `refused` in place of `values`). The policy
    /// defaults to `mitogen`. Exit 1 if any frame was refused.
    #[arg(long, conflicts_with_all = ["format", "protocol", "stream", "buffers", "allow_trailing"])]
    pub(crate) mitogen: bool,
    /// With --mitogen: the largest message payload accepted, in bytes.
    #[arg(long, default_value_t = picklewarden::mitogen::DEFAULT_MAX_MESSAGE_BYTES, value_name = "BYTES", value_parser = super::parse_size, requires = "mitogen")]
    max_message_bytes: u64,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// `decode --mitogen`: see [`super::mitogen::decode_frames`].
pub(crate) fn run_mitogen(opts: &Opts) -> Result<bool, Fatal> {
    super::mitogen::decode_frames(&opts.common, "mitogen", opts.max_message_bytes)
}

pub(crate) fn run(opts: &Opts) -> Result<Result<(), Error>, Fatal> {
    if matches!(opts.format, Format::Pickle) && io::stdout().is_terminal() {
        return Err(Fatal(
            "--format pickle writes binary: redirect standard output to a file or a pipe".into(),
        ));
    }
    if !matches!(opts.format, Format::Pickle) && matches!(opts.protocol, Protocol::V2) {
        return Err(Fatal("--protocol applies to --format pickle only".into()));
    }
    let protocol = match opts.protocol {
        Protocol::V2 => picklewarden::canonical::Protocol::V2,
        Protocol::V5 => picklewarden::canonical::Protocol::V5,
    };
    with_document(&opts.common, |doc| {
        let mut out = io::stdout().lock();
        // Written as it is made: the text is often several times the input's size.
        match opts.format {
            Format::Json => {
                picklewarden::json::write_typed_json(doc, &mut out)?;
                out.write_all(b"\n")?;
            }
            // One line per pickle, each ending in a newline.
            Format::Repr => picklewarden::repr::write_repr(doc, &mut out)?,
            // A record or a stream has no canonical pickle: an error of the output.
            Format::Pickle => {
                let bytes =
                    picklewarden::canonical::to_pickle_bounded(doc, protocol, OutputBound::NONE)
                        .map_err(|e| io::Error::new(io::ErrorKind::Unsupported, e))?;
                out.write_all(&bytes)?;
            }
        }
        out.flush()
    })
}
