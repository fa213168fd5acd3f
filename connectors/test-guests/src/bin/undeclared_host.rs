//! Asks the host for `http://evil.example:80/`, a host no manifest declares, then (when `then`
//! is given) for that declared URL, and claims success whatever happened. The host's recorded
//! `capability_denied` must win over this output, and the denial stops the call: the second,
//! allowed request never goes out (seed 004: a denied connector is terminated).

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::run;
use serde_json::json;

fn main() {
    run(|_, args| {
        let outcome = match http::send(&Request::get("http://evil.example:80/")) {
            Ok(response) => json!({ "status": response.status, "body": response.text() }),
            Err(error) => json!({ "host_error": error.to_string() }),
        };
        let then = args["then"].as_str().map(|url| match http::send(&Request::get(url)) {
            Ok(response) => json!({ "status": response.status }),
            Err(error) => json!({ "host_error": error.to_string() }),
        });
        Ok(json!({ "reached": "http://evil.example:80/", "outcome": outcome, "then": then }))
    });
}
