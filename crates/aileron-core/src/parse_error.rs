//! `ParseError`, the one error type for every user-authored file (action files, connector manifests),
//! and the TOML source map that lets every error name the line of the key it is about.
//!
//! Decoding happens in two passes: serde with `deny_unknown_fields` (unknown keys, wrong types and TOML
//! syntax errors, located through toml's error span) and then domain validation on the decoded values.
//! Validation errors are located by walking a spanned parse of the same text (`toml::de::DeTable`), so a
//! problem found after decoding still points at the exact key, array element or table header.

use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A problem in a user-authored file, rendered as `<file>:<line>: <field>: <message>` + `hint: <hint>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub file: String,
    /// 1-based line in the whole file; `None` only when the problem has no place in the text (a
    /// missing top-level key, an empty file).
    pub line: Option<usize>,
    /// Dotted path of the offending key, e.g. `execute[1].inputs.owner`.
    pub field: Option<String>,
    pub message: String,
    pub hint: String,
}

impl ParseError {
    pub fn new(
        file: impl Into<String>,
        line: Option<usize>,
        field: Option<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> ParseError {
        ParseError { file: file.into(), line, field, message: message.into(), hint: hint.into() }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}\nhint: {}", self.message, self.hint)
    }
}

impl std::error::Error for ParseError {}

/// One step of a [`FieldPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    Key(String),
    Index(usize),
}

/// Where a value sits in a TOML document: `requires.connectors[0].capabilities[2]`.
/// Indexes are 0-based, as in JSON paths; keys that are not bare TOML keys are quoted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldPath(Vec<PathSegment>);

impl FieldPath {
    pub fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    pub fn key(&self, key: &str) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Key(key.to_string()));
        FieldPath(segments)
    }

    pub fn index(&self, index: usize) -> FieldPath {
        let mut segments = self.0.clone();
        segments.push(PathSegment::Index(index));
        FieldPath(segments)
    }

    pub fn segments(&self) -> &[PathSegment] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                PathSegment::Index(index) => write!(f, "[{index}]")?,
                PathSegment::Key(key) => {
                    if position > 0 {
                        f.write_str(".")?;
                    }
                    let bare =
                        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare { f.write_str(key)? } else { write!(f, "{key:?}")? }
                }
            }
        }
        Ok(())
    }
}

/// The TOML text of one document and where it sits in its file, with a spanned parse tree used to
/// turn byte offsets and field paths into whole-file line numbers.
pub(crate) struct TomlSource<'a> {
    file: &'a str,
    text: &'a str,
    /// Whole-file line number of the document's first line (1 for a manifest, 2 for action frontmatter).
    first_line: usize,
    tree: DeTable<'a>,
}

