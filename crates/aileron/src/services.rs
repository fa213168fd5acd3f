//! The run context every workflow runs on: [`Services`] (actions, store, runtime, audit,
//! approvals, vault, bindings, credentials, OAuth, the egress client, telemetry, and the token and
//! session registries). The daemon builds it once; the workflows, the runner and the in-process
//! `/mcp` share it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use anyhow::Context;

use crate::dataplane::spawn::Spawner;
use crate::platform::home::Home;
use crate::platform::principal::TokenRegistry;
use crate::platform::secret::Secret;
use crate::stores::actions::ActionRegistry;
use crate::stores::approvals::ApprovalQueue;
use crate::stores::audit_log::{AuditConfig, AuditLog};
use crate::stores::bindings::{Bindings, CredentialSource};
use crate::stores::oauth::OAuthFlows;
use crate::stores::sessions::SessionRegistry;
use crate::stores::store::Store;
use crate::stores::vault::Vault;

/// What the workflows run on: the run context (actions, store, runtime, audit, approvals,
/// credentials, egress client, telemetry) plus the token and session registries.
pub struct Services {
    pub home: Home,
    pub tokens: TokenRegistry,
    pub sessions: SessionRegistry,
    pub audit: Arc<AuditLog>,
    /// The audit export to an OTLP collector (`AILERON_AUDIT_EXPORT=otlp`), when on.
    pub audit_export: Option<Arc<crate::stores::audit_log::export::ExportStatus>>,
    /// Shared so a cold verification (reading and hashing megabytes) can run on a blocking thread.
    pub store: Arc<Store>,
    pub actions: ActionRegistry,
    /// `GET /v1/actions` serialized, per generation of `actions`.
    pub action_listing: crate::stores::actions::ListingCache,
    pub approvals: ApprovalQueue,
    /// Approved entries found in the journal at start-up, executed once `workflows::approvals::resume_at_start` runs.
    pending_resume: std::sync::Mutex<Vec<aileron_core::approval::ApprovalId>>,
    /// Entries found running at start-up (now failed); audited by `workflows::approvals::resume_at_start`.
    pending_recovered: std::sync::Mutex<Vec<aileron_core::approval::ApprovalId>>,
    /// The sandbox: modules load here; only the runner runs them.
    pub sandbox: crate::runner::sandbox::Sandbox,
    /// Set when `runner::warm_up` has loaded every module the enabled actions pin.
    pub modules_warm: std::sync::atomic::AtomicBool,
    /// The encrypted vault (`secrets.json`); starts locked.
    pub vault: Arc<Vault>,
    /// Credential bindings, stored in the vault.
    pub bindings: Arc<Bindings>,
    /// Where egress resolves credentials: `bindings`, unless a test substitutes its own.
    pub credentials: Arc<dyn CredentialSource>,
    /// Pending OAuth2 authorizations and the client that refreshes tokens.
    pub oauth: Arc<OAuthFlows>,
    /// Back-off between retries of retriable failures (SPEC §9: 1 s, 2 s, 4 s).
    pub retry_delays: [std::time::Duration; 3],
    /// Client for connector egress: no redirects are ever followed (SPEC §4.2).
    pub egress_client: reqwest::Client,
    listen_port: AtomicU16,
    /// Traces (off unless `AILERON_OTEL_ENABLED`); flushed by `serve` at exit.
    pub telemetry: crate::platform::telemetry::Telemetry,
    /// Runs connectors' local programs, confined.
    pub spawner: Arc<Spawner>,
    /// The policy rules in force and the run counters they read (SPEC §16).
    pub rules: Arc<crate::stores::rules::LiveRules>,
}

/// How to build [`Services`]; the daemon derives it from its own options.
pub struct ServiceOptions {
    pub admin_token: Secret,
    pub credentials: Option<Arc<dyn CredentialSource>>,
    pub listen_port: u16,
    pub retry_delays: [std::time::Duration; 3],
    pub telemetry: crate::platform::telemetry::Telemetry,
    /// `None` = this process's own executable.
    pub spawn_helper: Option<std::path::PathBuf>,
    /// `None` = `$HOME`.
    pub spawn_user_home: Option<std::path::PathBuf>,
}

