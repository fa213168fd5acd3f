//! The per-spawn CONNECT proxy: the only network a spawned program has. It listens on a Unix
//! socket in a private directory; inside the program's network namespace a forwarder on
//! `127.0.0.1:3128` relays to it (see `jail.rs`). Each `CONNECT host:port` is checked exactly like
//! a connector's `http_request` (the manifest's hosts, then the action's `network:` subset; names
//! resolve to public addresses only unless the manifest names the address literally), dialled at
//! the address that was checked, and audited as `spawn.network`. Nothing but CONNECT is served:
//! plain-HTTP proxying would put request lines the proxy cannot vouch for on the wire.
//!
//! Refusals are recorded once per distinct host and reason (at most [`MAX_REFUSALS_RECORDED`] a
//! spawn); repeats are counted, and [`SpawnProxy::finish`] writes one summary record with the
//! totals. A program looping on a refused CONNECT wrote an fsynced record each time, 620 KB a
//! second (the re-attack's L6): the log stays complete in what it says and bounded in size.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aileron_core::audit::Actor;
use aileron_core::manifest::ConnectorManifest;
use aileron_core::policy::{self, CapabilitySubset};
use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::ProxiedRequest;
use aileron_core::{Boundary, Failure};
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::stores::audit_log::{AuditEvent, AuditLog};

/// `aileron.proxy.source` of a spawned program's connection.
const SOURCE: &str = "spawn_proxy";

/// Distinct refusals (host and reason) recorded one by one per spawn; the rest are counted.
pub(crate) const MAX_REFUSALS_RECORDED: usize = 16;

/// Connections one spawn may open, each recorded before it is made; past them a CONNECT is
/// refused (and counted like any refusal). A program looping on an allowed destination wrote an
/// fsynced record per connection, 16,947 in 30 s (the eleventh re-attack); a `git fetch` opens one
/// or two.
pub(crate) const MAX_CONNECTIONS: u64 = 256;

/// What the proxy checks and records against.
pub(crate) struct ProxyContext {
    pub manifest: Arc<ConnectorManifest>,
    pub subset: CapabilitySubset,
    pub audit: Arc<AuditLog>,
    pub actor: Actor,
    pub session_id: Option<String>,
    /// The spawn's identity keys (connector, action, run, program, op), on every record.
    pub base_payload: Map<String, Value>,
}

/// What a spawn's proxy refused: which (host, reason) pairs have a record, and the totals.
#[derive(Default)]
struct Refusals {
    recorded: std::collections::BTreeSet<(String, String)>,
    total: u64,
    unrecorded: u64,
}

/// The context and the refusal tally the connection tasks share.
struct Shared {
    context: ProxyContext,
    refusals: std::sync::Mutex<Refusals>,
    /// Connections opened (or about to be) so far.
    connections: std::sync::atomic::AtomicU64,
}

/// A running proxy; stops (and its socket directory goes) when dropped.
pub(crate) struct SpawnProxy {
    socket: PathBuf,
    task: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
    _dir: tempfile::TempDir,
}

impl SpawnProxy {
    pub(crate) async fn start(context: ProxyContext) -> Result<SpawnProxy, Failure> {
        let unavailable = |e: std::io::Error| {
            Failure::runtime_error(Boundary::Runtime, format!("starting the spawn's network proxy: {e}"))
        };
        let dir = tempfile::Builder::new().prefix("aileron-spawn-proxy-").tempdir().map_err(unavailable)?;
        let socket = dir.path().join("proxy.sock");
        let listener = UnixListener::bind(&socket).map_err(unavailable)?;
        let shared = Arc::new(Shared { context, refusals: Default::default(), connections: Default::default() });
        let accepting = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(accepting.clone(), stream));
            }
        });
        Ok(SpawnProxy { socket, task, shared, _dir: dir })
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Stops the proxy once its spawn has ended and, when some refusals were only counted,
    /// records the spawn's totals.
    pub(crate) async fn finish(self) {
        self.task.abort();
        let (total, unrecorded) = {
            let refusals = self.shared.refusals.lock().expect("the tally is never poisoned");
            (refusals.total, refusals.unrecorded)
        };
        if unrecorded == 0 {
            return;
        }
        let mut payload = self.shared.context.base_payload.clone();
        let summary = ProxiedRequest {
            source: SOURCE,
            reject_reason: Some("refusals_summarised".to_string()),
            refused_count: Some(total),
            refused_unrecorded: Some(unrecorded),
            ..ProxiedRequest::default()
        };
        payload.extend(summary.into_payload());
        let _ = audit(&self.shared.context, payload).await;
    }
}

