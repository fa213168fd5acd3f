//! Writes a line to stderr and exits 3 without printing an error object: the host reports
//! `connector_runtime_error` with the exit code and the tail of stderr.

fn main() {
    eprintln!("exit_nonzero: giving up on purpose with exit code 3");
    std::process::exit(3);
}
