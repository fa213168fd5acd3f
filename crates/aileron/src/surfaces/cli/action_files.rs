//! `aileron action add <file or directory> [--pin]`: local action files, one or a whole tree.
//! A directory holds the original project's published layout, `actions/<name>/action.md` (the
//! directory names the action), and/or `<name>.md` files. Every file is checked by the daemon
//! first; `--pin` then asks once per connector — pin the placeholder hashes to the installed
//! connector (shown with its hash and whether it is signed), and add its credential kind to
//! capabilities that lack it — and only then installs. One bad file does not stop the others.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{CliError, CliResult, ExitStatus};
use crate::surfaces::client::DaemonClient;
use crate::wire::{ActionRequirements, ActionView, RequiredConnector};

/// The published layout's file name: its directory names the action.
const PUBLISHED_FILE: &str = "action.md";

pub(super) struct LocalAdd {
    pub yes: bool,
    pub force: bool,
    pub pin: bool,
}

/// One action file to add.
struct LocalFile {
    path: PathBuf,
    /// What the daemon checks the action's `name` against (`<name>.md`).
    file_name: String,
    content: String,
}

/// A connector the consent asks about once, for every file that pins it.
#[derive(Default)]
struct ConnectorConsent {
    hash: String,
    signed: Option<bool>,
    actions: Vec<String>,
    placeholder: Option<String>,
    grant: Option<String>,
}

pub(super) async fn add_files(client: &DaemonClient, path: &Path, flags: LocalAdd) -> CliResult {
    let files = collect(path)?;
    let many = files.len() > 1;
    let mut failed = 0usize;
    // 1. Every file checked (and, with --pin, what pinning would change) before anything installs.
    let mut checked: Vec<(LocalFile, ActionRequirements)> = Vec::new();
    for file in files {
        let body = body(&file, &flags, flags.pin, true);
        match client.post_as::<_, ActionRequirements>("/v1/actions/install", &body).await {
            Ok(requirements) => checked.push((file, requirements)),
            Err(error) if many => {
                failed += 1;
                eprintln!("error: {}: {error:#}", file.path.display());
            }
            Err(error) => return Err(error.into()),
        }
    }
    // 2. One consent per connector.
    let mut consents: BTreeMap<String, ConnectorConsent> = BTreeMap::new();
    for (_, requirements) in &checked {
        for required in &requirements.requires {
            if required.pinned_from.is_none() && required.granted.is_none() {
                continue;
            }
            let consent = consents.entry(format!("{}@{}", required.name, required.version)).or_default();
            consent.hash = required.hash.clone();
            consent.signed = required.signed;
            consent.actions.push(requirements.name.clone());
            consent.placeholder = consent.placeholder.take().or_else(|| required.pinned_from.clone());
            consent.grant = consent.grant.take().or_else(|| required.granted.clone());
        }
    }
    let mut declined_pins = Vec::new();
    let mut declined_grants = Vec::new();
    for (connector, consent) in &consents {
        let (pin, grant) = ask_consent(connector, consent, flags.yes)?;
        if !pin {
            declined_pins.push(connector.clone());
        }
        if !grant {
            declined_grants.push(connector.clone());
        }
    }
    // 3. Install what was consented to.
    for (file, requirements) in checked {
        let reference = |required: &RequiredConnector| format!("{}@{}", required.name, required.version);
        let pinned = |required: &&RequiredConnector| required.pinned_from.is_some();
        if let Some(refused) =
            requirements.requires.iter().filter(pinned).find(|r| declined_pins.contains(&reference(r)))
        {
            failed += 1;
            eprintln!("not added: action {} (you did not pin {})", requirements.name, reference(refused));
            continue;
        }
        let grant = requirements
            .requires
            .iter()
            .filter(|required| required.granted.is_some())
            .all(|required| !declined_grants.contains(&reference(required)));
        let previous = installed_action(client, &requirements.name).await;
        let body = body(&file, &flags, flags.pin && grant, false);
        match client.post_as::<_, ActionView>("/v1/actions/install", &body).await {
            Ok(added) => {
                // What the daemon stored: pinned, perhaps with a capability added.
                let stored = installed_action(client, &added.name).await.and_then(|view| view.source);
                report_added(previous.as_ref(), &added, stored.as_deref().unwrap_or(&file.content), None);
                let missing = requirements.requires.iter().filter_map(|required| {
                    let kind = required.missing_credential.as_ref().or(required.granted.as_ref().filter(|_| !grant))?;
                    Some((required, kind))
                });
                let fix =
                    format!(", or re-add with `aileron action add {} --pin --force` to be asked", file.path.display());
                for (required, kind) in missing {
                    warn_missing_credential(&requirements.name, &required.name, kind, &fix);
                }
            }
            Err(error) if many => {
                failed += 1;
                eprintln!("error: {}: {error:#}", file.path.display());
            }
            Err(error) => return Err(error.into()),
        }
    }
    if failed > 0 {
        eprintln!("{failed} of the action files in {} were not added (see above)", path.display());
        return Ok(ExitStatus::Failure);
    }
    Ok(ExitStatus::Ok)
}

/// The install body for `file`: `verify_only` checks and reports what `--pin` would change.
fn body(file: &LocalFile, flags: &LocalAdd, grant_credentials: bool, verify_only: bool) -> serde_json::Value {
    json!({
        "file_name": file.file_name,
        "content": file.content,
        "force": flags.force,
        "pin": flags.pin,
        "grant_credentials": grant_credentials,
        "verify_only": verify_only,
    })
}

