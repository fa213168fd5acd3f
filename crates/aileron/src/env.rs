//! The one registry of environment variables Aileron reads. No other file names an `AILERON_*`
//! or `OTEL_*` literal (checked by the tidy test); everything else goes through these constants.

/// State directory (default `~/.aileron`).
pub const AILERON_HOME: &str = "AILERON_HOME";
/// Overrides the parent of `audit/`; an explicit empty value keeps the audit log in memory.
pub const AILERON_AUDIT_DIR: &str = "AILERON_AUDIT_DIR";
/// Overrides the parent of `traces/` for the file trace exporter; empty = exporter disabled.
pub const AILERON_TRACES_DIR: &str = "AILERON_TRACES_DIR";
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
/// Overrides the binary used to auto-start the daemon (default: the running `aileron`, or the
/// `aileron` beside `aileron-mcp`).
pub const AILERON_DAEMON_BIN: &str = "AILERON_DAEMON_BIN";

/// Every variable, with a one-line description, for `aileron --help` and the README.
pub const ALL: &[(&str, &str)] = &[
    (AILERON_HOME, "state directory (default ~/.aileron)"),
    (AILERON_AUDIT_DIR, "parent of audit/ (default AILERON_HOME; empty = in-memory audit log)"),
    (AILERON_TRACES_DIR, "parent of traces/ for the file trace exporter (empty = disabled)"),
    (AILERON_ANTHROPIC_UPSTREAM, "LLM gateway upstream for /v1/messages* (default https://api.anthropic.com)"),
    (AILERON_OPENAI_UPSTREAM, "LLM gateway upstream for OpenAI paths (default https://api.openai.com)"),
    (AILERON_LISTEN, "daemon listen address (default 127.0.0.1:0, an ephemeral loopback port)"),
    (AILERON_URL, "daemon URL for clients (overrides daemon.json)"),
    (AILERON_TOKEN, "daemon bearer token for clients (with AILERON_URL)"),
    (AILERON_SESSION_ID, "launch session id forwarded to the daemon"),
    (AILERON_NO_AUTOSTART, "1 = never auto-start the daemon from a client"),
    (AILERON_DAEMON_BIN, "binary used to auto-start the daemon (default: this aileron, or the one beside aileron-mcp)"),
];

/// The value of a variable; `None` when unset (an explicit empty value is `Some("")`).
pub fn get(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `aileron --help` footer listing every variable.
pub fn help_text() -> String {
    let mut text = String::from("Environment variables:\n");
    for (name, description) in ALL {
        text.push_str(&format!("  {name:<22} {description}\n"));
    }
    text
}
