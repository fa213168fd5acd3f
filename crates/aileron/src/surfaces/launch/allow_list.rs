//! What a confined agent may write (SPEC §13; the re-attack's H4): its workspace, its own config
//! and state directories, a private temp directory and what the user adds with `--writable`.
//! Everything else is read-only to it (`confine::write_allow_list`), and inside the workspace a
//! repository's hooks and config are read-only too (`confine` pins `.git` and binds them).
//!
//! Decisions (docs/decisions/0013-launch-containment.md):
//! - The workspace is the repository the agent starts in (the nearest directory above the working
//!   directory holding `.git`), else the working directory. A workspace that is the user's home,
//!   or holds it, is not granted: that would make `~/.bashrc` writable again. The agent then
//!   writes only its own directories, and the launch says so.
//! - The agent's own directories are created (0700) when missing, so the rule has somewhere to
//!   attach; they are the ones each agent documents (Claude Code `~/.claude` and `~/.claude.json`,
//!   Codex `$CODEX_HOME`, OpenCode and Goose their XDG directories, Pi `~/.pi`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Agent, LaunchEnv, git};

/// Variables of other programs the allow-list reads (XDG base directories, agents' own homes).
pub(super) const XDG_DATA_HOME: &str = "XDG_DATA_HOME";
pub(super) const XDG_STATE_HOME: &str = "XDG_STATE_HOME";
pub(super) const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
pub(super) const CLAUDE_CONFIG_DIR: &str = "CLAUDE_CONFIG_DIR";

/// The paths handed to `aileron __confine`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteAccess {
    /// Beneath these the agent may write (canonical paths).
    pub writable: Vec<PathBuf>,
    /// Repositories' `.git` directories, pinned in place.
    pub pinned: Vec<PathBuf>,
    /// Repositories' hooks and config, read-only inside the writable workspace.
    pub read_only: Vec<PathBuf>,
    /// The workspace granted, if one was.
    pub workspace: Option<PathBuf>,
    /// Things the user should know (a workspace not granted).
    pub notes: Vec<String>,
    /// Directories to make (0700) before the launch: the agent's own when missing, a repository's
    /// missing `hooks`.
    pub to_create: Vec<PathBuf>,
    /// Files that must not appear while the agent runs (a git directory's `commondir`, a missing
    /// file its config includes): nothing can be bound over a file that does not exist yet, so
    /// the launcher watches for them and moves each aside the moment it appears (`planted`).
    pub watched: Vec<PathBuf>,
    /// The repositories in each writable tree at launch, to tell the ones the agent creates.
    pub checkouts: Checkouts,
}

/// The repositories in each writable tree searched at launch (the tree's own, nested ones).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkouts(Vec<(PathBuf, Vec<PathBuf>)>);

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
}

