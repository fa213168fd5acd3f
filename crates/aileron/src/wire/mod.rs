//! The HTTP API's wire contract (SPEC §10), shared by the daemon's handlers, the workflows below
//! them, [`crate::surfaces::client`], the CLI and the MCP catalog: the error shape and the request and
//! response bodies. Bodies that grew large move to one file per resource, named as its handler is.

mod connectors;
mod credentials;
pub mod error;

/// The largest request body an API route reads (axum's default, set explicitly by the router so
/// that `aileron-mcp` refuses a larger call itself: sent anyway, the daemon answers 413 and
/// closes while the body is still being written, and the caller sees a broken pipe).
pub const MAX_API_BODY_BYTES: usize = 2 * 1024 * 1024;

pub use connectors::{
    Collected, Compiled, ConnectorInstalled, ConnectorList, ConnectorPreview, ConnectorRelease, ConnectorRemoved,
    InstallDeclined, InstalledConnector, ReleaseCheck, ReleaseCheckItem, Signer,
};
pub use credentials::{
    AwsBody, CallbackQuery, KeyEntry, KeyTrusted, KeyringList, KeysRevoked, MaterialBody, OAuth2ImportBody,
    OAuthFinish, OAuthInit, OAuthStarted, PassphraseBody, RevokeBody, SecretEntry, SecretList, SecretStored, SetSecret,
    SetupBody, TrustBody, VaultView,
};
pub use error::{ApiError, failure_response};

/// The query of `GET /v1/audit`: the store's own filter, every parameter given must match
/// (`limit` defaults to 100 and is capped at 10,000 by the workflow).
pub type AuditQuery = crate::stores::audit_log::AuditFilter;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::path::PathBuf;
use std::sync::Arc;

use aileron_core::action::{ActionFile, Step, StepTexts};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::stores::sessions::Confinement;

/// A workflow's answer: the status and the JSON body the HTTP API sends, and the in-process
/// `/mcp` reads as the same pair.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
}

impl Reply {
    pub fn new(status: StatusCode, body: impl Serialize) -> Reply {
        Reply { status, body: serde_json::to_value(body).expect("wire types serialize") }
    }

    pub fn ok(body: impl Serialize) -> Reply {
        Reply::new(StatusCode::OK, body)
    }

    pub fn created(body: impl Serialize) -> Reply {
        Reply::new(StatusCode::CREATED, body)
    }

    pub fn no_content() -> Reply {
        Reply { status: StatusCode::NO_CONTENT, body: Value::Null }
    }

    /// A failure envelope (SPEC §9) with its class's status.
    pub fn failure(failure: &aileron_core::Failure) -> Reply {
        let status = StatusCode::from_u16(failure.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Reply { status, body: failure.envelope() }
    }
}

impl From<ApiError> for Reply {
    fn from(error: ApiError) -> Reply {
        Reply { status: error.status, body: error.body() }
    }
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        if self.status == StatusCode::NO_CONTENT {
            return self.status.into_response();
        }
        (self.status, axum::Json(self.body)).into_response()
    }
}

/// What a workflow answers: a reply, or a request error in the [`ApiError`] shape.
pub type Answer = Result<Reply, ApiError>;

/// On every answer of `POST /v1/actions/{name}/run`: the microseconds the daemon spent on the
/// run itself — from its handler's start to the answer, less the time the steps waited on their
/// upstream HTTP requests, spawned programs and retry back-offs.
pub const OVERHEAD_HEADER: &str = "x-aileron-overhead-us";

/// axum's JSON extractor, with its rejections (malformed JSON, an unknown field, a wrong
/// content type) in the [`ApiError`] shape, naming what was wrong.
///
/// A body sent as exactly `application/json` is parsed first without axum's path tracking, which
/// builds a string of every key it passes (every run's body went through it); only a body that
/// does not parse is parsed again by axum, whose rejection names the field that was wrong. What is
/// accepted, and every rejection, are axum's (a test holds the two extractors to each other).
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for Json<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let plain_json = request
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"application/json"));
        if !plain_json {
            // Another JSON type (`+json`, parameters) or none: axum decides, as it always did.
            return axum::Json::<T>::from_request(request, state)
                .await
                .map(|axum::Json(value)| Json(value))
                .map_err(invalid_body);
        }
        // axum's own `Json` reads the body the same way, and wraps the same rejection.
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| invalid_body(rejection.into()))?;
        match serde_json::from_slice(&bytes) {
            Ok(value) => Ok(Json(value)),
            Err(_) => axum::Json::<T>::from_bytes(&bytes).map(|axum::Json(value)| Json(value)).map_err(invalid_body),
        }
    }
}

