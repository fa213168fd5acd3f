//! `/v1/actions*`: the action set, installs and runs.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};
use serde_json::json;

use crate::platform::principal::{Principal, Scope};
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, ApiError, Json};
use crate::workflows::{self, require};

/// Answered from the serialized listing kept per generation of the action set.
pub async fn list(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<axum::response::Response, ApiError> {
    let body = workflows::actions::list_json(&state.services, &principal)?;
    Ok(([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response())
}

pub async fn get(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Answer {
    workflows::actions::get(&state.services, &principal, name)
}

pub async fn patch(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    Json(body): Json<wire::PatchAction>,
) -> Answer {
    workflows::actions::set_enabled(&state.services, &principal, name, body)
}

pub async fn delete(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
) -> Answer {
    workflows::actions::remove(&state.services, &principal, name)
}

pub async fn install(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Json(body): Json<wire::InstallAction>,
) -> Answer {
    workflows::actions::install(&state.services, &principal, body).await
}

/// A run with no body (or an empty one) has no arguments. Every answer says how long the daemon
/// itself took ([`wire::OVERHEAD_HEADER`]): from here to the answer, less the steps' waits on
/// their upstreams.
pub async fn run(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(name): Path<String>,
    body: Option<Json<wire::RunBody>>,
) -> impl axum::response::IntoResponse {
    let started = std::time::Instant::now();
    let waited = Arc::default();
    let args = body.map(|Json(body)| body.args).unwrap_or_default();
    let response = workflows::actions::run(&state.services, &principal, name, args, &waited).await.into_response();
    let overhead = started.elapsed().saturating_sub(waited.total());
    ([(wire::OVERHEAD_HEADER, overhead.as_micros().to_string())], response)
}

pub async fn watch(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require(&principal, Scope::ActionsList)?;
    let changes = tokio_stream::wrappers::WatchStream::from_changes(state.services.actions.subscribe())
        .map(|generation| Ok(Event::default().event("changed").data(json!({ "generation": generation }).to_string())));
    let ready = futures_util::stream::once(async { Ok(Event::default().event("ready").data("{}")) });
    let mut shutdown = state.shutdown.subscribe();
    let stream = ready.chain(changes).take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
