//! The `aileron` executable: parses the command line and exits with the command's code.

fn main() {
    std::process::exit(aileron::cli::main());
}
