//! `aileron demo`: the whole product, offline, in a temporary home. It starts a real daemon
//! process, a loopback stand-in for api.github.com, installs the bundled example connector
//! (compiled from `connectors/github-issues` and embedded in this binary) and its actions, runs
//! one, shows the sandbox denying an undeclared host and a gated action being denied, then
//! creates a vault, binds a demo token, approves the gated action (which waits for the locked
//! vault, then runs with the token injected host-side), runs `git log` through the spawn example
//! connector (confined; skipped without git), prints the audit trail and verifies it.

mod stand_in;

use stand_in::FakeGithub;

use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::surfaces::cli::ExitStatus;
use crate::surfaces::client::{DaemonClient, start_daemon, stop_daemon};

use crate::platform::home::Home;

/// The example connector, built from source by `build.rs`.
pub const EXAMPLE_WASM: &[u8] = include_bytes!(concat!(env!("AILERON_GUESTS_DIR"), "/github_issues.wasm"));
pub const EXAMPLE_MANIFEST: &str = include_str!(concat!(env!("AILERON_EXAMPLE_CONNECTOR_DIR"), "/manifest.toml"));
/// Action templates shipped with the example connector (placeholders `{{CONNECTOR_*}}`).
pub const EXAMPLE_ACTIONS: [(&str, &str); 3] = [
    ("list-issues.md", include_str!(concat!(env!("AILERON_EXAMPLE_CONNECTOR_DIR"), "/actions/list-issues.md"))),
    ("get-issue.md", include_str!(concat!(env!("AILERON_EXAMPLE_CONNECTOR_DIR"), "/actions/get-issue.md"))),
    ("create-issue.md", include_str!(concat!(env!("AILERON_EXAMPLE_CONNECTOR_DIR"), "/actions/create-issue.md"))),
];
pub const EXAMPLE_FQN: &str = "github://aileron/github-issues";
/// The spawn example: a connector that runs `/usr/bin/git`, confined.
pub const GIT_WASM: &[u8] = include_bytes!(concat!(env!("AILERON_GUESTS_DIR"), "/git_connector.wasm"));
pub const GIT_MANIFEST: &str = include_str!(concat!(env!("AILERON_GIT_CONNECTOR_DIR"), "/manifest.toml"));
pub const GIT_ACTIONS: [(&str, &str); 3] = [
    ("git-log.md", include_str!(concat!(env!("AILERON_GIT_CONNECTOR_DIR"), "/actions/git-log.md"))),
    ("git-status.md", include_str!(concat!(env!("AILERON_GIT_CONNECTOR_DIR"), "/actions/git-status.md"))),
    ("git-diff-stat.md", include_str!(concat!(env!("AILERON_GIT_CONNECTOR_DIR"), "/actions/git-diff-stat.md"))),
];
pub const GIT_FQN: &str = "github://aileron/git";
/// The program the git example declares.
pub const GIT_PROGRAM: &str = "/usr/bin/git";
/// The demo's vault passphrase and the token it binds (both only ever exist in the temporary home).
const DEMO_PASSPHRASE: &str = "correct horse battery staple (demo)";
const DEMO_TOKEN: &str = "ghp_demoToken0000000000000000000000000000";
pub const EXAMPLE_VERSION: &str = "0.1.0";

/// The example manifest with its GitHub host replaced by a loopback `host:port`.
pub fn example_manifest_for(host_port: &str) -> String {
    EXAMPLE_MANIFEST.replace("api.github.com:443", host_port)
}

/// The git example's manifest with its readable directories replaced by `repo_parent`.
pub fn git_manifest_for(repo_parent: &std::path::Path) -> String {
    let declared = "fs_read = [\"~/code/\", \"~/src/\", \"~/projects/\", \"~/repos/\", \"~/work/\"]";
    GIT_MANIFEST.replace(declared, &format!("fs_read = [\"{}/\"]", repo_parent.display()))
}

/// Fills a git example action template's placeholders.
pub fn render_git_action(template: &str, hash: &str) -> String {
    fill_action_template(template, GIT_FQN, hash)
}

