//! Writes 100 MiB to stdout: `{"output":"xxx…"}`, so that a host without an output cap would
//! even parse it as success. Write errors are ignored (a hostile guest keeps pushing); the
//! loop is bounded, so the guest ends either way.

use std::io::Write;

const TOTAL_BYTES: usize = 100 * 1024 * 1024;
const CHUNK_BYTES: usize = 64 * 1024;

fn main() {
    let chunk = [b'x'; CHUNK_BYTES];
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(b"{\"output\":\"");
    for _ in 0..TOTAL_BYTES / CHUNK_BYTES {
        let _ = stdout.write_all(&chunk);
    }
    let _ = stdout.write_all(b"\"}\n");
    let _ = stdout.flush();
}
