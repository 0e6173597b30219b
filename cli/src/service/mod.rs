//! `picklewarden serve`, the sidecar validation service, and `picklewarden sandbox-check`.
//!
//! Start-up order (each step before the next; see `run`):
//! 1. the audit log file (if any) is opened through a cap-std `Dir` of its directory;
//! 2. the policies: the built-in ones and every `NAME.toml` of `--policy-dir`, read through a
//!    cap-std `Dir`;
//! 3. the listening sockets are bound (`--listen`) or received from systemd (`LISTEN_FDS`);
//! 4. the sandbox (`sandbox/`): no new privileges, Landlock with no file access, a seccomp
//!    allowlist, rlimits. It is applied on the main thread while it is the only thread, so every
//!    thread created afterwards inherits it;
//! 5. the tokio runtime is built and the server runs until SIGTERM or SIGINT, then stops
//!    accepting, lets in-flight requests finish (up to the deadline) and exits 0.

mod app;
mod listen;
mod metrics;
#[cfg(target_os = "linux")]
pub(crate) mod sandbox;

use std::collections::BTreeMap;
use std::future::Future;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use clap::Args;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use picklewarden::Policy;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Semaphore};

use self::app::{AppState, Config, Peer};
use self::listen::Bound;
use crate::cli::{parse_size, Fatal};

/// Options of `serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeOpts {
    /// Where to listen: `unix:PATH` or `tcp:IP:PORT` (loopback only unless
    /// --allow-non-loopback); repeatable. Sockets passed by systemd socket activation
    /// (LISTEN_FDS) are served as well.
    #[arg(long = "listen", value_name = "unix:PATH|tcp:IP:PORT")]
    listen: Vec<String>,
    /// Directory of policy files: each `NAME.toml` is served as `?policy=NAME` (a file named
    /// like a built-in policy replaces it). Read once at start-up, through a directory
    /// capability.
    #[arg(long, value_name = "DIR")]
    policy_dir: Option<PathBuf>,
    /// Serve only the policies of --policy-dir, not the built-in ones.
    #[arg(long)]
    no_builtin_policies: bool,
    /// The policy of a request that names none.
    #[arg(long, value_name = "NAME", default_value = "data")]
    default_policy: String,
    /// Requests decoded at once [default: the number of CPUs].
    #[arg(long, value_name = "N")]
    concurrency: Option<usize>,
    /// Requests that may wait for a decode slot once their body has arrived; beyond them a
    /// request gets 503.
    #[arg(long, value_name = "N", default_value_t = 64)]
    queue: usize,
    /// Per-request deadline in seconds: waiting for a slot, reading the body and decoding.
    /// Past it the answer is 503; shutdown waits this long for in-flight requests.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    deadline: f64,
    /// Upper bound on request bodies (bytes, or with K/M/G), applied below each policy's
    /// max_input_bytes [default: no bound beyond the policies'].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_body: Option<u64>,
    /// Upper bound on the typed JSON or repr text /v1/decode returns (bytes, or with K/M/G):
    /// past it the verdict stands and `output_error` is `output_too_large`.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256M")]
    max_output: u64,
    /// Response text held in memory at once, rendered but not yet sent (bytes, or with
    /// K/M/G); a rendered response waits for room before it is sent [default: 2 x concurrency
    /// x max_output].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_pending_output: Option<u64>,
    /// Seconds a response write may make no progress before the connection is closed (a
    /// client that stops reading frees what its response holds).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    send_timeout: f64,
    /// Bytes per second a client must take a response at: a response of N bytes must be sent
    /// within --send-timeout + N / RATE seconds of its first byte, else the connection is
    /// closed, the response cut (bytes, or with K/M/G; at least 1).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256K")]
    min_send_rate: u64,
    /// Seconds a request's body may take to arrive (else 408). The body is read before the
    /// request takes an admission place or a decode slot, so a slow upload holds neither.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    body_timeout: f64,
    /// Body bytes held in memory at once across all requests (bytes, or with K/M/G); a
    /// request waits for budget for its whole body (its Content-Length, or its bound when
    /// chunked) before the body is read [default: 2 x concurrency x the largest body bound;
    /// never less than the largest body bound].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_buffered: Option<u64>,
    /// Connections open at once; more wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_connections: usize,
    /// Permission bits of the Unix sockets (octal).
    #[arg(long, value_name = "OCTAL", default_value = "660", value_parser = parse_mode)]
    socket_mode: u32,
    /// Allow `--listen tcp:` on a non-loopback address.
    #[arg(long)]
    allow_non_loopback: bool,
    /// Append the audit log (JSON lines) to this file instead of stderr. Its directory is opened
    /// as a capability before the sandbox; the file is created if missing.
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Address-space limit (RLIMIT_AS; bytes, or with K/M/G) [default: concurrency x
    /// (1.25 x max_alloc_bytes + 2 x max_output) + 2 x max_buffered + max_pending_output + 1G].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    max_address_space: Option<u64>,
    /// Run without the sandbox (no Landlock, no seccomp, no rlimits). Logs a loud warning.
    #[arg(long)]
    insecure_no_sandbox: bool,
    /// Serve GET /v1/debug/sandbox-probe, which runs the sandbox probes inside the server (for
    /// the tests).
    #[arg(long, hide = true)]
    enable_sandbox_probe: bool,
}

