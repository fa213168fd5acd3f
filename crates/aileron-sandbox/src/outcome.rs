//! Turning how a guest run ended into the call's result (SPEC §4.1).
//!
//! Precedence, first match wins:
//! 1. a failure the host recorded (a denied or malformed `http_request`): it is the root cause,
//!    and what the guest did after it (print, crash, loop) is a consequence;
//! 2. a limit the host enforced by stopping the guest (time, fuel, stdout);
//! 3. a well-formed error object on stdout, even if the guest then exited non-zero or trapped
//!    (Go guests exit 1 after printing one);
//! 4. a memory grow refused by the memory limit, when the guest then failed;
//! 5. a trap, then a non-zero exit, as `connector_runtime_error` with the stderr tail;
//! 6. stdout: empty = null output, `{"output": ..}`, anything else is malformed.
//!
//! Guests may only report `external_api_error`, `network_error` and `connector_runtime_error`;
//! any other class (including host-only ones a guest could forge, such as `capability_denied`)
//! becomes `connector_runtime_error` with the original in `details.connector_class`.

use std::time::Duration;

use aileron_core::{Boundary, Failure, FailureClass};
use serde_json::{Map, Value};

use crate::guest_memory::GuestFault;
use crate::hooks::GuestLog;
use crate::limits::{LimitKind, LimitStop, Limits};
use crate::wasi::GuestExit;

/// Bytes of stderr attached to a crash report.
const STDERR_TAIL_BYTES: usize = 256;
/// Bytes of malformed stdout quoted in the failure.
const STDOUT_EXCERPT_BYTES: usize = 200;

/// The result of one call.
#[derive(Debug)]
pub struct CallOutcome {
    pub result: Result<Value, Failure>,
    pub logs: Vec<GuestLog>,
    pub elapsed: Duration,
}

impl CallOutcome {
    /// A call that ended before it had an instance.
    pub(crate) fn unstarted(result: Result<Value, Failure>, started: std::time::Instant) -> (CallOutcome, Instance) {
        (CallOutcome { result, logs: Vec::new(), elapsed: started.elapsed() }, Instance::none())
    }
}

/// A finished call's store (its instance, linear memory, tables and fiber stack) and the pooled
/// slot it occupies. The guest can no longer run. Dropping it resets the slot's pages and frees
/// the slot for the next call: for a small guest that reset is a tenth of the call's time, so a
/// caller with something to wait for anyway — the runner, for its audit record's fsync — drops
/// it while waiting instead of before (BENCHMARKS.md, issue 17). Held, it keeps a slot from
/// every other call: drop it as soon as the wait it overlaps begins.
pub struct Instance {
    // The store first: a tuple drops its fields in order, so the slot comes free only once the
    // store is gone (the pool has exactly as many slots as permits).
    held: Option<(wasmtime::Store<crate::context::CallContext>, tokio::sync::OwnedSemaphorePermit)>,
}

impl Instance {
    pub(crate) fn held(
        store: wasmtime::Store<crate::context::CallContext>,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) -> Instance {
        Instance { held: Some((store, slot)) }
    }

    pub(crate) fn none() -> Instance {
        Instance { held: None }
    }

    /// Whether this still holds a pooled slot.
    pub fn holds_slot(&self) -> bool {
        self.held.is_some()
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").field("holds_slot", &self.holds_slot()).finish()
    }
}

/// How the guest's run ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunEnd {
    /// `_start` returned or the guest called `proc_exit(0)`.
    Finished,
    /// `proc_exit` with a non-zero code.
    Exited(i32),
    /// The host stopped the guest at a limit.
    Stopped(LimitKind),
    /// A trap or an instantiation error, with its message.
    Trapped(String),
}

