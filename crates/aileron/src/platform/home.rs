//! The state directory (SPEC §1): where every file Aileron keeps lives, and the one way to
//! replace a file atomically.
//!
//! `AILERON_HOME` (default `~/.aileron`) is created with mode 0700; files are written 0600.
//! Overrides are read once, when the [`Home`] is resolved, so a running daemon never changes its
//! mind about where its state is.

use std::fs::{DirBuilder, File, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::platform::env;

#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    #[error("{var} is set but empty\nhint: unset it to use ~/.aileron, or point it at a directory")]
    EmptyHome { var: &'static str },
    #[error("cannot locate the home directory to place ~/.aileron\nhint: set {var} to a directory")]
    NoUserHome { var: &'static str },
    #[error("creating the state directory {path}: {source}\nhint: check that the parent exists and is writable")]
    Create { path: PathBuf, source: io::Error },
    #[error(
        "{path} belongs to user {owner}, not to you (user {me}): another user could replace the files Aileron trusts \
         there\nhint: point AILERON_HOME at a directory of your own (it is created 0700), or remove this one"
    )]
    NotOurs { path: PathBuf, owner: u32, me: u32 },
    #[error("making {path} private: {source}\nhint: chmod go-w {path}")]
    Tighten { path: PathBuf, source: io::Error },
    #[error(
        "{path} is a symbolic link: Aileron keeps its state only in a directory of its own, not where a link \
         (which another user may have made) leads\nhint: replace the link with the directory it names"
    )]
    Link { path: PathBuf },
}

/// The resolved state directory and the overrides that relocate parts of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
    /// `None` = the audit log is kept in memory (`AILERON_AUDIT_DIR` explicitly empty).
    audit_parent: Option<PathBuf>,
    /// `None` = the file trace exporter is disabled (`AILERON_TRACES_DIR` explicitly empty).
    traces_parent: Option<PathBuf>,
    /// The audit witness's directory (SPEC §17): outside the home, masked like it.
    witness: PathBuf,
}

impl Home {
    /// Resolves from the process environment and creates the root (0700) if needed.
    pub fn from_env() -> Result<Home, HomeError> {
        Home::resolve(env::get)
    }

    /// Resolves from the process environment without creating or checking anything: for a
    /// process that reaches the daemon through `AILERON_URL` and never touches the home
    /// (`aileron-mcp` under `aileron launch`, where the home is hidden and the rest of the
    /// filesystem may be read-only).
    pub fn locate_from_env() -> Result<Home, HomeError> {
        let root = Home::root_from(env::get)?;
        let lookup = env::get;
        Ok(Home {
            audit_parent: parent_override(lookup(env::AILERON_AUDIT_DIR), &root),
            traces_parent: parent_override(lookup(env::AILERON_TRACES_DIR), &root),
            witness: witness_override(lookup(env::AILERON_WITNESS_DIR), &root),
            root,
        })
    }

    fn root_from(lookup: impl Fn(&str) -> Option<String>) -> Result<PathBuf, HomeError> {
        Ok(match lookup(env::AILERON_HOME) {
            Some(value) if value.is_empty() => return Err(HomeError::EmptyHome { var: env::AILERON_HOME }),
            Some(value) => absolute(PathBuf::from(value)),
            None => std::env::home_dir()
                .filter(|home| home.is_absolute())
                .ok_or(HomeError::NoUserHome { var: env::AILERON_HOME })?
                .join(".aileron"),
        })
    }

