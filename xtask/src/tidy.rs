//! Conventions checked by a plain `cargo test` (run by `cargo xtask test`): every Rust file opens
//! with a `//!` doc, only the env registry reads environment variables, no module is named after a
//! non-domain noun, only the runner calls the sandbox, nothing below the surfaces imports them, no
//! file of the crate reaches itself through its imports, no two of its modules share a name unless
//! a folder's doc says why, a module with submodules is a `mod.rs`, and the code of both
//! workspaces (the host's and the guests') is formatted as rustfmt.toml says.

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
    // crates/aileron/src/platform/env.rs so that every variable is documented in one place.
    let allowed = |path: &str| {
        path == "crates/aileron/src/platform/env.rs"
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
    assert!(
        offenders.is_empty(),
        "read environment variables through crates/aileron/src/platform/env.rs: {offenders:#?}"
    );
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
/// (`Runtime::call`), so every action reaches a guest through `run_action`. The compiler holds it
/// first (the runtime is a private field of `runner::Sandbox`, reachable only from `runner/`);
/// this catches a second runtime built elsewhere. The benchmark's warm call lives outside the
/// product, in `crates/aileron-bench`.
#[test]
fn only_the_runner_calls_the_sandbox() {
    let allowed =
        |path: &str| path == "crates/aileron/src/runner/mod.rs" || path == "crates/aileron/src/runner/sandbox.rs";
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| relative(path).starts_with("crates/aileron/src/"))
        .filter(|path| !allowed(&relative(path)))
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            text.lines().any(|line| {
                let code = line.split("//").next().unwrap_or_default();
                code.contains("runtime.call(")
                    || code.contains("Runtime::call(")
                    || code.contains(".call_holding(")
                    || code.contains("Runtime::new(")
            })
        })
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "files that call the sandbox outside runner/mod.rs: {offenders:#?}");
}

/// The layering rule of ARCHITECTURE.md: `surfaces/` (the daemon's HTTP layer, the CLI, the MCP
/// server, launch and the client) sits on top of the workflows; nothing below it imports it. Only
/// the surfaces themselves and the entry points (the binaries, `main.rs`, `lib.rs`) may.
#[test]
fn nothing_below_the_surfaces_imports_them() {
    let above = |path: &str| {
        ["crates/aileron/src/surfaces/", "crates/aileron/src/bin/"].iter().any(|dir| path.starts_with(dir))
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
                code.contains("crate::surfaces") || code.contains("aileron::surfaces")
            })
        })
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "files below surfaces/ that import it: {offenders:#?}");
}

/// Module layout, one style: a module with submodules is `foo/mod.rs`, never `foo.rs` beside a
/// `foo/` directory.
#[test]
fn modules_with_submodules_live_in_their_own_mod_rs() {
    let offenders: Vec<String> = rust_files()
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|name| name != "mod.rs" && name != "lib.rs" && name != "main.rs"))
        .filter(|path| path.with_extension("").is_dir())
        .map(|path| relative(&path))
        .collect();
    assert!(offenders.is_empty(), "move each into <name>/mod.rs: {offenders:#?}");
}

/// The code is formatted as rustfmt.toml says (`cargo fmt --all --check`), in both workspaces:
/// the host's and the guests' (`connectors/`, a workspace of its own that the host's `cargo fmt
/// --all` does not reach; rustfmt finds the same rustfmt.toml above it).
#[test]
fn the_code_is_formatted() {
    let root = repository_root();
    for (manifest, fix) in [
        ("Cargo.toml", "cargo fmt --all"),
        ("connectors/Cargo.toml", "cargo fmt --all --manifest-path connectors/Cargo.toml"),
    ] {
        let checked = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["fmt", "--all", "--check", "--manifest-path", manifest])
            .current_dir(&root)
            .output()
            .expect("running cargo fmt (rustup component add rustfmt)");
        let shown = String::from_utf8_lossy(&checked.stdout);
        let files: std::collections::BTreeSet<&str> = shown
            .lines()
            .filter_map(|line| line.strip_prefix("Diff in "))
            .map(|rest| rest.split(':').next().unwrap_or(rest))
            .collect();
        assert!(
            checked.status.success(),
            "run `{fix}`; unformatted: {files:#?}\n{}",
            String::from_utf8_lossy(&checked.stderr)
        );
    }
}

