//! The spawn decision (SPEC §5), the part that needs no IO: which argv a declared operation's
//! template yields for a call's arguments, whether a raw envelope's argv is one some template
//! allows, and whether its environment keys are declared. The shell then resolves the program
//! on disk (symlinks, hash, setuid), the working directory and the confinement.
//!
//! Template grammar: words separated by whitespace (no shell, no quoting); `{name}` placeholders
//! inside a word; `[` … `]` around one or more words marks an optional group, kept only when every
//! placeholder in it has a value. A placeholder outside a group with no value is a denial with
//! `details.boundary_detail = "envelope"`.
//!
//! A value can never become a new option or a new word: a value that starts a word must not begin
//! with `-`, and no value may hold a newline, a carriage return or a NUL byte, unless the template
//! puts the word after a literal `--` (end of options). NUL is refused everywhere (it cannot be
//! passed through `execve`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CapabilitySubset, check_spawn_declared, sandbox_denied};
use crate::failure::Failure;
use crate::manifest::{ConnectorManifest, SpawnCapability, SpawnOperation};

/// A spawn the gate allowed, before the shell resolves the program and the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnPlan {
    /// The declared operation this argv belongs to.
    pub op: String,
    /// The declared program path, as written in the manifest (`~/` not yet expanded).
    pub program: String,
    /// The argv to execute; `argv[0]` is the template's first word.
    pub argv: Vec<String>,
    /// The argv with every filled placeholder replaced by its `{name}`: what audit records show.
    pub shape: Vec<String>,
    /// Environment the caller set (keys ⊆ `env_passthrough`, never a credential key).
    pub env: Vec<(String, String)>,
    /// Credential environment keys the host must fill (⊆ `credential_env_keys`).
    pub credential_env_keys: Vec<String>,
    /// A working directory the caller asked for (checked against `fs_read` by the shell).
    pub cwd: Option<String>,
    pub stdin: Option<Vec<u8>>,
}

/// The JSON a guest passes to `spawn` (SPEC §5). Unknown fields are refused: an envelope is a
/// request for authority, and a field this version ignores could be one the guest expects honoured.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnEnvelope {
    pub program: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub credential_env_keys: Option<Vec<String>>,
}

/// One template word: literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Slot(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    pieces: Vec<Piece>,
    /// Whether a literal `--` comes before this word in the template.
    after_end_of_options: bool,
    /// Index of the optional group this word belongs to, if any.
    group: Option<usize>,
}

impl Word {
    fn slots(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Slot(name) => Some(name.as_str()),
            Piece::Text(_) => None,
        })
    }

    fn has_slot(&self) -> bool {
        self.slots().next().is_some()
    }

    /// The word with each placeholder written as `{name}`.
    fn shape(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(text) => text.clone(),
                Piece::Slot(name) => format!("{{{name}}}"),
            })
            .collect()
    }
}

/// A template split into words and groups.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Template {
    words: Vec<Word>,
}

fn parse_template(argv: &str) -> Template {
    let mut words = Vec::new();
    let mut group: Option<usize> = None;
    let mut groups = 0;
    let mut after_end = false;
    for raw in argv.split_whitespace() {
        let mut text = raw;
        if let Some(rest) = text.strip_prefix('[') {
            group = Some(groups);
            groups += 1;
            text = rest;
        }
        let closes = text.ends_with(']') && group.is_some();
        if closes {
            text = &text[..text.len() - 1];
        }
        if !text.is_empty() {
            words.push(Word { pieces: pieces(text), after_end_of_options: after_end, group });
            if text == "--" {
                after_end = true;
            }
        }
        if closes {
            group = None;
        }
    }
    Template { words }
}

fn pieces(word: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut rest = word;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if is_slot_name(&after[..close]) => {
                text.push_str(&rest[..open]);
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Slot(after[..close].to_string()));
                rest = &after[close + 1..];
            }
            _ => {
                text.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    pieces
}

