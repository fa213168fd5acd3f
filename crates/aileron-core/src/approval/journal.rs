//! The approval journal `approvals.jsonl`: one append-only event per line,
//! `{"seq", "at", "id", "event": "requested"|"decided"|"expired"|"cancelled"|"awaiting_vault"|"started"|"finished"|"recovered", ...}`,
//! and its pure replay.
//!
//! Replay applies events with the same [`ApprovalEntry::apply`] the daemon uses live. An event for
//! an unknown id or one the state machine forbids (a second decide, a `started` after `finished`)
//! is reported and not applied. A torn last line (no newline, or unparsable) is the trace of a
//! crash mid-append; that event was never acted on, so it is dropped. An unparsable line with
//! whole lines after it is no crash trace: it is damage, and replay stops there
//! ([`ReplayResult::unreadable`]) instead of guessing, because the lost event may be the `decided`,
//! `started` or `finished` that keeps an action from running again.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ApprovalEntry, ApprovalId, ApprovalState, IllegalTransition, RestartAction};
use crate::failure::{Boundary, Failure};

/// `decided_by` of an entry that expired.
pub const EXPIRY: &str = "expiry";

/// Why an entry found `running` at restart is failed instead of re-run.
pub const RECOVERY_REASON: &str = "the daemon stopped while this action was running; it may or may not have taken \
     effect, so it is not run again automatically (check the target system, then call the action again if needed)";

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Completed {
        audit_id: String,
        result: Value,
    },
    /// The failure carries the audit id of its `execution.failed` record.
    Failed {
        failure: Failure,
    },
}

/// What happened to an approval; the `event` field of a journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// Creates the entry, in `pending_approval`.
    Requested {
        entry: Box<ApprovalEntry>,
    },
    Decided {
        approved: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        by: String,
        /// The arguments the approver edited in; the requested ones stay in `requested`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        args: Option<serde_json::Map<String, Value>>,
    },
    /// Undecided past its expiry.
    Expired,
    /// Withdrawn before a decision; `by` is who withdrew it (`cli`, `web`, `agent`, `session`).
    Cancelled {
        by: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Approved, but the action cannot run until the vault is unlocked.
    AwaitingVault,
    /// Journaled and fsynced before execution begins.
    Started,
    Finished {
        outcome: Outcome,
    },
    /// Found `running` at restart: failed, never re-run.
    Recovered {
        reason: String,
    },
}

impl EventKind {
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Requested { .. } => "requested",
            EventKind::Decided { .. } => "decided",
            EventKind::Expired => "expired",
            EventKind::Cancelled { .. } => "cancelled",
            EventKind::AwaitingVault => "awaiting_vault",
            EventKind::Started => "started",
            EventKind::Finished { .. } => "finished",
            EventKind::Recovered { .. } => "recovered",
        }
    }

    /// The state this event moves an entry to; `None` for `requested`, which creates the entry.
    pub fn target(&self) -> Option<ApprovalState> {
        match self {
            EventKind::Requested { .. } => None,
            EventKind::Decided { approved: true, .. } => Some(ApprovalState::Approved),
            EventKind::Decided { approved: false, .. } => Some(ApprovalState::Denied),
            EventKind::Expired => Some(ApprovalState::Expired),
            EventKind::Cancelled { .. } => Some(ApprovalState::Cancelled),
            EventKind::AwaitingVault => Some(ApprovalState::AwaitingVault),
            EventKind::Started => Some(ApprovalState::Running),
            EventKind::Finished { outcome: Outcome::Completed { .. } } => Some(ApprovalState::Completed),
            EventKind::Finished { outcome: Outcome::Failed { .. } } | EventKind::Recovered { .. } => {
                Some(ApprovalState::Failed)
            }
        }
    }
}

/// An event before the journal writer numbers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEvent {
    /// UTC RFC 3339.
    pub at: String,
    pub id: ApprovalId,
    #[serde(flatten)]
    pub kind: EventKind,
}

impl JournalEvent {
    /// The `requested` event registering `entry`, stamped with its request time.
    pub fn requested(entry: &ApprovalEntry) -> JournalEvent {
        JournalEvent {
            at: entry.requested_at.clone(),
            id: entry.id.clone(),
            kind: EventKind::Requested { entry: Box::new(entry.clone()) },
        }
    }

