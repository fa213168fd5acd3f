//! The durable audit log (SPEC §10): a group-commit writer, a torn-tail tolerant reader, query
//! and verification over `<dir>/audit/audit-YYYY-MM-DD.jsonl`.
//!
//! Invariant: `append` returns `Ok` only after the record's line is written and fdatasync'ed.
//! Callers do risky work (or report an outcome) only after that, and fail closed on `Err`.
//!
//! Writing is done by one dedicated thread fed by a channel. It drains everything queued, seals
//! the records in order (seq, prev), writes them with one `write` per file, syncs once and only
//! then acknowledges each waiter: under load many appends share one fsync. The file is chosen by
//! the record's UTC date; the chain continues across files. A crash can only leave a torn tail
//! (bytes after the last newline, never acknowledged): `open` moves it aside to a `.torn-<ms>`
//! file next to the log and truncates it, so the next record links to the last complete one.
//! That is also what makes a `kill -9` test possible: after any kill, reopening yields a log that
//! verifies, and every acknowledged record is in it.
//!
//! One process writes a log directory at a time (an exclusive flock on `audit/.writer.lock`):
//! two writers would fork the chain.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use aileron_core::audit::{
    Actor, AuditRecord, ChainBreak, ChainVerifier, GENESIS_PREV, UnsealedRecord, VerifyReport, log_lines, seal,
};
use aileron_core::vocabulary::{EventType, keys};
use anyhow::Context;
use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

use crate::home::{create_private_dir, sync_dir};

/// Where the log lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    /// The parent of `audit/`; `None` keeps the log in memory (`AILERON_AUDIT_DIR` explicitly empty).
    pub dir: Option<PathBuf>,
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

/// `audit-<uuid v4>`.
pub fn mint_audit_id() -> String {
    format!("audit-{}", uuid::Uuid::new_v4())
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
    #[error("invalid `since` value `{0}`: expected an RFC 3339 timestamp or a YYYY-MM-DD date")]
    InvalidSince(String),
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Broken(#[from] ChainBreak),
    #[error("reading {path}: {source}")]
    Read { path: String, source: io::Error },
    #[error("the log was cut short: {problem}")]
    Truncated { problem: String },
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
        }
    }
}

/// Filter for [`AuditLog::query`]; every set field must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// RFC 3339 timestamp or `YYYY-MM-DD` (midnight UTC): records at or after it.
    pub since: Option<String>,
    pub audit_id: Option<String>,
    /// Payload key `aileron.connector.fqn`.
    pub connector_fqn: Option<String>,
    /// Payload key `aileron.failure.class`.
    pub class: Option<String>,
    /// An [`EventType`]'s string, compared with the record's as text: records keep their event
    /// type as written, and a string that names no event type simply matches nothing.
    pub event_type: Option<String>,
    /// At most this many records (newest first); `None` = all.
    pub limit: Option<usize>,
}

/// A parsed [`AuditFilter`].
struct Matcher<'a> {
    filter: &'a AuditFilter,
    since: Option<DateTime<Utc>>,
}

impl<'a> Matcher<'a> {
    fn new(filter: &'a AuditFilter) -> Result<Matcher<'a>, AuditError> {
        let since = filter.since.as_deref().map(parse_since).transpose()?;
        Ok(Matcher { filter, since })
    }

    fn matches(&self, record: &AuditRecord) -> bool {
        let f = self.filter;
        let eq = |want: &Option<String>, have: Option<&str>| want.as_deref().is_none_or(|want| have == Some(want));
        eq(&f.audit_id, Some(&record.audit_id))
            && eq(&f.event_type, Some(&record.event_type))
            && eq(&f.connector_fqn, record.payload_str(keys::CONNECTOR_FQN))
            && eq(&f.class, record.payload_str(keys::FAILURE_CLASS))
            && self.since.is_none_or(|since| parse_timestamp(&record.timestamp).is_some_and(|at| at >= since))
    }

    /// Whether a file dated `date` can hold matching records at all.
    fn may_match_file(&self, date: NaiveDate) -> bool {
        self.since.is_none_or(|since| date >= since.date_naive())
    }

    fn is_full(&self, found: usize) -> bool {
        self.filter.limit.is_some_and(|limit| found >= limit)
    }
}

fn parse_since(since: &str) -> Result<DateTime<Utc>, AuditError> {
    if let Some(at) = parse_timestamp(since) {
        return Ok(at);
    }
    NaiveDate::parse_from_str(since, "%Y-%m-%d")
        .map(|date| date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc())
        .map_err(|_| AuditError::InvalidSince(since.to_string()))
}

fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).ok().map(|at| at.with_timezone(&Utc))
}

fn format_timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Where the chain stands: the next record gets `seq + 1` and `prev = hash`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ChainHead {
    seq: u64,
    hash: String,
    /// Timestamps never go backwards along the chain, so daily files stay in chain order even if
    /// the wall clock steps back (NTP, a VM resumed): a record is stamped no earlier than this.
    last_timestamp: Option<DateTime<Utc>>,
}

impl ChainHead {
    fn genesis() -> ChainHead {
        ChainHead { seq: 0, hash: GENESIS_PREV.to_string(), last_timestamp: None }
    }

    fn after(record: &AuditRecord) -> ChainHead {
        ChainHead { seq: record.seq, hash: record.hash.clone(), last_timestamp: parse_timestamp(&record.timestamp) }
    }

