//! The egress hook: the one function through which a connector's outbound HTTP leaves the daemon
//! (SPEC §4.4). Order: manifest allow-list (sandbox boundary) → action subset (action boundary) →
//! credential kind checks → binding lookup → host-side injection → the request (no redirects,
//! capped body) → audit `connector.proxy.proxied|rejected`.
//!
//! Invariant: credential bytes are only ever placed in the outbound request's header. They are
//! not returned to the guest, logged, audited or put in an error.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use aileron_core::manifest::{ConnectorManifest, CredentialKind, CredentialMethod};
use aileron_core::policy::{self, CapabilitySubset, EgressTarget};
use aileron_core::{Boundary, Failure, FailureClass};
use aileron_sandbox::{GuestHttpRequest, HostHooks, HostHttpResponse};
use futures_util::StreamExt;
use serde_json::{Map, Value};

use crate::audit_log::AuditEvent;
use crate::daemon::AppState;
use crate::runner::Caller;

/// Response bodies above this are refused (`resource_limit_exceeded`, limit `response_body`).
pub const MAX_RESPONSE_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Per-request upstream timeout; the step's wall-time limit bounds the whole call anyway.
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);

/// A credential value. Its `Debug`/`Display` never print the bytes.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

/// Where credentials come from. The encrypted vault with bindings implements this in a later
/// issue; until then the daemon uses [`NoVault`], which answers `binding_required`.
pub trait CredentialSource: Send + Sync + 'static {
    /// The secret bound for this connector and kind, or a `binding_required`/`binding_failed` failure.
    fn resolve(&self, connector_fqn: &str, kind: CredentialKind) -> Result<Secret, Failure>;
}

pub struct NoVault;

impl CredentialSource for NoVault {
    fn resolve(&self, connector_fqn: &str, kind: CredentialKind) -> Result<Secret, Failure> {
        Err(Failure::new(
            FailureClass::BindingRequired,
            Boundary::Runtime,
            format!("connector {connector_fqn} needs a credential of kind {} and none is bound", kind.as_str()),
        )
        .with_detail("credential_kind", kind.as_str())
        .with_detail(
            "hint",
            "credential bindings come with the vault (not in this build); use an action that does not need a credential",
        ))
    }
}

/// The egress hook for one step of one run.
pub struct StepEgress {
    pub state: Arc<AppState>,
    pub manifest: Arc<ConnectorManifest>,
    pub subset: CapabilitySubset,
    pub connector_fqn: String,
    pub op: String,
    pub action: String,
    pub caller: Caller,
    pub audit_id: String,
}

