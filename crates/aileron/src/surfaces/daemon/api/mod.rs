//! The daemon's HTTP API (SPEC §7): one route table, from which both the router ([`routes`]) and
//! the published description (`docs/http-api.json`, [`http_api_document`]) derive, and thin
//! per-resource handler files that call the workflows of [`crate::workflows`]: one file per
//! resource, named as its workflow is.

pub mod actions;
pub mod approvals;
pub mod audit;
pub mod connectors;
pub mod credentials;
pub mod events;
pub mod keyring;
pub mod sessions;

use std::sync::Arc;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::routing::{MethodRouter, delete, get, patch, post};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::{AppState, web};
use crate::platform::principal::{Principal, Scope};
use crate::wire::{self, Answer};

/// How a route admits its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Anyone who reaches the loopback port with the right Host (liveness).
    Public,
    /// The daemon token, a launch session token, or the web page's session cookie (with its
    /// CSRF secret on changes), whichever grants the scope.
    Token(Scope),
    /// `/mcp`: a bearer token that may list and run actions.
    McpBearer,
    /// The web page: its session cookie, or a sign-in form when there is none.
    PageCookie,
    /// A one-time login ticket minted by `aileron open` (query parameter).
    LoginTicket,
    /// The OAuth2 redirect: the single-use `state` of a pending authorization.
    OAuthState,
    /// The LLM gateway: the agent's own provider key goes upstream; no daemon token.
    Upstream,
}

/// Who serves a route.
pub enum Serve {
    /// A handler on the daemon's state.
    App(fn() -> MethodRouter<Arc<AppState>>),
    /// The LLM gateway's transparent proxy ([`crate::dataplane::gateway`]).
    Gateway,
    /// rmcp's streamable HTTP service ([`super::mcp_mount`]).
    Mcp,
}

/// One route of the API.
pub struct Route {
    /// The HTTP method (the handler's `MethodRouter` serves it; this names it for the
    /// description and the tests).
    pub method: &'static str,
    pub path: &'static str,
    pub auth: Auth,
    pub summary: &'static str,
    /// The JSON Schema of the request body (or query), when it has one.
    pub request: Option<fn(&mut SchemaGenerator) -> Schema>,
    /// What success answers; every route says (`every_route_declares_what_it_answers`).
    pub answers: Option<Answers>,
    pub serve: Serve,
}

/// What a route answers on success.
#[derive(Clone, Copy)]
pub enum Answers {
    /// `status` with a JSON body of one wire type: its schema, and a check that a body is exactly
    /// that type (it reads back into the type and writes out again unchanged).
    Json { status: u16, schema: fn(&mut SchemaGenerator) -> Schema, conforms: fn(&Value) -> Result<(), String> },
    /// `status` with no body.
    Empty(u16),
    /// A `text/event-stream` that stays open.
    Stream,
    /// A console page (HTML) or asset.
    Page,
    /// `303 See Other` to a page.
    Redirect,
    /// Whatever the other side answers: the LLM upstream, or MCP's JSON-RPC.
    Proxied,
}

impl Answers {
    /// The success status a body is checked at, and the check.
    pub fn json(&self) -> Option<(u16, fn(&Value) -> Result<(), String>)> {
        match self {
            Answers::Json { status, conforms, .. } => Some((*status, *conforms)),
            _ => None,
        }
    }
}

/// `body` is exactly a `T`: it reads back into one and writes out the same JSON.
fn conforms<T: serde::de::DeserializeOwned + serde::Serialize>(body: &Value) -> Result<(), String> {
    let typed: T =
        serde_json::from_value(body.clone()).map_err(|error| format!("does not read as the type: {error}"))?;
    let again = serde_json::to_value(&typed).map_err(|error| error.to_string())?;
    if again == *body { Ok(()) } else { Err(format!("reads as the type but writes back as {again}")) }
}

const fn route(method: &'static str, path: &'static str, auth: Auth, summary: &'static str, serve: Serve) -> Route {
    Route { method, path, auth, summary, request: None, answers: None, serve }
}

impl Route {
    /// The request carries `T` (a JSON body, or the query of a `GET`).
    const fn takes<T: JsonSchema>(self) -> Route {
        Route { request: Some(T::json_schema), ..self }
    }

    /// Success is `status` with a `T` body.
    const fn answers<T: JsonSchema + serde::de::DeserializeOwned + serde::Serialize>(self, status: u16) -> Route {
        Route { answers: Some(Answers::Json { status, schema: T::json_schema, conforms: conforms::<T> }), ..self }
    }

