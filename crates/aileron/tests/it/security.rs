//! Security invariants under attack: tampered store bytes never execute (SPEC §0.6), credentials
//! are injected host-side and never appear in any output (§0.2), credential use needs both the
//! manifest and the action to declare it (§0.3).

use std::sync::Arc;

use crate::fake_github::FakeGithub;
use aileron::dataplane::egress::Secret;
use http::StatusCode;
use serde_json::json;

use crate::support::{ActionSpec, Harness, PlantedKey, files_containing, guest_wasm, manifest};

const PLANTED: &str = "sk-PLANTED-7c1e9a44d2b0f35e";

const API_KEY_MANIFEST: &str = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test key\"\nheader = \"X-Api-Key\"\nformat = \"Token {key}\"\n";

#[tokio::test]
async fn a_planted_secret_reaches_the_upstream_header_and_nothing_else() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::with_credentials(Arc::new(PlantedKey(PLANTED)));
    let hash = harness
        .install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], API_KEY_MANIFEST))
        .await;
    let spec = ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("authed-get", "http_get", &hash, "get")
    };
    assert_eq!(harness.add_action("authed-get.md", &spec.render()).await.status, StatusCode::CREATED);

    let response = harness
        .run("authed-get", json!({"url": format!("{}/echo", upstream.base_url()), "credential": "api_key"}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let requests = upstream.recorder.requests();
    assert_eq!(requests.len(), 1);
    let header = requests[0].headers.iter().find(|(name, _)| name == "x-api-key").map(|(_, v)| v.clone());
    assert_eq!(header.as_deref(), Some(&*format!("Token {PLANTED}")), "the host injected the credential");

    // A guest that probes its environment finds nothing to steal either.
    harness.guest_action("secret_probe", &[], "run", |_| {}).await;
    let probe = harness.run("secret_probe", json!({})).await;
    assert_eq!(probe.status, StatusCode::OK, "{}", probe.body);

    for (label, text) in [("run response", response.body.to_string()), ("probe output", probe.body.to_string())] {
        assert!(!text.contains(PLANTED), "{label} leaked the secret");
    }
    for record in harness.audit().await {
        assert!(!record.to_string().contains(PLANTED), "audit record leaked the secret: {record}");
    }
    harness.state.services.audit.flush().await;
    assert_eq!(
        files_containing(harness.temp.path(), PLANTED.as_bytes()),
        Vec::<String>::new(),
        "no file holds the secret"
    );
    assert!(!format!("{:?}", Secret::new(PLANTED)).contains(PLANTED), "Debug of a Secret is redacted");
}

#[tokio::test]
async fn credential_use_needs_the_manifest_the_action_and_a_binding() {
    let upstream = FakeGithub::start().await.unwrap();
    let url = format!("{}/echo", upstream.base_url());

    // The action does not declare api_key: denied at the action boundary even with a secret available.
    let harness = Harness::with_credentials(Arc::new(PlantedKey(PLANTED)));
    let hash = harness
        .install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], API_KEY_MANIFEST))
        .await;
    let spec = ActionSpec {
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("undeclared", "http_get", &hash, "get")
    };
    harness.add_action("undeclared.md", &spec.render()).await;
    let response = harness.run("undeclared", json!({"url": url, "credential": "api_key"})).await;
    assert_eq!(response.body["error"]["class"], "capability_denied", "{}", response.body);
    assert_eq!(response.body["error"]["boundary"], "action");

    // The manifest's kind is api_key; asking for oauth2 is denied by the sandbox boundary.
    let response = harness.run("undeclared", json!({"url": url, "credential": "oauth2"})).await;
    assert_eq!(response.body["error"]["class"], "capability_denied", "{}", response.body);
    assert_eq!(response.body["error"]["boundary"], "sandbox");

    // No vault: binding_required with a hint.
    let harness = Harness::new();
    let hash = harness
        .install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], API_KEY_MANIFEST))
        .await;
    let spec = ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("needs-key", "http_get", &hash, "get")
    };
    harness.add_action("needs-key.md", &spec.render()).await;
    let response = harness.run("needs-key", json!({"url": url, "credential": "api_key"})).await;
    assert_eq!(response.status.as_u16(), 412, "{}", response.body);
    assert_eq!(response.body["error"]["class"], "binding_required");
    assert!(response.body["error"]["details"]["hint"].is_string());
    assert_eq!(upstream.recorder.count(), 0, "no request leaves without its credential");
}

