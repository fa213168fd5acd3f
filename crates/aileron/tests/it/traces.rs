//! Traces (SPEC §11) seen from outside: a real OTLP/HTTP receiver in this file decodes what the
//! daemon exports with the official `opentelemetry-proto` schema; the stdout and file exporters
//! are read back line by line; misconfigured daemons are real processes that must keep serving.
//!
//! In-process tests build their telemetry from an explicit `TelemetryConfig` (never by mutating
//! the process environment, which parallel tests share); the subprocess tests set the variables
//! on the child only.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fake_github::FakeGithub;
use aileron::platform::telemetry::otlp_processor::Limits;
use aileron::platform::telemetry::{Telemetry, TelemetryConfig};
use axum::body::Bytes;
use axum::extract::State;
use http::{Request, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;
use serde_json::{Value, json};

use crate::approvals::{gated, wait_for_status};
use crate::mcp::{Session, StdioSession};
use crate::support::{ActionSpec, Harness, PORT, PlantedKey, TOKEN, guest_wasm, manifest};

// ---------------------------------------------------------------------------------------------
// The OTLP/HTTP receiver

/// One span as the collector received it.
#[derive(Debug, Clone)]
struct ReceivedSpan {
    name: String,
    trace_id: String,
    span_id: String,
    parent_span_id: Option<String>,
    /// OTLP `SpanKind`: 1 internal, 2 server, 3 client.
    kind: i32,
    attributes: BTreeMap<String, Value>,
    /// OTLP status code: 0 unset, 1 ok, 2 error.
    status_code: i32,
    status_message: String,
    links: Vec<(String, String)>,
    resource: BTreeMap<String, Value>,
    start_unix_nano: u64,
    end_unix_nano: u64,
    /// `(name, attributes)` of each span event.
    events: Vec<(String, BTreeMap<String, Value>)>,
}

/// `POST /v1/traces` on a loopback port, served by its own thread so a test may block on
/// `force_flush` (the SDK's batch thread waits for this server's answer).
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    /// Every request body as received, to search the raw bytes for things that must not be there.
    raw: Arc<Mutex<Vec<u8>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

#[derive(Clone)]
struct Store {
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Collector {
    fn start() -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        let store = Store { spans: Arc::default(), raw: Arc::default() };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = store.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let app = axum::Router::new().route("/v1/traces", axum::routing::post(receive)).with_state(served);
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Collector { endpoint, spans: store.spans, raw: store.raw, stop: Some(stop) }
    }

    fn trace(&self, trace_id: &str) -> Trace {
        Trace(self.spans.lock().unwrap().iter().filter(|s| s.trace_id == trace_id).cloned().collect())
    }

    fn all(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    fn raw_contains(&self, needle: &str) -> bool {
        let raw = self.raw.lock().unwrap();
        raw.windows(needle.len()).any(|window| window == needle.as_bytes())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn receive(State(store): State<Store>, body: Bytes) -> (StatusCode, [(&'static str, &'static str); 1], Vec<u8>) {
    store.raw.lock().unwrap().extend_from_slice(&body);
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (
            StatusCode::BAD_REQUEST,
            [("content-type", "text/plain")],
            b"not an ExportTraceServiceRequest".to_vec(),
        );
    };
    let mut spans = store.spans.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans.resource.map(|r| attributes(&r.attributes)).unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                let status = span.status.unwrap_or_default();
                spans.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty()).then(|| hex::encode(&span.parent_span_id)),
                    kind: span.kind,
                    attributes: attributes(&span.attributes),
                    status_code: status.code,
                    status_message: status.message,
                    links: span.links.iter().map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id))).collect(),
                    resource: resource.clone(),
                    start_unix_nano: span.start_time_unix_nano,
                    end_unix_nano: span.end_time_unix_nano,
                    events: span.events.iter().map(|e| (e.name.clone(), attributes(&e.attributes))).collect(),
                });
            }
        }
    }
    // An empty ExportTraceServiceResponse: full success.
    (StatusCode::OK, [("content-type", "application/x-protobuf")], Vec::new())
}

fn attributes(list: &[KeyValue]) -> BTreeMap<String, Value> {
    list.iter().map(|kv| (kv.key.clone(), any_value_json(kv.value.as_ref()))).collect()
}

fn any_value_json(value: Option<&AnyValue>) -> Value {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(text)) => text.clone().into(),
        Some(any_value::Value::BoolValue(flag)) => (*flag).into(),
        Some(any_value::Value::IntValue(number)) => (*number).into(),
        Some(any_value::Value::DoubleValue(number)) => (*number).into(),
        Some(other) => format!("{other:?}").into(),
        None => Value::Null,
    }
}

/// The spans of one trace.
struct Trace(Vec<ReceivedSpan>);

