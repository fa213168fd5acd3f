//! The on-disk compiled-module cache: a new runtime loads from disk instead of compiling, and
//! unusable artifacts are deleted and replaced.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use aileron_core::ContentHash;
use aileron_sandbox::{CacheStats, CallRequest, ImportPolicy, Runtime, RuntimeConfig};
use serde_json::json;

use crate::guest::{FakeEgress, Wat, limits};

fn runtime_at(dir: &Path) -> Runtime {
    Runtime::new(RuntimeConfig { cache_dir: Some(dir.to_path_buf()), ..RuntimeConfig::default() }).unwrap()
}

/// Loads and runs the module on `runtime`; returns its output and the runtime's counters.
async fn load_and_run(runtime: &Runtime, wasm: &[u8]) -> (serde_json::Value, CacheStats) {
    let module = runtime.load(&ContentHash::of_bytes(wasm), wasm, &ImportPolicy::default()).unwrap();
    let request = CallRequest { op: "run".into(), args: json!({}), limits: limits() };
    let outcome = runtime.call(&module, request, FakeEgress::new()).await;
    (outcome.result.unwrap(), runtime.cache_stats())
}

fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir).unwrap().map(|entry| entry.unwrap().path()).collect();
    paths.sort();
    paths
}

fn stats(disk_hits: u64, compiles: u64, disk_rejects: u64) -> CacheStats {
    CacheStats { memory_hits: 0, disk_hits, compiles, disk_rejects, disk_write_failures: 0 }
}

fn guest(marker: &str) -> Vec<u8> {
    Wat::new().write(1, &format!(r#"{{"output":"{marker}"}}"#)).wasm()
}

#[tokio::test]
async fn a_second_runtime_loads_from_disk_without_compiling() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("store/cache");
    let wasm = guest("cached");
    let hash = ContentHash::of_bytes(&wasm);

    let first = runtime_at(&dir);
    assert_eq!(load_and_run(&first, &wasm).await, (json!("cached"), stats(0, 1, 0)));
    let files = artifacts(&dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let (stem, engine_key) = name.strip_suffix(".cwasm").unwrap().split_once('-').unwrap();
    assert_eq!(stem, hash.hex());
    assert_eq!(engine_key.len(), 16);
    assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);

    let second = runtime_at(&dir);
    assert_eq!(load_and_run(&second, &wasm).await, (json!("cached"), stats(1, 0, 0)));
    let (_, again) = load_and_run(&second, &wasm).await;
    assert_eq!(again, CacheStats { memory_hits: 1, ..stats(1, 0, 0) });
}

type Corruption = fn(&mut Vec<u8>);

#[tokio::test]
async fn unusable_artifacts_are_deleted_and_recompiled() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let wasm = guest("recovered");
    let _ = load_and_run(&runtime_at(&dir), &wasm).await;
    let artifact = artifacts(&dir).remove(0);
    let pristine = fs::read(&artifact).unwrap();

    let corruptions: [(&str, Corruption); 3] = [
        ("one flipped bit", |bytes| {
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x40;
        }),
        ("truncated", |bytes| bytes.truncate(bytes.len() / 3)),
        ("garbage", |bytes| *bytes = b"not a compiled module".to_vec()),
    ];
    for (name, corrupt) in corruptions {
        let mut bytes = pristine.clone();
        corrupt(&mut bytes);
        fs::write(&artifact, &bytes).unwrap();
        let runtime = runtime_at(&dir);
        assert_eq!(load_and_run(&runtime, &wasm).await, (json!("recovered"), stats(0, 1, 1)), "{name}");
        // The rewritten artifact is good again.
        assert_eq!(load_and_run(&runtime_at(&dir), &wasm).await.1, stats(1, 0, 0), "{name}");
    }

    // Something other than a regular file in the artifact's place is removed too.
    fs::remove_file(&artifact).unwrap();
    fs::create_dir(&artifact).unwrap();
    let runtime = runtime_at(&dir);
    let (_, counters) = load_and_run(&runtime, &wasm).await;
    assert_eq!(counters.compiles, 1);
    assert!(counters.disk_rejects + counters.disk_write_failures >= 1, "{counters:?}");
}

