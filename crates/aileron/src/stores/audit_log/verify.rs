//! Verifying the log on disk (`aileron audit verify`, `GET /v1/audit/verify`).
//!
//! The daemon verifies again each time the console's activity page is shown, and the log only
//! grows, so the daemon's verification remembers what it proved ([`VerifiedPrefix`]): which
//! files, how many bytes of each (whole lines), the SHA-256 of those bytes, and the chain's state
//! after them. The next verification reads and hashes those bytes again — SHA-256 runs about a
//! hundred times faster than parsing and canonicalising each record — and resumes the chain from
//! that state only if every one of them is unchanged. A changed, truncated, removed or inserted
//! file, and it verifies the whole chain again from the first record, which finds the break and
//! reports its file and line as before. What is remembered lives in the daemon's memory only.

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use aileron_core::audit::{
    BreakReason, ChainBreak, ChainVerifier, CheckedLine, LogLine, VerifyReport, check_line, log_lines,
};
use aileron_core::sha256::Sha256;
use chrono::NaiveDate;

use super::VerifyError;
use super::daily_file::{file_name, log_files};
use super::journal::pending_after;
use super::recovery::{check_against_anchor, read_anchor};

/// What a successful verification proved about the log's first bytes.
#[derive(Debug, Clone)]
pub(super) struct VerifiedPrefix {
    /// In the log's order; every one but the last was proved whole.
    files: Vec<VerifiedFile>,
    /// The chain's state after the last of those bytes.
    verifier: ChainVerifier,
}

#[derive(Debug, Clone)]
struct VerifiedFile {
    name: String,
    /// Bytes proved from the file's start: whole lines, each with its newline.
    len: usize,
    /// Lines in them.
    lines: usize,
    digest: [u8; 32],
}

impl VerifiedPrefix {
    /// The whole lines proved, in all files.
    fn lines(&self) -> u64 {
        self.files.iter().map(|file| file.lines as u64).sum()
    }
}

/// A verification's report and how many lines it parsed (the others it resumed over).
#[derive(Debug)]
pub(super) struct Verified {
    pub report: VerifyReport,
    /// The log's first lines this verification found byte for byte as an earlier one proved them
    /// (0 when it did not resume): whatever was computed from those lines then still holds.
    pub unchanged: u64,
    /// The log's first lines this verification proved (what the next one can find unchanged).
    pub proved: u64,
    #[cfg_attr(not(test), allow(dead_code, reason = "what the tests check that a verification resumed"))]
    pub parsed: u64,
}

