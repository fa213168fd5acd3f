//! The writer thread: group commit. It drains every queued append, seals the records in chain
//! order, writes them with one `write` per daily file and once more, framed, to the journal
//! ([`super::journal`]), syncs the journal once, and only then acknowledges each waiter. A failed
//! batch is taken back off the disk and nothing of it is acknowledged.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc};

use aileron_core::audit::PreparedRecord;
use chrono::NaiveDate;
use tokio::sync::watch;

use super::daily_file::{log_file_name, open_for_append};
use super::journal::Journal;
use super::recovery::{HEAD_RECORD_BYTES, recover};
use super::{AuditError, ChainHead, Clock, Sealed, Stats};

pub(super) enum Command {
    /// A record written ahead by its appender; `fields`: its chain fields are wanted back.
    Append { record: PreparedRecord, fields: bool, reply: Reply },
    /// Acknowledged once everything queued before it has been processed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The writer thread's state.
pub(super) struct Writer {
    audit_dir: PathBuf,
    clock: Arc<dyn Clock>,
    head: ChainHead,
    /// The head before the current batch, put back if the batch fails (kept between batches).
    head_before: ChainHead,
    file: Option<OpenLog>,
    /// [`super::HEAD_FILE`], rewritten in place after each durable batch.
    head_file: File,
    /// Set after a failed batch: the head is re-read from disk before the next one.
    needs_recovery: bool,
    stats: Arc<Stats>,
    /// Told the head's seq after each durable batch ([`super::AuditLog::subscribe`]).
    durable_seq: Arc<watch::Sender<u64>>,
    /// The batch's lines, kept between batches so a batch allocates no buffer of its own.
    lines: Vec<u8>,
    /// The first and last seq of the lines in `lines`.
    buffered: Option<(u64, u64)>,
    /// Where a batch is made durable; its daily file is synced at checkpoints.
    journal: Journal,
    /// The batch's sealed lines, for the Merkle tree once the batch is acknowledged.
    sealed: Vec<u8>,
    /// The Merkle tree and its checkpoints (SPEC §17); `None` when they could not be opened or
    /// written (warned once; the log itself goes on).
    tree: Option<super::tree::TreeState>,
    /// A batch's waiters and touched files, kept between batches like `lines`.
    waiters: Vec<Waiter>,
    touched: Vec<Touched>,
}

struct OpenLog {
    date: NaiveDate,
    path: Arc<Path>,
    file: File,
    /// Bytes known to be in the file (what a failed batch is truncated back to).
    len: u64,
    /// Where the background writeback [`Writer::start_writeback`] last started ends.
    written_back: u64,
    /// Where the blocks allocated for the file end ([`Writer::keep_headroom`]); `u64::MAX` when
    /// the file system cannot allocate ahead.
    reserved_to: u64,
}

impl OpenLog {
    /// `fdatasync` of the daily file, its error naming it.
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data().map_err(|e| io::Error::new(e.kind(), format!("syncing {}: {e}", self.path.display())))
    }
}

/// Bytes kept allocated past the daily file's end (`fallocate`, `FALLOC_FL_KEEP_SIZE`: its size
/// and contents are unchanged), renewed when less than half is left. When the disk cannot give
/// them the log is low on space ([`super::AuditLog::low_on_space`]): runs are refused before
/// their steps, and the records of those refusals still fit in what is left.
const HEADROOM: u64 = 256 * 1024;

/// How much of the daily file [`Writer::start_writeback`] lets accumulate before starting to
/// write it back: an eighth of the journal, so a checkpoint finds little left to write.
const WRITEBACK_BYTES: u64 = super::journal::JOURNAL_BYTES / 8;

/// A file touched by the current batch and its length before the batch.
struct Touched {
    path: Arc<Path>,
    len_before: u64,
}

pub(super) type Reply = tokio::sync::oneshot::Sender<Result<Sealed, AuditError>>;

/// An append of the batch: its reply, and what it was sealed as (`None` once the batch failed).
type Waiter = (Reply, Option<Sealed>);

/// An append as the writer takes it off the channel.
type Append = (PreparedRecord, bool, Reply);

impl Writer {
    pub(super) fn new(
        audit_dir: PathBuf,
        clock: Arc<dyn Clock>,
        head: ChainHead,
        head_file: File,
        stats: Arc<Stats>,
        durable_seq: Arc<watch::Sender<u64>>,
        journal: Journal,
    ) -> Writer {
        Writer {
            audit_dir,
            clock,
            head_before: head.clone(),
            head,
            file: None,
            head_file,
            needs_recovery: false,
            stats,
            durable_seq,
            lines: Vec::new(),
            buffered: None,
            journal,
            sealed: Vec::new(),
            tree: None,
            waiters: Vec::new(),
            touched: Vec::new(),
        }
    }