/// Options of `sandbox-check`.
#[derive(Args, Debug)]
pub(crate) struct SandboxCheckOpts {
    /// Address-space limit to apply (bytes, or with K/M/G).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "4G")]
    max_address_space: u64,
    /// Open-files limit to apply.
    #[arg(long, value_name = "N", default_value_t = 320)]
    max_open_files: u64,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("bad mode {s:?} (octal, e.g. 660)"))
}

/// A duration option given in seconds: finite, above 0 and below a day.
fn seconds(option: &str, value: f64) -> Result<Duration, Fatal> {
    if value.is_finite() && value > 0.0 && value < 86_400.0 {
        Ok(Duration::from_secs_f64(value))
    } else {
        Err(Fatal(format!(
            "{option} {value}: expected 0 < seconds < 86400"
        )))
    }
}

/// `picklewarden sandbox-check`.
pub(crate) fn sandbox_check(opts: &SandboxCheckOpts) -> ExitCode {
    sandbox::sandbox_check(&sandbox::SandboxConfig {
        max_address_space: opts.max_address_space,
        max_open_files: opts.max_open_files,
    })
}

/// `picklewarden serve`: exit 0 after a graceful shutdown, 2 when it cannot start.
pub(crate) fn run(opts: &ServeOpts) -> Result<(), Fatal> {
    init_log(opts)?;
    if opts.enable_sandbox_probe && opts.insecure_no_sandbox {
        // Unsandboxed, the probes would really create a file, start a process and connect.
        return Err(Fatal(
            "--enable-sandbox-probe needs the sandbox (not with --insecure-no-sandbox)".to_owned(),
        ));
    }
    let (policies, sources) = load_policies(opts)?;
    if !policies.contains_key(&opts.default_policy) {
        return Err(Fatal(format!(
            "--default-policy {:?} is not loaded (loaded: {})",
            opts.default_policy,
            policies.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    let concurrency = opts
        .concurrency
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, usize::from))
        .max(1);
    let deadline = seconds("--deadline", opts.deadline)?;
    let body_timeout = seconds("--body-timeout", opts.body_timeout)?;
    let send_timeout = seconds("--send-timeout", opts.send_timeout)?;
    if opts.min_send_rate == 0 {
        return Err(Fatal(
            "--min-send-rate must be at least 1 byte per second".to_owned(),
        ));
    }
    let max_body = opts.max_body.unwrap_or(u64::MAX);

    let mut listeners = Vec::new();
    for spec in &opts.listen {
        listeners
            .push(listen::bind(spec, opts.socket_mode, opts.allow_non_loopback).map_err(Fatal)?);
    }
    listeners.extend(listen::systemd().map_err(Fatal)?);
    if listeners.is_empty() {
        return Err(Fatal(
            "nothing to listen on: give --listen unix:PATH (or start under systemd socket activation)".to_owned(),
        ));
    }
    for l in &listeners {
        match l {
            Bound::Unix(u, _) => u.set_nonblocking(true),
            Bound::Tcp(t) => t.set_nonblocking(true),
        }
        .map_err(|e| Fatal(format!("{}: {e}", l.describe())))?;
    }

    let largest_body = policies
        .values()
        .map(|p| p.limits.max_input_bytes.min(max_body))
        .max()
        .unwrap_or(0);
    let largest_alloc = policies
        .values()
        .map(|p| p.limits.max_alloc_bytes)
        .max()
        .unwrap_or(0);
    let concurrency_u64 = u64::try_from(concurrency).unwrap_or(u64::MAX);
    let max_buffered = opts
        .max_buffered
        .unwrap_or_else(|| {
            largest_body
                .saturating_mul(2)
                .saturating_mul(concurrency_u64)
        })
        .max(largest_body);
    let max_pending_output = opts
        .max_pending_output
        .unwrap_or_else(|| {
            opts.max_output
                .saturating_mul(2)
                .saturating_mul(concurrency_u64)
        })
        .max(opts.max_output.saturating_add(1 << 20));
    let address_space = opts.max_address_space.unwrap_or_else(|| {
        // Per decode: the document (max_alloc_bytes, plus vector growth slack) and the output
        // text (a String may hold twice its length while it grows).
        concurrency_u64
            .saturating_mul(
                largest_alloc
                    .saturating_add(largest_alloc / 4)
                    .saturating_add(opts.max_output.saturating_mul(2)),
            )
            .saturating_add(max_buffered.saturating_mul(2))
            .saturating_add(max_pending_output)
            .saturating_add(1 << 30)
    });
    let open_files = u64::try_from(opts.max_connections)
        .unwrap_or(u64::MAX)
        .saturating_add(64);

    let sandboxed = if opts.insecure_no_sandbox {
        tracing::warn!(
            event = "insecure_no_sandbox",
            "INSECURE: --insecure-no-sandbox given: the server runs WITHOUT Landlock, seccomp or \
             resource limits; a flaw in the decoder would have the full rights of this process"
        );
        false
    } else {
        let applied = sandbox::apply(&sandbox::SandboxConfig {
            max_address_space: address_space,
            max_open_files: open_files,
        })
        .map_err(|e| {
            Fatal(format!(
                "cannot apply the sandbox ({e}); refusing to start (--insecure-no-sandbox \
                 runs without it)"
            ))
        })?;
        tracing::info!(event = "sandbox_applied", layers = %applied, "sandbox applied");
        true
    };

    let state = Arc::new(AppState::new(Config {
        policies,
        sources,
        default_policy: opts.default_policy.clone(),
        max_body,
        max_output: usize::try_from(opts.max_output).unwrap_or(usize::MAX),
        max_pending_output: usize::try_from(max_pending_output).unwrap_or(usize::MAX),
        concurrency,
        queue: opts.queue,
        deadline,
        body_timeout,
        send_timeout,
        min_send_rate: opts.min_send_rate,
        max_buffered: usize::try_from(max_buffered).unwrap_or(usize::MAX),
        sandbox_probe: opts.enable_sandbox_probe,
        sandboxed,
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(concurrency.clamp(1, 4))
        .max_blocking_threads(concurrency.saturating_add(2))
        .thread_name("picklewarden")
        .enable_all()
        .build()
        .map_err(|e| Fatal(format!("cannot start the runtime: {e}")))?;
    runtime
        .block_on(serve(
            listeners,
            state,
            opts.max_connections,
            deadline,
            send_timeout,
        ))
        .map_err(|e| Fatal(format!("server error: {e}")))
}

/// Accepts on every listener until SIGTERM/SIGINT, then drains.
async fn serve(
    listeners: Vec<Bound>,
    state: Arc<AppState>,
    max_connections: usize,
    deadline: Duration,
    send_timeout: Duration,
) -> io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let app = app::router(Arc::clone(&state));
    let graceful = Arc::new(GracefulShutdown::new());
    let (stop_tx, stop_rx) = watch::channel(false);
    let conns = Arc::new(Semaphore::new(max_connections.max(1)));
    let mut tasks = Vec::new();
    for l in listeners {
        let what = l.describe();
        let acceptor = match l {
            Bound::Unix(u, _) => Acceptor::Unix(tokio::net::UnixListener::from_std(u)?),
            Bound::Tcp(t) => Acceptor::Tcp(tokio::net::TcpListener::from_std(t)?),
        };
        tracing::info!(event = "listening", address = %what, "listening");
        tasks.push(tokio::spawn(accept_loop(
            acceptor,
            app.clone(),
            Arc::clone(&graceful),
            stop_rx.clone(),
            Arc::clone(&conns),
            Arc::clone(&state),
            send_timeout,
        )));
    }
    let sig = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    tracing::info!(
        event = "shutdown",
        signal = sig,
        connections = graceful.count(),
        "stopping: no new connections; finishing in-flight requests"
    );
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = t.await;
    }
    // The accept loops have ended and dropped their handles: this is the last one.
    let Ok(graceful) = Arc::try_unwrap(graceful) else {
        return Ok(());
    };
    // In-flight requests finish within their deadline; allow a little more for the response.
    match tokio::time::timeout(deadline + Duration::from_secs(5), graceful.shutdown()).await {
        Ok(()) => tracing::info!(event = "stopped", "all connections closed"),
        Err(_) => tracing::warn!(
            event = "stopped",
            "connections still open after the deadline; exiting"
        ),
    }
    Ok(())
}

enum Acceptor {
    Unix(tokio::net::UnixListener),
    Tcp(tokio::net::TcpListener),
}

async fn accept_loop(
    acceptor: Acceptor,
    app: axum::Router,
    graceful: Arc<GracefulShutdown>,
    mut stop: watch::Receiver<bool>,
    conns: Arc<Semaphore>,
    state: Arc<AppState>,
    send_timeout: Duration,
) {
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&conns).acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        let accepted = tokio::select! {
            a = accept(&acceptor, send_timeout) => a,
            _ = stop.changed() => return,
        };
        let (io, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(event = "accept_failed", error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        state.metrics.connections.inc();
        let peer_shown = peer.clone();
        let svc = tower::ServiceExt::map_request(
            app.clone(),
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                if let Some(p) = &peer {
                    req.extensions_mut().insert(p.clone());
                }
                req
            },
        );
        // half_close: a client that shuts down its write side after its request (SHUT_WR)
        // still gets its answer; hyper's default closes the connection at that EOF.
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .half_close(true)
            .header_read_timeout(Duration::from_secs(5))
            .serve_connection(io, TowerToHyperService::new(svc));
        let fut = graceful.watcher().watch(conn);
        tokio::spawn(async move {
            if let Err(e) = fut.await {
                // The one connection error of ours worth an event: a peer that stopped
                // reading its response (client resets and the like are not logged).
                let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
                while let Some(err) = source {
                    if let Some(io) = err.downcast_ref::<io::Error>() {
                        if io.kind() == io::ErrorKind::TimedOut {
                            let (peer_pid, peer_uid, peer_gid, peer_addr) =
                                app::peer_fields(&peer_shown);
                            tracing::warn!(
                                event = "response_cut",
                                reason = "send_timeout",
                                peer_pid,
                                peer_uid,
                                peer_gid,
                                peer_addr,
                                "a response write made no progress for --send-timeout: \
                                 connection closed"
                            );
                        }
                        break;
                    }
                    source = err.source();
                }
            }
            drop(permit);
        });
    }
}

/// An accepted connection. Writes that make no progress for `send_timeout` fail with
/// `TimedOut`, which closes the connection: a peer that stops reading cannot keep a response
/// (and the output budget it holds) in memory for ever.
struct Io {
    stream: Stream,
    send_timeout: Duration,
    /// Running while a write is pending.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
}

enum Stream {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

impl Io {
    fn new(stream: Stream, send_timeout: Duration) -> Io {
        Io {
            stream,
            send_timeout,
            stall: None,
        }
    }

    /// Turns a pending write into a timeout once the stall has lasted `send_timeout`.
    fn pending_write<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.send_timeout;
        let stall = self
            .stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if stall.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer has not read its response within --send-timeout",
            )));
        }
        Poll::Pending
    }

    fn written<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.stall = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.pending_write(cx),
        }
    }
}

