//! Running a declared local program through the host (`aileron_host.spawn_op` and friends).
//!
//! The guest cannot start processes. It names an operation its manifest declares under
//! `[capabilities.spawn.operations]` and gives the placeholder values; the host fills the argv
//! template (a value never becomes an option), runs the program confined, puts any credential in
//! the child's environment only, and buffers the exit code and the capped output.

use serde_json::Value;

use crate::abi;
use crate::error::ConnectorError;

/// A finished program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// The exit code (128 + signal number when killed by a signal).
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn success(&self) -> bool {
        self.status == 0
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Why the host ran nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpawnError {
    /// −1: refused by the gate or failed; the host recorded the structured failure, which wins.
    Denied,
    /// −2: the host could not parse the request.
    Malformed,
    /// −3: this machine cannot confine a program, so none is run.
    SandboxUnavailable,
    UnexpectedCode(i32),
}

impl From<SpawnError> for ConnectorError {
    fn from(error: SpawnError) -> ConnectorError {
        match error {
            SpawnError::Denied => ConnectorError::runtime("the host refused to run the program"),
            SpawnError::Malformed => ConnectorError::runtime("the host could not parse the spawn request"),
            SpawnError::SandboxUnavailable => {
                ConnectorError::runtime("the host cannot confine programs on this machine")
            }
            SpawnError::UnexpectedCode(code) => ConnectorError::runtime(format!("the host answered spawn with {code}")),
        }
    }
}

/// Runs the declared operation `op` with `args` (a JSON object of placeholder values).
pub fn run_op(op: &str, args: &Value) -> Result<Output, SpawnError> {
    let handle = abi::spawn_op(op, args.to_string().as_bytes());
    collect(handle)
}

/// Runs a full envelope `{program, argv, env?, cwd?, stdin?, credential_env_keys?}`; its argv must
/// be what one of the program's declared operations renders.
pub fn run_envelope(envelope: &Value) -> Result<Output, SpawnError> {
    let handle = abi::spawn(envelope.to_string().as_bytes());
    collect(handle)
}

fn collect(handle: i32) -> Result<Output, SpawnError> {
    match handle {
        -1 => return Err(SpawnError::Denied),
        -2 => return Err(SpawnError::Malformed),
        -3 => return Err(SpawnError::SandboxUnavailable),
        code if code < 0 => return Err(SpawnError::UnexpectedCode(code)),
        _ => {}
    }
    let read = |which: i32| -> Vec<u8> {
        let size = usize::try_from(abi::spawn_output_size(handle, which)).unwrap_or(0);
        let mut bytes = vec![0; size];
        let written = usize::try_from(abi::spawn_output_read(handle, which, &mut bytes)).unwrap_or(0);
        bytes.truncate(written);
        bytes
    };
    Ok(Output { status: abi::spawn_status(handle), stdout: read(0), stderr: read(1) })
}

// The fake host exists only off wasm; the tests need it.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fake_host;

    #[test]
    fn operations_return_status_and_both_streams() {
        fake_host::reset();
        fake_host::spawn_finishes(3, "out", "err");
        let output = run_op("log", &json!({"count": "2"})).unwrap();
        assert_eq!(output, Output { status: 3, stdout: b"out".to_vec(), stderr: b"err".to_vec() });
        assert_eq!(fake_host::spawned(), vec![json!({"op": "log", "args": {"count": "2"}})]);
        for (code, error) in
            [(-1, SpawnError::Denied), (-2, SpawnError::Malformed), (-3, SpawnError::SandboxUnavailable)]
        {
            fake_host::spawn_refused(code);
            assert_eq!(run_op("log", &json!({})).unwrap_err(), error);
        }
    }
}
