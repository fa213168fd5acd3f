//! The WASI preview-1 shim, probed function by function: each probe guest evaluates one
//! expression and exits with its value, so the table compares errnos and observed values.

use aileron_sandbox::CallOutcome;
use serde_json::Value;

use crate::guest::{Wat, call, limits, summary};

/// The exit code of a probe: 0 when the guest exited cleanly.
fn exit_code(outcome: &CallOutcome) -> i64 {
    match &outcome.result {
        Ok(Value::Null) => 0,
        Ok(other) => panic!("probe printed {other}"),
        Err(failure) => failure.details.get("exit_code").and_then(Value::as_i64).unwrap_or_else(|| panic!("{failure}")),
    }
}

/// Every import a probe may use, declared once so each probe is just an expression.
fn probe(expression: &str) -> Wat {
    [
        ("fd_read", "i32 i32 i32 i32"),
        ("fd_close", "i32"),
        ("fd_seek", "i32 i64 i32 i32"),
        ("fd_tell", "i32 i32"),
        ("fd_pread", "i32 i32 i32 i64 i32"),
        ("fd_sync", "i32"),
        ("fd_fdstat_get", "i32 i32"),
        ("fd_fdstat_set_flags", "i32 i32"),
        ("fd_filestat_get", "i32 i32"),
        ("fd_prestat_get", "i32 i32"),
        ("fd_prestat_dir_name", "i32 i32 i32"),
        ("path_open", "i32 i32 i32 i32 i32 i64 i64 i32 i32"),
        ("proc_raise", "i32"),
        ("sock_accept", "i32 i32 i32"),
        ("sock_send", "i32 i32 i32 i32 i32"),
        ("clock_time_get", "i32 i64 i32"),
        ("clock_res_get", "i32 i32"),
        ("random_get", "i32 i32"),
        ("args_sizes_get", "i32 i32"),
        ("environ_sizes_get", "i32 i32"),
        ("poll_oneoff", "i32 i32 i32 i32"),
        ("sched_yield", ""),
    ]
    .into_iter()
    .fold(Wat::new(), |wat, (name, params)| wat.wasi(name, params, "i32"))
    .run(&format!("(call $proc_exit {expression})"))
}

const EBADF: i64 = 8;
const EINVAL: i64 = 28;
const ENOSYS: i64 = 52;
const ENOTSOCK: i64 = 57;
const ESPIPE: i64 = 70;