async fn accept(a: &Acceptor, send_timeout: Duration) -> io::Result<(TokioIo<Io>, Option<Peer>)> {
    match a {
        Acceptor::Unix(l) => {
            let (s, _) = l.accept().await?;
            let peer = s.peer_cred().ok().map(|c| Peer::Unix {
                pid: c.pid(),
                uid: c.uid(),
                gid: c.gid(),
            });
            Ok((TokioIo::new(Io::new(Stream::Unix(s), send_timeout)), peer))
        }
        Acceptor::Tcp(l) => {
            let (s, addr) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok((
                TokioIo::new(Io::new(Stream::Tcp(s), send_timeout)),
                Some(Peer::Tcp(addr)),
            ))
        }
    }
}

impl tokio::io::AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = match &mut this.stream {
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
        };
        this.written(r, cx)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = match &mut this.stream {
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
        };
        this.written(r, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The audit log and the server's own events: JSON lines (one object per event, fields at the
/// top level) on stderr or appended to `--audit-log`; level from `PICKLEWARDEN_LOG` (default
/// `info`, so every verdict is logged; a value that is not a level or directive is refused,
/// see [`crate::cli::log_filter`]).
fn init_log(opts: &ServeOpts) -> Result<(), Fatal> {
    let filter = crate::cli::log_filter("info")?;
    let builder = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter);
    match &opts.audit_log {
        None => {
            let _ = builder.with_writer(io::stderr).try_init();
        }
        Some(path) => {
            let file = open_log_file(path)
                .map_err(|e| Fatal(format!("cannot open --audit-log {}: {e}", path.display())))?;
            let _ = builder.with_writer(Mutex::new(file)).try_init();
        }
    }
    Ok(())
}

