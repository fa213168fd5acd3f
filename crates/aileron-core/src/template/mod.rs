//! Step input interpolation (SPEC §2): `${args.<input>}` and `${<step_id>.<json.path>}` references in
//! `[execute.inputs]` strings, and the effective op arguments of a step.
//!
//! Effective op args = the call's declared arguments overlaid by the step's interpolated inputs, so a
//! value the action author fixed in a step always wins over whatever the agent passed.
//!
//! A string that is exactly one reference becomes the referenced JSON value with its type; otherwise
//! references are substituted as text (strings raw, other values as compact JSON). `$${` is a literal
//! `${`. An optional input that was not passed makes a whole-reference value disappear (its key, or
//! its array element) and reads as the empty string inside text.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::action::ActionFile;
use crate::failure::{Boundary, Failure};

/// A piece of a template string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePart {
    Text(String),
    Reference(Reference),
}

/// Where a reference reads from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceSource {
    /// `${args.<input>...}`: a call argument.
    Args(String),
    /// `${<step_id>...}`: an earlier step's output.
    Step(String),
}

/// `${args.owner}`, `${issues.items.0.title}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub source: ReferenceSource,
    /// Object keys or array indices below the source.
    pub path: Vec<String>,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            ReferenceSource::Args(input) => write!(f, "${{args.{input}")?,
            ReferenceSource::Step(step) => write!(f, "${{{step}")?,
        }
        for segment in &self.path {
            write!(f, ".{segment}")?;
        }
        f.write_str("}")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateSyntaxError {
    #[error("`{0}` is never closed with `}}` (write `$${{` for a literal `${{`)")]
    Unterminated(String),
    #[error("`${{}}` is an empty reference")]
    Empty,
    #[error("`${{args}}` must name an input: `${{args.<input>}}`")]
    ArgsWithoutInput,
    #[error("`${{{0}}}` has an empty path segment")]
    EmptySegment(String),
    #[error("`${{{0}}}` may not contain whitespace, `{{`, `$` or quotes")]
    InvalidCharacter(String),
}

/// Splits a template string into text and references.
pub fn parse_template(template: &str) -> Result<Vec<TemplatePart>, TemplateSyntaxError> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(dollar) = rest.find('$') {
        text.push_str(&rest[..dollar]);
        let at = &rest[dollar..];
        if let Some(after) = at.strip_prefix("$${") {
            text.push_str("${");
            rest = after;
        } else if let Some(body_and_rest) = at.strip_prefix("${") {
            let close = body_and_rest.find('}').ok_or_else(|| TemplateSyntaxError::Unterminated(at.to_string()))?;
            let reference = parse_reference(&body_and_rest[..close])?;
            if !text.is_empty() {
                parts.push(TemplatePart::Text(std::mem::take(&mut text)));
            }
            parts.push(TemplatePart::Reference(reference));
            rest = &body_and_rest[close + 1..];
        } else {
            text.push('$');
            rest = &at[1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(TemplatePart::Text(text));
    }
    Ok(parts)
}

fn parse_reference(body: &str) -> Result<Reference, TemplateSyntaxError> {
    if body.is_empty() {
        return Err(TemplateSyntaxError::Empty);
    }
    if body.chars().any(|c| c.is_whitespace() || matches!(c, '{' | '$' | '"' | '\'')) {
        return Err(TemplateSyntaxError::InvalidCharacter(body.to_string()));
    }
    let segments: Vec<&str> = body.split('.').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(TemplateSyntaxError::EmptySegment(body.to_string()));
    }
    let (source, path) = match segments.as_slice() {
        ["args"] => return Err(TemplateSyntaxError::ArgsWithoutInput),
        ["args", input, path @ ..] => (ReferenceSource::Args(input.to_string()), path),
        [step, path @ ..] => (ReferenceSource::Step(step.to_string()), path),
        [] => return Err(TemplateSyntaxError::Empty),
    };
    Ok(Reference { source, path: path.iter().map(|s| s.to_string()).collect() })
}

/// Every reference in the strings of a JSON value, nested tables and arrays included.
pub fn references_in(value: &Value) -> Result<Vec<Reference>, TemplateSyntaxError> {
    let mut found = Vec::new();
    collect_references(value, &mut found)?;
    Ok(found)
}

