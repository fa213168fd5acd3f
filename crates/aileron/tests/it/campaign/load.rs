//! The load campaign (issue 18): 64 concurrent clients against one real daemon process for
//! `scaled(8 s, 600 s)`, mixing every kind of call it serves, must see no error while the
//! daemon's resident memory and open file descriptors stay flat; p50/p99 per kind of call are
//! recorded over time and plotted.
//!
//! The mix, each client a closed loop (the next call starts when the last one ended, no think
//! time, so the daemon is saturated and the latencies include its queueing):
//! - 20 plain runs (`POST /v1/actions/echo/run`);
//! - 12 gated runs: the run (202), a decision (four in five approved, one denied), then polls of
//!   `/v1/action-approvals/{id}/result` until the entry is final; timed as one operation;
//! - 12 MCP `tools/call`s through `aileron-mcp`, one `aileron-mcp` process per client (each an
//!   agent with its own daemon session, as a real agent host would have);
//! - 12 MCP `tools/call`s on the daemon's `/mcp` (streamable HTTP, one MCP session per client);
//! - 8 LLM gateway streams (`stream: true`, half OpenAI chat completions, half Anthropic
//!   messages) from a loopback upstream; the whole stream is read and compared byte for byte.
//!
//! Every result is checked (the echo guest returns the message it was sent, the stream is the one
//! its request asked for). Durations: `AILERON_CAMPAIGN_SECONDS` overrides the length (to try the
//! plot without the 10-minute run); buckets are a twentieth of it, at least one second.
//! With `AILERON_CAMPAIGN_REPORT` set, `load.json` and the plot `load.svg` are written there.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use crate::campaign::{Report, percentile, rss_and_fds, scaled};
use crate::cli::Cli;
use crate::mcp::{Session as _, StdioSession};
use crate::support::ActionSpec;

const PLAIN: &str = "echo";
const GATED: &str = "echo-gated";
const MESSAGE_INPUT: &[(&str, &str, bool)] = &[("message", "string", true)];
const MCP_VERSION: &str = "2025-11-25";
/// One operation (a gated run's whole life included) taking longer than this is an error.
const OP_TIMEOUT: Duration = Duration::from_secs(30);
const APPROVAL_POLL: Duration = Duration::from_millis(20);
/// The loopback LLM upstream's pause between two events, so a stream is a stream.
const EVENT_GAP: Duration = Duration::from_millis(2);
const STREAM_EVENTS: usize = 8;
const MIB: u64 = 1024 * 1024;
const CLIENTS: usize = 64;

/// RSS after the warm-up may grow by half, or by 32 MiB when that is more, before it counts as
/// a leak. Warm-up pays the one-time costs (pooled instance slots touched, the module cache,
/// connection and session tables at their working size, allocator arenas for every thread);
/// after it the working set is constant, so growth is state that accumulates. The absolute
/// floor absorbs allocator fragmentation, which on glibc with a couple of threads per core can
/// move tens of MiB without anything leaking; the ratio keeps the bound meaningful for a large
/// release build. The long form makes a few hundred thousand calls, so a few hundred bytes kept
/// per call cross the bound; the short form (some 2 000 calls after the warm-up in a debug
/// build) only catches a gross leak, beyond ~16 KB a call, and is there to keep the campaign
/// itself working.
const RSS_GROWTH_RATIO: f64 = 1.5;
const RSS_GROWTH_FLOOR: u64 = 32 * MIB;
/// Open descriptors after the warm-up may grow by 32: every client already holds its connection
/// by then (the warm-up lasts until each has finished a call), the rest is the gateway's pool of
/// upstream connections (one per stream at most, 8) and connections a client reopens; a
/// descriptor leaked per call exceeds it within a second.
const FD_GROWTH: usize = 32;
/// Once the clients have gone, descriptors go back to within this of the count before the load
/// (the gateway's idle upstream connections, 8 at most, stay pooled).
const FD_SETTLED_SLACK: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Run,
    GatedRun,
    McpStdio,
    McpHttp,
    GatewayStream,
}

impl Kind {
    const ALL: [Kind; 5] = [Kind::Run, Kind::GatedRun, Kind::McpStdio, Kind::McpHttp, Kind::GatewayStream];

    fn name(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::GatedRun => "gated_run",
            Kind::McpStdio => "mcp_stdio",
            Kind::McpHttp => "mcp_http",
            Kind::GatewayStream => "gateway_stream",
        }
    }

    fn clients(self) -> usize {
        match self {
            Kind::Run => 20,
            Kind::GatedRun | Kind::McpStdio | Kind::McpHttp => 12,
            Kind::GatewayStream => 8,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Run => "run",
            Kind::GatedRun => "gated run + decision + polls",
            Kind::McpStdio => "tools/call via aileron-mcp",
            Kind::McpHttp => "tools/call on /mcp",
            Kind::GatewayStream => "gateway stream",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Kind::Run => "#1f77b4",
            Kind::GatedRun => "#d62728",
            Kind::McpStdio => "#2ca02c",
            Kind::McpHttp => "#9467bd",
            Kind::GatewayStream => "#ff7f0e",
        }
    }
}

/// How long the campaign runs and how it is cut into buckets.
#[derive(Clone, Copy)]
struct Clock {
    started: Instant,
    duration: Duration,
    bucket: Duration,
    buckets: usize,
}

impl Clock {
    fn new(duration: Duration) -> Clock {
        let bucket = (duration / 20).max(Duration::from_secs(1));
        let buckets = duration.div_duration_f64(bucket).ceil() as usize;
        Clock { started: Instant::now(), duration, bucket, buckets }
    }

