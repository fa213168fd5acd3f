//! The closed failure taxonomy (SPEC §9): every failure an action run can report, the boundary
//! that detected it, whether the agent should retry, and the HTTP status it maps to.
//!
//! Invariant: nothing outside this enum is ever reported as a failure class. Guest connectors
//! that print other classes are mapped to `connector_runtime_error` by the sandbox, keeping the
//! original in `details.connector_class`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::vocabulary::keys;

/// The closed set of failure classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    CapabilityDenied,
    BindingRequired,
    BindingFailed,
    ResourceLimitExceeded,
    ConnectorRuntimeError,
    NetworkError,
    ExternalApiError,
    HashMismatch,
    SignatureFailure,
    /// The spawn primitive cannot confine a program on this machine (no user namespaces, no
    /// Landlock): the program is never run unconfined.
    SpawnSandboxUnavailable,
    /// A policy rule refused the call (SPEC §16); retriable when a rate limit will let it through.
    PolicyDenied,
}

impl FailureClass {
    pub const ALL: [FailureClass; 11] = [
        FailureClass::CapabilityDenied,
        FailureClass::BindingRequired,
        FailureClass::BindingFailed,
        FailureClass::ResourceLimitExceeded,
        FailureClass::ConnectorRuntimeError,
        FailureClass::NetworkError,
        FailureClass::ExternalApiError,
        FailureClass::HashMismatch,
        FailureClass::SignatureFailure,
        FailureClass::SpawnSandboxUnavailable,
        FailureClass::PolicyDenied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::CapabilityDenied => "capability_denied",
            FailureClass::BindingRequired => "binding_required",
            FailureClass::BindingFailed => "binding_failed",
            FailureClass::ResourceLimitExceeded => "resource_limit_exceeded",
            FailureClass::ConnectorRuntimeError => "connector_runtime_error",
            FailureClass::NetworkError => "network_error",
            FailureClass::ExternalApiError => "external_api_error",
            FailureClass::HashMismatch => "hash_mismatch",
            FailureClass::SignatureFailure => "signature_failure",
            FailureClass::SpawnSandboxUnavailable => "spawn_sandbox_unavailable",
            FailureClass::PolicyDenied => "policy_denied",
        }
    }

    pub fn parse(s: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// HTTP status of the failure envelope for this class (SPEC §9 table).
    pub fn http_status(self) -> u16 {
        match self {
            FailureClass::CapabilityDenied | FailureClass::PolicyDenied => 403,
            FailureClass::BindingRequired | FailureClass::BindingFailed => 412,
            FailureClass::ResourceLimitExceeded => 507,
            FailureClass::ConnectorRuntimeError => 500,
            FailureClass::NetworkError | FailureClass::ExternalApiError => 502,
            FailureClass::HashMismatch | FailureClass::SignatureFailure => 422,
            FailureClass::SpawnSandboxUnavailable => 503,
        }
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a failure was detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// The WASM sandbox / host-function boundary (connector manifest enforcement, limits).
    Sandbox,
    /// The connector manifest itself (e.g. an import the manifest does not declare).
    ConnectorManifest,
    /// The action's declared capability subset.
    Action,
    /// The daemon's own runtime (store, vault, bindings).
    Runtime,
    /// An external system the connector talked to.
    External,
    /// The user's policy rules (SPEC §16).
    Policy,
}

impl Boundary {
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::Sandbox => "sandbox",
            Boundary::ConnectorManifest => "connector_manifest",
            Boundary::Action => "action",
            Boundary::Runtime => "runtime",
            Boundary::External => "external",
            Boundary::Policy => "policy",
        }
    }
}

/// One failure, as reported to the caller in the envelope
/// `{"error": {"class", "message", "retriable", "boundary", "audit_id"?, "details"?}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Failure {
    pub class: FailureClass,
    pub message: String,
    pub retriable: bool,
    pub boundary: Boundary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub details: Map<String, Value>,
}

impl Failure {
    /// A failure with the class's default retriability (false except `network_error`).
    pub fn new(class: FailureClass, boundary: Boundary, message: impl Into<String>) -> Failure {
        Failure {
            class,
            message: message.into(),
            retriable: class == FailureClass::NetworkError,
            boundary,
            audit_id: None,
            details: Map::new(),
        }
    }

    pub fn capability_denied(boundary: Boundary, message: impl Into<String>) -> Failure {
        Failure::new(FailureClass::CapabilityDenied, boundary, message)
    }

