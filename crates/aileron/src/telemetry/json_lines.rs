//! The `stdout` and `file` exporters: one JSON object per span per line. `stdout` writes to
//! **stderr** (stdout is the MCP protocol channel of `aileron-mcp`); `file` appends to
//! `<traces dir>/spans-YYYY-MM-DD.jsonl`, named by the local date at export time, so a process
//! that runs across midnight rolls to the next day's file.
//!
//! Each batch is written with one `write_all` on an `O_APPEND` descriptor, so the daemon and an
//! `aileron-mcp` sharing a day's file never interleave inside a line.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use chrono::NaiveDate;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde_json::{Map, json};

/// Today's local date; injectable so tests can cross midnight without waiting for it.
pub type LocalDate = Arc<dyn Fn() -> NaiveDate + Send + Sync>;

/// The system clock's local date.
pub fn system_local_date() -> LocalDate {
    Arc::new(|| chrono::Local::now().date_naive())
}

/// `spans-YYYY-MM-DD.jsonl`.
pub fn daily_file_name(date: NaiveDate) -> String {
    format!("spans-{}.jsonl", date.format("%Y-%m-%d"))
}

/// Where the lines go.
pub enum LineSink {
    Stderr,
    DailyFiles(DailyFiles),
}

/// The file exporter's directory and the day's open file.
pub struct DailyFiles {
    dir: PathBuf,
    today: LocalDate,
    open: Option<(NaiveDate, File)>,
}

impl DailyFiles {
    /// Creates `dir` (0700) and opens today's file, so an unwritable directory is found when the
    /// exporter is built (and degrades to no-op) rather than at the first export.
    pub fn open(dir: &Path, today: LocalDate) -> io::Result<DailyFiles> {
        DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let mut files = DailyFiles { dir: dir.to_path_buf(), today, open: None };
        files.current()?;
        Ok(files)
    }

    /// The file for the current local date, opening the next one when the date changed.
    fn current(&mut self) -> io::Result<&mut File> {
        let date = (self.today)();
        if self.open.as_ref().is_none_or(|(open_date, _)| *open_date != date) {
            let path = self.dir.join(daily_file_name(date));
            let file = OpenOptions::new().create(true).append(true).mode(0o600).open(&path)?;
            self.open = Some((date, file));
        }
        Ok(&mut self.open.as_mut().expect("opened above").1)
    }
}

impl LineSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            LineSink::Stderr => io::stderr().lock().write_all(bytes),
            LineSink::DailyFiles(files) => files.current()?.write_all(bytes),
        }
    }
}

/// A `SpanExporter` writing JSON lines to a [`LineSink`].
pub struct JsonLinesExporter {
    sink: Mutex<LineSink>,
    resource: Map<String, serde_json::Value>,
    /// A write failure at run time is reported once; later ones would only repeat it.
    warned: AtomicBool,
}

impl JsonLinesExporter {
    pub fn new(sink: LineSink) -> JsonLinesExporter {
        JsonLinesExporter { sink: Mutex::new(sink), resource: Map::new(), warned: AtomicBool::new(false) }
    }
}

impl std::fmt::Debug for JsonLinesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonLinesExporter")
    }
}

impl SpanExporter for JsonLinesExporter {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        let mut bytes = Vec::with_capacity(batch.len() * 512);
        for span in &batch {
            bytes.extend_from_slice(span_line(span, &self.resource).as_bytes());
            bytes.push(b'\n');
        }
        let written = self.sink.lock().expect("trace sink poisoned").write(&bytes);
        let result = written.map_err(|error| {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!("aileron: warning: writing spans failed: {error}; spans are being dropped");
            }
            OTelSdkError::InternalFailure(format!("writing spans: {error}"))
        });
        std::future::ready(result)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.iter().map(|(key, value)| (key.to_string(), json_value(value))).collect();
    }
}

