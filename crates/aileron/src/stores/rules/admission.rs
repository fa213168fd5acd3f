//! One call through the rules (SPEC §16), for both doors that ask: `run_action` (a run) and a
//! launched agent's egress proxy (a request matched to a connector's operation). Decides with
//! the counters under their lock, counts what goes on, and says which records to write first —
//! `policy.shadow` when the shadow rules would decide otherwise, `policy.admitted` when the
//! admission must outlive a crash, `policy.denied` with the refusal — so each door writes them
//! its own way (a run's caller, a proxied request's session) and the decision is the same.

use aileron_core::vocabulary::keys::{
    ACTION_NAME, POLICY_ACTION, POLICY_HASH, POLICY_OUTCOME, POLICY_RULES, POLICY_SUBJECT,
};
use aileron_core::{Boundary, Failure, FailureClass};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::counters::Counts;
use super::{Call, LiveRules, RuleSet, Verdict};

/// What the rules make of one call, and the records to write before acting on it.
pub struct Judgment {
    /// A `policy.shadow` payload: the shadow rules would have refused or asked.
    pub shadow: Option<Map<String, Value>>,
    pub outcome: Judged,
}

/// Whether the call goes on.
pub enum Judged {
    /// On it goes, under the set with `hash`; `admitted` is the `policy.admitted` payload to
    /// write (and sync) before its first effect, when the rules count calls.
    Pass { hash: String, admitted: Option<Map<String, Value>> },
    /// Only once a human approves, for these reasons (nothing counted yet).
    Ask { reasons: Vec<String> },
    /// Refused: the failure to answer with, and the `policy.denied` payload (the failure's keys
    /// included).
    Refused { failure: Failure, denied: Map<String, Value> },
}

impl LiveRules {
    /// Decides `call` with the set in force (`None`: there are no rules, everything goes on as
    /// before). `call.counts` is not read: the counters' own are used, under their lock, and the
    /// call is counted when it goes on now — allowed, or an ask a human already `approved`; a
    /// call that waits for an approval it needs anyway is counted when it runs approved, once.
    pub fn judge(&self, call: &Call<'_>, approved: bool) -> Option<Judgment> {
        let rules = self.current();
        if rules.is_empty() {
            return None;
        }
        let key = call.subject.key();
        let now = call.now;
        let with = |counts, now| Call { counts, now, ..call.clone() };
        let waits = call.approval_required && !approved;
        // Decided and counted under one lock: racing calls see each other's admissions.
        let admission = self.counters.admit(
            &key,
            call.tool,
            now,
            |counts| rules.decide(&with(counts, now)),
            |decided| decided.enforced.admits(approved) && !waits,
        );
        let decided = admission.decided;
        let payload = || payload(&rules, call, &key);
        let shadow = decided.shadow.as_ref().filter(|shadow| **shadow != Verdict::Allow).map(|shadow| {
            let mut payload = payload();
            payload.insert(POLICY_OUTCOME.into(), shadow.outcome().into());
            payload.insert(POLICY_RULES.into(), rule_ids(shadow).into());
            payload
        });
        let outcome = match decided.enforced {
            verdict if verdict.admits(approved) => Judged::Pass {
                hash: rules.hash.clone(),
                // Durable before the call's effect: one killed mid-flight still counts after a restart.
                admitted: (admission.counted && rules.counts_runs).then(payload),
            },
            Verdict::Ask { reasons, .. } => Judged::Ask { reasons },
            Verdict::Allow => unreachable!("an allow admits"),
            Verdict::Forbid { rules: ids, errors } => {
                let retry_at = if rules.counts_runs { self.retry_at(&rules, &key, call) } else { None };
                let message = match (ids.as_slice(), errors.first()) {
                    ([], Some(error)) => format!("refused by policy: the rules could not decide this call ({error})"),
                    ([], None) => "no policy rule permits this call".to_string(),
                    (ids, None) => format!("refused by policy rule {}", ids.join(", ")),
                    (ids, Some(error)) => {
                        format!("refused by policy rule {} (a rule could not be evaluated: {error})", ids.join(", "))
                    }
                };
                let mut failure = Failure::new(FailureClass::PolicyDenied, Boundary::Policy, message)
                    .with_detail("rules", ids.clone())
                    .with_detail("policy_hash", rules.hash.clone());
                if let Some(at) = retry_at {
                    with_retry(&mut failure, at, now);
                }
                let mut denied = payload();
                denied.insert(POLICY_RULES.into(), ids.into());
                denied.extend(failure.audit_payload());
                Judged::Refused { failure, denied }
            }
        };
        Some(Judgment { shadow, outcome })
    }

    /// When the call would next be let through as the counts fall (nothing else admitted
    /// meanwhile): the first moment an admission leaves the hour or the day after which the
    /// rules allow (or ask). Searched by halving over those moments: limits only loosen as
    /// counts fall.
    fn retry_at(&self, rules: &RuleSet, key: &str, call: &Call<'_>) -> Option<DateTime<Utc>> {
        let moments = self.counters.releases(key, call.tool, call.now);
        let lets_through = |at: DateTime<Utc>| {
            let counts: Counts = self.counters.counts(key, call.tool, at);
            let later = Call { counts, now: at, ..call.clone() };
            !matches!(rules.decide(&later).enforced, Verdict::Forbid { .. })
        };
        let first = moments.partition_point(|at| !lets_through(*at));
        moments.get(first).copied()
    }
}

