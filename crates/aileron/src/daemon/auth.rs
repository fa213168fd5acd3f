//! Request admission: every request's `Host` must be the daemon's own loopback address (DNS
//! rebinding defence), a browser `Origin` must be our own origin, and `/v1/*` (except health)
//! needs a bearer token whose grant covers the route's scope.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;

/// What a token may do. Session tokens minted for launched agents carry only the first three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    ActionsList,
    ActionsRun,
    ApprovalsPoll,
    /// Everything else: install, enable/disable, audit, approvals decide, daemon status.
    Admin,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The daemon's own token from `daemon.json`: the local user.
    Admin,
    /// A launch session token.
    Session { session_id: String, scopes: Vec<Scope> },
}

impl Principal {
    pub fn allows(&self, scope: Scope) -> bool {
        match self {
            Principal::Admin => true,
            Principal::Session { scopes, .. } => scopes.contains(&scope),
        }
    }

    pub fn session_id(&self) -> Option<&str> {
        match self {
            Principal::Admin => None,
            Principal::Session { session_id, .. } => Some(session_id),
        }
    }
}

/// The daemon token plus any session tokens minted at run time.
pub struct TokenRegistry {
    admin_token: String,
    sessions: RwLock<HashMap<String, Principal>>,
}

impl TokenRegistry {
    pub fn new(admin_token: String) -> TokenRegistry {
        TokenRegistry { admin_token, sessions: RwLock::new(HashMap::new()) }
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    pub fn mint_session(&self, session_id: &str, scopes: Vec<Scope>) -> String {
        let token = random_token();
        let principal = Principal::Session { session_id: session_id.to_string(), scopes };
        self.sessions.write().expect("token registry poisoned").insert(token.clone(), principal);
        token
    }

    pub fn resolve(&self, presented: &str) -> Option<Principal> {
        if constant_time_eq(presented.as_bytes(), self.admin_token.as_bytes()) {
            return Some(Principal::Admin);
        }
        let sessions = self.sessions.read().expect("token registry poisoned");
        sessions.iter().find(|(token, _)| constant_time_eq(presented.as_bytes(), token.as_bytes())).map(|(_, p)| p.clone())
    }
}

/// 32 random bytes, hex encoded.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("operating system randomness unavailable");
    hex::encode(bytes)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `Host` values this daemon answers to.
pub fn allowed_hosts(port: u16) -> Vec<String> {
    vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]
}

/// Admission for every request: Host, Origin, then (for `/v1/*` except health) the bearer token.
/// Also stamps `X-Request-ID` on every response.
pub async fn admit(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    let request_id = uuid::Uuid::new_v4().to_string();
    let mut response = match check(&state, &mut request) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

fn check(state: &AppState, request: &mut Request) -> Result<(), ApiError> {
    let port = state.listen_port();
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    let allowed = allowed_hosts(port);
    match host {
        Some(host) if allowed.iter().any(|a| a.eq_ignore_ascii_case(&host)) => {}
        _ => return Err(ApiError::forbidden("request Host is not this daemon's loopback address")),
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !allowed.iter().any(|a| origin.eq_ignore_ascii_case(&format!("http://{a}"))) {
            return Err(ApiError::forbidden("cross-origin requests are not allowed"));
        }
    }
    let path = request.uri().path();
    if !path.starts_with("/v1/") || path == "/v1/health" {
        return Ok(());
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .ok_or_else(ApiError::unauthorized)?;
    let principal = state.tokens.resolve(presented).ok_or_else(ApiError::unauthorized)?;
    request.extensions_mut().insert(principal);
    Ok(())
}

/// Handlers call this with the scope their route needs.
pub fn require(principal: &Principal, scope: Scope) -> Result<(), ApiError> {
    if principal.allows(scope) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("this token does not grant {scope:?}")))
    }
}
