//! `policy`: what policy at the chokepoint costs (issue 48, SPEC §16). Two figures, each against
//! its baseline in the same run: the decision alone, in process (100 rules over the action's
//! arguments and counters, 10,000 admissions in the window: decide and count under the lock),
//! and runs of the echo action over loopback HTTP on one daemon, first with no policy files,
//! then with the 100 rules loaded (the same process, reloaded as a file change would).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::stores::rules::counters::Counters;
use aileron::stores::rules::{Call, RuleSet, Subject, Verdict};
use serde_json::json;

use super::daemon::{BenchDaemon, http_client};
use super::figures::{Distribution, added_micros, distribution_rows, format_duration, format_ratio, ratio};
use super::report::SummaryRow;

const RULES: usize = 100;
const WINDOW_RUNS: usize = 10_000;
const DECISIONS: usize = 5_000;
/// Runs of each kind (no policy files, rules none counting, counting rules), after [`WARMUP`].
const RUNS: usize = 5_000;
const WARMUP: usize = 200;
const DECISION_GOAL: Duration = Duration::from_micros(50);
const REPLAYED: usize = 100_000;
const REPLAY_GOAL: Duration = Duration::from_secs(2);

pub(super) struct PolicyFigures {
    decision: Distribution,
    /// The same number of rules spread over 20 tools (24 can apply).
    decision_spread: Distribution,
    /// `policy replay` over 100,000 runs in memory.
    replay: Duration,
    /// Rules the replay left out (they read arguments).
    replay_skipped: usize,
    runs_without: Distribution,
    /// With the 100 rules, none reading a counter (no admission record).
    runs_uncounted: Distribution,
    /// With the 100 rules, some reading counters: each admission is made durable before the run.
    runs_with: Distribution,
    /// The same runs' `x-aileron-overhead-us`: the daemon's own time, client and HTTP noise aside.
    overhead_without: Distribution,
    overhead_uncounted: Distribution,
    overhead_with: Distribution,
    /// How far the two daemons without policy files were apart (p99, p50): the measure's noise.
    overhead_noise: (Duration, Duration),
    /// The decision right after a run, on that daemon's live rules (caches as a run left them).
    decision_between: Distribution,
    /// Its floor: the in-process decision (the bench's own copy of the rules and counters) timed
    /// at the same moment after a run on a daemon without policy files.
    between_floor: Distribution,
}

/// 100 rules of the kinds users write, none of which refuses the measured call: argument
/// matches, counter limits (with `counting`; else more argument matches), principal checks, an
/// ask over a threshold.
fn rules(counting: bool) -> String {
    let mut text = String::new();
    for i in 0..RULES {
        let when = match i % 4 {
            0 => format!("context.args has text && context.args.text == \"blocked {i}\""),
            1 if counting => format!("context.runs_last_hour >= {}", 1_000_000 + i),
            1 => format!("context.args has text && context.args.text like \"*forbidden {i}*\""),
            2 => format!("principal.agent == \"agent-{i}\""),
            _ if counting => {
                format!("context.args has text && context.args.text like \"*ask {i}*\" && context.session_runs > 1")
            }
            _ => format!("context.args has text && context.args.text like \"*ask {i}*\""),
        };
        let head = match i % 4 {
            1 => "forbid(principal, action, resource == Aileron::Tool::\"echo\")".to_string(),
            2 => "forbid(principal is Aileron::Agent, action, resource)".to_string(),
            3 => format!("@ask(\"rule {i}\")\nforbid(principal, action, resource)"),
            _ => "forbid(principal, action, resource)".to_string(),
        };
        let _ = writeln!(text, "@id(\"rule-{i}\")\n{head} when {{ {when} }};");
    }
    text
}

