//! Outbound HTTP through the host (`aileron_host.http_request` and friends).
//!
//! The guest has no sockets. It hands the host a JSON envelope
//! `{method, url, headers?, body?, credential?}`; the host checks the URL against the manifest's
//! `hosts`, injects the credential named by `credential` (the guest never sees the key), sends
//! the request without following redirects, and buffers the response for the guest to read.

use std::fmt;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::abi;
use crate::error::ConnectorError;

/// An outbound request, built with the chained setters.
///
/// ```no_run
/// use aileron_connector_sdk::http::{self, Request};
///
/// let response = http::send(
///     &Request::get("https://api.github.com/repos/rust-lang/rust/issues")
///         .header("Accept", "application/vnd.github+json")
///         .credential("api_key"),
/// );
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub method: String,
    pub url: String,
    /// Sent as a JSON object, so a repeated name keeps only its last value.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// The credential kind the host should inject (`api_key`, `oauth2`, `aws_sigv4`). It must
    /// equal the manifest's kind and be declared by the calling action.
    pub credential: Option<String>,
}

impl Request {
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Request {
        Request { method: method.into(), url: url.into(), headers: Vec::new(), body: None, credential: None }
    }

    pub fn get(url: impl Into<String>) -> Request {
        Request::new("GET", url)
    }

    pub fn post(url: impl Into<String>) -> Request {
        Request::new("POST", url)
    }

    pub fn put(url: impl Into<String>) -> Request {
        Request::new("PUT", url)
    }

    pub fn patch(url: impl Into<String>) -> Request {
        Request::new("PATCH", url)
    }

    pub fn delete(url: impl Into<String>) -> Request {
        Request::new("DELETE", url)
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Request {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<String>) -> Request {
        self.body = Some(body.into());
        self
    }

    /// Sets the body to `value` serialized as JSON and, unless already set, the content type.
    pub fn json(mut self, value: &Value) -> Request {
        if !self.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            self.headers.push(("Content-Type".to_owned(), "application/json".to_owned()));
        }
        self.body = Some(value.to_string());
        self
    }

    pub fn credential(mut self, kind: impl Into<String>) -> Request {
        self.credential = Some(kind.into());
        self
    }

    /// The JSON envelope `http_request` receives; absent parts are omitted.
    pub fn envelope(&self) -> Value {
        let mut envelope = Map::new();
        envelope.insert("method".to_owned(), Value::String(self.method.clone()));
        envelope.insert("url".to_owned(), Value::String(self.url.clone()));
        if !self.headers.is_empty() {
            let headers = self.headers.iter().map(|(name, value)| (name.clone(), Value::String(value.clone())));
            envelope.insert("headers".to_owned(), Value::Object(headers.collect()));
        }
        if let Some(body) = &self.body {
            envelope.insert("body".to_owned(), Value::String(body.clone()));
        }
        if let Some(credential) = &self.credential {
            envelope.insert("credential".to_owned(), Value::String(credential.clone()));
        }
        Value::Object(envelope)
    }
}

/// A buffered response. Headers are not part of the ABI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body parsed as JSON (`serde_json::Value` or any deserializable type).
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ConnectorError> {
        serde_json::from_slice(&self.body).map_err(|error| {
            ConnectorError::runtime(format!("response body (HTTP {}) is not the expected JSON: {error}", self.status))
                .with_detail("status", self.status)
        })
    }

    /// The body as text, with invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why the host produced no response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostError {
    /// −1: denied by policy or failed upstream. The host has recorded a structured failure
    /// (`capability_denied`, `network_error`, ...) that wins over the guest's stdout.
    Denied,
    /// −2: the host could not parse the request envelope.
    Malformed,
    /// A return code outside the ABI.
    UnexpectedCode(i32),
    /// `http_request` answered 0 but the response size or status reads −1.
    NoResponse,
}

impl HostError {
    /// The raw `http_request` return code, when there was one.
    pub fn code(&self) -> Option<i32> {
        match self {
            HostError::Denied => Some(-1),
            HostError::Malformed => Some(-2),
            HostError::UnexpectedCode(code) => Some(*code),
            HostError::NoResponse => None,
        }
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostError::Denied => {
                f.write_str("the host denied or failed the request (its recorded failure is authoritative)")
            }
            HostError::Malformed => f.write_str("the host rejected the request envelope as malformed"),
            HostError::UnexpectedCode(code) => write!(f, "the host answered http_request with unknown code {code}"),
            HostError::NoResponse => f.write_str("the host reported success but no response is readable"),
        }
    }
}

