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
    let service = StreamableHttpService::new(
        move || Ok(AileronMcp::new(shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    Router::new()
        .nest_service(PATH, service)
        // Route layers: they guard `/mcp` only, so an unknown path elsewhere is a 404, not a 401.
        .route_layer(axum::middleware::from_fn(session_end_ok))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), require_bearer))
}

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