/// Verifies the chain under `audit_dir`, every file in date order. With `remembered`, it resumes
/// after what an earlier verification proved when those bytes are unchanged, and afterwards
/// remembers what this one proved.
pub(super) fn verify_dir(
    audit_dir: &Path,
    remembered: Option<&Mutex<Option<VerifiedPrefix>>>,
) -> Result<Verified, VerifyError> {
    let read_error = |path: &Path, source| VerifyError::Read { path: path.display().to_string(), source };
    // The anchor first: a daemon appending meanwhile anchors a batch only after it is durable in
    // the log, so the log read next holds at least the anchored head.
    let anchor = read_anchor(audit_dir);
    // The journal too, for the same reason: a record it holds is in the daily file already.
    let journaled = super::journal::last_seq(audit_dir);
    let files = log_files(audit_dir).map_err(|e| read_error(audit_dir, e))?;
    let earlier = remembered.and_then(|prefix| prefix.lock().unwrap_or_else(PoisonError::into_inner).clone());
    let earlier_lines = earlier.as_ref().map_or(0, VerifiedPrefix::lines);
    let (mut pass, first, mut carried, unchanged) = match earlier.and_then(|prefix| resume(&files, prefix)) {
        Some((pass, index, rest)) => (pass, index, Some(rest), earlier_lines),
        None => (Pass::new(), 0, None, 0),
    };
    for (index, (_, path)) in files.iter().enumerate().skip(first) {
        let rest = match carried.take() {
            Some(rest) => rest,
            None => Unverified::whole(fs::read(path).map_err(|e| read_error(path, e))?),
        };
        pass.file(&file_name(path), rest, index + 1 == files.len())?;
    }
    let proved = VerifiedPrefix { files: pass.proved, verifier: pass.closed.unwrap_or_else(|| pass.verifier.clone()) };
    let mut report = pass.verifier.finish();
    // A log with records and no readable anchor verifies, with the anchor's state reported: the
    // anchor is written without an fsync of its own, so a power loss (or a version that wrote
    // none) can legitimately leave it absent, and whoever can remove it can as well write an
    // older head into it: refusing would raise false alarms without stopping that attacker.
    report.head_anchor = anchor.state(report.records);
    check_against_anchor(anchor.into_head(), report.last_seq, &report.last_hash).map_err(|problem| {
        // After the machine stopped, the log may end before the anchor while the journal holds
        // the rest: the daemon appends it when it starts.
        let problem = match pending_after(audit_dir, report.last_seq) {
            Some((first, last)) => format!(
                "{problem}; records {first} to {last} are in the audit journal, not yet in the log files (the machine \
                 stopped before they were written back): starting the daemon restores them"
            ),
            None => problem,
        };
        VerifyError::Truncated { problem }
    })?;
    // The journal holds the newest records a second time: records there but not in the log were
    // cut from it, whatever the anchor says (it may have been removed or rewritten with them).
    if journaled.is_some_and(|last| last > report.last_seq) {
        let (first, last) =
            pending_after(audit_dir, report.last_seq).unwrap_or((report.last_seq + 1, journaled.unwrap_or(0)));
        return Err(VerifyError::Truncated {
            problem: format!(
                "the log ends at record {}, but records {first} to {last} are in the audit journal (the chain-head \
                 anchor is {}); starting the daemon restores them to the log",
                report.last_seq,
                report.head_anchor.as_str()
            ),
        });
    }
    let proved_lines = proved.lines();
    if let Some(remembered) = remembered {
        *remembered.lock().unwrap_or_else(PoisonError::into_inner) = Some(proved);
    }
    Ok(Verified { report, parsed: pass.parsed, unchanged, proved: proved_lines })
}

/// How much of a proved file is read and hashed at a time.
const CHUNK: usize = 256 * 1024;

/// Where the chain resumes, if every byte `prefix` proved is still there unchanged: the pass in
/// the state after them, the index of the last proved file and that file's bytes after them.
fn resume(files: &[(NaiveDate, PathBuf)], prefix: VerifiedPrefix) -> Option<(Pass, usize, Unverified)> {
    let last = prefix.files.len().checked_sub(1)?;
    let mut buffer = vec![0; CHUNK];
    for (index, proved) in prefix.files.iter().enumerate() {
        let (_, path) = files.get(index)?;
        if file_name(path) != proved.name {
            return None;
        }
        let mut file = File::open(path).ok()?;
        let mut hashed = Sha256::new();
        let mut left = proved.len;
        while left > 0 {
            let read = file.read(&mut buffer[..left.min(CHUNK)]).ok()?;
            if read == 0 {
                return None;
            }
            hashed.update(&buffer[..read]);
            left -= read;
        }
        if hashed.clone().finalize().as_slice() != proved.digest {
            return None;
        }
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).ok()?;
        if index == last {
            let rest = Unverified { tail, base: proved.len, lines_before: proved.lines, hashed };
            let pass = Pass { verifier: prefix.verifier, parsed: 0, proved: prefix.files, closed: None };
            return Some((pass, index, rest));
        }
        // A file before the last was proved whole: the chain went on in the next one.
        if !tail.is_empty() {
            return None;
        }
    }
    None
}

