//! The repositories in a writable tree and what in them git would run as the user (the
//! re-attacks of 2026-12-05, decision 0013): each repository's hooks and config read-only, its
//! git directory pinned, the files that would redirect git watched, what its config and hooks
//! name from the worktree protected; and, at the end, the repositories the agent made. Reads the
//! filesystem, changes nothing; [`Protection`] is what `allow_list::write_access` adds to the
//! agent's allow-list.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{LaunchEnv, git};

/// Variables that tell the user's git where its system and global config are, or add to it
/// (`GIT_CONFIG_COUNT` pairs of `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>`).
pub(super) const GIT_CONFIG_GLOBAL: &str = "GIT_CONFIG_GLOBAL";
pub(super) const GIT_CONFIG_SYSTEM: &str = "GIT_CONFIG_SYSTEM";
pub(super) const GIT_CONFIG_NOSYSTEM: &str = "GIT_CONFIG_NOSYSTEM";
pub(super) const GIT_CONFIG_COUNT: &str = "GIT_CONFIG_COUNT";

/// The names of the `n`th config pair from the environment (key, value).
pub(super) fn git_config_pair(n: usize) -> [String; 2] {
    [format!("GIT_CONFIG_KEY_{n}"), format!("GIT_CONFIG_VALUE_{n}")]
}

/// What protects the repositories of the writable trees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// Git directories (and the directories of worktrees' administrative files), pinned in place.
    pub pinned: Vec<PathBuf>,
    /// Hooks, configs and what they run from the worktree: read-only to the agent.
    pub read_only: Vec<PathBuf>,
    /// Files that must not appear (a `commondir`, a missing include): moved aside when they do.
    pub watched: Vec<PathBuf>,
    /// A repository's missing `hooks`, made before the launch so that it can be bound.
    pub to_create: Vec<PathBuf>,
    /// Things the user should know (a tree too large to search, an index too large to read).
    pub notes: Vec<String>,
    /// The repositories found at launch, to tell the ones the agent creates.
    pub checkouts: Checkouts,
    /// The git directories there at launch (never disarmed at the end: they are the user's).
    pub git_dirs: Vec<PathBuf>,
    /// Each checkout's git directory and worktree.
    pub worktrees: Vec<(PathBuf, PathBuf)>,
    /// The config files read (at most [`MAX_CONFIGS_READ`]), and whether more were named.
    pub configs_read: Vec<PathBuf>,
    configs_cut_short: bool,
    /// The socket files in the writable trees at launch (the search for repositories meets them):
    /// each a host process's, since the agent has not run yet, whatever name or namespace it was
    /// bound by.
    pub sockets: Vec<PathBuf>,
    /// The direnv `.envrc` files in the writable trees (what each reads in is protected).
    pub envrcs: Vec<PathBuf>,
}

/// Config files read in all for one launch's protection (git's own include limit is ten levels).
const MAX_CONFIGS_READ: usize = 256;

impl Protection {
    /// `path` read-only when it exists, else watched so that it is moved aside if it appears.
    fn bind_or_watch(&mut self, path: PathBuf) {
        if path.exists() { self.read_only.push(path) } else { self.watched.push(path) }
    }
}

/// The repositories in each writable tree searched at launch (the tree's own, nested ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkouts(Vec<(PathBuf, Vec<PathBuf>, HashSet<PathBuf>)>);

/// A repository the agent made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub path: PathBuf,
    /// Entered by the user's git unasked: recorded as a submodule in the index of a repository
    /// there at launch (`git status` there enters it), or a git directory itself (a bare
    /// repository, which git takes for the repository of every directory below it).
    pub entered: bool,
}

/// What the searched trees hold at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Look {
    /// Repositories that were not there at launch.
    pub created: Vec<Created>,
    /// Indexes too large to read: the submodules they record are not known.
    pub unread: Vec<PathBuf>,
    /// Repositories there at launch that git now enters unasked and did not then (recorded as a
    /// submodule during the session): one an earlier session made is the agent's too.
    pub newly_entered: Vec<PathBuf>,
    /// Trees the search gave up on ([`MAX_SCANNED_DIRECTORIES`]): the agent can fill one with
    /// directories to hide a repository behind them (the seventh re-attack).
    pub incomplete: Vec<PathBuf>,
}

impl Checkouts {
    /// Repositories in the searched trees now that were not there at launch: a `.git` the agent
    /// made is its own, hooks and config included, so the user is told before running git there.
    pub fn look(&self) -> Look {
        let mut look = Look::default();
        for (root, before, entered_before) in &self.0 {
            let now = checkouts_in(root);
            for path in now.checkouts.into_iter() {
                let entered = now.entered.contains(&path);
                if !before.contains(&path) {
                    look.created.push(Created { path, entered });
                } else if entered && !entered_before.contains(&path) {
                    look.newly_entered.push(path);
                }
            }
            look.unread.extend(now.unread);
            if !now.complete {
                look.incomplete.push(root.clone());
            }
        }
        look
    }

    /// [`Checkouts::look`]'s repositories alone.
    #[cfg(test)]
    pub fn created(&self) -> Vec<Created> {
        self.look().created
    }
}

