//! `aileron-mcp`'s stdio transport: a line reader for what the agent host sends, and a writer of
//! ours for what goes back — each message serialized by one `serde_json::to_vec` and written by
//! one `write_all`.
//!
//! The reader keeps rmcp's rules for the stdio transport (`rmcp::transport::async_rw`, 3.9):
//! lines of at most [`MAX_LINE_LENGTH`] (a longer one is dropped whole and reading goes on),
//! `\r\n` and a UTF-8 byte order mark accepted, blank lines skipped, bytes that are not JSON
//! ignored without an answer, well-formed JSON that is no message answered with Invalid Request,
//! and non-MCP notifications ignored. What it changes is the parse of `tools/call`, the one
//! message an agent sends over and over: rmcp's parse of a line goes through its untagged
//! message enum (serde buffers the whole line, then tries up to 22 request variants in turn);
//! a line is first tried as a `tools/call` request of rmcp's own type, which is what the full
//! parse yields for every line that type accepts (a test holds the two equal), and anything
//! else goes through the full parse. Measured in BENCHMARKS.md, (e).
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
//! stream, and both our messages and the reader's own replies (a malformed request is answered
//! by the reader) go through its queue.

use std::future::Future;
use std::io;

use bytes::{Bytes, BytesMut};
use rmcp::RoleServer;
use rmcp::model::{CallToolRequest, ClientRequest, ErrorData, JsonRpcMessage, JsonRpcRequest, ServerResult, Tool};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// The longest line read from the agent host, newline included: rmcp's bound for stdio.
pub const MAX_LINE_LENGTH: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much the reader asks the stream for at a time.
const READ_CHUNK: usize = 8 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Bytes for the writer task, written in order as one line; `done` asks for a flush and its
/// outcome.
struct Job {
    parts: Vec<Bytes>,
    done: Option<oneshot::Sender<io::Result<()>>>,
}