#[tokio::test]
async fn tampered_store_bytes_never_execute() {
    let harness = Harness::new();
    for (target, label) in [("connector.wasm", "binary"), ("manifest.toml", "manifest")] {
        let name = format!("echo-{}", label);
        let hash = harness.install(&name, &guest_wasm("echo"), &manifest(&name, &[], "")).await;
        let spec = ActionSpec::new(&name, &name, &hash, "echo");
        assert_eq!(harness.add_action(&format!("{name}.md"), &spec.render()).await.status, StatusCode::CREATED);
        assert_eq!(harness.run(&name, json!({})).await.status, StatusCode::OK, "runs before tampering");

        let hex = hash.trim_start_matches("sha256:");
        let path = harness.home.store_dir().join("connectors/sha256").join(hex).join(target);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();

        let response = harness.run(&name, json!({})).await;
        assert_eq!(response.status.as_u16(), 422, "{label}: {}", response.body);
        assert_eq!(response.body["error"]["class"], "hash_mismatch");
        let records = harness.audit_for(response.body["error"]["audit_id"].as_str().unwrap()).await;
        assert_eq!(records[0]["event_type"], "execution.failed");
    }
}

/// A token holder who opens many `POST /v1/actions/{name}/run` requests, declares a body and
/// stops after one byte held a connection (and a descriptor) each for ever: enough of them
/// exhausted the daemon's connection cap and locked the user out of health, approvals and the
/// console. Every such request is now answered 408 and its connection closed within the body
/// deadline, health answers meanwhile, and a long-lived SSE response is not cut by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_bodies_are_dropped_and_health_answers_meanwhile() {
    use crate::support::{PORT, TOKEN};
    use aileron::surfaces::daemon::connections::API_BODY_READ_TIMEOUT;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let harness = Harness::new();
    let address = served_as_the_daemon_serves(&harness).await;
    let head = |method: &str, path: &str, extra: &str| {
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\nAuthorization: Bearer {TOKEN}\r\n{extra}\r\n")
    };

    let mut events = tokio::net::TcpStream::connect(address).await.unwrap();
    events.write_all(head("GET", "/v1/events/watch", "").as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..300 {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request =
            head("POST", "/v1/actions/anything/run", "Content-Type: application/json\r\nContent-Length: 100000\r\n")
                + "{";
        stream.write_all(request.as_bytes()).await.unwrap();
        stalled.push(stream);
    }

    let health = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream.write_all(head("GET", "/v1/health", "Connection: close\r\n").as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        answer
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(3), health)
        .await
        .expect("health answers while bodies stall");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let limit = API_BODY_READ_TIMEOUT + std::time::Duration::from_secs(5);
    for (n, mut stream) in stalled.into_iter().enumerate() {
        let mut answer = Vec::new();
        let left = limit.saturating_sub(started.elapsed());
        tokio::time::timeout(left, stream.read_to_end(&mut answer))
            .await
            .unwrap_or_else(|_| panic!("stalled connection {n} still open after {limit:?}"))
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "connection {n}: {answer}");
        assert!(answer.contains("request_timeout") && answer.to_lowercase().contains("connection: close"), "{answer}");
    }
    assert!(started.elapsed() >= API_BODY_READ_TIMEOUT, "not answered before the deadline");

    // The SSE response outlives the body deadline.
    let mut chunk = [0u8; 4096];
    let mut seen = Vec::new();
    loop {
        match tokio::time::timeout(std::time::Duration::from_millis(200), events.read(&mut chunk)).await {
            Ok(Ok(0)) => panic!("the event stream was closed: {}", String::from_utf8_lossy(&seen)),
            Ok(Ok(n)) => seen.extend_from_slice(&chunk[..n]),
            Ok(Err(error)) => panic!("the event stream failed: {error}"),
            Err(_) => break,
        }
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
}

/// Another local user's process that connects to the daemon's port is closed before a byte of
/// its request is read: no answer, no slot held; the user's own processes are answered. The
/// other user is `nobody`, which only a run as root can become: elsewhere the test checks the
/// user's own half and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_connections_are_closed_unread() {
    use crate::support::PORT;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let harness = Harness::new();
    let address = served_as_the_daemon_serves(&harness).await;
    let request = format!("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1:{PORT}\r\nConnection: close\r\n\r\n");

    let mut own = tokio::net::TcpStream::connect(address).await.unwrap();
    own.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    own.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "the user's own process was not answered: {answer:?}");

    if !nix::unistd::geteuid().is_root() {
        eprintln!("another_users_connections_are_closed_unread: not root, so no other user to connect as");
        return;
    }
    let script = format!(
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}))\ns.sendall({request:?}.encode())\n\
         s.settimeout(10)\ntry:\n    print(repr(s.recv(100)))\nexcept ConnectionResetError:\n    print('reset')",
        port = address.port(),
    );
    let output = tokio::task::spawn_blocking(move || {
        use std::os::unix::process::CommandExt as _;
        std::process::Command::new("python3").args(["-c", &script]).uid(65534).gid(65534).output().unwrap()
    })
    .await
    .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // Closed with its request unread, the kernel resets the connection (or the peer reads its end).
    assert!(["reset", "b''"].contains(&printed.trim()), "another user's process got an answer: {printed}");
}

