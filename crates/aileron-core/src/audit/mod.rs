//! The audit record and its hash chain (SPEC §10), pure over lines of text.
//!
//! A record is one JSON object per line. Its canonical form is the record serialized with keys
//! sorted recursively and no whitespace, without the `hash` field; `hash` is `sha256:` + hex
//! SHA-256 of that canonical form, `prev` is the previous record's `hash` (the genesis value for
//! the first record) and `seq` counts records from 1, across daily files. The writer emits each
//! line in canonical form with `hash` included, so `jq -cS` reproduces a line byte for byte.
//!
//! Verification works on the parsed JSON value rather than on [`AuditRecord`], so a field this
//! version does not know about is still covered by the hash.
//!
//! Invariant: a torn tail (a last line of the last file without its newline) is reported, never
//! treated as a break: a crash mid-write leaves exactly that, and the line was never acknowledged
//! to anyone. A complete line that does not parse is a break wherever it is (it was written whole,
//! so it was changed afterwards).

mod canonical;

use std::fmt;

pub use canonical::{CanonicalObject, canonical_json};
use canonical::{into_string, write_canonical, write_canonical_map, write_str, write_u64};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::identity::ContentHash;
use crate::sha256::Sha256;

/// `prev` of the first record of a log.
pub const GENESIS_PREV: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// Who caused the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActorType {
    Agent,
    Human,
    Service,
    ConnectorRuntime,
}

impl ActorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::Agent => "agent",
            ActorType::Human => "human",
            ActorType::Service => "service",
            ActorType::ConnectorRuntime => "connector_runtime",
        }
    }
}

/// `{"type": ..., "id": ...}` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Actor {
    pub r#type: ActorType,
    pub id: String,
}

impl Actor {
    pub fn new(r#type: ActorType, id: impl Into<String>) -> Actor {
        Actor { r#type, id: id.into() }
    }
}

/// Everything a record says before the log places it in the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct UnsealedRecord {
    pub audit_id: String,
    /// An [`EventType`](crate::vocabulary::EventType)'s string.
    pub event_type: String,
    /// UTC RFC 3339 with milliseconds and `Z`, e.g. `2026-11-22T05:37:00.123Z`.
    pub timestamp: String,
    pub actor: Actor,
    pub session_id: Option<String>,
    /// OTel-style keys (`aileron.connector.fqn`, `aileron.failure.class`, ...), from
    /// [`crate::vocabulary::keys`].
    pub payload: Map<String, Value>,
}

/// One sealed line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditRecord {
    pub audit_id: String,
    /// Kept a string, not an [`EventType`](crate::vocabulary::EventType): a log written by
    /// another version reads and verifies even with event types this one does not know.
    pub event_type: String,
    pub timestamp: String,
    pub actor: Actor,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default)]
    pub payload: Map<String, Value>,
    pub seq: u64,
    pub prev: String,
    pub hash: String,
}

impl AuditRecord {
    /// The line as written to disk: canonical JSON including `hash`, without the newline.
    pub fn to_line(&self) -> String {
        let prepared = PreparedRecord::with_payload(
            &self.actor,
            &self.audit_id,
            &self.event_type,
            self.session_id.as_deref(),
            &self.payload,
        );
        let mut line = Vec::with_capacity(prepared.bytes.len() + 256);
        prepared.write_line(self.seq, &self.prev, &self.timestamp, Some(&self.hash), &mut line);
        into_string(line)
    }

    /// What the record says before its place in the chain (to seal it elsewhere: fuzzing,
    /// tamper tests).
    pub fn unsealed(self) -> UnsealedRecord {
        UnsealedRecord {
            audit_id: self.audit_id,
            event_type: self.event_type,
            timestamp: self.timestamp,
            actor: self.actor,
            session_id: self.session_id,
            payload: self.payload,
        }
    }

    /// A payload value as a string, for filters (`aileron.connector.fqn`, `aileron.failure.class`).
    pub fn payload_str(&self, key: &str) -> Option<&str> {
        self.payload.get(key).and_then(Value::as_str)
    }
}

/// Places `unsealed` in the chain after the record whose hash is `prev`.
pub fn seal(unsealed: UnsealedRecord, seq: u64, prev: String) -> AuditRecord {
    seal_to_line(unsealed, seq, prev).0
}

