//! Golden tests of the LLM gateway over a real socket: the bytes a client receives through the
//! gateway equal the bytes the upstream sent, for each provider's streaming shape, errors and
//! large bodies; each SSE event is delivered before the upstream sends the next one (no
//! buffering); requests arrive upstream byte-for-byte with end-to-end headers only.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aileron::platform::home::Home;
use aileron::surfaces::daemon::{AppState, StateOptions, app};
use aileron_core::sha256::Sha256;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::Response;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tower::ServiceExt as _;

/// What the scripted upstream answers: status, headers, and body chunks released one at a time.
#[derive(Clone)]
struct Script {
    status: u16,
    headers: Vec<(&'static str, &'static str)>,
    chunks: Vec<Vec<u8>>,
    /// When set, chunk N+1 is sent only after the test acknowledges chunk N.
    paced: bool,
}

/// Method, path and query, headers, body.
type SeenRequest = (String, String, Vec<(String, String)>, Vec<u8>);

#[derive(Clone, Default)]
struct Seen {
    requests: Arc<Mutex<Vec<SeenRequest>>>,
}

struct Upstream {
    addr: SocketAddr,
    seen: Seen,
    acks: mpsc::UnboundedSender<()>,
}

async fn upstream(script: Script) -> Upstream {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Seen::default();
    let (acks, ack_rx) = mpsc::unbounded_channel::<()>();
    let ack_rx = Arc::new(tokio::sync::Mutex::new(ack_rx));
    let recorded = seen.clone();
    let handler = move |request: Request| {
        let (script, recorded, ack_rx) = (script.clone(), recorded.clone(), ack_rx.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, 64 * 1024 * 1024).await.unwrap();
            let headers = parts
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            let path = parts.uri.path_and_query().unwrap().to_string();
            recorded.requests.lock().unwrap().push((parts.method.to_string(), path, headers, bytes.to_vec()));
            let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(1);
            tokio::spawn(async move {
                let mut acks = ack_rx.lock().await;
                for chunk in script.chunks {
                    if tx.send(Ok(Bytes::from(chunk))).await.is_err() {
                        return;
                    }
                    if script.paced && tokio::time::timeout(Duration::from_secs(5), acks.recv()).await.is_err() {
                        return; // the client never saw the chunk: the test fails on its side
                    }
                }
            });
            let mut builder = Response::builder().status(script.status);
            for (name, value) in script.headers {
                builder = builder.header(name, value);
            }
            builder.body(Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx))).unwrap()
        }
    };
    let router = axum::Router::new().fallback(handler);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    Upstream { addr, seen, acks }
}

/// A daemon serving `app()` on a real socket with the gateway pointed at `upstream`.
async fn daemon(anthropic: String, openai: String) -> (tempfile::TempDir, String) {
    let (temp, url, _) = daemon_with_state(anthropic, openai).await;
    (temp, url)
}

/// The same, also returning the daemon's state (to lock its vault).
async fn daemon_with_state(anthropic: String, openai: String) -> (tempfile::TempDir, String, Arc<AppState>) {
    let (temp, listener, state) = gateway_state(anthropic, openai).await;
    let addr = listener.local_addr().unwrap();
    let served = state.clone();
    tokio::spawn(
        async move { axum::serve(aileron::platform::process::no_delay(listener), app(served)).await.unwrap() },
    );
    (temp, format!("http://{addr}"), state)
}

/// A daemon's state on a fresh home with the gateway pointed at the upstreams, and the listener
/// it is to be served on.
async fn gateway_state(
    anthropic: String,
    openai: String,
) -> (tempfile::TempDir, tokio::net::TcpListener, Arc<AppState>) {
    let temp = tempfile::tempdir().unwrap();
    let home = Home::at(temp.path().join("home")).unwrap();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let mut options = StateOptions::new("gateway-test-token".into());
    options.listen_port = listener.local_addr().unwrap().port();
    options.gateway_upstreams = Some((anthropic, openai));
    (temp, listener, AppState::open(home, options).unwrap())
}

fn sse(events: &[&str]) -> Vec<Vec<u8>> {
    events.iter().map(|e| e.as_bytes().to_vec()).collect()
}

const ANTHROPIC_EVENTS: [&str; 7] = [
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"list_issues\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"owner\\\": \\\"ac\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"me\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];

const OPENAI_CHAT_EVENTS: [&str; 4] = [
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"list_issues\",\"arguments\":\"\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"owner\\\":\\\"acme\\\"}\"}}]}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
    "data: [DONE]\n\n",
];

const RESPONSES_EVENTS: [&str; 3] = [
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\"}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\"}}\n\n",
];