/// axum's rejection as the API's `invalid_body` error, with axum's status and message.
fn invalid_body(rejection: axum::extract::rejection::JsonRejection) -> ApiError {
    ApiError::new(rejection.status(), "invalid_body", rejection.body_text())
        .with_hint("send a JSON object with the fields docs/http-api.json lists for this route")
}

impl<T, S> axum::extract::OptionalFromRequest<S> for Json<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    /// No body (no `Content-Type`) is `None`; a body must be valid.
    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Option<Self>, ApiError> {
        if !request.headers().contains_key(axum::http::header::CONTENT_TYPE) {
            return Ok(None);
        }
        <Json<T> as axum::extract::FromRequest<S>>::from_request(request, state).await.map(Some)
    }
}

// Response bodies.

/// `GET /v1/status`: what the daemon is and holds.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusView {
    pub version: String,
    pub pid: u32,
    pub started_at: String,
    pub uptime_seconds: i64,
    pub counts: StatusCounts,
    /// The active launch sessions.
    pub sessions: Vec<ActiveSession>,
    /// `absent`, `locked` or `unlocked`.
    pub vault: String,
    /// `disk`, `memory`, or disk low on space (runs refused until it has room).
    pub audit: String,
    /// The audit export to an OTLP collector, when on (SPEC §17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_export: Option<AuditExportView>,
    /// The policy rules in force (SPEC §16), when there are policy files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyView>,
    /// The daemon's own tracing, as it was started (`aileron launch` compares it with the
    /// launcher's `AILERON_OTEL_*` and says when the running daemon ignores them).
    pub traces: TracesView,
    /// Whether the start-up warm-up has loaded every module the enabled actions pin.
    pub modules_warm: bool,
    /// How soon freed memory goes back to the system (docs/decisions/0004-actions-and-runs.md, "Allocator").
    pub allocator: AllocatorView,
}

/// `StatusView::policy`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PolicyView {
    /// The hash of the set in force (`unloaded`: the files failed to load at start, every run is
    /// refused).
    pub hash: String,
    /// Its files, by name.
    pub files: Vec<String>,
    /// Its rules, by id.
    pub rules: usize,
    /// Why the files on disk are not the set in force, when they failed to load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// `StatusView::audit_export`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AuditExportView {
    pub endpoint: String,
    /// The last record seq the collector acknowledged.
    pub exported_seq: u64,
    /// Durable records not yet acknowledged.
    pub lag: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StatusCounts {
    pub actions: usize,
    pub actions_enabled: usize,
    pub action_load_errors: usize,
    pub connectors: usize,
    pub approvals_pending: usize,
    pub approvals_awaiting_vault: usize,
    pub bindings: usize,
    pub sessions_active: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ActiveSession {
    pub session_id: String,
    pub agent: String,
    pub pid: Option<u32>,
    pub started_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TracesView {
    pub enabled: bool,
    /// `stdout`, `file`, `otlp` or `noop`; `null` when tracing is off.
    pub exporter: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AllocatorView {
    pub purge_delay_ms: i64,
}

/// `GET /v1/audit`: records, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AuditList {
    pub items: Vec<aileron_core::audit::AuditRecord>,
}

/// `GET /v1/audit/verify`: the whole chain verified (`ok`, what was proved), or the first problem
/// and what to do about it — a broken chain is an answer, not an error.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ChainVerification {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_anchor: Option<aileron_core::audit::HeadAnchor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// With `?checkpoints=true`: the signed checkpoints that match the log (SPEC §17).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointsVerified>,
}

/// `ChainVerification::checkpoints`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CheckpointsVerified {
    /// Stored checkpoints, each signed by the log's key (and cosigned by the witness when this
    /// machine has one), whose root is the log's at that size.
    pub verified: usize,
    /// The newest one's size (0: none yet).
    pub newest: u64,
}

/// `GET /v1/audit/verify` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct VerifyQuery {
    /// Also check every signed checkpoint against the log (one more pass over it).
    #[serde(default)]
    pub checkpoints: bool,
}

