//! The daemon: shared state, the axum app (`fn app`), and the process lifecycle (`daemon.json`,
//! the single-instance flock, graceful shutdown that finishes in-flight runs).

pub mod api;
pub mod auth;
pub mod connections;
pub mod mcp_mount;
pub mod session_network;

pub mod web;

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::Arc;

use anyhow::{Context, bail};
use axum::Router;

use crate::platform::home::{Home, write_atomic};
use crate::platform::secret::Secret;
use crate::services::{ServiceOptions, Services};
use crate::stores::bindings::CredentialSource;

use crate::platform::process::{DaemonInfo, VERSION};

/// Everything a request handler can reach: the workflows' [`Services`] (through `Deref`), plus
/// what only the HTTP layer uses.
pub struct AppState {
    pub services: Arc<Services>,
    /// The transparent LLM proxy (its own client and upstreams).
    pub gateway: Arc<crate::dataplane::gateway::Gateway>,
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// Flips to true when shutdown starts; long-lived streams (SSE) end on it.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// `AILERON_CONNECT_TO`: destinations launched agents' proxies dial at fixed addresses.
    pub connect_to: Arc<crate::dataplane::agent_egress::ConnectTo>,
}

/// Knobs for building the state; tests override the credential source and port.
pub struct StateOptions {
    pub admin_token: Secret,
    /// `None`: the vault's bindings.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    pub listen_port: u16,
    pub retry_delays: [std::time::Duration; 3],
    /// `(anthropic, openai)` upstream bases for the gateway; `None` = from the environment.
    pub gateway_upstreams: Option<(String, String)>,
    /// `serve` passes `telemetry::init`'s; tests build theirs from an explicit config.
    pub telemetry: crate::platform::telemetry::Telemetry,
    /// `None`: [`crate::dataplane::gateway::MAX_CONCURRENT_REQUESTS`].
    pub gateway_max_concurrent: Option<usize>,
    /// The `aileron` executable that runs spawned programs (`__spawn`); `None` = this process's.
    pub spawn_helper: Option<std::path::PathBuf>,
    /// The home `~/` means in spawn manifests; `None` = `$HOME`.
    pub spawn_user_home: Option<std::path::PathBuf>,
    /// `AILERON_CONNECT_TO`, parsed (empty: every name is resolved).
    pub connect_to: crate::dataplane::agent_egress::ConnectTo,
}

impl StateOptions {
    pub fn new(admin_token: Secret) -> StateOptions {
        StateOptions {
            admin_token,
            credentials: None,
            listen_port: 0,
            retry_delays: crate::runner::RETRY_DELAYS,
            gateway_upstreams: None,
            telemetry: crate::platform::telemetry::Telemetry::disabled(),
            gateway_max_concurrent: None,
            spawn_helper: None,
            spawn_user_home: None,
            connect_to: Default::default(),
        }
    }
}

impl AppState {
    pub fn open(home: Home, options: StateOptions) -> anyhow::Result<Arc<AppState>> {
        let services = Services::open(
            home,
            ServiceOptions {
                admin_token: options.admin_token,
                credentials: options.credentials,
                listen_port: options.listen_port,
                retry_delays: options.retry_delays,
                telemetry: options.telemetry,
                spawn_helper: options.spawn_helper,
                spawn_user_home: options.spawn_user_home,
            },
        )?;
        let gateway = match options.gateway_upstreams {
            Some((anthropic, openai)) => {
                crate::dataplane::gateway::Gateway::new(anthropic, openai, services.vault.clone())
            }
            None => crate::dataplane::gateway::Gateway::from_env(services.vault.clone()),
        }
        .context("building the LLM gateway client")?
        .with_max_concurrent(
            options.gateway_max_concurrent.unwrap_or(crate::dataplane::gateway::MAX_CONCURRENT_REQUESTS),
        );
        let (shutdown, _) = tokio::sync::watch::channel(false);
        Ok(Arc::new(AppState {
            services,
            gateway: Arc::new(gateway),
            started_at: chrono::Utc::now(),
            shutdown,
            connect_to: Arc::new(options.connect_to),
        }))
    }
}

