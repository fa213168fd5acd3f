//! Runs per time bucket, for a chart: `action.executed` and `execution.failed` records counted
//! over `[since, now)`. Most lines are settled by their event type, read near the start of the
//! line, and their timestamp, read off its end; a line is parsed only when the filter asks about
//! more than seq and time.

use std::path::Path;

use aileron_core::audit::AuditRecord;
use aileron_core::vocabulary::EventType;
use chrono::{DateTime, TimeDelta, Utc};

use super::daily_file::{CHUNK_BYTES, NewestFirstLines};
use super::filter::{Matcher, peek_event_type, peek_timestamp};
use super::query::{newest_first_files, parse_line, read_error};
use super::{AuditError, AuditFilter, parse_timestamp};

/// One bar of the chart: `[start, start + bucket)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Bucket {
    pub start: DateTime<Utc>,
    /// `action.executed` and `execution.failed` records.
    pub runs: u64,
    /// `execution.failed` records.
    pub failures: u64,
}

/// More bars than a chart can show means the bucket was meant for a shorter range.
const MAX_BUCKETS: i128 = 10_000;

/// Empty buckets over `[since, now)` and where a time falls among them.
struct Histogram {
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    bucket_nanos: i128,
    buckets: Vec<Bucket>,
}

impl Histogram {
    fn new(since: DateTime<Utc>, now: DateTime<Utc>, bucket: TimeDelta) -> Result<Histogram, AuditError> {
        let bucket_nanos = nanos(bucket);
        if bucket_nanos <= 0 {
            return Err(AuditError::InvalidBucket(format!("it must be positive, not {bucket}")));
        }
        let span = nanos(now - since).max(0);
        let count = (span + bucket_nanos - 1) / bucket_nanos;
        if count > MAX_BUCKETS {
            return Err(AuditError::InvalidBucket(format!(
                "{bucket} makes {count} buckets from since to now; at most {MAX_BUCKETS}"
            )));
        }
        let buckets =
            (0..count as i32).map(|index| Bucket { start: since + bucket * index, runs: 0, failures: 0 }).collect();
        Ok(Histogram { since, now, bucket_nanos, buckets })
    }

    fn add(&mut self, at: DateTime<Utc>, failed: bool) {
        if at < self.since || at >= self.now {
            return;
        }
        let index = (nanos(at - self.since) / self.bucket_nanos) as usize;
        if let Some(bucket) = self.buckets.get_mut(index) {
            bucket.runs += 1;
            bucket.failures += u64::from(failed);
        }
    }
}

fn nanos(delta: TimeDelta) -> i128 {
    i128::from(delta.num_seconds()) * 1_000_000_000 + i128::from(delta.subsec_nanos())
}

/// Whether an event type is a run, and whether a failed one.
fn run_outcome(event_type: &str) -> Option<bool> {
    match event_type {
        t if t == EventType::ActionExecuted.as_str() => Some(false),
        t if t == EventType::ExecutionFailed.as_str() => Some(true),
        _ => None,
    }
}

pub(super) fn run_histogram_of_records(
    records: &[AuditRecord],
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    bucket: TimeDelta,
    filter: &AuditFilter,
) -> Result<Vec<Bucket>, AuditError> {
    let matcher = Matcher::new(filter)?;
    let mut histogram = Histogram::new(since, now, bucket)?;
    for record in records {
        if let Some(failed) = run_outcome(&record.event_type)
            && matcher.matches(record)
            && let Some(at) = parse_timestamp(&record.timestamp)
        {
            histogram.add(at, failed);
        }
    }
    Ok(histogram.buckets)
}

pub(super) fn run_histogram_of_dir(
    audit_dir: &Path,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    bucket: TimeDelta,
    filter: &AuditFilter,
) -> Result<Vec<Bucket>, AuditError> {
    let matcher = Matcher::new(filter)?;
    let mut histogram = Histogram::new(since, now, bucket)?;
    if histogram.buckets.is_empty() {
        return Ok(histogram.buckets);
    }
    for (date, path) in newest_first_files(audit_dir)? {
        // Records are filed by their UTC date.
        if date < since.date_naive() || matcher.file_ends_before_since(date) {
            break;
        }
        if date > now.date_naive() || matcher.file_starts_at_or_after_until(date) {
            continue;
        }
        let mut lines = NewestFirstLines::open(&path, CHUNK_BYTES).map_err(|e| read_error(&path, e))?;
        while let Some(line) = lines.next_line().map_err(|e| read_error(&path, e))? {
            count_line(&matcher, &mut histogram, line);
        }
    }
    Ok(histogram.buckets)
}

fn count_line(matcher: &Matcher<'_>, histogram: &mut Histogram, line: &[u8]) {
    let peeked = peek_event_type(line);
    if peeked.is_some_and(|event_type| run_outcome(event_type).is_none()) || !matcher.may_match_line(line) {
        return;
    }
    let at = peek_timestamp(line).and_then(parse_timestamp);
    if let (Some(failed), Some(at), false) = (peeked.and_then(run_outcome), at, matcher.needs_record()) {
        histogram.add(at, failed);
        return;
    }
    // The filter asks about the record's content, or the line is not shaped as the writer
    // writes it: the parsed record decides.
    if let Some(record) = parse_line(line)
        && let Some(failed) = run_outcome(&record.event_type)
        && matcher.matches(&record)
        && let Some(at) = parse_timestamp(&record.timestamp)
    {
        histogram.add(at, failed);
    }
}

