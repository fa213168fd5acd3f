//! The answers of the connector routes (SPEC §3, §7): the installed list, the install pipeline's
//! preview and install, a declined consent, the release check, removal and collection.

use aileron_core::manifest::CredentialKind;
use aileron_core::{ContentHash, FailureClass, Fqn};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `GET /v1/connectors`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorList {
    pub items: Vec<InstalledConnector>,
}

/// One installed connector version, described in the consent's words.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InstalledConnector {
    pub fqn: Fqn,
    pub version: String,
    pub hash: ContentHash,
    /// `signed (verified at install)` or `unsigned`.
    pub signature: String,
    pub publisher: Option<String>,
    /// What it may touch, one plain sentence each.
    pub capabilities: Vec<String>,
    pub intents: Vec<String>,
    pub credential: Option<CredentialKind>,
}

/// What the install pipeline read and checked of a release, before consent: the bytes' hash,
/// who signed them and what they may do.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorRelease {
    pub fqn: Fqn,
    pub version: String,
    pub hash: ContentHash,
    pub short_hash: String,
    pub publisher: Option<String>,
    /// `unsigned`, or `signed by <authority> (key <fingerprint>)`.
    pub signature: String,
    pub signed: bool,
    /// The key that verified the signature; `null` when unsigned.
    pub signer: Option<Signer>,
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Signer {
    pub authority: String,
    pub fingerprint: String,
}

/// `POST /v1/connectors/preview`: the release and whether these exact bytes are installed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorPreview {
    #[serde(flatten)]
    pub release: ConnectorRelease,
    pub already_installed: bool,
}

/// `POST /v1/connectors/install` → 201: the release, its `connector.installed` record, where it
/// is stored and whether its module compiled.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorInstalled {
    #[serde(flatten)]
    pub release: ConnectorRelease,
    pub audit_id: String,
    pub store_path: String,
    pub compiled: Compiled,
}

/// `POST /v1/connectors/install` with `consent: declined` → 200: the decision's record.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct InstallDeclined {
    pub declined: bool,
    pub audit_id: String,
}

/// The module compiled at install (`ok`, with its time and artifact size), or why it did not: it
/// stays installed and a run reports the same failure.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Compiled {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub milliseconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /v1/connectors/check`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseCheck {
    pub items: Vec<ReleaseCheckItem>,
}

/// One installed connector: its versions and the newer releases, or why its forge could not say.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseCheckItem {
    pub fqn: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newer: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retriable: Option<bool>,
}

impl ReleaseCheckItem {
    /// The item of `fqn` with nothing found yet.
    pub fn of(fqn: String) -> ReleaseCheckItem {
        ReleaseCheckItem { fqn, installed: None, newer: None, error: None, retriable: None }
    }
}

/// `POST /v1/connectors/remove`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorRemoved {
    /// The reference as given.
    pub removed: String,
    pub hash: ContentHash,
}

/// `POST /v1/connectors/gc`: the references removed and the compiled artifacts swept.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Collected {
    pub removed: Vec<String>,
    pub compiled_artifacts_removed: usize,
}