impl Trace {
    /// The one span called `name` (panics when there are none or several).
    fn one(&self, name: &str) -> &ReceivedSpan {
        let found: Vec<&ReceivedSpan> = self.0.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "exactly one `{name}` span in {:#?}", self.names());
        found[0]
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.0.iter().map(|s| s.name.clone()).collect();
        names.sort();
        names
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const STATUS_ERROR: i32 = 2;

/// A fresh W3C trace id per call, so each scenario is told apart in a shared collector.
fn trace_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("4bf92f3577b34da6{:016x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

const INBOUND_PARENT: &str = "00f067aa0ba902b7";

fn traceparent(trace_id: &str) -> String {
    format!("00-{trace_id}-{INBOUND_PARENT}-01")
}

fn otlp(collector: &Collector, service: &str) -> TelemetryConfig {
    TelemetryConfig {
        service_name: service.to_string(),
        otlp_endpoint: Some(collector.endpoint.clone()),
        ..TelemetryConfig::enabled("otlp", None)
    }
}

fn traced_harness(
    config: &TelemetryConfig,
    tweak: impl FnOnce(&mut aileron::surfaces::daemon::StateOptions),
) -> (Harness, Telemetry) {
    let telemetry = Telemetry::build(config).expect("telemetry builds");
    let traced = telemetry.clone();
    let harness = Harness::with_options(move |options| {
        options.telemetry = traced;
        tweak(options);
    });
    (harness, telemetry)
}

/// A request like `Harness::request`, carrying `traceparent`.
async fn traced_request(
    harness: &Harness,
    method: &str,
    path: &str,
    traceparent: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("traceparent", traceparent);
    let response = harness.send(builder, body).await;
    (response.status, response.body)
}

fn flush(telemetry: &Telemetry) {
    telemetry.force_flush().expect("the collector accepted the spans");
}

/// Asserts a span's attributes are exactly `expected`.
fn check_attributes(span: &ReceivedSpan, expected: Value) {
    let expected: BTreeMap<String, Value> = serde_json::from_value(expected).unwrap();
    assert_eq!(span.attributes, expected, "attributes of `{}`", span.name);
}

fn echo_fqn() -> &'static str {
    "github://aileron-tests/echo"
}

// ---------------------------------------------------------------------------------------------
// One trace, end to end

#[tokio::test]
async fn a_run_is_one_trace_from_the_tool_call_through_the_http_root_to_the_connector_call() {
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron-under-test"), |_| {});
    let hash = harness.guest_action("echo", &[], "echo", |spec| spec.inputs = &[("text", "string", false)]).await;

    // What aileron-mcp does per tool call: a client span, child of the agent's traceparent,
    // whose own traceparent goes to the daemon.
    let trace = trace_id();
    let tool = telemetry.mcp_tool_call("echo", Some(&traceparent(&trace)));
    let sent = tool.traceparent().expect("the tool span has a traceparent");
    let (status, body) =
        traced_request(&harness, "POST", "/v1/actions/echo/run", &sent, Some(json!({"args": {}}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    tool.end();
    flush(&telemetry);

    let spans = collector.trace(&trace);
    assert_eq!(
        spans.names(),
        [
            "POST /v1/actions/{name}/run",
            "aileron.action.execute",
            "aileron.capability.check",
            "aileron.connector.call",
            "aileron.mcp.tool.call"
        ],
        "nothing else, and no raw path, in the trace"
    );
    let tool = spans.one("aileron.mcp.tool.call");
    assert_eq!((tool.kind, tool.parent_span_id.as_deref()), (CLIENT, Some(INBOUND_PARENT)));
    check_attributes(tool, json!({"aileron.mcp.tool.name": "echo"}));
    let root = spans.one("POST /v1/actions/{name}/run");
    assert_eq!(
        (root.kind, root.parent_span_id.as_ref()),
        (SERVER, Some(&tool.span_id)),
        "the daemon continues the tool span"
    );
    check_attributes(
        root,
        json!({"http.request.method": "POST", "http.route": "/v1/actions/{name}/run", "http.response.status_code": 200}),
    );
    let execute = spans.one("aileron.action.execute");
    assert_eq!(execute.parent_span_id.as_ref(), Some(&root.span_id));
    check_attributes(execute, json!({"aileron.action.name": "echo", "aileron.action.steps_count": 1}));
    let check = spans.one("aileron.capability.check");
    assert_eq!(check.parent_span_id.as_ref(), Some(&execute.span_id));
    check_attributes(
        check,
        json!({"aileron.action.name": "echo", "aileron.connector.fqn": echo_fqn(), "aileron.capability.kind": "echo"}),
    );
    let call = spans.one("aileron.connector.call");
    assert_eq!(call.parent_span_id.as_ref(), Some(&execute.span_id));
    check_attributes(
        call,
        json!({"aileron.connector.fqn": echo_fqn(), "aileron.connector.op": "echo", "aileron.connector.hash": hash}),
    );
    assert!(check.end_unix_nano <= call.start_unix_nano, "the check precedes the call");
    for span in &spans.0 {
        assert_eq!(span.resource["service.name"], "aileron-under-test", "{}", span.name);
        assert_eq!(span.status_code, 0, "{} succeeded: status unset", span.name);
    }
}

#[tokio::test]
async fn an_approval_wait_spans_request_to_decision_and_the_approved_run_continues_the_trace() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    gated(&harness, &upstream).await;

    let trace = trace_id();
    let url = format!("{}/status/200", upstream.base_url());
    let (status, pending) = traced_request(
        &harness,
        "POST",
        "/v1/actions/fetch/run",
        &traceparent(&trace),
        Some(json!({"args": {"url": url}})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{pending}");
    let id = pending["approval_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(30)).await; // a measurable wait
    let decider = trace_id();
    let (status, _) = traced_request(
        &harness,
        "POST",
        &format!("/v1/action-approvals/{id}/decide"),
        &traceparent(&decider),
        Some(json!({"approved": true})),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let view = wait_for_status(&harness, &id, &["completed", "failed"]).await;
    assert_eq!(view["status"], "completed", "{view}");
    flush(&telemetry);

    let spans = collector.trace(&trace);
    let root = spans.one("POST /v1/actions/{name}/run");
    assert_eq!(root.parent_span_id.as_deref(), Some(INBOUND_PARENT));
    check_attributes(
        root,
        json!({"http.request.method": "POST", "http.route": "/v1/actions/{name}/run", "http.response.status_code": 202}),
    );
    let wait = spans.one("aileron.approval.wait");
    assert_eq!(wait.parent_span_id.as_ref(), Some(&root.span_id), "the wait is a child of the request");
    let approved = harness.audit().await.into_iter().find(|r| r["event_type"] == "approval.approved").unwrap();
    let wait_ms = approved["payload"]["aileron.approval.wait_ms"].as_u64().unwrap();
    assert!(wait_ms >= 30, "waited {wait_ms} ms");
    check_attributes(
        wait,
        json!({
            "aileron.approval.id": id,
            "aileron.approval.kind": "action",
            "aileron.approval.action": "fetch",
            "aileron.approval.decision": "approved",
            "aileron.approval.wait_ms": wait_ms,
            "aileron.connector.fqn": "github://aileron-tests/http_get",
        }),
    );
    let waited_ns = wait.end_unix_nano - wait.start_unix_nano;
    assert_eq!(waited_ns / 1_000_000, wait_ms, "the span covers requested_at → decided_at");
    let decide_root = collector.trace(&decider);
    let decide_span = decide_root.one("POST /v1/action-approvals/{id}/decide");
    assert_eq!(wait.links, vec![(decider.clone(), decide_span.span_id.clone())], "linked to the deciding request");

    let execute = spans.one("aileron.action.execute");
    assert_eq!(execute.parent_span_id.as_ref(), Some(&wait.span_id), "the approved run follows the wait");
    let call = spans.one("aileron.connector.call");
    assert_eq!(call.parent_span_id.as_ref(), Some(&execute.span_id));
    assert_eq!(call.attributes["aileron.connector.op"], "get");
}

#[tokio::test]
async fn a_denial_carries_its_reason_and_runs_nothing() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    gated(&harness, &upstream).await;
    let trace = trace_id();
    let body = json!({"args": {"url": format!("{}/status/200", upstream.base_url())}});
    let (_, pending) =
        traced_request(&harness, "POST", "/v1/actions/fetch/run", &traceparent(&trace), Some(body)).await;
    let id = pending["approval_id"].as_str().unwrap().to_string();
    let decided = harness
        .request(
            "POST",
            &format!("/v1/action-approvals/{id}/decide"),
            Some(json!({"approved": false, "reason": "wrong repo"})),
        )
        .await;
    assert_eq!(decided.status, StatusCode::NO_CONTENT);
    flush(&telemetry);
    let spans = collector.trace(&trace);
    assert_eq!(spans.names(), ["POST /v1/actions/{name}/run", "aileron.approval.wait"]);
    let wait = spans.one("aileron.approval.wait");
    assert_eq!(wait.attributes["aileron.approval.decision"], "denied");
    assert_eq!(wait.attributes["aileron.approval.reason"], "wrong repo");
    assert_eq!(wait.status_code, 0, "a denial is a decision, not an error");
}

// ---------------------------------------------------------------------------------------------
// Failures

#[tokio::test]
async fn failed_spans_carry_the_failure_class_the_audit_id_and_status_error() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    // The step's op is not in the action's subset: refused by the capability check.
    harness.guest_action("echo", &[], "echo", |spec| spec.capabilities = &["something_else"]).await;
    // A host outside the manifest: refused inside the connector call, at the sandbox boundary.
    harness
        .guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = &[("url", "string", true)])
        .await;

    // (action, args, failing span, spans present, class, boundary)
    let cases = [
        ("echo", json!({}), "aileron.capability.check", 3, "capability_denied", "action"),
        (
            "http_get",
            json!({"url": "http://evil.example/x"}),
            "aileron.connector.call",
            4,
            "capability_denied",
            "sandbox",
        ),
    ];
    for (action, args, failing, count, class, boundary) in cases {
        let trace = trace_id();
        let path = format!("/v1/actions/{action}/run");
        let (status, body) =
            traced_request(&harness, "POST", &path, &traceparent(&trace), Some(json!({"args": args}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        let error = &body["error"];
        flush(&telemetry);
        let spans = collector.trace(&trace);
        assert_eq!(spans.0.len(), count, "{action}: {:?}", spans.names());
        for name in [failing, "aileron.action.execute"] {
            let span = spans.one(name);
            assert_eq!(span.status_code, STATUS_ERROR, "{action}: {name}");
            assert_eq!(span.status_message, error["message"].as_str().unwrap(), "{action}: {name}");
            for (key, expected) in [
                ("aileron.failure.class", json!(class)),
                ("aileron.failure.boundary", json!(boundary)),
                ("aileron.failure.retriable", json!(false)),
                ("aileron.audit.id", error["audit_id"].clone()),
            ] {
                assert_eq!(span.attributes.get(key), Some(&expected), "{action}: {name} {key}");
            }
        }
        if failing == "aileron.capability.check" {
            assert!(!spans.names().contains(&"aileron.connector.call".to_string()), "a refused op is never called");
        }
        let root = spans.one("POST /v1/actions/{name}/run");
        assert_eq!(root.status_code, 0, "a 4xx is the client's: the server span is not an error");
        assert_eq!(root.attributes["http.response.status_code"], 403);
    }
}

// ---------------------------------------------------------------------------------------------
// Audit and spans share attribute names

/// The audit value for a span attribute key: the record's own payload first, then its step
/// summaries; `aileron.audit.id` is the record's `audit_id` field.
fn audit_value(record: &Value, key: &str) -> Option<Value> {
    if key == "aileron.audit.id" {
        return Some(record["audit_id"].clone());
    }
    let payload = &record["payload"];
    payload
        .get(key)
        .cloned()
        .or_else(|| payload["aileron.action.steps"].as_array()?.iter().find_map(|step| step.get(key).cloned()))
}

#[tokio::test]
async fn the_audit_record_and_the_spans_of_a_run_use_the_same_attribute_names_and_values() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    harness
        .guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = &[("url", "string", true)])
        .await;

    let runs = [
        ("echo", json!({}), "action.executed"),
        ("http_get", json!({"url": "http://evil.example/"}), "execution.failed"),
    ];
    for (action, args, event_type) in runs {
        let trace = trace_id();
        let path = format!("/v1/actions/{action}/run");
        let (_, body) =
            traced_request(&harness, "POST", &path, &traceparent(&trace), Some(json!({"args": args}))).await;
        let audit_id = body["audit_id"].as_str().or(body["error"]["audit_id"].as_str()).unwrap().to_string();
        let records = harness.audit_for(&audit_id).await;
        assert_eq!(records.len(), 1);
        assert_eq!(records[0]["event_type"], event_type);
        flush(&telemetry);
        let mut compared = 0;
        for span in collector.trace(&trace).0.iter().filter(|s| s.name.starts_with("aileron.")) {
            for (key, value) in &span.attributes {
                assert!(key.starts_with("aileron."), "{}: `{key}` is namespaced", span.name);
                let audited = audit_value(&records[0], key);
                assert_eq!(audited.as_ref(), Some(value), "{action}: {} `{key}` vs the {event_type} record", span.name);
                compared += 1;
            }
        }
        assert!(compared >= 8, "{action}: compared {compared} attributes");
    }

    // Approvals: the wait span's attributes are exactly the decision record's payload.
    let trace = trace_id();
    gated(&harness, &upstream).await;
    let body = json!({"args": {"url": format!("{}/status/200", upstream.base_url())}});
    let (_, pending) =
        traced_request(&harness, "POST", "/v1/actions/fetch/run", &traceparent(&trace), Some(body)).await;
    let id = pending["approval_id"].as_str().unwrap();
    let decide = json!({"approved": false, "reason": "not today"});
    harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(decide)).await;
    flush(&telemetry);
    let denied = harness.audit().await.into_iter().find(|r| r["event_type"] == "approval.denied").unwrap();
    let payload: BTreeMap<String, Value> = serde_json::from_value(denied["payload"].clone()).unwrap();
    assert_eq!(collector.trace(&trace).one("aileron.approval.wait").attributes, payload);
}

// ---------------------------------------------------------------------------------------------
// What never lands in a span

const PLANTED_SECRET: &str = "sk-PLANTED-traces-5b7f20c9e1";
const PLANTED_ARGUMENT: &str = "argument-value-PLANTED-8d41";

#[tokio::test]
async fn no_secret_argument_value_or_body_is_exported() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |options| {
        options.credentials = Some(Arc::new(PlantedKey(PLANTED_SECRET)))
    });
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test key\"\nheader = \"X-Api-Key\"\n";
    let hash = harness
        .install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], credential))
        .await;
    let spec = ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("authed-get", "http_get", &hash, "get")
    };
    assert_eq!(harness.add_action("authed-get.md", &spec.render()).await.status, StatusCode::CREATED);

    let runs = [
        format!("{}/echo?q={PLANTED_ARGUMENT}", upstream.base_url()),
        format!("http://evil.example/{PLANTED_ARGUMENT}?q={PLANTED_ARGUMENT}"),
    ];
    for url in runs {
        let response = harness.run("authed-get", json!({"url": url, "credential": "api_key"})).await;
        assert!(response.status == StatusCode::OK || response.status == StatusCode::FORBIDDEN, "{}", response.body);
    }
    assert!(
        upstream.recorder.requests()[0].headers.iter().any(|(_, v)| v.contains(PLANTED_SECRET)),
        "the secret was used"
    );
    flush(&telemetry);
    assert!(collector.all().len() >= 8, "spans were exported: {}", collector.all().len());
    // `header_names` is in the upstream's response body, which is the connector's output.
    for needle in [PLANTED_SECRET, PLANTED_ARGUMENT, "header_names", "x-api-key"] {
        assert!(!collector.raw_contains(needle), "`{needle}` reached the collector");
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP server spans

#[tokio::test]
async fn server_spans_are_named_by_route_template_and_the_gateway_emits_none() {
    let upstream = FakeGithub::start().await.unwrap();
    let collector = Collector::start();
    let base = upstream.base_url();
    let (harness, telemetry) =
        traced_harness(&otlp(&collector, "aileron"), |options| options.gateway_upstreams = Some((base.clone(), base)));

    // (method, path, bearer token?, expected span name, expected status)
    let cases = [
        ("GET", "/v1/health", true, Some("GET /v1/health"), 200),
        ("GET", "/v1/audit/audit-raw-id-0042", true, Some("GET /v1/audit/{id}"), 404),
        ("GET", "/v1/actions/raw-action-name", true, Some("GET /v1/actions/{name}"), 404),
        (
            "POST",
            "/v1/action-approvals/raw-approval-id/decide",
            true,
            Some("POST /v1/action-approvals/{id}/decide"),
            404,
        ),
        ("GET", "/v1/status", false, Some("GET /v1/status"), 401),
        ("GET", "/v1/no-such-route", true, Some("GET"), 404),
        // The same route again, and with a method of the client's own.
        ("GET", "/v1/health", true, Some("GET /v1/health"), 200),
        ("PURGE", "/v1/health", true, Some("PURGE /v1/health"), 405),
        ("POST", "/v1/chat/completions", false, None, 404),
        ("POST", "/v1/messages", false, None, 404),
    ];
    let mut traces = Vec::new();
    for (method, path, authorized, _, expected_status) in &cases {
        let trace = trace_id();
        let mut builder = Request::builder()
            .method(*method)
            .uri(*path)
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("traceparent", traceparent(&trace));
        if *authorized {
            builder = builder.header("authorization", format!("Bearer {TOKEN}"));
        }
        let body = (*method == "POST").then(|| json!({"approved": true}));
        let response = harness.send(builder, body).await;
        assert_eq!(response.status.as_u16(), *expected_status, "{method} {path}: {}", response.body);
        traces.push(trace);
    }
    flush(&telemetry);
    for ((method, path, _, name, status), trace) in cases.iter().zip(&traces) {
        let spans = collector.trace(trace);
        match name {
            Some(name) => {
                let span = spans.one(name);
                assert_eq!(
                    (span.kind, span.parent_span_id.as_deref()),
                    (SERVER, Some(INBOUND_PARENT)),
                    "{method} {path}"
                );
                assert_eq!(span.attributes["http.response.status_code"], *status, "{method} {path}");
                assert_eq!(span.attributes["http.request.method"], *method, "{method} {path}");
                let route = name.split_once(' ').map(|(_, route)| route);
                assert_eq!(span.attributes.get("http.route").and_then(Value::as_str), route, "{method} {path}");
                assert_eq!(spans.0.len(), 1, "{method} {path}: {:?}", spans.names());
            }
            None => assert!(spans.0.is_empty(), "the gateway emits no spans: {method} {path} gave {:?}", spans.names()),
        }
    }
    for raw in ["audit-raw-id-0042", "raw-action-name", "raw-approval-id", "no-such-route"] {
        assert!(!collector.raw_contains(raw), "`{raw}` (a raw path segment) was exported");
    }
    // The gateway forwards the agent's own traceparent untouched.
    let forwarded: Vec<String> = upstream
        .recorder
        .requests()
        .iter()
        .flat_map(|r| r.headers.iter().filter(|(n, _)| n == "traceparent").map(|(_, v)| v.clone()).collect::<Vec<_>>())
        .collect();
    assert_eq!(forwarded, vec![traceparent(&traces[8]), traceparent(&traces[9])]);
}

#[tokio::test]
async fn with_tracing_off_nothing_is_built_and_the_gateway_still_forwards_traceparent() {
    let upstream = FakeGithub::start().await.unwrap();
    let base = upstream.base_url();
    let (harness, telemetry) =
        traced_harness(&TelemetryConfig::disabled(), |options| options.gateway_upstreams = Some((base.clone(), base)));
    assert!(!telemetry.is_enabled() && telemetry.exporter().is_none());
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    let trace = trace_id();
    let (status, body) =
        traced_request(&harness, "POST", "/v1/actions/echo/run", &traceparent(&trace), Some(json!({"args": {}}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let builder = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("traceparent", traceparent(&trace));
    harness.send(builder, Some(json!({}))).await;
    let headers = &upstream.recorder.requests()[0].headers;
    assert!(headers.contains(&("traceparent".to_string(), traceparent(&trace))), "{headers:?}");
}

// ---------------------------------------------------------------------------------------------
// The file exporter

#[tokio::test]
async fn the_file_exporter_writes_one_json_span_per_line_into_daily_files() {
    let temp = tempfile::tempdir().unwrap();
    let traces_dir = temp.path().join("traces");
    let day = Arc::new(AtomicU64::new(0));
    let clock = day.clone();
    let config = TelemetryConfig {
        local_date: Arc::new(move || {
            chrono::NaiveDate::from_ymd_opt(2026, 12, 31).unwrap() + chrono::Days::new(clock.load(Ordering::SeqCst))
        }),
        ..TelemetryConfig::enabled("file", Some(traces_dir.clone()))
    };
    let (harness, telemetry) = traced_harness(&config, |_| {});
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    flush(&telemetry); // setup requests land in the first day's file
    let mut run_traces = Vec::new();
    for next_day in [1, 2] {
        day.store(next_day, Ordering::SeqCst);
        let trace = trace_id();
        let (status, _) =
            traced_request(&harness, "POST", "/v1/actions/echo/run", &traceparent(&trace), Some(json!({"args": {}})))
                .await;
        assert_eq!(status, StatusCode::OK);
        flush(&telemetry);
        run_traces.push(trace);
    }
    let mut names: Vec<String> = std::fs::read_dir(&traces_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["spans-2026-12-31.jsonl", "spans-2027-01-01.jsonl", "spans-2027-01-02.jsonl"],
        "rolled at each date change"
    );

    let lines = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(traces_dir.join(name)).unwrap();
        assert!(text.ends_with('\n'));
        text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"))).collect()
    };
    let setup = lines("spans-2026-12-31.jsonl");
    assert!(setup.iter().any(|span| span["name"] == "POST /v1/actions/install"), "{setup:?}");
    for (name, trace) in [("spans-2027-01-01.jsonl", &run_traces[0]), ("spans-2027-01-02.jsonl", &run_traces[1])] {
        let spans = lines(name);
        let mut span_names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
        span_names.sort();
        assert_eq!(
            span_names,
            [
                "POST /v1/actions/{name}/run",
                "aileron.action.execute",
                "aileron.capability.check",
                "aileron.connector.call"
            ],
            "{name}"
        );
        for span in &spans {
            assert_eq!(span["trace_id"], trace.as_str(), "{name}");
            assert_eq!(span["resource"]["service.name"], "aileron");
            for field in ["span_id", "start_time", "end_time", "kind", "status", "attributes"] {
                assert!(!span[field].is_null(), "{name}: `{field}` in {span}");
            }
        }
        let root = spans.iter().find(|s| s["kind"] == "server").unwrap();
        assert_eq!(root["parent_span_id"], INBOUND_PARENT);
        let call = spans.iter().find(|s| s["name"] == "aileron.connector.call").unwrap();
        assert_eq!(call["attributes"]["aileron.connector.op"], "echo");
    }
}

// ---------------------------------------------------------------------------------------------
// Real daemons: stdout exporter and misconfigurations

/// `aileron daemon run` in a temporary home, with extra environment, its stdout and stderr
/// collected by reader threads.
pub(crate) struct DaemonProcess {
    child: Child,
    home: PathBuf,
    url: String,
    token: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    _temp: tempfile::TempDir,
}

impl DaemonProcess {
    pub(crate) fn spawn(env: &[(&str, String)]) -> DaemonProcess {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        let mut command = Command::new(env!("CARGO_BIN_EXE_aileron"));
        command
            .args(["daemon", "run"])
            .env("AILERON_HOME", &home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for name in [
            "AILERON_URL",
            "AILERON_TOKEN",
            "AILERON_AUDIT_DIR",
            "AILERON_TRACES_DIR",
            "AILERON_LISTEN",
            "MIMALLOC_PURGE_DELAY",
        ] {
            command.env_remove(name);
        }
        for name in [
            "AILERON_OTEL_ENABLED",
            "AILERON_OTEL_EXPORTER",
            "AILERON_OTEL_SERVICE_NAME",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            command.env_remove(name);
        }
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawning aileron daemon run");
        let collect = |mut pipe: Box<dyn Read + Send>| {
            let buffer = Arc::new(Mutex::new(Vec::new()));
            let sink = buffer.clone();
            std::thread::spawn(move || {
                let mut chunk = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut chunk) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&chunk[..n]);
                }
            });
            buffer
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap()));
        let stderr = collect(Box::new(child.stderr.take().unwrap()));
        let deadline = Instant::now() + Duration::from_secs(20);
        let info: Value = loop {
            if let Ok(text) = std::fs::read_to_string(home.join("daemon.json"))
                && let Ok(info) = serde_json::from_str(&text)
            {
                break info;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the daemon exited ({status}): {}", String::from_utf8_lossy(&stderr.lock().unwrap()));
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not start: {}",
                String::from_utf8_lossy(&stderr.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let (url, token) = (info["url"].as_str().unwrap().to_string(), info["token"].as_str().unwrap().to_string());
        DaemonProcess { child, home, url, token, stdout, stderr, _temp: temp }
    }

    pub(crate) fn request(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        // Whichever test runs first in this process: reqwest's rustls needs its provider.
        aileron::platform::process::install_crypto_provider();
        let client = reqwest::blocking::Client::new();
        let mut request = client
            .request(method.parse().unwrap(), format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header("traceparent", traceparent(&trace_id()));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().expect("the daemon answers");
        let status = response.status().as_u16();
        (status, response.json().unwrap_or(Value::Null))
    }

    /// Installs the echo connector and two actions for it, `echo` and the gated `echo-gated`,
    /// through the HTTP API.
    fn install_echo(&self) {
        let package = self.home.parent().unwrap().join("pkg-echo");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("connector.wasm"), guest_wasm("echo")).unwrap();
        std::fs::write(package.join("manifest.toml"), manifest("echo", &[], "")).unwrap();
        let reference = "github://aileron-tests/echo@1.0.0";
        let (status, preview) =
            self.request("POST", "/v1/connectors/preview", Some(json!({"source": package, "reference": reference})));
        assert_eq!(status, 200, "{preview}");
        let body = json!({"source": package, "reference": reference, "expected_hash": preview["hash"], "consent": "flag", "allow_unsigned": true});
        let (status, installed) = self.request("POST", "/v1/connectors/install", Some(body));
        assert_eq!(status, 201, "{installed}");
        let hash = installed["hash"].as_str().unwrap();
        let text: &[(&str, &str, bool)] = &[("text", "string", false)];
        for spec in [
            ActionSpec { inputs: text, ..ActionSpec::new("echo", "echo", hash, "echo") },
            ActionSpec { inputs: text, approval: true, ..ActionSpec::new("echo-gated", "echo", hash, "echo") },
        ] {
            let body = json!({"file_name": format!("{}.md", spec.name), "content": spec.render()});
            let (status, added) = self.request("POST", "/v1/actions/install", Some(body));
            assert_eq!(status, 201, "{added}");
        }
    }

    /// SIGTERM, then the exit status and both outputs.
    pub(crate) fn stop(mut self) -> (bool, String, String) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the daemon did not stop within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        };
        // The reader threads end at EOF, right after the exit.
        std::thread::sleep(Duration::from_millis(100));
        let text = |buffer: &Arc<Mutex<Vec<u8>>>| String::from_utf8_lossy(&buffer.lock().unwrap()).into_owned();
        (status.success(), text(&self.stdout), text(&self.stderr))
    }
}

#[test]
fn the_stdout_exporter_writes_json_span_lines_to_stderr_and_nothing_to_stdout() {
    let daemon = DaemonProcess::spawn(&[
        ("AILERON_OTEL_ENABLED", "true".into()),
        ("AILERON_OTEL_EXPORTER", "stdout".into()),
        ("AILERON_OTEL_SERVICE_NAME", "aileron-stdout-test".into()),
    ]);
    daemon.install_echo();
    let (status, body) = daemon.request("POST", "/v1/actions/echo/run", Some(json!({"args": {}})));
    assert_eq!(status, 200, "{body}");
    assert_eq!(daemon.request("GET", "/v1/health", None).0, 200);
    let (clean_exit, stdout, stderr) = daemon.stop();
    assert!(clean_exit, "{stderr}");
    assert_eq!(stdout, "", "stdout stays clean for the MCP protocol");
    let spans: Vec<Value> = stderr
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON span per line ({e}): {line}")))
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    for expected in [
        "GET /v1/health",
        "POST /v1/actions/{name}/run",
        "aileron.action.execute",
        "aileron.capability.check",
        "aileron.connector.call",
    ] {
        assert!(names.contains(&expected), "`{expected}` in {names:?}");
    }
    assert!(spans.iter().all(|s| s["resource"]["service.name"] == "aileron-stdout-test"));
    assert!(!stderr.contains("warning"), "{stderr}");
}

/// The proof of issue 6: one trace from an MCP tool call in the real `aileron-mcp` through the
/// real daemon's HTTP root, approval wait, executor and connector call, as a real OTLP/HTTP
/// receiver gets it from the two processes.
#[test]
fn one_trace_runs_from_an_aileron_mcp_tool_call_through_the_approval_wait_to_the_connector_call() {
    let collector = Collector::start();
    let base = collector.endpoint.strip_suffix("/v1/traces").unwrap().to_string();
    let otlp_env = |service: &str| {
        vec![
            ("AILERON_OTEL_ENABLED", "true".to_string()),
            ("AILERON_OTEL_EXPORTER", "otlp".to_string()),
            ("AILERON_OTEL_SERVICE_NAME", service.to_string()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", base.clone()),
        ]
    };
    let daemon = DaemonProcess::spawn(&otlp_env("aileron-daemon-under-test"));
    daemon.install_echo();
    let mut mcp_env = otlp_env("aileron-mcp-under-test");
    mcp_env.extend([
        ("AILERON_HOME", daemon.home.display().to_string()),
        ("AILERON_URL", daemon.url.clone()),
        ("AILERON_TOKEN", daemon.token.clone()),
    ]);
    let mcp_env: Vec<(&str, &str)> = mcp_env.iter().map(|(name, value)| (*name, value.as_str())).collect();
    let mut mcp = StdioSession::spawn(&mcp_env);
    mcp.initialize("2025-11-25");
    assert!(mcp.tool_names().contains(&"echo_gated".to_string()));

    // The agent's own trace reaches us in `_meta`.
    let trace = trace_id();
    let gated = mcp.request(
        "tools/call",
        json!({"name": "echo_gated", "arguments": {"text": "hi"}, "_meta": {"traceparent": traceparent(&trace)}}),
    );
    let handle: Value = serde_json::from_str(gated["result"]["content"][1]["text"].as_str().unwrap()).unwrap();
    let id = handle["approval_id"].as_str().expect("a pending approval").to_string();
    std::thread::sleep(Duration::from_millis(30)); // a measurable wait
    let (status, _) =
        daemon.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({"approved": true})));
    assert_eq!(status, 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, view) = daemon.request("GET", &format!("/v1/action-approvals/{id}/result"), None);
        if view["status"] == "completed" {
            break;
        }
        assert!(view["status"] != "failed" && Instant::now() < deadline, "{view}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Without a `_meta` traceparent the tool call is the root of a trace of its own.
    let plain = mcp.call("echo", json!({"text": "hi"}));
    assert_ne!(plain["isError"], true, "{plain}");

    let (clean, stderr) = mcp.close();
    assert!(clean && !stderr.contains("warning"), "aileron-mcp: {stderr}");
    let (clean, _, stderr) = daemon.stop();
    assert!(clean, "daemon: {stderr}");
    // Both processes flushed at exit; the receiver may still be decoding the last request.
    let deadline = Instant::now() + Duration::from_secs(10);
    while collector.trace(&trace).0.len() < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }

    let spans = collector.trace(&trace);
    let tool = spans.one("aileron.mcp.tool.call");
    assert_eq!((tool.kind, tool.parent_span_id.as_deref()), (CLIENT, Some(INBOUND_PARENT)));
    assert_eq!(tool.resource["service.name"], "aileron-mcp-under-test", "emitted by aileron-mcp");
    check_attributes(tool, json!({"aileron.mcp.tool.name": "echo_gated"}));
    let root = spans.one("POST /v1/actions/{name}/run");
    assert_eq!((root.kind, root.parent_span_id.as_ref()), (SERVER, Some(&tool.span_id)), "the daemon continues it");
    assert_eq!(root.attributes["http.response.status_code"], 202);
    let wait = spans.one("aileron.approval.wait");
    assert_eq!(wait.parent_span_id.as_ref(), Some(&root.span_id));
    assert_eq!(wait.attributes["aileron.approval.id"], id.as_str());
    assert_eq!(wait.attributes["aileron.approval.decision"], "approved");
    assert!(wait.attributes["aileron.approval.wait_ms"].as_u64().unwrap() >= 30);
    let execute = spans.one("aileron.action.execute");
    assert_eq!(execute.parent_span_id.as_ref(), Some(&wait.span_id), "the approved run follows the wait");
    check_attributes(execute, json!({"aileron.action.name": "echo-gated", "aileron.action.steps_count": 1}));
    for name in ["aileron.capability.check", "aileron.connector.call"] {
        let step = spans.one(name);
        assert_eq!(step.parent_span_id.as_ref(), Some(&execute.span_id), "{name}");
        assert_eq!(step.attributes["aileron.connector.fqn"], echo_fqn(), "{name}");
    }
    for span in spans.0.iter().filter(|span| span.name != "aileron.mcp.tool.call") {
        assert_eq!(span.resource["service.name"], "aileron-daemon-under-test", "{}", span.name);
        // Only the catalog lookup may join the trace besides the run: a child of the tool call.
        if span.name == "GET /v1/actions" {
            assert_eq!(span.parent_span_id.as_ref(), Some(&tool.span_id));
        }
    }
    let mut names = spans.names();
    names.retain(|name| name != "GET /v1/actions");
    assert_eq!(
        names,
        [
            "POST /v1/actions/{name}/run",
            "aileron.action.execute",
            "aileron.approval.wait",
            "aileron.capability.check",
            "aileron.connector.call",
            "aileron.mcp.tool.call"
        ]
    );

    let roots: Vec<ReceivedSpan> = collector
        .all()
        .into_iter()
        .filter(|span| span.name == "aileron.mcp.tool.call" && span.parent_span_id.is_none())
        .collect();
    assert_eq!(roots.len(), 1, "the plain call is a trace root: {roots:?}");
    let plain = collector.trace(&roots[0].trace_id);
    let run = plain.one("POST /v1/actions/{name}/run");
    assert_eq!(run.parent_span_id.as_ref(), Some(&roots[0].span_id));
    assert_eq!(plain.one("aileron.action.execute").parent_span_id.as_ref(), Some(&run.span_id));
}

