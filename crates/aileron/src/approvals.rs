//! The approval queue: the in-memory entries, their `approvals.jsonl` journal (appended and
//! fsynced before anyone acts on an event), watchers of the queue, and the background execution
//! of approved actions — through `run_action`, exactly once.
//!
//! Invariant: every state change goes through [`ApprovalQueue::commit`], which holds the queue
//! lock across the state-machine check, the journal append + fsync and the in-memory swap. That
//! ordering is what makes decides and executions exactly-once (see `aileron_core::approval`).
//!
//! Retention: an entry that is not finished (pending, approved, awaiting the vault, running) is
//! never forgotten. Of the finished ones (completed, denied, failed) the [`Retention::finished`]
//! most recently requested are kept, in memory and in the journal, so an agent polling a result
//! finds it; older ones live on in the audit log. Once [`Retention::slack`] more have finished,
//! the journal is compacted: its lines for the forgotten entries are dropped (seq numbers are
//! kept; replay allows gaps) and the file replaced atomically, so memory, the journal and the
//! replay at start-up stay bounded however long the daemon runs.

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aileron_core::approval::{
    ApprovalEntry, ApprovalId, ApprovalState, DecideError, Decision, EventKind, JournalEvent, Outcome, decide, replay,
};
use aileron_core::{Boundary, Failure};
use anyhow::Context;
use serde::Serialize;

/// The length in the file's bytes of `intact`, a prefix of whole lines of the file's lossy UTF-8
/// text. The two differ when the file holds invalid UTF-8 (each bad byte reads as a 3-byte U+FFFD);
/// the newlines are the same, so the prefix ends after as many of them in the bytes.
fn intact_bytes(bytes: &[u8], intact: &str) -> usize {
    let lines = intact.bytes().filter(|&b| b == b'\n').count();
    if lines == 0 {
        return 0;
    }
    let mut newlines = bytes.iter().enumerate().filter(|&(_, &b)| b == b'\n');
    newlines.nth(lines - 1).map_or(bytes.len(), |(at, _)| at + 1)
}

/// What watchers of the queue see.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum QueueEvent {
    /// A new entry waits for a decision.
    Pending { entry: Box<ApprovalEntry> },
    /// An entry changed state after its request (decided, running, completed, failed).
    Resolved { entry: Box<ApprovalEntry> },
}

/// Work found in the journal at start-up.
pub struct Recovery {
    /// Approved (or awaiting the vault) and never started: execute each once.
    pub to_resume: Vec<ApprovalId>,
    /// Were running when the daemon died: now failed, never re-run.
    pub recovered: Vec<ApprovalId>,
}

struct Inner {
    entries: BTreeMap<ApprovalId, ApprovalEntry>,
    journal: File,
    seq: u64,
    /// How many of `entries` are finished (terminal).
    finished: usize,
}

/// How many finished entries the queue keeps (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub finished: usize,
    pub slack: usize,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { finished: 1_000, slack: 1_000 }
    }
}

pub struct ApprovalQueue {
    path: PathBuf,
    retention: Retention,
    inner: Mutex<Inner>,
    events: tokio::sync::broadcast::Sender<QueueEvent>,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("{0}")]
    Decide(#[from] DecideError),
    #[error("approval `{0}` is unknown")]
    Unknown(String),
    #[error("approval journal {path}: {message}")]
    Journal { path: String, message: String },
}

impl ApprovalQueue {
    /// Replays the journal (truncating a torn tail), journals the recovery of entries that were
    /// running, and returns the work to resume.
    pub fn open(path: &Path) -> anyhow::Result<(ApprovalQueue, Recovery)> {
        ApprovalQueue::open_with(path, Retention::default())
    }

