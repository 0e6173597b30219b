//! The listening sockets: `--listen unix:PATH`, `--listen tcp:ADDR:PORT`, and sockets passed by
//! systemd socket activation (`LISTEN_FDS`/`LISTEN_PID`, sd_listen_fds(3)). All are bound (or
//! received) before the sandbox is applied; afterwards the server only accepts on them.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// A bound listening socket, still a blocking std socket (the tokio runtime does not exist yet).
#[derive(Debug)]
pub(crate) enum Bound {
    /// A Unix stream socket; `path` is `None` for one passed by systemd.
    Unix(UnixListener, Option<PathBuf>),
    /// A TCP socket.
    Tcp(TcpListener),
}

impl Bound {
    /// A display form of the address (`unix:/run/pw.sock`, `tcp:127.0.0.1:8080`).
    pub(crate) fn describe(&self) -> String {
        match self {
            Bound::Unix(_, Some(p)) => format!("unix:{}", p.display()),
            Bound::Unix(l, None) => match l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
            {
                Some(p) => format!("unix:{p} (systemd)"),
                None => "unix:(systemd, unnamed)".to_owned(),
            },
            Bound::Tcp(l) => match l.local_addr() {
                Ok(a) => format!("tcp:{a}"),
                Err(_) => "tcp:(unknown)".to_owned(),
            },
        }
    }
}

/// Binds one `--listen` argument: `unix:PATH` or `tcp:ADDR:PORT`.
///
/// A Unix socket path that already exists is removed only when it is a socket nobody answers
/// on (a stale socket from an earlier run: the sandboxed server cannot unlink its own socket at
/// exit); anything else there is an error. The socket's permission bits are set to `mode`.
/// A TCP address must be a loopback address unless `allow_non_loopback`: the service has no
/// authentication of its own beyond the Unix socket's file permissions and peer credentials.
pub(crate) fn bind(spec: &str, mode: u32, allow_non_loopback: bool) -> Result<Bound, String> {
    if let Some(path) = spec.strip_prefix("unix:") {
        let path = PathBuf::from(path);
        if path.as_os_str().is_empty() {
            return Err(format!("--listen {spec}: empty path"));
        }
        remove_stale_socket(&path).map_err(|e| format!("--listen {spec}: {e}"))?;
        let l = UnixListener::bind(&path).map_err(|e| format!("--listen {spec}: {e}"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("--listen {spec}: cannot set mode {mode:o}: {e}"))?;
        return Ok(Bound::Unix(l, Some(path)));
    }
    if let Some(addr) = spec.strip_prefix("tcp:") {
        let addr: SocketAddr = addr
            .parse()
            .map_err(|e| format!("--listen {spec}: expected tcp:IP:PORT ({e})"))?;
        if !addr.ip().is_loopback() && !allow_non_loopback {
            return Err(format!(
                "--listen {spec}: not a loopback address (the service has no authentication \
                 of its own; give --allow-non-loopback to listen there anyway)"
            ));
        }
        let l = TcpListener::bind(addr).map_err(|e| format!("--listen {spec}: {e}"))?;
        return Ok(Bound::Tcp(l));
    }
    Err(format!(
        "--listen {spec}: expected unix:PATH or tcp:IP:PORT"
    ))
}

fn remove_stale_socket(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    if UnixStream::connect(path).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another server is listening on this socket",
        ));
    }
    std::fs::remove_file(path)
}

/// Refuses a passed socket that is not listening (`SO_ACCEPTCONN`, socket(7)): a connected
/// socket would make every accept fail with EINVAL.
fn listening(fd: &impl std::os::fd::AsFd, i: usize) -> Result<(), String> {
    match nix::sys::socket::getsockopt(fd, nix::sys::socket::sockopt::AcceptConn) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "LISTEN_FDS: descriptor {} is a socket but not a listening one",
            i + 3
        )),
        Err(e) => Err(format!("LISTEN_FDS: descriptor {}: {e}", i + 3)),
    }
}

/// The sockets systemd passed (sd_listen_fds(3)): every passed fd that is a Unix or TCP
/// listening socket. Empty when `LISTEN_FDS` is unset or `LISTEN_PID` names another process.
pub(crate) fn systemd() -> Result<Vec<Bound>, String> {
    let mut fds = listenfd::ListenFd::from_env();
    let mut out = Vec::new();
    for i in 0..fds.len() {
        if let Ok(Some(l)) = fds.take_unix_listener(i) {
            listening(&l, i)?;
            out.push(Bound::Unix(l, None));
            continue;
        }
        match fds.take_tcp_listener(i) {
            Ok(Some(l)) => {
                listening(&l, i)?;
                out.push(Bound::Tcp(l));
            }
            Ok(None) => {}
            Err(e) => {
                return Err(format!(
                    "LISTEN_FDS: descriptor {} is neither a Unix nor a TCP listening socket: {e}",
                    i + 3
                ))
            }
        }
    }
    Ok(out)
}
