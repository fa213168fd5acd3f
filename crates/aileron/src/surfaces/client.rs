//! Finding, auto-starting and talking to the daemon. Used by every CLI subcommand and by
//! `aileron-mcp`. Discovery order: `AILERON_URL` + `AILERON_TOKEN`, else `daemon.json`; when
//! nothing answers, the daemon is auto-started (5 s budget) unless `AILERON_NO_AUTOSTART=1`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::CommandExt as _;

use anyhow::{Context, anyhow, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::platform::env;
use crate::platform::home::Home;
use crate::platform::process::DaemonInfo;
use crate::platform::secret::Secret;

/// How long a client waits for an auto-started daemon to answer (SPEC §7).
pub const AUTOSTART_BUDGET: Duration = Duration::from_secs(5);
/// A loopback connect either succeeds at once or is refused; this only bounds a dropped SYN, so a
/// client never hangs on a daemon that is not there.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct DaemonClient {
    pub base_url: String,
    token: Secret,
    http: reqwest::Client,
}

/// A non-2xx answer from the daemon, already decoded.
#[derive(Debug)]
pub struct ApiFailure {
    pub status: StatusCode,
    pub body: Value,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Messages may carry a connector's or an upstream's words: controls are shown, not obeyed
        // (SPEC §14). A parse error's own `\nhint:` line is the one line break kept.
        let visible = |text: &str| aileron_core::untrusted_text::visible(text, 4000);
        let error = &self.body["error"];
        let raw = error["message"].as_str().unwrap_or("request failed");
        let message = raw.split("\nhint: ").map(visible).collect::<Vec<_>>().join("\nhint: ");
        let kind = visible(error["code"].as_str().or_else(|| error["class"].as_str()).unwrap_or("error"));
        write!(f, "{kind}: {message}")?;
        if let Some(audit_id) = error["audit_id"].as_str() {
            write!(f, " (audit {audit_id})")?;
        }
        let hint = error["hint"]
            .as_str()
            .map(str::to_string)
            .or_else(|| error["details"]["hint"].as_str().map(str::to_string))
            .or_else(|| error["audit_id"].as_str().map(|id| format!("see the full record: aileron audit show {id}")));
        // Some messages (parse errors) already end with their hint: print it once.
        if let Some(hint) = hint
            && !message.contains("\nhint: ")
        {
            write!(f, "\nhint: {}", visible(&hint))?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

impl DaemonClient {
    /// Connects to the running daemon, auto-starting it when needed.
    pub async fn connect(home: &Home) -> anyhow::Result<DaemonClient> {
        if let Some(client) = DaemonClient::discover(home).await? {
            return Ok(client);
        }
        if env::get(env::AILERON_NO_AUTOSTART).as_deref() == Some("1") {
            bail!("the daemon is not running\nhint: start it with `aileron daemon start`");
        }
        let info = start_daemon(home).await?;
        Ok(DaemonClient::new(http_client()?, info.url, info.token))
    }

    /// Finds a daemon that answers, without starting one: `AILERON_URL` + `AILERON_TOKEN` (an
    /// error when that daemon does not answer), else `daemon.json` (`None` when it does not).
    pub async fn discover(home: &Home) -> anyhow::Result<Option<DaemonClient>> {
        crate::platform::process::install_crypto_provider();
        let http = http_client()?;
        if let (Some(url), Some(token)) = (env::get(env::AILERON_URL), env::get(env::AILERON_TOKEN))
            && !url.is_empty()
        {
            let client = DaemonClient::new(http, url.trim_end_matches('/').to_string(), Secret::new(token));
            client
                .health()
                .await
                .with_context(|| format!("the daemon at {} (AILERON_URL) does not answer", client.base_url))?;
            return Ok(Some(client));
        }
        if let Some(info) = read_daemon_info(&home.daemon_json()) {
            let client = DaemonClient::new(http, info.url, info.token);
            match client.health().await {
                Ok(_) => return Ok(Some(client)),
                // Said, then treated as no daemon: a start takes another port.
                Err(error) if error.is::<NotOurListener>() => log_line!("aileron: warning: {error:#}"),
                Err(_) => {}
            }
        }
        Ok(None)
    }

    /// A client for a daemon at a known address, without discovery or a health check (the
    /// daemon's own `/mcp` endpoint loops back to itself with one).
    pub fn at(base_url: impl Into<String>, token: Secret) -> anyhow::Result<DaemonClient> {
        crate::platform::process::install_crypto_provider();
        Ok(DaemonClient::new(http_client()?, base_url.into(), token))
    }

    fn new(http: reqwest::Client, base_url: String, token: Secret) -> DaemonClient {
        DaemonClient { base_url, token, http }
    }

    /// The same daemon with another bearer token (the caller's own, for the `/mcp` loopback).
    pub fn with_token(mut self, token: Secret) -> DaemonClient {
        self.token = token;
        self
    }

    /// The token this client presents (the launcher hands the daemon token over with a confined
    /// agent's listeners, on the home's own socket).
    pub fn token(&self) -> &Secret {
        &self.token
    }

    /// Whether this client holds the daemon token (found in `daemon.json`, or given as
    /// `AILERON_TOKEN` with the daemon's own value) rather than a session token: asked of the
    /// daemon, which alone knows.
    pub async fn is_admin(&self) -> bool {
        self.call_raw(Method::GET, "/v1/status", None).await.is_ok_and(|(status, _)| status.is_success())
    }

    /// Asks `GET /v1/health` (which carries no token), then checks that what answered on a
    /// loopback port is a listener of this user's: every discovery goes through here before the
    /// token, a passphrase or a secret is sent.
    pub async fn health(&self) -> anyhow::Result<Value> {
        let response =
            self.http.get(format!("{}/v1/health", self.base_url)).timeout(Duration::from_secs(2)).send().await?;
        if !response.status().is_success() {
            bail!("health check answered {}", response.status());
        }
        listener_is_ours(&self.base_url)?;
        Ok(response.json().await?)
    }

    /// Sends a request; non-2xx answers become [`ApiFailure`] errors.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let (status, value) = self.call_raw(method, path, body).await?;
        if status.is_success() { Ok(value) } else { Err(ApiFailure { status, body: value }.into()) }
    }

    /// A request to `path` carrying the token, for callers that add headers of their own
    /// (`traceparent`) or stream the answer (SSE). The token is the whole identity: the daemon
    /// derives the audit actor from the principal it authenticates, never from a header.
    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http.request(method, format!("{}{path}", self.base_url)).bearer_auth(self.token.expose())
    }

