//! Credential bindings (SPEC §6): which account a connector acts as. A connector's manifest names
//! only a credential *kind*; the user binds a concrete key, token or AWS key pair to that
//! connector, and the daemon resolves it at the moment of an outbound request.
//!
//! A binding is one vault entry at `bindings/<name>`, name `<kind>/<service>/<identity>` where
//! `service` is the connector FQN with `://` and `/` written as `:` (`api_key/github:acme:widget/work`).
//! Its metadata (kind, connector, identity, state) is plaintext so listing works while locked;
//! the material (key, token envelope, AWS keys) is sealed.
//!
//! Invariant: material leaves this module only as [`ResolvedCredential`] handed to the egress
//! hook, whose types never print their bytes. One connector has at most one binding, so a
//! connector can never be given some other connector's account by a lookup that guesses.

use aileron_core::vocabulary::keys;
use std::fmt;
use std::sync::Arc;

use aileron_core::manifest::CredentialKind;
use aileron_core::sigv4::AwsCredentials;
use aileron_core::{Boundary, Failure, FailureClass};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use zeroize::{Zeroize, Zeroizing};

use crate::stores::vault::{Vault, VaultAccessError, VaultState};

/// Vault paths of bindings start with this.
pub const BINDINGS_PREFIX: &str = "bindings/";
/// The identity used when the user names none.
pub const DEFAULT_IDENTITY: &str = "default";
/// OAuth2 access tokens are refreshed when they expire within this many seconds (SPEC §4.4).
pub const REFRESH_MARGIN_SECONDS: i64 = 60;

/// What anyone may see of a binding: no secret bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BindingInfo {
    pub name: String,
    pub kind: CredentialKind,
    pub connector: String,
    pub identity: String,
    /// `ok`, or `stale` when a refresh failed and the user must reauthorize.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_reason: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// OAuth2: when the access token expires (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// OAuth2: the granted scopes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// aws_sigv4: the access key id (an identifier, not a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_id: Option<String>,
}

impl BindingInfo {
    pub fn new(kind: CredentialKind, connector: &str, identity: &str) -> BindingInfo {
        let now = now_rfc3339();
        BindingInfo {
            name: binding_name(kind, connector, identity),
            kind,
            connector: connector.to_string(),
            identity: identity.to_string(),
            state: "ok".to_string(),
            stale_reason: None,
            created_at: now.clone(),
            updated_at: now,
            expires_at: None,
            scopes: Vec::new(),
            access_key_id: None,
        }
    }

    pub fn is_stale(&self) -> bool {
        self.state == "stale"
    }

    /// The `aileron.binding.*` keys of audit records and spans.
    pub fn audit_payload(&self) -> Map<String, Value> {
        let mut payload = Map::new();
        payload.insert(keys::BINDING_NAME.into(), self.name.clone().into());
        payload.insert(keys::BINDING_KIND.into(), self.kind.as_str().into());
        payload.insert(keys::BINDING_IDENTITY.into(), self.identity.clone().into());
        payload.insert(keys::CONNECTOR_FQN.into(), self.connector.clone().into());
        payload
    }

    fn to_metadata(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => unreachable!("BindingInfo serializes to an object"),
        }
    }
}

/// `<kind>/<service>/<identity>`.
pub fn binding_name(kind: CredentialKind, connector: &str, identity: &str) -> String {
    let service = connector.replace("://", ":").replace('/', ":");
    format!("{}/{service}/{identity}", kind.as_str())
}

/// Identities are short lowercase labels (`default`, `work`, `alice@example.com`).
/// The hint of an identity `validate_identity` refuses.
pub const IDENTITY_HINT: &str = "name the account in lowercase, e.g. `work` or `me@example.com`";

pub fn validate_identity(identity: &str) -> Result<(), String> {
    let valid = !identity.is_empty()
        && identity.len() <= 64
        && identity.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && identity.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._@-".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "identity `{identity}` must be 1-64 characters of a-z, 0-9, `.`, `_`, `@` or `-`, starting with a letter or digit"
        ))
    }
}

/// The shortest secret a binding accepts (API key, AWS secret key or session token, OAuth access
/// token). Egress redacts an upstream's echo of an injected secret of any length, but a short one
/// matches ordinary text (a 3-byte key would blank every `abc` in an answer) and is guessable
/// through that redaction; real keys and tokens are 20 bytes and more. The access key id is not
/// a secret (it travels in the clear in the `Authorization` header) and is not held to it.
pub const MIN_SECRET_BYTES: usize = 8;

