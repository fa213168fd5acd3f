//! `aileron-mcp`: the MCP stdio server (being written; this placeholder keeps the workspace
//! building until the MCP module lands).

fn main() {
    eprintln!("aileron-mcp: not built yet");
    std::process::exit(1);
}
