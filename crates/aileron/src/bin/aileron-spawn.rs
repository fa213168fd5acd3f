//! `aileron-spawn`: the daemon's spawn helper (SPEC §5, `aileron::dataplane::spawn::jail`), a binary of its
//! own so that each spawned program pays for the exec of a small program, not of the whole CLI.
//! `aileron __spawn` serves the same helper when this binary is not beside `aileron`.

fn main() {
    std::process::exit(aileron::dataplane::spawn::jail::main());
}