    /// Numbers the event; the writer counts lines from 1.
    pub fn sequenced(self, seq: u64) -> JournalLine {
        JournalLine { seq, event: self }
    }
}

/// One line of `approvals.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalLine {
    pub seq: u64,
    #[serde(flatten)]
    pub event: JournalEvent,
}

impl JournalLine {
    /// The line as written, without its newline.
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a journal line is plain JSON data")
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    #[error("an event for approval `{event}` cannot apply to approval `{entry}`")]
    WrongEntry { entry: ApprovalId, event: ApprovalId },
    #[error("approval `{0}` is already registered")]
    AlreadyRequested(ApprovalId),
    #[error("approval `{id}`: `{event}` is not allowed now: {transition}")]
    Illegal { id: ApprovalId, event: &'static str, transition: IllegalTransition },
}

impl ApprovalEntry {
    /// Applies one event's effect. The same code runs live and at replay, so the journal always
    /// reproduces what the daemon held in memory.
    pub fn apply(&mut self, event: &JournalEvent) -> Result<(), ApplyError> {
        if event.id != self.id {
            return Err(ApplyError::WrongEntry { entry: self.id.clone(), event: event.id.clone() });
        }
        let Some(target) = event.kind.target() else {
            return Err(ApplyError::AlreadyRequested(self.id.clone()));
        };
        let next = self.state.transition(target).map_err(|transition| ApplyError::Illegal {
            id: self.id.clone(),
            event: event.kind.name(),
            transition,
        })?;
        match &event.kind {
            EventKind::Requested { .. } | EventKind::AwaitingVault | EventKind::Started => {}
            EventKind::Decided { reason, by, args, .. } => {
                self.decided_at = Some(event.at.clone());
                self.decided_by = Some(by.clone());
                self.reason = reason.clone();
                self.edited_args = args.clone();
            }
            EventKind::Cancelled { reason, by } => {
                self.decided_at = Some(event.at.clone());
                self.decided_by = Some(by.clone());
                self.reason = reason.clone();
            }
            EventKind::Expired => {
                self.decided_at = Some(event.at.clone());
                self.decided_by = Some(EXPIRY.to_string());
            }
            EventKind::Finished { outcome: Outcome::Completed { audit_id, result } } => {
                self.audit_id = Some(audit_id.clone());
                self.result = Some(result.clone());
            }
            EventKind::Finished { outcome: Outcome::Failed { failure } } => {
                self.audit_id = failure.audit_id.clone();
                self.failure = Some(failure.clone());
            }
            EventKind::Recovered { reason } => self.failure = Some(recovery_failure(reason)),
        }
        self.state = next;
        Ok(())
    }

    /// The entry after `kind` happens at `at`, and the event to journal before acting on it.
    pub fn advance(&self, at: &str, kind: EventKind) -> Result<(ApprovalEntry, JournalEvent), ApplyError> {
        let event = JournalEvent { at: at.to_string(), id: self.id.clone(), kind };
        let mut next = self.clone();
        next.apply(&event)?;
        Ok((next, event))
    }
}

/// The failure an entry recovered at restart reports. Not retriable: a blind retry could repeat
/// side effects the interrupted run already had.
fn recovery_failure(reason: &str) -> Failure {
    Failure::runtime_error(Boundary::Runtime, reason).with_detail("recovered", true)
}

/// A damaged line before the end of the journal: replay stops at it (see the module doc).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line} is not a journal event ({message}) and is not the last line")]
pub struct UnreadableLine {
    /// 1-based.
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplayError {
    #[error("approvals.jsonl line {line}: `{event}` for unknown approval `{id}`; the event was skipped")]
    UnknownId { line: usize, id: ApprovalId, event: &'static str },
    #[error(
        "approvals.jsonl line {line}: the `requested` event for `{id}` does not carry a new pending entry \
         of that id; the event was skipped"
    )]
    InvalidRequest { line: usize, id: ApprovalId },
    #[error("approvals.jsonl line {line}: {error}; the event was skipped")]
    Rejected { line: usize, error: ApplyError },
    /// Reported, and the event still applied: file order is the truth of an append-only journal.
    #[error(
        "approvals.jsonl line {line}: seq {seq} does not follow {previous} (hint: the journal was edited by hand \
         or written by two daemons)"
    )]
    SeqNotIncreasing { line: usize, seq: u64, previous: u64 },
}

