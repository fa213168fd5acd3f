//! Test guests and the harness around them: a small builder that writes WAT command modules, a
//! runtime shared by every test (its memory cache compiles each distinct guest once), a fake
//! egress implementation of `HostHooks`, and compact summaries of outcomes for table tests.

use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use aileron_core::{ContentHash, Failure};
use aileron_sandbox::{
    CallOutcome, CallRequest, GuestHttpRequest, GuestSpawn, HostHooks, HostHttpResponse, ImportPolicy, Limits,
    LoadedModule, Runtime, RuntimeConfig, SpawnOutput,
};
use serde_json::{Value, json};

/// The runtime shared by all tests that do not exercise the disk cache.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new(RuntimeConfig::default()).expect("runtime starts"))
}

/// Builds a WASI command module. Memory layout: bytes 0..256 are scratch for the helpers
/// (iovec at 0, result slots at 8.., decimal digits at 160..200), 256..1024 for tests' own
/// structures, data segments from 4096, and 16384.. as a free buffer.
pub struct Wat {
    imports: Vec<String>,
    memory: String,
    locals: Vec<String>,
    body: Vec<String>,
    items: Vec<String>,
    data: Vec<String>,
    next_data: u32,
}

/// Escapes bytes for a WAT string literal.
fn escape(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            b'"' | b'\\' => format!("\\{}", b as char),
            0x20..=0x7e => (b as char).to_string(),
            _ => format!("\\{b:02x}"),
        })
        .collect()
}

const HELPERS: &str = r#"
  (func $write (param $fd i32) (param $ptr i32) (param $len i32)
    (i32.store (i32.const 0) (local.get $ptr))
    (i32.store (i32.const 4) (local.get $len))
    (drop (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))))
  ;; Formats a signed decimal ending at byte 200; returns where it starts.
  (func $format_int (param $v i32) (result i32)
    (local $p i32) (local $neg i32) (local $u i32)
    (local.set $p (i32.const 200))
    (local.set $neg (i32.lt_s (local.get $v) (i32.const 0)))
    (local.set $u (if (result i32) (local.get $neg)
      (then (i32.sub (i32.const 0) (local.get $v))) (else (local.get $v))))
    (loop $digits
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $u) (i32.const 10))))
      (local.set $u (i32.div_u (local.get $u) (i32.const 10)))
      (br_if $digits (local.get $u)))
    (if (local.get $neg) (then
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.const 45))))
    (local.get $p))
  (func $write_int (param $fd i32) (param $v i32)
    (local $p i32)
    (local.set $p (call $format_int (local.get $v)))
    (call $write (local.get $fd) (local.get $p) (i32.sub (i32.const 200) (local.get $p))))
"#;

impl Wat {
    pub fn new() -> Wat {
        Wat {
            imports: vec![
                r#"(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))"#
                    .into(),
                r#"(import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))"#.into(),
            ],
            memory: r#"(memory (export "memory") 1)"#.into(),
            locals: Vec::new(),
            body: Vec::new(),
            items: Vec::new(),
            data: Vec::new(),
            next_data: 4096,
        }
    }

    /// Adds a raw import line.
    pub fn import(mut self, import: &str) -> Wat {
        self.imports.push(import.into());
        self
    }

