//! Table tests for action files: the realistic fixtures, every §2 rule with its exact message and
//! whole-file line, the derived MCP tool, and call-argument validation.

use serde_json::{Value, json};

use super::fixtures::{CREATE_ISSUE, LIST_ISSUES};
use super::*;
use crate::identity::Fqn;

fn parse_ok(text: &str, file: &str) -> ActionFile {
    parse_action(text, file).unwrap_or_else(|e| panic!("{e}"))
}

/// 1-based line of the first line containing `needle`, found independently of the parser.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|line| line.contains(needle)).unwrap_or_else(|| panic!("{needle:?} not in text")) + 1
}

/// `text` with the first occurrence of `from` replaced (which must exist).
fn edit(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in text");
    text.replacen(from, to, 1)
}

#[test]
fn list_issues_fixture_parses_completely() {
    let action = parse_ok(LIST_ISSUES, "list-issues.md");
    assert_eq!(action.name, "list-issues");
    assert_eq!(action.version.to_string(), "1.0.0");
    assert_eq!(action.source.as_ref().unwrap().to_string(), "github://aileron/actions/list-issues@1.0.0");
    assert_eq!(action.tool_name(), "list_issues");
    assert_eq!(action.title(), Some("List GitHub issues"));
    assert_eq!(
        action.description(),
        "Lists the issues of a GitHub repository, most recently updated first. Use it when the user asks\nwhat is \
         open, what needs triage, or which issues carry a label."
    );
    assert_eq!(action.intent, "list open issues in a GitHub repository");
    assert!(!action.requires_approval());
    assert_eq!(action.approval, Approval::default());
    assert_eq!(
        *action.sha256(),
        ContentHash::of_bytes(LIST_ISSUES.as_bytes()),
        "the hash is of the file's exact bytes"
    );

    assert_eq!(action.requires.len(), 1);
    let github = &action.requires[0];
    assert_eq!(github.reference().to_string(), "github://aileron/github@1.2.0");
    assert_eq!(github.hash.hex(), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
    assert_eq!(github.subset().to_strings(), ["get_repo", "list_issues", "oauth2", "network:api.github.com:443"]);
    assert_eq!(action.required_connector(&Fqn::parse("github://aileron/github").unwrap()), Some(github));

    let names: Vec<(&str, InputType, bool)> =
        action.inputs.iter().map(|i| (i.name.as_str(), i.kind, i.required)).collect();
    assert_eq!(
        names,
        [
            ("owner", InputType::String, true),
            ("repo", InputType::String, true),
            ("state", InputType::String, false),
            ("labels", InputType::Array, false),
            ("limit", InputType::Integer, false),
        ]
    );
    assert_eq!(action.input("owner").unwrap().label.as_deref(), Some("Owner"));
    assert_eq!(action.input("labels").unwrap().items_type, Some(InputType::String));

    let steps: Vec<(&str, &str, Option<bool>, Option<u32>)> =
        action.steps.iter().map(|s| (s.id.as_str(), s.op.as_str(), s.idempotent, s.timeout_seconds)).collect();
    assert_eq!(steps, [("repo", "get_repo", None, None), ("issues", "list_issues", Some(true), Some(60))]);
    assert_eq!(action.steps[0].connector, github.name);
    assert_eq!(
        Value::Object(action.step("issues").unwrap().inputs.clone()),
        json!({
            "repository": "${repo.full_name}",
            "state": "${args.state}",
            "per_page": "${args.limit}",
            "labels": "${args.labels}",
            "query": "repo:${repo.full_name} is:issue $${not_a_ref}",
            "sort": "updated",
        })
    );
    assert!(action.steps[0].is_idempotent(true) && !action.steps[0].is_idempotent(false));
    assert!(action.steps[1].is_idempotent(false));
}

#[test]
fn list_issues_input_schema() {
    let action = parse_ok(LIST_ISSUES, "list-issues.md");
    assert_eq!(
        action.input_schema(),
        json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string", "description": "User or organisation that owns the repository"},
                "repo": {"type": "string", "description": "Repository name"},
                "state": {"type": "string", "description": "open, closed or all (default open)"},
                "labels": {
                    "type": "array",
                    "description": "Only issues that carry all of these labels",
                    "items": {"type": "string"}
                },
                "limit": {"type": "integer", "description": "Maximum number of issues to return"}
            },
            "required": ["owner", "repo"],
            "additionalProperties": false
        })
    );
    // The required list keeps declaration order, not alphabetical order.
    let reordered = edit(&edit(LIST_ISSUES, "name = \"owner\"", "name = \"zeta\""), "${args.owner}", "${args.zeta}");
    let schema = parse_ok(&reordered, "list-issues.md").input_schema();
    assert_eq!(schema["required"], json!(["zeta", "repo"]));
}

#[test]
fn create_issue_fixture_is_gated_with_an_ordered_preview() {
    let action = parse_ok(CREATE_ISSUE, "create-issue.md");
    assert!(action.requires_approval());
    assert_eq!(action.tool_name(), "create_issue");
    assert_eq!(action.title(), None);
    assert_eq!(action.description(), "Files a new issue in a GitHub repository on the user's behalf.");
    assert!(action.input("body").unwrap().multiline);
    assert!(!action.input("title").unwrap().multiline);
    assert_eq!(action.steps[0].idempotent, Some(false));
    assert_eq!(action.source, None);
    let preview = action.approval.preview.as_ref().unwrap();
    assert_eq!(preview.op, "get_repo");
    assert_eq!(
        Value::Object(preview.args.clone()),
        json!({"owner": "${args.owner}", "repo": "${args.repo}", "include": ["visibility"]})
    );
    let render: Vec<(&str, &str)> = preview.render.iter().map(|(l, p)| (l.as_str(), p.as_str())).collect();
    assert_eq!(
        render,
        [
            ("Repository", "full_name"),
            ("Visibility", "visibility"),
            ("Open issues", "open_issues_count"),
            ("About", "description"),
        ]
    );
    assert_eq!(preview.multiline, ["About"]);
}

