//! The eighth re-attack of a launched agent's egress proxy (SPEC §15): each finding is a test on a
//! real session proxy, a real upstream (TLS with the gateway tests' certificate, or plain HTTP on
//! the same port, as the agent chooses) and a real client speaking through a `CONNECT` tunnel.
//! The upstream keeps every request it received, so a test sees what left the machine as well as
//! what the audit log says about it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aileron::dataplane::agent_egress::{Credentialing, EgressSession, SealedConnector, SessionCa};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::support::{Harness, PlantedKey};

/// The bound key every operation of these tests is credentialed with.
const SECRET: &str = "ghp_PLANTEDreattack8secret0123456789";

/// One request as the upstream received it.
#[derive(Debug, Clone)]
struct Seen {
    tls: bool,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// A loopback upstream that speaks TLS or plain HTTP on one port (it peeks the first byte) and
/// keeps every request it reads: a path ending in `/hang` is never answered, one ending in
/// `/reset` is read and then the connection dropped without an answer, anything else answered
/// `200 ok` — with the `Authorization` it got as its reason phrase for a path ending in `/reason`,
/// and in a header's name for one ending in `/header-name`.
struct Upstream {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    async fn start() -> Upstream {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        aileron::platform::process::install_crypto_provider();
        let certs = vec![CertificateDer::from_pem_slice(crate::gateway::TEST_UPSTREAM_CERT.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(crate::gateway::TEST_UPSTREAM_KEY.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let keeping = seen.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), keeping.clone());
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    if stream.peek(&mut first).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if first[0] == 0x16 {
                        let Ok(tls) = acceptor.accept(stream).await else { return };
                        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                        serve_upstream(tls, true, h2, seen).await;
                    } else {
                        serve_upstream(stream, false, false, seen).await;
                    }
                });
            }
        });
        Upstream { address, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve_upstream<S>(stream: S, tls: bool, h2: bool, seen: Arc<Mutex<Vec<Seen>>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let seen = seen.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = http_body_util::BodyExt::collect(body).await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
            let path = parts.uri.path().to_string();
            let mut headers: Vec<(String, String)> = parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).to_string()))
                .collect();
            if let Some(authority) = parts.uri.authority() {
                headers.push((":authority".to_string(), authority.to_string()));
            }
            seen.lock().unwrap().push(Seen {
                tls,
                method: parts.method.to_string(),
                path: path.clone(),
                headers,
                body,
            });
            if path.ends_with("/hang") {
                std::future::pending::<()>().await;
            }
            if path.ends_with("/reset") {
                return Err("dropped unanswered");
            }
            let mut response = hyper::Response::new(axum::body::Body::from("ok"));
            // Echoes of the Authorization header where redaction of values and bodies does not look.
            let authorization = seen.lock().unwrap().last().and_then(|s| s.header("authorization").map(str::to_string));
            if let Some(authorization) = authorization {
                if path.ends_with("/reason") {
                    let phrase = hyper::ext::ReasonPhrase::try_from(authorization.into_bytes()).unwrap();
                    response.extensions_mut().insert(phrase);
                } else if path.ends_with("/encoded") {
                    use base64::Engine as _;
                    let (standard, url_safe) =
                        (&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE);
                    let body = serde_json::json!({
                        "basic": standard.encode(format!("user:{authorization}")),
                        "url_safe": url_safe.encode(format!("??{authorization}>>")),
                        "hex": hex::encode(&authorization),
                        "percent": percent_encoding::utf8_percent_encode(&authorization, percent_encoding::NON_ALPHANUMERIC)
                            .to_string(),
                    });
                    response = hyper::Response::new(axum::body::Body::from(body.to_string()));
                    let header = standard.encode(format!("{{\"authorization\":\"{authorization}\"}}"));
                    response.headers_mut().insert("x-echo", header.parse().unwrap());
                } else if path.ends_with("/header-name") {
                    let name = format!("x-echo-{}", authorization.replace(' ', "-").to_ascii_lowercase());
                    response
                        .headers_mut()
                        .insert(hyper::header::HeaderName::try_from(name).unwrap(), "1".parse().unwrap());
                }
            }
            Ok(response)
        }
    });
    let io = hyper_util::rt::TokioIo::new(stream);
    if h2 {
        let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .serve_connection(io, service)
            .await;
    } else {
        let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
    }
}

/// A connector whose operations on `destination` carry [`SECRET`]: `GET /**` and
/// `POST /upload/**` go at once, `DELETE /upload/**` needs an approval; on `POST /graphql` a
/// document naming `mergePullRequest` needs one, any other goes.
fn credentialing(destination: &str) -> Credentialing {
    let manifest = aileron_core::manifest::parse_manifest(
        &format!(
            "[connector]\nname = \"github://reattack/example\"\nversion = \"1.0.0\"\n\
             [capabilities.network]\nhosts = [\"{destination}\"]\n\
             [capabilities.credential]\nkind = \"api_key\"\nscope = \"test key\"\nheader = \"Authorization\"\n\
             format = \"token {{key}}\"\n\
             [[proxy.operations]]\nname = \"rest_get\"\nmethod = \"GET\"\nhost = \"{destination}\"\npath = \"/**\"\n\
             [[proxy.operations]]\nname = \"upload\"\nmethod = \"POST\"\nhost = \"{destination}\"\n\
             path = \"/upload/**\"\n\
             [[proxy.operations]]\nname = \"delete_upload\"\nmethod = \"DELETE\"\nhost = \"{destination}\"\n\
             path = \"/upload/**\"\napproval = true\n\
             [[proxy.operations]]\nname = \"graphql\"\nmethod = \"POST\"\nhost = \"{destination}\"\n\
             path = \"/graphql\"\n\
             [[proxy.operations]]\nname = \"merge_graphql\"\nmethod = \"POST\"\nhost = \"{destination}\"\n\
             path = \"/graphql\"\ngraphql = \"mergePullRequest\"\napproval = true\n"
        ),
        "manifest.toml",
    )
    .unwrap();
    let oauth = Arc::new(aileron::stores::oauth::OAuthFlows::new().unwrap());
    Credentialing::new(
        vec![SealedConnector { manifest: Arc::new(manifest) }],
        Some((Arc::new(PlantedKey(SECRET)), oauth)),
    )
}

/// A client's TLS configuration trusting `pem` alone.
fn trusting(pem: &str) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
    rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
}

/// A session proxy serving on loopback whose operations are on `localhost:<upstream port>` (the
/// name dialled at the upstream's address), the upstream's certificate trusted.
struct Proxy {
    address: SocketAddr,
    /// The operations' host: `localhost:<port>`.
    destination: String,
    ca_pem: String,
    /// Ends the session's proxy (as the launch's end does), and its serving task.
    closing: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(harness: &Harness, id: &str, upstream: &Upstream) -> Proxy {
        Proxy::start_with(harness, id, upstream, |session| session).await
    }

    async fn start_with(
        harness: &Harness,
        id: &str,
        upstream: &Upstream,
        shape: impl FnOnce(EgressSession) -> EgressSession,
    ) -> Proxy {
        let destination = format!("localhost:{}", upstream.address.port());
        let ca = SessionCa::new(id).unwrap();
        let ca_pem = ca.certificate_pem().to_string();
        let connect_to: aileron::dataplane::agent_egress::ConnectTo = [(destination.clone(), upstream.address)].into();
        let session = EgressSession::new(
            harness.state.services.audit.clone(),
            id.into(),
            Default::default(),
            ca,
            Default::default(),
        )
        .with_upstream_tls(trusting(crate::gateway::TEST_UPSTREAM_CERT))
        .with_connect_to(Arc::new(connect_to))
        .with_credentialing(Arc::new(credentialing(&destination)));
        let session = Arc::new(shape(session));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (closing, closed) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(session.clone().serve(listener, async move {
            let _ = closed.await;
        }));
        Proxy { address, destination, ca_pem, closing, serving }
    }

    /// Ends the session's proxy; returns once it has finished (its records written).
    async fn close(self) {
        self.closing.send(()).unwrap();
        self.serving.await.unwrap();
    }

