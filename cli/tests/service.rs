//! The sidecar service, end to end: the real `picklewarden serve` binary, sandboxed as in
//! production, talked to over its Unix socket with hyper's HTTP/1.1 client.
//!
//! - the good and hostile corpora give, through `/v1/check` and `/v1/decode`, the verdicts,
//!   kinds, offsets and typed JSON the library gives in-process;
//! - malformed requests are 4xx, bodies over the bound 413, a full queue 503;
//! - inside the sandbox, opening a file, spawning a process and opening a socket fail while
//!   serving goes on;
//! - SIGTERM during load: in-flight requests complete, new connections are refused, exit 0;
//! - a bounded load test (Unix socket only) with good, hostile, largest-allowed and over-limit
//!   bodies: every answer right, no crash, peak RSS under the bound docs/service.md documents.

#![cfg(feature = "service")]
// Test code: a failed invariant is a panic, by design.
#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{good_corpus, good_policies, list_globals, records_policy_toml, repo, scratch};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use picklewarden::{Limits, Policy};
use serde_json::Value as Json;

// ---------------------------------------------------------------------------- server

/// A running `picklewarden serve`, killed on drop if still running.
struct Server {
    child: Option<Child>,
    sock: PathBuf,
    log: PathBuf,
}

impl Server {
    /// Starts the server on `dir/pw.sock` with `args`, its stderr (the audit log) in
    /// `dir/stderr.jsonl`, and waits until it answers /healthz.
    fn start(dir: &Path, args: &[&str]) -> Server {
        let sock = dir.join("pw.sock");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_picklewarden"));
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", sock.display()))
            .args(args);
        Server::start_command(dir, cmd)
    }