    /// Seals `event` as the next record and advances.
    fn seal_next(&mut self, event: AuditEvent, clock: &dyn Clock) -> AuditRecord {
        let now = truncate_to_millis(clock.now());
        let at = self.last_timestamp.map_or(now, |last| now.max(last));
        let unsealed = UnsealedRecord {
            audit_id: event.audit_id.unwrap_or_else(mint_audit_id),
            event_type: event.event_type.as_str().to_string(),
            timestamp: format_timestamp(at),
            actor: event.actor,
            session_id: event.session_id,
            payload: event.payload,
        };
        let record = seal(unsealed, self.seq + 1, self.hash.clone());
        self.seq = record.seq;
        self.hash = record.hash.clone();
        self.last_timestamp = Some(at);
        record
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
}

/// The audit log. Not `Clone`: share it behind an `Arc`; dropping it stops the writer.
pub struct AuditLog {
    backend: Backend,
    stats: Arc<Stats>,
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
    commands: Option<mpsc::Sender<Command>>,
    writer: Option<JoinHandle<()>>,
    _lock: Flock<File>,
}

enum Command {
    Append(AuditEvent, tokio::sync::oneshot::Sender<Result<AuditRecord, AuditError>>),
    /// Acknowledged once everything queued before it has been processed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl AuditLog {
    pub fn open(config: AuditConfig) -> anyhow::Result<AuditLog> {
        AuditLog::open_with_clock(config, Arc::new(SystemClock))
    }

