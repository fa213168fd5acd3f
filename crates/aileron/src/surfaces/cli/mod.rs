//! The `aileron` command line: `aileron <noun> <verb>`. stdout carries data (`--json` on every
//! listing), stderr carries messages; errors end with a `hint:` line. Exit codes: 0 ok,
//! 1 failure, 2 usage, 75 approval pending. There is one file per resource (a noun), named as the
//! workflow it reaches through the daemon is.

/// `println!` for the data a command prints on stdout. A reader that went away (`| head -1`)
/// ends the command quietly with status 0 instead of a panic; see [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::surfaces::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::surfaces::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for data on stdout, like [`outln!`].
#[allow(unused_macros)]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::surfaces::cli::write_stdout(format_args!($($arg)*))
    };
}

mod action;
mod action_files;
mod approval;
mod audit;
mod auth;
mod binding;
mod connector;
mod daemon;
pub mod demo;
mod install;
mod keyring;
mod launch;
mod policy;
mod upgrade;
mod vault;

pub use approval::status_line as approval_status_line;
pub use audit::summary_line as audit_summary_line;
pub use install::consent_text as connector_consent_text;

use clap::{Parser, Subcommand};

use crate::platform::home::Home;

/// How `aileron` exits (SPEC §15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    Ok,
    Failure,
    /// The command line did not parse.
    Usage,
    /// A gated run is waiting for the user's approval (`EX_TEMPFAIL`).
    Pending,
    /// `aileron launch`: the agent's own exit status, passed through.
    Agent(i32),
}

impl ExitStatus {
    pub fn code(self) -> i32 {
        match self {
            ExitStatus::Ok => 0,
            ExitStatus::Failure => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Pending => 75,
            ExitStatus::Agent(code) => code,
        }
    }
}

#[derive(Parser)]
#[command(name = "aileron", version, about = "Local control plane for AI agents: sandboxed actions, approvals, audit")]
#[command(after_long_help = env_help())]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn env_help() -> String {
    crate::platform::env::help_text()
}

#[derive(Subcommand)]
enum Command {
    /// Start, stop and inspect the background daemon
    Daemon(daemon::DaemonArgs),
    /// Install and list connectors (sandboxed WebAssembly modules)
    Connector(connector::ConnectorArgs),
    /// Add, list, inspect, enable, disable, remove and run actions
    Action(action::ActionArgs),
    /// List, approve and deny pending approvals
    Approval(approval::ApprovalArgs),
    /// Open the web console in a browser, signed in (activity, actions, connectors, accounts, agents, approvals)
    Open(approval::OpenArgs),
    /// Read and verify the audit log
    Audit(audit::AuditArgs),
    /// Check the policy rules (policy/*.cedar) and try them on a call
    Policy(policy::PolicyArgs),
    /// Trust, list and revoke the publisher keys that may sign connectors
    Keyring(keyring::KeyringArgs),
    /// Create, unlock and lock the encrypted vault that holds credentials
    Vault(vault::VaultArgs),
    /// Store, list and remove free-form secrets in the vault
    Secret(vault::SecretArgs),
    /// Bind accounts to connectors: API keys, AWS keys, OAuth2 (the connector never sees them)
    Binding(binding::BindingArgs),
    /// Bring a credential a tool of yours already holds (gh) under Aileron for launched agents
    Auth(auth::AuthArgs),
    /// Start a coding agent (claude, codex, opencode, goose, pi) wired to Aileron's actions and gateway
    Launch(launch::LaunchArgs),
    /// One screen: daemon, vault, connectors, actions, pending approvals, live agent sessions
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to standard output
    Completions { shell: clap_complete::Shell },
    /// Print the man page (roff) to standard output: `aileron man > aileron.1`
    Man,
    /// Run the whole product offline in a temporary home
    Demo,
}

/// A command's failure: what to print and the exit code.
#[derive(Debug)]
pub struct CliError {
    pub message: String,
    pub code: ExitStatus,
}

impl CliError {
    pub fn failure(message: impl Into<String>) -> CliError {
        CliError { message: message.into(), code: ExitStatus::Failure }
    }

    /// An argument clap accepted that our own code finds malformed: exit 2, as clap's own.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError { message: message.into(), code: ExitStatus::Usage }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> CliError {
        // The chain is printed once; causes that already contain a hint line keep it last.
        let mut message = error.to_string();
        for cause in error.chain().skip(1) {
            message = format!("{message}: {cause}");
        }
        CliError::failure(message)
    }
}

pub type CliResult = Result<ExitStatus, CliError>;

