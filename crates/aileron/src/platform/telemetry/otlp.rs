//! The `otlp` exporters' shared configuration and the span exporter: OTLP/HTTP with the official
//! protobuf schema (opentelemetry-proto's `ExportTraceServiceRequest`).
//!
//! Each span is encoded straight from the SDK's `SpanData` with prost's encoding primitives, when
//! it ends ([`Batch::push`]); a request wraps a batch's bytes in the resource and the scopes, which
//! go through the library's own conversion, once a batch. `opentelemetry-otlp` first converted
//! every span into the generated types (its ids, names and every attribute key and value copied
//! into owned strings, ~15 allocations a span), grouped them through a map keyed by scope, and
//! then encoded those: that was most of the exporter thread's CPU in (d) (BENCHMARKS.md, issue 49).
//!
//! Configuration is the OTel SDK's variables for a signal (`traces` or `logs`): the signal's
//! `OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT` as given, else `OTEL_EXPORTER_OTLP_ENDPOINT` +
//! `/v1/<signal>` (default `http://localhost:4318`); `_<SIGNAL>_HEADERS` else `_HEADERS`
//! (`name=value,…`, values percent-decoded); `_<SIGNAL>_TIMEOUT` else `_TIMEOUT` (ms, default
//! 10000). A compression or a protocol other than `http/protobuf` is refused with a hint rather
//! than ignored.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, Status, TraceState};
use opentelemetry::{Array, InstrumentationScope, KeyValue, Value};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope as ProtoScope;
use opentelemetry_proto::tonic::resource::v1::Resource as ProtoResource;
use opentelemetry_proto::tonic::trace::v1::{span, status};
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;
use prost::encoding::{WireType, encode_varint, encoded_len_varint};

use crate::platform::env;

/// The OTel SDK's default export timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(10_000);
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";

/// Where one signal's exports go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpTarget {
    /// The whole URL (`…/v1/traces`, `…/v1/logs`).
    pub endpoint: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

impl OtlpTarget {
    /// `signal`'s target from the OTel SDK's variables, read through `lookup`; `endpoint`, when
    /// given, is the whole URL and wins over them. An error names the variable and ends in a hint.
    pub fn from_lookup(
        signal: &str,
        endpoint: Option<&str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<OtlpTarget, String> {
        let upper = signal.to_ascii_uppercase();
        let signal_var = |suffix: &str| format!("OTEL_EXPORTER_OTLP_{upper}_{suffix}");
        let set = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        let either = |suffix: &str| {
            let specific = signal_var(suffix);
            match set(&specific) {
                Some(value) => Some((specific, value)),
                None => {
                    let general = format!("OTEL_EXPORTER_OTLP_{suffix}");
                    set(&general).map(|value| (general, value))
                }
            }
        };
        let (variable, endpoint) = match (endpoint, set(&signal_var("ENDPOINT"))) {
            (Some(url), _) => ("the configured endpoint".to_string(), url.to_string()),
            (None, Some(url)) => (signal_var("ENDPOINT"), url),
            (None, None) => {
                let base = set(env::OTEL_EXPORTER_OTLP_ENDPOINT);
                let base = base.as_deref().unwrap_or(DEFAULT_ENDPOINT).trim_end_matches('/').to_string();
                (env::OTEL_EXPORTER_OTLP_ENDPOINT.to_string(), format!("{base}/v1/{signal}"))
            }
        };
        match url::Url::parse(&endpoint) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {}
            Ok(url) => {
                return Err(format!(
                    "{variable}: the OTLP {signal} endpoint `{endpoint}` is not http or https (`{}`)\nhint: e.g. http://localhost:4318",
                    url.scheme()
                ));
            }
            Err(error) => {
                return Err(format!(
                    "{variable}: the OTLP {signal} endpoint `{endpoint}` is not a URL: {error}\nhint: e.g. http://localhost:4318"
                ));
            }
        }
        let headers = match either("HEADERS") {
            None => Vec::new(),
            Some((variable, value)) => parse_headers(&value).map_err(|pair| {
                format!("{variable}: the OTLP header `{pair}` is not name=value\nhint: {variable}=api-key=…,other=…")
            })?,
        };
        let timeout = match either("TIMEOUT") {
            None => DEFAULT_TIMEOUT,
            Some((variable, value)) => value.trim().parse::<u64>().map(Duration::from_millis).map_err(|_| {
                format!("{variable}=`{value}` is not a whole number of milliseconds\nhint: e.g. {variable}=10000")
            })?,
        };
        if let Some((variable, value)) = either("COMPRESSION").filter(|(_, value)| value.trim() != "none") {
            return Err(format!(
                "{variable}=`{value}`: aileron sends OTLP uncompressed\nhint: unset {variable} (or set it to none)"
            ));
        }
        if let Some((variable, value)) = either("PROTOCOL").filter(|(_, value)| value.trim() != "http/protobuf") {
            return Err(format!(
                "{variable}=`{value}`: aileron exports OTLP over HTTP with protobuf only\nhint: unset {variable} (or set it to http/protobuf)"
            ));
        }
        Ok(OtlpTarget { endpoint, headers, timeout })
    }
}

