//! `GET /v1/events/watch`: one stream that tells a console page something it shows has changed, so it
//! fetches itself again. Events carry a topic, never data: what a page shows is always rendered by
//! the server from the same state the API answers from.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};
use serde_json::json;
use tokio_stream::wrappers::{BroadcastStream, WatchStream};

use crate::platform::principal::{Principal, Scope};
use crate::surfaces::daemon::AppState;
use crate::wire::ApiError;
use crate::workflows::require;

/// The shortest time between two `audit` events on one stream.
const AUDIT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

pub async fn watch(
    State(state): State<Arc<AppState>>,
    Extension(principal): Extension<Principal>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require(&principal, Scope::Console)?;
    let changed = |topic: &str| Ok(Event::default().event("changed").data(json!({ "topic": topic }).to_string()));
    // A watch keeps only the newest value, so a busy log (thousands of appends a second) becomes
    // at most one event per interval, not one per record.
    let audit =
        tokio_stream::StreamExt::throttle(WatchStream::from_changes(state.services.audit.subscribe()), AUDIT_INTERVAL)
            .map(move |_| changed("audit"));
    let actions = WatchStream::from_changes(state.services.actions.subscribe()).map(move |_| changed("actions"));
    // A lagging receiver missed events; either way the page refetches itself.
    let approvals = BroadcastStream::new(state.services.approvals.subscribe()).map(move |_| changed("approvals"));
    let merged = futures_util::stream::select(futures_util::stream::select(audit, actions), approvals);
    let ready = futures_util::stream::once(async { Ok(Event::default().event("ready").data("{}")) });
    let mut shutdown = state.shutdown.subscribe();
    let stream = ready.chain(merged).take_until(async move {
        let _ = shutdown.wait_for(|stopping| *stopping).await;
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(30))))
}
