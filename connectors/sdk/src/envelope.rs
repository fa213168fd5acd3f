//! The per-call envelope: `{"op", "args"}` on stdin, exactly one result object on stdout.

use std::fs::File;
use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};

use serde_json::{Map, Value, json};

use crate::error::ConnectorError;

/// Runs one call: reads the request from stdin, calls `handler(op, args)`, writes exactly one
/// JSON object to stdout and returns, so the module exits 0.
///
/// The process exits 0 on errors too: the error object is authoritative, and a non-zero exit
/// without one is reserved for crashes (the host then reports `connector_runtime_error` with
/// the exit code and the tail of stderr).
pub fn run(handler: impl FnOnce(&str, Value) -> Result<Value, ConnectorError>) {
    let mut request = Vec::with_capacity(REQUEST_CAPACITY);
    let result = match Reads(&mut standard_stream(STDIN)).read_to_end(&mut request) {
        Ok(_) => outcome(&request, handler),
        Err(error) => Err(ConnectorError::runtime(format!("cannot read the request from stdin: {error}"))),
    };
    // Built whole in one buffer, then written with one `fd_write`: serialized straight into the
    // unbuffered stream, each of serde_json's small writes would be a host call.
    let line = answer_line(&result);
    if let Err(error) = standard_stream(STDOUT).write_all(&line) {
        // Nothing reached the host intact; a crash exit makes it report the stderr line.
        eprintln!("cannot write the result to stdout: {error}");
        std::process::exit(1);
    }
    // The instance's memory is thrown away whole when the call returns, so freeing the request,
    // the output and the line value by value first would only be work (11 % of the `echo`
    // guest's own instructions): they are left where they are, as `process::exit` would.
    std::mem::forget((request, result, line));
}

const STDIN: RawFd = 0;
const STDOUT: RawFd = 1;

/// Room for a request before it grows: most are a few hundred bytes.
const REQUEST_CAPACITY: usize = 1024;

/// A file read by `read` alone. `File`'s own `read_to_end` first asks the descriptor for its
/// size and position (two host calls, which a stream answers with nothing useful); this reads
/// straight into the buffer's room until the end.
struct Reads<'a>(&'a mut File);

impl Read for Reads<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

/// The standard stream `fd`, read or written whole without std's handles: `stdin()` and
/// `stdout()` each allocate a buffer first (8 KiB and 1 KiB) that one whole read and one whole
/// write never use. A guest instance starts from fresh memory every call, so each allocation
/// that reaches a page the call would not otherwise touch is a page dirtied, and reset after it
/// (connectors/README.md, "A call's memory").
fn standard_stream(fd: RawFd) -> ManuallyDrop<File> {
    // SAFETY: 0 and 1 are a command's standard streams, open for as long as it runs; the `File`
    // is never dropped, so it never closes them: it only borrows what std's handles would.
    ManuallyDrop::new(unsafe { File::from_raw_fd(fd) })
}

/// The stdout object for one raw stdin request: `{"output": ..}` or `{"error": {..}}`.
///
/// `args` may be absent or `null` (treated as `{}`); anything else that is not an object is
/// `bad_input`, as is a request without a string `op`.
pub fn dispatch(request: &[u8], handler: impl FnOnce(&str, Value) -> Result<Value, ConnectorError>) -> Value {
    match outcome(request, handler) {
        Ok(output) => json!({ "output": output }),
        Err(error) => error.envelope(),
    }
}

/// The handler's result for one raw stdin request, or the error that the request's own shape is.
fn outcome(
    request: &[u8],
    handler: impl FnOnce(&str, Value) -> Result<Value, ConnectorError>,
) -> Result<Value, ConnectorError> {
    let (op, args) = parse_request(request)?;
    handler(&op, args)
}

/// [`dispatch`]'s object as the one line `run` writes. An output is written inside
/// `{"output":…}` as it is, without first being moved into a map of one key.
fn answer_line(result: &Result<Value, ConnectorError>) -> Vec<u8> {
    let mut line = match result {
        Ok(output) => {
            // serde_json's own `to_vec` starts at 128 bytes too.
            let mut line = Vec::with_capacity(128);
            line.extend_from_slice(b"{\"output\":");
            serde_json::to_writer(&mut line, output).expect("a JSON value serializes");
            line.push(b'}');
            line
        }
        Err(error) => serde_json::to_vec(&error.envelope()).expect("a JSON value serializes"),
    };
    line.push(b'\n');
    line
}