    /// A tunnel to `destination`, its `200` read.
    async fn tunnel(&self, destination: &str) -> tokio::net::TcpStream {
        let mut socket = tokio::net::TcpStream::connect(self.address).await.unwrap();
        socket.write_all(format!("CONNECT {destination} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
        let connected = crate::gateway::read_head(&mut socket).await;
        assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
        socket
    }

    /// A tunnel to the operations' host with TLS on it, the session CA trusted, ALPN `alpn`.
    async fn tls(&self, alpn: &[&[u8]]) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let mut config = trusting(&self.ca_pem);
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let socket = self.tunnel(&self.destination).await;
        tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, socket).await.unwrap()
    }
}

/// Writes `request` and reads the answer until the proxy closes (or 10 s pass).
async fn exchange(mut stream: impl AsyncRead + AsyncWrite + Unpin, request: &str) -> String {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while let Ok(Ok(read)) = tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&answer).to_string()
}

/// The records of session `id`, oldest first, once every pending one is written.
async fn records(harness: &Harness, id: &str) -> Vec<Value> {
    harness.state.services.audit.flush().await;
    let mut records: Vec<Value> = harness.audit().await.into_iter().filter(|r| r["session_id"] == id).collect();
    records.sort_by_key(|r| r["seq"].as_u64());
    records
}

/// F1: a request in plain text inside a tunnel to an operation's host gets no credential, is
/// never held or counted, and never leaves: it is refused and recorded. The same request over
/// TLS is credentialed (the fixture works).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_to_an_operation_host_is_refused_and_never_credentialed() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-plain", &upstream).await;
    let request = |method: &str, path: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n",
            proxy.destination
        )
    };

    let over_tls = exchange(proxy.tls(&[b"http/1.1"]).await, &request("GET", "/user")).await;
    assert!(over_tls.starts_with("HTTP/1.1 200"), "{over_tls}");
    for (method, path) in [("GET", "/user"), ("DELETE", "/upload/important")] {
        let plain = exchange(proxy.tunnel(&proxy.destination).await, &request(method, path)).await;
        assert!(plain.starts_with("HTTP/1.1 403"), "{plain}");
        assert!(plain.contains("plaintext_to_operation_host") && plain.contains("hint:"), "{plain}");
    }

    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "only the TLS request left: {seen:#?}");
    assert!(seen[0].tls && seen[0].header("authorization") == Some(&format!("token {SECRET}")), "{seen:#?}");
    let records = records(&harness, "s-plain").await;
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["payload"]["aileron.connector.reject_reason"] == "plaintext_to_operation_host")
        .collect();
    assert_eq!(refused.len(), 2, "{records:#?}");
    for record in &refused {
        assert_eq!(record["event_type"], "connector.proxy.rejected", "{record}");
        assert_eq!(record["payload"]["aileron.proxy.upstream.scheme"], "http", "{record}");
    }
    assert!(!records.iter().any(|r| r["event_type"] == "approval.requested"), "nothing was held: {records:#?}");
}

/// F6: an ungated operation's method asking the server to read it as a gated one's — by a
/// method-override header, a `_method` query parameter or form field — is refused on an
/// operation's host and recorded; nothing leaves. The same request without the override goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_override_to_an_operation_host_is_refused() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-override", &upstream).await;
    let post = |target: &str, extra: &str, content_type: &str, body: &str| {
        format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\n{extra}\
             Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            proxy.destination,
            body.len()
        )
    };
    let multipart = "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n";
    let overriding = [
        post("/upload/a", "X-HTTP-Method-Override: DELETE\r\n", "application/json", "{}"),
        post("/upload/b", "X-HTTP-Method: DELETE\r\n", "application/json", "{}"),
        post("/upload/c", "x-method-override: DELETE\r\n", "application/json", "{}"),
        post("/upload/d?_method=DELETE", "", "application/json", "{}"),
        post("/upload/e?a=1&%5Fmethod=DELETE", "", "application/json", "{}"),
        post("/upload/f", "", "application/x-www-form-urlencoded; charset=utf-8", "a=1&_method=DELETE"),
        post("/upload/g", "", "multipart/form-data; boundary=b", multipart),
    ];
    for request in &overriding {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request}\n{answer}");
        assert!(answer.contains("method_override_refused") && answer.contains("hint:"), "{answer}");
    }
    let plain = exchange(proxy.tls(&[b"http/1.1"]).await, &post("/upload/h", "", "application/json", "{}")).await;
    assert!(plain.starts_with("HTTP/1.1 200"), "{plain}");

    let seen = upstream.seen();
    assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/upload/h"], "{seen:#?}");
    assert_eq!(seen[0].method, "POST");
    let records = records(&harness, "s-override").await;
    let refused = records
        .iter()
        .filter(|r| {
            r["event_type"] == "connector.proxy.rejected"
                && r["payload"]["aileron.connector.reject_reason"] == "method_override_refused"
        })
        .count();
    assert_eq!(refused, overriding.len(), "{records:#?}");
}

/// A request `method target` to the proxy's destination with `headers` (whole lines) and `body`.
fn raw_request(proxy: &Proxy, method: &str, target: &str, headers: &str, body: &str) -> String {
    format!(
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\n{headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        proxy.destination,
        body.len()
    )
}

/// The fifty-third re-attack's F4 and F7: Rack (GitHub's API among its users) reads a `POST`
/// body as a form when it has no media type, an empty one, a comma-listed one, or any
/// `multipart/*` one, and keys `[_method]` as `_method`; a CGI-style server reads
/// `X_HTTP_Method_Override` as `X-HTTP-Method-Override`. Each of those overrides went out
/// credentialed under the ungated `POST`; each is refused now, nothing sent. A body a server
/// reads as no form (JSON), and a form without an override, go as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_override_in_any_body_a_server_reads_as_a_form_is_refused() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-override-53", &upstream).await;
    let form = "merge_method=merge&_method=DELETE";
    let part = "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n";
    let overriding = [
        raw_request(&proxy, "POST", "/upload/a", "", form),
        raw_request(&proxy, "POST", "/upload/b", "Content-Type: \r\n", form),
        raw_request(
            &proxy,
            "POST",
            "/upload/c",
            "Content-Type: application/x-www-form-urlencoded, text/plain\r\n",
            form,
        ),
        raw_request(
            &proxy,
            "POST",
            "/upload/d",
            "Content-Type: text/plain, application/x-www-form-urlencoded\r\n",
            form,
        ),
        raw_request(&proxy, "POST", "/upload/e", "Content-Type: multipart/mixed; boundary=b\r\n", part),
        raw_request(&proxy, "POST", "/upload/f", "Content-Type: multipart/related; boundary=b\r\n", part),
        raw_request(
            &proxy,
            "POST",
            "/upload/g",
            "Content-Type: application/x-www-form-urlencoded\r\n",
            "[_method]=DELETE",
        ),
        raw_request(&proxy, "POST", "/upload/h", "", "a=1&%5B_method%5D=DELETE"),
        raw_request(&proxy, "POST", "/upload/i", "X_HTTP_Method_Override: DELETE\r\n", "{}"),
        raw_request(&proxy, "POST", "/upload/j", "X-HTTP_Method-Override: DELETE\r\n", "{}"),
        raw_request(&proxy, "POST", "/upload/k", "x_method_override: DELETE\r\n", "{}"),
    ];
    for request in &overriding {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request}\n{answer}");
        assert!(answer.contains("method_override_refused") && answer.contains("hint:"), "{answer}");
    }
    let going = [
        raw_request(
            &proxy,
            "POST",
            "/upload/json",
            "Content-Type: application/json\r\n",
            "{\"a\":\"x&_method=DELETE\"}",
        ),
        raw_request(&proxy, "POST", "/upload/form", "", "merge_method=merge&title=_method"),
        raw_request(&proxy, "GET", "/user", "", ""),
    ];
    for request in &going {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{request}\n{answer}");
    }

    let seen = upstream.seen();
    let paths: Vec<&str> = seen.iter().map(|seen| seen.path.as_str()).collect();
    assert_eq!(paths, ["/upload/json", "/upload/form", "/user"], "{seen:#?}");
    let records = records(&harness, "s-override-53").await;
    let refused =
        records.iter().filter(|r| r["payload"]["aileron.connector.reject_reason"] == "method_override_refused").count();
    assert_eq!(refused, overriding.len(), "{records:#?}");
}