/// Streams `path` through the gateway and checks each event arrives before the next is sent.
async fn paced_golden(path: &str, events: &[&str]) {
    let script = Script {
        status: 200,
        headers: vec![("content-type", "text/event-stream"), ("request-id", "req_golden")],
        chunks: sse(events),
        paced: true,
    };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (_temp, gateway) = daemon(base.clone(), base).await;
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{gateway}{path}"))
        .header("x-api-key", "sk-ant-user-key")
        .header("content-type", "application/json")
        .body(r#"{"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["request-id"], "req_golden", "upstream headers come back");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream();
    let mut received = Vec::new();
    for (index, event) in events.iter().enumerate() {
        // The upstream has sent exactly this event and waits for our ack: a buffering proxy
        // would hold it back and this read would time out.
        while received.len() < events[..=index].iter().map(|e| e.len()).sum::<usize>() {
            let chunk = tokio::time::timeout(Duration::from_secs(3), stream.next())
                .await
                .unwrap_or_else(|_| panic!("{path}: event {index} was not delivered while the upstream waited"))
                .expect("stream ended early")
                .unwrap();
            received.extend_from_slice(&chunk);
        }
        assert!(received.ends_with(event.as_bytes()), "{path}: event {index} arrived intact");
        up.acks.send(()).unwrap();
    }
    assert!(stream.next().await.is_none(), "nothing after the last event");
    assert_eq!(received, events.concat().into_bytes(), "{path}: byte-for-byte");
}

#[tokio::test]
async fn anthropic_streams_arrive_event_by_event_and_byte_for_byte() {
    paced_golden("/v1/messages?beta=true", &ANTHROPIC_EVENTS).await;
}

#[tokio::test]
async fn openai_chat_streams_arrive_event_by_event_and_byte_for_byte() {
    paced_golden("/v1/chat/completions", &OPENAI_CHAT_EVENTS).await;
}

#[tokio::test]
async fn responses_streams_arrive_event_by_event_and_byte_for_byte() {
    paced_golden("/v1/responses", &RESPONSES_EVENTS).await;
}

/// An upstream answering `{}` as JSON, and a daemon whose gateway points both providers at it.
async fn json_upstream_behind_a_daemon() -> (Upstream, tempfile::TempDir, String) {
    let script = Script {
        status: 200,
        headers: vec![("content-type", "application/json")],
        chunks: vec![b"{}".to_vec()],
        paced: false,
    };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (temp, gateway) = daemon(base.clone(), base).await;
    (up, temp, gateway)
}

/// `/v1/models` is both providers' path: an Anthropic client's listing (it sends
/// `anthropic-version`, with the user's Anthropic key) goes to the Anthropic upstream, an OpenAI
/// client's to OpenAI's — routed by path alone, the Anthropic key went to the OpenAI upstream.
#[tokio::test]
async fn model_listings_go_to_the_provider_whose_client_asks() {
    let script = || Script {
        status: 200,
        headers: vec![("content-type", "application/json")],
        chunks: vec![b"{}".to_vec()],
        paced: false,
    };
    let (anthropic, openai) = (upstream(script()).await, upstream(script()).await);
    let (_temp, gateway) = daemon(format!("http://{}", anthropic.addr), format!("http://{}", openai.addr)).await;
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    let listed = client
        .get(format!("{gateway}/v1/models?limit=20"))
        .header("x-api-key", "sk-ant-users-anthropic-key")
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let listed = client.get(format!("{gateway}/v1/models")).bearer_auth("sk-users-openai-key").send().await.unwrap();
    assert_eq!(listed.status(), 200);
    let seen_by = |up: &Upstream| {
        up.seen
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|(_, path, headers, _)| (path.clone(), headers.clone()))
            .collect::<Vec<_>>()
    };
    let (at_anthropic, at_openai) = (seen_by(&anthropic), seen_by(&openai));
    assert_eq!(at_anthropic.len(), 1, "{at_anthropic:?}");
    assert_eq!(at_anthropic[0].0, "/v1/models?limit=20");
    assert!(at_anthropic[0].1.iter().any(|(n, v)| n == "x-api-key" && v == "sk-ant-users-anthropic-key"));
    assert_eq!(at_openai.len(), 1, "{at_openai:?}");
    assert!(
        at_openai.iter().all(|(_, headers)| !headers.iter().any(|(_, v)| v.contains("sk-ant-"))),
        "the Anthropic key never reaches OpenAI"
    );
}

/// The gateway is served ahead of the router, so its admission is its own: a web page that
/// rebinds a name to 127.0.0.1 (foreign `Host`), or posts from its own origin, must not reach the
/// upstream with whatever the browser attaches, on any gateway path or method; the daemon's own
/// Host and Origin do, each answer carrying an `X-Request-ID`.
#[tokio::test]
async fn gateway_paths_refuse_foreign_hosts_and_origins_before_the_upstream() {
    let (up, _temp, gateway) = json_upstream_behind_a_daemon().await;
    let port = gateway.rsplit(':').next().unwrap().to_string();
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    let own_host = format!("127.0.0.1:{port}");
    let own_origin = format!("http://localhost:{port}");
    let other_port = format!("127.0.0.1:{}", port.parse::<u16>().unwrap() - 1);
    let cases = [
        ("POST", "/v1/messages", "evil.example", None, 403),
        ("POST", "/v1/chat/completions", "evil.example:80", None, 403),
        ("GET", "/v1/models", &*other_port, None, 403),
        ("POST", "/v1/responses", &*own_host, Some("http://evil.example"), 403),
        ("POST", "/v1/messages/count_tokens", &*own_host, Some("null"), 403),
        ("HEAD", "/", "attacker.example", None, 403),
        ("POST", "/v1/chat/completions", &*own_host, None, 200),
        ("POST", "/v1/messages", &*own_host, Some(&*own_origin), 200),
        ("HEAD", "/", &*own_host, None, 200),
    ];
    let mut proxied = 0;
    for (method, path, host, origin, expected) in cases {
        let mut request =
            client.request(method.parse().unwrap(), format!("{gateway}{path}")).header("host", host).body("{}");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), expected, "{method} {path} with Host {host}, Origin {origin:?}");
        assert!(response.headers().contains_key("x-request-id"), "{method} {path}");
        // Only an admitted request reaches the upstream (`HEAD /` is the daemon's own answer).
        proxied += usize::from(expected == 200 && path != "/");
        assert_eq!(
            up.seen.requests.lock().unwrap().len(),
            proxied,
            "{method} {path} with Host {host}, Origin {origin:?}"
        );
    }
}

#[tokio::test]
async fn requests_go_upstream_unchanged_except_hop_by_hop_headers() {
    let (up, _temp, gateway) = json_upstream_behind_a_daemon().await;
    aileron::platform::process::install_crypto_provider();
    let body: Vec<u8> = (0..5 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let response = reqwest::Client::new()
        .post(format!("{gateway}/v1/messages?beta=true&x=1%202"))
        .header("x-api-key", "sk-ant-user-key")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "tools-2024-05-16,prompt-caching")
        .header("authorization", "Bearer user-oauth")
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "dropped")
        .header("te", "trailers")
        .header("x-custom", "kept")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let seen = up.seen.requests.lock().unwrap().clone();
    let (method, path, headers, received) = &seen[0];
    assert_eq!(method, "POST");
    assert_eq!(path, "/v1/messages?beta=true&x=1%202");
    assert_eq!(Sha256::digest(received), Sha256::digest(&body), "body bytes unchanged");
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    assert_eq!(header("x-api-key"), Some("sk-ant-user-key"));
    assert_eq!(header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(header("anthropic-beta"), Some("tools-2024-05-16,prompt-caching"));
    assert_eq!(header("authorization"), Some("Bearer user-oauth"));
    assert_eq!(header("x-custom"), Some("kept"));
    assert_eq!(header("content-length"), Some(&*body.len().to_string()));
    for dropped in ["x-hop", "te", "connection"] {
        assert_eq!(header(dropped), None, "{dropped} is hop-by-hop");
    }
    assert_ne!(header("host"), Some(gateway.trim_start_matches("http://")), "Host is the upstream's");
}

