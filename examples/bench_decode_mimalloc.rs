//! `bench_decode` (same arguments, same JSON line) with mimalloc as the program's global
//! allocator instead of the system's (glibc malloc on Linux), for `bench/compare.py`'s
//! `pw-mimalloc` tool: what a program that embeds the library and picks mimalloc gets.
//!
//! ```sh
//! cargo build --release --features bench-mimalloc --example bench_decode_mimalloc
//! target/release/examples/bench_decode_mimalloc FILE [RUNS] [--mode decode|json|scan] [--reuse]
//! ```
//!
//! The library never chooses an allocator; docs/performance.md ("Allocator") gives the figures
//! and why the `picklewarden` binary (whose `serve` bounds its address space and RSS) keeps the
//! system allocator.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "bench_decode.rs"]
mod bench_decode;

fn main() -> std::process::ExitCode {
    bench_decode::main()
}
