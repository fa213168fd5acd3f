//! How the MCP server reaches the daemon's HTTP API. Both servers send every tool call to
//! `POST /v1/actions/{name}/run`, the one chokepoint:
//! - `aileron-mcp` finds the daemon like the CLI (`AILERON_URL` + `AILERON_TOKEN`, else
//!   `daemon.json`, auto-starting it) and finds it again after a connection failure. Launched by
//!   `aileron launch`, it holds the session's token; started by an agent host on its own, it
//!   finds the daemon token and trades it for a session of its own (agent `aileron-mcp`,
//!   unconfined), so its calls are audited as an agent's and carry only an agent's scopes;
//! - the daemon's own `/mcp` calls the workflows in-process with the principal its bearer
//!   authentication resolved, so the caller's scopes apply to each call exactly as they would to
//!   a direct request, without leaving the process.
//!
//! Either way the token is the caller's whole identity: the daemon derives the audit actor from
//! the principal it authenticates (SPEC §0, invariant 4).

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use std::sync::Arc;

use opentelemetry::context::FutureExt as _;
use serde_json::Map;

use super::catalog::Unreachable;
use crate::platform::home::Home;
use crate::platform::principal::Principal;
use crate::surfaces::client::DaemonClient;
use crate::wire::{Answer, ApiError, Reply, RunAnswer, SessionStarted, StartSession};
use crate::workflows::{self, Services};

/// The agent name of the session an unlaunched `aileron-mcp` opens for itself.
pub const OWN_SESSION_AGENT: &str = "aileron-mcp";

/// Bounds every request except runs: the daemon answers these from memory.
const QUICK_TIMEOUT: Duration = Duration::from_secs(10);
/// A backstop for runs, whose steps may each take up to 5 minutes (SPEC §4.3) plus retries.
const RUN_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Per-request facts the MCP request carried.
#[derive(Debug, Clone, Default)]
pub struct CallOrigin {
    /// Who the `/mcp` caller authenticated as (in-process only).
    pub principal: Option<Principal>,
    /// W3C `traceparent` from the MCP request's `_meta`, forwarded as a header.
    pub traceparent: Option<String>,
}

pub struct DaemonLink {
    mode: Mode,
}

enum Mode {
    /// `resumable`: the own session of the last connection, continued after a daemon restart so
    /// the approvals (and tasks) it asked for stay its own.
    Discovered {
        home: Home,
        current: tokio::sync::Mutex<Option<Connected>>,
        resumable: std::sync::Mutex<Option<String>>,
    },
    InProcess {
        services: Arc<Services>,
    },
}

/// The daemon `aileron-mcp` talks to, and the session it opened there when it had to.
struct Connected {
    /// Carries a session token: the launch's, or the one of `own_session`.
    client: DaemonClient,
    /// The same daemon and token for the calls of the MCP session itself.
    direct: DirectClient,
    own_session: Option<OwnSession>,
}

/// `aileron-mcp`'s own requests (tool calls, the catalog, approval results) go through
/// hyper-util's pooled client with the URI made from parts and the `Authorization` header made
/// once: each tool call is one request after another on a kept-alive connection, and reqwest's
/// layers (URL parse, request builder, redirect and retry layers) were an eighth of
/// `aileron-mcp`'s CPU per call (BENCHMARKS.md (e)).
#[derive(Clone)]
struct DirectClient {
    http: crate::dataplane::pooled_http::PooledClient,
    base: crate::dataplane::pooled_http::Base,
    authorization: reqwest::header::HeaderValue,
}

/// Why a request got no answer.
struct NoAnswer {
    /// The connection was refused (nothing was sent: safe to retry elsewhere).
    connect: bool,
    cause: String,
}

impl DirectClient {
    fn new(client: &DaemonClient) -> Result<DirectClient, Unreachable> {
        let base = crate::dataplane::pooled_http::Base::parse(&client.base_url).ok_or_else(|| Unreachable {
            message: format!(
                "the daemon's address `{}` is not an http(s) URL\nhint: check AILERON_URL",
                client.base_url
            ),
        })?;
        let http = crate::dataplane::pooled_http::client(
            crate::dataplane::tls::Alpn::Http1,
            crate::surfaces::client::CONNECT_TIMEOUT,
        );
        Ok(DirectClient { http, base, authorization: client.authorization() })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        traceparent: Option<&str>,
        body: Option<bytes::Bytes>,
        timeout: Duration,
    ) -> Result<(u16, bytes::Bytes), NoAnswer> {
        use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
        let no_answer = |cause: String| NoAnswer { connect: false, cause };
        let path = axum::http::uri::PathAndQuery::try_from(path).map_err(|error| no_answer(error.to_string()))?;
        let uri = self.base.uri_for(Some(&path)).map_err(|error| no_answer(error.to_string()))?;
        let has_body = body.is_some();
        let mut request = axum::http::Request::new(body.map_or_else(axum::body::Body::empty, axum::body::Body::from));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.insert(AUTHORIZATION, self.authorization.clone());
        if has_body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(traceparent) = traceparent.and_then(|value| HeaderValue::from_str(value).ok()) {
            headers.insert("traceparent", traceparent);
        }
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|error| NoAnswer { connect: error.is_connect(), cause: chain(&error) })?;
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX)
                .await
                .map_err(|error| no_answer(chain(&error)))?;
            Ok((status, bytes))
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(no_answer("it did not answer in time".into())))
    }
}