/// The checkouts in one writable tree.
struct Found {
    checkouts: Vec<PathBuf>,
    /// Those git enters unasked ([`Created::entered`]).
    entered: HashSet<PathBuf>,
    /// Whether the search saw every directory it looks in.
    complete: bool,
    /// Indexes too large to read ([`git::submodules`]).
    unread: Vec<PathBuf>,
    /// The configs of checkouts among installed dependencies ([`in_dependencies`]).
    dependency_configs: Vec<PathBuf>,
    /// Socket files and `.envrc` files met on the way ([`nested_checkouts`]).
    sockets: Vec<PathBuf>,
    envrcs: Vec<PathBuf>,
}

/// `root` itself when it holds `.git`, then [`nested_checkouts`], then every checkout the
/// indexes of those record as a submodule, wherever it lies: the search skips `node_modules`
/// and stops 32 levels down, `git status` at the root enters every submodule and runs what
/// its config names (the second re-attack of 2026-12-05).
fn checkouts_in(root: &Path) -> Found {
    let Searched { checkouts: nested, mut complete, skipped, mut sockets, envrcs } = nested_checkouts(root);
    // The root itself made into a git directory counts too (the twelfth re-attack: launched in a
    // new project, the agent wrote `HEAD`, `objects/`, `refs/` and a `config` there).
    let own = (std::fs::symlink_metadata(root.join(".git")).is_ok() || git::is_git_directory(root))
        .then(|| root.to_path_buf());
    let mut found: Vec<PathBuf> = own.into_iter().chain(nested).collect();
    let mut known: HashSet<PathBuf> = found.iter().cloned().collect();
    let mut entered: HashSet<PathBuf> = found.iter().filter(|path| git::is_git_directory(path)).cloned().collect();
    let mut unread = Vec::new();
    let mut index_budget = git::INDEX_BYTES_PER_LOOK;
    let mut next = 0;
    while next < found.len() && found.len() < MAX_SUBMODULES {
        let checkout = found[next].clone();
        next += 1;
        let Some(git_dir) = git::git_dir(&checkout) else { continue };
        // The git directories of submodules, kept under `modules/` and never searched (the search
        // skips `.git`): one the agent made there is what `git submodule update` uses, hooks and
        // config included (the twelfth re-attack).
        // Only a git directory that is one (a `.git` link or file names another's, whose modules
        // are that repository's and found with it).
        let real = std::fs::symlink_metadata(&git_dir).is_ok_and(|metadata| metadata.file_type().is_dir());
        let (modules, all_seen) = if real { module_git_dirs(&git_dir.join("modules")) } else { (Vec::new(), true) };
        complete &= all_seen;
        for module in modules {
            if module.starts_with(root) && known.insert(module.clone()) {
                entered.insert(module.clone());
                found.push(module);
            }
        }
        let (submodules, too_large) = git::submodules(&git_dir, &mut index_budget);
        unread.extend(too_large);
        for submodule in submodules {
            let path = without_dot_dots(&checkout.join(submodule));
            if !path.starts_with(root) || std::fs::symlink_metadata(path.join(".git")).is_err() {
                continue;
            }
            entered.insert(path.clone());
            if known.insert(path.clone()) {
                found.push(path);
            }
        }
    }
    let (dependency_configs, more_sockets) = in_dependencies(&skipped);
    sockets.extend(more_sockets);
    Found { checkouts: found, entered, complete, unread, dependency_configs, sockets, envrcs }
}

/// Directories searched among installed dependencies for checkouts, at most, and how deep below
/// each directory of them.
const MAX_DEPENDENCY_DIRECTORIES: usize = 4096;
const MAX_DEPENDENCY_DEPTH: usize = 3;

/// The config files of the checkouts a few levels into the installed dependencies the search for
/// nested repositories skips (`skipped`: `.venv`, `node_modules`, …): `pip install -e
/// git+https://TOKEN@…` clones into `.venv/src/<name>` with the token in its remote's URL, which
/// the agent read (the twenty-ninth re-attack's A2). Read for credentials only: what runs from
/// there runs as the user anyway. And the socket files met there (a dev server's in
/// `node_modules/.cache`: the thirty-first re-attack's C8).
fn in_dependencies(skipped: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    use std::os::unix::fs::FileTypeExt as _;
    let (mut configs, mut sockets) = (Vec::new(), Vec::new());
    let mut pending: std::collections::VecDeque<(PathBuf, usize)> =
        skipped.iter().map(|dir| (dir.clone(), 0)).collect();
    let mut budget = MAX_DEPENDENCY_DIRECTORIES;
    while let Some((dir, depth)) = pending.pop_front() {
        let Some(left) = budget.checked_sub(1) else { break };
        budget = left;
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_socket() {
                sockets.push(entry.path());
            }
            if !kind.is_dir() {
                continue;
            }
            let path = entry.path();
            if entry.file_name() == ".git" {
                configs.extend([path.join("config"), path.join("config.worktree")].into_iter().filter(|f| f.is_file()));
            } else if depth < MAX_DEPENDENCY_DEPTH {
                pending.push_back((path, depth + 1));
            }
        }
    }
    (configs, sockets)
}

/// Checkouts followed through indexes' submodules, at most.
const MAX_SUBMODULES: usize = 4096;

/// Directories a workspace is searched in for repositories inside it, at most, and how deep.
const MAX_SCANNED_DIRECTORIES: usize = 20_000;
const MAX_SCAN_DEPTH: usize = 32;

/// Not searched for nested repositories: git directories, and the build outputs and installed
/// dependencies that hold thousands of directories and no checkout of the user's.
const SKIPPED_DIRECTORIES: [&str; 7] = [".git", "target", "node_modules", ".venv", "__pycache__", ".tox", ".gradle"];

