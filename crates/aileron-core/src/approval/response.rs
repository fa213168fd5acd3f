//! What callers of a gated action see: the 202 `pending_approval` body with the message the agent
//! relays to its user, and the view served by `GET /v1/action-approvals/{id}/result`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalEntry, ApprovalId, ApprovalState};
use crate::failure::Failure;

/// The review page for one approval on the daemon at `daemon_url`. It carries no login ticket:
/// the agent sees this URL, and only `aileron open` mints a ticket.
pub fn review_url(daemon_url: &str, id: &ApprovalId) -> String {
    format!("{}/approvals?focus={id}", daemon_url.trim_end_matches('/'))
}

/// The message an agent surfaces verbatim: what waits, where the user decides, and that calling
/// again would only queue a second approval.
pub fn pending_message(action: &str, review_url: &str, id: &ApprovalId) -> String {
    format!(
        "Action `{action}` needs the user's approval before it runs; nothing has been done yet. \
         Ask the user to review it at {review_url} or by running `aileron open approval {id}` in a terminal, \
         then approve or deny it there. Do not call the action again while it waits: that would ask for a \
         second approval. Check the outcome with approval id {id}."
    )
}

/// The 202 body: `{status: "pending_approval", approval_id, audit_id, review_url, message}`;
/// `audit_id` is the id of the `approval.requested` record (SPEC §8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PendingApproval {
    pub status: ApprovalState,
    pub approval_id: ApprovalId,
    pub audit_id: String,
    pub review_url: String,
    pub message: String,
}

impl PendingApproval {
    pub fn new(entry: &ApprovalEntry, review_url: String, audit_id: String) -> PendingApproval {
        PendingApproval {
            status: ApprovalState::PendingApproval,
            approval_id: entry.id.clone(),
            audit_id,
            message: pending_message(&entry.action, &review_url, &entry.id),
            review_url,
        }
    }
}

/// `{status, audit_id?, result?, reason?, failure?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResultView {
    pub status: ApprovalState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failure as in the envelope's `error` object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The arguments the user edited in before approving: what ran instead of the requested ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_args: Option<serde_json::Map<String, Value>>,
}

impl ResultView {
    pub fn of(entry: &ApprovalEntry) -> ResultView {
        ResultView {
            status: entry.state,
            audit_id: entry.audit_id.clone(),
            result: entry.result.clone(),
            reason: entry.reason.clone(),
            failure: entry.failure.clone(),
            edited_args: entry.edited_args.clone(),
        }
    }
}