/// Parses arguments and runs the command; returns the process exit code.
pub fn main() -> i32 {
    // The launch containment helper must run while this process has one thread (entering a user
    // namespace needs that), before anything else starts one.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if raw.first().is_some_and(|first| first == crate::surfaces::launch::confine::SUBCOMMAND) {
        return crate::surfaces::launch::confine::main(&raw[1..]);
    }
    if raw.first().is_some_and(|first| first == crate::surfaces::launch::confine::REBIND) {
        return crate::surfaces::launch::confine::rebind_main(&raw[1..]);
    }
    // Likewise the spawn helper (the daemon runs it once per spawned program).
    if raw.first().is_some_and(|first| first == crate::dataplane::spawn::jail::SUBCOMMAND) {
        return crate::dataplane::spawn::jail::main();
    }
    crate::platform::process::install_crypto_provider();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let status = if error.use_stderr() { ExitStatus::Usage } else { ExitStatus::Ok };
            let _ = error.print();
            return status.code();
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitStatus::Failure.code();
        }
    };
    let result = runtime.block_on(run(cli));
    match result {
        Ok(status) => status.code(),
        Err(error) => {
            let message = error.message.trim_end();
            eprintln!("error: {message}");
            if !message.contains("\nhint: ") {
                eprintln!("hint: run the command with --help for usage");
            }
            error.code.code()
        }
    }
}

async fn run(cli: Cli) -> CliResult {
    if let Command::Demo = cli.command {
        return demo::run().await.map_err(CliError::from);
    }
    if let Command::Completions { shell } = &cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut command, "aileron", &mut script);
        // A closed pipe (`| head`) is not an error worth a panic.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
        return Ok(ExitStatus::Ok);
    }
    if let Command::Man = &cli.command {
        let mut page = Vec::new();
        clap_mangen::Man::new(<Cli as clap::CommandFactory>::command())
            .render(&mut page)
            .map_err(|e| CliError::failure(format!("rendering the man page: {e}")))?;
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &page);
        return Ok(ExitStatus::Ok);
    }
    let home = Home::from_env().map_err(|e| CliError::failure(e.to_string()))?;
    match cli.command {
        Command::Daemon(args) => daemon::run(&home, args).await,
        Command::Connector(args) => connector::run(&home, args).await,
        Command::Action(args) => action::run(&home, args).await,
        Command::Approval(args) => approval::run(&home, args).await,
        Command::Open(args) => approval::open(&home, args).await,
        Command::Audit(args) => audit::run(&home, args).await,
        Command::Policy(args) => policy::run(&home, args).await,
        Command::Keyring(args) => keyring::run(&home, args).await,
        Command::Vault(args) => vault::run(&home, args).await,
        Command::Secret(args) => vault::run_secret(&home, args).await,
        Command::Binding(args) => binding::run(&home, args).await,
        Command::Auth(args) => auth::run(&home, args).await,
        Command::Launch(args) => launch::run(&home, args).await,
        Command::Status { json } => status(&home, json).await,
        Command::Demo | Command::Completions { .. } | Command::Man => unreachable!("handled above"),
    }
}

