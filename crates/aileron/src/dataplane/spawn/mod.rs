//! The spawn primitive, daemon side (SPEC §5): `Spawner` resolves a gated plan on disk and runs
//! the program confined; the step's side (gate, credential, audit, span) is `egress/programs.rs`,
//! the one path by which a connector runs a local program. Order: the gate of `aileron_core::policy` (declared operation or template-matching
//! envelope, the action's `spawn:<op>`, env keys) → the credential, when the action declares its
//! kind → the program, directories and scopes resolved on disk (`~/` expanded, symlinks resolved
//! once) → the per-spawn CONNECT proxy when the manifest names hosts → the confined run through
//! `aileron __spawn` ([`jail`]) → the `spawn` audit record and the `aileron.connector.spawn` span.
//!
//! Invariants: a program never runs unconfined (no namespaces or no Landlock →
//! `spawn_sandbox_unavailable`); the credential reaches only the child's `credential_env_keys`,
//! never an audit record, a span, an error or the guest; audit records carry the argv's shape
//! (placeholder names), never argument or environment values.

pub mod jail;
pub(crate) mod proxy;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use aileron_core::manifest::ConnectorManifest;
use aileron_core::policy::{self, CapabilitySubset, SpawnPlan};
use aileron_core::sha256::Sha256;
use aileron_core::{Boundary, Failure, FailureClass};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use jail::{JailPlan, Report};

/// The environment every program gets before its declared keys.
const BASE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// Address space of a spawned program.
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;
/// Largest file a spawned program may write.
pub const MAX_FILE_BYTES: u64 = 256 << 20;
/// Time kept back from the step's deadline so the helper's own kill is reported and audited
/// before the sandbox gives up on the call.
const DEADLINE_MARGIN: Duration = Duration::from_millis(200);
/// How the confinement is described in audit records and spans.
pub const CONFINEMENT: &str = "user+mount+pid+net namespaces, landlock, seccomp, rlimits";

/// What spawning needs of the daemon: the helper binary and the directories to hide.
#[derive(Debug, Clone)]
pub struct Spawner {
    /// The `aileron` executable that serves `__spawn` (the daemon's own by default).
    pub helper: PathBuf,
    /// The user's home, for `~/` in manifests and as the program's `HOME`.
    pub user_home: Option<PathBuf>,
    /// Covered by an empty tmpfs in every program's view: the Aileron home, the audit directory.
    pub masks: Vec<PathBuf>,
}

/// The spawn helper beside this executable: `aileron-spawn` when it is there (a small binary,
/// cheap to exec per spawn), else this executable itself, which serves `__spawn` too.
pub fn default_helper() -> std::io::Result<PathBuf> {
    let current = std::env::current_exe()?;
    let small = current.with_file_name("aileron-spawn");
    Ok(if small.is_file() { small } else { current })
}

impl Spawner {
    pub fn new(helper: PathBuf, masks: Vec<PathBuf>) -> Spawner {
        Spawner {
            helper,
            user_home: crate::platform::env::get(crate::platform::env::HOME)
                .map(PathBuf::from)
                .filter(|home| home.is_absolute()),
            masks,
        }
    }

    /// `~/x` under the user's home; absolute paths as they are.
    fn expand(&self, path: &str) -> Result<PathBuf, String> {
        match path.strip_prefix("~/") {
            Some(rest) => match &self.user_home {
                Some(home) => Ok(home.join(rest)),
                None => Err(format!("`{path}` is relative to a home directory, and HOME is not set for the daemon")),
            },
            None => Ok(PathBuf::from(path)),
        }
    }

