//! `aileron policy replay` (SPEC §16): the rules as they are now, evaluated over the runs the
//! audit log holds — and a launched agent's requests matched to an operation — oldest first, with
//! the counters rebuilt as the replay goes: what would have been decided differently.
//!
//! A run record keeps its arguments' names, never their values (SPEC §10), so a rule that reads
//! `context.args` cannot be replayed: it is left out, and named, rather than evaluated over
//! arguments that are not there (which would read as "never fires").

use std::collections::HashMap;

use aileron_core::audit::AuditRecord;
use aileron_core::vocabulary::{EventType, keys};
use chrono::{DateTime, Utc};
use serde_json::Map;

use super::counters::Counters;
use super::{Call, RuleSet, Subject, Verdict};

/// What a replay found.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Runs evaluated.
    pub runs: usize,
    /// The runs whose decision would change, oldest first.
    pub changed: Vec<Change>,
    /// Rules left out: they read arguments, which the log does not keep.
    pub skipped: Vec<String>,
}

/// One run decided differently now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub timestamp: String,
    pub audit_id: String,
    pub action: String,
    /// `agent:<session>` or `human:<id>`.
    pub subject: String,
    /// `allow` (it ran) or `forbid` (a rule refused it then).
    pub was: &'static str,
    /// `allow`, `forbid by …` or `ask by …`.
    pub now: String,
}

/// The records a replay decides again: runs, refusals, and a launched agent's requests (those
/// matched to an operation). A reader of the log asks for these.
pub const REPLAYED: [EventType; 4] =
    [EventType::ActionExecuted, EventType::ExecutionFailed, EventType::PolicyDenied, EventType::ConnectorProxyProxied];

/// What the replay needs to know of an action: its first step's connector and whether it is gated.
pub type ActionFacts = HashMap<String, (String, bool)>;

/// Replays `records` (any order; runs are taken oldest first) against `rules`. `agents` names each
/// session's agent (from the sessions journal).
pub fn replay(
    rules: &RuleSet,
    records: &[AuditRecord],
    actions: &ActionFacts,
    agents: &HashMap<String, String>,
) -> Replayed {
    let (rules, skipped) = rules.without_argument_rules();
    let mut runs: Vec<&AuditRecord> = records
        .iter()
        .filter(|record| match EventType::parse(&record.event_type) {
            // A launched agent's own request matched to an operation (SPEC §15): decided too.
            Some(EventType::ConnectorProxyProxied) => record.payload.contains_key(keys::CONNECTOR_OPERATION),
            Some(event) => REPLAYED.contains(&event),
            None => false,
        })
        .collect();
    runs.sort_by_key(|record| record.seq);
    let counters = Counters::default();
    let no_args = Map::new();
    let mut replayed = Replayed { skipped, ..Replayed::default() };
    for record in runs {
        let text = |key: &str| record.payload.get(key).and_then(|v| v.as_str());
        let event = EventType::parse(&record.event_type);
        let proxied = event == Some(EventType::ConnectorProxyProxied);
        let verb = if proxied || text(keys::POLICY_ACTION) == Some("http_request") { "http_request" } else { "run" };
        let tool = if proxied { text(keys::CONNECTOR_OPERATION) } else { text(keys::ACTION_NAME) };
        let Some(action) = tool else { continue };
        let Ok(at) = DateTime::parse_from_rfc3339(&record.timestamp) else { continue };
        let at = at.with_timezone(&Utc);
        let approved = record.payload.contains_key(keys::APPROVAL_ID);
        // Launched sessions are contained; the log does not say otherwise for older records.
        let subject = Subject::of(&record.actor, record.session_id.as_deref(), approved, true, |session| {
            agents.get(session).cloned().unwrap_or_default()
        });
        let (connector, approval_required) = match verb {
            // A request's connector is on its record; whether it was held is whether it waited.
            "http_request" => (text(keys::CONNECTOR_FQN).unwrap_or_default().to_string(), approved),
            _ => actions.get(action).cloned().unwrap_or_default(),
        };
        let was = if event == Some(EventType::PolicyDenied) { "forbid" } else { "allow" };
        let admitted = counters.admit(
            &subject.key(),
            action,
            at,
            |counts| {
                rules
                    .decide(&Call {
                        subject: &subject,
                        verb,
                        tool: action,
                        connector: &connector,
                        approval_required,
                        args: &no_args,
                        now: at,
                        counts,
                    })
                    .enforced
            },
            |verdict| verdict.admits(approved),
        );
        replayed.runs += 1;
        let now = match &admitted.decided {
            ask @ Verdict::Ask { .. } if approved => format!("{ask} (it was approved)"),
            verdict => verdict.to_string(),
        };
        let same = match was {
            "allow" => admitted.counted,
            _ => matches!(admitted.decided, Verdict::Forbid { .. }),
        };
        if !same {
            replayed.changed.push(Change {
                timestamp: record.timestamp.clone(),
                audit_id: record.audit_id.clone(),
                action: action.to_string(),
                subject: subject.key(),
                was,
                now,
            });
        }
    }
    replayed
}