impl Services {
    pub fn open(home: Home, options: ServiceOptions) -> anyhow::Result<Arc<Services>> {
        crate::platform::process::install_crypto_provider();
        let audit = AuditLog::open(AuditConfig { dir: home.audit_parent(), witness: Some(home.witness_dir()) })
            .context("opening the audit log")?;
        let audit_export = match crate::stores::audit_log::export::target_from_env().map_err(anyhow::Error::msg)? {
            Some(target) => {
                let dir = audit.audit_dir().context("AILERON_AUDIT_EXPORT needs the audit log on disk")?.to_path_buf();
                anyhow::ensure!(tokio::runtime::Handle::try_current().is_ok(), "the audit export runs in the daemon");
                Some(crate::stores::audit_log::export::start(target, dir, audit.subscribe()))
            }
            None => None,
        };
        let store = Store::open(home.store_dir()).context("opening the connector store")?;
        let actions = ActionRegistry::load(&home.actions_dir(), &home.action_state())
            .with_context(|| format!("loading actions from {}", home.actions_dir().display()))?;
        // Said at start too, not only when someone lists the actions: a file that did not load
        // (a parse error, a tool name another file already has) is an action an agent cannot call.
        for error in actions.list().1 {
            log_line!(
                "aileron daemon: warning: actions/{} did not load: {}",
                error.file,
                error.message.replace('\n', "; ")
            );
        }
        let (approvals, recovery) =
            ApprovalQueue::open(&home.approvals_journal()).context("replaying the approval journal")?;
        for id in &recovery.recovered {
            log_line!("aileron daemon: approval {id} was running when the daemon stopped; marked failed, not re-run");
        }
        let sandbox = crate::runner::sandbox::Sandbox::open(home.cache_dir()).context("starting wasmtime")?;
        let egress_client = crate::dataplane::tls::reqwest_builder(crate::dataplane::tls::Alpn::Http2AndHttp1)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(crate::dataplane::public_address::PublicOnlyResolver))
            // Through a proxy from the environment the connection would go to the proxy, which
            // resolves the name itself: the address checked would not be the address reached.
            .no_proxy()
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .context("building the egress HTTP client")?;
        let vault = Arc::new(
            Vault::open(&home.secrets())
                .map_err(|error| anyhow::anyhow!("opening the vault: {error}\nhint: {}", error.hint()))?,
        );
        let bindings = Arc::new(Bindings::new(vault.clone()));
        let credentials = options.credentials.unwrap_or_else(|| bindings.clone());
        let helper = match options.spawn_helper {
            Some(helper) => helper,
            None => crate::dataplane::spawn::default_helper()
                .context("finding this executable (it runs spawned programs)")?,
        };
        let mut spawner = Spawner::new(helper, crate::platform::confinement::masked_directories(&home));
        if let Some(user_home) = options.spawn_user_home {
            spawner.user_home = Some(user_home);
        }
        let spawner = Arc::new(spawner);
        let rules = crate::stores::rules::LiveRules::open(home.root(), actions.generation(), actions.files());
        match rules.problem() {
            Some(problem) => {
                log_line!("aileron daemon: warning: the policy files do not load, so every run is refused: {problem}")
            }
            None if !rules.current().is_empty() => {
                let current = rules.current();
                log_line!(
                    "aileron daemon: policy {} in force: {} rule(s) from {}",
                    current.hash,
                    current.rules.len(),
                    current.files.join(", ")
                );
            }
            None => {}
        }
        if let Err(error) = rules.counters.rebuild(&audit, chrono::Utc::now()) {
            log_line!(
                "aileron daemon: warning: the policy run counters could not be read back from the audit log: {error}"
            );
        }
        Ok(Arc::new(Services {
            sessions: SessionRegistry::open(home.sessions_journal()),
            home,
            tokens: TokenRegistry::new(options.admin_token),
            audit: Arc::new(audit),
            audit_export,
            store: Arc::new(store),
            actions,
            action_listing: Default::default(),
            approvals,
            pending_resume: std::sync::Mutex::new(recovery.to_resume),
            pending_recovered: std::sync::Mutex::new(recovery.recovered),
            sandbox,
            modules_warm: std::sync::atomic::AtomicBool::new(false),
            vault,
            bindings,
            credentials,
            oauth: Arc::new(OAuthFlows::new().context("building the OAuth client")?),
            retry_delays: options.retry_delays,
            egress_client,
            listen_port: AtomicU16::new(options.listen_port),
            telemetry: options.telemetry,
            spawner,
            rules: Arc::new(rules),
        }))
    }

    /// What a step's egress hook needs, and nothing more.
    pub fn egress_services(&self) -> crate::dataplane::egress::EgressServices {
        crate::dataplane::egress::EgressServices {
            credentials: self.credentials.clone(),
            oauth: self.oauth.clone(),
            client: self.egress_client.clone(),
            audit: self.audit.clone(),
            spawner: self.spawner.clone(),
            telemetry: self.telemetry.clone(),
        }
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

    /// What the journal held at start-up, once: `(approved entries to execute, entries that were
    /// running when the daemon died)`; `workflows::approvals::resume_at_start` acts on them.
    pub fn take_recovery(&self) -> (Vec<aileron_core::approval::ApprovalId>, Vec<aileron_core::approval::ApprovalId>) {
        let recovered = std::mem::take(&mut *self.pending_recovered.lock().expect("recovered list poisoned"));
        let resume = std::mem::take(&mut *self.pending_resume.lock().expect("resume list poisoned"));
        (resume, recovered)
    }
}