    /// Success is `status` with no body.
    const fn empty(self, status: u16) -> Route {
        Route { answers: Some(Answers::Empty(status)), ..self }
    }

    const fn streams(self) -> Route {
        Route { answers: Some(Answers::Stream), ..self }
    }

    const fn page(self) -> Route {
        Route { answers: Some(Answers::Page), ..self }
    }

    const fn redirects(self) -> Route {
        Route { answers: Some(Answers::Redirect), ..self }
    }

    const fn proxied(self) -> Route {
        Route { answers: Some(Answers::Proxied), ..self }
    }
}

use Auth::{LoginTicket, McpBearer, OAuthState, PageCookie, Public, Token, Upstream};
use Scope::{ActionsList, ActionsRun, Admin, ApprovalsDecide, ApprovalsPoll, Console};
use Serve::App;

/// Every route the daemon serves.
pub const ROUTES: &[Route] = &[
    route("GET", "/v1/health", Public, "liveness; no token needed", App(|| get(health))).answers::<wire::Health>(200),
    route("GET", "/v1/status", Token(Admin), "version, pid, counts, vault state", App(|| get(status))).answers::<wire::StatusView>(200),
    route("GET", "/v1/actions", Token(ActionsList), "installed actions {items, load_errors}", App(|| get(actions::list))).answers::<wire::ActionList>(200),
    route("POST", "/v1/actions/install", Token(Admin), "install an action file {file_name, content}", App(|| post(actions::install))).takes::<wire::InstallAction>().answers::<wire::ActionView>(201),
    route("GET", "/v1/actions/watch", Token(ActionsList), "SSE: `changed` when the action set changes", App(|| get(actions::watch))).streams(),
    route("GET", "/v1/actions/{name}", Token(ActionsList), "one action", App(|| get(actions::get))).answers::<wire::ActionView>(200),
    route("PATCH", "/v1/actions/{name}", Token(Console), "{enabled}", App(|| patch(actions::patch))).takes::<wire::PatchAction>().answers::<wire::ActionView>(200),
    route("DELETE", "/v1/actions/{name}", Token(Admin), "remove an action", App(|| delete(actions::delete))).empty(204),
    route("POST", "/v1/actions/{name}/run", Token(ActionsRun), "{args} → 200 {audit_id, result} | 202 pending approval | failure envelope", App(|| post(actions::run))).takes::<wire::RunBody>().answers::<wire::RunCompleted>(200),
    route("GET", "/v1/connectors", Token(Console), "installed connectors", App(|| get(connectors::list))).answers::<wire::ConnectorList>(200),
    route("POST", "/v1/connectors/preview", Token(Admin), "install pipeline up to consent {reference, source?, expected_hash?}; without source the release is fetched from its forge; a present signature must verify", App(|| post(connectors::preview))).takes::<wire::PreviewBody>().answers::<wire::ConnectorPreview>(200),
    route("POST", "/v1/connectors/install", Token(Admin), "install pipeline with consent recorded {reference, source?, expected_hash, consent: prompt|flag, allow_unsigned?}", App(|| post(connectors::install))).takes::<wire::InstallBody>().answers::<wire::ConnectorInstalled>(201),
    route("POST", "/v1/connectors/remove", Token(Console), "{reference} removes an installed version; 409 while an installed action needs it (naming the actions)", App(|| post(connectors::remove))).takes::<wire::RemoveConnector>().answers::<wire::ConnectorRemoved>(200),
    route("GET", "/v1/connectors/check", Token(Admin), "?pre=true: newer releases per installed connector {items: [{fqn, installed, newer, error?}]}", App(|| get(connectors::check))).takes::<wire::CheckQuery>().answers::<wire::ReleaseCheck>(200),
    route("POST", "/v1/connectors/gc", Token(Admin), "removes store entries no installed action uses and compiled-cache files of removed entries", App(|| post(connectors::gc))).answers::<wire::Collected>(200),
    route("GET", "/v1/keyring", Token(Admin), "trusted publisher keys {items: [{authority, fingerprint, key}]}", App(|| get(keyring::list))).answers::<wire::KeyringList>(200),
    route("POST", "/v1/keyring/trust", Token(Admin), "{authority, key} → 201 (200 when already trusted); audited keyring.trusted", App(|| post(keyring::trust))).takes::<wire::TrustBody>().answers::<wire::KeyTrusted>(201),
    route("POST", "/v1/keyring/revoke", Token(Admin), "{authority} | {fingerprint}; audited keyring.revoked", App(|| post(keyring::revoke))).takes::<wire::RevokeBody>().answers::<wire::KeysRevoked>(200),
    route("GET", "/v1/audit", Token(Console), "audit records, newest first (since, audit_id, connector_fqn, class, event_type, limit)", App(|| get(audit::list))).takes::<wire::AuditQuery>().answers::<wire::AuditList>(200),
    route("GET", "/v1/audit/verify", Token(Console), "verifies the whole hash chain {ok, records, last_seq, head_anchor?, warning?, problem?, hint?}; ?checkpoints=true also every signed checkpoint {checkpoints}", App(|| get(audit::verify))).takes::<wire::VerifyQuery>().answers::<wire::ChainVerification>(200),
    route("GET", "/v1/audit/{id}", Token(Console), "one audit record", App(|| get(audit::get))).answers::<aileron_core::audit::AuditRecord>(200),
    route("GET", "/v1/action-approvals", Token(ApprovalsPoll), "pending approvals, oldest first", App(|| get(approvals::list))).answers::<wire::ApprovalList>(200),
    route("GET", "/v1/action-approvals/watch", Token(ApprovalsPoll), "SSE: `snapshot`, `pending`, `resolved`; 30 s heartbeat", App(|| get(approvals::watch))).streams(),
    route("POST", "/v1/action-approvals/{id}/decide", Token(ApprovalsDecide), "{approved, reason?} → 204; 404 when unknown or already decided", App(|| post(approvals::decide))).takes::<wire::DecideBody>().empty(204),
    route("POST", "/v1/action-approvals/{id}/preview", Token(ApprovalsDecide), "{args} → {args, preview}: a pending action approval's preview with edited arguments; decides nothing", App(|| post(approvals::edit_preview))).takes::<wire::EditPreviewBody>().answers::<wire::EditPreview>(200),
    route("POST", "/v1/action-approvals/{id}/cancel", Token(ApprovalsPoll), "{reason?} → 204: withdraw a pending approval (a session token: its own session's only); 404 when not pending", App(|| post(approvals::cancel))).takes::<wire::CancelBody>().empty(204),
    route("GET", "/v1/action-approvals/{id}/result", Token(ApprovalsPoll), "{status, audit_id?, result?, reason?, failure?}", App(|| get(approvals::result))).answers::<aileron_core::approval::ResultView>(200),
    route("GET", "/v1/vault/status", Token(Console), "{state: absent|locked|unlocked, path, secrets, bindings, awaiting_vault}", App(|| get(credentials::vault_status))).answers::<wire::VaultView>(200),
    route("POST", "/v1/vault/init", Token(Admin), "{passphrase} → 201; creates the vault, unlocked", App(|| post(credentials::vault_init))).takes::<wire::PassphraseBody>().answers::<wire::VaultView>(201),
    route("POST", "/v1/vault/unlock", Token(Console), "{passphrase}; 403 wrong_passphrase changes nothing; resumes awaiting_vault runs", App(|| post(credentials::vault_unlock))).takes::<wire::PassphraseBody>().answers::<wire::VaultView>(200),
    route("POST", "/v1/vault/lock", Token(Console), "forgets the key", App(|| post(credentials::vault_lock))).answers::<wire::VaultView>(200),
    route("GET", "/v1/secrets", Token(Admin), "free-form secrets: paths and metadata, never values", App(|| get(credentials::list_secrets))).answers::<wire::SecretList>(200),
    route("POST", "/v1/secrets", Token(Admin), "{path, value, description?, force?} → 201 {path, replaced}; an existing path without force is 409 secret_exists", App(|| post(credentials::set_secret))).takes::<wire::SetSecret>().answers::<wire::SecretStored>(201),
    route("DELETE", "/v1/secrets/{*path}", Token(Admin), "remove a secret", App(|| delete(credentials::remove_secret))).empty(204),
    route("GET", "/v1/bindings", Token(Console), "credential bindings {items} (no secret bytes); works while locked", App(|| get(credentials::list_bindings))).answers::<wire::BindingList>(200),
    route("POST", "/v1/bindings/setup", Token(Console), "{connector, identity?, api_key? | aws?{access_key_id, secret_access_key, session_token?}} → 201", App(|| post(credentials::setup_binding))).takes::<wire::SetupBody>().answers::<crate::stores::bindings::BindingInfo>(201),
    route("POST", "/v1/bindings/setup/oauth2/init", Token(Console), "{connector | rebind, identity?, mode: cli|daemon, redirect_port?, return_to?} → {session_id, authorize_url, redirect_uri}", App(|| post(credentials::oauth_init))).takes::<wire::OAuthInit>().answers::<wire::OAuthStarted>(200),
    route("POST", "/v1/bindings/setup/oauth2/finish", Token(Admin), "{session_id, code, state} → 201 the binding (CLI mode)", App(|| post(credentials::oauth_finish))).takes::<wire::OAuthFinish>().answers::<crate::stores::bindings::BindingInfo>(201),
    route("GET", crate::workflows::bindings::OAUTH_CALLBACK_PATH, OAuthState, "daemon-mode OAuth redirect target (the state is single-use) → 303 return_to", App(|| get(credentials::oauth_callback))).redirects(),
    route("GET", "/v1/bindings/{name}", Token(Console), "one binding (name URL-encoded: `/` as %2F)", App(|| get(credentials::get_binding))).answers::<crate::stores::bindings::BindingInfo>(200),
    route("DELETE", "/v1/bindings/{name}", Token(Console), "revoke: removes the binding and its material", App(|| delete(credentials::revoke_binding))).answers::<crate::stores::bindings::BindingInfo>(200),
    route("POST", "/v1/bindings/{name}/rebind", Token(Console), "{api_key? | aws?} new material for the same binding", App(|| post(credentials::rebind_binding))).takes::<wire::MaterialBody>().answers::<crate::stores::bindings::BindingInfo>(200),
    route("POST", "/v1/web/login-tickets", Token(Admin), "one-time ticket for the web page (used by `aileron open`)", App(|| post(approvals::mint_login_ticket))).answers::<wire::LoginTicket>(201),
    route("POST", "/v1/sessions", Token(Admin), "start a launch session {agent, pid?, confinement?: namespaces|unconfined} → 201 {session_id, token, scopes, confinement, started_at}", App(|| post(sessions::start))).takes::<wire::StartSession>().answers::<wire::SessionStarted>(201),
    route("GET", "/v1/sessions", Token(Console), "every launch session, newest first {items}", App(|| get(sessions::list))).answers::<wire::SessionList>(200),
    route("GET", "/v1/sessions/{id}", Token(Console), "one launch session {status: active|ended|interrupted, exit_code?, ...}", App(|| get(sessions::get))).answers::<crate::stores::sessions::Session>(200),
    route("POST", "/v1/sessions/{id}/end", Token(Console), "{exit_code} → the ended session; revokes its token", App(|| post(sessions::end))).takes::<wire::EndSession>().answers::<crate::stores::sessions::Session>(200),
    route("POST", super::mcp_mount::PATH, McpBearer, "MCP streamable HTTP: JSON-RPC messages (same tools and chokepoint as aileron-mcp)", Serve::Mcp).proxied(),
    route("GET", super::mcp_mount::PATH, McpBearer, "MCP streamable HTTP: a session's server-to-client SSE stream", Serve::Mcp).proxied(),
    route("DELETE", super::mcp_mount::PATH, McpBearer, "MCP streamable HTTP: end a session", Serve::Mcp).proxied(),
    route("GET", "/v1/events/watch", Token(Console), "SSE: `changed` {topic: audit|actions|approvals} whenever what the console shows changes; 30 s heartbeat", App(|| get(events::watch))).streams(),
    route("GET", "/favicon.ico", Public, "the console's icon (SVG)", App(|| get(web::favicon))).page(),
    route("GET", "/activity", PageCookie, "console: the audit log as a timeline (action, connector, session, family, class, since, until, before, run)", App(|| get(web::activity::activity_page))).page(),
    route("GET", "/activity/receipt/{id}", PageCookie, "console: a record's receipt (C2SP tlog-proof, text) to download and check offline", App(|| get(web::activity::receipt))).page(),
    route("GET", "/actions", PageCookie, "console: installed actions; enable and disable", App(|| get(web::catalog::actions_page))).page(),
    route("GET", "/connectors", PageCookie, "console: installed connectors; remove", App(|| get(web::catalog::connectors_page))).page(),
    route("GET", "/accounts", PageCookie, "console: the vault and credential bindings; connect, rebind, revoke, unlock", App(|| get(web::accounts::accounts_page))).page(),
    route("GET", "/agents", PageCookie, "console: launch sessions; end one", App(|| get(web::agents::agents_page))).page(),
    route("GET", "/approvals", PageCookie, "console: pending and resolved approvals; approve and deny", App(|| get(web::approvals::approvals_page))).page(),
    route("GET", "/approvals/login", LoginTicket, "redeems a login ticket (page = activity|actions|connectors|accounts|agents|approvals): sets the session cookie, sends the browser to the page", App(|| get(web::login))).redirects(),
    route("POST", "/v1/messages", Upstream, "LLM gateway: transparent proxy to the Anthropic upstream", Serve::Gateway).proxied(),
    route("POST", "/v1/messages/count_tokens", Upstream, "LLM gateway: Anthropic", Serve::Gateway).proxied(),
    route("POST", "/v1/chat/completions", Upstream, "LLM gateway: transparent proxy to the OpenAI upstream", Serve::Gateway).proxied(),
    route("POST", "/v1/responses", Upstream, "LLM gateway: OpenAI", Serve::Gateway).proxied(),
    route("GET", "/v1/models", Upstream, "LLM gateway: OpenAI", Serve::Gateway).proxied(),
    route("HEAD", "/", Upstream, "answered for agents that probe their base URL", Serve::Gateway).proxied(),
];

