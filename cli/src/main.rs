//! The `picklewarden` command-line tool: `check` and `decode` pickle files under a policy.
//! `main` only dispatches; each subcommand lives in `cli/src/cli/`.

mod cli;
#[cfg(feature = "service")]
mod service;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::run(args)
}