    /// Resolves with `lookup` standing in for the environment (`Some("")` = explicitly empty).
    pub fn resolve(lookup: impl Fn(&str) -> Option<String>) -> Result<Home, HomeError> {
        let root = Home::root_from(&lookup)?;
        let mut home = Home::at(root)?;
        home.audit_parent = parent_override(lookup(env::AILERON_AUDIT_DIR), &home.root);
        home.traces_parent = parent_override(lookup(env::AILERON_TRACES_DIR), &home.root);
        home.witness = witness_override(lookup(env::AILERON_WITNESS_DIR), &home.root);
        for dir in home.audit_parent.iter().map(|parent| parent.join("audit")).chain(home.traces_dir()) {
            if dir.exists() {
                secure_dir(&dir)?;
            }
        }
        // The directories the overrides name hold `audit/` or `traces/`: one another user owns
        // (and is not a sticky `/tmp`) let them rename the whole log away. The witness's is beside
        // the home, so in a directory others may write when the home is in `/tmp`: one another
        // user made first planted the witness's key (the ninth re-attack).
        let relocated =
            [&home.audit_parent, &home.traces_parent].into_iter().flatten().filter(|dir| **dir != home.root);
        for dir in relocated {
            refuse_others_parent(dir)?;
        }
        if std::fs::symlink_metadata(&home.witness).is_ok() {
            secure_own_dir(&home.witness)?;
        }
        Ok(home)
    }

    /// A home at `root` with no overrides (audit and traces under the root); creates it 0700.
    pub fn at(root: impl Into<PathBuf>) -> Result<Home, HomeError> {
        let root = absolute(root.into());
        create_private_dir(&root).map_err(|source| HomeError::Create { path: root.clone(), source })?;
        secure_dir(&root)?;
        warn_if_lax(&root);
        Ok(Home {
            audit_parent: Some(root.clone()),
            traces_parent: Some(root.clone()),
            witness: witness_override(None, &root),
            root,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn daemon_json(&self) -> PathBuf {
        self.root.join("daemon.json")
    }

    pub fn daemon_lock(&self) -> PathBuf {
        self.root.join("daemon.lock")
    }

    pub fn daemon_log(&self) -> PathBuf {
        self.root.join("daemon.log")
    }

    /// The daemon's control socket for confined launches' network namespaces (SPEC §15).
    pub fn agent_network_socket(&self) -> PathBuf {
        self.root.join("agent-network.sock")
    }

    /// `actions/<name>.md`.
    pub fn actions_dir(&self) -> PathBuf {
        self.root.join("actions")
    }

    pub fn action_state(&self) -> PathBuf {
        self.root.join("action-state.json")
    }

    /// `store/`: holds `connectors/sha256/<hex>/`, `index/` and `cache/`.
    pub fn store_dir(&self) -> PathBuf {
        self.root.join("store")
    }

    pub fn store_index(&self) -> PathBuf {
        self.store_dir().join("index").join("connectors.json")
    }

    /// Compiled-module cache keyed by content hash (safe to delete).
    pub fn cache_dir(&self) -> PathBuf {
        self.store_dir().join("cache")
    }

    pub fn keyring(&self) -> PathBuf {
        self.root.join("keyring.json")
    }

    pub fn secrets(&self) -> PathBuf {
        self.root.join("secrets.json")
    }

    pub fn approvals_journal(&self) -> PathBuf {
        self.root.join("approvals.jsonl")
    }

    pub fn sessions_journal(&self) -> PathBuf {
        self.root.join("sessions.jsonl")
    }

    /// The parent of `audit/`; `None` means the audit log is kept in memory.
    pub fn audit_parent(&self) -> Option<PathBuf> {
        self.audit_parent.clone()
    }

    /// The audit witness's directory: `AILERON_WITNESS_DIR`, else `<home>-witness` beside the
    /// home (`~/.aileron-witness`), so that whoever holds the home does not hold its key.
    pub fn witness_dir(&self) -> PathBuf {
        self.witness.clone()
    }

    /// Files a launched agent planted that its launcher moved aside (`quarantine/<session>/`):
    /// in the home, which the agent cannot see, and which outlives a reboot.
    pub fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }

    /// `<traces parent>/traces`; `None` means the file trace exporter is disabled.
    pub fn traces_dir(&self) -> Option<PathBuf> {
        self.traces_parent.as_ref().map(|parent| parent.join("traces"))
    }
}

/// `AILERON_WITNESS_DIR` when set and not empty, else `<root>-witness`.
fn witness_override(value: Option<String>, root: &Path) -> PathBuf {
    match value.filter(|value| !value.is_empty()) {
        Some(value) => absolute(PathBuf::from(value)),
        None => {
            let mut name = root.file_name().map(|name| name.to_os_string()).unwrap_or_else(|| "aileron".into());
            name.push("-witness");
            root.with_file_name(name)
        }
    }
}

/// An override variable: unset = under the root, empty = disabled, anything else = that path.
fn parent_override(value: Option<String>, root: &Path) -> Option<PathBuf> {
    match value {
        None => Some(root.to_path_buf()),
        Some(value) if value.is_empty() => None,
        Some(value) => Some(absolute(PathBuf::from(value))),
    }
}

/// Relative paths are anchored at the current directory once, so a later `chdir` cannot move state.
fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        return path;
    }
    std::path::absolute(&path).unwrap_or(path)
}