#[test]
fn tool_names_map_dashes_and_dots() {
    let cases =
        [("list-issues", "list_issues"), ("gh.issues.list", "gh_issues_list"), ("a_b-c.d", "a_b_c_d"), ("x1", "x1")];
    for (name, tool) in cases {
        let text = edit(LIST_ISSUES, "name = \"list-issues\"", &format!("name = \"{name}\""));
        let action = parse_ok(&text, &format!("{name}.md"));
        assert_eq!(action.tool_name(), tool);
        // The comparison an install makes against every installed action agrees with it.
        assert!(action.has_tool_name(tool), "{name}");
        for other in ["list_issue", "list_issues_", "list-issues", "gh_issues_lisT", "a_b_c_", "x2", ""] {
            assert_eq!(action.has_tool_name(other), other == tool, "{name} against {other}");
        }
    }
}

#[test]
fn descriptions_come_from_the_body_or_the_intent() {
    let intent = "list open issues in a GitHub repository";
    let cases: [(&str, Option<&str>, &str); 10] = [
        ("# Title\n\nBody text.\n", Some("Title"), "Body text."),
        ("\n\n# Title\nBody\n\nMore.\n", Some("Title"), "Body\n\nMore."),
        ("# Only a title\n", Some("Only a title"), intent),
        ("", None, intent),
        ("\n   \n", None, intent),
        ("No title here.\n# Not leading\n", None, "No title here.\n# Not leading"),
        ("## Subtitle\nText\n", None, "## Subtitle\nText"),
        ("#hashtag is not a heading\n", None, "#hashtag is not a heading"),
        ("#\nText after an empty heading\n", None, "Text after an empty heading"),
        ("# Title\r\n\r\nWindows body\r\n", Some("Title"), "Windows body"),
    ];
    for (body, title, description) in cases {
        let text = format!("{}{body}", &LIST_ISSUES[..LIST_ISSUES.find("+++\n# List").unwrap() + 4]);
        let action = parse_ok(&text, "list-issues.md");
        assert_eq!((action.title(), action.description()), (title, description), "{body:?}");
    }
}

#[test]
fn frontmatter_fences() {
    let frontmatter = &LIST_ISSUES[4..LIST_ISSUES.find("+++\n# List").unwrap()];
    let crlf = LIST_ISSUES.replace('\n', "\r\n");
    let parsed = parse_ok(&crlf, "list-issues.md");
    assert_eq!(parsed.title(), Some("List GitHub issues"));
    assert_eq!(*parsed.sha256(), ContentHash::of_bytes(crlf.as_bytes()));
    // A `+++` later in the body is body text.
    let with_rule = format!("+++\n{frontmatter}+++\nBody\n+++\nmore\n");
    assert_eq!(parse_ok(&with_rule, "list-issues.md").description(), "Body\n+++\nmore");
    // The closing fence may be the last line without a newline.
    let no_body = format!("+++\n{frontmatter}+++");
    assert_eq!(parse_ok(&no_body, "list-issues.md").description(), "list open issues in a GitHub repository");

    let first = "the first line must be exactly `+++` (the start of the TOML frontmatter)";
    let unclosed = "the frontmatter opened by `+++` on line 1 is never closed";
    let cases = [
        (String::new(), first),
        (format!("---\n{frontmatter}---\n"), first),
        (format!("+++ \n{frontmatter}+++\n"), first),
        // Two byte order marks are one too many (one is accepted: `a_leading_byte_order_mark_is_accepted`).
        (format!("\u{feff}\u{feff}+++\n{frontmatter}+++\n"), first),
        (format!("\n+++\n{frontmatter}+++\n"), first),
        (format!("# Title\n+++\n{frontmatter}+++\n"), first),
        (format!("+++\n{frontmatter}"), unclosed),
        (format!("+++\n{frontmatter} +++\nbody"), unclosed),
        (format!("+++\n{frontmatter}++++\nbody"), unclosed),
    ];
    for (text, message) in cases {
        let error = parse_action(&text, "list-issues.md").unwrap_err();
        assert_eq!((error.line, error.field.as_deref(), error.message.as_str()), (Some(1), None, message), "{text:?}");
        assert!(error.hint.contains("+++"));
    }
}

#[test]
fn errors_render_with_file_line_field_and_hint() {
    let text = edit(LIST_ISSUES, "version = \"1.0.0\"", "version = \"1.0\"");
    let error = parse_action(&text, "list-issues.md").unwrap_err();
    assert_eq!(
        error.to_string(),
        "list-issues.md:3: version: `1.0` is not an exact SemVer version: unexpected end of input while parsing minor \
         version number\nhint: write the action's version as MAJOR.MINOR.PATCH, e.g. \"1.2.0\" (no `v` prefix, no \
         ranges, no `latest`)"
    );
    // Lines count the opening fence: frontmatter line N is file line N + 1.
    let late = edit(LIST_ISSUES, "timeout_seconds = 60", "timeout_seconds = 600");
    assert_eq!(parse_action(&late, "list-issues.md").unwrap_err().line, Some(59));
    let unknown = edit(LIST_ISSUES, "sort = \"updated\"", "sort = \"updated\"\n[execute.retry]\nmax = 3");
    let error = parse_action(&unknown, "list-issues.md").unwrap_err();
    assert_eq!((error.line, error.field.as_deref()), (Some(68), Some("execute[1].retry")));
}

/// `(text, line, field, message)`: the exact error for one broken action file.
type Case = (String, Option<usize>, Option<&'static str>, &'static str);

fn check_errors(file: &str, cases: Vec<Case>) {
    for (text, line, field, message) in cases {
        let error = parse_action(&text, file).expect_err(&text);
        assert_eq!(
            (error.line, error.field.as_deref(), error.message.as_str()),
            (line, field, message),
            "\n{text}\n=> {error}"
        );
        assert!(!error.hint.is_empty(), "{error}");
        assert_eq!(error.file, file);
    }
}

/// Like `check_errors` for serde's own messages, which are matched by prefix.
fn check_decode_errors(file: &str, cases: Vec<(String, usize, &str, &str)>) {
    for (text, line, field, message_start) in cases {
        let error = parse_action(&text, file).expect_err(&text);
        assert_eq!((error.line, error.field.as_deref()), (Some(line), Some(field)), "{error}");
        assert!(error.message.starts_with(message_start), "{error}");
        assert!(!error.hint.is_empty());
    }
}

