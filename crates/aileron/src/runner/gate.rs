//! The policy gate of `run_action` (SPEC §16): after the arguments are valid, before the
//! approval gate. Decides with the user's rules and the run counters, counts an admitted run,
//! audits a refusal (`policy.denied`) and what shadow rules would have done (`policy.shadow`).

use std::sync::Arc;

use aileron_core::action::ActionFile;
use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::keys::{ACTION_NAME, POLICY_HASH, POLICY_OUTCOME, POLICY_RULES, POLICY_SUBJECT};
use aileron_core::{Boundary, Failure, FailureClass};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{RunRejection, RunRequest, append};
use crate::services::Services;
use crate::stores::rules::{Call, RuleSet, Subject, Verdict};

/// What the gate lets through.
pub(super) enum Gate {
    /// On to the approval gate; the hash of the set that decided (none without policy files).
    Pass { hash: Option<String> },
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
    let rules = state.rules.current();
    if rules.is_empty() {
        return Ok(Gate::Pass { hash: None });
    }
    let subject = subject(state, request);
    let connector = action.steps.first().map(|step| step.connector.to_string()).unwrap_or_default();
    let approved = request.approval.is_some();
    let now = Utc::now();
    let call = |counts, now| Call {
        subject: &subject,
        verb: "run",
        tool: &action.name,
        connector: &connector,
        approval_required: action.requires_approval(),
        args: &request.args,
        now,
        counts,
    };
    let key = subject.key();
    // Decided and counted under one lock: racing calls see each other's admissions.
    let admission = state.rules.counters.admit(
        &key,
        &action.name,
        now,
        |counts| rules.decide(&call(counts, now)),
        |decided| decided.enforced.admits(approved),
    );
    let decided = admission.decided;
    if let Some(shadow) = &decided.shadow
        && *shadow != Verdict::Allow
    {
        let mut payload = policy_payload(&rules, &action.name, &key);
        payload.insert(POLICY_OUTCOME.into(), shadow.outcome().into());
        payload.insert(POLICY_RULES.into(), rule_ids(shadow).into());
        append(state, EventType::PolicyShadow, &request.caller, payload, &super::mint_audit_id()).await?;
    }
    match decided.enforced {
        verdict if verdict.admits(approved) => {
            if admission.counted && rules.counts_runs {
                // Durable before the run starts: a run killed mid-flight still counts after a restart.
                let payload = policy_payload(&rules, &action.name, &key);
                append(state, EventType::PolicyAdmitted, &request.caller, payload, &super::mint_audit_id()).await?;
            }
            Ok(Gate::Pass { hash: Some(rules.hash.clone()) })
        }
        Verdict::Ask { reasons, .. } => Ok(Gate::Ask { reasons }),
        Verdict::Allow => unreachable!("an allow admits"),
        Verdict::Forbid { rules: ids, errors } => {
            let retry_at =
                if rules.counts_runs { retry_at(state, &rules, &key, &action.name, now, &call) } else { None };
            let mut message = match ids.as_slice() {
                [] => "no policy rule permits this call".to_string(),
                ids => format!("refused by policy rule {}", ids.join(", ")),
            };
            if let Some(error) = errors.first() {
                message.push_str(&format!(" (a rule could not be evaluated: {error})"));
            }
            let mut failure = Failure::new(FailureClass::PolicyDenied, Boundary::Policy, message)
                .with_detail("rules", ids.clone())
                .with_detail("policy_hash", rules.hash.clone());
            if let Some(at) = retry_at {
                let seconds = ((at - now).num_milliseconds().max(0) + 999) / 1000;
                message_retry(&mut failure, at, seconds);
            }
            let mut payload = policy_payload(&rules, &action.name, &key);
            payload.insert(POLICY_RULES.into(), ids.into());
            payload.extend(failure.audit_payload());
            append(state, EventType::PolicyDenied, &request.caller, payload, audit_id).await?;
            Ok(Gate::Refused(failure.with_audit_id(audit_id)))
        }
    }
}

fn message_retry(failure: &mut Failure, at: DateTime<Utc>, seconds: i64) {
    failure.retriable = true;
    failure.message.push_str(&format!("; a call is allowed again in {seconds} s"));
    failure.details.insert("retry_after_seconds".into(), seconds.into());
    failure.details.insert("retry_at".into(), at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).into());
}

/// When the call would next be let through as the counts fall (nothing else admitted
/// meanwhile): the first moment an admission leaves the hour or the day after which the rules
/// allow (or ask). Searched by halving over those moments: limits only loosen as counts fall.
fn retry_at<'a>(
    state: &Services,
    rules: &RuleSet,
    key: &str,
    tool: &str,
    now: DateTime<Utc>,
    call: &impl Fn(crate::stores::rules::counters::Counts, DateTime<Utc>) -> Call<'a>,
) -> Option<DateTime<Utc>> {
    let moments = state.rules.counters.releases(key, tool, now);
    let lets_through = |at: DateTime<Utc>| {
        let counts = state.rules.counters.counts(key, tool, at);
        !matches!(rules.decide(&call(counts, at)).enforced, Verdict::Forbid { .. })
    };
    let first = moments.partition_point(|at| !lets_through(*at));
    moments.get(first).copied()
}

fn policy_payload(rules: &RuleSet, action: &str, subject: &str) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert(ACTION_NAME.into(), action.into());
    payload.insert(POLICY_HASH.into(), rules.hash.clone().into());
    payload.insert(POLICY_SUBJECT.into(), subject.into());
    payload
}

fn rule_ids(verdict: &Verdict) -> Vec<String> {
    match verdict {
        Verdict::Allow => Vec::new(),
        Verdict::Forbid { rules, .. } | Verdict::Ask { rules, .. } => rules.clone(),
    }
}
