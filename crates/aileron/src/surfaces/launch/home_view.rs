//! What of the user's home a confined agent sees (docs/decisions/0013-launch-containment.md, "The
//! home as a read list"): its workspace and its own directories where they lie in the home, what
//! the user's tools need to run (the toolchains on `PATH` and where their links lead, the
//! directories their variables name, the git config), what `--expose` names, and nothing else.
//! `confine` covers the home with an empty read-only tmpfs and puts each of these back.
//!
//! The list of credential stores (`network::credential_stores`) stays, for stores inside what is
//! kept (`~/.cargo/credentials.toml`) and outside the home (a Kerberos ticket in `/tmp`); what it
//! misses in the rest of the home (a new CLI's token file, another project's `.env`, notes) is not
//! there to read.

use std::path::{Component, Path, PathBuf};

use super::LaunchEnv;

/// What the agent sees of the home: its canonical path, the paths in it kept (canonical, none
/// inside another, each there at launch, none reached through a link an agent could have made),
/// the links on the way to them to make again at their place (a link's path and what it says),
/// and how many paths were left out past [`MAX_KEPT`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeView {
    pub home: PathBuf,
    pub kept: Vec<PathBuf>,
    pub links: Vec<(PathBuf, PathBuf)>,
    pub left_out: usize,
}

/// Entries of a home that the user's tools read to run (kept when they are there): the git
/// config, the toolchains' own directories, the terminal descriptions. Shell start-up files are
/// not among them (a token exported there is the user's shell's, not the agent's, whose
/// environment the launch passes on with the credential variables withheld).
pub const READ_LIST: [&str; 66] = [
    ".gitconfig",
    ".config/git",
    ".gitignore",
    ".gitignore_global",
    ".gitattributes",
    ".gitmessage",
    ".cargo",
    ".rustup",
    ".nvm",
    ".volta",
    ".fnm",
    ".local/share/fnm",
    ".bun",
    ".deno",
    ".npm-global",
    ".local/share/pnpm",
    ".pyenv",
    ".rbenv",
    ".rvm",
    ".sdkman",
    ".asdf",
    ".local/share/mise",
    ".config/mise",
    ".goenv",
    // GOPATH's programs and module cache, not its `src` (another project's checkouts).
    "go/bin",
    "go/pkg",
    ".local/bin",
    ".local/lib",
    ".m2/repository",
    ".terminfo",
    ".inputrc",
    ".editorconfig",
    // What a project's tools run from (the seventeenth re-attack): uv's interpreters and tools,
    // other tools' virtual environments, browsers for tests, pre-commit's environments.
    ".local/share/uv",
    ".local/share/virtualenvs",
    ".local/share/hatch",
    ".cache/pypoetry/virtualenvs",
    ".cache/pre-commit",
    ".cache/ms-playwright",
    ".cache/puppeteer",
    ".cache/Cypress",
    // Version managers' global choices.
    ".tool-versions",
    ".ruby-version",
    ".python-version",
    ".node-version",
    ".nvmrc",
    ".conda/envs",
    // Tools whose programs on `PATH` need the directory above them (a dot-directory is not kept
    // for being one: the twenty-fifth re-attack).
    ".elan",
    ".juliaup",
    ".rye",
    ".wasmtime",
    ".foundry",
    ".krew",
    ".fzf",
    ".ghcup",
    ".dotnet",
    ".nimble",
    ".opam",
    ".yarn",
    ".tfenv",
    ".nodenv",
    ".jenv",
    ".pixi",
    ".proto",
    ".moon",
    ".poetry",
    ".swiftly",
];

/// Variables naming a tool's own directories (each a path, or a list of them), read by the launch
/// and kept when they lie in the home.
pub const TOOL_VARIABLES: [&str; 26] = [
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "NVM_DIR",
    "VOLTA_HOME",
    "FNM_DIR",
    "BUN_INSTALL",
    "DENO_INSTALL",
    "DENO_DIR",
    "PNPM_HOME",
    "PYENV_ROOT",
    "RBENV_ROOT",
    "SDKMAN_DIR",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "JAVA_HOME",
    "GEM_HOME",
    "GEM_PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "NPM_CONFIG_PREFIX",
    "npm_config_prefix",
    "TERMINFO",
];

/// Directories of a home that hold many programs' files: what is kept is a program's own one
/// below them, never all of them.
const SHARED: [&str; 5] = [".local", ".local/share", ".local/state", ".config", ".cache"];

