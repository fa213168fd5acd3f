//! Action files (SPEC §2): Markdown with TOML frontmatter fenced by `+++` lines. Parsing is strict
//! (an unknown key anywhere is an error with its line) and every rule of §2 has its own message.
//! From a parsed action come the MCP tool (name, description, input schema) and call-argument checks.

mod args;
#[cfg(test)]
pub(crate) mod fixtures;
mod raw;
#[cfg(test)]
mod tests;
mod texts;

use std::path::Path;

use serde_json::{Map, Value};

use crate::identity::{ConnectorRef, ContentHash, Fqn};
use crate::parse_error::{FieldPath, ParseError, PathSegment, TomlSource};
use crate::policy::{CapabilityEntry, CapabilitySubset, validate_op_name};
use crate::template::{Reference, ReferenceSource, references_in};

pub use args::{ArgsError, ArgsProblem};
pub use texts::{RunTexts, StepTexts};

/// Longest wall time a step may ask for (SPEC §4.3: 5 minutes).
pub const MAX_STEP_TIMEOUT_SECONDS: u32 = 300;

/// A parsed, validated action file.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionFile {
    pub name: String,
    pub version: semver::Version,
    /// Provenance only: `<scheme>://<owner>/<path>@<semver>`. Boxed, as the approval's preview:
    /// most actions have neither, and inline they were half of every installed action's struct.
    pub source: Option<Box<ConnectorRef>>,
    pub requires: Vec<RequiredConnector>,
    /// `[match] intent`.
    pub intent: String,
    pub inputs: Vec<InputSpec>,
    pub steps: Vec<Step>,
    pub approval: Approval,
    title: Option<String>,
    description: String,
    /// SHA-256 of the exact text the action was parsed from. The text itself is not kept: an
    /// installed action stays in memory for as long as it is installed, and at 10,000 actions
    /// their texts were 5 MB of the daemon's heap (BENCHMARKS.md, issue 49, "Start and memory at
    /// scale"); the file on disk holds it.
    sha256: ContentHash,
    /// Made on the first run that asks ([`ActionFile::run_texts`]); 16 bytes until then.
    run_texts: texts::RunTextsCell,
}

/// `[[requires.connectors]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredConnector {
    pub name: Fqn,
    pub version: semver::Version,
    pub hash: ContentHash,
    pub capabilities: Vec<CapabilityEntry>,
}

impl RequiredConnector {
    pub fn reference(&self) -> ConnectorRef {
        ConnectorRef { fqn: self.name.clone(), version: self.version.clone() }
    }

    pub fn subset(&self) -> CapabilitySubset {
        CapabilitySubset::from(self)
    }
}

/// The JSON types an input may have. The first six are the names an author writes; `Any` comes
/// only from the original project's generated files ([`GraphqlType`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    /// Any JSON value, passed through as given: GraphQL's `JSON` scalar, and every type name
    /// that is no scalar — an input object or comparator (`IssueFilter`, `DateComparator`) or an
    /// enum (`PaginationOrderBy`, whose values are strings), which a name alone cannot tell apart.
    Any,
}

impl InputType {
    /// The types an author may name.
    pub const ALL: [InputType; 6] = [
        InputType::String,
        InputType::Integer,
        InputType::Number,
        InputType::Boolean,
        InputType::Array,
        InputType::Object,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Array => "array",
            InputType::Object => "object",
            InputType::Any => "JSON value",
        }
    }

    pub fn parse(name: &str) -> Option<InputType> {
        InputType::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether a JSON value has this type: `integer` is a JSON integer, `number` any number.
    pub fn matches(self, value: &Value) -> bool {
        match self {
            InputType::String => value.is_string(),
            InputType::Integer => value.is_i64() || value.is_u64(),
            InputType::Number => value.is_number(),
            InputType::Boolean => value.is_boolean(),
            InputType::Array => value.is_array(),
            InputType::Object => value.is_object(),
            InputType::Any => true,
        }
    }

    /// The JSON Schema `type` of an input of this type (`None`: any value).
    fn schema_type(self) -> Option<Value> {
        match self {
            InputType::Any => None,
            other => Some(other.as_str().into()),
        }
    }
}

/// How an `inputSchema` property's type reads to a person: `string`, or `any JSON value` (no
/// `type`: a GraphQL input object, comparator or enum).
pub fn schema_type_label(property: &Value) -> String {
    match property.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ => "any JSON value".to_string(),
    }
}

