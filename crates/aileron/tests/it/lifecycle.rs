//! Behaviour over time: retries per SPEC §9, the `/v1/actions/watch` SSE stream, and graceful
//! shutdown that finishes in-flight runs.

use std::time::Duration;

use aileron::cli::demo::{EXAMPLE_ACTIONS, EXAMPLE_WASM, example_manifest_for, render_action};
use crate::fake_github::FakeGithub;
use axum::body::Body;
use futures_util::StreamExt;
use http::{Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;

use crate::cli::Cli;
use crate::support::{ActionSpec, Harness, PORT, TOKEN};

async fn example_harness(upstream: &FakeGithub) -> (Harness, String) {
    let harness = Harness::with_options(|options| options.retry_delays = [Duration::from_millis(10); 3]);
    let dir = harness.temp.path().join("pkg-github");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("connector.wasm"), EXAMPLE_WASM).unwrap();
    std::fs::write(dir.join("manifest.toml"), example_manifest_for(&upstream.host_port())).unwrap();
    let reference = "github://aileron/github-issues@0.1.0";
    let preview = harness.request("POST", "/v1/connectors/preview", Some(json!({"source": dir, "reference": reference}))).await;
    let body = json!({"source": dir, "reference": reference, "expected_hash": preview.body["hash"], "consent": "flag", "allow_unsigned": true});
    let installed = harness.request("POST", "/v1/connectors/install", Some(body)).await;
    let hash = installed.body["hash"].as_str().unwrap().to_string();
    (harness, hash)
}

#[tokio::test]
async fn retriable_failures_are_retried_three_times_only_for_idempotent_steps() {
    let upstream = FakeGithub::start().await.unwrap();
    let (harness, hash) = example_harness(&upstream).await;
    let (file_name, template) = EXAMPLE_ACTIONS[0];
    let text = render_action(template, &hash);
    assert_eq!(harness.add_action(file_name, &text).await.status, StatusCode::CREATED);

    let args = json!({"owner": "unavailable", "repo": "x", "api_base": upstream.base_url()});
    let response = harness.run("list-issues", args.clone()).await;
    assert_eq!(response.status.as_u16(), 502, "{}", response.body);
    assert_eq!(response.body["error"]["class"], "external_api_error");
    assert_eq!(response.body["error"]["retriable"], true);
    assert_eq!(response.body["error"]["details"]["status"], 503);
    assert_eq!(upstream.recorder.count(), 4, "one call and three retries");

    // The same step marked not idempotent is never retried.
    let once = text.replace("op = \"list_issues\"\n", "op = \"list_issues\"\nidempotent = false\n").replace("list-issues", "list-once");
    assert_eq!(harness.add_action("list-once.md", &once).await.status, StatusCode::CREATED);
    let response = harness.run("list-once", args).await;
    assert_eq!(response.body["error"]["class"], "external_api_error");
    assert_eq!(upstream.recorder.count(), 5, "no retry for a not_idempotent step");

    // A non-retriable upstream answer (404) is not retried either.
    let (file_name, template) = EXAMPLE_ACTIONS[1];
    harness.add_action(file_name, &render_action(template, &hash)).await;
    let response = harness.run("get-issue", json!({"owner": "a", "repo": "b", "number": 99, "api_base": upstream.base_url()})).await;
    assert_eq!(response.body["error"]["details"]["status"], 404, "{}", response.body);
    assert_eq!(response.body["error"]["retriable"], false);
    assert_eq!(upstream.recorder.count(), 6);
}

#[tokio::test]
async fn watchers_see_every_change_to_the_action_set() {
    let harness = Harness::new();
    let hash = harness.install("echo", &crate::support::guest_wasm("echo"), &crate::support::manifest("echo", &[], "")).await;
    let request = Request::builder()
        .uri("/v1/actions/watch")
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let response = harness.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut frames = response.into_body().into_data_stream();
    let mut next_event = async || {
        let frame = tokio::time::timeout(Duration::from_secs(5), frames.next()).await.expect("an event within 5 s");
        String::from_utf8(frame.unwrap().unwrap().to_vec()).unwrap()
    };
    assert!(next_event().await.starts_with("event: ready"));

    let spec = ActionSpec::new("watched", "echo", &hash, "echo");
    harness.add_action("watched.md", &spec.render()).await;
    assert!(next_event().await.starts_with("event: changed"), "add");
    harness.request("PATCH", "/v1/actions/watched", Some(json!({"enabled": false}))).await;
    assert!(next_event().await.starts_with("event: changed"), "disable");
    harness.request("DELETE", "/v1/actions/watched", None).await;
    assert!(next_event().await.starts_with("event: changed"), "remove");
}

#[test]
fn sigterm_finishes_in_flight_runs_before_exiting() {
    let cli = Cli::new();
    let hash = cli.install_guest("sleep", &[]);
    cli.add_action(&ActionSpec { inputs: &[("ms", "integer", true)], ..ActionSpec::new("nap", "sleep", &hash, "sleep") });

    let home = cli.home.clone();
    let in_flight = std::thread::spawn(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_aileron"))
            .args(["action", "run", "nap", "--arg", "ms=1500"])
            .env("AILERON_HOME", &home)
            .output()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(500));
    cli.ok(&["daemon", "stop"]);
    let output = in_flight.join().unwrap();
    assert!(
        output.status.success(),
        "the in-flight run completed during shutdown: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!cli.home.join("daemon.json").exists());
    assert!(cli.run(&["audit", "verify"]).status.success());
}
