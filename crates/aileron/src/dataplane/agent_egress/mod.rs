//! A launched agent's egress proxy (SPEC §15): the one way out of its network namespace. The
//! daemon serves it on a listener the launch made inside the namespace (the accepting listener
//! is the session: nothing in `HTTPS_PROXY` identifies or authenticates anything).
//!
//! Each connection carries one `CONNECT host:port`. The name is resolved once, here on the host
//! (the namespace has no DNS), loopback, private, link-local, shared (CGNAT), unique-local and
//! metadata addresses are refused unless the launch said `--allow-private HOST:PORT` for exactly
//! that destination, and the address that was checked is the one dialled; a destination the
//! session still has a connection to from an earlier tunnel is served on it ([`upstreams`]),
//! with no lookup and no dial. Inside the tunnel
//! ([`intercept`]) TLS is terminated with the session's CA ([`session_ca`]) and each request is
//! recorded as `sandbox.proxy.passthrough` (method, host, path — never a query, a header value or
//! a body —, status, time). Anything but CONNECT is answered 403 (`sandbox.proxy.rejected`,
//! `non_connect_proxy_request_unsupported`): a tool that cannot tunnel goes nowhere rather than
//! out unrecorded.
//!
//! A session's agent holds at most [`MOST_OPEN_CONNECTIONS`] connections to its proxy at once;
//! one more is answered 503 and counted as a refusal (reattack8's F8: stalled tunnels had filled
//! the daemon's descriptors).
//!
//! Refusals are recorded once per distinct destination and reason, the rest counted and
//! summarised when the session's network closes: an agent looping on a refused destination cannot
//! fill the disk with fsynced records (the re-attack's L6). Those refused from the request alone
//! (policy, malformed, too many) are recorded for at most [`MAX_REFUSALS_RECORDED`] distinct
//! destinations; one whose name was looked up is always recorded for a new destination (reattack8's
//! F14: the lookups were a way out), as is a tunnel the agent opened and never used.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aileron_core::audit::{Actor, ActorType, PreparedRecord};
use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::ProxiedRequest;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::stores::audit_log::{AuditEvent, AuditLog};

mod admit;
mod hold;
mod intercept;
mod sealed;
mod session_ca;
mod upstreams;

pub use admit::SessionRules;
pub use hold::{HeldRequest, HoldOutcome, RequestApprovals};
pub use sealed::{AWS_PLACEHOLDER_KEY_ID, Credentialing, SealedConnector};
pub use session_ca::SessionCa;

/// How long a client may take to send its request head, and the proxy to resolve and dial.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Distinct refusals (destination and reason) recorded one by one per session.
pub const MAX_REFUSALS_RECORDED: usize = 32;
/// Distinct refusals remembered to record each once; past it every refusal whose destination was
/// looked up is recorded (memory stays bounded, nothing that left goes unrecorded).
const MOST_REFUSALS_REMEMBERED: usize = 4096;
/// `aileron.proxy.source` of a CONNECT the proxy refused.
pub const CONNECT_SOURCE: &str = "connect";
/// `aileron.proxy.source` of an `--allow-tcp` connection.
pub const TCP_SOURCE: &str = "tcp_forward";
/// `aileron.proxy.source` of the agent's request to the daemon's LLM gateway, reached through its
/// session's own API listener.
pub const GATEWAY_SOURCE: &str = "llm_gateway";

