//! The library in a few lines: decode a pickle file under the `data` policy and write its
//! typed JSON to stdout, or print why it was refused (exit 1).
//!
//! ```sh
//! cargo run --example decode_file -- tests/corpus/good/mixed_bag.p4.c.pkl
//! ```

use std::io::Write;
use std::process::ExitCode;

fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: decode_file FILE")?;
    let input = std::fs::read(path)?;
    // Policy::data(), Policy::builtin("mitogen"), or Policy::from_toml_str(&text) for a file.
    let policy = picklewarden::Policy::data();
    match picklewarden::Decoder::new(&input, &policy).decode() {
        Ok(doc) => {
            // The values are doc.get(id) from doc.root(); here, their typed JSON.
            let mut out = std::io::stdout().lock();
            picklewarden::json::write_typed_json(&doc, &mut out)?;
            writeln!(out)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // e.kind().name() is "global_not_allowed", "memo_key_missing", ...
            eprintln!("refused ({}): {e}", e.kind().name());
            Ok(ExitCode::from(1))
        }
    }
}
