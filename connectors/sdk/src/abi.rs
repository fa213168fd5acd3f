//! The `aileron_host` import ABI (SPEC §4.2) behind safe functions.
//!
//! On `wasm32` these are the real imports; every parameter is an `i32` in the module (pointers
//! and lengths into the guest's own memory: the guest allocates, the host copies). Elsewhere the
//! same functions are served by [`fake_host`] so that connector logic runs under `cargo test`.
//!
//! Only the functions a module actually calls end up in its import section (the linker drops
//! the rest), so a connector's `[capabilities.runtime] imports` lists what it uses, not the SDK.

#[cfg(target_arch = "wasm32")]
mod imports {
    #[link(wasm_import_module = "aileron_host")]
    unsafe extern "C" {
        // Renamed on the Rust side: a bare `log` symbol would shadow libm's `log(double)`.
        #[link_name = "log"]
        pub fn host_log(level_ptr: *const u8, level_len: usize, msg_ptr: *const u8, msg_len: usize);
        #[link_name = "http_request"]
        pub fn host_http_request(req_ptr: *const u8, req_len: usize) -> i32;
        #[link_name = "http_response_status"]
        pub fn host_http_response_status() -> i32;
        #[link_name = "http_response_size"]
        pub fn host_http_response_size() -> i32;
        #[link_name = "http_response_read"]
        pub fn host_http_response_read(dst_ptr: *mut u8, dst_len: usize) -> i32;
        // The spawn functions, handle convention (SPEC §4.2).
        #[link_name = "spawn"]
        pub fn host_spawn(envelope_ptr: *const u8, envelope_len: usize) -> i32;
        #[link_name = "spawn_op"]
        pub fn host_spawn_op(op_ptr: *const u8, op_len: usize, args_ptr: *const u8, args_len: usize) -> i32;
        #[link_name = "spawn_status"]
        pub fn host_spawn_status(handle: i32) -> i32;
        #[link_name = "spawn_output_size"]
        pub fn host_spawn_output_size(handle: i32, which: i32) -> i32;
        #[link_name = "spawn_output_read"]
        pub fn host_spawn_output_read(handle: i32, which: i32, dst_ptr: *mut u8, dst_len: usize) -> i32;
    }
}

#[cfg(target_arch = "wasm32")]
pub fn spawn(envelope: &[u8]) -> i32 {
    // SAFETY: the slice is valid for its length during the call; the host only reads it.
    unsafe { imports::host_spawn(envelope.as_ptr(), envelope.len()) }
}

#[cfg(target_arch = "wasm32")]
pub fn spawn_op(op: &str, args: &[u8]) -> i32 {
    // SAFETY: both slices are valid for their lengths during the call; the host only reads them.
    unsafe { imports::host_spawn_op(op.as_ptr(), op.len(), args.as_ptr(), args.len()) }
}

#[cfg(target_arch = "wasm32")]
pub fn spawn_status(handle: i32) -> i32 {
    // SAFETY: integer arguments only.
    unsafe { imports::host_spawn_status(handle) }
}

#[cfg(target_arch = "wasm32")]
pub fn spawn_output_size(handle: i32, which: i32) -> i32 {
    // SAFETY: integer arguments only.
    unsafe { imports::host_spawn_output_size(handle, which) }
}

#[cfg(target_arch = "wasm32")]
pub fn spawn_output_read(handle: i32, which: i32, destination: &mut [u8]) -> i32 {
    // SAFETY: the slice is valid and exclusively borrowed for its length; the host writes at
    // most `destination.len()` bytes into it.
    unsafe { imports::host_spawn_output_read(handle, which, destination.as_mut_ptr(), destination.len()) }
}

#[cfg(target_arch = "wasm32")]
pub fn log(level: &str, message: &str) {
    // SAFETY: both slices are valid for their lengths for the duration of the call; the host
    // only reads them.
    unsafe { imports::host_log(level.as_ptr(), level.len(), message.as_ptr(), message.len()) }
}

#[cfg(target_arch = "wasm32")]
pub fn http_request(envelope: &[u8]) -> i32 {
    // SAFETY: the slice is valid for its length during the call; the host only reads it.
    unsafe { imports::host_http_request(envelope.as_ptr(), envelope.len()) }
}

