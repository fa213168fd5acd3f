//! `aileron daemon start|status|stop|run`.

use std::time::Duration;

use clap::{Args, Subcommand};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{DaemonClient, Stopped, read_daemon_info, start_daemon, stop, unreachable_daemon};

#[derive(Args)]
pub struct DaemonArgs {
    #[command(subcommand)]
    command: DaemonCommand,
}

#[derive(Subcommand)]
enum DaemonCommand {
    /// Start the daemon in the background; returns once it answers
    Start,
    /// Show whether the daemon runs, its URL, pid, version and counts
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Stop the daemon; returns once it has exited
    Stop,
    /// Run the daemon in the foreground (what `start` and auto-start execute)
    Run,
}

/// How long `stop` waits for in-flight runs to finish before giving up.
const STOP_BUDGET: Duration = Duration::from_secs(60);

pub async fn run(home: &Home, args: DaemonArgs) -> CliResult {
    match args.command {
        DaemonCommand::Run => {
            crate::surfaces::daemon::serve(home.clone()).await?;
            Ok(ExitStatus::Ok)
        }
        DaemonCommand::Start => {
            if let Some(info) = running(home).await {
                eprintln!("the daemon is already running at {} (pid {})", info.url, info.pid);
                return Ok(ExitStatus::Ok);
            }
            if let Some(error) = unreachable_daemon(home) {
                return Err(error.into());
            }
            let info = start_daemon(home).await?;
            eprintln!("daemon started at {} (pid {})", info.url, info.pid);
            Ok(ExitStatus::Ok)
        }
        DaemonCommand::Status { json } => {
            let Some(_) = running(home).await else {
                if let Some(error) = unreachable_daemon(home) {
                    return Err(error.into());
                }
                if json {
                    print_json(&serde_json::json!({ "running": false }));
                }
                return Err(CliError::failure("the daemon is not running\nhint: start it with `aileron daemon start`"));
            };
            let client = DaemonClient::connect(home).await?;
            let mut status = client.get("/v1/status").await?;
            status["running"] = true.into();
            status["url"] = client.base_url.clone().into();
            if json {
                print_json(&status);
            } else {
                outln!("running      yes");
                outln!("url          {}", client.base_url);
                outln!("pid          {}", status["pid"]);
                outln!("version      {}", status["version"].as_str().unwrap_or("?"));
                outln!("uptime       {} s", status["uptime_seconds"]);
                outln!(
                    "actions      {} ({} enabled, {} failed to load)",
                    status["counts"]["actions"],
                    status["counts"]["actions_enabled"],
                    status["counts"]["action_load_errors"]
                );
                outln!("connectors   {}", status["counts"]["connectors"]);
                outln!("audit        {}", status["audit"].as_str().unwrap_or("?"));
                if let Some(export) = status.get("audit_export") {
                    outln!(
                        "audit export {} record(s) behind {}{}",
                        export["lag"],
                        export["endpoint"].as_str().unwrap_or("?"),
                        export["last_error"].as_str().map(|e| format!(" (last error: {e})")).unwrap_or_default()
                    );
                }
                if let Some(policy) = status.get("policy") {
                    outln!(
                        "policy       {} rule(s) from {} file(s), {}",
                        policy["rules"],
                        policy["files"].as_array().map_or(0, Vec::len),
                        policy["hash"].as_str().unwrap_or("?")
                    );
                    if let Some(problem) = policy["problem"].as_str() {
                        outln!("policy error {}", problem.replace('\n', "\n             "));
                    }
                }
                outln!("home         {}", home.root().display());
            }
            Ok(ExitStatus::Ok)
        }
        DaemonCommand::Stop => {
            match stop(home, STOP_BUDGET).await? {
                Stopped::Daemon(pid) => eprintln!("daemon stopped (pid {pid})"),
                Stopped::NotRunning => eprintln!("the daemon is not running"),
                Stopped::StaleRecordRemoved { pid } => eprintln!(
                    "the daemon is not running; removed the stale {}{}",
                    home.daemon_json().display(),
                    pid.map(|pid| format!(" (pid {pid} in it was not signalled)")).unwrap_or_default()
                ),
            }
            Ok(ExitStatus::Ok)
        }
    }
}

/// The daemon's info when it is answering.
async fn running(home: &Home) -> Option<crate::platform::process::DaemonInfo> {
    let info = read_daemon_info(&home.daemon_json())?;
    let client = crate::surfaces::client::http_client().ok()?;
    let answered = client
        .get(format!("{}/v1/health", info.url))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    answered.then_some(info)
}
