//! Comment-preserving edits of JSON-with-comments files (OpenCode's `opencode.json[c]`, Pi's
//! `mcp.json`). No JSONC crate keeps comments through a rewrite, so this parses just enough to
//! know where each member's value starts and ends, then splices text: every byte outside the one
//! value we set stays as the user wrote it (comments, trailing commas, indentation, key order).
//!
//! Accepted syntax is JSON plus `//` and `/* */` comments and trailing commas (what OpenCode's
//! JSONC parser accepts).

use std::ops::Range;

use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct JsoncError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Sets the member at `path` (object keys from the root) to `value`, creating missing objects on
/// the way. Returns `text` unchanged when the member already holds an equal value.
pub fn upsert(text: &str, path: &[&str], value: &Value) -> Result<String, JsoncError> {
    assert!(!path.is_empty(), "upsert needs a member path");
    let source = if text.trim().is_empty() { "{\n}\n" } else { text };
    let style = Style::detect(source);
    let root = Parser::new(source).document()?;
    let mut object = &root;
    for (depth, key) in path.iter().enumerate() {
        // JSON.parse keeps the last of duplicate keys; so do we.
        let member = object.members.iter().rev().find(|member| member.key == *key);
        match member {
            Some(member) if depth + 1 == path.len() => {
                if member.value.to_value() == *value {
                    return Ok(text.to_string());
                }
                let indent = line_indent(source, member.key_start);
                let rendered = style.render(value, indent);
                return Ok(splice(source, vec![(member.value.span(), rendered)]));
            }
            Some(member) => match &member.value {
                Node::Object(inner) => object = inner,
                _ => {
                    let (line, column) = position(source, member.key_start);
                    return Err(JsoncError { line, column, message: format!("`{key}` is not an object") });
                }
            },
            None => {
                let nested = path[depth + 1..].iter().rev().fold(value.clone(), |inner, key| {
                    let mut map = Map::new();
                    map.insert(key.to_string(), inner);
                    Value::Object(map)
                });
                return Ok(splice(source, insert_member(source, object, key, &nested, &style)));
            }
        }
    }
    unreachable!("the loop returns at the last path element")
}

/// The edits that add `"key": value` as the last member of `object`.
fn insert_member(
    text: &str,
    object: &ObjectNode,
    key: &str,
    value: &Value,
    style: &Style,
) -> Vec<(Range<usize>, String)> {
    let key_json = serde_json::to_string(key).expect("strings serialize");
    let open = object.span.start;
    let close = object.span.end - 1;
    let single_line = !text[object.span.clone()].contains('\n');
    let nl = style.newline;
    let Some(last) = object.members.last() else {
        let object_indent = line_indent(text, open);
        let indent = format!("{object_indent}{}", style.unit);
        let member = format!("{key_json}: {}", style.render(value, &indent));
        // `{}` becomes a block; `{\n}` (or one holding only comments) gains a first line.
        let text = if single_line {
            format!("{nl}{indent}{member}{nl}{object_indent}")
        } else {
            format!("{nl}{indent}{member}")
        };
        return vec![(open + 1..open + 1, text)];
    };
    let value_end = last.value.span().end;
    if single_line {
        let member = format!(" {key_json}: {}", serde_json::to_string(value).expect("values serialize"));
        return match last.comma_after {
            Some(comma) => vec![(comma + 1..comma + 1, member)],
            None => vec![(value_end..value_end, format!(",{member}"))],
        };
    }
    let indent = line_indent(text, last.key_start).to_string();
    let trailing_comma = if last.comma_after.is_some() { "," } else { "" };
    let member = format!("{nl}{indent}{key_json}: {}{trailing_comma}", style.render(value, &indent));
    let after = last.comma_after.map_or(value_end, |comma| comma + 1);
    // Keep a comment that ends the last member's line with that member.
    let line_end = text[after..close].find('\n').map_or(close, |offset| after + offset);
    let rest = text[after..line_end].trim_end_matches('\r').trim();
    let anchor =
        if rest.is_empty() || rest.starts_with("//") { text[..line_end].trim_end_matches('\r').len() } else { after };
    let mut edits = Vec::new();
    if last.comma_after.is_none() {
        edits.push((value_end..value_end, ",".to_string()));
    }
    edits.push((anchor..anchor, member));
    edits
}

