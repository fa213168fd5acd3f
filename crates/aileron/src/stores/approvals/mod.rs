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
//! or the finished ones weigh more than [`Retention::finished_bytes`], the journal is compacted:
//! its lines for the forgotten entries are dropped (seq numbers are kept; replay allows gaps) and
//! the file replaced atomically, so memory, the journal and the replay at start-up stay bounded
//! however long the daemon runs, and however large each entry is.
//!
//! Invariant: the journal never holds a good line after a damaged one. An append that fails
//! partway (a full disk, an I/O error, a failed fsync) is cut back off to the last good length
//! before the error is returned, and until that cut succeeds nothing more is appended. So the
//! only damage a crash can leave is a torn last line, which start-up drops; a damaged line
//! anywhere else stops the start-up with an error (see `aileron_core::approval::replay`).

use std::collections::{BTreeMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use aileron_core::approval::{
    Admission, AdmissionRequest, ApprovalEntry, ApprovalId, ApprovalState, DecideError, Decision, EventKind,
    JournalEvent, Outcome, admit, decide, replay,
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

/// The journal file as appending needs it; a test substitutes one whose writes fail partway.
trait JournalFile: Send {
    /// Appends `bytes` at the end of the file (the file is opened `O_APPEND`).
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    fn sync(&mut self) -> io::Result<()>;
    fn truncate(&mut self, len: u64) -> io::Result<()>;
}

impl JournalFile for File {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_all(bytes)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
}

struct Inner {
    entries: BTreeMap<ApprovalId, ApprovalEntry>,
    journal: Box<dyn JournalFile>,
    /// The journal's length after its last good line: where a failed append is cut back to.
    journal_len: u64,
    /// Set when a failed append could not be cut back off: the file may end in a damaged line,
    /// so nothing is appended until a retried cut succeeds.
    journal_damaged: bool,
    seq: u64,
    /// How many of `entries` are finished (terminal).
    finished: usize,
    /// What the finished ones weigh ([`weight`]).
    finished_bytes: usize,
}

/// How many finished entries the queue keeps (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub finished: usize,
    pub slack: usize,
    /// The most the finished entries may weigh ([`weight`]) before the oldest are forgotten, down
    /// to half of it. A count alone did not bound them: an agent asking for and withdrawing
    /// approvals of requests with a 400 kB head kept ~0.5 MB in memory and in the journal for
    /// each, ~1 GB before a compaction (the fifty-third re-attack's F3). Entries as they usually
    /// are (a few kB) reach [`Retention::finished`] long before this.
    pub finished_bytes: usize,
}

impl Default for Retention {
    fn default() -> Retention {
        Retention { finished: 1_000, slack: 1_000, finished_bytes: 32 * 1024 * 1024 }
    }
}

impl Retention {
    /// Whether `finished` entries weighing `bytes` are more than the queue keeps.
    fn exceeded(&self, finished: usize, bytes: usize) -> bool {
        finished > self.finished + self.slack || bytes > self.finished_bytes
    }
}

/// What an entry weighs in memory and in the journal: the length of its JSON (its `requested`
/// line carries all of it, arguments included).
fn weight(entry: &ApprovalEntry) -> usize {
    serde_json::to_vec(entry).map_or(0, |json| json.len())
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
    /// No longer pending: decided, expired or withdrawn already.
    #[error("approval `{0}` is no longer pending")]
    NotPending(String),
    #[error("approval journal {path}: {message}")]
    Journal { path: String, message: String },
    /// The session already has this many approvals waiting (SPEC §8 cap).
    #[error("{0} approvals from this session are already waiting")]
    TooManyPending(usize),
}

/// What [`ApprovalQueue::register`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Registered {
    /// The entry was journaled and now waits.
    New,
    /// An identical request from the same session already waits: nothing was registered, the
    /// caller answers with this entry.
    Repeat(Box<ApprovalEntry>),
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
        if let Some(unreadable) = &replayed.unreadable {
            // Fail closed: the lost line may be the `decided`, `started` or `finished` that keeps an
            // action from being approved or run again.
            anyhow::bail!(
                "{}:{}: not a journal event ({}), and lines follow it, so it is damage rather than a crash \
                 mid-append; the approval queue cannot be rebuilt safely\n\
                 hint: inspect that line and repair it by hand if you can. Deleting it forgets that event: a \
                 lost `decided` makes the approval pending again, a lost `started` or `finished` can let an \
                 approved action run a second time, so first check the target system and the audit log \
                 (`aileron audit list`). Moving the whole file aside forgets every approval in it",
                path.display(),
                unreadable.line,
                unreadable.message,
            );
        }
        for error in &replayed.errors {
            log_line!("aileron daemon: warning: {error}");
        }
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        if replayed.torn_tail {
            log_line!(
                "aileron daemon: warning: {} ended with a torn line (a crash mid-append); it was dropped",
                path.display()
            );
            let intact = intact_bytes(&bytes, &text[..replayed.intact_len]);
            journal.set_len(intact as u64).with_context(|| format!("truncating {}", path.display()))?;
            journal.sync_all()?;
        }
        let journal_len = journal.metadata().with_context(|| format!("reading {}", path.display()))?.len();
        let (events, _) = tokio::sync::broadcast::channel(256);
        let finished = replayed.entries.values().filter(|e| e.state.is_terminal()).count();
        let finished_bytes = replayed.entries.values().filter(|e| e.state.is_terminal()).map(weight).sum();
        let queue = ApprovalQueue {
            path: path.to_path_buf(),
            retention,
            inner: Mutex::new(Inner {
                entries: replayed.entries,
                journal: Box::new(journal),
                journal_len,
                journal_damaged: false,
                seq: replayed.last_seq,
                finished,
                finished_bytes,
            }),
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
            if retention.exceeded(inner.finished, inner.finished_bytes) {
                queue.compact(&mut inner)?;
            }
        }
        Ok((queue, Recovery { to_resume: replayed.to_resume, recovered }))
    }

    /// Registers a new pending entry (journaled and fsynced) and tells watchers — unless the
    /// session's identical request already waits ([`Registered::Repeat`]) or the session has
    /// too many waiting ([`QueueError::TooManyPending`]). Both are decided under the queue lock
    /// with the registration itself, so concurrent requests cannot all slip past them.
    pub fn register(&self, entry: ApprovalEntry) -> Result<Registered, QueueError> {
        let mut inner = self.inner.lock().expect("approval queue poisoned");
        if let Some(existing) = admitted(&inner, AdmissionRequest::of(&entry))? {
            return Ok(Registered::Repeat(Box::new(existing)));
        }
        self.append(&mut inner, &JournalEvent::requested(&entry)).map_err(|e| self.journal_error(e))?;
        inner.entries.insert(entry.id.clone(), entry.clone());
        drop(inner);
        let _ = self.events.send(QueueEvent::Pending { entry: Box::new(entry) });
        Ok(Registered::New)
    }

    /// What [`ApprovalQueue::register`] would decide for `request` now: a cheap first check before
    /// the preview is evaluated. Registration decides again.
    pub fn admission(&self, request: AdmissionRequest<'_>) -> Result<Option<ApprovalEntry>, QueueError> {
        admitted(&self.inner.lock().expect("approval queue poisoned"), request)
    }

    /// Accepts a human decision once; a second decide (or an unknown id) is `NotPending`/`Unknown`.
    pub fn decide(&self, id: &ApprovalId, decision: Decision) -> Result<ApprovalEntry, QueueError> {
        self.commit(id, |entry| decide(entry, decision, &now()).map_err(QueueError::from))
    }

    /// Ends a pending entry whose expiry has passed as `expired`. `NotPending` when a decision,
    /// a withdrawal or another expiry got there first (decided under the same lock: one wins).
    pub fn expire(&self, id: &ApprovalId) -> Result<ApprovalEntry, QueueError> {
        let now = now();
        self.commit(id, |entry| {
            if !entry.is_due_to_expire(&now) {
                return Err(QueueError::NotPending(id.to_string()));
            }
            entry.advance(&now, EventKind::Expired).map_err(|_| QueueError::NotPending(id.to_string()))
        })
    }

    /// Withdraws a pending entry (`cancelled`, by `by`: `cli`, `web`, `agent`, `session`).
    /// `NotPending` when it was decided, expired or withdrawn first.
    pub fn cancel(&self, id: &ApprovalId, by: &str, reason: Option<String>) -> Result<ApprovalEntry, QueueError> {
        self.commit(id, |entry| {
            if entry.state != ApprovalState::PendingApproval {
                return Err(QueueError::NotPending(id.to_string()));
            }
            let kind = EventKind::Cancelled { by: by.to_string(), reason };
            entry.advance(&now(), kind).map_err(|_| QueueError::NotPending(id.to_string()))
        })
    }

    /// Pending entries whose expiry has passed at `now`, oldest first.
    pub fn due_to_expire(&self, now: &str) -> Vec<ApprovalId> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        inner.entries.values().filter(|e| e.is_due_to_expire(now)).map(|e| e.id.clone()).collect()
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

    /// The oldest entry `matches` accepts.
    pub fn find(&self, matches: impl Fn(&ApprovalEntry) -> bool) -> Option<ApprovalEntry> {
        self.inner.lock().expect("approval queue poisoned").entries.values().find(|entry| matches(entry)).cloned()
    }

    pub fn get(&self, id: &ApprovalId) -> Option<ApprovalEntry> {
        self.inner.lock().expect("approval queue poisoned").entries.get(id).cloned()
    }

    /// Entries waiting for a decision, oldest first: by the time each was asked (an id names only
    /// the second, so within one ids alone listed them in random order: the tenth re-attack).
    pub fn pending(&self) -> Vec<ApprovalEntry> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        let mut pending: Vec<ApprovalEntry> =
            inner.entries.values().filter(|e| e.state == ApprovalState::PendingApproval).cloned().collect();
        pending.sort_by(|a, b| a.requested_at.cmp(&b.requested_at).then_with(|| a.id.cmp(&b.id)));
        pending
    }

    /// Up to `limit` decided entries, the most recently requested first.
    pub fn recently_resolved(&self, limit: usize) -> Vec<ApprovalEntry> {
        let inner = self.inner.lock().expect("approval queue poisoned");
        inner
            .entries
            .values()
            .rev()
            .filter(|e| e.state != ApprovalState::PendingApproval)
            .take(limit)
            .cloned()
            .collect()
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
            inner.finished_bytes += weight(&next);
            if self.retention.exceeded(inner.finished, inner.finished_bytes) {
                // The event is durable already; a failed compaction only leaves the journal longer.
                if let Err(error) = self.compact(&mut inner) {
                    log_line!("aileron daemon: warning: compacting {}: {error:#}", self.path.display());
                }
            }
        }
        drop(inner);
        let _ = self.events.send(QueueEvent::Resolved { entry: Box::new(next.clone()) });
        Ok(next)
    }

    /// Appends one line and fsyncs it. On any failure the file is cut back to its last good
    /// length (and that fsynced) before the error returns, so no later line follows a fragment;
    /// if even the cut fails, appends are refused until a retried cut succeeds.
    fn append(&self, inner: &mut Inner, event: &JournalEvent) -> anyhow::Result<()> {
        if inner.journal_damaged {
            cut_back(inner).context("the journal still ends in a failed append that could not be removed")?;
        }
        let mut line = event.clone().sequenced(inner.seq + 1).to_line();
        line.push('\n');
        // An fsync failure counts too: the line may or may not be on disk, and the caller is told
        // the event did not happen, so it must not be there at the next start.
        let written = inner.journal.append(line.as_bytes()).and_then(|()| inner.journal.sync());
        if let Err(error) = written {
            if let Err(cut) = cut_back(inner) {
                return Err(anyhow::Error::new(error).context(format!(
                    "removing the partial line also failed ({cut}); appends are refused until it succeeds"
                )));
            }
            return Err(error.into());
        }
        inner.journal_len += line.len() as u64;
        inner.seq += 1;
        Ok(())
    }

    /// Forgets all but the [`Retention::finished`] most recent finished entries, and of those all
    /// but the most recent weighing at most half of [`Retention::finished_bytes`]: the journal is
    /// rewritten without their lines (atomically, fsynced) and reopened, then memory follows.
    fn compact(&self, inner: &mut Inner) -> anyhow::Result<()> {
        let (mut kept, mut kept_bytes) = (0, 0);
        let mut forgotten = HashSet::new();
        // Ids sort by request time: the last ones are the newest.
        for (id, entry) in inner.entries.iter().rev().filter(|(_, e)| e.state.is_terminal()) {
            let weight = weight(entry);
            if kept < self.retention.finished && kept_bytes + weight <= self.retention.finished_bytes / 2 {
                kept += 1;
                kept_bytes += weight;
            } else {
                forgotten.insert(id.clone());
            }
        }
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
        crate::platform::home::write_atomic(&self.path, kept.as_bytes(), 0o600)?;
        inner.journal = Box::new(
            OpenOptions::new()
                .append(true)
                .open(&self.path)
                .with_context(|| format!("reopening {}", self.path.display()))?,
        );
        inner.journal_len = kept.len() as u64;
        inner.journal_damaged = false;
        inner.entries.retain(|id, _| !forgotten.contains(id));
        inner.finished -= forgotten.len();
        inner.finished_bytes = kept_bytes;
        Ok(())
    }

    fn journal_error(&self, error: anyhow::Error) -> QueueError {
        QueueError::Journal { path: self.path.display().to_string(), message: error.to_string() }
    }
}

