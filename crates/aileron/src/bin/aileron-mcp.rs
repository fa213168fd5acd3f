//! `aileron-mcp`: the MCP stdio server agents register (SPEC §0, ADR-0008). All of it lives in
//! `aileron::mcp`; this file only hands over the exit code.

fn main() -> std::process::ExitCode {
    aileron::mcp::stdio::main()
}