/// `name=value,…` (the OTel SDK's header list): names trimmed, values trimmed and
/// percent-decoded, empty items skipped; `Err` holds the first item without `=`.
fn parse_headers(list: &str) -> Result<Vec<(String, String)>, String> {
    list.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').ok_or_else(|| pair.trim().to_string())?;
            let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy().into_owned();
            Ok((name.trim().to_string(), value))
        })
        .collect()
}

/// The span exporter's sending half: one `POST` of one encoded request per batch, on the
/// processor's thread ([`super::otlp_processor`]), which drives it on a runtime of its own. The
/// spans arrive encoded ([`Batch`]).
pub struct OtlpSpanExporter {
    client: reqwest::Client,
    target: OtlpTarget,
    /// `target.endpoint`, parsed once.
    url: reqwest::Url,
    /// The content type and `target.headers`, built once.
    headers: reqwest::header::HeaderMap,
    /// `ResourceSpans.resource` with its field key and length, encoded once.
    resource: Vec<u8>,
    resource_schema_url: String,
}

impl std::fmt::Debug for OtlpSpanExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpSpanExporter").field("endpoint", &self.target.endpoint).finish_non_exhaustive()
    }
}

impl OtlpSpanExporter {
    pub fn new(target: OtlpTarget) -> Result<OtlpSpanExporter, String> {
        // reqwest is built without a TLS provider of its own; an https collector needs ours.
        crate::platform::process::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(target.timeout)
            .build()
            .map_err(|error| format!("building the HTTP client: {error}"))?;
        let url = reqwest::Url::parse(&target.endpoint).map_err(|error| {
            format!(
                "the endpoint `{}` is not a URL: {error}\nhint: e.g. http://localhost:4318/v1/traces",
                target.endpoint
            )
        })?;
        let mut headers = reqwest::header::HeaderMap::new();
        headers
            .insert(reqwest::header::CONTENT_TYPE, reqwest::header::HeaderValue::from_static("application/x-protobuf"));
        for (name, value) in &target.headers {
            let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .ok()
                .zip(reqwest::header::HeaderValue::from_str(value).ok());
            let Some((name, value)) = header else {
                return Err(format!(
                    "the OTLP header `{name}` is not a valid HTTP header name and value\nhint: check OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS"
                ));
            };
            headers.append(name, value);
        }
        let mut exporter =
            OtlpSpanExporter { client, target, url, headers, resource: Vec::new(), resource_schema_url: String::new() };
        exporter.set_resource(&Resource::builder_empty().build());
        Ok(exporter)
    }

