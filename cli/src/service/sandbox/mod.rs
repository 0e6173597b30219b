//! The sandbox that `picklewarden serve` applies to itself, and the `picklewarden sandbox-check`
//! report.
//!
//! [`apply`] sets four layers, in this order (each needs the syscalls that the next one takes
//! away):
//!
//! 1. **Resource limits** (setrlimit(2)): `RLIMIT_AS`, `RLIMIT_NOFILE` from [`SandboxConfig`],
//!    `RLIMIT_CORE` = 0; soft = hard, so they cannot be raised again.
//! 2. **No new privileges** (prctl(2) `PR_SET_NO_NEW_PRIVS`): required by seccomp(2) for an
//!    unprivileged filter and by landlock(7), and makes set-user-ID binaries powerless.
//! 3. **Landlock** (landlock(7)): a ruleset that handles every filesystem access right of the
//!    best ABI the kernel offers, its TCP bind/connect rights (ABI 4 and later) and its scopes
//!    (abstract Unix sockets and signals, ABI 6 and later), with no rule at all: no file can be
//!    opened, no TCP port bound or connected. It must be *fully* enforced, or `apply` fails.
//! 4. **seccomp** (seccomp(2)): an allowlist of the syscalls the server needs (see
//!    [`allowlist`](seccomp::allowlist)); every other syscall fails with `EPERM` (not a kill: a
//!    syscall missing from the list must not crash a running server, and a denial must be
//!    observable). A second, earlier filter makes `clone3` fail with `ENOSYS`, because seccomp
//!    cannot read the flags inside `clone3`'s argument structure; glibc then falls back to
//!    `clone`, whose flags the allowlist checks.
//!
//! **Threads.** landlock(7) and seccomp(2) restrict the calling thread and the threads it creates
//! later, not the threads that already exist. So [`apply`] must be called on the main thread
//! before any other thread exists (it checks `/proc/self/task` and refuses otherwise): compute the
//! tokio worker count, open every file, bind every socket and install the tracing subscriber
//! first, then call [`apply`], and only then build the tokio runtime.
//!
//! This module has no `unsafe` code: the syscalls are made by the `nix`, `landlock` and
//! `seccompiler` crates.
//!
//! The layers live in [`rlimits`], [`landlock`] and [`seccomp`]; [`check`] is `sandbox-check`
//! (the [`probes`] of what must be denied and the checks of what must still work).

mod check;
mod landlock;
mod rlimits;
mod seccomp;

use std::fmt;
use std::io;

use nix::errno::Errno;
use seccompiler::TargetArch;

pub(crate) use self::check::{probes, sandbox_check};
use self::landlock::restrict_landlock;
use self::rlimits::set_rlimits;
use self::seccomp::{allowlist, allowlist_program, clone3_program, Allowed};

/// Resource limits of the sandbox (setrlimit(2)). `RLIMIT_CORE` is always 0 and
/// `RLIMIT_FSIZE` is left as it is, because the audit log file may be appended to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SandboxConfig {
    /// `RLIMIT_AS`, in bytes: the largest virtual address space the process may have. Each
    /// thread reserves a stack (2 MiB for tokio workers) and glibc reserves up to 64 MiB of
    /// address space per malloc arena (up to 8 arenas per core), so keep this well above the
    /// heap the server needs.
    pub(crate) max_address_space: u64,
    /// `RLIMIT_NOFILE`: the highest file descriptor number plus one. The server needs one
    /// descriptor per connection, plus about ten for the runtime (epoll, eventfd, signal pipe).
    pub(crate) max_open_files: u64,
}

impl Default for SandboxConfig {
    /// 4 GiB of address space and 1024 descriptors.
    fn default() -> Self {
        Self {
            max_address_space: 4 << 30,
            max_open_files: 1024,
        }
    }
}

/// One layer of the sandbox as applied, for the startup log and `sandbox-check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layer {
    /// `rlimits`, `no_new_privs`, `landlock` or `seccomp`.
    pub(crate) name: &'static str,
    /// What was applied, e.g. `landlock ABI 7, fully enforced, ...`.
    pub(crate) detail: String,
}

/// What [`apply`] applied, layer by layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The layers, in the order they were applied.
    pub(crate) layers: Vec<Layer>,
    /// The syscalls the seccomp filter lets through, each with its argument condition if any
    /// (e.g. `socketpair(domain == AF_UNIX)`).
    pub(crate) allowed_syscalls: Vec<String>,
}

impl fmt::Display for Applied {
    /// One line for the startup log: `rlimits: ...; no_new_privs: ...; landlock: ...; seccomp: ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, layer) in self.layers.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", layer.name, layer.detail)?;
        }
        Ok(())
    }
}

