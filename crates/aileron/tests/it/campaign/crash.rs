//! The crash-consistency campaign: `kill -9` of a real daemon at random points of a mixed load —
//! runs, gated runs requested and decided, connector installs, action adds, vault secret writes
//! and binding rebinds (the vault rewrite an OAuth refresh also makes) — then a restart on the
//! same home, every round. After each restart: the daemon reopens its store, vault, journals and
//! audit log (it starts; the vault unlocks and parses), the audit chain verifies, no
//! acknowledged audit record, install, action, secret or decision is lost, every approved entry
//! ran exactly once (completed, one upstream call) or was recovered as failed without a second
//! call, a denied one never ran, and a pending one is still pending. The kill points hit per
//! phase (which operations were in flight when the signal landed) are the campaign's figure.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Report, kill_9, scaled};
use crate::cli::Cli;
use crate::support::{ActionSpec, guest_wasm, manifest};

const PASSPHRASE: &str = "crash campaign passphrase";
const BINDING: &str = "api_key/github:aileron-tests:http_get/default";

/// What was in flight when a kill landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Run,
    ApprovalRequest,
    ApprovalDecide,
    Install,
    ActionAdd,
    VaultWrite,
    Rebind,
}

const PHASES: [Phase; 7] = [
    Phase::Run,
    Phase::ApprovalRequest,
    Phase::ApprovalDecide,
    Phase::Install,
    Phase::ActionAdd,
    Phase::VaultWrite,
    Phase::Rebind,
];

/// A gated run's last acknowledged step.
#[derive(Debug, Clone)]
struct Gated {
    id: String,
    marker: String,
    /// `Some(approved)` once the decision was acknowledged (204).
    decided: Option<bool>,
    /// The final status a check after a restart saw (the daemon keeps the 1,000 most recent
    /// finished entries; the final sweep falls back to this for older ones).
    observed: Option<String>,
}

/// Everything the daemon acknowledged, across rounds.
#[derive(Default)]
struct Acknowledged {
    audit_ids: Vec<String>,
    gated: Vec<Gated>,
    /// Installs, action adds and secret writes not yet checked; once checked after a restart
    /// they are removed again (so the store, the action set and the vault keep one size over a
    /// thousand rounds) and counted.
    installs: Vec<String>,
    actions: Vec<String>,
    secrets: Vec<String>,
    checked: Checked,
    rebinds: usize,
}

#[derive(Default)]
struct Checked {
    installs: usize,
    actions: usize,
    secrets: usize,
}

/// The audit records on disk, read incrementally: each file from where the last read stopped
/// (whole lines only, so a torn tail the daemon repairs is read once it is whole).
#[derive(Default)]
struct AuditOnDisk {
    offsets: std::collections::HashMap<std::path::PathBuf, usize>,
    ids: HashSet<String>,
}

impl AuditOnDisk {
    fn refresh(&mut self, home: &std::path::Path) -> &HashSet<String> {
        for entry in std::fs::read_dir(home.join("audit")).unwrap().flatten() {
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            let offset = self.offsets.entry(entry.path()).or_default();
            let start = (*offset).min(bytes.len());
            let Some(end) = bytes[start..].iter().rposition(|b| *b == b'\n').map(|at| start + at + 1) else { continue };
            for line in bytes[start..end].split(|b| *b == b'\n') {
                if let Ok(record) = serde_json::from_slice::<Value>(line) {
                    self.ids.insert(record["audit_id"].as_str().unwrap_or_default().to_string());
                }
            }
            *offset = end;
        }
        &self.ids
    }
}

/// A tiny deterministic generator (xorshift), so a round's kill delay can be replayed from the seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

struct Daemon {
    home: std::path::PathBuf,
    url: String,
    token: String,
    pid: i32,
}

