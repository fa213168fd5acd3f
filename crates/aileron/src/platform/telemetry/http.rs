//! The HTTP server-root span: one `METHOD /route/template` span per daemon request (axum's
//! `MatchedPath`, never the raw path with its ids), the child of an inbound `traceparent`.
//!
//! The LLM gateway's paths get nothing: the gateway is a transparent proxy that emits no spans
//! and forwards the agent's own `traceparent` upstream untouched. With tracing off the layer only
//! makes an inbound trace context current, so the handlers' work still belongs to it.

use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock};

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
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
    let span = telemetry.start(&parent, || {
        let route = request.extensions().get::<MatchedPath>().map(MatchedPath::as_str);
        // Room for the status code, set when the response is known.
        let mut attributes = Vec::with_capacity(3);
        let builder = match (standard_method(request.method()), route) {
            (Some((index, method)), Some(route)) => {
                let name = span_name(index, method, route);
                attributes.push(KeyValue::new(keys::HTTP_REQUEST_METHOD, method));
                attributes.push(KeyValue::new(keys::HTTP_ROUTE, &name[method.len() + 1..]));
                SpanBuilder::from_name(name)
            }
            // Unmatched requests are named by the method alone (OTel HTTP semantic conventions).
            (Some((_, method)), None) => {
                attributes.push(KeyValue::new(keys::HTTP_REQUEST_METHOD, method));
                SpanBuilder::from_name(method)
            }
            // A method of the client's own invention: owned copies, never kept.
            (None, route) => {
                let method = request.method().as_str();
                attributes.push(KeyValue::new(keys::HTTP_REQUEST_METHOD, method.to_string()));
                if let Some(route) = route {
                    attributes.push(KeyValue::new(keys::HTTP_ROUTE, route.to_string()));
                }
                SpanBuilder::from_name(match route {
                    Some(route) => format!("{method} {route}"),
                    None => method.to_string(),
                })
            }
        };
        builder.with_kind(SpanKind::Server).with_attributes(attributes)
    });
    let response = serve(request).with_context(span.context().clone()).await;
    let status = response.status();
    span.set_attribute(KeyValue::new(keys::HTTP_RESPONSE_STATUS_CODE, i64::from(status.as_u16())));
    if status.is_server_error() {
        // A server span is an error only for 5xx; a 4xx is the client's (OTel HTTP conventions).
        span.context().span().set_status(Status::error(status.to_string()));
    }
    span.end();
    response
}

/// The methods of RFC 9110 and PATCH: the only ones whose server spans get names that are kept.
const STANDARD_METHODS: [(Method, &str); 9] = [
    (Method::GET, "GET"),
    (Method::POST, "POST"),
    (Method::PUT, "PUT"),
    (Method::DELETE, "DELETE"),
    (Method::PATCH, "PATCH"),
    (Method::HEAD, "HEAD"),
    (Method::OPTIONS, "OPTIONS"),
    (Method::TRACE, "TRACE"),
    (Method::CONNECT, "CONNECT"),
];

fn standard_method(method: &Method) -> Option<(usize, &'static str)> {
    STANDARD_METHODS.iter().position(|(standard, _)| standard == method).map(|index| (index, STANDARD_METHODS[index].1))
}

/// Server span names (`METHOD /route`) by route template, one slot per standard method.
type SpanNames = HashMap<Box<str>, [Option<&'static str>; STANDARD_METHODS.len()]>;

/// `method route`, made on the route's first request with that method and kept for the process's
/// life, so a request's span names itself without allocating. Bounded: `route` is one of the
/// router's templates (`MatchedPath`), never a raw path, and the method one of the nine standard
/// ones — a few hundred short strings at most.
fn span_name(index: usize, method: &'static str, route: &str) -> &'static str {
    static NAMES: LazyLock<RwLock<SpanNames>> = LazyLock::new(RwLock::default);
    if let Some(name) = NAMES.read().unwrap_or_else(PoisonError::into_inner).get(route).and_then(|names| names[index]) {
        return name;
    }
    let mut names = NAMES.write().unwrap_or_else(PoisonError::into_inner);
    let slot = &mut names.entry(route.into()).or_default()[index];
    slot.get_or_insert_with(|| Box::leak(format!("{method} {route}").into_boxed_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routes_span_name_is_made_once_per_method_and_only_for_standard_methods() {
        let (post, get) = (standard_method(&Method::POST).unwrap(), standard_method(&Method::GET).unwrap());
        assert_eq!(post.1, "POST");
        let name = span_name(post.0, post.1, "/v1/test-only/{name}/run");
        assert_eq!(name, "POST /v1/test-only/{name}/run");
        assert!(std::ptr::eq(name, span_name(post.0, post.1, "/v1/test-only/{name}/run")), "kept, not made again");
        assert_eq!(span_name(get.0, get.1, "/v1/test-only/{name}/run"), "GET /v1/test-only/{name}/run");
        assert_eq!(span_name(post.0, post.1, "/v1/test-only/other"), "POST /v1/test-only/other");
        for (method, text) in &STANDARD_METHODS {
            assert_eq!(method.as_str(), *text);
        }
        assert_eq!(
            standard_method(&Method::from_bytes(b"PURGE").unwrap()),
            None,
            "a client's own method is never kept"
        );
    }
}
