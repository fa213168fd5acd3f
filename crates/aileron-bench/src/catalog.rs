//! `catalog`: catalogs and memory at real-world sizes (issue 17), on a real `aileron daemon run`
//! process with the release `aileron-mcp`:
//!
//! - `GET /v1/actions` with 1,000 actions, to the answer's last byte, against `GET /v1/health`
//!   from the same client (the HTTP floor);
//! - `tools/list` through `aileron-mcp` with 10,000 actions, against the `GET /v1/actions` of
//!   10,000 it is built from;
//! - `notifications/tools/list_changed` at 10,000 actions: from an action's install answered to
//!   the notification on `aileron-mcp`'s stdout, and to the first `tools/list` after it answered
//!   (which fetches the new listing);
//! - the daemon's resident memory (`VmRSS`), the memory in its memfds (compiled modules and memory
//!   images, counted in `VmRSS` only where touched) and address-space reservation (`VmSize`): idle, with
//!   10,000 actions, with 100 connectors installed (each compiled at install), and the peak under
//!   16 clients running an action back to back;
//! - a daemon's start with 50 connectors and 1,000 actions installed, from `aileron daemon` spawned
//!   to its first run answered, against the same with one action of one connector (issue 49);
//! - its resident memory with 1,000 runs in flight at once, each of the GitHub example connector
//!   held by an upstream until all are waiting on it, against the same daemon after one run (issue 49).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use super::figures::{
    Distribution, distribution_rows, format_bytes, format_count, format_duration, format_ratio, ratio,
};
use super::machine::proc_bytes;
use super::mcp::{McpProcess, builtin_tools, install_echo, install_package};
use super::report::SummaryRow;
use aileron::platform::home::Home;
use aileron::surfaces::client::DaemonClient;

const SMALL_CATALOG: usize = 1_000;
const LARGE_CATALOG: usize = 10_000;
const LISTINGS: usize = 30;
const CHANGES: usize = 5;
const CONNECTORS: usize = 100;
const LOAD_CLIENTS: usize = 16;
const LOAD_TIME: Duration = Duration::from_secs(5);
const ECHO_WASM: &[u8] = include_bytes!(concat!(env!("AILERON_GUESTS_DIR"), "/echo.wasm"));

const LIST_1000_GOAL: Duration = Duration::from_millis(5);
const TOOLS_LIST_GOAL: Duration = Duration::from_millis(20);
const LIST_CHANGED_GOAL: Duration = Duration::from_secs(1);
/// The installed sizes a start is timed at, how many starts of each, and the goal.
const START_CONNECTORS: usize = 50;
const START_ACTIONS: usize = 1_000;
const STARTS: usize = 5;
const START_GOAL: Duration = Duration::from_millis(300);
/// Runs in flight at once, how long the upstream makes each wait, and the goal for the peak.
const IN_FLIGHT: usize = 1_000;
/// Inside a run's 30 s wall-time limit, with room for the thousand to arrive.
const UPSTREAM_HOLD: Duration = Duration::from_secs(20);
const IN_FLIGHT_GOAL: u64 = 256 * 1024 * 1024;
/// The daemon's resident memory with [`LARGE_CATALOG`] actions installed.
const LARGE_CATALOG_GOAL: u64 = 50 * 1024 * 1024;

/// `VmRSS` and `VmSize` of a process, and the size of the memfds it holds, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Memory {
    resident: u64,
    /// The part of `resident` in file-backed pages (`RssFile`): mostly the executable's code the
    /// process has run, which a daemon that has served more kinds of request has touched more of.
    in_files: u64,
    reserved: u64,
    /// Memory in the process's memfds: the compiled modules loaded from the cache (each sealed in
    /// a memfd of its own) and wasmtime's memory images. Their pages count in `VmRSS` only where
    /// a mapping has touched them, yet they are memory all the same.
    in_memfds: u64,
    /// `Pss` of `/proc/<pid>/smaps_rollup`: each page divided among the mappings that share it.
    /// `VmRSS` counts a shared page once per mapping, and wasmtime maps a module's memory image
    /// into every instance (decision 0008), so with many instances alive it overstates the memory
    /// they use. Read only where nothing is timed ([`memory_with_pss`]): the kernel walks every
    /// mapping's page tables under the process's memory lock, which a daemon with 1,000 calls
    /// alive waits on (sampled every 50 ms, the in-flight runs took twice as long). `None` where
    /// it was not read.
    proportional: Option<u64>,
}

