//! The action frontmatter exactly as written: serde structs that reject unknown keys everywhere.
//! Required keys are `Option`s so that validation reports them with its own message, line and hint.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAction {
    pub name: Option<String>,
    pub version: Option<String>,
    pub source: Option<String>,
    pub requires: Option<RawRequires>,
    #[serde(rename = "match")]
    pub match_: Option<RawMatch>,
    pub inputs: Option<Vec<RawInput>>,
    pub execute: Option<Vec<RawStep>>,
    pub approval: Option<RawApproval>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequires {
    pub connectors: Option<Vec<RawRequiredConnector>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRequiredConnector {
    pub name: Option<String>,
    pub version: Option<String>,
    pub hash: Option<String>,
    pub capabilities: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatch {
    pub intent: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInput {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub required: Option<bool>,
    pub description: Option<String>,
    pub label: Option<String>,
    pub multiline: Option<bool>,
    pub items_type: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub id: Option<String>,
    pub connector: Option<String>,
    pub op: Option<String>,
    pub idempotent: Option<bool>,
    pub timeout_seconds: Option<i64>,
    pub inputs: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawApproval {
    pub required: Option<bool>,
    pub expires_after: Option<String>,
    pub preview: Option<RawPreview>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPreview {
    pub op: Option<String>,
    pub args: Option<toml::Table>,
    pub render: Option<OrderedPairs>,
    pub multiline: Option<Vec<String>>,
}

/// A table of string values in the order the author wrote them (toml's `preserve_order` feature keeps
/// document order through deserialisation).
#[derive(Debug, Default)]
pub(super) struct OrderedPairs(pub Vec<(String, String)>);

impl<'de> Deserialize<'de> for OrderedPairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = OrderedPairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of label = \"dotted.path\" strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedPairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((label, path)) = map.next_entry::<String, String>()? {
                    pairs.push((label, path));
                }
                Ok(OrderedPairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor)
    }
}