/// Applies non-overlapping edits; insertions at the same offset keep their listed order.
fn splice(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    // Applied back to front; among equal offsets the last listed goes in first, so that the
    // first listed ends up in front of it.
    edits.reverse();
    edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut out = text.to_string();
    for (range, replacement) in edits {
        out.replace_range(range, &replacement);
    }
    out
}

/// The whitespace that starts the line holding `offset`.
fn line_indent(text: &str, offset: usize) -> &str {
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = &text[start..];
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// How the file is laid out, so inserted text looks like its neighbours.
struct Style {
    unit: String,
    newline: &'static str,
}

impl Style {
    fn detect(text: &str) -> Style {
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let unit = text
            .lines()
            .map(|line| &line[..line.len() - line.trim_start_matches([' ', '\t']).len()])
            .find(|indent| !indent.is_empty())
            .map_or(
                "  ".to_string(),
                |indent| if indent.starts_with('\t') { "\t".to_string() } else { indent.to_string() },
            );
        Style { unit, newline }
    }

    /// Pretty JSON whose continuation lines start at `indent`.
    fn render(&self, value: &Value, indent: &str) -> String {
        let mut buffer = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut buffer, formatter);
        value.serialize(&mut serializer).expect("values serialize");
        let pretty = String::from_utf8(buffer).expect("serde_json writes UTF-8");
        pretty.replace('\n', &format!("{}{indent}", self.newline))
    }
}

#[derive(Debug)]
enum Node {
    Object(ObjectNode),
    Array { span: Range<usize>, items: Vec<Node> },
    Scalar { span: Range<usize>, value: Value },
}

#[derive(Debug)]
struct ObjectNode {
    /// From `{` to `}` inclusive.
    span: Range<usize>,
    members: Vec<Member>,
}

#[derive(Debug)]
struct Member {
    key: String,
    key_start: usize,
    value: Node,
    /// Offset of the comma after the value, when there is one.
    comma_after: Option<usize>,
}

impl Node {
    fn span(&self) -> Range<usize> {
        match self {
            Node::Object(object) => object.span.clone(),
            Node::Array { span, .. } | Node::Scalar { span, .. } => span.clone(),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Node::Object(object) => {
                Value::Object(object.members.iter().map(|m| (m.key.clone(), m.value.to_value())).collect())
            }
            Node::Array { items, .. } => Value::Array(items.iter().map(Node::to_value).collect()),
            Node::Scalar { value, .. } => value.clone(),
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Parser<'a> {
        Parser { text, bytes: text.as_bytes(), pos: 0 }
    }

    fn error(&self, at: usize, message: impl Into<String>) -> JsoncError {
        let (line, column) = position(self.text, at.min(self.text.len()));
        JsoncError { line, column, message: message.into() }
    }

    /// The whole file: one object, surrounded by whitespace and comments only.
    fn document(&mut self) -> Result<ObjectNode, JsoncError> {
        self.skip_trivia()?;
        if self.bytes.get(self.pos) == Some(&b'\xEF') && self.text[self.pos..].starts_with('\u{feff}') {
            self.pos += '\u{feff}'.len_utf8();
            self.skip_trivia()?;
        }
        let root = match self.value()? {
            Node::Object(object) => object,
            other => return Err(self.error(other.span().start, "the top level must be an object")),
        };
        self.skip_trivia()?;
        if self.pos < self.bytes.len() {
            return Err(self.error(self.pos, "unexpected text after the top-level object"));
        }
        Ok(root)
    }

    fn skip_trivia(&mut self) -> Result<(), JsoncError> {
        loop {
            while self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_whitespace()) {
                self.pos += 1;
            }
            if self.text[self.pos..].starts_with("//") {
                self.pos = self.text[self.pos..].find('\n').map_or(self.bytes.len(), |i| self.pos + i);
            } else if self.text[self.pos..].starts_with("/*") {
                let end =
                    self.text[self.pos + 2..].find("*/").ok_or_else(|| self.error(self.pos, "unterminated comment"))?;
                self.pos += 2 + end + 2;
            } else {
                return Ok(());
            }
        }
    }

