//! The runtime: one wasmtime engine with its epoch ticker, the linker holding the WASI shim and
//! the `aileron_host` functions, the module caches, and the per-call driver.
//!
//! Compilation happens once per content hash (`load`, synchronous: embedders call it from a
//! blocking task); every call gets a fresh `Store` and instance from the cached `InstancePre`,
//! so no state survives from one call to the next and concurrent calls share nothing mutable.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aileron_core::{Boundary, ContentHash, Failure};
use anyhow::Context as _;
use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module, ModuleExport, PoolingAllocationConfig,
    Store,
};

use crate::cache::{CacheCounters, CacheEvent, CacheStats, DiskCache, DiskLookup, MemoryCache};
use crate::context::CallContext;
use crate::hooks::HostHooks;
use crate::host;
use crate::imports::{self, ImportPolicy};
use crate::limits::{self, Limits};
use crate::outcome::{self, CallOutcome, Instance, RunEnd, RunRecord};
use crate::spawn::{self, Convention};
use crate::wasi;

/// How often the epoch advances: the granularity of wall-time enforcement and of yielding to
/// the async executor while a guest computes.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Wasm call-stack budget. Go and Rust guests keep their own stacks in linear memory, so this
/// only bounds native recursion; it must stay well below wasmtime's 2 MiB async fiber stack.
const MAX_WASM_STACK: usize = 1 << 20;

/// Calls that may hold an instance at once: the pooling allocator's slots. Further calls wait
/// for a slot (inside their own wall-time limit) instead of failing. A guest keeps its slot while
/// it waits on the network, so this is also how many runs may wait on slow upstreams at once:
/// 1,000 of them fit in 256 MiB (BENCHMARKS.md, issue 49). Each slot reserves (does not commit)
/// [`SLOT_RESERVATION_BYTES`] of address space plus a guard: about 4 TiB for all of them, of the
/// 128 TiB a process has; where less is allowed the pool shrinks (`largest_pool`).
pub const MAX_CONCURRENT_CALLS: usize = 1024;
/// Address space each slot reserves for its linear memory: the whole 4 GiB a 32-bit wasm address
/// can reach (wasmtime's own default), so compiled code checks no bounds on a memory access: an
/// access past what the call may use lands in memory that is not mapped and traps. A call still
/// grows to at most [`limits::MAX_MEMORY_BYTES`]. Reserved, not committed: it costs no memory.
pub const SLOT_RESERVATION_BYTES: u64 = 4 << 30;
/// Bytes of each slot's linear memory and fiber stack kept mapped between calls and reset with
/// `memset` rather than `madvise`: a small guest's whole footprint, so a warm call maps nothing
/// and, in a VM, triggers no TLB-shootdown interrupts. With `PAGEMAP_SCAN` (Linux 6.7+) only the
/// pages the call dirtied are reset, up to this many bytes; without it, the lowest bytes are.
const KEEP_RESIDENT: usize = 4 << 20;
/// The same for each slot's tables. A table is reset after every call; left at wasmtime's
/// default (0) its pages were decommitted each time, so the next call faulted them back in while
/// lazily initializing function references, and every decommit sent a TLB-shootdown IPI to the
/// other core (BENCHMARKS.md, issue 17). A Go guest's function table is a few hundred KiB.
const TABLE_KEEP_RESIDENT: usize = 1 << 20;
/// Warm slots kept for reuse beyond those in use; bounds the resident memory an idle daemon keeps.
const MAX_UNUSED_WARM_SLOTS: u32 = 32;
/// Table elements a module may declare: a Go guest's function table holds every function of
/// the program (tens of thousands in a large one). Reserved per slot at 8 bytes each.
const MAX_TABLE_ELEMENTS: usize = 200_000;

/// The pooling instance allocator: every slot (memory, table, stack, instance) is reserved once
/// at start and reused; without it each call maps and unmaps its memory and stack, which cost a
/// third of the daemon's CPU under load (see BENCHMARKS.md).
fn pooling(slots: usize) -> PoolingAllocationConfig {
    let slots = u32::try_from(slots).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .max_memories_per_module(1)
        .max_tables_per_module(4)
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(limits::MAX_MEMORY_BYTES as usize)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .async_stack_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(TABLE_KEEP_RESIDENT)
        // Reset only what a call dirtied (the kernel reports which pages), not the lowest
        // `KEEP_RESIDENT` bytes whether touched or not: that `memset` was a tenth of the daemon's CPU.
        .pagemap_scan(wasmtime::Enabled::Auto)
        .max_unused_warm_slots(MAX_UNUSED_WARM_SLOTS);
    pool
}

