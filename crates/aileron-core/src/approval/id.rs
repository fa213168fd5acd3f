//! Approval ids: `act-<YYYYMMDDTHHMMSSZ>-<16 lowercase hex>` (SPEC §8).
//!
//! The timestamp makes ids sort by request time (a `BTreeMap` of entries lists the oldest first);
//! the 64 random bits make them unguessable. Core does no IO, so the caller supplies both the
//! time and the random bytes. Ids arrive in URLs and CLI arguments, so parsing is strict.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::timestamp::UtcTime;

const PREFIX: &str = "act-";
const EXAMPLE: &str = "act-20261122T053700Z-0123456789abcdef";
/// Untrusted input is echoed in errors only up to this many characters.
const SHOWN_CHARS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalIdError {
    #[error(
        "invalid approval id {id:?}: {reason} (expected act-<YYYYMMDDTHHMMSSZ>-<16 lowercase hex>, e.g. {EXAMPLE})"
    )]
    Invalid { id: String, reason: &'static str },
    #[error("invalid approval time {0:?}: expected UTC RFC 3339 such as 2026-11-22T05:37:00.123Z")]
    InvalidTimestamp(String),
}

/// A validated approval id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApprovalId(String);

impl ApprovalId {
    /// The id of an approval requested at `requested_at` (UTC RFC 3339, the entry's
    /// `requested_at`), with 8 bytes from the operating system's random source.
    pub fn new(requested_at: &str, random: [u8; 8]) -> Result<ApprovalId, ApprovalIdError> {
        let time = UtcTime::parse_rfc3339(requested_at)
            .ok_or_else(|| ApprovalIdError::InvalidTimestamp(shown(requested_at)))?;
        Ok(ApprovalId(format!("{PREFIX}{}-{}", time.compact(), hex::encode(random))))
    }

    pub fn parse(id: &str) -> Result<ApprovalId, ApprovalIdError> {
        let invalid = |reason| ApprovalIdError::Invalid { id: shown(id), reason };
        let rest = id.strip_prefix(PREFIX).ok_or_else(|| invalid("it must start with `act-`"))?;
        let (timestamp, random) =
            rest.split_once('-').ok_or_else(|| invalid("a `-` must separate the timestamp from the random part"))?;
        if UtcTime::parse_compact(timestamp).is_none() {
            return Err(invalid("the timestamp is not a valid UTC time of the form YYYYMMDDTHHMMSSZ"));
        }
        if random.len() != 16 || !random.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(invalid("the random part must be 16 lowercase hex digits"));
        }
        Ok(ApprovalId(id.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn shown(untrusted: &str) -> String {
    untrusted.chars().take(SHOWN_CHARS).collect()
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ApprovalId {
    type Err = ApprovalIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ApprovalId::parse(s)
    }
}

impl Serialize for ApprovalId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl schemars::JsonSchema for ApprovalId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ApprovalId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::identity::string_schema(
            "`act-<YYYYMMDDTHHMMSSZ>-<16 lowercase hex>`",
            "^act-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}$",
        )
    }
}

impl<'de> Deserialize<'de> for ApprovalId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        ApprovalId::parse(&s).map_err(serde::de::Error::custom)
    }
}
