//! Credentials inside the git config an agent reads. The user's git config files stay in the
//! agent's sight (its git needs the user's name, aliases, includes), and the workspace's
//! repository config too; but a token is often written into them: a
//! `url."https://TOKEN@github.com/".insteadOf` for private Go modules, an `http.extraHeader` with
//! an `Authorization` line (what CI checkouts leave), a remote URL with a password, an SMTP
//! password for `git send-email`; cargo's `config.toml` likewise (`[registry] token`, a URL with a
//! password). The agent never holds a credential (SPEC §0, §15): a file holding one is shown to
//! it as a copy without it, bound read-only over the file in the agent's namespace only. The file
//! itself is not changed; the user's own git and cargo read it as before.

use std::path::{Path, PathBuf};

use super::git::{self, Entry};

/// A config file's text without its credentials, and what was left out (`section.key`, the
/// subsection named without its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub text: String,
    pub keys: Vec<String>,
}

/// Key names (the last part, lower-cased) whose values are secrets wherever they stand:
/// `sendemail.smtpPass`, `github.token`, `hub.oauthToken`, `gitlab.token`, …
fn is_secret_key(key: &str) -> bool {
    key == "extraheader"
        // `imap.pass`, `sendemail.smtpPass`
        || key.ends_with("pass")
        || ["token", "password", "passwd", "secret", "apikey", "api-key"].iter().any(|word| key.contains(word))
}

/// Whether a config variable is left out whole: a URL with user information in its subsection, a
/// secret key name, a helper printing a password, a command line passing one (`sshpass -p`,
/// `--token …`), a value holding a token known by its form.
fn left_out(entry: &Entry) -> bool {
    subsection_holds_userinfo(entry)
        || is_secret_key(&entry.key)
        || helper_with_secret(entry)
        || entry.value.as_deref().is_some_and(|value| command_with_secret(value) || holds_known_token(value))
}

/// A command line that passes a secret on it (the twenty-ninth re-attack: `core.sshCommand =
/// sshpass -p …`, a cargo alias's `publish --token …`): `sshpass`, or a long option named as a
/// secret is (`--token`, `--password=…`, `--api-key`).
fn command_with_secret(value: &str) -> bool {
    value.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ';' | '(' | ')')).any(|word| {
        let word = word.to_ascii_lowercase();
        let option = word.strip_prefix("--").map(|option| option.split('=').next().unwrap_or_default());
        word.rsplit('/').next() == Some("sshpass")
            || option.is_some_and(|option| !option.is_empty() && is_secret_key(option))
    })
}

/// The prefixes of tokens known by their form (GitHub's, GitLab's, Slack's, npm's, PyPI's, the
/// model providers'), each followed by at least 16 more characters; and an AWS access key id.
const TOKEN_PREFIXES: [&str; 15] = [
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "npm_",
    "pypi-",
    "sk-",
    "akia",
];

/// Whether `value` holds a token known by its form ([`TOKEN_PREFIXES`]) as a word of its own,
/// whatever the key says (cargo's `[env] GITHUB_PAT = "ghp_…"`).
fn holds_known_token(value: &str) -> bool {
    value.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).any(|word| {
        let lower = word.to_ascii_lowercase();
        TOKEN_PREFIXES.iter().any(|prefix| match *prefix {
            "akia" => {
                word.len() == 20
                    && word.starts_with("AKIA")
                    && word.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            }
            prefix => lower.starts_with(prefix) && word.len() >= prefix.len() + 16,
        })
    })
}

fn subsection_holds_userinfo(entry: &Entry) -> bool {
    entry.subsection.as_deref().is_some_and(|sub| userinfo_at(sub).is_some())
}

/// Whether a config variable hands over a credential: one left out whole, or user information in
/// its value (kept without it, [`stripped_value`]).
fn holds_credential(entry: &Entry) -> bool {
    left_out(entry) || stripped_value(entry).is_some()
}

