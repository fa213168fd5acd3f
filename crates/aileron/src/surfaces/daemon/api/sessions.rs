//! `/v1/sessions*`: launch sessions.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};

use crate::platform::principal::Principal;
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, Json};
use crate::workflows;

pub async fn start(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::StartSession>,
) -> Answer {
    workflows::sessions::start(&state.services, &principal, body).await
}

pub async fn list(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    workflows::sessions::list(&state.services, &principal)
}

pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Answer {
    workflows::sessions::get(&state.services, &principal, id)
}

pub async fn end(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<wire::EndSession>,
) -> Answer {
    workflows::sessions::end(&state.services, &principal, id, body).await
}