/// [`seal`], and the record's line ([`AuditRecord::to_line`]) from the same serialization.
pub fn seal_to_line(unsealed: UnsealedRecord, seq: u64, prev: String) -> (AuditRecord, String) {
    let UnsealedRecord { audit_id, event_type, timestamp, actor, session_id, payload } = unsealed;
    let prepared = PreparedRecord::with_payload(&actor, &audit_id, &event_type, session_id.as_deref(), &payload);
    let mut line = Vec::with_capacity(prepared.bytes.len() + 256);
    let hash = prepared.seal(seq, &prev, &timestamp, &mut line).to_string();
    let record = AuditRecord { audit_id, event_type, timestamp, actor, session_id, payload, seq, prev, hash };
    (record, into_string(line))
}

/// A record's own fields in canonical form, written ahead by whoever appends it — on its own
/// thread, and for a typed payload with no map built ([`PreparedRecord::new`]): everything but
/// `prev`, `seq` and `timestamp`, which only the log's writer knows, and `hash`, taken over all.
#[derive(Debug, Clone)]
pub struct PreparedRecord {
    /// The fields that sort before `hash` (`"actor":{…},"audit_id":"…","event_type":"…"`), then
    /// `"payload":{…}`, then `,"session_id":"…"` when there is one.
    bytes: Vec<u8>,
    head_end: usize,
    payload_end: usize,
}

impl PreparedRecord {
    /// A record whose payload `payload` writes, entry by entry in key order.
    pub fn new(
        actor: &Actor,
        audit_id: &str,
        event_type: &str,
        session_id: Option<&str>,
        payload: impl FnOnce(&mut CanonicalObject<'_>),
    ) -> PreparedRecord {
        PreparedRecord::written(actor, audit_id, event_type, session_id, |out| CanonicalObject::write(out, payload))
    }

    /// A record whose payload is a map, canonicalized.
    pub fn with_payload(
        actor: &Actor,
        audit_id: &str,
        event_type: &str,
        session_id: Option<&str>,
        payload: &Map<String, Value>,
    ) -> PreparedRecord {
        PreparedRecord::written(actor, audit_id, event_type, session_id, |out| write_canonical_map(payload, out))
    }

    fn written(
        actor: &Actor,
        audit_id: &str,
        event_type: &str,
        session_id: Option<&str>,
        payload: impl FnOnce(&mut Vec<u8>),
    ) -> PreparedRecord {
        // Room for a run's record with a step or two at once.
        let mut bytes = Vec::with_capacity(1024);
        write_record_head(actor, audit_id, event_type, &mut bytes);
        let head_end = bytes.len();
        bytes.extend_from_slice(b"\"payload\":");
        payload(&mut bytes);
        let payload_end = bytes.len();
        write_session_field(session_id, &mut bytes);
        PreparedRecord { bytes, head_end, payload_end }
    }

    /// Appends the record's line (canonical JSON with `hash`, no newline) to `out` as record `seq`
    /// after `prev`, stamped `timestamp`, and returns its hash. Written once: the form without
    /// `hash` is hashed where it lies, then the hash goes in after the head (`hash` sorts between
    /// `event_type` and `payload`), moving only this line's tail.
    pub fn seal(&self, seq: u64, prev: &str, timestamp: &str, out: &mut Vec<u8>) -> ContentHash {
        let start = out.len();
        let head_end = self.write_line(seq, prev, timestamp, None, out);
        let hash = ContentHash::from_digest(Sha256::digest(&out[start..]));
        // `,"hash":"sha256:<hex>"`, from the stack: nothing in it needs escaping.
        let mut field = *b",\"hash\":\"sha256:0000000000000000000000000000000000000000000000000000000000000000\"";
        field[9..80].copy_from_slice(&hash.text());
        // Room at the end, the tail moved up into it, the field copied into the gap (two copies;
        // `Vec::splice` walks its iterator byte by byte: ~900 instructions a record).
        let tail = out.len() - head_end;
        out.extend_from_slice(&field);
        out.copy_within(head_end..head_end + tail, head_end + field.len());
        out[head_end..head_end + field.len()].copy_from_slice(&field);
        hash
    }

    /// Appends the record's line as record `seq` after `prev`, stamped `timestamp`, with `hash`
    /// when given, and returns where its head ends in `out` (where `hash` goes). Keys in byte
    /// order: `actor`, `audit_id`, `event_type`, `hash`, `payload`, `prev`, `seq`, `session_id`
    /// (only when present), `timestamp` — exactly what canonicalizing the record's serde
    /// serialization gives (a test keeps it so).
    fn write_line(&self, seq: u64, prev: &str, timestamp: &str, hash: Option<&str>, out: &mut Vec<u8>) -> usize {
        out.push(b'{');
        out.extend_from_slice(&self.bytes[..self.head_end]);
        let head_end = out.len();
        if let Some(hash) = hash {
            out.extend_from_slice(b",\"hash\":");
            write_str(hash, out);
        }
        out.push(b',');
        out.extend_from_slice(&self.bytes[self.head_end..self.payload_end]);
        out.extend_from_slice(b",\"prev\":");
        write_str(prev, out);
        out.extend_from_slice(b",\"seq\":");
        write_u64(seq, out);
        out.extend_from_slice(&self.bytes[self.payload_end..]);
        out.extend_from_slice(b",\"timestamp\":");
        write_str(timestamp, out);
        out.push(b'}');
        head_end
    }
}

/// A record's `hash`: `sha256:` and the hex of `canonical`'s digest.
fn record_hash(canonical: &[u8]) -> String {
    ContentHash::from_digest(Sha256::digest(canonical)).to_string()
}

/// The fields that sort before `hash`.
fn write_record_head(actor: &Actor, audit_id: &str, event_type: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"\"actor\":{\"id\":");
    write_str(&actor.id, out);
    out.extend_from_slice(b",\"type\":");
    write_str(actor.r#type.as_str(), out);
    out.extend_from_slice(b"},\"audit_id\":");
    write_str(audit_id, out);
    out.extend_from_slice(b",\"event_type\":");
    write_str(event_type, out);
}

fn write_session_field(session_id: Option<&str>, out: &mut Vec<u8>) {
    if let Some(session_id) = session_id {
        out.extend_from_slice(b",\"session_id\":");
        write_str(session_id, out);
    }
}

/// Removes `hash` from `value` (a record object) and returns the hash of what remains.
fn hash_of_value_without_hash(value: &mut Value, scratch: &mut Vec<u8>) -> String {
    if let Value::Object(map) = value {
        map.remove("hash");
    }
    scratch.clear();
    write_canonical(value, scratch);
    record_hash(scratch)
}

/// One line of a log file, as handed to the verifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLine<'a> {
    /// File name (not a full path), e.g. `audit-2026-11-22.jsonl`.
    pub file: &'a str,
    /// 1-based line number within the file.
    pub line: usize,
    /// The line without its newline.
    pub text: &'a str,
    pub is_last_line_of_last_file: bool,
    pub has_trailing_newline: bool,
}

