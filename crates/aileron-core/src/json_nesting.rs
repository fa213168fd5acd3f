//! How deeply untrusted JSON may nest. A value an agent or a connector hands the daemon is kept —
//! in the approval journal, the audit log, answers — wrapped a few levels deeper than it came, and
//! read back by parsers that stop at 128 levels (serde_json's default, every MCP client's). A
//! value accepted at 125 levels was journaled at 129 and the daemon then refused to start (the
//! ninth re-attack), so a value is refused where it enters, well below any reader's limit.

use serde_json::Value;

/// The most levels an argument, a connector's output or its error details may nest (an object or
/// an array is one level; a scalar none).
pub const MAX_NESTING: usize = 64;

/// How many levels `value` nests, counted without recursion (so a value of any depth is measured
/// without growing the stack).
pub fn nesting(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0usize)];
    while let Some((value, above)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(members) => Box::new(members.values()),
            _ => continue,
        };
        let level = above + 1;
        deepest = deepest.max(level);
        pending.extend(children.map(|child| (child, level)));
    }
    deepest
}

/// Whether `value` nests deeper than [`MAX_NESTING`].
pub fn too_deep(value: &Value) -> bool {
    nesting(value) > MAX_NESTING
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nesting_counts_objects_and_arrays_and_not_scalars() {
        assert_eq!(nesting(&json!(1)), 0);
        assert_eq!(nesting(&json!([])), 1);
        assert_eq!(nesting(&json!({"a": [1, {"b": []}]})), 4);
        let mut deep = json!(null);
        for _ in 0..MAX_NESTING {
            deep = json!([deep]);
        }
        assert!(!too_deep(&deep));
        assert!(too_deep(&json!({ "a": deep })));
    }
}