impl RunEnd {
    pub(crate) fn from_error(error: wasmtime::Error) -> RunEnd {
        if let Some(GuestExit(code)) = error.downcast_ref::<GuestExit>() {
            return if *code == 0 { RunEnd::Finished } else { RunEnd::Exited(*code) };
        }
        if let Some(LimitStop(kind)) = error.downcast_ref::<LimitStop>() {
            return RunEnd::Stopped(*kind);
        }
        if let Some(fault) = error.downcast_ref::<GuestFault>() {
            return RunEnd::Trapped(fault.to_string());
        }
        match error.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::OutOfFuel) => RunEnd::Stopped(LimitKind::Fuel),
            Some(wasmtime::Trap::Interrupt) => RunEnd::Stopped(LimitKind::Time),
            Some(trap) => RunEnd::Trapped(trap.to_string()),
            // The outermost message of other errors is often only "error while executing at wasm
            // backtrace"; the root cause says what went wrong.
            None => RunEnd::Trapped(error.root_cause().to_string()),
        }
    }
}

/// Everything the decision needs from a finished call.
pub(crate) struct RunRecord<'a> {
    pub(crate) end: RunEnd,
    pub(crate) stdout: &'a [u8],
    pub(crate) stderr_tail: String,
    pub(crate) memory_denied: bool,
    /// The runtime's memory budget, when it (not the call's cap) refused a grow.
    pub(crate) memory_budget_denied: Option<usize>,
    pub(crate) host_failure: Option<Failure>,
    pub(crate) limits: &'a Limits,
}

/// What the guest printed on stdout.
#[derive(Debug, PartialEq)]
pub enum Printed {
    Nothing,
    Output(Value),
    Error(Failure),
    Malformed(String),
}

pub(crate) fn decide(record: RunRecord<'_>) -> Result<Value, Failure> {
    if let Some(failure) = record.host_failure {
        return Err(failure);
    }
    if let RunEnd::Stopped(kind) = record.end {
        return Err(limit_failure(kind, record.limits));
    }
    let printed = parse_stdout(record.stdout);
    if let Printed::Error(failure) = printed {
        return Err(failure);
    }
    let failed = matches!(record.end, RunEnd::Trapped(_) | RunEnd::Exited(_));
    if failed && record.memory_denied {
        return Err(match record.memory_budget_denied {
            Some(budget) => Failure::resource_limit(
                LimitKind::Memory.as_str(),
                format!(
                    "the connector's memory could not grow: the calls running at once already hold the {} MiB of \
                     memory the daemon allows its connectors together; retry when fewer run",
                    budget >> 20
                ),
            ),
            None => limit_failure(LimitKind::Memory, record.limits),
        });
    }
    match record.end {
        RunEnd::Trapped(trap) => {
            Err(Failure::runtime_error(Boundary::Sandbox, format!("the connector crashed: {trap}"))
                .with_detail("trap", trap)
                .with_detail("stderr_tail", record.stderr_tail))
        }
        RunEnd::Exited(code) => Err(Failure::runtime_error(
            Boundary::Sandbox,
            format!("the connector exited with code {code} without reporting an error"),
        )
        .with_detail("exit_code", code)
        .with_detail("stderr_tail", record.stderr_tail)),
        RunEnd::Stopped(_) | RunEnd::Finished => match printed {
            Printed::Nothing => Ok(Value::Null),
            Printed::Output(output) => Ok(output),
            Printed::Error(failure) => Err(failure),
            Printed::Malformed(reason) => Err(Failure::runtime_error(
                Boundary::Sandbox,
                format!("the connector's stdout is not one {{\"output\"}} or {{\"error\"}} JSON object: {reason}"),
            )
            .with_detail("stdout_excerpt", excerpt(record.stdout))),
        },
    }
}

fn limit_failure(kind: LimitKind, limits: &Limits) -> Failure {
    let limit = match kind {
        LimitKind::Time => format!("{} ms of wall time", limits.wall_time.as_millis()),
        LimitKind::Memory => format!("{} bytes of memory", limits.effective_memory_bytes()),
        LimitKind::Fuel => format!("{} units of fuel", limits.fuel.unwrap_or(u64::MAX)),
        LimitKind::Stdout => format!("{} bytes of stdout", limits.max_stdout_bytes),
    };
    Failure::resource_limit(kind.as_str(), format!("the connector exceeded its limit of {limit}"))
}