    fn deadline(&self) -> Instant {
        self.started + self.duration
    }

    /// The bucket an operation that began at `at` belongs to.
    fn bucket_of(&self, at: Instant) -> usize {
        let index = at.saturating_duration_since(self.started).div_duration_f64(self.bucket) as usize;
        index.min(self.buckets - 1)
    }

    /// When the warm-up ends (the flatness reference): after the first tenth of the campaign,
    /// one bucket at least, and not before the bucket in which every client's first call ended
    /// (each holds its connection, and its aileron-mcp its session, from then on; a debug build
    /// on a busy 2-core machine takes a few seconds to get all 64 through their first call).
    fn warm_up_s(&self, all_clients_in: Option<Instant>) -> f64 {
        let bucket_s = self.bucket.as_secs_f64();
        let tenth = (self.buckets / 10).max(1) as f64 * bucket_s;
        let all_in =
            all_clients_in.map_or(f64::INFINITY, |at| at.saturating_duration_since(self.started).as_secs_f64());
        let all_in = (all_in / bucket_s).ceil() * bucket_s;
        tenth.max(all_in).min(self.duration.as_secs_f64())
    }
}

/// `AILERON_CAMPAIGN_SECONDS` when set, else `scaled(8 s, 600 s)`.
fn campaign_duration() -> Duration {
    match std::env::var("AILERON_CAMPAIGN_SECONDS").ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(seconds) => Duration::from_secs(seconds.max(2)),
        None => scaled(Duration::from_secs(8), Duration::from_secs(600)),
    }
}

/// Latencies (µs) per kind and bucket, the errors, and when every client was in.
struct Recorder {
    clock: Clock,
    latencies: BTreeMap<Kind, Vec<Vec<u64>>>,
    errors: BTreeMap<Kind, u64>,
    first_errors: Vec<String>,
    /// Clients whose first call has ended, and when the last of them did.
    clients_in: usize,
    all_clients_in: Option<Instant>,
}

impl Recorder {
    fn new(clock: Clock) -> Recorder {
        let latencies = Kind::ALL.iter().map(|kind| (*kind, vec![Vec::new(); clock.buckets])).collect();
        let errors = Kind::ALL.iter().map(|kind| (*kind, 0)).collect();
        Recorder { clock, latencies, errors, first_errors: Vec::new(), clients_in: 0, all_clients_in: None }
    }

    /// Records one call; `first` for a client's first.
    fn record(&mut self, kind: Kind, began: Instant, outcome: Result<(), String>, first: bool) {
        if first {
            self.clients_in += 1;
            if self.clients_in == CLIENTS {
                self.all_clients_in = Some(Instant::now());
            }
        }
        let bucket = self.clock.bucket_of(began);
        match outcome {
            Ok(()) => self.latencies.get_mut(&kind).unwrap()[bucket].push(began.elapsed().as_micros() as u64),
            Err(error) => {
                *self.errors.get_mut(&kind).unwrap() += 1;
                if self.first_errors.len() < 10 {
                    let at = began.saturating_duration_since(self.clock.started).as_secs_f64();
                    let error: String = error.chars().take(400).collect();
                    self.first_errors.push(format!("{} at {at:.1}s: {error}", kind.name()));
                }
            }
        }
    }
}

type Shared = Arc<Mutex<Recorder>>;

/// The daemon under load, from `daemon.json`.
#[derive(Clone)]
struct Daemon {
    url: String,
    token: String,
    pid: i32,
}

impl Daemon {
    fn of(home: &Path) -> Daemon {
        let info: Value = serde_json::from_str(&std::fs::read_to_string(home.join("daemon.json")).unwrap()).unwrap();
        Daemon {
            url: info["url"].as_str().unwrap().to_string(),
            token: info["token"].as_str().unwrap().to_string(),
            pid: info["pid"].as_i64().unwrap() as i32,
        }
    }
}

/// One client for every asynchronous caller (clones share its pool; each caller still has a
/// connection of its own, as calls are concurrent): building 52, TLS configuration and all,
/// costs seconds of CPU in a debug build just when the daemon is being measured.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(OP_TIMEOUT).build().unwrap()
}

fn transport(error: reqwest::Error) -> String {
    format!("transport: {error}")
}

/// The echo guest answers `{"output": {"op", "args"}}`: the message must come back.
fn expect_echo(result: &Value, message: &str) -> Result<(), String> {
    if result["output"]["args"]["message"] == message {
        Ok(())
    } else {
        Err(format!("wrong result for {message}: {result}"))
    }
}

async fn send_json(request: reqwest::RequestBuilder) -> Result<(u16, Value), String> {
    let response = request.send().await.map_err(transport)?;
    let status = response.status().as_u16();
    let bytes = response.bytes().await.map_err(transport)?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into())
    };
    Ok((status, body))
}

async fn plain_run(http: &reqwest::Client, daemon: &Daemon, message: &str) -> Result<(), String> {
    let url = format!("{}/v1/actions/{PLAIN}/run", daemon.url);
    let (status, body) =
        send_json(http.post(url).bearer_auth(&daemon.token).json(&json!({"args": {"message": message}}))).await?;
    if status != 200 {
        return Err(format!("run: HTTP {status}: {body}"));
    }
    expect_echo(&body["result"], message)
}