/// The router of [`ROUTES`]: each route's handler and the `/mcp` service. The gateway's paths
/// are served ahead of it ([`super::Surface`]); [`super::app`] adds the middleware.
pub fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let mut router = Router::new();
    let mut mcp = false;
    for route in ROUTES {
        match &route.serve {
            Serve::App(handler) => router = router.route(route.path, handler()),
            Serve::Gateway => {}
            Serve::Mcp => mcp = true,
        }
    }
    if mcp {
        router = router.merge(super::mcp_mount::routes(state));
    }
    router
}

async fn health() -> axum::Json<wire::Health> {
    axum::Json(wire::Health::current())
}

async fn status(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    crate::workflows::status::status(&state.services, &principal, state.started_at)
}

/// An OpenAPI 3.1 description of [`ROUTES`], checked in as `docs/http-api.json` and diffed by a
/// test so that the served surface and its description cannot drift apart silently.
pub fn http_api_document() -> Value {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut paths = Map::new();
    for route in ROUTES {
        let path = route.path.replace("{*", "{");
        let entry = paths.entry(path.clone()).or_insert_with(|| json!({}));
        let mut operation = json!({ "summary": route.summary });
        match route.auth {
            Auth::Token(scope) => {
                operation["security"] = json!([{ "bearer": [] }, { "webCookie": [], "csrf": [] }]);
                operation["x-aileron-scope"] = crate::stores::sessions::scope_name(scope).into();
            }
            Auth::McpBearer => operation["security"] = json!([{ "bearer": [] }]),
            Auth::PageCookie => operation["security"] = json!([{ "webCookie": [] }, {}]),
            Auth::LoginTicket => operation["x-aileron-auth"] = "one-time login ticket (query `ticket`)".into(),
            Auth::OAuthState => operation["x-aileron-auth"] = "single-use OAuth2 `state` (query)".into(),
            Auth::Upstream => {
                operation["x-aileron-auth"] = "the provider key the agent sends goes upstream; no daemon token".into()
            }
            Auth::Public => {}
        }
        let parameters: Vec<Value> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        operation["responses"] = match route.answers {
            Some(Answers::Json { status, schema, .. }) => {
                let schema = schema(&mut generator).to_value();
                json!({ status.to_string(): { "description": "success", "content": { "application/json": { "schema": schema } } } })
            }
            Some(Answers::Empty(status)) => json!({ status.to_string(): { "description": "success, no body" } }),
            Some(Answers::Stream) => {
                json!({ "200": { "description": "a server-sent event stream", "content": { "text/event-stream": {} } } })
            }
            Some(Answers::Page) => json!({ "200": { "description": "a console page or asset" } }),
            Some(Answers::Redirect) => json!({ "303": { "description": "to the page that follows" } }),
            Some(Answers::Proxied) | None => json!({ "default": { "description": "what the other side answers" } }),
        };
        if let Some(schema) = route.request {
            let schema = schema(&mut generator).to_value();
            if route.method == "GET" {
                operation["x-aileron-query"] = schema;
            } else {
                operation["requestBody"] = json!({ "content": { "application/json": { "schema": schema } } });
            }
        }
        entry[route.method.to_ascii_lowercase()] = operation;
    }
    let definitions: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Aileron daemon API", "version": crate::platform::process::VERSION },
        "servers": [{ "url": "http://127.0.0.1:{port}" }],
        "components": {
            "securitySchemes": {
                "bearer": { "type": "http", "scheme": "bearer" },
                "webCookie": { "type": "apiKey", "in": "cookie", "name": crate::platform::principal::WEB_COOKIE },
                "csrf": { "type": "apiKey", "in": "header", "name": crate::platform::principal::CSRF_HEADER },
            },
            "schemas": definitions,
        },
        "paths": paths,
    })
}
