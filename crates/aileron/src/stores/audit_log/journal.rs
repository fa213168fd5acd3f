//! The audit journal (`audit/journal`): where a batch becomes durable before it is acknowledged.
//!
//! Appending to a daily file and `fdatasync`ing it makes the filesystem write the file's new size
//! too (on a journaled ext4, a commit of its own journal): two or three device round trips per
//! batch. The journal is a file of fixed size, written with zeros once, whose blocks are then
//! overwritten in place, so its `fdatasync` writes the batch's bytes and nothing else. A batch's
//! lines are written to the daily file (readers and `tail -f` see them at once, as before) and,
//! framed, to the journal, which is synced before anyone is acknowledged. The daily file itself is
//! synced when the journal is about to wrap (a checkpoint), at a day roll, at shutdown and at
//! open. After the machine stopped (power, kernel), [`replay`] appends to the daily files the
//! lines the journal holds that did not reach them: every acknowledged one, and those of a last
//! batch that was synced but not yet acknowledged.
//!
//! A frame: [`MAGIC`], the first and last seq of its lines (u64 LE), the daily file's date (days
//! from the common era, i32 LE), the payload's length (u32 LE), the CRC-32 of those 32 bytes and
//! of the payload (u32 LE), four zero bytes, then the payload: the batch's lines, each ending in a
//! newline. Frames follow each other from offset 0. The valid ones are those from the start whose
//! checksums match and whose seqs continue each other: a torn frame (never acknowledged) ends
//! them, and so do the frames a wrap left behind (their seqs are lower). Every record of a frame
//! written before the last checkpoint is in a synced daily file, so [`replay`] skips what the log
//! already holds.
//!
//! The checksum finds a torn write, as a database's log checksum does; it is not what makes the
//! records trustworthy: anyone who can write the file can recompute it, and [`replay`] checks
//! every record's own hash and the chain. It was a SHA-256 (frames of [`MAGIC_V1`], a 64-byte
//! header), one more hash of every record on the writer's path; those frames are still read, so
//! a journal left by an older daemon is replayed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use aileron_core::audit::{AuditRecord, GENESIS_PREV, check_line};
use aileron_core::sha256::Sha256;
use anyhow::Context;
use chrono::{Datelike, NaiveDate};

use super::daily_file::{log_file_name, log_files, open_for_append};
use crate::platform::home::sync_dir;

pub const JOURNAL_FILE: &str = "journal";
/// The journal's size: about 1,700 records of 600 bytes between checkpoints.
pub(super) const JOURNAL_BYTES: u64 = 1 << 20;

const MAGIC: [u8; 8] = *b"AILJRNL2";
/// Magic, two seqs, date, length (32 bytes), then their and the payload's CRC-32 and four zeros.
const HEADER_BYTES: usize = 40;
/// The frames of older daemons: the same 32 bytes, then their and the payload's SHA-256.
const MAGIC_V1: [u8; 8] = *b"AILJRNL1";
const HEADER_BYTES_V1: usize = 64;

/// The writer's handle on the journal.
pub(super) struct Journal {
    file: File,
    path: PathBuf,
    capacity: u64,
    /// Where the next frame goes.
    offset: u64,
    /// The frame being written, kept between batches.
    frame: Vec<u8>,
    /// Offsets of the frames the current batch wrote.
    batch_frames: Vec<u64>,
    /// Set by a failed batch: the next one syncs the daily file and starts the journal over.
    checkpoint_due: bool,
}

