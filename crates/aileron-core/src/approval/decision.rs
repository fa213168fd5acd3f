//! The decide rule behind `POST /v1/action-approvals/{id}/decide` and `aileron approval
//! approve|deny`: a decision is accepted once, only from `pending_approval`.
//!
//! The daemon holds the queue lock across `decide`, the journal append and the in-memory swap,
//! so two concurrent decides on one entry are ordered and the second sees it already decided.

use serde_json::{Map, Value};

use super::journal::{EventKind, JournalEvent};
use super::{ApprovalEntry, ApprovalId, ApprovalState};

/// Longest reason kept, in characters (after trimming).
pub const MAX_REASON_CHARS: usize = 1000;

/// A human's decision, as the page or the CLI submits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    /// Free text; trimmed, and blank means none.
    pub reason: Option<String>,
    /// Who decided, e.g. `web` or `cli`.
    pub by: String,
    /// Approved with these arguments instead of the requested ones (SPEC §8 "Edit before
    /// approve"; already checked against the action's inputs). Never on a denial.
    pub args: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// Also what the daemon answers for an id it does not know: both are 404.
    #[error("approval `{id}` is unknown or already decided")]
    NotPending { id: ApprovalId, state: ApprovalState },
    #[error("the reason is {chars} characters long; at most {MAX_REASON_CHARS} are accepted (hint: shorten it)")]
    ReasonTooLong { chars: usize },
    #[error("arguments are edited only when approving (hint: deny without `args`)")]
    EditedDenial,
}

impl DecideError {
    pub fn http_status(&self) -> u16 {
        match self {
            DecideError::NotPending { .. } => 404,
            DecideError::ReasonTooLong { .. } | DecideError::EditedDenial => 400,
        }
    }
}

/// The decided entry and the `decided` event to journal (and fsync) before answering.
pub fn decide(
    entry: &ApprovalEntry,
    decision: Decision,
    now: &str,
) -> Result<(ApprovalEntry, JournalEvent), DecideError> {
    let not_pending = || DecideError::NotPending { id: entry.id.clone(), state: entry.state };
    if entry.state != ApprovalState::PendingApproval {
        return Err(not_pending());
    }
    let reason = normalize_reason(decision.reason.as_deref())?;
    if decision.args.is_some() && !decision.approved {
        return Err(DecideError::EditedDenial);
    }
    // Arguments identical to the requested ones are no edit.
    let args = decision.args.filter(|args| *args != entry.args);
    let kind = EventKind::Decided { approved: decision.approved, reason, by: decision.by, args };
    // The only illegal move from `pending_approval` would be a non-decision; a `decided` event is
    // always legal here, so any error means the entry stopped being pending.
    entry.advance(now, kind).map_err(|_| not_pending())
}

/// A reason as kept: trimmed, blank as none, refused past [`MAX_REASON_CHARS`] (a decision's
/// and a withdrawal's alike).
pub fn normalize_reason(reason: Option<&str>) -> Result<Option<String>, DecideError> {
    let Some(reason) = reason.map(str::trim).filter(|r| !r.is_empty()) else {
        return Ok(None);
    };
    let chars = reason.chars().count();
    if chars > MAX_REASON_CHARS {
        return Err(DecideError::ReasonTooLong { chars });
    }
    Ok(Some(reason.to_string()))
}