/// An input type written the way the original project's code generator writes them: GraphQL
/// type names (`String`, `Int`, `DateTime`, `IssueFilter`, `[String!]!`). Its scalars map onto
/// JSON Schema types (with a `format` where one fits); any other name (an input object, a
/// comparator, an enum) is any JSON value, passed to the connector as given, its name said in
/// the tool's description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphqlType {
    pub kind: InputType,
    pub items_type: Option<InputType>,
    pub format: Option<&'static str>,
    /// Said in the tool's description: the name as written, when no JSON type says it all.
    pub named: Option<String>,
}

impl GraphqlType {
    pub fn parse(name: &str) -> Option<GraphqlType> {
        let name = name.trim_end_matches('!');
        if let Some(item) = name.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            let item = GraphqlType::parse(item)?;
            let items_type =
                matches!(item.kind, InputType::String | InputType::Integer | InputType::Number | InputType::Boolean)
                    .then_some(item.kind);
            let named = Some(format!("[{}]", item.named.unwrap_or_else(|| item.kind.as_str().to_string())));
            return Some(GraphqlType { kind: InputType::Array, items_type, format: None, named });
        }
        let scalar = |kind| Some(GraphqlType { kind, items_type: None, format: None, named: None });
        let formatted =
            |format| Some(GraphqlType { kind: InputType::String, items_type: None, format: Some(format), named: None });
        let named = |kind| Some(GraphqlType { kind, items_type: None, format: None, named: Some(name.to_string()) });
        match name {
            "String" | "ID" => scalar(InputType::String),
            "Boolean" => scalar(InputType::Boolean),
            "Int" => scalar(InputType::Integer),
            "Float" => scalar(InputType::Number),
            "DateTime" => formatted("date-time"),
            "TimelessDate" | "Date" => formatted("date"),
            "JSONObject" => named(InputType::Object),
            "JSON" => named(InputType::Any),
            _ if name.starts_with(|c: char| c.is_ascii_uppercase())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                named(InputType::Any)
            }
            _ => None,
        }
    }
}

/// `[[inputs]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    pub name: String,
    pub kind: InputType,
    pub required: bool,
    pub description: String,
    pub label: Option<String>,
    /// Strings only: shown as a multi-line field in approval cards.
    pub multiline: bool,
    /// Arrays only: the type of every element.
    pub items_type: Option<InputType>,
    /// JSON Schema `format` (`date-time`, `date`): only from a GraphQL type name.
    pub format: Option<&'static str>,
    /// The GraphQL type name as written, when the JSON type alone does not say it.
    pub graphql_name: Option<String>,
}

/// `[[execute]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    pub connector: Fqn,
    pub op: String,
    /// Overrides the connector's `[connector.idempotency] default` for this step.
    pub idempotent: Option<bool>,
    /// Wall-time limit for this step, 1..=300 seconds.
    pub timeout_seconds: Option<u32>,
    /// `[execute.inputs]` as JSON, templates not yet interpolated.
    pub inputs: Map<String, Value>,
}

impl Step {
    /// Whether the runtime may retry this step's call.
    pub fn is_idempotent(&self, connector_default: bool) -> bool {
        self.idempotent.unwrap_or(connector_default)
    }
}

/// `[approval]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Approval {
    pub required: bool,
    /// `expires_after` in milliseconds: a pending approval older than this ends `expired`.
    /// `None`: [`crate::approval::DEFAULT_EXPIRY_MS`].
    pub expires_after_ms: Option<u64>,
    pub preview: Option<Box<Preview>>,
}

/// `[approval.preview]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    pub op: String,
    pub args: Map<String, Value>,
    /// Label → dotted JSON path into the preview output, in the author's order.
    pub render: Vec<(String, String)>,
    /// Labels (of `render`) shown as multi-line text.
    pub multiline: Vec<String>,
}

/// A character of an action's name as its MCP tool name has it: `-` and `.` become `_`.
fn tool_char(c: char) -> char {
    if c == '-' || c == '.' { '_' } else { c }
}

impl ActionFile {
    /// The MCP tool name: `name` with `-` and `.` mapped to `_`.
    pub fn tool_name(&self) -> String {
        self.name.chars().map(tool_char).collect()
    }

    /// Whether [`ActionFile::tool_name`] is `tool`, compared without building it (an install
    /// holds its tool name against every installed action's).
    pub fn has_tool_name(&self, tool: &str) -> bool {
        self.name.chars().map(tool_char).eq(tool.chars())
    }