/// `GET /v1/bindings`: the bindings (never their material) and the vault's state.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct BindingList {
    pub items: Vec<crate::stores::bindings::BindingInfo>,
    pub vault: String,
}

/// `GET /v1/sessions`: every launch session, newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionList {
    pub items: Vec<crate::stores::sessions::Session>,
}

/// `POST /v1/actions/install` with `verify_only` → 200: what the package requires, nothing installed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ActionRequirements {
    pub name: String,
    pub version: String,
    /// `unsigned`, or who signed it; absent for a local file.
    pub signature: Option<String>,
    pub requires: Vec<RequiredConnector>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RequiredConnector {
    pub name: String,
    pub version: String,
    pub hash: String,
    /// `pin`: the placeholder this hash replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_from: Option<String>,
    /// `grant_credentials`: the credential kind added to the action's capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<String>,
    /// The installed connector injects this credential kind and the action's capabilities do
    /// not list it: every run that uses it fails `capability_denied`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_credential: Option<String>,
    /// Whether the installed connector was signed (absent when it is not installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<bool>,
}

/// `GET /v1/health`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    pub status: String,
    pub version: String,
}

impl Health {
    /// This process's answer.
    pub fn current() -> Health {
        Health { status: "ok".into(), version: crate::platform::process::VERSION.into() }
    }
}

/// An installed action (`GET /v1/actions/{name}`, an item of `GET /v1/actions`); `source` only
/// when one action is shown. Reading one, only the name and the tool name are required: an
/// `aileron-mcp` of another version still builds its catalog from what it understands.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ActionView {
    pub name: String,
    pub tool_name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub intent: String,
    #[serde(default)]
    pub requires_approval: bool,
    #[serde(default)]
    pub input_schema: Value,
    #[serde(default)]
    pub connectors: Vec<ConnectorPin>,
    #[serde(default)]
    pub steps: Vec<StepView>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A connector an action pins, with the capabilities it narrows the manifest to.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ConnectorPin {
    pub name: String,
    pub version: String,
    pub hash: String,
    pub capabilities: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StepView {
    pub id: String,
    pub connector: String,
    pub op: String,
}

/// `GET /v1/actions`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ActionList {
    pub items: Vec<ActionView>,
    #[serde(default)]
    pub load_errors: Vec<LoadError>,
}

/// An action file that did not load.
pub use crate::stores::actions::LoadError;

/// `POST /v1/actions/{name}/run` → 200.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RunCompleted {
    pub audit_id: String,
    #[schemars(with = "Value")]
    pub result: RunResult,
}

impl RunCompleted {
    /// The 200 answer as a [`Reply`] (the in-process `/mcp` reads its body); the HTTP handler
    /// sends [`RunAnswer::into_response`], which writes the result without building it as a `Value`.
    pub fn into_reply(self) -> Reply {
        let mut body = Map::new();
        body.insert("audit_id".into(), self.audit_id.into());
        body.insert("result".into(), self.result.into_value());
        Reply { status: StatusCode::OK, body: Value::Object(body) }
    }
}

/// A completed run's result, `{"action", "output", "steps"}`: as the runner made it (written
/// straight to the answer's bytes: the run's output is its last step's, held once, and each
/// step's identity read from the action it ran) or as read back from an answer.
#[derive(Debug, Clone)]
pub enum RunResult {
    Ran { action: Arc<ActionFile>, steps: Vec<StepResult> },
    Read(Value),
}

impl RunResult {
    pub fn into_value(self) -> Value {
        match self {
            RunResult::Read(value) => value,
            ran => serde_json::to_value(&ran).expect("a run result serializes"),
        }
    }
}

impl Serialize for RunResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            RunResult::Read(value) => value.serialize(serializer),
            RunResult::Ran { action, steps } => {
                // The run's output is its last step's (`null` when it had none).
                let output = steps.last().map_or(&Value::Null, |step| &step.output);
                let mut map = serializer.serialize_map(Some(3))?;
                map.serialize_entry("action", &action.name)?;
                map.serialize_entry("output", output)?;
                map.serialize_entry("steps", &StepResults { action, steps })?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for RunResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(RunResult::Read)
    }
}