/// The sealed part of a binding.
#[derive(Clone, Serialize, Deserialize, Zeroize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Material {
    ApiKey {
        key: String,
    },
    AwsSigv4 {
        access_key_id: String,
        secret_access_key: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_token: Option<String>,
    },
    #[serde(rename = "oauth2")]
    OAuth2(TokenEnvelope),
}

impl Drop for Material {
    fn drop(&mut self) {
        self.zeroize();
    }
}

impl fmt::Debug for Material {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Material::ApiKey { .. } => "Material::ApiKey(****)",
            Material::AwsSigv4 { .. } => "Material::AwsSigv4(****)",
            Material::OAuth2(_) => "Material::OAuth2(****)",
        })
    }
}

impl Material {
    pub fn kind(&self) -> CredentialKind {
        match self {
            Material::ApiKey { .. } => CredentialKind::ApiKey,
            Material::AwsSigv4 { .. } => CredentialKind::AwsSigv4,
            Material::OAuth2(_) => CredentialKind::OAuth2,
        }
    }

    /// Refuses material that could never be injected (empty, or a control character that would
    /// break a header) and secrets shorter than [`MIN_SECRET_BYTES`].
    pub fn check(&self) -> Result<(), String> {
        let identifier = |what: &str, value: &str| {
            if value.is_empty() {
                Err(format!("the {what} is empty"))
            } else if value.chars().any(char::is_control) {
                Err(format!("the {what} contains a control character (a line break?)"))
            } else {
                Ok(())
            }
        };
        let clean = |what: &str, value: &str| {
            identifier(what, value)?;
            if value.len() < MIN_SECRET_BYTES {
                Err(format!(
                    "the {what} is {} bytes long; a secret shorter than {MIN_SECRET_BYTES} bytes is refused (an upstream's echo of it could not be redacted without mangling ordinary text, and it is guessable); check that the whole value was pasted",
                    value.len()
                ))
            } else {
                Ok(())
            }
        };
        match self {
            Material::ApiKey { key } => clean("key", key),
            Material::AwsSigv4 { access_key_id, secret_access_key, session_token } => {
                identifier("access key id", access_key_id)?;
                // It goes into the Authorization header unquoted (`Credential=<id>/<scope>`).
                if !access_key_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
                    return Err("the access key id holds a character other than letters and digits (AWS key ids look like AKIA…)".to_string());
                }
                clean("secret access key", secret_access_key)?;
                session_token.as_deref().map_or(Ok(()), |token| clean("session token", token))
            }
            // An imported refresh token (another tool's login): no access token until the first
            // use refreshes it.
            Material::OAuth2(TokenEnvelope { access_token, refresh_token: Some(refresh_token), .. })
                if access_token.is_empty() =>
            {
                clean("refresh token", refresh_token)
            }
            Material::OAuth2(envelope) => clean("access token", &envelope.access_token),
        }
    }

    fn to_bytes(&self) -> Zeroizing<Vec<u8>> {
        Zeroizing::new(serde_json::to_vec(self).expect("material serializes"))
    }

    fn from_bytes(bytes: &[u8]) -> Result<Material, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// The OAuth2 token envelope (SPEC §6), sealed in the vault.