#[test]
fn unknown_keys_and_wrong_types_anywhere_name_their_line() {
    let l = LIST_ISSUES;
    let c = CREATE_ISSUE;
    check_decode_errors(
        "list-issues.md",
        vec![
            (
                edit(l, "version = \"1.0.0\"", "version = \"1.0.0\"\nauthor = \"me\""),
                4,
                "author",
                "unknown field `author`",
            ),
            (edit(l, "intent = ", "examples = []\nintent = "), 13, "match.examples", "unknown field `examples`"),
            (
                edit(l, "capabilities = [", "optional = true\ncapabilities = ["),
                10,
                "requires.connectors[0].optional",
                "unknown field `optional`",
            ),
            (
                edit(l, "required = false\ndescription = \"open", "default = \"open\"\ndescription = \"open"),
                29,
                "inputs[2].default",
                "unknown field `default`",
            ),
            (edit(l, "timeout_seconds = 60", "retries = 3"), 59, "execute[1].retries", "unknown field `retries`"),
            (
                edit(l, "[requires.connectors]]", "[requires.connector]]"),
                6,
                "requires.connector",
                "unknown field `connector`",
            ),
            (
                edit(l, "required = false\ndescription = \"open", "required = \"no\"\ndescription = \"open"),
                29,
                "inputs[2].required",
                "invalid type: string \"no\", expected a boolean",
            ),
            (
                edit(l, "timeout_seconds = 60", "timeout_seconds = \"60\""),
                59,
                "execute[1].timeout_seconds",
                "invalid type: string \"60\", expected i64",
            ),
            (edit(l, "idempotent = true", "idempotent = \"yes\""), 58, "execute[1].idempotent", "invalid type: string"),
            (
                edit(l, "[execute.inputs]\nowner", "inputs = \"owner\"\n[other]\nowner"),
                50,
                "execute[0].inputs",
                "invalid type: string \"owner\", expected a map",
            ),
        ],
    );
    check_decode_errors(
        "create-issue.md",
        vec![
            (
                edit(c, "required = true", "required = true\ntimeout = 5"),
                line_of(c, "required = true") + 1,
                "approval.timeout",
                "unknown field `timeout`",
            ),
            (
                edit(c, "op = \"get_repo\"", "op = \"get_repo\"\ntitle = \"x\""),
                line_of(c, "op = \"get_repo\"") + 1,
                "approval.preview.title",
                "unknown field `title`",
            ),
            (
                edit(c, "required = true", "required = \"yes\""),
                line_of(c, "required = true"),
                "approval.required",
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                edit(c, "Visibility = \"visibility\"", "Visibility = 3"),
                line_of(c, "Visibility = "),
                "approval.preview.render.Visibility",
                "invalid type: integer `3`, expected a string",
            ),
        ],
    );
}

#[test]
fn top_level_rules() {
    let l = LIST_ISSUES;
    check_errors(
        "list-issues.md",
        vec![
            (edit(l, "name = \"list-issues\"\n", ""), None, Some("name"), "missing required key `name`"),
            (
                edit(l, "name = \"list-issues\"", "name = \"List-Issues\""),
                Some(2),
                Some("name"),
                "`List-Issues` is not a valid action name: use lowercase letters, digits, `.`, `_` and `-`, starting \
                 with a letter or digit",
            ),
            (
                edit(l, "name = \"list-issues\"", "name = \"-list\""),
                Some(2),
                Some("name"),
                "`-list` is not a valid action name: use lowercase letters, digits, `.`, `_` and `-`, starting with a \
                 letter or digit",
            ),
            (
                edit(l, "name = \"list-issues\"", "name = \"list issues\""),
                Some(2),
                Some("name"),
                "`list issues` is not a valid action name: use lowercase letters, digits, `.`, `_` and `-`, starting \
                 with a letter or digit",
            ),
            (
                edit(l, "name = \"list-issues\"", "name = \"list-issues-v2\""),
                Some(2),
                Some("name"),
                "the name `list-issues-v2` does not match the file name `list-issues.md`",
            ),
            (edit(l, "version = \"1.0.0\"\n", ""), None, Some("version"), "missing required key `version`"),
            (
                edit(l, "version = \"1.0.0\"", "version = \"latest\""),
                Some(3),
                Some("version"),
                "`latest` is not an exact SemVer version: unexpected character 'l' while parsing major version number",
            ),
            (
                edit(l, "version = \"1.0.0\"", "version = \"^1.0.0\""),
                Some(3),
                Some("version"),
                "`^1.0.0` is not an exact SemVer version: unexpected character '^' while parsing major version number",
            ),
            (
                edit(l, "list-issues@1.0.0\"", "list-issues\""),
                Some(4),
                Some("source"),
                "`github://aileron/actions/list-issues` is not a valid source (invalid connector reference \
                 `github://aileron/actions/list-issues`: expected <fqn>@<version>, e.g. github://acme/slack@1.2.0)",
            ),
            (
                edit(l, "source = \"github://", "source = \"https://"),
                Some(4),
                Some("source"),
                "`https://aileron/actions/list-issues@1.0.0` is not a valid source (unknown_scheme: `https` is not a \
                 supported scheme (expected github:// or gitlab://))",
            ),
            (
                edit(l, "list-issues@1.0.0\"", "list-issues@latest\""),
                Some(4),
                Some("source"),
                "`github://aileron/actions/list-issues@latest` is not a valid source (invalid version `latest`: \
                 unexpected character 'l' while parsing major version number (exact SemVer required; no ranges, no \
                 `latest`))",
            ),
            (
                edit(l, "[match]\nintent = \"list open issues in a GitHub repository\"\n", ""),
                None,
                Some("match.intent"),
                "missing required key `intent`",
            ),
            (
                edit(l, "intent = \"list open issues in a GitHub repository\"\n", ""),
                Some(12),
                Some("match.intent"),
                "missing required key `intent`",
            ),
            (
                edit(l, "intent = \"list open issues in a GitHub repository\"", "intent = \" \""),
                Some(13),
                Some("match.intent"),
                "`intent` must not be empty",
            ),
        ],
    );
    // The stem check compares with the file name's stem, wherever the file lives.
    assert!(parse_action(LIST_ISSUES, "actions/list-issues.md").is_ok());
    let error = parse_action(LIST_ISSUES, "/home/u/.aileron/actions/other.md").unwrap_err();
    assert_eq!(
        error.message,
        "the name `list-issues` does not match the file name `/home/u/.aileron/actions/other.md`"
    );
    assert_eq!(error.hint, "rename the file to `list-issues.md` or set name = \"other\"");
    // A packaged action (action.md in a release tarball) has no name-bearing file yet.
    assert_eq!(parse_packaged_action(LIST_ISSUES, "action.md").unwrap().name, "list-issues");
}