/// The queue rebuilt from the journal at daemon start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplayResult {
    /// Every registered approval in its current state; ids sort by request time.
    pub entries: BTreeMap<ApprovalId, ApprovalEntry>,
    /// Approved or awaiting the vault and never started: the daemon executes each once
    /// (journaling `started` first).
    pub to_resume: Vec<ApprovalId>,
    /// Were `running`, now `failed` in `entries`; the daemon journals a `recovered` event for each.
    pub recovered: Vec<(ApprovalId, String)>,
    /// The last line was torn by a crash mid-append and was dropped.
    pub torn_tail: bool,
    /// Length in bytes of the journal up to the end of the last whole line. When `torn_tail` is
    /// set the daemon truncates the file to this length before appending.
    pub intact_len: usize,
    /// The highest `seq` seen; the next event is numbered `last_seq + 1`.
    pub last_seq: u64,
    pub errors: Vec<ReplayError>,
    /// Replay stopped at this damaged line: `entries` hold only the lines before it (and
    /// `intact_len` ends there). The daemon must not start on such a result.
    pub unreadable: Option<UnreadableLine>,
}

/// Rebuilds the approval queue from the whole text of `approvals.jsonl`.
pub fn replay(journal: &str) -> ReplayResult {
    let mut result = ReplayResult::default();
    let mut segments = journal.split_inclusive('\n').enumerate();
    while let Some((index, segment)) = segments.next() {
        let line = index + 1;
        let Some(text) = segment.strip_suffix('\n') else {
            // Only the last segment can lack its newline: the append never completed.
            result.torn_tail = true;
            break;
        };
        if !text.trim().is_empty() {
            match serde_json::from_str::<JournalLine>(text) {
                Ok(parsed) => result.apply_line(line, parsed),
                // Blank lines after it carry nothing: it is still the last event written.
                Err(_) if segments.clone().all(|(_, rest)| rest.trim().is_empty()) => {
                    result.torn_tail = true;
                    break;
                }
                Err(error) => {
                    result.unreadable = Some(UnreadableLine { line, message: error.to_string() });
                    break;
                }
            }
        }
        result.intact_len += segment.len();
    }
    for (id, entry) in &mut result.entries {
        match entry.state.on_restart() {
            RestartAction::Resume => result.to_resume.push(id.clone()),
            RestartAction::RecoverAsFailed => {
                entry.state = ApprovalState::Failed;
                entry.failure = Some(recovery_failure(RECOVERY_REASON));
                result.recovered.push((id.clone(), RECOVERY_REASON.to_string()));
            }
            RestartAction::KeepWaiting | RestartAction::Keep => {}
        }
    }
    result
}

impl ReplayResult {
    fn apply_line(&mut self, line: usize, JournalLine { seq, event }: JournalLine) {
        if seq <= self.last_seq {
            self.errors.push(ReplayError::SeqNotIncreasing { line, seq, previous: self.last_seq });
        }
        self.last_seq = self.last_seq.max(seq);
        let id = event.id.clone();
        if let EventKind::Requested { entry } = event.kind {
            if entry.id != id || entry.state != ApprovalState::PendingApproval {
                self.errors.push(ReplayError::InvalidRequest { line, id });
            } else {
                match self.entries.entry(id) {
                    Entry::Occupied(first) => {
                        let error = ApplyError::AlreadyRequested(first.key().clone());
                        self.errors.push(ReplayError::Rejected { line, error });
                    }
                    Entry::Vacant(slot) => {
                        slot.insert(*entry);
                    }
                }
            }
            return;
        }
        match self.entries.get_mut(&id) {
            None => self.errors.push(ReplayError::UnknownId { line, id, event: event.kind.name() }),
            Some(entry) => {
                if let Err(error) = entry.apply(&event) {
                    self.errors.push(ReplayError::Rejected { line, error });
                }
            }
        }
    }
}