#[derive(Clone, Serialize, Deserialize, Zeroize)]
#[serde(deny_unknown_fields)]
pub struct TokenEnvelope {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None` when the provider gave no lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub token_url: String,
    pub scopes: Vec<String>,
}

impl fmt::Debug for TokenEnvelope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenEnvelope")
            .field("access_token", &"****")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "****"))
            .field("expires_at", &self.expires_at)
            .field("client_id", &self.client_id)
            .field("token_url", &self.token_url)
            .finish_non_exhaustive()
    }
}

impl TokenEnvelope {
    /// Whether the access token expires within the refresh margin of `now` (unix seconds).
    pub fn needs_refresh(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|expires_at| expires_at - now <= REFRESH_MARGIN_SECONDS)
    }
}

pub use crate::platform::secret::Secret;

/// A binding resolved for one outbound request.
pub struct ResolvedCredential {
    pub binding: BindingInfo,
    pub injection: Injection,
}

pub enum Injection {
    /// A bearer token (OAuth2) or an API key, placed per the manifest.
    Token(Secret),
    /// AWS keys: the request is signed host-side.
    Aws(AwsCredentials),
}

impl ResolvedCredential {
    /// The secret strings an upstream might echo back, for redaction in what the guest receives.
    pub fn echo_candidates(&self) -> Vec<&str> {
        match &self.injection {
            Injection::Token(secret) => vec![secret.expose()],
            Injection::Aws(credentials) => {
                let mut candidates = vec![credentials.secret_access_key.as_str()];
                if let Some(token) = &credentials.session_token {
                    candidates.push(token.as_str());
                }
                candidates
            }
        }
    }
}

/// Where a binding is looked up from: the vault. Implemented by [`Bindings`]; tests substitute
/// their own.
pub trait CredentialSource: Send + Sync + 'static {
    /// The credential bound to `connector_fqn` for `kind`, or a `binding_required` /
    /// `binding_failed` failure whose message says exactly what to run.
    fn resolve<'a>(
        &'a self,
        connector_fqn: &'a str,
        kind: CredentialKind,
        refresher: &'a dyn TokenRefresher,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<ResolvedCredential, Failure>> + Send + 'a>>;

    /// Refreshes and staleness since the last call, for the caller to audit.
    fn take_events(&self) -> Vec<BindingEvent> {
        Vec::new()
    }
}

/// Refreshes an OAuth2 token envelope (the daemon's OAuth client; tests use a fake provider).
pub trait TokenRefresher: Send + Sync {
    fn refresh<'a>(
        &'a self,
        envelope: &'a TokenEnvelope,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<TokenEnvelope, String>> + Send + 'a>>;
}

/// Something that happened to a binding during resolution, for the caller to audit.
#[derive(Debug, Clone)]
pub enum BindingEvent {
    Refreshed(BindingInfo),
    Stale(BindingInfo),
}

#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    #[error("{0}")]
    Vault(#[from] VaultAccessError),
    #[error("no binding named `{0}`")]
    NotFound(String),
    #[error("connector {connector} is already bound as `{name}`")]
    AlreadyBound { connector: String, name: String },
    #[error("{0}")]
    Invalid(String),
}

impl BindingError {
    pub fn hint(&self) -> String {
        match self {
            BindingError::Vault(error) => error.hint().to_string(),
            BindingError::NotFound(_) => "list bindings with `aileron binding list`".to_string(),
            BindingError::AlreadyBound { name, .. } => {
                format!(
                    "replace its credential with `aileron binding rebind {name}`, or remove it with `aileron binding revoke {name}`"
                )
            }
            BindingError::Invalid(_) => "check the connector's manifest with `aileron connector list`".to_string(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            BindingError::Vault(error) => error.code(),
            BindingError::NotFound(_) => "binding_not_found",
            BindingError::AlreadyBound { .. } => "already_bound",
            BindingError::Invalid(_) => "invalid_binding",
        }
    }
}

/// The daemon's bindings, stored in its vault.
pub struct Bindings {
    vault: Arc<Vault>,
    /// One refresh at a time: two concurrent calls must not both spend a single-use refresh token.
    refreshing: tokio::sync::Mutex<()>,
    events: std::sync::Mutex<Vec<BindingEvent>>,
}

impl Bindings {
    pub fn new(vault: Arc<Vault>) -> Bindings {
        Bindings { vault, refreshing: tokio::sync::Mutex::new(()), events: std::sync::Mutex::new(Vec::new()) }
    }

    pub fn vault(&self) -> &Arc<Vault> {
        &self.vault
    }

    /// Every binding, by name; works while the vault is locked.
    pub fn list(&self) -> Vec<BindingInfo> {
        self.vault
            .list()
            .into_iter()
            .filter(|(path, _)| path.starts_with(BINDINGS_PREFIX))
            .filter_map(|(_, metadata)| serde_json::from_value(Value::Object(metadata)).ok())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<BindingInfo> {
        self.vault.metadata(&path_of(name)).and_then(|metadata| serde_json::from_value(Value::Object(metadata)).ok())
    }

    /// The binding of a connector for a kind, if any.
    pub fn for_connector(&self, connector: &str, kind: CredentialKind) -> Option<BindingInfo> {
        self.list().into_iter().find(|b| b.connector == connector && b.kind == kind)
    }

    /// Binds `material` to a connector. Refused when the connector already has a binding of that kind.
    pub fn create(&self, mut info: BindingInfo, material: &Material) -> Result<BindingInfo, BindingError> {
        material.check().map_err(BindingError::Invalid)?;
        let kind = material.kind();
        if let Some(existing) = self.for_connector(&info.connector, kind) {
            return Err(BindingError::AlreadyBound { connector: info.connector, name: existing.name });
        }
        describe_material(&mut info, material);
        self.vault.put(&path_of(&info.name), info.to_metadata(), &material.to_bytes())?;
        Ok(info)
    }

    /// Replaces a binding's material (same name, same connector); a stale binding becomes ok.
    pub fn rebind(&self, name: &str, material: &Material) -> Result<BindingInfo, BindingError> {
        material.check().map_err(BindingError::Invalid)?;
        let mut info = self.get(name).ok_or_else(|| BindingError::NotFound(name.to_string()))?;
        if info.kind != material.kind() {
            return Err(BindingError::Invalid(format!(
                "binding `{name}` is of kind {}, not {}",
                info.kind,
                material.kind().as_str()
            )));
        }
        info.state = "ok".to_string();
        info.stale_reason = None;
        info.updated_at = now_rfc3339();
        describe_material(&mut info, material);
        self.vault.put(&path_of(name), info.to_metadata(), &material.to_bytes())?;
        Ok(info)
    }

    /// Removes a binding and its material.
    pub fn revoke(&self, name: &str) -> Result<BindingInfo, BindingError> {
        let info = self.get(name).ok_or_else(|| BindingError::NotFound(name.to_string()))?;
        if !self.vault.remove(&path_of(name))? {
            return Err(BindingError::NotFound(name.to_string()));
        }
        Ok(info)
    }

    async fn resolve_inner(
        &self,
        connector_fqn: &str,
        kind: CredentialKind,
        refresher: &dyn TokenRefresher,
    ) -> Result<ResolvedCredential, Failure> {
        let Some(info) = self.for_connector(connector_fqn, kind) else {
            return Err(binding_required(connector_fqn, kind, self.vault.state()));
        };
        if info.is_stale() {
            return Err(stale_failure(&info));
        }
        let stored = self.material(&info)?;
        let refreshed;
        let material = match &stored {
            Material::OAuth2(envelope) if envelope.needs_refresh(chrono::Utc::now().timestamp()) => {
                refreshed = Material::OAuth2(self.refresh(&info, refresher).await?);
                &refreshed
            }
            material => material,
        };
        let binding = self.get(&info.name).unwrap_or(info);
        let injection = match material {
            Material::ApiKey { key } => Injection::Token(Secret::new(key.clone())),
            Material::OAuth2(envelope) => Injection::Token(Secret::new(envelope.access_token.clone())),
            Material::AwsSigv4 { access_key_id, secret_access_key, session_token } => Injection::Aws(AwsCredentials {
                access_key_id: access_key_id.clone(),
                secret_access_key: Zeroizing::new(secret_access_key.clone()),
                session_token: session_token.clone().map(Zeroizing::new),
            }),
        };
        Ok(ResolvedCredential { binding, injection })
    }

    fn material(&self, info: &BindingInfo) -> Result<Material, Failure> {
        let bytes = match self.vault.get(&path_of(&info.name)) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Err(binding_required(&info.connector, kind_of(info), self.vault.state())),
            Err(VaultAccessError::Locked) => return Err(vault_locked(&info.connector, kind_of(info))),
            Err(error) => {
                return Err(Failure::new(
                    FailureClass::BindingFailed,
                    Boundary::Runtime,
                    format!("reading binding `{}`: {error}", info.name),
                )
                .with_detail("hint", error.hint()));
            }
        };
        Material::from_bytes(&bytes).map_err(|_| {
            Failure::new(
                FailureClass::BindingFailed,
                Boundary::Runtime,
                format!("binding `{}` holds unreadable material", info.name),
            )
            .with_detail("hint", format!("bind it again: aileron binding rebind {}", info.name))
        })
    }

    /// Refreshes an OAuth2 binding's token and persists the new envelope; on failure marks the
    /// binding stale with the reason. Serialized, and re-read under the lock, so a token that a
    /// concurrent call already refreshed is not refreshed twice.
    async fn refresh(&self, info: &BindingInfo, refresher: &dyn TokenRefresher) -> Result<TokenEnvelope, Failure> {
        let _guard = self.refreshing.lock().await;
        let stored = self.material(info)?;
        let Material::OAuth2(current) = &stored else {
            return Err(Failure::new(FailureClass::BindingFailed, Boundary::Runtime, "binding material changed kind"));
        };
        if !current.needs_refresh(chrono::Utc::now().timestamp()) {
            return Ok(current.clone());
        }
        let refreshed = if current.refresh_token.is_none() {
            Err("the access token expired and the provider gave no refresh token".to_string())
        } else {
            refresher.refresh(current).await
        };
        let mut info = self.get(&info.name).unwrap_or_else(|| info.clone());
        match refreshed {
            Ok(envelope) => {
                info.updated_at = now_rfc3339();
                describe_material(&mut info, &Material::OAuth2(envelope.clone()));
                let material = Material::OAuth2(envelope.clone());
                self.vault.put(&path_of(&info.name), info.to_metadata(), &material.to_bytes()).map_err(|error| {
                    Failure::new(
                        FailureClass::BindingFailed,
                        Boundary::Runtime,
                        format!("saving the refreshed token: {error}"),
                    )
                })?;
                self.push(BindingEvent::Refreshed(info));
                Ok(envelope)
            }
            Err(reason) => {
                info.state = "stale".to_string();
                info.stale_reason = Some(reason);
                info.updated_at = now_rfc3339();
                let _ = self.vault.set_metadata(&path_of(&info.name), info.to_metadata());
                self.push(BindingEvent::Stale(info.clone()));
                Err(stale_failure(&info))
            }
        }
    }

    fn push(&self, event: BindingEvent) {
        self.events.lock().expect("binding events poisoned").push(event);
    }
}

impl CredentialSource for Bindings {
    fn resolve<'a>(
        &'a self,
        connector_fqn: &'a str,
        kind: CredentialKind,
        refresher: &'a dyn TokenRefresher,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<ResolvedCredential, Failure>> + Send + 'a>> {
        Box::pin(self.resolve_inner(connector_fqn, kind, refresher))
    }

    fn take_events(&self) -> Vec<BindingEvent> {
        std::mem::take(&mut *self.events.lock().expect("binding events poisoned"))
    }
}

/// Records the non-secret facts of the material in the metadata.
fn describe_material(info: &mut BindingInfo, material: &Material) {
    match material {
        Material::AwsSigv4 { access_key_id, .. } => info.access_key_id = Some(access_key_id.clone()),
        Material::OAuth2(envelope) => {
            info.expires_at = envelope
                .expires_at
                .and_then(|at| chrono::DateTime::from_timestamp(at, 0))
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            info.scopes = envelope.scopes.clone();
        }
        Material::ApiKey { .. } => {}
    }
}

fn path_of(name: &str) -> String {
    format!("{BINDINGS_PREFIX}{name}")
}

fn kind_of(info: &BindingInfo) -> CredentialKind {
    info.kind
}

/// The command that binds a connector: this text reaches the agent, so it must be exact.
pub fn setup_command(connector_fqn: &str) -> String {
    format!("aileron binding setup {connector_fqn}")
}

fn binding_required(connector_fqn: &str, kind: CredentialKind, vault: VaultState) -> Failure {
    let command = setup_command(connector_fqn);
    let hint = match vault {
        VaultState::Absent => {
            format!("create the vault with `aileron vault init`, then bind an account with `{command}`")
        }
        _ => format!("bind an account with `{command}`"),
    };
    Failure::new(
        FailureClass::BindingRequired,
        Boundary::Runtime,
        format!("connector {connector_fqn} needs a credential of kind {} and none is bound; ask the user to run `{command}`", kind.as_str()),
    )
    .with_detail("credential_kind", kind.as_str())
    .with_detail("command", command)
    .with_detail("hint", hint)
}

fn vault_locked(connector_fqn: &str, kind: CredentialKind) -> Failure {
    Failure::new(
        FailureClass::BindingRequired,
        Boundary::Runtime,
        format!(
            "connector {connector_fqn} needs its {} credential, but the vault is locked; ask the user to run `aileron vault unlock`",
            kind.as_str()
        ),
    )
    .with_detail("credential_kind", kind.as_str())
    .with_detail("command", "aileron vault unlock")
    .with_detail("hint", "unlock the vault with `aileron vault unlock`")
}

fn stale_failure(info: &BindingInfo) -> Failure {
    let command = format!("aileron binding reauthorize {}", info.name);
    Failure::new(
        FailureClass::BindingFailed,
        Boundary::Runtime,
        format!(
            "binding `{}` is stale ({}); ask the user to run `{command}`",
            info.name,
            info.stale_reason.as_deref().unwrap_or("refresh failed")
        ),
    )
    .with_detail("binding", info.name.clone())
    .with_detail("command", command.clone())
    .with_detail("hint", format!("reauthorize it with `{command}`"))
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
