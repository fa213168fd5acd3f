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

/// What the agent sees of the home: its canonical path and the paths in it kept (absolute, none
/// inside another, each there at launch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeView {
    pub home: PathBuf,
    pub kept: Vec<PathBuf>,
}

/// Entries of a home that the user's tools read to run (kept when they are there): the git
/// config, the toolchains' own directories, the terminal descriptions. Shell start-up files are
/// not among them (a token exported there is the user's shell's, not the agent's, whose
/// environment the launch passes on with the credential variables withheld).
pub const READ_LIST: [&str; 31] = [
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
    ".goenv",
    "go",
    ".local/bin",
    ".local/lib",
    ".m2/repository",
    ".terminfo",
    ".inputrc",
    ".editorconfig",
    ".config/mise",
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
const PROGRAM_DIRECTORIES: [&str; 3] = ["bin", "sbin", "shims"];

/// Entries looked at in one `PATH` directory for links leading elsewhere in the home.
const MAX_LINKS_PER_DIRECTORY: usize = 4096;

/// Paths kept at most (each is a mount in the agent's namespace).
pub const MAX_KEPT: usize = 512;

/// The view for a launch: `named` are kept as they are (the writable paths, `--expose`, the
/// launch's own directory), `programs` with their tool's directory (the agent and `aileron-mcp`).
/// `None` when the home is not to be covered: no home, the root directory, or one of `named` is
/// the home itself (`--expose ~`: the user shows the agent all of it).
pub fn home_view(env: &LaunchEnv, named: &[PathBuf], programs: &[PathBuf]) -> Option<HomeView> {
    let lexical = super::repositories::without_dot_dots(&env.home_dir);
    let home = std::fs::canonicalize(&lexical).ok().filter(|home| home.parent().is_some() && home.is_dir())?;
    let within = |path: &Path| -> Option<PathBuf> {
        let path = super::repositories::without_dot_dots(path);
        path.strip_prefix(&lexical).or_else(|_| path.strip_prefix(&home)).ok().map(Path::to_path_buf)
    };
    let mut kept: Vec<PathBuf> = READ_LIST.iter().map(PathBuf::from).collect();
    for path in named {
        let relative = within(path).or_else(|| within(&std::fs::canonicalize(path).ok()?));
        match relative {
            Some(relative) if relative.as_os_str().is_empty() => return None,
            Some(relative) => kept.push(relative),
            None => {}
        }
    }
    let listed = |name: &str| env.var(name).map(|value| std::env::split_paths(value).collect::<Vec<_>>());
    for dir in TOOL_VARIABLES.iter().filter_map(|name| listed(name)).flatten().filter(|dir| dir.is_absolute()) {
        kept.extend(within(&dir));
    }
    for entry in listed(super::PATH).unwrap_or_default().into_iter().filter(|dir| dir.is_absolute()) {
        let Some(relative) = within(&entry) else { continue };
        kept.push(tool_directory(&relative));
        // Where its links lead in the home (`~/.local/bin/claude` to `~/.local/share/claude/…`,
        // `~/.npm-global/bin/codex` to its package): the program is nothing without it.
        let Ok(entries) = std::fs::read_dir(&entry) else { continue };
        for link in entries.flatten().take(MAX_LINKS_PER_DIRECTORY) {
            if link.file_type().is_ok_and(|kind| kind.is_symlink())
                && let Ok(target) = std::fs::canonicalize(link.path())
            {
                kept.extend(within(&target).map(|target| program_directory(&target)));
            }
        }
    }
    for program in programs {
        kept.extend(within(program).map(|program| program_directory(&program)));
        if let Ok(target) = std::fs::canonicalize(program) {
            kept.extend(within(&target).map(|target| program_directory(&target)));
        }
    }
    kept.retain(|relative| {
        !relative.as_os_str().is_empty()
            && relative.components().all(|part| matches!(part, Component::Normal(_)))
            && std::fs::metadata(home.join(relative)).is_ok()
    });
    kept.sort();
    kept.dedup();
    let mut outermost: Vec<PathBuf> = Vec::new();
    for relative in kept {
        if !outermost.iter().any(|outer| relative.starts_with(outer)) {
            outermost.push(relative);
        }
    }
    outermost.truncate(MAX_KEPT);
    Some(HomeView { kept: outermost.iter().map(|relative| home.join(relative)).collect(), home })
}

/// The tool's own directory for a directory of programs (`.cargo/bin` is `.cargo`'s, `bin` and
/// `.local/bin` are their own).
fn tool_directory(dir: &Path) -> PathBuf {
    let is_program_directory = dir.file_name().is_some_and(|name| PROGRAM_DIRECTORIES.iter().any(|dir| name == *dir));
    match dir.parent() {
        Some(parent) if is_program_directory && !parent.as_os_str().is_empty() && !is_shared(parent) => {
            parent.to_path_buf()
        }
        _ => dir.to_path_buf(),
    }
}

/// What a program file needs kept: its package in a `node_modules` (`…/node_modules/@scope/pkg`),
/// else its directory's tool directory.
fn program_directory(file: &Path) -> PathBuf {
    let parts: Vec<Component> = file.components().collect();
    if let Some(at) = parts.iter().position(|part| part.as_os_str() == "node_modules") {
        let scoped = parts.get(at + 1).is_some_and(|part| part.as_os_str().to_string_lossy().starts_with('@'));
        let end = (at + if scoped { 3 } else { 2 }).min(parts.len());
        return parts[..end].iter().collect();
    }
    tool_directory(file.parent().unwrap_or(file))
}

fn is_shared(dir: &Path) -> bool {
    SHARED.iter().any(|shared| dir == Path::new(shared))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(home: &Path, vars: &[(&str, String)]) -> LaunchEnv {
        LaunchEnv {
            vars: vars.iter().map(|(name, value)| (name.to_string(), value.clone())).collect::<HashMap<_, _>>(),
            home_dir: home.to_path_buf(),
            launch_dir: PathBuf::from("/run/user/1000/aileron/launch"),
        }
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
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
            ".claude/settings.json",
        ] {
            touch(&home.join(file));
        }
        std::os::unix::fs::symlink(home.join(".local/share/claude/versions/2.0.1"), home.join(".local/bin/claude"))
            .unwrap();
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::os::unix::fs::symlink("../pkgs/lib/node_modules/@openai/codex/bin/codex.js", home.join("bin/codex"))
            .unwrap();
        let path = [".cargo/bin", ".local/bin", "bin", "tools/x/bin"].map(|dir| home.join(dir).display().to_string());
        let env = env_of(
            &home,
            &[
                ("PATH", format!("{}:/usr/bin:relative", path.join(":"))),
                ("JAVA_HOME", format!("{}/sdk/current", home.display())),
            ],
        );
        let named = [home.join("src/project"), home.join(".claude"), PathBuf::from("/tmp/elsewhere")];
        let view = home_view(&env, &named, &[home.join("bin/codex")]).unwrap();
        assert_eq!(view.home, home);
        let kept: Vec<String> =
            view.kept.iter().map(|path| path.strip_prefix(&home).unwrap().display().to_string()).collect();
        assert_eq!(
            kept,
            [
                ".cargo",
                ".claude",
                ".gitconfig",
                ".local/bin",
                ".local/share/claude/versions",
                "bin",
                "pkgs/lib/node_modules/@openai/codex",
                "sdk/current",
                "src/project",
                "tools/x",
            ]
        );
        // `--expose ~` shows the agent the whole home: nothing is covered.
        assert_eq!(home_view(&env, &[home.clone()], &[]), None);
        assert_eq!(home_view(&env_of(Path::new("/"), &[]), &[], &[]), None, "no home to cover");
    }

    #[test]
    fn a_tools_directory_is_the_one_above_its_programs_unless_that_is_shared() {
        for (dir, tool) in [
            (".cargo/bin", ".cargo"),
            (".pyenv/shims", ".pyenv"),
            (".nvm/versions/node/v22.1.0/bin", ".nvm/versions/node/v22.1.0"),
            (".local/bin", ".local/bin"),
            ("bin", "bin"),
            (".local/share/pnpm", ".local/share/pnpm"),
        ] {
            assert_eq!(tool_directory(Path::new(dir)), Path::new(tool), "{dir}");
        }
        for (file, kept) in [
            (".local/lib/node_modules/pkg/dist/cli.js", ".local/lib/node_modules/pkg"),
            ("x/node_modules/@scope/pkg/cli.js", "x/node_modules/@scope/pkg"),
            (".local/share/uv/tools/ruff/bin/ruff", ".local/share/uv/tools/ruff"),
            (".local/share/claude/versions/2.0.1", ".local/share/claude/versions"),
        ] {
            assert_eq!(program_directory(Path::new(file)), Path::new(kept), "{file}");
        }
    }
}
