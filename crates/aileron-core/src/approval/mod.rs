//! The human approval gate (SPEC §7–8) as data and decisions: approval ids, the state machine,
//! the entry an approval card shows, the `approvals.jsonl` journal and its replay, the decide
//! rule, the `aileron.approval.*` audit payloads and the texts the agent sees. No IO: the daemon
//! writes the journal, fsyncs it, runs the action and serves the page.
//!
//! # Exactly once
//! An approved action must run once, also across concurrent decides and crashes. The argument:
//! 1. Every change is an event journaled (appended and fsynced) before anyone acts on it, and
//!    the same [`ApprovalEntry::apply`] produces the live state and the replayed state.
//! 2. A decision is accepted only from `pending_approval` ([`decide`]); the daemon serialises
//!    decides on one entry, so of two concurrent decides the second finds `approved` or `denied`
//!    and gets [`DecideError::NotPending`] (404). A second `decided` line in the journal is an
//!    illegal transition at replay and is reported, not applied: the first decision wins.
//! 3. The `started` event is journaled and fsynced BEFORE execution begins. So:
//!    - crash between `decided` and `started`: replay finds `approved` (or `awaiting_vault`) and
//!      lists it in [`ReplayResult::to_resume`]; the daemon journals `started` and runs it once.
//!      A crash while writing `started` leaves a torn last line, which replay drops, so the entry
//!      is still `approved` and nothing has run yet.
//!    - crash between `started` and `finished`: replay finds `running`, marks it `failed` with an
//!      explanation ([`ReplayResult::recovered`]) and never re-runs it, because its side effects
//!      may already have happened. Such an action ran at most once; the user decides what next.
//!    - crash after `finished`: the result is served from the journal.
//! 4. Before appending, the daemon truncates a torn tail to [`ReplayResult::intact_len`], and an
//!    append that fails partway is cut back off before anything else is appended; otherwise the
//!    next event would follow a damaged line. A damaged line that is not the last stops the replay
//!    ([`ReplayResult::unreadable`]) and the daemon refuses to start: skipping it could forget the
//!    `decided`, `started` or `finished` that keeps an action from running twice.
//!
//! The approval binds to the exact arguments registered (`args` is written once, in `requested`,
//! and no event changes it) and to the exact action file bytes (`action_sha256`, checked by
//! [`ApprovalEntry::verify_action`] before execution), so neither can change after approval.

mod admission;
mod decision;
mod id;
mod journal;
pub mod notify;
mod payload;
mod preview;
mod response;
mod state;
mod timestamp;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::action::ActionFile;
use crate::failure::Failure;
use crate::identity::{ContentHash, Fqn};

pub use admission::{Admission, AdmissionRequest, MAX_PENDING_PER_SESSION, admit};
pub use decision::{DecideError, Decision, MAX_REASON_CHARS, decide, normalize_reason};
pub use id::{ApprovalId, ApprovalIdError};
pub use journal::{
    ApplyError, EXPIRY, EventKind, JournalEvent, JournalLine, Outcome, RECOVERY_REASON, ReplayError, ReplayResult,
    UnreadableLine, replay,
};
pub use payload::{ApprovalDecision, decision_payload, keys, requested_payload};
pub use preview::{ApprovalPreview, MAX_PREVIEW_VALUE_CHARS, PreviewField, render_preview};
pub use response::{PendingApproval, ResultView, pending_message, review_url};
pub use state::{ApprovalState, IllegalTransition, RestartAction};

/// What a gate covers: an action run, or one request of a launched agent's own tool that matched
/// an `approval = true` operation at its proxy (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    #[default]
    Action,
    HttpRequest,
}

impl ApprovalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalKind::Action => "action",
            ApprovalKind::HttpRequest => "http_request",
        }
    }
}

/// How long a pending approval waits for a decision unless its action says otherwise (24 h).
pub const DEFAULT_EXPIRY_MS: u64 = 24 * 60 * 60 * 1000;
/// The longest `expires_after` an action may ask for (7 days).
pub const MAX_EXPIRY_MS: u64 = 7 * 24 * 60 * 60 * 1000;
/// The shortest (1 minute): less would expire before a human could read the card.
pub const MIN_EXPIRY_MS: u64 = 60 * 1000;

