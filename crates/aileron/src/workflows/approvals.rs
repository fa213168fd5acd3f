//! Approvals: what a principal may see, the decision (journal, audit, wait span, the approved
//! run in the background) and the result an agent polls.

use aileron_core::vocabulary::{EventType, keys};
use std::sync::Arc;

use aileron_core::approval::{
    ApprovalDecision, ApprovalEntry, ApprovalId, ApprovalKind, ApprovalState, DecideError, Decision,
    HttpRequestApproval, Outcome, ResultView, decision_payload, review_url,
};
use std::future::Future;

use crate::dataplane::agent_egress::{HeldRequest, HoldOutcome, RequestApprovals};
use crate::stores::approvals::Registered;
use aileron_core::audit::ActorType;

use crate::stores::approvals::QueueError;

use super::{Services, caller_for, require};
use crate::platform::principal::{Principal, Scope};
use crate::stores::audit_log::AuditEvent;
use crate::wire::{Answer, ApiError, ApprovalList, CancelBody, DecideBody, Reply};

/// A session token sees only its own session's approvals (SPEC §8); the local user sees all.
pub fn visible_to(principal: &Principal, entry: &aileron_core::approval::ApprovalEntry) -> bool {
    match principal {
        Principal::Session { session_id, .. } => entry.session_id.as_deref() == Some(session_id.as_str()),
        _ => true,
    }
}

pub fn pending_for(state: &Services, principal: &Principal) -> Vec<aileron_core::approval::ApprovalEntry> {
    state.approvals.pending().into_iter().filter(|entry| visible_to(principal, entry)).collect()
}

pub fn list(state: &Services, principal: &Principal) -> Answer {
    require(principal, Scope::ApprovalsPoll)?;
    Ok(Reply::ok(ApprovalList { items: pending_for(state, principal) }))
}

pub fn approval_not_found(id: &str) -> ApiError {
    ApiError::not_found("approval_not_found", format!("approval `{id}` is unknown or already decided"))
        .with_hint("list pending approvals with: aileron approval list")
}

pub async fn decide(state: &Arc<Services>, principal: &Principal, id: String, body: DecideBody) -> Answer {
    if let Err(refused) = require(principal, Scope::ApprovalsDecide) {
        // A caller without the decide scope (an agent's session token) tried to decide: on record.
        let payload = aileron_core::vocabulary::records::DecideRefused {
            approval_id: id.chars().take(100).collect(),
            code: "forbidden",
        }
        .into_payload();
        let caller = caller_for(principal);
        let event = AuditEvent {
            event_type: EventType::ApprovalDecideRefused,
            actor: caller.actor,
            session_id: caller.session_id,
            payload,
            audit_id: None,
        };
        state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
        return Err(refused);
    }
    let approval_id = ApprovalId::parse(&id).map_err(|_| approval_not_found(&id))?;
    if let Some(args) = &body.args {
        edited_args_allowed(state, &approval_id, &id, args)?;
    }
    let caller = caller_for(principal);
    let decision =
        Decision { approved: body.approved, reason: body.reason, by: caller.actor.id.clone(), args: body.args };
    let entry = match state.approvals.decide(&approval_id, decision) {
        Ok(entry) => entry,
        Err(QueueError::Unknown(_)) | Err(QueueError::Decide(DecideError::NotPending { .. })) => {
            return Err(not_pending(state, &approval_id, &id));
        }
        Err(QueueError::Decide(error @ DecideError::ReasonTooLong { .. })) => {
            return Err(ApiError::bad_request("invalid_reason", error.to_string()));
        }
        Err(QueueError::Decide(error @ DecideError::EditedDenial)) => {
            return Err(ApiError::bad_request("invalid_args", error.to_string()));
        }
        Err(error) => return Err(ApiError::internal(error)),
    };
    let decision = if body.approved { ApprovalDecision::Approved } else { ApprovalDecision::Denied };
    let event = AuditEvent {
        event_type: decision.audit_event_type().expect("approve and deny are audited"),
        actor: caller.actor,
        session_id: entry.session_id.clone(),
        payload: decision_payload(&entry, decision),
        audit_id: None,
    };
    // The decision is journaled; if it cannot be audited we answer with an error and do not run
    // it now (an approved entry resumes, once, at the next start: `resume_approved` audits its
    // decision first).
    state.audit.append(event).await.map_err(ApiError::audit_unavailable)?;
    // The wait span (request → decision) joins the requester's trace; the approved run follows it.
    let waited = state.telemetry.approval_wait(&entry, decision);
    // An approved `http_request` is used by the request held at the proxy, or by its identical
    // retry: nothing runs here.
    if body.approved && entry.kind == ApprovalKind::Action {
        let run = crate::runner::execute_approved(state.clone(), approval_id);
        tokio::spawn(opentelemetry::context::FutureExt::with_context(run, waited));
    }
    Ok(Reply::no_content())
}

