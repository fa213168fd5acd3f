//! `http`: `POST /v1/actions/echo/run` over a loopback socket, against `GET /v1/health` (the HTTP
//! floor) and against health followed by a bare group commit ([`GroupCommit`], the durable floor),
//! with the daemon's state on a temporary home and its audit log on disk; and the load
//! generator (hyper's connection-level client, one kept-alive connection per client) that (d) and
//! `mcp` use too.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::daemon::{BenchDaemon, REQUEST_TIMEOUT, http_client};
use super::figures::{Distribution, format_count, format_duration, format_rate, format_ratio, ratio};
use super::report::SummaryRow;
use super::{BenchArgs, ECHO_ACTION, ECHO_MANIFEST, ECHO_WASM, echo_reference, work};

/// Issue 17: 20,000 runs/s at 16 clients with the audit log fsynced, p50 ≤ 1 ms; one client ≤ 250 µs.
// Issue 49's goals, each against a floor measured in the same run (issue 17's absolute
// 20,000 runs/s and 250 µs sat below what this 2-vCPU VM allows any implementation).
const RUNS_PER_HEALTH_GOAL: f64 = 0.25;
const RUN_SINGLE_ADDED_GOAL: Duration = Duration::from_micros(100);
const RUN_P50_GOAL: Duration = Duration::from_millis(1);
const CPU_PER_HEALTH_GOAL: f64 = 3.0;
const ALLOCATIONS_PER_RUN_GOAL: f64 = 120.0;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct AuditCounts {
    pub(super) fsyncs: u64,
    pub(super) batches: u64,
    /// The writer's time in `fdatasync` (what a durable run waits for, inside the daemon).
    pub(super) sync_time: Duration,
}

impl AuditCounts {
    fn since(self, earlier: AuditCounts) -> AuditCounts {
        AuditCounts {
            fsyncs: self.fsyncs - earlier.fsyncs,
            batches: self.batches - earlier.batches,
            sync_time: self.sync_time.saturating_sub(earlier.sync_time),
        }
    }

    fn plus(self, other: AuditCounts) -> AuditCounts {
        AuditCounts {
            fsyncs: self.fsyncs + other.fsyncs,
            batches: self.batches + other.batches,
            sync_time: self.sync_time + other.sync_time,
        }
    }

    /// The mean time of one of the writer's `fdatasync`s.
    fn mean_sync(&self) -> Duration {
        self.sync_time / u32::try_from(self.fsyncs.max(1)).unwrap_or(u32::MAX)
    }
}

pub(super) struct HttpFigures {
    health_loaded: LoadFigures,
    run_loaded: LoadFigures,
    /// `GET /v1/health`, then an append made durable by [`GroupCommit`]: the floor under a durable
    /// run at as many clients.
    durable_loaded: LoadFigures,
    health_single: LoadFigures,
    run_single: LoadFigures,
    /// Records in the audit log after the benchmark, all verified.
    audit_records: u64,
    /// A line written over a pre-written file + fdatasync on the audit log's filesystem, back to
    /// back: what the audit writer's journal does per group commit.
    fdatasync: Distribution,
    /// The same line appended + fdatasync: what the writer did before the journal.
    append_fdatasync: Distribution,
    /// A health request, then a journal write + fdatasync, timed together: the floor under a
    /// durable run at one client.
    durable_floor: Distribution,
}

/// One measured phase: `clients` clients sending the same request back to back.
pub(super) struct LoadFigures {
    pub(super) clients: u64,
    pub(super) window: Duration,
    /// Latencies of the requests sent and answered inside the measured window.
    pub(super) latency: Distribution,
    /// Requests answered over the whole phase, warm-up included.
    pub(super) answered: u64,
    /// Audit log activity inside the measured window.
    pub(super) audit: AuditCounts,
    /// What the window cost this process (clients and daemon): CPU time and allocations.
    pub(super) work: work::Work,
}

impl LoadFigures {
    pub(super) fn throughput(&self) -> f64 {
        self.latency.len() as f64 / self.window.as_secs_f64()
    }

    /// The window's work per request answered in it.
    pub(super) fn per_request(&self) -> work::PerRequest {
        self.work.per(self.latency.len())
    }

    /// Two windows of the same load as one: samples, windows and counts added.
    pub(super) fn merged(self, other: LoadFigures) -> LoadFigures {
        LoadFigures {
            clients: self.clients,
            window: self.window + other.window,
            latency: self.latency.merged(other.latency),
            answered: self.answered + other.answered,
            audit: self.audit.plus(other.audit),
            work: self.work.plus(other.work),
        }
    }
}

/// The request a phase sends.
#[derive(Clone)]
pub(super) struct Probe {
    pub(super) method: Method,
    pub(super) url: String,
    /// `Bearer <token>`.
    pub(super) authorization: String,
    pub(super) body: Option<Bytes>,
}