impl Journal {
    /// Opens the journal for frames from offset 0, first writing it with zeros (and syncing it)
    /// when it is missing or not `capacity` bytes long. Called after [`replay`] and after the
    /// daily files are synced: nothing in it is needed any more.
    pub(super) fn open(audit_dir: &Path, capacity: u64) -> io::Result<Journal> {
        let path = audit_dir.join(JOURNAL_FILE);
        let context = |e: io::Error, doing: &str| io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()));
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            // It is truncated and overwritten: never through a link planted in its place.
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| context(e, "opening"))?;
        if file.metadata().map_err(|e| context(e, "reading"))?.len() != capacity {
            file.set_len(0).map_err(|e| context(e, "truncating"))?;
            let zeros = vec![0; 64 * 1024];
            let mut left = capacity;
            while left > 0 {
                let step = left.min(zeros.len() as u64);
                file.write_all(&zeros[..step as usize]).map_err(|e| context(e, "writing"))?;
                left -= step;
            }
            file.sync_all().map_err(|e| context(e, "syncing"))?;
            if !existed {
                sync_dir(audit_dir)?;
            }
        }
        Ok(Journal {
            file,
            path,
            capacity,
            offset: 0,
            frame: Vec::new(),
            batch_frames: Vec::new(),
            checkpoint_due: false,
        })
    }

    /// Whether the frame of a batch of `payload` bytes goes into the journal now. When not (the
    /// journal is full since the last checkpoint, a failed batch wants one, or the batch is larger
    /// than the whole journal), the caller syncs the daily file instead and calls
    /// [`Journal::checkpointed`].
    pub(super) fn fits(&self, payload: usize) -> bool {
        !self.checkpoint_due && self.offset + (HEADER_BYTES + payload) as u64 <= self.capacity
    }

    /// The daily file is durable: everything the journal holds is in it, the next frame goes to
    /// offset 0.
    pub(super) fn checkpointed(&mut self) {
        self.offset = 0;
        self.checkpoint_due = false;
    }

    /// Writes the frame of `payload` (lines `first_seq..=last_seq` of the file for `date`) at the
    /// current offset and syncs it.
    pub(super) fn commit(&mut self, date: NaiveDate, first_seq: u64, last_seq: u64, payload: &[u8]) -> io::Result<()> {
        debug_assert!(self.fits(payload.len()));
        encode_frame(&mut self.frame, date, first_seq, last_seq, payload);
        self.batch_frames.push(self.offset);
        let context =
            |e: io::Error, doing: &str| io::Error::new(e.kind(), format!("{doing} {}: {e}", self.path.display()));
        self.file.write_all_at(&self.frame, self.offset).map_err(|e| context(e, "writing"))?;
        self.file.sync_data().map_err(|e| context(e, "syncing"))?;
        self.offset += self.frame.len() as u64;
        Ok(())
    }

    /// A batch begins: [`Journal::abandon_batch`] takes back the frames written from here on.
    pub(super) fn begin_batch(&mut self) {
        self.batch_frames.clear();
    }

    /// The batch failed and nothing of it was acknowledged: its frames are made invalid (their
    /// magic zeroed), since the next batch reuses its seqs with other records, and the next batch
    /// checkpoints. A frame that cannot be made invalid leaves it to the checkpoint: the daily
    /// file is synced, then the journal starts over.
    pub(super) fn abandon_batch(&mut self) {
        self.checkpoint_due = true;
        let invalidated = self
            .batch_frames
            .drain(..)
            .try_for_each(|offset| self.file.write_all_at(&[0; MAGIC.len()], offset))
            .and_then(|()| self.file.sync_data());
        if let Err(error) = invalidated {
            log_line!("aileron: warning: invalidating a failed batch in {}: {error}", self.path.display());
        }
    }
}

fn encode_frame(out: &mut Vec<u8>, date: NaiveDate, first_seq: u64, last_seq: u64, payload: &[u8]) {
    out.clear();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&first_seq.to_le_bytes());
    out.extend_from_slice(&last_seq.to_le_bytes());
    out.extend_from_slice(&date.num_days_from_ce().to_le_bytes());
    out.extend_from_slice(&u32::try_from(payload.len()).expect("a frame fits the journal").to_le_bytes());
    let checksum = frame_checksum(&out[..32], payload);
    out.extend_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(payload);
}

fn frame_checksum(fields: &[u8], payload: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(fields);
    crc.update(payload);
    crc.finalize()
}

/// One valid frame of the journal.
#[derive(Debug, PartialEq)]
struct Frame<'a> {
    date: NaiveDate,
    first_seq: u64,
    last_seq: u64,
    payload: &'a [u8],
}

