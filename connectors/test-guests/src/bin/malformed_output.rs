//! Prints something that is not one JSON object (text followed by a truncated object) and
//! exits 0.

fn main() {
    print!("this is not JSON {{\"output\": ");
}
