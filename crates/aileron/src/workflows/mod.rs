//! The workflows below the HTTP layer: running an action, deciding an approval, installing
//! connectors and actions, launch sessions, the vault and secrets, bindings and OAuth, the
//! keyring. Each takes the [`Services`] it runs on (and the
//! [`crate::platform::principal::Principal`] the caller authenticated as) and answers in the wire types of
//! [`crate::wire`]; the daemon's handlers and its in-process `/mcp` call them alike. Nothing here
//! imports [`crate::surfaces::daemon`]. There is one file per resource, named as the store below
//! and the handler above it are.

pub mod actions;
pub mod approvals;
pub mod audit;
pub mod bindings;
pub mod connectors;
pub mod keyring;
pub mod notify;
pub mod pinning;
pub mod policy;
pub mod sessions;
pub mod status;
pub mod vault;

use aileron_core::audit::ActorType;

use aileron_core::vocabulary::EventType;
use serde_json::{Map, Value};

use crate::platform::principal::{Caller, Principal, Scope};
use crate::stores::audit_log::AuditEvent;
use crate::wire::ApiError;

pub use crate::services::Services;

/// Who the audit record names. Session tokens are agents; the daemon token's callers say what
/// they are (the CLI is a human at a terminal, `aileron-mcp` an agent).
/// The audit actor of a request, from the principal bearer or cookie authentication resolved and
/// nothing else (SPEC §0, invariant 4): no header can choose it.
pub fn caller_for(principal: &Principal) -> Caller {
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

pub use crate::platform::principal::LOCAL_USER;

/// Refuses a principal whose grant does not cover `scope`.
pub fn require(principal: &Principal, scope: Scope) -> Result<(), ApiError> {
    if principal.allows(scope) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("this token does not grant {scope:?}")))
    }
}

/// Audits what `caller` did, before the answer that reports it: a record that cannot be written
/// fails the request (`audit_unavailable`, 503).
pub async fn audit(
    state: &Services,
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
