//! The durable audit log (SPEC §10): a group-commit writer, a torn-tail tolerant reader, query
//! and verification over `<dir>/audit/audit-YYYY-MM-DD.jsonl`.
//!
//! Invariant: `append` returns `Ok` only after the record's line is written to its daily file and
//! fdatasync'ed, in the journal or in that file. Callers do risky work (or report an outcome) only
//! after that, and fail closed on `Err`.
//!
//! Writing is done by one dedicated thread fed by a channel. It drains everything queued, seals
//! the records in order (seq, prev), writes them with one `write` per file and a frame of them to
//! the journal ([`journal`]), syncs the journal once and only then acknowledges each waiter: under
//! load many appends share one fsync. The file is chosen by the record's UTC date; the chain
//! continues across files. A killed process leaves at most a torn tail (bytes after the last
//! newline, never acknowledged): `open` moves it aside to a `.torn-<ms>` file next to the log and
//! truncates it, so the next record links to the last complete one. A machine that stopped may
//! also have lost the daily file's last lines: `open` then appends them from the journal. That is
//! also what makes a `kill -9` test possible: after any kill, reopening yields a log that
//! verifies, and every acknowledged record is in it.
//!
//! One process writes a log directory at a time (an exclusive flock on `audit/.writer.lock`):
//! two writers would fork the chain.
//!
//! Reading never loads a whole file: a query walks the daily files newest first and each file
//! backwards in chunks ([`daily_file::NewestFirstLines`]), skips most lines on their bytes alone
//! (the wanted values as they appear in a canonical line, the `seq` and `timestamp` read off the
//! line's end: [`filter`]) and parses only what may match. [`AuditLog::run_histogram`] counts runs
//! per time bucket the same way, and [`AuditLog::subscribe`] tells readers when to look again.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;

use aileron_core::audit::{
    Actor, AuditRecord, ChainBreak, GENESIS_PREV, HeadAnchor, PreparedRecord, VerifyReport, log_lines,
};
use aileron_core::tlog::CosignatureVerifier;
use aileron_core::vocabulary::EventType;
use anyhow::Context;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::platform::home::create_private_dir;

mod daily_file;
pub mod export;
mod filter;
mod histogram;
mod journal;
mod key_file;
mod query;
mod recovery;
pub mod tree;
mod verify;
pub mod witness;
mod writer;

pub use filter::AuditFilter;
pub use histogram::Bucket;
pub use journal::JOURNAL_FILE;
pub use recovery::HEAD_FILE;

use journal::Journal;
use writer::{Command, Writer};

/// Where the log lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    /// The parent of `audit/`; `None` keeps the log in memory (`AILERON_AUDIT_DIR` explicitly empty).
    pub dir: Option<PathBuf>,
    /// The witness's directory (SPEC §17); `None`: checkpoints are not cosigned.
    pub witness: Option<PathBuf>,
}

/// The source of record timestamps; injectable so tests can cross midnight.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// What a caller asks to record. The log assigns timestamp, seq, prev and hash.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub event_type: EventType,
    pub actor: Actor,
    pub session_id: Option<String>,
    pub payload: Map<String, Value>,
    /// Pre-minted id (see [`mint_audit_id`]) so a failure envelope and its record can share it;
    /// `None` mints one.
    pub audit_id: Option<String>,
}

impl AuditEvent {
    /// An event outside any launch session, its id minted when it is appended.
    pub fn new(event_type: EventType, actor: Actor, payload: Map<String, Value>) -> AuditEvent {
        AuditEvent { event_type, actor, session_id: None, payload, audit_id: None }
    }

    /// Its fields written ahead for the writer, its id minted when it has none.
    fn prepare(&mut self) -> PreparedRecord {
        let audit_id = self.audit_id.get_or_insert_with(mint_audit_id);
        PreparedRecord::with_payload(
            &self.actor,
            audit_id,
            self.event_type.as_str(),
            self.session_id.as_deref(),
            &self.payload,
        )
    }

    /// The record it became, sealed with its chain fields ([`AuditEvent::prepare`] came first).
    fn into_record(self, sealed: Sealed) -> AuditRecord {
        let ChainFields { prev, hash, timestamp } = sealed.fields.expect("the chain fields were asked for");
        AuditRecord {
            audit_id: self.audit_id.expect("prepared"),
            event_type: self.event_type.as_str().to_string(),
            timestamp,
            actor: self.actor,
            session_id: self.session_id,
            payload: self.payload,
            seq: sealed.seq,
            prev,
            hash,
        }
    }
}

/// `audit-<uuid v4>`, in one allocation.
pub fn mint_audit_id() -> String {
    let mut id = String::with_capacity(AUDIT_ID_LEN);
    id.push_str("audit-");
    id.push_str(uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()));
    id
}

const AUDIT_ID_LEN: usize = "audit-".len() + uuid::fmt::Hyphenated::LENGTH;

/// A record the writer sealed: its seq, and its chain fields when its appender asked for them.
#[derive(Debug)]
pub struct Sealed {
    seq: u64,
    fields: Option<ChainFields>,
}