/// Variables set on a spawned daemon.
type Environment<'a> = Vec<(&'a str, String)>;

#[test]
fn misconfigured_traces_warn_once_and_the_daemon_keeps_serving() {
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let blocker = tempfile::NamedTempFile::new().unwrap();
    let on = || ("AILERON_OTEL_ENABLED", "true".to_string());
    let exporter = |name: &str| ("AILERON_OTEL_EXPORTER", name.to_string());
    // (label, environment, the one warning expected, or none)
    let cases: Vec<(&str, Environment, Option<&str>)> = vec![
        ("unknown exporter", vec![on(), exporter("zipkin")], Some("unknown AILERON_OTEL_EXPORTER `zipkin`")),
        (
            "unwritable traces dir",
            vec![on(), exporter("file"), ("AILERON_TRACES_DIR", blocker.path().display().to_string())],
            Some("cannot write spans under"),
        ),
        (
            "empty traces dir",
            vec![on(), exporter("file"), ("AILERON_TRACES_DIR", String::new())],
            Some("AILERON_TRACES_DIR is set but empty"),
        ),
        (
            "invalid collector URL",
            vec![on(), exporter("otlp"), ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1".into())],
            Some("building the OTLP exporter"),
        ),
        (
            "unreachable collector",
            vec![on(), exporter("otlp"), ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{closed_port}"))],
            None,
        ),
    ];
    std::thread::scope(|scope| {
        for (label, env, warning) in &cases {
            scope.spawn(move || {
                let daemon = DaemonProcess::spawn(env);
                assert_eq!(daemon.request("GET", "/v1/health", None).0, 200, "{label}");
                daemon.install_echo();
                for _ in 0..3 {
                    let (status, body) = daemon.request("POST", "/v1/actions/echo/run", Some(json!({"args": {}})));
                    assert_eq!(status, 200, "{label}: {body}");
                }
                let started = Instant::now();
                let (clean_exit, _, stderr) = daemon.stop();
                assert!(clean_exit, "{label}: {stderr}");
                assert!(started.elapsed() < Duration::from_secs(15), "{label}: shutdown took {:?}", started.elapsed());
                let warnings = stderr.matches("warning").count();
                match warning {
                    Some(fragment) => {
                        assert_eq!(warnings, 1, "{label}: exactly one warning in {stderr}");
                        assert!(stderr.contains(fragment), "{label}: `{fragment}` in {stderr}");
                        assert!(stderr.contains("hint: "), "{label}: {stderr}");
                    }
                    None => assert_eq!(warnings, 0, "{label}: {stderr}"),
                }
            });
        }
    });
}

#[tokio::test]
async fn an_unreachable_collector_fails_exports_but_never_runs() {
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = TelemetryConfig {
        otlp_endpoint: Some(format!("http://127.0.0.1:{closed_port}/v1/traces")),
        ..TelemetryConfig::enabled("otlp", None)
    };
    let (harness, telemetry) = traced_harness(&config, |_| {});
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    for _ in 0..3 {
        let response = harness.run("echo", json!({})).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.body);
        assert!(telemetry.force_flush().is_err(), "the export failed and said so");
    }
    assert_eq!(harness.request("GET", "/v1/health", None).await.status, StatusCode::OK);
}

/// Without a flush, spans reach the collector as soon as a batch fills
/// (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`) and, for a batch that never fills, when the schedule comes
/// round (`OTEL_BSP_SCHEDULE_DELAY`).
#[tokio::test]
async fn spans_leave_when_a_batch_fills_and_when_the_schedule_comes_round() {
    let run_and_wait = |limits: Limits| async move {
        let collector = Collector::start();
        let config = TelemetryConfig { otlp_limits: limits, ..otlp(&collector, "aileron") };
        let (harness, _telemetry) = traced_harness(&config, |_| {});
        harness.guest_action("echo", &[], "echo", |_| {}).await;
        let trace = trace_id();
        let (status, body) =
            traced_request(&harness, "POST", "/v1/actions/echo/run", &traceparent(&trace), Some(json!({"args": {}})))
                .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while collector.trace(&trace).0.len() < 4 {
            assert!(Instant::now() < deadline, "{limits:?}: the run's spans never arrived: {:?}", collector.all());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            collector.trace(&trace).names(),
            [
                "POST /v1/actions/{name}/run",
                "aileron.action.execute",
                "aileron.capability.check",
                "aileron.connector.call"
            ]
        );
    };
    // Every span a batch of its own; the schedule an hour away.
    run_and_wait(Limits { schedule_delay: Duration::from_secs(3600), max_queue: 2048, max_batch: 1 }).await;
    // Batches that never fill; the schedule every 100 ms.
    run_and_wait(Limits { schedule_delay: Duration::from_millis(100), max_queue: 2048, max_batch: 512 }).await;
}

/// Where a file-exporter daemon writes, for completeness of the registry wiring.
fn spans_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn the_file_exporter_of_a_real_daemon_writes_under_aileron_traces_dir() {
    let traces_parent = tempfile::tempdir().unwrap();
    let daemon = DaemonProcess::spawn(&[
        ("AILERON_OTEL_ENABLED", "true".into()),
        ("AILERON_OTEL_EXPORTER", "file".into()),
        ("AILERON_TRACES_DIR", traces_parent.path().display().to_string()),
    ]);
    assert_eq!(daemon.request("GET", "/v1/status", None).0, 200);
    let (clean_exit, _, stderr) = daemon.stop();
    assert!(clean_exit, "{stderr}");
    let dir = traces_parent.path().join("traces");
    // Named by the local date (the day before, should the test straddle midnight).
    let today = chrono::Local::now().date_naive();
    let days = [today, today - chrono::Days::new(1)].map(aileron::platform::telemetry::json_lines::daily_file_name);
    let files = spans_files(&dir);
    assert!(!files.is_empty() && files.iter().all(|name| days.contains(name)), "{files:?}");
    let text: String = files.iter().map(|name| std::fs::read_to_string(dir.join(name)).unwrap()).collect();
    let names: Vec<String> =
        text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, ["GET /v1/status"]);
}

