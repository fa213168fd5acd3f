//! What the user's start-up files read in from elsewhere: a `~/.bashrc` that runs `source
//! ~/dotfiles/shell/aliases.sh`, a `.vimrc`'s `source`, a `.tmux.conf`'s `source-file`, an ssh
//! config's `Include`. Launched in that dotfiles repository, the agent could not write the
//! start-up file but wrote what it reads, and the user's next shell ran it (the thirtieth
//! re-attack's B12). Read here, without running anything; `allow_list` makes what lies in what the
//! agent may write read-only, or watched where it is missing.

use std::path::{Path, PathBuf};

/// How deep files read in by files read in are followed.
const MAX_DEPTH: usize = 8;
/// Files read in all, at most, and the bytes read of each.
const MAX_FILES: usize = 256;
const MAX_BYTES: u64 = 1 << 20;

/// The files (and, for a pattern, the directories) that `files` read in, and those they read in,
/// as the program of each reads them; a path named relative to the home (`~/`, `$HOME/`, a
/// relative path: shells start there, ssh's `Include` is relative to `~/.ssh`).
pub fn read_in(files: &[PathBuf], home: &Path) -> Vec<PathBuf> {
    read_in_all(files, home).found
}

/// What [`read_in_all`] finds.
#[derive(Debug, Default)]
pub struct ReadIn {
    /// The files and directories read in ([`read_in`]).
    pub found: Vec<PathBuf>,
    /// The rest of each name read in that begins with a variable no start-up file sets.
    pub tails: Vec<String>,
    /// The directories a name with a pattern, or with a part only running the file tells, is cut
    /// to (`~/dotfiles/*.sh`, `~/dotfiles/host-$(hostname).sh`: `~/dotfiles`), by any file but an
    /// `.envrc`: whatever of them it reads in is not known (the thirty-fifth re-attack's G15).
    pub wholes: Vec<PathBuf>,
}