    /// The LLM-facing description: the body without a leading `# Title` line, else `match.intent`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The body's leading `# Title`, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    pub fn requires_approval(&self) -> bool {
        self.approval.required
    }

    /// The calls every run of this action will have denied (`capability_denied`, SPEC §4.5): a
    /// step, or the approval preview (it runs on the first step's connector), whose op the
    /// connector's capabilities do not list when they list op names. The file is valid — the rule
    /// is a run-time denial — so `action add` warns with these: `(which call, op, connector)`.
    pub fn ops_outside_capabilities(&self) -> Vec<(String, String, Fqn)> {
        let denied = |op: &str, connector: &Fqn| {
            self.requires
                .iter()
                .find(|required| &required.name == connector)
                .is_some_and(|required| !required.subset().allows_op(op))
        };
        let mut calls: Vec<(String, String, Fqn)> = self
            .steps
            .iter()
            .filter(|step| denied(&step.op, &step.connector))
            .map(|step| (format!("step `{}`", step.id), step.op.clone(), step.connector.clone()))
            .collect();
        if let (Some(preview), Some(first)) = (&self.approval.preview, self.steps.first())
            && denied(&preview.op, &first.connector)
        {
            calls.push(("the approval preview".to_string(), preview.op.clone(), first.connector.clone()));
        }
        calls
    }

    /// SHA-256 of the exact text the action was parsed from: what an approval binds to, and how
    /// a stored file is known to still be this action.
    pub fn sha256(&self) -> &ContentHash {
        &self.sha256
    }

    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    pub fn required_connector(&self, name: &Fqn) -> Option<&RequiredConnector> {
        self.requires.iter().find(|r| &r.name == name)
    }

    /// The pinned connector `step` (one of this action's) calls.
    pub fn connector_of(&self, step: &Step) -> &RequiredConnector {
        self.required_connector(&step.connector).expect("the parser guarantees every step names a required connector")
    }

    /// The name and each step's connector, op and pinned hash as shared texts, made on the first
    /// call: what a run's spans and its steps' egress hold, cloned by reference count.
    pub fn run_texts(&self) -> &std::sync::Arc<RunTexts> {
        self.run_texts.get_or_make(self)
    }

    /// The MCP `inputSchema`: `{type: object, properties, required (declaration order),
    /// additionalProperties: false}`.
    pub fn input_schema(&self) -> Value {
        let mut properties = Map::new();
        for input in &self.inputs {
            let mut property = Map::new();
            if let Some(kind) = input.kind.schema_type() {
                property.insert("type".into(), kind);
            }
            let description = match &input.graphql_name {
                Some(name) => format!("{} (GraphQL `{name}`: passed to the connector as given)", input.description),
                None => input.description.clone(),
            };
            property.insert("description".into(), description.into());
            if let Some(format) = input.format {
                property.insert("format".into(), format.into());
            }
            if let Some(items) = input.items_type {
                property.insert("items".into(), serde_json::json!({ "type": items.as_str() }));
            }
            properties.insert(input.name.clone(), Value::Object(property));
        }
        let required: Vec<Value> =
            self.inputs.iter().filter(|i| i.required).map(|i| Value::from(i.name.clone())).collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// Checks call arguments against the declared inputs; lists every problem found.
    pub fn validate_call_args(&self, args: &Map<String, Value>) -> Result<(), ArgsError> {
        args::validate(self, args)
    }
}

/// Parses an installed action file; `file_name` (e.g. `list-issues.md`) names it in errors and its
/// stem must equal the action's `name`.
pub fn parse_action(text: &str, file_name: &str) -> Result<ActionFile, ParseError> {
    let stem = Path::new(file_name).file_stem().and_then(|s| s.to_str()).unwrap_or(file_name);
    parse(text, file_name, Some(stem))
}

/// Parses an action file that has no name-bearing file yet (the `action.md` of a release tarball);
/// the installer stores it as `<name>.md`. `label` names it in errors.
pub fn parse_packaged_action(text: &str, label: &str) -> Result<ActionFile, ParseError> {
    parse(text, label, None)
}

fn parse(text: &str, file: &str, expected_stem: Option<&str>) -> Result<ActionFile, ParseError> {
    // Editors on Windows may start a UTF-8 file with a byte order mark; it is not part of the
    // opening fence. The hash is of the file's exact bytes.
    let content = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (frontmatter, body) = split_frontmatter(content, file)?;
    // The frontmatter starts on line 2, right after the opening fence.
    let source = TomlSource::new(file, frontmatter, 2);
    let raw: raw::RawAction = source.decode()?;
    let validator = ActionValidator { source: &source };
    let mut action = validator.validate(raw, expected_stem, file)?;
    let (title, description) = split_body(body);
    action.title = title;
    action.description = if description.is_empty() { action.intent.clone() } else { description };
    action.sha256 = ContentHash::of_bytes(text.as_bytes());
    Ok(action)
}

