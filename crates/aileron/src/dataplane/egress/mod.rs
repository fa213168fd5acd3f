//! The egress hook: the one function through which a connector's outbound HTTP leaves the daemon
//! (SPEC §4.4). Order: manifest allow-list (sandbox boundary) → action subset (action boundary) →
//! credential kind checks → binding lookup → host-side injection → the request (no redirects,
//! capped body) → audit `connector.proxy.proxied|rejected`.
//!
//! Invariant: credential bytes are only ever placed in the outbound request's header. They are
//! not returned to the guest, logged, audited or put in an error.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aileron_core::manifest::{ConnectorManifest, CredentialMethod};
use aileron_core::policy::{self, CapabilitySubset, EgressTarget};
use aileron_core::vocabulary::records::{ProxiedRequest, StepOrigin};
use aileron_core::vocabulary::{EventType, keys};
use aileron_core::{Boundary, Failure, FailureClass};
use aileron_sandbox::{GuestHttpRequest, GuestSpawn, HostHooks, HostHttpResponse, SpawnOutput};
use futures_util::StreamExt;
use serde_json::{Map, Value};

use crate::dataplane::public_address::NON_PUBLIC_REFUSAL;
use crate::dataplane::redaction::Echoes;
use crate::platform::principal::Caller;
use crate::stores::audit_log::AuditEvent;

mod programs;

/// Response bodies above this are refused (`resource_limit_exceeded`, limit `response_body`).
pub const MAX_RESPONSE_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Per-request upstream timeout; the step's wall-time limit bounds the whole call anyway.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

use crate::stores::bindings::{BindingEvent, BindingInfo, Injection};
pub use crate::stores::bindings::{CredentialSource, ResolvedCredential, Secret};

/// The methods a connector may use (SPEC §4.4).
pub const ALLOWED_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// What egress uses of the daemon: where credentials come from, the OAuth refresher, the HTTP
/// client (no redirects, public-only resolver, no proxy) and the audit log. Cheap to clone.
#[derive(Clone)]
pub struct EgressServices {
    pub credentials: Arc<dyn CredentialSource>,
    pub oauth: Arc<crate::stores::oauth::OAuthFlows>,
    pub client: reqwest::Client,
    pub audit: Arc<crate::stores::audit_log::AuditLog>,
    pub spawner: Arc<crate::dataplane::spawn::Spawner>,
    pub telemetry: crate::platform::telemetry::Telemetry,
}

/// The egress hook for one step of one run.
pub struct StepEgress {
    pub services: EgressServices,
    pub manifest: Arc<ConnectorManifest>,
    pub subset: CapabilitySubset,
    /// The step's connector, op and action, as the action's shared texts.
    pub connector_fqn: Arc<str>,
    pub op: Arc<str>,
    pub action: Arc<str>,
    pub caller: Caller,
    pub audit_id: String,
    /// The step's `aileron.connector.call` span: the parent of the programs it spawns.
    pub span: opentelemetry::Context,
    /// The bindings this step's requests used, for the step's audit record.
    pub used_bindings: Mutex<Vec<BindingInfo>>,
    /// The run's time waiting on what is not the daemon's: upstreams and spawned programs.
    pub waited: Arc<UpstreamWait>,
    /// The run's `policy.admitted` record, when the rules count runs: durable before anything
    /// of this step leaves.
    pub admission: Option<Admission>,
}