/// [`read_in`], and the rest of each name read in that begins with a variable no start-up file
/// sets (`"$DOTFILES"/shell/aliases.sh`, set in the environment, or `cd "$@"` then `source
/// .venv/bin/activate`: the thirty-fifth re-attack's G5, G11): `shell/aliases.sh`, which the
/// caller looks for where the agent writes.
pub fn read_in_all(files: &[PathBuf], home: &Path) -> ReadIn {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut tails: Vec<String> = Vec::new();
    let mut wholes: Vec<PathBuf> = Vec::new();
    // Each with the language of the file that read it in: one whose name says nothing
    // (`shell/init`, read in by a `~/.bashrc`) is read in that language (the thirty-fourth
    // re-attack's F8).
    let mut pending: Vec<(PathBuf, usize, Kind)> = files.iter().map(|file| (file.clone(), 0, Kind::Other)).collect();
    let mut looked = 0;
    // The variables every file sets, for all (`~/.profile` exports `DOTFILES`, `~/.bashrc` sources
    // `$DOTFILES/x`: the thirty-second re-attack's D1).
    // Each read once: those given are kept from this first look.
    let mut variables = Vec::new();
    let mut texts: std::collections::HashMap<PathBuf, String> = std::collections::HashMap::new();
    for file in files {
        if let Ok(text) = read_limited(file) {
            assignments(&text, home, &mut variables);
            texts.insert(file.clone(), text);
        }
    }
    while let Some((file, depth, reader)) = pending.pop() {
        looked += 1;
        if looked > MAX_FILES {
            break;
        }
        let kind = match Kind::of(&file) {
            Kind::Other => reader,
            kind => kind,
        };
        let Some(text) = texts.remove(&file).or_else(|| read_limited(&file).ok()) else { continue };
        // Where a relative name is found: the home, where shells start; `~/.ssh`; the `.envrc`'s
        // own directory.
        let base = match kind {
            Kind::Ssh => home.join(".ssh"),
            Kind::Envrc => file.parent().unwrap_or(home).to_path_buf(),
            _ => home.to_path_buf(),
        };
        let raw = kind.names(&text);
        tails.extend(unknown_tails(&text, &variables));
        tails.extend(unknown_tails(&raw.join("\n"), &variables));
        if kind != Kind::Envrc {
            let words = text.lines().flat_map(words).chain(raw.iter().cloned());
            wholes.extend(words.filter_map(|word| cut_at_unknown(&word, home, &variables)));
        }
        // Vim's runtime path: each directory of it is read whole (`plugin/`, `ftplugin/`, …).
        if kind == Kind::Vim {
            let runtime = text.lines().filter(|line| {
                ["runtimepath", "rtp", "packpath", "pp"]
                    .iter()
                    .any(|option| line.split(|c: char| !c.is_alphanumeric()).any(|word| word == *option))
            });
            wholes.extend(runtime.flat_map(words).filter_map(|word| from_home(&word, home, &variables)));
        }
        let named = raw.into_iter().filter_map(|named| expand(&named, home, &base));
        let relative_base = (kind == Kind::Envrc).then_some(base.as_path());
        // A mise config's directives, read as mise reads them (its text as written: quotes kept).
        let (mise_named, mise_cut) = match is_mise_config(&file) {
            true => mise_paths(&with_config_root(&text, &mise_root(&file).to_string_lossy()), &file, home),
            false => Default::default(),
        };
        wholes.extend(mise_cut);
        // Where the file really is (a start-up file linked into a dotfiles repository: E2), for
        // the spellings that name its own directory.
        let own_dir = std::fs::canonicalize(&file).ok().and_then(|real| real.parent().map(Path::to_path_buf));
        let text = match own_dir.as_deref() {
            Some(dir) if matches!(kind, Kind::Shell | Kind::Envrc) => with_own_directory(&text, dir),
            _ => text,
        };
        // In an `.envrc`, `$PWD` and `$(pwd)` are its directory (D5); in a mise config, its
        // `{{config_root}}` (the thirty-fifth re-attack's G20: `_.source`, `_.path` by it).
        let text = match relative_base.map(Path::to_string_lossy) {
            Some(base) => with_config_root(
                &text.replace("$(pwd)", &base).replace("`pwd`", &base).replace("${PWD}", &base).replace("$PWD", &base),
                &base,
            ),
            None => text,
        };
        let mut named: Vec<PathBuf> = named.chain(paths_named(&text, home, relative_base, &variables)).collect();
        named.extend(mise_named);
        // A file read in reads in what lies beside it by its own place (`${BASH_SOURCE%/*}/x`,
        // vim's `<sfile>:p:h`, tmux's `#{d:current_file}`: D1): its directory, whole.
        if depth > 0 {
            named.extend(file.parent().map(Path::to_path_buf));
        }
        // direnv's `layout` puts `.direnv/<…>/bin` on `PATH` (D5), and some layouts a directory of
        // the project's own (the thirty-seventh re-attack's I8: `layout node`'s `node_modules/.bin`).
        if kind == Kind::Envrc {
            for layout in text.lines().filter_map(|line| line.trim_start().strip_prefix("layout ")) {
                named.push(base.join(".direnv"));
                let added: &[&str] = match layout.split_whitespace().next().unwrap_or_default() {
                    "node" => &["node_modules/.bin"],
                    "go" => &["bin"],
                    "php" => &["vendor/bin"],
                    "ruby" => &["bin"],
                    "poetry" | "pipenv" | "uv" => &[".venv"],
                    _ => &[],
                };
                named.extend(added.iter().map(|dir| base.join(dir)));
            }
        }
        for path in named {
            // A pattern (`Include ~/dotfiles/ssh/*.conf`, `for f in ~/dotfiles/*/init.sh`): the
            // directory above its first part holding one, whole.
            let pattern =
                path.components().position(|part| part.as_os_str().to_string_lossy().contains(['*', '?', '[']));
            let path: PathBuf = match pattern {
                Some(at) => path.components().take(at).collect(),
                None => path,
            };
            if pattern.is_some() && kind != Kind::Envrc {
                wholes.push(path.clone());
            }
            if found.contains(&path) {
                continue;
            }
            found.push(path.clone());
            if depth < MAX_DEPTH && path.is_file() {
                pending.push((path, depth + 1, kind));
            }
        }
    }
    tails.sort();
    tails.dedup();
    wholes.sort();
    wholes.dedup();
    ReadIn { found, tails, wholes }
}

/// The directory a name by the home is cut to when a part of it is what only running the file
/// tells ([`from_home`]'s fallback), `None` for any other name.
fn cut_at_unknown(word: &str, home: &Path, variables: &[(String, PathBuf)]) -> Option<PathBuf> {
    let unknown = |text: &str| text.contains(['$', '`']);
    let spelled = word.replace("${", "$").replace('}', "");
    let rest = spelled.strip_prefix("~/").or_else(|| spelled.strip_prefix("$HOME/"))?;
    unknown(rest).then(|| from_home(word, home, variables)).flatten()
}

/// The rest of each name in `text` that begins with a variable `known` does not hold (nor `HOME`,
/// nor one with a default, `${X:-…}`, which [`from_home`] reads): `"$DOTFILES"/bash/*.sh` gives
/// `bash/*.sh`.
fn unknown_tails(text: &str, known: &[(String, PathBuf)]) -> Vec<String> {
    let mut tails = Vec::new();
    for line in text.lines().map(str::trim).filter(|line| !line.starts_with('#')) {
        let line = line.replace(['"', '\''], "");
        let mut rest = line.as_str();
        while let Some(at) = rest.find('$') {
            rest = &rest[at + 1..];
            let (name, after) = match rest.strip_prefix('{') {
                Some(braced) => match braced.split_once('}') {
                    Some((name, after)) => (name, after),
                    None => break,
                },
                None => {
                    let end = rest
                        .char_indices()
                        .find(|(i, c)| !(c.is_ascii_alphanumeric() || *c == '_' || (*i == 0 && matches!(c, '@' | '*'))))
                        .map_or(rest.len(), |(i, _)| i);
                    (&rest[..end], &rest[end..])
                }
            };
            let plain =
                !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '@' | '*'));
            if !plain || name == "HOME" || known.iter().any(|(known, _)| known == name) {
                continue;
            }
            let Some(path) = after.strip_prefix('/') else { continue };
            let end = path
                .find(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | ')' | '<' | '>' | '`'))
                .unwrap_or(path.len());
            let tail = &path[..end];
            if !tail.is_empty() && !tail.contains('$') {
                tails.push(tail.to_string());
            }
        }
    }
    tails
}