fn start(cli: &Cli) -> Daemon {
    let started = cli.run(&["daemon", "start"]);
    assert!(
        started.status.success(),
        "the daemon restarts on the crashed home: {}",
        String::from_utf8_lossy(&started.stderr)
    );
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    Daemon {
        home: cli.home.clone(),
        url: info["url"].as_str().unwrap().to_string(),
        token: info["token"].as_str().unwrap().to_string(),
        pid: info["pid"].as_i64().unwrap() as i32,
    }
}

/// Marks a phase in flight for the length of one request.
struct InFlight<'a>(&'a AtomicBool);

impl<'a> InFlight<'a> {
    fn enter(flag: &'a AtomicBool) -> InFlight<'a> {
        flag.store(true, Ordering::SeqCst);
        InFlight(flag)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[test]
fn kill_9_at_random_points_of_a_mixed_load_loses_nothing_acknowledged_and_runs_approvals_once() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let rounds = scaled(6, 1_000);
    let cli = Cli::new();
    let passphrase = [("AILERON_VAULT_PASSPHRASE", PASSPHRASE)];
    assert!(cli.run_with(&["vault", "init"], &passphrase, None).status.success());
    let echo = cli.install_guest("echo", &[]);
    cli.add_action(&ActionSpec::new("ping", "echo", &echo, "echo"));
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test\"\nheader = \"X-Api-Key\"\nformat = \"Token {key}\"\n";
    let http_get = cli.install_package(
        "http_get",
        &guest_wasm("http_get"),
        &manifest("http_get", &[upstream.host_port()], credential),
    );
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &http_get, "get")
    });
    let setup = cli.run_with(
        &["binding", "setup", "github://aileron-tests/http_get", "--from-env", "KEY"],
        &[("KEY", "api-key-0")],
        None,
    );
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    // The package the install worker installs again and again, as new versions of `echo`.
    let package = cli.scratch().join("pkg-versions");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("connector.wasm"), guest_wasm("echo")).unwrap();

    let acknowledged = Arc::new(Mutex::new(Acknowledged::default()));
    let mut kill_points: BTreeMap<String, usize> = BTreeMap::new();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let calls_for = |marker: &str| {
        upstream.recorder.requests().iter().filter(|r| r.path_and_query.ends_with(&format!("?{marker}"))).count()
    };
    let started_at = Instant::now();
    let mut verify_ms_max = 0u128;
    // Gated entries before this index were checked after an earlier restart (the final sweep
    // checks them all again).
    let mut checked_gated = 0;
    let mut audit = AuditOnDisk::default();

    for round in 0..rounds {
        let daemon = start(&cli);
        // The vault reopens: it unlocks with the passphrase (its file parsed and verified).
        let unlock = client
            .post(format!("{}/v1/vault/unlock", daemon.url))
            .bearer_auth(&daemon.token)
            .json(&json!({"passphrase": PASSPHRASE}))
            .send()
            .unwrap();
        assert!(
            unlock.status().is_success(),
            "round {round}: the vault unlocks after the crash: {}",
            unlock.text().unwrap_or_default()
        );
        checked_gated = check_after_restart(
            round,
            &client,
            &daemon,
            &mut audit,
            &mut acknowledged.lock().unwrap(),
            checked_gated,
            &calls_for,
            &mut verify_ms_max,
        );

        // A first run after the restart (it loads the compiled connector), acknowledged like any.
        let first: Value = client
            .post(format!("{}/v1/actions/ping/run", daemon.url))
            .bearer_auth(&daemon.token)
            .json(&json!({"args": {}}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        acknowledged
            .lock()
            .unwrap()
            .audit_ids
            .push(first["audit_id"].as_str().expect("the first run after a restart succeeds").to_string());

        // The mixed load, until the kill.
        let flags: Arc<Vec<AtomicBool>> = Arc::new(PHASES.iter().map(|_| AtomicBool::new(false)).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::new();
        let spawn = |workers: &mut Vec<std::thread::JoinHandle<()>>, work: Box<dyn Fn(usize) -> bool + Send>| {
            let stop = stop.clone();
            workers.push(std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) && work(i) {
                    i += 1;
                }
            }));
        };
        let flag = |phase: Phase| PHASES.iter().position(|p| *p == phase).unwrap();
        for _ in 0..3 {
            let (client, url, token, flags, acks) =
                (client.clone(), daemon.url.clone(), daemon.token.clone(), flags.clone(), acknowledged.clone());
            spawn(
                &mut workers,
                Box::new(move |_| {
                    let _in_flight = InFlight::enter(&flags[flag(Phase::Run)]);
                    let Ok(response) = client
                        .post(format!("{url}/v1/actions/ping/run"))
                        .bearer_auth(&token)
                        .json(&json!({"args": {}}))
                        .send()
                    else {
                        return false;
                    };
                    if response.status() != 200 {
                        return false;
                    }
                    let Ok(body) = response.json::<Value>() else { return false };
                    acks.lock().unwrap().audit_ids.push(body["audit_id"].as_str().unwrap().to_string());
                    true
                }),
            );
        }
        for worker in 0..2 {
            let (client, url, token, flags, acks, base) = (
                client.clone(),
                daemon.url.clone(),
                daemon.token.clone(),
                flags.clone(),
                acknowledged.clone(),
                upstream.base_url(),
            );
            spawn(
                &mut workers,
                Box::new(move |i| {
                    let marker = format!("r{round}w{worker}i{i}");
                    let requested = {
                        let _in_flight = InFlight::enter(&flags[flag(Phase::ApprovalRequest)]);
                        client
                            .post(format!("{url}/v1/actions/fetch/run"))
                            .bearer_auth(&token)
                            .json(&json!({"args": {"url": format!("{base}/status/200?{marker}")}}))
                            .send()
                    };
                    let Ok(requested) = requested else { return false };
                    if requested.status() != 202 {
                        return false;
                    }
                    let Ok(body) = requested.json::<Value>() else { return false };
                    let id = body["approval_id"].as_str().unwrap().to_string();
                    let index = {
                        let mut acks = acks.lock().unwrap();
                        acks.gated.push(Gated { id: id.clone(), marker, decided: None, observed: None });
                        acks.gated.len() - 1
                    };
                    let approve = i % 4 != 3;
                    let decided = {
                        let _in_flight = InFlight::enter(&flags[flag(Phase::ApprovalDecide)]);
                        client
                            .post(format!("{url}/v1/action-approvals/{id}/decide"))
                            .bearer_auth(&token)
                            .json(&json!({"approved": approve}))
                            .send()
                    };
                    match decided {
                        Ok(response) if response.status() == 204 => {
                            acks.lock().unwrap().gated[index].decided = Some(approve);
                            true
                        }
                        _ => false,
                    }
                }),
            );
        }
        {
            let (cli_home, package, flags, acks) =
                (cli.home.clone(), package.clone(), flags.clone(), acknowledged.clone());
            spawn(
                &mut workers,
                Box::new(move |i| {
                    let version = format!("2.{round}.{i}");
                    std::fs::write(package.join("manifest.toml"), manifest("echo", &[], "").replace("1.0.0", &version))
                        .unwrap();
                    let reference = format!("github://aileron-tests/echo@{version}");
                    let output = {
                        let _in_flight = InFlight::enter(&flags[flag(Phase::Install)]);
                        std::process::Command::new(super::binary("aileron"))
                            .args([
                                "connector",
                                "install",
                                "--from",
                                package.to_str().unwrap(),
                                &reference,
                                "--yes",
                                "--allow-unsigned",
                            ])
                            .env("AILERON_HOME", &cli_home)
                            .env("AILERON_NO_AUTOSTART", "1")
                            .env_remove("AILERON_URL")
                            .env_remove("AILERON_TOKEN")
                            .output()
                            .unwrap()
                    };
                    if !output.status.success() {
                        return false;
                    }
                    acks.lock().unwrap().installs.push(version);
                    true
                }),
            );
        }
        {
            let (client, url, token, flags, acks, echo) = (
                client.clone(),
                daemon.url.clone(),
                daemon.token.clone(),
                flags.clone(),
                acknowledged.clone(),
                echo.clone(),
            );
            spawn(
                &mut workers,
                Box::new(move |i| {
                    let name = format!("added_{round}_{i}");
                    let content = ActionSpec::new(&name, "echo", &echo, "echo").render();
                    let _in_flight = InFlight::enter(&flags[flag(Phase::ActionAdd)]);
                    let sent = client
                        .post(format!("{url}/v1/actions/install"))
                        .bearer_auth(&token)
                        .json(&json!({"file_name": format!("{name}.md"), "content": content}))
                        .send();
                    match sent {
                        Ok(response) if response.status().is_success() => {
                            acks.lock().unwrap().actions.push(name);
                            true
                        }
                        _ => false,
                    }
                }),
            );
        }
        {
            let (client, url, token, flags, acks) =
                (client.clone(), daemon.url.clone(), daemon.token.clone(), flags.clone(), acknowledged.clone());
            spawn(
                &mut workers,
                Box::new(move |i| {
                    let path = format!("crash/r{round}/s{i}");
                    let _in_flight = InFlight::enter(&flags[flag(Phase::VaultWrite)]);
                    let sent = client
                        .post(format!("{url}/v1/secrets"))
                        .bearer_auth(&token)
                        .json(&json!({"path": path, "value": format!("v{i}")}))
                        .send();
                    match sent {
                        Ok(response) if response.status() == 201 => {
                            acks.lock().unwrap().secrets.push(path);
                            true
                        }
                        _ => false,
                    }
                }),
            );
        }
        {
            let (client, url, token, flags, acks) =
                (client.clone(), daemon.url.clone(), daemon.token.clone(), flags.clone(), acknowledged.clone());
            spawn(
                &mut workers,
                Box::new(move |i| {
                    let name = aileron::wire::path_segment(BINDING);
                    let _in_flight = InFlight::enter(&flags[flag(Phase::Rebind)]);
                    let sent = client
                        .post(format!("{url}/v1/bindings/{name}/rebind"))
                        .bearer_auth(&token)
                        .json(&json!({"api_key": format!("api-key-{round}-{i}")}))
                        .send();
                    match sent {
                        Ok(response) if response.status().is_success() => {
                            acks.lock().unwrap().rebinds += 1;
                            true
                        }
                        _ => false,
                    }
                }),
            );
        }

        // A random point into the load: 20 ms to 500 ms on release binaries; a debug build (the CI
        // portion) runs an approved action in about a second, so its window is wider.
        let (earliest, latest) = scaled((100, 2_000), (20, 500));
        std::thread::sleep(Duration::from_millis(earliest + rng.below(latest - earliest)));
        let in_flight: Vec<Phase> =
            PHASES.iter().zip(flags.iter()).filter(|(_, f)| f.load(Ordering::SeqCst)).map(|(p, _)| *p).collect();
        kill_9(daemon.pid);
        stop.store(true, Ordering::SeqCst);
        for worker in workers {
            worker.join().unwrap();
        }
        if in_flight.is_empty() {
            *kill_points.entry("idle".into()).or_default() += 1;
        }
        for phase in in_flight {
            *kill_points.entry(format!("{phase:?}")).or_default() += 1;
        }
        // The vault file parses whatever the kill interrupted.
        let bytes = std::fs::read(cli.home.join("secrets.json")).unwrap();
        aileron_core::vault::VaultFile::parse(&bytes)
            .unwrap_or_else(|e| panic!("round {round}: the vault file parses after kill -9: {e}"));
    }

    let daemon = start(&cli);
    let unlock = client
        .post(format!("{}/v1/vault/unlock", daemon.url))
        .bearer_auth(&daemon.token)
        .json(&json!({"passphrase": PASSPHRASE}))
        .send()
        .unwrap();
    assert!(unlock.status().is_success());
    let mut acks = acknowledged.lock().unwrap();
    check_after_restart(rounds, &client, &daemon, &mut audit, &mut acks, checked_gated, &calls_for, &mut verify_ms_max);
    // Exactly once, over the whole campaign: a later crash never re-ran an earlier entry.
    let mut completed = 0;
    let mut recovered = 0;
    for gated in &acks.gated {
        let calls = calls_for(&gated.marker);
        assert!(calls <= 1, "{} ran {calls} times", gated.id);
        let view: Value = client
            .get(format!("{}/v1/action-approvals/{}/result", daemon.url, gated.id))
            .bearer_auth(&daemon.token)
            .send()
            .unwrap()
            .json()
            .unwrap();
        // A finished entry older than the daemon's retention is answered 404: its status is the
        // one the check after its round saw.
        let status = view["status"].as_str().map(str::to_string).or_else(|| gated.observed.clone()).unwrap_or_default();
        match status.as_str() {
            "completed" => {
                assert_eq!(calls, 1, "{} completed and ran exactly once", gated.id);
                completed += 1;
            }
            "failed" => recovered += 1,
            other => assert_eq!(calls, 0, "{} ({other}) never ran", gated.id),
        }
    }
    let _ = cli.run(&["daemon", "stop"]);
    assert!(acks.audit_ids.len() > 2 * rounds, "the load ran ({} acknowledged runs)", acks.audit_ids.len());
    assert!(completed > 0, "some approved entries completed between kills ({recovered} were recovered)");
    assert!(
        kill_points.keys().filter(|k| *k != "idle").count() >= 3,
        "kills landed in several phases: {kill_points:?}"
    );

    let mut report = Report::new("crash");
    report.set("kills", rounds);
    report.set("kill_points_by_phase_in_flight", json!(kill_points));
    report.set("acknowledged_runs", acks.audit_ids.len());
    report.set("gated_runs", acks.gated.len());
    report.set("approvals_completed_exactly_once", completed);
    report.set("approvals_recovered_without_rerun", recovered);
    report.set("installs", acks.checked.installs);
    report.set("action_adds", acks.checked.actions);
    report.set("vault_writes", acks.checked.secrets);
    report.set("rebinds", acks.rebinds);
    report.set("lost", 0);
    report.set("audit_verify_ms_max", verify_ms_max as u64);
    report.set("seconds", started_at.elapsed().as_secs());
    report.finish();
    drop(runtime);
}