    /// Starts `cmd` (which must end up serving on `dir/pw.sock`).
    fn start_command(dir: &Path, mut cmd: Command) -> Server {
        let sock = dir.join("pw.sock");
        let log = dir.join("stderr.jsonl");
        let _ = std::fs::remove_file(&sock);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start picklewarden serve");
        let mut s = Server {
            child: Some(child),
            sock,
            log,
        };
        let t = Instant::now();
        loop {
            if let Some(status) = s.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("server exited at start ({status}): {}", s.stderr());
            }
            if std::os::unix::net::UnixStream::connect(&s.sock).is_ok() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "server did not start: {}",
                s.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The JSON lines of the log that parse as objects.
    fn events(&self) -> Vec<Json> {
        self.stderr()
            .lines()
            .filter_map(|l| serde_json::from_str::<Json>(l).ok())
            .collect()
    }

    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Waits for the exit (at most `limit`) and returns the exit code.
    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let mut child = self.child.take().unwrap();
        let t = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st.code();
            }
            if t.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                panic!("server did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Peak resident set size (VmHWM) in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---------------------------------------------------------------------------- client

/// One HTTP/1.1 response.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: hyper::HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Json {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A keep-alive HTTP/1.1 connection over the Unix socket, reopened when the server closed it.
struct Client {
    sock: PathBuf,
    sender: Option<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl Client {
    fn new(sock: &Path) -> Client {
        Client {
            sock: sock.to_owned(),
            sender: None,
        }
    }

    async fn connect(&mut self) -> std::io::Result<()> {
        let stream = tokio::net::UnixStream::connect(&self.sock).await?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        self.sender = Some(sender);
        Ok(())
    }

    async fn send(&mut self, method: &str, path: &str, body: Bytes) -> Result<Resp, String> {
        if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
            self.connect().await.map_err(|e| format!("connect: {e}"))?;
        }
        // A keep-alive connection the server closed (after a 413, or idle) is reopened; the
        // request has not been sent on it yet, so sending it again is safe.
        if self.sender.as_mut().unwrap().ready().await.is_err() {
            self.connect().await.map_err(|e| format!("connect: {e}"))?;
            self.sender
                .as_mut()
                .unwrap()
                .ready()
                .await
                .map_err(|e| format!("ready: {e}"))?;
        }
        let sender = self.sender.as_mut().unwrap();
        let req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "picklewarden")
            .body(Full::new(body))
            .unwrap();
        let resp = match sender.send_request(req).await {
            Ok(r) => r,
            Err(e) => {
                self.sender = None;
                return Err(format!("send: {e}"));
            }
        };
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes()
            .to_vec();
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> Resp {
        self.send("POST", path, body.into())
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
    }

    async fn get(&mut self, path: &str) -> Resp {
        self.send("GET", path, Bytes::new())
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------- fixtures

/// One hostile corpus entry: file, expected kind, limit, policy name as served.
struct Hostile {
    name: String,
    kind: String,
    limit: String,
    policy: String,
    limits: Limits,
    base: Policy,
}

/// The hostile MANIFEST, each entry with the name of the served policy that carries its limit
/// overrides (a file written into `policy_dir` per distinct override).
fn hostile_entries(policy_dir: &Path) -> Vec<Hostile> {
    let dir = repo().join("tests/corpus/hostile");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
    let mut out = Vec::new();
    for line in manifest.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let (name, kind, limit, policy, overrides) = (cols[0], cols[1], cols[2], cols[3], cols[4]);
        let base = Policy::builtin(policy).unwrap();
        let mut limits = base.limits;
        let served = if overrides == "-" {
            policy.to_owned()
        } else {
            let mut toml =
                std::fs::read_to_string(repo().join(format!("policy/{policy}.toml"))).unwrap();
            toml.push_str("\n[limits]\n");
            for o in overrides.split(',') {
                limits.set_from_str(o).unwrap();
                let (k, v) = o.split_once('=').unwrap();
                toml.push_str(&format!(
                    "{k} = {}\n",
                    picklewarden::limits::parse_size(v).unwrap()
                ));
            }
            let served = format!("{policy}-{}", overrides.replace(['=', ','], "-"));
            std::fs::write(policy_dir.join(format!("{served}.toml")), toml).unwrap();
            served
        };
        out.push(Hostile {
            name: name.to_owned(),
            kind: kind.to_owned(),
            limit: limit.to_owned(),
            policy: served,
            limits,
            base,
        });
    }
    assert!(out.len() >= 400, "only {} hostile entries", out.len());
    out
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn python_file(dir: &Path, name: &str, code: &str) -> Vec<u8> {
    let path = dir.join(name);
    let st = Command::new("python3")
        .arg("-c")
        .arg(code)
        .arg(&path)
        .status()
        .unwrap();
    assert!(st.success(), "python3 failed for {name}");
    read(&path)
}

// ---------------------------------------------------------------------------- tests

/// Every good and hostile corpus file through the sandboxed server: the same verdict, kind,
/// offset and opcode as the library in-process, and for the good files the same typed JSON.
#[test]
fn corpora_give_the_library_verdicts() {
    let dir = scratch("service-corpora");
    let pdir = dir.join("policies");
    std::fs::create_dir_all(&pdir).unwrap();
    let files = good_corpus();
    let (data, records) = good_policies(&files);
    let record_paths: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.records)
        .map(|f| f.path.clone())
        .collect();
    std::fs::write(
        pdir.join("good-records.toml"),
        records_policy_toml("good-records", &list_globals(&record_paths)),
    )
    .unwrap();
    let hostile = hostile_entries(&pdir);
    let server = Server::start(
        &dir,
        &["--policy-dir", pdir.to_str().unwrap(), "--concurrency", "2"],
    );

    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let (mut accepted, mut refused) = (0, 0);
        for f in &files {
            let bytes = read(&f.path);
            let (policy, pname) = if f.records {
                (&records, "good-records")
            } else {
                (&data, "data")
            };
            let q = format!("policy={pname}&stream={}", f.stream);
            let r = c.post(&format!("/v1/decode?{q}"), bytes.clone()).await;
            assert_eq!(r.status, 200, "{}", f.path.display());
            let dec = picklewarden::Decoder::new(&bytes, policy);
            let want = if f.stream {
                dec.decode_stream()
            } else {
                dec.decode()
            };
            let text = String::from_utf8(r.body).unwrap();
            let want = match want {
                Ok(doc) => doc,
                // A few record files are refused by the library too (good_corpus.rs counts
                // them): the same refusal, at the same offset.
                Err(e) => {
                    let got: Json = serde_json::from_str(&text).unwrap();
                    assert_eq!(got["verdict"], "refused", "{}", f.path.display());
                    assert_eq!(got["kind"], e.kind().name(), "{}", f.path.display());
                    assert_eq!(got["offset"], e.offset(), "{}", f.path.display());
                    refused += 1;
                    continue;
                }
            };
            // The document is the last member, spliced in as text, and the answer ends with a
            // newline: compared as text (it may nest deeper than serde_json's recursion limit).
            let (head, doc) = text.split_once(",\"document\":").unwrap_or_else(|| {
                panic!("{}: {}", f.path.display(), &text[..text.len().min(400)])
            });
            let got: Json = serde_json::from_str(&format!("{head}}}")).unwrap();
            assert_eq!(got["verdict"], "accepted", "{}: {got}", f.path.display());
            assert_eq!(got["size"], bytes.len());
            assert_eq!(
                doc.strip_suffix("}\n").unwrap(),
                picklewarden::json::to_typed_json(&want),
                "{}",
                f.path.display()
            );
            accepted += 1;
        }
        assert_eq!(accepted + refused, files.len());
        assert!(
            accepted >= files.len() - 40,
            "{accepted} accepted of {}",
            files.len()
        );

        let hdir = repo().join("tests/corpus/hostile");
        for h in &hostile {
            let bytes = read(&hdir.join(&h.name));
            let r = c
                .post(&format!("/v1/check?policy={}", h.policy), bytes.clone())
                .await;
            if h.limit == "max_input_bytes" {
                // The body bound is the policy's max_input_bytes: refused before decoding.
                assert_eq!(r.status, 413, "{}", h.name);
                assert_eq!(r.json()["limit"], "max_input_bytes");
                continue;
            }
            assert_eq!(
                r.status,
                200,
                "{}: {}",
                h.name,
                String::from_utf8_lossy(&r.body)
            );
            let got = r.json();
            let err = picklewarden::Decoder::new(&bytes, &h.base)
                .limits(h.limits)
                .decode()
                .err()
                .unwrap_or_else(|| panic!("{}: library accepted", h.name));
            assert_eq!(got["verdict"], "refused", "{}", h.name);
            assert_eq!(got["kind"], h.kind, "{}: {got}", h.name);
            assert_eq!(got["kind"], err.kind().name(), "{}", h.name);
            assert_eq!(got["offset"], err.offset(), "{}", h.name);
            assert_eq!(
                got["opcode"],
                serde_json::json!(err.opcode_name()),
                "{}",
                h.name
            );
            assert_eq!(got["category"], err.category().name(), "{}", h.name);
            if h.limit != "-" {
                assert_eq!(got["limit"], h.limit, "{}", h.name);
            }
        }
    });

    // One audit event per verdict, with the peer's credentials from SO_PEERCRED.
    let events = server.events();
    let verdicts: Vec<&Json> = events.iter().filter(|e| e["event"] == "verdict").collect();
    assert_eq!(
        verdicts.len(),
        files.len() + hostile.len(),
        "{}",
        server.stderr()
    );
    let me = std::process::id();
    for v in &verdicts {
        assert_eq!(v["peer_pid"], me, "{v}");
        if v["status"] == 200 {
            assert!(v["sha256"].as_str().is_some_and(|s| s.len() == 64), "{v}");
        }
        assert!(
            v["timestamp"].is_string() && v["elapsed_us"].is_u64(),
            "{v}"
        );
    }
}

/// The sha256 in the verdict is the input's (checked with Python's hashlib), and the repr
/// format is Python's repr.
#[test]
fn check_reports_sha256_globals_and_repr() {
    let dir = scratch("service-sha");
    let server = Server::start(&dir, &[]);
    let pkl = python_file(
        &dir,
        "set.pkl",
        "import pickle,sys; open(sys.argv[1],'wb').write(pickle.dumps({'k': {1, 2}, 'b': bytearray(b'z')}, protocol=2))",
    );
    let sha = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest(), end='')"])
            .arg(dir.join("set.pkl"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check", pkl.clone()).await;
        let j = r.json();
        assert_eq!(r.status, 200);
        assert_eq!(j["verdict"], "accepted");
        assert_eq!(j["sha256"], sha.as_str());
        assert_eq!(j["policy"], "data");
        assert_eq!(j["protocol"], 2);
        let globals: Vec<String> = j["globals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                format!(
                    "{}.{}",
                    g["module"].as_str().unwrap(),
                    g["name"].as_str().unwrap()
                )
            })
            .collect();
        // Protocol 2 pickles bytearray's bytes through _codecs.encode.
        assert_eq!(
            globals,
            ["__builtin__.set", "__builtin__.bytearray", "_codecs.encode"]
        );
        assert!(j["elapsed_us"].is_u64());
        assert!(j.get("kind").is_none());

        let r = c.post("/v1/decode?format=repr", pkl.clone()).await;
        assert_eq!(r.json()["repr"], "{'k': {1, 2}, 'b': bytearray(b'z')}\n");

