//! The installed-action registry: `actions/<name>.md` files plus the `action-state.json`
//! enabled/disabled overlay, held in memory and re-published to watchers on every change.
//!
//! Invariant: a file on disk that fails to parse is never callable; it is reported in
//! `load_errors` (with the parser's file/line message) instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use aileron_core::action::{ActionFile, parse_action};
use serde::Serialize;

use crate::platform::home::write_atomic;

#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct LoadError {
    pub file: String,
    pub message: String,
}

#[derive(Clone)]
pub struct InstalledAction {
    pub file: Arc<ActionFile>,
    pub enabled: bool,
}

#[derive(Default)]
struct Inner {
    actions: BTreeMap<String, Arc<ActionFile>>,
    enabled: BTreeMap<String, bool>,
    load_errors: Vec<LoadError>,
}

pub struct ActionRegistry {
    dir: PathBuf,
    state_path: PathBuf,
    inner: RwLock<Inner>,
    /// Generation counter; bumped on every change to the action set.
    changes: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{0}")]
    Parse(String),
    #[error("no action named `{0}` is installed")]
    NotFound(String),
    #[error("writing {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

impl ActionRegistry {
    /// Loads every `*.md` in `dir` and the state overlay.
    pub fn load(dir: &Path, state_path: &Path) -> std::io::Result<ActionRegistry> {
        crate::platform::home::create_private_dir(dir)?;
        let mut inner = Inner::default();
        let mut entries: Vec<_> = std::fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("md"))
            .collect();
        entries.sort();
        // In file-name order, however many threads read them: load errors are listed in it.
        // Two files put in the directory by hand may give the same MCP tool name (`a-b.md` and
        // `a_b.md`), which `action add` refuses: the first in file-name order keeps it, the other
        // is a load error naming both, so no agent ever sees one tool for two actions.
        let mut tools: BTreeMap<String, String> = BTreeMap::new();
        for (file_name, parsed) in read_all(&entries) {
            match parsed {
                Ok(action) => match tools.get(&action.tool_name()) {
                    Some(holder) => inner.load_errors.push(LoadError {
                        message: format!(
                            "{file_name}: its MCP tool name `{}` is already the tool of action `{holder}`; this file is not \
                             loaded\nhint: rename one of the two actions (`-` and `.` become `_` in tool names)",
                            action.tool_name()
                        ),
                        file: file_name,
                    }),
                    None => {
                        tools.insert(action.tool_name(), action.name.clone());
                        inner.actions.insert(action.name.clone(), Arc::new(action));
                    }
                },
                Err(message) => inner.load_errors.push(LoadError { file: file_name, message }),
            }
        }
        inner.enabled = read_state(state_path)?;
        let (changes, _) = tokio::sync::watch::channel(0);
        Ok(ActionRegistry {
            dir: dir.to_path_buf(),
            state_path: state_path.to_path_buf(),
            inner: RwLock::new(inner),
            changes,
        })
    }

    pub fn get(&self, name: &str) -> Option<InstalledAction> {
        let inner = self.inner.read().expect("action registry poisoned");
        let file = inner.actions.get(name)?.clone();
        let enabled = inner.enabled.get(name).copied().unwrap_or(true);
        Some(InstalledAction { file, enabled })
    }

    pub fn list(&self) -> (Vec<InstalledAction>, Vec<LoadError>) {
        let inner = self.inner.read().expect("action registry poisoned");
        let items = inner
            .actions
            .iter()
            .map(|(name, file)| InstalledAction {
                file: file.clone(),
                enabled: inner.enabled.get(name).copied().unwrap_or(true),
            })
            .collect();
        (items, inner.load_errors.clone())
    }

    /// The installed action other than `except` whose MCP tool name is `tool`. Scans under the
    /// read lock without copying or building anything: each install asks, and at 10,000 actions
    /// a listing and a tool name per action made every install allocate ~10,000 times
    /// (BENCHMARKS.md, issue 49, "Start and memory at scale").
    pub fn with_tool_name(&self, tool: &str, except: &str) -> Option<Arc<ActionFile>> {
        let inner = self.inner.read().expect("action registry poisoned");
        inner.actions.values().find(|file| file.name != except && file.has_tool_name(tool)).cloned()
    }