/// A directory of Aileron's state must be the user's own and writable by nobody else (the
/// re-attack's M3: another local user swapped `daemon.json` in a world-writable home and received
/// the vault passphrase). Like ssh's StrictModes for what is not ours: refused; what is ours and
/// writable by group or others loses those write bits (and says so).
pub fn secure_dir(path: &Path) -> Result<(), HomeError> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).map_err(|source| HomeError::Create { path: path.to_path_buf(), source })?;
    let me = nix::unistd::geteuid().as_raw();
    if metadata.uid() != me {
        return Err(HomeError::NotOurs { path: path.to_path_buf(), owner: metadata.uid(), me });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        let tightened = mode & !0o022;
        std::fs::set_permissions(path, Permissions::from_mode(tightened))
            .map_err(|source| HomeError::Tighten { path: path.to_path_buf(), source })?;
        log_line!(
            "aileron: warning: {} was writable by other users (mode {mode:o}); it is now {tightened:o}\nhint: chmod 700 {}",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

/// [`secure_dir`] for a directory that must not be a link either: one Aileron keeps state in
/// outside the home (the witness's, an override's), where another user may have made the name.
pub fn secure_own_dir(path: &Path) -> Result<(), HomeError> {
    let metadata =
        std::fs::symlink_metadata(path).map_err(|source| HomeError::Create { path: path.to_path_buf(), source })?;
    if metadata.file_type().is_symlink() {
        return Err(HomeError::Link { path: path.to_path_buf() });
    }
    secure_dir(path)
}

/// A directory Aileron keeps a directory of its own in must not let another user rename that one
/// away: it is the user's, or sticky (as `/tmp` is). Not changed: it may be shared on purpose.
fn refuse_others_parent(path: &Path) -> Result<(), HomeError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::metadata(path) else { return Ok(()) };
    let me = nix::unistd::geteuid().as_raw();
    let sticky = metadata.permissions().mode() & 0o1000 != 0;
    if metadata.uid() != me && !sticky {
        return Err(HomeError::NotOurs { path: path.to_path_buf(), owner: metadata.uid(), me });
    }
    Ok(())
}

/// Whether a file Aileron reads its trust from (`daemon.json`) is the user's own and writable by
/// nobody else; a file another user could have written is never trusted.
pub fn is_ours_and_private(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    metadata.uid() == nix::unistd::geteuid().as_raw() && metadata.permissions().mode() & 0o022 == 0
}

/// Removes what [`write_atomic`] leaves behind when killed between creating its temporary file and
/// renaming it (`.secrets.json.Ab12Cd.tmp`): such a file may hold a secret the user has since
/// removed (the re-attack's L4). Called by the daemon at start, under its lock, for every
/// directory it writes that way. Returns the files removed.
pub fn remove_stale_temporaries(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_atomic_temporary(name) || !entry.file_type().is_ok_and(|kind| kind.is_file()) {
            continue;
        }
        if std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    if !removed.is_empty() {
        let _ = sync_dir(dir);
    }
    removed
}

/// `.<file name>.<6 random characters>.tmp`, the names [`write_atomic`] gives its temporary files.
fn is_atomic_temporary(name: &str) -> bool {
    let Some(inner) = name.strip_prefix('.').and_then(|rest| rest.strip_suffix(".tmp")) else {
        return false;
    };
    match inner.rsplit_once('.') {
        Some((file, random)) => {
            !file.is_empty()
                && random.len() == TEMPORARY_RANDOM_CHARS
                && random.chars().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// The random part of [`write_atomic`]'s temporary names (set explicitly, so the sweep knows it).
const TEMPORARY_RANDOM_CHARS: usize = 6;

/// Says so once when an existing home is readable or writable by others (SPEC §1: 0700). It is not
/// changed behind the user's back: they may have loosened it on purpose.
fn warn_if_lax(root: &Path) {
    use std::sync::Once;
    static WARNED: Once = Once::new();
    if let Ok(metadata) = std::fs::metadata(root)
        && metadata.permissions().mode() & 0o077 != 0
    {
        WARNED.call_once(|| {
            log_line!(
                "aileron: warning: {} is accessible to other users (mode {:o})\nhint: chmod 700 {}",
                root.display(),
                metadata.permissions().mode() & 0o777,
                root.display()
            )
        });
    }
}

/// Creates `path` and any missing parents with mode 0700. Existing directories keep their mode:
/// a user who deliberately loosened one is not overruled.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path)
}

/// Replaces `path` with `bytes` so that a reader (or a crash) sees either the old or the new
/// content, never a mix: temp file in the same directory, fsync, rename, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{} does not name a file", path.display()))
    })?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(file_name);
    prefix.push(".");
    let mut temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(TEMPORARY_RANDOM_CHARS)
        .permissions(Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(|e| with_path(e, "creating a temporary file next to", path))?;
    temp.write_all(bytes).map_err(|e| with_path(e, "writing", temp.path()))?;
    // The umask may have narrowed the mode at creation; make it exact.
    temp.as_file().set_permissions(Permissions::from_mode(mode)).map_err(|e| with_path(e, "chmod", temp.path()))?;
    temp.as_file().sync_all().map_err(|e| with_path(e, "syncing", temp.path()))?;
    temp.persist(path).map_err(|e| with_path(e.error, "renaming into", path))?;
    sync_dir(dir)
}

/// Makes a rename or a file creation in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| with_path(e, "syncing directory", dir))
}