        // The canonical pickle, base64: CPython loads it to the same value.
        let r = c.post("/v1/decode?format=pickle", pkl.clone()).await;
        let b64 = r.json()["pickle"].as_str().unwrap().to_owned();
        let same = common::python(
            "import base64, pickle, sys\n\
             c = base64.b64decode(sys.argv[1])\n\
             print(c[:2] == b'\\x80\\x05', pickle.loads(c) == pickle.loads(bytes.fromhex(sys.argv[2])))",
            &[&b64, &common::hex_encode(&pkl)],
        );
        assert_eq!(same.trim(), "True True");
        // At protocol 2: the same value, only protocol-2 opcodes.
        let r = c
            .post("/v1/decode?format=pickle&protocol=2", pkl.clone())
            .await;
        let b64 = r.json()["pickle"].as_str().unwrap().to_owned();
        let same = common::python(
            "import base64, pickle, pickletools, sys\n\
             c = base64.b64decode(sys.argv[1])\n\
             print(c[:2] == b'\\x80\\x02', pickle.loads(c) == pickle.loads(bytes.fromhex(sys.argv[2])),\n\
             \x20     max(op.proto for op, _, _ in pickletools.genops(c)))",
            &[&b64, &common::hex_encode(&pkl)],
        );
        assert_eq!(same.trim(), "True True 2");
        for bad in ["format=pickle&protocol=3", "format=json&protocol=2"] {
            let r = c.post(&format!("/v1/decode?{bad}"), pkl.clone()).await;
            assert_eq!(r.status, 400, "{bad}");
        }
        // A stream whose second pickle appends to the first one's list has none: the verdict
        // says why.
        let stream = b"\x80\x02]q\x00K\x07a.\x80\x02h\x00K\x08a0N.".to_vec();
        let r = c.post("/v1/decode?format=pickle&stream=true", stream).await;
        let j = r.json();
        assert_eq!((r.status, &j["verdict"]), (200, &Json::from("accepted")));
        assert_eq!(j["output_error"], "no_canonical_pickle");
        assert!(j.get("pickle").is_none());
        let r = c.post("/v1/decode?format=xml", pkl.clone()).await;
        assert_eq!(r.status, 400);
        assert!(r.json()["message"].as_str().unwrap().contains("(json, repr, pickle)"));

        let r = c.post("/v1/check?policy=strict", pkl.clone()).await;
        let j = r.json();
        assert_eq!(
            (r.status, &j["verdict"], &j["kind"]),
            (
                200,
                &Json::from("refused"),
                &Json::from("global_not_allowed")
            )
        );
        let at = pkl.windows(4).position(|w| w == b"c__b").unwrap();
        assert_eq!(j["offset"], at);
        assert_eq!(j["opcode"], "GLOBAL");
        assert_eq!(j["globals"][0]["allowed"], false);
    });
}

/// Malformed requests are 4xx with a JSON reason; bodies over the bound are 413, whether the
/// length is declared or not; /v1/policies, /healthz and /metrics report what happened.
#[test]
fn http_errors_policies_health_and_metrics() {
    let dir = scratch("service-http");
    let pdir = dir.join("policies");
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::write(
        pdir.join("tiny.toml"),
        "name = \"tiny\"\ndescription = \"64-byte inputs\"\n[limits]\nmax_input_bytes = 64\n",
    )
    .unwrap();
    let server = Server::start(&dir, &["--policy-dir", pdir.to_str().unwrap()]);
    let small = b"\x80\x04K\x07.".to_vec(); // pickle.dumps(7, protocol=4) without a FRAME
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check?policy=nope", small.clone()).await;
        assert_eq!((r.status, &r.json()["error"]), (404, &Json::from("unknown_policy")));
        let reason = r.json()["message"].as_str().unwrap_or_default().to_owned();
        assert!(reason.contains("--policy-dir") && reason.contains("tiny"), "{reason}");
        // Every JSON answer is one line: the text, then a newline.
        assert_eq!(r.body.last(), Some(&b'\n'));
        let ok = c.post("/v1/check", small.clone()).await;
        assert_eq!(ok.body.last(), Some(&b'\n'));
        assert_eq!(ok.body.iter().filter(|&&b| b == b'\n').count(), 1);
        let r = c.post("/v1/decode?format=yaml", small.clone()).await;
        assert_eq!((r.status, &r.json()["error"]), (400, &Json::from("bad_request")));
        let r = c.post("/v1/check?stream=maybe", small.clone()).await;
        assert_eq!(r.status, 400);
        let r = c.get("/v1/check").await;
        assert_eq!((r.status, &r.json()["error"]), (405, &Json::from("method_not_allowed")));
        let r = c.get("/v2/check").await;
        assert_eq!((r.status, &r.json()["error"]), (404, &Json::from("not_found")));

        let r = c.post("/v1/check?policy=tiny", small.clone()).await;
        assert_eq!((r.status, &r.json()["verdict"]), (200, &Json::from("accepted")));
        let r = c.post("/v1/check?policy=tiny", vec![b'N'; 65]).await;
        assert_eq!(r.status, 413);
        assert_eq!(r.json()["max_bytes"], 64);
        let mut at_bound = b"N.".to_vec();
        at_bound.resize(64, b'N');
        let r = c.post("/v1/check?policy=tiny", at_bound).await;
        assert_eq!((r.status, &r.json()["kind"]), (200, &Json::from("trailing_data")));

        // A body without Content-Length (chunked) over the bound: written by hand, as a
        // streaming client would send it.
        let status = raw_chunked(&server.sock, "/v1/check?policy=tiny", &[&[b'N'; 40][..]; 3]);
        assert!(status.starts_with("HTTP/1.1 413"), "{status}");

        let r = c.get("/v1/policies").await;
        let j = r.json();
        let names: Vec<&str> = j["policies"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["data", "mitogen", "mitogen-plus", "model", "numpy", "strict", "tiny", "torch"]);
        let tiny = &j["policies"][6];
        assert_eq!(tiny["max_body_bytes"], 64);
        assert_eq!(tiny["limits"]["max_input_bytes"], 64);
        assert_eq!(j["policies"][0]["default"], true);

        let h = c.get("/healthz").await.json();
        assert_eq!((&h["status"], &h["sandboxed"]), (&Json::from("ok"), &Json::from(true)));

        let m = String::from_utf8(c.get("/metrics").await.body).unwrap();
        for line in [
            "picklewarden_requests_total{endpoint=\"check\",policy=\"tiny\",verdict=\"accepted\"} 1",
            "picklewarden_requests_total{endpoint=\"check\",policy=\"tiny\",verdict=\"refused\"} 1",
            "picklewarden_requests_total{endpoint=\"check\",policy=\"tiny\",verdict=\"too_large\"} 2",
            "picklewarden_requests_total{endpoint=\"check\",policy=\"-\",verdict=\"unknown_policy\"} 1",
            "picklewarden_request_bytes_total{endpoint=\"check\",policy=\"tiny\",verdict=\"accepted\"} 5",
            "picklewarden_in_flight_requests 0",
        ] {
            assert!(m.lines().any(|l| l == line), "no {line:?} in\n{m}");
        }
    });
}