/// Run (202) → decide (204) → poll the result until it is final (completed with the echo, or
/// denied with the reason given).
async fn gated_run(http: &reqwest::Client, daemon: &Daemon, message: &str, approve: bool) -> Result<(), String> {
    let url = format!("{}/v1/actions/{GATED}/run", daemon.url);
    let (status, pending) =
        send_json(http.post(url).bearer_auth(&daemon.token).json(&json!({"args": {"message": message}}))).await?;
    if status != 202 {
        return Err(format!("gated run: HTTP {status}: {pending}"));
    }
    let id = pending["approval_id"].as_str().ok_or_else(|| format!("no approval id: {pending}"))?;
    let decision =
        if approve { json!({"approved": true}) } else { json!({"approved": false, "reason": "load campaign"}) };
    let decide = format!("{}/v1/action-approvals/{id}/decide", daemon.url);
    let (status, body) = send_json(http.post(decide).bearer_auth(&daemon.token).json(&decision)).await?;
    if status != 204 {
        return Err(format!("decide {id}: HTTP {status}: {body}"));
    }
    let result = format!("{}/v1/action-approvals/{id}/result", daemon.url);
    loop {
        let (status, view) = send_json(http.get(&result).bearer_auth(&daemon.token)).await?;
        if status != 200 {
            return Err(format!("result {id}: HTTP {status}: {view}"));
        }
        match (view["status"].as_str().unwrap_or_default(), approve) {
            ("completed", true) => return expect_echo(&view["result"], message),
            ("denied", false) if view["reason"] == "load campaign" => return Ok(()),
            // The decision is journaled before the 204: the entry is never pending again.
            ("approved" | "running", true) => tokio::time::sleep(APPROVAL_POLL).await,
            _ => return Err(format!("approval {id} (approved: {approve}) ended as {view}")),
        }
    }
}

/// A `tools/call` result of the echo tool: not an error, the message in its structured content.
fn expect_tool_echo(response: &Value, message: &str) -> Result<(), String> {
    let result = response.get("result").ok_or_else(|| format!("tools/call: {response}"))?;
    if result["isError"] == true {
        return Err(format!("tools/call is an error: {result}"));
    }
    expect_echo(&result["structuredContent"]["result"], message)
}

/// A minimal async MCP client of the daemon's `/mcp` (streamable HTTP): one session.
struct McpHttpClient {
    http: reqwest::Client,
    endpoint: String,
    token: String,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
}

impl McpHttpClient {
    async fn connect(http: reqwest::Client, daemon: &Daemon) -> Result<McpHttpClient, String> {
        let mut client = McpHttpClient {
            http,
            endpoint: format!("{}/mcp", daemon.url),
            token: daemon.token.clone(),
            session: None,
            protocol: None,
            next_id: 1,
        };
        let params = json!({"protocolVersion": MCP_VERSION, "capabilities": {}, "clientInfo": {"name": "load-campaign", "version": "1"}});
        let response = client.request("initialize", params).await?;
        client.protocol = response["result"]["protocolVersion"].as_str().map(str::to_string);
        let response = client.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        if response.status() != 202 {
            return Err(format!("notifications/initialized: HTTP {}", response.status()));
        }
        Ok(client)
    }

    async fn post(&self, message: &Value) -> Result<reqwest::Response, String> {
        let mut request = self
            .http
            .post(&self.endpoint)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(message);
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(protocol) = &self.protocol {
            request = request.header("mcp-protocol-version", protocol);
        }
        request.send().await.map_err(transport)
    }

    /// Sends a request; its response, from a JSON body or the SSE stream the POST opened.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await?;
        if !response.status().is_success() {
            return Err(format!("{method}: HTTP {}", response.status()));
        }
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap_or_default().to_string());
        }
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap_or_default().starts_with("application/json"));
        if json {
            return response.json::<Value>().await.map_err(transport);
        }
        let mut stream = response.bytes_stream();
        let mut pending = Vec::new();
        while let Some(chunk) = stream.next().await {
            pending.extend_from_slice(&chunk.map_err(transport)?);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let Some(data) = line.trim_end().strip_prefix("data:") else { continue };
                if let Ok(message) = serde_json::from_str::<Value>(data.trim())
                    && message["id"] == id
                {
                    return Ok(message);
                }
            }
        }
        Err(format!("{method}: the SSE stream ended without the response"))
    }
}

/// Which provider's streaming shape a gateway stream has.
#[derive(Clone, Copy)]
enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    fn path(self) -> &'static str {
        match self {
            Dialect::OpenAi => "/v1/chat/completions",
            Dialect::Anthropic => "/v1/messages",
        }
    }

    /// The events the upstream streams for the request marked `id`.
    fn events(self, id: &str) -> Vec<String> {
        let mut events: Vec<String> = (0..STREAM_EVENTS)
            .map(|n| match self {
                Dialect::OpenAi => format!(
                    "data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {n} \"}}}}]}}\n\n"
                ),
                Dialect::Anthropic => format!(
                    "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{id} token {n} \"}}}}\n\n"
                ),
            })
            .collect();
        events.push(match self {
            Dialect::OpenAi => "data: [DONE]\n\n".to_string(),
            Dialect::Anthropic => "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string(),
        });
        events
    }
}