impl HostHooks for StepEgress {
    fn send_request(
        &self,
        request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>> {
        Box::pin(self.send(request))
    }
}

impl StepEgress {
    async fn send(&self, request: GuestHttpRequest) -> Result<HostHttpResponse, Failure> {
        let target = match policy::check_egress(&self.manifest, &self.subset, &request.url) {
            Ok(target) => target,
            Err(failure) => return Err(self.rejected(&request, None, failure).await),
        };
        let mut injected: Option<(String, String)> = None;
        let mut credential_kind = None;
        if let Some(requested) = &request.credential {
            let kind = match policy::check_credential(&self.manifest, &self.subset, requested) {
                Ok(kind) => kind,
                Err(failure) => return Err(self.rejected(&request, Some(&target), failure).await),
            };
            credential_kind = Some(kind);
            let secret = match self.state.credentials.resolve(&self.connector_fqn, kind) {
                Ok(secret) => secret,
                Err(failure) => return Err(self.rejected(&request, Some(&target), failure).await),
            };
            match injection(&self.manifest, &secret) {
                Ok(header) => injected = Some(header),
                Err(failure) => return Err(self.rejected(&request, Some(&target), failure).await),
            }
        }
        let method = match reqwest::Method::from_bytes(request.method.to_ascii_uppercase().as_bytes()) {
            Ok(method) => method,
            Err(_) => {
                let failure = Failure::runtime_error(Boundary::Sandbox, format!("invalid HTTP method `{}`", request.method));
                return Err(self.rejected(&request, Some(&target), failure).await);
            }
        };
        let mut builder = self.state.egress_client.request(method, &request.url).timeout(UPSTREAM_TIMEOUT);
        for (name, value) in &request.headers {
            if is_hop_by_hop_or_managed(name) {
                continue;
            }
            if let Some((injected_name, _)) = &injected
                && name.eq_ignore_ascii_case(injected_name)
            {
                continue;
            }
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some((name, value)) = &injected {
            let mut value = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
                Failure::new(FailureClass::BindingFailed, Boundary::Runtime, "the bound credential is not a valid header value")
            })?;
            value.set_sensitive(true);
            builder = builder.header(name.as_str(), value);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.clone());
        }
        let response = match builder.send().await {
            Ok(response) => response,
            Err(error) => {
                let failure = Failure::network(format!("request to {} failed: {}", target.host_port, describe(&error)));
                return Err(self.rejected(&request, Some(&target), failure).await);
            }
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .filter_map(|(n, v)| v.to_str().ok().map(|v| (n.as_str().to_string(), v.to_string())))
            .collect();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => {
                    let failure = Failure::network(format!("reading the response from {}: {}", target.host_port, describe(&error)));
                    return Err(self.rejected(&request, Some(&target), failure).await);
                }
            };
            if body.len() + chunk.len() > MAX_RESPONSE_BODY_BYTES {
                let failure = Failure::resource_limit(
                    "response_body",
                    format!("response body from {} exceeds {} bytes", target.host_port, MAX_RESPONSE_BODY_BYTES),
                );
                return Err(self.rejected(&request, Some(&target), failure).await);
            }
            body.extend_from_slice(&chunk);
        }
        let mut payload = self.proxy_payload(&request, Some(&target));
        payload.insert("aileron.proxy.upstream.status".into(), status.into());
        if let Some(kind) = credential_kind {
            payload.insert("aileron.connector.credential".into(), kind.as_str().into());
        }
        self.audit("connector.proxy.proxied", payload).await?;
        Ok(HostHttpResponse { status, headers, body })
    }

    /// Audits a rejection and returns the failure to hand back to the sandbox.
    async fn rejected(&self, request: &GuestHttpRequest, target: Option<&EgressTarget>, failure: Failure) -> Failure {
        let mut payload = self.proxy_payload(request, target);
        payload.insert("aileron.connector.reject_reason".into(), failure.class.as_str().into());
        payload.extend(failure.audit_payload());
        if let Some(kind) = &request.credential {
            payload.insert("aileron.connector.credential".into(), kind.clone().into());
        }
        match self.audit("connector.proxy.rejected", payload).await {
            Ok(()) => failure,
            Err(audit_failure) => audit_failure,
        }
    }

    fn proxy_payload(&self, request: &GuestHttpRequest, target: Option<&EgressTarget>) -> Map<String, Value> {
        let mut payload = Map::new();
        payload.insert("aileron.proxy.source".into(), "daemon_request_boundary".into());
        payload.insert("aileron.proxy.method".into(), request.method.to_ascii_uppercase().into());
        if let Some(target) = target {
            payload.insert("aileron.proxy.upstream.scheme".into(), target.scheme.clone().into());
            payload.insert("aileron.proxy.upstream.host".into(), target.host_port.clone().into());
            payload.insert("aileron.proxy.upstream.path".into(), target.path.clone().into());
        }
        payload.insert("aileron.connector.fqn".into(), self.connector_fqn.clone().into());
        payload.insert("aileron.connector.operation".into(), self.op.clone().into());
        payload.insert("aileron.action.name".into(), self.action.clone().into());
        payload.insert("aileron.audit.run_id".into(), self.audit_id.clone().into());
        if let Some(session) = &self.caller.session_id {
            payload.insert("aileron.session.id".into(), session.clone().into());
        }
        payload
    }

    async fn audit(&self, event_type: &str, payload: Map<String, Value>) -> Result<(), Failure> {
        let event = AuditEvent {
            event_type: event_type.to_string(),
            actor: self.caller.actor.clone(),
            session_id: self.caller.session_id.clone(),
            payload,
            audit_id: None,
        };
        self.state.audit.append(event).await.map(|_| ()).map_err(|error| {
            // Fail closed: an egress we cannot record does not happen (or its result is withheld).
            Failure::runtime_error(Boundary::Runtime, format!("audit log unavailable: {error}"))
        })
    }
}

/// The header to inject for a credential kind (SPEC §4.4).
fn injection(manifest: &ConnectorManifest, secret: &Secret) -> Result<(String, String), Failure> {
    let unusable = || {
        Failure::new(FailureClass::BindingFailed, Boundary::Runtime, "the bound credential is not a valid header value")
    };
    match manifest.credential.as_ref().map(|c| &c.method) {
        Some(CredentialMethod::ApiKey(header)) => {
            let value = header.header_value(secret.expose()).ok_or_else(unusable)?;
            Ok((header.header.clone(), value))
        }
        Some(CredentialMethod::OAuth2(_)) => {
            if secret.expose().chars().any(|c| c.is_control()) {
                return Err(unusable());
            }
            Ok(("Authorization".to_string(), format!("Bearer {}", secret.expose())))
        }
        Some(CredentialMethod::AwsSigv4(_)) => Err(Failure::new(
            FailureClass::BindingFailed,
            Boundary::Runtime,
            "aws_sigv4 request signing is not available in this build",
        )),
        None => Err(Failure::capability_denied(Boundary::Sandbox, "the connector's manifest declares no credential")),
    }
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) and headers the client computes itself.
fn is_hop_by_hop_or_managed(name: &str) -> bool {
    const SKIPPED: [&str; 10] = [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    ];
    SKIPPED.iter().any(|skipped| name.eq_ignore_ascii_case(skipped))
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
