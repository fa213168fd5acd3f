//! The LLM gateway (SPEC §12): a transparent streaming reverse proxy for the agent's own LLM
//! traffic. Anthropic paths go to `AILERON_ANTHROPIC_UPSTREAM`, OpenAI paths to
//! `AILERON_OPENAI_UPSTREAM`.
//!
//! Invariant: the gateway never parses a body, never consults the action store, never executes
//! anything and emits no spans or audit records of its own (a launched agent's requests reaching it
//! through its session's namespace are recorded under the session before they are served:
//! `daemon::app_in_session`, SPEC §15). Method, path, query, body bytes and end-to-end
//! headers go upstream unchanged; status, headers and body come back unchanged, chunk by chunk.
//! Hop-by-hop headers are the only thing dropped. The agent's own provider credentials pass
//! through; the daemon token is not required here. An upgrade request (Codex's WebSocket on
//! `/v1/responses`) is passed along; when the upstream switches protocols, the two connections
//! are bridged byte for byte.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::json;

use crate::dataplane::pooled_http::{self, Base, PooledClient};
use crate::dataplane::tls::Alpn;

pub const DEFAULT_ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI_UPSTREAM: &str = "https://api.openai.com";
/// Request bodies stream upstream as they arrive; this bounds their total size.
pub const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The paths the gateway serves (exempt from the daemon token).
pub const PATHS: [&str; 5] =
    ["/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/responses", "/v1/models"];

/// Which provider a path belongs to; its error bodies are shaped accordingly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    pub const ALL: [Provider; 2] = [Provider::Anthropic, Provider::OpenAi];

    /// The provider's name in the vault (`llm/<name>`, SPEC §15).
    pub fn name(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }

    /// The variable agents read the provider's key from (a launched agent's holds a placeholder
    /// when the vault keeps the key).
    pub fn key_variable(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::OpenAi => "OPENAI_API_KEY",
        }
    }

    /// Whose request this is: `/v1/messages*` is Anthropic's, the other paths OpenAI's — except
    /// `/v1/models`, which both serve: there an `anthropic-version` header (every Anthropic client
    /// sends it; OpenAI's never do) says Anthropic. Routed by path alone, an Anthropic SDK's
    /// `models.list()` went to the OpenAI upstream carrying the user's Anthropic key.
    pub fn of_request(path: &str, headers: &HeaderMap) -> Provider {
        if path.starts_with("/v1/messages")
            || (path.starts_with("/v1/models") && headers.contains_key("anthropic-version"))
        {
            Provider::Anthropic
        } else {
            Provider::OpenAi
        }
    }

    /// The provider's own error JSON, so agents show our message the way they show theirs.
    pub fn error(self, status: StatusCode, kind: &str, message: &str) -> Response {
        let body = match self {
            Provider::Anthropic => json!({ "type": "error", "error": { "type": kind, "message": message } }),
            Provider::OpenAi => json!({ "error": { "message": message, "type": kind, "param": null, "code": null } }),
        };
        (status, axum::Json(body)).into_response()
    }
}

/// Whether LLM traffic may flow. The vault implements this: while it exists and is locked, the
/// gateway answers 423 telling the user how to unlock (SPEC §12).
pub trait VaultGate: Send + Sync + 'static {
    /// `Some(message)` when the vault is locked.
    fn locked(&self) -> Option<String>;

    /// The provider key the user keeps in the vault (`llm/anthropic`, `llm/openai`), which the
    /// gateway puts on that provider's requests in place of whatever the agent sent (SPEC §15).
    fn provider_key(&self, _provider: Provider) -> Option<zeroize::Zeroizing<String>> {
        None
    }
}

/// Upstream bases and the pooled clients.
pub struct Gateway {
    pub anthropic: String,
    pub openai: String,
    anthropic_route: Route,
    openai_route: Route,
    /// hyper-util's pooled client over hyper-rustls (HTTP/2 by ALPN where the upstream offers it),
    /// sending the request's body as [`Capped`] hands it on (not boxed again).
    client: PooledClient<Capped>,
    /// HTTP/1.1 only: an `Upgrade` cannot ride HTTP/2, which ALPN could otherwise pick.
    upgrade_client: PooledClient<Capped>,
    /// reqwest, for an upstream the proxy environment sends through a proxy ([`Route::ViaProxy`]).
    proxied: reqwest::Client,
    proxied_upgrade: reqwest::Client,
    pub vault: Arc<dyn VaultGate>,
    /// Requests in flight, request bodies buffered and responses streaming, are capped: any local
    /// process may use the gateway (by design), none may exhaust the daemon with it.
    permits: Arc<tokio::sync::Semaphore>,
    /// The same cap, apart, for the user's own requests [`VaultKeyGranted`] (the daemon token):
    /// local processes without a key that fill `permits` (bodies trickled in, streams held open)
    /// do not keep the user from the model.
    granted_permits: Arc<tokio::sync::Semaphore>,
    /// And one for each launch session's (its gateway key): one agent holding every place it has
    /// (the sixteenth re-attack trickled 64 bodies) keeps neither another session nor the user
    /// from theirs. An entry with no place taken is dropped when the map grows.
    session_permits: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    /// The cap of each pool.
    max_concurrent: usize,
    /// The vault keys' echoes, made once per key.
    echoes: super::redaction::EchoesMade,
}

