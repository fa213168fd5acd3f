//! Recovery at open: finding the chain head on disk, setting a torn tail aside, and the head
//! anchored outside the log files that makes a log cut short detectable.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use aileron_core::audit::AuditRecord;
use anyhow::Context;
use chrono::Utc;
use serde_json::Value;

use super::ChainHead;
use super::daily_file::{file_name, log_files};
use crate::platform::home::sync_dir;

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
pub(super) const HEAD_RECORD_BYTES: usize = 160;

/// The anchored head, if the file exists and parses. It is written without its own fsync (after
/// the log's): after a crash it may lag behind the log, never run ahead of it. A reader racing a
/// live writer must read it before the log, so that the log it reads holds at least this head.
pub(super) fn read_anchored_head(audit_dir: &Path) -> Option<(u64, String)> {
    read_anchor(audit_dir).into_head()
}

/// What [`HEAD_FILE`] holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Anchor {
    Head(u64, String),
    /// No file (never written, or removed).
    Missing,
    /// A file that does not hold a head (emptied, overwritten, unreadable).
    Unreadable,
}

impl Anchor {
    /// The anchored `(seq, hash)`, if the file holds one.
    pub(super) fn into_head(self) -> Option<(u64, String)> {
        match self {
            Anchor::Head(seq, hash) => Some((seq, hash)),
            Anchor::Missing | Anchor::Unreadable => None,
        }
    }

    /// How a verification reports this anchor for a log of `records` records: an absent or
    /// damaged anchor matters only once there is something to anchor.
    pub(super) fn state(&self, records: u64) -> aileron_core::audit::HeadAnchor {
        use aileron_core::audit::HeadAnchor;
        match self {
            Anchor::Missing if records > 0 => HeadAnchor::Missing,
            Anchor::Unreadable if records > 0 => HeadAnchor::Unreadable,
            _ => HeadAnchor::Ok,
        }
    }
}

pub(super) fn read_anchor(audit_dir: &Path) -> Anchor {
    let bytes = match fs::read(audit_dir.join(HEAD_FILE)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Anchor::Missing,
        Err(_) => return Anchor::Unreadable,
    };
    let head = || {
        let value: Value = serde_json::from_slice(String::from_utf8_lossy(&bytes).trim().as_bytes()).ok()?;
        Some(Anchor::Head(value["seq"].as_u64()?, value["hash"].as_str()?.to_string()))
    };
    head().unwrap_or(Anchor::Unreadable)
}

/// A log whose last record is before the anchored head lost records from its end.
pub(super) fn check_anchored_head(audit_dir: &Path, last_seq: u64, last_hash: &str) -> Result<(), String> {
    check_against_anchor(read_anchored_head(audit_dir), last_seq, last_hash)
}

/// [`check_anchored_head`] against an anchor read earlier (before the log).
pub(super) fn check_against_anchor(
    anchor: Option<(u64, String)>,
    last_seq: u64,
    last_hash: &str,
) -> Result<(), String> {
    match anchor {
        Some((seq, _)) if seq > last_seq => Err(format!(
            "the log ends at record {last_seq}, but record {seq} was written (records were removed from the end)"
        )),
        Some((seq, hash)) if seq == last_seq && hash != last_hash => {
            Err(format!("record {seq} is not the one that was written (its hash differs from the anchored head)"))
        }
        _ => Ok(()),
    }
}

/// Finds the chain head on disk, repairing a torn tail of the newest non-empty file, and checks
/// it against the anchored head.
pub(super) fn recover(audit_dir: &Path) -> anyhow::Result<ChainHead> {
    let last = recover_tail(audit_dir)?;
    checked_head(audit_dir, last)
}

/// The last complete record of the log, after setting aside a torn tail of the newest non-empty
/// file.
pub(super) fn recover_tail(audit_dir: &Path) -> anyhow::Result<Option<AuditRecord>> {
    let files = log_files(audit_dir).with_context(|| format!("listing {}", audit_dir.display()))?;
    for (_, path) in files.iter().rev() {
        let reading = || format!("reading {}", path.display());
        let (start, bytes) = read_end(path).with_context(reading)?;
        let tail = split_tail(&bytes).map_err(|line_in_end| {
            // The line's number in the whole file, for the message (a damaged log is rare).
            let before = fs::read(path).map_or(0, |whole| whole[..start].iter().filter(|b| **b == b'\n').count());
            anyhow::anyhow!(
                "{} is damaged at line {}: a complete record is not valid JSON (changed after it was \
                 written)\nhint: run `aileron audit verify`, keep a copy of the file, and move it out of the audit \
                 directory to start a new chain",
                path.display(),
                before + line_in_end
            )
        })?;
        if tail.keep < bytes.len() {
            set_aside_torn_tail(path, &bytes, tail.keep, start + tail.keep)?;
        }
        if tail.last.is_some() {
            return Ok(tail.last);
        }
    }
    Ok(None)
}

