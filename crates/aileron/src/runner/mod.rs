//! `run_action`: the one execution path. Every caller — HTTP (`POST /v1/actions/{name}/run`),
//! and through it the CLI, `aileron-mcp` and the web page — ends here.
//!
//! Invariant: there is no other function that calls `Runtime::call` for an action step.
//! Invariant: every outcome (success or failure) is audited, fsynced, before it is returned; if
//! the audit log cannot be written the run fails closed.

mod gate;
mod record;
pub mod sandbox;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use aileron_core::action::{ActionFile, ArgsError, Preview, RequiredConnector, StepTexts};
use aileron_core::approval::{
    AdmissionRequest, ApprovalEntry, ApprovalId, ApprovalPreview, ApprovalRequest, Outcome, PendingApproval,
    render_preview, requested_payload, review_url,
};
use aileron_core::audit::{ActorType, PreparedRecord};
use aileron_core::manifest::ConnectorManifest;
use aileron_core::policy::{self, CapabilitySubset};
use aileron_core::template::{self, step_args};
use aileron_core::untrusted_text::visible;
use aileron_core::vocabulary::EventType;
use aileron_core::{Failure, FailureClass};
use aileron_sandbox::{CallRequest, ImportPolicy, Instance, Limits};
use serde_json::{Map, Value, json};

use crate::dataplane::egress::Admission;
use crate::dataplane::egress::StepEgress;
pub use crate::dataplane::egress::UpstreamWait;
pub use crate::platform::principal::Caller;
use crate::platform::telemetry::TracedSpan;
use crate::platform::telemetry::keys;
use crate::services::Services;
use crate::stores::approvals;
use crate::stores::audit_log::mint_audit_id;
use crate::wire::{GuestLogLine, RunResult, StepBinding, StepResult};
use record::{Ending, RunRecord, prepared};

pub struct RunRequest {
    pub action: String,
    pub args: Map<String, Value>,
    pub caller: Caller,
    /// Present only when the approval queue executes an approved entry (see [`execute_approved`]).
    pub approval: Option<ApprovalGrant>,
    /// Where the run's steps add the time they wait on upstreams (read for
    /// `x-aileron-overhead-us`).
    pub waited: Arc<UpstreamWait>,
}

impl RunRequest {
    pub fn new(action: impl Into<String>, args: Map<String, Value>, caller: Caller) -> RunRequest {
        RunRequest { action: action.into(), args, caller, approval: None, waited: Arc::default() }
    }
}

/// Proof that a human approved this exact entry. Its field is private, so only this module
/// (the approval executor) can construct one: nothing an HTTP caller sends can skip the gate.
pub struct ApprovalGrant {
    entry: ApprovalEntry,
}

/// What a run produced. Every variant has been audited (and, for a pending approval, journaled).
#[derive(Debug)]
pub enum RunOutcome {
    Completed { audit_id: String, result: RunResult },
    Failed(Failure),
    PendingApproval(PendingApproval),
}

/// Requests refused before anything ran (CRUD-style errors, not failure envelopes) — and the one
/// answer after steps ran that is not an outcome: [`RunRejection::RanUnaudited`].
#[derive(Debug, thiserror::Error)]
pub enum RunRejection {
    #[error("no action named `{0}` is installed")]
    NotFound(String),
    #[error("action `{0}` is disabled")]
    Disabled(String),
    #[error("{0}")]
    InvalidArgs(ArgsError),
    #[error("audit log unavailable: {0}")]
    AuditUnavailable(String),
    /// The steps ran (their effects happened), and then the record of the run could not be
    /// written: never reported as "nothing was executed", or a caller would run it again.
    #[error("the action ran, but its audit record could not be written: {0}")]
    RanUnaudited(String),
    #[error("approval journal unavailable: {0}")]
    JournalUnavailable(String),
    /// The arguments of a gated call are too large to register for review.
    #[error("the arguments are {0} bytes; a call that needs approval may carry at most {MAX_APPROVAL_ARGS_BYTES}")]
    ArgsTooLarge(usize),
    /// This session already has as many approvals waiting as it may.
    #[error("{0} approvals from this session are already waiting; at most {MAX_PENDING_PER_SESSION} may wait at once")]
    TooManyPending(usize),
}

/// A gated call's arguments are journaled, shown on the review page and kept until decided:
/// bounded, so one session cannot flood the journal and the page (SECURITY: agents are
/// semi-trusted).
pub const MAX_APPROVAL_ARGS_BYTES: usize = 64 * 1024;
/// Approvals one session may have waiting at once (decided with registration, under the queue lock).
pub use aileron_core::approval::MAX_PENDING_PER_SESSION;

/// Retry schedule for retriable failures (SPEC §9): 1 s, 2 s, 4 s with jitter.
pub const RETRY_DELAYS: [Duration; 3] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

