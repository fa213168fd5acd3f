//! The audit export (SPEC §17): with `AILERON_AUDIT_EXPORT=otlp`, every durable record goes to an
//! OpenTelemetry collector as an OTLP LogRecord (OTLP/HTTP, protobuf, the official schema): body
//! the record's line, attributes its payload keys plus `aileron.audit.seq|hash|id` and
//! `event.name`. From a durable cursor (`audit/export.cursor`, the last seq the collector
//! acknowledged, written after each acknowledged batch): in order, at least once (a batch resent
//! after a crash between the collector's answer and the cursor write is a duplicate, which
//! `aileron audit verify --otlp-json` reports), across restarts and outages (retried with backoff),
//! and never in a run's way: it reads the daily files behind the writer, on its own task.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use serde_json::Value;
use tokio::sync::watch;

use super::daily_file::ForwardLines;
use crate::platform::env;
use crate::platform::home::write_atomic;
use crate::platform::telemetry::otlp::OtlpTarget;

pub const CURSOR_FILE: &str = "export.cursor";
/// Records per request.
const BATCH: usize = 512;
/// After a request that was not full, how long the exporter lets records gather before the next
/// (as the OTel SDK's batch processors wait out an interval): a run per request would cost every
/// run a request, a cursor write and its fsync. The collector is at most this far behind.
const LINGER: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where the records go, from `AILERON_AUDIT_EXPORT=otlp` and the OTel SDK's variables, resolved
/// as the span exporter resolves its own ([`OtlpTarget`]): `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (the
/// whole URL), else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs` (default `http://localhost:4318`);
/// `OTEL_EXPORTER_OTLP_LOGS_HEADERS`, else `..._HEADERS`; `OTEL_EXPORTER_OTLP_LOGS_TIMEOUT`, else
/// `..._TIMEOUT` (milliseconds a request may take; default 10 s). `None`: no export.
pub fn target_from_env() -> Result<Option<OtlpTarget>, String> {
    match env::get(env::AILERON_AUDIT_EXPORT).as_deref() {
        None | Some("") | Some("none") => Ok(None),
        Some("otlp") => OtlpTarget::from_lookup("logs", None, env::get).map(Some),
        Some(other) => {
            Err(format!("AILERON_AUDIT_EXPORT={other} is not an export\nhint: set it to `otlp` (or unset it)"))
        }
    }
}

/// What `aileron status` shows of the export.
#[derive(Debug)]
pub struct ExportStatus {
    pub endpoint: String,
    /// The last seq the collector acknowledged.
    pub exported: AtomicU64,
    pub last_error: std::sync::Mutex<Option<String>>,
}

/// The last seq the collector acknowledged, from `audit/export.cursor` (0: none yet).
pub fn read_cursor(audit_dir: &Path) -> u64 {
    std::fs::read_to_string(audit_dir.join(CURSOR_FILE)).ok().and_then(|text| text.trim().parse().ok()).unwrap_or(0)
}

/// Starts the exporter on the current runtime; its status.
pub fn start(target: OtlpTarget, audit_dir: PathBuf, durable: watch::Receiver<u64>) -> Arc<ExportStatus> {
    let status = Arc::new(ExportStatus {
        endpoint: target.endpoint.clone(),
        exported: AtomicU64::new(read_cursor(&audit_dir)),
        last_error: std::sync::Mutex::new(None),
    });
    tokio::spawn(run(target, audit_dir, durable, status.clone()));
    status
}

async fn run(target: OtlpTarget, audit_dir: PathBuf, mut durable: watch::Receiver<u64>, status: Arc<ExportStatus>) {
    let client = match reqwest::Client::builder().timeout(target.timeout).build() {
        Ok(client) => client,
        Err(error) => {
            *status.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.to_string());
            return;
        }
    };
    let mut reader = None;
    let mut backoff = Duration::from_millis(250);
    loop {
        let exported = status.exported.load(Ordering::Acquire);
        let head = *durable.borrow_and_update();
        if exported >= head {
            if durable.changed().await.is_err() {
                return;
            }
            continue;
        }
        // The lines past the cursor, read behind the writer on a blocking thread.
        let dir = audit_dir.clone();
        let taken = reader.take();
        let read = tokio::task::spawn_blocking(move || {
            let mut reader = match taken {
                Some(reader) => reader,
                None => ForwardLines::at(&dir, exported)?,
            };
            let lines = reader.next_lines(head - exported, BATCH)?;
            Ok::<_, io::Error>((reader, lines))
        })
        .await;
        let (next_reader, lines) = match read {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => {
                fail(&status, format!("reading the audit log: {error}"), &mut backoff).await;
                continue;
            }
            Err(error) => {
                fail(&status, error.to_string(), &mut backoff).await;
                continue;
            }
        };
        if lines.is_empty() {
            reader = None;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let body = request(&lines).encode_to_vec();
        let mut post = client.post(&target.endpoint).header("content-type", "application/x-protobuf").body(body);
        for (name, value) in &target.headers {
            post = post.header(name, value);
        }
        let sent = match post.send().await {
            Ok(response) if response.status().is_success() => Ok(()),
            Ok(response) => Err(format!("the collector answered {}", response.status())),
            Err(error) if error.is_timeout() => Err(format!(
                "sending to {}: no answer in {} ms (the wait is OTEL_EXPORTER_OTLP_LOGS_TIMEOUT, else \
                 OTEL_EXPORTER_OTLP_TIMEOUT, in milliseconds)",
                target.endpoint,
                target.timeout.as_millis()
            )),
            Err(error) => Err(format!("sending to {}: {error}", target.endpoint)),
        };
        match sent {
            Ok(()) => {
                let last = exported + lines.len() as u64;
                let dir = audit_dir.clone();
                let written = tokio::task::spawn_blocking(move || {
                    write_atomic(&dir.join(CURSOR_FILE), format!("{last}\n").as_bytes(), 0o600)
                })
                .await;
                if let Ok(Err(error)) | Err(error) = written.map_err(io::Error::other) {
                    // The records were delivered: they may be sent again after a restart.
                    log_line!("aileron: warning: writing the audit export cursor failed: {error}");
                }
                status.exported.store(last, Ordering::Release);
                *status.last_error.lock().unwrap_or_else(|e| e.into_inner()) = None;
                backoff = Duration::from_millis(250);
                reader = Some(next_reader);
                if lines.len() < BATCH {
                    tokio::time::sleep(LINGER).await;
                }
            }
            Err(error) => fail(&status, error, &mut backoff).await,
        }
    }
}