#[tokio::test]
async fn artifacts_of_other_engine_configurations_are_replaced() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let wasm = guest("fresh");
    let hash = ContentHash::of_bytes(&wasm);
    fs::create_dir_all(&dir).unwrap();
    let stale = dir.join(format!("{}-0000000000000000.cwasm", hash.hex()));
    let unrelated = dir.join(format!("{}-0000000000000000.cwasm", ContentHash::of_bytes(b"other").hex()));
    fs::write(&stale, b"from an older wasmtime").unwrap();
    fs::write(&unrelated, b"another module").unwrap();
    let (_, counters) = load_and_run(&runtime_at(&dir), &wasm).await;
    assert_eq!(counters, stats(0, 1, 0));
    let files = artifacts(&dir);
    assert!(!files.contains(&stale), "{files:?}");
    assert!(files.contains(&unrelated), "{files:?}");
    assert_eq!(files.len(), 2);
}

#[test]
fn a_cache_directory_that_cannot_be_created_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let blocker = home.path().join("file");
    fs::write(&blocker, b"").unwrap();
    let error = Runtime::new(RuntimeConfig { cache_dir: Some(blocker.join("cache")), ..RuntimeConfig::default() })
        .err()
        .unwrap();
    assert!(error.to_string().contains("cannot create the compiled-module cache directory"), "{error}");
}

#[tokio::test]
async fn a_module_refused_by_its_manifest_is_not_recompiled_on_the_next_attempt() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let wasm = Wat::new().host("spawn", "i32 i32", "i32").wasm();
    let hash = ContentHash::of_bytes(&wasm);
    for (attempt, expected) in [("first", stats(0, 1, 0)), ("after restart", stats(1, 0, 0))] {
        let runtime = runtime_at(&dir);
        let only_logs = ImportPolicy { allowed_host_imports: Some(vec!["log".into()]) };
        let refusal = runtime.load(&hash, &wasm, &only_logs).unwrap_err();
        assert!(refusal.message.contains("does not list it"), "{attempt}: {refusal}");
        assert_eq!(runtime.cache_stats(), expected, "{attempt}");
    }
}

#[tokio::test]
async fn preload_takes_the_artifact_from_disk_without_the_module_bytes_and_never_compiles() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let wasm = Wat::new().host("http_request", "i32 i32", "i32").write(1, r#"{"output":"preloaded"}"#).wasm();
    let hash = ContentHash::of_bytes(&wasm);

    // Nothing on disk yet: nothing to preload, and nothing is compiled for it.
    let empty = runtime_at(&dir);
    assert!(!empty.preload(&hash));
    assert_eq!(empty.cache_stats(), stats(0, 0, 0));
    let _ = load_and_run(&empty, &wasm).await;

    let restarted = runtime_at(&dir);
    assert!(restarted.preload(&hash));
    assert_eq!(restarted.cache_stats(), stats(1, 0, 0));
    // A load after it is answered from memory: the bytes given are never looked at.
    let module = restarted.load(&hash, b"not even wasm", &ImportPolicy::default()).unwrap();
    let request = CallRequest { op: "run".into(), args: json!({}), limits: limits() };
    assert_eq!(restarted.call(&module, request, FakeEgress::new()).await.result.unwrap(), json!("preloaded"));
    assert_eq!(restarted.cache_stats(), CacheStats { memory_hits: 1, ..stats(1, 0, 0) });

    // Preloading skipped the manifest's import policy; every use still applies it.
    let denied = ImportPolicy { allowed_host_imports: Some(vec!["log".into()]) };
    let refused = restarted.load(&hash, &wasm, &denied).unwrap_err();
    assert!(refused.message.contains("http_request"), "{}", refused.message);
    assert!(restarted.loaded(&hash, &denied).unwrap().is_err());
    assert!(restarted.loaded(&hash, &ImportPolicy::default()).unwrap().is_ok());

    // An artifact that does not check out is not preloaded (and is deleted).
    let artifact = artifacts(&dir).remove(0);
    let mut bytes = fs::read(&artifact).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&artifact, &bytes).unwrap();
    let damaged = runtime_at(&dir);
    assert!(!damaged.preload(&hash));
    assert_eq!(damaged.cache_stats(), stats(0, 0, 1));
    assert!(!artifact.exists());
}