/// `(frontmatter, body)`: the text between the first line `+++` and the next line `+++`, and
/// everything after that closing line.
fn split_frontmatter<'t>(text: &'t str, file: &str) -> Result<(&'t str, &'t str), ParseError> {
    match fences(text) {
        Fences::Closed { frontmatter, body } => Ok((&text[frontmatter], &text[body..])),
        Fences::NoOpening => Err(ParseError::new(
            file,
            Some(1),
            None,
            "the first line must be exactly `+++` (the start of the TOML frontmatter)",
            "start the file with a `+++` line, then the TOML frontmatter, then another `+++` line, then the \
             description",
        )),
        Fences::NotClosed => Err(ParseError::new(
            file,
            Some(1),
            None,
            "the frontmatter opened by `+++` on line 1 is never closed",
            "add a line that is exactly `+++` after the TOML frontmatter",
        )),
    }
}

/// Where the `+++` fences put an action file's TOML frontmatter.
enum Fences {
    /// The frontmatter's bytes, and where the body starts (after the closing fence's line).
    Closed {
        frontmatter: std::ops::Range<usize>,
        body: usize,
    },
    NoOpening,
    NotClosed,
}

fn fences(text: &str) -> Fences {
    let is_fence = |line: &str| line.trim_end_matches('\n').trim_end_matches('\r') == "+++";
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if !is_fence(first) {
        return Fences::NoOpening;
    }
    let start = first.len();
    let mut offset = start;
    for line in lines {
        if is_fence(line) {
            return Fences::Closed { frontmatter: start..offset, body: offset + line.len() };
        }
        offset += line.len();
    }
    Fences::NotClosed
}

/// The byte range of an action file's TOML frontmatter in `text` (after a leading byte order
/// mark and the opening `+++` line, up to the closing one), as the parser splits it; `None` when
/// the fences are not there. For tools that edit the frontmatter and keep the rest.
pub fn frontmatter_range(text: &str) -> Option<std::ops::Range<usize>> {
    let bom = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    match fences(&text[bom..]) {
        Fences::Closed { frontmatter, .. } => Some(frontmatter.start + bom..frontmatter.end + bom),
        Fences::NoOpening | Fences::NotClosed => None,
    }
}

/// `(title, description)`: a leading `# Title` line is the title; the rest, trimmed, the description.
fn split_body(body: &str) -> (Option<String>, String) {
    let trimmed = body.trim_start();
    let (first, rest) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
    let heading = first.trim_end().strip_prefix('#').filter(|h| h.is_empty() || h.starts_with([' ', '\t']));
    match heading {
        Some(title) => {
            let title = title.trim();
            ((!title.is_empty()).then(|| title.to_string()), rest.trim().to_string())
        }
        None => (None, trimmed.trim().to_string()),
    }
}

fn is_action_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

/// snake_case as we write them, or camelCase as the original project's generator does
/// (`issueId`): an ASCII letter, then letters, digits and `_`.
fn is_input_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Step ids appear as the first segment of `${<step_id>.<path>}`, so they exclude `.` and `args`.
fn is_step_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

struct ActionValidator<'s, 'a> {
    source: &'s TomlSource<'a>,
}

fn root() -> FieldPath {
    FieldPath::root()
}

const TYPES_HINT: &str = "use one of string, integer, number, boolean, array, object (or a GraphQL type name such \
                          as String, Int, DateTime, IssueFilter)";

impl ActionValidator<'_, '_> {
    fn err(&self, path: &FieldPath, message: impl Into<String>, hint: impl Into<String>) -> ParseError {
        self.source.error(path, message, hint)
    }

    fn required<T>(&self, value: Option<T>, path: &FieldPath, hint: &str) -> Result<T, ParseError> {
        let key = match path.segments().last() {
            Some(PathSegment::Key(key)) => key.clone(),
            _ => path.to_string(),
        };
        value.ok_or_else(|| self.err(path, format!("missing required key `{key}`"), hint))
    }

    fn version(&self, version: &str, path: &FieldPath, what: &str) -> Result<semver::Version, ParseError> {
        semver::Version::parse(version).map_err(|e| {
            self.err(
                path,
                format!("`{version}` is not an exact SemVer version: {e}"),
                format!("write {what} as MAJOR.MINOR.PATCH, e.g. \"1.2.0\" (no `v` prefix, no ranges, no `latest`)"),
            )
        })
    }

