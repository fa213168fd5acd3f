//! A small loopback server with the shape of GitHub's issues API. `aileron demo` uses it so the
//! demo runs offline; the test suite uses it as a real upstream that counts and records every
//! request it receives (method, path, headers).
//!
//! One source, compiled into three places by `#[path]` (the demo, the test suite, the benchmark):
//! each uses a different part of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};

/// One request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

#[derive(Clone, Default)]
pub struct Recorder {
    requests: Arc<Mutex<Vec<RecordedRequest>>>,
}

impl Recorder {
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().expect("recorder poisoned").clone()
    }

    pub fn count(&self) -> usize {
        self.requests.lock().expect("recorder poisoned").len()
    }

    fn record(&self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) {
        let request = RecordedRequest {
            method: method.to_string(),
            path_and_query: uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect(),
            body: body.to_vec(),
        };
        self.requests.lock().expect("recorder poisoned").push(request);
    }
}

/// A running fake upstream.
pub struct FakeGithub {
    pub addr: SocketAddr,
    pub recorder: Recorder,
    task: tokio::task::JoinHandle<()>,
}

impl FakeGithub {
    /// Binds 127.0.0.1 on an ephemeral port and serves until dropped.
    pub async fn start() -> std::io::Result<FakeGithub> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let recorder = Recorder::default();
        let app = router(recorder.clone());
        let task = tokio::spawn(async move {
            // TCP_NODELAY like every server here (`process::no_delay`), inline: this file is
            // also compiled into the tests and the benchmark, which have no `crate::platform::process`.
            let listener = axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
                let _ = stream.set_nodelay(true);
            });
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeGithub { addr, recorder, task })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:<port>`, as a manifest's `hosts` entry.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(recorder: Recorder) -> Router {
    Router::new()
        .route("/repos/{owner}/{repo}/issues", get(list_issues).post(create_issue))
        .route("/repos/{owner}/{repo}/issues/{number}", get(get_issue))
        .route("/redirect", get(redirect))
        .route("/big", get(big))
        .route("/status/{code}", get(status))
        .route("/slow/{ms}", get(slow))
        .route("/echo", any(echo))
        .layer(axum::middleware::from_fn_with_state(recorder.clone(), record))
        .with_state(recorder)
}

async fn record(
    State(recorder): State<Recorder>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 16 * 1024 * 1024).await.unwrap_or_default();
    recorder.record(&parts.method, &parts.uri, &parts.headers, &bytes);
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes))).await
}

fn issue(owner: &str, repo: &str, number: u64, title: &str) -> Value {
    json!({
        "number": number,
        "title": title,
        "state": "open",
        "html_url": format!("https://github.com/{owner}/{repo}/issues/{number}"),
        "user": { "login": "octocat" },
        "body": "Filed from the Aileron demo upstream.",
    })
}

const TITLES: [&str; 3] =
    ["Audit log rolls at UTC midnight", "Document the connector SDK", "Approval page should update live"];

async fn list_issues(Path((owner, repo)): Path<(String, String)>) -> Response {
    if owner == "unavailable" {
        let body = axum::Json(json!({ "message": "Service Unavailable" }));
        return (StatusCode::SERVICE_UNAVAILABLE, body).into_response();
    }
    let issues: Vec<Value> =
        TITLES.iter().enumerate().map(|(i, title)| issue(&owner, &repo, i as u64 + 1, title)).collect();
    axum::Json(issues).into_response()
}

async fn get_issue(Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    match TITLES.get((number as usize).wrapping_sub(1)) {
        Some(title) => axum::Json(issue(&owner, &repo, number, title)).into_response(),
        None => (StatusCode::NOT_FOUND, axum::Json(json!({ "message": "Not Found" }))).into_response(),
    }
}

async fn create_issue(
    Path((owner, repo)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if !headers.contains_key("authorization") {
        return (StatusCode::UNAUTHORIZED, axum::Json(json!({ "message": "Requires authentication" }))).into_response();
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let title = request["title"].as_str().unwrap_or("untitled");
    (StatusCode::CREATED, axum::Json(issue(&owner, &repo, 4, title))).into_response()
}

/// A redirect to a host no manifest declares; connectors must not be able to follow it. The
/// target is also written in the body, since the guest ABI exposes no response headers.
async fn redirect() -> Response {
    const TARGET: &str = "http://evil.example/collect";
    (StatusCode::FOUND, [("location", TARGET)], TARGET).into_response()
}

/// 9 MiB: above the 8 MiB response cap.
async fn big() -> Response {
    vec![b'x'; 9 * 1024 * 1024].into_response()
}

async fn status(Path(code): Path<u16>) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    (status, axum::Json(json!({ "message": format!("status {code}") }))).into_response()
}

/// Answers after `ms` milliseconds (the request is recorded on arrival): lets tests crash the
/// daemon while a connector call is in flight.
async fn slow(Path(ms): Path<u64>) -> Response {
    tokio::time::sleep(std::time::Duration::from_millis(ms.min(30_000))).await;
    axum::Json(json!({ "slept_ms": ms })).into_response()
}

/// Returns what the upstream received, except credential headers (so a guest reading the
/// response can never learn a secret through it).
async fn echo(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    let names: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
    axum::Json(json!({ "method": method.as_str(), "uri": uri.to_string(), "header_names": names })).into_response()
}
