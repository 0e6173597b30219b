//! `picklewarden convert CHECKPOINT OUT.safetensors`: a torch checkpoint's tensors (the zip
//! format, the legacy format or the older tar layout) as safetensors, after a clean scan under
//! the `torch` policy, without running pickle code.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use picklewarden::formats::safetensors::{convert, ConvertError};

/// Options of `convert`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    /// The torch checkpoint: a `torch.save` zip file, the legacy format (torch before 1.6, or
    /// `_use_new_zipfile_serialization=False`) or the older tar layout.
    #[arg(value_name = "CHECKPOINT")]
    input: PathBuf,
    /// The safetensors file to write.
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// Most bytes the safetensors file may take (a number, or with K, M or G as --limit):
    /// tensors that share a storage are each written whole, so the output can outgrow the
    /// checkpoint. Default: 4 times the bytes of the distinct storages the tensors use. Past it
    /// nothing is written and the exit status is 1.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_output: Option<u64>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    picklewarden::limits::parse_size(text).ok_or_else(|| format!("bad size {text:?}"))
}

pub(crate) fn run(opts: &Opts) -> ExitCode {
    let fail = |code: u8, msg: String| {
        let _ = writeln!(io::stderr().lock(), "picklewarden: {msg}");
        ExitCode::from(code)
    };
    let input = match File::open(&opts.input) {
        Ok(f) => BufReader::new(f),
        Err(e) => return fail(2, format!("cannot read {}: {e}", opts.input.display())),
    };
    let output = match File::create(&opts.output) {
        Ok(f) => BufWriter::new(f),
        Err(e) => return fail(2, format!("cannot write {}: {e}", opts.output.display())),
    };
    match convert(input, output, opts.max_output) {
        Ok(n) => {
            let _ = writeln!(io::stderr().lock(), "picklewarden: {n} tensors written");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::fs::remove_file(&opts.output);
            let code = match e {
                ConvertError::Refused(_)
                | ConvertError::Unsupported(_)
                | ConvertError::OutputTooLarge { .. } => 1,
                ConvertError::Io(_) => 2,
                // A failure this tool does not know: not converted, reported as refused.
                _ => 1,
            };
            fail(
                code,
                format!("{}: not converted: {e}", opts.input.display()),
            )
        }
    }
}
