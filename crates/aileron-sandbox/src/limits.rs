//! Per-call resource limits (SPEC §4.3) and the ways a call is stopped when it exceeds one.
//!
//! Memory is capped by a `ResourceLimiter` that also remembers whether it ever refused a grow, so
//! the trap or abort that usually follows is reported as `resource_limit_exceeded` (memory)
//! rather than as an anonymous crash. Wall time is enforced twice: by the epoch deadline
//! callback while wasm code runs, and by a tokio timeout around the whole call for time spent
//! inside asynchronous host calls (sleeping, HTTP). Fuel is optional.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, StoreContextMut, UpdateDeadline};

/// Largest linear memory a call may ever ask for (SPEC §4.3).
pub const MAX_MEMORY_BYTES: u64 = 1 << 30;

/// Linear memory all the calls running at once may hold together, under each call's own cap.
/// Up to [`crate::runtime::MAX_CONCURRENT_CALLS`] calls run at once (a guest waiting on the
/// network keeps its memory): at the default 64 MiB cap they could hold 64 GiB, so a burst of
/// runs of a memory-hungry connector could exhaust the machine. 8 GiB is where the 128 slots of
/// the pool before issue 49 left the worst case; a typical guest holds well under a MiB.
pub const GUEST_MEMORY_BUDGET: u64 = 8 << 30;

/// The bytes of linear memory the running calls hold, against [`GUEST_MEMORY_BUDGET`]: a grow
/// that would pass it is refused like one past the call's own cap.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    held: AtomicUsize,
    limit: usize,
}

impl MemoryBudget {
    pub(crate) fn new(limit: u64) -> Arc<MemoryBudget> {
        Arc::new(MemoryBudget { held: AtomicUsize::new(0), limit: usize::try_from(limit).unwrap_or(usize::MAX) })
    }

    fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::SeqCst);
    }
}

/// Per-call limits. `Default` gives the SPEC defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory cap in bytes (default 64 MiB); values above 1 GiB are clamped to 1 GiB.
    pub memory_bytes: u64,
    /// Wall-time limit of the whole call, including time spent in host calls (default 30 s).
    pub wall_time: Duration,
    /// Optional fuel budget (roughly one unit per wasm instruction); `None` = unlimited. Needs a
    /// runtime with [`crate::RuntimeConfig::fuel_metering`]; on one without, the call fails.
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
/// cap or of the runtime's [`MemoryBudget`] (a grow refused only by the module's own declared
/// maximum is not our limit). What the call holds goes back to the budget when its store drops.
pub(crate) struct MemoryLimiter {
    memory_bytes: usize,
    pub(crate) memory_denied: bool,
    /// The budget's limit, when it (not the call's cap) refused a grow.
    pub(crate) budget_denied: Option<usize>,
    budget: Arc<MemoryBudget>,
    taken: usize,
}

/// Generous for real guests (Go's function table holds a few thousand entries) while stopping a
/// `table.grow` bomb long before it costs real memory.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl MemoryLimiter {
    pub(crate) fn new(limits: &Limits, budget: Arc<MemoryBudget>) -> MemoryLimiter {
        let memory_bytes = usize::try_from(limits.effective_memory_bytes()).unwrap_or(usize::MAX);
        MemoryLimiter { memory_bytes, memory_denied: false, budget_denied: None, budget, taken: 0 }
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.budget.give_back(self.taken);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_denied = true;
            return Ok(false);
        }
        if maximum.is_some_and(|max| desired > max) {
            return Ok(false);
        }
        if !self.budget.take(desired.saturating_sub(self.taken)) {
            self.memory_denied = true;
            self.budget_denied = Some(self.budget.limit);
            return Ok(false);
        }
        self.taken = self.taken.max(desired);
        Ok(true)
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
            let mut limiter = MemoryLimiter::new(&limits, MemoryBudget::new(GUEST_MEMORY_BUDGET));
            assert_eq!(limiter.memory_growing(0, desired, maximum).unwrap(), allowed, "{desired}");
            assert_eq!(limiter.memory_denied, denied, "{desired}");
        }
    }

    /// Calls share the budget: a grow that would pass it is refused (and said to be the
    /// budget's), and what a call held comes back when its limiter (its store) drops.
    #[test]
    fn the_memory_budget_is_shared_and_given_back() {
        let limits = Limits { memory_bytes: 4 << 20, ..Limits::default() };
        let budget = MemoryBudget::new(5 << 20);
        let mut first = MemoryLimiter::new(&limits, budget.clone());
        assert!(first.memory_growing(0, 2 << 20, None).unwrap());
        assert!(first.memory_growing(2 << 20, 3 << 20, None).unwrap(), "a grow takes only what is new");
        let mut second = MemoryLimiter::new(&limits, budget.clone());
        assert!(!second.memory_growing(0, 3 << 20, None).unwrap());
        assert_eq!((second.memory_denied, second.budget_denied), (true, Some(5 << 20)));
        assert!(second.memory_growing(0, 2 << 20, None).unwrap(), "what is left may still be taken");
        drop(first);
        let mut third = MemoryLimiter::new(&limits, budget.clone());
        assert!(third.memory_growing(0, 3 << 20, None).unwrap(), "the first call's 3 MiB came back");
        drop((second, third));
        assert_eq!(budget.held.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn memory_cap_is_clamped_to_one_gibibyte() {
        for (requested, effective) in [(1 << 20, 1 << 20), (1 << 30, 1 << 30), (8 << 30, 1 << 30)] {
            assert_eq!(Limits { memory_bytes: requested, ..Limits::default() }.effective_memory_bytes(), effective);
        }
    }
}
