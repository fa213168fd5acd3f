//! `aileron-mcp`'s stdio transport: rmcp's own line reader for what the agent host sends (its
//! bounds, BOM and error handling stay rmcp's), and a writer of ours for what goes back — each
//! message serialized by one `serde_json::to_vec` and written by one `write_all`.
//!
//! Why not rmcp's writer: its codec serializes through `BytesMut::writer()` token by token into a
//! buffer that grows as it goes. For the 6.6 MB `tools/list` answer of 10,000 actions that was a
//! third of the answer's time in a profile (16 % writing tokens, 15 % growing the buffer:
//! BENCHMARKS.md, (j)).
//!
//! A `tools/list` answer is most of that: 10,000 tools whose schemas and descriptions serialize
//! the same way every time the catalog is unchanged. The transport keeps the serialized `tools`
//! array of the last answer with the tools it came from, and when the next answer's tools are
//! equal (cheap: the catalog hands out the same schema `Arc`s, compared by pointer first) it
//! writes those bytes again between the freshly serialized envelope's head and tail. The line is
//! byte for byte what serializing the whole message gives (a test keeps it so).
//!
//! Invariant: lines reach stdout whole and in the order they were sent — one writer task owns the
//! stream, and both our messages and the reader's own replies (rmcp answers a malformed request
//! itself) go through its queue.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use rmcp::RoleServer;
use rmcp::model::{JsonRpcMessage, ServerResult, Tool};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// Bytes for the writer task, written in order as one line; `done` asks for a flush and its
/// outcome.
struct Job {
    parts: Vec<Bytes>,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

pub struct LineTransport<R: AsyncRead> {
    /// rmcp's transport, used to receive; what it writes itself goes through [`Queued`].
    reader: AsyncRwTransport<RoleServer, R, Queued>,
    jobs: mpsc::UnboundedSender<Job>,
    /// The tools of the last `tools/list` answer and their serialized array.
    listed: Option<(Vec<Tool>, Bytes)>,
}

/// How a `tools/list` answer whose `tools` were taken out serializes: the array is the last
/// field of the result, and the result the last of the response.
const EMPTY_TOOLS_TAIL: &[u8] = b"\"tools\":[]}}";

impl<R: AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// Reads messages from `read`; writes them to `write` from a task of its own (spawned here:
    /// call inside a tokio runtime).
    pub fn new<W: AsyncWrite + Send + Unpin + 'static>(read: R, write: W) -> LineTransport<R> {
        let (jobs, queue) = mpsc::unbounded_channel();
        tokio::spawn(write_lines(write, queue));
        LineTransport { reader: AsyncRwTransport::new(read, Queued { jobs: jobs.clone() }), jobs, listed: None }
    }

    /// The message as the parts of one line (newline included).
    fn serialize(&mut self, mut item: TxJsonRpcMessage<RoleServer>) -> Result<Vec<Bytes>, serde_json::Error> {
        let JsonRpcMessage::Response(response) = &mut item else { return Ok(vec![line(serde_json::to_vec(&item)?)]) };
        let ServerResult::ListToolsResult(listing) = &mut response.result else {
            return Ok(vec![line(serde_json::to_vec(&item)?)]);
        };
        let tools = std::mem::take(&mut listing.tools);
        let mut envelope = serde_json::to_vec(&item)?;
        if !envelope.ends_with(EMPTY_TOOLS_TAIL) {
            // Not the shape this relies on (a newer rmcp): serialize it whole.
            if let JsonRpcMessage::Response(response) = &mut item
                && let ServerResult::ListToolsResult(listing) = &mut response.result
            {
                listing.tools = tools;
            }
            return Ok(vec![line(serde_json::to_vec(&item)?)]);
        }
        let array = match &self.listed {
            Some((listed, array)) if *listed == tools => array.clone(),
            _ => {
                let array = Bytes::from(serde_json::to_vec(&tools)?);
                self.listed = Some((tools, array.clone()));
                array
            }
        };
        // `…"tools":` + the array + `}}` + newline.
        envelope.truncate(envelope.len() - b"[]}}".len());
        Ok(vec![Bytes::from(envelope), array, Bytes::from_static(b"}}\n")])
    }
}

