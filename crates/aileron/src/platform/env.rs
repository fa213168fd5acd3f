//! The one registry of environment variables Aileron reads. No other file names an `AILERON_*`
//! or `OTEL_*` literal (checked by the tidy test); everything else goes through these constants.

/// State directory (default `~/.aileron`).
pub const AILERON_HOME: &str = "AILERON_HOME";
/// Overrides the parent of `audit/`; an explicit empty value keeps the audit log in memory.
pub const AILERON_AUDIT_DIR: &str = "AILERON_AUDIT_DIR";
/// Overrides the parent of `traces/` for the file trace exporter; empty = exporter disabled.
pub const AILERON_TRACES_DIR: &str = "AILERON_TRACES_DIR";
pub const AILERON_WITNESS_DIR: &str = "AILERON_WITNESS_DIR";
/// `true` (or `1`) turns traces on; anything else, or unset, leaves the OTel SDK unconstructed.
pub const AILERON_OTEL_ENABLED: &str = "AILERON_OTEL_ENABLED";
/// The `service.name` resource attribute of every span (default `aileron`).
pub const AILERON_OTEL_SERVICE_NAME: &str = "AILERON_OTEL_SERVICE_NAME";
/// `noop` (default) | `stdout` (JSON lines on stderr) | `file` (daily JSONL) | `otlp` (OTLP/HTTP).
pub const AILERON_OTEL_EXPORTER: &str = "AILERON_OTEL_EXPORTER";
/// Standard OTel collector URL for the `otlp` exporter (default `http://localhost:4318`; `/v1/traces`
/// is appended). Read through `telemetry::otlp::OtlpTarget`, with the SDK's signal-specific forms
/// (`OTEL_EXPORTER_OTLP_TRACES_*`, `_LOGS_*`), as are the ones below.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT";
pub const OTEL_EXPORTER_OTLP_LOGS_HEADERS: &str = "OTEL_EXPORTER_OTLP_LOGS_HEADERS";
pub const AILERON_AUDIT_EXPORT: &str = "AILERON_AUDIT_EXPORT";
/// Standard: comma-separated `key=value` headers added to every export request (API keys).
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// Standard: allow plain HTTP. The HTTP exporter follows the endpoint's scheme (`http://` is
/// plain), so this only matters to gRPC exporters; accepted for compatibility.
pub const OTEL_EXPORTER_OTLP_INSECURE: &str = "OTEL_EXPORTER_OTLP_INSECURE";
/// Standard: export request timeout in milliseconds (default 10000).
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// Standard: the `otlp` span processor's limits (read by `telemetry::otlp_processor::Limits`).
pub const OTEL_BSP_SCHEDULE_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";
pub const OTEL_BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
pub const OTEL_BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";
/// Base URL the gateway forwards Anthropic paths (`/v1/messages*`) to.
pub const AILERON_ANTHROPIC_UPSTREAM: &str = "AILERON_ANTHROPIC_UPSTREAM";
/// Base URL the gateway forwards OpenAI paths (`/v1/chat/completions`, `/v1/responses`, `/v1/models`) to.
pub const AILERON_OPENAI_UPSTREAM: &str = "AILERON_OPENAI_UPSTREAM";
/// Pins the daemon's listen address (default `127.0.0.1:0`, an ephemeral port).
pub const AILERON_LISTEN: &str = "AILERON_LISTEN";
/// Daemon URL for clients; overrides `daemon.json` (set by `aileron launch`).
pub const AILERON_URL: &str = "AILERON_URL";
/// Bearer token for clients; goes with `AILERON_URL`.
pub const AILERON_TOKEN: &str = "AILERON_TOKEN";
/// Launch session id carried by `aileron-mcp` to the daemon.
pub const AILERON_SESSION_ID: &str = "AILERON_SESSION_ID";
/// Set to `1` to make clients fail instead of auto-starting the daemon.
pub const AILERON_NO_AUTOSTART: &str = "AILERON_NO_AUTOSTART";
/// mimalloc's own option, read when the process loads: how long memory it freed waits before it
/// goes back to the system (default 1000 ms). The daemon sets it to `0` as it starts unless this is
/// set (`process::return_freed_memory_at_once`; docs/decisions/0004-actions-and-runs.md, "Allocator").
pub const MIMALLOC_PURGE_DELAY: &str = "MIMALLOC_PURGE_DELAY";
/// Overrides the binary used to auto-start the daemon (default: the running `aileron`, or the
/// `aileron` beside `aileron-mcp`).
pub const AILERON_DAEMON_BIN: &str = "AILERON_DAEMON_BIN";

