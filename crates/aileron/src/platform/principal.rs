//! Who is calling: the scopes a token grants, the principals the daemon authenticates, and the
//! registry of the tokens, web sessions and login tickets it has minted. A leaf, so that the
//! workflows below the HTTP layer (sessions, runs, `/mcp` in-process) can name a principal
//! without importing the daemon.

use std::collections::HashMap;
use std::sync::RwLock;

use aileron_core::audit::{Actor, ActorType};

use crate::platform::secret::Secret;

/// The actor id of the daemon token's holder.
pub const LOCAL_USER: &str = "local-user";

/// Who is asking, for the audit record.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub session_id: Option<String>,
    /// An agent outside launch containment (see `ApprovalEntry::unconfined`).
    pub unconfined: bool,
}

impl Caller {
    pub fn new(actor_type: ActorType, id: impl Into<String>) -> Caller {
        Caller { actor: Actor { r#type: actor_type, id: id.into() }, session_id: None, unconfined: false }
    }
}

/// What a token may do. Session tokens minted for launched agents carry only the first three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    ActionsList,
    ActionsRun,
    ApprovalsPoll,
    /// Approve or deny. Never granted to a session token: only the local user (daemon token, CLI)
    /// and the web page (cookie + CSRF token) decide.
    ApprovalsDecide,
    /// Supervise from the web console: read the audit log, connectors, bindings, sessions and the
    /// vault's state; enable or disable actions, remove connectors, bind, rebind and revoke
    /// accounts, unlock and lock the vault, end sessions. Never granted to a session token; the
    /// daemon token has it, the web page's cookie session has it (changes need its CSRF secret).
    Console,
    /// Everything else: install, enable/disable, audit, daemon status, login tickets.
    Admin,
    /// Have the LLM gateway put the vault's provider key on a request (SPEC §15's LLM keys). A
    /// launched session's gateway key carries it alone; nothing else answers to it.
    Gateway,
}

/// The scopes of a launched agent's session token.
pub const SESSION_SCOPES: [Scope; 3] = [Scope::ActionsList, Scope::ActionsRun, Scope::ApprovalsPoll];
/// The scopes of the web review page's cookie session.
pub const WEB_SCOPES: [Scope; 4] = [Scope::ActionsList, Scope::ApprovalsPoll, Scope::ApprovalsDecide, Scope::Console];

/// How a session's gateway key begins (the placeholder every other sealed variable holds, then
/// the key's own random part), so the gateway can tell a stale one from the user's own key.
pub const GATEWAY_KEY_PREFIX: &str = "aileron-sealed-";

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
    Web { csrf: Secret },
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
    secret: Secret,
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
    admin_token: Secret,
    sessions: RwLock<HashMap<String, Principal>>,
    /// cookie value → CSRF token
    web_sessions: RwLock<HashMap<String, WebSession>>,
    /// one-time login ticket → expiry
    tickets: std::sync::Mutex<HashMap<String, std::time::Instant>>,
}

