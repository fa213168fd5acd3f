//! `audit-tree`: what the verifiable audit log costs (issue 47, SPEC §17). Counted work, in
//! process, on a log of 1,000,000 synthetic record lines: the tree's cost per record (leaf and
//! completed parents hashed and written, what the writer does after each batch's
//! acknowledgement), a checkpoint (root, sign, write), a receipt's proof (inclusion proof from the
//! stored tree against the newest checkpoint) and an offline check of a receipt. Baseline in the
//! same run: a run of the echo action over loopback HTTP (its p50), what one record costs today.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::stores::audit_log::tree::{self, Tree};
use aileron_core::tlog::merkle;
use reqwest::Method;
use serde_json::json;

use super::daemon::{BenchDaemon, http_client};
use super::figures::{Distribution, distribution_rows, format_duration, format_ratio, ratio};
use super::report::SummaryRow;

/// The log size the issue's goals are stated for.
pub(super) const RECORDS: u64 = 1_000_000;
const SAMPLES: usize = 200;
const RUNS: usize = 300;
const PROOF_GOAL: Duration = Duration::from_millis(5);

pub(super) struct TreeFigures {
    records: u64,
    /// The OTLP export: records delivered per second, and the process CPU per record.
    export_per_second: f64,
    export_cpu_per_record: Duration,
    /// Runs under load with the tree made unavailable, with it (the product), and with the
    /// export on as well.
    runs_without_tree: super::http::LoadFigures,
    runs_without_export: super::http::LoadFigures,
    runs_with_export: super::http::LoadFigures,
    /// The latencies of the two tree-off and the two tree-on phases, pooled: the p99 compared.
    pooled_without_tree: Distribution,
    pooled_with_tree: Distribution,
    /// Building the stored tree from the log's lines, per record.
    per_record: Duration,
    checkpoint: Distribution,
    proof: Distribution,
    check: Distribution,
    run: Distribution,
}

pub(super) async fn run(
    scratch: &Path,
    clients: u64,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<TreeFigures> {
    let dir = scratch.join("audit-tree").join("audit");
    std::fs::create_dir_all(&dir)?;
    // Lines of a realistic size (an action.executed record is 600–900 bytes).
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("audit-2026-01-01.jsonl"))?);
    let padding = "x".repeat(600);
    for seq in 1..=RECORDS {
        writeln!(file, "{{\"event_type\":\"action.executed\",\"pad\":\"{padding}\",\"seq\":{seq}}}")?;
    }
    file.into_inner()?.sync_all()?;

    let mut tree = Tree::open(&dir)?;
    let started = Instant::now();
    tree.catch_up(&dir, RECORDS)?;
    let per_record = started.elapsed() / RECORDS as u32;
    let signer = tree::log_signer(&dir)?;
    let verifier = signer.verifier();

    let mut checkpoint = Vec::new();
    let mut note = String::new();
    for _ in 0..SAMPLES {
        let at = Instant::now();
        note = tree::issue_checkpoint(&dir, &tree, &signer, RECORDS, None)?;
        checkpoint.push(at.elapsed());
    }
    let signed = aileron_core::tlog::Checkpoint::parse(&aileron_core::tlog::SignedNote::parse(&note)?.body)?;
    let (mut proof, mut check) = (Vec::new(), Vec::new());
    for sample in 0..SAMPLES as u64 {
        // Spread over the log, the oldest records included.
        let index = sample * (RECORDS / SAMPLES as u64) + sample % 7;
        let line = format!("{{\"event_type\":\"action.executed\",\"pad\":\"{padding}\",\"seq\":{}}}", index + 1);
        let at = Instant::now();
        let hashes = merkle::inclusion_proof(&tree, index, RECORDS).map_err(anyhow::Error::msg)?;
        let receipt =
            aileron_core::tlog::TlogProof { extra: Some(line.into_bytes()), index, hashes, checkpoint: note.clone() }
                .format();
        proof.push(at.elapsed());
        let at = Instant::now();
        let (_, checked) = tree::check_receipt(&receipt, &signer.verifier_key(), None).map_err(anyhow::Error::msg)?;
        check.push(at.elapsed());
        anyhow::ensure!(checked.root == signed.root, "the receipt's checkpoint changed");
    }
    anyhow::ensure!(verifier.verifies(&aileron_core::tlog::SignedNote::parse(&note)?), "the checkpoint verifies");
    drop(tree);
    let (export_per_second, export_cpu_per_record) = export_throughput(&dir).await?;
    let [runs_without_tree, runs_without_export, again_without_tree, again_with_tree, runs_with_export] =
        runs_under_load(scratch, clients, warmup, window).await?;
    let pooled =
        |a: &super::http::LoadFigures, b: &super::http::LoadFigures| a.latency.clone().merged(b.latency.clone());
    let pooled_without_tree = pooled(&runs_without_tree, &again_without_tree);
    let pooled_with_tree = pooled(&runs_without_export, &again_with_tree);
    std::fs::remove_dir_all(scratch.join("audit-tree"))?;

    Ok(TreeFigures {
        records: RECORDS,
        per_record,
        export_per_second,
        export_cpu_per_record,
        checkpoint: Distribution::new(checkpoint),
        proof: Distribution::new(proof),
        check: Distribution::new(check),
        run: direct_runs(scratch).await?,
        runs_without_tree,
        runs_without_export,
        runs_with_export,
        pooled_without_tree,
        pooled_with_tree,
    })
}

fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Records the export delivers in the throughput figure.
const EXPORTED: u64 = 100_000;

/// The audit export from cursor 0 to [`EXPORTED`] records of the synthetic log, to a local
/// OTLP/HTTP receiver that decodes every request: records per second and process CPU per record
/// (the receiver's decoding included, so an upper bound on the exporter's own).
async fn export_throughput(dir: &Path) -> anyhow::Result<(f64, Duration)> {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use prost::Message;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let received = Arc::new(AtomicU64::new(0));
    let app = {
        let received = received.clone();
        axum::Router::new().route(
            "/v1/logs",
            axum::routing::post(move |body: axum::body::Bytes| {
                let received = received.clone();
                async move {
                    let request = ExportLogsServiceRequest::decode(body).expect("an OTLP logs request");
                    let records: usize =
                        request.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum();
                    received.fetch_add(records as u64, Ordering::AcqRel);
                    axum::http::StatusCode::OK
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/logs", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let (_durable, watch) = tokio::sync::watch::channel(EXPORTED);
    let target = aileron::platform::telemetry::otlp::OtlpTarget::from_lookup("logs", Some(&url), |_| None)
        .map_err(anyhow::Error::msg)?;
    let work = super::work::Work::now();
    let started = Instant::now();
    let _status = aileron::stores::audit_log::export::start(target, dir.to_path_buf(), watch);
    while received.load(Ordering::Acquire) < EXPORTED {
        anyhow::ensure!(started.elapsed() < Duration::from_secs(300), "the export did not finish in 5 minutes");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    let cpu = super::work::Work::now().since(work).cpu;
    server.abort();
    Ok((EXPORTED as f64 / elapsed.as_secs_f64(), cpu / EXPORTED as u32))
}

/// Runs of the echo action over loopback HTTP: the baseline a record's added cost is set against.
async fn direct_runs(scratch: &Path) -> anyhow::Result<Distribution> {
    let home = Home::at(scratch.join("audit-tree-runs").join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let client = http_client()?;
    daemon.add_echo_action(&client, &scratch.join("audit-tree-runs").join("echo-package")).await?;
    let runs = daemon.echo_runs(&client, RUNS, 20).await?;
    daemon.stop().await?;
    Ok(runs)
}

impl TreeFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let run = self.run.p50();
        vec![
            SummaryRow {
                figure: "(m) audit tree, added work per record".to_string(),
                measured: format_duration(self.per_record),
                baseline: format!("{} run p50", format_duration(run)),
                ratio: format!("{:.2} %", ratio(self.per_record, run) * 100.0),
                goal: "≤ +5 % of a run",
                met: Some(self.per_record.as_secs_f64() <= run.as_secs_f64() * 0.05),
            },
            SummaryRow {
                figure: "(m) audit export to an OTLP receiver, records/s".to_string(),
                measured: format!("{:.0}", self.export_per_second),
                baseline: format!("{} run p50", format_duration(run)),
                ratio: format!("{:.2} % CPU of a run per record", ratio(self.export_cpu_per_record, run) * 100.0),
                goal: "≥ 5,000 records/s",
                met: Some(self.export_per_second >= 5000.0),
            },
            SummaryRow {
                figure: format!("(m) run p99 at {} clients, tree and checkpoints on", self.runs_without_tree.clients),
                measured: format_duration(self.pooled_with_tree.p99()),
                baseline: format!("{} with the tree off", format_duration(self.pooled_without_tree.p99())),
                ratio: format_ratio(ratio(self.pooled_with_tree.p99(), self.pooled_without_tree.p99())),
                goal: "p99 ≤ +5 %",
                met: Some(
                    self.pooled_with_tree.p99().as_secs_f64() <= self.pooled_without_tree.p99().as_secs_f64() * 1.05,
                ),
            },
            SummaryRow {
                figure: format!("(m) runs/s at {} clients with the audit export on", self.runs_with_export.clients),
                measured: format!("{:.0}", self.runs_with_export.throughput()),
                baseline: format!("{:.0} runs/s without it", self.runs_without_export.throughput()),
                ratio: format_ratio(self.runs_with_export.throughput() / self.runs_without_export.throughput()),
                goal: "runs never wait on the export",
                met: None,
            },
            SummaryRow {
                figure: "(m) receipt proof / offline check, 1,000,000 records, p99".to_string(),
                measured: format!("{} / {}", format_duration(self.proof.p99()), format_duration(self.check.p99())),
                baseline: format!("{} run p50", format_duration(run)),
                ratio: format_ratio(ratio(self.proof.p99().max(self.check.p99()), run)),
                goal: "≤ 5 ms each",
                met: Some(self.proof.p99() <= PROOF_GOAL && self.check.p99() <= PROOF_GOAL),
            },
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (m) The verifiable audit log: tree, checkpoints, receipts\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. In process, on a log of {} synthetic record lines of ~650 bytes: the \
             stored Merkle tree built from the lines (per record: the leaf and the parents it completes, hashed and \
             written — the writer's work after each batch's acknowledgement), {SAMPLES} checkpoints of the whole \
             tree (root from the stored levels, Ed25519 signature, atomic write), {SAMPLES} receipts' proofs \
             (inclusion proof from the stored tree, tlog-proof text) for records spread over the log, and their \
             offline checks (note signature, inclusion). Baseline in the same run: {RUNS} runs of the echo action \
             over loopback HTTP.\n",
            format_count(self.records)
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                ("checkpoint (1,000,000 records)", &self.checkpoint),
                ("receipt proof", &self.proof),
                ("offline receipt check", &self.check),
                ("run of the echo action (baseline)", &self.run),
                ("run under load, tree off (two phases pooled)", &self.pooled_without_tree),
                ("run under load, tree on (two phases pooled)", &self.pooled_with_tree),
                ("run under load, export on", &self.runs_with_export.latency),
            ],
        );
        let cpu = |figures: &super::http::LoadFigures| figures.work.cpu.div_f64(figures.latency.len().max(1) as f64);
        let _ = writeln!(
            text,
            "\nUnder load ({} clients, {} s, five daemons one after the other — tree off, on, off, on, then on with \
             the export; the first two here, both pairs pooled above): {:.0} runs/s and {} of process CPU \
             per run with the tree off (its directory made unusable, as a broken disk would), {:.0} runs/s and {} \
             with it on; {:.0} runs/s and {} with the export on as well (the receiver's decoding included).",
            self.runs_with_export.clients,
            self.runs_with_export.window.as_secs(),
            self.runs_without_tree.throughput(),
            format_duration(cpu(&self.runs_without_tree)),
            self.runs_without_export.throughput(),
            format_duration(cpu(&self.runs_without_export)),
            self.runs_with_export.throughput(),
            format_duration(cpu(&self.runs_with_export)),
        );
        let _ = writeln!(
            text,
            "\nThe tree adds {} of work per record, {:.2} % of a run's p50 ({}), done on its own thread after the batch is acknowledged. \
             The audit export delivered {EXPORTED} records to a local OTLP/HTTP receiver (decoding each \
             request) at {:.0} records/s, {} of process CPU per record (receiver included). \
             The receipt figures are the proof and its text; finding the record's line in the log (a query by \
             audit id, newest first) comes on top.",
            format_duration(self.per_record),
            ratio(self.per_record, self.run.p50()) * 100.0,
            format_duration(self.run.p50()),
            self.export_per_second,
            format_duration(self.export_cpu_per_record)
        );
    }
}

/// Runs under load (the (b) probe: `POST /v1/actions/echo/run`, `clients` connections) on five
/// daemons one after the other: with the Merkle tree unavailable (`audit/tree` a file, so the
/// writer keeps no tree and issues no checkpoints, as after a disk fault), as shipped, and with
/// the audit export to a local OTLP receiver as well: what the tree and the export cost the runs
/// while they go on.
async fn runs_under_load(
    scratch: &Path,
    clients: u64,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<[super::http::LoadFigures; 5]> {
    let (url, server) = counting_receiver().await?;
    let mut figures = Vec::new();
    let phases = [
        ("without-tree", false, false),
        ("with-tree", true, false),
        ("without-tree-again", false, false),
        ("with-tree-again", true, false),
        ("with-export", true, true),
    ];
    for (name, tree, export) in phases {
        if export {
            // SAFETY: set while no other thread reads the environment: the daemon reads these
            // in `AppState::open`, below, and nothing else of the benchmark reads them.
            unsafe {
                std::env::set_var("AILERON_AUDIT_EXPORT", "otlp");
                std::env::set_var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", &url);
            }
        }
        let home_dir = scratch.join("audit-export-load").join(name).join("home");
        if !tree {
            std::fs::create_dir_all(home_dir.join("audit"))?;
            std::fs::write(home_dir.join("audit").join("tree"), "not a directory")?;
        }
        let home = Home::at(home_dir.clone())?;
        let started = BenchDaemon::start(&home);
        if export {
            // SAFETY: as above.
            unsafe {
                std::env::remove_var("AILERON_AUDIT_EXPORT");
                std::env::remove_var("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT");
            }
        }
        let (daemon, _) = started?;
        anyhow::ensure!(
            daemon.state.services.audit_export.is_some() == export,
            "the export is {}",
            if export { "off" } else { "on" }
        );
        let client = http_client()?;
        daemon.add_echo_action(&client, &scratch.join("audit-export-load").join(name).join("echo-package")).await?;
        let probe = super::http::Probe {
            method: Method::POST,
            url: daemon.url("/v1/actions/echo/run"),
            authorization: daemon.authorization(),
            body: Some(bytes::Bytes::from(json!({ "args": { "text": "the audit log under load" } }).to_string())),
        };
        eprintln!("    runs with {clients} clients, {name}");
        figures.push(super::http::load_phase(&daemon, &probe, clients, warmup, window).await?);
        daemon.stop().await?;
        let checkpoints = home_dir.join("audit").join("checkpoints");
        anyhow::ensure!(checkpoints.exists() == tree, "the tree is {}", if tree { "off" } else { "on" });
    }
    server.abort();
    figures.try_into().map_err(|_| anyhow::anyhow!("five phases"))
}

/// An OTLP/HTTP logs receiver that decodes each request and answers 200.
async fn counting_receiver() -> anyhow::Result<(String, tokio::task::JoinHandle<std::io::Result<()>>)> {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use prost::Message;
    let app = axum::Router::new().route(
        "/v1/logs",
        axum::routing::post(|body: axum::body::Bytes| async move {
            match ExportLogsServiceRequest::decode(body) {
                Ok(_) => axum::http::StatusCode::OK,
                Err(_) => axum::http::StatusCode::BAD_REQUEST,
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1/logs", listener.local_addr()?);
    Ok((url, tokio::spawn(async move { axum::serve(listener, app).await })))
}