pub(super) async fn run(scratch: &Path) -> anyhow::Result<PolicyFigures> {
    let home = Home::at(scratch.join("policy").join("home"))?;
    let (daemon, _) = BenchDaemon::start(&home)?;
    let client = http_client()?;
    daemon.add_echo_action(&client, &scratch.join("policy").join("echo-package")).await?;

    // The decision alone.
    let services = &daemon.state.services;
    let action = services.actions.get("echo").ok_or_else(|| anyhow::anyhow!("no echo action"))?.file;
    let source = (scratch.join("policy").join("bench.cedar"), rules(true));
    let set =
        RuleSet::from_sources(std::slice::from_ref(&source), [action.as_ref()]).map_err(|e| anyhow::anyhow!("{e}"))?;
    anyhow::ensure!(set.rules.len() == RULES, "{} rules", set.rules.len());
    let counters = Counters::default();
    let subject = Subject::Agent { session_id: "bench".into(), agent: "claude".into(), contained: true };
    let start = chrono::Utc::now() - chrono::Duration::minutes(50);
    for n in 0..WINDOW_RUNS {
        counters.record(&subject.key(), "echo", start + chrono::Duration::milliseconds(n as i64 * 250));
    }
    let args = json!({ "text": "hello" }).as_object().cloned().unwrap_or_default();
    let decision = decisions(&set, &counters, &subject, &args)?;
    // The same 100 rules spread the way a policy for many tools reads: 80 name one of 20 tools
    // (echo among them), 20 name none — 24 can apply to the call.
    let spread = (scratch.join("policy").join("spread.cedar"), rules_spread());
    let spread =
        RuleSet::from_sources(std::slice::from_ref(&spread), [action.as_ref()]).map_err(|e| anyhow::anyhow!("{e}"))?;
    let decision_spread = decisions(&spread, &Counters::default(), &subject, &args)?;

    // Replay: the rules over 100,000 audited runs of the last week (in memory, the log's reading
    // aside), counters rebuilt as it goes.
    let week_ago = chrono::Utc::now() - chrono::Duration::days(7);
    let records: Vec<aileron_core::audit::AuditRecord> = (0..REPLAYED as u64)
        .map(|seq| {
            let mut payload = serde_json::Map::new();
            payload.insert(aileron_core::vocabulary::keys::ACTION_NAME.into(), "echo".into());
            let at = week_ago + chrono::Duration::milliseconds(seq as i64 * 6_000);
            aileron_core::audit::AuditRecord {
                audit_id: format!("audit-{seq}"),
                event_type: "action.executed".into(),
                timestamp: at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                actor: aileron_core::audit::Actor::new(aileron_core::audit::ActorType::Agent, format!("s{}", seq % 50)),
                session_id: Some(format!("s{}", seq % 50)),
                payload,
                seq: seq + 1,
                prev: String::new(),
                hash: String::new(),
            }
        })
        .collect();
    let facts = [("echo".to_string(), ("github://aileron-bench/echo".to_string(), false))].into_iter().collect();
    let at = Instant::now();
    let replayed = aileron::stores::rules::replay::replay(&set, &records, &facts, &Default::default());
    let replay = at.elapsed();
    anyhow::ensure!(replayed.runs == REPLAYED, "{} runs replayed", replayed.runs);

    // Runs on four daemons alive together in this process: two with no policy files (the
    // baseline, pooled, and their difference the noise of the measure), one with the rules none
    // counting, one with counting rules; one run of each in turn, the order rotating — what the
    // VM does meanwhile (another process, a slow fsync, the audit tree's checkpoints) falls on
    // every kind alike, and each kind's rules stay loaded as a user's do.
    let texts = [None, None, Some(rules(false)), Some(rules(true))];
    let mut daemons = vec![daemon];
    for kind in 1..texts.len() {
        let home = Home::at(scratch.join("policy").join(format!("home-{kind}")))?;
        let (other, _) = BenchDaemon::start(&home)?;
        other.add_echo_action(&client, &scratch.join("policy").join(format!("echo-package-{kind}"))).await?;
        daemons.push(other);
    }
    for ((kind, daemon), text) in daemons.iter().enumerate().zip(&texts) {
        let services = &daemon.state.services;
        if let Some(text) = text {
            let dir = services.home.root().join("policy");
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join("bench.cedar"), text)?;
        }
        let reloaded = aileron::workflows::policy::reload(services).await;
        anyhow::ensure!(
            matches!(
                reloaded,
                aileron::stores::rules::Reloaded::Loaded { .. } | aileron::stores::rules::Reloaded::Unchanged
            ),
            "the rules load: {reloaded:?}"
        );
        anyhow::ensure!(services.rules.current().is_empty() == text.is_none(), "kind {kind}'s rules");
        anyhow::ensure!(services.rules.current().counts_runs == (kind == 3), "kind {kind} counts runs");
    }
    let mut walls: [Vec<Duration>; 4] = Default::default();
    let mut overheads: [Vec<Duration>; 4] = Default::default();
    // And the decision as a run meets it: right after each run on the daemon with the rules
    // none counting, a call of the echo action (an agent session's, as the decisions in a loop
    // are) judged by that daemon's live rules and counters — its caches as a run left them, not
    // warm from a loop of decisions.
    let mut between = Vec::with_capacity(RUNS);
    // Its floor: the same work on the bench's own copy of the rules and counters, timed right
    // after each run on a daemon without policy files — what the moment after a run adds to any
    // decision (the process's other threads are tearing a run down: memory maps change, and a
    // thread that allocates then can stall ~150 µs, wherever it is).
    let mut floor = Vec::with_capacity(RUNS);
    let live = &daemons[2].state.services.rules;
    for sample in 0..WARMUP + RUNS {
        for kind in (0..4).map(|k| (k + sample) % 4) {
            let (wall, overhead) = daemons[kind].echo_run(&client, sample).await?;
            if sample < WARMUP {
                continue;
            }
            walls[kind].push(wall);
            overheads[kind].push(overhead);
            if kind == 0 {
                floor.push(decide_once(&set, &counters, &subject, &args)?);
            }
            if kind == 2 {
                let args = json!({ "text": format!("run {sample}") }).as_object().cloned().unwrap_or_default();
                let at = Instant::now();
                let judged = live.judge(&echo_call(&subject, &args, chrono::Utc::now(), Default::default()), false);
                between.push(at.elapsed());
                let passed = judged.is_some_and(|judged| {
                    matches!(judged.outcome, aileron::stores::rules::admission::Judged::Pass { .. })
                });
                anyhow::ensure!(passed, "the call judged between runs passes");
            }
        }
    }
    let decision_between = Distribution::new(between);
    let between_floor = Distribution::new(floor);
    let [without, control, uncounted, with] = walls;
    let (runs_without, runs_uncounted, runs_with) =
        (Distribution::new([without, control].concat()), Distribution::new(uncounted), Distribution::new(with));
    let [without, control, overhead_uncounted, overhead_with] = overheads.map(Distribution::new);
    let overhead_noise = (without.p99().abs_diff(control.p99()), without.p50().abs_diff(control.p50()));
    let overhead_without = without.merged(control);
    for daemon in daemons {
        daemon.stop().await?;
    }
    std::fs::remove_dir_all(scratch.join("policy"))?;
    Ok(PolicyFigures {
        decision,
        decision_spread,
        replay,
        replay_skipped: replayed.skipped.len(),
        runs_without,
        runs_uncounted,
        runs_with,
        overhead_without,
        overhead_uncounted,
        overhead_with,
        overhead_noise,
        decision_between,
        between_floor,
    })
}

