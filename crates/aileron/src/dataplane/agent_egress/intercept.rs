//! Inside a tunnel the proxy opened (SPEC §15): TLS is terminated with the session CA's leaf for
//! the CONNECT host and re-originated to the checked address, verified against the host's roots
//! (and the daemon's `SSL_CERT_FILE`/`SSL_CERT_DIR`); a tunnel that starts with plain HTTP is
//! served the same way without TLS, unless it leads to an operation's host (not a loopback
//! address): then each request is refused, nothing credentialed in clear. Either way each request is read by hyper, sent on the
//! tunnel's upstream connection (one an earlier tunnel of the session left open, or a new one:
//! [`super::upstreams`]), and recorded once — `sandbox.proxy.passthrough` with the method, the path
//! (never the query), the status and the time to the response head — before its response goes
//! back: a response that cannot be recorded is answered 503 instead. A request is sent and
//! recorded on a task of its own, so one that got no response head is recorded too (no status,
//! `client_gone`, `upstream_timeout` after [`super::RESPONSE_HEAD_TIMEOUT`], or
//! `upstream_request_failed`), whether or not anyone still waits for it. Upgrades (WebSocket) are
//! relayed byte for byte once both sides switched. Anything else in a tunnel is refused. The
//! client may speak h2 (offered by ALPN with HTTP/1.1); the upstream is offered h2 when the client
//! chose it, else HTTP/1.1 alone.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::ProxiedRequest;
use axum::body::Body;
use futures_util::future::BoxFuture;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::EgressSession;
use super::upstreams::{Key, Link, Unreachable, origin_authority};
use serde_json::{Map, Value, json};

use super::admit::{Admitted, admit};
use super::sealed::{Decision, SealedInjection, sign_aws};
use super::{HeldRequest, HoldOutcome, answer, envelope, plain};
use crate::dataplane::redaction::{RedactedBody, encoded, redact_head};
use crate::stores::bindings::Injection;

/// `aileron.proxy.source` of a request read inside a tunnel (seed 003's name).
pub const SOURCE: &str = "transparent_connect_tls";
/// A credentialed response up to this size is redacted whole and keeps a `Content-Length`.
const WHOLE_BODY_BYTES: usize = 64 * 1024;
/// How long a client may take to start its side of a tunnel (the TLS hello or a request line),
/// and then each request head: a session's default (`EgressSession::with_first_byte_timeout`).
pub(super) const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a client may take over its TLS handshake once it started one (at most the first
/// byte's timeout, which the tests shorten).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a tunnel leads: the CONNECT host as asked, its port, the address checked and dialled.
#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub destination: String,
    pub address: SocketAddr,
}

/// Serves one tunnel: `client` has just been told `200 Connection established`. `dialled` is
/// connected to the checked address, or `None` when the session kept a connection there
/// ([`super::upstreams`]).
pub async fn relay(session: Arc<EgressSession>, client: TcpStream, dialled: Option<TcpStream>, target: Target) {
    let mut first = [0u8; 1];
    match tokio::time::timeout(session.first_byte_timeout, client.peek(&mut first)).await {
        Ok(Ok(1)) => {}
        // Its name was looked up and dialled: that is on record even though nothing was asked.
        _ => return session.refusal(&target.destination, "CONNECT", Refusal::Unused).await,
    }
    // 0x16: a TLS handshake record.
    if first[0] != 0x16 {
        // Plain text to an operation's host would carry the bound credential unencrypted to
        // whatever the name resolved to, unverified: refused (SPEC §4.4's rule for connectors,
        // https or a loopback address the manifest names). Nothing is dialled, held or counted.
        if session.credentialing.names_host(&target.destination) && !is_loopback_address(&target.host) {
            drop(dialled);
            return refuse_plain_text(session, client, target).await;
        }
        return serve(session, client, false, dialled, target, "http").await;
    }
    let config = match session.ca.server_config(&target.host) {
        Ok(config) => config,
        Err(reason) => {
            log_line!("aileron daemon: no certificate for {}: {reason}", target.host);
            return;
        }
    };
    // A handshake the client never finishes holds two descriptors (its side and the upstream's):
    // it has as long as a first byte, at most HANDSHAKE_TIMEOUT.
    let deadline = session.first_byte_timeout.min(HANDSHAKE_TIMEOUT);
    let client = match tokio::time::timeout(deadline, tokio_rustls::TlsAcceptor::from(config).accept(client)).await {
        Ok(Ok(client)) => client,
        Ok(Err(_)) => {
            // The client refused the session's certificate (a tool that ignores the trust bundle).
            session.refusal(&target.destination, "GET", Refusal::ClientTls).await;
            return;
        }
        Err(_) => {
            session.refusal(&target.destination, "GET", Refusal::ClientTlsTimeout).await;
            return;
        }
    };
    let client_h2 = client.get_ref().1.alpn_protocol() == Some(b"h2");
    serve(session, client, client_h2, dialled, target, "https").await
}

/// The most characters of a path a record keeps.
const RECORDED_PATH_CHARS: usize = 2048;

/// `path` as a record keeps it: whole, or its first [`RECORDED_PATH_CHARS`] characters and a mark
/// saying it was cut and how long it was, so a trail never shows a cut path as the one sent.
pub(super) fn recorded_path(path: &str) -> String {
    recorded_cut(path, RECORDED_PATH_CHARS)
}

/// `text` as recorded: its first `kept` characters, and when there were more, a mark saying how
/// many there were in all.
pub(super) fn recorded_cut(text: &str, kept: usize) -> String {
    let length = text.chars().count();
    if length <= kept {
        return text.to_string();
    }
    let shown: String = text.chars().take(kept).collect();
    format!("{shown}…[cut: {length} characters in all]")
}

