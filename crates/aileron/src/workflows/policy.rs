//! Keeping the policy rules current (SPEC §16): the daemon looks at `policy/` (and the action
//! set, whose inputs make the schema) every [`RELOAD_INTERVAL`], loads a changed set whole, audits
//! `policy.loaded` with its hash, and keeps the set in force when the files do not load (`aileron
//! status` says why).

use std::sync::Arc;
use std::time::Duration;

use aileron_core::audit::{Actor, ActorType};
use aileron_core::vocabulary::{EventType, keys};
use serde_json::{Map, Value};

use super::Services;
use crate::stores::audit_log::AuditEvent;
use crate::stores::rules::Reloaded;

/// How often the files are looked at (their names, sizes and modification times).
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(500);

/// The audit actor of a reload.
const POLICY_WATCHER: &str = "policy-watcher";

/// Loads the files again if they (or the actions) changed; audits a set that came into force.
pub async fn reload(state: &Services) -> Reloaded {
    let reloaded = state.rules.reload(state.actions.generation(), || state.actions.files());
    match &reloaded {
        Reloaded::Loaded { hash, files } => audit_loaded(state, hash, files).await,
        Reloaded::Refused(error) => {
            log_line!(
                "aileron daemon: warning: the policy files changed and do not load; the previous rules stay: {error}"
            );
        }
        Reloaded::Unchanged => {}
    }
    reloaded
}

/// [`reload`] every [`RELOAD_INTERVAL`] until shutdown.
pub async fn reload_in_background(state: Arc<Services>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    // The set the daemon started with is in force from its first run: audited as loaded too.
    let current = state.rules.current();
    if !current.is_empty() && state.rules.problem().is_none() {
        audit_loaded(&state, &current.hash, &current.files).await;
    }
    loop {
        tokio::select! {
            () = tokio::time::sleep(RELOAD_INTERVAL) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
        reload(&state).await;
    }
}

async fn audit_loaded(state: &Services, hash: &str, files: &[String]) {
    let mut payload = Map::new();
    payload.insert(keys::POLICY_HASH.into(), hash.into());
    payload.insert(keys::POLICY_FILES.into(), files.iter().cloned().map(Value::from).collect());
    let event = AuditEvent::new(EventType::PolicyLoaded, Actor::new(ActorType::Service, POLICY_WATCHER), payload);
    if let Err(error) = state.audit.append(event).await {
        log_line!("aileron daemon: warning: policy.loaded could not be audited: {error}");
    }
}