/// The fifty-third re-attack's low note: `Transfer-Encoding: gzip, chunked` went upstream as sent
/// on a credentialed request, and an approval does not bind the header, so a server decoding the
/// coding could read another body than the one approved. A transfer coding other than `chunked`
/// on a credentialed request is refused unsent; plain `chunked` goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_coding_other_than_chunked_is_refused_on_a_credentialed_request() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-coding", &upstream).await;
    let chunked = |path: &str, coding: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: {coding}\r\n\
             Connection: close\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n",
            proxy.destination
        )
    };
    for coding in ["gzip, chunked", "GZIP,chunked", "identity, chunked"] {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &chunked("/upload/coded", coding)).await;
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("transfer_coding_refused"), "{coding}\n{answer}");
    }
    let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &chunked("/upload/plain", "chunked")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let seen = upstream.seen();
    assert_eq!(seen.iter().map(|seen| seen.path.as_str()).collect::<Vec<_>>(), ["/upload/plain"], "{seen:#?}");
}

/// The fifty-third re-attack's F1: a GraphQL document in the body of a `GET /graphql` went out
/// credentialed as the ungated `GET /**` (only a `POST`'s body was read), and Rails merges a
/// JSON body into the same `params[:query]` for a `GET` as for a `POST`. A request with a body
/// to a path a GraphQL operation covers, on a method no GraphQL operation there has, is refused
/// unsent (`graphql_body_method`); the same path without a body goes, and a `POST`'s document
/// is matched as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graphql_body_on_another_method_than_its_operations_is_refused() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-graphql-get", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    let mutation = r#"{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"}"#;
    let harmless = r#"{"query":"query{viewer{login}}"}"#;
    let refused = [
        raw_request(&proxy, "GET", "/graphql", json, mutation),
        raw_request(&proxy, "GET", "/graphql", json, harmless),
        raw_request(&proxy, "GET", "/graphql.json", "", mutation),
        raw_request(&proxy, "DELETE", "/graphql", json, mutation),
    ];
    for request in &refused {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request}\n{answer}");
        assert!(answer.contains("graphql_body_method") && answer.contains("hint:"), "{answer}");
    }
    let chunked = format!(
        "GET /graphql HTTP/1.1\r\nHost: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{mutation}\r\n0\r\n\r\n",
        proxy.destination,
        mutation.len()
    );
    let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &chunked).await;
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("graphql_body_method"), "{answer}");
    let held =
        exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", json, mutation)).await;
    assert!(held.starts_with("HTTP/1.1 403") && held.contains("approval_required"), "{held}");
    for request in
        [raw_request(&proxy, "GET", "/graphql", "", ""), raw_request(&proxy, "POST", "/graphql", json, harmless)]
    {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{request}\n{answer}");
    }

    let seen = upstream.seen();
    let sent: Vec<(&str, &[u8])> = seen.iter().map(|seen| (seen.method.as_str(), seen.body.as_slice())).collect();
    assert_eq!(sent, [("GET", &b""[..]), ("POST", harmless.as_bytes())], "{seen:#?}");
    let records = records(&harness, "s-graphql-get").await;
    let refusals =
        records.iter().filter(|r| r["payload"]["aileron.connector.reject_reason"] == "graphql_body_method").count();
    assert_eq!(refusals, refused.len() + 1, "{records:#?}");
}