/// What one session's proxy checks against and records under.
pub struct EgressSession {
    pub audit: Arc<AuditLog>,
    pub session_id: String,
    /// `HOST:PORT` destinations the launch allowed although they are not public.
    pub allow_private: BTreeSet<String>,
    /// `HOST:PORT` destinations dialled at a fixed address instead of resolving the name
    /// (`AILERON_CONNECT_TO`); the address is checked like a resolved one.
    connect_to: Arc<ConnectTo>,
    /// The session's certificate authority, in memory only.
    pub ca: SessionCa,
    /// `egress.toml` as it was when the session's network was attached.
    pub policy: aileron_core::policy::AgentEgressPolicy,
    /// How upstreams are reached: the process's verified TLS client (the platform's roots),
    /// HTTP/1.1 by ALPN; made once per session.
    upstream_tls: Arc<rustls::ClientConfig>,
    /// The same, offering h2 first (for an h2 client).
    upstream_tls_h2: Arc<rustls::ClientConfig>,
    /// The installed connectors' operations and their credentials (SPEC §15).
    pub credentialing: Arc<Credentialing>,
    /// Requests this session may have read whole at once (a held request, a GraphQL document, a
    /// body hashed for a signature): memory stays bounded however many the agent sends.
    whole_bodies: Arc<tokio::sync::Semaphore>,
    /// Credentialed answers this session may have held whole at once until the agent reads them
    /// ([`MAX_WHOLE_ANSWERS`]; past it they stream): the fourteenth re-attack left 25,600 such
    /// answers unread on h2 streams and grew the daemon by 1.1 GB.
    whole_answers: Arc<tokio::sync::Semaphore>,
    /// The echoes of the credentials its requests carried, made once per credential.
    echoes: crate::dataplane::redaction::EchoesMade,
    refusals: Mutex<Refusals>,
    /// Matched requests become `aileron.proxy.request` spans when traces are on.
    telemetry: crate::platform::telemetry::Telemetry,
    /// The user's rules over matched requests (SPEC §16); none: no rules are asked.
    rules: Option<SessionRules>,
    /// How long a tunnel's client may take to send its first byte, and each request head
    /// ([`intercept::FIRST_BYTE_TIMEOUT`]; the tests shorten it).
    first_byte_timeout: Duration,
    /// Connections its ended tunnels left open, for its next tunnels to the same place.
    upstreams: upstreams::Upstreams,
    /// How many times a destination's addresses were looked up ([`EgressSession::lookups`]).
    lookups: std::sync::atomic::AtomicU64,
    /// How long an upstream may take to start answering a request ([`RESPONSE_HEAD_TIMEOUT`];
    /// the tests shorten it).
    response_head_timeout: Duration,
    /// The most connections this session's agent may hold open to its proxy at once
    /// ([`MOST_OPEN_CONNECTIONS`]; the tests lower it).
    most_open: usize,
    /// Read-held by each request being sent and recorded: the session's end waits for their
    /// records ([`IN_FLIGHT_RECORDS_WAIT`]).
    in_flight: Arc<tokio::sync::RwLock<()>>,
}

/// How long an upstream may take to send a response head. Long enough for any API an agent's
/// tool waits on; an upstream that never answers holds no connection past it.
pub const RESPONSE_HEAD_TIMEOUT: Duration = Duration::from_secs(300);
/// The most connections one session's agent may hold open to its proxy (or to one `--allow-tcp`
/// listener) at once; each is one or two of the daemon's descriptors. Beyond it a connection is
/// answered 503 and closed, counted as a refusal: one agent cannot exhaust the descriptors the
/// daemon's API, the other sessions and the audit log need.
pub const MOST_OPEN_CONNECTIONS: usize = 128;
/// How long a session's end waits for the records of requests still being sent.
const IN_FLIGHT_RECORDS_WAIT: Duration = Duration::from_secs(10);

/// How many request bodies one session may hold in memory at once (each ≤ 16 MiB).
pub const MAX_WHOLE_BODIES: usize = 4;

/// How many small credentialed answers (each ≤ 64 KiB, read whole to be redacted) one session
/// may hold in memory at once, unread by the agent.
pub const MAX_WHOLE_ANSWERS: usize = 32;

#[derive(Default)]
struct Refusals {
    recorded: BTreeSet<(String, &'static str)>,
    total: u64,
    unrecorded: u64,
}

/// Why a CONNECT was not served: the record's event type and reason, and the status answered.
struct Refusal {
    event_type: EventType,
    reason: &'static str,
    status: &'static str,
}

impl Refusal {
    fn rejected(reason: &'static str, status: &'static str) -> Refusal {
        Refusal { event_type: EventType::SandboxProxyRejected, reason, status }
    }

    fn blocked(reason: &'static str) -> Refusal {
        Refusal { event_type: EventType::SandboxProxyBlocked, reason, status: "403 Forbidden" }
    }
}

impl EgressSession {
    pub fn new(
        audit: Arc<AuditLog>,
        session_id: String,
        allow_private: BTreeSet<String>,
        ca: SessionCa,
        policy: aileron_core::policy::AgentEgressPolicy,
    ) -> EgressSession {
        let (upstream_tls, upstream_tls_h2) = upstream_configs(crate::dataplane::tls::client_config());
        EgressSession {
            audit,
            session_id,
            allow_private,
            connect_to: Arc::default(),
            ca,
            policy,
            upstream_tls,
            upstream_tls_h2,
            credentialing: Arc::new(Credentialing::none()),
            whole_bodies: Arc::new(tokio::sync::Semaphore::new(MAX_WHOLE_BODIES)),
            whole_answers: Arc::new(tokio::sync::Semaphore::new(MAX_WHOLE_ANSWERS)),
            echoes: Default::default(),
            refusals: Mutex::default(),
            telemetry: crate::platform::telemetry::Telemetry::disabled(),
            rules: None,
            first_byte_timeout: intercept::FIRST_BYTE_TIMEOUT,
            upstreams: upstreams::Upstreams::default(),
            lookups: std::sync::atomic::AtomicU64::new(0),
            response_head_timeout: RESPONSE_HEAD_TIMEOUT,
            most_open: MOST_OPEN_CONNECTIONS,
            in_flight: Arc::default(),
        }
    }

