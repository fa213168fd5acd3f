//! Connector identity (SPEC §3.2): fully-qualified names, `<fqn>@<semver>` references and
//! content hashes (`sha256:<hex>` over `connector.wasm` bytes followed by `manifest.toml` bytes).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::sha256::Sha256;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("unknown_scheme: `{0}` is not a supported scheme (expected github:// or gitlab://)")]
    UnknownScheme(String),
    #[error("invalid connector name `{name}`: {reason}")]
    InvalidFqn { name: String, reason: &'static str },
    #[error("invalid connector reference `{0}`: expected <fqn>@<version>, e.g. github://acme/slack@1.2.0")]
    MissingVersion(String),
    #[error("invalid version `{version}`: {reason} (exact SemVer required; no ranges, no `latest`)")]
    InvalidVersion { version: String, reason: String },
    #[error("invalid content hash `{0}`: expected sha256: followed by 64 lowercase hex digits")]
    InvalidHash(String),
}

/// The publication channel of a connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    Github,
    Gitlab,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Github => "github",
            Scheme::Gitlab => "gitlab",
        }
    }
}

/// `<scheme>://<owner>/<repo>[/<subpath>...]`, in its canonical form: ASCII lowercase. GitHub
/// and GitLab resolve owners and repositories case-insensitively, so `github://ALRubinger/x`
/// (the original project's spelling) and `github://alrubinger/x` are one connector; every name
/// is lowercased when parsed, so the store, bindings (and their vault paths), the keyring and
/// the audit log all see one spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fqn {
    pub scheme: Scheme,
    pub owner: String,
    pub repo: String,
    pub subpath: Vec<String>,
}

impl Fqn {
    pub fn parse(name: &str) -> Result<Fqn, IdentityError> {
        let invalid = |reason| IdentityError::InvalidFqn { name: name.to_string(), reason };
        let (scheme, rest) = name.split_once("://").ok_or_else(|| invalid("missing `<scheme>://`"))?;
        let scheme = match scheme {
            "github" => Scheme::Github,
            "gitlab" => Scheme::Gitlab,
            other => return Err(IdentityError::UnknownScheme(other.to_string())),
        };
        if rest.contains('@') {
            return Err(invalid("a name must not contain `@` (the version goes in its own field)"));
        }
        let segments: Vec<&str> = rest.split('/').collect();
        if segments.len() < 2 {
            return Err(invalid("expected <owner>/<repo> after the scheme"));
        }
        for segment in &segments {
            if segment.is_empty() {
                return Err(invalid("empty path segment"));
            }
            if *segment == "." || *segment == ".." {
                return Err(invalid("`.` and `..` are not allowed as path segments"));
            }
            if !segment.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
                return Err(invalid("segments may only contain ASCII letters, digits, `-`, `_` and `.`"));
            }
        }
        Ok(Fqn {
            scheme,
            owner: segments[0].to_ascii_lowercase(),
            repo: segments[1].to_ascii_lowercase(),
            subpath: segments[2..].iter().map(|s| s.to_ascii_lowercase()).collect(),
        })
    }

    /// `github://acme` — the owner authority (keyring).
    pub fn owner_authority(&self) -> String {
        format!("{}://{}", self.scheme.as_str(), self.owner)
    }

    /// `github://acme/repo` — the repo authority (keyring).
    pub fn repo_authority(&self) -> String {
        format!("{}://{}/{}", self.scheme.as_str(), self.owner, self.repo)
    }
}

impl fmt::Display for Fqn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written in one piece when it fits on the stack: `to_string` then allocates once, where
        // five pieces grew its string three times (on every step of every run).
        let mut text = StackText { bytes: [0; 256], len: 0 };
        match self.write_to(&mut text) {
            Ok(()) => f.write_str(text.as_str()),
            Err(_) => self.write_to(f),
        }
    }
}

impl Fqn {
    fn write_to(&self, out: &mut impl fmt::Write) -> fmt::Result {
        write!(out, "{}://{}/{}", self.scheme.as_str(), self.owner, self.repo)?;
        for segment in &self.subpath {
            write!(out, "/{segment}")?;
        }
        Ok(())
    }
}

