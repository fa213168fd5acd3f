//! The daemon the HTTP and MCP targets talk to: the real `AppState` and router (`daemon::app`)
//! on a temporary home, built once per process and driven with `tower::ServiceExt::oneshot`, as
//! the integration tests do. State carries over from one input to the next (a session started by
//! one body is there for the next), as it does in a running daemon.
//!
//! Three deviations from a real daemon keep a fuzzer on this machine and fast, and are the only
//! ones: the gateway's upstreams are a closed loopback port; `source` in the bodies of
//! `connectors/preview` and `connectors/install` is replaced by a missing path in the temporary
//! home (absent, the release is downloaded from GitHub; present, it names any file of the machine);
//! and the bodies of `vault/init` and `vault/unlock` are decoded into their type, not sent (every
//! well-formed one costs an Argon2id derivation over 64 MiB, which would be all the target measures).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use aileron::platform::home::Home;
use aileron::surfaces::daemon::Surface;
use aileron::surfaces::daemon::api::{ROUTES, Serve};
use aileron::surfaces::daemon::{AppState, StateOptions, app};
use aileron::wire::PassphraseBody;
use axum::body::Body;
use http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

/// The port the router believes it listens on (Host and Origin checks only).
const PORT: u16 = 47_124;
const TOKEN: &str = "fuzz-admin-token-0123456789abcdef";
/// Longest a request may take before the target reports a hang.
const REQUEST_BUDGET: Duration = Duration::from_secs(10);

struct Daemon {
    runtime: tokio::runtime::Runtime,
    router: Surface,
    temp: tempfile::TempDir,
    /// The MCP session the messages are sent in; opened on first use, again when it ends.
    mcp_session: Mutex<Option<String>>,
}

fn daemon() -> &'static Daemon {
    static DAEMON: OnceLock<Daemon> = OnceLock::new();
    DAEMON.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let temp = tempfile::tempdir().expect("a temporary directory");
        let home = Home::at(temp.path().join("home")).expect("a home");
        let mut options = StateOptions::new(TOKEN.into());
        options.listen_port = PORT;
        options.gateway_upstreams = Some(("http://127.0.0.1:9".into(), "http://127.0.0.1:9".into()));
        options.spawn_helper = Some(temp.path().join("no-spawn-helper"));
        options.spawn_user_home = Some(temp.path().join("user-home"));
        let router = runtime.block_on(async {
            let state: Arc<AppState> = AppState::open(home, options).expect("the daemon state opens");
            app(state)
        });
        Daemon { runtime, router, temp, mcp_session: Mutex::new(None) }
    })
}

/// A request as an authenticated client sends it.
fn request(method: &str, path: &str) -> http::request::Builder {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("content-type", "application/json")
}

/// Sends one request; `(status, content type, body)`. A handler that takes longer than
/// [`REQUEST_BUDGET`] is a finding.
fn send(daemon: &Daemon, request: Request<Body>) -> (StatusCode, String, Vec<u8>) {
    let what = format!("{} {}", request.method(), request.uri());
    daemon.runtime.block_on(async {
        let exchange = async {
            let response = daemon.router.clone().oneshot(request).await.expect("the router is infallible");
            let status = response.status();
            let content_type =
                response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
            let body = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024).await.expect("the body reads");
            (status, content_type, body.to_vec())
        };
        tokio::time::timeout(REQUEST_BUDGET, exchange)
            .await
            .unwrap_or_else(|_| panic!("{what} did not answer within {REQUEST_BUDGET:?}"))
    })
}

/// The routes that take a body: every app route but `GET`s, with its path parameters filled.
fn body_routes() -> &'static [(&'static str, String)] {
    static ROUTES_WITH_BODIES: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();
    ROUTES_WITH_BODIES.get_or_init(|| {
        ROUTES
            .iter()
            .filter(|route| matches!(route.serve, Serve::App(_)) && route.method != "GET")
            .map(|route| {
                let path =
                    route.path.replace("{name}", "fuzz").replace("{id}", "fuzz-id").replace("{*path}", "fuzz/secret");
                (route.method, path)
            })
            .collect()
    })
}