/// A key that gets a request the vault's provider key (a session's gateway key, or the daemon
/// token) is Aileron's own: it never goes upstream, in whichever header it came, whether or not
/// the vault holds a key for that provider (the re-attack of 2026-12-05, L2: the OpenAI path sent
/// it on in `x-api-key`). A caller's own provider key still goes as it came.
#[tokio::test]
async fn the_key_that_got_the_grant_never_goes_upstream() {
    let (up, _temp, gateway) = json_upstream_behind_a_daemon().await;
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    for path in ["/v1/chat/completions", "/v1/messages"] {
        let response = client
            .post(format!("{gateway}{path}"))
            .header("x-api-key", "gateway-test-token")
            .header("authorization", "Bearer gateway-test-token")
            .header("anthropic-version", "2023-06-01")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    let own = client.post(format!("{gateway}/v1/chat/completions")).bearer_auth("sk-users-own").body("{}");
    assert_eq!(own.send().await.unwrap().status(), 200);
    // The eighteenth re-attack: an Aileron token in `Authorization` beside any `x-api-key` (the
    // daemon token, a session's token) was not looked at, and went upstream as it came.
    let started = client
        .post(format!("{gateway}/v1/sessions"))
        .bearer_auth("gateway-test-token")
        .json(&serde_json::json!({"agent": "claude"}))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 201);
    let session_token = started.json::<serde_json::Value>().await.unwrap()["token"].as_str().unwrap().to_string();
    for token in ["gateway-test-token", session_token.as_str()] {
        let beside = client
            .post(format!("{gateway}/v1/messages"))
            .header("x-api-key", "sk-ant-users-own")
            .bearer_auth(token)
            .header("anthropic-version", "2023-06-01")
            .body("{}");
        assert_eq!(beside.send().await.unwrap().status(), 200);
    }
    let seen = up.seen.requests.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    for (_, path, headers, _) in seen.iter().filter(|(_, path, _, _)| path != "/v1/sessions") {
        let ours = headers
            .iter()
            .find(|(_, value)| value.contains("gateway-test-token") || value.contains(session_token.as_str()));
        assert_eq!(ours, None, "{path}: an Aileron token went upstream");
    }
    let header = |name: &str| seen[2].2.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(header("authorization").as_deref(), Some("Bearer sk-users-own"));
    let beside_session = |name: &str| seen[4].2.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(
        beside_session("x-api-key").as_deref(),
        Some("sk-ant-users-own"),
        "the caller's own key goes as it came"
    );
}

/// The sixteenth re-attack's R4: an upstream that echoes the request's headers handed the vault's
/// provider key to the caller. Echoes of it (whole, split across two pieces, base64) are redacted
/// in the body and the headers, and every SSE event still arrives as soon as it is sent: the
/// redaction holds back only a tail that could still become an echo, never the line break that
/// ends an event. No encoding is asked for; an answer encoded anyway is refused.
#[tokio::test]
async fn echoes_of_the_vaults_key_are_redacted_and_each_event_still_arrives_as_it_comes() {
    use base64::Engine as _;
    const KEY: &str = "sk-ant-api03-VAULT-KEY-0123456789abcdef";
    let chunks = vec![
        b"event: ping\ndata: {}\n\n".to_vec(),
        format!("event: echo\ndata: {{\"key\":\"{}", &KEY[..10]).into_bytes(),
        format!("{}\"}}\n\n", &KEY[10..]).into_bytes(),
        format!("event: echo\ndata: {{\"b64\":\"{}\"}}\n\n", base64::engine::general_purpose::STANDARD.encode(KEY))
            .into_bytes(),
    ];
    let headers = vec![("content-type", "text/event-stream"), ("x-echo", KEY)];
    let up = upstream(Script { status: 200, headers, chunks: chunks.clone(), paced: true }).await;
    let gzip = upstream(Script {
        status: 200,
        headers: vec![("content-type", "application/json"), ("content-encoding", "gzip")],
        chunks: vec![b"not really gzip".to_vec()],
        paced: false,
    })
    .await;
    let (_temp, gateway, state) =
        daemon_with_state(format!("http://{}", up.addr), format!("http://{}", gzip.addr)).await;
    let vault = state.services.vault.clone();
    tokio::task::spawn_blocking(move || {
        vault.init(b"gateway echo passphrase")?;
        for provider in aileron::dataplane::gateway::Provider::ALL {
            vault.put(aileron::stores::vault::llm_key_path(provider), Default::default(), KEY.as_bytes())?;
        }
        Ok::<_, aileron::stores::vault::VaultAccessError>(())
    })
    .await
    .unwrap()
    .unwrap();
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    let mut response = client
        .post(format!("{gateway}/v1/messages"))
        .header("x-api-key", "gateway-test-token")
        .header("anthropic-version", "2023-06-01")
        .header("accept-encoding", "gzip, br")
        .body(r#"{"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-echo"], "[REDACTED]");
    // The first event whole, before the upstream sends anything more.
    let first = response.chunk().await.unwrap().unwrap();
    assert_eq!(&first[..], &chunks[0][..], "an event waited on the redaction");
    up.acks.send(()).unwrap();
    let mut rest = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
        let _ = up.acks.send(());
    }
    let rest = String::from_utf8(rest).unwrap();
    assert_eq!(
        rest, "event: echo\ndata: {\"key\":\"[REDACTED]\"}\n\nevent: echo\ndata: {\"b64\":\"[REDACTED]\"}\n\n",
        "echoes of the key are redacted, the events kept"
    );
    let seen = up.seen.requests.lock().unwrap().clone();
    let header = |name: &str| seen[0].2.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(header("x-api-key").as_deref(), Some(KEY), "the vault's key went upstream");
    assert_eq!(header("accept-encoding").as_deref(), Some("identity"), "no encoding is asked for");
    // An answer encoded anyway could hide an echo: refused in the provider's shape.
    let encoded = client
        .post(format!("{gateway}/v1/chat/completions"))
        .bearer_auth("gateway-test-token")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(encoded.status(), 502);
    let body = encoded.text().await.unwrap();
    assert!(body.contains("server_error") && !body.contains(KEY), "{body}");
}

