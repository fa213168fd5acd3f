//! The spans of the observability seed, one constructor each, and [`TracedSpan`], the handle a
//! call site ends (or fails). With tracing off every constructor returns the parent context
//! untouched and builds nothing — not even the attribute list.

use std::sync::Arc;
use std::time::SystemTime;

use aileron_core::Failure;
use aileron_core::action::{ActionFile, StepTexts};
use aileron_core::approval::{ApprovalDecision, ApprovalEntry, ApprovalId, decision_payload};
use opentelemetry::trace::{Link, Span as _, SpanBuilder, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use serde_json::{Map, Value};

use super::keys;
use super::{MAX_APPROVAL_PARENTS, Telemetry, valid_span_context};

/// A started span (or, with tracing off, just the context it would have been a child of).
/// Ending is explicit; a handle dropped without `end` (a cancelled request) still ends its span
/// when the last clone of its context goes, with an unset status.
#[must_use = "end the span with `end` or `fail`"]
pub struct TracedSpan {
    cx: Context,
    /// False when no span was started: ending must not touch the parent's span.
    owned: bool,
}

impl TracedSpan {
    /// This span's context: the explicit parent of its children (a run's spans are started under
    /// it rather than run in it, so no context is attached on every poll of a run's future, one
    /// layer per span), or what work is run in (`opentelemetry::context::FutureExt::with_context`).
    pub fn context(&self) -> &Context {
        &self.cx
    }

    /// The `traceparent` header value naming this span (or the carried parent with tracing off).
    pub fn traceparent(&self) -> Option<String> {
        super::traceparent(&self.cx)
    }

    /// Writes `traceparent`/`tracestate` for this span into an outbound request's headers.
    pub fn inject(&self, headers: &mut ::http::HeaderMap) {
        super::inject(&self.cx, headers);
    }

    pub fn set_attribute(&self, attribute: KeyValue) {
        if self.owned {
            self.cx.span().set_attribute(attribute);
        }
    }

    /// A span event (a connector's log line, for one).
    pub fn add_event(&self, name: &'static str, attributes: Vec<KeyValue>) {
        if self.owned {
            self.cx.span().add_event(name, attributes);
        }
    }

    /// Ends the span with the default (unset) status.
    pub fn end(self) {
        if self.owned {
            self.cx.span().end();
        }
    }

    /// Status Error with `message`, for an ending outside the failure taxonomy (a request the
    /// daemon refused, a daemon that could not be reached); no `aileron.failure.*` attributes.
    pub fn error(self, message: String) {
        if self.owned {
            let span = self.cx.span();
            span.set_status(Status::error(message));
            span.end();
        }
    }

    /// Marks the span failed — the `aileron.failure.*` attributes of the audit payload,
    /// `aileron.audit.id`, status Error with the failure message — and ends it. `audit_id`
    /// overrides the failure's own (a step fails before the run stamps its envelope).
    pub fn fail(self, failure: &Failure, audit_id: Option<&str>) {
        if !self.owned {
            return;
        }
        let span = self.cx.span();
        let (attributes, status) = failed(failure, audit_id);
        span.set_attributes(attributes);
        span.set_status(status);
        span.end();
    }
}

/// A span nothing runs inside (the capability check): the SDK's span itself, started as a child
/// of its parent but given no context of its own — no boxed span and no context `Arc`
/// that only ending it would use. Dropped without `end`, it still ends (unset status).
#[must_use = "end the span with `end` or `fail`"]
pub struct LeafSpan(Option<opentelemetry_sdk::trace::Span>);

impl LeafSpan {
    pub fn end(self) {
        if let Some(mut span) = self.0 {
            span.end();
        }
    }

    /// As [`TracedSpan::fail`].
    pub fn fail(self, failure: &Failure, audit_id: Option<&str>) {
        if let Some(mut span) = self.0 {
            let (attributes, status) = failed(failure, audit_id);
            span.set_attributes(attributes);
            span.set_status(status);
            span.end();
        }
    }
}

/// What a failed span carries: [`failure_attributes`] (`audit_id` overriding the failure's own)
/// and status Error with the failure's message.
fn failed(failure: &Failure, audit_id: Option<&str>) -> (Vec<KeyValue>, Status) {
    (failure_attributes(failure, audit_id.or(failure.audit_id.as_deref())), Status::error(failure.message.clone()))
}

/// The span attributes of a failure: exactly the [`keys::FAILURE_SPAN_KEYS`] entries of
/// `Failure::audit_payload` (same names, same values as the audit record) plus the audit id.
pub fn failure_attributes(failure: &Failure, audit_id: Option<&str>) -> Vec<KeyValue> {
    let payload = failure.audit_payload();
    let mut attributes: Vec<KeyValue> =
        keys::FAILURE_SPAN_KEYS.iter().filter_map(|key| payload.get(*key).map(|value| key_value(key, value))).collect();
    if let Some(audit_id) = audit_id {
        attributes.push(KeyValue::new(keys::AUDIT_ID, audit_id.to_string()));
    }
    attributes
}

/// An audit payload entry as a span attribute: strings, integers and booleans as themselves,
/// anything else as its JSON text.
pub fn key_value(key: &str, value: &Value) -> KeyValue {
    let key = key.to_string();
    match value {
        Value::String(text) => KeyValue::new(key, text.clone()),
        Value::Bool(flag) => KeyValue::new(key, *flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => KeyValue::new(key, integer),
            None => KeyValue::new(key, number.as_f64().unwrap_or(f64::NAN)),
        },
        other => KeyValue::new(key, other.to_string()),
    }
}

/// A whole audit payload as span attributes.
pub fn payload_attributes(payload: &Map<String, Value>) -> Vec<KeyValue> {
    payload.iter().map(|(key, value)| key_value(key, value)).collect()
}

impl Telemetry {
    /// Starts the span `build` describes as a child of `parent`; with tracing off, `build` is
    /// never called.
    pub fn start(&self, parent: &Context, build: impl FnOnce() -> SpanBuilder) -> TracedSpan {
        match self.tracer() {
            None => TracedSpan { cx: parent.clone(), owned: false },
            Some(tracer) => {
                let span = tracer.build_with_context(build(), parent);
                TracedSpan { cx: parent.with_span(span), owned: true }
            }
        }
    }

    /// `aileron.action.execute`, a child of the current context (the request's server span, an
    /// approval's wait span, an MCP tool call's), around one run of `action`. Its steps' spans
    /// are started under it explicitly ([`TracedSpan::context`]).
    pub fn action_execute(&self, action: &ActionFile) -> TracedSpan {
        self.start(&Context::current(), || {
            SpanBuilder::from_name(keys::SPAN_ACTION_EXECUTE).with_attributes([
                KeyValue::new(keys::ACTION_NAME, action.run_texts().name.clone()),
                KeyValue::new(keys::ACTION_STEPS_COUNT, action.steps.len() as i64),
            ])
        })
    }

    /// `aileron.capability.check`: the action-boundary check of one step's op, a child of `parent`
    /// (the run's span).
    pub fn capability_check(&self, parent: &Context, action: &Arc<str>, step: &StepTexts) -> LeafSpan {
        LeafSpan(self.tracer().map(|tracer| {
            let builder = SpanBuilder::from_name(keys::SPAN_CAPABILITY_CHECK).with_attributes([
                KeyValue::new(keys::ACTION_NAME, action.clone()),
                KeyValue::new(keys::CONNECTOR_FQN, step.connector.clone()),
                KeyValue::new(keys::CAPABILITY_KIND, step.op.clone()),
            ]);
            tracer.build_with_context(builder, parent)
        }))
    }

    /// `aileron.connector.call`: one step's call into the sandbox, retries included, a child of
    /// `parent` (the run's span).
    pub fn connector_call(&self, parent: &Context, step: &StepTexts) -> TracedSpan {
        self.start(parent, || {
            SpanBuilder::from_name(keys::SPAN_CONNECTOR_CALL).with_attributes([
                KeyValue::new(keys::CONNECTOR_FQN, step.connector.clone()),
                KeyValue::new(keys::CONNECTOR_OP, step.op.clone()),
                KeyValue::new(keys::CONNECTOR_HASH, step.hash.clone()),
            ])
        })
    }

    /// `aileron.proxy.request`: a launched agent's matched request, a root span from when it
    /// arrived (`duration_us` before now) carrying its audit record's keys and id; status Error
    /// when it was refused (`reject_reason`).
    pub fn proxy_request(&self, payload: &Map<String, Value>, audit_id: &str, refused: Option<&str>) {
        let elapsed = payload.get(keys::PROXY_DURATION_US).and_then(Value::as_u64).unwrap_or(0);
        let span = self.start(&Context::new(), || {
            let mut attributes = payload_attributes(payload);
            attributes.push(KeyValue::new(keys::AUDIT_ID, audit_id.to_string()));
            SpanBuilder::from_name(keys::SPAN_PROXY_REQUEST)
                .with_kind(SpanKind::Server)
                .with_start_time(SystemTime::now() - std::time::Duration::from_micros(elapsed))
                .with_attributes(attributes)
        });
        match refused {
            Some(reason) => span.error(reason.to_string()),
            None => span.end(),
        }
    }

    /// `aileron.connector.spawn`: one program a connector ran (`requested` = `spawn:<op or program>`),
    /// a child of `parent` (the call's span).
    pub fn connector_spawn(&self, parent: &Context, connector_fqn: &str, requested: &str) -> TracedSpan {
        self.start(parent, || {
            SpanBuilder::from_name(keys::SPAN_CONNECTOR_SPAWN).with_attributes([
                KeyValue::new(keys::CONNECTOR_FQN, connector_fqn.to_string()),
                KeyValue::new(keys::CAPABILITY_KIND, requested.to_string()),
                KeyValue::new(keys::SPAWN_CONFINEMENT, crate::dataplane::spawn::CONFINEMENT),
            ])
        })
    }

    /// `aileron.mcp.tool.call`: a client span for one MCP tool call, the child of the agent's
    /// `traceparent` when it sent one (else a new trace's root). Send [`TracedSpan::traceparent`]
    /// to the daemon so its spans join this trace; end it when the daemon has answered.
    pub fn mcp_tool_call(&self, tool: &str, inbound_traceparent: Option<&str>) -> TracedSpan {
        let parent = inbound_traceparent.map(super::context_from_traceparent).unwrap_or_default();
        self.start(&parent, || {
            SpanBuilder::from_name(keys::SPAN_MCP_TOOL_CALL)
                .with_kind(SpanKind::Client)
                .with_attributes([KeyValue::new(keys::MCP_TOOL_NAME, tool.to_string())])
        })
    }

    /// Remembers the current span context as the parent of approval `id`'s wait span. Called
    /// when the request is registered; forgotten when it is decided (or when too many wait).
    pub fn remember_approval(&self, id: &ApprovalId) {
        let Some(pipeline) = &self.pipeline else { return };
        let Some(parent) = valid_span_context(&Context::current()) else { return };
        let mut parents = pipeline.approval_parents.lock().expect("approval parents poisoned");
        parents.insert(id.clone(), parent);
        while parents.len() > MAX_APPROVAL_PARENTS {
            parents.pop_first();
        }
    }

    /// `aileron.approval.wait`, emitted when a decision is recorded: it starts at the entry's
    /// `requested_at` and ends at its `decided_at`, carries every `aileron.approval.*` key of the
    /// decision's audit payload, and is a child of the request's span (linked to the deciding
    /// request's span). Returns the context the approved run should execute in: the wait span's,
    /// so the run continues the requester's trace. With tracing off: the current context.
    pub fn approval_wait(&self, entry: &ApprovalEntry, decision: ApprovalDecision) -> Context {
        let current = Context::current();
        let Some(pipeline) = &self.pipeline else { return current };
        let remembered = pipeline.approval_parents.lock().expect("approval parents poisoned").remove(&entry.id);
        let parent = match &remembered {
            Some(span_context) => Context::new().with_remote_span_context(span_context.clone()),
            // A restart forgot the request's span: the deciding request is the best parent.
            None => current.clone(),
        };
        let deciding = remembered.is_some().then(|| valid_span_context(&current)).flatten();
        let end = entry.decided_at.as_deref().and_then(system_time).unwrap_or_else(SystemTime::now);
        let start = system_time(&entry.requested_at).unwrap_or(end);
        let span = self.start(&parent, || {
            SpanBuilder::from_name(keys::SPAN_APPROVAL_WAIT)
                .with_start_time(start)
                .with_attributes(payload_attributes(&decision_payload(entry, decision)))
                .with_links(deciding.into_iter().map(Link::with_context).collect())
        });
        span.cx.span().end_with_timestamp(end);
        span.cx
    }
}

/// An RFC 3339 timestamp of the journal as a `SystemTime`.
fn system_time(timestamp: &str) -> Option<SystemTime> {
    chrono::DateTime::parse_from_rfc3339(timestamp).ok().map(SystemTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aileron_core::{Boundary, FailureClass};

    #[test]
    fn failure_attributes_are_the_audit_payload_entries_plus_the_audit_id() {
        let check = |failure: Failure, audit_id: Option<&str>, expected: &[(&str, Value)]| {
            let attributes: Vec<(String, String)> = failure_attributes(&failure, audit_id)
                .iter()
                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                .collect();
            let expected: Vec<(String, String)> = expected
                .iter()
                .map(|(key, value)| (key.to_string(), value.as_str().map(str::to_string).unwrap_or(value.to_string())))
                .collect();
            assert_eq!(attributes, expected);
        };
        check(
            Failure::capability_denied(Boundary::Action, "op `delete` is not in the subset")
                .with_detail("op", "delete"),
            Some("audit-1"),
            &[
                (keys::FAILURE_CLASS, "capability_denied".into()),
                (keys::FAILURE_BOUNDARY, "action".into()),
                (keys::FAILURE_RETRIABLE, false.into()),
                (keys::AUDIT_ID, "audit-1".into()),
            ],
        );
        check(
            Failure::new(FailureClass::NetworkError, Boundary::External, "connection refused"),
            None,
            &[
                (keys::FAILURE_CLASS, "network_error".into()),
                (keys::FAILURE_BOUNDARY, "external".into()),
                (keys::FAILURE_RETRIABLE, true.into()),
            ],
        );
    }

    #[test]
    fn payload_values_keep_their_types() {
        let check = |value: Value, expected: opentelemetry::Value| assert_eq!(key_value("k", &value).value, expected);
        check("text".into(), "text".into());
        check(true.into(), true.into());
        check(1234.into(), 1234i64.into());
        check(1.5.into(), 1.5f64.into());
        check(serde_json::json!(["a"]), "[\"a\"]".to_string().into());
    }

    #[test]
    fn with_tracing_off_spans_carry_the_parent_and_build_nothing() {
        let telemetry = Telemetry::disabled();
        let parent = super::super::context_from_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let span = telemetry.start(&parent, || panic!("the builder must not run with tracing off"));
        assert_eq!(span.traceparent().as_deref(), Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        span.end();
        let tool =
            telemetry.mcp_tool_call("list_issues", Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert_eq!(tool.traceparent().as_deref(), Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert_eq!(telemetry.mcp_tool_call("list_issues", None).traceparent(), None);
    }
}