/// The fifty-third re-attack's F5 and F2: the proxy read a GraphQL body as JSON and its exact
/// `query` member only. Typed as a form, Rails reads the form's `query` (a mutation after a `&`,
/// its name percent-encoded) where the proxy read a harmless one; a Go server takes `QUERY` or
/// `Query` (its JSON keys fold case), a first-key parser the first of two `query`s, a
/// `json.Decoder` the first value before trailing bytes; a persisted-query server runs the
/// document a `documentId`, `doc_id`, `id`, `queryId` or `extensions` names. Now the names of
/// every reading are taken (each mutation is held), a stand-in for a document or a multipart
/// body is refused as unreadable, and GitHub's own `curl -d` example (JSON typed as a form) and
/// a plain JSON query go as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graphql_body_is_read_as_every_server_could_read_it() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-graphql-body", &upstream).await;
    let (json, form) = ("Content-Type: application/json\r\n", "Content-Type: application/x-www-form-urlencoded\r\n");
    let merge = r#"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"#;
    let harmless = r#"{"query":"query{viewer{login}}"}"#;
    let held = [
        (form, r#"{"query":"query{viewer{login}}","x":"&query=mutation{merge%50ullRequest(input:{pullRequestId:%22PR_1%22}){clientMutationId}}%23"}"#.to_string()),
        ("", "query=mutation%7Bmerge%50ullRequest%7Ba%7D%7D".to_string()),
        (form, "a=1&%5Bquery%5D=mutation%7BmergePullRequest%7Ba%7D%7D".to_string()),
        (json, format!(r#"{{"query":"query{{viewer{{login}}}}","QUERY":"{merge}"}}"#)),
        (json, format!(r#"{{"query":"query{{viewer{{login}}}}","Query":"{merge}"}}"#)),
        (json, format!(r#"{{"query":"{merge}","query":"query{{viewer{{login}}}}"}}"#)),
        (json, format!(r#"{{"query":"{merge}"}} {harmless}"#)),
        (json, format!(r#"[{harmless},{{"qUeRy":"{merge}"}}]"#)),
    ];
    for (headers, body) in &held {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 403") && answer.contains("approval_required"), "{body}\n{answer}");
    }
    let unreadable = [
        (json, r#"{"query":"query{viewer{login}}","documentId":"abc"}"#.to_string()),
        (json, r#"{"query":"query{viewer{login}}","doc_id":"123"}"#.to_string()),
        (json, r#"{"query":"query{viewer{login}}","id":"123"}"#.to_string()),
        (json, r#"{"query":"query{viewer{login}}","queryId":"123"}"#.to_string()),
        (
            json,
            r#"{"query":"query{viewer{login}}","extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab"}}}"#
                .to_string(),
        ),
        (form, "query=query%7Bviewer%7Blogin%7D%7D&documentId=abc".to_string()),
        (
            "Content-Type: multipart/form-data; boundary=b\r\n",
            "--b\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\nquery{viewer{login}}\r\n--b--\r\n"
                .to_string(),
        ),
        (form, "{\"query\":\"query{viewer{login}}\"".to_string()),
    ];
    for (headers, body) in &unreadable {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("graphql_unreadable"), "{body}\n{answer}");
    }
    let curl_example = r#" { "query": "query { viewer { login }}" } "#;
    let going = [
        (json, harmless),
        (form, curl_example),
        ("", curl_example),
        (json, r#"{"query":"{viewer{login}}","variables":{"id":"x"},"extensions":{}}"#),
    ];
    for (headers, body) in going {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{body}\n{answer}");
    }

    let seen = upstream.seen();
    assert_eq!(seen.len(), going.len(), "only the harmless documents left: {seen:#?}");
    assert!(seen.iter().all(|seen| seen.header("authorization") == Some(&format!("token {SECRET}"))), "{seen:#?}");
}

/// The fifty-sixth re-attack's N3: Laravel merges a JSON body into the input Symfony's
/// `getMethod` reads `_method` from, and PHP files `.method`, ` .method` and `_method%00x` (in a
/// form or the URL) under `_method`; each went out credentialed under the ungated `POST`. Each is
/// refused now, nothing sent; JSON without `_method` as a member, and a form without one, go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_override_php_or_laravel_would_read_is_refused() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-override-56", &upstream).await;
    let (json, form) = ("Content-Type: application/json\r\n", "Content-Type: application/x-www-form-urlencoded\r\n");
    let overriding = [
        raw_request(&proxy, "POST", "/upload/a", json, r#"{"_method":"DELETE","merge_method":"merge"}"#),
        raw_request(
            &proxy,
            "POST",
            "/upload/b",
            "Content-Type: application/vnd.api+json\r\n",
            r#"{"a":1,"_method":"x"}"#,
        ),
        raw_request(&proxy, "POST", "/upload/c", json, "\u{feff} {\"_method\":\"DELETE\"}"),
        raw_request(&proxy, "POST", "/upload/d", form, "merge_method=merge&.method=DELETE"),
        raw_request(&proxy, "POST", "/upload/e", form, "merge_method=merge&_method%00=DELETE"),
        raw_request(&proxy, "POST", "/upload/f", form, "%20.method=DELETE"),
        raw_request(&proxy, "POST", "/upload/g?.method=DELETE", json, "{}"),
        raw_request(&proxy, "POST", "/upload/h?_method%00x=DELETE", json, "{}"),
    ];
    for request in &overriding {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{request}\n{answer}");
        assert!(answer.contains("method_override_refused") && answer.contains("hint:"), "{answer}");
    }
    let going = [
        raw_request(&proxy, "POST", "/upload/json", json, r#"{"a":{"_method":"DELETE"},"b":"_method"}"#),
        raw_request(&proxy, "POST", "/upload/form", form, "merge_method=merge&x.y=_method"),
    ];
    for request in &going {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{request}\n{answer}");
    }
    let seen = upstream.seen();
    let paths: Vec<&str> = seen.iter().map(|seen| seen.path.as_str()).collect();
    assert_eq!(paths, ["/upload/json", "/upload/form"], "{seen:#?}");
}

/// The fifty-sixth re-attack's N4, N5 and N6: a PHP server's `$_POST['query']` is the form's
/// `query%00`; a fetch-API server (GraphQL Yoga, taking the first type of a comma list) reads
/// a UTF-8 BOM's JSON, which the proxy read as a form alone; a UTF-16 body is JSON to Python; a
/// server inflating a `Content-Encoding: gzip` body reads what the proxy could not; Go folds
/// `extenſions` (U+017F) into `extensions`. Each went out credentialed as the ungated `graphql`;
/// each mutation is held now, and what cannot be read is refused unsent (`graphql_unreadable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graphql_body_is_read_as_php_go_and_fetch_servers_read_it() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-graphql-56", &upstream).await;
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let both = "Content-Type: application/json, application/x-www-form-urlencoded\r\n";
    let held = [
        (form, "query=%7Bviewer%7Blogin%7D%7D&query%00=mutation%7BmergePullRequest%7Ba%7D%7D".to_string()),
        (
            both,
            "\u{feff}{\"query\":\"mutation{mergePullRequest(input:{}){a}}\",\"x\":\"&query={viewer{login}}&\"}"
                .to_string(),
        ),
        ("", "\u{feff}{\"query\":\"mutation{mergePullRequest(input:{}){a}}\",\"x\":\"&query={a}&\"}".to_string()),
    ];
    for (headers, body) in &held {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 403") && answer.contains("approval_required"), "{body}\n{answer}");
    }
    let utf16: String = "{\"query\":\"{a}\",\"x\":\"&query={viewer}&\"}".chars().flat_map(|c| ['\0', c]).collect();
    let unreadable = [
        (both, utf16),
        (
            "Content-Type: application/json\r\nContent-Encoding: gzip\r\n",
            r#"{"query":"query{viewer{login}}"}"#.to_string(),
        ),
        ("Content-Encoding: identity, deflate\r\n", "query=%7Bviewer%7Blogin%7D%7D".to_string()),
        (
            "Content-Type: application/json\r\n",
            r#"{"query":"","extenſions":{"persistedQuery":{"version":1,"sha256Hash":"abab"}}}"#.to_string(),
        ),
    ];
    for (headers, body) in &unreadable {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("graphql_unreadable"), "{body}\n{answer}");
    }
    let harmless = r#"{"query":"query{viewer{login}}"}"#;
    let going = [
        ("Content-Type: application/json\r\n", format!("\u{feff}{harmless}")),
        ("Content-Type: application/json\r\nContent-Encoding: identity\r\n", harmless.to_string()),
    ];
    for (headers, body) in &going {
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(&proxy, "POST", "/graphql", headers, body)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{body}\n{answer}");
    }
    assert_eq!(upstream.seen().len(), going.len(), "only the harmless documents left: {:#?}", upstream.seen());
}

/// The fifty-sixth re-attack's N7: `Transfer-Encoding: chunked , chunked` passed the
/// transfer-coding refusal and went upstream as sent, though the proxy framed the body once (a
/// server decoding it twice reads another body). One `chunked` is accepted, and sent as the proxy
/// framed it; anything else is refused unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_coding_is_accepted_only_as_one_chunked() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-coding-56", &upstream).await;
    let chunked = |path: &str, lines: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n{lines}\
             Connection: close\r\n\r\n2\r\n{{}}\r\n0\r\n\r\n",
            proxy.destination
        )
    };
    for lines in [
        "Transfer-Encoding: chunked , chunked\r\n",
        "Transfer-Encoding: chunked,chunked\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: ,chunked\r\n",
    ] {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &chunked("/upload/twice", lines)).await;
        assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("transfer_coding_refused"), "{lines}\n{answer}");
    }
    let answer =
        exchange(proxy.tls(&[b"http/1.1"]).await, &chunked("/upload/once", "Transfer-Encoding:  Chunked \r\n")).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let seen = upstream.seen();
    assert_eq!(seen.iter().map(|seen| seen.path.as_str()).collect::<Vec<_>>(), ["/upload/once"], "{seen:#?}");
    assert_eq!(seen[0].header("transfer-encoding"), Some("chunked"), "{seen:#?}");
    assert_eq!(seen[0].body, b"{}");
}

/// F2: a request whose `Host`, absolute target or h2 `:authority` names another host (or port)
/// than its tunnel's destination is refused 421 and recorded under the destination, whether the
/// host has operations or not; nothing leaves. A request naming the destination goes, and an h2
/// upstream is told the destination's authority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_naming_another_host_than_its_tunnel_is_refused() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    // The upstream's address is also a destination without operations (private: allowed by name).
    let elsewhere = upstream.address.to_string();
    let allowing = elsewhere.clone();
    let proxy = Proxy::start_with(&harness, "s-host", &upstream, move |mut session| {
        session.allow_private.insert(allowing);
        session
    })
    .await;
    let port = upstream.address.port();
    let get = |target: &str, host: &str| {
        format!(
            "GET {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: token aileron-sealed\r\nConnection: close\r\n\r\n"
        )
    };
    let misdirected = [
        get("/user", "evil.example.com"),
        get("/user", &format!("evil.example.com:{port}")),
        get("/user", "localhost:1"),
        get("https://evil.example.com/user", &proxy.destination),
    ];
    for request in &misdirected {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, request).await;
        assert!(answer.starts_with("HTTP/1.1 421"), "{request}\n{answer}");
        assert!(answer.contains("misdirected_request") && answer.contains("hint:"), "{answer}");
    }
    for host in [proxy.destination.clone(), "LOCALHOST".to_string()] {
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &get("/same", &host)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{host}\n{answer}");
    }
    // A destination without operations, in plain text: the same rule.
    let answer = exchange(proxy.tunnel(&elsewhere).await, &get("/other", "evil.example.com")).await;
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");

    // h2: the `:authority` the client wrote is checked, and the upstream is told the destination's.
    let h2 = |authority: String| {
        let tls = proxy.tls(&[b"h2"]);
        async move {
            let (mut sender, connection) = hyper::client::conn::http2::handshake(
                hyper_util::rt::TokioExecutor::new(),
                hyper_util::rt::TokioIo::new(tls.await),
            )
            .await
            .unwrap();
            tokio::spawn(connection);
            let request = hyper::Request::get(format!("https://{authority}/h2"))
                .header("authorization", "token aileron-sealed")
                .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                .unwrap();
            sender.send_request(request).await.unwrap().status()
        }
    };
    assert_eq!(h2("evil.example.com".to_string()).await, 421);
    assert_eq!(h2(proxy.destination.clone()).await, 200);

    let seen = upstream.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["/same", "/same", "/h2"], "{seen:#?}");
    assert_eq!(seen[2].header(":authority"), Some(proxy.destination.as_str()), "{seen:#?}");
    assert!(seen.iter().all(|s| s.header("authorization") == Some(&format!("token {SECRET}"))), "{seen:#?}");
    let records = records(&harness, "s-host").await;
    let refused: Vec<(&Value, &Value)> = records
        .iter()
        .filter(|r| {
            r["payload"]["aileron.connector.reject_reason"] == "misdirected_request"
                || r["payload"]["aileron.proxy.reject_reason"] == "misdirected_request"
        })
        .map(|r| (&r["event_type"], &r["payload"]["aileron.proxy.upstream.host"]))
        .collect();
    let (operation_host, other) = (Value::from(proxy.destination.clone()), Value::from(elsewhere.clone()));
    let (rejected, sandbox) = (Value::from("connector.proxy.rejected"), Value::from("sandbox.proxy.rejected"));
    let mut expected = vec![(&rejected, &operation_host); misdirected.len()];
    expected.push((&sandbox, &other));
    expected.push((&rejected, &operation_host));
    assert_eq!(refused, expected, "{records:#?}");
}

/// Waits until `upstream` has received `count` requests (at most 10 s).
async fn received(upstream: &Upstream, count: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while upstream.seen().len() < count {
        assert!(tokio::time::Instant::now() < deadline, "the upstream got {:#?}", upstream.seen());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The session's records of requests to `path`: event type, status and reason.
fn outcomes(records: &[Value], path: &str) -> Vec<(String, Value, Value)> {
    records
        .iter()
        .filter(|r| r["payload"]["aileron.proxy.upstream.path"] == path)
        .map(|r| {
            let payload = &r["payload"];
            let reason = if payload["aileron.connector.reject_reason"].is_null() {
                payload["aileron.proxy.reject_reason"].clone()
            } else {
                payload["aileron.connector.reject_reason"].clone()
            };
            (r["event_type"].as_str().unwrap().to_string(), payload["aileron.proxy.upstream.status"].clone(), reason)
        })
        .collect()
}

/// F3: a request that reached its upstream and got no response head is recorded all the same —
/// when the agent stops waiting (`client_gone`), when the session ends with it in flight (recorded
/// before the proxy is done), and when the upstream takes longer than the response-head deadline
/// (`upstream_timeout`, 504 to the agent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_left_unanswered_is_recorded_however_it_ends() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let deadline = Duration::from_millis(600);
    let proxy =
        Proxy::start_with(&harness, "s-hang", &upstream, |session| session.with_response_head_timeout(deadline)).await;
    let send = |method: &str, path: &str, body: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            proxy.destination,
            body.len()
        )
    };

    // The agent gives up before the upstream answers: its side closes.
    let mut tls = proxy.tls(&[b"http/1.1"]).await;
    tls.write_all(send("POST", "/upload/gone/hang", "EXFIL-HANG").as_bytes()).await.unwrap();
    received(&upstream, 1).await;
    drop(tls);
    // The upstream never answers: the agent is told so once the deadline passed.
    let timed_out = exchange(proxy.tls(&[b"http/1.1"]).await, &send("POST", "/upload/slow/hang", "EXFIL-SLOW")).await;
    assert!(timed_out.starts_with("HTTP/1.1 504") && timed_out.contains("upstream_timeout"), "{timed_out}");
    // The session ends with a request (one no operation covers) still waiting for its answer.
    let mut tls = proxy.tls(&[b"http/1.1"]).await;
    tls.write_all(send("PUT", "/exit/hang", "EXFIL-AT-EXIT").as_bytes()).await.unwrap();
    received(&upstream, 3).await;
    let destination = proxy.destination.clone();
    proxy.close().await;

    let seen = upstream.seen();
    let bodies: Vec<&[u8]> = seen.iter().map(|s| s.body.as_slice()).collect();
    assert_eq!(bodies, [&b"EXFIL-HANG"[..], b"EXFIL-SLOW", b"EXFIL-AT-EXIT"], "all three left");
    // Written before the proxy finished: no flush of later work needed to find them.
    let records: Vec<Value> = harness.audit().await.into_iter().filter(|r| r["session_id"] == "s-hang").collect();
    let proxied = "connector.proxy.proxied".to_string();
    assert_eq!(outcomes(&records, "/upload/gone/hang"), [(proxied.clone(), Value::Null, "client_gone".into())]);
    assert_eq!(outcomes(&records, "/upload/slow/hang"), [(proxied, Value::Null, "upstream_timeout".into())]);
    let passthrough = "sandbox.proxy.passthrough".to_string();
    assert_eq!(outcomes(&records, "/exit/hang"), [(passthrough, Value::Null, "client_gone".into())], "{records:#?}");
    for record in records.iter().filter(|r| r["payload"]["aileron.proxy.upstream.path"].is_string()) {
        assert_eq!(record["payload"]["aileron.proxy.upstream.host"], destination.as_str(), "{record}");
    }
}

/// F4: requests the upstream read and then dropped unanswered each get a record of their own,
/// with the method and path (`upstream_request_failed`), never folded into one refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_an_upstream_dropped_unanswered_has_its_own_record() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-reset", &upstream).await;
    for i in 0..3 {
        let body = format!("EXFIL-RESET-{i}");
        let request = format!(
            "PUT /{i}/reset HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            proxy.destination,
            body.len()
        );
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &request).await;
        assert!(answer.starts_with("HTTP/1.1 502") && answer.contains("upstream_request_failed"), "{answer}");
    }
    assert_eq!(upstream.seen().len(), 3, "each was delivered");
    let records = records(&harness, "s-reset").await;
    for i in 0..3 {
        let failed = ("sandbox.proxy.passthrough".to_string(), Value::Null, "upstream_request_failed".into());
        assert_eq!(outcomes(&records, &format!("/{i}/reset")), [failed], "{records:#?}");
    }
}

/// F8: a client that starts a TLS handshake in its tunnel and never finishes it is closed after
/// the handshake deadline, and a session's agent holds at most its cap of open connections: one
/// more is answered 503 at once and counted; once the stalled ones are closed, it connects again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_are_closed_and_a_session_holds_a_bounded_number_of_connections() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let timeout = Duration::from_millis(800);
    let proxy = Proxy::start_with(&harness, "s-flood", &upstream, |session| {
        session.with_first_byte_timeout(timeout).with_most_open(4)
    })
    .await;
    let asked = tokio::time::Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut socket = proxy.tunnel(&proxy.destination).await;
        // A TLS record's header, and nothing more.
        socket.write_all(b"\x16\x03\x01").await.unwrap();
        stalled.push(socket);
    }
    let mut refused = tokio::net::TcpStream::connect(proxy.address).await.unwrap();
    refused.write_all(format!("CONNECT {} HTTP/1.1\r\n\r\n", proxy.destination).as_bytes()).await.unwrap();
    let answer = crate::gateway::read_head(&mut refused).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    for mut socket in stalled {
        let read =
            tokio::time::timeout(timeout * 4, socket.read(&mut [0u8; 1])).await.expect("a stalled handshake ends");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
    assert!(asked.elapsed() >= timeout, "closed after {:?}, before the deadline", asked.elapsed());
    let again = exchange(
        proxy.tls(&[b"http/1.1"]).await,
        &format!("GET /again HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", proxy.destination),
    )
    .await;
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    proxy.close().await;
    let records = records(&harness, "s-flood").await;
    let reasons: Vec<&str> =
        records.iter().filter_map(|r| r["payload"]["aileron.proxy.reject_reason"].as_str()).collect();
    assert!(reasons.contains(&"too_many_connections") && reasons.contains(&"client_tls_timeout"), "{records:#?}");
}

/// F7: a held request's headers are on its card and bound in its approval: after the user
/// approves, a retry that adds or changes a header (`x-http-method-override` is refused outright;
/// here `x-amz-acl` and an added header) is another request that asks anew, while the identical
/// retry goes out once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_binds_the_headers_of_the_request_it_was_shown() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let approvals = aileron::workflows::approvals::ProxyApprovals {
        services: harness.state.services.clone(),
        hold: Duration::from_millis(200),
        unconfined: false,
    };
    let destination = format!("localhost:{}", upstream.address.port());
    let credentialing = Arc::new(credentialing(&destination).with_approvals(Arc::new(approvals)));
    let proxy =
        Proxy::start_with(&harness, "s-approve", &upstream, move |session| session.with_credentialing(credentialing))
            .await;
    let delete = |headers: &str| {
        format!(
            "DELETE /upload/report HTTP/1.1\r\nHost: {destination}\r\nAuthorization: token aileron-sealed\r\n\
             {headers}Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
    };
    let shown = "x-amz-acl: private\r\n";
    let held = exchange(proxy.tls(&[b"http/1.1"]).await, &delete(shown)).await;
    assert!(held.starts_with("HTTP/1.1 403") && held.contains("approval_pending"), "{held}");
    let id = held.split("\"approval_id\":\"").nth(1).unwrap().split('"').next().unwrap().to_string();
    let listed = harness.request("GET", "/v1/action-approvals", None).await.body;
    let card = listed["items"].as_array().unwrap().iter().find(|item| item["id"] == id.as_str()).expect("listed");
    assert_eq!(card["args"]["headers"]["x-amz-acl"], "private", "{card:#}");
    assert!(card["args"]["headers"].get("authorization").is_none(), "{card:#}");
    let decide = format!("/v1/action-approvals/{id}/decide");
    let decided = harness.request("POST", &decide, Some(serde_json::json!({"approved": true}))).await;
    assert_eq!(decided.status, 204, "{:#}", decided.body);

    for changed in ["x-amz-acl: public-read-write\r\n", "x-amz-acl: private\r\nx-injected: yes\r\n"] {
        let asked = exchange(proxy.tls(&[b"http/1.1"]).await, &delete(changed)).await;
        assert!(asked.starts_with("HTTP/1.1 403") && asked.contains("approval_pending"), "{changed}\n{asked}");
        assert!(!asked.contains(&id), "a new approval, not the one granted: {asked}");
    }
    assert!(upstream.seen().is_empty(), "{:#?}", upstream.seen());
    let approved = exchange(proxy.tls(&[b"http/1.1"]).await, &delete(shown)).await;
    assert!(approved.starts_with("HTTP/1.1 200"), "{approved}");
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].header("x-amz-acl"), Some("private"));
}

