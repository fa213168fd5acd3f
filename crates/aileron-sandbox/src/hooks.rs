//! What the sandbox and its embedder exchange (SPEC §4.2): the import module's name, what a guest
//! asks for (a request, a program) and what the host answers, and [`HostHooks`], the embedder's
//! side. A leaf: the host functions (`host.rs`, `spawn.rs`) and the per-call store (`context.rs`)
//! all speak these types, none of them each other's.

use std::future::Future;
use std::pin::Pin;

use aileron_core::policy::SpawnEnvelope;
use aileron_core::{Boundary, Failure};
use serde::{Deserialize, Serialize};

/// The import module name of the host ABI.
pub(crate) const MODULE: &str = "aileron_host";

/// One structured log line a guest emitted through `aileron_host.log`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestLog {
    pub level: String,
    pub message: String,
}

/// An outbound request as the guest asked for it, before any policy check. `credential` names a
/// credential kind (e.g. `api_key`) for the host to inject; the guest never holds the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestHttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub credential: Option<String>,
}

/// The response the host buffers for the guest to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostHttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What the embedder provides to a call.
pub trait HostHooks: Send + Sync + 'static {
    /// The embedder's egress function: policy check, credential injection, the real request, audit.
    /// `Err` = denied or failed; the sandbox records it and that failure wins over whatever the
    /// module prints.
    fn send_request(
        &self,
        request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>>;

    /// The embedder's spawn function (SPEC §5): the gate, the confined run, credentials, audit.
    /// `deadline` is the call's: a program still running then is killed. `Err` = denied or
    /// failed, recorded like a refused request. Embedders that do not serve
    /// spawn keep this default, which denies.
    fn spawn(
        &self,
        request: GuestSpawn,
        deadline: std::time::Instant,
    ) -> Pin<Box<dyn Future<Output = Result<SpawnOutput, Failure>> + Send + '_>> {
        let _ = deadline;
        let requested = match &request {
            GuestSpawn::Envelope(envelope) => format!("spawn:{}", envelope.program),
            GuestSpawn::Operation { op, .. } => format!("spawn:{op}"),
        };
        Box::pin(async move {
            Err(Failure::capability_denied(Boundary::Sandbox, "this host does not run programs for connectors")
                .with_detail("requested", requested))
        })
    }
}

/// What a guest asked to run, parsed but not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestSpawn {
    /// `spawn`: a full envelope; the gate matches its argv against the declared templates.
    Envelope(SpawnEnvelope),
    /// `spawn_op`: a declared operation and its placeholder values (a JSON object).
    Operation { op: String, args: serde_json::Value },
}

/// A finished program: exit code (128 + signal when killed) and its captured, capped output.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnOutput {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}