pub(super) async fn http_benchmark(args: &BenchArgs, scratch: &Path) -> anyhow::Result<HttpFigures> {
    let home = Home::at(scratch.join("http").join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let admin = http_client()?;
    let hash = daemon
        .install_connector(
            &admin,
            &scratch.join("http").join("echo-package"),
            &echo_reference(),
            ECHO_WASM,
            ECHO_MANIFEST,
        )
        .await?;
    daemon.add_action(&admin, "echo.md", &ECHO_ACTION.replace("{{CONNECTOR_HASH}}", &hash)).await?;
    let run_body = json!({ "args": { "text": "hello from the benchmark" } });
    let answer = daemon.expect(&admin, Method::POST, "/v1/actions/echo/run", Some(&run_body), StatusCode::OK).await?;
    if answer["result"]["output"]["args"] != run_body["args"] {
        bail!("the echo action answered {answer}");
    }
    drop(admin);
    let floor_dir = scratch.join("http");
    let fdatasync =
        tokio::task::block_in_place(|| fdatasync_floor(&floor_dir, FloorWrite::Overwrite, FDATASYNC_APPENDS))?;
    let append_fdatasync =
        tokio::task::block_in_place(|| fdatasync_floor(&floor_dir, FloorWrite::Append, FDATASYNC_APPENDS))?;

    let health =
        Probe { method: Method::GET, url: daemon.url("/v1/health"), authorization: daemon.authorization(), body: None };
    let run = Probe {
        method: Method::POST,
        url: daemon.url("/v1/actions/echo/run"),
        authorization: daemon.authorization(),
        body: Some(Bytes::from(run_body.to_string())),
    };
    // Counted before the phases so the check below does not depend on what setup recorded.
    daemon.state.services.audit.flush().await;
    let records_before =
        daemon.state.services.audit.verify().context("verifying the audit log before the benchmark")?.records;
    let phase = async |probe: &Probe, clients: u64| {
        eprintln!("    {} {} with {clients} client(s)", probe.method, probe.url);
        load_phase(&daemon, probe, clients, args.warmup, args.duration).await
    };
    // The loaded phases in rounds, each of health, run and the durable floor in turn (the order
    // rotated every round), their windows pooled: the ratios between them are what (b)'s goals
    // read, and drift on this VM (health's requests/s measured 112,000 and 138,000 in two runs of
    // one hour) then lands on every side of them.
    let window = args.duration / LOAD_ROUNDS as u32;
    let group_commit = GroupCommit::start(&floor_dir)?;
    let mut pooled: [Option<LoadFigures>; LOAD_KINDS] = std::array::from_fn(|_| None);
    for round in 0..LOAD_ROUNDS {
        for step in 0..pooled.len() {
            let kind = (step + round) % pooled.len();
            let (probe, durable) = match kind {
                0 => (&health, None),
                1 => (&run, None),
                _ => (&health, Some(&group_commit)),
            };
            let then = if durable.is_some() { ", then a group-committed fdatasync" } else { "" };
            eprintln!("    round {}: {} {}{then} with {} client(s)", round + 1, probe.method, probe.url, args.clients);
            let load = load_phase_with(&daemon, probe, args.clients, args.warmup, window, durable).await?;
            pooled[kind] = Some(match pooled[kind].take() {
                None => load,
                Some(earlier) => earlier.merged(load),
            });
        }
    }
    group_commit.stop()?;
    let [health_loaded, run_loaded, durable_loaded] = pooled.map(|load| load.expect("every round measured each kind"));
    let health_single = phase(&health, 1).await?;
    let run_single = phase(&run, 1).await?;
    let durable_floor = durable_floor(&health, &scratch.join("http"), FDATASYNC_APPENDS).await?;

    // Every run answered 200 must be in the log, sealed and chained: one record per run.
    daemon.state.services.audit.flush().await;
    let report = daemon.state.services.audit.verify().context("verifying the audit log after the benchmark")?;
    let expected_records = records_before + run_loaded.answered + run_single.answered;
    if report.records != expected_records {
        bail!("the audit log holds {} records, expected {expected_records} (one per answered run)", report.records);
    }
    daemon.stop().await?;
    Ok(HttpFigures {
        health_loaded,
        run_loaded,
        durable_loaded,
        health_single,
        run_single,
        audit_records: report.records,
        fdatasync,
        append_fdatasync,
        durable_floor,
    })
}

/// Rounds of the loaded phases (see [`http_benchmark`]).
pub(super) const LOAD_ROUNDS: usize = 3;
/// Loaded phases in each round: health, run and the durable floor.
pub(super) const LOAD_KINDS: usize = 3;

/// Size of one append of the disk floor measurement: about one audit record line.
const FDATASYNC_APPEND_BYTES: usize = 600;
const FDATASYNC_APPENDS: usize = 500;

/// How [`FloorLog`] writes its lines.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FloorWrite {
    /// Over a file of zeros written (and synced) beforehand, at a moving offset: the audit
    /// writer's journal, whose `fdatasync` has no new size or block to write.
    Overwrite,
    /// At the end of the file: the daily log file, synced directly.
    Append,
}

