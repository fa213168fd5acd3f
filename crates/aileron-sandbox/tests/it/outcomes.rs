//! What a guest prints, how it exits and how it crashes, mapped to the call's result.

use serde_json::json;

use crate::guest::{FakeEgress, Wat, call, call_with, failure, limits, summary};

/// Reads all of stdin into 16384.. and prints `{"output": <stdin>}`.
pub fn echo() -> Wat {
    Wat::new()
        .wasi("fd_read", "i32 i32 i32 i32", "i32")
        .local("$total")
        .run(
            r#"
            (block $eof (loop $more
              (i32.store (i32.const 0) (i32.add (i32.const 16384) (local.get $total)))
              (i32.store (i32.const 4) (i32.sub (i32.const 32768) (local.get $total)))
              (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
              (br_if $eof (i32.eqz (i32.load (i32.const 8))))
              (local.set $total (i32.add (local.get $total) (i32.load (i32.const 8))))
              (br $more)))"#,
        )
        .write(1, r#"{"output":"#)
        .run("(call $write (i32.const 1) (i32.const 16384) (local.get $total))")
        .write(1, "}")
}

#[tokio::test]
async fn echo_guest_receives_the_request_on_stdin() {
    let module = echo().load();
    let args = json!({"text": "héllo", "list": [1, 2, {"deep": null}]});
    let outcome = call_with(&module, args.clone(), limits(), FakeEgress::new()).await;
    assert_eq!(outcome.result.unwrap(), json!({"op": "run", "args": args}));
}

#[tokio::test]
async fn stdout_and_exit_code_table() {
    let error =
        |class: &str| format!(r#"{{"error":{{"class":"{class}","message":"it broke","details":{{"status":503}}}}}}"#);
    let table: Vec<(&str, Wat, &str)> = vec![
        ("empty stdout", Wat::new(), "ok null"),
        ("output object", Wat::new().write(1, r#"{"output": {"id": 7}}"#), r#"ok {"id":7}"#),
        ("output split over writes", Wat::new().write(1, r#"{"out"#).write(1, r#"put": [true]}"#), "ok [true]"),
        ("output then exit 0", Wat::new().write(1, r#"{"output": 1}"#).exit(0), "ok 1"),
        ("malformed", Wat::new().write(1, "hello"), "connector_runtime_error sandbox"),
        ("two objects", Wat::new().write(1, r#"{"output":1}{"output":2}"#), "connector_runtime_error sandbox"),
        ("error object", Wat::new().write(1, &error("network_error")), "network_error external"),
        ("error object then exit 1", Wat::new().write(1, &error("network_error")).exit(1), "network_error external"),
        (
            "error object then trap",
            Wat::new().write(1, &error("external_api_error")).run("unreachable"),
            "external_api_error external",
        ),
        (
            "forged host class",
            Wat::new().write(1, &error("capability_denied")),
            r#"connector_runtime_error sandbox "capability_denied""#,
        ),
        (
            "forged hash_mismatch",
            Wat::new().write(1, &error("hash_mismatch")),
            r#"connector_runtime_error sandbox "hash_mismatch""#,
        ),
        (
            "guest-only class",
            Wat::new().write(1, &error("unknown_op")),
            r#"connector_runtime_error sandbox "unknown_op""#,
        ),
        ("exit 3 without error", Wat::new().write(2, "boom").exit(3), "connector_runtime_error sandbox 3"),
        ("exit 1 after output", Wat::new().write(1, r#"{"output": 1}"#).exit(1), "connector_runtime_error sandbox 1"),
        ("exit -1", Wat::new().exit(-1), "connector_runtime_error sandbox -1"),
        ("trap", Wat::new().write(1, r#"{"output": 1}"#).run("unreachable"), "connector_runtime_error sandbox"),
    ];
    for (name, guest, expected) in table {
        let outcome = call(&guest.load(), limits()).await;
        assert_eq!(summary(&outcome), expected, "{name}");
    }
}

#[tokio::test]
async fn guest_errors_keep_message_details_and_retriability() {
    let guest = Wat::new()
        .write(1, r#"{"error":{"class":"external_api_error","message":"rate limited","details":{"status":429,"x":1}}}"#)
        .exit(1);
    let outcome = call(&guest.load(), limits()).await;
    let failure = failure(&outcome);
    assert_eq!(failure.message, "rate limited");
    assert!(failure.retriable);
    assert_eq!(failure.details["status"], 429);
    assert_eq!(failure.details["x"], 1);
}

#[tokio::test]
async fn crashes_report_exit_code_stderr_tail_and_trap() {
    let long_stderr = format!("{}THE END", "x".repeat(1000));
    let exited = call(&Wat::new().write(2, &long_stderr).exit(42).load(), limits()).await;
    assert_eq!(failure(&exited).details["exit_code"], 42);
    let tail = failure(&exited).details["stderr_tail"].as_str().unwrap();
    assert_eq!(tail.len(), 256);
    assert!(tail.ends_with("THE END"), "{tail}");

    let trapped = call(&Wat::new().write(2, "about to crash").run("unreachable").load(), limits()).await;
    assert!(failure(&trapped).message.contains("unreachable"), "{}", failure(&trapped).message);
    assert_eq!(failure(&trapped).details["stderr_tail"], "about to crash");

    let malformed = call(&Wat::new().write(1, "not json at all").load(), limits()).await;
    assert_eq!(failure(&malformed).details["stdout_excerpt"], "not json at all");
}

#[tokio::test]
async fn traps_never_take_the_host_down() {
    let recursion = Wat::new()
        .item("(func $recurse (param i32) (result i32) (call $recurse (i32.add (local.get 0) (i32.const 1))))")
        .run("(drop (call $recurse (i32.const 0)))");
    let table: Vec<(&str, Wat, &str)> = vec![
        ("stack overflow", recursion, "call stack exhausted"),
        ("division by zero", Wat::new().run("(drop (i32.div_u (i32.const 1) (i32.const 0)))"), "divide by zero"),
        ("out-of-bounds load", Wat::new().run("(drop (i32.load (i32.const 70000)))"), "out of bounds"),
        (
            "host pointer out of bounds",
            Wat::new().run("(call $write (i32.const 1) (i32.const 65000) (i32.const 1000))"),
            "fd_write: guest range",
        ),
    ];
    for (name, guest, message) in table {
        let outcome = call(&guest.load(), limits()).await;
        assert_eq!(summary(&outcome), "connector_runtime_error sandbox", "{name}");
        assert!(failure(&outcome).message.contains(message), "{name}: {}", failure(&outcome).message);
    }
    // The runtime still works afterwards.
    assert_eq!(summary(&call(&Wat::new().write(1, r#"{"output":"alive"}"#).load(), limits()).await), r#"ok "alive""#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_isolated() {
    let module = echo().load();
    let calls = (0..8).map(|i| {
        let module = module.clone();
        tokio::spawn(async move { call_with(&module, json!({"i": i}), limits(), FakeEgress::new()).await })
    });
    let outcomes: Vec<_> = join_all(calls).await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        assert_eq!(outcome.result.unwrap(), json!({"op": "run", "args": {"i": i}}));
    }
}

async fn join_all<T: Send + 'static>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut results = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        results.push(handle.await.unwrap());
    }
    results
}

#[test]
fn the_runtime_and_its_calls_can_cross_threads() {
    fn shareable<T: Send + Sync>() {}
    fn sendable<T: Send>(_: &T) {}
    shareable::<aileron_sandbox::Runtime>();
    shareable::<aileron_sandbox::LoadedModule>();
    let module = Wat::new().load();
    // `tokio::spawn` needs the call's future to be Send.
    let future = call_with(&module, json!({}), limits(), FakeEgress::new());
    sendable(&future);
}