/// A run's `policy.admitted` record on its way to disk (SPEC §16). The run is counted (in
/// memory, under the counters' lock) when it is admitted; the record must be durable before the
/// run's first effect — an outbound request, a spawned program — so that a run killed after
/// acting still counts after a restart. Waiting there rather than before the run lets the write
/// overlap the guest's start; a run that never acts is covered by its own record, written after.
#[derive(Clone)]
pub struct Admission(futures_util::future::Shared<futures_util::future::BoxFuture<'static, Result<(), String>>>);

impl Admission {
    /// `appended`: the append of the record, handed to the writer already.
    pub fn new(appended: impl std::future::Future<Output = Result<(), String>> + Send + 'static) -> Admission {
        use futures_util::FutureExt;
        Admission(appended.boxed().shared())
    }

    /// Waits until the run's record is durable (at once for a run without one: the rules count
    /// nothing); `Err` with the audit log's reason when it will not be (the run must not act).
    pub async fn recorded(admission: Option<&Admission>) -> Result<(), String> {
        match admission {
            Some(admission) => admission.0.clone().await,
            None => Ok(()),
        }
    }

    /// [`Admission::recorded`], as the failure a host call answers with.
    async fn before_effect(admission: Option<&Admission>) -> Result<(), Failure> {
        Admission::recorded(admission).await.map_err(|error| {
            Failure::runtime_error(
                Boundary::Runtime,
                format!("the run's admission could not be recorded, so nothing of it may leave: {error}"),
            )
        })
    }
}

/// How long a run waited on its upstreams — HTTP requests from sent to the last body byte,
/// spawned programs from start to exit, retry back-offs — in nanoseconds: what
/// `x-aileron-overhead-us` leaves out of the daemon's own time.
#[derive(Debug, Default)]
pub struct UpstreamWait(std::sync::atomic::AtomicU64);

impl UpstreamWait {
    /// `work`, its time counted as waiting.
    pub async fn during<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let done = work.await;
        self.add(started.elapsed());
        done
    }

    pub fn add(&self, waited: Duration) {
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl HostHooks for StepEgress {
    fn send_request(
        &self,
        request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>> {
        Box::pin(self.send(request))
    }

    fn spawn(
        &self,
        request: GuestSpawn,
        deadline: std::time::Instant,
    ) -> Pin<Box<dyn Future<Output = Result<SpawnOutput, Failure>> + Send + '_>> {
        Box::pin(self.spawn_program(request, deadline))
    }
}

impl StepEgress {
    async fn send(&self, request: GuestHttpRequest) -> Result<HostHttpResponse, Failure> {
        Admission::before_effect(self.admission.as_ref()).await?;
        let target = match policy::check_egress(&self.manifest, &self.subset, &request.url) {
            Ok(target) => target,
            Err(failure) => return Err(self.rejected(&request, None, None, failure).await),
        };
        // SPEC §4.4: only these methods leave (TRACE, CONNECT and inventions never do), checked
        // before any credential is looked up.
        let upper = request.method.to_ascii_uppercase();
        let method = match ALLOWED_METHODS.iter().find(|allowed| **allowed == upper) {
            Some(allowed) => reqwest::Method::from_bytes(allowed.as_bytes()).expect("a standard method"),
            None => {
                let failure = Failure::capability_denied(
                    Boundary::Sandbox,
                    format!(
                        "HTTP method `{}` is not allowed; use one of {}",
                        request.method.chars().take(32).collect::<String>(),
                        ALLOWED_METHODS.join(", ")
                    ),
                )
                .with_detail("requested", format!("method:{}", upper.chars().take(32).collect::<String>()));
                return Err(self.rejected(&request, Some(&target), None, failure).await);
            }
        };
        let mut resolved: Option<ResolvedCredential> = None;
        if let Some(requested) = &request.credential {
            let kind = match policy::check_credential(&self.manifest, &self.subset, requested) {
                Ok(kind) => kind,
                Err(failure) => return Err(self.rejected(&request, Some(&target), None, failure).await),
            };
            if let Err(failure) = check_injection_transport(&target) {
                return Err(self.rejected(&request, Some(&target), None, failure).await);
            }
            let credential =
                self.services.credentials.resolve(&self.connector_fqn, kind, self.services.oauth.as_ref()).await;
            self.audit_binding_events().await?;
            match credential {
                Ok(credential) => resolved = Some(credential),
                Err(failure) => return Err(self.rejected(&request, Some(&target), None, failure).await),
            }
        }
        let binding = resolved.as_ref().map(|r| &r.binding);
        let injected = match resolved.as_ref().map(|r| injection(&self.manifest, r, &method, &target, &request)) {
            Some(Ok(headers)) => headers,
            Some(Err(failure)) => return Err(self.rejected(&request, Some(&target), binding, failure).await),
            None => Vec::new(),
        };
        let mut builder = self.services.client.request(method, &target.url).timeout(UPSTREAM_TIMEOUT);
        for (name, value) in &request.headers {
            if is_hop_by_hop_or_managed(name)
                || injected.iter().any(|(injected, _)| name.eq_ignore_ascii_case(injected))
                || (resolved.is_some() && name.eq_ignore_ascii_case(ACCEPT_ENCODING))
            {
                continue;
            }
            builder = builder.header(name.as_str(), value.as_str());
        }
        if resolved.is_some() {
            // A compressed echo of the credential would pass the redaction below unseen: a
            // credentialed request asks for the body as it is.
            builder = builder.header(ACCEPT_ENCODING, "identity");
        }
        for (name, value) in &injected {
            let mut value = reqwest::header::HeaderValue::from_str(value.expose()).map_err(|_| {
                Failure::new(
                    FailureClass::BindingFailed,
                    Boundary::Runtime,
                    "the bound credential is not a valid header value",
                )
            })?;
            value.set_sensitive(true);
            builder = builder.header(name.as_str(), value);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let started = std::time::Instant::now();
        let fetched = self.waited.during(fetch(builder, &target)).await;
        let (status, headers, body) = match fetched {
            Ok(fetched) => fetched,
            Err(failure) => return Err(self.rejected(&request, Some(&target), binding, failure).await),
        };
        let proxied = ProxiedRequest {
            status: Some(u64::from(status)),
            duration_us: Some(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)),
            ..self.proxied_request(&request, Some(&target))
        };
        self.audit(EventType::ConnectorProxyProxied, self.proxy_payload(proxied, binding)).await?;
        let (mut headers, mut body) = (headers, body);
        if let Some(resolved) = &resolved {
            if let Some(encoding) = encoded(&headers) {
                return Err(Failure::network(format!(
                    "{} answered a credentialed request with an encoded body (content-encoding: {encoding}) \
                     although it was asked for none; it is not handed to the connector, since an echo of \
                     the credential inside it could not be redacted",
                    target.host_port
                )));
            }
            // An upstream that echoes the credential back must not hand it to the guest.
            redact(&mut headers, &mut body, &Echoes::of(&resolved.echo_candidates()));
            self.record_binding_use(&resolved.binding);
        }
        Ok(HostHttpResponse { status, headers, body })
    }

    /// Remembers that this step used `binding` (once), for the step's audit record.
    pub(crate) fn record_binding_use(&self, binding: &BindingInfo) {
        let mut used = self.used_bindings.lock().expect("used bindings poisoned");
        if !used.iter().any(|b| b.name == binding.name) {
            used.push(binding.clone());
        }
    }

    /// Audits a rejection and returns the failure to hand back to the sandbox.
    async fn rejected(
        &self,
        request: &GuestHttpRequest,
        target: Option<&EgressTarget>,
        binding: Option<&BindingInfo>,
        failure: Failure,
    ) -> Failure {
        let refused = ProxiedRequest {
            reject_reason: Some(failure.class.as_str().to_string()),
            ..self.proxied_request(request, target)
        };
        let mut payload = self.proxy_payload(refused, binding);
        payload.extend(failure.audit_payload());
        match self.audit(EventType::ConnectorProxyRejected, payload).await {
            Ok(()) => failure,
            Err(audit_failure) => audit_failure,
        }
    }

    /// What a connector's request record says of the request itself.
    fn proxied_request(&self, request: &GuestHttpRequest, target: Option<&EgressTarget>) -> ProxiedRequest {
        ProxiedRequest {
            source: "daemon_request_boundary",
            method: Some(request.method.to_ascii_uppercase()),
            scheme: target.map(|target| target.scheme.clone()),
            host: target.map(|target| target.host_port.clone()),
            path: target.map(|target| target.path.clone()),
            credential: request.credential.clone(),
            ..ProxiedRequest::default()
        }
    }

    /// A `connector.proxy.*` record: the request, the step it belongs to, the binding it used.
    fn proxy_payload(&self, request: ProxiedRequest, binding: Option<&BindingInfo>) -> Map<String, Value> {
        let mut payload = request.into_payload();
        payload.extend(self.step_payload());
        if let Some(binding) = binding {
            payload.extend(binding.audit_payload());
        }
        payload
    }

    /// The keys every data-plane record of this step carries: the connector and op, the action,
    /// the run (under the key the run's own spans use) and the session.
    pub(crate) fn step_payload(&self) -> Map<String, Value> {
        StepOrigin {
            fqn: self.connector_fqn.to_string(),
            op: self.op.to_string(),
            action: self.action.to_string(),
            audit_id: self.audit_id.clone(),
            session_id: self.caller.session_id.clone(),
        }
        .into_payload()
    }

    /// Audits what happened to bindings while resolving (token refreshed, binding gone stale).
    pub(crate) async fn audit_binding_events(&self) -> Result<(), Failure> {
        for event in self.services.credentials.take_events() {
            let (event_type, binding, reason) = match &event {
                BindingEvent::Refreshed(binding) => (EventType::BindingRefreshed, binding, None),
                BindingEvent::Stale(binding) => (EventType::BindingStale, binding, binding.stale_reason.clone()),
            };
            let mut payload = binding.audit_payload();
            if let Some(reason) = reason {
                payload.insert(keys::BINDING_STALE_REASON.into(), reason.into());
            }
            let audit = AuditEvent {
                event_type,
                actor: aileron_core::audit::Actor {
                    r#type: aileron_core::audit::ActorType::ConnectorRuntime,
                    id: "binding-refresh".into(),
                },
                session_id: self.caller.session_id.clone(),
                payload,
                audit_id: None,
            };
            self.services.audit.append(audit).await.map_err(|error| {
                Failure::runtime_error(Boundary::Runtime, format!("audit log unavailable: {error}"))
            })?;
        }
        Ok(())
    }

    pub(crate) async fn audit(&self, event_type: EventType, payload: Map<String, Value>) -> Result<(), Failure> {
        let event = AuditEvent {
            event_type,
            actor: self.caller.actor.clone(),
            session_id: self.caller.session_id.clone(),
            payload,
            audit_id: None,
        };
        self.services.audit.append(event).await.map(|_| ()).map_err(|error| {
            // Fail closed: an egress we cannot record does not happen (or its result is withheld).
            Failure::runtime_error(Boundary::Runtime, format!("audit log unavailable: {error}"))
        })
    }
}

/// The one header a token credential goes in: the manifest's api_key header and format, or an
/// OAuth2 bearer token. `None` for a credential that signs the request instead (aws_sigv4).
pub(crate) fn token_header(
    manifest: &ConnectorManifest,
    resolved: &ResolvedCredential,
) -> Option<Result<(String, Secret), Failure>> {
    let unusable = || {
        Failure::new(FailureClass::BindingFailed, Boundary::Runtime, "the bound credential is not a valid header value")
            .with_detail("hint", format!("bind a valid credential: aileron binding rebind {}", resolved.binding.name))
    };
    match (manifest.credential.as_ref().map(|c| &c.method), &resolved.injection) {
        (Some(CredentialMethod::ApiKey(header)), Injection::Token(secret)) => Some(
            header
                .header_value(secret.expose())
                .map(|value| (header.header.clone(), Secret::new(value)))
                .ok_or_else(unusable),
        ),
        (Some(CredentialMethod::OAuth2(_)), Injection::Token(secret)) => {
            Some(if secret.expose().chars().any(|c| c.is_control()) {
                Err(unusable())
            } else {
                Ok(("Authorization".to_string(), Secret::new(format!("Bearer {}", secret.expose()))))
            })
        }
        _ => None,
    }
}

/// The headers to add for a resolved credential (SPEC §4.4): the manifest's api_key header, an
/// OAuth2 bearer token, or an AWS SigV4 signature computed over exactly what will be sent.
fn injection(
    manifest: &ConnectorManifest,
    resolved: &ResolvedCredential,
    method: &reqwest::Method,
    target: &EgressTarget,
    request: &GuestHttpRequest,
) -> Result<Vec<(String, Secret)>, Failure> {
    if let Some(header) = token_header(manifest, resolved) {
        return header.map(|header| vec![header]);
    }
    let method_of_manifest = manifest.credential.as_ref().map(|c| &c.method);
    match (method_of_manifest, &resolved.injection) {
        (Some(CredentialMethod::AwsSigv4(signing)), Injection::Aws(credentials)) => {
            let url = url::Url::parse(&target.url).map_err(|e| {
                Failure::runtime_error(Boundary::Runtime, format!("signing: the URL does not parse: {e}"))
            })?;
            let (region, service) = match &signing.region {
                Some(region) => (region.clone(), signing.service.clone()),
                None => {
                    aileron_core::sigv4::region_and_service(&target.host, Some(&signing.service)).ok_or_else(|| {
                        Failure::new(
                            FailureClass::BindingFailed,
                            Boundary::Runtime,
                            format!(
                                "cannot derive the AWS region from host {}; the manifest should declare it",
                                target.host
                            ),
                        )
                    })?
                }
            };
            let headers: Vec<(String, String)> = request
                .headers
                .iter()
                .filter(|(name, _)| {
                    !is_hop_by_hop_or_managed(name)
                        && !is_signing_header(name)
                        && !name.eq_ignore_ascii_case(ACCEPT_ENCODING)
                })
                .cloned()
                .collect();
            let amz_date = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
            let params = aileron_core::sigv4::SigningParams { region: &region, service: &service, amz_date: &amz_date };
            let body = request.body.as_deref().unwrap_or_default();
            let signed = aileron_core::sigv4::sign(method.as_str(), &url, &headers, body, credentials, &params)
                .map_err(|error| {
                    use aileron_core::sigv4::SigningError;
                    match error {
                        // The connector's own request is malformed: its bug, not the binding's.
                        SigningError::BadHeaderName(_) | SigningError::BadHeaderValue(_) | SigningError::NoHost => {
                            Failure::runtime_error(
                                Boundary::Sandbox,
                                format!("the connector's request cannot be signed: {error}"),
                            )
                        }
                        _ => Failure::new(
                            FailureClass::BindingFailed,
                            Boundary::Runtime,
                            format!("signing the request: {error}"),
                        ),
                    }
                })?;
            Ok(signed.into_iter().map(|(name, value)| (name, Secret::new(value))).collect())
        }
        (None, _) => {
            Err(Failure::capability_denied(Boundary::Sandbox, "the connector's manifest declares no credential"))
        }
        _ => Err(Failure::new(
            FailureClass::BindingFailed,
            Boundary::Runtime,
            format!("binding `{}` is of another kind than the connector's manifest declares", resolved.binding.name),
        )
        .with_detail(
            "hint",
            format!("remove it with `aileron binding revoke {}` and bind again", resolved.binding.name),
        )),
    }
}

/// Headers the signer computes; a guest's own values for them are dropped.
fn is_signing_header(name: &str) -> bool {
    ["authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// Sends `builder`'s request to `target` and reads the whole answer: its status, headers and
/// body (at most [`MAX_RESPONSE_BODY_BYTES`]), or why not.
async fn fetch(
    builder: reqwest::RequestBuilder,
    target: &EgressTarget,
) -> Result<(u16, Vec<(String, String)>, Vec<u8>), Failure> {
    let response = match builder.send().await {
        Ok(response) => response,
        Err(error) => {
            let detail = describe(&error);
            return Err(if detail.contains(NON_PUBLIC_REFUSAL) {
                Failure::capability_denied(
                    Boundary::Sandbox,
                    format!(
                        "{} {NON_PUBLIC_REFUSAL}; a local address must be named literally in the manifest",
                        target.host
                    ),
                )
                .with_detail("requested", format!("network:{}", target.host_port))
            } else {
                Failure::network(format!("request to {} failed: {detail}", target.host_port))
            });
        }
    };
    let status = response.status().as_u16();
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_string(), v.to_string())))
        .collect();
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            Failure::network(format!("reading the response from {}: {}", target.host_port, describe(&error)))
        })?;
        if body.len() + chunk.len() > MAX_RESPONSE_BODY_BYTES {
            return Err(Failure::resource_limit(
                "response_body",
                format!("response body from {} exceeds {} bytes", target.host_port, MAX_RESPONSE_BODY_BYTES),
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, headers, body))
}

