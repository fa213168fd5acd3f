//! Load-time refusals: imports the runtime or the manifest does not allow, and modules that are
//! not WASI command modules.

use aileron_core::{Boundary, ContentHash, FailureClass};
use aileron_sandbox::{ImportPolicy, Runtime, RuntimeConfig};

use crate::guest::{Wat, call, limits, load_into, load_wasm, runtime, summary};

fn load(wasm: &[u8], policy: &ImportPolicy) -> Result<(), (FailureClass, Boundary, String)> {
    runtime()
        .load(&ContentHash::of_bytes(wasm), wasm, policy)
        .map(|_| ())
        .map_err(|failure| (failure.class, failure.boundary, failure.message))
}

fn allow(entries: &[&str]) -> ImportPolicy {
    ImportPolicy { allowed_host_imports: Some(entries.iter().map(|e| e.to_string()).collect()) }
}

type Refusal = (FailureClass, Boundary);
/// (case, module, policy, expected refusal or None = loads, text the message must contain)
type Case = (&'static str, Vec<u8>, ImportPolicy, Option<Refusal>, &'static str);

#[test]
fn import_and_export_refusals() {
    let any = ImportPolicy::default();
    let runtime_error = (FailureClass::ConnectorRuntimeError, Boundary::Sandbox);
    let denied = (FailureClass::CapabilityDenied, Boundary::ConnectorManifest);
    let raw = |source: &str| wat::parse_str(source).unwrap();
    let table: Vec<Case> = vec![
        ("plain guest", Wat::new().wasm(), any.clone(), None, ""),
        ("http with no policy", Wat::new().host("http_request", "i32 i32", "i32").wasm(), any.clone(), None, ""),
        (
            "http allowed bare",
            Wat::new().host("http_request", "i32 i32", "i32").wasm(),
            allow(&["http_request"]),
            None,
            "",
        ),
        (
            "http allowed qualified",
            Wat::new().host("http_request", "i32 i32", "i32").host("log", "i32 i32 i32 i32", "").wasm(),
            allow(&["aileron_host.http_request", "log"]),
            None,
            "",
        ),
        (
            "http not in the manifest",
            Wat::new().host("http_request", "i32 i32", "i32").wasm(),
            allow(&["log"]),
            Some(denied),
            "`aileron_host.http_request`",
        ),
        (
            "empty allow-list",
            Wat::new().host("log", "i32 i32 i32 i32", "").wasm(),
            allow(&[]),
            Some(denied),
            "does not list it",
        ),
        ("spawn with no policy", Wat::new().host("spawn", "i32 i32", "i32").wasm(), any.clone(), None, ""),
        (
            "spawn not in the manifest",
            Wat::new().host("spawn_op", "i32 i32 i32 i32", "i32").wasm(),
            allow(&["log"]),
            Some(denied),
            "`aileron_host.spawn_op`",
        ),
        (
            "single-slot accessors",
            Wat::new().host("spawn_status", "", "i32").host("spawn_output_read", "i32 i32 i32", "i32").wasm(),
            allow(&["spawn_status", "spawn_output_read"]),
            None,
            "",
        ),
        (
            "handle accessors",
            Wat::new().host("spawn_status", "i32", "i32").host("spawn_output_size", "i32 i32", "i32").wasm(),
            any.clone(),
            None,
            "",
        ),
        (
            "mixed spawn conventions",
            Wat::new().host("spawn_status", "", "i32").host("spawn_output_size", "i32 i32", "i32").wasm(),
            any.clone(),
            Some(runtime_error),
            "mix the handle and the single-slot conventions",
        ),
        (
            "spawn_status of neither convention",
            Wat::new().host("spawn_status", "i32 i32", "i32").wasm(),
            any.clone(),
            Some(runtime_error),
            "spawn_status",
        ),
        (
            "unknown host function",
            Wat::new().host("read_secret", "", "i32").wasm(),
            any.clone(),
            Some(runtime_error),
            "`aileron_host.read_secret`",
        ),
        (
            "unknown module",
            Wat::new().import(r#"(import "env" "abort" (func))"#).wasm(),
            any.clone(),
            Some(runtime_error),
            "`env.abort`",
        ),
        (
            "not a preview-1 function",
            Wat::new().wasi("sock_open", "i32 i32 i32", "i32").wasm(),
            any.clone(),
            Some(runtime_error),
            "`wasi_snapshot_preview1.sock_open`",
        ),
        (
            "wrong signature",
            Wat::new().wasi("random_get", "i32", "i32").wasm(),
            any.clone(),
            Some(runtime_error),
            "random_get",
        ),
        (
            "imported memory",
            raw(r#"(module (import "env" "memory" (memory 1)) (func (export "_start")))"#),
            any.clone(),
            Some(runtime_error),
            "`env.memory`, which is not a function",
        ),
        (
            "no _start",
            raw(r#"(module (memory (export "memory") 1) (func (export "main")))"#),
            any.clone(),
            Some(runtime_error),
            "`_start`",
        ),
        (
            "_start with parameters",
            raw(r#"(module (memory (export "memory") 1) (func (export "_start") (param i32)))"#),
            any.clone(),
            Some(runtime_error),
            "`_start`",
        ),
        (
            "no memory export",
            raw(r#"(module (memory 1) (func (export "_start")))"#),
            any.clone(),
            Some(runtime_error),
            "`memory`",
        ),
        ("not wasm", b"\0asm garbage".to_vec(), any.clone(), Some(runtime_error), "does not compile"),
    ];
    for (case, wasm, policy, expected, text) in table {
        match (load(&wasm, &policy), expected) {
            (Ok(()), None) => {}
            (Err((class, boundary, message)), Some((expected_class, expected_boundary))) => {
                assert_eq!((class, boundary), (expected_class, expected_boundary), "{case}: {message}");
                assert!(message.contains(text), "{case}: `{message}` lacks `{text}`");
            }
            (result, expected) => panic!("{case}: got {result:?}, expected {expected:?}"),
        }
    }
}

fn param_list(params: &str) -> String {
    if params.is_empty() { String::new() } else { format!("(param {params})") }
}

#[test]
fn the_whole_abi_can_be_imported() {
    let preview_1: [(&str, &str); 46] = [
        ("args_get", "i32 i32"),
        ("args_sizes_get", "i32 i32"),
        ("environ_get", "i32 i32"),
        ("environ_sizes_get", "i32 i32"),
        ("clock_res_get", "i32 i32"),
        ("clock_time_get", "i32 i64 i32"),
        ("fd_advise", "i32 i64 i64 i32"),
        ("fd_allocate", "i32 i64 i64"),
        ("fd_close", "i32"),
        ("fd_datasync", "i32"),
        ("fd_fdstat_get", "i32 i32"),
        ("fd_fdstat_set_flags", "i32 i32"),
        ("fd_fdstat_set_rights", "i32 i64 i64"),
        ("fd_filestat_get", "i32 i32"),
        ("fd_filestat_set_size", "i32 i64"),
        ("fd_filestat_set_times", "i32 i64 i64 i32"),
        ("fd_pread", "i32 i32 i32 i64 i32"),
        ("fd_prestat_get", "i32 i32"),
        ("fd_prestat_dir_name", "i32 i32 i32"),
        ("fd_pwrite", "i32 i32 i32 i64 i32"),
        ("fd_read", "i32 i32 i32 i32"),
        ("fd_readdir", "i32 i32 i32 i64 i32"),
        ("fd_renumber", "i32 i32"),
        ("fd_seek", "i32 i64 i32 i32"),
        ("fd_sync", "i32"),
        ("fd_tell", "i32 i32"),
        ("fd_write", "i32 i32 i32 i32"),
        ("path_create_directory", "i32 i32 i32"),
        ("path_filestat_get", "i32 i32 i32 i32 i32"),
        ("path_filestat_set_times", "i32 i32 i32 i32 i64 i64 i32"),
        ("path_link", "i32 i32 i32 i32 i32 i32 i32"),
        ("path_open", "i32 i32 i32 i32 i32 i64 i64 i32 i32"),
        ("path_readlink", "i32 i32 i32 i32 i32 i32"),
        ("path_remove_directory", "i32 i32 i32"),
        ("path_rename", "i32 i32 i32 i32 i32 i32"),
        ("path_symlink", "i32 i32 i32 i32 i32"),
        ("path_unlink_file", "i32 i32 i32"),
        ("poll_oneoff", "i32 i32 i32 i32"),
        ("proc_exit", "i32"),
        ("proc_raise", "i32"),
        ("sched_yield", ""),
        ("random_get", "i32 i32"),
        ("sock_accept", "i32 i32 i32"),
        ("sock_recv", "i32 i32 i32 i32 i32 i32"),
        ("sock_send", "i32 i32 i32 i32 i32"),
        ("sock_shutdown", "i32 i32"),
    ];
    let mut source = String::from("(module\n");
    for (name, params) in preview_1 {
        let result = if name == "proc_exit" { "" } else { "(result i32)" };
        source += &format!(r#"(import "wasi_snapshot_preview1" "{name}" (func {} {result}))"#, param_list(params));
    }
    let host = [
        ("log", "i32 i32 i32 i32", ""),
        ("http_request", "i32 i32", "(result i32)"),
        ("http_response_status", "", "(result i32)"),
        ("http_response_size", "", "(result i32)"),
        ("http_response_read", "i32 i32", "(result i32)"),
    ];
    for (name, params, result) in host {
        source += &format!(r#"(import "aileron_host" "{name}" (func {} {result}))"#, param_list(params));
    }
    source += r#"(memory (export "memory") 1) (func (export "_start")))"#;
    let wasm = wat::parse_str(&source).unwrap();
    let module = load_wasm(&wasm);
    let mut imported = module.host_imports().to_vec();
    imported.sort();
    assert_eq!(imported, ["http_request", "http_response_read", "http_response_size", "http_response_status", "log"]);
}

#[tokio::test]
async fn a_module_from_another_runtime_is_refused_not_run() {
    let other = Runtime::new(RuntimeConfig::default()).unwrap();
    let wasm = Wat::new().write(1, r#"{"output":1}"#).wasm();
    let foreign = load_into(&other, &wasm);
    let outcome = call(&foreign, limits()).await;
    assert_eq!(summary(&outcome), "connector_runtime_error runtime");
}

#[test]
fn loads_share_the_compiled_module_but_check_the_policy_each_time() {
    let wasm = Wat::new().host("log", "i32 i32 i32 i32", "").write(2, "unique to this test").wasm();
    let hash = ContentHash::of_bytes(&wasm);
    let before = runtime().cache_stats();
    let first = runtime().load(&hash, &wasm, &ImportPolicy::default()).unwrap();
    let second = runtime().load(&hash, &wasm, &allow(&["log"])).unwrap();
    assert!(std::sync::Arc::ptr_eq(&first, &second));
    let after = runtime().cache_stats();
    // Other tests load concurrently, so only lower bounds hold.
    assert!(after.compiles > before.compiles);
    assert!(after.memory_hits > before.memory_hits);
    let narrowed = runtime().load(&hash, &wasm, &allow(&["http_request"])).unwrap_err();
    assert_eq!(narrowed.class, FailureClass::CapabilityDenied);
}