    /// [`ApprovalQueue::open`] with a chosen retention.
    pub fn open_with(path: &Path, retention: Retention) -> anyhow::Result<(ApprovalQueue, Recovery)> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
        };
        let text = String::from_utf8_lossy(&bytes);
        let replayed = replay(&text);
        for error in &replayed.errors {
            eprintln!("aileron daemon: warning: {error}");
        }
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        if replayed.torn_tail {
            eprintln!("aileron daemon: warning: {} ended with a torn line (a crash mid-append); it was dropped", path.display());
            let intact = intact_bytes(&bytes, &text[..replayed.intact_len]);
            journal.set_len(intact as u64).with_context(|| format!("truncating {}", path.display()))?;
            journal.sync_all()?;
        }
        let (events, _) = tokio::sync::broadcast::channel(256);
        let finished = replayed.entries.values().filter(|e| e.state.is_terminal()).count();
        let queue = ApprovalQueue {
            path: path.to_path_buf(),
            retention,
            inner: Mutex::new(Inner { entries: replayed.entries, journal, seq: replayed.last_seq, finished }),
            events,
        };
        let mut recovered = Vec::new();
        for (id, reason) in replayed.recovered {
            // The entry is already `failed` in memory; make that durable so the next replay agrees.
            let event = JournalEvent { at: now(), id: id.clone(), kind: EventKind::Recovered { reason } };
            let mut inner = queue.inner.lock().expect("approval queue poisoned");
            queue.append(&mut inner, &event)?;
            recovered.push(id);
        }
        {
            // A journal written before retention existed, or recoveries just made: bound it now.
            let mut inner = queue.inner.lock().expect("approval queue poisoned");
            if inner.finished > retention.finished + retention.slack {
                queue.compact(&mut inner)?;
            }
        }
        Ok((queue, Recovery { to_resume: replayed.to_resume, recovered }))
    }

    /// Registers a new pending entry (journaled and fsynced) and tells watchers.
    pub fn register(&self, entry: ApprovalEntry) -> Result<(), QueueError> {
        let mut inner = self.inner.lock().expect("approval queue poisoned");
        self.append(&mut inner, &JournalEvent::requested(&entry)).map_err(|e| self.journal_error(e))?;
        inner.entries.insert(entry.id.clone(), entry.clone());
        drop(inner);
        let _ = self.events.send(QueueEvent::Pending { entry: Box::new(entry) });
        Ok(())
    }

    /// Accepts a human decision once; a second decide (or an unknown id) is `NotPending`/`Unknown`.
    pub fn decide(&self, id: &ApprovalId, decision: Decision) -> Result<ApprovalEntry, QueueError> {
        self.commit(id, |entry| decide(entry, decision, &now()).map_err(QueueError::from))
    }

    /// Moves an approved entry to `running` (journaled before execution starts). Returns `None`
    /// when the entry is not `approved` (already started by someone else, or unknown).
    pub fn start(&self, id: &ApprovalId) -> Option<ApprovalEntry> {
        self.commit(id, |entry| {
            if entry.state != ApprovalState::Approved && entry.state != ApprovalState::AwaitingVault {
                return Err(QueueError::Unknown(id.to_string()));
            }
            entry.advance(&now(), EventKind::Started).map_err(|e| QueueError::Unknown(e.to_string()))
        })
        .ok()
    }

    /// Parks an approved entry until the vault is unlocked (journaled). Returns `false` when the
    /// entry is not `approved` (already waiting, started, or unknown).
    pub fn await_vault(&self, id: &ApprovalId) -> bool {
        self.commit(id, |entry| {
            if entry.state != ApprovalState::Approved {
                return Err(QueueError::Unknown(id.to_string()));
            }
            entry.advance(&now(), EventKind::AwaitingVault).map_err(|e| QueueError::Unknown(e.to_string()))
        })
        .is_ok()
    }

    /// Entries approved but waiting for the vault, oldest first.
    pub fn awaiting_vault(&self) -> Vec<ApprovalId> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        inner.entries.values().filter(|e| e.state == ApprovalState::AwaitingVault).map(|e| e.id.clone()).collect()
    }

    /// Records how an execution ended.
    pub fn finish(&self, id: &ApprovalId, outcome: Outcome) -> Result<ApprovalEntry, QueueError> {
        self.commit(id, |entry| {
            entry.advance(&now(), EventKind::Finished { outcome }).map_err(|e| QueueError::Unknown(e.to_string()))
        })
    }

    pub fn get(&self, id: &ApprovalId) -> Option<ApprovalEntry> {
        self.inner.lock().expect("approval queue poisoned").entries.get(id).cloned()
    }

    /// Entries waiting for a decision, oldest first (ids sort by request time).
    pub fn pending(&self) -> Vec<ApprovalEntry> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        inner.entries.values().filter(|e| e.state == ApprovalState::PendingApproval).cloned().collect()
    }

    /// Up to `limit` decided entries, the most recently requested first.
    pub fn recently_resolved(&self, limit: usize) -> Vec<ApprovalEntry> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        inner.entries.values().rev().filter(|e| e.state != ApprovalState::PendingApproval).take(limit).cloned().collect()
    }

    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<QueueEvent> {
        self.events.subscribe()
    }

    /// Check, journal (fsync), swap, notify — all under the lock.
    fn commit(
        &self,
        id: &ApprovalId,
        step: impl FnOnce(&ApprovalEntry) -> Result<(ApprovalEntry, JournalEvent), QueueError>,
    ) -> Result<ApprovalEntry, QueueError> {
        let mut inner = self.inner.lock().expect("approval queue poisoned");
        let current = inner.entries.get(id).ok_or_else(|| QueueError::Unknown(id.to_string()))?;
        let (next, event) = step(current)?;
        let finishes = next.state.is_terminal() && !current.state.is_terminal();
        self.append(&mut inner, &event).map_err(|e| self.journal_error(e))?;
        inner.entries.insert(id.clone(), next.clone());
        if finishes {
            inner.finished += 1;
            if inner.finished > self.retention.finished + self.retention.slack {
                // The event is durable already; a failed compaction only leaves the journal longer.
                if let Err(error) = self.compact(&mut inner) {
                    eprintln!("aileron daemon: warning: compacting {}: {error:#}", self.path.display());
                }
            }
        }
        drop(inner);
        let _ = self.events.send(QueueEvent::Resolved { entry: Box::new(next.clone()) });
        Ok(next)
    }

    fn append(&self, inner: &mut Inner, event: &JournalEvent) -> anyhow::Result<()> {
        let line = event.clone().sequenced(inner.seq + 1).to_line();
        inner.journal.write_all(line.as_bytes())?;
        inner.journal.write_all(b"\n")?;
        inner.journal.sync_data()?;
        inner.seq += 1;
        Ok(())
    }

    /// Forgets all but the [`Retention::finished`] most recent finished entries: the journal is
    /// rewritten without their lines (atomically, fsynced) and reopened, then memory follows.
    fn compact(&self, inner: &mut Inner) -> anyhow::Result<()> {
        let finished: Vec<&ApprovalId> = inner.entries.iter().filter(|(_, e)| e.state.is_terminal()).map(|(id, _)| id).collect();
        let forget = finished.len().saturating_sub(self.retention.finished);
        // Ids sort by request time: the first ones are the oldest.
        let forgotten: HashSet<ApprovalId> = finished[..forget].iter().map(|id| (*id).clone()).collect();
        #[derive(serde::Deserialize)]
        struct Id {
            id: ApprovalId,
        }
        let text = std::fs::read_to_string(&self.path).with_context(|| format!("reading {}", self.path.display()))?;
        let mut kept = String::with_capacity(text.len());
        for line in text.lines() {
            // A line that does not parse is kept: replay reports it, compaction does not judge it.
            if serde_json::from_str::<Id>(line).is_ok_and(|parsed| forgotten.contains(&parsed.id)) {
                continue;
            }
            kept.push_str(line);
            kept.push('\n');
        }
        crate::home::write_atomic(&self.path, kept.as_bytes(), 0o600)?;
        inner.journal = OpenOptions::new().append(true).open(&self.path).with_context(|| format!("reopening {}", self.path.display()))?;
        inner.entries.retain(|id, _| !forgotten.contains(id));
        inner.finished -= forgotten.len();
        Ok(())
    }

    fn journal_error(&self, error: anyhow::Error) -> QueueError {
        QueueError::Journal { path: self.path.display().to_string(), message: error.to_string() }
    }
}

/// UTC RFC 3339 with milliseconds, the timestamp format of the journal and the audit log.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A fresh approval id: `act-<utc timestamp>-<16 hex>`.
pub fn mint_id(requested_at: &str) -> ApprovalId {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).expect("operating system randomness unavailable");
    ApprovalId::new(requested_at, random).expect("the journal timestamp format is a valid id timestamp")
}

/// The failure recorded when an approved entry cannot be executed at all.
pub fn not_runnable(message: impl Into<String>) -> Failure {
    Failure::runtime_error(Boundary::Runtime, message)
}

#[cfg(test)]
mod properties;