/// Fills an action template's placeholders.
pub fn render_action(template: &str, hash: &str) -> String {
    fill_action_template(template, EXAMPLE_FQN, hash)
}

/// `{{CONNECTOR_FQN}}`, `{{CONNECTOR_VERSION}}` (both examples are at [`EXAMPLE_VERSION`]) and
/// `{{CONNECTOR_HASH}}`.
fn fill_action_template(template: &str, fqn: &str, hash: &str) -> String {
    template
        .replace("{{CONNECTOR_FQN}}", fqn)
        .replace("{{CONNECTOR_VERSION}}", EXAMPLE_VERSION)
        .replace("{{CONNECTOR_HASH}}", hash)
}

pub async fn run() -> anyhow::Result<ExitStatus> {
    let temp = tempfile::Builder::new().prefix("aileron-demo-").tempdir().context("creating a temporary home")?;
    let home = Home::at(temp.path().join("home"))?;
    let result = walkthrough(&home, temp.path()).await;
    match stop_daemon(&home, Duration::from_secs(30)).await {
        Ok(Some(pid)) => println!("\n== stopped the daemon (pid {pid}); the temporary home is removed"),
        Ok(None) => {}
        Err(error) => eprintln!("warning: stopping the demo daemon: {error}"),
    }
    result
}

