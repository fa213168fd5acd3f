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

use super::native::{Val, decimal};

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

    /// A JSON argument as the value rules see, `None` when it is not of this type (the
    /// action's own validation ran first, so only by design).
    fn native(self, value: &Value) -> Option<Val<'_>> {
        match (self, value) {
            (ArgScalar::String, Value::String(text)) => Some(Val::Str(text)),
            (ArgScalar::Bool, Value::Bool(flag)) => Some(Val::Bool(*flag)),
            (ArgScalar::Long, Value::Number(n)) => n.as_i64().map(Val::Long),
            (ArgScalar::Decimal, Value::Number(n)) => {
                let n = n.as_f64()?;
                // Cedar's decimal holds four places and an i64 of them; rounded as `{:.4}` prints.
                (n.abs() < 9.0e14).then(|| decimal(&format!("{n:.4}"))).flatten().map(Val::Decimal)
            }
            _ => None,
        }
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

    /// [`ArgScalar::native`] of a scalar, or of each item of a set.
    fn native(self, value: &Value) -> Option<Val<'_>> {
        match (self, value) {
            (ArgType::Scalar(scalar), value) => scalar.native(value),
            (ArgType::Set(item), Value::Array(items)) => {
                items.iter().map(|v| item.native(v)).collect::<Option<Vec<_>>>().map(Val::Set)
            }
            (ArgType::Set(_), _) => None,
        }
    }
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

    /// A call's arguments as rules see them: those of a type rules can see, typed.
    pub fn native_args<'a>(&self, args: &'a serde_json::Map<String, Value>) -> Vec<(&'a str, Val<'a>)> {
        args.iter().filter_map(|(name, value)| Some((name.as_str(), self.types.get(name)?.native(value)?))).collect()
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
