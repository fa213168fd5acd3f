//! `traces`: `POST /v1/actions/echo/run` with tracing off, against tracing on with the `noop`,
//! `file` and `otlp` exporters (OTLP/HTTP to a receiver process), same home, same run, in
//! rounds that rotate the order so drift on the machine spreads over every configuration.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use aileron::platform::home::Home;
use aileron::platform::telemetry::{Telemetry, TelemetryConfig};
use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::daemon::{BenchDaemon, http_client};
use super::figures::{format_count, format_duration, format_rate, format_ratio, ratio};
use super::http::{LoadFigures, Probe, load_phase};
use super::report::SummaryRow;
use super::sidecar::Sidecar;
use super::work::{PerRequest, process_cpu};
use super::{BenchArgs, ECHO_ACTION, ECHO_MANIFEST, ECHO_WASM, echo_reference};

/// Rounds of the traces benchmark; each phase of a round measures `--duration` ÷ this. Nine
/// short rounds rather than three long ones: the host's speed drifts over seconds, and with three
/// rounds `noop` (which adds almost no work) read 0.87–1.14× `off` in one afternoon's four runs,
/// with nine 1.03× and 1.04× (BENCHMARKS.md, issue 49, 2026-12-02 sixth stop).
pub(super) const TRACE_ROUNDS: usize = 9;

/// Spans one echo run makes: the HTTP root, `aileron.action.execute`, `aileron.capability.check`
/// and `aileron.connector.call`.
const SPANS_PER_RUN: u64 = 4;
/// Issue 6: the OTLP exporter adds at most 10 % at p50 over tracing off.
const OTLP_P50_GOAL: f64 = 1.10;
/// Issue 49: and at most 15 % more CPU per run.
const OTLP_CPU_GOAL: f64 = 1.15;

pub(super) struct TraceFigures {
    /// `off` first, then the exporters.
    phases: Vec<TracePhase>,
}

struct TracePhase {
    label: &'static str,
    load: LoadFigures,
    /// Spans that reached the destination (file lines, spans the receiver counted); `None` for
    /// `off` and `noop`, which export nothing.
    exported: Option<u64>,
    /// `otlp`: the receiver's CPU over the phases (warm-up and the last export included) and the
    /// spans it took in them.
    receiver: Option<(Duration, u64)>,
}

/// An OTLP/HTTP receiver that counts the spans of every `ExportTraceServiceRequest`
/// ([`serve_otlp_receiver`]). It runs as a process of its own (this executable with
/// `--serve-otlp-receiver`), as a collector would: its work is not the daemon's, so it must not
/// count in the process CPU per run the phases compare; its own CPU is reported beside it.
struct SpanReceiver {
    process: Sidecar,
    endpoint: String,
}

impl SpanReceiver {
    fn start() -> anyhow::Result<SpanReceiver> {
        let process = Sidecar::start(&["--serve-otlp-receiver"], "OTLP receiver")?;
        Ok(SpanReceiver { endpoint: format!("{}/v1/traces", process.base_url), process })
    }

    /// The spans it has counted so far.
    async fn spans(&self) -> anyhow::Result<u64> {
        let answer = http_client()?.get(format!("{}/count", self.process.base_url)).send().await?.error_for_status()?;
        answer.text().await?.trim().parse().context("the OTLP receiver's count")
    }

    /// Its CPU time so far.
    fn cpu(&self) -> anyhow::Result<Duration> {
        process_cpu(self.process.pid()).context("reading the OTLP receiver's CPU time")
    }
}

