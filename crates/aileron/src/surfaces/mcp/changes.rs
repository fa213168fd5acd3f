//! `aileron-mcp` learns that the action set changed from the daemon's SSE stream
//! `GET /v1/actions/watch` (event `changed`), never by polling the list. Each event ticks a
//! generation counter that every session turns into `notifications/tools/list_changed`.
//!
//! The stream is re-opened after the daemon restarts (found again through `daemon.json`, never
//! auto-started from here), and a re-opened stream counts as a change: actions may have been
//! added while it was down.
//!
//! The same feed tells the server when its cached catalog is current: only while a stream is
//! followed and no change arrived since the catalog was fetched (see [`ActionFeed::key`]).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use tokio::sync::watch;

use super::link::{Autostart, DaemonLink};

const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// What the follower has seen: `generation` ticks on every change of the action set; `stream`
/// numbers the stream being followed, `None` while none is (changes could then be missed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Followed {
    pub generation: u64,
    pub stream: Option<u64>,
}

/// Where a server learns that the action set changed.
#[derive(Debug, Clone)]
pub enum ActionFeed {
    /// Inside the daemon: the registry's own generation counter, never stale.
    Registry(watch::Receiver<u64>),
    /// In `aileron-mcp`: what [`follow`] has seen of `/v1/actions/watch`, and the last generation
    /// this feed reported (so a change that lands while a session is busy is not lost).
    Followed { followed: watch::Receiver<Followed>, reported: u64 },
}

impl ActionFeed {
    pub fn followed(followed: watch::Receiver<Followed>) -> ActionFeed {
        let reported = followed.borrow().generation;
        ActionFeed::Followed { followed, reported }
    }

    /// A catalog fetched under this key is current while the key is unchanged and its stream
    /// part is `Some`.
    pub fn key(&self) -> (u64, Option<u64>) {
        match self {
            ActionFeed::Registry(generation) => (*generation.borrow(), Some(0)),
            ActionFeed::Followed { followed, .. } => {
                let followed = *followed.borrow();
                (followed.generation, followed.stream)
            }
        }
    }

    /// Waits for a change of the action set (not of the stream) not reported yet; `Err` when the
    /// feed ended.
    pub async fn changed(&mut self) -> Result<(), watch::error::RecvError> {
        match self {
            ActionFeed::Registry(generation) => generation.changed().await,
            ActionFeed::Followed { followed, reported } => loop {
                let generation = followed.borrow_and_update().generation;
                if generation != *reported {
                    *reported = generation;
                    return Ok(());
                }
                followed.changed().await?;
            },
        }
    }

    /// Forgets changes so far: [`ActionFeed::changed`] waits for the next one.
    pub fn mark_seen(&mut self) {
        match self {
            ActionFeed::Registry(generation) => generation.mark_unchanged(),
            ActionFeed::Followed { followed, reported } => *reported = followed.borrow_and_update().generation,
        }
    }
}

