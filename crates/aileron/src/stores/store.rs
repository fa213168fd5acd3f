//! The content-addressed connector store (SPEC §1, §3.4 step 8):
//! `store/connectors/sha256/<hex>/{connector.wasm, manifest.toml, signature.sig?}` plus the index
//! `store/index/connectors.json` (`{"<fqn>@<version>": "sha256:<hex>"}`), a cache rebuildable
//! from the entries.
//!
//! Invariant: [`Store::load_verified`] hands out only bytes whose SHA-256 matches the pinned hash
//! (SPEC invariant 6). It keeps the entry's directory and both files open from the verification
//! on, and re-hashes whenever one of them is no longer what it was then — its device, inode, size,
//! mtime or ctime differ (an edit, an append, a file unlinked or renamed over, the directory's
//! entries changed or the directory renamed) — and otherwise returns the very bytes it verified
//! then: never fresh, unverified reads, so an edit the check cannot see still never executes.
//! (Decision 0021: a directory above the entry replaced while the daemon runs is seen at the next
//! start.)
//!
//! Entries are committed by writing a temp directory inside `store/connectors/` and renaming it
//! into place, so a crash leaves either no entry or a complete one (stale temp directories are
//! removed at open). Several versions of a connector are simply several entries.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aileron_core::manifest::{ConnectorManifest, parse_manifest};
use aileron_core::{Boundary, ContentHash, Failure, Fqn};
use nix::fcntl::OFlag;

use crate::platform::home::{create_private_dir, sync_dir, write_atomic};
use crate::stores::package::{MANIFEST_FILE, Package, SIGNATURE_FILE, WASM_FILE};

const TEMP_PREFIX: &str = ".tmp-";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{doing} {path}: {source}")]
    Io { doing: &'static str, path: PathBuf, source: io::Error },
    #[error("store entry {path} is damaged: {reason}\nhint: reinstall the connector")]
    Damaged { path: PathBuf, reason: String },
    #[error("package bytes hash to {actual}, but the package claims {claimed}")]
    PackageHash { claimed: ContentHash, actual: ContentHash },
}

fn io_error<'a>(doing: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io { doing, path: path.to_path_buf(), source }
}

/// One installed connector version.
#[derive(Debug, Clone)]
pub struct StoreEntry {
    pub fqn: Fqn,
    pub version: semver::Version,
    pub hash: ContentHash,
    pub manifest: ConnectorManifest,
    /// Whether a `signature.sig` was stored with it (it was verified at install time).
    pub signed: bool,
    /// The entry's directory.
    pub path: PathBuf,
}

impl StoreEntry {
    /// The index key, `<fqn>@<version>`.
    pub fn reference(&self) -> String {
        format!("{}@{}", self.fqn, self.version)
    }
}

/// Connector bytes that hashed to the pinned hash.
#[derive(Clone)]
pub struct VerifiedConnector {
    pub hash: ContentHash,
    pub wasm: Arc<Vec<u8>>,
    /// Shared: every run of the connector hands it to its egress check without a copy.
    pub manifest: Arc<ConnectorManifest>,
    pub manifest_text: Arc<str>,
}

impl std::fmt::Debug for VerifiedConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedConnector")
            .field("hash", &self.hash)
            .field("wasm", &format_args!("<{} bytes>", self.wasm.len()))
            .field("manifest", &self.manifest.reference().to_string())
            .finish_non_exhaustive()
    }
}

/// What a scan of the store found.
#[derive(Debug)]
pub struct StoreScan {
    /// Sorted by FQN, then version.
    pub entries: Vec<StoreEntry>,
    /// Entries whose manifest cannot be read or parsed (each a [`StoreError::Damaged`]).
    pub damaged: Vec<StoreError>,
}

/// `(dev, inode, size, mtime ns, ctime ns)` of an open file or directory: any write, unlink,
/// rename or change of its entries changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    inode: u64,
    size: i64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileStamp {
    /// The stamp of what `fd` is open on now (one `fstat`: no path to walk).
    fn of(fd: &OwnedFd) -> io::Result<FileStamp> {
        let stat = nix::sys::stat::fstat(fd)?;
        Ok(FileStamp {
            dev: stat.st_dev,
            inode: stat.st_ino,
            size: stat.st_size,
            mtime_ns: nanoseconds(stat.st_mtime, stat.st_mtime_nsec),
            ctime_ns: nanoseconds(stat.st_ctime, stat.st_ctime_nsec),
        })
    }
}

