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
//!    [`allowlist`]); every other syscall fails with `EPERM` (not a kill: a syscall missing from
//!    the list must not crash a running server, and a denial must be observable). A second,
//!    earlier filter makes `clone3` fail with `ENOSYS`, because seccomp cannot read the flags
//!    inside `clone3`'s argument structure; glibc then falls back to `clone`, whose flags the
//!    allowlist checks.
//!
//! **Threads.** landlock(7) and seccomp(2) restrict the calling thread and the threads it creates
//! later, not the threads that already exist. So [`apply`] must be called on the main thread
//! before any other thread exists (it checks `/proc/self/task` and refuses otherwise): compute the
//! tokio worker count, open every file, bind every socket and install the tracing subscriber
//! first, then call [`apply`], and only then build the tokio runtime.
//!
//! This module has no `unsafe` code: the syscalls are made by the `nix`, `landlock` and
//! `seccompiler` crates.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreated, RulesetStatus, Scope, ABI,
};
use nix::errno::Errno;
use nix::libc;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

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

/// setrlimit(2): address space and descriptors from the config, no core dumps (core(5)); soft
/// and hard limits equal, never above the current hard limit. `RLIMIT_FSIZE` is left alone: the
/// audit log opened before the sandbox may grow.
fn set_rlimits(cfg: &SandboxConfig) -> Result<Layer, SandboxError> {
    let address_space = lower_rlimit(Resource::RLIMIT_AS, "RLIMIT_AS", cfg.max_address_space)?;
    let open_files = lower_rlimit(Resource::RLIMIT_NOFILE, "RLIMIT_NOFILE", cfg.max_open_files)?;
    let core = lower_rlimit(Resource::RLIMIT_CORE, "RLIMIT_CORE", 0)?;
    Ok(Layer {
        name: "rlimits",
        detail: format!(
            "RLIMIT_AS={address_space} bytes, RLIMIT_NOFILE={open_files}, RLIMIT_CORE={core} \
             (soft = hard); RLIMIT_FSIZE unchanged (the audit log may grow)"
        ),
    })
}

/// Sets one limit, soft and hard, to `wanted` or the current hard limit if that is lower
/// (setrlimit(2): raising a hard limit needs `CAP_SYS_RESOURCE`, and a sandbox never raises).
fn lower_rlimit(resource: Resource, name: &'static str, wanted: u64) -> Result<u64, SandboxError> {
    let err = |errno| SandboxError::Rlimit {
        resource: name,
        errno,
    };
    let (_, hard) = getrlimit(resource).map_err(err)?;
    let value = wanted.min(hard);
    setrlimit(resource, value, value).map_err(err)?;
    Ok(value)
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

/// The Landlock ABI versions this program knows, newest first (landlock(7), "Kernel support").
const LANDLOCK_ABIS: [ABI; 10] = [
    ABI::V10,
    ABI::V9,
    ABI::V8,
    ABI::V7,
    ABI::V6,
    ABI::V5,
    ABI::V4,
    ABI::V3,
    ABI::V2,
    ABI::V1,
];

/// landlock(7): finds the newest ABI whose every right the kernel handles, then restricts the
/// calling thread with a rule-less ruleset for it, requiring full enforcement.
fn restrict_landlock() -> Result<Layer, SandboxError> {
    let mut last_refusal = String::from("no Landlock ABI known to this program");
    for abi in LANDLOCK_ABIS {
        // With CompatLevel::HardRequirement, handling a right the kernel lacks is an error, so
        // the first ABI accepted here is the kernel's own (or the newest this program knows).
        match landlock_ruleset(abi) {
            Ok(ruleset) => return enforce_landlock(abi, ruleset),
            Err(refusal) => last_refusal = refusal,
        }
    }
    Err(SandboxError::LandlockUnavailable(last_refusal))
}

/// The Landlock ruleset of one ABI: all its filesystem rights, its TCP rights (ABI >= 4) and
/// scopes (ABI >= 6) handled, as hard requirements. `Err` when the kernel lacks one of them.
fn landlock_ruleset(abi: ABI) -> Result<Ruleset, String> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| e.to_string())?;
    let net = AccessNet::from_all(abi);
    if !net.is_empty() {
        ruleset = ruleset.handle_access(net).map_err(|e| e.to_string())?;
    }
    let scopes = Scope::from_all(abi);
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(|e| e.to_string())?;
    }
    Ok(ruleset)
}

