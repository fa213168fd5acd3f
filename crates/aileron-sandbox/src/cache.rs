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
//! by nobody else; anything else is refused, not loaded. The bytes hashed are the bytes that run:
//! they are copied into a memfd that is sealed before it is hashed, and wasmtime maps that memfd,
//! never the file (see [`verified_artifact`]).

use std::collections::HashMap;
use std::fs::{self, File};
use std::hash::{Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use aileron_core::ContentHash;
use aileron_core::sha256::Sha256;
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
        // Opened without following a link and without blocking on a FIFO; the checks below are
        // made on what was opened, so the file cannot be swapped between the check and the read.
        let file = match fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return DiskLookup::Miss,
            Err(_) => return self.reject(&path),
        };
        let module = match file.metadata() {
            // Another user's file, or one others may write, is not ours to execute.
            Ok(metadata) if owned_and_private(&metadata) => {
                verified_artifact(&file, metadata.len(), hash).and_then(|artifact| deserialize(engine, artifact))
            }
            _ => None,
        };
        match module {
            Some(module) => DiskLookup::Hit(module),
            None => self.reject(&path),
        }
    }

    /// Removes an unusable artifact so the fresh compile can take its place.
    fn reject(&self, path: &Path) -> DiskLookup {
        let _ = fs::remove_file(path);
        DiskLookup::Rejected
    }

    /// Writes the artifact (`Module::serialize`'s bytes, as `Engine::precompile_module` makes
    /// them) atomically (temporary file + rename, mode 0600) and removes artifacts of the same
    /// module made by other engine configurations.
    pub(crate) fn store(&self, hash: &ContentHash, mut bytes: Vec<u8>) -> io::Result<()> {
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
    hasher.finalize()
}

/// Whether a cache file may be executed: a regular file of this user that nobody else may write.
fn owned_and_private(metadata: &fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    metadata.is_file() && metadata.uid() == current_uid() && metadata.mode() & 0o022 == 0
}

/// An artifact whose trailer matched, ready for wasmtime.
enum Artifact {
    /// In a sealed memfd: its bytes were hashed after the seal, so nothing can change them since,
    /// and wasmtime maps it instead of copying it.
    Sealed(File),
    /// Read into memory, where this kernel (or its policy) gives no sealable, executable memfd.
    Bytes(Vec<u8>),
}

/// The artifact in `file` (`len` bytes, its trailer included) if its trailer matches.
///
/// The artifact's bytes are copied into a memfd by the kernel, the memfd is sealed against any
/// write, growth or shrinking, and only then hashed: the bytes that matched are the bytes wasmtime
/// maps, whatever later happens to the file. A 20 MB artifact of a Go guest took about 40 ms to read,
/// hash and copy into wasmtime's memory (the copy's page faults alone about 18 ms); sealed and
/// mapped it takes the kernel's copy and the hash. Where no sealed memfd can be had, the artifact
/// is read into memory and checked there, as before.
fn verified_artifact(file: &File, len: u64, hash: &ContentHash) -> Option<Artifact> {
    let artifact_len = len.checked_sub(DIGEST_LEN as u64).filter(|&len| len > 0)?;
    let mut trailer = [0u8; DIGEST_LEN];
    file.read_exact_at(&mut trailer, artifact_len).ok()?;
    // An error here is the file's: it could not be read whole.
    if let Some(memfd) = sealed_copy(file, artifact_len, hash).ok()?
        && let Some(matches) = with_mapped(&memfd, artifact_len, |bytes| bound_digest(hash, bytes) == trailer)
    {
        return matches.then_some(Artifact::Sealed(memfd));
    }
    let bytes = read_whole(file, artifact_len)?;
    (bound_digest(hash, &bytes) == trailer).then_some(Artifact::Bytes(bytes))
}

/// The first `len` bytes of `file`, read from its start.
fn read_whole(file: &File, len: u64) -> Option<Vec<u8>> {
    let mut bytes = vec![0; usize::try_from(len).ok()?];
    file.read_exact_at(&mut bytes, 0).ok()?;
    Some(bytes)
}

/// A memfd holding the first `len` bytes of `file`, sealed; `Ok(None)` where this kernel (or its
/// policy) gives no executable memfd or does not seal it. An error is `file`'s: it could not be
/// read whole.
fn sealed_copy(file: &File, len: u64, hash: &ContentHash) -> io::Result<Option<File>> {
    #[cfg(test)]
    if tests::WITHOUT_MEMFD.get() {
        return Ok(None);
    }
    let Some(memfd) = executable_memfd(hash) else {
        return Ok(None);
    };
    if io::copy(&mut file.take(len), &mut &memfd)? != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(seal(&memfd).then_some(memfd))
}