/// The valid frames of `bytes` (see the module's documentation), in order.
fn frames(bytes: &[u8]) -> Vec<Frame<'_>> {
    let mut frames: Vec<Frame<'_>> = Vec::new();
    let mut offset = 0;
    while let Some(magic) = bytes.get(offset..offset + MAGIC.len()) {
        let header_bytes = match magic {
            m if m == MAGIC => HEADER_BYTES,
            m if m == MAGIC_V1 => HEADER_BYTES_V1,
            _ => break,
        };
        let Some(header) = bytes.get(offset..offset + header_bytes) else { break };
        let word = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("eight bytes"));
        let (first_seq, last_seq) = (word(8), word(16));
        let days = i32::from_le_bytes(header[24..28].try_into().expect("four bytes"));
        let len = u32::from_le_bytes(header[28..32].try_into().expect("four bytes")) as usize;
        let Some(payload) = bytes.get(offset + header_bytes..offset + header_bytes + len) else { break };
        let continues = frames.last().is_none_or(|previous| previous.last_seq.checked_add(1) == Some(first_seq));
        if first_seq == 0 || last_seq < first_seq || !continues {
            break;
        }
        let intact = if header_bytes == HEADER_BYTES {
            header[32..36] == frame_checksum(&header[..32], payload).to_le_bytes() && header[36..] == [0; 4]
        } else {
            Sha256::new().chain_update(&header[..32]).chain_update(payload).finalize()[..] == header[32..]
        };
        if !intact {
            break;
        }
        let Some(date) = NaiveDate::from_num_days_from_ce_opt(days) else { break };
        frames.push(Frame { date, first_seq, last_seq, payload });
        offset += header_bytes + len;
    }
    frames
}