/// [`memory_of`] and the proportional share.
fn memory_with_pss(pid: u32) -> anyhow::Result<Memory> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .with_context(|| format!("reading /proc/{pid}/smaps_rollup"))?;
    let proportional = proc_bytes(&rollup, "Pss").with_context(|| format!("no Pss in /proc/{pid}/smaps_rollup"))?;
    Ok(Memory { proportional: Some(proportional), ..memory_of(pid)? })
}

/// Everything but the proportional share.
fn memory_of(pid: u32) -> anyhow::Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let in_memfds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("listing /proc/{pid}/fd"))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|fd| std::fs::read_link(fd).is_ok_and(|target| target.to_string_lossy().starts_with("/memfd:")))
        .filter_map(|fd| std::fs::metadata(fd).ok().map(|metadata| metadata.len()))
        .sum();
    let field = |name: &str| proc_bytes(&status, name).with_context(|| format!("no {name} in /proc/{pid}/status"));
    Ok(Memory {
        resident: field("VmRSS")?,
        in_files: field("RssFile")?,
        reserved: field("VmSize")?,
        in_memfds,
        proportional: None,
    })
}

impl Memory {
    /// Each figure's larger.
    fn max(self, other: Memory) -> Memory {
        Memory {
            resident: self.resident.max(other.resident),
            in_files: self.in_files.max(other.in_files),
            reserved: self.reserved.max(other.reserved),
            in_memfds: self.in_memfds.max(other.in_memfds),
            proportional: self.proportional.max(other.proportional),
        }
    }
}

pub(super) struct CatalogFigures {
    list_small: Distribution,
    health: Distribution,
    small_bytes: usize,
    tools_list_large: Distribution,
    list_large: Distribution,
    large_bytes: usize,
    tools_listed: usize,
    notified: Distribution,
    relisted: Distribution,
    idle: Memory,
    with_actions: Memory,
    started_with_actions: Memory,
    with_connectors: Memory,
    under_load_peak: Memory,
    load_runs: u64,
    scale: AtScale,
}

/// (j)'s figures at issue 49's sizes, each on daemons of their own.
struct AtScale {
    /// From `aileron daemon` spawned to its first run answered: with [`START_CONNECTORS`]
    /// connectors and [`START_ACTIONS`] actions, and with one action of one connector.
    start_full: Distribution,
    start_floor: Distribution,
    in_flight: InFlight,
}

/// [`IN_FLIGHT`] runs sent at once to an upstream that holds every one of them until all are
/// waiting on it together (or [`UPSTREAM_HOLD`] has passed).
struct InFlight {
    /// The daemon after one run of the example connector, and its peak while they were in flight
    /// (sampled every 50 ms, and once more at the moment all of them were waiting).
    before: Memory,
    peak: Memory,
    /// Its memory a second after the last answered: the slots' pages it keeps.
    after: Memory,
    /// The most runs the upstream held at once.
    waiting_at_once: usize,
    /// How many answered with the upstream's listing.
    answered: usize,
    /// From the first of them sent to the last answered.
    took: Duration,
}

/// The in-flight part's upstream: it holds each request until [`IN_FLIGHT`] are waiting, then
/// samples the daemon's memory and lets them all go (each lets itself go after [`UPSTREAM_HOLD`]).
struct HeldUpstream {
    daemon: u32,
    /// Off for the run before the thousand: it is answered at once.
    armed: std::sync::atomic::AtomicBool,
    waiting: std::sync::atomic::AtomicUsize,
    most_waiting: std::sync::atomic::AtomicUsize,
    all_waiting: tokio::sync::Notify,
    /// The daemon's memory when all were waiting.
    at_all: std::sync::Mutex<Option<Memory>>,
}

impl HeldUpstream {
    fn new(daemon: u32) -> HeldUpstream {
        HeldUpstream {
            daemon,
            armed: std::sync::atomic::AtomicBool::new(false),
            waiting: std::sync::atomic::AtomicUsize::new(0),
            most_waiting: std::sync::atomic::AtomicUsize::new(0),
            all_waiting: tokio::sync::Notify::new(),
            at_all: std::sync::Mutex::new(None),
        }
    }