/// `expires_after` (`"30m"`, `"4h"`, `"2d"`, `"1h30m"`, `"90s"`) in milliseconds, within
/// [`MIN_EXPIRY_MS`]..=[`MAX_EXPIRY_MS`].
pub fn parse_expiry(text: &str) -> Result<u64, String> {
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => return Err(format!("`{text}` is not a duration (`{c}` is not one of the units s, m, h, d)")),
        };
        let count: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration (a unit without a number)"))?;
        total = total.saturating_add(count.saturating_mul(unit));
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(format!("`{text}` is not a duration (each number needs a unit: s, m, h or d)"));
    }
    if !(MIN_EXPIRY_MS..=MAX_EXPIRY_MS).contains(&total) {
        return Err(format!("`{text}` is outside 1m..7d"));
    }
    Ok(total)
}

/// Bodies shown on an `http_request` card: the first this many bytes (the hash covers all).
pub const MAX_HTTP_BODY_PREVIEW_BYTES: usize = 64 * 1024;

/// A held request's body as every surface shows it (the console's card, `approval list`, MCP):
/// its text, and, before it, what is not shown of it. A body cut silently let an agent
/// put a second `"config"` past the cut, which the upstream's parser read and the user never saw
/// (the twenty-fourth re-attack); bytes that are not UTF-8 are shown as U+FFFD and counted.
fn body_shown(body: &[u8]) -> String {
    let cut = body.len().min(MAX_HTTP_BODY_PREVIEW_BYTES);
    let text = String::from_utf8_lossy(&body[..cut]);
    let mut notes = String::new();
    if cut < body.len() {
        notes.push_str(&format!(
            "[aileron: only the first {cut} of this body's {} bytes are shown; approving sends the other {} unseen: \
             deny unless you expected a body this large]\n",
            body.len(),
            body.len() - cut
        ));
    }
    // Bytes that are not UTF-8, or a sequence the body ends in unfinished (not one the cut split).
    let unfinished_at_the_end = cut == body.len();
    if std::str::from_utf8(&body[..cut]).is_err_and(|error| error.error_len().is_some() || unfinished_at_the_end) {
        notes
            .push_str("[aileron: this body is not all UTF-8 text; the bytes shown as \u{fffd} are sent as they are]\n");
    }
    notes + &text
}

/// A launched agent's request held at the proxy, as its approval card shows it.
#[derive(Debug, Clone)]
pub struct HttpRequestApproval<'a> {
    pub id: ApprovalId,
    pub connector: &'a Fqn,
    /// The `[[proxy.operations]]` entry it matched.
    pub operation: &'a str,
    pub method: &'a str,
    /// `host:port`.
    pub host: &'a str,
    /// Path and query as sent.
    pub target: &'a str,
    pub body: &'a [u8],
    pub requested_at: String,
    pub session_id: &'a str,
    pub unconfined: bool,
}

impl HttpRequestApproval<'_> {
    /// What a permit is bound to: method, host, path and query, and the body's SHA-256 — an
    /// approved request is forwarded only if it is this one (SPEC §15's "identical request").
    pub fn identity(&self) -> ContentHash {
        self.identity_with(&[])
    }

    /// The same, and `headers` (lower-case names, each value as sent): a retry that changes what
    /// a header asks for (`content-type`, an `x-amz-acl`, an `if-match`) is another request.
    pub fn identity_with(&self, headers: &[(String, String)]) -> ContentHash {
        let body = ContentHash::of_bytes(self.body);
        let mut text = format!("{}\n{}\n{}\n{body}", self.method, self.host, self.target);
        for (name, value) in sorted_headers(headers) {
            text.push_str(&format!("\n{name}: {value}"));
        }
        ContentHash::of_bytes(text.as_bytes())
    }
}

/// `headers` ordered by name, each name's values in the order sent.
fn sorted_headers(headers: &[(String, String)]) -> Vec<&(String, String)> {
    let mut sorted: Vec<&(String, String)> = headers.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    sorted
}