/// Appends to the daily files the lines the journal holds after `last` (the log's last complete
/// record), syncs them, and returns the log's new last record. Lines at or before `last` are
/// skipped; a line that is not a sealed record, or that does not continue the chain, stops the
/// daemon: the journal was changed, or records are missing from the log.
pub(super) fn replay(audit_dir: &Path, last: Option<AuditRecord>) -> anyhow::Result<Option<AuditRecord>> {
    let path = audit_dir.join(JOURNAL_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(last),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let damaged = |problem: String| {
        anyhow::anyhow!(
            "the audit journal {} {problem}\nhint: run `aileron audit verify`, keep a copy of the audit directory \
             for investigation; the daemon will not extend a chain it cannot restore",
            path.display()
        )
    };
    let mut last = last;
    let mut restored: Vec<(NaiveDate, Vec<u8>)> = Vec::new();
    let mut count = 0u64;
    let mut scratch = Vec::new();
    for frame in frames(&bytes) {
        for line in frame.payload.split_inclusive(|b| *b == b'\n') {
            let text = std::str::from_utf8(line).ok().and_then(|text| text.strip_suffix('\n')).ok_or_else(|| {
                damaged(format!(
                    "holds a line that is not a record (records {} to {})",
                    frame.first_seq, frame.last_seq
                ))
            })?;
            let record: AuditRecord = serde_json::from_str(text)
                .map_err(|error| damaged(format!("holds a line that is not a record: {error}")))?;
            check_line(text, &mut scratch)
                .map_err(|reason| damaged(format!("holds record {}, which {reason}", record.seq)))?;
            let (head_seq, head_hash) = last.as_ref().map_or((0, GENESIS_PREV), |last| (last.seq, last.hash.as_str()));
            if record.seq < head_seq {
                continue;
            }
            if record.seq == head_seq {
                if record.hash != head_hash {
                    return Err(damaged(format!("holds a record {} that differs from the log's", record.seq)));
                }
                continue;
            }
            if record.seq != head_seq + 1 || record.prev != head_hash {
                return Err(damaged(format!(
                    "continues from record {}, but the log ends at record {head_seq}: records are missing from the log",
                    record.seq
                )));
            }
            match restored.last_mut() {
                Some((date, lines)) if *date == frame.date => lines.extend_from_slice(line),
                _ => restored.push((frame.date, line.to_vec())),
            }
            count += 1;
            last = Some(record);
        }
    }
    for (date, lines) in &restored {
        let file_path = audit_dir.join(log_file_name(*date));
        let mut file = open_for_append(audit_dir, &file_path)?;
        file.write_all(lines)
            .and_then(|()| file.sync_data())
            .with_context(|| format!("restoring records to {}", file_path.display()))?;
    }
    if count > 0 {
        log_line!(
            "aileron: restored {count} audit record(s) from {} to the log files, which had lost them (the machine \
             stopped before they were written back)",
            path.display()
        );
    }
    Ok(last)
}

/// Makes the newest daily files durable: at open, before the journal is written over, what a
/// process that was killed left in the page cache must reach the disk.
pub(super) fn sync_newest_files(audit_dir: &Path) -> anyhow::Result<()> {
    let files = log_files(audit_dir).with_context(|| format!("listing {}", audit_dir.display()))?;
    // A day roll syncs the older file before the newer one is created; two cover a kill between.
    for (_, path) in files.iter().rev().take(2) {
        File::open(path).and_then(|file| file.sync_data()).with_context(|| format!("syncing {}", path.display()))?;
    }
    Ok(())
}

/// The last seq of the records the journal holds, if it holds any. Read before the log files by
/// `verify`: every record in the journal then is in the daily files read after it.
pub(super) fn last_seq(audit_dir: &Path) -> Option<u64> {
    let bytes = fs::read(audit_dir.join(JOURNAL_FILE)).ok()?;
    frames(&bytes).last().map(|frame| frame.last_seq)
}

/// The seqs the journal holds after `last_seq` (first, last), if any: what [`replay`] would
/// restore. For `verify`, which reads the files without changing them.
pub(super) fn pending_after(audit_dir: &Path, last_seq: u64) -> Option<(u64, u64)> {
    let bytes = fs::read(audit_dir.join(JOURNAL_FILE)).ok()?;
    let frames = frames(&bytes);
    let first = frames.iter().find(|frame| frame.last_seq > last_seq)?.first_seq.max(last_seq + 1);
    Some((first, frames.last()?.last_seq))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 28).unwrap()
    }

    fn frame_bytes(first: u64, last: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_frame(&mut out, day(), first, last, payload);
        out
    }

    #[test]
    fn frames_are_read_back_until_a_torn_or_stale_one() {
        let mut bytes = frame_bytes(1, 2, b"a\nb\n");
        bytes.extend(frame_bytes(3, 3, b"c\n"));
        let valid = bytes.len();
        // A frame a wrap left behind: valid on its own, but its seqs do not continue.
        bytes.extend(frame_bytes(1, 1, b"old\n"));
        let read = frames(&bytes);
        assert_eq!(read.len(), 2);
        assert_eq!((read[0].first_seq, read[0].last_seq, read[0].payload, read[0].date), (1, 2, &b"a\nb\n"[..], day()));
        assert_eq!((read[1].first_seq, read[1].payload), (3, &b"c\n"[..]));
        // Torn: the second frame's last byte never reached the disk.
        let mut torn = bytes[..valid].to_vec();
        *torn.last_mut().unwrap() = 0;
        assert_eq!(frames(&torn).len(), 1);
        // Cut short inside the payload, or inside the header.
        assert_eq!(frames(&bytes[..valid - 1]).len(), 1);
        assert_eq!(frames(&bytes[..HEADER_BYTES - 1]).len(), 0);
        // Zeros (a new journal) hold no frame.
        assert!(frames(&vec![0; 4096]).is_empty());
        // A changed seq in a header breaks its checksum; so does a changed padding byte.
        let mut changed = bytes.clone();
        changed[8] ^= 1;
        assert!(frames(&changed).is_empty());
        let mut padded = bytes.clone();
        padded[HEADER_BYTES - 1] = 1;
        assert!(frames(&padded).is_empty());
    }

    /// A frame as daemons before the CRC-32 wrote it: the same fields, then their and the
    /// payload's SHA-256.
    fn v1_frame_bytes(first: u64, last: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = frame_bytes(first, last, payload)[..32].to_vec();
        out[..8].copy_from_slice(&MAGIC_V1);
        let digest = Sha256::new().chain_update(&out).chain_update(payload).finalize();
        out.extend_from_slice(&digest);
        out.extend_from_slice(payload);
        out
    }

    /// A journal an older daemon left (an upgrade after a power cut) is read; after the first
    /// batch of the new daemon overwrote its start, what it left behind is stale as before.
    #[test]
    fn frames_of_an_older_daemon_are_read_back() {
        let mut old = v1_frame_bytes(1, 2, b"a\nb\n");
        old.extend(v1_frame_bytes(3, 3, b"c\n"));
        let read = frames(&old);
        assert_eq!(
            read.iter().map(|f| (f.first_seq, f.last_seq, f.payload)).collect::<Vec<_>>(),
            vec![(1, 2, &b"a\nb\n"[..]), (3, 3, &b"c\n"[..])]
        );
        let mut torn = old.clone();
        *torn.last_mut().unwrap() ^= 1;
        assert_eq!(frames(&torn).len(), 1);
        // The new daemon's frames from offset 0, then the old ones' remains: a v1 frame that
        // continues the seqs is read, one that does not ends them.
        let mut mixed = frame_bytes(4, 4, b"d\n");
        mixed.extend(v1_frame_bytes(5, 5, b"e\n"));
        mixed.extend(v1_frame_bytes(3, 3, b"c\n"));
        assert_eq!(frames(&mixed).iter().map(|f| f.first_seq).collect::<Vec<_>>(), vec![4, 5]);
    }

    #[test]
    fn a_full_journal_asks_for_a_checkpoint_and_a_failed_batch_is_taken_back() {
        let temp = tempfile::tempdir().unwrap();
        let mut journal = Journal::open(temp.path(), 256).unwrap();
        assert_eq!(fs::metadata(temp.path().join(JOURNAL_FILE)).unwrap().len(), 256);
        assert!(journal.fits(256 - HEADER_BYTES) && !journal.fits(256 - HEADER_BYTES + 1));
        journal.begin_batch();
        journal.commit(day(), 1, 1, &[b'x'; 100]).unwrap();
        assert!(journal.fits(256 - 2 * HEADER_BYTES - 100));
        assert!(!journal.fits(256 - 2 * HEADER_BYTES - 99));
        journal.checkpointed();
        journal.begin_batch();
        journal.commit(day(), 2, 2, b"y\n").unwrap();
        // The file keeps its size: frames overwrite it in place.
        let read = || fs::read(temp.path().join(JOURNAL_FILE)).unwrap();
        assert_eq!(read().len(), 256);
        assert_eq!(frames(&read()).iter().map(|f| f.first_seq).collect::<Vec<_>>(), vec![2]);
        // A failed batch: its frame no longer counts, and the next batch must checkpoint.
        journal.begin_batch();
        journal.commit(day(), 3, 3, b"z\n").unwrap();
        assert_eq!(frames(&read()).len(), 2);
        journal.abandon_batch();
        assert_eq!(frames(&read()).iter().map(|f| f.first_seq).collect::<Vec<_>>(), vec![2]);
        assert!(!journal.fits(1));
        journal.checkpointed();
        assert!(journal.fits(1));
        // A journal of another size (changed by hand, or an older capacity) is written anew.
        drop(journal);
        Journal::open(temp.path(), 512).unwrap();
        assert!(read().len() == 512 && read().iter().all(|b| *b == 0));
        // A link in its place is refused, and what it points to is left as it was.
        let target = temp.path().join("elsewhere");
        fs::write(&target, b"not the journal").unwrap();
        fs::remove_file(temp.path().join(JOURNAL_FILE)).unwrap();
        std::os::unix::fs::symlink(&target, temp.path().join(JOURNAL_FILE)).unwrap();
        let refused = Journal::open(temp.path(), 512).err().expect("a link is not opened");
        assert!(refused.to_string().contains(JOURNAL_FILE), "{refused}");
        assert_eq!(fs::read(&target).unwrap(), b"not the journal");
    }

    use std::sync::Arc;

    use aileron_core::vocabulary::EventType;

    use super::super::tests::{TestClock, event};
    use super::super::{AuditConfig, AuditLog, verify};

    /// The audit directory of a live log as the disk holds it after the machine stopped: the files
    /// as they are now (the log stays open, so nothing is synced at shutdown), then the daily files
    /// cut back as `cut` says (what writeback had not reached).
    fn stopped_machine(audit_dir: &Path, into: &Path, cut: impl Fn(&str, &[u8]) -> Vec<u8>) {
        fs::create_dir_all(into).unwrap();
        for entry in fs::read_dir(audit_dir).unwrap() {
            let entry = entry.unwrap();
            // The Merkle tree and checkpoints are left behind: the next open rebuilds the tree
            // from the log.
            if entry.file_type().unwrap().is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let bytes = fs::read(entry.path()).unwrap();
            let bytes = if name.ends_with(".jsonl") { cut(&name, &bytes) } else { bytes };
            fs::write(into.join(&name), bytes).unwrap();
        }
    }

    fn open_at(parent: &Path, clock: &Arc<TestClock>, journal_bytes: u64) -> anyhow::Result<AuditLog> {
        AuditLog::open_with_journal(
            AuditConfig { dir: Some(parent.to_path_buf()), witness: None },
            clock.clone(),
            journal_bytes,
        )
    }

    /// A log under `<temp>/live` with a journal of `journal_bytes`, its clock at `at`.
    fn live_log(temp: &Path, at: &str, journal_bytes: u64) -> (Arc<TestClock>, AuditLog) {
        let clock = TestClock::at(at);
        let log = open_at(&temp.join("live"), &clock, journal_bytes).unwrap();
        (clock, log)
    }

    /// Every acknowledged record survives the machine stopping with none of the daily files'
    /// last writes on the disk (a torn line, a day's file empty), across a day roll: the next
    /// start restores them from the journal, byte for byte, and the chain verifies.
    #[tokio::test]
    async fn acknowledged_records_the_daily_files_lost_are_restored() {
        let temp = tempfile::tempdir().unwrap();
        let (clock, log) = live_log(temp.path(), "2026-11-22T23:59:59.000Z", JOURNAL_BYTES);
        for i in 0..30 {
            if i == 20 {
                clock.set("2026-11-23T00:00:01.000Z");
            }
            log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap();
        }
        log.flush().await;
        let live_dir = temp.path().join("live/audit");
        let read = |dir: &Path, day: &str| fs::read_to_string(dir.join(format!("audit-{day}.jsonl"))).unwrap();
        let (first_day, second_day) = (read(&live_dir, "2026-11-22"), read(&live_dir, "2026-11-23"));
        assert_eq!((first_day.lines().count(), second_day.lines().count()), (20, 10));
        // The first day's file was synced at the roll, so it is whole; the second lost its
        // records after the third, the last one torn halfway.
        let crashed = temp.path().join("crashed");
        stopped_machine(&live_dir, &crashed.join("audit"), |name, bytes| {
            if name.contains("2026-11-23") {
                let third = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(2).unwrap().0 + 1;
                bytes[..third + 40].to_vec()
            } else {
                bytes.to_vec()
            }
        });
        assert!(verify(&crashed).is_err(), "the stopped machine's log is cut short");
        let reopened = open_at(&crashed, &clock, JOURNAL_BYTES).unwrap();
        assert_eq!(read(&crashed.join("audit"), "2026-11-22"), first_day);
        assert_eq!(read(&crashed.join("audit"), "2026-11-23"), second_day);
        assert_eq!(reopened.verify().unwrap().records, 30);
        // The torn bytes were set aside, and the chain goes on.
        assert!(
            fs::read_dir(crashed.join("audit")).unwrap().any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".torn-"))
        );
        assert_eq!(reopened.append(event(EventType::ActionExecuted, &[])).await.unwrap().seq, 31);

        // The same machine, the second day's file empty (created, none of its data written back).
        let emptied = temp.path().join("emptied");
        stopped_machine(&live_dir, &emptied.join("audit"), |name, bytes| {
            if name.contains("2026-11-23") { Vec::new() } else { bytes.to_vec() }
        });
        let reopened = open_at(&emptied, &clock, JOURNAL_BYTES).unwrap();
        assert_eq!(read(&emptied.join("audit"), "2026-11-23"), second_day);
        assert_eq!(reopened.verify().unwrap().records, 30);
        drop(log);
    }

    /// A journal that wraps many times: what it holds after the last checkpoint is restored; a
    /// record lost from before it (which the checkpoint synced) cannot be, and the start is refused.
    #[tokio::test]
    async fn a_wrapping_journal_checkpoints_the_daily_file() {
        let temp = tempfile::tempdir().unwrap();
        let (clock, log) = live_log(temp.path(), "2026-11-22T10:00:00.000Z", 2048);
        let live_dir = temp.path().join("live/audit");
        // At least 100 records, and on until the last one went through the journal (a batch that
        // checkpoints writes no frame: the journal then holds only records the file has synced).
        let mut seq = 0;
        let (first, journal) = loop {
            seq = log.append(event(EventType::ActionExecuted, &[("n", &seq.to_string())])).await.unwrap().seq;
            log.flush().await;
            let journal = fs::read(live_dir.join(JOURNAL_FILE)).unwrap();
            let held = frames(&journal);
            if seq >= 100 && held.last().unwrap().last_seq == seq {
                break (held.first().unwrap().first_seq, journal);
            }
        };
        assert_eq!(journal.len(), 2048, "the journal never grows");
        assert!(first > 50, "the journal holds the records since its last checkpoint: {first}..{seq}");
        let whole = fs::read_to_string(live_dir.join("audit-2026-11-22.jsonl")).unwrap();
        // The file cut back to the last checkpoint: everything after it comes back.
        let at_checkpoint = |keep: u64| {
            move |_: &str, bytes: &[u8]| {
                let end = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(keep as usize - 1).unwrap().0 + 1;
                bytes[..end].to_vec()
            }
        };
        let crashed = temp.path().join("crashed");
        stopped_machine(&live_dir, &crashed.join("audit"), at_checkpoint(first - 1));
        drop(open_at(&crashed, &clock, 2048).unwrap());
        assert_eq!(fs::read_to_string(crashed.join("audit/audit-2026-11-22.jsonl")).unwrap(), whole);
        assert_eq!(verify(&crashed).unwrap().records, seq);
        // One record more lost than the checkpoint allows: a gap the journal cannot fill.
        let gap = temp.path().join("gap");
        stopped_machine(&live_dir, &gap.join("audit"), at_checkpoint(first - 2));
        let error = format!("{:#}", open_at(&gap, &clock, 2048).err().expect("a gap refuses the start"));
        assert!(error.contains("records are missing from the log") && error.contains("hint:"), "{error}");
        drop(log);
    }

    /// A clean shutdown syncs the daily file and keeps the journal's frames (a second copy of the
    /// newest records, for `verify` and the next start): the next start appends nothing twice.
    #[tokio::test]
    async fn a_clean_shutdown_keeps_the_journal_and_the_next_start_replays_nothing_twice() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_at(temp.path(), &clock, JOURNAL_BYTES).unwrap();
        for _ in 0..5 {
            log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
        }
        log.flush().await;
        let journal = temp.path().join("audit").join(JOURNAL_FILE);
        assert_eq!(frames(&fs::read(&journal).unwrap()).last().unwrap().last_seq, 5);
        drop(log);
        assert_eq!(last_seq(&temp.path().join("audit")), Some(5), "the frames stay");
        let reopened = open_at(temp.path(), &clock, JOURNAL_BYTES).unwrap();
        assert_eq!(reopened.verify().unwrap().records, 5);
        assert_eq!(reopened.append(event(EventType::ActionExecuted, &[])).await.unwrap().seq, 6);
        drop(reopened);
        let day = fs::read_to_string(temp.path().join("audit/audit-2026-11-22.jsonl")).unwrap();
        assert_eq!(day.lines().count(), 6, "{day}");
    }

    /// A record changed in the journal is not appended to the log: the start is refused.
    #[tokio::test]
    async fn a_changed_journal_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let (clock, log) = live_log(temp.path(), "2026-11-22T10:00:00.000Z", JOURNAL_BYTES);
        for i in 0..5 {
            log.append(event(EventType::ActionExecuted, &[("n", &format!("m{i}"))])).await.unwrap();
        }
        log.flush().await;
        let crashed = temp.path().join("crashed");
        stopped_machine(&temp.path().join("live/audit"), &crashed.join("audit"), |_, _| Vec::new());
        // Rewritten with a matching frame digest (anyone who can write the file can do that), but
        // the record's own hash no longer matches.
        let path = crashed.join("audit").join(JOURNAL_FILE);
        let bytes = fs::read(&path).unwrap();
        let mut rewritten = Vec::new();
        let mut frame = Vec::new();
        for f in frames(&bytes) {
            let payload = String::from_utf8_lossy(f.payload).replace("\"m3\"", "\"x3\"");
            encode_frame(&mut frame, f.date, f.first_seq, f.last_seq, payload.as_bytes());
            rewritten.extend_from_slice(&frame);
        }
        rewritten.resize(bytes.len(), 0);
        fs::write(&path, rewritten).unwrap();
        let error = format!("{:#}", open_at(&crashed, &clock, JOURNAL_BYTES).err().expect("refused"));
        assert!(error.contains("holds record 4, which") && error.contains("hint:"), "{error}");
        drop(log);
    }
}