    /// The same session deciding its matched requests with `rules` (SPEC §16).
    pub fn with_rules(mut self, rules: SessionRules) -> EgressSession {
        self.rules = Some(rules);
        self
    }

    /// The same session matching requests to `credentialing`'s operations.
    pub fn with_credentialing(mut self, credentialing: Arc<Credentialing>) -> EgressSession {
        self.credentialing = credentialing;
        self
    }

    /// The same session tracing its matched requests with `telemetry`.
    pub fn with_telemetry(mut self, telemetry: crate::platform::telemetry::Telemetry) -> EgressSession {
        self.telemetry = telemetry;
        self
    }

    /// The same session dialling `connect_to`'s destinations at their fixed addresses.
    pub fn with_connect_to(mut self, connect_to: Arc<ConnectTo>) -> EgressSession {
        self.connect_to = connect_to;
        self
    }

    /// The same session giving a tunnel's client `timeout` for its first byte and for each
    /// request head instead (a test's).
    pub fn with_first_byte_timeout(mut self, timeout: Duration) -> EgressSession {
        self.first_byte_timeout = timeout;
        self
    }

    /// The same session giving an upstream `timeout` to start answering each request instead of
    /// [`RESPONSE_HEAD_TIMEOUT`] (a test's).
    pub fn with_response_head_timeout(mut self, timeout: Duration) -> EgressSession {
        self.response_head_timeout = timeout;
        self
    }

    /// The same session allowing `most` open connections at once instead of
    /// [`MOST_OPEN_CONNECTIONS`] (a test's).
    pub fn with_most_open(mut self, most: usize) -> EgressSession {
        self.most_open = most;
        self
    }

    /// The same session closing the upstream connections its tunnels left open once unused for
    /// `kept_for` instead of [`upstreams::KEPT_FOR`] (a test's).
    pub fn with_kept_for(mut self, kept_for: Duration) -> EgressSession {
        self.upstreams = upstreams::Upstreams::keeping_for(kept_for);
        self
    }

    /// How many times this session looked up where a destination is (a CONNECT's name resolved,
    /// or its fixed address taken): a CONNECT that a kept connection serves does not.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The same session verifying upstreams with `config` instead (a benchmark's own roots).
    pub fn with_upstream_tls(mut self, config: rustls::ClientConfig) -> EgressSession {
        (self.upstream_tls, self.upstream_tls_h2) = upstream_configs(config);
        self
    }

    /// Serves `listener` until `closed` completes; every open tunnel ends with it.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, closed: impl std::future::Future<Output = ()>) {
        let (session, refusing) = (self.clone(), self.clone());
        let refused = move || refusing.clone().too_many(CONNECT_SOURCE, "CONNECT", "*".to_string());
        accept_until(listener, closed, self.most_open, refused, move |stream| session.clone().handle(stream)).await;
        // Every request that was on its way when the tunnels closed is recorded first (`client_gone`).
        let _ = tokio::time::timeout(IN_FLIGHT_RECORDS_WAIT, self.in_flight.write()).await;
        self.summarise_refusals().await;
    }

    /// Relays every connection on `listener` to `destination`, an `--allow-tcp HOST:PORT` the user
    /// named at launch (resolved here on the host; a private address is what it names): byte for
    /// byte, each connection recorded as `sandbox.egress.tcp_forwarded` before it is made.
    pub async fn forward_tcp(
        self: Arc<Self>,
        listener: TcpListener,
        destination: String,
        closed: impl std::future::Future<Output = ()>,
    ) {
        let (refusing, refused_destination) = (self.clone(), destination.clone());
        let refused = move || refusing.clone().too_many(TCP_SOURCE, "TCP", refused_destination.clone());
        let most_open = self.most_open;
        accept_until(listener, closed, most_open, refused, move |stream| {
            self.clone().relay_tcp(stream, destination.clone())
        })
        .await;
    }