pub struct LineTransport<R: AsyncRead> {
    reader: LineReader<R>,
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
        LineTransport { reader: LineReader::new(read), jobs, listed: None }
    }

    /// The message as the parts of one line (newline included).
    fn serialize(&mut self, mut item: TxJsonRpcMessage<RoleServer>) -> Result<Vec<Bytes>, serde_json::Error> {
        let JsonRpcMessage::Response(response) = &mut item else {
            return Ok(vec![line_of(serde_json::to_vec(&item)?)]);
        };
        let ServerResult::ListToolsResult(listing) = &mut response.result else {
            return Ok(vec![line_of(serde_json::to_vec(&item)?)]);
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
            return Ok(vec![line_of(serde_json::to_vec(&item)?)]);
        }
        let array = match self.listed.take() {
            // Kept with the new tools: when the catalog was fetched again with the same content,
            // its schemas are new `Arc`s, and comparing against the old ones went schema by
            // schema on every later listing (aileron-mcp's CPU for 10,000 tools tripled and the
            // listing took 13–25 ms instead of 5: BENCHMARKS.md, (j)). With the new ones kept,
            // the next comparison is by pointer again.
            Some((listed, array)) if listed == tools => {
                self.listed = Some((tools, array.clone()));
                array
            }
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

fn line_of(mut bytes: Vec<u8>) -> Bytes {
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

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let queued = self.serialize(item).map_err(io::Error::other).and_then(|parts| {
            let (done, written) = oneshot::channel();
            self.jobs.send(Job { parts, done: Some(done) }).map_err(|_| closed())?;
            Ok(written)
        });
        async move { queued?.await.unwrap_or_else(|_| Err(closed())) }
    }

    /// The next message, as rmcp's reader would have read it. Cancel-safe (rmcp polls it inside
    /// a `select!`): a partly read line stays in the reader's buffer.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let line = self.reader.next_line().await?;
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.is_empty() {
                continue;
            }
            match parse(line) {
                Ok(Parsed::Message(message)) => return Some(message),
                Ok(Parsed::Ignored) => {}
                Ok(Parsed::Answer(error, id)) => {
                    let reply = serde_json::to_vec(&TxJsonRpcMessage::<RoleServer>::error(error, id))
                        .expect("an error message serializes");
                    if self.jobs.send(Job { parts: vec![line_of(reply)], done: None }).is_err() {
                        return None;
                    }
                }
                // Not JSON: no id to answer, and answering can start an error storm with a
                // peer that echoes it back; the other official SDKs ignore it too.
                Err(error) if error.is_syntax() || error.is_eof() => {}
                // Well-formed JSON that is no message: a protocol error, answered.
                Err(_) => {
                    let reply = TxJsonRpcMessage::<RoleServer>::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    let reply = serde_json::to_vec(&reply).expect("an error message serializes");
                    if self.jobs.send(Job { parts: vec![line_of(reply)], done: None }).is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        // Everything queued before this is written and flushed when it is acknowledged.
        let (done, flushed) = oneshot::channel();
        self.jobs.send(Job { parts: Vec::new(), done: Some(done) }).map_err(|_| closed())?;
        flushed.await.unwrap_or_else(|_| Err(closed()))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the MCP output stream is closed")
}

/// Whole lines from the agent host, bounded as rmcp bounds them.
struct LineReader<R> {
    read: R,
    /// Bytes read and not yet taken as lines.
    buffer: BytesMut,
    /// Where the search for the next newline resumes (the bytes before it hold none).
    searched: usize,
    /// Set while the rest of a line over `max_line` is being dropped.
    discarding: bool,
    /// [`MAX_LINE_LENGTH`] (tests set less).
    max_line: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(read: R) -> LineReader<R> {
        LineReader { read, buffer: BytesMut::new(), searched: 0, discarding: false, max_line: MAX_LINE_LENGTH }
    }

    /// The next line without its `\n`; `None` at the end of the stream (bytes after the last
    /// newline are an incomplete message, dropped as rmcp drops them) or when it cannot be read.
    /// A line over [`MAX_LINE_LENGTH`] is dropped whole and reading goes on. Cancel-safe: what
    /// was read stays in the buffer.
    async fn next_line(&mut self) -> Option<BytesMut> {
        loop {
            if let Some(offset) = self.buffer[self.searched..].iter().position(|&byte| byte == b'\n') {
                let end = self.searched + offset;
                let mut line = self.buffer.split_to(end + 1);
                self.searched = 0;
                if std::mem::take(&mut self.discarding) {
                    continue;
                }
                if line.len() > self.max_line {
                    oversized(self.max_line);
                    continue;
                }
                line.truncate(end);
                return Some(line);
            }
            if !self.discarding && self.buffer.len() >= self.max_line {
                oversized(self.max_line);
                self.discarding = true;
            }
            if self.discarding {
                self.buffer.clear();
            }
            self.searched = self.buffer.len();
            self.buffer.reserve(READ_CHUNK);
            match self.read.read_buf(&mut self.buffer).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(error) => {
                    log_line!("aileron-mcp: reading the agent's messages: {error}");
                    return None;
                }
            }
        }
    }
}

fn oversized(max_line: usize) {
    log_line!("aileron-mcp: dropped an incoming message longer than {max_line} bytes");
}

/// What one line is.
enum Parsed {
    Message(RxJsonRpcMessage<RoleServer>),
    /// A notification rmcp ignores for compatibility.
    Ignored,
    /// A JSON-RPC error this transport answers itself, with the request's id when it has one.
    Answer(ErrorData, Option<rmcp::model::RequestId>),
}

/// A line as rmcp's stdio reader parses it (a leading byte order mark allowed). A `tools/call`
/// request is parsed straight into its type first. Where rmcp would stay silent or answer the
/// wrong error, three cases are answered here (JSON-RPC 2.0 §5.1): a `tools/call` request whose
/// params are not `{name, arguments?}` gets Invalid params (-32602) with its id (rmcp answered
/// Method not found); JSON the parser cannot represent — a lone UTF-16 surrogate escape, nesting
/// deeper than 128 levels — gets Parse error (-32700) with a null id (rmcp read it as not JSON and
/// said nothing, so the agent waited for an answer that never came). Bytes that are not JSON at
/// all stay unanswered, as rmcp and the other official SDKs leave them (answering can start an
/// error storm with a peer that echoes).
fn parse(line: &[u8]) -> Result<Parsed, serde_json::Error> {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if let Ok(call) = serde_json::from_slice::<JsonRpcRequest<CallToolRequest>>(line) {
        return Ok(Parsed::Message(JsonRpcMessage::Request(JsonRpcRequest::new(
            call.id,
            ClientRequest::CallToolRequest(call.request),
        ))));
    }
    let value = serde_json::from_slice::<Value>(line);
    if let Ok(value) = &value
        && value.get("method").and_then(Value::as_str) == Some("tools/call")
        && value.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && let Some(id) =
            value.get("id").and_then(|id| serde_json::from_value::<rmcp::model::RequestId>(id.clone()).ok())
    {
        let error = ErrorData::invalid_params(
            "Invalid params: tools/call takes {\"name\": string, \"arguments\"?: object}",
            None,
        );
        return Ok(Parsed::Answer(error, Some(id)));
    }
    if let Err(error) = &value
        && let Some(problem) = unrepresentable(error)
    {
        return Ok(Parsed::Answer(ErrorData::parse_error(format!("Parse error: {problem}"), None), None));
    }
    match serde_json::from_slice(line) {
        Ok(message) => Ok(Parsed::Message(message)),
        Err(error) => match value {
            Ok(value) if ignored_for_compatibility(&value) => Ok(Parsed::Ignored),
            _ => Err(error),
        },
    }
}

/// JSON that is well-formed by the grammar but that the parser will not represent: what to say.
fn unrepresentable(error: &serde_json::Error) -> Option<&'static str> {
    let text = error.to_string();
    if text.starts_with("recursion limit exceeded") {
        Some("nesting deeper than 128 levels")
    } else if ["lone leading surrogate", "unexpected end of hex escape", "invalid unicode code point"]
        .iter()
        .any(|problem| text.starts_with(problem))
    {
        Some("a string holds a lone UTF-16 surrogate escape")
    } else {
        None
    }
}

/// rmcp's `should_ignore_notification`: a notification of a method MCP does not define (an
/// editor's LSP traffic on the same pipe), or any message of an undefined `notifications/`
/// method.
fn ignored_for_compatibility(value: &Value) -> bool {
    let Some(method) = value.get("method").and_then(Value::as_str) else { return false };
    let notification = value.get("id").is_none();
    (notification && !is_standard_method(method))
        || (method.starts_with("notifications/") && !is_standard_notification(method))
}

/// The methods of the MCP specification (2026-07-28), as rmcp 3.9 lists them.
fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || is_standard_notification(method)
}

