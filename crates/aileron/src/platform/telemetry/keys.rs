//! Span names and attribute keys (observability seed). Every `aileron.*` attribute key is an entry
//! of [`aileron_core::vocabulary::keys`], re-exported here, so the audit log and the spans read the
//! same names by construction: the runner builds its payloads from that table, the failure
//! attributes are taken from [`aileron_core::Failure::audit_payload`], and the approval attributes
//! are [`aileron_core::approval::decision_payload`] itself. What is defined here is telemetry-only.

pub use aileron_core::vocabulary::keys::*;

pub const SPAN_MCP_TOOL_CALL: &str = "aileron.mcp.tool.call";
pub const SPAN_ACTION_EXECUTE: &str = "aileron.action.execute";
pub const SPAN_CAPABILITY_CHECK: &str = "aileron.capability.check";
pub const SPAN_CONNECTOR_CALL: &str = "aileron.connector.call";
/// One program a connector spawned, a child of its `aileron.connector.call`.
pub const SPAN_CONNECTOR_SPAWN: &str = "aileron.connector.spawn";
pub const SPAN_APPROVAL_WAIT: &str = "aileron.approval.wait";
/// One request of a launched agent that matched an operation spec (SPEC §15), as its
/// `connector.proxy.proxied` / `connector.proxy.rejected` record: the same keys.
pub const SPAN_PROXY_REQUEST: &str = "aileron.proxy.request";
/// A guest log line, as an event on the `aileron.connector.call` span ([`LOG_LEVEL`], [`LOG_MESSAGE`]).
pub const SPAN_EVENT_CONNECTOR_LOG: &str = "aileron.connector.log";

/// The failure keys a failed span carries; their values come from `Failure::audit_payload`, so a
/// key missing there would be missing from the span too (`aileron.failure.message` becomes the
/// span status description instead, and `details` never leave the audit record).
pub const FAILURE_SPAN_KEYS: [&str; 3] = [FAILURE_CLASS, FAILURE_BOUNDARY, FAILURE_RETRIABLE];

/// HTTP server span attributes (OTel semantic conventions). Only the method, the route template
/// and the status: never the raw path, the query or a header.
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub const HTTP_ROUTE: &str = "http.route";
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