    fn validate(&self, raw: raw::RawAction, expected_stem: Option<&str>, file: &str) -> Result<ActionFile, ParseError> {
        let name_path = root().key("name");
        let name_hint = format!("add name = \"{}\" (the file name without .md)", expected_stem.unwrap_or("my-action"));
        let name = self.required(raw.name, &name_path, &name_hint)?;
        if !is_action_name(&name) {
            return Err(self.err(
                &name_path,
                format!(
                    "`{name}` is not a valid action name: use lowercase letters, digits, `.`, `_` and `-`, starting \
                     with a letter or digit"
                ),
                "e.g. name = \"list-issues\"",
            ));
        }
        if let Some(stem) = expected_stem
            && stem != name
        {
            return Err(self.err(
                &name_path,
                format!("the name `{name}` does not match the file name `{file}`"),
                format!("rename the file to `{name}.md` or set name = \"{stem}\""),
            ));
        }
        let version_path = root().key("version");
        let version = self.required(raw.version, &version_path, "add version = \"1.0.0\"")?;
        let version = self.version(&version, &version_path, "the action's version")?;
        let source = match raw.source {
            None => None,
            Some(source) => Some(Box::new(ConnectorRef::parse(&source).map_err(|e| {
                self.err(
                    &root().key("source"),
                    format!("`{source}` is not a valid source ({e})"),
                    "write <scheme>://<owner>/<path>@<semver>, e.g. \"github://acme/actions/list-issues@1.0.0\"",
                )
            })?)),
        };
        let requires = self.requires(raw.requires)?;
        let match_path = root().key("match");
        let intent_hint = "add [match] intent = \"<what the action does, in a user's words>\"";
        let intent = self.required(raw.match_.and_then(|m| m.intent), &match_path.key("intent"), intent_hint)?;
        if intent.trim().is_empty() {
            return Err(self.err(&match_path.key("intent"), "`intent` must not be empty", intent_hint));
        }
        let inputs = self.inputs(raw.inputs.unwrap_or_default())?;
        let steps = self.steps(raw.execute, &requires, &inputs)?;
        let approval = self.approval(raw.approval, &inputs)?;
        Ok(ActionFile {
            name,
            version,
            source,
            requires,
            intent,
            inputs,
            steps,
            approval,
            title: None,
            description: String::new(),
            sha256: ContentHash::from_digest([0; 32]),
            run_texts: texts::RunTextsCell::default(),
        })
    }

    fn requires(&self, raw: Option<raw::RawRequires>) -> Result<Vec<RequiredConnector>, ParseError> {
        let path = root().key("requires").key("connectors");
        let hint = "add a [[requires.connectors]] table with name, version, hash and capabilities";
        let raw = raw.and_then(|r| r.connectors).unwrap_or_default();
        if raw.is_empty() {
            return Err(self.err(&path, "an action must require at least one connector", hint));
        }
        // Sized exactly, as the other lists of a parsed action: an action stays in memory for as
        // long as it is installed, and a `Vec` grown by `push` keeps room for four.
        let mut required: Vec<RequiredConnector> = Vec::with_capacity(raw.len());
        for (index, entry) in raw.into_iter().enumerate() {
            let element = path.index(index);
            let name_path = element.key("name");
            let name = self.required(entry.name, &name_path, "add name = \"github://<owner>/<repo>\"")?;
            let fqn = Fqn::parse(&name).map_err(|e| {
                let hint = if name.contains('@') {
                    "put the version in `version`, not in the name"
                } else {
                    "use the connector's FQN, e.g. github://aileron/github"
                };
                self.err(&name_path, e.to_string(), hint)
            })?;
            if required.iter().any(|r| r.name == fqn) {
                return Err(self.err(
                    &name_path,
                    format!("the connector `{fqn}` is required twice"),
                    "require each connector once and merge the capabilities",
                ));
            }
            let version_path = element.key("version");
            let version = self.required(entry.version, &version_path, "add version = \"<exact version>\"")?;
            let version = self.version(&version, &version_path, "the connector version")?;
            let hash_path = element.key("hash");
            let hash_hint = "pin it to the installed connector with `aileron action add <file> --pin` (it shows the \
                             hash and asks), or write hash = \"sha256:<64 hex digits>\" (aileron connector install \
                             prints it)";
            let hash = self.required(entry.hash, &hash_path, hash_hint)?;
            let hash = ContentHash::parse(&hash).map_err(|e| self.err(&hash_path, e.to_string(), hash_hint))?;
            let capabilities = self.capabilities(entry.capabilities, &element.key("capabilities"))?;
            required.push(RequiredConnector { name: fqn, version, hash, capabilities });
        }
        Ok(required)
    }