/// `build` with `wanted` slots, else with half as many, and so on down to one: the pool reserves
/// its slots' address space up front, which an address-space limit (`ulimit -v`), a kernel with a
/// 39-bit address space (512 GiB for the whole process) or a tool such as valgrind refuses for
/// 1,024 slots of 4 GiB. Returns what was built and with how many slots; when not even one slot
/// builds, the first attempt's error, with what was tried and a hint.
fn largest_pool<T>(wanted: usize, mut build: impl FnMut(usize) -> anyhow::Result<T>) -> anyhow::Result<(T, usize)> {
    let first = match build(wanted) {
        Ok(built) => return Ok((built, wanted)),
        Err(error) => error,
    };
    let mut slots = wanted / 2;
    while slots >= 1 {
        if let Ok(built) = build(slots) {
            return Ok((built, slots));
        }
        slots /= 2;
    }
    // Every attempt failed, so the cause may be the configuration rather than the address space:
    // the message says what was tried. The hint last, where the command line looks for it.
    Err(anyhow::anyhow!(
        "the engine could not be built even with one call's slot ({} GiB of address space): {first:#}\nhint: if \
         this process's address space is limited (`ulimit -v`), raise the limit",
        SLOT_RESERVATION_BYTES >> 30
    ))
}

/// Configuration of a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Directory of the on-disk compiled-module cache (`AILERON_HOME/store/cache`); `None` keeps
    /// compiled modules in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Calls that may hold an instance at once (pooled slots); `None` = [`MAX_CONCURRENT_CALLS`].
    pub concurrent_calls: Option<usize>,
    /// Bytes of linear memory all running calls may hold together; `None` =
    /// [`limits::GUEST_MEMORY_BUDGET`].
    pub memory_budget: Option<u64>,
    /// Called on the compiling thread right after each compile (not after a cache hit): the
    /// daemon hands the memory the compile freed back to the system there.
    pub after_compile: Option<fn()>,
    /// Compile fuel checks into every module, so a call may set [`Limits::fuel`]. Off by
    /// default: the checks are ~15 % of a guest's own instructions (BENCHMARKS.md, issue 49),
    /// and the daemon sets no fuel budget — its calls are bounded by wall time (SPEC §4.3). On a
    /// runtime without them a call that asks for a fuel budget fails; it is never run unmetered.
    pub fuel_metering: bool,
}

/// One call of a connector operation.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub op: String,
    pub args: serde_json::Value,
    pub limits: Limits,
}

/// What a guest reads on stdin: `{"op", "args"}`, written from the request without copying it.
#[derive(serde::Serialize)]
struct Stdin<'a> {
    op: &'a str,
    args: &'a serde_json::Value,
}

/// A compiled, import-checked and pre-instantiated module.
pub struct LoadedModule {
    hash: ContentHash,
    pre: InstancePre<CallContext>,
    /// The `_start` export, found once: each call takes it from its instance by index, where a
    /// lookup by name hashed the name and searched the module's exports every time.
    start: ModuleExport,
    host_imports: Vec<String>,
}

impl LoadedModule {
    pub fn hash(&self) -> &ContentHash {
        &self.hash
    }

    /// The `aileron_host` functions the module imports.
    pub fn host_imports(&self) -> &[String] {
        &self.host_imports
    }
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule").field("hash", &self.hash).field("host_imports", &self.host_imports).finish()
    }
}

