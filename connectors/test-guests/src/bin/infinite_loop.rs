//! Spins forever without host calls: only the wall-time limit (epoch interruption) or fuel
//! can stop it.

fn main() {
    let mut spins: u64 = 0;
    loop {
        // `black_box` keeps the loop from being proven side-effect free and compiled away.
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
}