    /// `actions/<name>.md`: where the action named `name` is stored.
    fn file_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.md"))
    }

    /// The text `action` was parsed from, read from its file: `None` when the file no longer holds
    /// those bytes (edited, or removed, by hand since the daemon loaded it — what runs is still
    /// what was loaded). Texts are not kept in memory (`ActionFile::sha256`).
    pub fn source_text(&self, action: &ActionFile) -> Option<String> {
        let text = std::fs::read_to_string(self.file_of(&action.name)).ok()?;
        (aileron_core::ContentHash::of_bytes(text.as_bytes()) == *action.sha256()).then_some(text)
    }

    /// Every installed action's file (enabled or not), for what is built over all of them (the
    /// policy schema).
    pub fn files(&self) -> Vec<Arc<ActionFile>> {
        self.inner.read().expect("action registry poisoned").actions.values().cloned().collect()
    }

    /// Writes `text`, the exact bytes `action` was parsed from, and publishes the action.
    pub fn install(&self, action: ActionFile, text: &str) -> Result<(), RegistryError> {
        debug_assert_eq!(*action.sha256(), aileron_core::ContentHash::of_bytes(text.as_bytes()));
        let path = self.file_of(&action.name);
        write_atomic(&path, text.as_bytes(), 0o600).map_err(|source| io_error(&path, source))?;
        let mut inner = self.inner.write().expect("action registry poisoned");
        inner.load_errors.retain(|e| e.file != format!("{}.md", action.name));
        inner.actions.insert(action.name.clone(), Arc::new(action));
        drop(inner);
        self.notify();
        Ok(())
    }

    pub fn remove(&self, name: &str) -> Result<(), RegistryError> {
        let path = self.file_of(name);
        let mut inner = self.inner.write().expect("action registry poisoned");
        if inner.actions.remove(name).is_none() {
            return Err(RegistryError::NotFound(name.to_string()));
        }
        std::fs::remove_file(&path).map_err(|source| io_error(&path, source))?;
        if inner.enabled.remove(name).is_some() {
            self.save_state(&inner)?;
        }
        drop(inner);
        self.notify();
        Ok(())
    }

    pub fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), RegistryError> {
        let mut inner = self.inner.write().expect("action registry poisoned");
        if !inner.actions.contains_key(name) {
            return Err(RegistryError::NotFound(name.to_string()));
        }
        inner.enabled.insert(name.to_string(), enabled);
        self.save_state(&inner)?;
        drop(inner);
        self.notify();
        Ok(())
    }

    /// The generation counter now: it changes with every change of the action set.
    pub fn generation(&self) -> u64 {
        *self.changes.borrow()
    }

    /// A receiver that observes every change (generation counter).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn save_state(&self, inner: &Inner) -> Result<(), RegistryError> {
        let state: BTreeMap<&String, StateEntry> =
            inner.enabled.iter().map(|(name, enabled)| (name, StateEntry { enabled: *enabled })).collect();
        let bytes = serde_json::to_vec_pretty(&state).expect("state serializes");
        write_atomic(&self.state_path, &bytes, 0o600).map_err(|source| io_error(&self.state_path, source))
    }

    fn notify(&self) {
        self.changes.send_modify(|generation| *generation += 1);
    }
}

#[derive(serde::Deserialize, Serialize)]
struct StateEntry {
    enabled: bool,
}

/// The enabled/disabled overlay. A missing file means every action is enabled; a damaged one
/// stops the load: read as empty it would silently re-enable every disabled action, and the next
/// change would overwrite what the user had disabled.
fn read_state(path: &Path) -> std::io::Result<BTreeMap<String, bool>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(error) => return Err(std::io::Error::new(error.kind(), format!("reading {}: {error}", path.display()))),
    };
    let state: BTreeMap<String, StateEntry> = serde_json::from_str(&text).map_err(|error| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: not the actions' enabled/disabled state: {error}\n\
                 hint: it holds which actions you disabled, as {{\"<action>\": {{\"enabled\": false}}}}; \
                 repair it (or delete it, which enables every installed action) and start the daemon again",
                path.display()
            ),
        )
    })?;
    Ok(state.into_iter().map(|(name, entry)| (name, entry.enabled)).collect())
}

fn io_error(path: &Path, source: std::io::Error) -> RegistryError {
    RegistryError::Io { path: path.display().to_string(), source }
}

/// Files each thread reads at least: below this a directory is read on the calling thread.
const FILES_PER_THREAD: usize = 256;

/// Reads and parses `paths` on every core (10,000 action files are half a second of TOML on
/// one), returning each file's name and action, or why it does not load, in `paths`' order.
fn read_all(paths: &[PathBuf]) -> Vec<(String, Result<ActionFile, String>)> {
    let read = |path: &PathBuf| {
        let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let parsed = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_action(&text, &file_name).map_err(|e| e.to_string()));
        (file_name, parsed)
    };
    crate::platform::parallel::map_in_parts(paths, FILES_PER_THREAD, |part| part.iter().map(read).collect())
}

