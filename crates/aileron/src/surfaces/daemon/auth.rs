//! Request admission: every request's `Host` must be the daemon's own loopback address (DNS
//! rebinding defence), a browser `Origin` must be our own origin, and `/v1/*` (except health)
//! needs a bearer token whose grant covers the route's scope.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::platform::principal::{CSRF_HEADER, Principal, Scope, WEB_COOKIE};
use crate::wire::ApiError;

/// The `Host` values this daemon answers to.
pub fn allowed_hosts(port: u16) -> Vec<String> {
    LOOPBACK_NAMES.iter().map(|name| format!("{name}:{port}")).collect()
}

const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

/// Whether `authority` is one of [`allowed_hosts`] (ASCII case ignored), compared in place:
/// every request is checked, so the check allocates nothing.
fn is_own_authority(authority: &str, port: u16) -> bool {
    let Some((name, digits)) = authority.rsplit_once(':') else { return false };
    // `format!` writes the port without sign or leading zeros; accept exactly that spelling.
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits.len() == 1 || !digits.starts_with('0'));
    canonical
        && digits.parse::<u16>() == Ok(port)
        && LOOPBACK_NAMES.iter().any(|allowed| name.eq_ignore_ascii_case(allowed))
}

/// Whether `origin` is `http://` and one of [`allowed_hosts`] (ASCII case ignored).
fn is_own_origin(origin: &str, port: u16) -> bool {
    origin.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://")) && is_own_authority(&origin[7..], port)
}

/// Admission for every request the router serves: Host, Origin, then (for `/v1/*` except
/// health) the bearer token. Also stamps `X-Request-ID` on every response. Inside the request's
/// server span, so refused requests get theirs too: one middleware layer, not two, since each
/// layer added with `Router::layer` costs every request boxed copies of its route's service.
pub async fn admit(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let telemetry = &state.services.telemetry;
    crate::platform::telemetry::http::server_span(telemetry, request, |mut request| async {
        let mut response = match check(&state, &mut request) {
            Ok(()) => next.run(request).await,
            Err(error) => error.into_response(),
        };
        stamp_request_id(&mut response, false);
        response
    })
    .await
}

/// Admission of a gateway request ([`crate::dataplane::gateway::is_gateway_path`]), which
/// [`super::Surface`] serves ahead of the router: the same Host and Origin checks as [`admit`]
/// (no token: the agent's provider key is what it carries), then the gateway. A request whose
/// provider key is a session's gateway key (or the daemon token) is marked
/// [`crate::dataplane::gateway::VaultKeyGranted`]: only such a request gets the vault's key.
pub async fn admit_gateway(state: &AppState, mut request: Request) -> Response {
    let mut response = match check(state, &mut request) {
        Ok(()) => {
            // Either key header may carry one of Aileron's own tokens: the first that grants the
            // vault's key does, and every one of them is taken off the request, never the
            // provider's to see (the eighteenth re-attack: a gateway key in `Authorization` beside
            // any `x-api-key` went upstream).
            let mut granted = None;
            for name in crate::dataplane::gateway::KEY_HEADERS {
                let carried = crate::dataplane::gateway::key_in(request.headers(), &name);
                let Some(principal) = carried.and_then(|key| state.services.tokens.resolve(key)) else { continue };
                request.headers_mut().remove(&name);
                if granted.is_none() && principal.allows(Scope::Gateway) {
                    let session = match principal {
                        Principal::Session { session_id, .. } => Some(session_id),
                        Principal::Admin | Principal::Web { .. } => None,
                    };
                    granted = Some(crate::dataplane::gateway::VaultKeyGranted { session });
                }
            }
            if let Some(granted) = granted {
                request.extensions_mut().insert(granted);
            }
            crate::dataplane::gateway::serve(&state.gateway, request).await
        }
        Err(error) => error.into_response(),
    };
    stamp_request_id(&mut response, true);
    response
}

/// Stamps a fresh `X-Request-ID`. The gateway's answers are the upstream's, headers included:
/// OpenAI's own `x-request-id` is what its support asks for, so a `proxied` answer keeps one.
fn stamp_request_id(response: &mut Response, proxied: bool) {
    if (!proxied || !response.headers().contains_key(&X_REQUEST_ID))
        && let Ok(value) =
            HeaderValue::from_str(uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()))
    {
        response.headers_mut().insert(X_REQUEST_ID, value);
    }
}