/// A client that half-closes its side (SHUT_WR) after sending its request gets its answer.
#[test]
fn a_half_closed_request_is_answered() {
    use std::io::Write as _;
    let dir = scratch("service-half-close");
    let server = Server::start(&dir, &[]);
    let body = b"\x80\x04K\x07.";
    let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"verdict\":\"accepted\""), "{text}");
}

/// Sends a chunked POST over a plain Unix stream and returns the response's status line.
fn raw_chunked(sock: &Path, path: &str, chunks: &[&[u8]]) -> String {
    use std::io::Write as _;
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    for c in chunks {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    // The server may answer and close before it has read everything.
    let _ = s.write_all(&req);
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    String::from_utf8_lossy(&resp)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// A list of `n` floats at protocol 4: a node and 9 bytes of input each, so that a decode of
/// a few million holds a decode slot for a while (ints of 31 bits would cost no node).
fn big_list(dir: &Path, n: u32) -> Vec<u8> {
    python_file(
        dir,
        &format!("floats_{n}.pkl"),
        &format!("import pickle,sys; open(sys.argv[1],'wb').write(pickle.dumps([i + 0.5 for i in range({n})], protocol=4))"),
    )
}

/// `[None] * n` as CPython pickles it (protocol 2): its typed JSON is about 15 bytes an item.
fn none_list(dir: &Path, n: u32) -> Vec<u8> {
    python_file(
        dir,
        &format!("nones_{n}.pkl"),
        &format!(
            "import pickle,sys; open(sys.argv[1],'wb').write(pickle.dumps([None]*{n}, protocol=2))"
        ),
    )
}

/// Polls /metrics until `pred` holds for the sample named `name` (at most 20 s).
async fn wait_metric(sock: &Path, name: &str, pred: impl Fn(f64) -> bool) {
    let mut c = Client::new(sock);
    let t = Instant::now();
    loop {
        let m = String::from_utf8(c.get("/metrics").await.body).unwrap();
        let v = m.lines().find_map(|l| {
            l.strip_prefix(name)
                .and_then(|r| r.trim().parse::<f64>().ok())
        });
        if v.is_some_and(&pred) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{name} never satisfied: {m}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// With one decode slot and a queue of one, requests beyond them get 503 with Retry-After,
/// and the others are answered. The two big requests take the slot and the queue first; the
/// six beyond them have small bodies, which the server reads before it answers 503 (the
/// admission place is taken once the body is in).
#[test]
fn full_queue_answers_503() {
    let dir = scratch("service-busy");
    let big = Bytes::from(big_list(&dir, 3_000_000));
    let server = Server::start(&dir, &["--concurrency", "1", "--queue", "1"]);
    let (bigs, smalls) = runtime().block_on(async {
        let mut bigs = Vec::new();
        for _ in 0..2 {
            let (sock, big) = (server.sock.clone(), big.clone());
            bigs.push(tokio::spawn(async move {
                Client::new(&sock).post("/v1/check", big).await
            }));
        }
        wait_metric(&server.sock, "picklewarden_in_flight_requests", |v| {
            v >= 1.0
        })
        .await;
        wait_metric(&server.sock, "picklewarden_queued_requests", |v| v >= 1.0).await;
        let mut smalls = Vec::new();
        for _ in 0..6 {
            let sock = server.sock.clone();
            smalls.push(tokio::spawn(async move {
                Client::new(&sock)
                    .post("/v1/check", b"\x80\x04K\x07.".to_vec())
                    .await
            }));
        }
        let mut out = (Vec::new(), Vec::new());
        for t in bigs {
            out.0.push(t.await.unwrap());
        }
        for t in smalls {
            out.1.push(t.await.unwrap());
        }
        out
    });
    for r in &bigs {
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.json()["verdict"], "accepted");
    }
    // The big decodes hold the slot and the queue for far longer than six small requests
    // take to be sent; one finishing early would make a small one an accepted 200.
    let busy: Vec<&Resp> = smalls.iter().filter(|r| r.status == 503).collect();
    assert!(!busy.is_empty(), "no 503 among {smalls:?}");
    for r in &smalls {
        assert!(
            r.status == 503 || r.json()["verdict"] == "accepted",
            "{r:?}"
        );
    }
    for r in busy {
        assert_eq!(r.json()["error"], "busy");
        assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    }
}

/// A slow upload holds no decode slot: with one slot and a body trickling in, other requests
/// are answered first, and the slow one gets 408 when its --body-timeout passes.
#[test]
fn slow_body_does_not_hold_a_decode_slot() {
    use std::io::Write as _;
    let dir = scratch("service-slow");
    let server = Server::start(&dir, &["--concurrency", "1", "--body-timeout", "3"]);
    let mut slow = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    slow.write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n\x80")
        .unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let others_done = runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        for _ in 0..3 {
            let r = c.post("/v1/check", b"\x80\x04K\x07.".to_vec()).await;
            assert_eq!(r.json()["verdict"], "accepted");
        }
        Instant::now()
    });
    let mut resp = Vec::new();
    let _ = slow.read_to_end(&mut resp);
    let slow_done = Instant::now();
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("body_timeout"), "{text}");
    assert!(others_done < slow_done);
}

/// Uploads that declare a body and send (almost) nothing hold no admission place: with more of
/// them than the slots and the queue together, other requests are still answered at once,
/// long before the body timeout that then answers the idle ones 408. (Before, the admission
/// place was taken on arrival, and these requests were answered 503 `busy` for the body
/// timeout.)
#[test]
fn idle_uploads_hold_no_admission_place() {
    use std::io::Write as _;
    let dir = scratch("service-idle");
    let server = Server::start(
        &dir,
        &["--concurrency", "1", "--queue", "1", "--body-timeout", "6"],
    );
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut c = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
        c.write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n\x80")
            .unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        idle.push(c);
    }
    // Let the server take in all four before the others come.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        for _ in 0..4 {
            let r = c.post("/v1/check", b"\x80\x04K\x07.".to_vec()).await;
            assert_eq!(r.status, 200, "{r:?}");
            assert_eq!(r.json()["verdict"], "accepted");
        }
    });
    let answered = t.elapsed();
    assert!(
        answered < Duration::from_secs(4),
        "answered after {answered:?}"
    );
    for mut c in idle {
        let mut resp = Vec::new();
        let _ = c.read_to_end(&mut resp);
        let text = String::from_utf8_lossy(&resp);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    }
}