/// Splits one file's text into [`LogLine`]s. A file that ends with a newline has no extra empty
/// line; bytes after the last newline form a final line with `has_trailing_newline == false`.
pub fn log_lines<'a>(file: &'a str, text: &'a str, is_last_file: bool) -> impl Iterator<Item = LogLine<'a>> + 'a {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let ends_with_newline = text.ends_with('\n');
    let count = if text.is_empty() { 0 } else { body.split('\n').count() };
    body.split('\n').take(count).enumerate().map(move |(index, line_text)| {
        let is_last = index + 1 == count;
        LogLine {
            file,
            line: index + 1,
            text: line_text,
            is_last_line_of_last_file: is_last_file && is_last,
            has_trailing_newline: !is_last || ends_with_newline,
        }
    })
}

/// A position in the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinePosition {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for LinePosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {} of file {}", self.line, self.file)
    }
}

/// The outcome of a successful verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Records that verified.
    pub records: u64,
    /// Files that contained at least one line.
    pub files: usize,
    /// `seq` of the last verified record (0 for an empty log).
    pub last_seq: u64,
    /// `hash` of the last verified record ([`GENESIS_PREV`] for an empty log).
    pub last_hash: String,
    /// The torn last line that was skipped, if any.
    pub torn_tail_skipped: Option<LinePosition>,
    /// Whether the log's end could be checked against the head anchored outside the log files
    /// (SPEC §10). The chain verifier cannot see the anchor: it reports [`HeadAnchor::Ok`] and
    /// whoever reads the anchor sets the others.
    pub head_anchor: HeadAnchor,
}

