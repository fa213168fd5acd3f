//! `approvals`: from a human's decision to the approved run (issue 45). Each sample registers a
//! pending approval of the gated echo action, then times `POST /v1/action-approvals/{id}/decide`
//! (what `aileron approval approve` and the console send) until the approval is `running` (its
//! `started` line is fsynced and the run begins) and until it is `completed` (the run's
//! `action.executed` record is durable) — observed on the queue's own event stream, in process,
//! so no polling interval is in the figure. Baseline, in the same run: a direct run of the
//! ungated echo action (`POST /v1/actions/echo/run`), the path an approved run then takes. Goal:
//! decision → run started p99 ≤ 250 ms.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::stores::approvals::QueueEvent;
use aileron_core::approval::ApprovalState;
use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::daemon::{BenchDaemon, http_client};
use super::figures::{Distribution, distribution_rows, format_duration, format_ratio, ratio};
use super::report::SummaryRow;
use super::{ECHO_ACTION, ECHO_MANIFEST, ECHO_WASM, echo_reference};

/// Untimed approvals (and direct runs) before measuring.
const WARMUP: usize = 20;
const STARTED_P99_GOAL: Duration = Duration::from_millis(250);

pub(super) struct ApprovalFigures {
    started: Distribution,
    completed: Distribution,
    direct: Distribution,
    /// Decision → `tasks/get` answering `completed` through `aileron-mcp` (a Tasks client).
    task_completed: Distribution,
}

/// Gated calls timed through the Tasks path (each polls `tasks/get` back to back).
const TASK_SAMPLES: usize = 100;

pub(super) async fn run(approvals: usize, mcp_binary: &Path, scratch: &Path) -> anyhow::Result<ApprovalFigures> {
    let home = Home::at(scratch.join("approvals").join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let client = http_client()?;
    let hash = daemon
        .install_connector(
            &client,
            &scratch.join("approvals").join("echo-package"),
            &echo_reference(),
            ECHO_WASM,
            ECHO_MANIFEST,
        )
        .await?;
    let direct_action = ECHO_ACTION.replace("{{CONNECTOR_HASH}}", &hash);
    daemon.add_action(&client, "echo.md", &direct_action).await?;
    let gated = direct_action
        .replace("name = \"echo\"", "name = \"echo-gated\"")
        .replace("+++\n# Echo", "\n[approval]\nrequired = true\n+++\n# Echo");
    daemon.add_action(&client, "echo-gated.md", &gated).await?;

    let (mut started, mut completed, mut direct) = (Vec::new(), Vec::new(), Vec::new());
    for sample in 0..WARMUP + approvals {
        let (to_start, to_finish) = decide_once(&daemon, &client, sample).await?;
        let run_started = Instant::now();
        let body = json!({ "args": { "text": format!("direct {sample}") } });
        daemon.expect(&client, Method::POST, "/v1/actions/echo/run", Some(&body), StatusCode::OK).await?;
        let ran = run_started.elapsed();
        if sample >= WARMUP {
            started.push(to_start);
            completed.push(to_finish);
            direct.push(ran);
        }
    }
    let task_completed = tasks_path(&daemon, &client, mcp_binary, &home).await?;
    daemon.stop().await?;
    Ok(ApprovalFigures {
        started: Distribution::new(started),
        completed: Distribution::new(completed),
        direct: Distribution::new(direct),
        task_completed: Distribution::new(task_completed),
    })
}

/// The same decision seen by an MCP client that declared Tasks (SEP-2663): `tools/call` of the
/// gated action through the release `aileron-mcp` answers a task; the approval is decided over
/// HTTP; the client polls `tasks/get` until `completed`. Timed from the decision.
async fn tasks_path(
    daemon: &BenchDaemon,
    client: &reqwest::Client,
    mcp_binary: &Path,
    home: &Home,
) -> anyhow::Result<Vec<Duration>> {
    if !mcp_binary.exists() {
        bail!("{} is missing: `cargo xtask bench` builds it in release beside aileron-bench", mcp_binary.display());
    }
    let capabilities = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let url = daemon.url("");
    let mut mcp = super::mcp::McpProcess::start_declaring(mcp_binary, home, &url, &daemon.token, capabilities)?;
    let mut samples = Vec::with_capacity(TASK_SAMPLES);
    for sample in 0..WARMUP + TASK_SAMPLES {
        let params = json!({ "name": "echo_gated", "arguments": { "text": format!("task {sample}") } });
        let (_, answer) = tokio::task::block_in_place(|| mcp.request("tools/call", &params))?;
        let id = answer["result"]["taskId"].as_str().with_context(|| format!("no task: {answer}"))?.to_string();
        let decided = Instant::now();
        let path = format!("/v1/action-approvals/{id}/decide");
        let (status, body) = daemon.request(client, Method::POST, &path, Some(&json!({ "approved": true }))).await?;
        if status != StatusCode::NO_CONTENT {
            bail!("approving {id} answered {status}: {}", String::from_utf8_lossy(&body));
        }
        let get = json!({ "taskId": id });
        loop {
            let (_, got) = tokio::task::block_in_place(|| mcp.request("tasks/get", &get))?;
            match got["result"]["status"].as_str() {
                Some("completed") => break,
                Some("working") if decided.elapsed() < Duration::from_secs(30) => {}
                _ => bail!("task {id}: {got}"),
            }
        }
        if sample >= WARMUP {
            samples.push(decided.elapsed());
        }
    }
    Ok(samples)
}

/// Registers one pending approval, approves it, and times the decision until the run started
/// and until it completed.
async fn decide_once(
    daemon: &BenchDaemon,
    client: &reqwest::Client,
    sample: usize,
) -> anyhow::Result<(Duration, Duration)> {
    // Distinct arguments: each call is its own approval.
    let body = json!({ "args": { "text": format!("gated {sample}") } });
    let pending =
        daemon.expect(client, Method::POST, "/v1/actions/echo-gated/run", Some(&body), StatusCode::ACCEPTED).await?;
    let id = pending["approval_id"].as_str().context("the 202 has no approval id")?.to_string();
    // Subscribed before deciding: no transition can slip past.
    let mut events = daemon.state.services.approvals.subscribe();
    let decided = Instant::now();
    let path = format!("/v1/action-approvals/{id}/decide");
    let (status, answer) = daemon.request(client, Method::POST, &path, Some(&json!({ "approved": true }))).await?;
    if status != StatusCode::NO_CONTENT {
        bail!("approving {id} answered {status}: {}", String::from_utf8_lossy(&answer));
    }
    let mut to_start = None;
    let deadline = decided + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = tokio::time::timeout(left, events.recv())
            .await
            .with_context(|| format!("approval {id} did not complete within 30 s"))?
            .context("the approval queue closed")?;
        let QueueEvent::Resolved { entry } = event else { continue };
        if entry.id.as_str() != id {
            continue;
        }
        match entry.state {
            ApprovalState::Running => to_start = Some(decided.elapsed()),
            ApprovalState::Completed => {
                let done = decided.elapsed();
                return Ok((to_start.unwrap_or(done), done));
            }
            ApprovalState::Failed => bail!("approval {id} failed: {:?}", entry.failure),
            _ => {}
        }
    }
}