impl Sealed {
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// What the log gave a record: its place in the chain and its time.
#[derive(Debug)]
struct ChainFields {
    prev: String,
    hash: String,
    timestamp: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// The batch holding this record could not be written or synced; nothing was acknowledged.
    #[error("writing the audit log failed: {0}")]
    Write(String),
    #[error("the audit log writer has stopped")]
    WriterStopped,
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
    /// A time bound of a filter (`since`, `until`) that is neither form it accepts.
    #[error("invalid `{parameter}` value `{value}`: expected an RFC 3339 timestamp or a YYYY-MM-DD date")]
    InvalidTime { parameter: &'static str, value: String },
    /// A histogram bucket that is not positive, or so small the range would need too many.
    #[error("invalid histogram bucket: {0}")]
    InvalidBucket(String),
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Broken(#[from] ChainBreak),
    #[error("reading {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("the log was cut short: {problem}")]
    Truncated { problem: String },
    /// A signed checkpoint does not match the log (SPEC §17).
    #[error("{problem}")]
    Checkpoints { problem: String },
}

impl VerifyError {
    pub fn hint(&self) -> &'static str {
        match self {
            VerifyError::Broken(_) => {
                "the log was modified or damaged at that line; keep a copy of the file for investigation"
            }
            VerifyError::Read { .. } => "check that the audit directory and its files are readable",
            VerifyError::Truncated { .. } => {
                "records were removed from the end of the log; keep a copy of the directory for investigation"
            }
            VerifyError::Checkpoints { .. } => {
                "the log no longer matches a checkpoint its key signed; keep a copy of the audit directory for investigation"
            }
        }
    }
}

fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    parse_written_timestamp(text).or_else(|| DateTime::parse_from_rfc3339(text).ok().map(|at| at.with_timezone(&Utc)))
}

/// The one form the writer stamps (`2026-11-22T05:37:00.123Z`, see [`format_timestamp`]), read
/// without a general RFC 3339 parser: a histogram reads one per run.
fn parse_written_timestamp(text: &str) -> Option<DateTime<Utc>> {
    let bytes = text.as_bytes();
    let separators_at = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':'), (19, b'.'), (23, b'Z')];
    if bytes.len() != 24 || separators_at.iter().any(|&(at, separator)| bytes[at] != separator) {
        return None;
    }
    let number = |from: usize, to: usize| {
        bytes[from..to].iter().try_fold(0u32, |value, &b| b.is_ascii_digit().then(|| value * 10 + u32::from(b - b'0')))
    };
    let (second, millis) = (number(17, 19)?, number(20, 23)?);
    if second > 59 {
        return None; // a leap second: the general parser knows what to do with it
    }
    let date = NaiveDate::from_ymd_opt(i32::try_from(number(0, 4)?).ok()?, number(5, 7)?, number(8, 10)?)?;
    Some(date.and_hms_milli_opt(number(11, 13)?, number(14, 16)?, second, millis)?.and_utc())
}

fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Where the chain stands: the next record gets `seq + 1` and `prev = hash`.
#[derive(Debug, PartialEq, Eq)]
struct ChainHead {
    seq: u64,
    hash: String,
    /// Timestamps never go backwards along the chain, so daily files stay in chain order even if
    /// the wall clock steps back (NTP, a VM resumed): a record is stamped no earlier than this.
    last_timestamp: Option<DateTime<Utc>>,
}

impl Clone for ChainHead {
    fn clone(&self) -> ChainHead {
        ChainHead { seq: self.seq, hash: self.hash.clone(), last_timestamp: self.last_timestamp }
    }

    /// Into this head's own string: the writer saves its head before every batch.
    fn clone_from(&mut self, source: &ChainHead) {
        self.seq = source.seq;
        self.hash.clone_from(&source.hash);
        self.last_timestamp = source.last_timestamp;
    }
}

impl ChainHead {
    fn genesis() -> ChainHead {
        ChainHead { seq: 0, hash: GENESIS_PREV.to_string(), last_timestamp: None }
    }

    fn after(record: &AuditRecord) -> ChainHead {
        ChainHead { seq: record.seq, hash: record.hash.clone(), last_timestamp: parse_timestamp(&record.timestamp) }
    }

    /// The next record's timestamp: now, never before the last record's.
    fn next_timestamp(&self, clock: &dyn Clock) -> DateTime<Utc> {
        let now = truncate_to_millis(clock.now());
        self.last_timestamp.map_or(now, |last| now.max(last))
    }

    /// Seals `record` as the next record of the chain, stamped `at`, and advances: its line is
    /// appended to `out` (serialized once, straight into the writer's batch), its chain fields
    /// returned when `fields` (an append that returns the whole record).
    fn seal_next(&mut self, record: &PreparedRecord, at: DateTime<Utc>, out: &mut Vec<u8>, fields: bool) -> Sealed {
        let stamp = Stamp::new(at);
        let seq = self.seq + 1;
        let hash = record.seal(seq, &self.hash, stamp.as_str(), out);
        let fields = fields.then(|| ChainFields {
            prev: self.hash.clone(),
            hash: hash.to_string(),
            timestamp: stamp.as_str().to_string(),
        });
        // The head's hash rewritten in place: no string of its own per record.
        self.hash.clear();
        self.hash.push_str(std::str::from_utf8(&hash.text()).expect("ASCII"));
        self.seq = seq;
        self.last_timestamp = Some(at);
        Sealed { seq, fields }
    }

    /// `event` sealed whole as the next record: the record and its line.
    #[cfg(test)]
    fn seal_event(&mut self, mut event: AuditEvent, clock: &dyn Clock) -> (AuditRecord, String) {
        let prepared = event.prepare();
        let mut line = Vec::with_capacity(1024);
        let sealed = self.seal_next(&prepared, self.next_timestamp(clock), &mut line, true);
        (event.into_record(sealed), String::from_utf8(line).expect("records are written as UTF-8"))
    }
}