    /// The `Authorization` header this client sends, marked sensitive (for a client of another
    /// kind speaking for it: `aileron-mcp`'s direct path, `mcp/link.rs`).
    pub(crate) fn authorization(&self) -> reqwest::header::HeaderValue {
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.token.expose()))
            .unwrap_or_else(|_| reqwest::header::HeaderValue::from_static("Bearer"));
        value.set_sensitive(true);
        value
    }

    /// Sends a request and returns the status with the decoded body, whatever the status.
    pub async fn call_raw(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let (status, bytes) = self.call_bytes(method, path, body).await?;
        if status.is_success() {
            // A success whose body cannot be read is said, never taken as `null`: a listing that
            // could not be read printed nothing and succeeded (the ninth re-attack).
            return Ok((status, answer_value(path, &bytes)?));
        }
        Ok((status, body_value(&bytes)))
    }

    /// Sends a request and returns the status with the body's bytes, whatever the status.
    async fn call_bytes(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, bytes::Bytes)> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.with_context(|| format!("cannot reach the daemon at {}", self.base_url))?;
        let status = response.status();
        Ok((status, response.bytes().await?))
    }

    /// A request whose successful answer is decoded straight into `R` (no [`Value`] tree
    /// first: a listing of 10,000 actions is megabytes); any other answer is an [`ApiFailure`].
    async fn call_as<R: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<R> {
        let (status, bytes) = self.call_bytes(method, path, body).await?;
        if !status.is_success() {
            return Err(ApiFailure { status, body: body_value(&bytes) }.into());
        }
        serde_json::from_slice(&bytes).with_context(|| format!("the daemon's answer to {path} is not what this client expects\nhint: the daemon and the CLI may be different versions; restart the daemon (`aileron daemon stop`)"))
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// A `GET` whose answer is one of the wire types of [`crate::wire`].
    pub async fn get_as<R: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<R> {
        self.call_as(Method::GET, path, None).await
    }

    /// A `POST` of a wire type whose answer is one too.
    pub async fn post_as<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<R> {
        self.call_as(Method::POST, path, Some(&serde_json::to_value(body)?)).await
    }
}

/// An answer's body as JSON; `null` when it is empty or not JSON.
fn body_value(bytes: &[u8]) -> Value {
    if bytes.is_empty() { Value::Null } else { serde_json::from_slice(bytes).unwrap_or(Value::Null) }
}

