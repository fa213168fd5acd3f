//! `aileron-bench` (`cargo xtask bench` runs it from a release build, beside the release `aileron`
//! and `aileron-mcp` it measures): the benchmarks behind BENCHMARKS.md. Every figure comes with a
//! baseline measured in the same run, reported as a ratio and in absolute numbers:
//!
//! - `call` (`call.rs`): a warm in-process call of the `echo` test connector through
//!   `Runtime::call`, against a bare wasmtime instantiate + `_start` of the same module
//!   (`aileron_sandbox::baseline`);
//! - `http` (`http.rs`): `POST /v1/actions/echo/run` over a loopback socket, against
//!   `GET /v1/health` (the HTTP floor), with the daemon's state on a temporary home and its audit
//!   log on disk;
//! - `restart` (`restart.rs`): the first run after a daemon restart with the on-disk
//!   compiled-module cache, against the same with the cache emptied, for `echo` and the
//!   `github_issues` example;
//! - `traces` (`traces.rs`): `POST /v1/actions/echo/run` with tracing off, against tracing on
//!   with the `noop`, `file` and `otlp` exporters (OTLP/HTTP to an in-process receiver), same
//!   home, same run;
//! - `mcp` (`mcp.rs`): `tools/call` through the release `aileron-mcp` against the same
//!   `POST /run` sent directly, and `tools/list` with 1,000 actions against `GET /v1/actions`;
//! - `gateway` (`gateway.rs`): LLM requests and SSE streams direct to a fake upstream, against
//!   the same through the daemon's gateway and through LiteLLM's proxy.
//!
//! Shared by the parts: `daemon.rs` (the daemon under measurement), `figures.rs` (percentiles and
//! how figures print), `machine.rs` (what the run measured on) and `report.rs` (the summary table
//! and the generated part of BENCHMARKS.md).
//!
//! These are measurements, never test assertions. A run whose setup did not do what its label
//! says (a cache that was not hit, a request that failed) stops with an error rather than print a
//! figure under the wrong name.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};

use call::call_benchmark;
use http::{LOAD_KINDS, LOAD_ROUNDS, http_benchmark};
use machine::{Machine, StolenTime, load_average};
use report::{Report, refresh_markdown};
use restart::restart_benchmark;
use traces::{TRACE_ROUNDS, traces_benchmark};

mod agent_proxy;
mod approvals;
mod audit_tree;
mod call;
mod catalog;
mod console;
mod daemon;
mod figures;
mod gateway;
mod go_guest;
mod guard;
mod http;
mod machine;
mod mcp;
mod policy;
mod report;
mod restart;
mod sidecar;
mod spawn;
mod traces;
mod work;

#[global_allocator]
static ALLOCATOR: work::Counting = work::Counting;

/// The demo's loopback GitHub stand-in (not library surface), compiled in from its one source.
#[path = "../../aileron/src/surfaces/cli/demo/stand_in.rs"]
mod fake_github;

/// The trivial connector: it answers `{"output": {"op", "args"}}`.
const ECHO_WASM: &[u8] = include_bytes!(concat!(env!("AILERON_GUESTS_DIR"), "/echo.wasm"));
const ECHO_FQN: &str = "github://aileron-bench/echo";
const ECHO_MANIFEST: &str = "[connector]\nname = \"github://aileron-bench/echo\"\nversion = \"1.0.0\"\n";
const ECHO_ACTION: &str = r#"+++
name = "echo"
version = "1.0.0"

[[requires.connectors]]
name = "github://aileron-bench/echo"
version = "1.0.0"
hash = "{{CONNECTOR_HASH}}"
capabilities = ["echo"]

[match]
intent = "return the arguments unchanged (benchmark)"

[[inputs]]
name = "text"
type = "string"
description = "Any text; it comes back unchanged."

[[execute]]
id = "main"
connector = "github://aileron-bench/echo"
op = "echo"
+++
# Echo

Returns its arguments: the cheapest action there is, used to measure the run path itself.
"#;

fn echo_reference() -> String {
    format!("{ECHO_FQN}@1.0.0")
}