/// [`admit`] over the queue's entries: `None` to register, the waiting identical entry, or the cap.
fn admitted(inner: &Inner, request: AdmissionRequest<'_>) -> Result<Option<ApprovalEntry>, QueueError> {
    match admit(inner.entries.values(), request) {
        Admission::New => Ok(None),
        Admission::Repeat(existing) => Ok(Some(existing.clone())),
        Admission::TooManyPending(waiting) => Err(QueueError::TooManyPending(waiting)),
    }
}

/// Truncates the journal to its last good length and fsyncs that; marks it damaged until it works.
fn cut_back(inner: &mut Inner) -> io::Result<()> {
    inner.journal_damaged = true;
    inner.journal.truncate(inner.journal_len)?;
    inner.journal.sync()?;
    inner.journal_damaged = false;
    Ok(())
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

#[cfg(test)]
mod journal_faults {
    //! Failed appends (a full disk mid-write, a failed fsync, a failed cut) never leave a good
    //! line behind a damaged one; a damaged line before the end stops the start-up; concurrent
    //! registrations respect the dedupe and the per-session cap.

    use std::sync::Arc;

    use aileron_core::approval::MAX_PENDING_PER_SESSION;
    use serde_json::json;

    use super::*;

    /// Faults the next journal operations hit; shared between the test and [`FaultyJournal`].
    #[derive(Default)]
    struct Faults {
        /// Bytes the next append writes before it fails as a full disk would.
        short_write: Option<usize>,
        fail_sync: bool,
        fail_truncate: bool,
    }

    struct FaultyJournal {
        file: File,
        faults: Arc<Mutex<Faults>>,
    }

    fn no_space() -> io::Error {
        io::Error::from_raw_os_error(28) // ENOSPC
    }

    impl JournalFile for FaultyJournal {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            let budget = self.faults.lock().unwrap().short_write.take();
            match budget {
                Some(budget) => {
                    self.file.write_all(&bytes[..budget.min(bytes.len())])?;
                    Err(no_space())
                }
                None => self.file.write_all(bytes),
            }
        }

        fn sync(&mut self) -> io::Result<()> {
            if std::mem::take(&mut self.faults.lock().unwrap().fail_sync) {
                Err(no_space())
            } else {
                self.file.sync_data()
            }
        }

        fn truncate(&mut self, len: u64) -> io::Result<()> {
            if self.faults.lock().unwrap().fail_truncate { Err(no_space()) } else { self.file.set_len(len) }
        }
    }

    fn faulty(queue: &ApprovalQueue) -> Arc<Mutex<Faults>> {
        let faults = Arc::new(Mutex::new(Faults::default()));
        let file = OpenOptions::new().append(true).open(&queue.path).unwrap();
        queue.inner.lock().unwrap().journal = Box::new(FaultyJournal { file, faults: faults.clone() });
        faults
    }

    fn entry(byte: u8, session: Option<&str>, title: &str) -> ApprovalEntry {
        let requested_at = now();
        let mut entry = super::properties::pending(ApprovalId::new(&requested_at, [byte; 8]).unwrap(), requested_at);
        entry.args = json!({ "title": title }).as_object().unwrap().clone();
        entry.session_id = session.map(str::to_string);
        entry
    }

    /// Reopens the journal and checks every line of it is a whole event.
    fn reopen(path: &Path) -> ApprovalQueue {
        let text = std::fs::read_to_string(path).unwrap();
        let replayed = replay(&text);
        assert!(!replayed.torn_tail && replayed.unreadable.is_none() && replayed.errors.is_empty(), "{text}");
        ApprovalQueue::open(path).expect("the journal reopens").0
    }

    #[test]
    fn pending_entries_are_listed_in_the_order_they_were_asked_within_a_second() {
        let dir = tempfile::tempdir().unwrap();
        let (queue, _) = ApprovalQueue::open(&dir.path().join("approvals.jsonl")).unwrap();
        // Asked in one second, their random parts in the opposite order.
        for (byte, millis) in [(9u8, "100"), (5, "200"), (1, "300")] {
            let requested_at = format!("2026-12-06T02:26:56.{millis}Z");
            let id = ApprovalId::new(&requested_at, [byte; 8]).unwrap();
            queue.register(super::properties::pending(id, requested_at)).unwrap();
        }
        let asked: Vec<String> = queue.pending().into_iter().map(|entry| entry.requested_at).collect();
        assert_eq!(asked, ["2026-12-06T02:26:56.100Z", "2026-12-06T02:26:56.200Z", "2026-12-06T02:26:56.300Z"]);
    }

    /// The fifty-third re-attack's F3: an agent asking for approvals of requests with a large head
    /// and withdrawing each at once grew the daemon and `approvals.jsonl` by ~0.5 MB an entry, up
    /// to the retention's 2,000 entries (~1 GB). Finished entries are also bounded by weight: 60
    /// withdrawn entries of 100 kB each leave at most the budget in the journal and in memory,
    /// the newest kept; without the bound all 60 (6 MB) were.
    #[test]
    fn withdrawn_entries_are_kept_within_a_weight() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let budget = 1024 * 1024;
        let retention = Retention { finished_bytes: budget, ..Retention::default() };
        let (queue, _) = ApprovalQueue::open_with(&path, retention).unwrap();
        let padding = "x".repeat(100_000);
        let mut last = None;
        for byte in 0..60u8 {
            let asked = entry(byte, Some("s-flood"), &padding);
            queue.register(asked.clone()).unwrap();
            queue.cancel(&asked.id, "agent", None).unwrap();
            last = Some(asked.id);
            let journal = std::fs::metadata(&path).unwrap().len() as usize;
            assert!(journal <= budget + 2 * padding.len(), "after {} entries the journal is {journal} bytes", byte + 1);
        }
        let inner = queue.inner.lock().unwrap();
        assert!(inner.entries.len() <= budget / padding.len() + 1, "{} entries kept", inner.entries.len());
        assert!(inner.finished_bytes <= budget, "{}", inner.finished_bytes);
        drop(inner);
        assert_eq!(queue.get(&last.unwrap()).map(|e| e.state), Some(ApprovalState::Cancelled), "the newest is kept");
        drop(queue);
        let reopened = reopen(&path);
        assert!(reopened.inner.lock().unwrap().entries.len() <= budget / padding.len() + 1);
    }

    #[test]
    fn a_failed_append_leaves_the_journal_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let (queue, _) = ApprovalQueue::open(&path).unwrap();
        let before = entry(1, None, "before");
        queue.register(before.clone()).unwrap();
        let faults = faulty(&queue);

        // A full disk mid-line, a failed fsync after a whole line, each answered as an error.
        let lost = entry(2, None, "lost");
        faults.lock().unwrap().short_write = Some(40);
        assert!(matches!(queue.register(lost.clone()), Err(QueueError::Journal { .. })));
        faults.lock().unwrap().fail_sync = true;
        assert!(matches!(queue.decide(&before.id, approve()), Err(QueueError::Journal { .. })));
        assert_eq!(queue.get(&before.id).unwrap().state, ApprovalState::PendingApproval);

        let after = entry(3, None, "after");
        queue.register(after.clone()).unwrap();
        drop(queue);
        let queue = reopen(&path);
        assert_eq!(queue.get(&before.id).map(|e| e.state), Some(ApprovalState::PendingApproval), "not approved");
        assert_eq!(
            queue.get(&after.id).map(|e| e.state),
            Some(ApprovalState::PendingApproval),
            "the later entry survives"
        );
        assert!(queue.get(&lost.id).is_none());
    }

    #[test]
    fn appends_wait_until_a_failed_append_is_cut_back_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let (queue, _) = ApprovalQueue::open(&path).unwrap();
        let first = entry(1, None, "first");
        queue.register(first.clone()).unwrap();
        let faults = faulty(&queue);
        {
            let mut faults = faults.lock().unwrap();
            faults.short_write = Some(40);
            faults.fail_truncate = true;
        }
        let error = queue.register(entry(2, None, "torn")).unwrap_err();
        assert!(error.to_string().contains("appends are refused"), "{error}");
        // While the fragment cannot be removed, nothing lands after it.
        let refused = entry(3, None, "refused");
        let error = queue.register(refused.clone()).unwrap_err();
        assert!(error.to_string().contains("could not be removed"), "{error}");
        assert!(std::fs::read_to_string(&path).unwrap().lines().count() == 2, "only the first line and the fragment");

        faults.lock().unwrap().fail_truncate = false;
        let last = entry(4, None, "last");
        queue.register(last.clone()).unwrap();
        drop(queue);
        let queue = reopen(&path);
        assert!(queue.get(&first.id).is_some() && queue.get(&last.id).is_some() && queue.get(&refused.id).is_none());
    }

    fn approve() -> Decision {
        Decision { approved: true, reason: None, by: "test".into(), args: None }
    }

    #[test]
    fn a_damaged_line_before_the_end_stops_the_start_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let (queue, _) = ApprovalQueue::open(&path).unwrap();
        let ran = entry(1, None, "ran");
        queue.register(ran.clone()).unwrap();
        queue.decide(&ran.id, approve()).unwrap();
        queue.start(&ran.id).unwrap();
        let failure = not_runnable("boom");
        queue.finish(&ran.id, Outcome::Failed { failure }).unwrap();
        queue.register(entry(2, None, "later")).unwrap();
        drop(queue);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for damaged in 1..=3 {
            let mut edited = lines.clone();
            edited[damaged] = "{garbage";
            std::fs::write(&path, format!("{}\n", edited.join("\n"))).unwrap();
            let error =
                ApprovalQueue::open(&path).err().unwrap_or_else(|| panic!("line {} damaged: opened", damaged + 1));
            let message = format!("{error:#}");
            assert!(
                message.starts_with(&format!("{}:{}: not a journal event", path.display(), damaged + 1)),
                "{message}"
            );
            assert!(message.contains("\nhint: ") && message.contains("Deleting it forgets that event"), "{message}");
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                format!("{}\n", edited.join("\n")),
                "the file is left as it was"
            );
        }
        // Damage on the last line is a crash mid-append: dropped, and the rest opens.
        let mut edited = lines.clone();
        *edited.last_mut().unwrap() = "{\"seq\":6,\"at";
        std::fs::write(&path, format!("{}\n", edited.join("\n"))).unwrap();
        let (queue, _) = ApprovalQueue::open(&path).expect("a torn last line is dropped");
        assert_eq!(queue.get(&ran.id).map(|e| e.state), Some(ApprovalState::Failed));
    }

    #[test]
    fn concurrent_registrations_respect_the_dedupe_and_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let queue = Arc::new(ApprovalQueue::open(&path).unwrap().0);
        let register_all = |entries: Vec<ApprovalEntry>| -> Vec<Result<Registered, QueueError>> {
            let barrier = Arc::new(std::sync::Barrier::new(entries.len()));
            let threads: Vec<_> = entries
                .into_iter()
                .map(|entry| {
                    let (queue, barrier) = (queue.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        queue.register(entry)
                    })
                })
                .collect();
            threads.into_iter().map(|thread| thread.join().unwrap()).collect()
        };

        // Ten identical calls from one session: one entry, nine answered with it.
        let identical = register_all((0..10).map(|n| entry(n, Some("sess-1"), "same")).collect());
        let new = identical.iter().filter(|r| matches!(r, Ok(Registered::New))).count();
        let repeats: Vec<&ApprovalEntry> = identical
            .iter()
            .filter_map(|r| if let Ok(Registered::Repeat(e)) = r { Some(&**e) } else { None })
            .collect();
        assert_eq!((new, repeats.len()), (1, 9));
        let pending = queue.pending();
        assert_eq!(pending.len(), 1);
        assert!(repeats.iter().all(|e| e.id == pending[0].id));

        // Sixty distinct calls from one session: the cap holds, counting the one already waiting.
        let distinct = register_all((0..60).map(|n| entry(100 + n, Some("sess-1"), &format!("call {n}"))).collect());
        let accepted = distinct.iter().filter(|r| matches!(r, Ok(Registered::New))).count();
        let capped =
            distinct.iter().filter(|r| matches!(r, Err(QueueError::TooManyPending(MAX_PENDING_PER_SESSION)))).count();
        assert_eq!((accepted, capped), (MAX_PENDING_PER_SESSION - 1, 60 - (MAX_PENDING_PER_SESSION - 1)));
        assert_eq!(queue.pending().len(), MAX_PENDING_PER_SESSION);
        // Other sessions and session-less (CLI) calls are not capped by it.
        assert!(matches!(queue.register(entry(200, Some("sess-2"), "x")), Ok(Registered::New)));
        assert!(matches!(queue.register(entry(201, None, "same")), Ok(Registered::New)));
    }

    /// SPEC §8's races: a human decision against an expiry, and against a withdrawal, on an entry
    /// that is due to expire — many times, at once. Exactly one ends it, the others are told it is
    /// no longer pending, the journal holds exactly one ending event, and a restart agrees.
    #[test]
    fn a_decision_racing_an_expiry_or_a_withdrawal_has_exactly_one_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let queue = Arc::new(ApprovalQueue::open(&path).unwrap().0);
        for round in 0..40u8 {
            let mut due = entry(round, Some("sess-1"), &format!("call {round}"));
            // Requested long ago with a one-minute expiry: due now.
            due.requested_at = "2026-01-01T00:00:00.000Z".to_string();
            due.expires_after_ms = Some(60_000);
            queue.register(due.clone()).unwrap();
            let barrier = Arc::new(std::sync::Barrier::new(3));
            let racers: Vec<std::thread::JoinHandle<Result<ApprovalEntry, QueueError>>> = (0..3)
                .map(|racer| {
                    let (queue, barrier, id) = (queue.clone(), barrier.clone(), due.id.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        match racer {
                            0 => queue.decide(&id, approve()),
                            1 => queue.expire(&id),
                            _ => queue.cancel(&id, "agent", None),
                        }
                    })
                })
                .collect();
            let results: Vec<_> = racers.into_iter().map(|racer| racer.join().unwrap()).collect();
            let won: Vec<&ApprovalEntry> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(won.len(), 1, "round {round}: {results:?}");
            let state = queue.get(&due.id).unwrap().state;
            assert_eq!(won[0].state, state);
            assert!(matches!(state, ApprovalState::Approved | ApprovalState::Expired | ApprovalState::Cancelled));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let endings = text.lines().filter(|line| !line.contains("\"event\":\"requested\"")).count();
        assert_eq!(endings, 40, "one ending event per entry:\n{text}");
        let reopened = reopen(&path);
        for entry in queue.recently_resolved(100) {
            assert_eq!(reopened.get(&entry.id).map(|e| e.state), Some(entry.state), "a restart agrees");
        }
    }

    /// An edit racing a plain approval (two approvers at once): one decision wins, and the
    /// arguments the run will use are the winner's, live and after a reopen.
    #[test]
    fn an_edit_racing_a_plain_approval_has_one_outcome() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approvals.jsonl");
        let queue = Arc::new(ApprovalQueue::open(&path).unwrap().0);
        for round in 0..30u8 {
            let asked = entry(round, None, &format!("asked {round}"));
            queue.register(asked.clone()).unwrap();
            let edit = json!({ "title": format!("edited {round}") }).as_object().unwrap().clone();
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let racers: Vec<_> = [None, Some(edit.clone())]
                .into_iter()
                .map(|args| {
                    let (queue, barrier, id) = (queue.clone(), barrier.clone(), asked.id.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        let edited = args.is_some();
                        (edited, queue.decide(&id, Decision { args, ..approve() }))
                    })
                })
                .collect();
            let results: Vec<_> = racers.into_iter().map(|racer| racer.join().unwrap()).collect();
            let winners: Vec<bool> = results.iter().filter(|(_, r)| r.is_ok()).map(|(edited, _)| *edited).collect();
            assert_eq!(winners.len(), 1, "round {round}");
            let held = queue.get(&asked.id).unwrap();
            let expected = if winners[0] { &edit } else { &asked.args };
            assert_eq!(held.run_args(), expected, "round {round}");
        }
        let reopened = reopen(&path);
        for entry in queue.recently_resolved(100) {
            assert_eq!(reopened.get(&entry.id).unwrap().run_args(), entry.run_args());
        }
    }

    #[test]
    fn only_a_due_pending_entry_expires_and_only_a_pending_one_is_withdrawn() {
        let dir = tempfile::tempdir().unwrap();
        let (queue, _) = ApprovalQueue::open(&dir.path().join("approvals.jsonl")).unwrap();
        let fresh = entry(1, None, "fresh");
        queue.register(fresh.clone()).unwrap();
        assert!(matches!(queue.expire(&fresh.id), Err(QueueError::NotPending(_))), "not due yet");
        assert!(queue.due_to_expire(&now()).is_empty());
        queue.decide(&fresh.id, approve()).unwrap();
        assert!(matches!(queue.cancel(&fresh.id, "cli", None), Err(QueueError::NotPending(_))), "decided already");
        let mut old = entry(2, None, "old");
        old.requested_at = "2026-01-01T00:00:00.000Z".to_string();
        queue.register(old.clone()).unwrap();
        assert_eq!(queue.due_to_expire(&now()), vec![old.id.clone()]);
        assert_eq!(queue.expire(&old.id).unwrap().state, ApprovalState::Expired);
        assert!(matches!(queue.expire(&old.id), Err(QueueError::NotPending(_))), "expired once");
        assert!(matches!(queue.decide(&old.id, approve()), Err(QueueError::Decide(_))), "not decidable after");
    }
}
