//! `picklewarden sandbox-check`: applies the sandbox, tries operations it must deny ([`probes`])
//! and checks that what the server needs still works inside it, then prints the JSON report.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use nix::errno::Errno;
use nix::libc;
use nix::sys::resource::{setrlimit, Resource};

use super::{apply, errno_text, io_error_text, SandboxConfig};

/// One probe: an operation the sandbox must deny.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    /// What was tried, e.g. `open /etc/passwd for reading`.
    pub(crate) operation: &'static str,
    /// True when it failed with EPERM (seccomp(2)) or EACCES (landlock(7)).
    pub(crate) denied: bool,
    /// The errno, or what happened when the operation was not denied.
    pub(crate) detail: String,
}

/// Turns an operation's outcome into a probe: denied means it failed with EPERM or EACCES, the
/// errors of seccomp(2) (`SECCOMP_RET_ERRNO`, here EPERM) and landlock(7) (EACCES). Any other
/// outcome, success or another errno (ENOENT, ECONNREFUSED...), means the syscall was let
/// through.
fn probe<T>(operation: &'static str, outcome: Result<T, Errno>) -> Probe {
    match outcome {
        Ok(_) => Probe {
            operation,
            denied: false,
            detail: "succeeded".to_owned(),
        },
        Err(errno) => Probe {
            operation,
            denied: matches!(errno, Errno::EPERM | Errno::EACCES),
            detail: errno_text(errno),
        },
    }
}

/// An `io::Result` as an errno result (EIO when the error carries no errno).
fn io_errno<T>(result: io::Result<T>) -> Result<T, Errno> {
    result.map_err(|e| e.raw_os_error().map_or(Errno::EIO, Errno::from_raw))
}

/// Tries operations that the sandbox must deny, each harmless if it were let through (no file
/// kept, `/bin/true` run, signal 0, own memory read, ptrace of a process not traced, which
/// fails with ESRCH when let through). Run it inside the sandbox, on any thread.
pub(crate) fn probes() -> Vec<Probe> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    use nix::unistd::Pid;

    let temp_file =
        std::env::temp_dir().join(format!("picklewarden-sandbox-probe-{}", std::process::id()));
    let create = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp_file);
    if create.is_ok() {
        // Not sandboxed after all: leave nothing behind.
        let _ = std::fs::remove_file(&temp_file);
    }
    let self_pid = Pid::this();
    let source = [1u8; 8];
    let mut buffer = [0u8; 8];
    let remote = [nix::sys::uio::RemoteIoVec {
        base: source.as_ptr().addr(),
        len: source.len(),
    }];
    // Standard streams inherited: `Stdio::null()` would fail earlier, at opening /dev/null.
    let spawned = std::process::Command::new("/bin/true")
        .spawn()
        .and_then(|mut child| child.wait());
    vec![
        probe(
            "open /etc/passwd for reading (open/openat)",
            io_errno(std::fs::File::open("/etc/passwd")),
        ),
        probe("create a file in the temporary directory", io_errno(create)),
        probe(
            "read /proc/self/maps",
            io_errno(std::fs::read("/proc/self/maps")),
        ),
        probe("list the root directory", io_errno(std::fs::read_dir("/"))),
        probe(
            "spawn a process (/bin/true via fork/clone + execve)",
            io_errno(spawned),
        ),
        probe(
            "execve a program directly",
            nix::unistd::execv(c"/nonexistent/picklewarden-sandbox-probe", &[c"probe"]),
        ),
        probe(
            "open an AF_INET socket",
            socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            ),
        ),
        probe(
            "open an AF_INET6 socket",
            socket(
                AddressFamily::Inet6,
                SockType::Datagram,
                SockFlag::SOCK_CLOEXEC,
                None,
            ),
        ),
        probe(
            "open an AF_UNIX socket",
            socket(
                AddressFamily::Unix,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            ),
        ),
        probe(
            "open an AF_NETLINK socket",
            socket(
                AddressFamily::Netlink,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                None,
            ),
        ),
        probe(
            "connect to 127.0.0.1:9 over TCP",
            io_errno(std::net::TcpStream::connect_timeout(
                &std::net::SocketAddr::from(([127, 0, 0, 1], 9)),
                Duration::from_secs(1),
            )),
        ),
        probe(
            "signal another process (kill pid 1 with signal 0)",
            nix::sys::signal::kill(Pid::from_raw(1), None),
        ),
        probe(
            "read process memory (process_vm_readv on itself)",
            nix::sys::uio::process_vm_readv(
                self_pid,
                &mut [io::IoSliceMut::new(&mut buffer)],
                &remote,
            ),
        ),
        probe(
            "ptrace another process (PTRACE_GETSIGINFO on pid 1)",
            nix::sys::ptrace::getsiginfo(Pid::from_raw(1)),
        ),
        probe(
            "create an anonymous memory file (memfd_create)",
            nix::sys::memfd::memfd_create(
                c"picklewarden-probe",
                nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
            ),
        ),
        probe(
            "raise a resource limit (RLIMIT_CORE to unlimited)",
            setrlimit(
                Resource::RLIMIT_CORE,
                libc::RLIM_INFINITY,
                libc::RLIM_INFINITY,
            ),
        ),
    ]
}