/// Names inside a git directory that make git read its configuration, hooks included, from
/// somewhere else (`commondir`) or read more of it (`config.worktree`). Absent in a repository's
/// own git directory; the agent must not create them.
const REDIRECTING_FILES: [&str; 2] = ["commondir", "config.worktree"];

/// Where a git directory keeps what replaces objects of its history.
const REPLACING: [&str; 2] = ["refs/replace", "info/grafts"];

/// A writable tree at `root` (the workspace, a `--writable` path): its repository and every
/// repository inside it (submodules, nested checkouts), each with its hooks and config
/// read-only, its git directory pinned and its redirecting files watched (the directories
/// between `root` and each are pinned by [`write_access`], so a renamed parent cannot carry the
/// protected repository away and leave a planted one in its place).
pub(super) fn protect_repository(root: &Path, git: &GitContext, protection: &mut Protection) {
    let Found { checkouts, complete, unread, entered, dependency_configs, sockets, envrcs } = checkouts_in(root);
    protection.sockets.extend(sockets);
    protection.envrcs.extend(envrcs);
    for index in unread {
        protection.notes.push(format!(
            "{} is too large to read: the submodules it records are not protected\nhint: look at `git ls-files -s | grep \
             ^160000` there",
            super::shown(&index)
        ));
    }
    for checkout in &checkouts {
        protect_checkout(checkout, git, protection);
    }
    // Read for the credentials in them alone (`withheld_config`).
    protection.configs_read.extend(dependency_configs);
    protection.checkouts.0.push((root.to_path_buf(), checkouts, entered));
    if !complete {
        protection.notes.push(format!(
            "{} has more than {MAX_SCANNED_DIRECTORIES} directories: repositories nested deeper in it than those \
             searched are not protected (their hooks and config stay writable to the agent)\nhint: launch from the \
             project itself, or keep nested checkouts near its top",
            super::shown(root)
        ));
    }
}

/// `.git` of the checkout at `root`: a `.git` file (a worktree's or submodule's pointer to its
/// git directory) is read-only itself, and what the configs it leads to have git run from this
/// worktree is protected; a `.git` directory is protected as a git directory.
fn protect_checkout(root: &Path, context: &GitContext, protection: &mut Protection) {
    let git = root.join(".git");
    let Ok(metadata) = std::fs::symlink_metadata(&git) else {
        if git::is_git_directory(root) {
            protect_git_dir(root, None, context, protection);
        }
        return;
    };
    if metadata.is_file() {
        protection.read_only.push(git);
        // A linked worktree's administrative directory names the repository's own directory in
        // its `commondir`; a submodule's git directory holds its config (both protected where
        // they live). What they have git run from this worktree is protected here.
        let Some(git_dir) = git::git_dir(root) else { return };
        protection.worktrees.push((git_dir.clone(), root.to_path_buf()));
        let common = git::common_dir(&git_dir);
        // A repository's own git directory kept apart (`git init --separate-git-dir
        // node_modules/.gd`) below a directory the search skips, in this tree or another writable
        // one (judged on its whole path): nothing else protects it, and a hook written there ran
        // at the user's next commit (the sixtieth re-attack's R4, the sixty-first's R5). A
        // submodule's (in a `.git`) is its superproject's to protect; one the search reaches is
        // protected where it is found.
        let named = without_dot_dots(&git_dir);
        if common.is_none()
            && !named.components().any(|part| part.as_os_str() == ".git")
            && named.components().any(|part| SKIPPED_DIRECTORIES.iter().any(|skipped| part.as_os_str() == *skipped))
        {
            protect_git_dir(&git_dir, Some(root), context, protection);
            return;
        }
        protection.git_dirs.extend(std::iter::once(git_dir.clone()).chain(common.clone()));
        let mut settings = context.global.clone();
        for config in
            common.iter().map(|dir| dir.join("config")).chain([git_dir.join("config"), git_dir.join("config.worktree")])
        {
            read_config(&config, context, &mut Protection::default(), 0, &mut settings);
        }
        protect_what_git_runs(root, &settings, context, protection);
    } else if metadata.is_dir() {
        protection.worktrees.push((git.clone(), root.to_path_buf()));
        protect_git_dir(&git, Some(root), context, protection);
    }
}

