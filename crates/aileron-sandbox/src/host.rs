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

/// The most headers a guest's request may carry, and the most bytes of their names and values
/// in all (hyper's server takes 100 headers). Counted as they are read: a 30 MB request of 3 M
/// tiny headers cost the daemon 1.2 GB, and 32,769 distinct names panicked the HTTP client's
/// header map inside the host call (the ninth re-attack).
pub const MAX_REQUEST_HEADERS: usize = 128;
pub const MAX_REQUEST_HEADER_BYTES: usize = 64 * 1024;

/// The longest `url` a guest may ask for (and so the longest path an audit record carries: one
/// of 8 MB was recorded whole on each of four retries), and the longest `method` and `credential`.
pub const MAX_URL_BYTES: usize = 16 * 1024;
const MAX_WORD_BYTES: usize = 64;

/// Headers as an object (`{"Accept": "x"}`, or Go's `http.Header` shape `{"Accept": ["x"]}`) or as
/// a list of `[name, value]` pairs (the only form that can repeat a header in a chosen order),
/// read one at a time into [`RequestHeaders`] (no copy of the whole value is built first).
struct WireHeaders(Vec<(String, String)>);

/// Headers read so far, within [`MAX_REQUEST_HEADERS`] and [`MAX_REQUEST_HEADER_BYTES`].
#[derive(Default)]
struct RequestHeaders {
    headers: Vec<(String, String)>,
    bytes: usize,
}

impl RequestHeaders {
    fn push<E: serde::de::Error>(&mut self, name: String, value: String) -> Result<(), E> {
        self.bytes += name.len() + value.len();
        if self.headers.len() == MAX_REQUEST_HEADERS || self.bytes > MAX_REQUEST_HEADER_BYTES {
            return Err(E::custom(format_args!(
                "more than {MAX_REQUEST_HEADERS} headers or {MAX_REQUEST_HEADER_BYTES} bytes of them"
            )));
        }
        self.headers.push((name, value));
        Ok(())
    }
}

impl<'de> Deserialize<'de> for WireHeaders {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<WireHeaders, D::Error> {
        struct Shapes;

        impl<'de> serde::de::Visitor<'de> for Shapes {
            type Value = WireHeaders;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("an object of header values or a list of [name, value] pairs")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut pairs: A) -> Result<WireHeaders, A::Error> {
                let mut read = RequestHeaders::default();
                while let Some((name, value)) = pairs.next_element::<(String, String)>()? {
                    read.push(name, value)?;
                }
                Ok(WireHeaders(read.headers))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut object: A) -> Result<WireHeaders, A::Error> {
                let mut read = RequestHeaders::default();
                while let Some(name) = object.next_key::<String>()? {
                    object.next_value_seed(HeaderValues { name, read: &mut read })?;
                }
                Ok(WireHeaders(read.headers))
            }
        }

        deserializer.deserialize_any(Shapes)
    }
}

/// One header's value in the object form, a string or a list of strings, each kept as it is read.
struct HeaderValues<'a> {
    name: String,
    read: &'a mut RequestHeaders,
}

impl<'de> serde::de::DeserializeSeed<'de> for HeaderValues<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for HeaderValues<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "a string or a list of strings as header `{}`'s value", self.name)
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<(), E> {
        self.read.push(self.name, value.to_string())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut values: A) -> Result<(), A::Error> {
        while let Some(value) = values.next_element_seed(OneValue(&self.name))? {
            self.read.push(self.name.clone(), value)?;
        }
        Ok(())
    }
}

/// One string of a header's list of values.
struct OneValue<'a>(&'a str);

impl<'de> serde::de::DeserializeSeed<'de> for OneValue<'_> {
    type Value = String;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for OneValue<'_> {
    type Value = String;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "a string in header `{}`'s list of values", self.0)
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<String, E> {
        Ok(value.to_string())
    }
}

/// Why a guest's request JSON was refused (`http_request` returns −2).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MalformedRequest {
    #[error("request is not valid JSON of the form {{method, url, headers?, body?, credential?}}: {0}")]
    Json(String),
    #[error("`method` must not be empty")]
    EmptyMethod,
    #[error("`{0}` is longer than {1} bytes")]
    TooLong(&'static str, usize),
}

