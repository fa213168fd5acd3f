//! Queries: the records a filter matches, newest first, from the daily files (each read backwards,
//! most lines skipped on their bytes) or from the in-memory log.

use std::io;
use std::path::{Path, PathBuf};

use aileron_core::audit::AuditRecord;
use chrono::NaiveDate;

use super::daily_file::{CHUNK_BYTES, NewestFirstLines, first_line, log_files};
use super::filter::{Matcher, peek_seq};
use super::{AuditError, AuditFilter};

/// How far into a file [`query_dir`] looks for its first line (to skip a whole file by `before_seq`).
const FIRST_LINE_BYTES: usize = 64 * 1024;

pub(super) fn query_records(records: &[AuditRecord], filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    let matcher = Matcher::new(filter)?;
    let mut found = Vec::new();
    for record in records.iter().rev() {
        if matcher.is_full(found.len()) {
            break;
        }
        if matcher.matches(record) {
            found.push(record.clone());
        }
    }
    Ok(found)
}

pub(super) fn query_dir(audit_dir: &Path, filter: &AuditFilter) -> Result<Vec<AuditRecord>, AuditError> {
    query_dir_in_chunks(audit_dir, filter, CHUNK_BYTES)
}

/// The newest record with this `audit_id` and its line exactly as the log holds it (what a
/// receipt proves), found in the same one newest-first pass as [`query_dir`].
pub(super) fn record_line(audit_dir: &Path, audit_id: &str) -> Result<Option<(AuditRecord, Vec<u8>)>, AuditError> {
    let filter = AuditFilter { audit_id: Some(audit_id.to_string()), limit: Some(1), ..AuditFilter::default() };
    Ok(matching(audit_dir, &filter, CHUNK_BYTES, |record, line| (record, line.to_vec()))?.into_iter().next())
}

fn query_dir_in_chunks(
    audit_dir: &Path,
    filter: &AuditFilter,
    chunk_bytes: usize,
) -> Result<Vec<AuditRecord>, AuditError> {
    matching(audit_dir, filter, chunk_bytes, |record, _| record)
}

/// What `keep` makes of each record matching `filter` (and its line), newest first.
fn matching<T>(
    audit_dir: &Path,
    filter: &AuditFilter,
    chunk_bytes: usize,
    keep: impl Fn(AuditRecord, &[u8]) -> T,
) -> Result<Vec<T>, AuditError> {
    let matcher = Matcher::new(filter)?;
    let mut found = Vec::new();
    for (date, path) in newest_first_files(audit_dir)? {
        if matcher.is_full(found.len()) || matcher.file_ends_before_since(date) {
            break;
        }
        if matcher.file_starts_at_or_after_until(date) || starts_at_or_after_seq(&path, filter.before_seq)? {
            continue;
        }
        let mut lines = NewestFirstLines::open(&path, chunk_bytes).map_err(|e| read_error(&path, e))?;
        while !matcher.is_full(found.len()) {
            let Some(line) = lines.next_line().map_err(|e| read_error(&path, e))? else { break };
            // A damaged complete line is skipped here; `verify` is the tool that reports it.
            if matcher.may_match_line(line)
                && let Some(record) = parse_line(line)
                && matcher.matches(&record)
            {
                found.push(keep(record, line));
            }
        }
    }
    Ok(found)
}

/// Seqs grow along the chain, so a file whose first record is at or after the cursor holds none
/// before it.
fn starts_at_or_after_seq(path: &Path, before_seq: Option<u64>) -> Result<bool, AuditError> {
    let Some(before) = before_seq else { return Ok(false) };
    let first = first_line(path, FIRST_LINE_BYTES).map_err(|e| read_error(path, e))?;
    Ok(first.as_deref().and_then(peek_seq).is_some_and(|seq| seq >= before))
}

