//! `/v1/audit*`: reading the audit log.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::json;

use crate::audit_log::{AuditError, AuditFilter};
use crate::daemon::AppState;
use crate::principal::{Principal, Scope};
use crate::wire::{Answer, ApiError, Reply};
use crate::workflows::require;

/// The query of `GET /v1/audit`: every parameter given must match.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// RFC 3339 timestamp or YYYY-MM-DD (midnight UTC): records at or after it.
    pub since: Option<String>,
    /// Same forms as `since`: records strictly before it.
    pub until: Option<String>,
    pub audit_id: Option<String>,
    pub connector_fqn: Option<String>,
    /// Failure class, e.g. `capability_denied`.
    pub class: Option<String>,
    pub event_type: Option<String>,
    /// An event type or its dotted prefix: `approval` matches `approval.requested`.
    pub family: Option<String>,
    /// The action a record is about (`aileron.action.name` or `aileron.approval.action`).
    pub action: Option<String>,
    pub session_id: Option<String>,
    /// A run's audit id: its record and the records carrying it as `aileron.audit.id`.
    pub run: Option<String>,
    /// Paging: records with a seq below it (the last seq of the previous page).
    pub before_seq: Option<u64>,
    /// `true` skips records that belong to a run (those carrying `aileron.audit.id`).
    #[serde(default)]
    pub top_level: bool,
    /// At most this many records (default 100, at most 10000).
    pub limit: Option<usize>,
}

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<AuditQuery>,
) -> Answer {
    require(&principal, Scope::Console)?;
    let filter = AuditFilter {
        since: query.since,
        until: query.until,
        audit_id: query.audit_id,
        connector_fqn: query.connector_fqn,
        class: query.class,
        event_type: query.event_type,
        family: query.family,
        action: query.action,
        session_id: query.session_id,
        run: query.run,
        before_seq: query.before_seq,
        top_level: query.top_level,
        limit: Some(query.limit.unwrap_or(100).min(10_000)),
    };
    // Reading the log is blocking file IO.
    let audit = state.services.audit.clone();
    let items = tokio::task::spawn_blocking(move || audit.query(&filter)).await.map_err(ApiError::internal)?;
    let items = items.map_err(|error| match error {
        AuditError::InvalidTime { .. } => ApiError::bad_request("invalid_query", error.to_string()).with_hint(
            "write a date like 2025-01-31 or a timestamp like 2025-01-31T09:00:00Z (relative words are not read)",
        ),
        error => ApiError::internal(error),
    })?;
    Ok(Reply::ok(json!({ "items": items })))
}

pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Answer {
    require(&principal, Scope::Console)?;
    match state.services.audit.get(&id).map_err(ApiError::internal)? {
        Some(record) => Ok(Reply::ok(record)),
        None => Err(ApiError::not_found("audit_not_found", format!("no audit record `{id}`"))
            .with_hint("list recent records with: aileron audit list")),
    }
}

/// Verifies the whole chain (it reads every file, so it runs on a blocking thread); a broken
/// chain is an answer (`ok: false` with the problem and what to do), not an error.
pub async fn verify(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    require(&principal, Scope::Console)?;
    let audit = state.services.audit.clone();
    let outcome = tokio::task::spawn_blocking(move || audit.verify()).await.map_err(ApiError::internal)?;
    Ok(Reply::ok(match outcome {
        Ok(report) => json!({
            "ok": true,
            "records": report.records,
            "files": report.files,
            "last_seq": report.last_seq,
            "head_anchor": report.head_anchor,
            "warning": report.warning(),
        }),
        Err(problem) => json!({ "ok": false, "problem": problem.to_string(), "hint": problem.hint() }),
    }))
}
