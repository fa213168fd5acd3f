//! Per-call limits: wall time (computing and sleeping guests), memory, stdout, stderr, fuel.

use std::time::{Duration, Instant};

use aileron_sandbox::{CallRequest, Limits, Runtime, RuntimeConfig};

use crate::guest::{FakeEgress, Wat, call, failure, limits, load_into, summary};

/// Every limit stop must land within this much of the limit.
const STOP_SLACK: Duration = Duration::from_millis(50);

fn infinite_loop() -> Wat {
    Wat::new().run("(loop $forever (br $forever))")
}

/// Sleeps `nanos` with one relative monotonic clock subscription, then prints the userdata of
/// the event it got back and the number of events.
pub fn sleeper(nanos: u64) -> Wat {
    Wat::new()
        .wasi("poll_oneoff", "i32 i32 i32 i32", "i32")
        .local("$errno")
        .run(&format!(
            "(i64.store (i32.const 256) (i64.const 77))
             (i32.store8 (i32.const 264) (i32.const 0))
             (i32.store (i32.const 272) (i32.const 1))
             (i64.store (i32.const 280) (i64.const {nanos}))
             (i64.store (i32.const 288) (i64.const 0))
             (i32.store16 (i32.const 296) (i32.const 0))
             (local.set $errno (call $poll_oneoff (i32.const 256) (i32.const 320) (i32.const 1) (i32.const 352)))"
        ))
        .write(1, r#"{"output":["#)
        .write_int("(local.get $errno)")
        .write(1, ",")
        .write_int("(i32.wrap_i64 (i64.load (i32.const 320)))")
        .write(1, ",")
        .write_int("(i32.load (i32.const 352))")
        .write(1, "]}")
}

#[tokio::test]
async fn a_computing_guest_stops_at_the_wall_time_limit() {
    let module = infinite_loop().load();
    for wall_time in [Duration::from_millis(150), Duration::from_millis(400)] {
        let started = Instant::now();
        let outcome = call(&module, Limits { wall_time, ..limits() }).await;
        let elapsed = started.elapsed();
        assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "time""#);
        assert!(elapsed >= wall_time, "stopped early: {elapsed:?}");
        assert!(elapsed <= wall_time + STOP_SLACK, "stopped late: {elapsed:?} for a limit of {wall_time:?}");
        assert!(failure(&outcome).message.contains(&format!("{} ms", wall_time.as_millis())));
    }
}

/// The epoch ticker sleeps while no call runs (an idle daemon is woken by nothing), and a guest
/// that starts computing after an idle spell is still stopped at its wall time.
#[tokio::test]
async fn the_epoch_stands_still_while_no_call_runs_and_limits_hold_after_it() {
    // A runtime of its own: the shared one has other tests' calls running.
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let wasm = infinite_loop().wasm();
    let module = load_into(&runtime, &wasm);
    let idle_ticks = || async {
        let before = runtime.epoch_ticks();
        tokio::time::sleep(Duration::from_millis(60)).await;
        runtime.epoch_ticks() - before
    };
    assert_eq!(idle_ticks().await, 0, "the epoch advanced with no call running");
    let wall_time = Duration::from_millis(150);
    let started = Instant::now();
    let request =
        CallRequest { op: "run".into(), args: serde_json::json!({}), limits: Limits { wall_time, ..limits() } };
    let outcome = runtime.call(&module, request, FakeEgress::new()).await;
    let elapsed = started.elapsed();
    assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "time""#);
    assert!(elapsed >= wall_time && elapsed <= wall_time + STOP_SLACK, "{elapsed:?}");
    assert!(runtime.epoch_ticks() >= 10, "the call ran without the ticker: {} ticks", runtime.epoch_ticks());
    // At most one tick more after the call ended, then none.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(idle_ticks().await, 0, "the epoch kept advancing after the call");
}

#[tokio::test]
async fn a_sleeping_guest_really_sleeps_and_stops_at_the_wall_time_limit() {
    let started = Instant::now();
    let outcome = call(&sleeper(200_000_000).load(), limits()).await;
    assert_eq!(summary(&outcome), "ok [0,77,1]");
    assert!(started.elapsed() >= Duration::from_millis(200), "{:?}", started.elapsed());

    let wall_time = Duration::from_millis(150);
    // Compiled before the clock starts: only the call is timed against the limit.
    let long_sleeper = sleeper(10_000_000_000).load();
    let started = Instant::now();
    let outcome = call(&long_sleeper, Limits { wall_time, ..limits() }).await;
    let elapsed = started.elapsed();
    assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "time""#);
    assert!(elapsed >= wall_time && elapsed <= wall_time + STOP_SLACK, "{elapsed:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn concurrent_sleeping_calls_overlap() {
    // On one executor thread: if a sleeping guest blocked the thread, two calls would take 2×.
    let module = sleeper(300_000_000).load();
    let started = Instant::now();
    let (first, second) = tokio::join!(call(&module, limits()), call(&module, limits()));
    let elapsed = started.elapsed();
    assert_eq!((summary(&first), summary(&second)), ("ok [0,77,1]".to_string(), "ok [0,77,1]".to_string()));
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(450), "sleeps did not overlap: {elapsed:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn a_computing_guest_does_not_starve_other_calls() {
    // The epoch callback yields to the executor, so a sleeper on the same thread wakes on time.
    let spinner = infinite_loop().load();
    let sleeper = sleeper(100_000_000).load();
    let started = Instant::now();
    let spin = call(&spinner, Limits { wall_time: Duration::from_millis(600), ..limits() });
    let nap = async {
        let outcome = call(&sleeper, limits()).await;
        (outcome, started.elapsed())
    };
    let (spun, (napped, napped_after)) = tokio::join!(spin, nap);
    assert_eq!(summary(&spun), r#"resource_limit_exceeded sandbox "time""#);
    assert_eq!(summary(&napped), "ok [0,77,1]");
    assert!(napped_after < Duration::from_millis(300), "the sleeper was starved: {napped_after:?}");
}

#[tokio::test]
async fn memory_limit_table() {
    let small = Limits { memory_bytes: 2 << 20, ..limits() };
    let grow_bomb = Wat::new().run(
        "(loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
         unreachable",
    );
    let grow_then_exit = Wat::new().run("(drop (memory.grow (i32.const 1000)))").exit(2);
    let handled = Wat::new().run("(drop (memory.grow (i32.const 1000)))").write(1, r#"{"output":"coped"}"#);
    let within = Wat::new().run("(drop (memory.grow (i32.const 16)))").write(1, r#"{"output":"fits"}"#);
    let table: Vec<(&str, Wat, &str)> = vec![
        ("grow bomb then trap", grow_bomb, r#"resource_limit_exceeded sandbox "memory""#),
        ("denied grow then exit 2", grow_then_exit, r#"resource_limit_exceeded sandbox "memory""#),
        (
            "initial memory above the limit",
            Wat::new().memory(r#"(memory (export "memory") 100)"#),
            r#"resource_limit_exceeded sandbox "memory""#,
        ),
        ("denied grow handled", handled, r#"ok "coped""#),
        ("grow within the limit", within, r#"ok "fits""#),
    ];
    for (name, guest, expected) in table {
        let started = Instant::now();
        let outcome = call(&guest.load(), small.clone()).await;
        assert_eq!(summary(&outcome), expected, "{name}");
        assert!(started.elapsed() < Duration::from_secs(2), "{name} took {:?}", started.elapsed());
    }
}

#[tokio::test]
async fn stdout_is_capped_and_stderr_keeps_its_tail() {
    let flood =
        Wat::new().run("(loop $again (call $write (i32.const 1) (i32.const 16384) (i32.const 4096)) (br $again))");
    let limits = Limits { max_stdout_bytes: 64 << 10, ..limits() };
    let outcome = call(&flood.load(), limits.clone()).await;
    assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "stdout""#);

    // Exactly at the cap is allowed.
    let exact = Wat::new().write(1, r#"{"output":"12345"}"#);
    let at_cap = Limits { max_stdout_bytes: r#"{"output":"12345"}"#.len(), ..limits.clone() };
    assert_eq!(summary(&call(&exact.load(), at_cap.clone()).await), r#"ok "12345""#);
    let below_cap = Limits { max_stdout_bytes: at_cap.max_stdout_bytes - 1, ..limits.clone() };
    assert_eq!(summary(&call(&exact.load(), below_cap).await), r#"resource_limit_exceeded sandbox "stdout""#);

    // A stderr flood is not an error; only its tail is kept.
    let noisy = Wat::new()
        .local("$i")
        .run(
            "(loop $again
               (call $write (i32.const 2) (i32.const 16384) (i32.const 4096))
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))",
        )
        .write(2, "last words")
        .exit(9);
    let outcome = call(&noisy.load(), Limits { max_stderr_bytes: 1024, ..limits }).await;
    assert_eq!(summary(&outcome), "connector_runtime_error sandbox 9");
    assert!(failure(&outcome).details["stderr_tail"].as_str().unwrap().ends_with("last words"));
}

#[tokio::test]
async fn fuel_limits_computation_when_set() {
    let metered = Runtime::new(RuntimeConfig { fuel_metering: true, ..RuntimeConfig::default() }).unwrap();
    let call_on = |module, fuel| {
        crate::guest::call_on(&metered, module, serde_json::json!({}), Limits { fuel, ..limits() }, FakeEgress::new())
    };
    let module = load_into(&metered, &infinite_loop().wasm());
    let started = Instant::now();
    let outcome = call_on(&module, Some(100_000)).await;
    assert_eq!(summary(&outcome), r#"resource_limit_exceeded sandbox "fuel""#);
    assert!(started.elapsed() < Duration::from_secs(1));

    let counted = Wat::new()
        .local("$i")
        .run(
            "(loop $again
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))",
        )
        .write(1, r#"{"output":"done"}"#);
    let module = load_into(&metered, &counted.wasm());
    let plenty = call_on(&module, Some(1_000_000)).await;
    assert_eq!(summary(&plenty), r#"ok "done""#);
    let scarce = call_on(&module, Some(500)).await;
    assert_eq!(summary(&scarce), r#"resource_limit_exceeded sandbox "fuel""#);
    assert_eq!(summary(&call_on(&module, None).await), r#"ok "done""#, "no budget: unmetered");

    // The default runtime (the daemon's) compiles no fuel checks: a budget is refused before the
    // guest starts, never ignored.
    let module = counted.load();
    let refused = call(&module, Limits { fuel: Some(1_000_000), ..limits() }).await;
    assert_eq!(summary(&refused), "connector_runtime_error runtime");
    assert!(failure(&refused).message.contains("compiles no fuel checks"), "{:?}", failure(&refused));
}

#[tokio::test]
async fn calls_beyond_the_pooled_slots_wait_for_one_within_their_wall_time() {
    use std::sync::Arc;

    use aileron_sandbox::{CallRequest, Runtime, RuntimeConfig};

    let runtime = Runtime::new(RuntimeConfig { concurrent_calls: Some(2), ..RuntimeConfig::default() }).unwrap();
    let wasm = sleeper(300_000_000).wasm();
    let module = load_into(&runtime, &wasm);
    let call = |wall_time: Duration| {
        let request =
            CallRequest { op: "run".into(), args: serde_json::json!({}), limits: Limits { wall_time, ..limits() } };
        runtime.call(&module, request, crate::guest::FakeEgress::new() as Arc<_>)
    };
    let started = Instant::now();
    // Two calls hold both slots for 300 ms; a third may wait 100 ms and cannot get one; a fourth
    // may wait long enough, gets a slot when the first two end, and sleeps its own 300 ms.
    let (first, second, impatient, patient) = tokio::join!(
        call(Duration::from_secs(10)),
        call(Duration::from_secs(10)),
        call(Duration::from_millis(100)),
        call(Duration::from_secs(10)),
    );
    for outcome in [&first, &second, &patient] {
        assert_eq!(summary(outcome), "ok [0,77,1]");
    }
    assert_eq!(summary(&impatient), r#"resource_limit_exceeded sandbox "time""#);
    assert!(failure(&impatient).message.contains("no instance slot came free"), "{}", failure(&impatient).message);
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "the fourth call waited for a slot: {:?}",
        started.elapsed()
    );
}

/// The pool lets 1,024 calls run at once, so their memory together has a ceiling of its own:
/// while two calls hold 2 MiB each of a 5 MiB budget, a third cannot take its 2 MiB and fails with
/// a memory limit that names the budget (not its own cap); once they end, the memory is back.
#[tokio::test]
async fn calls_running_at_once_share_one_memory_budget() {
    use std::sync::Arc;

    use aileron_sandbox::{CallRequest, Runtime, RuntimeConfig};

    let runtime = Runtime::new(RuntimeConfig { memory_budget: Some(5 << 20), ..RuntimeConfig::default() }).unwrap();
    let wasm = sleeper(300_000_000).memory(r#"(memory (export "memory") 32)"#).wasm();
    let module = load_into(&runtime, &wasm);
    let call = || {
        let request = CallRequest { op: "run".into(), args: serde_json::json!({}), limits: limits() };
        runtime.call(&module, request, crate::guest::FakeEgress::new() as Arc<_>)
    };
    let late = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        call().await
    };
    let (first, second, third) = tokio::join!(call(), call(), late);
    for outcome in [&first, &second] {
        assert_eq!(summary(outcome), "ok [0,77,1]");
    }
    assert_eq!(summary(&third), r#"resource_limit_exceeded sandbox "memory""#);
    let message = &failure(&third).message;
    assert!(message.contains("5 MiB of memory the daemon allows its connectors together"), "{message}");
    assert_eq!(summary(&call().await), "ok [0,77,1]", "the first two calls gave their memory back");
}

/// A call made with `call_holding` keeps its pooled slot until its instance is dropped (the
/// runner drops it while its audit record syncs), and the next call gets the slot then.
#[tokio::test]
async fn a_held_instance_keeps_its_slot_until_dropped() {
    use std::sync::Arc;

    use aileron_sandbox::{CallRequest, Runtime, RuntimeConfig};

    let runtime = Runtime::new(RuntimeConfig { concurrent_calls: Some(1), ..RuntimeConfig::default() }).unwrap();
    let wasm = sleeper(0).wasm();
    let module = load_into(&runtime, &wasm);
    let request = || CallRequest {
        op: "run".into(),
        args: serde_json::json!({}),
        limits: Limits { wall_time: Duration::from_millis(200), ..limits() },
    };
    let hooks = || crate::guest::FakeEgress::new() as Arc<_>;
    let (first, instance) = runtime.call_holding(&module, &request(), hooks()).await;
    assert_eq!(summary(&first), "ok [0,77,1]");
    assert!(instance.holds_slot());
    let blocked = runtime.call(&module, request(), hooks()).await;
    assert!(failure(&blocked).message.contains("no instance slot came free"), "{}", failure(&blocked).message);
    drop(instance);
    let after = runtime.call(&module, request(), hooks()).await;
    assert_eq!(summary(&after), "ok [0,77,1]");
    // `call` releases its own instance before answering.
    assert_eq!(summary(&runtime.call(&module, request(), hooks()).await), "ok [0,77,1]");
}