    /// Counts (the first time, records) a connection refused for being one too many.
    async fn too_many(self: Arc<Self>, source: &'static str, method: &'static str, destination: String) {
        let event_type = EventType::SandboxProxyRejected;
        self.record_refusal(source, method, &destination, event_type, "too_many_connections").await;
    }

    async fn relay_tcp(self: Arc<Self>, mut stream: TcpStream, destination: String) {
        let Some((host, port)) = authority(&destination) else { return };
        let Some((mut upstream, address)) = dial_first(self.addresses(&destination, &host, port).await).await else {
            let event_type = EventType::SandboxProxyRejected;
            return self.record_refusal(TCP_SOURCE, "TCP", &destination, event_type, "upstream_connect_failed").await;
        };
        let forwarded =
            ProxiedRequest { address: Some(address.to_string()), ..self.request(TCP_SOURCE, "TCP", &destination) };
        // Fail closed: a connection that cannot be recorded is not relayed.
        if self.append(EventType::SandboxEgressTcpForwarded, forwarded).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
    }

    async fn handle(self: Arc<Self>, mut stream: TcpStream) {
        let head =
            match tokio::time::timeout(STEP_TIMEOUT, crate::dataplane::headers::read_connect_head(&mut stream)).await {
                Ok(Some(head)) => head,
                // Closed or stalled before a whole head: nothing was asked, nothing is recorded.
                _ => return,
            };
        let (host, port, destination) = match ProxyHead::parse(&head) {
            ProxyHead::Connect { host, port, destination } => (host, port, destination),
            ProxyHead::NotConnect { method, shown } => {
                let refusal = Refusal::rejected("non_connect_proxy_request_unsupported", "403 Forbidden");
                return self.refuse(&mut stream, &method, &shown, refusal).await;
            }
            ProxyHead::Malformed { shown } => {
                let refusal = Refusal::rejected("malformed_request", "400 Bad Request");
                return self.refuse(&mut stream, "CONNECT", &shown, refusal).await;
            }
        };
        // An operation's host is reached although private, and is on the allowlist (SPEC §15).
        let (user_named, operation_host) =
            (self.allow_private.contains(&destination), self.credentialing.names_host(&destination));
        // The policy is asked before anything is resolved: a refused name is never looked up.
        if !user_named && !operation_host && !self.policy.allows(&host) {
            return self.refuse(&mut stream, "CONNECT", &destination, Refusal::blocked("egress_policy_denied")).await;
        }
        // A destination with a connection kept from an earlier tunnel is not looked up again:
        // that connection's address was checked when it was dialled, under the same rules
        // (`upstreams`).
        let (dialled, address) = match self.upstreams.reaches(&destination) {
            Some(address) => (None, address),
            None => match self
                .dial_checked(
                    &destination,
                    &host,
                    port,
                    Private::allowance(PrivateAsked {
                        user_named,
                        operation_host,
                        pinned: self.connect_to.contains_key(&destination),
                        host: &host,
                    }),
                )
                .await
            {
                Ok((dialled, address)) => (Some(dialled), address),
                Err(refusal) => return self.refuse(&mut stream, "CONNECT", &destination, refusal).await,
            },
        };
        if stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
            return;
        }
        let target = intercept::Target { host, destination, address };
        intercept::relay(self, stream, dialled, target).await;
    }

    /// `destination` resolved, its addresses checked (public, unless `private` allows more), the
    /// first that accepts dialled; else why the CONNECT is refused.
    async fn dial_checked(
        &self,
        destination: &str,
        host: &str,
        port: u16,
        private: Private,
    ) -> Result<(TcpStream, SocketAddr), Refusal> {
        let found = self.addresses(destination, host, port).await;
        if found.is_empty() {
            return Err(Refusal::rejected("upstream_resolve_failed", "502 Bad Gateway"));
        }
        let checked: Vec<SocketAddr> = found
            .into_iter()
            .filter(|address| {
                private.admits(address.ip()) || crate::dataplane::public_address::is_elsewhere(address.ip())
            })
            .collect();
        if checked.is_empty() {
            return Err(Refusal::blocked("private_destination"));
        }
        dial_first(checked).await.ok_or_else(|| Refusal::rejected("upstream_connect_failed", "502 Bad Gateway"))
    }

    /// Where `destination` (`host:port`) is dialled: its fixed address, else what the name resolves to.
    async fn addresses(&self, destination: &str, host: &str, port: u16) -> Vec<SocketAddr> {
        self.lookups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match self.connect_to.get(destination) {
            Some(address) => vec![*address],
            None => resolve(host, port).await,
        }
    }

    /// The keys every record of this proxy carries.
    fn request(&self, source: &'static str, method: &str, destination: &str) -> ProxiedRequest {
        ProxiedRequest {
            source,
            // Cut and marked as a path is (the fourteenth re-attack's 40-character method was
            // recorded cut, unmarked).
            method: Some(intercept::recorded_cut(method, 32)),
            host: Some(destination.to_string()),
            session_id: Some(self.session_id.clone()),
            ..ProxiedRequest::default()
        }
    }

    async fn refuse(&self, stream: &mut TcpStream, method: &str, destination: &str, refusal: Refusal) {
        self.record_refusal(CONNECT_SOURCE, method, destination, refusal.event_type, refusal.reason).await;
        let answer = format!(
            "HTTP/1.1 {}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}\n",
            refusal.status,
            refusal.reason.len() + 1,
            refusal.reason
        );
        let _ = stream.write_all(answer.as_bytes()).await;
    }

    /// A refusal inside a tunnel the CONNECT of which was allowed (`sandbox.proxy.rejected`).
    async fn refusal(&self, destination: &str, method: &str, refusal: intercept::Refusal) {
        let event_type = EventType::SandboxProxyRejected;
        self.record_refusal(intercept::SOURCE, method, destination, event_type, refusal.reason()).await;
    }

    /// Records a refusal the first time its (destination, reason) is seen, else counts it.
    async fn record_refusal(
        &self,
        source: &'static str,
        method: &str,
        destination: &str,
        event_type: EventType,
        reason: &'static str,
    ) {
        let first_of_its_kind = {
            let mut refusals = self.refusals.lock().expect("the tally is never poisoned");
            refusals.total += 1;
            let key = (destination.to_string(), reason);
            // A refusal whose destination was looked up (or dialled) is never only counted: each
            // lookup of a new name left the machine, and could carry data in the name.
            let capped = !looked_up(reason) && refusals.recorded.len() >= MAX_REFUSALS_RECORDED;
            let seen = refusals.recorded.contains(&key) || capped;
            if seen {
                refusals.unrecorded += 1;
            } else if refusals.recorded.len() < MOST_REFUSALS_REMEMBERED {
                refusals.recorded.insert(key);
            }
            !seen
        };
        if first_of_its_kind {
            let refused = ProxiedRequest {
                proxy_reject_reason: Some(reason.to_string()),
                ..self.request(source, method, destination)
            };
            let _ = self.append(event_type, refused).await;
        }
    }

    /// Records the agent's request to the daemon's LLM gateway before it is forwarded (`upstream`
    /// the provider's base URL): the gateway keeps no record of its own (SPEC §12), but what a
    /// launched agent sends anywhere is on record (§15), and with a key of its own (an attacker's)
    /// the gateway was a way out with none (the eighth re-attack). `Err` when the record could not
    /// be made durable: nothing is sent then.
    pub async fn record_gateway_request(&self, method: &str, upstream: &str, path: &str) -> Result<(), ()> {
        let record = ProxiedRequest {
            path: Some(intercept::recorded_path(path)),
            ..self.request(GATEWAY_SOURCE, method, upstream)
        };
        self.append(EventType::SandboxProxyPassthrough, record).await
    }

    /// One record with the totals when some refusals were only counted.
    async fn summarise_refusals(&self) {
        let (total, unrecorded) = {
            let refusals = self.refusals.lock().expect("the tally is never poisoned");
            (refusals.total, refusals.unrecorded)
        };
        if unrecorded == 0 {
            return;
        }
        let summary = ProxiedRequest {
            proxy_reject_reason: Some("refusals_summarised".to_string()),
            refused_count: Some(total),
            refused_unrecorded: Some(unrecorded),
            ..self.request(CONNECT_SOURCE, "CONNECT", "*")
        };
        let _ = self.append(EventType::SandboxProxyBlocked, summary).await;
    }

    /// Who a record of this session names: the launched agent, by its session.
    fn actor(&self) -> Actor {
        Actor { r#type: ActorType::Agent, id: self.session_id.clone() }
    }

    async fn append(&self, event_type: EventType, record: ProxiedRequest) -> Result<(), ()> {
        self.append_record(event_type, record, None).await.map(|_| ())
    }

    /// Appends `record`, with `binding`'s entries (a credential's) beside its own; its audit id
    /// once durable. Without a binding, and with no spans to make from the payload, the record's
    /// canonical form is written straight from its fields (no map built, no record handed back:
    /// a proxied request's own work, BENCHMARKS.md, issue 49).
    async fn append_record(
        &self,
        event_type: EventType,
        record: ProxiedRequest,
        binding: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<String, ()> {
        if binding.is_some() || self.telemetry.is_enabled() {
            let mut payload = record.into_payload();
            payload.extend(binding.unwrap_or_default());
            return self.append_payload(event_type, payload).await;
        }
        let audit_id = crate::stores::audit_log::mint_audit_id();
        let prepared =
            PreparedRecord::new(&self.actor(), &audit_id, event_type.as_str(), Some(&self.session_id), |payload| {
                record.write_payload(payload)
            });
        self.audit.submit(prepared).await.map_err(|_| ())?;
        Ok(audit_id)
    }

    /// Appends one record; its audit id once durable.
    async fn append_payload(
        &self,
        event_type: EventType,
        payload: serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, ()> {
        let traced = matches!(event_type, EventType::ConnectorProxyProxied | EventType::ConnectorProxyRejected)
            .then(|| payload.clone())
            .filter(|_| self.telemetry.is_enabled());
        let event = AuditEvent {
            event_type,
            actor: self.actor(),
            session_id: Some(self.session_id.clone()),
            payload,
            audit_id: None,
        };
        let audit_id = self.audit.append(event).await.map(|record| record.audit_id).map_err(|_| ())?;
        if let Some(payload) = traced {
            let refused = payload.get(aileron_core::vocabulary::keys::CONNECTOR_REJECT_REASON).and_then(|v| v.as_str());
            self.telemetry.proxy_request(&payload, &audit_id, refused);
        }
        Ok(audit_id)
    }
}

/// Which non-public addresses a CONNECT's destination may be reached at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Private {
    /// Any: the user named the destination (`--allow-private`), or an operation names it as an
    /// address, or names it and the user pinned its address (`AILERON_CONNECT_TO`).
    Any,
    /// Loopback only: an operation names `localhost`.
    Loopback,
    /// None: public addresses only. An operation naming a DNS name does not lift this: whoever
    /// answers for that name (the connector's author, or anyone who can) would choose where the
    /// agent reaches (reattack8's F15).
    Refused,
}

/// What decides a destination's [`Private`] allowance.
struct PrivateAsked<'a> {
    user_named: bool,
    operation_host: bool,
    pinned: bool,
    host: &'a str,
}