/// Whether `host` (a CONNECT host) is a loopback address written as one, never a name.
fn is_loopback_address(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Answers every request of a plain-text tunnel to an operation's host 403, each recorded as
/// `connector.proxy.rejected` (`plaintext_to_operation_host`) with its method and path; nothing
/// of it leaves the machine.
async fn refuse_plain_text(session: Arc<EgressSession>, client: TcpStream, target: Target) {
    let head_timeout = session.first_byte_timeout;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (session, target) = (session.clone(), target.clone());
        async move {
            let record = ProxiedRequest {
                scheme: Some("http".to_string()),
                path: Some(recorded_path(request.uri().path())),
                address: Some(target.address.to_string()),
                ..session.request(SOURCE, request.method().as_str(), &target.destination)
            };
            let message = format!(
                "{} has operations that carry your credential, and this request was plain HTTP inside the \
                 tunnel: refused, nothing was sent; hint: speak TLS in the tunnel (an https:// URL, the \
                 session's CA trusted)",
                target.destination
            );
            let error = json!({"class": "plaintext_to_operation_host", "message": message});
            Ok::<_, Infallible>(reject(&session, record, Map::new(), StatusCode::FORBIDDEN, error).await)
        }
    });
    let _ = serve_client(client, false, service, head_timeout).await;
}

/// The two refusals a tunnel can end in after its CONNECT was allowed.
pub enum Refusal {
    /// The agent's client did not accept the session CA's certificate.
    ClientTls,
    /// The agent's client did not finish its TLS handshake in time.
    ClientTlsTimeout,
    /// The upstream's certificate is not one the host's roots vouch for.
    UpstreamTls,
    /// The checked address no longer accepts (the CONNECT found a kept connection, gone since).
    UpstreamConnect,
    /// What came through the tunnel is not HTTP.
    NotHttp,
    /// The client closed the tunnel, or sent nothing in time, before a first byte.
    Unused,
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::ClientTls => "client_tls_failed",
            Refusal::ClientTlsTimeout => "client_tls_timeout",
            Refusal::UpstreamTls => "upstream_tls_failed",
            Refusal::UpstreamConnect => "upstream_connect_failed",
            Refusal::NotHttp => "non_http_tunnel",
            Refusal::Unused => "tunnel_unused",
        }
    }
}

/// Serves the agent's side of a tunnel: each request it sends is forwarded on the tunnel's link
/// to the upstream, recorded and answered. An h2 client's streams go out at once on an h2
/// upstream, or take turns on an HTTP/1.1 one. A link that cannot be made is refused: recorded
/// once, and every request answered 502 with the reason.
async fn serve<C>(
    session: Arc<EgressSession>,
    client: C,
    client_h2: bool,
    dialled: Option<TcpStream>,
    target: Target,
    scheme: &'static str,
) where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    // What the upstream connection must be: to this destination and address, over TLS when the
    // client spoke it, offered h2 when the client chose it.
    let key = Key {
        destination: target.destination.clone(),
        address: target.address,
        tls: scheme == "https",
        h2_offered: client_h2,
    };
    let link = match Link::open(&session, key, &target.host, dialled).await {
        Ok(link) => link,
        Err(unreachable) => {
            let (refusal, reason) = match unreachable {
                Unreachable::Connect => (Refusal::UpstreamConnect, Refusal::UpstreamConnect.reason().to_string()),
                Unreachable::Tls(error) => {
                    (Refusal::UpstreamTls, format!("{}: {error}", Refusal::UpstreamTls.reason()))
                }
                Unreachable::Gone => return,
            };
            session.refusal(&target.destination, "CONNECT", refusal).await;
            return refuse_every_request(client, client_h2, reason, session.first_byte_timeout).await;
        }
    };
    let forwarding = session.clone();
    let destination = target.destination.clone();
    // Shared by the tunnel's requests, with the address's text made once (each record names it).
    let tunnel = Arc::new(Tunnel { address: target.address.to_string(), target, link });
    let serving = tunnel.clone();
    let service =
        hyper::service::service_fn(move |request| forward(forwarding.clone(), serving.clone(), scheme, request));
    let served = serve_client(client, client_h2, service, session.first_byte_timeout).await;
    if !client_h2 && served.as_ref().is_err_and(|error| error.is_parse()) {
        session.refusal(&destination, "CONNECT", Refusal::NotHttp).await;
    }
    if let Ok(tunnel) = Arc::try_unwrap(tunnel) {
        tunnel.link.release(session);
    }
}

/// Serves `service` to the agent's side of a tunnel: h2 when its ALPN chose it, else HTTP/1.1 (a
/// request head within `head_timeout`, upgrades allowed).
async fn serve_client<C, S, F>(client: C, h2: bool, service: S, head_timeout: Duration) -> hyper::Result<()>
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible, Future = F>,
    F: std::future::Future<Output = Result<Response<Body>, Infallible>> + Send + 'static,
{
    let (io, timer) = (TokioIo::new(client), hyper_util::rt::TokioTimer::new());
    if h2 {
        hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .timer(timer)
            .serve_connection(io, service)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .timer(timer)
            .header_read_timeout(head_timeout)
            .serve_connection(io, service)
            .with_upgrades()
            .await
    }
}

/// A tunnel's [`Target`] and its link to the upstream, as its requests share them.
struct Tunnel {
    target: Target,
    /// `target.address` as text.
    address: String,
    link: Link,
}

