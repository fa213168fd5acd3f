//! The Cedar schema of SPEC §16, generated from the installed actions' inputs: what makes a rule
//! that names an argument no action has, or compares one as the wrong type, an error when the
//! set loads rather than a rule that silently never applies.
//!
//! `context.args` is one record for every action (Cedar types a context per Cedar action, and
//! every run is `Aileron::Action::"run"`): each argument name any action declares is an optional
//! attribute of the type that action gives it, so a rule must test `context.args has x` before it
//! reads `x` (strict validation insists, and a rule cannot then fail at evaluation). A name two
//! actions type differently is left out, and named in [`ArgTypes::conflicts`] for the error's hint.

use std::collections::BTreeMap;

use aileron_core::action::{ActionFile, InputType};
use cedar_policy::RestrictedExpression;
use serde_json::{Value, json};

use super::native::Val;

/// What a rule may compare an argument as: one value, or a set of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    Scalar(ArgScalar),
    Set(ArgScalar),
}

/// A value a rule can compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgScalar {
    String,
    Long,
    /// A JSON number (a fraction allowed): Cedar's `decimal` (four places).
    Decimal,
    Bool,
}

impl ArgScalar {
    fn of(kind: InputType) -> Option<ArgScalar> {
        match kind {
            InputType::String => Some(ArgScalar::String),
            InputType::Integer => Some(ArgScalar::Long),
            InputType::Number => Some(ArgScalar::Decimal),
            InputType::Boolean => Some(ArgScalar::Bool),
            InputType::Array | InputType::Object | InputType::Any => None,
        }
    }

    fn schema(self) -> Value {
        match self {
            ArgScalar::String => json!({ "type": "String" }),
            ArgScalar::Long => json!({ "type": "Long" }),
            ArgScalar::Decimal => json!({ "type": "Extension", "name": "decimal" }),
            ArgScalar::Bool => json!({ "type": "Boolean" }),
        }
    }

    /// A JSON argument as the value rules see, `Ok(None)` when it is not of this type (the
    /// action's own validation ran first, so only by design), and an error when it is of this
    /// type but rules cannot hold it as it was sent: an integer past Cedar's 64-bit `Long`, a
    /// number past its `decimal` or with more than four places. Rounded or left out, such a value
    /// would pass a rule that names it (`amount > 100` never saw 18446744073709551615, the tenth
    /// re-attack), so the call is refused instead.
    fn native(self, value: &Value) -> Result<Option<Val<'_>>, String> {
        Ok(match (self, value) {
            (ArgScalar::String, Value::String(text)) => Some(Val::Str(text)),
            (ArgScalar::Bool, Value::Bool(flag)) => Some(Val::Bool(*flag)),
            (ArgScalar::Long, Value::Number(n)) => Some(Val::Long(n.as_i64().ok_or_else(|| {
                format!("{n} is outside the integers rules compare (-9223372036854775808 to 9223372036854775807)")
            })?)),
            (ArgScalar::Decimal, Value::Number(n)) => Some(Val::Decimal(exact_decimal(n).ok_or_else(|| {
                format!(
                    "{n} is not a number rules can compare exactly (at most four decimal places, between \
                     -922337203685477.5808 and 922337203685477.5807)"
                )
            })?)),
            _ => None,
        })
    }
}

impl ArgType {
    fn of(kind: InputType, items: Option<InputType>) -> Option<ArgType> {
        match kind {
            InputType::Array => ArgScalar::of(items?).map(ArgType::Set),
            scalar => ArgScalar::of(scalar).map(ArgType::Scalar),
        }
    }

    fn schema(self) -> Value {
        match self {
            ArgType::Scalar(scalar) => scalar.schema(),
            ArgType::Set(item) => json!({ "type": "Set", "element": item.schema() }),
        }
    }

    /// [`ArgScalar::native`] of a scalar, or of each item of a set (an item of another type
    /// leaves the set out; one rules cannot hold refuses the call, as a scalar does).
    fn native(self, value: &Value) -> Result<Option<Val<'_>>, String> {
        match (self, value) {
            (ArgType::Scalar(scalar), value) => scalar.native(value),
            (ArgType::Set(item), Value::Array(items)) => {
                let items: Option<Vec<Val<'_>>> = items.iter().map(|v| item.native(v)).collect::<Result<_, _>>()?;
                Ok(items.map(Val::Set))
            }
            (ArgType::Set(_), _) => Ok(None),
        }
    }
}

