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
    /// Approve or deny. Never granted to a session token: only the local user (daemon token, CLI)
    /// and the web page (cookie + CSRF token) decide.
    ApprovalsDecide,
    /// Everything else: install, enable/disable, audit, daemon status, login tickets.
    Admin,
}

/// The scopes of a launched agent's session token.
pub const SESSION_SCOPES: [Scope; 3] = [Scope::ActionsList, Scope::ActionsRun, Scope::ApprovalsPoll];
/// The scopes of the web review page's cookie session.
pub const WEB_SCOPES: [Scope; 3] = [Scope::ActionsList, Scope::ApprovalsPoll, Scope::ApprovalsDecide];

/// Name of the web page's session cookie.
pub const WEB_COOKIE: &str = "aileron_web";
/// Header carrying the page's CSRF token on state-changing requests.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a login ticket minted by `aileron open` stays valid.
pub const TICKET_TTL: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// The daemon's own token from `daemon.json`: the local user.
    Admin,
    /// A launch session token; `confined` when the agent runs inside launch containment.
    Session { session_id: String, scopes: Vec<Scope>, confined: bool },
    /// The web review page, authenticated by its HttpOnly cookie.
    Web { csrf: String },
}

impl Principal {
    pub fn allows(&self, scope: Scope) -> bool {
        match self {
            Principal::Admin => true,
            Principal::Session { scopes, .. } => scopes.contains(&scope),
            Principal::Web { .. } => WEB_SCOPES.contains(&scope),
        }
    }
}

/// A web session ends after this long without a request.
pub const WEB_SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(30 * 60);
/// A web session ends this long after sign-in, however busy.
pub const WEB_SESSION_MAX: std::time::Duration = std::time::Duration::from_secs(12 * 60 * 60);

/// A signed-in browser tab. The cookie names it; the `secret`, handed over once at sign-in and
/// kept by the page in its tab's `sessionStorage` (origin-scoped, never written to disk, never
/// embedded in a later page), must accompany every change: browsers send cookies to every port
/// of 127.0.0.1, so a cookie captured by another local service alone decides nothing.
struct WebSession {
    secret: String,
    created: std::time::Instant,
    last_used: std::time::Instant,
}

impl WebSession {
    fn live_at(&self, now: std::time::Instant) -> bool {
        now.duration_since(self.created) < WEB_SESSION_MAX && now.duration_since(self.last_used) < WEB_SESSION_IDLE
    }
}

/// The daemon token plus any session tokens, web sessions and login tickets minted at run time.
pub struct TokenRegistry {
    admin_token: String,
    sessions: RwLock<HashMap<String, Principal>>,
    /// cookie value → CSRF token
    web_sessions: RwLock<HashMap<String, WebSession>>,
    /// one-time login ticket → expiry
    tickets: std::sync::Mutex<HashMap<String, std::time::Instant>>,
}

