//! `aileron connector upgrade <fqn> [--to VERSION]` (seed 004: "updating a connector is a visible
//! edit to action files"). Installs the new version through the install pipeline (its consent
//! screen), then re-pins every installed action that uses the connector — version and hash in
//! its `[[requires.connectors]]` entry, nothing else of the file — showing each edit as a diff and
//! asking once before any file changes. The daemon checks each re-pinned action against the new
//! manifest and audits it as `action.installed`; the old version stays installed until
//! `aileron connector gc`.

use std::io::IsTerminal;
use std::path::PathBuf;

use serde_json::json;

use super::{CliError, CliResult, ExitStatus, escape};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;
use crate::wire::{ActionList, ActionView};

pub struct Upgrade {
    pub fqn: String,
    pub to: Option<String>,
    pub from: Option<PathBuf>,
    pub yes: bool,
    pub allow_unsigned: bool,
}

pub async fn run(home: &Home, request: Upgrade) -> CliResult {
    let fqn = aileron_core::Fqn::parse(&request.fqn).map_err(|e| {
        CliError::usage(format!("{e}\nhint: name the connector without a version, e.g. github://acme/slack"))
    })?;
    let client = DaemonClient::connect(home).await?;
    let version = match &request.to {
        Some(version) => semver::Version::parse(version).map_err(|e| {
            CliError::usage(format!("--to {}: {e}\nhint: write MAJOR.MINOR.PATCH, e.g. 1.2.0", escape(version)))
        })?,
        None if request.from.is_some() => {
            return Err(CliError::usage(
                "--from needs --to: say which version the package holds\nhint: add --to VERSION",
            ));
        }
        None => newest_release(&client, &fqn).await?,
    };
    let reference = format!("{fqn}@{version}");
    let code = super::install::install_for_upgrade(
        home,
        &reference,
        request.from.clone(),
        request.yes,
        request.allow_unsigned,
    )
    .await?;
    if code != ExitStatus::Ok {
        return Ok(code);
    }
    let installed = client.get("/v1/connectors").await?;
    let hash = installed["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["fqn"] == fqn.to_string() && item["version"] == version.to_string())
        .and_then(|item| item["hash"].as_str())
        .ok_or_else(|| {
            CliError::failure(format!("{reference} is not installed after all\nhint: run the command again"))
        })?
        .to_string();

    let listing: ActionList = client.get_as("/v1/actions").await?;
    let mut edits = Vec::new();
    for item in listing.items.iter().filter(|item| item.connectors.iter().any(|c| c.name == fqn.to_string())) {
        let view: ActionView = client.get_as(&format!("/v1/actions/{}", crate::wire::path_segment(&item.name))).await?;
        let Some(source) = view.source.clone() else {
            eprintln!(
                "warning: action {} is left as it is: its file changed on disk since the daemon loaded it",
                escape(&view.name)
            );
            continue;
        };
        match repin(&source, &fqn.to_string(), &version.to_string(), &hash) {
            Ok(Some(after)) => edits.push((view.name.clone(), source, after)),
            Ok(None) => {}
            Err(problem) => eprintln!("warning: action {} is left as it is: {problem}", escape(&view.name)),
        }
    }
    if edits.is_empty() {
        // The install printed the hash on stdout already.
        eprintln!("no installed action pins an older {fqn}; nothing to re-pin");
        return Ok(ExitStatus::Ok);
    }
    for (name, before, after) in &edits {
        eprintln!("actions/{name}.md:\n{}", escape_diff(&crate::surfaces::launch::config_file::diff(before, after)));
    }
    if !request.yes {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::failure(
                "re-pinning the actions above needs your consent, and there is no terminal to ask on\nhint: review the \
                 edits and re-run with --yes",
            ));
        }
        if !super::ask(&format!("Re-pin {} action(s) to {reference}? [y/N] ", edits.len()))? {
            eprintln!(
                "cancelled; no action was changed ({reference} stays installed; `aileron connector gc` removes it)"
            );
            return Ok(ExitStatus::Failure);
        }
    }
    let mut failed = 0;
    for (name, _, after) in &edits {
        let body = json!({ "file_name": format!("{name}.md"), "content": after, "force": true });
        match client.post_as::<_, ActionView>("/v1/actions/install", &body).await {
            Ok(_) => eprintln!("re-pinned action {name} to {reference}"),
            Err(error) => {
                failed += 1;
                eprintln!("error: action {name} was not re-pinned: {error:#}");
            }
        }
    }
    eprintln!("the previous version stays installed until `aileron connector gc` (no action uses it now)");
    Ok(if failed == 0 { ExitStatus::Ok } else { ExitStatus::Failure })
}