/// The state of the chain-head anchor a verification found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HeadAnchor {
    /// The log ends at or after the anchored head (which may lag after a crash), or there is
    /// nothing to anchor (no records).
    Ok,
    /// The log has records but the anchor file is gone: records removed from the end of the log
    /// cannot be detected.
    Missing,
    /// The log has records but the anchor does not parse (emptied or overwritten): records
    /// removed from the end of the log cannot be detected.
    Unreadable,
}

impl HeadAnchor {
    /// As serialized: `ok`, `missing`, `unreadable`.
    pub fn as_str(self) -> &'static str {
        match self {
            HeadAnchor::Ok => "ok",
            HeadAnchor::Missing => "missing",
            HeadAnchor::Unreadable => "unreadable",
        }
    }
}

impl VerifyReport {
    /// What to tell the user besides the `ok` line: the end of the log could not be checked.
    pub fn warning(&self) -> Option<String> {
        if self.head_anchor == HeadAnchor::Ok {
            return None;
        }
        let state = self.head_anchor.as_str();
        Some(format!(
            "the chain head anchor (audit/chain-head) is {state} although the log holds {} records, so records \
             removed from the end of the log cannot be detected; the daemon anchors the head again when it starts",
            self.records
        ))
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ok: {} records in {} file(s), hash chain intact (last seq {}, {})",
            self.records, self.files, self.last_seq, self.last_hash
        )?;
        if let Some(torn) = &self.torn_tail_skipped {
            write!(f, "; skipped a torn last line ({torn}) left by a crash")?;
        }
        Ok(())
    }
}

/// Why the chain is broken at a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakReason {
    UnparsableJson(String),
    /// Valid JSON that lacks a chain field (`seq`, `prev` or `hash`) or has it with the wrong type.
    NotARecord(&'static str),
    HashMismatch,
    /// `previous` is the last verified record; `None` means the record should have been the first
    /// of the log and carry the genesis `prev`.
    PrevDoesNotLink {
        previous: Option<LinePosition>,
    },
    SeqGap {
        expected: u64,
        found: u64,
    },
}

impl fmt::Display for BreakReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakReason::UnparsableJson(error) => write!(f, "unparsable JSON ({error})"),
            BreakReason::NotARecord(field) => write!(f, "not an audit record: `{field}` missing or of the wrong type"),
            BreakReason::HashMismatch => f.write_str("hash mismatch"),
            BreakReason::PrevDoesNotLink { previous: Some(previous) } => {
                write!(f, "prev does not link to {previous}")
            }
            BreakReason::PrevDoesNotLink { previous: None } => {
                f.write_str("prev does not link to the genesis value (this is the first record of the log)")
            }
            BreakReason::SeqGap { expected, found } => write!(f, "seq gap (expected {expected}, found {found})"),
        }
    }
}

/// The first line at which the chain does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit chain broken at line {line} of file {file}: {reason}")]
pub struct ChainBreak {
    pub file: String,
    pub line: usize,
    pub reason: BreakReason,
}

/// Incremental verifier, so a caller can stream files one at a time. A clone is the chain's
/// state after the lines pushed so far: verification can resume from it.
#[derive(Debug, Clone)]
pub struct ChainVerifier {
    expected_seq: u64,
    prev_hash: String,
    previous: Option<LinePosition>,
    records: u64,
    files: usize,
    current_file: Option<String>,
    torn_tail_skipped: Option<LinePosition>,
    /// The canonical form of the line being checked (one buffer for the whole chain).
    scratch: Vec<u8>,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        ChainVerifier::new()
    }
}

impl ChainVerifier {
    pub fn new() -> ChainVerifier {
        ChainVerifier {
            expected_seq: 1,
            prev_hash: GENESIS_PREV.to_string(),
            previous: None,
            records: 0,
            files: 0,
            current_file: None,
            torn_tail_skipped: None,
            scratch: Vec::new(),
        }
    }

    pub fn push(&mut self, line: LogLine<'_>) -> Result<(), ChainBreak> {
        if is_torn(&line) {
            return self.push_checked(line, Err(BreakReason::NotARecord("hash")));
        }
        let checked = check_line(line.text, &mut self.scratch);
        self.push_checked(line, checked)
    }

