//! The fourth layer of the sandbox: the seccomp(2) filters, the allowlist of syscalls the server
//! needs (with argument conditions) and the filter that makes `clone3` fail with `ENOSYS`.

use std::collections::BTreeMap;

use nix::errno::Errno;
use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;

/// One allowed syscall of the seccomp filter.
pub(super) struct Allowed {
    /// Its name, without `SYS_`.
    name: &'static str,
    /// Its number on this architecture.
    number: i64,
    /// The argument condition in words, if any.
    condition: Option<&'static str>,
    /// The seccompiler rules (any one matching allows the call; empty = always allowed).
    pub(super) rules: Vec<SeccompRule>,
}

impl Allowed {
    /// `name` or `name(condition)`.
    pub(super) fn describe(&self) -> String {
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
pub(super) fn allowlist(pid: u32) -> Result<Vec<Allowed>, SandboxError> {
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
pub(super) fn allowlist_program(
    entries: Vec<Allowed>,
    arch: TargetArch,
) -> Result<BpfProgram, SandboxError> {
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
pub(super) fn clone3_program(arch: TargetArch) -> Result<BpfProgram, SandboxError> {
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
