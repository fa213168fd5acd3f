//! `$AILERON_HOME/egress.toml` (SPEC §15): where a launched agent's egress proxy may go.
//!
//! ```toml
//! policy = "allowlist"                      # or "open" (the default, also with no file)
//! allow = ["example.com", "*.example.org"]  # a host, or every host below a domain
//! ```
//!
//! Under `allowlist` a CONNECT to a host no entry matches is refused (`egress_policy_denied`),
//! before anything is resolved. Private destinations are refused either way unless the launch
//! names them (`--allow-private`), which also passes this list: the user named them.

use serde::Deserialize;

use crate::parse_error::{FieldPath, ParseError, TomlSource};

/// The file's name under the Aileron home.
pub const FILE_NAME: &str = "egress.toml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EgressMode {
    /// Every public destination.
    #[default]
    Open,
    /// Only the hosts `allow` matches.
    Allowlist,
}

/// A parsed `egress.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentEgressPolicy {
    pub mode: EgressMode,
    /// Lower-case hosts; `*.domain` entries match every host below the domain (not the domain).
    pub allow: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    policy: EgressMode,
    #[serde(default)]
    allow: Vec<String>,
}

impl AgentEgressPolicy {
    /// Parses the file's text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<AgentEgressPolicy, ParseError> {
        let source = TomlSource::new(file, text, 1);
        let raw: Raw = source.decode()?;
        let mut allow = Vec::new();
        for (index, entry) in raw.allow.iter().enumerate() {
            let host = entry.trim().to_ascii_lowercase();
            let name = host.strip_prefix("*.").unwrap_or(&host);
            let valid = !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                });
            if !valid {
                return Err(source.error(
                    &FieldPath::root().key("allow").index(index),
                    format!("`{entry}` is not a host name or `*.` and a domain"),
                    "write a host like \"api.github.com\" or \"*.example.org\" (no scheme, port or path)",
                ));
            }
            allow.push(host);
        }
        Ok(AgentEgressPolicy { mode: raw.policy, allow })
    }

    /// Whether the policy lets the proxy go to `host` (a name or an address, any case).
    pub fn allows(&self, host: &str) -> bool {
        if self.mode == EgressMode::Open {
            return true;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.allow.iter().any(|entry| match entry.strip_prefix("*.") {
            Some(domain) => host.strip_suffix(domain).is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => *entry == host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_file_and_an_empty_file_are_open() {
        let policy = AgentEgressPolicy::parse("egress.toml", "").unwrap();
        assert_eq!(policy.mode, EgressMode::Open);
        assert!(policy.allows("anything.example"));
    }

    #[test]
    fn an_allowlist_matches_hosts_and_subdomains_only() {
        let text = "policy = \"allowlist\"\nallow = [\"API.github.com\", \"*.example.org\"]\n";
        let policy = AgentEgressPolicy::parse("egress.toml", text).unwrap();
        for (host, allowed) in [
            ("api.github.com", true),
            ("API.GITHUB.COM.", true),
            ("github.com", false),
            ("evilapi.github.com", false),
            ("www.example.org", true),
            ("a.b.example.org", true),
            ("example.org", false),
            ("badexample.org", false),
            ("example.org.evil.com", false),
            ("127.0.0.1", false),
        ] {
            assert_eq!(policy.allows(host), allowed, "{host}");
        }
    }

    #[test]
    fn bad_entries_are_refused_with_their_line_and_field() {
        let text = "policy = \"allowlist\"\nallow = [\n  \"ok.example\",\n  \"https://x.example/path\",\n]\n";
        let error = AgentEgressPolicy::parse("egress.toml", text).unwrap_err();
        assert_eq!((error.line, error.field.as_deref()), (Some(4), Some("allow[1]")), "{error}");
        assert!(error.hint.contains("no scheme"), "{error}");
        let error = AgentEgressPolicy::parse("egress.toml", "policy = \"closed\"\n").unwrap_err();
        assert_eq!(error.line, Some(1), "{error}");
        let error = AgentEgressPolicy::parse("egress.toml", "allowed = []\n").unwrap_err();
        assert!(error.message.contains("unknown field"), "{error}");
    }
}