/// [`DECISIONS`] admissions of the echo call against `set`, each timed (decide and count).
fn decisions(
    set: &RuleSet,
    counters: &Counters,
    subject: &Subject,
    args: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<Distribution> {
    let mut decision = Vec::with_capacity(DECISIONS + 200);
    for _ in 0..DECISIONS + 200 {
        decision.push(decide_once(set, counters, subject, args)?);
    }
    Ok(Distribution::new(decision.split_off(200)))
}

/// One admission of the echo call against `set` (decide and count), timed.
fn decide_once(
    set: &RuleSet,
    counters: &Counters,
    subject: &Subject,
    args: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<Duration> {
    let at = Instant::now();
    let now = chrono::Utc::now();
    let admitted = counters.admit(
        &subject.key(),
        "echo",
        now,
        |counts| set.decide(&echo_call(subject, args, now, counts)),
        |decided| decided.enforced == Verdict::Allow,
    );
    let took = at.elapsed();
    anyhow::ensure!(admitted.counted, "the measured call is allowed: {:?}", admitted.decided);
    Ok(took)
}

/// A run of the echo action as the rules see it.
fn echo_call<'a>(
    subject: &'a Subject,
    args: &'a serde_json::Map<String, serde_json::Value>,
    now: chrono::DateTime<chrono::Utc>,
    counts: aileron::stores::rules::counters::Counts,
) -> Call<'a> {
    Call {
        subject,
        verb: "run",
        tool: "echo",
        connector: "github://aileron-bench/echo",
        approval_required: false,
        args,
        now,
        counts,
    }
}

