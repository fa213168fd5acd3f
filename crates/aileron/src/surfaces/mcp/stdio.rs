//! `aileron-mcp`: the MCP server an agent host starts as a subprocess. stdout is the protocol, so
//! everything else (including the auto-started daemon's output) goes to stderr or `daemon.log`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use tokio::sync::watch;

use super::changes::{ActionFeed, Followed};
use super::link::{Autostart, DaemonLink};
use super::server::{AileronMcp, McpShared};
use crate::platform::env;
use crate::platform::home::Home;
use crate::platform::telemetry;

const USAGE: &str = "\
aileron-mcp: the Aileron MCP server (stdio). An agent host starts it; it speaks MCP on stdin/stdout
and logs to stderr. Every installed, enabled action is a tool; calls run through the Aileron daemon,
which it finds through AILERON_URL + AILERON_TOKEN or AILERON_HOME/daemon.json (starting it if needed).

usage: aileron-mcp [--help | --version]";

/// Runs the server until the client closes stdin; returns the process exit code.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None => {}
        Some("--help" | "-h") => {
            log_line!("{USAGE}\n\n{}", env::help_text());
            return ExitCode::SUCCESS;
        }
        Some("--version" | "-V") => {
            log_line!("aileron-mcp {}", crate::platform::process::VERSION);
            return ExitCode::SUCCESS;
        }
        Some(other) => {
            log_line!(
                "error: unexpected argument `{other}`\nhint: aileron-mcp takes no arguments; see aileron-mcp --help"
            );
            return ExitCode::from(2);
        }
    }
    // One thread: a tool call is a line in, one HTTP request to the daemon and a line out, and
    // each hand-off between worker threads is a wake-up of a sleeping thread (tens of
    // microseconds in a VM) on the agent's path (BENCHMARKS.md, (e)). Compiling or exporting
    // spans never happens here; the span exporter has its own thread.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            log_line!("aileron-mcp: error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(serve());
    // The change follower and any blocking stdin read must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            log_line!("aileron-mcp: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Serves one MCP session on stdin/stdout.
pub async fn serve() -> anyhow::Result<()> {
    crate::platform::process::install_crypto_provider();
    // Launched (`AILERON_URL` set), the server reaches the daemon through its environment and
    // never touches the home, which is hidden from the agent and may not be creatable there.
    let home = if crate::platform::env::get(crate::platform::env::AILERON_URL).is_some_and(|url| !url.is_empty()) {
        Home::locate_from_env()
    } else {
        Home::from_env()
    }
    .context("locating AILERON_HOME")?;
    let (changes, followed) = watch::channel(Followed::default());
    let telemetry = telemetry::init(telemetry::DEFAULT_SERVICE_NAME, &home);
    let link = DaemonLink::discovered(home);
    let shared = McpShared::new(link, ActionFeed::followed(followed), telemetry.clone(), "aileron-mcp");
    // Find (or start) the daemon while the client initializes, so `initialize` answers at once.
    let warm = shared.clone();
    tokio::spawn(async move {
        if let Err(problem) = warm.link().client(Autostart::Allowed).await {
            log_line!("aileron-mcp: {}", problem.message.replace('\n', "; "));
        }
    });
    tokio::spawn(super::changes::follow(shared.clone(), changes));
    let running = AileronMcp::new(shared.clone())
        .serve({
            let (stdin, stdout) = rmcp::transport::stdio_pipes();
            super::transport::LineTransport::new(stdin, stdout)
        })
        .await
        .context("starting the MCP session on stdin/stdout")?;
    let served = running.waiting().await.context("serving MCP on stdin/stdout");
    shared.link().close().await;
    // Export the session's spans before the process goes (the batch thread blocks).
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    served?;
    Ok(())
}
