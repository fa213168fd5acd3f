//! The reliability campaigns behind RELIABILITY.md. Each is a test here: short by default (what
//! `cargo xtask test`, and so CI, runs) and long under `cargo xtask campaign <name> --long`, which
//! sets `AILERON_CAMPAIGN=long`, points `AILERON_CAMPAIGN_BIN_DIR` at release binaries and asks
//! for a report in `AILERON_CAMPAIGN_REPORT` (a directory). A campaign prints its figures either
//! way, and writes them as `<dir>/<name>.json` when asked.

pub mod crash;
pub mod load;
pub mod surface;
pub mod tamper;

use std::path::PathBuf;

use serde_json::{Map, Value};

/// How hard a campaign pushes: the CI portion, or the published figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Short,
    Long,
}

pub fn length() -> Length {
    match std::env::var("AILERON_CAMPAIGN").as_deref() {
        Ok("long") => Length::Long,
        _ => Length::Short,
    }
}

/// `short` in CI, `long` in the published campaign.
pub fn scaled<T>(short: T, long: T) -> T {
    match length() {
        Length::Short => short,
        Length::Long => long,
    }
}

/// The product binary a campaign runs: the release build `cargo xtask campaign` made, else the
/// one this test binary was built with.
pub fn binary(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("AILERON_CAMPAIGN_BIN_DIR") {
        return PathBuf::from(dir).join(name);
    }
    match name {
        "aileron" => PathBuf::from(env!("CARGO_BIN_EXE_aileron")),
        "aileron-mcp" => PathBuf::from(env!("CARGO_BIN_EXE_aileron-mcp")),
        other => panic!("no campaign binary named {other}"),
    }
}

/// A campaign's figures, printed and (when asked) written as JSON for RELIABILITY.md.
pub struct Report {
    name: &'static str,
    figures: Map<String, Value>,
}

impl Report {
    pub fn new(name: &'static str) -> Report {
        let mut figures = Map::new();
        figures.insert("campaign".into(), name.into());
        figures.insert("length".into(), format!("{:?}", length()).to_lowercase().into());
        figures.insert("date".into(), chrono::Utc::now().to_rfc3339().into());
        figures.insert("cpus".into(), std::thread::available_parallelism().map_or(0, |n| n.get()).into());
        figures.insert("binary".into(), binary("aileron").display().to_string().into());
        Report { name, figures }
    }

    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        self.figures.insert(key.to_string(), value.into());
    }

    /// Prints the figures and writes `<AILERON_CAMPAIGN_REPORT>/<name>.json` when asked.
    pub fn finish(self) {
        let text = serde_json::to_string_pretty(&Value::Object(self.figures)).unwrap();
        eprintln!("campaign {}:\n{text}", self.name);
        if let Ok(dir) = std::env::var("AILERON_CAMPAIGN_REPORT") {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("{}.json", self.name)), text).unwrap();
        }
    }
}

/// `kill -9` of a daemon, returning once it is gone: reaped, or a zombie with no other thread
/// left. The group leader turns zombie as soon as it exits, while another thread may still be
/// exiting (the audit writer finishing an `fdatasync`, the last one tearing down the address
/// space); the descriptors, and with them the daemon's lock, are released only when the last
/// thread has exited. Waiting on the leader alone let a restart find the lock still held
/// ("another daemon already holds …/daemon.lock").
pub fn kill_9(pid: i32) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    let gone = || {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|stat| stat.contains(") Z"));
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map(|tasks| tasks.count());
        match (zombie, threads) {
            (Ok(zombie), Ok(threads)) => zombie && threads <= 1,
            // No entry any more: reaped.
            _ => true,
        }
    };
    let started = std::time::Instant::now();
    while !gone() && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Resident set size and open file descriptors of a process, from `/proc`.
pub fn rss_and_fds(pid: i32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss_kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |entries| entries.count());
    (rss_kb * 1024, fds)
}

/// The `p`-th percentile (0–100) of sorted samples.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
