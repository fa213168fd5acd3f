//! Hostile guests compiled from `connectors/test-guests`: each is stopped by its limit, reported
//! with the right class, leaves exactly one failure record, and leaves the daemon serving.

use std::time::{Duration, Instant};

use crate::fake_github::FakeGithub;
use aileron_core::ContentHash;
use aileron_sandbox::ImportPolicy;
use http::StatusCode;
use serde_json::{Value, json};

use crate::support::{ActionSpec, Harness, guest_wasm, manifest};

/// Compiles the module ahead of the measured run so the wall-time check measures the call only.
fn warm(harness: &Harness, hash: &str) {
    let hash = ContentHash::parse(hash).unwrap();
    let connector = harness.state.services.store.load_verified(&hash).unwrap();
    harness.state.services.sandbox.load(&hash, &connector.wasm, &ImportPolicy { allowed_host_imports: None }).unwrap();
}

/// The daemon still answers and still runs a well-behaved connector.
async fn assert_unharmed(harness: &Harness) {
    let health = harness.request("GET", "/v1/health", None).await;
    assert_eq!(health.status, StatusCode::OK);
    let ran = harness.run("echo", json!({})).await;
    assert_eq!(ran.status, StatusCode::OK, "daemon still runs connectors: {}", ran.body);
}

async fn assert_one_failure_record(harness: &Harness, body: &Value) {
    let audit_id = body["error"]["audit_id"].as_str().expect("the envelope carries an audit_id");
    let records = harness.audit_for(audit_id).await;
    assert_eq!(records.len(), 1, "exactly one record for {audit_id}");
    assert_eq!(records[0]["event_type"], "execution.failed");
    assert_eq!(records[0]["payload"]["aileron.failure.class"], body["error"]["class"]);
}

async fn harness_with_echo() -> Harness {
    let harness = Harness::new();
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    harness
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_at_the_step_time_limit() {
    let harness = harness_with_echo().await;
    let hash = harness.guest_action("infinite_loop", &[], "run", |spec| spec.timeout_seconds = Some(1)).await;
    warm(&harness, &hash);
    let started = Instant::now();
    let response = harness.run("infinite_loop", json!({})).await;
    let elapsed = started.elapsed();
    assert_eq!(response.status.as_u16(), 507, "{}", response.body);
    assert_eq!(response.body["error"]["class"], "resource_limit_exceeded");
    assert_eq!(response.body["error"]["details"]["limit"], "time");
    // The +50 ms bound is asserted on the call's own clock in aileron-sandbox's limits tests; end
    // to end over HTTP, with other suites loading the 2 cores, we only require it is not late.
    assert!(elapsed < Duration::from_millis(1500), "stopped at the limit, not long after, took {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(1000), "ran until the limit, took {elapsed:?}");
    assert_one_failure_record(&harness, &response.body).await;
    assert_unharmed(&harness).await;
}

#[tokio::test]
async fn resource_and_runtime_misbehaviour_is_contained() {
    let harness = harness_with_echo().await;
    // (guest, expected HTTP status, class, detail key, detail value)
    let cases: [(&str, u16, &str, &str, Value); 5] = [
        ("memory_bomb", 507, "resource_limit_exceeded", "limit", json!("memory")),
        ("huge_stdout", 507, "resource_limit_exceeded", "limit", json!("stdout")),
        ("trap", 500, "connector_runtime_error", "", Value::Null),
        ("malformed_output", 500, "connector_runtime_error", "", Value::Null),
        ("exit_nonzero", 500, "connector_runtime_error", "exit_code", json!(3)),
    ];
    for (guest, status, class, key, value) in cases {
        let hash = harness.guest_action(guest, &[], "run", |_| {}).await;
        warm(&harness, &hash);
        let started = Instant::now();
        let response = harness.run(guest, json!({})).await;
        let elapsed = started.elapsed();
        assert_eq!(response.status.as_u16(), status, "{guest}: {}", response.body);
        assert_eq!(response.body["error"]["class"], class, "{guest}");
        if !key.is_empty() {
            assert_eq!(response.body["error"]["details"][key], value, "{guest}: {}", response.body);
        }
        assert!(
            elapsed < Duration::from_secs(5),
            "{guest} stopped by its own limit, not the 30 s wall clock: {elapsed:?}"
        );
        assert_one_failure_record(&harness, &response.body).await;
        assert_unharmed(&harness).await;
    }
}

#[tokio::test]
async fn a_guest_cannot_forge_a_host_failure_class() {
    let harness = harness_with_echo().await;
    harness.guest_action("forged_class", &[], "run", |_| {}).await;
    let response = harness.run("forged_class", json!({})).await;
    assert_eq!(response.body["error"]["class"], "connector_runtime_error", "{}", response.body);
    assert_eq!(response.body["error"]["details"]["connector_class"], "hash_mismatch");
    assert_one_failure_record(&harness, &response.body).await;
}

#[tokio::test]
async fn network_escapes_are_denied_and_audited() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = harness_with_echo().await;
    let hosts = [upstream.host_port()];
    // After the denial the guest asks for a declared URL: the denial stopped the call, so that
    // request never reaches the upstream (seed 004).
    let then = json!({"then": format!("{}/status/200", upstream.base_url())});
    for (guest, args) in [("undeclared_host", then), ("wrong_scheme", json!({}))] {
        harness
            .guest_action(guest, &hosts, "run", |spec| {
                if guest == "undeclared_host" {
                    spec.inputs = &[("then", "string", false)];
                }
            })
            .await;
        let response = harness.run(guest, args).await;
        assert_eq!(response.status, StatusCode::FORBIDDEN, "{guest}: {}", response.body);
        assert_eq!(response.body["error"]["class"], "capability_denied", "{guest}");
        assert_eq!(response.body["error"]["boundary"], "sandbox", "{guest}");
        assert_one_failure_record(&harness, &response.body).await;
        assert_unharmed(&harness).await;
    }
    assert_eq!(upstream.recorder.count(), 0, "no request after the denial went out");

    let hash = harness.install("redirect", &guest_wasm("redirect"), &manifest("redirect", &hosts, "")).await;
    let spec =
        ActionSpec { inputs: &[("url", "string", true)], ..ActionSpec::new("redirect", "redirect", &hash, "run") };
    assert_eq!(harness.add_action("redirect.md", &spec.render()).await.status, StatusCode::CREATED);
    let response = harness.run("redirect", json!({"url": format!("{}/redirect", upstream.base_url())})).await;
    assert_eq!(response.status, StatusCode::FORBIDDEN, "{}", response.body);
    assert_eq!(response.body["error"]["details"]["requested"], "network:evil.example:80");
    assert_eq!(upstream.recorder.count(), 1, "the 302 was returned to the guest, not followed by the host");
    assert_one_failure_record(&harness, &response.body).await;
}

/// A manifest that declares a name (`localhost:<port>`) cannot lead a connector to a loopback
/// service, the daemon itself included; only a literally named local address is reachable.
#[tokio::test]
async fn a_host_name_that_resolves_to_a_local_address_is_refused() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = harness_with_echo().await;
    let port = upstream.host_port().rsplit(':').next().unwrap().to_string();
    let named = format!("localhost:{port}");
    let daemon = format!("localhost:{}", crate::support::PORT);
    harness
        .guest_action("http_get", &[named.clone(), daemon.clone()], "get", |spec| {
            spec.inputs = &[("url", "string", true)]
        })
        .await;
    for target in [format!("http://{named}/echo"), format!("http://{daemon}/v1/health")] {
        let response = harness.run("http_get", json!({ "url": target })).await;
        assert_eq!(response.body["error"]["class"], "capability_denied", "{target}: {}", response.body);
        assert!(response.body["error"]["message"].as_str().unwrap().contains("non-public"), "{}", response.body);
    }
    assert_eq!(upstream.recorder.count(), 0, "nothing reached the loopback service");
}

