//! Serving a confined launch's network namespace (SPEC §15). The launch's helper listens inside
//! the agent's namespace (its `lo` only) at two ports and hands both listeners, through the
//! launcher, to this control socket (`$AILERON_HOME/agent-network.sock`, the home's 0700 and
//! masked from every launched agent). The daemon then serves its API, `/mcp` and the gateway on
//! the first and the session's egress proxy ([`crate::dataplane::agent_egress`]) on the second,
//! and is the only process holding either: the daemon itself never listens beyond host loopback,
//! and the listener a connection arrives on is the session it belongs to.
//!
//! The launcher keeps its control connection open for the agent's lifetime; when it closes (the
//! agent exited, or the launcher died) or the daemon shuts down, both listeners and every tunnel
//! close with it, and with the last descriptor the namespace is gone.
//!
//! The hand-over names the session and carries the daemon token: only the user's own launcher
//! (which read `daemon.json`) can attach listeners, and only to a confined session still active.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixStream;

use super::AppState;
use aileron_core::policy::AgentEgressPolicy;

use crate::dataplane::agent_egress::{EgressSession, SessionCa, SessionRules};
use crate::platform::home::Home;
use crate::platform::principal::Scope;
use crate::stores::rules::Subject;
use crate::stores::sessions::{Confinement, SessionStatus};
use crate::wire::{NetworkHandover as Handover, NetworkHandoverAnswer};

/// Binds the control socket (a stale one from a killed daemon is replaced: this runs under the
/// daemon's lock).
pub fn listen(home: &Home) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let path = home.agent_network_socket();
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Accepts hand-overs until the daemon shuts down.
pub async fn serve_control(listener: tokio::net::UnixListener, state: Arc<AppState>) {
    let mut shutdown = state.shutdown.subscribe();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(attach(state.clone(), stream));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            () = stopping(&mut shutdown) => break,
        }
    }
}

/// One hand-over: checks it, answers, then serves the session's listeners until the launcher's
/// connection closes.
async fn attach(state: Arc<AppState>, stream: UnixStream) {
    let ours = stream.peer_cred().is_ok_and(|peer| peer.uid() == nix::unistd::getuid().as_raw());
    if !ours {
        return;
    }
    let Ok(stream) = stream.into_std() else { return };
    let received = tokio::task::spawn_blocking(move || {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let (message, fds) = crate::platform::confinement::receive_fds(&stream)?;
        Ok::<_, std::io::Error>((stream, message, fds))
    })
    .await;
    let Ok(Ok((stream, message, fds))) = received else { return };
    let checked = check(&state, &message, fds);
    let answer = match &checked {
        Ok(attached) => {
            NetworkHandoverAnswer { ca_certificate: Some(attached.ca.certificate_pem().to_string()), error: None }
        }
        Err(reason) => NetworkHandoverAnswer { ca_certificate: None, error: Some(reason.clone()) },
    };
    let mut answer = serde_json::to_vec(&answer).unwrap_or_default();
    answer.push(b'\n');
    let answered = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        (&stream).write_all(&answer)?;
        stream.set_nonblocking(true)?;
        Ok::<_, std::io::Error>(stream)
    })
    .await;
    let (Ok(Ok(stream)), Ok(Attached { handover, agent, ca, policy, api, proxy, forwards })) = (answered, checked)
    else {
        return;
    };
    let Ok(mut control) = UnixStream::from_std(stream) else { return };
    let (closed, _) = tokio::sync::watch::channel(false);
    let when_closed = |closed: &tokio::sync::watch::Sender<bool>| {
        let mut closed = closed.subscribe();
        async move {
            let _ = closed.wait_for(|closed| *closed).await;
        }
    };
    let services = state.services.clone();
    let credentialing = tokio::task::spawn_blocking(move || {
        crate::dataplane::agent_egress::Credentialing::from_store(
            &services.store,
            services.credentials.clone(),
            services.oauth.clone(),
        )
    })
    .await
    .unwrap_or_else(|_| crate::dataplane::agent_egress::Credentialing::none());
    // The agent's own requests are decided by the user's rules as its runs are (SPEC §16).
    let subject = Subject::Agent { agent, session_id: handover.session_id.clone(), contained: true };
    let rules = SessionRules { rules: state.services.rules.clone(), subject };
    let egress = Arc::new(
        EgressSession::new(
            state.services.audit.clone(),
            handover.session_id.clone(),
            handover.allow_private.iter().map(|destination| destination.to_ascii_lowercase()).collect(),
            ca,
            policy,
        )
        .with_connect_to(state.connect_to.clone())
        .with_rules(rules)
        .with_telemetry(state.services.telemetry.clone())
        .with_credentialing(Arc::new(credentialing.with_approvals(Arc::new(
            crate::workflows::approvals::ProxyApprovals {
                services: state.services.clone(),
                hold: std::time::Duration::from_secs(handover.approval_hold_seconds.unwrap_or(55).clamp(1, 600)),
                unconfined: false,
            },
        )))),
    );
    let mut relays = tokio::task::JoinSet::new();
    for (listener, destination) in forwards {
        relays.spawn(egress.clone().forward_tcp(listener, destination, when_closed(&closed)));
    }
    let proxy_task = tokio::spawn(egress.clone().serve(proxy, when_closed(&closed)));
    let api_task = tokio::spawn(super::connections::serve(
        api,
        super::app_in_session(state.clone(), egress.clone()),
        super::connections::Peers::Anyone,
        when_closed(&closed),
    ));
    // The launcher sends nothing more: the read ends when its side closes.
    let mut shutdown = state.shutdown.subscribe();
    let mut byte = [0u8; 1];
    tokio::select! {
        _ = tokio::io::AsyncReadExt::read(&mut control, &mut byte) => {}
        () = stopping(&mut shutdown) => {}
    }
    closed.send_replace(true);
    let _ = tokio::join!(proxy_task, api_task, relays.join_all());
}