async fn walkthrough(home: &Home, scratch: &std::path::Path) -> anyhow::Result<ExitStatus> {
    println!("== Aileron demo (offline, temporary home {})", home.root().display());

    let upstream = FakeGithub::start().await.context("starting the loopback GitHub stand-in")?;
    println!("\n== 1. a loopback stand-in for api.github.com at {}", upstream.base_url());

    let info = start_daemon(home).await?;
    println!("\n== 2. daemon started at {} (pid {})", info.url, info.pid);
    let client = DaemonClient::connect(home).await?;

    println!("\n== 3. installing the example connector {EXAMPLE_FQN}@{EXAMPLE_VERSION}");
    let package = scratch.join("github-issues-package");
    std::fs::create_dir_all(&package)?;
    std::fs::write(package.join("connector.wasm"), EXAMPLE_WASM)?;
    std::fs::write(package.join("manifest.toml"), example_manifest_for(&upstream.host_port()))?;
    let reference = format!("{EXAMPLE_FQN}@{EXAMPLE_VERSION}");
    let preview = client.post("/v1/connectors/preview", &json!({ "source": package, "reference": reference })).await?;
    print!("{}", indent(&crate::surfaces::cli::connector_consent_text(&preview)));
    println!("   (the demo consents on your behalf, as `--yes --allow-unsigned` would)");
    let installed = client
        .post(
            "/v1/connectors/install",
            &json!({ "source": package, "reference": reference, "expected_hash": preview["hash"], "consent": "flag", "allow_unsigned": true }),
        )
        .await?;
    let hash = installed["hash"].as_str().context("install answered without a hash")?.to_string();
    println!("   installed {hash}");

    println!("\n== 4. adding the example actions");
    for (file_name, template) in EXAMPLE_ACTIONS {
        let added = client
            .post("/v1/actions/install", &json!({ "file_name": file_name, "content": render_action(template, &hash) }))
            .await?;
        println!(
            "   {:<14} → MCP tool `{}`{}",
            added["name"].as_str().unwrap_or("?"),
            added["tool_name"].as_str().unwrap_or("?"),
            if added["requires_approval"] == true { " (requires approval)" } else { "" }
        );
    }

    println!("\n== 5. running list-issues (owner=aileron, repo=demo) — WebAssembly connector → host egress → upstream");
    let before = upstream.recorder.count();
    let args = json!({ "owner": "aileron", "repo": "demo", "api_base": upstream.base_url() });
    let (status, body) = run_action(&client, "list-issues", &args).await?;
    if status != StatusCode::OK {
        bail!("list-issues failed: {body}");
    }
    for issue in body["result"]["output"].as_array().into_iter().flatten() {
        println!("   #{} {}", issue["number"], issue["title"].as_str().unwrap_or("?"));
    }
    println!(
        "   audit {} · the upstream received {} request(s)",
        body["audit_id"].as_str().unwrap_or("?"),
        upstream.recorder.count() - before
    );

    println!("\n== 6. an agent tries to point the connector at a host its manifest does not declare");
    let before = upstream.recorder.count();
    let args = json!({ "owner": "aileron", "repo": "demo", "api_base": "http://exfil.example:8080" });
    let (status, body) = run_action(&client, "list-issues", &args).await?;
    let error = &body["error"];
    println!(
        "   HTTP {} {}: {}",
        status.as_u16(),
        error["class"].as_str().unwrap_or("?"),
        error["message"].as_str().unwrap_or("?")
    );
    println!("   requested {} · granted {}", error["details"]["requested"], error["details"]["granted"]);
    println!(
        "   audit {} · the upstream received {} request(s)",
        error["audit_id"].as_str().unwrap_or("?"),
        upstream.recorder.count() - before
    );
    if error["class"] != "capability_denied" {
        bail!("expected the sandbox to deny the undeclared host, got {body}");
    }

    println!("\n== 7. create-issue requires human approval: the agent gets 202 and a review URL, nothing runs yet");
    let args =
        json!({ "owner": "aileron", "repo": "demo", "title": "Hello from the demo", "api_base": upstream.base_url() });
    let (status, pending) = run_action(&client, "create-issue", &args).await?;
    if status != StatusCode::ACCEPTED {
        bail!("expected 202 pending_approval, got {status}: {pending}");
    }
    let id = pending["approval_id"].as_str().context("no approval id")?.to_string();
    println!("   HTTP 202 {}", pending["status"].as_str().unwrap_or("?"));
    println!("   message to the agent: {}", pending["message"].as_str().unwrap_or("?"));
    let listing = client.get("/v1/action-approvals").await?;
    if let Some(entry) = listing["items"].as_array().and_then(|items| items.iter().find(|e| e["id"] == id.as_str())) {
        println!("   the review card shows the arguments {} and the preview:", entry["args"]);
        for field in entry["preview"]["fields"].as_array().into_iter().flatten() {
            println!("     {}: {}", field["label"].as_str().unwrap_or("?"), field["value"].as_str().unwrap_or("—"));
        }
        if let Some(reason) = entry["preview"]["unavailable"]["reason"].as_str() {
            println!("     preview unavailable: {reason}");
        }
    }

    println!("\n== 8. a human denies it (as `aileron approval deny {id} --reason ...` would); it never runs");
    decide(&client, &id, false, Some("duplicate of #2")).await?;
    println!("   result: {}", client.get(&format!("/v1/action-approvals/{id}/result")).await?);

    println!("\n== 9. the vault: encrypted credentials, bound to a connector, injected host-side");
    client.post("/v1/vault/init", &json!({ "passphrase": DEMO_PASSPHRASE })).await?;
    println!("   created the vault (Argon2id + AES-256-GCM) as `aileron vault init` would");
    let binding =
        client.post("/v1/bindings/setup", &json!({ "connector": EXAMPLE_FQN, "api_key": DEMO_TOKEN })).await?;
    println!(
        "   bound a demo GitHub token as {} (`aileron binding setup {EXAMPLE_FQN}`)",
        binding["name"].as_str().unwrap_or("?")
    );
    client.post("/v1/vault/lock", &json!({})).await?;
    println!("   locked it again, as after a daemon restart: nothing can use the token now");

    println!("\n== 10. asked again, the human approves; the run waits for the vault, then runs once");
    let (_, pending) = run_action(&client, "create-issue", &args).await?;
    let id = pending["approval_id"].as_str().context("no approval id")?.to_string();
    decide(&client, &id, true, None).await?;
    let waiting = wait_for_status(&client, &id, "awaiting_vault").await?;
    println!("   status: {}", waiting["status"].as_str().unwrap_or("?"));
    client.post("/v1/vault/unlock", &json!({ "passphrase": DEMO_PASSPHRASE })).await?;
    println!("   unlocked (`aileron vault unlock`)");
    let view = wait_until_resolved(&client, &id).await?;
    println!("   result: {}", crate::surfaces::cli::approval_status_line(&view));
    if view["status"] != "completed" {
        bail!("the approved create-issue did not complete: {view}");
    }
    let created = &view["result"]["output"];
    println!("   created issue #{} \"{}\"", created["number"], created["title"].as_str().unwrap_or("?"));
    let received = upstream
        .recorder
        .requests()
        .into_iter()
        .rev()
        .find(|request| request.method == "POST")
        .and_then(|request| request.headers.into_iter().find(|(name, _)| name == "authorization"))
        .map(|(_, value)| value);
    println!("   the stand-in received  Authorization: {}", received.as_deref().unwrap_or("(none)"));
    if received.as_deref() != Some(format!("Bearer {DEMO_TOKEN}").as_str()) {
        bail!("the stand-in did not receive the injected token");
    }
    let audit = client.get("/v1/audit?limit=200").await?;
    let seen_by_guest_or_logs = view.to_string().contains(DEMO_TOKEN) || audit.to_string().contains(DEMO_TOKEN);
    println!(
        "   the token appears in the connector's result or the audit log: {}",
        if seen_by_guest_or_logs { "YES (bug)" } else { "no — the connector never saw it" }
    );
    if seen_by_guest_or_logs {
        bail!("the injected token leaked into the result or the audit log");
    }

    spawn_walkthrough(&client, home, scratch).await?;

    println!("\n== 12. the audit trail (newest first)");
    let records = client.get("/v1/audit?limit=50").await?;
    for record in records["items"].as_array().into_iter().flatten() {
        println!("   {}", crate::surfaces::cli::audit_summary_line(record));
    }

    println!("\n== 13. verifying the audit hash chain");
    let dir = home.audit_parent().context("the demo keeps its audit log on disk")?;
    match crate::stores::audit_log::verify(&dir) {
        Ok(report) => println!("   {report}"),
        Err(broken) => bail!("audit chain broken: {broken}"),
    }
    Ok(ExitStatus::Ok)
}

