//! Route table and handlers of the daemon's HTTP API (SPEC §7). Handlers are thin: they check
//! the caller's scope, call the domain function, and shape the response.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;

use aileron_core::ConnectorRef;
use aileron_core::action::{ActionFile, parse_action};
use aileron_core::audit::ActorType;
use aileron_core::policy::{CapabilitySubset, check_subset_against_manifest};
use aileron_core::vocabulary::EventType;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::AppState;
use super::auth::{Principal, Scope, require};
use super::error::{ApiError, failure_response};
use crate::approvals::{QueueError, QueueEvent};
use crate::audit_log::{AuditEvent, AuditFilter};
use aileron_core::approval::{ApprovalDecision, ApprovalId, DecideError, Decision, ResultView, decision_payload};
use crate::package::read_package;
use crate::runner::{Caller, RunOutcome, RunRejection, RunRequest, run_action};
use crate::sessions::{Confinement, SessionError, SessionRegistry};

type ApiResult = Result<Response, ApiError>;

/// Every route the daemon serves; `docs/http-api.json` describes the same table.
pub const ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/v1/health", "liveness; no token needed"),
    ("GET", "/v1/status", "version, pid, counts, vault state"),
    ("GET", "/v1/actions", "installed actions {items, load_errors}"),
    ("POST", "/v1/actions/install", "install an action file {file_name, content}"),
    ("GET", "/v1/actions/watch", "SSE: `changed` when the action set changes"),
    ("GET", "/v1/actions/{name}", "one action"),
    ("PATCH", "/v1/actions/{name}", "{enabled}"),
    ("DELETE", "/v1/actions/{name}", "remove an action"),
    ("POST", "/v1/actions/{name}/run", "{args} → 200 {audit_id, result} | failure envelope"),
    ("GET", "/v1/connectors", "installed connectors"),
    ("POST", "/v1/connectors/preview", "install pipeline up to consent {reference, source?, expected_hash?}; without source the release is fetched from its forge; a present signature must verify"),
    ("POST", "/v1/connectors/install", "install pipeline with consent recorded {reference, source?, expected_hash, consent: prompt|flag, allow_unsigned?}"),
    ("POST", "/v1/connectors/remove", "{reference} removes an installed version; 409 while an installed action needs it (naming the actions)"),
    ("GET", "/v1/connectors/check", "?pre=true: newer releases per installed connector {items: [{fqn, installed, newer, error?}]}"),
    ("POST", "/v1/connectors/gc", "removes store entries no installed action uses and compiled-cache files of removed entries"),
    ("GET", "/v1/keyring", "trusted publisher keys {items: [{authority, fingerprint, key}]}"),
    ("POST", "/v1/keyring/trust", "{authority, key} → 201 (200 when already trusted); audited keyring.trusted"),
    ("POST", "/v1/keyring/revoke", "{authority} | {fingerprint}; audited keyring.revoked"),
    ("GET", "/v1/audit", "audit records, newest first (since, audit_id, connector_fqn, class, event_type, limit)"),
    ("GET", "/v1/audit/{id}", "one audit record"),
    ("GET", "/v1/action-approvals", "pending approvals, oldest first"),
    ("GET", "/v1/action-approvals/watch", "SSE: `snapshot`, `pending`, `resolved`; 30 s heartbeat"),
    ("POST", "/v1/action-approvals/{id}/decide", "{approved, reason?} → 204; 404 when unknown or already decided"),
    ("GET", "/v1/action-approvals/{id}/result", "{status, audit_id?, result?, reason?, failure?}"),
    ("GET", "/v1/vault/status", "{state: absent|locked|unlocked, path, secrets, bindings, awaiting_vault}"),
    ("POST", "/v1/vault/init", "{passphrase} → 201; creates the vault, unlocked"),
    ("POST", "/v1/vault/unlock", "{passphrase}; 403 wrong_passphrase changes nothing; resumes awaiting_vault runs"),
    ("POST", "/v1/vault/lock", "forgets the key"),
    ("GET", "/v1/secrets", "free-form secrets: paths and metadata, never values"),
    ("POST", "/v1/secrets", "{path, value, description?} → 201"),
    ("DELETE", "/v1/secrets/{path}", "remove a secret"),
    ("GET", "/v1/bindings", "credential bindings {items} (no secret bytes); works while locked"),
    ("POST", "/v1/bindings/setup", "{connector, identity?, api_key? | aws?{access_key_id, secret_access_key, session_token?}} → 201"),
    ("POST", "/v1/bindings/setup/oauth2/init", "{connector | rebind, identity?, mode: cli|daemon, redirect_port?, return_to?} → {session_id, authorize_url, redirect_uri}"),
    ("POST", "/v1/bindings/setup/oauth2/finish", "{session_id, code, state} → 201 the binding (CLI mode)"),
    ("GET", "/v1/bindings/setup/oauth2/callback", "daemon-mode OAuth redirect target (no token; the state is single-use) → 303 return_to"),
    ("GET", "/v1/bindings/{name}", "one binding (name URL-encoded: `/` as %2F)"),
    ("DELETE", "/v1/bindings/{name}", "revoke: removes the binding and its material"),
    ("POST", "/v1/bindings/{name}/rebind", "{api_key? | aws?} new material for the same binding"),
    ("POST", "/v1/web/login-tickets", "one-time ticket for the web page (used by `aileron open`)"),
    ("POST", "/v1/sessions", "start a launch session {agent, pid?, confinement?: namespaces|unconfined} → 201 {session_id, token, scopes, confinement, started_at}"),
    ("GET", "/v1/sessions/{id}", "one launch session {status: active|ended|interrupted, exit_code?, ...}"),
    ("POST", "/v1/sessions/{id}/end", "{exit_code} → the ended session; revokes its token"),
    ("POST", "/mcp", "MCP streamable HTTP: JSON-RPC messages (same tools and chokepoint as aileron-mcp)"),
    ("GET", "/mcp", "MCP streamable HTTP: a session's server-to-client SSE stream"),
    ("DELETE", "/mcp", "MCP streamable HTTP: end a session"),
    ("GET", "/approvals", "the web review page"),
    ("GET", "/approvals/login", "redeems a login ticket: sets the session cookie, redirects to /approvals"),
    ("POST", "/v1/messages", "LLM gateway: transparent proxy to the Anthropic upstream (no daemon token)"),
    ("POST", "/v1/messages/count_tokens", "LLM gateway: Anthropic (no daemon token)"),
    ("POST", "/v1/chat/completions", "LLM gateway: transparent proxy to the OpenAI upstream (no daemon token)"),
    ("POST", "/v1/responses", "LLM gateway: OpenAI (no daemon token)"),
    ("GET", "/v1/models", "LLM gateway: OpenAI (no daemon token)"),
    ("HEAD", "/", "answered for agents that probe their base URL"),
];

pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let sessions = Arc::new(SessionRegistry::open(state.home.sessions_journal()));
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/status", get(status))
        .route("/v1/actions", get(list_actions))
        .route("/v1/actions/install", post(install_action))
        .route("/v1/actions/watch", get(watch_actions))
        .route("/v1/actions/{name}", get(get_action).patch(patch_action).delete(delete_action))
        .route("/v1/actions/{name}/run", post(run))
        .route("/v1/connectors", get(list_connectors))
        .route("/v1/connectors/preview", post(preview_connector))
        .route("/v1/connectors/install", post(install_connector))
        .route("/v1/connectors/remove", post(remove_connector))
        .route("/v1/connectors/gc", post(gc_connectors))
        .route("/v1/connectors/check", get(check_connectors))
        .route("/v1/audit", get(list_audit))
        .route("/v1/audit/{id}", get(get_audit))
        .route("/v1/action-approvals", get(list_approvals))
        .route("/v1/action-approvals/watch", get(watch_approvals))
        .route("/v1/action-approvals/{id}/decide", post(decide_approval))
        .route("/v1/action-approvals/{id}/result", get(approval_result))
        .route("/v1/web/login-tickets", post(mint_login_ticket))
        .route("/v1/sessions", post(start_session))
        .route("/v1/sessions/{id}", get(get_session))
        .route("/v1/sessions/{id}/end", post(end_session))
        .route("/approvals", get(super::web::approvals_page))
        .route("/approvals/login", get(super::web::login))
        .layer(Extension(sessions))
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok", "version": super::VERSION }))
}

async fn status(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Extension(sessions): Extension<Arc<SessionRegistry>>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let active: Vec<Value> = sessions
        .active()
        .iter()
        .map(|s| json!({ "session_id": s.session_id, "agent": s.agent, "pid": s.pid, "started_at": s.started_at }))
        .collect();
    let (actions, load_errors) = state.actions.list();
    let enabled = actions.iter().filter(|a| a.enabled).count();
    let connectors = state.store.list().map_err(ApiError::internal)?;
    Ok(Json(json!({
        "version": super::VERSION,
        "pid": std::process::id(),
        "started_at": state.started_at.to_rfc3339(),
        "uptime_seconds": (chrono::Utc::now() - state.started_at).num_seconds(),
        "counts": {
            "actions": actions.len(),
            "actions_enabled": enabled,
            "action_load_errors": load_errors.len(),
            "connectors": connectors.len(),
            "approvals_pending": state.approvals.pending().len(),
            "approvals_awaiting_vault": state.approvals.awaiting_vault().len(),
            "bindings": state.bindings.list().len(),
            "sessions_active": active.len(),
        },
        "sessions": active,
        "vault": state.vault.state().as_str(),
        "audit": if state.audit.is_durable() { "disk" } else { "memory" },
    }))
    .into_response())
}

/// The JSON view of an installed action.
pub fn action_view(action: &ActionFile, enabled: bool) -> Value {
    json!({
        "name": action.name,
        "version": action.version.to_string(),
        "enabled": enabled,
        "tool_name": action.tool_name(),
        "description": action.description(),
        "intent": action.intent,
        "requires_approval": action.requires_approval(),
        "input_schema": action.input_schema(),
        "connectors": action.requires.iter().map(|c| json!({
            "name": c.name.to_string(),
            "version": c.version.to_string(),
            "hash": c.hash.to_string(),
            "capabilities": CapabilitySubset::from(c).to_strings(),
        })).collect::<Vec<_>>(),
        "steps": action.steps.iter().map(|s| json!({"id": s.id, "connector": s.connector.to_string(), "op": s.op})).collect::<Vec<_>>(),
    })
}

async fn list_actions(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::ActionsList)?;
    let (items, load_errors) = state.actions.list();
    let items: Vec<Value> = items.iter().map(|a| action_view(&a.file, a.enabled)).collect();
    Ok(Json(json!({ "items": items, "load_errors": load_errors })).into_response())
}