/// Completes when the daemon starts shutting down.
async fn stopping(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stopping| *stopping).await;
}

/// A hand-over the daemon serves: the session, its CA and policy, its listeners.
struct Attached {
    handover: Handover,
    /// The session's agent, as the session registry names it.
    agent: String,
    ca: SessionCa,
    policy: AgentEgressPolicy,
    api: tokio::net::TcpListener,
    proxy: tokio::net::TcpListener,
    /// `--allow-tcp`: each listener and the destination it relays to.
    forwards: Vec<(tokio::net::TcpListener, String)>,
}

fn check(state: &AppState, message: &[u8], fds: Vec<std::os::fd::OwnedFd>) -> Result<Attached, String> {
    let handover: Handover = serde_json::from_slice(message.trim_ascii())
        .map_err(|e| format!("the hand-over is not the expected JSON: {e}"))?;
    let admin = state.services.tokens.resolve(&handover.token).is_some_and(|principal| principal.allows(Scope::Admin));
    if !admin {
        return Err("the hand-over's token is not the daemon token".into());
    }
    let session = state
        .services
        .sessions
        .get(&handover.session_id)
        .ok_or_else(|| format!("no session `{}`", handover.session_id))?;
    if session.status != SessionStatus::Active || session.confinement != Confinement::Namespaces {
        return Err(format!("session `{}` is not an active confined session", handover.session_id));
    }
    if fds.len() != 2 + handover.allow_tcp.len() {
        return Err(format!("expected {} listeners, got {}", 2 + handover.allow_tcp.len(), fds.len()));
    }
    let mut fds = fds.into_iter();
    let (api, proxy) = (fds.next().expect("counted"), fds.next().expect("counted"));
    let listener = |fd: std::os::fd::OwnedFd| {
        let listener = std::net::TcpListener::from(fd);
        if !listener.local_addr().is_ok_and(|address| address.ip().is_loopback()) {
            return Err("a handed-over descriptor is not a loopback TCP listener".to_string());
        }
        listener.set_nonblocking(true).map_err(|e| format!("{e}"))?;
        tokio::net::TcpListener::from_std(listener).map_err(|e| format!("{e}"))
    };
    let (api, proxy) = (listener(api)?, listener(proxy)?);
    let mut forwards = Vec::new();
    for (fd, destination) in fds.zip(&handover.allow_tcp) {
        forwards.push((listener(fd)?, destination.to_ascii_lowercase()));
    }
    let ca = SessionCa::new(&handover.session_id).map_err(|e| format!("making the session's CA: {e}"))?;
    let policy = egress_policy(&state.services.home)?;
    Ok(Attached { handover, agent: session.agent, ca, policy, api, proxy, forwards })
}

/// `$AILERON_HOME/egress.toml`, read for each session (a change applies to the next launch); no
/// file is the open policy, a file that does not parse refuses the launch with its line.
fn egress_policy(home: &crate::platform::home::Home) -> Result<AgentEgressPolicy, String> {
    let path = home.root().join(aileron_core::policy::AGENT_EGRESS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => AgentEgressPolicy::parse(&path.display().to_string(), &text).map_err(|error| error.to_string()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(AgentEgressPolicy::default()),
        Err(error) => Err(format!("reading {}: {error}", path.display())),
    }
}
