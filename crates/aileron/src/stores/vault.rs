//! The encrypted vault on disk (`secrets.json`, SPEC §6) and its lock state in the daemon.
//!
//! The file format and every cryptographic decision live in `aileron_core::vault`; this module
//! does the IO around it: reading the file, generating salts and nonces, atomic rewrites
//! (temp + fsync + rename + directory fsync), and holding the key in memory while unlocked.
//!
//! Invariant: the passphrase is never stored anywhere; the derived key lives only in memory
//! (zeroized on lock and on drop). Invariant: a failed operation leaves the file as it was — the
//! new bytes are fully written and synced before the rename makes them current.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aileron_core::vault::{VaultError, VaultFile, VaultKey};
use serde::Serialize;
use serde_json::{Map, Value};
use zeroize::Zeroizing;

use crate::platform::home::write_atomic;

/// Whether a vault exists and whether its key is in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VaultState {
    Absent,
    Locked,
    Unlocked,
}

impl VaultState {
    pub fn as_str(self) -> &'static str {
        match self {
            VaultState::Absent => "absent",
            VaultState::Locked => "locked",
            VaultState::Unlocked => "unlocked",
        }
    }
}

/// Why a vault operation could not be done. Messages never contain secret bytes.
#[derive(Debug, thiserror::Error)]
pub enum VaultAccessError {
    #[error("no vault exists yet")]
    Absent,
    #[error("a vault already exists at {0}")]
    AlreadyExists(String),
    #[error("the vault is locked")]
    Locked,
    #[error("wrong passphrase")]
    WrongPassphrase,
    #[error("the passphrase is empty")]
    EmptyPassphrase,
    #[error("vault file {path}: {error}")]
    File { path: String, error: VaultError },
    #[error("vault file {path}: {message}")]
    Io { path: String, message: String },
    #[error("{0}")]
    Format(VaultError),
}

impl VaultAccessError {
    /// What the user should do next.
    pub fn hint(&self) -> &'static str {
        match self {
            VaultAccessError::Absent => "create one with `aileron vault init`",
            VaultAccessError::AlreadyExists(_) => "unlock it with `aileron vault unlock`",
            VaultAccessError::Locked => "unlock it with `aileron vault unlock`",
            VaultAccessError::WrongPassphrase => {
                "try again; the passphrase comes from AILERON_VAULT_PASSPHRASE, --passphrase-file or the prompt"
            }
            VaultAccessError::EmptyPassphrase => "choose a non-empty passphrase",
            VaultAccessError::File { .. } => {
                "the vault file is damaged or was modified; restore secrets.json from a backup or move it aside and run `aileron vault init`"
            }
            VaultAccessError::Io { .. } => "check the permissions of AILERON_HOME and the free disk space",
            VaultAccessError::Format(_) => "check the secret's path and value",
        }
    }

    /// The stable code of the HTTP error body.
    pub fn code(&self) -> &'static str {
        match self {
            VaultAccessError::Absent => "vault_absent",
            VaultAccessError::AlreadyExists(_) => "vault_exists",
            VaultAccessError::Locked => "vault_locked",
            VaultAccessError::WrongPassphrase => "wrong_passphrase",
            VaultAccessError::EmptyPassphrase => "invalid_passphrase",
            VaultAccessError::File { .. } => "vault_damaged",
            VaultAccessError::Io { .. } => "vault_io",
            VaultAccessError::Format(_) => "invalid_secret",
        }
    }
}

struct Inner {
    /// The file as last read or written; `None` when there is no vault.
    file: Option<VaultFile>,
    /// Present while unlocked.
    key: Option<VaultKey>,
}

/// The daemon's vault: one per home, shared behind an `Arc`.
pub struct Vault {
    path: PathBuf,
    inner: Mutex<Inner>,
    state: tokio::sync::watch::Sender<VaultState>,
}