/// [`rules`]'s kinds over 20 tools: rule `i` names tool `i % 25` when that is below 20 (tool 0
/// is echo), none otherwise.
fn rules_spread() -> String {
    let mut text = String::new();
    for i in 0..RULES {
        let tool = match i % 25 {
            0 => Some("echo".to_string()),
            k if k < 20 => Some(format!("tool-{k}")),
            _ => None,
        };
        let resource = match &tool {
            Some(tool) => format!("resource == Aileron::Tool::\"{tool}\""),
            None => "resource".to_string(),
        };
        let when = match i % 3 {
            0 => format!("context.args has text && context.args.text == \"blocked {i}\""),
            1 => format!("context.runs_last_hour >= {}", 1_000_000 + i),
            _ => format!("principal.agent == \"agent-{i}\""),
        };
        let principal = if i % 3 == 2 { "principal is Aileron::Agent" } else { "principal" };
        let _ = writeln!(text, "@id(\"spread-{i}\")\nforbid({principal}, action, {resource}) when {{ {when} }};");
    }
    text
}

impl PolicyFigures {
    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let added = self.runs_with.p99().saturating_sub(self.runs_without.p99());
        vec![
            SummaryRow {
                figure: format!("(n) policy decision, {RULES} rules, {WINDOW_RUNS} runs in the window, p99"),
                measured: format_duration(self.decision.p99()),
                baseline: format!("{} run p50 without policy", format_duration(self.runs_without.p50())),
                ratio: format!("{:.1} %", ratio(self.decision.p99(), self.runs_without.p50()) * 100.0),
                goal: "≤ 50 µs added to a run",
                met: Some(self.decision.p99() <= DECISION_GOAL),
            },
            SummaryRow {
                figure: format!("(n) policy decision between runs (caches as a run leaves them), {RULES} rules, p99"),
                measured: format!(
                    "{} (p50 {})",
                    format_duration(self.decision_between.p99()),
                    format_duration(self.decision_between.p50())
                ),
                baseline: format!(
                    "{} p99 of the in-process decision at the same moment, no policy files",
                    format_duration(self.between_floor.p99())
                ),
                ratio: format!("{:+.0} µs", added_micros(self.decision_between.p99(), self.between_floor.p99())),
                goal: "(where a decision's tail comes from)",
                met: None,
            },
            SummaryRow {
                figure: format!("(n) policy decision, {RULES} rules over 20 tools (24 can apply), p99"),
                measured: format_duration(self.decision_spread.p99()),
                baseline: format!("{} run p50 without policy", format_duration(self.runs_without.p50())),
                ratio: format!("{:.1} %", ratio(self.decision_spread.p99(), self.runs_without.p50()) * 100.0),
                goal: "≤ 50 µs added to a run",
                met: Some(self.decision_spread.p99() <= DECISION_GOAL),
            },
            SummaryRow {
                figure: format!("(n) daemon's own time per run with {RULES} rules (none counting), p99 added"),
                measured: format!(
                    "{:+.0} µs (p50 {:+.0} µs)",
                    added_micros(self.overhead_uncounted.p99(), self.overhead_without.p99()),
                    added_micros(self.overhead_uncounted.p50(), self.overhead_without.p50())
                ),
                baseline: format!(
                    "{} p99 without policy files (`x-aileron-overhead-us`; two such daemons {} apart at p99, {} at p50)",
                    format_duration(self.overhead_without.p99()),
                    format_duration(self.overhead_noise.0),
                    format_duration(self.overhead_noise.1),
                ),
                ratio: format_ratio(ratio(self.overhead_uncounted.p99(), self.overhead_without.p99())),
                goal: "≤ 50 µs added to a run",
                met: Some(self.overhead_uncounted.p99().saturating_sub(self.overhead_without.p99()) <= DECISION_GOAL),
            },
            SummaryRow {
                figure: format!("(n) policy replay of {REPLAYED} runs (in memory)"),
                measured: format!("{:.2} s", self.replay.as_secs_f64()),
                baseline: format!("{} rules, {} over arguments left out", RULES, self.replay_skipped),
                ratio: format!("{:.1} µs per run", self.replay.as_secs_f64() * 1e6 / REPLAYED as f64),
                goal: "≤ 2 s",
                met: Some(self.replay <= REPLAY_GOAL),
            },
            SummaryRow {
                figure: format!("(n) run p50 with {RULES} rules, none counting runs"),
                measured: format_duration(self.runs_uncounted.p50()),
                baseline: format!("{} without policy files", format_duration(self.runs_without.p50())),
                ratio: format_ratio(ratio(self.runs_uncounted.p50(), self.runs_without.p50())),
                goal: "(the decision in a run)",
                met: None,
            },
            SummaryRow {
                figure: format!("(n) run p50 with {RULES} rules, some counting runs"),
                measured: format!("{} (p99 +{})", format_duration(self.runs_with.p50()), format_duration(added)),
                baseline: format!("{} without policy files", format_duration(self.runs_without.p50())),
                ratio: format_ratio(ratio(self.runs_with.p50(), self.runs_without.p50())),
                goal: "(+ the durable admission)",
                met: None,
            },
        ]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (n) Policy at the chokepoint\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. In process: {DECISIONS} decisions of a call of the echo action against {RULES} \
             rules (argument matches, counter limits, principal checks, asks; none refuses it) with {WINDOW_RUNS} \
             admissions of its caller in the counters' window — the decision and the count under the lock, what \
             `run_action` adds; and the same against 100 rules spread as a policy for many tools reads (80 name one of \
             20 tools, echo among them; 20 name none: 24 can apply — only those are evaluated; all of these rules \
             are in the subset evaluated directly, not by Cedar's interpreter). Over loopback HTTP on four daemons \
             alive together in this process, two with no policy files (pooled as the baseline; how far apart they \
             are is the measure's noise), one with {RULES} rules none of which reads a counter, one with the {RULES} \
             rules above: one run of the echo action on each in turn, the order rotating, {WARMUP} of each untimed, \
             then {RUNS} of each — what the machine does meanwhile falls on every kind alike; each run's \
             `x-aileron-overhead-us` (the daemon's own time) is kept beside its wall time. Rules that read a counter make \
             each admission durable (`policy.admitted`, fsynced) before the run starts.\n"
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                ("decision (in process), all 100 rules can apply", &self.decision),
                ("decision (in process), 100 rules over 20 tools", &self.decision_spread),
                ("decision right after a run, on that daemon's live rules", &self.decision_between),
                ("the in-process decision at the same moment after a run, no policy files", &self.between_floor),
                ("run, no policy files (two daemons pooled)", &self.runs_without),
                ("run, 100 rules, none counting", &self.runs_uncounted),
                ("run, 100 rules, counting (durable admission)", &self.runs_with),
                (
                    "daemon's own time (x-aileron-overhead-us), no policy files (two daemons pooled)",
                    &self.overhead_without,
                ),
                ("daemon's own time, 100 rules, none counting", &self.overhead_uncounted),
                ("daemon's own time, 100 rules, counting", &self.overhead_with),
            ],
        );
    }
}
