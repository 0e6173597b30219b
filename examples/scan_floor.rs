//! The floor of any scan (issue 6's scan-only target, 100x `pickletools.genops`), for
//! bench/NOTES.md: what walking a pickle's opcodes one after another costs before anything is
//! checked, on this machine.
//!
//! ```sh
//! cargo run --release --example scan_floor FILE...
//! ```
//!
//! For each file, the median of 9 runs (milliseconds) of:
//! - `walk`: finding each opcode's length from a 256-entry table made from
//!   [`picklewarden::Opcode::arg`] (fixed sizes; the length prefix of BINUNICODE and the rest
//!   read; a line found with a byte search), and summing the opcode bytes so that no run can
//!   be skipped. Nothing is validated: no UTF-8, no memo, no stack, no policy, no limits.
//! - `utf8`: `simdutf8::basic::from_utf8` over the payloads of the text opcodes the walk met
//!   (what a scan must validate however it walks).
//!
//! `walk + utf8` against genops' time on the same file (`bench/compare.py --tools genops`)
//! bounds the ratio a validating scan can reach here.

use std::time::Instant;

use picklewarden::opcode::Arg;
use picklewarden::Opcode;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// How the walk finds an opcode's end.
#[derive(Clone, Copy)]
enum Step {
    /// Unknown byte: the walk stops.
    Stop,
    /// This many bytes, opcode included.
    Fixed(usize),
    /// A length prefix of 1, 4 or 8 bytes; `text` when the payload is UTF-8 text.
    Prefixed { width: usize, text: bool },
    /// One or two newline-terminated lines.
    Lines(usize),
}

fn table() -> [Step; 256] {
    let mut t = [Step::Stop; 256];
    for (b, slot) in t.iter_mut().enumerate() {
        let Some(op) = u8::try_from(b).ok().and_then(Opcode::from_byte) else {
            continue;
        };
        let text = matches!(
            op,
            Opcode::ShortBinunicode | Opcode::Binunicode | Opcode::Binunicode8
        );
        *slot = match op.arg() {
            Arg::Len1 => Step::Prefixed { width: 1, text },
            Arg::Len4 => Step::Prefixed { width: 4, text },
            Arg::Len8 => Step::Prefixed { width: 8, text },
            Arg::Line => Step::Lines(1),
            Arg::TwoLines => Step::Lines(2),
            a => Step::Fixed(1 + usize::from(a.fixed_size().unwrap_or(0))),
        };
    }
    t
}

/// Walks `input`; returns the opcode count, a checksum of the opcode bytes, and the text
/// payloads' (start, end) ranges when `texts` is given.
fn walk(input: &[u8], t: &[Step; 256], mut texts: Option<&mut Vec<(usize, usize)>>) -> (u64, u64) {
    let (mut pos, mut count, mut sum) = (0usize, 0u64, 0u64);
    while let Some(&op) = input.get(pos) {
        count += 1;
        sum = sum.wrapping_add(u64::from(op));
        let step = t.get(usize::from(op)).copied().unwrap_or(Step::Stop);
        pos = match step {
            Step::Stop => break,
            Step::Fixed(n) => pos + n,
            Step::Prefixed { width, text } => {
                let mut len = [0u8; 8];
                let Some(prefix) = input.get(pos + 1..pos + 1 + width) else {
                    break;
                };
                len.get_mut(..width)
                    .unwrap_or_default()
                    .copy_from_slice(prefix);
                let start = pos + 1 + width;
                let end = start.saturating_add(u64::from_le_bytes(len) as usize);
                if text {
                    if let Some(v) = texts.as_deref_mut() {
                        v.push((start, end.min(input.len())));
                    }
                }
                end
            }
            Step::Lines(n) => {
                let mut at = pos + 1;
                for _ in 0..n {
                    at += input
                        .get(at..)
                        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
                        .map_or(input.len(), |i| i + 1);
                }
                at
            }
        };
        if op == Opcode::Stop.byte() && pos >= input.len() {
            break;
        }
    }
    (count, sum)
}

fn main() {
    let t = table();
    for file in std::env::args().skip(1) {
        let input = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{file}: {e}");
                std::process::exit(2);
            }
        };
        let mut texts = Vec::new();
        let (count, _) = walk(&input, &t, Some(&mut texts));
        let (mut walks, mut utf8) = (Vec::new(), Vec::new());
        for _ in 0..9 {
            let start = Instant::now();
            let (n, sum) = walk(&input, &t, None);
            walks.push(start.elapsed().as_secs_f64() * 1e3);
            assert_eq!(n, count, "{sum}");
            let start = Instant::now();
            let valid = texts
                .iter()
                .filter(|&&(a, b)| {
                    simdutf8::basic::from_utf8(input.get(a..b).unwrap_or_default()).is_ok()
                })
                .count();
            utf8.push(start.elapsed().as_secs_f64() * 1e3);
            assert!(valid <= texts.len());
        }
        println!(
            "{file}: {count} opcodes, {} texts: walk {:.1} ms, utf8 {:.1} ms (median of 9)",
            texts.len(),
            median(walks),
            median(utf8)
        );
    }
}