/// A loopback LLM upstream: each request's stream names the `x-load-id` it was sent with.
async fn llm_upstream() -> String {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = |request: Request| async move {
        let dialect =
            if request.uri().path().starts_with("/v1/messages") { Dialect::Anthropic } else { Dialect::OpenAi };
        let id = request.headers().get("x-load-id").and_then(|v| v.to_str().ok()).unwrap_or("none").to_string();
        let _ = axum::body::to_bytes(request.into_body(), 1024 * 1024).await;
        let events = futures_util::stream::iter(dialect.events(&id)).then(|event| async move {
            tokio::time::sleep(EVENT_GAP).await;
            Ok::<_, std::io::Error>(Bytes::from(event))
        });
        Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(events))
            .unwrap()
    };
    let router = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

async fn gateway_stream(http: &reqwest::Client, daemon: &Daemon, dialect: Dialect, id: &str) -> Result<(), String> {
    let request = http
        .post(format!("{}{}", daemon.url, dialect.path()))
        .header("x-load-id", id)
        .header("content-type", "application/json")
        .body(
            json!({"model": "load", "stream": true, "max_tokens": 64, "messages": [{"role": "user", "content": id}]})
                .to_string(),
        );
    let request = match dialect {
        Dialect::OpenAi => request.bearer_auth("sk-load-campaign"),
        Dialect::Anthropic => {
            request.header("x-api-key", "sk-ant-load-campaign").header("anthropic-version", "2023-06-01")
        }
    };
    let response = request.send().await.map_err(transport)?;
    let status = response.status();
    let body = response.bytes().await.map_err(transport)?;
    if status != 200 {
        return Err(format!("{}: HTTP {status}: {}", dialect.path(), String::from_utf8_lossy(&body)));
    }
    if body != dialect.events(id).concat().as_bytes() {
        return Err(format!("{}: the stream for {id} differs: {}", dialect.path(), String::from_utf8_lossy(&body)));
    }
    Ok(())
}

/// One asynchronous client of `kind`, in a closed loop until the deadline.
async fn async_client(
    kind: Kind,
    index: usize,
    (http, daemon): (reqwest::Client, Daemon),
    mut mcp: Option<McpHttpClient>,
    recorder: Shared,
    deadline: Instant,
) {
    let mut n = 0usize;
    while Instant::now() < deadline {
        n += 1;
        let message = format!("{}-{index}-{n}", kind.name());
        let began = Instant::now();
        let operation = async {
            match kind {
                Kind::Run => plain_run(&http, &daemon, &message).await,
                Kind::GatedRun => gated_run(&http, &daemon, &message, n % 5 != 0).await,
                Kind::McpHttp => {
                    let mcp = mcp.as_mut().expect("an MCP session");
                    let response =
                        mcp.request("tools/call", json!({"name": PLAIN, "arguments": {"message": message}})).await?;
                    expect_tool_echo(&response, &message)
                }
                Kind::GatewayStream => {
                    let dialect = if (index + n) % 2 == 0 { Dialect::OpenAi } else { Dialect::Anthropic };
                    gateway_stream(&http, &daemon, dialect, &message).await
                }
                Kind::McpStdio => unreachable!("aileron-mcp clients are threads"),
            }
        };
        let outcome = tokio::time::timeout(OP_TIMEOUT, operation)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {OP_TIMEOUT:?}")));
        recorder.lock().unwrap().record(kind, began, outcome, n == 1);
    }
}

/// One `aileron-mcp` client (its own process), in a closed loop until the deadline. A session
/// that broke (the process exited, no reply within its timeout) is counted and ends the client.
fn stdio_client(index: usize, mut session: StdioSession, recorder: Shared, deadline: Instant) -> StdioSession {
    let mut n = 0usize;
    while Instant::now() < deadline {
        n += 1;
        let message = format!("{}-{index}-{n}", Kind::McpStdio.name());
        let began = Instant::now();
        let params = json!({"name": PLAIN, "arguments": {"message": message}});
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| session.request("tools/call", params))).map_err(|panic| {
                panic.downcast_ref::<String>().cloned().unwrap_or_else(|| "aileron-mcp session broke".into())
            });
        let broken = outcome.is_err();
        let outcome = outcome.and_then(|response| expect_tool_echo(&response, &message));
        recorder.lock().unwrap().record(Kind::McpStdio, began, outcome, n == 1);
        if broken {
            break;
        }
    }
    session
}

/// The daemon's RSS and descriptors, sampled every quarter bucket from the start of the load.
#[derive(Clone, Copy)]
struct Sample {
    at_s: f64,
    rss: u64,
    fds: usize,
}

fn sample_until(pid: i32, clock: Clock, stop: Arc<AtomicBool>) -> Vec<Sample> {
    let every = clock.bucket / 4;
    let mut samples = Vec::new();
    let mut next = clock.started;
    while !stop.load(Ordering::Relaxed) {
        let (rss, fds) = rss_and_fds(pid);
        samples.push(Sample { at_s: clock.started.elapsed().as_secs_f64(), rss, fds });
        next += every;
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10).min(every));
        }
    }
    samples
}

/// The sample nearest to `at_s`.
fn sample_at(samples: &[Sample], at_s: f64) -> Sample {
    *samples.iter().min_by(|a, b| (a.at_s - at_s).abs().total_cmp(&(b.at_s - at_s).abs())).unwrap()
}

fn ms(micros: u64) -> f64 {
    (micros as f64 / 10.0).round() / 100.0
}

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / MIB as f64 * 10.0).round() / 10.0
}

/// Per bucket and kind: (ops, p50 µs, p99 µs).
type BucketFigures = Vec<BTreeMap<Kind, (usize, u64, u64)>>;