fn is_slot_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A denial of the envelope's content (`boundary_detail: "envelope"`).
fn envelope_denied(manifest: &ConnectorManifest, requested: String, message: String) -> Failure {
    sandbox_denied(manifest, Some(requested), message).with_detail("boundary_detail", "envelope")
}

/// Why a value may not fill a placeholder, if it may not.
fn value_problem(value: &str, starts_word: bool, after_end_of_options: bool) -> Option<&'static str> {
    if value.contains('\0') {
        return Some("holds a NUL byte");
    }
    if after_end_of_options {
        return None;
    }
    if value.contains(['\n', '\r']) {
        return Some("holds a line break");
    }
    if starts_word && value.starts_with('-') {
        return Some("starts with `-` and would be read as an option");
    }
    None
}

/// The call's argument map as strings: strings as they are, numbers and booleans written out,
/// `null` as absent. Anything else is refused.
pub fn spawn_args(args: &Value) -> Result<BTreeMap<String, String>, String> {
    let Value::Object(map) = args else {
        return Err("spawn arguments must be a JSON object of strings".to_string());
    };
    let mut values = BTreeMap::new();
    for (name, value) in map {
        let text = match value {
            Value::Null => continue,
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            _ => return Err(format!("spawn argument `{name}` must be a string, a number or a boolean")),
        };
        values.insert(name.clone(), text);
    }
    Ok(values)
}

fn spawn_capability<'m>(manifest: &'m ConnectorManifest, requested: &str) -> Result<&'m SpawnCapability, Failure> {
    manifest.spawn.as_ref().ok_or_else(|| {
        sandbox_denied(
            manifest,
            Some(requested.to_string()),
            "the connector manifest declares no [capabilities.spawn]".to_string(),
        )
    })
}

/// `spawn_op`: the argv of a declared operation, its placeholders filled from `args`; the action
/// must declare `spawn:<op>`.
pub fn plan_operation(
    manifest: &ConnectorManifest,
    subset: &CapabilitySubset,
    op: &str,
    args: &BTreeMap<String, String>,
) -> Result<SpawnPlan, Failure> {
    super::check_spawn_op(manifest, subset, op)?;
    let spawn = spawn_capability(manifest, &format!("spawn:{op}"))?;
    let operation = spawn.operation(op).expect("check_spawn_op found it");
    let (argv, shape) = render(manifest, op, operation, args)?;
    Ok(SpawnPlan {
        op: op.to_string(),
        program: operation.program.clone(),
        argv,
        shape,
        env: Vec::new(),
        credential_env_keys: Vec::new(),
        cwd: None,
        stdin: None,
    })
}

fn render(
    manifest: &ConnectorManifest,
    op: &str,
    operation: &SpawnOperation,
    args: &BTreeMap<String, String>,
) -> Result<(Vec<String>, Vec<String>), Failure> {
    let template = parse_template(&operation.argv);
    let group_complete = |group: usize| {
        template
            .words
            .iter()
            .filter(|word| word.group == Some(group))
            .flat_map(Word::slots)
            .all(|slot| args.contains_key(slot))
    };
    let (mut argv, mut shape) = (Vec::new(), Vec::new());
    for word in &template.words {
        if let Some(group) = word.group
            && !group_complete(group)
        {
            continue;
        }
        let mut filled = String::new();
        for (index, piece) in word.pieces.iter().enumerate() {
            match piece {
                Piece::Text(text) => filled.push_str(text),
                Piece::Slot(name) => {
                    let Some(value) = args.get(name) else {
                        return Err(envelope_denied(
                            manifest,
                            format!("spawn:{op}"),
                            format!("spawn operation `{op}` needs a value for `{{{name}}}` and the call gave none"),
                        ));
                    };
                    if let Some(problem) = value_problem(value, index == 0, word.after_end_of_options) {
                        return Err(envelope_denied(
                            manifest,
                            format!("spawn:{op}"),
                            format!("the value for `{{{name}}}` of spawn operation `{op}` {problem}"),
                        ));
                    }
                    filled.push_str(value);
                }
            }
        }
        // The rendered word, not only each value: `{a}{b}` with an empty `a` and `b = "--version"`
        // starts with `-` although no value that starts the word does (the re-attack's L5).
        let written_as_option = matches!(word.pieces.first(), Some(Piece::Text(text)) if text.starts_with('-'));
        if !word.after_end_of_options && !written_as_option && filled.starts_with('-') {
            return Err(envelope_denied(
                manifest,
                format!("spawn:{op}"),
                format!(
                    "the values for `{}` of spawn operation `{op}` render `{filled}`, which would be read as an option",
                    word.shape()
                ),
            ));
        }
        argv.push(filled);
        shape.push(word.shape());
    }
    Ok((argv, shape))
}