/// A daemon whose gateway reaches an upstream answering `{}` with `headers`: the upstream, the
/// daemon's home, the upstream's URL and the gateway's.
async fn daemon_before_answering(
    headers: Vec<(&'static str, &'static str)>,
) -> (Upstream, tempfile::TempDir, String, String) {
    let up = upstream(Script { status: 200, headers, chunks: vec![b"{}".to_vec()], paced: false }).await;
    let base = format!("http://{}", up.addr);
    let (temp, gateway) = daemon(base.clone(), base.clone()).await;
    (up, temp, base, gateway)
}

/// The daemon's own server (`connections::serve`, as `aileron daemon run` serves) closes a
/// connection that has not sent a whole head within its header-read timeout: a fresh one that
/// sends nothing, and a kept-alive one trickling its next head after an answer; never one whose
/// answer is still streaming, however long the stream stays quiet between events.
#[tokio::test]
async fn the_daemons_server_closes_connections_slow_to_send_a_head_and_never_a_quiet_stream() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let timeout = Duration::from_millis(800);
    let events = &OPENAI_CHAT_EVENTS[..2];
    let script =
        Script { status: 200, headers: vec![("content-type", "text/event-stream")], chunks: sse(events), paced: true };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (_temp, listener, state) = gateway_state(base.clone(), base).await;
    let addr = listener.local_addr().unwrap();
    let serving = aileron::surfaces::daemon::connections::serve_with_head_timeout(
        listener,
        app(state),
        aileron::surfaces::daemon::connections::Peers::OwnUser,
        std::future::pending(),
        timeout,
    );
    tokio::spawn(serving);

    // A stream quiet for three timeouts between two events keeps its connection.
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .body(r#"{"stream":true}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut received = Vec::new();
    while received.len() < events[0].len() {
        received.extend_from_slice(&stream.next().await.expect("the first event").unwrap());
    }
    tokio::time::sleep(timeout * 3).await;
    up.acks.send(()).unwrap();
    while received.len() < events.concat().len() {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("the second event");
        received.extend_from_slice(&chunk.expect("the stream was cut while quiet").unwrap());
    }
    up.acks.send(()).unwrap();
    assert_eq!(received, events.concat().into_bytes());
    assert!(stream.next().await.is_none());

    // A fresh connection that sends nothing is closed after the timeout.
    let opened = tokio::time::Instant::now();
    let mut fresh = tokio::net::TcpStream::connect(addr).await.unwrap();
    let read = tokio::time::timeout(timeout * 4, fresh.read(&mut [0u8; 1])).await.expect("closed without a head");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(opened.elapsed() >= timeout, "closed after {:?}, before its timeout", opened.elapsed());

    // A kept-alive connection that was answered, then trickles its next head, is closed after
    // the timeout, counted from its answer.
    let mut kept = tokio::net::TcpStream::connect(addr).await.unwrap();
    kept.write_all(format!("GET /v1/health HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while !answer.ends_with(b"}") {
        let mut chunk = [0u8; 1024];
        let read = kept.read(&mut chunk).await.unwrap();
        assert!(read > 0, "closed before answering: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..read]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    let answered = tokio::time::Instant::now();
    let trickled = trickle_until_closed(kept, b"GET /v1/health HTTP/1.1\r\nx-slow: ", timeout / 8);
    let closed = tokio::time::timeout(timeout * 4, trickled).await.expect("a trickling head is closed");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert!(answered.elapsed() >= timeout, "closed {:?} after its answer, before its timeout", answered.elapsed());
}

/// The upstream's own `Connection` header names headers of its connection only: they stay there.
#[tokio::test]
async fn responses_come_back_without_the_upstreams_hop_by_hop_headers() {
    let (_up, _temp, _, gateway) = daemon_before_answering(vec![
        ("content-type", "application/json"),
        ("connection", "keep-alive, X-Upstream-Hop"),
        ("x-upstream-hop", "dropped"),
        ("keep-alive", "timeout=5"),
        ("x-kept", "kept"),
    ])
    .await;
    let proxied =
        reqwest::Client::new().post(format!("{gateway}/v1/chat/completions")).body("{}").send().await.unwrap();
    assert_eq!(proxied.status(), 200);
    assert_eq!(proxied.headers().get("x-kept").map(|v| v.to_str().unwrap()), Some("kept"));
    assert_eq!(proxied.headers().get("x-upstream-hop"), None, "listed in the upstream's Connection header");
    assert_eq!(proxied.headers().get("keep-alive"), None, "hop-by-hop");
    assert_eq!(proxied.text().await.unwrap(), "{}");
}

#[tokio::test]
async fn the_client_gets_the_upstreams_headers_including_its_request_id() {
    let (_up, _temp, base, gateway) = daemon_before_answering(vec![
        ("content-type", "application/json"),
        ("x-request-id", "req_upstream_123"),
        ("openai-processing-ms", "42"),
        ("x-ratelimit-remaining-tokens", "999"),
        ("set-cookie", "__cf_bm=abc; path=/"),
    ])
    .await;
    let client = reqwest::Client::new();
    let headers = |response: &reqwest::Response| {
        let mut list: Vec<(String, String)> = response
            .headers()
            .iter()
            .filter(|(name, _)| !["date", "connection", "keep-alive", "transfer-encoding"].contains(&name.as_str()))
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_string()))
            .collect();
        list.sort();
        list
    };
    let direct = client.post(format!("{base}/v1/chat/completions")).body("{}").send().await.unwrap();
    let proxied = client.post(format!("{gateway}/v1/chat/completions")).body("{}").send().await.unwrap();
    assert_eq!(headers(&proxied), headers(&direct), "nothing added, dropped or replaced");
    assert_eq!(proxied.headers()["x-request-id"], "req_upstream_123");
}