    /// `ExportTraceServiceRequest { resource_spans: [one ResourceSpans] }` around `batch`'s
    /// spans, one `ScopeSpans` per scope in the order each scope first appeared: what
    /// `opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope` builds
    /// from the same spans.
    pub fn request(&self, batch: &Batch) -> Vec<u8> {
        // Room for every key and length and each scope's own fields: the spans, the bulk, are
        // copied once.
        let room = self.resource.len() + self.resource_schema_url.len() + 16 + batch.groups.len() * 256;
        let mut buf = Vec::with_capacity(room + batch.bytes());
        nested(&mut buf, 1, |buf| {
            buf.extend_from_slice(&self.resource);
            for group in &batch.groups {
                nested(buf, 2, |buf| {
                    prost::encoding::message::encode(1, &ProtoScope::from((&group.scope, None)), buf);
                    buf.extend_from_slice(&group.spans);
                    string(buf, 3, group.scope.schema_url().unwrap_or_default());
                });
            }
            string(buf, 3, &self.resource_schema_url);
        });
        buf
    }

    /// Posts one request and reads the answer (so the connection is kept for the next); an error
    /// names the collector.
    pub async fn send(&self, body: Vec<u8>) -> Result<(), String> {
        let post = self.client.post(self.url.clone()).headers(self.headers.clone()).body(body);
        let failed = |error: reqwest::Error| format!("sending spans to {}: {error}", self.target.endpoint);
        let response = post.send().await.map_err(failed)?;
        let status = response.status();
        response.bytes().await.map_err(failed)?;
        if !status.is_success() {
            return Err(format!("the collector at {} answered {status}", self.target.endpoint));
        }
        Ok(())
    }

    pub fn set_resource(&mut self, resource: &Resource) {
        let converted = ResourceAttributesWithSchema::from(resource);
        let message =
            ProtoResource { attributes: converted.attributes.0, dropped_attributes_count: 0, entity_refs: vec![] };
        self.resource.clear();
        prost::encoding::message::encode(1, &message, &mut self.resource);
        self.resource_schema_url = converted.schema_url.unwrap_or_default();
    }
}

/// One request's spans, already encoded and grouped by scope. A span is encoded when it is
/// pushed, on the thread that ended it, so its data is dropped on the thread that made it.
#[derive(Debug, Default)]
pub struct Batch {
    groups: Vec<ScopeSpans>,
    count: usize,
    /// What the first scope's buffer is made with: the last full batch's bytes, so a batch
    /// fills without growing (each growth copies what it holds).
    reserve: usize,
}

/// One scope's `ScopeSpans.spans` fields, each with its key and length.
#[derive(Debug)]
struct ScopeSpans {
    scope: InstrumentationScope,
    spans: Vec<u8>,
}

impl Batch {
    pub fn with_capacity(bytes: usize) -> Batch {
        Batch { reserve: bytes, ..Batch::default() }
    }

    pub fn push(&mut self, span: &SpanData) {
        let scope = &span.instrumentation_scope;
        let index = match self.groups.iter().position(|group| same_scope(&group.scope, scope)) {
            Some(index) => index,
            None => {
                let reserve = if self.groups.is_empty() { self.reserve } else { 0 };
                self.groups.push(ScopeSpans { scope: scope.clone(), spans: Vec::with_capacity(reserve) });
                self.groups.len() - 1
            }
        };
        nested_reserving(&mut self.groups[index].spans, 2, 2, |buf| encode_span(buf, span));
        self.count += 1;
    }

    /// How many spans.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The encoded spans' bytes.
    pub fn bytes(&self) -> usize {
        self.groups.iter().map(|group| group.spans.len()).sum()
    }
}

/// Equality, first by address: the spans of one tracer share its scope's `'static` strings.
fn same_scope(a: &InstrumentationScope, b: &InstrumentationScope) -> bool {
    let same_text = |x: &str, y: &str| std::ptr::eq(x, y);
    let shared = same_text(a.name(), b.name())
        && match (a.version(), b.version()) {
            (Some(x), Some(y)) => same_text(x, y),
            (None, None) => true,
            _ => false,
        }
        && a.schema_url().is_none()
        && b.schema_url().is_none()
        && a.attributes().next().is_none()
        && b.attributes().next().is_none();
    shared || a == b
}