/// `aileron-bench --serve-otlp-receiver`: `POST /v1/traces` counted, `GET /count` the spans so
/// far, on a loopback port it prints; returns when stdin closes.
///
/// It shares the daemon's two CPUs, so its work slows the `otlp` phase's runs as none does
/// `off`'s: it reads only the framing down to the spans ([`SpanFraming`]), and decodes one
/// request in [`DECODE_EVERY`] with the official schema, to stay honest about what the exporter
/// sends. (The exporter's encoding is checked span by span against the official conversion by
/// its unit tests.) Its CPU is measured and reported as a column of its own.
pub(super) fn serve_otlp_receiver() -> anyhow::Result<()> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    let (spans, requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let counted = spans.clone();
    let receive = move |body: Bytes| async move {
        let decoded = if requests.fetch_add(1, Ordering::Relaxed) % DECODE_EVERY == 0 {
            ExportTraceServiceRequest::decode(body.clone()).is_ok()
        } else {
            true
        };
        match SpanFraming::count(body) {
            Ok(received) if decoded => {
                counted.fetch_add(received, Ordering::SeqCst);
                StatusCode::OK
            }
            _ => StatusCode::BAD_REQUEST,
        }
    };
    let count = move || async move { spans.load(Ordering::SeqCst).to_string() };
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(receive))
        .route("/count", axum::routing::get(count));
    super::sidecar::serve(|listener| async move {
        axum::serve(aileron::platform::process::no_delay(listener), app).await?;
        Ok(())
    })
}

/// The receiver decodes every this-many-th request in full.
const DECODE_EVERY: u64 = 64;

/// An `ExportTraceServiceRequest` read only as deep as its spans, by the official field numbers
/// (`opentelemetry/proto/collector/trace/v1`, `trace/v1`): each level's messages are kept as
/// slices of the body, every other field is skipped, and a span is not decoded at all.
#[derive(Clone, PartialEq, prost::Message)]
struct SpanFraming {
    /// `ExportTraceServiceRequest.resource_spans`.
    #[prost(bytes = "bytes", repeated, tag = "1")]
    resource_spans: Vec<Bytes>,
}

/// `ResourceSpans.scope_spans`, and `ScopeSpans.spans` (both field 2).
#[derive(Clone, PartialEq, prost::Message)]
struct FieldTwo {
    #[prost(bytes = "bytes", repeated, tag = "2")]
    messages: Vec<Bytes>,
}

impl SpanFraming {
    /// The spans in an encoded request.
    fn count(body: Bytes) -> Result<u64, prost::DecodeError> {
        use prost::Message as _;
        let mut spans = 0;
        for resource in SpanFraming::decode(body)?.resource_spans {
            for scope in FieldTwo::decode(resource)?.messages {
                spans += FieldTwo::decode(scope)?.messages.len() as u64;
            }
        }
        Ok(spans)
    }
}

