//! The `aileron` binary's library: the daemon, the CLI, the run chokepoint and the IO around the
//! pure domain in `aileron-core` and the sandbox in `aileron-sandbox`.

/// `eprintln!` that never panics. The daemon's standard error is `daemon.log`, on a disk that
/// may be full (or a closed pipe): `eprintln!` panics when the write fails, which took down the
/// request that wanted to log, and — from the audit writer's thread — the writer itself, so every
/// later run failed `audit_unavailable` until a restart. A line that cannot be written is lost.
/// (Defined before the modules so every one of them can use it.)
macro_rules! log_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

pub mod dataplane;
pub mod platform;
pub mod runner;
pub mod services;
pub mod stores;
pub mod surfaces;
pub mod wire;
pub mod workflows;