/// `opentelemetry.proto.trace.v1.Span`.
fn encode_span(buf: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    bytes(buf, 1, &context.trace_id().to_bytes());
    bytes(buf, 2, &context.span_id().to_bytes());
    trace_state(buf, 3, context.trace_state());
    if span.parent_span_id != SpanId::INVALID {
        bytes(buf, 4, &span.parent_span_id.to_bytes());
    }
    string(buf, 5, &span.name);
    uint(buf, 6, span::SpanKind::from(span.span_kind.clone()) as u64);
    fixed64(buf, 7, nanos(span.start_time));
    fixed64(buf, 8, nanos(span.end_time));
    attributes(buf, 9, &span.attributes);
    uint(buf, 10, u64::from(span.dropped_attributes_count));
    for event in &span.events.events {
        nested(buf, 11, |buf| {
            fixed64(buf, 1, nanos(event.timestamp));
            string(buf, 2, &event.name);
            attributes(buf, 3, &event.attributes);
            uint(buf, 4, u64::from(event.dropped_attributes_count));
        });
    }
    uint(buf, 12, u64::from(span.events.dropped_count));
    for link in &span.links.links {
        nested(buf, 13, |buf| {
            let linked = &link.span_context;
            bytes(buf, 1, &linked.trace_id().to_bytes());
            bytes(buf, 2, &linked.span_id().to_bytes());
            trace_state(buf, 3, linked.trace_state());
            attributes(buf, 4, &link.attributes);
            uint(buf, 5, u64::from(link.dropped_attributes_count));
            fixed32(buf, 6, span_flags(linked.is_remote(), linked.trace_flags().to_u8()));
        });
    }
    uint(buf, 14, u64::from(span.links.dropped_count));
    nested(buf, 15, |buf| {
        if let Status::Error { description } = &span.status {
            string(buf, 2, description);
        }
        uint(buf, 3, status::StatusCode::from(&span.status) as u64);
    });
    fixed32(buf, 16, span_flags(span.parent_span_is_remote, context.trace_flags().to_u8()));
}

/// The W3C trace flags plus OTLP's "whether the parent is remote is known" and "is remote" bits.
fn span_flags(remote: bool, trace_flags: u8) -> u32 {
    let known = opentelemetry_proto::tonic::trace::v1::SpanFlags::ContextHasIsRemoteMask as u32;
    let is_remote = opentelemetry_proto::tonic::trace::v1::SpanFlags::ContextIsRemoteMask as u32;
    u32::from(trace_flags) | known | if remote { is_remote } else { 0 }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos() as u64
}

/// Repeated `KeyValue { key = 1, value = 2 }`. A scalar's lengths are known before it is written,
/// so it is written straight through; an array goes through [`nested`].
fn attributes(buf: &mut Vec<u8>, tag: u32, attributes: &[KeyValue]) {
    for attribute in attributes {
        let key_text = attribute.key.as_str().as_bytes();
        let Some(scalar) = Scalar::of(&attribute.value) else {
            nested(buf, tag, |buf| {
                string(buf, 1, attribute.key.as_str());
                nested(buf, 2, |buf| any_value(buf, &attribute.value));
            });
            continue;
        };
        let value_len = scalar.encoded_len();
        let key_len =
            if key_text.is_empty() { 0 } else { 1 + encoded_len_varint(key_text.len() as u64) + key_text.len() };
        let pair_len = key_len + 1 + encoded_len_varint(value_len as u64) + value_len;
        key(buf, tag, WireType::LengthDelimited);
        varint(buf, pair_len as u64);
        bytes(buf, 1, key_text);
        key(buf, 2, WireType::LengthDelimited);
        varint(buf, value_len as u64);
        scalar.write(buf);
    }
}

/// An `AnyValue` whose encoded length is known before it is written.
enum Scalar<'a> {
    /// `string_value` (1).
    Text(&'a [u8]),
    /// `bool_value` (2) or `int_value` (3).
    Varint(u32, u64),
    /// `double_value` (4).
    Fixed64(u32, u64),
}

impl<'a> Scalar<'a> {
    /// The value's scalar form; `None` for an array (or a kind this version of the API adds).
    fn of(value: &'a Value) -> Option<Self> {
        match value {
            Value::String(text) => Some(Scalar::Text(text.as_str().as_bytes())),
            Value::Bool(flag) => Some(Scalar::Varint(2, u64::from(*flag))),
            Value::I64(integer) => Some(Scalar::Varint(3, *integer as u64)),
            Value::F64(float) => Some(Scalar::Fixed64(4, float.to_bits())),
            _ => None,
        }
    }