/// Says in `failure` when a call is allowed again: retriable, with `retry_after_seconds` (whole
/// seconds, rounded up) and `retry_at`.
fn with_retry(failure: &mut Failure, at: DateTime<Utc>, now: DateTime<Utc>) {
    let seconds = ((at - now).num_milliseconds().max(0) + 999) / 1000;
    failure.retriable = true;
    failure.message.push_str(&format!("; a call is allowed again in {seconds} s"));
    failure.details.insert("retry_after_seconds".into(), seconds.into());
    failure.details.insert("retry_at".into(), at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).into());
}

/// What every `policy.*` record of a call says: the tool, the Cedar action, the set and whose
/// calls are counted.
fn payload(rules: &RuleSet, call: &Call<'_>, subject: &str) -> Map<String, Value> {
    let mut payload = Map::new();
    payload.insert(ACTION_NAME.into(), call.tool.into());
    payload.insert(POLICY_ACTION.into(), call.verb.into());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stores::rules::{Reloaded, Subject};

    fn live(rules: &str) -> (tempfile::TempDir, LiveRules) {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("policy")).unwrap();
        std::fs::write(home.path().join("policy/limit.cedar"), rules).unwrap();
        let live = LiveRules::open(home.path(), 0, Vec::new());
        assert!(live.problem().is_none(), "{:?}", live.problem());
        (home, live)
    }

    /// The daemon looks twice a second: the installed actions are listed only when the files or
    /// the actions changed since the last look.
    #[test]
    fn a_reload_lists_the_actions_only_when_the_files_or_the_actions_changed() {
        let (home, live) = live("forbid(principal, action, resource) when { context.runs_last_hour >= 3 };");
        let listed = std::cell::Cell::new(0);
        let list = || {
            listed.set(listed.get() + 1);
            Vec::new()
        };
        assert!(matches!(live.reload(0, list), Reloaded::Unchanged));
        assert_eq!(listed.get(), 0, "nothing changed since the set was opened");
        live.reload(1, list);
        assert_eq!(listed.get(), 1, "an action changed");
        live.reload(1, list);
        assert_eq!(listed.get(), 1);
        std::fs::write(home.path().join("policy/more.cedar"), "forbid(principal, action, resource) when { false };")
            .unwrap();
        assert!(matches!(live.reload(1, list), Reloaded::Loaded { .. }));
        assert_eq!(listed.get(), 2, "a file changed");
    }

    /// A call that needs an approval anyway is decided when asked (a forbid refuses it at once)
    /// and counted once, when it runs approved — not also when it was asked.
    #[test]
    fn a_call_waiting_for_its_own_approval_is_counted_once_when_it_runs() {
        let (_home, live) =
            live("@id(\"one-an-hour\") forbid(principal, action, resource) when { context.runs_last_hour >= 1 };");
        let subject = Subject::Agent { session_id: "s1".into(), agent: "claude".into(), contained: true };
        let args = Map::new();
        let call = Call {
            subject: &subject,
            verb: "http_request",
            tool: "merge_pull_request",
            connector: "github://acme/gh",
            approval_required: true,
            args: &args,
            now: Utc::now(),
            counts: Counts::default(),
        };
        let key = subject.key();
        let asked = live.judge(&call, false).unwrap();
        assert!(matches!(asked.outcome, Judged::Pass { admitted: None, .. }), "waits for its approval, uncounted");
        assert_eq!(live.counters.counts(&key, call.tool, call.now).last_hour, 0);
        let ran = live.judge(&call, true).unwrap();
        let Judged::Pass { admitted: Some(admitted), .. } = ran.outcome else { panic!("runs approved, counted") };
        assert_eq!(admitted[POLICY_ACTION], "http_request");
        assert_eq!(live.counters.counts(&key, call.tool, call.now).last_hour, 1);
        let Judged::Refused { failure, denied } = live.judge(&call, false).unwrap().outcome else {
            panic!("the limit is reached")
        };
        assert_eq!(failure.details["rules"], serde_json::json!(["one-an-hour"]));
        assert_eq!(failure.details["retry_after_seconds"], 3600);
        assert_eq!(denied[POLICY_RULES], serde_json::json!(["one-an-hour"]));
    }

    /// Admissions are made durable only when a rule reads a counter, not when one is mentioned
    /// in a comment or a string.
    #[test]
    fn only_a_rule_that_reads_a_counter_makes_admissions_durable() {
        let (_home, commented) = live(
            "// context.runs_last_hour >= 1 was too strict\n@id(\"x\") forbid(principal, action, resource) when \
             { context.args has runs_last_day || \"session_runs\" == \"\" };",
        );
        assert!(!commented.current().counts_runs);
        let (_home, reading) = live("forbid(principal, action, resource) when { context.session_runs > 9 };");
        assert!(reading.current().counts_runs);
    }
}