/// The newest released version above every installed one, from the forge.
async fn newest_release(client: &DaemonClient, fqn: &aileron_core::Fqn) -> Result<semver::Version, CliError> {
    let checked = client.get("/v1/connectors/check").await?;
    let item =
        checked["items"].as_array().into_iter().flatten().find(|item| item["fqn"] == fqn.to_string()).ok_or_else(
            || CliError::failure(format!("{fqn} is not installed\nhint: `aileron connector install {fqn}@<version>`")),
        )?;
    if let Some(error) = item["error"].as_str() {
        return Err(CliError::failure(format!(
            "could not list the releases of {fqn}: {}\nhint: name one with --to VERSION",
            escape(error)
        )));
    }
    item["newer"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|version| version.as_str().and_then(|version| semver::Version::parse(version).ok()))
        .max()
        .ok_or_else(|| {
            CliError::failure(format!("{fqn} is up to date\nhint: `aileron connector check --pre` lists pre-releases"))
        })
}

/// A diff of an action file, its lines escaped (the file's text is the action author's).
fn escape_diff(diff: &str) -> String {
    diff.lines().map(|line| format!("{}\n", escape(line))).collect()
}

/// `source` (an action file) with the `[[requires.connectors]]` entry for `fqn` pinned to
/// `version` and `hash`; every other byte kept. `None` when it already pins exactly that.
pub fn repin(source: &str, fqn: &str, version: &str, hash: &str) -> Result<Option<String>, String> {
    let bom = if source.starts_with('\u{feff}') { "\u{feff}" } else { "" };
    let text = &source[bom.len()..];
    let opening =
        text.split_inclusive('\n').next().filter(|line| line.trim_end() == "+++").ok_or("it does not open with +++")?;
    let rest = &text[opening.len()..];
    let mut offset = 0;
    let closing_at = rest
        .split_inclusive('\n')
        .find_map(|line| {
            let at = offset;
            offset += line.len();
            (line.trim_end() == "+++").then_some(at)
        })
        .ok_or("its frontmatter is never closed")?;
    let (frontmatter, tail) = rest.split_at(closing_at);
    let mut document: toml_edit::DocumentMut = frontmatter.parse().map_err(|e| format!("its frontmatter: {e}"))?;
    let entries = document
        .get_mut("requires")
        .and_then(|requires| requires.get_mut("connectors"))
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .ok_or("it has no [[requires.connectors]]")?;
    // A new value in place of the old, keeping its spacing and trailing comment.
    let set = |entry: &mut toml_edit::Table, key: &str, text: &str| -> bool {
        match entry.get_mut(key).and_then(toml_edit::Item::as_value_mut) {
            Some(value) if value.as_str() == Some(text) => false,
            Some(value) => {
                let decor = value.decor().clone();
                *value = toml_edit::Value::from(text);
                *value.decor_mut() = decor;
                true
            }
            None => {
                entry[key] = toml_edit::value(text);
                true
            }
        }
    };
    let mut changed = false;
    for entry in entries.iter_mut().filter(|entry| entry.get("name").and_then(|name| name.as_str()) == Some(fqn)) {
        changed |= set(entry, "version", version);
        changed |= set(entry, "hash", hash);
    }
    Ok(changed.then(|| format!("{bom}{opening}{document}{tail}")))
}

#[cfg(test)]
mod tests {
    use super::repin;

    #[test]
    fn only_the_connectors_version_and_hash_change() {
        let old = format!("sha256:{}", "a".repeat(64));
        let new = format!("sha256:{}", "b".repeat(64));
        let source = format!(
            "+++\nname = \"post\" # the action\nversion = \"1.0.0\"\n\n[[requires.connectors]]\nname = \"github://acme/slack\"\n\
             version = \"1.0.0\"  # pinned\nhash = \"{old}\"\ncapabilities = [\"post\"]\n\n[[requires.connectors]]\n\
             name = \"github://acme/other\"\nversion = \"1.0.0\"\nhash = \"{old}\"\ncapabilities = [\"x\"]\n+++\n# Post\n\nBody +++ text.\n"
        );
        let after = repin(&source, "github://acme/slack", "1.1.0", &new).unwrap().unwrap();
        let expected = source
            .replacen("version = \"1.0.0\"  # pinned", "version = \"1.1.0\"  # pinned", 1)
            .replacen(&old, &new, 1);
        assert_eq!(after, expected);
        assert_eq!(repin(&after, "github://acme/slack", "1.1.0", &new).unwrap(), None, "already pinned");
        assert!(repin("no frontmatter", "github://acme/slack", "1.1.0", &new).is_err());
    }
}