async fn get_action(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    require(&principal, Scope::ActionsList)?;
    let installed = state.actions.get(&name).ok_or_else(|| action_not_found(&name))?;
    let mut view = action_view(&installed.file, installed.enabled);
    view["source"] = installed.file.source_text().into();
    Ok(Json(view).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchAction {
    enabled: bool,
}

async fn patch_action(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Json(body): Json<PatchAction>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    state.actions.set_enabled(&name, body.enabled).map_err(registry_error)?;
    let installed = state.actions.get(&name).ok_or_else(|| action_not_found(&name))?;
    Ok(Json(action_view(&installed.file, installed.enabled)).into_response())
}

async fn delete_action(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    state.actions.remove(&name).map_err(registry_error)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallAction {
    file_name: String,
    content: String,
    /// A fetched action package: its `<fqn>@<version>` (checked against the file's `source`),
    /// its signature (base64, verified against the keyring), and whether an unsigned package
    /// and replacing a different action of the same name are accepted.
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    allow_unsigned: bool,
    #[serde(default)]
    force: bool,
    /// Check the package (its reference, signature, `force`) and answer what it requires, without
    /// installing: `aileron action add <fqn>` asks this before it installs any connector, so a
    /// forged or unwanted package cannot make it fetch and install anything.
    #[serde(default)]
    verify_only: bool,
}

/// A fetched action package (SPEC §3.4): the file must be the release it claims to be (its
/// `source` and version), a present signature must verify against the keyring for the action's
/// FQN, an unsigned one needs `allow_unsigned`, and a different installed action of the same name
/// is replaced only with `force`.
fn verify_action_package(
    state: &AppState,
    action: &ActionFile,
    reference: &str,
    body: &InstallAction,
) -> Result<aileron_core::signing::SignatureStatus, ApiError> {
    let parsed = ConnectorRef::parse(reference).map_err(|e| ApiError::bad_request("invalid_reference", e.to_string()))?;
    if action.source.as_ref() != Some(&parsed) || action.version != parsed.version {
        let declared = action.source.as_ref().map(|s| s.to_string()).unwrap_or_else(|| "(none)".into());
        return Err(ApiError::bad_request(
            "fqn_mismatch",
            format!("the package's action declares source {declared} and version {}, but {reference} was requested", action.version),
        )
        .with_hint("install the reference the action file declares, or ask the publisher to fix `source`"));
    }
    let signature = match &body.signature {
        Some(encoded) => Some(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded)
                .map_err(|_| ApiError::bad_request("signature_failure", "the signature is not base64"))?,
        ),
        None => None,
    };
    let keyring = crate::keyring::load(&state.home.keyring()).map_err(ApiError::internal)?;
    let status = aileron_core::signing::verify(&keyring, &parsed.fqn, body.content.as_bytes(), signature.as_deref()).map_err(|e| {
        let [repo, owner] = aileron_core::signing::authorities_of(&parsed.fqn);
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "signature_failure", e.to_string())
            .with_hint(format!("if you trust the publisher, trust its key first: `aileron keyring trust {repo}` (or {owner})"))
    })?;
    if status == aileron_core::signing::SignatureStatus::Unsigned && !body.allow_unsigned {
        return Err(ApiError::bad_request("unsigned_refused", format!("the action package {reference} is unsigned"))
            .with_hint("re-run with --allow-unsigned if you trust where it came from"));
    }
    if let Some(existing) = state.actions.get(&action.name)
        && existing.file.source_text() != action.source_text()
        && !body.force
    {
        return Err(ApiError::new(StatusCode::CONFLICT, "action_exists", format!("a different action named `{}` is installed", action.name))
            .with_hint("compare with `aileron action show`; re-run with --force to replace it"));
    }
    Ok(status)
}

async fn install_action(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<InstallAction>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let actor = caller_for(&principal).actor;
    match add_action(&state, actor.clone(), &body).await {
        Err(error) if error.code != "audit_unavailable" => {
            let reference = body.reference.clone().unwrap_or_else(|| body.file_name.clone());
            let stage = if body.verify_only { "preview" } else { "install" };
            Ok(refuse_install(&state, actor, EventType::ActionInstallRefused, &reference, stage, error.into()).await)
        }
        answered => answered,
    }
}

/// `install_action` once the caller may install: every check, then the audit record, then the
/// registry. Any refusal comes back as an error for the caller to audit.
async fn add_action(state: &AppState, actor: aileron_core::audit::Actor, body: &InstallAction) -> ApiResult {
    let action = parse_action(&body.content, &body.file_name)
        .map_err(|e| ApiError::bad_request("parse_error", e.to_string()).with_hint(e.hint.clone()))?;
    let signature_status = match &body.reference {
        Some(reference) => Some(verify_action_package(state, &action, reference, body)?),
        None => None,
    };
    if body.verify_only {
        let requires: Vec<Value> = action
            .requires
            .iter()
            .map(|c| json!({ "name": c.name.to_string(), "version": c.version.to_string(), "hash": c.hash.to_string() }))
            .collect();
        return Ok(Json(json!({
            "name": action.name,
            "version": action.version.to_string(),
            "signature": signature_status.map(|status| status.describe()),
            "requires": requires,
        }))
        .into_response());
    }
    for required in &action.requires {
        let reference = format!("{}@{}", required.name, required.version);
        let entry = state.store.find(&required.hash).map_err(ApiError::internal)?.ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "connector_not_installed",
                format!("action `{}` requires {reference} ({}), which is not installed", action.name, required.hash),
            )
            .with_hint(format!("install it first: aileron connector install --from <dir or aileron.tar.gz> {reference}"))
        })?;
        if entry.manifest.name != required.name || entry.manifest.version != required.version {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "connector_mismatch",
                format!(
                    "hash {} belongs to {}@{}, not {reference}",
                    required.hash, entry.manifest.name, entry.manifest.version
                ),
            )
            .with_hint("fix the name, version or hash in [[requires.connectors]]"));
        }
        let subset = CapabilitySubset::from(required);
        check_subset_against_manifest(&subset, &entry.manifest).map_err(|e| {
            ApiError::bad_request("invalid_capabilities", format!("{}: {e}", body.file_name))
                .with_hint("an action may only narrow what its connector's manifest declares")
        })?;
    }
    let mut payload = Map::new();
    payload.insert("aileron.action.name".into(), action.name.clone().into());
    payload.insert("aileron.action.version".into(), action.version.to_string().into());
    payload.insert("aileron.action.sha256".into(), aileron_core::ContentHash::of_bytes(action.source_text().as_bytes()).to_string().into());
    payload.insert(
        "aileron.action.connectors".into(),
        action
            .requires
            .iter()
            .map(|c| {
                json!({
                    "aileron.connector.fqn": c.name.to_string(),
                    "aileron.connector.hash": c.hash.to_string(),
                    "capabilities": CapabilitySubset::from(c).to_strings(),
                })
            })
            .collect(),
    );
    payload.insert("aileron.action.requires_approval".into(), action.requires_approval().into());
    if let (Some(status), Some(reference)) = (&signature_status, &body.reference) {
        payload.insert("aileron.action.reference".into(), reference.clone().into());
        payload.insert("aileron.action.signature".into(), status.describe().into());
        if let aileron_core::signing::SignatureStatus::Verified { authority, fingerprint } = status {
            payload.insert("aileron.action.signer".into(), authority.clone().into());
            payload.insert("aileron.action.signer_fingerprint".into(), fingerprint.clone().into());
        }
    }
    // Adding an action is itself the user's consent: it grants nothing its connectors' consented
    // manifests did not (checked above), only narrows them.
    payload.insert("aileron.consent.decision".into(), "approved".into());
    payload.insert("aileron.consent.via".into(), "command".into());
    let event = AuditEvent {
        event_type: EventType::ActionInstalled,
        actor,
        session_id: None,
        payload,
        audit_id: None,
    };
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    let view = action_view(&action, true);
    state.actions.install(action).map_err(registry_error)?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn watch_actions(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require(&principal, Scope::ActionsList)?;
    let changes = tokio_stream::wrappers::WatchStream::from_changes(state.actions.subscribe())
        .map(|generation| Ok(Event::default().event("changed").data(json!({ "generation": generation }).to_string())));
    let ready = futures_util::stream::once(async { Ok(Event::default().event("ready").data("{}")) });
    let mut shutdown = state.shutdown.subscribe();
    let stream = ready.chain(changes).take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RunBody {
    #[serde(default)]
    args: Map<String, Value>,
}

async fn run(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    body: Option<Json<RunBody>>,
) -> ApiResult {
    let args = body.map(|Json(b)| b.args).unwrap_or_default();
    if let Err(refused) = require(&principal, Scope::ActionsRun) {
        crate::runner::audit_rejection(&state, &caller_for(&principal), &name, "forbidden", &args).await.map_err(rejection_error)?;
        return Err(refused);
    }
    let request = RunRequest::new(name, args, caller_for(&principal));
    match run_action(&state, request).await {
        Ok(RunOutcome::Completed { audit_id, result }) => {
            Ok(Json(json!({ "audit_id": audit_id, "result": result })).into_response())
        }
        Ok(RunOutcome::Failed(failure)) => Ok(failure_response(&failure)),
        Ok(RunOutcome::PendingApproval(pending)) => Ok((StatusCode::ACCEPTED, Json(pending)).into_response()),
        Err(rejection) => Err(rejection_error(rejection)),
    }
}

fn rejection_error(rejection: RunRejection) -> ApiError {
    match rejection {
        RunRejection::NotFound(name) => action_not_found(&name),
        RunRejection::Disabled(name) => {
            ApiError::new(StatusCode::CONFLICT, "action_disabled", format!("action `{name}` is disabled"))
                .with_hint(format!("enable it with: aileron action enable {name}"))
        }
        RunRejection::InvalidArgs(error) => ApiError::bad_request("invalid_args", error.to_string())
            .with_hint("pass only the action's declared inputs (aileron action show <name>)"),
        RunRejection::AuditUnavailable(cause) => ApiError::audit_unavailable(cause),
        RunRejection::ArgsTooLarge(_) => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "args_too_large", rejection.to_string())
            .with_hint("pass smaller arguments (a reference to the data rather than the data)"),
        RunRejection::TooManyPending(_) => ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_pending", rejection.to_string())
            .with_hint("wait for the user to decide the approvals already waiting (`aileron approval list`)"),
        RunRejection::JournalUnavailable(cause) => {
            eprintln!("aileron daemon: approval journal write failed: {cause}");
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "journal_unavailable", "the approval journal cannot be written")
                .with_hint("check free disk space and permissions of AILERON_HOME; nothing was executed")
        }
    }
}