/// An error answer is the API's one error shape: `{"error": {"code", "message", "hint"?}}`.
fn check_error_body(what: &str, status: StatusCode, body: &[u8]) {
    let value: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| panic!("{what}: a {status} whose body is not JSON: {}", String::from_utf8_lossy(body)));
    let error = &value["error"];
    let shaped = error["code"].as_str().is_some_and(|c| !c.is_empty())
        && error["message"].as_str().is_some_and(|m| !m.trim().is_empty());
    // A failure envelope (a run that failed) is the other error shape the API answers.
    let envelope = value["class"].is_string() && value["message"].is_string();
    assert!(shaped || envelope, "{what}: a {status} without the error shape: {value}");
}

/// HTTP request bodies of every route that takes one, sent through the daemon's router with the
/// admin token. The first byte picks the route, the rest is the body. Nothing a client sends may
/// make the daemon answer 5xx, and every 4xx has the API's error shape.
pub fn http_body(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else { return };
    let routes = body_routes();
    let (method, path) = &routes[usize::from(pick) % routes.len()];
    if path == "/v1/vault/init" || path == "/v1/vault/unlock" {
        let _ = serde_json::from_slice::<PassphraseBody>(body);
        return;
    }
    let daemon = daemon();
    let mut body = body.to_vec();
    if path == "/v1/connectors/preview" || path == "/v1/connectors/install" {
        if let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(&body) {
            let missing = daemon.temp.path().join("no-such-package");
            object.insert("source".into(), Value::String(missing.display().to_string()));
            body = serde_json::to_vec(&object).expect("JSON values serialize");
        }
    }
    let what = format!("{method} {path}");
    let (status, _, answer) = send(daemon, request(method, path).body(Body::from(body)).expect("a request"));
    assert!(!status.is_server_error(), "{what}: {status}: {}", String::from_utf8_lossy(&answer));
    if status.is_client_error() {
        check_error_body(&what, status, &answer);
    }
}

/// Opens an MCP session (`initialize`, then `notifications/initialized`); its id.
fn open_mcp_session(daemon: &Daemon) -> String {
    let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"aileron-fuzz","version":"0"}}}"#;
    let exchange = mcp_request(None).body(Body::from(initialize)).expect("a request");
    let response = daemon.runtime.block_on(daemon.router.clone().oneshot(exchange)).expect("the router is infallible");
    assert_eq!(response.status(), StatusCode::OK, "initialize");
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("initialize answers a session id")
        .to_string();
    drop(daemon.runtime.block_on(axum::body::to_bytes(response.into_body(), 1024 * 1024)));
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _, _) = send(daemon, mcp_request(Some(&session)).body(Body::from(initialized)).expect("a request"));
    assert!(status.is_success(), "notifications/initialized: {status}");
    session
}

fn mcp_request(session: Option<&str>) -> http::request::Builder {
    let builder = request("POST", "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    match session {
        Some(session) => builder.header("mcp-session-id", session),
        None => builder,
    }
}

/// MCP JSON-RPC messages sent to the daemon's `/mcp` (streamable HTTP), one per input line (at
/// most eight), in one initialized session: what an agent sends. Nothing may answer 5xx, and a
/// streamed answer carries JSON in every `data:` line.
pub fn mcp_message(data: &[u8]) {
    let daemon = daemon();
    for message in data.split(|&b| b == b'\n').filter(|m| !m.is_empty()).take(8) {
        let session = {
            // A finding panics with the lock held; the slot itself is still sound.
            let mut slot = daemon.mcp_session.lock().unwrap_or_else(PoisonError::into_inner);
            slot.get_or_insert_with(|| open_mcp_session(daemon)).clone()
        };
        let request = mcp_request(Some(&session)).body(Body::from(message.to_vec())).expect("a request");
        let (status, content_type, answer) = send(daemon, request);
        let text = String::from_utf8_lossy(&answer);
        assert!(!status.is_server_error(), "POST /mcp: {status}: {text}");
        if status == StatusCode::NOT_FOUND {
            // The session ended; the next message opens another.
            *daemon.mcp_session.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        if content_type.starts_with("text/event-stream") {
            for data in text.lines().filter_map(|line| line.strip_prefix("data:")) {
                let data = data.trim();
                if !data.is_empty() {
                    assert!(serde_json::from_str::<Value>(data).is_ok(), "a streamed answer that is not JSON: {data}");
                }
            }
        }
    }
}