/// Names of a directory of programs whose parent is the tool's own (`~/.cargo/bin`,
/// `~/.pyenv/shims`): the tool's files live beside it.
const PROGRAM_DIRECTORIES: [&str; 4] = ["bin", "sbin", "shims", "condabin"];

/// Entries looked at in one `PATH` directory for links leading elsewhere in the home.
const MAX_LINKS_PER_DIRECTORY: usize = 4096;

/// Paths kept at most (each is a mount in the agent's namespace).
pub const MAX_KEPT: usize = 512;

/// The view for a launch: `named` are kept (the writable paths, `--expose`, the user's git files,
/// the launch's own directory: never left out), `programs` with their tool's directory (the agent
/// and `aileron-mcp`), then the read list, the tools' variables and `PATH`. A path is resolved link
/// by link as the kernel would, and a link inside `untrusted` (what an agent may write or could
/// have written: this launch's writable paths, every agent's own directories, the workspaces of
/// earlier launches) is never followed: a path through one is left out, and a `PATH` directory
/// inside one is not searched for links (the seventeenth re-attack: links an agent planted there
/// chose what the next launch kept, `/` among them). `None` when the home is not to be covered: no
/// home, the root directory, or a named path is the home itself (`--expose ~`).
pub fn home_view(
    env: &LaunchEnv,
    named: &[PathBuf],
    configured: &[PathBuf],
    programs: &[PathBuf],
    untrusted: &[PathBuf],
) -> Option<HomeView> {
    let lexical = super::repositories::without_dot_dots(&env.home_dir);
    let home = std::fs::canonicalize(&lexical).ok().filter(|home| home.parent().is_some() && home.is_dir())?;
    let mut view = Resolver { home: home.clone(), untrusted, ways: Vec::new(), refused: None };
    let mut first: Vec<PathBuf> = Vec::new();
    for path in named {
        let absolute = if path.is_absolute() { path.clone() } else { std::env::current_dir().ok()?.join(path) };
        match view.resolve(&absolute) {
            Some(resolved) if resolved == home => return None,
            Some(resolved) => first.extend(view.relative(&resolved)),
            None => {}
        }
    }
    let mut rest: Vec<PathBuf> = Vec::new();
    for program in programs {
        if let Some(file) = view.resolve(program).and_then(|resolved| view.relative(&resolved)) {
            let dir = program_directory(&home, &file);
            rest.push(if too_wide(&home, &dir) { file } else { dir });
        }
    }
    // What the user's git config names (its includes, an excludes file, a hooks directory), and
    // what the tools' variables name: never the home, nor a directory too wide to be a tool's
    // (`core.hooksPath = ~/`, a `GEM_PATH` of `~/code` a workspace's `.env` set: the nineteenth
    // re-attack).
    let listed = |name: &str| env.var(name).map(|value| std::env::split_paths(value).collect::<Vec<_>>());
    // GOPATH's programs and module cache, not its `src` (another project's checkouts: the
    // twenty-third re-attack read them under `GOPATH=~/dev/go`), as the read list keeps `go`.
    let variables = TOOL_VARIABLES
        .iter()
        .filter_map(|name| Some((*name, listed(name)?)))
        .flat_map(|(name, dirs)| match name {
            "GOPATH" => dirs.into_iter().flat_map(|dir| [dir.join("bin"), dir.join("pkg")]).collect(),
            _ => dirs,
        })
        .filter(|dir| dir.is_absolute());
    for path in configured.iter().cloned().chain(variables) {
        if let Some(relative) = view.resolve(&path).and_then(|resolved| view.relative(&resolved))
            && !too_wide(&home, &relative)
        {
            rest.push(relative);
        }
    }
    for relative in READ_LIST {
        if let Some(resolved) = view.resolve(&lexical.join(relative)) {
            rest.extend(view.relative(&resolved));
        }
    }
    for entry in listed(super::PATH).unwrap_or_default().into_iter().filter(|dir| dir.is_absolute()) {
        let Some(resolved) = view.resolve(&entry) else { continue };
        let Some(relative) = view.relative(&resolved) else { continue };
        let tool = tool_directory(&home, &relative);
        if !too_wide(&home, &tool) {
            rest.push(tool);
        }
        if view.is_untrusted(&resolved) {
            continue;
        }
        // Where its links lead in the home (`~/.local/bin/claude` to `~/.local/share/claude/…`,
        // `~/.npm-global/bin/codex` to its package): the program is nothing without it.
        let Ok(entries) = std::fs::read_dir(&resolved) else { continue };
        for link in entries.flatten().take(MAX_LINKS_PER_DIRECTORY) {
            if !link.file_type().is_ok_and(|kind| kind.is_symlink()) {
                continue;
            }
            let Some(target) = view.resolve(&link.path()) else { continue };
            let Some(relative) = view.relative(&target) else { continue };
            // A link to a directory keeps that directory, never a whole top-level or shared one
            // (a link to `~/.config/git` kept all of `~/.config`).
            if target.is_dir() {
                if relative.components().count() > 1 && !is_shared(&relative) {
                    rest.push(relative);
                }
            } else {
                // A program alone in a folder of the user's (`~/dotfiles/x`, `~/Dropbox/x`): the file.
                let dir = program_directory(&home, &relative);
                rest.push(if too_wide(&home, &dir) { relative } else { dir });
            }
        }
    }
    let exists = |relative: &PathBuf| {
        !relative.as_os_str().is_empty()
            && relative.components().all(|part| matches!(part, Component::Normal(_)))
            && std::fs::symlink_metadata(home.join(relative)).is_ok()
    };
    first.retain(exists);
    rest.retain(exists);
    // The named paths are never left out (nor a path holding one); the rest up to the limit.
    let mut all: Vec<(PathBuf, bool)> =
        first.into_iter().map(|path| (path, true)).chain(rest.into_iter().map(|path| (path, false))).collect();
    all.sort();
    let mut kept: Vec<(PathBuf, bool)> = Vec::new();
    for (relative, named) in all {
        match kept.iter_mut().find(|(outer, _)| relative.starts_with(outer)) {
            Some((_, outer_named)) => *outer_named |= named,
            None => kept.push((relative, named)),
        }
    }
    let named_count = kept.iter().filter(|(_, named)| *named).count();
    let mut others = 0;
    let mut left_out = 0;
    kept.retain(|(_, named)| {
        if *named {
            return true;
        }
        others += 1;
        let within = named_count + others <= MAX_KEPT;
        left_out += usize::from(!within);
        within
    });
    let kept: Vec<PathBuf> = kept.into_iter().map(|(relative, _)| relative).collect();
    let kept: Vec<PathBuf> = kept.iter().map(|relative| home.join(relative)).collect();
    // The links on the way to what is kept, but those inside a kept path (there in its clone).
    let inside_kept = |path: &Path| kept.iter().any(|kept| path.starts_with(kept));
    let mut links: Vec<(PathBuf, PathBuf)> = view
        .ways
        .into_iter()
        .filter(|(resolved, _)| inside_kept(resolved))
        .flat_map(|(_, links)| links)
        .filter(|(link, _)| !inside_kept(link))
        .collect();
    links.sort();
    links.dedup();
    Some(HomeView { home, kept, links, left_out })
}