    fn encoded_len(&self) -> usize {
        match self {
            Scalar::Text(text) => 1 + encoded_len_varint(text.len() as u64) + text.len(),
            Scalar::Varint(_, value) => 1 + encoded_len_varint(*value),
            Scalar::Fixed64(..) => 9,
        }
    }

    /// Present even when it holds its type's default, as `AnyValue`'s `oneof` is.
    fn write(&self, buf: &mut Vec<u8>) {
        match *self {
            Scalar::Text(text) => delimited(buf, 1, text),
            Scalar::Varint(tag, value) => {
                key(buf, tag, WireType::Varint);
                varint(buf, value);
            }
            Scalar::Fixed64(tag, bits) => {
                key(buf, tag, WireType::SixtyFourBit);
                buf.extend_from_slice(&bits.to_le_bytes());
            }
        }
    }
}

/// A trace state's header, left out when there is none (its header would be empty) without
/// building the empty text.
fn trace_state(buf: &mut Vec<u8>, tag: u32, state: &TraceState) {
    if *state != TraceState::NONE {
        string(buf, tag, &state.header());
    }
}

/// `AnyValue`'s `oneof value`: present even when it holds its type's default.
fn any_value(buf: &mut Vec<u8>, value: &Value) {
    if let Some(scalar) = Scalar::of(value) {
        return scalar.write(buf);
    }
    match value {
        Value::Array(array) => nested(buf, 5, |buf| match array {
            Array::Bool(values) => values.iter().for_each(|v| nested(buf, 1, |buf| any_value(buf, &Value::Bool(*v)))),
            Array::I64(values) => values.iter().for_each(|v| nested(buf, 1, |buf| any_value(buf, &Value::I64(*v)))),
            Array::F64(values) => values.iter().for_each(|v| nested(buf, 1, |buf| any_value(buf, &Value::F64(*v)))),
            Array::String(values) => {
                values.iter().for_each(|v| nested(buf, 1, |buf| string_always(buf, 1, v.as_str())))
            }
            // A kind of array this version of the API does not know: its text.
            other => nested(buf, 1, |buf| string_always(buf, 1, &other.to_string())),
        }),
        other => string_always(buf, 1, &other.to_string()),
    }
}

/// A length-delimited field whose body `write` appends; the length goes in front afterwards (one
/// byte is reserved, the usual case; a longer body moves over for the rest).
fn nested(buf: &mut Vec<u8>, tag: u32, write: impl FnOnce(&mut Vec<u8>)) {
    nested_reserving(buf, tag, 1, write);
}

/// [`nested`] with `reserved` bytes kept for the length: a span's body takes two (128 bytes to
/// 16 KiB), so a span is not moved over once it is written. A body whose length takes another
/// size moves.
fn nested_reserving(buf: &mut Vec<u8>, tag: u32, reserved: usize, write: impl FnOnce(&mut Vec<u8>)) {
    key(buf, tag, WireType::LengthDelimited);
    let at = buf.len();
    buf.resize(at + reserved, 0);
    write(buf);
    let end = buf.len();
    let length = end - at - reserved;
    if reserved == 1 && length < 0x80 {
        buf[at] = length as u8;
        return;
    }
    let used = encoded_len_varint(length as u64);
    if used > reserved {
        buf.resize(end + used - reserved, 0);
        buf.copy_within(at + reserved..end, at + used);
    } else if used < reserved {
        buf.copy_within(at + reserved..end, at + used);
        buf.truncate(end - (reserved - used));
    }
    let mut rest = length as u64;
    for (index, byte) in buf[at..at + used].iter_mut().enumerate() {
        let more = if index + 1 < used { 0x80 } else { 0 };
        *byte = (rest & 0x7f) as u8 | more;
        rest >>= 7;
    }
}