/// A record's timestamp as [`format_timestamp`] writes it, on the stack (the writer stamps every
/// record): a year outside 0–9999 or a leap second takes chrono's own formatting.
enum Stamp {
    Written([u8; 24]),
    Formatted(String),
}

impl Stamp {
    fn new(at: DateTime<Utc>) -> Stamp {
        use chrono::{Datelike, Timelike};
        let millis = at.timestamp_subsec_millis();
        let year = u32::try_from(at.year()).ok().filter(|&year| year <= 9999 && millis < 1000);
        let Some(year) = year else { return Stamp::Formatted(format_timestamp(at)) };
        // Digit by digit, not seven padded integers through `fmt`: the writer's thread stamps
        // every record (BENCHMARKS.md, issue 49).
        let mut text = *b"0000-00-00T00:00:00.000Z";
        let (date, time) = (at.date_naive(), at.time());
        let fields = [
            (0..4, year),
            (5..7, date.month()),
            (8..10, date.day()),
            (11..13, time.hour()),
            (14..16, time.minute()),
            (17..19, time.second()),
            (20..23, millis),
        ];
        for (slot, mut value) in fields {
            for digit in text[slot].iter_mut().rev() {
                *digit = b'0' + (value % 10) as u8;
                value /= 10;
            }
        }
        Stamp::Written(text)
    }

    fn as_str(&self) -> &str {
        match self {
            Stamp::Written(text) => std::str::from_utf8(text).expect("ASCII"),
            Stamp::Formatted(text) => text,
        }
    }
}

/// An append handed to the writer ([`AuditLog::submit`]): resolves once the record is durable,
/// or with the error that kept it from being so.
#[must_use = "a record is acknowledged only once its append is awaited"]
pub enum Appending {
    Answered(Option<Result<Sealed, AuditError>>),
    Waiting(tokio::sync::oneshot::Receiver<Result<Sealed, AuditError>>),
}

impl std::future::Future for Appending {
    type Output = Result<Sealed, AuditError>;

    fn poll(mut self: std::pin::Pin<&mut Self>, context: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match &mut *self {
            Appending::Answered(answer) => std::task::Poll::Ready(answer.take().expect("an append is awaited once")),
            Appending::Waiting(acknowledged) => std::pin::Pin::new(acknowledged)
                .poll(context)
                .map(|answer| answer.map_err(|_| AuditError::WriterStopped).and_then(|answer| answer)),
        }
    }
}