/// Whether `args` may replace the arguments of approval `id` (SPEC §8 "Edit before approve"): it
/// is a pending action approval (a held request's bytes are what they are) and they satisfy the
/// action's inputs. The action, its steps and its capabilities are unchanged, so an edit cannot
/// widen what the run may touch: the same checks apply to whatever the arguments name.
fn edited_args_allowed(
    state: &Services,
    approval_id: &ApprovalId,
    id: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Result<std::sync::Arc<aileron_core::action::ActionFile>, ApiError> {
    let entry = state.approvals.get(approval_id).ok_or_else(|| approval_not_found(id))?;
    if entry.kind != ApprovalKind::Action {
        return Err(ApiError::bad_request(
            "invalid_args",
            "a held request is approved or denied as sent; its arguments cannot be edited",
        ));
    }
    if entry.state != ApprovalState::PendingApproval {
        return Err(not_pending(state, approval_id, id));
    }
    let installed = state.actions.get(&entry.action).ok_or_else(|| {
        ApiError::bad_request("invalid_args", format!("action `{}` is no longer installed", entry.action))
    })?;
    installed.file.validate_call_args(args).map_err(|error| {
        ApiError::bad_request("invalid_args", format!("the edited arguments: {}", error.message()))
            .with_hint(error.hint())
    })?;
    Ok(installed.file.clone())
}

/// The preview of a pending action approval with edited arguments (SPEC §8: the preview is shown
/// again before approving with them); nothing is decided.
pub async fn edit_preview(
    state: &Arc<Services>,
    principal: &Principal,
    id: String,
    body: crate::wire::EditPreviewBody,
) -> Answer {
    require(principal, Scope::ApprovalsDecide)?;
    let approval_id = ApprovalId::parse(&id).map_err(|_| approval_not_found(&id))?;
    let action = edited_args_allowed(state, &approval_id, &id, &body.args)?;
    let caller = caller_for(principal);
    let preview = crate::runner::preview_for(state, &action, &body.args, &caller).await;
    Ok(Reply::ok(crate::wire::EditPreview { args: body.args, preview }))
}

/// 404 for an approval that cannot be decided or withdrawn: unknown, or already ended — saying
/// how, when it expired or was withdrawn (nothing ran either way).
fn not_pending(state: &Services, approval_id: &ApprovalId, id: &str) -> ApiError {
    let Some(entry) = state.approvals.get(approval_id) else { return approval_not_found(id) };
    let message = match entry.state {
        ApprovalState::Expired => format!("approval `{id}` expired before anyone decided it; nothing ran"),
        ApprovalState::Cancelled => {
            let by = entry.decided_by.as_deref().unwrap_or("someone");
            format!("approval `{id}` was withdrawn ({by}) before a decision; nothing ran")
        }
        _ => return approval_not_found(id),
    };
    ApiError::not_found("approval_not_found", message)
        .with_hint("the agent asks again if the action is still wanted; aileron approval list shows what waits")
}

/// Withdraws a pending approval (SPEC §8): the local user (`aileron approval cancel`, the
/// console) or the agent whose session asked (`cancel_action`). A session token reaches only its
/// own session's approvals, and withdrawing is not deciding: nothing runs.
pub async fn cancel(state: &Arc<Services>, principal: &Principal, id: String, body: CancelBody) -> Answer {
    require(principal, Scope::ApprovalsPoll)?;
    let approval_id = ApprovalId::parse(&id).map_err(|_| approval_not_found(&id))?;
    // Another session's approval is as unknown to this token as a made-up id.
    if !state.approvals.get(&approval_id).is_some_and(|entry| visible_to(principal, &entry)) {
        return Err(approval_not_found(&id));
    }
    let caller = caller_for(principal);
    let by = match principal {
        Principal::Session { .. } => "agent".to_string(),
        _ => caller.actor.id.clone(),
    };
    let reason = aileron_core::approval::normalize_reason(body.reason.as_deref())
        .map_err(|error| ApiError::bad_request("invalid_reason", error.to_string()))?;
    let entry = match state.approvals.cancel(&approval_id, &by, reason) {
        Ok(entry) => entry,
        Err(QueueError::Unknown(_) | QueueError::NotPending(_)) => return Err(not_pending(state, &approval_id, &id)),
        Err(error) => return Err(ApiError::internal(error)),
    };
    audit_ended(state, &entry, caller.actor).await.map_err(ApiError::audit_unavailable)?;
    Ok(Reply::no_content())
}

/// Withdraws every approval still pending for `session_id` (its session ended), each audited.
pub async fn cancel_session(state: &Services, session_id: &str) {
    let pending: Vec<ApprovalId> = state
        .approvals
        .pending()
        .into_iter()
        .filter(|entry| entry.session_id.as_deref() == Some(session_id))
        .map(|entry| entry.id)
        .collect();
    for id in pending {
        let reason = Some("the session that asked ended".to_string());
        if let Ok(entry) = state.approvals.cancel(&id, "session", reason) {
            let actor = aileron_core::audit::Actor::new(ActorType::Agent, session_id.to_string());
            if let Err(error) = audit_ended(state, &entry, actor).await {
                log_line!("aileron daemon: approval {id} was cancelled but could not be audited: {error}");
            }
        }
    }
}

/// Ends every pending approval whose expiry has passed (SPEC §8: `expired`), each audited once:
/// an expiry racing a decision or a withdrawal loses or wins under the queue lock, never both.
pub async fn expire_due(state: &Services) {
    for id in state.approvals.due_to_expire(&crate::stores::approvals::now()) {
        if let Ok(entry) = state.approvals.expire(&id) {
            let actor = aileron_core::audit::Actor::new(ActorType::Service, aileron_core::approval::EXPIRY);
            if let Err(error) = audit_ended(state, &entry, actor).await {
                log_line!("aileron daemon: approval {id} expired but could not be audited: {error}");
            }
        }
    }
}

/// How often pending approvals are checked for expiry.
pub const EXPIRY_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Checks for expired approvals now (start-up: the daemon may have been down past an expiry) and
/// then every [`EXPIRY_CHECK_INTERVAL`] until shutdown.
pub async fn expire_in_background(state: Arc<Services>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    loop {
        expire_due(&state).await;
        tokio::select! {
            () = tokio::time::sleep(EXPIRY_CHECK_INTERVAL) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// `approval.expired` / `approval.cancelled` for an entry that ended without a decision, and its
/// wait span (decision `timeout` / `cancelled`).
async fn audit_ended(
    state: &Services,
    entry: &ApprovalEntry,
    actor: aileron_core::audit::Actor,
) -> Result<(), crate::stores::audit_log::AuditError> {
    let decision = entry.decision().expect("an ended entry carries its decision");
    let event = AuditEvent {
        event_type: decision.audit_event_type().expect("expiry and withdrawal are audited"),
        actor,
        session_id: entry.session_id.clone(),
        payload: decision_payload(entry, decision),
        audit_id: None,
    };
    state.audit.append(event).await?;
    state.telemetry.approval_wait(entry, decision);
    Ok(())
}

pub fn result(state: &Services, principal: &Principal, id: String) -> Answer {
    require(principal, Scope::ApprovalsPoll)?;
    let unknown = || {
        ApiError::not_found("approval_not_found", format!("approval `{id}` is unknown")).with_hint(format!(
            "list pending approvals with: aileron approval list; the daemon keeps the results of the {} most recent \
                 finished approvals, older ones are in the audit log (aileron audit list --json)",
            crate::stores::approvals::Retention::default().finished
        ))
    };
    let approval_id = ApprovalId::parse(&id).map_err(|_| unknown())?;
    // Another session's approval is as unknown to this token as a made-up id.
    let entry = state.approvals.get(&approval_id).filter(|entry| visible_to(principal, entry)).ok_or_else(unknown)?;
    Ok(Reply::ok(ResultView::of(&entry)))
}

/// Start-up recovery of the approval queue: entries found running when the daemon died are
/// audited as failed (never re-run), approved ones not yet started run once ([`resume_approved`]).
pub fn resume_at_start(services: &Arc<Services>) {
    let (resume, recovered) = services.take_recovery();
    for id in recovered {
        tokio::spawn(crate::runner::audit_recovered(services.clone(), id));
    }
    for id in resume {
        // An approved `http_request` not yet used stays a permit for its identical retry.
        if services.approvals.get(&id).is_some_and(|entry| entry.kind == ApprovalKind::HttpRequest) {
            continue;
        }
        tokio::spawn(resume_approved(services.clone(), id));
    }
}

/// How long an approved `http_request` is a permit for the identical retry (SPEC §15).
pub const PERMIT_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The approval queue behind a launched agent's proxy (SPEC §15 "Approval at the proxy"): a held
/// request registers an `http_request` approval (or joins the identical one already waiting),
/// audited `approval.requested`, and waits up to `hold` for the decision a human makes in the
/// console or the CLI; an identical request after a late approval uses it once.
pub struct ProxyApprovals {
    pub services: Arc<Services>,
    pub hold: std::time::Duration,
    pub unconfined: bool,
}

impl RequestApprovals for ProxyApprovals {
    fn hold<'a>(&'a self, request: HeldRequest) -> std::pin::Pin<Box<dyn Future<Output = HoldOutcome> + Send + 'a>> {
        Box::pin(self.hold_request(request))
    }

    fn finish(&self, id: &ApprovalId, status: Result<(u16, String), String>) {
        let outcome = match status {
            Ok((status, audit_id)) => Outcome::Completed { audit_id, result: serde_json::json!({ "status": status }) },
            Err(message) => Outcome::Failed { failure: crate::stores::approvals::not_runnable(message) },
        };
        if let Err(error) = self.services.approvals.finish(id, outcome) {
            log_line!("aileron daemon: recording the outcome of approval {id}: {error}");
        }
    }
}

impl ProxyApprovals {
    async fn hold_request(&self, request: HeldRequest) -> HoldOutcome {
        let state = &self.services;
        let requested_at = crate::stores::approvals::now();
        let approval = HttpRequestApproval {
            id: crate::stores::approvals::mint_id(&requested_at),
            connector: &request.connector,
            operation: &request.operation,
            method: &request.method,
            host: &request.host,
            target: &request.target,
            body: &request.body,
            requested_at: requested_at.clone(),
            session_id: &request.session_id,
            unconfined: self.unconfined,
        };
        let identity = approval.identity_with(&request.headers);
        let window = PERMIT_WINDOW.as_millis() as u64;
        let permit = state.approvals.find(|entry| {
            entry.kind == ApprovalKind::HttpRequest
                && entry.session_id.as_deref() == Some(request.session_id.as_str())
                && entry.action_sha256 == identity
                && entry.state == ApprovalState::Approved
                && entry.decided_within(&requested_at, window)
        });
        if let Some(permit) = permit {
            return match state.approvals.start(&permit.id) {
                Some(_) => HoldOutcome::Approved(permit.id),
                None => HoldOutcome::Used { id: permit.id },
            };
        }
        let entry = ApprovalEntry {
            policy_reason: request.policy_reason.clone(),
            ..ApprovalEntry::http_request_with_headers(approval, &request.headers)
        };
        // Subscribed before registering: no decision can slip between the two.
        let mut events = state.approvals.subscribe();
        let id = match state.approvals.register(entry.clone()) {
            Ok(Registered::New) => {
                // Asked by the agent of the session whose proxy holds the request.
                let event = AuditEvent {
                    event_type: EventType::ApprovalRequested,
                    actor: aileron_core::audit::Actor::new(ActorType::Agent, request.session_id.clone()),
                    session_id: Some(request.session_id.clone()),
                    payload: aileron_core::approval::requested_payload(&entry),
                    audit_id: None,
                };
                if let Err(error) = state.audit.append(event).await {
                    return HoldOutcome::Refused { class: "audit_unavailable", message: error.to_string() };
                }
                entry.id
            }
            Ok(Registered::Repeat(existing)) => existing.id,
            Err(QueueError::TooManyPending(waiting)) => {
                return HoldOutcome::Refused {
                    class: "too_many_pending",
                    message: format!(
                        "this session already has {waiting} approvals waiting; let the user decide them first"
                    ),
                };
            }
            Err(error) => return HoldOutcome::Refused { class: "approval_unavailable", message: error.to_string() },
        };
        let deadline = tokio::time::Instant::now() + self.hold;
        loop {
            match state.approvals.get(&id) {
                Some(entry) => match entry.state {
                    ApprovalState::PendingApproval => {}
                    ApprovalState::Approved => {
                        return match state.approvals.start(&id) {
                            Some(_) => HoldOutcome::Approved(id),
                            None => HoldOutcome::Used { id },
                        };
                    }
                    ApprovalState::Denied => return HoldOutcome::Denied { id, reason: entry.reason },
                    ApprovalState::Expired => {
                        let message = "nobody decided this request before its approval expired; nothing was sent";
                        return HoldOutcome::Ended { id, class: "approval_expired", message: message.to_string() };
                    }
                    ApprovalState::Cancelled => {
                        let message = "this request's approval was withdrawn before a decision; nothing was sent";
                        return HoldOutcome::Ended { id, class: "approval_cancelled", message: message.to_string() };
                    }
                    _ => return HoldOutcome::Used { id },
                },
                None => {
                    return HoldOutcome::Refused {
                        class: "approval_unavailable",
                        message: format!("approval {id} is gone"),
                    };
                }
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) | Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => {
                    return HoldOutcome::Pending { review_url: review_url(&state.base_url(), &id), id };
                }
                Ok(_) => {}
            }
        }
    }
}

/// Runs, once, an entry the journal held approved but not started at start-up — after making
/// sure its decision is in the audit log. `decide` journals the decision and then audits it; when
/// that audit failed (a full disk: the user saw 503) the entry stayed approved, and the restart
/// ran it with no `approval.approved` record anywhere. The decision is looked up from the time it
/// was made, appended (by its decider, with `approval.recovered`) if missing, and a decision that
/// cannot be audited still does not run: it waits for the next start.
pub async fn resume_approved(state: Arc<Services>, id: ApprovalId) {
    let Some(entry) = state.approvals.get(&id) else { return };
    let filter = crate::stores::audit_log::AuditFilter {
        since: entry.decided_at.clone(),
        event_type: Some(EventType::ApprovalApproved.as_str().to_string()),
        action: Some(entry.action.clone()),
        ..Default::default()
    };
    let audited = match state.audit.query(&filter) {
        Ok(records) => records
            .iter()
            .any(|record| record.payload.get(keys::APPROVAL_ID).and_then(|v| v.as_str()) == Some(id.as_str())),
        Err(error) => {
            log_line!("aileron daemon: approval {id} not resumed: reading the audit log for its decision: {error}");
            return;
        }
    };
    if !audited {
        let mut payload = decision_payload(&entry, ApprovalDecision::Approved);
        payload.insert(keys::APPROVAL_RECOVERED.into(), true.into());
        let actor = aileron_core::audit::Actor::new(
            ActorType::Human,
            entry.decided_by.clone().unwrap_or_else(|| super::LOCAL_USER.to_string()),
        );
        let event = AuditEvent {
            event_type: EventType::ApprovalApproved,
            actor,
            session_id: entry.session_id.clone(),
            payload,
            audit_id: None,
        };
        if let Err(error) = state.audit.append(event).await {
            log_line!("aileron daemon: approval {id} not resumed: its decision cannot be audited: {error}");
            return;
        }
    }
    crate::runner::execute_approved(state, id).await;
}