/// The vault passphrase for `aileron vault init|unlock` (never stored; prefer the prompt or
/// `--passphrase-file` on shared machines).
pub const AILERON_VAULT_PASSPHRASE: &str = "AILERON_VAULT_PASSPHRASE";

/// Forge base URLs for `connector install <fqn>@<version>` and `keyring trust` (tests point them
/// at a fake forge on loopback).
pub const AILERON_GITHUB_BASE_URL: &str = "AILERON_GITHUB_BASE_URL";
pub const AILERON_GITLAB_BASE_URL: &str = "AILERON_GITLAB_BASE_URL";
pub const AILERON_GITHUB_RAW_BASE_URL: &str = "AILERON_GITHUB_RAW_BASE_URL";
pub const AILERON_GITLAB_RAW_BASE_URL: &str = "AILERON_GITLAB_RAW_BASE_URL";
pub const AILERON_GITHUB_API_URL: &str = "AILERON_GITHUB_API_URL";
/// `HOST:PORT=IP:PORT,…`: where a launched agent's proxy dials those destinations.
pub const AILERON_CONNECT_TO: &str = "AILERON_CONNECT_TO";
/// The user's home: what `~/` means in spawn manifests (not Aileron's own, so not in [`ALL`]).
pub const HOME: &str = "HOME";
/// The certificate bundle OpenSSL-style tools trust: a launched agent's trust bundle starts from
/// it (else from the system's) and adds the session's CA (not Aileron's own, so not in [`ALL`]).
pub const SSL_CERT_FILE: &str = "SSL_CERT_FILE";

/// Secrets a client holds that a daemon it starts never inherits: the vault passphrase (it would
/// stay in the daemon's environment after `vault lock`) and a session's wiring (a launched agent's
/// token is not the daemon's).
pub const NEVER_INHERITED: [&str; 4] = [AILERON_VAULT_PASSPHRASE, AILERON_TOKEN, AILERON_URL, AILERON_SESSION_ID];

