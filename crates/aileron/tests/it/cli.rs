//! The real `aileron` binary over a real socket: daemon lifecycle, install with consent rules,
//! actions, runs, exit codes, audit list/show/verify, and auto-start.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{ActionSpec, guest_wasm, manifest};

pub struct Cli {
    pub home: PathBuf,
    _temp: tempfile::TempDir,
}

impl Cli {
    pub fn new() -> Cli {
        let temp = tempfile::tempdir().unwrap();
        Cli { home: temp.path().join("home"), _temp: temp }
    }

    pub fn scratch(&self) -> &Path {
        self._temp.path()
    }

    /// `aileron` with `args` on this home, with none of the test environment's daemon pointers.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(crate::campaign::binary("aileron"));
        command
            .args(args)
            .env("AILERON_HOME", &self.home)
            .env_remove("AILERON_AUDIT_DIR")
            .env_remove("AILERON_URL")
            .env_remove("AILERON_TOKEN");
        command
    }

    /// [`Cli::command`], exec'd by `sh` after `setup` (a `ulimit`, say), which the process inherits.
    pub fn command_after(&self, setup: &str, args: &[&str]) -> Command {
        let aileron = self.command(&[]);
        let mut command = Command::new("sh");
        command.args(["-c", &format!("{setup} && exec \"$0\" \"$@\"")]).arg(aileron.get_program()).args(args);
        command.envs(aileron.get_envs().filter_map(|(key, value)| Some((key, value?))));
        for (key, _) in aileron.get_envs().filter(|(_, value)| value.is_none()) {
            command.env_remove(key);
        }
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).stdin(std::process::Stdio::null()).output().expect("running aileron")
    }

    /// Runs with extra environment variables and, when given, this text on standard input.
    pub fn run_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
        use std::io::Write;
        let mut command = self.command(args);
        command
            .env_remove("AILERON_VAULT_PASSPHRASE")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("running aileron");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().expect("waiting for aileron")
    }

    /// Installs a package directory with an explicit manifest; returns the hash.
    pub fn install_package(&self, name: &str, wasm: &[u8], manifest_text: &str) -> String {
        let dir = self.scratch().join(format!("pkg-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connector.wasm"), wasm).unwrap();
        std::fs::write(dir.join("manifest.toml"), manifest_text).unwrap();
        self.installed_from(&dir, &format!("github://aileron-tests/{name}@1.0.0"))
    }

    /// `connector install --from <dir> <reference> --yes --allow-unsigned`, as it ran.
    pub fn install_from(&self, dir: &Path, reference: &str) -> Output {
        self.run(&["connector", "install", "--from", dir.to_str().unwrap(), reference, "--yes", "--allow-unsigned"])
    }

    /// [`Cli::install_from`], which must succeed; the content hash it printed.
    fn installed_from(&self, dir: &Path, reference: &str) -> String {
        let output = self.install_from(dir, reference);
        assert!(output.status.success(), "installing {reference}: {}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Runs and asserts the exit code; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "aileron {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Installs a test guest as `github://aileron-tests/<name>@1.0.0` (consenting with
    /// `--yes --allow-unsigned`) and returns its content hash.
    pub fn install_guest(&self, name: &str, hosts: &[String]) -> String {
        let package = self.package(name, hosts);
        self.installed_from(&package, &format!("github://aileron-tests/{name}@1.0.0"))
    }

    /// A home with the `echo` guest installed and an action `name` that calls it.
    pub fn with_echo_action(name: &str) -> Cli {
        let cli = Cli::new();
        let hash = cli.install_guest("echo", &[]);
        cli.add_action(&ActionSpec::new(name, "echo", &hash, "echo"));
        cli
    }

    /// A daemon session: started, `action` run `n` times, stopped (its shutdown checkpoint
    /// signed and cosigned: the receipt and tamper tests' log).
    pub fn session_of_runs(&self, action: &str, n: usize) {
        self.ok(&["daemon", "start"]);
        for _ in 0..n {
            self.ok(&["action", "run", action]);
        }
        self.ok(&["daemon", "stop"]);
    }

    /// Writes the action file and `aileron action add`s it.
    pub fn add_action(&self, spec: &ActionSpec) {
        let file = self.scratch().join(format!("{}.md", spec.name));
        std::fs::write(&file, spec.render()).unwrap();
        self.ok(&["action", "add", file.to_str().unwrap()]);
    }

    pub fn package(&self, name: &str, hosts: &[String]) -> PathBuf {
        let dir = self.scratch().join(format!("pkg-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connector.wasm"), guest_wasm(name)).unwrap();
        std::fs::write(dir.join("manifest.toml"), manifest(name, hosts, "")).unwrap();
        dir
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = self.run(&["daemon", "stop"]);
    }
}

/// The lines `stream` yields, read on a thread of their own, so a test can wait for one with a
/// deadline instead of blocking on a child that never writes it.
fn lines_on_a_thread(stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stream)).map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The daemon's allocator hands freed memory back at once however the daemon was started
/// (docs/decisions/0004-actions-and-runs.md, "Allocator"): auto-started, and by hand with `aileron daemon run` (a service
/// unit's way), where nothing sets its environment. A value the user put in
/// `MIMALLOC_PURGE_DELAY` is kept — which also proves the option the daemon sets and reports is
/// the one mimalloc reads that variable into.
#[test]
fn the_daemon_returns_freed_memory_at_once_however_it_was_started() {
    let started = Cli::new();
    let mut start = started.command(&["daemon", "start"]);
    start
        .env_remove("AILERON_LISTEN")
        .env_remove("MIMALLOC_PURGE_DELAY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    assert!(start.status().unwrap().success());
    let status: Value = serde_json::from_str(&started.ok(&["daemon", "status", "--json"])).unwrap();
    assert_eq!(status["allocator"]["purge_delay_ms"], 0, "auto-started");

    // By hand, as a service unit runs it (`DaemonProcess` gives it no `MIMALLOC_PURGE_DELAY` of
    // the test's own).
    for (environment, expected) in [(vec![], 0), (vec![("MIMALLOC_PURGE_DELAY", "250".to_string())], 250)] {
        let by_hand = crate::traces::DaemonProcess::spawn(&environment);
        let (code, status) = by_hand.request("GET", "/v1/status", None);
        assert_eq!(code, 200, "{status}");
        assert_eq!(status["allocator"]["purge_delay_ms"], expected, "`aileron daemon run` with {environment:?}");
        let (stopped, _, stderr) = by_hand.stop();
        assert!(stopped, "the daemon's exit: {stderr}");
    }
}

#[test]
fn the_cli_drives_the_whole_spine_over_a_real_socket() {
    let cli = Cli::new();
    let usage = cli.run(&["action", "frobnicate"]);
    assert_eq!(usage.status.code(), Some(2), "usage errors exit 2");

    cli.ok(&["daemon", "start"]);
    let status: Value = serde_json::from_str(&cli.ok(&["daemon", "status", "--json"])).unwrap();
    assert_eq!(status["running"], true);
    let daemon_json: Value =
        serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    assert!(daemon_json["url"].as_str().unwrap().starts_with("http://127.0.0.1:"));
    let mode = std::fs::metadata(cli.home.join("daemon.json")).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);

    let package = cli.package("echo", &[]);
    let package_arg = package.to_str().unwrap();
    let reference = "github://aileron-tests/echo@1.0.0";
    let no_consent = cli.run(&["connector", "install", "--from", package_arg, reference]);
    assert_eq!(no_consent.status.code(), Some(1));
    assert!(stderr(&no_consent).contains("hint: "), "{}", stderr(&no_consent));
    assert!(stderr(&no_consent).contains("unsigned"), "the consent shows the signature status");
    let unsigned = cli.run(&["connector", "install", "--from", package_arg, reference, "--yes"]);
    assert_eq!(unsigned.status.code(), Some(1), "--yes alone does not accept an unsigned package");
    let listing: Value = serde_json::from_str(&cli.ok(&["connector", "list", "--json"])).unwrap();
    assert_eq!(listing["items"], serde_json::json!([]), "a refused consent leaves no state");
    let hash = cli.ok(&["connector", "install", "--from", package_arg, reference, "--yes", "--allow-unsigned"]);
    let hash = hash.trim();
    assert!(hash.starts_with("sha256:"), "{hash}");
    let mismatch =
        cli.run(&["connector", "install", "--from", package_arg, "github://aileron-tests/other@1.0.0", "--yes"]);
    assert!(stderr(&mismatch).contains("fqn_mismatch"), "{}", stderr(&mismatch));

    let spec = ActionSpec {
        inputs: &[("count", "integer", true), ("note", "string", false)],
        ..ActionSpec::new("count-things", "echo", hash, "echo")
    };
    let action_file = cli.scratch().join("count-things.md");
    std::fs::write(&action_file, spec.render()).unwrap();
    cli.ok(&["action", "add", action_file.to_str().unwrap()]);
    assert!(cli.ok(&["action", "list"]).contains("count-things"));
    assert!(cli.ok(&["action", "show", "count-things"]).contains("count (integer, required)"));
    // The text shown is the file's, read from it (the daemon keeps only its hash); a file edited
    // by hand since the daemon loaded it is not shown as the action, which still runs as loaded.
    let shown: Value = serde_json::from_str(&cli.ok(&["action", "show", "count-things", "--json"])).unwrap();
    assert_eq!(shown["source"], spec.render().as_str());
    let stored = cli.home.join("actions/count-things.md");
    std::fs::write(&stored, format!("{}\nEdited by hand.\n", spec.render())).unwrap();
    let shown: Value = serde_json::from_str(&cli.ok(&["action", "show", "count-things", "--json"])).unwrap();
    assert_eq!(shown.get("source"), None, "{shown}");
    assert!(cli.ok(&["action", "show", "count-things"]).contains("changed on disk since the daemon loaded it"));
    std::fs::write(&stored, spec.render()).unwrap();
    // A typed answer's failure is still the daemon's error, with its hint.
    let missing = cli.run(&["action", "show", "no-such-action"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("action_not_found") && stderr(&missing).contains("hint: "),
        "{}",
        stderr(&missing)
    );

    let result: Value = serde_json::from_str(&cli.ok(&["action", "run", "count-things", "--arg", "count=3"])).unwrap();
    assert_eq!(result["output"]["args"]["count"], 3, "--arg values are typed by the declared input");
    let result: Value =
        serde_json::from_str(&cli.ok(&["action", "run", "count-things", "--args", r#"{"count": 4, "note": "x"}"#]))
            .unwrap();
    assert_eq!(result["output"]["args"]["note"], "x");
    let bad = cli.run(&["action", "run", "count-things", "--arg", "count=3", "--arg", "extra=1"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("invalid_args") && stderr(&bad).contains("hint: "), "{}", stderr(&bad));

    cli.ok(&["action", "disable", "count-things"]);
    assert_eq!(cli.run(&["action", "run", "count-things", "--arg", "count=1"]).status.code(), Some(1));
    cli.ok(&["action", "enable", "count-things"]);

    let audit: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.executed"])).unwrap();
    let items = audit["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let id = items[0]["audit_id"].as_str().unwrap();
    let shown: Value = serde_json::from_str(&cli.ok(&["audit", "show", id])).unwrap();
    assert_eq!(shown["audit_id"], id);
    assert!(cli.ok(&["audit", "verify"]).contains("ok"));

    cli.ok(&["daemon", "stop"]);
    assert!(!cli.home.join("daemon.json").exists(), "a clean stop removes daemon.json");
    // Any command auto-starts the daemon again; state survived the restart.
    assert!(cli.ok(&["action", "list"]).contains("count-things"));
    cli.ok(&["action", "remove", "count-things"]);
    assert!(!cli.ok(&["action", "list"]).contains("count-things"));
}

#[test]
fn connectors_install_from_a_release_tarball_and_versions_coexist() {
    let cli = Cli::new();
    let mut hashes = Vec::new();
    for version in ["1.0.0", "1.1.0"] {
        let manifest_text =
            manifest("echo", &[], "").replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
        let tarball = aileron::stores::package::pack_tarball(&guest_wasm("echo"), &manifest_text, None).unwrap();
        let path = cli.scratch().join(format!("echo-{version}.tar.gz"));
        std::fs::write(&path, tarball).unwrap();
        let reference = format!("github://aileron-tests/echo@{version}");
        let hash = cli.ok(&[
            "connector",
            "install",
            "--from",
            path.to_str().unwrap(),
            &reference,
            "--yes",
            "--allow-unsigned",
        ]);
        hashes.push(hash.trim().to_string());
    }
    assert_ne!(hashes[0], hashes[1]);
    let listing: Value = serde_json::from_str(&cli.ok(&["connector", "list", "--json"])).unwrap();
    let versions: Vec<&str> =
        listing["items"].as_array().unwrap().iter().map(|i| i["version"].as_str().unwrap()).collect();
    assert!(versions.contains(&"1.0.0") && versions.contains(&"1.1.0"), "{versions:?}");

    // A tarball with anything besides the two (or three) files is refused with a hint.
    let path = cli.scratch().join("bad.tar.gz");
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (name, bytes) in [
        ("connector.wasm", guest_wasm("echo")),
        ("manifest.toml", manifest("echo", &[], "").into_bytes()),
        ("extra.sh", b"#!/bin/sh".to_vec()),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, bytes.as_slice()).unwrap();
    }
    std::fs::write(&path, builder.into_inner().unwrap().finish().unwrap()).unwrap();
    let refused = cli.run(&[
        "connector",
        "install",
        "--from",
        path.to_str().unwrap(),
        "github://aileron-tests/echo@1.0.0",
        "--yes",
        "--allow-unsigned",
    ]);
    assert_eq!(refused.status.code(), Some(1));
    let message = stderr(&refused);
    assert!(message.contains("malformed_tarball") && message.contains("hint: "), "{message}");
}

/// The gated action `fetch` (input `url`) on `http_get`: its spec for the connector `hash`.
fn gated_fetch(hash: &str) -> ActionSpec<'_> {
    ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", hash, "get")
    }
}

/// Installs `http_get` reaching `upstream` and adds [`gated_fetch`].
fn add_gated_fetch(cli: &Cli, upstream: &crate::fake_github::FakeGithub) {
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    cli.add_action(&gated_fetch(&hash));
}

#[test]
fn gated_runs_exit_75_and_the_cli_decides() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    add_gated_fetch(&cli, &upstream);
    let url = format!("url={}/status/200", upstream.base_url());

    let mut ids = Vec::new();
    for _ in 0..2 {
        let pending = cli.run(&["action", "run", "fetch", "--arg", &url]);
        assert_eq!(pending.status.code(), Some(75), "pending approval exits 75: {}", stderr(&pending));
        assert!(stderr(&pending).contains("aileron open approval"), "{}", stderr(&pending));
        let body: Value = serde_json::from_slice(&pending.stdout).unwrap();
        ids.push(body["approval_id"].as_str().unwrap().to_string());
    }
    let listing: Value = serde_json::from_str(&cli.ok(&["approval", "list", "--json"])).unwrap();
    assert_eq!(listing["items"].as_array().unwrap().len(), 2);
    let printed = cli.ok(&["open", "approval", &ids[0], "--print"]);
    assert!(
        printed.trim().contains("/approvals/login?ticket=") && printed.contains(&format!("focus={}", ids[0])),
        "{printed}"
    );

    // Each decision says what it decided (an id an agent handed over could name another).
    let approved = cli.run(&["approval", "approve", &ids[0]]);
    assert!(approved.status.success(), "{}", stderr(&approved));
    assert!(
        stderr(&approved).contains(&format!("{}  fetch", ids[0]))
            && stderr(&approved).contains(url.trim_start_matches("url=")),
        "{}",
        stderr(&approved)
    );
    cli.ok(&["approval", "deny", &ids[1], "--reason", "not today"]);
    let again = cli.run(&["approval", "approve", &ids[1]]);
    assert_eq!(again.status.code(), Some(1), "a decided approval cannot be decided again");
    assert!(stderr(&again).contains("already decided"), "{}", stderr(&again));
    let mut status = String::new();
    for _ in 0..300 {
        status = cli.ok(&["approval", "status", &ids[0]]);
        if status.starts_with("completed") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(status.starts_with("completed (audit audit-"), "{status}");
    assert_eq!(cli.ok(&["approval", "status", &ids[1]]).trim(), "denied: not today");
    assert_eq!(upstream.recorder.count(), 1, "approved once, denied never");
    drop(runtime);
}

/// The tenth re-attack: the listing showed the arguments as one JSON line in the agent's order,
/// cut at 2,000 characters, so a long memo sent first hid the recipient and the amount the user
/// then approved. Each argument has its line, in name order, each value cut on its own.
#[test]
fn the_approval_listing_shows_every_argument_whatever_the_agent_sends_first() {
    let cli = Cli::new();
    let hash = cli.install_guest("echo", &[]);
    let spec = ActionSpec {
        inputs: &[("memo", "string", true), ("amount", "integer", true), ("to", "string", true)],
        approval: true,
        ..ActionSpec::new("pay", "echo", &hash, "echo")
    };
    cli.add_action(&spec);
    let memo = "Monthly rent for flat 3B, as agreed with the landlord. ".repeat(40);
    let args = serde_json::json!({ "memo": memo, "amount": 5, "to": "attacker-account-999" }).to_string();
    assert!(args.starts_with("{\"memo\""), "the agent's order is kept on the way: {args}");
    let pending = cli.run(&["action", "run", "pay", "--args", &args]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    for listing in [cli.ok(&["approval", "list"])] {
        let lines: Vec<&str> = listing.lines().collect();
        let at = |prefix: &str| {
            lines.iter().position(|line| line.starts_with(prefix)).unwrap_or_else(|| panic!("{listing}"))
        };
        assert!(
            at("    amount = 5") < at("    memo = ") && at("    memo = ") < at("    to = \"attacker-account-999\"")
        );
        let memo_line = lines[at("    memo = ")];
        assert!(memo_line.contains(&format!("({} more characters", memo.len() + 2 - 400)), "{memo_line}");
    }
}

/// The ninth re-attack: a gated run whose arguments (an agent's) or output (a connector's) nested
/// ~125 levels was journaled ~129 deep, and the next start could not read the approval journal
/// back (the daemon refused to start). Values are refused where they enter, at 64 levels; what
/// is taken is journaled, approved, run and read back across a restart.
#[test]
fn values_nested_past_the_limit_are_refused_where_they_enter_and_the_rest_survive_a_restart() {
    let cli = Cli::new();
    let hash = cli.install_guest("echo", &[]);
    let spec = ActionSpec {
        inputs: &[("request", "object", true)],
        approval: true,
        ..ActionSpec::new("file", "echo", &hash, "echo")
    };
    cli.add_action(&spec);
    let nested = |levels: usize| {
        let mut value = serde_json::json!(1);
        for _ in 0..levels {
            value = serde_json::json!({ "a": value });
        }
        serde_json::json!({ "request": value }).to_string()
    };
    // An agent's arguments: refused before any approval exists.
    let refused = cli.run(&["action", "run", "file", "--args", &nested(120)]);
    assert!(!refused.status.success() && refused.status.code() != Some(75), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("argument `request` nests more than 64 levels deep"), "{}", stderr(&refused));
    // Taken (63 levels), but what the connector prints (the echo, two levels more) is refused.
    let taken = cli.run(&["action", "run", "file", "--args", &nested(63)]);
    assert_eq!(taken.status.code(), Some(75), "{}", stderr(&taken));
    let deep = serde_json::from_slice::<Value>(&taken.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();
    cli.ok(&["approval", "approve", &deep]);
    let shallow = cli.run(&["action", "run", "file", "--args", &nested(40)]);
    assert_eq!(shallow.status.code(), Some(75), "{}", stderr(&shallow));
    let shallow =
        serde_json::from_slice::<Value>(&shallow.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();
    cli.ok(&["approval", "approve", &shallow]);
    let status_of = |id: &str| {
        let mut status = String::new();
        for _ in 0..200 {
            status = cli.ok(&["approval", "status", id]);
            if !status.starts_with("approved") && !status.starts_with("running") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        status
    };
    assert!(status_of(&deep).contains("nests more than 64 levels deep"), "{}", status_of(&deep));
    assert!(status_of(&shallow).starts_with("completed"), "{}", status_of(&shallow));
    let pending = cli.run(&["action", "run", "file", "--args", &nested(64)]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    // Everything journaled reads back: the daemon starts again, the pending one still waits.
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["daemon", "start"]);
    let listed: Value = serde_json::from_str(&cli.ok(&["approval", "list", "--json"])).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
}

/// The ninth re-attack: with the home in a directory others may write (`/tmp`), another user made
/// `<home>-witness` first (its own key cosigned the log, or garbage switched checkpoints off), or
/// a link there that the daemon followed; and an `AILERON_AUDIT_DIR` another user owns let them
/// rename the whole log away. Each is refused, naming the directory (the tests run as root; the
/// other user is `nobody`).
#[test]
fn state_directories_another_user_made_or_linked_are_refused() {
    let cli = Cli::new();
    let witness = cli.scratch().join("home-witness");
    let elsewhere = cli.scratch().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &witness).unwrap();
    let linked = cli.run(&["audit", "verify"]);
    assert!(!linked.status.success());
    assert!(stderr(&linked).contains("home-witness is a symbolic link"), "{}", stderr(&linked));
    std::fs::remove_file(&witness).unwrap();
    std::fs::create_dir(&witness).unwrap();
    std::os::unix::fs::chown(&witness, Some(65534), Some(65534)).unwrap();
    let theirs = cli.run(&["daemon", "start"]);
    assert!(!theirs.status.success());
    assert!(stderr(&theirs).contains("home-witness belongs to user 65534"), "{}", stderr(&theirs));
    std::fs::remove_dir(&witness).unwrap();
    cli.ok(&["daemon", "start"]);
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["audit", "verify"]);
    let shared = cli.scratch().join("shared-audit");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
    let relocated = cli.run_with(&["audit", "verify"], &[("AILERON_AUDIT_DIR", shared.to_str().unwrap())], None);
    assert!(!relocated.status.success());
    assert!(stderr(&relocated).contains("shared-audit belongs to user 65534"), "{}", stderr(&relocated));
}

/// SPEC §8's expiry, across a restart: an approval whose `expires_after` passed while the daemon
/// was down ends `expired` as the daemon starts (audited once, never twice over more restarts),
/// cannot be approved, and its action never runs; a bad `expires_after` is refused naming the
/// field.
#[test]
fn an_approval_that_expired_while_the_daemon_was_down_ends_expired_at_start() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    let spec = gated_fetch(&hash);
    let too_long =
        spec.render().replace("[approval]\nrequired = true\n", "[approval]\nrequired = true\nexpires_after = \"8d\"\n");
    std::fs::create_dir_all(cli.scratch().join("too-long")).unwrap();
    let file = cli.scratch().join("too-long/fetch.md");
    std::fs::write(&file, &too_long).unwrap();
    let refused = cli.run(&["action", "add", file.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("approval.expires_after") && stderr(&refused).contains("outside 1m..7d"),
        "{}",
        stderr(&refused)
    );
    cli.add_action(&spec);
    let url = format!("url={}/status/200", upstream.base_url());
    let pending = cli.run(&["action", "run", "fetch", "--arg", &url]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    let id = serde_json::from_slice::<Value>(&pending.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();
    assert!(cli.ok(&["approval", "list"]).contains("expires in 23 h 59 min"));
    cli.ok(&["daemon", "stop"]);

    // Two days pass while the daemon is down: the journaled request is that old.
    let journal = cli.home.join("approvals.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let line: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let requested_at = line["entry"]["requested_at"].as_str().unwrap().to_string();
    std::fs::write(&journal, text.replace(&requested_at, "2026-01-01T00:00:00.000Z")).unwrap();

    cli.ok(&["daemon", "start"]);
    assert_eq!(cli.ok(&["approval", "status", &id]).trim(), "expired: nobody decided it in time; it did not run");
    let late = cli.run(&["approval", "approve", &id]);
    assert!(!late.status.success() && stderr(&late).contains("expired before anyone decided it"), "{}", stderr(&late));
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["daemon", "start"]);
    let expired: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "approval.expired"])).unwrap();
    let records = expired["items"].as_array().unwrap();
    assert_eq!(records.len(), 1, "audited once over two starts: {expired:#}");
    assert_eq!(records[0]["payload"]["aileron.approval.decision"], "timeout");
    assert_eq!(records[0]["actor"]["type"], "service");
    assert_eq!(upstream.recorder.count(), 0, "an expired approval never runs");
    drop(runtime);
}

/// `aileron approval watch`: what already waits, then each new approval as it arrives (the
/// terminal bell rung for it), then how each ends — until the daemon stops.
#[test]
fn approval_watch_prints_requests_as_they_arrive_and_how_they_end() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    add_gated_fetch(&cli, &upstream);
    let ask = |n: usize| {
        let pending =
            cli.run(&["action", "run", "fetch", "--arg", &format!("url={}/status/200?n={n}", upstream.base_url())]);
        assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
        serde_json::from_slice::<Value>(&pending.stdout).unwrap()["approval_id"].as_str().unwrap().to_string()
    };
    let waiting = ask(0);
    let mut watcher = cli
        .command(&["approval", "watch"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let seen = lines_on_a_thread(watcher.stdout.take().unwrap());
    let next_with = |needle: &str| -> String {
        loop {
            let line = seen
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no line with {needle}"));
            if line.contains(needle) {
                return line;
            }
        }
    };
    assert!(next_with(&waiting).contains("fetch"), "what already waits is shown first");
    let arrived = ask(1);
    let line = next_with(&arrived);
    assert!(line.contains("fetch"), "{line}");
    // Its arguments, a line each, follow.
    assert!(next_with("    url = ").contains("n=1"));
    assert!(next_with("expires in").contains("23 h 59 min"));
    cli.ok(&["approval", "deny", &arrived]);
    assert_eq!(next_with(&arrived).trim(), format!("{arrived}  denied"));
    cli.ok(&["approval", "cancel", &waiting]);
    assert_eq!(next_with(&waiting).trim(), format!("{waiting}  cancelled"));
    cli.ok(&["daemon", "stop"]);
    let status = watcher.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut watcher.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert_eq!(err.matches('\x07').count(), 2, "the bell rang once per approval: {err:?}");
    assert!(err.contains("the daemon closed the stream"), "{err}");
    drop(runtime);
}

/// SPEC §8's webhooks: an approval registered while `notify.toml` names a webhook is POSTed to
/// it, signed `X-Aileron-Signature: sha256=<HMAC-SHA256>` with the vault secret the file names,
/// without the arguments; a receiver that fails first gets it again after a backoff; the delivery
/// is one `approval.notified` record naming the receiver by host and port only.
#[test]
fn a_webhook_gets_each_approval_signed_and_retried_without_its_arguments() {
    use std::io::{BufRead, Read, Write};
    const HOOK_SECRET: &str = "hook-signing-secret-0123456789";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let receiver = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = receiver.local_addr().unwrap().port();
    let (deliveries, received) = std::sync::mpsc::channel::<(Vec<String>, String)>();
    std::thread::spawn(move || {
        for (answered, stream) in receiver.incoming().flatten().enumerate() {
            let mut reader = std::io::BufReader::new(stream);
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push(line.trim_end().to_string());
            }
            let length = head
                .iter()
                .find_map(|h| h.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            // The first delivery fails as a restarting receiver would; the retry succeeds.
            let status = if answered == 0 { "500 Internal Server Error" } else { "200 OK" };
            let mut stream = reader.into_inner();
            let _ = stream
                .write_all(format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").as_bytes());
            let _ = deliveries.send((head, String::from_utf8(body).unwrap()));
        }
    });
    let cli = Cli::new();
    let init = cli.run_with(&["vault", "init"], &[("AILERON_VAULT_PASSPHRASE", "notify test passphrase")], None);
    assert!(init.status.success(), "{}", stderr(&init));
    let set = cli.run_with(&["secret", "set", "notify/hooks"], &[], Some(&format!("{HOOK_SECRET}\n")));
    assert!(set.status.success(), "{}", stderr(&set));
    std::fs::write(
        cli.home.join("notify.toml"),
        format!("[[webhook]]\nurl = \"http://127.0.0.1:{port}/hook?token=receiverToken\"\nsecret = \"notify/hooks\"\n"),
    )
    .unwrap();
    add_gated_fetch(&cli, &upstream);
    let argument = format!("{}/status/200?secretish=argumentValue", upstream.base_url());
    let pending = cli.run(&["action", "run", "fetch", "--arg", &format!("url={argument}")]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    let id = serde_json::from_slice::<Value>(&pending.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();

    let wait = || received.recv_timeout(std::time::Duration::from_secs(20)).expect("a delivery");
    let (first, second) = (wait(), wait());
    assert_eq!(first.1, second.1, "the retry sends the same body");
    let (head, body) = second;
    assert!(head[0].starts_with("POST /hook?token=receiverToken HTTP/1.1"), "{head:?}");
    let signed = head
        .iter()
        .find_map(|h| h.strip_prefix("x-aileron-signature: ").or_else(|| h.strip_prefix("X-Aileron-Signature: ")))
        .unwrap_or_else(|| panic!("no signature in {head:?}"));
    assert_eq!(signed, aileron_core::approval::notify::signature(HOOK_SECRET.as_bytes(), body.as_bytes()));
    let sent: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (sent["approval_id"].as_str(), sent["kind"].as_str(), sent["action"].as_str()),
        (Some(id.as_str()), Some("action"), Some("fetch"))
    );
    assert!(sent["review_url"].as_str().unwrap().ends_with(&format!("/approvals?focus={id}")), "{sent}");
    assert!(sent.get("arguments").is_none() && !body.contains("argumentValue"), "no arguments unless asked: {body}");

    let mut notified = Value::Null;
    for _ in 0..200 {
        notified =
            serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "approval.notified"])).unwrap();
        if !notified["items"].as_array().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let record = &notified["items"][0]["payload"];
    assert_eq!(record["aileron.approval.id"], id.as_str(), "{notified:#}");
    assert_eq!(record["aileron.notify.channel"], "webhook");
    assert_eq!(record["aileron.notify.outcome"], "delivered");
    assert_eq!(record["aileron.notify.attempts"], 2);
    assert_eq!(record["aileron.notify.status"], 200);
    assert_eq!(record["aileron.notify.target"], format!("127.0.0.1:{port}"));
    let all = cli.ok(&["audit", "list", "--json", "--limit", "1000"]);
    assert!(!all.contains("receiverToken") && !all.contains(HOOK_SECRET), "neither the URL's query nor the key");
    drop(runtime);
}

/// SPEC §8's desktop notification: on a private session bus (Debian's `dbus-daemon --session`),
/// a new approval becomes one `org.freedesktop.Notifications.Notify` call — seen by a
/// `dbus-monitor` on that bus and answered by a stand-in notification service — naming the action
/// and how to open it, without the arguments; the delivery is an `approval.notified` record.
#[test]
fn a_desktop_notification_is_sent_on_the_session_bus() {
    use futures_util::StreamExt;
    use std::io::BufRead;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    let socket = cli.scratch().join("session-bus");
    let mut bus = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1", &format!("--address=unix:path={}", socket.display())])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dbus-daemon (cargo xtask installs Debian's dbus-daemon)");
    let mut address = String::new();
    std::io::BufReader::new(bus.stdout.take().unwrap()).read_line(&mut address).unwrap();
    let address = address.trim().to_string();
    let mut monitor = Command::new("dbus-monitor")
        .args(["--address", &address, "type='method_call',interface='org.freedesktop.Notifications'"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dbus-monitor (cargo xtask installs Debian's dbus-bin)");
    let (monitored, watched) = std::sync::mpsc::channel::<String>();
    let monitor_out = monitor.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(monitor_out).lines().map_while(Result::ok) {
            let _ = monitored.send(line);
        }
    });
    // The stand-in notification service: owns the name, records each Notify, answers an id.
    let (notified, notifications) = std::sync::mpsc::channel::<(String, String, String)>();
    let service = runtime.block_on(async {
        zbus::connection::Builder::address(address.as_str())
            .unwrap()
            .name("org.freedesktop.Notifications")
            .unwrap()
            .build()
            .await
            .unwrap()
    });
    let served = service.clone();
    runtime.spawn(async move {
        let mut calls = zbus::MessageStream::from(&served);
        while let Some(Ok(message)) = calls.next().await {
            let header = message.header();
            if header.member().map(|member| member.as_str()) != Some("Notify") {
                continue;
            }
            type Notify = (
                String,
                u32,
                String,
                String,
                String,
                Vec<String>,
                std::collections::HashMap<String, zbus::zvariant::OwnedValue>,
                i32,
            );
            let (app, _, _, title, body, _, _, _): Notify = message.body().deserialize().unwrap();
            let _ = notified.send((app, title, body));
            served.reply(&header, &(7u32,)).await.unwrap();
        }
    });
    // Give the monitor a moment to attach before anything is sent.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = cli.run_with(&["daemon", "start"], &[("DBUS_SESSION_BUS_ADDRESS", &address)], None);
    assert!(started.status.success(), "{}", stderr(&started));
    add_gated_fetch(&cli, &upstream);
    let pending = cli.run(&[
        "action",
        "run",
        "fetch",
        "--arg",
        &format!("url={}/status/200?private=argumentValue", upstream.base_url()),
    ]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    let id = serde_json::from_slice::<Value>(&pending.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();

    let (app, title, body) = notifications.recv_timeout(std::time::Duration::from_secs(20)).expect("a Notify call");
    assert_eq!(app, "Aileron");
    assert!(title.contains("asks for your approval"), "{title}");
    assert!(body.contains("fetch") && body.contains(&format!("aileron open approval {id}")), "{body}");
    assert!(!body.contains("argumentValue"), "no arguments on the desktop: {body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    while !seen.iter().any(|line: &String| line.contains("member=Notify")) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        seen.push(watched.recv_timeout(left).unwrap_or_else(|_| panic!("the monitor saw no Notify: {seen:#?}")));
    }
    let mut record = Value::Null;
    for _ in 0..200 {
        let listed: Value =
            serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "approval.notified"])).unwrap();
        record = listed["items"][0]["payload"].clone();
        if !record.is_null() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        (record["aileron.notify.channel"].as_str(), record["aileron.notify.outcome"].as_str()),
        (Some("desktop"), Some("delivered")),
        "{record}"
    );
    cli.ok(&["daemon", "stop"]);
    let _ = monitor.kill();
    let _ = bus.kill();
    let _ = (monitor.wait(), bus.wait());
    drop(runtime);
}

/// SPEC §8's edit before approve: `approval approve --set` shows the edited arguments, checks them
/// against the action's inputs, and the run uses them (the upstream sees the edit, never the
/// request); the decision is audited with `aileron.approval.edited` and both argument hashes (no
/// values), the agent's result says the arguments were edited, and without a terminal an edit
/// needs `--yes`.
#[test]
fn an_approver_edits_the_arguments_and_the_run_uses_them() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let cli = Cli::new();
    add_gated_fetch(&cli, &upstream);
    let asked = format!("{}/status/200?asked=yes", upstream.base_url());
    let pending = cli.run(&["action", "run", "fetch", "--arg", &format!("url={asked}")]);
    assert_eq!(pending.status.code(), Some(75), "{}", stderr(&pending));
    let id = serde_json::from_slice::<Value>(&pending.stdout).unwrap()["approval_id"].as_str().unwrap().to_string();

    let unknown = cli.run(&["approval", "approve", &id, "--set", "branch=main", "--yes"]);
    assert!(!unknown.status.success(), "an argument the action does not take");
    assert!(stderr(&unknown).contains("invalid_args") && stderr(&unknown).contains("hint:"), "{}", stderr(&unknown));
    let edited = format!("{}/status/200?edited=yes", upstream.base_url());
    let no_terminal = cli.run(&["approval", "approve", &id, "--set", &format!("url={edited}")]);
    assert!(!no_terminal.status.success() && stderr(&no_terminal).contains("--yes"), "{}", stderr(&no_terminal));
    assert_eq!(upstream.recorder.count(), 0, "nothing ran yet");

    let approved = cli.run(&["approval", "approve", &id, "--set", &format!("url={edited}"), "--yes"]);
    assert!(approved.status.success(), "{}", stderr(&approved));
    assert!(String::from_utf8_lossy(&approved.stdout).contains(&format!("edited arguments: {{\"url\":\"{edited}\"}}")));
    let mut view = Value::Null;
    for _ in 0..300 {
        view = serde_json::from_str(&cli.ok(&["approval", "status", &id, "--json"])).unwrap();
        if view["status"] == "completed" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(view["status"], "completed", "{view}");
    assert_eq!(view["edited_args"], serde_json::json!({ "url": edited }), "the agent is told what ran: {view}");
    let ran: Vec<String> = upstream.recorder.requests().into_iter().map(|r| r.path_and_query).collect();
    assert_eq!(ran, ["/status/200?edited=yes"], "the run used the edit, once");
    let decided: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "approval.approved"])).unwrap();
    let payload = &decided["items"][0]["payload"];
    assert_eq!(payload["aileron.approval.edited"], true, "{decided:#}");
    assert!(payload["aileron.approval.args_sha256"].as_str().unwrap().starts_with("sha256:"));
    assert_ne!(payload["aileron.approval.args_sha256"], payload["aileron.approval.edited_args_sha256"]);
    assert!(!decided.to_string().contains("edited=yes"), "hashes, never the values");
    drop(runtime);
}

#[test]
fn the_demo_runs_end_to_end_offline() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_aileron")).arg("demo").stdin(std::process::Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", stderr(&output));
    for step in [
        "capability_denied",
        "HTTP 202 pending_approval",
        "denied",
        "status: awaiting_vault",
        "result: completed",
        "the stand-in received  Authorization: Bearer ghp_demo",
        "no — the connector never saw it",
        // The spawn example: git log through the confined helper, audited by argv shape.
        "— Add notes",
        "audited as `spawn`: argv [\"git\",\"--no-optional-locks\",\"-C\",\"{repo}\"",
        "the home is hidden from every spawned program",
        "hash chain intact",
        "stopped the daemon",
    ] {
        assert!(stdout.contains(step), "the demo shows `{step}`:\n{stdout}");
    }
}

/// A process that may not reserve the pool's ~4 TiB of address space (`ulimit -v`, a kernel with a
/// 39-bit address space, valgrind) still starts and runs actions: the pool shrinks by halves to
/// what fits and the daemon says so, with the limit to raise. Before, the daemon refused to start.
#[test]
fn the_daemon_runs_actions_under_an_address_space_limit() {
    // 256 GiB: room for the process and 32 slots of 4 GiB, not for 1,024.
    const LIMIT: &str = "ulimit -v 268435456";
    let cli = Cli::new();
    let output = cli.command_after(LIMIT, &["demo"]).stdin(std::process::Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed under {LIMIT}:\n{stdout}\n{}", stderr(&output));
    for step in ["result: completed", "hash chain intact", "stopped the daemon"] {
        assert!(stdout.contains(step), "the demo shows `{step}`:\n{stdout}");
    }

    let mut daemon = cli
        .command_after(LIMIT, &["daemon", "run"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let received = lines_on_a_thread(daemon.stderr.take().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut said = Vec::new();
    while let Ok(line) = received.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
        let warned = line.contains("connector calls can run at once, not 1024");
        said.push(line);
        if warned {
            break;
        }
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    let said = said.join("\n");
    // 256 GiB holds 32 slots of 4 GiB and their guards, not 64.
    assert!(said.contains("warning: at most 32 connector calls can run at once, not 1024"), "{said}");
    assert!(said.contains("each call's slot reserves 4 GiB"), "{said}");
}

/// Every `sh` block of README.md, in order, in one throwaway home, run as written: lines joined
/// at a trailing `\\`; skipped only the listed `cargo` lines (this test's own build already ran them) and
/// the lines marked `# needs network:`, `# needs an agent:` or `# foreground:`. The environment
/// gives what the blocks say they read (`AILERON_VAULT_PASSPHRASE`, `GITHUB_TOKEN`,
/// `SMTP_PASSWORD`, the AWS keys). A broken doc fails here.
#[test]
fn the_readme_runs_as_written() {
    let (stdout, stderr) = run_documentation(
        "README.md",
        25,
        &["cargo xtask demo", "cargo xtask test", "cargo xtask build-guests", "cargo install --path crates/aileron"],
    );
    assert!(
        stderr.contains("signed by github://aileron/github-issues"),
        "the tour installs a verified package: {stderr}"
    );
    assert!(stdout.contains("list-issues"), "the action is listed: {stdout}");
    assert!(stdout.contains("hash chain intact") || stderr.contains("hash chain intact"), "{stdout}{stderr}");
    assert!(stderr.contains("bound api_key/github:aileron:github-issues/default"), "{stderr}");
    assert!(stdout.contains("smtp/password") && !stdout.contains("readme-smtp-password"), "{stdout}");
    // "Receipts and the audit log elsewhere": a receipt checked offline, a published copy checked.
    assert!(stdout.contains("ok: record") && stdout.contains("signed tree of"), "{stdout}");
    assert!(stdout.contains("published, cosigned checkpoint(s) match the log"), "{stdout}");
    // "Give your agent GitHub without giving it your token": the spec-only connector installs,
    // binds and shows each operation, a GraphQL merge gated like the REST one.
    assert!(stderr.contains("bound api_key/github:aileron:github-cli/gh from $GITHUB_TOKEN"), "{stderr}");
    assert!(
        stdout.contains("send a launched agent's POST /graphql naming the GraphQL field mergePullRequest requests to api.github.com (port 443) with your bound credential, each one only after you approve it"),
        "{stdout}"
    );
    assert!(
        stderr
            .contains("bound aws_sigv4/github:aileron:aws-cli/aws from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY"),
        "{stderr}"
    );
    for secret in ["ghp_readmeTestToken", "readmeTestSecretAccessKey"] {
        assert!(!stdout.contains(secret) && !stderr.contains(secret), "no output shows {secret}");
    }
}

/// The connector author's path in `connectors/README.md`, as written: from a module to an
/// installed connector, an action pinned to its hash, and a run — offline.
#[test]
fn the_connector_readme_runs_as_written() {
    let (stdout, stderr) = run_documentation("connectors/README.md", 6, &["cargo xtask build-guests"]);
    let compact: String = stdout.split_whitespace().collect();
    assert!(compact.contains(r#""text":"hello""#), "the action ran the module: {stdout}\n{stderr}");
    assert!(stdout.contains("action.executed"), "and the run is in the audit trail: {stdout}");
}

/// Runs every `sh` block of a document (relative to the repository root), in order, as one bash
/// script with `set -euo pipefail`, joining continued lines, in a throwaway `HOME` and
/// `AILERON_HOME`. Skipped: lines marked `# needs network:`, `# needs an agent:` or
/// `# foreground:`, and `cargo` lines — each of which must be in `cargo_lines` (this test's own
/// build has already done them), so no line is ever skipped silently. At least `min_run`
/// commands must run. The environment gives what the blocks say they read
/// (`AILERON_VAULT_PASSPHRASE`, `GITHUB_TOKEN`, `SMTP_PASSWORD`). Returns stdout and stderr.
fn run_documentation(document: &str, min_run: usize, cargo_lines: &[&str]) -> (String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf();
    let text = std::fs::read_to_string(root.join(document)).unwrap();
    let blocks: Vec<&str> = text.split("```sh\n").skip(1).filter_map(|b| b.split("```").next()).collect();
    assert!(!blocks.is_empty(), "{document} has sh blocks");
    let mut script = String::from("set -euo pipefail\n");
    let (mut run, mut skipped) = (0, Vec::new());
    for block in &blocks {
        for line in block.replace("\\\n", " ").lines() {
            let trimmed = line.trim();
            let marked = ["# needs network:", "# needs an agent:", "# foreground:"].iter().any(|m| trimmed.contains(m));
            if trimmed.starts_with("cargo ") {
                let command = trimmed.split('#').next().unwrap().trim();
                assert!(
                    cargo_lines.contains(&command),
                    "{document}: `{command}` would be skipped silently; run it or list it"
                );
                skipped.push(trimmed.to_string());
                continue;
            }
            if marked {
                skipped.push(trimmed.to_string());
                continue;
            }
            if !trimmed.is_empty() && !trimmed.starts_with('#') {
                run += 1;
            }
            script.push_str(line);
            script.push('\n');
        }
    }
    assert!(run >= min_run, "{document}: most documented commands run ({run} ran, skipped: {skipped:#?})");
    eprintln!("{document}: {run} lines ran; skipped, as marked: {skipped:#?}");
    let temp = tempfile::tempdir().unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_aileron")).parent().unwrap().to_path_buf();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&root)
        .env("HOME", temp.path())
        .env("AILERON_HOME", temp.path().join("home"))
        .env("PATH", path)
        .env("AILERON_VAULT_PASSPHRASE", "readme test passphrase")
        .env("GITHUB_TOKEN", "ghp_readmeTestToken000000000000000000000")
        .env("AWS_ACCESS_KEY_ID", "AKIAREADMETEST000000")
        .env("AWS_SECRET_ACCESS_KEY", "readmeTestSecretAccessKey000000000000000")
        .env("SMTP_PASSWORD", "readme-smtp-password")
        .env_remove("AILERON_URL")
        .env_remove("AILERON_TOKEN")
        .env_remove("AILERON_AUDIT_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned());
    let _ = Command::new(env!("CARGO_BIN_EXE_aileron"))
        .args(["daemon", "stop"])
        .env("AILERON_HOME", temp.path().join("home"))
        .output();
    assert!(output.status.success(), "{document} failed:\n{script}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

/// `aileron status` on one screen, with and without a daemon, and shell completions.
#[test]
fn status_and_completions() {
    let cli = Cli::new();
    assert!(cli.ok(&["status"]).contains("not running"));
    cli.ok(&["daemon", "start"]);
    let screen = cli.ok(&["status"]);
    for line in [
        "daemon      http://127.0.0.1:",
        "vault       absent",
        "connectors  0",
        "approvals   0 pending",
        "sessions    0 live",
    ] {
        assert!(screen.contains(line), "{line}: {screen}");
    }
    let json: Value = serde_json::from_str(&cli.ok(&["status", "--json"])).unwrap();
    assert_eq!(json["running"], true);
    assert_eq!(json["counts"]["sessions_active"], 0);
    for shell in ["bash", "zsh", "fish"] {
        let script = cli.ok(&["completions", shell]);
        assert!(script.contains("aileron") && script.contains("binding"), "{shell} completions cover the commands");
    }
    let page = cli.ok(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH aileron"),
        "a roff man page: {}",
        &page[..page.len().min(200)]
    );
    assert!(page.contains("binding") && page.contains("AILERON_HOME"), "it documents the commands and the environment");
    let bad = cli.run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is a usage error");
}

/// The common failures print their message once and exactly one `hint:` line; their exact text
/// is pinned by snapshots (`tests/it/snapshots/`; review changes with `cargo insta review`, or
/// regenerate with `INSTA_UPDATE=always`).
#[test]
fn errors_print_once_with_one_hint() {
    let cli = Cli::new();
    let bad = cli.scratch().join("bad-action.md");
    std::fs::write(&bad, "+++\nname = \"x\"\nversion = \"1.0\"\n+++\n").unwrap();
    let out = cli.scratch().join("out.tar.gz").to_str().unwrap().to_string();
    let echo = cli.package("echo", &[]);
    let unknown_key = cli.scratch().join("unknown-key");
    std::fs::create_dir_all(&unknown_key).unwrap();
    std::fs::write(unknown_key.join("connector.wasm"), guest_wasm("echo")).unwrap();
    std::fs::write(unknown_key.join("manifest.toml"), manifest("echo", &[], "bogus = 1\n")).unwrap();
    let not_a_tarball = cli.scratch().join("not-a-tarball.tar.gz");
    std::fs::write(&not_a_tarball, b"plain text").unwrap();
    let signed_by_nobody = cli.scratch().join("signed-by-nobody.tar.gz");
    let package =
        aileron::stores::package::pack_tarball(&guest_wasm("echo"), &manifest("echo", &[], ""), Some(&[7u8; 64]))
            .unwrap();
    std::fs::write(&signed_by_nobody, package).unwrap();
    let install = |from: &Path, reference: &str| -> Vec<String> {
        ["connector", "install", "--from", from.to_str().unwrap(), reference, "--yes", "--allow-unsigned"]
            .map(String::from)
            .to_vec()
    };
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("action_add_parse_error", vec!["action".into(), "add".into(), bad.to_str().unwrap().into()]),
        ("action_run_unknown", vec!["action".into(), "run".into(), "missing".into()]),
        ("connector_install_unknown_scheme", vec!["connector".into(), "install".into(), "svn://x/y@1.0.0".into()]),
        ("binding_setup_not_installed", vec!["binding".into(), "setup".into(), "github://nobody/none".into()]),
        ("vault_unlock_no_passphrase", vec!["vault".into(), "unlock".into()]),
        ("keyring_trust_bad_authority", vec!["keyring".into(), "trust".into(), "acme".into()]),
        (
            "action_pack_parse_error",
            vec!["action".into(), "pack".into(), bad.to_str().unwrap().into(), "--out".into(), out.clone()],
        ),
        (
            "connector_pack_unknown_key",
            vec!["connector".into(), "pack".into(), unknown_key.to_str().unwrap().into(), "--out".into(), out.clone()],
        ),
        ("connector_install_malformed_tarball", install(&not_a_tarball, "github://aileron-tests/echo@1.0.0")),
        ("connector_install_fqn_mismatch", install(&echo, "github://aileron-tests/other@1.0.0")),
        ("connector_install_signature_failure", install(&signed_by_nobody, "github://aileron-tests/echo@1.0.0")),
    ];
    for (name, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = cli.run(&args);
        let stderr = stderr(&output).replace(cli.scratch().to_str().unwrap(), "<scratch>");
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{args:?} prints one hint:\n{stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{args:?} prints one error:\n{stderr}"
        );
        insta::assert_snapshot!(name, stderr);
    }
}

/// A connector's `aileron_host.log` lines reach the user: in the run's result and audit record,
/// on `action run --verbose`, for a failed step too, escaped (no terminal control gets through).
#[test]
fn connector_logs_are_shown_escaped_in_the_result_the_audit_and_verbose_runs() {
    let cli = Cli::new();
    let hash = cli.install_guest("logger", &[]);
    cli.add_action(&ActionSpec {
        inputs: &[("lines", "integer", false), ("fail", "boolean", false)],
        ..ActionSpec::new("logger", "logger", &hash, "log")
    });
    let run = cli.run(&["action", "run", "logger", "--verbose", "--arg", "lines=3"]);
    let err = stderr(&run);
    assert!(run.status.success(), "{err}");
    assert!(
        err.contains("[main] info: step 0 of the work") && err.contains("[main] info: step 1 of the work"),
        "{err}"
    );
    assert!(err.contains("\\u{1b}[31mred") && err.contains("\\u{202e}reversed"), "escaped: {err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{202e}'), "no raw control reaches the terminal");
    let executed: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.executed"])).unwrap();
    let logs = &executed["items"][0]["payload"]["aileron.action.steps"][0]["aileron.connector.logs"];
    assert_eq!(logs.as_array().map(Vec::len), Some(3), "{executed}");

    let failed = cli.run(&["action", "run", "logger", "--verbose", "--arg", "fail=true"]);
    let err = stderr(&failed);
    assert_eq!(failed.status.code(), Some(1));
    assert!(err.contains("[failed step] warn: upstream said"), "{err}");
    let records: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "execution.failed"])).unwrap();
    assert_eq!(
        records["items"][0]["payload"]["aileron.failure.details"]["logs"].as_array().map(Vec::len),
        Some(2),
        "{records}"
    );
    // A connector's error message is shown escaped on the error line and in `audit list`.
    assert!(err.contains("refused \\u{1b}[2J") && !err.contains('\u{1b}'), "{err}");
    let listed = cli.ok(&["audit", "list"]);
    assert!(listed.contains("\\u{1b}[2J") && !listed.contains('\u{1b}'), "{listed}");
    // Without --verbose the lines stay out of the way.
    let quiet = cli.run(&["action", "run", "logger"]);
    assert!(!stderr(&quiet).contains("step 0"), "{}", stderr(&quiet));
}

/// SPEC §1: files 0600, directories 0700, and a lax existing home is pointed out.
#[test]
fn the_home_keeps_private_modes_and_a_lax_home_is_pointed_out() {
    use std::os::unix::fs::PermissionsExt;
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let mode = |path: &str| std::fs::metadata(cli.home.join(path)).unwrap().permissions().mode() & 0o777;
    for (path, expected) in
        [("", 0o700), ("daemon.lock", 0o600), ("daemon.log", 0o600), ("daemon.json", 0o600), ("actions", 0o700)]
    {
        assert_eq!(mode(path), expected, "{path:?} is {:o}", mode(path));
    }
    cli.ok(&["daemon", "stop"]);
    // Files an older version left readable to others are made private on the next start.
    for file in ["daemon.lock", "daemon.log"] {
        std::fs::set_permissions(cli.home.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    cli.ok(&["daemon", "start"]);
    for file in ["daemon.lock", "daemon.log"] {
        assert_eq!(mode(file), 0o600, "{file} is {:o} after a restart", mode(file));
    }
    cli.ok(&["daemon", "stop"]);
    std::fs::set_permissions(&cli.home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let listed = cli.run(&["audit", "verify"]);
    assert!(
        stderr(&listed).contains("accessible to other users") && stderr(&listed).contains("chmod 700"),
        "{}",
        stderr(&listed)
    );
    assert_eq!(mode(""), 0o755, "the user's choice is not changed behind their back");
}

/// `aileron open` never puts the sign-in ticket on a command line (every local user can read
/// `/proc/<pid>/cmdline`): the opener gets a private `file://` page that forwards to it.
#[test]
fn the_login_ticket_never_appears_on_a_command_line() {
    use std::os::unix::fs::PermissionsExt;
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let bin = cli.scratch().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = cli.scratch().join("opener-args");
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\n", record.display())).unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let opened = cli.run_with(&["open", "approvals"], &[("PATH", path.as_str())], None);
    assert!(opened.status.success(), "{}", stderr(&opened));
    let argv = std::fs::read_to_string(&record).unwrap();
    assert!(argv.trim().starts_with("file://") && !argv.contains("ticket"), "the opener's argv: {argv}");
    let page = Path::new(argv.trim().trim_start_matches("file://")).to_path_buf();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("/approvals/login?ticket="), "{html}");
    assert_eq!(std::fs::metadata(&page).unwrap().permissions().mode() & 0o777, 0o600);
}

/// `daemon stop` signals only the process that holds `daemon.lock`: a `daemon.json` a crashed
/// daemon left behind names a pid that may since be any process of the user's. A damaged
/// `daemon.json` while a daemon runs is named, never reported as "not running".
#[test]
fn daemon_stop_signals_only_the_daemon_that_holds_the_lock() {
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let record = std::fs::read_to_string(cli.home.join("daemon.json")).unwrap();
    cli.ok(&["daemon", "stop"]);

    let mut bystander = Command::new("sleep").arg("1000").spawn().unwrap();
    let mut stale: Value = serde_json::from_str(&record).unwrap();
    stale["pid"] = bystander.id().into();
    std::fs::write(cli.home.join("daemon.json"), stale.to_string()).unwrap();
    let stopped = cli.run(&["daemon", "stop"]);
    let said = stderr(&stopped);
    assert!(stopped.status.success(), "{said}");
    assert!(said.contains("not running") && said.contains("stale") && !said.contains("daemon stopped"), "{said}");
    assert!(bystander.try_wait().unwrap().is_none(), "the process named by a stale daemon.json was signalled: {said}");
    assert!(!cli.home.join("daemon.json").exists(), "the stale daemon.json is removed");
    bystander.kill().unwrap();
    bystander.wait().unwrap();

    cli.ok(&["daemon", "start"]);
    let record = std::fs::read_to_string(cli.home.join("daemon.json")).unwrap();
    std::fs::write(cli.home.join("daemon.json"), "{garbage").unwrap();
    for command in [&["daemon", "status"][..], &["daemon", "stop"], &["daemon", "start"]] {
        let output = cli.run(command);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{command:?}: {said}");
        assert!(said.contains("daemon.json is damaged") && !said.contains("not running"), "{command:?}: {said}");
        assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{command:?}: {said}");
    }
    std::fs::write(cli.home.join("daemon.json"), record).unwrap();
    assert!(stderr(&cli.run(&["daemon", "stop"])).contains("daemon stopped"));
}

/// A start while the last daemon is still dying waits for its lock instead of refusing: after a
/// `kill -9` the group leader is a zombie at once, but the lock goes only with the last thread,
/// which may be inside an `fdatasync`. The dying daemon here is a process whose leader has exited
/// while a second thread keeps it, and the lock, for a second; `daemon.json` names it, as a
/// killed daemon's record does. A live holder that `daemon.json` names is still refused.
#[test]
fn a_start_waits_for_a_dying_daemons_lock_and_refuses_a_live_ones() {
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let record: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    cli.ok(&["daemon", "stop"]);
    // argv: the lock, seconds to hold it, `dying` (the leader exits first) or `live`.
    let holder = r#"
import ctypes, fcntl, platform, sys, threading, time
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
print("held", flush=True)
if sys.argv[3] == "dying":
    threading.Thread(target=time.sleep, args=(float(sys.argv[2]),)).start()
    sys_exit = {"x86_64": 60, "aarch64": 93}[platform.machine()]
    ctypes.CDLL(None).syscall(sys_exit, 0)  # exit(2) of the calling thread alone
time.sleep(float(sys.argv[2]))
"#;
    let lock = cli.home.join("daemon.lock");
    let hold = |seconds: &str, how: &str| {
        let mut child = Command::new("python3")
            .args(["-c", holder, lock.to_str().unwrap(), seconds, how])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line.trim(), "held");
        let mut stale = record.clone();
        stale["pid"] = child.id().into();
        std::fs::write(cli.home.join("daemon.json"), stale.to_string()).unwrap();
        child
    };

    let mut dying = hold("1.0", "dying");
    let stat = format!("/proc/{}/stat", dying.id());
    let since = std::time::Instant::now();
    while !std::fs::read_to_string(&stat).unwrap().contains(") Z") {
        assert!(since.elapsed() < std::time::Duration::from_secs(10), "the holder's leader never exited");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let started = cli.run(&["daemon", "start"]);
    assert!(started.status.success(), "a start after a dying daemon was refused: {}", stderr(&started));
    dying.wait().unwrap();
    cli.ok(&["daemon", "stop"]);

    let mut live = hold("30", "live");
    let refused = cli.run(&["daemon", "start"]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("another daemon already holds"), "{said}");
    assert!(live.try_wait().unwrap().is_none(), "the live holder is left alone: {said}");
    live.kill().unwrap();
    live.wait().unwrap();
}

/// Data written to a reader that has gone (`aileron audit list | head -1`) ends the command
/// quietly: status 0, nothing on stderr (no "failed printing to stdout" panic).
#[test]
fn output_to_a_closed_pipe_ends_the_command_quietly() {
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    for command in [
        &["audit", "list", "--limit", "1000"][..],
        &["audit", "list", "--json"],
        &["daemon", "status"],
        &["keyring", "list", "--json"],
    ] {
        // The read end is closed before the command runs, so its first line meets EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = cli
            .command(command)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{command:?}: {}", stderr(&output));
        assert_eq!(stderr(&output), "", "{command:?}");
    }
}

/// `keyring trust` asks for consent like `connector install`: with no terminal to ask on, only
/// `--yes` trusts a key.
#[test]
fn keyring_trust_without_a_terminal_needs_yes() {
    let cli = Cli::new();
    let key = cli.scratch().join("raw.pub");
    std::fs::write(&key, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n").unwrap();
    let refused = cli.run(&["keyring", "trust", "github://q", "--key", key.to_str().unwrap()]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(said.contains("no terminal") && said.contains("--yes") && !said.contains("trusted github://q"), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{said}");
    assert!(!cli.ok(&["keyring", "list"]).contains("github://q"), "refused: not trusted");
    cli.ok(&["keyring", "trust", "github://q", "--key", key.to_str().unwrap(), "--yes"]);
    assert!(cli.ok(&["keyring", "list"]).contains("github://q"));
}

/// A damaged `keyring.json` is named with the parse error's position and a way to repair it,
/// not hidden behind "internal error; see daemon.log".
#[test]
fn a_damaged_keyring_is_named_with_where_it_does_not_parse() {
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    std::fs::write(cli.home.join("keyring.json"), "{bad\n").unwrap();
    let package = cli.package("echo", &[]);
    let install = [
        "connector",
        "install",
        "--from",
        package.to_str().unwrap(),
        "github://aileron-tests/echo@1.0.0",
        "--yes",
        "--allow-unsigned",
    ];
    for command in [&["keyring", "list"][..], &["keyring", "revoke", "github://q"], &install] {
        let output = cli.run(command);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{command:?}: {said}");
        assert!(said.contains("keyring.json is damaged") && said.contains("line 1 column 2"), "{command:?}: {said}");
        assert!(!said.contains("internal error"), "{command:?}: {said}");
        let hints: Vec<&str> = said.lines().filter(|l| l.starts_with("hint:")).collect();
        assert!(hints.len() == 1 && hints[0].contains("keyring trust"), "{command:?}: {said}");
    }
    let log = std::fs::read_to_string(cli.home.join("daemon.log")).unwrap();
    assert!(log.contains("line 1 column 2"), "daemon.log names the parse error: {log}");
}

/// `action add <file>` replaces a different installed action of the same name (a newer or an
/// older version) only with --force, naming what is installed and what would replace it; the same
/// bytes again are a no-op success; a forced replacement says the action stays disabled.
#[test]
fn action_add_of_a_file_replaces_a_different_action_only_with_force() {
    let cli = Cli::new();
    let hash = cli.install_guest("logger", &[]);
    let spec = ActionSpec::new("logged", "logger", &hash, "log");
    cli.add_action(&spec);
    let file = cli.scratch().join("logged.md");
    let path = file.to_str().unwrap();
    cli.ok(&["action", "add", path]);
    cli.ok(&["action", "disable", "logged"]);
    let version =
        |cli: &Cli| -> Value { serde_json::from_str(&cli.ok(&["action", "show", "logged", "--json"])).unwrap() };

    std::fs::write(&file, spec.render().replacen("version = \"1.0.0\"", "version = \"2.0.0\"", 1)).unwrap();
    let refused = cli.run(&["action", "add", path]);
    let said = stderr(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("action_exists")
            && said.contains("logged 1.0.0")
            && said.contains("2.0.0")
            && said.contains("--force"),
        "{said}"
    );
    assert_eq!(version(&cli)["version"], "1.0.0", "nothing replaced");
    let forced = cli.run(&["action", "add", path, "--force"]);
    let said = stderr(&forced);
    assert!(forced.status.success(), "{said}");
    assert!(said.contains("replaced action logged 1.0.0 with 2.0.0") && said.contains("disabled"), "{said}");
    let shown = version(&cli);
    assert_eq!((shown["version"].as_str(), shown["enabled"].as_bool()), (Some("2.0.0"), Some(false)), "{shown}");

    // Going back to 1.0.0 is a replacement too.
    std::fs::write(&file, spec.render()).unwrap();
    let refused = cli.run(&["action", "add", path]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("logged 2.0.0"), "{}", stderr(&refused));
    assert_eq!(version(&cli)["version"], "2.0.0");
}

/// Two actions whose names map to one MCP tool name (`e-x`, `e.x`, `e_x` → `e_x`) cannot both be
/// installed: the agent could never reach the second one.
#[test]
fn an_action_whose_tool_name_is_taken_is_refused() {
    let cli = Cli::new();
    let hash = cli.install_guest("logger", &[]);
    cli.add_action(&ActionSpec::new("e-x", "logger", &hash, "log"));
    for name in ["e.x", "e_x"] {
        let file = cli.scratch().join(format!("{name}.md"));
        std::fs::write(&file, ActionSpec::new(name, "logger", &hash, "log").render()).unwrap();
        let refused = cli.run(&["action", "add", file.to_str().unwrap()]);
        let said = stderr(&refused);
        assert_eq!(refused.status.code(), Some(1), "{said}");
        assert!(
            said.contains("tool_name_taken")
                && said.contains("`e-x`")
                && said.contains(&format!("`{name}`"))
                && said.contains("`e_x`"),
            "{said}"
        );
        assert!(said.lines().any(|l| l.starts_with("hint:") && l.contains("rename")), "{said}");
    }
    let listing: Value = serde_json::from_str(&cli.ok(&["action", "list", "--json"])).unwrap();
    let names: Vec<&str> = listing["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["e-x"]);
    // The installed action itself may be added again.
    cli.ok(&["action", "add", cli.scratch().join("e-x.md").to_str().unwrap()]);
}

/// Usage errors our own code finds after clap exit 2, as clap's do; a bad --args names the JSON
/// error.
#[test]
fn usage_errors_found_after_parsing_exit_2() {
    let cli = Cli::new();
    let cases: [(&[&str], &str); 4] = [
        (&["action", "run", "x", "--arg", "s"], "not key=value"),
        (&["action", "run", "x", "--args", "{bad"], "line 1 column 2"),
        (&["action", "run", "x", "--args", "[1]"], "JSON object"),
        (&["connector", "install", "github://a/b"], "expected <fqn>@<version>"),
    ];
    for (args, expected) in cases {
        let output = cli.run(args);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {said}");
        assert!(said.contains(expected), "{args:?}: {said}");
        assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{args:?}: {said}");
    }
}

/// `open approval <id>` for an id the daemon does not know is an error, not a sign-in URL.
#[test]
fn open_approval_of_an_unknown_id_is_an_error() {
    let cli = Cli::new();
    let output = cli.run(&["open", "approval", "nope", "--print"]);
    let said = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains("approval_not_found") && said.contains("hint:"), "{said}");
    assert!(output.stdout.is_empty(), "no URL: {}", String::from_utf8_lossy(&output.stdout));
}

/// `aileron action run` of an action that does not exist is refused by the daemon and on record
/// (`action.rejected`), as the same call from an agent is: the CLI used to stop at its own lookup.
#[test]
fn running_an_unknown_action_from_the_cli_is_audited() {
    let cli = Cli::new();
    let output = cli.run(&["action", "run", "no-such-action", "--arg", "a=1"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("action_not_found") && stderr(&output).contains("hint: "), "{}", stderr(&output));
    let rejected: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.rejected"])).unwrap();
    let items = rejected["items"].as_array().unwrap();
    assert!(items.iter().any(|r| r["payload"]["aileron.action.name"] == "no-such-action"), "{rejected}");
}

/// `secret set` names the path the user wrote (never the vault's internal `secrets/` prefix), and
/// replaces an existing secret only with --force, saying so — as a second `binding setup` is
/// refused rather than overwriting a credential.
#[test]
fn secret_set_names_the_users_path_and_replaces_only_with_force() {
    let cli = Cli::new();
    let env = [("AILERON_VAULT_PASSPHRASE", "correct horse battery staple")];
    let init = cli.run_with(&["vault", "init"], &env, None);
    assert!(init.status.success(), "{}", stderr(&init));

    let bad = cli.run_with(&["secret", "set", "a b"], &[], Some("value-1\n"));
    let said = stderr(&bad);
    assert_eq!(bad.status.code(), Some(1), "{said}");
    assert!(said.contains("`a b`") && !said.contains("secrets/"), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{said}");

    let first = cli.run_with(&["secret", "set", "smtp/password"], &[], Some("value-1\n"));
    assert!(first.status.success() && stderr(&first).contains("stored secret `smtp/password`"), "{}", stderr(&first));
    let again = cli.run_with(&["secret", "set", "smtp/password"], &[], Some("value-2\n"));
    let said = stderr(&again);
    assert_eq!(again.status.code(), Some(1), "{said}");
    assert!(said.contains("secret_exists") && said.contains("`smtp/password`"), "{said}");
    assert!(said.lines().any(|l| l.starts_with("hint:") && l.contains("--force")), "{said}");
    let forced = cli.run_with(&["secret", "set", "smtp/password", "--force"], &[], Some("value-2\n"));
    assert!(
        forced.status.success() && stderr(&forced).contains("replaced secret `smtp/password`"),
        "{}",
        stderr(&forced)
    );
}

/// A `--hash` that is not `sha256:` + 64 hex digits can never match: a usage error saying what a
/// hash looks like, not a `hash_mismatch` against the package.
#[test]
fn connector_install_with_a_malformed_hash_is_a_usage_error() {
    let cli = Cli::new();
    let package = cli.package("echo", &[]);
    let short = format!("sha256:{}", "a".repeat(63));
    for hash in ["abc", short.as_str()] {
        let args = [
            "connector",
            "install",
            "--from",
            package.to_str().unwrap(),
            "github://aileron-tests/echo@1.0.0",
            "--hash",
            hash,
            "--yes",
            "--allow-unsigned",
        ];
        let output = cli.run(&args);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{hash}: {said}");
        assert!(said.contains(&format!("`{hash}` is not a content hash")) && said.contains("64"), "{said}");
        assert!(!said.contains("hash_mismatch"), "{said}");
        assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{said}");
    }
}

/// `keyring trust --key` with the private key says so (never echoing it) and points at the public
/// one; an unreadable or unparsable key file, a relative `--since` and a bad `--identity` each get
/// their own hint instead of the generic "run the command with --help".
#[test]
fn key_files_times_and_identities_get_their_own_hints() {
    let cli = Cli::new();
    let keys = cli.scratch().join("keys");
    cli.ok(&["connector", "keygen", "--out", keys.to_str().unwrap()]);
    let private = std::fs::read_to_string(keys.join("publisher.key")).unwrap();
    let garbage = cli.scratch().join("garbage.pub");
    std::fs::write(&garbage, "not a key!\n").unwrap();
    let key_arg = |path: &Path| path.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, i32, &str, &str)> = vec![
        (
            vec![
                "keyring".into(),
                "trust".into(),
                "github://q".into(),
                "--key".into(),
                key_arg(&keys.join("publisher.key")),
                "--yes".into(),
            ],
            1,
            "this is a private key; pass the public key (publisher.pub)",
            "publisher.pub",
        ),
        (
            vec![
                "keyring".into(),
                "trust".into(),
                "github://q".into(),
                "--key".into(),
                key_arg(&garbage),
                "--yes".into(),
            ],
            1,
            "not an ed25519 public key",
            "BEGIN PUBLIC KEY",
        ),
        (
            vec![
                "keyring".into(),
                "trust".into(),
                "github://q".into(),
                "--key".into(),
                key_arg(&cli.scratch().join("absent.pub")),
                "--yes".into(),
            ],
            1,
            "absent.pub",
            "publisher.pub",
        ),
        (vec!["audit".into(), "list".into(), "--since".into(), "yesterday".into()], 1, "`yesterday`", "2025-01-31"),
        (
            vec!["binding".into(), "setup".into(), "github://x/y".into(), "--identity".into(), "Bad Id!".into()],
            2,
            "`Bad Id!`",
            "lowercase",
        ),
    ];
    for (args, code, message, hint) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = cli.run(&args);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(code), "{args:?}: {said}");
        assert!(said.contains(message), "{args:?}: {said}");
        let hints: Vec<&str> = said.lines().filter(|l| l.starts_with("hint:")).collect();
        assert!(hints.len() == 1 && hints[0].contains(hint) && !hints[0].contains("--help"), "{args:?}: {said}");
        for line in private.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!said.contains(line), "the private key is never echoed: {said}");
        }
    }
}

/// `keyring revoke` with nothing to revoke says what is missing (not "not both"), and a revoke
/// names the authorities plainly, not as a debug list.
#[test]
fn keyring_revoke_says_what_is_missing_and_names_authorities_plainly() {
    let cli = Cli::new();
    let nothing = cli.run(&["keyring", "revoke"]);
    let said = stderr(&nothing);
    assert_eq!(nothing.status.code(), Some(2), "{said}");
    assert!(said.contains("an authority or --key <fingerprint>") && !said.contains("not both"), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("hint:")).count(), 1, "{said}");

    let key = cli.scratch().join("raw.pub");
    std::fs::write(&key, "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n").unwrap();
    cli.ok(&["keyring", "trust", "github://aileron/github-issues", "--key", key.to_str().unwrap(), "--yes"]);
    let revoked = cli.run(&["keyring", "revoke", "github://aileron/github-issues"]);
    let said = stderr(&revoked);
    assert!(revoked.status.success(), "{said}");
    assert!(said.contains("revoked 1 key(s) of github://aileron/github-issues") && !said.contains("[\""), "{said}");
}

/// An action whose step calls an op its connector's capabilities do not list installs (SPEC
/// §4.5 makes that a run-time denial) — and `action add` says so at once, with a hint.
#[test]
fn action_add_warns_of_an_op_every_run_will_have_denied() {
    let cli = Cli::new();
    let hash = cli.install_guest("echo", &[]);
    let spec =
        ActionSpec { capabilities: &["something_else"], ..ActionSpec::new("denied-echo", "echo", &hash, "echo") };
    let file = cli.scratch().join("denied-echo.md");
    std::fs::write(&file, spec.render()).unwrap();
    let output = cli.run(&["action", "add", file.to_str().unwrap()]);
    let said = stderr(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("warning: step `main` calls the op `echo`") && said.contains("capability_denied"), "{said}");
    assert!(said.contains("hint: add \"echo\""), "{said}");
    let ran = cli.run(&["action", "run", "denied-echo"]);
    assert!(stderr(&ran).contains("capability_denied"), "{}", stderr(&ran));
    let fine = cli.scratch().join("fine.md");
    std::fs::write(&fine, ActionSpec::new("fine-echo", "echo", &hash, "echo").render()).unwrap();
    assert!(!stderr(&cli.run(&["action", "add", fine.to_str().unwrap()])).contains("warning"));
}

/// The re-attack's H5: an unsigned package's manifest text drew a fake "signed by" line on the
/// consent screen (and hid its network host and `bash -c`); answering y installed it without
/// `--allow-unsigned`. Such text is refused at parse time, and the consent screen shows the
/// signature status first, before anything the package wrote.
#[test]
fn a_package_cannot_draw_its_own_lines_on_the_consent_screen() {
    let cli = Cli::new();
    let forged = "publisher = \"acme\\r\\u001b[1ASignature   signed by github://acme (key sha256:AbCdEf)\\nIt will be allowed to:\\n  - nothing\"";
    let extra = format!("[connector]\n{forged}\n");
    let text = manifest("echo", &["evil.example:443".to_string()], "").replacen("[connector]\n", &extra, 1);
    let dir = cli.scratch().join("pkg-forged");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("connector.wasm"), guest_wasm("echo")).unwrap();
    std::fs::write(dir.join("manifest.toml"), &text).unwrap();
    let installed = cli.run_with(
        &["connector", "install", "--from", dir.to_str().unwrap(), "github://aileron-tests/echo@1.0.0"],
        &[],
        Some("y\ny\n"),
    );
    let err = stderr(&installed);
    assert_eq!(installed.status.code(), Some(1), "{err}");
    assert!(err.contains("connector.publisher") && err.contains("invisible or control character U+000D"), "{err}");
    assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");
    assert!(!err.contains("signed by github://acme"), "the forged line is not shown: {err}");
    let listed = cli.ok(&["connector", "list", "--json"]);
    assert!(!listed.contains("aileron-tests/echo"), "nothing was installed: {listed}");

    // A well-formed unsigned package: its signature status is the screen's first line.
    let package = cli.package("echo", &["api.example.com:443".to_string()]);
    let declined = cli.run_with(
        &["connector", "install", "--from", package.to_str().unwrap(), "github://aileron-tests/echo@1.0.0"],
        &[],
        Some("n\n"),
    );
    let err = stderr(&declined);
    let screen: Vec<&str> = err.lines().skip_while(|line| !line.starts_with("Signature")).collect();
    assert!(screen.first().is_some_and(|line| line.starts_with("Signature   unsigned")), "{err}");
    assert!(
        screen.get(1).is_some_and(|line| line.starts_with("Connector   github://aileron-tests/echo@1.0.0")),
        "{err}"
    );
}

/// The re-attack's M2: the vault passphrase stayed in the auto-started daemon's environment (after
/// `vault lock` too), where a spawned program's `env_passthrough` could hand it on. A daemon a
/// client starts inherits configuration, never the passphrase or a token.
#[test]
fn a_daemon_a_client_starts_never_inherits_the_passphrase_or_a_token() {
    let cli = Cli::new();
    let secrets = [("AILERON_VAULT_PASSPHRASE", "planted-passphrase-6a1d"), ("AILERON_TOKEN", "planted-token-90ce")];
    let mut command = cli.command(&["action", "list"]);
    command.envs(secrets).env("AILERON_OPENAI_UPSTREAM", "http://127.0.0.1:9");
    let output = command.stdin(std::process::Stdio::null()).output().unwrap();
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    let environ = std::fs::read(format!("/proc/{}/environ", info["pid"])).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    for (name, value) in secrets {
        assert!(
            !environ.contains(value) && !environ.contains(&format!("{name}=")),
            "{name} reached the daemon: {output:?}"
        );
    }
    assert!(environ.contains("AILERON_OPENAI_UPSTREAM=http://127.0.0.1:9"), "configuration is inherited");
}

/// The re-attack's M3: a group- or world-writable home only warned, and another local user swapped
/// `daemon.json` (its URL then received the token and the vault passphrase). What is ours is
/// tightened; a home, or a `daemon.json`, another user owns is refused.
#[test]
fn a_home_others_can_write_is_tightened_and_one_they_own_is_refused() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    cli.ok(&["daemon", "stop"]);
    std::fs::set_permissions(&cli.home, std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = cli.run(&["audit", "verify"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stderr(&output).contains("was writable by other users"), "{}", stderr(&output));
    assert_eq!(std::fs::metadata(&cli.home).unwrap().mode() & 0o777, 0o755);

    // A daemon.json someone else wrote is not trusted: its URL never gets a request.
    let stranger = 4_242_424;
    let forged =
        serde_json::json!({"url": "http://127.0.0.1:9", "pid": 1, "version": "0", "started_at": "x", "token": "t"});
    std::fs::write(cli.home.join("daemon.json"), forged.to_string()).unwrap();
    std::os::unix::fs::chown(cli.home.join("daemon.json"), Some(stranger), None).unwrap();
    let output = cli.run(&["action", "list"]);
    assert!(
        stderr(&output).contains("ignoring") && stderr(&output).contains("not a private file of yours"),
        "{}",
        stderr(&output)
    );
    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    assert_ne!(info["url"], "http://127.0.0.1:9", "a daemon of ours replaced it");
    cli.ok(&["daemon", "stop"]);

    // A home that belongs to another user is refused outright, naming both owners.
    std::os::unix::fs::chown(&cli.home, Some(stranger), None).unwrap();
    let output = cli.run(&["status"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("belongs to user 4242424") && stderr(&output).contains("hint:"),
        "{}",
        stderr(&output)
    );
    std::os::unix::fs::chown(&cli.home, Some(nix::unistd::geteuid().as_raw()), None).unwrap();
}

/// Seed 004: "updating a connector is a visible edit to action files". `connector upgrade` installs
/// the new version through the install pipeline, shows each action file's edit (version and hash
/// of that connector's entry, nothing else), asks, re-pins, and the daemon audits each.
#[test]
fn connector_upgrade_re_pins_the_actions_that_use_it_as_a_visible_edit() {
    let cli = Cli::with_echo_action("count");
    let old_hash = cli.ok(&["connector", "list", "--json"]);
    let old: Value = serde_json::from_str(&old_hash).unwrap();
    let old_hash = old["items"][0]["hash"].as_str().unwrap().to_string();
    let newer = cli.scratch().join("echo-1.1.0");
    std::fs::create_dir_all(&newer).unwrap();
    std::fs::write(newer.join("connector.wasm"), guest_wasm("echo")).unwrap();
    std::fs::write(
        newer.join("manifest.toml"),
        manifest("echo", &[], "").replace("version = \"1.0.0\"", "version = \"1.1.0\""),
    )
    .unwrap();
    let args =
        ["connector", "upgrade", "github://aileron-tests/echo", "--to", "1.1.0", "--from", newer.to_str().unwrap()];

    // Without a terminal and without --yes: refused before anything is installed (the install's
    // own consent comes first).
    let refused = cli.run(&args);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(!cli.ok(&["connector", "list"]).contains("@1.1.0"), "nothing was installed");

    let upgraded = cli.run(&[&args[..], &["--yes", "--allow-unsigned"]].concat());
    let err = stderr(&upgraded);
    assert!(upgraded.status.success(), "{err}");
    let new_hash = String::from_utf8_lossy(&upgraded.stdout).trim().to_string();
    assert!(new_hash.starts_with("sha256:") && new_hash != old_hash, "{new_hash}");
    assert!(
        err.contains("actions/count.md:")
            && err.contains("-version = \"1.0.0\"")
            && err.contains("+version = \"1.1.0\""),
        "{err}"
    );
    assert!(
        err.contains(&format!("-hash = \"{old_hash}\"")) && err.contains(&format!("+hash = \"{new_hash}\"")),
        "{err}"
    );
    assert!(err.contains("re-pinned action count to github://aileron-tests/echo@1.1.0"), "{err}");

    let shown: Value = serde_json::from_str(&cli.ok(&["action", "show", "count", "--json"])).unwrap();
    assert_eq!(
        (&shown["connectors"][0]["version"], &shown["connectors"][0]["hash"]),
        (&Value::from("1.1.0"), &Value::from(new_hash.clone())),
        "{shown}"
    );
    let ran = cli.run(&["action", "run", "count"]);
    assert!(ran.status.success(), "{}", stderr(&ran));
    let installed: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.installed"])).unwrap();
    assert_eq!(installed["items"].as_array().unwrap().len(), 2, "the add and the re-pin: {installed}");
    // Nothing left to re-pin the second time.
    let again = cli.run(&[&args[..], &["--yes", "--allow-unsigned"]].concat());
    assert!(again.status.success() && stderr(&again).contains("nothing to re-pin"), "{}", stderr(&again));
}

/// The re-attack's L4: `write_atomic` left `.secrets.json.<random>.tmp` behind after a kill (1 in
/// 15), a copy that keeps removed secrets decryptable. The daemon removes such files at start,
/// under its lock, in every directory it writes that way — and nothing else.
#[test]
fn temporaries_of_interrupted_atomic_writes_are_removed_at_start() {
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    cli.ok(&["daemon", "stop"]);
    let planted = [cli.home.join(".secrets.json.Ab12Cd.tmp"), cli.home.join("actions/.count.md.zzzzzz.tmp")];
    for path in &planted {
        std::fs::write(path, "a copy left by a kill").unwrap();
    }
    let kept = cli.home.join("notes.tmp");
    std::fs::write(&kept, "the user's").unwrap();
    cli.ok(&["daemon", "start"]);
    for path in &planted {
        assert!(!path.exists(), "{} was left", path.display());
    }
    assert!(kept.exists(), "only the temporaries' own names are removed");
    let log = std::fs::read_to_string(cli.home.join("daemon.log")).unwrap();
    assert!(log.contains(".secrets.json.Ab12Cd.tmp, left by an interrupted write"), "{log}");
}

/// Another local user who takes the port a stopped (or killed) daemon left, while `daemon.json`
/// still names it, gets neither the token nor a secret: the client checks who listens there after
/// the health answer (which carries nothing) and before anything else, warns, and starts a daemon
/// of its own on another port (the re-attack of 2026-12-05, H1). A second uid needs root to make;
/// elsewhere the parser's unit test (`platform::process`) is what runs.
#[test]
fn a_port_another_user_took_over_gets_no_token_and_no_secret() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: making a listener of another uid needs root");
        return;
    }
    let cli = Cli::new();
    let passphrase = [("AILERON_VAULT_PASSPHRASE", "squatted passphrase staple")];
    let init = cli.run_with(&["vault", "init"], &passphrase, None);
    assert!(init.status.success(), "{}", stderr(&init));
    let record: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    let token = record["token"].as_str().unwrap().to_string();
    let port: u16 = record["url"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();
    cli.ok(&["daemon", "stop"]);
    // uid 65534 answers every request like a health check and prints what it was sent.
    let squatter = r#"
import encodings.idna, http.server, json, os, sys
os.setgid(65534); os.setuid(65534)  # after every import: root's interpreter is not readable to uid 65534
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else b""
        print("REQUEST", self.command, self.path, repr(dict(self.headers)), body, flush=True)
        self.send_response(200); self.send_header("content-type", "application/json"); self.end_headers()
        self.wfile.write(b'{"status":"ok","version":"9"}')
    do_GET = do_POST = do_PUT = do_DELETE = answer
    def log_message(self, *a): pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("listening", flush=True)
server.serve_forever()
"#;
    let mut squatter = crate::support::KillOnDrop(
        Command::new("python3")
            .args(["-c", squatter, &port.to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stdout = std::io::BufReader::new(squatter.0.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line.trim(), "listening");
    std::fs::write(cli.home.join("daemon.json"), record.to_string()).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
    std::fs::set_permissions(cli.home.join("daemon.json"), private).unwrap();

    let unlock = cli.run_with(&["vault", "unlock"], &passphrase, None);
    let said = stderr(&unlock);
    assert!(unlock.status.success(), "{said}");
    assert!(said.contains("belongs to uid 65534") && said.contains("nothing was sent to it"), "{said}");
    let set = cli.run_with(&["secret", "set", "smtp/password"], &[], Some("squatted-secret-value\n"));
    assert!(set.status.success(), "{}", stderr(&set));
    let ours: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    assert_ne!(ours["url"], record["url"], "a daemon of our own, on another port");
    cli.ok(&["daemon", "stop"]);
    drop(squatter);
    let mut seen = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    assert!(seen.contains("REQUEST GET /v1/health"), "the squatter was asked for health only: {seen}");
    assert!(seen.lines().all(|line| line.starts_with("REQUEST GET /v1/health")), "{seen}");
    for secret in [token.as_str(), "squatted passphrase staple", "squatted-secret-value"] {
        assert!(!seen.contains(secret), "{secret} reached the squatter: {seen}");
    }
}
