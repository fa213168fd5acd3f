//! `aileron_host`: outbound HTTP through the embedder's hooks, and guest logs.

use std::time::{Duration, Instant};

use aileron_sandbox::{GuestHttpRequest, GuestLog, Limits};
use serde_json::json;

use crate::guest::{FakeEgress, Wat, call_with, failure, limits, summary};

fn with_http_imports() -> Wat {
    Wat::new()
        .host("http_request", "i32 i32", "i32")
        .host("http_response_status", "", "i32")
        .host("http_response_size", "", "i32")
        .host("http_response_read", "i32 i32", "i32")
        .host("log", "i32 i32 i32 i32", "")
        .item(
            "(func $log_int (param $level i32) (param $level_len i32) (param $v i32)
               (local $p i32)
               (local.set $p (call $format_int (local.get $v)))
               (call $log (local.get $level) (local.get $level_len)
                          (local.get $p) (i32.sub (i32.const 200) (local.get $p))))",
        )
        .local("$rc")
        .local("$size")
}

/// Logs the decimal value of an i32 expression under `label` (logs survive a failed call).
fn log_int(wat: Wat, label: &str, expression: &str) -> Wat {
    let (wat, ptr, len) = wat.bytes(label.as_bytes());
    wat.run(&format!("(call $log_int (i32.const {ptr}) (i32.const {len}) {expression})"))
}

fn log(level: &str, message: &str) -> GuestLog {
    GuestLog { level: level.into(), message: message.into() }
}

