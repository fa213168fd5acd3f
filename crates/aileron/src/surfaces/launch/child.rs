//! Running the agent in the user's terminal: stdio inherited, same process group, and the
//! launcher stays alive until the agent exits so it can end the session with the exit code.
//!
//! Signals: SIGTERM and SIGHUP sent to the launcher are forwarded to the agent. SIGINT is
//! forwarded only when it cannot have come from the terminal: a Ctrl-C at the terminal already
//! reaches the agent (it is in our foreground process group), and a second copy would turn one
//! Ctrl-C into two (Claude Code exits on a double Ctrl-C).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

/// Exit code for a child killed by `signal` (the shell convention).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Whether a terminal's Ctrl-C reaches our process group (so the child gets it already).
pub fn terminal_delivers_interrupts() -> bool {
    let Ok(tty) = std::fs::File::open("/dev/tty") else {
        return false;
    };
    match (nix::unistd::tcgetpgrp(&tty), nix::unistd::getpgrp()) {
        (Ok(foreground), ours) => foreground == ours,
        _ => false,
    }
}

/// Spawns `program` with `args`, extra `env` and without the `withheld` variables, waits for it
/// while forwarding signals, and returns its exit code. Its pid is stored in `spawned` (the
/// confinement helper's: the launcher joins its namespaces to bind a replaced file again).
pub async fn run(
    program: &Path,
    args: &[OsString],
    env: &[(String, String)],
    withheld: &[&str],
    spawned: Option<&std::sync::atomic::AtomicI32>,
) -> std::io::Result<i32> {
    let interrupts_reach_child = terminal_delivers_interrupts();
    // Install the handlers before spawning so no signal falls between the two.
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut command = tokio::process::Command::new(program);
    command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    for name in withheld {
        command.env_remove(name);
    }
    let mut child = command.spawn()?;
    let pid = child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
    if let (Some(spawned), Some(pid)) = (spawned, pid) {
        spawned.store(pid.as_raw(), std::sync::atomic::Ordering::SeqCst);
    }
    let forward = |signal: Signal| {
        if let Some(pid) = pid {
            let _ = kill(pid, signal);
        }
    };
    loop {
        tokio::select! {
            status = child.wait() => return Ok(exit_code(status?)),
            _ = terminate.recv() => forward(Signal::SIGTERM),
            _ = hangup.recv() => forward(Signal::SIGHUP),
            _ = interrupt.recv() => {
                if !interrupts_reach_child {
                    forward(Signal::SIGINT);
                }
            }
        }
    }
}