/// A fresh memfd whose pages may be mapped executable, or `None` where the kernel has no memfds or
/// its `vm.memfd_noexec` policy refuses an executable one. Named by the module's content hash,
/// so `/proc/<pid>/maps` tells which module a mapping holds.
fn executable_memfd(hash: &ContentHash) -> Option<File> {
    let name = std::ffi::CString::new(format!("aileron-cwasm-{}", hash.hex())).ok()?;
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // SAFETY: `name` is NUL-terminated; the descriptor returned is new and owned by no one else.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_EXEC) };
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        // A kernel before 6.3 knows no `MFD_EXEC`: every memfd it makes is executable.
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    // SAFETY: a descriptor just returned by `memfd_create`, owned by nothing else.
    (fd >= 0).then(|| unsafe { File::from_raw_fd(fd) })
}

/// Seals `memfd` against writes, growth, shrinking and further seal changes.
fn seal(memfd: &File) -> bool {
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: `fcntl` on a descriptor we own, with an integer argument.
    unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, seals) == 0 }
}

/// `read` over the first `len` bytes of the sealed `memfd`, mapped read-only for the call.
fn with_mapped<T>(memfd: &File, len: u64, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
    let len = usize::try_from(len).ok()?;
    // SAFETY: a new read-only mapping of `len` bytes of a memfd sealed against shrinking (so every
    // mapped page stays backed) and writing (so the slice never changes under `read`); it is
    // unmapped below, after `read`, which cannot keep the slice (its result does not borrow it).
    unsafe {
        let address = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            memfd.as_raw_fd(),
            0,
        );
        if address == libc::MAP_FAILED {
            return None;
        }
        let result = read(std::slice::from_raw_parts(address.cast::<u8>(), len));
        libc::munmap(address, len);
        Some(result)
    }
}