#[cfg(test)]
mod tests {
    use aileron_core::vocabulary::keys;

    use super::super::tests::{TestClock, event};
    use super::super::{AuditConfig, AuditLog};
    use super::*;

    fn at(rfc3339: &str) -> DateTime<Utc> {
        parse_timestamp(rfc3339).unwrap()
    }

    /// (hours since 00:00 with buckets of one hour, runs, failures) of the non-empty buckets.
    fn bars(buckets: &[Bucket]) -> Vec<(usize, u64, u64)> {
        buckets.iter().enumerate().filter(|(_, b)| b.runs > 0).map(|(i, b)| (i, b.runs, b.failures)).collect()
    }

    #[tokio::test]
    async fn counts_runs_and_failures_per_bucket_with_empty_buckets_on_disk_and_in_memory() {
        let temp = tempfile::tempdir().unwrap();
        for dir in [Some(temp.path().to_path_buf()), None] {
            let clock = TestClock::at("2026-11-21T23:00:00.000Z");
            let log =
                AuditLog::open_with_clock(AuditConfig { dir: dir.clone(), witness: None }, clock.clone()).unwrap();
            let plan: [(&str, EventType, &str); 9] = [
                ("2026-11-21T23:30:00.000Z", EventType::ActionExecuted, "post"), // before since
                ("2026-11-22T00:00:00.000Z", EventType::ActionExecuted, "post"), // first instant
                ("2026-11-22T00:59:59.999Z", EventType::ExecutionFailed, "read"),
                ("2026-11-22T00:30:00.000Z", EventType::ApprovalRequested, "post"), // not a run (clamped later)
                ("2026-11-22T03:15:00.000Z", EventType::ActionExecuted, "read"),
                ("2026-11-22T03:16:00.000Z", EventType::ExecutionFailed, "post"),
                ("2026-11-22T03:17:00.000Z", EventType::ConnectorProxyProxied, "post"), // not a run
                ("2026-11-22T05:59:59.999Z", EventType::ActionExecuted, "post"),        // last bucket
                ("2026-11-22T06:00:00.000Z", EventType::ActionExecuted, "post"),        // at now: excluded
            ];
            for (timestamp, event_type, action) in plan {
                clock.set(timestamp);
                log.append(event(event_type, &[(keys::ACTION_NAME, action)])).await.unwrap();
            }
            clock.set("2026-11-22T06:00:00.000Z");
            let since = at("2026-11-22T00:00:00Z");
            let hour = TimeDelta::hours(1);
            let all = log.run_histogram(since, hour, &AuditFilter::default()).unwrap();
            let starts: Vec<DateTime<Utc>> = (0..6).map(|h| since + hour * h).collect();
            assert_eq!(all.iter().map(|b| b.start).collect::<Vec<_>>(), starts, "{dir:?}: every bucket, oldest first");
            assert_eq!(bars(&all), vec![(0, 2, 1), (3, 2, 1), (5, 1, 0)], "{dir:?}");

            let post = AuditFilter { action: Some("post".into()), ..AuditFilter::default() };
            assert_eq!(bars(&log.run_histogram(since, hour, &post).unwrap()), vec![(0, 1, 0), (3, 1, 1), (5, 1, 0)]);
            let failed = AuditFilter { event_type: Some("execution.failed".into()), ..AuditFilter::default() };
            assert_eq!(bars(&log.run_histogram(since, hour, &failed).unwrap()), vec![(0, 1, 1), (3, 1, 1)]);
            let until = AuditFilter { until: Some("2026-11-22T03:16:00Z".into()), ..AuditFilter::default() };
            assert_eq!(bars(&log.run_histogram(since, hour, &until).unwrap()), vec![(0, 2, 1), (3, 1, 0)]);

            // Buckets that do not divide the range: the last one is partial, still present.
            let uneven = log.run_histogram(since, TimeDelta::minutes(100), &AuditFilter::default()).unwrap();
            assert_eq!(
                uneven.iter().map(|b| (b.runs, b.failures)).collect::<Vec<_>>(),
                vec![(2, 1), (2, 1), (0, 0), (1, 0)]
            );
            assert_eq!(log.run_histogram(at("2026-11-22T07:00:00Z"), hour, &AuditFilter::default()).unwrap(), vec![]);
            for bad in [TimeDelta::zero(), TimeDelta::seconds(-1), TimeDelta::milliseconds(1)] {
                let error = log.run_histogram(since, bad, &AuditFilter::default()).unwrap_err();
                assert!(matches!(error, AuditError::InvalidBucket(_)), "{bad}: {error}");
            }
        }
    }

    #[test]
    fn bucket_edges_table() {
        let since = at("2026-11-22T00:00:00Z");
        let now = at("2026-11-22T00:00:10Z");
        let mut histogram = Histogram::new(since, now, TimeDelta::seconds(3)).unwrap();
        for (time, failed) in [
            ("2026-11-21T23:59:59.999Z", false),
            ("2026-11-22T00:00:00.000Z", false),
            ("2026-11-22T00:00:02.999Z", true),
            ("2026-11-22T00:00:03.000Z", false),
            ("2026-11-22T00:00:09.999Z", true),
            ("2026-11-22T00:00:10.000Z", false),
        ] {
            histogram.add(at(time), failed);
        }
        let got: Vec<(u64, u64)> = histogram.buckets.iter().map(|b| (b.runs, b.failures)).collect();
        assert_eq!(got, vec![(2, 1), (1, 0), (0, 0), (1, 1)]);
    }
}