fn bucket_figures(recorder: &Recorder) -> BucketFigures {
    (0..recorder.clock.buckets)
        .map(|bucket| {
            Kind::ALL
                .iter()
                .map(|kind| {
                    let mut latencies = recorder.latencies[kind][bucket].clone();
                    latencies.sort_unstable();
                    (*kind, (latencies.len(), percentile(&latencies, 50.0), percentile(&latencies, 99.0)))
                })
                .collect()
        })
        .collect()
}

#[test]
fn sixty_four_clients_mixing_every_kind_of_call_keep_rss_fds_and_latency_flat() {
    assert_eq!(Kind::ALL.iter().map(|kind| kind.clients()).sum::<usize>(), CLIENTS);
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(llm_upstream());
    let cli = Cli::new();
    let upstreams = [
        (aileron::platform::env::AILERON_ANTHROPIC_UPSTREAM, upstream.as_str()),
        (aileron::platform::env::AILERON_OPENAI_UPSTREAM, upstream.as_str()),
    ];
    let started = cli.run_with(&["daemon", "start"], &upstreams, None);
    assert!(started.status.success(), "daemon start: {}", String::from_utf8_lossy(&started.stderr));
    let hash = cli.install_guest("echo", &[]);
    cli.add_action(&ActionSpec { inputs: MESSAGE_INPUT, ..ActionSpec::new(PLAIN, "echo", &hash, "echo") });
    cli.add_action(&ActionSpec {
        inputs: MESSAGE_INPUT,
        approval: true,
        ..ActionSpec::new(GATED, "echo", &hash, "echo")
    });
    let daemon = Daemon::of(&cli.home);
    let http = http_client();

    // The MCP sessions open before the clock starts: every aileron-mcp starting at once, then
    // each initialized; the /mcp sessions likewise.
    let home = cli.home.to_str().unwrap().to_string();
    let mcp_binary = crate::campaign::binary("aileron-mcp");
    let mut stdio: Vec<StdioSession> = (0..Kind::McpStdio.clients())
        .map(|_| StdioSession::spawn_binary(&mcp_binary, &[("AILERON_HOME", home.as_str())]))
        .collect();
    for session in &mut stdio {
        let response = session.initialize(MCP_VERSION);
        assert_eq!(response["result"]["protocolVersion"], MCP_VERSION, "aileron-mcp initialize: {response}");
    }
    let http_sessions = runtime.block_on(futures_util::future::join_all(
        (0..Kind::McpHttp.clients()).map(|_| McpHttpClient::connect(http.clone(), &daemon)),
    ));
    let http_sessions: Vec<McpHttpClient> =
        http_sessions.into_iter().map(|session| session.expect("/mcp initialize")).collect();

    let (start_rss, start_fds) = rss_and_fds(daemon.pid);
    let clock = Clock::new(campaign_duration());
    let deadline = clock.deadline();
    let recorder: Shared = Arc::new(Mutex::new(Recorder::new(clock)));
    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop_sampling.clone();
        let pid = daemon.pid;
        std::thread::spawn(move || sample_until(pid, clock, stop))
    };
    let stdio_threads: Vec<_> = stdio
        .into_iter()
        .enumerate()
        .map(|(index, session)| {
            let recorder = recorder.clone();
            std::thread::spawn(move || stdio_client(index, session, recorder, deadline))
        })
        .collect();
    runtime.block_on(async {
        let mut tasks = Vec::new();
        let mut http_sessions = http_sessions.into_iter();
        for kind in Kind::ALL.into_iter().filter(|kind| *kind != Kind::McpStdio) {
            for index in 0..kind.clients() {
                let mcp = if kind == Kind::McpHttp { http_sessions.next() } else { None };
                tasks.push(tokio::spawn(async_client(
                    kind,
                    index,
                    (http.clone(), daemon.clone()),
                    mcp,
                    recorder.clone(),
                    deadline,
                )));
            }
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
    let sessions: Vec<StdioSession> = stdio_threads.into_iter().map(|thread| thread.join().unwrap()).collect();
    let ran_for = clock.started.elapsed();
    stop_sampling.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap();
    // Every client has gone: the aileron-mcp processes, and the pool of the asynchronous ones.
    drop(sessions);
    drop(http);
    let settle = Instant::now();
    let settled_fds = loop {
        let (_, fds) = rss_and_fds(daemon.pid);
        if fds <= start_fds + FD_SETTLED_SLACK || settle.elapsed() > Duration::from_secs(5) {
            break fds;
        }
        std::thread::sleep(Duration::from_millis(100));
    };

    let recorder = recorder.lock().unwrap();
    let duration_s = clock.duration.as_secs_f64();
    let warm_up_s = clock.warm_up_s(recorder.all_clients_in);
    let reference = sample_at(&samples, warm_up_s);
    let end = sample_at(&samples, duration_s);
    let peak_rss = samples.iter().map(|s| s.rss).max().unwrap_or(0);
    let peak_fds = samples.iter().map(|s| s.fds).max().unwrap_or(0);
    let rss_bound = ((reference.rss as f64 * RSS_GROWTH_RATIO) as u64).max(reference.rss + RSS_GROWTH_FLOOR);
    let fd_bound = reference.fds + FD_GROWTH;
    let figures = bucket_figures(&recorder);

    let mut report = Report::new("load");
    report.set("duration_s", duration_s);
    report.set("ran_for_s", (ran_for.as_secs_f64() * 10.0).round() / 10.0);
    report.set("bucket_s", clock.bucket.as_secs_f64());
    report.set("warm_up_s", warm_up_s);
    let all_in = recorder
        .all_clients_in
        .map(|at| (at.saturating_duration_since(clock.started).as_secs_f64() * 10.0).round() / 10.0);
    report.set("all_clients_in_s", all_in);
    report.set(
        "clients",
        Kind::ALL.iter().map(|k| (k.name().to_string(), k.clients().into())).collect::<serde_json::Map<_, _>>(),
    );
    report.set("aileron_mcp_processes", Kind::McpStdio.clients());
    let rss_figures = json!({"start": mib(start_rss), "after_warm_up": mib(reference.rss), "end": mib(end.rss), "peak": mib(peak_rss), "bound": mib(rss_bound)});
    report.set("daemon_rss_mib", rss_figures);
    // What the growth after the warm-up comes to per call made after it (a leak's signature).
    let calls_after_warm_up: usize = recorder
        .latencies
        .values()
        .flat_map(|buckets| buckets.iter().skip((warm_up_s / clock.bucket.as_secs_f64()).round() as usize))
        .map(Vec::len)
        .sum();
    let growth_per_call = (end.rss as f64 - reference.rss as f64) / calls_after_warm_up.max(1) as f64;
    report.set("rss_growth_bytes_per_call_after_warm_up", growth_per_call.round());
    let fd_figures = json!({"start": start_fds, "after_warm_up": reference.fds, "end": end.fds, "peak": peak_fds, "bound": fd_bound, "after_clients_left": settled_fds});
    report.set("daemon_fds", fd_figures);
    let mut ops = serde_json::Map::new();
    let mut rates = serde_json::Map::new();
    let mut latency = serde_json::Map::new();
    for kind in Kind::ALL {
        let mut all: Vec<u64> = recorder.latencies[&kind].iter().flatten().copied().collect();
        all.sort_unstable();
        ops.insert(kind.name().into(), all.len().into());
        rates.insert(kind.name().into(), (((all.len() as f64 / duration_s) * 10.0).round() / 10.0).into());
        let figures = json!({"p50": ms(percentile(&all, 50.0)), "p99": ms(percentile(&all, 99.0)), "max": ms(all.last().copied().unwrap_or(0))});
        latency.insert(kind.name().into(), figures);
    }
    report.set("ops", ops);
    report.set("ops_per_s", rates);
    report.set("latency_ms", latency);
    report.set(
        "errors",
        recorder.errors.iter().map(|(k, n)| (k.name().to_string(), (*n).into())).collect::<serde_json::Map<_, _>>(),
    );
    let buckets: Vec<Value> = figures
        .iter()
        .enumerate()
        .map(|(index, kinds)| {
            let at = sample_at(&samples, ((index + 1) as u32 * clock.bucket).as_secs_f64().min(duration_s));
            let per_kind: serde_json::Map<String, Value> = kinds
                .iter()
                .map(|(kind, (n, p50, p99))| (kind.name().to_string(), json!({"ops": n, "p50_ms": ms(*p50), "p99_ms": ms(*p99)})))
                .collect();
            json!({"from_s": (index as u32 * clock.bucket).as_secs_f64(), "rss_mib": mib(at.rss), "fds": at.fds, "latency": per_kind})
        })
        .collect();
    report.set("buckets", buckets);
    if let Ok(dir) = std::env::var("AILERON_CAMPAIGN_REPORT") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plot = Plot { clock, figures: &figures, samples: &samples, rss_bound, warm_up_s };
        std::fs::write(dir.join("load.svg"), plot.svg()).unwrap();
        report.set("plot", "load.svg");
    }
    report.finish();

    let errors: u64 = recorder.errors.values().sum();
    assert_eq!(errors, 0, "{errors} calls failed; the first:\n{}", recorder.first_errors.join("\n"));
    assert!(
        recorder.all_clients_in.is_some(),
        "only {} of the {CLIENTS} clients got a call through",
        recorder.clients_in
    );
    for kind in Kind::ALL {
        assert!(recorder.latencies[&kind].iter().any(|bucket| !bucket.is_empty()), "no {} completed", kind.name());
    }
    assert!(
        end.rss <= rss_bound,
        "the daemon's RSS grew from {:.1} MiB after the warm-up to {:.1} MiB (bound {:.1} MiB)",
        mib(reference.rss),
        mib(end.rss),
        mib(rss_bound)
    );
    assert!(
        end.fds <= fd_bound,
        "the daemon's open descriptors grew from {} after the warm-up to {} (bound {fd_bound})",
        reference.fds,
        end.fds
    );
    assert!(
        settled_fds <= start_fds + FD_SETTLED_SLACK,
        "the daemon held {settled_fds} descriptors after the clients left, {start_fds} before the load"
    );
    drop(runtime);
}

// ---------------------------------------------------------------------------------------------
// The plot: hand-written SVG, latency per kind (log scale) over RSS and descriptors.

struct Plot<'a> {
    clock: Clock,
    figures: &'a BucketFigures,
    samples: &'a [Sample],
    rss_bound: u64,
    warm_up_s: f64,
}

