//! The Ed25519 seeds of the audit log's key and the witness's (SPEC §17): one file each, 0600,
//! `<header>\n<base64 seed>\n`, made once — created exclusively, so two processes making it at
//! the same moment end up with the same key (the loser reads the winner's).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

/// What tells one key's name from another's (`aileron.local/<id>`, `aileron.local/witness/<id>`):
/// the first 8 bytes of the public key's SHA-256, in hex.
pub(super) fn public_key_id(public: &[u8; 32]) -> String {
    hex::encode(&aileron_core::sha256::Sha256::digest(public)[..8])
}

/// The seed in `path`, made at first use; `what` names the key in errors.
pub(super) fn seed(path: &Path, header: &str, what: &str) -> anyhow::Result<[u8; 32]> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .strip_prefix(header)
            .and_then(|rest| B64.decode(rest.trim()).ok())
            .and_then(|seed| seed.try_into().ok())
            .with_context(|| format!("{} is not {what}", path.display())),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            File::open("/dev/urandom")
                .and_then(|mut random| random.read_exact(&mut seed))
                .context("reading /dev/urandom")?;
            match OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
                Ok(mut file) => {
                    file.write_all(format!("{header}\n{}\n", B64.encode(seed)).as_bytes())?;
                    file.sync_all()?;
                    Ok(seed)
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => seed_of_winner(path, header, what),
                Err(error) => Err(error).with_context(|| format!("creating {}", path.display())),
            }
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

fn seed_of_winner(path: &Path, header: &str, what: &str) -> anyhow::Result<[u8; 32]> {
    // Written and synced by the process that created it first; a moment may separate the two.
    for _ in 0..50 {
        if let Ok(seed) = seed(path, header, what) {
            return Ok(seed);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    seed(path, header, what)
}
