//! `aileron policy check | test` (SPEC §16): read the home's policy files and installed actions
//! directly, so they work with the daemon stopped — the way to try a rule before the daemon
//! loads it.

use clap::{Args, Subcommand};
use serde_json::{Map, Value};

use super::{CliError, CliResult, ExitStatus};
use crate::platform::home::Home;
use crate::stores::actions::ActionRegistry;
use crate::stores::rules::counters::Counts;
use crate::stores::rules::{Call, POLICY_DIR, RuleSet, Subject};

#[derive(Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Check the policy files against the installed actions and list their rules
    Check,
    /// Show what the rules decide for one call, without running it
    Test {
        /// The action called
        #[arg(long)]
        action: String,
        /// Its arguments, as a JSON object
        #[arg(long, default_value = "{}")]
        args: String,
        /// Call as this agent (a launched one, contained); without it, as the local user
        #[arg(long)]
        agent: Option<String>,
        /// What the counters read (runs of this action by this caller in the last hour)
        #[arg(long, default_value_t = 0)]
        runs_last_hour: i64,
        /// Runs in the last day
        #[arg(long, default_value_t = 0)]
        runs_last_day: i64,
        /// Runs in the session
        #[arg(long, default_value_t = 0)]
        session_runs: i64,
    },
    /// Evaluate the rules as they are now over the runs in the audit log; print what would change
    Replay {
        /// Only runs at or after this RFC 3339 timestamp or YYYY-MM-DD date (default: all)
        #[arg(long)]
        since: Option<String>,
    },
}

pub async fn run(home: &Home, args: PolicyArgs) -> CliResult {
    let actions = ActionRegistry::load(&home.actions_dir(), &home.action_state())
        .map_err(|e| CliError::failure(format!("reading the installed actions: {e:#}")))?;
    let (installed, _) = actions.list();
    let dir = home.root().join(POLICY_DIR);
    let rules = RuleSet::load(&dir, installed.iter().map(|action| action.file.as_ref()))
        .map_err(|error| CliError::failure(error.to_string()))?;
    match args.command {
        PolicyCommand::Check => {
            if rules.is_empty() {
                eprintln!(
                    "no policy files in {}: every call is allowed (approval rules of actions still apply)",
                    dir.display()
                );
                return Ok(ExitStatus::Ok);
            }
            outln!("policy {} ({} file(s))", rules.hash, rules.files.len());
            for rule in &rules.rules {
                let shadow = if rule.shadow { " (shadow)" } else { "" };
                outln!("{:<7} {}  {}{shadow}", rule.effect, rule.id, rule.file);
            }
            Ok(ExitStatus::Ok)
        }
        PolicyCommand::Test { action, args, agent, runs_last_hour, runs_last_day, session_runs } => {
            let installed = installed.iter().find(|a| a.file.name == action).ok_or_else(|| {
                CliError::failure(format!("no action named `{action}` is installed\nhint: aileron action list"))
            })?;
            let args: Map<String, Value> = serde_json::from_str(&args).map_err(|e| {
                CliError::usage(format!(
                    "--args is not a JSON object: {e}\nhint: --args '{{\"to\": \"a@example.com\"}}'"
                ))
            })?;
            installed.file.validate_call_args(&args).map_err(|e| CliError::failure(e.to_string()))?;
            let subject = match agent {
                Some(agent) => Subject::Agent { session_id: "policy-test".into(), agent, contained: true },
                None => Subject::Human { id: crate::workflows::LOCAL_USER.into() },
            };
            let connector = installed.file.steps.first().map(|s| s.connector.to_string()).unwrap_or_default();
            let call = Call {
                subject: &subject,
                verb: "run",
                tool: &installed.file.name,
                connector: &connector,
                approval_required: installed.file.requires_approval(),
                args: &args,
                now: chrono::Utc::now(),
                counts: Counts { last_hour: runs_last_hour, last_day: runs_last_day, session: session_runs },
            };
            let decided = rules.decide(&call);
            outln!("{}", decided.enforced);
            if let Some(shadow) = decided.shadow {
                outln!("shadow: {shadow}");
            }
            Ok(ExitStatus::Ok)
        }
        PolicyCommand::Replay { since } => replay(home, &rules, &installed, since),
    }
}

/// `aileron policy replay`: reads the log directly (the daemon may be stopped).
fn replay(
    home: &Home,
    rules: &RuleSet,
    installed: &[crate::stores::actions::InstalledAction],
    since: Option<String>,
) -> CliResult {
    use crate::stores::rules::replay::REPLAYED;
    let Some(parent) = home.audit_parent() else {
        return Err(CliError::failure(
            "the audit log is kept in memory (AILERON_AUDIT_DIR is empty): nothing to replay",
        ));
    };
    // The records a replay decides again, read in one pass.
    let filter = crate::stores::audit_log::AuditFilter {
        since,
        event_types: REPLAYED.iter().map(|event_type| event_type.as_str().to_string()).collect(),
        ..Default::default()
    };
    let records = crate::stores::audit_log::query(&parent, &filter).map_err(|e| CliError::failure(e.to_string()))?;
    let actions: crate::stores::rules::replay::ActionFacts = installed
        .iter()
        .map(|action| {
            let connector = action.file.steps.first().map(|s| s.connector.to_string()).unwrap_or_default();
            (action.file.name.clone(), (connector, action.file.requires_approval()))
        })
        .collect();
    let agents = crate::stores::sessions::SessionRegistry::open(home.sessions_journal())
        .all()
        .into_iter()
        .map(|session| (session.session_id, session.agent))
        .collect();
    let started = std::time::Instant::now();
    let replayed = crate::stores::rules::replay::replay(rules, &records, &actions, &agents);
    for change in &replayed.changed {
        outln!(
            "{}  {:<24} {:<28} was {}, now {}  ({})",
            change.timestamp,
            change.action,
            change.subject,
            change.was,
            change.now,
            change.audit_id
        );
    }
    eprintln!(
        "{} run(s) replayed in {} ms against policy {}: {} would be decided differently",
        replayed.runs,
        started.elapsed().as_millis(),
        rules.hash,
        replayed.changed.len()
    );
    if !replayed.skipped.is_empty() {
        eprintln!(
            "not replayed: {} (they read arguments, and the audit log keeps argument names only)",
            replayed.skipped.join(", ")
        );
    }
    Ok(ExitStatus::Ok)
}
