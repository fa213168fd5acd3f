//! Which records a query wants: [`AuditFilter`], its parsed form [`Matcher`], and the checks on a
//! line's bytes that let a reader skip most lines without parsing them.
//!
//! The byte checks read the line as the writer emits it: canonical JSON, keys sorted, no
//! whitespace (`actor, audit_id, event_type, hash, payload, prev, seq, session_id?, timestamp`).
//! They skip a line only when its bytes show it cannot match; a line shaped otherwise gets a
//! "maybe", and the parsed record decides. Two facts of JSON make them exact: the wanted value,
//! encoded by the same serializer, appears byte for byte in a line that holds it; and `,"` never
//! occurs inside a string (a quote in a string is always escaped), so `,"seq":` found from the
//! end is the top-level key, only strings (`session_id`, `timestamp`) following it.

use std::sync::LazyLock;

use aileron_core::audit::AuditRecord;
use aileron_core::vocabulary::keys;
use chrono::{DateTime, NaiveDate, Utc};
use memchr::memmem;

use super::{AuditError, parse_timestamp};

/// Filter for [`super::AuditLog::query`]; every set field must match. Also the query of
/// `GET /v1/audit` (`wire::AuditQuery`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(description = "The query of `GET /v1/audit`: every parameter given must match.")]
pub struct AuditFilter {
    /// RFC 3339 timestamp or `YYYY-MM-DD` (midnight UTC): records at or after it.
    pub since: Option<String>,
    /// Same forms as `since`: records strictly before it.
    pub until: Option<String>,
    pub audit_id: Option<String>,
    /// Payload key `aileron.connector.fqn`.
    pub connector_fqn: Option<String>,
    /// Payload key `aileron.failure.class`.
    pub class: Option<String>,
    /// An [`EventType`](aileron_core::vocabulary::EventType)'s string, compared with the record's
    /// as text: records keep their event type as written, and a string that names no event type
    /// simply matches nothing.
    #[schemars(description = "An event type's string (`approval.requested`); one that names none matches nothing.")]
    pub event_type: Option<String>,
    /// An event type or a dotted prefix of event types: `approval` matches `approval.requested`
    /// and `connector.proxy` matches `connector.proxy.proxied`, but `approval` never matches
    /// `approvals.x`.
    pub family: Option<String>,
    /// The action a record is about: payload `aileron.action.name` or `aileron.approval.action`.
    pub action: Option<String>,
    /// The record's `session_id`.
    pub session_id: Option<String>,
    /// One run: the record with this `audit_id` and the records that carry it as payload
    /// `aileron.audit.id` (its proxied calls and spawns).
    pub run: Option<String>,
    /// Paging cursor: only records with a `seq` below it (the last seq of the previous page).
    pub before_seq: Option<u64>,
    /// Skips the records that belong to a run (payload `aileron.audit.id`): one row per run.
    #[serde(default)]
    pub top_level: bool,
    /// At most this many records (newest first); `None` = all.
    #[schemars(description = "At most this many records (default 100, at most 10000).")]
    pub limit: Option<usize>,
    /// Any one of these event types (empty: any): for a reader that wants several in one pass
    /// (`aileron policy replay`). Not a query parameter.
    #[serde(skip)]
    #[schemars(skip)]
    pub event_types: Vec<String>,
}

/// A parsed [`AuditFilter`].
pub(super) struct Matcher<'a> {
    filter: &'a AuditFilter,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    /// What a matching line must contain: from each group, one of its byte strings.
    needles: Vec<Vec<memmem::Finder<'static>>>,
}