/// `io::Error` does not carry the path; keep the kind and say which file it was.
fn with_path(error: io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{doing} {}: {error}", path.display()))
}

#[cfg(test)]
fn mode_of(path: &Path) -> io::Result<u32> {
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o7777)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resolve(vars: &[(&str, &str)]) -> Result<Home, HomeError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Home::resolve(|name| vars.get(name).cloned())
    }

    #[test]
    fn overrides_table() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("state");
        let root_str = root.to_str().unwrap();
        let elsewhere = temp.path().join("elsewhere");
        let elsewhere_str = elsewhere.to_str().unwrap();
        let check = |extra: &[(&str, &str)], audit: Option<PathBuf>, traces: Option<PathBuf>| {
            let mut vars = vec![(env::AILERON_HOME, root_str)];
            vars.extend(extra.iter().copied());
            let home = resolve(&vars).unwrap();
            assert_eq!(home.root(), root);
            assert_eq!((home.audit_parent(), home.traces_dir()), (audit, traces), "{extra:?}");
        };
        check(&[], Some(root.clone()), Some(root.join("traces")));
        check(&[(env::AILERON_AUDIT_DIR, "")], None, Some(root.join("traces")));
        check(&[(env::AILERON_AUDIT_DIR, elsewhere_str)], Some(elsewhere.clone()), Some(root.join("traces")));
        check(&[(env::AILERON_TRACES_DIR, "")], Some(root.clone()), None);
        check(&[(env::AILERON_TRACES_DIR, elsewhere_str)], Some(root.clone()), Some(elsewhere.join("traces")));
        assert_eq!(mode_of(&root).unwrap(), 0o700);
    }

    #[test]
    fn only_write_atomic_temporaries_are_swept() {
        let temp = tempfile::tempdir().unwrap();
        let secrets = temp.path().join("secrets.json");
        write_atomic(&secrets, b"{}", 0o600).unwrap();
        for name in [".secrets.json.Ab12Cd.tmp", ".daemon.json.zzzzzz.tmp"] {
            std::fs::write(temp.path().join(name), "left by a kill").unwrap();
        }
        for name in [".bashrc", "notes.tmp", ".x.tmp", ".secrets.json.tooLong1.tmp", "secrets.json"] {
            std::fs::write(temp.path().join(name), "kept").unwrap();
        }
        let mut removed: Vec<String> = remove_stale_temporaries(temp.path())
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(removed, vec![".daemon.json.zzzzzz.tmp", ".secrets.json.Ab12Cd.tmp"]);
        assert!(temp.path().join(".bashrc").exists() && temp.path().join(".secrets.json.tooLong1.tmp").exists());
    }

    #[test]
    fn a_home_writable_by_others_is_tightened() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("state");
        std::fs::create_dir(&root).unwrap();
        std::fs::set_permissions(&root, Permissions::from_mode(0o777)).unwrap();
        Home::at(&root).unwrap();
        assert_eq!(mode_of(&root).unwrap(), 0o755, "write bits for group and others are removed, nothing else");
    }

    #[test]
    fn empty_home_is_an_error_with_a_hint() {
        let error = resolve(&[(env::AILERON_HOME, "")]).unwrap_err();
        assert!(matches!(error, HomeError::EmptyHome { .. }));
        assert!(error.to_string().contains("hint:"), "{error}");
    }

    #[test]
    fn paths_follow_the_spec_layout() {
        let temp = tempfile::tempdir().unwrap();
        let home = Home::at(temp.path()).unwrap();
        let check = |path: PathBuf, expected: &str| assert_eq!(path, temp.path().join(expected));
        check(home.daemon_json(), "daemon.json");
        check(home.daemon_lock(), "daemon.lock");
        check(home.daemon_log(), "daemon.log");
        check(home.actions_dir(), "actions");
        check(home.action_state(), "action-state.json");
        check(home.store_dir(), "store");
        check(home.store_index(), "store/index/connectors.json");
        check(home.cache_dir(), "store/cache");
        check(home.keyring(), "keyring.json");
        check(home.secrets(), "secrets.json");
        check(home.approvals_journal(), "approvals.jsonl");
        check(home.sessions_journal(), "sessions.jsonl");
        check(home.audit_parent().unwrap(), "");
        check(home.traces_dir().unwrap(), "traces");
    }

    #[test]
    fn write_atomic_replaces_content_with_exact_mode_and_leaves_no_temp_files() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("daemon.json");
        for (content, mode) in [(&b"first"[..], 0o600), (&b"second, longer"[..], 0o640), (&b""[..], 0o600)] {
            write_atomic(&path, content, mode).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), content);
            assert_eq!(mode_of(&path).unwrap(), mode);
        }
        let names: Vec<_> = std::fs::read_dir(temp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("daemon.json")]);
    }

    #[test]
    fn write_atomic_names_the_file_when_the_directory_is_missing() {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("missing").join("x.json");
        let error = write_atomic(&path, b"x", 0o600).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(error.to_string().contains("x.json"), "{error}");
    }

    #[test]
    fn private_dirs_are_0700() {
        let temp = tempfile::tempdir().unwrap();
        let nested = temp.path().join("a").join("b");
        create_private_dir(&nested).unwrap();
        assert_eq!((mode_of(&temp.path().join("a")).unwrap(), mode_of(&nested).unwrap()), (0o700, 0o700));
    }
}
