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
    key == "smtppass"
        || key == "extraheader"
        || ["token", "password", "passwd", "secret", "apikey", "api-key"].iter().any(|word| key.contains(word))
}

/// `text` (a git config file) written again without what would hand the agent a credential, or
/// `None` when it holds none (the file is then shown as it is). Written from the entries as
/// git's own parser reads them ([`git::parse`]): comments and layout are not kept, every value
/// is quoted, and a URL's user and password are taken out of the values that keep their place.
pub fn without_credentials(text: &str) -> Option<Withheld> {
    let mut keys = Vec::new();
    let mut kept = Vec::new();
    for mut entry in git::parse(text) {
        let subsection_secret = entry.subsection.as_deref().is_some_and(|sub| userinfo_at(sub).is_some());
        if subsection_secret || is_secret_key(&entry.key) || helper_with_secret(&entry) {
            keys.push(named(&entry, subsection_secret));
            continue;
        }
        if let Some(value) = entry.value.as_deref()
            && let Some(stripped) = without_userinfo(value)
        {
            keys.push(named(&entry, false));
            entry.value = Some(stripped);
        }
        kept.push(entry);
    }
    if keys.is_empty() {
        return None;
    }
    keys.dedup();
    Some(Withheld { text: written(&kept), keys })
}

/// `section.key` as the user would look it up (`url.<…>.insteadof`: a subsection holding a
/// credential is not repeated).
fn named(entry: &Entry, hide_subsection: bool) -> String {
    match (&entry.subsection, hide_subsection) {
        (Some(_), true) => format!("{}.<…>.{}", entry.section, entry.key),
        (Some(sub), false) => format!("{}.{sub}.{}", entry.section, entry.key),
        (None, _) => format!("{}.{}", entry.section, entry.key),
    }
}

/// A `credential.helper` that is a shell snippet printing a password or token itself.
fn helper_with_secret(entry: &Entry) -> bool {
    entry.section == "credential"
        && entry.key == "helper"
        && entry.value.as_deref().is_some_and(|value| value.contains("password=") || value.contains("token="))
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
        if !matches!(scheme.as_str(), "http" | "https" | "ftp" | "ftps") {
            continue;
        }
        let authority_end = text[start..].find(['/', '?', '#', ' ', '\t', '"']).map_or(text.len(), |end| start + end);
        if let Some(at) = text[start..authority_end].rfind('@') {
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

/// Entries written back as a config file git reads the same: one section header where the
/// section changes, every value quoted with its quotes, backslashes and line ends escaped.
fn written(entries: &[Entry]) -> String {
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
    let mut text = String::from("# A copy without the credentials it held, made by `aileron launch` for the agent\n");
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

/// A file holding a credential, and the copy without it the agent reads in its place.
pub type Substitute = (PathBuf, PathBuf);

/// How a config file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Git,
    /// Cargo's `config.toml` (TOML).
    Cargo,
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
    let inside = |path: &Path| writable.iter().any(|root| path.starts_with(root));
    dirs.iter()
        .flat_map(|dir| [dir.join("config.toml"), dir.join("config")])
        .filter(|file| file.is_file() && !std::fs::canonicalize(file).is_ok_and(|real| inside(&real)))
        .collect()
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
    let mut written =
        String::from("# A copy without the credentials it held, made by `aileron launch` for the agent\n");
    written.push_str(&toml::to_string(&table).ok()?);
    Some(Withheld { text: written, keys })
}

/// Takes the secret keys out of `table` (at `prefix`), and user information out of URL strings.
fn withhold_in(table: &mut toml::Table, prefix: &str, keys: &mut Vec<String>) {
    let names: Vec<String> = table.keys().cloned().collect();
    for name in names {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        if is_secret_key(&name.to_ascii_lowercase()) {
            table.remove(&name);
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
pub fn copies(configs: &[(PathBuf, Format)], dir: Option<&Path>) -> std::io::Result<(Vec<Substitute>, Vec<String>)> {
    let (mut copies, mut lines) = (Vec::new(), Vec::new());
    let mut done = std::collections::HashSet::new();
    for (config, format) in configs {
        let Ok(real) = std::fs::canonicalize(config) else { continue };
        if !done.insert(real.clone()) {
            continue;
        }
        let Ok(bytes) = git::read_limited(&real, false) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let withheld = match format {
            Format::Git => without_credentials(&text),
            Format::Cargo => cargo_without_credentials(&text),
        };
        let Some(withheld) = withheld else { continue };
        lines.push(format!("{} ({})", super::shown(config), withheld.keys.join(", ")));
        let Some(dir) = dir else { continue };
        crate::platform::home::create_private_dir(dir)?;
        let name = real.file_name().unwrap_or_default().to_string_lossy();
        let copy = dir.join(format!("{}-{name}", copies.len() + 1));
        crate::platform::home::write_atomic(&copy, withheld.text.as_bytes(), 0o600)?;
        copies.push((real, copy));
    }
    Ok((copies, lines))
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
        let (copies, lines) = copies(&files, Some(&dir)).unwrap();
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