/// One step of a run: what its call produced. Its id, connector, pinned hash and op are the
/// action's step at `index` (see [`StepResult::step`]): read from there, not copied per run.
#[derive(Debug, Clone)]
pub struct StepResult {
    pub index: usize,
    pub attempts: usize,
    pub binding: Option<StepBinding>,
    pub logs: Vec<GuestLogLine>,
    pub output: Value,
}

impl StepResult {
    /// The action's step this is the result of, and the connector it pinned.
    pub fn step<'a>(&self, action: &'a ActionFile) -> (&'a Step, &'a aileron_core::action::RequiredConnector) {
        let step = &action.steps[self.index];
        (step, action.connector_of(step))
    }

    /// The action's step this is the result of, and its texts made once
    /// ([`ActionFile::run_texts`]): the connector and hash the answer and the record write.
    pub fn step_texts<'a>(&self, action: &'a ActionFile) -> (&'a Step, &'a StepTexts) {
        (&action.steps[self.index], &action.run_texts().steps[self.index])
    }
}

/// A run's steps as its answer shows them.
struct StepResults<'a> {
    action: &'a ActionFile,
    steps: &'a [StepResult],
}

impl Serialize for StepResults<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.steps.iter().map(|result| StepAnswer { action: self.action, result }))
    }
}

/// One step as its answer shows it, fields in the JSON's order (alphabetical).
struct StepAnswer<'a> {
    action: &'a ActionFile,
    result: &'a StepResult,
}

impl Serialize for StepAnswer<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (step, texts) = self.result.step_texts(self.action);
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("attempts", &self.result.attempts)?;
        if let Some(binding) = &self.result.binding {
            map.serialize_entry("binding", binding)?;
        }
        map.serialize_entry("connector", &*texts.connector)?;
        map.serialize_entry("hash", &*texts.hash)?;
        map.serialize_entry("id", &step.id)?;
        if !self.result.logs.is_empty() {
            map.serialize_entry("logs", &self.result.logs)?;
        }
        map.serialize_entry("op", &step.op)?;
        map.serialize_entry("output", &self.result.output)?;
        map.end()
    }
}

/// Which binding a step's call used.
#[derive(Debug, Clone, Serialize)]
pub struct StepBinding {
    pub identity: String,
    pub kind: aileron_core::manifest::CredentialKind,
    pub name: String,
}

/// A log line the guest wrote.
#[derive(Debug, Clone, Serialize)]
pub struct GuestLogLine {
    pub level: String,
    pub message: String,
}

/// What a run answers, typed (`POST /v1/actions/{name}/run`): the workflow returns it, the HTTP
/// handler sends [`RunAnswer::into_response`] (the one mapping to HTTP), the in-process `/mcp` maps it
/// to a tool result directly, and `aileron-mcp` reads an HTTP answer back with
/// [`RunAnswer::from_http`].
#[derive(Debug)]
pub enum RunAnswer {
    /// 200: the steps ran.
    Completed(RunCompleted),
    /// 202: registered for a human's decision.
    Pending(aileron_core::approval::PendingApproval),
    /// A failure envelope (SPEC §9) with its class's status.
    Failed(aileron_core::Failure),
    /// Refused before anything ran (`invalid_args`, `action_not_found`, a missing scope, …), as the
    /// CRUD error shape with its status.
    Refused(Reply),
}

impl RunAnswer {
    /// The HTTP answer: a completed run's body written from its typed result, into a buffer with
    /// room for a typical answer at once (axum's `Json` starts at 128 bytes and doubles).
    pub fn into_response(self) -> Response {
        match self {
            RunAnswer::Completed(completed) => {
                let mut body = Vec::with_capacity(4096);
                serde_json::to_writer(&mut body, &completed).expect("a run answer serializes");
                let json = axum::http::HeaderValue::from_static("application/json");
                (StatusCode::OK, [(axum::http::header::CONTENT_TYPE, json)], body).into_response()
            }
            other => other.into_reply().into_response(),
        }
    }

    pub fn into_reply(self) -> Reply {
        match self {
            RunAnswer::Completed(completed) => completed.into_reply(),
            RunAnswer::Pending(pending) => Reply::new(StatusCode::ACCEPTED, pending),
            RunAnswer::Failed(failure) => Reply::failure(&failure),
            RunAnswer::Refused(reply) => reply,
        }
    }