    fn capabilities(&self, raw: Option<Vec<String>>, path: &FieldPath) -> Result<Vec<CapabilityEntry>, ParseError> {
        let hint = "list what the action uses: op names, a credential kind (api_key, oauth2, aws_sigv4), \
                    network:<host:port>, spawn:<op>";
        let raw = self.required(raw, path, hint)?;
        if raw.is_empty() {
            return Err(self.err(path, "`capabilities` must list at least one entry", hint));
        }
        let mut entries = Vec::with_capacity(raw.len());
        for (index, text) in raw.iter().enumerate() {
            let element = path.index(index);
            let entry = CapabilityEntry::parse(text).map_err(|reason| self.err(&element, reason, hint))?;
            if entries.contains(&entry) {
                return Err(self.err(&element, format!("`{text}` is listed twice"), "remove the duplicate"));
            }
            entries.push(entry);
        }
        Ok(entries)
    }

    fn inputs(&self, raw: Vec<raw::RawInput>) -> Result<Vec<InputSpec>, ParseError> {
        let path = root().key("inputs");
        let mut inputs: Vec<InputSpec> = Vec::with_capacity(raw.len());
        for (index, input) in raw.into_iter().enumerate() {
            let element = path.index(index);
            let name_path = element.key("name");
            let name = self.required(input.name, &name_path, "add name = \"<snake_case name>\"")?;
            if !is_input_name(&name) {
                return Err(self.err(
                    &name_path,
                    format!("`{name}` is not a valid input name: use letters, digits and `_`, starting with a letter"),
                    "e.g. name = \"issue_title\"",
                ));
            }
            if inputs.iter().any(|i| i.name == name) {
                return Err(self.err(
                    &name_path,
                    format!("the input `{name}` is declared twice"),
                    "rename or remove one",
                ));
            }
            let type_path = element.key("type");
            let kind_text = self.required(input.kind, &type_path, TYPES_HINT)?;
            let graphql = match InputType::parse(&kind_text) {
                Some(kind) => GraphqlType { kind, items_type: None, format: None, named: None },
                None => GraphqlType::parse(&kind_text)
                    .ok_or_else(|| self.err(&type_path, format!("`{kind_text}` is not an input type"), TYPES_HINT))?,
            };
            let kind = graphql.kind;
            let description_path = element.key("description");
            let description_hint = "describe the input for the model, e.g. description = \"Repository owner\"";
            let description = self.required(input.description, &description_path, description_hint)?;
            if description.trim().is_empty() {
                return Err(self.err(&description_path, "`description` must not be blank", description_hint));
            }
            if let Some(label) = &input.label
                && label.trim().is_empty()
            {
                return Err(self.err(
                    &element.key("label"),
                    "`label` must not be blank",
                    "give a short human label or remove the key",
                ));
            }
            if input.multiline.is_some() && kind != InputType::String {
                return Err(self.err(
                    &element.key("multiline"),
                    format!("`multiline` applies only to string inputs, not {}", kind.as_str()),
                    "remove `multiline` or change the type to string",
                ));
            }
            let items_type = match input.items_type {
                None => graphql.items_type,
                Some(_) if kind != InputType::Array => {
                    return Err(self.err(
                        &element.key("items_type"),
                        format!("`items_type` applies only to array inputs, not {}", kind.as_str()),
                        "remove `items_type` or change the type to array",
                    ));
                }
                Some(items) => Some(InputType::parse(&items).ok_or_else(|| {
                    self.err(&element.key("items_type"), format!("`{items}` is not an input type"), TYPES_HINT)
                })?),
            };
            inputs.push(InputSpec {
                name,
                kind,
                required: input.required.unwrap_or(true),
                description,
                label: input.label,
                multiline: input.multiline.unwrap_or(false),
                items_type,
                format: graphql.format,
                graphql_name: graphql.named,
            });
        }
        Ok(inputs)
    }