    /// Imports an `aileron_host` function under `$name`.
    pub fn host(self, name: &str, params: &str, result: &str) -> Wat {
        let result = if result.is_empty() { String::new() } else { format!("(result {result})") };
        let params = if params.is_empty() { String::new() } else { format!("(param {params})") };
        self.import(&format!(r#"(import "aileron_host" "{name}" (func ${name} {params} {result}))"#))
    }

    /// Imports a WASI function under `$name`.
    pub fn wasi(self, name: &str, params: &str, result: &str) -> Wat {
        let result = if result.is_empty() { String::new() } else { format!("(result {result})") };
        let params = if params.is_empty() { String::new() } else { format!("(param {params})") };
        self.import(&format!(r#"(import "wasi_snapshot_preview1" "{name}" (func ${name} {params} {result}))"#))
    }

    pub fn memory(mut self, memory: &str) -> Wat {
        self.memory = memory.into();
        self
    }

    pub fn local(mut self, local: &str) -> Wat {
        self.locals.push(format!("(local {local} i32)"));
        self
    }

    /// Places `bytes` in a data segment; returns the builder and (pointer, length).
    pub fn bytes(mut self, bytes: &[u8]) -> (Wat, u32, u32) {
        let at = self.next_data;
        let len = bytes.len() as u32;
        self.data.push(format!(r#"(data (i32.const {at}) "{}")"#, escape(bytes)));
        self.next_data = (at + len + 8) & !7;
        (self, at, len)
    }

    /// Appends instructions to `_start`.
    pub fn run(mut self, instructions: &str) -> Wat {
        self.body.push(instructions.into());
        self
    }

    /// Writes `text` to `fd` (1 = stdout, 2 = stderr).
    pub fn write(self, fd: u32, text: &str) -> Wat {
        let (wat, at, len) = self.bytes(text.as_bytes());
        wat.run(&format!("(call $write (i32.const {fd}) (i32.const {at}) (i32.const {len}))"))
    }

    /// Writes the decimal value of an i32 WAT expression to stdout.
    pub fn write_int(self, expression: &str) -> Wat {
        self.run(&format!("(call $write_int (i32.const 1) {expression})"))
    }

    pub fn exit(self, code: i32) -> Wat {
        self.run(&format!("(call $proc_exit (i32.const {code}))"))
    }

    /// Adds a top-level item (a function, a table...).
    pub fn item(mut self, item: &str) -> Wat {
        self.items.push(item.into());
        self
    }

    pub fn source(&self) -> String {
        format!(
            "(module\n{}\n{}\n{HELPERS}\n{}\n(func (export \"_start\") {}\n{})\n{})",
            self.imports.join("\n"),
            self.memory,
            self.items.join("\n"),
            self.locals.join(" "),
            self.body.join("\n"),
            self.data.join("\n"),
        )
    }

    pub fn wasm(&self) -> Vec<u8> {
        let source = self.source();
        wat::parse_str(&source).unwrap_or_else(|e| panic!("invalid test guest: {e}\n{source}"))
    }

    /// Compiles (once per distinct module) and loads into the shared runtime.
    pub fn load(&self) -> Arc<LoadedModule> {
        load_wasm(&self.wasm())
    }
}

pub fn load_wasm(wasm: &[u8]) -> Arc<LoadedModule> {
    load_into(runtime(), wasm)
}

/// Compiles and loads into `runtime` (a test's own, configured as it needs).
pub fn load_into(runtime: &Runtime, wasm: &[u8]) -> Arc<LoadedModule> {
    runtime
        .load(&ContentHash::of_bytes(wasm), wasm, &ImportPolicy::default())
        .unwrap_or_else(|failure| panic!("guest refused: {failure}"))
}

/// A stand-in for the daemon's egress: answers by URL and remembers every request.
#[derive(Default)]
pub struct FakeEgress {
    pub requests: Mutex<Vec<GuestHttpRequest>>,
    pub spawns: Mutex<Vec<GuestSpawn>>,
    pub delay: Duration,
}

impl FakeEgress {
    pub fn new() -> Arc<FakeEgress> {
        Arc::new(FakeEgress::default())
    }

    pub fn slow(delay: Duration) -> Arc<FakeEgress> {
        Arc::new(FakeEgress { delay, ..FakeEgress::default() })
    }

    pub fn seen(&self) -> Vec<GuestHttpRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn spawned(&self) -> Vec<GuestSpawn> {
        self.spawns.lock().unwrap().clone()
    }
}

impl HostHooks for FakeEgress {
    fn send_request(
        &self,
        request: GuestHttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HostHttpResponse, Failure>> + Send + '_>> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.requests.lock().unwrap().push(request.clone());
            if request.url.starts_with("https://evil.example") {
                return Err(Failure::capability_denied(aileron_core::Boundary::Sandbox, "host not in the manifest")
                    .with_detail("requested", "network:evil.example:443"));
            }
            let body = format!("{} {}", request.method, request.body.map(|b| b.len()).unwrap_or(0));
            Ok(HostHttpResponse { status: 201, headers: vec![("x-test".into(), "1".into())], body: body.into_bytes() })
        })
    }

    /// Operation `denied` is refused, `nosandbox` finds no sandbox; any other operation (or an
    /// envelope, named by its program) exits with its name's length, printing `out:<name>` and
    /// `err`.
    fn spawn(
        &self,
        request: GuestSpawn,
        _deadline: std::time::Instant,
    ) -> Pin<Box<dyn Future<Output = Result<SpawnOutput, Failure>> + Send + '_>> {
        Box::pin(async move {
            self.spawns.lock().unwrap().push(request.clone());
            let name = match &request {
                GuestSpawn::Operation { op, .. } => op.clone(),
                GuestSpawn::Envelope(envelope) => envelope.program.clone(),
            };
            match name.as_str() {
                "denied" => Err(Failure::capability_denied(aileron_core::Boundary::Action, "not declared")
                    .with_detail("requested", "spawn:denied")),
                "nosandbox" => Err(Failure::new(
                    aileron_core::FailureClass::SpawnSandboxUnavailable,
                    aileron_core::Boundary::Sandbox,
                    "no user namespaces",
                )),
                _ => Ok(SpawnOutput {
                    exit_code: name.len() as i32,
                    stdout: format!("out:{name}").into_bytes(),
                    stderr: b"err".to_vec(),
                }),
            }
        })
    }
}

pub fn limits() -> Limits {
    Limits { wall_time: Duration::from_secs(10), ..Limits::default() }
}

pub async fn call(module: &LoadedModule, limits: Limits) -> CallOutcome {
    call_with(module, json!({"n": 1}), limits, FakeEgress::new()).await
}

pub async fn call_with(module: &LoadedModule, args: Value, limits: Limits, hooks: Arc<FakeEgress>) -> CallOutcome {
    call_on(runtime(), module, args, limits, hooks).await
}

/// [`call_with`] on `runtime` (the one `module` was loaded into).
pub async fn call_on(
    runtime: &Runtime,
    module: &LoadedModule,
    args: Value,
    limits: Limits,
    hooks: Arc<FakeEgress>,
) -> CallOutcome {
    runtime.call(module, CallRequest { op: "run".into(), args, limits }, hooks).await
}

/// `ok <json>` or `<class> <boundary> [<details.limit | details.exit_code>]` — what tables compare.
pub fn summary(outcome: &CallOutcome) -> String {
    match &outcome.result {
        Ok(value) => format!("ok {value}"),
        Err(failure) => {
            let detail = ["limit", "exit_code", "connector_class"]
                .iter()
                .find_map(|key| failure.details.get(*key))
                .map(|value| format!(" {value}"))
                .unwrap_or_default();
            format!("{} {}{detail}", failure.class, failure.boundary.as_str())
        }
    }
}

pub fn failure(outcome: &CallOutcome) -> &Failure {
    outcome.result.as_ref().expect_err("the call was expected to fail")
}
