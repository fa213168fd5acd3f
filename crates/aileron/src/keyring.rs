//! `keyring.json` on disk (SPEC §3.5): read on every verification (a small file, and the user's
//! `keyring trust|revoke` takes effect at once), written atomically (0600).

use std::path::Path;

use aileron_core::signing::Keyring;
use anyhow::Context;

use crate::home::write_atomic;

/// The keyring at `path`; empty when the file does not exist.
pub fn load(path: &Path) -> anyhow::Result<Keyring> {
    match std::fs::read(path) {
        Ok(bytes) => Keyring::parse(&bytes).with_context(|| format!("reading {}", path.display())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Keyring::empty()),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

pub fn save(path: &Path, keyring: &Keyring) -> anyhow::Result<()> {
    write_atomic(path, &keyring.to_bytes(), 0o600).with_context(|| format!("writing {}", path.display()))
}