/// A git directory: pinned in place, its hooks and config (and the files the config includes)
/// read-only, `commondir` and `config.worktree` watched unless present, its linked worktrees'
/// administrative directories and its submodules' git directories protected alike; and what its
/// config (with the user's) has git run from inside the worktree.
fn protect_git_dir(git: &Path, worktree: Option<&Path>, context: &GitContext, protection: &mut Protection) {
    let hooks = git.join("hooks");
    // An empty hooks directory is what `git init` makes; it is where a planted hook would go.
    if !hooks.exists() {
        protection.to_create.push(hooks.clone());
    }
    protection.pinned.push(git.to_path_buf());
    // Its object store, pinned in place too: an `objects` renamed in whole from a copy an
    // earlier session prepared keeps the times of everything in it, and the exit's look at what
    // the session wrote goes by those times (the fifty-seventh re-attack's R4 swapped one in, a
    // forged blob and a commit on it taken for the user's). Only its own directory is pinned: git
    // moves a pushed pack from its quarantine directory in `objects` into `objects/pack`, which
    // a mount between them would refuse; an `objects/pack` renamed in is told at exit.
    let objects = git.join("objects");
    if is_real_dir(&objects) {
        protection.pinned.push(objects);
    }
    protection.git_dirs.push(git.to_path_buf());
    protection.read_only.push(hooks.clone());
    // Git works without a config: one missing at launch is watched, not left for the agent to
    // write (the seventh re-attack: a submodule's config written in a later session).
    protection.bind_or_watch(git.join("config"));
    for name in REDIRECTING_FILES {
        protection.bind_or_watch(git.join(name));
    }
    // What makes git show and commit other objects in place of the user's history: replace refs
    // (`git replace`: the fifteenth re-attack swapped the tip of a branch for a commit carrying
    // its own `Makefile`, and `git status`, `diff` and `log` stayed clean) and grafts. Read-only
    // when the user has them, moved aside the moment they appear when not (a replace ref written
    // into `packed-refs` is named at exit: `hidden_changes`).
    for name in REPLACING {
        protection.bind_or_watch(git.join(name));
    }
    let mut config = Vec::new();
    read_config(&git.join("config"), context, protection, 0, &mut config);
    read_config(&git.join("config.worktree"), context, protection, 0, &mut config);
    // A submodule's git directory names its worktree (relative to itself).
    let configured = config.iter().rev().find(|entry| entry.section == "core" && entry.key == "worktree");
    let worktree = worktree
        .map(Path::to_path_buf)
        .or_else(|| configured.and_then(|entry| entry.value.as_ref()).map(|named| without_dot_dots(&git.join(named))));
    if let Some(worktree) = worktree {
        let settings: Vec<git::Entry> = context.global.iter().chain(&config).cloned().collect();
        protect_what_git_runs(&worktree, &settings, context, protection);
        protect_what_hooks_read(&hooks, &worktree, protection);
    }
    // A linked worktree's administrative directory: where it finds its repository and its own config.
    let worktrees = git.join("worktrees");
    if let Ok(entries) = std::fs::read_dir(&worktrees) {
        protection.pinned.push(worktrees.clone());
        for admin in entries.flatten().map(|entry| entry.path()).filter(|path| is_real_dir(path)) {
            protection.pinned.push(admin.clone());
            for name in REDIRECTING_FILES.iter().chain(&["gitdir"]) {
                protection.bind_or_watch(admin.join(name));
            }
        }
    }
    let (modules, all_seen) = module_git_dirs(&git.join("modules"));
    if !all_seen {
        protection.notes.push(format!(
            "{} holds more than {MAX_SCANNED_DIRECTORIES} directories: the submodules' git directories past them are \
             not protected\nhint: look at what is there",
            super::shown(&git.join("modules"))
        ));
    }
    for module in modules {
        protect_git_dir(&module, None, context, protection);
    }
}

/// What `settings` (the user's, then a repository's) have git run from `worktree`: its hooks
/// directory (`core.hooksPath`: husky's `.husky/_`, which git ignores, so a hook changed there
/// would not even show in `git status`; husky's stubs there run the scripts one directory up,
/// which are read-only too) and the programs and scripts its commands name, read-only (or
/// watched when missing, for a path).
fn protect_what_git_runs(worktree: &Path, settings: &[git::Entry], context: &GitContext, protection: &mut Protection) {
    let resolve = |named: &str| context.resolve(named, worktree);
    if let Some(hooks) = git::hooks_path(settings).and_then(|named| resolve(&named)) {
        if hooks.file_name().is_some_and(|name| name == "_")
            && let Some(scripts) = hooks.parent().filter(|parent| parent.is_dir())
        {
            protection.read_only.push(scripts.to_path_buf());
        }
        protect_what_hooks_read(&hooks, worktree, protection);
        protection.bind_or_watch(hooks);
    }
    let (paths, words) = git::program_words(settings);
    for program in paths.iter().filter_map(|named| resolve(named)) {
        protection.bind_or_watch(program);
    }
    // An argument that is a file of the worktree (`python3 conv.py`) is run as much as a program.
    for file in words.iter().map(|word| without_dot_dots(&worktree.join(word))).filter(|file| file.is_file()) {
        protection.read_only.push(file);
    }
}

/// Hook runners whose installed hooks read what to run from the worktree: a word their hook
/// holds, and the files it reads there.
const HOOK_RUNNERS: [(&str, &[&str]); 2] = [
    ("pre-commit.com", &[".pre-commit-config.yaml", ".pre-commit-config.yml"]),
    (
        "lefthook",
        // Every name lefthook reads its config from, the `-local` ones merged over it, and its
        // scripts' directories: a missing one is watched (the seventh re-attack: the usually
        // absent, git-ignored `lefthook-local.yml` added a command to the user's next commit).
        &[
            "lefthook.yml",
            ".lefthook.yml",
            ".config/lefthook.yml",
            "lefthook.yaml",
            ".lefthook.yaml",
            ".config/lefthook.yaml",
            "lefthook.toml",
            ".lefthook.toml",
            ".config/lefthook.toml",
            "lefthook.json",
            ".lefthook.json",
            ".config/lefthook.json",
            "lefthook.jsonc",
            ".lefthook.jsonc",
            ".config/lefthook.jsonc",
            "lefthook-local.yml",
            ".lefthook-local.yml",
            ".config/lefthook-local.yml",
            "lefthook-local.yaml",
            ".lefthook-local.yaml",
            ".config/lefthook-local.yaml",
            "lefthook-local.toml",
            ".lefthook-local.toml",
            ".config/lefthook-local.toml",
            "lefthook-local.json",
            ".lefthook-local.json",
            ".config/lefthook-local.json",
            "lefthook-local.jsonc",
            ".lefthook-local.jsonc",
            ".config/lefthook-local.jsonc",
            ".lefthook",
            ".lefthook-local",
        ],
    ),
];

