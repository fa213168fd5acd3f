//! A GraphQL connector the way the original project's generated ones are: the op names the
//! operation, the call's arguments are its variables (nested input objects as given), one POST
//! of `{query, variables}` carrying the bound `api_key`, and the answer's `data` returned. Where
//! a real one has its API's URL built in, this one takes `args.endpoint` (the test's loopback
//! fake), which is not sent as a variable.

use aileron_connector_sdk::http::{self, Request};
use aileron_connector_sdk::{ConnectorError, run};
use serde_json::{Value, json};

fn main() {
    run(|op, args| {
        let mut variables = args.as_object().cloned().unwrap_or_default();
        let Some(Value::String(endpoint)) = variables.remove("endpoint") else {
            return Err(ConnectorError::bad_input("`endpoint` (string) is required"));
        };
        let request =
            Request::post(endpoint).json(&json!({ "query": op, "variables": variables })).credential("api_key");
        let response = http::send(&request)?;
        if !response.is_success() {
            return Err(ConnectorError::external_api(response.status, response.text()));
        }
        let answer: Value = response.json()?;
        Ok(json!({ "data": answer["data"] }))
    });
}