async fn forward(
    session: Arc<EgressSession>,
    tunnel: Arc<Tunnel>,
    scheme: &'static str,
    mut request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let target = &tunnel.target;
    let started = Instant::now();
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let client_upgrade =
        request.headers().contains_key(hyper::header::UPGRADE).then(|| hyper::upgrade::on(&mut request));
    let mut request = request.map(Body::new);
    let mut approval = None;
    let mut record = ProxiedRequest {
        scheme: Some(scheme.to_string()),
        path: Some(recorded_path(&path)),
        address: Some(tunnel.address.clone()),
        ..session.request(SOURCE, &method, &target.destination)
    };
    let operation_host = session.credentialing.names_host(&target.destination);
    // The virtual host the request names is the one the tunnel leads to, or it is refused: a
    // credentialed request is not handed to another site behind the same front end, an allowlist
    // is not crossed by a `Host` header, and the record names the host that served it.
    if let Some(named) = misdirected(&request, target) {
        let message = format!(
            "this request names {named} but its tunnel leads to {}: refused, nothing was sent; hint: open a \
             tunnel (CONNECT) to the host the request is for",
            target.destination
        );
        let error = json!({"class": "misdirected_request", "message": message});
        return Ok(refuse_request(&session, record, operation_host, StatusCode::MISDIRECTED_REQUEST, error).await);
    }
    if request.uri().authority().is_none() && !request.headers().contains_key(hyper::header::HOST) {
        // An HTTP/1.0 request without one: the upstream is told the tunnel's host.
        if let Ok(host) = hyper::header::HeaderValue::from_str(&origin_authority(&target.destination, scheme)) {
            request.headers_mut().insert(hyper::header::HOST, host);
        }
    }
    let mut event_type = EventType::SandboxProxyPassthrough;
    let mut binding = None;
    let mut sealed = None;
    let mut aws = None;
    // A path a GraphQL operation covers: which operation it is depends on the document.
    let mut graphql = None;
    // Held while a body this request's handling reads whole is in memory (until it is answered).
    let mut _whole_body = None;
    // A method override would let an ungated operation's method carry a gated one's, credentialed
    // (decision 0017): refused on an operation's host, matched or not.
    if operation_host {
        if (form_readings(&request).any() || json_readable(&request))
            && !hyper::body::Body::is_end_stream(request.body())
        {
            _whole_body = session.whole_bodies.clone().acquire_owned().await.ok();
        }
        let (read, overridden) = method_override(request).await;
        request = read;
        if let Some(found) = overridden {
            let message = format!(
                "{found} asks {} to treat this {method} as another method, and operations are matched by the \
                 method sent: refused, nothing was sent; hint: send the request with the method it means",
                target.destination
            );
            let error = json!({"class": "method_override_refused", "message": message});
            return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
        }
    }
    // Which operation a request to a path a GraphQL operation covers is depends on its document.
    let graphql_path = session.credentialing.covers_graphql(&target.destination, &path);
    // A GraphQL document in the URL is never read, and a server may take it over the body's (or
    // answer a `GET` carrying one): refused on a path a GraphQL operation covers.
    if graphql_path && request.uri().query().is_some_and(aileron_core::policy::graphql_in_query) {
        let message = format!(
            "this request to {} carries a GraphQL document (or a persisted query's name) in its URL, which is not \
             read to know which operation it is: refused, nothing was sent; hint: send the document as the body's \
             `query` in a POST",
            target.destination
        );
        let error = json!({"class": "graphql_in_url", "message": message});
        return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
    }
    let needs_graphql = graphql_path && session.credentialing.needs_graphql(&method, &target.destination, &path);
    // Only the body of a GraphQL operation's method is read for its document, and a server may
    // read one in another's (Rails merges a `GET`'s JSON body into the `params` it takes `query`
    // from): a body on a GraphQL path in any other method is refused (the fifty-third
    // re-attack's F1). Refusing rather than reading it was chosen as the URL's document is
    // refused: no client sends one, and what a server makes of it is the server's choice.
    if graphql_path && !needs_graphql && !hyper::body::Body::is_end_stream(request.body()) {
        if _whole_body.is_none() {
            _whole_body = session.whole_bodies.clone().acquire_owned().await.ok();
        }
        let (parts, body) = request.into_parts();
        match axum::body::to_bytes(body, super::sealed::MAX_GRAPHQL_BODY_BYTES).await {
            Ok(bytes) if bytes.is_empty() => request = Request::from_parts(parts, Body::empty()),
            _ => {
                let message = format!(
                    "this {method} to {} carries a body on a path GraphQL operations cover, and only the body of a \
                     request in a GraphQL operation's method is read to know which operation it is: refused, nothing \
                     was sent; hint: send a GraphQL document as a POST's body, and other requests to this path \
                     without one",
                    target.destination
                );
                let error = json!({"class": "graphql_body_method", "message": message});
                return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
            }
        }
    }
    if needs_graphql {
        if _whole_body.is_none() {
            _whole_body = session.whole_bodies.clone().acquire_owned().await.ok();
        }
        // A body in a content coding is read by a server that decodes it (body-parser inflates
        // gzip and deflate) and not by this reading, which takes the bytes sent: refused, as
        // decoding here would need a bound on what a small body inflates to, and no GraphQL
        // client sends one (the fifty-sixth re-attack's N5).
        if let Some(coding) = content_coding(request.headers()) {
            let message = format!(
                "the GraphQL request's body is in the content coding `{coding}`, which is not read to know which \
                 operation it is: refused, nothing was sent; hint: send the body uncompressed"
            );
            let error = json!({"class": "graphql_unreadable", "message": message});
            return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
        }
        // Read as JSON, and as a form when a server could read it so (the fifty-third re-attack's F5).
        let forms = form_readings(&request);
        let (parts, body) = request.into_parts();
        let read = axum::body::to_bytes(body, super::sealed::MAX_GRAPHQL_BODY_BYTES).await;
        let names = match &read {
            Ok(bytes) => aileron_core::policy::graphql_names(bytes, forms),
            Err(_) => Err(format!("the GraphQL request is over {} bytes", super::sealed::MAX_GRAPHQL_BODY_BYTES)),
        };
        request = Request::from_parts(parts, Body::from(read.unwrap_or_default()));
        match names {
            Ok(names) => graphql = Some(names),
            Err(reason) => {
                let message = format!("{reason}; a request to a GraphQL operation is read to know which it is");
                let error = json!({"class": "graphql_unreadable", "message": message});
                return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
            }
        }
    }
    let query = request.uri().query().map(str::to_string);
    let header_names: Vec<&str> = request.headers().keys().map(|name| name.as_str()).collect();
    let decided = session.credentialing.decide(
        &method,
        &target.destination,
        &path,
        query.as_deref(),
        &header_names,
        graphql.as_ref(),
    );
    drop(header_names);
    match decided {
        Decision::Passthrough => {}
        Decision::Tied(tied) => record.operations_tied = Some(tied),
        Decision::NotCanonical => {
            let message = "this path could reach a different operation than it names (`..`, `.`, an encoded `/` \
                           or `\\`, an empty segment); send the path as the server should read it";
            let error = json!({"class": "path_not_canonical", "message": message});
            return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
        }
        Decision::Matched { connector, operation } => {
            event_type = EventType::ConnectorProxyProxied;
            record.connector = Some(connector.fqn().to_string());
            record.operation = Some(operation.name.clone());
            record.credential = connector.manifest.credential_kind().map(|kind| kind.as_str().to_string());
            // A transfer coding a server would decode (`gzip, chunked`) makes the body it reads
            // another than the one an approval shows and binds (which leaves the header out):
            // refused on a credentialed request (the fifty-third re-attack's low note).
            if let Some(coding) = unframing_coding(request.headers()) {
                let message = format!(
                    "this request declares the transfer coding `{coding}`, which a server may decode into another \
                     body than the one sent: refused, nothing was sent; hint: send the body as it is (chunked once, \
                     or with a length)"
                );
                let error = json!({"class": "transfer_coding_refused", "message": message});
                return Ok(reject(&session, record, Map::new(), StatusCode::BAD_REQUEST, error).await);
            }
            // The one `chunked` accepted goes upstream as the proxy frames it, never as the
            // agent spelled it (the fifty-sixth re-attack's N7).
            if request.headers().contains_key(hyper::header::TRANSFER_ENCODING) {
                request
                    .headers_mut()
                    .insert(hyper::header::TRANSFER_ENCODING, hyper::header::HeaderValue::from_static("chunked"));
            }
            let asks = match admit(&session, &mut record, connector, operation, false).await {
                Ok(Admitted::Go) => None,
                Ok(Admitted::Ask(reason)) => Some(reason),
                Err(refused) => return Ok(refused),
            };
            let reads_whole = operation.approval
                || asks.is_some()
                || connector.manifest.credential_kind() == Some(aileron_core::manifest::CredentialKind::AwsSigv4);
            if reads_whole && _whole_body.is_none() {
                _whole_body = session.whole_bodies.clone().acquire_owned().await.ok();
            }
            if operation.approval || asks.is_some() {
                let held = hold(&session, &mut record, connector, operation, request, &target.destination, asks);
                let (held, id) = match held.await {
                    Ok(held) => held,
                    Err(refused) => return Ok(refused),
                };
                // Decided again once approved (a limit may have filled meanwhile), and counted.
                if let Err(refused) = admit(&session, &mut record, connector, operation, true).await {
                    if let Some(approvals) = &session.credentialing.approvals {
                        approvals.finish(&id, Err("refused by policy when it was approved".to_string()));
                    }
                    return Ok(refused);
                }
                approval = Some(id);
                request = held;
            }
            match session.credentialing.seal(connector, operation, &target.destination).await {
                Ok(Some(credential)) => {
                    match &credential.injection {
                        SealedInjection::Header(name, value) => {
                            let Ok(name) = hyper::header::HeaderName::from_bytes(name.as_bytes()) else {
                                return Ok(plain(StatusCode::BAD_GATEWAY, "binding_failed"));
                            };
                            let Ok(mut value) = hyper::header::HeaderValue::from_str(value.expose()) else {
                                return Ok(plain(StatusCode::BAD_GATEWAY, "binding_failed"));
                            };
                            value.set_sensitive(true);
                            // The credential replaces whatever the tool sent (its placeholder).
                            request.headers_mut().remove(&name);
                            request.headers_mut().insert(name, value);
                        }
                        SealedInjection::Aws { region, service } => aws = Some((region.clone(), service.clone())),
                    }
                    // A compressed echo of the credential would pass the redaction unseen: a
                    // credentialed request asks for the body as it is (tools decode either), and
                    // for no transfer coding (the fourteenth re-attack's `TE: gzip`).
                    request
                        .headers_mut()
                        .insert(hyper::header::ACCEPT_ENCODING, hyper::header::HeaderValue::from_static("identity"));
                    request.headers_mut().remove(hyper::header::TE);
                    binding = Some(credential.resolved.binding.audit_payload());
                    sealed = Some(credential);
                }
                Ok(None) => record.binding_unresolved = Some(true),
                Err(failure) => {
                    let error = json!({"class": failure.class.as_str(), "message": failure.message});
                    let response = reject(&session, record, failure.audit_payload(), StatusCode::BAD_GATEWAY, error);
                    return Ok(response.await);
                }
            }
        }
    }
    // What a signature made here would hand the agent if echoed: the whole `Authorization`, its
    // signature (with `UNSIGNED-PAYLOAD`, good for any body for S3's fifteen minutes) and the
    // user's access key id (the sixteenth re-attack read all three from an echo). The key id is
    // the credential's (`Sealed::echo_candidates`); the other two are new on each request.
    let mut signed_echoes: Vec<String> = Vec::new();
    let request = match (&aws, sealed.as_ref().map(|sealed| &sealed.resolved.injection)) {
        (Some((region, service)), Some(Injection::Aws(credentials))) => {
            match sign_aws(request, credentials, region, service, &target.destination).await {
                Ok(request) => {
                    if let Some(signed) =
                        request.headers().get(hyper::header::AUTHORIZATION).and_then(|value| value.to_str().ok())
                    {
                        signed_echoes.push(signed.to_string());
                        signed_echoes.extend(signed.rsplit_once("Signature=").map(|(_, hex)| hex.to_string()));
                    }
                    request
                }
                Err(failure) => {
                    let mut payload = binding.unwrap_or_default();
                    payload.extend(failure.audit_payload());
                    let status = StatusCode::from_u16(failure.http_status()).unwrap_or(StatusCode::BAD_GATEWAY);
                    let error = json!({"class": failure.class.as_str(), "message": failure.message});
                    return Ok(reject(&session, record, payload, status, error).await);
                }
            }
        }
        _ => request,
    };
    // Sent and recorded on a task of its own: an agent that stops waiting (or a session that
    // ends) cancels this future, never the record of a request that may have left.
    let (answered, answer) = tokio::sync::oneshot::channel();
    let sending = Sending { session: session.clone(), tunnel: tunnel.clone(), record, event_type, binding, approval };
    let in_flight = session.in_flight.clone().read_owned().await;
    tokio::spawn(async move {
        sending.send_and_record(request, started, answered).await;
        drop(in_flight);
    });
    let mut response = match answer.await {
        Ok(Ok(response)) => response,
        Ok(Err(refused)) => return Ok(refused),
        Err(_) => return Ok(plain(StatusCode::BAD_GATEWAY, Unanswered::Failed.reason())),
    };
    if let Some(credential) = sealed {
        // An upstream that echoes the credential back must not hand it to the agent.
        // The credential's echoes are made once; a signature's, new on each request, for it alone.
        let echoes = session.echoes.of(&credential.echo_candidates());
        let echoes = if signed_echoes.is_empty() {
            echoes
        } else {
            Arc::new(echoes.with(&signed_echoes.iter().map(String::as_str).collect::<Vec<_>>()))
        };
        if encoded(response.headers()) {
            // Asked for none, encoded anyway: an echo inside could not be redacted.
            return Ok(plain(StatusCode::BAD_GATEWAY, "upstream_encoded_response"));
        }
        let (mut parts, body) = response.into_parts();
        redact_head(&echoes, &mut parts);
        let small = parts
            .headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|length| length.to_str().ok()?.parse::<usize>().ok())
            .filter(|length| *length <= WHOLE_BODY_BYTES);
        // A HEAD's (or a 304's) length describes a body that is not sent: left as it is.
        let bodiless = method == "HEAD" || parts.status == StatusCode::NOT_MODIFIED;
        // A small body is read whole and answered with its redacted length, held until the agent
        // has read it: so many at once a session, the others stream.
        let held =
            if small.is_some() && !bodiless { session.whole_answers.clone().try_acquire_owned().ok() } else { None };
        if let Some(permit) = held {
            let Ok(bytes) = axum::body::to_bytes(Body::new(body), WHOLE_BODY_BYTES).await else {
                return Ok(plain(StatusCode::BAD_GATEWAY, "upstream_request_failed"));
            };
            let redacted = echoes.redact_whole(&bytes);
            parts.headers.insert(hyper::header::CONTENT_LENGTH, redacted.len().into());
            let body = super::super::Permitted { body: http_body_util::Full::new(redacted.into()), _permit: permit };
            return Ok(Response::from_parts(parts, Body::new(body)));
        }
        // A larger or unsized body streams: redaction may change its length, so none is given.
        parts.headers.remove(hyper::header::CONTENT_LENGTH);
        return Ok(Response::from_parts(parts, Body::new(RedactedBody::new(body, echoes))));
    }
    if response.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let upstream_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(async move {
            if let (Ok(client), Ok(upstream)) = (client_upgrade.await, upstream_upgrade.await) {
                let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut TokioIo::new(upstream)).await;
            }
        });
    }
    Ok(response.map(Body::new))
}