/// Creates the ruleset (no rules: nothing is allowed) and calls `landlock_restrict_self`.
fn enforce_landlock(abi: ABI, ruleset: Ruleset) -> Result<Layer, SandboxError> {
    let created: RulesetCreated = ruleset
        .create()
        .map_err(|e| SandboxError::Landlock(format!("creating the ruleset: {e}")))?;
    let status = created
        .restrict_self()
        .map_err(|e| SandboxError::Landlock(format!("restricting the process: {e}")))?;
    // The ABI the kernel reports: the loop above may settle on a newer ABI that brings no new
    // right (e.g. ABI 8 only adds a restrict_self flag), so report the kernel's own.
    let kernel_abi = match status.landlock {
        LandlockStatus::Available {
            kernel_abi: Some(newer),
            ..
        } => newer.to_string(),
        LandlockStatus::Available { effective_abi, .. } => (effective_abi as i32).to_string(),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => "none".to_owned(),
    };
    let handled = format!(
        "{} filesystem rights{}{}",
        AccessFs::from_all(abi).len(),
        match AccessNet::from_all(abi).len() {
            0 => String::new(),
            n => format!(", {n} network rights"),
        },
        match Scope::from_all(abi).len() {
            0 => String::new(),
            n => format!(", {n} scopes (abstract Unix sockets, signals)"),
        },
    );
    match status.ruleset {
        RulesetStatus::FullyEnforced if status.no_new_privs => Ok(Layer {
            name: "landlock",
            detail: format!(
                "kernel landlock ABI {kernel_abi}, fully enforced: {handled} handled, no rule \
                 (no file access, no TCP bind or connect)"
            ),
        }),
        RulesetStatus::FullyEnforced => Err(SandboxError::LandlockNotFullyEnforced(
            "no_new_privs was not set".to_owned(),
        )),
        RulesetStatus::PartiallyEnforced => Err(SandboxError::LandlockNotFullyEnforced(format!(
            "ABI {}: partially enforced",
            abi as i32
        ))),
        RulesetStatus::NotEnforced => Err(SandboxError::LandlockNotFullyEnforced(format!(
            "ABI {}: not enforced",
            abi as i32
        ))),
    }
}

/// One allowed syscall of the seccomp filter.
struct Allowed {
    /// Its name, without `SYS_`.
    name: &'static str,
    /// Its number on this architecture.
    number: i64,
    /// The argument condition in words, if any.
    condition: Option<&'static str>,
    /// The seccompiler rules (any one matching allows the call; empty = always allowed).
    rules: Vec<SeccompRule>,
}

impl Allowed {
    /// `name` or `name(condition)`.
    fn describe(&self) -> String {
        match self.condition {
            Some(condition) => format!("{}({condition})", self.name),
            None => self.name.to_owned(),
        }
    }
}

/// One condition on a 32-bit argument (seccomp(2) reads `int` arguments as the low 32 bits).
fn arg32(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| SandboxError::Seccomp(format!("argument condition: {e}")))
}

/// One rule made of conditions that must all hold.
fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(|e| SandboxError::Seccomp(format!("rule: {e}")))
}

/// A `u64` from a libc constant (flags and protocol numbers are non-negative `c_int`s).
fn flag(value: libc::c_int) -> u64 {
    u64::from(value.unsigned_abs())
}

/// A syscall number as seccompiler wants it (`c_long` is `i64` on every architecture
/// seccompiler supports; the conversion keeps 32-bit targets compiling).
#[allow(clippy::useless_conversion)]
fn nr(number: libc::c_long) -> i64 {
    i64::from(number)
}

/// An unconditional entry: `allow!(SYS_read)`.
macro_rules! allow {
    ($sys:ident) => {
        Allowed {
            name: stringify!($sys).trim_start_matches("SYS_"),
            number: nr(libc::$sys),
            condition: None,
            rules: Vec::new(),
        }
    };
}