/// `path` (absolute) resolved link by link as the kernel resolves it, following no link that lies
/// inside `untrusted`: `Err(Some(link))` names the first such link on its way, `Err(None)` says a
/// part of it is missing or more than 40 links lead there.
pub fn resolve_following_trusted_links(path: &Path, untrusted: &[PathBuf]) -> Result<PathBuf, Option<PathBuf>> {
    let mut resolver = Resolver { home: PathBuf::new(), untrusted, ways: Vec::new(), refused: None };
    resolver.resolve(path).ok_or(resolver.refused)
}

/// Resolves paths link by link, noting each resolved path with the links in the home on its way.
struct Resolver<'a> {
    home: PathBuf,
    untrusted: &'a [PathBuf],
    ways: Vec<(PathBuf, Vec<(PathBuf, PathBuf)>)>,
    /// The link inside an untrusted path a resolution stopped at, if one did.
    refused: Option<PathBuf>,
}

impl Resolver<'_> {
    /// `path` with every link on its way followed as the kernel follows them, or `None` when a
    /// part of it is missing, a link lies inside an untrusted path, or there are more than 40.
    fn resolve(&mut self, path: &Path) -> Option<PathBuf> {
        let mut pending: std::collections::VecDeque<PathBuf> =
            path.components().map(|part| PathBuf::from(part.as_os_str())).collect();
        let mut current = PathBuf::from("/");
        let mut followed = Vec::new();
        while let Some(part) = pending.pop_front() {
            match Path::new(&part).components().next() {
                Some(Component::RootDir) => current = PathBuf::from("/"),
                Some(Component::ParentDir) => {
                    current.pop();
                }
                Some(Component::Normal(name)) => {
                    let next = current.join(name);
                    let metadata = std::fs::symlink_metadata(&next).ok()?;
                    if !metadata.is_symlink() {
                        current = next;
                        continue;
                    }
                    if self.is_untrusted(&next) {
                        self.refused = Some(next);
                        return None;
                    }
                    if followed.len() >= 40 {
                        return None;
                    }
                    let said = std::fs::read_link(&next).ok()?;
                    followed.push((next, said.clone()));
                    let mut parts: Vec<PathBuf> =
                        said.components().map(|part| PathBuf::from(part.as_os_str())).collect();
                    parts.extend(pending.drain(..));
                    pending = parts.into();
                }
                _ => {}
            }
        }
        let links = followed.into_iter().filter(|(link, _)| link.starts_with(&self.home)).collect();
        self.ways.push((current.clone(), links));
        Some(current)
    }

    fn is_untrusted(&self, path: &Path) -> bool {
        self.untrusted.iter().any(|root| path.starts_with(root))
    }

    /// A resolved path's place in the home, if it is in it.
    fn relative(&self, resolved: &Path) -> Option<PathBuf> {
        resolved.strip_prefix(&self.home).ok().map(Path::to_path_buf)
    }
}

