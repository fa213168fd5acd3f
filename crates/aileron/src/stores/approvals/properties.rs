//! Property test of the queue's exactly-once promise: random sequences of registrations,
//! decisions, starts, vault waits, finishes and daemon restarts (the queue reopened from its
//! journal, sometimes with a torn last line) against a model of what each entry may still do.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use aileron_core::ContentHash;
use aileron_core::approval::ApprovalKind;
use proptest::prelude::*;
use serde_json::{Map, json};

use super::*;

#[derive(Debug, Clone)]
enum Op {
    Register,
    /// The entry is picked modulo the number registered; with none, an id never registered.
    Decide {
        entry: usize,
        approved: bool,
    },
    Start {
        entry: usize,
    },
    AwaitVault {
        entry: usize,
    },
    Finish {
        entry: usize,
        completed: bool,
    },
    /// The daemon stops and starts again. `torn`: it died writing a `started` line for that entry
    /// (all but the newline reached the disk). `resume`: it then starts every approved entry the
    /// journal held, as `workflows::approvals::resume_at_start` does.
    Restart {
        torn: Option<usize>,
        resume: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let entry = 0usize..8;
    prop_oneof![
        3 => Just(Op::Register),
        3 => (entry.clone(), prop::bool::weighted(0.7)).prop_map(|(entry, approved)| Op::Decide { entry, approved }),
        3 => entry.clone().prop_map(|entry| Op::Start { entry }),
        1 => entry.clone().prop_map(|entry| Op::AwaitVault { entry }),
        2 => (entry.clone(), any::<bool>()).prop_map(|(entry, completed)| Op::Finish { entry, completed }),
        1 => (prop::option::of(entry), any::<bool>()).prop_map(|(torn, resume)| Op::Restart { torn, resume }),
    ]
}

/// A pending `create-issue` entry with no arguments (the journal fault tests use it too).
pub(super) fn pending(id: ApprovalId, requested_at: String) -> ApprovalEntry {
    ApprovalEntry {
        id,
        kind: ApprovalKind::Action,
        action: "create-issue".into(),
        action_version: "1.0.0".into(),
        action_sha256: ContentHash::of_bytes(b"+++\nname = \"create-issue\"\n+++\n"),
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
        expires_after_ms: None,
        edited_args: None,
        policy_reason: None,
    }
}

/// What must hold, kept beside the queue: each entry's expected state and its history.
#[derive(Default)]
struct Model {
    ids: Vec<ApprovalId>,
    states: BTreeMap<ApprovalId, ApprovalState>,
    /// The decision each entry got (approved?).
    decisions: BTreeMap<ApprovalId, bool>,
    /// Entries `start` handed out, over the whole sequence, restarts included.
    started: BTreeSet<ApprovalId>,
    /// Entries a restart found running.
    recovered: BTreeSet<ApprovalId>,
}

impl Model {
    /// The entry an op names, or an id the queue never saw.
    fn pick(&self, index: usize) -> ApprovalId {
        if self.ids.is_empty() {
            return ApprovalId::new("2026-01-01T00:00:00.000Z", [0xff; 8]).expect("a valid timestamp");
        }
        self.ids[index % self.ids.len()].clone()
    }

    fn state(&self, id: &ApprovalId) -> Option<ApprovalState> {
        self.states.get(id).copied()
    }

    fn ids_in(&self, wanted: &[ApprovalState]) -> BTreeSet<ApprovalId> {
        self.states.iter().filter(|(_, state)| wanted.contains(state)).map(|(id, _)| id.clone()).collect()
    }