impl<'a> Matcher<'a> {
    pub(super) fn new(filter: &'a AuditFilter) -> Result<Matcher<'a>, AuditError> {
        let since = filter.since.as_deref().map(|value| parse_time_bound("since", value)).transpose()?;
        let until = filter.until.as_deref().map(|value| parse_time_bound("until", value)).transpose()?;
        Ok(Matcher { filter, since, until, needles: needles(filter) })
    }

    pub(super) fn matches(&self, record: &AuditRecord) -> bool {
        let f = self.filter;
        let eq = |want: &Option<String>, have: Option<&str>| want.as_deref().is_none_or(|want| have == Some(want));
        let payload = |key| record.payload_str(key);
        eq(&f.audit_id, Some(&record.audit_id))
            && eq(&f.event_type, Some(&record.event_type))
            && (f.event_types.is_empty() || f.event_types.contains(&record.event_type))
            && f.family.as_deref().is_none_or(|family| is_in_family(&record.event_type, family))
            && eq(&f.connector_fqn, payload(keys::CONNECTOR_FQN))
            && eq(&f.class, payload(keys::FAILURE_CLASS))
            && f.action.as_deref().is_none_or(|action| {
                payload(keys::ACTION_NAME) == Some(action) || payload(keys::APPROVAL_ACTION) == Some(action)
            })
            && eq(&f.session_id, record.session_id.as_deref())
            && f.run.as_deref().is_none_or(|run| record.audit_id == run || payload(keys::AUDIT_ID) == Some(run))
            && f.before_seq.is_none_or(|before| record.seq < before)
            && !(f.top_level && record.payload.contains_key(keys::AUDIT_ID))
            && self.is_in_time_range(|| parse_timestamp(&record.timestamp))
    }

    /// Whether the record's time (read only when a bound is set) is within `since`/`until`.
    fn is_in_time_range(&self, at: impl FnOnce() -> Option<DateTime<Utc>>) -> bool {
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        at().is_some_and(|at| self.since.is_none_or(|since| at >= since) && self.until.is_none_or(|until| at < until))
    }

    /// False when the line's bytes show the record cannot match; true means "parse and see".
    pub(super) fn may_match_line(&self, line: &[u8]) -> bool {
        self.filter.before_seq.is_none_or(|before| peek_seq(line).is_none_or(|seq| seq < before))
            && self.needles.iter().all(|group| group.iter().any(|needle| needle.find(line).is_some()))
            && (self.since.is_none() && self.until.is_none()
                || peek_timestamp(line).and_then(parse_timestamp).is_none_or(|at| self.is_in_time_range(|| Some(at))))
    }

    /// Whether deciding needs more of the record than its seq and time (which
    /// [`Matcher::may_match_line`] reads off the line exactly).
    pub(super) fn needs_record(&self) -> bool {
        let f = self.filter;
        [&f.audit_id, &f.connector_fqn, &f.class, &f.event_type, &f.family, &f.action, &f.session_id, &f.run]
            .iter()
            .any(|field| field.is_some())
            || f.top_level
            || !f.event_types.is_empty()
    }

    /// Records are filed by their UTC date: a file dated before `since`'s day holds none at or
    /// after it (and neither do the files before it).
    pub(super) fn file_ends_before_since(&self, date: NaiveDate) -> bool {
        self.since.is_some_and(|since| date < since.date_naive())
    }

    /// A file whose day starts at or after `until` holds no record before it.
    pub(super) fn file_starts_at_or_after_until(&self, date: NaiveDate) -> bool {
        self.until.is_some_and(|until| midnight(date) >= until)
    }

    pub(super) fn is_full(&self, found: usize) -> bool {
        self.filter.limit.is_some_and(|limit| found >= limit)
    }
}

/// `event_type` is `family` or one of its dotted descendants.
fn is_in_family(event_type: &str, family: &str) -> bool {
    event_type.strip_prefix(family).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// For each set field with an exact value, the `"key":value` byte strings (as canonical JSON
/// writes them) of which a matching line holds at least one. `family` is a prefix, so its value
/// loses the closing quote.
fn needles(filter: &AuditFilter) -> Vec<Vec<memmem::Finder<'static>>> {
    let pair = |key: &str, value: &str| format!("{}:{}", json_string(key), json_string(value));
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut push = |value: &Option<String>, keys: &[&str]| {
        if let Some(value) = value {
            groups.push(keys.iter().map(|key| pair(key, value)).collect());
        }
    };
    push(&filter.audit_id, &["audit_id"]);
    push(&filter.event_type, &["event_type"]);
    push(&filter.connector_fqn, &[keys::CONNECTOR_FQN]);
    push(&filter.class, &[keys::FAILURE_CLASS]);
    push(&filter.action, &[keys::ACTION_NAME, keys::APPROVAL_ACTION]);
    push(&filter.session_id, &["session_id"]);
    push(&filter.run, &["audit_id", keys::AUDIT_ID]);
    if let Some(family) = &filter.family {
        let mut prefix = pair("event_type", family);
        prefix.pop();
        groups.push(vec![prefix]);
    }
    if !filter.event_types.is_empty() {
        groups.push(filter.event_types.iter().map(|event_type| pair("event_type", event_type)).collect());
    }
    groups
        .into_iter()
        .map(|group| group.iter().map(|needle| memmem::Finder::new(needle.as_bytes()).into_owned()).collect())
        .collect()
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Searchers built once: building one per line would cost more than the search.
static SEQ_KEY: LazyLock<memmem::FinderRev<'static>> = LazyLock::new(|| memmem::FinderRev::new(b",\"seq\":"));
static EVENT_TYPE_KEY: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b",\"event_type\":\""));