fn line(mut bytes: Vec<u8>) -> Bytes {
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// Writes every job in order; after a write error every later job fails with it.
async fn write_lines<W: AsyncWrite + Unpin>(mut write: W, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut broken: Option<(io::ErrorKind, String)> = None;
    while let Some(Job { parts, done }) = queue.recv().await {
        let written = match &broken {
            Some((kind, message)) => Err(io::Error::new(*kind, message.clone())),
            None => match write_parts(&mut write, &parts).await {
                Ok(()) if done.is_some() => write.flush().await,
                other => other,
            },
        };
        if let Err(error) = &written {
            broken.get_or_insert_with(|| (error.kind(), error.to_string()));
        }
        if let Some(done) = done {
            let _ = done.send(written);
        }
    }
    let _ = write.flush().await;
}

async fn write_parts<W: AsyncWrite + Unpin>(write: &mut W, parts: &[Bytes]) -> io::Result<()> {
    for part in parts {
        write.write_all(part).await?;
    }
    Ok(())
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(&mut self, item: TxJsonRpcMessage<RoleServer>) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let queued = self.serialize(item).map_err(io::Error::other).and_then(|parts| {
            let (done, written) = oneshot::channel();
            self.jobs.send(Job { parts, done: Some(done) }).map_err(|_| closed())?;
            Ok(written)
        });
        async move { queued?.await.unwrap_or_else(|_| Err(closed())) }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.reader.receive()
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.reader.close().await?;
        // Everything queued before this is written and flushed when it is acknowledged.
        let (done, flushed) = oneshot::channel();
        self.jobs.send(Job { parts: Vec::new(), done: Some(done) }).map_err(|_| closed())?;
        flushed.await.unwrap_or_else(|_| Err(closed()))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the MCP output stream is closed")
}

/// The writer handed to rmcp's transport: every write is queued whole for the writer task.
struct Queued {
    jobs: mpsc::UnboundedSender<Job>,
}

impl AsyncWrite for Queued {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        let job = Job { parts: vec![Bytes::copy_from_slice(bytes)], done: None };
        Poll::Ready(self.jobs.send(job).map(|()| bytes.len()).map_err(|_| closed()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{ErrorData, ListToolsResult, NumberOrString, ServerJsonRpcMessage, ServerResult};
    use tokio::io::AsyncBufReadExt;

    use super::*;

    /// Messages sent back to back come out as whole lines in order, each exactly what
    /// serde_json makes of it, and a malformed request is answered by the reader in the same
    /// stream; closing flushes.
    #[tokio::test]
    async fn lines_are_whole_ordered_and_the_readers_replies_share_the_stream() {
        let (agent_side, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, agent_reads) = tokio::io::duplex(1 << 20);
        let mut transport = LineTransport::new(server_in, server_out);
        let (_agent_read_half, mut agent_write_half) = tokio::io::split(agent_side);
        let messages: Vec<TxJsonRpcMessage<RoleServer>> = (0..50)
            .map(|i| {
                let text = "x".repeat(i * 97);
                ServerJsonRpcMessage::response(
                    ServerResult::empty(()),
                    NumberOrString::String(format!("{i}-{text}").into()),
                )
            })
            .collect();
        let expected: Vec<String> = messages.iter().map(|m| serde_json::to_string(m).unwrap()).collect();
        // All of them in flight at once (send futures are 'static: rmcp runs them concurrently).
        let mut sends = Vec::new();
        for message in messages {
            sends.push(tokio::spawn(transport.send(message)));
        }
        for sent in sends {
            sent.await.unwrap().unwrap();
        }
        // Well-formed JSON that is no message: rmcp's reader answers it with an error itself.
        agent_write_half.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7}\n").await.unwrap();
        agent_write_half.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":8}\n").await.unwrap();
        let received = transport.receive().await.expect("the ping arrives");
        assert!(serde_json::to_string(&received).unwrap().contains("ping"));
        transport.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(agent_reads).lines();
        for line in &expected {
            assert_eq!(lines.next_line().await.unwrap().as_deref(), Some(line.as_str()));
        }
        let reply = lines.next_line().await.unwrap().expect("the reader's own error reply");
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        assert_eq!(reply["error"]["code"], serde_json::json!(ErrorData::invalid_request("", None).code.0));
    }

    fn listing(id: i64, tools: Vec<Tool>) -> TxJsonRpcMessage<RoleServer> {
        ServerJsonRpcMessage::response(
            ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools)),
            NumberOrString::Number(id),
        )
    }

    /// A `tools/list` answer written from the kept array is exactly the whole message
    /// serialized, for the same tools again and after they change (a schema, a description, one
    /// tool more or less), and other answers are untouched.
    #[tokio::test]
    async fn a_tools_list_answer_is_what_serializing_it_whole_gives() {
        let (_agent_side, server_in) = tokio::io::duplex(1 << 10);
        let (server_out, agent_reads) = tokio::io::duplex(1 << 22);
        let mut transport = LineTransport::new(server_in, server_out);
        let schema = |text: &str| Arc::new(serde_json::json!({ "type": "object", "description": text }).as_object().unwrap().clone());
        let tools: Vec<Tool> = (0..300)
            .map(|i| Tool::new(format!("tool-{i}"), format!("does \"{i}\"\n\u{202e}"), schema(&format!("s{i}"))))
            .collect();
        let mut changed_schema = tools.clone();
        changed_schema[17].input_schema = schema("another");
        let mut changed_description = tools.clone();
        changed_description[299].description = Some("new words".into());
        let fewer = tools[..299].to_vec();
        let messages = vec![
            listing(1, tools.clone()),
            listing(2, tools.clone()),
            listing(3, changed_schema),
            listing(4, changed_description),
            listing(5, tools.clone()),
            listing(6, fewer),
            listing(7, Vec::new()),
            ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(8)),
        ];
        let expected: Vec<String> = messages.iter().map(|m| serde_json::to_string(m).unwrap()).collect();
        let kept = |transport: &LineTransport<_>| transport.listed.as_ref().map(|(_, array)| array.as_ptr());
        let mut arrays = Vec::new();
        for message in messages {
            transport.send(message).await.unwrap();
            arrays.push(kept(&transport));
        }
        // The same tools again reuse the kept array; a change serializes a new one.
        assert_eq!(arrays[0], arrays[1]);
        assert_ne!(arrays[1], arrays[2]);
        transport.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(agent_reads).lines();
        for line in &expected {
            assert_eq!(lines.next_line().await.unwrap().as_deref(), Some(line.as_str()));
        }
    }
}
