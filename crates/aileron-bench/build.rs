//! Points `AILERON_GUESTS_DIR` at the connector guests the benchmark embeds (`echo.wasm`).
//!
//! `crates/aileron/build.rs` builds them into `connectors/target/wasm32-wasip1/release`; aileron
//! is a dependency, so its build script has run before this crate compiles, and `include_bytes!`
//! recompiles the benchmark when a guest changes.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let guests_dir = manifest_dir.join("../../connectors/target/wasm32-wasip1/release");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=AILERON_GUESTS_DIR={}", guests_dir.display());
}