/// One approval, as journaled, shown on the card and served by the result endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalEntry {
    pub id: ApprovalId,
    pub kind: ApprovalKind,
    pub action: String,
    pub action_version: String,
    /// SHA-256 of the exact action file bytes, so an edited action cannot run under an old approval.
    pub action_sha256: ContentHash,
    /// The exact arguments registered; written once, never changed by any event.
    pub args: Map<String, Value>,
    /// `None` when the action has no `[approval.preview]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<ApprovalPreview>,
    /// UTC RFC 3339, e.g. `2026-11-22T05:37:00.123Z`.
    pub requested_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The decider's reason (on denials, when supplied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub state: ApprovalState,
    /// Audit id of the execution's record (`action.executed` or `execution.failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Requested by an agent that runs outside `aileron launch`'s containment (launched with
    /// `--unconfined`, or an agent host that started `aileron-mcp` itself): it could read the
    /// user's files, so every surface that shows the approval says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unconfined: bool,
    /// The connector of the action's first step, the one the preview op also runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_fqn: Option<Fqn>,
    /// How long it may wait for a decision, from `requested_at`; `None` (entries journaled
    /// before expiry existed) means [`DEFAULT_EXPIRY_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_after_ms: Option<u64>,
    /// The arguments the approver edited in (the run uses these; `args` stays what was asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edited_args: Option<Map<String, Value>>,
    /// Why a policy rule asks a human (its `@ask("...")`, SPEC §16), when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_reason: Option<String>,
}

/// The inputs of a new approval; [`ApprovalEntry::pending`] derives the rest from the action.
#[derive(Debug, Clone)]
pub struct ApprovalRequest<'a> {
    pub id: ApprovalId,
    pub action: &'a ActionFile,
    /// Already validated against the action's inputs.
    pub args: Map<String, Value>,
    pub preview: Option<ApprovalPreview>,
    pub requested_at: String,
    pub session_id: Option<String>,
    pub unconfined: bool,
    /// Why a policy rule asks for this approval, when one does.
    pub policy_reason: Option<String>,
}

impl ApprovalEntry {
    /// A new entry in `pending_approval`.
    pub fn pending(request: ApprovalRequest<'_>) -> ApprovalEntry {
        let ApprovalRequest { id, action, args, preview, requested_at, session_id, unconfined, policy_reason } =
            request;
        ApprovalEntry {
            action: action.name.clone(),
            action_version: action.version.to_string(),
            action_sha256: action.sha256().clone(),
            args,
            preview,
            session_id,
            unconfined,
            policy_reason,
            connector_fqn: action.steps.first().map(|step| step.connector.clone()),
            expires_after_ms: Some(action.approval.expires_after_ms.unwrap_or(DEFAULT_EXPIRY_MS)),
            ..ApprovalEntry::waiting(id, ApprovalKind::Action, requested_at)
        }
    }

    /// What every new entry starts with: no decision, no outcome.
    fn waiting(id: ApprovalId, kind: ApprovalKind, requested_at: String) -> ApprovalEntry {
        ApprovalEntry {
            id,
            kind,
            action: String::new(),
            action_version: String::new(),
            action_sha256: ContentHash::of_bytes(b""),
            args: Map::new(),
            preview: None,
            requested_at,
            decided_at: None,
            decided_by: None,
            reason: None,
            state: ApprovalState::PendingApproval,
            audit_id: None,
            result: None,
            failure: None,
            session_id: None,
            unconfined: false,
            connector_fqn: None,
            expires_after_ms: Some(DEFAULT_EXPIRY_MS),
            edited_args: None,
            policy_reason: None,
        }
    }

    /// A new `http_request` entry in `pending_approval`: `action` names the operation
    /// (`<fqn>#<operation>`), `action_sha256` is the request's identity, `args` what the card
    /// shows (method, host, path and query, the body's hash and its first 64 KiB as text).
    pub fn http_request(request: HttpRequestApproval<'_>) -> ApprovalEntry {
        ApprovalEntry::http_request_with_headers(request, &[])
    }

