//! Policy at the chokepoint (SPEC §16), end to end through the CLI and the daemon's HTTP run
//! path: an org restriction refuses, an `@ask` rule turns a call into an approval with its reason
//! on the card, a rate limit counts admitted runs (across a `kill -9`) and says when to retry,
//! shadow rules are audited and never enforced, and a set that stops loading keeps the one in force.

use std::time::Duration;

use serde_json::{Value, json};

use crate::cli::Cli;
use crate::mcp::{Session, StdioSession};
use crate::support::ActionSpec;

const ORG: &str = "@id(\"example-org-only\")\nforbid(principal, action == Aileron::Action::\"run\", resource == \
                   Aileron::Tool::\"send\")\nwhen { context.args has to && !(context.args.to like \"*@example.com\") };\n";
const ASK: &str = "@id(\"big-amounts\")\n@ask(\"amounts over 100 need a human\")\nforbid(principal, action, resource)\n\
                   when { context.args has amount && context.args.amount > 100 };\n";
const LIMIT: &str = "@id(\"three-an-hour\")\nforbid(principal, action, resource == Aileron::Tool::\"send\")\nwhen { context.runs_last_hour >= 3 };\n";
const SHADOW: &str = "@id(\"no-agents-at-all\")\nforbid(principal, action, resource);\n";

fn send_action(cli: &Cli) {
    let hash = cli.install_guest("echo", &[]);
    let mut spec = ActionSpec::new("send", "echo", &hash, "echo");
    spec.inputs = &[("to", "string", true), ("amount", "integer", false)];
    cli.add_action(&spec);
}