/// Why the sandbox could not be applied. The server refuses to start on any of these unless
/// `--insecure-no-sandbox` is given. Layers applied before the failing one stay applied
/// (none of them can be undone).
#[derive(Debug)]
pub(crate) enum SandboxError {
    /// More than one thread exists: landlock(7) and seccomp(2) would not restrict the others.
    NotSingleThreaded {
        /// How many threads `/proc/self/task` lists, or `None` if it could not be read.
        threads: Option<usize>,
    },
    /// seccompiler supports x86_64, aarch64 and riscv64 only.
    UnsupportedArch(&'static str),
    /// getrlimit(2) or setrlimit(2) failed.
    Rlimit {
        /// `RLIMIT_AS`, `RLIMIT_NOFILE` or `RLIMIT_CORE`.
        resource: &'static str,
        /// The errno.
        errno: Errno,
    },
    /// prctl(2) `PR_SET_NO_NEW_PRIVS` failed or did not stick.
    NoNewPrivs(String),
    /// The kernel has no usable Landlock (landlock(7)): not built in, disabled at boot, or no
    /// ABI version this program knows.
    LandlockUnavailable(String),
    /// Landlock ruleset creation or `landlock_restrict_self` failed.
    Landlock(String),
    /// The Landlock ruleset was not fully enforced.
    LandlockNotFullyEnforced(String),
    /// Building or installing a seccomp filter failed (seccomp(2)).
    Seccomp(String),
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSingleThreaded { threads: Some(n) } => write!(
                f,
                "the sandbox must be applied before any other thread exists, but {n} threads exist"
            ),
            Self::NotSingleThreaded { threads: None } => write!(
                f,
                "cannot check that the process is single-threaded (/proc/self/task is unreadable)"
            ),
            Self::UnsupportedArch(arch) => {
                write!(f, "no seccomp filter for architecture {arch}")
            }
            Self::Rlimit { resource, errno } => {
                write!(f, "setrlimit({resource}) failed: {}", errno_text(*errno))
            }
            Self::NoNewPrivs(why) => write!(f, "PR_SET_NO_NEW_PRIVS: {why}"),
            Self::LandlockUnavailable(why) => write!(f, "Landlock is not available: {why}"),
            Self::Landlock(why) => write!(f, "Landlock: {why}"),
            Self::LandlockNotFullyEnforced(why) => {
                write!(f, "Landlock is not fully enforced: {why}")
            }
            Self::Seccomp(why) => write!(f, "seccomp: {why}"),
        }
    }
}

impl std::error::Error for SandboxError {}

/// Applies the sandbox to the calling thread and every thread it creates afterwards: resource
/// limits, no new privileges, Landlock, seccomp (see the module documentation).
///
/// Call it on the main thread before any other thread exists (checked), after every file has
/// been opened and every socket bound. On error, the layers before the failing one stay applied.
pub(crate) fn apply(cfg: &SandboxConfig) -> Result<Applied, SandboxError> {
    ensure_single_threaded()?;
    // Build both BPF programs first: once Landlock is in force nothing below needs the
    // filesystem, and building them only allocates.
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SandboxError::UnsupportedArch(std::env::consts::ARCH))?;
    let entries = allowlist(std::process::id())?;
    let allowed_syscalls: Vec<String> = entries.iter().map(Allowed::describe).collect();
    let checked = entries.iter().filter(|e| !e.rules.is_empty()).count();
    let allow_program = allowlist_program(entries, arch)?;
    let clone3_program = clone3_program(arch)?;

    let mut layers = vec![set_rlimits(cfg)?, set_no_new_privs()?, restrict_landlock()?];

    // seccomp(2): filters are evaluated newest first and the most restrictive action wins, so
    // the clone3 filter (ERRNO(ENOSYS)) beats the allowlist's ALLOW for clone3, whichever order
    // they are in; it goes first so that the allowlist need not allow seccomp(2) itself.
    seccompiler::apply_filter(&clone3_program)
        .map_err(|e| SandboxError::Seccomp(format!("installing the clone3 filter: {e}")))?;
    seccompiler::apply_filter(&allow_program)
        .map_err(|e| SandboxError::Seccomp(format!("installing the allowlist: {e}")))?;
    layers.push(Layer {
        name: "seccomp",
        detail: format!(
            "{} syscalls allowed ({checked} with argument checks), every other one fails with EPERM; \
             clone3 fails with ENOSYS (glibc falls back to clone)",
            allowed_syscalls.len(),
        ),
    });
    Ok(Applied {
        layers,
        allowed_syscalls,
    })
}

/// Refuses unless `/proc/self/task` (proc(5)) lists exactly one thread: landlock(7) and
/// seccomp(2) (without TSYNC) restrict only the calling thread and its future children.
fn ensure_single_threaded() -> Result<(), SandboxError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(Iterator::count)
        .map_err(|_| SandboxError::NotSingleThreaded { threads: None })?;
    if threads == 1 {
        Ok(())
    } else {
        Err(SandboxError::NotSingleThreaded {
            threads: Some(threads),
        })
    }
}

/// prctl(2) `PR_SET_NO_NEW_PRIVS`, read back with `PR_GET_NO_NEW_PRIVS`.
fn set_no_new_privs() -> Result<Layer, SandboxError> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| SandboxError::NoNewPrivs(errno_text(e)))?;
    match nix::sys::prctl::get_no_new_privs() {
        Ok(true) => Ok(Layer {
            name: "no_new_privs",
            detail: "PR_SET_NO_NEW_PRIVS set: execve cannot grant privileges".to_owned(),
        }),
        Ok(false) => Err(SandboxError::NoNewPrivs(
            "flag not set after prctl".to_owned(),
        )),
        Err(e) => Err(SandboxError::NoNewPrivs(errno_text(e))),
    }
}

/// `EPERM (Operation not permitted)`.
fn errno_text(errno: Errno) -> String {
    format!("{errno:?} ({})", errno.desc())
}

/// An I/O error as `EPERM (Operation not permitted)` when it carries an errno.
fn io_error_text(error: &io::Error) -> String {
    match error.raw_os_error() {
        Some(code) => errno_text(Errno::from_raw(code)),
        None => error.to_string(),
    }
}
