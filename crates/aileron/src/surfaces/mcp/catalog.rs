//! The tool catalog and what tool calls answer, as pure functions of the daemon's JSON: one tool
//! per enabled action (SPEC §2: name, description, `inputSchema`), the two built-in tools, and the
//! shaping of `POST /v1/actions/{name}/run` and approval-result answers into MCP tool results.
//!
//! Invariant: no tool here decides an approval. The built-ins read (`check_action_status` polls
//! the result, `aileron_diagnostics` reads health and the action list) or withdraw the agent's own
//! pending approval (`cancel_action`: withdrawing is not deciding, and nothing runs).

use crate::wire::RunAnswer;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use aileron_core::approval::{ApprovalState, ResultView};
use aileron_core::failure::{Failure, FailureClass};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::wire::{ActionList, ActionView};

/// Polls the outcome of a gated call.
pub const CHECK_ACTION_STATUS: &str = "check_action_status";
/// Withdraws a pending approval the agent no longer needs (SPEC §8).
pub const CANCEL_ACTION: &str = "cancel_action";
/// Reports whether the daemon is reachable and the catalog complete, with a remediation line.
pub const DIAGNOSTICS: &str = "aileron_diagnostics";

/// Appended to the description of every gated action's tool (SPEC §2).
pub const APPROVAL_PARAGRAPH: &str = "This action needs the user's approval before it runs. Calling it \
does not run it: the call returns status `pending_approval` with an `approval_id` and a message for the user. \
Relay that message to the user verbatim, then call `check_action_status` with the `approval_id` to learn \
whether it completed, was denied or failed. Do not call this tool again for the same request: every call \
asks the user for another approval.";

/// The tools derived from one `GET /v1/actions` answer.
#[derive(Debug, Clone, Default)]
pub struct ToolCatalog {
    /// Action tools in name order, then the built-ins.
    pub tools: Vec<Tool>,
    /// tool name → action name (tool names map `-` and `.` to `_`, so the reverse needs a table).
    actions: HashMap<String, String>,
    /// Enabled actions left out because another tool already has their tool name.
    pub shadowed: Vec<Shadowed>,
    /// Action files the daemon could not load: `(file, message)`.
    pub load_errors: Vec<(String, String)>,
    /// Installed actions that are disabled (not tools).
    pub disabled: usize,
}

/// An action whose tool name collides with an earlier tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    pub action: String,
    pub tool: String,
    /// The action (or built-in tool) that keeps the name.
    pub kept_by: String,
}

impl ToolCatalog {
    /// Only the built-ins: what an agent sees when the daemon cannot be reached, so that
    /// `aileron_diagnostics` can tell it why.
    pub fn builtins_only() -> ToolCatalog {
        ToolCatalog { tools: builtin_tools(), ..ToolCatalog::default() }
    }

    /// Builds the catalog from `GET /v1/actions`. Built-in names win a collision; between
    /// actions the first in name order wins.
    pub fn from_listing(listing: ActionList) -> ToolCatalog {
        let mut catalog = ToolCatalog::default();
        let mut owners: HashMap<String, String> = [CHECK_ACTION_STATUS, CANCEL_ACTION, DIAGNOSTICS]
            .iter()
            .map(|name| (name.to_string(), format!("built-in {name}")))
            .collect();
        let ActionList { mut items, load_errors } = listing;
        items.sort_by(|a, b| a.name.cmp(&b.name));
        for item in items {
            let (action, tool_name) = (item.name.as_str(), item.tool_name.as_str());
            if !item.enabled {
                catalog.disabled += 1;
                continue;
            }
            if let Some(owner) = owners.get(tool_name) {
                catalog.shadowed.push(Shadowed {
                    action: action.to_string(),
                    tool: tool_name.to_string(),
                    kept_by: owner.clone(),
                });
                continue;
            }
            owners.insert(tool_name.to_string(), format!("action {action}"));
            catalog.actions.insert(tool_name.to_string(), action.to_string());
            catalog.tools.push(action_tool(item));
        }
        catalog.tools.extend(builtin_tools());
        catalog.load_errors = load_errors.into_iter().map(|e| (e.file, e.message)).collect();
        catalog
    }

