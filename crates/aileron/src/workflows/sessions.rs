//! Launch sessions: start (token minted, journaled, audited), show, end (token revoked).

use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::{EgressUnenforced, SessionEnd, SessionStart};
use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::{Services, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::stores::audit_log::AuditEvent;
use crate::stores::sessions::{Confinement, SessionError, SessionStatus};
use crate::wire::{Answer, ApiError, EndSession, Reply, SessionList, SessionNetwork, SessionStarted, StartSession};

/// Mints a launch session's token. Only the local user (daemon token) may: a session token asking
/// for another session gets 403, so an agent can never widen its own grant.
///
/// Audited as `session.started`; a session whose record cannot be written is ended again and
/// its token revoked before the 503, so no agent holds a grant the log does not show.
pub async fn start(state: &Arc<Services>, principal: &Principal, body: StartSession) -> Answer {
    require(principal, Scope::Admin)?;
    let enforced = body.confinement == Confinement::Namespaces && body.network == Some(SessionNetwork::Enforced);
    let started = match &body.resume {
        Some(id) => state.sessions.resume(&state.tokens, id),
        None => state.sessions.start(&state.tokens, &body.agent, body.pid, body.confinement, enforced),
    }
    .map_err(session_error)?;
    let session = &started.session;
    // A confined session that does not say (a launcher from before §15) kept the host's network.
    let network = match body.confinement {
        Confinement::Namespaces => Some(body.network.unwrap_or(SessionNetwork::Open)),
        Confinement::Unconfined => None,
    };
    let listed = |paths: &Vec<String>| (!paths.is_empty()).then(|| paths.clone());
    let start = SessionStart {
        agent: session.agent.clone(),
        pid: session.pid,
        scopes: session.scopes.clone(),
        confinement: session.confinement.as_str(),
        writable: listed(&body.writable),
        network: network.map_or("unconfined", SessionNetwork::as_str),
        hidden: listed(&body.hidden),
        exposed: listed(&body.exposed),
        home_seen: listed(&body.home_seen),
    };
    let mut payload = start.into_payload();
    if body.resume.is_some() {
        payload.insert(aileron_core::vocabulary::keys::SESSION_RESUMED.into(), true.into());
    }
    let mut records = vec![session_event(EventType::SessionStarted, principal, session, payload)];
    if network == Some(SessionNetwork::Open) {
        let reason = if body.network.is_some() { "user_opt_out" } else { "not_requested" };
        let unenforced = EgressUnenforced { agent: session.agent.clone(), reason };
        records.push(session_event(EventType::SandboxEgressUnenforced, principal, session, unenforced.into_payload()));
    }
    for record in records {
        if let Err(error) = state.audit.append(record).await {
            let _ = state.sessions.end(&state.tokens, &session.session_id, None);
            return Err(ApiError::audit_unavailable(error));
        }
    }
    if let Some(pid) = body.pid {
        end_when_gone(state.clone(), principal.clone(), session.session_id.clone(), pid);
    }
    let view = SessionStarted {
        session_id: started.session.session_id.clone(),
        token: started.token.clone(),
        scopes: started.session.scopes.clone(),
        confinement: started.session.confinement,
        started_at: started.session.started_at.clone(),
        placeholder_env: placeholders(state, network, session),
    };
    Ok(Reply::created(view))
}

/// What a launched agent gets in place of credentials (SPEC §15): `ANTHROPIC_API_KEY` /
/// `OPENAI_API_KEY` when the vault holds that provider's key (the session's gateway key: the
/// gateway sends the real one on requests carrying it), and with an enforced network the
/// variables of each connector with operations and a binding.
fn placeholders(
    state: &Services,
    network: Option<SessionNetwork>,
    session: &crate::stores::sessions::Session,
) -> std::collections::BTreeMap<String, String> {
    let mut env = if network == Some(SessionNetwork::Enforced) {
        crate::dataplane::agent_egress::Credentialing::placeholder_env(&state.store, &state.bindings)
    } else {
        Default::default()
    };
    let held = crate::dataplane::gateway::Provider::ALL
        .into_iter()
        .filter(|provider| state.vault.contains(crate::stores::vault::llm_key_path(*provider)));
    let mut key = None;
    for provider in held {
        let confined = session.confinement == Confinement::Namespaces;
        let key = key.get_or_insert_with(|| state.tokens.mint_gateway_key(&session.session_id, confined));
        env.insert(provider.key_variable().to_string(), key.expose().to_string());
    }
    env
}

pub fn get(state: &Services, principal: &Principal, id: String) -> Answer {
    require(principal, Scope::Console)?;
    let session = state.sessions.get(&id).ok_or_else(|| session_error(SessionError::NotFound(id)))?;
    Ok(Reply::ok(session))
}

/// Every launch session, newest first.
pub fn list(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::Console)?;
    Ok(Reply::ok(SessionList { items: state.sessions.all() }))
}

