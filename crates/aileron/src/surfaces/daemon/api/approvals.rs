//! `/v1/action-approvals*` and the web page's login tickets.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};

use crate::platform::principal::{Principal, Scope};
use crate::stores::approvals::QueueEvent;
use crate::surfaces::daemon::AppState;
use crate::wire::{self, Answer, ApiError, Json, Reply};
use crate::workflows::approvals::{pending_for, visible_to};
use crate::workflows::{self, require};

pub async fn list(State(state): State<Arc<AppState>>, Extension(principal): Extension<Principal>) -> Answer {
    workflows::approvals::list(&state.services, &principal)
}

pub async fn decide(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<wire::DecideBody>,
) -> Answer {
    workflows::approvals::decide(&state.services, &principal, id, body).await
}

pub async fn edit_preview(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<wire::EditPreviewBody>,
) -> Answer {
    workflows::approvals::edit_preview(&state.services, &principal, id, body).await
}

pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    Json(body): Json<wire::CancelBody>,
) -> Answer {
    workflows::approvals::cancel(&state.services, &principal, id, body).await
}

pub async fn result(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> Answer {
    workflows::approvals::result(&state.services, &principal, id)
}

/// A one-time ticket for the web page (`aileron open`).
pub async fn mint_login_ticket(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Answer {
    require(&principal, Scope::Admin)?;
    let ticket = state.services.tokens.mint_ticket();
    let login_url = format!("{}/approvals/login?ticket={}", state.services.base_url(), ticket.expose());
    Ok(Reply::created(wire::LoginTicket {
        ticket: ticket.expose().to_string(),
        login_url,
        expires_in_seconds: crate::platform::principal::TICKET_TTL.as_secs(),
    }))
}

pub async fn watch(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require(&principal, Scope::ApprovalsPoll)?;
    // Subscribe before taking the snapshot so nothing falls between the two.
    let lagging = state.clone();
    let watcher = principal.clone();
    let events =
        tokio_stream::wrappers::BroadcastStream::new(state.services.approvals.subscribe()).filter_map(move |event| {
            let item = match event {
                // A watcher that fell behind missed events: send its whole pending list again.
                Err(_lagged) => {
                    let items =
                        serde_json::to_string(&wire::ApprovalList { items: pending_for(&lagging.services, &watcher) })
                            .unwrap_or_default();
                    Some(Ok(Event::default().event("snapshot").data(items)))
                }
                Ok(event) => {
                    let (name, entry) = match &event {
                        QueueEvent::Pending { entry } => ("pending", entry),
                        QueueEvent::Resolved { entry } => ("resolved", entry),
                    };
                    visible_to(&watcher, entry).then(|| {
                        Ok(Event::default().event(name).data(serde_json::to_string(entry).unwrap_or_default()))
                    })
                }
            };
            std::future::ready(item)
        });
    let snapshot = serde_json::to_string(&wire::ApprovalList { items: pending_for(&state.services, &principal) })
        .unwrap_or_default();
    let first = futures_util::stream::once(async move { Ok(Event::default().event("snapshot").data(snapshot)) });
    let mut shutdown = state.shutdown.subscribe();
    let stream = first.chain(events).take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(30))))
}