/// One span as a JSON object on one line (no newline).
pub fn span_line(span: &SpanData, resource: &Map<String, serde_json::Value>) -> String {
    let context = &span.span_context;
    let parent =
        (span.parent_span_id != opentelemetry::trace::SpanId::INVALID).then(|| span.parent_span_id.to_string());
    let (status, message) = match &span.status {
        Status::Unset => ("unset", None),
        Status::Ok => ("ok", None),
        Status::Error { description } => ("error", Some(description.to_string())),
    };
    let mut line = json!({
        "name": span.name,
        "kind": kind_name(&span.span_kind),
        "trace_id": context.trace_id().to_string(),
        "span_id": context.span_id().to_string(),
        "parent_span_id": parent,
        "start_time": rfc3339(span.start_time),
        "end_time": rfc3339(span.end_time),
        "duration_ns": span.end_time.duration_since(span.start_time).map(|d| d.as_nanos() as u64).unwrap_or(0),
        "status": { "code": status },
        "attributes": attributes(&span.attributes),
        "resource": resource,
        "scope": span.instrumentation_scope.name(),
    });
    if let Some(message) = message {
        line["status"]["message"] = message.into();
    }
    if !span.links.is_empty() {
        line["links"] = span
            .links
            .iter()
            .map(|link| {
                json!({
                    "trace_id": link.span_context.trace_id().to_string(),
                    "span_id": link.span_context.span_id().to_string(),
                })
            })
            .collect();
    }
    if !span.events.is_empty() {
        line["events"] = span
            .events
            .iter()
            .map(|event| {
                json!({ "name": event.name, "time": rfc3339(event.timestamp), "attributes": attributes(&event.attributes) })
            })
            .collect();
    }
    line.to_string()
}

fn attributes(attributes: &[KeyValue]) -> Map<String, serde_json::Value> {
    attributes.iter().map(|kv| (kv.key.to_string(), json_value(&kv.value))).collect()
}

fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Bool(value) => (*value).into(),
        Value::I64(value) => (*value).into(),
        Value::F64(value) => (*value).into(),
        Value::String(value) => value.as_str().into(),
        Value::Array(Array::Bool(values)) => values.clone().into(),
        Value::Array(Array::I64(values)) => values.clone().into(),
        Value::Array(Array::F64(values)) => values.clone().into(),
        Value::Array(Array::String(values)) => values.iter().map(|v| v.as_str()).collect::<Vec<_>>().into(),
        // Both enums are non-exhaustive; a future variant is still shown, as text.
        other => other.to_string().into(),
    }
}

fn kind_name(kind: &SpanKind) -> &'static str {
    match kind {
        SpanKind::Client => "client",
        SpanKind::Server => "server",
        SpanKind::Producer => "producer",
        SpanKind::Consumer => "consumer",
        SpanKind::Internal => "internal",
    }
}

fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicI64;

    #[test]
    fn daily_files_are_named_by_local_date() {
        let check = |(y, m, d): (i32, u32, u32), expected: &str| {
            assert_eq!(daily_file_name(NaiveDate::from_ymd_opt(y, m, d).unwrap()), expected);
        };
        check((2026, 1, 2), "spans-2026-01-02.jsonl");
        check((2026, 12, 31), "spans-2026-12-31.jsonl");
    }

    #[test]
    fn the_file_sink_rolls_when_the_local_date_changes() {
        let temp = tempfile::tempdir().unwrap();
        let offset = Arc::new(AtomicI64::new(0));
        let clock = offset.clone();
        let today: LocalDate = Arc::new(move || {
            NaiveDate::from_ymd_opt(2026, 11, 22).unwrap() + chrono::Days::new(clock.load(Ordering::SeqCst) as u64)
        });
        let dir = temp.path().join("traces");
        let mut sink = LineSink::DailyFiles(DailyFiles::open(&dir, today).unwrap());
        sink.write(b"{\"a\":1}\n").unwrap();
        offset.store(1, Ordering::SeqCst);
        sink.write(b"{\"b\":2}\n").unwrap();
        sink.write(b"{\"c\":3}\n").unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(read("spans-2026-11-22.jsonl"), "{\"a\":1}\n");
        assert_eq!(read("spans-2026-11-23.jsonl"), "{\"b\":2}\n{\"c\":3}\n");
    }

    #[test]
    fn an_unwritable_directory_fails_when_the_sink_is_opened() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        assert!(DailyFiles::open(&file.join("traces"), system_local_date()).is_err());
    }
}