/// Credentials travel only over TLS, or in the clear to a loopback address the manifest names
/// literally (a local fake). The egress check already matched `host:port` against the manifest.
fn check_injection_transport(target: &EgressTarget) -> Result<(), Failure> {
    if target.scheme == "https" {
        return Ok(());
    }
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        return Ok(());
    }
    Err(Failure::capability_denied(
        Boundary::Sandbox,
        format!("a credential is injected only over https; refusing plain http to {}", target.host_port),
    )
    .with_detail("requested", format!("http://{}", target.host_port)))
}

/// Replaces every form of an echoed credential in the response headers and body with
/// [`REDACTED`](crate::dataplane::redaction::REDACTED), whatever its length. Binding refuses material
/// shorter than [`crate::stores::bindings::MIN_SECRET_BYTES`], so a short secret here comes from a
/// vault an older version wrote (or an OAuth refresh): it is redacted anyway, even where it is
/// ordinary text — a mangled answer is the lesser harm than a credential in the guest's hands.
fn redact(headers: &mut [(String, String)], body: &mut Vec<u8>, echoes: &Echoes) {
    for (_, value) in headers.iter_mut() {
        if echoes.found_in(value.as_bytes()) {
            *value = String::from_utf8_lossy(&echoes.redact_whole(value.as_bytes())).into_owned();
        }
    }
    if echoes.found_in(body) {
        *body = echoes.redact_whole(body);
    }
}