/// The syscalls the server needs once sandboxed, found by running a tokio + hyper server,
/// `spawn_blocking` work, a SIGTERM handler and a JSON `tracing` subscriber under strace(1).
/// Everything else (open/openat/openat2/creat, execve/execveat, fork/vfork, socket, connect,
/// bind, listen, ptrace, process_vm_readv/writev, mount, chroot, setuid and friends, kexec,
/// bpf, perf_event_open, io_uring, memfd_create, setrlimit/prlimit64, kill, ...) fails with
/// EPERM.
///
/// `pid` is this process's id: `tgkill` may only signal this process (abort(3) raises SIGABRT
/// with it).
fn allowlist(pid: u32) -> Result<Vec<Allowed>, SandboxError> {
    let clone_thread = flag(
        libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM,
    );
    let clone_namespaces = flag(
        libc::CLONE_NEWNS
            | libc::CLONE_NEWCGROUP
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUSER
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET,
    ) | 0x80; // CLONE_NEWTIME, clone(2)
    let prot_exec = flag(libc::PROT_EXEC);
    let no_exec = || -> Result<Vec<SeccompRule>, SandboxError> {
        Ok(vec![rule(vec![arg32(
            2,
            SeccompCmpOp::MaskedEq(prot_exec),
            0,
        )?])?])
    };

    let mut list = vec![
        // I/O on descriptors that are already open (read(2), write(2), ...): sockets, stderr,
        // the audit log, epoll and eventfd.
        allow!(SYS_read),
        allow!(SYS_write),
        allow!(SYS_readv),
        allow!(SYS_writev),
        allow!(SYS_close),
        allow!(SYS_fstat),
        allow!(SYS_lseek),
        // fcntl(2) on open descriptors: descriptor and status flags, and the F_DUPFD_CLOEXEC
        // of tokio's signal driver; not F_SETOWN/F_SETSIG (signals to other processes), not
        // locks or leases.
        Allowed {
            name: "fcntl",
            number: nr(libc::SYS_fcntl),
            condition: Some("cmd is F_GETFD, F_SETFD, F_GETFL, F_SETFL or F_DUPFD_CLOEXEC"),
            rules: [
                libc::F_GETFD,
                libc::F_SETFD,
                libc::F_GETFL,
                libc::F_SETFL,
                libc::F_DUPFD_CLOEXEC,
            ]
            .into_iter()
            .map(|cmd| rule(vec![arg32(1, SeccompCmpOp::Eq, flag(cmd))?]))
            .collect::<Result<_, _>>()?,
        },
        // Sockets already bound before the sandbox (accept4(2), recv(2), send(2), ...). No
        // socket(2), connect(2), bind(2), listen(2).
        allow!(SYS_accept4),
        allow!(SYS_recvfrom),
        allow!(SYS_sendto),
        allow!(SYS_recvmsg),
        allow!(SYS_sendmsg),
        allow!(SYS_shutdown),
        allow!(SYS_getsockopt),
        // TCP_NODELAY on accepted TCP connections (tcp(7)), no other socket option.
        Allowed {
            name: "setsockopt",
            number: nr(libc::SYS_setsockopt),
            condition: Some("level == IPPROTO_TCP and optname == TCP_NODELAY"),
            rules: vec![rule(vec![
                arg32(1, SeccompCmpOp::Eq, flag(libc::IPPROTO_TCP))?,
                arg32(2, SeccompCmpOp::Eq, flag(libc::TCP_NODELAY))?,
            ])?],
        },
        allow!(SYS_getsockname),
        allow!(SYS_getpeername),
        // The tokio/mio reactor (epoll(7), eventfd(2)).
        allow!(SYS_epoll_create1),
        allow!(SYS_epoll_ctl),
        allow!(SYS_epoll_pwait),
        allow!(SYS_epoll_pwait2),
        allow!(SYS_eventfd2),
        // Memory (mmap(2), ...): never executable memory, so no code can be loaded or written.
        Allowed {
            name: "mmap",
            number: nr(libc::SYS_mmap),
            condition: Some("prot without PROT_EXEC"),
            rules: no_exec()?,
        },
        Allowed {
            name: "mprotect",
            number: nr(libc::SYS_mprotect),
            condition: Some("prot without PROT_EXEC"),
            rules: no_exec()?,
        },
        allow!(SYS_munmap),
        allow!(SYS_mremap),
        allow!(SYS_madvise),
        allow!(SYS_brk),
        // Threads (pthread_create(3) in glibc, futex(2), ...): clone only for a thread sharing
        // memory, files and signal handlers, with no new namespace (clone(2)). clone3 is listed
        // here but the earlier filter makes it fail with ENOSYS.
        Allowed {
            name: "clone",
            number: nr(libc::SYS_clone),
            condition: Some(
                "flags include CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|\
                 CLONE_SYSVSEM and no CLONE_NEW*",
            ),
            rules: vec![rule(vec![
                arg32(0, SeccompCmpOp::MaskedEq(clone_thread), clone_thread)?,
                arg32(0, SeccompCmpOp::MaskedEq(clone_namespaces), 0)?,
            ])?],
        },
        Allowed {
            name: "clone3",
            number: nr(libc::SYS_clone3),
            condition: Some("always ENOSYS, from the earlier filter"),
            rules: Vec::new(),
        },
        allow!(SYS_futex),
        allow!(SYS_set_robust_list),
        allow!(SYS_rseq),
        allow!(SYS_sched_yield),
        allow!(SYS_sched_getaffinity),
        allow!(SYS_gettid),
        allow!(SYS_getpid),
        allow!(SYS_exit),
        allow!(SYS_exit_group),
        allow!(SYS_restart_syscall),
        // Thread names (prctl(2) PR_SET_NAME), and nothing else of prctl.
        Allowed {
            name: "prctl",
            number: nr(libc::SYS_prctl),
            condition: Some("option == PR_SET_NAME"),
            rules: vec![rule(vec![arg32(
                0,
                SeccompCmpOp::Eq,
                flag(libc::PR_SET_NAME),
            )?])?],
        },
        // Signals (signal(7)): handlers, masks, the alternate stack of Rust's stack-overflow
        // handler, and tgkill to this process only.
        allow!(SYS_rt_sigaction),
        allow!(SYS_rt_sigprocmask),
        allow!(SYS_rt_sigreturn),
        allow!(SYS_sigaltstack),
        Allowed {
            name: "tgkill",
            number: nr(libc::SYS_tgkill),
            condition: Some("tgid == this process"),
            rules: vec![rule(vec![arg32(0, SeccompCmpOp::Eq, u64::from(pid))?])?],
        },
        // tokio's signal driver: a socketpair(2) of AF_UNIX only (no network socket).
        Allowed {
            name: "socketpair",
            number: nr(libc::SYS_socketpair),
            condition: Some("domain == AF_UNIX"),
            rules: vec![rule(vec![arg32(
                0,
                SeccompCmpOp::Eq,
                flag(libc::AF_UNIX),
            )?])?],
        },
        // Time and randomness (clock_gettime(2) when the vDSO falls back, getrandom(2) for
        // HashMap seeds).
        allow!(SYS_clock_gettime),
        allow!(SYS_clock_getres),
        allow!(SYS_clock_nanosleep),
        allow!(SYS_nanosleep),
        allow!(SYS_getrandom),
    ];
    // Legacy syscalls that exist on x86_64 only (the generic table of aarch64 and riscv64 has
    // only the *at / p* forms above).
    #[cfg(target_arch = "x86_64")]
    list.push(allow!(SYS_epoll_wait));
    list.sort_by_key(|entry| entry.name);
    Ok(list)
}