impl std::error::Error for HostError {}

/// Sends `request` through the host and reads the buffered response.
///
/// The body is read before the status, as Go-built connectors do: the host keeps the last
/// response readable until the next request, and reading it in this order exercises that.
pub fn send(request: &Request) -> Result<Response, HostError> {
    let envelope = request.envelope().to_string();
    match abi::http_request(envelope.as_bytes()) {
        0 => {}
        -1 => return Err(HostError::Denied),
        -2 => return Err(HostError::Malformed),
        code => return Err(HostError::UnexpectedCode(code)),
    }
    let size = usize::try_from(abi::http_response_size()).map_err(|_| HostError::NoResponse)?;
    let mut body = vec![0; size];
    let written = usize::try_from(abi::http_response_read(&mut body)).map_err(|_| HostError::NoResponse)?;
    body.truncate(written);
    let status = u16::try_from(abi::http_response_status()).map_err(|_| HostError::NoResponse)?;
    Ok(Response { status, body })
}

// The fake host exists only off wasm; the tests need it.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use serde_json::{Value, json};

    use super::{HostError, Request, Response, send};
    use crate::fake_host;

    #[test]
    fn envelopes_omit_what_is_absent() {
        let check = |request: Request, expected: Value| assert_eq!(request.envelope(), expected);
        check(Request::get("https://a.example/x"), json!({"method": "GET", "url": "https://a.example/x"}));
        check(
            Request::post("https://a.example/x").header("Accept", "text/plain").body("hi").credential("api_key"),
            json!({
                "method": "POST", "url": "https://a.example/x", "headers": {"Accept": "text/plain"},
                "body": "hi", "credential": "api_key",
            }),
        );
        check(
            Request::put("https://a.example/x").json(&json!({"k": [1, 2]})),
            json!({
                "method": "PUT", "url": "https://a.example/x",
                "headers": {"Content-Type": "application/json"}, "body": "{\"k\":[1,2]}",
            }),
        );
        check(
            Request::patch("https://a.example/x")
                .header("content-type", "application/merge-patch+json")
                .json(&json!({})),
            json!({
                "method": "PATCH", "url": "https://a.example/x",
                "headers": {"content-type": "application/merge-patch+json"}, "body": "{}",
            }),
        );
        check(
            Request::delete("https://a.example/x").header("X-A", "1").header("X-A", "2"),
            json!({"method": "DELETE", "url": "https://a.example/x", "headers": {"X-A": "2"}}),
        );
    }

    #[test]
    fn send_maps_host_outcomes() {
        let check = |outcome: Option<fake_host::Outcome>, expected: Result<Response, HostError>| {
            fake_host::reset();
            if let Some(outcome) = outcome {
                fake_host::script(outcome);
            }
            assert_eq!(send(&Request::get("https://a.example/")), expected);
            assert_eq!(fake_host::requests(), vec![json!({"method": "GET", "url": "https://a.example/"})]);
        };
        check(
            Some(fake_host::Outcome::Respond { status: 201, body: b"made".to_vec() }),
            Ok(Response { status: 201, body: b"made".to_vec() }),
        );
        check(
            Some(fake_host::Outcome::Respond { status: 204, body: Vec::new() }),
            Ok(Response { status: 204, body: Vec::new() }),
        );
        check(Some(fake_host::Outcome::Deny), Err(HostError::Denied));
        check(None, Err(HostError::Denied));
    }

    #[test]
    fn a_denied_request_leaves_no_stale_response() {
        fake_host::reset();
        fake_host::respond(200, "first");
        fake_host::deny();
        assert_eq!(send(&Request::get("https://a.example/1")).map(|r| r.body), Ok(b"first".to_vec()));
        assert_eq!(send(&Request::get("https://a.example/2")), Err(HostError::Denied));
        assert_eq!(fake_host::requests().len(), 2);
    }

    #[test]
    fn response_helpers() {
        let response = Response { status: 404, body: br#"{"message":"Not Found"}"#.to_vec() };
        assert!(!response.is_success());
        assert_eq!(response.json::<Value>().unwrap(), json!({"message": "Not Found"}));
        assert_eq!(response.text(), r#"{"message":"Not Found"}"#);

        let garbage = Response { status: 200, body: vec![b'<', 0xff] };
        assert!(garbage.is_success());
        let error = garbage.json::<Value>().unwrap_err();
        assert_eq!(
            (error.class.as_str(), error.details.unwrap()["status"].clone()),
            ("connector_runtime_error", json!(200))
        );
        assert_eq!(garbage.text(), "<\u{fffd}");
    }
}