fn is_standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
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
        // Well-formed JSON that is no message: the reader answers it with an error itself.
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
        let schema = |text: &str| {
            Arc::new(serde_json::json!({ "type": "object", "description": text }).as_object().unwrap().clone())
        };
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
        let mut expected: Vec<String> = messages.iter().map(|m| serde_json::to_string(m).unwrap()).collect();
        let kept = |transport: &LineTransport<_>| transport.listed.as_ref().map(|(_, array)| array.as_ptr());
        let mut arrays = Vec::new();
        for message in messages {
            transport.send(message).await.unwrap();
            arrays.push(kept(&transport));
        }
        // The same tools again reuse the kept array; a change serializes a new one.
        assert_eq!(arrays[0], arrays[1]);
        assert_ne!(arrays[1], arrays[2]);
        // The same tools from a catalog fetched again (equal schemas in new `Arc`s) reuse the
        // array too, and the transport keeps the new tools, so the next listing of that catalog
        // compares schemas by pointer, not key by key.
        let mut refetched = tools.clone();
        for tool in &mut refetched {
            tool.input_schema = Arc::new((*tool.input_schema).clone());
        }
        let (again, refetched_listing) = (listing(9, tools.clone()), listing(10, refetched.clone()));
        expected.extend([&again, &refetched_listing].map(|m| serde_json::to_string(m).unwrap()));
        transport.send(again).await.unwrap();
        let array = kept(&transport);
        transport.send(refetched_listing).await.unwrap();
        assert_eq!(kept(&transport), array);
        let (listed, _) = transport.listed.as_ref().unwrap();
        assert!(listed.iter().zip(&refetched).all(|(kept, new)| Arc::ptr_eq(&kept.input_schema, &new.input_schema)));
        transport.close().await.unwrap();
        let mut lines = tokio::io::BufReader::new(agent_reads).lines();
        for line in &expected {
            assert_eq!(lines.next_line().await.unwrap().as_deref(), Some(line.as_str()));
        }
    }

    /// Every `tools/call` line the fast path takes becomes exactly the message rmcp's full parse
    /// makes of it; lines it does not take (another method, an id rmcp refuses, params that are
    /// no tool call) are left to the full parse.
    #[test]
    fn a_tools_call_parsed_straight_is_what_the_full_parse_gives() {
        let calls = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
            r#"{"id":"a-b","method":"tools/call","jsonrpc":"2.0","params":{"arguments":{"n":1.5,"big":18446744073709551615,"neg":-3,"list":[null,true,{"x":"\u00e9\n"}]},"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":1000}}}"#,
        ];
        for call in calls {
            let full: RxJsonRpcMessage<RoleServer> = serde_json::from_str(call).unwrap();
            let fast = serde_json::from_str::<JsonRpcRequest<CallToolRequest>>(call).expect(call);
            let Ok(Parsed::Message(parsed)) = parse(call.as_bytes()) else { panic!("{call}") };
            assert!(
                matches!(&parsed, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CallToolRequest(_))),
                "{call}"
            );
            assert_eq!(serde_json::to_value(&parsed).unwrap(), serde_json::to_value(&full).unwrap(), "{call}");
            assert_eq!(format!("{parsed:?}"), format!("{full:?}"), "{call}");
            assert_eq!(
                serde_json::to_value(&fast.request).unwrap()["params"],
                serde_json::to_value(&full).unwrap()["params"]
            );
        }
        let others = [
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"1.0","id":4,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ];
        for other in others {
            assert!(serde_json::from_str::<JsonRpcRequest<CallToolRequest>>(other).is_err(), "{other}");
            let full =
                serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(other).map(|m| serde_json::to_value(m).unwrap());
            let ours = parse(other.as_bytes()).map(|parsed| match parsed {
                Parsed::Message(message) => serde_json::to_value(message).unwrap(),
                _ => panic!("{other}: rmcp's reading"),
            });
            assert_eq!(full.as_ref().ok(), ours.as_ref().ok(), "{other}");
            assert_eq!(full.map_err(|e| e.classify()).err(), ours.map_err(|e| e.classify()).err(), "{other}");
        }
    }

    /// What a server transport makes of `input`: the messages received, then the lines it
    /// wrote back.
    async fn read_all<T: Transport<RoleServer>>(
        input: &[u8],
        transport: impl FnOnce(tokio::io::DuplexStream, tokio::io::DuplexStream) -> T,
    ) -> (Vec<Value>, Vec<Value>) {
        let (mut agent_write, server_read) = tokio::io::duplex(1 << 16);
        let (server_write, agent_read) = tokio::io::duplex(1 << 16);
        let mut transport = transport(server_read, server_write);
        // In small pieces: lines split across reads must come out whole.
        for chunk in input.chunks(7) {
            agent_write.write_all(chunk).await.unwrap();
        }
        drop(agent_write);
        let mut messages = Vec::new();
        while let Some(message) = transport.receive().await {
            messages.push(serde_json::to_value(message).unwrap());
        }
        transport.close().await.unwrap();
        drop(transport);
        let mut lines = tokio::io::BufReader::new(agent_read).lines();
        let mut replies = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            replies.push(serde_json::from_str(&line).unwrap());
        }
        (messages, replies)
    }

    /// rmcp's reading rules, kept, checked against rmcp's own reader on the same bytes: what is
    /// not JSON is skipped without an answer, well-formed JSON that is no message and a request
    /// whose id cannot be answered get Invalid Request, CRLF, a byte order mark and blank lines
    /// are accepted, an incomplete last line at the end of the stream is no message.
    #[tokio::test]
    async fn lines_are_read_by_rmcps_rules() {
        let input = concat!(
            "not json\n",
            "\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":{}}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/aileron-unknown\",\"params\":7}\n",
            "{\"jsonrpc\":\"2.0\",\"method\":\"$/lsp\",\"params\":7}\n",
            "{\"foo\":\"bar\"}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"tools/list\"}\n",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\r\n",
            "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"a\":[1,2.5]}}}\r\n",
            "  \n",
            "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"result\":{}}\n",
            "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}",
        );
        let rmcps = read_all(input.as_bytes(), |read, write| {
            rmcp::transport::async_rw::AsyncRwTransport::<RoleServer, _, _>::new(read, write)
        })
        .await;
        let ours = read_all(input.as_bytes(), LineTransport::new).await;
        assert_eq!(ours, rmcps);
        let methods: Vec<&Value> = ours.0.iter().map(|message| &message["method"]).collect();
        assert!(
            methods.contains(&&Value::from("notifications/initialized"))
                && methods.contains(&&Value::from("tools/call")),
            "{methods:?}"
        );
        assert!(!ours.1.is_empty(), "the protocol errors are answered");
    }

    /// Where this transport answers what rmcp would not (or answers wrongly): a `tools/call` with
    /// params that are not `{name, arguments?}` gets -32602 with its id; a lone UTF-16 surrogate
    /// escape and nesting deeper than 128 levels get -32700 with a null id. Plain bytes that are
    /// not JSON still get no answer.
    #[tokio::test]
    async fn malformed_calls_surrogates_and_deep_nesting_are_answered_with_json_rpc_errors() {
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"params\":{}{}}}\n",
            "[".repeat(200),
            "]".repeat(200)
        );
        let input = [
            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"arguments\":{}}}\n".to_string(),
            "{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{\"name\":5}}\n".to_string(),
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":\"x\"}}\n".to_string(),
            "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"\\ud800\"}}\n".to_string(),
            deep,
            "not json at all\n".to_string(),
        ]
        .concat();
        let (messages, replies) = read_all(input.as_bytes(), LineTransport::new).await;
        assert!(messages.is_empty(), "{messages:?}");
        let answered: Vec<(Value, Value)> =
            replies.iter().map(|reply| (reply["id"].clone(), reply["error"]["code"].clone())).collect();
        assert_eq!(
            answered,
            vec![
                (Value::from(2), Value::from(-32602)),
                (Value::from("s"), Value::from(-32602)),
                (Value::from(3), Value::from(-32602)),
                (Value::Null, Value::from(-32700)),
                (Value::Null, Value::from(-32700)),
            ],
            "{replies:?}"
        );
        assert!(replies[3]["error"]["message"].as_str().unwrap().contains("surrogate"), "{replies:?}");
        assert!(replies[4]["error"]["message"].as_str().unwrap().contains("128 levels"), "{replies:?}");
    }

    /// A line over the bound is dropped whole, wherever the reads cut it, and the next line is
    /// read; the buffer does not grow past the bound while the long line streams in.
    #[tokio::test]
    async fn a_line_over_the_bound_is_dropped_and_reading_goes_on() {
        let (mut agent, server_in) = tokio::io::duplex(1 << 16);
        let mut reader = LineReader { max_line: 64, ..LineReader::new(server_in) };
        let writer = tokio::spawn(async move {
            agent.write_all(b"short\n").await.unwrap();
            agent.write_all(&[b'x'; 64]).await.unwrap();
            agent.write_all(b"\n").await.unwrap();
            agent.write_all(&[b'y'; 63]).await.unwrap();
            agent.write_all(b"\n").await.unwrap();
            agent.write_all(&[b'z'; 100_000]).await.unwrap();
            agent.write_all(b"zz\nafter\n").await.unwrap();
        });
        assert_eq!(reader.next_line().await.as_deref(), Some(&b"short"[..]));
        assert_eq!(reader.next_line().await.as_deref(), Some(&[b'y'; 63][..]), "64 bytes and its newline are over 64");
        assert_eq!(reader.next_line().await.as_deref(), Some(&b"after"[..]));
        assert!(reader.buffer.capacity() < 64 + 2 * READ_CHUNK, "{}", reader.buffer.capacity());
        writer.await.unwrap();
        assert_eq!(reader.next_line().await, None);
    }
}
