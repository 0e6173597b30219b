//! The fuzz targets' bodies under plain `cargo test` (no libFuzzer), so they cannot rot: the
//! generator and harness in `fuzz/src/` are compiled here through `#[path]` and run over
//! every file of `tests/corpus/{good,hostile}`, `tests/regression/`, `fuzz/seeds/<target>/`,
//! `fuzz/corpus/<target>/` when present (git-ignored; `fuzz/seed.sh` fills it), and a few
//! thousand deterministic pseudo-random inputs (xorshift, fixed seeds).

// Test code: a failed invariant is a panic, by design (clippy.toml's allow-*-in-tests covers
// #[test] fns only, not the helpers and the shared harness module).
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

#[allow(unreachable_pub, dead_code, missing_docs)]
#[path = "../fuzz/src/containers.rs"]
mod containers;
#[allow(unreachable_pub, dead_code, missing_docs)]
#[path = "../fuzz/src/gen.rs"]
mod gen;
// unused_imports: the harness re-exports (`pub use`) what the fuzz crate's targets name.
#[allow(unreachable_pub, dead_code, missing_docs, unused_imports)]
#[path = "../fuzz/src/harness/mod.rs"]
mod harness;

use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};

/// Marsaglia's xorshift64: deterministic, no extra crate.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every regular file of `dir` (sorted), except manifests and notes; empty if `dir` is absent.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| {
            !matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("tsv" | "md" | "txt")
            )
        })
        .collect();
    v.sort();
    v
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Reads a file that a running fuzzer may have just removed (libFuzzer replaces corpus files
/// when it finds smaller ones): `None` if it is gone.
fn read_if_present(path: &Path) -> Option<Vec<u8>> {
    match std::fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// Runs `body` on `input`, naming the file if it panics.
fn run_named(name: &str, input: &[u8], body: fn(&[u8])) {
    let r = std::panic::catch_unwind(|| body(input));
    if let Err(e) = r {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        panic!("{name}: harness invariant failed: {msg}");
    }
}

fn structured_body(bytes: &[u8]) {
    if let Ok(program) = gen::Program::arbitrary_take_rest(Unstructured::new(bytes)) {
        harness::check_program(&program);
    }
}

/// Regression files whose bug is still `open` in tests/regression/EXPECTED.tsv (they may hang).
fn open_regressions() -> Vec<PathBuf> {
    let text =
        std::fs::read_to_string(root().join("tests/regression/EXPECTED.tsv")).unwrap_or_default();
    text.lines()
        .filter(|l| l.split('\t').nth(3) == Some("open"))
        .filter_map(|l| l.split('\t').next())
        .map(|f| root().join("tests/regression").join(f))
        .collect()
}

/// The corpora every target replays: the test corpora, the regression files (except open
/// bugs), the committed seeds and the fuzz corpus of `target` if present; `scan_build_agree`
/// also replays the audit's attack vectors (the one-pass decode must refuse each as the scan
/// and the build do).
fn replay_files(target: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [
        "tests/corpus/good",
        "tests/corpus/hostile",
        "tests/regression",
    ] {
        v.extend(files(&root().join(dir)));
    }
    if target == "scan_build_agree" {
        v.extend(files(&root().join("audit/vectors")));
    }
    let open = open_regressions();
    v.retain(|p| !open.contains(p));
    v.extend(files(&root().join("fuzz/seeds").join(target)));
    v.extend(files(&root().join("fuzz/corpus").join(target)));
    v
}

#[test]
fn decode_target_replays_the_corpora() {
    let all = replay_files("decode");
    assert!(all.len() > 400, "corpora not found: {} files", all.len());
    for path in &all {
        if let Some(data) = read_if_present(path) {
            run_named(&path.display().to_string(), &data, harness::check_decode);
        }
    }
}

#[test]
fn scan_build_agree_target_replays_the_corpora() {
    for path in replay_files("scan_build_agree") {
        if let Some(data) = read_if_present(&path) {
            run_named(
                &path.display().to_string(),
                &data,
                harness::check_scan_build_agree,
            );
        }
    }
}

#[test]
fn mitogen_frames_target_replays_the_corpora() {
    // Pickle files with a control byte in front: odd bytes wrap them in a frame, even ones
    // read them as a raw stream.
    for path in replay_files("mitogen_frames") {
        let Some(data) = read_if_present(&path) else {
            continue;
        };
        for ctl in [0u8, 1, 3, 5] {
            let mut input = vec![ctl];
            input.extend_from_slice(&data);
            run_named(
                &format!("{} (control byte {ctl})", path.display()),
                &input,
                harness::check_mitogen_frames,
            );
        }
    }
}

#[test]
fn mitogen_frames_target_on_pseudo_random_inputs() {
    let bases = mutation_bases();
    let mut rng = XorShift(0x4F1B_BCDC_BFA5_3E0B);
    for i in 0..2000 {
        let mut input = vec![rng.next() as u8];
        input.extend(pseudo_random_input(&mut rng, &bases));
        run_named(
            &format!("input {i}: {input:?}"),
            &input,
            harness::check_mitogen_frames,
        );
    }
}

#[test]
fn structured_target_replays_its_corpus() {
    // Pickle files read as generator input are just more pseudo-random programs.
    for path in replay_files("structured") {
        if let Some(data) = read_if_present(&path) {
            run_named(&path.display().to_string(), &data, structured_body);
        }
    }
}

/// Small good-corpus files to mutate.
fn mutation_bases() -> Vec<Vec<u8>> {
    files(&root().join("tests/corpus/good"))
        .iter()
        .map(|p| read(p))
        .filter(|b| b.len() <= 512)
        .collect()
}

/// One pseudo-random input: random bytes, or a good pickle with a few bytes changed, cut or
/// spliced.
fn pseudo_random_input(rng: &mut XorShift, bases: &[Vec<u8>]) -> Vec<u8> {
    match (rng.below(4), bases.get(rng.below(bases.len()))) {
        (0, _) | (_, None) => {
            let len = rng.below(96);
            rng.bytes(len)
        }
        (1, Some(base)) => {
            let mut b = base.clone();
            for _ in 0..=rng.below(4) {
                if b.is_empty() {
                    break;
                }
                let at = rng.below(b.len());
                b[at] = rng.next() as u8;
            }
            b
        }
        (2, Some(base)) => base[..rng.below(base.len() + 1)].to_vec(),
        (_, Some(base)) => {
            let other = &bases[rng.below(bases.len())];
            let cut = rng.below(base.len() + 1);
            let from = rng.below(other.len() + 1);
            let mut b = base[..cut].to_vec();
            b.extend_from_slice(&other[from..]);
            b
        }
    }
}

#[test]
fn decode_target_on_pseudo_random_inputs() {
    let bases = mutation_bases();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for i in 0..3000 {
        let input = pseudo_random_input(&mut rng, &bases);
        run_named(
            &format!("input {i}: {input:?}"),
            &input,
            harness::check_decode,
        );
    }
}

#[test]
fn scan_build_agree_target_on_pseudo_random_inputs() {
    let bases = mutation_bases();
    let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
    for i in 0..3000 {
        let input = pseudo_random_input(&mut rng, &bases);
        run_named(
            &format!("input {i}: {input:?}"),
            &input,
            harness::check_scan_build_agree,
        );
    }
}

#[test]
fn structured_target_on_pseudo_random_programs() {
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut decoded = 0;
    for i in 0..3000 {
        let len = 16 + rng.below(400);
        let bytes = rng.bytes(len);
        if gen::Program::arbitrary_take_rest(Unstructured::new(&bytes)).is_ok() {
            decoded += 1;
        }
        run_named(&format!("program {i}: {bytes:?}"), &bytes, structured_body);
    }
    assert!(
        decoded > 2000,
        "only {decoded} of 3000 byte strings made a program"
    );
}

#[test]
fn structured_generator_writes_what_it_says() {
    use gen::{FrameLen, Op, Program};
    let p = Program {
        proto: Some(4),
        ops: vec![
            Op::Frame(FrameLen::Ops(3)),
            Op::EmptyList,
            Op::Binint1(7),
            Op::Append,
            Op::Repeat { span: 2, times: 2 },
        ],
        stop: true,
        buffers: None,
    };
    assert_eq!(
        gen::serialise(&p),
        b"\x80\x04\x95\x04\x00\x00\x00\x00\x00\x00\x00]K\x07aK\x07aK\x07a.".to_vec()
    );
}

/// The harness's depth oracle (the nesting of node objects in typed JSON) counts a complex as
/// the scalar it is, though typed JSON writes its parts as float objects: eleven lists around
/// `complex(1, 2)` are 12 deep, exactly the tight limit, and the harness accepts that.
#[test]
fn depth_oracle_counts_a_complex_as_a_scalar() {
    let mut p = b"\x80\x02".to_vec();
    p.extend_from_slice(&[b']'; 11]);
    p.extend_from_slice(b"c__builtin__\ncomplex\nK\x01K\x02\x86R");
    p.extend_from_slice(&[b'a'; 11]);
    p.push(b'.');
    let doc = picklewarden::decode(&p, &picklewarden::Policy::data()).unwrap();
    assert_eq!(harness::nesting_depth(&doc), 12);
    harness::check_decode(&p);
}

/// The `containers` target over the model corpus: each file behind the "no magic" selector,
/// and each torch tar (trailing zeros cut, as fuzz/seed.sh seeds it) behind the tar selector,
/// which must rebuild a tar the reader reads as the original; then pseudo-random mutations of
/// those tar inputs, which must not panic.
#[test]
fn containers_target_reads_the_models_and_the_tar_layout() {
    use picklewarden::formats::container::{scan_bytes, Format, ScanOptions};
    let mut tars = Vec::new();
    for dir in ["tests/corpus/models/good", "tests/corpus/models/hostile"] {
        for f in files(&root().join(dir)) {
            let bytes = read(&f);
            let mut input = vec![0u8];
            input.extend_from_slice(&bytes);
            containers::check_containers(&input);
            let whole = scan_bytes(&bytes, &ScanOptions::default());
            if whole.format == Format::TorchTar {
                let end = bytes
                    .iter()
                    .rposition(|&b| b != 0)
                    .map_or(0, |p| (p / 512 + 1) * 512);
                let mut input = vec![containers::TAR_SELECTOR];
                input.extend_from_slice(&bytes[..end]);
                let shaped = scan_bytes(
                    &containers::container_input(&input),
                    &ScanOptions::default(),
                );
                assert_eq!(shaped.format, Format::TorchTar, "{}", f.display());
                assert_eq!(shaped.verdict, whole.verdict, "{}", f.display());
                tars.push(input);
            }
        }
    }
    assert!(tars.len() >= 4, "{} tar fixtures", tars.len());
    let mut rng = XorShift(0x7a5f_00d1);
    for _ in 0..300 {
        let mut input = tars[rng.below(tars.len())].clone();
        for _ in 0..1 + rng.below(4) {
            let at = 1 + rng.below(input.len() - 1);
            input[at] = rng.next() as u8;
        }
        containers::check_containers(&input);
    }
}