/// The checks after every restart (see the module doc); gated entries from `gated_from` on.
/// Then the checked installs, actions and secrets are removed again. Returns the index the next
/// round checks gated entries from.
#[allow(clippy::too_many_arguments)]
fn check_after_restart(
    round: usize,
    client: &reqwest::blocking::Client,
    daemon: &Daemon,
    audit: &mut AuditOnDisk,
    acks: &mut Acknowledged,
    gated_from: usize,
    calls_for: &dyn Fn(&str) -> usize,
    verify_ms_max: &mut u128,
) -> usize {
    let get = |path: &str| -> Value {
        let response = client.get(format!("{}{path}", daemon.url)).bearer_auth(&daemon.token).send().unwrap();
        assert!(response.status().is_success(), "round {round}: GET {path}: {}", response.status());
        response.json().unwrap()
    };
    let started = Instant::now();
    let verify = get("/v1/audit/verify?checkpoints=true");
    *verify_ms_max = (*verify_ms_max).max(started.elapsed().as_millis());
    assert_eq!(verify["ok"], true, "round {round}: the audit chain verifies after the crash: {verify}");
    assert!(verify["checkpoints"].is_object(), "round {round}: and its checkpoints match it: {verify}");
    let on_disk = audit.refresh(&daemon.home);
    let lost: Vec<_> = acks.audit_ids.iter().filter(|id| !on_disk.contains(*id)).collect();
    assert!(lost.is_empty(), "round {round}: acknowledged runs missing from the audit log: {lost:?}");

    let connectors = get("/v1/connectors").to_string();
    for version in &acks.installs {
        assert!(
            connectors.contains(&format!("\"{version}\"")),
            "round {round}: acknowledged install of echo {version} survived"
        );
    }
    let actions = get("/v1/actions");
    let names: HashSet<&str> = actions["items"].as_array().unwrap().iter().filter_map(|a| a["name"].as_str()).collect();
    for name in &acks.actions {
        assert!(names.contains(name.as_str()), "round {round}: acknowledged action {name} survived");
    }
    let secrets = get("/v1/secrets");
    let paths: HashSet<&str> = secrets["items"].as_array().unwrap().iter().filter_map(|s| s["path"].as_str()).collect();
    for path in &acks.secrets {
        assert!(paths.contains(path.as_str()), "round {round}: acknowledged secret {path} survived");
    }
    let binding = get(&format!("/v1/bindings/{}", aileron::wire::path_segment(BINDING)));
    assert_eq!(binding["name"], BINDING, "round {round}: the binding survived its rebinds");

    for gated in &mut acks.gated[gated_from..] {
        let view = wait_final(client, daemon, &gated.id, gated.decided.is_some());
        let status = view["status"].as_str().unwrap_or_default().to_string();
        let calls = calls_for(&gated.marker);
        match (gated.decided, status.as_str()) {
            (_, "completed") => assert_eq!(calls, 1, "round {round}: {} completed and ran exactly once", gated.id),
            (Some(true) | None, "failed") => {
                assert_eq!(
                    view["failure"]["details"]["recovered"], true,
                    "round {round}: only a recovery fails an approved entry: {view}"
                );
                assert!(calls <= 1, "round {round}: a recovered entry ran at most once ({calls})");
            }
            (Some(false) | None, "denied") => assert_eq!(calls, 0, "round {round}: a denied entry never ran"),
            (None, "pending_approval") => assert_eq!(calls, 0, "round {round}: a pending entry has not run"),
            (decided, other) => panic!("round {round}: {} decided {decided:?} is {other}: {view}", gated.id),
        }
        gated.observed = Some(status);
    }

    // Keep the store, the action set and the vault at one size: remove what was just checked.
    let remove = |method: reqwest::Method, path: String, body: Option<Value>| {
        let mut request = client.request(method, format!("{}{path}", daemon.url)).bearer_auth(&daemon.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        assert!(response.status().is_success(), "round {round}: removing {path}: {}", response.status());
    };
    for name in acks.actions.drain(..) {
        remove(reqwest::Method::DELETE, format!("/v1/actions/{name}"), None);
        acks.checked.actions += 1;
    }
    for path in acks.secrets.drain(..) {
        remove(reqwest::Method::DELETE, format!("/v1/secrets/{path}"), None);
        acks.checked.secrets += 1;
    }
    for version in acks.installs.drain(..) {
        remove(
            reqwest::Method::POST,
            "/v1/connectors/remove".into(),
            Some(json!({"reference": format!("github://aileron-tests/echo@{version}")})),
        );
        acks.checked.installs += 1;
    }
    acks.gated.len()
}

/// The entry's result once it is final (a decided one may still be running after a restart).
fn wait_final(client: &reqwest::blocking::Client, daemon: &Daemon, id: &str, decided: bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let view: Value = client
            .get(format!("{}/v1/action-approvals/{id}/result", daemon.url))
            .bearer_auth(&daemon.token)
            .send()
            .unwrap()
            .json()
            .unwrap();
        let status = view["status"].as_str().unwrap_or_default();
        let settled = matches!(status, "completed" | "failed" | "denied") || (!decided && status == "pending_approval");
        if settled || Instant::now() > deadline {
            return view;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The crash campaign's policy phase (SPEC §16): each round raises a rate limit by a random `k`,
/// fires 12 racing runs and `kill -9`s the daemon 0–6 ms into them, restarts it and
/// fires 12 more. A run acts only once its `policy.admitted` record is durable, so after every
/// round the log holds exactly as many admissions as the limit allows — one the kill lost was a
/// run's that had not acted, and its place is taken after the restart; none past the limit however
/// the calls raced — and no more runs than admissions.
#[test]
fn kill_9_among_racing_calls_never_admits_past_a_limit() {
    aileron::platform::process::install_crypto_provider();
    let rounds = scaled(12, 120);
    let cli = Cli::new();
    let echo = cli.install_guest("echo", &[]);
    cli.add_action(&ActionSpec::new("limited", "echo", &echo, "echo"));
    let policy = cli.home.join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    let client = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    let mut rng = Rng(0x5eed_0f_11a1 ^ rounds as u64);
    let count = |event_type: &str| -> usize {
        std::fs::read_dir(cli.home.join("audit"))
            .unwrap()
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(".jsonl"))
            .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
            .map(|text| text.lines().filter(|line| line.contains(&format!("\"event_type\":\"{event_type}\""))).count())
            .sum()
    };
    let (mut limit, mut killed_while_running) = (0usize, 0usize);
    for round in 0..rounds {
        limit += 1 + rng.below(8) as usize;
        let rule = format!("forbid(principal, action, resource) when {{ context.runs_last_day >= {limit} }};");
        std::fs::write(policy.join("limit.cedar"), rule).unwrap();
        // The daemon (re)loads the files at start, and within half a second of a change.
        let mut daemon = start(&cli);
        let wanted = format!("policy       1 rule(s) from 1 file(s), {}", policy_hash(&policy));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cli.ok(&["daemon", "status"]).contains(&wanted) {
            assert!(Instant::now() < deadline, "round {round}: the new limit never loaded");
            std::thread::sleep(Duration::from_millis(50));
        }
        for stage in ["before the kill", "after the restart"] {
            let answered = Arc::new(Mutex::new(Vec::new()));
            let calls: Vec<_> = (0..12)
                .map(|_| {
                    let (client, url, token, answered) =
                        (client.clone(), daemon.url.clone(), daemon.token.clone(), answered.clone());
                    std::thread::spawn(move || {
                        let sent = client
                            .post(format!("{url}/v1/actions/limited/run"))
                            .bearer_auth(token)
                            .json(&json!({ "args": {} }))
                            .send();
                        if let Ok(response) = sent {
                            answered.lock().unwrap().push(response.status().as_u16());
                        }
                    })
                })
                .collect();
            if stage == "before the kill" {
                std::thread::sleep(Duration::from_micros(rng.below(6_000)));
                killed_while_running += usize::from(answered.lock().unwrap().len() < 12);
                kill_9(daemon.pid);
            }
            for call in calls {
                call.join().unwrap();
            }
            if stage == "before the kill" {
                daemon = start(&cli);
            } else {
                let statuses = answered.lock().unwrap().clone();
                assert!(statuses.iter().all(|s| *s == 200 || *s == 403), "round {round}: {statuses:?}");
            }
        }
        cli.ok(&["daemon", "stop"]);
        let (admitted, ran) = (count("policy.admitted"), count("action.executed"));
        assert_eq!(admitted, limit, "round {round}: exactly the limit was admitted");
        assert!(ran <= admitted, "round {round}: {ran} runs but {admitted} admissions");
    }
    let mut report = Report::new("crash-policy");
    report.set("rounds", rounds as u64);
    report.set("admissions", limit as u64);
    report.set("kills_with_calls_in_flight", killed_while_running as u64);
    report.finish();
}

/// The hash `aileron daemon status` shows for the files in `dir` (SPEC §16: over each file's
/// name and bytes, in name order).
fn policy_hash(dir: &std::path::Path) -> String {
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    let mut hash = aileron_core::sha256::Sha256::new();
    for path in files {
        let (name, text) = (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&path).unwrap());
        hash.update((name.len() as u64).to_be_bytes());
        hash.update(name.as_bytes());
        hash.update((text.len() as u64).to_be_bytes());
        hash.update(&text);
    }
    format!("sha256:{}", hex::encode(hash.finalize()))
}
