//! `aileron_host` spawn functions: both conventions, detected per module from the imports'
//! signatures, handed to the embedder's hooks; refusals recorded like refused requests.

use aileron_core::policy::SpawnEnvelope;
use aileron_sandbox::GuestSpawn;
use serde_json::json;

use crate::guest::{FakeEgress, Wat, call_with, failure, limits, summary};

/// Imports of the handle convention (the seed ADR's).
fn handles() -> Wat {
    Wat::new()
        .host("spawn", "i32 i32", "i32")
        .host("spawn_op", "i32 i32 i32 i32", "i32")
        .host("spawn_status", "i32", "i32")
        .host("spawn_output_size", "i32 i32", "i32")
        .host("spawn_output_read", "i32 i32 i32 i32", "i32")
        .local("$a")
        .local("$b")
}

/// Imports of the single-slot convention (the original project's).
fn single_slot() -> Wat {
    Wat::new()
        .host("spawn_op", "i32 i32 i32 i32", "i32")
        .host("spawn_status", "", "i32")
        .host("spawn_output_size", "i32", "i32")
        .host("spawn_output_read", "i32 i32 i32", "i32")
        .local("$a")
        .local("$b")
}

/// `(local.set $<local> (call $spawn_op "<op>" <args>))`
fn spawn_op(wat: Wat, local: &str, op: &str, args: &str) -> Wat {
    let (wat, op_ptr, op_len) = wat.bytes(op.as_bytes());
    let (wat, args_ptr, args_len) = wat.bytes(args.as_bytes());
    wat.run(&format!(
        "(local.set ${local} (call $spawn_op (i32.const {op_ptr}) (i32.const {op_len}) (i32.const {args_ptr}) (i32.const {args_len})))"
    ))
}

