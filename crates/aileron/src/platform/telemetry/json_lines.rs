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
use serde::Serialize;
use serde_json::Map;

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
            write_span_line(&mut bytes, span, &self.resource);
            bytes.push(b'\n');
        }
        let written = self.sink.lock().expect("trace sink poisoned").write(&bytes);
        let result = written.map_err(|error| {
            if !self.warned.swap(true, Ordering::Relaxed) {
                log_line!("aileron: warning: writing spans failed: {error}; spans are being dropped");
            }
            OTelSdkError::InternalFailure(format!("writing spans: {error}"))
        });
        std::future::ready(result)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.iter().map(|(key, value)| (key.to_string(), json_value(value))).collect();
    }
}

/// Appends one span to `out` as a JSON object on one line (no newline). Its keys come in sorted order at every
/// level, as a `serde_json::Value` of the same span prints them (the format this exporter always
/// wrote); it is serialized straight from the span, borrowing its names, attributes and the
/// exporter's resource, with no intermediate tree.
pub fn write_span_line<'a>(out: &mut Vec<u8>, span: &'a SpanData, resource: &'a Map<String, serde_json::Value>) {
    let context = &span.span_context;
    let (code, message) = match &span.status {
        Status::Unset => ("unset", None),
        Status::Ok => ("ok", None),
        Status::Error { description } => ("error", Some(description.as_ref())),
    };
    let line = SpanLine {
        attributes: Attributes(&span.attributes),
        duration_ns: span.end_time.duration_since(span.start_time).map(|d| d.as_nanos() as u64).unwrap_or(0),
        end_time: rfc3339(span.end_time),
        events: (!span.events.is_empty()).then(|| {
            let line = |event: &'a opentelemetry::trace::Event| EventLine {
                attributes: Attributes(&event.attributes),
                name: &event.name,
                time: rfc3339(event.timestamp),
            };
            span.events.iter().map(line).collect()
        }),
        kind: kind_name(&span.span_kind),
        links: (!span.links.is_empty()).then(|| {
            let link = |link: &opentelemetry::trace::Link| LinkLine {
                span_id: Hex(link.span_context.span_id()),
                trace_id: Hex(link.span_context.trace_id()),
            };
            span.links.iter().map(link).collect()
        }),
        name: &span.name,
        parent_span_id: (span.parent_span_id != opentelemetry::trace::SpanId::INVALID)
            .then_some(Hex(span.parent_span_id)),
        resource,
        scope: span.instrumentation_scope.name(),
        span_id: Hex(context.span_id()),
        start_time: rfc3339(span.start_time),
        status: StatusLine { code, message },
        trace_id: Hex(context.trace_id()),
    };
    serde_json::to_writer(out, &line).expect("a span line serializes into memory: every key is a string")
}

/// A span's line. The fields are in sorted key order: serialized, they read as a
/// `serde_json::Value` of the same content prints.
#[derive(Serialize)]
struct SpanLine<'a> {
    attributes: Attributes<'a>,
    duration_ns: u64,
    end_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<Vec<EventLine<'a>>>,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Vec<LinkLine>>,
    name: &'a str,
    /// `null` for a root span.
    parent_span_id: Option<Hex<opentelemetry::trace::SpanId>>,
    resource: &'a Map<String, serde_json::Value>,
    scope: &'a str,
    span_id: Hex<opentelemetry::trace::SpanId>,
    start_time: String,
    status: StatusLine<'a>,
    trace_id: Hex<opentelemetry::trace::TraceId>,
}

#[derive(Serialize)]
struct StatusLine<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

#[derive(Serialize)]
struct EventLine<'a> {
    attributes: Attributes<'a>,
    name: &'a str,
    time: String,
}

#[derive(Serialize)]
struct LinkLine {
    span_id: Hex<opentelemetry::trace::SpanId>,
    trace_id: Hex<opentelemetry::trace::TraceId>,
}

/// A trace or span id as its lowercase hex text, written without a `String` of its own.
struct Hex<T>(T);

impl<T: std::fmt::Display> Serialize for Hex<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// Attributes as a JSON object in key order; of a key given twice, the last value (as
/// collecting them into a map keeps).
struct Attributes<'a>(&'a [KeyValue]);

impl Serialize for Attributes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut sorted: Vec<&KeyValue> = self.0.iter().collect();
        // Stable: of equal keys the later stays later, and it is the one written.
        sorted.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
        let mut map = serializer.serialize_map(None)?;
        for (index, kv) in sorted.iter().enumerate() {
            if sorted.get(index + 1).is_some_and(|next| next.key == kv.key) {
                continue;
            }
            map.serialize_entry(kv.key.as_str(), &AttributeValue(&kv.value))?;
        }
        map.end()
    }
}

/// An attribute's value written as [`json_value`] converts it (a float that is not finite, alone
/// or in an array, is `null` either way).
struct AttributeValue<'a>(&'a Value);