pub(super) async fn traces_benchmark(args: &BenchArgs, scratch: &Path) -> anyhow::Result<TraceFigures> {
    let dir = scratch.join("traces");
    let home = Home::at(dir.join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let admin = http_client()?;
    let hash = daemon
        .install_connector(&admin, &dir.join("echo-package"), &echo_reference(), ECHO_WASM, ECHO_MANIFEST)
        .await?;
    daemon.add_action(&admin, "echo.md", &ECHO_ACTION.replace("{{CONNECTOR_HASH}}", &hash)).await?;
    drop(admin);
    daemon.stop().await?;

    let receiver = SpanReceiver::start()?;
    let spans_dir = dir.join("spans");
    let otlp =
        TelemetryConfig { otlp_endpoint: Some(receiver.endpoint.clone()), ..TelemetryConfig::enabled("otlp", None) };
    let configs = [
        ("off", TelemetryConfig::disabled()),
        ("noop", TelemetryConfig::enabled("noop", None)),
        ("file", TelemetryConfig::enabled("file", Some(spans_dir.clone()))),
        ("otlp", otlp),
    ];
    let body = Bytes::from(json!({ "args": { "text": "hello from the traces benchmark" } }).to_string());
    // Rounds with the order rotated, so drift on the machine spreads over every configuration
    // instead of landing on whichever phase ran last.
    let window = args.duration / TRACE_ROUNDS as u32;
    let mut measured: Vec<Option<TracePhase>> = configs.iter().map(|_| None).collect();
    for round in 0..TRACE_ROUNDS {
        for step in 0..configs.len() {
            let index = (step + round) % configs.len();
            let (label, config) = &configs[index];
            let label = *label;
            let telemetry = Telemetry::build(config).with_context(|| format!("building the `{label}` exporter"))?;
            if telemetry.is_enabled() != (label != "off") {
                bail!(
                    "the `{label}` phase built telemetry that is {} enabled",
                    if telemetry.is_enabled() { "" } else { "not" }
                );
            }
            let receiver_before = match label {
                "otlp" => Some((receiver.cpu()?, receiver.spans().await?)),
                _ => None,
            };
            // Nothing an earlier phase wrote is left for the kernel to write back during this
            // one: a `file` phase leaves its spans (tens of MiB) dirty, and their writeback would
            // fall on whichever phase runs when the kernel gets to it, slowing its fsyncs.
            nix::unistd::sync();
            let (daemon, _) = BenchDaemon::start_traced(&home, telemetry.clone())?;
            let url = daemon.url("/v1/actions/echo/run");
            let probe =
                Probe { method: Method::POST, url, authorization: daemon.authorization(), body: Some(body.clone()) };
            eprintln!("    round {}: tracing {label} with {} client(s)", round + 1, args.clients);
            let load = load_phase(&daemon, &probe, args.clients, args.warmup, window).await?;
            daemon.stop().await?;
            // Exports what is still queued; the exporter blocks its caller.
            tokio::task::block_in_place(|| telemetry.shutdown());
            // Cumulative over the rounds: the file and the receiver keep everything.
            let exported = match label {
                "file" => Some(count_lines(&spans_dir)?),
                "otlp" => Some(receiver.spans().await?),
                _ => None,
            };
            if exported == Some(0) {
                bail!("the `{label}` exporter exported no span");
            }
            let receiver = match (receiver_before, exported) {
                (Some((cpu, spans)), Some(exported)) => Some((receiver.cpu()?.saturating_sub(cpu), exported - spans)),
                _ => None,
            };
            measured[index] = Some(match measured[index].take() {
                None => TracePhase { label, load, exported, receiver },
                Some(earlier) => TracePhase {
                    label,
                    load: earlier.load.merged(load),
                    exported,
                    receiver: earlier.receiver.zip(receiver).map(|(a, b)| (a.0 + b.0, a.1 + b.1)),
                },
            });
        }
    }
    let phases = measured.into_iter().map(|phase| phase.expect("every configuration ran")).collect();
    Ok(TraceFigures { phases })
}

/// Lines in every file of `dir` (the file exporter writes one span per line).
fn count_lines(dir: &Path) -> anyhow::Result<u64> {
    let mut lines = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        lines += text.iter().filter(|byte| **byte == b'\n').count() as u64;
    }
    Ok(lines)
}

impl TracePhase {
    /// The receiver's CPU for the spans of one run.
    fn receiver_per_run(&self) -> Option<Duration> {
        let (cpu, spans) = self.receiver?;
        (spans > 0).then(|| cpu.mul_f64(SPANS_PER_RUN as f64 / spans as f64))
    }
}