/// The size of [`FloorWrite::Overwrite`]'s file (the audit journal's).
const FLOOR_FILE_BYTES: u64 = 1 << 20;

/// A new file in `dir` for durable writes of about an audit record's line; removed when dropped.
struct FloorLog {
    file: tempfile::NamedTempFile,
    line: Vec<u8>,
    /// `line` repeated, for writing several at once (kept between writes).
    batch: Vec<u8>,
    /// Where the next line goes, for [`FloorWrite::Overwrite`].
    overwrite_at: Option<u64>,
}

impl FloorLog {
    fn create(dir: &Path, prefix: &str, write: FloorWrite) -> anyhow::Result<FloorLog> {
        use std::io::Write as _;
        let mut file = tempfile::Builder::new()
            .prefix(prefix)
            .tempfile_in(dir)
            .with_context(|| format!("creating a {prefix}… file in {}", dir.display()))?;
        let mut line = vec![b'x'; FDATASYNC_APPEND_BYTES];
        line[FDATASYNC_APPEND_BYTES - 1] = b'\n';
        let overwrite_at = (write == FloorWrite::Overwrite).then_some(0);
        if overwrite_at.is_some() {
            file.write_all(&vec![0; FLOOR_FILE_BYTES as usize])?;
            file.as_file().sync_all()?;
        }
        Ok(FloorLog { file, line, batch: Vec::new(), overwrite_at })
    }

    /// `lines` lines made durable with one write and one `fdatasync`, as the audit writer makes
    /// a group commit's.
    fn write_and_sync(&mut self, lines: usize) -> anyhow::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::FileExt as _;
        let bytes = self.line.len() * lines;
        while self.batch.len() < bytes {
            self.batch.extend_from_slice(&self.line);
        }
        let batch = &self.batch[..bytes];
        match &mut self.overwrite_at {
            Some(offset) => {
                // Always inside the file written beforehand, as the journal's frames are.
                if *offset + bytes as u64 > FLOOR_FILE_BYTES {
                    *offset = 0;
                }
                self.file.as_file().write_all_at(batch, *offset)?;
                *offset += bytes as u64;
            }
            None => self.file.write_all(batch)?,
        }
        Ok(self.file.as_file().sync_data()?)
    }
}

/// Times `writes` lines written to a new file in `dir`, each followed by fdatasync, back to back.
fn fdatasync_floor(dir: &Path, write: FloorWrite, writes: usize) -> anyhow::Result<Distribution> {
    let mut log = FloorLog::create(dir, "fdatasync-floor-", write)?;
    let mut samples = Vec::with_capacity(writes);
    for _ in 0..writes {
        let started = Instant::now();
        log.write_and_sync(1)?;
        samples.push(started.elapsed());
    }
    Ok(Distribution::new(samples))
}

/// Times `rounds` of what a durable run at one client cannot do without: an HTTP round trip to
/// the daemon (`GET /v1/health`), then one append made durable, one after the other. An
/// `fdatasync` that follows a pause costs more on this VM than one right after another (the
/// disk's path idles in between: 180–230 µs back to back, 210–320 µs after a 70–500 µs pause,
/// measured 2026-11-27), and a run's sync always follows its request, so the back-to-back figure
/// alone understated the floor.
async fn durable_floor(health: &Probe, dir: &Path, rounds: usize) -> anyhow::Result<Distribution> {
    let mut connection = LoadConnection::open(&health.url).await?;
    let path = connection.path_of(health);
    let mut log = FloorLog::create(dir, "durable-floor-", FloorWrite::Overwrite)?;
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let (status, _) = connection.send(health, &path).await?;
        // On this task's own thread, as a run's sync would be at best: no hand-off to measure.
        log.write_and_sync(1)?;
        samples.push(started.elapsed());
        if status != StatusCode::OK {
            bail!("GET {path} answered {status}");
        }
    }
    Ok(Distribution::new(samples))
}

/// The floor under a durable run at many clients: a thread that takes every append queued, writes
/// them with one `pwrite` over a file of zeros written beforehand (as the audit journal is), syncs
/// it once and only then acknowledges each. The audit writer's group commit with nothing else to
/// do: no sealing, no daily file, no tree. A client of the floor sends `GET /v1/health`, then
/// appends and waits for the acknowledgement, as a run's answer waits for its record.
pub(super) struct GroupCommit {
    appends: Appender,
    counts: Arc<GroupCommitCounts>,
    thread: std::thread::JoinHandle<()>,
}

/// How an append learns that it is durable (or why it is not).
type Acknowledge = tokio::sync::oneshot::Sender<Result<(), String>>;