impl Serialize for AttributeValue<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Bool(value) => serializer.serialize_bool(*value),
            Value::I64(value) => serializer.serialize_i64(*value),
            Value::F64(value) => serializer.serialize_f64(*value),
            Value::String(value) => serializer.serialize_str(value.as_str()),
            Value::Array(Array::Bool(values)) => values.serialize(serializer),
            Value::Array(Array::I64(values)) => values.serialize(serializer),
            Value::Array(Array::F64(values)) => values.serialize(serializer),
            Value::Array(Array::String(values)) => serializer.collect_seq(values.iter().map(|v| v.as_str())),
            other => json_value(other).serialize(serializer),
        }
    }
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

    /// A span with every part a line can hold: its line is the span's content with each object's
    /// keys in sorted order (what printing a `serde_json::Value` of it gives, byte for byte), a
    /// repeated attribute key keeps its last value, and floats that are not finite are `null`.
    #[test]
    fn a_span_line_is_the_span_with_sorted_keys() {
        use opentelemetry::trace::{Event, Link, SpanContext, SpanId, TraceFlags, TraceId, TraceState};
        use opentelemetry::{InstrumentationScope, StringValue};
        use std::time::Duration;
        let at = |nanos: u64| SystemTime::UNIX_EPOCH + Duration::from_nanos(1_795_000_000_123_456_789 + nanos);
        let context = |trace: &str, span: &str| {
            SpanContext::new(
                TraceId::from_hex(trace).unwrap(),
                SpanId::from_hex(span).unwrap(),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            )
        };
        let mut events = opentelemetry_sdk::trace::SpanEvents::default();
        events.events.push(Event::new(
            "log",
            at(700),
            vec![KeyValue::new("stream", "stderr"), KeyValue::new("line", "hi")],
            0,
        ));
        let mut links = opentelemetry_sdk::trace::SpanLinks::default();
        links.links.push(Link::with_context(context("11111111111111111111111111111111", "2222222222222222")));
        let span = SpanData {
            span_context: context("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"),
            parent_span_id: SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            parent_span_is_remote: false,
            span_kind: SpanKind::Server,
            name: "POST /v1/actions/{name}/run".into(),
            start_time: at(0),
            end_time: at(1_500),
            attributes: vec![
                KeyValue::new("z.last", "quote \" and \\ and \u{1}"),
                KeyValue::new("a.count", 7_i64),
                KeyValue::new("m.ratio", 1.5_f64),
                KeyValue::new("m.nan", f64::NAN),
                KeyValue::new("b.flag", true),
                KeyValue::new("a.count", 8_i64),
                KeyValue::new("arr.bool", Value::Array(Array::Bool(vec![true, false]))),
                KeyValue::new("arr.i64", Value::Array(Array::I64(vec![1, -2]))),
                KeyValue::new("arr.f64", Value::Array(Array::F64(vec![0.25, f64::INFINITY]))),
                KeyValue::new(
                    "arr.str",
                    Value::Array(Array::String(vec![StringValue::from("x"), StringValue::from("é")])),
                ),
            ],
            dropped_attributes_count: 0,
            events,
            links,
            status: Status::error("the step failed"),
            instrumentation_scope: InstrumentationScope::builder("aileron").build(),
        };
        let mut resource = Map::new();
        resource.insert("service.name".into(), "aileron".into());
        resource.insert("process.pid".into(), 42.into());
        let line_of = |span: &SpanData| {
            let mut out = Vec::new();
            write_span_line(&mut out, span, &resource);
            String::from_utf8(out).unwrap()
        };
        let line = line_of(&span);
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed.to_string(), line, "keys in sorted order, nothing but the content");
        let expected = serde_json::json!({
            "name": "POST /v1/actions/{name}/run",
            "kind": "server",
            "trace_id": "0af7651916cd43dd8448eb211c80319c",
            "span_id": "b7ad6b7169203331",
            "parent_span_id": "00f067aa0ba902b7",
            "start_time": "2026-11-18T11:06:40.123456789Z",
            "end_time": "2026-11-18T11:06:40.123458289Z",
            "duration_ns": 1_500,
            "status": { "code": "error", "message": "the step failed" },
            "attributes": {
                "a.count": 8, "arr.bool": [true, false], "arr.f64": [0.25, null], "arr.i64": [1, -2],
                "arr.str": ["x", "é"], "b.flag": true, "m.nan": null, "m.ratio": 1.5,
                "z.last": "quote \" and \\ and \u{1}",
            },
            "resource": { "process.pid": 42, "service.name": "aileron" },
            "scope": "aileron",
            "links": [{ "trace_id": "11111111111111111111111111111111", "span_id": "2222222222222222" }],
            "events": [{ "name": "log", "time": "2026-11-18T11:06:40.123457489Z", "attributes": { "line": "hi", "stream": "stderr" } }],
        });
        assert_eq!(parsed, expected);
        // A root span with no events or links: `parent_span_id` is null, the two lists absent.
        let root = SpanData {
            parent_span_id: SpanId::INVALID,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            ..span
        };
        let root: serde_json::Value = serde_json::from_str(&line_of(&root)).unwrap();
        assert_eq!(root["parent_span_id"], serde_json::Value::Null);
        assert_eq!(root["status"], serde_json::json!({ "code": "unset" }));
        assert!(root.get("events").is_none() && root.get("links").is_none(), "{root}");
    }

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
