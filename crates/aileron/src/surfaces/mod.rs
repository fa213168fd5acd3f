//! The ways in: the CLI, the daemon's HTTP surface and console, the MCP servers, `aileron launch`,
//! and the client the CLI and `aileron-mcp` reach the daemon with. Nothing below imports them.

pub mod cli;
pub mod client;
pub mod daemon;
pub mod launch;
pub mod mcp;
