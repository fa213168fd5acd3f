//! A session's connections to its upstreams (SPEC §15). A tunnel's requests go out on one
//! connection. When the tunnel ends, an HTTP/1.1 connection still open and idle is kept for the
//! session's next tunnel to the same destination over the same scheme (its CONNECT then looks
//! nothing up and dials nothing: the kept connection's address was checked when it was dialled);
//! an h2 connection is shared by the session's tunnels while it stays open. A tool an agent runs
//! once per command (`gh`, `aws`, `curl`) opens a tunnel each time, and without this each paid a
//! lookup, a TCP and a TLS handshake with the upstream: a round trip or two to a distant host,
//! and the certificate chain verified again (BENCHMARKS.md, issue 49). Nothing is shared between
//! sessions, a kept connection is closed once it has been unused for [`KEPT_FOR`] (at most half
//! as long again), and at most [`MOST_KEPT`] are kept. A request that a kept connection could not
//! take (it closed meanwhile) was never written, and goes out once on a new connection instead.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::EgressSession;

/// How long a kept connection may wait unused for another tunnel.
pub(super) const KEPT_FOR: Duration = Duration::from_secs(30);
/// The most connections one session keeps unused at once (the oldest goes first).
pub(super) const MOST_KEPT: usize = 16;
/// How long a tunnel's HTTP/1.1 connection may take, after the tunnel ended, to be ready for
/// another request (its last response read to the end); one that is not by then is closed.
const SETTLE_FOR: Duration = Duration::from_secs(1);

/// A connection to an upstream: HTTP/1.1 (requests take turns) or h2 (streams at once).
#[derive(Clone)]
pub(super) enum Upstream {
    Http1(Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Body>>>),
    Http2(hyper::client::conn::http2::SendRequest<Body>),
}

/// Why a request did not get a response.
pub(super) enum SendError {
    /// The connection could not take it: nothing of it was written.
    NotSent(Box<Request<Body>>),
    /// It was (at least partly) written, and then the connection failed.
    Failed,
}

impl Upstream {
    /// Sends `request` (for `destination`) in the form this upstream reads.
    async fn send(&self, mut request: Request<Body>, destination: &str) -> Result<Response<Incoming>, SendError> {
        let sent = match self {
            Upstream::Http1(sender) => {
                for_http1_upstream(&mut request);
                let mut sender = sender.lock().await;
                if sender.ready().await.is_err() {
                    return Err(SendError::NotSent(Box::new(request)));
                }
                sender.try_send_request(request).await
            }
            Upstream::Http2(sender) => {
                for_h2_upstream(&mut request, destination);
                let mut sender = sender.clone();
                if sender.ready().await.is_err() {
                    return Err(SendError::NotSent(Box::new(request)));
                }
                sender.try_send_request(request).await
            }
        };
        sent.map_err(|mut error| {
            error.take_message().map_or(SendError::Failed, |request| SendError::NotSent(Box::new(request)))
        })
    }

    fn is_closed(&self) -> bool {
        match self {
            // Taken by a tunnel's request right now: in use, so not closed.
            Upstream::Http1(sender) => sender.try_lock().is_ok_and(|sender| sender.is_closed()),
            Upstream::Http2(sender) => sender.is_closed(),
        }
    }

    fn is_ready(&self) -> bool {
        match self {
            Upstream::Http1(sender) => sender.try_lock().is_ok_and(|sender| sender.is_ready()),
            Upstream::Http2(sender) => sender.is_ready(),
        }
    }
}

/// Why a tunnel's connection to its upstream could not be made.
pub(super) enum Unreachable {
    /// The checked address did not accept.
    Connect,
    /// The upstream's certificate is not one the roots vouch for (the handshake's error).
    Tls(String),
    /// The upstream hung up during HTTP's handshake, or the host is no TLS server name: the
    /// tunnel just ends.
    Gone,
}

/// What a kept connection is good for: the tunnels to `destination` dialled at `address`, over
/// TLS or not, whose client offered h2 or not (which decides what the upstream was offered).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct Key {
    pub destination: String,
    pub address: SocketAddr,
    pub tls: bool,
    pub h2_offered: bool,
}

struct KeptConnection {
    key: Key,
    upstream: Upstream,
    /// When it was kept (HTTP/1.1) or last handed to a tunnel (h2).
    since: Instant,
}

/// The connections a session keeps for its next tunnels.
pub(super) struct Upstreams {
    kept: Arc<Mutex<Kept>>,
    /// How long a kept connection may wait unused ([`KEPT_FOR`]; the tests shorten it).
    kept_for: Duration,
}

/// The kept connections, and whether a task is sweeping them.
#[derive(Default)]
struct Kept {
    connections: Vec<KeptConnection>,
    swept: bool,
}