/// The WASM connector runtime. `Send + Sync`; share it in an `Arc`.
pub struct Runtime {
    engine: Engine,
    /// The engine's configuration without the pooling allocator: each compile builds an engine
    /// of its own from it and drops it after (see [`Runtime::compile`]).
    compile_config: Config,
    after_compile: Option<fn()>,
    /// One linker per spawn convention (the accessors' signatures differ); chosen per module.
    linker: Linker<CallContext>,
    single_slot_linker: Linker<CallContext>,
    modules: MemoryCache<LoadedModule>,
    disk: Option<DiskCache>,
    counters: CacheCounters,
    /// One permit per pooled slot: held from instantiation until the call's store is dropped.
    slots: Arc<tokio::sync::Semaphore>,
    slot_count: usize,
    fuel_metering: bool,
    memory_budget: Arc<limits::MemoryBudget>,
    ticker: EpochTicker,
}

impl Runtime {
    /// Builds the engine (epoch interruption, fuel metering when configured, stack budget), links
    /// the host interfaces, prepares the disk cache directory and starts the epoch ticker thread.
    pub fn new(config: RuntimeConfig) -> anyhow::Result<Runtime> {
        let mut wasm_config = Config::new();
        wasm_config.epoch_interruption(true);
        // Part of the disk cache's engine key: artifacts compiled with the other setting are
        // not used (they are compiled again).
        wasm_config.consume_fuel(config.fuel_metering);
        wasm_config.max_wasm_stack(MAX_WASM_STACK);
        // No bounds checks compiled in (see [`SLOT_RESERVATION_BYTES`]): with the 1 GiB of the
        // largest memory a call may have reserved instead, every access was checked, and a Go
        // guest's call ran 16 % slower and compiled 21 % slower (BENCHMARKS.md, issue 49).
        wasm_config.memory_reservation(SLOT_RESERVATION_BYTES);
        let compile_config = wasm_config.clone();
        let wanted = config.concurrent_calls.unwrap_or(MAX_CONCURRENT_CALLS).max(1);
        let (engine, slots) = largest_pool(wanted, |slots| {
            wasm_config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(slots)));
            Engine::new(&wasm_config).map_err(anyhow::Error::from)
        })
        .context("configuring wasmtime")?;

        let link = |convention: Convention| -> anyhow::Result<Linker<CallContext>> {
            let mut linker = Linker::new(&engine);
            wasi::add_to_linker(&mut linker).map_err(anyhow::Error::from).context("linking the WASI shim")?;
            host::add_to_linker(&mut linker).map_err(anyhow::Error::from).context("linking aileron_host")?;
            spawn::add_to_linker(&mut linker, convention)
                .map_err(anyhow::Error::from)
                .context("linking the spawn functions")?;
            Ok(linker)
        };
        let linker = link(Convention::Handles)?;
        let single_slot_linker = link(Convention::SingleSlot)?;

        let disk = match &config.cache_dir {
            Some(dir) => Some(DiskCache::open(dir, &engine)?),
            None => None,
        };
        let ticker = EpochTicker::start(&engine)?;
        Ok(Runtime {
            engine,
            compile_config,
            after_compile: config.after_compile,
            linker,
            single_slot_linker,
            modules: MemoryCache::new(),
            disk,
            counters: CacheCounters::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(slots)),
            slot_count: slots,
            fuel_metering: config.fuel_metering,
            memory_budget: limits::MemoryBudget::new(config.memory_budget.unwrap_or(limits::GUEST_MEMORY_BUDGET)),
            ticker,
        })
    }

    /// Calls that may hold an instance at once: what [`RuntimeConfig::concurrent_calls`] asked
    /// for, or fewer when the process could not reserve the address space for that many slots.
    pub fn concurrent_calls(&self) -> usize {
        self.slot_count
    }

    /// Compiles `wasm` (or takes it from the memory cache, else the disk cache), checks its
    /// imports and exports, and pre-instantiates it. The caller vouches that `hash` is the
    /// content hash of this connector (the store verifies it before every execution).
    ///
    /// Compiling a large guest takes seconds of CPU: call this from a blocking task
    /// (`tokio::task::spawn_blocking`), not directly on an async executor thread.
    pub fn load(&self, hash: &ContentHash, wasm: &[u8], policy: &ImportPolicy) -> Result<Arc<LoadedModule>, Failure> {
        let (loaded, hit) = self.modules.get_or_try_insert(hash, || self.prepare(hash, Some(wasm), Some(policy)))?;
        if hit {
            self.counters.count(CacheEvent::MemoryHit);
            // The cached module is shared by every caller; the policy passed in may differ.
            imports::check_policy(&loaded.host_imports, policy)?;
        }
        Ok(loaded)
    }

    /// The module from the in-memory cache only, policy-checked; `None` when it is not there yet
    /// (then call [`Runtime::load`], which may compile — off the async executor).
    pub fn loaded(&self, hash: &ContentHash, policy: &ImportPolicy) -> Option<Result<Arc<LoadedModule>, Failure>> {
        let loaded = self.modules.get(hash)?;
        self.counters.count(CacheEvent::MemoryHit);
        Some(imports::check_policy(&loaded.host_imports, policy).map(|()| loaded))
    }

    /// Puts `hash`'s compiled artifact from the disk cache into the memory cache, without the
    /// module's bytes: the artifact is bound to the content hash it was compiled from, so it can
    /// be deserialized while the store verifies those bytes (a daemon's warm-up does both at
    /// once). Compiles nothing: `false` when there is no usable artifact (or no disk cache), and
    /// then [`Runtime::load`] compiles from the verified bytes. The manifest's import policy is
    /// not checked here; [`Runtime::load`] and [`Runtime::loaded`] check it on every use.
    /// Blocking (reads and hashes the artifact): call it from a blocking task.
    pub fn preload(&self, hash: &ContentHash) -> bool {
        self.disk.is_some() && self.modules.get_or_try_insert(hash, || self.prepare(hash, None, None)).is_ok()
    }

    /// Drops `hash`'s module from the memory cache (its bytes in the store no longer verify); a
    /// later load takes it from disk or compiles it again.
    pub fn forget(&self, hash: &ContentHash) {
        self.modules.remove(hash);
    }

    /// Deserializes from the disk cache, else compiles `wasm`, then checks. A refused module is
    /// not kept in memory (it is recompiled, or taken from disk, if it is loaded again). Without
    /// `wasm` a disk miss is an error; without `policy` the manifest's grant is not checked.
    fn prepare(
        &self,
        hash: &ContentHash,
        wasm: Option<&[u8]>,
        policy: Option<&ImportPolicy>,
    ) -> Result<LoadedModule, Failure> {
        let cached = match &self.disk {
            Some(disk) => match disk.load(&self.engine, hash) {
                DiskLookup::Hit(module) => {
                    self.counters.count(CacheEvent::DiskHit);
                    Some(module)
                }
                DiskLookup::Rejected => {
                    self.counters.count(CacheEvent::DiskReject);
                    None
                }
                DiskLookup::Miss => None,
            },
            None => None,
        };
        // The artifact of a compile made now, for the disk cache.
        let (module, compiled) = match cached {
            Some(module) => (module, None),
            None => {
                let Some(wasm) = wasm else {
                    return Err(Failure::runtime_error(
                        Boundary::Runtime,
                        format!("no compiled artifact of {hash} on disk"),
                    ));
                };
                self.counters.count(CacheEvent::Compile);
                let (module, artifact) = self.compile(wasm)?;
                (module, Some(artifact))
            }
        };
        // The copy-on-write image of the module's initial memory (a memfd holding its data
        // segments: megabytes for a Go guest) is made now, on this blocking thread, instead of
        // by the first instantiation, which is a call's time.
        module.initialize_copy_on_write_image().map_err(|e| {
            Failure::runtime_error(Boundary::Sandbox, format!("preparing the module's initial memory: {e:#}"))
        })?;
        let host_imports = imports::check_module(&module)?;
        if let (Some(artifact), Some(disk)) = (compiled, &self.disk) {
            // Stored before the policy check: a module refused for its manifest is refused again
            // on the next attempt from the disk artifact instead of being recompiled each time.
            // A cache that cannot be written costs a recompile after restart, nothing more.
            if disk.store(hash, artifact).is_err() {
                self.counters.count(CacheEvent::DiskWriteFailure);
            }
        }
        if let Some(policy) = policy {
            imports::check_policy(&host_imports, policy)?;
        }
        let linker = match Convention::of(&module)? {
            Convention::Handles => &self.linker,
            Convention::SingleSlot => &self.single_slot_linker,
        };
        let pre = linker.instantiate_pre(&module).map_err(|e| {
            Failure::runtime_error(Boundary::Sandbox, format!("the module's imports do not match the runtime: {e:#}"))
        })?;
        // The import check refused a module without a `_start` function.
        let start = module.get_export_index("_start").ok_or_else(|| {
            Failure::runtime_error(Boundary::Sandbox, "the module exports no `_start` function".to_string())
        })?;
        Ok(LoadedModule { hash: hash.clone(), pre, start, host_imports })
    }

    /// Compiles `wasm` on an engine of its own, configured as the runtime's (but for the pooling
    /// allocator, which compiled code does not depend on), and loads the result into the runtime's
    /// engine. An engine keeps Cranelift's compilation contexts for its next compile — megabytes
    /// held for the daemon's life after its first install (BENCHMARKS.md, issue 49, "Start and
    /// memory at scale"): dropped with the compiling engine, they are returned at once. Returns
    /// the module and its artifact (`Module::serialize`'s bytes, for the disk cache).
    fn compile(&self, wasm: &[u8]) -> Result<(Module, Vec<u8>), Failure> {
        let does_not_compile = |e: wasmtime::Error| {
            Failure::runtime_error(Boundary::Sandbox, format!("the connector module does not compile: {e:#}"))
        };
        let compiled = Engine::new(&self.compile_config)
            .and_then(|engine| engine.precompile_module(wasm))
            .map_err(does_not_compile)?;
        // SAFETY: `Module::deserialize` runs the machine code it is given, so it must only see
        // what `precompile_module` of a compatible engine produced: these bytes are that, made
        // just above in this process from the same configuration, and never left its memory.
        // wasmtime checks the artifact's compatibility with this engine besides.
        let module = unsafe { Module::deserialize(&self.engine, &compiled) }.map_err(does_not_compile);
        if let Some(after_compile) = self.after_compile {
            after_compile();
        }
        Ok((module?, compiled))
    }

    /// Runs one operation: a fresh instance, stdin = `{"op", "args"}`, `_start`, then the
    /// outcome mapping of `outcome.rs`. Never panics on guest behaviour. Must be polled inside a
    /// tokio runtime with the time driver enabled (sleeps and the wall-time limit use it).
    pub async fn call(&self, module: &LoadedModule, request: CallRequest, hooks: Arc<dyn HostHooks>) -> CallOutcome {
        self.call_holding(module, &request, hooks).await.0
    }

    /// [`Runtime::call`], with the finished call's instance handed back instead of released:
    /// the caller chooses when its slot is reset and comes free (see [`Instance`]). Borrows the
    /// request, so a caller that may retry keeps it for the next attempt.
    pub async fn call_holding(
        &self,
        module: &LoadedModule,
        request: &CallRequest,
        hooks: Arc<dyn HostHooks>,
    ) -> (CallOutcome, Instance) {
        let started = Instant::now();
        if !Engine::same(module.pre.module().engine(), &self.engine) {
            let failure = Failure::runtime_error(
                Boundary::Runtime,
                "the module was loaded by a different aileron runtime than the one asked to run it",
            );
            return CallOutcome::unstarted(Err(failure), started);
        }
        if request.limits.fuel.is_some() && !self.fuel_metering {
            // Run unmetered, the budget would be silently ignored.
            let failure = Failure::runtime_error(
                Boundary::Runtime,
                "the call sets a fuel budget, but this runtime compiles no fuel checks (RuntimeConfig::fuel_metering)",
            );
            return CallOutcome::unstarted(Err(failure), started);
        }
        let limits = request.limits.clone();
        // An unrepresentable deadline (absurd wall time) is capped at a day.
        let deadline = started.checked_add(limits.wall_time).unwrap_or(started + Duration::from_secs(86_400));
        // Room for a typical call's arguments at once (`to_vec` starts at 128 bytes and doubles).
        let mut stdin = Vec::with_capacity(1024);
        serde_json::to_writer(&mut stdin, &Stdin { op: &request.op, args: &request.args })
            .expect("a JSON value always serializes");

        // A pooled slot, waited for within the call's own wall time.
        let slot = match tokio::time::timeout_at(deadline.into(), self.slots.clone().acquire_owned()).await {
            Ok(Ok(permit)) => permit,
            _ => {
                let failure = Failure::resource_limit(
                    limits::LimitKind::Time.as_str(),
                    format!(
                        "no instance slot came free within the call's {} ms of wall time \
                         ({} calls were running)",
                        limits.wall_time.as_millis(),
                        self.slot_count
                    ),
                );
                return CallOutcome::unstarted(Err(failure), started);
            }
        };
        // The epoch advances only while calls run, and a tick after (see [`EpochTicker`]).
        let running = self.ticker.running();
        let mut store =
            Store::new(&self.engine, CallContext::new(stdin, &limits, self.memory_budget.clone(), hooks, deadline));
        store.limiter(|context| &mut context.limiter);
        if self.fuel_metering {
            // A call without a budget gets one it cannot reach.
            store.set_fuel(limits.fuel.unwrap_or(u64::MAX)).expect("fuel metering is enabled on the engine");
        }
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(limits::epoch_deadline_check(deadline));

        // The epoch callback stops a computing guest; this timeout stops one waiting in an
        // async host call (sleep, HTTP). Either way the store is ours again afterwards.
        let end = match tokio::time::timeout_at(deadline.into(), run_start(&mut store, module)).await {
            Ok(end) => end,
            Err(_elapsed) => RunEnd::Stopped(limits::LimitKind::Time),
        };

        drop(running);
        let context = store.data_mut();
        let result = outcome::decide(RunRecord {
            end,
            stdout: &context.stdout,
            stderr_tail: outcome::stderr_tail(&context.stderr),
            memory_denied: context.limiter.memory_denied,
            memory_budget_denied: context.limiter.budget_denied,
            host_failure: context.host_failure.take(),
            limits: &limits,
        });
        let logs = std::mem::take(&mut context.logs).into_lines();
        // The store goes back to the pool (its instance, memory and slot) when the caller drops
        // the `Instance`, not here.
        (CallOutcome { result, logs, elapsed: started.elapsed() }, Instance::held(store, slot))
    }

    /// Size of `hash`'s compiled artifact in the on-disk cache, if there is one.
    pub fn artifact_bytes(&self, hash: &ContentHash) -> Option<u64> {
        let disk = self.disk.as_ref()?;
        std::fs::metadata(disk.path(hash)).ok().map(|metadata| metadata.len())
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.counters.snapshot()
    }

    /// How many times the epoch has advanced: only while calls run (tests and diagnostics).
    pub fn epoch_ticks(&self) -> u64 {
        self.ticker.shared.ticks.load(Ordering::Relaxed)
    }
}