/// Loads a verified artifact into wasmtime.
fn deserialize(engine: &Engine, artifact: Artifact) -> Option<Module> {
    // SAFETY: `Module::deserialize*` execute whatever machine code the bytes contain, so they must
    // only see artifacts produced by `Module::serialize` of a compatible engine. These bytes are:
    // the file lives in a directory we created with mode 0700 under AILERON_HOME (only this user
    // can write it, and that user can already run arbitrary code), it is named by the module's
    // content hash and this engine's compatibility key, it was written by `DiskCache::store`
    // (atomically, so never half-written), the owner and mode of what was opened were checked, and
    // its SHA-256 trailer, which covers the content hash it was compiled from, matched: it is byte
    // for byte what we serialized for this module. wasmtime additionally rejects artifacts from
    // another version or configuration. `deserialize_open_file` requires the file to stay
    // unchanged while the module lives: the memfd is sealed against every change, and no one but
    // this process holds it. `deserialize` copies the bytes into wasmtime's own memory.
    match artifact {
        Artifact::Sealed(memfd) => {
            let len = memfd.metadata().ok()?.len();
            let copy = memfd.try_clone().ok();
            unsafe { Module::deserialize_open_file(engine, memfd) }.ok().or_else(|| {
                // Mapping the memfd executable was refused (a security policy can allow
                // anonymous executable memory but not executable tmpfs files): the same verified
                // bytes, copied into wasmtime's memory, rather than a recompile on every start.
                deserialize(engine, Artifact::Bytes(read_whole(&copy?, len)?))
            })
        }
        Artifact::Bytes(bytes) => unsafe { Module::deserialize(engine, bytes) }.ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// Set by a test to take the path of a kernel without executable, sealable memfds.
        pub(super) static WITHOUT_MEMFD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// Without a memfd the artifact is read into memory and checked the same way: a good one
    /// loads and runs, one with a flipped bit is refused and deleted.
    #[test]
    fn without_a_memfd_artifacts_are_read_into_memory_and_checked_the_same_way() {
        let (engine, _dir, cache) = new_cache();
        let wat = r#"(module (func (export "answer") (result i32) i32.const 42))"#;
        let module = Module::new(&engine, wat::parse_str(wat).unwrap()).unwrap();
        let hash = ContentHash::of_connector(b"answer", b"");
        cache.store(&hash, module.serialize().unwrap()).unwrap();
        WITHOUT_MEMFD.set(true);
        let DiskLookup::Hit(loaded) = cache.load(&engine, &hash) else { panic!("a good artifact loads") };
        let mut store = wasmtime::Store::new(&engine, ());
        let instance = wasmtime::Instance::new(&mut store, &loaded, &[]).unwrap();
        let answer = instance.get_typed_func::<(), i32>(&mut store, "answer").unwrap().call(&mut store, ()).unwrap();
        assert_eq!(answer, 42);

        let mut bytes = fs::read(cache.path(&hash)).unwrap();
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x40;
        fs::write(cache.path(&hash), &bytes).unwrap();
        assert!(matches!(cache.load(&engine, &hash), DiskLookup::Rejected));
        assert!(!cache.path(&hash).exists());
        WITHOUT_MEMFD.set(false);
    }

    /// An engine and a disk cache for it in a new temporary directory.
    fn new_cache() -> (Engine, tempfile::TempDir, DiskCache) {
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(dir.path(), &engine).unwrap();
        (engine, dir, cache)
    }

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
        let (engine, _dir, cache) = new_cache();
        let hash = ContentHash::of_connector(b"wasm", b"manifest");
        for bytes in [&b""[..], &[0u8; 31][..], &[0u8; 32][..], &[0u8; 64][..]] {
            fs::write(cache.path(&hash), bytes).unwrap();
            fs::set_permissions(cache.path(&hash), fs::Permissions::from_mode(0o600)).unwrap();
            assert!(matches!(cache.load(&engine, &hash), DiskLookup::Rejected), "{} bytes", bytes.len());
            assert!(!cache.path(&hash).exists(), "a refused artifact is deleted");
        }
        assert!(matches!(cache.load(&engine, &hash), DiskLookup::Miss));
    }

    /// What is opened is what is checked: a link to a good artifact is refused (it is not
    /// followed), and a FIFO in an artifact's place is refused without blocking the load.
    #[test]
    fn links_and_fifos_in_an_artifacts_place_are_refused() {
        let (engine, dir, cache) = new_cache();
        let module = Module::new(&engine, wat::parse_str("(module (func (export \"a\")))").unwrap()).unwrap();
        let (hash, linked) = (ContentHash::of_connector(b"a", b""), ContentHash::of_connector(b"linked", b""));
        cache.store(&hash, module.serialize().unwrap()).unwrap();
        let elsewhere = dir.path().join("elsewhere");
        fs::rename(cache.path(&hash), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, cache.path(&hash)).unwrap();
        assert!(matches!(cache.load(&engine, &hash), DiskLookup::Rejected), "a link is not followed");
        assert!(elsewhere.exists(), "only the link is removed");
        std::os::unix::fs::symlink(&elsewhere, cache.path(&linked)).unwrap();
        assert!(matches!(cache.load(&engine, &linked), DiskLookup::Rejected));

        let fifo = std::ffi::CString::new(cache.path(&hash).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(matches!(cache.load(&engine, &hash), DiskLookup::Rejected), "a FIFO is refused, not waited on");
    }

    /// Another module's artifact, copied onto this module's file name, is refused: its trailer is
    /// bound to the content hash it was compiled from.
    #[test]
    fn a_swapped_artifact_is_refused() {
        let (engine, _dir, cache) = new_cache();
        let module_a = Module::new(&engine, wat::parse_str("(module (func (export \"a\")))").unwrap()).unwrap();
        let module_b = Module::new(&engine, wat::parse_str("(module (func (export \"b\")))").unwrap()).unwrap();
        let (hash_a, hash_b) = (ContentHash::of_connector(b"a", b""), ContentHash::of_connector(b"b", b""));
        cache.store(&hash_a, module_a.serialize().unwrap()).unwrap();
        cache.store(&hash_b, module_b.serialize().unwrap()).unwrap();
        assert!(matches!(cache.load(&engine, &hash_a), DiskLookup::Hit(_)));
        fs::copy(cache.path(&hash_a), cache.path(&hash_b)).unwrap();
        assert!(matches!(cache.load(&engine, &hash_b), DiskLookup::Rejected), "a swapped artifact never loads");
        // A file others may write is refused too, even when its bytes are right.
        cache.store(&hash_a, module_a.serialize().unwrap()).unwrap();
        fs::set_permissions(cache.path(&hash_a), fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(cache.load(&engine, &hash_a), DiskLookup::Rejected));
    }
}
