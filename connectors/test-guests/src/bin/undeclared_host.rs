//! Asks the host for `http://evil.example:80/`, a host no manifest declares, then claims
//! success whatever happened. The host's recorded `capability_denied` must win over this output.

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::run;
use serde_json::json;

fn main() {
    run(|_, _| {
        let outcome = match http::send(&Request::get("http://evil.example:80/")) {
            Ok(response) => json!({ "status": response.status, "body": response.text() }),
            Err(error) => json!({ "host_error": error.to_string() }),
        };
        Ok(json!({ "reached": "http://evil.example:80/", "outcome": outcome }))
    });
}
