//! Sleeps `args.ms` milliseconds with `std::thread::sleep`, which wasip1 std implements with a
//! `poll_oneoff` clock subscription (as Go's `time.Sleep` does). Reports the monotonic time
//! that really elapsed.

use std::time::{Duration, Instant};

use aileron_connector_sdk::{ConnectorError, run};
use serde_json::json;

fn main() {
    run(|_, args| {
        let ms =
            args["ms"].as_u64().ok_or_else(|| ConnectorError::bad_input("`ms` (non-negative integer) is required"))?;
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(json!({ "slept_ms": ms, "elapsed_ms": elapsed_ms }))
    });
}