/// F14: refusals whose destination was looked up are recorded for every new destination, past the
/// cap that bounds refusals made from the request alone (each lookup of a new name left the
/// machine); a tunnel opened and closed unused is recorded too. Policy refusals stay capped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_destination_looked_up_for_the_agent_is_on_record() {
    use aileron::dataplane::agent_egress::MAX_REFUSALS_RECORDED;
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-lookups", &upstream).await;
    let looked_up = MAX_REFUSALS_RECORDED + 8;
    for port in 1000..1000 + looked_up {
        let mut socket = tokio::net::TcpStream::connect(proxy.address).await.unwrap();
        socket.write_all(format!("CONNECT 10.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
        let answer = crate::gateway::read_head(&mut socket).await;
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }
    // Opened, dialled, and closed before a byte.
    drop(proxy.tunnel(&proxy.destination).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    proxy.close().await;
    let records = records(&harness, "s-lookups").await;
    let reason =
        |wanted: &str| records.iter().filter(|r| r["payload"]["aileron.proxy.reject_reason"] == wanted).count();
    assert_eq!(reason("private_destination"), looked_up, "{records:#?}");
    assert_eq!(reason("tunnel_unused"), 1, "{records:#?}");
}

/// F10: an upstream that echoes the credential in its status line's reason phrase or in a header's
/// name does not hand it to the agent: a credentialed response is answered without its reason
/// phrase and without any header whose name holds the credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_echoed_in_a_reason_phrase_or_a_header_name_is_withheld() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-echo", &upstream).await;
    for path in ["/reason", "/header-name"] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\nConnection: close\r\n\r\n",
            proxy.destination
        );
        let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &request).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(!answer.to_ascii_lowercase().contains(&SECRET.to_ascii_lowercase()), "{answer}");
    }
    let seen = upstream.seen();
    assert!(seen.iter().all(|s| s.header("authorization") == Some(&format!("token {SECRET}"))), "{seen:#?}");
}