    /// Resolves the plan's paths, starts the proxy when the manifest (narrowed by the action)
    /// names hosts, and runs the program confined. `credential` is already resolved.
    pub(crate) async fn run(
        &self,
        manifest: &ConnectorManifest,
        subset: &CapabilitySubset,
        plan: &SpawnPlan,
        credential: Vec<(String, crate::platform::secret::Secret)>,
        proxy_context: Option<proxy::ProxyContext>,
        deadline: Instant,
    ) -> Result<Finished, Failure> {
        let spawner = self;
        let spawn = manifest.spawn.as_ref().expect("the gate found [capabilities.spawn]");
        let denied = |message: String| {
            Failure::capability_denied(Boundary::Sandbox, message)
                .with_detail("requested", format!("spawn:{}", plan.op))
        };
        let declared = spawn.program(&plan.program).expect("the gate matched a declared program");
        let program = std::fs::canonicalize(spawner.expand(&declared.path).map_err(denied)?)
            .map_err(|e| denied(format!("the declared program {} cannot be found: {e}", declared.path)))?;
        let scopes = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .filter_map(|scope| spawner.expand(scope).ok())
                .filter_map(|path| std::fs::canonicalize(path).ok())
                .collect()
        };
        let (read, write) = (scopes(&spawn.fs_read), scopes(&spawn.fs_write));
        let scratch = tempfile::Builder::new().prefix("aileron-spawn-").tempdir().map_err(|e| {
            Failure::runtime_error(Boundary::Runtime, format!("creating the program's scratch directory: {e}"))
        })?;
        let scratch_path = std::fs::canonicalize(scratch.path()).unwrap_or_else(|_| scratch.path().to_path_buf());
        // The working directory, asked for by the envelope or declared by the manifest, must lie
        // in a scope: the helper opens it beneath that scope and it gets the scope's access.
        let within_a_scope = |asked: &str, whose: &str| -> Result<PathBuf, Failure> {
            let asked_path = std::fs::canonicalize(spawner.expand(asked).map_err(denied)?)
                .map_err(|e| denied(format!("{whose} {asked} cannot be used: {e}")))?;
            if !read.iter().chain(&write).any(|scope| asked_path.starts_with(scope)) {
                return Err(denied(format!("{whose} {asked} is not within the manifest's fs_read or fs_write"))
                    .with_detail("boundary_detail", "envelope"));
            }
            Ok(asked_path)
        };
        let cwd = match (&plan.cwd, &spawn.cwd) {
            (Some(asked), _) => within_a_scope(asked, "the working directory")?,
            (None, Some(declared)) => within_a_scope(declared, "the manifest's cwd")?,
            (None, None) => scratch_path.clone(),
        };

        let mut env: Vec<(String, String)> = vec![("PATH".into(), BASE_PATH.into())];
        // HOME is the scratch directory: a program reads the user's dotfiles only when the
        // manifest passes HOME through (and grants the files in fs_read).
        env.push(("HOME".into(), scratch_path.display().to_string()));
        env.push(("TMPDIR".into(), scratch_path.display().to_string()));
        for key in spawn.env_passthrough.iter().filter(|key| !spawn.credential_env_keys.contains(key)) {
            let value = match (key.as_str(), &spawner.user_home) {
                ("HOME", Some(home)) => Some(home.display().to_string()),
                _ => crate::platform::env::passed_through(key),
            };
            if let Some(value) = value {
                set(&mut env, key, value);
            }
        }
        for (key, value) in &plan.env {
            set(&mut env, key, value.clone());
        }
        env.retain(|(key, _)| !credential.iter().any(|(credential_key, _)| credential_key == key));

        let hosts: Vec<&String> = manifest.network_hosts().iter().filter(|host| subset.allows_host(host)).collect();
        let proxy = if hosts.is_empty() {
            None
        } else {
            let context = proxy_context.ok_or_else(|| {
                Failure::capability_denied(Boundary::Sandbox, "this path runs programs without a network")
            })?;
            let proxy = proxy::SpawnProxy::start(context).await?;
            let url = format!("http://127.0.0.1:{}", jail::FORWARDER_PORT);
            for key in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"] {
                set(&mut env, key, url.clone());
            }
            Some(proxy)
        };

        let wall = deadline.saturating_duration_since(Instant::now()).saturating_sub(DEADLINE_MARGIN);
        let jail_plan = JailPlan {
            program,
            hash: declared.hash.as_ref().map(|hash| hash.to_string()),
            argv: plan.argv.clone(),
            env,
            credential_env: credential,
            cwd,
            read,
            write: write.into_iter().chain(std::iter::once(scratch_path)).collect(),
            masks: spawner.masks.clone(),
            proxy: proxy.as_ref().map(|proxy| proxy.socket().to_path_buf()),
            wall_time_ms: wall.as_millis().max(1) as u64,
            max_memory_bytes: MAX_MEMORY_BYTES,
            max_file_bytes: MAX_FILE_BYTES,
        };
        let result = run_helper(&spawner.helper, &jail_plan, plan.stdin.as_deref(), spawn.limits, deadline).await;
        if let Some(proxy) = proxy {
            proxy.finish().await;
        }
        drop(scratch);
        result
    }

    /// The gate and the confined run of a declared operation, with no credential, no network and
    /// no audit record: what `aileron-bench` times against a bare spawn of the same program (the
    /// product's only path is `StepEgress::spawn_program`, which audits).
    #[doc(hidden)]
    pub async fn time_gate_and_confinement(
        &self,
        manifest: &ConnectorManifest,
        subset: &CapabilitySubset,
        op: &str,
        deadline: Instant,
    ) -> Result<i32, Failure> {
        let plan = policy::plan_operation(manifest, subset, op, &Default::default())?;
        Ok(self.run(manifest, subset, &plan, Vec::new(), None, deadline).await?.exit_code)
    }
}