/// The whole HTTP surface. Tests drive it with `oneshot`.
pub fn app(state: Arc<AppState>) -> Surface {
    // One `Router::layer` call: each wraps every route's service in a box of its own, which every
    // request then copies (11 allocations a request per layer, BENCHMARKS.md, issue 49).
    let middleware = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::admit))
        .layer(axum::extract::DefaultBodyLimit::max(crate::wire::MAX_API_BODY_BYTES));
    let router = api::routes(&state).layer(middleware).with_state(state.clone());
    Surface { state, router, session: None }
}

/// [`app`] as a launched agent's session serves it on the API listener in the agent's network
/// namespace: every gateway request of the agent's is recorded under its session before it goes
/// upstream ([`crate::dataplane::agent_egress::EgressSession::record_gateway_request`]).
pub fn app_in_session(state: Arc<AppState>, session: Arc<crate::dataplane::agent_egress::EgressSession>) -> Surface {
    Surface { session: Some(session), ..app(state) }
}

/// The daemon's service: a request on a gateway path ([`crate::dataplane::gateway::is_gateway_path`]) is
/// admitted ([`auth::admit_gateway`]: Host and Origin) and proxied before the router; every
/// other request goes through the router, its admission and its server span. The agent's LLM
/// traffic is the daemon's busiest and needs neither routing (its paths are a fixed list), a
/// token, nor a span (SPEC §11): axum's routing and the two middleware layers were 8 % of the
/// gateway's samples (BENCHMARKS.md, (f)).
#[derive(Clone)]
pub struct Surface {
    state: Arc<AppState>,
    router: Router,
    /// The launched agent's session whose namespace this surface serves ([`app_in_session`]).
    session: Option<Arc<crate::dataplane::agent_egress::EgressSession>>,
}

type SurfaceFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send>,
>;

impl<B> tower::Service<axum::http::Request<B>> for Surface
where
    B: axum::body::HttpBody<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future = SurfaceFuture;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        // Both are always ready (axum's router is).
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        use connections::{
            API_BODY_READ_TIMEOUT, BodyDeadline, DeadlineBody, GATEWAY_BODY_IDLE_TIMEOUT, GATEWAY_BODY_WAIT_BUDGET,
        };
        let gateway = crate::dataplane::gateway::is_gateway_path(request.method(), request.uri().path());
        // Every request body has a deadline (see `connections`): a stalled body is answered 408
        // with `Connection: close` instead of holding its connection. Responses (SSE streams,
        // the gateway's streamed answers) have none.
        let deadline = if gateway {
            BodyDeadline::Idle { quiet: GATEWAY_BODY_IDLE_TIMEOUT, budget: GATEWAY_BODY_WAIT_BUDGET }
        } else {
            BodyDeadline::Total(tokio::time::Instant::now() + API_BODY_READ_TIMEOUT)
        };
        let expired = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let provider =
            gateway.then(|| crate::dataplane::gateway::Provider::of_request(request.uri().path(), request.headers()));
        let mut request = request.map(|body| axum::body::Body::new(DeadlineBody::new(body, deadline, expired.clone())));
        // One box per request, each sized for its own future: an API request's is not sized for
        // the gateway's, much larger.
        if gateway {
            let state = self.state.clone();
            if let Some(session) = &self.session {
                request.extensions_mut().insert(crate::dataplane::gateway::FromSession(session.session_id.clone()));
            }
            // From a session's namespace: on record under the session before anything is sent.
            let recorded = self.session.clone().map(|session| {
                let upstream = match provider {
                    Some(crate::dataplane::gateway::Provider::OpenAi) => state.gateway.openai.clone(),
                    _ => state.gateway.anthropic.clone(),
                };
                let (method, path) = (request.method().to_string(), request.uri().path().to_string());
                async move { session.record_gateway_request(&method, &upstream, &path).await }
            });
            Box::pin(async move {
                if let Some(recorded) = recorded
                    && recorded.await.is_err()
                {
                    use crate::dataplane::gateway::Provider;
                    let provider = provider.unwrap_or(Provider::Anthropic);
                    let kind = if provider == Provider::OpenAi { "server_error" } else { "overloaded_error" };
                    let message = "Aileron could not record this request in the audit log, so it was not sent";
                    let refused = provider.error(axum::http::StatusCode::SERVICE_UNAVAILABLE, kind, message);
                    return Ok(refused);
                }
                Ok(timed_out(auth::admit_gateway(&state, request).await, &expired, provider))
            })
        } else {
            let answered = tower::Service::call(&mut self.router, request);
            Box::pin(async move { Ok(timed_out(answered.await?, &expired, None)) })
        }
    }
}