#[tokio::test]
async fn handles_keep_every_spawn_readable() {
    let wat = spawn_op(handles(), "a", "first", r#"{"x":"1"}"#);
    let guest = spawn_op(wat, "b", "second", "{}")
        .write(1, r#"{"output":["#)
        .write_int("(local.get $a)")
        .write(1, ",")
        .write_int("(local.get $b)")
        .write(1, ",")
        .write_int("(call $spawn_status (local.get $a))")
        .write(1, ",")
        .write_int("(call $spawn_status (local.get $b))")
        .write(1, ",")
        .write_int("(call $spawn_output_size (local.get $a) (i32.const 0))")
        .write(1, ",")
        .write_int("(call $spawn_output_size (local.get $b) (i32.const 1))")
        .write(1, ",")
        .write_int("(call $spawn_output_read (local.get $a) (i32.const 0) (i32.const 16384) (i32.const 100))")
        .write(1, r#",""#)
        .run("(call $write (i32.const 1) (i32.const 16384) (i32.const 9))")
        .write(1, r#"","#)
        .write_int("(call $spawn_status (i32.const 7))")
        .write(1, ",")
        .write_int("(call $spawn_output_size (local.get $a) (i32.const 2))")
        .write(1, "]}");
    let egress = FakeEgress::new();
    let outcome = call_with(&guest.load(), json!({}), limits(), egress.clone()).await;
    assert_eq!(summary(&outcome), r#"ok [0,1,5,6,9,3,9,"out:first",-1,-1]"#);
    assert_eq!(
        egress.spawned(),
        vec![
            GuestSpawn::Operation { op: "first".into(), args: json!({"x": "1"}) },
            GuestSpawn::Operation { op: "second".into(), args: json!({}) },
        ]
    );
}

#[tokio::test]
async fn the_single_slot_reads_the_last_spawn() {
    let wat = spawn_op(single_slot(), "a", "first", "{}");
    let guest = spawn_op(wat, "b", "second", "")
        .write(1, r#"{"output":["#)
        .write_int("(local.get $a)")
        .write(1, ",")
        .write_int("(local.get $b)")
        .write(1, ",")
        .write_int("(call $spawn_status)")
        .write(1, ",")
        .write_int("(call $spawn_output_size (i32.const 0))")
        .write(1, ",")
        .write_int("(call $spawn_output_read (i32.const 1) (i32.const 16384) (i32.const 2))")
        .write(1, "]}");
    let outcome = call_with(&guest.load(), json!({}), limits(), FakeEgress::new()).await;
    assert_eq!(summary(&outcome), "ok [0,0,6,10,2]");
}

#[tokio::test]
async fn refusals_return_their_codes_and_win_over_stdout() {
    // (operation, arguments, outcome)
    let table = [
        ("denied", "{}", "capability_denied action"),
        ("nosandbox", "{}", "spawn_sandbox_unavailable sandbox"),
        ("ok", "[1]", "connector_runtime_error sandbox"),
        ("ok", "not json", "connector_runtime_error sandbox"),
    ];
    for (op, args, expected) in table {
        let guest =
            spawn_op(handles(), "a", op, args).write(1, r#"{"output":"#).write_int("(local.get $a)").write(1, "}");
        let outcome = call_with(&guest.load(), json!({}), limits(), FakeEgress::new()).await;
        assert_eq!(summary(&outcome), expected, "{op} {args}");
        // The guest printed the code it got; the recorded failure replaced it.
        if op == "denied" {
            assert_eq!(failure(&outcome).details["requested"], "spawn:denied");
        }
    }
    // The codes themselves: the guest traps unless it got the expected one.
    for (op, code) in [("denied", -1), ("nosandbox", -3), ("ok", -2)] {
        let args = if op == "ok" { "[1]" } else { "{}" };
        let guest = spawn_op(handles(), "a", op, args)
            .run(&format!("(if (i32.ne (local.get $a) (i32.const {code})) (then unreachable))"));
        let outcome = call_with(&guest.load(), json!({}), limits(), FakeEgress::new()).await;
        assert!(!summary(&outcome).contains("trap"), "{op}: {}", summary(&outcome));
        assert!(outcome.result.is_err(), "{op}");
    }
}

#[tokio::test]
async fn envelopes_are_parsed_strictly() {
    let envelope = r#"{"program":"/usr/bin/git","argv":["git","status"],"env":{"A":"1"},"cwd":"/tmp","stdin":"in"}"#;
    let (wat, ptr, len) = handles().bytes(envelope.as_bytes());
    let guest = wat
        .run(&format!("(local.set $a (call $spawn (i32.const {ptr}) (i32.const {len})))"))
        .write(1, r#"{"output":"#)
        .write_int("(call $spawn_status (local.get $a))")
        .write(1, "}");
    let egress = FakeEgress::new();
    let outcome = call_with(&guest.load(), json!({}), limits(), egress.clone()).await;
    assert_eq!(summary(&outcome), "ok 12");
    let expected = SpawnEnvelope {
        program: "/usr/bin/git".into(),
        argv: vec!["git".into(), "status".into()],
        env: Some([("A".to_string(), "1".to_string())].into_iter().collect()),
        cwd: Some("/tmp".into()),
        stdin: Some("in".into()),
        credential_env_keys: None,
    };
    assert_eq!(egress.spawned(), vec![GuestSpawn::Envelope(expected)]);

    // A field this version does not know is refused, not ignored.
    let (wat, ptr, len) = handles().bytes(br#"{"program":"/bin/sh","argv":["sh"],"privileged":true}"#);
    let guest = wat.run(&format!("(local.set $a (call $spawn (i32.const {ptr}) (i32.const {len})))"));
    let egress = FakeEgress::new();
    let outcome = call_with(&guest.load(), json!({}), limits(), egress.clone()).await;
    assert_eq!(summary(&outcome), "connector_runtime_error sandbox");
    assert!(failure(&outcome).message.contains("malformed spawn request"), "{}", failure(&outcome).message);
    assert!(egress.spawned().is_empty());
}
