//! The `aileron.approval.*` keys of the observability seed, shared by the audit records
//! `approval.requested|approved|denied` and the `aileron.approval.wait` span. Every record of one
//! approval carries the same `aileron.approval.id`, so a request and its decision correlate.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ApprovalEntry;
use crate::vocabulary::EventType;

/// Payload and span attribute keys: short names for the entries of [`crate::vocabulary::keys`]
/// an approval record carries.
pub mod keys {
    pub use crate::vocabulary::keys::{
        APPROVAL_ACTION as ACTION, APPROVAL_ARGS_SHA256 as ARGS_SHA256, APPROVAL_DECISION as DECISION,
        APPROVAL_EDITED as EDITED, APPROVAL_EDITED_ARGS_SHA256 as EDITED_ARGS_SHA256, APPROVAL_ID as ID,
        APPROVAL_KIND as KIND, APPROVAL_REASON as REASON, APPROVAL_WAIT_MS as WAIT_MS, CONNECTOR_FQN, SESSION_ID,
    };
}

/// How a wait ended: a human decision, an expiry (`timeout`) or a withdrawal (`cancelled`);
/// each is audited (`approval.approved|denied|expired|cancelled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approved,
    Denied,
    Timeout,
    Cancelled,
}

impl ApprovalDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Approved => "approved",
            ApprovalDecision::Denied => "denied",
            ApprovalDecision::Timeout => "timeout",
            ApprovalDecision::Cancelled => "cancelled",
        }
    }

    /// The audit event type recording this decision, if it is recorded.
    pub fn audit_event_type(self) -> Option<EventType> {
        match self {
            ApprovalDecision::Approved => Some(EventType::ApprovalApproved),
            ApprovalDecision::Denied => Some(EventType::ApprovalDenied),
            ApprovalDecision::Timeout => Some(EventType::ApprovalExpired),
            ApprovalDecision::Cancelled => Some(EventType::ApprovalCancelled),
        }
    }
}

/// `approval.requested`: who is asking for what.
pub fn requested_payload(entry: &ApprovalEntry) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert(keys::ID.into(), entry.id.as_str().into());
    payload.insert(keys::KIND.into(), entry.kind.as_str().into());
    payload.insert(keys::ACTION.into(), entry.action.clone().into());
    if let Some(fqn) = &entry.connector_fqn {
        payload.insert(keys::CONNECTOR_FQN.into(), fqn.to_string().into());
    }
    if let Some(session_id) = &entry.session_id {
        payload.insert(keys::SESSION_ID.into(), session_id.clone().into());
    }
    payload
}

/// `approval.approved` / `approval.denied` (and the wait span's attributes): the request keys plus
/// the decision, the wait once decided, and the reason when one was given.
pub fn decision_payload(entry: &ApprovalEntry, decision: ApprovalDecision) -> Map<String, Value> {
    let mut payload = requested_payload(entry);
    payload.insert(keys::DECISION.into(), decision.as_str().into());
    if let Some(wait_ms) = entry.wait_ms() {
        payload.insert(keys::WAIT_MS.into(), wait_ms.into());
    }
    if let Some(reason) = &entry.reason {
        payload.insert(keys::REASON.into(), reason.clone().into());
    }
    // An edit is on record by the hashes of both argument sets, never their values.
    if let Some(edited) = &entry.edited_args {
        let hash = |args: &Map<String, Value>| {
            crate::identity::ContentHash::of_bytes(Value::Object(args.clone()).to_string().as_bytes()).to_string()
        };
        payload.insert(keys::EDITED.into(), true.into());
        payload.insert(keys::ARGS_SHA256.into(), hash(&entry.args).into());
        payload.insert(keys::EDITED_ARGS_SHA256.into(), hash(edited).into());
    }
    payload
}