/// The request header that asks for a compressed answer.
const ACCEPT_ENCODING: &str = "accept-encoding";

/// The `Content-Encoding` of a response, unless it is absent or `identity`.
fn encoded(headers: &[(String, String)]) -> Option<&str> {
    headers
        .iter()
        .find(|(name, value)| {
            name.eq_ignore_ascii_case("content-encoding") && !value.trim().eq_ignore_ascii_case("identity")
        })
        .map(|(_, value)| value.as_str())
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and headers the client computes itself.
fn is_hop_by_hop_or_managed(name: &str) -> bool {
    crate::dataplane::headers::is_hop_by_hop(name) || name.eq_ignore_ascii_case("content-length")
}

/// A reqwest error without the URL (which could carry a query string).
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_body() || error.is_decode() {
        "body error"
    } else {
        "request error"
    };
    let mut source = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(cause) = source {
        detail = cause.to_string();
        source = cause.source();
    }
    if detail.is_empty() { kind.to_string() } else { format!("{kind}: {detail}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate every effect of a counted run passes: it waits for the admission record, and an
    /// admission that will never be durable refuses the effect (every waiter sees the same answer).
    #[tokio::test]
    async fn an_effect_waits_for_the_admission_record_and_never_follows_a_failed_one() {
        assert!(Admission::before_effect(None).await.is_ok(), "rules that count nothing: no wait");

        let (durable, appended) = tokio::sync::oneshot::channel::<Result<(), String>>();
        let admission = Admission::new(async move { appended.await.unwrap_or(Err("writer gone".into())) });
        let waiting = tokio::spawn({
            let admission = admission.clone();
            async move { Admission::before_effect(Some(&admission)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "the effect waits while the record is on its way");
        durable.send(Ok(())).unwrap();
        assert!(waiting.await.unwrap().is_ok());
        assert!(Admission::before_effect(Some(&admission)).await.is_ok(), "a later effect passes at once");

        let failed = Admission::new(async { Err("audit log unavailable: disk full".to_string()) });
        for _ in 0..2 {
            let refused = Admission::before_effect(Some(&failed)).await.expect_err("no effect after a failed record");
            assert!(
                refused.message.contains("nothing of it may leave: audit log unavailable: disk full"),
                "{refused:?}"
            );
        }
    }
}