/// Who the audit record names. Session tokens are agents; the daemon token's callers say what
/// they are (the CLI is a human at a terminal, `aileron-mcp` an agent).
/// The audit actor of a request, from the principal bearer or cookie authentication resolved and
/// nothing else (SPEC §0, invariant 4): no header can choose it.
pub(super) fn caller_for(principal: &Principal) -> Caller {
    match principal {
        Principal::Session { session_id, confined, .. } => {
            let mut caller = Caller::new(ActorType::Agent, session_id.clone());
            caller.session_id = Some(session_id.clone());
            caller.unconfined = !confined;
            caller
        }
        Principal::Web { .. } => Caller::new(ActorType::Human, "web"),
        // The daemon token is the local user's own (the CLI reads it from daemon.json; agents
        // never get it: launched ones are confined, `aileron-mcp` trades it for a session).
        Principal::Admin => Caller::new(ActorType::Human, LOCAL_USER),
    }
}

/// The actor id of the daemon token's holder.
pub const LOCAL_USER: &str = "local-user";

async fn list_connectors(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let entries = state.store.list().map_err(ApiError::internal)?;
    let items: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "fqn": e.fqn.to_string(),
                "version": e.version.to_string(),
                "hash": e.hash.to_string(),
                "signature": if e.signed { "signed (verified at install)" } else { "unsigned" },
                "publisher": e.manifest.publisher,
                "capabilities": e.manifest.describe_capabilities(),
                "credential": e.manifest.credential_kind().map(|kind| kind.as_str()),
            })
        })
        .collect();
    Ok(Json(json!({ "items": items })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewBody {
    /// A local package (directory or tarball); absent: fetched from the reference's forge.
    #[serde(default)]
    source: Option<PathBuf>,
    reference: String,
    #[serde(default)]
    expected_hash: Option<String>,
}

/// Steps 1–6 of the install pipeline (SPEC §3.4), shared by preview and install: resolve and
/// download (when no local source is given), check the layout and the manifest's identity,
/// verify a present signature against the keyring (`signature_failure` otherwise, whatever the
/// caller says), check `provenance_hash`, compare the expected hash.
/// Why an install (or its preview) was refused: a request error, or a failure envelope
/// (`signature_failure`, `hash_mismatch`). Every refusal is audited before it is answered.
enum Refusal {
    Api(ApiError),
    Failure(aileron_core::Failure),
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Refusal {
        Refusal::Api(error)
    }
}

impl Refusal {
    fn code(&self) -> &str {
        match self {
            Refusal::Api(error) => error.code,
            Refusal::Failure(failure) => failure.class.as_str(),
        }
    }

    fn message(&self) -> &str {
        match self {
            Refusal::Api(error) => &error.message,
            Refusal::Failure(failure) => &failure.message,
        }
    }

    fn into_response(self) -> Response {
        match self {
            Refusal::Api(error) => error.into_response(),
            Refusal::Failure(failure) => failure_response(&failure),
        }
    }
}

/// Audits a refused install (`connector.install_refused` / `action.install_refused`) and answers
/// the refusal; if the record cannot be written, the answer says so instead (fail closed).
async fn refuse_install(state: &AppState, actor: aileron_core::audit::Actor, event_type: EventType, reference: &str, stage: &str, refusal: Refusal) -> Response {
    let mut payload = Map::new();
    payload.insert("aileron.install.reference".into(), reference.into());
    payload.insert("aileron.install.stage".into(), stage.into());
    payload.insert("aileron.install.refusal".into(), refusal.code().into());
    payload.insert("aileron.install.message".into(), aileron_core::untrusted_text::visible(refusal.message(), 500).into());
    let event = AuditEvent { event_type, actor, session_id: None, payload, audit_id: None };
    match state.audit.append(event).await {
        Ok(_) => refusal.into_response(),
        Err(error) => ApiError::audit_unavailable(error).into_response(),
    }
}

async fn inspect(state: &AppState, body: &PreviewBody) -> Result<(crate::package::Package, Value), Refusal> {
    let bad = Refusal::Api;
    let reference = ConnectorRef::parse(&body.reference).map_err(|e| {
        let code = if e.to_string().contains("unknown_scheme") { "unknown_scheme" } else { "invalid_reference" };
        bad(ApiError::bad_request(code, e.to_string())
            .with_hint("write the reference as <scheme>://<owner>/<repo>@<semver>, e.g. github://acme/slack@1.2.0 (github or gitlab)"))
    })?;
    let downloaded;
    let source = match &body.source {
        Some(source) => source.clone(),
        None => {
            let url = crate::forge::release_url(&reference.fqn, &reference.version);
            let bytes = crate::forge::fetch(&url, crate::forge::MAX_DOWNLOAD_BYTES, &mut |_, _| {}).await.map_err(|e| {
                let status = if e.retriable { StatusCode::BAD_GATEWAY } else { StatusCode::NOT_FOUND };
                let hint = e.hint();
                bad(ApiError::new(status, "fetch_failed", e.to_string()).with_hint(hint))
            })?;
            downloaded = tempfile::Builder::new().suffix(".tar.gz").tempfile_in(state.home.root()).map_err(|e| bad(ApiError::internal(e)))?;
            std::fs::write(downloaded.path(), &bytes).map_err(|e| bad(ApiError::internal(e)))?;
            downloaded.path().to_path_buf()
        }
    };
    let package = read_package(&source, &reference)
        .map_err(|e| bad(ApiError::bad_request(e.code(), e.to_string()).with_hint(e.hint())))?;
    if let Some(provenance) = &package.manifest.provenance_hash {
        let actual = aileron_core::ContentHash::of_connector(&package.wasm, b"");
        if *provenance != actual {
            let failure = aileron_core::Failure::hash_mismatch(format!(
                "the manifest's provenance_hash {provenance} does not match connector.wasm ({actual})"
            ))
            .with_detail("hint", "the binary is not the build the manifest names; ask the publisher for a consistent release");
            return Err(Refusal::Failure(failure));
        }
    }
    let keyring = crate::keyring::load(&state.home.keyring()).map_err(|e| bad(ApiError::internal(e)))?;
    let message = [package.wasm.as_slice(), package.manifest_text.as_bytes()].concat();
    let status = aileron_core::signing::verify(&keyring, &reference.fqn, &message, package.signature.as_deref()).map_err(|e| {
        let [repo, owner] = aileron_core::signing::authorities_of(&reference.fqn);
        let failure = aileron_core::Failure::new(aileron_core::FailureClass::SignatureFailure, aileron_core::Boundary::Runtime, e.to_string())
            .with_detail("authorities", json!([repo, owner]))
            .with_detail(
                "hint",
                format!("if you trust the publisher, trust its key first: `aileron keyring trust {repo}` (or {owner}); never install a package whose signature does not verify"),
            );
        Refusal::Failure(failure)
    })?;
    if let Some(expected) = &body.expected_hash
        && *expected != package.hash.to_string()
    {
        let failure = aileron_core::Failure::hash_mismatch(format!(
            "package hash {} does not match the expected {expected}",
            package.hash
        ))
        .with_detail(
            "hint",
            "these are not the bytes you pinned or consented to (the release was replaced, or the download altered); nothing was installed — check the hash with the publisher",
        );
        return Err(Refusal::Failure(failure));
    }
    let signer = match &status {
        aileron_core::signing::SignatureStatus::Verified { authority, fingerprint } => json!({ "authority": authority, "fingerprint": fingerprint }),
        aileron_core::signing::SignatureStatus::Unsigned => Value::Null,
    };
    let view = json!({
        "fqn": reference.fqn.to_string(),
        "version": reference.version.to_string(),
        "hash": package.hash.to_string(),
        "short_hash": package.hash.short(),
        "publisher": package.manifest.publisher,
        "signature": status.describe(),
        "signed": signer.is_object(),
        "signer": signer,
        "capabilities": package.manifest.describe_capabilities(),
    });
    Ok((package, view))
}

async fn preview_connector(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<PreviewBody>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let (package, mut view) = match inspect(&state, &body).await {
        Ok(inspected) => inspected,
        Err(refusal) => {
            let actor = caller_for(&principal).actor;
            return Ok(refuse_install(&state, actor, EventType::ConnectorInstallRefused, &body.reference, "preview", refusal).await);
        }
    };
    view["already_installed"] = state.store.find(&package.hash).map_err(ApiError::internal)?.is_some().into();
    Ok(Json(view).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallBody {
    #[serde(flatten)]
    preview: PreviewBody,
    /// How consent was given: `prompt` (the user answered y) or `flag` (`--yes`).
    consent: String,
    /// With `flag`: the caller accepts an unsigned package (`--allow-unsigned`). Enforced here, so
    /// no client can skip it.
    #[serde(default)]
    allow_unsigned: bool,
}

async fn install_connector(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<InstallBody>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    if body.preview.expected_hash.is_none() {
        return Err(ApiError::bad_request("missing_expected_hash", "install needs the hash the user consented to")
            .with_hint("call /v1/connectors/preview first and pass its hash as expected_hash"));
    }
    if body.consent != "prompt" && body.consent != "flag" {
        return Err(ApiError::bad_request("invalid_consent", "consent must be `prompt` or `flag`"));
    }
    let actor = caller_for(&principal).actor;
    let (package, view) = match inspect(&state, &body.preview).await {
        Ok(inspected) => inspected,
        Err(refusal) => return Ok(refuse_install(&state, actor, EventType::ConnectorInstallRefused, &body.preview.reference, "install", refusal).await),
    };
    if view["signed"] == false && body.consent == "flag" && !body.allow_unsigned {
        let refusal = ApiError::bad_request("unsigned_refused", "the package is unsigned and consent was given by flag without allow_unsigned")
            .with_hint("review it and re-run with --yes --allow-unsigned if you trust where it came from");
        return Ok(refuse_install(&state, actor, EventType::ConnectorInstallRefused, &body.preview.reference, "install", refusal.into()).await);
    }
    let entry = state.store.commit(&package).map_err(|error| {
        eprintln!("aileron daemon: committing {} to the store: {error}", package.hash);
        ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "store_unwritable", format!("the connector store cannot be written: {error}"))
            .with_hint(format!("check the permissions and free space of {}; nothing was installed", state.home.store_dir().display()))
    })?;
    let mut payload = Map::new();
    payload.insert("aileron.connector.fqn".into(), view["fqn"].clone());
    payload.insert("aileron.connector.version".into(), view["version"].clone());
    payload.insert("aileron.connector.hash".into(), view["hash"].clone());
    payload.insert("aileron.connector.signature".into(), view["signature"].clone());
    if let Some(fingerprint) = view["signer"]["fingerprint"].as_str() {
        payload.insert("aileron.connector.signer".into(), view["signer"]["authority"].clone());
        payload.insert("aileron.connector.signer_fingerprint".into(), fingerprint.into());
    }
    payload.insert("aileron.consent.decision".into(), "approved".into());
    payload.insert("aileron.consent.via".into(), body.consent.clone().into());
    payload.insert("aileron.connector.capabilities".into(), view["capabilities"].clone());
    let event = AuditEvent {
        event_type: EventType::ConnectorInstalled,
        actor: caller_for(&principal).actor,
        session_id: None,
        payload,
        audit_id: None,
    };
    let record = state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    let mut view = view;
    view["audit_id"] = record.audit_id.into();
    view["store_path"] = entry.path.display().to_string().into();
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckQuery {
    #[serde(default)]
    pre: bool,
}

/// For each installed connector, the released versions newer than the newest one installed.
async fn check_connectors(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<CheckQuery>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let mut newest: std::collections::BTreeMap<String, (aileron_core::Fqn, Vec<semver::Version>)> = std::collections::BTreeMap::new();
    for entry in state.store.list().map_err(ApiError::internal)? {
        newest.entry(entry.fqn.to_string()).or_insert_with(|| (entry.fqn.clone(), Vec::new())).1.push(entry.version);
    }
    let mut items = Vec::new();
    for (name, (fqn, mut installed)) in newest {
        installed.sort();
        let latest = installed.last().cloned().expect("one version at least");
        let url = crate::forge::releases_url(&fqn);
        let item = match crate::forge::fetch(&url, 4 * 1024 * 1024, &mut |_, _| {}).await {
            Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
                Ok(listing) => {
                    let newer: Vec<String> = crate::forge::released_versions(&fqn, &listing, query.pre)
                        .into_iter()
                        .filter(|v| *v > latest)
                        .map(|v| v.to_string())
                        .collect();
                    json!({ "fqn": name, "installed": installed.iter().map(|v| v.to_string()).collect::<Vec<_>>(), "newer": newer })
                }
                Err(_) => json!({ "fqn": name, "error": format!("{url}: not a releases listing") }),
            },
            Err(error) => json!({ "fqn": name, "error": error.to_string() }),
        };
        items.push(item);
    }
    Ok(Json(json!({ "items": items })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveConnector {
    reference: String,
}

/// The installed actions that pin `hash`.
fn actions_using(state: &AppState, hash: &aileron_core::ContentHash) -> Vec<String> {
    let (actions, _) = state.actions.list();
    actions.iter().filter(|a| a.file.requires.iter().any(|c| c.hash == *hash)).map(|a| a.file.name.clone()).collect()
}

/// Deletes compiled artifacts (`<hex>-<engine>.cwasm`) of modules no longer in the store.
fn remove_orphan_artifacts(state: &AppState) -> usize {
    let present: std::collections::HashSet<String> =
        state.store.list().unwrap_or_default().iter().map(|e| e.hash.hex().to_string()).collect();
    let mut removed = 0;
    for entry in std::fs::read_dir(state.home.cache_dir()).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(hex) = name.strip_suffix(".cwasm").and_then(|stem| stem.split('-').next()) else { continue };
        if !present.contains(hex) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

async fn audit_removed(state: &AppState, principal: &Principal, entry: &crate::store::StoreEntry, via: &str) -> Result<(), ApiError> {
    let mut payload = Map::new();
    payload.insert("aileron.connector.fqn".into(), entry.fqn.to_string().into());
    payload.insert("aileron.connector.version".into(), entry.version.to_string().into());
    payload.insert("aileron.connector.hash".into(), entry.hash.to_string().into());
    payload.insert("aileron.connector.removed_by".into(), via.into());
    let event = AuditEvent { event_type: EventType::ConnectorRemoved, actor: caller_for(principal).actor, session_id: None, payload, audit_id: None };
    state.audit.append(event).await.map(|_| ()).map_err(ApiError::audit_unavailable)
}

async fn remove_connector(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<RemoveConnector>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let reference = ConnectorRef::parse(&body.reference).map_err(|e| ApiError::bad_request("invalid_reference", e.to_string()))?;
    let entries = state.store.list().map_err(ApiError::internal)?;
    let entry = entries.into_iter().find(|e| e.fqn == reference.fqn && e.version == reference.version).ok_or_else(|| {
        ApiError::not_found("connector_not_found", format!("{} is not installed", body.reference)).with_hint("`aileron connector list` shows what is installed")
    })?;
    let users = actions_using(&state, &entry.hash);
    if !users.is_empty() {
        return Err(ApiError::new(StatusCode::CONFLICT, "connector_in_use", format!("{} is used by: {}", body.reference, users.join(", ")))
            .with_hint("remove those actions first (`aileron action remove <name>`)"));
    }
    state.store.remove(&entry.hash).map_err(ApiError::internal)?;
    remove_orphan_artifacts(&state);
    audit_removed(&state, &principal, &entry, "remove").await?;
    Ok(Json(json!({ "removed": body.reference, "hash": entry.hash.to_string() })).into_response())
}

async fn gc_connectors(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let mut removed = Vec::new();
    for entry in state.store.list().map_err(ApiError::internal)? {
        if actions_using(&state, &entry.hash).is_empty() {
            state.store.remove(&entry.hash).map_err(ApiError::internal)?;
            audit_removed(&state, &principal, &entry, "gc").await?;
            removed.push(entry.reference());
        }
    }
    let artifacts = remove_orphan_artifacts(&state);
    Ok(Json(json!({ "removed": removed, "compiled_artifacts_removed": artifacts })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    since: Option<String>,
    audit_id: Option<String>,
    connector_fqn: Option<String>,
    class: Option<String>,
    event_type: Option<String>,
    limit: Option<usize>,
}

async fn list_audit(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<AuditQuery>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let filter = AuditFilter {
        since: query.since,
        audit_id: query.audit_id,
        connector_fqn: query.connector_fqn,
        class: query.class,
        event_type: query.event_type,
        limit: Some(query.limit.unwrap_or(100).min(10_000)),
    };
    let items = state.audit.query(&filter).map_err(ApiError::internal)?;
    Ok(Json(json!({ "items": items })).into_response())
}

async fn get_audit(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    match state.audit.get(&id).map_err(ApiError::internal)? {
        Some(record) => Ok(Json(record).into_response()),
        None => Err(ApiError::not_found("audit_not_found", format!("no audit record `{id}`"))
            .with_hint("list recent records with: aileron audit list")),
    }
}

fn action_not_found(name: &str) -> ApiError {
    ApiError::not_found("action_not_found", format!("no action named `{name}` is installed"))
        .with_hint("list installed actions with: aileron action list")
}

fn registry_error(error: crate::actions::RegistryError) -> ApiError {
    match error {
        crate::actions::RegistryError::NotFound(name) => action_not_found(&name),
        other => ApiError::internal(other),
    }
}

/// An OpenAPI 3.1 description of [`ROUTES`], checked in as `docs/http-api.json` and diffed by a
/// test so that the served surface and its description cannot drift apart silently.
pub fn http_api_document() -> Value {
    let mut paths = Map::new();
    for (method, path, summary) in ROUTES {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        let mut operation = json!({ "summary": summary });
        if *path != "/v1/health" && !crate::gateway::is_gateway_path(&axum::http::Method::HEAD, path) {
            operation["security"] = json!([{ "bearer": [] }]);
        }
        let parameters: Vec<Value> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        entry[method.to_ascii_lowercase()] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Aileron daemon API", "version": super::VERSION },
        "servers": [{ "url": "http://127.0.0.1:{port}" }],
        "components": { "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } } },
        "paths": paths,
    })
}

/// A session token sees only its own session's approvals (SPEC §8); the local user sees all.
fn visible_to(principal: &Principal, entry: &aileron_core::approval::ApprovalEntry) -> bool {
    match principal {
        Principal::Session { session_id, .. } => entry.session_id.as_deref() == Some(session_id.as_str()),
        _ => true,
    }
}

fn pending_for(state: &AppState, principal: &Principal) -> Vec<aileron_core::approval::ApprovalEntry> {
    state.approvals.pending().into_iter().filter(|entry| visible_to(principal, entry)).collect()
}

async fn list_approvals(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::ApprovalsPoll)?;
    Ok(Json(json!({ "items": pending_for(&state, &principal) })).into_response())
}

async fn watch_approvals(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require(&principal, Scope::ApprovalsPoll)?;
    // Subscribe before taking the snapshot so nothing falls between the two.
    let lagging = state.clone();
    let watcher = principal.clone();
    let events = tokio_stream::wrappers::BroadcastStream::new(state.approvals.subscribe()).filter_map(move |event| {
        let item = match event {
            // A watcher that fell behind missed events: send its whole pending list again.
            Err(_lagged) => {
                let items = json!({ "items": pending_for(&lagging, &watcher) }).to_string();
                Some(Ok(Event::default().event("snapshot").data(items)))
            }
            Ok(event) => {
                let (name, entry) = match &event {
                    QueueEvent::Pending { entry } => ("pending", entry),
                    QueueEvent::Resolved { entry } => ("resolved", entry),
                };
                visible_to(&watcher, entry)
                    .then(|| Ok(Event::default().event(name).data(serde_json::to_string(entry).unwrap_or_default())))
            }
        };
        std::future::ready(item)
    });
    let snapshot = json!({ "items": pending_for(&state, &principal) }).to_string();
    let first = futures_util::stream::once(async move { Ok(Event::default().event("snapshot").data(snapshot)) });
    let mut shutdown = state.shutdown.subscribe();
    let stream = first.chain(events).take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(30))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideBody {
    approved: bool,
    #[serde(default)]
    reason: Option<String>,
}

fn approval_not_found(id: &str) -> ApiError {
    ApiError::not_found("approval_not_found", format!("approval `{id}` is unknown or already decided"))
        .with_hint("list pending approvals with: aileron approval list")
}

async fn decide_approval(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<DecideBody>,
) -> ApiResult {
    if let Err(refused) = require(&principal, Scope::ApprovalsDecide) {
        // A caller without the decide scope (an agent's session token) tried to decide: on record.
        let mut payload = Map::new();
        payload.insert("aileron.approval.id".into(), id.chars().take(100).collect::<String>().into());
        payload.insert("aileron.rejection.code".into(), "forbidden".into());
        let caller = caller_for(&principal);
        let event = AuditEvent { event_type: EventType::ApprovalDecideRefused, actor: caller.actor, session_id: caller.session_id, payload, audit_id: None };
        state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
        return Err(refused);
    }
    let approval_id = ApprovalId::parse(&id).map_err(|_| approval_not_found(&id))?;
    let caller = caller_for(&principal);
    let decision = Decision { approved: body.approved, reason: body.reason, by: caller.actor.id.clone() };
    let entry = match state.approvals.decide(&approval_id, decision) {
        Ok(entry) => entry,
        Err(QueueError::Unknown(_)) | Err(QueueError::Decide(DecideError::NotPending { .. })) => {
            return Err(approval_not_found(&id));
        }
        Err(QueueError::Decide(error @ DecideError::ReasonTooLong { .. })) => {
            return Err(ApiError::bad_request("invalid_reason", error.to_string()));
        }
        Err(error) => return Err(ApiError::internal(error)),
    };
    let decision = if body.approved { ApprovalDecision::Approved } else { ApprovalDecision::Denied };
    let event = AuditEvent {
        event_type: decision.audit_event_type().expect("approve and deny are audited"),
        actor: caller.actor,
        session_id: entry.session_id.clone(),
        payload: decision_payload(&entry, decision),
        audit_id: None,
    };
    // The decision is journaled; if it cannot be audited we answer with an error and do not run
    // it now (an approved entry resumes, once, at the next start).
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    // The wait span (request → decision) joins the requester's trace; the approved run follows it.
    let waited = state.telemetry.approval_wait(&entry, decision);
    if body.approved {
        let run = crate::runner::execute_approved(state.clone(), approval_id);
        tokio::spawn(opentelemetry::context::FutureExt::with_context(run, waited));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn approval_result(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> ApiResult {
    require(&principal, Scope::ApprovalsPoll)?;
    let unknown = || {
        ApiError::not_found("approval_not_found", format!("approval `{id}` is unknown"))
            .with_hint("list pending approvals with: aileron approval list")
    };
    let approval_id = ApprovalId::parse(&id).map_err(|_| unknown())?;
    // Another session's approval is as unknown to this token as a made-up id.
    let entry = state.approvals.get(&approval_id).filter(|entry| visible_to(&principal, entry)).ok_or_else(unknown)?;
    Ok(Json(ResultView::of(&entry)).into_response())
}

async fn mint_login_ticket(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let ticket = state.tokens.mint_ticket();
    let login_url = format!("{}/approvals/login?ticket={ticket}", state.base_url());
    Ok((StatusCode::CREATED, Json(json!({ "ticket": ticket, "login_url": login_url, "expires_in_seconds": super::auth::TICKET_TTL.as_secs() }))).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StartSession {
    agent: String,
    #[serde(default)]
    pid: Option<u32>,
    /// How the agent is contained; absent means `unconfined` (a claim of containment is explicit).
    #[serde(default)]
    confinement: Confinement,
}

/// Mints a launch session's token. Only the local user (daemon token) may: a session token asking
/// for another session gets 403, so an agent can never widen its own grant.
///
/// Audited as `session.started`; a session whose record cannot be written is ended again and
/// its token revoked before the 503, so no agent holds a grant the log does not show.
async fn start_session(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Extension(sessions): Extension<Arc<SessionRegistry>>,
    Json(body): Json<StartSession>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let started = sessions.start(&state.tokens, &body.agent, body.pid, body.confinement).map_err(session_error)?;
    let session = &started.session;
    let mut payload = Map::new();
    payload.insert("aileron.session.agent".into(), session.agent.clone().into());
    if let Some(pid) = session.pid {
        payload.insert("aileron.session.pid".into(), pid.into());
    }
    payload.insert("aileron.session.scopes".into(), session.scopes.clone().into());
    payload.insert("aileron.session.confinement".into(), session.confinement.as_str().into());
    if let Err(error) = state.audit.append(session_event(EventType::SessionStarted, &principal, session, payload)).await
    {
        let _ = sessions.end(&state.tokens, &session.session_id, None);
        return Err(ApiError::audit_unavailable(error));
    }
    let view = json!({
        "session_id": started.session.session_id,
        "token": started.token,
        "scopes": started.session.scopes,
        "confinement": started.session.confinement.as_str(),
        "started_at": started.session.started_at,
    });
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn get_session(
    Extension(principal): Extension<Principal>,
    Extension(sessions): Extension<Arc<SessionRegistry>>,
    Path(id): Path<String>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let session = sessions.get(&id).ok_or_else(|| session_error(SessionError::NotFound(id)))?;
    Ok(Json(session).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndSession {
    exit_code: Option<i32>,
}

/// Revokes the session's token, journals the end and audits it as `session.ended`.
async fn end_session(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Extension(sessions): Extension<Arc<SessionRegistry>>,
    Path(id): Path<String>,
    Json(body): Json<EndSession>,
) -> ApiResult {
    require(&principal, Scope::Admin)?;
    let session = sessions.end(&state.tokens, &id, body.exit_code).map_err(session_error)?;
    let mut payload = Map::new();
    payload.insert("aileron.session.agent".into(), session.agent.clone().into());
    payload.insert("aileron.session.exit_code".into(), session.exit_code.into());
    let event = session_event(EventType::SessionEnded, &principal, &session, payload);
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    Ok(Json(session).into_response())
}

/// A session's audit record: the launcher is the actor, the session is the record's `session_id`.
fn session_event(
    event_type: EventType,
    principal: &Principal,
    session: &crate::sessions::Session,
    payload: Map<String, Value>,
) -> AuditEvent {
    AuditEvent {
        event_type,
        actor: caller_for(principal).actor,
        session_id: Some(session.session_id.clone()),
        payload,
        audit_id: None,
    }
}

fn session_error(error: SessionError) -> ApiError {
    match error {
        SessionError::InvalidAgent(_) => ApiError::bad_request("invalid_agent", error.to_string())
            .with_hint("aileron launch names the agent: claude, codex, opencode, goose or pi"),
        SessionError::NotFound(_) => ApiError::not_found("session_not_found", error.to_string())
            .with_hint("session ids are printed by `aileron launch`; a daemon restart keeps only their journal"),
        SessionError::AlreadyEnded(_) => ApiError::new(StatusCode::CONFLICT, "session_ended", error.to_string()),
        SessionError::Journal { .. } => {
            eprintln!("aileron daemon: session journal write failed: {error}");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "journal_unavailable",
                "the session journal cannot be written",
            )
            .with_hint("check free disk space and permissions of AILERON_HOME")
        }
    }
}
