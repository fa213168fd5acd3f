//! `run_action`: the one execution path. Every caller — HTTP (`POST /v1/actions/{name}/run`),
//! and through it the CLI, `aileron-mcp` and the web page — ends here.
//!
//! Invariant: there is no other function that calls `Runtime::call` for an action step.
//! Invariant: every outcome (success or failure) is audited, fsynced, before it is returned; if
//! the audit log cannot be written the run fails closed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aileron_core::action::{ActionFile, ArgsError};
use aileron_core::audit::{Actor, ActorType};
use aileron_core::manifest::ConnectorManifest;
use aileron_core::policy::{self, CapabilitySubset};
use aileron_core::template::step_args;
use aileron_core::{Failure, FailureClass};
use aileron_sandbox::{CallRequest, ImportPolicy, Limits};
use serde_json::{Map, Value, json};

use crate::audit_log::{AuditEvent, mint_audit_id};
use crate::daemon::AppState;
use crate::egress::StepEgress;

/// Who is asking, for the audit record.
#[derive(Debug, Clone)]
pub struct Caller {
    pub actor: Actor,
    pub session_id: Option<String>,
}

impl Caller {
    pub fn new(actor_type: ActorType, id: impl Into<String>) -> Caller {
        Caller { actor: Actor { r#type: actor_type, id: id.into() }, session_id: None }
    }
}

pub struct RunRequest {
    pub action: String,
    pub args: Map<String, Value>,
    pub caller: Caller,
}

/// What a run produced. Both variants have been audited.
#[derive(Debug)]
pub enum RunOutcome {
    Completed { audit_id: String, result: Value },
    Failed(Failure),
}

/// Requests refused before anything ran (CRUD-style errors, not failure envelopes).
#[derive(Debug, thiserror::Error)]
pub enum RunRejection {
    #[error("no action named `{0}` is installed")]
    NotFound(String),
    #[error("action `{0}` is disabled")]
    Disabled(String),
    #[error("{0}")]
    InvalidArgs(ArgsError),
    #[error("action `{0}` requires human approval, and the approval gate is not available in this build")]
    ApprovalUnavailable(String),
    #[error("audit log unavailable: {0}")]
    AuditUnavailable(String),
}

/// Retry schedule for retriable failures (SPEC §9): 1 s, 2 s, 4 s with jitter.
pub const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

pub async fn run_action(state: &Arc<AppState>, request: RunRequest) -> Result<RunOutcome, RunRejection> {
    let installed = state.actions.get(&request.action).ok_or_else(|| RunRejection::NotFound(request.action.clone()))?;
    if !installed.enabled {
        return Err(RunRejection::Disabled(request.action.clone()));
    }
    let action = installed.file;
    action.validate_call_args(&request.args).map_err(RunRejection::InvalidArgs)?;
    if action.requires_approval() {
        return Err(RunRejection::ApprovalUnavailable(action.name.clone()));
    }
    let audit_id = mint_audit_id();
    let executed = execute_steps(state, &action, &request.args, &request.caller, &audit_id).await;
    match executed {
        Ok((output, steps)) => {
            let result = json!({ "action": action.name, "output": output, "steps": steps });
            let mut payload = action_payload(&action);
            payload.insert("aileron.action.steps".into(), Value::Array(steps.iter().map(step_summary).collect()));
            payload.insert("aileron.action.arg_names".into(), json!(request.args.keys().collect::<Vec<_>>()));
            append(state, "action.executed", &request.caller, payload, &audit_id).await?;
            Ok(RunOutcome::Completed { audit_id, result })
        }
        Err(StepFailure { failure, step_id, connector, op }) => {
            let mut payload = action_payload(&action);
            payload.extend(failure.audit_payload());
            payload.insert("aileron.action.step_id".into(), step_id.into());
            payload.insert("aileron.connector.fqn".into(), connector.into());
            payload.insert("aileron.connector.op".into(), op.into());
            append(state, "execution.failed", &request.caller, payload, &audit_id).await?;
            Ok(RunOutcome::Failed(failure.with_audit_id(audit_id)))
        }
    }
}

struct StepFailure {
    failure: Failure,
    step_id: String,
    connector: String,
    op: String,
}

/// Runs the steps in order; the first failure stops the action.
async fn execute_steps(
    state: &Arc<AppState>,
    action: &Arc<ActionFile>,
    args: &Map<String, Value>,
    caller: &Caller,
    audit_id: &str,
) -> Result<(Value, Vec<Value>), StepFailure> {
    let mut outputs: BTreeMap<String, Value> = BTreeMap::new();
    let mut steps = Vec::new();
    let mut last_output = Value::Null;
    for (index, step) in action.steps.iter().enumerate() {
        let fail = |failure: Failure| StepFailure {
            failure,
            step_id: step.id.clone(),
            connector: step.connector.to_string(),
            op: step.op.clone(),
        };
        let required = action
            .required_connector(&step.connector)
            .expect("the parser guarantees every step names a required connector");
        let subset = CapabilitySubset::from(required);
        policy::check_op(&subset, &step.op).map_err(fail)?;
        let connector = state.store.load_verified(&required.hash).map_err(fail)?;
        let manifest = Arc::new(connector.manifest.clone());
        check_identity(&manifest, required).map_err(fail)?;
        let import_policy =
            ImportPolicy { allowed_host_imports: manifest.runtime_imports().map(|imports| imports.to_vec()) };
        // Compiling a large module takes seconds: keep it off the async executor threads.
        let module = {
            let (runtime, hash, wasm) = (state.runtime.clone(), required.hash.clone(), connector.wasm.clone());
            tokio::task::spawn_blocking(move || runtime.load(&hash, &wasm, &import_policy))
                .await
                .map_err(|e| fail(Failure::runtime_error(aileron_core::Boundary::Runtime, format!("loading the module: {e}"))))?
                .map_err(fail)?
        };
        let op_args = step_args(action, index, args, &outputs).map_err(|e| {
            fail(Failure::runtime_error(aileron_core::Boundary::Runtime, format!("step `{}`: {e}", step.id)))
        })?;
        let mut limits = Limits::default();
        if let Some(seconds) = step.timeout_seconds {
            limits.wall_time = Duration::from_secs(u64::from(seconds));
        }
        let idempotent = step.is_idempotent(manifest.is_idempotent());
        let egress = Arc::new(StepEgress {
            state: state.clone(),
            manifest: manifest.clone(),
            subset,
            connector_fqn: step.connector.to_string(),
            op: step.op.clone(),
            action: action.name.clone(),
            caller: caller.clone(),
            audit_id: audit_id.to_string(),
        });
        let mut attempt = 0;
        let output = loop {
            let request = CallRequest { op: step.op.clone(), args: Value::Object(op_args.clone()), limits: limits.clone() };
            let outcome = state.runtime.call(&module, request, egress.clone()).await;
            match outcome.result {
                Ok(output) => break output,
                Err(failure) if should_retry(&failure, idempotent, attempt) => {
                    tokio::time::sleep(jittered(state.retry_delays[attempt])).await;
                    attempt += 1;
                }
                Err(failure) => return Err(fail(failure)),
            }
        };
        steps.push(json!({
            "id": step.id,
            "connector": step.connector.to_string(),
            "op": step.op,
            "hash": required.hash.to_string(),
            "attempts": attempt + 1,
            "output": output,
        }));
        outputs.insert(step.id.clone(), output.clone());
        last_output = output;
    }
    Ok((last_output, steps))
}

/// The stored manifest must be the connector the action pinned (name and version), not just
/// any bytes with the right hash — the hash covers the manifest, so this guards our own index.
fn check_identity(manifest: &ConnectorManifest, required: &aileron_core::action::RequiredConnector) -> Result<(), Failure> {
    if manifest.name != required.name || manifest.version != required.version {
        return Err(Failure::hash_mismatch(format!(
            "store entry {} holds {}@{}, but the action requires {}@{}",
            required.hash, manifest.name, manifest.version, required.name, required.version
        )));
    }
    Ok(())
}

fn should_retry(failure: &Failure, idempotent: bool, attempt: usize) -> bool {
    idempotent
        && failure.retriable
        && matches!(failure.class, FailureClass::NetworkError | FailureClass::ExternalApiError)
        && attempt < RETRY_DELAYS.len()
}

fn jittered(delay: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    // ±25 %: 0.75 + (0..=255)/512.
    delay.mul_f64(0.75 + f64::from(byte[0]) / 512.0)
}

fn action_payload(action: &ActionFile) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert("aileron.action.name".into(), action.name.clone().into());
    payload.insert("aileron.action.version".into(), action.version.to_string().into());
    payload.insert("aileron.action.steps_count".into(), action.steps.len().into());
    payload
}

/// The audit view of a step: identity and capability, never the output or arguments.
fn step_summary(step: &Value) -> Value {
    json!({
        "id": step["id"],
        "aileron.connector.fqn": step["connector"],
        "aileron.connector.op": step["op"],
        "aileron.connector.hash": step["hash"],
        "aileron.capability.kind": step["op"],
        "attempts": step["attempts"],
    })
}

async fn append(
    state: &AppState,
    event_type: &str,
    caller: &Caller,
    payload: Map<String, Value>,
    audit_id: &str,
) -> Result<(), RunRejection> {
    let event = AuditEvent {
        event_type: event_type.to_string(),
        actor: caller.actor.clone(),
        session_id: caller.session_id.clone(),
        payload,
        audit_id: Some(audit_id.to_string()),
    };
    state.audit.append(event).await.map(|_| ()).map_err(|e| RunRejection::AuditUnavailable(e.to_string()))
}
