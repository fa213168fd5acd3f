//! Executes `unreachable` at once: a trap, not an exit. The daemon must survive it and report
//! `connector_runtime_error`.

fn main() {
    core::arch::wasm32::unreachable();
}