/// A session `aileron-mcp` opened for itself with the daemon token, ended when it exits.
struct OwnSession {
    admin: DaemonClient,
    session_id: String,
}

/// Whether finding the daemon may start one. Tool calls may (like any CLI command); the
/// background watcher must not, or `aileron daemon stop` would be undone behind the user's back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Autostart {
    Allowed,
    Never,
}

impl DaemonLink {
    /// `aileron-mcp`: the daemon of `home`.
    pub fn discovered(home: Home) -> DaemonLink {
        DaemonLink {
            mode: Mode::Discovered {
                home,
                current: tokio::sync::Mutex::new(None),
                resumable: std::sync::Mutex::new(None),
            },
        }
    }

    /// The daemon's `/mcp`: the workflows, called with each caller's own principal.
    pub fn in_process(services: Arc<Services>) -> DaemonLink {
        DaemonLink { mode: Mode::InProcess { services } }
    }

    /// Ends the session `aileron-mcp` opened for itself, if it did (the agent host is done).
    pub async fn close(&self) {
        if let Mode::Discovered { current, .. } = &self.mode
            && let Some(Connected { own_session: Some(own), .. }) = current.lock().await.take()
        {
            let path = format!("/v1/sessions/{}/end", own.session_id);
            let _ = own
                .admin
                .request(Method::POST, &path)
                .json(&crate::wire::EndSession {
                    exit_code: None,
                    quarantined: Vec::new(),
                    new_repositories: Vec::new(),
                    hidden_changes: Vec::new(),
                })
                .timeout(QUICK_TIMEOUT)
                .send()
                .await;
        }
    }

    /// The daemon's URL as far as it is known (for messages).
    pub async fn daemon_url(&self) -> String {
        match &self.mode {
            Mode::Discovered { current, home, .. } => match &*current.lock().await {
                Some(connected) => connected.client.base_url.clone(),
                None => format!("the daemon of {}", home.root().display()),
            },
            Mode::InProcess { services } => services.base_url(),
        }
    }

    /// A client for one request: the current daemon, found again when there is none yet.
    pub async fn client(&self, autostart: Autostart) -> Result<DaemonClient, Unreachable> {
        self.connected(autostart).await.map(|(client, _)| client)
    }

    /// [`DaemonLink::client`] with the direct client for the same daemon and token.
    async fn connected(&self, autostart: Autostart) -> Result<(DaemonClient, DirectClient), Unreachable> {
        match &self.mode {
            Mode::InProcess { services } => Err(Unreachable {
                message: format!("the daemon at {} serves this MCP session in-process", services.base_url()),
            }),
            Mode::Discovered { home, current, resumable } => {
                let mut current = current.lock().await;
                if let Some(connected) = &*current {
                    return Ok((connected.client.clone(), connected.direct.clone()));
                }
                let found = match autostart {
                    Autostart::Allowed => DaemonClient::connect(home).await.map(Some),
                    Autostart::Never => DaemonClient::discover(home).await,
                };
                match found {
                    Ok(Some(client)) => {
                        let previous = resumable.lock().expect("resumable session poisoned").clone();
                        let connected = with_agent_identity(client, previous).await?;
                        if let Some(own) = &connected.own_session {
                            *resumable.lock().expect("resumable session poisoned") = Some(own.session_id.clone());
                        }
                        let found = (connected.client.clone(), connected.direct.clone());
                        *current = Some(connected);
                        Ok(found)
                    }
                    Ok(None) => Err(Unreachable {
                        message: format!(
                            "the Aileron daemon is not running (no answer at the address in {})\n\
                             hint: start it with `aileron daemon start`",
                            home.daemon_json().display()
                        ),
                    }),
                    Err(error) => {
                        let mut message = format!("{error:#}");
                        if !message.contains("hint: ") {
                            message.push_str(
                                "\nhint: start the daemon with `aileron daemon start`, or fix AILERON_URL and AILERON_TOKEN",
                            );
                        }
                        Err(Unreachable { message })
                    }
                }
            }
        }
    }