/// A handle that queues appends on a [`GroupCommit`]; one per client or proxy task.
#[derive(Clone)]
pub(super) struct Appender(std::sync::mpsc::Sender<Acknowledge>);

impl Appender {
    /// One append, answered once it is durable.
    pub(super) async fn append(&self) -> anyhow::Result<()> {
        let (acknowledge, durable) = tokio::sync::oneshot::channel();
        self.0.send(acknowledge).map_err(|_| anyhow::anyhow!("the group commit floor's thread stopped"))?;
        durable.await.context("the group commit floor's thread stopped")?.map_err(|error| anyhow::anyhow!(error))
    }
}

#[derive(Default)]
struct GroupCommitCounts {
    batches: AtomicU64,
    sync_nanos: AtomicU64,
}

impl GroupCommit {
    pub(super) fn start(dir: &Path) -> anyhow::Result<GroupCommit> {
        let mut log = FloorLog::create(dir, "group-commit-floor-", FloorWrite::Overwrite)?;
        let (appends, queued) = std::sync::mpsc::channel::<Acknowledge>();
        let counts = Arc::new(GroupCommitCounts::default());
        let counted = counts.clone();
        let thread = std::thread::Builder::new().name("group-commit-floor".into()).spawn(move || {
            let mut batch = Vec::new();
            while let Ok(first) = queued.recv() {
                batch.push(first);
                batch.extend(std::iter::from_fn(|| queued.try_recv().ok()));
                let started = Instant::now();
                let written = log.write_and_sync(batch.len()).map_err(|error| format!("{error:#}"));
                counted.sync_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                counted.batches.fetch_add(1, Ordering::Relaxed);
                for acknowledge in batch.drain(..) {
                    let _ = acknowledge.send(written.clone());
                }
            }
        })?;
        Ok(GroupCommit { appends: Appender(appends), counts, thread })
    }

    /// A handle for queueing appends.
    pub(super) fn appender(&self) -> Appender {
        self.appends.clone()
    }

    /// Batches and time in `write` + `fdatasync` so far, as the audit writer's counts read.
    fn counts(&self) -> AuditCounts {
        let batches = self.counts.batches.load(Ordering::Relaxed);
        let sync_time = Duration::from_nanos(self.counts.sync_nanos.load(Ordering::Relaxed));
        AuditCounts { fsyncs: batches, batches, sync_time }
    }

    fn stop(self) -> anyhow::Result<()> {
        drop(self.appends);
        self.thread.join().map_err(|_| anyhow::anyhow!("the group commit floor's thread panicked"))
    }
}

pub(super) async fn load_phase(
    daemon: &BenchDaemon,
    probe: &Probe,
    clients: u64,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<LoadFigures> {
    load_phase_with(daemon, probe, clients, warmup, window, None).await
}

/// How many times a phase is measured when no request was both sent and answered inside its
/// window: a window shorter than one stall of the machine (an `fdatasync` of 60 ms on a loaded
/// host, against the guard's 55 ms windows of (d)) holds no request, and says nothing about the
/// daemon; the phase is measured again, and said so.
const STALLED_WINDOW_TRIES: u32 = 3;

/// [`load_phase`], each answer followed by an append to `durable` when there is one (the
/// window's counts are then the group commit's instead of the audit log's).
async fn load_phase_with(
    daemon: &BenchDaemon,
    probe: &Probe,
    clients: u64,
    warmup: Duration,
    window: Duration,
    durable: Option<&GroupCommit>,
) -> anyhow::Result<LoadFigures> {
    let mut tries = 1;
    loop {
        match measure_window(daemon, probe, clients, warmup, window, durable).await? {
            Some(figures) => return Ok(figures),
            None if tries < STALLED_WINDOW_TRIES => {
                tries += 1;
                eprintln!(
                    "    no {} {} was answered inside the {window:?} window (the machine stalled for longer than \
                     it): measuring the phase again",
                    probe.method, probe.url
                );
            }
            None => bail!(
                "no {} {} was answered inside the {window:?} window, {STALLED_WINDOW_TRIES} times",
                probe.method,
                probe.url
            ),
        }
    }
}

/// One measurement of [`load_phase_with`]; `None` when no request was answered inside the window.
async fn measure_window(
    daemon: &BenchDaemon,
    probe: &Probe,
    clients: u64,
    warmup: Duration,
    window: Duration,
    durable: Option<&GroupCommit>,
) -> anyhow::Result<Option<LoadFigures>> {
    let counts = || durable.map_or_else(|| daemon.audit_counts(), GroupCommit::counts);
    let measure_from = Instant::now() + warmup;
    let until = measure_from + window;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        // One connection each, kept alive, like separate agents.
        let connection = LoadConnection::open(&probe.url).await?;
        let (probe, durable) = (probe.clone(), durable.map(GroupCommit::appender));
        tasks.spawn(async move { client_loop(connection, probe, durable, measure_from, until).await });
    }
    tokio::time::sleep_until(measure_from.into()).await;
    let before = counts();
    let work_before = work::Work::now();
    tokio::time::sleep_until(until.into()).await;
    let work = work::Work::now().since(work_before);
    let after = counts();

    let mut latencies = Vec::new();
    let mut answered = 0;
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        let outcome = joined.context("a client task panicked")?;
        latencies.extend(outcome.latencies);
        answered += outcome.answered;
        if failure.is_none() {
            failure = outcome.failure;
        }
    }
    if let Some(failure) = failure {
        bail!("{} {} failed: {failure}", probe.method, probe.url);
    }
    if latencies.is_empty() {
        return Ok(None);
    }
    let audit = after.since(before);
    Ok(Some(LoadFigures { clients, window, latency: Distribution::new(latencies), answered, audit, work }))
}

