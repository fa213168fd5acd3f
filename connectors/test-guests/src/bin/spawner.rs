//! Runs what its arguments say through the spawn functions: `{"op", "args"}` for `spawn_op`, or
//! `{"envelope"}` for `spawn`. Returns `{"status", "stdout", "stderr"}`; a refusal is an error,
//! which the host's recorded failure replaces. Used by the spawn tests, escape attempts included.

use aileron_connector_sdk::spawn::{self, Output};
use aileron_connector_sdk::{ConnectorError, run};
use serde_json::{Value, json};

fn main() {
    run(|_, args| {
        let output: Output = match args.get("envelope") {
            Some(envelope) => spawn::run_envelope(envelope)?,
            None => {
                let op = args
                    .get("spawn_op")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ConnectorError::bad_input("spawn_op is required"))?;
                spawn::run_op(op, args.get("values").unwrap_or(&json!({})))?
            }
        };
        Ok(json!({"status": output.status, "stdout": output.stdout_text(), "stderr": output.stderr_text()}))
    });
}