    pub fn open_with_clock(config: AuditConfig, clock: Arc<dyn Clock>) -> anyhow::Result<AuditLog> {
        let stats = Arc::new(Stats::default());
        let Some(parent) = config.dir else {
            let state = Mutex::new(MemoryLog { head: ChainHead::genesis(), records: Vec::new() });
            return Ok(AuditLog { backend: Backend::Memory { clock, state }, stats });
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
        let head = recover(&audit_dir)?;
        let head_path = audit_dir.join(HEAD_FILE);
        let head_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&head_path)
            .with_context(|| format!("opening {}", head_path.display()))?;
        let (commands, receiver) = mpsc::channel();
        let mut writer = Writer {
            audit_dir: audit_dir.clone(),
            clock,
            head,
            file: None,
            head_file,
            needs_recovery: false,
            stats: stats.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("aileron-audit-writer".into())
            .spawn(move || writer.run(receiver))
            .context("starting the audit writer thread")?;
        Ok(AuditLog {
            backend: Backend::Disk(DiskLog { audit_dir, commands: Some(commands), writer: Some(handle), _lock: lock }),
            stats,
        })
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
    pub async fn append(&self, event: AuditEvent) -> Result<AuditRecord, AuditError> {
        match &self.backend {
            Backend::Memory { clock, state } => {
                let mut state = state.lock().expect("audit memory log poisoned");
                let record = state.head.seal_next(event, clock.as_ref());
                state.records.push(record.clone());
                Ok(record)
            }
            Backend::Disk(disk) => {
                let (reply, acknowledged) = tokio::sync::oneshot::channel();
                let commands = disk.commands.as_ref().ok_or(AuditError::WriterStopped)?;
                commands.send(Command::Append(event, reply)).map_err(|_| AuditError::WriterStopped)?;
                acknowledged.await.map_err(|_| AuditError::WriterStopped)?
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

    /// Records matching `filter`, newest first. Reads files newest to oldest and stops at `limit`.
    /// Blocking file IO: async callers with large logs should run it on a blocking thread.
    pub fn query(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
        match &self.backend {
            Backend::Memory { state, .. } => {
                let matcher = Matcher::new(filter)?;
                let state = state.lock().expect("audit memory log poisoned");
                let mut found = Vec::new();
                for record in state.records.iter().rev() {
                    if matcher.is_full(found.len()) {
                        break;
                    }
                    if matcher.matches(record) {
                        found.push(record.clone());
                    }
                }
                Ok(found)
            }
            Backend::Disk(disk) => query_dir(&disk.audit_dir, filter),
        }
    }

    /// The newest record with this `audit_id`.
    pub fn get(&self, audit_id: &str) -> Result<Option<AuditRecord>, AuditError> {
        let filter = AuditFilter { audit_id: Some(audit_id.to_string()), limit: Some(1), ..AuditFilter::default() };
        Ok(self.query(&filter)?.into_iter().next())
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
            Backend::Disk(disk) => verify_audit_dir(&disk.audit_dir),
        }
    }

    /// How many times the writer synced a log file (fewer than appends under load: group commit).
    pub fn fsync_count(&self) -> u64 {
        self.stats.fsyncs.load(Ordering::Relaxed)
    }

    /// How many batches the writer committed.
    pub fn batch_count(&self) -> u64 {
        self.stats.batches.load(Ordering::Relaxed)
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
    verify_audit_dir(&parent.join("audit"))
}

/// Queries the log under `parent/audit/` without opening it for writing (e.g. from the CLI).
pub fn query(parent: &Path, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    query_dir(&parent.join("audit"), filter)
}

fn verify_audit_dir(audit_dir: &Path) -> Result<VerifyReport, VerifyError> {
    let read_error = |path: &Path, source| VerifyError::Read { path: path.display().to_string(), source };
    let files = log_files(audit_dir).map_err(|e| read_error(audit_dir, e))?;
    let mut verifier = ChainVerifier::new();
    for (index, (_, path)) in files.iter().enumerate() {
        let text = read_text(path).map_err(|e| read_error(path, e))?;
        for line in log_lines(&file_name(path), &text, index + 1 == files.len()) {
            verifier.push(line)?;
        }
    }
    let report = verifier.finish();
    check_anchored_head(audit_dir, report.last_seq, &report.last_hash)
        .map_err(|problem| VerifyError::Truncated { problem })?;
    Ok(report)
}

fn query_dir(audit_dir: &Path, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    let matcher = Matcher::new(filter)?;
    let read_error =
        |path: &Path, e: io::Error| AuditError::Read { path: path.display().to_string(), message: e.to_string() };
    let files = match log_files(audit_dir) {
        Ok(files) => files,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(read_error(audit_dir, e)),
    };
    let mut found = Vec::new();
    for (date, path) in files.iter().rev() {
        if matcher.is_full(found.len()) || !matcher.may_match_file(*date) {
            break;
        }
        let text = read_text(path).map_err(|e| read_error(path, e))?;
        let name = file_name(path);
        let lines: Vec<_> = log_lines(&name, &text, true).collect();
        for line in lines.iter().rev() {
            if matcher.is_full(found.len()) {
                break;
            }
            // A line without its newline is being written right now (or was torn by a crash):
            // it is not acknowledged, so it is not part of the log yet. A damaged complete line
            // is skipped here; `verify` is the tool that reports it.
            if !line.has_trailing_newline {
                continue;
            }
            if let Ok(record) = serde_json::from_str::<AuditRecord>(line.text)
                && matcher.matches(&record)
            {
                found.push(record);
            }
        }
    }
    Ok(found)
}

/// `audit-YYYY-MM-DD.jsonl` files in date order. Other names (sidecars, the lock) are ignored.
fn log_files(audit_dir: &Path) -> io::Result<Vec<(NaiveDate, PathBuf)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(audit_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(date) = name.to_str().and_then(date_of_file_name) else { continue };
        files.push((date, entry.path()));
    }
    files.sort();
    Ok(files)
}

fn date_of_file_name(name: &str) -> Option<NaiveDate> {
    let date = name.strip_prefix("audit-")?.strip_suffix(".jsonl")?;
    if date.len() != 10 {
        return None;
    }
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}

fn log_file_name(date: NaiveDate) -> String {
    format!("audit-{}.jsonl", date.format("%Y-%m-%d"))
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Invalid UTF-8 can only come from damage; reading it lossily lets the verifier report the line.
fn read_text(path: &Path) -> io::Result<String> {
    let bytes = fs::read(path)?;
    Ok(String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// What to keep of a log file: the byte length up to the last newline, and the last record. Only
/// the bytes after the last newline are what a crash mid-write leaves (never acknowledged); a
/// complete line that does not parse was damaged after it was written.
#[derive(Debug, PartialEq)]
struct Tail {
    keep: usize,
    last: Option<AuditRecord>,
}

fn split_tail(bytes: &[u8]) -> Result<Tail, usize> {
    // Line ends (index of each '\n'), newest last.
    let ends: Vec<usize> = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').map(|(i, _)| i).collect();
    let Some(last_index) = ends.len().checked_sub(1) else {
        return Ok(Tail { keep: 0, last: None });
    };
    let start = if last_index == 0 { 0 } else { ends[last_index - 1] + 1 };
    match serde_json::from_slice::<AuditRecord>(&bytes[start..ends[last_index]]) {
        Ok(record) => Ok(Tail { keep: ends[last_index] + 1, last: Some(record) }),
        // The 1-based line of the damaged complete record.
        Err(_) => Err(last_index + 1),
    }
}

/// Where the chain head is anchored outside the log files (SPEC §10): `{"seq":…,"hash":"…"}`,
/// rewritten in place after every durable batch. Removing records from the end of the log leaves
/// this head pointing past it, which `verify` and the next start report.
pub const HEAD_FILE: &str = "chain-head";
/// The head record is padded to this many bytes and rewritten in place (one `pwrite`).
const HEAD_RECORD_BYTES: usize = 160;

/// The anchored head, if the file exists and parses. It is written without its own fsync (after
/// the log's): after a crash it may lag behind the log, never run ahead of it.
fn read_anchored_head(audit_dir: &Path) -> Option<(u64, String)> {
    let bytes = fs::read(audit_dir.join(HEAD_FILE)).ok()?;
    let value: Value = serde_json::from_slice(String::from_utf8_lossy(&bytes).trim().as_bytes()).ok()?;
    Some((value["seq"].as_u64()?, value["hash"].as_str()?.to_string()))
}

/// A log whose last record is before the anchored head lost records from its end.
fn check_anchored_head(audit_dir: &Path, last_seq: u64, last_hash: &str) -> Result<(), String> {
    match read_anchored_head(audit_dir) {
        Some((seq, _)) if seq > last_seq => Err(format!(
            "the log ends at record {last_seq}, but record {seq} was written (records were removed from the end)"
        )),
        Some((seq, hash)) if seq == last_seq && hash != last_hash => {
            Err(format!("record {seq} is not the one that was written (its hash differs from the anchored head)"))
        }
        _ => Ok(()),
    }
}

/// Finds the chain head on disk, repairing a torn tail of the newest non-empty file.
fn recover(audit_dir: &Path) -> anyhow::Result<ChainHead> {
    let files = log_files(audit_dir).with_context(|| format!("listing {}", audit_dir.display()))?;
    for (_, path) in files.iter().rev() {
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let tail = split_tail(&bytes).map_err(|line| {
            anyhow::anyhow!(
                "{} is damaged at line {line}: a complete record is not valid JSON (changed after it was \
                 written)\nhint: run `aileron audit verify`, keep a copy of the file, and move it out of the audit \
                 directory to start a new chain",
                path.display()
            )
        })?;
        if tail.keep < bytes.len() {
            set_aside_torn_tail(path, &bytes, tail.keep)?;
        }
        if let Some(record) = tail.last {
            check_anchored_head(audit_dir, record.seq, &record.hash).map_err(|problem| {
                anyhow::anyhow!(
                    "the audit log in {} was cut short: {problem}\nhint: run `aileron audit verify`, keep a copy \
                     of the directory for investigation; the daemon will not extend a truncated chain",
                    audit_dir.display()
                )
            })?;
            return Ok(ChainHead::after(&record));
        }
    }
    if let Some((seq, _)) = read_anchored_head(audit_dir).filter(|(seq, _)| *seq > 0) {
        anyhow::bail!(
            "the audit log in {} is empty, but {seq} records were written\nhint: restore the log files from a \
             backup; the daemon will not start a new chain over a removed one",
            audit_dir.display()
        );
    }
    Ok(ChainHead::genesis())
}

fn set_aside_torn_tail(path: &Path, bytes: &[u8], keep: usize) -> anyhow::Result<()> {
    let torn = &bytes[keep..];
    let sidecar = path.with_file_name(format!("{}.torn-{}", file_name(path), Utc::now().timestamp_millis()));
    write_new_file(&sidecar, torn).with_context(|| format!("saving the torn tail to {}", sidecar.display()))?;
    let file = OpenOptions::new().write(true).open(path).with_context(|| format!("opening {}", path.display()))?;
    file.set_len(keep as u64).with_context(|| format!("truncating {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))?;
    eprintln!(
        "aileron: warning: {} ended with {} bytes of an unfinished record (a crash during a write); they were \
         never acknowledged and were moved to {}",
        path.display(),
        torn.len(),
        sidecar.display()
    );
    Ok(())
}

fn write_new_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().create_new(true).write(true).mode(0o600).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// The writer thread's state.
struct Writer {
    audit_dir: PathBuf,
    clock: Arc<dyn Clock>,
    head: ChainHead,
    file: Option<OpenLog>,
    /// [`HEAD_FILE`], rewritten in place after each durable batch.
    head_file: File,
    /// Set after a failed batch: the head is re-read from disk before the next one.
    needs_recovery: bool,
    stats: Arc<Stats>,
}

struct OpenLog {
    date: NaiveDate,
    path: PathBuf,
    file: File,
    /// Bytes known to be in the file (what a failed batch is truncated back to).
    len: u64,
}

/// A file touched by the current batch and its length before the batch.
struct Touched {
    path: PathBuf,
    len_before: u64,
}

type Waiter = (tokio::sync::oneshot::Sender<Result<AuditRecord, AuditError>>, AuditRecord);

impl Writer {
    fn run(&mut self, commands: mpsc::Receiver<Command>) {
        while let Ok(first) = commands.recv() {
            let mut appends = Vec::new();
            let mut flushes = Vec::new();
            for command in std::iter::once(first).chain(std::iter::from_fn(|| commands.try_recv().ok())) {
                match command {
                    Command::Append(event, reply) => appends.push((event, reply)),
                    Command::Flush(reply) => flushes.push(reply),
                }
            }
            if !appends.is_empty() {
                self.commit(appends);
            }
            for reply in flushes {
                let _ = reply.send(());
            }
        }
    }

    fn commit(&mut self, appends: Vec<(AuditEvent, tokio::sync::oneshot::Sender<Result<AuditRecord, AuditError>>)>) {
        if self.needs_recovery {
            match recover(&self.audit_dir) {
                Ok(head) => {
                    self.head = head;
                    self.needs_recovery = false;
                }
                Err(error) => {
                    let error = AuditError::Write(format!("{error:#}"));
                    for (_, reply) in appends {
                        let _ = reply.send(Err(error.clone()));
                    }
                    return;
                }
            }
        }
        let head_before = self.head.clone();
        let mut touched: Vec<Touched> = Vec::new();
        let mut waiters: Vec<Waiter> = Vec::with_capacity(appends.len());
        let result = self.write_batch(appends, &mut waiters, &mut touched);
        match result {
            Ok(()) => {
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                self.anchor_head();
                for (reply, record) in waiters {
                    let _ = reply.send(Ok(record));
                }
            }
            Err(error) => {
                // Nothing of this batch was acknowledged: take it back off the disk so the chain
                // on disk ends where the last acknowledged record is, and re-read it next time.
                self.file = None;
                for file in &touched {
                    if let Ok(f) = OpenOptions::new().write(true).open(&file.path) {
                        let _ = f.set_len(file.len_before).and_then(|()| f.sync_all());
                    }
                }
                self.head = head_before;
                self.needs_recovery = true;
                let error = AuditError::Write(error.to_string());
                eprintln!("aileron: {error}");
                for (reply, _) in waiters {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }

    fn write_batch(
        &mut self,
        appends: Vec<(AuditEvent, tokio::sync::oneshot::Sender<Result<AuditRecord, AuditError>>)>,
        waiters: &mut Vec<Waiter>,
        touched: &mut Vec<Touched>,
    ) -> io::Result<()> {
        let mut buffer = Vec::new();
        let mut failure = None;
        for (event, reply) in appends {
            let record = self.head.seal_next(event, self.clock.as_ref());
            // Records are sealed in order even after a failure so every waiter gets an answer.
            waiters.push((reply, record));
            if failure.is_some() {
                continue;
            }
            let record = &waiters.last().expect("just pushed").1;
            let date = parse_timestamp(&record.timestamp).expect("the writer formats valid timestamps").date_naive();
            let line = record.to_line();
            if let Err(error) = self.prepare_file(date, &mut buffer, touched) {
                failure = Some(error);
                continue;
            }
            buffer.extend_from_slice(line.as_bytes());
            buffer.push(b'\n');
        }
        if let Some(error) = failure {
            return Err(error);
        }
        self.write_and_sync(&mut buffer)
    }

    /// Rewrites [`HEAD_FILE`] in place with the durable head (one `pwrite` of a fixed-size line).
    /// No fsync of its own: after a crash the anchor may lag behind the log, never run ahead.
    fn anchor_head(&mut self) {
        use std::os::unix::fs::FileExt;
        let mut line = format!("{{\"seq\":{},\"hash\":\"{}\"}}", self.head.seq, self.head.hash).into_bytes();
        line.resize(HEAD_RECORD_BYTES - 1, b' ');
        line.push(b'\n');
        if let Err(error) = self.head_file.write_all_at(&line, 0) {
            eprintln!("aileron: warning: anchoring the audit chain head: {error}");
        }
    }

    /// Makes the file for `date` current, first committing what is buffered for the previous one:
    /// a later file must never hold records whose predecessors are not yet durable.
    fn prepare_file(&mut self, date: NaiveDate, buffer: &mut Vec<u8>, touched: &mut Vec<Touched>) -> io::Result<()> {
        if let Some(open) = self.file.as_ref().filter(|open| open.date == date) {
            if !touched.iter().any(|t| t.path == open.path) {
                touched.push(Touched { path: open.path.clone(), len_before: open.len });
            }
            return Ok(());
        }
        if self.file.is_some() {
            self.write_and_sync(buffer)?;
        }
        let path = self.audit_dir.join(log_file_name(date));
        let existed = path.exists();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
        if !existed {
            sync_dir(&self.audit_dir)?;
        }
        let len = file.metadata()?.len();
        touched.push(Touched { path: path.clone(), len_before: len });
        self.file = Some(OpenLog { date, path, file, len });
        Ok(())
    }

    fn write_and_sync(&mut self, buffer: &mut Vec<u8>) -> io::Result<()> {
        if buffer.is_empty() {
            return Ok(());
        }
        let open = self.file.as_mut().expect("a file is prepared before lines are buffered");
        let context =
            |e: io::Error, doing: &str| io::Error::new(e.kind(), format!("{doing} {}: {e}", open.path.display()));
        open.file.write_all(buffer).map_err(|e| context(e, "writing"))?;
        open.file.sync_data().map_err(|e| context(e, "syncing"))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        open.len += buffer.len() as u64;
        buffer.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use aileron_core::audit::{ActorType, BreakReason};
    use chrono::TimeZone;

    use super::*;

    /// A clock tests move by hand.
    struct TestClock(Mutex<DateTime<Utc>>);

    impl TestClock {
        fn at(rfc3339: &str) -> Arc<TestClock> {
            Arc::new(TestClock(Mutex::new(parse_timestamp(rfc3339).unwrap())))
        }
        fn set(&self, rfc3339: &str) {
            *self.0.lock().unwrap() = parse_timestamp(rfc3339).unwrap();
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> DateTime<Utc> {
            *self.0.lock().unwrap()
        }
    }

    fn event(event_type: EventType, payload: &[(&str, &str)]) -> AuditEvent {
        AuditEvent {
            event_type,
            actor: Actor::new(ActorType::Service, "test"),
            session_id: None,
            payload: payload.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect(),
            audit_id: None,
        }
    }

    fn open_disk(parent: &Path, clock: &Arc<TestClock>) -> AuditLog {
        AuditLog::open_with_clock(AuditConfig { dir: Some(parent.to_path_buf()) }, clock.clone()).unwrap()
    }

    fn file_names(audit_dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(audit_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_are_chained_durable_and_group_committed() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = Arc::new(open_disk(temp.path(), &clock));
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let log = log.clone();
                tokio::spawn(async move { log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await })
            })
            .collect();
        let mut seqs = Vec::new();
        for task in tasks {
            seqs.push(task.await.unwrap().unwrap().seq);
        }
        seqs.sort();
        assert_eq!(seqs, (1..=200).collect::<Vec<u64>>());
        let text = fs::read_to_string(temp.path().join("audit/audit-2026-11-22.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 200);
        let report = log.verify().unwrap();
        assert_eq!((report.records, report.last_seq, report.torn_tail_skipped), (200, 200, None));
        eprintln!("200 concurrent appends: {} fsyncs in {} batches", log.fsync_count(), log.batch_count());
        assert!(log.fsync_count() < 200, "no batching happened: {} fsyncs", log.fsync_count());
        assert_eq!(log.fsync_count(), log.batch_count(), "one sync per batch within one day");
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

    #[tokio::test]
    async fn restart_continues_the_chain() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let first = open_disk(temp.path(), &clock);
        for _ in 0..3 {
            first.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        }
        drop(first);
        let second = open_disk(temp.path(), &clock);
        let record = second.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        assert_eq!(record.seq, 4);
        let report = verify(temp.path()).unwrap();
        assert_eq!((report.records, report.files), (4, 1));
    }

    #[tokio::test]
    async fn a_second_writer_on_the_same_directory_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let _first = open_disk(temp.path(), &clock);
        let error = AuditLog::open_with_clock(AuditConfig { dir: Some(temp.path().into()) }, clock.clone())
            .err()
            .expect("second writer must be refused");
        assert!(error.to_string().contains("hint:"), "{error}");
    }

    #[tokio::test]
    async fn torn_tail_is_set_aside_at_open_and_the_chain_continues() {
        // (bytes appended after 3 good records, file names expected besides the log)
        let cases: [(&str, &[u8]); 2] = [
            ("half a line", b"{\"audit_id\":\"audit-x\",\"ev"),
            ("zeros from a crash", b"\0\0\0\0\0\0\0\0"),
        ];
        for (name, torn) in cases {
            let temp = tempfile::tempdir().unwrap();
            let clock = TestClock::at("2026-11-22T10:00:00.000Z");
            let log = open_disk(temp.path(), &clock);
            for _ in 0..3 {
                log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
            }
            drop(log);
            let path = temp.path().join("audit/audit-2026-11-22.jsonl");
            let good = fs::read(&path).unwrap();
            fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();
            // Before repair, readers and the verifier already tolerate it.
            let report = verify(temp.path()).unwrap();
            assert_eq!((report.records, report.torn_tail_skipped.map(|p| p.line)), (3, Some(4)), "{name}");
            assert_eq!(query(temp.path(), &AuditFilter::default()).unwrap().len(), 3, "{name}");

            let log = open_disk(temp.path(), &clock);
            assert_eq!(fs::read(&path).unwrap(), good, "{name}: torn bytes truncated");
            let sidecars: Vec<String> = file_names(&temp.path().join("audit"))
                .into_iter()
                .filter(|n| n.starts_with("audit-2026-11-22.jsonl.torn-"))
                .collect();
            assert_eq!(sidecars.len(), 1, "{name}");
            assert_eq!(fs::read(temp.path().join("audit").join(&sidecars[0])).unwrap(), torn, "{name}");
            assert_eq!(log.append(event(EventType::ActionExecuted, &[])).await.unwrap().seq, 4, "{name}");
            let report = log.verify().unwrap();
            assert_eq!((report.records, report.torn_tail_skipped), (4, None), "{name}");
        }
    }

    /// Replacing the last complete record with garbage, or removing records from the end, is
    /// detected by `verify` and refused at the next start (SPEC §10).
    #[tokio::test]
    async fn damaging_or_cutting_the_end_of_the_log_is_detected() {
        for damage in ["garbage last record", "last record removed", "every record removed"] {
            let temp = tempfile::tempdir().unwrap();
            let clock = TestClock::at("2026-11-22T10:00:00.000Z");
            let log = open_disk(temp.path(), &clock);
            for _ in 0..5 {
                log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
            }
            drop(log);
            let path = temp.path().join("audit/audit-2026-11-22.jsonl");
            let text = fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let damaged = match damage {
                "garbage last record" => format!("{}\n{{\"audit_id\": \"not a record\"}}\n", lines[..4].join("\n")),
                "last record removed" => format!("{}\n", lines[..4].join("\n")),
                _ => String::new(),
            };
            fs::write(&path, damaged).unwrap();
            let verified = verify(temp.path());
            assert!(verified.is_err(), "{damage}: verify reports it: {verified:?}");
            let reopened = AuditLog::open_with_clock(AuditConfig { dir: Some(temp.path().to_path_buf()) }, clock.clone());
            let error = reopened.err().unwrap_or_else(|| panic!("{damage}: the daemon does not extend a damaged chain"));
            assert!(format!("{error:#}").contains("hint:"), "{damage}: {error:#}");
        }
    }

    #[test]
    fn split_tail_table() {
        let record = |seq: u64| {
            let unsealed = UnsealedRecord {
                audit_id: format!("audit-{seq}"),
                event_type: "a".into(),
                timestamp: "2026-11-22T10:00:00.000Z".into(),
                actor: Actor::new(ActorType::Human, "me"),
                session_id: None,
                payload: Map::new(),
            };
            seal(unsealed, seq, GENESIS_PREV.into())
        };
        let line = |seq: u64| format!("{}\n", record(seq).to_line());
        let two = format!("{}{}", line(1), line(2));
        let check = |bytes: String, expected: Result<(usize, Option<u64>), usize>| {
            let got = split_tail(bytes.as_bytes()).map(|t| (t.keep, t.last.map(|r| r.seq)));
            assert_eq!(got, expected, "{bytes:?}");
        };
        check(String::new(), Ok((0, None)));
        check(two.clone(), Ok((two.len(), Some(2))));
        check(format!("{two}{{\"torn"), Ok((two.len(), Some(2))));
        // A complete line that does not parse is damage, not a torn write.
        check(format!("{two}garbage\n"), Err(3));
        check(format!("{two}garbage\n{{\"torn"), Err(3));
        check("garbage\n".into(), Err(1));
        check("{\"torn".into(), Ok((0, None)));
        check(format!("{two}bad\nworse\n"), Err(4));
    }

    #[tokio::test]
    async fn day_roll_continues_the_chain_across_files_and_timestamps_never_go_back() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T23:59:59.998Z");
        let log = open_disk(temp.path(), &clock);
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        clock.set("2026-11-23T00:00:00.001Z");
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        // The wall clock steps back across midnight: the record stays in the newest file.
        clock.set("2026-11-22T23:00:00.000Z");
        let clamped = log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        assert_eq!(clamped.timestamp, "2026-11-23T00:00:00.001Z");
        clock.set("2026-11-25T08:00:00.000Z");
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        let audit_dir = temp.path().join("audit");
        let lines =
            |day: &str| fs::read_to_string(audit_dir.join(format!("audit-{day}.jsonl"))).unwrap().lines().count();
        assert_eq!((lines("2026-11-22"), lines("2026-11-23"), lines("2026-11-25")), (1, 2, 1));
        let report = log.verify().unwrap();
        assert_eq!((report.records, report.files), (4, 3));
        drop(log);
        // Restart after the roll picks up from the newest file.
        let log = open_disk(temp.path(), &clock);
        assert_eq!(log.append(event(EventType::ActionExecuted, &[])).await.unwrap().seq, 5);
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

    /// (timestamp, event type, payload)
    type PlannedEvent<'a> = (&'a str, EventType, &'a [(&'a str, &'a str)]);

    /// Appends a fixed set of events across two days, for the query table.
    async fn populate(log: &AuditLog, clock: &TestClock) -> Vec<AuditRecord> {
        let mut records = Vec::new();
        let plan: [PlannedEvent; 5] = [
            ("2026-11-21T09:00:00.000Z", EventType::ConnectorInstalled, &[(keys::CONNECTOR_FQN, "github://acme/slack")]),
            ("2026-11-21T10:00:00.000Z", EventType::ActionExecuted, &[(keys::CONNECTOR_FQN, "github://acme/slack")]),
            (
                "2026-11-22T09:00:00.000Z",
                EventType::ExecutionFailed,
                &[(keys::CONNECTOR_FQN, "github://acme/slack"), (keys::FAILURE_CLASS, "capability_denied")],
            ),
            (
                "2026-11-22T10:00:00.000Z",
                EventType::ExecutionFailed,
                &[(keys::CONNECTOR_FQN, "github://acme/jira"), (keys::FAILURE_CLASS, "network_error")],
            ),
            ("2026-11-22T11:00:00.000Z", EventType::ApprovalRequested, &[]),
        ];
        for (at, event_type, payload) in plan {
            clock.set(at);
            records.push(log.append(event(event_type, payload)).await.unwrap());
        }
        records
    }

    #[tokio::test]
    async fn query_filters_table_on_disk_and_in_memory() {
        let temp = tempfile::tempdir().unwrap();
        for dir in [Some(temp.path().to_path_buf()), None] {
            let clock = TestClock::at("2026-11-21T00:00:00.000Z");
            let log = AuditLog::open_with_clock(AuditConfig { dir: dir.clone() }, clock.clone()).unwrap();
            let records = populate(&log, &clock).await;
            let ids = |indices: &[usize]| indices.iter().map(|&i| records[i].audit_id.clone()).collect::<Vec<_>>();
            let filter = |f: fn(&mut AuditFilter)| {
                let mut filter = AuditFilter::default();
                f(&mut filter);
                filter
            };
            let cases: Vec<(&str, AuditFilter, Vec<String>)> = vec![
                ("all, newest first", AuditFilter::default(), ids(&[4, 3, 2, 1, 0])),
                ("limit", filter(|f| f.limit = Some(2)), ids(&[4, 3])),
                ("event type", filter(|f| f.event_type = Some("execution.failed".into())), ids(&[3, 2])),
                ("connector", filter(|f| f.connector_fqn = Some("github://acme/slack".into())), ids(&[2, 1, 0])),
                ("class", filter(|f| f.class = Some("network_error".into())), ids(&[3])),
                ("since timestamp", filter(|f| f.since = Some("2026-11-21T10:00:00Z".into())), ids(&[4, 3, 2, 1])),
                ("since date", filter(|f| f.since = Some("2026-11-22".into())), ids(&[4, 3, 2])),
                (
                    "combined",
                    filter(|f| {
                        f.connector_fqn = Some("github://acme/slack".into());
                        f.since = Some("2026-11-21T09:30:00+00:00".into());
                        f.limit = Some(1);
                    }),
                    ids(&[2]),
                ),
                ("no match", filter(|f| f.event_type = Some("nothing".into())), vec![]),
            ];
            for (name, filter, expected) in cases {
                let got: Vec<String> = log.query(&filter).unwrap().into_iter().map(|r| r.audit_id).collect();
                assert_eq!(got, expected, "{name} ({dir:?})");
            }
            assert_eq!(log.get(&records[2].audit_id).unwrap().as_ref(), Some(&records[2]), "{dir:?}");
            assert_eq!(log.get("audit-missing").unwrap(), None);
            let bad = AuditFilter { since: Some("yesterday".into()), ..AuditFilter::default() };
            assert_eq!(log.query(&bad).unwrap_err(), AuditError::InvalidSince("yesterday".into()));
            assert_eq!(log.verify().unwrap().records, 5);
        }
    }

    #[tokio::test]
    async fn pre_minted_ids_and_sessions_are_kept() {
        let log = AuditLog::open(AuditConfig { dir: None }).unwrap();
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

    #[tokio::test]
    async fn a_failed_write_is_not_acknowledged_and_later_appends_recover() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        // A directory where the next day's file must go makes opening it fail (even for root).
        let blocker = temp.path().join("audit/audit-2026-11-23.jsonl");
        fs::create_dir(&blocker).unwrap();
        clock.set("2026-11-23T10:00:00.000Z");
        let result = log.append(event(EventType::ActionExecuted, &[])).await;
        assert!(
            matches!(&result, Err(AuditError::Write(message)) if message.contains("audit-2026-11-23")),
            "{result:?}"
        );
        // Still failing: every append reports it, none is acknowledged.
        assert!(log.append(event(EventType::ActionExecuted, &[])).await.is_err());
        fs::remove_dir(&blocker).unwrap();
        let record = log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        assert_eq!(record.seq, 2, "the failed records were never part of the chain");
        let report = log.verify().unwrap();
        assert_eq!((report.records, report.files), (2, 2));
    }

    /// Set in the child process of the crash test: the audit parent directory to append to.
    const CRASH_CHILD_DIR: &str = "AUDIT_LOG_CRASH_CHILD_DIR";

    /// `kill -9` while appends are in flight: after reopening, the log verifies and holds every
    /// record that was acknowledged. The child is this test binary running this very test with
    /// `CRASH_CHILD_DIR` set, so no helper binary is needed.
    #[test]
    fn kill_9_loses_no_acknowledged_record() {
        if let Some(dir) = std::env::var_os(CRASH_CHILD_DIR) {
            crash_child(PathBuf::from(dir));
        }
        let temp = tempfile::tempdir().unwrap();
        let test_name = format!("{}::kill_9_loses_no_acknowledged_record", module_path!().split_once("::").unwrap().1);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &test_name, "--nocapture", "--test-threads=1"])
            .env(CRASH_CHILD_DIR, temp.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut acknowledged: Vec<(u64, String)> = Vec::new();
        let stdout = io::BufReader::new(child.stdout.take().unwrap());
        for line in io::BufRead::lines(stdout) {
            let line = line.unwrap();
            let Some((seq, id)) = line.strip_prefix("acked ").and_then(|rest| rest.split_once(' ')) else { continue };
            acknowledged.push((seq.parse().unwrap(), id.to_string()));
            if acknowledged.len() == 300 {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        assert_eq!(acknowledged.len(), 300, "the child stopped acknowledging early");

        let log = AuditLog::open(AuditConfig { dir: Some(temp.path().to_path_buf()) }).unwrap();
        let report = log.verify().unwrap();
        let on_disk: std::collections::HashMap<u64, String> =
            log.query(&AuditFilter::default()).unwrap().into_iter().map(|r| (r.seq, r.audit_id)).collect();
        for (seq, id) in &acknowledged {
            assert_eq!(on_disk.get(seq), Some(id), "acknowledged record {seq} is missing after the crash");
        }
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let next = runtime.block_on(log.append(event(EventType::ActionExecuted, &[]))).unwrap();
        assert_eq!(next.seq, report.last_seq + 1);
    }

    /// Appends from 8 tasks with large payloads (so writes are long and a kill can tear one),
    /// printing each acknowledgement; exits on its own after 30 s in case the parent died.
    fn crash_child(dir: PathBuf) -> ! {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let log = Arc::new(AuditLog::open(AuditConfig { dir: Some(dir) }).unwrap());
            let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel();
            for task in 0..8 {
                let (log, acks) = (log.clone(), acks.clone());
                tokio::spawn(async move {
                    let filler = "x".repeat(16 * 1024);
                    loop {
                        let record =
                            log.append(event(EventType::ActionExecuted, &[("task", &task.to_string()), ("filler", &filler)]));
                        let record = record.await.unwrap();
                        let _ = acks.send((record.seq, record.audit_id));
                    }
                });
            }
            let deadline = tokio::time::sleep(std::time::Duration::from_secs(30));
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    Some((seq, id)) = acked.recv() => println!("acked {seq} {id}"),
                    () = &mut deadline => std::process::exit(0),
                }
            }
        })
    }

    #[test]
    fn file_names_table() {
        let check = |name: &str, expected: Option<(i32, u32, u32)>| {
            let expected = expected.map(|(y, m, d)| NaiveDate::from_ymd_opt(y, m, d).unwrap());
            assert_eq!(date_of_file_name(name), expected, "{name}");
        };
        check("audit-2026-11-22.jsonl", Some((2026, 11, 22)));
        check("audit-2026-11-22.jsonl.torn-1700000000000", None);
        check("audit-2026-1-2.jsonl", None);
        check(".writer.lock", None);
        check("audit-2026-13-01.jsonl", None);
        let date = Utc.with_ymd_and_hms(2026, 1, 2, 0, 0, 0).unwrap().date_naive();
        assert_eq!(log_file_name(date), "audit-2026-01-02.jsonl");
    }
}