/// Parses the JSON a guest passes to `http_request`. Public (hidden) only for the fuzz targets of
/// `crates/aileron-fuzz`.
pub fn parse_request(bytes: &[u8]) -> Result<GuestHttpRequest, MalformedRequest> {
    let wire: WireRequest = serde_json::from_slice(bytes).map_err(|e| MalformedRequest::Json(e.to_string()))?;
    if wire.method.trim().is_empty() {
        return Err(MalformedRequest::EmptyMethod);
    }
    for (field, value, limit) in [
        ("method", wire.method.as_str(), MAX_WORD_BYTES),
        ("url", wire.url.as_str(), MAX_URL_BYTES),
        ("credential", wire.credential.as_deref().unwrap_or_default(), MAX_WORD_BYTES),
    ] {
        if value.len() > limit {
            return Err(MalformedRequest::TooLong(field, limit));
        }
    }
    Ok(GuestHttpRequest {
        method: wire.method,
        url: wire.url,
        headers: wire.headers.map(|headers| headers.0).unwrap_or_default(),
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
        check(r#"{"method":"GET","url":"u","headers":{"A":1}}"#, Err(MalformedRequest::Json(String::new())));
        check(r#"{"method":"GET","url":"u","headers":{"A":[1]}}"#, Err(MalformedRequest::Json(String::new())));
        check(r#"{"method":"GET","url":"u","headers":"A: 1"}"#, Err(MalformedRequest::Json(String::new())));
        let named = parse_request(br#"{"method":"GET","url":"u","headers":{"A":[1]}}"#).unwrap_err().to_string();
        assert!(named.contains("header `A`"), "{named}");
    }

    /// The ninth re-attack: 3 M tiny headers cost the daemon 1.2 GB and 32,769 distinct names
    /// panicked the host call; an 8 MB path was recorded on each retry. Both forms of headers are
    /// counted as they are read, and the words and the URL have lengths.
    #[test]
    fn a_request_has_bounded_headers_and_lengths() {
        let pairs = |count: usize, size: usize| {
            let list: Vec<String> = (0..count).map(|i| format!("[\"x-{i}\",\"{}\"]", "v".repeat(size))).collect();
            format!(r#"{{"method":"GET","url":"u","headers":[{}]}}"#, list.join(","))
        };
        let object = |count: usize| {
            let list: Vec<String> = (0..count).map(|i| format!("\"x-{i}\":[\"v\"]")).collect();
            format!(r#"{{"method":"GET","url":"u","headers":{{{}}}}}"#, list.join(","))
        };
        assert_eq!(parse_request(pairs(MAX_REQUEST_HEADERS, 8).as_bytes()).unwrap().headers.len(), MAX_REQUEST_HEADERS);
        assert_eq!(parse_request(object(MAX_REQUEST_HEADERS).as_bytes()).unwrap().headers.len(), MAX_REQUEST_HEADERS);
        for refused in [pairs(MAX_REQUEST_HEADERS + 1, 8), object(40_000), pairs(2, MAX_REQUEST_HEADER_BYTES / 2)] {
            let error = parse_request(refused.as_bytes()).unwrap_err().to_string();
            assert!(error.contains("more than 128 headers"), "{error}");
        }
        let long = |field: &str, size: usize| {
            let mut request = serde_json::json!({"method": "GET", "url": "u", "credential": "api_key"});
            request[field] = "a".repeat(size).into();
            parse_request(request.to_string().as_bytes())
        };
        assert!(long("url", MAX_URL_BYTES).is_ok());
        assert_eq!(long("url", MAX_URL_BYTES + 1).unwrap_err(), MalformedRequest::TooLong("url", MAX_URL_BYTES));
        assert_eq!(long("method", 65).unwrap_err(), MalformedRequest::TooLong("method", 64));
        assert_eq!(long("credential", 65).unwrap_err(), MalformedRequest::TooLong("credential", 64));
    }
}
