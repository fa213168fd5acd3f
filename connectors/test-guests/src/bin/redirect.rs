//! Follows a redirect by hand: GETs `args.url`, expects a 3xx, then issues a NEW request to the
//! redirect target, which the host must check again (and deny when the target is undeclared).
//!
//! The ABI exposes no response headers, so the target comes from `args.location`, or else from
//! the 3xx body (the test server writes its `Location` there too). Whatever the second request
//! gets, the guest claims success: a host-recorded denial must win over this output.

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::{ConnectorError, run};
use serde_json::{Value, json};

fn main() {
    run(|_, args| {
        let url = args["url"].as_str().ok_or_else(|| ConnectorError::bad_input("`url` (string) is required"))?;
        let first = http::send(&Request::get(url))?;
        if !(300..400).contains(&first.status) {
            return Err(ConnectorError::new(
                "unexpected_response",
                format!("expected a redirect from {url}, got HTTP {}", first.status),
            ));
        }
        let location = match &args["location"] {
            Value::String(location) => location.clone(),
            _ => first.text().trim().to_owned(),
        };
        if location.is_empty() {
            return Err(ConnectorError::bad_input("the redirect body names no target; pass `location`"));
        }
        let followed = match http::send(&Request::get(location.as_str())) {
            Ok(response) => json!({ "status": response.status, "body": response.text() }),
            Err(error) => json!({ "host_error": error.to_string() }),
        };
        Ok(json!({ "first_status": first.status, "location": location, "followed": followed }))
    });
}