/// One kept-alive HTTP/1.1 connection of the load generator: hyper's connection-level client,
/// with no pool, no URL parsing per request and no per-request timeout timer. The load generator
/// shares the daemon's two CPUs, so the less it spends per request, the more of the machine the
/// daemon gets (reqwest cost about a quarter of the CPU of a loaded phase).
pub(super) struct LoadConnection {
    sender: hyper::client::conn::http1::SendRequest<axum::body::Body>,
    /// `host:port`, the `Host` header the daemon admits.
    authority: String,
}

impl LoadConnection {
    pub(super) async fn open(url: &str) -> anyhow::Result<LoadConnection> {
        let authority = url
            .strip_prefix("http://")
            .and_then(|rest| rest.split('/').next())
            .with_context(|| format!("not an http:// URL: {url}"))?
            .to_string();
        let stream =
            tokio::net::TcpStream::connect(&authority).await.with_context(|| format!("connecting to {authority}"))?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .context("starting an HTTP/1.1 connection")?;
        tokio::spawn(connection);
        Ok(LoadConnection { sender, authority })
    }

    /// The path (and query) of `probe`'s URL on this connection's authority.
    pub(super) fn path_of(&self, probe: &Probe) -> String {
        probe.url.split_once(&self.authority).map_or("/", |(_, path)| path).to_string()
    }

    /// Sends `probe` and reads the whole answer; a daemon that stops answering fails the
    /// benchmark after [`REQUEST_TIMEOUT`] instead of hanging it.
    pub(super) async fn send(&mut self, probe: &Probe, path: &str) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut request = axum::http::Request::builder()
            .method(probe.method.as_str())
            .uri(path)
            .header(axum::http::header::HOST, &self.authority)
            .header(axum::http::header::AUTHORIZATION, &probe.authorization);
        let body = match &probe.body {
            Some(body) => {
                request = request.header(axum::http::header::CONTENT_TYPE, "application/json");
                axum::body::Body::from(body.clone())
            }
            None => axum::body::Body::empty(),
        };
        let exchange = async {
            self.sender.ready().await?;
            let response = self.sender.send_request(request.body(body)?).await?;
            let status = StatusCode::from_u16(response.status().as_u16())?;
            let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX).await?;
            anyhow::Ok((status, bytes))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange).await.context("no answer within the request timeout")?
    }
}

struct ClientOutcome {
    latencies: Vec<Duration>,
    answered: u64,
    failure: Option<String>,
}

/// Sends `probe` back to back until `until`, each answer followed by an append made durable by
/// `durable`'s group commit when there is one; keeps the latencies of requests sent and answered
/// (and appended) inside `[measure_from, until]`. Stops at the first failure.
async fn client_loop(
    mut connection: LoadConnection,
    probe: Probe,
    durable: Option<Appender>,
    measure_from: Instant,
    until: Instant,
) -> ClientOutcome {
    let mut outcome = ClientOutcome { latencies: Vec::new(), answered: 0, failure: None };
    let path = connection.path_of(&probe);
    loop {
        let sent = Instant::now();
        if sent >= until {
            return outcome;
        }
        let mut answer = connection.send(&probe, &path).await;
        if let (Ok((StatusCode::OK, _)), Some(appender)) = (&answer, &durable) {
            answer = appender.append().await.and(answer);
        }
        let done = Instant::now();
        match answer {
            Ok((StatusCode::OK, _)) => {
                outcome.answered += 1;
                if sent >= measure_from && done <= until {
                    outcome.latencies.push(done - sent);
                }
            }
            Ok((status, bytes)) => {
                let text = String::from_utf8_lossy(&bytes[..bytes.len().min(400)]).into_owned();
                outcome.failure = Some(format!("HTTP {status}: {text}"));
                return outcome;
            }
            Err(error) => {
                outcome.failure = Some(format!("{error:#}"));
                return outcome;
            }
        }
    }
}