    /// [`ChainVerifier::push`] of a line whose [`check_line`] was done elsewhere (lines are
    /// checked on their own in any order, on any thread; they are linked here, in order).
    pub fn push_checked(
        &mut self,
        line: LogLine<'_>,
        checked: Result<CheckedLine, BreakReason>,
    ) -> Result<(), ChainBreak> {
        if self.current_file.as_deref() != Some(line.file) {
            self.current_file = Some(line.file.to_string());
            self.files += 1;
        }
        let position = LinePosition { file: line.file.to_string(), line: line.line };
        let brk = |reason| ChainBreak { file: line.file.to_string(), line: line.line, reason };
        if is_torn(&line) {
            self.torn_tail_skipped = Some(position);
            return Ok(());
        }
        let CheckedLine { seq, prev, hash } = checked.map_err(brk)?;
        if prev != self.prev_hash {
            return Err(brk(BreakReason::PrevDoesNotLink { previous: self.previous.clone() }));
        }
        if seq != self.expected_seq {
            return Err(brk(BreakReason::SeqGap { expected: self.expected_seq, found: seq }));
        }
        self.expected_seq += 1;
        self.prev_hash = hash;
        self.previous = Some(position);
        self.records += 1;
        Ok(())
    }

    pub fn finish(self) -> VerifyReport {
        VerifyReport {
            records: self.records,
            files: self.files,
            last_seq: self.expected_seq - 1,
            last_hash: self.prev_hash,
            torn_tail_skipped: self.torn_tail_skipped,
            head_anchor: HeadAnchor::Ok,
        }
    }
}

/// Only a final line without its newline is a torn write (skipped); a complete line that does
/// not parse was written whole and then damaged: tampering, wherever it is.
fn is_torn(line: &LogLine<'_>) -> bool {
    line.is_last_line_of_last_file && !line.has_trailing_newline
}

/// What one line says about the chain, once it parsed and its own hash matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedLine {
    pub seq: u64,
    pub prev: String,
    pub hash: String,
}

/// Checks one line on its own: a record with its chain fields, whose `hash` is the hash of the
/// rest of it. `scratch` is a buffer for the canonical form (one per thread).
pub fn check_line(text: &str, scratch: &mut Vec<u8>) -> Result<CheckedLine, BreakReason> {
    let mut value: Value =
        serde_json::from_str(text).map_err(|error| BreakReason::UnparsableJson(error.to_string()))?;
    let hash = value.get("hash").and_then(Value::as_str).ok_or(BreakReason::NotARecord("hash"))?.to_string();
    let seq = value.get("seq").and_then(Value::as_u64).ok_or(BreakReason::NotARecord("seq"))?;
    let prev = value.get("prev").and_then(Value::as_str).ok_or(BreakReason::NotARecord("prev"))?.to_string();
    if hash_of_value_without_hash(&mut value, scratch) != hash {
        return Err(BreakReason::HashMismatch);
    }
    Ok(CheckedLine { seq, prev, hash })
}