    /// Keeps the Merkle tree and issues its checkpoints (SPEC §17).
    pub(super) fn with_tree(mut self, tree: Option<super::tree::TreeState>) -> Writer {
        self.tree = tree;
        self
    }

    pub(super) fn run(&mut self, commands: mpsc::Receiver<Command>) {
        // Kept between batches: a batch allocates no list of its own.
        let mut appends: Vec<Append> = Vec::new();
        loop {
            let Ok(first) = commands.recv() else { break };
            let mut flushes = Vec::new();
            for command in std::iter::once(first).chain(std::iter::from_fn(|| commands.try_recv().ok())) {
                match command {
                    Command::Append { record, fields, reply } => appends.push((record, fields, reply)),
                    Command::Flush(reply) => flushes.push(reply),
                }
            }
            if !appends.is_empty() {
                self.commit(&mut appends);
            }
            // A flush while the disk was low asks again whether it has room now
            // (`AuditLog::has_room`): the space may have been freed since the last batch.
            if !flushes.is_empty() && self.stats.low_on_space.load(Ordering::Relaxed) {
                self.keep_headroom();
            }
            for reply in flushes {
                let _ = reply.send(());
            }
        }
        // Shutting down: the daily file is made durable. The journal keeps its frames: a second
        // copy of the newest records, so records cut from the end of the log while the daemon is
        // stopped are restored at the next start (and `verify` reports them), even with the
        // chain-head anchor removed or rewritten too (the re-attack's L3). Reading them back
        // costs the start a few milliseconds.
        // The tree's thread issues the shutdown checkpoint; waited for here.
        drop(self.tree.take());
        let synced = self.file.as_ref().map_or(Ok(()), OpenLog::sync);
        if let Some(open) = &self.file {
            Self::release_headroom(open);
        }
        if let Err(error) = synced {
            log_line!("aileron: warning: at shutdown: {error} (the journal keeps its records)");
        }
    }