const WIDTH: f64 = 1160.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 820.0;
const LATENCY_TOP: f64 = 70.0;
const LATENCY_BOTTOM: f64 = 430.0;
const MEMORY_TOP: f64 = 510.0;
const MEMORY_BOTTOM: f64 = 690.0;
const HEIGHT: f64 = 760.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The first step of 1-2-5 × 10^k (or `steps`) giving at most `most` intervals over `span`.
fn nice_step(span: f64, most: f64, steps: &[f64]) -> f64 {
    let mut scale = 1.0;
    loop {
        for step in steps {
            if span / (step * scale) <= most {
                return step * scale;
            }
        }
        scale *= 10.0;
    }
}

fn polyline(points: &[(f64, f64)], color: &str, extra: &str) -> String {
    let points: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    format!("<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" {extra} points=\"{}\"/>\n", points.join(" "))
}

fn text(x: f64, y: f64, anchor: &str, extra: &str, content: &str) -> String {
    format!("<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" {extra}>{}</text>\n", escape(content))
}

/// A decade of the latency axis: `100 µs`, `1 ms`, `10 s`.
fn latency_label(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{} s", (ms / 1000.0).round())
    } else if ms >= 1.0 {
        format!("{} ms", ms.round())
    } else {
        format!("{} µs", (ms * 1000.0).round())
    }
}