/// The timestamp is written with millisecond precision; comparing at that precision keeps the
/// monotonic clamp consistent with what a restart reads back.
fn truncate_to_millis(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

/// Counters for tests and `/v1/status`.
#[derive(Debug, Default)]
struct Stats {
    fsyncs: AtomicU64,
    batches: AtomicU64,
    /// Time the writer spent in `fdatasync`, in nanoseconds.
    sync_nanos: AtomicU64,
    /// The disk could not give the daily file its headroom (`writer::HEADROOM`) at the last try.
    low_on_space: std::sync::atomic::AtomicBool,
}

/// The audit log. Not `Clone`: share it behind an `Arc`; dropping it stops the writer.
pub struct AuditLog {
    backend: Backend,
    stats: Arc<Stats>,
    /// The seq of the newest durable record (0 for an empty log), for [`AuditLog::subscribe`].
    durable_seq: Arc<watch::Sender<u64>>,
}

enum Backend {
    Memory { clock: Arc<dyn Clock>, state: Mutex<MemoryLog> },
    Disk(DiskLog),
}

struct MemoryLog {
    head: ChainHead,
    records: Vec<AuditRecord>,
}

struct DiskLog {
    /// `<parent>/audit`.
    audit_dir: PathBuf,
    /// The writer's clock, also the "now" that ends a histogram.
    clock: Arc<dyn Clock>,
    commands: Option<mpsc::Sender<Command>>,
    writer: Option<JoinHandle<()>>,
    _lock: Flock<File>,
    /// What the last verification proved ([`verify`]).
    verified: Mutex<Option<verify::VerifiedPrefix>>,
    /// How far the last verification of the checkpoints got, over lines it proved.
    checkpoints_verified: Mutex<Option<tree::CheckpointProgress>>,
}

impl AuditLog {
    pub fn open(config: AuditConfig) -> anyhow::Result<AuditLog> {
        AuditLog::open_with_clock(config, Arc::new(SystemClock))
    }

    pub fn open_with_clock(config: AuditConfig, clock: Arc<dyn Clock>) -> anyhow::Result<AuditLog> {
        AuditLog::open_with_journal(config, clock, journal::JOURNAL_BYTES)
    }

    /// [`AuditLog::open_with_clock`] with a journal of `journal_bytes` (tests make it wrap).
    fn open_with_journal(config: AuditConfig, clock: Arc<dyn Clock>, journal_bytes: u64) -> anyhow::Result<AuditLog> {
        let stats = Arc::new(Stats::default());
        let Some(parent) = config.dir else {
            let state = Mutex::new(MemoryLog { head: ChainHead::genesis(), records: Vec::new() });
            let durable_seq = Arc::new(watch::Sender::new(0));
            return Ok(AuditLog { backend: Backend::Memory { clock, state }, stats, durable_seq });
        };
        let audit_dir = parent.join("audit");
        create_private_dir(&audit_dir).with_context(|| format!("creating {}", audit_dir.display()))?;
        let lock_path = audit_dir.join(".writer.lock");
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
            anyhow::anyhow!(
                "the audit log in {} is already open for writing by another process ({errno})\nhint: only one \
                 daemon may write an audit directory; stop the other one or point AILERON_AUDIT_DIR elsewhere",
                audit_dir.display()
            )
        })?;
        // What a crash of the machine left: a torn tail set aside, then the acknowledged records
        // the journal holds appended, then the head checked against its anchor. Only then is
        // everything synced and the journal written over.
        let last = recovery::recover_tail(&audit_dir)?;
        let last = journal::replay(&audit_dir, last)?;
        let head = recovery::checked_head(&audit_dir, last)?;
        if let state @ (HeadAnchor::Missing | HeadAnchor::Unreadable) =
            recovery::read_anchor(&audit_dir).state(head.seq)
        {
            // Verified anyway (see `verify`), but the user should know the end went unchecked.
            let state = state.as_str();
            log_line!(
                "aileron: warning: the audit chain head anchor {} was {state} although the log holds {} records: \
                 records removed from the end of the log before this start cannot be detected; anchored again at \
                 record {}",
                audit_dir.join(HEAD_FILE).display(),
                head.seq,
                head.seq
            );
        }
        journal::sync_newest_files(&audit_dir)?;
        let journal = Journal::open(&audit_dir, journal_bytes)?;
        let head_path = audit_dir.join(HEAD_FILE);
        let head_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&head_path)
            .with_context(|| format!("opening {}", head_path.display()))?;
        let durable_seq = Arc::new(watch::Sender::new(head.seq));
        let (commands, receiver) = mpsc::channel();
        // The Merkle tree and its checkpoints (SPEC §17): never in the way of the log itself.
        let tree = tree::TreeState::open(&audit_dir, head.seq, config.witness.as_deref())
            .inspect_err(|error| {
                log_line!("aileron: warning: the audit log's Merkle tree is unavailable ({error:#}); no checkpoints are issued")
            })
            .ok();
        let mut writer =
            Writer::new(audit_dir.clone(), clock.clone(), head, head_file, stats.clone(), durable_seq.clone(), journal)
                .with_tree(tree);
        writer.anchor_at_start();
        let handle = std::thread::Builder::new()
            .name("aileron-audit-writer".into())
            .spawn(move || writer.run(receiver))
            .context("starting the audit writer thread")?;
        let disk = DiskLog {
            audit_dir,
            clock,
            commands: Some(commands),
            writer: Some(handle),
            _lock: lock,
            verified: Mutex::new(None),
            checkpoints_verified: Mutex::new(None),
        };
        Ok(AuditLog { backend: Backend::Disk(disk), stats, durable_seq })
    }

    /// The disk holding the log is (nearly) full: the writer could not keep its headroom
    /// allocated past the daily file's end. Records still fit in what is left, for a while; risky
    /// work is refused before it starts (SPEC §10). Cleared by the first batch that gets the room.
    pub fn low_on_space(&self) -> bool {
        self.stats.low_on_space.load(Ordering::Relaxed)
    }

    /// [`AuditLog::low_on_space`], asked again of the disk when it was low (the writer tries to
    /// take its headroom once more): false when the log has room for a run's record.
    pub async fn has_room(&self) -> bool {
        if self.low_on_space() {
            self.flush().await;
        }
        !self.low_on_space()
    }

    /// True when records survive a restart (on disk), false for the in-memory log.
    pub fn is_durable(&self) -> bool {
        matches!(self.backend, Backend::Disk(_))
    }

    /// The `audit/` directory of a durable log.
    pub fn audit_dir(&self) -> Option<&Path> {
        match &self.backend {
            Backend::Disk(disk) => Some(&disk.audit_dir),
            Backend::Memory { .. } => None,
        }
    }

    /// Appends one record; returns after it is durable (fdatasync'ed). On `Err` nothing was
    /// acknowledged and the caller must fail closed; later appends try again.
    pub async fn append(&self, mut event: AuditEvent) -> Result<AuditRecord, AuditError> {
        let prepared = event.prepare();
        let sealed = self.send(prepared, true).await?;
        Ok(event.into_record(sealed))
    }

    /// Hands `record` (written ahead by the caller: [`PreparedRecord`]) to the writer now and
    /// returns what waits for it to be durable, so the caller can do work that need not come
    /// before the record (release a finished guest's instance) while the writer syncs. Awaited,
    /// the record's seq, or the error [`AuditLog::append`] would give; the record may become
    /// durable even if the answer is never awaited.
    pub fn submit(&self, record: PreparedRecord) -> Appending {
        self.send(record, false)
    }

    fn send(&self, record: PreparedRecord, fields: bool) -> Appending {
        match &self.backend {
            Backend::Memory { clock, state } => {
                let mut state = state.lock().expect("audit memory log poisoned");
                let mut line = Vec::with_capacity(1024);
                let at = state.head.next_timestamp(clock.as_ref());
                let sealed = state.head.seal_next(&record, at, &mut line, fields);
                state.records.push(serde_json::from_slice(&line).expect("a sealed line reads back as its record"));
                // Under the lock, so concurrent appends publish their seqs in order.
                self.durable_seq.send_replace(sealed.seq);
                Appending::Answered(Some(Ok(sealed)))
            }
            Backend::Disk(disk) => {
                let (reply, acknowledged) = tokio::sync::oneshot::channel();
                let sent = disk
                    .commands
                    .as_ref()
                    .is_some_and(|commands| commands.send(Command::Append { record, fields, reply }).is_ok());
                if sent {
                    Appending::Waiting(acknowledged)
                } else {
                    Appending::Answered(Some(Err(AuditError::WriterStopped)))
                }
            }
        }
    }

    /// Waits until everything appended before this call has been processed (used at shutdown).
    pub async fn flush(&self) {
        if let Backend::Disk(disk) = &self.backend {
            let (reply, done) = tokio::sync::oneshot::channel();
            if let Some(commands) = &disk.commands
                && commands.send(Command::Flush(reply)).is_ok()
            {
                let _ = done.await;
            }
        }
    }

    /// The seq of the newest durable record, updated after every durable batch (after its
    /// fsync) or in-memory append: a reader waits on `changed()` and queries again. It starts
    /// at the current head (0 for an empty log).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.durable_seq.subscribe()
    }

    /// Records matching `filter`, newest first. Reads files newest to oldest, each backwards, and
    /// stops at `limit`. Blocking file IO: async callers should run it on a blocking thread.
    pub fn query(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
        match &self.backend {
            Backend::Memory { state, .. } => {
                let state = state.lock().expect("audit memory log poisoned");
                query::query_records(&state.records, filter)
            }
            Backend::Disk(disk) => query::query_dir(&disk.audit_dir, filter),
        }
    }

    /// The newest record with this `audit_id`.
    pub fn get(&self, audit_id: &str) -> Result<Option<AuditRecord>, AuditError> {
        let filter = AuditFilter { audit_id: Some(audit_id.to_string()), limit: Some(1), ..AuditFilter::default() };
        Ok(self.query(&filter)?.into_iter().next())
    }

    /// Runs (`action.executed` and `execution.failed` records) and failures (`execution.failed`)
    /// per `bucket` over `[since, now)`, oldest bucket first, every bucket present. The other
    /// fields of `filter` narrow which runs count (its `limit` is ignored). Blocking file IO.
    pub fn run_histogram(
        &self,
        since: DateTime<Utc>,
        bucket: chrono::Duration,
        filter: &AuditFilter,
    ) -> Result<Vec<Bucket>, AuditError> {
        match &self.backend {
            Backend::Memory { clock, state } => {
                let now = clock.now();
                let state = state.lock().expect("audit memory log poisoned");
                histogram::run_histogram_of_records(&state.records, since, now, bucket, filter)
            }
            Backend::Disk(disk) => {
                histogram::run_histogram_of_dir(&disk.audit_dir, since, disk.clock.now(), bucket, filter)
            }
        }
    }

    /// Verifies this log's whole chain.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        match &self.backend {
            Backend::Memory { state, .. } => {
                let lines: Vec<String> = {
                    let state = state.lock().expect("audit memory log poisoned");
                    state.records.iter().map(|r| format!("{}\n", r.to_line())).collect()
                };
                let text = lines.concat();
                Ok(aileron_core::audit::verify_chain(log_lines("memory", &text, true))?)
            }
            // Resumes after what the last verification proved, if those bytes are unchanged.
            Backend::Disk(disk) => Ok(verify::verify_dir(&disk.audit_dir, Some(&disk.verified))?.report),
        }
    }

    /// Verifies this log's whole chain and then its stored checkpoints against it, cosigned by
    /// `witness` when given; both resume after what the last verification proved, for the lines
    /// whose bytes it finds unchanged. The checkpoints' report is `None` for a log in memory.
    pub fn verify_with_checkpoints(
        &self,
        witness: Option<&CosignatureVerifier>,
    ) -> Result<(VerifyReport, Option<tree::CheckpointReport>), VerifyError> {
        let Backend::Disk(disk) = &self.backend else { return Ok((self.verify()?, None)) };
        let verified = verify::verify_dir(&disk.audit_dir, Some(&disk.verified))?;
        let failed = |problem: String| VerifyError::Checkpoints { problem };
        let stored = tree::checkpoints(&disk.audit_dir).map_err(|e| failed(format!("{e:#}")))?;
        if stored.is_empty() {
            return Ok((verified.report, Some(tree::CheckpointReport { verified: 0, newest: 0 })));
        }
        let signer = tree::log_signer(&disk.audit_dir).map_err(|e| failed(format!("{e:#}")))?;
        let earlier = disk.checkpoints_verified.lock().unwrap_or_else(PoisonError::into_inner).take();
        let resume = tree::Resume { earlier, unchanged: verified.unchanged, remember_at: verified.proved };
        let (report, progress) =
            tree::verify_resuming(&disk.audit_dir, &stored, &signer.verifier(), witness, resume).map_err(failed)?;
        *disk.checkpoints_verified.lock().unwrap_or_else(PoisonError::into_inner) = progress;
        Ok((verified.report, Some(report)))
    }

    /// How many times the writer synced a log file (fewer than appends under load: group commit).
    pub fn fsync_count(&self) -> u64 {
        self.stats.fsyncs.load(Ordering::Relaxed)
    }

    /// How many batches the writer committed.
    pub fn batch_count(&self) -> u64 {
        self.stats.batches.load(Ordering::Relaxed)
    }

    /// The writer's time in `fdatasync` since the log was opened ([`AuditLog::fsync_count`] syncs).
    pub fn sync_time(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.stats.sync_nanos.load(Ordering::Relaxed))
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        if let Backend::Disk(disk) = &mut self.backend {
            // Closing the channel ends the writer after it has drained what is queued.
            drop(disk.commands.take());
            if let Some(writer) = disk.writer.take() {
                let _ = writer.join();
            }
        }
    }
}

