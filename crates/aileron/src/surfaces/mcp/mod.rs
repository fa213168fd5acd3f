//! MCP: how installed actions reach agents (ADR-0008). One tool per enabled action plus
//! `check_action_status`, `cancel_action` and `aileron_diagnostics`, served by `aileron-mcp` over stdio
//! ([`stdio`]) and by the daemon at `/mcp` over streamable HTTP ([`http`]). Both run the same
//! [`server::AileronMcp`] and send every tool call to `POST /v1/actions/{name}/run`.
//!
//! Invariant: nothing here decides an approval; the approval routes a tool touches are the
//! read-only `GET /v1/action-approvals/{id}/result` and the agent's own withdrawal,
//! `POST /v1/action-approvals/{id}/cancel` (nothing runs after it).

pub mod catalog;
pub mod changes;
pub mod link;
pub mod server;
pub mod stdio;
pub mod transport;
