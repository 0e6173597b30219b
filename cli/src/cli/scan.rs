//! `picklewarden scan`: the scan-only mode. One validating pass over the opcodes, building no
//! values: the verdict of every check the scan makes, the globals named and the opcode counts,
//! as one JSON object on stdout. The checks only the build pass makes (constructor arguments,
//! hashability, nesting depth, node/item/allocation budgets) are not run: use `check` for the
//! full verdict.

use std::io::{self, Write};

use clap::Args;
use picklewarden::{Error, Opcode};
use serde_json::{json, Map, Value};

use super::{read_input, Common, Fatal};

/// Options of `scan`.
#[derive(Args, Debug)]
pub(crate) struct Opts {
    #[command(flatten)]
    pub(crate) common: Common,
}

/// The JSON form of a refusal, as `scan` and the Mitogen commands print it.
pub(crate) fn error_json(e: &Error) -> Value {
    json!({
        "kind": e.kind().name(),
        "category": e.category().name(),
        "offset": e.offset(),
        "opcode": e.opcode_name(),
        "reason": e.to_string(),
    })
}

pub(crate) fn run(opts: &Opts) -> Result<Result<(), Error>, Fatal> {
    let common = &opts.common;
    let policy = common.policy()?;
    let limits = common.limits(&policy)?;
    let input = read_input(common.input()?, limits.max_input_bytes)?;
    let report = picklewarden::Scanner::new(&input, &policy)
        .limits(limits)
        .pickles(if common.stream {
            picklewarden::Pickles::Stream
        } else {
            picklewarden::Pickles::One
        })
        .buffers((!common.buffers.is_empty()).then_some(common.buffers.len()))
        .allow_trailing(common.allow_trailing)
        .run();
    let mut opcodes = Map::new();
    for op in Opcode::ALL {
        let n = report
            .opcode_counts
            .get(usize::from(op.byte()))
            .copied()
            .unwrap_or(0);
        if n > 0 {
            opcodes.insert(op.name().to_owned(), json!(n));
        }
    }
    let globals: Vec<Value> = report
        .globals
        .iter()
        .map(|g| json!({"module": g.module, "name": g.name, "allowed": g.allowed, "offset": g.offset}))
        .collect();
    let out = json!({
        "verdict": if report.result.is_ok() { "accepted" } else { "refused" },
        "error": report.result.as_ref().err().map(error_json),
        "policy": policy.name,
        "bytes": input.len(),
        "protocol": report.protocol,
        "pickles": report.pickles,
        "trailing": report.trailing.map(|t| json!({"offset": t.offset, "length": t.len})),
        "globals": globals,
        "opcodes": opcodes,
    });
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{out}") {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Fatal(format!("cannot write output: {e}"))),
    }
    Ok(report.result)
}
