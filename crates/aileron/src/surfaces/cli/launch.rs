//! `aileron launch <agent> [--dry-run] [--unconfined] [--network MODE] [-- agent args]`: run a coding agent wired
//! to Aileron, confined (see `crate::surfaces::launch`). Exits with the agent's own exit code.

use std::ffi::OsString;

use clap::Args;

use super::{CliError, CliResult, ExitStatus};
use crate::platform::home::Home;
use crate::surfaces::launch::{Agent, LaunchOptions};
use crate::wire::SessionNetwork;

#[derive(Args)]
pub struct LaunchArgs {
    /// The agent to start
    #[arg(value_enum)]
    agent: Agent,
    /// Print the config changes, environment and command line, without writing or starting anything
    #[arg(long)]
    dry_run: bool,
    /// Run the agent without containment: it can then read your Aileron home, take the daemon
    /// token and approve its own actions. Audited; its approvals say "requested by an unconfined agent"
    #[arg(long)]
    unconfined: bool,
    /// Let the confined agent write PATH too (repeatable; audited with the session). It may always
    /// write its workspace (the repository it starts in), its own config and state directories and
    /// a private temp directory; everything else is read-only to it
    #[arg(long, value_name = "PATH")]
    writable: Vec<std::path::PathBuf>,
    /// The confined agent's network: `enforced` (its own network namespace; out only through the
    /// daemon's egress proxy, every request audited) or `open` (the host's network, unaudited;
    /// recorded as `sandbox.egress.unenforced`)
    #[arg(long, value_enum, default_value = "enforced", value_name = "MODE")]
    network: SessionNetwork,
    /// Let the proxy reach HOST:PORT although it is loopback or private (repeatable; e.g. a local
    /// test server, `127.0.0.1:8443`)
    #[arg(long, value_name = "HOST:PORT")]
    allow_private: Vec<String>,
    /// Relay one non-HTTP destination as it is (repeatable; e.g. `github.com:22` for git over ssh,
    /// `127.0.0.1:5432` for a local database): a name is mapped to a loopback address of its own in
    /// the agent's /etc/hosts; every connection is audited
    #[arg(long, value_name = "HOST:PORT")]
    allow_tcp: Vec<String>,
    /// Show the agent a path it does not see by default (repeatable; audited): one of your
    /// credential stores (`~/.aws`, `~/.config/gh`, `~/.ssh`, `~/.netrc`, `~/.git-credentials` and
    /// the others of SPEC §15 are hidden), or any other part of your home, of which it sees only
    /// its workspace, its own directories, your git config and the toolchains on your PATH
    /// (`--expose ~` shows it all)
    #[arg(long, value_name = "PATH")]
    expose: Vec<std::path::PathBuf>,
    /// Pass one of your credential variables on to the confined agent (repeatable; audited): by
    /// default `GH_TOKEN`, `GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY` and the other tool and service
    /// tokens are withheld from it (the model providers' keys are not)
    #[arg(long, value_name = "NAME")]
    expose_env: Vec<String>,
    /// How long a request of the agent's own tools that needs your approval waits at the proxy for
    /// your decision before it is answered `approval_pending` (1–600; the identical request then
    /// goes through once if you approve within 10 minutes)
    #[arg(long, value_name = "SECONDS", default_value_t = 55, value_parser = clap::value_parser!(u64).range(1..=600))]
    approval_hold: u64,
    /// Arguments for the agent, after `--` (e.g. `aileron launch claude -- -p "list my issues"`)
    #[arg(last = true, value_name = "AGENT ARGS")]
    agent_args: Vec<OsString>,
}

pub async fn run(home: &Home, args: LaunchArgs) -> CliResult {
    let options = LaunchOptions {
        agent: args.agent,
        dry_run: args.dry_run,
        unconfined: args.unconfined,
        writable: args.writable,
        network: args.network,
        allow_private: args.allow_private,
        allow_tcp: args.allow_tcp,
        expose: args.expose,
        expose_env: args.expose_env,
        approval_hold: args.approval_hold,
        agent_args: args.agent_args,
    };
    crate::surfaces::launch::run(home, options).await.map(ExitStatus::Agent).map_err(CliError::from)
}