/// A constant: a name given as a `&str` is copied into a new one on every insert.
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

fn check(state: &AppState, request: &mut Request) -> Result<(), ApiError> {
    let port = state.services.listen_port();
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| request.uri().authority().map(|authority| authority.as_str()));
    if !host.is_some_and(|host| is_own_authority(host, port)) {
        return Err(ApiError::forbidden("request Host is not this daemon's loopback address"));
    }
    if let Some(origin) = request.headers().get(header::ORIGIN)
        && !is_own_origin(origin.to_str().unwrap_or(""), port)
    {
        return Err(ApiError::forbidden("cross-origin requests are not allowed"));
    }
    let path = request.uri().path();
    if !path.starts_with("/v1/")
        || path == "/v1/health"
        || path == crate::workflows::bindings::OAUTH_CALLBACK_PATH
        || crate::dataplane::gateway::is_gateway_path(request.method(), path)
    {
        return Ok(());
    }
    let principal = match request.headers().get(header::AUTHORIZATION) {
        Some(_) => {
            let presented = bearer(request.headers()).ok_or_else(ApiError::unauthorized)?;
            state.services.tokens.resolve(presented).ok_or_else(ApiError::unauthorized)?
        }
        None => {
            let cookie = web_cookie(request.headers()).ok_or_else(ApiError::unauthorized)?;
            let csrf = state.services.tokens.web_session(&cookie).ok_or_else(ApiError::unauthorized)?;
            if !request.method().is_safe() {
                // A state-changing request from the page: same-origin Origin (checked above when
                // present; required here) and the page's CSRF token.
                if !request.headers().contains_key(header::ORIGIN) {
                    return Err(ApiError::forbidden("state-changing browser requests must carry an Origin header"));
                }
                let presented = request.headers().get(CSRF_HEADER).and_then(|h| h.to_str().ok()).unwrap_or("");
                if !csrf.matches(presented) {
                    return Err(ApiError::forbidden("missing or wrong CSRF token"));
                }
            }
            Principal::Web { csrf }
        }
    };
    request.extensions_mut().insert(principal);
    Ok(())
}

/// The token of an `Authorization: Bearer <token>` header, if the request carries one.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")
}

/// The value of the web session cookie, if the request carries one.
pub fn web_cookie(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == WEB_COOKIE)
        .map(|(_, value)| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation-free checks accept exactly what comparing against the formatted
    /// [`allowed_hosts`] accepted (the check they replaced).
    #[test]
    fn host_and_origin_checks_accept_exactly_the_formatted_loopback_authorities() {
        let port = 8473;
        let allowed = allowed_hosts(port);
        let names = [
            "127.0.0.1",
            "LOCALHOST",
            "localhost",
            "LocalHost",
            "[::1]",
            "[::1",
            "::1",
            "127.0.0.2",
            "evil.com",
            "localhost.evil.com",
            "",
            "127.0.0.1:8473",
        ];
        let ports = ["8473", "08473", "+8473", "8474", "847", "84730", "", "65536", "8473 ", " 8473", "8473:8473"];
        let mut candidates: Vec<String> = Vec::new();
        for name in names {
            for port in ports {
                candidates.push(format!("{name}:{port}"));
                candidates.push(format!("{name}{port}"));
            }
            candidates.push(name.to_string());
        }
        for candidate in &candidates {
            let host_expected = allowed.iter().any(|a| a.eq_ignore_ascii_case(candidate));
            assert_eq!(is_own_authority(candidate, port), host_expected, "Host {candidate:?}");
            for scheme in ["http://", "HTTP://", "https://", "http:/", "", "ws://"] {
                let origin = format!("{scheme}{candidate}");
                let origin_expected = allowed.iter().any(|a| origin.eq_ignore_ascii_case(&format!("http://{a}")));
                assert_eq!(is_own_origin(&origin, port), origin_expected, "Origin {origin:?}");
            }
        }
        assert!(is_own_authority("LocalHost:8473", port) && is_own_origin("Http://[::1]:8473", port));
        assert!(!is_own_origin("http://é", port) && !is_own_origin("htt", port));
        assert!(is_own_authority("localhost:0", 0) && !is_own_authority("localhost:00", 0));
    }
}