#[cfg(target_arch = "wasm32")]
pub fn http_response_status() -> i32 {
    // SAFETY: no arguments; the host only reads its own state.
    unsafe { imports::host_http_response_status() }
}

#[cfg(target_arch = "wasm32")]
pub fn http_response_size() -> i32 {
    // SAFETY: no arguments; the host only reads its own state.
    unsafe { imports::host_http_response_size() }
}

#[cfg(target_arch = "wasm32")]
pub fn http_response_read(destination: &mut [u8]) -> i32 {
    // SAFETY: the slice is valid and exclusively borrowed for its length during the call; the
    // host writes at most `destination.len()` bytes into it.
    unsafe { imports::host_http_response_read(destination.as_mut_ptr(), destination.len()) }
}

#[cfg(not(target_arch = "wasm32"))]
pub use fake_host::{
    http_request, http_response_read, http_response_size, http_response_status, log, spawn, spawn_op,
    spawn_output_read, spawn_output_size, spawn_status,
};

/// An in-process stand-in for the `aileron_host` functions, compiled only for non-wasm targets
/// so that connector logic can be unit-tested natively.
///
/// It follows the host contract: a request envelope that is not a JSON object with string
/// `method` and `url` answers −2; each accepted request consumes the next scripted outcome
/// (none scripted answers −1, like a host-side failure); the last response stays readable until
/// the next request. State is per thread, so parallel tests do not interfere.
#[cfg(not(target_arch = "wasm32"))]
pub mod fake_host {
    use std::cell::RefCell;
    use std::collections::VecDeque;

    use serde_json::Value;

    /// What the fake host does with the next request.
    #[derive(Clone, Debug)]
    pub enum Outcome {
        /// Buffer this response (code 0).
        Respond { status: u16, body: Vec<u8> },
        /// Deny or fail the request (code −1).
        Deny,
    }

    #[derive(Default)]
    struct State {
        scripted: VecDeque<Outcome>,
        requests: Vec<Value>,
        logs: Vec<(String, String)>,
        last_response: Option<(u16, Vec<u8>)>,
        /// Scripted spawn results: `Ok((exit code, stdout, stderr))` or `Err(return code)`.
        spawn_results: VecDeque<Result<(i32, Vec<u8>, Vec<u8>), i32>>,
        spawned: Vec<Value>,
        spawn_outputs: Vec<(i32, Vec<u8>, Vec<u8>)>,
    }

    thread_local! {
        static STATE: RefCell<State> = RefCell::new(State::default());
    }

    /// Forgets scripted outcomes, recorded requests, log lines and the last response.
    pub fn reset() {
        STATE.with(|state| *state.borrow_mut() = State::default());
    }

    /// Scripts the next unanswered request to receive this response.
    pub fn respond(status: u16, body: impl Into<Vec<u8>>) {
        script(Outcome::Respond { status, body: body.into() });
    }

    /// Scripts the next unanswered request to be denied (−1).
    pub fn deny() {
        script(Outcome::Deny);
    }

    pub fn script(outcome: Outcome) {
        STATE.with(|state| state.borrow_mut().scripted.push_back(outcome));
    }

    /// Every well-formed request envelope received so far, in order.
    pub fn requests() -> Vec<Value> {
        STATE.with(|state| state.borrow().requests.clone())
    }

    /// Every `(level, message)` log line received so far, in order.
    pub fn logs() -> Vec<(String, String)> {
        STATE.with(|state| state.borrow().logs.clone())
    }

    pub fn log(level: &str, message: &str) {
        STATE.with(|state| state.borrow_mut().logs.push((level.to_owned(), message.to_owned())));
    }

    pub fn http_request(envelope: &[u8]) -> i32 {
        STATE.with(|state| {
            let mut state = state.borrow_mut();
            state.last_response = None;
            let Ok(request) = serde_json::from_slice::<Value>(envelope) else { return -2 };
            let well_formed =
                request.get("method").is_some_and(Value::is_string) && request.get("url").is_some_and(Value::is_string);
            if !well_formed {
                return -2;
            }
            state.requests.push(request);
            match state.scripted.pop_front() {
                Some(Outcome::Respond { status, body }) => {
                    state.last_response = Some((status, body));
                    0
                }
                Some(Outcome::Deny) | None => -1,
            }
        })
    }

