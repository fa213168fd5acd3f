//! The bare-wasmtime baseline that `aileron-bench` measures [`Runtime::call`] against: the least
//! wasmtime needs to run a WASI preview-1 command module that reads stdin and writes stdout.
//!
//! What one [`BareCommand::run`] includes, and nothing else:
//! - a `Store` on an engine with wasmtime's default configuration (no fuel metering, no epoch
//!   interruption, default stack budget), holding the same per-call data as the runtime's because
//!   the WASI shim is written against it (stdin bytes, captured stdout and stderr);
//! - `Linker::instantiate_async` of the already compiled module: import resolution by name on
//!   every call, no `InstancePre`;
//! - `_start` through `call_async`, and the stdout bytes handed back as they are.
//!
//! Left out on purpose: the compiled-module caches, `InstancePre`, the memory limiter, fuel, the
//! wall-time deadline and its timer, the `aileron_host` functions (an import of one traps if
//! called), request serialization and output parsing. The async path and the fiber it runs on stay:
//! the shim's `poll_oneoff` is an async host function, and wasmtime requires async instantiation
//! and calls from a linker that holds one. The shim's own per-write stdout cap check stays too.
//!
//! [`Runtime::call`]: crate::Runtime::call

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aileron_core::{Boundary, Failure};
use anyhow::Context as _;
use wasmtime::{Engine, Linker, Module, Store};

use crate::context::CallContext;
use crate::hooks::{GuestHttpRequest, HostHooks, HostHttpResponse};
use crate::limits::Limits;
use crate::wasi::{self, GuestExit};

/// Host hooks for calls that must not reach the network: every request is denied. The benchmark's
/// guests never make one; the hooks exist because a call needs some.
pub struct NoEgress;

impl HostHooks for NoEgress {
    fn send_request(
        &self,
        request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>> {
        let failure =
            Failure::capability_denied(Boundary::Sandbox, format!("no egress in this context: {}", request.url));
        Box::pin(std::future::ready(Err(failure)))
    }
}

/// Which of wasmtime's compilers a [`BareCommand`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiler {
    /// The optimising compiler the runtime uses.
    Cranelift,
    /// wasmtime's baseline compiler: one pass, no optimisation (the `winch` feature, enabled by
    /// `baseline` only).
    Winch,
}

/// How [`BareCommand::compile_with`] builds its engine and linker.
pub struct BareOptions {
    pub compiler: Compiler,
    /// Compile in the checks the runtime's engine compiles in (epoch interruption, its stack
    /// budget; fuel metering is off there too), so that two compilers are compared on the same
    /// code.
    pub metered: bool,
    /// Hooks behind the `aileron_host` functions, which are linked when given (a guest that
    /// makes an `http_request` then runs as under the runtime); without, their imports trap.
    pub host: Option<Arc<dyn HostHooks>>,
}

/// A module compiled on a default engine with the WASI shim linked, run without the runtime.
pub struct BareCommand {
    module: Module,
    linker: Linker<CallContext>,
    hooks: Arc<dyn HostHooks>,
    metered: bool,
}

impl BareCommand {
    /// Compiles `wasm` (once; not part of what [`BareCommand::run`] costs) with Cranelift on an
    /// engine with wasmtime's default configuration, `aileron_host` imports trapping.
    pub fn compile(wasm: &[u8]) -> anyhow::Result<BareCommand> {
        let options = BareOptions { compiler: Compiler::Cranelift, metered: false, host: None };
        BareCommand::compile_with(wasm, options).map(|(command, _)| command)
    }

