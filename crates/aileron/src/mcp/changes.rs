//! `aileron-mcp` learns that the action set changed from the daemon's SSE stream
//! `GET /v1/actions/watch` (event `changed`), never by polling the list. Each event ticks a
//! generation counter that every session turns into `notifications/tools/list_changed`.
//!
//! The stream is re-opened after the daemon restarts (found again through `daemon.json`, never
//! auto-started from here), and a re-opened stream counts as a change: actions may have been
//! added while it was down.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use tokio::sync::watch;

use super::link::{Autostart, CallOrigin};
use super::server::McpShared;

const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Follows `/v1/actions/watch` for as long as the process runs.
pub async fn follow(shared: Arc<McpShared>, changes: watch::Sender<u64>) {
    let link = shared.link();
    let mut streamed_before = false;
    let mut retry = FIRST_RETRY;
    loop {
        if let Ok(client) = link.client(&CallOrigin::default(), Autostart::Never).await {
            let response =
                client.request(Method::GET, "/v1/actions/watch").header("accept", "text/event-stream").send().await;
            match response {
                Ok(response) if response.status().is_success() => {
                    let mut events = SseEvents::default();
                    let mut body = response.bytes_stream();
                    while let Some(Ok(chunk)) = body.next().await {
                        for event in events.push(&chunk) {
                            let changed = match event.as_str() {
                                "changed" => true,
                                "ready" => std::mem::replace(&mut streamed_before, true),
                                _ => false,
                            };
                            if changed {
                                changes.send_modify(|generation| *generation += 1);
                            }
                            retry = FIRST_RETRY;
                        }
                    }
                    // The stream ended: the daemon stopped or restarted, maybe elsewhere.
                    link.forget(&client).await;
                }
                Ok(response) => {
                    eprintln!("aileron-mcp: GET /v1/actions/watch answered {}; retrying", response.status());
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
    use super::SseEvents;

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