/// `text` with mise's `{{config_root}}` written as `root`, in any of Tera's spellings (`{{
/// config_root }}`, `{{- config_root -}}`, `{{config_root }}`: the thirty-sixth re-attack's H24).
fn with_config_root(text: &str, root: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        let Some(end) = rest[at..].find("}}") else { break };
        let inside = rest[at + 2..at + end].trim_matches(|c: char| c == '-' || c.is_whitespace());
        out.push_str(&rest[..at]);
        if inside == "config_root" {
            out.push_str(root)
        } else {
            out.push_str(&rest[at..at + end + 2])
        }
        rest = &rest[at + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The directory a mise config is of (its `config_root`): the project, for one in its
/// `.config/mise/conf.d/`.
fn mise_root(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap_or(Path::new("/"));
    let root =
        dir.ancestors().find(|dir| !["mise", ".mise", ".config", "conf.d"].iter().any(|name| dir.ends_with(name)));
    root.unwrap_or(dir).to_path_buf()
}

/// Whether `file` is one of mise's configs (`mise.toml`, `.mise.local.toml`, `conf.d/*.toml` under
/// a `mise` directory, …).
fn is_mise_config(file: &Path) -> bool {
    let name = file.file_name().unwrap_or_default().to_string_lossy().to_ascii_lowercase();
    name.ends_with(".toml")
        && (name.contains("mise") || file.ancestors().skip(1).take(3).any(|dir| dir.ends_with("mise")))
}

/// What a mise config (its `{{config_root}}` already written out) has mise read in or run from
/// at the user's prompt (the thirty-sixth re-attack's H24): every string of its `[env]` table's
/// `_` directives (`_.path`, `_.source`, `_.file`, `_.python.venv`: a string, a list, a table's
/// `path`) is a path relative to the config's root unless from the root or the home — mise needs
/// no `./` (`_.path = ["bin"]`). Each is taken as written (relative to the directory the config
/// is in, and to its root when that is above: `.config/mise.toml`'s is the project). A name
/// holding another template is cut to the directory before it, returned apart too (read in
/// whole: the root itself when nothing comes before).
fn mise_paths(text: &str, file: &Path, home: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let Ok(table) = text.parse::<toml::Table>() else { return Default::default() };
    let dir = file.parent().unwrap_or(home);
    let root = mise_root(file);
    let root = root.as_path();
    // What runs a command in the config's directory at the user's prompt — a template's `exec(…)`
    // in any value, a `{% … %}` block, a `[hooks]` or `[[watch_files]]` table — can run any file
    // of it by any name (the thirty-seventh re-attack's I7: `GIT_SHA = "{{ exec(command='sh
    // scripts/v.sh') }}"`, `[hooks] enter = "sh hooks/on-enter.sh"`): the root, whole.
    let runs_commands = table.contains_key("hooks")
        // (A watched file's `run`, too: the thirty-ninth re-attack's K2, `npm install` on a lock.)
        || table.contains_key("watch_files")
        || text.contains("{%")
        || text
            .split("{{")
            .skip(1)
            .any(|template| template.split("}}").next().is_some_and(|inside| inside.contains("exec")));
    if runs_commands {
        return (vec![root.to_path_buf()], vec![root.to_path_buf()]);
    }
    let Some(directives) = table.get("env").and_then(|env| env.get("_")) else { return Default::default() };
    let mut strings = Vec::new();
    let mut values = vec![directives];
    while let Some(value) = values.pop() {
        match value {
            toml::Value::String(string) => strings.push(string.as_str()),
            toml::Value::Array(items) => values.extend(items),
            toml::Value::Table(table) => values.extend(table.values()),
            _ => {}
        }
    }
    let (mut paths, mut cut) = (Vec::new(), Vec::new());
    for string in strings {
        let string = string.trim();
        if let Some(at) = string.find("{{").or_else(|| string.find("{%")) {
            // Cut at the template: what it names is not known.
            let before = &string[..at];
            let known = match before.strip_suffix('/') {
                Some(dir) => Path::new(dir),
                None => Path::new(before).parent().unwrap_or(Path::new("")),
            };
            let known = match string.strip_prefix("~/") {
                Some(_) => home.join(known.strip_prefix("~").unwrap_or(known)),
                None => root.join(known),
            };
            cut.push(super::repositories::without_dot_dots(&known));
            continue;
        }
        if let Some(rest) = string.strip_prefix("~/") {
            paths.push(home.join(rest));
        } else if Path::new(string).is_absolute() {
            paths.push(PathBuf::from(string));
        } else {
            paths.extend([dir, root].iter().map(|base| super::repositories::without_dot_dots(&base.join(string))));
        }
    }
    paths.extend(cut.iter().cloned());
    paths.sort();
    paths.dedup();
    (paths, cut)
}

/// A file's text, its first [`MAX_BYTES`] at most.
pub(super) fn read_limited(file: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = Vec::new();
    std::fs::File::open(file)?.take(MAX_BYTES).read_to_end(&mut text)?;
    Ok(String::from_utf8_lossy(&text).into_owned())
}

/// The language of a start-up file, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `source FILE` or `. FILE` where a command starts.
    Shell,
    /// `source FILE`, `so FILE`, `luafile FILE`.
    Vim,
    /// `source-file FILE`, `source FILE` (after its flags).
    Tmux,
    /// `Include FILE…`, relative to `~/.ssh`.
    Ssh,
    /// Not known: read for the paths it names alone ([`paths_named`]).
    Other,
    /// direnv's `.envrc`: the shell's, and its `source_env`, `source_env_if_exists`,
    /// `source_up_if_exists` relative to its own directory (direnv trusts an allowed `.envrc` by
    /// its content alone: what it reads in is not checked, the thirtieth re-attack's B9).
    Envrc,
}

impl Kind {
    /// A file of a kind not known here (`~/.inputrc`'s `$include`, a modular setup's `shell/init`
    /// or `theme.conf`: the thirty-first re-attack's C5) is [`Kind::Other`], read for the paths it
    /// names alone.
    fn of(file: &Path) -> Kind {
        let Some(name) = file.file_name() else { return Kind::Other };
        let name = name.to_string_lossy().to_ascii_lowercase();
        let name = name.trim_start_matches('.');
        // mise's configs name files relative to their own directory too (`_.source = "./env.sh"`).
        if name == "envrc" || (name.contains("mise") && name.ends_with(".toml")) || is_mise_config(file) {
            Kind::Envrc
        } else if name.contains("vimrc") || name.ends_with(".vim") || name == "gvimrc" {
            Kind::Vim
        } else if name.contains("tmux") {
            Kind::Tmux
        } else if file.parent().is_some_and(|dir| dir.ends_with(".ssh")) && name == "config" {
            Kind::Ssh
        } else if ["bash", "zsh", "profile", "shrc", "zlog", "aliases", "functions", "exports", "xsession", "env"]
            .iter()
            .any(|word| name.contains(word))
            || name.ends_with(".sh")
        {
            Kind::Shell
        } else {
            Kind::Other
        }
    }

    /// The file names `text` reads in, as written.
    fn names(self, text: &str) -> Vec<String> {
        let mut names = Vec::new();
        // The directory a shell file has entered (`pushd ~/dotfiles`), as written.
        let mut directory: Option<String> = None;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') || (self == Kind::Vim && line.starts_with('"')) {
                continue;
            }
            match self {
                Kind::Shell | Kind::Envrc => {
                    // Each command of the line: `[ -f x ] && . x; source y`.
                    for command in line.split([';', '&', '|']) {
                        // A relative name after a `cd` or `pushd` is the directory's (F18), in a
                        // subshell or a group, after `builtin` or `command`, past its options
                        // (the thirty-fifth re-attack's G10).
                        let mut entering =
                            command.split_whitespace().map(|word| word.trim_start_matches(['(', '{'])).filter(|word| {
                                !word.is_empty() && !word.ends_with("()") && !matches!(*word, "builtin" | "command")
                            });
                        let entered = entering.next();
                        let target = entering.find(|word| !word.starts_with('-') || *word == "-");
                        match (entered, target) {
                            (Some("cd" | "pushd"), Some(dir)) if dir != "-" => {
                                let dir = unquoted(dir);
                                directory = match &directory {
                                    Some(current) if !dir.starts_with(['~', '$', '/']) => {
                                        Some(format!("{current}/{dir}"))
                                    }
                                    _ => Some(dir),
                                };
                                continue;
                            }
                            (Some("cd" | "popd"), _) => {
                                directory = None;
                                continue;
                            }
                            _ => {}
                        }
                        let names_before = names.len();
                        let mut words =
                            command.split_whitespace().map(|word| word.trim_start_matches('(')).skip_while(|word| {
                                matches!(
                                    *word,
                                    "" | "then"
                                        | "do"
                                        | "else"
                                        | "{"
                                        | "if"
                                        | "!"
                                        | "elif"
                                        | "command"
                                        | "builtin"
                                        | "exec"
                                ) || word.ends_with("()")
                            });
                        // A program run by a relative name in the directory entered
                        // (`cd ~/dotfiles && ./bin/update-check.sh`: G10).
                        if directory.is_some()
                            && let Some(program) = words.clone().next()
                            && (program.starts_with("./")
                                || (program.contains('/') && !program.starts_with(['~', '$', '/'])))
                        {
                            names.push(unquoted(program.trim_end_matches([')', '}'])));
                        }
                        let envrc = self == Kind::Envrc;
                        match (words.next(), words.next()) {
                            (Some("source" | "."), Some(file)) => names.push(unquoted(file)),
                            // direnv's `PATH_add` and `MANPATH_add` take any number of
                            // directories, and `path_add` a variable then directories (the
                            // thirty-sixth re-attack's H27 kept `tools` of `PATH_add bin tools`
                            // writable, and `path_add PYTHONPATH lib` named `PYTHONPATH`).
                            (Some("PATH_add" | "MANPATH_add"), Some(first)) if envrc => {
                                names.push(unquoted(first));
                                names.extend(words.clone().map(unquoted));
                            }
                            (Some("path_add"), Some(_variable)) if envrc => {
                                names.extend(words.clone().map(unquoted));
                            }
                            // direnv's: what it sources, a directory it puts on `PATH` (its
                            // programs run by name in the user's shell there: C4), and the
                            // variables a dotenv file exports into the user's shell
                            // (`PROMPT_COMMAND`: the thirty-fourth re-attack's F17).
                            (
                                Some("source_env" | "source_env_if_exists" | "dotenv" | "dotenv_if_exists"),
                                Some(file),
                            ) if envrc => {
                                let file = unquoted(file);
                                // `source_env ..` names a directory: its `.envrc` (G16).
                                if command.split_whitespace().any(|word| word.starts_with("source_env")) {
                                    names.push(format!("{}/.envrc", file.trim_end_matches('/')));
                                }
                                names.push(file);
                            }
                            (Some("dotenv" | "dotenv_if_exists"), None) if envrc => names.push(".env".to_string()),
                            // Found in the directories above, allowed or not (F10).
                            (Some("source_up" | "source_up_if_exists"), file) if envrc => {
                                let file = file.map_or_else(|| ".envrc".to_string(), unquoted);
                                names.extend((1..=MAX_DEPTH).map(|up| format!("{}{file}", "../".repeat(up))));
                            }
                            _ => {}
                        }
                        if let Some(directory) = &directory {
                            for name in &mut names[names_before..] {
                                if !name.starts_with(['~', '$', '/']) {
                                    *name = format!("{directory}/{name}");
                                }
                            }
                        }
                    }
                }
                Kind::Vim => {
                    let mut words = line.split_whitespace();
                    if let (Some("source" | "so" | "so!" | "source!" | "luafile"), Some(file)) =
                        (words.next(), words.next())
                    {
                        names.push(unquoted(file));
                    }
                }
                Kind::Tmux => {
                    let mut words = line.split_whitespace();
                    if matches!(words.next(), Some("source-file" | "source")) {
                        names.extend(words.find(|word| !word.starts_with('-')).map(unquoted));
                    }
                }
                Kind::Other => {}
                Kind::Ssh => {
                    let mut words = line.split_whitespace();
                    if words.next().is_some_and(|word| word.eq_ignore_ascii_case("include")) {
                        names.extend(words.map(unquoted));
                    }
                }
            }
        }
        names
    }
}