fn excerpt(stdout: &[u8]) -> String {
    let cut = &stdout[..stdout.len().min(STDOUT_EXCERPT_BYTES)];
    String::from_utf8_lossy(cut).into_owned()
}

pub(crate) fn stderr_tail(tail: &crate::context::StderrTail) -> String {
    tail.last(STDERR_TAIL_BYTES)
}

/// Reads what a guest printed on stdout: nothing, one `{"output"}` or one `{"error"}` object.
/// Public (hidden) only for the fuzz targets of `crates/aileron-fuzz`.
pub fn parse_stdout(stdout: &[u8]) -> Printed {
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Printed::Nothing;
    }
    let envelope: Envelope = match serde_json::from_slice(stdout) {
        Ok(envelope) => envelope,
        Err(e) => return Printed::Malformed(e.to_string()),
    };
    let keys = usize::from(envelope.output.is_some()) + usize::from(envelope.error.is_some()) + envelope.others;
    if keys != 1 {
        return Printed::Malformed(format!("expected exactly one key, found {keys}"));
    }
    // Kept and read back wrapped deeper (the approval journal, the audit log): refused here.
    if envelope.output.iter().chain(&envelope.error).any(aileron_core::json_nesting::too_deep) {
        return Printed::Malformed(format!(
            "the value nests more than {} levels deep",
            aileron_core::json_nesting::MAX_NESTING
        ));
    }
    if let Some(output) = envelope.output {
        return Printed::Output(output);
    }
    match envelope.error {
        Some(error) => match guest_failure(error) {
            Ok(failure) => Printed::Error(failure),
            Err(reason) => Printed::Malformed(reason),
        },
        None => Printed::Malformed("the only key must be `output` or `error`".into()),
    }
}

/// The object a guest prints, read key by key: its `output` or `error` value, and how many other
/// keys it has. Only the value becomes a [`Value`] (every call's output is read through here): no
/// map of the envelope, no string of its key. A key given twice counts once, its last value
/// kept, as a map of it would.
struct Envelope {
    output: Option<Value>,
    error: Option<Value>,
    others: usize,
}

impl<'de> serde::Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Envelope, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Key {
            Output,
            Error,
            #[serde(other)]
            Other,
        }

        struct EnvelopeVisitor;

        impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
            type Value = Envelope;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
                let mut envelope = Envelope { output: None, error: None, others: 0 };
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Output => envelope.output = Some(map.next_value()?),
                        Key::Error => envelope.error = Some(map.next_value()?),
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            envelope.others += 1;
                        }
                    }
                }
                Ok(envelope)
            }
        }

        deserializer.deserialize_map(EnvelopeVisitor)
    }
}

