//! Builds the guest workspace `connectors/` (release, `wasm32-wasip1`) with a nested cargo, so
//! that the example connector can be embedded in the binary for `aileron demo` and the hostile
//! test guests exist before any test runs.
//!
//! Emits `AILERON_GUESTS_DIR` (the directory of the built `.wasm` files) and
//! `AILERON_EXAMPLE_CONNECTOR_DIR` (`connectors/github-issues`: manifest and action templates) and
//! `AILERON_GIT_CONNECTOR_DIR` (`connectors/git`, the spawn example).
//! The guests live in their own target dir (`connectors/target`): the outer build holds the
//! lock on its own, and the guests' size-tuned release profile differs from the host's.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

const GUEST_TARGET: &str = "wasm32-wasip1";
/// What `cargo:rerun-if-changed` watches under `connectors/` (never `target/`).
const GUEST_SOURCES: [&str; 6] = ["Cargo.toml", "Cargo.lock", "sdk", "github-issues", "git", "test-guests"];
const MISSING_TARGET_HINT: &str = "hint: run rustup target add wasm32-wasip1 (cargo xtask test does it for you)";

fn main() -> ExitCode {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let connectors = match manifest_dir.join("../../connectors").canonicalize() {
        Ok(path) => path,
        Err(error) => {
            eprintln!(
                "error: the guest workspace ../../connectors next to {} is missing: {error}",
                manifest_dir.display()
            );
            return ExitCode::FAILURE;
        }
    };
    for source in GUEST_SOURCES {
        println!("cargo:rerun-if-changed={}", connectors.join(source).display());
    }

    if let Err(message) = check_guest_target() {
        eprintln!("error: {message}\n{MISSING_TARGET_HINT}");
        return ExitCode::FAILURE;
    }

    let target_dir = connectors.join("target");
    let status = nested_cargo()
        .args(["build", "--release", "--target", GUEST_TARGET, "--manifest-path"])
        .arg(connectors.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        // Our stdout is parsed for `cargo:` directives; the nested build's output belongs on stderr.
        .stdout(Stdio::from(std::io::stderr()))
        .status();
    match status {
        Ok(status) if status.success() => {}
        Ok(status) => {
            eprintln!(
                "error: building the connector guests failed ({status}); the nested cargo's errors are above\n\
                 hint: run `cargo build --release --target {GUEST_TARGET} --manifest-path {}` to see them directly",
                connectors.join("Cargo.toml").display()
            );
            return ExitCode::FAILURE;
        }
        Err(error) => {
            eprintln!("error: cannot run cargo to build the connector guests: {error}");
            return ExitCode::FAILURE;
        }
    }

    let guests_dir = target_dir.join(GUEST_TARGET).join("release");
    // A deleted guest must trigger a rebuild rather than a confusing `include_bytes!` error.
    match std::fs::read_dir(&guests_dir) {
        Ok(entries) => {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension() == Some(OsStr::new("wasm")) {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
        Err(error) => {
            eprintln!("error: the nested build succeeded but {} is unreadable: {error}", guests_dir.display());
            return ExitCode::FAILURE;
        }
    }
    println!("cargo:rustc-env=AILERON_GUESTS_DIR={}", guests_dir.display());
    println!("cargo:rustc-env=AILERON_EXAMPLE_CONNECTOR_DIR={}", connectors.join("github-issues").display());
    println!("cargo:rustc-env=AILERON_GIT_CONNECTOR_DIR={}", connectors.join("git").display());
    ExitCode::SUCCESS
}

/// The standard library for the guest target must be installed; asking rustc where it would be
/// works with and without rustup.
fn check_guest_target() -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc).args(["--print", "target-libdir", "--target", GUEST_TARGET]).output().map_err(
        |error| format!("cannot run {} to look for the {GUEST_TARGET} target: {error}", Path::new(&rustc).display()),
    )?;
    let libdir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    if output.status.success() && libdir.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "the {GUEST_TARGET} Rust target is not installed; it is needed to build the connector guests in connectors/"
        ))
    }
}

/// `cargo` (the one running this build, from `CARGO`) with the environment the outer build
/// hands to build scripts removed where it would change or break the nested build.
fn nested_cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        if let Some(name) = name.to_str()
            && is_outer_build_setting(name)
        {
            command.env_remove(name);
        }
    }
    command
}

/// Whether an inherited variable belongs to the outer build and must not reach the nested one.
///
/// Kept on purpose: `CARGO_HOME`, registry/network/offline settings, `RUSTUP_TOOLCHAIN` and
/// `RUSTC` (same toolchain), `RUSTC_WRAPPER` (e.g. sccache works for wasm too), and
/// `CARGO_MAKEFLAGS`: the nested cargo joins the outer jobserver, so on a small machine the two
/// builds share the `-j` budget instead of each running a full set of jobs.
fn is_outer_build_setting(name: &str) -> bool {
    const EXACT: [&str; 21] = [
        // Flags for the host target: `CARGO_ENCODED_RUSTFLAGS` even takes precedence over
        // `RUSTFLAGS` in the nested cargo, and host flags (`-C target-cpu=native`, coverage,
        // sanitizers) break or bloat wasm guests.
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "RUSTDOCFLAGS",
        // The outer target dir is locked by the outer build and holds host artifacts.
        "CARGO_TARGET_DIR",
        // `cargo clippy` wraps rustc with clippy-driver for the outer workspace only.
        "RUSTC_WORKSPACE_WRAPPER",
        // Set by cargo for the outer package's build script and rustc invocations; the nested
        // cargo sets its own per unit but does not clear values it does not set (e.g. a
        // linker configured only for the host).
        "CARGO_PRIMARY_PACKAGE",
        "RUSTC_LINKER",
        "TARGET",
        "HOST",
        "OUT_DIR",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "NUM_JOBS",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_TARGET_TMPDIR",
    ];
    const PREFIXES: [&str; 7] = [
        // `--target`, target dir, rustflags and wrappers given as config through the environment.
        "CARGO_BUILD_",
        // Profile overrides (`CARGO_PROFILE_RELEASE_LTO=false`...) would change the guests' bytes
        // and therefore their content hashes.
        "CARGO_PROFILE_",
        // Flags the user aimed at the guest target through the environment, same reason.
        "CARGO_TARGET_WASM32_WASIP1_",
        // The outer package's cfg and features: a nested build script would see host values
        // such as `CARGO_CFG_UNIX` that cargo does not overwrite for wasm (it only sets what applies).
        "CARGO_CFG_",
        "CARGO_FEATURE_",
        "CARGO_PKG_",
        // `links` metadata of the outer build's dependencies.
        "DEP_",
    ];
    EXACT.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}