async fn run_start(store: &mut Store<CallContext>, module: &LoadedModule) -> RunEnd {
    let run = async {
        let instance = module.pre.instantiate_async(&mut *store).await?;
        let start = instance
            .get_module_export(&mut *store, &module.start)
            .and_then(wasmtime::Extern::into_func)
            .ok_or_else(|| wasmtime::format_err!("the instance has no `_start` function"))?
            .typed::<(), ()>(&*store)?;
        start.call_async(&mut *store, ()).await
    };
    match run.await {
        Ok(()) => RunEnd::Finished,
        Err(error) => RunEnd::from_error(error),
    }
}

/// The thread that advances the engine's epoch every [`EPOCH_TICK`] while calls run, and
/// sleeps once a whole tick has passed with none started: an idle daemon (most of a developer's
/// day) is woken by nothing, where it used to be woken 200 times a second, and a loaded one only
/// by its tick. Stopped and joined when the runtime is dropped.
///
/// A call's epoch deadline is set when it starts, one tick ahead of the current epoch, after
/// [`EpochTicker::running`] has woken the thread: the first tick comes at most one
/// [`EPOCH_TICK`] (and a thread wake-up) later, as it did when the thread never slept.
struct EpochTicker {
    shared: Arc<TickerState>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct TickerState {
    stop: AtomicBool,
    /// Calls between [`EpochTicker::running`] and the drop of its guard.
    running: AtomicUsize,
    /// A call started since the thread last looked: it ticks once more before it parks.
    started: AtomicBool,
    /// Epoch increments so far (tests and diagnostics).
    ticks: AtomicU64,
    /// Returns from parking so far (tests and diagnostics).
    wakes: AtomicU64,
}

/// A running call, for the ticker; dropping it ends the call.
struct RunningCall<'a>(&'a TickerState);