impl Vault {
    /// Reads `secrets.json` if it exists. The daemon starts locked. A damaged file does not stop
    /// the daemon (actions without credentials, approvals and the audit log keep working): the
    /// vault shows as locked, and unlocking it reports the damage with a hint.
    pub fn open(path: &Path) -> Result<Vault, VaultAccessError> {
        let file = match read_file(path) {
            Ok(file) => file,
            Err(error @ VaultAccessError::File { .. }) => {
                log_line!("aileron daemon: warning: {error}\nhint: {}", error.hint());
                None
            }
            Err(error) => return Err(error),
        };
        let state = if file.is_some() || path.exists() { VaultState::Locked } else { VaultState::Absent };
        let (sender, _) = tokio::sync::watch::channel(state);
        Ok(Vault { path: path.to_path_buf(), inner: Mutex::new(Inner { file, key: None }), state: sender })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn state(&self) -> VaultState {
        *self.state.borrow()
    }

    /// Changes of the lock state (the approval queue resumes `awaiting_vault` entries on unlock).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<VaultState> {
        self.state.subscribe()
    }

    /// Creates a new vault sealed under `passphrase` and leaves it unlocked. Slow (Argon2id):
    /// call it off the async workers.
    pub fn init(&self, passphrase: &[u8]) -> Result<(), VaultAccessError> {
        if passphrase.is_empty() {
            return Err(VaultAccessError::EmptyPassphrase);
        }
        if self.lock_inner().file.is_some() || self.path.exists() {
            return Err(VaultAccessError::AlreadyExists(self.path.display().to_string()));
        }
        let (file, key) = VaultFile::create(passphrase, random(), random()).map_err(VaultAccessError::Format)?;
        let mut inner = self.lock_inner();
        if inner.file.is_some() {
            return Err(VaultAccessError::AlreadyExists(self.path.display().to_string()));
        }
        self.write(&file)?;
        inner.file = Some(file);
        inner.key = Some(key);
        drop(inner);
        self.state.send_replace(VaultState::Unlocked);
        Ok(())
    }

    /// Derives the key from `passphrase` and checks the whole file with it. A wrong passphrase
    /// changes nothing. Slow (Argon2id): call it off the async workers.
    pub fn unlock(&self, passphrase: &[u8]) -> Result<(), VaultAccessError> {
        // Re-read: the file on disk is what must verify, not what we read at start-up.
        let file = read_file(&self.path)?.ok_or(VaultAccessError::Absent)?;
        let key = file.unlock(passphrase).map_err(|error| match error {
            VaultError::WrongPassphrase => VaultAccessError::WrongPassphrase,
            error => VaultAccessError::File { path: self.path.display().to_string(), error },
        })?;
        let mut inner = self.lock_inner();
        inner.file = Some(file);
        inner.key = Some(key);
        drop(inner);
        self.state.send_replace(VaultState::Unlocked);
        Ok(())
    }

    /// Forgets the key. Returns the state before.
    pub fn lock(&self) -> VaultState {
        let before = self.state();
        let mut inner = self.lock_inner();
        inner.key = None;
        drop(inner);
        if before == VaultState::Unlocked {
            self.state.send_replace(VaultState::Locked);
        }
        before
    }

    /// Paths and plaintext metadata; works while locked.
    pub fn list(&self) -> Vec<(String, Map<String, Value>)> {
        let inner = self.lock_inner();
        match &inner.file {
            Some(file) => file.entries().map(|(path, metadata)| (path.to_string(), metadata.clone())).collect(),
            None => Vec::new(),
        }
    }

    pub fn metadata(&self, path: &str) -> Option<Map<String, Value>> {
        self.lock_inner().file.as_ref().and_then(|file| file.metadata(path).cloned())
    }

    /// Whether a secret is stored at `path` (its metadata says so: nothing is decrypted or copied).
    pub fn contains(&self, path: &str) -> bool {
        self.lock_inner().file.as_ref().is_some_and(|file| file.metadata(path).is_some())
    }

