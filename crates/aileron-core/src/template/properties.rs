//! Property test of the overlay rule: whatever the agent passes, a value the action author fixed
//! in a step reaches the op exactly as written, and no argument or output is interpolated twice.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::*;
use crate::action::parse_action;

/// The inputs the generated action declares (all optional, so any subset may be passed).
const DECLARED: [&str; 4] = ["owner", "repo", "title", "count"];
/// Call arguments the action does not declare; `query` is also a step input key.
const UNDECLARED: [&str; 2] = ["sneaky", "query"];
/// The keys of the second step's `[execute.inputs]`: declared inputs and others.
const STEP_KEYS: [&str; 6] = ["owner", "repo", "title", "count", "query", "body"];
/// The keys of the first step's output.
const OUTPUT_KEYS: [&str; 3] = ["a", "b", "c"];

/// Text an agent or an upstream may send: mostly our own template syntax (references that would
/// resolve if interpolated again, escapes, unterminated openings), other engines' syntax, braces,
/// quotes, controls, bidi overrides and astral characters; sometimes any string at all.
fn hostile_text() -> impl Strategy<Value = String> {
    let reference = prop::sample::select(vec!["${args.owner}", "${args.count}", "${args.title}", "${first.a}"]);
    let other = prop::sample::select(vec![
        "$${args.repo}",
        "{{args.title}}",
        "{{ args.owner }}",
        "${",
        "$",
        "$$",
        "{",
        "}",
        "\"",
        "'",
        "\\",
        "\n",
        "\u{0}",
        "\u{202e}",
        "é",
        "🦀",
        "x",
        " ",
    ]);
    let token = prop_oneof![2 => reference, 3 => other];
    prop_oneof![
        3 => prop::collection::vec(token, 1..5).prop_map(|tokens| tokens.concat()),
        1 => any::<String>(),
    ]
}

/// Any JSON value, with hostile strings as keys and leaves; most often a string.
fn hostile_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1000i32..1000).prop_map(|quarter| Value::from(f64::from(quarter) / 4.0)),
        hostile_text().prop_map(Value::from),
    ];
    let nested = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(hostile_text(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    });
    prop_oneof![2 => hostile_text().prop_map(Value::from), 1 => nested]
}

/// A piece of an author-written string, which the parser must reproduce exactly.
#[derive(Debug, Clone)]
enum Piece {
    /// Any text without `$`.
    Plain(String),
    /// `$${args.<name>}`: a literal `${args.<name>}`.
    Escaped(&'static str),
    /// `$<digits>`: a dollar that starts no reference.
    Price(u16),
}

impl Piece {
    fn written(&self) -> String {
        match self {
            Piece::Plain(text) => text.clone(),
            Piece::Escaped(name) => format!("$${{args.{name}}}"),
            Piece::Price(amount) => format!("${amount}"),
        }
    }

    fn rendered(&self) -> String {
        match self {
            Piece::Plain(text) => text.clone(),
            Piece::Escaped(name) => format!("${{args.{name}}}"),
            Piece::Price(amount) => format!("${amount}"),
        }
    }
}

fn pieces() -> impl Strategy<Value = Vec<Piece>> {
    let plain = prop_oneof![
        prop::sample::select(vec!["{{args.owner}}", "{", "}", "\"", "'", "\\", "\n", "é", "🦀", "\u{202e}", "x", " "])
            .prop_map(|text| Piece::Plain(text.to_string())),
        any::<String>().prop_map(|text| Piece::Plain(text.replace('$', ""))),
    ];
    let piece = prop_oneof![
        4 => plain,
        1 => prop::sample::select(vec!["owner", "count", "sneaky"]).prop_map(Piece::Escaped),
        1 => any::<u16>().prop_map(Piece::Price),
    ];
    prop::collection::vec(piece, 0..4)
}

fn written(pieces: &[Piece]) -> String {
    pieces.iter().map(Piece::written).collect()
}

fn rendered(pieces: &[Piece]) -> String {
    pieces.iter().map(Piece::rendered).collect()
}

/// A value the author fixed: no reference, only literals (TOML has no null).
#[derive(Debug, Clone)]
enum Literal {
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Text(Vec<Piece>),
    Array(Vec<Literal>),
    Table(Vec<(&'static str, Literal)>),
}

impl Literal {
    fn to_json(&self, text: fn(&[Piece]) -> String) -> Value {
        match self {
            Literal::Integer(n) => Value::from(*n),
            Literal::Float(x) => Value::from(*x),
            Literal::Boolean(b) => Value::from(*b),
            Literal::Text(pieces) => Value::from(text(pieces)),
            Literal::Array(items) => Value::Array(items.iter().map(|item| item.to_json(text)).collect()),
            Literal::Table(entries) => {
                Value::Object(entries.iter().map(|(key, item)| (key.to_string(), item.to_json(text))).collect())
            }
        }
    }
}

fn literal() -> impl Strategy<Value = Literal> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Literal::Integer),
        (-1000i32..1000).prop_map(|quarter| Literal::Float(f64::from(quarter) / 4.0)),
        any::<bool>().prop_map(Literal::Boolean),
        pieces().prop_map(Literal::Text),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Literal::Array),
            prop::collection::btree_map(prop::sample::select(vec!["a", "owner", "x_1"]), inner, 0..3)
                .prop_map(|entries| Literal::Table(entries.into_iter().collect())),
        ]
    })
}

