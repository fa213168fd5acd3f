//! `/v1/audit*`: reading the audit log.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use serde::Deserialize;
use serde_json::json;

use crate::audit_log::AuditFilter;
use crate::daemon::AppState;
use crate::principal::{Principal, Scope};
use crate::wire::{Answer, ApiError, Reply};
use crate::workflows::require;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    pub since: Option<String>,
    pub audit_id: Option<String>,
    pub connector_fqn: Option<String>,
    pub class: Option<String>,
    pub event_type: Option<String>,
    pub limit: Option<usize>,
}

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<AuditQuery>,
) -> Answer {
    require(&principal, Scope::Admin)?;
    let filter = AuditFilter {
        since: query.since,
        audit_id: query.audit_id,
        connector_fqn: query.connector_fqn,
        class: query.class,
        event_type: query.event_type,
        limit: Some(query.limit.unwrap_or(100).min(10_000)),
    };
    let items = state.audit.query(&filter).map_err(ApiError::internal)?;
    Ok(Reply::ok(json!({ "items": items })))
}

pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Answer {
    require(&principal, Scope::Admin)?;
    match state.audit.get(&id).map_err(ApiError::internal)? {
        Some(record) => Ok(Reply::ok(record)),
        None => Err(ApiError::not_found("audit_not_found", format!("no audit record `{id}`"))
            .with_hint("list recent records with: aileron audit list")),
    }
}