/// What one finished run produced, for the guest and the audit record.
pub(crate) struct Finished {
    pub(crate) exit_code: i32,
    pub(crate) signal: Option<i32>,
    pub(crate) stdout: Captured,
    pub(crate) stderr: Captured,
}

/// One output stream, capped.
#[derive(Default)]
pub(crate) struct Captured {
    kept: Vec<u8>,
    truncated: bool,
}

impl Captured {
    /// What the guest reads: the kept bytes and, when cut, a marker saying so.
    pub(crate) fn for_guest(&self, cap: u64) -> Vec<u8> {
        let mut bytes = self.kept.clone();
        if self.truncated {
            bytes.extend_from_slice(format!("\n[aileron: output truncated after {cap} bytes]\n").as_bytes());
        }
        bytes
    }

    /// What a `spawn` record says of this output: its digest, its size, whether it was cut.
    pub(crate) fn summary(&self) -> (String, usize, bool) {
        (format!("sha256:{}", hex::encode(Sha256::digest(&self.kept))), self.kept.len(), self.truncated)
    }
}

fn set(env: &mut Vec<(String, String)>, key: &str, value: String) {
    match env.iter_mut().find(|(existing, _)| existing == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key.to_string(), value)),
    }
}

/// Runs `aileron __spawn` with the plan, collects capped output and the helper's report.
async fn run_helper(
    helper: &Path,
    plan: &JailPlan,
    stdin: Option<&[u8]>,
    limits: aileron_core::manifest::SpawnLimits,
    deadline: Instant,
) -> Result<Finished, Failure> {
    use std::os::fd::AsRawFd;
    let unavailable = |message: String| {
        Failure::new(FailureClass::SpawnSandboxUnavailable, Boundary::Sandbox, message).with_detail(
            "hint",
            "spawned programs need Linux with unprivileged user namespaces and Landlock (5.13 or later)",
        )
    };
    // The report pipe's write end is inherited by the helper under its own number (no `pre_exec`:
    // the helper starts by `posix_spawn`, without forking the daemon). Another spawn starting at
    // the same moment may inherit it too; that is harmless, because the reports are read once
    // this helper has exited — everything it wrote is then in the pipe — never until EOF.
    let (report_read, report_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)
        .map_err(|e| Failure::runtime_error(Boundary::Runtime, format!("creating the report pipe: {e}")))?;
    // SAFETY: clears FD_CLOEXEC on a descriptor we own.
    unsafe { libc::fcntl(report_write.as_raw_fd(), libc::F_SETFD, 0) };
    let mut command = tokio::process::Command::new(helper);
    command
        .arg(jail::SUBCOMMAND)
        .arg(jail::REPORT_FD_FLAG)
        .arg(report_write.as_raw_fd().to_string())
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let spawned = command.spawn();
    drop(report_write);
    let mut child = spawned.map_err(|e| unavailable(format!("starting the spawn helper {}: {e}", helper.display())))?;
    let mut input = child.stdin.take().expect("piped");
    // The frame (which may hold the credential, zeroized when dropped) and then the program's
    // stdin, written one after the other rather than joined into a buffer that would grow.
    let frame = jail::plan_frame(plan);
    let stdin = stdin.unwrap_or_default().to_vec();
    let writer = tokio::spawn(async move {
        // A program that never reads its input must not stall the run: errors are ignored.
        if input.write_all(&frame).await.is_ok() {
            let _ = input.write_all(&stdin).await;
        }
        drop(input);
    });
    let stdout = tokio::spawn(read_capped(child.stdout.take().expect("piped"), limits.max_stdout_bytes));
    let stderr = tokio::spawn(read_capped(child.stderr.take().expect("piped"), limits.max_stderr_bytes));
    let waited = tokio::time::timeout_at(deadline.into(), child.wait()).await;
    if waited.is_err() {
        // The helper's own alarm should have fired first; this is the backstop.
        let _ = child.kill().await;
    }
    writer.abort();
    let stdout = stdout.await.unwrap_or_default();
    let stderr = stderr.await.unwrap_or_default();
    let reports = buffered_reports(report_read);
    let mut outcome: Option<Report> = None;
    for line in reports.lines() {
        if let Ok(report) = serde_json::from_str::<Report>(line) {
            // The first decisive line wins (a refusal, or the program's end).
            outcome.get_or_insert(report);
        }
    }
    let time_limit = || {
        Failure::resource_limit(
            "time",
            format!(
                "the spawned program {} ran past the step's wall time and was killed with everything it started",
                plan.program.display()
            ),
        )
    };
    let finished = |exit_code: i32, signal: Option<i32>| Finished { exit_code, signal, stdout, stderr };
    match outcome {
        Some(Report::Exited(code)) => Ok(finished(code, None)),
        Some(Report::Signaled(signal)) => Ok(finished(128 + signal, Some(signal))),
        Some(Report::TimedOut) => Err(time_limit()),
        Some(Report::Unavailable(reason)) => Err(unavailable(format!("the program was not run: {reason}"))),
        Some(Report::ExecFailed(reason)) => Err(Failure::runtime_error(Boundary::Sandbox, reason)),
        Some(Report::Refused { class, message }) => {
            let class = FailureClass::parse(&class).unwrap_or(FailureClass::CapabilityDenied);
            Err(Failure::new(class, Boundary::Sandbox, message)
                .with_detail("requested", format!("spawn:{}", plan.program.display())))
        }
        None if waited.is_err() => Err(time_limit()),
        None => Err(unavailable("the spawn helper ended without a report".to_string())),
    }
}