impl TokenRegistry {
    pub fn new(admin_token: Secret) -> TokenRegistry {
        TokenRegistry {
            admin_token,
            sessions: RwLock::new(HashMap::new()),
            web_sessions: RwLock::new(HashMap::new()),
            tickets: std::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn admin_token(&self) -> &Secret {
        &self.admin_token
    }

    pub fn mint_session(&self, session_id: &str, scopes: Vec<Scope>, confined: bool) -> Secret {
        let token = Secret::random();
        let principal = Principal::Session { session_id: session_id.to_string(), scopes, confined };
        self.sessions.write().expect("token registry poisoned").insert(token.expose().to_string(), principal);
        token
    }

    /// The key a launched agent finds in `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` when the vault
    /// holds the provider's key: [`Scope::Gateway`] alone, revoked with the session's token. The
    /// gateway puts the vault's key only on requests that present it (or the daemon token), so
    /// another local user who can reach the loopback port cannot spend the user's key.
    pub fn mint_gateway_key(&self, session_id: &str, confined: bool) -> Secret {
        let key = Secret::new(format!("{GATEWAY_KEY_PREFIX}{}", random_token()));
        let principal =
            Principal::Session { session_id: session_id.to_string(), scopes: vec![Scope::Gateway], confined };
        self.sessions.write().expect("token registry poisoned").insert(key.expose().to_string(), principal);
        key
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
    pub fn mint_ticket(&self) -> Secret {
        let ticket = Secret::random();
        let mut tickets = self.tickets.lock().expect("ticket table poisoned");
        let now = std::time::Instant::now();
        tickets.retain(|_, expires| *expires > now);
        tickets.insert(ticket.expose().to_string(), now + TICKET_TTL);
        ticket
    }

    /// Consumes a ticket (single use) and opens a web session: `(cookie value, csrf token)`.
    pub fn redeem_ticket(&self, ticket: &str) -> Option<(Secret, Secret)> {
        let expires = self.tickets.lock().expect("ticket table poisoned").remove(ticket)?;
        if expires < std::time::Instant::now() {
            return None;
        }
        let (cookie, secret) = (Secret::random(), Secret::random());
        let now = std::time::Instant::now();
        let mut sessions = self.web_sessions.write().expect("web sessions poisoned");
        sessions.retain(|_, session| session.live_at(now));
        sessions
            .insert(cookie.expose().to_string(), WebSession { secret: secret.clone(), created: now, last_used: now });
        Some((cookie, secret))
    }

    /// The page secret of a live web session cookie (and the session's idle clock restarts).
    /// Expired sessions are pruned here: idle for [`WEB_SESSION_IDLE`], or older than
    /// [`WEB_SESSION_MAX`] however busy.
    pub fn web_session(&self, cookie: &str) -> Option<Secret> {
        self.web_session_at(cookie, std::time::Instant::now())
    }

    fn web_session_at(&self, cookie: &str, now: std::time::Instant) -> Option<Secret> {
        let mut sessions = self.web_sessions.write().expect("web sessions poisoned");
        sessions.retain(|_, session| session.live_at(now));
        let (_, session) = sessions
            .iter_mut()
            .find(|(value, _)| aileron_core::constant_time::eq(cookie.as_bytes(), value.as_bytes()))?;
        session.last_used = now;
        Some(session.secret.clone())
    }

    pub fn resolve(&self, presented: &str) -> Option<Principal> {
        if self.admin_token.matches(presented) {
            return Some(Principal::Admin);
        }
        let sessions = self.sessions.read().expect("token registry poisoned");
        sessions
            .iter()
            .find(|(token, _)| aileron_core::constant_time::eq(presented.as_bytes(), token.as_bytes()))
            .map(|(_, p)| p.clone())
    }
}

pub use crate::platform::secret::random_token;

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn web_sessions_expire_when_idle_and_at_their_age_limit_and_are_pruned() {
        let tokens = TokenRegistry::new(Secret::new("admin"));
        let ticket = tokens.mint_ticket();
        let (cookie, secret) = tokens.redeem_ticket(ticket.expose()).unwrap();
        let start = Instant::now();
        assert_eq!(tokens.web_session_at(cookie.expose(), start).as_ref(), Some(&secret));
        // Kept alive by use, short of the idle limit each time...
        let mut now = start;
        while now.duration_since(start) + WEB_SESSION_IDLE < WEB_SESSION_MAX {
            now += WEB_SESSION_IDLE - Duration::from_secs(60);
            assert!(tokens.web_session_at(cookie.expose(), now).is_some(), "alive at {:?}", now.duration_since(start));
        }
        // ...but never past the age limit.
        assert_eq!(tokens.web_session_at(cookie.expose(), start + WEB_SESSION_MAX + Duration::from_secs(1)), None);
        assert!(tokens.web_sessions.read().unwrap().is_empty(), "pruned");

        let (idle, _) = tokens.redeem_ticket(tokens.mint_ticket().expose()).unwrap();
        let later = Instant::now() + WEB_SESSION_IDLE + Duration::from_secs(1);
        assert_eq!(tokens.web_session_at(idle.expose(), later), None, "idle too long");
        assert_eq!(tokens.redeem_ticket(ticket.expose()), None, "a ticket works once");
    }
}