/// The files a `crates/aileron/src` file names through `crate::` and `super::` paths, as paths
/// relative to `src/` (what it imports, and what it calls by a qualified path).
fn imports(src: &Path, file: &Path) -> std::collections::BTreeSet<PathBuf> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    // In-file unit tests may reach anything; they are not the module's dependencies.
    let code: String = text
        .lines()
        .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    let relative = file.strip_prefix(src).expect("below src");
    let mut module: Vec<String> =
        relative.with_extension("").iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    let mut found = std::collections::BTreeSet::new();
    for (anchor, base) in [("crate::", Vec::new()), ("super::", module[..module.len().saturating_sub(1)].to_vec())] {
        for (at, _) in code.match_indices(anchor) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for path in expand(&code[at + anchor.len()..]) {
                let mut full = base.clone();
                full.extend(path);
                if let Some(target) = resolve(src, &full)
                    && target != relative
                {
                    found.insert(target);
                }
            }
        }
    }
    found
}

/// The module paths written after `crate::` or `super::`: `a::b::C` gives `[a, b, C]`, a group
/// `{a::b, c::{d, e}}` each of its members.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut members = Vec::new();
        let mut start = 0;
        for (index, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    members.push(&group[start..index]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    members.push(&group[start..index]);
                    start = index + 1;
                }
                _ => {}
            }
        }
        return members.into_iter().flat_map(expand).collect();
    }
    let mut path = Vec::new();
    let mut tail = rest;
    loop {
        let end = tail.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(tail.len());
        if end == 0 {
            break;
        }
        path.push(tail[..end].to_string());
        tail = &tail[end..];
        match tail.strip_prefix("::") {
            Some(next) if next.starts_with('{') => {
                return expand(next).into_iter().map(|member| path.iter().cloned().chain(member).collect()).collect();
            }
            Some(next) => tail = next,
            None => break,
        }
    }
    vec![path]
}

/// The file of the longest prefix of `path` that is a module of `src`.
fn resolve(src: &Path, path: &[String]) -> Option<PathBuf> {
    (1..=path.len()).rev().find_map(|length| {
        let module: PathBuf = path[..length].iter().collect();
        [module.with_extension("rs"), module.join("mod.rs")].into_iter().find(|candidate| src.join(candidate).is_file())
    })
}

/// A loop in the import graph of `files` (paths relative to `src`), as the files around it.
fn a_loop(edges: &std::collections::BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        file: &PathBuf,
        edges: &std::collections::BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>>,
        marks: &mut std::collections::BTreeMap<PathBuf, Mark>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        match marks.get(file) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|entry| entry == file).expect("an open file is on the stack");
                return Some(stack[from..].iter().cloned().chain(std::iter::once(file.clone())).collect());
            }
            None => {}
        }
        marks.insert(file.clone(), Mark::Open);
        stack.push(file.clone());
        for next in edges.get(file).into_iter().flatten() {
            if let Some(found) = visit(next, edges, marks, stack) {
                return Some(found);
            }
        }
        stack.pop();
        marks.insert(file.clone(), Mark::Done);
        None
    }
    let mut marks = std::collections::BTreeMap::new();
    edges.keys().find_map(|file| visit(file, edges, &mut marks, &mut Vec::new()))
}

fn import_graph(src: &Path) -> std::collections::BTreeMap<PathBuf, std::collections::BTreeSet<PathBuf>> {
    rust_files()
        .into_iter()
        .filter(|path| path.starts_with(src))
        .map(|path| (path.strip_prefix(src).expect("below src").to_path_buf(), imports(src, &path)))
        .collect()
}

/// No file of `crates/aileron/src` reaches itself through what it imports (ARCHITECTURE.md: the
/// layers import downwards only; a loop was how the runner, the services and the workflows came
/// to depend on each other).
#[test]
fn the_crates_files_import_each_other_in_no_loop() {
    let src = repository_root().join("crates/aileron/src");
    let graph = import_graph(&src);
    assert!(graph.len() > 50 && graph.values().map(|targets| targets.len()).sum::<usize>() > 150, "the graph was read");
    if let Some(found) = a_loop(&graph) {
        let shown: Vec<String> = found.iter().map(|path| path.display().to_string()).collect();
        panic!("these files import each other in a loop: {}", shown.join(" -> "));
    }
}