/// Whatever the (exited) helper wrote on the report pipe.
fn buffered_reports(read_end: std::os::fd::OwnedFd) -> String {
    let mut pipe = std::fs::File::from(read_end);
    let (mut bytes, mut buffer) = (Vec::new(), [0u8; 4096]);
    // Non-blocking: stops at "nothing more buffered" as well as at EOF.
    while let Ok(count) = std::io::Read::read(&mut pipe, &mut buffer) {
        if count == 0 || bytes.len() > 1 << 20 {
            break;
        }
        bytes.extend_from_slice(&buffer[..count]);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Reads a stream to its end, keeping the first `cap` bytes (the rest is drained, so a chatty
/// program is never blocked on a full pipe).
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap: u64) -> Captured {
    let mut captured = Captured::default();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return captured,
            Ok(n) => {
                let room = (cap as usize).saturating_sub(captured.kept.len());
                captured.kept.extend_from_slice(&buffer[..n.min(room)]);
                if n > room {
                    captured.truncated = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn capped_reads_keep_the_head_and_mark_the_cut() {
        let data = vec![b'x'; 100_000];
        let captured = read_capped(&data[..], 10).await;
        assert_eq!(captured.kept, vec![b'x'; 10]);
        assert!(captured.truncated);
        let shown = captured.for_guest(10);
        assert!(String::from_utf8_lossy(&shown).ends_with("[aileron: output truncated after 10 bytes]\n"));
        let whole = read_capped(&b"abc"[..], 10).await;
        assert_eq!((whole.kept.as_slice(), whole.truncated), (&b"abc"[..], false));
        assert_eq!(whole.for_guest(10), b"abc");
    }

    #[test]
    fn home_relative_paths_expand_under_the_users_home() {
        let spawner = Spawner { helper: "/x".into(), user_home: Some("/home/u".into()), masks: vec![] };
        assert_eq!(spawner.expand("~/code").unwrap(), PathBuf::from("/home/u/code"));
        assert_eq!(spawner.expand("/usr/bin/git").unwrap(), PathBuf::from("/usr/bin/git"));
        let homeless = Spawner { user_home: None, ..spawner };
        assert!(homeless.expand("~/code").unwrap_err().contains("HOME"));
    }
}