/// Follows `/v1/actions/watch` for as long as the process runs, through the link `owner` holds
/// (the server's shared state).
pub async fn follow<Owner: AsRef<DaemonLink>>(owner: Arc<Owner>, changes: watch::Sender<Followed>) {
    let link = (*owner).as_ref();
    let mut streams = 0;
    let mut retry = FIRST_RETRY;
    loop {
        if let Ok(client) = link.client(Autostart::Never).await {
            let response =
                client.request(Method::GET, "/v1/actions/watch").header("accept", "text/event-stream").send().await;
            match response {
                Ok(response) if response.status().is_success() => {
                    let mut events = SseEvents::default();
                    let mut body = response.bytes_stream();
                    while let Some(Ok(chunk)) = body.next().await {
                        for event in events.push(&chunk) {
                            match event.as_str() {
                                "changed" => changes.send_modify(|followed| followed.generation += 1),
                                "ready" => {
                                    streams += 1;
                                    // A re-opened stream may have missed changes: that is one.
                                    let reopened = streams > 1;
                                    changes.send_modify(|followed| {
                                        followed.generation += u64::from(reopened);
                                        followed.stream = Some(streams);
                                    });
                                }
                                _ => {}
                            }
                            retry = FIRST_RETRY;
                        }
                    }
                    // The stream ended: the daemon stopped or restarted, maybe elsewhere.
                    changes.send_if_modified(|followed| followed.stream.take().is_some());
                    link.forget(&client).await;
                }
                Ok(response) => {
                    log_line!("aileron-mcp: GET /v1/actions/watch answered {}; retrying", response.status());
                }
                Err(_) => link.forget(&client).await,
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// Splits a `text/event-stream` body into event names (data is not needed: a change is a change).
#[derive(Debug, Default)]
pub struct SseEvents {
    line: Vec<u8>,
    event: Option<String>,
    has_fields: bool,
}

impl SseEvents {
    /// Feeds a chunk; returns the names of the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut completed = Vec::new();
        for &byte in chunk {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.is_empty() {
                if self.has_fields {
                    completed.push(self.event.take().unwrap_or_else(|| "message".to_string()));
                }
                self.event = None;
                self.has_fields = false;
            } else if line.starts_with(b":") {
                // A comment (keep-alive).
            } else {
                self.has_fields = true;
                if let Some(name) = line.strip_prefix(b"event:") {
                    let name = String::from_utf8_lossy(name);
                    self.event = Some(name.strip_prefix(' ').unwrap_or(&name).to_string());
                }
            }
        }
        completed
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::watch;

    use super::{ActionFeed, Followed, SseEvents};

    #[tokio::test]
    async fn only_action_set_changes_wake_a_session_and_a_lost_stream_voids_the_key() {
        let (sender, receiver) = watch::channel(Followed::default());
        let mut feed = ActionFeed::followed(receiver);
        feed.mark_seen();
        // (update, woken, key afterwards)
        let steps: [(fn(&mut Followed), bool, (u64, Option<u64>)); 4] = [
            (|f| f.stream = Some(1), false, (0, Some(1))),
            (|f| f.generation += 1, true, (1, Some(1))),
            (|f| f.stream = None, false, (1, None)),
            (
                |f| {
                    f.generation += 1;
                    f.stream = Some(2)
                },
                true,
                (2, Some(2)),
            ),
        ];
        for (index, (update, woken, key)) in steps.into_iter().enumerate() {
            sender.send_modify(update);
            let waited = tokio::time::timeout(Duration::from_millis(50), feed.changed()).await;
            assert_eq!(waited.is_ok(), woken, "step {index}");
            assert_eq!(feed.key(), key, "step {index}");
        }
        let (registry, receiver) = watch::channel(7);
        let mut feed = ActionFeed::Registry(receiver);
        feed.mark_seen();
        registry.send_modify(|generation| *generation += 1);
        assert!(tokio::time::timeout(Duration::from_millis(50), feed.changed()).await.is_ok());
        assert_eq!(feed.key(), (8, Some(0)), "the registry is always current");
    }

    #[test]
    fn event_names_are_split_out_of_any_chunking() {
        let check = |chunks: &[&str], expected: &[&str]| {
            let mut events = SseEvents::default();
            let got: Vec<String> = chunks.iter().flat_map(|chunk| events.push(chunk.as_bytes())).collect();
            assert_eq!(got, expected, "{chunks:?}");
        };
        check(&["event: ready\ndata: {}\n\n"], &["ready"]);
        check(&["event: changed\ndata: {\"generation\":1}\n\nevent: changed\ndata: {}\n\n"], &["changed", "changed"]);
        check(&["event: cha", "nged\r\ndata: {}\r", "\n\r\n"], &["changed"]);
        check(&[": keep-alive\n\n", "event:changed\n\n"], &["changed"]);
        check(&["data: x\n\n"], &["message"]);
        check(&["event: changed\ndata: {}\n"], &[]);
        check(&["\n\n\n"], &[]);
    }
}
