//! Goose's `config.yaml`: sets one entry of the top-level `extensions:` block mapping by editing
//! lines. No Rust YAML library keeps comments through a rewrite, and Goose's file is a plain
//! block mapping written by Goose itself, so a careful textual edit is both possible and the only
//! way to leave every other byte (comments, other extensions, key order) exactly as it was.
//!
//! Supported: `extensions:` absent, empty (`extensions:`, `{}`, `null`, `~`) or a block mapping
//! (entries at one indentation). A flow mapping with entries (`extensions: {a: ...}`) is refused
//! with a hint rather than guessed at.

/// A value we write: strings are double-quoted (JSON escapes are valid YAML), lists are flow
/// sequences, maps are nested blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum YamlValue {
    Bool(bool),
    Int(i64),
    Str(String),
    List(Vec<String>),
    Map(Vec<(String, YamlValue)>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlEditError {
    pub line: usize,
    pub message: String,
}

/// Sets `<section>.<name>` to the block mapping `entry`. Returns `text` unchanged when the entry
/// already reads exactly as we would write it.
pub fn upsert_entry(
    text: &str,
    section: &str,
    name: &str,
    entry: &[(String, YamlValue)],
) -> Result<String, YamlEditError> {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let header = format!("{section}:");
    let Some(top) = lines.iter().position(|line| content(line).starts_with(&header)) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push_str(newline);
        }
        out.push_str(&header);
        out.push_str(newline);
        out.push_str(&render_entry(name, entry, 2, newline));
        return Ok(out);
    };
    let rest = content(lines[top])[header.len()..].trim();
    let value = if rest.starts_with('#') { "" } else { rest.split(" #").next().unwrap_or("").trim() };
    if !(rest.is_empty() || rest.starts_with('#') || ["{}", "null", "~"].contains(&value)) {
        return Err(YamlEditError {
            line: top + 1,
            message: format!("`{section}` is not a block mapping (`{rest}`); aileron edits only block mappings"),
        });
    }
    let rendered_at = |indent: usize| render_entry(name, entry, indent, newline);
    if !value.is_empty() {
        // `extensions: {}` / `null` / `~`: an empty mapping becomes a block holding our entry.
        let comment = rest[value.len()..].trim();
        let header_line =
            if comment.is_empty() { format!("{header}{newline}") } else { format!("{header} {comment}{newline}") };
        return Ok(join(&lines[..top], &[header_line, rendered_at(2)], &lines[top + 1..]));
    }
    // The section's block: every following line that is blank, a comment, or indented.
    let mut last_content = top;
    let mut child_indent = None;
    for (index, line) in lines.iter().enumerate().skip(top + 1) {
        if is_blank_or_comment(line) {
            continue;
        }
        let indent = indent_of(line);
        if indent == 0 {
            break;
        }
        child_indent.get_or_insert(indent);
        last_content = index;
    }
    let Some(child_indent) = child_indent else {
        return Ok(join(&lines[..=top], &[rendered_at(2)], &lines[top + 1..]));
    };
    let rendered = rendered_at(child_indent);
    let is_our_key = |line: &str| {
        let trimmed = content(line).trim_start();
        [format!("{name}:"), format!("\"{name}\":"), format!("'{name}':")]
            .iter()
            .any(|key| trimmed.starts_with(key.as_str()))
    };
    let existing = (top + 1..=last_content).find(|&index| {
        !is_blank_or_comment(lines[index]) && indent_of(lines[index]) == child_indent && is_our_key(lines[index])
    });
    let Some(start) = existing else {
        return Ok(join(&lines[..=last_content], &[rendered], &lines[last_content + 1..]));
    };
    // Our entry runs to its last line indented deeper than the key (comments after it may
    // belong to the next entry, so they stay where they are).
    let mut end = start;
    for (index, line) in lines.iter().enumerate().take(last_content + 1).skip(start + 1) {
        if is_blank_or_comment(line) {
            continue;
        }
        if indent_of(line) <= child_indent {
            break;
        }
        end = index;
    }
    let current: String = lines[start..=end].concat();
    let replacement =
        if lines[end].ends_with('\n') { rendered } else { rendered.trim_end_matches(['\r', '\n']).to_string() };
    if current == replacement {
        return Ok(text.to_string());
    }
    Ok(join(&lines[..start], &[replacement], &lines[end + 1..]))
}

fn join(before: &[&str], middle: &[String], after: &[&str]) -> String {
    let mut out: String = before.concat();
    if !out.is_empty() && !out.ends_with('\n') {
        // The last line had no newline and something now follows it.
        out.push('\n');
    }
    for part in middle {
        out.push_str(part);
    }
    out.push_str(&after.concat());
    out
}

fn content(line: &str) -> &str {
    line.trim_end_matches(['\r', '\n'])
}