    /// The action a tool runs.
    pub fn action_for(&self, tool: &str) -> Option<&str> {
        self.actions.get(tool).map(String::as_str)
    }

    /// Number of action tools (built-ins excluded).
    pub fn action_count(&self) -> usize {
        self.actions.len()
    }
}

/// The tool for one action of `GET /v1/actions`.
fn action_tool(view: ActionView) -> Tool {
    let mut description = view.description;
    if view.requires_approval {
        description = format!("{}\n\n{APPROVAL_PARAGRAPH}", description.trim_end());
    }
    let schema = match view.input_schema {
        Value::Object(schema) => schema,
        _ => schema_object(json!({ "type": "object", "properties": {} })),
    };
    Tool::new(Cow::Owned(view.tool_name), description, Arc::new(schema))
}

fn schema_object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("schemas are written as objects"),
    }
}

/// `check_action_status` and `aileron_diagnostics`, which only read and say so, and
/// `cancel_action`, which withdraws (never approves).
pub fn builtin_tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false);
    let status_schema = schema_object(json!({
        "type": "object",
        "properties": {
            "approval_id": {
                "type": "string",
                "description": "the approval_id a gated action's call returned (act-...)"
            }
        },
        "required": ["approval_id"],
        "additionalProperties": false,
    }));
    let diagnostics_schema =
        schema_object(json!({ "type": "object", "properties": {}, "additionalProperties": false }));
    let status_schema = Arc::new(status_schema);
    vec![
        Tool::new(
            CHECK_ACTION_STATUS,
            "Reports the outcome of an action that was waiting for the user's approval: still pending, \
             running, completed (with its result), denied (with the user's reason) or failed (with the \
             failure). Call it with the approval_id the action's call returned. It never approves or denies.",
            status_schema.clone(),
        )
        .annotate(read_only.clone()),
        Tool::new(
            CANCEL_ACTION,
            "Withdraws an action that is still waiting for the user's approval, when it is no longer wanted \
             (the plan changed, or it was asked for by mistake): it will not run and the user no longer sees it \
             waiting. Call it with the approval_id the action's call returned. It never approves anything.",
            status_schema,
        )
        .annotate(ToolAnnotations::new().read_only(false).destructive(false).idempotent(true).open_world(false)),
        Tool::new(
            DIAGNOSTICS,
            "Checks Aileron itself: whether its daemon answers and whether every installed action loaded. \
             Answers `healthy` or `degraded` with one line saying what to do.",
            Arc::new(diagnostics_schema),
        )
        .annotate(read_only),
    ]
}

/// A daemon answer that did not come, and what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    pub message: String,
}

fn text(value: impl Into<String>) -> ContentBlock {
    ContentBlock::text(value)
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).expect("JSON values serialize")
}

/// The tool result of a run: completed → the result with its audit id; pending → a normal result
/// whose first block is the daemon's message verbatim; a failure or a refusal → an error result
/// carrying the failure envelope (or CRUD error body) exactly as the HTTP API sends it.
///
/// Only a completed run also carries `structuredContent` (the same JSON as its text, as the spec
/// asks for structured results). The pending message and approval statuses are text only: a
/// client that sees structured content may show the model that instead of the text (Claude Code
/// does), which would turn the message the user must read into a JSON field.
pub fn run_result(answer: RunAnswer) -> CallToolResult {
    match answer {
        RunAnswer::Completed(completed) => {
            let body = completed.into_reply().body;
            let mut result = CallToolResult::success(vec![text(compact(&body))]);
            result.structured_content = Some(body);
            result
        }
        RunAnswer::Pending(pending) => {
            let handle = json!({
                "status": pending.status,
                "approval_id": pending.approval_id,
                "review_url": pending.review_url,
            });
            CallToolResult::success(vec![text(pending.message), text(compact(&handle))])
        }
        RunAnswer::Failed(failure) => CallToolResult::error(vec![text(compact(&failure.envelope()))]),
        RunAnswer::Refused(reply) => {
            CallToolResult::error(vec![text(compact(&error_body(reply.status.as_u16(), reply.body)))])
        }
    }
}