/// The daily files, newest first; none when the directory does not exist yet.
pub(super) fn newest_first_files(audit_dir: &Path) -> Result<Vec<(NaiveDate, PathBuf)>, AuditError> {
    match log_files(audit_dir) {
        Ok(mut files) => {
            files.reverse();
            Ok(files)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(read_error(audit_dir, e)),
    }
}

/// A record line, or `None` when it is damaged. Invalid UTF-8 can only come from damage; such a
/// line is read lossily, as the verifier reads it.
pub(super) fn parse_line(line: &[u8]) -> Option<AuditRecord> {
    match serde_json::from_slice(line) {
        Ok(record) => Some(record),
        Err(_) if std::str::from_utf8(line).is_err() => serde_json::from_str(&String::from_utf8_lossy(line)).ok(),
        Err(_) => None,
    }
}

pub(super) fn read_error(path: &Path, e: io::Error) -> AuditError {
    AuditError::Read { path: path.display().to_string(), message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Write;

    use aileron_core::vocabulary::{EventType, keys};

    use super::super::tests::{TestClock, event, open_disk};
    use super::super::{AuditConfig, AuditLog, query};
    use super::*;

    /// (timestamp, event type, payload)
    type PlannedEvent<'a> = (&'a str, EventType, &'a [(&'a str, &'a str)]);

    /// Appends a fixed set of events across two days, for the query table.
    async fn populate(log: &AuditLog, clock: &TestClock) -> Vec<AuditRecord> {
        let mut records = Vec::new();
        let plan: [PlannedEvent; 5] = [
            (
                "2026-11-21T09:00:00.000Z",
                EventType::ConnectorInstalled,
                &[(keys::CONNECTOR_FQN, "github://acme/slack")],
            ),
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
            let log =
                AuditLog::open_with_clock(AuditConfig { dir: dir.clone(), witness: None }, clock.clone()).unwrap();
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
            assert_eq!(
                log.query(&bad).unwrap_err(),
                AuditError::InvalidTime { parameter: "since", value: "yesterday".into() }
            );
            assert_eq!(log.verify().unwrap().records, 5);
        }
    }

    /// A day of runs with their child records, spread over three files, for the new fields.
    /// Returns the records oldest first.
    async fn populate_runs(log: &AuditLog, clock: &TestClock) -> Vec<AuditRecord> {
        let mut records = Vec::new();
        for i in 0..30u32 {
            clock.set(&format!("2026-11-{}T{:02}:00:00.000Z", 20 + i / 10, i % 10 + 8));
            let action = if i % 3 == 0 { "post" } else { "read" };
            let mut run = event(EventType::ActionExecuted, &[(keys::ACTION_NAME, action)]);
            run.session_id = Some(format!("sess-{}", i % 2));
            let run = log.append(run).await.unwrap();
            let child = event(EventType::ConnectorProxyProxied, &[(keys::AUDIT_ID, &run.audit_id)]);
            records.push(run);
            records.push(log.append(child).await.unwrap());
            if i % 10 == 9 {
                records.push(
                    log.append(event(EventType::ApprovalRequested, &[(keys::APPROVAL_ACTION, "post")])).await.unwrap(),
                );
            }
        }
        records
    }

    fn newest_first_ids(records: &[AuditRecord], keep: impl Fn(&AuditRecord) -> bool) -> Vec<String> {
        records.iter().rev().filter(|r| keep(r)).map(|r| r.audit_id.clone()).collect()
    }

    #[tokio::test]
    async fn new_filter_fields_on_disk_and_in_memory() {
        let temp = tempfile::tempdir().unwrap();
        for dir in [Some(temp.path().to_path_buf()), None] {
            let clock = TestClock::at("2026-11-20T00:00:00.000Z");
            let log =
                AuditLog::open_with_clock(AuditConfig { dir: dir.clone(), witness: None }, clock.clone()).unwrap();
            let records = populate_runs(&log, &clock).await;
            let a_run = &records[4];
            let payload = |r: &AuditRecord, key| r.payload_str(key).map(str::to_string);
            let cases: Vec<(&str, AuditFilter, Vec<String>)> = vec![
                (
                    "action by name or by approval",
                    AuditFilter { action: Some("post".into()), ..AuditFilter::default() },
                    newest_first_ids(&records, |r| {
                        payload(r, keys::ACTION_NAME).as_deref() == Some("post")
                            || payload(r, keys::APPROVAL_ACTION).as_deref() == Some("post")
                    }),
                ),
                (
                    "session",
                    AuditFilter { session_id: Some("sess-1".into()), ..AuditFilter::default() },
                    newest_first_ids(&records, |r| r.session_id.as_deref() == Some("sess-1")),
                ),
                (
                    "family",
                    AuditFilter { family: Some("connector.proxy".into()), ..AuditFilter::default() },
                    newest_first_ids(&records, |r| r.event_type == "connector.proxy.proxied"),
                ),
                (
                    "any of two event types",
                    AuditFilter {
                        event_types: vec!["connector.proxy.proxied".into(), "approval.requested".into()],
                        ..AuditFilter::default()
                    },
                    newest_first_ids(&records, |r| {
                        r.event_type == "connector.proxy.proxied" || r.event_type == "approval.requested"
                    }),
                ),
                (
                    "until",
                    AuditFilter { until: Some("2026-11-21T09:00:00Z".into()), ..AuditFilter::default() },
                    newest_first_ids(&records, |r| r.timestamp.as_str() < "2026-11-21T09:00:00.000Z"),
                ),
                (
                    "before seq",
                    AuditFilter { before_seq: Some(40), ..AuditFilter::default() },
                    newest_first_ids(&records, |r| r.seq < 40),
                ),
                (
                    "run",
                    AuditFilter { run: Some(a_run.audit_id.clone()), ..AuditFilter::default() },
                    vec![records[5].audit_id.clone(), a_run.audit_id.clone()],
                ),
                (
                    "top level",
                    AuditFilter { top_level: true, ..AuditFilter::default() },
                    newest_first_ids(&records, |r| !r.payload.contains_key(keys::AUDIT_ID)),
                ),
                (
                    "since and until and limit",
                    AuditFilter {
                        since: Some("2026-11-21".into()),
                        until: Some("2026-11-22".into()),
                        top_level: true,
                        limit: Some(4),
                        ..AuditFilter::default()
                    },
                    newest_first_ids(&records, |r| {
                        r.timestamp.starts_with("2026-11-21") && r.payload.get(keys::AUDIT_ID).is_none()
                    })[..4]
                        .to_vec(),
                ),
            ];
            for (name, filter, expected) in cases {
                assert!(!expected.is_empty(), "{name}: the case tests something");
                let got: Vec<String> = log.query(&filter).unwrap().into_iter().map(|r| r.audit_id).collect();
                assert_eq!(got, expected, "{name} ({dir:?})");
            }
            let bad = AuditFilter { until: Some("2026-13-01".into()), ..AuditFilter::default() };
            assert_eq!(
                log.query(&bad).unwrap_err(),
                AuditError::InvalidTime { parameter: "until", value: "2026-13-01".into() }
            );
        }
    }

    /// Pages of `page` records, each starting before the previous page's last seq.
    fn pages(query: impl Fn(&AuditFilter) -> Vec<AuditRecord>, base: &AuditFilter, page: usize) -> Vec<Vec<u64>> {
        let mut pages = Vec::new();
        let mut before_seq = None;
        loop {
            let filter = AuditFilter { before_seq, limit: Some(page), ..base.clone() };
            let records = query(&filter);
            let Some(last) = records.last() else { break };
            before_seq = Some(last.seq);
            pages.push(records.iter().map(|r| r.seq).collect());
            assert!(pages.len() < 1000, "paging does not end");
        }
        pages
    }

    #[tokio::test]
    async fn paging_with_before_seq_covers_everything_once_in_order() {
        let temp = tempfile::tempdir().unwrap();
        for dir in [Some(temp.path().to_path_buf()), None] {
            let clock = TestClock::at("2026-11-20T00:00:00.000Z");
            let log =
                AuditLog::open_with_clock(AuditConfig { dir: dir.clone(), witness: None }, clock.clone()).unwrap();
            let records = populate_runs(&log, &clock).await;
            for (base, expected) in [
                (AuditFilter::default(), records.iter().rev().map(|r| r.seq).collect::<Vec<_>>()),
                (
                    AuditFilter { top_level: true, action: Some("read".into()), ..AuditFilter::default() },
                    records
                        .iter()
                        .rev()
                        .filter(|r| r.payload_str(keys::ACTION_NAME) == Some("read"))
                        .map(|r| r.seq)
                        .collect(),
                ),
            ] {
                for page in [1, 7, 20, 1000] {
                    let pages = pages(|filter| log.query(filter).unwrap(), &base, page);
                    assert!(pages.iter().all(|p| p.len() <= page), "{page}: {pages:?}");
                    assert!(pages[..pages.len() - 1].iter().all(|p| p.len() == page), "only the last page is short");
                    assert_eq!(pages.concat(), expected, "pages of {page} ({dir:?}, {base:?})");
                }
            }
        }
    }

    /// Small chunks put boundaries inside and between lines of every file; the answers stay the
    /// same as reading with the normal chunk size.
    #[tokio::test]
    async fn reading_in_small_chunks_across_daily_files_gives_the_same_answers() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-20T00:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        let records = populate_runs(&log, &clock).await;
        let audit_dir = temp.path().join("audit");
        let filters = [
            AuditFilter::default(),
            AuditFilter { limit: Some(5), ..AuditFilter::default() },
            AuditFilter { action: Some("post".into()), limit: Some(3), before_seq: Some(50), ..AuditFilter::default() },
            AuditFilter { since: Some("2026-11-21".into()), family: Some("approval".into()), ..AuditFilter::default() },
        ];
        let all: Vec<u64> = records.iter().rev().map(|r| r.seq).collect();
        for filter in filters {
            let expected = query_dir(&audit_dir, &filter).unwrap();
            if filter == AuditFilter::default() {
                assert_eq!(expected.iter().map(|r| r.seq).collect::<Vec<_>>(), all);
            }
            for chunk_bytes in [1, 2, 3, 50, 199, 200, 201, 333, 1024] {
                assert_eq!(
                    query_dir_in_chunks(&audit_dir, &filter, chunk_bytes).unwrap(),
                    expected,
                    "{filter:?} in chunks of {chunk_bytes}"
                );
            }
        }
    }

    /// A last line without its newline is being written (or torn): not part of the log yet. A
    /// damaged complete line is skipped. Neither hides the lines around it.
    #[tokio::test]
    async fn a_torn_last_line_and_a_damaged_line_are_skipped() {
        let temp = tempfile::tempdir().unwrap();
        let clock = TestClock::at("2026-11-22T10:00:00.000Z");
        let log = open_disk(temp.path(), &clock);
        let mut seqs = Vec::new();
        for i in 0..4 {
            seqs.push(log.append(event(EventType::ActionExecuted, &[("n", &i.to_string())])).await.unwrap().seq);
        }
        drop(log);
        let path = temp.path().join("audit/audit-2026-11-22.jsonl");
        let text = fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines.insert(2, "{\"damaged\"");
        let torn = text.lines().last().unwrap().replace("\"n\":\"3\"", "\"n\":\"4\"");
        fs::write(&path, format!("{}\n{}", lines.join("\n"), &torn[..torn.len() - 1])).unwrap();
        for chunk_bytes in [7, 100, CHUNK_BYTES] {
            let got: Vec<u64> = query_dir_in_chunks(&temp.path().join("audit"), &AuditFilter::default(), chunk_bytes)
                .unwrap()
                .iter()
                .map(|r| r.seq)
                .collect();
            assert_eq!(got, vec![4, 3, 2, 1], "chunks of {chunk_bytes}");
        }
        // Even a torn line that would be complete JSON without the newline is not read.
        fs::write(&path, format!("{}\n{}", lines.join("\n"), torn)).unwrap();
        let got: Vec<u64> = query(temp.path(), &AuditFilter::default()).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(got, vec![4, 3, 2, 1]);
        let mut file = fs::OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"\n").unwrap();
        assert_eq!(
            query(temp.path(), &AuditFilter::default()).unwrap().len(),
            5,
            "acknowledged once its newline is there"
        );
    }

    #[test]
    fn a_missing_directory_is_an_empty_log() {
        let temp = tempfile::tempdir().unwrap();
        assert_eq!(query(temp.path(), &AuditFilter::default()).unwrap(), Vec::<AuditRecord>::new());
    }
}
