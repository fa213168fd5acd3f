//! The `aileron` crate's one integration-test binary.

mod api;
mod approvals;
mod browser;
mod campaign;
mod cli;
mod crash;
mod credentials;
mod distribution;
mod egress_attacks;
mod export;
mod fake_forge;
/// The demo's loopback GitHub stand-in, compiled in from the demo (it is not library surface).
#[path = "../../src/surfaces/cli/demo/stand_in.rs"]
mod fake_github;
mod fake_oauth;
mod gateway;
mod gateway_clients;
mod go_guest;
mod hostile;
mod http_doc;
mod launch;
mod leaks;
mod lifecycle;
mod mcp;
mod original_actions;
mod policy;
mod receipts;
mod security;
mod spawn;
mod support;
mod traces;