/// The authority `request` names (its target's, an h2 `:authority`, and its `Host` header) that
/// is not the tunnel's destination, if any: another host, or another port.
fn misdirected(request: &Request<Body>, target: &Target) -> Option<String> {
    let port = target.destination.rsplit_once(':').and_then(|(_, port)| port.parse::<u16>().ok());
    let names_destination = |named: &str| {
        let Ok(authority) = named.parse::<hyper::http::uri::Authority>() else { return false };
        let host = authority.host();
        let host = host.strip_prefix('[').and_then(|host| host.strip_suffix(']')).unwrap_or(host);
        let same_host = match (host.parse::<std::net::IpAddr>(), target.host.parse::<std::net::IpAddr>()) {
            (Ok(named), Ok(destination)) => named == destination,
            _ => host.eq_ignore_ascii_case(&target.host),
        };
        same_host && authority.port_u16().is_none_or(|named| Some(named) == port)
    };
    // Looked at as they are; only one that is not the destination is copied, to be shown.
    let from_target = request.uri().authority().map(|authority| std::borrow::Cow::Borrowed(authority.as_str()));
    let from_host = request.headers().get_all(hyper::header::HOST).iter().map(|host| {
        host.to_str().map_or_else(|_| String::from_utf8_lossy(host.as_bytes()), std::borrow::Cow::Borrowed)
    });
    from_target.into_iter().chain(from_host).find(|named| !names_destination(named)).map(|named| {
        let shown: String = named.chars().take(256).collect();
        format!("`{shown}`")
    })
}

