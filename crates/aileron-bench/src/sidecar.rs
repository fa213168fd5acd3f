//! Sidecars: this executable started again with a hidden flag (`--serve-bare-proxy`,
//! `--serve-otlp-receiver`) to serve what a part measures against from a process of its own, so
//! that its work is not counted as the daemon's. It prints its URL on its first line and stops
//! when its stdin closes.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

pub(super) struct Sidecar {
    child: Child,
    /// `http://127.0.0.1:<port>`, as it printed it.
    pub(super) base_url: String,
}

impl Sidecar {
    /// Starts this executable with `args` and reads the URL it serves on; `what` names it in errors.
    pub(super) fn start(args: &[&str], what: &str) -> anyhow::Result<Sidecar> {
        let executable = std::env::current_exe().context("locating the benchmark executable")?;
        let mut child = Command::new(executable)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the {what}"))?;
        let stdout = child.stdout.take().with_context(|| format!("the {what}'s stdout"))?;
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .with_context(|| format!("reading the {what}'s address"))?;
        let base_url = line.trim().to_string();
        if !base_url.starts_with("http://") {
            bail!("the {what} did not start (it printed {line:?})");
        }
        Ok(Sidecar { child, base_url })
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        // Closing its stdin stops it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