async fn fail(status: &ExportStatus, error: String, backoff: &mut Duration) {
    *status.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    tokio::time::sleep(*backoff).await;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

fn text(value: impl Into<String>) -> Option<AnyValue> {
    Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) })
}

fn attribute(key: &str, value: &Value) -> KeyValue {
    let value = match value {
        Value::String(s) => any_value::Value::StringValue(s.clone()),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => any_value::Value::IntValue(i),
            None => any_value::Value::DoubleValue(n.as_f64().unwrap_or_default()),
        },
        other => any_value::Value::StringValue(other.to_string()),
    };
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

/// One request of the batch's records.
fn request(lines: &[Vec<u8>]) -> ExportLogsServiceRequest {
    let records = lines
        .iter()
        .map(|line| {
            let record: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
            let time = record["timestamp"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .and_then(|t| t.timestamp_nanos_opt())
                .map_or(0, |nanos| nanos as u64);
            let mut attributes: Vec<KeyValue> =
                record["payload"].as_object().into_iter().flatten().map(|(key, value)| attribute(key, value)).collect();
            attributes.push(attribute("aileron.audit.seq", &record["seq"]));
            attributes.push(attribute("aileron.audit.hash", &record["hash"]));
            attributes.push(attribute("aileron.audit.id", &record["audit_id"]));
            attributes.push(attribute("event.name", &record["event_type"]));
            LogRecord {
                time_unix_nano: time,
                observed_time_unix_nano: time,
                body: text(String::from_utf8_lossy(line)),
                attributes,
                event_name: record["event_type"].as_str().unwrap_or_default().to_string(),
                ..LogRecord::default()
            }
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![attribute("service.name", &Value::from("aileron"))],
                ..Resource::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "aileron.audit".to_string(),
                    version: crate::platform::process::VERSION.to_string(),
                    ..InstrumentationScope::default()
                }),
                log_records: records,
                ..ScopeLogs::default()
            }],
            ..ResourceLogs::default()
        }],
    }
}

/// What `aileron audit verify --otlp-json` found in a collector's file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OtlpReport {
    pub records: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Records the collector holds more than once (at-least-once delivery).
    pub duplicates: u64,
}

/// Checks the records an OTLP collector's file exporter wrote (one OTLP/JSON export request per
/// line, the record line as each log record's string body): every record's own hash, the chain
/// between consecutive records, no gap between the first and the last, and duplicates counted (a
/// second copy with another hash is a conflict, not a duplicate).
pub fn check_otlp_json(text: &str) -> Result<OtlpReport, String> {
    let mut by_seq: std::collections::BTreeMap<u64, (String, String)> = std::collections::BTreeMap::new();
    let mut duplicates = 0u64;
    let mut scratch = Vec::new();
    for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        let request: Value = serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", number + 1))?;
        let bodies = request["resourceLogs"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|resource| resource["scopeLogs"].as_array().into_iter().flatten())
            .flat_map(|scope| scope["logRecords"].as_array().into_iter().flatten())
            .filter_map(|record| record["body"]["stringValue"].as_str());
        for body in bodies {
            let checked = aileron_core::audit::check_line(body, &mut scratch)
                .map_err(|reason| format!("line {}: a record does not match its hash: {reason:?}", number + 1))?;
            match by_seq.get(&checked.seq) {
                Some((hash, _)) if *hash == checked.hash => duplicates += 1,
                Some(_) => return Err(format!("record {} arrived twice with different contents", checked.seq)),
                None => {
                    by_seq.insert(checked.seq, (checked.hash, checked.prev));
                }
            }
        }
    }
    let (Some(&first), Some(&last)) = (by_seq.keys().next(), by_seq.keys().next_back()) else {
        return Err("the file holds no audit records".to_string());
    };
    let held = by_seq.len() as u64;
    if held != last - first + 1 {
        let missing = (first..=last).find(|seq| !by_seq.contains_key(seq)).unwrap_or(first);
        return Err(format!("records are missing between {first} and {last}, the first being {missing}"));
    }
    let mut previous: Option<&String> = None;
    for (seq, (hash, prev)) in &by_seq {
        if previous.is_some_and(|before| prev != before) {
            return Err(format!("record {seq} does not follow record {} (the chain breaks)", seq - 1));
        }
        previous = Some(hash);
    }
    Ok(OtlpReport { records: held, first_seq: first, last_seq: last, duplicates })
}