/// Refuses a request inside a tunnel: to an operation's host as [`reject`] does, elsewhere as
/// `sandbox.proxy.rejected` with the same keys (method, host, path) and the class as the reason.
async fn refuse_request(
    session: &EgressSession,
    record: ProxiedRequest,
    operation_host: bool,
    status: StatusCode,
    error: Value,
) -> Response<Body> {
    if operation_host {
        return reject(session, record, Map::new(), status, error).await;
    }
    let refused = ProxiedRequest { proxy_reject_reason: error["class"].as_str().map(str::to_string), ..record };
    let recorded = session.append(EventType::SandboxProxyRejected, refused).await;
    answer(recorded, status, envelope(error))
}

/// The transfer codings of `headers` when they are anything but none or exactly one `chunked`
/// (trimmed, any case), cut to 64 characters: another coding, an empty element, or `chunked`
/// twice (`chunked , chunked` passed a check for other codings, and a server decoding it twice
/// reads another body: the fifty-sixth re-attack's N7). A value that is not text counts too.
fn unframing_coding(headers: &hyper::HeaderMap) -> Option<String> {
    let lines = headers.get_all(hyper::header::TRANSFER_ENCODING);
    let mut codings = Vec::new();
    for line in lines.iter() {
        codings.extend(line.to_str().map_or_else(|_| vec![""], |line| line.split(',').map(str::trim).collect()));
    }
    match codings.as_slice() {
        [] => None,
        [coding] if coding.eq_ignore_ascii_case("chunked") => None,
        _ => {
            let declared = lines.iter().map(|line| String::from_utf8_lossy(line.as_bytes())).collect::<Vec<_>>();
            Some(declared.join(", ").chars().take(64).collect())
        }
    }
}

/// The content coding of `headers` other than `identity`, if there is one (the first, cut to 64
/// characters; a value that is not text counts as one).
fn content_coding(headers: &hyper::HeaderMap) -> Option<String> {
    headers.get_all(hyper::header::CONTENT_ENCODING).iter().find_map(|line| {
        let Ok(line) = line.to_str() else { return Some(String::from_utf8_lossy(line.as_bytes()).into_owned()) };
        line.split(',')
            .map(str::trim)
            .find(|coding| !coding.is_empty() && !coding.eq_ignore_ascii_case("identity"))
            .map(|coding| coding.chars().take(64).collect())
    })
}

/// The headers servers read as "treat this request as another method", compared with `_` read
/// as `-` (a CGI-style server files `X_HTTP_Method_Override` under the same `HTTP_X_HTTP_METHOD_OVERRIDE`
/// that `Rack::MethodOverride` reads: the fifty-third re-attack's F7).
const METHOD_OVERRIDE_HEADERS: [&str; 3] = ["x-http-method-override", "x-http-method", "x-method-override"];

