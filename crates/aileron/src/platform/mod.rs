//! What every layer stands on: the home directory, the environment registry, process facts,
//! principals and secrets, telemetry, and what the confinements share.

pub mod allocator;
pub mod confinement;
pub mod env;
pub mod home;
pub(crate) mod parallel;
pub mod principal;
pub mod process;
pub mod secret;
pub mod telemetry;