    async fn hold(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.armed.load(SeqCst) {
            return;
        }
        let released = self.all_waiting.notified();
        let waiting = self.waiting.fetch_add(1, SeqCst) + 1;
        self.most_waiting.fetch_max(waiting, SeqCst);
        if waiting >= IN_FLIGHT {
            if let Ok(memory) = memory_with_pss(self.daemon) {
                *self.at_all.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(memory);
            }
            self.all_waiting.notify_waiters();
        } else {
            let _ = tokio::time::timeout(UPSTREAM_HOLD, released).await;
        }
        self.waiting.fetch_sub(1, SeqCst);
    }
}

pub(super) async fn run(scratch: &Path) -> anyhow::Result<CatalogFigures> {
    let mcp_binary = std::env::current_exe().context("locating the running executable")?.with_file_name("aileron-mcp");
    if !mcp_binary.exists() {
        bail!("{} is missing: `cargo xtask bench` builds it in release beside aileron-bench", mcp_binary.display());
    }
    let (start_full, start_floor) = starts(scratch).await?;
    let scale = AtScale { start_full, start_floor, in_flight: in_flight(scratch).await? };
    let home = Home::at(scratch.join("catalog-home")).context("creating the benchmark home")?;
    let info = aileron::surfaces::client::start_daemon(&home).await.context("starting the benchmark daemon")?;
    let result = measure(&home, &info.url, info.token.expose(), info.pid, &mcp_binary, scale).await;
    aileron::surfaces::client::stop_daemon(&home, Duration::from_secs(20))
        .await
        .context("stopping the benchmark daemon")?;
    result
}

