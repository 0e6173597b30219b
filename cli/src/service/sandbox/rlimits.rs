//! The first layer of the sandbox: resource limits (setrlimit(2)), soft = hard.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

use super::{Layer, SandboxConfig, SandboxError};

/// setrlimit(2): address space and descriptors from the config, no core dumps (core(5)); soft
/// and hard limits equal, never above the current hard limit. `RLIMIT_FSIZE` is left alone: the
/// audit log opened before the sandbox may grow.
pub(super) fn set_rlimits(cfg: &SandboxConfig) -> Result<Layer, SandboxError> {
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