/// F11: an upstream that echoes the credential encoded (a `Basic` header's base64, base64url at
/// any offset, hex, percent-encoding, in a body or a header value) does not hand it to the agent:
/// every such form is redacted as the credential itself is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_echoed_encoded_is_redacted() {
    use base64::Engine as _;
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-encoded", &upstream).await;
    let request = format!(
        "GET /encoded HTTP/1.1\r\nHost: {}\r\nAuthorization: token aileron-sealed\r\nConnection: close\r\n\r\n",
        proxy.destination
    );
    let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &request).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let fields: Value = serde_json::from_str(body).unwrap();
    for field in ["basic", "url_safe", "hex", "percent"] {
        assert!(fields[field].as_str().unwrap().contains("[REDACTED]"), "{field} not redacted: {body}");
    }
    // Decoded again from every alignment, nothing the agent got holds a piece of the credential.
    let decode = |text: &str, engine: &base64::engine::GeneralPurpose| {
        let mut decoded = Vec::new();
        for piece in text.split("[REDACTED]").map(|piece| piece.trim_end_matches('=')) {
            for start in 0..4.min(piece.len() + 1) {
                let aligned = &piece[start..];
                decoded.extend(engine.decode(&aligned[..aligned.len() / 4 * 4]).ok());
            }
        }
        decoded
    };
    let mut seen = vec![answer.as_bytes().to_vec()];
    seen.extend(decode(fields["basic"].as_str().unwrap(), &base64::engine::general_purpose::STANDARD_NO_PAD));
    seen.extend(decode(fields["url_safe"].as_str().unwrap(), &base64::engine::general_purpose::URL_SAFE_NO_PAD));
    let echo = head.lines().find_map(|line| line.strip_prefix("x-echo: ")).expect(head);
    assert!(echo.contains("[REDACTED]"), "{head}");
    seen.extend(decode(echo, &base64::engine::general_purpose::STANDARD_NO_PAD));
    let secret = SECRET.as_bytes();
    for text in &seen {
        assert!(!text.windows(secret.len()).any(|window| window == secret), "{}", String::from_utf8_lossy(text));
        assert!(
            !text.windows(8).any(|window| secret.windows(8).any(|piece| piece == window)),
            "a piece of it went out"
        );
    }
    let seen = upstream.seen();
    assert_eq!(seen[0].header("authorization"), Some(format!("token {SECRET}").as_str()), "{seen:#?}");
}

/// F16: a path longer than a record keeps is recorded cut with a mark that says so and how long
/// it was, never as if the cut path were the one sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_path_is_recorded_as_cut() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-long", &upstream).await;
    let path = format!("/innocent/{}/real-target-tail", "a".repeat(2100));
    let request =
        format!("PUT {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", proxy.destination);
    let answer = exchange(proxy.tls(&[b"http/1.1"]).await, &request).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(upstream.seen()[0].path, path, "it went out whole");
    let records = records(&harness, "s-long").await;
    let recorded = records
        .iter()
        .find_map(|r| r["payload"]["aileron.proxy.upstream.path"].as_str().filter(|p| p.starts_with("/innocent/")))
        .unwrap_or_else(|| panic!("{records:#?}"));
    assert!(path.starts_with(recorded.split('…').next().unwrap()), "{recorded}");
    assert!(recorded.ends_with(&format!("…[cut: {} characters in all]", path.len())), "{recorded}");
}

// ---------------------------------------------------------------------------------------------
// The fifty-eighth re-attack (decision 0016). Each test asserts the secure outcome; each failed
// while its hole was open (the request reached the upstream with the bound key, no approval asked).
// ---------------------------------------------------------------------------------------------