/// Inside the serving process's sandbox, opening a file, spawning a process and opening a
/// socket all fail; requests before and after are answered.
#[test]
fn sandbox_holds_while_serving() {
    let dir = scratch("service-sandbox");
    let server = Server::start(&dir, &["--enable-sandbox-probe"]);
    let pkl = b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00]\x94K\x01a.".to_vec(); // [1]
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check", pkl.clone()).await;
        assert_eq!(r.json()["verdict"], "accepted");
        let probe = c.get("/v1/debug/sandbox-probe").await.json();
        assert_eq!(probe["all_denied"], true, "{probe}");
        let ops: Vec<String> = probe["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                assert_eq!(p["denied"], true, "{p}");
                p["operation"].as_str().unwrap().to_owned()
            })
            .collect();
        for needed in ["open", "spawn", "socket"] {
            assert!(
                ops.iter().any(|o| o.contains(needed)),
                "no {needed} probe in {ops:?}"
            );
        }
        let r = c.post("/v1/decode", pkl.clone()).await;
        assert_eq!(r.json()["document"]["value"]["type"], "list");
        assert_eq!(c.get("/healthz").await.json()["sandboxed"], true);
    });
    assert!(server
        .events()
        .iter()
        .any(|e| e["event"] == "sandbox_applied"));
}