#[tokio::test]
async fn upstream_errors_and_large_bodies_come_back_unchanged() {
    let error_body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#.to_vec();
    let script = Script {
        status: 429,
        headers: vec![("content-type", "application/json"), ("retry-after", "7")],
        chunks: vec![error_body.clone()],
        paced: false,
    };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (_temp, gateway) = daemon(base.clone(), base).await;
    aileron::platform::process::install_crypto_provider();
    let response = reqwest::Client::new().post(format!("{gateway}/v1/messages")).body("{}").send().await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.bytes().await.unwrap().to_vec(), error_body);

    let big: Vec<u8> = (0..12 * 1024 * 1024).map(|i| (i % 253) as u8).collect();
    let chunks: Vec<Vec<u8>> = big.chunks(64 * 1024).map(|c| c.to_vec()).collect();
    let up = upstream(Script {
        status: 200,
        headers: vec![("content-type", "application/octet-stream")],
        chunks,
        paced: false,
    })
    .await;
    let base = format!("http://{}", up.addr);
    let (_temp, gateway) = daemon(base.clone(), base).await;
    let response = reqwest::Client::new().get(format!("{gateway}/v1/models")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(Sha256::digest(response.bytes().await.unwrap()), Sha256::digest(&big), "12 MiB body unchanged");
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_in_the_providers_shape_and_no_token_is_needed() {
    let dead = "http://127.0.0.1:1".to_string();
    let (_temp, gateway) = daemon(dead.clone(), dead).await;
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::Client::new();
    let anthropic = client.post(format!("{gateway}/v1/messages")).body("{}").send().await.unwrap();
    assert_eq!(anthropic.status(), 502);
    let body: serde_json::Value = anthropic.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    let openai = client.post(format!("{gateway}/v1/chat/completions")).body("{}").send().await.unwrap();
    assert_eq!(openai.status(), 502);
    let body: serde_json::Value = openai.json().await.unwrap();
    assert_eq!(body["error"]["type"], "server_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("could not be reached"));

    let probe = client.head(format!("{gateway}/")).send().await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK.as_u16());
    let other = client.get(format!("{gateway}/v1/actions")).send().await.unwrap();
    assert_eq!(other.status(), 401, "only the gateway paths skip the daemon token");
}

// ---------------------------------------------------------------------------------------------
// Upgrades (Codex opens `GET /v1/responses` as a WebSocket when the endpoint accepts one)

/// A raw-socket upstream: reads one request head, answers `answer`, and when that switches
/// protocols echoes every byte back prefixed by `up:` until the peer closes.
pub(crate) async fn upgrade_upstream(answer: &'static str) -> (SocketAddr, tokio::sync::oneshot::Receiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let head = read_head(&mut socket).await;
        let _ = head_tx.send(head);
        socket.write_all(answer.as_bytes()).await.unwrap();
        if !answer.starts_with("HTTP/1.1 101") {
            return;
        }
        let mut buffer = [0u8; 4096];
        loop {
            let n = socket.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            let mut echo = b"up:".to_vec();
            echo.extend_from_slice(&buffer[..n]);
            socket.write_all(&echo).await.unwrap();
        }
    });
    (addr, head_rx)
}

/// Sends `head` on `socket`, then one more byte every `every`, until the peer closes the
/// connection: what the read that saw it close returned (`Ok(0)` or an error). Never ends while
/// the peer keeps it open: the caller bounds it.
pub(crate) async fn trickle_until_closed(
    socket: tokio::net::TcpStream,
    head: &[u8],
    every: Duration,
) -> std::io::Result<usize> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (mut reading, mut writing) = socket.into_split();
    let _ = writing.write_all(head).await;
    let mut byte = [0u8; 1];
    loop {
        tokio::select! {
            read = reading.read(&mut byte) => return read,
            () = tokio::time::sleep(every) => {
                let _ = writing.write_all(b"a").await;
            }
        }
    }
}

/// Reads up to the blank line that ends an HTTP head.
pub(crate) async fn read_head(socket: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if socket.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

pub(crate) const WEBSOCKET_REQUEST: &str = "GET /v1/responses HTTP/1.1\r\nHost: HOST\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
    Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer sk-user\r\n\r\n";

#[tokio::test]
async fn a_websocket_upgrade_is_passed_through_and_bridged_byte_for_byte() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nopenai-version: 2020-10-01\r\n\r\n";
    let (addr, head) = upgrade_upstream(answer).await;
    let base = format!("http://{addr}");
    let (_temp, gateway) = daemon(base.clone(), base).await;
    let host = gateway.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(host).await.unwrap();
    socket.write_all(WEBSOCKET_REQUEST.replace("HOST", host).as_bytes()).await.unwrap();
    let response = read_head(&mut socket).await.to_ascii_lowercase();
    assert!(response.starts_with("http/1.1 101"), "{response}");
    for expected in [
        "upgrade: websocket",
        "connection: upgrade",
        "sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=",
        "openai-version: 2020-10-01",
    ] {
        assert!(response.contains(expected), "`{expected}` in {response}");
    }
    let upstream_head = head.await.unwrap().to_ascii_lowercase();
    for expected in [
        "get /v1/responses http/1.1",
        "upgrade: websocket",
        "connection: upgrade",
        "sec-websocket-key: dghlihnhbxbszsbub25jzq==",
        "sec-websocket-version: 13",
        "authorization: bearer sk-user",
    ] {
        assert!(upstream_head.contains(expected), "`{expected}` upstream in {upstream_head}");
    }
    assert!(!upstream_head.contains("content-length"), "no invented body: {upstream_head}");

    // Frames are opaque bytes to the gateway: a masked text frame and arbitrary binary.
    for message in [&b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"[..], &[0u8, 255, 13, 10, 13, 10, 7][..]] {
        socket.write_all(message).await.unwrap();
        let mut expected = b"up:".to_vec();
        expected.extend_from_slice(message);
        let mut received = vec![0u8; expected.len()];
        tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut received)).await.unwrap().unwrap();
        assert_eq!(received, expected);
    }
}