/// A field's key, a varint: one byte for every tag below 16, which is all of them but
/// `Span.flags`. prost's `encode_key` goes through `encode_varint`'s loop and `BufMut` for each
/// byte.
#[inline]
fn key(buf: &mut Vec<u8>, tag: u32, wire_type: WireType) {
    varint(buf, u64::from(tag << 3 | wire_type as u32));
}

/// A varint: one byte below 128 (most lengths and every enum here), else prost's.
#[inline]
fn varint(buf: &mut Vec<u8>, value: u64) {
    if value < 0x80 { buf.push(value as u8) } else { encode_varint(value, buf) }
}

/// proto3 scalars are left out when they hold their default, as prost writes them.
#[inline]
fn string(buf: &mut Vec<u8>, tag: u32, text: &str) {
    bytes(buf, tag, text.as_bytes());
}

#[inline]
fn string_always(buf: &mut Vec<u8>, tag: u32, text: &str) {
    delimited(buf, tag, text.as_bytes());
}

#[inline]
fn bytes(buf: &mut Vec<u8>, tag: u32, value: &[u8]) {
    if !value.is_empty() {
        delimited(buf, tag, value);
    }
}

#[inline]
fn delimited(buf: &mut Vec<u8>, tag: u32, value: &[u8]) {
    key(buf, tag, WireType::LengthDelimited);
    varint(buf, value.len() as u64);
    buf.extend_from_slice(value);
}

#[inline]
fn uint(buf: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        key(buf, tag, WireType::Varint);
        varint(buf, value);
    }
}

