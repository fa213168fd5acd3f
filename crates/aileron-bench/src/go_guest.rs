//! `go`: a connector the size of the original project's (issue 17). `connectors/go` built with
//! `-tags big` by `cargo xtask bench` (the Go toolchain the tests install; net/url, textproto,
//! text/template, regexp, encoding/xml and /csv, gzip, multipart, HMAC and math/big linked in),
//! several MB of wasm that make one `http_request` per call (`get`). Measured:
//!
//! - the first call ever: install (which compiles the module, `runner::precompile`) and then the
//!   first run of an action, against the first run when nothing was compiled ahead (a restart
//!   with the compiled cache emptied: what the first call cost before install compiled);
//! - the first call after a daemon restart, with the compiled artifact on disk, against the same
//!   with the cache emptied;
//! - the warm call, `Runtime::call` against the same module on bare wasmtime, both answering the
//!   guest's `http_request` from the same in-process hook (no network: this is the sandbox's cost);
//! - wasmtime's two compilers on this module: Cranelift (what the runtime uses) and Winch (the
//!   baseline tier), both with the runtime's epoch checks compiled in: compile time, and
//!   the warm call each one's code gives;
//! - the compiled artifact's size on disk.

use std::fmt::Write as _;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron_core::{ContentHash, Failure};
use aileron_sandbox::baseline::{BareCommand, BareOptions, Compiler};
use aileron_sandbox::{
    CallRequest, GuestHttpRequest, HostHooks, HostHttpResponse, ImportPolicy, Limits, Runtime, RuntimeConfig,
};
use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::daemon::{BenchDaemon, http_client};
use super::fake_github::FakeGithub;
use super::figures::{Distribution, distribution_rows, format_bytes, format_duration, format_ratio, ratio};
use super::report::SummaryRow;
use super::restart::{CacheState, FirstRun, RestartGuest, empty_dir, first_run_after_restart, median};

const FQN: &str = "github://aileron-bench/go";
const VERSION: &str = "1.0.0";
/// The `aileron_host` functions `connectors/go` imports, granted by the manifest.
const IMPORTS: &str = "imports = [\"aileron_host.http_request\", \"aileron_host.http_response_status\", \
                       \"aileron_host.http_response_size\", \"aileron_host.http_response_read\", \"aileron_host.log\"]";
const ACTION: &str = r#"+++
name = "go-get"
version = "1.0.0"

[[requires.connectors]]
name = "github://aileron-bench/go"
version = "1.0.0"
hash = "{{CONNECTOR_HASH}}"
capabilities = ["get"]

[match]
intent = "fetch a URL through a Go connector (benchmark)"

[[inputs]]
name = "url"
type = "string"
description = "The URL to GET."

[[execute]]
id = "main"
connector = "github://aileron-bench/go"
op = "get"
+++
# Go GET

One `http_request` from a Go connector the size of a real one.
"#;

/// Issue 17's goals.
const FIRST_CALL_GOAL: Duration = Duration::from_millis(300);
const RESTART_GOAL: Duration = Duration::from_millis(10);
const WARM_RATIO_GOAL: f64 = 1.2;
/// Untimed calls of each kind before measuring, then rounds of this many per kind.
const WARMUP: usize = 30;
const ROUND: usize = 25;

pub(super) struct GoFigures {
    wasm_bytes: usize,
    artifact_bytes: u64,
    /// `POST /v1/connectors/install`, which compiles.
    install: Duration,
    /// The first run after install, on a new connection.
    first_call: Duration,
    restarts_kept: Vec<FirstRun>,
    restarts_emptied: Vec<FirstRun>,
    /// Restarts that waited for the start-up warm-up: how long it took, the first run after it
    /// and the run after that.
    after_warm_up: Vec<(Duration, Duration, Duration)>,
    warm_runtime: Distribution,
    warm_bare: Distribution,
    cranelift_compile: Duration,
    winch: Result<WinchFigures, String>,
    calls: usize,
}

