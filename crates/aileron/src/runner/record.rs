//! A run's own audit record, typed: `action.executed` with its steps, or `execution.failed` with
//! the failure (and the step it happened in), written ahead for the log's writer
//! ([`PreparedRecord`]). Its keys are the span attribute keys (`telemetry::keys`), so audit and
//! traces share names.

use aileron_core::Failure;
use aileron_core::action::ActionFile;
use aileron_core::approval::ApprovalId;
use aileron_core::audit::{CanonicalObject, PreparedRecord};
use aileron_core::vocabulary::{self, EventType};
use serde_json::{Map, Value};

use super::{Caller, StepFailure};
use crate::platform::telemetry::keys;
use crate::wire::StepResult;

/// The record a run ends with, typed: `action.executed` with its steps, or `execution.failed`
/// with the failure (and the step it happened in). Its payload is built here only, through the
/// vocabulary's keys.
pub(super) struct RunRecord<'a> {
    pub action: &'a ActionFile,
    /// The approval the run carried out, when the action is gated.
    pub approval: Option<&'a ApprovalId>,
    /// The hash of the policy set that admitted the run, while policy files exist.
    pub policy: Option<&'a str>,
    pub ending: Ending<'a>,
}

pub(super) enum Ending<'a> {
    /// Every step succeeded: their audit view and the names (never the values) of the arguments.
    Executed { steps: &'a [StepResult], args: &'a Map<String, Value> },
    /// Refused before any step ran (the approved action or arguments no longer match).
    Refused(&'a Failure),
    /// A step failed.
    Failed(&'a StepFailure),
}

impl RunRecord<'_> {
    fn event_type(&self) -> EventType {
        match self.ending {
            Ending::Executed { .. } => EventType::ActionExecuted,
            Ending::Refused(_) | Ending::Failed(_) => EventType::ExecutionFailed,
        }
    }

    /// The record, written ahead for the log's writer: a run's `action.executed` straight from
    /// its typed steps (no map of `String` keys on every run), a failure's through its map.
    pub fn prepared(&self, caller: &Caller, audit_id: &str) -> PreparedRecord {
        let event_type = self.event_type();
        match &self.ending {
            Ending::Executed { steps, args } => PreparedRecord::new(
                &caller.actor,
                audit_id,
                event_type.as_str(),
                caller.session_id.as_deref(),
                |payload| self.write_executed(payload, steps, args),
            ),
            Ending::Refused(failure) => prepared(event_type, caller, &self.failure_payload(failure, None), audit_id),
            Ending::Failed(failed) => {
                prepared(event_type, caller, &self.failure_payload(&failed.failure, Some(failed)), audit_id)
            }
        }
    }

    /// An `action.executed` payload, its keys in byte order: the steps' audit view and the names
    /// (never the values) of the arguments.
    fn write_executed(&self, payload: &mut CanonicalObject<'_>, steps: &[StepResult], args: &Map<String, Value>) {
        let texts = self.action.run_texts();
        payload
            .strs(keys::ACTION_ARG_NAMES, args.keys().map(String::as_str))
            .str(keys::ACTION_NAME, &self.action.name)
            .objects(keys::ACTION_STEPS, steps, |summary, step| write_step_summary(summary, self.action, step))
            .u64(keys::ACTION_STEPS_COUNT, self.action.steps.len() as u64)
            .str(keys::ACTION_VERSION, &texts.version);
        if let Some(id) = self.approval {
            payload.str(keys::APPROVAL_ID, id.as_str());
        }
        if let Some(hash) = self.policy {
            payload.str(keys::POLICY_HASH, hash);
        }
    }

    /// An `execution.failed` payload: the failure's own keys, and the step it happened in when
    /// one did.
    fn failure_payload(&self, failure: &Failure, step: Option<&StepFailure>) -> Map<String, Value> {
        // Room for the longest ending's keys: a map grown key by key reallocates as it goes.
        let mut payload = Map::with_capacity(16);
        payload.insert(keys::ACTION_NAME.into(), self.action.name.clone().into());
        payload.insert(keys::ACTION_VERSION.into(), (*self.action.run_texts().version).into());
        payload.insert(keys::ACTION_STEPS_COUNT.into(), self.action.steps.len().into());
        payload.extend(failure.audit_payload());
        if let Some(failed) = step {
            payload.insert(keys::ACTION_STEP_ID.into(), failed.step_id.clone().into());
            vocabulary::connector_call(&mut payload, failed.connector.clone(), failed.op.clone(), failed.hash.clone());
        }
        if let Some(id) = self.approval {
            payload.insert(keys::APPROVAL_ID.into(), id.to_string().into());
        }
        if let Some(hash) = self.policy {
            payload.insert(keys::POLICY_HASH.into(), hash.into());
        }
        payload
    }
}

/// The audit view of a step, its keys in byte order: identity and capability, never the output
/// or arguments. The keys of the step's `aileron.capability.check` and `aileron.connector.call`
/// spans, as [`vocabulary::connector_call`] and [`vocabulary::binding`] give them to a map (a
/// test holds the two to the same record). The connector's FQN and hash are the action's texts,
/// made once ([`ActionFile::run_texts`]).
fn write_step_summary(summary: &mut CanonicalObject<'_>, action: &ActionFile, result: &StepResult) {
    let (step, texts) = result.step_texts(action);
    if let Some(binding) = &result.binding {
        summary
            .str(keys::BINDING_IDENTITY, &binding.identity)
            .str(keys::BINDING_KIND, binding.kind.as_str())
            .str(keys::BINDING_NAME, &binding.name);
    }
    summary
        .str(keys::CAPABILITY_KIND, &step.op)
        .str(keys::CONNECTOR_FQN, &texts.connector)
        .str(keys::CONNECTOR_HASH, &texts.hash);
    if !result.logs.is_empty() {
        summary.objects(keys::CONNECTOR_LOGS, &result.logs, |line, log| {
            line.str("level", &log.level).str("message", &log.message);
        });
    }
    summary.str(keys::CONNECTOR_OP, &step.op).u64("attempts", result.attempts as u64).str("id", &step.id);
}