/// What the installed hooks in `hooks` read from `worktree`, read-only as the hooks are (the
/// agent would otherwise choose what the user's next commit runs): a hook runner's configuration
/// (the pre-commit framework's `.pre-commit-config.yaml`, lefthook's `lefthook.yml`) and every
/// file of the worktree a hook names by path (pre-commit's `INSTALL_PYTHON=<worktree>/.venv/…`,
/// `./scripts/check.sh`: the fourth re-attack). What a hook finds on `PATH` cannot be told:
/// husky's puts `node_modules/.bin` first, so the launch says so.
fn protect_what_hooks_read(hooks: &Path, worktree: &Path, protection: &mut Protection) {
    let Ok(entries) = std::fs::read_dir(hooks) else { return };
    let mut runners = HashSet::new();
    let (mut named, mut dispatched_in) = (Vec::new(), Vec::new());
    let mut path_first = false;
    for hook in entries.flatten().filter(|hook| !hook.file_name().to_string_lossy().ends_with(".sample")).take(64) {
        // A hook installed as a link (`ln -s ../../scripts/pre-commit.sh .git/hooks/pre-commit`)
        // runs what it leads to: that file is read-only too (the seventh re-attack).
        if hook.file_type().is_ok_and(|kind| kind.is_symlink())
            && let Ok(target) = std::fs::canonicalize(hook.path())
        {
            protection.read_only.push(target);
        }
        let Ok(text) = git::read_capped(&hook.path(), true, 64 * 1024) else { continue };
        let text = String::from_utf8_lossy(&text);
        runners.extend(HOOK_RUNNERS.iter().filter(|(word, _)| text.contains(word)).map(|(_, files)| *files));
        path_first |= text.contains("node_modules/.bin");
        for (path, directory) in named_by_hook(&text, hooks, worktree) {
            if directory {
                dispatched_in.push(path);
            } else {
                named.push(path);
            }
        }
        let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || HOOK_WORD_ENDS.contains(c)).collect();
        // `python -m pre_commit` (pre-commit's own hook): git runs hooks at the top of the
        // worktree and `-m` looks there first, so a `pre_commit/` the agent makes there is what
        // runs (the seventh re-attack).
        for (at, word) in words.iter().enumerate() {
            let module = match word.strip_prefix("-m") {
                Some("") => words.get(at + 1).copied().unwrap_or_default(),
                Some(module) => module,
                None => continue,
            };
            let top = module.split('.').next().unwrap_or_default();
            if !top.is_empty() && top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                named.extend([worktree.join(top), worktree.join(format!("{top}.py"))]);
            }
        }
    }
    // A runner's configuration, there or not: one created later is read as much. And the files of
    // the worktree it has run (a pre-commit `repo: local` hook's `entry: scripts/lint.sh`,
    // `entry: python3 tools/fmt.py`, lefthook's `run:` and `script:`: the thirty-fourth re-attack's
    // F5 rewrote them and the user's commit of the session's work ran them).
    for file in runners.into_iter().flatten().map(|name| worktree.join(name)) {
        if let Ok(text) = git::read_capped(&file, false, 256 * 1024) {
            named.extend(run_by_runner(&String::from_utf8_lossy(&text), worktree));
        }
        protection.bind_or_watch(file);
    }
    // A file a hook names, there or not (`[ -x ./scripts/pre-commit.local ] && …`: the seventh
    // re-attack); an existing directory it names (`node_modules/.bin`) is not a file it runs.
    for file in named.into_iter().filter(|file| file.starts_with(worktree) && !file.is_dir()) {
        protection.bind_or_watch(file);
    }
    // A directory a hook picks its script in by name (`scripts/hooks/$(basename "$0")`): whole.
    for dir in dispatched_in.into_iter().filter(|dir| dir.starts_with(worktree) && dir != worktree && dir.is_dir()) {
        protection.read_only.push(dir);
    }
    if path_first {
        protection.notes.push(format!(
            "the hooks in {} put node_modules/.bin first on PATH: a program the agent installs there runs at your next \
             git commit\nhint: look at what changed in node_modules/.bin before you commit, or commit with --no-verify",
            super::shown(hooks)
        ));
    }
}

/// The files of `worktree` a hook runner's configuration runs: each word of an `entry:`, `run:` or
/// `script:` value (up to the `,` or `}` that ends it in a flow mapping) that names a file there.
fn run_by_runner(config: &str, worktree: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for line in config.lines() {
        for key in ["entry:", "run:", "script:"] {
            for (at, _) in line.match_indices(key) {
                // A key of its own, not the end of another's name (`pre-run:`).
                if line[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') {
                    continue;
                }
                let value = &line[at + key.len()..];
                let value = value.split([',', '}']).next().unwrap_or_default();
                for word in value.split_whitespace().map(|word| word.trim_matches(['"', '\''])) {
                    if word.is_empty() || word.starts_with('-') || word.contains('$') {
                        continue;
                    }
                    let file = without_dot_dots(&worktree.join(word));
                    if file.starts_with(worktree) && file != worktree && (file.is_file() || word.contains('/')) {
                        files.push(file);
                    }
                }
            }
        }
    }
    files
}

