//! `picklewarden check`: the full decode with every check; the result is discarded.

use clap::Args;
use picklewarden::Error;

use super::{with_document, Common, Fatal};

/// Options of `check`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) fn run(opts: &Opts) -> Result<Result<(), Error>, Fatal> {
    with_document(&opts.common, |_| Ok(()))
}
