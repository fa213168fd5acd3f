//! The daemon: shared state, the axum app (`fn app`), and the process lifecycle (`daemon.json`,
//! the single-instance flock, graceful shutdown that finishes in-flight runs).

pub mod api;
pub mod auth;
pub mod credentials;
pub mod error;
pub mod trust;
pub mod web;

use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use aileron_sandbox::{Runtime, RuntimeConfig};
use anyhow::{Context, bail};
use axum::Router;

use crate::actions::ActionRegistry;
use crate::approvals::ApprovalQueue;
use crate::audit_log::{AuditConfig, AuditLog};
use crate::bindings::{Bindings, CredentialSource};
use crate::oauth::OAuthFlows;
use crate::vault::Vault;
use crate::home::{Home, write_atomic};
use crate::store::Store;
use auth::TokenRegistry;

// Leaf items every layer needs; re-exported here, where callers have always found them.
pub use crate::process::{DaemonInfo, VERSION, install_crypto_provider, no_delay};

/// Everything a request handler can reach.
pub struct AppState {
    pub home: Home,
    pub tokens: TokenRegistry,
    pub audit: Arc<AuditLog>,
    pub store: Store,
    pub actions: ActionRegistry,
    pub approvals: ApprovalQueue,
    /// Approved entries found in the journal at start-up, executed once `resume_approvals` runs.
    pending_resume: std::sync::Mutex<Vec<aileron_core::approval::ApprovalId>>,
    /// Entries found running at start-up (now failed); audited by `resume_approvals`.
    pending_recovered: std::sync::Mutex<Vec<aileron_core::approval::ApprovalId>>,
    pub runtime: Arc<Runtime>,
    /// The encrypted vault (`secrets.json`); starts locked.
    pub vault: Arc<Vault>,
    /// Credential bindings, stored in the vault.
    pub bindings: Arc<Bindings>,
    /// Where egress resolves credentials: `bindings`, unless a test substitutes its own.
    pub credentials: Arc<dyn CredentialSource>,
    /// Pending OAuth2 authorizations and the client that refreshes tokens.
    pub oauth: Arc<OAuthFlows>,
    /// The transparent LLM proxy (its own client and upstreams).
    pub gateway: crate::gateway::Gateway,
    /// Back-off between retries of retriable failures (SPEC §9: 1 s, 2 s, 4 s).
    pub retry_delays: [std::time::Duration; 3],
    /// Client for connector egress: no redirects are ever followed (SPEC §4.2).
    pub egress_client: reqwest::Client,
    pub started_at: chrono::DateTime<chrono::Utc>,
    listen_port: AtomicU16,
    /// Flips to true when shutdown starts; long-lived streams (SSE) end on it.
    pub shutdown: tokio::sync::watch::Sender<bool>,
    /// Traces (off unless `AILERON_OTEL_ENABLED`); flushed by `serve` at exit.
    pub telemetry: crate::telemetry::Telemetry,
}

/// Knobs for building the state; tests override the credential source and port.
pub struct StateOptions {
    pub admin_token: String,
    /// `None`: the vault's bindings.
    pub credentials: Option<Arc<dyn CredentialSource>>,
    pub listen_port: u16,
    pub retry_delays: [std::time::Duration; 3],
    /// `(anthropic, openai)` upstream bases for the gateway; `None` = from the environment.
    pub gateway_upstreams: Option<(String, String)>,
    /// `serve` passes `telemetry::init`'s; tests build theirs from an explicit config.
    pub telemetry: crate::telemetry::Telemetry,
    /// `None`: [`crate::gateway::MAX_CONCURRENT_REQUESTS`].
    pub gateway_max_concurrent: Option<usize>,
}

impl StateOptions {
    pub fn new(admin_token: String) -> StateOptions {
        StateOptions {
            admin_token,
            credentials: None,
            listen_port: 0,
            retry_delays: crate::runner::RETRY_DELAYS,
            gateway_upstreams: None,
            telemetry: crate::telemetry::Telemetry::disabled(),
            gateway_max_concurrent: None,
        }
    }
}

impl AppState {
    /// What a step's egress hook needs, and nothing more of the daemon.
    pub fn egress_services(&self) -> crate::egress::EgressServices {
        crate::egress::EgressServices {
            credentials: self.credentials.clone(),
            oauth: self.oauth.clone(),
            client: self.egress_client.clone(),
            audit: self.audit.clone(),
        }
    }