/// Shows what pinning `connector` means and asks (or takes `--yes`): `(pin, add the credential)`.
fn ask_consent(connector: &str, consent: &ConnectorConsent, yes: bool) -> Result<(bool, bool), CliError> {
    let signed = match consent.signed {
        Some(true) => "installed, signed",
        Some(false) => "installed, unsigned",
        None => "installed",
    };
    let count = consent.actions.len();
    let actions = if count == 1 { consent.actions[0].clone() } else { format!("{count} actions") };
    let mut pin = true;
    if let Some(placeholder) = &consent.placeholder {
        eprintln!(
            "{actions} pin{} {connector} with the placeholder hash {placeholder}\n  pin to the installed connector: \
             {} ({signed})",
            if count == 1 { "s" } else { "" },
            consent.hash
        );
        pin = confirm("Pin to this connector? [y/N] ", yes)?;
    }
    let mut grant = pin;
    if let (Some(kind), true) = (&consent.grant, pin) {
        eprintln!(
            "  {connector} injects an {kind} credential, which {} capabilities do not list: without it every run \
             that uses it fails capability_denied",
            if count == 1 { "the action's" } else { "their" }
        );
        grant = confirm(
            &format!("Add \"{kind}\" to {} capabilities? [y/N] ", if count == 1 { "its" } else { "their" }),
            yes,
        )?;
    }
    Ok((pin, grant))
}

fn confirm(question: &str, yes: bool) -> Result<bool, CliError> {
    if yes {
        eprintln!("{question}yes (--yes)");
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::failure(
            "pinning needs your consent, and there is no terminal to ask on\nhint: review the above and re-run with \
             --pin --yes",
        ));
    }
    super::ask(question)
}

/// Said at add time rather than at the first run (seed 004: an action uses only the
/// capabilities it declares).
/// `fix`: how this user can declare it.
pub(super) fn warn_missing_credential(action: &str, connector: &str, kind: &str, fix: &str) {
    eprintln!(
        "warning: action {action}: {connector} injects an {kind} credential, which the action's capabilities do not \
         list: a run whose op asks for it fails capability_denied (an op that needs no credential runs)\nhint: add \
         \"{kind}\" to that [[requires.connectors]] entry's capabilities{fix}"
    );
}

/// The action files at `path`: the file itself, or in a directory each `<name>/action.md` and
/// each `*.md`, sorted.
fn collect(path: &Path) -> Result<Vec<LocalFile>, CliError> {
    if !path.is_dir() {
        return Ok(vec![read(path)?]);
    }
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
        let entry = entry.with_context(|| format!("reading {}", path.display()))?.path();
        if entry.join(PUBLISHED_FILE).is_file() {
            paths.push(entry.join(PUBLISHED_FILE));
        } else if entry.is_file() && entry.extension().is_some_and(|extension| extension == "md") {
            paths.push(entry);
        }
    }
    if paths.is_empty() {
        return Err(CliError::failure(format!(
            "{} holds no action files\nhint: an action file is <name>.md, or <name>/action.md as published",
            path.display()
        )));
    }
    paths.sort();
    paths.iter().map(|path| read(path)).collect()
}

fn read(path: &Path) -> Result<LocalFile, CliError> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let content = String::from_utf8(bytes).map_err(|_| {
        CliError::failure(format!(
            "{} is neither an action file (UTF-8 Markdown) nor an action package\nhint: pass an action file \
             (Markdown with +++ TOML frontmatter) or the aileron.tar.gz `aileron action pack` makes",
            path.display()
        ))
    })?;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let file_name = match path.parent().and_then(Path::file_name).and_then(|n| n.to_str()) {
        // The published layout: `actions/<name>/action.md` is the action `<name>`.
        Some(directory) if file_name == PUBLISHED_FILE => format!("{directory}.md"),
        _ => file_name.to_string(),
    };
    Ok(LocalFile { path: path.to_path_buf(), file_name, content })
}

/// The installed action named `name`, if any (to say what an add replaced).
pub(super) async fn installed_action(client: &DaemonClient, name: &str) -> Option<ActionView> {
    if name.is_empty() {
        return None;
    }
    let path = format!("/v1/actions/{}", crate::wire::path_segment(name));
    let (status, body) = client.call_raw(Method::GET, &path, None).await.ok()?;
    if status != StatusCode::OK {
        return None;
    }
    serde_json::from_value(body).ok()
}

/// `added action …`, or `replaced action … with …` (and whether it stays disabled).
pub(super) fn report_added(previous: Option<&ActionView>, added: &ActionView, content: &str, origin: Option<&str>) {
    let from = origin.map(|origin| format!(" from {origin}")).unwrap_or_default();
    let approval = if added.requires_approval { ", requires approval" } else { "" };
    match previous {
        Some(previous) if previous.source.as_deref() != Some(content) => eprintln!(
            "replaced action {} {} with {}{from} (tool `{}`{approval})",
            added.name, previous.version, added.version, added.tool_name
        ),
        _ => eprintln!("added action {} {}{from} (tool `{}`{approval})", added.name, added.version, added.tool_name),
    }
    if !added.enabled {
        eprintln!("action {} stays disabled; enable it with: aileron action enable {}", added.name, added.name);
    }
    // Valid, but denied at every run (SPEC §4.5): said now rather than at the first run.
    let denied = aileron_core::action::parse_action(content, &format!("{}.md", added.name))
        .map(|action| action.ops_outside_capabilities())
        .unwrap_or_default();
    for (call, op, connector) in denied {
        eprintln!(
            "warning: {call} calls the op `{op}`, which the action's capabilities for {connector} do not list: every run \
             will fail capability_denied\nhint: add \"{op}\" to that [[requires.connectors]] entry's capabilities"
        );
    }
}
