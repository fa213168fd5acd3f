//! What every layer stands on: the home directory, the environment registry, process facts,
//! principals and secrets, telemetry, what the confinements share, and the idle watch of served
//! HTTP connections.

pub mod confinement;
pub mod env;
pub mod home;
pub mod idle_watch;
pub(crate) mod parallel;
pub mod principal;
pub mod process;
pub mod secret;
pub mod telemetry;