/// A non-JSON error answer still reaches the agent as an error object.
fn error_body(status: u16, body: Value) -> Value {
    if body["error"].is_object() {
        body
    } else {
        json!({ "error": { "code": "http_status", "message": format!("the daemon answered HTTP {status}"), "body": body } })
    }
}

/// The tool result of an unreachable daemon.
pub fn unreachable_result(unreachable: &Unreachable) -> CallToolResult {
    CallToolResult::error(vec![text(unreachable.message.clone())])
}

/// An approval id as the daemon mints it (`act-<timestamp>-<hex>`); anything else is refused
/// before it reaches a URL path.
pub fn is_plausible_approval_id(id: &str) -> bool {
    id.starts_with("act-") && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// How often a Tasks client is asked to poll a waiting approval (a human decides in seconds to
/// minutes).
pub const TASK_POLL_INTERVAL_MS: u64 = 2000;

/// The task a gated call answers with for a client that declared Tasks (SEP-2663): its id is
/// the approval's, `working` while it waits, the pending message as its status message.
pub fn task_created(pending: &aileron_core::approval::PendingApproval) -> rmcp::model::CreateTaskResult {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let task = rmcp::model::Task::new(pending.approval_id.as_str(), rmcp::model::TaskStatus::Working, now.clone(), now)
        .with_status_message(pending.message.clone())
        .with_poll_interval_ms(TASK_POLL_INTERVAL_MS);
    rmcp::model::CreateTaskResult::new(task)
}

/// `tasks/get` for the approval `id` whose result view is `body`: waiting, approved or running
/// → `working` (the status sentence as its message); completed, denied, or failed with an error
/// the tool reported → `completed` with the tool result the call would have had (the failure as
/// an error result, as a direct call answers); failed because the run itself broke → `failed`
/// with a JSON-RPC error (SEP-2663 reserves `failed` for that; see [`tool_reported`]); expired or
/// withdrawn → `cancelled`. `None` when `body` is no result view.
pub fn task_of(id: &str, body: &Value) -> Option<rmcp::model::GetTaskResult> {
    use rmcp::model::{DetailedTask, GetTaskResult, Task, TaskPayload, TaskStatus};
    let view: ResultView = serde_json::from_value(body.clone()).ok()?;
    let (sentence, _) = status_text(id, &view);
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let payload = match view.status {
        ApprovalState::PendingApproval
        | ApprovalState::Approved
        | ApprovalState::AwaitingVault
        | ApprovalState::Running => TaskPayload::Working,
        ApprovalState::Failed if !view.failure.as_ref().is_some_and(tool_reported) => {
            let failure = view.failure.as_ref().map(Failure::envelope).unwrap_or(Value::Null);
            let error = ErrorData::internal_error(sentence.clone(), Some(failure));
            let Value::Object(error) = serde_json::to_value(error).ok()? else { return None };
            TaskPayload::Failed { error }
        }
        ApprovalState::Completed | ApprovalState::Denied | ApprovalState::Failed => {
            let result = status_result(id, 200, body.clone());
            let Value::Object(result) = serde_json::to_value(result).ok()? else { return None };
            TaskPayload::Completed { result }
        }
        ApprovalState::Expired | ApprovalState::Cancelled => TaskPayload::Cancelled,
    };
    let task = Task::new(id, TaskStatus::Working, now.clone(), now)
        .with_status_message(sentence)
        .with_poll_interval_ms(TASK_POLL_INTERVAL_MS);
    Some(GetTaskResult::new(DetailedTask::new(task, payload)))
}

/// Whether `failure` is an error the tool reported about its work — the external API's or the
/// network's answer, a refusal the agent can act on (a capability, a binding), or an error the
/// connector itself printed (`connector_class`) — rather than the run breaking: a connector that
/// trapped, exited or printed garbage, a limit, a tampered or unsigned module, no sandbox.
pub fn tool_reported(failure: &Failure) -> bool {
    match failure.class {
        FailureClass::ExternalApiError
        | FailureClass::NetworkError
        | FailureClass::CapabilityDenied
        | FailureClass::BindingRequired
        | FailureClass::BindingFailed
        | FailureClass::PolicyDenied => true,
        FailureClass::ConnectorRuntimeError => failure.details.contains_key("connector_class"),
        FailureClass::ResourceLimitExceeded
        | FailureClass::HashMismatch
        | FailureClass::SignatureFailure
        | FailureClass::SpawnSandboxUnavailable => false,
    }
}

/// The tool result of `POST /v1/action-approvals/{id}/cancel`.
pub fn cancel_result(id: &str, status: u16, body: Value) -> CallToolResult {
    if status == 204 {
        return CallToolResult::success(vec![text(format!(
            "cancelled: approval {id} is withdrawn; the action will not run and the user no longer sees it waiting."
        ))]);
    }
    CallToolResult::error(vec![text(compact(&error_body(status, body)))])
}

/// The tool result of `GET /v1/action-approvals/{id}/result`, in plain text.
pub fn status_result(id: &str, status: u16, body: Value) -> CallToolResult {
    if status != 200 {
        return CallToolResult::error(vec![text(compact(&error_body(status, body)))]);
    }
    let view: ResultView = match serde_json::from_value(body.clone()) {
        Ok(view) => view,
        Err(error) => {
            return CallToolResult::error(vec![text(format!(
                "unexpected approval result from the daemon ({error}): {}",
                compact(&body)
            ))]);
        }
    };
    let (line, is_error) = status_text(id, &view);
    let mut content = vec![text(line)];
    if let Some(result) = &view.result {
        content.push(text(compact(&json!({ "audit_id": view.audit_id, "result": result }))));
    }
    if let Some(failure) = &view.failure {
        content.push(text(compact(&json!({ "error": failure }))));
    }
    if is_error { CallToolResult::error(content) } else { CallToolResult::success(content) }
}

/// One sentence per state; failed is an error result (like a failed direct call), denied is not
/// (the user decided, nothing went wrong).
fn status_text(id: &str, view: &ResultView) -> (String, bool) {
    match view.status {
        ApprovalState::PendingApproval => (
            format!(
                "pending_approval: approval {id} is still waiting for the user. Ask them to review it \
                 (`aileron open approval {id}`), then check again; do not call the action again."
            ),
            false,
        ),
        ApprovalState::Approved => {
            (format!("approved: the user approved {id}; it is about to run. Check again shortly."), false)
        }
        ApprovalState::AwaitingVault => (
            format!(
                "awaiting_vault: {id} is approved but waits for the vault to be unlocked (`aileron vault unlock`)."
            ),
            false,
        ),
        ApprovalState::Running => {
            (format!("running: {id} was approved and is running now. Check again shortly."), false)
        }
        ApprovalState::Completed => {
            let audit = view.audit_id.as_deref().map(|a| format!(" (audit {a})")).unwrap_or_default();
            let edited = view
                .edited_args
                .as_ref()
                .map(|args| {
                    format!(
                        " The user edited the arguments before approving; it ran with {} instead of what you asked.",
                        compact(&Value::Object(args.clone()))
                    )
                })
                .unwrap_or_default();
            (format!("completed: {id} ran{audit}.{edited} Its result follows."), false)
        }
        ApprovalState::Denied => {
            let reason = view
                .reason
                .as_deref()
                .map(|r| format!(" Reason: {r}"))
                .unwrap_or_else(|| " No reason was given.".into());
            (format!("denied: the user denied {id}; the action did not run.{reason}"), false)
        }
        ApprovalState::Failed => {
            let message = view.failure.as_ref().map(|f| format!(": {}: {}", f.class, f.message)).unwrap_or_default();
            (format!("failed: {id} was approved but failed{message}"), true)
        }
        ApprovalState::Expired => (
            format!(
                "expired: nobody decided {id} in time; the action did not run. Call it again only if the user \
                 still wants it."
            ),
            false,
        ),
        ApprovalState::Cancelled => {
            let reason = view.reason.as_deref().map(|r| format!(" Reason: {r}")).unwrap_or_default();
            (format!("cancelled: {id} was withdrawn before a decision; the action did not run.{reason}"), false)
        }
    }
}

/// What `aileron_diagnostics` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diagnosis {
    Healthy { summary: String },
    Degraded { problem: String, remediation: String },
}