/// The tool's own directory for a directory of programs: the directory above a `bin` when that is
/// an install prefix (`~/miniconda3`, `~/flutter`, a JDK, a node of nvm's: it holds `lib`,
/// `share`, …, and is no repository) holding no shell start-up names, else the directory itself
/// (`~/Dropbox/bin` keeps only itself, not the whole `~/Dropbox`; `.local/bin` is its own). A
/// dot-directory is no longer a tool's for being one: `~/.dotfiles/bin` kept all of `~/.dotfiles`,
/// its shell files under any name (the twenty-third and twenty-fifth re-attacks); the tools'
/// own dot-directories are on the read list.
fn tool_directory(home: &Path, dir: &Path) -> PathBuf {
    let is_program_directory = dir.file_name().is_some_and(|name| PROGRAM_DIRECTORIES.iter().any(|dir| name == *dir));
    match dir.parent() {
        Some(parent)
            if is_program_directory
                && !parent.as_os_str().is_empty()
                && !is_shared(parent)
                && is_prefix(&home.join(parent))
                && !holds_startup_files(&home.join(parent)) =>
        {
            parent.to_path_buf()
        }
        _ => dir.to_path_buf(),
    }
}

/// Names (with or without their dot, with or without a `.symlink`, `.local`, `.sh`, `.zsh` or
/// `.bash` ending) that make a directory the user's shell configuration, not a tool's: a
/// dotfiles repository with its own `bin` on `PATH` (`~/.dotfiles/bin`) kept whole showed the agent
/// the tokens its `bashrc` exports (the twenty-third re-attack), and under other names or a level
/// down (`runcom/.bashrc`, `system/.env`, `.extra`, `zshrc.symlink`: the twenty-fifth). Only its
/// `bin` is kept.
const STARTUP_NAMES: [&str; 22] = [
    "bashrc",
    "bash_profile",
    "bash_aliases",
    "profile",
    "zshrc",
    "zshenv",
    "zprofile",
    "zlogin",
    "zsh",
    "bash",
    "fish",
    "gitconfig",
    "vimrc",
    "tmux.conf",
    "inputrc",
    "aliases",
    "exports",
    "functions",
    "extra",
    "secrets",
    "runcom",
    "netrc",
];

/// Whether `dir` holds, three levels down at most (2,048 entries looked at), one of the
/// [`STARTUP_NAMES`] or an `.env` file.
fn holds_startup_files(dir: &Path) -> bool {
    let mut pending = vec![(dir.to_path_buf(), 0)];
    let mut budget = 2048usize;
    while let Some((dir, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if budget == 0 {
                return true;
            }
            budget -= 1;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let bare = name.trim_start_matches('.');
            let bare = [".symlink", ".local", ".sh", ".zsh", ".bash"]
                .iter()
                .fold(bare, |bare, ending| bare.strip_suffix(ending).unwrap_or(bare));
            if STARTUP_NAMES.contains(&bare) || name.starts_with(".env") {
                return true;
            }
            if depth < 2 && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push((entry.path(), depth + 1));
            }
        }
    }
    false
}

/// Whether `dir` is an install prefix (programs in `bin` beside what they run from), not a folder
/// of the user's work: no repository.
fn is_prefix(dir: &Path) -> bool {
    const BESIDE_BIN: [&str; 7] = ["lib", "lib64", "libexec", "share", "include", "conda-meta", "packages"];
    dir.join("bin").is_dir() && BESIDE_BIN.iter().any(|beside| dir.join(beside).is_dir()) && !dir.join(".git").exists()
}