impl Drop for SpawnProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(shared: Arc<Shared>, mut stream: UnixStream) {
    let context = &shared.context;
    let Some(head) = crate::dataplane::headers::read_connect_head(&mut stream).await else { return };
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, authority) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let shown: String = authority.chars().take(256).collect();
    if !method.eq_ignore_ascii_case("CONNECT") {
        let failure =
            Failure::capability_denied(Boundary::Sandbox, "a spawned program's proxy serves CONNECT only (use https)")
                .with_detail("requested", format!("method:{}", method.chars().take(32).collect::<String>()));
        refuse(&shared, &mut stream, &shown, failure, "405 Method Not Allowed").await;
        return;
    }
    let target = match policy::check_egress(&context.manifest, &context.subset, &format!("https://{authority}/")) {
        Ok(target) => target,
        Err(failure) => {
            refuse(&shared, &mut stream, &shown, failure, "403 Forbidden").await;
            return;
        }
    };
    if shared.connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= MAX_CONNECTIONS {
        let failure = Failure::resource_limit(
            "spawn_connections",
            format!("the program opened {MAX_CONNECTIONS} connections, the most one spawn may"),
        );
        refuse(&shared, &mut stream, &target.host_port, failure, "403 Forbidden").await;
        return;
    }
    let literal = target.host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().ok();
    let addresses: Vec<std::net::SocketAddr> = match literal {
        Some(ip) => vec![std::net::SocketAddr::new(ip, target.port)],
        None => match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
            Ok(found) => found.filter(|address| crate::dataplane::public_address::is_elsewhere(address.ip())).collect(),
            Err(_) => Vec::new(),
        },
    };
    if addresses.is_empty() {
        let failure = Failure::capability_denied(
            Boundary::Sandbox,
            format!(
                "{} {}; a local address must be named literally in the manifest",
                target.host,
                crate::dataplane::public_address::NON_PUBLIC_REFUSAL
            ),
        )
        .with_detail("requested", format!("network:{}", target.host_port));
        refuse(&shared, &mut stream, &target.host_port, failure, "403 Forbidden").await;
        return;
    }
    let mut upstream = None;
    for address in &addresses {
        if let Ok(connected) = TcpStream::connect(address).await {
            upstream = Some(connected);
            break;
        }
    }
    let Some(mut upstream) = upstream else {
        let failure = Failure::network(format!("connecting to {} failed", target.host_port));
        refuse(&shared, &mut stream, &target.host_port, failure, "502 Bad Gateway").await;
        return;
    };
    let mut payload = context.base_payload.clone();
    let connected = ProxiedRequest {
        source: SOURCE,
        method: Some("CONNECT".to_string()),
        host: Some(target.host_port.clone()),
        ..ProxiedRequest::default()
    };
    payload.extend(connected.into_payload());
    // Fail closed: a connection that cannot be recorded is not made.
    if audit(context, payload).await.is_err() {
        let _ = stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n").await;
        return;
    }
    if stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
}

async fn refuse(shared: &Shared, stream: &mut UnixStream, authority: &str, failure: Failure, status: &str) {
    let first_of_its_kind = {
        let mut refusals = shared.refusals.lock().expect("the tally is never poisoned");
        refusals.total += 1;
        let key = (authority.to_string(), failure.class.as_str().to_string());
        let record = refusals.recorded.contains(&key) || refusals.recorded.len() >= MAX_REFUSALS_RECORDED;
        if record {
            refusals.unrecorded += 1;
        } else {
            refusals.recorded.insert(key);
        }
        !record
    };
    if first_of_its_kind {
        let context = &shared.context;
        let mut payload = context.base_payload.clone();
        let refused = ProxiedRequest {
            source: SOURCE,
            host: Some(authority.to_string()),
            reject_reason: Some(failure.class.as_str().to_string()),
            ..ProxiedRequest::default()
        };
        payload.extend(refused.into_payload());
        payload.extend(failure.audit_payload());
        let _ = audit(context, payload).await;
    }
    let _ = stream
        .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes())
        .await;
}

async fn audit(context: &ProxyContext, payload: Map<String, Value>) -> Result<(), ()> {
    let event = AuditEvent {
        event_type: EventType::SpawnNetwork,
        actor: context.actor.clone(),
        session_id: context.session_id.clone(),
        payload,
        audit_id: None,
    };
    context.audit.append(event).await.map(|_| ()).map_err(|_| ())
}
