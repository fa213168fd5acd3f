//! Compiled-module caches: one in memory (per content hash, shared by every call) and one on disk
//! (`<cache dir>/<hash hex>-<engine key>.cwasm`) so a restarted daemon does not recompile.
//!
//! Compiling a 7 MB Go guest takes seconds; deserializing it takes milliseconds. The engine key is
//! derived from wasmtime's `precompile_compatibility_hash` (compiler, target, flags, wasmtime
//! version) and this file format's version, so an upgraded or reconfigured engine never loads an
//! artifact it did not produce; stale artifacts of the same content hash are removed on write.
//!
//! File format: the bytes of `Module::serialize` followed by SHA-256(format ‖ content hash ‖
//! bytes) (32 bytes). wasmtime checks the artifact's header but not its code, so the digest is
//! what turns a torn write or a flipped bit into a clean cache miss (the file is deleted and the
//! module recompiled) instead of executing corrupted machine code; and because the digest covers
//! the content hash the module was compiled from, another module's artifact copied onto this
//! module's file name is refused too (it would otherwise run that module's native code under
//! this module's verified hash).
//!
//! Trust boundary: artifacts are native code run outside the sandbox's checks, so the directory
//! must belong to this user and be 0700, and every file must belong to this user and be writable
//! by nobody else; anything else is refused, not loaded.

use std::collections::HashMap;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aileron_core::ContentHash;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

/// Bump when the on-disk layout changes; it is part of the engine key.
const FORMAT_VERSION: &[u8] = b"aileron-cwasm-v2";
const DIGEST_LEN: usize = 32;

/// Cache counters, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Loads answered by the in-memory cache.
    pub memory_hits: u64,
    /// Loads answered by deserializing an on-disk artifact.
    pub disk_hits: u64,
    /// Modules compiled from wasm bytes.
    pub compiles: u64,
    /// On-disk artifacts found unusable (corrupt, truncated, not a regular file) and deleted.
    pub disk_rejects: u64,
    /// Artifacts that could not be written (the module still works, it is just not cached).
    pub disk_write_failures: u64,
}

#[derive(Default)]
pub(crate) struct CacheCounters {
    memory_hits: AtomicU64,
    disk_hits: AtomicU64,
    compiles: AtomicU64,
    disk_rejects: AtomicU64,
    disk_write_failures: AtomicU64,
}

/// One counted cache event.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CacheEvent {
    MemoryHit,
    DiskHit,
    Compile,
    DiskReject,
    DiskWriteFailure,
}

impl CacheCounters {
    pub(crate) fn count(&self, event: CacheEvent) {
        let counter = match event {
            CacheEvent::MemoryHit => &self.memory_hits,
            CacheEvent::DiskHit => &self.disk_hits,
            CacheEvent::Compile => &self.compiles,
            CacheEvent::DiskReject => &self.disk_rejects,
            CacheEvent::DiskWriteFailure => &self.disk_write_failures,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> CacheStats {
        CacheStats {
            memory_hits: self.memory_hits.load(Ordering::Relaxed),
            disk_hits: self.disk_hits.load(Ordering::Relaxed),
            compiles: self.compiles.load(Ordering::Relaxed),
            disk_rejects: self.disk_rejects.load(Ordering::Relaxed),
            disk_write_failures: self.disk_write_failures.load(Ordering::Relaxed),
        }
    }
}

/// The in-memory cache: one slot per content hash. A slot has its own lock so that two
/// concurrent first loads of one module compile it once, while loads of other modules proceed.
pub(crate) struct MemoryCache<V> {
    slots: Mutex<HashMap<ContentHash, Slot<V>>>,
}

/// Empty until the first successful load of its content hash.
type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

impl<V> MemoryCache<V> {
    pub(crate) fn new() -> MemoryCache<V> {
        MemoryCache { slots: Mutex::new(HashMap::new()) }
    }

    /// The cached value, without waiting for a load in progress (a busy slot counts as absent).
    pub(crate) fn get(&self, key: &ContentHash) -> Option<Arc<V>> {
        let slot = self.slots.lock().unwrap_or_else(PoisonError::into_inner).get(key)?.clone();
        let slot = slot.try_lock().ok()?;
        slot.clone()
    }

    /// Empties `key`'s slot (after a load in progress on it finishes).
    pub(crate) fn remove(&self, key: &ContentHash) {
        let slot = self.slots.lock().unwrap_or_else(PoisonError::into_inner).get(key).cloned();
        if let Some(slot) = slot {
            slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        }
    }

    /// Returns the cached value and `true`, or fills the slot with `make` and returns `false`.
    /// A failed `make` leaves the slot empty so a later load tries again.
    pub(crate) fn get_or_try_insert<E>(
        &self,
        key: &ContentHash,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<(Arc<V>, bool), E> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.entry(key.clone()).or_default().clone()
        };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = &*slot {
            return Ok((value.clone(), true));
        }
        let value = Arc::new(make()?);
        *slot = Some(value.clone());
        Ok((value, false))
    }
}

/// What the disk cache had for a content hash.
pub(crate) enum DiskLookup {
    Hit(Module),
    Miss,
    /// There was a file but it was unusable; it has been deleted.
    Rejected,
}

/// Compiled artifacts on disk.
pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_key: String,
}