/// Runs `request` through the chokepoint (SPEC §0). A bug that panics mid-run must neither leave
/// the run without a record (§0.5) nor an approved run "running" for ever (the ninth re-attack
/// found such a panic in the host call: closed, but not the last bug): the panic becomes a failure
/// with a record of its own.
///
/// Not an `async fn`: one would hold the request (some 900 bytes) and the run's first state beside
/// it, and the whole run's future inline; each request's handler future, which the route boxes by a
/// copy of its full size, was 8 KB (stop 102: 7,800 instructions of `memcpy` a run). The run is
/// boxed here, the request moved straight into it.
pub fn run_action(
    state: &Arc<Services>,
    request: RunRequest,
) -> impl Future<Output = Result<RunOutcome, RunRejection>> + Send + '_ {
    let (caller, action) = (request.caller.clone(), request.action.clone());
    let run = Box::pin(run_unguarded(state, request));
    async move {
        match caught(run).await {
            Ok(outcome) => outcome,
            // Boxed: held inline, the rare path's future would be in every run's (see the test).
            Err(panic) => Box::pin(record_panic(state, caller, action, panic)).await,
        }
    }
}

/// The record and the failure of a run a panic ended.
async fn record_panic(
    state: &Services,
    caller: Caller,
    action: String,
    panic: String,
) -> Result<RunOutcome, RunRejection> {
    log_line!("aileron daemon: running `{action}` failed with a bug (a panic): {panic}");
    let failure = Failure::runtime_error(
        aileron_core::Boundary::Runtime,
        format!("the daemon failed while running `{action}` (a bug; its log has the details): {panic}"),
    );
    let audit_id = mint_audit_id();
    let mut payload = failure.audit_payload();
    payload.insert(keys::ACTION_NAME.into(), action.into());
    append(state, EventType::ExecutionFailed, &caller, payload, &audit_id).await?;
    Ok(RunOutcome::Failed(failure.with_audit_id(audit_id)))
}

/// `future`'s output, or the message of the panic that ended it. Not an `async fn`: one would
/// hold `future` twice (as its argument and as what it awaits), doubling every run's future.
fn caught<T>(future: impl Future<Output = T>) -> impl Future<Output = Result<T, String>> {
    use futures_util::FutureExt as _;
    std::panic::AssertUnwindSafe(future).catch_unwind().map(|caught| {
        caught.map_err(|panic| {
            panic
                .downcast_ref::<&str>()
                .map(|text| text.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string())
        })
    })
}

async fn run_unguarded(state: &Arc<Services>, request: RunRequest) -> Result<RunOutcome, RunRejection> {
    let Some(installed) = state.actions.get(&request.action) else {
        audit_rejection(state, &request.caller, &request.action, "not_found", &request.args).await?;
        return Err(RunRejection::NotFound(request.action.clone()));
    };
    if !installed.enabled {
        audit_rejection(state, &request.caller, &request.action, "disabled", &request.args).await?;
        return Err(RunRejection::Disabled(request.action.clone()));
    }
    let action = installed.file;
    if let Err(error) = action.validate_call_args(&request.args) {
        audit_rejection(state, &request.caller, &request.action, "invalid_args", &request.args).await?;
        return Err(RunRejection::InvalidArgs(error));
    }
    let audit_id = mint_audit_id();
    // Registering an approval (here and below) is boxed: it is the largest of a run's paths, and
    // held inline it made every run's future larger than that path and the steps together,
    // copied whole into the route's box on every request (BENCHMARKS.md, issue 49).
    let (policy, admission) = match gate::check(state, &action, &request, &audit_id).await? {
        gate::Gate::Pass { hash, admission } => (hash, admission),
        gate::Gate::Refused(failure) => {
            state.telemetry.action_execute(&action).fail(&failure, Some(&audit_id));
            return Ok(RunOutcome::Failed(failure));
        }
        gate::Gate::Ask { reasons, .. } => {
            return Box::pin(request_approval(state, &action, request, Some(reasons))).await;
        }
    };
    let policy = policy.as_deref();
    match &request.approval {
        None if action.requires_approval() => return Box::pin(request_approval(state, &action, request, None)).await,
        None => {}
        Some(grant) => {
            // The approval binds to the exact action bytes and arguments that were registered.
            let verified = grant.entry.verify_action(&action).and_then(|()| {
                if grant.entry.run_args() == &request.args {
                    Ok(())
                } else {
                    Err(Failure::capability_denied(
                        aileron_core::Boundary::Action,
                        "arguments differ from the approved ones",
                    ))
                }
            });
            if let Err(failure) = verified {
                let record = RunRecord {
                    action: &action,
                    approval: Some(&grant.entry.id),
                    policy,
                    ending: Ending::Refused(&failure),
                };
                submit(state, record.prepared(&request.caller, &audit_id)).await?;
                admitted(admission.as_ref()).await?;
                state.telemetry.action_execute(&action).fail(&failure, Some(&audit_id));
                return Ok(RunOutcome::Failed(failure.with_audit_id(audit_id)));
            }
        }
    }
    if !state.audit.has_room().await {
        // The log has room left only for records like this refusal's: a run whose record might
        // not fit is refused before it does anything (SPEC §10, risky work fails closed).
        audit_rejection(state, &request.caller, &request.action, "audit_low_on_space", &request.args).await?;
        return Err(RunRejection::AuditUnavailable("the disk holding the audit log is full".into()));
    }
    let span = state.telemetry.action_execute(&action);
    let scope = RunScope { audit_id: &audit_id, span: &span, waited: &request.waited, admission: admission.as_ref() };
    let executed = execute_steps(state, &action, &request.args, &request.caller, scope).await;
    match executed {
        Ok((steps, instance)) => {
            let approval = request.approval.as_ref().map(|grant| &grant.entry.id);
            let record = RunRecord {
                action: &action,
                approval,
                policy,
                ending: Ending::Executed { steps: &steps, args: &request.args },
            };
            let appended = submit(state, record.prepared(&request.caller, &audit_id));
            let result = RunResult::Ran { action: action.clone(), steps };
            // The last guest's instance goes back to the pool while the writer syncs the record.
            drop(instance);
            appended.await.map_err(RunRejection::after_steps)?;
            admitted(admission.as_ref()).await?;
            span.end();
            Ok(RunOutcome::Completed { audit_id, result })
        }
        Err(failed) => {
            let approval = request.approval.as_ref().map(|grant| &grant.entry.id);
            let record = RunRecord { action: &action, approval, policy, ending: Ending::Failed(&failed) };
            submit(state, record.prepared(&request.caller, &audit_id)).await.map_err(RunRejection::after_steps)?;
            admitted(admission.as_ref()).await?;
            span.fail(&failed.failure, Some(&audit_id));
            Ok(RunOutcome::Failed(failed.failure.with_audit_id(audit_id)))
        }
    }
}