/// Every path `text` names by the home or from the root, whatever the command around it (a loop's
/// pattern, a helper function's argument, a vim `runtimepath`, a tmux `run-shell`, an ssh
/// `ProxyCommand` or `Match exec`: the thirty-first re-attack's C1 ran each from a dotfiles
/// workspace), and those a variable the file sets names (`DOTFILES=~/dotfiles` then
/// `"$DOTFILES/x"`, `${DOTFILES:-$HOME/dotfiles}/x`). A name holding any other variable is not
/// followed. In an `.envrc` (`relative_base`, its directory) a name from `./` or `../` too (`eval
/// "$(./scripts/env.sh)"`: the thirty-first re-attack's C4).
fn paths_named(text: &str, home: &Path, relative_base: Option<&Path>, known: &[(String, PathBuf)]) -> Vec<PathBuf> {
    let lines: Vec<&str> =
        text.lines().map(str::trim).filter(|line| !line.starts_with('#') && !line.starts_with('"')).collect();
    let mut variables = known.to_vec();
    assignments(text, home, &mut variables);
    // In an `.envrc`, a name from its directory needs no `./` when it is there (`export X=$(sh
    // tools/sha.sh)`, `load_prefix vendor/tool`: the thirty-eighth re-attack's J7).
    let relative = |word: &str| {
        let base = relative_base?;
        let there = !word.starts_with(['$', '~', '/', '-'])
            && !word.contains(['$', '`', '*', '?'])
            && std::fs::symlink_metadata(base.join(word)).is_ok_and(|found| word.contains('/') || found.is_file());
        (word.starts_with("./") || word.starts_with("../") || there)
            .then(|| super::repositories::without_dot_dots(&base.join(word)))
    };
    lines
        .iter()
        .flat_map(|line| words(line))
        .filter_map(|word| from_home(&word, home, &variables).or_else(|| relative(&word)))
        .collect()
}