/// The allowlist as a BPF program: listed syscalls (with their conditions) are allowed, every
/// other one returns EPERM (seccomp(2) `SECCOMP_RET_ERRNO`).
fn allowlist_program(entries: Vec<Allowed>, arch: TargetArch) -> Result<BpfProgram, SandboxError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = entries
        .into_iter()
        .map(|entry| (entry.number, entry.rules))
        .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(errno_u32(Errno::EPERM)),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| SandboxError::Seccomp(format!("allowlist: {e}")))?;
    BpfProgram::try_from(filter).map_err(|e| SandboxError::Seccomp(format!("allowlist: {e}")))
}

/// A filter that makes `clone3` fail with ENOSYS and allows everything else (the allowlist
/// decides). seccomp(2) cannot inspect `clone3`'s `struct clone_args`, and glibc's
/// pthread_create(3) falls back to `clone` on ENOSYS.
fn clone3_program(arch: TargetArch) -> Result<BpfProgram, SandboxError> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        [(nr(libc::SYS_clone3), Vec::new())].into_iter().collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno_u32(Errno::ENOSYS)),
        arch,
    )
    .map_err(|e| SandboxError::Seccomp(format!("clone3 filter: {e}")))?;
    BpfProgram::try_from(filter).map_err(|e| SandboxError::Seccomp(format!("clone3 filter: {e}")))
}

/// An errno as the `u32` of `SECCOMP_RET_ERRNO` (errno values are small and positive).
fn errno_u32(errno: Errno) -> u32 {
    (errno as i32).unsigned_abs()
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