/// What ends a word of a hook's text, beside blanks.
const HOOK_WORD_ENDS: &str = "\"'=;:()|&<>`";

/// The worktree files a hook's `text` names by path, from the top of `worktree` (where git runs
/// hooks): a relative path (`./scripts/check.sh`, `scripts/check.sh`) and one computed, whose
/// computed part is taken both for the top (its leading `..` dropped) and for the hooks'
/// directory `hooks`: `"$(git rev-parse --show-toplevel)/scripts/x.sh"`,
/// `"$(dirname "$0")/../../scripts/x.sh"`, `` `git rev-parse --show-toplevel`/x.sh ``,
/// `"$ROOT/scripts/x.sh"` (the twelfth re-attack changed the scripts behind the first two idioms,
/// and the user's next commit ran them). An absolute path is kept when it is inside the worktree;
/// one under `~` or `$HOME` is the home's, not the worktree's. What is not inside the worktree is
/// left out by the caller.
fn named_by_hook(text: &str, hooks: &Path, worktree: &Path) -> Vec<(PathBuf, bool)> {
    let mut named = Vec::new();
    let mut after_substitution = false;
    let mut rest = text;
    while !rest.is_empty() {
        let end = rest.find(|c: char| c.is_whitespace() || HOOK_WORD_ENDS.contains(c)).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        // (the path, whether it is computed, whether it is a directory the hook picks a script in)
        let found = match (word.find('$'), word.rfind('$')) {
            (Some(at), _) if word[at + 1..].starts_with("HOME") || word[at + 1..].starts_with("{HOME") => None,
            // `scripts/hooks/$(basename "$0")`: the directory a dispatching hook picks its script
            // in by the hook's name (the fifteenth re-attack).
            (Some(first), _) if first > 1 && word[..first].ends_with('/') => {
                let directory = &word[..first];
                Some((directory, directory.starts_with('/') && after_substitution, true))
            }
            (_, Some(last)) => word[last..].find('/').map(|slash| (&word[last + slash..], true, false)),
            _ if word.starts_with('/') && after_substitution => Some((word, true, false)),
            _ if word.starts_with('~') || !word.contains('/') => None,
            _ => Some((word, false, false)),
        };
        match found {
            // Computed: what follows it, from the top and from the hooks' directory.
            Some((tail, true, directory)) => {
                named.push((without_dot_dots(&hooks.join(tail.trim_start_matches('/'))), directory));
                let from_top: PathBuf = Path::new(tail)
                    .components()
                    .skip_while(|part| !matches!(part, std::path::Component::Normal(_)))
                    .collect();
                if !from_top.as_os_str().is_empty() {
                    named.push((worktree.join(from_top), directory));
                }
            }
            Some((path, false, directory)) => named.push((without_dot_dots(&worktree.join(path)), directory)),
            None => {}
        }
        let Some(separator) = after.chars().next() else { break };
        // A quote closing a computed part keeps it computed: `"$ROOT"/scripts/x.sh`,
        // `"$(git rev-parse --show-toplevel)"/scripts/x.sh` (the fifteenth re-attack).
        let quote = matches!(separator, '"' | '\'');
        after_substitution = matches!(separator, ')' | '`')
            || (quote && (word.contains('$') || (word.is_empty() && after_substitution)));
        rest = &after[separator.len_utf8()..];
    }
    named
}

/// A git config, with the files it includes (`include.path`, `includeIf.*.path`) read where
/// they are included, as git reads them (a setting after an include wins over the include's):
/// every variable is appended to `entries`. Each included file is made read-only in `access`
/// when it exists, watched when it does not (git skips a missing include, so creating one would
/// add to the config).
fn read_config(
    file: &Path,
    context: &GitContext,
    protection: &mut Protection,
    depth: usize,
    entries: &mut Vec<git::Entry>,
) {
    // So many in all (the seventh re-attack: 50 includes of a file that includes itself 50
    // times, ten levels deep, held every later launch for good). A file included twice is read
    // twice, as git reads it: the later reading's settings win.
    if protection.configs_read.len() >= MAX_CONFIGS_READ {
        if !protection.configs_cut_short {
            protection.configs_cut_short = true;
            protection.notes.push(format!(
                "more than {MAX_CONFIGS_READ} git config files are included from {}: those past it were not read, and \
                 what they name is not protected\nhint: look at the include.path entries there",
                super::shown(file)
            ));
        }
        return;
    }
    protection.configs_read.push(file.to_path_buf());
    let Ok(text) = git::read_limited(file, true) else { return };
    let base = file.parent().unwrap_or(Path::new("/"));
    for entry in git::parse(&String::from_utf8_lossy(&text)) {
        add_entry(entry, base, context, protection, depth, entries);
    }
}

