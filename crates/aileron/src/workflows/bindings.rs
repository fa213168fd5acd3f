//! Credential bindings (SPEC §6): list, show, set up (api_key, aws_sigv4), rebind, revoke, and the
//! OAuth2 authorization flow in both modes (the CLI's loopback redirect, or the daemon's own
//! callback). Every mutation is audited before it is answered, never with secret bytes.

use aileron_core::audit::ActorType;
use aileron_core::manifest::{ConnectorManifest, CredentialKind, CredentialMethod};
use aileron_core::vocabulary::EventType;
use axum::http::StatusCode;

use super::vault::vault_error;
use super::{Services, audit, caller_for, require};
use crate::platform::principal::{Caller, Principal, Scope};
use crate::stores::bindings::{
    BindingError, BindingInfo, DEFAULT_IDENTITY, IDENTITY_HINT, Material, TokenEnvelope, validate_identity,
};
use crate::stores::oauth::{Mode, OAuthError, Target, is_loopback_http};
use crate::wire::{
    Answer, ApiError, BindingList, CallbackQuery, MaterialBody, OAuthFinish, OAuthInit, OAuthStarted, Reply, SetupBody,
};

/// Where the provider sends the browser back in daemon mode; needs no token (SPEC §7).
pub const OAUTH_CALLBACK_PATH: &str = "/v1/bindings/setup/oauth2/callback";

pub fn binding_error(error: BindingError) -> ApiError {
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

pub fn list(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Console)?;
    Ok(Reply::ok(BindingList { items: state.bindings.list(), vault: state.vault.state().as_str().to_string() }))
}

pub fn get(state: &Services, principal: &Principal, name: String) -> Answer {
    require(principal, Scope::Console)?;
    let binding = state.bindings.get(&name).ok_or_else(|| binding_error(BindingError::NotFound(name)))?;
    Ok(Reply::ok(binding))
}

pub async fn revoke(state: &Services, principal: &Principal, name: String) -> Answer {
    require(principal, Scope::Console)?;
    let revoked = state.bindings.revoke(&name).map_err(binding_error)?;
    audit(state, &caller_for(principal), EventType::BindingRevoked, revoked.audit_payload()).await?;
    Ok(Reply::ok(revoked))
}

/// The material the body carries, for a binding of `manifest`'s credential `kind`.
fn material_of(body: MaterialBody, kind: CredentialKind, manifest: &ConnectorManifest) -> Result<Material, ApiError> {
    match (kind, body.api_key, body.aws, body.oauth2) {
        (CredentialKind::ApiKey, Some(key), None, None) => Ok(Material::ApiKey { key: key.to_string() }),
        (CredentialKind::AwsSigv4, None, Some(aws), None) => Ok(Material::AwsSigv4 {
            access_key_id: aws.access_key_id,
            secret_access_key: aws.secret_access_key.to_string(),
            session_token: aws.session_token.map(|t| t.to_string()),
        }),
        (CredentialKind::OAuth2, None, None, Some(import)) => {
            let Some(CredentialMethod::OAuth2(provider)) = manifest.credential.as_ref().map(|c| &c.method) else {
                return Err(ApiError::bad_request("not_oauth2", "the connector declares no oauth2 provider"));
            };
            // Expired from the start: the first use refreshes it, so a token that no longer
            // works shows up as a stale binding with the provider's reason.
            Ok(Material::OAuth2(TokenEnvelope {
                access_token: String::new(),
                refresh_token: Some(import.refresh_token.to_string()),
                expires_at: Some(0),
                token_type: None,
                client_secret: match (&import.client_id, import.client_secret) {
                    (_, Some(secret)) => Some(secret.to_string()),
                    (Some(_), None) => None,
                    (None, None) => provider.client_secret.clone(),
                },
                client_id: import.client_id.unwrap_or_else(|| provider.client_id.clone()),
                token_url: provider.token_url.clone(),
                scopes: provider.scopes.clone(),
            }))
        }
        (CredentialKind::OAuth2, _, _, _) => Err(ApiError::bad_request(
            "oauth2_flow_required",
            "oauth2 bindings are made through the authorization flow",
        )
        .with_hint(
            "run `aileron binding setup <connector>` (it opens the provider's consent page), or import a refresh \
             token you hold with --refresh-token-from-env",
        )),
        (kind, _, _, _) => Err(ApiError::bad_request(
            "invalid_binding",
            format!(
                "a {} binding needs {}",
                kind.as_str(),
                if kind == CredentialKind::ApiKey { "`api_key`" } else { "`aws`" }
            ),
        )),
    }
}