#[test]
fn requires_connectors_rules() {
    let l = LIST_ISSUES;
    let block_start = l.find("[[requires.connectors]]").unwrap();
    let block_end = l.find("[match]").unwrap();
    let block = &l[block_start..block_end];
    check_errors(
        "list-issues.md",
        vec![
            (edit(l, block, ""), None, Some("requires.connectors"), "an action must require at least one connector"),
            (
                edit(l, block, "[requires]\nconnectors = []\n\n"),
                Some(7),
                Some("requires.connectors"),
                "an action must require at least one connector",
            ),
            (
                edit(l, block, &format!("{block}{block}")),
                Some(13),
                Some("requires.connectors[1].name"),
                "the connector `github://aileron/github` is required twice",
            ),
            (
                edit(l, "name = \"github://aileron/github\"\n", ""),
                Some(6),
                Some("requires.connectors[0].name"),
                "missing required key `name`",
            ),
            (
                edit(l, "name = \"github://aileron/github\"", "name = \"github://aileron/github@1.2.0\""),
                Some(7),
                Some("requires.connectors[0].name"),
                "invalid connector name `github://aileron/github@1.2.0`: a name must not contain `@` (the version goes \
                 in its own field)",
            ),
            (
                edit(l, "name = \"github://aileron/github\"", "name = \"hub://aileron/github\""),
                Some(7),
                Some("requires.connectors[0].name"),
                "unknown_scheme: `hub` is not a supported scheme (expected github:// or gitlab://)",
            ),
            (
                edit(l, "version = \"1.2.0\"\n", ""),
                Some(6),
                Some("requires.connectors[0].version"),
                "missing required key `version`",
            ),
            (
                edit(l, "version = \"1.2.0\"", "version = \"^1.2\""),
                Some(8),
                Some("requires.connectors[0].version"),
                "`^1.2` is not an exact SemVer version: unexpected character '^' while parsing major version number",
            ),
            (
                edit(l, "version = \"1.2.0\"", "version = \"1.2\""),
                Some(8),
                Some("requires.connectors[0].version"),
                "`1.2` is not an exact SemVer version: unexpected end of input while parsing minor version number",
            ),
            (
                edit(l, "hash = \"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n", ""),
                Some(6),
                Some("requires.connectors[0].hash"),
                "missing required key `hash`",
            ),
            (
                edit(l, "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256:abc123"),
                Some(9),
                Some("requires.connectors[0].hash"),
                "invalid content hash `sha256:abc123`: expected sha256: followed by 64 lowercase hex digits",
            ),
            (
                edit(
                    l,
                    "capabilities = [\"get_repo\", \"list_issues\", \"oauth2\", \"network:api.github.com:443\"]\n",
                    "",
                ),
                Some(6),
                Some("requires.connectors[0].capabilities"),
                "missing required key `capabilities`",
            ),
            (
                edit(
                    l,
                    "capabilities = [\"get_repo\", \"list_issues\", \"oauth2\", \"network:api.github.com:443\"]",
                    "capabilities = []",
                ),
                Some(10),
                Some("requires.connectors[0].capabilities"),
                "`capabilities` must list at least one entry",
            ),
            (
                edit(l, "\"oauth2\", \"network", "\"chat:write\", \"network"),
                Some(10),
                Some("requires.connectors[0].capabilities[2]"),
                "`chat:write` has the unknown prefix `chat:`; an entry is a credential kind (api_key, oauth2, \
                 aws_sigv4), network:<host:port>, spawn:<op> or an op name",
            ),
            (
                edit(l, "\"network:api.github.com:443\"]", "\"network:api.github.com\"]"),
                Some(10),
                Some("requires.connectors[0].capabilities[3]"),
                "`network:api.github.com`: `api.github.com` has no port: write host:port, e.g. `api.github.com:443`",
            ),
            (
                edit(
                    l,
                    "capabilities = [\"get_repo\", \"list_issues\", \"oauth2\", \"network:api.github.com:443\"]",
                    "capabilities = [\n  \"get_repo\",\n  \"list_issues\",\n  \"get_repo\",\n]",
                ),
                Some(13),
                Some("requires.connectors[0].capabilities[2]"),
                "`get_repo` is listed twice",
            ),
        ],
    );
}