/// The top-level `seq` of a canonical line.
pub(super) fn peek_seq(line: &[u8]) -> Option<u64> {
    let key = SEQ_KEY.needle();
    let digits = &line[SEQ_KEY.rfind(line)? + key.len()..];
    let len = digits.iter().position(|b| !b.is_ascii_digit())?;
    if len == 0 || !matches!(digits[len], b',' | b'}') {
        return None;
    }
    std::str::from_utf8(&digits[..len]).ok()?.parse().ok()
}

/// The top-level `timestamp` of a canonical line: its last key, so the line ends
/// `,"timestamp":"…"}`.
pub(super) fn peek_timestamp(line: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b",\"timestamp\":\"";
    let body = line.strip_suffix(b"\"}")?;
    let start = memchr::memrchr(b'"', body)? + 1;
    let value = &body[start..];
    if !body[..start].ends_with(KEY) || value.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// The top-level `event_type` of a canonical line: only `actor` (an object of two strings) and
/// `audit_id` come before it, so its first `,"event_type":"` is the top-level key.
pub(super) fn peek_event_type(line: &[u8]) -> Option<&str> {
    let value = &line[EVENT_TYPE_KEY.find(line)? + EVENT_TYPE_KEY.needle().len()..];
    let value = &value[..memchr::memchr(b'"', value)?];
    if value.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(value).ok()
}

/// `since`/`until`: an RFC 3339 timestamp, or a `YYYY-MM-DD` date meaning its midnight UTC.
fn parse_time_bound(parameter: &'static str, value: &str) -> Result<DateTime<Utc>, AuditError> {
    if let Some(at) = parse_timestamp(value) {
        return Ok(at);
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .map(midnight)
        .map_err(|_| AuditError::InvalidTime { parameter, value: value.to_string() })
}

fn midnight(date: NaiveDate) -> DateTime<Utc> {
    date.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc()
}

#[cfg(test)]
mod tests {
    use aileron_core::audit::{Actor, ActorType, GENESIS_PREV, UnsealedRecord, seal};
    use serde_json::{Map, Value};

    use super::*;

    fn record(seq: u64, event_type: &str, session_id: Option<&str>, payload: &[(&str, &str)]) -> AuditRecord {
        let unsealed = UnsealedRecord {
            audit_id: format!("audit-{seq}"),
            event_type: event_type.into(),
            timestamp: format!("2026-11-22T10:00:{:02}.000Z", seq % 60),
            actor: Actor::new(ActorType::Agent, "agent \"007\""),
            session_id: session_id.map(str::to_string),
            payload: payload.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect::<Map<_, _>>(),
        };
        seal(unsealed, seq, GENESIS_PREV.into())
    }

    /// Checks the matcher's verdict and that the byte check never rules out a match.
    fn check(name: &str, filter: AuditFilter, record: &AuditRecord, expected: bool) {
        let matcher = Matcher::new(&filter).unwrap();
        assert_eq!(matcher.matches(record), expected, "{name}: {filter:?} on {record:?}");
        let line = record.to_line();
        if expected {
            assert!(matcher.may_match_line(line.as_bytes()), "{name}: the byte check dropped a match: {line}");
        }
    }

    #[test]
    fn each_field_table() {
        let run = record(10, "action.executed", Some("sess-1"), &[(keys::ACTION_NAME, "post-message")]);
        let proxied = record(11, "connector.proxy.proxied", Some("sess-1"), &[(keys::AUDIT_ID, "audit-10")]);
        let approval = record(12, "approval.requested", None, &[(keys::APPROVAL_ACTION, "post-message")]);
        let other = record(13, "approvals.odd", Some("sess-2"), &[(keys::ACTION_NAME, "other")]);
        let with = |f: fn(&mut AuditFilter)| {
            let mut filter = AuditFilter::default();
            f(&mut filter);
            filter
        };
        let cases: Vec<(&str, AuditFilter, [bool; 4])> = vec![
            ("nothing set", AuditFilter::default(), [true, true, true, true]),
            (
                "action by name or approval",
                with(|f| f.action = Some("post-message".into())),
                [true, false, true, false],
            ),
            ("session", with(|f| f.session_id = Some("sess-1".into())), [true, true, false, false]),
            ("family of one segment", with(|f| f.family = Some("approval".into())), [false, false, true, false]),
            (
                "family of two segments",
                with(|f| f.family = Some("connector.proxy".into())),
                [false, true, false, false],
            ),
            (
                "family is a whole type",
                with(|f| f.family = Some("action.executed".into())),
                [true, false, false, false],
            ),
            ("family is no bare prefix", with(|f| f.family = Some("approv".into())), [false, false, false, false]),
            ("run and its children", with(|f| f.run = Some("audit-10".into())), [true, true, false, false]),
            ("top level only", with(|f| f.top_level = true), [true, false, true, true]),
            ("before seq", with(|f| f.before_seq = Some(12)), [true, true, false, false]),
            (
                "until excludes its instant",
                with(|f| f.until = Some("2026-11-22T10:00:12Z".into())),
                [true, true, false, false],
            ),
            ("until a date", with(|f| f.until = Some("2026-11-23".into())), [true, true, true, true]),
            ("until an earlier date", with(|f| f.until = Some("2026-11-22".into())), [false, false, false, false]),
            (
                "since includes its instant",
                with(|f| f.since = Some("2026-11-22T10:00:12Z".into())),
                [false, false, true, true],
            ),
            (
                "all at once",
                with(|f| {
                    f.run = Some("audit-10".into());
                    f.session_id = Some("sess-1".into());
                    f.top_level = true;
                    f.family = Some("action".into());
                }),
                [true, false, false, false],
            ),
        ];
        for (name, filter, expected) in cases {
            for (record, expected) in [&run, &proxied, &approval, &other].into_iter().zip(expected) {
                check(name, filter.clone(), record, expected);
            }
        }
    }

    /// Values with quotes, backslashes, control characters and non-ASCII text appear escaped in
    /// the line; the byte check looks for them encoded the same way and keeps every match.
    #[test]
    fn the_byte_check_keeps_matches_whose_values_need_escaping() {
        for value in
            ["say \"hi\"", "back\\slash", "tab\there", "bell\u{7}", "café ☕ 🚀", "\\\"", "slash/ok", "a,\"seq\":1"]
        {
            let record = record(
                7,
                value,
                Some(value),
                &[
                    (keys::ACTION_NAME, value),
                    (keys::CONNECTOR_FQN, value),
                    (keys::FAILURE_CLASS, value),
                    (keys::AUDIT_ID, value),
                ],
            );
            let filters = [
                AuditFilter { event_type: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { family: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { action: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { connector_fqn: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { class: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { session_id: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { run: Some(value.into()), ..AuditFilter::default() },
                AuditFilter { before_seq: Some(8), since: Some("2026-11-22".into()), ..AuditFilter::default() },
            ];
            for filter in filters {
                check(value, filter, &record, true);
            }
            // The same text unescaped is not what the line holds: the byte check alone skips it.
            let line = record.to_line();
            let other = AuditFilter { session_id: Some(format!("{value}!")), ..AuditFilter::default() };
            assert!(!Matcher::new(&other).unwrap().may_match_line(line.as_bytes()), "{value}: {line}");
        }
        let mut audit_id_escaped = record(3, "a", None, &[]);
        audit_id_escaped.audit_id = "audit-\"quoted\"\\".into();
        check(
            "audit id",
            AuditFilter { audit_id: Some(audit_id_escaped.audit_id.clone()), ..AuditFilter::default() },
            &audit_id_escaped,
            true,
        );
    }

    #[test]
    fn the_byte_check_skips_what_cannot_match() {
        let record = record(20, "action.executed", Some("sess-1"), &[(keys::ACTION_NAME, "post")]);
        let line = record.to_line();
        let cases = [
            AuditFilter { action: Some("get".into()), ..AuditFilter::default() },
            AuditFilter { session_id: Some("sess-2".into()), ..AuditFilter::default() },
            AuditFilter { before_seq: Some(20), ..AuditFilter::default() },
            AuditFilter { since: Some("2026-11-23".into()), ..AuditFilter::default() },
            AuditFilter { until: Some("2026-11-22T10:00:20Z".into()), ..AuditFilter::default() },
            AuditFilter { family: Some("execution".into()), ..AuditFilter::default() },
        ];
        for filter in cases {
            assert!(!Matcher::new(&filter).unwrap().may_match_line(line.as_bytes()), "{filter:?}");
        }
    }

    #[test]
    fn peeks_read_the_top_level_keys_of_a_canonical_line() {
        // A payload and a session that look like the keys must not fool the peeks.
        let tricky = record(
            42,
            "action.executed",
            Some("x\",\"seq\":7,\"timestamp\":\"2000-01-01T00:00:00.000Z"),
            &[("seq", "9"), (keys::ACTION_NAME, ",\"event_type\":\"approval.requested\"")],
        );
        let line = tricky.to_line();
        assert_eq!(peek_seq(line.as_bytes()), Some(42), "{line}");
        assert_eq!(peek_timestamp(line.as_bytes()), Some(tricky.timestamp.as_str()), "{line}");
        assert_eq!(peek_event_type(line.as_bytes()), Some("action.executed"), "{line}");
        // Lines of another shape give no answer rather than a wrong one.
        for odd in [&b"garbage"[..], b"", b"{\"timestamp\":\"x\\\"\"}", b"{\"seq\":\"1\"}"] {
            assert_eq!((peek_seq(odd), peek_timestamp(odd), peek_event_type(odd)), (None, None, None), "{odd:?}");
        }
    }

    #[test]
    fn invalid_time_bounds_name_the_parameter() {
        for (filter, parameter) in [
            (AuditFilter { since: Some("yesterday".into()), ..AuditFilter::default() }, "since"),
            (AuditFilter { until: Some("yesterday".into()), ..AuditFilter::default() }, "until"),
        ] {
            let error = Matcher::new(&filter).err().expect("invalid");
            assert_eq!(error, AuditError::InvalidTime { parameter, value: "yesterday".into() });
            assert!(error.to_string().contains(&format!("`{parameter}` value `yesterday`")), "{error}");
        }
    }
}