/// The bundled GitHub spec (`connectors/specs/github-cli`), its `api.github.com:443` operations
/// moved to `destination`, credentialed with [`SECRET`].
fn bundled_github(destination: &str) -> Credentialing {
    let text = include_str!("../../../../connectors/specs/github-cli/manifest.toml")
        .replace("api.github.com:443", destination);
    let manifest = aileron_core::manifest::parse_manifest(&text, "manifest.toml").unwrap();
    let oauth = Arc::new(aileron::stores::oauth::OAuthFlows::new().unwrap());
    Credentialing::new(
        vec![SealedConnector { manifest: Arc::new(manifest) }],
        Some((Arc::new(PlantedKey(SECRET)), oauth)),
    )
}

/// A session proxy whose operations are the bundled GitHub spec's, on the upstream's port.
async fn bundled_proxy(harness: &Harness, id: &str, upstream: &Upstream) -> Proxy {
    let destination = format!("localhost:{}", upstream.address.port());
    Proxy::start_with(harness, id, upstream, move |session| {
        session.with_credentialing(Arc::new(bundled_github(&destination)))
    })
    .await
}

/// Sends each `(method, target, headers, body)` on its own tunnel and asserts that none of them
/// reached the upstream with the bound key: each waits for approval or is refused.
async fn none_goes_credentialed(proxy: &Proxy, upstream: &Upstream, requests: &[(&str, &str, &str, String)]) {
    let mut leaked = Vec::new();
    for (method, target, headers, body) in requests {
        let before = upstream.seen().len();
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(proxy, method, target, headers, body)).await;
        let credentialed = upstream.seen()[before..]
            .iter()
            .any(|seen| seen.header("authorization") == Some(&format!("token {SECRET}")));
        if credentialed || answer.starts_with("HTTP/1.1 200") {
            let key = if credentialed { "the upstream got the bound key" } else { "answered 200" };
            leaked.push(format!("{method} {target} {body} -> {} ({key})", answer.lines().next().unwrap_or_default()));
        }
    }
    assert!(leaked.is_empty(), "went out credentialed with no approval:\n{}", leaked.join("\n"));
}

/// R58-1 (HIGH if GitHub's JSON parser is Ruby's, as its Rails API is): a GraphQL body typed as a
/// form (curl -d's default; GitHub's documented example sends JSON so) whose JSON follows a
/// `/* … */` or `// …` comment. Ruby's `json` gem (and yajl-ruby, Oj) skip comments as
/// whitespace, so GitHub reads the JSON `mergePullRequest`; the proxy reads JSON only from a body
/// that starts with `{`, and its form reading finds the harmless `query` inside the comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r1_a_graphql_json_body_behind_a_comment_is_read() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = Proxy::start(&harness, "s-58-r1", &upstream).await;
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let mutation = r#"{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"}"#;
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[
            ("POST", "/graphql", form, format!("/*&query=%7Bviewer%7Blogin%7D%7D&*/{mutation}")),
            ("POST", "/graphql", form, format!("//&query=%7Bviewer%7Blogin%7D%7D&\n{mutation}")),
            ("POST", "/graphql", "", format!("/*&query=%7Bviewer%7Blogin%7D%7D&*/\n{mutation}")),
        ],
    )
    .await;
}

/// R58-2 (HIGH by the spec's own header: "what publishes … a repository … wait"): GitHub Pages
/// publishes a private repository's branch to the internet; the site's creation, its update
/// (`public`, `source`) and an artifact's deployment go out through the ungated operations in a
/// repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r2_publishing_a_repository_through_pages_waits() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_proxy(&harness, "s-58-r2", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[
            ("POST", "/repos/acme/private-app/pages", json, r#"{"source":{"branch":"main","path":"/"}}"#.into()),
            ("PUT", "/repos/acme/private-app/pages", json, r#"{"public":true,"source":"main"}"#.into()),
            (
                "POST",
                "/repos/acme/private-app/pages/deployments",
                json,
                r#"{"artifact_id":1,"pages_build_version":"x","oidc_token":"y"}"#.into(),
            ),
        ],
    )
    .await;
}

/// R58-3 (HIGH by the spec's own gating of `PUT …/environments/**`): creating a deployment branch
/// policy opens a protected environment (and its secrets) to a branch the agent pushes; the same
/// policy's `PUT` waits, its `POST` goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r3_opening_an_environment_to_a_branch_waits() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_proxy(&harness, "s-58-r3", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[(
            "POST",
            "/repos/acme/app/environments/production/deployment-branch-policies",
            json,
            r#"{"name":"agent/*","type":"branch"}"#.into(),
        )],
    )
    .await;
}

/// R58-4 (HIGH if GitHub routes a raw `/` in `{branch}`, which its branch routes take): the gated
/// branch-protection templates put `protection` right after one `{branch}` segment, so the
/// protection of `release/1.0` is replaced, loosened or stripped through the ungated `PUT`,
/// `PATCH` and `POST` in a repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r4_a_protected_branch_with_a_slash_is_still_guarded() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_proxy(&harness, "s-58-r4", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    let open = r#"{"required_status_checks":null,"enforce_admins":false,"required_pull_request_reviews":null,"restrictions":null,"allow_force_pushes":true,"allow_deletions":true}"#;
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[
            ("PUT", "/repos/acme/app/branches/release/1.0/protection", json, open.into()),
            (
                "PATCH",
                "/repos/acme/app/branches/release/1.0/protection/required_pull_request_reviews",
                json,
                r#"{"required_approving_review_count":0,"dismiss_stale_reviews":true}"#.into(),
            ),
            (
                "POST",
                "/repos/acme/app/branches/release/1.0/protection/required_pull_request_reviews",
                json,
                r#"{"required_approving_review_count":0}"#.into(),
            ),
        ],
    )
    .await;
}

/// R58-5 (MEDIUM: `git push` is ungated by design, but the spec gates these effects over REST):
/// renaming a branch frees its name for an ungated `POST …/git/refs` at any commit (a force-move
/// of `main` without `move_ref`); syncing a fork's branch may make a merge commit (as the gated
/// `POST …/merges` does); `update-branch` merges the base into a pull request's head.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r5_renaming_and_merging_branches_wait() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_proxy(&harness, "s-58-r5", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[
            ("POST", "/repos/acme/app/branches/main/rename", json, r#"{"new_name":"main-old"}"#.into()),
            ("POST", "/repos/acme/app/merge-upstream", json, r#"{"branch":"main"}"#.into()),
            ("PUT", "/repos/acme/app/pulls/7/update-branch", json, "{}".into()),
        ],
    )
    .await;
}

