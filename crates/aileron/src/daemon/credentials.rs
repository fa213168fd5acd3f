//! Handlers of the vault, secret and binding routes (SPEC §6, §7): thin — check the scope, call
//! the vault / bindings / OAuth services, audit the mutation, shape the answer. Every route but
//! the OAuth callback needs the daemon token (`Scope::Admin`); session tokens never reach them.
//!
//! Invariant: no answer, error or audit record carries a passphrase, key, token or secret value.

use std::sync::Arc;

use aileron_core::manifest::{ConnectorManifest, CredentialKind, CredentialMethod};
use aileron_core::vocabulary::{EventType, keys};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use zeroize::Zeroizing;

use super::AppState;
use crate::audit_log::AuditEvent;
use crate::bindings::{
    BINDINGS_PREFIX, BindingError, BindingInfo, DEFAULT_IDENTITY, IDENTITY_HINT, Material, validate_identity,
};
use crate::oauth::{Mode, OAuthError, Target, is_loopback_http};
use crate::principal::Caller;
use crate::principal::{Principal, Scope};
use crate::vault::{VaultAccessError, VaultState};
use crate::wire::ApiError;
use crate::workflows::caller_for;
use crate::workflows::require;

type ApiResult = Result<Response, ApiError>;

/// Where the provider sends the browser back in daemon mode; needs no token (SPEC §7).
pub const OAUTH_CALLBACK_PATH: &str = "/v1/bindings/setup/oauth2/callback";
/// Vault paths of free-form secrets (`aileron secret set`).
const SECRETS_PREFIX: &str = "secrets/";