/// Feeds `Hash` output into SHA-256, so the engine key is stable across processes and Rust
/// versions (the standard library's hashers promise neither).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("digest is 32 bytes"))
    }
}

/// 16 hex digits identifying the engine configuration and the artifact format.
pub(crate) fn engine_key(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    hasher.write(FORMAT_VERSION);
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CacheDirError {
    #[error("cannot create the compiled-module cache directory {}: {source}", dir.display())]
    Create { dir: PathBuf, source: io::Error },
    #[error(
        "cannot restrict the compiled-module cache directory {} to its owner (mode 0700): {source}\n\
         hint: the directory must belong to the user running aileron; delete it and it will be recreated",
        dir.display()
    )]
    Restrict { dir: PathBuf, source: io::Error },
    #[error(
        "the compiled-module cache directory {} belongs to another user (uid {owner})\n\
         hint: its files would run as native code; delete the directory and it will be recreated",
        dir.display()
    )]
    ForeignOwner { dir: PathBuf, owner: u32 },
}

/// The effective user id of this process.
fn current_uid() -> u32 {
    // `/proc/self` belongs to the process's effective user.
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(u32::MAX)
}

impl DiskCache {
    /// Creates `dir` if needed and restricts it to the owner: artifacts in it are executed as
    /// native code, so nobody else may be able to plant one.
    pub(crate) fn open(dir: &Path, engine: &Engine) -> Result<DiskCache, CacheDirError> {
        fs::create_dir_all(dir).map_err(|source| CacheDirError::Create { dir: dir.to_path_buf(), source })?;
        let owner = {
            use std::os::unix::fs::MetadataExt;
            fs::symlink_metadata(dir).map_err(|source| CacheDirError::Create { dir: dir.to_path_buf(), source })?.uid()
        };
        if owner != current_uid() {
            return Err(CacheDirError::ForeignOwner { dir: dir.to_path_buf(), owner });
        }
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(|source| CacheDirError::Restrict { dir: dir.to_path_buf(), source })?;
        Ok(DiskCache { dir: dir.to_path_buf(), engine_key: engine_key(engine) })
    }

