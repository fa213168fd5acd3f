//! The per-call envelope: `{"op", "args"}` on stdin, exactly one result object on stdout.

use std::io::{Read, Write};

use serde_json::{Map, Value, json};

use crate::error::ConnectorError;

/// Runs one call: reads the request from stdin, calls `handler(op, args)`, writes exactly one
/// JSON object to stdout and returns, so the module exits 0.
///
/// The process exits 0 on errors too: the error object is authoritative, and a non-zero exit
/// without one is reserved for crashes (the host then reports `connector_runtime_error` with
/// the exit code and the tail of stderr).
pub fn run(handler: impl FnOnce(&str, Value) -> Result<Value, ConnectorError>) {
    let mut request = Vec::new();
    let result = match std::io::stdin().read_to_end(&mut request) {
        Ok(_) => dispatch(&request, handler),
        Err(error) => ConnectorError::runtime(format!("cannot read the request from stdin: {error}")).envelope(),
    };
    let mut stdout = std::io::stdout().lock();
    let written = serde_json::to_writer(&mut stdout, &result)
        .map_err(std::io::Error::from)
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush());
    if let Err(error) = written {
        // Nothing reached the host intact; a crash exit makes it report the stderr line.
        eprintln!("cannot write the result to stdout: {error}");
        std::process::exit(1);
    }
}

/// The stdout object for one raw stdin request: `{"output": ..}` or `{"error": {..}}`.
///
/// `args` may be absent or `null` (treated as `{}`); anything else that is not an object is
/// `bad_input`, as is a request without a string `op`.
pub fn dispatch(request: &[u8], handler: impl FnOnce(&str, Value) -> Result<Value, ConnectorError>) -> Value {
    let (op, args) = match parse_request(request) {
        Ok(parsed) => parsed,
        Err(error) => return error.envelope(),
    };
    match handler(&op, args) {
        Ok(output) => json!({ "output": output }),
        Err(error) => error.envelope(),
    }
}

fn parse_request(request: &[u8]) -> Result<(String, Value), ConnectorError> {
    let request: Value = serde_json::from_slice(request)
        .map_err(|error| ConnectorError::bad_input(format!("the request on stdin is not JSON: {error}")))?;
    let Value::Object(mut request) = request else {
        return Err(ConnectorError::bad_input("the request on stdin must be a JSON object {\"op\", \"args\"}"));
    };
    let op = match request.remove("op") {
        Some(Value::String(op)) => op,
        Some(_) => return Err(ConnectorError::bad_input("the request's `op` must be a string")),
        None => return Err(ConnectorError::bad_input("the request has no `op`")),
    };
    let args = match request.remove("args") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(args @ Value::Object(_)) => args,
        Some(_) => return Err(ConnectorError::bad_input("the request's `args` must be a JSON object")),
    };
    Ok((op, args))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::dispatch;
    use crate::error::ConnectorError;

    fn echo_or_fail(op: &str, args: Value) -> Result<Value, ConnectorError> {
        match op {
            "fail" => Err(ConnectorError::external_api(429, "slow down")),
            _ => Ok(json!({"op": op, "args": args})),
        }
    }

    fn check(request: &str, expected: Value) {
        assert_eq!(dispatch(request.as_bytes(), echo_or_fail), expected, "request: {request}");
    }

    fn bad_input(message: &str) -> Value {
        json!({"error": {"class": "bad_input", "message": message}})
    }

    #[test]
    fn requests_reach_the_handler_and_results_are_wrapped() {
        check(r#"{"op": "x", "args": {"a": 1}}"#, json!({"output": {"op": "x", "args": {"a": 1}}}));
        check(r#"{"op": "x"}"#, json!({"output": {"op": "x", "args": {}}}));
        check(r#"{"op": "x", "args": null}"#, json!({"output": {"op": "x", "args": {}}}));
        check(
            r#"{"op": "fail", "args": {}}"#,
            json!({"error": {"class": "external_api_error", "message": "slow down", "details": {"status": 429}}}),
        );
    }

    #[test]
    fn malformed_requests_are_bad_input() {
        check(r#"{"args": {}}"#, bad_input("the request has no `op`"));
        check(r#"{"op": 7}"#, bad_input("the request's `op` must be a string"));
        check(r#"{"op": "x", "args": [1]}"#, bad_input("the request's `args` must be a JSON object"));
        check(r#"["op"]"#, bad_input("the request on stdin must be a JSON object {\"op\", \"args\"}"));
        check("", bad_input("the request on stdin is not JSON: EOF while parsing a value at line 1 column 0"));
    }
}
