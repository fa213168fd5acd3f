//! The error a connector reports: `{"error": {"class", "message", "details"?}}` on stdout.
//!
//! The host owns the failure taxonomy (SPEC §9). A guest class inside it (`external_api_error`,
//! `network_error`, ...) is kept; any other class (`bad_input`, `unknown_op`, ...) reaches the
//! caller as `connector_runtime_error` with `details.connector_class` keeping the original.

use std::fmt;

use serde_json::{Map, Value, json};

use crate::http::HostError;

/// A failed call, as the connector reports it to the host.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectorError {
    pub class: String,
    pub message: String,
    pub details: Option<Map<String, Value>>,
}

impl ConnectorError {
    pub fn new(class: impl Into<String>, message: impl Into<String>) -> ConnectorError {
        ConnectorError { class: class.into(), message: message.into(), details: None }
    }

    /// The call's arguments violate the op's contract (missing field, wrong type, bad value).
    pub fn bad_input(message: impl Into<String>) -> ConnectorError {
        ConnectorError::new("bad_input", message)
    }

    /// The connector has no op of this name.
    pub fn unknown_op(op: &str) -> ConnectorError {
        ConnectorError::new("unknown_op", format!("this connector has no op `{op}`")).with_detail("op", op)
    }

    /// The remote API answered with an error status. The host retries only 429 and 5xx, so
    /// `status` must be the upstream's real status.
    pub fn external_api(status: u16, message: impl Into<String>) -> ConnectorError {
        ConnectorError::new("external_api_error", message).with_detail("status", status)
    }

    /// The remote API could not be reached. The host treats this as retriable.
    pub fn network(message: impl Into<String>) -> ConnectorError {
        ConnectorError::new("network_error", message)
    }

    /// Something went wrong inside the connector itself.
    pub fn runtime(message: impl Into<String>) -> ConnectorError {
        ConnectorError::new("connector_runtime_error", message)
    }

    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> ConnectorError {
        self.details.get_or_insert_with(Map::new).insert(key.to_owned(), value.into());
        self
    }

    /// The stdout object: `{"error": {"class", "message", "details"?}}`.
    pub fn envelope(&self) -> Value {
        let mut error = Map::new();
        error.insert("class".to_owned(), Value::String(self.class.clone()));
        error.insert("message".to_owned(), Value::String(self.message.clone()));
        if let Some(details) = &self.details {
            error.insert("details".to_owned(), Value::Object(details.clone()));
        }
        json!({ "error": error })
    }
}

impl fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.class, self.message)
    }
}

impl std::error::Error for ConnectorError {}

/// A host refusal ends the op. For −1 the host has already recorded the structured failure
/// (for example `capability_denied`) and that record wins over whatever the guest prints, so
/// this error only has to be a faithful fallback.
impl From<HostError> for ConnectorError {
    fn from(error: HostError) -> ConnectorError {
        let error_code = error.code();
        let error = ConnectorError::runtime(error.to_string());
        match error_code {
            Some(code) => error.with_detail("host_code", code),
            None => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::ConnectorError;
    use crate::http::HostError;

    fn check(error: ConnectorError, expected: Value) {
        assert_eq!(error.envelope(), expected, "{error}");
    }

    #[test]
    fn constructors_produce_the_wire_shape() {
        check(
            ConnectorError::bad_input("owner is required"),
            json!({"error": {"class": "bad_input", "message": "owner is required"}}),
        );
        check(
            ConnectorError::unknown_op("nope"),
            json!({"error": {
                "class": "unknown_op", "message": "this connector has no op `nope`", "details": {"op": "nope"},
            }}),
        );
        check(
            ConnectorError::external_api(503, "down"),
            json!({"error": {"class": "external_api_error", "message": "down", "details": {"status": 503}}}),
        );
        check(ConnectorError::network("reset"), json!({"error": {"class": "network_error", "message": "reset"}}));
        check(
            ConnectorError::new("custom", "m").with_detail("a", 1).with_detail("b", "two"),
            json!({"error": {"class": "custom", "message": "m", "details": {"a": 1, "b": "two"}}}),
        );
    }

    #[test]
    fn host_errors_become_runtime_errors_with_the_code() {
        check(
            HostError::Denied.into(),
            json!({"error": {
                "class": "connector_runtime_error",
                "message": "the host denied or failed the request (its recorded failure is authoritative)",
                "details": {"host_code": -1},
            }}),
        );
        check(
            HostError::Malformed.into(),
            json!({"error": {
                "class": "connector_runtime_error",
                "message": "the host rejected the request envelope as malformed",
                "details": {"host_code": -2},
            }}),
        );
        check(
            HostError::NoResponse.into(),
            json!({"error": {
                "class": "connector_runtime_error",
                "message": "the host reported success but no response is readable",
            }}),
        );
    }
}