/// How a server could read `request`'s body as a form, from every `Content-Type` line it carries
/// ([`aileron_core::policy::form_readings`]: none or an empty one in a `POST`, a comma list naming
/// a form, any `multipart/*` — as Rack reads them, widened).
fn form_readings(request: &Request<Body>) -> aileron_core::policy::FormReadings {
    let lines = request.headers().get_all(hyper::header::CONTENT_TYPE);
    aileron_core::policy::form_readings(request.method().as_str(), lines.iter().map(|line| line.as_bytes()))
}

/// Whether a form's or URL query's parameter `name` (decoded) is keyed `_method` by a server.
fn names_method(name: &str) -> bool {
    aileron_core::policy::parameter_key(name) == "_method"
}

/// Whether `request` is a `POST` whose body Laravel reads as JSON into the input Symfony's
/// `getMethod` takes `_method` from (`Request::isJson`: a `Content-Type` naming `/json` or
/// `+json`; widened to `json` anywhere in any line). Symfony and Rack honour `_method` on a
/// `POST` alone.
fn json_readable(request: &Request<Body>) -> bool {
    request.method() == hyper::Method::POST
        && request
            .headers()
            .get_all(hyper::header::CONTENT_TYPE)
            .iter()
            .any(|line| line.as_bytes().to_ascii_lowercase().windows(4).any(|window| window == b"json"))
}

/// Whether a JSON body's top-level object (its first value, after a UTF-8 BOM) has a member keyed
/// `_method`. A body that is no JSON object has none: Laravel reads nothing from it.
fn json_names_method(body: &[u8]) -> bool {
    let body = body.strip_prefix("\u{feff}".as_bytes()).unwrap_or(body);
    let text = String::from_utf8_lossy(body);
    let mut values = serde_json::Deserializer::from_str(&text).into_iter::<Map<String, Value>>();
    values.next().and_then(Result::ok).is_some_and(|members| members.keys().any(|key| names_method(key)))
}

/// `request` (its body read whole when a server could read it as a form, or as JSON Laravel
/// takes `_method` from, at most [`super::sealed::MAX_SIGNED_BODY_BYTES`]) and where it asks for
/// another method, if it does: a method-override header, a `_method` query parameter, a `_method`
/// form field or top-level JSON member; a body too large to read counts as one. A body is a form
/// unless its `Content-Type` names no form type (Rack reads a `POST` without one, or under a
/// comma list or `multipart/mixed`, as a form: the fifty-third re-attack's F4), and names are
/// keyed as Rack and PHP key them (`[_method]`, `.method` and `_method%00x` are `_method`: the
/// fifty-sixth re-attack's N3).
async fn method_override(request: Request<Body>) -> (Request<Body>, Option<String>) {
    let header = request.headers().keys().find_map(|name| {
        let folded = name.as_str().replace('_', "-");
        METHOD_OVERRIDE_HEADERS.contains(&folded.as_str()).then(|| name.as_str().to_string())
    });
    if let Some(name) = header {
        return (request, Some(format!("the {name} header")));
    }
    let in_query = request
        .uri()
        .query()
        .is_some_and(|query| aileron_core::policy::form_pairs(query.as_bytes()).any(|(key, _)| names_method(&key)));
    if in_query {
        return (request, Some("a _method query parameter".to_string()));
    }
    let (forms, json) = (form_readings(&request), json_readable(&request));
    if !(forms.any() || json) || hyper::body::Body::is_end_stream(request.body()) {
        return (request, None);
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, super::sealed::MAX_SIGNED_BODY_BYTES).await else {
        let found = format!("a body over {} bytes (it could carry _method)", super::sealed::MAX_SIGNED_BODY_BYTES);
        return (Request::from_parts(parts, Body::empty()), Some(found));
    };
    if json && json_names_method(&bytes) {
        return (Request::from_parts(parts, Body::from(bytes)), Some("a _method JSON member".to_string()));
    }
    let in_pairs = forms.urlencoded && aileron_core::policy::form_pairs(&bytes).any(|(key, _)| names_method(&key));
    // A part named `_method` however its name is quoted, bracketed or escaped: the name anywhere
    // (a part's headers are ASCII; its content is refused with it, which only a form carrying
    // the word does).
    let in_parts = forms.multipart && {
        let lowered = bytes.to_ascii_lowercase();
        [&b"_method"[..], b"%5fmethod"].iter().any(|needle| memchr::memmem::find(&lowered, needle).is_some())
    };
    let found = (in_pairs || in_parts).then(|| "a _method form field".to_string());
    (Request::from_parts(parts, Body::from(bytes)), found)
}

/// Why a request that went to its upstream has no response head to pass on.
#[derive(Clone, Copy)]
enum Unanswered {
    /// The connection failed or closed after (some of) the request was written.
    Failed,
    /// No response head within the session's deadline.
    Timeout,
    /// The agent stopped waiting (closed its side, or its session ended) first.
    ClientGone,
}

impl Unanswered {
    fn reason(self) -> &'static str {
        match self {
            Unanswered::Failed => "upstream_request_failed",
            Unanswered::Timeout => "upstream_timeout",
            Unanswered::ClientGone => "client_gone",
        }
    }
}

/// A request ready to go to its upstream, with the record it is written under once it has.
struct Sending {
    session: Arc<EgressSession>,
    tunnel: Arc<Tunnel>,
    record: ProxiedRequest,
    event_type: EventType,
    binding: Option<Map<String, Value>>,
    approval: Option<aileron_core::approval::ApprovalId>,
}