/// `spawn`: an envelope is allowed when its program is declared and its argv is what one of the
/// program's declared operations renders for some values; that operation must be declared by
/// the action too. Environment keys must be declared (`env_passthrough`), never a credential key;
/// requested credential keys must be among `credential_env_keys`.
pub fn plan_envelope(
    manifest: &ConnectorManifest,
    subset: &CapabilitySubset,
    envelope: SpawnEnvelope,
) -> Result<SpawnPlan, Failure> {
    let requested = format!("spawn:{}", envelope.program);
    let spawn = spawn_capability(manifest, &requested)?;
    if spawn.program(&envelope.program).is_none() {
        let granted: Vec<&str> = spawn.programs.iter().map(|p| p.path.as_str()).collect();
        return Err(sandbox_denied(
            manifest,
            Some(requested),
            format!(
                "`{}` is not a program the connector manifest declares",
                envelope.program.chars().take(256).collect::<String>()
            ),
        )
        .with_detail("granted", granted));
    }
    if envelope.argv.is_empty() {
        return Err(envelope_denied(manifest, requested, "the spawn envelope's argv is empty".to_string()));
    }
    let mut matched: Vec<(&String, Vec<String>)> = Vec::new();
    for (op, operation) in spawn.operations.iter().filter(|(_, o)| o.program == envelope.program) {
        if let Some(shape) = match_argv(&parse_template(&operation.argv), &envelope.argv) {
            matched.push((op, shape));
        }
    }
    if matched.is_empty() {
        return Err(envelope_denied(
            manifest,
            requested,
            format!("the argv given for `{}` matches none of its declared operations' templates", envelope.program),
        ));
    }
    // Prefer an operation the action declares; otherwise the action check below names the first.
    let index = matched.iter().position(|(op, _)| subset.declares_spawn(op)).unwrap_or(0);
    let (op, shape) = matched.swap_remove(index);
    check_spawn_declared(subset, op)?;
    let mut env = Vec::new();
    for (key, value) in envelope.env.unwrap_or_default() {
        if spawn.credential_env_keys.contains(&key) {
            return Err(envelope_denied(
                manifest,
                format!("env:{key}"),
                format!("`{key}` carries the credential and is set by aileron only"),
            ));
        }
        if !spawn.env_passthrough.contains(&key) {
            return Err(envelope_denied(
                manifest,
                format!("env:{}", key.chars().take(128).collect::<String>()),
                format!(
                    "environment key `{}` is not in the manifest's env_passthrough",
                    key.chars().take(128).collect::<String>()
                ),
            )
            .with_detail("granted", spawn.env_passthrough.clone()));
        }
        if value.contains('\0') {
            return Err(envelope_denied(
                manifest,
                format!("env:{key}"),
                format!("the value of `{key}` holds a NUL byte"),
            ));
        }
        env.push((key, value));
    }
    let credential_env_keys = envelope.credential_env_keys.unwrap_or_default();
    if let Some(key) = credential_env_keys.iter().find(|key| !spawn.credential_env_keys.contains(key)) {
        return Err(envelope_denied(
            manifest,
            format!("env:{}", key.chars().take(128).collect::<String>()),
            format!("`{}` is not among the manifest's credential_env_keys", key.chars().take(128).collect::<String>()),
        )
        .with_detail("granted", spawn.credential_env_keys.clone()));
    }
    if let Some(cwd) = &envelope.cwd
        && cwd.contains('\0')
    {
        return Err(envelope_denied(manifest, requested, "the spawn envelope's cwd holds a NUL byte".to_string()));
    }
    Ok(SpawnPlan {
        op: op.clone(),
        program: envelope.program,
        argv: envelope.argv,
        shape,
        env,
        credential_env_keys,
        cwd: envelope.cwd,
        stdin: envelope.stdin.map(String::into_bytes),
    })
}

