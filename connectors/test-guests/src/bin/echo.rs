//! Returns its request: `{"output": {"op", "args"}}`. The cheapest possible call, used by
//! benchmarks and by tests of the envelope itself.

use aileron_connector_sdk::run;
use serde_json::json;

fn main() {
    run(|op, args| Ok(json!({ "op": op, "args": args })));
}