fn vault_error(error: VaultAccessError) -> ApiError {
    let status = match error {
        VaultAccessError::Absent => StatusCode::NOT_FOUND,
        VaultAccessError::AlreadyExists(_) => StatusCode::CONFLICT,
        VaultAccessError::Locked => StatusCode::LOCKED,
        VaultAccessError::WrongPassphrase => StatusCode::FORBIDDEN,
        VaultAccessError::EmptyPassphrase | VaultAccessError::Format(_) => StatusCode::BAD_REQUEST,
        VaultAccessError::File { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        VaultAccessError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let hint = error.hint();
    ApiError::new(status, error.code(), error.to_string()).with_hint(hint)
}

fn binding_error(error: BindingError) -> ApiError {
    let hint = error.hint();
    match error {
        BindingError::Vault(error) => vault_error(error),
        BindingError::NotFound(_) => ApiError::not_found("binding_not_found", error.to_string()).with_hint(hint),
        BindingError::AlreadyBound { .. } => {
            ApiError::new(StatusCode::CONFLICT, error.code(), error.to_string()).with_hint(hint)
        }
        BindingError::Invalid(_) => ApiError::bad_request(error.code(), error.to_string()).with_hint(hint),
    }
}

async fn audit(
    state: &AppState,
    caller: &Caller,
    event_type: EventType,
    payload: Map<String, Value>,
) -> Result<(), ApiError> {
    let event = AuditEvent {
        event_type,
        actor: caller.actor.clone(),
        session_id: caller.session_id.clone(),
        payload,
        audit_id: None,
    };
    state.audit.append(event).await.map(|_| ()).map_err(ApiError::audit_unavailable)
}

fn vault_view(state: &AppState) -> Value {
    let entries = state.vault.list();
    let bindings = entries.iter().filter(|(path, _)| path.starts_with(BINDINGS_PREFIX)).count();
    json!({
        "state": state.vault.state().as_str(),
        "path": state.vault.path().display().to_string(),
        "secrets": entries.len() - bindings,
        "bindings": bindings,
        "awaiting_vault": state.approvals.awaiting_vault().len(),
    })
}

pub async fn vault_status(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Console)?;
    Ok(Json(vault_view(&state)).into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PassphraseBody {
    #[schemars(with = "String")]
    passphrase: Zeroizing<String>,
}

pub async fn vault_init(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<PassphraseBody>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let vault = state.vault.clone();
    // Argon2id takes a few hundred milliseconds of CPU: off the async workers.
    tokio::task::spawn_blocking(move || vault.init(body.passphrase.as_bytes()))
        .await
        .map_err(ApiError::internal)?
        .map_err(vault_error)?;
    let caller = caller_for(&principal);
    audit(&state, &caller, EventType::VaultInitialized, vault_payload(&state)).await?;
    Ok((StatusCode::CREATED, Json(vault_view(&state))).into_response())
}

pub async fn vault_unlock(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<PassphraseBody>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let vault = state.vault.clone();
    let unlocked = tokio::task::spawn_blocking(move || vault.unlock(body.passphrase.as_bytes()))
        .await
        .map_err(ApiError::internal)?;
    let caller = caller_for(&principal);
    if let Err(error) = unlocked {
        if matches!(error, VaultAccessError::WrongPassphrase) {
            let mut payload = vault_payload(&state);
            payload.insert(keys::VAULT_REASON.into(), "wrong_passphrase".into());
            audit(&state, &caller, EventType::VaultUnlockFailed, payload).await?;
        }
        return Err(vault_error(error));
    }
    audit(&state, &caller, EventType::VaultUnlocked, vault_payload(&state)).await?;
    // Approved runs that waited for the vault run now, once each.
    crate::runner::resume_awaiting_vault(&state.services);
    Ok(Json(vault_view(&state)).into_response())
}

pub async fn vault_lock(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Console)?;
    match state.vault.lock() {
        VaultState::Absent => return Err(vault_error(VaultAccessError::Absent)),
        VaultState::Unlocked => {
            let caller = caller_for(&principal);
            audit(&state, &caller, EventType::VaultLocked, vault_payload(&state)).await?;
        }
        VaultState::Locked => {}
    }
    Ok(Json(vault_view(&state)).into_response())
}

fn vault_payload(state: &AppState) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert(keys::VAULT_STATE.into(), state.vault.state().as_str().into());
    payload
}

pub async fn list_secrets(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let items: Vec<Value> = state
        .vault
        .list()
        .into_iter()
        .filter_map(|(path, metadata)| {
            path.strip_prefix(SECRETS_PREFIX).map(|name| json!({ "path": name, "metadata": metadata }))
        })
        .collect();
    Ok(Json(json!({ "items": items, "vault": state.vault.state().as_str() })).into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetSecret {
    path: String,
    #[schemars(with = "String")]
    value: Zeroizing<String>,
    #[serde(default)]
    description: Option<String>,
    /// Replace a secret already stored at `path` (without it, that is 409 `secret_exists`)
    // As a second `binding setup` is refused: an overwrite loses a credential, so never silently.
    #[serde(default)]
    force: bool,
}

/// Checks a secret's path as the user wrote it, so an error names their path and not the vault's
/// internal `secrets/<path>`.
fn secret_path(path: &str) -> Result<String, ApiError> {
    aileron_core::vault::validate_path(path).map_err(|error| {
        ApiError::bad_request("invalid_secret", error.to_string()).with_hint("name it like `smtp/password`")
    })?;
    Ok(format!("{SECRETS_PREFIX}{path}"))
}

pub async fn set_secret(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<SetSecret>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    if body.value.is_empty() {
        return Err(ApiError::bad_request("invalid_secret", "the secret's value is empty"));
    }
    let mut metadata = Map::new();
    metadata.insert("type".into(), "secret".into());
    metadata.insert("updated_at".into(), crate::bindings::now_rfc3339().into());
    if let Some(description) = &body.description {
        metadata.insert(
            "description".into(),
            description.chars().filter(|c| !c.is_control()).take(200).collect::<String>().into(),
        );
    }
    let path = secret_path(&body.path)?;
    let replaced = state.vault.metadata(&path).is_some();
    if replaced && !body.force {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "secret_exists",
            format!("a secret is already stored at `{}`", body.path),
        )
        .with_hint("pass --force to replace it (the old value is not kept)"));
    }
    state.vault.put(&path, metadata, body.value.as_bytes()).map_err(vault_error)?;
    let caller = caller_for(&principal);
    let mut payload = Map::new();
    payload.insert(keys::SECRET_PATH.into(), body.path.clone().into());
    audit(&state, &caller, EventType::SecretSet, payload).await?;
    Ok((StatusCode::CREATED, Json(json!({ "path": body.path, "replaced": replaced }))).into_response())
}

pub async fn remove_secret(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    if !state.vault.remove(&secret_path(&path)?).map_err(vault_error)? {
        return Err(ApiError::not_found("secret_not_found", format!("no secret at `{path}`"))
            .with_hint("list secrets with `aileron secret list`"));
    }
    let caller = caller_for(&principal);
    let mut payload = Map::new();
    payload.insert(keys::SECRET_PATH.into(), path.into());
    audit(&state, &caller, EventType::SecretRemoved, payload).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub async fn list_bindings(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    Ok(Json(json!({ "items": state.bindings.list(), "vault": state.vault.state().as_str() })).into_response())
}

pub async fn get_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let binding = state.bindings.get(&name).ok_or_else(|| binding_error(BindingError::NotFound(name)))?;
    Ok(Json(binding).into_response())
}

pub async fn revoke_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let revoked = state.bindings.revoke(&name).map_err(binding_error)?;
    audit(&state, &caller_for(&principal), EventType::BindingRevoked, revoked.audit_payload()).await?;
    Ok(Json(revoked).into_response())
}