/// How requests reach one provider's upstream, decided once at start.
enum Route {
    /// hyper-util's client, the URI made from the base's parts and the request's own path and
    /// query: nothing parsed per request but what hyper parses anyway.
    Direct(Base),
    /// The proxy environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, less `NO_PROXY`) names a
    /// proxy for this upstream: reqwest carries the request through it (a CONNECT tunnel for
    /// https), as the gateway always did; the URL is the base with the path and query set.
    ViaProxy(reqwest::Url),
}

/// How many gateway requests may be in flight at once (request bodies stream through, so each
/// holds only the chunk in hand); beyond it the gateway answers 503 in the provider's shape.
pub const MAX_CONCURRENT_REQUESTS: usize = 64;

/// How long connecting to an upstream may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Gateway {
    pub fn new(anthropic: String, openai: String, vault: Arc<dyn VaultGate>) -> anyhow::Result<Gateway> {
        Gateway::with_proxy_environment(
            anthropic,
            openai,
            vault,
            &hyper_util::client::proxy::matcher::Matcher::from_env(),
        )
    }

    /// [`Gateway::new`] deciding each upstream's route by `proxies` (the unit tests give their own;
    /// reqwest, on the proxied route, reads the same environment `Matcher::from_env` does).
    fn with_proxy_environment(
        anthropic: String,
        openai: String,
        vault: Arc<dyn VaultGate>,
        proxies: &hyper_util::client::proxy::matcher::Matcher,
    ) -> anyhow::Result<Gateway> {
        let builder = |alpn| {
            crate::dataplane::tls::reqwest_builder(alpn)
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(CONNECT_TIMEOUT)
                .pool_idle_timeout(pooled_http::POOL_IDLE_TIMEOUT)
                .tcp_nodelay(true)
        };
        let proxied = builder(Alpn::Http2AndHttp1).build()?;
        let proxied_upgrade = builder(Alpn::Http1).build()?;
        let trim = |base: String| base.trim_end_matches('/').to_string();
        let (anthropic, openai) = (trim(anthropic), trim(openai));
        let route = |base: &str, variable: &str| -> anyhow::Result<Route> {
            let unusable =
                || anyhow::anyhow!("{variable} `{base}` is not an http(s) URL\nhint: e.g. https://api.openai.com");
            let url = reqwest::Url::parse(base)
                .ok()
                .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some());
            let url = url.ok_or_else(unusable)?;
            let uri: axum::http::Uri = url.as_str().parse().map_err(|_| unusable())?;
            if proxies.intercept(&uri).is_some() {
                return Ok(Route::ViaProxy(url));
            }
            Base::parse(url.as_str()).map(Route::Direct).ok_or_else(unusable)
        };
        Ok(Gateway {
            anthropic_route: route(&anthropic, crate::platform::env::AILERON_ANTHROPIC_UPSTREAM)?,
            openai_route: route(&openai, crate::platform::env::AILERON_OPENAI_UPSTREAM)?,
            anthropic,
            openai,
            client: pooled_http::client(Alpn::Http2AndHttp1, CONNECT_TIMEOUT),
            upgrade_client: pooled_http::client(Alpn::Http1, CONNECT_TIMEOUT),
            proxied,
            proxied_upgrade,
            vault,
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            granted_permits: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS)),
            session_permits: std::sync::Mutex::default(),
            max_concurrent: MAX_CONCURRENT_REQUESTS,
            echoes: Default::default(),
        })
    }

    /// Whether `provider`'s upstream is reached through a proxy of the environment.
    pub fn uses_proxy(&self, provider: Provider) -> bool {
        matches!(self.route(provider), Route::ViaProxy(_))
    }

    fn route(&self, provider: Provider) -> &Route {
        match provider {
            Provider::Anthropic => &self.anthropic_route,
            Provider::OpenAi => &self.openai_route,
        }
    }

    /// The same gateway with another concurrency cap, for each pool (tests, small machines).
    pub fn with_max_concurrent(mut self, requests: usize) -> Gateway {
        self.permits = Arc::new(tokio::sync::Semaphore::new(requests));
        self.granted_permits = Arc::new(tokio::sync::Semaphore::new(requests));
        self.max_concurrent = requests;
        self
    }

    /// A place in flight for a request with `granted` (or one without a key) that came in through
    /// the listener of the session `from` (its namespace's), if any: `None` when its pool is full.
    fn place(
        &self,
        granted: Option<&VaultKeyGranted>,
        from: Option<&FromSession>,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        // A session's requests, with its key or without one (an agent on its own provider login,
        // the eighteenth re-attack), are in its own pool.
        let session = granted.and_then(|granted| granted.session.as_ref()).or(from.map(|from| &from.0));
        let pool = match (granted, session) {
            (None, None) => self.permits.clone(),
            (Some(_), None) => self.granted_permits.clone(),
            (_, Some(session)) => {
                let mut pools = self.session_permits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if pools.len() >= MAX_IDLE_SESSION_POOLS && !pools.contains_key(session) {
                    pools.retain(|_, pool| pool.available_permits() < self.max_concurrent);
                }
                let pool = pools.entry(session.clone());
                pool.or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(self.max_concurrent))).clone()
            }
        };
        pool.try_acquire_owned().ok()
    }

    /// From `AILERON_ANTHROPIC_UPSTREAM` / `AILERON_OPENAI_UPSTREAM`, defaulting to the providers.
    pub fn from_env(vault: Arc<dyn VaultGate>) -> anyhow::Result<Gateway> {
        let pick = |name: &str, default: &str| {
            crate::platform::env::get(name).filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string())
        };
        Gateway::new(
            pick(crate::platform::env::AILERON_ANTHROPIC_UPSTREAM, DEFAULT_ANTHROPIC_UPSTREAM),
            pick(crate::platform::env::AILERON_OPENAI_UPSTREAM, DEFAULT_OPENAI_UPSTREAM),
            vault,
        )
    }
}