impl HttpFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let mut rows = Vec::new();
        let (run, health) = (&self.run_loaded, &self.health_loaded);
        let clients = run.clients;
        rows.push(SummaryRow {
            figure: format!("(b) echo runs/s, {clients} clients"),
            measured: format_rate(run.throughput()),
            baseline: format!("{} health", format_rate(health.throughput())),
            ratio: format_ratio(run.throughput() / health.throughput().max(f64::MIN_POSITIVE)),
            goal: "≥ 0.25× health",
            met: Some(run.throughput() >= RUNS_PER_HEALTH_GOAL * health.throughput()),
        });
        for (label, measured, baseline, goal) in [
            ("p50", run.latency.p50(), health.latency.p50(), Some(RUN_P50_GOAL)),
            ("p99", run.latency.p99(), health.latency.p99(), None),
        ] {
            rows.push(SummaryRow::timed(
                format!("(b) echo run latency {label}, {clients} clients"),
                (measured, baseline),
                "health",
                if goal.is_some() { "≤ 1 ms" } else { "" },
                goal.map(|goal| measured <= goal),
            ));
        }
        // One client waits for every step in turn: a run cannot answer sooner than an HTTP
        // round trip followed by one durable audit append, measured as such in this run.
        let (run, floor) = (&self.run_single, self.durable_floor.p50());
        rows.push(SummaryRow::timed(
            "(b) echo run latency p50, 1 client",
            (run.latency.p50(), floor),
            "floor (health, then fdatasync)",
            "≤ floor + 100 µs",
            Some(run.latency.p50() <= floor + RUN_SINGLE_ADDED_GOAL),
        ));
        // What a run costs the process, counted rather than timed (see `work`): the figures
        // by which a change to the run path is judged when throughput moves with the VM.
        let (run, health) = (self.run_loaded.per_request(), self.health_loaded.per_request());
        rows.push(SummaryRow::timed(
            format!("(b) CPU per run, {clients} clients (process)"),
            (run.cpu, health.cpu),
            "health",
            "≤ 3.0× health",
            Some(ratio(run.cpu, health.cpu) <= CPU_PER_HEALTH_GOAL),
        ));
        // The same against the floor under any durable run at as many clients (health, then a
        // group commit with nothing else to do): how much of the goal's 3.0× the durability
        // itself takes on this machine, and how much the run path adds to it.
        let floor = self.durable_loaded.per_request();
        for (figure, measured, baseline, baseline_name) in [
            ("CPU per request of the durable floor", floor.cpu, health.cpu, "health"),
            (
                "CPU per run against the durable floor",
                run.cpu,
                floor.cpu,
                "floor (health, then a group-committed fdatasync)",
            ),
        ] {
            rows.push(SummaryRow::timed(
                format!("(b) {figure}, {clients} clients (process)"),
                (measured, baseline),
                baseline_name,
                "",
                None,
            ));
        }
        // Of it, the threads that make records durable (the audit writer and tree; the floor's
        // group commit): most of their time is the kernel's, in `fdatasync`.
        rows.push(SummaryRow::timed(
            format!("(b) CPU per run in the audit writer and tree, {clients} clients (threads)"),
            (run.durable_cpu, floor.durable_cpu),
            "the floor's group commit",
            "",
            None,
        ));
        let (runs, durable) = (self.run_loaded.throughput(), self.durable_loaded.throughput());
        rows.push(SummaryRow {
            figure: format!("(b) echo runs/s against the durable floor, {clients} clients"),
            measured: format_rate(runs),
            baseline: format!("{} floor", format_rate(durable)),
            ratio: format_ratio(runs / durable.max(f64::MIN_POSITIVE)),
            goal: "",
            met: None,
        });
        // Whether the CPUs had anything to run at all: a phase whose clients all wait for a sync
        // leaves them idle, and then runs/s is bound by the sync rather than by CPU per run.
        rows.push(SummaryRow {
            figure: format!("(b) CPUs idle while runs load them, {clients} clients (machine)"),
            measured: format_idle(&self.run_loaded.work),
            baseline: format!(
                "{} health, {} floor",
                format_idle(&self.health_loaded.work),
                format_idle(&self.durable_loaded.work)
            ),
            ratio: String::new(),
            goal: "",
            met: None,
        });
        rows.push(SummaryRow {
            figure: format!("(b) context switches per run, {clients} clients (process)"),
            measured: format!("{:.2}", run.switches),
            baseline: format!("{:.2} health", health.switches),
            ratio: format_ratio(run.switches / health.switches.max(0.01)),
            goal: "",
            met: None,
        });
        let (run, health) = (self.run_single.per_request(), self.health_single.per_request());
        rows.push(SummaryRow {
            figure: "(b) heap allocations per run, 1 client (process)".into(),
            measured: format!("{:.0} ({} B)", run.allocations, format_count(run.allocated_bytes as u64)),
            baseline: format!("{:.0} health ({} B)", health.allocations, format_count(health.allocated_bytes as u64)),
            ratio: format_ratio(run.allocations / health.allocations.max(1.0)),
            goal: "≤ 120",
            met: Some(run.allocations <= ALLOCATIONS_PER_RUN_GOAL),
        });
        rows
    }

    /// The line under the text table: how the audit log grouped the runs of the loaded phase.
    pub(super) fn audit_summary(&self, table: &mut String) {
        let run = &self.run_loaded;
        let _ = writeln!(
            table,
            "(b) audit at {} clients: {} runs in {} fsyncs / {} batches ({:.1} runs per fsync); the writer's \
             fdatasync: mean {} at {} clients, {} at 1 client; a journal write + fdatasync alone: p50 {}, p99 {} \
             (an append + fdatasync: p50 {})",
            run.clients,
            format_count(run.latency.len() as u64),
            format_count(run.audit.fsyncs),
            format_count(run.audit.batches),
            run.latency.len() as f64 / run.audit.fsyncs.max(1) as f64,
            format_duration(run.audit.mean_sync()),
            run.clients,
            format_duration(self.run_single.audit.mean_sync()),
            format_duration(self.fdatasync.p50()),
            format_duration(self.fdatasync.p99()),
            format_duration(self.append_fdatasync.p50())
        );
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let window = self.run_loaded.window.as_secs_f64();
        let _ = writeln!(text, "\n### (b) `POST /v1/actions/echo/run` over loopback HTTP\n");
        let _ = writeln!(
            text,
            "Reproduce: `{}`. Each phase: the clients send the same request back to back for a warm-up, then \
             {window:.1} s measured (requests sent and answered inside the window); the {} client phases in {LOAD_ROUNDS} \
             rounds of health, run and the durable floor in turn (the order rotated each round), each round's window an \
             equal share of that and the rounds pooled, so drift on the machine lands on every side of their ratios. \
             The durable floor is what any run made durable before its answer cannot do without at as many clients: \
             each client sends `GET /v1/health`, then hands an append of {FDATASYNC_APPEND_BYTES} B to a thread of \
             this process that takes every append queued, writes them with one `pwrite` over a file of zeros written \
             beforehand on the audit log's filesystem, syncs it once and only then acknowledges each (the audit \
             writer's group commit with nothing else to do: no sealing, no daily file, no tree); its rows' fsync \
             columns are that thread's. The daemon's state is opened on \
             a temporary home with the audit log on disk (one fdatasync of its journal per group commit) and served by the \
             daemon's own accept loop on its own tokio runtime; the clients (hyper's connection-level HTTP/1.1 \
             client, one keep-alive connection each) run on another runtime in the same process, on the same \
             CPUs. After the phases the audit log held {} records and verified, one per answered run. CPU per request \
             is the process's CPU time (`getrusage`: clients, daemon and audit writer) over the window divided by \
             the requests answered in it; context switches per request (`getrusage`'s voluntary and involuntary \
             ones, all threads) and allocations per request (the benchmark's global allocator counts them) the \
             same way. They count work instead of timing it, so they move with the run path and not with this \
             VM's speed. CPUs idle is the whole machine's (`/proc/stat`'s idle and iowait over the window): time in \
             which no CPU had anything to run, as when every client waits for a sync; a phase with idle CPUs is \
             bound by that wait, not by its CPU per request. Of it, the durable threads' is the CPU time of the \
             threads that make records durable (the audit writer and tree; the floor's group commit), read from \
             each thread's `/proc/self/task/<tid>/schedstat`: the share of a run that is `fdatasync` and its \
             hand-offs, most of it the kernel's. The mean fdatasync is the audit writer's \
             own, timed inside the daemon around each sync of the phase: what a durable run waits for, against \
             the floor below measured on an idle daemon.\n",
            command_line,
            self.run_loaded.clients,
            format_count(self.audit_records)
        );
        let (floor, durable) = (&self.fdatasync, &self.durable_floor);
        let _ = writeln!(
            text,
            "Disk floor on the same filesystem, idle daemon: {} writes of {FDATASYNC_APPEND_BYTES} B over a \
             file of zeros written beforehand (as the audit journal is), each followed by fdatasync, back to back: \
             p50 {}, p99 {}, mean {}; the same lines appended to a file instead (as the daily log file grows), p50 \
             {}, p99 {}. The one-client floor: {} rounds of a `GET /v1/health` then such a journal write and \
             fdatasync, one after the other (what a durable run cannot do without; a sync after a pause costs more \
             than one right after another): p50 {}, p99 {} (the sum of the two p50s alone: {}).\n",
            format_count(floor.len() as u64),
            format_duration(floor.p50()),
            format_duration(floor.p99()),
            format_duration(floor.mean()),
            format_duration(self.append_fdatasync.p50()),
            format_duration(self.append_fdatasync.p99()),
            format_count(durable.len() as u64),
            format_duration(durable.p50()),
            format_duration(durable.p99()),
            format_duration(self.health_single.latency.p50() + floor.p50())
        );
        let _ = writeln!(
            text,
            "| request | clients | answered in window | throughput | p50 | p99 | mean | max | audit fsyncs | \
             audit batches | runs per fsync | mean fdatasync (writer) | CPU per request | of it, durable threads | \
             context switches per request | allocations per request | CPUs idle (machine) |"
        );
        let _ = writeln!(text, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (label, phase, audited) in [
            ("`GET /v1/health`", &self.health_loaded, false),
            ("`POST /v1/actions/echo/run`", &self.run_loaded, true),
            ("`GET /v1/health`, then a group-committed fdatasync (the durable floor)", &self.durable_loaded, true),
            ("`GET /v1/health`", &self.health_single, false),
            ("`POST /v1/actions/echo/run`", &self.run_single, true),
        ] {
            let (fsyncs, batches) = (format_count(phase.audit.fsyncs), format_count(phase.audit.batches));
            let work = phase.per_request();
            let (per_fsync, mean_sync) = if audited {
                (
                    format!("{:.1}", phase.latency.len() as f64 / phase.audit.fsyncs.max(1) as f64),
                    format_duration(phase.audit.mean_sync()),
                )
            } else {
                (String::new(), String::new())
            };
            let _ = writeln!(
                text,
                "| {label} | {} | {} | {} | {} | {} | {} | {} | {fsyncs} | {batches} | {per_fsync} | {mean_sync} | {} | \
                 {} | {:.2} | {:.0} | {} |",
                phase.clients,
                format_count(phase.latency.len() as u64),
                format_rate(phase.throughput()),
                format_duration(phase.latency.p50()),
                format_duration(phase.latency.p99()),
                format_duration(phase.latency.mean()),
                format_duration(phase.latency.max()),
                format_duration(work.cpu),
                if audited { format_duration(work.durable_cpu) } else { String::new() },
                work.switches,
                work.allocations,
                format_idle(&phase.work)
            );
        }
    }
}