/// `aileron status`: everything a user checks first, on one screen.
async fn status(home: &Home, json: bool) -> CliResult {
    let Some(client) = crate::surfaces::client::DaemonClient::discover(home).await? else {
        if json {
            print_json(&serde_json::json!({ "running": false }));
        } else {
            outln!("daemon      not running (`aileron daemon start`, or any command starts it)");
        }
        return Ok(ExitStatus::Ok);
    };
    let mut status = client.get("/v1/status").await?;
    status["running"] = true.into();
    status["url"] = client.base_url.clone().into();
    // The chain check the console runs (resumed after the daemon's own at start): a record
    // damaged before the log's end is reported here, not only by `aileron audit verify`.
    let chain = if status["audit"].as_str().is_some_and(|audit| audit.starts_with("disk")) {
        client.get("/v1/audit/verify").await.ok()
    } else {
        None
    };
    if let Some(chain) = &chain {
        status["audit_chain"] = chain.clone();
    }
    if json {
        print_json(&status);
        return Ok(ExitStatus::Ok);
    }
    let counts = &status["counts"];
    outln!(
        "daemon      {} (pid {}, version {}, up {} s)",
        client.base_url,
        status["pid"],
        status["version"].as_str().unwrap_or("?"),
        status["uptime_seconds"]
    );
    outln!(
        "vault       {} ({} binding(s){})",
        status["vault"].as_str().unwrap_or("?"),
        counts["bindings"],
        match counts["approvals_awaiting_vault"].as_u64() {
            Some(n) if n > 0 => format!(", {n} approved run(s) waiting for `aileron vault unlock`"),
            _ => String::new(),
        }
    );
    outln!("connectors  {}", counts["connectors"]);
    outln!(
        "actions     {} ({} enabled{})",
        counts["actions"],
        counts["actions_enabled"],
        match counts["action_load_errors"].as_u64() {
            Some(n) if n > 0 => format!(", {n} file(s) that do not load: `aileron action list`"),
            _ => String::new(),
        }
    );
    outln!(
        "approvals   {} pending{}",
        counts["approvals_pending"],
        if counts["approvals_pending"].as_u64().unwrap_or(0) > 0 { " (`aileron approval list`)" } else { "" }
    );
    outln!("sessions    {} live", counts["sessions_active"]);
    for session in status["sessions"].as_array().into_iter().flatten() {
        outln!(
            "  {} {} (pid {}) since {}",
            session["session_id"].as_str().unwrap_or("?"),
            escape(session["agent"].as_str().unwrap_or("?")),
            session["pid"],
            session["started_at"].as_str().unwrap_or("?")
        );
    }
    let chain_line = match &chain {
        Some(chain) if chain["ok"] == false => {
            format!(", CHAIN BROKEN: {} (`aileron audit verify`)", escape(chain["problem"].as_str().unwrap_or("?")))
        }
        Some(chain) if chain["warning"].is_string() => {
            format!(
                ", chain intact ({} records); warning: {}",
                chain["records"],
                chain["warning"].as_str().unwrap_or("?")
            )
        }
        Some(chain) => format!(", chain intact ({} records)", chain["records"]),
        None => String::new(),
    };
    outln!("audit       {}{chain_line}", status["audit"].as_str().unwrap_or("?"));
    if let Some(policy) = status.get("policy") {
        match policy["problem"].as_str() {
            // The files on disk are not in force: what is, and why (SPEC §16).
            Some(problem) => outln!(
                "policy      {} rule(s) in force ({}); the files do not load: {}",
                policy["rules"],
                policy["hash"].as_str().unwrap_or("?"),
                escape(&problem.replace('\n', " "))
            ),
            None => outln!(
                "policy      {} rule(s) from {} file(s) ({})",
                policy["rules"],
                policy["files"].as_array().map_or(0, Vec::len),
                policy["hash"].as_str().unwrap_or("?")
            ),
        }
    }
    Ok(ExitStatus::Ok)
}

/// A `<fqn>@<version>` the user typed that does not parse, with `hint`: a usage error (exit 2),
/// except an unknown scheme, the hard `unknown_scheme` error of SPEC §3.2 (exit 1).
fn reference_error(error: aileron_core::IdentityError, hint: &str) -> CliError {
    let message = format!("{error}\nhint: {hint}");
    match error {
        aileron_core::IdentityError::UnknownScheme(_) => CliError::failure(message),
        _ => CliError::usage(message),
    }
}

/// Prints a JSON value (or a wire type) to stdout, pretty, with every character a terminal would
/// not show for what it is as a JSON `\u` escape (the same value; the re-attack's L2: C1 controls
/// in a run's output reached the terminal raw).
pub fn print_json(value: &impl serde::Serialize) {
    let json = serde_json::to_string_pretty(value).expect("JSON values serialize");
    outln!("{}", aileron_core::untrusted_text::json_for_terminal(&json));
}

/// Writes a command's data to stdout. When the reader has gone (`aileron audit list | head -1`)
/// the command has nothing left to do: the process exits at once, status 0, with nothing on
/// stderr, as tools killed by SIGPIPE appear to a shell pipeline. SIGPIPE itself stays ignored
/// (docs/decisions/0007-daemon.md: the same binary is the daemon and talks to it over sockets).
/// Any other write error (a full disk) fails the command.
pub(crate) fn write_stdout(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let written = std::io::Write::write_fmt(&mut stdout, text);
    match written {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(ExitStatus::Ok.code()),
        Err(error) => {
            eprintln!("error: writing to standard output: {error}");
            std::process::exit(ExitStatus::Failure.code());
        }
    }
}

/// Text from connectors, upstreams and agents, safe for a terminal (SPEC §14).
pub fn escape(text: &str) -> String {
    aileron_core::untrusted_text::visible(text, usize::MAX)
}

/// [`escape`] for text of several lines (an action file): its line breaks and tabs stay.
pub fn escape_lines(text: &str) -> String {
    aileron_core::untrusted_text::visible_lines(text)
}

/// Asks a yes/no question on stderr; only `y` or `yes` is yes.
pub fn ask(question: &str) -> Result<bool, CliError> {
    eprint!("{question}");
    std::io::Write::flush(&mut std::io::stderr()).ok();
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut answer)
        .map_err(|e| CliError::failure(format!("reading the answer: {e}")))?;
    Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}
