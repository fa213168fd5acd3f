//! Whether a new request may wait for a decision (SPEC §8): an identical request from the same
//! session that is still pending is answered with the existing entry, and a session may have at
//! most [`MAX_PENDING_PER_SESSION`] entries waiting. Requests without a session (the local CLI)
//! are neither deduplicated nor capped.
//!
//! The daemon decides this twice: before the preview (so a repeat costs no preview) and again
//! under the queue lock at registration, because concurrent requests all pass the first check.

use serde_json::{Map, Value};

use super::{ApprovalEntry, ApprovalKind, ApprovalState};
use crate::identity::ContentHash;

/// How many approvals one session may have waiting at once.
pub const MAX_PENDING_PER_SESSION: usize = 20;

/// The request as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    pub session_id: Option<&'a str>,
    pub action: &'a str,
    pub args: &'a Map<String, Value>,
    /// A held request's bound identity (`ApprovalEntry::action_sha256`): its shown arguments join
    /// repeated headers with ", ", which two different requests can share (the twenty-fourth
    /// re-attack's R3).
    pub identity: Option<&'a ContentHash>,
}

impl<'a> AdmissionRequest<'a> {
    pub fn of(entry: &'a ApprovalEntry) -> AdmissionRequest<'a> {
        let identity = (entry.kind == ApprovalKind::HttpRequest).then_some(&entry.action_sha256);
        AdmissionRequest { session_id: entry.session_id.as_deref(), action: &entry.action, args: &entry.args, identity }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Admission<'e> {
    /// Register a new entry.
    New,
    /// The same call already waits: answer with this entry.
    Repeat(&'e ApprovalEntry),
    /// The session already has this many entries waiting.
    TooManyPending(usize),
}

/// Decides `request` against every entry the queue holds (any state; only pending ones count).
pub fn admit<'e>(entries: impl IntoIterator<Item = &'e ApprovalEntry>, request: AdmissionRequest<'_>) -> Admission<'e> {
    let Some(session) = request.session_id else { return Admission::New };
    let mut waiting = 0;
    for entry in entries {
        if entry.state != ApprovalState::PendingApproval || entry.session_id.as_deref() != Some(session) {
            continue;
        }
        let same_identity = request.identity.is_none_or(|identity| entry.action_sha256 == *identity);
        if entry.action == request.action && entry.args == *request.args && same_identity {
            return Admission::Repeat(entry);
        }
        waiting += 1;
    }
    if waiting >= MAX_PENDING_PER_SESSION { Admission::TooManyPending(waiting) } else { Admission::New }
}