    /// An answer as the HTTP API sent it; one that does not parse as its status says stays a
    /// [`RunAnswer::Refused`] with the body as it came.
    pub fn from_http(status: u16, body: Value) -> RunAnswer {
        let refused = |body: Value| {
            RunAnswer::Refused(Reply { status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY), body })
        };
        match status {
            200 => serde_json::from_value(body.clone()).map_or_else(|_| refused(body), RunAnswer::Completed),
            202 => serde_json::from_value(body.clone()).map_or_else(|_| refused(body), RunAnswer::Pending),
            _ => match aileron_core::Failure::from_envelope(&body) {
                Some(failure) => RunAnswer::Failed(failure),
                None => refused(body),
            },
        }
    }
}

impl From<ApiError> for RunAnswer {
    fn from(error: ApiError) -> RunAnswer {
        RunAnswer::Refused(Reply::from(error))
    }
}

/// `POST /v1/sessions` → 201: the session and its token (shown once, to the launcher).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SessionStarted {
    pub session_id: String,
    #[serde(with = "crate::platform::secret::exposed")]
    #[schemars(with = "String")]
    pub token: crate::platform::secret::Secret,
    pub scopes: Vec<String>,
    pub confinement: Confinement,
    pub started_at: String,
    /// For an enforced network: the variables the agent gets a placeholder in (SPEC §15), the
    /// proxy putting the bound credential on the requests they are sent with.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub placeholder_env: std::collections::BTreeMap<String, String>,
}

/// `GET /v1/action-approvals` (and the `snapshot` event of its watch stream).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalList {
    pub items: Vec<aileron_core::approval::ApprovalEntry>,
}

/// `POST /v1/web/login-tickets`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct LoginTicket {
    pub ticket: String,
    pub login_url: String,
    pub expires_in_seconds: u64,
}