    /// `start` returned `Some`: the exactly-once invariant, then the model's move.
    fn started(&mut self, id: &ApprovalId) -> Result<(), TestCaseError> {
        prop_assert!(self.started.insert(id.clone()), "`{}` started a second time", id);
        prop_assert_eq!(self.decisions.get(id), Some(&true), "`{}` started without an approval", id);
        prop_assert!(!self.recovered.contains(id), "`{}` started after a restart found it running", id);
        self.states.insert(id.clone(), ApprovalState::Running);
        Ok(())
    }
}

fn start(queue: &ApprovalQueue, model: &mut Model, id: &ApprovalId) -> Result<(), TestCaseError> {
    let expected = matches!(model.state(id), Some(ApprovalState::Approved | ApprovalState::AwaitingVault));
    match queue.start(id) {
        Some(entry) => {
            prop_assert!(expected, "`{}` started from {:?}", id, model.state(id));
            prop_assert_eq!(entry.state, ApprovalState::Running);
            model.started(id)?;
        }
        None => prop_assert!(!expected, "`{}` refused to start from {:?}", id, model.state(id)),
    }
    Ok(())
}

/// Simulates a crash in the middle of appending `started` for `id`: the line without its newline.
fn tear_started_line(path: &Path, id: &ApprovalId) {
    let lines = std::fs::read(path).expect("the journal exists").iter().filter(|&&b| b == b'\n').count();
    let event = JournalEvent { at: now(), id: id.clone(), kind: EventKind::Started };
    let mut journal = OpenOptions::new().append(true).open(path).expect("the journal exists");
    journal.write_all(event.sequenced(lines as u64 + 1).to_line().as_bytes()).expect("append");
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("approvals.jsonl");
    // A tiny retention, so that compactions happen inside the sequences too.
    let retention = Retention { finished: 2, slack: 1, ..Retention::default() };
    let (mut queue, _) = ApprovalQueue::open_with(&path, retention).expect("a new journal opens");
    let mut model = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Register => {
                let requested_at = now();
                let id = ApprovalId::new(&requested_at, (step as u64).to_be_bytes()).expect("a valid timestamp");
                queue.register(pending(id.clone(), requested_at)).expect("register");
                model.ids.push(id.clone());
                model.states.insert(id, ApprovalState::PendingApproval);
            }
            Op::Decide { entry, approved } => {
                let id = model.pick(entry);
                let decision = Decision { approved, reason: None, by: "web".into(), args: None };
                match queue.decide(&id, decision) {
                    Ok(entry) => {
                        prop_assert_eq!(model.state(&id), Some(ApprovalState::PendingApproval), "decided twice");
                        let next = if approved { ApprovalState::Approved } else { ApprovalState::Denied };
                        prop_assert_eq!(entry.state, next);
                        model.decisions.insert(id.clone(), approved);
                        model.states.insert(id, next);
                    }
                    Err(_) => prop_assert_ne!(model.state(&id), Some(ApprovalState::PendingApproval)),
                }
            }
            Op::Start { entry } => {
                let id = model.pick(entry);
                start(&queue, &mut model, &id)?;
            }
            Op::AwaitVault { entry } => {
                let id = model.pick(entry);
                let expected = model.state(&id) == Some(ApprovalState::Approved);
                prop_assert_eq!(queue.await_vault(&id), expected, "await_vault from {:?}", model.state(&id));
                if expected {
                    model.states.insert(id, ApprovalState::AwaitingVault);
                }
            }
            Op::Finish { entry, completed } => {
                let id = model.pick(entry);
                let outcome = if completed {
                    Outcome::Completed { audit_id: format!("audit-{step}"), result: json!({"step": step}) }
                } else {
                    Outcome::Failed { failure: not_runnable("the upstream refused") }
                };
                let expected = model.state(&id) == Some(ApprovalState::Running);
                prop_assert_eq!(queue.finish(&id, outcome).is_ok(), expected, "finish from {:?}", model.state(&id));
                if expected {
                    let next = if completed { ApprovalState::Completed } else { ApprovalState::Failed };
                    model.states.insert(id, next);
                }
            }
            Op::Restart { torn, resume } => {
                if let Some(entry) = torn.filter(|_| !model.ids.is_empty()) {
                    tear_started_line(&path, &model.pick(entry));
                }
                drop(queue);
                let (reopened, recovery) = ApprovalQueue::open_with(&path, retention).expect("the journal reopens");
                queue = reopened;
                let running = model.ids_in(&[ApprovalState::Running]);
                let resumable = model.ids_in(&[ApprovalState::Approved, ApprovalState::AwaitingVault]);
                prop_assert_eq!(recovery.recovered.iter().cloned().collect::<BTreeSet<_>>(), running.clone());
                prop_assert_eq!(recovery.to_resume.iter().cloned().collect::<BTreeSet<_>>(), resumable);
                for id in running {
                    model.states.insert(id.clone(), ApprovalState::Failed);
                    model.recovered.insert(id);
                }
                if resume {
                    for id in &recovery.to_resume {
                        start(&queue, &mut model, id)?;
                    }
                }
            }
        }
        // An unfinished entry is never forgotten; a finished one may be, once more than the
        // retained number have finished; what is held agrees with the model.
        let mut held_finished = 0;
        for (id, state) in &model.states {
            match queue.get(id) {
                Some(entry) => {
                    prop_assert_eq!(entry.state, *state, "after {:?}", op);
                    held_finished += usize::from(state.is_terminal());
                }
                None => {
                    prop_assert!(state.is_terminal(), "an unfinished entry ({:?}) was forgotten after {:?}", state, op)
                }
            }
        }
        prop_assert!(held_finished <= retention.finished + retention.slack, "{} finished entries held", held_finished);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Invariant: over a whole sequence, restarts included, `start` hands out an entry at most
    /// once, only after an approval (never for a denied or undecided one), and an entry a restart
    /// finds running is failed and never started again; a torn last line changes nothing.
    /// Model: each entry's expected state (the SPEC §8 machine, a restart turning `running` into
    /// `failed`) and the sets of entries decided, started and recovered; every answer of the queue
    /// and every state it holds must match it.
    #[test]
    fn approved_entries_run_at_most_once_across_restarts(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops)?;
    }
}
