//! The third layer of the sandbox: a Landlock ruleset (landlock(7)) of the newest ABI the kernel
//! offers, handling every right it knows, with no rule: no file access, no TCP bind or connect,
//! no abstract Unix socket or signal outside the process.

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreated, RulesetStatus, Scope, ABI,
};

use super::{Layer, SandboxError};

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
pub(super) fn restrict_landlock() -> Result<Layer, SandboxError> {
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