/// The loop check on a tree broken on purpose: a workflow imported from the services, as the
/// listing cache once was, closes a loop through the runner.
#[test]
fn the_loop_check_finds_a_loop_planted_in_a_copy_of_the_tree() {
    let src = repository_root().join("crates/aileron/src");
    let mut graph = import_graph(&src);
    graph.get_mut(Path::new("services.rs")).expect("services.rs").insert(PathBuf::from("workflows/actions.rs"));
    let found = a_loop(&graph).expect("the planted edge closes a loop");
    assert!(
        found.contains(&PathBuf::from("services.rs")) && found.contains(&PathBuf::from("workflows/actions.rs")),
        "{found:?}"
    );
    let group = expand("{a::b, c::{d, e::F}, g}");
    assert_eq!(group, vec![vec!["a", "b"], vec!["c", "d"], vec!["c", "e", "F"], vec!["g"]]);
}

/// The phrase a folder's `mod.rs` doc says when its files are named after the resources (one file
/// per resource in each layer: the store, the workflow, the HTTP handler, the CLI command).
const PER_RESOURCE: &str = "one file per resource";

/// The modules of `crates/aileron/src` that share a name with another and are not excused: a
/// module's name is its file stem, or its folder's name for a `mod.rs`. A name may repeat when at
/// most one of its modules sits outside the folders whose doc says [`PER_RESOURCE`].
fn repeated_names(modules: &[(PathBuf, bool)]) -> Vec<Vec<PathBuf>> {
    let mut by_name: std::collections::BTreeMap<String, Vec<&(PathBuf, bool)>> = std::collections::BTreeMap::new();
    for module in modules {
        let path = &module.0;
        let name = match path.file_stem().and_then(|stem| stem.to_str()) {
            Some("mod") => path.parent().and_then(|dir| dir.file_name()).and_then(|name| name.to_str()),
            Some("lib" | "main") => None,
            other => other,
        };
        if let Some(name) = name {
            by_name.entry(name.to_string()).or_default().push(module);
        }
    }
    by_name
        .into_values()
        .filter(|same| same.len() > 1 && same.iter().filter(|(_, excused)| !excused).count() > 1)
        .map(|same| same.into_iter().map(|(path, _)| path.clone()).collect())
        .collect()
}

/// Each module of `crates/aileron/src` (relative to it), and whether the folder it is a file of says
/// [`PER_RESOURCE`] in its `mod.rs` doc. A `foo/mod.rs` is judged by the folder holding `foo/`.
fn modules_and_their_excuse(src: &Path) -> Vec<(PathBuf, bool)> {
    let says_why = |folder: &Path| {
        std::fs::read_to_string(folder.join("mod.rs"))
            .unwrap_or_default()
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join(" ")
            .replace("//! ", "")
            .contains(PER_RESOURCE)
    };
    rust_files()
        .into_iter()
        .filter(|path| path.starts_with(src))
        .map(|path| {
            let folder = if path.file_name().is_some_and(|name| name == "mod.rs") {
                path.parent().and_then(Path::parent)
            } else {
                path.parent()
            };
            let excused = folder.is_some_and(says_why);
            (path.strip_prefix(src).expect("below src").to_path_buf(), excused)
        })
        .collect()
}

/// Two modules of one name make a reader ask which one a path means (issue 50 counted five
/// `spawn.rs`); a repeated name needs a folder doc that says why.
#[test]
fn no_two_modules_share_a_name_unless_a_folder_says_why() {
    let src = repository_root().join("crates/aileron/src");
    let modules = modules_and_their_excuse(&src);
    assert!(modules.iter().filter(|(_, excused)| *excused).count() > 20, "the per-resource folders were read");
    let repeated = repeated_names(&modules);
    assert!(repeated.is_empty(), "rename one of each, or say {PER_RESOURCE:?} in the folder's doc: {repeated:#?}");
}

/// The same check on a tree broken on purpose: a second `headers.rs` among the platform's files.
#[test]
fn the_name_check_finds_a_repeated_name_planted_in_a_copy_of_the_tree() {
    let src = repository_root().join("crates/aileron/src");
    let mut modules = modules_and_their_excuse(&src);
    modules.push((PathBuf::from("platform/headers.rs"), false));
    let repeated = repeated_names(&modules);
    assert_eq!(repeated, vec![vec![PathBuf::from("dataplane/headers.rs"), PathBuf::from("platform/headers.rs")]]);
    modules.pop();
    modules.push((PathBuf::from("workflows/headers.rs"), true));
    assert!(repeated_names(&modules).is_empty(), "a copy in a per-resource folder is excused");
}
