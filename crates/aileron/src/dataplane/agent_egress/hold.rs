//! Approval at the proxy (SPEC §15): a request matching an `approval = true` operation waits for
//! a human. The proxy reads it whole (its body's hash binds the approval), asks
//! [`RequestApprovals::hold`] — the approval queue behind it, implemented by the workflows — and
//! forwards it once if approved in time; a later approval is a permit for one identical retry from
//! the same session. The data plane only defines the seam; it never decides.

use std::future::Future;
use std::pin::Pin;

use aileron_core::approval::ApprovalId;

/// A held request, as the approval card shows it.
pub struct HeldRequest {
    pub session_id: String,
    pub connector: aileron_core::Fqn,
    pub operation: String,
    pub method: String,
    /// `host:port`.
    pub host: String,
    /// Path and query as sent.
    pub target: String,
    pub body: bytes::Bytes,
    /// The headers that say what it does (lower-case names, values as sent): every header but the
    /// credential's, the hop-by-hop ones and those that vary per attempt without changing it
    /// (`intercept::BOUND_HEADERS_EXCEPT`). Shown on the card and bound in the approval.
    pub headers: Vec<(String, String)>,
    /// Why a policy rule asks a human (its `@ask`, SPEC §16), when it is held for that.
    pub policy_reason: Option<String>,
}

/// How a hold ended.
pub enum HoldOutcome {
    /// Approved (now, or earlier as a permit for this identical request): forward it once, then
    /// [`RequestApprovals::finish`].
    Approved(ApprovalId),
    Denied {
        id: ApprovalId,
        reason: Option<String>,
    },
    /// Not decided within the hold: the agent is told where the user decides.
    Pending {
        id: ApprovalId,
        review_url: String,
    },
    /// The approval was granted but another identical request already used it.
    Used {
        id: ApprovalId,
    },
    /// It ended without a decision: expired, or withdrawn (`class` says which).
    Ended {
        id: ApprovalId,
        class: &'static str,
        message: String,
    },
    /// Not registered (too many waiting, the queue or the audit log unavailable).
    Refused {
        class: &'static str,
        message: String,
    },
}

/// The approval queue as the proxy sees it.
pub trait RequestApprovals: Send + Sync + 'static {
    fn hold<'a>(&'a self, request: HeldRequest) -> Pin<Box<dyn Future<Output = HoldOutcome> + Send + 'a>>;

    /// Records how the approved request went: the upstream's status and the audit id of its
    /// record, or why it was not sent.
    fn finish(&self, id: &ApprovalId, status: Result<(u16, String), String>);
}