/// `picklewarden sandbox-check` applies the same sandbox to itself and reports every layer
/// applied and every probe denied (exit 0); `--insecure-no-sandbox` serves without it, says so
/// loudly and in /healthz.
#[test]
fn sandbox_check_and_insecure_mode() {
    let out = Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .arg("sandbox-check")
        .output()
        .unwrap();
    let report: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report["enforced"], true, "{report}");
    let denied = report["denied"].as_array().unwrap();
    assert!(denied.len() >= 10, "{report}");
    assert!(denied.iter().all(|p| p["denied"] == true), "{report}");
    let layers = report["layers"].to_string();
    for layer in ["landlock", "seccomp", "no_new_privs", "rlimit"] {
        assert!(
            layers.to_lowercase().contains(layer),
            "no {layer} layer in {layers}"
        );
    }

    let dir = scratch("service-insecure");
    let server = Server::start(&dir, &["--insecure-no-sandbox"]);
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        assert_eq!(c.get("/healthz").await.json()["sandboxed"], false);
    });
    let events = server.events();
    assert!(events
        .iter()
        .any(|e| e["event"] == "insecure_no_sandbox" && e["level"] == "WARN"));
    assert!(!events.iter().any(|e| e["event"] == "sandbox_applied"));

    // The probe endpoint would really open, spawn and connect without the sandbox: refused.
    let out = Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .args(["serve", "--listen"])
        .arg(format!("unix:{}", dir.join("probe.sock").display()))
        .args(["--insecure-no-sandbox", "--enable-sandbox-probe"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs the sandbox"));
}

/// SIGTERM while requests are decoding and queued: every one of them completes with its
/// verdict, new connections are refused, and the server exits 0.
#[test]
fn sigterm_during_load_drains_and_exits_0() {
    let dir = scratch("service-sigterm");
    let big = Bytes::from(big_list(&dir, 4_000_000));
    let mut server = Server::start(&dir, &["--concurrency", "1", "--queue", "32"]);
    let sock = server.sock.clone();
    let (results, refused_while_busy) = runtime().block_on(async {
        let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (sock, big, done) = (sock.clone(), big.clone(), Arc::clone(&done));
            tasks.push(tokio::spawn(async move {
                let mut c = Client::new(&sock);
                let r = c.post("/v1/check", big).await;
                done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                r
            }));
        }
        // One decoding, several queued.
        wait_metric(&sock, "picklewarden_queued_requests", |v| v >= 4.0).await;
        server.signal("TERM");
        // New connections are refused while the queued requests are still being answered.
        let t = Instant::now();
        let mut refused_while_busy = false;
        while t.elapsed() < Duration::from_secs(10) {
            if tokio::net::UnixStream::connect(&sock).await.is_err() {
                refused_while_busy = done.load(std::sync::atomic::Ordering::SeqCst) < 8;
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        (out, refused_while_busy)
    });
    assert!(
        refused_while_busy,
        "no refused connection while requests were in flight"
    );
    for r in &results {
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["verdict"], "accepted");
    }
    assert_eq!(
        server.wait(Duration::from_secs(30)),
        Some(0),
        "{}",
        server.stderr()
    );
    let events = server.events();
    assert!(events
        .iter()
        .any(|e| e["event"] == "shutdown" && e["signal"] == "SIGTERM"));
    assert_eq!(events.iter().filter(|e| e["event"] == "verdict").count(), 8);
}

/// Peak RSS bound of the load test's server, in MiB (docs/service.md, "Tests"): concurrency 2 and
/// 8 MiB bodies.
const LOAD_PEAK_RSS_MIB: u64 = 160;

/// A bounded load test over the Unix socket: 32 clients, 60 requests each, mixing good files,
/// hostile files, the largest allowed body and bodies over the bound. Every answer is checked;
/// the server must survive with its peak RSS under `LOAD_PEAK_RSS_MIB`. Prints requests/s and
/// the p99 latency.
#[test]
fn load_test_answers_everything_within_memory_bound() {
    let dir = scratch("service-load");
    let pdir = dir.join("policies");
    std::fs::create_dir_all(&pdir).unwrap();
    let mut toml = std::fs::read_to_string(repo().join("policy/data.toml")).unwrap();
    toml.push_str("\n[limits]\nmax_input_bytes = 8388608\n");
    std::fs::write(pdir.join("load.toml"), toml).unwrap();
    let load = {
        let mut p = Policy::data();
        p.limits.max_input_bytes = 8 << 20;
        p
    };
    // The largest allowed body: a bytes object pickled by CPython to exactly 8 MiB, and the
    // same one byte longer.
    let max = python_file(
        &dir,
        "max.pkl",
        "import pickle,sys\nd=pickle.dumps(b'x'*(8*2**20-9), protocol=4)\nassert len(d)==8*2**20\nopen(sys.argv[1],'wb').write(d)",
    );
    assert_eq!(max.len(), 8 << 20);
    let mut over = max.clone();
    over.push(b'.');

    // (body, expected: Ok(kind or "accepted") / Err(status))
    let mut inputs: Vec<(Bytes, Result<String, u16>)> = Vec::new();
    for f in good_corpus()
        .iter()
        .filter(|f| !f.records && !f.stream)
        .step_by(8)
    {
        inputs.push((Bytes::from(read(&f.path)), Ok("accepted".to_owned())));
    }
    let hdir = repo().join("tests/corpus/hostile");
    // (The override policies hostile_entries writes are not served here: only `load`.)
    let unused = dir.join("unused-policies");
    std::fs::create_dir_all(&unused).unwrap();
    for h in hostile_entries(&unused)
        .iter()
        .filter(|h| h.policy == "data")
        .step_by(3)
    {
        let bytes = read(&hdir.join(&h.name));
        let want = match picklewarden::Decoder::new(&bytes, &load).decode() {
            Ok(_) => "accepted".to_owned(),
            Err(e) => e.kind().name().to_owned(),
        };
        inputs.push((Bytes::from(bytes), Ok(want)));
    }
    let n_plain = inputs.len();
    inputs.push((Bytes::from(max), Ok("accepted".to_owned())));
    inputs.push((Bytes::from(over), Err(413)));
    let inputs = Arc::new(inputs);

    let server = Server::start(
        &dir,
        &[
            "--policy-dir",
            pdir.to_str().unwrap(),
            "--no-builtin-policies",
            "--default-policy",
            "load",
            "--concurrency",
            "2",
            "--queue",
            "64",
        ],
    );
    let (clients, per_client) = (32usize, 60usize);
    let t0 = Instant::now();
    let latencies = runtime().block_on(async {
        let mut tasks = Vec::new();
        for k in 0..clients {
            let (sock, inputs) = (server.sock.clone(), Arc::clone(&inputs));
            tasks.push(tokio::spawn(async move {
                let mut c = Client::new(&sock);
                let mut lat = Vec::new();
                for i in 0..per_client {
                    // Every 10th request is one of the two 8 MiB bodies; the rest cycle
                    // through the corpus files.
                    let idx = if i % 10 == 9 {
                        n_plain + (k + i / 10) % 2
                    } else {
                        (k * 7919 + i * 31) % n_plain
                    };
                    let (body, want) = &inputs[idx];
                    let t = Instant::now();
                    let r = match c.send("POST", "/v1/check", body.clone()).await {
                        Ok(r) => r,
                        // A body over the bound is answered 413 before it is read; the
                        // client may then see the connection closed under its upload.
                        Err(e) if *want == Err(413) => {
                            lat.push((t.elapsed(), true));
                            assert!(e.contains("send"), "{e}");
                            continue;
                        }
                        Err(e) => panic!("request {idx}: {e}"),
                    };
                    lat.push((t.elapsed(), idx >= n_plain));
                    match want {
                        Ok(kind) => {
                            assert_eq!(
                                r.status,
                                200,
                                "input {idx}: {}",
                                String::from_utf8_lossy(&r.body)
                            );
                            let j = r.json();
                            let got = if j["verdict"] == "accepted" {
                                "accepted"
                            } else {
                                j["kind"].as_str().unwrap()
                            };
                            assert_eq!(got, kind, "input {idx}");
                        }
                        Err(status) => assert_eq!(r.status, *status, "input {idx}"),
                    }
                }
                lat
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        all
    });
    let wall = t0.elapsed();
    assert_eq!(latencies.len(), clients * per_client);
    let pct = |big: Option<bool>, q: usize| {
        let mut l: Vec<Duration> = latencies
            .iter()
            .filter(|(_, b)| big.is_none_or(|want| *b == want))
            .map(|(d, _)| *d)
            .collect();
        l.sort();
        l[(l.len() * q / 100).min(l.len() - 1)]
    };
    let rss = server.peak_rss_kib() / 1024;
    println!(
        "load: {} requests in {:.2?} = {:.0} req/s; all: p50 {:.2?}, p99 {:.2?}; corpus files: \
         p50 {:.2?}, p99 {:.2?}; 8 MiB bodies: p50 {:.2?}, p99 {:.2?}; server peak RSS {rss} MiB",
        latencies.len(),
        wall,
        latencies.len() as f64 / wall.as_secs_f64(),
        pct(None, 50),
        pct(None, 99),
        pct(Some(false), 50),
        pct(Some(false), 99),
        pct(Some(true), 50),
        pct(Some(true), 99),
    );
    let mut server = server;
    let alive = server.child.as_mut().unwrap().try_wait().unwrap().is_none();
    assert!(alive, "the server died: {}", server.stderr());
    assert!(
        rss < LOAD_PEAK_RSS_MIB,
        "peak RSS {rss} MiB over {LOAD_PEAK_RSS_MIB} MiB"
    );
}

/// /v1/decode bounds its output (typed JSON can be 15x the pickle): past --max-output the
/// verdict stands and `output_error` says why there is no document.
#[test]
fn decode_output_is_bounded() {
    let dir = scratch("service-output");
    let server = Server::start(&dir, &["--max-output", "4K"]);
    let nones = none_list(&dir, 1000);
    assert!(nones.len() < 1100);
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        for format in ["json", "repr"] {
            let j = c
                .post(&format!("/v1/decode?format={format}"), nones.clone())
                .await
                .json();
            assert_eq!(j["verdict"], "accepted", "{j}");
            assert_eq!(j["output_error"], "output_too_large", "{j}");
            assert_eq!(j["max_output_bytes"], 4096);
            assert!(j.get("document").is_none() && j.get("repr").is_none());
        }
        let small = c
            .post("/v1/decode", b"\x80\x04K\x07.".to_vec())
            .await
            .json();
        assert_eq!(small["document"]["value"]["value"], "7");
        assert!(small.get("output_error").is_none());
    });
}

/// Sends `body` to /v1/decode on `s` as one HTTP/1.1 request (keep-alive).
fn send_decode(s: &mut std::os::unix::net::UnixStream, body: &[u8]) {
    use std::io::Write as _;
    let head = format!(
        "POST /v1/decode HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
}

/// Reads one HTTP/1.1 response with a Content-Length from `s`, at full speed: its body, or
/// `None` if the connection ends first.
fn read_response(s: &mut std::os::unix::net::UnixStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

/// A client that reads its response slowly but steadily cannot hold it for as long as its
/// reading takes: a 3 MB response must be taken within --send-timeout (5 s) + 3 MB /
/// --min-send-rate (1 MiB/s) of its first byte, so a client reading 100 KB/s is cut at about
/// 8 s, with what the socket and hyper had buffered by then. (Before, any progress restarted
/// --send-timeout: this client frees room in the socket every 1.5 s, and would have read the
/// whole response over about 30 s, as a 960 KB one at 40 KB/s was read over 28 s.) A client
/// that keeps up gets all of it.
#[test]
fn slow_steady_reader_is_cut() {
    let dir = scratch("service-slow-reader");
    let server = Server::start(
        &dir,
        &[
            "--send-timeout",
            "5",
            "--min-send-rate",
            "1M",
            "--max-output",
            "64M",
        ],
    );
    // [None] * 200000: about 3 MB of typed JSON, far more than a Unix socket buffers.
    let nones = none_list(&dir, 200000);
    let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    send_decode(&mut s, &nones);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 10000];
    while t.elapsed() < Duration::from_secs(45) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = t.elapsed();
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        &got[..got.len().min(40)]
    );
    assert!(
        got.len() < 2_500_000,
        "{} bytes arrived in {took:?}",
        got.len()
    );
    assert!(server
        .events()
        .iter()
        .any(|e| e["event"] == "response_cut" && e["reason"] == "min_send_rate"));
    // The same response read at full speed arrives whole.
    runtime().block_on(async {
        let r = Client::new(&server.sock)
            .post("/v1/decode", nones.clone())
            .await;
        assert_eq!(r.json()["verdict"], "accepted");
        assert_eq!(
            r.json()["document"]["value"]["items"]
                .as_array()
                .unwrap()
                .len(),
            200000
        );
    });
}

/// Send time is per response: a client that takes three large responses at full speed
/// has saved nothing up, and when it then stops reading a fourth, the connection is closed
/// after --send-timeout like any other. (A first version summed waiting and credit over the
/// connection's life, which let 40 fast 16 MB responses buy 40 minutes of not reading.) And a
/// client that waits 1.5 s before reading each of six 240 KB responses on one connection,
/// under a --send-timeout of 2 s, gets every one whole (the summed version cut it at the
/// fourth).
#[test]
fn send_time_is_per_response() {
    let dir = scratch("service-send-per-response");
    let server = Server::start(&dir, &["--send-timeout", "2", "--max-output", "64M"]);
    let big = none_list(&dir, 200000);
    let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for _ in 0..3 {
        send_decode(&mut s, &big);
        assert!(read_response(&mut s).is_some_and(|b| b.len() > 2_000_000));
    }
    send_decode(&mut s, &big);
    std::thread::sleep(Duration::from_secs(5));
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(
        rest.len() < 2_500_000,
        "{} bytes after the pause",
        rest.len()
    );
    assert!(server
        .events()
        .iter()
        .any(|e| e["event"] == "response_cut" && e["reason"] == "send_timeout"));

    let mid = none_list(&dir, 16000);
    let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for i in 0..6 {
        send_decode(&mut s, &mid);
        std::thread::sleep(Duration::from_millis(1500));
        let body = read_response(&mut s);
        assert!(body.is_some_and(|b| b.len() > 200_000), "response {i} cut");
    }
}

/// `--min-send-rate` is at least 1 byte per second: 0 (which would have allowed no time at
/// all, or, as a divisor, every byte a second) is refused at start-up, and 1 starts.
#[test]
fn min_send_rate_zero_is_refused() {
    let dir = scratch("service-min-rate");
    let out = Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .args(["serve", "--listen"])
        .arg(format!("unix:{}", dir.join("zero.sock").display()))
        .args(["--min-send-rate", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--min-send-rate must be at least 1"));
    let server = Server::start(&dir, &["--min-send-rate", "1"]);
    runtime().block_on(async {
        let r = Client::new(&server.sock)
            .post("/v1/check", b"\x80\x04K\x07.".to_vec())
            .await;
        assert_eq!(r.json()["verdict"], "accepted");
    });
}

/// Small answers take no output budget: with the budget held by a large response that is not
/// read and a second one waiting for it (holding a decode slot), a /v1/check and a small
/// /v1/decode are answered at once. (Before, their 4 KiB waited behind the large one in the
/// budget's queue until --send-timeout cut the first reader: a review locked every check out
/// for 17 minutes with four clients reading 256 MiB responses at the minimum rate.)
#[test]
fn small_answers_take_no_output_budget() {
    let dir = scratch("service-small-answers");
    let server = Server::start(
        &dir,
        &[
            "--concurrency",
            "2",
            "--max-output",
            "4M",
            "--max-pending-output",
            "5M",
            "--send-timeout",
            "20",
        ],
    );
    let nones = none_list(&dir, 200000); // about 3 MB of typed JSON
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
        send_decode(&mut s, &nones);
        holders.push(s);
        std::thread::sleep(Duration::from_millis(500));
    }
    let t = Instant::now();
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check", nones.clone()).await;
        assert_eq!(r.json()["verdict"], "accepted", "{r:?}");
        let r = c.post("/v1/decode", b"\x80\x04K\x07.".to_vec()).await;
        assert_eq!(r.json()["document"]["value"]["value"], "7", "{r:?}");
    });
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    drop(holders);
}

/// Clients that never read their responses hold output budget, not unbounded memory: with room
/// for about two pending responses, eight unread ones wait their turn, a normal request is
/// still answered, and --send-timeout closes each stalled connection (its response cut).
#[test]
fn unread_responses_are_bounded_and_timed_out() {
    let dir = scratch("service-unread");
    let server = Server::start(
        &dir,
        &[
            "--max-output",
            "1M",
            "--max-pending-output",
            "2M",
            "--send-timeout",
            "1",
            "--concurrency",
            "2",
        ],
    );
    // [None] * 60000: about 900 KB of typed JSON, more than a Unix socket buffers.
    let nones = none_list(&dir, 60000);
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut s = std::os::unix::net::UnixStream::connect(&server.sock).unwrap();
        send_decode(&mut s, &nones);
        stalled.push(s);
    }
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check", b"\x80\x04K\x07.".to_vec()).await;
        assert_eq!(r.json()["verdict"], "accepted");
    });
    // Every decode is answered (the audit event is written as its response starts); a
    // response that is not read is cut after --send-timeout (1 s; waited 3 s past the last).
    let t = Instant::now();
    while server
        .events()
        .iter()
        .filter(|e| e["event"] == "verdict" && e["endpoint"] == "decode")
        .count()
        < 8
    {
        assert!(t.elapsed() < Duration::from_secs(60), "{}", server.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The budget made them wait: with room for two, the eight were answered in at least three
    // more send-timeout rounds after the first (the audit event is written when a response
    // has its budget), not all at once.
    let seconds = |e: &Json| -> f64 {
        let t = e["timestamp"].as_str().unwrap();
        let hms = t.split('T').nth(1).unwrap().trim_end_matches('Z');
        let mut parts = hms.split(':').map(|p| p.parse::<f64>().unwrap());
        let (h, m, s) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        h * 3600.0 + m * 60.0 + s
    };
    let times: Vec<f64> = server
        .events()
        .iter()
        .filter(|e| e["event"] == "verdict" && e["endpoint"] == "decode")
        .map(seconds)
        .collect();
    let spread = times.iter().cloned().fold(f64::MIN, f64::max)
        - times.iter().cloned().fold(f64::MAX, f64::min);
    assert!(
        spread >= 2.5,
        "decodes answered within {spread:.2} s: the budget did not hold them"
    );
    std::thread::sleep(Duration::from_secs(3));
    // Every stalled connection was closed by the server with its response cut short.
    for mut s in stalled {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got);
        let full = text
            .split("\r\n\r\n")
            .nth(1)
            .is_some_and(|b| serde_json::from_str::<Json>(b).is_ok());
        assert!(!full, "a stalled client got its whole response");
    }
    let mut server = server;
    assert!(server.child.as_mut().unwrap().try_wait().unwrap().is_none());
    runtime().block_on(async {
        wait_metric(&server.sock, "picklewarden_in_flight_requests", |v| {
            v == 0.0
        })
        .await;
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/decode", nones.clone()).await;
        assert!(r.json()["document"]["value"]["items"]
            .as_array()
            .is_some_and(|a| a.len() == 60000));
    });
}