fn is_blank_or_comment(line: &str) -> bool {
    let trimmed = content(line).trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn render_entry(name: &str, entry: &[(String, YamlValue)], indent: usize, newline: &str) -> String {
    let mut out = String::new();
    render_map_entry(&mut out, name, &YamlValue::Map(entry.to_vec()), indent, newline);
    out
}

fn render_map_entry(out: &mut String, key: &str, value: &YamlValue, indent: usize, newline: &str) {
    let pad = " ".repeat(indent);
    let key = render_key(key);
    match value {
        YamlValue::Map(entries) if !entries.is_empty() => {
            out.push_str(&format!("{pad}{key}:{newline}"));
            for (child, child_value) in entries {
                render_map_entry(out, child, child_value, indent + 2, newline);
            }
        }
        scalar => out.push_str(&format!("{pad}{key}: {}{newline}", render_inline(scalar))),
    }
}

fn render_inline(value: &YamlValue) -> String {
    let quote = |text: &str| serde_json::to_string(text).expect("strings serialize");
    match value {
        YamlValue::Bool(flag) => flag.to_string(),
        YamlValue::Int(number) => number.to_string(),
        YamlValue::Str(text) => quote(text),
        YamlValue::List(items) => format!("[{}]", items.iter().map(|item| quote(item)).collect::<Vec<_>>().join(", ")),
        YamlValue::Map(_) => "{}".to_string(),
    }
}

fn render_key(key: &str) -> String {
    let plain = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b));
    if plain { key.to_string() } else { serde_json::to_string(key).expect("strings serialize") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(token: &str) -> Vec<(String, YamlValue)> {
        vec![
            ("enabled".into(), YamlValue::Bool(true)),
            ("type".into(), YamlValue::Str("stdio".into())),
            ("cmd".into(), YamlValue::Str("/opt/aileron-mcp".into())),
            ("args".into(), YamlValue::List(vec![])),
            ("envs".into(), YamlValue::Map(vec![("AILERON_TOKEN".into(), YamlValue::Str(token.into()))])),
            ("timeout".into(), YamlValue::Int(300)),
        ]
    }

    fn block(indent: &str, token: &str) -> String {
        format!(
            "{indent}aileron:\n{indent}  enabled: true\n{indent}  type: \"stdio\"\n{indent}  cmd: \"/opt/aileron-mcp\"\n\
             {indent}  args: []\n{indent}  envs:\n{indent}    AILERON_TOKEN: \"{token}\"\n{indent}  timeout: 300\n"
        )
    }

    fn check(before: &str, expected: &str) {
        let after = upsert_entry(before, "extensions", "aileron", &entry("t1")).unwrap();
        assert_eq!(after, expected, "before:\n{before}");
        let again = upsert_entry(&after, "extensions", "aileron", &entry("t1")).unwrap();
        assert_eq!(again, after, "a second run changes nothing");
    }

    const USER_CONFIG: &str = "# goose settings\nGOOSE_PROVIDER: anthropic\nextensions:\n  developer:\n    bundled: true\n    enabled: true  # always\n    name: developer\n    type: builtin\n\n  # my search server\n  search:\n    cmd: npx\n    args:\n    - -y\n    - search-mcp\n    type: stdio\n\n# model settings\nGOOSE_MODEL: claude-sonnet-4-5\n";

    #[test]
    fn the_entry_joins_the_existing_block_and_nothing_else_moves() {
        let expected = USER_CONFIG
            .replace("    type: stdio\n\n# model", &format!("    type: stdio\n{}\n# model", block("  ", "t1")));
        check(USER_CONFIG, &expected);
    }

    #[test]
    fn an_existing_entry_is_replaced_in_place() {
        let with_old = upsert_entry(USER_CONFIG, "extensions", "aileron", &entry("t0")).unwrap();
        let moved = with_old
            .replace(&block("  ", "t0"), "")
            .replace("extensions:\n", &format!("extensions:\n{}", block("  ", "t0")));
        let updated = upsert_entry(&moved, "extensions", "aileron", &entry("t1")).unwrap();
        assert_eq!(updated, moved.replace("\"t0\"", "\"t1\""));
    }

    #[test]
    fn missing_and_empty_sections_get_a_block() {
        check("", &format!("extensions:\n{}", block("  ", "t1")));
        check("GOOSE_MODE: auto", &format!("GOOSE_MODE: auto\nextensions:\n{}", block("  ", "t1")));
        check(
            "extensions: {}  # none\nGOOSE_MODE: auto\n",
            &format!("extensions: # none\n{}GOOSE_MODE: auto\n", block("  ", "t1")),
        );
        check("extensions: null\n", &format!("extensions:\n{}", block("  ", "t1")));
        check("extensions:\nGOOSE_MODE: auto\n", &format!("extensions:\n{}GOOSE_MODE: auto\n", block("  ", "t1")));
        check(
            "extensions:\n    dev:\n      enabled: true",
            &format!("extensions:\n    dev:\n      enabled: true\n{}", block("    ", "t1")),
        );
        check(
            "a: 1\r\nextensions:\r\n",
            &format!("a: 1\r\nextensions:\r\n{}", block("  ", "t1").replace('\n', "\r\n")),
        );
    }

    #[test]
    fn flow_mappings_with_entries_are_refused() {
        let error = upsert_entry("x: 1\nextensions: {dev: {enabled: true}}\n", "extensions", "aileron", &entry("t"))
            .unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.message.contains("not a block mapping"), "{error}");
    }
}