impl RunRejection {
    /// The same rejection, said of a run whose steps already ran (a failed run's earlier steps too).
    fn after_steps(self) -> RunRejection {
        match self {
            RunRejection::AuditUnavailable(cause) => RunRejection::RanUnaudited(cause),
            other => other,
        }
    }
}

struct StepFailure {
    failure: Failure,
    step_id: String,
    connector: String,
    op: String,
    hash: String,
}

/// What every step of one run shares.
struct RunScope<'a> {
    audit_id: &'a str,
    /// The run's `aileron.action.execute` span: its steps' spans are started under it explicitly
    /// rather than run in it (see [`TracedSpan::context`]).
    span: &'a TracedSpan,
    waited: &'a Arc<UpstreamWait>,
    admission: Option<&'a Admission>,
}

/// Runs the steps in order; the first failure stops the action. The run's output is the last
/// step's.
async fn execute_steps(
    state: &Arc<Services>,
    action: &Arc<ActionFile>,
    args: &Map<String, Value>,
    caller: &Caller,
    scope: RunScope<'_>,
) -> Result<(Vec<StepResult>, Option<Instance>), StepFailure> {
    let RunScope { audit_id, span, waited, admission } = scope;
    let mut outputs: BTreeMap<String, Value> = BTreeMap::new();
    let mut steps = Vec::with_capacity(action.steps.len());
    // The last finished step's instance: released before the next step, else by the caller.
    let mut instance = None;
    let texts = action.run_texts();
    for (index, step) in action.steps.iter().enumerate() {
        drop(instance.take());
        let required = action.connector_of(step);
        let fail = |failure: Failure| StepFailure {
            failure,
            step_id: step.id.clone(),
            connector: step.connector.to_string(),
            op: step.op.clone(),
            hash: required.hash.to_string(),
        };
        let subset = CapabilitySubset::from(required);
        let op_args = step_args(action, index, args, &outputs).map_err(|e| {
            fail(Failure::runtime_error(aileron_core::Boundary::Runtime, format!("step `{}`: {e}", step.id)))
        })?;
        let mut limits = Limits::default();
        if let Some(seconds) = step.timeout_seconds {
            limits.wall_time = Duration::from_secs(u64::from(seconds));
        }
        let call = ConnectorCall {
            action,
            run_span: span.context(),
            required,
            texts: &texts.steps[index],
            subset,
            limits,
            idempotent: step.idempotent,
            waited: waited.clone(),
            admission: admission.cloned(),
        };
        let mut logs = Vec::new();
        let called = call_connector(state, call, op_args, caller, audit_id, &mut logs).await;
        let logs: Vec<GuestLogLine> =
            logs.into_iter().map(|(level, message)| GuestLogLine { level, message }).collect();
        let Called { output, attempts, bindings, instance: held } = match called {
            Ok(called) => called,
            Err(failure) if logs.is_empty() => return Err(fail(failure)),
            Err(failure) => {
                let logs = serde_json::to_value(&logs).expect("log lines serialize");
                return Err(fail(failure.with_detail("logs", logs)));
            }
        };
        // Later steps' templates read earlier outputs; after the last step nothing does.
        if index + 1 < action.steps.len() {
            outputs.insert(step.id.clone(), output.clone());
        }
        steps.push(StepResult {
            index,
            attempts,
            binding: bindings.first().map(|binding| StepBinding {
                identity: binding.identity.clone(),
                kind: binding.kind,
                name: binding.name.clone(),
            }),
            logs,
            output,
        });
        instance = Some(held);
    }
    Ok((steps, instance))
}