/// `text` with the usual spellings of the file's own directory written as `dir` (quotes dropped):
/// `${BASH_SOURCE%/*}`, `$(dirname "${BASH_SOURCE[0]}")`, the same through `readlink -f` or
/// `realpath`, `$(cd "$(dirname …)" && pwd)` and its `/..`, `$0`'s and zsh's `${0:A:h}` (the
/// thirty-third re-attack's E2 reached `../bin` and `$ROOT/lib` that way).
fn with_own_directory(text: &str, dir: &Path) -> String {
    let dir = dir.to_string_lossy();
    let mut text = text.replace('"', "");
    for source in ["${BASH_SOURCE[0]}", "${BASH_SOURCE}", "$BASH_SOURCE", "$0"] {
        for resolved in [format!("$(readlink -f {source})"), format!("$(realpath {source})"), source.to_string()] {
            let own = format!("$(dirname {resolved})");
            text = text.replace(&format!("$(cd {own}/.. && pwd)"), &format!("{dir}/.."));
            text = text.replace(&format!("$(cd {own} && pwd)"), &dir);
            text = text.replace(&own, &dir);
        }
    }
    for spelling in ["${BASH_SOURCE%/*}", "${BASH_SOURCE[0]%/*}", "${0%/*}", "${0:A:h}", "${0:a:h}"] {
        text = text.replace(spelling, &dir);
    }
    text
}

