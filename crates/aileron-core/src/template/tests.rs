//! Table tests for template parsing, interpolation and the effective op arguments of a step.

use serde_json::{Value, json};

use super::*;
use crate::action::fixtures::{CREATE_ISSUE, LIST_ISSUES};
use crate::action::parse_action;

fn text(s: &str) -> TemplatePart {
    TemplatePart::Text(s.to_string())
}

fn args_ref(input: &str, path: &[&str]) -> TemplatePart {
    TemplatePart::Reference(Reference {
        source: ReferenceSource::Args(input.to_string()),
        path: path.iter().map(|s| s.to_string()).collect(),
    })
}

fn step_ref(step: &str, path: &[&str]) -> TemplatePart {
    TemplatePart::Reference(Reference {
        source: ReferenceSource::Step(step.to_string()),
        path: path.iter().map(|s| s.to_string()).collect(),
    })
}

#[test]
fn template_strings_split_into_text_and_references() {
    let cases: Vec<(&str, Vec<TemplatePart>)> = vec![
        ("", vec![]),
        ("plain", vec![text("plain")]),
        ("${args.owner}", vec![args_ref("owner", &[])]),
        ("${args.filter.state}", vec![args_ref("filter", &["state"])]),
        ("${repo.full_name}", vec![step_ref("repo", &["full_name"])]),
        ("${repo}", vec![step_ref("repo", &[])]),
        ("${issues.items.0.title}", vec![step_ref("issues", &["items", "0", "title"])]),
        ("repo:${repo.full_name} is:issue", vec![text("repo:"), step_ref("repo", &["full_name"]), text(" is:issue")]),
        ("${args.a}${args.b}", vec![args_ref("a", &[]), args_ref("b", &[])]),
        ("$${args.owner}", vec![text("${args.owner}")]),
        ("cost: $5 and $${x} and ${args.a}", vec![text("cost: $5 and ${x} and "), args_ref("a", &[])]),
        ("$", vec![text("$")]),
        ("$$", vec![text("$$")]),
        ("a } b", vec![text("a } b")]),
    ];
    for (template, expected) in cases {
        assert_eq!(parse_template(template), Ok(expected), "{template}");
    }
    let bad = [
        (
            "${args.owner",
            TemplateSyntaxError::Unterminated("${args.owner".into()),
            "`${args.owner` is never closed with `}` (write `$${` for a literal `${`)",
        ),
        (
            "x ${",
            TemplateSyntaxError::Unterminated("${".into()),
            "`${` is never closed with `}` (write `$${` for a literal `${`)",
        ),
        ("${}", TemplateSyntaxError::Empty, "`${}` is an empty reference"),
        ("${args}", TemplateSyntaxError::ArgsWithoutInput, "`${args}` must name an input: `${args.<input>}`"),
        ("${args..x}", TemplateSyntaxError::EmptySegment("args..x".into()), "`${args..x}` has an empty path segment"),
        ("${repo.}", TemplateSyntaxError::EmptySegment("repo.".into()), "`${repo.}` has an empty path segment"),
        ("${.repo}", TemplateSyntaxError::EmptySegment(".repo".into()), "`${.repo}` has an empty path segment"),
        (
            "${args.a b}",
            TemplateSyntaxError::InvalidCharacter("args.a b".into()),
            "`${args.a b}` may not contain whitespace, `{`, `$` or quotes",
        ),
        (
            "${a${b}",
            TemplateSyntaxError::InvalidCharacter("a${b".into()),
            "`${a${b}` may not contain whitespace, `{`, `$` or quotes",
        ),
    ];
    for (template, error, message) in bad {
        assert_eq!(parse_template(template), Err(error.clone()), "{template}");
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn references_display_as_written() {
    for written in ["${args.owner}", "${args.filter.state}", "${repo}", "${issues.items.0.title}"] {
        let parts = parse_template(written).unwrap();
        let [TemplatePart::Reference(reference)] = parts.as_slice() else { panic!("{written}") };
        assert_eq!(reference.to_string(), written);
    }
}

#[test]
fn walk_follows_object_keys_and_array_indices() {
    let value = json!({"a": {"b": [10, {"c": "deep"}], "0": "key zero"}, "list": [[1, 2], [3]]});
    let cases: [(&[&str], Option<Value>); 8] = [
        (&[], Some(value.clone())),
        (&["a", "b", "1", "c"], Some(json!("deep"))),
        (&["a", "b", "0"], Some(json!(10))),
        (&["a", "0"], Some(json!("key zero"))),
        (&["list", "1", "0"], Some(json!(3))),
        (&["a", "b", "2"], None),
        (&["a", "b", "x"], None),
        (&["a", "b", "0", "c"], None),
    ];
    for (path, expected) in cases {
        assert_eq!(walk(&value, path).cloned(), expected, "{path:?}");
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn prior(value: Value) -> BTreeMap<String, Value> {
    object(value).into_iter().collect()
}

#[test]
fn list_issues_steps_get_their_effective_args() {
    let action = parse_action(LIST_ISSUES, "list-issues.md").unwrap();
    let repo_output = json!({"full_name": "acme/widgets", "private": false});
    // (call args, prior outputs, step index, expected effective args)
    let cases = [
        (json!({"owner": "acme", "repo": "widgets"}), json!({}), 0, json!({"owner": "acme", "repo": "widgets"})),
        (
            json!({"owner": "acme", "repo": "widgets", "limit": 25, "labels": ["bug", "p1"], "state": "closed"}),
            json!({ "repo": repo_output }),
            1,
            json!({
                "owner": "acme", "repo": "widgets", "limit": 25, "labels": ["bug", "p1"],
                "repository": "acme/widgets",
                "state": "closed",
                "per_page": 25,
                "query": "repo:acme/widgets is:issue ${not_a_ref}",
                "sort": "updated",
            }),
        ),
        // Optional inputs not passed: whole-reference values disappear.
        (
            json!({"owner": "acme", "repo": "widgets"}),
            json!({ "repo": repo_output }),
            1,
            json!({
                "owner": "acme", "repo": "widgets",
                "repository": "acme/widgets",
                "query": "repo:acme/widgets is:issue ${not_a_ref}",
                "sort": "updated",
            }),
        ),
    ];
    for (call_args, prior_outputs, index, expected) in cases {
        let effective = step_args(&action, index, &object(call_args.clone()), &prior(prior_outputs)).unwrap();
        assert_eq!(Value::Object(effective), expected, "{call_args}");
    }
}

/// An action whose second step has the given `[execute.inputs]` body.
fn action_with_step_inputs(inputs: &str) -> ActionFile {
    let text = format!(
        r#"+++
name = "t"
version = "1.0.0"
[[requires.connectors]]
name = "github://acme/c"
version = "1.0.0"
hash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
capabilities = ["op"]
[match]
intent = "test interpolation"
[[inputs]]
name = "owner"
type = "string"
description = "owner"
[[inputs]]
name = "count"
type = "integer"
required = false
description = "count"
[[inputs]]
name = "note"
type = "string"
required = false
description = "note"
[[inputs]]
name = "filter"
type = "object"
required = false
description = "filter"
[[execute]]
id = "first"
connector = "github://acme/c"
op = "op"
[[execute]]
id = "second"
connector = "github://acme/c"
op = "op"
[execute.inputs]
{inputs}
+++
"#
    );
    parse_action(&text, "t.md").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn interpolation_rules() {
    let first = json!({
        "full_name": "acme/widgets",
        "stars": 42,
        "private": false,
        "owner": {"login": "acme", "id": 7},
        "topics": ["rust", "cli"],
        "license": null,
    });
    let prior_outputs = prior(json!({ "first": first }));
    // (step inputs, call args, expected effective args)
    let cases = [
        // A value fixed by the author wins over the call argument of the same name.
        (r#"owner = "aileron""#, json!({"owner": "mallory"}), json!({"owner": "aileron"})),
        // Whole references keep their JSON type.
        (r#"n = "${args.count}""#, json!({"owner": "o", "count": 3}), json!({"owner": "o", "count": 3, "n": 3})),
        (r#"s = "${first.stars}""#, json!({"owner": "o"}), json!({"owner": "o", "s": 42})),
        (r#"p = "${first.private}""#, json!({"owner": "o"}), json!({"owner": "o", "p": false})),
        (r#"o = "${first.owner}""#, json!({"owner": "o"}), json!({"owner": "o", "o": {"login": "acme", "id": 7}})),
        (r#"l = "${first.license}""#, json!({"owner": "o"}), json!({"owner": "o", "l": null})),
        (r#"all = "${first}""#, json!({"owner": "o"}), json!({"owner": "o", "all": first.clone()})),
        (r#"t = "${first.topics.1}""#, json!({"owner": "o"}), json!({"owner": "o", "t": "cli"})),
        (r#"login = "${first.owner.login}""#, json!({"owner": "o"}), json!({"owner": "o", "login": "acme"})),
        (
            r#"state = "${args.filter.state}""#,
            json!({"owner": "o", "filter": {"state": "open"}}),
            json!({"owner": "o", "filter": {"state": "open"}, "state": "open"}),
        ),
        // Inside text: strings raw, everything else as compact JSON.
        (
            r#"msg = "${first.full_name} has ${first.stars} stars""#,
            json!({"owner": "o"}),
            json!({"owner": "o", "msg": "acme/widgets has 42 stars"}),
        ),
        (
            r#"msg = "owner=${first.owner};topics=${first.topics};private=${first.private};license=${first.license}""#,
            json!({"owner": "o"}),
            json!({
                "owner": "o",
                "msg": r#"owner={"id":7,"login":"acme"};topics=["rust","cli"];private=false;license=null"#
            }),
        ),
        // Optional input not passed: omitted as a whole value, empty inside text.
        (r#"n = "${args.count}""#, json!({"owner": "o"}), json!({"owner": "o"})),
        (r#"msg = "note: ${args.note}.""#, json!({"owner": "o"}), json!({"owner": "o", "msg": "note: ."})),
        (
            r#"msg = "note: ${args.note}.""#,
            json!({"owner": "o", "note": "hi"}),
            json!({"owner": "o", "note": "hi", "msg": "note: hi."}),
        ),
        // Escapes.
        (r#"lit = "$${args.owner}""#, json!({"owner": "o"}), json!({"owner": "o", "lit": "${args.owner}"})),
        (r#"price = "$5""#, json!({"owner": "o"}), json!({"owner": "o", "price": "$5"})),
        // Nested tables and arrays are interpolated recursively; omitted values leave no hole.
        (
            concat!(
                r#"body = { title = "${first.full_name}", meta = { stars = "${first.stars}", n = "${args.count}" }, "#,
                r#"tags = ["${first.topics.0}", "${args.note}", "fixed"] }"#
            ),
            json!({"owner": "o"}),
            json!({"owner": "o", "body": {"title": "acme/widgets", "meta": {"stars": 42}, "tags": ["rust", "fixed"]}}),
        ),
        // Non-string literals pass through unchanged.
        (
            r#"x = 5
y = 1.5
z = true
w = [1, "two"]"#,
            json!({"owner": "o"}),
            json!({"owner": "o", "x": 5, "y": 1.5, "z": true, "w": [1, "two"]}),
        ),
        // Undeclared call arguments never pass through (they are refused earlier as invalid_args).
        (r#"x = 1"#, json!({"owner": "o", "sneaky": true}), json!({"owner": "o", "x": 1})),
    ];
    for (inputs, call_args, expected) in cases {
        let action = action_with_step_inputs(inputs);
        let effective =
            step_args(&action, 1, &object(call_args), &prior_outputs).unwrap_or_else(|e| panic!("{inputs}: {e}"));
        assert_eq!(Value::Object(effective), expected, "{inputs}");
    }
}

#[test]
fn interpolation_errors_name_the_step_and_path() {
    let prior_outputs = prior(json!({ "first": {"full_name": "acme/widgets", "topics": ["rust"], "stars": 42} }));
    let cases = [
        (
            r#"x = "${first.owner.login}""#,
            json!({"owner": "o"}),
            TemplateError::MissingPath {
                step: "second".into(),
                reference: "${first.owner.login}".into(),
                referenced: "first".into(),
                path: "owner.login".into(),
            },
            "step `second`: ${first.owner.login}: the output of step `first` has no value at `owner.login`",
        ),
        (
            r#"x = "topic ${first.topics.3}""#,
            json!({"owner": "o"}),
            TemplateError::MissingPath {
                step: "second".into(),
                reference: "${first.topics.3}".into(),
                referenced: "first".into(),
                path: "topics.3".into(),
            },
            "step `second`: ${first.topics.3}: the output of step `first` has no value at `topics.3`",
        ),
        (
            r#"x = "${first.stars.value}""#,
            json!({"owner": "o"}),
            TemplateError::MissingPath {
                step: "second".into(),
                reference: "${first.stars.value}".into(),
                referenced: "first".into(),
                path: "stars.value".into(),
            },
            "step `second`: ${first.stars.value}: the output of step `first` has no value at `stars.value`",
        ),
        (
            r#"x = "${args.filter.state}""#,
            json!({"owner": "o", "filter": {"labels": []}}),
            TemplateError::MissingArgPath {
                step: "second".into(),
                reference: "${args.filter.state}".into(),
                input: "filter".into(),
                path: "state".into(),
            },
            "step `second`: ${args.filter.state}: argument `filter` has no value at `state`",
        ),
    ];
    for (inputs, call_args, error, message) in cases {
        let action = action_with_step_inputs(inputs);
        let result = step_args(&action, 1, &object(call_args), &prior_outputs);
        assert_eq!(result, Err(error.clone()), "{inputs}");
        assert_eq!(error.to_string(), message);
        let failure = error.to_failure();
        assert_eq!(failure.class, crate::failure::FailureClass::ConnectorRuntimeError);
        assert_eq!(failure.message, message);
    }
    let action = action_with_step_inputs(r#"x = "${first.full_name}""#);
    let missing = step_args(&action, 1, &object(json!({"owner": "o"})), &BTreeMap::new()).unwrap_err();
    assert_eq!(
        missing.to_string(),
        "step `second`: ${first.full_name} needs the output of step `first`, which has not run"
    );
    let out_of_range = step_args(&action, 2, &Map::new(), &BTreeMap::new()).unwrap_err();
    assert_eq!(out_of_range, TemplateError::NoSuchStep { index: 2, count: 2 });
    assert_eq!(out_of_range.to_string(), "the action has no step 2 (it has 2)");
}

#[test]
fn preview_args_are_exactly_the_interpolated_preview_table() {
    let gated = parse_action(CREATE_ISSUE, "create-issue.md").unwrap();
    let call_args = object(json!({"owner": "acme", "repo": "widgets", "title": "Crash on start"}));
    let preview = preview_args(&gated, &call_args).unwrap().unwrap();
    assert_eq!(
        Value::Object(preview),
        json!({"owner": "acme", "repo": "widgets", "include": ["visibility"]}),
        "the call's other arguments (title) are not passed to the preview op"
    );
    let ungated = parse_action(LIST_ISSUES, "list-issues.md").unwrap();
    assert!(preview_args(&ungated, &call_args).is_none());
}
