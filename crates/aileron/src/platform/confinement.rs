//! What the two confinements share (a launched agent, `launch/confine.rs`; a spawned program,
//! `spawn/jail.rs`): the directories hidden from confined processes, the identity maps of a new
//! user namespace, and dropping every capability before exec.

use std::path::PathBuf;

use crate::platform::home::Home;

/// What the confined agent must not see: the Aileron home, and the audit log when it lives
/// elsewhere. Canonical paths, so a symlinked home is masked where it really is.
pub fn masked_directories(home: &Home) -> Vec<PathBuf> {
    let mut masks = vec![home.root().to_path_buf()];
    if let Some(parent) = home.audit_parent() {
        masks.push(parent.join("audit"));
    }
    let mut canonical: Vec<PathBuf> =
        masks.iter().map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())).collect();
    canonical.sort();
    canonical.dedup();
    canonical
}

/// Writes a `/proc/self/*` control file (uid/gid maps, setgroups).
pub(crate) fn write_proc(path: &str, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("writing {path}: {e}"))
}

/// Empties the capability bounding set: whatever runs after the next exec keeps none of the user
/// namespace's capabilities, even as uid 0 inside it.
pub(crate) fn drop_capability_bounding_set() {
    let last_capability = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    for capability in 0..=last_capability {
        // SAFETY: prctl with integer arguments; EINVAL for capabilities this kernel lacks is fine.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
    }
}
