//! `keyring.json` on disk (SPEC §3.5): read on every verification (a small file, and the user's
//! `keyring trust|revoke` takes effect at once), written atomically (0600).

use std::path::{Path, PathBuf};

use aileron_core::signing::{Keyring, KeyringError};
use anyhow::Context;

use crate::platform::home::write_atomic;

/// Why `keyring.json` could not be loaded. A damaged file is the user's to repair, so its error
/// names the file and the parse error's position rather than hiding behind an internal error.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{} is damaged: {reason}", path.display())]
    Damaged { path: PathBuf, reason: String },
    #[error("reading {}: {source}", path.display())]
    Unreadable { path: PathBuf, source: std::io::Error },
}

/// The keyring at `path`; empty when the file does not exist.
pub fn load(path: &Path) -> Result<Keyring, LoadError> {
    match std::fs::read(path) {
        Ok(bytes) => Keyring::parse(&bytes)
            .map_err(|KeyringError::Malformed(reason)| LoadError::Damaged { path: path.to_path_buf(), reason }),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Keyring::empty()),
        Err(source) => Err(LoadError::Unreadable { path: path.to_path_buf(), source }),
    }
}

pub fn save(path: &Path, keyring: &Keyring) -> anyhow::Result<()> {
    write_atomic(path, &keyring.to_bytes(), 0o600).with_context(|| format!("writing {}", path.display()))
}