/// A launcher killed before it could end its session (`kill -9`) left the session's token live
/// until the daemon restarted (the second re-attack of 2026-12-05). The daemon watches the
/// process the start named (the launcher, or an `aileron-mcp` of its own) and, when it has
/// exited with the session still active, ends the session itself: token revoked, approvals
/// withdrawn, `session.ended` with `aileron.session.end_reason: launcher_gone`.
fn end_when_gone(state: Arc<Services>, principal: Principal, session_id: String, pid: u32) {
    let watched = i32::try_from(pid).map_err(std::io::Error::other).and_then(crate::platform::process::pidfd);
    let pidfd = match watched {
        Ok(pidfd) => pidfd,
        Err(error) => {
            log_line!("aileron daemon: session {session_id} is not ended with process {pid} ({error})");
            return;
        }
    };
    tokio::spawn(async move {
        // SAFETY: the `OwnedFd` keeps the same descriptor open until the `AsyncFd` holding it is dropped.
        let registered =
            unsafe { tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        let Ok(exited) = registered else { return };
        let _ = exited.readable().await;
        if state.sessions.get(&session_id).is_none_or(|session| session.status != SessionStatus::Active) {
            return;
        }
        let ended = finish(&state, &principal, session_id.clone(), EndSession::default(), Some("launcher_gone")).await;
        match ended {
            Ok(_) => log_line!("aileron daemon: session {session_id} ended: process {pid}, which started it, is gone"),
            Err(_) => log_line!("aileron daemon: session {session_id}: process {pid} is gone, and ending it failed"),
        }
    });
}

/// Revokes the session's token, journals the end and audits it as `session.ended`.
pub async fn end(state: &Services, principal: &Principal, id: String, body: EndSession) -> Answer {
    finish(state, principal, id, body, None).await
}

async fn finish(
    state: &Services,
    principal: &Principal,
    id: String,
    body: EndSession,
    reason: Option<&'static str>,
) -> Answer {
    require(principal, Scope::Console)?;
    let session = state.sessions.end(&state.tokens, &id, body.exit_code).map_err(session_error)?;
    // What it asked for and nobody decided is withdrawn: no approval outlives its session.
    super::approvals::cancel_session(state, &session.session_id).await;
    let listed = |paths: &Vec<String>| (!paths.is_empty()).then(|| paths.clone());
    let payload = SessionEnd {
        agent: session.agent.clone(),
        exit_code: session.exit_code.into(),
        quarantined: listed(&body.quarantined),
        new_repositories: listed(&body.new_repositories),
        hidden_changes: listed(&body.hidden_changes),
        reason,
    };
    let event = session_event(EventType::SessionEnded, principal, &session, payload.into_payload());
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    Ok(Reply::ok(session))
}

/// A session's audit record: the launcher is the actor, the session is the record's `session_id`.
pub fn session_event(
    event_type: EventType,
    principal: &Principal,
    session: &crate::stores::sessions::Session,
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

pub fn session_error(error: SessionError) -> ApiError {
    match error {
        SessionError::InvalidAgent(_) => ApiError::bad_request("invalid_agent", error.to_string())
            .with_hint("aileron launch names the agent: claude, codex, opencode, goose or pi"),
        SessionError::NotFound(_) => ApiError::not_found("session_not_found", error.to_string())
            .with_hint("session ids are printed by `aileron launch`; a daemon restart keeps only their journal"),
        SessionError::AlreadyEnded(_) => ApiError::new(StatusCode::CONFLICT, "session_ended", error.to_string()),
        SessionError::NotResumable(_) => {
            ApiError::new(StatusCode::CONFLICT, "session_not_resumable", error.to_string())
                .with_hint("start a new session instead (leave out `resume`)")
        }
        SessionError::Journal { .. } => {
            log_line!("aileron daemon: session journal write failed: {error}");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "journal_unavailable",
                "the session journal cannot be written",
            )
            .with_hint("check free disk space and permissions of AILERON_HOME")
        }
    }
}