impl<'a> TomlSource<'a> {
    pub(crate) fn new(file: &'a str, text: &'a str, first_line: usize) -> TomlSource<'a> {
        // A syntax error still leaves a best-effort tree; `decode` reports the error itself.
        let tree = DeTable::parse_recoverable(text).0.into_inner();
        TomlSource { file, text, first_line, tree }
    }

    /// Serde decoding with toml's error located by line and field path.
    pub(crate) fn decode<T: DeserializeOwned>(&self) -> Result<T, ParseError> {
        toml::from_str(self.text).map_err(|error| {
            let message = error.message().trim().trim_end_matches('.').to_string();
            let (line, field) = match error.span() {
                Some(span) => {
                    // A duplicate key is not in the tree; its span covers the key as written.
                    let written = self.text.get(span.clone()).filter(|_| message.contains("duplicate key"));
                    let field = self.path_at(span.start).map(|p| p.to_string()).or(written.map(str::to_string));
                    (Some(self.line_at(span.start)), field)
                }
                None => (None, None),
            };
            let hint = if message.starts_with("unknown field") {
                "remove the key or fix its spelling: strict decoding rejects keys the format does not define"
            } else if message.starts_with("invalid type") {
                "change the value to the type the key expects"
            } else if message.contains("duplicate key") {
                "each key may appear only once per table"
            } else {
                "fix the TOML syntax on this line"
            };
            ParseError::new(self.file, line, field, message, hint)
        })
    }

    /// An error about `path`, located at the key (or, when the key is missing, the nearest enclosing
    /// table or array element that exists).
    pub(crate) fn error(&self, path: &FieldPath, message: impl Into<String>, hint: impl Into<String>) -> ParseError {
        let field = (!path.is_root()).then(|| path.to_string());
        ParseError::new(self.file, self.line_of(path), field, message, hint)
    }

    /// The first string value (in document order) holding a character a reader would not see for
    /// what it is ([`crate::untrusted_text::hidden`]), with its path.
    pub(crate) fn first_hidden_text(&self) -> Option<(FieldPath, char)> {
        fn walk(value: &DeValue<'_>, path: FieldPath) -> Option<(FieldPath, char)> {
            match value {
                DeValue::String(text) => crate::untrusted_text::first_hidden(text).map(|c| (path, c)),
                DeValue::Array(items) => {
                    items.iter().enumerate().find_map(|(index, item)| walk(item.get_ref(), path.index(index)))
                }
                DeValue::Table(table) => {
                    table.iter().find_map(|(key, item)| walk(item.get_ref(), path.key(key.get_ref())))
                }
                _ => None,
            }
        }
        let mut found: Vec<(usize, FieldPath, char)> = Vec::new();
        for (key, item) in self.tree.iter() {
            if let Some((path, c)) = walk(item.get_ref(), FieldPath::root().key(key.get_ref())) {
                found.push((self.line_of(&path).unwrap_or(usize::MAX), path, c));
            }
        }
        found.into_iter().min_by_key(|(line, _, _)| *line).map(|(_, path, c)| (path, c))
    }

    /// Whole-file line of the deepest existing part of `path`; `None` when nothing of it exists.
    pub(crate) fn line_of(&self, path: &FieldPath) -> Option<usize> {
        let mut table = &self.tree;
        let mut value: Option<&Spanned<DeValue<'a>>> = None;
        let mut best: Option<Range<usize>> = None;
        for segment in path.segments() {
            match segment {
                PathSegment::Key(key) => {
                    let current = match value {
                        None => Some(table),
                        Some(v) => v.get_ref().as_table(),
                    };
                    let Some((found_key, found_value)) = current.and_then(|t| t.get_key_value(key.as_str())) else {
                        break;
                    };
                    // Keys of implicit tables created by a header such as `[a.b]` carry the span of that
                    // header's key, which is still the best line to show.
                    best = Some(found_key.span());
                    value = Some(found_value);
                    if let Some(t) = found_value.get_ref().as_table() {
                        table = t;
                    }
                }
                PathSegment::Index(index) => {
                    let Some(element) = value.and_then(|v| v.get_ref().as_array()).and_then(|a| a.get(*index)) else {
                        break;
                    };
                    best = Some(element.span());
                    value = Some(element);
                }
            }
        }
        best.map(|span| self.line_at(span.start))
    }

    /// Whole-file line of a byte offset into the document.
    pub(crate) fn line_at(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        self.first_line + self.text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count()
    }

    /// The deepest key or element whose span contains `offset`.
    fn path_at(&self, offset: usize) -> Option<FieldPath> {
        find_in_table(&self.tree, offset, &FieldPath::root())
    }
}

fn find_in_table(table: &DeTable<'_>, offset: usize, path: &FieldPath) -> Option<FieldPath> {
    for (key, value) in table.iter() {
        let key_path = path.key(key.get_ref());
        if key.span().contains(&offset) {
            return Some(key_path);
        }
        if let Some(found) = find_in_value(value, offset, &key_path) {
            return Some(found);
        }
    }
    None
}