/// An entry's value without the user information in it, when it has any: a URL's, or a proxy's
/// written without a scheme (`http.proxy = user:password@proxy:3128`, which git reads as
/// `http://`: the twenty-ninth re-attack's A1a).
fn stripped_value(entry: &Entry) -> Option<String> {
    let value = entry.value.as_deref()?;
    without_userinfo(value).or_else(|| entry.key.ends_with("proxy").then(|| without_proxy_userinfo(value)).flatten())
}

/// A proxy written without a scheme (`user:password@proxy:3128`, as git, cargo and curl take one)
/// without its user information.
fn without_proxy_userinfo(value: &str) -> Option<String> {
    let (userinfo, host) = value.split_once('@')?;
    (!value.contains("://") && userinfo.contains(':')).then(|| host.to_string())
}

/// The environment's git config (`GIT_CONFIG_COUNT` with its `GIT_CONFIG_KEY_<n>` and
/// `GIT_CONFIG_VALUE_<n>`, and `GIT_CONFIG_PARAMETERS`, what `git -c` passes on) when it holds a
/// credential (an `http.extraHeader` kept off disk that way): the variables to withhold from the
/// agent, and the keys named (the twenty-eighth re-attack read them in the agent's `env`).
pub fn environment_credentials(get: impl Fn(&str) -> Option<String>) -> (Vec<String>, Vec<String>) {
    let (mut names, mut keys) = (Vec::new(), Vec::new());
    let count = get("GIT_CONFIG_COUNT").and_then(|count| count.trim().parse::<usize>().ok()).unwrap_or(0).min(1024);
    let pairs: Vec<(String, String)> =
        (0..count).map(|n| (format!("GIT_CONFIG_KEY_{n}"), format!("GIT_CONFIG_VALUE_{n}"))).collect();
    let secret_pairs: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| git::entry_of_key(&get(key)?, get(value).as_deref()))
        .filter(holds_credential)
        .map(|entry| named(&entry, true))
        .collect();
    if !secret_pairs.is_empty() {
        names.push("GIT_CONFIG_COUNT".to_string());
        names.extend(pairs.into_iter().flat_map(|(key, value)| [key, value]));
        keys.extend(secret_pairs);
    }
    if let Some(parameters) = get("GIT_CONFIG_PARAMETERS") {
        let entries = parameter_entries(&parameters);
        let secret: Vec<String> =
            entries.iter().filter(|entry| holds_credential(entry)).map(|entry| named(entry, true)).collect();
        // Withheld whole when it holds one, or when it does not read as git writes it.
        if !secret.is_empty() || (entries.is_empty() && !parameters.trim().is_empty()) {
            names.push("GIT_CONFIG_PARAMETERS".to_string());
            keys.extend(if secret.is_empty() { vec!["GIT_CONFIG_PARAMETERS".to_string()] } else { secret });
        }
    }
    (names, keys)
}

/// `GIT_CONFIG_PARAMETERS` as git reads it: items apart by spaces, each `'key'='value'` (the key
/// whole, an `=` in it too: the twenty-ninth re-attack's A7 named a URL with one) or the older
/// `'key=value'` (split at its first `=`), every word single-quoted with `'\''` for a quote inside.
/// Empty when any item does not read so (the caller then withholds the variable whole).
fn parameter_entries(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let Some((word, after)) = single_quoted(rest) else { return Vec::new() };
        let (key, value, after) = match after.strip_prefix('=') {
            Some(value) => match single_quoted(value) {
                Some((value, after)) => (word, Some(value), after),
                None => return Vec::new(),
            },
            None => match word.split_once('=') {
                Some((key, value)) => (key.to_string(), Some(value.to_string()), after),
                None => (word, None, after),
            },
        };
        if !(after.is_empty() || after.starts_with(char::is_whitespace)) {
            return Vec::new();
        }
        entries.extend(git::entry_of_key(&key, value.as_deref()));
        rest = after.trim_start();
    }
    entries
}

/// One word of git's shell quoting (`sq_dequote_step`): `'…'`, with `\'` and `\!` between two
/// quoted runs for the characters themselves; the word and what follows it.
fn single_quoted(text: &str) -> Option<(String, &str)> {
    let mut rest = text.strip_prefix('\'')?;
    let mut word = String::new();
    loop {
        let end = rest.find('\'')?;
        word.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        let Some(escaped) = rest.strip_prefix('\\') else { return Some((word, rest)) };
        let mut chars = escaped.chars();
        word.push(chars.next()?);
        rest = chars.as_str().strip_prefix('\'')?;
    }
}