#[test]
fn inputs_rules() {
    let l = LIST_ISSUES;
    let state_header = line_of(l, "name = \"state\"") - 1;
    check_errors(
        "list-issues.md",
        vec![
            (
                edit(l, "name = \"state\"\n", ""),
                Some(state_header),
                Some("inputs[2].name"),
                "missing required key `name`",
            ),
            (
                edit(l, "name = \"state\"", "name = \"1st\""),
                Some(state_header + 1),
                Some("inputs[2].name"),
                "`1st` is not a valid input name: use letters, digits and `_`, starting with a letter",
            ),
            (
                edit(l, "name = \"state\"", "name = \"issue-state\""),
                Some(state_header + 1),
                Some("inputs[2].name"),
                "`issue-state` is not a valid input name: use letters, digits and `_`, starting with a letter",
            ),
            (
                edit(l, "name = \"state\"", "name = \"owner\""),
                Some(state_header + 1),
                Some("inputs[2].name"),
                "the input `owner` is declared twice",
            ),
            (
                edit(l, "name = \"state\"\ntype = \"string\"\n", "name = \"state\"\n"),
                Some(state_header),
                Some("inputs[2].type"),
                "missing required key `type`",
            ),
            (
                edit(l, "name = \"state\"\ntype = \"string\"", "name = \"state\"\ntype = \"str\""),
                Some(state_header + 2),
                Some("inputs[2].type"),
                "`str` is not an input type",
            ),
            (
                edit(l, "name = \"state\"\ntype = \"string\"", "name = \"state\"\ntype = \"Issue Filter\""),
                Some(state_header + 2),
                Some("inputs[2].type"),
                "`Issue Filter` is not an input type",
            ),
            (
                edit(l, "description = \"open, closed or all (default open)\"\n", ""),
                Some(state_header),
                Some("inputs[2].description"),
                "missing required key `description`",
            ),
            (
                edit(l, "description = \"open, closed or all (default open)\"", "description = \"  \""),
                Some(line_of(l, "description = \"open, closed")),
                Some("inputs[2].description"),
                "`description` must not be blank",
            ),
            (
                edit(l, "label = \"Owner\"", "label = \"\""),
                Some(line_of(l, "label = \"Owner\"")),
                Some("inputs[0].label"),
                "`label` must not be blank",
            ),
            (
                edit(l, "type = \"integer\"", "type = \"integer\"\nmultiline = true"),
                Some(line_of(l, "type = \"integer\"") + 1),
                Some("inputs[4].multiline"),
                "`multiline` applies only to string inputs, not integer",
            ),
            (
                edit(l, "type = \"integer\"", "type = \"integer\"\nmultiline = false"),
                Some(line_of(l, "type = \"integer\"") + 1),
                Some("inputs[4].multiline"),
                "`multiline` applies only to string inputs, not integer",
            ),
            (
                edit(
                    l,
                    "name = \"state\"\ntype = \"string\"",
                    "name = \"state\"\ntype = \"string\"\nitems_type = \"string\"",
                ),
                Some(state_header + 3),
                Some("inputs[2].items_type"),
                "`items_type` applies only to array inputs, not string",
            ),
            (
                edit(l, "items_type = \"string\"", "items_type = \"strings\""),
                Some(line_of(l, "items_type")),
                Some("inputs[3].items_type"),
                "`strings` is not an input type",
            ),
        ],
    );
    // Every input type and the optional keys decode.
    for kind in InputType::ALL {
        let text = edit(l, "type = \"integer\"", &format!("type = \"{}\"", kind.as_str()));
        let text = text.replace("per_page = \"${args.limit}\"", "per_page = 10");
        let action = parse_ok(&text, "list-issues.md");
        assert_eq!(action.input("limit").unwrap().kind, kind);
    }
}

#[test]
fn execute_rules() {
    let l = LIST_ISSUES;
    let second = line_of(l, "id = \"issues\"") - 1;
    let exec_start = l.find("[[execute]]").unwrap();
    let exec_end = l.find("+++\n# List").unwrap();
    check_errors(
        "list-issues.md",
        vec![
            (
                format!("{}{}", &l[..exec_start], &l[exec_end..]),
                None,
                Some("execute"),
                "an action must have at least one [[execute]] step",
            ),
            (edit(l, "id = \"issues\"\n", ""), Some(second), Some("execute[1].id"), "missing required key `id`"),
            (
                edit(l, "id = \"issues\"", "id = \"list.issues\""),
                Some(second + 1),
                Some("execute[1].id"),
                "`list.issues` is not a valid step id: use letters, digits, `_` and `-`",
            ),
            (
                edit(l, "id = \"issues\"", "id = \"\""),
                Some(second + 1),
                Some("execute[1].id"),
                "`` is not a valid step id: use letters, digits, `_` and `-`",
            ),
            (
                edit(l, "id = \"issues\"", "id = \"args\""),
                Some(second + 1),
                Some("execute[1].id"),
                "`args` is reserved for ${args.<input>} and cannot be a step id",
            ),
            (
                edit(l, "id = \"issues\"", "id = \"repo\""),
                Some(second + 1),
                Some("execute[1].id"),
                "the step id `repo` is used twice",
            ),
            (
                edit(l, "id = \"issues\"\nconnector = \"github://aileron/github\"\n", "id = \"issues\"\n"),
                Some(second),
                Some("execute[1].connector"),
                "missing required key `connector`",
            ),
            (
                edit(
                    l,
                    "id = \"issues\"\nconnector = \"github://aileron/github\"",
                    "id = \"issues\"\nconnector = \"github://aileron/gitlab\"",
                ),
                Some(second + 2),
                Some("execute[1].connector"),
                "`github://aileron/gitlab` is not one of the required connectors (github://aileron/github)",
            ),
            (
                edit(
                    l,
                    "id = \"issues\"\nconnector = \"github://aileron/github\"",
                    "id = \"issues\"\nconnector = \"github\"",
                ),
                Some(second + 2),
                Some("execute[1].connector"),
                "`github` is not one of the required connectors (github://aileron/github)",
            ),
            (edit(l, "op = \"list_issues\"\n", ""), Some(second), Some("execute[1].op"), "missing required key `op`"),
            (
                edit(l, "op = \"list_issues\"", "op = \"\""),
                Some(second + 3),
                Some("execute[1].op"),
                "`op` must not be empty",
            ),
            (
                edit(l, "op = \"list_issues\"", "op = \"list issues\""),
                Some(second + 3),
                Some("execute[1].op"),
                "\"list issues\" is not a valid op name: use letters, digits, `_`, `.` and `-`",
            ),
            (
                edit(l, "timeout_seconds = 60", "timeout_seconds = 0"),
                Some(59),
                Some("execute[1].timeout_seconds"),
                "`timeout_seconds` must be between 1 and 300 (got 0)",
            ),
            (
                edit(l, "timeout_seconds = 60", "timeout_seconds = 301"),
                Some(59),
                Some("execute[1].timeout_seconds"),
                "`timeout_seconds` must be between 1 and 300 (got 301)",
            ),
            (
                edit(l, "timeout_seconds = 60", "timeout_seconds = -5"),
                Some(59),
                Some("execute[1].timeout_seconds"),
                "`timeout_seconds` must be between 1 and 300 (got -5)",
            ),
        ],
    );
    for (seconds, expected) in [(1, 1), (300, 300)] {
        let text = edit(l, "timeout_seconds = 60", &format!("timeout_seconds = {seconds}"));
        assert_eq!(parse_ok(&text, "list-issues.md").steps[1].timeout_seconds, Some(expected));
    }
}

