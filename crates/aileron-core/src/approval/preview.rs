//! The approval card's preview (SPEC §2 `[approval.preview]`): the fields rendered from the
//! read-only preview op's output, or the reason the preview is unavailable.
//!
//! A preview never blocks an approval: when the op fails or times out the card says
//! "preview unavailable: <reason>" and still shows the arguments. Values come from an external
//! system, so each is capped before it reaches the journal and the page.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::action::Preview;
use crate::template::walk;

/// Longest preview value (and unavailable reason) kept, in characters.
pub const MAX_PREVIEW_VALUE_CHARS: usize = 4000;
const TRUNCATION_MARK: &str = "… (truncated)";

/// One labelled line of the approval card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PreviewField {
    pub label: String,
    /// `None` when the path is missing from the output (or holds `null`): the card shows a dash.
    pub value: Option<String>,
    pub multiline: bool,
}

/// What the approval card shows above the arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPreview {
    Fields(Vec<PreviewField>),
    Unavailable { reason: String },
}

impl ApprovalPreview {
    pub fn unavailable(reason: impl AsRef<str>) -> ApprovalPreview {
        ApprovalPreview::Unavailable { reason: capped(reason.as_ref().trim()) }
    }
}

/// Renders `preview.render` (label → dotted JSON path, in the author's order) against the preview
/// op's output. Strings are shown raw, other values as compact JSON; a missing path or `null` is
/// `None`, because "null" means nothing to the person reading the card.
pub fn render_preview(preview: &Preview, output: &Value) -> ApprovalPreview {
    let fields = preview
        .render
        .iter()
        .map(|(label, path)| {
            let segments: Vec<&str> = path.split('.').collect();
            let value = match walk(output, &segments) {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(capped(text)),
                Some(other) => Some(capped(&other.to_string())),
            };
            PreviewField { label: label.clone(), value, multiline: preview.multiline.contains(label) }
        })
        .collect();
    ApprovalPreview::Fields(fields)
}

fn capped(text: &str) -> String {
    match text.char_indices().nth(MAX_PREVIEW_VALUE_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}{TRUNCATION_MARK}", &text[..cut]),
    }
}