/// `text` (a git config file) written again without what would hand the agent a credential, or
/// `None` when it holds none (the file is then shown as it is). Written from the entries as
/// git's own parser reads them ([`git::parse`]): comments and layout are not kept, every value
/// is quoted, and a URL's user and password are taken out of the values that keep their place.
pub fn without_credentials(text: &str) -> Option<Withheld> {
    let mut keys = Vec::new();
    let mut kept = Vec::new();
    for mut entry in git::parse(text) {
        if left_out(&entry) {
            keys.push(named(&entry, subsection_holds_userinfo(&entry)));
            continue;
        }
        if let Some(stripped) = stripped_value(&entry) {
            keys.push(named(&entry, false));
            entry.value = Some(stripped);
        }
        kept.push(entry);
    }
    if keys.is_empty() {
        return None;
    }
    keys.dedup();
    Some(Withheld { text: git::written(COPY_HEADER, &kept), keys })
}

/// `section.key` as the user would look it up (`url.<…>.insteadof`: a subsection holding a
/// credential is not repeated).
fn named(entry: &Entry, hide_subsection: bool) -> String {
    match (&entry.subsection, hide_subsection) {
        (Some(_), true) => format!("{}.<…>.{}", entry.section, entry.key),
        _ => git::named(entry),
    }
}

/// A `credential.helper` that is a shell snippet (`!…`) naming a password, token or secret: one
/// that prints it itself, however it builds the line (`printf '%s=%s' password …`: the
/// twenty-ninth re-attack's A1c). A helper that runs a program (`!gh auth git-credential`) is kept.
fn helper_with_secret(entry: &Entry) -> bool {
    entry.section == "credential"
        && entry.key == "helper"
        && entry.value.as_deref().is_some_and(|value| {
            let lower = value.to_ascii_lowercase();
            lower.contains("password=")
                || lower.contains("token=")
                || (lower.trim_start().starts_with('!')
                    && ["password", "token", "secret"].iter().any(|word| lower.contains(word)))
        })
}

/// Where a URL's user information (`user:password@`, `token@`) lies in `text`, for the schemes
/// over which it is a credential (not `ssh://git@`, which names an account), if it has any. The
/// URL may stand anywhere in the text (`proxy = http://…`, `url = sparse+https://…`).
fn userinfo_at(text: &str) -> Option<std::ops::Range<usize>> {
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let scheme_end = from + found;
        let start = scheme_end + 3;
        from = start;
        // The scheme is the run of scheme characters before `://`; of `sparse+https` or
        // `git+https` (cargo's, pip's), the transport is the last part.
        let scheme_start = text[..scheme_end]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |at| at + 1);
        let scheme = text[scheme_start..scheme_end].rsplit('+').next().unwrap_or_default().to_ascii_lowercase();
        // Over these a user name alone is a token too (GitHub takes one as the user); over any
        // other scheme (`s3://`, `postgres://`, `ssh://`) only a password is.
        let name_is_secret = matches!(scheme.as_str(), "http" | "https" | "ftp" | "ftps");
        let authority_end = text[start..].find(['/', '?', '#', ' ', '\t', '"']).map_or(text.len(), |end| start + end);
        if let Some(at) = text[start..authority_end].rfind('@')
            && (name_is_secret || text[start..start + at].contains(':'))
        {
            return Some(start..start + at + 1);
        }
    }
    None
}

/// `value` with every URL's user information taken out, when one has any.
fn without_userinfo(value: &str) -> Option<String> {
    let mut stripped = value.to_string();
    let mut changed = false;
    while let Some(range) = userinfo_at(&stripped) {
        stripped.replace_range(range, "");
        changed = true;
    }
    changed.then_some(stripped)
}

/// The first line of every copy, for whoever opens one.
const COPY_HEADER: &str = "# A copy without the credentials it held, made by `aileron launch` for the agent\n";