impl Private {
    fn allowance(asked: PrivateAsked<'_>) -> Private {
        let PrivateAsked { user_named, operation_host, pinned, host } = asked;
        if user_named || (operation_host && (pinned || host.parse::<IpAddr>().is_ok())) {
            Private::Any
        } else if operation_host && host == "localhost" {
            Private::Loopback
        } else {
            Private::Refused
        }
    }

    fn admits(self, ip: IpAddr) -> bool {
        match self {
            Private::Any => true,
            Private::Loopback => ip.is_loopback(),
            Private::Refused => false,
        }
    }
}

/// Whether a refusal for `reason` came after its destination was looked up (or dialled): all but
/// those refused from the request alone.
fn looked_up(reason: &str) -> bool {
    !matches!(
        reason,
        "egress_policy_denied" | "non_connect_proxy_request_unsupported" | "malformed_request" | "too_many_connections"
    )
}

/// The addresses of `host` (an address itself, or a name resolved here on the host, once); empty
/// when the name does not resolve within [`STEP_TIMEOUT`].
async fn resolve(host: &str, port: u16) -> Vec<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![SocketAddr::new(ip, port)];
    }
    match tokio::time::timeout(STEP_TIMEOUT, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(found)) => found.collect(),
        _ => Vec::new(),
    }
}