/// Every variable, with a one-line description, for `aileron --help` and the README.
pub const ALL: &[(&str, &str)] = &[
    (AILERON_HOME, "state directory (default ~/.aileron)"),
    (AILERON_AUDIT_DIR, "parent of audit/ (default AILERON_HOME; empty = in-memory audit log)"),
    (AILERON_TRACES_DIR, "parent of traces/ for the file trace exporter (empty = disabled)"),
    (AILERON_WITNESS_DIR, "the audit witness's key and state (default: <home>-witness beside the home)"),
    (AILERON_OTEL_ENABLED, "true = emit OpenTelemetry traces (default false: no SDK at all)"),
    (AILERON_OTEL_SERVICE_NAME, "service.name of every span (default aileron)"),
    (AILERON_OTEL_EXPORTER, "noop | stdout (JSON lines, stderr) | file (daily JSONL) | otlp"),
    (
        OTEL_EXPORTER_OTLP_ENDPOINT,
        "otlp: collector URL (default http://localhost:4318; or _TRACES_ENDPOINT, the whole URL)",
    ),
    (OTEL_EXPORTER_OTLP_HEADERS, "otlp: k=v,k2=v2 headers on every export (API keys; or _TRACES_HEADERS)"),
    (AILERON_AUDIT_EXPORT, "otlp: ship every audit record to the OTLP collector as a log record (SPEC §17)"),
    (
        OTEL_EXPORTER_OTLP_LOGS_ENDPOINT,
        "the audit export's full logs URL (default OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs)",
    ),
    (OTEL_EXPORTER_OTLP_LOGS_HEADERS, "the audit export's headers (default OTEL_EXPORTER_OTLP_HEADERS)"),
    (OTEL_EXPORTER_OTLP_INSECURE, "otlp: plain HTTP allowed (HTTP follows the URL scheme; OTel SDK)"),
    (OTEL_EXPORTER_OTLP_TIMEOUT, "otlp: export timeout in ms (default 10000; or _TRACES_TIMEOUT)"),
    (OTEL_BSP_SCHEDULE_DELAY, "otlp: ms between exports of the spans waiting (default 5000)"),
    (OTEL_BSP_MAX_QUEUE_SIZE, "otlp: spans waiting for the collector at most; more are dropped (default 2048)"),
    (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "otlp: spans per export request (default 512)"),
    (AILERON_ANTHROPIC_UPSTREAM, "LLM gateway upstream for /v1/messages* (default https://api.anthropic.com)"),
    (AILERON_OPENAI_UPSTREAM, "LLM gateway upstream for OpenAI paths (default https://api.openai.com)"),
    (AILERON_LISTEN, "daemon listen address (default 127.0.0.1:0, an ephemeral loopback port)"),
    (AILERON_URL, "daemon URL for clients (overrides daemon.json)"),
    (AILERON_TOKEN, "daemon bearer token for clients (with AILERON_URL)"),
    (AILERON_SESSION_ID, "launch session id forwarded to the daemon"),
    (AILERON_NO_AUTOSTART, "1 = never auto-start the daemon from a client"),
    (AILERON_VAULT_PASSPHRASE, "vault passphrase for `aileron vault init|unlock` (else --passphrase-file or a prompt)"),
    (AILERON_GITHUB_BASE_URL, "GitHub releases base (default https://github.com)"),
    (AILERON_GITLAB_BASE_URL, "GitLab base for releases and raw files (default https://gitlab.com)"),
    (
        AILERON_GITHUB_RAW_BASE_URL,
        "GitHub raw files base for keys/publisher.pub (default https://raw.githubusercontent.com)",
    ),
    (AILERON_GITLAB_RAW_BASE_URL, "GitLab raw files base (default AILERON_GITLAB_BASE_URL or https://gitlab.com)"),
    (AILERON_GITHUB_API_URL, "GitHub REST API base for `connector check` (default https://api.github.com)"),
    (
        AILERON_CONNECT_TO,
        "HOST:PORT=IP:PORT,… where the agent proxy dials those names (like curl --connect-to; still address-checked)",
    ),
    (AILERON_DAEMON_BIN, "binary used to auto-start the daemon (default: this aileron, or the one beside aileron-mcp)"),
    (
        MIMALLOC_PURGE_DELAY,
        "ms before the daemon's allocator returns freed memory (the daemon uses 0 unless this is set)",
    ),
];

/// The value of a variable; `None` when unset (an explicit empty value is `Some("")`).
pub fn get(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The variables of the process whose names `wanted` picks, with their values (those not valid
/// Unicode left out).
pub fn named_like(wanted: impl Fn(&str) -> bool) -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| wanted(name))
        .collect()
}

/// Whether a variable of another program holds a value (a credential variable `aileron launch`
/// withholds from the agent); its value is never read.
pub fn holds_value(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|value| !value.is_empty())
}

/// A variable a connector's `[capabilities.spawn] env_passthrough` hands to the programs it runs
/// (the user consented to each key at install). Never one of Aileron's own (`AILERON_*`, any
/// case): manifests naming one are refused at parse time, and one installed before that rule
/// still passes nothing.
pub fn passed_through(name: &str) -> Option<String> {
    if name.get(..8).is_some_and(|prefix| prefix.eq_ignore_ascii_case("AILERON_")) {
        return None;
    }
    get(name)
}

/// `aileron --help` footer listing every variable.
pub fn help_text() -> String {
    let mut text = String::from("Environment variables:\n");
    let width = ALL.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, description) in ALL {
        text.push_str(&format!("  {name:<width$} {description}\n"));
    }
    text
}
