//! `console`: the web console's activity page on a log of 100,000 audit records (issue 16). The
//! page as a browser first asks for it (signed-in cookie; the newest 50 top-level records, the
//! proxied calls of their runs, the 24-hour chart over every record of the day) and a filtered
//! refresh (`?action=`, matching 1 % of the runs, fetched as the script does with
//! `x-aileron-fragment`), each timed to the last byte, against the JSON API's newest page
//! (`GET /v1/audit?limit=50`) in the same run. Goal: each at most 100 ms at p50. A browser adds
//! its own parse and paint to the first figure; the server's share is what the daemon controls.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::stores::audit_log::{AuditConfig, AuditEvent, AuditLog};
use aileron_core::audit::{Actor, ActorType};
use aileron_core::vocabulary::{EventType, keys};
use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::daemon::{BenchDaemon, http_client};
use super::figures::{Distribution, distribution_rows, format_duration, format_ratio, ratio};
use super::report::SummaryRow;

/// Records written before the daemon starts: half runs, half their proxied calls.
pub(super) const RECORDS: usize = 100_000;
/// Distinct action names: a filter on one matches 1 % of the runs.
const ACTIONS: usize = 100;
/// Timed requests of each kind, after [`WARMUP`] untimed ones.
const SAMPLES: usize = 40;
const WARMUP: usize = 3;
const GOAL: Duration = Duration::from_millis(100);
/// Concurrent appenders: the writer's group commit makes the fill take seconds, not minutes.
const APPENDERS: usize = 256;

pub(super) struct ConsoleFigures {
    page: Distribution,
    filtered: Distribution,
    api: Distribution,
    /// The daemon's first verification: every record parsed.
    verify_first: Distribution,
    /// Later ones, [`APPENDED_BETWEEN`] records appended before each.
    verify_again: Distribution,
    /// The whole chain without what the daemon remembers (`aileron audit verify`'s way).
    verify_whole: Distribution,
    records: u64,
    /// Opening the daemon's state on the filled log (finding the chain head among others).
    open: Duration,
}

/// Records appended before each later verification (as runs between two views of the page).
const APPENDED_BETWEEN: usize = 100;
const VERIFIES: usize = 5;

pub(super) async fn run(scratch: &Path) -> anyhow::Result<ConsoleFigures> {
    let home = Home::at(scratch.join("console").join("home"))?;
    let parent = home.audit_parent().context("the bench home keeps its audit log on disk")?;
    fill(&parent).await?;
    let (daemon, open) = BenchDaemon::start(&home)?;
    eprintln!("    the daemon's state opened on the filled log in {}", format_duration(open));
    let client = http_client()?;
    let ticket =
        daemon.expect(&client, Method::POST, "/v1/web/login-tickets", Some(&json!({})), StatusCode::CREATED).await?;
    let login = client.get(ticket["login_url"].as_str().context("the ticket has no login URL")?).send().await?;
    let cookie = login
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(str::to_string)
        .context("the sign-in set no cookie")?;

    let get = |path: &str, cookie: Option<&str>, fragment: bool| {
        let mut builder = client.get(daemon.url(path));
        builder = match cookie {
            Some(cookie) => builder.header(reqwest::header::COOKIE, cookie),
            None => builder.bearer_auth(&daemon.token),
        };
        if fragment {
            builder = builder.header("x-aileron-fragment", "1");
        }
        builder
    };
    let time = async |builder: reqwest::RequestBuilder, must_contain: &str| {
        let started = Instant::now();
        let response = builder.send().await?;
        let status = response.status();
        let body = response.text().await?;
        let elapsed = started.elapsed();
        if status != StatusCode::OK || !body.contains(must_contain) {
            bail!("answered {status} without `{must_contain}`: {}", body.chars().take(300).collect::<String>());
        }
        Ok::<Duration, anyhow::Error>(elapsed)
    };
    let filter = "/activity?action=action-7";
    let (mut page, mut filtered, mut api) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARMUP + SAMPLES {
        let timed = (
            time(get("/activity", Some(&cookie), false), "id=\"records\"").await?,
            time(get(filter, Some(&cookie), true), "action-7").await?,
            time(get("/v1/audit?limit=50", None, false), "\"items\"").await?,
        );
        if round >= WARMUP {
            page.push(timed.0);
            filtered.push(timed.1);
            api.push(timed.2);
        }
    }
    let verify_first = vec![time(get("/v1/audit/verify", Some(&cookie), false), "\"ok\":true").await?];
    let (mut verify_again, mut verify_whole) = (Vec::new(), Vec::new());
    for round in 0..VERIFIES {
        for n in 0..APPENDED_BETWEEN {
            let mut payload = Map::new();
            payload.insert(keys::ACTION_NAME.into(), format!("action-{}", n % ACTIONS).into());
            daemon
                .state
                .services
                .audit
                .append(event(EventType::ActionExecuted, payload, Some(format!("bench-more-{round}-{n}"))))
                .await?;
        }
        verify_again.push(time(get("/v1/audit/verify", Some(&cookie), false), "\"ok\":true").await?);
        let started = Instant::now();
        aileron::stores::audit_log::verify(&parent).context("verifying the whole chain")?;
        verify_whole.push(started.elapsed());
    }
    // The records the pages were measured on: those appended for the later checks came after.
    let records = daemon.state.services.audit.verify().context("verifying the filled log")?.records
        - (VERIFIES * APPENDED_BETWEEN) as u64;
    daemon.stop().await?;
    Ok(ConsoleFigures {
        page: Distribution::new(page),
        filtered: Distribution::new(filtered),
        api: Distribution::new(api),
        verify_first: Distribution::new(verify_first),
        verify_again: Distribution::new(verify_again),
        verify_whole: Distribution::new(verify_whole),
        records,
        open,
    })
}