/// `response`, or 408 with `Connection: close` when the request's body did not arrive in time
/// (`expired`): in the provider's error shape for a gateway request, else the API's.
fn timed_out(
    response: axum::response::Response,
    expired: &std::sync::atomic::AtomicBool,
    provider: Option<crate::dataplane::gateway::Provider>,
) -> axum::response::Response {
    if !expired.load(std::sync::atomic::Ordering::Relaxed) {
        return response;
    }
    let message = "the request body did not arrive in time";
    let mut response = match provider {
        Some(provider) => provider.error(axum::http::StatusCode::REQUEST_TIMEOUT, "invalid_request_error", message),
        None => axum::response::IntoResponse::into_response(crate::wire::error::ApiError::new(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            message,
        )),
    };
    response.headers_mut().insert(axum::http::header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// A [`Surface`] per connection, so `axum::serve` takes it as it takes a router (the tests serve
/// it so).
impl<L: axum::serve::Listener> tower::Service<axum::serve::IncomingStream<'_, L>> for Surface {
    type Response = Surface;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Surface, std::convert::Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: axum::serve::IncomingStream<'_, L>) -> Self::Future {
        std::future::ready(Ok(self.clone()))
    }
}

/// Removes the temporary files an atomic rewrite left when a process was killed mid-write, in
/// every directory of the home written that way (the vault's among them: such a file may still
/// decrypt a secret the user removed). Run under the daemon's lock, so no write is in progress.
fn remove_stale_temporaries(home: &Home) {
    let store_entries = std::fs::read_dir(home.store_dir().join("connectors").join("sha256"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path());
    let index_dir = home.store_index().parent().map(std::path::Path::to_path_buf);
    let dirs = [home.root().to_path_buf(), home.actions_dir()].into_iter().chain(index_dir).chain(store_entries);
    for dir in dirs {
        for removed in crate::platform::home::remove_stale_temporaries(&dir) {
            log_line!("aileron daemon: removed {}, left by an interrupted write", removed.display());
        }
    }
}

/// How long a start waits for `daemon.lock` while no live daemon holds it.
const DAEMON_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Takes `daemon.lock`, exclusive, for the daemon's life. A live daemon's lock is refused at
/// once. Any other holder is waited for, up to [`DAEMON_LOCK_WAIT`]: a daemon that is dying (its
/// group leader exits first; the lock goes with its last thread, which may still be inside an
/// `fdatasync`), one starting that has not written `daemon.json` yet, or a client's probe
/// (`client::daemon_lock_is_held`), which holds it for an instant.
async fn take_daemon_lock(mut file: std::fs::File, home: &Home) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    let deadline = std::time::Instant::now() + DAEMON_LOCK_WAIT;
    loop {
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((returned, nix::errno::Errno::EWOULDBLOCK))
                if std::time::Instant::now() < deadline
                    && !crate::surfaces::client::a_live_daemon_holds_the_lock(home) =>
            {
                file = returned;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => bail!(
                "another daemon already holds {}\nhint: `aileron daemon status` shows it",
                home.daemon_lock().display()
            ),
            Err((_, errno)) => bail!(
                "locking {}: {errno}\nhint: the home's file system must support flock(2)",
                home.daemon_lock().display()
            ),
        }
    }
}

