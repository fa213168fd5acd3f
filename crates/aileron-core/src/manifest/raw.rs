//! The manifest exactly as written: serde structs that reject unknown keys everywhere. Required keys are
//! `Option`s here so that validation can report them with its own message, line and hint.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawManifest {
    pub connector: Option<RawConnector>,
    pub capabilities: Option<RawCapabilities>,
    pub provides: Option<RawProvides>,
    pub proxy: Option<RawProxy>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProxy {
    pub placeholder_env: Option<Vec<String>>,
    pub operations: Option<Vec<RawProxyOperation>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProxyOperation {
    pub name: Option<String>,
    pub method: Option<String>,
    pub host: Option<String>,
    pub path: Option<String>,
    pub approval: Option<bool>,
    pub graphql: Option<String>,
    pub query: Option<String>,
    pub headers: Option<Vec<String>>,
    pub format: Option<String>,
    pub service: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConnector {
    pub name: Option<String>,
    pub version: Option<String>,
    pub provenance_hash: Option<String>,
    pub publisher: Option<String>,
    pub idempotency: Option<RawIdempotency>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIdempotency {
    pub default: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCapabilities {
    pub network: Option<RawNetwork>,
    pub credential: Option<RawCredential>,
    pub runtime: Option<RawRuntime>,
    pub spawn: Option<RawSpawn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    pub hosts: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCredential {
    pub kind: Option<String>,
    pub scope: Option<String>,
    pub header: Option<String>,
    pub format: Option<String>,
    pub service: Option<String>,
    pub region: Option<String>,
    pub oauth2: Option<RawOAuth2>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOAuth2 {
    pub authorize_url: Option<String>,
    pub token_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRuntime {
    pub imports: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpawn {
    pub programs: Option<Vec<RawProgram>>,
    pub operations: Option<BTreeMap<String, RawOperation>>,
    pub env_passthrough: Option<Vec<String>>,
    pub credential_env_keys: Option<Vec<String>>,
    pub fs_read: Option<Vec<String>>,
    pub fs_write: Option<Vec<String>>,
    pub cwd: Option<String>,
    pub limits: Option<RawLimits>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProgram {
    pub path: Option<String>,
    pub hash: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOperation {
    pub argv: Option<String>,
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub max_stdout_bytes: Option<i64>,
    pub max_stderr_bytes: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvides {
    pub intents: Option<Vec<String>>,
}