/// A JSON number as Cedar's `decimal` (ten-thousandths in an `i64`), when it is one exactly:
/// read from the number's shortest text (`100.00004`, `1e-5`, `1e15`), never through rounding.
fn exact_decimal(n: &serde_json::Number) -> Option<i64> {
    let text = n.to_string();
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent.parse::<i32>().ok()?),
        None => (text.as_str(), 0),
    };
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The value is `digits` × 10^places; in ten-thousandths, × 10^(places + 4).
    let places = exponent.checked_sub(i32::try_from(fraction.len()).ok()?)?.checked_add(4)?;
    let digits = digits.trim_start_matches('0');
    let (digits, places) = if places < 0 {
        let cut = usize::try_from(-places).ok()?;
        let kept = digits.len().checked_sub(cut);
        match kept {
            // Only zeros may be cut: anything else is a fifth place.
            Some(kept) if digits[kept..].bytes().all(|b| b == b'0') => (&digits[..kept], 0),
            None if digits.bytes().all(|b| b == b'0') => ("", 0),
            _ => return None,
        }
    } else {
        (digits, places)
    };
    let mut magnitude: i64 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    for _ in 0..places {
        if magnitude == 0 {
            break;
        }
        magnitude = magnitude.checked_mul(10)?;
    }
    Some(if negative { -magnitude } else { magnitude })
}

/// A typed argument as Cedar's expression.
fn expression(value: &Val<'_>) -> RestrictedExpression {
    match value {
        Val::Str(text) => RestrictedExpression::new_string(text.to_string()),
        Val::Bool(flag) => RestrictedExpression::new_bool(*flag),
        Val::Long(n) => RestrictedExpression::new_long(*n),
        Val::Decimal(n) => {
            let sign = if *n < 0 { "-" } else { "" };
            let magnitude = n.unsigned_abs();
            RestrictedExpression::new_decimal(format!("{sign}{}.{:04}", magnitude / 10_000, magnitude % 10_000))
        }
        Val::Set(items) => RestrictedExpression::new_set(items.iter().map(expression)),
        // Arguments are strings, numbers, booleans and sets of them.
        Val::Entity(_) | Val::Record(_) => RestrictedExpression::new_bool(false),
    }
}

/// The argument names rules can see, with their types, across every installed action.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ArgTypes {
    pub types: BTreeMap<String, ArgType>,
    /// Names two actions type differently (left out of the schema), with those actions.
    pub conflicts: BTreeMap<String, Vec<String>>,
    /// Names of a type no rule can compare (objects, any JSON), with an action declaring them.
    pub opaque: BTreeMap<String, String>,
}