/// One check that an operation the server needs still works inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Check {
    /// What was done.
    operation: &'static str,
    /// True when it worked.
    works: bool,
    /// What happened.
    detail: String,
}

impl Check {
    /// A check from an outcome.
    fn from_result(operation: &'static str, outcome: Result<String, String>) -> Self {
        match outcome {
            Ok(detail) => Self {
                operation,
                works: true,
                detail,
            },
            Err(detail) => Self {
                operation,
                works: false,
                detail,
            },
        }
    }
}

/// Sockets made before the sandbox for `sandbox-check`, as the server binds its own: a Unix
/// listener (abstract name, so nothing is left in the filesystem) and a TCP listener on
/// 127.0.0.1, each with a client already connected, waiting in the backlog.
struct PreSandboxSockets {
    /// The Unix listener.
    unix_listener: std::os::unix::net::UnixListener,
    /// A client connected to it.
    unix_client: std::os::unix::net::UnixStream,
    /// The TCP listener.
    tcp_listener: std::net::TcpListener,
    /// A client connected to it.
    tcp_client: std::net::TcpStream,
}

impl PreSandboxSockets {
    /// Binds and connects, all non-blocking afterwards (for tokio).
    fn open() -> io::Result<Self> {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("picklewarden-sandbox-check-{}", std::process::id());
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        let unix_listener = std::os::unix::net::UnixListener::bind_addr(&address)?;
        let unix_client = std::os::unix::net::UnixStream::connect_addr(&address)?;
        let tcp_listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        let tcp_client = std::net::TcpStream::connect(tcp_listener.local_addr()?)?;
        unix_listener.set_nonblocking(true)?;
        unix_client.set_nonblocking(true)?;
        tcp_listener.set_nonblocking(true)?;
        tcp_client.set_nonblocking(true)?;
        Ok(Self {
            unix_listener,
            unix_client,
            tcp_listener,
            tcp_client,
        })
    }
}

/// The tokio worker count: the CPUs available (sched_getaffinity(2), cgroup quota), computed
/// before the sandbox since std reads cgroup files for it; at least 2, so that work really
/// moves between threads.
fn worker_count() -> usize {
    std::thread::available_parallelism()
        .map_or(2, std::num::NonZeroUsize::get)
        .clamp(2, 16)
}