/// A decode the allocator cannot satisfy under the address-space limit is refused with
/// `allocation_failed`, and the server goes on (it used to abort): 48 M empty lists (each its
/// own arena node of 16 bytes, unlike `True`, which every document shares, and an item of 4
/// bytes) need ~1 GB of arena and items, under a 1 GiB RLIMIT_AS.
#[test]
fn allocation_failure_is_a_refusal_not_an_abort() {
    let dir = scratch("service-alloc");
    let lists = python_file(
        &dir,
        "lists.pkl",
        "import sys; open(sys.argv[1],'wb').write(b'\\x80\\x02]'+b''.join(b'('+b']'*(1<<20)+b'e' for _ in range(48))+b'.')",
    );
    assert_eq!(lists.len(), 48 * ((1 << 20) + 2) + 4);
    let mut server = Server::start(&dir, &["--max-address-space", "1G"]);
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let j = c.post("/v1/check", lists).await.json();
        assert_eq!(j["verdict"], "refused", "{j}");
        assert_eq!(j["kind"], "allocation_failed", "{j}");
        assert_eq!(j["category"], "limit_exceeded");
        let r = c.post("/v1/check", b"\x80\x04K\x07.".to_vec()).await;
        assert_eq!(r.json()["verdict"], "accepted");
    });
    assert!(server.child.as_mut().unwrap().try_wait().unwrap().is_none());
}