fn find_in_value(value: &Spanned<DeValue<'_>>, offset: usize, path: &FieldPath) -> Option<FieldPath> {
    // Children first: array-of-tables elements carry only their header's span, so a key inside the
    // body is found by descending, not by the parent's span.
    let nested = match value.get_ref() {
        DeValue::Table(table) => find_in_table(table, offset, path),
        DeValue::Array(array) => {
            array.iter().enumerate().find_map(|(index, element)| find_in_value(element, offset, &path.index(index)))
        }
        _ => None,
    };
    nested.or_else(|| value.span().contains(&offset).then(|| path.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_field_message_and_hint() {
        let cases = [
            (Some(7), Some("version"), "a.md:7: version: bad version\nhint: fix it"),
            (None, Some("name"), "a.md: name: bad version\nhint: fix it"),
            (Some(3), None, "a.md:3: bad version\nhint: fix it"),
        ];
        for (line, field, expected) in cases {
            let error = ParseError::new("a.md", line, field.map(str::to_string), "bad version", "fix it");
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn field_paths_render_like_toml_keys_with_json_indexes() {
        let path = FieldPath::root().key("execute").index(1).key("inputs").key("owner");
        assert_eq!(path.to_string(), "execute[1].inputs.owner");
        assert_eq!(FieldPath::root().key("render").key("Issue title").to_string(), r#"render."Issue title""#);
        assert_eq!(FieldPath::root().to_string(), "");
    }

    const DOC: &str = r#"top = 1
[a]
b = "x"
list = [
  "one",
  "two",
]
[[items]]
id = "first"
[[items]]
id = "second"
nested = { deep = { key = 5 } }
[c.d]
e = true
"#;

    #[test]
    fn line_of_finds_keys_elements_and_falls_back_to_the_enclosing_table() {
        let source = TomlSource::new("f.toml", DOC, 10);
        let cases: [(FieldPath, Option<usize>); 11] = [
            (FieldPath::root().key("top"), Some(10)),
            (FieldPath::root().key("a").key("b"), Some(12)),
            (FieldPath::root().key("a").key("list").index(1), Some(15)),
            (FieldPath::root().key("items").index(0).key("id"), Some(18)),
            (FieldPath::root().key("items").index(1), Some(19)),
            (FieldPath::root().key("items").index(1).key("missing"), Some(19)),
            (FieldPath::root().key("items").index(1).key("nested").key("deep").key("key"), Some(21)),
            (FieldPath::root().key("c").key("d").key("e"), Some(23)),
            (FieldPath::root().key("c").key("d"), Some(22)),
            (FieldPath::root().key("absent"), None),
            (FieldPath::root(), None),
        ];
        for (path, expected) in cases {
            assert_eq!(source.line_of(&path), expected, "{path}");
        }
    }

    #[test]
    fn path_at_finds_the_deepest_key_containing_an_offset() {
        let source = TomlSource::new("f.toml", DOC, 1);
        let cases = [
            ("\"two\"", "a.list[1]"),
            ("id = \"second\"", "items[1].id"),
            ("key = 5", "items[1].nested.deep.key"),
            ("e = true", "c.d.e"),
        ];
        for (needle, expected) in cases {
            let offset = DOC.find(needle).unwrap();
            assert_eq!(source.path_at(offset).map(|p| p.to_string()).as_deref(), Some(expected), "{needle}");
        }
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        name: String,
        count: Option<i64>,
    }

    #[test]
    fn decode_errors_carry_line_field_and_hint() {
        let cases = [
            ("name = \"x\"\ncolor = 1\n", Some(2), Some("color"), "unknown field `color`", "remove the key"),
            ("name = \"x\"\ncount = \"3\"\n", Some(2), Some("count"), "invalid type", "change the value"),
            ("name = \"x\"\nname = \"y\"\n", Some(2), Some("name"), "duplicate key", "each key may"),
            ("name = \"x\"\ncount = \n", Some(2), None, "", "fix the TOML syntax"),
        ];
        for (text, line, field, message_start, hint_start) in cases {
            let error = TomlSource::new("f.toml", text, 1).decode::<Strict>().unwrap_err();
            assert_eq!(error.line, line, "{text}");
            assert_eq!(error.field.as_deref(), field, "{text}");
            assert!(error.message.starts_with(message_start), "{text}: {}", error.message);
            assert!(error.hint.starts_with(hint_start), "{text}: {}", error.hint);
            assert_eq!(error.file, "f.toml");
        }
    }
}