/// The share of a phase's time in which no CPU of the machine had anything to run (`/proc/stat`'s
/// idle and iowait), or `unknown`.
fn format_idle(work: &work::Work) -> String {
    super::machine::format_share(work.machine.idle_share())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor's file: every line an append made durable, the rest still the zeros written
    /// beforehand.
    fn floor_file(dir: &Path, prefix: &str) -> Vec<u8> {
        let entries = std::fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path());
        let files: Vec<_> =
            entries.filter(|path| path.file_name().unwrap().to_string_lossy().starts_with(prefix)).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        std::fs::read(&files[0]).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_group_commit_floor_acknowledges_every_append_written_and_takes_them_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let commit = GroupCommit::start(dir.path()).unwrap();
        let (clients, appends_each) = (16, 40);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let appender = commit.appender();
            tasks.spawn(async move {
                for _ in 0..appends_each {
                    appender.append().await.unwrap();
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let appended = clients * appends_each;
        let counts = commit.counts();
        assert!(
            (1..=appended as u64).contains(&counts.batches) && counts.fsyncs == counts.batches,
            "{appended} appends in {} batches",
            counts.batches
        );
        let bytes = floor_file(dir.path(), "group-commit-floor-");
        let written = appended * FDATASYNC_APPEND_BYTES;
        assert_eq!(bytes.len() as u64, FLOOR_FILE_BYTES, "written over the file, never past it");
        let line = &bytes[..FDATASYNC_APPEND_BYTES];
        assert!(line[..FDATASYNC_APPEND_BYTES - 1].iter().all(|&b| b == b'x') && line.ends_with(b"\n"));
        assert!(bytes[..written].chunks(FDATASYNC_APPEND_BYTES).all(|chunk| chunk == line), "one line per append");
        assert!(bytes[written..].iter().all(|&b| b == 0), "nothing beyond the appends");
        commit.stop().unwrap();
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "the floor's file is removed");
    }

    #[test]
    fn floor_writes_of_several_lines_start_over_at_the_file_start_rather_than_grow_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FloorLog::create(dir.path(), "floor-", FloorWrite::Overwrite).unwrap();
        let lines_per_write = 7;
        let bytes_per_write = (lines_per_write * FDATASYNC_APPEND_BYTES) as u64;
        let writes = FLOOR_FILE_BYTES / bytes_per_write + 2;
        for _ in 0..writes {
            log.write_and_sync(lines_per_write).unwrap();
        }
        assert_eq!(log.overwrite_at, Some(2 * bytes_per_write), "two writes after starting over");
        assert_eq!(floor_file(dir.path(), "floor-").len() as u64, FLOOR_FILE_BYTES);
    }
}