/// The words of a line that may be paths: split at blanks and the shells' and configs'
/// punctuation, brackets and a leading `-` taken off.
fn words(line: &str) -> Vec<String> {
    line.split(|c: char| {
        c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '<' | '>' | '=' | ',' | ':' | '\'' | '"' | '`')
    })
    .map(|word| word.trim_matches(['{', '}', '[', ']']).trim_start_matches('-').to_string())
    .filter(|word| !word.is_empty())
    .collect()
}

/// Each `NAME=path` of `text` (`export`, `local`, `readonly`, `declare` in front or not), added to
/// `variables`.
fn assignments(text: &str, home: &Path, variables: &mut Vec<(String, PathBuf)>) {
    for line in text.lines().map(str::trim).filter(|line| !line.starts_with('#')) {
        // The shell's assign-a-default, `: "${DOTFILES:=$HOME/dotfiles}"` (G5).
        let mut rest = line;
        while let Some(at) = rest.find("${") {
            rest = &rest[at + 2..];
            let Some((inside, _)) = rest.split_once('}') else { break };
            let Some((name, value)) = inside.split_once(":=").or_else(|| inside.split_once('=')) else { continue };
            if !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && let Some(path) = words(value).first().and_then(|word| from_home(word, home, variables))
            {
                variables.push((name.to_string(), path));
            }
        }
        let assignment = line.split_whitespace().find(|word| word.contains('=')).unwrap_or_default();
        let Some((name, value)) = assignment.split_once('=') else { continue };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        if let Some(path) = words(value).first().and_then(|word| from_home(word, home, variables)) {
            variables.push((name.to_string(), path));
        }
    }
}

