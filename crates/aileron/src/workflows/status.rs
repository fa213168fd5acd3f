//! `aileron status`: what the daemon is and holds — version, uptime, counts, sessions, the vault's
//! and the audit log's state, its tracing, the warm-up.

use super::{Services, require};
use crate::platform::principal::{Principal, Scope};
use crate::wire::{ActiveSession, AllocatorView, Answer, ApiError, Reply, StatusCounts, StatusView, TracesView};

/// The daemon started at `started_at`.
pub fn status(state: &Services, principal: &Principal, started_at: chrono::DateTime<chrono::Utc>) -> Answer {
    require(principal, Scope::Admin)?;
    let active: Vec<ActiveSession> = state
        .sessions
        .active()
        .into_iter()
        .map(|s| ActiveSession { session_id: s.session_id, agent: s.agent, pid: s.pid, started_at: s.started_at })
        .collect();
    let (actions, load_errors) = state.actions.list();
    let enabled = actions.iter().filter(|a| a.enabled).count();
    let connectors = state.store.list().map_err(ApiError::internal)?;
    Ok(Reply::ok(StatusView {
        version: crate::platform::process::VERSION.to_string(),
        pid: std::process::id(),
        started_at: started_at.to_rfc3339(),
        uptime_seconds: (chrono::Utc::now() - started_at).num_seconds(),
        counts: StatusCounts {
            actions: actions.len(),
            actions_enabled: enabled,
            action_load_errors: load_errors.len(),
            connectors: connectors.len(),
            approvals_pending: state.approvals.pending().len(),
            approvals_awaiting_vault: state.approvals.awaiting_vault().len(),
            bindings: state.bindings.list().len(),
            sessions_active: active.len(),
        },
        sessions: active,
        vault: state.vault.state().as_str().to_string(),
        audit: match (state.audit.is_durable(), state.audit.low_on_space()) {
            (true, false) => "disk",
            (true, true) => "disk, low on space: runs are refused until it has room",
            (false, _) => "memory",
        }
        .to_string(),
        audit_export: state.audit_export.as_ref().map(|export| {
            let exported = export.exported.load(std::sync::atomic::Ordering::Acquire);
            crate::wire::AuditExportView {
                endpoint: export.endpoint.clone(),
                exported_seq: exported,
                lag: (*state.audit.subscribe().borrow()).saturating_sub(exported),
                last_error: export.last_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            }
        }),
        policy: {
            let rules = state.rules.current();
            let problem = state.rules.problem();
            (!rules.is_empty() || problem.is_some()).then(|| crate::wire::PolicyView {
                hash: rules.hash.clone(),
                files: rules.files.clone(),
                rules: rules.rules.len(),
                problem,
            })
        },
        traces: TracesView {
            enabled: state.telemetry.is_enabled(),
            exporter: state.telemetry.exporter().map(|kind| kind.as_str().to_string()),
        },
        modules_warm: state.modules_warm.load(std::sync::atomic::Ordering::Acquire),
        allocator: AllocatorView { purge_delay_ms: crate::platform::process::allocator_purge_delay_ms() },
    }))
}