impl TraceFigures {
    fn off(&self) -> &TracePhase {
        &self.phases[0]
    }

    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let off = &self.off().load;
        let mut rows = Vec::new();
        for phase in &self.phases[1..] {
            let (measured, baseline) = (phase.load.latency.p50(), off.latency.p50());
            let is_otlp = phase.label == "otlp";
            rows.push(SummaryRow::timed(
                format!("(d) echo run latency p50, {} clients, traces `{}`", phase.load.clients, phase.label),
                (measured, baseline),
                "off",
                if is_otlp { "≤ 1.10× off" } else { "" },
                is_otlp.then(|| ratio(measured, baseline) <= OTLP_P50_GOAL),
            ));
        }
        if let Some(otlp) = self.phases.iter().find(|phase| phase.label == "otlp") {
            rows.push(SummaryRow {
                figure: format!("(d) echo runs/s, {} clients, traces `otlp`", otlp.load.clients),
                measured: format_rate(otlp.load.throughput()),
                baseline: format!("{} off", format_rate(off.throughput())),
                ratio: format_ratio(otlp.load.throughput() / off.throughput().max(f64::MIN_POSITIVE)),
                goal: "",
                met: None,
            });
            // Work rather than time: what the spans and their export cost each run, whatever this
            // VM's speed did between the phases.
            let (measured, baseline) = (otlp.load.per_request().cpu, off.per_request().cpu);
            rows.push(SummaryRow::timed(
                format!("(d) CPU per run, {} clients, traces `otlp` (process)", otlp.load.clients),
                (measured, baseline),
                "off",
                "≤ 1.15× off",
                Some(ratio(measured, baseline) <= OTLP_CPU_GOAL),
            ));
            // Not the daemon's work, but taken from the same CPUs while `otlp` is timed.
            if let Some(receiver) = otlp.receiver_per_run() {
                rows.push(SummaryRow::timed(
                    "(d) the OTLP receiver's CPU per run (a process of its own, on the same CPUs)",
                    (receiver, baseline),
                    "off (process)",
                    "",
                    None,
                ));
            }
        }
        rows
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let off = &self.off().load;
        let _ = writeln!(text, "\n### (d) Traces: `POST /v1/actions/echo/run` with tracing off and on\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. The phases of (b) with {} clients on the same home, in {TRACE_ROUNDS} rounds \
             (each configuration measured for 1/{TRACE_ROUNDS} of the window per round, the order rotated every round, the \
             samples pooled), each phase by a daemon restarted with another telemetry after a `sync` (so no phase \
             inherits the writeback of what an earlier one wrote): `off` (no SDK: the default), `noop` (the \
             SDK builds every span and drops it), `file` (JSON lines under a scratch `traces/`) and `otlp` \
             (OTLP/HTTP protobuf to a receiver process of its own, which counts every request's spans from its \
             framing and decodes one request in {DECODE_EVERY} with the official schema). Each run \
             makes {SPANS_PER_RUN} spans; the batch processor keeps at most 2,048 queued and drops the rest, so \
             \"spans exported\" shows what reached the destination, warm-up included. CPU per run is the \
             benchmark process's CPU time (clients, daemon and exporter; not the receiver, as a collector \
             is not the daemon) over the window divided by the runs \
             answered in it: work rather than time, so it moves with what tracing costs and not with this VM's \
             speed between phases. Allocations per run are the same process's heap allocations (counted by the \
             benchmark's global allocator) over the same runs. The receiver shares the daemon's CPUs, so its \
             work slows the `otlp` runs as nothing does `off`'s; \"receiver CPU per run\" is its CPU time over the \
             `otlp` phases divided by the spans it took, times {SPANS_PER_RUN}.\n",
            off.clients
        );
        let _ = writeln!(
            text,
            "| tracing | answered in window | throughput | p50 | p99 | mean | p50 vs off | throughput vs off | CPU per \
             run | CPU vs off | allocations per run | spans exported | receiver CPU per run |"
        );
        let _ = writeln!(text, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let off_cpu = off.per_request().cpu;
        for phase in &self.phases {
            let load = &phase.load;
            let exported = match phase.exported {
                Some(exported) => {
                    format!("{} of {}", format_count(exported), format_count(load.answered * SPANS_PER_RUN))
                }
                None => String::new(),
            };
            let PerRequest { cpu, allocations, .. } = load.per_request();
            let receiver = phase.receiver_per_run().map(format_duration).unwrap_or_default();
            let _ = writeln!(
                text,
                "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {allocations:.1} | {exported} | {receiver} |",
                phase.label,
                format_count(load.latency.len() as u64),
                format_rate(load.throughput()),
                format_duration(load.latency.p50()),
                format_duration(load.latency.p99()),
                format_duration(load.latency.mean()),
                format_ratio(ratio(load.latency.p50(), off.latency.p50())),
                format_ratio(load.throughput() / off.throughput().max(f64::MIN_POSITIVE)),
                format_duration(cpu),
                format_ratio(ratio(cpu, off_cpu))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::figures::Distribution;
    use crate::http::AuditCounts;
    use crate::work;

    #[test]
    fn the_otlp_goal_compares_p50_with_tracing_off() {
        // Three runs answered in each phase, costing `cpu_micros` of the process's CPU each.
        let phase = |label, p50_micros: u64, cpu_micros: u64, exported| TracePhase {
            label,
            load: LoadFigures {
                clients: 16,
                window: Duration::from_secs(1),
                latency: Distribution::new(vec![Duration::from_micros(p50_micros); 3]),
                answered: 10,
                audit: AuditCounts::default(),
                work: work::Work { cpu: Duration::from_micros(3 * cpu_micros), ..work::Work::default() },
            },
            exported,
            // The receiver took 200 µs for 40 spans: 20 µs a run of four.
            receiver: exported.map(|spans| (Duration::from_micros(200), spans)),
        };
        // (otlp p50 µs with off at 1000 µs, goal met)
        for (otlp_p50, met) in [(1_000, true), (1_100, true), (1_101, false), (2_000, false)] {
            let figures = TraceFigures {
                phases: vec![
                    phase("off", 1_000, 100, None),
                    phase("noop", 1_050, 105, None),
                    phase("otlp", otlp_p50, 120, Some(40)),
                ],
            };
            let rows = figures.summary_rows();
            let verdicts: Vec<(String, Option<bool>)> = rows.iter().map(|r| (r.figure.clone(), r.met)).collect();
            assert_eq!(
                verdicts,
                [
                    ("(d) echo run latency p50, 16 clients, traces `noop`".to_string(), None),
                    ("(d) echo run latency p50, 16 clients, traces `otlp`".to_string(), Some(met)),
                    ("(d) echo runs/s, 16 clients, traces `otlp`".to_string(), None),
                    // 120 µs against 100 µs: over the 1.15× goal.
                    ("(d) CPU per run, 16 clients, traces `otlp` (process)".to_string(), Some(false)),
                    ("(d) the OTLP receiver's CPU per run (a process of its own, on the same CPUs)".to_string(), None),
                ],
                "otlp p50 {otlp_p50} µs"
            );
            assert_eq!(rows[3].ratio, "1.20×", "CPU per run against off: {:?}", rows[3].measured);
            assert_eq!((rows[4].measured.as_str(), rows[4].ratio.as_str()), ("20.0 µs", "0.20×"), "against off's CPU");
            let mut text = String::new();
            figures.markdown(&mut text, "cargo xtask bench --only traces");
            assert!(text.contains("| `otlp` | 3 | 3/s |"), "{text}");
            assert!(
                text.contains(" | 1.20× | 0.0 | 40 of 40 | 20.0 µs |"),
                "CPU against off, allocations per run, spans exported of spans made, the receiver's CPU: {text}"
            );
            assert!(text.contains(" | 1.05× | 0.0 |  |  |"), "noop's CPU against off, nothing exported: {text}");
        }
        // CPU per run at the goal's edge (115 µs against 100 µs) meets it.
        let at_goal =
            TraceFigures { phases: vec![phase("off", 1_000, 100, None), phase("otlp", 1_000, 115, Some(40))] };
        let cpu = at_goal.summary_rows().into_iter().find(|row| row.figure.starts_with("(d) CPU per run")).unwrap();
        assert_eq!((cpu.ratio.as_str(), cpu.met), ("1.15×", Some(true)));
    }

    /// The receiver's count reads the official encoding: spans under every resource and scope,
    /// whatever other fields sit beside them; a body cut short is refused.
    #[test]
    fn the_receiver_counts_the_spans_of_an_official_request() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
        use opentelemetry_proto::tonic::resource::v1::Resource;
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
        use prost::Message as _;
        let spans = |count: usize| {
            (0..count)
                .map(|n| Span {
                    name: format!("span {n}"),
                    trace_id: vec![7; 16],
                    span_id: vec![n as u8; 8],
                    ..Span::default()
                })
                .collect()
        };
        let scope = |count| ScopeSpans {
            scope: Some(InstrumentationScope { name: "aileron".into(), ..InstrumentationScope::default() }),
            spans: spans(count),
            schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
        };
        let request = ExportTraceServiceRequest {
            resource_spans: vec![
                ResourceSpans {
                    resource: Some(Resource::default()),
                    scope_spans: vec![scope(3), scope(0), scope(200)],
                    schema_url: String::new(),
                },
                ResourceSpans { resource: None, scope_spans: vec![scope(2)], schema_url: "x".into() },
            ],
        };
        let body = Bytes::from(request.encode_to_vec());
        assert_eq!(SpanFraming::count(body.clone()).unwrap(), 205);
        assert_eq!(SpanFraming::count(Bytes::new()).unwrap(), 0, "an empty request holds no span");
        assert!(SpanFraming::count(body.slice(..body.len() - 1)).is_err(), "a body cut short");
    }
}
