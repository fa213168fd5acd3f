//! `/v1/connectors*`: the install pipeline, update checks, removal.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, State};

use crate::platform::principal::Principal;
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, Json};
use crate::workflows;

pub async fn list(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    workflows::connectors::list(&state.services, &principal)
}

pub async fn preview(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::PreviewBody>,
) -> Answer {
    workflows::connectors::preview(&state.services, &principal, body).await
}

pub async fn install(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::InstallBody>,
) -> Answer {
    workflows::connectors::install(&state.services, &principal, body).await
}

pub async fn check(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Query(query): Query<wire::CheckQuery>,
) -> Answer {
    workflows::connectors::check(&state.services, &principal, query).await
}

pub async fn remove(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::RemoveConnector>,
) -> Answer {
    workflows::connectors::remove(&state.services, &principal, body).await
}

pub async fn gc(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    workflows::connectors::gc(&state.services, &principal).await
}