impl Default for Upstreams {
    fn default() -> Upstreams {
        Upstreams::keeping_for(KEPT_FOR)
    }
}

impl Upstreams {
    /// Connections kept at most `kept_for` unused.
    pub(super) fn keeping_for(kept_for: Duration) -> Upstreams {
        Upstreams { kept: Arc::default(), kept_for }
    }

    /// The address at which `destination` has a connection kept (the newest), if any: its
    /// CONNECT then needs neither a lookup nor a new connection.
    pub(super) fn reaches(&self, destination: &str) -> Option<SocketAddr> {
        let kept = self.pruned();
        kept.connections.iter().rev().find(|kept| kept.key.destination == destination).map(|kept| kept.key.address)
    }

    /// A kept connection for `key` that can take a request now: an HTTP/1.1 one leaves the pool,
    /// an h2 one stays in it, shared.
    fn take(&self, key: &Key) -> Option<Upstream> {
        let mut kept = self.pruned();
        let connections = &mut kept.connections;
        let at = connections.iter().rposition(|kept| kept.key == *key && kept.upstream.is_ready())?;
        if let Upstream::Http1(_) = connections[at].upstream {
            return Some(connections.remove(at).upstream);
        }
        connections[at].since = Instant::now();
        Some(connections[at].upstream.clone())
    }

    /// Keeps `upstream` for `key`'s next tunnels. While any is kept, a task closes those unused
    /// for `kept_for` (checking twice as often), and ends with the session or the last of them.
    fn keep(&self, key: Key, upstream: Upstream) {
        let mut kept = self.pruned();
        if kept.connections.len() >= MOST_KEPT {
            kept.connections.remove(0);
        }
        kept.connections.push(KeptConnection { key, upstream, since: Instant::now() });
        if !kept.swept {
            kept.swept = true;
            let (swept, kept_for) = (Arc::downgrade(&self.kept), self.kept_for);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(kept_for / 2).await;
                    let Some(kept) = swept.upgrade() else { return };
                    let mut kept = kept.lock().expect("the kept connections are never poisoned");
                    prune(&mut kept.connections, kept_for);
                    if kept.connections.is_empty() {
                        kept.swept = false;
                        return;
                    }
                }
            });
        }
    }

    /// The kept connections, less those closed or unused for `kept_for`.
    fn pruned(&self) -> std::sync::MutexGuard<'_, Kept> {
        let mut kept = self.kept.lock().expect("the kept connections are never poisoned");
        prune(&mut kept.connections, self.kept_for);
        kept
    }
}

/// Drops the connections of `kept` that closed or were unused for `kept_for` (which closes them).
fn prune(kept: &mut Vec<KeptConnection>, kept_for: Duration) {
    kept.retain(|kept| kept.since.elapsed() < kept_for && !kept.upstream.is_closed());
}

/// The connection a tunnel's requests go out on, replaced when it could not take one.
pub(super) struct Link {
    key: Key,
    host: String,
    upstream: Mutex<Upstream>,
}

impl Link {
    /// A link for a tunnel reached as `key` says: on a connection the session kept, else on a new
    /// one to `host` (`dialled` when the CONNECT already dialled it).
    pub(super) async fn open(
        session: &EgressSession,
        key: Key,
        host: &str,
        dialled: Option<TcpStream>,
    ) -> Result<Link, Unreachable> {
        let upstream = match session.upstreams.take(&key) {
            Some(upstream) => upstream,
            None => connect(session, &key, host, dialled).await?,
        };
        Ok(Link { key, host: host.to_string(), upstream: Mutex::new(upstream) })
    }

    /// Sends `request` on the tunnel's connection; when that connection could not take it (it
    /// closed since it last answered: nothing was written), once more on a new connection, which
    /// the tunnel's later requests use too.
    pub(super) async fn send(&self, session: &EgressSession, request: Request<Body>) -> Result<Response<Incoming>, ()> {
        let upstream = self.current();
        let request = match upstream.send(request, &self.key.destination).await {
            Ok(response) => return Ok(response),
            Err(SendError::Failed) => return Err(()),
            Err(SendError::NotSent(request)) => *request,
        };
        // Boxed: a connection's making (resolve, dial, handshake) is a future of kilobytes,
        // and inline it would make every request's sending task that large (copied whole
        // into the task each time one is spawned) for a path few requests take.
        let fresh = Box::pin(connect(session, &self.key, &self.host, None)).await.map_err(|_| ())?;
        *self.upstream.lock().expect("a tunnel's link is never poisoned") = fresh.clone();
        fresh.send(request, &self.key.destination).await.map_err(|_| ())
    }

    fn current(&self) -> Upstream {
        self.upstream.lock().expect("a tunnel's link is never poisoned").clone()
    }