impl Checkouts {
    /// Repositories in the searched trees now that were not there at launch: a `.git` the agent
    /// made is its own, hooks and config included, so the user is told before running git there.
    pub fn look(&self) -> Look {
        let mut look = Look::default();
        for (root, before) in &self.0 {
            let now = checkouts_in(root);
            for path in now.checkouts.into_iter().filter(|checkout| !before.contains(checkout)) {
                let entered = now.entered.contains(&path);
                look.created.push(Created { path, entered });
            }
            look.unread.extend(now.unread);
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
}

/// `root` itself when it holds `.git`, then [`nested_checkouts`], then every checkout the
/// indexes of those record as a submodule, wherever it lies: the search skips `node_modules`
/// and stops 32 levels down, `git status` at the root enters every submodule and runs what
/// its config names (the second re-attack of 2026-12-05).
fn checkouts_in(root: &Path) -> Found {
    let (nested, complete) = nested_checkouts(root);
    let own = std::fs::symlink_metadata(root.join(".git")).is_ok().then(|| root.to_path_buf());
    let mut found: Vec<PathBuf> = own.into_iter().chain(nested).collect();
    let mut known: HashSet<PathBuf> = found.iter().cloned().collect();
    let mut entered: HashSet<PathBuf> = found.iter().filter(|path| git::is_git_directory(path)).cloned().collect();
    let mut unread = Vec::new();
    let mut next = 0;
    while next < found.len() && found.len() < MAX_SUBMODULES {
        let checkout = found[next].clone();
        next += 1;
        let Some(git_dir) = git::git_dir(&checkout) else { continue };
        let (submodules, too_large) = git::submodules(&git_dir);
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
    Found { checkouts: found, entered, complete, unread }
}

/// Checkouts followed through indexes' submodules, at most.
const MAX_SUBMODULES: usize = 4096;

impl WriteAccess {
    /// `path` read-only when it exists, else watched so that it is moved aside if it appears.
    fn bind_or_watch(&mut self, path: PathBuf) {
        if path.exists() { self.read_only.push(path) } else { self.watched.push(path) }
    }

    /// Makes what [`WriteAccess::to_create`] names (not done by a dry run).
    pub fn prepare(&self) -> anyhow::Result<()> {
        for dir in &self.to_create {
            crate::platform::home::create_private_dir(dir)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        }
        Ok(())
    }
}

/// The allow-list for `agent` started in `cwd`, with the user's `--writable` paths and the
/// session's private temp directory. Reads the filesystem, changes nothing.
pub fn write_access(
    agent: Agent,
    env: &LaunchEnv,
    cwd: &Path,
    extra: &[PathBuf],
    temp_dir: &Path,
) -> anyhow::Result<WriteAccess> {
    let mut access = WriteAccess::default();
    let home = std::fs::canonicalize(&env.home_dir).unwrap_or_else(|_| env.home_dir.clone());
    let workspace = repository_root(cwd, &home).unwrap_or_else(|| cwd.to_path_buf());
    let git = GitContext::of_user(env, &home, &mut access);
    if home.starts_with(&workspace) {
        access.notes.push(format!(
            "{} holds your home directory, so it is not the agent's workspace: the agent can write only its own \
             directories and its temp directory\nhint: launch from a project directory, or add one with --writable PATH",
            workspace.display()
        ));
    } else {
        protect_repository(&workspace, &git, &mut access);
        access.writable.push(workspace.clone());
        access.workspace = Some(workspace);
    }
    for dir in agent_directories(agent, env) {
        match std::fs::canonicalize(&dir) {
            Ok(resolved) => access.writable.push(resolved),
            Err(_) => {
                access.to_create.push(dir.clone());
                access.writable.push(dir);
            }
        }
    }
    for file in agent_files(agent, env).into_iter().filter(|file| file.is_file()) {
        access.writable.push(std::fs::canonicalize(&file).unwrap_or(file));
    }
    access.writable.push(temp_dir.to_path_buf());
    // Terminals, /dev/null and the like, and shared memory: the device entries themselves, not
    // `/dev`, in which an agent run as root could create and rename entries of the host's (the
    // second re-attack of 2026-12-05).
    access.writable.extend(WRITABLE_DEVICES.iter().map(PathBuf::from).filter(|device| device.exists()));
    for path in extra {
        let resolved = std::fs::canonicalize(path).map_err(|e| {
            anyhow::anyhow!("--writable {}: {e}\nhint: name a file or directory that exists", path.display())
        })?;
        if home.starts_with(&resolved) {
            anyhow::bail!(
                "--writable {} would let the agent write your whole home (~/.bashrc and the rest)\nhint: name the \
                 project or directory it needs",
                path.display()
            );
        }
        protect_repository(&resolved, &git, &mut access);
        access.writable.push(resolved);
    }
    access.writable.dedup();
    // What lies outside everything writable the agent cannot change (a config's include
    // elsewhere, a program in /usr/bin): nothing to bind or watch.
    let inside = |path: &PathBuf| access.writable.iter().any(|dir| path.starts_with(dir) && path != dir);
    access.read_only.retain(inside);
    access.watched.retain(inside);
    // The directories between a writable root and what is protected in it are pinned, so that
    // renaming one cannot carry a read-only file away and leave the agent's in its place, nor
    // take a watched name's directory out from under the watch (the second re-attack of
    // 2026-12-05: a config include's directory renamed away and back).
    let mut pinned = Vec::new();
    for path in access.read_only.iter().chain(&access.watched) {
        let roots = access.writable.iter().filter(|dir| path.starts_with(dir));
        let Some(root) = roots.max_by_key(|dir| dir.as_os_str().len()) else { continue };
        pinned.extend(path.ancestors().skip(1).take_while(|dir| dir != root).map(Path::to_path_buf));
    }
    access.pinned.extend(pinned);
    // A parent is pinned before what is inside it: a bind of the parent made later would hide
    // the mounts beneath it.
    access.pinned.sort_by(|a, b| a.components().count().cmp(&b.components().count()).then_with(|| a.cmp(b)));
    access.pinned.dedup();
    access.read_only.dedup();
    access.watched.sort();
    access.watched.dedup();
    Ok(access)
}

/// What of `/dev` an agent writes: the null and random devices, its terminal and new ones
/// (`ptmx`, `pts`), and shared memory and message queues (the namespace's own, see `confine`).
const WRITABLE_DEVICES: [&str; 10] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
    "/dev/mqueue",
];

/// The nearest directory from `cwd` up to (not including) `home` that holds `.git`.
fn repository_root(cwd: &Path, home: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .take_while(|dir| *dir != home && !home.starts_with(dir))
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

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

/// A writable tree at `root` (the workspace, a `--writable` path): its repository and every
/// repository inside it (submodules, nested checkouts), each with its hooks and config
/// read-only, its git directory pinned and its redirecting files watched (the directories
/// between `root` and each are pinned by [`write_access`], so a renamed parent cannot carry the
/// protected repository away and leave a planted one in its place).
fn protect_repository(root: &Path, git: &GitContext, access: &mut WriteAccess) {
    let Found { checkouts, complete, unread, .. } = checkouts_in(root);
    for index in unread {
        access.notes.push(format!(
            "{} is too large to read: the submodules it records are not protected\nhint: look at `git ls-files -s | grep \
             ^160000` there",
            index.display()
        ));
    }
    for checkout in &checkouts {
        protect_checkout(checkout, git, access);
    }
    access.checkouts.0.push((root.to_path_buf(), checkouts));
    if !complete {
        access.notes.push(format!(
            "{} has more than {MAX_SCANNED_DIRECTORIES} directories: repositories nested deeper in it than those \
             searched are not protected (their hooks and config stay writable to the agent)\nhint: launch from the \
             project itself, or keep nested checkouts near its top",
            root.display()
        ));
    }
}

/// `.git` of the checkout at `root`: a `.git` file (a worktree's or submodule's pointer to its
/// git directory) is read-only itself, and what the configs it leads to have git run from this
/// worktree is protected; a `.git` directory is protected as a git directory.
fn protect_checkout(root: &Path, context: &GitContext, access: &mut WriteAccess) {
    let git = root.join(".git");
    let Ok(metadata) = std::fs::symlink_metadata(&git) else {
        if git::is_git_directory(root) {
            protect_git_dir(root, None, context, access);
        }
        return;
    };
    if metadata.is_file() {
        access.read_only.push(git);
        // A linked worktree's administrative directory names the repository's own directory in
        // its `commondir`; a submodule's git directory holds its config (both protected where
        // they live). What they have git run from this worktree is protected here.
        let Some(git_dir) = git::git_dir(root) else { return };
        let common = git::common_dir(&git_dir);
        let mut settings = context.global.clone();
        for config in
            common.iter().map(|dir| dir.join("config")).chain([git_dir.join("config"), git_dir.join("config.worktree")])
        {
            read_config(&config, context, &mut WriteAccess::default(), 0, &mut settings);
        }
        protect_what_git_runs(root, &settings, context, access);
    } else if metadata.is_dir() {
        protect_git_dir(&git, Some(root), context, access);
    }
}

/// A git directory: pinned in place, its hooks and config (and the files the config includes)
/// read-only, `commondir` and `config.worktree` watched unless present, its linked worktrees'
/// administrative directories and its submodules' git directories protected alike; and what its
/// config (with the user's) has git run from inside the worktree.
fn protect_git_dir(git: &Path, worktree: Option<&Path>, context: &GitContext, access: &mut WriteAccess) {
    let hooks = git.join("hooks");
    // An empty hooks directory is what `git init` makes; it is where a planted hook would go.
    if !hooks.exists() {
        access.to_create.push(hooks.clone());
    }
    access.pinned.push(git.to_path_buf());
    access.read_only.extend([hooks.clone(), git.join("config")]);
    for name in REDIRECTING_FILES {
        access.bind_or_watch(git.join(name));
    }
    let mut config = Vec::new();
    read_config(&git.join("config"), context, access, 0, &mut config);
    read_config(&git.join("config.worktree"), context, access, 0, &mut config);
    // A submodule's git directory names its worktree (relative to itself).
    let configured = config.iter().rev().find(|entry| entry.section == "core" && entry.key == "worktree");
    let worktree = worktree
        .map(Path::to_path_buf)
        .or_else(|| configured.and_then(|entry| entry.value.as_ref()).map(|named| without_dot_dots(&git.join(named))));
    if let Some(worktree) = worktree {
        let settings: Vec<git::Entry> = context.global.iter().chain(&config).cloned().collect();
        protect_what_git_runs(&worktree, &settings, context, access);
        protect_what_hooks_read(&hooks, &worktree, access);
    }
    // A linked worktree's administrative directory: where it finds its repository and its own config.
    let worktrees = git.join("worktrees");
    if let Ok(entries) = std::fs::read_dir(&worktrees) {
        access.pinned.push(worktrees.clone());
        for admin in entries.flatten().map(|entry| entry.path()).filter(|path| is_real_dir(path)) {
            access.pinned.push(admin.clone());
            for name in REDIRECTING_FILES.iter().chain(&["gitdir"]) {
                access.bind_or_watch(admin.join(name));
            }
        }
    }
    for module in module_git_dirs(&git.join("modules")) {
        protect_git_dir(&module, None, context, access);
    }
}

/// What `settings` (the user's, then a repository's) have git run from `worktree`: its hooks
/// directory (`core.hooksPath`: husky's `.husky/_`, which git ignores, so a hook changed there
/// would not even show in `git status`; husky's stubs there run the scripts one directory up,
/// which are read-only too) and the programs and scripts its commands name, read-only (or
/// watched when missing, for a path).
fn protect_what_git_runs(worktree: &Path, settings: &[git::Entry], context: &GitContext, access: &mut WriteAccess) {
    let resolve = |named: &str| context.resolve(named, worktree);
    if let Some(hooks) = git::hooks_path(settings).and_then(|named| resolve(&named)) {
        if hooks.file_name().is_some_and(|name| name == "_")
            && let Some(scripts) = hooks.parent().filter(|parent| parent.is_dir())
        {
            access.read_only.push(scripts.to_path_buf());
        }
        protect_what_hooks_read(&hooks, worktree, access);
        access.bind_or_watch(hooks);
    }
    let (paths, words) = git::program_words(settings);
    for program in paths.iter().filter_map(|named| resolve(named)) {
        access.bind_or_watch(program);
    }
    // An argument that is a file of the worktree (`python3 conv.py`) is run as much as a program.
    for file in words.iter().map(|word| without_dot_dots(&worktree.join(word))).filter(|file| file.is_file()) {
        access.read_only.push(file);
    }
}

/// Hook runners whose installed hooks read what to run from the worktree: a word their hook
/// holds, and the files it reads there.
const HOOK_RUNNERS: [(&str, &[&str]); 2] = [
    ("pre-commit.com", &[".pre-commit-config.yaml"]),
    (
        "lefthook",
        &[
            "lefthook.yml",
            ".lefthook.yml",
            "lefthook.yaml",
            ".lefthook.yaml",
            "lefthook-local.yml",
            ".lefthook-local.yml",
            ".lefthook",
        ],
    ),
];

/// What the installed hooks in `hooks` read from `worktree`, read-only as the hooks are (the
/// agent would otherwise choose what the user's next commit runs): a hook runner's configuration
/// (the pre-commit framework's `.pre-commit-config.yaml`, lefthook's `lefthook.yml`) and every
/// file of the worktree a hook names by path (pre-commit's `INSTALL_PYTHON=<worktree>/.venv/…`,
/// `./scripts/check.sh`: the fourth re-attack). What a hook finds on `PATH` cannot be told:
/// husky's puts `node_modules/.bin` first, so the launch says so.
fn protect_what_hooks_read(hooks: &Path, worktree: &Path, access: &mut WriteAccess) {
    let Ok(entries) = std::fs::read_dir(hooks) else { return };
    let mut runners = HashSet::new();
    let mut named = Vec::new();
    let mut path_first = false;
    for hook in entries.flatten().filter(|hook| !hook.file_name().to_string_lossy().ends_with(".sample")).take(64) {
        let Ok(text) = git::read_capped(&hook.path(), true, 64 * 1024) else { continue };
        let text = String::from_utf8_lossy(&text);
        runners.extend(HOOK_RUNNERS.iter().filter(|(word, _)| text.contains(word)).map(|(_, files)| *files));
        path_first |= text.contains("node_modules/.bin");
        let words = text.split(|c: char| c.is_whitespace() || "\"'=;:()|&<>`".contains(c));
        for word in words.filter(|word| word.contains('/') && !word.contains('$') && !word.starts_with('~')) {
            named.push(without_dot_dots(&worktree.join(word)));
        }
    }
    let files = runners.into_iter().flatten().map(|name| worktree.join(name)).chain(named);
    for file in files.filter(|file| file.starts_with(worktree) && file.is_file()) {
        access.read_only.push(file);
    }
    if path_first {
        access.notes.push(format!(
            "the hooks in {} put node_modules/.bin first on PATH: a program the agent installs there runs at your next \
             git commit\nhint: look at what changed in node_modules/.bin before you commit, or commit with --no-verify",
            hooks.display()
        ));
    }
}

/// A git config, with the files it includes (`include.path`, `includeIf.*.path`) read where
/// they are included, as git reads them (a setting after an include wins over the include's):
/// every variable is appended to `entries`. Each included file is made read-only in `access`
/// when it exists, watched when it does not (git skips a missing include, so creating one would
/// add to the config).
fn read_config(
    file: &Path,
    context: &GitContext,
    access: &mut WriteAccess,
    depth: usize,
    entries: &mut Vec<git::Entry>,
) {
    let Ok(text) = git::read_limited(file, true) else { return };
    let base = file.parent().unwrap_or(Path::new("/"));
    for entry in git::parse(&String::from_utf8_lossy(&text)) {
        let included = (entry.section == "include" || entry.section == "includeif") && entry.key == "path";
        let path = included.then(|| entry.value.clone()).flatten().filter(|named| !named.is_empty());
        entries.push(entry);
        // Relative to the including file; `~/` in the home (whose agent directories are writable).
        let Some(path) = path.and_then(|named| context.resolve(&named, base)) else { continue };
        if depth < MAX_INCLUDE_DEPTH && path.is_file() {
            read_config(&path, context, access, depth + 1, entries);
        }
        access.bind_or_watch(path);
    }
}

/// How deep includes are followed (git stops at ten levels).
const MAX_INCLUDE_DEPTH: usize = 10;

/// The user's own git settings, which apply in every repository (a relative `core.hooksPath`
/// there is relative to each repository's worktree), and the home a `~/` names.
struct GitContext {
    home: PathBuf,
    global: Vec<git::Entry>,
}

impl GitContext {
    /// The system's and the user's config files, as git finds them in this environment
    /// (`GIT_CONFIG_SYSTEM`, `GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL`), their includes
    /// followed (and protected like a repository's).
    fn of_user(env: &LaunchEnv, home: &Path, access: &mut WriteAccess) -> GitContext {
        let mut context = GitContext { home: home.to_path_buf(), global: Vec::new() };
        let mut files = Vec::new();
        if env.var("GIT_CONFIG_NOSYSTEM").is_none() {
            files.push(env.var("GIT_CONFIG_SYSTEM").map_or_else(|| PathBuf::from("/etc/gitconfig"), PathBuf::from));
        }
        match env.var("GIT_CONFIG_GLOBAL") {
            Some(global) => files.push(PathBuf::from(global)),
            None => files.extend([xdg(env, "XDG_CONFIG_HOME", ".config").join("git/config"), home.join(".gitconfig")]),
        }
        let mut global = Vec::new();
        for file in files {
            read_config(&file, &context, access, 0, &mut global);
        }
        context.global = global;
        context
    }

    /// A path as git takes it from a config: `~/` in the home, relative to `base` otherwise.
    fn resolve(&self, named: &str, base: &Path) -> Option<PathBuf> {
        let path = match named.strip_prefix("~/") {
            Some(rest) => self.home.join(rest),
            None if named.starts_with('~') => return None,
            None => base.join(named),
        };
        Some(without_dot_dots(&path))
    }
}

/// Submodules' git directories under a git directory's `modules` (a submodule named `a/b` lives
/// in `modules/a/b`): each directory holding `HEAD` is one.
fn module_git_dirs(modules: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![(modules.to_path_buf(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for path in entries.flatten().map(|entry| entry.path()).filter(|path| is_real_dir(path)) {
            if path.join("HEAD").is_file() {
                found.push(path);
            } else if depth < MAX_SCAN_DEPTH {
                pending.push((path, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// Checkouts inside `root` (directories holding `.git`, not `root` itself), searched breadth
/// first through at most [`MAX_SCANNED_DIRECTORIES`] directories, without following links or
/// entering [`SKIPPED_DIRECTORIES`]; and whether the search saw everything.
fn nested_checkouts(root: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let mut pending = std::collections::VecDeque::from([(root.to_path_buf(), 0)]);
    let mut scanned = 0;
    while let Some((dir, depth)) = pending.pop_front() {
        scanned += 1;
        if scanned > MAX_SCANNED_DIRECTORIES {
            return (found, false);
        }
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if SKIPPED_DIRECTORIES.iter().any(|skipped| name == *skipped)
                || !entry.file_type().is_ok_and(|kind| kind.is_dir())
            {
                continue;
            }
            let path = entry.path();
            if std::fs::symlink_metadata(path.join(".git")).is_ok() || git::is_git_directory(&path) {
                found.push(path.clone());
            }
            if depth < MAX_SCAN_DEPTH {
                pending.push_back((path, depth + 1));
            }
        }
    }
    found.sort();
    (found, true)
}

/// `path` with `.` and `..` resolved by name (`/a/.git/../b` is `/a/b`), so that whether it
/// lies in a writable directory can be told from its components.
fn without_dot_dots(path: &Path) -> PathBuf {
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

fn xdg(env: &LaunchEnv, variable: &str, default: &str) -> PathBuf {
    env.vars
        .get(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| env.home_dir.join(default))
}

/// Directories the agent keeps its own configuration, sessions and caches in.
pub(super) fn agent_directories(agent: Agent, env: &LaunchEnv) -> Vec<PathBuf> {
    let var = |name: &str| env.var(name).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let xdg_dirs = |name: &str| {
        vec![
            env.config_home().join(name),
            xdg(env, XDG_DATA_HOME, ".local/share").join(name),
            xdg(env, XDG_STATE_HOME, ".local/state").join(name),
            xdg(env, XDG_CACHE_HOME, ".cache").join(name),
        ]
    };
    match agent {
        Agent::Claude => vec![var(CLAUDE_CONFIG_DIR).unwrap_or_else(|| env.home_dir.join(".claude"))],
        Agent::Codex => vec![var(super::CODEX_HOME).unwrap_or_else(|| env.home_dir.join(".codex"))],
        Agent::Opencode => xdg_dirs("opencode"),
        Agent::Goose => xdg_dirs("goose"),
        Agent::Pi => vec![var(super::PI_CODING_AGENT_DIR).unwrap_or_else(|| env.home_dir.join(".pi"))],
    }
}

/// Files of the agent's own outside those directories (kept writable when they exist).
fn agent_files(agent: Agent, env: &LaunchEnv) -> Vec<PathBuf> {
    match agent {
        Agent::Claude if env.var(CLAUDE_CONFIG_DIR).is_none() => vec![env.home_dir.join(".claude.json")],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The user's git in `repo`, with no user configuration but an identity; whether it succeeded.
    fn git_in(repo: &Path, args: &[&str]) -> bool {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "u")
            .env("GIT_AUTHOR_EMAIL", "u@example.invalid")
            .env("GIT_COMMITTER_NAME", "u")
            .env("GIT_COMMITTER_EMAIL", "u@example.invalid")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        status.is_ok_and(|status| status.success())
    }

    fn env(home: &Path) -> LaunchEnv {
        LaunchEnv { vars: HashMap::new(), home_dir: home.to_path_buf(), launch_dir: home.join("run") }
    }

    #[test]
    fn the_workspace_is_the_repository_and_its_hooks_and_config_are_read_only() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        let repo = home.join("code/repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        let temp_dir = home.join("run/tmp");
        let access = write_access(Agent::Codex, &env(&home), &repo.join("src/deep"), &[], &temp_dir).unwrap();
        assert!(!home.join(".codex").exists() && !repo.join(".git/hooks").exists(), "computing changes nothing");
        access.prepare().unwrap();
        assert_eq!(access.workspace.as_deref(), Some(repo.as_path()));
        assert_eq!(access.pinned, vec![repo.join(".git")]);
        assert_eq!(access.read_only, vec![repo.join(".git/hooks"), repo.join(".git/config")]);
        assert!(repo.join(".git/hooks").is_dir(), "created so that it can be bound read-only");
        assert_eq!(access.watched, vec![repo.join(".git/commondir"), repo.join(".git/config.worktree")]);
        let devices = WRITABLE_DEVICES.iter().map(PathBuf::from).filter(|device| device.exists());
        let expected: Vec<PathBuf> = [repo.clone(), home.join(".codex"), temp_dir].into_iter().chain(devices).collect();
        assert_eq!(access.writable, expected);
        assert!(home.join(".codex").is_dir(), "the agent's own directory is made");
    }

    /// The re-attack of 2026-12-05: submodules' git directories, linked worktrees' administrative
    /// directories, repositories nested in the workspace and a config's includes are protected
    /// like the workspace's own repository.
    #[test]
    fn every_repository_in_the_workspace_is_protected() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        let repo = home.join("code/repo");
        let git = repo.join(".git");
        let dirs = [".git/hooks", ".git/modules/libs/a/hooks", ".git/worktrees/wt", "vendor/dep/.git/hooks", "sub"];
        for dir in dirs.into_iter().chain(["node_modules/pkg/.git/hooks"]) {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(git.join("config"), "[include]\n\tpath = ../shared.gitconfig ; shared\n").unwrap();
        std::fs::write(git.join("modules/libs/a/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::write(repo.join("sub/.git"), "gitdir: ../.git/modules/libs/a\n").unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp")).unwrap();
        let under = |paths: &[&str]| paths.iter().map(|path| repo.join(path)).collect::<Vec<_>>();
        assert_eq!(
            access.pinned,
            under(&[".git", "sub", "vendor", ".git/modules", ".git/worktrees", "vendor/dep", ".git/modules/libs"])
                .into_iter()
                .chain(under(&[".git/worktrees/wt", "vendor/dep/.git", ".git/modules/libs/a"]))
                .collect::<Vec<_>>(),
            "parents before what is inside them"
        );
        for read_only in [".git/modules/libs/a/hooks", ".git/modules/libs/a/config", ".git/worktrees/wt/commondir"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        for read_only in ["sub/.git", "vendor/dep/.git/hooks", "vendor/dep/.git/config"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        for watched in
            ["shared.gitconfig", ".git/commondir", ".git/worktrees/wt/gitdir", ".git/modules/libs/a/commondir"]
        {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
        assert!(!access.pinned.contains(&repo.join(".git/modules/libs/a/hooks")));
        assert!(!access.pinned.iter().any(|path| path.starts_with(repo.join("node_modules"))), "not searched");
        // Repositories made since are told apart from those there at launch.
        assert!(access.checkouts.created().is_empty());
        std::fs::create_dir_all(repo.join("made/later/.git")).unwrap();
        assert_eq!(access.checkouts.created(), vec![Created { path: repo.join("made/later"), entered: false }]);
    }

    /// The second re-attack of 2026-12-05: what the config (the repository's, an include's, the
    /// user's own) has git run from inside the workspace is read-only or watched, the directories
    /// above an include are pinned, and a submodule the index records where the search does not
    /// look is protected at launch, and one the agent records is told apart at the end.
    #[test]
    fn what_git_runs_from_the_workspace_is_protected_and_submodules_are_found_by_the_index() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        let repo = home.join("code/repo");
        let git = |args: &[&str]| git_in(&repo, args);
        for dir in [".husky/_", "tools", "conf/team", "bin", "node_modules/old/.git", "node_modules/x"] {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        if !git(&["init", "-q"]) {
            return; // no git here, so none of this would run
        }
        for file in ["tools/fsmonitor.sh", "conf/team/shared.gitconfig", "bin/conv"] {
            std::fs::write(repo.join(file), "").unwrap();
        }
        std::fs::write(repo.join("conf/team/shared.gitconfig"), "[include]\n\tpath = later.inc\n").unwrap();
        std::fs::write(
            repo.join(".git/config"),
            "[core]\n\thooksPath = .husky/_\n\tfsmonitor = ./tools/fsmonitor.sh\n\teditor = /usr/bin/vi\n\
             [filter \"x\"]\n\tclean = sh scripts/missing.sh\n[include]\n\tpath = ../conf/team/shared.gitconfig\n",
        )
        .unwrap();
        std::fs::create_dir_all(home.join(".config/git")).unwrap();
        std::fs::write(home.join(".gitconfig"), "[diff \"pdf\"]\n\ttextconv = ./bin/conv\n").unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert!(git(&["update-index", "--add", "--cacheinfo", &format!("160000,{commit},node_modules/old")]));
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp")).unwrap();
        for read_only in [".husky/_", "tools/fsmonitor.sh", "bin/conv", "conf/team/shared.gitconfig"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        assert!(!access.read_only.contains(&PathBuf::from("/usr/bin/vi")), "outside everything writable");
        for watched in ["scripts/missing.sh", "conf/team/later.inc"] {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
        for pinned in [".husky", "conf", "conf/team", "tools", "scripts", "node_modules", "node_modules/old/.git"] {
            assert!(access.pinned.contains(&repo.join(pinned)), "{pinned}: {:?}", access.pinned);
        }
        // The submodule in node_modules (never searched) is protected like any repository.
        assert!(access.read_only.contains(&repo.join("node_modules/old/.git/config")), "{:?}", access.read_only);
        // One the agent makes and records there is a submodule; one it only makes is not.
        assert!(git(&["init", "-q", "node_modules/x"]));
        assert!(git(&["update-index", "--add", "--cacheinfo", &format!("160000,{commit},node_modules/x")]));
        std::fs::create_dir_all(repo.join("made/.git")).unwrap();
        let created = access.checkouts.created();
        let made = |path: &str, entered: bool| Created { path: repo.join(path), entered };
        assert_eq!(created, vec![made("made", false), made("node_modules/x", true)]);
    }

    /// The third re-attack of 2026-12-05 (the defences above, attacked): an include in the user's
    /// own config, the order of an include against a later setting, a script named without a `/`,
    /// a linked worktree inside the workspace, husky's scripts beside its stubs, and a hook
    /// runner's configuration.
    #[test]
    fn what_git_runs_is_found_where_git_finds_it() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        let repo = home.join("code/repo");
        let git = |args: &[&str]| git_in(&repo, args);
        std::fs::create_dir_all(&repo).unwrap();
        if !git(&["init", "-q"]) || !git(&["commit", "-q", "--allow-empty", "-m", "init"]) {
            return; // no git here, so none of this would run
        }
        assert!(git(&["worktree", "add", "-q", ".worktrees/feat"]));
        let files = [
            ".husky/pre-commit",
            ".husky/_/pre-commit",
            ".githooks/pre-commit",
            ".team-hooks/pre-commit",
            "conv.py",
            "tools/bin2txt",
            ".worktrees/feat/tools/fsmon.sh",
            ".pre-commit-config.yaml",
        ];
        for file in files {
            std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "").unwrap();
        }
        // pre-commit's installed hook, naming the interpreter of the project's own environment,
        // and a hook naming a script of the worktree (the fourth re-attack).
        let python = repo.join(".venv/bin/python3");
        std::fs::create_dir_all(python.parent().unwrap()).unwrap();
        std::fs::write(&python, "").unwrap();
        let hook = format!(
            "# File generated by pre-commit: https://pre-commit.com\nINSTALL_PYTHON={}\n./scripts/check-msg.sh \"$1\"\n",
            python.display()
        );
        std::fs::write(repo.join(".git/hooks/pre-commit"), hook).unwrap();
        std::fs::create_dir_all(repo.join("scripts")).unwrap();
        std::fs::write(repo.join("scripts/check-msg.sh"), "").unwrap();
        // The include sets one hooks path, the repository's own setting after it another: git
        // takes the later one.
        std::fs::write(repo.join(".git/team.inc"), "[core]\n\thooksPath = .team-hooks\n").unwrap();
        std::fs::write(
            repo.join(".git/config"),
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = ./tools/fsmon.sh\n[include]\n\tpath = team.inc\n\
             [core]\n\thooksPath = .githooks\n[diff \"py\"]\n\ttextconv = python3 conv.py\n",
        )
        .unwrap();
        // The user's own config includes one that names a program of the worktree.
        std::fs::write(home.join(".gitconfig"), "[include]\n\tpath = .gitconfig.d/tools\n").unwrap();
        std::fs::create_dir_all(home.join(".gitconfig.d")).unwrap();
        std::fs::write(home.join(".gitconfig.d/tools"), "[diff \"bin\"]\n\ttextconv = ./tools/bin2txt\n").unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp")).unwrap();
        let read_only = [
            ".githooks",
            "conv.py",
            "tools/bin2txt",
            ".worktrees/feat/tools/fsmon.sh",
            ".pre-commit-config.yaml",
            ".venv/bin/python3",
            "scripts/check-msg.sh",
        ];
        for path in read_only {
            assert!(access.read_only.contains(&repo.join(path)), "{path}: {:?}", access.read_only);
        }
        assert!(access.read_only.contains(&repo.join(".worktrees/feat/.git")), "{:?}", access.read_only);
        assert!(!access.read_only.contains(&repo.join(".team-hooks")), "git does not use it: {:?}", access.read_only);

        // Husky: the stubs in `.husky/_` run the scripts beside them, with `node_modules/.bin`
        // first on PATH (which cannot be protected: the launch says so).
        std::fs::write(repo.join(".git/config"), "[core]\n\thooksPath = .husky/_\n").unwrap();
        std::fs::write(repo.join(".husky/_/h"), "export PATH=\"node_modules/.bin:$PATH\"\nsh -e \"$s\" \"$@\"\n")
            .unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp")).unwrap();
        for path in [".husky/_", ".husky"] {
            assert!(access.read_only.contains(&repo.join(path)), "{path}: {:?}", access.read_only);
        }
        assert!(access.notes.iter().any(|note| note.contains("node_modules/.bin first on PATH")), "{:?}", access.notes);
    }

    #[test]
    fn the_home_is_never_the_workspace() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        // A dotfiles repository in the home: the home is still not a workspace.
        std::fs::create_dir_all(home.join(".git")).unwrap();
        std::fs::create_dir_all(home.join("notes")).unwrap();
        for cwd in [home.clone(), PathBuf::from("/")] {
            let access = write_access(Agent::Pi, &env(&home), &cwd, &[], &home.join("run/tmp")).unwrap();
            assert_eq!(access.workspace, None, "{}", cwd.display());
            assert!(!access.writable.iter().any(|path| home.starts_with(path)), "{:?}", access.writable);
            assert!(access.notes[0].contains("holds your home directory"), "{:?}", access.notes);
            assert!(access.pinned.is_empty(), "the dotfiles repository is not the agent's");
        }
        // Below the home, the directory itself is the workspace (not the home's repository).
        let access = write_access(Agent::Pi, &env(&home), &home.join("notes"), &[], &home.join("run/tmp")).unwrap();
        assert_eq!(access.workspace, Some(home.join("notes")));
        let error = write_access(Agent::Pi, &env(&home), &home.join("notes"), &[home.clone()], &home.join("run/tmp"))
            .unwrap_err();
        assert!(error.to_string().contains("--writable") && error.to_string().contains("hint:"), "{error}");
    }
}
