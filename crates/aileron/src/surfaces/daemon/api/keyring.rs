//! `/v1/keyring*`: extract, call the workflow, answer.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;

use crate::platform::principal::Principal;
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, Json};
use crate::workflows::keyring;

pub async fn list(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    keyring::list(&state.services, &principal)
}

pub async fn trust(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::TrustBody>,
) -> Answer {
    keyring::trust(&state.services, &principal, body).await
}

pub async fn revoke(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::RevokeBody>,
) -> Answer {
    keyring::revoke(&state.services, &principal, body).await
}
