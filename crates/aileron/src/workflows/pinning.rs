//! `aileron action add --pin`: the original project publishes action files whose
//! `[[requires.connectors]] hash` is the placeholder `sha256:bound-at-release`. With the user's
//! consent (`pin`), each such entry is pinned to the installed connector of that name and
//! version; with a second consent (`grant_credentials`), the connector's credential kind is added
//! to the action's capabilities when they lack it (seed 004: an action uses only the capabilities
//! it declares, and the user's explicit yes is the declaration). The rest of the file keeps its
//! bytes: only those two values change, through `toml_edit`.

use aileron_core::identity::{ConnectorRef, ContentHash, Fqn};
use axum::http::StatusCode;

use super::Services;
use crate::wire::ApiError;

/// What a pin changed in one `[[requires.connectors]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinChange {
    pub connector: Fqn,
    /// The placeholder the file had, when the hash was pinned.
    pub pinned_from: Option<String>,
    /// The credential kind added to the entry's capabilities.
    pub granted: Option<String>,
}

/// The file as it will be stored, and what changed.
pub struct Pinned {
    pub text: String,
    pub changes: Vec<PinChange>,
}

/// Pins and grants as asked; a file with nothing to change comes back as it was. Entries this
/// cannot read are left for the action parser to report with their line.
pub fn pin(state: &Services, text: &str, pin: bool, grant_credentials: bool) -> Result<Pinned, ApiError> {
    let unchanged = || Pinned { text: text.to_string(), changes: Vec::new() };
    let Some(range) = aileron_core::action::frontmatter_range(text) else { return Ok(unchanged()) };
    let (head, frontmatter, tail) = (&text[..range.start], &text[range.clone()], &text[range.end..]);
    let Ok(mut document) = frontmatter.parse::<toml_edit::DocumentMut>() else { return Ok(unchanged()) };
    let Some(entries) = document
        .get_mut("requires")
        .and_then(|requires| requires.get_mut("connectors"))
        .and_then(toml_edit::Item::as_array_of_tables_mut)
    else {
        return Ok(unchanged());
    };
    let mut changes = Vec::new();
    for entry in entries.iter_mut() {
        let text_of = |key: &str| entry.get(key).and_then(toml_edit::Item::as_str).map(str::to_string);
        let (Some(name), Some(version), Some(hash)) = (text_of("name"), text_of("version"), text_of("hash")) else {
            continue;
        };
        let (Ok(fqn), Ok(version)) = (Fqn::parse(&name), semver::Version::parse(&version)) else { continue };
        let reference = ConnectorRef { fqn: fqn.clone(), version };
        let mut change = PinChange { connector: fqn, pinned_from: None, granted: None };
        let installed = match ContentHash::parse(&hash) {
            Ok(hash) => Some(hash),
            Err(_) if pin => {
                let installed = state.store.resolve(&reference).map_err(ApiError::internal)?.ok_or_else(|| {
                    ApiError::new(
                        StatusCode::CONFLICT,
                        "connector_not_installed",
                        format!("cannot pin {reference}: no connector of that name and version is installed"),
                    )
                    .with_hint(format!(
                        "install it first: aileron connector install --from <dir or aileron.tar.gz> {reference}"
                    ))
                })?;
                entry.insert("hash", toml_edit::value(installed.to_string()));
                change.pinned_from = Some(hash);
                Some(installed)
            }
            Err(_) => None,
        };
        let kind = match installed.filter(|_| grant_credentials) {
            Some(hash) => {
                state.store.find(&hash).map_err(ApiError::internal)?.and_then(|e| e.manifest.credential_kind())
            }
            None => None,
        };
        if let (Some(kind), Some(capabilities)) =
            (kind, entry.get_mut("capabilities").and_then(toml_edit::Item::as_array_mut))
            && !capabilities.iter().any(|listed| listed.as_str() == Some(kind.as_str()))
        {
            capabilities.push(kind.as_str());
            change.granted = Some(kind.as_str().to_string());
        }
        if change.pinned_from.is_some() || change.granted.is_some() {
            changes.push(change);
        }
    }
    if changes.is_empty() {
        return Ok(unchanged());
    }
    Ok(Pinned { text: format!("{head}{document}{tail}"), changes })
}