/// A daemon's memory with [`IN_FLIGHT`] runs of the example connector's `list-issues` in flight
/// at once, each held by an upstream (in this process) until all are waiting on it: its memory
/// after one run, the peak sampled every 50 ms and at the moment all were waiting, and how many
/// answered with the listing.
async fn in_flight(scratch: &Path) -> anyhow::Result<InFlight> {
    use aileron::surfaces::cli::demo::{EXAMPLE_ACTIONS, EXAMPLE_FQN, EXAMPLE_VERSION, EXAMPLE_WASM};
    use std::sync::atomic::Ordering::SeqCst;
    // The upstream's and the clients' ends of a thousand connections each.
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard)?;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let upstream = listener.local_addr()?;
    let home = Home::at(scratch.join("in-flight"))?;
    let info = aileron::surfaces::client::start_daemon(&home).await.context("starting the in-flight daemon")?;
    let held = std::sync::Arc::new(HeldUpstream::new(info.pid));
    let slow = axum::Router::new().fallback({
        let held = held.clone();
        move || async move {
            held.hold().await;
            axum::Json(json!([{ "number": 1, "title": "held", "state": "open", "html_url": "http://example/1" }]))
        }
    });
    let server = tokio::spawn(async move { axum::serve(listener, slow).await });
    let measured = async {
        let client = DaemonClient::at(&info.url, info.token.clone())?;
        let manifest = aileron::surfaces::cli::demo::example_manifest_for(&upstream.to_string());
        let reference = format!("{EXAMPLE_FQN}@{EXAMPLE_VERSION}");
        let package = home.root().join("example-package");
        let installed = install_package(&client, &package, &reference, EXAMPLE_WASM, &manifest).await?;
        let hash = installed["hash"].as_str().context("the install answer has no hash")?;
        let template = EXAMPLE_ACTIONS
            .iter()
            .find(|(file, _)| *file == "list-issues.md")
            .map(|(_, template)| *template)
            .context("the example connector ships no list-issues action")?;
        let action = aileron::surfaces::cli::demo::render_action(template, hash);
        client.post("/v1/actions/install", &json!({ "file_name": "list-issues.md", "content": action })).await?;
        let args = json!({ "args": { "owner": "aileron", "repo": "bench", "api_base": format!("http://{upstream}") } });
        client.post("/v1/actions/list-issues/run", &args).await?;
        let before = memory_with_pss(info.pid)?;
        eprintln!("    {IN_FLIGHT} runs sent at once, each held by the upstream until all are waiting");
        held.armed.store(true, SeqCst);
        let http = reqwest::Client::builder().no_proxy().build()?;
        let mut runs = tokio::task::JoinSet::new();
        let started = Instant::now();
        for _ in 0..IN_FLIGHT {
            let (http, url, token, args) = (
                http.clone(),
                format!("{}/v1/actions/list-issues/run", info.url),
                info.token.expose().to_string(),
                args.clone(),
            );
            runs.spawn(async move {
                let response = http.post(&url).bearer_auth(&token).json(&args).send().await?;
                let status = response.status();
                let body: serde_json::Value = response.json().await?;
                Ok::<bool, anyhow::Error>(status.is_success() && body.to_string().contains("held"))
            });
        }
        let mut peak = Memory::default();
        let mut answered = 0;
        while !runs.is_empty() {
            peak = peak.max(memory_of(info.pid)?);
            tokio::select! {
                joined = runs.join_next() => {
                    if let Some(joined) = joined {
                        answered += usize::from(joined.context("an in-flight run panicked")??);
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let took = started.elapsed();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = memory_with_pss(info.pid)?;
        let at_all = *held.at_all.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok::<_, anyhow::Error>(InFlight {
            before,
            after,
            peak: at_all.map_or(peak, |at_all| peak.max(at_all)),
            waiting_at_once: held.most_waiting.load(SeqCst),
            answered,
            took,
        })
    }
    .await;
    aileron::surfaces::client::stop_daemon(&home, Duration::from_secs(20)).await?;
    server.abort();
    measured
}

/// [`STARTS`] starts of a daemon on a home with [`START_CONNECTORS`] connectors and
/// [`START_ACTIONS`] actions, alternating with starts on a home with one action of one connector:
/// each from `aileron daemon` spawned (the product's own auto-start) to the first run of an
/// action answered, the daemon stopped after.
async fn starts(scratch: &Path) -> anyhow::Result<(Distribution, Distribution)> {
    let full = Home::at(scratch.join("start-full"))?;
    let floor = Home::at(scratch.join("start-floor"))?;
    for (home, actions, connectors) in [(&full, START_ACTIONS, START_CONNECTORS - 1), (&floor, 1, 0)] {
        let info = aileron::surfaces::client::start_daemon(home).await.context("starting a daemon to install into")?;
        let client = DaemonClient::at(&info.url, info.token.clone())?;
        eprintln!("    installing {actions} actions and {} connectors", connectors + 1);
        install_echo(&client, home, actions).await?;
        install_connectors(&client, home, connectors).await?;
        aileron::surfaces::client::stop_daemon(home, Duration::from_secs(20)).await?;
    }
    let (mut timed_full, mut timed_floor) = (Vec::new(), Vec::new());
    for _ in 0..STARTS {
        for (home, timed) in [(&full, &mut timed_full), (&floor, &mut timed_floor)] {
            let started = Instant::now();
            let info = aileron::surfaces::client::start_daemon(home).await.context("starting a daemon")?;
            let client = DaemonClient::at(&info.url, info.token.clone())?;
            let ran = client.post("/v1/actions/echo-0000/run", &json!({ "args": { "text": "first" } })).await?;
            timed.push(started.elapsed());
            if ran["result"]["action"] != "echo-0000" {
                bail!("the first run after a start answered {ran}");
            }
            aileron::surfaces::client::stop_daemon(home, Duration::from_secs(20)).await?;
        }
    }
    Ok((Distribution::new(timed_full), Distribution::new(timed_floor)))
}

/// `count` connectors (`echo-000`, …), each installed and compiled as `aileron connector install` does.
async fn install_connectors(client: &DaemonClient, home: &Home, count: usize) -> anyhow::Result<()> {
    for index in 0..count {
        let package = home.root().join(format!("connector-{index:03}"));
        let fqn = format!("github://aileron-bench/echo-{index:03}");
        let manifest = format!("[connector]\nname = \"{fqn}\"\nversion = \"1.0.0\"\n");
        let reference = format!("{fqn}@1.0.0");
        let installed = install_package(client, &package, &reference, ECHO_WASM, &manifest).await?;
        if installed["compiled"]["ok"] != true {
            bail!("installing {reference} did not compile it: {installed}");
        }
    }
    Ok(())
}

/// One GET timed to the answer's last byte; returns the time and the body's size.
async fn timed_get(http: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<(Duration, usize)> {
    let started = Instant::now();
    let response = http.get(url).bearer_auth(token).send().await.with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body = response.bytes().await?;
    let elapsed = started.elapsed();
    if !status.is_success() {
        bail!("GET {url} answered {status}");
    }
    Ok((elapsed, body.len()))
}

async fn measure(
    home: &Home,
    url: &str,
    token: &str,
    pid: u32,
    mcp_binary: &Path,
    scale: AtScale,
) -> anyhow::Result<CatalogFigures> {
    let client = DaemonClient::at(url, aileron::platform::secret::Secret::new(token))?;
    let http = reqwest::Client::builder().no_proxy().build()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = memory_with_pss(pid)?;

    eprintln!("    installing {SMALL_CATALOG} actions");
    install_echo(&client, home, SMALL_CATALOG).await?;
    let (actions_url, health_url) = (format!("{url}/v1/actions"), format!("{url}/v1/health"));
    let (mut list_small, mut health, mut small_bytes) = (Vec::new(), Vec::new(), 0);
    for index in 0..LISTINGS + 5 {
        let (list_time, bytes) = timed_get(&http, &actions_url, token).await?;
        let (health_time, _) = timed_get(&http, &health_url, token).await?;
        if index >= 5 {
            list_small.push(list_time);
            health.push(health_time);
        }
        small_bytes = bytes;
    }

    eprintln!("    installing up to {LARGE_CATALOG} actions");
    install_echo(&client, home, LARGE_CATALOG).await?;
    let with_actions = memory_with_pss(pid)?;
    // The same actions loaded at start, as a daemon holds them after any restart: what installing
    // them one by one left behind (the allocator's partly used pages) is not there.
    eprintln!("    restarting on {LARGE_CATALOG} actions");
    aileron::surfaces::client::stop_daemon(home, Duration::from_secs(20)).await?;
    let restarted = aileron::surfaces::client::start_daemon(home).await.context("restarting the benchmark daemon")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started_with_actions = memory_with_pss(restarted.pid)?;
    let (url, token, pid) = (restarted.url.as_str(), restarted.token.expose(), restarted.pid);
    let client = DaemonClient::at(url, restarted.token.clone())?;
    let actions_url = format!("{url}/v1/actions");
    let mut mcp = McpProcess::start(mcp_binary, home, url, token)?;
    let (mut tools_list_large, mut list_large, mut large_bytes, mut tools_listed) = (Vec::new(), Vec::new(), 0, 0);
    for index in 0..LISTINGS + 2 {
        let (list_time, bytes) = timed_get(&http, &actions_url, token).await?;
        let (tools_time, tools, _) = mcp.list_tools()?;
        if index >= 2 {
            list_large.push(list_time);
            tools_list_large.push(tools_time);
        }
        (large_bytes, tools_listed) = (bytes, tools);
    }
    if tools_listed != LARGE_CATALOG + builtin_tools() {
        bail!(
            "tools/list listed {tools_listed} tools, expected {LARGE_CATALOG} actions + {} built-ins",
            builtin_tools()
        );
    }

    eprintln!("    list_changed at {LARGE_CATALOG} actions");
    let (mut notified, mut relisted) = (Vec::new(), Vec::new());
    for change in 0..CHANGES {
        let count = LARGE_CATALOG + change + 1;
        let started = Instant::now();
        install_echo(&client, home, count).await?;
        let arrived = mcp.wait_for_notification("notifications/tools/list_changed")?;
        let (_, tools, _) = mcp.list_tools()?;
        let answered = Instant::now();
        if tools != count + builtin_tools() {
            bail!("after the change tools/list listed {tools} tools, expected {}", count + builtin_tools());
        }
        notified.push(arrived.saturating_duration_since(started));
        relisted.push(answered - started);
    }
    drop(mcp);

    eprintln!("    installing {CONNECTORS} connectors");
    install_connectors(&client, home, CONNECTORS).await?;
    let with_connectors = memory_with_pss(pid)?;

    eprintln!("    {LOAD_CLIENTS} clients for {} s", LOAD_TIME.as_secs());
    let until = Instant::now() + LOAD_TIME;
    let run_url = format!("{url}/v1/actions/echo-0000/run");
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..LOAD_CLIENTS {
        let (http, run_url, token) =
            (reqwest::Client::builder().no_proxy().build()?, run_url.clone(), token.to_string());
        clients.spawn(async move {
            let mut runs = 0u64;
            while Instant::now() < until {
                let response =
                    http.post(&run_url).bearer_auth(&token).json(&json!({ "args": { "text": "load" } })).send().await?;
                if !response.status().is_success() {
                    bail!("a run under load answered {}", response.status());
                }
                response.bytes().await?;
                runs += 1;
            }
            Ok::<u64, anyhow::Error>(runs)
        });
    }
    let mut under_load_peak = Memory::default();
    while Instant::now() < until {
        under_load_peak = under_load_peak.max(memory_of(pid)?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut load_runs = 0;
    while let Some(joined) = clients.join_next().await {
        load_runs += joined.context("a load client panicked")??;
    }

    Ok(CatalogFigures {
        list_small: Distribution::new(list_small),
        health: Distribution::new(health),
        small_bytes,
        tools_list_large: Distribution::new(tools_list_large),
        list_large: Distribution::new(list_large),
        large_bytes,
        tools_listed,
        notified: Distribution::new(notified),
        relisted: Distribution::new(relisted),
        idle,
        with_actions,
        started_with_actions,
        with_connectors,
        under_load_peak,
        load_runs,
        scale,
    })
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// [`mib`] of a figure read only at some moments.
fn mib_if_read(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "not read".to_string(), mib)
}

impl CatalogFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let (list, health) = (self.list_small.p50(), self.health.p50());
        let (tools, large) = (self.tools_list_large.p50(), self.list_large.p50());
        let relisted = self.relisted.max();
        vec![
            SummaryRow {
                figure: format!("(j) GET /v1/actions, {} actions, p50", format_count(SMALL_CATALOG as u64)),
                measured: format_duration(list),
                baseline: format!("{} GET /v1/health", format_duration(health)),
                ratio: format_ratio(ratio(list, health)),
                goal: "≤ 5 ms",
                met: Some(list <= LIST_1000_GOAL),
            },
            SummaryRow {
                figure: format!("(j) MCP tools/list, {} actions, p50", format_count(LARGE_CATALOG as u64)),
                measured: format_duration(tools),
                baseline: format!("{} GET /v1/actions", format_duration(large)),
                ratio: format_ratio(ratio(tools, large)),
                goal: "≤ 20 ms",
                met: Some(tools <= TOOLS_LIST_GOAL),
            },
            SummaryRow {
                figure: format!(
                    "(j) change → new tools/list answered, {} actions, max",
                    format_count(LARGE_CATALOG as u64)
                ),
                measured: format_duration(relisted),
                baseline: format!("{} notified", format_duration(self.notified.max())),
                ratio: String::new(),
                goal: "≤ 1 s",
                met: Some(relisted <= LIST_CHANGED_GOAL),
            },
            SummaryRow {
                figure: format!(
                    "(j) daemon start to first answered run, {START_CONNECTORS} connectors and {} actions, p50 of {STARTS}",
                    format_count(START_ACTIONS as u64)
                ),
                measured: format!(
                    "{} (max {})",
                    format_duration(self.scale.start_full.p50()),
                    format_duration(self.scale.start_full.max())
                ),
                baseline: format!("{} with one action of one connector", format_duration(self.scale.start_floor.p50())),
                ratio: format_ratio(ratio(self.scale.start_full.p50(), self.scale.start_floor.p50())),
                goal: "≤ 300 ms",
                met: Some(self.scale.start_full.p50() <= START_GOAL),
            },
            SummaryRow {
                figure: format!(
                    "(j) daemon RSS, {} runs sent at once, held upstream until all wait ({} waiting at most, {} \
                     answered, in {:.1} s)",
                    format_count(IN_FLIGHT as u64),
                    format_count(self.scale.in_flight.waiting_at_once as u64),
                    format_count(self.scale.in_flight.answered as u64),
                    self.scale.in_flight.took.as_secs_f64(),
                ),
                measured: mib(self.scale.in_flight.peak.resident),
                baseline: format!("{} after one run", mib(self.scale.in_flight.before.resident)),
                ratio: format_ratio(
                    self.scale.in_flight.peak.resident as f64 / self.scale.in_flight.before.resident.max(1) as f64,
                ),
                goal: "≤ 256 MiB with all 1,000 waiting at once",
                met: Some(
                    self.scale.in_flight.peak.resident <= IN_FLIGHT_GOAL
                        && self.scale.in_flight.waiting_at_once == IN_FLIGHT
                        && self.scale.in_flight.answered == IN_FLIGHT,
                ),
            },
            SummaryRow {
                figure: format!(
                    "(j) daemon Pss (shared pages divided among their mappings), {} runs waiting at once",
                    format_count(IN_FLIGHT as u64)
                ),
                measured: mib_if_read(self.scale.in_flight.peak.proportional),
                baseline: format!("{} after one run", mib_if_read(self.scale.in_flight.before.proportional)),
                ratio: match (self.scale.in_flight.peak.proportional, self.scale.in_flight.before.proportional) {
                    (Some(peak), Some(before)) => format_ratio(peak as f64 / before.max(1) as f64),
                    _ => String::new(),
                },
                goal: "",
                met: None,
            },
            SummaryRow {
                figure: format!(
                    "(j) daemon RSS with {} actions installed one by one",
                    format_count(LARGE_CATALOG as u64)
                ),
                measured: mib(self.with_actions.resident),
                baseline: format!("{} idle", mib(self.idle.resident)),
                ratio: format_ratio(self.with_actions.resident as f64 / self.idle.resident.max(1) as f64),
                goal: "≤ 50 MiB",
                met: Some(self.with_actions.resident <= LARGE_CATALOG_GOAL),
            },
            SummaryRow {
                figure: format!("(j) daemon RSS started on {} installed actions", format_count(LARGE_CATALOG as u64)),
                measured: mib(self.started_with_actions.resident),
                baseline: format!("{} idle", mib(self.idle.resident)),
                ratio: format_ratio(self.started_with_actions.resident as f64 / self.idle.resident.max(1) as f64),
                goal: "reported",
                met: None,
            },
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (j) Catalogs and memory at real-world sizes\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. A real `aileron daemon run` process on a scratch home and the release \
             `aileron-mcp`. Listings are timed to the answer's last byte (the client's parse is not in them), {LISTINGS} \
             of each kind alternating after a few untimed.\n"
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                (
                    &format!("GET /v1/actions, {SMALL_CATALOG} actions ({})", format_bytes(self.small_bytes)),
                    &self.list_small,
                ),
                ("GET /v1/health", &self.health),
                (&format!("tools/list via aileron-mcp, {} tools", self.tools_listed), &self.tools_list_large),
                (
                    &format!("GET /v1/actions, {LARGE_CATALOG} actions ({})", format_bytes(self.large_bytes)),
                    &self.list_large,
                ),
                ("action installed → list_changed on aileron-mcp's stdout", &self.notified),
                ("action installed → the next tools/list answered", &self.relisted),
                (
                    &format!("start to first run answered, {START_CONNECTORS} connectors and {START_ACTIONS} actions"),
                    &self.scale.start_full,
                ),
                ("start to first run answered, one action of one connector", &self.scale.start_floor),
            ],
        );
        let _ = writeln!(
            text,
            "\n| daemon | resident (VmRSS) | of it file-backed (RssFile) | proportional (Pss) | in memfds | reserved (VmSize) |\n|---|---:|---:|---:|---:|---:|"
        );
        for (label, memory) in [
            ("idle, nothing installed", self.idle),
            ("10,000 actions of one connector, installed one by one", self.with_actions),
            ("the same daemon restarted on them", self.started_with_actions),
            ("and 100 more connectors, each compiled at install", self.with_connectors),
            ("peak under 16 clients running an action", self.under_load_peak),
            ("the GitHub example after one run (another daemon)", self.scale.in_flight.before),
            ("peak with 1,000 of its runs waiting on the upstream at once", self.scale.in_flight.peak),
            ("after they all answered", self.scale.in_flight.after),
        ] {
            let _ = writeln!(
                text,
                "| {label} | {} | {} | {} | {} | {} |",
                mib(memory.resident),
                mib(memory.in_files),
                mib_if_read(memory.proportional),
                mib(memory.in_memfds),
                mib(memory.reserved)
            );
        }
        let _ = writeln!(text, "\nThe load ran {} runs in {} s.", format_count(self.load_runs), LOAD_TIME.as_secs());
    }
}