/// The head after `last`, the log's last record, once checked against the anchored head: a log
/// that ends before it (or is empty though records were written) was cut short.
pub(super) fn checked_head(audit_dir: &Path, last: Option<AuditRecord>) -> anyhow::Result<ChainHead> {
    if let Some(record) = last {
        check_anchored_head(audit_dir, record.seq, &record.hash).map_err(|problem| {
            anyhow::anyhow!(
                "the audit log in {} was cut short: {problem}\nhint: run `aileron audit verify`, keep a copy \
                 of the directory for investigation; the daemon will not extend a truncated chain",
                audit_dir.display()
            )
        })?;
        return Ok(ChainHead::after(&record));
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

/// How much of a log file's end [`read_end`] reads at a time.
const END_CHUNK: u64 = 64 * 1024;

/// The end of the log file at `path`, from where its last complete line starts (or the file's
/// start) to its end, and the offset it starts at: all [`split_tail`] needs, read backwards in
/// chunks — a day of runs is tens of megabytes, and the daemon's start waits for this.
fn read_end(path: &Path) -> io::Result<(usize, Vec<u8>)> {
    let file = fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut start = len;
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let step = start.min(END_CHUNK);
        start -= step;
        let mut chunk = vec![0; step as usize];
        file.read_exact_at(&mut chunk, start)?;
        chunk.extend_from_slice(&bytes);
        bytes = chunk;
        // Enough once the last newline has another newline (or the file's start) before it.
        let newlines = bytes.iter().rev().filter(|b| **b == b'\n').take(2).count();
        if start == 0 || newlines == 2 {
            break;
        }
    }
    Ok((usize::try_from(start).map_err(io::Error::other)?, bytes))
}

/// Moves the bytes of `end` (read from the file at `path`) after `keep` aside to a sidecar file
/// and truncates the file at `file_keep` (the same place, counted from the file's start).
fn set_aside_torn_tail(path: &Path, end: &[u8], keep: usize, file_keep: usize) -> anyhow::Result<()> {
    let torn = &end[keep..];
    let sidecar = path.with_file_name(format!("{}.torn-{}", file_name(path), Utc::now().timestamp_millis()));
    write_new_file(&sidecar, torn).with_context(|| format!("saving the torn tail to {}", sidecar.display()))?;
    let file = OpenOptions::new().write(true).open(path).with_context(|| format!("opening {}", path.display()))?;
    file.set_len(file_keep as u64).with_context(|| format!("truncating {}", path.display()))?;
    file.sync_all().with_context(|| format!("syncing {}", path.display()))?;
    log_line!(
        "aileron: warning: {} ended with {} bytes of an unfinished record (a crash during a write); they were \
         moved to {} (a record that was acknowledged is restored from the journal)",
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use aileron_core::audit::{Actor, ActorType, GENESIS_PREV, UnsealedRecord, seal};
    use aileron_core::vocabulary::EventType;
    use serde_json::Map;

    use super::super::tests::{TestClock, event, file_names, open_disk};
    use super::super::{AuditConfig, AuditFilter, AuditLog, VerifyError, query, verify};
    use super::*;

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
    async fn torn_tail_is_set_aside_at_open_and_the_chain_continues() {
        // (bytes appended after RECORDS good records, which span several of `read_end`'s chunks)
        const RECORDS: u64 = 500;
        let long = vec![b'x'; 3 * END_CHUNK as usize / 2];
        let cases: [(&str, &[u8]); 3] = [
            ("half a line", b"{\"audit_id\":\"audit-x\",\"ev"),
            ("zeros from a crash", b"\0\0\0\0\0\0\0\0"),
            ("a torn line longer than a chunk", &long),
        ];
        for (name, torn) in cases {
            let temp = tempfile::tempdir().unwrap();
            let clock = TestClock::at("2026-11-22T10:00:00.000Z");
            let log = open_disk(temp.path(), &clock);
            for _ in 0..RECORDS {
                log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
            }
            drop(log);
            let path = temp.path().join("audit/audit-2026-11-22.jsonl");
            let good = fs::read(&path).unwrap();
            fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(torn).unwrap();
            // Before repair, readers and the verifier already tolerate it.
            let report = verify(temp.path()).unwrap();
            assert_eq!(
                (report.records, report.torn_tail_skipped.map(|p| p.line)),
                (RECORDS, Some(RECORDS as usize + 1)),
                "{name}"
            );
            assert_eq!(query(temp.path(), &AuditFilter::default()).unwrap().len(), RECORDS as usize, "{name}");
            assert!(good.len() > 2 * END_CHUNK as usize, "{name}: the log spans several chunks");

            let log = open_disk(temp.path(), &clock);
            assert_eq!(fs::read(&path).unwrap(), good, "{name}: torn bytes truncated");
            let sidecars: Vec<String> = file_names(&temp.path().join("audit"))
                .into_iter()
                .filter(|n| n.starts_with("audit-2026-11-22.jsonl.torn-"))
                .collect();
            assert_eq!(sidecars.len(), 1, "{name}");
            assert_eq!(fs::read(temp.path().join("audit").join(&sidecars[0])).unwrap(), torn, "{name}");
            assert_eq!(log.append(event(EventType::ActionExecuted, &[])).await.unwrap().seq, RECORDS + 1, "{name}");
            let report = log.verify().unwrap();
            assert_eq!((report.records, report.torn_tail_skipped), (RECORDS + 1, None), "{name}");
        }
    }

    /// Replacing the last complete record with garbage, or removing records from the end, is
    /// detected by `verify` and refused at the next start (SPEC §10) — unless the journal still
    /// holds the removed records, which the next start appends again.
    #[tokio::test]
    async fn damaging_or_cutting_the_end_of_the_log_is_detected() {
        for damage in ["garbage last record", "last record removed", "every record removed"] {
            let temp = tempfile::tempdir().unwrap();
            let clock = TestClock::at("2026-11-22T10:00:00.000Z");
            let log = open_disk(temp.path(), &clock);
            // Enough records that the end of the file is read in several chunks.
            for _ in 0..500 {
                log.append(event(EventType::ActionExecuted, &[])).await.unwrap();
            }
            log.flush().await;
            // The journal as the machine stopping now would leave it (a clean shutdown clears it).
            let journal = temp.path().join("audit").join(super::super::JOURNAL_FILE);
            let kept = fs::read(&journal).unwrap();
            drop(log);
            let path = temp.path().join("audit/audit-2026-11-22.jsonl");
            let text = fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let damaged = match damage {
                "garbage last record" => format!("{}\n{{\"audit_id\": \"not a record\"}}\n", lines[..499].join("\n")),
                "last record removed" => format!("{}\n", lines[..499].join("\n")),
                _ => String::new(),
            };
            fs::write(&path, damaged).unwrap();
            let verified = verify(temp.path());
            assert!(verified.is_err(), "{damage}: verify reports it: {verified:?}");
            fs::remove_file(&journal).unwrap();
            let open = || {
                AuditLog::open_with_clock(
                    AuditConfig { dir: Some(temp.path().to_path_buf()), witness: None },
                    clock.clone(),
                )
            };
            let error = open().err().unwrap_or_else(|| panic!("{damage}: the daemon does not extend a damaged chain"));
            assert!(format!("{error:#}").contains("hint:"), "{damage}: {error:#}");
            if damage == "garbage last record" {
                assert!(text.len() > 2 * END_CHUNK as usize, "the log spans several chunks");
                assert!(format!("{error:#}").contains("damaged at line 500:"), "{damage}: {error:#}");
                continue;
            }
            assert!(
                format!("{error:#}").contains("500 records were written")
                    || format!("{error:#}").contains("record 500 was written"),
                "{damage}: {error:#}"
            );
            // With the journal back, verify says where the records are and a start restores them.
            fs::write(&journal, kept).unwrap();
            let Err(VerifyError::Truncated { problem }) = verify(temp.path()) else {
                panic!("{damage}: still cut short")
            };
            assert!(problem.contains("to 500 are in the audit journal"), "{damage}: {problem}");
            drop(open().unwrap());
            assert_eq!(fs::read_to_string(&path).unwrap(), text, "{damage}: the log is whole again");
            assert_eq!(verify(temp.path()).unwrap().records, 500);
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

        let log = AuditLog::open(AuditConfig { dir: Some(temp.path().to_path_buf()), witness: None }).unwrap();
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
            let log = Arc::new(AuditLog::open(AuditConfig { dir: Some(dir), witness: None }).unwrap());
            let (acks, mut acked) = tokio::sync::mpsc::unbounded_channel();
            for task in 0..8 {
                let (log, acks) = (log.clone(), acks.clone());
                tokio::spawn(async move {
                    let filler = "x".repeat(16 * 1024);
                    loop {
                        let record = log.append(event(
                            EventType::ActionExecuted,
                            &[("task", &task.to_string()), ("filler", &filler)],
                        ));
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
}