    fn steps(
        &self,
        raw: Option<Vec<raw::RawStep>>,
        requires: &[RequiredConnector],
        inputs: &[InputSpec],
    ) -> Result<Vec<Step>, ParseError> {
        let path = root().key("execute");
        let raw = raw.unwrap_or_default();
        if raw.is_empty() {
            return Err(self.err(
                &path,
                "an action must have at least one [[execute]] step",
                "add an [[execute]] table with id, connector and op",
            ));
        }
        let all_ids: Vec<Option<&str>> = raw.iter().map(|s| s.id.as_deref()).collect();
        let mut steps: Vec<Step> = Vec::with_capacity(raw.len());
        for (index, step) in raw.iter().enumerate() {
            let element = path.index(index);
            let id_path = element.key("id");
            let id = self.required(step.id.clone(), &id_path, "add id = \"<step name>\"")?;
            if !is_step_id(&id) {
                return Err(self.err(
                    &id_path,
                    format!("`{id}` is not a valid step id: use letters, digits, `_` and `-`"),
                    "step ids are referenced as ${<id>.<path>}, so they cannot contain `.`",
                ));
            }
            if id == "args" {
                return Err(self.err(
                    &id_path,
                    "`args` is reserved for ${args.<input>} and cannot be a step id",
                    "choose another id",
                ));
            }
            if steps.iter().any(|s| s.id == id) {
                return Err(self.err(
                    &id_path,
                    format!("the step id `{id}` is used twice"),
                    "give each step its own id",
                ));
            }
            let connector_path = element.key("connector");
            let connector = self.required(step.connector.clone(), &connector_path, "add connector = \"<FQN>\"")?;
            let declared: Vec<String> = requires.iter().map(|r| r.name.to_string()).collect();
            let fqn = Fqn::parse(&connector).ok().filter(|fqn| requires.iter().any(|r| &r.name == fqn));
            let Some(connector) = fqn else {
                return Err(self.err(
                    &connector_path,
                    format!("`{connector}` is not one of the required connectors ({})", declared.join(", ")),
                    "use the name of a [[requires.connectors]] entry, or add one for this connector",
                ));
            };
            let op_path = element.key("op");
            let op_hint = "name the connector operation to call, e.g. op = \"list_issues\"";
            let op = self.required(step.op.clone(), &op_path, op_hint)?;
            if op.is_empty() {
                return Err(self.err(&op_path, "`op` must not be empty", op_hint));
            }
            validate_op_name(&op).map_err(|reason| self.err(&op_path, reason, op_hint))?;
            let timeout_seconds = match step.timeout_seconds {
                None => None,
                Some(seconds) if (1..=i64::from(MAX_STEP_TIMEOUT_SECONDS)).contains(&seconds) => Some(seconds as u32),
                Some(seconds) => {
                    return Err(self.err(
                        &element.key("timeout_seconds"),
                        format!("`timeout_seconds` must be between 1 and {MAX_STEP_TIMEOUT_SECONDS} (got {seconds})"),
                        "steps run for at most 5 minutes; omit the key for the default of 30 seconds",
                    ));
                }
            };
            let inputs_path = element.key("inputs");
            let step_inputs = self.json_table(step.inputs.clone().unwrap_or_default(), &inputs_path)?;
            for (key, value) in &step_inputs {
                self.check_references(value, &inputs_path.key(key), |reference| {
                    self.step_reference(reference, inputs, &all_ids, index)
                })?;
            }
            steps.push(Step { id, connector, op, idempotent: step.idempotent, timeout_seconds, inputs: step_inputs });
        }
        Ok(steps)
    }

    /// Whether a reference in step `index` may be used there; `Err((message, hint))` if not.
    fn step_reference(
        &self,
        reference: &Reference,
        inputs: &[InputSpec],
        step_ids: &[Option<&str>],
        index: usize,
    ) -> Result<(), (String, String)> {
        match &reference.source {
            ReferenceSource::Args(input) => input_reference(reference, input, inputs),
            ReferenceSource::Step(step) => match step_ids.iter().position(|id| *id == Some(step.as_str())) {
                Some(position) if position < index => Ok(()),
                Some(position) if position == index => Err((
                    format!("`{reference}` refers to this step's own output"),
                    "a step can only use the output of steps listed before it".to_string(),
                )),
                Some(_) => Err((
                    format!("`{reference}` refers to step `{step}`, which runs after this one"),
                    "a step can only use the output of steps listed before it".to_string(),
                )),
                None => Err((
                    format!("`{reference}` names neither an input (`${{args.<input>}}`) nor an earlier step"),
                    "use ${args.<input>} for a call argument or ${<step id>.<path>} for an earlier step's output"
                        .to_string(),
                )),
            },
        }
    }