/// A file holding a credential, and the copy without it the agent reads in its place.
pub type Substitute = (PathBuf, PathBuf);

/// How a config file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Git,
    /// TOML: cargo's `config.toml`, mise's.
    Toml,
}

/// Cargo's config files outside what the agent may write: `$CARGO_HOME/config.toml` (and the old
/// `config`), and those in the directories above the workspace, which cargo reads too (those in
/// the agent's own trees are its to read and write already).
pub fn cargo_configs(env: &super::LaunchEnv, workspace: Option<&Path>, writable: &[PathBuf]) -> Vec<PathBuf> {
    let cargo_home = env.var("CARGO_HOME").map_or_else(|| env.home_dir.join(".cargo"), PathBuf::from);
    let mut dirs = vec![cargo_home];
    if let Some(workspace) = workspace {
        dirs.extend(workspace.ancestors().skip(1).map(|dir| dir.join(".cargo")));
    }
    files_outside(dirs.iter().flat_map(|dir| [dir.join("config.toml"), dir.join("config")]), writable)
}

/// Those of `files` that are files and lie, where they really are, outside every writable root
/// (those inside are the agent's to read and write already).
fn files_outside(files: impl IntoIterator<Item = PathBuf>, writable: &[PathBuf]) -> Vec<PathBuf> {
    let inside = |path: &Path| writable.iter().any(|root| path.starts_with(root));
    files
        .into_iter()
        .filter(|file| file.is_file() && !std::fs::canonicalize(file).is_ok_and(|real| inside(&real)))
        .collect()
}

/// mise's config files outside what the agent may write (`$XDG_CONFIG_HOME/mise/config.toml`,
/// `config.local.toml`, `conf.d/*.toml`, `~/.mise.toml`): their `[env]` sets tokens for every
/// shell of the user's (`GITHUB_TOKEN`, `NPM_TOKEN`), and the home's read list keeps them (the
/// thirtieth re-attack's B13). Read by the same rules as cargo's.
pub fn mise_configs(env: &super::LaunchEnv, writable: &[PathBuf]) -> Vec<PathBuf> {
    let dir = env.config_home().join("mise");
    let more = std::fs::read_dir(dir.join("conf.d")).into_iter().flatten().flatten().take(64).map(|entry| entry.path());
    let named = [dir.join("config.toml"), dir.join("config.local.toml"), env.home_dir.join(".mise.toml")];
    let more = more.filter(|file| file.extension().is_some_and(|extension| extension == "toml"));
    files_outside(named.into_iter().chain(more), writable)
}

/// Cargo's config `text` without what would hand the agent a credential, or `None` when it holds
/// none (or is not TOML cargo would read: it is shown as it is). Written again from its parse:
/// comments (where an old token may be kept) and layout are not kept.
pub fn cargo_without_credentials(text: &str) -> Option<Withheld> {
    let mut table: toml::Table = text.parse().ok()?;
    let mut keys = Vec::new();
    withhold_in(&mut table, "", &mut keys);
    if keys.is_empty() {
        return None;
    }
    let mut written = String::from(COPY_HEADER);
    written.push_str(&toml::to_string(&table).ok()?);
    Some(Withheld { text: written, keys })
}

