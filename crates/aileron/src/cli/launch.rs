//! `aileron launch <agent> [--dry-run] [-- agent args]`: run a coding agent wired to Aileron
//! (see `crate::launch`). Exits with the agent's own exit code.

use std::ffi::OsString;

use clap::Args;

use super::{CliError, CliResult};
use crate::home::Home;
use crate::launch::{Agent, LaunchOptions};

#[derive(Args)]
pub struct LaunchArgs {
    /// The agent to start
    #[arg(value_enum)]
    agent: Agent,
    /// Print the config changes, environment and command line, without writing or starting anything
    #[arg(long)]
    dry_run: bool,
    /// Arguments for the agent, after `--` (e.g. `aileron launch claude -- -p "list my issues"`)
    #[arg(last = true, value_name = "AGENT ARGS")]
    agent_args: Vec<OsString>,
}

pub async fn run(home: &Home, args: LaunchArgs) -> CliResult {
    let options = LaunchOptions { agent: args.agent, dry_run: args.dry_run, agent_args: args.agent_args };
    crate::launch::run(home, options).await.map_err(CliError::from)
}
