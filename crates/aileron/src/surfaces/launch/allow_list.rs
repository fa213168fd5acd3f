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

use std::path::{Path, PathBuf};

use super::{Agent, LaunchEnv};

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
}

impl WriteAccess {
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
    if home.starts_with(&workspace) {
        access.notes.push(format!(
            "{} holds your home directory, so it is not the agent's workspace: the agent can write only its own \
             directories and its temp directory\nhint: launch from a project directory, or add one with --writable PATH",
            workspace.display()
        ));
    } else {
        protect_repository(&workspace, &mut access);
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
    // Terminals, /dev/null and shared memory.
    access.writable.push(PathBuf::from("/dev"));
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
        protect_repository(&resolved, &mut access);
        access.writable.push(resolved);
    }
    access.writable.dedup();
    Ok(access)
}

/// The nearest directory from `cwd` up to (not including) `home` that holds `.git`.
fn repository_root(cwd: &Path, home: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .take_while(|dir| *dir != home && !home.starts_with(dir))
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
}

/// A repository at `root`: `.git` pinned, its hooks and config read-only. A `.git` file (a
/// worktree's pointer to its repository) is read-only itself; the repository it names lies
/// outside the workspace and is read-only already, unless also granted.
fn protect_repository(root: &Path, access: &mut WriteAccess) {
    let git = root.join(".git");
    let Ok(metadata) = std::fs::symlink_metadata(&git) else { return };
    if metadata.is_file() {
        access.read_only.push(git);
    } else if metadata.is_dir() {
        let hooks = git.join("hooks");
        // An empty hooks directory is what `git init` makes; it is where a planted hook would go.
        if !hooks.exists() {
            access.to_create.push(hooks.clone());
        }
        access.pinned.push(git.clone());
        access.read_only.extend([hooks, git.join("config")]);
    }
}

fn xdg(env: &LaunchEnv, variable: &str, default: &str) -> PathBuf {
    env.vars
        .get(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .unwrap_or_else(|| env.home_dir.join(default))
}

/// Directories the agent keeps its own configuration, sessions and caches in.
fn agent_directories(agent: Agent, env: &LaunchEnv) -> Vec<PathBuf> {
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
        assert_eq!(access.writable, vec![repo.clone(), home.join(".codex"), temp_dir, PathBuf::from("/dev")]);
        assert!(home.join(".codex").is_dir(), "the agent's own directory is made");
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
