//! The connector runtime (SPEC §4.1–4.3) and the only crate that links wasmtime.
//!
//! Connectors are WASI preview-1 command modules. [`Runtime::load`] compiles a module once per
//! content hash (memory cache, then an on-disk cache of compiled artifacts), refuses modules
//! whose imports the runtime or the manifest does not allow, and pre-instantiates it.
//! [`Runtime::call`] runs one operation in a fresh instance: the request arrives on stdin, the
//! module prints one `{"output"}` or `{"error"}` object on stdout, and everything else it does
//! passes through a deny-by-default WASI shim and the `aileron_host` functions, under memory,
//! wall-time, fuel and output limits.
//!
//! Boundary: outbound HTTP is not made and programs are not started here. `aileron_host.http_request`
//! and the spawn functions hand the request to the embedder's [`HostHooks`], which owns the egress
//! and spawn policy, the confinement, credentials and audit.
//!
//! Modules: `runtime` (engine, epoch ticker, load and call), `cache` (compiled-module caches),
//! `imports` (load-time import checks), `hooks` (the types exchanged with the embedder), `wasi`, `host` and `spawn` (one per host interface, each with its
//! `add_to_linker`), `limits`, `outcome` (run ending → result), `context` (per-call store data)
//! and `guest_memory` (bounds-checked guest pointers).
//! `baseline` (feature `baseline`, for aileron-bench only) is the bare-wasmtime run the benchmark
//! compares `Runtime::call` with.

#[cfg(feature = "baseline")]
pub mod baseline;
mod cache;
mod context;
mod guest_memory;
mod hooks;
mod host;
mod imports;
mod limits;
mod outcome;
mod runtime;
mod spawn;
mod wasi;

pub use cache::CacheStats;
pub use hooks::{GuestHttpRequest, GuestLog, GuestSpawn, HostHooks, HostHttpResponse, SpawnOutput};
pub use imports::ImportPolicy;
pub use limits::{Limits, MAX_MEMORY_BYTES};
pub use outcome::{CallOutcome, Instance};
pub use runtime::{CallRequest, LoadedModule, MAX_CONCURRENT_CALLS, Runtime, RuntimeConfig, SLOT_RESERVATION_BYTES};

/// The parsers of the JSON a guest writes (its stdout envelope, its `http_request` argument),
/// reachable for the fuzz targets of `crates/aileron-fuzz`; not API.
#[doc(hidden)]
pub mod guest_json {
    pub use crate::host::{MalformedRequest, parse_request};
    pub use crate::outcome::{Printed, parse_stdout};
}