impl TokenRegistry {
    pub fn new(admin_token: String) -> TokenRegistry {
        TokenRegistry {
            admin_token,
            sessions: RwLock::new(HashMap::new()),
            web_sessions: RwLock::new(HashMap::new()),
            tickets: std::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    pub fn mint_session(&self, session_id: &str, scopes: Vec<Scope>, confined: bool) -> String {
        let token = random_token();
        let principal = Principal::Session { session_id: session_id.to_string(), scopes, confined };
        self.sessions.write().expect("token registry poisoned").insert(token.clone(), principal);
        token
    }

    /// Forgets every token minted for `session_id` (the launched agent has exited); returns how
    /// many were revoked.
    pub fn revoke_session(&self, session_id: &str) -> usize {
        let mut sessions = self.sessions.write().expect("token registry poisoned");
        let before = sessions.len();
        sessions
            .retain(|_, principal| !matches!(principal, Principal::Session { session_id: id, .. } if id == session_id));
        before - sessions.len()
    }

    /// A one-time login ticket for the web page, valid for [`TICKET_TTL`].
    pub fn mint_ticket(&self) -> String {
        let ticket = random_token();
        let mut tickets = self.tickets.lock().expect("ticket table poisoned");
        let now = std::time::Instant::now();
        tickets.retain(|_, expires| *expires > now);
        tickets.insert(ticket.clone(), now + TICKET_TTL);
        ticket
    }

    /// Consumes a ticket (single use) and opens a web session: `(cookie value, csrf token)`.
    pub fn redeem_ticket(&self, ticket: &str) -> Option<(String, String)> {
        let expires = self.tickets.lock().expect("ticket table poisoned").remove(ticket)?;
        if expires < std::time::Instant::now() {
            return None;
        }
        let (cookie, secret) = (random_token(), random_token());
        let now = std::time::Instant::now();
        let mut sessions = self.web_sessions.write().expect("web sessions poisoned");
        sessions.retain(|_, session| session.live_at(now));
        sessions.insert(cookie.clone(), WebSession { secret: secret.clone(), created: now, last_used: now });
        Some((cookie, secret))
    }

    /// The page secret of a live web session cookie (and the session's idle clock restarts).
    /// Expired sessions are pruned here: idle for [`WEB_SESSION_IDLE`], or older than
    /// [`WEB_SESSION_MAX`] however busy.
    pub fn web_session(&self, cookie: &str) -> Option<String> {
        self.web_session_at(cookie, std::time::Instant::now())
    }

    fn web_session_at(&self, cookie: &str, now: std::time::Instant) -> Option<String> {
        let mut sessions = self.web_sessions.write().expect("web sessions poisoned");
        sessions.retain(|_, session| session.live_at(now));
        let (_, session) =
            sessions.iter_mut().find(|(value, _)| aileron_core::constant_time::eq(cookie.as_bytes(), value.as_bytes()))?;
        session.last_used = now;
        Some(session.secret.clone())
    }

    pub fn resolve(&self, presented: &str) -> Option<Principal> {
        if aileron_core::constant_time::eq(presented.as_bytes(), self.admin_token.as_bytes()) {
            return Some(Principal::Admin);
        }
        let sessions = self.sessions.read().expect("token registry poisoned");
        sessions.iter().find(|(token, _)| aileron_core::constant_time::eq(presented.as_bytes(), token.as_bytes())).map(|(_, p)| p.clone())
    }
}

/// 32 random bytes, hex encoded.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("operating system randomness unavailable");
    hex::encode(bytes)
}


/// The `Host` values this daemon answers to.
pub fn allowed_hosts(port: u16) -> Vec<String> {
    vec![format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]
}

/// Admission for every request: Host, Origin, then (for `/v1/*` except health) the bearer token.
/// Also stamps `X-Request-ID` on every response.
pub async fn admit(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    // The gateway's answers are the upstream's, headers included: OpenAI's own `x-request-id` is
    // what its support asks for, so the gateway neither adds nor replaces one.
    let proxied = crate::gateway::is_gateway_path(request.method(), request.uri().path());
    let mut response = match check(&state, &mut request) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    };
    if (!proxied || !response.headers().contains_key("x-request-id"))
        && let Ok(value) = HeaderValue::from_str(&uuid::Uuid::new_v4().to_string())
    {
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
    if !path.starts_with("/v1/")
        || path == "/v1/health"
        || path == super::credentials::OAUTH_CALLBACK_PATH
        || crate::gateway::is_gateway_path(request.method(), path)
    {
        return Ok(());
    }
    let bearer = request.headers().get(header::AUTHORIZATION).and_then(|h| h.to_str().ok()).map(str::to_string);
    let principal = match bearer {
        Some(value) => {
            let presented = value.strip_prefix("Bearer ").ok_or_else(ApiError::unauthorized)?;
            state.tokens.resolve(presented).ok_or_else(ApiError::unauthorized)?
        }
        None => {
            let cookie = web_cookie(request.headers()).ok_or_else(ApiError::unauthorized)?;
            let csrf = state.tokens.web_session(&cookie).ok_or_else(ApiError::unauthorized)?;
            if !request.method().is_safe() {
                // A state-changing request from the page: same-origin Origin (checked above when
                // present; required here) and the page's CSRF token.
                if !request.headers().contains_key(header::ORIGIN) {
                    return Err(ApiError::forbidden("state-changing browser requests must carry an Origin header"));
                }
                let presented = request.headers().get(CSRF_HEADER).and_then(|h| h.to_str().ok()).unwrap_or("");
                if !aileron_core::constant_time::eq(presented.as_bytes(), csrf.as_bytes()) {
                    return Err(ApiError::forbidden("missing or wrong CSRF token"));
                }
            }
            Principal::Web { csrf }
        }
    };
    request.extensions_mut().insert(principal);
    Ok(())
}

/// The value of the web session cookie, if the request carries one.
pub fn web_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == WEB_COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Handlers call this with the scope their route needs.
pub fn require(principal: &Principal, scope: Scope) -> Result<(), ApiError> {
    if principal.allows(scope) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("this token does not grant {scope:?}")))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn web_sessions_expire_when_idle_and_at_their_age_limit_and_are_pruned() {
        let tokens = TokenRegistry::new("admin".into());
        let ticket = tokens.mint_ticket();
        let (cookie, secret) = tokens.redeem_ticket(&ticket).unwrap();
        let start = Instant::now();
        assert_eq!(tokens.web_session_at(&cookie, start).as_deref(), Some(secret.as_str()));
        // Kept alive by use, short of the idle limit each time...
        let mut now = start;
        while now.duration_since(start) + WEB_SESSION_IDLE < WEB_SESSION_MAX {
            now += WEB_SESSION_IDLE - Duration::from_secs(60);
            assert!(tokens.web_session_at(&cookie, now).is_some(), "alive at {:?}", now.duration_since(start));
        }
        // ...but never past the age limit.
        assert_eq!(tokens.web_session_at(&cookie, start + WEB_SESSION_MAX + Duration::from_secs(1)), None);
        assert!(tokens.web_sessions.read().unwrap().is_empty(), "pruned");

        let (idle, _) = tokens.redeem_ticket(&tokens.mint_ticket()).unwrap();
        let later = Instant::now() + WEB_SESSION_IDLE + Duration::from_secs(1);
        assert_eq!(tokens.web_session_at(&idle, later), None, "idle too long");
        assert_eq!(tokens.redeem_ticket(&ticket), None, "a ticket works once");
    }
}