/// Verifies a whole log given as lines in order (files in date order, lines in file order).
pub fn verify_chain<'a>(lines: impl IntoIterator<Item = LogLine<'a>>) -> Result<VerifyReport, ChainBreak> {
    let mut verifier = ChainVerifier::new();
    for line in lines {
        verifier.push(line)?;
    }
    Ok(verifier.finish())
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    fn unsealed(n: u64) -> UnsealedRecord {
        let mut payload = Map::new();
        payload.insert("aileron.connector.fqn".into(), "github://acme/slack".into());
        payload.insert("aileron.n".into(), n.into());
        payload.insert("nested".into(), serde_json::json!({"z": [1, {"b": 2, "a": 1}], "a": null}));
        UnsealedRecord {
            audit_id: format!("audit-{n}"),
            event_type: "action.executed".into(),
            timestamp: format!("2026-11-22T05:37:00.{n:03}Z"),
            actor: Actor::new(ActorType::Agent, "claude"),
            session_id: n.is_multiple_of(2).then(|| format!("sess-{n}")),
            payload,
        }
    }

    /// A chain of `n` records as lines.
    fn chain(n: u64) -> Vec<String> {
        let mut prev = GENESIS_PREV.to_string();
        (1..=n)
            .map(|seq| {
                let record = seal(unsealed(seq), seq, prev.clone());
                prev = record.hash.clone();
                record.to_line()
            })
            .collect()
    }

    /// `files` as (name, content) in order, verified as a whole.
    fn verify_files(files: &[(&str, String)]) -> Result<VerifyReport, ChainBreak> {
        let last = files.len().saturating_sub(1);
        verify_chain(files.iter().enumerate().flat_map(|(i, (name, text))| log_lines(name, text, i == last)))
    }

    fn joined(lines: &[String]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn sealed_line_round_trips_and_hash_covers_everything_but_hash() {
        let record = seal(unsealed(1), 1, GENESIS_PREV.into());
        let line = record.to_line();
        let parsed: AuditRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed, record);
        assert!(record.hash.starts_with("sha256:") && record.hash.len() == 71);
        // The line is already canonical: re-canonicalizing it changes nothing.
        assert_eq!(canonical_json(&serde_json::from_str(&line).unwrap()), line);
        let mut without_hash: Value = serde_json::from_str(&line).unwrap();
        without_hash.as_object_mut().unwrap().remove("hash");
        let expected = format!("sha256:{}", hex::encode(Sha256::digest(canonical_json(&without_hash))));
        assert_eq!(record.hash, expected);
        assert!(!line.contains("session_id"), "absent session ids are omitted: {line}");
        assert!(line.contains(r#""actor":{"id":"claude","type":"agent"}"#), "{line}");
    }

    #[test]
    fn log_lines_table() {
        // (text, is_last_file) -> [(line, text, is_last_line_of_last_file, has_trailing_newline)]
        let check = |text: &str, is_last_file: bool, expected: &[(usize, &str, bool, bool)]| {
            let got: Vec<_> = log_lines("f", text, is_last_file)
                .map(|l| (l.line, l.text, l.is_last_line_of_last_file, l.has_trailing_newline))
                .collect();
            assert_eq!(got, expected, "{text:?}");
        };
        check("", true, &[]);
        check("a\n", true, &[(1, "a", true, true)]);
        check("a\nb\n", true, &[(1, "a", false, true), (2, "b", true, true)]);
        check("a\nb", true, &[(1, "a", false, true), (2, "b", true, false)]);
        check("a\nb", false, &[(1, "a", false, true), (2, "b", false, false)]);
        check("a\n\n", true, &[(1, "a", false, true), (2, "", true, true)]);
    }

    #[test]
    fn chain_verification_table() {
        let lines = chain(5);
        let torn_half = &lines[4][..lines[4].len() / 2];
        let tampered = lines[2].replace("github://acme/slack", "github://evil/slack");
        let mut swapped = lines.clone();
        swapped.swap(2, 3);
        let mut deleted = lines.clone();
        deleted.remove(2);
        let mut forged_seq = lines.clone();
        {
            // A record that re-hashes correctly and links, but skips a seq number.
            let previous: AuditRecord = serde_json::from_str(&lines[1]).unwrap();
            forged_seq[2] = seal(unsealed(3), 4, previous.hash).to_line();
        }
        // (records verified, files, torn tail position) or the break
        type Outcome = Result<(u64, usize, Option<(String, usize)>), ChainBreak>;
        // (file name, content) in order
        type Files<'a> = Vec<(&'a str, String)>;
        let ok = |records: u64, files: usize, torn: Option<(&str, usize)>| {
            Outcome::Ok((records, files, torn.map(|(f, l)| (f.to_string(), l))))
        };
        let broken =
            |file: &str, line: usize, reason: BreakReason| Outcome::Err(ChainBreak { file: file.into(), line, reason });
        let at = |file: &str, line: usize| Some(LinePosition { file: file.into(), line });

        let cases: Vec<(&str, Files, Outcome)> = vec![
            ("intact", vec![("d1", joined(&lines))], ok(5, 1, None)),
            ("empty log", vec![], ok(0, 0, None)),
            ("empty file", vec![("d1", String::new())], ok(0, 0, None)),
            (
                "tampered payload",
                vec![("d1", joined(&[&lines[..2], &[tampered], &lines[3..]].concat()))],
                broken("d1", 3, BreakReason::HashMismatch),
            ),
            (
                "deleted line",
                vec![("d1", joined(&deleted))],
                broken("d1", 3, BreakReason::PrevDoesNotLink { previous: at("d1", 2) }),
            ),
            (
                "reordered lines",
                vec![("d1", joined(&swapped))],
                broken("d1", 3, BreakReason::PrevDoesNotLink { previous: at("d1", 2) }),
            ),
            (
                "seq gap",
                vec![("d1", joined(&forged_seq))],
                broken("d1", 3, BreakReason::SeqGap { expected: 3, found: 4 }),
            ),
            (
                "first record missing",
                vec![("d1", joined(&lines[1..]))],
                broken("d1", 1, BreakReason::PrevDoesNotLink { previous: None }),
            ),
            (
                "torn tail without newline",
                vec![("d1", format!("{}{torn_half}", joined(&lines[..4])))],
                ok(4, 1, Some(("d1", 5))),
            ),
            (
                "complete last line without newline is still torn",
                vec![("d1", format!("{}{}", joined(&lines[..4]), lines[4]))],
                ok(4, 1, Some(("d1", 5))),
            ),
            (
                "an unparsable complete last line is tampering, not a torn write",
                vec![("d1", format!("{}{torn_half}\n", joined(&lines[..4])))],
                Err(ChainBreak { file: "d1".into(), line: 5, reason: BreakReason::UnparsableJson(String::new()) }),
            ),
            (
                "unparsable line in the middle",
                vec![("d1", format!("{}{torn_half}\n{}", joined(&lines[..2]), joined(&lines[3..])))],
                Err(ChainBreak { file: "d1".into(), line: 3, reason: BreakReason::UnparsableJson(String::new()) }),
            ),
            (
                "torn tail of an earlier file is a break",
                vec![("d1", format!("{}{torn_half}", joined(&lines[..2]))), ("d2", joined(&lines[2..]))],
                Err(ChainBreak { file: "d1".into(), line: 3, reason: BreakReason::UnparsableJson(String::new()) }),
            ),
            (
                "cross-file continuity",
                vec![("d1", joined(&lines[..2])), ("d2", joined(&lines[2..4])), ("d3", joined(&lines[4..]))],
                ok(5, 3, None),
            ),
            (
                "file missing in the middle",
                vec![("d1", joined(&lines[..2])), ("d3", joined(&lines[4..]))],
                broken("d3", 1, BreakReason::PrevDoesNotLink { previous: at("d1", 2) }),
            ),
            (
                "files in the wrong order",
                vec![("d2", joined(&lines[2..])), ("d1", joined(&lines[..2]))],
                broken("d2", 1, BreakReason::PrevDoesNotLink { previous: None }),
            ),
            (
                "not a record",
                vec![("d1", "{\"a\":1}\n{\"a\":2}\n".into())],
                broken("d1", 1, BreakReason::NotARecord("hash")),
            ),
        ];
        for (name, files, expected) in cases {
            let got = verify_files(&files).map(|r| (r.records, r.files, r.torn_tail_skipped.map(|p| (p.file, p.line))));
            // Parser messages are serde_json's business; compare the reason's kind for those.
            let normalize = |r: Result<_, ChainBreak>| {
                r.map_err(|mut b| {
                    if let BreakReason::UnparsableJson(m) = &mut b.reason {
                        m.clear();
                    }
                    b
                })
            };
            assert_eq!(normalize(got), expected, "{name}");
        }
    }

    #[test]
    fn report_names_the_chain_head() {
        let lines = chain(3);
        let report = verify_files(&[("d1", joined(&lines))]).unwrap();
        let last: AuditRecord = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!((report.last_seq, report.last_hash), (3, last.hash));
        let empty = verify_files(&[]).unwrap();
        assert_eq!((empty.last_seq, empty.last_hash.as_str()), (0, GENESIS_PREV));
    }

    #[test]
    fn break_messages_name_file_line_and_reason() {
        let check = |reason: BreakReason, expected: &str| {
            let brk = ChainBreak { file: "audit-2026-11-22.jsonl".into(), line: 7, reason };
            assert_eq!(brk.to_string(), expected);
        };
        check(BreakReason::HashMismatch, "audit chain broken at line 7 of file audit-2026-11-22.jsonl: hash mismatch");
        check(
            BreakReason::PrevDoesNotLink {
                previous: Some(LinePosition { file: "audit-2026-11-21.jsonl".into(), line: 40 }),
            },
            "audit chain broken at line 7 of file audit-2026-11-22.jsonl: prev does not link to line 40 of file \
             audit-2026-11-21.jsonl",
        );
        check(
            BreakReason::SeqGap { expected: 3, found: 5 },
            "audit chain broken at line 7 of file audit-2026-11-22.jsonl: seq gap (expected 3, found 5)",
        );
    }
}
