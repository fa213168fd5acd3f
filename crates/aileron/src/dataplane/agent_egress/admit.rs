//! The user's rules over a launched agent's own requests (SPEC §16): a request matched to a
//! connector's operation is a call of that operation (`Aileron::Action::"http_request"` on
//! `Aileron::Tool::"<operation>"`), decided and counted exactly as a run at `run_action` is
//! ([`LiveRules::judge`]). A refusal is answered 403 with SPEC §9's envelope (`policy_denied`,
//! the rules, and when a rate limit lets it through again, also as `Retry-After`) and recorded
//! `policy.denied` with the request's method, host and path; an `@ask` holds the request for a
//! human like an `approval = true` operation, the reason on the card.

use std::sync::Arc;

use aileron_core::vocabulary::EventType;
use aileron_core::vocabulary::records::ProxiedRequest;
use axum::body::Body;
use hyper::{Response, StatusCode};
use serde_json::{Map, Value};

use super::EgressSession;
use super::sealed::SealedConnector;
use crate::stores::rules::admission::Judged;
use crate::stores::rules::{Call, LiveRules, Subject};

/// The rules a session's matched requests are decided by, and who the session's agent is.
pub struct SessionRules {
    pub rules: Arc<LiveRules>,
    pub subject: Subject,
}

/// What the rules let a matched request do.
pub enum Admitted {
    /// Go on (to the operation's own approval, when it has one).
    Go,
    /// Wait for a human first: the `@ask` reasons.
    Ask(String),
}

/// Decides `record`'s request to `operation` (already `approved` by a human, or not yet): `Ok`
/// to go on or ask, or the answer the agent gets. Counted when it goes on now; a request that
/// still waits for an approval is counted once it is approved (and decided again then).
pub async fn admit(
    session: &EgressSession,
    record: &mut ProxiedRequest,
    connector: &SealedConnector,
    operation: &aileron_core::manifest::ProxyOperation,
    approved: bool,
) -> Result<Admitted, Response<Body>> {
    let Some(rules) = &session.rules else { return Ok(Admitted::Go) };
    // Boxed: a decision's state is a kilobyte, and inline it would be in every matched
    // request's future (moved whole for each request) where the session has no rules too.
    Box::pin(decide(session, rules, record, connector, operation, approved)).await
}

async fn decide(
    session: &EgressSession,
    SessionRules { rules, subject }: &SessionRules,
    record: &mut ProxiedRequest,
    connector: &SealedConnector,
    operation: &aileron_core::manifest::ProxyOperation,
    approved: bool,
) -> Result<Admitted, Response<Body>> {
    let connector = connector.fqn().to_string();
    let call = Call {
        subject,
        verb: "http_request",
        tool: &operation.name,
        connector: &connector,
        approval_required: operation.approval,
        // The rules read a run's arguments; a request has none they are typed for.
        args: &Map::new(),
        now: chrono::Utc::now(),
        counts: Default::default(),
    };
    let Some(judgment) = rules.judge(&call, approved) else { return Ok(Admitted::Go) };
    let described = |payload: Map<String, Value>| {
        let mut described = record.clone().into_payload();
        described.extend(payload);
        described
    };
    if let Some(payload) = judgment.shadow {
        append(session, EventType::PolicyShadow, described(payload)).await?;
    }
    match judgment.outcome {
        Judged::Pass { hash, admitted } => {
            if let Some(payload) = admitted {
                append(session, EventType::PolicyAdmitted, described(payload)).await?;
            }
            record.policy_hash = Some(hash);
            Ok(Admitted::Go)
        }
        Judged::Ask { reasons } => Ok(Admitted::Ask(reasons.join("; "))),
        Judged::Refused { failure, denied } => {
            let audit_id = append(session, EventType::PolicyDenied, described(denied)).await?;
            let retry_after = failure.details.get("retry_after_seconds").and_then(Value::as_i64);
            let failure = failure.with_audit_id(audit_id);
            let error = serde_json::to_value(&failure).expect("a failure serializes");
            let mut response = super::answer(Ok(()), StatusCode::FORBIDDEN, super::envelope(error));
            if let Some(seconds) = retry_after {
                response.headers_mut().insert(hyper::header::RETRY_AFTER, seconds.into());
            }
            Err(response)
        }
    }
}

/// Appends a `policy.*` record of the session; a request whose decision cannot be recorded is
/// answered 503 and does not go on.
async fn append(
    session: &EgressSession,
    event_type: EventType,
    payload: Map<String, Value>,
) -> Result<String, Response<Body>> {
    session
        .append_payload(event_type, payload)
        .await
        .map_err(|()| super::answer(Err(()), StatusCode::SERVICE_UNAVAILABLE, Value::Null))
}