impl Sending {
    /// Sends `request` and records it whatever happens — answered (its status), the connection
    /// failed, no response head within the deadline, or the agent gone first (no status, the
    /// reason) — then hands the response, or the answer the agent gets, to `answered`. A response
    /// whose record cannot be written is withheld (fail closed).
    async fn send_and_record(
        self,
        request: Request<Body>,
        started: Instant,
        mut answered: tokio::sync::oneshot::Sender<Result<Response<Incoming>, Response<Body>>>,
    ) {
        let Sending { session, tunnel, mut record, event_type, binding, approval } = self;
        let sending = tokio::time::timeout(session.response_head_timeout, tunnel.link.send(&session, request));
        let sent = tokio::select! {
            sent = sending => match sent {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(())) => Err(Unanswered::Failed),
                Err(_) => Err(Unanswered::Timeout),
            },
            () = answered.closed() => Err(Unanswered::ClientGone),
        };
        record.duration_us = Some(started.elapsed().as_micros() as u64);
        let finish = |outcome: Result<(u16, String), String>| {
            if let (Some(id), Some(approvals)) = (&approval, &session.credentialing.approvals) {
                approvals.finish(id, outcome);
            }
        };
        let response = match sent {
            Ok(response) => response,
            Err(unanswered) => {
                let reason = Some(unanswered.reason().to_string());
                if event_type == EventType::ConnectorProxyProxied {
                    record.reject_reason = reason;
                } else {
                    record.proxy_reject_reason = reason;
                }
                let recorded = session.append_record(event_type, record, binding).await;
                finish(Err(match unanswered {
                    Unanswered::Failed => "the upstream closed or failed before answering".to_string(),
                    Unanswered::Timeout => "the upstream did not answer in time".to_string(),
                    Unanswered::ClientGone => "the agent stopped waiting before the upstream answered".to_string(),
                }));
                let answer = match (recorded, unanswered) {
                    (Err(()), _) => plain(StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable"),
                    (Ok(_), Unanswered::Timeout) => plain(StatusCode::GATEWAY_TIMEOUT, unanswered.reason()),
                    (Ok(_), _) => plain(StatusCode::BAD_GATEWAY, unanswered.reason()),
                };
                let _ = answered.send(Err(answer));
                return;
            }
        };
        record.status = Some(u64::from(response.status().as_u16()));
        // Fail closed: a response whose record cannot be written does not reach the agent.
        match session.append_record(event_type, record, binding).await {
            Ok(audit_id) => {
                finish(Ok((response.status().as_u16(), audit_id)));
                let _ = answered.send(Ok(response));
            }
            Err(()) => {
                finish(Err("its record could not be written; the response was withheld".to_string()));
                let _ = answered.send(Err(plain(StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable")));
            }
        }
    }
}

/// Reads a request that matched an `approval = true` operation whole and holds it for a human
/// (SPEC §15): `Ok` with the request to forward once and its approval, or the answer the agent
/// gets — denied, still pending (with where to decide), already used, or not registered — each
/// recorded as `connector.proxy.rejected`. Boxed: see [`reject`].
fn hold<'a>(
    session: &'a EgressSession,
    record: &'a mut ProxiedRequest,
    connector: &'a super::sealed::SealedConnector,
    operation: &'a aileron_core::manifest::ProxyOperation,
    request: Request<Body>,
    destination: &'a str,
    policy_reason: Option<String>,
) -> BoxFuture<'a, Held> {
    Box::pin(held_for_approval(session, record, connector, operation, request, destination, policy_reason))
}

/// A held request to forward once, with its approval; or the answer the agent gets.
type Held = Result<(Request<Body>, aileron_core::approval::ApprovalId), Response<Body>>;

async fn held_for_approval(
    session: &EgressSession,
    record: &mut ProxiedRequest,
    connector: &super::sealed::SealedConnector,
    operation: &aileron_core::manifest::ProxyOperation,
    request: Request<Body>,
    destination: &str,
    policy_reason: Option<String>,
) -> Held {
    let Some(approvals) = &session.credentialing.approvals else {
        let message = format!("{} ({}) needs your approval for each request", operation.name, connector.fqn());
        let error = json!({"class": "approval_required", "message": message});
        return Err(reject(session, record.clone(), Map::new(), StatusCode::FORBIDDEN, error).await);
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, super::sealed::MAX_SIGNED_BODY_BYTES).await else {
        let message =
            format!("a request held for approval may carry at most {} bytes", super::sealed::MAX_SIGNED_BODY_BYTES);
        let error = json!({"class": "resource_limit_exceeded", "message": message});
        return Err(reject(session, record.clone(), Map::new(), StatusCode::PAYLOAD_TOO_LARGE, error).await);
    };
    let held = HeldRequest {
        session_id: session.session_id.clone(),
        connector: connector.fqn().clone(),
        operation: operation.name.clone(),
        method: parts.method.as_str().to_string(),
        host: destination.to_string(),
        target: parts.uri.path_and_query().map_or("/", |target| target.as_str()).to_string(),
        body: bytes.clone(),
        headers: bound_headers(&parts.headers, connector),
        policy_reason,
    };
    let (status, class, message, id, review_url) = match approvals.hold(held).await {
        HoldOutcome::Approved(id) => {
            record.approval_id = Some(id.to_string());
            return Ok((Request::from_parts(parts, Body::from(bytes)), id));
        }
        HoldOutcome::Denied { id, reason } => {
            let message = match reason {
                Some(reason) => format!("the user denied this request: {reason}"),
                None => "the user denied this request".to_string(),
            };
            (StatusCode::FORBIDDEN, "approval_denied", message, Some(id), None)
        }
        HoldOutcome::Pending { id, review_url } => {
            let message = format!(
                "{} ({}) waits for the user's approval at {review_url}; nothing was sent. Once approved, the same \
                 request (method, path, query, headers and body) from this session goes through once within 10 minutes.",
                operation.name,
                connector.fqn()
            );
            (StatusCode::FORBIDDEN, "approval_pending", message, Some(id), Some(review_url))
        }
        HoldOutcome::Used { id } => {
            let message = "this approval was already used by an identical request; send it again to ask anew";
            (StatusCode::FORBIDDEN, "approval_used", message.to_string(), Some(id), None)
        }
        HoldOutcome::Ended { id, class, message } => (StatusCode::FORBIDDEN, class, message, Some(id), None),
        HoldOutcome::Refused { class, message } => (StatusCode::SERVICE_UNAVAILABLE, class, message, None, None),
    };
    record.approval_id = id.as_ref().map(ToString::to_string);
    let mut error = json!({"class": class, "message": message});
    if let Some(id) = id {
        error["approval_id"] = id.to_string().into();
    }
    if let Some(review_url) = review_url {
        error["review_url"] = review_url.into();
    }
    Err(reject(session, record.clone(), Map::new(), status, error).await)
}

/// Headers a held request's approval neither shows nor binds: hop-by-hop ones, those the proxy
/// sets or checks itself (`host`, `content-length`, `accept-encoding`), and those a tool changes
/// on every attempt without changing what the request does (AWS's signing date and SDK ids,
/// trace context). The credential's header is left out too (the proxy replaces it).
const BOUND_HEADERS_EXCEPT: [&str; 18] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "accept-encoding",
    "authorization",
    "x-amz-date",
    "x-amz-security-token",
    "amz-sdk-invocation-id",
    "amz-sdk-request",
    "traceparent",
    "tracestate",
];