/// `--listen tcp:127.0.0.1:0` beside the Unix socket: the bound port is in the `listening`
/// event, requests over TCP are answered and audited with the peer address; a non-loopback
/// address is refused at start without --allow-non-loopback.
#[test]
fn loopback_tcp_listener() {
    let dir = scratch("service-tcp");
    let server = Server::start(&dir, &["--listen", "tcp:127.0.0.1:0"]);
    // The Unix socket accepts (into its backlog) from bind on, before the listening events
    // are logged: wait for the TCP one.
    let t = Instant::now();
    let addr = loop {
        let found = server
            .events()
            .iter()
            .filter(|e| e["event"] == "listening")
            .find_map(|e| {
                e["address"]
                    .as_str()?
                    .strip_prefix("tcp:")
                    .map(str::to_owned)
            });
        if let Some(a) = found {
            break a;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no tcp listening event: {}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    runtime().block_on(async {
        let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = hyper::Request::post("/v1/check")
            .header("host", "x")
            .body(Full::new(Bytes::from_static(b"\x80\x04K\x07.")))
            .unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let j: Json = serde_json::from_slice(&body).unwrap();
        assert_eq!(j["verdict"], "accepted");
    });
    let audited = server
        .events()
        .into_iter()
        .find(|e| e["event"] == "verdict")
        .unwrap();
    assert!(
        audited["peer_addr"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:"),
        "{audited}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_picklewarden"))
        .args(["serve", "--listen", "tcp:0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a loopback address"));
}

/// systemd socket activation (sd_listen_fds(3)): a listening socket passed as fd 3 with
/// LISTEN_FDS=1 and LISTEN_PID of the server is served without any --listen. Python stands in
/// for systemd: it binds, moves the socket to fd 3, sets the variables and execs the server
/// (same pid).
#[test]
fn systemd_socket_activation() {
    let dir = scratch("service-systemd");
    let script = "import os,socket,sys\n\
        s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[2]); s.listen(16)\n\
        os.dup2(s.fileno(), 3); os.set_inheritable(3, True)\n\
        os.environ['LISTEN_FDS']='1'; os.environ['LISTEN_PID']=str(os.getpid())\n\
        os.execv(sys.argv[1], [sys.argv[1], 'serve'])\n";
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_picklewarden"))
        .arg(dir.join("pw.sock"));
    let server = Server::start_command(&dir, cmd);
    runtime().block_on(async {
        let mut c = Client::new(&server.sock);
        let r = c.post("/v1/check", b"\x80\x04K\x07.".to_vec()).await;
        assert_eq!(r.json()["verdict"], "accepted");
        assert_eq!(c.get("/healthz").await.json()["sandboxed"], true);
    });
    let listening: Vec<Json> = server
        .events()
        .into_iter()
        .filter(|e| e["event"] == "listening")
        .collect();
    assert_eq!(listening.len(), 1, "{}", server.stderr());
    assert!(
        listening[0]["address"]
            .as_str()
            .unwrap()
            .ends_with("pw.sock (systemd)"),
        "{listening:?}"
    );
}

/// The Python client of docs/service.md (standard library only) against the real server.
#[test]
fn python_client_example_works() {
    let dir = scratch("service-python");
    let server = Server::start(&dir, &[]);
    let out = Command::new("python3")
        .arg(repo().join("examples/python/picklewarden_client.py"))
        .arg(&server.sock)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Json> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert_eq!(lines[0]["verdict"], "accepted");
    assert_eq!(lines[1]["verdict"], "refused");
    assert_eq!(lines[1]["kind"], "global_not_allowed");
    assert_eq!(lines[2]["value"], serde_json::json!({"a": [1, 2.5, null]}));
    // Sets, frozensets, bytearrays, complex numbers and shared values read back.
    assert_eq!(
        lines[3],
        serde_json::json!({"richer_equal": true, "shared_kept": true})
    );
    // An unknown policy: the service's 404 JSON, not a broken pipe.
    assert_eq!(
        lines[4],
        serde_json::json!({"status": 404, "error": "unknown_policy"})
    );
    assert_eq!(
        lines[5],
        serde_json::json!({"canonical_equal": true, "protocol": 5})
    );
    assert_eq!(
        lines[6],
        serde_json::json!({"canonical_equal": true, "protocol": 2})
    );
}