/// A successful answer's body as JSON (`null` when empty), or why it cannot be read.
fn answer_value(path: &str, bytes: &[u8]) -> anyhow::Result<Value> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes).with_context(|| {
        format!(
            "the daemon's answer to {path} could not be read\nhint: the daemon and the CLI may be different \
             versions; restart the daemon (`aileron daemon stop`)"
        )
    })
}

/// The daemon is on loopback: a proxy from the environment (`HTTP_PROXY`, common on company
/// machines) must never carry the daemon token to it.
pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    Ok(crate::dataplane::tls::reqwest_builder(crate::dataplane::tls::Alpn::Http2AndHttp1)
        .connect_timeout(CONNECT_TIMEOUT)
        .no_proxy()
        .build()?)
}

pub fn read_daemon_info(path: &Path) -> Option<DaemonInfo> {
    // A `daemon.json` another user could have written is not the daemon's: its URL would receive
    // the token, the passphrase and every request (the re-attack's M3).
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() || !crate::platform::home::is_ours_and_private(&metadata) {
        log_line!(
            "aileron: warning: ignoring {}: it is not a private file of yours\nhint: remove it; the daemon writes a new one",
            path.display()
        );
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

/// Starts `aileron daemon run` detached, logging to `daemon.log`, and waits until it answers.
pub async fn start_daemon(home: &Home) -> anyhow::Result<DaemonInfo> {
    start_daemon_with(home, &[]).await
}

/// [`start_daemon`] with `extra_env` set on the daemon (the benchmark's upstream URLs).
pub async fn start_daemon_with(home: &Home, extra_env: &[(&str, &str)]) -> anyhow::Result<DaemonInfo> {
    let binary = daemon_binary()?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(home.daemon_log())
        .with_context(|| format!("opening {}", home.daemon_log().display()))?;
    // `mode` applies to a new file only; a log an older version left 0644 is made private too.
    let _ = log.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
    let previous = read_daemon_info(&home.daemon_json()).map(|info| info.started_at);
    let mut command = std::process::Command::new(&binary);
    command.args(["daemon", "run"]).envs(extra_env.iter().copied());
    // The caller's configuration goes with it, its secrets do not (SPEC §6; the re-attack's M2:
    // the passphrase stayed in the daemon's environment after `vault lock`, for any program that
    // could read it there).
    for secret in env::NEVER_INHERITED {
        command.env_remove(secret);
    }
    command
        .env(env::AILERON_HOME, home.root())
        .env(env::AILERON_AUDIT_DIR, home.audit_parent().unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    let mut child = command.spawn().with_context(|| format!("starting {}", binary.display()))?;
    let deadline = Instant::now() + AUTOSTART_BUDGET;
    let http = http_client()?;
    loop {
        if let Some(info) = read_daemon_info(&home.daemon_json())
            && Some(&info.started_at) != previous.as_ref()
        {
            let client = DaemonClient::new(http.clone(), info.url.clone(), info.token.clone());
            if client.health().await.is_ok() {
                // The child is the daemon: it outlives us; reap it from a thread so it never zombies.
                std::thread::spawn(move || child.wait());
                return Ok(info);
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            // Lost a start race to another client? Then a daemon is answering now.
            if let Some(info) = read_daemon_info(&home.daemon_json()) {
                let client = DaemonClient::new(http.clone(), info.url.clone(), info.token.clone());
                if client.health().await.is_ok() {
                    return Ok(info);
                }
            }
            return Err(anyhow!(
                "the daemon exited during start-up ({status})\n{}\nhint: see {}",
                log_tail(&home.daemon_log()),
                home.daemon_log().display()
            ));
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "the daemon did not answer within {} s\nhint: see {}",
                AUTOSTART_BUDGET.as_secs(),
                home.daemon_log().display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The executable that runs `daemon run`: `AILERON_DAEMON_BIN`, else this executable when it is
/// `aileron`, else the `aileron` beside it (so `aileron-mcp` can auto-start the daemon).
fn daemon_binary() -> anyhow::Result<std::path::PathBuf> {
    if let Some(bin) = env::get(env::AILERON_DAEMON_BIN).filter(|bin| !bin.is_empty()) {
        return Ok(bin.into());
    }
    let current = std::env::current_exe().context("locating the running executable")?;
    if current.file_name().is_some_and(|name| name == "aileron") {
        return Ok(current);
    }
    let sibling = current.with_file_name("aileron");
    if sibling.exists() {
        return Ok(sibling);
    }
    bail!(
        "cannot auto-start the daemon: no `aileron` executable beside {}\nhint: install aileron next to it, \
         set AILERON_DAEMON_BIN, or start the daemon with `aileron daemon start`",
        current.display()
    )
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

/// Sends SIGTERM to the running daemon and waits (up to `budget`) until it has exited.
/// Returns the pid that was stopped, or `None` when no daemon was running.
pub async fn stop_daemon(home: &Home, budget: Duration) -> anyhow::Result<Option<u32>> {
    Ok(match stop(home, budget).await? {
        Stopped::Daemon(pid) => Some(pid),
        Stopped::NotRunning | Stopped::StaleRecordRemoved { .. } => None,
    })
}

/// What [`stop`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The daemon with this pid held `daemon.lock`, was signalled and has exited.
    Daemon(u32),
    NotRunning,
    /// No daemon held `daemon.lock`; the `daemon.json` left behind (naming `pid`, which was not
    /// signalled) was removed.
    StaleRecordRemoved {
        pid: Option<u32>,
    },
}

/// Stops this home's daemon: only a process that holds `daemon.lock` is signalled. The pid in
/// `daemon.json` alone proves nothing: a daemon that crashed leaves the file behind, and its pid
/// may since belong to any process of the user's.
pub async fn stop(home: &Home, budget: Duration) -> anyhow::Result<Stopped> {
    let record = read_daemon_json(&home.daemon_json());
    if !daemon_lock_is_held(home)? {
        return Ok(match record {
            DaemonJson::Absent => Stopped::NotRunning,
            DaemonJson::Info(info) => {
                let _ = std::fs::remove_file(home.daemon_json());
                Stopped::StaleRecordRemoved { pid: Some(info.pid) }
            }
            DaemonJson::Unreadable(_) => {
                let _ = std::fs::remove_file(home.daemon_json());
                Stopped::StaleRecordRemoved { pid: None }
            }
        });
    }
    let info = match record {
        DaemonJson::Info(info) => info,
        other => return Err(held_lock_without_record(home, &other)),
    };
    let pid = Pid::from_raw(i32::try_from(info.pid).context("pid out of range")?);
    // The lock is held but daemon.json may still be the one a crashed daemon left (a new daemon
    // writes its own only once it listens): signal its pid only when that process is the holder.
    if kill(pid, None).is_err() || has_file_open(info.pid, &home.daemon_lock()) == Some(false) {
        return Err(anyhow!(
            "a daemon holds {}, but {} names pid {}, which is not that daemon\nhint: the daemon may be starting; try again in a moment, else see {}",
            home.daemon_lock().display(),
            home.daemon_json().display(),
            info.pid,
            home.daemon_log().display()
        ));
    }
    kill(pid, Signal::SIGTERM).context("signalling the daemon")?;
    let deadline = Instant::now() + budget;
    while kill(pid, None).is_ok() && !is_zombie(info.pid) {
        if Instant::now() > deadline {
            bail!(
                "the daemon (pid {}) did not exit within {} s\nhint: it may still be finishing runs; see {}",
                info.pid,
                budget.as_secs(),
                home.daemon_log().display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its leader has exited; the lock goes with its last thread. Answering only then lets the
    // next start take it at once. Past the budget something else holds it: not this daemon.
    while daemon_lock_is_held(home)? && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(Stopped::Daemon(info.pid))
}

/// `daemon.json` as found on disk.
enum DaemonJson {
    Absent,
    Info(DaemonInfo),
    /// Present but unreadable or not a daemon record: why.
    Unreadable(String),
}

fn read_daemon_json(path: &Path) -> DaemonJson {
    match std::fs::read_to_string(path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => DaemonJson::Absent,
        Err(error) => DaemonJson::Unreadable(error.to_string()),
        Ok(text) => match serde_json::from_str(&text) {
            Ok(info) => DaemonJson::Info(info),
            Err(error) => DaemonJson::Unreadable(error.to_string()),
        },
    }
}

/// The error for a daemon that holds `daemon.lock` while `daemon.json` is missing or damaged:
/// without the token in that file no client can reach it, and nothing can say which pid to stop.
fn held_lock_without_record(home: &Home, record: &DaemonJson) -> anyhow::Error {
    let (json, lock) = (home.daemon_json(), home.daemon_lock());
    match record {
        DaemonJson::Unreadable(reason) => anyhow!(
            "a daemon holds {}, but {} is damaged ({reason})\nhint: stop that daemon by hand (`fuser {}` shows its pid; then `kill <pid>`); the next start rewrites daemon.json",
            lock.display(),
            json.display(),
            lock.display()
        ),
        _ => anyhow!(
            "a daemon holds {}, but {} does not exist\nhint: the daemon may be starting; try again in a moment, else see {}",
            lock.display(),
            json.display(),
            home.daemon_log().display()
        ),
    }
}

/// Why a daemon that holds `daemon.lock` cannot be reached through `daemon.json` (missing or
/// damaged); `None` when no daemon holds the lock or the file reads as a daemon record.
pub fn unreachable_daemon(home: &Home) -> Option<anyhow::Error> {
    let record = read_daemon_json(&home.daemon_json());
    if matches!(record, DaemonJson::Info(_)) || !daemon_lock_is_held(home).unwrap_or(false) {
        return None;
    }
    Some(held_lock_without_record(home, &record))
}

/// Refuses a daemon URL on this host whose port another user listens on. Once the daemon has let
/// its port go (killed, stopping, restarted elsewhere), any local user may bind it and answer
/// health like a daemon; `daemon.json` and `AILERON_URL` still name it, and the token, a vault
/// passphrase or a secret's value would go to that user (the re-attack of 2026-12-05, H1). Checked
/// after the health answer, while the answering listener holds the port.
fn listener_is_ours(base_url: &str) -> anyhow::Result<()> {
    let Ok(url) = reqwest::Url::parse(base_url) else { return Ok(()) };
    let on_this_host = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    let (true, Some(port)) = (on_this_host, url.port_or_known_default()) else { return Ok(()) };
    let Some(owners) = crate::platform::process::tcp_listener_owners(port) else { return Ok(()) };
    let me = nix::unistd::geteuid().as_raw();
    match owners.into_iter().find(|owner| *owner != me) {
        Some(other) => Err(NotOurListener { url: base_url.to_string(), owner: other, me }.into()),
        None => Ok(()),
    }
}

/// What [`listener_is_ours`] refuses.
#[derive(Debug)]
struct NotOurListener {
    url: String,
    owner: u32,
    me: u32,
}

impl std::fmt::Display for NotOurListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the process listening on {} belongs to uid {}, not to you (uid {}): it is not your daemon, and nothing \
             was sent to it\nhint: your daemon is not running there; `aileron daemon start` starts one on another port",
            self.url, self.owner, self.me
        )
    }
}

impl std::error::Error for NotOurListener {}

/// Whether a process holds this home's `daemon.lock` (the daemon takes it, exclusive, for its
/// whole life). Probing takes the lock for an instant when it is free; a daemon starting in that
/// instant waits for it (`daemon::take_daemon_lock`).
fn daemon_lock_is_held(home: &Home) -> anyhow::Result<bool> {
    let path = home.daemon_lock();
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error).with_context(|| format!("opening {}", path.display())),
    };
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        // Dropping the guard unlocks at once.
        Ok(_probe) => Ok(false),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(true),
        Err((_, errno)) => Err(anyhow!("locking {}: {errno}", path.display())),
    }
}

/// Whether the process holding `daemon.lock` is a live daemon: the pid `daemon.json` names has
/// the lock file open (so it exists) and is not a zombie. False while a daemon is dying (its
/// leader a zombie, its last thread still holding the lock), while one is starting and has not
/// written its record yet, and while nothing holds the lock at all.
pub(crate) fn a_live_daemon_holds_the_lock(home: &Home) -> bool {
    let DaemonJson::Info(info) = read_daemon_json(&home.daemon_json()) else {
        return false;
    };
    has_file_open(info.pid, &home.daemon_lock()) == Some(true) && !is_zombie(info.pid)
}

/// Whether process `pid` has `path` open; `None` when `/proc` does not tell (no such process,
/// or no `/proc`).
fn has_file_open(pid: u32, path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let target = std::fs::metadata(path).ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        fds.flatten()
            .any(|fd| std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == target.dev() && m.ino() == target.ino())),
    )
}

/// A daemon we started ourselves stays a zombie until reaped; treat that as exited.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ninth re-attack: a successful answer the client could not read became `null`, and
    /// `aileron audit list` printed nothing and succeeded. It is an error naming the route.
    #[test]
    fn a_successful_answer_that_cannot_be_read_is_an_error() {
        let mut deep = "[".repeat(200);
        deep.push_str(&"]".repeat(200));
        for unreadable in [deep.as_bytes(), b"{\"items\": [".as_slice(), b"<html>".as_slice()] {
            let error = answer_value("/v1/audit", unreadable).unwrap_err();
            assert!(format!("{error:#}").contains("the daemon's answer to /v1/audit could not be read"), "{error:#}");
        }
        assert_eq!(answer_value("/v1/audit", b"").unwrap(), Value::Null);
        assert_eq!(answer_value("/v1/audit", b"{\"items\":[]}").unwrap()["items"], serde_json::json!([]));
    }
}
