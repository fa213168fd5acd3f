//! The `aileron` executable: parses the command line and exits with the command's code.

/// mimalloc rather than glibc's malloc, without transparent huge pages (docs/decisions/0004-actions-and-runs.md,
/// "Allocator"): the daemon's run path spent about a tenth of its CPU in glibc's malloc and free. Called
/// through `platform::allocator`, which takes its plain `malloc` where that meets the alignment.
#[global_allocator]
static ALLOCATOR: aileron::platform::allocator::Allocator = aileron::platform::allocator::Allocator;

fn main() {
    std::process::exit(aileron::surfaces::cli::main());
}