/// The first of `addresses` that accepts within [`STEP_TIMEOUT`] (`TCP_NODELAY` set), and which.
async fn dial_first(addresses: Vec<SocketAddr>) -> Option<(TcpStream, SocketAddr)> {
    for address in addresses {
        if let Ok(Ok(connected)) = tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(address)).await {
            let _ = connected.set_nodelay(true);
            return Some((connected, address));
        }
    }
    None
}

/// `config` offering HTTP/1.1 alone, and h2 then HTTP/1.1.
fn upstream_configs(config: rustls::ClientConfig) -> (Arc<rustls::ClientConfig>, Arc<rustls::ClientConfig>) {
    let mut http1 = config.clone();
    http1.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut h2 = config;
    h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    (Arc::new(http1), Arc::new(h2))
}

/// What a connection beyond a session's [`MOST_OPEN_CONNECTIONS`] is told before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
    content-length: 21\r\nconnection: close\r\n\r\ntoo_many_connections\n";

/// Accepts on `listener` and runs `handle` for each connection (`TCP_NODELAY` set: heads and
/// handshakes are small writes each waiting for an answer, which Nagle's algorithm against delayed
/// ACKs would hold up to 40 ms) until `closed` completes; every connection still open ends with it.
/// With `most_open` connections open, another is answered 503 without waiting and closed, and
/// `refused` runs (on its own task) for it.
async fn accept_until<F, Task, R, Refused>(
    listener: TcpListener,
    closed: impl std::future::Future<Output = ()>,
    most_open: usize,
    refused: R,
    handle: F,
) where
    F: Fn(TcpStream) -> Task,
    Task: std::future::Future<Output = ()> + Send + 'static,
    R: Fn() -> Refused,
    Refused: std::future::Future<Output = ()> + Send + 'static,
{
    let mut connections = tokio::task::JoinSet::new();
    let mut closed = std::pin::pin!(closed);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if connections.len() >= most_open => {
                    // Never waits: a full socket buffer loses the answer, not the accept loop.
                    let _ = stream.try_write(TOO_MANY_CONNECTIONS);
                    drop(stream);
                    tokio::spawn(refused());
                }
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    connections.spawn(handle(stream));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut closed => break,
        }
    }
    connections.abort_all();
}

