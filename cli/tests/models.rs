//! The model-file corpus (tests/corpus/models, made by tests/python/gen_models.py with real
//! torch, numpy and joblib): each file's detected format, verdict and refusal kind against
//! its MANIFEST.tsv line; the `scan` command over it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use picklewarden::formats::container::{scan_bytes, ScanOptions, Verdict};

struct Row {
    file: String,
    format: String,
    verdict: String,
    kind: String,
}

fn manifest() -> Vec<Row> {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/corpus/models");
    let text = std::fs::read_to_string(root.join("MANIFEST.tsv")).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some(Row {
                file: f.next()?.to_owned(),
                format: f.next()?.to_owned(),
                verdict: f.next()?.to_owned(),
                kind: f.next()?.to_owned(),
            })
        })
        .collect()
}

#[test]
fn every_model_file_gets_its_manifest_verdict() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/corpus/models");
    let rows = manifest();
    assert!(rows.len() >= 50, "{} manifest rows", rows.len());
    let mut wrong = Vec::new();
    for row in &rows {
        let bytes = std::fs::read(root.join(&row.file)).unwrap_or_default();
        let r = scan_bytes(&bytes, &ScanOptions::default());
        let format = r.format.name();
        // joblib formats name their compression (joblib-gzip); the manifest says joblib.
        let format_ok = format == row.format || format.starts_with(&format!("{}-", row.format));
        let kind = r.reason.as_ref().map_or("-", |f| f.kind.as_str());
        let kind_ok = row.verdict != "refused" || kind == row.kind;
        if !format_ok || r.verdict.name() != row.verdict || !kind_ok {
            wrong.push(format!(
                "{}: want {} {} {}, got {} {} {} ({:?})",
                row.file,
                row.format,
                row.verdict,
                row.kind,
                format,
                r.verdict.name(),
                kind,
                r.reason.as_ref().map(|f| f.message.as_str())
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A refused file lists every global it names, those after the first refusal included.
#[test]
fn refused_torch_file_lists_globals_after_the_refusal() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/corpus/models");
    let bytes = std::fs::read(root.join("hostile/torch_eval_after_tensors.pt")).unwrap_or_default();
    let r = scan_bytes(&bytes, &ScanOptions::default());
    assert_eq!(r.verdict, Verdict::Refused);
    let names: Vec<String> = r
        .globals
        .iter()
        .map(|g| format!("{}.{}:{}", g.module, g.name, g.allowed))
        .collect();
    assert!(
        names.contains(&"__builtin__.eval:false".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"posix.system:false".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"torch._utils._rebuild_tensor_v2:true".to_owned()),
        "{names:?}"
    );
    assert!(r.globals.iter().any(|g| g.runs_code && g.name == "system"));
}

fn pw(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap()
}

/// `scan` over folders: exit 0 when every file is clean, 1 when one is refused; the JSON lists
/// each file with its format, verdict, reason and globals.
#[test]
fn scan_command_exit_codes_and_json() {
    let out = pw(&[
        "scan",
        "tests/corpus/models/good/state_dict.pt",
        "tests/corpus/models/good/floats.npy",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = pw(&["scan", "--format", "json", "tests/corpus/models/hostile"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    let swapped = files
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("swapped_data_pkl.pt"))
        .unwrap();
    assert_eq!(swapped["format"], "torch-zip");
    assert_eq!(swapped["verdict"], "refused");
    assert_eq!(swapped["reason"]["kind"], "global_not_allowed");
    assert_eq!(swapped["globals"][0]["module"], "posix");
    assert_eq!(swapped["globals"][0]["allowed"], false);
    assert_eq!(swapped["globals"][0]["runs_code"], true);
    // Incomplete and nothing refused: 3 (joblib's format before 0.9.3, which is not read:
    // joblib.dump({'a': 1}) of Python 3 then).
    let dir = std::env::temp_dir().join(format!("pw-models-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let zf = dir.join("old.joblib");
    std::fs::write(
        &zf,
        b"ZF0x11               x\x9ck`\xaa-d\x88`d``H,d\xf4f,\xd6\x03\x00!\xf2\x03\x8a",
    )
    .unwrap();
    let out = pw(&["scan", zf.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // A zip that is neither a checkpoint nor an npz carries no pickle: skipped, exit 0.
    let zip = dir.join("other.zip");
    // An empty zip archive: an end of central directory record alone.
    std::fs::write(&zip, b"PK\x05\x06\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0").unwrap();
    let out = pw(&["scan", "--format", "json", zip.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["files"][0]["verdict"], "skipped");
    assert_eq!(v["files"][0]["format"], "zip");
    assert_eq!(v["summary"]["skipped"], 1);
    let _ = std::fs::remove_dir_all(&dir);
    // A missing file: 2.
    assert_eq!(pw(&["scan", "no/such/file"]).status.code(), Some(2));
}

/// SARIF 2.1.0 with one result per refused global; `--trust` prints the TOML that would allow
/// them, with a warning on code-running globals, and that TOML loads as a policy.
#[test]
fn scan_sarif_and_trust() {
    let out = pw(&[
        "scan",
        "--format",
        "sarif",
        "tests/corpus/models/hostile/torch_eval_after_tensors.pt",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let results = v["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{results:?}");
    // Both are known to run code: rule runs_code, level error.
    assert!(results
        .iter()
        .all(|r| r["ruleId"] == "runs_code" && r["level"] == "error"));

    let out = pw(&[
        "scan",
        "--trust",
        "tests/corpus/models/hostile/torch_eval_after_tensors.pt",
    ]);
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(toml.contains("# WARNING: posix.system runs code"), "{toml}");
    assert!(toml.contains("at offset 0xe9"), "{toml}");
    // A complete policy: torch's, renamed, with the code-running globals left out.
    let p = picklewarden::Policy::from_toml_str(&toml).unwrap();
    assert_eq!(p.name, "torch-trusted");
    assert!(p.find("torch._utils", "_rebuild_tensor_v2").is_some());
    assert!(p.find("__builtin__", "eval").is_none());
    assert!(p.find("posix", "system").is_none());
    assert!(
        toml.contains("\n# module = \"posix\"\n# name = \"system\"\n"),
        "{toml}"
    );
}

/// `scan --trust FILE > trust.toml`, then `check --policy trust.toml FILE` and
/// `scan --policy trust.toml FILE`: the policy loads and accepts the file it was made from,
/// and still refuses what `data` refuses.
#[test]
fn trust_output_is_a_policy_that_accepts_its_file() {
    let dir = std::env::temp_dir().join(format!("pw-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Point(3, 4) as a class whose __reduce__ returns (myapp.Point, (3, 4)), protocol 2.
    let pickle = dir.join("point.pkl");
    std::fs::write(&pickle, b"\x80\x02cmyapp\nPoint\nK\x03K\x04\x86R.").unwrap();
    let pickle = pickle.to_str().unwrap();
    let out = pw(&["scan", "--trust", pickle]);
    assert_eq!(out.status.code(), Some(1), "the scan refused it");
    let toml = String::from_utf8(out.stdout).unwrap();
    assert!(toml.contains("\nname = \"model-trusted\"\n"), "{toml}");
    assert!(
        toml.contains(&format!(
            "# needed by {pickle} at offset 0x2\n[[global]]\nmodule = \"myapp\"\nname = \
             \"Point\"\nconstructor = \"record\"\n"
        )),
        "{toml}"
    );
    let policy = dir.join("trust.toml");
    std::fs::write(&policy, &toml).unwrap();
    let policy = policy.to_str().unwrap();
    let out = pw(&["check", "--policy", policy, pickle]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        pw(&["scan", "--policy", policy, pickle]).status.code(),
        Some(0)
    );
    // data's globals are kept, and what data refuses stays refused.
    let out = pw(&[
        "check",
        "--policy",
        policy,
        "tests/corpus/good/mixed_bag.p2.c.pkl",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let out = pw(&[
        "check",
        "--policy",
        policy,
        "tests/corpus/hostile/global-os.system-GLOBAL_REDUCE.pkl",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("by policy \"model-trusted\""), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The text report: a refusal's message names the offset the report gives (a joblib pickle
/// is checked with its arrays' bytes taken out, yet both name the offset in the file's
/// pickle), an entry's offset follows a comma, and each global's row shows its offset in hex
/// with `0x`, as the messages do.
#[test]
fn scan_text_offsets_agree_with_the_message() {
    let out = pw(&["scan", "tests/corpus/models/hostile/os_system.bz2.joblib"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "(global_not_allowed in decompressed, offset 0x126: global posix.system is not \
             allowed by policy \"model\" at offset 294 (0x126, opcode 0x93 STACK_GLOBAL))"
        ),
        "{text}"
    );
    assert!(
        text.contains("\n         0x126  decompressed: posix.system  NOT ALLOWED  (runs code)\n"),
        "{text}"
    );
    // The same offset in the JSON report's finding and global.
    let out = pw(&[
        "scan",
        "--format",
        "json",
        "tests/corpus/models/hostile/os_system.none.joblib",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = &v["files"][0];
    assert_eq!(file["reason"]["offset"], 294);
    let message = file["reason"]["message"].as_str().unwrap();
    assert!(message.contains("at offset 294 (0x126,"), "{message}");
    let system = file["globals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "system")
        .unwrap();
    assert_eq!(system["offset"], 294);

    let out = pw(&[
        "scan",
        "tests/corpus/models/hostile/object_array_os_system.joblib",
        "tests/corpus/models/hostile/objects_os_system.npz",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("(global_not_allowed in array 1 at 0xe2, offset 0xa3: global posix.system"),
        "{text}"
    );
    assert!(
        text.contains("(global_not_allowed in bad.npy, offset 0xa0: global posix.system"),
        "{text}"
    );
    assert!(
        text.contains("\n          0xa0  bad.npy: posix.system  NOT ALLOWED  (runs code)\n"),
        "{text}"
    );
}

/// A joblib file's arrays are read by its scan only: to `check --policy numpy` (what
/// `pickle.loads` would make of the file) a wrapper's BUILD is refused, since `pickle.loads`
/// reads an array's bytes as opcodes where `joblib.load` reads an array; `scan` reads it, and
/// lists the globals of the pickle around the arrays at their offsets in the file.
#[test]
fn joblib_arrays_are_read_by_the_scan_only() {
    let file = "tests/corpus/models/good/jl_dtypes.none.joblib";
    // pickle.loads fails at the first array's padding byte, and so does the check.
    let out = pw(&["check", "--policy", "numpy", file]);
    assert_eq!(out.status.code(), Some(1));
    // joblib.dump({'e': np.zeros(0)}) to a stream without tell(), protocol 2: no padding and
    // no array bytes, so pickle.loads reads a NumpyArrayWrapper object; still refused, as
    // joblib.load reads an array there.
    let dir = std::env::temp_dir().join(format!("pw-jl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.joblib");
    let hex = "80027d71005801000000657101636a6f626c69622e6e756d70795f7069636b6c650a4e756d70794172\
               726179577261707065720a7102298171037d7104285808000000737562636c6173737105636e756d\
               70790a6e6461727261790a71065805000000736861706571074b0085710858050000006f72646572\
               7109580100000043710a58050000006474797065710b636e756d70790a64747970650a710c580200\
               00006638710d898887710e52710f284b0358010000003c71104e4e4e4affffffff4affffffff4b00\
               74711162580a000000616c6c6f775f6d6d6170711288581b0000006e756d70795f61727261795f61\
               6c69676e6d656e745f627974657371134e7562732e";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    std::fs::write(&empty, &bytes).unwrap();
    let empty = empty.to_str().unwrap();
    let out = pw(&["check", "--policy", "numpy", empty]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("non_canonical") && err.contains("a BUILD outside a joblib file"),
        "{err}"
    );
    assert_eq!(pw(&["scan", empty]).status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
    let out = pw(&["scan", "--format", "json", file]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &v["files"][0];
    let bytes =
        std::fs::read(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(file)).unwrap();
    // Every global listed in the pickle itself is at an opcode naming it in the file.
    let mut outer = 0;
    for g in f["globals"].as_array().unwrap() {
        if g["entry"] != "" {
            continue;
        }
        outer += 1;
        let at = g["offset"].as_u64().unwrap() as usize;
        assert!(
            matches!(bytes[at], b'c' | 0x93),
            "{g}: byte {:#x} at the offset",
            bytes[at]
        );
    }
    assert!(outer >= 3, "{f}");
    // One pickle for each object array (four), listed by the scan.
    let pickles = f["pickles"].as_array().unwrap();
    assert_eq!(pickles.len(), 5, "{pickles:?}");
}

/// `convert` bounds what it writes: 64 tensors viewing all of one 4,000-byte storage would
/// write 256,000 bytes, over the default bound (4 times the distinct storages' bytes), so
/// nothing is written and the exit status is 1; `--max-output` raises the bound, and below
/// the output's size refuses again.
#[test]
fn convert_refuses_output_past_its_bound() {
    let dir = std::env::temp_dir().join(format!("pw-convert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("views.safetensors");
    let out_s = out.to_str().unwrap();
    let input = "tests/corpus/models/good/views_64_of_one_storage.pt";
    let r = pw(&["convert", input, out_s]);
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("would take") && err.contains("more than the bound of"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is left behind");
    let r = pw(&["convert", "--max-output", "1M", input, out_s]);
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    let written = std::fs::metadata(&out).unwrap().len();
    // 64 tensors of 1,000 float32 (4,000 bytes each) after the 8-byte length and the header.
    let header = u64::from_le_bytes(std::fs::read(&out).unwrap()[..8].try_into().unwrap());
    assert_eq!(written, 8 + header + 64 * 4000);
    let r = pw(&[
        "convert",
        "--max-output",
        &(written - 1).to_string(),
        input,
        out_s,
    ]);
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    // A deflated storage is refused by the scan before anything is converted.
    let r = pw(&[
        "convert",
        "tests/corpus/models/hostile/storage_deflated.pt",
        out_s,
    ]);
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("stored"),
        "{r:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `convert` writes, for every torch checkpoint of the corpus (zip, legacy and tar), each
/// tensor byte for byte as torch loads it: tests/corpus/models/convert/EXPECTED.tsv, written by
/// tests/python/gen_convert.py from `torch.load(weights_only=True)` (tar: `weights_only=False`,
/// the only way torch reads that layout).
#[test]
fn convert_writes_what_torch_loads() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("tests/corpus/models");
    let text = std::fs::read_to_string(root.join("convert/EXPECTED.tsv")).unwrap();
    let mut want: std::collections::BTreeMap<String, Vec<Vec<String>>> = Default::default();
    for line in text.lines().skip(1) {
        let f: Vec<String> = line.split('\t').map(str::to_owned).collect();
        want.entry(f[0].clone()).or_default().push(f);
    }
    assert!(want.len() >= 12, "{} files", want.len());
    assert!(want.keys().any(|k| k.contains("legacy_")) && want.keys().any(|k| k.contains("tar_")));
    let dir = std::env::temp_dir().join(format!("pw-convert-eq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let st_name = |torch: &str| match torch {
        "float64" => "F64",
        "float32" => "F32",
        "float16" => "F16",
        "bfloat16" => "BF16",
        "int64" => "I64",
        "int32" => "I32",
        "int16" => "I16",
        "int8" => "I8",
        "uint8" => "U8",
        "bool" => "BOOL",
        "complex64" => "C64",
        other => panic!("{other}"),
    };
    for (file, rows) in &want {
        let out = dir.join("out.safetensors");
        let input = root.join(file);
        let r = pw(&["convert", input.to_str().unwrap(), out.to_str().unwrap()]);
        assert_eq!(
            r.status.code(),
            Some(0),
            "{file}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let bytes = std::fs::read(&out).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        let data = &bytes[8 + n..];
        assert_eq!(
            header.as_object().unwrap().len(),
            rows.len(),
            "{file}: {header}"
        );
        for f in rows {
            let (name, dtype, shape, hex) = (&f[1], &f[2], &f[3], &f[4]);
            let t = &header[name.as_str()];
            assert_eq!(t["dtype"], st_name(dtype), "{file} {name}");
            let shape: Vec<u64> = shape
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            assert_eq!(t["shape"], serde_json::json!(shape), "{file} {name}");
            let (a, b) = (
                t["data_offsets"][0].as_u64().unwrap() as usize,
                t["data_offsets"][1].as_u64().unwrap() as usize,
            );
            let got: String = data[a..b].iter().map(|x| format!("{x:02x}")).collect();
            assert_eq!(&got, hex, "{file} {name}: not the bytes torch.load gives");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
