//! Behaviour over time: retries per SPEC §9, the `/v1/actions/watch` SSE stream, and graceful
//! shutdown that finishes in-flight runs.

use std::time::Duration;

use crate::fake_github::FakeGithub;
use aileron::surfaces::cli::demo::{EXAMPLE_ACTIONS, EXAMPLE_WASM, example_manifest_for, render_action};
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
    let preview =
        harness.request("POST", "/v1/connectors/preview", Some(json!({"source": dir, "reference": reference}))).await;
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
    let once = text
        .replace("op = \"list_issues\"\n", "op = \"list_issues\"\nidempotent = false\n")
        .replace("list-issues", "list-once");
    assert_eq!(harness.add_action("list-once.md", &once).await.status, StatusCode::CREATED);
    let response = harness.run("list-once", args).await;
    assert_eq!(response.body["error"]["class"], "external_api_error");
    assert_eq!(upstream.recorder.count(), 5, "no retry for a not_idempotent step");

    // A non-retriable upstream answer (404) is not retried either.
    let (file_name, template) = EXAMPLE_ACTIONS[1];
    harness.add_action(file_name, &render_action(template, &hash)).await;
    let response = harness
        .run("get-issue", json!({"owner": "a", "repo": "b", "number": 99, "api_base": upstream.base_url()}))
        .await;
    assert_eq!(response.body["error"]["details"]["status"], 404, "{}", response.body);
    assert_eq!(response.body["error"]["retriable"], false);
    assert_eq!(upstream.recorder.count(), 6);
}

#[tokio::test]
async fn watchers_see_every_change_to_the_action_set() {
    let harness = Harness::new();
    let hash =
        harness.install("echo", &crate::support::guest_wasm("echo"), &crate::support::manifest("echo", &[], "")).await;
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
    cli.add_action(&ActionSpec {
        inputs: &[("ms", "integer", true)],
        ..ActionSpec::new("nap", "sleep", &hash, "sleep")
    });

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

/// Shutdown closes a kept-alive connection that is waiting for its next request at once: it
/// does not wait for the connection's header-read timeout (10 s), and every connection opened
/// before is told, also one that has served requests since it last waited.
#[test]
fn stopping_closes_idle_kept_alive_connections_at_once() {
    use std::io::{Read, Write};
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let daemon =
        aileron::surfaces::client::read_daemon_info(&cli.home.join("daemon.json")).expect("the daemon's record");
    let address = daemon.url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let request = format!("GET /v1/health HTTP/1.1\r\nhost: {address}\r\n\r\n");
    // Opened in order, so the answer on the second proves the first was accepted (the backlog is
    // first in, first out): none is still in the kernel's queue when the daemon stops.
    let mut connections: Vec<std::net::TcpStream> = (0..3)
        .map(|served| {
            let mut connection = std::net::TcpStream::connect(&address).unwrap();
            connection.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
            for _ in 0..served {
                connection.write_all(request.as_bytes()).unwrap();
                let mut answer = [0u8; 4096];
                let read = connection.read(&mut answer).unwrap();
                assert!(answer[..read].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..read]));
            }
            connection
        })
        .collect();
    let stopping = std::time::Instant::now();
    cli.ok(&["daemon", "stop"]);
    for (served, connection) in connections.iter_mut().enumerate() {
        let mut rest = Vec::new();
        connection.read_to_end(&mut rest).unwrap_or_else(|error| panic!("connection {served} left open: {error}"));
        assert!(rest.is_empty(), "connection {served} got {}", String::from_utf8_lossy(&rest));
    }
    assert!(
        stopping.elapsed() < Duration::from_secs(8),
        "the daemon waited for idle connections to time out: {:?}",
        stopping.elapsed()
    );
    assert!(!cli.home.join("daemon.json").exists());
}