/// A module loaded from disk keeps running the bytes that were verified, whatever later happens
/// to its artifact file: rewritten in place with other bytes of the same length, or cut short
/// (were the file mapped, the first would run unverified code and the second kill the process
/// with SIGBUS). On Linux the verified bytes are held in a sealed memfd.
#[tokio::test]
async fn a_loaded_module_does_not_depend_on_its_artifact_file_afterwards() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("cache");
    let wasm = guest("verified");
    let hash = ContentHash::of_bytes(&wasm);
    let _ = load_and_run(&runtime_at(&dir), &wasm).await;
    let artifact = artifacts(&dir).remove(0);

    let restarted = runtime_at(&dir);
    let module = restarted.load(&hash, &wasm, &ImportPolicy::default()).unwrap();
    assert_eq!(restarted.cache_stats(), stats(1, 0, 0));
    // Named by the module's content hash (other tests' runtimes run in this process too).
    let name = format!("/memfd:aileron-cwasm-{} (deleted)", hash.hex());
    let memfds: Vec<PathBuf> = fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|fd| fs::read_link(fd).is_ok_and(|target| target.as_os_str() == name.as_str()))
        .collect();
    assert_eq!(memfds.len(), 1, "the verified artifact is held in one memfd");
    for memfd in &memfds {
        // Sealed: not even another descriptor of it can change its bytes or its size.
        let mut reopened = fs::OpenOptions::new().write(true).open(memfd).unwrap();
        assert!(std::io::Write::write_all(&mut reopened, b"patched").is_err(), "{} is writable", memfd.display());
        assert!(reopened.set_len(1).is_err(), "{} can shrink", memfd.display());
    }

    let run = || CallRequest { op: "run".into(), args: json!({}), limits: limits() };
    let flipped: Vec<u8> = fs::read(&artifact).unwrap().iter().map(|byte| !byte).collect();
    fs::write(&artifact, &flipped).unwrap();
    assert_eq!(restarted.call(&module, run(), FakeEgress::new()).await.result.unwrap(), json!("verified"));
    fs::write(&artifact, b"").unwrap();
    assert_eq!(restarted.call(&module, run(), FakeEgress::new()).await.result.unwrap(), json!("verified"));
}

/// Compiles on the runtimes of [`after_compile_runs_once_per_compile_on_the_compiling_thread`].
static COMPILES_SEEN: std::sync::Mutex<Vec<std::thread::ThreadId>> = std::sync::Mutex::new(Vec::new());

fn note_compile() {
    COMPILES_SEEN.lock().unwrap().push(std::thread::current().id());
}

/// The hook the daemon hands a compile's freed memory back with runs after each compile, on the
/// thread that compiled — not after a memory or disk cache hit. The module a compile made (on an
/// engine of its own, dropped after) runs on the runtime's engine, and its artifact loads from
/// disk in the next runtime.
#[tokio::test]
async fn after_compile_runs_once_per_compile_on_the_compiling_thread() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("store/cache");
    let config = || RuntimeConfig {
        cache_dir: Some(dir.clone()),
        after_compile: Some(note_compile),
        ..RuntimeConfig::default()
    };
    let wasm = guest("hooked");
    let first = Runtime::new(config()).unwrap();
    let compiling_thread = std::thread::current().id();
    assert_eq!(load_and_run(&first, &wasm).await, (json!("hooked"), stats(0, 1, 0)));
    assert_eq!(load_and_run(&first, &wasm).await.0, json!("hooked"));
    assert_eq!(
        *COMPILES_SEEN.lock().unwrap(),
        vec![compiling_thread],
        "one compile, one call, on the compiling thread"
    );

    let second = Runtime::new(config()).unwrap();
    assert_eq!(load_and_run(&second, &wasm).await, (json!("hooked"), stats(1, 0, 0)));
    assert_eq!(COMPILES_SEEN.lock().unwrap().len(), 1, "a disk hit compiles nothing and calls nothing");
}