/// Step 11: a connector that wraps a local CLI. Skipped (with the reason) where git is not
/// installed; where programs cannot be confined the refusal itself is shown.
async fn spawn_walkthrough(client: &DaemonClient, home: &Home, scratch: &std::path::Path) -> anyhow::Result<()> {
    println!("\n== 11. a connector that wraps a local program: {GIT_FQN} runs {GIT_PROGRAM}, confined");
    if !std::path::Path::new(GIT_PROGRAM).exists() {
        println!("   skipped: {GIT_PROGRAM} is not installed here");
        return Ok(());
    }
    let repos = scratch.join("code");
    let repo = repos.join("sample");
    sample_repository(&repo).context("creating a sample git repository")?;
    let package = scratch.join("git-package");
    std::fs::create_dir_all(&package)?;
    std::fs::write(package.join("connector.wasm"), GIT_WASM)?;
    std::fs::write(package.join("manifest.toml"), git_manifest_for(&repos))?;
    let reference = format!("{GIT_FQN}@{EXAMPLE_VERSION}");
    let preview = client.post("/v1/connectors/preview", &json!({ "source": package, "reference": reference })).await?;
    print!("{}", indent(&crate::surfaces::cli::connector_consent_text(&preview)));
    let installed = client
        .post(
            "/v1/connectors/install",
            &json!({ "source": package, "reference": reference, "expected_hash": preview["hash"], "consent": "flag", "allow_unsigned": true }),
        )
        .await?;
    let hash = installed["hash"].as_str().context("install answered without a hash")?.to_string();
    for (file_name, template) in GIT_ACTIONS {
        client
            .post(
                "/v1/actions/install",
                &json!({ "file_name": file_name, "content": render_git_action(template, &hash) }),
            )
            .await?;
    }
    let (status, body) = run_action(client, "git-log", &json!({ "repo": repo, "count": 5 })).await?;
    if status != StatusCode::OK {
        let error = &body["error"];
        if error["class"] == "spawn_sandbox_unavailable" {
            println!("   refused, never run unconfined: {}", error["message"].as_str().unwrap_or("?"));
            return Ok(());
        }
        bail!("git-log failed: {body}");
    }
    println!("   git-log {}:", repo.display());
    for commit in body["result"]["output"].as_array().into_iter().flatten() {
        println!(
            "     {} {} — {}",
            commit["hash"].as_str().unwrap_or("?"),
            commit["date"].as_str().unwrap_or("?"),
            commit["subject"].as_str().unwrap_or("?")
        );
    }
    let records = client.get("/v1/audit?event_type=spawn&limit=1").await?;
    if let Some(record) = records["items"].as_array().and_then(|items| items.first()) {
        let payload = &record["payload"];
        println!(
            "   audited as `spawn`: argv {} · exit {} · stdout {} bytes ({}) — values and environment are never recorded",
            payload["aileron.spawn.argv_shape"],
            payload["aileron.spawn.exit_code"],
            payload["aileron.spawn.stdout.bytes"],
            payload["aileron.spawn.stdout.sha256"].as_str().unwrap_or("?")
        );
    }
    // An agent points git at the Aileron home: the program's view of it is an empty directory.
    let (_, body) = run_action(client, "git-log", &json!({ "repo": home.root() })).await?;
    println!(
        "   git-log on the Aileron home itself: {} — the home is hidden from every spawned program",
        body["error"]["message"].as_str().unwrap_or("(no error?)")
    );
    Ok(())
}