/// One part of the benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// (a) warm in-process call against bare wasmtime
    Call,
    /// (b) runs over loopback HTTP against the health endpoint
    Http,
    /// (c) first run after a restart with and without the compiled-module cache
    Restart,
    /// (d) runs over loopback HTTP with tracing off and on (noop, file, otlp exporters)
    Traces,
    /// (e) MCP tools/call and tools/list through aileron-mcp against direct HTTP
    Mcp,
    /// (f) LLM traffic direct, through the gateway and through LiteLLM's proxy
    Gateway,
    /// (g) spawn of /bin/true through the gate and the confinement against a bare spawn
    Spawn,
    /// (h) the web console's activity page on 100,000 audit records against the JSON API
    Console,
    /// (i) a Go connector of real-world size: first call, restart, warm call, Cranelift vs Winch
    Go,
    /// (j) catalogs of 1,000 and 10,000 actions, list_changed, and the daemon's memory
    Catalog,
    /// (k) a launched agent's egress proxy (TLS terminated) against direct, and the launch it adds to
    AgentProxy,
    /// (l) from a human's decision to the approved run, against a direct run
    Approvals,
    /// (m) the verifiable audit log: tree cost per record, checkpoints, receipts on 1,000,000 records
    AuditTree,
    /// (n) policy at the chokepoint: the decision, and runs without and with 100 rules
    Policy,
}

const DEFAULT_CALLS: u64 = 5000;
const DEFAULT_CLIENTS: u64 = 16;
const DEFAULT_DURATION: &str = "5";
const DEFAULT_WARMUP: &str = "1";
const DEFAULT_RESTARTS: u64 = 5;
/// Timed spawns of each kind in the spawn benchmark.
const SPAWNS: usize = 300;
/// Timed approvals in the approvals benchmark (the issue's 200).
const APPROVALS: usize = 200;
/// The longest one part of a guard run may take (the guard's parts take seconds to a minute or
/// two): past it the part is taken for hung, and the run stops naming it, so CI's time limit is
/// not spent waiting.
const PART_LIMIT: Duration = Duration::from_secs(600);

/// Measure the figures of BENCHMARKS.md (run by `cargo xtask bench`)
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "aileron-bench", args_override_self = true)]
pub struct BenchArgs {
    /// Timed calls of each kind in the call benchmark
    #[arg(long, default_value_t = DEFAULT_CALLS, value_parser = clap::value_parser!(u64).range(1..))]
    calls: u64,
    /// Concurrent HTTP clients in the loaded phases of the HTTP benchmark
    #[arg(long, default_value_t = DEFAULT_CLIENTS, value_parser = clap::value_parser!(u64).range(1..=1024))]
    clients: u64,
    /// Measured seconds of each HTTP phase, after its warm-up
    #[arg(long, default_value = DEFAULT_DURATION, value_parser = seconds, value_name = "SECONDS")]
    duration: Duration,
    /// Warm-up seconds before each HTTP phase
    #[arg(long, default_value = DEFAULT_WARMUP, value_parser = seconds, value_name = "SECONDS")]
    warmup: Duration,
    /// Daemon restarts per guest and cache state in the restart benchmark
    #[arg(long, default_value_t = DEFAULT_RESTARTS, value_parser = clap::value_parser!(u64).range(1..))]
    restarts: u64,
    /// Run only this part (repeatable); a partial run does not refresh the markdown file
    #[arg(long, value_enum)]
    only: Vec<Part>,
    /// Write the figures into this file, between its bench markers (appended if it has none)
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,
    /// Hold each summary ratio against this reference file and fail on one moved beyond 2× (the
    /// CI regression guard: `cargo xtask bench-guard`)
    #[arg(long, value_name = "PATH")]
    guard: Option<PathBuf>,
    /// With --guard: write the reference file from this run instead of checking against it
    #[arg(long, requires = "guard")]
    guard_write: bool,
    /// The `litellm` executable for the gateway comparison (`cargo xtask bench` installs it)
    #[arg(long, value_name = "PATH")]
    litellm: Option<PathBuf>,
    /// The big Go guest for (i) (`cargo xtask bench` builds it with `go build -tags big`)
    #[arg(long, value_name = "PATH")]
    go_wasm: Option<PathBuf>,
    /// Internal: serve (f)'s bare proxy to this upstream, print its URL, stop when stdin closes
    #[arg(long, value_name = "URL", hide = true)]
    serve_bare_proxy: Option<String>,
    /// Internal: serve (d)'s OTLP/HTTP receiver, print its URL, stop when stdin closes
    #[arg(long, hide = true)]
    serve_otlp_receiver: bool,
}

impl BenchArgs {
    fn runs(&self, part: Part) -> bool {
        self.only.is_empty() || self.only.contains(&part)
    }