/// Whether a directory named by a variable, a `PATH` entry or a git setting is too wide to keep:
/// the home, a shared one (`.config`), or a top-level one that is neither a dot-directory, a
/// directory of programs (`~/bin`) nor an install prefix (`~/code`, `~/Documents`).
fn too_wide(home: &Path, relative: &Path) -> bool {
    if relative.as_os_str().is_empty() || is_shared(relative) {
        return true;
    }
    let mut parts = relative.components();
    let (Some(first), None) = (parts.next(), parts.next()) else {
        return relative.as_os_str().is_empty() || is_shared(relative);
    };
    let name = first.as_os_str();
    let full = home.join(relative);
    full.is_dir()
        && !name.to_string_lossy().starts_with('.')
        && !PROGRAM_DIRECTORIES.iter().any(|dir| name == *dir)
        && !is_prefix(&full)
}

/// What a program file needs kept: the `node_modules` it is in (its package and those installed
/// beside it: a global install hoists its dependencies there), else its directory's tool
/// directory.
fn program_directory(home: &Path, file: &Path) -> PathBuf {
    let parts: Vec<Component> = file.components().collect();
    if let Some(at) = parts.iter().position(|part| part.as_os_str() == "node_modules") {
        return parts[..=at].iter().collect();
    }
    tool_directory(home, file.parent().unwrap_or(file))
}

/// Whether `path` (canonical) is one of the home's directories that hold many programs' files
/// (`~/.config`, `~/.local/share`, …): no agent's to write whole.
pub fn is_shared_directory(home: &Path, path: &Path) -> bool {
    path.strip_prefix(home).is_ok_and(is_shared)
}

fn is_shared(dir: &Path) -> bool {
    SHARED.iter().any(|shared| dir == Path::new(shared))
}

/// The file in the Aileron home (out of every agent's sight) where each launch records the roots it
/// lets its agent write: a later launch follows no link inside them.
pub const RECORDED_ROOTS: &str = "launch-roots";

/// The writable roots earlier launches recorded (a line each, its bytes in hex: any path, a line
/// break in it too).
pub fn recorded_roots(file: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    let Ok(text) = std::fs::read_to_string(file) else { return Vec::new() };
    text.lines()
        .filter_map(|line| hex::decode(line).ok())
        .map(|bytes| PathBuf::from(std::ffi::OsString::from_vec(bytes)))
        .filter(|path| path.is_absolute())
        .collect()
}

/// Roots recorded at most (the oldest go first).
const MAX_RECORDED_ROOTS: usize = 4096;

