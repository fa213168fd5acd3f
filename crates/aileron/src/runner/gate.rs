//! The policy gate of `run_action` (SPEC §16): after the arguments are valid, before the
//! approval gate. Decides with the user's rules and the run counters, counts an admitted run,
//! audits a refusal (`policy.denied`) and what shadow rules would have done (`policy.shadow`).

use std::sync::Arc;

use aileron_core::Failure;
use aileron_core::action::ActionFile;
use aileron_core::vocabulary::EventType;
use chrono::Utc;

use super::{RunRejection, RunRequest, append, prepared, submit};
use crate::dataplane::egress::Admission;
use crate::services::Services;
use crate::stores::rules::admission::Judged;
use crate::stores::rules::{Call, Subject};

/// What the gate lets through.
pub(super) enum Gate {
    /// On to the approval gate; the hash of the set that decided (none without policy files),
    /// and the run's `policy.admitted` record on its way to disk when the rules count runs.
    Pass { hash: Option<String>, admission: Option<Admission> },
    /// Only with a human's approval, for these reasons.
    Ask { reasons: Vec<String> },
    /// Refused (audited): the failure to answer with.
    Refused(Failure),
}

/// Who the rules see calling.
fn subject(state: &Services, request: &RunRequest) -> Subject {
    let caller = &request.caller;
    Subject::of(
        &caller.actor,
        caller.session_id.as_deref(),
        request.approval.is_some(),
        !caller.unconfined,
        |session| state.sessions.get(session).map(|s| s.agent).unwrap_or_default(),
    )
}

pub(super) async fn check(
    state: &Arc<Services>,
    action: &ActionFile,
    request: &RunRequest,
    audit_id: &str,
) -> Result<Gate, RunRejection> {
    if state.rules.current().is_empty() {
        return Ok(Gate::Pass { hash: None, admission: None });
    }
    let subject = subject(state, request);
    let connector = action.steps.first().map(|step| step.connector.to_string()).unwrap_or_default();
    let call = Call {
        subject: &subject,
        verb: "run",
        tool: &action.name,
        connector: &connector,
        approval_required: action.requires_approval(),
        args: &request.args,
        now: Utc::now(),
        counts: Default::default(),
    };
    let Some(judgment) = state.rules.judge(&call, request.approval.is_some()) else {
        return Ok(Gate::Pass { hash: None, admission: None });
    };
    if let Some(payload) = judgment.shadow {
        append(state, EventType::PolicyShadow, &request.caller, payload, &super::mint_audit_id()).await?;
    }
    match judgment.outcome {
        Judged::Pass { hash, admitted } => {
            // Handed to the writer now, awaited before the run's first effect (see `Admission`).
            let admission = admitted.map(|payload| {
                let record = prepared(EventType::PolicyAdmitted, &request.caller, &payload, &super::mint_audit_id());
                let appended = submit(state, record);
                // The audit log's own reason: the runner says "audit log unavailable" around it.
                Admission::new(async move {
                    appended.await.map_err(|rejection| match rejection {
                        RunRejection::AuditUnavailable(cause) => cause,
                        other => other.to_string(),
                    })
                })
            });
            Ok(Gate::Pass { hash: Some(hash), admission })
        }
        Judged::Ask { reasons } => Ok(Gate::Ask { reasons }),
        Judged::Refused { failure, denied } => {
            append(state, EventType::PolicyDenied, &request.caller, denied, audit_id).await?;
            Ok(Gate::Refused(failure.with_audit_id(audit_id)))
        }
    }
}
