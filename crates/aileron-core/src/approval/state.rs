//! The approval state machine (SPEC §8) and what a daemon restart does with each state.
//!
//! ```text
//! pending_approval ──► denied | expired | cancelled
//!        │
//!        ▼
//!    approved ──► awaiting_vault ──► running ──► completed | failed
//!        │                              ▲
//!        └──────────────────────────────┘
//! ```
//! Every other pair is an [`IllegalTransition`]; in particular nothing leaves a terminal state,
//! which is what makes a second decide, a second `started` or a second `finished` harmless.

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// Registered; waiting for a human.
    PendingApproval,
    /// A human approved; execution has not started.
    Approved,
    /// Approved, but a binding needs the vault unlocked before the action can run.
    AwaitingVault,
    /// `started` is journaled: the action may have side effects from here on.
    Running,
    Completed,
    Denied,
    Failed,
    /// Nobody decided before its expiry (SPEC §8 `expires_after`).
    Expired,
    /// Withdrawn before a decision: its session ended, the user cancelled it, or the asking
    /// agent withdrew it.
    Cancelled,
}

impl ApprovalState {
    pub const ALL: [ApprovalState; 9] = [
        ApprovalState::PendingApproval,
        ApprovalState::Approved,
        ApprovalState::AwaitingVault,
        ApprovalState::Running,
        ApprovalState::Completed,
        ApprovalState::Denied,
        ApprovalState::Failed,
        ApprovalState::Expired,
        ApprovalState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::PendingApproval => "pending_approval",
            ApprovalState::Approved => "approved",
            ApprovalState::AwaitingVault => "awaiting_vault",
            ApprovalState::Running => "running",
            ApprovalState::Completed => "completed",
            ApprovalState::Denied => "denied",
            ApprovalState::Failed => "failed",
            ApprovalState::Expired => "expired",
            ApprovalState::Cancelled => "cancelled",
        }
    }

    /// Whether SPEC §8 allows going from `self` to `next`.
    pub fn can_become(self, next: ApprovalState) -> bool {
        use ApprovalState::*;
        matches!(
            (self, next),
            (PendingApproval, Denied | Approved | Expired | Cancelled)
                | (Approved, AwaitingVault | Running)
                | (AwaitingVault, Running)
                | (Running, Completed | Failed)
        )
    }

    /// `next` when the move is legal, else the error value naming both ends.
    pub fn transition(self, next: ApprovalState) -> Result<ApprovalState, IllegalTransition> {
        if self.can_become(next) { Ok(next) } else { Err(IllegalTransition { from: self, to: next }) }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ApprovalState::Completed
                | ApprovalState::Denied
                | ApprovalState::Failed
                | ApprovalState::Expired
                | ApprovalState::Cancelled
        )
    }

    /// What the daemon does with an entry found in this state when it replays the journal.
    pub fn on_restart(self) -> RestartAction {
        match self {
            ApprovalState::PendingApproval => RestartAction::KeepWaiting,
            ApprovalState::Approved | ApprovalState::AwaitingVault => RestartAction::Resume,
            ApprovalState::Running => RestartAction::RecoverAsFailed,
            ApprovalState::Completed
            | ApprovalState::Denied
            | ApprovalState::Failed
            | ApprovalState::Expired
            | ApprovalState::Cancelled => RestartAction::Keep,
        }
    }
}

impl fmt::Display for ApprovalState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The restart decision for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartAction {
    /// Still waiting for a human: show it again.
    KeepWaiting,
    /// Approved but never started: execute it, once.
    Resume,
    /// Started but never finished: side effects may have happened, so mark it failed and never re-run.
    RecoverAsFailed,
    /// Terminal: only its result is served.
    Keep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an approval cannot go from `{from}` to `{to}`")]
pub struct IllegalTransition {
    pub from: ApprovalState,
    pub to: ApprovalState,
}