    pub(crate) fn path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join(format!("{}-{}.cwasm", hash.hex(), self.engine_key))
    }

    pub(crate) fn load(&self, engine: &Engine, hash: &ContentHash) -> DiskLookup {
        let path = self.path(hash);
        let trusted = match fs::symlink_metadata(&path) {
            Ok(metadata) => {
                use std::os::unix::fs::MetadataExt;
                // A link, another user's file, or one others may write is not ours to execute.
                metadata.is_file() && metadata.uid() == current_uid() && metadata.mode() & 0o022 == 0
            }
            Err(_) => return DiskLookup::Miss,
        };
        let module = if trusted { fs::read(&path).ok().and_then(|bytes| deserialize(engine, hash, &bytes)) } else { None };
        match module {
            Some(module) => DiskLookup::Hit(module),
            None => {
                // Unusable: remove it so the fresh compile can take its place.
                let _ = fs::remove_file(&path);
                DiskLookup::Rejected
            }
        }
    }

    /// Writes the artifact atomically (temporary file + rename, mode 0600) and removes artifacts
    /// of the same module made by other engine configurations.
    pub(crate) fn store(&self, hash: &ContentHash, module: &Module) -> io::Result<()> {
        let mut bytes = module.serialize().map_err(|e| io::Error::other(e.to_string()))?;
        let digest = bound_digest(hash, &bytes);
        bytes.extend_from_slice(&digest);
        let path = self.path(hash);
        // Unique per process and write: two runtimes may store the same module at once.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let write_id = WRITES.fetch_add(1, Ordering::Relaxed);
        let temporary = self.dir.join(format!(".{}.{}.{write_id}.tmp", hash.hex(), std::process::id()));
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(&bytes))
            .and_then(|()| fs::rename(&temporary, &path));
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        written?;
        self.remove_stale(hash, &path);
        Ok(())
    }

    fn remove_stale(&self, hash: &ContentHash, current: &Path) {
        let prefix = format!("{}-", hash.hex());
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(&prefix) && name.ends_with(".cwasm") && entry.path() != current {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// SHA-256 over the format, the content hash the artifact was compiled from, and the artifact.
fn bound_digest(hash: &ContentHash, artifact: &[u8]) -> [u8; DIGEST_LEN] {
    let mut hasher = Sha256::new();
    hasher.update(FORMAT_VERSION);
    hasher.update(hash.as_bytes());
    hasher.update(artifact);
    hasher.finalize().into()
}

/// Verifies the digest trailer (bound to `hash`), then deserializes.
fn deserialize(engine: &Engine, hash: &ContentHash, bytes: &[u8]) -> Option<Module> {
    let (artifact, digest) = bytes.split_at_checked(bytes.len().checked_sub(DIGEST_LEN)?)?;
    if bound_digest(hash, artifact).as_slice() != digest {
        return None;
    }
    // SAFETY: `Module::deserialize` executes whatever machine code the bytes contain, so it must
    // only see artifacts produced by `Module::serialize` of a compatible engine. These bytes are:
    // the file lives in a directory we created with mode 0700 under AILERON_HOME (only this user
    // can write it, and that user can already run arbitrary code), it is named by the module's
    // content hash and this engine's compatibility key, it was written by `DiskCache::store`
    // (atomically, so never half-written), its owner and mode were checked, and its SHA-256
    // trailer, which covers the content hash it was compiled from, matched: it is byte for byte
    // what we serialized for this module. wasmtime additionally rejects artifacts from another version or
    // configuration. The bytes are copied into wasmtime's own memory, so later changes to the
    // file cannot affect the loaded module (unlike `deserialize_file`, which maps the file).
    unsafe { Module::deserialize(engine, artifact) }.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_cache_fills_a_slot_once_and_retries_after_failure() {
        let cache = MemoryCache::<u32>::new();
        let key = ContentHash::of_bytes(b"a");
        assert_eq!(cache.get_or_try_insert(&key, || Err::<u32, &str>("nope")), Err("nope"));
        let (value, hit) = cache.get_or_try_insert(&key, || Ok::<u32, &str>(7)).unwrap();
        assert_eq!((*value, hit), (7, false));
        let (value, hit) = cache.get_or_try_insert(&key, || Ok::<u32, &str>(8)).unwrap();
        assert_eq!((*value, hit), (7, true));
        let other = ContentHash::of_bytes(b"b");
        let (value, hit) = cache.get_or_try_insert(&other, || Ok::<u32, &str>(9)).unwrap();
        assert_eq!((*value, hit), (9, false));
    }

    #[test]
    fn engine_key_is_stable_and_depends_on_the_configuration() {
        let plain = Engine::default();
        let key = engine_key(&plain);
        assert_eq!(key.len(), 16);
        assert_eq!(key, engine_key(&Engine::default()));
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        assert_ne!(key, engine_key(&Engine::new(&config).unwrap()));
    }

    #[test]
    fn artifacts_with_a_bad_trailer_are_refused_before_wasmtime_sees_them() {
        let engine = Engine::default();
        let hash = ContentHash::of_connector(b"wasm", b"manifest");
        for bytes in [&b""[..], &[0u8; 31][..], &[0u8; 64][..]] {
            assert!(deserialize(&engine, &hash, bytes).is_none(), "{} bytes", bytes.len());
        }
    }

    /// Another module's artifact, copied onto this module's file name, is refused: its trailer is
    /// bound to the content hash it was compiled from.
    #[test]
    fn a_swapped_artifact_is_refused() {
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(dir.path(), &engine).unwrap();
        let module_a = Module::new(&engine, wat::parse_str("(module (func (export \"a\")))").unwrap()).unwrap();
        let module_b = Module::new(&engine, wat::parse_str("(module (func (export \"b\")))").unwrap()).unwrap();
        let (hash_a, hash_b) = (ContentHash::of_connector(b"a", b""), ContentHash::of_connector(b"b", b""));
        cache.store(&hash_a, &module_a).unwrap();
        cache.store(&hash_b, &module_b).unwrap();
        assert!(matches!(cache.load(&engine, &hash_a), DiskLookup::Hit(_)));
        fs::copy(cache.path(&hash_a), cache.path(&hash_b)).unwrap();
        assert!(matches!(cache.load(&engine, &hash_b), DiskLookup::Rejected), "a swapped artifact never loads");
        // A file others may write is refused too, even when its bytes are right.
        cache.store(&hash_a, &module_a).unwrap();
        fs::set_permissions(cache.path(&hash_a), fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(cache.load(&engine, &hash_a), DiskLookup::Rejected));
    }
}