/// A record of `caller`'s with a map payload, written ahead for the log's writer.
pub(super) fn prepared(
    event_type: EventType,
    caller: &Caller,
    payload: &Map<String, Value>,
    audit_id: &str,
) -> PreparedRecord {
    PreparedRecord::with_payload(&caller.actor, audit_id, event_type.as_str(), caller.session_id.as_deref(), payload)
}

#[cfg(test)]
mod tests {
    use aileron_core::action::parse_action;
    use aileron_core::audit::{ActorType, canonical_json};
    use aileron_core::manifest::CredentialKind;
    use serde_json::json;

    use super::*;
    use crate::wire::{GuestLogLine, StepBinding};

    fn step(index: usize, binding: bool, logs: bool) -> StepResult {
        StepResult {
            index,
            attempts: 2,
            binding: binding.then(|| StepBinding {
                identity: "bot@acme \"quoted\"".into(),
                kind: CredentialKind::ApiKey,
                name: "slack".into(),
            }),
            logs: if logs {
                vec![GuestLogLine { level: "info".into(), message: "sent\n\u{202e}é".into() }]
            } else {
                Vec::new()
            },
            output: json!({"never": "recorded"}),
        }
    }

    /// The `action.executed` payload as a map, the way every other record's is built: through the
    /// vocabulary's helpers (the definition the typed writer must match).
    fn executed_as_a_map(
        action: &ActionFile,
        steps: &[StepResult],
        args: &Map<String, Value>,
        approval: Option<&ApprovalId>,
        policy: Option<&str>,
    ) -> Map<String, Value> {
        let summaries = steps.iter().map(|step| {
            let (declared, required) = step.step(action);
            let mut summary = Map::new();
            summary.insert("id".into(), declared.id.clone().into());
            vocabulary::connector_call(
                &mut summary,
                declared.connector.to_string(),
                declared.op.clone(),
                required.hash.to_string(),
            );
            summary.insert("attempts".into(), step.attempts.into());
            if !step.logs.is_empty() {
                summary.insert(keys::CONNECTOR_LOGS.into(), serde_json::to_value(&step.logs).unwrap());
            }
            if let Some(binding) = &step.binding {
                vocabulary::binding(
                    &mut summary,
                    binding.name.clone(),
                    binding.kind.as_str(),
                    binding.identity.clone(),
                );
            }
            Value::Object(summary)
        });
        let mut payload = Map::new();
        payload.insert(keys::ACTION_NAME.into(), action.name.clone().into());
        payload.insert(keys::ACTION_VERSION.into(), action.version.to_string().into());
        payload.insert(keys::ACTION_STEPS_COUNT.into(), action.steps.len().into());
        payload.insert(keys::ACTION_STEPS.into(), Value::Array(summaries.collect()));
        payload.insert(keys::ACTION_ARG_NAMES.into(), args.keys().cloned().map(Value::from).collect());
        if let Some(id) = approval {
            payload.insert(keys::APPROVAL_ID.into(), id.to_string().into());
        }
        if let Some(hash) = policy {
            payload.insert(keys::POLICY_HASH.into(), hash.into());
        }
        payload
    }

    /// The typed writer gives, byte for byte, the canonical line of the map the vocabulary
    /// builds, for every shape a run's record takes: with and without a binding, log lines, an
    /// approval and a policy hash.
    #[test]
    fn an_executed_record_written_from_its_steps_is_the_canonical_form_of_its_map() {
        let action = parse_action(crate::wire::TWO_STEP_ACTION, "post.md").unwrap();
        let approval = ApprovalId::parse("act-20261122T053700Z-0123456789abcdef").unwrap();
        let mut caller = Caller::new(ActorType::Agent, "claude");
        let args: Map<String, Value> =
            [("text".to_string(), json!("hi")), ("a\"b".to_string(), json!(1))].into_iter().collect();
        for (binding, logs, approved, policy) in [
            (false, false, false, false),
            (true, true, true, true),
            (true, false, false, true),
            (false, true, true, false),
        ] {
            caller.session_id = approved.then(|| "sess-1".to_string());
            let steps = [step(0, binding, logs), step(1, !binding, !logs)];
            let approval = approved.then_some(&approval);
            let policy = policy.then_some("sha256:policy");
            let record = RunRecord {
                action: &action,
                approval,
                policy,
                ending: Ending::Executed { steps: &steps, args: &args },
            };
            let mut line = Vec::new();
            record.prepared(&caller, "audit-1").seal(7, "sha256:prev", "2026-11-22T05:37:00.123Z", &mut line);
            let value: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(canonical_json(&value).as_bytes(), line.as_slice(), "{}", String::from_utf8_lossy(&line));
            let expected = executed_as_a_map(&action, &steps, &args, approval, policy);
            assert_eq!(canonical_json(&value["payload"]), canonical_json(&Value::Object(expected)));
            assert_eq!(value["event_type"], "action.executed");
            assert_eq!(value.get("session_id").and_then(Value::as_str), caller.session_id.as_deref());
        }
    }
}
