//! The Aileron connector SDK: write a connector as one function.
//!
//! A connector is a `wasm32-wasip1` command module. Per call the host starts a fresh instance,
//! writes `{"op": <string>, "args": <object>}` to its stdin and reads ONE JSON object from its
//! stdout: `{"output": <any>}` or `{"error": {"class", "message", "details"?}}` (SPEC §4.1).
//! [`run`] does that plumbing; the connector supplies the handler:
//!
//! ```no_run
//! use aileron_connector_sdk::{ConnectorError, run};
//! use serde_json::json;
//!
//! fn main() {
//!     run(|op, args| match op {
//!         "ping" => Ok(json!({"pong": args})),
//!         other => Err(ConnectorError::unknown_op(other)),
//!     });
//! }
//! ```
//!
//! Outbound HTTP goes through [`http::send`], which calls the host's `aileron_host.http_request`:
//! the host checks the URL against the manifest's allow-list and injects credentials, so the
//! guest never holds a key. [`log`] attaches a structured line to the call.
//!
//! On non-wasm targets the host ABI is served by [`fake_host`], an in-process test double with
//! the same contract, so connector logic can be unit-tested with a plain `cargo test`.

mod abi;
mod envelope;
mod error;
pub mod http;
pub mod spawn;

#[cfg(not(target_arch = "wasm32"))]
pub use abi::fake_host;
pub use envelope::{dispatch, run};
pub use error::ConnectorError;
pub use serde_json;

/// Severity of a [`log`] line. The host records the lowercase name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// Attaches a structured log line to the current call (`aileron_host.log`).
///
/// Lines are visible to the user in the daemon's logs, so never log request bodies that may
/// carry personal data; the guest never sees credentials, so it cannot leak them here.
pub fn log(level: Level, message: &str) {
    abi::log(level.as_str(), message);
}