/// Takes the secret keys out of `table` (at `prefix`), and user information out of URL strings.
fn withhold_in(table: &mut toml::Table, prefix: &str, keys: &mut Vec<String>) {
    let names: Vec<String> = table.keys().cloned().collect();
    for name in names {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        let lower = name.to_ascii_lowercase();
        // Cargo's own (`token`, `credential-provider` with its arguments) and `[env]` entries named
        // as credentials are (`NPM_AUTH`, `AWS_ACCESS_KEY_ID`, `SENTRY_DSN`).
        // `GITHUB_PAT`: a personal access token by its name (the twenty-ninth re-attack's A1f).
        let cargo_secret = ["auth", "credential", "key", "dsn", "pwd"].iter().any(|word| lower.contains(word))
            || lower.split(['_', '-', '.']).any(|word| word == "pat");
        // A string or a list of them (an alias) passing a secret on its command line, or holding a
        // token known by its form.
        let text = match table.get(&name) {
            Some(toml::Value::String(value)) => value.clone(),
            Some(toml::Value::Array(values)) => {
                values.iter().filter_map(toml::Value::as_str).collect::<Vec<_>>().join(" ")
            }
            _ => String::new(),
        };
        if is_secret_key(&lower) || cargo_secret || command_with_secret(&text) || holds_known_token(&text) {
            table.remove(&name);
            keys.push(path);
            continue;
        }
        // A proxy written without a scheme (`user:password@proxy:3128`), as cargo and curl take it.
        if lower.contains("proxy")
            && let Some(toml::Value::String(value)) = table.get_mut(&name)
            && let Some(stripped) = without_proxy_userinfo(value)
        {
            *value = stripped;
            keys.push(path);
            continue;
        }
        match table.get_mut(&name) {
            Some(toml::Value::Table(inner)) => withhold_in(inner, &path, keys),
            Some(toml::Value::String(value)) => {
                if let Some(stripped) = without_userinfo(value) {
                    *value = stripped;
                    keys.push(path);
                }
            }
            Some(toml::Value::Array(values)) => {
                for value in values.iter_mut() {
                    if let toml::Value::String(text) = value
                        && let Some(stripped) = without_userinfo(text)
                    {
                        *text = stripped;
                        if keys.last() != Some(&path) {
                            keys.push(path.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// The copies the agent reads instead of `configs` (the git config files read at launch): for
/// each that holds a credential, a copy without it written into `dir` (made 0700 when first
/// needed; in the Aileron home, out of the agent's sight; `None`: a dry run, nothing written).
/// Returns each file (canonical: the copy is bound where it really is, so a link to it shows the
/// copy too) with its copy, and a line for the user naming what was left out. A file that cannot
/// be read is left as it is.
/// A file's other names among `other_names` (hard links: the same file under a name in the
/// workspace) get the same copy.
pub fn copies(
    configs: &[(PathBuf, Format)],
    dir: Option<&Path>,
    other_names: &[PathBuf],
) -> std::io::Result<(Vec<Substitute>, Vec<String>)> {
    use std::os::unix::fs::MetadataExt as _;
    let (mut copies, mut lines) = (Vec::new(), Vec::new());
    let mut done = std::collections::HashSet::new();
    for (config, format) in configs {
        let Ok(real) = std::fs::canonicalize(config) else { continue };
        if !done.insert(real.clone()) {
            continue;
        }
        let Some(withheld) = read_without_credentials(&real, *format) else { continue };
        lines.push(format!("{} ({})", super::shown(config), withheld.keys.join(", ")));
        let Some(dir) = dir else { continue };
        crate::platform::home::create_private_dir(dir)?;
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        let copy = dir.join(format!("{}-{name}", copies.len() + 1));
        crate::platform::home::write_atomic(&copy, withheld.text.as_bytes(), 0o600)?;
        if let Ok(file) = std::fs::metadata(&real)
            && file.nlink() > 1
        {
            let same = |path: &&PathBuf| {
                std::fs::symlink_metadata(path)
                    .is_ok_and(|other| other.dev() == file.dev() && other.ino() == file.ino())
            };
            for name in other_names.iter().filter(same).filter(|name| **name != real) {
                copies.push((name.clone(), copy.clone()));
            }
        }
        copies.push((real, copy));
    }
    Ok((copies, lines))
}

/// Writes `copy` again from `file`'s content as it is now (a tool of the user's replaced it
/// while the agent runs); whether there is a copy to show (false: the file holds no credential
/// now, or cannot be read, and is shown as it is).
pub fn copy_again(file: &Path, copy: &Path, format: Format) -> bool {
    read_without_credentials(file, format)
        .is_some_and(|withheld| crate::platform::home::write_atomic(copy, withheld.text.as_bytes(), 0o600).is_ok())
}

/// `file` (read as it is, no link followed) without its credentials, if it holds any and can be
/// read.
fn read_without_credentials(file: &Path, format: Format) -> Option<Withheld> {
    let bytes = git::read_limited(file, false).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    match format {
        Format::Git => without_credentials(&text),
        Format::Toml => cargo_without_credentials(&text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_left_out_and_everything_else_reads_the_same() {
        let text = "\u{feff}[user]\n\tname = Ada ; a comment\n\temail = \"ada@example.com\"\n[url \
                    \"https://x-access-token:ghp_PLANTED1@github.com/\"]\n\tinsteadOf = https://github.com/\n[http \
                    \"https://example.com/\"]\n\textraHeader = Authorization: Bearer PLANTED2\n\tsslVerify\n[sendemail]\n\
                    \tsmtpPass = PLANTED3\n[remote \"origin\"]\n\turl = https://ada:PLANTED4@git.example.com/r.git\n\
                    \tfetch = +refs/heads/*:refs/remotes/origin/*\n[alias]\n\tlg = \"log --graph \\\"x\\\" \\\\ \
                    \\\n  --oneline\"\n[credential]\n\thelper = \"!f() { echo password=PLANTED5; }; f\"\n\thelper = \
                    !gh auth git-credential\n[include]\n\tpath = ~/.gitconfig-work\n[remote \"ssh\"]\n\turl = \
                    ssh://git@github.com/o/r.git\n";
        let withheld = without_credentials(text).expect("it holds credentials");
        for planted in ["PLANTED1", "PLANTED2", "PLANTED3", "PLANTED4", "PLANTED5"] {
            assert!(!withheld.text.contains(planted), "{planted} in:\n{}", withheld.text);
        }
        assert_eq!(
            withheld.keys,
            [
                "url.<…>.insteadof",
                "http.https://example.com/.extraheader",
                "sendemail.smtppass",
                "remote.origin.url",
                "credential.helper"
            ]
        );
        // What is kept reads as git read the original.
        let kept: Vec<Entry> = git::parse(text)
            .into_iter()
            .filter(|entry| {
                !(entry.section == "url"
                    || entry.key == "extraheader"
                    || entry.key == "smtppass"
                    || entry.value.as_deref().is_some_and(|value| value.contains("password=")))
            })
            .map(|mut entry| {
                if entry.key == "url" && entry.subsection.as_deref() == Some("origin") {
                    entry.value = Some("https://git.example.com/r.git".to_string());
                }
                entry
            })
            .collect();
        assert_eq!(git::parse(&withheld.text), kept, "{}", withheld.text);
        assert!(withheld.text.contains("ssh://git@github.com/o/r.git"), "an account name in an ssh URL is kept");
    }

    #[test]
    fn a_config_without_credentials_is_shown_as_it_is() {
        let text = "[user]\n\tname = Ada\n[remote \"origin\"]\n\turl = git@github.com:o/r.git\n[url \
                    \"git@github.com:\"]\n\tinsteadOf = https://github.com/\n[core]\n\tsshCommand = ssh -i ~/.ssh/k\n";
        assert_eq!(without_credentials(text), None);
        assert_eq!(without_userinfo("https://github.com/o/r@v1"), None, "an @ past the host is no user");
        assert_eq!(without_userinfo("HTTPS://tok@h/x").as_deref(), Some("HTTPS://h/x"));
        assert_eq!(
            without_userinfo("go https://a:b@h/x then git+https://c@i").as_deref(),
            Some("go https://h/x then git+https://i"),
            "every URL in a value, wherever it stands"
        );
    }

    #[test]
    fn cargos_tokens_and_passwords_are_left_out_of_its_config() {
        let text = "# token = \"cio_OLDPLANTED1\"\n[registry]\ntoken = \"cio_PLANTED2\"\ndefault = \"crates-io\"\n\
                    [registries.work]\nindex = \"sparse+https://ci:PLANTED3@cargo.example.com/index/\"\ntoken = \
                    \"PLANTED4\"\n[http]\nproxy = \"http://me:PLANTED5@proxy:3128\"\n[build]\njobs = 2\n\
                    rustflags = [\"-C\", \"target-cpu=native\"]\n[net]\ngit-fetch-with-cli = true\n";
        let withheld = cargo_without_credentials(text).expect("it holds credentials");
        for planted in ["PLANTED1", "PLANTED2", "PLANTED3", "PLANTED4", "PLANTED5"] {
            assert!(!withheld.text.contains(planted), "{planted} in:\n{}", withheld.text);
        }
        assert_eq!(withheld.keys, ["registry.token", "registries.work.index", "registries.work.token", "http.proxy"]);
        let copy: toml::Table = withheld.text.parse().unwrap();
        assert_eq!(copy["build"]["jobs"].as_integer(), Some(2));
        assert_eq!(copy["registry"]["default"].as_str(), Some("crates-io"));
        assert_eq!(copy["registries"]["work"]["index"].as_str(), Some("sparse+https://cargo.example.com/index/"));
        assert_eq!(copy["net"]["git-fetch-with-cli"].as_bool(), Some(true));
        assert_eq!(cargo_without_credentials("[build]\njobs = 2\n"), None);
        assert_eq!(cargo_without_credentials("not = [toml"), None, "what cargo would refuse is shown as it is");
    }

    /// The twenty-eighth re-attack's W2, W3 and W7: the environment's git config, `imap.pass`, a
    /// password over any scheme, cargo's `[env]` and credential providers, a proxy without a scheme.
    #[test]
    fn credentials_in_the_environment_and_in_every_scheme_and_name_are_found() {
        let vars: std::collections::HashMap<&str, &str> = [
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "Ada"),
            ("GIT_CONFIG_KEY_1", "http.extraHeader"),
            ("GIT_CONFIG_VALUE_1", "AUTHORIZATION: basic PLANTED1"),
            ("GIT_CONFIG_PARAMETERS", "'core.pager'='less' 'http.https://h/.extraheader'='Authorization: x PLANTED2'"),
        ]
        .into_iter()
        .collect();
        let (names, keys) = environment_credentials(|name| vars.get(name).map(|value| value.to_string()));
        for name in ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_1", "GIT_CONFIG_PARAMETERS"] {
            assert!(names.contains(&name.to_string()), "{name}: {names:?}");
        }
        assert!(keys.iter().any(|key| key.contains("extraheader")) && !keys.iter().any(|key| key.contains("PLANTED")));
        let clean: std::collections::HashMap<&str, &str> = [
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "user.name"),
            ("GIT_CONFIG_VALUE_0", "Ada"),
            ("GIT_CONFIG_PARAMETERS", "'core.pager'='less'"),
        ]
        .into_iter()
        .collect();
        assert_eq!(environment_credentials(|name| clean.get(name).map(|value| value.to_string())), (vec![], vec![]));
        let git = "[imap]\n\tpass = PLANTED3\n[remote \"s3\"]\n\turl = s3://AKIA:PLANTED4@bucket/r\n[remote \"ssh\"]\n\turl = \
                   ssh://git@github.com/o/r\n";
        let withheld = without_credentials(git).unwrap();
        assert!(
            !withheld.text.contains("PLANTED") && withheld.text.contains("ssh://git@github.com/o/r"),
            "{}",
            withheld.text
        );
        let cargo = "[env]\nDATABASE_URL = \"postgres://app:PLANTED5@db/app\"\nNPM_AUTH = \"PLANTED6\"\nRUST_LOG = \"info\"\n\
                     [registry]\ncredential-provider = [\"cargo:token-from-stdout\", \"echo\", \"PLANTED7\"]\n[http]\nproxy = \
                     \"me:PLANTED8@proxy:3128\"\n";
        let withheld = cargo_without_credentials(cargo).unwrap();
        assert!(!withheld.text.contains("PLANTED"), "{}", withheld.text);
        assert!(withheld.text.contains("RUST_LOG") && withheld.text.contains("proxy:3128"), "{}", withheld.text);
    }

    /// The twenty-ninth re-attack's A1 and A7: a proxy's password without a scheme, a password on a
    /// command line, a helper that builds its `password=` line, a subsection's URL escaped, a token
    /// in a cargo alias and under an `[env]` name no rule knew, and a `GIT_CONFIG_PARAMETERS` key
    /// holding an `=`.
    #[test]
    fn credentials_in_proxies_command_lines_escaped_urls_and_quoted_keys_are_found() {
        let git = "[http]\n\tproxy = ada:PLANTED1@proxy.example:3128\n[remote \"o\"]\n\tproxy = me:PLANTED2@p:8080\n\
                   [core]\n\tsshCommand = sshpass -p PLANTED3 ssh\n[credential]\n\thelper = \"!f() { printf '%s=%s\\\\n' \
                   password PLANTED4; }; f\"\n\thelper = !gh auth git-credential\n[url \"https:\\/\\/x:PLANTED5@github.com/\"]\n\
                   \tinsteadOf = https://gh.example/\n[alias]\n\tship = !tool --api-key=PLANTED6 up\n[github]\n\tuser = \
                   ghp_PLANTED7aaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n[core]\n\tsshCommand2 = ssh -p 2222\n";
        let withheld = without_credentials(git).unwrap();
        assert!(!withheld.text.contains("PLANTED"), "{}", withheld.text);
        for kept in ["proxy.example:3128", "p:8080", "!gh auth git-credential", "ssh -p 2222"] {
            assert!(withheld.text.contains(kept), "{kept} kept:\n{}", withheld.text);
        }
        let url = git::parse(git).into_iter().find(|entry| entry.section == "url").unwrap();
        assert_eq!(url.subsection.as_deref(), Some("https://x:PLANTED5@github.com/"), "unescaped as git reads it");
        let cargo = "[alias]\npub-work = \"publish --registry work --token PLANTED8\"\nrel = [\"publish\", \"--token\", \
                     \"PLANTED9\"]\nb = \"build --release\"\n[env]\nGITHUB_PAT = \"PLANTED10\"\nPATH_EXTRA = \"/opt\"\n";
        let withheld = cargo_without_credentials(cargo).unwrap();
        assert!(!withheld.text.contains("PLANTED"), "{}", withheld.text);
        assert!(withheld.text.contains("build --release") && withheld.text.contains("PATH_EXTRA"), "{}", withheld.text);
        let parameters = "'http.https://h.example/x=y.extraheader'='AUTHORIZATION: basic PLANTED11' 'core.pager=less' \
                          'user.name'='O'\\''Hara'";
        let entries = parameter_entries(parameters);
        assert_eq!(entries.len(), 3, "{entries:?}");
        assert_eq!(entries[0].key, "extraheader");
        assert_eq!(entries[2].value.as_deref(), Some("O'Hara"));
        let vars = [("GIT_CONFIG_PARAMETERS", parameters)];
        let (names, _) =
            environment_credentials(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string()));
        assert_eq!(names, ["GIT_CONFIG_PARAMETERS"]);
        assert!(parameter_entries("'unterminated").is_empty() && parameter_entries("'a'x").is_empty());
    }

    #[test]
    fn each_file_holding_one_gets_a_private_copy_and_a_line_naming_it() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap();
        let (clean, secret) = (home.join("clean"), home.join("dotfiles-gitconfig"));
        std::fs::write(&clean, "[user]\n\tname = Ada\n").unwrap();
        std::fs::write(&secret, "[github]\n\ttoken = PLANTED\n").unwrap();
        std::os::unix::fs::symlink(&secret, home.join(".gitconfig")).unwrap();
        let dir = home.join("run/withheld");
        let files = [clean, home.join(".gitconfig"), secret.clone()].map(|file| (file, Format::Git));
        let (copies, lines) = copies(&files, Some(&dir), &[]).unwrap();
        assert_eq!(copies.len(), 1, "one file, however many names lead to it: {copies:?}");
        assert_eq!(copies[0].0, secret, "bound where the file really is");
        let copy = std::fs::read_to_string(&copies[0].1).unwrap();
        assert!(!copy.contains("PLANTED") && copy.starts_with('#'), "{copy}");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].contains("github.token"), "{lines:?}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "[github]\n\ttoken = PLANTED\n", "the file is unchanged");
    }
}