/// Maps a guest's error object onto the closed taxonomy.
fn guest_failure(error: Value) -> Result<Failure, String> {
    let Value::Object(mut error) = error else {
        return Err("`error` must be an object".into());
    };
    let Some(Value::String(class)) = error.remove("class") else {
        return Err("`error.class` must be a string".into());
    };
    let Some(Value::String(message)) = error.remove("message") else {
        return Err("`error.message` must be a string".into());
    };
    let details = match error.remove("details") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(details)) => details,
        Some(_) => return Err("`error.details` must be an object".into()),
    };
    let mut failure = match FailureClass::parse(&class) {
        Some(FailureClass::ExternalApiError) => {
            match details.get("status").and_then(Value::as_u64).and_then(|s| u16::try_from(s).ok()) {
                Some(status) => Failure::external_api(status, message),
                None => Failure::new(FailureClass::ExternalApiError, Boundary::External, message),
            }
        }
        Some(FailureClass::NetworkError) => Failure::network(message),
        Some(FailureClass::ConnectorRuntimeError) => Failure::runtime_error(Boundary::Sandbox, message),
        _ => Failure::runtime_error(Boundary::Sandbox, message).with_detail("connector_class", class.clone()),
    };
    for (key, value) in details {
        failure.details.entry(key).or_insert(value);
    }
    Ok(failure)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn printed_error(class: &str, details: Value) -> Printed {
        let stdout = json!({"error": {"class": class, "message": "boom", "details": details}}).to_string();
        parse_stdout(stdout.as_bytes())
    }

    #[test]
    fn stdout_shapes() {
        let check = |stdout: &str, expected: Printed| assert_eq!(parse_stdout(stdout.as_bytes()), expected, "{stdout}");
        check("", Printed::Nothing);
        check(" \n", Printed::Nothing);
        check(r#"{"output": {"n": 1}}"#, Printed::Output(json!({"n": 1})));
        check("{\"output\": null}\n", Printed::Output(Value::Null));
        let malformed = |stdout: &str| {
            assert!(matches!(parse_stdout(stdout.as_bytes()), Printed::Malformed(_)), "{stdout}");
        };
        malformed("hello");
        malformed("[1]");
        malformed(r#"{"output": 1}{"output": 2}"#);
        malformed(r#"{"output": 1, "extra": 2}"#);
        malformed(r#"{"result": 1}"#);
        malformed(r#"{"error": "boom"}"#);
        malformed(r#"{"error": {"message": "no class"}}"#);
        malformed(r#"{"error": {"class": "network_error"}}"#);
        malformed(r#"{"error": {"class": "network_error", "message": "m", "details": 3}}"#);
        malformed(r#"{"output": 1, "error": {"class": "network_error", "message": "m"}}"#);
        malformed("{}");
        // A key given twice is one key, its last value kept (as a map of it keeps it).
        check(r#"{"output": 1, "output": {"n": 2}}"#, Printed::Output(json!({"n": 2})));
        check(r#"{"\u006futput": 3}"#, Printed::Output(json!(3)));
    }

    #[test]
    fn guest_classes_are_confined_to_the_three_a_guest_may_report() {
        // (class, details, expected class, retriable, boundary, connector_class)
        let table = [
            (
                "external_api_error",
                json!({"status": 503}),
                FailureClass::ExternalApiError,
                true,
                Boundary::External,
                None,
            ),
            (
                "external_api_error",
                json!({"status": 429}),
                FailureClass::ExternalApiError,
                true,
                Boundary::External,
                None,
            ),
            (
                "external_api_error",
                json!({"status": 404}),
                FailureClass::ExternalApiError,
                false,
                Boundary::External,
                None,
            ),
            ("external_api_error", json!({}), FailureClass::ExternalApiError, false, Boundary::External, None),
            ("network_error", json!({}), FailureClass::NetworkError, true, Boundary::External, None),
            ("connector_runtime_error", json!({}), FailureClass::ConnectorRuntimeError, false, Boundary::Sandbox, None),
            (
                "unknown_op",
                json!({}),
                FailureClass::ConnectorRuntimeError,
                false,
                Boundary::Sandbox,
                Some("unknown_op"),
            ),
            (
                "capability_denied",
                json!({}),
                FailureClass::ConnectorRuntimeError,
                false,
                Boundary::Sandbox,
                Some("capability_denied"),
            ),
            (
                "hash_mismatch",
                json!({}),
                FailureClass::ConnectorRuntimeError,
                false,
                Boundary::Sandbox,
                Some("hash_mismatch"),
            ),
            (
                "connector_runtime_error",
                json!({"connector_class": "forged"}),
                FailureClass::ConnectorRuntimeError,
                false,
                Boundary::Sandbox,
                Some("forged"),
            ),
        ];
        for (class, details, expected, retriable, boundary, connector_class) in table {
            let Printed::Error(failure) = printed_error(class, details.clone()) else {
                panic!("{class} was not parsed as an error");
            };
            assert_eq!(
                (failure.class, failure.retriable, failure.boundary),
                (expected, retriable, boundary),
                "{class}"
            );
            assert_eq!(failure.details.get("connector_class").and_then(Value::as_str), connector_class, "{class}");
            assert_eq!(failure.message, "boom");
        }
        // A forged class cannot be hidden by a guest-supplied `connector_class`.
        let Printed::Error(failure) = printed_error("binding_failed", json!({"connector_class": "x"})) else {
            panic!("not an error");
        };
        assert_eq!(failure.details["connector_class"], "binding_failed");
    }

    static LIMITS: Limits = Limits {
        memory_bytes: 1 << 20,
        wall_time: Duration::from_millis(100),
        fuel: None,
        max_stdout_bytes: 10,
        max_stderr_bytes: 10,
    };

    fn record<'a>(end: RunEnd, stdout: &'a str, memory_denied: bool, host_failure: Option<Failure>) -> RunRecord<'a> {
        RunRecord {
            end,
            stdout: stdout.as_bytes(),
            stderr_tail: "panic: oops".into(),
            memory_denied,
            memory_budget_denied: None,
            host_failure,
            limits: &LIMITS,
        }
    }

    #[test]
    fn precedence_of_run_endings() {
        let error = r#"{"error":{"class":"network_error","message":"down"}}"#;
        let output = r#"{"output":7}"#;
        let denied = || Some(Failure::capability_denied(Boundary::Sandbox, "no"));
        let summary = |result: Result<Value, Failure>| match result {
            Ok(value) => format!("ok {value}"),
            Err(f) => match f.details.get("limit").or(f.details.get("exit_code")).or(f.details.get("trap")) {
                Some(detail) => format!("{} {}", f.class, detail),
                None => f.class.to_string(),
            },
        };
        let table = [
            (record(RunEnd::Finished, output, false, denied()), "capability_denied"),
            (record(RunEnd::Stopped(LimitKind::Time), error, false, denied()), "capability_denied"),
            (record(RunEnd::Stopped(LimitKind::Time), error, false, None), "resource_limit_exceeded \"time\""),
            (record(RunEnd::Stopped(LimitKind::Stdout), output, true, None), "resource_limit_exceeded \"stdout\""),
            (record(RunEnd::Exited(1), error, false, None), "network_error"),
            (record(RunEnd::Trapped("unreachable".into()), error, true, None), "network_error"),
            (record(RunEnd::Trapped("unreachable".into()), "", true, None), "resource_limit_exceeded \"memory\""),
            (record(RunEnd::Exited(2), "", true, None), "resource_limit_exceeded \"memory\""),
            (record(RunEnd::Finished, output, true, None), "ok 7"),
            (
                record(RunEnd::Trapped("unreachable".into()), output, false, None),
                "connector_runtime_error \"unreachable\"",
            ),
            (record(RunEnd::Exited(3), output, false, None), "connector_runtime_error 3"),
            (record(RunEnd::Finished, "", false, None), "ok null"),
            (record(RunEnd::Finished, "garbage", false, None), "connector_runtime_error"),
        ];
        for (record, expected) in table {
            let end = record.end.clone();
            assert_eq!(summary(decide(record)), expected, "{end:?}");
        }
    }

    #[test]
    fn crash_reports_carry_the_stderr_tail_and_malformed_output_an_excerpt() {
        let failure = decide(record(RunEnd::Exited(2), "", false, None)).unwrap_err();
        assert_eq!(failure.details["stderr_tail"], "panic: oops");
        let long = "x".repeat(1000);
        let failure = decide(record(RunEnd::Finished, &long, false, None)).unwrap_err();
        assert_eq!(failure.details["stdout_excerpt"].as_str().unwrap().len(), STDOUT_EXCERPT_BYTES);
    }
}