/// `picklewarden sandbox-check`: applies the same sandbox as `serve` (same [`apply`]), then
/// runs the [`probes`] (every one must be denied) and checks that what the server needs still
/// works (a tokio multi-thread runtime with every driver, a SIGTERM handler, `spawn_blocking`,
/// timers, accepting and echoing over a Unix and a TCP listener bound before the sandbox).
/// Prints one JSON object on stdout, with `"enforced": true` when every layer was applied, every
/// probe denied and every check worked; exits 0 then, else 1.
///
/// Must be called on the main thread before any other thread exists, like [`apply`].
pub(crate) fn sandbox_check(cfg: &SandboxConfig) -> ExitCode {
    let workers = worker_count();
    let sockets = PreSandboxSockets::open();
    let applied = apply(cfg);
    let probes = probes();
    let checks = match sockets {
        Ok(sockets) => runtime_checks(workers, sockets),
        Err(e) => vec![Check {
            operation: "bind and connect sockets before the sandbox",
            works: false,
            detail: io_error_text(&e),
        }],
    };

    let all_denied = probes.iter().all(|p| p.denied);
    let all_work = checks.iter().all(|c| c.works);
    let enforced = applied.is_ok() && all_denied && all_work;
    let (layers, error, allowed_syscalls) = match &applied {
        Ok(applied) => (
            applied
                .layers
                .iter()
                .map(|l| serde_json::json!({"layer": l.name, "applied": true, "detail": l.detail}))
                .collect::<Vec<_>>(),
            serde_json::Value::Null,
            applied.allowed_syscalls.clone(),
        ),
        Err(e) => (
            Vec::new(),
            serde_json::Value::String(e.to_string()),
            Vec::new(),
        ),
    };
    let report = serde_json::json!({
        "command": "sandbox-check",
        "enforced": enforced,
        "error": error,
        "layers": layers,
        "denied": probes.iter().map(|p| serde_json::json!({
            "operation": p.operation, "denied": p.denied, "detail": p.detail,
        })).collect::<Vec<_>>(),
        "still_works": checks.iter().map(|c| serde_json::json!({
            "operation": c.operation, "works": c.works, "detail": c.detail,
        })).collect::<Vec<_>>(),
        "allowed_syscalls": allowed_syscalls,
    });
    let mut stdout = io::stdout().lock();
    let written = serde_json::to_writer_pretty(&mut stdout, &report)
        .map_err(io::Error::from)
        .and_then(|()| writeln!(stdout));
    if enforced && written.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Builds the tokio runtime inside the sandbox and runs the checks on it.
fn runtime_checks(workers: usize, sockets: PreSandboxSockets) -> Vec<Check> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            return vec![Check {
                operation: "build a tokio multi-thread runtime (all drivers)",
                works: false,
                detail: io_error_text(&e),
            }]
        }
    };
    let mut checks = vec![Check {
        operation: "build a tokio multi-thread runtime (all drivers)",
        works: true,
        detail: format!("{workers} worker threads"),
    }];
    let in_runtime = runtime.block_on(async move {
        let limit = Duration::from_secs(10);
        let mut checks = Vec::new();
        checks.push(Check::from_result(
            "install a SIGTERM handler (tokio::signal)",
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .map(|_| "installed".to_owned())
                .map_err(|e| io_error_text(&e)),
        ));
        checks.push(Check::from_result(
            "run CPU work on a new thread (spawn_blocking)",
            within(limit, async {
                tokio::task::spawn_blocking(|| (1..=1000u64).sum::<u64>())
                    .await
                    .map(|sum| format!("sum 1..=1000 = {sum}"))
                    .map_err(|e| e.to_string())
            })
            .await,
        ));
        checks.push(Check::from_result(
            "sleep on a tokio timer",
            within(limit, async {
                let started = tokio::time::Instant::now();
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(format!("slept {:?}", started.elapsed()))
            })
            .await,
        ));
        checks.push(Check::from_result(
            "accept and echo on a Unix listener bound before the sandbox",
            within(limit, unix_echo(sockets.unix_listener, sockets.unix_client)).await,
        ));
        checks.push(Check::from_result(
            "accept, set TCP_NODELAY and echo on a TCP listener bound before the sandbox",
            within(limit, tcp_echo(sockets.tcp_listener, sockets.tcp_client)).await,
        ));
        checks
    });
    checks.extend(in_runtime);
    // Dropping the runtime joins its threads; a bounded wait keeps a stuck one from hanging
    // the check.
    runtime.shutdown_timeout(Duration::from_secs(5));
    checks
}

/// Runs a check with a time limit.
async fn within<F>(limit: Duration, check: F) -> Result<String, String>
where
    F: std::future::Future<Output = Result<String, String>>,
{
    tokio::time::timeout(limit, check)
        .await
        .unwrap_or_else(|_| Err(format!("timed out after {limit:?}")))
}

/// Accepts the waiting Unix client, reads its peer credentials (SO_PEERCRED), and echoes.
async fn unix_echo(
    listener: std::os::unix::net::UnixListener,
    client: std::os::unix::net::UnixStream,
) -> Result<String, String> {
    let listener = tokio::net::UnixListener::from_std(listener).map_err(|e| io_error_text(&e))?;
    let client = tokio::net::UnixStream::from_std(client).map_err(|e| io_error_text(&e))?;
    let (server, _) = listener.accept().await.map_err(|e| io_error_text(&e))?;
    let peer = server.peer_cred().map_err(|e| io_error_text(&e))?;
    echo(server, client).await?;
    Ok(format!(
        "accepted, peer uid {} pid {}, echoed 4 bytes",
        peer.uid(),
        peer.pid().unwrap_or_default()
    ))
}

/// Accepts the waiting TCP client and echoes.
async fn tcp_echo(
    listener: std::net::TcpListener,
    client: std::net::TcpStream,
) -> Result<String, String> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| io_error_text(&e))?;
    let client = tokio::net::TcpStream::from_std(client).map_err(|e| io_error_text(&e))?;
    let (server, peer) = listener.accept().await.map_err(|e| io_error_text(&e))?;
    server.set_nodelay(true).map_err(|e| io_error_text(&e))?;
    echo(server, client).await?;
    Ok(format!("accepted {peer}, TCP_NODELAY set, echoed 4 bytes"))
}

/// The client writes `ping`; a task on the runtime reads it and answers `pong`.
async fn echo<S, C>(mut server: S, mut client: C) -> Result<(), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = tokio::spawn(async move {
        let mut request = [0u8; 4];
        server.read_exact(&mut request).await?;
        if &request == b"ping" {
            server.write_all(b"pong").await?;
        }
        server.shutdown().await
    });
    client
        .write_all(b"ping")
        .await
        .map_err(|e| io_error_text(&e))?;
    let mut reply = [0u8; 4];
    client
        .read_exact(&mut reply)
        .await
        .map_err(|e| io_error_text(&e))?;
    answer
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| io_error_text(&e))?;
    if &reply == b"pong" {
        Ok(())
    } else {
        Err(format!("unexpected reply {reply:?}"))
    }
}