    fn commit(&mut self, appends: &mut Vec<Append>) {
        if self.needs_recovery {
            match recover(&self.audit_dir) {
                Ok(head) => {
                    self.head = head;
                    self.needs_recovery = false;
                    if let Some(tree) = &self.tree {
                        tree.resync(self.head.seq);
                    }
                }
                Err(error) => {
                    let error = AuditError::Write(format!("{error:#}"));
                    for (_, _, reply) in appends.drain(..) {
                        let _ = reply.send(Err(error.clone()));
                    }
                    return;
                }
            }
        }
        self.head_before.clone_from(&self.head);
        self.journal.begin_batch();
        let (mut waiters, mut touched) = (std::mem::take(&mut self.waiters), std::mem::take(&mut self.touched));
        let result = self.write_batch(appends, &mut waiters, &mut touched);
        match result {
            Ok(()) => {
                self.stats.batches.fetch_add(1, Ordering::Relaxed);
                // Before the acknowledgements: whoever saw its append succeed and then
                // subscribes starts at this seq or later.
                self.durable_seq.send_replace(self.head.seq);
                for (reply, sealed) in waiters.drain(..) {
                    let _ = reply.send(Ok(sealed.expect("a durable batch sealed every record")));
                }
                // After them: the anchor may lag behind the log (never run ahead of it), so no
                // waiter waits for its `pwrite`.
                self.anchor_head();
                self.start_writeback();
                self.keep_headroom();
                if let Some(tree) = &self.tree {
                    tree.extend(std::mem::take(&mut self.sealed));
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
                self.head.clone_from(&self.head_before);
                self.needs_recovery = true;
                self.journal.abandon_batch();
                let error = AuditError::Write(error.to_string());
                log_line!("aileron: {error}");
                for (reply, _) in waiters.drain(..) {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
        touched.clear();
        (self.waiters, self.touched) = (waiters, touched);
    }

    fn write_batch(
        &mut self,
        appends: &mut Vec<Append>,
        waiters: &mut Vec<Waiter>,
        touched: &mut Vec<Touched>,
    ) -> io::Result<()> {
        let mut buffer = std::mem::take(&mut self.lines);
        buffer.clear();
        self.sealed.clear();
        self.buffered = None;
        let mut failure = None;
        for (record, fields, reply) in appends.drain(..) {
            // After a failure every waiter still gets its answer: the batch's error.
            if failure.is_some() {
                waiters.push((reply, None));
                continue;
            }
            let at = self.head.next_timestamp(self.clock.as_ref());
            if let Err(error) = self.prepare_file(at.date_naive(), &mut buffer, touched) {
                failure = Some(error);
                waiters.push((reply, None));
                continue;
            }
            let start = buffer.len();
            let sealed = self.head.seal_next(&record, at, &mut buffer, fields);
            buffer.push(b'\n');
            if self.tree.is_some() {
                self.sealed.extend_from_slice(&buffer[start..]);
            }
            let seq = sealed.seq;
            self.buffered = Some(self.buffered.map_or((seq, seq), |(first, _)| (first, seq)));
            waiters.push((reply, Some(sealed)));
        }
        let written = match failure {
            Some(error) => Err(error),
            None => self.write_and_sync(&mut buffer),
        };
        self.lines = buffer;
        written
    }

    /// Anchors the head the daemon starts from, whatever the anchor held: a missing, emptied or
    /// overwritten anchor (or one that lags after a crash) names the durable head again at once,
    /// and anything after the fixed-size line is cut off (a longer file of garbage would otherwise
    /// keep every later anchor from parsing). The log is synced before the writer starts, so the
    /// anchor does not run ahead of it.
    pub(super) fn anchor_at_start(&mut self) {
        self.anchor_head();
        if let Err(error) = self.head_file.set_len(HEAD_RECORD_BYTES as u64) {
            log_line!("aileron: warning: anchoring the audit chain head: {error}");
        }
    }

    /// Rewrites [`super::HEAD_FILE`] in place with the durable head (one `pwrite` of a fixed-size line).
    /// No fsync of its own: after a crash the anchor may lag behind the log, never run ahead.
    fn anchor_head(&mut self) {
        use std::os::unix::fs::FileExt;
        // Padded with spaces to the fixed size, written from the stack.
        let mut line = [b' '; HEAD_RECORD_BYTES];
        line[HEAD_RECORD_BYTES - 1] = b'\n';
        let mut text = &mut line[..HEAD_RECORD_BYTES - 1];
        let written = write!(text, "{{\"seq\":{},\"hash\":\"{}\"}}", self.head.seq, self.head.hash)
            .and_then(|()| self.head_file.write_all_at(&line, 0));
        if let Err(error) = written {
            log_line!("aileron: warning: anchoring the audit chain head: {error}");
        }
    }

    /// Starts writing the daily file's new whole pages back to the disk without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`) once [`WRITEBACK_BYTES`] have accumulated: the
    /// journal makes them durable meanwhile, and the checkpoint's `fdatasync` then has only the
    /// last of them to write instead of stalling every batch behind a megabyte (measured: 1 MiB
    /// journal, 16 clients, 9.3–9.5k runs/s without it).
    fn start_writeback(&mut self) {
        use std::os::fd::AsRawFd;
        const PAGE: u64 = 4096;
        let Some(open) = self.file.as_mut() else { return };
        let end = open.len / PAGE * PAGE;
        if end < open.written_back + WRITEBACK_BYTES {
            return;
        }
        let (offset, bytes) = (open.written_back, end - open.written_back);
        // SAFETY: a plain system call on a descriptor `open.file` owns; it touches no memory.
        let started = unsafe {
            libc::sync_file_range(
                open.file.as_raw_fd(),
                offset as libc::off64_t,
                bytes as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            )
        };
        if started == 0 {
            open.written_back = end;
        }
    }

    /// Keeps [`HEADROOM`] bytes allocated past the current file's end, and says whether the disk
    /// could give them. A file system that cannot allocate ahead is never reported low.
    fn keep_headroom(&mut self) {
        let Some(open) = self.file.as_mut() else {
            // No file open (a failed batch closed it; the next one opens it and allocates):
            // whether the next batch will find the room is what the file system says is free.
            if self.stats.low_on_space.load(Ordering::Relaxed)
                && free_bytes(&self.audit_dir).is_some_and(|free| free >= HEADROOM)
            {
                self.stats.low_on_space.store(false, Ordering::Relaxed);
            }
            return;
        };
        if open.reserved_to >= open.len.saturating_add(HEADROOM / 2) {
            return;
        }
        let reserved = nix::fcntl::fallocate(
            &open.file,
            nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            open.len as libc::off_t,
            HEADROOM as libc::off_t,
        );
        let low = match reserved {
            Ok(()) => {
                open.reserved_to = open.len + HEADROOM;
                false
            }
            Err(nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT) => true,
            Err(_) => {
                open.reserved_to = u64::MAX;
                false
            }
        };
        self.stats.low_on_space.store(low, Ordering::Relaxed);
    }

    /// Gives back the blocks [`Writer::keep_headroom`] allocated past a file's end (a file that
    /// is done with: the day is over, or the writer stops).
    fn release_headroom(open: &OpenLog) {
        if open.reserved_to != u64::MAX && open.reserved_to > open.len {
            let _ = open.file.set_len(open.len);
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
            // A checkpoint syncs only the current file before the journal is written over: the
            // previous day's file is made durable now.
            let previous = self.file.as_ref().expect("checked above");
            previous.sync()?;
            Self::release_headroom(previous);
        }
        let path: Arc<Path> = self.audit_dir.join(log_file_name(date)).into();
        let file = open_for_append(&self.audit_dir, &path)?;
        let len = file.metadata()?.len();
        touched.push(Touched { path: path.clone(), len_before: len });
        self.file = Some(OpenLog { date, path, file, len, written_back: len, reserved_to: len });
        self.keep_headroom();
        Ok(())
    }

    /// Writes the buffered lines to the current daily file and makes them durable: through the
    /// journal, or by syncing the daily file when the journal is full (a checkpoint: the journal
    /// starts over) or the batch is larger than the whole journal.
    fn write_and_sync(&mut self, buffer: &mut Vec<u8>) -> io::Result<()> {
        let Some((first_seq, last_seq)) = self.buffered.take() else {
            return Ok(());
        };
        let open = self.file.as_mut().expect("a file is prepared before lines are buffered");
        open.file
            .write_all(buffer)
            .map_err(|e| io::Error::new(e.kind(), format!("writing {}: {e}", open.path.display())))?;
        let syncing = std::time::Instant::now();
        if self.journal.fits(buffer.len()) {
            self.journal.commit(open.date, first_seq, last_seq, buffer)?;
        } else {
            open.sync()?;
            self.journal.checkpointed();
        }
        let synced = u64::try_from(syncing.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stats.sync_nanos.fetch_add(synced, Ordering::Relaxed);
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        open.len += buffer.len() as u64;
        buffer.clear();
        Ok(())
    }
}

/// Bytes an unprivileged writer may still allocate on the file system holding `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let stats = nix::sys::statvfs::statvfs(dir).ok()?;
    Some(u64::from(stats.blocks_available()).saturating_mul(u64::from(stats.fragment_size())))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use aileron_core::vocabulary::EventType;

    use super::super::tests::{TestClock, event, open_disk};
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_appends_are_chained_durable_and_group_committed() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = Arc::new(open_disk(temp.path(), &clock));
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let log = log.clone();
                tokio::spawn(
                    async move { log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await },
                )
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
        log_line!("200 concurrent appends: {} fsyncs in {} batches", log.fsync_count(), log.batch_count());
        assert!(log.fsync_count() < 200, "no batching happened: {} fsyncs", log.fsync_count());
        assert_eq!(log.fsync_count(), log.batch_count(), "one sync per batch within one day");
        assert!(log.sync_time() > std::time::Duration::ZERO, "the syncs' time is counted");
    }

    /// Until `done` holds or 5 s pass; whether it held.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        true
    }

    /// The anchor names the durable head once appends pause, when a flush is answered and once
    /// the log has closed; the tree's files cover every record once appends pause and once the
    /// log has closed (its thread gathers batches under load, and writes the files after).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_anchor_and_the_tree_catch_up_after_a_pause_a_flush_and_at_close() {
        use super::super::recovery::{Anchor, read_anchor};
        use super::super::tree::Tree;
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let audit_dir = temp.path().join("audit");
        let anchored = |seq: u64| matches!(read_anchor(&audit_dir), Anchor::Head(at, _) if at == seq);
        let stored = || Tree::read_only(&audit_dir).unwrap().size();
        let log = Arc::new(open_disk(temp.path(), &clock));
        let append_concurrently = |n: usize| {
            let tasks: Vec<_> = (0..n)
                .map(|i| {
                    let log = log.clone();
                    tokio::spawn(async move {
                        log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap()
                    })
                })
                .collect();
            async move {
                for task in tasks {
                    task.await.unwrap();
                }
            }
        };
        // One record, then nothing: the pause brings both up to it, with no flush asked for.
        log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        assert!(eventually(|| anchored(1)), "anchor after a pause: {:?}", read_anchor(&audit_dir));
        assert!(eventually(|| stored() == 1), "tree after a pause: {}", stored());
        // Under load, then a flush: answered only once the anchor names the head.
        append_concurrently(300).await;
        log.flush().await;
        assert!(anchored(301), "anchor after a flush: {:?}", read_anchor(&audit_dir));
        assert!(eventually(|| stored() == 301), "tree after load: {}", stored());
        // Under load, then closed at once: both name the last record.
        append_concurrently(300).await;
        let log = Arc::into_inner(log).expect("the appends are done");
        drop(log);
        assert!(anchored(601), "anchor at close: {:?}", read_anchor(&audit_dir));
        assert_eq!(stored(), 601, "tree at close");
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
}