#[tokio::test]
async fn a_refused_upgrade_comes_back_unchanged_so_the_client_falls_back() {
    use tokio::io::AsyncWriteExt;
    let answer = "HTTP/1.1 426 Upgrade Required\r\ncontent-type: application/json\r\ncontent-length: 27\r\n\r\n{\"error\":\"use HTTP please\"}";
    let (addr, _head) = upgrade_upstream(answer).await;
    let base = format!("http://{addr}");
    let (_temp, gateway) = daemon(base.clone(), base).await;
    let host = gateway.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(host).await.unwrap();
    socket.write_all(WEBSOCKET_REQUEST.replace("HOST", host).as_bytes()).await.unwrap();
    let head = read_head(&mut socket).await.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 426"), "{head}");
    let mut body = vec![0u8; 27];
    tokio::io::AsyncReadExt::read_exact(&mut socket, &mut body).await.unwrap();
    assert_eq!(body, br#"{"error":"use HTTP please"}"#);
}

/// Any local process may use the gateway, none may exhaust the daemon with it: requests in flight
/// (a response still streaming counts) are capped, and the next one gets a provider-shaped 503
/// with `retry-after` until one finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_are_capped_with_a_provider_shaped_503() {
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let held = release.clone();
    let upstream = axum::Router::new().route(
        "/v1/messages",
        axum::routing::post(move || {
            let held = held.clone();
            async move {
                let stream = futures_util::stream::once(async move {
                    held.notified().await;
                    Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b"event: message_stop\ndata: {}\n\n"))
                });
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from_stream(stream))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, upstream).await.unwrap() });
    let harness = crate::support::Harness::with_options(|options| {
        options.gateway_upstreams = Some((base.clone(), base.clone()));
        options.gateway_max_concurrent = Some(1);
    });
    let request = || {
        http::Request::builder()
            .method("POST")
            .uri("/v1/messages")
            .header("host", format!("127.0.0.1:{}", crate::support::PORT))
            .header("content-type", "application/json")
    };
    let first = harness.router.clone().oneshot(request().body(axum::body::Body::from("{}")).unwrap()).await.unwrap();
    assert_eq!(first.status(), http::StatusCode::OK, "the first stream is open");
    let second = harness.send(request(), Some(serde_json::json!({}))).await;
    assert_eq!(second.status, http::StatusCode::SERVICE_UNAVAILABLE, "{}", second.body);
    assert_eq!(second.body["error"]["type"], "overloaded_error", "{}", second.body);
    assert_eq!(second.headers["retry-after"], "1");
    // A request with a key the gateway grants (a launched agent's, the user's) has places of its
    // own: keyless requests holding every other place do not keep it out.
    let keyed = || request().header("x-api-key", crate::support::TOKEN);
    let granted = harness.router.clone().oneshot(keyed().body(axum::body::Body::from("{}")).unwrap()).await.unwrap();
    assert_eq!(granted.status(), http::StatusCode::OK, "a granted request waited behind keyless ones");
    let again = harness.send(keyed(), Some(serde_json::json!({}))).await;
    assert_eq!(again.status, http::StatusCode::SERVICE_UNAVAILABLE, "granted requests are capped too");
    release.notify_one();
    drop(granted);
    let body = axum::body::to_bytes(first.into_body(), 1024).await.unwrap();
    assert!(String::from_utf8_lossy(&body).contains("message_stop"));
    let third = harness.router.clone().oneshot(request().body(axum::body::Body::from("{}")).unwrap()).await.unwrap();
    assert_eq!(third.status(), http::StatusCode::OK, "a finished stream gives its place back");
    release.notify_one();
}

// ---------------------------------------------------------------------------------------------
// Request bodies and refusals

/// Reads one HTTP/1.1 response (head and a `Content-Length` body) from a raw socket.
async fn read_response(socket: &mut tokio::net::TcpStream) -> (String, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let head = read_head(socket).await.to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |value| value.trim().parse::<usize>().unwrap());
    let mut body = vec![0u8; length];
    socket.read_exact(&mut body).await.unwrap();
    (head, body)
}

/// A request answered without being forwarded (423 while the vault is locked) must leave the
/// client's keep-alive connection usable, also when the body arrives after the head (SDK clients
/// write them separately): hyper closes a connection whose request body was left unread, and an
/// SDK that reuses it from its pool then fails with "server disconnected" instead of showing
/// the unlock message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_leaves_the_connection_usable_for_the_next_one() {
    use tokio::io::AsyncWriteExt;
    let script = Script { status: 200, headers: vec![], chunks: vec![b"{}".to_vec()], paced: false };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (_temp, gateway, state) = daemon_with_state(base.clone(), base).await;
    let vault = state.services.vault.clone();
    tokio::task::spawn_blocking(move || vault.init(b"gateway keep-alive passphrase")).await.unwrap().unwrap();
    state.services.vault.lock();
    let host = gateway.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&host).await.unwrap();
    socket.set_nodelay(true).unwrap();
    let body = br#"{"model":"claude-test","max_tokens":16,"messages":[]}"#;
    for (round, path) in ["/v1/messages", "/v1/chat/completions", "/v1/responses"].iter().enumerate() {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        socket.write_all(body).await.unwrap();
        let (head, answer) =
            tokio::time::timeout(Duration::from_secs(10), read_response(&mut socket)).await.expect("an answer");
        assert!(head.starts_with("http/1.1 423"), "round {round}: {head}");
        assert!(!head.contains("connection: close"), "round {round}: the connection stays usable: {head}");
        assert!(String::from_utf8_lossy(&answer).contains("aileron vault unlock"), "round {round}");
    }
    assert!(up.seen.requests.lock().unwrap().is_empty(), "nothing went upstream while locked");
}

/// A raw-socket upstream's listener (each test reads from it as it needs), a gateway whose
/// providers both point at it, and a raw client connection to the gateway with the `Host` it
/// answers to.
async fn raw_upstream_and_client() -> (tokio::net::TcpListener, tempfile::TempDir, String, tokio::net::TcpStream) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (temp, gateway) = daemon(base.clone(), base).await;
    let host = gateway.trim_start_matches("http://").to_string();
    let socket = tokio::net::TcpStream::connect(&host).await.unwrap();
    (listener, temp, host, socket)
}

/// Request bodies stream upstream as they arrive: the upstream reads the first part of a body
/// while the client is still holding back the rest, so no request body is ever held whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_stream_upstream_before_they_are_complete() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (listener, _temp, host, mut socket) = raw_upstream_and_client().await;
    let (first_part_tx, first_part_rx) = tokio::sync::oneshot::channel::<(String, Vec<u8>)>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let head = read_head(&mut socket).await;
        let mut first = vec![0u8; 1000];
        socket.read_exact(&mut first).await.unwrap();
        first_part_tx.send((head, first)).unwrap();
        let mut rest = vec![0u8; 1000];
        socket.read_exact(&mut rest).await.unwrap();
        socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
    });
    socket.set_nodelay(true).unwrap();
    let head = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\ncontent-length: 2000\r\n\r\n");
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(&[b'a'; 1000]).await.unwrap();
    let (upstream_head, first) = tokio::time::timeout(Duration::from_secs(10), first_part_rx)
        .await
        .expect("the first half reaches the upstream before the second is sent")
        .unwrap();
    assert!(
        upstream_head.to_ascii_lowercase().contains("content-length: 2000"),
        "the exact length goes along: {upstream_head}"
    );
    assert_eq!(first, vec![b'a'; 1000]);
    socket.write_all(&[b'b'; 1000]).await.unwrap();
    let (head, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut socket)).await.unwrap();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(body, b"ok");
}