    /// The same, the request's `headers` shown on the card (`args.headers`, one entry a name, its
    /// values joined by `, `) and bound in its identity ([`HttpRequestApproval::identity_with`]).
    pub fn http_request_with_headers(request: HttpRequestApproval<'_>, headers: &[(String, String)]) -> ApprovalEntry {
        let mut args = Map::new();
        args.insert("method".into(), request.method.into());
        args.insert("host".into(), request.host.into());
        args.insert("path".into(), request.target.into());
        args.insert("body_sha256".into(), ContentHash::of_bytes(request.body).to_string().into());
        args.insert("body_bytes".into(), request.body.len().into());
        if !request.body.is_empty() {
            args.insert("body".into(), body_shown(request.body).into());
        }
        if !headers.is_empty() {
            let mut shown = Map::new();
            for (name, value) in sorted_headers(headers) {
                let joined = match shown.get(name).and_then(Value::as_str) {
                    Some(before) => format!("{before}, {value}"),
                    None => value.clone(),
                };
                shown.insert(name.clone(), joined.into());
            }
            args.insert("headers".into(), shown.into());
        }
        ApprovalEntry {
            action: format!("{}#{}", request.connector, request.operation),
            action_sha256: request.identity_with(headers),
            args,
            session_id: Some(request.session_id.to_string()),
            unconfined: request.unconfined,
            connector_fqn: Some(request.connector.clone()),
            ..ApprovalEntry::waiting(request.id.clone(), ApprovalKind::HttpRequest, request.requested_at.clone())
        }
    }

    /// Checks that `action` is byte for byte the action this entry was approved for. The daemon
    /// calls it right before execution; on error it finishes the entry with the returned failure.
    pub fn verify_action(&self, action: &ActionFile) -> Result<(), Failure> {
        if action.name == self.action && *action.sha256() == self.action_sha256 {
            return Ok(());
        }
        Err(Failure::hash_mismatch(format!(
            "action `{}` changed after approval `{}` was requested, so it was not run; \
             hint: call the action again to ask for a new approval",
            self.action, self.id
        ))
        .with_detail("approved_sha256", self.action_sha256.to_string())
        .with_detail("current_sha256", action.sha256().to_string()))
    }

    /// Whether this entry was decided at most `window_ms` before `now` (RFC 3339, as the queue
    /// writes it): how long an approved `http_request` stays a permit for its identical retry.
    pub fn decided_within(&self, now: &str, window_ms: u64) -> bool {
        self.decided_at
            .as_deref()
            .and_then(|decided| timestamp::millis_between(decided, now))
            .is_some_and(|ms| ms <= window_ms)
    }

    /// The arguments an approved run uses: the approver's edit, else the requested ones.
    pub fn run_args(&self) -> &Map<String, Value> {
        self.edited_args.as_ref().unwrap_or(&self.args)
    }

    /// How long this entry may wait for a decision.
    pub fn expiry_ms(&self) -> u64 {
        self.expires_after_ms.unwrap_or(DEFAULT_EXPIRY_MS)
    }

    /// Whether this entry is still pending at `now` (RFC 3339) although its expiry has passed.
    pub fn is_due_to_expire(&self, now: &str) -> bool {
        self.state == ApprovalState::PendingApproval
            && timestamp::millis_between(&self.requested_at, now).is_some_and(|waited| waited >= self.expiry_ms())
    }

    /// Milliseconds left before expiry at `now` (zero once due), while pending.
    pub fn expires_in_ms(&self, now: &str) -> Option<u64> {
        (self.state == ApprovalState::PendingApproval)
            .then(|| timestamp::millis_between(&self.requested_at, now))
            .flatten()
            .map(|waited| self.expiry_ms().saturating_sub(waited))
    }

    /// Time from request to decision in milliseconds, once decided.
    pub fn wait_ms(&self) -> Option<u64> {
        timestamp::millis_between(&self.requested_at, self.decided_at.as_deref()?)
    }

    /// The human decision this entry carries, if any.
    pub fn decision(&self) -> Option<ApprovalDecision> {
        match self.state {
            ApprovalState::PendingApproval => None,
            ApprovalState::Denied => Some(ApprovalDecision::Denied),
            ApprovalState::Expired => Some(ApprovalDecision::Timeout),
            ApprovalState::Cancelled => Some(ApprovalDecision::Cancelled),
            ApprovalState::Approved
            | ApprovalState::AwaitingVault
            | ApprovalState::Running
            | ApprovalState::Completed
            | ApprovalState::Failed => Some(ApprovalDecision::Approved),
        }
    }
}