    fn value(&mut self) -> Result<Node, JsoncError> {
        let start = self.pos;
        match self.bytes.get(self.pos) {
            Some(b'{') => self.object().map(Node::Object),
            Some(b'[') => self.array(),
            Some(b'"') => {
                let value = Value::String(self.string()?);
                Ok(Node::Scalar { span: start..self.pos, value })
            }
            Some(_) => {
                while self.bytes.get(self.pos).is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)) {
                    self.pos += 1;
                }
                let literal = &self.text[start..self.pos];
                let value = serde_json::from_str::<Value>(literal)
                    .ok()
                    .filter(|_| !literal.is_empty())
                    .ok_or_else(|| self.error(start, format!("expected a value, found `{}`", self.found(start))))?;
                Ok(Node::Scalar { span: start..self.pos, value })
            }
            None => Err(self.error(start, "unexpected end of file")),
        }
    }

    fn found(&self, at: usize) -> String {
        self.text[at..].chars().take(12).take_while(|c| *c != '\n').collect()
    }

    fn string(&mut self) -> Result<String, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.bytes.get(self.pos) {
                Some(b'\\') => self.pos += 2,
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\n') | None => return Err(self.error(start, "unterminated string")),
                Some(_) => self.pos += 1,
            }
        }
        serde_json::from_str(&self.text[start..self.pos]).map_err(|e| self.error(start, format!("invalid string: {e}")))
    }

    fn expect(&mut self, byte: u8, what: &str) -> Result<(), JsoncError> {
        if self.bytes.get(self.pos) == Some(&byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(self.pos, format!("expected {what}, found `{}`", self.found(self.pos))))
        }
    }

    fn object(&mut self) -> Result<ObjectNode, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        loop {
            self.skip_trivia()?;
            if self.bytes.get(self.pos) == Some(&b'}') {
                self.pos += 1;
                return Ok(ObjectNode { span: start..self.pos, members });
            }
            if members.last().is_some_and(|m: &Member| m.comma_after.is_none()) {
                return Err(self.error(self.pos, "expected `,` or `}` after a member"));
            }
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error(self.pos, format!("expected a quoted key, found `{}`", self.found(self.pos))));
            }
            let key_start = self.pos;
            let key = self.string()?;
            self.skip_trivia()?;
            self.expect(b':', "`:`")?;
            self.skip_trivia()?;
            let value = self.value()?;
            self.skip_trivia()?;
            let comma_after = (self.bytes.get(self.pos) == Some(&b',')).then(|| {
                self.pos += 1;
                self.pos - 1
            });
            members.push(Member { key, key_start, value, comma_after });
        }
    }

    fn array(&mut self) -> Result<Node, JsoncError> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        let mut comma = true;
        loop {
            self.skip_trivia()?;
            if self.bytes.get(self.pos) == Some(&b']') {
                self.pos += 1;
                return Ok(Node::Array { span: start..self.pos, items });
            }
            if !comma {
                return Err(self.error(self.pos, "expected `,` or `]` after an element"));
            }
            items.push(self.value()?);
            self.skip_trivia()?;
            comma = self.bytes.get(self.pos) == Some(&b',');
            if comma {
                self.pos += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(before: &str, path: &[&str], value: Value, expected: &str) {
        let after = upsert(before, path, &value).unwrap();
        assert_eq!(after, expected, "before:\n{before}");
        assert_eq!(upsert(&after, path, &value).unwrap(), after, "a second run changes nothing");
    }

    const USER_CONFIG: &str = r#"{
  // my settings
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5", /* chosen in June */
  "mcp": {
    "sentry": { "type": "remote", "url": "https://mcp.sentry.dev/mcp" }, // work
  },
  "theme": "tokyonight"
}
"#;

    #[test]
    fn members_are_added_and_replaced_without_touching_anything_else() {
        check(
            USER_CONFIG,
            &["mcp", "aileron"],
            json!({"enabled": true}),
            r#"{
  // my settings
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet-4-5", /* chosen in June */
  "mcp": {
    "sentry": { "type": "remote", "url": "https://mcp.sentry.dev/mcp" }, // work
    "aileron": {
      "enabled": true
    },
  },
  "theme": "tokyonight"
}
"#,
        );
        let with_old = upsert(USER_CONFIG, &["mcp", "aileron"], &json!({"enabled": false})).unwrap();
        let replaced = upsert(&with_old, &["mcp", "aileron"], &json!({"enabled": true, "type": "local"})).unwrap();
        assert_eq!(
            replaced,
            USER_CONFIG.replace(
                "// work\n",
                "// work\n    \"aileron\": {\n      \"enabled\": true,\n      \"type\": \"local\"\n    },\n"
            )
        );
    }

    #[test]
    fn missing_objects_are_created_in_the_files_style() {
        check(
            "",
            &["mcpServers", "aileron"],
            json!({"args": []}),
            "{\n  \"mcpServers\": {\n    \"aileron\": {\n      \"args\": []\n    }\n  }\n}\n",
        );
        check("{}", &["mcp", "x"], json!(1), "{\n  \"mcp\": {\n    \"x\": 1\n  }\n}");
        check(
            "{\n\t\"a\": 1 // one\n}\n",
            &["mcp", "x"],
            json!([1]),
            "{\n\t\"a\": 1, // one\n\t\"mcp\": {\n\t\t\"x\": [\n\t\t\t1\n\t\t]\n\t}\n}\n",
        );
        check("{\"a\": {\"b\": 1}}", &["a", "c"], json!("d"), "{\"a\": {\"b\": 1, \"c\": \"d\"}}");
        check(
            "{\r\n  \"a\": 1\r\n}\r\n",
            &["b"],
            json!({"c": 2}),
            "{\r\n  \"a\": 1,\r\n  \"b\": {\r\n    \"c\": 2\r\n  }\r\n}\r\n",
        );
        check(
            "{\n  \"mcp\": {\n    // none yet\n  }\n}",
            &["mcp", "x"],
            json!(1),
            "{\n  \"mcp\": {\n    \"x\": 1\n    // none yet\n  }\n}",
        );
    }

    #[test]
    fn equal_values_leave_the_text_alone_whatever_its_formatting() {
        let text = "{ \"mcp\": { \"aileron\": { /* ours */ \"b\": [1,2,], \"a\": true } } }";
        assert_eq!(upsert(text, &["mcp", "aileron"], &json!({"a": true, "b": [1, 2]})).unwrap(), text);
    }

    #[test]
    fn malformed_files_are_reported_with_their_position() {
        let check_error = |text: &str, expected: (usize, usize, &str)| {
            let error = upsert(text, &["a"], &json!(1)).unwrap_err();
            assert_eq!((error.line, error.column, error.message.as_str()), expected, "{text:?}");
        };
        check_error("{\n  \"a\": 1\n  \"b\": 2\n}", (3, 3, "expected `,` or `}` after a member"));
        check_error("{\n  a: 1\n}", (2, 3, "expected a quoted key, found `a: 1`"));
        check_error("[1]", (1, 1, "the top level must be an object"));
        check_error("{ /* open", (1, 3, "unterminated comment"));
        check_error("{\"a\": tru}", (1, 7, "expected a value, found `tru}`"));
        check_error("{} x", (1, 4, "unexpected text after the top-level object"));
        let error = upsert("{\"a\": 1}", &["a", "b"], &json!(1)).unwrap_err();
        assert_eq!(error.message, "`a` is not an object");
    }
}