/// Text gathered on the stack; a write past its end fails (the caller writes piece by piece).
struct StackText {
    bytes: [u8; 256],
    len: usize,
}

impl StackText {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len]).expect("only whole `str`s are written")
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, piece: &str) -> fmt::Result {
        let end = self.len + piece.len();
        self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?.copy_from_slice(piece.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl FromStr for Fqn {
    type Err = IdentityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Fqn::parse(s)
    }
}

impl Serialize for Fqn {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fqn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Fqn::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Fqn {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Fqn".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        string_schema("a connector's name: `github://<owner>/<repo>[/<path>]` or `gitlab://…`", "^(github|gitlab)://")
    }
}

/// Strict SemVer: `MAJOR.MINOR.PATCH[-pre][+build]`, no ranges, no `latest`, no leading `v`.
pub fn parse_version(version: &str) -> Result<semver::Version, IdentityError> {
    semver::Version::parse(version)
        .map_err(|e| IdentityError::InvalidVersion { version: version.to_string(), reason: e.to_string() })
}

/// `<fqn>@<semver>`, split on the last `@`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectorRef {
    pub fqn: Fqn,
    pub version: semver::Version,
}

impl ConnectorRef {
    pub fn parse(reference: &str) -> Result<ConnectorRef, IdentityError> {
        let (name, version) =
            reference.rsplit_once('@').ok_or_else(|| IdentityError::MissingVersion(reference.to_string()))?;
        Ok(ConnectorRef { fqn: Fqn::parse(name)?, version: parse_version(version)? })
    }
}

impl fmt::Display for ConnectorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.fqn, self.version)
    }
}

/// `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl ContentHash {
    pub fn parse(s: &str) -> Result<ContentHash, IdentityError> {
        let invalid = || IdentityError::InvalidHash(s.to_string());
        let hex_part = s.strip_prefix("sha256:").ok_or_else(invalid)?;
        if hex_part.len() != 64 || !hex_part.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')) {
            return Err(invalid());
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut bytes).map_err(|_| invalid())?;
        Ok(ContentHash(bytes))
    }

    /// The connector content hash: SHA-256 of the binary followed by the manifest.
    pub fn of_connector(wasm: &[u8], manifest: &[u8]) -> ContentHash {
        let mut hasher = Sha256::new();
        hasher.update(wasm);
        hasher.update(manifest);
        ContentHash(hasher.finalize())
    }

    pub fn of_bytes(bytes: &[u8]) -> ContentHash {
        ContentHash(Sha256::digest(bytes))
    }

    pub fn from_digest(bytes: [u8; 32]) -> ContentHash {
        ContentHash(bytes)
    }

    pub fn hex(&self) -> String {
        self.hex_digits().as_str().to_owned()
    }

    /// The 64 hex digits on the stack (display and file names build no intermediate string).
    fn hex_digits(&self) -> HexDigits {
        let mut digits = [0u8; 64];
        hex::encode_to_slice(self.0, &mut digits).expect("64 digits for 32 bytes");
        HexDigits(digits)
    }

    /// `sha256:` and the 64 hex digits, on the stack: what `Display` writes, for the audit
    /// writer to copy where a record's hash goes without going through `fmt`.
    pub fn text(&self) -> [u8; 71] {
        let mut text = [0u8; 71];
        text[..7].copy_from_slice(b"sha256:");
        text[7..].copy_from_slice(&self.hex_digits().0);
        text
    }

    /// First 12 hex digits, for consent prompts and listings.
    pub fn short(&self) -> String {
        format!("sha256:{}", &self.hex()[..12])
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One write: `to_string` then allocates once.
        f.write_str(std::str::from_utf8(&self.text()).expect("ASCII"))
    }
}

struct HexDigits([u8; 64]);

impl HexDigits {
    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits are ASCII")
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({self})")
    }
}

impl FromStr for ContentHash {
    type Err = IdentityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ContentHash::parse(s)
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        ContentHash::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for ContentHash {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ContentHash".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        string_schema("SHA-256 of `connector.wasm ‖ manifest.toml` (or of a file)", "^sha256:[0-9a-f]{64}$")
    }
}