/// Adds `roots` to the record (atomically, under a lock: launches started together each add
/// theirs — the nineteenth re-attack lost 8 of 12; the newest last).
pub fn record_roots(file: &Path, roots: &[PathBuf]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let lock =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(file.with_extension("lock"))?;
    lock.lock()?;
    let mut all = recorded_roots(file);
    all.retain(|known| !roots.contains(known));
    all.extend(roots.iter().cloned());
    // Past the limit, roots gone from disk go first, then the oldest: forgetting one that is
    // still there trusts again the links an agent left in it (the twenty-third re-attack).
    if all.len() > MAX_RECORDED_ROOTS {
        all.retain(|root| roots.contains(root) || std::fs::symlink_metadata(root).is_ok());
    }
    let over = all.len().saturating_sub(MAX_RECORDED_ROOTS);
    all.drain(..over);
    let mut text = String::new();
    for root in &all {
        text.push_str(&hex::encode(root.as_os_str().as_bytes()));
        text.push('\n');
    }
    crate::platform::home::write_atomic(file, text.as_bytes(), 0o600)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::os::unix::fs::symlink;

    use super::*;

    fn env_of(home: &Path, vars: &[(&str, String)]) -> LaunchEnv {
        LaunchEnv {
            vars: vars.iter().map(|(name, value)| (name.to_string(), value.clone())).collect::<HashMap<_, _>>(),
            home_dir: home.to_path_buf(),
            launch_dir: PathBuf::from("/run/user/1000/aileron/launch"),
            account_home: None,
        }
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }

    fn kept(view: &HomeView) -> Vec<String> {
        view.kept.iter().map(|path| path.strip_prefix(&view.home).unwrap().display().to_string()).collect()
    }

    #[test]
    fn the_agent_sees_the_read_list_its_tools_and_what_it_was_given_and_nothing_else() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("u");
        for file in [
            ".gitconfig",
            ".cargo/bin/cargo",
            ".cargo/credentials.toml",
            ".local/bin/black",
            ".local/share/claude/versions/2.0.1",
            ".local/share/other/token",
            "pkgs/lib/node_modules/@openai/codex/bin/codex.js",
            "pkgs/lib/node_modules/other/index.js",
            "tools/x/bin/x",
            "src/project/README",
            "src/other/.env",
            "notes/secret.txt",
            ".config/newtool/token.json",
            ".bashrc",
            "sdk/current/bin/java",
            "dotfiles/claude/settings.json",
            "Dropbox/bin/sync",
            "Dropbox/taxes.txt",
        ] {
            touch(&home.join(file));
        }
        symlink(home.join(".local/share/claude/versions/2.0.1"), home.join(".local/bin/claude")).unwrap();
        std::fs::create_dir_all(home.join("bin")).unwrap();
        symlink("../pkgs/lib/node_modules/@openai/codex/bin/codex.js", home.join("bin/codex")).unwrap();
        // The agent's own directory kept in a dotfiles repository, by a link of the user's.
        symlink("dotfiles/claude", home.join(".claude")).unwrap();
        let path = [".cargo/bin", ".local/bin", "bin", "tools/x/bin", "Dropbox/bin"]
            .map(|dir| home.join(dir).display().to_string());
        let env = env_of(
            &home,
            &[
                ("PATH", format!("{}:/usr/bin:relative", path.join(":"))),
                ("JAVA_HOME", format!("{}/sdk/current", home.display())),
            ],
        );
        let named = [home.join("src/project"), home.join(".claude"), PathBuf::from("/tmp/elsewhere")];
        let view = home_view(&env, &named, &[], &[home.join("bin/codex")], &[]).unwrap();
        assert_eq!(view.home, home);
        assert_eq!(
            kept(&view),
            [
                ".cargo",
                ".gitconfig",
                ".local/bin",
                ".local/share/claude/versions",
                "Dropbox/bin",
                "bin",
                "dotfiles/claude",
                "pkgs/lib/node_modules",
                "sdk/current",
                "src/project",
                "tools/x/bin",
            ]
        );
        // The link the agent's directory is reached by is made again at its place.
        assert_eq!(view.links, [(home.join(".claude"), PathBuf::from("dotfiles/claude"))]);
        assert_eq!(view.left_out, 0);
        // `--expose ~` shows the agent the whole home: nothing is covered.
        assert_eq!(home_view(&env, &[home.clone()], &[], &[], &[]), None);
        assert_eq!(home_view(&env_of(Path::new("/"), &[]), &[], &[], &[], &[]), None, "no home to cover");
    }

    /// The seventeenth re-attack: links an agent could have made (in its workspace, in its own
    /// directories, in a workspace of an earlier launch) chose what the next launch kept — all of
    /// `~/code` and `~/.config`, or `/` itself with the Aileron home unmasked in it. A link inside
    /// what an agent may write is never followed; a link to a directory keeps no top-level or
    /// shared one; a path that resolves to the home keeps nothing.
    #[test]
    fn no_link_an_agent_could_have_made_decides_what_is_kept() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("u");
        for file in [
            "code/a/.venv/bin/python",
            "code/a/.venv/lib/python3.12/site-packages/x.py",
            "code/b/README",
            "notes/secret.txt",
            ".config/newtool/token",
        ] {
            touch(&home.join(file));
        }
        std::fs::create_dir_all(home.join("x")).unwrap();
        // Planted by an agent in its workspace `~/code/a`: a venv that is now a link, and links in
        // the venv's `bin` (on PATH) to a top-level directory and into `.config`.
        let venv_bin = home.join("code/a/.venv/bin");
        symlink(home.join("code/b"), venv_bin.join("zz-ws")).unwrap();
        symlink(home.join(".config/newtool"), venv_bin.join("zz-cfg")).unwrap();
        symlink(home.join("notes/secret.txt"), venv_bin.join("zz-file")).unwrap();
        std::fs::create_dir_all(home.join("code/c")).unwrap();
        symlink("/", home.join("code/c/.venv")).unwrap();
        // The user's own odd link: a tool variable through it reaches the home itself.
        symlink("..", home.join("x/up")).unwrap();
        let env = env_of(
            &home,
            &[
                ("PATH", format!("{}:{}/code/c/.venv/bin", venv_bin.display(), home.display())),
                ("VIRTUAL_ENV", format!("{}/code/c/.venv", home.display())),
                ("GEM_PATH", format!("{}/x/up", home.display())),
            ],
        );
        let untrusted = [home.join("code/a"), home.join("code/c")];
        let view = home_view(&env, &[home.join("code/b")], &[], &[], &untrusted).unwrap();
        assert_eq!(kept(&view), ["code/a/.venv", "code/b"], "only the named path and the PATH entry's tool");
        assert!(view.links.is_empty(), "{:?}", view.links);
        // The same links, had no agent been able to make them: followed, but a link to a directory
        // keeps it alone, never all of `.config` (nor the home: `x/up`).
        let view = home_view(&env, &[home.join("code/b")], &[], &[], &[]).unwrap();
        let seen = kept(&view);
        assert!(seen.contains(&".config/newtool".to_string()) && !seen.contains(&".config".to_string()), "{seen:?}");
        assert!(!seen.iter().any(|path| path == "x" || path.starts_with("x/")), "{seen:?}");
    }

    /// The nineteenth re-attack: what the user's git config names (`core.hooksPath = ~/`) turned the
    /// cover off, and a variable a workspace's `.env` set (`GEM_PATH=~/code:~/.config`) kept other
    /// projects and every tool's config. Neither names the home or a directory too wide to be a
    /// tool's; an install prefix (`~/miniconda3`, `~/flutter`) is kept whole from its `bin`.
    #[test]
    fn no_setting_keeps_the_home_or_a_directory_too_wide_to_be_a_tools() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("u");
        for file in [
            "code/other/.env",
            ".config/newtool/token",
            "notes/secret.txt",
            "miniconda3/condabin/conda",
            "miniconda3/bin/python",
            "miniconda3/lib/python3.11/os.py",
            ".githooks/pre-commit",
            "proj/README",
        ] {
            touch(&home.join(file));
        }
        let env = env_of(
            &home,
            &[
                ("GEM_PATH", format!("{0}/code:{0}/.config:{0}", home.display())),
                ("PATH", format!("{}/miniconda3/condabin:{}/code", home.display(), home.display())),
            ],
        );
        let configured = [home.clone(), home.join("notes"), home.join(".githooks")];
        let view = home_view(&env, &[home.join("proj")], &configured, &[], &[]).expect("the home is still covered");
        assert_eq!(kept(&view), [".githooks", "miniconda3", "proj"]);
    }

    /// Past [`MAX_KEPT`] paths the toolchains' are left out and counted, never the named ones.
    #[test]
    fn the_named_paths_are_never_left_out() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("u");
        touch(&home.join("zz/project/README"));
        let mut path = Vec::new();
        for n in 0..MAX_KEPT + 8 {
            touch(&home.join(format!("t{n:04}/bin/x")));
            path.push(format!("{}/t{n:04}/bin", home.display()));
        }
        let env = env_of(&home, &[("PATH", path.join(":"))]);
        let view = home_view(&env, &[home.join("zz/project")], &[], &[], &[]).unwrap();
        assert!(kept(&view).contains(&"zz/project".to_string()));
        assert_eq!(view.kept.len(), MAX_KEPT);
        assert_eq!(view.left_out, 9);
    }

    #[test]
    fn a_tools_directory_is_the_one_above_its_programs_when_it_is_a_tools_own() {
        let home = tempfile::tempdir().unwrap();
        for dir in [
            ".cargo/bin",
            ".nvm/versions/node/v22.1.0/bin",
            ".nvm/versions/node/v22.1.0/lib",
            "miniconda3/bin",
            "miniconda3/lib",
        ] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        for (dir, tool) in [
            (".nvm/versions/node/v22.1.0/bin", ".nvm/versions/node/v22.1.0"),
            ("miniconda3/bin", "miniconda3"),
            // Kept by the read list, not for being a dot-directory.
            (".cargo/bin", ".cargo/bin"),
        ] {
            assert_eq!(tool_directory(home.path(), Path::new(dir)), Path::new(tool), "{dir}");
        }
        for (dir, tool) in [
            (".local/bin", ".local/bin"),
            ("bin", "bin"),
            ("Dropbox/bin", "Dropbox/bin"),
            ("dotfiles/bin", "dotfiles/bin"),
            (".local/share/pnpm", ".local/share/pnpm"),
        ] {
            assert_eq!(tool_directory(Path::new("/nonexistent"), Path::new(dir)), Path::new(tool), "{dir}");
        }
        for (file, kept) in [
            (".local/lib/node_modules/pkg/dist/cli.js", ".local/lib/node_modules"),
            (".config/yarn/global/node_modules/@scope/pkg/cli.js", ".config/yarn/global/node_modules"),
            // Kept whole by the read list (`.local/share/uv`); alone, an install prefix only.
            (".local/share/uv/tools/ruff/bin/ruff", ".local/share/uv/tools/ruff/bin"),
            (".local/share/claude/versions/2.0.1", ".local/share/claude/versions"),
            ("dotfiles/bin/tmux-sessionizer", "dotfiles/bin"),
        ] {
            assert_eq!(program_directory(Path::new("/nonexistent"), Path::new(file)), Path::new(kept), "{file}");
        }
    }

    /// The twenty-third re-attack: `GOPATH=~/dev/go` kept its `src`, other projects' checkouts.
    #[test]
    fn a_gopath_keeps_its_programs_and_modules_not_its_checkouts() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("u");
        for file in ["dev/go/bin/gopls", "dev/go/pkg/mod/x", "dev/go/src/other/.env"] {
            touch(&home.join(file));
        }
        let env = env_of(&home, &[("GOPATH", home.join("dev/go").display().to_string())]);
        let view = home_view(&env, &[], &[], &[], &[]).unwrap();
        assert_eq!(kept(&view), ["dev/go/bin", "dev/go/pkg"]);
    }

    /// The twenty-third re-attack: `~/.dotfiles/bin` on `PATH` kept all of `~/.dotfiles`, and the
    /// agent read the token its `bashrc` exports. A tool cloned with git keeps its directory.
    #[test]
    fn a_dotfiles_directory_keeps_only_its_bin() {
        let home = tempfile::tempdir().unwrap();
        for file in [".dotfiles/bin/mytool", ".dotfiles/bashrc", ".tfenv/bin/tfenv", ".tfenv/libexec/tfenv-install"] {
            touch(&home.path().join(file));
        }
        std::fs::create_dir_all(home.path().join(".tfenv/.git")).unwrap();
        assert_eq!(tool_directory(home.path(), Path::new(".dotfiles/bin")), Path::new(".dotfiles/bin"));
        // A tool cloned with git keeps its `bin` here, its directory by the read list.
        assert_eq!(tool_directory(home.path(), Path::new(".tfenv/bin")), Path::new(".tfenv/bin"));
        // Shell files one level down or under other names (the twenty-fifth re-attack).
        for file in [".dots/bin/x", ".dots/runcom/.bashrc", ".dots/lib/y"] {
            touch(&home.path().join(file));
        }
        assert_eq!(tool_directory(home.path(), Path::new(".dots/bin")), Path::new(".dots/bin"));
        assert_eq!(program_directory(home.path(), Path::new(".dotfiles/bin/mytool")), Path::new(".dotfiles/bin"));
    }

    /// The twenty-third re-attack: past 4,096 roots the oldest were forgotten, still there, and
    /// the links an agent left in them trusted again. Roots gone from disk go first.
    #[test]
    fn a_root_still_there_outlives_those_gone() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join(RECORDED_ROOTS);
        let there = temp.path().to_path_buf();
        // The oldest still there, then as many of other launches' as the record holds, gone since.
        let mut lines = hex::encode(there.as_os_str().as_encoded_bytes()) + "\n";
        for n in 1..MAX_RECORDED_ROOTS {
            lines += &(hex::encode(format!("/gone/{n}")) + "\n");
        }
        std::fs::write(&file, lines).unwrap();
        record_roots(&file, &[PathBuf::from("/gone/new")]).unwrap();
        let recorded = recorded_roots(&file);
        assert!(recorded.contains(&there) && recorded.contains(&PathBuf::from("/gone/new")));
        assert!(recorded.len() <= MAX_RECORDED_ROOTS);
    }

    #[test]
    fn the_roots_earlier_launches_granted_are_recorded() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join(RECORDED_ROOTS);
        assert!(recorded_roots(&file).is_empty());
        record_roots(&file, &[PathBuf::from("/h/code/a"), PathBuf::from("/h/.claude")]).unwrap();
        record_roots(&file, &[PathBuf::from("/h/code/b"), PathBuf::from("/h/.claude")]).unwrap();
        assert_eq!(recorded_roots(&file), ["/h/code/a", "/h/code/b", "/h/.claude"].map(PathBuf::from));
        // Any path, a line break in its name too; and launches at once each add theirs.
        record_roots(&file, &[PathBuf::from("/h/odd\nname")]).unwrap();
        assert!(recorded_roots(&file).contains(&PathBuf::from("/h/odd\nname")));
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let file = file.clone();
                std::thread::spawn(move || record_roots(&file, &[PathBuf::from(format!("/h/p{n}"))]).unwrap())
            })
            .collect();
        threads.into_iter().for_each(|thread| thread.join().unwrap());
        let recorded = recorded_roots(&file);
        assert!((0..8).all(|n| recorded.contains(&PathBuf::from(format!("/h/p{n}")))), "{recorded:?}");
    }
}