    /// Forgets the current daemon after a connection failure, so the next request finds it again
    /// (it may have restarted on another port with another token).
    pub async fn forget(&self, failed: &DaemonClient) {
        if let Mode::Discovered { current, .. } = &self.mode {
            let mut current = current.lock().await;
            if current.as_ref().is_some_and(|c| c.client.base_url == failed.base_url) {
                *current = None;
            }
        }
    }

    /// `GET /v1/actions`, its body unparsed: a catalog of 10,000 actions is 6 MB of JSON, parsed
    /// once by the caller straight into its types rather than into a `Value` first.
    pub async fn list_actions(&self, origin: &CallOrigin) -> Result<(u16, bytes::Bytes), Unreachable> {
        match &self.mode {
            Mode::InProcess { services } => match origin.principal.as_ref() {
                Some(principal) => match workflows::actions::list_json(services, principal) {
                    Ok(bytes) => Ok((200, bytes)),
                    Err(error) => Ok(raw(answered(Err(error)))),
                },
                None => Ok(raw(answered(Err(ApiError::unauthorized())))),
            },
            Mode::Discovered { .. } => self.send_raw(origin, Method::GET, "/v1/actions", None).await,
        }
    }

    /// `POST /v1/actions/{action}/run` (`action` already URL-safe).
    pub async fn run(
        &self,
        origin: &CallOrigin,
        action: &str,
        args: Map<String, Value>,
    ) -> Result<RunAnswer, Unreachable> {
        match &self.mode {
            Mode::InProcess { services } => {
                let Some(principal) = &origin.principal else { return Ok(ApiError::unauthorized().into()) };
                let parent = origin
                    .traceparent
                    .as_deref()
                    .map(crate::platform::telemetry::context_from_traceparent)
                    .unwrap_or_default();
                let waited = Arc::default();
                let run = workflows::actions::run(services, principal, action.to_string(), args, &waited);
                Ok(run.with_context(parent).await)
            }
            Mode::Discovered { .. } => {
                let body = serde_json::to_vec(&crate::wire::RunBody { args }).expect("JSON values serialize");
                if body.len() > crate::wire::MAX_API_BODY_BYTES {
                    return Ok(args_too_large(body.len()).into());
                }
                let (status, body) =
                    self.send(origin, Method::POST, &format!("/v1/actions/{action}/run"), Some(body.into())).await?;
                Ok(RunAnswer::from_http(status, body))
            }
        }
    }

    /// `GET /v1/action-approvals/{id}/result`.
    pub async fn approval_result(&self, origin: &CallOrigin, id: &str) -> Result<(u16, Value), Unreachable> {
        match &self.mode {
            Mode::InProcess { services } => Ok(answered(in_process(origin, |principal| {
                workflows::approvals::result(services, principal, id.to_string())
            }))),
            Mode::Discovered { .. } => {
                self.send(origin, Method::GET, &format!("/v1/action-approvals/{id}/result"), None).await
            }
        }
    }

    /// `POST /v1/action-approvals/{id}/cancel`: the agent withdraws its own pending approval.
    pub async fn cancel_approval(&self, origin: &CallOrigin, id: &str) -> Result<(u16, Value), Unreachable> {
        let body = crate::wire::CancelBody { reason: Some("withdrawn by the agent".to_string()) };
        match &self.mode {
            Mode::InProcess { services } => {
                let Some(principal) = &origin.principal else { return Ok(answered(Err(ApiError::unauthorized()))) };
                Ok(answered(workflows::approvals::cancel(services, principal, id.to_string(), body).await))
            }
            Mode::Discovered { .. } => {
                let body = bytes::Bytes::from(serde_json::to_vec(&body).expect("a cancel body serializes"));
                self.send(origin, Method::POST, &format!("/v1/action-approvals/{id}/cancel"), Some(body)).await
            }
        }
    }

    /// `GET /v1/health`.
    pub async fn health(&self, origin: &CallOrigin) -> Result<(u16, Value), Unreachable> {
        match &self.mode {
            Mode::InProcess { .. } => Ok(answered(Ok(Reply::ok(crate::wire::Health::current())))),
            Mode::Discovered { .. } => self.send(origin, Method::GET, "/v1/health", None).await,
        }
    }