#[test]
fn aileron_help_lists_every_trace_variable() {
    let output = Command::new(env!("CARGO_BIN_EXE_aileron")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for name in [
        "AILERON_OTEL_ENABLED",
        "AILERON_OTEL_SERVICE_NAME",
        "AILERON_OTEL_EXPORTER",
        "AILERON_TRACES_DIR",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_INSECURE",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ] {
        assert!(help.lines().any(|line| line.trim_start().starts_with(name)), "`{name}` in:\n{help}");
    }
}

/// A connector's log lines are events of its `aileron.connector.call` span, escaped.
#[tokio::test]
async fn connector_log_lines_are_span_events() {
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    harness.guest_action("logger", &[], "log", |spec| spec.inputs = &[("lines", "integer", false)]).await;
    let response = harness.run("logger", json!({ "lines": 2 })).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    flush(&telemetry);
    let spans = collector.all();
    let call = spans.iter().find(|s| s.name == "aileron.connector.call").expect("a connector call span");
    let events: Vec<&(String, BTreeMap<String, Value>)> =
        call.events.iter().filter(|(name, _)| name == "aileron.connector.log").collect();
    assert_eq!(events.len(), 2, "{:?}", call.events);
    assert_eq!(events[0].1["aileron.log.message"], "step 0 of the work");
    let last = events[1].1["aileron.log.message"].as_str().unwrap();
    assert!(last.contains("\\u{1b}[31mred") && !last.contains('\u{1b}'), "escaped: {last}");
}

/// A spawned program is a span `aileron.connector.spawn` under the connector call, with the
/// declared operation, program and exit code, never an argument value.
#[tokio::test]
async fn a_spawned_program_is_a_span_under_the_connector_call() {
    let collector = Collector::start();
    let (harness, telemetry) = traced_harness(&otlp(&collector, "aileron"), |_| {});
    let spawn = "[capabilities.spawn]\nprograms = [{ path = \"/bin/sh\" }]\n\n[capabilities.spawn.operations.sh]\n\
                 argv = \"sh -c {script}\"\ndescription = \"Run a script\"\n";
    let hash = harness.install("spawner", &guest_wasm("spawner"), &manifest("spawner", &[], spawn)).await;
    let inputs = [("spawn_op", "string", false), ("values", "object", false)];
    let spec = ActionSpec {
        capabilities: &["run", "spawn:sh"],
        inputs: &inputs,
        ..ActionSpec::new("spawner", "spawner", &hash, "run")
    };
    assert_eq!(harness.add_action("spawner.md", &spec.render()).await.status, StatusCode::CREATED);
    let trace = trace_id();
    let args = json!({"args": {"spawn_op": "sh", "values": {"script": "exit 4 # secret-value-8d1"}}});
    let (status, body) =
        traced_request(&harness, "POST", "/v1/actions/spawner/run", &traceparent(&trace), Some(args)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    flush(&telemetry);

    let spans = collector.trace(&trace);
    let call = spans.one("aileron.connector.call");
    let spawned = spans.one("aileron.connector.spawn");
    assert_eq!(spawned.parent_span_id.as_ref(), Some(&call.span_id), "a child of the connector call");
    check_attributes(
        spawned,
        json!({
            "aileron.connector.fqn": "github://aileron-tests/spawner",
            "aileron.capability.kind": "spawn:sh",
            "aileron.spawn.confinement": aileron::dataplane::spawn::CONFINEMENT,
            "aileron.spawn.op": "sh",
            "aileron.spawn.program": "/bin/sh",
            "aileron.spawn.exit_code": 4,
        }),
    );
    assert!(!format!("{:?}", spans.0).contains("secret-value-8d1"), "argument values never reach a span");
}