    /// The `cargo xtask bench` line that reproduces this run, or only `part` of it: the options
    /// that differ from their defaults (the markdown path aside).
    fn command_line(&self, part: Option<Part>) -> String {
        let mut line = String::from("cargo xtask bench");
        let parts = match part {
            Some(part) => vec![part],
            None => self.only.clone(),
        };
        for part in parts {
            line.push_str(&format!(" --only {}", part_name(part)));
        }
        let default_seconds = |text: &str| seconds(text).expect("the defaults parse");
        let options = [
            ("calls", self.calls != DEFAULT_CALLS, self.calls.to_string()),
            ("clients", self.clients != DEFAULT_CLIENTS, self.clients.to_string()),
            ("duration", self.duration != default_seconds(DEFAULT_DURATION), self.duration.as_secs_f64().to_string()),
            ("warmup", self.warmup != default_seconds(DEFAULT_WARMUP), self.warmup.as_secs_f64().to_string()),
            ("restarts", self.restarts != DEFAULT_RESTARTS, self.restarts.to_string()),
        ];
        for (name, changed, value) in options {
            if changed {
                line.push_str(&format!(" --{name} {value}"));
            }
        }
        line
    }
}

fn part_name(part: Part) -> &'static str {
    match part {
        Part::Call => "call",
        Part::Http => "http",
        Part::Restart => "restart",
        Part::Traces => "traces",
        Part::Mcp => "mcp",
        Part::Gateway => "gateway",
        Part::Spawn => "spawn",
        Part::Console => "console",
        Part::Go => "go",
        Part::Catalog => "catalog",
        Part::AgentProxy => "agent-proxy",
        Part::Approvals => "approvals",
        Part::AuditTree => "audit-tree",
        Part::Policy => "policy",
    }
}

/// The label the part's figures start with: `(a)` for `call`, `(b)` for `http`, …
fn part_label(part: Part) -> String {
    let index = <Part as clap::ValueEnum>::value_variants().iter().position(|each| *each == part).unwrap_or(0);
    format!("({})", char::from(b'a' + index as u8))
}

fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text.parse().map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(value > 0.0 && value <= 3600.0) {
        return Err(format!("`{text}` must be more than 0 and at most 3600 seconds"));
    }
    Ok(Duration::from_secs_f64(value))
}

