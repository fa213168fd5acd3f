//! Request bodies of the vault, secret, binding and keyring routes (SPEC §3.5, §6, §7). Secret
//! values arrive in `Zeroizing` strings: wiped when the request is done with them, never printed.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use zeroize::Zeroizing;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PassphraseBody {
    #[schemars(with = "String")]
    pub passphrase: Zeroizing<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetSecret {
    pub path: String,
    #[schemars(with = "String")]
    pub value: Zeroizing<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Replace a secret already stored at `path` (without it, that is 409 `secret_exists`)
    // As a second `binding setup` is refused: an overwrite loses a credential, so never silently.
    #[serde(default)]
    pub force: bool,
}

/// The material of a binding as the CLI sends it: an api_key, aws_sigv4 keys, or an oauth2
/// refresh token another tool already holds (the authorization flow is the other way in).
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaterialBody {
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub api_key: Option<Zeroizing<String>>,
    #[serde(default)]
    pub aws: Option<AwsBody>,
    #[serde(default)]
    pub oauth2: Option<OAuth2ImportBody>,
}

/// An OAuth2 refresh token imported instead of running the authorization flow (a login another
/// tool made, e.g. gcloud's): the first use refreshes it at the connector's token URL. The client
/// it was issued to, when not the manifest's.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuth2ImportBody {
    #[schemars(with = "String")]
    pub refresh_token: Zeroizing<String>,
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub client_secret: Option<Zeroizing<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwsBody {
    pub access_key_id: String,
    #[schemars(with = "String")]
    pub secret_access_key: Zeroizing<String>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub session_token: Option<Zeroizing<String>>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetupBody {
    pub connector: String,
    #[serde(default)]
    pub identity: Option<String>,
    #[serde(flatten)]
    pub material: MaterialBody,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthInit {
    /// The connector to bind; or `rebind` names an existing binding to reauthorize.
    #[serde(default)]
    pub connector: Option<String>,
    #[serde(default)]
    pub identity: Option<String>,
    #[serde(default)]
    pub rebind: Option<String>,
    /// `cli` (default): the CLI serves the redirect on `redirect_port`; `daemon`: the daemon does
    /// and then sends the browser to `return_to`.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub redirect_port: Option<u16>,
    #[serde(default)]
    pub return_to: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthFinish {
    pub session_id: String,
    #[schemars(with = "String")]
    pub code: Zeroizing<String>,
    pub state: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct CallbackQuery {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustBody {
    pub authority: String,
    /// PEM SPKI or base64 of the raw 32 bytes.
    pub key: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RevokeBody {
    #[serde(default)]
    pub authority: Option<String>,
    #[serde(default)]
    pub fingerprint: Option<String>,
}

/// `GET /v1/vault/status` (and the answer of init, unlock and lock).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct VaultView {
    /// `absent`, `locked` or `unlocked`.
    pub state: String,
    pub path: String,
    pub secrets: usize,
    pub bindings: usize,
    /// Approved runs waiting for the vault to be unlocked.
    pub awaiting_vault: usize,
}

/// One free-form secret: its path and metadata, never its value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecretEntry {
    pub path: String,
    pub metadata: Value,
}

/// `GET /v1/secrets`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecretList {
    pub items: Vec<SecretEntry>,
    pub vault: String,
}

/// `POST /v1/secrets` → 201.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SecretStored {
    pub path: String,
    pub replaced: bool,
}

/// `POST /v1/bindings/setup/oauth2/init`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct OAuthStarted {
    pub session_id: String,
    pub authorize_url: String,
    pub redirect_uri: String,
}

/// One trusted publisher key.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyEntry {
    pub authority: String,
    pub fingerprint: String,
    /// Base64 of the raw 32 bytes.
    pub key: String,
}

/// `GET /v1/keyring`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyringList {
    pub items: Vec<KeyEntry>,
}

/// `POST /v1/keyring/trust` → 201 (200 when the key was trusted already).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeyTrusted {
    pub authority: String,
    pub fingerprint: String,
    pub added: bool,
}

/// `POST /v1/keyring/revoke`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct KeysRevoked {
    pub removed: usize,
    pub authorities: Vec<String>,
}