/// Whether `argv` is what `template` renders for some values (each placeholder bound to one value
/// wherever it appears, each value allowed where it lands); the argv's shape if so.
fn match_argv(template: &Template, argv: &[String]) -> Option<Vec<String>> {
    let groups: Vec<Option<usize>> = {
        let mut seen = Vec::new();
        for word in &template.words {
            if let Some(group) = word.group
                && !seen.contains(&Some(group))
            {
                seen.push(Some(group));
            }
        }
        seen
    };
    // Every choice of groups to keep (templates have few groups; more than 12 is not searched).
    if groups.len() > 12 {
        return None;
    }
    for mask in 0u32..(1 << groups.len()) {
        let kept = |group: Option<usize>| match group {
            None => true,
            Some(group) => {
                let position = groups.iter().position(|g| *g == Some(group)).expect("listed");
                mask & (1 << position) != 0
            }
        };
        let words: Vec<&Word> = template.words.iter().filter(|word| kept(word.group)).collect();
        if words.len() != argv.len() {
            continue;
        }
        let mut bound: BTreeMap<String, String> = BTreeMap::new();
        if words.iter().zip(argv).all(|(word, value)| match_word(word, value, &mut bound)) {
            return Some(words.iter().map(|word| word.shape()).collect());
        }
    }
    None
}

/// Matches one argv word against a template word, extending `bound`.
fn match_word(word: &Word, value: &str, bound: &mut BTreeMap<String, String>) -> bool {
    if !word.has_slot() {
        return word.shape() == value;
    }
    let mut attempt = bound.clone();
    if match_pieces(&word.pieces, value, 0, word.after_end_of_options, &mut attempt) {
        *bound = attempt;
        return true;
    }
    false
}