/// One connector op call of an action: the pinned connector, the action's subset, the limits.
struct ConnectorCall<'a> {
    action: &'a ActionFile,
    /// The run's span: the parent of the step's spans.
    run_span: &'a opentelemetry::Context,
    required: &'a RequiredConnector,
    /// The connector, the op to call and the connector's hash, as shared texts (a step's are
    /// the action's own).
    texts: &'a StepTexts,
    subset: CapabilitySubset,
    limits: Limits,
    /// The step's override of the manifest's idempotency default.
    idempotent: Option<bool>,
    /// The run's upstream wait (see [`RunRequest::waited`]).
    waited: Arc<UpstreamWait>,
    /// The run's admission record, durable before the call's first effect.
    admission: Option<Admission>,
}

/// Checks `op` against the action's subset (`aileron.capability.check`), then makes the call
/// (`aileron.connector.call`); both spans are children of the run's.
async fn call_connector(
    state: &Arc<Services>,
    call: ConnectorCall<'_>,
    op_args: Map<String, Value>,
    caller: &Caller,
    audit_id: &str,
    logs: &mut Vec<(String, String)>,
) -> Result<Called, Failure> {
    let check = state.telemetry.capability_check(call.run_span, &call.action.run_texts().name, call.texts);
    if let Err(failure) = policy::check_op(&call.subset, &call.texts.op) {
        check.fail(&failure, Some(audit_id));
        return Err(failure);
    }
    check.end();
    let span = state.telemetry.connector_call(call.run_span, call.texts);
    let called = call_verified(state, call, op_args, caller, audit_id, &span, logs).await;
    for (level, message) in logs.iter() {
        span.add_event(
            keys::SPAN_EVENT_CONNECTOR_LOG,
            vec![
                opentelemetry::KeyValue::new(keys::LOG_LEVEL, level.clone()),
                opentelemetry::KeyValue::new(keys::LOG_MESSAGE, message.clone()),
            ],
        );
    }
    match &called {
        Ok(_) => span.end(),
        Err(failure) => span.fail(failure, Some(audit_id)),
    }
    called
}

/// What one connector call produced.
struct Called {
    output: Value,
    attempts: usize,
    /// The credential bindings its requests used (for the audit record; never secret bytes).
    bindings: Vec<crate::stores::bindings::BindingInfo>,
    /// The call's instance, still holding its pooled slot (see [`Instance`]).
    instance: Instance,
}

/// The connector's module from the runtime's memory cache, else its disk cache, else compiled
/// (on a blocking thread: a 7 MB Go guest takes seconds of CPU), checked against the imports
/// its manifest grants.
async fn load_module(
    state: &Services,
    hash: &aileron_core::ContentHash,
    connector: &crate::stores::store::VerifiedConnector,
) -> Result<Arc<aileron_sandbox::LoadedModule>, Failure> {
    let import_policy =
        ImportPolicy { allowed_host_imports: connector.manifest.runtime_imports().map(|imports| imports.to_vec()) };
    if let Some(loaded) = state.sandbox.runtime().loaded(hash, &import_policy) {
        return loaded;
    }
    if connector.wasm.is_empty() {
        return Err(Failure::capability_denied(
            aileron_core::Boundary::Runtime,
            format!(
                "{} has no module to run: it is a spec-only connector, whose [[proxy.operations]] credential a \
                 launched agent's own requests",
                connector.manifest.reference()
            ),
        )
        .with_detail(
            "hint",
            "pin a connector with a connector.wasm in the action, or use this one through `aileron launch`",
        ));
    }
    let (runtime, hash, wasm) = (state.sandbox.runtime().clone(), hash.clone(), connector.wasm.clone());
    tokio::task::spawn_blocking(move || runtime.load(&hash, &wasm, &import_policy))
        .await
        .map_err(|e| Failure::runtime_error(aileron_core::Boundary::Runtime, format!("loading the module: {e}")))?
}

/// What compiling a connector at install time cost, for the install answer.
#[derive(Debug, Clone, Copy)]
pub struct Precompiled {
    pub elapsed: Duration,
    /// Size of the compiled artifact in the on-disk cache (`None` when it could not be written).
    pub artifact_bytes: Option<u64>,
}

/// Compiles an installed connector (verified against its content hash first, as every run is)
/// into the runtime's memory and disk caches, so that its first run deserializes nothing and
/// compiles nothing: install pays the seconds a large Go guest takes, not the agent's first
/// call. Returns the compile failure a run would report, if any.
///
/// The compiled artifact, when the disk cache has one, is deserialized on one blocking thread
/// while the module's bytes are verified on another (a daemon's warm-up after a restart: an
/// 8 MB Go guest's verification is 8 of its ~50 ms); it is used only once they verify.
pub async fn precompile(state: &Services, hash: &aileron_core::ContentHash) -> Result<Precompiled, Failure> {
    let started = std::time::Instant::now();
    let preloaded = {
        let (runtime, hash) = (state.sandbox.runtime().clone(), hash.clone());
        tokio::task::spawn_blocking(move || runtime.preload(&hash))
    };
    let verified = verified(state, hash).await;
    // Done before the module is looked up, so a slot being filled is never taken for a miss.
    let _ = preloaded.await;
    let connector = verified.inspect_err(|_| {
        // Bytes that no longer hash to `hash` leave no module of theirs in memory.
        state.sandbox.runtime().forget(hash);
    })?;
    if connector.wasm.is_empty() {
        // Spec-only: nothing to compile.
        return Ok(Precompiled { elapsed: started.elapsed(), artifact_bytes: None });
    }
    load_module(state, hash, &connector).await?;
    Ok(Precompiled { elapsed: started.elapsed(), artifact_bytes: state.sandbox.artifact_bytes(hash) })
}