    pub fn open(home: Home, options: StateOptions) -> anyhow::Result<Arc<AppState>> {
        install_crypto_provider();
        let audit = AuditLog::open(AuditConfig { dir: home.audit_parent() }).context("opening the audit log")?;
        let store = Store::open(home.store_dir()).context("opening the connector store")?;
        let actions = ActionRegistry::load(&home.actions_dir(), &home.action_state())
            .with_context(|| format!("loading actions from {}", home.actions_dir().display()))?;
        let (approvals, recovery) =
            ApprovalQueue::open(&home.approvals_journal()).context("replaying the approval journal")?;
        for id in &recovery.recovered {
            eprintln!("aileron daemon: approval {id} was running when the daemon stopped; marked failed, not re-run");
        }
        let runtime = Runtime::new(RuntimeConfig { cache_dir: Some(home.cache_dir()), ..RuntimeConfig::default() }).context("starting wasmtime")?;
        let egress_client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(crate::egress::PublicOnlyResolver))
            // Through a proxy from the environment the connection would go to the proxy, which
            // resolves the name itself: the address checked would not be the address reached.
            .no_proxy()
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .context("building the egress HTTP client")?;
        let (shutdown, _) = tokio::sync::watch::channel(false);
        let vault = Arc::new(Vault::open(&home.secrets()).map_err(|error| {
            anyhow::anyhow!("opening the vault: {error}\nhint: {}", error.hint())
        })?);
        let bindings = Arc::new(Bindings::new(vault.clone()));
        let credentials = options.credentials.unwrap_or_else(|| bindings.clone());
        Ok(Arc::new(AppState {
            home,
            tokens: TokenRegistry::new(options.admin_token),
            audit: Arc::new(audit),
            store,
            actions,
            approvals,
            pending_resume: std::sync::Mutex::new(recovery.to_resume),
            pending_recovered: std::sync::Mutex::new(recovery.recovered),
            runtime: Arc::new(runtime),
            vault: vault.clone(),
            bindings,
            credentials,
            oauth: Arc::new(OAuthFlows::new().context("building the OAuth client")?),
            gateway: match options.gateway_upstreams {
                Some((anthropic, openai)) => crate::gateway::Gateway::new(anthropic, openai, vault.clone()),
                None => crate::gateway::Gateway::from_env(vault.clone()),
            }
            .context("building the LLM gateway client")?
            .with_max_concurrent(options.gateway_max_concurrent.unwrap_or(crate::gateway::MAX_CONCURRENT_REQUESTS)),
            retry_delays: options.retry_delays,
            egress_client,
            started_at: chrono::Utc::now(),
            listen_port: AtomicU16::new(options.listen_port),
            shutdown,
            telemetry: options.telemetry,
        }))
    }

    pub fn listen_port(&self) -> u16 {
        self.listen_port.load(Ordering::Relaxed)
    }

    pub fn set_listen_port(&self, port: u16) {
        self.listen_port.store(port, Ordering::Relaxed);
    }

    /// `http://127.0.0.1:<port>`: the origin of the web page and of review URLs.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.listen_port())
    }

    /// Executes, once each, the approved entries the journal held at start-up, and audits the
    /// entries that were running when the daemon died (failed, never re-run).
    pub fn resume_approvals(self: &Arc<Self>) {
        let recovered = std::mem::take(&mut *self.pending_recovered.lock().expect("recovered list poisoned"));
        for id in recovered {
            tokio::spawn(crate::runner::audit_recovered(self.clone(), id));
        }
        let ids = std::mem::take(&mut *self.pending_resume.lock().expect("resume list poisoned"));
        for id in ids {
            tokio::spawn(crate::runner::execute_approved(self.clone(), id));
        }
    }
}


/// The whole HTTP surface. Tests drive it with `oneshot`.
pub fn app(state: Arc<AppState>) -> Router {
    api::routes(state.clone())
        .merge(credentials::routes())
        .merge(trust::routes())
        .merge(crate::gateway::routes())
        .merge(crate::mcp::http::routes(&state))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::admit))
        // Outermost, so refused requests get their server span too.
        .layer(axum::middleware::from_fn_with_state(state.telemetry.clone(), crate::telemetry::http::server_span))
        .with_state(state)
}


/// Runs the daemon in the foreground until SIGTERM/SIGINT, then drains in-flight requests.
pub async fn serve(home: Home) -> anyhow::Result<()> {
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(home.daemon_lock())
        .with_context(|| format!("opening {}", home.daemon_lock().display()))?;
    // `mode` applies to a new file only; one an older version left 0644 is made private too.
    let _ = lock_file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|_| {
        anyhow::anyhow!("another daemon already holds {}\nhint: `aileron daemon status` shows it", home.daemon_lock().display())
    })?;
    let listen: SocketAddr = match crate::env::get(crate::env::AILERON_LISTEN) {
        Some(addr) if !addr.is_empty() => addr.parse().with_context(|| format!("invalid AILERON_LISTEN `{addr}`"))?,
        _ => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    if !listen.ip().is_loopback() {
        bail!("AILERON_LISTEN must be a loopback address, got {listen}\nhint: use 127.0.0.1:<port>");
    }
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let token = auth::random_token();
    let mut options = StateOptions::new(token.clone());
    options.telemetry = crate::telemetry::init(crate::telemetry::DEFAULT_SERVICE_NAME, &home);
    let state = AppState::open(home.clone(), options)?;
    state.set_listen_port(addr.port());
    state.resume_approvals();
    let info = DaemonInfo {
        url: format!("http://{addr}"),
        pid: std::process::id(),
        version: VERSION.to_string(),
        started_at: state.started_at.to_rfc3339(),
        token,
    };
    write_atomic(&home.daemon_json(), &serde_json::to_vec_pretty(&info)?, 0o600)?;
    eprintln!("aileron daemon {VERSION} listening on {} (pid {})", info.url, info.pid);

    let shutdown_state = state.clone();
    let result = axum::serve(no_delay(listener), app(state.clone()))
        .with_graceful_shutdown(async move {
            wait_for_signal().await;
            eprintln!("aileron daemon: shutting down; finishing in-flight requests");
            shutdown_state.shutdown.send_replace(true);
        })
        .await;
    let _ = std::fs::remove_file(home.daemon_json());
    state.audit.flush().await;
    // Exports the last batch of spans; the exporter blocks, so off the async workers.
    let telemetry = state.telemetry.clone();
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    drop(lock);
    eprintln!("aileron daemon: stopped");
    result.context("serving HTTP")
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::no_delay(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await;
        assert!(stream.nodelay().unwrap(), "SSE events must not wait for Nagle's algorithm");
    }
}
