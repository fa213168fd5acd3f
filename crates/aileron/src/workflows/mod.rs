//! The workflows below the HTTP layer: running an action, deciding an approval, installing
//! connectors and actions, launch sessions. Each takes the [`Services`] it runs on (and the
//! [`crate::principal::Principal`] the caller authenticated as) and answers in the wire types of
//! [`crate::wire`]; the daemon's handlers and its in-process `/mcp` call them alike. Nothing here
//! imports [`crate::daemon`].

pub mod actions;
pub mod approvals;
pub mod connectors;
pub mod sessions;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use aileron_sandbox::{Runtime, RuntimeConfig};
use anyhow::Context;

use crate::actions::ActionRegistry;
use crate::approvals::ApprovalQueue;
use crate::audit_log::{AuditConfig, AuditLog};
use crate::bindings::{Bindings, CredentialSource};
use crate::home::Home;
use crate::oauth::OAuthFlows;
use aileron_core::audit::ActorType;

use crate::principal::{Principal, Scope, TokenRegistry};
use crate::runner::Caller;
use crate::wire::ApiError;
use crate::secret::Secret;
use crate::sessions::SessionRegistry;
use crate::store::Store;
use crate::vault::Vault;

/// What the workflows run on: the run context (actions, store, runtime, audit, approvals,
/// credentials, egress client, telemetry) plus the token and session registries.
pub struct Services {
    pub home: Home,
    pub tokens: TokenRegistry,
    pub sessions: SessionRegistry,
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
    /// Back-off between retries of retriable failures (SPEC §9: 1 s, 2 s, 4 s).
    pub retry_delays: [std::time::Duration; 3],
    /// Client for connector egress: no redirects are ever followed (SPEC §4.2).
    pub egress_client: reqwest::Client,
    listen_port: AtomicU16,
    /// Traces (off unless `AILERON_OTEL_ENABLED`); flushed by `serve` at exit.
    pub telemetry: crate::telemetry::Telemetry,
}

/// How to build [`Services`]; the daemon derives it from its own options.
pub struct ServiceOptions {
    pub admin_token: Secret,
    pub credentials: Option<Arc<dyn CredentialSource>>,
    pub listen_port: u16,
    pub retry_delays: [std::time::Duration; 3],
    pub telemetry: crate::telemetry::Telemetry,
}

impl Services {
    pub fn open(home: Home, options: ServiceOptions) -> anyhow::Result<Arc<Services>> {
        crate::process::install_crypto_provider();
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
        let vault = Arc::new(Vault::open(&home.secrets()).map_err(|error| {
            anyhow::anyhow!("opening the vault: {error}\nhint: {}", error.hint())
        })?);
        let bindings = Arc::new(Bindings::new(vault.clone()));
        let credentials = options.credentials.unwrap_or_else(|| bindings.clone());
        Ok(Arc::new(Services {
            sessions: SessionRegistry::open(home.sessions_journal()),
            home,
            tokens: TokenRegistry::new(options.admin_token),
            audit: Arc::new(audit),
            store,
            actions,
            approvals,
            pending_resume: std::sync::Mutex::new(recovery.to_resume),
            pending_recovered: std::sync::Mutex::new(recovery.recovered),
            runtime: Arc::new(runtime),
            vault,
            bindings,
            credentials,
            oauth: Arc::new(OAuthFlows::new().context("building the OAuth client")?),
            retry_delays: options.retry_delays,
            egress_client,
            listen_port: AtomicU16::new(options.listen_port),
            telemetry: options.telemetry,
        }))
    }

    /// What a step's egress hook needs, and nothing more.
    pub fn egress_services(&self) -> crate::egress::EgressServices {
        crate::egress::EgressServices {
            credentials: self.credentials.clone(),
            oauth: self.oauth.clone(),
            client: self.egress_client.clone(),
            audit: self.audit.clone(),
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

/// Who the audit record names. Session tokens are agents; the daemon token's callers say what
/// they are (the CLI is a human at a terminal, `aileron-mcp` an agent).
/// The audit actor of a request, from the principal bearer or cookie authentication resolved and
/// nothing else (SPEC §0, invariant 4): no header can choose it.
pub fn caller_for(principal: &Principal) -> Caller {
    match principal {
        Principal::Session { session_id, confined, .. } => {
            let mut caller = Caller::new(ActorType::Agent, session_id.clone());
            caller.session_id = Some(session_id.clone());
            caller.unconfined = !confined;
            caller
        }
        Principal::Web { .. } => Caller::new(ActorType::Human, "web"),
        // The daemon token is the local user's own (the CLI reads it from daemon.json; agents
        // never get it: launched ones are confined, `aileron-mcp` trades it for a session).
        Principal::Admin => Caller::new(ActorType::Human, LOCAL_USER),
    }
}

/// The actor id of the daemon token's holder.
pub const LOCAL_USER: &str = "local-user";

/// Refuses a principal whose grant does not cover `scope`.
pub fn require(principal: &Principal, scope: Scope) -> Result<(), ApiError> {
    if principal.allows(scope) {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("this token does not grant {scope:?}")))
    }
}