    /// The tunnel ended: its HTTP/1.1 connection is kept for the session's next tunnel once its
    /// last response has been read to the end (a response cut short closes it instead). An h2
    /// connection was kept when it was made.
    pub(super) fn release(self, session: Arc<EgressSession>) {
        let Link { key, upstream, .. } = self;
        let Upstream::Http1(sender) = upstream.into_inner().expect("a tunnel's link is never poisoned") else {
            return;
        };
        // Held elsewhere only by a request still being answered: then it is not idle.
        let Ok(sender) = Arc::try_unwrap(sender) else { return };
        let mut sender = sender.into_inner();
        tokio::spawn(async move {
            if let Ok(Ok(())) = tokio::time::timeout(SETTLE_FOR, sender.ready()).await {
                session.upstreams.keep(key, Upstream::Http1(Arc::new(tokio::sync::Mutex::new(sender))));
            }
        });
    }
}

/// A new connection for `key`: `dialled`, else `key.address` dialled now, then TLS verified for
/// `host` (h2 offered when the client offered it) or plain HTTP/1.1. An h2 connection is kept at
/// once, for the session's other tunnels to share.
pub(super) async fn connect(
    session: &EgressSession,
    key: &Key,
    host: &str,
    dialled: Option<TcpStream>,
) -> Result<Upstream, Unreachable> {
    let stream = match dialled {
        Some(stream) => stream,
        None => match super::dial_first(vec![key.address]).await {
            Some((stream, _)) => stream,
            None => return Err(Unreachable::Connect),
        },
    };
    if !key.tls {
        return handshake(stream, false).await.ok_or(Unreachable::Gone);
    }
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|_| Unreachable::Gone)?;
    // h2 is offered upstream only to an h2 client: an HTTP/1.1 client may ask for an Upgrade,
    // which h2 cannot carry.
    let tls = if key.h2_offered { session.upstream_tls_h2.clone() } else { session.upstream_tls.clone() };
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, stream)
        .await
        .map_err(|error| Unreachable::Tls(error.to_string()))?;
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let upstream = handshake(stream, h2).await.ok_or(Unreachable::Gone)?;
    if h2 {
        session.upstreams.keep(key.clone(), upstream.clone());
    }
    Ok(upstream)
}

/// HTTP over `upstream`, the connection driven on its own task: h2 when the upstream's ALPN chose
/// it, else HTTP/1.1 (upgrades allowed).
async fn handshake<U>(upstream: U, h2: bool) -> Option<Upstream>
where
    U: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(upstream);
    if h2 {
        let (sender, connection) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.ok()?;
        tokio::spawn(connection);
        return Some(Upstream::Http2(sender));
    }
    let (sender, connection) = hyper::client::conn::http1::handshake::<_, Body>(io).await.ok()?;
    tokio::spawn(connection.with_upgrades());
    Some(Upstream::Http1(Arc::new(tokio::sync::Mutex::new(sender))))
}

/// The request as an h2 upstream reads it: an absolute target (`https://` and the tunnel's
/// destination, never an authority the client wrote) and no `Host` header (`:authority` says it).
fn for_h2_upstream<B>(request: &mut Request<B>, destination: &str) {
    let authority = origin_authority(destination, "https");
    let path = request.uri().path_and_query().map_or("/", |path| path.as_str()).to_string();
    if let Ok(uri) = format!("https://{authority}{path}").parse() {
        *request.uri_mut() = uri;
    }
    request.headers_mut().remove(hyper::header::HOST);
    *request.version_mut() = hyper::Version::HTTP_2;
}

/// The request as an HTTP/1.1 upstream reads it: origin-form target, and a `Host` header (an h2
/// client names the host in `:authority` instead).
fn for_http1_upstream<B>(request: &mut Request<B>) {
    if let Some(authority) = request.uri().authority().cloned()
        && !request.headers().contains_key(hyper::header::HOST)
        && let Ok(host) = hyper::header::HeaderValue::from_str(authority.as_str())
    {
        request.headers_mut().insert(hyper::header::HOST, host);
    }
    if request.uri().authority().is_some() {
        let origin = request.uri().path_and_query().map_or("/", |path| path.as_str()).to_string();
        if let Ok(uri) = origin.parse() {
            *request.uri_mut() = uri;
        }
    }
    *request.version_mut() = hyper::Version::HTTP_11;
}

/// `destination` (`host:port`) as a request's authority: the port left out when it is the
/// scheme's own.
pub(super) fn origin_authority(destination: &str, scheme: &str) -> String {
    let default = if scheme == "https" { ":443" } else { ":80" };
    destination.strip_suffix(default).unwrap_or(destination).to_string()
}