/// Runs the daemon in the foreground until SIGTERM/SIGINT, then drains in-flight requests.
pub async fn serve(home: Home) -> anyhow::Result<()> {
    crate::platform::process::return_freed_memory_at_once();
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(home.daemon_lock())
        .with_context(|| format!("opening {}", home.daemon_lock().display()))?;
    // `mode` applies to a new file only; one an older version left 0644 is made private too.
    let _ = lock_file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let lock = take_daemon_lock(lock_file, &home).await?;
    remove_stale_temporaries(&home);
    let listen: SocketAddr = match crate::platform::env::get(crate::platform::env::AILERON_LISTEN) {
        Some(addr) if !addr.is_empty() => addr.parse().with_context(|| format!("invalid AILERON_LISTEN `{addr}`"))?,
        _ => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    if !listen.ip().is_loopback() {
        bail!("AILERON_LISTEN must be a loopback address, got {listen}\nhint: use 127.0.0.1:<port>");
    }
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let token = Secret::random();
    let mut options = StateOptions::new(token.clone());
    if let Some(pairs) = crate::platform::env::get(crate::platform::env::AILERON_CONNECT_TO) {
        options.connect_to = crate::dataplane::agent_egress::parse_connect_to(&pairs).map_err(anyhow::Error::msg)?;
    }
    options.telemetry = crate::platform::telemetry::init(crate::platform::telemetry::DEFAULT_SERVICE_NAME, &home);
    let state = AppState::open(home.clone(), options)?;
    state.services.set_listen_port(addr.port());
    crate::workflows::approvals::resume_at_start(&state.services);
    // Entries that expired while the daemon was down end first, then the check keeps running.
    crate::workflows::approvals::expire_due(&state.services).await;
    tokio::spawn(crate::workflows::approvals::expire_in_background(state.services.clone(), state.shutdown.subscribe()));
    tokio::spawn(crate::workflows::notify::notify_in_background(state.services.clone(), state.shutdown.subscribe()));
    tokio::spawn(crate::workflows::policy::reload_in_background(state.services.clone(), state.shutdown.subscribe()));
    crate::runner::warm_up(&state.services);
    let info = DaemonInfo {
        url: format!("http://{addr}"),
        pid: std::process::id(),
        version: VERSION.to_string(),
        started_at: state.started_at.to_rfc3339(),
        token,
    };
    write_atomic(&home.daemon_json(), &serde_json::to_vec_pretty(&info)?, 0o600)?;
    log_line!("aileron daemon {VERSION} listening on {} (pid {})", info.url, info.pid);
    check_audit_chain_in_background(&state);
    let control =
        session_network::listen(&home).with_context(|| format!("binding {}", home.agent_network_socket().display()))?;
    tokio::spawn(session_network::serve_control(control, state.clone()));

    let shutdown_state = state.clone();
    let result = connections::serve(listener, app(state.clone()), connections::Peers::OwnUser, async move {
        wait_for_signal().await;
        log_line!("aileron daemon: shutting down; finishing in-flight requests");
        shutdown_state.shutdown.send_replace(true);
    })
    .await;
    let _ = std::fs::remove_file(home.daemon_json());
    let _ = std::fs::remove_file(home.agent_network_socket());
    state.services.audit.flush().await;
    // Exports the last batch of spans; the exporter blocks, so off the async workers.
    let telemetry = state.services.telemetry.clone();
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    drop(lock);
    log_line!("aileron daemon: stopped");
    result.context("serving HTTP")
}

/// Verifies the whole audit chain once the daemon is serving, without delaying its start. At
/// open only the log's last line is read (a damaged one refuses the start: the head cannot be
/// found); a record damaged before it is found here and logged, and `aileron status` (which asks
/// `GET /v1/audit/verify`) shows it. The daemon keeps running: the damage is in records already
/// written, the records it appends still chain to the last one, and refusing would lock the user
/// out of approvals over an investigation. The verification is remembered
/// (`audit_log::verify`), so the console's and `status`'s next ones only re-hash these bytes.
/// It waits [`AUDIT_CHECK_DELAY`] first: the first seconds belong to the warm-up and an agent's
/// first calls (a day of 100,000 records is about 0.4 s of a core to verify).
fn check_audit_chain_in_background(state: &Arc<AppState>) {
    let audit = state.services.audit.clone();
    tokio::spawn(async move {
        tokio::time::sleep(AUDIT_CHECK_DELAY).await;
        let checked = tokio::task::spawn_blocking(move || audit.verify()).await;
        if let Ok(Err(problem)) = checked {
            log_line!(
                "aileron: error: the audit chain is broken: {problem}\nhint: {}; `aileron audit verify` names the record; \
                 the daemon keeps appending after the log's last record",
                problem.hint()
            );
        }
    });
}

/// How long after start the daemon verifies the whole audit chain.
const AUDIT_CHECK_DELAY: std::time::Duration = std::time::Duration::from_secs(3);

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