/// The material of an api_key or aws_sigv4 binding, as the CLI sends it.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MaterialBody {
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    api_key: Option<Zeroizing<String>>,
    #[serde(default)]
    aws: Option<AwsBody>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwsBody {
    access_key_id: String,
    #[schemars(with = "String")]
    secret_access_key: Zeroizing<String>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    session_token: Option<Zeroizing<String>>,
}

impl MaterialBody {
    fn into_material(self, kind: CredentialKind) -> Result<Material, ApiError> {
        match (kind, self.api_key, self.aws) {
            (CredentialKind::ApiKey, Some(key), None) => Ok(Material::ApiKey { key: key.to_string() }),
            (CredentialKind::AwsSigv4, None, Some(aws)) => Ok(Material::AwsSigv4 {
                access_key_id: aws.access_key_id,
                secret_access_key: aws.secret_access_key.to_string(),
                session_token: aws.session_token.map(|t| t.to_string()),
            }),
            (CredentialKind::OAuth2, _, _) => Err(ApiError::bad_request(
                "oauth2_flow_required",
                "oauth2 bindings are made through the authorization flow",
            )
            .with_hint("run `aileron binding setup <connector>` (it opens the provider's consent page)")),
            (kind, _, _) => Err(ApiError::bad_request(
                "invalid_binding",
                format!(
                    "a {} binding needs {}",
                    kind.as_str(),
                    if kind == CredentialKind::ApiKey { "`api_key`" } else { "`aws`" }
                ),
            )),
        }
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetupBody {
    connector: String,
    #[serde(default)]
    identity: Option<String>,
    #[serde(flatten)]
    material: MaterialBody,
}

/// The newest installed version's manifest of a connector: what a binding must satisfy.
fn installed_manifest(state: &AppState, connector: &str) -> Result<ConnectorManifest, ApiError> {
    let entries = state.store.list().map_err(ApiError::internal)?;
    entries
        .into_iter()
        .filter(|entry| entry.fqn.to_string() == connector)
        .max_by(|a, b| a.version.cmp(&b.version))
        .map(|entry| entry.manifest)
        .ok_or_else(|| {
            ApiError::not_found("connector_not_found", format!("connector {connector} is not installed")).with_hint(
                "install it first with `aileron connector install`; `aileron connector list` shows what is installed",
            )
        })
}

fn credential_kind_of(manifest: &ConnectorManifest, connector: &str) -> Result<CredentialKind, ApiError> {
    manifest.credential_kind().ok_or_else(|| {
        ApiError::bad_request("no_credential", format!("connector {connector} declares no credential; nothing to bind"))
            .with_hint("only connectors whose manifest has [capabilities.credential] take a binding")
    })
}

fn identity_of(identity: Option<String>) -> Result<String, ApiError> {
    let identity = identity.unwrap_or_else(|| DEFAULT_IDENTITY.to_string());
    validate_identity(&identity)
        .map_err(|message| ApiError::bad_request("invalid_identity", message).with_hint(IDENTITY_HINT))?;
    Ok(identity)
}

pub async fn setup_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<SetupBody>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let manifest = installed_manifest(&state, &body.connector)?;
    let kind = credential_kind_of(&manifest, &body.connector)?;
    let identity = identity_of(body.identity)?;
    let material = body.material.into_material(kind)?;
    let info = BindingInfo::new(kind, &body.connector, &identity);
    let created = state.bindings.create(info, &material).map_err(binding_error)?;
    audit(&state, &caller_for(&principal), EventType::BindingCreated, created.audit_payload()).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

pub async fn rebind_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    crate::wire::Json(body): crate::wire::Json<MaterialBody>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let existing = state.bindings.get(&name).ok_or_else(|| binding_error(BindingError::NotFound(name.clone())))?;
    let kind = CredentialKind::parse(&existing.kind).unwrap_or(CredentialKind::ApiKey);
    let material = body.into_material(kind)?;
    let rebound = state.bindings.rebind(&name, &material).map_err(binding_error)?;
    audit(&state, &caller_for(&principal), EventType::BindingRebound, rebound.audit_payload()).await?;
    Ok(Json(rebound).into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthInit {
    /// The connector to bind; or `rebind` names an existing binding to reauthorize.
    #[serde(default)]
    connector: Option<String>,
    #[serde(default)]
    identity: Option<String>,
    #[serde(default)]
    rebind: Option<String>,
    /// `cli` (default): the CLI serves the redirect on `redirect_port`; `daemon`: the daemon does
    /// and then sends the browser to `return_to`.
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    redirect_port: Option<u16>,
    #[serde(default)]
    return_to: Option<String>,
}

pub async fn oauth_init(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<OAuthInit>,
) -> ApiResult {
    require(&principal, Scope::Console)?;
    let target = match (&body.rebind, &body.connector) {
        (Some(name), _) => {
            let existing =
                state.bindings.get(name).ok_or_else(|| binding_error(BindingError::NotFound(name.clone())))?;
            Target { connector: existing.connector, identity: existing.identity, rebind: Some(existing.name) }
        }
        (None, Some(connector)) => {
            Target { connector: connector.clone(), identity: identity_of(body.identity.clone())?, rebind: None }
        }
        (None, None) => return Err(ApiError::bad_request("invalid_request", "give `connector` (or `rebind`)")),
    };
    let manifest = installed_manifest(&state, &target.connector)?;
    let Some(CredentialMethod::OAuth2(provider)) = manifest.credential.as_ref().map(|c| &c.method) else {
        return Err(ApiError::bad_request(
            "not_oauth2",
            format!("connector {} does not declare an oauth2 credential", target.connector),
        )
        .with_hint(format!("bind it with `aileron binding setup {}`", target.connector)));
    };
    if target.rebind.is_none()
        && let Some(existing) = state.bindings.for_connector(&target.connector, CredentialKind::OAuth2)
    {
        return Err(binding_error(BindingError::AlreadyBound { connector: target.connector, name: existing.name }));
    }
    let (redirect_uri, mode) = match body.mode.as_deref().unwrap_or("cli") {
        "cli" => {
            let port = body.redirect_port.ok_or_else(|| {
                ApiError::bad_request("invalid_request", "cli mode needs the `redirect_port` the CLI listens on")
            })?;
            (format!("http://127.0.0.1:{port}/callback"), Mode::Cli)
        }
        "daemon" => {
            let return_to = body.return_to.as_deref().unwrap_or_default();
            if !is_loopback_http(return_to) {
                return Err(ApiError::bad_request(
                    "invalid_return_to",
                    "return_to must be an http URL on a loopback address",
                )
                .with_hint("use the web console's own address (http://127.0.0.1:<port>/...)"));
            }
            let return_to =
                url::Url::parse(return_to).map_err(|e| ApiError::bad_request("invalid_return_to", e.to_string()))?;
            (format!("{}{OAUTH_CALLBACK_PATH}", state.base_url()), Mode::Daemon { return_to })
        }
        other => {
            return Err(ApiError::bad_request("invalid_request", format!("unknown mode `{other}` (cli or daemon)")));
        }
    };
    let started = state.oauth.start(provider, target, redirect_uri, mode).map_err(oauth_error)?;
    Ok(Json(json!({
        "session_id": started.session_id,
        "authorize_url": started.authorize_url,
        "redirect_uri": started.redirect_uri,
    }))
    .into_response())
}

fn oauth_error(error: OAuthError) -> ApiError {
    let status = match error {
        OAuthError::UnknownSession => StatusCode::NOT_FOUND,
        OAuthError::Exchange(_) => StatusCode::BAD_GATEWAY,
        _ => StatusCode::BAD_REQUEST,
    };
    ApiError::new(status, error.code(), error.to_string())
        .with_hint("start again with `aileron binding setup <connector>`")
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthFinish {
    session_id: String,
    #[schemars(with = "String")]
    code: Zeroizing<String>,
    state: String,
}

pub async fn oauth_finish(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    crate::wire::Json(body): crate::wire::Json<OAuthFinish>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let completed = state.oauth.finish(&body.session_id, &body.code, &body.state).await.map_err(oauth_error)?;
    let caller = caller_for(&principal);
    let (status, binding) = bind_completed(&state, &caller, completed.target, completed.envelope).await?;
    Ok((status, Json(binding)).into_response())
}

#[derive(Deserialize, schemars::JsonSchema)]
pub struct CallbackQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// Daemon mode: the provider's redirect. No token (the browser arrives from the provider); the
/// state is the credential, single-use and matched in constant time.
pub async fn oauth_callback(State(state): State<Arc<AppState>>, Query(query): Query<CallbackQuery>) -> Response {
    let Some(oauth_state) = query.state.as_deref() else {
        return callback_page(StatusCode::BAD_REQUEST, "the provider's redirect carried no state; nothing was bound");
    };
    match state.oauth.callback(oauth_state, query.code.as_deref(), query.error.as_deref()).await {
        Ok(completed) => {
            let caller = Caller::new(aileron_core::audit::ActorType::Human, "oauth-browser");
            let return_to = match &completed.mode {
                Mode::Daemon { return_to } => return_to.clone(),
                Mode::Cli => unreachable!("the callback only completes daemon-mode sessions"),
            };
            match bind_completed(&state, &caller, completed.target, completed.envelope).await {
                Ok((_, binding)) => redirect_to(return_to, &[("status", "ok"), ("binding", &binding.name)]),
                Err(error) => redirect_to(return_to, &[("status", "error"), ("error", error.code)]),
            }
        }
        Err((error, Some(Mode::Daemon { return_to }))) => {
            redirect_to(return_to, &[("status", "error"), ("error", error.code())])
        }
        Err((error, _)) => callback_page(StatusCode::BAD_REQUEST, &format!("{error}; nothing was bound")),
    }
}

fn redirect_to(mut url: url::Url, pairs: &[(&str, &str)]) -> Response {
    url.query_pairs_mut().extend_pairs(pairs);
    Redirect::to(url.as_str()).into_response()
}

fn callback_page(status: StatusCode, message: &str) -> Response {
    let escaped = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    (status, axum::response::Html(format!("<!doctype html><title>Aileron</title><p>{escaped}</p>"))).into_response()
}

/// Stores an exchanged token as a new binding, or as the new material of the one reauthorized.
pub async fn bind_completed(
    state: &AppState,
    caller: &Caller,
    target: Target,
    envelope: crate::bindings::TokenEnvelope,
) -> Result<(StatusCode, BindingInfo), ApiError> {
    let material = Material::OAuth2(envelope);
    let (status, event, binding) = match &target.rebind {
        Some(name) => {
            (StatusCode::OK, EventType::BindingRebound, state.bindings.rebind(name, &material).map_err(binding_error)?)
        }
        None => {
            let info = BindingInfo::new(CredentialKind::OAuth2, &target.connector, &target.identity);
            (
                StatusCode::CREATED,
                EventType::BindingCreated,
                state.bindings.create(info, &material).map_err(binding_error)?,
            )
        }
    };
    audit(state, caller, event, binding.audit_payload()).await?;
    Ok((status, binding))
}
