//! The MCP server both transports run: `aileron-mcp` over stdio and the daemon's `/mcp` over
//! streamable HTTP construct the same [`AileronMcp`] around a [`DaemonLink`]; `tools/list` and
//! `tools/call` are the catalog functions of [`super::catalog`] applied to the daemon's answers.
//!
//! `notifications/tools/list_changed` follows the [`ActionFeed`] of the action set: sessions that
//! began with `initialize` get it through their peer, 2026-07-28 sessions through
//! `subscriptions/listen`.

use crate::wire::RunAnswer;
use std::sync::{Arc, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::catalog::{self, CANCEL_ACTION, CHECK_ACTION_STATUS, DIAGNOSTICS, Diagnosis, ToolCatalog, Unreachable};
use super::changes::ActionFeed;
use super::link::{CallOrigin, DaemonLink};
use crate::platform::principal::Principal;
use crate::platform::telemetry::Telemetry;

/// The action feed's position a catalog was fetched at (see [`ActionFeed::key`]).
type FeedKey = (u64, Option<u64>);

/// What every session of one server shares: the way to the daemon, the feed of action-set
/// changes and the last catalog fetched, with the feed key it was fetched under.
///
/// `tools/list` answers from that catalog while the feed says nothing changed since (1,000
/// actions make `GET /v1/actions` cost tens of milliseconds); any change, or a change stream that
/// is not followed, means a fresh fetch. In the daemon the cache is shared by all `/mcp` callers:
/// every token admitted there may list actions, and all of them see the same list.
pub struct McpShared {
    link: DaemonLink,
    /// `aileron.mcp.tool.call` spans (`aileron-mcp`'s own pipeline; the daemon's for `/mcp`).
    telemetry: Telemetry,
    feed: ActionFeed,
    catalog: RwLock<Option<(FeedKey, Arc<ToolCatalog>)>>,
    /// Where this server's own problems go (stderr for `aileron-mcp`, the daemon log for `/mcp`).
    log_prefix: &'static str,
}

impl McpShared {
    pub fn new(link: DaemonLink, feed: ActionFeed, telemetry: Telemetry, log_prefix: &'static str) -> Arc<McpShared> {
        Arc::new(McpShared { link, telemetry, feed, catalog: RwLock::new(None), log_prefix })
    }

    pub fn link(&self) -> &DaemonLink {
        &self.link
    }

    /// The catalog as the daemon lists it now (built-ins only when it cannot).
    pub async fn list(&self, origin: &CallOrigin) -> Arc<ToolCatalog> {
        if let Some(catalog) = self.current() {
            return catalog;
        }
        match self.fetch(origin).await {
            Ok(catalog) => catalog,
            Err(problem) => {
                log_line!("{}: listing actions: {}", self.log_prefix, problem.message.replace('\n', " "));
                Arc::new(ToolCatalog::builtins_only())
            }
        }
    }

    /// The cached catalog, if the feed says it is still the daemon's.
    fn current(&self) -> Option<Arc<ToolCatalog>> {
        let key = self.feed.key();
        let cached = self.catalog.read().expect("catalog cache poisoned").clone();
        cached.filter(|(seen, _)| key.1.is_some() && *seen == key).map(|(_, catalog)| catalog)
    }

    async fn fetch(&self, origin: &CallOrigin) -> Result<Arc<ToolCatalog>, Unreachable> {
        // Read the key first: a change that lands during the fetch leaves the cache stale-marked.
        let generation = self.feed.key();
        let (status, body) = self.link.list_actions(origin).await?;
        if status != 200 {
            let body = String::from_utf8_lossy(&body);
            return Err(Unreachable { message: format!("GET /v1/actions answered {status}: {body}") });
        }
        let listing: crate::wire::ActionList = serde_json::from_slice(&body).map_err(|error| Unreachable {
            message: format!("GET /v1/actions answered an unexpected listing: {error}"),
        })?;
        let catalog = Arc::new(ToolCatalog::from_listing(listing));
        *self.catalog.write().expect("catalog cache poisoned") = Some((generation, catalog.clone()));
        Ok(catalog)
    }

    /// The action behind a tool name, from the cached catalog while it is current.
    async fn action_for(&self, origin: &CallOrigin, tool: &str) -> Result<Option<String>, Unreachable> {
        if let Some(action) = self.current().as_deref().and_then(|catalog| catalog.action_for(tool)) {
            return Ok(Some(action.to_string()));
        }
        Ok(self.fetch(origin).await?.action_for(tool).map(str::to_string))
    }

    /// `tools/call`: an action tool runs through `POST /v1/actions/{name}/run`; the built-ins only
    /// read. An unknown tool is a protocol error (the agent named something we never listed).
    pub async fn call(
        &self,
        origin: &CallOrigin,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<rmcp::model::CallToolResult, ErrorData> {
        match self.call_answering(origin, tool, arguments, false, None).await? {
            CallToolResponse::Complete(result) => Ok(result),
            other => Err(ErrorData::internal_error(format!("unexpected tool answer {other:?}"), None)),
        }
    }

    /// [`Self::call`] for a client that declared the Tasks extension (SEP-2663) when `tasks`: a
    /// gated call then answers with a task whose id is the approval's. `elicit`: the client offers
    /// URL-mode elicitation, and a gated call asks it to open the review page.
    pub async fn call_answering(
        &self,
        origin: &CallOrigin,
        tool: &str,
        arguments: Map<String, Value>,
        tasks: bool,
        elicit: Option<rmcp::Peer<RoleServer>>,
    ) -> Result<CallToolResponse, ErrorData> {
        match tool {
            CHECK_ACTION_STATUS => Ok(self.check_action_status(origin, &arguments).await.into()),
            CANCEL_ACTION => Ok(self.cancel_action(origin, &arguments).await.into()),
            DIAGNOSTICS => Ok(self.diagnostics(origin).await.into()),
            _ => self.run_action(origin, tool, arguments, tasks, elicit).await,
        }
    }

    /// `tasks/get`: the task is the durable approval (its id), so it survives daemon restarts;
    /// its state is the approval's, and a completed run's result is the tool call's result.
    pub async fn task(&self, origin: &CallOrigin, id: &str) -> Result<GetTaskResult, ErrorData> {
        plausible_task(id)?;
        match self.link.approval_result(origin, id).await {
            Ok((200, body)) => catalog::task_of(id, &body)
                .ok_or_else(|| ErrorData::internal_error(format!("unexpected approval result: {body}"), None)),
            Ok((404, _)) => Err(ErrorData::invalid_params(format!("no task `{id}`"), None)),
            Ok((status, body)) => Err(ErrorData::internal_error(format!("the daemon answered {status}: {body}"), None)),
            Err(unreachable) => Err(ErrorData::internal_error(unreachable.message, None)),
        }
    }

    /// `tasks/cancel`: withdraws the approval (never decides it); a task already past waiting
    /// keeps its course and the cancel is acknowledged all the same (SEP-2663: idempotent; only
    /// an unknown id, or another session's, is an error).
    pub async fn cancel_task(&self, origin: &CallOrigin, id: &str) -> Result<(), ErrorData> {
        plausible_task(id)?;
        match self.link.cancel_approval(origin, id).await {
            Ok((status, _)) if status < 300 => Ok(()),
            // Not waiting any more: acknowledged when the task exists (it ended or was decided).
            Ok((404, _)) => match self.link.approval_result(origin, id).await {
                Ok((200, _)) => Ok(()),
                Ok(_) => Err(ErrorData::invalid_params(format!("no task `{id}`"), None)),
                Err(unreachable) => Err(ErrorData::internal_error(unreachable.message, None)),
            },
            Ok((status, body)) => Err(ErrorData::internal_error(format!("the daemon answered {status}: {body}"), None)),
            Err(unreachable) => Err(ErrorData::internal_error(unreachable.message, None)),
        }
    }

    /// An action tool call inside an `aileron.mcp.tool.call` span (the child of the agent's
    /// `traceparent`, else a trace root): find the action behind the tool, then
    /// `POST /v1/actions/{action}/run`. Both requests carry the span's `traceparent`, so the
    /// daemon's spans join the trace.
    async fn run_action(
        &self,
        origin: &CallOrigin,
        tool: &str,
        arguments: Map<String, Value>,
        tasks: bool,
        elicit: Option<rmcp::Peer<RoleServer>>,
    ) -> Result<CallToolResponse, ErrorData> {
        let span = self.telemetry.mcp_tool_call(tool, origin.traceparent.as_deref());
        let traced = CallOrigin { principal: origin.principal.clone(), traceparent: span.traceparent() };
        let action = match self.action_for(&traced, tool).await {
            Ok(Some(action)) => action,
            Ok(None) => {
                span.error(format!("unknown tool `{tool}`"));
                // Through the chokepoint anyway, so the probe is on record (`action.rejected`,
                // `not_found`, under the caller's own principal); its answer is not needed.
                let name: String =
                    url::form_urlencoded::byte_serialize(tool.chars().take(200).collect::<String>().as_bytes())
                        .collect();
                let _ = self.link.run(&traced, &name, arguments).await;
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{tool}`; list the tools again (tools/list)"),
                    None,
                ));
            }
            Err(unreachable) => {
                span.error(unreachable.message.clone());
                return Ok(catalog::unreachable_result(&unreachable).into());
            }
        };
        match self.link.run(&traced, &action, arguments).await {
            Ok(answer) => {
                match &answer {
                    RunAnswer::Failed(failure) => span.fail(failure, None),
                    // A request error (`invalid_args`, a revoked token): no failure class applies.
                    RunAnswer::Refused(reply) => span.error(format!(
                        "the daemon answered HTTP {}: {}",
                        reply.status.as_u16(),
                        reply.body["error"]["code"]
                    )),
                    RunAnswer::Completed(_) | RunAnswer::Pending(_) => span.end(),
                }
                match answer {
                    RunAnswer::Pending(pending) if tasks => Ok(CallToolResponse::Task(catalog::task_created(&pending))),
                    RunAnswer::Pending(pending) => {
                        if let Some(peer) = elicit {
                            ask_to_open(peer, &pending);
                        }
                        Ok(catalog::run_result(RunAnswer::Pending(pending)).into())
                    }
                    answer => Ok(catalog::run_result(answer).into()),
                }
            }
            Err(unreachable) => {
                span.error(unreachable.message.clone());
                Ok(catalog::unreachable_result(&unreachable).into())
            }
        }
    }

    async fn check_action_status(
        &self,
        origin: &CallOrigin,
        arguments: &Map<String, Value>,
    ) -> rmcp::model::CallToolResult {
        let id = match approval_id_argument(CHECK_ACTION_STATUS, arguments) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match self.link.approval_result(origin, id).await {
            Ok((status, body)) => catalog::status_result(id, status, body),
            Err(unreachable) => catalog::unreachable_result(&unreachable),
        }
    }

    async fn cancel_action(&self, origin: &CallOrigin, arguments: &Map<String, Value>) -> rmcp::model::CallToolResult {
        let id = match approval_id_argument(CANCEL_ACTION, arguments) {
            Ok(id) => id,
            Err(refused) => return refused,
        };
        match self.link.cancel_approval(origin, id).await {
            Ok((status, body)) => catalog::cancel_result(id, status, body),
            Err(unreachable) => catalog::unreachable_result(&unreachable),
        }
    }

    async fn diagnostics(&self, origin: &CallOrigin) -> rmcp::model::CallToolResult {
        let health = self.link.health(origin).await.and_then(|(status, body)| {
            if status == 200 {
                Ok(body)
            } else {
                Err(Unreachable { message: format!("health check answered {status}") })
            }
        });
        let catalog = match &health {
            Ok(_) => self.fetch(origin).await.ok(),
            Err(_) => None,
        };
        let url = self.link.daemon_url().await;
        Diagnosis::of(&url, health.as_ref(), catalog.as_deref()).into_result()
    }
}

impl AsRef<DaemonLink> for McpShared {
    fn as_ref(&self) -> &DaemonLink {
        &self.link
    }
}

/// One MCP session's server. Dropping it (the session ended) stops its notification forwarder.
pub struct AileronMcp {
    shared: Arc<McpShared>,
    alive: watch::Sender<()>,
}

impl AileronMcp {
    pub fn new(shared: Arc<McpShared>) -> AileronMcp {
        AileronMcp { shared, alive: watch::channel(()).0 }
    }
}

/// The request facts `tools/*` handlers need: the `/mcp` caller's bearer token (from the HTTP
/// request rmcp attaches) and the W3C `traceparent` of `_meta` (or of that HTTP request).
fn origin_of(context: &RequestContext<RoleServer>, params_meta: Option<&rmcp::model::RequestMetaObject>) -> CallOrigin {
    let http = context.extensions.get::<http::request::Parts>();
    let header = |name: http::header::HeaderName| http.and_then(|parts| parts.headers.get(name)?.to_str().ok());
    // Set by the daemon's `/mcp` admission; `aileron-mcp` (stdio) has none and needs none.
    let principal = http.and_then(|parts| parts.extensions.get::<Principal>()).cloned();
    // `_meta` first; on `/mcp` the HTTP request's own `traceparent` header is the fallback.
    let traceparent = context
        .meta
        .get_traceparent()
        .or_else(|| params_meta.and_then(|meta| meta.get_traceparent()))
        .or_else(|| header(http::header::HeaderName::from_static("traceparent")))
        .filter(|value| is_traceparent(value))
        .map(str::to_string);
    CallOrigin { principal, traceparent }
}

/// `version-traceid-parentid-flags` in lowercase hex (W3C Trace Context); anything else is
/// dropped rather than forwarded as a header.
pub fn is_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let lengths = [2, 32, 16, 2];
    parts.len() == 4
        && parts.iter().zip(lengths).all(|(part, length)| {
            part.len() == length && part.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

const INSTRUCTIONS: &str = "Aileron runs the user's installed actions. Each tool is one action; it runs with \
credentials the agent never sees. Some actions need the user's approval: their call returns `pending_approval` \
and a message to relay; then poll `check_action_status` with the approval_id (or withdraw a request no longer \
wanted with `cancel_action`). Use `aileron_diagnostics` when tools are missing or calls fail.";

impl ServerHandler for AileronMcp {
    fn get_info(&self) -> ServerConfig {
        let capabilities =
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().enable_tasks().build();
        let mut implementation = Implementation::new("aileron", crate::platform::process::VERSION);
        implementation.title = Some("Aileron".into());
        ServerConfig::new(capabilities).with_server_info(implementation).with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let origin = origin_of(&context, request.as_ref().and_then(|r| r.meta.as_ref()));
        let catalog = self.shared.list(&origin).await;
        Ok(ListToolsResult::with_all_items(catalog.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let origin = origin_of(&context, request.meta.as_ref());
        let arguments = request.arguments.unwrap_or_default();
        let capabilities = context.client_capabilities();
        let tasks = capabilities.as_ref().is_some_and(|capabilities| capabilities.supports_tasks());
        let url_elicitation = capabilities
            .as_ref()
            .and_then(|capabilities| capabilities.elicitation.as_ref())
            .is_some_and(|elicitation| elicitation.url.is_some());
        let elicit = url_elicitation.then(|| context.peer.clone());
        // Boxed: rmcp moves the whole handler future into a task per request, and this one is
        // large (the run, the link, the span).
        Box::pin(self.shared.call_answering(&origin, &request.name, arguments, tasks, elicit)).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let origin = origin_of(&context, request.meta.as_ref());
        self.shared.task(&origin, &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let origin = origin_of(&context, request.meta.as_ref());
        self.shared.cancel_task(&origin, &request.task_id).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer.clone();
        let mut changes = self.shared.feed.clone();
        changes.mark_seen();
        let mut alive = self.alive.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                    }
                    // Never sent: resolves (with an error) when the session's server is dropped.
                    _ = alive.changed() => break,
                }
            }
        });
    }

    fn accepted_subscription_filter(&self, _requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.shared.feed.clone();
        changes.mark_seen();
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                _ = context.cancelled() => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_traceparent;

    #[test]
    fn only_well_formed_traceparents_are_forwarded() {
        for (value, forwarded) in [
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true),
            ("00-00000000000000000000000000000000-b7ad6b7169203331-01", false),
            ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false),
            ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331", false),
            ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nx-evil: 1", false),
            ("", false),
        ] {
            assert_eq!(is_traceparent(value), forwarded, "{value:?}");
        }
    }
}

/// How long the client may take to answer a URL elicitation (the user reads the page meanwhile).
const ELICITATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Asks a client that offers URL-mode elicitation to open the approval's review page, in the
/// background: the tool result does not wait for it, and whatever the client answers (accept,
/// decline, cancel) decides nothing — only the user's decision on that page does.
fn ask_to_open(peer: rmcp::Peer<RoleServer>, pending: &aileron_core::approval::PendingApproval) {
    let Ok(url) = url::Url::parse(&pending.review_url) else { return };
    let message = format!(
        "Aileron: `{}` waits for your approval. Open the review page to approve or deny it (sign in with \
         `aileron open approval {}` if it asks).",
        pending.approval_id, pending.approval_id
    );
    let id = pending.approval_id.to_string();
    tokio::spawn(async move {
        let _ = peer.elicit_url_with_timeout(message, url, id, Some(ELICITATION_TIMEOUT)).await;
    });
}

/// A task id is an approval id; anything else is refused before it reaches a URL path.
fn plausible_task(id: &str) -> Result<(), ErrorData> {
    if catalog::is_plausible_approval_id(id) {
        return Ok(());
    }
    let shown: String = id.chars().take(80).collect();
    Err(ErrorData::invalid_params(format!("`{shown}` is not a task of this server"), None))
}

/// The `approval_id` argument of `tool`, or the error result naming what to pass.
fn approval_id_argument<'a>(
    tool: &str,
    arguments: &'a Map<String, Value>,
) -> Result<&'a str, rmcp::model::CallToolResult> {
    let Some(id) = arguments.get("approval_id").and_then(Value::as_str) else {
        return Err(rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "{tool} needs `approval_id`: the id a gated action's call returned (act-...)"
        ))]));
    };
    if !catalog::is_plausible_approval_id(id) {
        return Err(rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(format!(
            "`{}` is not an approval id; pass the approval_id a gated action's call returned (act-...)",
            id.chars().take(80).collect::<String>()
        ))]));
    }
    Ok(id)
}