/// Issues `request`, then reads the body BEFORE the status (as Go guests do) and prints
/// `{"output":{"rc":..,"size":..,"read":..,"status":..,"body":"<body>"}}`.
fn requester(request: &str) -> Wat {
    let (wat, ptr, len) = with_http_imports().bytes(request.as_bytes());
    wat.run(&format!("(local.set $rc (call $http_request (i32.const {ptr}) (i32.const {len})))"))
        .run("(local.set $size (call $http_response_size))")
        .write(1, r#"{"output":{"rc":"#)
        .write_int("(local.get $rc)")
        .write(1, r#","size":"#)
        .write_int("(local.get $size)")
        .write(1, r#","read":"#)
        .write_int("(call $http_response_read (i32.const 16384) (i32.const 1000))")
        .write(1, r#","status":"#)
        .write_int("(call $http_response_status)")
        .write(1, r#","body":""#)
        .run(
            "(if (i32.gt_s (local.get $size) (i32.const 0))
               (then (call $write (i32.const 1) (i32.const 16384) (local.get $size))))",
        )
        .write(1, r#""}}"#)
}

async fn run(guest: &Wat, egress: std::sync::Arc<FakeEgress>) -> aileron_sandbox::CallOutcome {
    call_with(&guest.load(), json!({}), limits(), egress).await
}

#[tokio::test]
async fn a_request_is_handed_to_the_hooks_and_its_response_is_readable() {
    let egress = FakeEgress::new();
    let request = r#"{"method":"POST","url":"https://api.example:443/issues",
        "headers":{"Accept":"application/json"},"body":"{\"t\":1}","credential":"api_key"}"#;
    let outcome = run(&requester(request), egress.clone()).await;
    assert_eq!(outcome.result.unwrap(), json!({"rc": 0, "size": 6, "read": 6, "status": 201, "body": "POST 7"}));
    assert_eq!(
        egress.seen(),
        vec![GuestHttpRequest {
            method: "POST".into(),
            url: "https://api.example:443/issues".into(),
            headers: vec![("Accept".into(), "application/json".into())],
            body: Some(br#"{"t":1}"#.to_vec()),
            credential: Some("api_key".into()),
        }]
    );
}

#[tokio::test]
async fn accessors_without_a_response_answer_minus_one() {
    let guest = with_http_imports()
        .write(1, r#"{"output":["#)
        .write_int("(call $http_response_status)")
        .write(1, ",")
        .write_int("(call $http_response_size)")
        .write(1, ",")
        .write_int("(call $http_response_read (i32.const 16384) (i32.const 10))")
        .write(1, "]}");
    assert_eq!(summary(&run(&guest, FakeEgress::new()).await), "ok [-1,-1,-1]");
}

#[tokio::test]
async fn a_short_read_copies_only_what_fits() {
    let (wat, ptr, len) = with_http_imports().bytes(br#"{"method":"GET","url":"https://api.example/"}"#);
    let guest = wat
        .run(&format!("(drop (call $http_request (i32.const {ptr}) (i32.const {len})))"))
        .write(1, r#"{"output":["#)
        .write_int("(call $http_response_read (i32.const 16384) (i32.const 3))")
        .write(1, r#",""#)
        .run("(call $write (i32.const 1) (i32.const 16384) (i32.const 3))")
        .write(1, r#""]}"#);
    assert_eq!(summary(&run(&guest, FakeEgress::new()).await), r#"ok [3,"GET"]"#);
}

/// A denied request stops the call (seed 004: the connector is terminated): nothing after it runs
/// — no log line, no further request, no output — and the denial is what the call reports.
#[tokio::test]
async fn a_denial_stops_the_call_and_wins_over_what_the_guest_would_print() {
    let (wat, ok_ptr, ok_len) = with_http_imports().bytes(br#"{"method":"GET","url":"https://api.example/"}"#);
    let (wat, evil_ptr, evil_len) = wat.bytes(br#"{"method":"GET","url":"https://evil.example/"}"#);
    // After the denied request the guest would log, ask again for an allowed URL, and claim success.
    let wat = wat
        .run(&format!("(drop (call $http_request (i32.const {ok_ptr}) (i32.const {ok_len})))"))
        .run(&format!("(local.set $rc (call $http_request (i32.const {evil_ptr}) (i32.const {evil_len})))"));
    let wat = log_int(wat, "rc", "(local.get $rc)")
        .run(&format!("(drop (call $http_request (i32.const {ok_ptr}) (i32.const {ok_len})))"));
    let guest = log_int(wat, "status", "(call $http_response_status)").write(1, r#"{"output":"all good"}"#);
    let egress = FakeEgress::new();
    let outcome = run(&guest, egress.clone()).await;
    assert_eq!(summary(&outcome), "capability_denied sandbox");
    assert_eq!(failure(&outcome).details["requested"], "network:evil.example:443");
    assert_eq!(egress.seen().len(), 2, "the allowed request after the denial never reached the host");
    assert_eq!(outcome.logs, vec![], "nothing ran after the denial");
}

#[tokio::test]
async fn a_malformed_request_returns_minus_two_and_fails_the_call() {
    let table = [
        "not json",
        r#"{"url":"https://api.example/"}"#,
        r#"{"method":"GET","url":"https://api.example/","headers":{"A":1}}"#,
    ];
    for request in table {
        let guest = requester(request);
        let egress = FakeEgress::new();
        let outcome = run(&guest, egress.clone()).await;
        assert_eq!(summary(&outcome), "connector_runtime_error sandbox", "{request}");
        assert!(failure(&outcome).message.contains("malformed http_request"), "{}", failure(&outcome).message);
        assert!(egress.seen().is_empty(), "{request}");
    }
    // What the guest saw: -2, and no response to read.
    let (wat, ptr, len) = with_http_imports().bytes(b"{");
    let wat = log_int(wat, "rc", &format!("(call $http_request (i32.const {ptr}) (i32.const {len}))"));
    let guest = log_int(wat, "status", "(call $http_response_status)");
    let outcome = run(&guest, FakeEgress::new()).await;
    assert_eq!(outcome.logs, vec![log("rc", "-2"), log("status", "-1")]);
    assert_eq!(summary(&outcome), "connector_runtime_error sandbox");
}

#[tokio::test]
async fn log_lines_are_attached_to_the_outcome() {
    let (wat, info_ptr, info_len) = with_http_imports().bytes(b"info");
    let (wat, msg_ptr, msg_len) = wat.bytes("listing issues for ácme".as_bytes());
    let (wat, warn_ptr, warn_len) = wat.bytes(b"warn");
    let (wat, bad_ptr, bad_len) = wat.bytes(&[0xff, b'x']);
    let guest = wat
        .run(&format!(
            "(call $log (i32.const {info_ptr}) (i32.const {info_len}) (i32.const {msg_ptr}) (i32.const {msg_len}))"
        ))
        .run(&format!(
            "(call $log (i32.const {warn_ptr}) (i32.const {warn_len}) (i32.const {bad_ptr}) (i32.const {bad_len}))"
        ))
        .write(1, r#"{"output":null}"#);
    let outcome = run(&guest, FakeEgress::new()).await;
    assert_eq!(summary(&outcome), "ok null");
    assert_eq!(outcome.logs, vec![log("info", "listing issues for ácme"), log("warn", "\u{fffd}x")]);

    let out_of_bounds = with_http_imports()
        .run("(call $log (i32.const 0) (i32.const 4) (i32.const 65530) (i32.const 100))")
        .write(1, r#"{"output":null}"#);
    let outcome = run(&out_of_bounds, FakeEgress::new()).await;
    assert_eq!(summary(&outcome), "connector_runtime_error sandbox");
    assert!(failure(&outcome).message.contains("log: guest range"), "{}", failure(&outcome).message);
}

#[tokio::test]
async fn time_spent_waiting_for_the_hooks_counts_against_the_wall_time() {
    // Compiled before the clock starts: only the call is timed against the limit.
    let guest = requester(r#"{"method":"GET","url":"https://api.example/"}"#).load();
    let wall_time = Duration::from_millis(100);
    let started = Instant::now();
    let outcome =
        call_with(&guest, json!({}), Limits { wall_time, ..limits() }, FakeEgress::slow(Duration::from_secs(5))).await;
    let elapsed = started.elapsed();
    assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "time""#);
    assert!(elapsed >= wall_time && elapsed <= wall_time + Duration::from_millis(50), "{elapsed:?}");
}