fn parse_request(request: &[u8]) -> Result<(String, Value), ConnectorError> {
    // serde_json classes a value of the wrong kind (here: a request that is not an object) as a
    // `Data` error; whatever the text itself gets wrong is `Syntax` or `Eof`.
    let request: Request = serde_json::from_slice(request).map_err(|error| match error.classify() {
        serde_json::error::Category::Data => {
            ConnectorError::bad_input("the request on stdin must be a JSON object {\"op\", \"args\"}")
        }
        _ => ConnectorError::bad_input(format!("the request on stdin is not JSON: {error}")),
    })?;
    let op = match request.op {
        Some(Value::String(op)) => op,
        Some(_) => return Err(ConnectorError::bad_input("the request's `op` must be a string")),
        None => return Err(ConnectorError::bad_input("the request has no `op`")),
    };
    let args = match request.args {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(args @ Value::Object(_)) => args,
        Some(_) => return Err(ConnectorError::bad_input("the request's `args` must be a JSON object")),
    };
    Ok((op, args))
}

/// A key of the request object, read without a string of its own.
enum Key {
    Op,
    Args,
    Other,
}

impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Key, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "op" => Key::Op,
                    "args" => Key::Args,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(Visitor)
    }
}

/// The request object read key by key: its `op` and `args` values, other keys skipped, no map of
/// the object built. A key given twice keeps its last value, as a map of it would.
struct Request {
    op: Option<Value>,
    args: Option<Value>,
}

impl<'de> serde::Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Request, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Request;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Request, A::Error> {
                let mut request = Request { op: None, args: None };
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Op => request.op = Some(map.next_value()?),
                        Key::Args => request.args = Some(map.next_value()?),
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(request)
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{answer_line, dispatch, outcome};
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
        for not_an_object in ["null", "7", r#""op""#, "true"] {
            check(not_an_object, bad_input("the request on stdin must be a JSON object {\"op\", \"args\"}"));
        }
        // Errors inside the object are the JSON's, not the envelope's shape.
        check(
            r#"{"op": "x", "args": {"n": 1e400}}"#,
            bad_input("the request on stdin is not JSON: number out of range at line 1 column 31"),
        );
        check(
            r#"{"op": "x"} {}"#,
            bad_input("the request on stdin is not JSON: trailing characters at line 1 column 13"),
        );
    }

    /// The request is read key by key, as a map of it would be: other keys are ignored, a key
    /// given twice keeps its last value, and escaped keys are the keys they spell.
    #[test]
    fn requests_are_read_as_a_map_of_them_would_be() {
        check(r#"{"x": [1, {"op": 2}], "op": "x", "y": null}"#, json!({"output": {"op": "x", "args": {}}}));
        check(
            r#"{"op": "a", "args": {"k": 1}, "op": "b", "args": {"k": 2}}"#,
            json!({"output": {"op": "b", "args": {"k": 2}}}),
        );
        check(r#"{"\u006fp": "x", "ar\u0067s": {"k": 1}}"#, json!({"output": {"op": "x", "args": {"k": 1}}}));
        check(r#"{"op": "x", "args": null}"#, json!({"output": {"op": "x", "args": {}}}));
    }

    /// The line `run` writes is [`dispatch`]'s object, serialized, and one newline.
    #[test]
    fn the_written_line_is_the_dispatched_object() {
        for request in [
            r#"{"op": "x", "args": {"a": [1, "two", null], "b": {"c": "\u00e9\n"}}}"#,
            r#"{"op": "x"}"#,
            r#"{"op": "fail"}"#,
            r#"{"args": {}}"#,
            "not json",
        ] {
            let line = answer_line(&outcome(request.as_bytes(), echo_or_fail));
            let (object, newline) = line.split_at(line.len() - 1);
            assert_eq!(newline, b"\n", "request: {request}");
            assert!(!object.contains(&b'\n'), "one line: {request}");
            let written: Value = serde_json::from_slice(object).expect("the line is JSON");
            assert_eq!(written, dispatch(request.as_bytes(), echo_or_fail), "request: {request}");
        }
    }
}