impl Diagnosis {
    /// From the daemon's health answer (or why it did not come) and its action listing.
    pub fn of(daemon_url: &str, health: Result<&Value, &Unreachable>, catalog: Option<&ToolCatalog>) -> Diagnosis {
        let health = match health {
            Ok(health) => health,
            Err(unreachable) => {
                return Diagnosis::Degraded {
                    problem: format!("the Aileron daemon does not answer: {}", first_line(&unreachable.message)),
                    remediation: "start it with `aileron daemon start` (or check AILERON_URL and AILERON_TOKEN), \
                                  then call aileron_diagnostics again"
                        .into(),
                };
            }
        };
        let version = health["version"].as_str().unwrap_or("?");
        let Some(catalog) = catalog else {
            return Diagnosis::Degraded {
                problem: format!("the daemon {version} at {daemon_url} answers but refused to list actions"),
                remediation: "check that this server's token may list actions (AILERON_TOKEN or daemon.json)".into(),
            };
        };
        if let Some((file, message)) = catalog.load_errors.first() {
            return Diagnosis::Degraded {
                problem: format!(
                    "{} action file(s) failed to load, first {file}: {}",
                    catalog.load_errors.len(),
                    first_line(message)
                ),
                remediation: format!("fix or remove {file} (see `aileron action list`); the other actions work"),
            };
        }
        if let Some(shadowed) = catalog.shadowed.first() {
            return Diagnosis::Degraded {
                problem: format!(
                    "action `{}` has the tool name `{}` of {} and is not offered",
                    shadowed.action, shadowed.tool, shadowed.kept_by
                ),
                remediation: format!("rename the action file of `{}` so its tool name is unique", shadowed.action),
            };
        }
        Diagnosis::Healthy {
            summary: format!(
                "daemon {version} at {daemon_url}; {} action tool(s), {} disabled action(s)",
                catalog.action_count(),
                catalog.disabled
            ),
        }
    }

