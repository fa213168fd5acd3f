//! GETs `args.url` through the host (or sends `args.method` when given), optionally with
//! `args.credential` (a credential kind for the host to inject) and `args.headers` (an object of
//! strings), and returns `{status, body}`.
//! The workhorse of the egress tests: allow-list, injection, body cap, no redirects.

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
        Ok(json!({ "status": response.status, "body": response.text() }))
    });
}