/// The connector pinned by `hash`, verified against it ([`crate::stores::store::Store::load_verified`]):
/// two `statx` inline when its files are unchanged since the last verification, else read and
/// hashed on a blocking thread (an 8 MB Go guest takes 8 ms, which would stall an async worker).
async fn verified(
    state: &Services,
    hash: &aileron_core::ContentHash,
) -> Result<crate::stores::store::VerifiedConnector, Failure> {
    if let Some(connector) = state.store.verified_unchanged(hash) {
        return Ok(connector);
    }
    let (store, hash) = (state.store.clone(), hash.clone());
    tokio::task::spawn_blocking(move || store.load_verified(&hash))
        .await
        .map_err(|e| Failure::runtime_error(aileron_core::Boundary::Runtime, format!("verifying the module: {e}")))?
}

/// Verifies and loads the pinned connector, then calls `op` in the sandbox with the egress hook,
/// retrying per SPEC §9. `span` is the call's (the parent of the programs it spawns).
async fn call_verified(
    state: &Arc<Services>,
    call: ConnectorCall<'_>,
    op_args: Map<String, Value>,
    caller: &Caller,
    audit_id: &str,
    span: &TracedSpan,
    logs: &mut Vec<(String, String)>,
) -> Result<Called, Failure> {
    let ConnectorCall { action, run_span: _, required, texts, subset, limits, idempotent, waited, admission } = call;
    let connector = verified(state, &required.hash).await?;
    let manifest = connector.manifest.clone();
    check_identity(&manifest, required)?;
    let module = load_module(state, &required.hash, &connector).await?;
    let idempotent = idempotent.unwrap_or_else(|| manifest.is_idempotent());
    let egress = Arc::new(StepEgress {
        services: state.egress_services(),
        manifest: manifest.clone(),
        subset,
        connector_fqn: texts.connector.clone(),
        op: texts.op.clone(),
        action: action.run_texts().name.clone(),
        caller: caller.clone(),
        audit_id: audit_id.to_string(),
        span: span.context().clone(),
        used_bindings: std::sync::Mutex::new(Vec::new()),
        waited: waited.clone(),
        admission,
    });
    let mut attempt = 0;
    // Built once: every attempt (a retry too) sends the same request.
    let request = CallRequest { op: texts.op.to_string(), args: Value::Object(op_args), limits };
    loop {
        let (outcome, instance) = state.sandbox.runtime().call_holding(&module, &request, egress.clone()).await;
        // The guest's log lines, bounded and escaped: they reach the audit record, the span and
        // `aileron action run --verbose`.
        for line in outcome.logs {
            if logs.len() < MAX_LOG_LINES_PER_STEP {
                logs.push((visible(&line.level, 16), visible(&line.message, MAX_LOG_LINE_CHARS)));
            }
        }
        match outcome.result {
            Ok(output) => {
                let bindings = std::mem::take(&mut *egress.used_bindings.lock().expect("used bindings poisoned"));
                return Ok(Called { output, attempts: attempt + 1, bindings, instance });
            }
            Err(failure) if should_retry(&failure, idempotent, attempt) => {
                drop(instance);
                waited.during(tokio::time::sleep(jittered(state.retry_delays[attempt]))).await;
                attempt += 1;
            }
            Err(failure) => return Err(failure),
        }
    }
}

/// Registers a pending approval for a gated action (preview evaluated first, at most 5 s),
/// journals it, audits `approval.requested`, and answers at once. Nothing executes.
async fn request_approval(
    state: &Arc<Services>,
    action: &Arc<ActionFile>,
    request: RunRequest,
    policy_reasons: Option<Vec<String>>,
) -> Result<RunOutcome, RunRejection> {
    let size = serde_json::to_vec(&request.args).map(|bytes| bytes.len()).unwrap_or(usize::MAX);
    if size > MAX_APPROVAL_ARGS_BYTES {
        audit_rejection(state, &request.caller, &action.name, "args_too_large", &request.args).await?;
        return Err(RunRejection::ArgsTooLarge(size));
    }
    // A first, cheap check, so a repeat or a capped session costs no preview; `register` decides
    // again under the queue lock, since concurrent requests all pass this one.
    let admission = AdmissionRequest {
        session_id: request.caller.session_id.as_deref(),
        action: &action.name,
        args: &request.args,
        identity: None,
    };
    match state.approvals.admission(admission) {
        Ok(None) => {}
        Ok(Some(existing)) => return answer_repeat(state, &request.caller, &existing).await,
        Err(error) => return reject_registration(state, action, &request, error).await,
    }
    let requested_at = approvals::now();
    let id = approvals::mint_id(&requested_at);
    let preview = match &action.approval.preview {
        Some(preview) => Some(evaluate_preview(state, action, preview, &request.args, &request.caller).await),
        None => None,
    };
    let entry = ApprovalEntry::pending(ApprovalRequest {
        id,
        action,
        args: request.args.clone(),
        preview,
        requested_at,
        session_id: request.caller.session_id.clone(),
        unconfined: request.caller.unconfined,
        policy_reason: policy_reasons.map(|reasons| reasons.join("; ")),
    });
    match state.approvals.register(entry.clone()) {
        Ok(approvals::Registered::New) => {}
        Ok(approvals::Registered::Repeat(existing)) => return answer_repeat(state, &request.caller, &existing).await,
        Err(error) => return reject_registration(state, action, &request, error).await,
    }
    state.telemetry.remember_approval(&entry.id);
    let audit_id = mint_audit_id();
    append(state, EventType::ApprovalRequested, &request.caller, requested_payload(&entry), &audit_id).await?;
    let review_url = review_url(&state.base_url(), &entry.id);
    Ok(RunOutcome::PendingApproval(PendingApproval::new(&entry, review_url, audit_id)))
}