/// One config variable, appended to `entries`; an include is read where it stands (relative to
/// `base`; `~/` in the home, whose agent directories are writable) and protected.
fn add_entry(
    entry: git::Entry,
    base: &Path,
    context: &GitContext,
    protection: &mut Protection,
    depth: usize,
    entries: &mut Vec<git::Entry>,
) {
    let included = (entry.section == "include" || entry.section == "includeif") && entry.key == "path";
    let path = included.then(|| entry.value.clone()).flatten().filter(|named| !named.is_empty());
    entries.push(entry);
    let Some(path) = path.and_then(|named| context.resolve(&named, base)) else { return };
    if depth < MAX_INCLUDE_DEPTH && path.is_file() {
        read_config(&path, context, protection, depth + 1, entries);
    }
    let real = resolved(&path);
    if real != path {
        protection.bind_or_watch(real);
    }
    protection.bind_or_watch(path);
}

/// `path` with the links on its way followed: itself when it exists, else its directory's
/// resolved path and its name (a missing file is watched where it would appear).
pub(super) fn resolved(path: &Path) -> PathBuf {
    // The deepest ancestor there, resolved, and the rest of the names after it: a file whose
    // directories do not exist yet is watched where it would appear (the twenty-first re-attack
    // made `~/.config/systemd/user` through a linked `~/.config`).
    for ancestor in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(ancestor) {
            let rest = path.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return if rest.as_os_str().is_empty() { real } else { real.join(rest) };
        }
    }
    path.to_path_buf()
}

/// How deep includes are followed (git stops at ten levels).
const MAX_INCLUDE_DEPTH: usize = 10;

/// The user's own git settings, which apply in every repository (a relative `core.hooksPath`
/// there is relative to each repository's worktree), and the home a `~/` names.
pub(super) struct GitContext {
    home: PathBuf,
    global: Vec<git::Entry>,
    /// The user's config files (the system's too) and those they include, as read.
    files: Vec<PathBuf>,
}

impl GitContext {
    /// The system's and the user's config files, as git finds them in this environment
    /// (`GIT_CONFIG_SYSTEM`, `GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL`), their includes
    /// followed (and protected like a repository's).
    pub(super) fn of_user(env: &LaunchEnv, home: &Path, protection: &mut Protection) -> GitContext {
        let mut context = GitContext { home: home.to_path_buf(), global: Vec::new(), files: Vec::new() };
        let read_before = protection.configs_read.len();
        let mut files = Vec::new();
        if env.var(GIT_CONFIG_NOSYSTEM).is_none() {
            files.push(env.var(GIT_CONFIG_SYSTEM).map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from));
        }
        match env.var(GIT_CONFIG_GLOBAL) {
            Some(global) => files.push(PathBuf::from(global)),
            None => files.extend(user_config_files(env, home)),
        }
        let mut global = Vec::new();
        for file in files {
            read_config(&file, &context, protection, 0, &mut global);
            // The user's own config, where it really is: in a dotfiles repository the agent works
            // in (`~/.gitconfig -> dotfiles/gitconfig`) it set `core.hooksPath` for the user's
            // every later commit (the nineteenth re-attack); read-only there, or watched.
            protection.bind_or_watch(resolved(&file));
        }
        // Then the environment's own pairs, which git reads after the files.
        let count = env.var(GIT_CONFIG_COUNT).and_then(|count| count.parse::<usize>().ok()).unwrap_or(0);
        for [key, value] in (0..count.min(1024)).map(git_config_pair) {
            let Some(entry) = env.var(&key).and_then(|key| git::entry_of_key(key, env.var(&value))) else { continue };
            add_entry(entry, home, &context, protection, 0, &mut global);
        }
        // What the user's own config has git run in every repository (a global `core.hooksPath`,
        // an alias's or a helper's script), where it really is: through a linked `~/.config` it
        // was the agent's to rewrite (the twenty-first re-attack).
        let homed: Vec<git::Entry> = global
            .iter()
            .cloned()
            .map(|mut entry| {
                entry.value = entry.value.map(|value| value.replace("${HOME}/", "~/").replace("$HOME/", "~/"));
                entry
            })
            .collect();
        let (paths, _) = git::program_words(&homed);
        // And the template directory every `git init` and `git clone` copies hooks from (the
        // thirtieth re-attack's B4: in a dotfiles workspace the agent rewrote its
        // `hooks/post-checkout`, and the user's next clone ran it).
        let template = homed.iter().rev().find(|entry| entry.section == "init" && entry.key == "templatedir");
        let template = template.and_then(|entry| entry.value.clone());
        for named in git::hooks_path(&homed).into_iter().chain(paths).chain(template) {
            if (named.starts_with('/') || named.starts_with("~/"))
                && let Some(path) = context.resolve(&named, home)
            {
                protection.bind_or_watch(resolved(&path));
            }
        }
        context.global = global;
        context.files = protection.configs_read[read_before..].to_vec();
        context
    }

    /// What the user's git reads of theirs in any repository: its config files, those they
    /// include, and the files its settings name (`core.excludesFile`, `core.attributesFile`, a
    /// global `core.hooksPath`, `commit.template`, `init.templateDir`); for the home's read list
    /// (`home_view`).
    pub(super) fn user_files(&self) -> Vec<PathBuf> {
        let named = self.global.iter().filter(|entry| {
            entry.section == "core" && matches!(entry.key.as_str(), "excludesfile" | "attributesfile" | "hookspath")
                || entry.section == "commit" && entry.key == "template"
                || entry.section == "init" && entry.key == "templatedir"
        });
        let named = named.filter_map(|entry| self.resolve(entry.value.as_deref()?, &self.home));
        self.files.iter().cloned().chain(named).collect()
    }

    /// A path as git takes it from a config: `~/` in the home, relative to `base` otherwise.
    fn resolve(&self, named: &str, base: &Path) -> Option<PathBuf> {
        let path = if named.starts_with('~') { expand_home(named, &self.home)? } else { base.join(named) };
        Some(without_dot_dots(&path))
    }
}

