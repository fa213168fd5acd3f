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

pub mod actions;
pub mod approvals;
pub mod audit_log;
pub mod bindings;
pub mod cli;
pub mod client;
pub mod confinement;
pub mod daemon;
pub mod egress;
pub mod env;
pub mod forge;
pub mod gateway;
pub mod headers;
pub mod home;
pub mod keyring;
pub mod launch;
pub mod mcp;
pub mod oauth;
pub mod package;
mod parallel;
pub mod pooled_http;
pub mod principal;
pub mod process;
pub mod public_address;
pub mod publish;
pub mod runner;
pub mod secret;
pub mod services;
pub mod sessions;
pub mod spawn;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod vault;
pub mod wire;
pub mod workflows;