/// Writes [`RECORDS`] records shaped like runs: for each run a proxied call carrying the run's
/// audit id, then the run (one in ten failed), spread over 100 action names.
async fn fill(parent: &Path) -> anyhow::Result<()> {
    let log = std::sync::Arc::new(AuditLog::open(AuditConfig { dir: Some(parent.to_path_buf()), witness: None })?);
    let runs = RECORDS / 2;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..APPENDERS {
        let log = log.clone();
        tasks.spawn(async move {
            for run in (worker..runs).step_by(APPENDERS) {
                let audit_id = format!("bench-run-{run:06}");
                let action = format!("action-{}", run % ACTIONS);
                let mut call = Map::new();
                call.insert(keys::CONNECTOR_FQN.into(), "github://aileron-bench/echo".into());
                call.insert(keys::ACTION_NAME.into(), action.clone().into());
                call.insert(keys::AUDIT_ID.into(), audit_id.clone().into());
                call.insert(keys::PROXY_METHOD.into(), "GET".into());
                call.insert(keys::PROXY_UPSTREAM_HOST.into(), "api.example.com:443".into());
                call.insert(keys::PROXY_UPSTREAM_PATH.into(), "/v1/things".into());
                call.insert(keys::PROXY_UPSTREAM_STATUS.into(), 200.into());
                call.insert(keys::PROXY_DURATION_US.into(), 1234.into());
                log.append(event(EventType::ConnectorProxyProxied, call, None)).await?;
                let mut payload = Map::new();
                payload.insert(keys::ACTION_NAME.into(), action.into());
                payload.insert(keys::CONNECTOR_FQN.into(), "github://aileron-bench/echo".into());
                payload.insert(
                    keys::ACTION_STEPS.into(),
                    json!([{ "id": "get", keys::CONNECTOR_FQN: "github://aileron-bench/echo", keys::CONNECTOR_OP: "get", "attempts": 1 }]),
                );
                let failed = run % 10 == 0;
                if failed {
                    payload.insert(keys::FAILURE_CLASS.into(), "network".into());
                    payload.insert(keys::FAILURE_MESSAGE.into(), "the upstream did not answer".into());
                }
                let kind = if failed { EventType::ExecutionFailed } else { EventType::ActionExecuted };
                log.append(event(kind, payload, Some(audit_id))).await?;
            }
            Ok::<(), anyhow::Error>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("an appender panicked")??;
    }
    log.flush().await;
    drop(log);
    Ok(())
}

fn event(event_type: EventType, payload: Map<String, Value>, audit_id: Option<String>) -> AuditEvent {
    AuditEvent { event_type, actor: Actor::new(ActorType::Agent, "bench"), session_id: None, payload, audit_id }
}

impl ConsoleFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let api = self.api.p50();
        vec![
            SummaryRow {
                figure: format!("(h) console /activity, {} records, p50", self.records),
                measured: format_duration(self.page.p50()),
                baseline: format!("{} GET /v1/audit?limit=50", format_duration(api)),
                ratio: format_ratio(ratio(self.page.p50(), api)),
                goal: "≤ 100 ms",
                met: Some(self.page.p50() <= GOAL),
            },
            SummaryRow {
                figure: "(h) console filter (?action=, 1 % of runs), p50".to_string(),
                measured: format_duration(self.filtered.p50()),
                baseline: format!("{} GET /v1/audit?limit=50", format_duration(api)),
                ratio: format_ratio(ratio(self.filtered.p50(), api)),
                goal: "≤ 100 ms",
                met: Some(self.filtered.p50() <= GOAL),
            },
            SummaryRow {
                figure: format!("(h) chain check, {APPENDED_BETWEEN} records after the last, p50"),
                measured: format_duration(self.verify_again.p50()),
                baseline: format!("{} whole chain", format_duration(self.verify_whole.p50())),
                ratio: format_ratio(ratio(self.verify_again.p50(), self.verify_whole.p50())),
                goal: "",
                met: None,
            },
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (h) Web console: the activity page on {} audit records\n", self.records);
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. {RECORDS} records written before the daemon starts (half runs over {ACTIONS} \
             action names, one in ten failed, half their proxied calls), all within the last day, so the page's \
             24-hour chart reads every one. Page: `GET /activity` with the signed-in cookie, to the last byte (the \
             newest 50 top-level records, their runs' proxied calls, the chart). Filter: `GET /activity?action=action-7` \
             with `x-aileron-fragment: 1`, what the page script fetches (1 % of the runs match). Baseline: \
             `GET /v1/audit?limit=50` with the admin token. {SAMPLES} sequential samples of each after {WARMUP} \
             untimed. The chain check (`GET /v1/audit/verify`, fetched by the page after it is shown): the daemon's \
             first, which parses every record, then {VERIFIES} more with {APPENDED_BETWEEN} records appended before \
             each, which re-hash the bytes the daemon proved before and parse only the new records; beside each of \
             those, the whole chain verified in the benchmark's process without what the daemon remembers, as \
             `aileron audit verify` does.\n"
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                ("GET /activity (first paint's server share)", &self.page),
                ("GET /activity?action=… fragment (filter)", &self.filtered),
                ("GET /v1/audit?limit=50 (baseline)", &self.api),
                ("GET /v1/audit/verify, the daemon's first (every record parsed)", &self.verify_first),
                ("GET /v1/audit/verify again, 100 records appended before each", &self.verify_again),
                ("the whole chain, nothing remembered (`aileron audit verify`'s way)", &self.verify_whole),
            ],
        );
        let _ = writeln!(
            text,
            "\nOpening the daemon's state on these records (the chain head found at the end of the newest file, \
             among the rest of the state) took {}.",
            format_duration(self.open)
        );
    }
}