#[test]
fn step_input_references() {
    let l = LIST_ISSUES;
    let owner_line = line_of(l, "owner = \"${args.owner}\"");
    let repository_line = line_of(l, "repository = ");
    check_errors(
        "list-issues.md",
        vec![
            (
                edit(l, "${args.owner}", "${args.ownr}"),
                Some(owner_line),
                Some("execute[0].inputs.owner"),
                "`${args.ownr}` names no declared input (declared: owner, repo, state, labels, limit)",
            ),
            (
                edit(l, "owner = \"${args.owner}\"", "owner = \"${issues.items}\""),
                Some(owner_line),
                Some("execute[0].inputs.owner"),
                "`${issues.items}` refers to step `issues`, which runs after this one",
            ),
            (
                edit(l, "owner = \"${args.owner}\"", "owner = \"${repo.owner}\""),
                Some(owner_line),
                Some("execute[0].inputs.owner"),
                "`${repo.owner}` refers to this step's own output",
            ),
            (
                edit(l, "repository = \"${repo.full_name}\"", "repository = \"${repos.full_name}\""),
                Some(repository_line),
                Some("execute[1].inputs.repository"),
                "`${repos.full_name}` names neither an input (`${args.<input>}`) nor an earlier step",
            ),
            (
                edit(l, "repository = \"${repo.full_name}\"", "repository = \"${repo.full_name\""),
                Some(repository_line),
                Some("execute[1].inputs.repository"),
                "`${repo.full_name` is never closed with `}` (write `$${` for a literal `${`)",
            ),
            (
                edit(l, "repository = \"${repo.full_name}\"", "repository = \"${args}\""),
                Some(repository_line),
                Some("execute[1].inputs.repository"),
                "`${args}` must name an input: `${args.<input>}`",
            ),
            (
                edit(l, "repository = \"${repo.full_name}\"", "repository = \"x ${} y\""),
                Some(repository_line),
                Some("execute[1].inputs.repository"),
                "`${}` is an empty reference",
            ),
            (
                edit(l, "sort = \"updated\"", "sort = [\n  \"updated\",\n  \"${args.nope}\",\n]"),
                Some(repository_line + 7),
                Some("execute[1].inputs.sort[1]"),
                "`${args.nope}` names no declared input (declared: owner, repo, state, labels, limit)",
            ),
            (
                edit(l, "sort = \"updated\"", "sort = { by = \"updated\", then = { key = \"${later.x}\" } }"),
                Some(repository_line + 5),
                Some("execute[1].inputs.sort.then.key"),
                "`${later.x}` names neither an input (`${args.<input>}`) nor an earlier step",
            ),
            (
                edit(l, "sort = \"updated\"", "sort = nan"),
                Some(repository_line + 5),
                Some("execute[1].inputs.sort"),
                "`NaN` has no JSON representation",
            ),
        ],
    );
    // Literal escapes are not references; TOML values of every kind become JSON.
    let text = edit(
        l,
        "sort = \"updated\"",
        "sort = \"$${later.x}\"\nsince = 2026-01-01T00:00:00Z\nweights = [1.5, 2]\nflag = true",
    );
    let action = parse_ok(&text, "list-issues.md");
    let inputs = &action.steps[1].inputs;
    assert_eq!(inputs["sort"], json!("$${later.x}"));
    assert_eq!(inputs["since"], json!("2026-01-01T00:00:00Z"));
    assert_eq!(inputs["weights"], json!([1.5, 2]));
    assert_eq!(inputs["flag"], json!(true));
    // An action without inputs names that in the message.
    let no_inputs = {
        let start = l.find("[[inputs]]").unwrap();
        let end = l.find("[[execute]]").unwrap();
        format!("{}{}", &l[..start], &l[end..])
    };
    let error = parse_action(&no_inputs, "list-issues.md").unwrap_err();
    assert_eq!(error.message, "`${args.owner}` names no declared input (this action declares no inputs)");
}

#[test]
fn approval_rules() {
    let c = CREATE_ISSUE;
    let op_line = line_of(c, "op = \"get_repo\"");
    let args_line = line_of(c, "args = {");
    let multiline_line = line_of(c, "multiline = [\"About\"]");
    let render_line = line_of(c, "[approval.preview.render]");
    check_errors(
        "create-issue.md",
        vec![
            (
                edit(c, "op = \"get_repo\"\n", ""),
                Some(op_line - 1),
                Some("approval.preview.op"),
                "missing required key `op`",
            ),
            (
                edit(c, "op = \"get_repo\"", "op = \"\""),
                Some(op_line),
                Some("approval.preview.op"),
                "`op` must not be empty",
            ),
            (
                edit(c, "op = \"get_repo\"", "op = \"get repo\""),
                Some(op_line),
                Some("approval.preview.op"),
                "\"get repo\" is not a valid op name: use letters, digits, `_`, `.` and `-`",
            ),
            (
                edit(c, "repo = \"${args.repo}\", include", "repo = \"${create.number}\", include"),
                Some(args_line),
                Some("approval.preview.args.repo"),
                "`${create.number}`: the approval preview runs before any step",
            ),
            (
                edit(c, "owner = \"${args.owner}\", repo", "owner = \"${args.org}\", repo"),
                Some(args_line),
                Some("approval.preview.args.owner"),
                "`${args.org}` names no declared input (declared: owner, repo, title, body)",
            ),
            (
                edit(c, "multiline = [\"About\"]", "multiline = [\"About\", \"Body\"]"),
                Some(multiline_line),
                Some("approval.preview.multiline[1]"),
                "`Body` is not a label of [approval.preview.render]",
            ),
            (
                edit(c, "About = \"description\"", "About = \"description.\""),
                Some(render_line + 4),
                Some("approval.preview.render.About"),
                "\"description.\" is not a dotted JSON path",
            ),
            (
                edit(c, "About = \"description\"", "About = \"\""),
                Some(render_line + 4),
                Some("approval.preview.render.About"),
                "\"\" is not a dotted JSON path",
            ),
            (
                edit(c, "About = \"description\"", "\" \" = \"description\""),
                Some(render_line + 4),
                Some("approval.preview.render.\" \""),
                "a render label must not be blank",
            ),
        ],
    );
    // [approval] without `required` is not gated; a preview is optional.
    let ungated = edit(c, "required = true\n", "");
    assert!(!parse_ok(&ungated, "create-issue.md").requires_approval());
    let preview_start = c.find("[approval.preview]").unwrap();
    let no_preview = format!("{}+++\nbody\n", &c[..preview_start]);
    let action = parse_ok(&no_preview, "create-issue.md");
    assert!(action.requires_approval() && action.approval.preview.is_none());
}