/// Verifies the log under `parent/audit/`, all files in date order.
pub fn verify(parent: &Path) -> Result<VerifyReport, VerifyError> {
    Ok(verify::verify_dir(&parent.join("audit"), None)?.report)
}

/// Queries the log under `parent/audit/` without opening it for writing (e.g. from the CLI).
pub fn query(parent: &Path, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    query::query_dir(&parent.join("audit"), filter)
}

/// The newest record with this id under `audit_dir` and its line as the log holds it (what a
/// receipt proves); reads the files newest first, without opening the log for writing.
pub fn record_line(audit_dir: &Path, audit_id: &str) -> Result<Option<(AuditRecord, Vec<u8>)>, AuditError> {
    query::record_line(audit_dir, audit_id)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    use aileron_core::audit::{ActorType, BreakReason};

    use super::*;

    /// A clock tests move by hand.
    pub(super) struct TestClock(Mutex<DateTime<Utc>>);

    impl TestClock {
        pub(super) fn at(rfc3339: &str) -> Arc<TestClock> {
            Arc::new(TestClock(Mutex::new(parse_timestamp(rfc3339).unwrap())))
        }
        pub(super) fn set(&self, rfc3339: &str) {
            *self.0.lock().unwrap() = parse_timestamp(rfc3339).unwrap();
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }

    pub(super) fn event(event_type: EventType, payload: &[(&str, &str)]) -> AuditEvent {
        AuditEvent {
            event_type,
            actor: Actor::new(ActorType::Service, "test"),
            session_id: None,
            payload: payload.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect(),
            audit_id: None,
        }
    }

    /// `event` written ahead, as a run's record is ([`AuditLog::submit`]).
    pub(super) fn prepared(mut event: AuditEvent) -> PreparedRecord {
        event.prepare()
    }

    pub(super) fn open_disk(parent: &Path, clock: &Arc<TestClock>) -> AuditLog {
        AuditLog::open_with_clock(AuditConfig { dir: Some(parent.to_path_buf()), witness: None }, clock.clone())
            .unwrap()
    }

    pub(super) fn file_names(audit_dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(audit_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[tokio::test]
    async fn files_and_directory_are_private() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        log.append(event(EventType::VaultUnlocked, &[])).await.unwrap();
        let mode = |p: PathBuf| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(temp.path().join("audit")), 0o700);
        assert_eq!(mode(temp.path().join("audit/audit-2026-11-22.jsonl")), 0o600);
    }

    /// `submit` hands the record over when it is called, not when its answer is first awaited:
    /// the runner releases a guest's instance in between. Awaited, it answers as `append` does,
    /// and a log whose writer has stopped answers `WriterStopped` rather than hanging.
    #[tokio::test]
    async fn submit_hands_the_record_to_the_writer_before_it_is_awaited() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let mut log = open_disk(temp.path(), &clock);
        let appending = log.submit(prepared(event(EventType::ActionExecuted, &[("n", "1")])));
        log.flush().await;
        let text = fs::read_to_string(temp.path().join("audit/audit-2026-11-22.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert_eq!(appending.await.unwrap().seq(), 1);
        let record: AuditRecord = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!((record.seq, record.payload["n"].as_str()), (1, Some("1")));
        if let Backend::Disk(disk) = &mut log.backend {
            drop(disk.commands.take());
        }
        let stopped = log.submit(prepared(event(EventType::ActionExecuted, &[]))).await;
        assert!(matches!(stopped, Err(AuditError::WriterStopped)), "{stopped:?}");
    }

    /// The timestamp the writer writes from the stack is chrono's RFC 3339 with milliseconds.
    #[test]
    fn stamps_are_rfc_3339_with_milliseconds() {
        for at in ["2026-11-22T10:00:00.000Z", "2026-01-02T03:04:05.067Z", "0999-12-31T23:59:59.999Z"] {
            let at = parse_timestamp(at).unwrap();
            assert_eq!(Stamp::new(at).as_str(), format_timestamp(at));
            assert!(matches!(Stamp::new(at), Stamp::Written(_)));
        }
        let far = DateTime::from_timestamp_millis(400_000_000_000_000).unwrap();
        assert_eq!(Stamp::new(far).as_str(), format_timestamp(far));
        // Every field's digits across ten thousand years, with a step that is no whole day.
        let mut millis = parse_timestamp("0000-01-01T00:00:00.000Z").unwrap().timestamp_millis();
        for _ in 0..20_000 {
            let at = DateTime::from_timestamp_millis(millis).unwrap();
            assert_eq!(Stamp::new(at).as_str(), format_timestamp(at));
            millis += 15_778_463_017;
        }
        for before_year_zero in [-62_167_219_200_001, -62_200_000_000_000] {
            let at = DateTime::from_timestamp_millis(before_year_zero).unwrap();
            assert_eq!(Stamp::new(at).as_str(), format_timestamp(at));
        }
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31).unwrap().and_hms_milli_opt(23, 59, 59, 1_500).unwrap();
        let leap = DateTime::<Utc>::from_naive_utc_and_offset(leap, Utc);
        assert!(matches!(Stamp::new(leap), Stamp::Formatted(_)), "a leap second takes chrono's formatting");
        assert_eq!(Stamp::new(leap).as_str(), format_timestamp(leap));
    }

    #[tokio::test]
    async fn a_second_writer_on_the_same_directory_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let _first = open_disk(temp.path(), &clock);
        let error =
            AuditLog::open_with_clock(AuditConfig { dir: Some(temp.path().into()), witness: None }, clock.clone())
                .err()
                .expect("second writer must be refused");
        assert!(error.to_string().contains("hint:"), "{error}");
    }

    #[tokio::test]
    async fn verify_reports_the_first_broken_link_by_file_and_line() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        for i in 0..3 {
            log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap();
        }
        clock.set("2026-11-23T10:00:00.000Z");
        for i in 3..6 {
            log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap();
        }
        drop(log);
        let path = temp.path().join("audit/audit-2026-11-23.jsonl");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replacen("\"n\":\"4\"", "\"n\":\"9\"", 1)).unwrap();
        let error = verify(temp.path()).unwrap_err();
        let VerifyError::Broken(brk) = error else { panic!("expected a chain break") };
        assert_eq!((brk.file.as_str(), brk.line, brk.reason), ("audit-2026-11-23.jsonl", 2, BreakReason::HashMismatch));

        // Deleting the first day's file breaks the first record of the next day.
        fs::write(&path, text).unwrap();
        fs::remove_file(temp.path().join("audit/audit-2026-11-22.jsonl")).unwrap();
        let VerifyError::Broken(brk) = verify(temp.path()).unwrap_err() else { panic!("expected a chain break") };
        assert_eq!((brk.line, brk.reason), (1, BreakReason::PrevDoesNotLink { previous: None }));
    }

    /// Found by the crash campaign: `verify` read the log, then the anchored head; a batch made
    /// durable and anchored in between looked like records removed from the end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn verify_while_records_are_appended_never_reports_a_truncation() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = Arc::new(open_disk(temp.path(), &clock));
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let appender = {
            let (log, done) = (log.clone(), done.clone());
            tokio::spawn(async move {
                for i in 0..400 {
                    log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap();
                }
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        let parent = temp.path().to_path_buf();
        let verifies = tokio::task::spawn_blocking(move || {
            let mut count = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                if let Err(error) = verify(&parent) {
                    return Err(format!("after {count} verifies: {error}"));
                }
                count += 1;
            }
            Ok(count)
        });
        appender.await.unwrap();
        let verifies = verifies.await.unwrap().unwrap();
        assert!(verifies > 10, "the verifier ran alongside the appends ({verifies})");
    }

    #[test]
    fn timestamps_read_fast_agree_with_rfc_3339() {
        for text in [
            "2026-11-22T05:37:00.123Z",
            "2024-02-29T23:59:59.999Z",
            "1970-01-01T00:00:00.000Z",
            "2026-11-22T05:37:00Z",
            "2026-11-22T05:37:00.123+02:00",
            "2016-12-31T23:59:60.000Z",
            "2026-02-30T00:00:00.000Z",
            "2026-11-22T24:00:00.000Z",
            "2026-11-22T05:37:00.12xZ",
            "2026-11-22 05:37:00.123Z",
        ] {
            let general = DateTime::parse_from_rfc3339(text).ok().map(|at| at.with_timezone(&Utc));
            assert_eq!(parse_timestamp(text), general, "{text}");
            if let Some(fast) = parse_written_timestamp(text) {
                assert_eq!(Some(fast), general, "{text}");
                assert_eq!(format_timestamp(fast), text, "{text}");
            }
        }
        assert!(parse_written_timestamp("2026-11-22T05:37:00.123Z").is_some());
    }

    #[tokio::test]
    async fn pre_minted_ids_and_sessions_are_kept() {
        let log = AuditLog::open(AuditConfig { dir: None, witness: None }).unwrap();
        let id = mint_audit_id();
        assert!(id.starts_with("audit-") && uuid::Uuid::parse_str(&id["audit-".len()..]).is_ok(), "{id}");
        let mut failed = event(EventType::ExecutionFailed, &[]);
        failed.audit_id = Some(id.clone());
        failed.session_id = Some("sess-1".into());
        let record = log.append(failed).await.unwrap();
        assert_eq!((record.audit_id.as_str(), record.session_id.as_deref()), (id.as_str(), Some("sess-1")));
        assert!(!log.is_durable());
        let at = parse_timestamp(&record.timestamp).unwrap();
        assert!(record.timestamp.ends_with('Z') && record.timestamp.len() == "2026-11-22T10:00:00.000Z".len());
        assert!(Utc::now() - at < chrono::Duration::seconds(60));
    }

    /// A subscriber starts at the durable head and sees every durable append's seq, on disk
    /// (after the batch's fsync) and in memory; a reopened log starts at its recovered head.
    #[tokio::test]
    async fn subscribers_see_the_seq_of_each_durable_append() {
        let temp = tempfile::tempdir().unwrap();
        for dir in [Some(temp.path().to_path_buf()), None] {
            let clock = TestClock::at("2026-11-22T10:00:00.000Z");
            let log =
                AuditLog::open_with_clock(AuditConfig { dir: dir.clone(), witness: None }, clock.clone()).unwrap();
            let mut changes = log.subscribe();
            assert_eq!(*changes.borrow_and_update(), 0, "{dir:?}");
            for expected in 1..=3 {
                let record = log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
                assert!(changes.has_changed().unwrap(), "{dir:?}: append {expected} is announced");
                assert_eq!((*changes.borrow_and_update(), record.seq), (expected, expected), "{dir:?}");
            }
            let waiting = tokio::spawn(async move {
                changes.changed().await.unwrap();
                *changes.borrow()
            });
            log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
            assert_eq!(waiting.await.unwrap(), 4, "{dir:?}: a waiting reader wakes");
        }
        let log = open_disk(temp.path(), &TestClock::at("2026-11-22T11:00:00.000Z"));
        assert_eq!(*log.subscribe().borrow(), 4, "a reopened log starts at its head");
    }

    /// The web console's budget with 100,000 records in one day file: the newest page of 50 and a
    /// filtered page within 100 ms, the day's run histogram within 50 ms. Timings only mean
    /// something in release: `cargo test --release -p aileron --lib audit_log::tests::timings --
    /// --ignored --nocapture`.
    #[test]
    #[ignore = "a timing run, meaningful only in release"]
    fn timings_with_100k_records_in_one_day() {
        use std::io::Write;
        use std::time::{Duration, Instant};

        use aileron_core::vocabulary::keys;

        let temp = tempfile::tempdir().unwrap();
        let audit_dir = temp.path().join("audit");
        fs::create_dir_all(&audit_dir).unwrap();
        let day = parse_timestamp("2026-11-22T00:00:00Z").unwrap();
        let mut head = ChainHead::genesis();
        let clock = TestClock::at("2026-11-22T00:00:00Z");
        let mut file = io::BufWriter::new(fs::File::create(audit_dir.join("audit-2026-11-22.jsonl")).unwrap());
        let mut last_run = String::new();
        for i in 0..100_000u32 {
            clock.set(&format_timestamp(day + chrono::Duration::milliseconds(i64::from(i) * 864)));
            let action = format!("action-{:03}", i % 100);
            let (event_type, payload): (EventType, Vec<(&str, Value)>) = match i % 20 {
                0 => (
                    EventType::ExecutionFailed,
                    vec![(keys::ACTION_NAME, action.clone().into()), (keys::FAILURE_CLASS, "network_error".into())],
                ),
                n if n % 2 == 0 => (
                    EventType::ActionExecuted,
                    vec![
                        (keys::ACTION_NAME, action.clone().into()),
                        (keys::ACTION_VERSION, "1.2.0".into()),
                        (keys::CONNECTOR_FQN, "github://acme/slack".into()),
                        (
                            keys::ACTION_STEPS,
                            serde_json::json!([{"id": "post", "op": "chat.postMessage", "capability": "network:slack.com", "duration_ms": 182}]),
                        ),
                        (keys::ACTION_ARG_NAMES, serde_json::json!(["channel", "text"])),
                    ],
                ),
                _ => (
                    EventType::ConnectorProxyProxied,
                    vec![
                        (keys::AUDIT_ID, last_run.clone().into()),
                        (keys::PROXY_UPSTREAM_HOST, "slack.com".into()),
                        (keys::PROXY_UPSTREAM_STATUS, 200.into()),
                        (keys::CONNECTOR_FQN, "github://acme/slack".into()),
                    ],
                ),
            };
            let event = AuditEvent {
                event_type,
                actor: Actor::new(ActorType::Agent, "claude-code"),
                session_id: Some(format!("sess-{}", i / 1000)),
                payload: payload.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                audit_id: None,
            };
            let (record, line) = head.seal_event(event, clock.as_ref());
            if event_type_is_run(&record.event_type) {
                last_run = record.audit_id.clone();
            }
            writeln!(file, "{line}").unwrap();
        }
        file.flush().unwrap();
        drop(file);
        let bytes = fs::metadata(audit_dir.join("audit-2026-11-22.jsonl")).unwrap().len();
        clock.set("2026-11-23T00:00:00Z");
        let log = &open_disk(temp.path(), &clock);

        let best_of = |runs: usize, f: &dyn Fn() -> usize| {
            let mut best = Duration::MAX;
            let mut found = 0;
            for _ in 0..runs {
                let started = Instant::now();
                found = f();
                best = best.min(started.elapsed());
            }
            (best, found)
        };
        let page = |filter: AuditFilter| move || log.query(&filter).unwrap().len();
        let newest = best_of(5, &page(AuditFilter { limit: Some(50), ..AuditFilter::default() }));
        let by_action = best_of(
            5,
            &page(AuditFilter { action: Some("action-042".into()), limit: Some(50), ..AuditFilter::default() }),
        );
        let deep = best_of(
            5,
            &page(AuditFilter { top_level: true, before_seq: Some(1_000), limit: Some(50), ..AuditFilter::default() }),
        );
        let nothing = best_of(
            5,
            &page(AuditFilter { action: Some("no-such-action".into()), limit: Some(50), ..AuditFilter::default() }),
        );
        let since = parse_timestamp("2026-11-22T00:00:00Z").unwrap();
        let histogram = |filter: AuditFilter| {
            move || {
                log.run_histogram(since, chrono::Duration::hours(1), &filter)
                    .unwrap()
                    .iter()
                    .map(|b| b.runs as usize)
                    .sum()
            }
        };
        let chart = best_of(5, &histogram(AuditFilter::default()));
        let chart_by_action =
            best_of(5, &histogram(AuditFilter { action: Some("action-042".into()), ..AuditFilter::default() }));
        log_line!("100,000 records, {:.1} MB in one day file:", bytes as f64 / 1e6);
        for (name, (took, found)) in [
            ("newest page of 50", newest),
            ("page of 50 by action (1% of records)", by_action),
            ("top-level page of 50 before seq 1000", deep),
            ("page by an action no record has (whole file)", nothing),
            ("run histogram, 24 h in 1 h buckets", chart),
            ("run histogram of one action", chart_by_action),
        ] {
            log_line!("  {name}: {:.1} ms ({found} records)", took.as_secs_f64() * 1e3);
        }
        assert_eq!(
            (newest.1, by_action.1, deep.1, nothing.1, chart.1, chart_by_action.1),
            (50, 50, 50, 0, 50_000, 1_000)
        );
    }

    fn event_type_is_run(event_type: &str) -> bool {
        event_type == EventType::ActionExecuted.as_str() || event_type == EventType::ExecutionFailed.as_str()
    }
}
