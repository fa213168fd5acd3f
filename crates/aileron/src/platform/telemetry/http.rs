//! The HTTP server-root span: one `METHOD /route/template` span per daemon request (axum's
//! `MatchedPath`, never the raw path with its ids), the child of an inbound `traceparent`.
//!
//! The LLM gateway's paths get nothing: the gateway is a transparent proxy that emits no spans
//! and forwards the agent's own `traceparent` upstream untouched. With tracing off the layer only
//! makes an inbound trace context current, so the handlers' work still belongs to it.

use axum::extract::{MatchedPath, Request};
use axum::response::Response;
use opentelemetry::KeyValue;
use opentelemetry::context::FutureExt;
use opentelemetry::trace::{SpanBuilder, SpanKind, Status, TraceContextExt};

use super::{Telemetry, keys};

/// `serve(request)` inside the request's server span: called by the daemon's one middleware
/// layer (`auth::admit`), added with `Router::layer` so `MatchedPath` is known.
pub async fn server_span<F>(telemetry: &Telemetry, request: Request, serve: impl FnOnce(Request) -> F) -> Response
where
    F: Future<Output = Response>,
{
    if crate::dataplane::gateway::is_gateway_path(request.method(), request.uri().path()) {
        return serve(request).await;
    }
    let parent = super::extract(request.headers());
    if !telemetry.is_enabled() {
        return if parent.has_active_span() { serve(request).with_context(parent).await } else { serve(request).await };
    }
    let method = request.method().as_str().to_string();
    let route = request.extensions().get::<MatchedPath>().map(|path| path.as_str().to_string());
    let span = telemetry.start(&parent, || {
        // Unmatched requests are named by the method alone (OTel HTTP semantic conventions).
        let name = match &route {
            Some(route) => format!("{method} {route}"),
            None => method.clone(),
        };
        let mut attributes = vec![KeyValue::new(keys::HTTP_REQUEST_METHOD, method.clone())];
        if let Some(route) = &route {
            attributes.push(KeyValue::new(keys::HTTP_ROUTE, route.clone()));
        }
        SpanBuilder::from_name(name).with_kind(SpanKind::Server).with_attributes(attributes)
    });
    let response = serve(request).with_context(span.context()).await;
    let status = response.status();
    span.set_attribute(KeyValue::new(keys::HTTP_RESPONSE_STATUS_CODE, i64::from(status.as_u16())));
    if status.is_server_error() {
        // A server span is an error only for 5xx; a 4xx is the client's (OTel HTTP conventions).
        span.context().span().set_status(Status::error(status.to_string()));
    }
    span.end();
    response
}