/// `GET /v1/actions` serialized (by `workflows::actions::list_json`): the whole answer kept per generation of the action set, and where
/// each action's view lies in it, per installed file, so a listing with nothing changed costs a
/// copy of bytes and one after a change re-serializes only the actions that changed (the others'
/// views are copied from the previous answer: each view is held once, in the answer). Before it, every
/// listing re-derived every action's JSON Schema and description (20 ms for 1,000 actions).
#[derive(Default)]
pub struct ListingCache {
    inner: std::sync::Mutex<Listing>,
}

impl ListingCache {
    /// The cache, locked (a poisoned lock is taken as it is: the entry is rebuilt when stale).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Listing> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Default)]
pub struct Listing {
    /// The action set's generation `body` was built at (or later: it is read before listing).
    pub generation: Option<u64>,
    pub body: bytes::Bytes,
    /// action name → the file and enabled flag its view was built from, and the view's bytes in
    /// `body`.
    pub views: std::collections::HashMap<String, (Arc<ActionFile>, bool, std::ops::Range<usize>)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn action(name: &str, intent: &str) -> String {
        let hash = format!("sha256:{}", "ab".repeat(32));
        format!(
            "+++\nname = \"{name}\"\nversion = \"1.0.0\"\n\n[[requires.connectors]]\nname = \"github://acme/echo\"\n\
             version = \"1.0.0\"\nhash = \"{hash}\"\ncapabilities = [\"echo\"]\n\n[match]\nintent = \"{intent}\"\n\n\
             [[execute]]\nid = \"main\"\nconnector = \"github://acme/echo\"\nop = \"echo\"\n+++\n# {name}\n"
        )
    }

    /// Enough files to be read on several threads: every good one loads, and the ones that do
    /// not are reported under their own file names, in file-name order, as when read one by one.
    #[test]
    fn a_large_directory_loads_every_file_in_name_order() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("actions");
        std::fs::create_dir(&dir).unwrap();
        for index in 0..1_000 {
            std::fs::write(dir.join(format!("a-{index:04}.md")), action(&format!("a-{index:04}"), "one of many"))
                .unwrap();
        }
        std::fs::write(dir.join("a-0500.md"), "+++\nname = \n").unwrap();
        std::fs::write(dir.join("zz-misnamed.md"), action("a-0001", "declared again")).unwrap();
        std::fs::write(dir.join("notes.txt"), "not an action").unwrap();

        let registry = ActionRegistry::load(&dir, &temp.path().join("state.json")).unwrap();
        let (items, errors) = registry.list();
        assert_eq!(items.len(), 999, "every file but the broken one (the misnamed one is extra)");
        assert_eq!(errors.iter().map(|e| e.file.as_str()).collect::<Vec<_>>(), ["a-0500.md", "zz-misnamed.md"]);
        assert!(
            errors[0].message.contains("never closed") && errors[1].message.contains("does not match the file name")
        );
        assert_eq!(registry.get("a-0001").unwrap().file.intent, "one of many");
        assert_eq!(registry.get("a-0999").unwrap().file.intent, "one of many");
    }

    /// Files put in `actions/` by hand whose MCP tool names collide (`a-b`, `a_b`, `a.b` are all
    /// `a_b`): the first in file-name order loads, the others are load errors naming the holder.
    #[test]
    fn colliding_tool_names_among_hand_placed_files_are_reported() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("actions");
        std::fs::create_dir(&dir).unwrap();
        for name in ["deploy-site", "deploy.site", "deploy_site", "other"] {
            std::fs::write(dir.join(format!("{name}.md")), action(name, "deploy")).unwrap();
        }
        let registry = ActionRegistry::load(&dir, &temp.path().join("state.json")).unwrap();
        let (items, errors) = registry.list();
        let loaded: Vec<&str> = items.iter().map(|item| item.file.name.as_str()).collect();
        assert_eq!(loaded, ["deploy-site", "other"]);
        assert_eq!(errors.iter().map(|e| e.file.as_str()).collect::<Vec<_>>(), ["deploy.site.md", "deploy_site.md"]);
        for error in &errors {
            assert!(
                error.message.contains("`deploy_site` is already the tool of action `deploy-site`")
                    && error.message.contains("hint:"),
                "{}",
                error.message
            );
        }
    }
}
