//! `kill -9` of the daemon during a burst of runs loses no acknowledged audit record, and the
//! chain still verifies — over several crash/restart iterations on the same home.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::Cli;
use crate::support::ActionSpec;

const ITERATIONS: usize = 3;
const CLIENTS: usize = 16;

fn audit_ids_on_disk(home: &std::path::Path) -> HashSet<String> {
    let mut ids = HashSet::new();
    for entry in std::fs::read_dir(home.join("audit")).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for line in text.lines() {
            if let Ok(record) = serde_json::from_str::<Value>(line) {
                ids.insert(record["audit_id"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    ids
}

#[test]
fn kill_9_during_a_burst_loses_no_acknowledged_record() {
    let cli = Cli::new();
    let hash = cli.install_guest("echo", &[]);
    cli.add_action(&ActionSpec::new("burst", "echo", &hash, "echo"));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut acknowledged_total = 0;
    for iteration in 0..ITERATIONS {
        cli.ok(&["daemon", "start"]);
        let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
        let url = format!("{}/v1/actions/burst/run", info["url"].as_str().unwrap());
        let token = info["token"].as_str().unwrap().to_string();
        let pid = info["pid"].as_i64().unwrap() as i32;
        let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));

        runtime.block_on(async {
            aileron::process::install_crypto_provider();
            let client = reqwest::Client::new();
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut tasks = Vec::new();
            for _ in 0..CLIENTS {
                let (client, url, token, acknowledged) = (client.clone(), url.clone(), token.clone(), acknowledged.clone());
                tasks.push(tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let Ok(response) = client.post(&url).bearer_auth(&token).json(&json!({"args": {}})).send().await else {
                            return;
                        };
                        if response.status() != 200 {
                            return;
                        }
                        let Ok(body) = response.json::<Value>().await else { return };
                        acknowledged.lock().unwrap().push(body["audit_id"].as_str().unwrap().to_string());
                    }
                }));
            }
            // Let the burst build up, then kill the daemon mid-flight.
            let target = 150 + iteration * 50;
            while acknowledged.lock().unwrap().len() < target && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
            for task in tasks {
                let _ = task.await;
            }
        });
        // Reap / wait for the process to disappear before the next start.
        let started = Instant::now();
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z")) && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }

        let acknowledged = acknowledged.lock().unwrap().clone();
        assert!(acknowledged.len() >= 100, "iteration {iteration}: the burst ran ({} acknowledged)", acknowledged.len());
        let on_disk = audit_ids_on_disk(&cli.home);
        let lost: Vec<_> = acknowledged.iter().filter(|id| !on_disk.contains(*id)).collect();
        assert!(lost.is_empty(), "iteration {iteration}: acknowledged but not on disk: {lost:?}");
        let verify = cli.run(&["audit", "verify"]);
        assert!(verify.status.success(), "iteration {iteration}: {}", String::from_utf8_lossy(&verify.stderr));
        acknowledged_total += acknowledged.len();
    }
    assert!(acknowledged_total >= ITERATIONS * 100);
    // After the last crash the daemon restarts cleanly on the same home (stale daemon.json, torn tail).
    cli.ok(&["daemon", "start"]);
    assert!(cli.run(&["audit", "verify"]).status.success());
}

/// The running daemon's URL, token and pid from `daemon.json`.
fn daemon_info(cli: &Cli) -> (String, String, i32) {
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    (info["url"].as_str().unwrap().to_string(), info["token"].as_str().unwrap().to_string(), info["pid"].as_i64().unwrap() as i32)
}

fn kill_9(pid: i32) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    let started = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z")) && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
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
    aileron::process::install_crypto_provider();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    cli.add_action(&ActionSpec { inputs: &[("url", "string", true)], approval: true, ..ActionSpec::new("fetch", "http_get", &hash, "get") });

    let client = reqwest::blocking::Client::new();
    let calls_for = |marker: &str| upstream.recorder.requests().iter().filter(|r| r.path_and_query.contains(marker)).count();
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
            let response = client.post(format!("{url}/v1/action-approvals/{id}/decide")).bearer_auth(token).json(&json!({"approved": true})).send().unwrap();
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
    let recovered: Value = serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--class", "connector_runtime_error", "--limit", "100"])).unwrap();
    assert!(!recovered["items"].as_array().unwrap().is_empty(), "recoveries are audited");
    drop(runtime);
}