    /// Sends one request and decodes the answer, whatever its status. A request that never
    /// reached the daemon (connection refused) is retried once against the daemon found again;
    /// nothing else is retried, so a run can never execute twice because of this.
    async fn send(
        &self,
        origin: &CallOrigin,
        method: Method,
        path: &str,
        body: Option<bytes::Bytes>,
    ) -> Result<(u16, Value), Unreachable> {
        let (status, bytes) = self.send_raw(origin, method, path, body).await?;
        let value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        Ok((status, value))
    }

    /// [`DaemonLink::send`] with the answer's bytes unparsed.
    async fn send_raw(
        &self,
        origin: &CallOrigin,
        method: Method,
        path: &str,
        body: Option<bytes::Bytes>,
    ) -> Result<(u16, bytes::Bytes), Unreachable> {
        let timeout = if method == Method::POST && path.ends_with("/run") { RUN_TIMEOUT } else { QUICK_TIMEOUT };
        let mut retried = false;
        loop {
            let (client, direct) = self.connected(Autostart::Allowed).await?;
            match direct.send(method.clone(), path, origin.traceparent.as_deref(), body.clone(), timeout).await {
                Ok(answer) => return Ok(answer),
                Err(failed) if failed.connect && !retried && matches!(self.mode, Mode::Discovered { .. }) => {
                    self.forget(&client).await;
                    retried = true;
                }
                Err(failed) => {
                    self.forget(&client).await;
                    return Err(unreachable(&client, &failed));
                }
            }
        }
    }
}

/// A client that acts as an agent: a session token is used as it is; the daemon token (the
/// local user's, found in `daemon.json` by an `aileron-mcp` no launch started) is traded for a
/// session of this process's own, so nothing it does is audited as the user or carries the
/// user's scopes.
async fn with_agent_identity(client: DaemonClient, resume: Option<String>) -> Result<Connected, Unreachable> {
    if !client.is_admin().await {
        return Ok(Connected { direct: DirectClient::new(&client)?, client, own_session: None });
    }
    let mut request = StartSession {
        resume,
        agent: OWN_SESSION_AGENT.to_string(),
        pid: Some(std::process::id()),
        confinement: crate::stores::sessions::Confinement::Unconfined,
        writable: Vec::new(),
        network: None,
        hidden: Vec::new(),
        exposed: Vec::new(),
        home_seen: Vec::new(),
    };
    // The session of the last connection first (a daemon restart interrupted it); a new one when
    // it cannot be continued.
    let resumed = match request.resume.is_some() {
        true => client.post_as::<_, SessionStarted>("/v1/sessions", &request).await.ok(),
        false => None,
    };
    request.resume = None;
    let started: SessionStarted = match resumed {
        Some(started) => started,
        None => client.post_as("/v1/sessions", &request).await.map_err(|error| Unreachable {
            message: format!("the Aileron daemon at {} refused a session for aileron-mcp: {error:#}", client.base_url),
        })?,
    };
    let own_session = OwnSession { admin: client.clone(), session_id: started.session_id };
    let client = client.with_token(started.token);
    Ok(Connected { direct: DirectClient::new(&client)?, client, own_session: Some(own_session) })
}

/// A workflow's answer for the principal `/mcp` authenticated (401 without one).
fn in_process(origin: &CallOrigin, workflow: impl FnOnce(&Principal) -> Answer) -> Answer {
    match &origin.principal {
        Some(principal) => workflow(principal),
        None => Err(ApiError::unauthorized()),
    }
}

/// [`answered`] as bytes.
fn raw((status, body): (u16, Value)) -> (u16, bytes::Bytes) {
    (status, bytes::Bytes::from(serde_json::to_vec(&body).expect("JSON values serialize")))
}

/// The status and body the HTTP API would have sent.
fn answered(answer: Answer) -> (u16, Value) {
    let reply = answer.unwrap_or_else(Reply::from);
    (reply.status.as_u16(), reply.body)
}

fn unreachable(client: &DaemonClient, failed: &NoAnswer) -> Unreachable {
    let cause = if failed.connect { "connection refused" } else { failed.cause.as_str() };
    Unreachable {
        message: format!(
            "cannot reach the Aileron daemon at {}: {cause}\nhint: start it with `aileron daemon start` \
             (or check AILERON_URL and AILERON_TOKEN), then call the tool again",
            client.base_url
        ),
    }
}

/// An error with its causes, the way the CLI prints them.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    message
}

/// A call larger than the daemon reads, refused here with what the daemon would have said.
fn args_too_large(bytes: usize) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "args_too_large",
        format!("the call is {bytes} bytes; the daemon reads at most {}", crate::wire::MAX_API_BODY_BYTES),
    )
    .with_hint("pass smaller arguments (a reference to the data rather than the data)")
}
