//! The sandbox as the rest of the crate holds it: `Services::sandbox`. It loads, compiles and
//! reports on connector modules for anyone, but the one thing that runs a guest — `Runtime::call`
//! — is reachable only from the runner (`runtime` is `pub(super)`), so every action reaches a
//! guest through `run_action` (SPEC §0 invariant 1), enforced by the compiler rather than a grep.

use std::sync::Arc;

use aileron_core::{ContentHash, Failure};
use aileron_sandbox::{CacheStats, ImportPolicy, LoadedModule, Runtime, RuntimeConfig};

/// Outside `runner/`, running a guest does not compile:
///
/// ```compile_fail,E0624
/// fn a_second_chokepoint(services: &aileron::services::Services) {
///     let _ = services.sandbox.runtime();
/// }
/// ```
///
/// while loading and reporting do:
///
/// ```
/// fn warm(services: &aileron::services::Services) -> aileron_sandbox::CacheStats {
///     services.sandbox.cache_stats()
/// }
/// ```
pub struct Sandbox {
    runtime: Arc<Runtime>,
}

impl Sandbox {
    /// The daemon's wasmtime runtime, its compiled modules cached on disk under `cache_dir`.
    pub fn open(cache_dir: std::path::PathBuf) -> anyhow::Result<Sandbox> {
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache_dir),
            after_compile: Some(crate::platform::process::return_compile_memory),
            ..RuntimeConfig::default()
        })?;
        let slots = runtime.concurrent_calls();
        if slots < aileron_sandbox::MAX_CONCURRENT_CALLS {
            log_line!(
                "aileron daemon: warning: at most {slots} connector calls can run at once, not {}: this process may \
                 not reserve the address space for more (each call's slot reserves {} GiB); further calls wait for a \
                 free slot\nhint: raise the address-space limit (`ulimit -v unlimited`) before starting the daemon",
                aileron_sandbox::MAX_CONCURRENT_CALLS,
                aileron_sandbox::SLOT_RESERVATION_BYTES >> 30
            );
        }
        Ok(Sandbox { runtime: Arc::new(runtime) })
    }

    /// The runtime itself, for the runner's steps.
    pub(super) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// Compiles (or reads from the caches) a module; runs nothing.
    pub fn load(&self, hash: &ContentHash, wasm: &[u8], policy: &ImportPolicy) -> Result<Arc<LoadedModule>, Failure> {
        self.runtime.load(hash, wasm, policy)
    }

    /// The module from the memory cache, if it is there.
    pub fn loaded(&self, hash: &ContentHash, policy: &ImportPolicy) -> Option<Result<Arc<LoadedModule>, Failure>> {
        self.runtime.loaded(hash, policy)
    }

    pub fn artifact_bytes(&self, hash: &ContentHash) -> Option<u64> {
        self.runtime.artifact_bytes(hash)
    }

    pub fn cache_stats(&self) -> CacheStats {
        self.runtime.cache_stats()
    }
}