/// Opens `path` for appending through a capability of its directory: the only ambient path
/// used is the directory's.
fn open_log_file(path: &Path) -> io::Result<std::fs::File> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let dir = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())?;
    let mut oo = cap_std::fs::OpenOptions::new();
    oo.append(true).create(true);
    Ok(dir.open_with(name, &oo)?.into_std())
}

/// Largest policy file read from --policy-dir.
const MAX_POLICY_FILE: u64 = 4 << 20;

type Policies = (BTreeMap<String, Arc<Policy>>, BTreeMap<String, String>);

/// The built-in policies (unless --no-builtin-policies) and every `NAME.toml` of --policy-dir,
/// read through a capability of the directory.
fn load_policies(opts: &ServeOpts) -> Result<Policies, Fatal> {
    let mut policies = BTreeMap::new();
    let mut sources = BTreeMap::new();
    if !opts.no_builtin_policies {
        for name in picklewarden::policy::BUILTIN_POLICIES {
            if let Some(p) = Policy::builtin(name) {
                policies.insert(name.to_owned(), Arc::new(p));
                sources.insert(name.to_owned(), "built-in".to_owned());
            }
        }
    }
    let Some(dir_path) = &opts.policy_dir else {
        return Ok((policies, sources));
    };
    let fail = |e: io::Error| Fatal(format!("--policy-dir {}: {e}", dir_path.display()));
    let dir =
        cap_std::fs::Dir::open_ambient_dir(dir_path, cap_std::ambient_authority()).map_err(fail)?;
    let mut names = Vec::new();
    for entry in dir.entries().map_err(fail)? {
        let entry = entry.map_err(fail)?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        let Some(stem) = file_name.strip_suffix(".toml") else {
            continue;
        };
        if stem.is_empty()
            || !stem
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(Fatal(format!(
                "--policy-dir {}: {file_name:?}: policy names are made of A-Z a-z 0-9 - _ .",
                dir_path.display()
            )));
        }
        names.push((stem.to_owned(), file_name.to_owned()));
    }
    names.sort();
    for (stem, file_name) in names {
        let meta = dir.metadata(&file_name).map_err(fail)?;
        if meta.len() > MAX_POLICY_FILE {
            return Err(Fatal(format!("{file_name}: over {MAX_POLICY_FILE} bytes")));
        }
        let text = dir.read_to_string(&file_name).map_err(fail)?;
        let mut p = Policy::from_toml_str(&text)
            .map_err(|e| Fatal(format!("{}/{file_name}: {e}", dir_path.display())))?;
        p.name.clone_from(&stem);
        sources.insert(stem.clone(), format!("{}/{file_name}", dir_path.display()));
        policies.insert(stem, Arc::new(p));
    }
    if policies.is_empty() {
        return Err(Fatal("no policy loaded".to_owned()));
    }
    Ok((policies, sources))
}

/// Writes a fatal start-up error.
pub(crate) fn report_fatal(msg: &str) {
    let _ = writeln!(io::stderr().lock(), "picklewarden: error: {msg}");
}
