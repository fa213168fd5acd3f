//! Sidecars: this executable started again with a hidden flag (`--serve-bare-proxy`,
//! `--serve-otlp-receiver`) to serve what a part measures against from a process of its own, so
//! that its work is not counted as the daemon's. It prints its URL on its first line and stops
//! when its stdin closes: [`Sidecar`] is the benchmark's side, [`serve`] the sidecar's.

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

    /// Its process id.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        // Closing its stdin stops it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The sidecar's own side: binds a loopback port, prints its URL (what [`Sidecar::start`] reads),
/// and runs `serve` on it, on a runtime with the default worker count (as `aileron daemon run`
/// has), until `serve` ends or stdin closes.
pub(super) fn serve<F, Fut>(serve: F) -> anyhow::Result<()>
where
    F: FnOnce(tokio::net::TcpListener) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).context("binding a loopback port")?;
    listener.set_nonblocking(true)?;
    println!("http://{}", listener.local_addr()?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let stdin_closed = tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()));
        tokio::select! {
            served = serve(listener) => served,
            _ = stdin_closed => Ok(()),
        }
    })
}