/// A `Content-Length` the client repeated (the same value, which HTTP allows) goes upstream once;
/// and a request naming more hop-by-hop headers than one pass of the gateway takes out loses
/// every one of them, the message's own headers kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_length_goes_upstream_once_and_every_hop_by_hop_header_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (listener, _temp, host, mut socket) = raw_upstream_and_client().await;
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel::<(String, Vec<u8>)>();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let head = read_head(&mut socket).await;
        let mut body = vec![0u8; 5];
        socket.read_exact(&mut body).await.unwrap();
        seen_tx.send((head, body)).unwrap();
        socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await.unwrap();
    });
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\ncontent-length: 5\r\nContent-Length: 5\r\n\
         connection: keep-alive, x-one, x-two, x-three\r\nkeep-alive: timeout=5\r\nte: trailers\r\n\
         proxy-connection: keep-alive\r\nx-one: 1\r\nx-two: 2\r\nx-three: 3\r\nx-kept: yes\r\n\r\nhello"
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let (upstream_head, body) = tokio::time::timeout(Duration::from_secs(10), seen_rx)
        .await
        .expect("the request reaches the upstream")
        .unwrap();
    assert_eq!(body, b"hello");
    let names: Vec<String> = upstream_head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, _)| name.trim().to_ascii_lowercase())
        .collect();
    assert_eq!(names.iter().filter(|name| *name == "content-length").count(), 1, "{upstream_head}");
    assert!(upstream_head.to_ascii_lowercase().contains("content-length: 5"), "{upstream_head}");
    for dropped in ["connection", "keep-alive", "te", "proxy-connection", "x-one", "x-two", "x-three"] {
        assert!(!names.iter().any(|name| name == dropped), "{dropped} is hop-by-hop: {upstream_head}");
    }
    assert!(names.iter().any(|name| name == "x-kept"), "{upstream_head}");
    let (head, answer) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut socket)).await.unwrap();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(answer, b"ok");
}

/// Request bodies are capped at 64 MiB whether their length is declared (refused at once,
/// nothing sent upstream) or not (a chunked body is cut off when it passes the cap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_over_the_cap_are_refused_declared_or_chunked() {
    use tokio::io::AsyncWriteExt;
    let script = Script { status: 200, headers: vec![], chunks: vec![b"{}".to_vec()], paced: false };
    let up = upstream(script).await;
    let base = format!("http://{}", up.addr);
    let (_temp, gateway) = daemon(base.clone(), base).await;
    let host = gateway.trim_start_matches("http://").to_string();
    let cap = aileron::dataplane::gateway::MAX_REQUEST_BODY_BYTES;

    let mut socket = tokio::net::TcpStream::connect(&host).await.unwrap();
    let head = format!("POST /v1/messages HTTP/1.1\r\nHost: {host}\r\ncontent-length: {}\r\n\r\n", cap + 1);
    socket.write_all(head.as_bytes()).await.unwrap();
    let (head, body) = tokio::time::timeout(Duration::from_secs(10), read_response(&mut socket)).await.unwrap();
    assert!(head.starts_with("http/1.1 413"), "{head}");
    assert!(head.contains("connection: close"), "the unread body is not waited for: {head}");
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");

    let chunk = vec![b'x'; 1024 * 1024];
    let stream = futures_util::stream::iter(
        (0..cap / chunk.len() + 2).map(move |_| Ok::<_, std::io::Error>(Bytes::from(chunk.clone()))),
    );
    let response = reqwest::Client::new()
        .post(format!("{gateway}/v1/chat/completions"))
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    // The gateway answers as soon as the cap is passed; the client may see that answer or, if it
    // was still writing, a reset. Either way the upstream never got a complete request.
    if let Ok(response) = response {
        assert_eq!(response.status(), 413);
    }
    assert!(up.seen.requests.lock().unwrap().is_empty(), "no over-cap body completed upstream");
}

/// Starts an `aileron daemon` process on a fresh home with `env`, sends it one chat request for
/// `path_and_query` (`x-marker: through`, a provider key, `{"model":"m"}`), stops it, and
/// returns the answer's status and body.
fn chat_through_a_started_daemon(
    runtime: &tokio::runtime::Runtime,
    env: &[(&str, &str)],
    path_and_query: &str,
) -> (reqwest::StatusCode, String) {
    let cli = crate::cli::Cli::new();
    let started = cli.run_with(&["daemon", "start"], env, None);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cli.home.join("daemon.json")).unwrap()).unwrap();
    let url = format!("{}{path_and_query}", info["url"].as_str().unwrap());
    let answer = runtime.block_on(async move {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let response = client
            .post(url)
            .header("x-marker", "through")
            .header("authorization", "Bearer sk-fake")
            .body(r#"{"model":"m"}"#)
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    });
    cli.ok(&["daemon", "stop"]);
    answer
}

/// Behind a company proxy: with `HTTP_PROXY` set for the daemon, an upstream the proxy covers is
/// reached through the proxy (the request arrives there in absolute form, body and end-to-end
/// headers intact), and the proxy's answer comes back to the client unchanged.
#[test]
fn an_upstream_the_proxy_environment_covers_is_reached_through_the_proxy() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen: Arc<Mutex<Vec<(String, String, Vec<u8>)>>> = Arc::default();
    let recorded = seen.clone();
    let proxy = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = move |request: Request| {
            let recorded = recorded.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                let marker = parts.headers.get("x-marker").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
                recorded.lock().unwrap().push((parts.uri.to_string(), marker, body.to_vec()));
                Response::builder()
                    .status(200)
                    .header("content-type", "application/json")
                    .body(Body::from(r#"{"via":"proxy"}"#))
                    .unwrap()
            }
        };
        tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handler)).await.unwrap() });
        addr
    });
    let proxy_url = format!("http://{proxy}");
    let env = [
        ("HTTP_PROXY", proxy_url.as_str()),
        ("http_proxy", proxy_url.as_str()),
        ("NO_PROXY", ""),
        ("no_proxy", ""),
        // A name nothing resolves: only the proxy can answer for it.
        ("AILERON_OPENAI_UPSTREAM", "http://llm.upstream.invalid"),
    ];
    let response = chat_through_a_started_daemon(&runtime, &env, "/v1/chat/completions?x=1");
    assert_eq!(response, (reqwest::StatusCode::OK, r#"{"via":"proxy"}"#.to_string()));
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        vec![(
            "http://llm.upstream.invalid/v1/chat/completions?x=1".to_string(),
            "through".to_string(),
            br#"{"model":"m"}"#.to_vec()
        )]
    );
}

