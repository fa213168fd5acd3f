//! The outbound HTTP decision (SPEC §4.4): which `host:port` a URL reaches, and whether the manifest
//! (sandbox boundary) and then the action's subset (action boundary) allow it.
//!
//! URLs are parsed with the same `url` crate the HTTP client uses, so the policy sees exactly the host
//! and port the request will reach (no parser differential). A few forms that crate would quietly
//! repair — whitespace, backslashes, `https:host` without `//`, user info — are refused outright.

use serde_json::Value;

use super::{CapabilitySubset, action_denied, sandbox_denied};
use crate::failure::Failure;
use crate::manifest::ConnectorManifest;

/// Where an allowed request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressTarget {
    /// `http` or `https`.
    pub scheme: String,
    /// Lowercase; an IPv6 address keeps its brackets (`[::1]`).
    pub host: String,
    pub port: u16,
    /// `host:port`, the form compared with the manifest.
    pub host_port: String,
    /// The URL path only: never the query string, which may carry secrets and must not reach audit.
    pub path: String,
    /// The normalised URL the client must send, so that what was checked is what is requested.
    pub url: String,
}

/// Splits and normalises an outbound URL; the error says why it is unusable.
pub fn parse_egress_url(raw: &str) -> Result<EgressTarget, String> {
    if raw.chars().any(|c| c.is_whitespace() || c.is_control() || c == '\\') {
        return Err("the URL contains whitespace, control characters or a backslash".to_string());
    }
    let (scheme, rest) = raw.split_once(':').ok_or_else(|| "the URL has no scheme".to_string())?;
    let scheme = scheme.to_ascii_lowercase();
    let scheme_is_word = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_is_word {
        return Err("the URL has no scheme".to_string());
    }
    if scheme != "http" && scheme != "https" {
        return Err(format!("the scheme `{scheme}` is not allowed: only http and https"));
    }
    let after_slashes = rest.strip_prefix("//").ok_or_else(|| format!("expected `//` after `{scheme}:`"))?;
    let authority = after_slashes.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err("the URL has no host".to_string());
    }
    if authority.contains('@') {
        return Err("user info (`user@`) is not allowed in a URL: credentials are injected by the host".to_string());
    }
    let url = url::Url::parse(raw).map_err(|e| format!("the URL does not parse: {e}"))?;
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| "the URL has no host".to_string())?;
    let port = url.port_or_known_default().ok_or_else(|| "the URL has no port".to_string())?;
    Ok(EgressTarget {
        scheme: url.scheme().to_string(),
        host: host.to_string(),
        port,
        host_port: format!("{host}:{port}"),
        path: url.path().to_string(),
        url: url.to_string(),
    })
}

/// The egress decision: a parseable http(s) URL whose `host:port` is in the manifest's hosts
/// (else `capability_denied`, boundary sandbox) and, when the action lists `network:` entries, among
/// them (else `capability_denied`, boundary action).
pub fn check_egress(
    manifest: &ConnectorManifest,
    subset: &CapabilitySubset,
    url: &str,
) -> Result<EgressTarget, Failure> {
    let granted: Vec<String> = manifest.network_hosts().iter().map(|h| format!("network:{h}")).collect();
    let target = parse_egress_url(url).map_err(|reason| {
        sandbox_denied(manifest, None, format!("outbound request denied: {reason}"))
            .with_detail("granted", Value::from(granted.clone()))
    })?;
    let requested = format!("network:{}", target.host_port);
    if !manifest.network_hosts().contains(&target.host_port) {
        let message = if granted.is_empty() {
            format!("the connector manifest declares no network access, so it cannot reach {}", target.host_port)
        } else {
            format!("{} is not among the connector manifest's hosts", target.host_port)
        };
        return Err(sandbox_denied(manifest, Some(requested), message).with_detail("granted", granted));
    }
    if !subset.allows_host(&target.host_port) {
        return Err(action_denied(
            subset,
            requested,
            format!("the action does not declare network:{} for this connector", target.host_port),
        ));
    }
    Ok(target)
}