/// Runs the benchmarks on the multi-threaded runtime `aileron` gives its commands; a failure
/// prints its error chain once and exits 1.
fn main() -> ExitCode {
    // The benchmark's HTTP clients and the daemon client use rustls, which needs the process-wide provider.
    aileron::platform::process::install_crypto_provider();
    let args = <BenchArgs as clap::Parser>::parse();
    let serving = match (&args.serve_bare_proxy, args.serve_otlp_receiver) {
        (Some(upstream), _) => Some(gateway::serve_bare_proxy(upstream)),
        (None, true) => Some(traces::serve_otlp_receiver()),
        (None, false) => None,
    };
    if let Some(served) = serving {
        return match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let report = measure(&args).await?;
    println!("{}", report.text_table());
    if let Some(path) = &args.guard {
        let rows = report.summary_rows();
        let command = args.command_line(None);
        if args.guard_write {
            guard::write(path, &command, &rows)?;
        } else {
            let moved = guard::check(path, &command, &rows)?;
            if !moved.is_empty() {
                // One more measurement of the parts whose ratios moved: a shared machine moves a
                // ratio now and then on its own, a regression moves it every time.
                let again = BenchArgs {
                    only: <Part as clap::ValueEnum>::value_variants()
                        .iter()
                        .copied()
                        .filter(|part| moved.iter().any(|verdict| verdict.key.starts_with(&part_label(*part))))
                        .collect(),
                    ..args.clone()
                };
                let parts: Vec<&str> = again.only.iter().map(|part| part_name(*part)).collect();
                eprintln!("regression guard: measuring {} again", parts.join(", "));
                let report = measure(&again).await?;
                guard::confirm(&moved, &report.summary_rows())?;
            }
        }
    }
    if let Some(path) = &args.markdown {
        if args.only.is_empty() {
            let existing = match std::fs::read_to_string(path) {
                Ok(text) => Some(text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
            };
            let refreshed = refresh_markdown(existing.as_deref(), &report.markdown())
                .with_context(|| format!("updating {}", path.display()))?;
            std::fs::write(path, refreshed).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote the figures to {}", path.display());
        } else {
            eprintln!("{} not refreshed: it holds a full run and this one ran only part of it", path.display());
            // The detail of the parts that ran, for the reader to copy or compare.
            println!("{}", report.markdown());
        }
    }
    Ok(())
}

/// Runs the parts `args` selects, each at most [`PART_LIMIT`] when `args` is a guard run.
async fn measure(args: &BenchArgs) -> anyhow::Result<Report> {
    let scratch =
        tempfile::Builder::new().prefix("aileron-bench-").tempdir().context("creating a scratch directory")?;
    let machine = Machine::describe(scratch.path());
    eprintln!("aileron-bench: {} (scratch {})", machine.summary(), scratch.path().display());
    let mut stolen = StolenTime::start(args.guard.is_some().then_some(PART_LIMIT));

    let call = if args.runs(Part::Call) {
        eprintln!("(a) warm echo calls: {} through Runtime::call and {} on bare wasmtime", args.calls, args.calls);
        Some(stolen.after("(a)", call_benchmark(args.calls as usize).await?))
    } else {
        None
    };
    let http = if args.runs(Part::Http) {
        eprintln!(
            "(b) loopback HTTP: {LOAD_ROUNDS} rounds of {LOAD_KINDS} loaded phases (health, run, the durable floor) of {:.1} s warm-up + {:.2} s measured, then 2 \
             phases of one client of {:.1} s + {:.1} s",
            args.warmup.as_secs_f64(),
            args.duration.as_secs_f64() / LOAD_ROUNDS as f64,
            args.warmup.as_secs_f64(),
            args.duration.as_secs_f64()
        );
        Some(stolen.after("(b)", http_benchmark(args, scratch.path()).await?))
    } else {
        None
    };
    let restart = if args.runs(Part::Restart) {
        eprintln!("(c) restarts: {} per guest and cache state", args.restarts);
        Some(stolen.after("(c)", restart_benchmark(args.restarts as usize, scratch.path()).await?))
    } else {
        None
    };

    let traces = if args.runs(Part::Traces) {
        eprintln!(
            "(d) traces: {TRACE_ROUNDS} rounds of 4 phases of {:.1} s warm-up + {:.2} s measured, {} clients",
            args.warmup.as_secs_f64(),
            args.duration.as_secs_f64() / TRACE_ROUNDS as f64,
            args.clients
        );
        Some(stolen.after("(d)", traces_benchmark(args, scratch.path()).await?))
    } else {
        None
    };

    let mcp = if args.runs(Part::Mcp) {
        eprintln!(
            "(e) MCP: {} tools/call through aileron-mcp and as many direct runs; tools/list of 1,000 actions",
            args.calls
        );
        let figures = mcp::run(&mcp::McpBenchConfig::standard(args.calls as usize)?, scratch.path()).await?;
        Some(stolen.after("(e)", figures))
    } else {
        None
    };

    let gateway = if args.runs(Part::Gateway) {
        eprintln!(
            "(f) LLM gateway: direct, aileron{} at {:?} req/s, then at most, then SSE",
            if args.litellm.is_some() { ", LiteLLM" } else { "" },
            gateway::RATES
        );
        let config = gateway::GatewayBenchConfig {
            window: args.duration,
            warmup: args.warmup,
            clients: args.clients as usize,
            litellm: args.litellm.clone(),
        };
        Some(stolen.after("(f)", gateway::run(&config, scratch.path()).await?))
    } else {
        None
    };

    let spawn = if args.runs(Part::Spawn) {
        eprintln!("(g) spawn: {SPAWNS} confined spawns of /bin/true and as many bare ones");
        Some(stolen.after("(g)", spawn::run(SPAWNS, scratch.path()).await?))
    } else {
        None
    };

    let console = if args.runs(Part::Console) {
        eprintln!("(h) console: /activity and a filter on {} audit records, against GET /v1/audit", console::RECORDS);
        Some(stolen.after("(h)", console::run(scratch.path()).await?))
    } else {
        None
    };

    let go = if args.runs(Part::Go) {
        let Some(wasm) = &args.go_wasm else {
            bail!("(i) needs the big Go guest: pass --go-wasm PATH (`cargo xtask bench` builds it and passes it)");
        };
        eprintln!(
            "(i) a Go connector at real-world size: install, first call, {} restarts, warm calls, Winch",
            args.restarts
        );
        let calls = (args.calls as usize / 10).max(100);
        let figures = go_guest::run(wasm, calls, args.restarts as usize, scratch.path()).await?;
        Some(stolen.after("(i)", figures))
    } else {
        None
    };

    let catalog = if args.runs(Part::Catalog) {
        eprintln!("(j) catalogs of 1,000 and 10,000 actions, list_changed, memory");
        Some(stolen.after("(j)", catalog::run(scratch.path()).await?))
    } else {
        None
    };

    let agent_proxy = if args.runs(Part::AgentProxy) {
        eprintln!("(k) a launched agent's egress proxy against direct, and launches with and without it");
        let requests = (args.calls as usize / 5).max(200);
        let figures =
            agent_proxy::run(requests, args.clients as usize, args.warmup, args.duration, scratch.path()).await?;
        Some(stolen.after("(k)", figures))
    } else {
        None
    };

    let approvals = if args.runs(Part::Approvals) {
        eprintln!(
            "(l) approvals: {APPROVALS} decisions timed to the run started and completed, and as many direct runs"
        );
        let mcp_binary = std::env::current_exe()?.with_file_name("aileron-mcp");
        Some(stolen.after("(l)", approvals::run(APPROVALS, &mcp_binary, scratch.path()).await?))
    } else {
        None
    };

    let audit_tree = if args.runs(Part::AuditTree) {
        eprintln!("(m) the audit log's Merkle tree, checkpoints and receipts on {} records", audit_tree::RECORDS);
        Some(stolen.after("(m)", audit_tree::run(scratch.path(), args.clients, args.warmup, args.duration).await?))
    } else {
        None
    };

    let policy = if args.runs(Part::Policy) {
        eprintln!("(n) policy: decisions against 100 rules, and runs without and with them");
        Some(stolen.after("(n)", policy::run(scratch.path()).await?))
    } else {
        None
    };

    Ok(Report {
        load_at_end: load_average(),
        stolen,
        machine,
        date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        args: args.clone(),
        call,
        http,
        restart,
        traces,
        mcp,
        gateway,
        spawn,
        console,
        go,
        catalog,
        agent_proxy,
        approvals,
        audit_tree,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_must_be_positive_numbers() {
        let table = [
            ("5", Ok(Duration::from_secs(5))),
            ("0.5", Ok(Duration::from_millis(500))),
            ("0", Err("must be more than 0")),
            ("-1", Err("must be more than 0")),
            ("five", Err("is not a number")),
        ];
        for (text, expected) in table {
            match (seconds(text), expected) {
                (Ok(parsed), Ok(expected)) => assert_eq!(parsed, expected, "{text}"),
                (Err(message), Err(expected)) => assert!(message.contains(expected), "{text}: {message}"),
                (parsed, expected) => panic!("{text}: got {parsed:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn parts_are_named_by_the_label_their_figures_start_with() {
        // The guard measures a moved figure's part again by this label.
        let table = [
            (Part::Call, "(a)"),
            (Part::Http, "(b)"),
            (Part::Mcp, "(e)"),
            (Part::Catalog, "(j)"),
            (Part::Policy, "(n)"),
        ];
        for (part, label) in table {
            assert_eq!(part_label(part), label, "{part:?}");
        }
    }

    #[test]
    fn the_command_line_reproduces_the_options() {
        let defaults = BenchArgs {
            calls: DEFAULT_CALLS,
            clients: DEFAULT_CLIENTS,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            restarts: DEFAULT_RESTARTS,
            only: Vec::new(),
            markdown: Some(PathBuf::from("/tmp/B.md")),
            guard: None,
            guard_write: false,
            litellm: Some(PathBuf::from("/r/target/py-litellm/bin/litellm")),
            go_wasm: Some(PathBuf::from("/r/connectors/target/go/go_connector_big.wasm")),
            serve_bare_proxy: None,
            serve_otlp_receiver: false,
        };
        let changed = BenchArgs {
            calls: 10,
            clients: 4,
            duration: Duration::from_millis(500),
            only: vec![Part::Http, Part::Call],
            ..defaults.clone()
        };
        // (arguments, part, expected line)
        let table = [
            (&defaults, None, "cargo xtask bench"),
            (&defaults, Some(Part::Restart), "cargo xtask bench --only restart"),
            (&changed, None, "cargo xtask bench --only http --only call --calls 10 --clients 4 --duration 0.5"),
            (&changed, Some(Part::Call), "cargo xtask bench --only call --calls 10 --clients 4 --duration 0.5"),
        ];
        for (args, part, expected) in table {
            assert_eq!(args.command_line(part), expected);
        }
        assert!(defaults.runs(Part::Http) && defaults.runs(Part::Call));
        assert!(changed.runs(Part::Http) && !changed.runs(Part::Restart));
    }
}