    /// Scripts the next spawn to finish with this exit code and output.
    pub fn spawn_finishes(exit_code: i32, stdout: impl Into<Vec<u8>>, stderr: impl Into<Vec<u8>>) {
        STATE.with(|state| state.borrow_mut().spawn_results.push_back(Ok((exit_code, stdout.into(), stderr.into()))));
    }

    /// Scripts the next spawn to be refused with this return code (−1, −2, −3).
    pub fn spawn_refused(code: i32) {
        STATE.with(|state| state.borrow_mut().spawn_results.push_back(Err(code)));
    }

    /// Every spawn asked for: `{"op", "args"}` or `{"envelope"}`.
    pub fn spawned() -> Vec<Value> {
        STATE.with(|state| state.borrow().spawned.clone())
    }

    fn next_spawn(request: Value) -> i32 {
        STATE.with(|state| {
            let mut state = state.borrow_mut();
            state.spawned.push(request);
            match state.spawn_results.pop_front() {
                Some(Ok(output)) => {
                    state.spawn_outputs.push(output);
                    i32::try_from(state.spawn_outputs.len() - 1).unwrap_or(i32::MAX)
                }
                Some(Err(code)) => code,
                None => -1,
            }
        })
    }

    pub fn spawn(envelope: &[u8]) -> i32 {
        match serde_json::from_slice::<Value>(envelope) {
            Ok(envelope) => next_spawn(serde_json::json!({ "envelope": envelope })),
            Err(_) => -2,
        }
    }

    pub fn spawn_op(op: &str, args: &[u8]) -> i32 {
        match serde_json::from_slice::<Value>(args) {
            Ok(args) if args.is_object() => next_spawn(serde_json::json!({ "op": op, "args": args })),
            _ => -2,
        }
    }

    fn with_output<T>(handle: i32, read: impl FnOnce(&(i32, Vec<u8>, Vec<u8>)) -> T) -> Option<T> {
        STATE.with(|state| {
            let state = state.borrow();
            usize::try_from(handle).ok().and_then(|index| state.spawn_outputs.get(index)).map(read)
        })
    }

    pub fn spawn_status(handle: i32) -> i32 {
        with_output(handle, |output| output.0).unwrap_or(-1)
    }

    pub fn spawn_output_size(handle: i32, which: i32) -> i32 {
        with_output(handle, |output| match which {
            0 => i32::try_from(output.1.len()).unwrap_or(i32::MAX),
            1 => i32::try_from(output.2.len()).unwrap_or(i32::MAX),
            _ => -1,
        })
        .unwrap_or(-1)
    }

    pub fn spawn_output_read(handle: i32, which: i32, destination: &mut [u8]) -> i32 {
        with_output(handle, |output| {
            let bytes = match which {
                0 => &output.1,
                1 => &output.2,
                _ => return -1,
            };
            let count = bytes.len().min(destination.len());
            destination[..count].copy_from_slice(&bytes[..count]);
            i32::try_from(count).unwrap_or(i32::MAX)
        })
        .unwrap_or(-1)
    }

    pub fn http_response_status() -> i32 {
        STATE.with(|state| state.borrow().last_response.as_ref().map_or(-1, |(status, _)| i32::from(*status)))
    }

    pub fn http_response_size() -> i32 {
        STATE.with(|state| {
            state.borrow().last_response.as_ref().map_or(-1, |(_, body)| i32::try_from(body.len()).unwrap_or(i32::MAX))
        })
    }

    pub fn http_response_read(destination: &mut [u8]) -> i32 {
        STATE.with(|state| {
            let state = state.borrow();
            let Some((_, body)) = state.last_response.as_ref() else { return 0 };
            let count = body.len().min(destination.len());
            destination[..count].copy_from_slice(&body[..count]);
            i32::try_from(count).unwrap_or(i32::MAX)
        })
    }
}
