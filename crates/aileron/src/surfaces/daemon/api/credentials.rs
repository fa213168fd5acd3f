//! `/v1/vault*`, `/v1/secrets*`, `/v1/bindings*`: extract, call the workflow, answer.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};

use crate::platform::principal::Principal;
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, Json};
use crate::workflows::bindings::CallbackAnswer;
use crate::workflows::{bindings, vault};

pub async fn vault_status(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    vault::status(&state.services, &principal)
}

pub async fn vault_init(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::PassphraseBody>,
) -> Answer {
    vault::init(&state.services, &principal, body).await
}

pub async fn vault_unlock(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::PassphraseBody>,
) -> Answer {
    vault::unlock(&state.services, &principal, body).await
}

pub async fn vault_lock(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    vault::lock(&state.services, &principal).await
}

pub async fn list_secrets(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    vault::list_secrets(&state.services, &principal)
}

pub async fn set_secret(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::SetSecret>,
) -> Answer {
    vault::set_secret(&state.services, &principal, body).await
}

pub async fn remove_secret(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(path): Path<String>,
) -> Answer {
    vault::remove_secret(&state.services, &principal, path).await
}

pub async fn list_bindings(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    bindings::list(&state.services, &principal)
}

pub async fn get_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Answer {
    bindings::get(&state.services, &principal, name)
}

pub async fn revoke_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Answer {
    bindings::revoke(&state.services, &principal, name).await
}

pub async fn setup_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::SetupBody>,
) -> Answer {
    bindings::setup(&state.services, &principal, body).await
}

pub async fn rebind_binding(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Json(body): Json<wire::MaterialBody>,
) -> Answer {
    bindings::rebind(&state.services, &principal, name, body).await
}

pub async fn oauth_init(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::OAuthInit>,
) -> Answer {
    bindings::oauth_init(&state.services, &principal, body)
}

pub async fn oauth_finish(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::OAuthFinish>,
) -> Answer {
    bindings::oauth_finish(&state.services, &principal, body).await
}

/// Daemon mode's OAuth redirect target: a redirect back to the console, or a page.
pub async fn oauth_callback(State(state): State<Arc<AppState>>, Query(query): Query<wire::CallbackQuery>) -> Response {
    match bindings::oauth_callback(&state.services, query).await {
        CallbackAnswer::Redirect(mut url, pairs) => {
            url.query_pairs_mut().extend_pairs(pairs.iter().map(|(key, value)| (*key, value.as_str())));
            Redirect::to(url.as_str()).into_response()
        }
        CallbackAnswer::Page(status, message) => {
            let escaped = message.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
            (status, axum::response::Html(format!("<!doctype html><title>Aileron</title><p>{escaped}</p>")))
                .into_response()
        }
    }
}