/// `word` as a path, when it names one by the home (`~/`, `$HOME/`, `${HOME}/`), a variable of
/// `variables`, or from the root (not the root itself).
fn from_home(word: &str, home: &Path, variables: &[(String, PathBuf)]) -> Option<PathBuf> {
    let word = word.replace("${", "$").replace('}', "");
    let path = if let Some(rest) = word.strip_prefix("~/") {
        home.join(rest)
    } else if let Some(rest) = word.strip_prefix('$') {
        let (name, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let base = if name == "HOME" {
            home.to_path_buf()
        } else {
            variables.iter().rev().find(|(n, _)| n == name)?.1.clone()
        };
        base.join(rest)
    } else if word.starts_with('/') && word.len() > 1 {
        PathBuf::from(&word)
    } else {
        return None;
    };
    let unknown = |text: &str| text.contains(['$', '`', '~']);
    if !unknown(&path.to_string_lossy()) {
        return Some(super::repositories::without_dot_dots(&path));
    }
    // A name holding what only running the file tells (`~/dotfiles/os/$(uname -s).sh`,
    // `hosts/$HOSTNAME.sh`: the thirty-fourth re-attack's F18): the directory above it, whole, as
    // for a pattern; never the home itself or above it.
    let known: PathBuf = path.components().take_while(|part| !unknown(&part.as_os_str().to_string_lossy())).collect();
    let known = super::repositories::without_dot_dots(&known);
    (known.starts_with(home) && known != home).then_some(known)
}

fn unquoted(word: &str) -> String {
    word.trim_matches(['"', '\'']).to_string()
}

/// A name as its program finds it: by the home or from the root as [`from_home`] reads one; a
/// relative name is `base`'s; a name holding another variable or a command is not followed.
fn expand(name: &str, home: &Path, base: &Path) -> Option<PathBuf> {
    if name.starts_with(['~', '$', '/']) {
        return from_home(name, home, &[]);
    }
    (!name.is_empty() && !name.contains(['$', '`', '~']))
        .then(|| super::repositories::without_dot_dots(&base.join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thirty-fifth re-attack's G5, G10, G11: a variable given a default by `:=`, a `cd` in a
    /// subshell, past `builtin` and `--`, a program run by a relative name there, and the rest of a
    /// name that begins with a variable nothing here sets (the caller looks for it where the agent
    /// writes).
    #[test]
    fn defaults_directories_entered_and_names_of_unknown_variables_are_followed() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path();
        let dots = home.join("dotfiles");
        std::fs::write(
            home.join(".bashrc"),
            ": \"${DOTS:=$HOME/dotfiles}\"\nsource \"$DOTS/shell/x.sh\"\nsource \"$DOTFILES/shell/aliases.sh\"\n\
             for f in \"$DOTFILES\"/bash/*.sh; do . \"$f\"; done\n(cd ~/dotfiles && ./bin/update-check.sh)\n\
             builtin cd -- ~/dotfiles; . lib/b.sh; builtin cd ~\n\
             cd() { builtin cd \"$@\" && [ -f .venv/bin/activate ] && source .venv/bin/activate; }\n",
        )
        .unwrap();
        let ReadIn { found, tails, .. } = read_in_all(&[home.join(".bashrc")], home);
        for expected in [dots.join("shell/x.sh"), dots.join("bin/update-check.sh"), dots.join("lib/b.sh")] {
            assert!(found.contains(&expected), "{expected:?} in {found:?}");
        }
        for tail in ["shell/aliases.sh", "bash/*.sh", ".venv/bin/activate"] {
            assert!(tails.contains(&tail.to_string()), "{tail} in {tails:?}");
        }
        assert!(!tails.iter().any(|tail| tail.contains("x.sh")), "a known variable's is found: {tails:?}");
    }

    #[test]
    fn what_start_up_files_read_in_is_found_in_each_ones_language() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path();
        let dots = home.join("dotfiles");
        std::fs::create_dir_all(dots.join("shell")).unwrap();
        std::fs::write(
            home.join(".bashrc"),
            "# source ~/commented.sh\nsource ~/dotfiles/shell/aliases.sh\n[ -f \"$HOME/.local.sh\" ] && . \"$HOME/.local.sh\"\n\
             if true; then . ~/dotfiles/env.sh; fi\nsource $ZDOTDIR/x\n\
             source ~/dotfiles/os/$(uname -s).sh\n[ -f ~/dotfiles/hosts/$HOSTNAME.sh ] && . ~/dotfiles/hosts/$HOSTNAME.sh\n\
             pushd ~/dotfiles >/dev/null; source cd/x.sh; popd >/dev/null\nsource relative.sh\n",
        )
        .unwrap();
        std::fs::write(dots.join("shell/aliases.sh"), "source ~/dotfiles/shell/deeper.sh\n").unwrap();
        std::fs::write(home.join(".vimrc"), "\" so ~/no.vim\nsource ~/dotfiles/vim/plugins.vim\n").unwrap();
        std::fs::write(home.join(".tmux.conf"), "source-file -q ~/dotfiles/tmux/theme.conf\n").unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/config"), "Include ~/dotfiles/ssh/*.conf work.conf\nHost x\n").unwrap();
        std::fs::write(dots.join(".envrc"), "source_env_if_exists .envrc.private\nsource_env ../shared.envrc\n")
            .unwrap();
        // The thirty-first re-attack's C1: a loop's pattern, a helper's argument, a variable the file
        // sets, vim's runtimepath, tmux's run-shell, ssh's ProxyCommand, `~/.inputrc`'s `$include`.
        std::fs::write(
            home.join(".zshrc"),
            "for f in ~/dotfiles/zsh/*.zsh; do source \"$f\"; done\nsource_if ~/dotfiles/helper.zsh\nDOTS=\"$HOME/dotfiles\"\n\
             [ -r \"$DOTS/vars.zsh\" ] && source \"$DOTS/vars.zsh\"\nsource \"${ZDOT:-$HOME/dotfiles}/def.zsh\"\n",
        )
        .unwrap();
        std::fs::write(home.join(".gvimrc"), "set runtimepath^=~/dotfiles/vimrt\n").unwrap();
        std::fs::write(home.join(".tmux.conf.local"), "run-shell ~/dotfiles/tmux/status.sh\n").unwrap();
        std::fs::write(home.join(".inputrc"), "$include ~/dotfiles/inputrc\n").unwrap();
        // C5: a file of no known kind, read in, is read too; C4: an `.envrc`'s relative names.
        std::fs::write(dots.join("inputrc"), "$include ~/dotfiles/keys/more\n").unwrap();
        std::fs::write(
            dots.join(".envrc"),
            "source_env_if_exists .envrc.private\nsource_env ../shared.envrc\nPATH_add bin\neval \"$(./scripts/env.sh)\"\n\
             export PATH=\"$PWD/tools:$PATH\"\nPATH_add \"$(pwd)/more\"\nlayout python3\nPATH_add nodes \"libexec\"\n\
             path_add PYTHONPATH pylib\naddtools() { PATH_add b3; }\nlayout node\nexport SHA=$(sh tools2/sha.sh)\n\
             load_prefix vendor/tool\necho production\n\
             dotenv_if_exists .env.local\ndotenv\nsource_up\nsource_env ./sub\n",
        )
        .unwrap();
        std::fs::create_dir_all(dots.join("tools2")).unwrap();
        std::fs::write(dots.join("tools2/sha.sh"), "git rev-parse HEAD\n").unwrap();
        std::fs::create_dir_all(dots.join("vendor/tool/bin")).unwrap();
        // E2: the file's own directory by its usual spellings, `..` from it, through a link.
        std::fs::create_dir_all(dots.join("shell")).unwrap();
        std::fs::write(
            dots.join("shell/init.sh"),
            "export PATH=\"${BASH_SOURCE%/*}/../bin2:$PATH\"\nROOT=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")/..\" && pwd)\"\n\
             source \"$ROOT/lib/functions.sh\"\n",
        )
        .unwrap();
        std::fs::write(
            dots.join("bash_login"),
            "DIR=\"$(dirname \"$(readlink -f \"${BASH_SOURCE[0]}\")\")\"\nsource \"$DIR/sys/env.sh\"\n",
        )
        .unwrap();
        std::os::unix::fs::symlink(dots.join("bash_login"), home.join(".bash_login")).unwrap();
        std::fs::write(home.join(".bash_logout"), "source ~/dotfiles/shell/init.sh\n").unwrap();
        // D1: a variable another file sets.
        std::fs::write(home.join(".profile"), "export DOTFILES=\"$HOME/dotfiles\"\n").unwrap();
        std::fs::write(home.join(".bash_profile"), "source \"$DOTFILES/shell/path.sh\"\n").unwrap();
        let files = [".bashrc", ".vimrc", ".tmux.conf", ".ssh/config", "dotfiles/.envrc", ".zshrc", ".gvimrc"]
            .into_iter()
            .chain([".tmux.conf.local", ".inputrc", ".profile", ".bash_profile", ".bash_login", ".bash_logout"])
            .map(|name| home.join(name))
            .collect::<Vec<_>>();
        let found = read_in(&files, home);
        for expected in [
            dots.join("shell/aliases.sh"),
            dots.join("shell/deeper.sh"),
            home.join(".local.sh"),
            dots.join("env.sh"),
            dots.join("vim/plugins.vim"),
            dots.join("tmux/theme.conf"),
            dots.join("ssh"),
            home.join(".ssh/work.conf"),
            dots.join(".envrc.private"),
            home.join("shared.envrc"),
            dots.join("zsh"),
            dots.join("helper.zsh"),
            dots.join("vars.zsh"),
            dots.join("def.zsh"),
            dots.join("vimrt"),
            dots.join("tmux/status.sh"),
            dots.join("inputrc"),
            dots.join("keys/more"),
            dots.join("bin"),
            dots.join("scripts/env.sh"),
            // H27: every directory `PATH_add` takes, and `path_add`'s after its variable.
            dots.join("nodes"),
            dots.join("libexec"),
            dots.join("pylib"),
            // I8: in a function's body, and what `layout node` adds.
            dots.join("b3"),
            dots.join("node_modules/.bin"),
            // J7: a name from its directory without `./`, where it is there.
            dots.join("tools2/sha.sh"),
            dots.join("vendor/tool"),
            // D1: what a file read in reads in beside it, by its own place: its directory.
            dots.join("shell"),
            dots.join("shell/path.sh"),
            // D5: `$PWD`, `$(pwd)` and `layout` in an `.envrc`.
            dots.join("tools"),
            dots.join("more"),
            dots.join(".direnv"),
            dots.join("bin2"),
            dots.join("lib/functions.sh"),
            dots.join("sys/env.sh"),
            // The thirty-fourth re-attack's F18: a name only running the file tells (its directory,
            // whole), a name after `pushd`, and after `popd` the home's again.
            dots.join("os"),
            dots.join("hosts"),
            dots.join("cd/x.sh"),
            home.join("relative.sh"),
            // F17 and F10: what a dotenv file exports, and an `.envrc` above.
            dots.join(".env.local"),
            // G16: a directory's `.envrc`.
            dots.join("sub/.envrc"),
            dots.join(".env"),
            home.join(".envrc"),
        ] {
            assert!(found.contains(&expected), "{expected:?} in {found:?}");
        }
        assert!(!found.iter().any(|path| path.to_string_lossy().contains("commented") || path.ends_with("no.vim")));
        assert!(!found.iter().any(|path| path.to_string_lossy().contains("ZDOTDIR")), "{found:?}");
    }
}