/// The newest installed version's manifest of a connector: what a binding must satisfy.
fn installed_manifest(state: &Services, connector: &str) -> Result<ConnectorManifest, ApiError> {
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

/// A connector as the user wrote it, in its canonical form (`github://ALRubinger/x` is
/// `github://alrubinger/x`): bindings, their vault paths and lookups all use that one.
fn canonical(connector: &str) -> Result<String, ApiError> {
    aileron_core::Fqn::parse(connector).map(|fqn| fqn.to_string()).map_err(|e| {
        ApiError::bad_request("invalid_fqn", e.to_string())
            .with_hint("name the connector as `aileron connector list` shows it, e.g. github://acme/linear")
    })
}

pub async fn setup(state: &Services, principal: &Principal, body: SetupBody) -> Answer {
    require(principal, Scope::Console)?;
    let connector = canonical(&body.connector)?;
    let manifest = installed_manifest(state, &connector)?;
    let kind = credential_kind_of(&manifest, &connector)?;
    let identity = identity_of(body.identity)?;
    let material = material_of(body.material, kind, &manifest)?;
    let info = BindingInfo::new(kind, &connector, &identity);
    let created = state.bindings.create(info, &material).map_err(binding_error)?;
    audit(state, &caller_for(principal), EventType::BindingCreated, created.audit_payload()).await?;
    Ok(Reply::created(created))
}

pub async fn rebind(state: &Services, principal: &Principal, name: String, body: MaterialBody) -> Answer {
    require(principal, Scope::Console)?;
    let existing = state.bindings.get(&name).ok_or_else(|| binding_error(BindingError::NotFound(name.clone())))?;
    let kind = existing.kind;
    let manifest = installed_manifest(state, &existing.connector)?;
    let material = material_of(body, kind, &manifest)?;
    let rebound = state.bindings.rebind(&name, &material).map_err(binding_error)?;
    audit(state, &caller_for(principal), EventType::BindingRebound, rebound.audit_payload()).await?;
    Ok(Reply::ok(rebound))
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

pub fn oauth_init(state: &Services, principal: &Principal, body: OAuthInit) -> Answer {
    require(principal, Scope::Console)?;
    let target = match (&body.rebind, &body.connector) {
        (Some(name), _) => {
            let existing =
                state.bindings.get(name).ok_or_else(|| binding_error(BindingError::NotFound(name.clone())))?;
            Target { connector: existing.connector, identity: existing.identity, rebind: Some(existing.name) }
        }
        (None, Some(connector)) => {
            Target { connector: canonical(connector)?, identity: identity_of(body.identity.clone())?, rebind: None }
        }
        (None, None) => return Err(ApiError::bad_request("invalid_request", "give `connector` (or `rebind`)")),
    };
    let manifest = installed_manifest(state, &target.connector)?;
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
    Ok(Reply::ok(OAuthStarted {
        session_id: started.session_id,
        authorize_url: started.authorize_url,
        redirect_uri: started.redirect_uri,
    }))
}

/// CLI mode: the code the CLI's loopback server caught.
pub async fn oauth_finish(state: &Services, principal: &Principal, body: OAuthFinish) -> Answer {
    require(principal, Scope::Admin)?;
    let completed = state.oauth.finish(&body.session_id, &body.code, &body.state).await.map_err(oauth_error)?;
    let (status, binding) = bind_completed(state, &caller_for(principal), completed.target, completed.envelope).await?;
    Ok(Reply::new(status, binding))
}

/// Where daemon mode's callback sends the browser.
pub enum CallbackAnswer {
    /// Back to the `return_to` the flow started with, these pairs added to its query.
    Redirect(url::Url, Vec<(&'static str, String)>),
    /// A page of its own, when there is nowhere to go back to.
    Page(StatusCode, String),
}

/// Daemon mode: the provider's redirect. No token (the browser arrives from the provider); the
/// state is the credential, single-use and matched in constant time.
pub async fn oauth_callback(state: &Services, query: CallbackQuery) -> CallbackAnswer {
    let Some(oauth_state) = query.state.as_deref() else {
        return CallbackAnswer::Page(
            StatusCode::BAD_REQUEST,
            "the provider's redirect carried no state; nothing was bound".to_string(),
        );
    };
    match state.oauth.callback(oauth_state, query.code.as_deref(), query.error.as_deref()).await {
        Ok(completed) => {
            let caller = Caller::new(ActorType::Human, "oauth-browser");
            let return_to = match &completed.mode {
                Mode::Daemon { return_to } => return_to.clone(),
                Mode::Cli => unreachable!("the callback only completes daemon-mode sessions"),
            };
            match bind_completed(state, &caller, completed.target, completed.envelope).await {
                Ok((_, binding)) => {
                    CallbackAnswer::Redirect(return_to, vec![("status", "ok".into()), ("binding", binding.name)])
                }
                Err(error) => {
                    CallbackAnswer::Redirect(return_to, vec![("status", "error".into()), ("error", error.code.into())])
                }
            }
        }
        Err((error, Some(Mode::Daemon { return_to }))) => {
            CallbackAnswer::Redirect(return_to, vec![("status", "error".into()), ("error", error.code().into())])
        }
        Err((error, _)) => CallbackAnswer::Page(StatusCode::BAD_REQUEST, format!("{error}; nothing was bound")),
    }
}

/// Stores an exchanged token as a new binding, or as the new material of the one reauthorized.
async fn bind_completed(
    state: &Services,
    caller: &Caller,
    target: Target,
    envelope: crate::stores::bindings::TokenEnvelope,
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
