//! `kill -9` at each deterministic step of an approval's life. The random kills under a mixed
//! load (runs, installs, vault writes, ...) are the crash campaign, `campaign::crash`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::campaign::kill_9;
use crate::cli::Cli;
use crate::support::ActionSpec;

/// The running daemon's URL, token and pid from `daemon.json`.
fn daemon_info(cli: &Cli) -> (String, String, i32) {
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    (
        info["url"].as_str().unwrap().to_string(),
        info["token"].as_str().unwrap().to_string(),
        info["pid"].as_i64().unwrap() as i32,
    )
}

/// Where the daemon is killed in an approval's life.
#[derive(Debug, Clone, Copy)]
enum CrashPoint {
    AfterRequest,
    AfterDecide { delay_ms: u64 },
    WhileRunning,
}

/// `kill -9` at every step of an approval's life, many times: a pending entry stays pending, an
/// approved entry runs exactly once (resumed after the restart when it had not started), and an
/// entry caught running is failed and never re-run. Checked against an upstream that counts calls.
#[test]
fn approvals_survive_kill_9_at_every_step_and_run_at_most_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    aileron::platform::process::install_crypto_provider();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });

    let client = reqwest::blocking::Client::new();
    let calls_for =
        |marker: &str| upstream.recorder.requests().iter().filter(|r| r.path_and_query.contains(marker)).count();
    let status_of = |url: &str, token: &str, id: &str| -> Value {
        client.get(format!("{url}/v1/action-approvals/{id}/result")).bearer_auth(token).send().unwrap().json().unwrap()
    };
    let wait_for = |id: &str, wanted: &[&str]| -> Value {
        let (url, token, _) = daemon_info(&cli);
        for _ in 0..1000 {
            let view = status_of(&url, &token, id);
            if wanted.contains(&view["status"].as_str().unwrap_or_default()) {
                return view;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("approval {id} never reached {wanted:?}");
    };

    let mut points = vec![CrashPoint::AfterRequest, CrashPoint::WhileRunning];
    points.extend([0, 1, 3, 5, 8, 13, 21].map(|delay_ms| CrashPoint::AfterDecide { delay_ms }));
    for (iteration, point) in points.into_iter().enumerate() {
        cli.ok(&["daemon", "start"]);
        let (url, token, pid) = daemon_info(&cli);
        let marker = format!("i={iteration}");
        let target = match point {
            CrashPoint::WhileRunning => format!("{}/slow/1500?{marker}", upstream.base_url()),
            _ => format!("{}/status/200?{marker}", upstream.base_url()),
        };
        let pending: Value = client
            .post(format!("{url}/v1/actions/fetch/run"))
            .bearer_auth(&token)
            .json(&json!({"args": {"url": target}}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let id = pending["approval_id"].as_str().unwrap().to_string();
        let approve = |url: &str, token: &str| {
            let response = client
                .post(format!("{url}/v1/action-approvals/{id}/decide"))
                .bearer_auth(token)
                .json(&json!({"approved": true}))
                .send()
                .unwrap();
            assert_eq!(response.status(), 204, "{point:?}");
        };
        match point {
            CrashPoint::AfterRequest => {
                kill_9(pid);
                cli.ok(&["daemon", "start"]);
                let (url, token, _) = daemon_info(&cli);
                assert_eq!(status_of(&url, &token, &id)["status"], "pending_approval", "a pending entry survives");
                approve(&url, &token);
                assert_eq!(wait_for(&id, &["completed", "failed"])["status"], "completed");
                assert_eq!(calls_for(&marker), 1);
            }
            CrashPoint::AfterDecide { delay_ms } => {
                approve(&url, &token);
                std::thread::sleep(Duration::from_millis(delay_ms));
                kill_9(pid);
                cli.ok(&["daemon", "start"]);
                let view = wait_for(&id, &["completed", "failed"]);
                std::thread::sleep(Duration::from_millis(200));
                let calls = calls_for(&marker);
                match view["status"].as_str().unwrap() {
                    "completed" => assert_eq!(calls, 1, "{point:?}: completed means exactly one call"),
                    _ => {
                        assert_eq!(view["failure"]["details"]["recovered"], true, "{point:?}: {view}");
                        assert!(calls <= 1, "{point:?}: a recovered entry ran at most once ({calls})");
                    }
                }
            }
            CrashPoint::WhileRunning => {
                approve(&url, &token);
                let started = Instant::now();
                while calls_for(&marker) == 0 && started.elapsed() < Duration::from_secs(10) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                kill_9(pid);
                cli.ok(&["daemon", "start"]);
                let view = wait_for(&id, &["completed", "failed"]);
                assert_eq!(view["status"], "failed", "an entry caught running is failed: {view}");
                assert!(view["failure"]["message"].as_str().unwrap().contains("not run again"), "{view}");
                std::thread::sleep(Duration::from_millis(1700));
                assert_eq!(calls_for(&marker), 1, "and never re-run");
            }
        }
        let (_, _, pid) = daemon_info(&cli);
        kill_9(pid);
    }
    cli.ok(&["daemon", "start"]);
    let verify = cli.run(&["audit", "verify"]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    let recovered: Value = serde_json::from_str(&cli.ok(&[
        "audit",
        "list",
        "--json",
        "--class",
        "connector_runtime_error",
        "--limit",
        "100",
    ]))
    .unwrap();
    assert!(!recovered["items"].as_array().unwrap().is_empty(), "recoveries are audited");
    drop(runtime);
}

/// A complete record damaged before the log's last line: the daemon used to find only a damaged
/// last line at start (ARCHITECTURE.md said "wherever the line is"), so it started and said
/// nothing. It still starts (only the last line is read before it serves), then verifies the
/// whole chain in the background: the break is in the daemon's log and on `aileron status`,
/// named by file and line.
#[test]
fn a_record_damaged_before_the_end_is_reported_by_the_daemon_and_status() {
    let cli = Cli::with_echo_action("echo");
    cli.ok(&["action", "run", "echo"]);
    cli.ok(&["daemon", "stop"]);
    let audit_dir = cli.home.join("audit");
    let day = std::fs::read_dir(&audit_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .expect("a day file");
    let text = std::fs::read_to_string(&day).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 3, "{text}");
    let damaged = lines[1].replacen('{', "{{", 1);
    lines[1] = &damaged;
    std::fs::write(&day, format!("{}\n", lines.join("\n"))).unwrap();
    let name = day.file_name().unwrap().to_string_lossy().to_string();

    cli.ok(&["daemon", "start"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (status, log) = loop {
        let status = cli.ok(&["status"]);
        let log = std::fs::read_to_string(cli.home.join("daemon.log")).unwrap_or_default();
        if (status.contains("CHAIN BROKEN") && log.contains("the audit chain is broken")) || Instant::now() > deadline {
            break (status, log);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    cli.ok(&["daemon", "stop"]);
    let audit_line = status.lines().find(|line| line.starts_with("audit")).unwrap_or_default().to_string();
    assert!(
        audit_line.contains("CHAIN BROKEN") && audit_line.contains(&name) && audit_line.contains("line 2"),
        "{status}"
    );
    assert!(log.contains("the audit chain is broken") && log.contains(&name), "daemon log:\n{log}");
    let json: Value = serde_json::from_str(&cli.ok(&["status", "--json"])).unwrap();
    assert_eq!(json["running"], false, "stopped: {json}");
    // `aileron audit verify` says it once, with its one hint.
    let verify = cli.run(&["audit", "verify"]);
    let said = String::from_utf8_lossy(&verify.stderr);
    assert_eq!(verify.status.code(), Some(1), "{said}");
    assert_eq!(said.matches("audit chain broken").count(), 1, "{said}");
    assert!(said.contains("line 2") && said.lines().filter(|l| l.starts_with("hint: ")).count() == 1, "{said}");
}
