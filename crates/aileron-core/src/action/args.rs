//! Call-argument validation: the agent's arguments against the action's declared `[[inputs]]`.
//! Every problem is listed at once, so one corrected call can succeed.

use std::fmt;

use serde_json::{Map, Value};

use super::{ActionFile, InputType};

/// One thing wrong with a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsProblem {
    /// Arguments the action does not declare.
    Undeclared(Vec<String>),
    MissingRequired(String),
    WrongType {
        name: String,
        expected: InputType,
        got: &'static str,
    },
    WrongItemType {
        name: String,
        index: usize,
        expected: InputType,
        got: &'static str,
    },
    /// Nested deeper than [`crate::json_nesting::MAX_NESTING`] levels.
    TooDeep(String),
}

/// `invalid_args`: the call's arguments do not fit the declared inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsError {
    pub action: String,
    pub problems: Vec<ArgsProblem>,
    /// The declared input names, for the message.
    pub declared: Vec<String>,
}

impl ArgsError {
    pub fn code(&self) -> &'static str {
        "invalid_args"
    }

    /// The human message (also the Display form).
    pub fn message(&self) -> String {
        self.to_string()
    }

    pub fn hint(&self) -> &'static str {
        "call the tool again with arguments that match its inputSchema"
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn article(kind: &str) -> &'static str {
    if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid arguments for action `{}`: ", self.action)?;
        for (position, problem) in self.problems.iter().enumerate() {
            if position > 0 {
                f.write_str("; ")?;
            }
            match problem {
                ArgsProblem::Undeclared(names) => {
                    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                    let noun = if names.len() == 1 { "argument" } else { "arguments" };
                    write!(f, "undeclared {noun} {}", quoted.join(", "))?;
                    if self.declared.is_empty() {
                        f.write_str(" (this action takes no arguments)")?;
                    } else {
                        write!(f, " (declared inputs: {})", self.declared.join(", "))?;
                    }
                }
                ArgsProblem::MissingRequired(name) => write!(f, "missing required argument `{name}`")?,
                ArgsProblem::WrongType { name, expected, got } => {
                    let expected = expected.as_str();
                    write!(f, "argument `{name}` must be {} {expected}, got {}", article(expected), describe_got(got))?;
                }
                ArgsProblem::TooDeep(name) => {
                    write!(f, "argument `{name}` nests more than {} levels deep", crate::json_nesting::MAX_NESTING)?
                }
                ArgsProblem::WrongItemType { name, index, expected, got } => {
                    let expected = expected.as_str();
                    write!(
                        f,
                        "item {index} of argument `{name}` must be {} {expected}, got {}",
                        article(expected),
                        describe_got(got)
                    )?;
                }
            }
        }
        Ok(())
    }
}

fn describe_got(got: &str) -> String {
    if got == "null" {
        "null (omit an optional argument instead of passing null)".to_string()
    } else {
        format!("{} {got}", article(got))
    }
}

impl std::error::Error for ArgsError {}

pub(super) fn validate(action: &ActionFile, args: &Map<String, Value>) -> Result<(), ArgsError> {
    let mut problems = Vec::new();
    let mut undeclared: Vec<String> = args.keys().filter(|name| action.input(name).is_none()).cloned().collect();
    // Named in order whatever order the call's object kept.
    undeclared.sort();
    if !undeclared.is_empty() {
        problems.push(ArgsProblem::Undeclared(undeclared));
    }
    for input in action.inputs.iter().filter(|i| i.required) {
        if !args.contains_key(&input.name) {
            problems.push(ArgsProblem::MissingRequired(input.name.clone()));
        }
    }
    for input in &action.inputs {
        let Some(value) = args.get(&input.name) else {
            continue;
        };
        if !input.kind.matches(value) {
            problems.push(ArgsProblem::WrongType {
                name: input.name.clone(),
                expected: input.kind,
                got: json_type(value),
            });
            continue;
        }
        if crate::json_nesting::too_deep(value) {
            problems.push(ArgsProblem::TooDeep(input.name.clone()));
            continue;
        }
        if let (Some(items_type), Value::Array(items)) = (input.items_type, value) {
            for (index, item) in items.iter().enumerate() {
                if !items_type.matches(item) {
                    problems.push(ArgsProblem::WrongItemType {
                        name: input.name.clone(),
                        index,
                        expected: items_type,
                        got: json_type(item),
                    });
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(ArgsError {
        action: action.name.clone(),
        problems,
        declared: action.inputs.iter().map(|i| i.name.clone()).collect(),
    })
}
