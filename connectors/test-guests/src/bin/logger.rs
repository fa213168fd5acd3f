//! Logs through `aileron_host.log` before answering: `args.lines` lines (default 2), the last
//! one carrying terminal escape codes and a bidi override, then fails when `args.fail` is true.
//! The host must show these lines, bounded and escaped, in the audit record, the span and
//! `aileron action run --verbose`.

use aileron_connector_sdk::{ConnectorError, Level, log, run};
use serde_json::json;

fn main() {
    run(|_, args| {
        let lines = args["lines"].as_u64().unwrap_or(2);
        for i in 0..lines.saturating_sub(1) {
            log(Level::Info, &format!("step {i} of the work"));
        }
        log(Level::Warn, "upstream said \u{1b}[31mred\u{1b}[0m and \u{202e}reversed");
        if args["fail"] == true {
            return Err(ConnectorError::new("external_api_error", "the upstream refused \u{1b}[2J\u{1b}[31mcleared"));
        }
        Ok(json!({ "logged": lines }))
    });
}
