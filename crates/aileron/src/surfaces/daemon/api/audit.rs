//! `/v1/audit*`: extract, call the workflow, answer.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};

use crate::platform::principal::Principal;
use crate::surfaces::daemon::AppState;
use crate::wire::{Answer, AuditQuery};
use crate::workflows::audit;

pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<AuditQuery>,
) -> Answer {
    audit::list(&state.services, &principal, query).await
}

pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Answer {
    audit::get(&state.services, &principal, id)
}

/// Verifies the whole chain; a broken chain is an answer (`ok: false`), not an error.
pub async fn verify(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<crate::wire::VerifyQuery>,
) -> Answer {
    audit::verify(&state.services, &principal, query).await
}
