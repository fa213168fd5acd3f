//! The daemon's `/mcp`: the same [`AileronMcp`] over rmcp's streamable HTTP transport (sessions,
//! SSE streams), behind the daemon's admission (Host/Origin) plus a bearer token that may list
//! and run actions. Tool calls go to the workflows in-process with the principal that token
//! resolved to (see [`DaemonLink::in_process`]), so the run is audited with the caller as the actor
//! and checked against the caller's scopes exactly as `POST /v1/actions/{name}/run` would be.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::platform::principal::Scope;
use crate::surfaces::daemon::AppState;
use crate::surfaces::daemon::auth::allowed_hosts;
use crate::surfaces::mcp::changes::ActionFeed;
use crate::surfaces::mcp::link::DaemonLink;
use crate::surfaces::mcp::server::{AileronMcp, McpShared};
use crate::wire::ApiError;

/// Where the endpoint is mounted.
pub const PATH: &str = "/mcp";

/// The `/mcp` routes, to be merged into the daemon's router (inside its admission layer).
pub fn routes(state: &Arc<AppState>) -> Router<Arc<AppState>> {
    let hosts = allowed_hosts(state.services.listen_port());
    let origins: Vec<String> = hosts.iter().map(|host| format!("http://{host}")).collect();
    // The daemon's admission already checks Host and Origin; rmcp checks them again so the
    // endpoint stays safe even if it is ever mounted elsewhere.
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts).with_allowed_origins(origins);
    // Open SSE streams would hold graceful shutdown forever: end them when it starts.
    let streams = config.cancellation_token.clone();
    let mut shutdown = state.shutdown.subscribe();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
            streams.cancel();
        });
    }
    let link = DaemonLink::in_process(state.services.clone());
    let shared = McpShared::new(
        link,
        ActionFeed::Registry(state.services.actions.subscribe()),
        state.services.telemetry.clone(),
        "aileron daemon: /mcp",
    );
    let manager = Arc::new(LocalSessionManager::default());
    let sessions = Arc::new(SessionCount { manager: manager.clone(), owners: Default::default() });
    let service = StreamableHttpService::new(move || Ok(AileronMcp::new(shared.clone())), manager, config);
    Router::new()
        .nest_service(PATH, service)
        // Route layers: they guard `/mcp` only, so an unknown path elsewhere is a 404, not a 401.
        .route_layer(axum::middleware::from_fn(session_end_ok))
        .route_layer(axum::middleware::from_fn_with_state(sessions, capped_sessions))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), require_bearer))
}

/// Live MCP sessions one token may hold, and all tokens together. Each session costs the daemon
/// its worker and buffers until it is ended or idle for rmcp's keep-alive (5 minutes): one
/// session token opened 13,000 in 12 s and grew the daemon by 1 GB (the eleventh re-attack).
/// An agent needs one (a few, across restarts of its MCP client).
pub const MAX_MCP_SESSIONS_PER_TOKEN: usize = 32;
pub const MAX_MCP_SESSIONS: usize = 1024;

/// Which token opened which live session (the session manager knows only the sessions), and
/// the openings under way: a session is recorded only once its `initialize` is answered, so
/// openings racing each other are counted as they start, or they would all pass the caps.
struct SessionCount {
    manager: Arc<LocalSessionManager>,
    owners: std::sync::Mutex<Owners>,
}

#[derive(Default)]
struct Owners {
    live: std::collections::HashMap<String, Vec<Arc<str>>>,
    opening: std::collections::HashMap<String, usize>,
}

/// One opening under way, counted until it is dropped (answered, or its request abandoned).
struct Opening {
    count: Arc<SessionCount>,
    owner: String,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let mut owners = self.count.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(opening) = owners.opening.get_mut(&self.owner) {
            *opening -= 1;
            if *opening == 0 {
                owners.opening.remove(&self.owner);
            }
        }
    }
}

/// Refuses a new session (an `initialize`, which carries no session id) past the caps, with 429
/// and a `Retry-After`; records which token the new one is of.
async fn capped_sessions(State(count): State<Arc<SessionCount>>, request: Request, next: Next) -> Response {
    let opening = request.method() == axum::http::Method::POST && !request.headers().contains_key(SESSION_ID);
    if !opening {
        return next.run(request).await;
    }
    let owner = match request.extensions().get::<crate::platform::principal::Principal>() {
        Some(crate::platform::principal::Principal::Session { session_id, .. }) => session_id.clone(),
        _ => "the daemon token".to_string(),
    };
    let live = count.manager.sessions.read().await.keys().cloned().collect::<std::collections::HashSet<_>>();
    let refused = {
        let mut owners = count.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        owners.live.retain(|_, ids| {
            ids.retain(|id| live.contains(id));
            !ids.is_empty()
        });
        let own = owners.live.get(&owner).map_or(0, Vec::len) + owners.opening.get(&owner).copied().unwrap_or(0);
        let all = live.len() + owners.opening.values().sum::<usize>();
        let refused = own >= MAX_MCP_SESSIONS_PER_TOKEN || all >= MAX_MCP_SESSIONS;
        if !refused {
            *owners.opening.entry(owner.clone()).or_default() += 1;
        }
        refused.then_some(own)
    };
    if let Some(own) = refused {
        let mut response = ApiError::new(
            axum::http::StatusCode::TOO_MANY_REQUESTS,
            "too_many_sessions",
            format!(
                "{own} MCP sessions of this token and {} in all are open; at most {MAX_MCP_SESSIONS_PER_TOKEN} per \
                 token and {MAX_MCP_SESSIONS} in all",
                live.len()
            ),
        )
        .into_response();
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
        return response;
    }
    let opening = Opening { count: count.clone(), owner };
    let response = next.run(request).await;
    if let Some(id) = response.headers().get(SESSION_ID).and_then(|id| id.to_str().ok()) {
        let mut owners = count.owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        owners.live.entry(opening.owner.clone()).or_default().push(Arc::from(id));
    }
    drop(opening);
    response
}

/// The header naming an MCP session.
const SESSION_ID: &str = "mcp-session-id";

/// rmcp answers a session's `DELETE` with 202; the official SDKs expect 200 (the Python SDK logs
/// "Session termination failed: 202" on every clean exit otherwise). The session is ended either
/// way, so 202 becomes 200.
async fn session_end_ok(request: Request, next: Next) -> Response {
    let deleting = request.method() == axum::http::Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == axum::http::StatusCode::ACCEPTED {
        *response.status_mut() = axum::http::StatusCode::OK;
    }
    response
}

/// `/mcp` needs a bearer token that may list and run actions: the daemon token or a launch
/// session token (which can never decide an approval, and neither can anything behind `/mcp`).
async fn require_bearer(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    match super::auth::bearer(request.headers()).and_then(|token| state.services.tokens.resolve(token)) {
        Some(principal) if principal.allows(Scope::ActionsList) && principal.allows(Scope::ActionsRun) => {
            // The tools run as this principal, in-process (see `DaemonLink::in_process`).
            request.extensions_mut().insert(principal);
            next.run(request).await
        }
        Some(_) => ApiError::forbidden("this token may not list and run actions, which /mcp needs").into_response(),
        None => {
            let mut response = ApiError::unauthorized().into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}