fn policy_dir(cli: &Cli) -> std::path::PathBuf {
    let dir = cli.home.join("policy");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn audit_of(cli: &Cli, event_type: &str) -> Vec<Value> {
    let listed: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", event_type, "--limit", "1000"]))
            .unwrap();
    listed["items"].as_array().unwrap().clone()
}

fn run_send(cli: &Cli, args: &str) -> std::process::Output {
    cli.run(&["action", "run", "send", "--args", args])
}

/// `aileron daemon status` once it says `needle` (the daemon looks at the files twice a second).
fn status_saying(cli: &Cli, needle: &str) -> String {
    let mut status = String::new();
    for _ in 0..100 {
        status = cli.ok(&["daemon", "status"]);
        if status.contains(needle) {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the daemon's status never said {needle:?}:\n{status}");
}

#[test]
fn rules_refuse_ask_and_limit_runs_through_the_daemon() {
    let cli = Cli::new();
    send_action(&cli);
    let dir = policy_dir(&cli);
    std::fs::write(dir.join("org.cedar"), ORG).unwrap();
    std::fs::write(dir.join("ask.cedar"), ASK).unwrap();
    std::fs::write(dir.join("limit.cedar"), LIMIT).unwrap();
    std::fs::write(dir.join("watch.shadow.cedar"), SHADOW).unwrap();
    let checked = cli.ok(&["policy", "check"]);
    for id in ["example-org-only", "big-amounts", "three-an-hour", "no-agents-at-all"] {
        assert!(checked.contains(id), "{checked}");
    }
    let tested = cli.ok(&["policy", "test", "--action", "send", "--args", r#"{"to":"a@evil.test"}"#]);
    assert!(tested.starts_with("forbid by example-org-only"), "{tested}");
    cli.ok(&["daemon", "start"]);
    // `action add` started the daemon before the files were written: it reloads them within
    // half a second.
    status_saying(&cli, "4 rule(s) from 4 file(s)");

    // The org restriction: refused with the class, the rule and the audit record.
    let refused = run_send(&cli, r#"{"to":"someone@evil.test"}"#);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("policy_denied") && stderr.contains("example-org-only"), "{stderr}");
    let denied = audit_of(&cli, "policy.denied");
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["payload"]["aileron.policy.rules"][0], "example-org-only");
    assert_eq!(denied[0]["payload"]["aileron.failure.boundary"], "policy");

    // The ask: an approval, its reason on the entry; approved, it runs.
    let asked = run_send(&cli, r#"{"to":"a@example.com","amount":500}"#);
    assert_eq!(asked.status.code(), Some(75), "{}", String::from_utf8_lossy(&asked.stderr));
    let pending: Value = serde_json::from_str(&cli.ok(&["approval", "list", "--json"])).unwrap();
    let entry = &pending["items"][0];
    assert_eq!(entry["policy_reason"], "amounts over 100 need a human", "{pending}");
    cli.ok(&["approval", "approve", entry["id"].as_str().unwrap()]);
    for _ in 0..100 {
        if !audit_of(&cli, "action.executed").is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(audit_of(&cli, "action.executed").len(), 1, "the approved call ran");

    // A value past what rules hold (the tenth re-attack: `amount > 100` never saw
    // 18446744073709551615, and the call ran unasked): refused, and `policy test` says so.
    for amount in ["18446744073709551615", "9223372036854775808"] {
        let args = format!(r#"{{"to":"a@example.com","amount":{amount}}}"#);
        let refused = run_send(&cli, &args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success() && refused.status.code() != Some(75), "{stderr}");
        assert!(
            stderr.contains("policy_denied") && stderr.contains(&format!("`amount`: {amount} is outside")),
            "{stderr}"
        );
        let tested = cli.ok(&["policy", "test", "--action", "send", "--args", &args]);
        assert!(tested.starts_with("forbid: the rules could not decide this call"), "{tested}");
    }
    assert_eq!(audit_of(&cli, "action.executed").len(), 1, "nothing past the rules ran");

    // The limit: the approved run counted; two more pass, the fourth is refused with a retry time.
    for _ in 0..2 {
        let ran = run_send(&cli, r#"{"to":"b@example.com"}"#);
        assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));
    }
    let limited = run_send(&cli, r#"{"to":"b@example.com"}"#);
    let stderr = String::from_utf8_lossy(&limited.stderr);
    assert!(stderr.contains("three-an-hour") && stderr.contains("allowed again in"), "{stderr}");
    let executed = audit_of(&cli, "action.executed");
    assert_eq!(executed.len(), 3);
    let hash = executed[0]["payload"]["aileron.policy.hash"].as_str().unwrap().to_string();
    assert!(hash.starts_with("sha256:"), "every run record names the policy set");
    assert_eq!(audit_of(&cli, "policy.loaded")[0]["payload"]["aileron.policy.hash"], hash.as_str());
    // The shadow rule refused everything: audited, never enforced.
    assert!(audit_of(&cli, "policy.shadow").len() >= 3);

    // Through MCP: an agent's session (aileron-mcp trades the daemon token for one) has counts of
    // its own; the envelope names the class, the rule and when to retry.
    let mut session = StdioSession::spawn(&[("AILERON_HOME", cli.home.to_str().unwrap())]);
    session.initialize("2025-06-18");
    let refused = session.call("send", json!({"to": "someone@evil.test"}));
    assert_eq!(refused["isError"], true);
    let text = refused["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("policy_denied") && text.contains("example-org-only"), "{text}");
    for _ in 0..3 {
        let ran = session.call("send", json!({"to": "c@example.com"}));
        assert_ne!(ran["isError"], true, "{ran}");
    }
    let limited = session.call("send", json!({"to": "c@example.com"}));
    let envelope: Value = serde_json::from_str(limited["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(envelope["error"]["class"], "policy_denied", "{envelope}");
    assert_eq!(envelope["error"]["retriable"], true);
    let retry = envelope["error"]["details"]["retry_after_seconds"].as_i64().unwrap();
    assert!((3590..=3600).contains(&retry), "an hour after the first of the three: {retry}");
    drop(session);

    // Killed and restarted: the counts come back from the audit log.
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    crate::campaign::kill_9(info["pid"].as_i64().unwrap() as i32);
    cli.ok(&["daemon", "start"]);
    let still = run_send(&cli, r#"{"to":"b@example.com"}"#);
    assert!(String::from_utf8_lossy(&still.stderr).contains("three-an-hour"), "the limit held across the restart");

    // A set that stops loading: the rules in force stay, and status says why.
    std::fs::write(dir.join("limit.cedar"), "forbid(principal, action, resource) when { context.args.nope == 1 };")
        .unwrap();
    let status = status_saying(&cli, "policy error");
    assert!(status.contains("limit.cedar"), "{status}");
    let top = cli.ok(&["status"]);
    assert!(top.contains("the files do not load") && top.contains("limit.cedar"), "{top}");
    let kept = run_send(&cli, r#"{"to":"someone@evil.test"}"#);
    assert!(String::from_utf8_lossy(&kept.stderr).contains("example-org-only"), "the previous set still refuses");
    let check = cli.run(&["policy", "check"]);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(!check.status.success() && stderr.contains("limit.cedar") && stderr.contains("hint:"), "{stderr}");
    cli.ok(&["daemon", "stop"]);
}

/// `aileron policy replay`: the rules as they are now over the runs the log holds — a limit
/// added after six runs would have refused the last two; a rule over arguments is named as not
/// replayable (the log keeps argument names only).
#[test]
fn replay_prints_the_runs_the_current_rules_would_decide_differently() {
    let cli = Cli::new();
    send_action(&cli);
    cli.ok(&["daemon", "start"]);
    for _ in 0..6 {
        cli.ok(&["action", "run", "send", "--args", r#"{"to":"a@example.com"}"#]);
    }
    cli.ok(&["daemon", "stop"]);
    let dir = policy_dir(&cli);
    std::fs::write(dir.join("limit.cedar"), LIMIT.replace(">= 3", ">= 4")).unwrap();
    std::fs::write(dir.join("org.cedar"), ORG).unwrap();
    let output = cli.run(&["policy", "replay"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let changed: Vec<&str> = stdout.lines().collect();
    assert_eq!(changed.len(), 2, "{stdout}");
    assert!(changed.iter().all(|line| line.contains("was allow, now forbid by three-an-hour")), "{stdout}");
    assert!(stderr.contains("6 run(s) replayed") && stderr.contains("2 would be decided differently"), "{stderr}");
    assert!(stderr.contains("not replayed: example-org-only"), "{stderr}");
}

/// Over HTTP a refusal is a 403 failure envelope (class, boundary, rules); the console's Actions
/// page lists the rules that may apply to each action: those naming it, and those naming none.
#[tokio::test]
async fn http_refuses_with_403_and_the_console_shows_the_rules_of_each_action() {
    use crate::support::{Harness, guest_wasm, manifest};
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let mut send = ActionSpec::new("send", "echo", &hash, "echo");
    send.inputs = &[("to", "string", true), ("amount", "integer", false)];
    assert!(harness.add_action("send.md", &send.render()).await.status.is_success());
    assert!(
        harness
            .add_action("other.md", &ActionSpec::new("other", "echo", &hash, "echo").render())
            .await
            .status
            .is_success()
    );
    let dir = harness.home.root().join("policy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("org.cedar"), ORG).unwrap();
    std::fs::write(dir.join("ask.cedar"), ASK).unwrap();
    let reloaded = aileron::workflows::policy::reload(&harness.state.services).await;
    assert!(matches!(reloaded, aileron::stores::rules::Reloaded::Loaded { .. }), "{reloaded:?}");

    let refused = harness.run("send", json!({"to": "x@evil.test"})).await;
    assert_eq!(refused.status, http::StatusCode::FORBIDDEN, "{}", refused.body);
    let error = &refused.body["error"];
    assert_eq!((error["class"].as_str(), error["boundary"].as_str()), (Some("policy_denied"), Some("policy")));
    assert_eq!(error["details"]["rules"], json!(["example-org-only"]));
    assert!(error["audit_id"].is_string(), "the refusal is audited under the envelope's id");
    assert_eq!(harness.run("other", json!({})).await.status, http::StatusCode::OK, "no rule refuses it");

    let cookie = harness.console_cookie().await;
    let request = http::Request::builder()
        .uri("/actions")
        .header("host", format!("127.0.0.1:{}", crate::support::PORT))
        .header("cookie", &cookie);
    let page = harness.send(request, None).await.body.as_str().unwrap().to_string();
    let card = |name: &str| {
        page.split(&format!("<details id=\"action-{name}\""))
            .nth(1)
            .unwrap()
            .split("</details>")
            .next()
            .unwrap()
            .to_string()
    };
    let (send_card, other_card) = (card("send"), card("other"));
    assert!(send_card.contains("example-org-only") && send_card.contains("big-amounts"), "{send_card}");
    assert!(!other_card.contains("example-org-only") && other_card.contains("big-amounts"), "{other_card}");
}

/// SPEC §16 at the agent's own network: a launched agent's request matched to a connector's
/// operation is decided by the same rules as a run. Under a limit of two merges an hour the third
/// is refused 403 `policy_denied` with the rule and when to retry (also as `Retry-After`); a
/// forbidden deletion never leaves; an `@ask` rule holds the new issue until the user approves it,
/// the reason on the card; a shadow rule is audited and changes nothing. Each decision is in the
/// audit log with the request it was about.
#[test]
fn a_launched_agents_own_requests_are_decided_by_the_same_rules() {
    use crate::launch::{
        LaunchRig, agent_script, bind_key, install_spec_only, recording_upstream, start_with_a_vault, text,
    };
    use std::path::Path;

    let rig = LaunchRig::new();
    let (upstream, saw) = recording_upstream(r#"{"ok":true}"#);
    let policy = rig.aileron_home().join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    std::fs::write(
        policy.join("requests.cedar"),
        "@id(\"two-merges-an-hour\")\nforbid(principal is Aileron::Agent, action == Aileron::Action::\"http_request\", \
         resource == Aileron::Tool::\"merge_pull_request\")\nwhen { context.runs_last_hour >= 2 };\n\n\
         @id(\"never-delete-repositories\")\nforbid(principal, action, resource == Aileron::Tool::\"delete_repository\");\n\n\
         @id(\"issues-need-a-look\")\n@ask(\"a new issue needs a look\")\nforbid(principal, action == \
         Aileron::Action::\"http_request\", resource == Aileron::Tool::\"create_issue\");\n",
    )
    .unwrap();
    std::fs::write(
        policy.join("strict.shadow.cedar"),
        "@id(\"no-listing\")\nforbid(principal, action, resource == Aileron::Tool::\"list_issues\");\n",
    )
    .unwrap();
    start_with_a_vault(&rig);
    let operation = |name: &str, method: &str, path: &str| {
        format!(
            "[[proxy.operations]]\nname = \"{name}\"\nmethod = \"{method}\"\nhost = \"{upstream}\"\npath = \"{path}\"\n\n"
        )
    };
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n{}{}{}{}",
        operation("merge_pull_request", "PUT", "/repos/{owner}/{repo}/pulls/{number}/merge"),
        operation("delete_repository", "DELETE", "/repos/{owner}/{repo}"),
        operation("create_issue", "POST", "/repos/{owner}/{repo}/issues"),
        operation("list_issues", "GET", "/repos/{owner}/{repo}/issues"),
    );
    install_spec_only(&rig, &upstream, &extra);
    bind_key(&rig, "ghp_policyKeyTheAgentNeverSees000000001");
    agent_script(&rig, "policy_clients.py");
    let report_path = rig.workspace().join("policy-report.json");

    let done = std::sync::atomic::AtomicBool::new(false);
    let card = std::thread::scope(|scope| {
        let decider = scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let listed = rig.run(&["approval", "list", "--json"], &[]);
                let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
                if let Some(item) = listed["items"].as_array().and_then(|items| items.first()) {
                    let shown = text(&rig.run(&["approval", "list"], &[]));
                    assert!(shown.contains("asked by a policy rule: a new issue needs a look"), "{shown}");
                    let approved = rig.run(&["approval", "approve", item["id"].as_str().unwrap()], &[]);
                    assert!(approved.status.success(), "{}", text(&approved));
                    return item.clone();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Value::Null
        });
        let env: [(&str, &std::ffi::OsStr); 2] =
            [("ATTACK_REPORT", report_path.as_os_str()), ("UPSTREAM", upstream.as_ref())];
        let output = rig.run_with_path(&["launch", "claude", "--approval-hold", "20"], &env, Path::new("/usr/bin"));
        done.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        decider.join().unwrap()
    });
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let merges = report["merges"].as_array().unwrap();
    assert_eq!((merges[0]["status"].as_str(), merges[1]["status"].as_str()), (Some("200"), Some("200")), "{report:#}");
    let refused = &merges[2];
    assert_eq!(refused["status"], "403", "{report:#}");
    assert_eq!(refused["body"]["error"]["class"], "policy_denied", "{report:#}");
    assert_eq!(refused["body"]["error"]["boundary"], "policy", "{report:#}");
    assert_eq!(refused["body"]["error"]["details"]["rules"], json!(["two-merges-an-hour"]), "{report:#}");
    let retry: i64 = refused["retry_after"].as_str().unwrap().parse().unwrap();
    assert!((3590..=3600).contains(&retry), "the first merge leaves the hour in about an hour: {report:#}");
    assert_eq!(refused["body"]["error"]["details"]["retry_after_seconds"], retry, "{report:#}");
    assert_eq!(report["delete"]["status"], "403", "{report:#}");
    assert_eq!(report["delete"]["body"]["error"]["details"]["rules"], json!(["never-delete-repositories"]));
    assert_eq!(report["issue"]["status"], "200", "the asked request goes once approved: {report:#}");
    assert_eq!(card["policy_reason"], "a new issue needs a look", "{card:#}");
    assert_eq!(card["args"]["path"], "/repos/acme/app/issues", "{card:#}");
    assert_eq!(report["listing"]["status"], "200", "a shadow rule changes nothing: {report:#}");
    assert_eq!(
        *saw.lock().unwrap(),
        [
            "PUT /repos/acme/app/pulls/1/merge HTTP/1.1",
            "PUT /repos/acme/app/pulls/2/merge HTTP/1.1",
            "POST /repos/acme/app/issues HTTP/1.1",
            "GET /repos/acme/app/issues HTTP/1.1",
        ],
        "exactly what the rules let through"
    );

    let listed = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let records = listed["items"].as_array().unwrap();
    let of = |event_type: &str| -> Vec<&Value> { records.iter().filter(|r| r["event_type"] == event_type).collect() };
    let denied: Vec<(&str, &str)> = of("policy.denied")
        .iter()
        .map(|r| {
            assert_eq!(r["payload"]["aileron.policy.action"], "http_request", "{r:#}");
            assert_eq!(r["payload"]["aileron.failure.class"], "policy_denied", "{r:#}");
            (
                r["payload"]["aileron.action.name"].as_str().unwrap(),
                r["payload"]["aileron.proxy.upstream.path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        denied,
        [("delete_repository", "/repos/acme/app"), ("merge_pull_request", "/repos/acme/app/pulls/3/merge")],
        "newest first"
    );
    let admitted = of("policy.admitted");
    let mut counted: Vec<&str> =
        admitted.iter().map(|r| r["payload"]["aileron.action.name"].as_str().unwrap()).collect();
    counted.sort();
    assert_eq!(
        counted,
        ["create_issue", "list_issues", "merge_pull_request", "merge_pull_request"],
        "every request let through is counted durably while rules count (the issue once, when approved)"
    );
    let shadow = of("policy.shadow");
    assert_eq!(shadow.len(), 1, "{shadow:#?}");
    assert_eq!(shadow[0]["payload"]["aileron.policy.rules"], json!(["no-listing"]));
    let hash = admitted[0]["payload"]["aileron.policy.hash"].clone();
    let proxied = of("connector.proxy.proxied");
    assert_eq!(proxied.len(), 4, "{proxied:#?}");
    assert!(proxied.iter().all(|r| r["payload"]["aileron.policy.hash"] == hash), "{proxied:#?}");

    // Replay over the agent's requests: a rule added now would have refused the listing; the
    // merges replay as they went (two allowed, the third refused by the limit).
    std::fs::write(
        policy.join("zz-no-listing.cedar"),
        "@id(\"no-listing-now\")\nforbid(principal, action == Aileron::Action::\"http_request\", resource == \
         Aileron::Tool::\"list_issues\");\n",
    )
    .unwrap();
    let replayed = rig.run(&["policy", "replay"], &[]);
    assert!(replayed.status.success(), "{}", text(&replayed));
    let (stdout, stderr) = (String::from_utf8_lossy(&replayed.stdout), String::from_utf8_lossy(&replayed.stderr));
    let changed: Vec<&str> = stdout.lines().collect();
    assert_eq!(changed.len(), 1, "{stdout}\n{stderr}");
    assert!(
        changed[0].contains("list_issues") && changed[0].contains("was allow, now forbid by no-listing-now"),
        "{stdout}"
    );
    assert!(
        stderr.contains("6 run(s) replayed"),
        "the three merges, the deletion, the issue and the listing: {stderr}"
    );
}

/// A run the rules count acts only once its admission is on record (SPEC §16): its
/// `policy.admitted` record is handed to the writer at admission and awaited before the first
/// request leaves, not before the run starts. The upstream, as each request arrives, reads the
/// audit log: the run's admission is always there already.
#[test]
fn a_counted_runs_request_reaches_the_upstream_only_after_its_admission_is_recorded() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cli = Cli::new();
    let audit_dir = cli.home.join("audit");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0))).unwrap();
    let upstream = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/fetch",
        axum::routing::get({
            let (audit_dir, seen) = (audit_dir.clone(), seen.clone());
            move || async move {
                // What a crash at this moment would leave: the admissions written so far.
                let admitted: usize = std::fs::read_dir(&audit_dir)
                    .unwrap()
                    .flatten()
                    .filter(|entry| entry.file_name().to_string_lossy().ends_with(".jsonl"))
                    .map(|entry| std::fs::read_to_string(entry.path()).unwrap_or_default())
                    .map(|text| text.matches("\"event_type\":\"policy.admitted\"").count())
                    .sum();
                seen.lock().unwrap().push(admitted);
                "fetched"
            }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    let hash = cli.install_guest("http_get", &[upstream.to_string()]);
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    // A rule that counts runs (and never refuses at these numbers).
    std::fs::write(
        policy_dir(&cli).join("count.cedar"),
        "forbid(principal, action, resource) when { context.runs_last_hour >= 1000 };\n",
    )
    .unwrap();
    status_saying(&cli, "1 rule(s) from 1 file(s)");
    let url = format!("url=http://{upstream}/fetch");
    for run in 1..=5 {
        let ran = cli.run(&["action", "run", "fetch", "--arg", &url]);
        assert!(ran.status.success(), "run {run}: {}", String::from_utf8_lossy(&ran.stderr));
    }
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4, 5], "each request found its own run's admission on record");
    assert_eq!(audit_of(&cli, "policy.admitted").len(), 5);
}