/// What a launched agent's first line to its proxy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyHead {
    /// `CONNECT host:port`: the host lower-cased (an IPv6 literal without brackets), the port
    /// non-zero, and `destination` the `host:port` (`[v6]:port`) every record names.
    Connect { host: String, port: u16, destination: String },
    /// Anything but CONNECT: the method (at most 32 characters) and the destination's host and
    /// port alone (never a path or a query).
    NotConnect { method: String, shown: String },
    /// A CONNECT whose target is not `host:port`: at most 256 characters of it.
    Malformed { shown: String },
}

impl ProxyHead {
    /// Reads the request line of `head` (the whole head, as the proxy read it).
    pub fn parse(head: &str) -> ProxyHead {
        let mut words = head.lines().next().unwrap_or_default().split_whitespace();
        let (method, target) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
        if !method.eq_ignore_ascii_case("CONNECT") {
            return ProxyHead::NotConnect {
                method: method.chars().take(32).collect(),
                shown: shown_destination(target),
            };
        }
        match authority(target) {
            Some((host, port)) => {
                ProxyHead::Connect { destination: format!("{}:{port}", bracketed(&host)), host, port }
            }
            None => ProxyHead::Malformed { shown: target.chars().take(256).collect() },
        }
    }
}

/// `host:port` of a CONNECT target (`[v6]:port` for an IPv6 literal); the port is required.
fn authority(target: &str) -> Option<(String, u16)> {
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|port| *port != 0)?;
    // A colon belongs to an IPv6 literal only, and that is bracketed.
    if let Some(v6) = host.strip_prefix('[') {
        return Some((v6.strip_suffix(']')?.parse::<std::net::Ipv6Addr>().ok()?.to_string(), port));
    }
    let host = host.to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    valid.then_some((host, port))
}

/// `AILERON_CONNECT_TO`: `HOST:PORT=IP:PORT` pairs, comma-separated, like curl's `--connect-to`
/// (a name served somewhere its DNS does not say: an enterprise mirror, a local fake).
pub type ConnectTo = std::collections::BTreeMap<String, SocketAddr>;

/// Parses `AILERON_CONNECT_TO`'s value; the error names the entry at fault.
pub fn parse_connect_to(value: &str) -> Result<ConnectTo, String> {
    let mut pairs = ConnectTo::new();
    for entry in value.split(',').map(str::trim).filter(|entry| !entry.is_empty()) {
        let parsed = entry.split_once('=').and_then(|(destination, address)| {
            let (host, port) = authority(destination.trim())?;
            Some((format!("{}:{port}", bracketed(&host)), address.trim().parse::<SocketAddr>().ok()?))
        });
        let Some((destination, address)) = parsed else {
            return Err(format!(
                "invalid AILERON_CONNECT_TO entry `{entry}`\nhint: write HOST:PORT=IP:PORT, e.g. \
                 api.github.com:443=127.0.0.1:8443, comma-separated"
            ));
        };
        pairs.insert(destination, address);
    }
    Ok(pairs)
}

fn bracketed(host: &str) -> String {
    if host.contains(':') { format!("[{host}]") } else { host.to_string() }
}

