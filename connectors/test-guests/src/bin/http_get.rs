//! GETs `args.url` through the host (or sends `args.method` when given), optionally with
//! `args.credential` (a credential kind for the host to inject) and `args.headers` (an object of
//! strings), and returns `{status, body}`.
//! The workhorse of the egress tests: allow-list, injection, body cap, no redirects.
//! With `args.memory_window = {offset, len}` it also returns that window of its own linear
//! memory (hex), read after the request, and the memory's size: the leak tests search every byte
//! a guest holds for a credential the host injected.

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::{ConnectorError, run};
use serde_json::{Value, json};

fn main() {
    run(|_, args| {
        let url = args["url"].as_str().ok_or_else(|| ConnectorError::bad_input("`url` (string) is required"))?;
        let mut request = match args["method"].as_str() {
            Some(method) => Request::new(method, url),
            None => Request::get(url),
        };
        if let Some(kind) = args["credential"].as_str() {
            request = request.credential(kind);
        }
        if let Some(headers) = args["headers"].as_object() {
            for (name, value) in headers {
                let Value::String(value) = value else {
                    return Err(ConnectorError::bad_input(format!("header `{name}` must be a string")));
                };
                request = request.header(name.as_str(), value.as_str());
            }
        }
        let response = http::send(&request)?;
        let mut output = json!({ "status": response.status, "body": response.text() });
        if let Some(window) = args.get("memory_window") {
            let offset = window["offset"].as_u64().unwrap_or(0) as usize;
            let len = window["len"].as_u64().unwrap_or(0) as usize;
            let (size, hex) = memory_window(offset, len);
            output["memory_size"] = json!(size);
            output["memory_hex"] = json!(hex);
        }
        Ok(output)
    });
}

/// The bytes of this instance's linear memory in `[offset, offset + len)` (clamped to its size),
/// as lowercase hex, and the memory's size in bytes.
#[cfg(target_arch = "wasm32")]
fn memory_window(offset: usize, len: usize) -> (usize, String) {
    let size = core::arch::wasm32::memory_size(0) * 65536;
    let start = offset.min(size);
    let end = offset.saturating_add(len).min(size);
    let mut hex = String::with_capacity((end - start) * 2);
    for address in start..end {
        // Address 0 is an ordinary byte of wasm memory, but not a valid Rust reference: read
        // every byte through a volatile raw-pointer read.
        let byte = unsafe { core::ptr::read_volatile(address as *const u8) };
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
    }
    (size, hex)
}

#[cfg(not(target_arch = "wasm32"))]
fn memory_window(_offset: usize, _len: usize) -> (usize, String) {
    (0, String::new())
}