/// The same call again while it waits: the agent gets the approval it already has.
async fn answer_repeat(
    state: &Arc<Services>,
    caller: &Caller,
    existing: &ApprovalEntry,
) -> Result<RunOutcome, RunRejection> {
    let audit_id = mint_audit_id();
    let mut payload = requested_payload(existing);
    payload.insert(keys::APPROVAL_DUPLICATE.into(), true.into());
    append(state, EventType::ApprovalRepeated, caller, payload, &audit_id).await?;
    let review_url = review_url(&state.base_url(), &existing.id);
    Ok(RunOutcome::PendingApproval(PendingApproval::new(existing, review_url, audit_id)))
}

/// A registration the queue refused: the session's cap (audited as a rejection), or the journal.
async fn reject_registration(
    state: &Arc<Services>,
    action: &ActionFile,
    request: &RunRequest,
    error: approvals::QueueError,
) -> Result<RunOutcome, RunRejection> {
    match error {
        approvals::QueueError::TooManyPending(waiting) => {
            audit_rejection(state, &request.caller, &action.name, "too_many_pending", &request.args).await?;
            Err(RunRejection::TooManyPending(waiting))
        }
        error => Err(RunRejection::JournalUnavailable(error.to_string())),
    }
}

/// The action's preview with `args` (`None` when it declares none): what an approver sees again
/// after editing the arguments.
pub async fn preview_for(
    state: &Arc<Services>,
    action: &ActionFile,
    args: &Map<String, Value>,
    caller: &Caller,
) -> Option<ApprovalPreview> {
    let preview = action.approval.preview.as_ref()?;
    Some(evaluate_preview(state, action, preview, args, caller).await)
}

/// The preview op on the first step's connector, read-only, at most 5 s; a failure never blocks.
async fn evaluate_preview(
    state: &Arc<Services>,
    action: &ActionFile,
    preview: &Preview,
    args: &Map<String, Value>,
    caller: &Caller,
) -> ApprovalPreview {
    let Some(first) = action.steps.first() else { return ApprovalPreview::unavailable("the action has no steps") };
    let Some(required) = action.required_connector(&first.connector) else {
        return ApprovalPreview::unavailable("the first step's connector is not declared");
    };
    let preview_args = match template::preview_args(action, args) {
        Some(Ok(preview_args)) => preview_args,
        Some(Err(error)) => return ApprovalPreview::unavailable(error.to_string()),
        None => return ApprovalPreview::unavailable("the action declares no preview"),
    };
    let limits = Limits { wall_time: PREVIEW_TIME_LIMIT, ..Limits::default() };
    // The first step's connector, with the preview's op.
    let first_texts = &action.run_texts().steps[0];
    let texts = StepTexts {
        connector: first_texts.connector.clone(),
        op: preview.op.as_str().into(),
        hash: first_texts.hash.clone(),
    };
    // The preview's spans are children of the request's, as its approval's are.
    let parent = opentelemetry::Context::current();
    let call = ConnectorCall {
        action,
        run_span: &parent,
        required,
        texts: &texts,
        subset: CapabilitySubset::from(required),
        limits,
        idempotent: Some(false),
        waited: Arc::default(),
        // A preview is not a run: the rules have not counted it.
        admission: None,
    };
    let audit_id = mint_audit_id();
    let mut logs = Vec::new();
    let called = tokio::time::timeout(
        PREVIEW_TIME_LIMIT,
        call_connector(state, call, preview_args, caller, &audit_id, &mut logs),
    );
    match called.await {
        Ok(Ok(called)) => render_preview(preview, &called.output),
        Ok(Err(failure)) => ApprovalPreview::unavailable(format!("{}: {}", failure.class, failure.message)),
        Err(_) => ApprovalPreview::unavailable("the preview took longer than 5 s"),
    }
}