    pub fn resource_limit(limit: &str, message: impl Into<String>) -> Failure {
        Failure::new(FailureClass::ResourceLimitExceeded, Boundary::Sandbox, message).with_detail("limit", limit)
    }

    pub fn runtime_error(boundary: Boundary, message: impl Into<String>) -> Failure {
        Failure::new(FailureClass::ConnectorRuntimeError, boundary, message)
    }

    pub fn network(message: impl Into<String>) -> Failure {
        Failure::new(FailureClass::NetworkError, Boundary::External, message)
    }

    /// `external_api_error`: retriable iff the upstream answered 429 or 5xx.
    pub fn external_api(status: u16, message: impl Into<String>) -> Failure {
        let mut failure =
            Failure::new(FailureClass::ExternalApiError, Boundary::External, message).with_detail("status", status);
        failure.retriable = status == 429 || (500..600).contains(&status);
        failure
    }

    pub fn hash_mismatch(message: impl Into<String>) -> Failure {
        Failure::new(FailureClass::HashMismatch, Boundary::Runtime, message)
    }

    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Failure {
        self.details.insert(key.to_string(), value.into());
        self
    }

    pub fn with_audit_id(mut self, audit_id: impl Into<String>) -> Failure {
        self.audit_id = Some(audit_id.into());
        self
    }

    pub fn http_status(&self) -> u16 {
        self.class.http_status()
    }

    /// The wire envelope `{"error": {...}}`.
    pub fn envelope(&self) -> Value {
        serde_json::json!({ "error": self })
    }

    /// Parses a wire envelope back (used by clients such as the CLI and `aileron-mcp`).
    pub fn from_envelope(value: &Value) -> Option<Failure> {
        serde_json::from_value(value.get("error")?.clone()).ok()
    }

    /// The OTel-style keys shared by the audit record and the failure span.
    pub fn audit_payload(&self) -> Map<String, Value> {
        let mut payload = Map::new();
        payload.insert(keys::FAILURE_CLASS.into(), self.class.as_str().into());
        payload.insert(keys::FAILURE_BOUNDARY.into(), self.boundary.as_str().into());
        payload.insert(keys::FAILURE_RETRIABLE.into(), self.retriable.into());
        payload.insert(keys::FAILURE_MESSAGE.into(), self.message.clone().into());
        if !self.details.is_empty() {
            payload.insert(keys::FAILURE_DETAILS.into(), Value::Object(self.details.clone()));
        }
        payload
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.class, self.boundary.as_str(), self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_round_trip_and_map_to_the_spec_statuses() {
        let expected = [
            ("capability_denied", 403),
            ("binding_required", 412),
            ("binding_failed", 412),
            ("resource_limit_exceeded", 507),
            ("connector_runtime_error", 500),
            ("network_error", 502),
            ("external_api_error", 502),
            ("hash_mismatch", 422),
            ("signature_failure", 422),
        ];
        for (name, status) in expected {
            let class = FailureClass::parse(name).unwrap();
            assert_eq!(class.as_str(), name);
            assert_eq!(class.http_status(), status, "{name}");
            assert_eq!(serde_json::to_value(class).unwrap(), Value::from(name));
        }
        assert_eq!(FailureClass::parse("unknown_op"), None);
    }

    #[test]
    fn external_api_errors_are_retriable_only_for_429_and_5xx() {
        for (status, retriable) in [(400, false), (404, false), (429, true), (500, true), (503, true), (599, true)] {
            assert_eq!(Failure::external_api(status, "x").retriable, retriable, "{status}");
        }
        assert!(Failure::network("x").retriable);
        assert!(!Failure::hash_mismatch("x").retriable);
    }

    #[test]
    fn envelope_round_trips_with_audit_id_and_details() {
        let failure = Failure::capability_denied(Boundary::Sandbox, "denied")
            .with_detail("requested", "network:evil.example:443")
            .with_audit_id("audit-1");
        let envelope = failure.envelope();
        assert_eq!(envelope["error"]["class"], "capability_denied");
        assert_eq!(envelope["error"]["boundary"], "sandbox");
        assert_eq!(envelope["error"]["retriable"], false);
        assert_eq!(envelope["error"]["audit_id"], "audit-1");
        assert_eq!(Failure::from_envelope(&envelope).unwrap(), failure);
    }
}