impl Drop for RunningCall<'_> {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EpochTicker {
    fn start(engine: &Engine) -> anyhow::Result<EpochTicker> {
        let shared = Arc::new(TickerState::default());
        let engine = engine.weak();
        let thread = std::thread::Builder::new()
            .name("aileron-epoch".into())
            .spawn({
                let shared = shared.clone();
                move || {
                    while !shared.stop.load(Ordering::SeqCst) {
                        // Parked only after a whole tick in which no call started: calls far
                        // shorter than a tick would otherwise wake the thread, which finds the
                        // call over and parks again, to be woken by the next (a futex wake and
                        // two context switches each time: ~620 switches a second under (b)'s
                        // load, ~200 now, its ticks; BENCHMARKS.md, issue 49).
                        let started = shared.started.swap(false, Ordering::SeqCst);
                        if !started && shared.running.load(Ordering::SeqCst) == 0 {
                            // `running` unparks after counting itself in, so a call that starts
                            // between the load and the park makes the park return at once.
                            std::thread::park();
                            shared.wakes.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        std::thread::sleep(EPOCH_TICK);
                        match engine.upgrade() {
                            Some(engine) => engine.increment_epoch(),
                            None => break,
                        }
                        shared.ticks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .context("starting the epoch ticker thread")?;
        Ok(EpochTicker { shared, thread: Some(thread) })
    }

    /// Counts a call in for as long as the guard lives, waking the thread for the first one.
    fn running(&self) -> RunningCall<'_> {
        self.shared.started.store(true, Ordering::SeqCst);
        if self.shared.running.fetch_add(1, Ordering::SeqCst) == 0
            && let Some(thread) = &self.thread
        {
            thread.thread().unpark();
        }
        RunningCall(&self.shared)
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls far shorter than a tick, one after another, keep the epoch's thread ticking instead
    /// of waking it again and again (it used to find the call already over, park and be woken by
    /// the next: a futex wake and two context switches each time); once they stop, it parks.
    #[test]
    fn short_calls_one_after_another_do_not_each_wake_the_epoch_thread() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let ticker = EpochTicker::start(&engine).unwrap();
        const CALLS: u64 = 400;
        for _ in 0..CALLS {
            drop(ticker.running());
            std::thread::sleep(Duration::from_micros(300));
        }
        let wakes = ticker.shared.wakes.load(Ordering::Relaxed);
        assert!(wakes < CALLS / 8, "{CALLS} short calls woke the epoch's thread {wakes} times");
        // A tick more at most, then it parks and the epoch stands still.
        std::thread::sleep(EPOCH_TICK * 3);
        let ticks = ticker.shared.ticks.load(Ordering::Relaxed);
        std::thread::sleep(EPOCH_TICK * 4);
        assert_eq!(ticker.shared.ticks.load(Ordering::Relaxed), ticks, "the epoch kept advancing after the calls");
    }

    #[test]
    fn the_pool_shrinks_by_halves_to_what_the_address_space_allows() {
        let fits_at_most = |limit: usize| {
            let mut tried = Vec::new();
            let built = largest_pool(1024, |slots| {
                tried.push(slots);
                if slots <= limit { Ok(slots) } else { anyhow::bail!("cannot reserve {slots} slots") }
            });
            (built.map_err(|error| format!("{error:#}")), tried)
        };
        assert_eq!(fits_at_most(2048), (Ok((1024, 1024)), vec![1024]));
        assert_eq!(fits_at_most(100), (Ok((64, 64)), vec![1024, 512, 256, 128, 64]));
        assert_eq!(fits_at_most(1).0, Ok((1, 1)));
        let (refused, tried) = fits_at_most(0);
        assert_eq!(tried, vec![1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1]);
        let refused = refused.unwrap_err();
        assert!(refused.contains("could not be built even with one call's slot (4 GiB of address space)"), "{refused}");
        assert!(refused.ends_with("hint: if this process's address space is limited (`ulimit -v`), raise the limit"));
        assert!(refused.contains("cannot reserve 1024 slots"), "the first attempt's error: {refused}");
    }
}