fn match_pieces(
    pieces: &[Piece],
    value: &str,
    index: usize,
    after_end: bool,
    bound: &mut BTreeMap<String, String>,
) -> bool {
    let Some(piece) = pieces.get(index) else {
        return value.is_empty();
    };
    match piece {
        Piece::Text(text) => value
            .strip_prefix(text.as_str())
            .is_some_and(|rest| match_pieces(pieces, rest, index + 1, after_end, bound)),
        Piece::Slot(name) => {
            let starts_word = index == 0;
            if let Some(previous) = bound.get(name).cloned() {
                return value
                    .strip_prefix(previous.as_str())
                    .is_some_and(|rest| match_pieces(pieces, rest, index + 1, after_end, bound));
            }
            // Try every split, shortest value first (values are non-empty).
            for end in value.char_indices().map(|(at, c)| at + c.len_utf8()) {
                let candidate = &value[..end];
                if value_problem(candidate, starts_word, after_end).is_some() {
                    continue;
                }
                bound.insert(name.clone(), candidate.to_string());
                if match_pieces(pieces, &value[end..], index + 1, after_end, bound) {
                    return true;
                }
                bound.remove(name);
            }
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Boundary;
    use crate::manifest::parse_manifest;

    const MANIFEST: &str = r#"[connector]
name = "github://aileron/git"
version = "0.1.0"

[capabilities.spawn]
programs = [{ path = "/usr/bin/git" }]
env_passthrough = ["GIT_AUTHOR_NAME", "GH_TOKEN"]
credential_env_keys = ["GH_TOKEN"]

[capabilities.credential]
kind = "api_key"
scope = "push"

[capabilities.spawn.operations.log]
argv = "git log [--since={since}] [--author={author}] -n {count} --format=%H%x09%s"
description = "List commits"

[capabilities.spawn.operations.show]
argv = "git show {rev} -- {path}"
description = "Show a file at a revision"

[capabilities.spawn.operations.glued]
argv = "git ls-files {a}{b}"
description = "Two values in one word"
"#;

    fn manifest() -> ConnectorManifest {
        parse_manifest(MANIFEST, "manifest.toml").unwrap()
    }

    fn subset(entries: &[&str]) -> CapabilitySubset {
        CapabilitySubset::parse(entries).unwrap()
    }

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn operations_render_with_optional_groups_and_shapes() {
        let (manifest, subset) = (manifest(), subset(&["spawn:log", "spawn:show"]));
        // (args, argv, shape)
        let table: [(&[(&str, &str)], &[&str], &[&str]); 3] = [
            (
                &[("count", "5")],
                &["git", "log", "-n", "5", "--format=%H%x09%s"],
                &["git", "log", "-n", "{count}", "--format=%H%x09%s"],
            ),
            (
                &[("count", "5"), ("since", "2026-01-01")],
                &["git", "log", "--since=2026-01-01", "-n", "5", "--format=%H%x09%s"],
                &["git", "log", "--since={since}", "-n", "{count}", "--format=%H%x09%s"],
            ),
            (
                // A value inside an option word may start with `-`: it cannot become an option.
                &[("count", "1"), ("author", "-x y")],
                &["git", "log", "--author=-x y", "-n", "1", "--format=%H%x09%s"],
                &["git", "log", "--author={author}", "-n", "{count}", "--format=%H%x09%s"],
            ),
        ];
        for (call, argv, shape) in table {
            let plan = plan_operation(&manifest, &subset, "log", &args(call)).unwrap();
            assert_eq!(plan.argv, strings(argv), "{call:?}");
            assert_eq!(plan.shape, strings(shape), "{call:?}");
            assert_eq!(plan.program, "/usr/bin/git");
        }
    }

    #[test]
    fn values_never_become_options_or_lines() {
        let (manifest, subset) = (manifest(), subset(&["spawn:log", "spawn:show"]));
        // (op, args, refused because)
        let table: [(&str, &[(&str, &str)], &str); 6] = [
            ("log", &[], "needs a value for `{count}`"),
            ("log", &[("count", "--upload-pack=touch /tmp/x")], "would be read as an option"),
            ("log", &[("count", "-1")], "would be read as an option"),
            ("log", &[("count", "1"), ("since", "x\n--exec=y")], "line break"),
            ("show", &[("rev", "HEAD"), ("path", "a\0b")], "NUL"),
            ("show", &[("rev", "-p"), ("path", "x")], "would be read as an option"),
        ];
        for (op, call, because) in table {
            let failure = plan_operation(&manifest, &subset, op, &args(call)).unwrap_err();
            assert!(failure.message.contains(because), "{call:?}: {}", failure.message);
            assert_eq!(failure.details.get("boundary_detail").and_then(Value::as_str), Some("envelope"), "{call:?}");
        }
        // The re-attack's L5: two values glued into one word, the first empty, the second an
        // option. Neither value starts the word with `-` on its own; the rendered word does.
        let glued = CapabilitySubset::parse(&["spawn:glued"]).unwrap();
        let failure = plan_operation(&manifest, &glued, "glued", &args(&[("a", ""), ("b", "--version")])).unwrap_err();
        assert!(
            failure.message.contains("render `--version`, which would be read as an option"),
            "{}",
            failure.message
        );
        let plan = plan_operation(&manifest, &glued, "glued", &args(&[("a", "src/"), ("b", "-x")])).unwrap();
        assert_eq!(plan.argv, strings(&["git", "ls-files", "src/-x"]));
        // After `--` a value may start with `-` or hold a line break.
        let plan =
            plan_operation(&manifest, &subset, "show", &args(&[("rev", "HEAD"), ("path", "-odd\nname")])).unwrap();
        assert_eq!(plan.argv, strings(&["git", "show", "HEAD", "--", "-odd\nname"]));
    }

    #[test]
    fn the_action_must_declare_the_operation() {
        let failure =
            plan_operation(&manifest(), &subset(&["spawn:show"]), "log", &args(&[("count", "1")])).unwrap_err();
        assert_eq!(failure.boundary, Boundary::Action);
        let failure = plan_operation(&manifest(), &subset(&["spawn:log"]), "push", &args(&[])).unwrap_err();
        assert_eq!(failure.boundary, Boundary::Sandbox);
    }

    fn envelope(program: &str, argv: &[&str]) -> SpawnEnvelope {
        SpawnEnvelope { program: program.into(), argv: strings(argv), ..SpawnEnvelope::default() }
    }

    #[test]
    fn envelopes_must_match_a_declared_template() {
        let (manifest, granted) = (manifest(), subset(&["spawn:log", "spawn:show"]));
        let plan = plan_envelope(
            &manifest,
            &granted,
            envelope("/usr/bin/git", &["git", "log", "--author=me", "-n", "3", "--format=%H%x09%s"]),
        )
        .unwrap();
        assert_eq!(plan.op, "log");
        assert_eq!(plan.shape, strings(&["git", "log", "--author={author}", "-n", "{count}", "--format=%H%x09%s"]));
        // (envelope, refused because)
        let table = [
            (envelope("/bin/sh", &["sh", "-c", "id"]), "not a program the connector manifest declares"),
            (envelope("/usr/bin/git", &["git", "log", "-n", "3"]), "matches none"),
            (envelope("/usr/bin/git", &["git", "log", "-n", "--upload-pack=x", "--format=%H%x09%s"]), "matches none"),
            (
                envelope("/usr/bin/git", &["git", "-c", "core.pager=x", "log", "-n", "1", "--format=%H%x09%s"]),
                "matches none",
            ),
            (envelope("/usr/bin/git", &[]), "argv is empty"),
        ];
        for (envelope, because) in table {
            let failure = plan_envelope(&manifest, &granted, envelope.clone()).unwrap_err();
            assert!(failure.message.contains(because), "{envelope:?}: {}", failure.message);
        }
        let show_only = subset(&["spawn:show"]);
        let failure = plan_envelope(
            &manifest,
            &show_only,
            envelope("/usr/bin/git", &["git", "log", "-n", "1", "--format=%H%x09%s"]),
        )
        .unwrap_err();
        assert_eq!(failure.boundary, Boundary::Action);
    }

    #[test]
    fn envelope_environment_is_declared_and_never_the_credential() {
        let (manifest, subset) = (manifest(), subset(&["spawn:show"]));
        let with_env = |pairs: &[(&str, &str)]| SpawnEnvelope {
            env: Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..envelope("/usr/bin/git", &["git", "show", "HEAD", "--", "README"])
        };
        assert_eq!(
            plan_envelope(&manifest, &subset, with_env(&[("GIT_AUTHOR_NAME", "A")])).unwrap().env,
            vec![("GIT_AUTHOR_NAME".into(), "A".into())]
        );
        for (pairs, because) in [
            (&[("LD_PRELOAD", "/tmp/x.so")][..], "not in the manifest's env_passthrough"),
            (&[("GH_TOKEN", "forged")][..], "set by aileron only"),
        ] {
            let failure = plan_envelope(&manifest, &subset, with_env(pairs)).unwrap_err();
            assert!(failure.message.contains(because), "{pairs:?}: {}", failure.message);
        }
        let asks = SpawnEnvelope { credential_env_keys: Some(vec!["HOME".into()]), ..with_env(&[]) };
        assert!(plan_envelope(&manifest, &subset, asks).unwrap_err().message.contains("credential_env_keys"));
    }

    #[test]
    fn argument_maps_take_scalars_only() {
        let values = spawn_args(&serde_json::json!({"a": "x", "n": 3, "b": true, "gone": null})).unwrap();
        assert_eq!(values, args(&[("a", "x"), ("n", "3"), ("b", "true")]));
        assert!(spawn_args(&serde_json::json!({"a": ["x"]})).is_err());
        assert!(spawn_args(&serde_json::json!(["x"])).is_err());
    }
}