/// A small action with one input of each type.
fn typed_action() -> ActionFile {
    let mut text = String::from("+++\nname = \"typed\"\nversion = \"1.0.0\"\n");
    text.push_str(
        "[[requires.connectors]]\nname = \"github://acme/c\"\nversion = \"1.0.0\"\n\
         hash = \"sha256:0000000000000000000000000000000000000000000000000000000000000000\"\ncapabilities = [\"op\"]\n\
         [match]\nintent = \"typed inputs\"\n",
    );
    for (name, kind, extra) in [
        ("s", "string", ""),
        ("i", "integer", "required = false\n"),
        ("n", "number", "required = false\n"),
        ("b", "boolean", "required = false\n"),
        ("a", "array", "required = false\nitems_type = \"integer\"\n"),
        ("o", "object", "required = false\n"),
    ] {
        text.push_str(&format!("[[inputs]]\nname = \"{name}\"\ntype = \"{kind}\"\ndescription = \"{kind}\"\n{extra}"));
    }
    text.push_str("[[execute]]\nid = \"only\"\nconnector = \"github://acme/c\"\nop = \"op\"\n+++\n");
    parse_ok(&text, "typed.md")
}

#[test]
fn call_arguments_are_validated_against_the_declared_inputs() {
    let list = parse_ok(LIST_ISSUES, "list-issues.md");
    let typed = typed_action();
    let declared = "(declared inputs: owner, repo, state, labels, limit)";
    // (action, call args, Ok or the message after "invalid arguments for action `<name>`: ")
    let cases: Vec<(&ActionFile, Value, Result<(), String>)> = vec![
        (&list, json!({"owner": "acme", "repo": "widgets"}), Ok(())),
        (&list, json!({"owner": "acme", "repo": "widgets", "state": "all", "labels": [], "limit": 5}), Ok(())),
        (&list, json!({"owner": "acme", "repo": "widgets", "labels": ["bug", "p1"]}), Ok(())),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "org": "x"}),
            Err(format!("undeclared argument `org` {declared}")),
        ),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "zz": 1, "aa": 2}),
            Err(format!("undeclared arguments `aa`, `zz` {declared}")),
        ),
        (&list, json!({}), Err("missing required argument `owner`; missing required argument `repo`".into())),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "limit": "10"}),
            Err("argument `limit` must be an integer, got a string".into()),
        ),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "limit": 2.5}),
            Err("argument `limit` must be an integer, got a number".into()),
        ),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "labels": "bug"}),
            Err("argument `labels` must be an array, got a string".into()),
        ),
        (
            &list,
            json!({"owner": "acme", "repo": "widgets", "labels": ["bug", 3, {"x": 1}]}),
            Err("item 1 of argument `labels` must be a string, got an integer; \
                 item 2 of argument `labels` must be a string, got an object"
                .into()),
        ),
        (
            &list,
            json!({"owner": null, "repo": "widgets"}),
            Err("argument `owner` must be a string, got null (omit an optional \
                 argument instead of passing null)"
                .into()),
        ),
        (
            &list,
            json!({"repo": 7, "extra": true}),
            Err(format!(
                "undeclared argument `extra` {declared}; missing \
                 required argument `owner`; argument `repo` must be a string, got an integer"
            )),
        ),
        (&typed, json!({"s": "x", "i": -3, "n": 1, "b": false, "a": [1, 2], "o": {}}), Ok(())),
        (&typed, json!({"s": "x", "n": 1.25, "i": 18446744073709551615u64}), Ok(())),
        (&typed, json!({"s": "x", "b": "true"}), Err("argument `b` must be a boolean, got a string".into())),
        (&typed, json!({"s": "x", "n": "1"}), Err("argument `n` must be a number, got a string".into())),
        (&typed, json!({"s": "x", "o": []}), Err("argument `o` must be an object, got an array".into())),
        (
            &typed,
            json!({"s": "x", "a": [1, 2.5]}),
            Err("item 1 of argument `a` must be an integer, got a number".into()),
        ),
        (&typed, json!({"s": 1.0}), Err("argument `s` must be a string, got a number".into())),
    ];
    for (action, args, expected) in cases {
        let Value::Object(args) = args else { unreachable!() };
        let result = action.validate_call_args(&args).map_err(|e| {
            assert_eq!(e.code(), "invalid_args");
            assert!(!e.hint().is_empty());
            assert_eq!(e.message(), e.to_string());
            e.to_string()
        });
        let expected = expected.map_err(|rest| format!("invalid arguments for action `{}`: {rest}", action.name));
        assert_eq!(result, expected, "{args:?}");
    }
}

#[test]
fn an_action_without_inputs_takes_no_arguments() {
    let start = CREATE_ISSUE.find("[[inputs]]").unwrap();
    let end = CREATE_ISSUE.find("[[execute]]").unwrap();
    let mut text = format!("{}{}", &CREATE_ISSUE[..start], &CREATE_ISSUE[end..]);
    text = text[..text.find("[execute.inputs]").unwrap()].to_string() + "+++\n";
    let action = parse_ok(&text, "create-issue.md");
    assert_eq!(action.input_schema()["required"], json!([]));
    let Value::Object(args) = json!({"x": 1}) else { unreachable!() };
    let error = action.validate_call_args(&args).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid arguments for action `create-issue`: undeclared argument `x` (this action takes no arguments)"
    );
    assert_eq!(error.problems, [ArgsProblem::Undeclared(vec!["x".into()])]);
}

/// A UTF-8 byte order mark (which editors on Windows add) before the opening fence is accepted;
/// the action's hash is of the file's exact bytes and errors keep their lines.
#[test]
fn a_leading_byte_order_mark_is_accepted() {
    let text = format!("\u{feff}{LIST_ISSUES}");
    let action = parse_ok(&text, "list-issues.md");
    assert_eq!(action.name, "list-issues");
    assert_eq!(action.title(), Some("List GitHub issues"));
    assert_eq!(*action.sha256(), ContentHash::of_bytes(text.as_bytes()));
    let broken = edit(&text, "version = \"1.0.0\"", "version = \"1.0\"");
    assert_eq!(parse_action(&broken, "list-issues.md").unwrap_err().line, Some(3));
}

