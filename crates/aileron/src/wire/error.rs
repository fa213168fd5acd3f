//! HTTP error bodies. CRUD errors are `{"error":{"code","message","hint"?}}`; action failures are
//! the §9 failure envelope. The client-safe message is what goes on the wire; an internal cause is
//! only logged.

use aileron_core::Failure;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    /// Whether the same request may succeed if tried again (a forge that failed to answer), where
    /// the caller would otherwise have to guess from the status.
    pub retriable: Option<bool>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), hint: None, retriable: None }
    }

    pub fn with_retriable(mut self, retriable: bool) -> ApiError {
        self.retriable = Some(retriable);
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hint = Some(hint.into());
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or invalid bearer token")
            .with_hint("clients read the token from daemon.json (or AILERON_TOKEN)")
    }

    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// An internal failure: the cause is logged, the caller sees a generic message.
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        log_line!("aileron daemon: internal error: {cause}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error; see daemon.log")
    }

    /// Risky work fails closed when the audit log cannot be written.
    pub fn audit_unavailable(cause: impl std::fmt::Display) -> ApiError {
        log_line!("aileron daemon: audit log write failed: {cause}");
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "audit_unavailable", "the audit log cannot be written")
            .with_hint("check free disk space and permissions of the audit directory; nothing was executed")
    }

    /// The work was done and then its record could not be written: same code (the log is
    /// unavailable), but the caller must not read it as "nothing happened" and retry.
    pub fn ran_unaudited(cause: impl std::fmt::Display) -> ApiError {
        log_line!("aileron daemon: audit log write failed after the action ran: {cause}");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "audit_unavailable",
            "the action ran, but its audit record could not be written",
        )
        .with_hint("check free disk space and permissions of the audit directory; the action's effects happened: check them before running it again")
    }
}

impl ApiError {
    /// `{"error": {"code", "message", "hint"?, "retriable"?}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(hint) = &self.hint {
            error["hint"] = hint.clone().into();
        }
        if let Some(retriable) = self.retriable {
            error["retriable"] = retriable.into();
        }
        json!({ "error": error })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// A failure envelope response with the class's HTTP status.
pub fn failure_response(failure: &Failure) -> Response {
    let status = StatusCode::from_u16(failure.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(failure.envelope())).into_response()
}