/// Marks a request whose provider key is a live session's gateway key or the daemon token
/// (`surfaces::daemon::auth::admit_gateway`): the vault's provider key goes only on such a request.
#[derive(Debug, Clone)]
pub struct VaultKeyGranted {
    /// The session whose key it is (its places in flight are its own); `None` for the user's.
    pub session: Option<String>,
}

/// Marks a gateway request that came in through a launch session's own listener (in the agent's
/// network namespace), with the session's id: its places in flight are the session's whatever key
/// it carries.
#[derive(Debug, Clone)]
pub struct FromSession(pub String);

/// Session pools kept before those with no place taken are dropped.
const MAX_IDLE_SESSION_POOLS: usize = 64;

/// The headers a provider key comes in: `x-api-key` (Anthropic's clients), then the bearer token
/// of `Authorization` (OpenAI's).
pub const KEY_HEADERS: [HeaderName; 2] = [HeaderName::from_static("x-api-key"), header::AUTHORIZATION];

/// The key `name` (one of [`KEY_HEADERS`]) carries: the value of `x-api-key`, the bearer token of
/// `Authorization`.
pub fn key_in<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    let value = headers.get(name)?.to_str().ok()?;
    if name != header::AUTHORIZATION {
        return Some(value);
    }
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Serves a request on a gateway path ([`is_gateway_path`]; the daemon's route table lists them),
/// already admitted: `/` answers probes, every other path goes upstream.
pub async fn serve(gateway: &Arc<Gateway>, request: Request) -> Response {
    if request.uri().path() == "/" {
        return root().await.into_response();
    }
    proxy(State(gateway.clone()), request).await
}

/// Some agents probe the base URL with `HEAD /` at start.
async fn root() -> StatusCode {
    StatusCode::OK
}

/// Headers that belong to one connection, not the message (RFC 9110 §7.6.1), plus `Host`, which
/// the client sets for the upstream. A `HeaderName` is lowercase already.
fn is_hop_by_hop(name: &HeaderName, connection_listed: &[String]) -> bool {
    let name = name.as_str();
    crate::dataplane::headers::HOP_BY_HOP.contains(&name)
        || name == "proxy-connection"
        || connection_listed.iter().any(|listed| listed == name)
}

/// The names a `Connection` header declares hop-by-hop beyond those always dropped (lowercase):
/// none for the usual `keep-alive`, `close` or `upgrade`, so most messages allocate nothing here.
fn connection_listed(headers: &HeaderMap) -> Vec<String> {
    connection_tokens(headers)
        .filter(|name| !name.eq_ignore_ascii_case("close") && !crate::dataplane::headers::is_hop_by_hop(name))
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The tokens of every `Connection` header, trimmed, empty ones skipped.
fn connection_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
}

/// The protocol a request asks to switch to (`Upgrade: websocket` with `Connection: upgrade`):
/// Codex opens its Responses stream as a WebSocket when the endpoint accepts one.
fn requested_upgrade(headers: &HeaderMap) -> Option<axum::http::HeaderValue> {
    connection_tokens(headers)
        .any(|name| name.eq_ignore_ascii_case("upgrade"))
        .then(|| headers.get(header::UPGRADE).cloned())?
}

async fn proxy(State(gateway): State<Arc<Gateway>>, mut request: Request) -> Response {
    let upgrade = requested_upgrade(request.headers()).map(|protocol| (protocol, hyper::upgrade::on(&mut request)));
    let provider = Provider::of_request(request.uri().path(), request.headers());
    // Held until the response body (or the upgraded connection) is done.
    let granted = request.extensions().get::<VaultKeyGranted>().is_some();
    let from = request.extensions().get::<FromSession>();
    let Some(permit) = gateway.place(request.extensions().get::<VaultKeyGranted>(), from) else {
        let kind = match provider {
            Provider::Anthropic => "overloaded_error",
            Provider::OpenAi => "server_error",
        };
        let message = "Aileron gateway: too many requests in flight; retry shortly".to_string();
        let mut response = provider.error(StatusCode::SERVICE_UNAVAILABLE, kind, &message);
        response.headers_mut().insert(header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
        // Without a permit, only a small body is read before answering.
        return refuse(request.into_body(), REFUSAL_DRAIN_BYTES, response).await;
    };
    if let Some(message) = gateway.vault.locked() {
        let kind = match provider {
            Provider::Anthropic => "permission_error",
            Provider::OpenAi => "vault_locked",
        };
        let response = provider.error(StatusCode::LOCKED, kind, &message);
        return refuse(request.into_body(), MAX_REQUEST_BODY_BYTES, response).await;
    }
    // hyper has already refused a malformed or conflicting `Content-Length` (400) before this.
    let declared_length =
        request.headers().get(header::CONTENT_LENGTH).and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    let too_large = || {
        let message = format!("request body larger than {MAX_REQUEST_BODY_BYTES} bytes");
        provider.error(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request_error", &message)
    };
    if declared_length.is_some_and(|length| length > MAX_REQUEST_BODY_BYTES as u64) {
        return close_after(too_large());
    }
    let base = match provider {
        Provider::Anthropic => &gateway.anthropic,
        Provider::OpenAi => &gateway.openai,
    };
    let (parts, body) = request.into_parts();
    let listed = connection_listed(&parts.headers);
    // The request's own header map goes upstream, hop-by-hop headers taken out in place.
    let mut headers = parts.headers;
    remove_hop_by_hop(&mut headers, &listed);
    // One `Content-Length`, the one hyper validated (repeats of it are allowed on the wire): a
    // single one goes as it came.
    if headers.get_all(header::CONTENT_LENGTH).iter().nth(1).is_some() {
        headers.remove(header::CONTENT_LENGTH);
        if let Some(length) = declared_length {
            headers.insert(header::CONTENT_LENGTH, length.into());
        }
    }
    // The vault's key for this provider, when the user keeps one there, replaces the session's
    // gateway key a launched agent holds. A placeholder that is no live session's (the session
    // ended, or someone else is trying) is refused here: upstream it would only be a bad key.
    let dead_placeholder = |name: &HeaderName| {
        key_in(&headers, name).is_some_and(|key| key.starts_with(aileron_core::manifest::PLACEHOLDER))
    };
    if !granted && KEY_HEADERS.iter().any(dead_placeholder) {
        let message = "Aileron gateway: this key is no live session's: the vault's key goes only on requests of a \
                       running `aileron launch` session (restart the agent with `aileron launch`)";
        return provider.error(StatusCode::UNAUTHORIZED, "authentication_error", message);
    }
    if granted {
        // The key that got the grant is a session's gateway key or the daemon token: Aileron's
        // own, never the provider's to see, in whichever header it came (the re-attack's L2).
        headers.remove("x-api-key");
        headers.remove(header::AUTHORIZATION);
    }
    // The vault's key, when it goes on the request: an upstream that echoes it back (a debugging
    // proxy, a misconfigured relay) must not hand it to the agent (the sixteenth re-attack).
    let mut echoes = None;
    if granted && let Some(key) = gateway.vault.provider_key(provider) {
        echoes = Some(gateway.echoes.of(&[key.as_str()]));
        // An answer in a coding could hide an echo from the redaction: none is asked for.
        headers.insert(header::ACCEPT_ENCODING, axum::http::HeaderValue::from_static("identity"));
        let (name, value) = match provider {
            Provider::Anthropic => (axum::http::HeaderName::from_static("x-api-key"), key.to_string()),
            Provider::OpenAi => (header::AUTHORIZATION, format!("Bearer {}", key.as_str())),
        };
        let Ok(mut value) = axum::http::HeaderValue::from_str(&value) else {
            let message =
                format!("Aileron gateway: the vault's llm/{} key cannot be sent as a header", provider.name());
            return provider.error(StatusCode::BAD_GATEWAY, "authentication_error", &message);
        };
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    if let Some((protocol, _)) = &upgrade {
        // Hop-by-hop, but the one thing a proxy must restate to pass an upgrade along.
        headers.insert(header::CONNECTION, axum::http::HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocol.clone());
    }
    // The body streams upstream as it arrives (never buffered whole), under the size cap. With a
    // `Content-Length` the exact length goes along; without one the upstream gets it chunked.
    // A bodiless request (a GET, an upgrade) stays bodiless: no invented `Content-Length: 0`.
    let oversized = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let has_body =
        declared_length.is_some_and(|length| length > 0) || (declared_length.is_none() && !body.is_end_stream());
    let forwarded = match gateway.route(provider) {
        Route::Direct(base) => {
            let Ok(uri) = base.uri_for(parts.uri.path_and_query()) else {
                return provider.error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "Aileron gateway: the request's path cannot be sent upstream",
                );
            };
            let mut upstream =
                axum::http::Request::new(Capped::new(if has_body { body } else { Body::empty() }, oversized.clone()));
            *upstream.method_mut() = parts.method;
            *upstream.uri_mut() = uri;
            *upstream.headers_mut() = headers;
            let client = if upgrade.is_some() { &gateway.upgrade_client } else { &gateway.client };
            client
                .request(upstream)
                .await
                .map(|response| response.map(UpstreamBody::Left))
                .map_err(|error| if error.is_connect() { "connection failed" } else { "request failed" })
        }
        Route::ViaProxy(base_url) => {
            let mut upstream = reqwest::Request::new(parts.method, upstream_url(base_url, &parts.uri));
            *upstream.headers_mut() = headers;
            if has_body {
                // reqwest takes a stream here (a body it wraps must be `Sync`; the request's is not).
                let capped = Body::new(Capped::new(body, oversized.clone())).into_data_stream();
                *upstream.body_mut() = Some(reqwest::Body::wrap_stream(capped));
            }
            let client = if upgrade.is_some() { &gateway.proxied_upgrade } else { &gateway.proxied };
            // As an `http::Response`: the upgrade handle stays in its extensions.
            client
                .execute(upstream)
                .await
                .map(|response| axum::http::Response::from(response).map(UpstreamBody::Right))
                .map_err(|error| {
                    if error.is_timeout() {
                        "timed out"
                    } else if error.is_connect() {
                        "connection failed"
                    } else {
                        "request failed"
                    }
                })
        }
    };
    let mut response = match forwarded {
        Ok(response) => response,
        Err(_) if oversized.load(std::sync::atomic::Ordering::Relaxed) => return close_after(too_large()),
        Err(reason) => {
            let message = format!("Aileron gateway: the upstream {base} could not be reached ({reason})");
            let kind = match provider {
                Provider::Anthropic => "api_error",
                Provider::OpenAi => "server_error",
            };
            return provider.error(StatusCode::BAD_GATEWAY, kind, &message);
        }
    };
    let upstream_listed = connection_listed(response.headers());
    if let (Some((_, client_side)), StatusCode::SWITCHING_PROTOCOLS) = (upgrade, response.status()) {
        let protocol = response.headers().get(header::UPGRADE).cloned();
        let upstream_side = hyper::upgrade::on(&mut response);
        let (mut parts, _) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers, &upstream_listed);
        if let Some(protocol) = protocol {
            parts.headers.insert(header::CONNECTION, axum::http::HeaderValue::from_static("upgrade"));
            parts.headers.insert(header::UPGRADE, protocol);
        }
        return switch_protocols(parts, client_side, upstream_side, permit);
    }
    // Status, headers and body as the upstream sent them (hop-by-hop headers taken out in place).
    // Each chunk is handed to hyper as it arrives: no buffering, so every SSE event reaches the
    // agent as soon as the upstream sends it. The permit lives as long as the body.
    let (mut parts, body) = response.into_parts();
    remove_hop_by_hop(&mut parts.headers, &upstream_listed);
    if let Some(echoes) = echoes {
        if super::redaction::encoded(&parts.headers) {
            let message = "Aileron gateway: the upstream answered in an encoding although asked for none; an echo of \
                           the vault's key in it could not be redacted";
            let kind = match provider {
                Provider::Anthropic => "api_error",
                Provider::OpenAi => "server_error",
            };
            return provider.error(StatusCode::BAD_GATEWAY, kind, message);
        }
        // Each piece goes on as it comes but for a tail that could still become an echo (never
        // the line break ending an SSE event); a redaction changes the length, so none is given.
        super::redaction::redact_head(&echoes, &mut parts);
        parts.headers.remove(header::CONTENT_LENGTH);
        let body = super::redaction::RedactedBody::new(body, echoes);
        return Response::from_parts(parts, Body::new(super::Permitted { body, _permit: permit }));
    }
    // The gateway's in-flight permit is held until the body is done or dropped.
    Response::from_parts(parts, Body::new(super::Permitted { body, _permit: permit }))
}

/// `base` with the request's path appended to its own and the request's query: the URL is
/// built from parts already parsed instead of from a string parsed whole.
fn upstream_url(base: &reqwest::Url, uri: &axum::http::Uri) -> reqwest::Url {
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    if prefix.is_empty() {
        url.set_path(uri.path());
    } else {
        url.set_path(&format!("{prefix}{}", uri.path()));
    }
    url.set_query(uri.query());
    url
}

/// Takes the hop-by-hop headers (and `Host`, which the client sets for the upstream) out of
/// `headers`: the names found in one pass over them are removed after it (a message has a few,
/// so a second pass is for more than [`HOP_BY_HOP_PER_PASS`]); no list is allocated.
fn remove_hop_by_hop(headers: &mut HeaderMap, connection_listed: &[String]) {
    loop {
        let mut found: [Option<HeaderName>; HOP_BY_HOP_PER_PASS] = Default::default();
        let mut count = 0;
        for name in headers.keys().filter(|name| is_hop_by_hop(name, connection_listed)).take(HOP_BY_HOP_PER_PASS) {
            found[count] = Some(name.clone());
            count += 1;
        }
        for name in found.into_iter().flatten() {
            headers.remove(name);
        }
        if count < HOP_BY_HOP_PER_PASS {
            return;
        }
    }
}

/// How many hop-by-hop names one pass of [`remove_hop_by_hop`] takes out.
const HOP_BY_HOP_PER_PASS: usize = 4;

/// The upstream's response body as the route that reached it gives it: hyper's own (`Left`), or
/// reqwest's through the user's proxy (`Right`).
type UpstreamBody = http_body_util::Either<hyper::body::Incoming, reqwest::Body>;

/// The upstream accepted an upgrade: answer 101 with its headers (`Connection: upgrade` and its
/// `Upgrade` restated by the caller), then copy bytes both ways between the two upgraded connections until either
/// side closes. The frames are never read.
fn switch_protocols(
    parts: axum::http::response::Parts,
    client_side: hyper::upgrade::OnUpgrade,
    upstream_side: hyper::upgrade::OnUpgrade,
    permit: tokio::sync::OwnedSemaphorePermit,
) -> Response {
    tokio::spawn(async move {
        let _held = permit;
        let (client, upstream) = tokio::join!(client_side, upstream_side);
        match (client, upstream) {
            (Ok(client), Ok(upstream)) => {
                let mut client = hyper_util::rt::TokioIo::new(client);
                let mut upstream = hyper_util::rt::TokioIo::new(upstream);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            (client, upstream) => log_line!(
                "aileron gateway: an upgraded connection could not be bridged (client: {}, upstream: {})",
                client.err().map_or("ok".to_string(), |e| e.to_string()),
                upstream.err().map_or("ok".to_string(), |e| e.to_string()),
            ),
        }
    });
    Response::from_parts(parts, Body::empty())
}

/// How much of a request body is read (and dropped) before answering 503 without a permit.
const REFUSAL_DRAIN_BYTES: usize = 256 * 1024;
/// How long a refused request's body may take to arrive before the connection is closed instead.
const REFUSAL_DRAIN_TIME: Duration = Duration::from_secs(2);

/// Answers a request that is not forwarded. Its body is read and dropped first (up to `limit`
/// bytes, within [`REFUSAL_DRAIN_TIME`]): hyper closes a keep-alive connection whose request body
/// was left unread, and a client that then reuses that connection from its pool fails with
/// "server disconnected" instead of showing our answer. A body that is larger or slower gets
/// `Connection: close`, so the client knows not to reuse the connection.
async fn refuse(body: Body, limit: usize, response: Response) -> Response {
    let drained = tokio::time::timeout(REFUSAL_DRAIN_TIME, async {
        let mut stream = body.into_data_stream();
        let mut seen = 0usize;
        while let Some(chunk) = stream.next().await {
            seen += chunk.map_err(|_| ())?.len();
            if seen > limit {
                return Err(());
            }
        }
        Ok(())
    })
    .await;
    match drained {
        Ok(Ok(())) => response,
        _ => close_after(response),
    }
}

/// The response with `Connection: close`: the rest of the request body will not be read.
fn close_after(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, axum::http::HeaderValue::from_static("close"));
    response
}

/// The request body, failing (and setting `oversized`) once its data passes
/// [`MAX_REQUEST_BODY_BYTES`], so a chunked body cannot exceed the cap either. Its data frames
/// pass as they come; trailers end it, unsent, as they always did here (an h2 upstream would
/// otherwise get what an HTTP/1.1 one never does).
struct Capped {
    body: Body,
    seen: usize,
    oversized: Arc<std::sync::atomic::AtomicBool>,
}

impl Capped {
    fn new(body: Body, oversized: Arc<std::sync::atomic::AtomicBool>) -> Capped {
        Capped { body, seen: 0, oversized }
    }
}

impl axum::body::HttpBody for Capped {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, std::io::Error>>> {
        let this = &mut *self;
        let frame = match std::task::ready!(std::pin::Pin::new(&mut this.body).poll_frame(context)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return std::task::Poll::Ready(Some(Err(std::io::Error::other(error)))),
            None => return std::task::Poll::Ready(None),
        };
        let Some(data) = frame.data_ref() else { return std::task::Poll::Ready(None) };
        this.seen += data.len();
        if this.seen > MAX_REQUEST_BODY_BYTES {
            this.oversized.store(true, std::sync::atomic::Ordering::Relaxed);
            return std::task::Poll::Ready(Some(Err(std::io::Error::other("request body over the gateway's cap"))));
        }
        std::task::Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Whether a request path is served by the gateway (no daemon token needed).
pub fn is_gateway_path(method: &Method, path: &str) -> bool {
    PATHS.contains(&path) || (path == "/" && (method == Method::HEAD || method == Method::GET))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Through a proxy, the URL built from parts is the one parsing the joined string gives (what
    /// the gateway always did there): base paths, queries with escapes, empty queries and dot
    /// segments alike.
    #[test]
    fn upstream_urls_are_the_joined_strings_parsed() {
        let bases = [
            "https://api.openai.com",
            "http://127.0.0.1:8080",
            "http://127.0.0.1:9/prefix",
            "https://proxy.example/a/b",
        ];
        let requests = [
            "/v1/messages",
            "/v1/messages?beta=true&x=1%202",
            "/v1/models?",
            "/v1/messages/count_tokens?q=%2F%3F&x&y=",
            "/v1/chat/completions?a=%22q%22&b=%C3%A9",
            "/v1/responses/../models",
            "/v1//responses",
        ];
        for base in bases {
            let parsed = reqwest::Url::parse(base).unwrap();
            for request in requests {
                let uri: axum::http::Uri = request.parse().unwrap();
                let joined = reqwest::Url::parse(&format!("{base}{request}")).unwrap();
                assert_eq!(upstream_url(&parsed, &uri).as_str(), joined.as_str(), "{base} + {request}");
            }
        }
    }

    struct Open;
    impl VaultGate for Open {
        fn locked(&self) -> Option<String> {
            None
        }
    }

    /// An upstream the proxy environment names a proxy for goes through reqwest (which tunnels
    /// through it); `NO_PROXY` and an environment without proxies keep it direct.
    #[test]
    fn only_upstreams_the_proxy_environment_covers_go_through_a_proxy() {
        use hyper_util::client::proxy::matcher::Matcher;
        crate::platform::process::install_crypto_provider();
        let gateway = |proxies: Matcher| {
            Gateway::with_proxy_environment(
                "https://api.anthropic.com".into(),
                "http://127.0.0.1:9".into(),
                Arc::new(Open),
                &proxies,
            )
            .unwrap()
        };
        let none = gateway(Matcher::builder().build());
        assert!(!none.uses_proxy(Provider::Anthropic) && !none.uses_proxy(Provider::OpenAi));
        let https_only = gateway(Matcher::builder().https("http://proxy.example:3128").build());
        assert!(https_only.uses_proxy(Provider::Anthropic) && !https_only.uses_proxy(Provider::OpenAi));
        let all_but_loopback = gateway(Matcher::builder().all("http://proxy.example:3128").no("127.0.0.1").build());
        assert!(all_but_loopback.uses_proxy(Provider::Anthropic) && !all_but_loopback.uses_proxy(Provider::OpenAi));
    }

    /// Each session's requests have places of their own, the user's theirs, keyless ones theirs:
    /// one agent holding every place it has keeps out neither another session nor the user (the
    /// sixteenth re-attack trickled 64 bodies with one session's key).
    #[test]
    fn a_session_holding_its_places_keeps_no_one_else_from_the_model() {
        crate::platform::process::install_crypto_provider();
        let gateway = Gateway::new("http://127.0.0.1:9".into(), "http://127.0.0.1:9".into(), Arc::new(Open))
            .unwrap()
            .with_max_concurrent(2);
        let session = |id: &str| VaultKeyGranted { session: Some(id.to_string()) };
        let user = VaultKeyGranted { session: None };
        let held: Vec<_> = (0..2).map(|_| gateway.place(Some(&session("s-1")), None).unwrap()).collect();
        assert!(gateway.place(Some(&session("s-1")), None).is_none(), "a session's places are capped");
        let other = gateway.place(Some(&session("s-2")), None);
        assert!(other.is_some(), "another session waited behind the first");
        assert!(gateway.place(Some(&user), None).is_some(), "the user waited behind a session");
        assert!(gateway.place(None, None).is_some(), "a keyless request waited behind a session");
        // A session's keyless requests (from its namespace's listener) are in its own pool: it
        // fills no one else's (the eighteenth re-attack held every keyless place from inside).
        let from = FromSession("s-3".to_string());
        let keyless: Vec<_> = (0..2).map(|_| gateway.place(None, Some(&from)).unwrap()).collect();
        assert!(gateway.place(None, Some(&from)).is_none(), "a session's keyless places are capped");
        assert!(gateway.place(None, None).is_some(), "a session filled the shared keyless pool");
        drop(keyless);
        drop(held);
        assert!(gateway.place(Some(&session("s-1")), None).is_some(), "a place given back is taken again");
        // Idle sessions' pools are dropped as the map grows; a busy one's stays with its count.
        let busy: Vec<_> = (0..2).map(|_| gateway.place(Some(&session("busy")), None).unwrap()).collect();
        for n in 0..MAX_IDLE_SESSION_POOLS * 2 {
            drop(gateway.place(Some(&session(&format!("idle-{n}"))), None));
        }
        assert!(gateway.session_permits.lock().unwrap().len() <= MAX_IDLE_SESSION_POOLS + 1);
        assert!(gateway.place(Some(&session("busy")), None).is_none(), "a busy session's count survives the pruning");
        drop((busy, other));
    }

    /// A body that yields the frames it was given.
    struct Frames(std::collections::VecDeque<hyper::body::Frame<bytes::Bytes>>);

    impl axum::body::HttpBody for Frames {
        type Data = bytes::Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, std::convert::Infallible>>> {
            std::task::Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn capped(frames: Vec<hyper::body::Frame<bytes::Bytes>>) -> (Body, Arc<std::sync::atomic::AtomicBool>) {
        let oversized = Arc::new(std::sync::atomic::AtomicBool::new(false));
        (Body::new(Capped::new(Body::new(Frames(frames.into())), oversized.clone())), oversized)
    }

    /// Data passes as it comes and trailers end the body unsent; past the cap, the body fails and
    /// says why.
    #[tokio::test]
    async fn a_capped_body_passes_its_data_and_fails_past_the_cap() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "1".parse().unwrap());
        let data = |bytes: &'static [u8]| hyper::body::Frame::data(bytes::Bytes::from_static(bytes));
        let (body, oversized) = capped(vec![data(b"ab"), data(b"cd"), hyper::body::Frame::trailers(trailers)]);
        let collected = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        assert_eq!(&collected[..], b"abcd");
        assert!(!oversized.load(std::sync::atomic::Ordering::Relaxed));

        let big = vec![0u8; MAX_REQUEST_BODY_BYTES / 2 + 1];
        let frame = || hyper::body::Frame::data(bytes::Bytes::from(big.clone()));
        let (body, oversized) = capped(vec![frame(), frame()]);
        let error = axum::body::to_bytes(body, usize::MAX).await.unwrap_err();
        assert!(format!("{error:?}").contains("over the gateway's cap"), "{error:?}");
        assert!(oversized.load(std::sync::atomic::Ordering::Relaxed));
    }

    /// The vault paths the gateway reads are the ones `aileron secret set llm/<provider>` writes.
    #[test]
    fn provider_keys_live_under_their_provider_names() {
        for provider in Provider::ALL {
            assert_eq!(crate::stores::vault::llm_key_path(provider), format!("secrets/llm/{}", provider.name()));
        }
    }

    /// Names a `Connection` header lists beyond the usual tokens, lowercase; the usual ones allocate nothing.
    #[test]
    fn connection_lists_only_the_names_it_adds() {
        let mut headers = HeaderMap::new();
        headers.append(header::CONNECTION, "keep-alive, Upgrade".parse().unwrap());
        headers.append(header::CONNECTION, "close,, X-Hop ".parse().unwrap());
        assert_eq!(connection_listed(&headers), vec!["x-hop".to_string()]);
        headers.insert(header::UPGRADE, "websocket".parse().unwrap());
        assert_eq!(requested_upgrade(&headers).unwrap(), "websocket");
        headers.insert(header::HOST, "127.0.0.1".parse().unwrap());
        headers.insert("x-hop", "dropped".parse().unwrap());
        headers.insert("x-kept", "kept".parse().unwrap());
        let listed = connection_listed(&headers);
        remove_hop_by_hop(&mut headers, &listed);
        assert_eq!(headers.keys().map(HeaderName::as_str).collect::<Vec<_>>(), ["x-kept"]);
    }

    /// A base that is not an http(s) URL is refused when the gateway is built, naming the variable.
    #[test]
    fn an_unusable_upstream_is_refused_at_start() {
        crate::platform::process::install_crypto_provider();
        for base in ["api.openai.com", "ftp://example.com", "http://", ""] {
            let error =
                Gateway::new(base.into(), DEFAULT_OPENAI_UPSTREAM.into(), Arc::new(Open)).err().unwrap().to_string();
            assert!(
                error.contains(crate::platform::env::AILERON_ANTHROPIC_UPSTREAM) && error.contains("hint:"),
                "{base}: {error}"
            );
        }
    }
}