/// An injected secret shorter than 8 bytes (a vault an older version wrote, when binding did not
/// refuse one) was not redacted from the upstream's echo: the connector's output carried it in
/// clear. It is redacted now whatever its length, and nothing else (audit, traces, any file)
/// holds it; binding such a short key is refused with the reason.
#[tokio::test]
async fn a_short_injected_secret_echoed_by_the_upstream_is_redacted_everywhere() {
    use aileron::platform::telemetry::{Telemetry, TelemetryConfig};
    const SHORT: &str = "q7Zk2Wx";

    let upstream = crate::fake_oauth::FakeOAuth::start().await;
    *upstream.state.api_key.lock().unwrap() = Some(SHORT.to_string());
    let traces = tempfile::tempdir().unwrap();
    let telemetry =
        Telemetry::build(&TelemetryConfig::enabled("file", Some(traces.path().to_path_buf()))).expect("telemetry");
    let traced = telemetry.clone();
    let harness = Harness::with_options(move |options| {
        options.credentials = Some(Arc::new(PlantedKey(SHORT)));
        options.telemetry = traced;
    });
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test key\"\nheader = \"X-Api-Key\"\nformat = \"{key}\"\n";
    let hash = harness
        .install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], credential))
        .await;
    let spec = ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("short-key", "http_get", &hash, "get")
    };
    assert_eq!(harness.add_action("short-key.md", &spec.render()).await.status, StatusCode::CREATED);

    let response = harness
        .run("short-key", json!({"url": format!("{}/api/echo", upstream.base_url()), "credential": "api_key"}))
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let sent = upstream.state.api_requests.lock().unwrap().clone();
    assert!(
        sent[0].iter().any(|(name, value)| name == "x-api-key" && value == SHORT),
        "the short key was injected: {sent:?}"
    );
    let output = response.body.to_string();
    assert!(output.contains("[REDACTED]"), "the upstream echoed the key: {output}");
    assert!(!output.contains(SHORT), "the echo reached the guest in clear: {output}");
    for record in harness.audit().await {
        assert!(!record.to_string().contains(SHORT), "audit record leaked the key: {record}");
    }
    harness.state.services.audit.flush().await;
    telemetry.force_flush().expect("traces flushed");
    assert!(!every_trace_file_is_empty(traces.path()), "spans were written");
    for root in [harness.temp.path(), traces.path()] {
        assert_eq!(files_containing(root, SHORT.as_bytes()), Vec::<String>::new(), "no file holds the key");
    }

    // Binding a key that short is refused, saying why.
    let init =
        harness.request("POST", "/v1/vault/init", Some(json!({"passphrase": "short-key test passphrase"}))).await;
    assert_eq!(init.status, StatusCode::CREATED, "{}", init.body);
    let connector = "github://aileron-tests/http_get";
    let refused =
        harness.request("POST", "/v1/bindings/setup", Some(json!({"connector": connector, "api_key": SHORT}))).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("7 bytes long") && message.contains("shorter than 8 bytes"), "{}", refused.body);
    assert!(!refused.body.to_string().contains(SHORT), "the refusal does not repeat the key");
    let eight = harness
        .request("POST", "/v1/bindings/setup", Some(json!({"connector": connector, "api_key": "q7Zk2Wx8"})))
        .await;
    assert_eq!(eight.status, StatusCode::CREATED, "{}", eight.body);
}

/// Whether no file under `root` has any bytes.
/// The harness's router on a loopback port, behind the daemon's own accept loop (`aileron
/// daemon run`'s deadlines, caps and peer check); its address.
async fn served_as_the_daemon_serves(harness: &Harness) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(aileron::surfaces::daemon::connections::serve(
        listener,
        harness.router.clone(),
        aileron::surfaces::daemon::connections::Peers::OwnUser,
        std::future::pending(),
    ));
    address
}

fn every_trace_file_is_empty(root: &std::path::Path) -> bool {
    crate::support::every_file(root).iter().all(|(_, bytes)| bytes.is_empty())
}