/// A self-signed certificate for `127.0.0.1` and `localhost` (P-256, valid until 2126), and its
/// key: the HTTPS upstream below, which no system trusts.
pub(crate) const TEST_UPSTREAM_CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB1zCCAX2gAwIBAgIUf4s9IpFKXyHwJZhoVeSGITYTkiMwCgYIKoZIzj0EAwIw\nIDEeMBwGA1UEAwwVYWlsZXJvbiB0ZXN0IHVwc3RyZWFtMCAXDTI2MTEyNzE5MTEy\nN1oYDzIxMjYxMTAzMTkxMTI3WjAgMR4wHAYDVQQDDBVhaWxlcm9uIHRlc3QgdXBz\ndHJlYW0wWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATal9/CAib04/pFKM+CN7lM\ncCiG9em0Jpx7iHOQWOKOP3ZTDN/Rbpt8BzqiWETsJunw+5tNFcqo78Z3ng6Lnu2X\no4GSMIGPMB0GA1UdDgQWBBTnyG/tLPZU5pf/EXfe2Ol04wNAqDAfBgNVHSMEGDAW\ngBTnyG/tLPZU5pf/EXfe2Ol04wNAqDAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8A\nAAEwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMCB4AwEwYDVR0lBAwwCgYIKwYB\nBQUHAwEwCgYIKoZIzj0EAwIDSAAwRQIhAOYK1QYjN6eIHAxLxS18/cEQSKGemLXL\nX0liqmn5/dfKAiAL84YxtNniZe4QpUY96QOMQPPinS7JC9oWUT+m1lBstQ==\n-----END CERTIFICATE-----\n";
pub(crate) const TEST_UPSTREAM_KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgInFn5pktxm6igDIZ\nx770eFHeLU7KEj++VFudRtLxRr6hRANCAATal9/CAib04/pFKM+CN7lMcCiG9em0\nJpx7iHOQWOKOP3ZTDN/Rbpt8BzqiWETsJunw+5tNFcqo78Z3ng6Lnu2X\n-----END PRIVATE KEY-----\n";

/// An HTTPS upstream on loopback serving [`TEST_UPSTREAM_CERT`] with rustls, one request per
/// connection: answers `{"via":"tls"}` and records each request line. A client that refuses the
/// certificate ends the handshake and is recorded as nothing.
pub(crate) fn tls_upstream() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    tls_upstream_serving(TEST_UPSTREAM_CERT, TEST_UPSTREAM_KEY)
}

/// [`tls_upstream`] with another certificate and key (PEM).
pub(crate) fn tls_upstream_serving(cert_pem: &str, key_pem: &str) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    tls_upstream_answering(cert_pem, key_pem, Arc::new(|_, _| (String::new(), r#"{"via":"tls"}"#.to_string())))
}

/// What a test upstream answers a request (its line, then its header lines as sent): extra
/// response header lines (each ending in CRLF) and the body.
pub(crate) type Answer = Arc<dyn Fn(&str, &[String]) -> (String, String) + Send + Sync>;

/// [`tls_upstream_serving`] answering each request with `answer`.
pub(crate) fn tls_upstream_answering(
    cert_pem: &str,
    key_pem: &str,
    answer: Answer,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{BufRead as _, Read as _, Write as _};
    aileron::platform::process::install_crypto_provider();
    let certs = vec![CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = Arc::new(rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap());
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (config, recorded, answer) = (config.clone(), recorded.clone(), answer.clone());
            std::thread::spawn(move || {
                let tls = rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), stream);
                let mut reader = std::io::BufReader::new(tls);
                let (mut request_line, mut length, mut header_lines) = (String::new(), 0, Vec::new());
                if reader.read_line(&mut request_line).is_err() {
                    return;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() || line == "\r\n" || line.is_empty() {
                        break;
                    }
                    header_lines.push(line.trim_end().to_string());
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_err() {
                    return;
                }
                recorded.lock().unwrap().push(request_line.trim_end().to_string());
                let (extra_headers, answer) = answer(request_line.trim_end(), &header_lines);
                let mut tls = reader.into_inner();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra_headers}connection: close\r\n\r\n",
                    answer.len()
                );
                let _ = tls.write_all(head.as_bytes()).and_then(|()| tls.write_all(answer.as_bytes()));
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (addr, seen)
}

/// An HTTPS upstream is reached when, and only when, the platform's roots vouch for its
/// certificate: with the certificate in `SSL_CERT_FILE` (which the platform verifier reads) the
/// request arrives and the answer comes back; with the system's own roots the handshake is
/// refused, nothing reaches the upstream, and the client gets a 502 in the provider's shape.
#[test]
fn an_https_upstream_is_reached_only_with_a_certificate_the_platform_trusts() {
    let (upstream, seen) = tls_upstream();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cert_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(cert_file.path(), TEST_UPSTREAM_CERT).unwrap();
    let base = format!("https://127.0.0.1:{}", upstream.port());
    let through = |trusting: Option<&str>| {
        let mut env = vec![("AILERON_OPENAI_UPSTREAM", base.as_str())];
        if let Some(file) = trusting {
            env.push(("SSL_CERT_FILE", file));
        }
        chat_through_a_started_daemon(&runtime, &env, "/v1/chat/completions")
    };

    let (status, body) = through(None);
    assert_eq!(status, reqwest::StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.contains("could not be reached") && body.contains("server_error"), "{body}");
    assert!(seen.lock().unwrap().is_empty(), "a request reached an upstream whose certificate nothing vouches for");

    let trusted = cert_file.path().to_str().unwrap();
    assert_eq!(through(Some(trusted)), (reqwest::StatusCode::OK, r#"{"via":"tls"}"#.to_string()));
    assert_eq!(*seen.lock().unwrap(), vec!["POST /v1/chat/completions HTTP/1.1".to_string()]);
}