/// The schema of a type serialized as a string of one syntax (the identities, approval ids).
pub(crate) fn string_schema(description: &str, pattern: &str) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "description": description, "pattern": pattern })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fqn_table() {
        let ok = [
            ("github://aileron/slack", "aileron", "slack", 0),
            ("github://aileron/integrations/connectors/slack", "aileron", "integrations", 2),
            ("gitlab://team/linear", "team", "linear", 0),
        ];
        for (name, owner, repo, subpath_len) in ok {
            let fqn = Fqn::parse(name).unwrap();
            assert_eq!((fqn.owner.as_str(), fqn.repo.as_str(), fqn.subpath.len()), (owner, repo, subpath_len));
            assert_eq!(fqn.to_string(), name);
        }
        assert_eq!(Fqn::parse("hub://a/b"), Err(IdentityError::UnknownScheme("hub".into())));
        assert_eq!(Fqn::parse("https://a/b"), Err(IdentityError::UnknownScheme("https".into())));
        for bad in ["github://a", "github://a//b", "github://a/b@1.0.0", "github://a/../b", "slack", "github://a/b c"] {
            assert!(matches!(Fqn::parse(bad), Err(IdentityError::InvalidFqn { .. })), "{bad}");
        }
        // Canonical: the original project's spelling is the same connector, in lowercase.
        let original = Fqn::parse("github://ALRubinger/aileron-connector-Linear/Connectors/X").unwrap();
        assert_eq!(original.to_string(), "github://alrubinger/aileron-connector-linear/connectors/x");
        assert_eq!(original, Fqn::parse("github://alrubinger/aileron-connector-linear/connectors/x").unwrap());
        // Written in one piece up to the stack buffer's 256 bytes, in pieces past it: the same text.
        for length in [250, 256, 257, 600] {
            let name = format!("github://acme/{}", "x".repeat(length - "github://acme/".len()));
            assert_eq!(Fqn::parse(&name).unwrap().to_string(), name, "{length} bytes");
        }
        assert_eq!(
            ConnectorRef::parse("github://ALRubinger/aileron-connector-linear@0.0.0-dev").unwrap().to_string(),
            "github://alrubinger/aileron-connector-linear@0.0.0-dev"
        );
        let fqn = Fqn::parse("github://acme/mono/connectors/x").unwrap();
        assert_eq!(fqn.owner_authority(), "github://acme");
        assert_eq!(fqn.repo_authority(), "github://acme/mono");
    }

    #[test]
    fn references_split_on_the_last_at_and_need_strict_semver() {
        let r = ConnectorRef::parse("github://acme/slack@1.2.0-rc.1+build.5").unwrap();
        assert_eq!(r.fqn.to_string(), "github://acme/slack");
        assert_eq!(r.version.to_string(), "1.2.0-rc.1+build.5");
        for bad in [
            "github://acme/slack",
            "github://acme/slack@latest",
            "github://acme/slack@^1.2",
            "github://acme/slack@v1.2.0",
            "github://acme/slack@1.2",
        ] {
            assert!(ConnectorRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_hash_is_sha256_of_binary_then_manifest() {
        let hash = ContentHash::of_connector(b"wasm", b"manifest");
        assert_eq!(hash, ContentHash::of_bytes(b"wasmmanifest"));
        assert_eq!(ContentHash::parse(&hash.to_string()).unwrap(), hash);
        // The text is `sha256:` and the lowercase hex of the digest (what sha256sum prints).
        let digest: [u8; 32] = Sha256::digest(b"wasmmanifest");
        assert_eq!(hash.to_string(), format!("sha256:{}", hex::encode(digest)));
        assert_eq!(hash.hex(), hex::encode(digest));
        assert_eq!(format!("{hash:>80}"), format!("sha256:{}", hex::encode(digest)), "one write, no padding");
        assert_eq!(hash.short().len(), "sha256:".len() + 12);
        let upper = format!("sha256:{}", hash.hex().to_uppercase());
        for bad in ["", "sha256:", "sha256:abc", "md5:00", upper.as_str()] {
            assert!(ContentHash::parse(bad).is_err(), "{bad}");
        }
    }
}