impl ApprovalFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let direct = self.direct.p50();
        // Both paths against the same baseline and the same goal.
        let row = |figure: &str, measured: &Distribution| {
            let p99 = measured.p99();
            SummaryRow {
                figure: figure.to_string(),
                measured: format_duration(p99),
                baseline: format!("{} direct run p50", format_duration(direct)),
                ratio: format_ratio(ratio(p99, direct)),
                goal: "p99 ≤ 250 ms",
                met: Some(p99 <= STARTED_P99_GOAL),
            }
        };
        vec![
            row("(l) approve → run started, p99", &self.started),
            row("(l) approve → tasks/get completed (MCP Tasks), p99", &self.task_completed),
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (l) Approvals: from the decision to the run\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. Each sample registers a pending approval of a gated echo action over \
             loopback HTTP, then times `POST /v1/action-approvals/{{id}}/decide` (what `aileron approval approve` \
             and the console send: journal append + fsync, the `approval.approved` record, the background run) until \
             the queue reports the approval `running` (its `started` line fsynced) and `completed` (the run's \
             `action.executed` durable), observed on the queue's event stream in process. Baseline in the same run: a \
             direct `POST /v1/actions/echo/run` of the same action without approval. {WARMUP} untimed samples \
             first. The Tasks path: the release `aileron-mcp` as a client declaring the Tasks extension sees \
             `tools/call` answer a task; the decision is sent over HTTP and the client polls `tasks/get` back to \
             back until `completed` ({TASK_SAMPLES} samples).\n"
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                ("decide → running", &self.started),
                ("decide → completed", &self.completed),
                ("decide → tasks/get completed (aileron-mcp, Tasks client)", &self.task_completed),
                ("direct run (no approval)", &self.direct),
            ],
        );
        let _ = writeln!(
            text,
            "\nThe decision reaches a started run in {} at p99 (goal ≤ 250 ms) and a completed one in {} at p50.",
            format_duration(self.started.p99()),
            format_duration(self.completed.p50())
        );
    }
}