#[tokio::test]
async fn wasi_probe_table() {
    let stdin_len = r#"{"args":{"n":1},"op":"run"}"#.len() as i64;
    let table: Vec<(&str, &str, i64)> = vec![
        ("write to an unknown fd", "(call $fd_write (i32.const 5) (i32.const 0) (i32.const 0) (i32.const 8))", EBADF),
        ("write to stdin", "(call $fd_write (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 8))", EBADF),
        ("read from stdout", "(call $fd_read (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 8))", EBADF),
        ("no preopens", "(call $fd_prestat_get (i32.const 3) (i32.const 256))", EBADF),
        ("no preopen names", "(call $fd_prestat_dir_name (i32.const 3) (i32.const 256) (i32.const 8))", EBADF),
        (
            "path_open",
            "(call $path_open (i32.const 3) (i32.const 0) (i32.const 4096) (i32.const 1) (i32.const 0) \
             (i64.const 0) (i64.const 0) (i32.const 0) (i32.const 256))",
            EBADF,
        ),
        ("seek stdout", "(call $fd_seek (i32.const 1) (i64.const 0) (i32.const 0) (i32.const 256))", ESPIPE),
        ("seek unknown fd", "(call $fd_seek (i32.const 9) (i64.const 0) (i32.const 0) (i32.const 256))", EBADF),
        ("tell stdin", "(call $fd_tell (i32.const 0) (i32.const 256))", ESPIPE),
        (
            "pread stdin",
            "(call $fd_pread (i32.const 0) (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 256))",
            ESPIPE,
        ),
        (
            "pread unknown fd",
            "(call $fd_pread (i32.const 4) (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 256))",
            EBADF,
        ),
        ("sync stdout", "(call $fd_sync (i32.const 1))", EINVAL),
        ("close stdout", "(call $fd_close (i32.const 1))", 0),
        ("close unknown fd", "(call $fd_close (i32.const 3))", EBADF),
        ("non-blocking stdout", "(call $fd_fdstat_set_flags (i32.const 1) (i32.const 4))", 0),
        ("proc_raise", "(call $proc_raise (i32.const 6))", ENOSYS),
        ("accept on stdin", "(call $sock_accept (i32.const 0) (i32.const 0) (i32.const 256))", ENOTSOCK),
        (
            "send on unknown fd",
            "(call $sock_send (i32.const 5) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 256))",
            EBADF,
        ),
        ("cpu-time clock", "(call $clock_time_get (i32.const 2) (i64.const 0) (i32.const 256))", EINVAL),
        ("sched_yield", "(call $sched_yield)", 0),
        (
            "empty argv",
            "(i32.store (i32.const 256) (i32.const 99)) (i32.store (i32.const 260) (i32.const 99))
             (i32.add (call $args_sizes_get (i32.const 256) (i32.const 260))
                      (i32.add (i32.load (i32.const 256)) (i32.load (i32.const 260))))",
            0,
        ),
        (
            "empty environment",
            "(i32.store (i32.const 256) (i32.const 99)) (i32.store (i32.const 260) (i32.const 99))
             (i32.add (call $environ_sizes_get (i32.const 256) (i32.const 260))
                      (i32.add (i32.load (i32.const 256)) (i32.load (i32.const 260))))",
            0,
        ),
        (
            "realtime is after 2023",
            "(i32.and (i32.eqz (call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 256)))
                      (i64.gt_u (i64.load (i32.const 256)) (i64.const 1700000000000000000)))",
            1,
        ),
        (
            "monotonic never goes back",
            "(drop (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 256)))
             (drop (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 264)))
             (i64.ge_u (i64.load (i32.const 264)) (i64.load (i32.const 256)))",
            1,
        ),
        (
            "clock resolution",
            "(i32.add (call $clock_res_get (i32.const 1) (i32.const 256)) (i32.wrap_i64 (i64.load (i32.const 256))))",
            1,
        ),
        (
            "random bytes",
            "(i32.and (i32.eqz (call $random_get (i32.const 256) (i32.const 16)))
                      (i64.ne (i64.or (i64.load (i32.const 256)) (i64.load (i32.const 264))) (i64.const 0)))",
            1,
        ),
        (
            "stdout is a character device",
            "(i32.add (call $fd_fdstat_get (i32.const 1) (i32.const 256)) (i32.load8_u (i32.const 256)))",
            2,
        ),
        ("fdstat of an unknown fd", "(call $fd_fdstat_get (i32.const 3) (i32.const 256))", EBADF),
        (
            "filestat of stderr",
            "(i32.add (call $fd_filestat_get (i32.const 2) (i32.const 256)) (i32.load8_u (i32.const 272)))",
            2,
        ),
        (
            "poll without subscriptions",
            "(call $poll_oneoff (i32.const 256) (i32.const 320) (i32.const 0) (i32.const 352))",
            EINVAL,
        ),
        (
            "poll on stdin is ready with the request's size",
            "(i64.store (i32.const 256) (i64.const 5)) (i32.store8 (i32.const 264) (i32.const 1))
             (i32.store (i32.const 272) (i32.const 0))
             (drop (call $poll_oneoff (i32.const 256) (i32.const 320) (i32.const 1) (i32.const 352)))
             (i32.wrap_i64 (i64.load (i32.const 336)))",
            stdin_len,
        ),
    ];
    for (name, expression, expected) in table {
        let outcome = call(&probe(expression).load(), limits()).await;
        assert_eq!(exit_code(&outcome), expected, "{name}: {}", summary(&outcome));
    }
}

#[tokio::test]
async fn out_of_bounds_pointers_trap_in_every_kind_of_function() {
    let table = [
        ("(call $random_get (i32.const 65000) (i32.const 1000))", "random_get"),
        ("(call $clock_time_get (i32.const 0) (i64.const 0) (i32.const 65533))", "clock_time_get"),
        ("(call $args_sizes_get (i32.const -4) (i32.const 0))", "args_sizes_get"),
        ("(call $fd_read (i32.const 0) (i32.const 65535) (i32.const 2) (i32.const 8))", "fd_read"),
        ("(call $poll_oneoff (i32.const 65500) (i32.const 320) (i32.const 2) (i32.const 352))", "poll_oneoff"),
    ];
    for (expression, function) in table {
        let outcome = call(&probe(expression).load(), limits()).await;
        assert_eq!(summary(&outcome), "connector_runtime_error sandbox", "{function}");
        let message = &outcome.result.as_ref().unwrap_err().message;
        assert!(message.contains(&format!("{function}: guest range")), "{function}: {message}");
    }
}
