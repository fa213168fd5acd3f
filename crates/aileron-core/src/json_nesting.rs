//! How deeply untrusted JSON may nest. A value an agent or a connector hands the daemon is kept —
//! in the approval journal, the audit log, answers — wrapped a few levels deeper than it came, and
//! read back by parsers that stop at 128 levels (serde_json's default, every MCP client's). A
//! value accepted at 125 levels was journaled at 129 and the daemon then refused to start (the
//! ninth re-attack), so a value is refused where it enters, well below any reader's limit.

use serde_json::Value;

/// The most levels an argument, a connector's output or its error details may nest (an object or
/// an array is one level; a scalar none).
pub const MAX_NESTING: usize = 64;

/// Whether `value` nests deeper than [`MAX_NESTING`]. Descends at most one level past the limit
/// (so the stack it takes is bounded whatever the value) and allocates nothing: it runs on every
/// argument and every output.
pub fn too_deep(value: &Value) -> bool {
    fn deeper(value: &Value, left: usize) -> bool {
        let below = |left: usize| move |child: &Value| deeper(child, left);
        match (value, left.checked_sub(1)) {
            (Value::Array(_) | Value::Object(_), None) => true,
            (Value::Array(items), Some(left)) => items.iter().any(below(left)),
            (Value::Object(members), Some(left)) => members.values().any(below(left)),
            _ => false,
        }
    }
    deeper(value, MAX_NESTING)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_and_arrays_are_levels_and_scalars_are_not() {
        let mut deep = json!(null);
        for _ in 0..MAX_NESTING {
            deep = json!([1, deep]);
        }
        assert!(!too_deep(&deep) && !too_deep(&json!(1)));
        assert!(too_deep(&json!({ "a": deep.clone() })));
        assert!(too_deep(&json!([[], { "b": deep }])), "found past a shallow sibling");
        let mut very = json!(0);
        for _ in 0..10_000 {
            very = Value::Array(vec![very]);
        }
        assert!(too_deep(&very), "measured without descending it all");
        // Dropped level by level: a value this deep would overflow the stack of serde_json's drop.
        let mut very = very;
        while let Value::Array(mut items) = very {
            very = items.pop().unwrap_or(Value::Null);
        }
    }
}
