//! `restart`: the first run after a daemon restart with the on-disk compiled-module cache,
//! against the same with the cache emptied, for `echo` and the `github_issues` example. The
//! runtime's cache counters confirm every restart loaded the module as labelled.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use aileron::platform::home::Home;
use aileron::surfaces::cli::demo::{EXAMPLE_FQN, EXAMPLE_VERSION, EXAMPLE_WASM, example_manifest_for, render_action};
use aileron_sandbox::CacheStats;
use anyhow::{Context, bail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::daemon::{BenchDaemon, http_client};
use super::fake_github::FakeGithub;
use super::figures::{Distribution, format_bytes, format_duration, format_ratio, ratio};
use super::report::SummaryRow;
use super::{ECHO_ACTION, ECHO_MANIFEST, ECHO_WASM, echo_reference};

const CACHED_FIRST_RUN_GOAL: Duration = Duration::from_millis(20);

/// Whether the compiled-module cache survives the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CacheState {
    Kept,
    Emptied,
}

pub(super) struct FirstRun {
    /// `AppState::open`: audit recovery, store, actions, wasmtime engine.
    pub(super) open: Duration,
    /// The first `POST /v1/actions/<name>/run` on a fresh connection, answer included.
    pub(super) first: Duration,
    /// The run right after it, for comparison with a warm daemon.
    pub(super) second: Duration,
}

pub(super) struct RestartFigures {
    guest: &'static str,
    wasm_bytes: usize,
    kept: Vec<FirstRun>,
    emptied: Vec<FirstRun>,
}

/// A guest as the restart benchmark installs and runs it.
pub(super) struct RestartGuest {
    pub(super) name: &'static str,
    pub(super) wasm: &'static [u8],
    pub(super) reference: String,
    pub(super) manifest: String,
    pub(super) action_file: &'static str,
    /// The action file with `{{CONNECTOR_HASH}}` still in it.
    pub(super) action_template: String,
    pub(super) action: &'static str,
    pub(super) args: Value,
}

pub(super) async fn restart_benchmark(restarts: usize, scratch: &Path) -> anyhow::Result<Vec<RestartFigures>> {
    // The example connector needs its upstream; it stays up across the daemon restarts because
    // the manifest names its port.
    let upstream = FakeGithub::start().await.context("starting the loopback GitHub stand-in")?;
    let list_issues = aileron::surfaces::cli::demo::EXAMPLE_ACTIONS
        .iter()
        .find(|(file, _)| *file == "list-issues.md")
        .map(|(_, template)| *template)
        .context("the example connector ships no list-issues action")?;
    let guests = [
        RestartGuest {
            name: "echo",
            wasm: ECHO_WASM,
            reference: echo_reference(),
            manifest: ECHO_MANIFEST.to_string(),
            action_file: "echo.md",
            action_template: ECHO_ACTION.to_string(),
            action: "echo",
            args: json!({ "text": "hello after a restart" }),
        },
        RestartGuest {
            name: "github_issues",
            wasm: EXAMPLE_WASM,
            reference: format!("{EXAMPLE_FQN}@{EXAMPLE_VERSION}"),
            manifest: example_manifest_for(&upstream.host_port()),
            action_file: "list-issues.md",
            // `render_action` fills the FQN and version and keeps the hash placeholder.
            action_template: render_action(list_issues, "{{CONNECTOR_HASH}}"),
            action: "list-issues",
            args: json!({ "owner": "aileron", "repo": "bench", "api_base": upstream.base_url() }),
        },
    ];
    let mut figures = Vec::new();
    for guest in &guests {
        eprintln!("    {} ({} bytes of wasm)", guest.name, guest.wasm.len());
        let dir = scratch.join(format!("restart-{}", guest.name));
        let home = Home::at(dir.join("home"))?;
        // Install, and run once so the compiled module is on disk before the first restart.
        let (daemon, _) = BenchDaemon::start(&home)?;
        let admin = http_client()?;
        let hash = daemon
            .install_connector(&admin, &dir.join("package"), &guest.reference, guest.wasm, &guest.manifest)
            .await?;
        daemon
            .add_action(&admin, guest.action_file, &guest.action_template.replace("{{CONNECTOR_HASH}}", &hash))
            .await?;
        let path = format!("/v1/actions/{}/run", guest.action);
        daemon.expect(&admin, Method::POST, &path, Some(&json!({ "args": guest.args })), StatusCode::OK).await?;
        drop(admin);
        daemon.stop().await?;

        let mut kept = Vec::new();
        let mut emptied = Vec::new();
        for round in 0..restarts {
            let order = if round % 2 == 0 {
                [CacheState::Kept, CacheState::Emptied]
            } else {
                [CacheState::Emptied, CacheState::Kept]
            };
            for cache in order {
                if cache == CacheState::Emptied {
                    empty_dir(&home.cache_dir())?;
                }
                let run = first_run_after_restart(&home, guest, cache).await?;
                match cache {
                    CacheState::Kept => kept.push(run),
                    CacheState::Emptied => emptied.push(run),
                }
            }
        }
        figures.push(RestartFigures { guest: guest.name, wasm_bytes: guest.wasm.len(), kept, emptied });
    }
    Ok(figures)
}

