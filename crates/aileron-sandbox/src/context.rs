//! The per-call state stored in each wasmtime `Store`: the request on stdin, captured stdout and
//! stderr, guest logs, the last HTTP response, the spawned programs' output, the failure the host recorded, the memory limiter
//! and the wall-time deadline. A fresh one is built for every call, so nothing leaks between calls.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use aileron_core::Failure;

use crate::hooks::{GuestLog, HostHooks, HostHttpResponse, SpawnOutput};
use crate::limits::{Limits, MemoryBudget, MemoryLimiter};

/// Total bytes of guest log messages kept per call; a guest logging in a loop must not grow the
/// daemon's memory without bound. Later lines are dropped and one notice says so.
pub(crate) const LOG_BYTES_CAP: usize = 1 << 20;

/// What each guest log line costs of [`LOG_BYTES_CAP`] beyond its text: what keeping it costs the
/// daemon. Free empty lines (`log("", "")`) grew the daemon by 1.6 GB in one 17 s call (the ninth
/// re-attack), so a call keeps at most `LOG_BYTES_CAP / LOG_LINE_BYTES` (16,384) lines.
pub(crate) const LOG_LINE_BYTES: usize = 64;

pub(crate) struct CallContext {
    pub(crate) stdin: Vec<u8>,
    pub(crate) stdin_offset: usize,
    pub(crate) stdout: Vec<u8>,
    pub(crate) max_stdout_bytes: usize,
    pub(crate) stderr: StderrTail,
    pub(crate) logs: GuestLogs,
    pub(crate) last_response: Option<HostHttpResponse>,
    /// Every program this call spawned (its handle is the index), and the last one.
    pub(crate) spawns: Vec<SpawnOutput>,
    pub(crate) last_spawn: Option<usize>,
    /// The first failure the host recorded (a denied or malformed request); it wins over stdout.
    pub(crate) host_failure: Option<Failure>,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) hooks: Arc<dyn HostHooks>,
    pub(crate) deadline: Instant,
    /// The instance's exported memory, found by name at the call's first host call
    /// ([`crate::guest_memory::GuestMemory::of`]); a store runs one instance.
    pub(crate) memory: Option<wasmtime::Memory>,
}

impl CallContext {
    pub(crate) fn new(
        stdin: Vec<u8>,
        limits: &Limits,
        budget: Arc<MemoryBudget>,
        hooks: Arc<dyn HostHooks>,
        deadline: Instant,
    ) -> CallContext {
        CallContext {
            stdin,
            stdin_offset: 0,
            stdout: Vec::new(),
            max_stdout_bytes: limits.max_stdout_bytes,
            stderr: StderrTail::new(limits.max_stderr_bytes),
            logs: GuestLogs::default(),
            last_response: None,
            spawns: Vec::new(),
            last_spawn: None,
            host_failure: None,
            limiter: MemoryLimiter::new(limits, budget),
            hooks,
            deadline,
            memory: None,
        }
    }

    /// Keeps the first host failure: later ones are usually consequences of the first.
    pub(crate) fn record_failure(&mut self, failure: Failure) {
        self.host_failure.get_or_insert(failure);
    }

    /// Records a failure the host function reports to the guest with `code`; a capability denial
    /// also stops the call (seed 004: the process is terminated), so no later request of the same
    /// call goes out — the guest cannot probe host after host, or carry on around a refusal.
    /// The recorded denial is what the call reports (it wins over the trap).
    pub(crate) fn fail_host_call(&mut self, failure: Failure, code: i32) -> wasmtime::Result<i32> {
        let stops = failure.class == aileron_core::FailureClass::CapabilityDenied;
        self.record_failure(failure);
        if stops {
            return Err(wasmtime::Error::msg("the call was stopped: a capability was denied"));
        }
        Ok(code)
    }
}

/// The last `cap` bytes written to stderr: the end of a crash report is the useful part.
pub(crate) struct StderrTail {
    bytes: VecDeque<u8>,
    cap: usize,
}

impl StderrTail {
    pub(crate) fn new(cap: usize) -> StderrTail {
        StderrTail { bytes: VecDeque::new(), cap }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        let data = &data[data.len().saturating_sub(self.cap)..];
        self.bytes.extend(data);
        let excess = self.bytes.len().saturating_sub(self.cap);
        self.bytes.drain(..excess);
    }

    /// The last `n` bytes, decoded lossily (a cut may split a UTF-8 sequence).
    pub(crate) fn last(&self, n: usize) -> String {
        let skip = self.bytes.len().saturating_sub(n);
        let tail: Vec<u8> = self.bytes.iter().skip(skip).copied().collect();
        String::from_utf8_lossy(&tail).into_owned()
    }
}

/// Guest log lines with a byte budget.
#[derive(Default)]
pub(crate) struct GuestLogs {
    lines: Vec<GuestLog>,
    bytes: usize,
    dropped: bool,
}

impl GuestLogs {
    pub(crate) fn push(&mut self, level: String, message: String) {
        if self.dropped {
            return;
        }
        let size = LOG_LINE_BYTES + level.len() + message.len();
        if self.bytes + size > LOG_BYTES_CAP {
            self.dropped = true;
            self.lines.push(GuestLog {
                level: "warn".into(),
                message: format!("aileron: further guest log lines dropped (log budget of {LOG_BYTES_CAP} bytes used)"),
            });
            return;
        }
        self.bytes += size;
        self.lines.push(GuestLog { level, message });
    }

    pub(crate) fn into_lines(self) -> Vec<GuestLog> {
        self.lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_keeps_the_last_bytes_up_to_its_cap() {
        // (cap, writes, kept)
        let table: [(usize, &[&str], &str); 4] = [
            (8, &["abc", "def"], "abcdef"),
            (4, &["abc", "def"], "cdef"),
            (4, &["abcdefghij"], "ghij"),
            (0, &["abc"], ""),
        ];
        for (cap, writes, kept) in table {
            let mut tail = StderrTail::new(cap);
            for write in writes {
                tail.push(write.as_bytes());
            }
            assert_eq!(tail.last(usize::MAX), kept, "{writes:?}");
        }
        let mut tail = StderrTail::new(100);
        tail.push(b"0123456789");
        assert_eq!(tail.last(3), "789");
    }

    #[test]
    fn guest_logs_stop_at_the_budget_with_one_notice() {
        let mut logs = GuestLogs::default();
        let line = "x".repeat(LOG_BYTES_CAP / 2);
        for _ in 0..5 {
            logs.push("info".into(), line.clone());
        }
        let lines = logs.into_lines();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].message, line);
        assert_eq!(lines[1].level, "warn");
        assert!(lines[1].message.contains("dropped"), "{}", lines[1].message);
    }

    #[test]
    fn empty_guest_log_lines_are_not_free() {
        let mut logs = GuestLogs::default();
        for _ in 0..1_000_000 {
            logs.push(String::new(), String::new());
        }
        let lines = logs.into_lines();
        assert_eq!(lines.len(), LOG_BYTES_CAP / LOG_LINE_BYTES + 1, "the lines kept and one notice");
        assert!(lines.last().unwrap().message.contains("dropped"));
    }
}
