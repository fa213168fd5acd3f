//! `spawn`: what confinement costs a spawned program (issue 15). `/bin/true` through the spawn
//! gate and the whole confinement — `policy::plan_operation`, paths resolved, the release
//! `aileron __spawn` helper, user/mount/PID/network/IPC/UTS namespaces, a fresh `/proc`, the
//! home masked, Landlock, seccomp, rlimits, `execveat` of the checked descriptor, output capture
//! and the report — against a bare spawn of the same binary by `std::process::Command` (which
//! uses `posix_spawn`), in the same run. Goal: the confinement adds at most 5 ms at p50. The
//! audit record and the WASM call around it are not in the figure: (a) and (b) measure those.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::figures::{Distribution, distribution_rows, format_duration, format_ratio, ratio};
use super::report::SummaryRow;
use aileron::dataplane::spawn::Spawner;
use aileron_core::policy::CapabilitySubset;

/// Untimed spawns of each kind before measuring.
const WARMUP: usize = 20;
/// Kinds alternate in rounds of this many, so drift lands on both.
const ROUND: usize = 20;
const ADDED_P50_GOAL: Duration = Duration::from_millis(5);
const MANIFEST: &str = r#"[connector]
name = "github://aileron-bench/true"
version = "1.0.0"

[capabilities.spawn]
programs = [{ path = "/bin/true" }]

[capabilities.spawn.operations.nothing]
argv = "true"
description = "Do nothing, successfully"
"#;

pub(super) struct SpawnFigures {
    confined: Distribution,
    bare: Distribution,
}

pub(super) async fn run(spawns: usize, scratch: &Path) -> anyhow::Result<SpawnFigures> {
    let helper = std::env::current_exe().context("locating the running executable")?.with_file_name("aileron-spawn");
    if !helper.exists() {
        bail!("{} is missing: `cargo xtask bench` builds it in release beside aileron-bench", helper.display());
    }
    let home = scratch.join("spawn-home");
    std::fs::create_dir_all(&home)?;
    let spawner = Spawner::new(helper, vec![home]);
    let manifest =
        aileron_core::manifest::parse_manifest(MANIFEST, "manifest.toml").map_err(|e| anyhow::anyhow!("{e}"))?;
    let subset = CapabilitySubset::parse(&["spawn:nothing"]).map_err(|e| anyhow::anyhow!("{e}"))?;

    let confined = || async {
        let started = Instant::now();
        let code = spawner
            .time_gate_and_confinement(&manifest, &subset, "nothing", Instant::now() + Duration::from_secs(30))
            .await
            .map_err(|failure| anyhow::anyhow!("the confined spawn failed: {failure}"))?;
        if code != 0 {
            bail!("/bin/true exited {code} under confinement");
        }
        Ok::<Duration, anyhow::Error>(started.elapsed())
    };
    let bare = || {
        let started = Instant::now();
        let status = std::process::Command::new("/bin/true").status().context("spawning /bin/true")?;
        if !status.success() {
            bail!("/bin/true failed: {status}");
        }
        Ok::<Duration, anyhow::Error>(started.elapsed())
    };
    for _ in 0..WARMUP {
        confined().await?;
        bare()?;
    }
    let (mut confined_samples, mut bare_samples) = (Vec::with_capacity(spawns), Vec::with_capacity(spawns));
    while confined_samples.len() < spawns {
        for _ in 0..ROUND.min(spawns - confined_samples.len()) {
            confined_samples.push(confined().await?);
        }
        for _ in 0..ROUND.min(spawns - bare_samples.len()) {
            bare_samples.push(bare()?);
        }
    }
    Ok(SpawnFigures { confined: Distribution::new(confined_samples), bare: Distribution::new(bare_samples) })
}

impl SpawnFigures {
    fn added_p50(&self) -> Duration {
        self.confined.p50().saturating_sub(self.bare.p50())
    }

    pub(super) fn summary_rows(&self) -> Vec<SummaryRow> {
        let (confined, bare) = (self.confined.p50(), self.bare.p50());
        vec![SummaryRow {
            figure: format!("(g) spawn of /bin/true, gate + confinement, p50 (+{})", format_duration(self.added_p50())),
            measured: format_duration(confined),
            baseline: format!("{} bare posix_spawn", format_duration(bare)),
            ratio: format_ratio(ratio(confined, bare)),
            goal: "≤ +5 ms",
            met: Some(self.added_p50() <= ADDED_P50_GOAL),
        }]
    }

    pub(super) fn markdown(&self, text: &mut String, command_line: &str) {
        let _ = writeln!(text, "\n### (g) Spawn: `/bin/true` confined vs bare\n");
        let _ = writeln!(
            text,
            "Reproduce: `{command_line}`. Sequential spawns. Confined: `Spawner::time_gate_and_confinement` — the spawn \
             gate, path resolution, the release `aileron __spawn` helper (re-executed per spawn), user, mount, PID, \
             network, IPC and UTS namespaces, a fresh `/proc`, a masked home, Landlock, seccomp, rlimits, `execveat` \
             of the checked descriptor, output capture and the helper's report; no audit record (measured in (b)). \
             Bare: `std::process::Command::new(\"/bin/true\").status()`. Kinds alternate in rounds of {ROUND} after \
             {WARMUP} untimed spawns of each.\n"
        );
        let _ = writeln!(text, "| | n | p50 | p99 | mean | min | max |\n|---|---:|---:|---:|---:|---:|---:|");
        distribution_rows(
            text,
            &[
                ("confined (gate + helper + namespaces + Landlock + seccomp)", &self.confined),
                ("bare posix_spawn", &self.bare),
            ],
        );
        let _ = writeln!(text, "\nConfinement adds {} at p50 (goal ≤ 5 ms).", format_duration(self.added_p50()));
    }
}
