//! `aileron-mcp`: the MCP stdio server agents register (SPEC §0, ADR-0008). All of it lives in
//! `aileron::surfaces::mcp`; this file only hands over the exit code.

/// mimalloc rather than glibc's malloc (docs/decisions/0004-actions-and-runs.md, "Allocator").
#[global_allocator]
static ALLOCATOR: aileron::platform::allocator::Allocator = aileron::platform::allocator::Allocator;

fn main() -> std::process::ExitCode {
    aileron::surfaces::mcp::stdio::main()
}
