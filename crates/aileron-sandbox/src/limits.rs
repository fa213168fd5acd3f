//! Per-call resource limits (SPEC §4.3) and the ways a call is stopped when it exceeds one.
//!
//! Memory is capped by a `ResourceLimiter` that also remembers whether it ever refused a grow, so
//! the trap or abort that usually follows is reported as `resource_limit_exceeded` (memory)
//! rather than as an anonymous crash. Wall time is enforced twice: by the epoch deadline
//! callback while wasm code runs, and by a tokio timeout around the whole call for time spent
//! inside asynchronous host calls (sleeping, HTTP). Fuel is optional.

use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, StoreContextMut, UpdateDeadline};

/// Largest linear memory a call may ever ask for (SPEC §4.3).
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;

/// Per-call limits. `Default` gives the SPEC defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory cap in bytes (default 64 MiB); values above 1 GiB are clamped to 1 GiB.
    pub memory_bytes: u64,
    /// Wall-time limit of the whole call, including time spent in host calls (default 30 s).
    pub wall_time: Duration,
    /// Optional fuel budget (roughly one unit per wasm instruction); `None` = unlimited.
    pub fuel: Option<u64>,
    /// Maximum bytes the guest may write to stdout (default 1 MiB); more stops the call.
    pub max_stdout_bytes: usize,
    /// How many trailing bytes of stderr are kept for diagnostics (default 64 KiB).
    pub max_stderr_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 64 << 20,
            wall_time: Duration::from_secs(30),
            fuel: None,
            max_stdout_bytes: 1 << 20,
            max_stderr_bytes: 64 << 10,
        }
    }
}

impl Limits {
    /// The memory cap actually enforced: the requested one, clamped to [`MAX_MEMORY_BYTES`].
    pub fn effective_memory_bytes(&self) -> u64 {
        self.memory_bytes.min(MAX_MEMORY_BYTES)
    }
}

/// Which limit stopped a call; the string is `details.limit` of the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LimitKind {
    Time,
    Memory,
    Fuel,
    Stdout,
}

impl LimitKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LimitKind::Time => "time",
            LimitKind::Memory => "memory",
            LimitKind::Fuel => "fuel",
            LimitKind::Stdout => "stdout",
        }
    }
}

/// Raised as a trap by the host to stop a call that exceeded a limit.
#[derive(Debug, thiserror::Error)]
#[error("{} limit exceeded", .0.as_str())]
pub(crate) struct LimitStop(pub(crate) LimitKind);

/// Caps linear memory and tables, and records whether a memory grow was refused because of the
/// cap (a grow refused only by the module's own declared maximum is not our limit).
pub(crate) struct MemoryLimiter {
    memory_bytes: usize,
    pub(crate) memory_denied: bool,
}

/// Generous for real guests (Go's function table holds a few thousand entries) while stopping a
/// `table.grow` bomb long before it costs real memory.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    pub(crate) fn new(limits: &Limits) -> MemoryLimiter {
        let memory_bytes = usize::try_from(limits.effective_memory_bytes()).unwrap_or(usize::MAX);
        MemoryLimiter { memory_bytes, memory_denied: false }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_denied = true;
            return Ok(false);
        }
        Ok(maximum.is_none_or(|max| desired <= max))
    }

    fn table_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS && maximum.is_none_or(|max| desired <= max))
    }

    // A connector is one module: one instance, one memory, a handful of tables.
    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        8
    }
}

/// The epoch deadline check: the engine's ticker advances the epoch every few milliseconds; on
/// each tick the running guest lands here. Past the call's deadline the call stops; otherwise it
/// yields to the async executor so other calls and timers make progress on a busy guest.
pub(crate) fn epoch_deadline_check<T>(
    deadline: Instant,
) -> impl FnMut(StoreContextMut<'_, T>) -> wasmtime::Result<UpdateDeadline> {
    move |_store| {
        if Instant::now() >= deadline {
            return Err(LimitStop(LimitKind::Time).into());
        }
        Ok(UpdateDeadline::Yield(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limiter_records_only_denials_caused_by_our_cap() {
        let limits = Limits { memory_bytes: 1 << 20, ..Limits::default() };
        // (desired, module maximum, allowed, counted as our denial)
        let table = [
            (1 << 19, None, true, false),
            (1 << 20, None, true, false),
            (2 << 20, None, false, true),
            (1 << 19, Some(1 << 18), false, false),
        ];
        for (desired, maximum, allowed, denied) in table {
            let mut limiter = MemoryLimiter::new(&limits);
            assert_eq!(limiter.memory_growing(0, desired, maximum).unwrap(), allowed, "{desired}");
            assert_eq!(limiter.memory_denied, denied, "{desired}");
        }
    }

    #[test]
    fn memory_cap_is_clamped_to_one_gibibyte() {
        for (requested, effective) in [(1 << 20, 1 << 20), (1 << 30, 1 << 30), (8 << 30, 1 << 30)] {
            assert_eq!(Limits { memory_bytes: requested, ..Limits::default() }.effective_memory_bytes(), effective);
        }
    }
}