/// The user's own git config files where git looks for them when `GIT_CONFIG_GLOBAL` is unset:
/// `$XDG_CONFIG_HOME/git/config`, then `~/.gitconfig`.
pub(super) fn user_config_files(env: &LaunchEnv, home: &Path) -> [PathBuf; 2] {
    [env.config_home().join("git/config"), home.join(".gitconfig")]
}

/// A path git takes from a config starting with `~`: `~/…` in `home`, `~user/…` in that account's
/// home (the twenty-eighth re-attack's W6: an include written `~user/…` was neither read nor
/// protected, and a `core.fsmonitor` the agent wrote there ran at the user's next `git status`);
/// `None` for an account that does not exist (git reads nothing there).
fn expand_home(named: &str, home: &Path) -> Option<PathBuf> {
    let rest = named.strip_prefix('~')?;
    let (user, rest) = rest.split_once('/')?;
    if user.is_empty() {
        return Some(home.join(rest));
    }
    Some(nix::unistd::User::from_name(user).ok().flatten()?.dir.join(rest))
}

/// Submodules' git directories under a git directory's `modules` (a submodule named `a/b` lives
/// in `modules/a/b`): each directory holding `HEAD` is one, and its own `modules` is searched.
fn module_git_dirs(modules: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut pending = vec![modules.to_path_buf()];
    let mut scanned = 0;
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.flatten().map(|entry| entry.path()).filter(|path| is_real_dir(path)) {
            // A budget of directories, not a depth: a submodule's name may hold any number of
            // `/` (the thirteenth re-attack named one 40 levels deep, past a depth cut).
            scanned += 1;
            if scanned > MAX_SCANNED_DIRECTORIES {
                found.sort();
                return (found, false);
            }
            if path.join("HEAD").is_file() {
                pending.push(path.join("modules"));
                found.push(path);
            } else {
                pending.push(path);
            }
        }
    }
    found.sort();
    (found, true)
}

/// What [`nested_checkouts`] finds: the checkouts; whether it saw everything; the directories it
/// skipped but git directories (installed dependencies, build outputs); the socket files and
/// direnv `.envrc` files it met.
#[derive(Default)]
struct Searched {
    checkouts: Vec<PathBuf>,
    complete: bool,
    skipped: Vec<PathBuf>,
    sockets: Vec<PathBuf>,
    envrcs: Vec<PathBuf>,
}

/// Checkouts inside `root` (directories holding `.git`, not `root` itself), searched breadth
/// first through at most [`MAX_SCANNED_DIRECTORIES`] directories, without following links or
/// entering [`SKIPPED_DIRECTORIES`] ([`Searched`]).
fn nested_checkouts(root: &Path) -> Searched {
    use std::os::unix::fs::FileTypeExt as _;
    let mut searched = Searched { complete: true, ..Searched::default() };
    let mut pending = std::collections::VecDeque::from([(root.to_path_buf(), 0)]);
    let mut scanned = 0;
    while let Some((dir, depth)) = pending.pop_front() {
        scanned += 1;
        if scanned > MAX_SCANNED_DIRECTORIES {
            searched.complete = false;
            return searched;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_socket() {
                searched.sockets.push(entry.path());
            }
            if kind.is_file() && name == ".envrc" {
                searched.envrcs.push(entry.path());
            }
            if !kind.is_dir() {
                continue;
            }
            if SKIPPED_DIRECTORIES.iter().any(|skipped| name == *skipped) {
                if name != ".git" {
                    searched.skipped.push(entry.path());
                }
                continue;
            }
            let path = entry.path();
            if std::fs::symlink_metadata(path.join(".git")).is_ok() || git::is_git_directory(&path) {
                searched.checkouts.push(path.clone());
            }
            if depth < MAX_SCAN_DEPTH {
                pending.push_back((path, depth + 1));
            } else {
                // A directory below the deepest level searched: the search is cut short, and says
                // so (the twelfth re-attack hid a repository 33 levels down, unreported).
                searched.complete = false;
            }
        }
    }
    searched.checkouts.sort();
    searched
}

/// `path` with `.` and `..` resolved by name (`/a/.git/../b` is `/a/b`), so that whether it
/// lies in a writable directory can be told from its components.
pub(super) fn without_dot_dots(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                normal.pop();
            }
            std::path::Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

/// A directory, not a link to one.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// W6: `~user/` is that account's home, as git expands it (here the account running the
    /// test, as the passwd file names it), `~/` the home given; no such account, nothing.
    #[test]
    fn a_path_written_with_an_accounts_home_is_where_git_reads_it() {
        let me = nix::unistd::User::from_uid(nix::unistd::getuid()).unwrap().unwrap();
        let named = format!("~{}/dotfiles/work.inc", me.name);
        assert_eq!(expand_home(&named, Path::new("/elsewhere")), Some(me.dir.join("dotfiles/work.inc")));
        assert_eq!(expand_home("~/x.inc", Path::new("/home/u")), Some(PathBuf::from("/home/u/x.inc")));
        assert_eq!(expand_home("~no-such-account-here/x", Path::new("/home/u")), None);
        assert_eq!(expand_home("~", Path::new("/home/u")), None);
    }
}