/// The destination of a plain-HTTP proxy request (`GET http://host/path`): its host only, so a
/// refused request's record holds no path or query.
fn shown_destination(target: &str) -> String {
    match url::Url::parse(target) {
        Ok(url) => match (url.host_str(), url.port_or_known_default()) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (Some(host), None) => host.to_string(),
            _ => String::new(),
        },
        Err(_) => String::new(),
    }
}

/// SPEC §9's envelope `{"error": error}` of a refusal inside a tunnel, with the error's `message`
/// at the top as well, where GitHub-style APIs put theirs: `gh` and Octokit print it.
fn envelope(error: serde_json::Value) -> serde_json::Value {
    serde_json::json!({ "message": error["message"].clone(), "error": error })
}

/// `body` as JSON with `status`, once its record is written.
fn answer(
    recorded: Result<(), ()>,
    status: hyper::StatusCode,
    body: serde_json::Value,
) -> hyper::Response<axum::body::Body> {
    if recorded.is_err() {
        return plain(hyper::StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable");
    }
    let mut response = hyper::Response::new(axum::body::Body::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// `text` and a newline as `text/plain` with `status`.
fn plain(status: hyper::StatusCode, text: &str) -> hyper::Response<axum::body::Body> {
    let mut response = hyper::Response::new(axum::body::Body::from(format!("{text}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_targets_are_host_and_port() {
        assert_eq!(authority("Example.COM:443"), Some(("example.com".into(), 443)));
        assert_eq!(authority("[::1]:8443"), Some(("::1".into(), 8443)));
        assert_eq!(authority("10.0.0.1:22"), Some(("10.0.0.1".into(), 22)));
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:99999",
            ":443",
            "[::1:443",
            "a b:443",
            "a/b:443",
            "a.com:4b.com:443",
        ] {
            assert_eq!(authority(bad), None, "{bad}");
        }
        assert_eq!(bracketed("::1"), "[::1]");
    }

    #[test]
    fn connect_to_pins_destinations_and_names_a_bad_entry() {
        let pinned = parse_connect_to(" API.GitHub.com:443=127.0.0.1:8443, [::1]:80=[::1]:9000 ,").unwrap();
        assert_eq!(pinned.get("api.github.com:443"), Some(&"127.0.0.1:8443".parse().unwrap()));
        assert_eq!(pinned.get("[::1]:80"), Some(&"[::1]:9000".parse().unwrap()));
        assert_eq!(parse_connect_to("").unwrap().len(), 0);
        for bad in ["api.github.com=127.0.0.1:1", "api.github.com:443=localhost:1", "api.github.com:443"] {
            let error = parse_connect_to(&format!("a.com:1=127.0.0.1:2,{bad}")).unwrap_err();
            assert!(error.contains(&format!("`{bad}`")) && error.contains("hint:"), "{error}");
        }
    }

    /// reattack8's F15: an operation's host lifts the private-address refusal only where DNS does
    /// not choose the address: an address, a pinned name, `localhost` (to loopback alone).
    #[test]
    fn an_operations_dns_name_does_not_reach_private_addresses() {
        let check = |user_named, operation_host, pinned, host, expected: Private| {
            let asked = PrivateAsked { user_named, operation_host, pinned, host };
            assert_eq!(
                Private::allowance(asked),
                expected,
                "{host} user {user_named} op {operation_host} pin {pinned}"
            );
        };
        check(false, true, false, "api.some-saas.com", Private::Refused);
        check(false, true, false, "127.0.0.1", Private::Any);
        check(false, true, false, "::1", Private::Any);
        check(false, true, true, "api.github.com", Private::Any);
        check(false, true, false, "localhost", Private::Loopback);
        check(true, false, false, "intranet.corp", Private::Any);
        check(false, false, true, "api.github.com", Private::Refused);
        check(false, false, false, "127.0.0.1", Private::Refused);
        let (loopback, lan, metadata) =
            ("127.0.0.1".parse().unwrap(), "10.0.0.5".parse().unwrap(), "169.254.169.254".parse().unwrap());
        assert!(
            Private::Loopback.admits(loopback) && !Private::Loopback.admits(lan) && !Private::Loopback.admits(metadata)
        );
        assert!(Private::Any.admits(metadata) && !Private::Refused.admits(loopback));
    }

    #[test]
    fn a_refused_plain_request_is_recorded_by_its_host_alone() {
        assert_eq!(shown_destination("http://example.com/secret/path?token=abc"), "example.com:80");
        assert_eq!(shown_destination("/relative"), "");
    }
}