    /// Walks a JSON value and checks every template string in it.
    fn check_references(
        &self,
        value: &Value,
        path: &FieldPath,
        allowed: impl Fn(&Reference) -> Result<(), (String, String)> + Copy,
    ) -> Result<(), ParseError> {
        match value {
            Value::String(_) => {
                let references = references_in(value).map_err(|e| {
                    self.err(path, e.to_string(), "references look like ${args.<input>} or ${<step id>.<path>}")
                })?;
                for reference in &references {
                    allowed(reference).map_err(|(message, hint)| self.err(path, message, hint))?;
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    self.check_references(item, &path.index(index), allowed)?;
                }
            }
            Value::Object(map) => {
                for (key, item) in map {
                    self.check_references(item, &path.key(key), allowed)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// TOML values as the JSON the connector receives.
    fn json_table(&self, table: toml::Table, path: &FieldPath) -> Result<Map<String, Value>, ParseError> {
        let mut map = Map::new();
        for (key, value) in table {
            let json = self.json_value(value, &path.key(&key))?;
            map.insert(key, json);
        }
        Ok(map)
    }

    fn json_value(&self, value: toml::Value, path: &FieldPath) -> Result<Value, ParseError> {
        Ok(match value {
            toml::Value::String(s) => Value::String(s),
            toml::Value::Integer(i) => Value::from(i),
            toml::Value::Float(f) => serde_json::Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| self.err(path, format!("`{f}` has no JSON representation"), "use a finite number"))?,
            toml::Value::Boolean(b) => Value::Bool(b),
            // JSON has no datetime; the connector receives the RFC 3339 text.
            toml::Value::Datetime(dt) => Value::String(dt.to_string()),
            toml::Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(index, item)| self.json_value(item, &path.index(index)))
                    .collect::<Result<_, _>>()?,
            ),
            toml::Value::Table(table) => Value::Object(self.json_table(table, path)?),
        })
    }

    fn approval(&self, raw: Option<raw::RawApproval>, inputs: &[InputSpec]) -> Result<Approval, ParseError> {
        let Some(raw) = raw else {
            return Ok(Approval::default());
        };
        let path = root().key("approval").key("preview");
        let preview = match raw.preview {
            None => None,
            Some(preview) => {
                let op_path = path.key("op");
                let op_hint = "name a read-only op of the first step's connector, e.g. op = \"get_issue\"";
                let op = self.required(preview.op, &op_path, op_hint)?;
                if op.is_empty() {
                    return Err(self.err(&op_path, "`op` must not be empty", op_hint));
                }
                validate_op_name(&op).map_err(|reason| self.err(&op_path, reason, op_hint))?;
                let args_path = path.key("args");
                let args = self.json_table(preview.args.unwrap_or_default(), &args_path)?;
                for (key, value) in &args {
                    self.check_references(value, &args_path.key(key), |reference| match &reference.source {
                        ReferenceSource::Args(input) => input_reference(reference, input, inputs),
                        ReferenceSource::Step(_) => Err((
                            format!("`{reference}`: the approval preview runs before any step"),
                            "the preview can only reference ${args.<input>}".to_string(),
                        )),
                    })?;
                }
                let render_path = path.key("render");
                let render = preview.render.unwrap_or_default().0;
                for (label, json_path) in &render {
                    let entry_path = render_path.key(label);
                    if label.trim().is_empty() {
                        return Err(self.err(&entry_path, "a render label must not be blank", "name the field"));
                    }
                    if json_path.is_empty() || json_path.split('.').any(str::is_empty) {
                        return Err(self.err(
                            &entry_path,
                            format!("{json_path:?} is not a dotted JSON path"),
                            "write a path into the preview output, e.g. \"issue.title\" or \"items.0.name\"",
                        ));
                    }
                }
                let multiline_path = path.key("multiline");
                let multiline = preview.multiline.unwrap_or_default();
                for (index, label) in multiline.iter().enumerate() {
                    if !render.iter().any(|(l, _)| l == label) {
                        return Err(self.err(
                            &multiline_path.index(index),
                            format!("`{label}` is not a label of [approval.preview.render]"),
                            "list only labels that render defines",
                        ));
                    }
                }
                Some(Box::new(Preview { op, args, render, multiline }))
            }
        };
        let expires_after_ms = match raw.expires_after {
            None => None,
            Some(text) => Some(crate::approval::parse_expiry(&text).map_err(|reason| {
                self.err(
                    &root().key("approval").key("expires_after"),
                    reason,
                    "write a duration from 1m to 7d, e.g. expires_after = \"30m\", \"4h\" or \"2d\"",
                )
            })?),
        };
        Ok(Approval { required: raw.required.unwrap_or(false), expires_after_ms, preview })
    }
}

fn input_reference(reference: &Reference, input: &str, inputs: &[InputSpec]) -> Result<(), (String, String)> {
    if inputs.iter().any(|i| i.name == input) {
        return Ok(());
    }
    let declared = if inputs.is_empty() {
        "this action declares no inputs".to_string()
    } else {
        format!("declared: {}", inputs.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", "))
    };
    Err((
        format!("`{reference}` names no declared input ({declared})"),
        "declare it in [[inputs]] or fix the name".to_string(),
    ))
}