    /// Compiles `wasm` as `options` say; returns the command and how long compiling took.
    pub fn compile_with(wasm: &[u8], options: BareOptions) -> anyhow::Result<(BareCommand, Duration)> {
        let mut config = wasmtime::Config::new();
        if options.compiler == Compiler::Winch {
            config.strategy(wasmtime::Strategy::Winch);
        }
        if options.metered {
            config.epoch_interruption(true).max_wasm_stack(1 << 20);
        }
        let engine = Engine::new(&config).map_err(anyhow::Error::from).context("configuring the engine")?;
        let started = Instant::now();
        let module = Module::new(&engine, wasm).map_err(anyhow::Error::from).context("compiling the module")?;
        let compile_time = started.elapsed();
        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker).map_err(anyhow::Error::from).context("linking the WASI shim")?;
        if options.host.is_some() {
            crate::host::add_to_linker(&mut linker).map_err(anyhow::Error::from).context("linking aileron_host")?;
        }
        // Guests built with the connector SDK may import `aileron_host` functions they never call.
        linker
            .define_unknown_imports_as_traps(&module)
            .map_err(anyhow::Error::from)
            .context("stubbing the module's other imports")?;
        let hooks = options.host.unwrap_or_else(|| Arc::new(NoEgress));
        Ok((BareCommand { module, linker, hooks, metered: options.metered }, compile_time))
    }

    /// Instantiates the module, feeds `stdin`, runs `_start` and returns what it wrote to stdout.
    /// `proc_exit(0)` counts as success; any other exit or trap is an error.
    pub async fn run(&self, stdin: Vec<u8>) -> anyhow::Result<Vec<u8>> {
        // The shim reads the deadline only in `poll_oneoff`, which is not timed out here.
        let deadline = Instant::now() + Duration::from_secs(86_400);
        let context = CallContext::new(
            stdin,
            &Limits::default(),
            crate::limits::MemoryBudget::new(u64::MAX),
            self.hooks.clone(),
            deadline,
        );
        let mut store = Store::new(self.module.engine(), context);
        if self.metered {
            // A deadline no call reaches: the checks run, they never stop the guest.
            store.set_epoch_deadline(1 << 40);
        }
        let instance = self.linker.instantiate_async(&mut store, &self.module).await.map_err(anyhow::Error::from)?;
        let start = instance.get_typed_func::<(), ()>(&mut store, "_start").map_err(anyhow::Error::from)?;
        match start.call_async(&mut store, ()).await {
            Ok(()) => {}
            Err(error) if error.downcast_ref::<GuestExit>().is_some_and(|exit| exit.0 == 0) => {}
            Err(error) => return Err(anyhow::Error::from(error).context("running _start")),
        }
        Ok(store.into_data().stdout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command module that copies up to 64 KiB of stdin to stdout, then exits with `code`
    /// (through `proc_exit` unless it is 0, when `_start` just returns).
    fn copier(code: i32) -> Vec<u8> {
        let exit = if code == 0 { String::new() } else { format!("(call $proc_exit (i32.const {code}))") };
        wat::parse_str(format!(
            r#"(module
                 (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
                 (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
                 (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
                 (import "aileron_host" "log" (func $log (param i32 i32 i32 i32)))
                 (memory (export "memory") 2)
                 (func (export "_start")
                   ;; iovec at 0: buffer 64, length 65536; bytes read at 16
                   (i32.store (i32.const 0) (i32.const 64))
                   (i32.store (i32.const 4) (i32.const 65536))
                   (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 16)))
                   (i32.store (i32.const 4) (i32.load (i32.const 16)))
                   (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 16)))
                   {exit}))"#
        ))
        .expect("valid WAT")
    }

    #[tokio::test]
    async fn runs_a_command_module_from_stdin_to_stdout() {
        // (exit code, stdin, stdout or error)
        let table: [(i32, &[u8], Result<&[u8], &str>); 4] = [
            (0, b"{\"op\":\"echo\"}", Ok(b"{\"op\":\"echo\"}")),
            (0, b"", Ok(b"")),
            (0, &[7u8; 1000], Ok(&[7u8; 1000])),
            (3, b"partial", Err("guest exited with code 3")),
        ];
        for (code, stdin, expected) in table {
            let command = BareCommand::compile(&copier(code)).unwrap();
            let result = command.run(stdin.to_vec()).await;
            match (result, expected) {
                (Ok(stdout), Ok(expected)) => assert_eq!(stdout, expected, "exit {code}"),
                (Err(error), Err(expected)) => {
                    assert!(format!("{error:#}").contains(expected), "exit {code}: {error:#}")
                }
                (result, expected) => panic!("exit {code}: got {result:?}, expected {expected:?}"),
            }
        }
    }

    #[tokio::test]
    async fn egress_is_always_denied() {
        let request = GuestHttpRequest {
            method: "GET".into(),
            url: "https://example.com/".into(),
            headers: Vec::new(),
            body: None,
            credential: None,
        };
        let failure = NoEgress.send_request(request).await.unwrap_err();
        assert_eq!(failure.class, aileron_core::FailureClass::CapabilityDenied);
        assert!(failure.message.contains("https://example.com/"), "{}", failure.message);
    }
}