/// R58-6 (HIGH for an organization owner's token, the case the spec's organization gates are
/// for): GraphQL grants and organization/enterprise settings the denylist does not name go as the
/// ungated `graphql` — the migrator role handed to another account (it can then migrate every
/// repository of the organization out), outside collaborators removed from every repository,
/// private forking opened, every enterprise member made admin of every repository.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_58_r6_graphql_grants_and_organization_settings_wait() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_proxy(&harness, "s-58-r6", &upstream).await;
    let json = "Content-Type: application/json\r\n";
    let document = |mutation: &str| format!(r#"{{"query":"mutation{{{mutation}{{clientMutationId}}}}"}}"#);
    none_goes_credentialed(
        &proxy,
        &upstream,
        &[
            (
                "POST",
                "/graphql",
                json,
                document(r#"grantMigratorRole(input:{organizationId:\"O_1\",actor:\"attacker\",actorType:USER})"#),
            ),
            (
                "POST",
                "/graphql",
                json,
                document(r#"removeOutsideCollaborator(input:{organizationId:\"O_1\",userId:\"U_1\"})"#),
            ),
            (
                "POST",
                "/graphql",
                json,
                document(
                    r#"updateOrganizationAllowPrivateRepositoryForkingSetting(input:{organizationId:\"O_1\",forkingEnabled:true})"#,
                ),
            ),
            (
                "POST",
                "/graphql",
                json,
                document(
                    r#"updateEnterpriseDefaultRepositoryPermissionSetting(input:{enterpriseId:\"E_1\",settingValue:ADMIN})"#,
                ),
            ),
        ],
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// The fifty-ninth re-attack (the bundled AWS and Google Cloud specs, decision 0017). Each test
// asserts the secure outcome; each fails while its hole is open (the request reached the upstream
// signed with the user's AWS keys, or with the bound Google token, and no approval was asked).
// ---------------------------------------------------------------------------------------------

/// The user's AWS access key id the bundled AWS spec re-signs with in these tests.
const AWS_KEY_ID: &str = "AKIAREALUSERKEY00059";

/// AWS keys bound to every connector (the user's, as `aileron auth import aws` binds them).
struct PlantedAwsKeys;

impl aileron::stores::bindings::CredentialSource for PlantedAwsKeys {
    fn resolve<'a>(
        &'a self,
        connector_fqn: &'a str,
        kind: aileron_core::manifest::CredentialKind,
        _refresher: &'a dyn aileron::stores::bindings::TokenRefresher,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<aileron::stores::bindings::ResolvedCredential, aileron_core::Failure>,
                > + Send
                + 'a,
        >,
    > {
        Box::pin(async move {
            Ok(aileron::stores::bindings::ResolvedCredential {
                binding: aileron::stores::bindings::BindingInfo::new(kind, connector_fqn, "planted"),
                injection: aileron::stores::bindings::Injection::Aws(aileron_core::sigv4::AwsCredentials {
                    access_key_id: AWS_KEY_ID.to_string(),
                    secret_access_key: zeroize::Zeroizing::new("real/user/secret/key/0059".to_string()),
                    session_token: None,
                }),
            })
        })
    }
}

/// A session proxy whose operations are a bundled spec's, its `host` operations moved to the
/// upstream's port (`edit` adjusts the manifest's text further), credentialed by `keys`.
async fn bundled_spec_proxy(
    harness: &Harness,
    id: &str,
    upstream: &Upstream,
    manifest: &str,
    host: &str,
    edit: impl Fn(String) -> String,
    keys: Arc<dyn aileron::stores::bindings::CredentialSource>,
) -> Proxy {
    let destination = format!("localhost:{}", upstream.address.port());
    let text = edit(manifest.replace(host, &destination));
    let manifest = aileron_core::manifest::parse_manifest(&text, "manifest.toml").unwrap();
    let oauth = Arc::new(aileron::stores::oauth::OAuthFlows::new().unwrap());
    let credentialing = Credentialing::new(vec![SealedConnector { manifest: Arc::new(manifest) }], Some((keys, oauth)));
    Proxy::start_with(harness, id, upstream, move |session| session.with_credentialing(Arc::new(credentialing))).await
}

/// Sends each `(method, target, headers, body)` on its own tunnel and asserts none reached the
/// upstream with an `Authorization` that `credentialed` recognises as the user's.
async fn none_goes_with(
    proxy: &Proxy,
    upstream: &Upstream,
    credentialed: impl Fn(&str) -> bool,
    requests: &[(&str, &str, &str, String)],
) {
    let mut leaked = Vec::new();
    for (method, target, headers, body) in requests {
        let before = upstream.seen().len();
        let answer =
            exchange(proxy.tls(&[b"http/1.1"]).await, &raw_request(proxy, method, target, headers, body)).await;
        if let Some(seen) =
            upstream.seen()[before..].iter().find(|seen| seen.header("authorization").is_some_and(&credentialed))
        {
            leaked.push(format!(
                "{method} {target} -> {} (the upstream got `{}`)",
                answer.lines().next().unwrap_or_default(),
                seen.header("authorization").unwrap_or_default()
            ));
        }
    }
    assert!(leaked.is_empty(), "went out credentialed with no approval:\n{}", leaked.join("\n"));
}

/// R59-1 (HIGH if S3 honours the query form on a header-signed request as it does on a presigned
/// one): `?x-amz-acl=public-read`, `?x-amz-grant-read=uri="…AllUsers"` and
/// `?x-amz-object-lock-mode=COMPLIANCE&x-amz-object-lock-retain-until-date=…` on an upload, a
/// copy onto itself or a multipart upload match the ungated `s3_put_object` / `s3_multipart` (the
/// spec names them only as headers), and the proxy signs them, query included, with the user's
/// keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_59_r1_s3_acl_grant_and_lock_in_the_query_wait() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_spec_proxy(
        &harness,
        "s-59-r1",
        &upstream,
        include_str!("../../../../connectors/specs/aws-cli/manifest.toml"),
        "s3.amazonaws.com:443",
        |text| text.replacen("service = \"s3\"\n", "service = \"s3\"\nregion = \"us-east-1\"\n", 1),
        Arc::new(PlantedAwsKeys),
    )
    .await;
    let unsigned = "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n";
    let copy = "x-amz-content-sha256: UNSIGNED-PAYLOAD\r\nx-amz-copy-source: /private-bucket/report.pdf\r\n\
                x-amz-metadata-directive: COPY\r\n";
    let all_users = "uri%3D%22http%3A%2F%2Facs.amazonaws.com%2Fgroups%2Fglobal%2FAllUsers%22";
    none_goes_with(
        &proxy,
        &upstream,
        |authorization| authorization.contains(&format!("Credential={AWS_KEY_ID}/")),
        &[
            ("PUT", "/private-bucket/report.pdf?x-amz-acl=public-read", unsigned, "new content".into()),
            ("PUT", "/private-bucket/report.pdf?x-amz-acl=public-read", copy, String::new()),
            ("PUT", &format!("/private-bucket/report.pdf?x-amz-grant-read={all_users}"), copy, String::new()),
            (
                "PUT",
                "/private-bucket/report.pdf?x-amz-object-lock-mode=COMPLIANCE\
                 &x-amz-object-lock-retain-until-date=2099-01-01T00%3A00%3A00Z",
                copy,
                String::new(),
            ),
            ("POST", "/private-bucket/big.bin?uploads&x-amz-acl=public-read-write", unsigned, String::new()),
        ],
    )
    .await;
}

/// R59-2 (HIGH by the AWS spec's own gating of `?retention`/`?legal-hold`/`x-amz-object-lock-*`):
/// Cloud Storage's XML API sets an object's retention with `PUT /BUCKET/OBJECT?retention` and a
/// `<Retention><Mode>COMPLIANCE</Mode>…` body — "cannot be removed or shortened" — and removes a
/// GOVERNANCE one with `x-goog-bypass-governance-retention: true`; the JSON API removes an
/// Unlocked one with `PATCH …/o/OBJECT?overrideUnlockedRetention=true`. The Google spec gates
/// only `?acl`: each goes out with the bound token as `xml_put_object` / `update_object`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_attack_59_r2_cloud_storage_object_retention_waits() {
    let harness = Harness::new();
    let upstream = Upstream::start().await;
    let proxy = bundled_spec_proxy(
        &harness,
        "s-59-r2",
        &upstream,
        include_str!("../../../../connectors/specs/google-cloud/manifest.toml"),
        "storage.googleapis.com:443",
        |text| text,
        Arc::new(PlantedKey(SECRET)),
    )
    .await;
    let xml = "Content-Type: application/xml\r\n";
    let json = "Content-Type: application/json\r\n";
    let compliance = "<Retention><Mode>COMPLIANCE</Mode><RetainUntilDate>2099-01-01T00:00:00Z</RetainUntilDate>\
                      </Retention>";
    none_goes_with(
        &proxy,
        &upstream,
        |authorization| authorization == format!("Bearer {SECRET}"),
        &[
            ("PUT", "/user-bucket/ledger.csv?retention", xml, compliance.into()),
            (
                "PUT",
                "/user-bucket/ledger.csv?retention",
                "Content-Type: application/xml\r\nx-goog-bypass-governance-retention: true\r\n",
                "<Retention></Retention>".into(),
            ),
            (
                "PATCH",
                "/storage/v1/b/user-bucket/o/ledger.csv?overrideUnlockedRetention=true",
                json,
                r#"{"retention":null}"#.into(),
            ),
            // The JSON API's own route, its retention in the body: `Locked` until 2099.
            (
                "PATCH",
                "/storage/v1/b/user-bucket/o/ledger.csv",
                json,
                r#"{"retention":{"mode":"Locked","retainUntilTime":"2099-01-01T00:00:00Z"}}"#.into(),
            ),
        ],
    )
    .await;
}