/// A file's bytes still to verify: `tail`, from byte `base` (line `lines_before + 1`) on, and
/// the SHA-256 state over the `base` bytes before it.
struct Unverified {
    tail: Vec<u8>,
    base: usize,
    lines_before: usize,
    hashed: Sha256,
}

impl Unverified {
    fn whole(bytes: Vec<u8>) -> Unverified {
        Unverified { tail: bytes, base: 0, lines_before: 0, hashed: Sha256::new() }
    }
}

/// Lines checked on their own (parsed, their hash recomputed) before they are linked in order:
/// a bound on the checks held at once.
const BLOCK_LINES: usize = 16 * 1024;
/// Fewer lines than this per thread are checked on the calling thread.
const LINES_PER_THREAD: usize = 1024;

/// Checks each line on its own ([`check_line`]), on every core when there are enough of them:
/// parsing and canonicalising a record is the verification's whole cost, and each line's check
/// needs nothing from the others (linking them does, and is done in order by the caller).
fn check_all(lines: &[LogLine<'_>]) -> Vec<Result<CheckedLine, BreakReason>> {
    crate::platform::parallel::map_in_parts(lines, LINES_PER_THREAD, |part| {
        let mut scratch = Vec::new();
        part.iter().map(|line| check_line(line.text, &mut scratch)).collect()
    })
}

/// One verification's walk over the lines.
struct Pass {
    verifier: ChainVerifier,
    parsed: u64,
    /// What this pass proved so far, while `closed` is `None`.
    proved: Vec<VerifiedFile>,
    /// Set when the proof stops short of where the verifier has got to (a line without its
    /// newline, bytes that are not UTF-8): the chain's state where it stopped.
    closed: Option<ChainVerifier>,
}

impl Pass {
    fn new() -> Pass {
        Pass { verifier: ChainVerifier::new(), parsed: 0, proved: Vec::new(), closed: None }
    }

    /// Pushes the lines of `rest`, numbered after the lines above them.
    fn file(&mut self, name: &str, rest: Unverified, is_last_file: bool) -> Result<(), ChainBreak> {
        // Invalid UTF-8 can only come from damage; decoding it lossily lets the verifier report
        // the line. Such bytes are not what the verifier saw, so nothing from here on is proved.
        let text = String::from_utf8_lossy(&rest.tail);
        if self.closed.is_none() && matches!(text, Cow::Owned(_)) {
            self.closed = Some(self.verifier.clone());
        }
        let mut hashed = Some(rest.hashed);
        let (mut len, mut lines) = (0, rest.lines_before);
        let all: Vec<LogLine<'_>> = log_lines(name, &text, is_last_file)
            .map(|line| LogLine { line: line.line + rest.lines_before, ..line })
            .collect();
        let checked = all.chunks(BLOCK_LINES).flat_map(|block| block.iter().copied().zip(check_all(block)));
        for (line, checked) in checked {
            if line.has_trailing_newline {
                len += line.text.len() + 1;
                lines += 1;
            } else if self.closed.is_none() {
                // The file's last line, without its newline: a record being written, or torn.
                self.prove(name, &rest.tail[..len], rest.base, hashed.take(), lines);
                self.closed = Some(self.verifier.clone());
            }
            if line.has_trailing_newline || !line.is_last_line_of_last_file {
                self.parsed += 1;
            }
            self.verifier.push_checked(line, checked)?;
        }
        if self.closed.is_none() {
            self.prove(name, &rest.tail[..len], rest.base, hashed.take(), lines);
        }
        Ok(())
    }

    /// Records that file `name`'s first bytes verified: the `base` bytes `hashed` covers, then
    /// `verified`; `lines` lines in all.
    fn prove(&mut self, name: &str, verified: &[u8], base: usize, hashed: Option<Sha256>, lines: usize) {
        let Some(mut hashed) = hashed else { return };
        let same_file = self.proved.last().is_some_and(|last| last.name == name);
        if same_file && verified.is_empty() {
            return;
        }
        hashed.update(verified);
        let proved =
            VerifiedFile { name: name.to_string(), len: base + verified.len(), lines, digest: hashed.finalize() };
        match self.proved.last_mut() {
            Some(last) if same_file => *last = proved,
            _ => self.proved.push(proved),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use aileron_core::audit::BreakReason;
    use aileron_core::vocabulary::EventType;

    use std::sync::Arc;

    use super::super::AuditLog;
    use super::super::recovery::Anchor;
    use super::super::tests::{TestClock, event, open_disk, prepared};
    use super::*;

    /// Appends `n` records to `log`.
    async fn append(log: &AuditLog, n: usize) {
        for i in 0..n {
            log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap();
        }
        // The head is anchored just after the acknowledgements: wait for it.
        log.flush().await;
    }

    /// A log on disk in a fresh directory, its clock at 2026-11-22, and its `audit/` directory.
    fn new_log() -> (tempfile::TempDir, Arc<TestClock>, AuditLog, PathBuf) {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        let audit_dir = temp.path().join("audit");
        (temp, clock, log, audit_dir)
    }

    fn verify_remembering(
        audit_dir: &Path,
        remembered: &Mutex<Option<VerifiedPrefix>>,
    ) -> Result<Verified, VerifyError> {
        verify_dir(audit_dir, Some(remembered))
    }

    /// A second verification parses only the records appended since the first (across a new
    /// day's file too), and reports what a whole verification reports.
    #[tokio::test]
    async fn a_second_verification_parses_only_what_was_appended_since() {
        let (_temp, clock, log, audit_dir) = new_log();
        let remembered = Mutex::new(None);
        append(&log, 30).await;
        let first = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((first.report.records, first.parsed), (30, 30));

        append(&log, 5).await;
        let second = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((second.report.records, second.parsed), (35, 5));
        assert_eq!(second.report, verify_dir(&audit_dir, None).unwrap().report);

        clock.set("2026-11-23T01:00:00.000Z");
        append(&log, 4).await;
        let third = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((third.report.records, third.report.files, third.parsed), (39, 2, 4));
        assert_eq!(third.report, verify_dir(&audit_dir, None).unwrap().report);

        let unchanged = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((unchanged.report.records, unchanged.parsed), (39, 0));
    }

    /// Whatever changed in bytes an earlier verification proved, the next one verifies the
    /// whole chain again and reports the break where it is.
    #[tokio::test]
    async fn a_change_to_verified_bytes_is_found_by_the_next_verification() {
        let (_temp, clock, log, audit_dir) = new_log();
        append(&log, 10).await;
        clock.set("2026-11-23T01:00:00.000Z");
        append(&log, 10).await;
        let first_day = audit_dir.join("audit-2026-11-22.jsonl");
        let second_day = audit_dir.join("audit-2026-11-23.jsonl");
        let original = (fs::read_to_string(&first_day).unwrap(), fs::read_to_string(&second_day).unwrap());

        let broken = |remembered: &Mutex<Option<VerifiedPrefix>>| match verify_remembering(&audit_dir, remembered) {
            Err(VerifyError::Broken(brk)) => (brk.file, brk.line, brk.reason),
            other => panic!("expected a chain break, got {other:?}"),
        };
        let remembered = Mutex::new(None);
        // A value changed in the third record of the first day (still valid JSON).
        verify_remembering(&audit_dir, &remembered).unwrap();
        fs::write(&first_day, original.0.replacen("\"n\":\"2\"", "\"n\":\"7\"", 1)).unwrap();
        assert_eq!(broken(&remembered), ("audit-2026-11-22.jsonl".into(), 3, BreakReason::HashMismatch));

        // The same in the last (still growing) file, with records appended after the change.
        fs::write(&first_day, &original.0).unwrap();
        verify_remembering(&audit_dir, &remembered).unwrap();
        fs::write(&second_day, original.1.replacen("\"n\":\"4\"", "\"n\":\"9\"", 1)).unwrap();
        append(&log, 2).await;
        assert_eq!(broken(&remembered), ("audit-2026-11-23.jsonl".into(), 5, BreakReason::HashMismatch));

        // A change after the proved bytes: the resumed verification finds it, at its line.
        let appended = fs::read_to_string(&second_day).unwrap().replacen("\"n\":\"9\"", "\"n\":\"4\"", 1);
        fs::write(&second_day, &appended).unwrap();
        verify_remembering(&audit_dir, &remembered).unwrap();
        append(&log, 3).await;
        let appended = fs::read_to_string(&second_day).unwrap();
        let at = appended.rfind("\"n\":\"1\"").unwrap();
        fs::write(&second_day, format!("{}\"n\":\"8\"{}", &appended[..at], &appended[at + 7..])).unwrap();
        assert_eq!(broken(&remembered), ("audit-2026-11-23.jsonl".into(), 14, BreakReason::HashMismatch));
        fs::write(&second_day, &appended).unwrap();

        // A record added at the end of a day proved whole (here the next day's first, which
        // links to it): the chain no longer goes on in the next day's file.
        verify_remembering(&audit_dir, &remembered).unwrap();
        let next_first = appended.lines().next().unwrap();
        fs::write(&first_day, format!("{}{next_first}\n", original.0)).unwrap();
        assert_eq!(
            broken(&remembered),
            (
                "audit-2026-11-23.jsonl".into(),
                1,
                BreakReason::PrevDoesNotLink {
                    previous: Some(aileron_core::audit::LinePosition {
                        file: "audit-2026-11-22.jsonl".into(),
                        line: 11
                    })
                }
            )
        );
        fs::write(&first_day, &original.0).unwrap();

        // A day's file removed: the next day's first record no longer links.
        verify_remembering(&audit_dir, &remembered).unwrap();
        fs::remove_file(&first_day).unwrap();
        assert_eq!(
            broken(&remembered),
            ("audit-2026-11-23.jsonl".into(), 1, BreakReason::PrevDoesNotLink { previous: None })
        );

        // The last file cut short before what was proved: a truncation, not a resumed chain.
        fs::write(&first_day, &original.0).unwrap();
        verify_remembering(&audit_dir, &remembered).unwrap();
        let lines: Vec<&str> = appended.lines().collect();
        fs::write(&second_day, format!("{}\n", lines[..6].join("\n"))).unwrap();
        match verify_remembering(&audit_dir, &remembered) {
            Err(VerifyError::Truncated { .. }) => {}
            other => panic!("expected a truncation, got {other:?}"),
        }
    }

    /// A log long enough to be checked in parts on several threads verifies as the one-line-at-a-
    /// time verifier says, and of two damaged lines in different parts the first is reported.
    #[tokio::test]
    async fn lines_checked_in_parts_report_the_first_break_in_order() {
        let (_temp, _clock, log, audit_dir) = new_log();
        let records = 3 * LINES_PER_THREAD;
        let pending: Vec<_> = (0..records)
            .map(|i| log.submit(prepared(event(EventType::ActionExecuted, &[("n", &format!("m{i}"))]))))
            .collect();
        for appended in pending {
            appended.await.unwrap();
        }
        let path = audit_dir.join("audit-2026-11-22.jsonl");
        let text = fs::read_to_string(&path).unwrap();
        let one_at_a_time =
            aileron_core::audit::verify_chain(log_lines("audit-2026-11-22.jsonl", &text, true)).unwrap();
        assert_eq!(verify_dir(&audit_dir, None).unwrap().report, one_at_a_time);
        assert_eq!(one_at_a_time.records, records as u64);

        let damage = |text: &str, n: usize| text.replacen(&format!("\"n\":\"m{n}\""), &format!("\"n\":\"x{n}\""), 1);
        let line_of = |n: usize| text.lines().position(|line| line.contains(&format!("\"n\":\"m{n}\""))).unwrap() + 1;
        let (early, late) = (records / 3, records - 20);
        fs::write(&path, damage(&damage(&text, late), early)).unwrap();
        let Err(VerifyError::Broken(brk)) = verify_dir(&audit_dir, None) else { panic!("expected a chain break") };
        assert_eq!((brk.line, brk.reason), (line_of(early), BreakReason::HashMismatch));
        fs::write(&path, damage(&text, late)).unwrap();
        let Err(VerifyError::Broken(brk)) = verify_dir(&audit_dir, None) else { panic!("expected a chain break") };
        assert_eq!((brk.line, brk.reason), (line_of(late), BreakReason::HashMismatch));
    }

    /// A record being written (no newline yet) is not remembered as proved: once it is whole, the
    /// next verification parses it.
    #[tokio::test]
    async fn a_line_without_its_newline_is_verified_again_once_whole() {
        let (_temp, _clock, log, audit_dir) = new_log();
        append(&log, 3).await;
        let path = audit_dir.join("audit-2026-11-22.jsonl");
        let whole = fs::read_to_string(&path).unwrap();
        let (head, last) = whole.trim_end_matches('\n').rsplit_once('\n').unwrap();
        fs::write(&path, format!("{head}\n{}", &last[..last.len() / 2])).unwrap();
        let remembered = Mutex::new(None);
        let torn = verify_remembering(&audit_dir, &remembered);
        // The anchored head names the third record: half of it reads as records removed.
        assert!(matches!(torn, Err(VerifyError::Truncated { .. })), "{torn:?}");
        // Nothing is remembered from a failed verification; made whole, the log verifies.
        assert!(remembered.lock().unwrap().is_none());
        fs::write(&path, format!("{head}\n{}", &last[..last.len() / 2])).unwrap();
        // As after a crash of a version without a journal: no anchor, no second copy.
        fs::remove_file(audit_dir.join(super::super::HEAD_FILE)).unwrap();
        fs::write(audit_dir.join(super::super::journal::JOURNAL_FILE), vec![0u8; 4096]).unwrap();
        let torn = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((torn.report.records, torn.parsed), (2, 2));
        assert!(torn.report.torn_tail_skipped.is_some());
        fs::write(&path, &whole).unwrap();
        let again = verify_remembering(&audit_dir, &remembered).unwrap();
        assert_eq!((again.report.records, again.parsed, again.report.torn_tail_skipped), (3, 1, None));
    }

    /// The attack: the chain-head anchor defeated (overwritten with garbage, emptied, removed) and
    /// the last five records cut from the day file while the daemon was stopped. The journal
    /// still holds them (the re-attack's L3: a clean shutdown used to clear it, and verification
    /// said `ok`): verification reports the cut, and the next start restores the records before
    /// it anchors the head again.
    #[tokio::test]
    async fn records_cut_with_the_anchor_defeated_are_reported_and_restored_from_the_journal() {
        use aileron_core::audit::HeadAnchor;
        type Defeat = fn(&Path);
        let cases: [(&str, Defeat, HeadAnchor); 3] = [
            ("garbage", |path| fs::write(path, "garbage ".repeat(125)).unwrap(), HeadAnchor::Unreadable),
            ("emptied", |path| fs::write(path, "").unwrap(), HeadAnchor::Unreadable),
            ("removed", |path| fs::remove_file(path).unwrap(), HeadAnchor::Missing),
        ];
        for (name, defeat, expected) in cases {
            let (temp, clock, log, audit_dir) = new_log();
            append(&log, 20).await;
            drop(log);
            let day = audit_dir.join("audit-2026-11-22.jsonl");
            let whole = fs::read_to_string(&day).unwrap();
            let cut = |lines: usize| {
                let kept: Vec<&str> = whole.lines().take(lines).collect();
                fs::write(&day, format!("{}\n", kept.join("\n"))).unwrap();
            };
            defeat(&audit_dir.join(super::super::HEAD_FILE));
            cut(15);
            let Err(VerifyError::Truncated { problem }) = verify_dir(&audit_dir, None) else {
                panic!("{name}: the cut is reported")
            };
            assert!(
                problem.contains("records 16 to 20 are in the audit journal") && problem.contains(expected.as_str()),
                "{name}: {problem}"
            );

            // The next start restores them, then anchors the head.
            let log = open_disk(temp.path(), &clock);
            assert!(matches!(read_anchor(&audit_dir), Anchor::Head(20, _)), "{name}: {:?}", read_anchor(&audit_dir));
            assert_eq!(fs::read_to_string(&day).unwrap(), whole, "{name}: restored byte for byte");
            drop(log);
            let report = verify_dir(&audit_dir, None).unwrap().report;
            assert_eq!((report.records, report.head_anchor, report.warning()), (20, HeadAnchor::Ok, None), "{name}");
        }
    }

    /// What the journal cannot cover: the anchor defeated, records cut and the journal emptied
    /// too. Verification reports the anchor's state and a warning (the verifiable-receipts work,
    /// SPEC §17, detects it with a witness); the next start anchors the head again at once, so
    /// removing records afterwards is detected again.
    #[tokio::test]
    async fn with_the_journal_emptied_too_a_defeated_anchor_is_reported_and_anchored_again() {
        use aileron_core::audit::HeadAnchor;
        let (temp, clock, log, audit_dir) = new_log();
        append(&log, 20).await;
        drop(log);
        let day = audit_dir.join("audit-2026-11-22.jsonl");
        let whole = fs::read_to_string(&day).unwrap();
        let kept: Vec<&str> = whole.lines().take(15).collect();
        fs::write(&day, format!("{}\n", kept.join("\n"))).unwrap();
        fs::remove_file(audit_dir.join(super::super::HEAD_FILE)).unwrap();
        fs::write(audit_dir.join(super::super::journal::JOURNAL_FILE), vec![0u8; 4096]).unwrap();
        let report = verify_dir(&audit_dir, None).map(|verified| verified.report).unwrap();
        assert_eq!((report.records, report.head_anchor), (15, HeadAnchor::Missing));
        let warning = report.warning().unwrap_or_default();
        assert!(warning.contains("cannot be detected") && warning.contains("15 records"), "{warning}");
        let json = serde_json::to_value(&report).unwrap();
        assert_ne!(json["head_anchor"], "ok", "{json}");

        let log = open_disk(temp.path(), &clock);
        assert!(matches!(read_anchor(&audit_dir), Anchor::Head(15, _)), "{:?}", read_anchor(&audit_dir));
        assert_eq!(fs::metadata(audit_dir.join(super::super::HEAD_FILE)).unwrap().len(), 160);
        append(&log, 1).await;
        drop(log);
        assert!(matches!(read_anchor(&audit_dir), Anchor::Head(16, _)), "{:?}", read_anchor(&audit_dir));
        let whole = fs::read_to_string(&day).unwrap();
        let kept: Vec<&str> = whole.lines().take(11).collect();
        fs::write(&day, format!("{}\n", kept.join("\n"))).unwrap();
        assert!(matches!(verify_dir(&audit_dir, None), Err(VerifyError::Truncated { .. })), "cut again, detected");
    }

    /// A log with no records needs no anchor: none is no warning.
    #[test]
    fn an_empty_log_without_an_anchor_verifies_without_a_warning() {
        let temp = tempfile::tempdir().unwrap();
        fs::create_dir(temp.path().join("audit")).unwrap();
        let report = verify_dir(&temp.path().join("audit"), None).unwrap().report;
        assert_eq!((report.records, report.warning()), (0, None));
    }
}
