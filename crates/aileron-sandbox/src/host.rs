//! The `aileron_host` import module (SPEC §4.2): structured logs and outbound HTTP (the spawn
//! functions are in `spawn.rs`).
//!
//! The sandbox does not make HTTP requests itself: `http_request` parses the guest's JSON request
//! and hands it to the embedder's [`HostHooks::send_request`], where the egress policy, credential
//! injection, the real request and the audit record live. A denial there is recorded on the call
//! and wins over whatever the module prints afterwards.

use aileron_core::{Boundary, Failure};
use serde::Deserialize;
use wasmtime::{Caller, Linker};

use crate::context::CallContext;
use crate::guest_memory::GuestMemory;
use crate::hooks::{GuestHttpRequest, MODULE};

/// The `aileron_host` functions this runtime serves.
pub(crate) const FUNCTIONS: [&str; 5] =
    ["log", "http_request", "http_response_status", "http_response_size", "http_response_read"];

/// `http_request` return codes.
const REQUEST_BUFFERED: i32 = 0;
const REQUEST_FAILED: i32 = -1;
const REQUEST_MALFORMED: i32 = -2;
/// Returned by the response accessors when no response is buffered.
const NO_RESPONSE: i32 = -1;

/// Levels longer than this are cut: a level is a short word, not a channel for data.
const MAX_LEVEL_LEN: usize = 32;

/// The JSON a guest passes to `http_request`. Unknown fields are ignored so that guests built
/// against a newer SDK (e.g. one adding a per-request timeout) still work.
#[derive(Deserialize)]
struct WireRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: Option<WireHeaders>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    credential: Option<String>,
}

/// Headers as an object (`{"Accept": "x"}`, or Go's `http.Header` shape `{"Accept": ["x"]}`) or as
/// a list of `[name, value]` pairs (the only form that can repeat a header in a chosen order).
#[derive(Deserialize)]
#[serde(untagged)]
enum WireHeaders {
    Pairs(Vec<(String, String)>),
    Object(serde_json::Map<String, serde_json::Value>),
}

/// Why a guest's request JSON was refused (`http_request` returns −2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MalformedRequest {
    #[error("request is not valid JSON of the form {{method, url, headers?, body?, credential?}}: {0}")]
    Json(String),
    #[error("header `{0}` must have a string or a list of strings as its value")]
    HeaderValue(String),
    #[error("`method` must not be empty")]
    EmptyMethod,
}

/// Parses the JSON a guest passes to `http_request`. Public (hidden) only for the fuzz targets of
/// `crates/aileron-fuzz`.
pub fn parse_request(bytes: &[u8]) -> Result<GuestHttpRequest, MalformedRequest> {
    let wire: WireRequest = serde_json::from_slice(bytes).map_err(|e| MalformedRequest::Json(e.to_string()))?;
    if wire.method.trim().is_empty() {
        return Err(MalformedRequest::EmptyMethod);
    }
    let headers = match wire.headers {
        None => Vec::new(),
        Some(WireHeaders::Pairs(pairs)) => pairs,
        Some(WireHeaders::Object(object)) => {
            let mut headers = Vec::new();
            for (name, value) in object {
                match value {
                    serde_json::Value::String(value) => headers.push((name, value)),
                    serde_json::Value::Array(values) => {
                        for value in values {
                            let serde_json::Value::String(value) = value else {
                                return Err(MalformedRequest::HeaderValue(name));
                            };
                            headers.push((name.clone(), value));
                        }
                    }
                    _ => return Err(MalformedRequest::HeaderValue(name)),
                }
            }
            headers
        }
    };
    Ok(GuestHttpRequest {
        method: wire.method,
        url: wire.url,
        headers,
        body: wire.body.map(String::into_bytes),
        credential: wire.credential,
    })
}