impl Plot<'_> {
    fn x(&self, at_s: f64) -> f64 {
        LEFT + (at_s / self.clock.duration.as_secs_f64()).clamp(0.0, 1.0) * (RIGHT - LEFT)
    }

    fn svg(&self) -> String {
        let duration_s = self.clock.duration.as_secs_f64();
        let bucket_s = self.clock.bucket.as_secs_f64();
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
             font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        );
        svg += &text(
            WIDTH / 2.0,
            28.0,
            "middle",
            "font-size=\"17\" font-weight=\"bold\"",
            &format!("Aileron load campaign: {CLIENTS} clients for {duration_s:.0} s, one daemon"),
        );
        svg += &text(
            WIDTH / 2.0,
            48.0,
            "middle",
            "fill=\"#555\"",
            &format!(
                "latency per kind of call, p50 and p99 per {bucket_s:.0} s bucket (closed loop, no think time); shaded: warm-up"
            ),
        );

        // Warm-up shading, both panels.
        let warm = self.x(self.warm_up_s) - LEFT;
        for (top, bottom) in [(LATENCY_TOP, LATENCY_BOTTOM), (MEMORY_TOP, MEMORY_BOTTOM)] {
            svg += &format!(
                "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{warm:.1}\" height=\"{}\" fill=\"#f0f0f0\"/>\n",
                bottom - top
            );
        }

        // Time axis ticks and grid, both panels.
        let time_step = nice_step(duration_s, 10.0, &[1.0, 2.0, 5.0]);
        let mut tick = 0.0;
        while tick <= duration_s + 1e-9 {
            let x = self.x(tick);
            for (top, bottom) in [(LATENCY_TOP, LATENCY_BOTTOM), (MEMORY_TOP, MEMORY_BOTTOM)] {
                svg +=
                    &format!("<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#e4e4e4\"/>\n");
                svg += &text(x, bottom + 16.0, "middle", "", &format!("{tick}"));
            }
            tick += time_step;
        }
        for bottom in [LATENCY_BOTTOM, MEMORY_BOTTOM] {
            svg += &text((LEFT + RIGHT) / 2.0, bottom + 34.0, "middle", "", "time since the load started (s)");
        }

        svg += &self.latency_panel();
        svg += &self.memory_panel();
        svg += &self.legend();
        svg += "</svg>\n";
        svg
    }

    fn latency_panel(&self) -> String {
        let mut svg = String::new();
        let values: Vec<u64> = self
            .figures
            .iter()
            .flat_map(|b| b.values().filter(|(n, _, _)| *n > 0).flat_map(|(_, p50, p99)| [*p50, *p99]))
            .collect();
        let low_ms = values.iter().copied().min().unwrap_or(100).max(1) as f64 / 1000.0;
        let high_ms = values.iter().copied().max().unwrap_or(1000).max(1) as f64 / 1000.0;
        let low = low_ms.log10().floor();
        let high = high_ms.log10().ceil().max(low + 1.0);
        let y = |ms: f64| LATENCY_BOTTOM - (ms.max(1e-6).log10() - low) / (high - low) * (LATENCY_BOTTOM - LATENCY_TOP);
        let mut decade = low;
        while decade <= high + 1e-9 {
            let value = 10f64.powf(decade);
            let at = y(value);
            svg += &format!("<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{RIGHT}\" y2=\"{at:.1}\" stroke=\"#cfcfcf\"/>\n");
            svg += &text(LEFT - 6.0, at + 4.0, "end", "", &latency_label(value));
            if decade < high {
                for minor in [2.0, 5.0] {
                    let at = y(value * minor);
                    svg += &format!(
                        "<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{RIGHT}\" y2=\"{at:.1}\" stroke=\"#eeeeee\"/>\n"
                    );
                }
            }
            decade += 1.0;
        }
        svg += &format!(
            "<rect x=\"{LEFT}\" y=\"{LATENCY_TOP}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
            RIGHT - LEFT,
            LATENCY_BOTTOM - LATENCY_TOP
        );
        let middle = (LATENCY_TOP + LATENCY_BOTTOM) / 2.0;
        svg += &text(22.0, middle, "middle", &format!("transform=\"rotate(-90 22 {middle})\""), "latency (log scale)");
        let bucket_s = self.clock.bucket.as_secs_f64();
        for kind in Kind::ALL {
            for (which, dash) in [(1, ""), (2, "stroke-dasharray=\"6 4\"")] {
                let points: Vec<(f64, f64)> = self
                    .figures
                    .iter()
                    .enumerate()
                    .filter(|(_, bucket)| bucket[&kind].0 > 0)
                    .map(|(index, bucket)| {
                        let (_, p50, p99) = bucket[&kind];
                        let micros = if which == 1 { p50 } else { p99 };
                        let middle_s = ((index as f64 + 0.5) * bucket_s).min(self.clock.duration.as_secs_f64());
                        (self.x(middle_s), y(micros as f64 / 1000.0))
                    })
                    .collect();
                svg += &polyline(&points, kind.color(), dash);
                for (x, y) in &points {
                    svg += &format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{}\"/>\n", kind.color());
                }
            }
        }
        svg
    }

    fn memory_panel(&self) -> String {
        let mut svg = String::new();
        let peak_rss = self.samples.iter().map(|s| s.rss).max().unwrap_or(0).max(self.rss_bound);
        let rss_top = mib(peak_rss) * 1.1;
        let rss_step = nice_step(rss_top, 6.0, &[1.0, 2.0, 5.0]);
        let rss_top = (rss_top / rss_step).ceil() * rss_step;
        let fds_peak = self.samples.iter().map(|s| s.fds).max().unwrap_or(0) as f64;
        let fds_step = nice_step(fds_peak * 1.1, 6.0, &[1.0, 2.0, 5.0]);
        let fds_top = ((fds_peak * 1.1 / fds_step).ceil() * fds_step).max(fds_step);
        let height = MEMORY_BOTTOM - MEMORY_TOP;
        let y_rss = |bytes: u64| MEMORY_BOTTOM - mib(bytes) / rss_top * height;
        let y_fds = |fds: usize| MEMORY_BOTTOM - fds as f64 / fds_top * height;
        let mut tick = 0.0;
        while tick <= rss_top + 1e-9 {
            let at = MEMORY_BOTTOM - tick / rss_top * height;
            svg += &format!("<line x1=\"{LEFT}\" y1=\"{at:.1}\" x2=\"{RIGHT}\" y2=\"{at:.1}\" stroke=\"#e4e4e4\"/>\n");
            svg += &text(LEFT - 6.0, at + 4.0, "end", "", &format!("{tick}"));
            tick += rss_step;
        }
        let mut tick = 0.0;
        while tick <= fds_top + 1e-9 {
            let at = MEMORY_BOTTOM - tick / fds_top * height;
            svg += &text(RIGHT + 6.0, at + 4.0, "start", "fill=\"#666\"", &format!("{tick}"));
            tick += fds_step;
        }
        svg += &format!(
            "<rect x=\"{LEFT}\" y=\"{MEMORY_TOP}\" width=\"{}\" height=\"{height}\" fill=\"none\" stroke=\"#333\"/>\n",
            RIGHT - LEFT
        );
        let middle = (MEMORY_TOP + MEMORY_BOTTOM) / 2.0;
        svg += &text(22.0, middle, "middle", &format!("transform=\"rotate(-90 22 {middle})\""), "daemon RSS (MiB)");
        svg += &text(
            RIGHT + 46.0,
            middle,
            "middle",
            &format!("fill=\"#666\" transform=\"rotate(90 {} {middle})\"", RIGHT + 46.0),
            "open file descriptors",
        );
        let bound = y_rss(self.rss_bound);
        svg += &format!(
            "<line x1=\"{LEFT}\" y1=\"{bound:.1}\" x2=\"{RIGHT}\" y2=\"{bound:.1}\" stroke=\"#d62728\" stroke-dasharray=\"2 3\"/>\n"
        );
        svg += &text(
            RIGHT - 4.0,
            bound - 4.0,
            "end",
            "fill=\"#d62728\" font-size=\"11\" stroke=\"white\" stroke-width=\"4\" paint-order=\"stroke\"",
            "RSS bound after warm-up",
        );
        let fds: Vec<(f64, f64)> = self.samples.iter().map(|s| (self.x(s.at_s), y_fds(s.fds))).collect();
        svg += &polyline(&fds, "#888", "stroke-dasharray=\"6 4\"");
        let rss: Vec<(f64, f64)> = self.samples.iter().map(|s| (self.x(s.at_s), y_rss(s.rss))).collect();
        svg += &polyline(&rss, "#222", "");
        svg
    }

    fn legend(&self) -> String {
        let mut svg = String::new();
        let left = RIGHT + 80.0;
        let mut y = LATENCY_TOP + 8.0;
        svg += &text(left, y, "start", "font-weight=\"bold\"", "kind of call (clients)");
        for kind in Kind::ALL {
            y += 22.0;
            svg += &format!(
                "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"3\"/>\n",
                y - 4.0,
                left + 22.0,
                y - 4.0,
                kind.color()
            );
            svg += &text(left + 28.0, y, "start", "", &format!("{} ({})", kind.label(), kind.clients()));
        }
        y += 34.0;
        for (label, dash) in [("p50", ""), ("p99", "stroke-dasharray=\"6 4\"")] {
            svg += &format!(
                "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#333\" stroke-width=\"2\" {dash}/>\n",
                y - 4.0,
                left + 22.0,
                y - 4.0
            );
            svg += &text(left + 28.0, y, "start", "", label);
            y += 22.0;
        }
        let mut y = MEMORY_TOP + 8.0;
        for (label, color, dash) in
            [("RSS (left axis)", "#222", ""), ("descriptors (right axis)", "#888", "stroke-dasharray=\"6 4\"")]
        {
            svg += &format!(
                "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"{color}\" stroke-width=\"2\" {dash}/>\n",
                y - 4.0,
                left + 22.0,
                y - 4.0
            );
            svg += &text(left + 28.0, y, "start", "", label);
            y += 22.0;
        }
        svg
    }
}