fn nanoseconds(secs: i64, nanos: i64) -> i128 {
    i128::from(secs) * 1_000_000_000 + i128::from(nanos)
}

/// An entry as it was verified: its directory, module and manifest, each held open with its
/// stamp from before its bytes were read.
struct HeldEntry([(OwnedFd, FileStamp); 3]);

impl HeldEntry {
    /// Whether all three are still what they were (three `fstat`s).
    fn unchanged(&self) -> bool {
        self.0.iter().all(|(fd, stamp)| FileStamp::of(fd).is_ok_and(|now| now == *stamp))
    }
}

struct CachedVerification {
    held: Arc<HeldEntry>,
    connector: VerifiedConnector,
}

/// The store under `<home>/store`.
pub struct Store {
    root: PathBuf,
    verified: Mutex<HashMap<ContentHash, CachedVerification>>,
    /// Serializes commits so index read-modify-write cycles do not interleave.
    commit_lock: Mutex<()>,
    rehashes: AtomicU64,
}

impl Store {
    /// Opens (creating) the store at `root` and removes temp directories left by a crash.
    pub fn open(root: impl Into<PathBuf>) -> Result<Store, StoreError> {
        let store = Store {
            root: root.into(),
            verified: Mutex::new(HashMap::new()),
            commit_lock: Mutex::new(()),
            rehashes: AtomicU64::new(0),
        };
        for dir in [store.entries_dir(), store.index_path().parent().expect("index has a parent").to_path_buf()] {
            create_private_dir(&dir).map_err(io_error("creating", &dir))?;
        }
        let connectors = store.connectors_dir();
        for entry in fs::read_dir(&connectors).map_err(io_error("listing", &connectors))? {
            let entry = entry.map_err(io_error("listing", &connectors))?;
            if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                let path = entry.path();
                fs::remove_dir_all(&path).map_err(io_error("removing the unfinished commit", &path))?;
            }
        }
        Ok(store)
    }

    fn connectors_dir(&self) -> PathBuf {
        self.root.join("connectors")
    }

    fn entries_dir(&self) -> PathBuf {
        self.connectors_dir().join("sha256")
    }

    pub fn index_path(&self) -> PathBuf {
        self.root.join("index").join("connectors.json")
    }

    /// `store/connectors/sha256/<hex>`.
    pub fn entry_dir(&self, hash: &ContentHash) -> PathBuf {
        self.entries_dir().join(hash.hex())
    }

    /// Stores `package` and records it in the index. Committing an entry that already exists is
    /// a no-op for its bytes (a signature the existing entry lacks is added).
    pub fn commit(&self, package: &Package) -> Result<StoreEntry, StoreError> {
        let actual = ContentHash::of_connector(&package.wasm, package.manifest_text.as_bytes());
        if actual != package.hash {
            return Err(StoreError::PackageHash { claimed: package.hash.clone(), actual });
        }
        let _guard = self.commit_lock.lock().expect("store commit lock poisoned");
        let dest = self.entry_dir(&package.hash);
        if !self.intact(&dest, &package.hash)? {
            self.write_entry(package, &dest)?;
        }
        if let Some(signature) = &package.signature {
            let path = dest.join(SIGNATURE_FILE);
            if fs::read(&path).ok().as_ref() != Some(signature) {
                write_atomic(&path, signature, 0o600).map_err(io_error("writing", &path))?;
            }
        }
        let entry = StoreEntry {
            fqn: package.manifest.name.clone(),
            version: package.manifest.version.clone(),
            hash: package.hash.clone(),
            manifest: package.manifest.clone(),
            signed: dest.join(SIGNATURE_FILE).exists(),
            path: dest,
        };
        let mut index = self.read_index()?;
        index.insert(entry.reference(), entry.hash.clone());
        self.write_index(&index)?;
        Ok(entry)
    }

    /// Removes an entry (atomically out of sight: renamed, then deleted) and its index lines.
    /// `false` when there was none.
    pub fn remove(&self, hash: &ContentHash) -> Result<bool, StoreError> {
        let _guard = self.commit_lock.lock().expect("store commit lock poisoned");
        let dest = self.entry_dir(hash);
        if !dest.exists() {
            return Ok(false);
        }
        let trash = self.connectors_dir().join(format!("{TEMP_PREFIX}removed-{}", uuid::Uuid::new_v4().simple()));
        fs::rename(&dest, &trash).map_err(io_error("removing", &dest))?;
        fs::remove_dir_all(&trash).map_err(io_error("removing", &trash))?;
        let mut index = self.read_index()?;
        index.retain(|_, indexed| indexed != hash);
        self.write_index(&index)?;
        self.verified.lock().expect("verification cache poisoned").remove(hash);
        Ok(true)
    }

    /// Whether `dest` holds a complete entry whose bytes hash to `hash`. A damaged entry is moved
    /// out of the way so a fresh copy can take its place.
    fn intact(&self, dest: &Path, hash: &ContentHash) -> Result<bool, StoreError> {
        if !dest.exists() {
            return Ok(false);
        }
        let files = (fs::read(dest.join(WASM_FILE)), fs::read(dest.join(MANIFEST_FILE)));
        if let (Ok(wasm), Ok(manifest)) = files
            && ContentHash::of_connector(&wasm, &manifest) == *hash
        {
            return Ok(true);
        }
        let trash = self.connectors_dir().join(format!("{TEMP_PREFIX}damaged-{}", uuid::Uuid::new_v4().simple()));
        fs::rename(dest, &trash).map_err(io_error("moving aside the damaged entry", dest))?;
        fs::remove_dir_all(&trash).map_err(io_error("removing", &trash))?;
        Ok(false)
    }

    fn write_entry(&self, package: &Package, dest: &Path) -> Result<(), StoreError> {
        let temp = self.connectors_dir().join(format!("{TEMP_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        create_private_dir(&temp).map_err(io_error("creating", &temp))?;
        let result = (|| {
            write_new(&temp.join(WASM_FILE), &package.wasm)?;
            write_new(&temp.join(MANIFEST_FILE), package.manifest_text.as_bytes())?;
            if let Some(signature) = &package.signature {
                write_new(&temp.join(SIGNATURE_FILE), signature)?;
            }
            sync_dir(&temp).map_err(io_error("syncing", &temp))?;
            fs::rename(&temp, dest).map_err(io_error("committing", dest))?;
            let entries = self.entries_dir();
            sync_dir(&entries).map_err(io_error("syncing", &entries))
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&temp);
        }
        result
    }

    /// Every readable entry, sorted by FQN then version. Damaged entries are left out with a
    /// warning on stderr; [`Store::scan`] reports them.
    pub fn list(&self) -> Result<Vec<StoreEntry>, StoreError> {
        let scan = self.scan()?;
        for damaged in &scan.damaged {
            log_line!("aileron: warning: {damaged}");
        }
        Ok(scan.entries)
    }

    /// Every entry, separating the damaged ones: a manifest that no longer parses (tampering, or a
    /// stricter parser in a newer version) must not make the whole store unusable.
    pub fn scan(&self) -> Result<StoreScan, StoreError> {
        let entries_dir = self.entries_dir();
        let mut scan = StoreScan { entries: Vec::new(), damaged: Vec::new() };
        for dir_entry in fs::read_dir(&entries_dir).map_err(io_error("listing", &entries_dir))? {
            let dir_entry = dir_entry.map_err(io_error("listing", &entries_dir))?;
            let name = dir_entry.file_name();
            let Some(hash) = name.to_str().and_then(|hex| ContentHash::parse(&format!("sha256:{hex}")).ok()) else {
                continue;
            };
            match self.read_entry(&hash) {
                Ok(entry) => scan.entries.push(entry),
                Err(error @ StoreError::Damaged { .. }) => scan.damaged.push(error),
                Err(error) => return Err(error),
            }
        }
        scan.entries.sort_by(|a, b| (&a.fqn, &a.version, &a.hash).cmp(&(&b.fqn, &b.version, &b.hash)));
        Ok(scan)
    }

    /// The entry stored under `hash`, if any (not re-hashed: see [`Store::load_verified`]).
    pub fn find(&self, hash: &ContentHash) -> Result<Option<StoreEntry>, StoreError> {
        if !self.entry_dir(hash).is_dir() {
            return Ok(None);
        }
        self.read_entry(hash).map(Some)
    }

    fn read_entry(&self, hash: &ContentHash) -> Result<StoreEntry, StoreError> {
        let dir = self.entry_dir(hash);
        let manifest_path = dir.join(MANIFEST_FILE);
        let text = fs::read_to_string(&manifest_path)
            .map_err(|e| StoreError::Damaged { path: dir.clone(), reason: format!("reading {MANIFEST_FILE}: {e}") })?;
        // The parser's own hint is about authoring a manifest; this error carries the store's hint.
        let manifest = parse_manifest(&text, MANIFEST_FILE).map_err(|e| StoreError::Damaged {
            path: dir.clone(),
            reason: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
        Ok(StoreEntry {
            fqn: manifest.name.clone(),
            version: manifest.version.clone(),
            hash: hash.clone(),
            signed: dir.join(SIGNATURE_FILE).exists(),
            manifest,
            path: dir,
        })
    }

    /// The hash installed for `<fqn>@<version>`, from the index (rebuilt when missing or unreadable).
    pub fn resolve(&self, reference: &aileron_core::ConnectorRef) -> Result<Option<ContentHash>, StoreError> {
        Ok(self.read_index()?.get(&reference.to_string()).cloned())
    }

    /// The index, rebuilding it from the entries when it is missing or unreadable.
    pub fn read_index(&self) -> Result<BTreeMap<String, ContentHash>, StoreError> {
        let path = self.index_path();
        match fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<BTreeMap<String, ContentHash>>(&bytes) {
                // Written before names were canonical (lowercase): rebuilt from the entries.
                Ok(index)
                    if index.keys().all(|key| {
                        aileron_core::ConnectorRef::parse(key).is_ok_and(|reference| reference.to_string() == *key)
                    }) =>
                {
                    Ok(index)
                }
                Ok(_) => self.rebuild_index(),
                Err(error) => {
                    log_line!(
                        "aileron: warning: {} is unreadable ({error}); rebuilding it from the store",
                        path.display()
                    );
                    self.rebuild_index()
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.rebuild_index(),
            Err(source) => Err(StoreError::Io { doing: "reading", path, source }),
        }
    }

    /// Recomputes the index from the entries on disk and writes it. When two entries claim the
    /// same `<fqn>@<version>` (a re-published release), the most recently committed one wins.
    pub fn rebuild_index(&self) -> Result<BTreeMap<String, ContentHash>, StoreError> {
        let mut newest: BTreeMap<String, (i128, ContentHash)> = BTreeMap::new();
        for entry in self.list()? {
            let metadata = fs::metadata(&entry.path).map_err(io_error("reading", &entry.path))?;
            let committed = nanoseconds(metadata.ctime(), metadata.ctime_nsec());
            let key = entry.reference();
            if newest.get(&key).is_none_or(|(at, _)| committed > *at) {
                newest.insert(key, (committed, entry.hash));
            }
        }
        let index: BTreeMap<String, ContentHash> = newest.into_iter().map(|(key, (_, hash))| (key, hash)).collect();
        self.write_index(&index)?;
        Ok(index)
    }

    fn write_index(&self, index: &BTreeMap<String, ContentHash>) -> Result<(), StoreError> {
        let path = self.index_path();
        let mut bytes = serde_json::to_vec_pretty(index).expect("the index is plain JSON");
        bytes.push(b'\n');
        write_atomic(&path, &bytes, 0o600).map_err(io_error("writing", &path))
    }

    /// The connector pinned by `hash`, re-hashed unless both files are unchanged since the last
    /// verification. `hash_mismatch` when the bytes on disk do not hash to `hash`. Hashing reads
    /// the whole module (8 ms for an 8 MB Go guest): async callers check
    /// [`Store::verified_unchanged`] first and run this on a blocking thread.
    pub fn load_verified(&self, hash: &ContentHash) -> Result<VerifiedConnector, Failure> {
        if let Some(connector) = self.verified_unchanged(hash) {
            return Ok(connector);
        }
        let not_installed = |e: io::Error| {
            Failure::runtime_error(Boundary::Runtime, format!("connector {hash} is not in the store ({e})"))
                .with_detail("hash", hash.to_string())
                .with_detail("hint", "install the connector the action pins, then retry")
        };
        // The directory is stamped before its files are opened through it, so a file swapped in
        // after that changes the directory's stamp; each file is stamped and read through the
        // same open file, so its stamp describes the bytes hashed.
        let dir = nix::fcntl::open(
            &self.entry_dir(hash),
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| not_installed(e.into()))?;
        let dir_stamp = FileStamp::of(&dir).map_err(not_installed)?;
        let (wasm_file, wasm) = read_stamped(&dir, WASM_FILE).map_err(not_installed)?;
        let (manifest_file, manifest_bytes) = read_stamped(&dir, MANIFEST_FILE).map_err(not_installed)?;
        self.rehashes.fetch_add(1, Ordering::Relaxed);
        let actual = ContentHash::of_connector(&wasm, &manifest_bytes);
        if actual != *hash {
            self.verified.lock().expect("store verification cache poisoned").remove(hash);
            return Err(Failure::hash_mismatch(format!(
                "the stored bytes of connector {hash} hash to {actual}; they were modified after install and will \
                 not run"
            ))
            .with_detail("expected", hash.to_string())
            .with_detail("actual", actual.to_string())
            .with_detail("hint", "reinstall the connector to restore the pinned bytes"));
        }
        let damaged = |reason: String| {
            Failure::runtime_error(Boundary::Runtime, format!("store entry {hash}: {reason}"))
                .with_detail("hash", hash.to_string())
        };
        let manifest_text: Arc<str> =
            String::from_utf8(manifest_bytes).map_err(|_| damaged(format!("{MANIFEST_FILE} is not UTF-8")))?.into();
        let manifest = parse_manifest(&manifest_text, MANIFEST_FILE).map_err(|e| damaged(e.to_string()))?;
        let connector =
            VerifiedConnector { hash: hash.clone(), wasm: Arc::new(wasm), manifest: Arc::new(manifest), manifest_text };
        self.verified.lock().expect("store verification cache poisoned").insert(
            hash.clone(),
            CachedVerification {
                held: Arc::new(HeldEntry([(dir, dir_stamp), wasm_file, manifest_file])),
                connector: connector.clone(),
            },
        );
        Ok(connector)
    }

    /// The connector pinned by `hash` if it was verified before and its entry is unchanged since
    /// (three `fstat`s of what the verification held open, no path walked, no read): the stamps
    /// now against those taken when its bytes were hashed. `None` means [`Store::load_verified`]
    /// must read and hash them.
    pub fn verified_unchanged(&self, hash: &ContentHash) -> Option<VerifiedConnector> {
        let (held, connector) = self
            .verified
            .lock()
            .expect("store verification cache poisoned")
            .get(hash)
            .map(|cached| (cached.held.clone(), cached.connector.clone()))?;
        held.unchanged().then_some(connector)
    }

    /// How many times `load_verified` hashed the bytes (the warm path does not).
    pub fn rehash_count(&self) -> u64 {
        self.rehashes.load(Ordering::Relaxed)
    }
}

/// `name` in `dir`, opened, stamped, then read: the open file (to hold) with its stamp, and its bytes.
fn read_stamped(dir: &OwnedFd, name: &str) -> io::Result<((OwnedFd, FileStamp), Vec<u8>)> {
    let fd = nix::fcntl::openat(dir, name, OFlag::O_RDONLY | OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())?;
    let stamp = FileStamp::of(&fd)?;
    let mut file = File::from(fd);
    let mut bytes = Vec::with_capacity(usize::try_from(stamp.size).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(((OwnedFd::from(file), stamp), bytes))
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file =
        OpenOptions::new().create_new(true).write(true).mode(0o600).open(path).map_err(io_error("creating", path))?;
    file.write_all(bytes).map_err(io_error("writing", path))?;
    file.sync_all().map_err(io_error("syncing", path))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use aileron_core::{ConnectorRef, FailureClass};

    use super::*;
    use crate::stores::package::load_package;
    use crate::stores::package::tests::manifest_text;

    /// A package whose module is a core module's header followed by `body`.
    fn package(name: &str, version: &str, body: &[u8], signature: Option<[u8; 64]>) -> Package {
        let temp = tempfile::tempdir().unwrap();
        fs::write(temp.path().join(WASM_FILE), [crate::stores::package::CORE_MODULE_HEADER.as_slice(), body].concat())
            .unwrap();
        fs::write(temp.path().join(MANIFEST_FILE), manifest_text(name, version)).unwrap();
        if let Some(signature) = signature {
            fs::write(temp.path().join(SIGNATURE_FILE), signature).unwrap();
        }
        load_package(temp.path()).unwrap()
    }

    fn store() -> (tempfile::TempDir, Store) {
        let temp = tempfile::tempdir().unwrap();
        let store = Store::open(temp.path().join("store")).unwrap();
        (temp, store)
    }

    /// Coarse file timestamps tick every few ms on some kernels; wait one tick so an edit is visible.
    fn next_timestamp_tick() {
        std::thread::sleep(Duration::from_millis(25));
    }

    #[test]
    fn commit_lays_out_the_entry_and_is_idempotent() {
        let (temp, store) = store();
        let pkg = package("github://acme/slack", "1.2.0", b"\0asm-slack", Some([9; 64]));
        let entry = store.commit(&pkg).unwrap();
        let dir = temp.path().join("store/connectors/sha256").join(pkg.hash.hex());
        assert_eq!(entry.path, dir);
        assert_eq!(fs::read(dir.join("connector.wasm")).unwrap(), pkg.wasm);
        assert_eq!(fs::read_to_string(dir.join("manifest.toml")).unwrap(), pkg.manifest_text);
        assert_eq!(fs::read(dir.join("signature.sig")).unwrap(), [9; 64]);
        assert!(entry.signed);
        let index: BTreeMap<String, String> =
            serde_json::from_slice(&fs::read(temp.path().join("store/index/connectors.json")).unwrap()).unwrap();
        assert_eq!(index, BTreeMap::from([("github://acme/slack@1.2.0".to_string(), pkg.hash.to_string())]));

        let again = store.commit(&pkg).unwrap();
        assert_eq!(again.hash, entry.hash);
        assert_eq!(store.list().unwrap().len(), 1);
        let leftovers: Vec<_> = fs::read_dir(temp.path().join("store/connectors"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(leftovers, vec!["sha256".to_string()], "no temp directories remain");
    }

    #[test]
    fn versions_coexist_and_the_index_rebuilds() {
        let (temp, store) = store();
        let v1 = package("github://acme/slack", "1.0.0", b"one", None);
        let v2 = package("github://acme/slack", "2.0.0", b"two", Some([1; 64]));
        let other = package("gitlab://team/jira", "0.3.0", b"jira", None);
        for pkg in [&v2, &other, &v1] {
            store.commit(pkg).unwrap();
        }
        let listed: Vec<(String, bool)> = store.list().unwrap().iter().map(|e| (e.reference(), e.signed)).collect();
        assert_eq!(
            listed,
            vec![
                ("github://acme/slack@1.0.0".to_string(), false),
                ("github://acme/slack@2.0.0".to_string(), true),
                ("gitlab://team/jira@0.3.0".to_string(), false),
            ]
        );
        let expected: BTreeMap<String, ContentHash> =
            [&v1, &v2, &other].iter().map(|p| (p.manifest.reference().to_string(), p.hash.clone())).collect();
        assert_eq!(store.read_index().unwrap(), expected);
        for state in ["deleted", "garbage", "old spelling"] {
            let index_path = temp.path().join("store/index/connectors.json");
            match state {
                "deleted" => fs::remove_file(&index_path).unwrap(),
                // An index written before FQNs were canonical (lowercase), e.g. the original
                // project's `github://ALRubinger/...`: rebuilt under the canonical names.
                "old spelling" => {
                    let old = format!("{{\"github://Acme/Slack@1.0.0\": \"{}\"}}", v1.hash);
                    fs::write(&index_path, old).unwrap()
                }
                _ => fs::write(&index_path, b"{not json").unwrap(),
            }
            let reference = ConnectorRef::parse("github://acme/slack@1.0.0").unwrap();
            assert_eq!(store.resolve(&reference).unwrap(), Some(v1.hash.clone()), "{state}");
            let rebuilt: BTreeMap<String, ContentHash> =
                serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
            assert_eq!(rebuilt, expected, "{state}: the rebuilt index is written back");
        }
        assert_eq!(store.find(&v2.hash).unwrap().unwrap().version.to_string(), "2.0.0");
        assert!(store.find(&ContentHash::of_bytes(b"absent")).unwrap().is_none());
    }

    #[test]
    fn load_verified_detects_tampering_even_after_a_cached_verification() {
        // (file to tamper, how) — each case starts from a fresh, verified entry.
        let cases = [
            ("connector.wasm", Tamper::FlipFirstByte),
            ("manifest.toml", Tamper::FlipFirstByte),
            ("connector.wasm", Tamper::Append),
            ("manifest.toml", Tamper::ReplaceSameSize),
            ("connector.wasm", Tamper::RenameOver),
        ];
        for (file, tamper) in cases {
            let (_temp, store) = store();
            let pkg = package("github://acme/slack", "1.2.0", b"\0asm-slack-connector", None);
            let entry = store.commit(&pkg).unwrap();
            let first = store.load_verified(&pkg.hash).unwrap();
            assert_eq!((first.wasm.as_slice(), &*first.manifest_text), (&pkg.wasm[..], pkg.manifest_text.as_str()));
            store.load_verified(&pkg.hash).unwrap();
            assert_eq!(store.rehash_count(), 1, "{file}: the warm call does not re-hash");

            next_timestamp_tick();
            tamper.apply(&entry.path.join(file));
            let failure = store.load_verified(&pkg.hash).unwrap_err();
            assert_eq!((failure.class, failure.boundary), (FailureClass::HashMismatch, Boundary::Runtime), "{file}");
            assert_eq!(failure.details["expected"], pkg.hash.to_string());
            assert!(store.load_verified(&pkg.hash).is_err(), "{file}: a mismatch is never cached");

            // Reinstalling restores the pinned bytes (the damaged entry is replaced).
            store.commit(&pkg).unwrap();
            assert_eq!(*store.load_verified(&pkg.hash).unwrap().wasm, pkg.wasm, "{file}");
        }
    }

    #[derive(Debug, Clone, Copy)]
    enum Tamper {
        /// Same size, same inode, rewritten in place.
        FlipFirstByte,
        Append,
        /// A new file (new inode) of the same size.
        ReplaceSameSize,
        /// A new file written beside it and renamed over it.
        RenameOver,
    }

    impl Tamper {
        fn apply(self, path: &Path) {
            let mut bytes = fs::read(path).unwrap();
            match self {
                Tamper::FlipFirstByte => {
                    bytes[0] ^= 0x20;
                    fs::OpenOptions::new().write(true).open(path).unwrap().write_all(&bytes).unwrap();
                }
                Tamper::Append => fs::OpenOptions::new().append(true).open(path).unwrap().write_all(b"x").unwrap(),
                Tamper::ReplaceSameSize => {
                    bytes[0] ^= 1;
                    fs::remove_file(path).unwrap();
                    fs::write(path, bytes).unwrap();
                }
                Tamper::RenameOver => {
                    bytes[0] ^= 1;
                    let beside = path.with_extension("new");
                    fs::write(&beside, bytes).unwrap();
                    fs::rename(&beside, path).unwrap();
                }
            }
        }
    }

    #[test]
    fn an_entry_directory_replaced_after_a_verification_is_hashed_again() {
        for tampered in [false, true] {
            let (temp, store) = store();
            let pkg = package("github://acme/slack", "1.2.0", b"\0asm-slack-connector", None);
            let entry = store.commit(&pkg).unwrap();
            store.load_verified(&pkg.hash).unwrap();
            assert_eq!(store.rehash_count(), 1);

            // The verified directory is moved aside (still whole, its files still open) and
            // another takes its place.
            next_timestamp_tick();
            let aside = temp.path().join("aside");
            fs::rename(&entry.path, &aside).unwrap();
            fs::create_dir(&entry.path).unwrap();
            for file in [WASM_FILE, MANIFEST_FILE] {
                let mut bytes = fs::read(aside.join(file)).unwrap();
                if tampered && file == WASM_FILE {
                    bytes[0] ^= 1;
                }
                fs::write(entry.path.join(file), bytes).unwrap();
            }
            let loaded = store.load_verified(&pkg.hash);
            assert_eq!(store.rehash_count(), 2, "tampered: {tampered}: the new directory was hashed");
            if tampered {
                assert_eq!(loaded.unwrap_err().class, FailureClass::HashMismatch);
            } else {
                assert_eq!(*loaded.unwrap().wasm, pkg.wasm);
                store.load_verified(&pkg.hash).unwrap();
                assert_eq!(store.rehash_count(), 2, "and is held from then on");
            }
        }
    }

    #[test]
    fn a_damaged_entry_is_reported_without_hiding_the_others() {
        let (_temp, store) = store();
        let good = package("github://acme/slack", "1.0.0", b"good", None);
        let bad = package("github://acme/jira", "1.0.0", b"bad", None);
        store.commit(&good).unwrap();
        let bad_entry = store.commit(&bad).unwrap();
        fs::write(bad_entry.path.join(MANIFEST_FILE), "[connector]\nname = 7\n").unwrap();
        let scan = store.scan().unwrap();
        let listed: Vec<String> = scan.entries.iter().map(StoreEntry::reference).collect();
        assert_eq!(listed, vec!["github://acme/slack@1.0.0".to_string()]);
        assert_eq!(scan.damaged.len(), 1);
        let message = scan.damaged[0].to_string();
        assert!(message.contains(&bad.hash.hex()) && message.contains("manifest.toml:2"), "{message}");
        assert_eq!(message.matches("hint:").count(), 1, "{message}");
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.rebuild_index().unwrap().into_keys().collect::<Vec<_>>(), listed);
        assert_eq!(store.load_verified(&bad.hash).unwrap_err().class, FailureClass::HashMismatch);
    }

    #[test]
    fn missing_entry_is_a_runtime_failure_naming_the_hash() {
        let (_temp, store) = store();
        let hash = ContentHash::of_bytes(b"never installed");
        let failure = store.load_verified(&hash).unwrap_err();
        assert_eq!(failure.class, FailureClass::ConnectorRuntimeError);
        assert!(failure.message.contains(&hash.to_string()), "{}", failure.message);
    }

    #[test]
    fn open_removes_unfinished_commits() {
        let temp = tempfile::tempdir().unwrap();
        let leftover = temp.path().join("store/connectors/.tmp-0123");
        fs::create_dir_all(&leftover).unwrap();
        fs::write(leftover.join(WASM_FILE), b"half").unwrap();
        Store::open(temp.path().join("store")).unwrap();
        assert!(!leftover.exists());
    }

    #[test]
    fn a_package_whose_hash_field_lies_is_refused() {
        let (_temp, store) = store();
        let mut pkg = package("github://acme/slack", "1.2.0", b"real", None);
        pkg.wasm = b"swapped".to_vec();
        assert!(matches!(store.commit(&pkg), Err(StoreError::PackageHash { .. })));
    }

    /// Measures what the stat cache saves on a connector the size of the original project's Go
    /// modules (7 MB). Prints the numbers; asserts only that the warm path skips hashing.
    #[test]
    fn hash_cost_of_a_7_mb_connector() {
        let (_temp, store) = store();
        let wasm: Vec<u8> = (0..7 * 1024 * 1024).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
        let pkg = package("github://acme/big", "1.0.0", &wasm, None);
        store.commit(&pkg).unwrap();
        let started = Instant::now();
        store.load_verified(&pkg.hash).unwrap();
        let cold = started.elapsed();
        let started = Instant::now();
        for _ in 0..100 {
            store.load_verified(&pkg.hash).unwrap();
        }
        let warm = started.elapsed() / 100;
        log_line!("load_verified of a 7 MiB connector: cold (read + sha256) {cold:?}, warm (3 fstats) {warm:?}");
        assert_eq!(store.rehash_count(), 1);
    }
}