/// Executes an approved entry exactly once: `started` is journaled (fsync) before the run, the
/// outcome after it. Called by the decide handler and, at start-up, for entries to resume.
pub async fn execute_approved(state: Arc<Services>, id: ApprovalId) {
    // An `http_request` approval is a permit the proxy uses; there is no action to run.
    if state.approvals.get(&id).is_some_and(|entry| entry.kind != aileron_core::approval::ApprovalKind::Action) {
        return;
    }
    if needs_the_locked_vault(&state, &id) {
        // SPEC §8: approved → awaiting_vault; `resume_awaiting_vault` runs it once on unlock.
        state.approvals.await_vault(&id);
        if state.vault.state() == crate::stores::vault::VaultState::Locked {
            return;
        }
        // Unlocked between the check and the journal entry: go on now (`start` is exactly-once).
    }
    let Some(entry) = state.approvals.start(&id) else {
        return; // not approved, or another task already started it
    };
    let caller = match &entry.session_id {
        Some(session) => {
            let mut caller = Caller::new(ActorType::Agent, session.clone());
            caller.session_id = Some(session.clone());
            caller
        }
        None => Caller::new(ActorType::Service, format!("approval:{id}")),
    };
    let request = RunRequest {
        action: entry.action.clone(),
        // The approver's edit when there was one (SPEC §8), else what was asked.
        args: entry.run_args().clone(),
        caller: caller.clone(),
        approval: Some(ApprovalGrant { entry }),
        waited: Arc::default(),
    };
    let outcome = match run_action(&state, request).await {
        Ok(RunOutcome::Completed { audit_id, result }) => Outcome::Completed { audit_id, result: result.into_value() },
        Ok(RunOutcome::Failed(failure)) => Outcome::Failed { failure },
        Ok(RunOutcome::PendingApproval(_)) => unreachable!("a granted run never asks for approval again"),
        Err(rejection) => {
            // The action was removed, disabled or changed since the request: record why. (Or it
            // ran and its record could not be written: said as such, never as "could not run".)
            let audit_id = mint_audit_id();
            let failure = match rejection {
                RunRejection::RanUnaudited(cause) => approvals::not_runnable(format!(
                    "the approved action ran, but its audit record could not be written: {cause}"
                )),
                _ => approvals::not_runnable(format!("approved action could not run: {rejection}")),
            };
            let mut payload = failure.audit_payload();
            payload.insert(keys::APPROVAL_ID.into(), id.to_string().into());
            let _ = append(&state, EventType::ExecutionFailed, &caller, payload, &audit_id).await;
            Outcome::Failed { failure: failure.with_audit_id(audit_id) }
        }
    };
    if let Err(error) = state.approvals.finish(&id, outcome) {
        log_line!("aileron daemon: recording the outcome of approval {id}: {error}");
    }
}

/// Audits a call refused before anything ran (SPEC §10): an agent probing for actions, or
/// sending arguments the action does not take, is exactly what the log must show. Argument
/// names only, never values. If the log cannot be written the call fails closed.
pub async fn audit_rejection(
    state: &Services,
    caller: &Caller,
    action: &str,
    code: &str,
    args: &Map<String, Value>,
) -> Result<(), RunRejection> {
    let mut payload = Map::new();
    payload.insert(keys::ACTION_NAME.into(), action.chars().take(200).collect::<String>().into());
    payload.insert(keys::REJECTION_CODE.into(), code.into());
    payload.insert(
        keys::ACTION_ARG_NAMES.into(),
        json!(args.keys().map(|k| k.chars().take(100).collect::<String>()).collect::<Vec<_>>()),
    );
    append(state, EventType::ActionRejected, caller, payload, &mint_audit_id()).await
}

/// Runs, once each, the approved entries that waited for the vault. Called after an unlock.
pub fn resume_awaiting_vault(state: &Arc<Services>) {
    for id in state.approvals.awaiting_vault() {
        tokio::spawn(execute_approved(state.clone(), id));
    }
}

/// Whether an approved entry's action uses a credential while the vault exists and is locked
/// (an absent vault is not waited for: the run fails `binding_required` with the setup command).
fn needs_the_locked_vault(state: &Services, id: &ApprovalId) -> bool {
    if state.vault.state() != crate::stores::vault::VaultState::Locked {
        return false;
    }
    let Some(entry) = state.approvals.get(id) else { return false };
    let Some(installed) = state.actions.get(&entry.action) else { return false };
    installed.file.requires.iter().any(|required| CapabilitySubset::from(required).credential_kinds().next().is_some())
}

/// Audits an entry that was running when the daemon died: `execution.failed`, with the
/// recovery explanation. It is never re-run (its side effects may have happened).
pub async fn audit_recovered(state: Arc<Services>, id: ApprovalId) {
    let Some(entry) = state.approvals.get(&id) else { return };
    let failure = entry.failure.clone().unwrap_or_else(|| approvals::not_runnable("interrupted by a daemon restart"));
    let mut payload = failure.audit_payload();
    payload.insert(keys::APPROVAL_ID.into(), id.to_string().into());
    payload.insert(keys::ACTION_NAME.into(), entry.action.clone().into());
    let caller = Caller::new(ActorType::Service, "daemon-restart");
    if let Err(error) = append(&state, EventType::ExecutionFailed, &caller, payload, &mint_audit_id()).await {
        log_line!("aileron daemon: auditing the recovery of approval {id}: {error}");
    }
}

/// Guest log lines kept per step, and characters per line (the sandbox's own byte budget caps
/// what a guest can emit; these bound what every audit record and response carries).
const MAX_LOG_LINES_PER_STEP: usize = 20;
const MAX_LOG_LINE_CHARS: usize = 300;

/// Preview ops are bounded to 5 s (SPEC §2).
pub const PREVIEW_TIME_LIMIT: Duration = Duration::from_secs(5);

