//! Span names and attribute keys (observability seed). The audit log and the spans read the same
//! names by construction: the runner builds its `action.executed` payload from these constants,
//! the failure attributes are taken from [`aileron_core::Failure::audit_payload`], and the
//! approval attributes are [`aileron_core::approval::decision_payload`] itself.

pub use aileron_core::approval::keys as approval;

pub const SPAN_MCP_TOOL_CALL: &str = "aileron.mcp.tool.call";
pub const SPAN_ACTION_EXECUTE: &str = "aileron.action.execute";
pub const SPAN_CAPABILITY_CHECK: &str = "aileron.capability.check";
pub const SPAN_CONNECTOR_CALL: &str = "aileron.connector.call";
pub const SPAN_APPROVAL_WAIT: &str = "aileron.approval.wait";

pub const ACTION_NAME: &str = "aileron.action.name";
pub const ACTION_STEPS_COUNT: &str = "aileron.action.steps_count";
/// The same key as [`approval::CONNECTOR_FQN`]: one name for the connector everywhere.
pub const CONNECTOR_FQN: &str = approval::CONNECTOR_FQN;
pub const CONNECTOR_OP: &str = "aileron.connector.op";
pub const CONNECTOR_HASH: &str = "aileron.connector.hash";
/// The op an action step attempts, as the capability string (ADR-0003).
pub const CAPABILITY_KIND: &str = "aileron.capability.kind";
/// The tool an MCP client called (only on `aileron.mcp.tool.call`).
pub const MCP_TOOL_NAME: &str = "aileron.mcp.tool.name";

/// The failure keys a failed span carries; their values come from `Failure::audit_payload`, so a
/// key missing there would be missing from the span too (`aileron.failure.message` becomes the
/// span status description instead, and `details` never leave the audit record).
pub const FAILURE_CLASS: &str = "aileron.failure.class";
pub const FAILURE_BOUNDARY: &str = "aileron.failure.boundary";
pub const FAILURE_RETRIABLE: &str = "aileron.failure.retriable";
pub const FAILURE_SPAN_KEYS: [&str; 3] = [FAILURE_CLASS, FAILURE_BOUNDARY, FAILURE_RETRIABLE];
/// The audit record id stamped onto the failure envelope (the record's `audit_id` field).
pub const AUDIT_ID: &str = "aileron.audit.id";

/// HTTP server span attributes (OTel semantic conventions). Only the method, the route template
/// and the status: never the raw path, the query or a header.
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub const HTTP_ROUTE: &str = "http.route";
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