pub(super) async fn first_run_after_restart(
    home: &Home,
    guest: &RestartGuest,
    cache: CacheState,
) -> anyhow::Result<FirstRun> {
    let (daemon, open) = BenchDaemon::start(home)?;
    let path = format!("/v1/actions/{}/run", guest.action);
    let body = json!({ "args": guest.args });
    // A new client per daemon: the first run pays for its connection, as a CLI call would.
    let client = http_client()?;
    let timed_run = async || -> anyhow::Result<Duration> {
        let started = Instant::now();
        let (status, bytes) = daemon.request(&client, Method::POST, &path, Some(&body)).await?;
        let elapsed = started.elapsed();
        if status != StatusCode::OK {
            bail!("{path} answered {status} after a restart: {}", String::from_utf8_lossy(&bytes));
        }
        Ok(elapsed)
    };
    let first = timed_run().await?;
    let second = timed_run().await?;
    drop(client);
    let stats = daemon.state.services.sandbox.cache_stats();
    daemon.stop().await?;
    check_cache_use(cache, &stats).with_context(|| format!("restarting with the {} guest", guest.name))?;
    Ok(FirstRun { open, first, second })
}

/// The restart must have loaded the module the way its label says.
fn check_cache_use(cache: CacheState, stats: &CacheStats) -> anyhow::Result<()> {
    let as_labelled = match cache {
        CacheState::Kept => stats.disk_hits == 1 && stats.compiles == 0,
        CacheState::Emptied => stats.disk_hits == 0 && stats.compiles == 1,
    };
    if !as_labelled {
        bail!("the restart with the cache {cache:?} loaded the module unexpectedly: {stats:?}");
    }
    Ok(())
}

pub(super) fn empty_dir(dir: &Path) -> anyhow::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let path = entry?.path();
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    Ok(())
}

pub(super) fn median(runs: &[FirstRun], field: impl Fn(&FirstRun) -> Duration) -> Duration {
    Distribution::new(runs.iter().map(field).collect()).p50()
}

/// One summary row per guest: the median first run with the cache kept, against emptied.
pub(super) fn summary_rows(restarts: &[RestartFigures]) -> Vec<SummaryRow> {
    let mut rows = Vec::new();
    for restart in restarts {
        let (kept, emptied) = (median(&restart.kept, |r| r.first), median(&restart.emptied, |r| r.first));
        rows.push(SummaryRow {
            figure: format!("(c) first run after restart, {}", restart.guest),
            measured: format!("{} cached", format_duration(kept)),
            baseline: format!("{} uncached", format_duration(emptied)),
            ratio: format_ratio(ratio(kept, emptied)),
            goal: "≤ 20 ms cached",
            met: Some(kept <= CACHED_FIRST_RUN_GOAL),
        });
    }
    rows
}

pub(super) fn markdown(text: &mut String, restarts: &[RestartFigures], command_line: &str) {
    let count = restarts.first().map_or(0, |r| r.kept.len());
    let _ = writeln!(text, "\n### (c) First run after a daemon restart\n");
    let _ = writeln!(
        text,
        "Reproduce: `{}`. Each restart opens a fresh daemon \
         state on the same home (the previous one closed), then times the first run of the action on a new \
         connection and the run after it. \"uncached\" empties `store/cache/` before the restart; the \
         runtime's cache counters confirm every restart loaded the module as labelled (one disk hit, or one \
         compile). The two states alternate; medians of {count} restarts each. `github_issues` runs \
         `list-issues`, which makes one HTTP request to a loopback GitHub stand-in (audited too).\n",
        command_line
    );
    let _ = writeln!(text, "| guest | wasm | module cache | open state | first run | second run | first runs (all) |");
    let _ = writeln!(text, "|---|---:|---|---:|---:|---:|---|");
    for restart in restarts {
        for (label, runs) in [("on disk", &restart.kept), ("emptied", &restart.emptied)] {
            let all: Vec<String> = runs.iter().map(|r| format_duration(r.first)).collect();
            let _ = writeln!(
                text,
                "| {} | {} | {label} | {} | {} | {} | {} |",
                restart.guest,
                format_bytes(restart.wasm_bytes),
                format_duration(median(runs, |r| r.open)),
                format_duration(median(runs, |r| r.first)),
                format_duration(median(runs, |r| r.second)),
                all.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_must_load_the_module_as_labelled() {
        let stats = |disk_hits, compiles| CacheStats { disk_hits, compiles, ..CacheStats::default() };
        // (cache state, disk hits, compiles, accepted)
        let table = [
            (CacheState::Kept, 1, 0, true),
            (CacheState::Kept, 0, 1, false),
            (CacheState::Emptied, 0, 1, true),
            (CacheState::Emptied, 1, 0, false),
            (CacheState::Kept, 0, 0, false),
        ];
        for (cache, disk_hits, compiles, accepted) in table {
            assert_eq!(check_cache_use(cache, &stats(disk_hits, compiles)).is_ok(), accepted, "{cache:?}");
        }
    }
}