/// The headers of a held request that say what it does ([`HeldRequest::headers`]).
fn bound_headers(headers: &hyper::HeaderMap, connector: &super::sealed::SealedConnector) -> Vec<(String, String)> {
    let credential_header = match connector.manifest.credential.as_ref().map(|credential| &credential.method) {
        Some(aileron_core::manifest::CredentialMethod::ApiKey(api_key)) => Some(api_key.header.to_ascii_lowercase()),
        _ => None,
    };
    headers
        .iter()
        .filter(|(name, _)| {
            !BOUND_HEADERS_EXCEPT.contains(&name.as_str()) && credential_header.as_deref() != Some(name.as_str())
        })
        .map(|(name, value)| (name.as_str().to_string(), bound_value(value.as_bytes())))
        .collect()
}

/// A header value as an approval binds and shows it, one text for each byte string: a UTF-8
/// value without a `\` as it is, any other escaped byte by byte (`\xff`, `\\`), so that it holds
/// a `\` and cannot be taken for one of the first kind. A lossy conversion bound `\xff\xff` and
/// `\xfe\xfd` alike, and the approval of one sent the other (the fourteenth re-attack).
fn bound_value(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\\') => text.to_string(),
        _ => bytes.escape_ascii().to_string(),
    }
}

/// Refuses a request inside a tunnel: `record` (and `extra` keys) as `connector.proxy.rejected`
/// with `error`'s class as the reason, then SPEC §9's envelope `{"error": error}` with `status`,
/// or 503 when the record could not be written. Boxed, as [`hold`] is: a refusal is a path few
/// requests take, and inline its state would be in every request's future, which hyper moves
/// whole for each request.
fn reject(
    session: &EgressSession,
    mut record: ProxiedRequest,
    extra: Map<String, Value>,
    status: StatusCode,
    error: Value,
) -> BoxFuture<'_, Response<Body>> {
    Box::pin(async move {
        record.reject_reason = error["class"].as_str().map(str::to_string);
        let mut payload = record.into_payload();
        payload.extend(extra);
        let recorded = session.append_payload(EventType::ConnectorProxyRejected, payload).await.map(|_| ());
        answer(recorded, status, envelope(error))
    })
}

/// Answers every request of a tunnel whose upstream cannot be reached safely with 502.
async fn refuse_every_request<C>(client: C, h2: bool, reason: String, head_timeout: Duration)
where
    C: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |_request: Request<Incoming>| {
        let reason = reason.clone();
        async move { Ok::<_, Infallible>(plain(StatusCode::BAD_GATEWAY, &reason)) }
    });
    let _ = serve_client(client, h2, service, head_timeout).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn returned<A, B, C, D, R>(_: &impl FnOnce(A, B, C, D) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A request's sending task does not hold the making of a new upstream connection (resolve,
    /// dial, handshake) inline: it did (11 KB in a debug build), and a task's future is copied
    /// whole as it is spawned, once a request (stop 103: a third of the egress proxy's
    /// instructions went to `memcpy`).
    #[test]
    fn a_requests_sending_task_does_not_carry_a_connections_making() {
        type Answer = tokio::sync::oneshot::Sender<Result<Response<Incoming>, Response<Body>>>;
        type Ref<T> = &'static T;
        let sending = |sending: Sending, request: Request<Body>, started: Instant, answered: Answer| {
            sending.send_and_record(request, started, answered)
        };
        let making = |session: Ref<EgressSession>, key: Ref<Key>, host: Ref<str>, _: ()| {
            super::super::upstreams::connect(session, key, host, None)
        };
        let (sending, making) = (returned(&sending), returned(&making));
        assert!(sending < making, "a request's sending is {sending} bytes, a connection's making {making}");
    }

    /// The fourteenth re-attack: `X-Note: \xff\xff` approved, `X-Note: \xfe\xfd` went out under the
    /// approval (both were bound as two replacement characters).
    #[test]
    fn every_header_value_is_bound_as_a_text_of_its_own() {
        let values: [&[u8]; 7] =
            [b"\xff\xff", b"\xfe\xfd", b"\\xff\\xff", b"\\\\xff", b"plain", "caf\u{e9}".as_bytes(), b"caf\xe9"];
        let bound: Vec<String> = values.iter().map(|value| bound_value(value)).collect();
        let distinct: std::collections::HashSet<&String> = bound.iter().collect();
        assert_eq!(distinct.len(), values.len(), "{bound:?}");
        assert_eq!(bound[0], "\\xff\\xff");
        assert_eq!(bound[4], "plain");
        assert_eq!(bound[5], "caf\u{e9}");
    }

    /// The fourteenth re-attack: a `Content-Encoding: identity` line followed by a `gzip` one, and
    /// `Transfer-Encoding: gzip, chunked`, passed a gzip'ed echo of the credential unredacted.
    #[test]
    fn an_answer_in_any_coding_but_identity_is_encoded() {
        let headers = |lines: &[(&'static str, &'static str)]| {
            let mut map = hyper::HeaderMap::new();
            for (name, value) in lines {
                map.append(*name, hyper::header::HeaderValue::from_static(value));
            }
            map
        };
        for lines in [
            &[("content-encoding", "identity"), ("content-encoding", "gzip")][..],
            &[("content-encoding", "identity, br")],
            &[("content-encoding", "GZIP")],
            &[("transfer-encoding", "gzip, chunked")],
            &[("transfer-encoding", "chunked"), ("transfer-encoding", "deflate")],
        ] {
            assert!(encoded(&headers(lines)), "{lines:?}");
        }
        for lines in [
            &[][..],
            &[("content-encoding", "identity")],
            &[("content-encoding", " Identity ,")],
            &[("transfer-encoding", "chunked")],
        ] {
            assert!(!encoded(&headers(lines)), "{lines:?}");
        }
    }
}