    /// The decrypted secret at `path` (`None` when absent).
    pub fn get(&self, path: &str) -> Result<Option<Zeroizing<Vec<u8>>>, VaultAccessError> {
        let inner = self.lock_inner();
        let file = inner.file.as_ref().ok_or(VaultAccessError::Absent)?;
        let key = inner.key.as_ref().ok_or(VaultAccessError::Locked)?;
        file.get(key, path).map_err(|error| VaultAccessError::File { path: self.path.display().to_string(), error })
    }

    /// Stores (or replaces) a secret with its metadata; durable when this returns.
    pub fn put(&self, path: &str, metadata: Map<String, Value>, secret: &[u8]) -> Result<(), VaultAccessError> {
        self.modify(|file, key| file.put(key, path, metadata, secret, random()))
    }

    /// Replaces the metadata of an existing secret; durable when this returns.
    pub fn set_metadata(&self, path: &str, metadata: Map<String, Value>) -> Result<(), VaultAccessError> {
        self.modify(|file, key| file.set_metadata(key, path, metadata))
    }

    /// Removes a secret; `false` when there was none.
    pub fn remove(&self, path: &str) -> Result<bool, VaultAccessError> {
        let mut removed = false;
        self.modify(|file, key| {
            removed = file.remove(key, path)?;
            Ok(())
        })?;
        Ok(removed)
    }

    /// Applies `change` to a copy of the file, writes the copy atomically, then makes it current:
    /// if anything fails, memory and disk both keep the old vault.
    fn modify(
        &self,
        change: impl FnOnce(&mut VaultFile, &VaultKey) -> Result<(), VaultError>,
    ) -> Result<(), VaultAccessError> {
        let mut inner = self.lock_inner();
        let Inner { file, key } = &mut *inner;
        let file = file.as_mut().ok_or(VaultAccessError::Absent)?;
        let key = key.as_ref().ok_or(VaultAccessError::Locked)?;
        let mut next = file.clone();
        change(&mut next, key).map_err(VaultAccessError::Format)?;
        self.write(&next)?;
        *file = next;
        Ok(())
    }

    fn write(&self, file: &VaultFile) -> Result<(), VaultAccessError> {
        write_atomic(&self.path, &file.to_bytes(), 0o600)
            .map_err(|error| VaultAccessError::Io { path: self.path.display().to_string(), message: error.to_string() })
    }

    fn lock_inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("vault lock poisoned")
    }
}

/// Reads and parses the vault file; `None` when it does not exist.
fn read_file(path: &Path) -> Result<Option<VaultFile>, VaultAccessError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(VaultAccessError::Io { path: path.display().to_string(), message: error.to_string() });
        }
    };
    VaultFile::parse(&bytes)
        .map(Some)
        .map_err(|error| VaultAccessError::File { path: path.display().to_string(), error })
}

/// Fresh random bytes for a salt or a nonce (never reused: 96-bit random nonces under one key
/// stay far below the collision bound for the number of writes a vault sees).
fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source is unavailable");
    bytes
}

impl crate::dataplane::gateway::VaultGate for Vault {
    fn locked(&self) -> Option<String> {
        (self.state() == VaultState::Locked).then(|| {
            "Aileron's vault is locked, so the gateway is holding LLM traffic. \
             Unlock it with `aileron vault unlock` and try again."
                .to_string()
        })
    }

    fn provider_key(&self, provider: crate::dataplane::gateway::Provider) -> Option<Zeroizing<String>> {
        let path = llm_key_path(provider);
        // Most vaults hold no provider key: the metadata says so without decrypting anything.
        if !self.contains(path) {
            return None;
        }
        let bytes = self.get(path).ok()??;
        String::from_utf8(bytes.to_vec()).ok().map(|key| Zeroizing::new(key.trim().to_string()))
    }
}

/// Where `aileron secret set llm/<provider>` keeps a provider's key.
pub fn llm_key_path(provider: crate::dataplane::gateway::Provider) -> &'static str {
    match provider {
        crate::dataplane::gateway::Provider::Anthropic => "secrets/llm/anthropic",
        crate::dataplane::gateway::Provider::OpenAi => "secrets/llm/openai",
    }
}