/// The stored manifest must be the connector the action pinned (name and version), not just
/// any bytes with the right hash — the hash covers the manifest, so this guards our own index.
fn check_identity(manifest: &ConnectorManifest, required: &RequiredConnector) -> Result<(), Failure> {
    if manifest.name != required.name || manifest.version != required.version {
        return Err(Failure::hash_mismatch(format!(
            "store entry {} holds {}@{}, but the action requires {}@{}",
            required.hash, manifest.name, manifest.version, required.name, required.version
        )));
    }
    Ok(())
}

/// Only an idempotent step's retriable network or upstream failure, and only while retries remain.
fn should_retry(failure: &Failure, idempotent: bool, attempt: usize) -> bool {
    idempotent
        && attempt < RETRY_DELAYS.len()
        && failure.retriable
        && matches!(failure.class, FailureClass::NetworkError | FailureClass::ExternalApiError)
}

fn jittered(delay: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    // ±25 %: 0.75 + (0..=255)/512.
    delay.mul_f64(0.75 + f64::from(byte[0]) / 512.0)
}

/// The run's admission record (when the rules count runs), durable by the time the run's own
/// record is: one that never became durable fails the run closed, though nothing of it left.
async fn admitted(admission: Option<&Admission>) -> Result<(), RunRejection> {
    Admission::recorded(admission).await.map_err(RunRejection::AuditUnavailable)
}

async fn append(
    state: &Services,
    event_type: EventType,
    caller: &Caller,
    payload: Map<String, Value>,
    audit_id: &str,
) -> Result<(), RunRejection> {
    submit(state, prepared(event_type, caller, &payload, audit_id)).await
}

/// Hands `record` to the writer before the returned future is first polled; it resolves once
/// the record is durable.
fn submit(state: &Services, record: PreparedRecord) -> impl Future<Output = Result<(), RunRejection>> + use<> {
    let appending = state.audit.submit(record);
    async move { appending.await.map(|_| ()).map_err(|e| RunRejection::AuditUnavailable(e.to_string())) }
}

/// Executes, once each, the approved entries the journal held at start-up, and audits the
/// entries that were running when the daemon died (failed, never re-run).
/// Loads, in the background and one at a time, the connectors the enabled actions pin: each
/// verified against its content hash and taken from the compiled cache (or compiled, after an
/// engine upgrade or an emptied cache) into memory, so that an agent's first call after a
/// daemon restart neither hashes, reads nor deserializes tens of MB. Connectors no enabled
/// action uses are left on disk: memory holds what can run. A connector that fails to load is
/// left for its first run to report. Returns the task, which ends when every module is loaded.
pub fn warm_up(services: &Arc<Services>) -> tokio::task::JoinHandle<()> {
    let services = services.clone();
    tokio::spawn(async move {
        let (actions, _) = services.actions.list();
        let mut pinned: Vec<aileron_core::ContentHash> = actions
            .iter()
            .filter(|action| action.enabled)
            .flat_map(|action| action.file.requires.iter().map(|connector| connector.hash.clone()))
            .collect();
        pinned.sort();
        pinned.dedup();
        for hash in pinned {
            let _ = precompile(&services, &hash).await;
        }
        services.modules_warm.store(true, std::sync::atomic::Ordering::Release);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_caught_with_its_message() {
        assert_eq!(caught(async { 7 }).await, Ok(7));
        let panicked = caught(async {
            if std::hint::black_box(true) {
                panic!("size overflows {}", "MAX_SIZE");
            }
        })
        .await;
        assert_eq!(panicked, Err("size overflows MAX_SIZE".to_string()));
    }

    fn returned<A, B, C, D, E, G, H, R>(_: &impl FnOnce(A, B, C, D, E, G, H) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A run's future does not hold the approval path inline. Held inline, it was larger than
    /// registering an approval and running the steps together (the future is the largest of its
    /// paths, and each request's is copied whole into the route's box).
    #[test]
    fn a_runs_future_does_not_carry_the_approval_path() {
        type Ref<T> = &'static T;
        let run = |state: Ref<Arc<Services>>, request: RunRequest, _: (), _: (), _: (), _: (), _: ()| {
            run_action(state, request)
        };
        let approval =
            |state: Ref<Arc<Services>>, action: Ref<Arc<ActionFile>>, request, reasons, _: (), _: (), _: ()| {
                request_approval(state, action, request, reasons)
            };
        let steps = |state: Ref<Arc<Services>>,
                     action: Ref<Arc<ActionFile>>,
                     args: Ref<Map<String, Value>>,
                     caller: Ref<Caller>,
                     scope: RunScope<'static>,
                     _: (),
                     _: ()| { execute_steps(state, action, args, caller, scope) };
        let (run, approval, steps) = (returned(&run), returned(&approval), returned(&steps));
        assert!(
            run < approval + steps,
            "a run's future is {run} bytes; registering an approval {approval}, running the steps {steps}"
        );
        // And it holds the run by a pointer: inline, each request's handler future (8 KB) was
        // copied whole into the route's box (stop 102: 7,800 instructions of `memcpy` a run).
        assert!(run < 512, "a run's future is {run} bytes; the steps' {steps}");
    }
}