/// A repository with two commits, made with the user's git but none of their configuration.
fn sample_repository(repo: &std::path::Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(repo)?;
    let git = |args: &[&str]| -> anyhow::Result<()> {
        let status = std::process::Command::new(GIT_PROGRAM)
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Aileron Demo")
            .env("GIT_AUTHOR_EMAIL", "demo@aileron.invalid")
            .env("GIT_COMMITTER_NAME", "Aileron Demo")
            .env("GIT_COMMITTER_EMAIL", "demo@aileron.invalid")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        if !status.success() {
            bail!("git {} failed", args.join(" "));
        }
        Ok(())
    };
    git(&["init", "-q", "-b", "main"])?;
    std::fs::write(repo.join("README.md"), "# sample\n")?;
    git(&["add", "README.md"])?;
    git(&["commit", "-q", "-m", "Start the sample"])?;
    std::fs::write(repo.join("notes.txt"), "confined, audited\n")?;
    git(&["add", "notes.txt"])?;
    git(&["commit", "-q", "-m", "Add notes"])?;
    Ok(())
}

async fn run_action(client: &DaemonClient, name: &str, args: &Value) -> anyhow::Result<(StatusCode, Value)> {
    client.call_raw(Method::POST, &format!("/v1/actions/{name}/run"), Some(&json!({ "args": args }))).await
}

async fn decide(client: &DaemonClient, id: &str, approved: bool, reason: Option<&str>) -> anyhow::Result<()> {
    let mut body = json!({ "approved": approved });
    if let Some(reason) = reason {
        body["reason"] = reason.into();
    }
    let (status, answer) =
        client.call_raw(Method::POST, &format!("/v1/action-approvals/{id}/decide"), Some(&body)).await?;
    if status != StatusCode::NO_CONTENT {
        bail!("deciding {id} failed ({status}): {answer}");
    }
    Ok(())
}

async fn wait_for_status(client: &DaemonClient, id: &str, status: &str) -> anyhow::Result<Value> {
    for _ in 0..500 {
        let view = client.get(&format!("/v1/action-approvals/{id}/result")).await?;
        if view["status"] == status {
            return Ok(view);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("approval {id} did not reach {status} within 10 s")
}

async fn wait_until_resolved(client: &DaemonClient, id: &str) -> anyhow::Result<Value> {
    for _ in 0..500 {
        let view = client.get(&format!("/v1/action-approvals/{id}/result")).await?;
        if matches!(view["status"].as_str(), Some("completed" | "failed" | "denied")) {
            return Ok(view);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("approval {id} did not finish within 10 s")
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("   {line}\n")).collect()
}