// Request bodies and queries.

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallAction {
    pub file_name: String,
    pub content: String,
    /// A fetched action package: its `<fqn>@<version>` (checked against the file's `source`),
    /// its signature (base64, verified against the keyring), and whether an unsigned package
    /// and replacing a different action of the same name are accepted.
    #[serde(default)]
    pub reference: Option<String>,
    #[serde(default)]
    pub signature: Option<String>,
    #[serde(default)]
    pub allow_unsigned: bool,
    #[serde(default)]
    pub force: bool,
    /// Check the package (its reference, signature, `force`) and answer what it requires, without
    /// installing: `aileron action add <fqn>` asks this before it installs any connector, so a
    /// forged or unwanted package cannot make it fetch and install anything.
    #[serde(default)]
    pub verify_only: bool,
    /// A local file only: pin each `[[requires.connectors]]` whose hash is a placeholder (the
    /// original project's `sha256:bound-at-release`) to the installed connector of that name and
    /// version (`aileron action add --pin`, after the user saw the hash).
    #[serde(default)]
    pub pin: bool,
    /// A local file only: add each connector's credential kind to the action's capabilities
    /// where they lack it (the user's explicit yes is the declaration).
    #[serde(default)]
    pub grant_credentials: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RunBody {
    #[serde(default)]
    pub args: Map<String, Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchAction {
    pub enabled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewBody {
    /// A local package (directory or tarball); absent: fetched from the reference's forge.
    #[serde(default)]
    pub source: Option<PathBuf>,
    pub reference: String,
    #[serde(default)]
    pub expected_hash: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallBody {
    #[serde(flatten)]
    pub preview: PreviewBody,
    /// How consent was given: `prompt` (the user answered y) or `flag` (`--yes`); `declined` records
    /// that the user saw the consent screen and said no (nothing is installed).
    pub consent: String,
    /// With `flag`: the caller accepts an unsigned package (`--allow-unsigned`). Enforced here, so
    /// no client can skip it.
    #[serde(default)]
    pub allow_unsigned: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckQuery {
    #[serde(default)]
    pub pre: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveConnector {
    pub reference: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    pub approved: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// Approve with these arguments instead (an action's approval only): checked against the
    /// action's inputs; the run uses them and the agent is told.
    #[serde(default)]
    pub args: Option<Map<String, Value>>,
}

/// `POST /v1/action-approvals/{id}/preview`: the preview of a pending action approval with
/// edited arguments, before approving with them.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditPreviewBody {
    pub args: Map<String, Value>,
}

/// The arguments as checked and the action's preview with them (`null` when it declares none).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct EditPreview {
    pub args: Map<String, Value>,
    pub preview: Option<aileron_core::approval::ApprovalPreview>,
}

/// `POST /v1/action-approvals/{id}/cancel`: withdraw a pending approval.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSession {
    pub agent: String,
    #[serde(default)]
    pub pid: Option<u32>,
    /// How the agent is contained; absent means `unconfined` (a claim of containment is explicit).
    #[serde(default)]
    pub confinement: Confinement,
    /// The paths a confined agent may write (audited with the session's start).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// How a confined agent's network leaves (absent: unconfined, or a launcher from before §15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<SessionNetwork>,
    /// The user's credential stores hidden from the agent, and those `--expose` kept visible.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exposed: Vec<String>,
    /// What of the user's home a confined agent sees (the rest is covered); empty when it sees
    /// all of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub home_seen: Vec<String>,
    /// Continue this session, which a daemon restart interrupted, instead of starting another
    /// (an unconfined one only: `aileron-mcp`'s own, reconnecting). Its approvals stay its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<String>,
}

/// What `aileron launch` sends to the daemon's agent-network socket with the two listeners it
/// made inside a confined agent's network namespace (the API's first, the proxy's second).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkHandover {
    pub session_id: String,
    /// The daemon token: only the user's own launcher attaches listeners.
    pub token: String,
    /// `HOST:PORT` destinations the proxy may dial although they are not public.
    #[serde(default)]
    pub allow_private: Vec<String>,
    /// `--allow-tcp HOST:PORT` destinations, one per listener after the API's and the proxy's.
    #[serde(default)]
    pub allow_tcp: Vec<String>,
    /// `--approval-hold`: how long a request held for approval at the proxy waits (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_hold_seconds: Option<u64>,
}

/// The daemon's one-line JSON answer to a hand-over: the session CA's certificate (PEM) when it
/// serves the listeners, else why not.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NetworkHandoverAnswer {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A confined launch's network (SPEC §15); also `aileron launch --network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SessionNetwork {
    /// Its own network namespace: out only through the session's egress proxy.
    Enforced,
    /// The host's network (`--network=open`): unaudited, recorded as `sandbox.egress.unenforced`.
    Open,
}

impl SessionNetwork {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionNetwork::Enforced => "enforced",
            SessionNetwork::Open => "open",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndSession {
    pub exit_code: Option<i32>,
    /// Files the agent planted that the launcher moved aside (`aileron launch`'s watch on
    /// repositories' `commondir` and the like).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quarantined: Vec<String>,
    /// Repositories the agent created in its workspace (their hooks and config are its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub new_repositories: Vec<String>,
    /// Tracked files whose changes the agent hid from `git status` (`--skip-worktree`,
    /// `--assume-unchanged`, an index entry claiming the changed file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden_changes: Vec<String>,
}

/// `text` as one URL path segment of a route (a binding name's `/` becomes `%2F`), as the CLI
/// sends it and the console's buttons name it.
pub fn path_segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>().replace('+', "%20")
}

/// A two-step action (one input; both steps call one pinned connector) for the run-result and
/// audit-record tests.
#[cfg(test)]
pub(crate) const TWO_STEP_ACTION: &str = r#"+++
name = "post"
version = "1.2.0"

[[requires.connectors]]
name = "github://acme/slack"
version = "1.0.0"
hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
capabilities = ["post", "api_key", "network:slack.com:443"]

[match]
intent = "post a message"

[[inputs]]
name = "text"
type = "string"
description = "What to say"

[[execute]]
id = "post"
connector = "github://acme/slack"
op = "post"

[execute.inputs]
text = "${args.text}"

[[execute]]
id = "again"
connector = "github://acme/slack"
op = "post"
+++
Posts a message.
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The extractor accepts what axum's accepts and refuses the rest with axum's status and
    /// message (the field named): a plain `application/json` body takes the fast path, anything
    /// else axum's own.
    #[tokio::test]
    async fn the_json_extractor_answers_as_axums_does() {
        use axum::extract::FromRequest;
        let request = |content_type: Option<&str>, body: &str| {
            let mut request = axum::http::Request::builder().method("POST").uri("/");
            if let Some(content_type) = content_type {
                request = request.header("content-type", content_type);
            }
            request.body(axum::body::Body::from(body.to_string())).unwrap()
        };
        let types = [
            None,
            Some("application/json"),
            Some("Application/JSON"),
            Some("application/json; charset=utf-8"),
            Some("application/vnd.aileron+json"),
            Some("text/plain"),
        ];
        let bodies = [
            r#"{"args": {"text": "hi", "n": [1, 2.5, null]}}"#,
            "{}",
            r#"{"args": {"a": 1}} "#,
            r#"{"args": {"a": 1}} x"#,
            r#"{"args": 7}"#,
            r#"{"args": {}, "extra": true}"#,
            r#"{"args": {"a": "#,
            "",
        ];
        for content_type in types {
            for body in bodies {
                let ours = Json::<RunBody>::from_request(request(content_type, body), &()).await;
                let axums = axum::Json::<RunBody>::from_request(request(content_type, body), &()).await;
                let case = format!("{content_type:?} {body:?}");
                match (ours, axums) {
                    (Ok(Json(ours)), Ok(axum::Json(axums))) => assert_eq!(ours.args, axums.args, "{case}"),
                    (Err(ours), Err(rejection)) => {
                        assert_eq!(ours.status, rejection.status(), "{case}");
                        assert_eq!(ours.message, rejection.body_text(), "{case}");
                        assert_eq!(ours.code, "invalid_body", "{case}");
                    }
                    (ours, axums) => panic!("{case}: ours {:?}, axum's {:?}", ours.map(|j| j.0), axums.map(|j| j.0)),
                }
            }
        }
        // The refusal of a wrong field names it, on the fast path's fallback too.
        let wrong = Json::<RunBody>::from_request(request(Some("application/json"), r#"{"args": 7}"#), &()).await;
        assert!(wrong.unwrap_err().message.contains("args"), "the field is named");
    }

    fn step(index: usize, output: Value) -> StepResult {
        StepResult { index, attempts: 1, binding: None, logs: Vec::new(), output }
    }

    /// The runner's typed result writes the JSON the answer always had (the output is the last
    /// step's, written twice though held once), key for key and in the same order, and the
    /// `Reply` the in-process `/mcp` reads holds the same.
    #[test]
    fn a_completed_run_answers_its_result_as_the_json_it_always_was() {
        let action = Arc::new(aileron_core::action::parse_action(TWO_STEP_ACTION, "post.md").unwrap());
        let mut first = step(0, json!({ "n": [1, 2.5, null] }));
        first.binding = Some(StepBinding {
            identity: "octocat".into(),
            kind: aileron_core::manifest::CredentialKind::OAuth2,
            name: "github".into(),
        });
        first.logs = vec![GuestLogLine { level: "info".into(), message: "hi".into() }];
        let ran = RunCompleted {
            audit_id: "aud_1".into(),
            result: RunResult::Ran { action: action.clone(), steps: vec![first, step(1, json!({ "text": "hi" }))] },
        };
        let expected = r#"{"audit_id":"aud_1","result":{"action":"post","output":{"text":"hi"},"steps":[{"attempts":1,"binding":{"identity":"octocat","kind":"oauth2","name":"github"},"connector":"github://acme/slack","hash":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","id":"post","logs":[{"level":"info","message":"hi"}],"op":"post","output":{"n":[1,2.5,null]}},{"attempts":1,"connector":"github://acme/slack","hash":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","id":"again","op":"post","output":{"text":"hi"}}]}}"#;
        assert_eq!(serde_json::to_string(&ran).unwrap(), expected);
        let reply = ran.clone().into_reply();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(serde_json::to_string(&reply.body).unwrap(), expected);
        // Read back (as `aileron-mcp` and the CLI read an answer), it writes the same bytes.
        let read: RunCompleted = serde_json::from_str(expected).unwrap();
        let RunResult::Read(value) = &read.result else { panic!("an answer reads back as its JSON") };
        assert_eq!(value["output"], json!({ "text": "hi" }));
        assert_eq!(serde_json::to_string(&read).unwrap(), expected);
        // No steps: the output is null.
        let empty = RunResult::Ran { action, steps: Vec::new() };
        assert_eq!(serde_json::to_string(&empty).unwrap(), r#"{"action":"post","output":null,"steps":[]}"#);
    }
}