struct WinchFigures {
    compile: Duration,
    warm: Distribution,
    /// The same metered module compiled by Cranelift, run the same way.
    cranelift_warm: Distribution,
}

/// The `http_request` answer every in-process call gets: what the loopback stand-in answers,
/// without the network.
struct CannedUpstream;

const CANNED_BODY: &[u8] = br#"[{"number":1,"title":"Audit log rolls at UTC midnight","state":"open"}]"#;

impl HostHooks for CannedUpstream {
    fn send_request(
        &self,
        _request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>> {
        let response = HostHttpResponse {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: CANNED_BODY.to_vec(),
        };
        Box::pin(std::future::ready(Ok(response)))
    }
}

fn manifest(upstream: &str) -> String {
    format!(
        "[connector]\nname = \"{FQN}\"\nversion = \"{VERSION}\"\n\n[capabilities.network]\nhosts = [\"{upstream}\"]\n\n\
         [capabilities.runtime]\n{IMPORTS}\n"
    )
}

pub(super) async fn run(wasm_path: &Path, calls: usize, restarts: usize, scratch: &Path) -> anyhow::Result<GoFigures> {
    let wasm = std::fs::read(wasm_path)
        .with_context(|| format!("reading the big Go guest {} (`cargo xtask bench` builds it)", wasm_path.display()))?;
    let wasm: &'static [u8] = Box::leak(wasm.into_boxed_slice());
    eprintln!("    the Go guest: {} bytes of wasm", wasm.len());
    let upstream = FakeGithub::start().await.context("starting the loopback GitHub stand-in")?;
    let url = format!("{}/repos/aileron/bench/issues", upstream.base_url());
    let guest = RestartGuest {
        name: "go (big)",
        wasm,
        reference: format!("{FQN}@{VERSION}"),
        manifest: manifest(&upstream.host_port()),
        action_file: "go-get.md",
        action_template: ACTION.to_string(),
        action: "go-get",
        args: json!({ "url": url }),
    };

    // The first call ever: a fresh home, install (compiles), add the action, run it.
    let dir = scratch.join("go-guest");
    let home = Home::at(dir.join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let admin = http_client()?;
    let started = Instant::now();
    let installed =
        daemon.install_answer(&admin, &dir.join("package"), &guest.reference, wasm, &guest.manifest).await?;
    let install = started.elapsed();
    if installed["compiled"]["ok"] != true {
        bail!("install did not compile the Go guest: {installed}");
    }
    let hash = installed["hash"].as_str().context("the install answer has no hash")?.to_string();
    daemon.add_action(&admin, guest.action_file, &ACTION.replace("{{CONNECTOR_HASH}}", &hash)).await?;
    let client = http_client()?;
    let started = Instant::now();
    let answer = daemon
        .expect(&client, Method::POST, "/v1/actions/go-get/run", Some(&json!({ "args": guest.args })), StatusCode::OK)
        .await?;
    let first_call = started.elapsed();
    check_answer(&answer["result"]["output"])?;
    let stats = daemon.state.services.sandbox.cache_stats();
    if stats.compiles != 1 || stats.memory_hits == 0 {
        bail!("the first run after install should take the module install compiled: {stats:?}");
    }
    let content_hash = ContentHash::parse(&hash).map_err(|e| anyhow::anyhow!("{e}"))?;
    let artifact_bytes =
        daemon.state.services.sandbox.artifact_bytes(&content_hash).context("no compiled artifact on disk")?;
    drop((admin, client));
    daemon.stop().await?;

    // Restarts, the cache kept and emptied alternately.
    let (mut restarts_kept, mut restarts_emptied) = (Vec::new(), Vec::new());
    for round in 0..restarts {
        let order = if round % 2 == 0 {
            [CacheState::Kept, CacheState::Emptied]
        } else {
            [CacheState::Emptied, CacheState::Kept]
        };
        for cache in order {
            if cache == CacheState::Emptied {
                empty_dir(&home.cache_dir())?;
            }
            let run = first_run_after_restart(&home, &guest, cache).await?;
            match cache {
                CacheState::Kept => restarts_kept.push(run),
                CacheState::Emptied => restarts_emptied.push(run),
            }
        }
    }

    eprintln!("    restarts");
    let mut after_warm_up = Vec::new();
    for _ in 0..restarts {
        after_warm_up.push(first_run_after_warm_up(&home, &guest).await?);
    }

    eprintln!("    warm calls");
    let (warm_runtime, warm_bare) = warm_calls(wasm, &url, calls).await?;
    let (_, cranelift_compile) = BareCommand::compile_with(wasm, metered(Compiler::Cranelift))?;
    eprintln!("    Cranelift and Winch");
    let winch = winch(wasm, &url, calls).await.map_err(|error| format!("{error:#}"));
    Ok(GoFigures {
        wasm_bytes: wasm.len(),
        artifact_bytes,
        install,
        first_call,
        restarts_kept,
        restarts_emptied,
        after_warm_up,
        warm_runtime,
        warm_bare,
        cranelift_compile,
        winch,
        calls,
    })
}

/// Restarts, waits until the daemon's warm-up has loaded the pinned modules (what a user's
/// first call meets when it comes after the start-up, as an agent's does), then times the first
/// run and the one after it. Returns `(warm-up time, first run, second run)`.
async fn first_run_after_warm_up(home: &Home, guest: &RestartGuest) -> anyhow::Result<(Duration, Duration, Duration)> {
    let (daemon, _) = BenchDaemon::start(home)?;
    let started = Instant::now();
    while !daemon.state.services.modules_warm.load(std::sync::atomic::Ordering::Acquire) {
        if started.elapsed() > Duration::from_secs(120) {
            bail!("the daemon's warm-up did not finish in 120 s");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let warm_up = started.elapsed();
    let client = http_client()?;
    let path = format!("/v1/actions/{}/run", guest.action);
    let mut runs = [Duration::ZERO; 2];
    for run in &mut runs {
        let started = Instant::now();
        let answer =
            daemon.expect(&client, Method::POST, &path, Some(&json!({ "args": guest.args })), StatusCode::OK).await?;
        *run = started.elapsed();
        check_answer(&answer["result"]["output"])?;
    }
    drop(client);
    let stats = daemon.state.services.sandbox.cache_stats();
    daemon.stop().await?;
    if stats.disk_hits != 1 || stats.compiles != 0 {
        bail!("the warm-up should have loaded the module from disk once: {stats:?}");
    }
    Ok((warm_up, runs[0], runs[1]))
}

fn metered(compiler: Compiler) -> BareOptions {
    BareOptions { compiler, metered: true, host: Some(Arc::new(CannedUpstream)) }
}

/// The guest's `get` output: the status and body it read through the host.
fn check_answer(output: &Value) -> anyhow::Result<()> {
    if output["status"] != 200 || !output["body"].as_str().is_some_and(|body| body.contains("\"number\"")) {
        bail!("the Go guest's get returned {output}");
    }
    Ok(())
}

/// `Runtime::call` of `get` against bare wasmtime (default configuration, `aileron_host` linked
/// to the same hook), alternating in rounds.
async fn warm_calls(wasm: &'static [u8], url: &str, calls: usize) -> anyhow::Result<(Distribution, Distribution)> {
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let module = runtime
        .load(&ContentHash::of_bytes(wasm), wasm, &ImportPolicy::default())
        .map_err(|failure| anyhow::anyhow!("loading the Go guest: {}", failure.message))?;
    let hooks: Arc<dyn HostHooks> = Arc::new(CannedUpstream);
    let options = BareOptions { compiler: Compiler::Cranelift, metered: false, host: Some(hooks.clone()) };
    let (bare, _) = BareCommand::compile_with(wasm, options)?;
    let args = json!({ "url": url });
    let stdin = serde_json::to_vec(&json!({ "op": "get", "args": args })).expect("JSON serializes");
    let sandboxed = async || -> anyhow::Result<Duration> {
        let request = CallRequest { op: "get".into(), args: args.clone(), limits: Limits::default() };
        let started = Instant::now();
        let outcome = runtime.call(&module, request, hooks.clone()).await;
        let elapsed = started.elapsed();
        let output = outcome.result.map_err(|failure| anyhow::anyhow!("Runtime::call of get: {}", failure.message))?;
        check_answer(&output)?;
        Ok(elapsed)
    };
    alternate(calls, sandboxed, async || bare_get(&bare, &stdin).await).await
}

/// One timed bare run of `get`, its printed answer checked.
async fn bare_get(command: &BareCommand, stdin: &[u8]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let stdout = command.run(stdin.to_vec()).await?;
    let elapsed = started.elapsed();
    let printed: Value = serde_json::from_slice(&stdout).context("the bare run printed no JSON")?;
    check_answer(&printed["output"])?;
    Ok(elapsed)
}

/// [`WARMUP`] untimed calls of each kind, then `calls` timed ones of each in alternating rounds
/// of [`ROUND`], so drift lands on both.
async fn alternate(
    calls: usize,
    mut first: impl AsyncFnMut() -> anyhow::Result<Duration>,
    mut second: impl AsyncFnMut() -> anyhow::Result<Duration>,
) -> anyhow::Result<(Distribution, Distribution)> {
    for _ in 0..WARMUP {
        first().await?;
        second().await?;
    }
    let (mut first_samples, mut second_samples) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    while first_samples.len() < calls {
        for _ in 0..ROUND.min(calls - first_samples.len()) {
            first_samples.push(first().await?);
        }
        for _ in 0..ROUND.min(calls - second_samples.len()) {
            second_samples.push(second().await?);
        }
    }
    Ok((Distribution::new(first_samples), Distribution::new(second_samples)))
}

/// Winch against Cranelift on the same module with the same checks compiled in.
async fn winch(wasm: &[u8], url: &str, calls: usize) -> anyhow::Result<WinchFigures> {
    let (winch, compile) = BareCommand::compile_with(wasm, metered(Compiler::Winch))?;
    let (cranelift, _) = BareCommand::compile_with(wasm, metered(Compiler::Cranelift))?;
    let stdin = serde_json::to_vec(&json!({ "op": "get", "args": { "url": url } })).expect("JSON serializes");
    let (warm, cranelift_warm) =
        alternate(calls, async || bare_get(&winch, &stdin).await, async || bare_get(&cranelift, &stdin).await).await?;
    Ok(WinchFigures { compile, warm, cranelift_warm })
}

impl GoFigures {
    fn first_after_restart(&self) -> (Duration, Duration) {
        (median(&self.restarts_kept, |r| r.first), median(&self.restarts_emptied, |r| r.first))
    }

    /// Medians of `(warm-up, first run after it, second run)`.
    fn after_warm_up(&self) -> (Duration, Duration, Duration) {
        let median_of = |pick: fn(&(Duration, Duration, Duration)) -> Duration| {
            Distribution::new(self.after_warm_up.iter().map(pick).collect()).p50()
        };
        (median_of(|r| r.0), median_of(|r| r.1), median_of(|r| r.2))
    }

    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let mb = self.wasm_bytes as f64 / 1e6;
        let (kept, emptied) = self.first_after_restart();
        let (warm, bare) = (self.warm_runtime.p50(), self.warm_bare.p50());
        vec![
            SummaryRow {
                figure: format!("(i) Go guest ({mb:.1} MB): first call ever, after install compiled it"),
                measured: format_duration(self.first_call),
                baseline: format!("{} compiling on first call", format_duration(emptied)),
                ratio: format_ratio(ratio(self.first_call, emptied)),
                goal: "≤ 300 ms",
                met: Some(self.first_call <= FIRST_CALL_GOAL),
            },
            SummaryRow {
                figure: "(i) Go guest: first call after a restart, once warmed up".into(),
                measured: format_duration(self.after_warm_up().1),
                baseline: format!("{} uncached", format_duration(emptied)),
                ratio: format_ratio(ratio(self.after_warm_up().1, emptied)),
                goal: "≤ 10 ms",
                met: Some(self.after_warm_up().1 <= RESTART_GOAL),
            },
            SummaryRow {
                figure: "(i) Go guest: first call right after a restart (races the warm-up)".into(),
                measured: format!("{} cached", format_duration(kept)),
                baseline: format!("{} uncached", format_duration(emptied)),
                ratio: format_ratio(ratio(kept, emptied)),
                goal: "",
                met: None,
            },
            SummaryRow {
                figure: "(i) Go guest: warm call with one http_request, p50".into(),
                measured: format_duration(warm),
                baseline: format!("{} bare", format_duration(bare)),
                ratio: format_ratio(ratio(warm, bare)),
                goal: "≤ 1.2×",
                met: Some(ratio(warm, bare) <= WARM_RATIO_GOAL),
            },
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (i) A Go connector at real-world size\n");
        let (kept, emptied) = self.first_after_restart();
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. `connectors/go` built with `go build -tags big` ({} of wasm; the \
             original project's Go connectors are 5–8 MB), one `http_request` per call (`get`). Install compiles \
             the module (Cranelift, both cores) into the memory cache and `store/cache/`; the compiled artifact is \
             {} on disk ({:.1}× the wasm).\n",
            format_bytes(self.wasm_bytes),
            format_bytes(self.artifact_bytes as usize),
            self.artifact_bytes as f64 / self.wasm_bytes as f64
        );
        let _ = writeln!(text, "| | time |\n|---|---:|");
        let rows = [
            ("install (`POST /v1/connectors/install`, compiles)", self.install),
            ("first run after install (new connection, loopback upstream, audited)", self.first_call),
            (
                "daemon warm-up after a restart: verify + load the pinned module from disk (median)",
                self.after_warm_up().0,
            ),
            ("first run after a restart once warmed up (median)", self.after_warm_up().1),
            ("the run after it (median)", self.after_warm_up().2),
            ("first run right after a restart, racing the warm-up, artifact on disk (median)", kept),
            ("first run after a restart, cache emptied: compiles (median)", emptied),
        ];
        for (label, time) in rows {
            let _ = writeln!(text, "| {label} | {} |", format_duration(time));
        }
        let all = |runs: &[FirstRun]| runs.iter().map(|r| format_duration(r.first)).collect::<Vec<_>>().join(", ");
        let _ = writeln!(
            text,
            "\nFirst runs after restarts, artifact on disk: {}; cache emptied: {}. Opening the state took {} (median).\n",
            all(&self.restarts_kept),
            all(&self.restarts_emptied),
            format_duration(median(&self.restarts_kept, |r| r.open))
        );
        let _ = writeln!(
            text,
            "Warm calls of `get` in process, {} of each kind after {WARMUP} untimed, alternating in rounds of {ROUND}; \
             the guest's `http_request` is answered by the same in-process hook in both (no network):\n",
            self.calls
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        let mut rows = vec![
            ("`Runtime::call`", &self.warm_runtime),
            ("bare wasmtime (default engine, Cranelift)", &self.warm_bare),
        ];
        if let Ok(winch) = &self.winch {
            rows.push(("bare, Cranelift with epoch checks", &winch.cranelift_warm));
            rows.push(("bare, Winch with epoch checks", &winch.warm));
        }
        distribution_rows(text, &rows);
        match &self.winch {
            Ok(winch) => {
                let _ = writeln!(
                    text,
                    "\nCompilers, same module, epoch checks compiled in: Cranelift {} , Winch {} ({}); \
                     Winch's code runs this call at {} of Cranelift's time at p50.",
                    format_duration(self.cranelift_compile),
                    format_duration(winch.compile),
                    format_ratio(ratio(winch.compile, self.cranelift_compile)),
                    format_ratio(ratio(winch.warm.p50(), winch.cranelift_warm.p50()))
                );
            }
            Err(error) => {
                let _ = writeln!(
                    text,
                    "\nCranelift compiled this module in {}; Winch could not be measured: {error}",
                    format_duration(self.cranelift_compile)
                );
            }
        }
    }
}
