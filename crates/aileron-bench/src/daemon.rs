//! A daemon under measurement: the product's state and accept loop on a loopback port, in this
//! process, as (b), (c), (d), (h) and (i) start it, and the client that drives its API.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::platform::telemetry::Telemetry;
use aileron::surfaces::daemon::{AppState, StateOptions};
use anyhow::{Context, bail};
use bytes::Bytes;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::http::AuditCounts;

/// The daemon's state served on a loopback port by its own tokio runtime (the default worker
/// count, as `aileron daemon` gets), so its scheduler is not shared with the load generator.
pub(super) struct BenchDaemon {
    pub(super) state: Arc<AppState>,
    base_url: String,
    pub(super) token: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    executor: Executor,
}

/// The daemon's runtime, shut down without waiting when dropped: a `Runtime` dropped inside the
/// benchmark's own (the daemon left behind by an error's early return) panics over the error.
struct Executor(Option<tokio::runtime::Runtime>);

impl std::ops::Deref for Executor {
    type Target = tokio::runtime::Runtime;

    fn deref(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("the runtime is there until the executor is dropped")
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl BenchDaemon {
    /// Opens the state on `home` and starts serving; also returns how long opening took.
    pub(super) fn start(home: &Home) -> anyhow::Result<(BenchDaemon, Duration)> {
        BenchDaemon::start_traced(home, Telemetry::disabled())
    }

    /// [`BenchDaemon::start`] with `telemetry` for the daemon's spans.
    pub(super) fn start_traced(home: &Home, telemetry: Telemetry) -> anyhow::Result<(BenchDaemon, Duration)> {
        // The daemon that (b) and (d) serve in the benchmark's own process allocates as
        // `aileron daemon run` does: mimalloc returning freed memory at once (docs/decisions/0004-actions-and-runs.md, "Allocator").
        aileron::platform::process::return_freed_memory_at_once();
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).context("binding a loopback port")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let token = aileron::platform::secret::random_token();
        let mut options = StateOptions::new(token.as_str().into());
        options.listen_port = addr.port();
        options.telemetry = telemetry;
        let opening = Instant::now();
        let state = AppState::open(home.clone(), options).context("opening the daemon's state")?;
        let open_time = opening.elapsed();
        let executor = Executor(Some(
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("aileron-bench-daemon")
                .build()
                .context("starting the daemon's tokio runtime")?,
        ));
        {
            // As `aileron daemon run` does once its state is open.
            let _entered = executor.enter();
            aileron::runner::warm_up(&state.services);
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = aileron::surfaces::daemon::app(state.clone());
        // The product's own accept loop (header-read timeout, connection cap, draining), as
        // `aileron daemon run` serves.
        let server = executor.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            aileron::surfaces::daemon::connections::serve(
                listener,
                app,
                aileron::surfaces::daemon::connections::Peers::OwnUser,
                async {
                    let _ = stopped.await;
                },
            )
            .await
        });
        let daemon = BenchDaemon { state, base_url: format!("http://{addr}"), token, stop, server, executor };
        Ok((daemon, open_time))
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The `Authorization` header value of the admin token.
    pub(super) fn authorization(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// One request with the admin token; the body bytes are returned unparsed.
    pub(super) async fn request(
        &self,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut builder = client.request(method, self.url(path)).bearer_auth(&self.token);
        if let Some(body) = body {
            builder = builder.json(body);
        }
        let response = builder.send().await.with_context(|| format!("requesting {path}"))?;
        let status = response.status();
        let bytes = response.bytes().await.with_context(|| format!("reading the answer to {path}"))?;
        Ok((status, bytes))
    }

    /// A request that must answer `expected`; returns the parsed body.
    pub(super) async fn expect(
        &self,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        body: Option<&Value>,
        expected: StatusCode,
    ) -> anyhow::Result<Value> {
        let (status, bytes) = self.request(client, method, path, body).await?;
        if status != expected {
            bail!("{path} answered {status} (expected {expected}): {}", String::from_utf8_lossy(&bytes));
        }
        serde_json::from_slice(&bytes).with_context(|| format!("{path} answered something other than JSON"))
    }

    /// Installs a connector package through preview + install, as `aileron connector install`
    /// does; returns its content hash.
    pub(super) async fn install_connector(
        &self,
        client: &reqwest::Client,
        package: &Path,
        reference: &str,
        wasm: &[u8],
        manifest: &str,
    ) -> anyhow::Result<String> {
        let installed = self.install_answer(client, package, reference, wasm, manifest).await?;
        installed["hash"].as_str().map(str::to_string).context("the install answer has no hash")
    }

    /// [`BenchDaemon::install_connector`], returning the daemon's whole answer.
    pub(super) async fn install_answer(
        &self,
        client: &reqwest::Client,
        package: &Path,
        reference: &str,
        wasm: &[u8],
        manifest: &str,
    ) -> anyhow::Result<Value> {
        std::fs::create_dir_all(package)?;
        std::fs::write(package.join("connector.wasm"), wasm)?;
        std::fs::write(package.join("manifest.toml"), manifest)?;
        let preview = json!({ "source": package, "reference": reference });
        let preview =
            self.expect(client, Method::POST, "/v1/connectors/preview", Some(&preview), StatusCode::OK).await?;
        let install = json!({ "source": package, "reference": reference, "expected_hash": preview["hash"], "consent": "flag", "allow_unsigned": true });
        self.expect(client, Method::POST, "/v1/connectors/install", Some(&install), StatusCode::CREATED).await
    }

    pub(super) async fn add_action(
        &self,
        client: &reqwest::Client,
        file_name: &str,
        content: &str,
    ) -> anyhow::Result<()> {
        let body = json!({ "file_name": file_name, "content": content });
        self.expect(client, Method::POST, "/v1/actions/install", Some(&body), StatusCode::CREATED).await.map(|_| ())
    }

    /// The echo connector installed from `package` (a directory it writes) and the `echo` action
    /// pinned to it: what most parts measure runs of.
    pub(super) async fn add_echo_action(&self, client: &reqwest::Client, package: &Path) -> anyhow::Result<()> {
        use super::{ECHO_ACTION, ECHO_MANIFEST, ECHO_WASM, echo_reference};
        let hash = self.install_connector(client, package, &echo_reference(), ECHO_WASM, ECHO_MANIFEST).await?;
        self.add_action(client, "echo.md", &ECHO_ACTION.replace("{{CONNECTOR_HASH}}", &hash)).await
    }

    /// `runs` timed runs of the `echo` action, one at a time, after `warmup` untimed ones.
    pub(super) async fn echo_runs(
        &self,
        client: &reqwest::Client,
        runs: usize,
        warmup: usize,
    ) -> anyhow::Result<super::figures::Distribution> {
        Ok(self.echo_runs_with_overhead(client, runs, warmup).await?.0)
    }

    /// [`BenchDaemon::echo_runs`], and what each answer's `x-aileron-overhead-us` said (the
    /// daemon's own time for the run).
    pub(super) async fn echo_runs_with_overhead(
        &self,
        client: &reqwest::Client,
        runs: usize,
        warmup: usize,
    ) -> anyhow::Result<(super::figures::Distribution, super::figures::Distribution)> {
        let (mut timed, mut overheads) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for sample in 0..runs + warmup {
            let (wall, overhead) = self.echo_run(client, sample).await?;
            if sample >= warmup {
                timed.push(wall);
                overheads.push(overhead);
            }
        }
        Ok((super::figures::Distribution::new(timed), super::figures::Distribution::new(overheads)))
    }

    /// One run of the `echo` action (its text naming `sample`): the caller's time and what the
    /// answer's `x-aileron-overhead-us` said.
    pub(super) async fn echo_run(
        &self,
        client: &reqwest::Client,
        sample: usize,
    ) -> anyhow::Result<(Duration, Duration)> {
        let body = json!({ "args": { "text": format!("run {sample}") } });
        let at = Instant::now();
        let response = client
            .post(self.url("/v1/actions/echo/run"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .context("running echo")?;
        let status = response.status();
        let overhead = response
            .headers()
            .get("x-aileron-overhead-us")
            .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
            .context("a run answer without x-aileron-overhead-us")?;
        let bytes = response.bytes().await.context("reading a run answer")?;
        if status != StatusCode::OK {
            bail!("a run of echo answered {status}: {}", String::from_utf8_lossy(&bytes));
        }
        Ok((at.elapsed(), Duration::from_micros(overhead)))
    }

    pub(super) fn audit_counts(&self) -> AuditCounts {
        let audit = &self.state.services.audit;
        AuditCounts { fsyncs: audit.fsync_count(), batches: audit.batch_count(), sync_time: audit.sync_time() }
    }

    /// Stops serving, waits for in-flight requests and closes the state, so that the next daemon
    /// on the same home can take the audit log's writer lock.
    pub(super) async fn stop(self) -> anyhow::Result<()> {
        let BenchDaemon { state, stop, server, executor, .. } = self;
        let _ = stop.send(());
        server.await.context("the daemon task panicked")?.context("serving HTTP")?;
        let deadline = Instant::now() + Duration::from_secs(10);
        // The start-up warm-up holds the services until it has loaded every pinned module.
        while Arc::strong_count(&state) > 1 || Arc::strong_count(&state.services) > 1 {
            if Instant::now() > deadline {
                bail!("the daemon state is still in use 10 s after the server stopped");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Dropping the state joins the audit writer and the epoch ticker threads.
        tokio::task::block_in_place(move || drop(state));
        drop(executor);
        Ok(())
    }
}

/// A client with one keep-alive connection; a daemon that stops answering fails the benchmark
/// after [`REQUEST_TIMEOUT`] instead of hanging it.
pub(super) fn http_client() -> anyhow::Result<reqwest::Client> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(1).timeout(REQUEST_TIMEOUT).build()?;
    Ok(client)
}

pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