#[inline]
fn fixed64(buf: &mut Vec<u8>, tag: u32, value: u64) {
    if value != 0 {
        key(buf, tag, WireType::SixtyFourBit);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[inline]
fn fixed32(buf: &mut Vec<u8>, tag: u32, value: u32) {
    if value != 0 {
        key(buf, tag, WireType::ThirtyTwoBit);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use opentelemetry::trace::{Event, Link, SpanContext, SpanKind, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;

    use super::*;

    fn context(trace: u128, span: u64, remote: bool, state: &str) -> SpanContext {
        let state = if state.is_empty() { TraceState::default() } else { state.parse().unwrap() };
        SpanContext::new(TraceId::from(trace), SpanId::from(span), TraceFlags::SAMPLED, remote, state)
    }

    fn span(name: &'static str, scope: &InstrumentationScope, seed: u64) -> SpanData {
        let at = UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789 + seed);
        SpanData {
            span_context: context(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c, seed, false, ""),
            parent_span_id: SpanId::INVALID,
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
            start_time: at,
            end_time: at + Duration::from_micros(250),
            attributes: vec![KeyValue::new("aileron.action.name", "echo")],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope.clone(),
        }
    }

    /// Every field the SDK fills, every kind of attribute value (defaults, arrays, text over
    /// 127 bytes and a span over 16 KiB, so lengths take two and three bytes), remote and local parents, events, links, each
    /// status, two scopes interleaved: decoded, our request is what opentelemetry-proto's own
    /// conversion of the same batch builds.
    #[test]
    fn a_batch_encodes_to_what_the_official_conversion_builds() {
        let aileron = InstrumentationScope::builder("aileron").with_version("0.1.0").build();
        let other = InstrumentationScope::builder("aileron-mcp")
            .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
            .with_attributes([KeyValue::new("scope.attribute", 7_i64)])
            .build();
        let long = "x".repeat(300);
        let mut server = span("POST /v1/actions/{name}/run", &aileron, 1);
        server.span_kind = SpanKind::Server;
        server.parent_span_id = SpanId::from(0xb7ad_6b71_6920_3331);
        server.parent_span_is_remote = true;
        server.span_context = context(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c, 1, false, "vendor=opaque,other=1");
        server.attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("empty", ""),
            KeyValue::new("flag.false", false),
            KeyValue::new("flag.true", true),
            KeyValue::new("zero", 0_i64),
            KeyValue::new("negative", -42_i64),
            KeyValue::new("ratio", 1.5_f64),
            KeyValue::new("nan", f64::NAN.to_bits() as i64),
            KeyValue::new("long", long.clone()),
            KeyValue::new("bools", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("ints", Value::Array(Array::I64(vec![1, -2, 0]))),
            KeyValue::new("floats", Value::Array(Array::F64(vec![0.25, 0.0]))),
            KeyValue::new("strings", Value::Array(Array::String(vec!["a".into(), "".into(), long.clone().into()]))),
            KeyValue::new("empty.array", Value::Array(Array::I64(vec![]))),
        ];
        server.dropped_attributes_count = 3;
        let mut failed = span("aileron.connector.call", &aileron, 2);
        failed.status = Status::error("the connector failed");
        failed.span_kind = SpanKind::Client;
        failed.events.events = vec![
            Event::new("log", UNIX_EPOCH + Duration::from_secs(1), vec![KeyValue::new("line", "hi")], 1),
            Event::with_name("bare"),
        ];
        failed.events.dropped_count = 2;
        failed.links.links = vec![
            Link::new(context(7, 8, true, "k=v"), vec![KeyValue::new("link.kind", "decision")], 0),
            Link::with_context(context(9, 10, false, "")),
        ];
        failed.links.dropped_count = 1;
        let mut ok = span("aileron.mcp.tool.call", &other, 3);
        ok.status = Status::Ok;
        ok.parent_span_id = SpanId::from(1);
        let mut producer = span("producer", &other, 4);
        producer.span_kind = SpanKind::Producer;
        let mut consumer = span("consumer", &aileron, 5);
        consumer.span_kind = SpanKind::Consumer;
        consumer.attributes = (0..60).map(|i| KeyValue::new(format!("key.{i}"), long.clone())).collect();
        let batch = vec![server, ok, failed, producer, consumer];

        let resource = Resource::builder()
            .with_service_name("aileron-under-test")
            .with_attribute(KeyValue::new("host.arch", "x86_64"))
            .with_schema_url([], "https://opentelemetry.io/schemas/1.30.0")
            .build();
        let mut exporter = OtlpSpanExporter::new(OtlpTarget {
            endpoint: "http://127.0.0.1:9/v1/traces".into(),
            headers: vec![],
            timeout: DEFAULT_TIMEOUT,
        })
        .unwrap();
        exporter.set_resource(&resource);

        let mut encoded = Batch::default();
        batch.iter().for_each(|span| encoded.push(span));
        assert_eq!(encoded.len(), batch.len());
        let ours =
            ExportTraceServiceRequest::decode(exporter.request(&encoded).as_slice()).expect("our request decodes");
        let official = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &ResourceAttributesWithSchema::from(&resource)),
        };
        assert_eq!(ours, official);
        assert_eq!(ours.resource_spans[0].scope_spans.len(), 2);
        assert_eq!(ours.resource_spans[0].scope_spans[0].spans.len(), 3, "the first scope's spans, in order");
        // prost writes the same bytes for the same message: nothing of ours is left out.
        assert_eq!(ours.encode_to_vec(), official.encode_to_vec());
    }

    /// A batch made with the last full batch's bytes fills without growing its buffer (each
    /// growth copied every span encoded so far), and its request is made in one allocation.
    #[test]
    fn a_batch_reserved_from_the_last_fills_without_growing() {
        let exporter = OtlpSpanExporter::new(OtlpTarget {
            endpoint: "http://127.0.0.1:9/v1/traces".into(),
            headers: vec![],
            timeout: DEFAULT_TIMEOUT,
        })
        .unwrap();
        let scope = InstrumentationScope::builder("aileron").with_version("0.1.0").build();
        let fill = |batch: &mut Batch, count: u64| {
            for seed in 1..=count {
                let mut span = span("aileron.connector.call", &scope, seed);
                span.attributes.push(KeyValue::new("aileron.connector.fqn", "github://aileron-bench/echo"));
                span.attributes.push(KeyValue::new("aileron.connector.hash", format!("sha256:{}", "ab".repeat(32))));
                batch.push(&span);
            }
        };
        let mut first = Batch::default();
        fill(&mut first, 512);
        let reserve = first.bytes();
        for _ in 0..2 {
            let mut batch = Batch::with_capacity(reserve);
            fill(&mut batch, 512);
            assert_eq!(batch.bytes(), reserve);
            assert_eq!(batch.groups[0].spans.capacity(), reserve, "the batch's buffer grew");
            let body = exporter.request(&batch);
            let room = body.capacity();
            assert!(room - body.len() < 512, "a request of {} bytes reserved {room}", body.len());
            let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
            assert_eq!(request.resource_spans[0].scope_spans[0].spans.len(), 512);
        }
    }

    #[test]
    fn an_empty_batch_is_one_resource_and_no_spans() {
        let exporter = OtlpSpanExporter::new(OtlpTarget {
            endpoint: "http://127.0.0.1:9/v1/traces".into(),
            headers: vec![],
            timeout: DEFAULT_TIMEOUT,
        })
        .unwrap();
        let request = ExportTraceServiceRequest::decode(exporter.request(&Batch::default()).as_slice()).unwrap();
        assert_eq!(request.resource_spans.len(), 1);
        assert!(request.resource_spans[0].scope_spans.is_empty());
    }

    /// A header HTTP cannot carry fails the exporter's build (tracing then degrades with one
    /// warning) instead of every request.
    #[test]
    fn a_header_http_cannot_carry_is_refused_when_the_exporter_is_built() {
        let built = |name: &str, value: &str| {
            OtlpSpanExporter::new(OtlpTarget {
                endpoint: "http://127.0.0.1:9/v1/traces".into(),
                headers: vec![(name.into(), value.into())],
                timeout: DEFAULT_TIMEOUT,
            })
        };
        for (name, value) in [("bad name", "v"), ("api-key", "line\nbreak")] {
            let error = built(name, value).expect_err(name);
            assert!(error.contains(&format!("`{name}`")) && error.contains("\nhint: "), "{error}");
        }
        let exporter = built("api-key", "a b,c").unwrap();
        assert_eq!(exporter.headers.get("api-key").unwrap(), "a b,c");
        assert_eq!(exporter.headers.get("content-type").unwrap(), "application/x-protobuf");
    }

    #[test]
    fn targets_follow_the_sdk_variables_and_refuse_what_they_cannot_send() {
        let resolve = |vars: &[(&str, &str)], endpoint: Option<&str>| {
            OtlpTarget::from_lookup("traces", endpoint, |name| {
                vars.iter().find(|(var, _)| *var == name).map(|(_, value)| value.to_string())
            })
        };
        let target = resolve(&[], None).unwrap();
        assert_eq!(target.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!((target.headers.len(), target.timeout), (0, DEFAULT_TIMEOUT));
        let target = resolve(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/")], None).unwrap();
        assert_eq!(target.endpoint, "https://collector:4318/v1/traces");
        let target = resolve(
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://general:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:9999/custom"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "general=1"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", " api-key = a%20b%2Cc ,, x=y=z "),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
                ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ],
            None,
        )
        .unwrap();
        assert_eq!(target.endpoint, "http://traces:9999/custom", "the signal's URL is taken as it is");
        assert_eq!(target.headers, vec![("api-key".into(), "a b,c".into()), ("x".into(), "y=z".into())]);
        assert_eq!(target.timeout, Duration::from_millis(250));
        let given =
            resolve(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://ignored")], Some("http://given/v1/traces"));
        assert_eq!(given.unwrap().endpoint, "http://given/v1/traces");
        assert_eq!(OtlpTarget::from_lookup("logs", None, |_| None).unwrap().endpoint, "http://localhost:4318/v1/logs");

        let refused = |vars: &[(&str, &str)], endpoint: Option<&str>, fragment: &str| {
            let error = resolve(vars, endpoint).expect_err(fragment);
            assert!(error.contains(fragment), "{fragment:?} in {error}");
            assert!(error.contains("\nhint: "), "{error}");
        };
        refused(&[], Some("http://[::1"), "is not a URL");
        refused(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")], None, "is not http or https");
        refused(&[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key")], None, "OTEL_EXPORTER_OTLP_TRACES_HEADERS");
        refused(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")], None, "OTEL_EXPORTER_OTLP_TIMEOUT=`10s`");
        refused(&[("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")], None, "uncompressed");
        refused(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], None, "protobuf only");
    }
}