impl ArgTypes {
    pub fn of<'a>(actions: impl IntoIterator<Item = &'a ActionFile>) -> ArgTypes {
        let mut found = ArgTypes::default();
        let mut declared: BTreeMap<String, (ArgType, String)> = BTreeMap::new();
        for action in actions {
            for input in &action.inputs {
                let Some(kind) = ArgType::of(input.kind, input.items_type) else {
                    found.opaque.entry(input.name.clone()).or_insert_with(|| action.name.clone());
                    continue;
                };
                match declared.get(&input.name) {
                    Some((earlier, _)) if *earlier == kind => {}
                    Some((_, first)) => {
                        let first = first.clone();
                        let conflict = found.conflicts.entry(input.name.clone()).or_insert_with(|| vec![first]);
                        conflict.push(action.name.clone());
                    }
                    None => {
                        declared.insert(input.name.clone(), (kind, action.name.clone()));
                    }
                }
            }
        }
        for (name, (kind, _)) in declared {
            if !found.conflicts.contains_key(&name) {
                found.types.insert(name, kind);
            }
        }
        found
    }

    /// The Cedar schema (JSON form) of SPEC §16's entities, actions and context.
    pub fn schema_json(&self) -> Value {
        let args: serde_json::Map<String, Value> = self
            .types
            .iter()
            .map(|(name, kind)| {
                let mut attribute = kind.schema();
                attribute["required"] = false.into();
                (name.clone(), attribute)
            })
            .collect();
        let context = json!({
            "type": "Record",
            "attributes": {
                "args": { "type": "Record", "attributes": args },
                "now": { "type": "Extension", "name": "datetime" },
                "runs_last_hour": { "type": "Long" },
                "runs_last_day": { "type": "Long" },
                "session_runs": { "type": "Long" },
            }
        });
        let applies = json!({ "principalTypes": ["Agent", "Human"], "resourceTypes": ["Tool"], "context": context });
        json!({
            "Aileron": {
                "entityTypes": {
                    "Agent": { "shape": { "type": "Record", "attributes": {
                        "agent": { "type": "String" },
                        "contained": { "type": "Boolean" },
                    } } },
                    "Human": {},
                    "Tool": { "shape": { "type": "Record", "attributes": {
                        "connector": { "type": "String" },
                        "approval_required": { "type": "Boolean" },
                    } } },
                },
                "actions": {
                    "run": { "appliesTo": applies },
                    "http_request": { "appliesTo": applies },
                }
            }
        })
    }

    /// A call's arguments as rules see them: those of a type rules can see, typed; an error
    /// naming the first argument of such a type whose value rules cannot hold as sent.
    pub fn native_args<'a>(&self, args: &'a serde_json::Map<String, Value>) -> Result<Vec<(&'a str, Val<'a>)>, String> {
        let mut seen = Vec::with_capacity(args.len());
        for (name, value) in args {
            let Some(kind) = self.types.get(name) else { continue };
            match kind.native(value) {
                Ok(Some(value)) => seen.push((name.as_str(), value)),
                Ok(None) => {}
                Err(why) => return Err(format!("the argument `{name}`: {why}")),
            }
        }
        Ok(seen)
    }

    /// The same as the context's `args` record.
    pub fn args_expression(
        args: &[(&str, Val<'_>)],
    ) -> Result<RestrictedExpression, cedar_policy::ExpressionConstructionError> {
        RestrictedExpression::new_record(args.iter().map(|(name, value)| (name.to_string(), expression(value))))
    }

    /// Why a rule naming `name` does not validate, when the schema left it out on purpose.
    pub fn hint_for(&self, message: &str) -> Option<String> {
        for (name, actions) in &self.conflicts {
            if message.contains(&format!("`{name}`")) || message.contains(&format!("attribute {name}")) {
                return Some(format!(
                    "the argument `{name}` has different types in {}: rules cannot compare it; rename it in one \
                     of them",
                    actions.join(" and ")
                ));
            }
        }
        for (name, action) in &self.opaque {
            if message.contains(&format!("`{name}`")) || message.contains(&format!("attribute {name}")) {
                return Some(format!(
                    "the argument `{name}` of {action} is an object or any JSON value: rules compare strings, \
                     integers, numbers, booleans and arrays of them"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn number(text: &str) -> serde_json::Number {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_number_is_a_decimal_only_when_it_is_one_exactly() {
        for (text, tenths_of_thousandths) in [
            ("100", Some(1_000_000)),
            ("100.0", Some(1_000_000)),
            ("-3.25", Some(-32_500)),
            ("0.0001", Some(1)),
            ("19.99", Some(199_900)),
            ("1e3", Some(10_000_000)),
            ("1.5E-2", Some(150)),
            ("0", Some(0)),
            ("-0.0", Some(0)),
            ("922337203685477.5807", None), // an f64 cannot hold it: read back, it is another number
            ("100.00004", None),
            ("1e-5", None),
            ("1e15", None),
            ("1e20", None),
            ("18446744073709551615", None),
        ] {
            assert_eq!(exact_decimal(&number(text)), tenths_of_thousandths, "{text}");
        }
    }

    #[test]
    fn an_argument_rules_cannot_hold_refuses_the_call_and_one_of_another_type_is_left_out() {
        let types = ArgTypes {
            types: BTreeMap::from([
                ("amount".to_string(), ArgType::Scalar(ArgScalar::Long)),
                ("price".to_string(), ArgType::Scalar(ArgScalar::Decimal)),
                ("roles".to_string(), ArgType::Set(ArgScalar::Long)),
            ]),
            ..ArgTypes::default()
        };
        let args = |value: Value| value.as_object().unwrap().clone();
        let held = args(json!({"amount": 5, "price": 1.25, "roles": [0, 1], "other": "x"}));
        assert_eq!(types.native_args(&held).unwrap().len(), 3);
        for (refused, name) in [
            (json!({"amount": 18446744073709551615u64}), "amount"),
            (json!({"price": 1e15}), "price"),
            (json!({"price": 100.00004}), "price"),
            (json!({"roles": [0, 18446744073709551615u64]}), "roles"),
        ] {
            let error = types.native_args(&args(refused.clone())).unwrap_err();
            assert!(error.starts_with(&format!("the argument `{name}`: ")), "{refused}: {error}");
        }
        // Of another type (the action's validation ran first: only by design), left out as before.
        assert!(types.native_args(&args(json!({"amount": "5", "roles": ["a"]}))).unwrap().is_empty());
    }
}