/// An op the connector's capabilities do not list is a valid file whose every run is denied at
/// run time (SPEC §4.5); `ops_outside_capabilities` names those calls for `action add` to warn.
#[test]
fn calls_outside_the_declared_ops_are_named() {
    let l = LIST_ISSUES;
    assert!(parse_ok(l, "list-issues.md").ops_outside_capabilities().is_empty());
    let narrowed = parse_ok(
        &edit(l, "capabilities = [\"get_repo\", \"list_issues\",", "capabilities = [\"get_repo\","),
        "list-issues.md",
    );
    let named: Vec<(String, String)> =
        narrowed.ops_outside_capabilities().into_iter().map(|(call, op, _)| (call, op)).collect();
    assert_eq!(named, [("step `issues`".to_string(), "list_issues".to_string())], "{named:?}");
    // No op names at all (only a credential and a host): every op is allowed, as at run time.
    assert!(
        parse_ok(&edit(l, "\"get_repo\", \"list_issues\", ", ""), "list-issues.md")
            .ops_outside_capabilities()
            .is_empty()
    );
}

/// The original project's generated actions: camelCase input names and GraphQL type names. The
/// scalars become JSON Schema types (with `format`); `JSON` and every other name (input objects,
/// comparators, enums) any value passed through, its name in the description.
#[test]
fn graphql_type_names_of_the_original_generator_map_onto_json_schema() {
    let inputs = [
        ("issueId", "ID!"),
        ("title", "String"),
        ("includeArchived", "Boolean"),
        ("first", "Int"),
        ("estimate", "Float"),
        ("createdAt", "DateTime"),
        ("dueDate", "TimelessDate"),
        ("metadata", "JSONObject"),
        ("data", "JSON"),
        ("filter", "IssueFilter"),
        ("labelIds", "[String!]"),
        ("orderBy", "PaginationOrderBy"),
    ];
    let declared: String = inputs
        .iter()
        .map(|(name, kind)| {
            format!(
                "\n[[inputs]]\nname = \"{name}\"\ntype = \"{kind}\"\ndescription = \"the {name}\"\nrequired = false\n"
            )
        })
        .collect();
    let text = LIST_ISSUES.replacen("\n[[inputs]]", &format!("{declared}\n[[inputs]]"), 1);
    let action = parse_action(&text, "list-issues.md").unwrap();
    let schema = action.input_schema();
    let property = |name: &str| schema["properties"][name].clone();
    assert_eq!(property("issueId")["type"], "string");
    assert_eq!(property("includeArchived")["type"], "boolean");
    assert_eq!(property("first")["type"], "integer");
    assert_eq!(property("estimate")["type"], "number");
    assert_eq!(
        (property("createdAt")["type"].clone(), property("createdAt")["format"].clone()),
        (json!("string"), json!("date-time"))
    );
    assert_eq!(property("dueDate")["format"], "date");
    assert_eq!(property("metadata")["type"], "object");
    assert!(property("data").get("type").is_none(), "JSON is any value: {}", property("data"));
    assert!(property("filter").get("type").is_none(), "{}", property("filter"));
    assert_eq!(
        property("filter")["description"],
        "the filter (GraphQL `IssueFilter`: passed to the connector as given)"
    );
    assert_eq!(property("title")["description"], "the title", "a plain scalar needs no note");
    assert_eq!(
        (property("labelIds")["type"].clone(), property("labelIds")["items"].clone()),
        (json!("array"), json!({"type": "string"}))
    );
    assert_eq!(crate::action::schema_type_label(&property("data")), "any JSON value");

    let base = || {
        let mut args = serde_json::Map::new();
        args.insert("owner".into(), json!("acme"));
        args.insert("repo".into(), json!("widget"));
        args
    };
    let mut good = base();
    good.insert("filter".into(), json!({"title": {"contains": "bug"}, "and": [{"priority": {"eq": 1}}]}));
    good.insert("orderBy".into(), json!("updatedAt"));
    good.insert("data".into(), json!("any value at all"));
    good.insert("first".into(), json!(50));
    assert!(action.validate_call_args(&good).is_ok(), "{:?}", action.validate_call_args(&good));
    let mut bad = base();
    bad.insert("first".into(), json!("fifty"));
    bad.insert("labelIds".into(), json!(["a", 2]));
    let error = action.validate_call_args(&bad).unwrap_err().to_string();
    assert!(error.contains("`first` must be an integer"), "{error}");
    assert!(error.contains("labelIds"), "{error}");
}

#[test]
fn the_frontmatter_range_is_what_the_fences_enclose() {
    let text = "+++\nname = \"x\"\n+++\n# X\n";
    assert_eq!(frontmatter_range(text).map(|r| &text[r]), Some("name = \"x\"\n"));
    let crlf = "\u{feff}+++\r\nname = 1\r\n+++\r\n";
    assert_eq!(frontmatter_range(crlf).map(|r| &crlf[r]), Some("name = 1\r\n"));
    assert_eq!(frontmatter_range("name = 1\n+++\n"), None);
    assert_eq!(frontmatter_range("+++\nname = 1\n"), None);
}

#[test]
fn run_texts_are_the_actions_own_texts_made_once_and_not_part_of_equality() {
    for (text, file) in [(LIST_ISSUES, "list-issues.md"), (CREATE_ISSUE, "create-issue.md")] {
        let action = parse_ok(text, file);
        let twin = parse_ok(text, file);
        let texts = action.run_texts();
        assert_eq!(&*texts.name, action.name);
        assert_eq!(*texts.version, action.version.to_string());
        assert_eq!(texts.steps.len(), action.steps.len());
        for (step, made) in action.steps.iter().zip(&texts.steps) {
            assert_eq!(*made.connector, step.connector.to_string());
            assert_eq!(*made.op, step.op);
            assert_eq!(*made.hash, action.connector_of(step).hash.to_string());
            assert!(made.hash.starts_with("sha256:"), "{}", made.hash);
        }
        assert!(std::sync::Arc::ptr_eq(texts, action.run_texts()), "made once, then shared");
        // Made or not, the action is the same action.
        assert_eq!(action, twin);
        let copy = action.clone();
        assert_eq!(copy, action);
        assert!(!std::sync::Arc::ptr_eq(copy.run_texts(), action.run_texts()), "a clone makes its own");
        assert_eq!(copy.run_texts().name, action.run_texts().name);
    }
}