/// Defines every function of [`FUNCTIONS`] in `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<CallContext>) -> wasmtime::Result<()> {
    linker.func_wrap(
        MODULE,
        "log",
        |mut caller: Caller<'_, CallContext>, level_ptr: i32, level_len: i32, msg_ptr: i32, msg_len: i32| {
            let (memory, context) = GuestMemory::of(&mut caller, "log")?;
            let mut level = memory.string_lossy(level_ptr as u32, level_len as u32)?;
            let message = memory.string_lossy(msg_ptr as u32, msg_len as u32)?;
            if level.len() > MAX_LEVEL_LEN {
                level = level.chars().take(MAX_LEVEL_LEN).collect();
            }
            context.logs.push(level, message);
            wasmtime::Result::<()>::Ok(())
        },
    )?;

    linker.func_wrap_async(MODULE, "http_request", |mut caller: Caller<'_, CallContext>, (ptr, len): (i32, i32)| {
        Box::new(async move {
            let (memory, context) = GuestMemory::of(&mut caller, "http_request")?;
            let parsed = parse_request(memory.bytes(ptr as u32, len as u32)?);
            // A stale body must never be mistaken for the answer to this request.
            context.last_response = None;
            let request = match parsed {
                Ok(request) => request,
                Err(malformed) => {
                    let failure = Failure::runtime_error(
                        Boundary::Sandbox,
                        format!("the connector sent a malformed http_request: {malformed}"),
                    );
                    context.record_failure(failure);
                    return Ok(REQUEST_MALFORMED);
                }
            };
            let hooks = context.hooks.clone();
            match hooks.send_request(request).await {
                Ok(response) => {
                    caller.data_mut().last_response = Some(response);
                    wasmtime::Result::<i32>::Ok(REQUEST_BUFFERED)
                }
                Err(failure) => caller.data_mut().fail_host_call(failure, REQUEST_FAILED),
            }
        })
    })?;

    linker.func_wrap(MODULE, "http_response_status", |caller: Caller<'_, CallContext>| -> i32 {
        caller.data().last_response.as_ref().map_or(NO_RESPONSE, |response| i32::from(response.status))
    })?;

    linker.func_wrap(MODULE, "http_response_size", |caller: Caller<'_, CallContext>| -> i32 {
        caller
            .data()
            .last_response
            .as_ref()
            .map_or(NO_RESPONSE, |response| i32::try_from(response.body.len()).unwrap_or(i32::MAX))
    })?;

    linker.func_wrap(
        MODULE,
        "http_response_read",
        |mut caller: Caller<'_, CallContext>, dst_ptr: i32, dst_len: i32| -> wasmtime::Result<i32> {
            let (mut memory, context) = GuestMemory::of(&mut caller, "http_response_read")?;
            let Some(response) = &context.last_response else {
                return Ok(NO_RESPONSE);
            };
            let count = response.body.len().min(dst_len as u32 as usize).min(i32::MAX as usize);
            memory.write(dst_ptr as u32, &response.body[..count])?;
            Ok(count as i32)
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn request_json_shapes() {
        let check = |json: &str, expected: Result<GuestHttpRequest, MalformedRequest>| {
            let parsed = parse_request(json.as_bytes()).map_err(|e| match e {
                // serde's message wording is not ours to pin.
                MalformedRequest::Json(_) => MalformedRequest::Json(String::new()),
                other => other,
            });
            assert_eq!(parsed, expected, "{json}");
        };
        let request = |headers: &[(&str, &str)], body: Option<&str>, credential: Option<&str>| GuestHttpRequest {
            method: "GET".into(),
            url: "https://api.example:443/x".into(),
            headers: pairs(headers),
            body: body.map(|b| b.as_bytes().to_vec()),
            credential: credential.map(str::to_string),
        };
        check(r#"{"method":"GET","url":"https://api.example:443/x"}"#, Ok(request(&[], None, None)));
        check(
            r#"{"method":"GET","url":"https://api.example:443/x","headers":{"A":"1","B":["2","3"]},
                "body":"hi","credential":"api_key"}"#,
            Ok(request(&[("A", "1"), ("B", "2"), ("B", "3")], Some("hi"), Some("api_key"))),
        );
        check(
            r#"{"method":"GET","url":"https://api.example:443/x","headers":[["X","1"],["X","2"]],
                "body":null,"future":1}"#,
            Ok(request(&[("X", "1"), ("X", "2")], None, None)),
        );
        check(r#"{"method":"GET"}"#, Err(MalformedRequest::Json(String::new())));
        check("not json", Err(MalformedRequest::Json(String::new())));
        check(r#"{"method":"","url":"u"}"#, Err(MalformedRequest::EmptyMethod));
        check(r#"{"method":"GET","url":"u","headers":{"A":1}}"#, Err(MalformedRequest::HeaderValue("A".into())));
        check(r#"{"method":"GET","url":"u","headers":{"A":[1]}}"#, Err(MalformedRequest::HeaderValue("A".into())));
        check(r#"{"method":"GET","url":"u","headers":"A: 1"}"#, Err(MalformedRequest::Json(String::new())));
    }
}