    pub fn into_result(self) -> CallToolResult {
        let body = match &self {
            Diagnosis::Healthy { summary } => format!("healthy: {summary}"),
            Diagnosis::Degraded { problem, remediation } => format!("degraded: {problem}\nremediation: {remediation}"),
        };
        CallToolResult::success(vec![text(body)])
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn view(name: &str, enabled: bool, gated: bool) -> Value {
        json!({
            "name": name,
            "version": "1.0.0",
            "intent": "read",
            "connectors": [],
            "steps": [],
            "tool_name": name.replace(['-', '.'], "_"),
            "enabled": enabled,
            "requires_approval": gated,
            "description": format!("Does {name}."),
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "description": "n"}}, "required": ["n"], "additionalProperties": false},
        })
    }

    fn listing(body: Value) -> ActionList {
        serde_json::from_value(body).expect("a listing")
    }

    fn texts(result: &CallToolResult) -> Vec<String> {
        result.content.iter().map(|block| block.as_text().map(|t| t.text.clone()).unwrap_or_default()).collect()
    }

    #[test]
    fn the_catalog_has_one_tool_per_enabled_action_plus_the_builtins() {
        let check = |items: Vec<Value>, tools: &[&str], shadowed: &[(&str, &str, &str)], disabled: usize| {
            let catalog = ToolCatalog::from_listing(listing(json!({ "items": items, "load_errors": [] })));
            let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
            assert_eq!(names, tools);
            let got: Vec<(&str, &str, &str)> =
                catalog.shadowed.iter().map(|s| (s.action.as_str(), s.tool.as_str(), s.kept_by.as_str())).collect();
            assert_eq!(got, shadowed);
            assert_eq!(catalog.disabled, disabled);
        };
        check(vec![], &[CHECK_ACTION_STATUS, CANCEL_ACTION, DIAGNOSTICS], &[], 0);
        check(
            vec![view("list-issues", true, false), view("create.issue", true, true), view("off", false, false)],
            &["create_issue", "list_issues", CHECK_ACTION_STATUS, CANCEL_ACTION, DIAGNOSTICS],
            &[],
            1,
        );
        check(
            vec![view("a_b", true, false), view("a-b", true, false), view("check-action-status", true, false)],
            &["a_b", CHECK_ACTION_STATUS, CANCEL_ACTION, DIAGNOSTICS],
            &[
                ("a_b", "a_b", "action a-b"),
                ("check-action-status", "check_action_status", "built-in check_action_status"),
            ],
            0,
        );
    }

    #[test]
    fn tools_carry_the_description_schema_and_approval_paragraph() {
        let catalog = ToolCatalog::from_listing(listing(
            json!({ "items": [view("open", true, false), view("gated", true, true)] }),
        ));
        let tool = |name: &str| catalog.tools.iter().find(|t| t.name == name).unwrap().clone();
        assert_eq!(tool("open").description.as_deref(), Some("Does open."));
        assert_eq!(tool("gated").description.unwrap(), format!("Does gated.\n\n{APPROVAL_PARAGRAPH}"));
        assert_eq!(Value::Object((*tool("gated").input_schema).clone()), view("x", true, false)["input_schema"]);
        assert_eq!(catalog.action_for("gated"), Some("gated"));
        assert_eq!(catalog.action_for(CHECK_ACTION_STATUS), None, "built-ins run no action");
        for phrase in ["pending_approval", "approval_id", "check_action_status", "Do not call this tool again"] {
            assert!(APPROVAL_PARAGRAPH.contains(phrase), "{phrase}");
        }
    }

    #[test]
    fn run_answers_become_tool_results() {
        let check = |status: u16, body: Value, is_error: bool, first: &str| {
            let result = run_result(RunAnswer::from_http(status, body.clone()));
            assert_eq!(result.is_error, Some(is_error), "{status}");
            // Compared as JSON when it is JSON: object keys keep no particular order.
            match (serde_json::from_str::<Value>(&texts(&result)[0]), serde_json::from_str::<Value>(first)) {
                (Ok(got), Ok(expected)) => assert_eq!(got, expected, "{status}"),
                _ => assert_eq!(texts(&result)[0], first, "{status}"),
            }
        };
        let ok = json!({"audit_id": "audit-1", "result": {"output": 1}});
        check(200, ok.clone(), false, &serde_json::to_string(&ok).unwrap());
        let id = "act-20261122T053700Z-0123456789abcdef";
        let pending = json!({"status": "pending_approval", "approval_id": id, "audit_id": "audit-2", "review_url": "http://x", "message": "Ask the user."});
        check(202, pending.clone(), false, "Ask the user.");
        let second: Value = serde_json::from_str(&texts(&run_result(RunAnswer::from_http(202, pending)))[1]).unwrap();
        assert_eq!(second, json!({"approval_id": id, "review_url": "http://x", "status": "pending_approval"}));
        let envelope =
            json!({"error": {"class": "network_error", "message": "down", "retriable": true, "boundary": "external"}});
        check(502, envelope.clone(), true, &serde_json::to_string(&envelope).unwrap());
        let crud = json!({"error": {"code": "invalid_args", "message": "bad", "hint": "h"}});
        check(400, crud.clone(), true, &serde_json::to_string(&crud).unwrap());
        check(
            500,
            Value::Null,
            true,
            r#"{"error":{"body":null,"code":"http_status","message":"the daemon answered HTTP 500"}}"#,
        );
        assert_eq!(run_result(RunAnswer::from_http(200, ok.clone())).structured_content, Some(ok.clone()));
        for status in [202, 400, 502] {
            assert_eq!(
                run_result(RunAnswer::from_http(status, ok.clone())).structured_content,
                None,
                "text only: {status}"
            );
        }
        assert_eq!(status_result("act-1", 200, json!({"status": "running"})).structured_content, None);
    }

    #[test]
    fn approval_results_read_as_plain_text() {
        let check = |body: Value, is_error: bool, starts: &str, blocks: usize| {
            let result = status_result("act-1", 200, body.clone());
            let texts = texts(&result);
            assert_eq!(result.is_error, Some(is_error), "{body}");
            assert!(texts[0].starts_with(starts), "{body}: {}", texts[0]);
            assert_eq!(texts.len(), blocks, "{body}");
        };
        check(json!({"status": "pending_approval"}), false, "pending_approval: approval act-1 is still waiting", 1);
        check(json!({"status": "running"}), false, "running:", 1);
        check(
            json!({"status": "completed", "audit_id": "audit-9", "result": {"output": 2}}),
            false,
            "completed: act-1 ran (audit audit-9)",
            2,
        );
        check(
            json!({"status": "denied", "reason": "wrong repo"}),
            false,
            "denied: the user denied act-1; the action did not run. Reason: wrong repo",
            1,
        );
        let failure = json!({"class": "network_error", "message": "down", "retriable": true, "boundary": "external"});
        check(
            json!({"status": "failed", "failure": failure}),
            true,
            "failed: act-1 was approved but failed: network_error: down",
            2,
        );
        let unknown =
            status_result("act-2", 404, json!({"error": {"code": "approval_not_found", "message": "unknown"}}));
        assert_eq!(unknown.is_error, Some(true));
        assert!(texts(&unknown)[0].contains("approval_not_found"));
    }

    #[test]
    fn approval_ids_are_checked_before_they_reach_a_path() {
        for (id, plausible) in [
            ("act-20261122T053700Z-0123456789abcdef", true),
            ("act-1", true),
            ("../decide", false),
            ("act-1/decide", false),
            ("act-1?x=1", false),
            ("", false),
            ("audit-1", false),
        ] {
            assert_eq!(is_plausible_approval_id(id), plausible, "{id}");
        }
    }

    #[test]
    fn diagnostics_say_healthy_or_degraded_with_a_remediation() {
        let health = json!({"status": "ok", "version": "0.1.0"});
        let clean =
            ToolCatalog::from_listing(listing(json!({ "items": [view("a", true, false), view("b", false, false)] })));
        let broken = ToolCatalog::from_listing(listing(
            json!({ "items": [], "load_errors": [{"file": "x.md", "message": "x.md:3: bad\nmore"}] }),
        ));
        let clash = ToolCatalog::from_listing(listing(
            json!({ "items": [view("a-b", true, false), view("a.b", true, false)] }),
        ));
        let down = Unreachable { message: "cannot reach the daemon at http://127.0.0.1:9\nhint: start it".into() };
        let check = |diagnosis: Diagnosis, expected: &str| {
            let result = diagnosis.into_result();
            assert_eq!(result.is_error, Some(false));
            assert_eq!(texts(&result)[0], expected);
        };
        check(
            Diagnosis::of("http://d", Ok(&health), Some(&clean)),
            "healthy: daemon 0.1.0 at http://d; 1 action tool(s), 1 disabled action(s)",
        );
        check(
            Diagnosis::of("http://d", Ok(&health), Some(&broken)),
            "degraded: 1 action file(s) failed to load, first x.md: x.md:3: bad\nremediation: fix or remove x.md (see `aileron action list`); the other actions work",
        );
        check(
            Diagnosis::of("http://d", Ok(&health), Some(&clash)),
            "degraded: action `a.b` has the tool name `a_b` of action a-b and is not offered\nremediation: rename the action file of `a.b` so its tool name is unique",
        );
        check(
            Diagnosis::of("http://d", Err(&down), None),
            "degraded: the Aileron daemon does not answer: cannot reach the daemon at http://127.0.0.1:9\nremediation: start it with `aileron daemon start` (or check AILERON_URL and AILERON_TOKEN), then call aileron_diagnostics again",
        );
        check(
            Diagnosis::of("http://d", Ok(&health), None),
            "degraded: the daemon 0.1.0 at http://d answers but refused to list actions\nremediation: check that this server's token may list actions (AILERON_TOKEN or daemon.json)",
        );
    }
}