/// A damaged `action-state.json` must not be read as "nothing disabled": that re-enabled every
/// disabled action at start, and the next enable/disable overwrote the rest of the file. The
/// daemon refuses to start instead, naming the file and the parse error with a hint, and leaves
/// the file as it was for the user to repair.
#[test]
fn a_damaged_action_state_file_stops_the_daemon_instead_of_re_enabling_actions() {
    let cli = Cli::with_echo_action("held-back");
    cli.ok(&["action", "disable", "held-back"]);
    cli.ok(&["daemon", "stop"]);
    let state = cli.home.join("action-state.json");
    let damaged = r#"{"held-back": {"enabled": false}"#;
    std::fs::write(&state, damaged).unwrap();

    for args in [&["daemon", "start"][..], &["action", "run", "held-back"][..]] {
        let output = cli.run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("action-state.json") && stderr.contains("line 1 column"),
            "{args:?} names the file and the place: {stderr}"
        );
        assert!(stderr.contains("hint: ") && stderr.contains("enables every installed action"), "{args:?}: {stderr}");
        assert!(!String::from_utf8_lossy(&output.stdout).contains("\"output\""), "{args:?} ran the disabled action");
    }
    assert_eq!(std::fs::read_to_string(&state).unwrap(), damaged, "the damaged file is left for the user to repair");
    let executed = std::fs::read_dir(cli.home.join("audit"))
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.unwrap().path()).ok())
        .any(|text| text.contains("action.executed"));
    assert!(!executed, "the disabled action never ran");

    std::fs::write(&state, "{\"held-back\": {\"enabled\": false}}\n").unwrap();
    let refused = cli.run(&["action", "run", "held-back"]);
    assert_eq!(refused.status.code(), Some(1), "repaired, the action is still disabled");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("disabled"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// The daemon's standard error is `daemon.log`; when that write fails (a full disk, here
/// `/dev/full`) the daemon goes on: a line it cannot log never takes down a request, the audit
/// writer or the daemon itself (`eprintln!` panicked — at the very first line, so a daemon on a
/// full disk died at start with status 101).
#[test]
fn the_daemon_keeps_serving_when_its_log_cannot_be_written() {
    let cli = Cli::with_echo_action("still-here");
    cli.ok(&["daemon", "stop"]);
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full");
    let mut daemon = cli
        .command(&["daemon", "run"])
        .stdin(std::process::Stdio::null())
        .stdout(full.try_clone().unwrap())
        .stderr(full)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cli.home.join("daemon.json").exists() {
        assert!(daemon.try_wait().unwrap().is_none(), "the daemon exited at start: {:?}", daemon.try_wait());
        assert!(std::time::Instant::now() < deadline, "no daemon.json");
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..3 {
        let result: serde_json::Value = serde_json::from_str(&cli.ok(&["action", "run", "still-here"])).unwrap();
        assert!(result["output"].is_object(), "{result}");
    }
    assert!(daemon.try_wait().unwrap().is_none(), "the runs were served by the daemon started on /dev/full");
    cli.ok(&["daemon", "stop"]);
    let status = daemon.wait().unwrap();
    assert!(status.success(), "a clean stop, logging to a full disk: {status}");
    assert!(cli.ok(&["audit", "verify"]).contains("ok"));
}

/// While the disk holding the audit log is full, a run is refused before its steps (SPEC §10:
/// risky work fails closed) — it used to run and then fail to record itself. The log keeps
/// headroom allocated past its end, so the refusals themselves are on record; once the disk has
/// room again the next run goes through. The audit directory is a tmpfs in a mount namespace of
/// the daemon's own (`unshare`), filled once the daemon has started.
#[test]
fn runs_are_refused_before_their_steps_while_the_audit_disk_is_full() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(FakeGithub::start()).unwrap();
    let cli = Cli::new();
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    cli.ok(&["daemon", "stop"]);
    let url = format!("url={}/status/200", upstream.base_url());
    let mut audit = SmallAuditDir::start(&cli, 1);
    cli.ok(&["action", "run", "fetch", "--arg", &url]);
    assert_eq!(upstream.recorder.count(), 1);

    // Full, with headroom left: refused before the steps, and the refusal is on record.
    audit.fill_disk();
    audit.post_until(&cli, |_, status| status["audit"].as_str().is_some_and(|audit| audit.contains("low on space")));
    let refused = cli.run(&["action", "run", "fetch", "--arg", &url]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("audit_unavailable") && stderr.contains("nothing was executed"), "{stderr}");
    assert_eq!(upstream.recorder.count(), 1, "the refused run never reached the upstream");
    let rejected: serde_json::Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.rejected"])).unwrap();
    assert!(
        rejected["items"].as_array().unwrap().iter().any(|r| r["payload"]["aileron.action.name"] == "fetch"),
        "the refusal is on record: {rejected}"
    );

    // Full to the last byte: still refused, nothing runs.
    audit.post_until(&cli, |answer, _| answer == reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let refused = cli.run(&["action", "run", "fetch", "--arg", &url]);
    assert_eq!(refused.status.code(), Some(1), "{}", String::from_utf8_lossy(&refused.stderr));
    assert_eq!(upstream.recorder.count(), 1, "nothing ran on a full disk");

    // Room again: the next run goes through.
    audit.free();
    cli.ok(&["action", "run", "fetch", "--arg", &url]);
    assert_eq!(upstream.recorder.count(), 2);
    assert!(!cli.ok(&["status"]).contains("low on space"));
    cli.ok(&["daemon", "stop"]);
    assert!(audit.shell.wait().unwrap().success());
    drop(runtime);
}

/// Daemons run one after another (`runs` of them, each started when the one before stops) with
/// their audit directory on a 4 MiB tmpfs in a mount namespace of their own (`unshare`), which
/// the test fills to the last byte and frees again through `/proc/<pid>/root`.
struct SmallAuditDir {
    shell: std::process::Child,
    dir: std::path::PathBuf,
}

impl SmallAuditDir {
    fn start(cli: &Cli, runs: usize) -> SmallAuditDir {
        let dir = cli.scratch().join("small-audit");
        std::fs::create_dir_all(&dir).unwrap();
        let daemons = vec!["\"$0\" daemon run"; runs].join(" && ");
        let script = format!("mount -t tmpfs -o size=4m tmpfs \"$AILERON_AUDIT_DIR\" && {daemons}");
        let shell = std::process::Command::new("unshare")
            .args(["--map-root-user", "--mount", "sh", "-c", &script])
            .arg(cli.command(&[]).get_program())
            .env("AILERON_HOME", &cli.home)
            .env("AILERON_AUDIT_DIR", &dir)
            .env_remove("AILERON_URL")
            .env_remove("AILERON_TOKEN")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("unshare");
        let mut started = SmallAuditDir { shell, dir };
        started.wait_for_daemon(cli);
        started
    }

    fn wait_for_daemon(&mut self, cli: &Cli) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !cli.home.join("daemon.json").exists() {
            assert!(
                self.shell.try_wait().unwrap().is_none(),
                "the daemon exited at start: {:?}",
                self.shell.try_wait()
            );
            assert!(std::time::Instant::now() < deadline, "no daemon.json");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The directory as the daemons see it.
    fn inside(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/proc/{}/root", self.shell.id())).join(self.dir.strip_prefix("/").unwrap())
    }

    /// Fills the tmpfs to its last byte (the log's headroom, allocated before, is left).
    fn fill_disk(&self) {
        let mut filler = std::fs::File::create(self.inside().join("filler")).unwrap();
        while std::io::Write::write_all(&mut filler, &[0u8; 64 * 1024]).is_ok() {}
    }

    /// [`SmallAuditDir::fill_disk`], then small `action.rejected` records (calls of an action
    /// named `x`) until one cannot be written: no record fits any more.
    fn fill(&self, cli: &Cli) {
        self.fill_disk();
        self.post_until(cli, |answer, _| answer == reqwest::StatusCode::SERVICE_UNAVAILABLE);
    }

    /// Has the daemon audit calls of an action named `x` until `done` holds for an answer's
    /// status and the daemon's `/v1/status` after it.
    fn post_until(&self, cli: &Cli, done: impl Fn(reqwest::StatusCode, &serde_json::Value) -> bool) {
        aileron::platform::process::install_crypto_provider();
        let info: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
        let (url, token) = (info["url"].as_str().unwrap(), info["token"].as_str().unwrap());
        let client = reqwest::blocking::Client::new();
        let reached = (0..5_000).any(|_| {
            let answer = client
                .post(format!("{url}/v1/actions/x/run"))
                .bearer_auth(token)
                .json(&serde_json::json!({"args": {}}))
                .send()
                .unwrap();
            let status: serde_json::Value =
                client.get(format!("{url}/v1/status")).bearer_auth(token).send().unwrap().json().unwrap();
            done(answer.status(), &status)
        });
        assert!(reached, "the audit directory never reached the state asked for");
    }

    fn free(&self) {
        std::fs::remove_file(self.inside().join("filler")).unwrap();
    }
}

/// An approval decided while its decision could not be audited (the user saw 503) stays
/// approved in the journal and runs at the next start — only after its decision is in the log:
/// the restart appends the missing `approval.approved` (`aileron.approval.recovered`) before the
/// run's own record. It ran with no decision on record before.
#[test]
fn an_approval_decided_while_the_log_was_full_is_audited_before_it_runs_after_a_restart() {
    let cli = Cli::new();
    let hash = cli.install_guest("echo", &[]);
    cli.add_action(&ActionSpec { approval: true, ..ActionSpec::new("gated-echo", "echo", &hash, "echo") });
    cli.ok(&["daemon", "stop"]);
    let mut audit = SmallAuditDir::start(&cli, 2);
    let pending = cli.run(&["action", "run", "gated-echo"]);
    assert_eq!(pending.status.code(), Some(75), "{}", String::from_utf8_lossy(&pending.stderr));
    let id = serde_json::from_slice::<serde_json::Value>(&pending.stdout).unwrap()["approval_id"]
        .as_str()
        .unwrap()
        .to_string();

    audit.fill(&cli);
    let approve = cli.run(&["approval", "approve", &id]);
    assert_eq!(approve.status.code(), Some(1), "{}", String::from_utf8_lossy(&approve.stderr));
    assert!(
        String::from_utf8_lossy(&approve.stderr).contains("audit_unavailable"),
        "{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    audit.free();
    cli.ok(&["daemon", "stop"]);
    audit.wait_for_daemon(&cli);

    let mut status = String::new();
    for _ in 0..500 {
        status = cli.ok(&["approval", "status", &id]);
        if status.starts_with("completed") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(status.starts_with("completed"), "{status}");
    let records: serde_json::Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--limit", "1000"])).unwrap();
    let records = records["items"].as_array().unwrap();
    let of_this = |event: &str| {
        records
            .iter()
            .filter(|record| record["event_type"] == event)
            .filter(|record| record["payload"]["aileron.approval.id"] == id.as_str())
            .map(|record| record["seq"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    let decided = of_this("approval.approved");
    let executed = of_this("action.executed");
    assert_eq!(decided.len(), 1, "one decision on record: {records:#?}");
    assert_eq!(executed.len(), 1, "one run: {records:#?}");
    assert!(decided[0] < executed[0], "the decision is on record before the run");
    let decision = records.iter().find(|record| record["seq"] == decided[0]).unwrap();
    assert_eq!(decision["payload"]["aileron.approval.recovered"], true, "{decision}");
    assert_eq!(decision["actor"]["id"], "local-user", "{decision}");
    cli.ok(&["daemon", "stop"]);
    assert!(audit.shell.wait().unwrap().success());
}