/// One `[execute.inputs]` value of the second step.
#[derive(Debug, Clone)]
enum StepInput {
    /// Author-fixed: no reference at all.
    Fixed(Literal),
    /// `<before>${args.<input>}<after>`; a whole reference when both are empty.
    Argument { before: Vec<Piece>, input: &'static str, after: Vec<Piece> },
    /// `<before>${first.<key>}<after>`.
    Output { before: Vec<Piece>, key: &'static str, after: Vec<Piece> },
}

impl StepInput {
    fn written(&self) -> Value {
        match self {
            StepInput::Fixed(literal) => literal.to_json(written),
            StepInput::Argument { before, input, after } => {
                Value::from(format!("{}${{args.{input}}}{}", written(before), written(after)))
            }
            StepInput::Output { before, key, after } => {
                Value::from(format!("{}${{first.{key}}}{}", written(before), written(after)))
            }
        }
    }

    /// The model: the value the op must receive, `None` when the key is dropped (a whole reference
    /// to an argument that was not passed).
    fn rendered(&self, call_args: &Map<String, Value>, first: &Map<String, Value>) -> Option<Value> {
        let (before, referenced, after) = match self {
            StepInput::Fixed(literal) => return Some(literal.to_json(rendered)),
            StepInput::Argument { before, input, after } => (before, call_args.get(*input), after),
            StepInput::Output { before, key, after } => (before, first.get(*key), after),
        };
        if written(before).is_empty() && written(after).is_empty() {
            return referenced.cloned();
        }
        let middle = match referenced {
            None => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        };
        Some(Value::from(format!("{}{middle}{}", rendered(before), rendered(after))))
    }
}

fn step_input() -> impl Strategy<Value = StepInput> {
    prop_oneof![
        2 => literal().prop_map(StepInput::Fixed),
        1 => (pieces(), prop::sample::select(DECLARED.to_vec()), pieces())
            .prop_map(|(before, input, after)| StepInput::Argument { before, input, after }),
        1 => (pieces(), prop::sample::select(OUTPUT_KEYS.to_vec()), pieces())
            .prop_map(|(before, key, after)| StepInput::Output { before, key, after }),
    ]
}

/// The action as an author would write it: the step inputs go through the real TOML parser.
fn action_text(step_inputs: &[(&'static str, StepInput)]) -> String {
    let mut text = String::from(
        "+++\nname = \"t\"\nversion = \"1.0.0\"\n[[requires.connectors]]\nname = \"github://acme/c\"\n\
         version = \"1.0.0\"\nhash = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\n\
         capabilities = [\"op\"]\n[match]\nintent = \"property\"\n",
    );
    for input in DECLARED {
        let kind = if input == "count" { "integer" } else { "string" };
        text.push_str(&format!(
            "[[inputs]]\nname = \"{input}\"\ntype = \"{kind}\"\nrequired = false\ndescription = \"d\"\n"
        ));
    }
    text.push_str("[[execute]]\nid = \"first\"\nconnector = \"github://acme/c\"\nop = \"op\"\n");
    text.push_str("[[execute]]\nid = \"second\"\nconnector = \"github://acme/c\"\nop = \"op\"\n[execute.inputs]\n");
    for (key, input) in step_inputs {
        let value = toml::Value::try_from(input.written()).expect("no null in an author-written value");
        text.push_str(&format!("{key} = {value}\n"));
    }
    text.push_str("+++\n");
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Invariant: the effective op arguments of a step keep every author-fixed input exactly as
    /// written, whatever the call passes under the same key, and a value that came from an argument
    /// or an earlier step's output is inserted as data, never interpolated again.
    /// Model: the declared arguments that were passed, overlaid by each step input rendered by hand
    /// (literal pieces unescaped, a whole reference the referenced value, a reference inside text
    /// the value's raw string or compact JSON). A whole reference to an argument that was not
    /// passed drops its key, so a call argument of that name stays: such a key is not author-fixed.
    #[test]
    fn author_fixed_inputs_survive_any_call_arguments(
        step_inputs in prop::collection::btree_map(prop::sample::select(STEP_KEYS.to_vec()), step_input(), 0..5),
        call_args in prop::collection::btree_map(
            prop::sample::select([DECLARED.as_slice(), UNDECLARED.as_slice()].concat()),
            hostile_json(),
            0..6,
        ),
        first in prop::collection::btree_map(prop::sample::select(OUTPUT_KEYS.to_vec()), hostile_json(), 3),
    ) {
        let step_inputs: Vec<(&'static str, StepInput)> = step_inputs.into_iter().collect();
        let call_args: Map<String, Value> = call_args.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let first: Map<String, Value> = first.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let text = action_text(&step_inputs);
        let action = parse_action(&text, "t.md").unwrap_or_else(|e| panic!("{e}\n{text}"));
        let prior = BTreeMap::from([("first".to_string(), Value::Object(first.clone()))]);

        let effective = step_args(&action, 1, &call_args, &prior).unwrap_or_else(|e| panic!("{e}\n{text}"));

        for (key, input) in &step_inputs {
            if let StepInput::Fixed(literal) = input {
                prop_assert_eq!(effective.get(*key), Some(&literal.to_json(rendered)), "author-fixed `{}`", key);
            }
        }
        let mut expected: Map<String, Value> = DECLARED
            .iter()
            .filter_map(|input| call_args.get(*input).map(|value| (input.to_string(), value.clone())))
            .collect();
        for (key, input) in &step_inputs {
            if let Some(value) = input.rendered(&call_args, &first) {
                expected.insert(key.to_string(), value);
            }
        }
        prop_assert_eq!(effective, expected);
    }
}
