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
    let package = cli.package("echo", &[]);
    let hash = cli.ok(&["connector", "install", "--from", package.to_str().unwrap(), "github://aileron-tests/echo@1.0.0", "--yes", "--allow-unsigned"]);
    let spec = ActionSpec::new("burst", "echo", hash.trim(), "echo");
    let file = cli.scratch().join("burst.md");
    std::fs::write(&file, spec.render()).unwrap();
    cli.ok(&["action", "add", file.to_str().unwrap()]);

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
            aileron::daemon::install_crypto_provider();
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
