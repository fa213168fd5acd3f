//! Conventions checked by a plain `cargo test` (run by `cargo xtask test`): every Rust file opens
//! with a `//!` doc, only the env registry reads environment variables, no module is named after a
//! non-domain noun, only the runner calls the sandbox, and nothing below the daemon imports it.

use std::path::{Path, PathBuf};

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the repository").to_path_buf()
}

/// Every tracked-looking Rust source file, skipping build outputs.
fn rust_files() -> Vec<PathBuf> {
    let root = repository_root();
    let mut files = Vec::new();
    let mut stack = vec![root.join("crates"), root.join("xtask"), root.join("connectors")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != "node_modules" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repository_root()).unwrap_or(path).display().to_string()
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let missing: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| !std::fs::read_to_string(path).unwrap_or_default().trim_start().starts_with("//!"))
        .map(|path| relative(&path))
        .collect();
    assert!(missing.is_empty(), "files without a leading `//!` doc comment: {missing:#?}");
}

#[test]
fn only_the_env_registry_reads_environment_variables() {
    // Tests, build scripts and xtask may set or read variables; product code goes through
    // crates/aileron/src/env.rs so that every variable is documented in one place.
    let allowed = |path: &str| {
        path == "crates/aileron/src/env.rs"
            || path.contains("/tests/")
            || path.ends_with("/build.rs")
            || path.starts_with("xtask/")
            || path.starts_with("connectors/")
    };
    let mut offenders = Vec::new();
    for path in rust_files() {
        let name = relative(&path);
        if allowed(&name) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (number, line) in text.lines().enumerate() {
            if line.starts_with("mod tests") {
                break; // in-file unit tests (the `#[cfg(test)] mod tests` at the end) may use the environment
            }
            let code = line.split("//").next().unwrap_or("");
            if code.contains("env::var(") || code.contains("env::var_os(") || code.contains("env::vars(") {
                offenders.push(format!("{name}:{}", number + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "read environment variables through crates/aileron/src/env.rs: {offenders:#?}");
}

#[test]
fn modules_are_domain_nouns() {
    let banned = ["utils.rs", "util.rs", "helpers.rs", "helper.rs", "manager.rs", "misc.rs"];
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|n| banned.contains(&n)))
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "name modules after what they are: {offenders:#?}");
}

/// SPEC §0 invariant 1, mechanically: in product code, only the runner executes a connector
/// (`Runtime::call`), so every action reaches a guest through `run_action`. The benchmark's warm
/// call lives outside the product, in `crates/aileron-bench`.
#[test]
fn only_the_runner_calls_the_sandbox() {
    let allowed = |path: &str| path == "crates/aileron/src/runner.rs";
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| relative(path).starts_with("crates/aileron/src/"))
        .filter(|path| !allowed(&relative(path)))
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines().any(|line| {
                let code = line.split("//").next().unwrap_or_default();
                code.contains("runtime.call(") || code.contains("Runtime::call(")
            })
        })
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "files that call the sandbox outside runner.rs: {offenders:#?}");
}

/// The layering rule of ARCHITECTURE.md: `daemon/` is the HTTP layer on top of the workflows;
/// nothing below it imports it. Only the entry points above it (the CLI, which starts the daemon,
/// and the binaries) may.
#[test]
fn nothing_below_the_daemon_imports_it() {
    let above = |path: &str| {
        ["crates/aileron/src/daemon/", "crates/aileron/src/cli/", "crates/aileron/src/bin/"]
            .iter()
            .any(|dir| path.starts_with(dir))
            || path == "crates/aileron/src/main.rs"
            || path == "crates/aileron/src/lib.rs"
    };
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| relative(path).starts_with("crates/aileron/src/") && !above(&relative(path)))
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines().any(|line| {
                let code = line.split("//").next().unwrap_or_default();
                code.contains("crate::daemon") || code.contains("aileron::daemon")
            })
        })
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "files below daemon/ that import it: {offenders:#?}");
}