/// Only GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS leave the host (SPEC §4.4).
#[tokio::test]
async fn only_the_allowed_http_methods_leave_the_host() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = harness_with_echo().await;
    let inputs: &[(&str, &str, bool)] = &[("url", "string", true), ("method", "string", false)];
    harness.guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = inputs).await;
    let url = format!("{}/echo", upstream.base_url());
    for method in ["TRACE", "CONNECT", "PROPFIND", "get\r\nX-Injected: 1"] {
        let response = harness.run("http_get", json!({ "url": url, "method": method })).await;
        assert_eq!(response.body["error"]["class"], "capability_denied", "{method:?}: {}", response.body);
        assert_eq!(response.body["error"]["boundary"], "sandbox", "{method:?}");
    }
    assert_eq!(upstream.recorder.count(), 0, "no refused method reached the upstream");
    for method in ["GET", "post", "DELETE", "OPTIONS"] {
        let response = harness.run("http_get", json!({ "url": url, "method": method })).await;
        assert_eq!(response.status, StatusCode::OK, "{method}: {}", response.body);
    }
    assert_eq!(upstream.recorder.count(), 4);
}

#[tokio::test]
async fn oversized_response_bodies_are_refused() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = harness_with_echo().await;
    harness
        .guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = &[("url", "string", true)])
        .await;
    let response = harness.run("http_get", json!({"url": format!("{}/big", upstream.base_url())})).await;
    assert_eq!(response.status.as_u16(), 507, "{}", response.body);
    assert_eq!(response.body["error"]["details"]["limit"], "response_body");
    assert_one_failure_record(&harness, &response.body).await;
}

/// A proxy in the environment (`HTTP_PROXY`, `ALL_PROXY`) is used neither by the CLI to reach
/// the daemon (the daemon token would go to the proxy) nor for connector traffic (through a proxy,
/// the address the egress check allowed would not be the address connected to: the proxy resolves
/// the name itself, past the public-only resolver).
#[test]
fn a_proxy_in_the_environment_never_carries_connector_traffic() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let proxy = runtime.block_on(FakeGithub::start()).unwrap();
    let cli = crate::cli::Cli::new();
    let proxy_url = proxy.base_url();
    let env =
        [("HTTP_PROXY", proxy_url.as_str()), ("http_proxy", proxy_url.as_str()), ("ALL_PROXY", proxy_url.as_str())];
    let started = cli.run_with(&["daemon", "start"], &env, None);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    // Port 1 on loopback, named literally (allowed for local fakes): nothing listens there.
    let hash = cli.install_guest("http_get", &["127.0.0.1:1".to_string()]);
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    let run = cli.run_with(&["action", "run", "fetch", "--arg", "url=http://127.0.0.1:1/through-a-proxy"], &env, None);
    assert!(!run.status.success(), "nothing answers on port 1: {}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("network_error"), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(proxy.recorder.count(), 0, "the request did not go through the proxy");
    drop(runtime);
}