fn collect_references(value: &Value, found: &mut Vec<Reference>) -> Result<(), TemplateSyntaxError> {
    match value {
        Value::String(s) => {
            for part in parse_template(s)? {
                if let TemplatePart::Reference(reference) = part {
                    found.push(reference);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_references(item, found)?;
            }
        }
        Value::Object(map) => {
            for item in map.values() {
                collect_references(item, found)?;
            }
        }
        _ => {}
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("the action has no step {index} (it has {count})")]
    NoSuchStep { index: usize, count: usize },
    #[error("step `{step}`: {reference} needs the output of step `{referenced}`, which has not run")]
    MissingStepOutput { step: String, reference: String, referenced: String },
    #[error("step `{step}`: {reference}: the output of step `{referenced}` has no value at `{path}`")]
    MissingPath { step: String, reference: String, referenced: String, path: String },
    #[error("step `{step}`: {reference}: argument `{input}` has no value at `{path}`")]
    MissingArgPath { step: String, reference: String, input: String, path: String },
    #[error("step `{step}`: {error}")]
    Syntax { step: String, error: TemplateSyntaxError },
}

impl TemplateError {
    /// The failure reported for a run that stopped here (the action's data flow broke at run time).
    pub fn to_failure(&self) -> Failure {
        Failure::runtime_error(Boundary::Runtime, self.to_string()).with_detail("reason", "template")
    }
}

/// The effective op arguments of step `step_index`.
pub fn step_args(
    action: &ActionFile,
    step_index: usize,
    call_args: &Map<String, Value>,
    prior: &BTreeMap<String, Value>,
) -> Result<Map<String, Value>, TemplateError> {
    let step = action
        .steps
        .get(step_index)
        .ok_or(TemplateError::NoSuchStep { index: step_index, count: action.steps.len() })?;
    let context = Interpolation { step: &step.id, call_args, prior };
    overlay(action, call_args, &step.inputs, &context)
}

/// The arguments of the approval preview op: exactly the interpolated `[approval.preview] args`
/// (which may only reference `${args.<input>}`). Unlike a step, the call's arguments are not
/// overlaid: the preview runs a different (read-only) op whose parameters the author spells out,
/// and passing it the action's arguments wholesale would hand it data it did not ask for.
/// `None` when the action has no preview.
pub fn preview_args(
    action: &ActionFile,
    call_args: &Map<String, Value>,
) -> Option<Result<Map<String, Value>, TemplateError>> {
    let preview = action.approval.preview.as_ref()?;
    let prior = BTreeMap::new();
    let context = Interpolation { step: "preview", call_args, prior: &prior };
    Some(interpolate_table(&preview.args, &context))
}

fn interpolate_table(
    table: &Map<String, Value>,
    context: &Interpolation<'_>,
) -> Result<Map<String, Value>, TemplateError> {
    let mut effective = Map::new();
    for (key, value) in table {
        if let Resolved::Value(value) = context.interpolate(value)? {
            effective.insert(key.clone(), value);
        }
    }
    Ok(effective)
}

fn overlay(
    action: &ActionFile,
    call_args: &Map<String, Value>,
    fixed: &Map<String, Value>,
    context: &Interpolation<'_>,
) -> Result<Map<String, Value>, TemplateError> {
    // Only declared inputs pass through; undeclared ones were already refused as invalid_args.
    let mut effective: Map<String, Value> = action
        .inputs
        .iter()
        .filter_map(|input| call_args.get(&input.name).map(|value| (input.name.clone(), value.clone())))
        .collect();
    for (key, value) in fixed {
        if let Resolved::Value(value) = context.interpolate(value)? {
            effective.insert(key.clone(), value);
        }
    }
    Ok(effective)
}

enum Resolved {
    Value(Value),
    /// An optional input that was not passed: drop the key or array element.
    Omitted,
}

struct Interpolation<'a> {
    step: &'a str,
    call_args: &'a Map<String, Value>,
    prior: &'a BTreeMap<String, Value>,
}

impl Interpolation<'_> {
    fn interpolate(&self, value: &Value) -> Result<Resolved, TemplateError> {
        Ok(match value {
            Value::String(template) => return self.interpolate_string(template),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    if let Resolved::Value(value) = self.interpolate(item)? {
                        out.push(value);
                    }
                }
                Resolved::Value(Value::Array(out))
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, item) in map {
                    if let Resolved::Value(value) = self.interpolate(item)? {
                        out.insert(key.clone(), value);
                    }
                }
                Resolved::Value(Value::Object(out))
            }
            other => Resolved::Value(other.clone()),
        })
    }

    fn interpolate_string(&self, template: &str) -> Result<Resolved, TemplateError> {
        let parts =
            parse_template(template).map_err(|error| TemplateError::Syntax { step: self.step.to_string(), error })?;
        if let [TemplatePart::Reference(reference)] = parts.as_slice() {
            return Ok(match self.resolve(reference)? {
                Some(value) => Resolved::Value(value.clone()),
                None => Resolved::Omitted,
            });
        }
        let mut out = String::new();
        for part in &parts {
            match part {
                TemplatePart::Text(text) => out.push_str(text),
                TemplatePart::Reference(reference) => match self.resolve(reference)? {
                    None => {}
                    Some(Value::String(s)) => out.push_str(s),
                    // Keys sorted, whatever order the value's object kept (serde_json's
                    // `preserve_order` is on in the workspace: Cedar turns it on).
                    Some(other) => out.push_str(&crate::audit::canonical_json(other)),
                },
            }
        }
        Ok(Resolved::Value(Value::String(out)))
    }

    /// `Ok(None)` only for an argument that was not passed.
    fn resolve<'v>(&'v self, reference: &Reference) -> Result<Option<&'v Value>, TemplateError> {
        match &reference.source {
            ReferenceSource::Args(input) => {
                let Some(value) = self.call_args.get(input) else {
                    return Ok(None);
                };
                walk(value, &reference.path).map(Some).ok_or_else(|| TemplateError::MissingArgPath {
                    step: self.step.to_string(),
                    reference: reference.to_string(),
                    input: input.clone(),
                    path: reference.path.join("."),
                })
            }
            ReferenceSource::Step(referenced) => {
                let output = self.prior.get(referenced).ok_or_else(|| TemplateError::MissingStepOutput {
                    step: self.step.to_string(),
                    reference: reference.to_string(),
                    referenced: referenced.clone(),
                })?;
                walk(output, &reference.path).map(Some).ok_or_else(|| TemplateError::MissingPath {
                    step: self.step.to_string(),
                    reference: reference.to_string(),
                    referenced: referenced.clone(),
                    path: reference.path.join("."),
                })
            }
        }
    }
}

/// Follows object keys and array indices.
pub fn walk<'v, S: AsRef<str>>(value: &'v Value, path: &[S]) -> Option<&'v Value> {
    path.iter().try_fold(value, |current, segment| {
        let segment = segment.as_ref();
        match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|index| items.get(index)),
            _ => None,
        }
    })
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
