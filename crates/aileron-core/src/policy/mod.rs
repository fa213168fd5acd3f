//! Capability decisions at both boundaries (SPEC §4.4, §4.5).
//!
//! Boundary `sandbox`: the connector's manifest — what the connector may do at all.
//! Boundary `action`: the action's `[[requires.connectors]].capabilities` — what this action lets the
//! connector do. Every check returns data (`Ok` or a `Failure` ready for the envelope and the audit
//! record); the shell acts on it. Denials never echo a URL's path, query or any credential.

mod agent_egress;
mod egress;
mod forms;
mod operations;
#[cfg(test)]
mod properties;
mod spawn;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use crate::action::RequiredConnector;
use crate::failure::{Boundary, Failure};
use crate::manifest::{ConnectorManifest, CredentialKind};

pub use agent_egress::{AgentEgressPolicy, EgressMode, FILE_NAME as AGENT_EGRESS_FILE};
pub use egress::{EgressTarget, check_egress, parse_egress_url};
pub use forms::{FormReadings, form_pairs, form_readings, parameter_key};
pub use operations::{OperationIndex, OperationMatch, graphql_in_query, graphql_names};
pub use spawn::{SpawnEnvelope, SpawnPlan, plan_envelope, plan_operation, spawn_args};

/// One entry of `[[requires.connectors]].capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CapabilityEntry {
    /// `oauth2`, `api_key`, `aws_sigv4`: the action may use the connector's credential.
    Credential(CredentialKind),
    /// `network:<host:port>`: narrows the manifest's hosts.
    Network(String),
    /// `spawn:<op>`: the action may run this spawn operation.
    Spawn(String),
    /// A connector op name: when any are listed, steps may call only those.
    Op(String),
}

impl CapabilityEntry {
    pub fn parse(entry: &str) -> Result<CapabilityEntry, String> {
        if let Some(kind) = CredentialKind::parse(entry) {
            return Ok(CapabilityEntry::Credential(kind));
        }
        if let Some(host_port) = entry.strip_prefix("network:") {
            validate_host_port(host_port).map_err(|reason| format!("`{entry}`: {reason}"))?;
            return Ok(CapabilityEntry::Network(host_port.to_string()));
        }
        if let Some(op) = entry.strip_prefix("spawn:") {
            validate_op_name(op).map_err(|reason| format!("`{entry}`: {reason}"))?;
            return Ok(CapabilityEntry::Spawn(op.to_string()));
        }
        if let Some((prefix, _)) = entry.split_once(':') {
            return Err(format!(
                "`{entry}` has the unknown prefix `{prefix}:`; an entry is a credential kind (api_key, oauth2, \
                 aws_sigv4), network:<host:port>, spawn:<op> or an op name"
            ));
        }
        validate_op_name(entry)?;
        Ok(CapabilityEntry::Op(entry.to_string()))
    }
}

impl fmt::Display for CapabilityEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapabilityEntry::Credential(kind) => f.write_str(kind.as_str()),
            CapabilityEntry::Network(host_port) => write!(f, "network:{host_port}"),
            CapabilityEntry::Spawn(op) => write!(f, "spawn:{op}"),
            CapabilityEntry::Op(op) => f.write_str(op),
        }
    }
}

/// The capability subset one action grants one connector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CapabilitySubset {
    entries: Vec<CapabilityEntry>,
}

impl CapabilitySubset {
    pub fn new(entries: Vec<CapabilityEntry>) -> CapabilitySubset {
        CapabilitySubset { entries }
    }

    /// Parses a list of entries as written in an action file.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<CapabilitySubset, String> {
        let entries = entries.iter().map(|e| CapabilityEntry::parse(e.as_ref())).collect::<Result<_, _>>()?;
        Ok(CapabilitySubset { entries })
    }

    pub fn entries(&self) -> &[CapabilityEntry] {
        &self.entries
    }

    pub fn ops(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match e {
            CapabilityEntry::Op(op) => Some(op.as_str()),
            _ => None,
        })
    }

    pub fn network_hosts(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match e {
            CapabilityEntry::Network(host_port) => Some(host_port.as_str()),
            _ => None,
        })
    }

    pub fn credential_kinds(&self) -> impl Iterator<Item = CredentialKind> + '_ {
        self.entries.iter().filter_map(|e| match e {
            CapabilityEntry::Credential(kind) => Some(*kind),
            _ => None,
        })
    }

    pub fn spawn_ops(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match e {
            CapabilityEntry::Spawn(op) => Some(op.as_str()),
            _ => None,
        })
    }

    /// If any op names are listed, only those; otherwise every op.
    pub fn allows_op(&self, op: &str) -> bool {
        let mut ops = self.ops().peekable();
        ops.peek().is_none() || ops.any(|listed| listed == op)
    }

    /// `network:` entries, when present, narrow the manifest's hosts; absent, the manifest decides.
    pub fn allows_host(&self, host_port: &str) -> bool {
        let mut hosts = self.network_hosts().peekable();
        hosts.peek().is_none() || hosts.any(|listed| listed == host_port)
    }

    pub fn declares_credential(&self, kind: CredentialKind) -> bool {
        self.credential_kinds().any(|k| k == kind)
    }

    pub fn declares_spawn(&self, op: &str) -> bool {
        self.spawn_ops().any(|listed| listed == op)
    }

    /// The entries as written, for `details.declared_subset`.
    pub fn to_strings(&self) -> Vec<String> {
        self.entries.iter().map(CapabilityEntry::to_string).collect()
    }
}

impl From<&RequiredConnector> for CapabilitySubset {
    fn from(required: &RequiredConnector) -> CapabilitySubset {
        CapabilitySubset::new(required.capabilities.clone())
    }
}

/// A denial at the action boundary, carrying the declared subset.
fn action_denied(subset: &CapabilitySubset, requested: String, message: String) -> Failure {
    Failure::capability_denied(Boundary::Action, message)
        .with_detail("requested", requested)
        .with_detail("declared_subset", subset.to_strings())
}

/// A denial at the sandbox boundary (the connector's manifest).
fn sandbox_denied(manifest: &ConnectorManifest, requested: Option<String>, message: String) -> Failure {
    let failure = Failure::capability_denied(Boundary::Sandbox, message)
        .with_detail("connector", manifest.reference().to_string());
    match requested {
        Some(requested) => failure.with_detail("requested", requested),
        None => failure,
    }
}

/// A step may call `op` only if the subset lists no ops or lists this one.
pub fn check_op(subset: &CapabilitySubset, op: &str) -> Result<(), Failure> {
    if subset.allows_op(op) {
        return Ok(());
    }
    Err(action_denied(
        subset,
        format!("op:{op}"),
        format!("the action does not declare the op `{op}` for this connector"),
    ))
}

/// Credential use: the manifest must declare exactly this kind (sandbox), and the action must list it
/// (action).
pub fn check_credential(
    manifest: &ConnectorManifest,
    subset: &CapabilitySubset,
    requested_kind: &str,
) -> Result<CredentialKind, Failure> {
    let requested = format!("credential:{requested_kind}");
    let Some(kind) = CredentialKind::parse(requested_kind) else {
        return Err(sandbox_denied(
            manifest,
            Some(requested),
            format!("`{requested_kind}` is not a credential kind (api_key, oauth2, aws_sigv4)"),
        ));
    };
    match manifest.credential_kind() {
        None => {
            return Err(sandbox_denied(
                manifest,
                Some(requested),
                format!("the connector manifest declares no credential, so it cannot use {kind}"),
            ));
        }
        Some(declared) if declared != kind => {
            return Err(sandbox_denied(
                manifest,
                Some(requested),
                format!("the connector manifest declares the credential kind {declared}, not {kind}"),
            )
            .with_detail("granted", Value::from(vec![format!("credential:{declared}")])));
        }
        Some(_) => {}
    }
    if !subset.declares_credential(kind) {
        return Err(action_denied(
            subset,
            requested,
            format!("the action does not declare the credential kind {kind} for this connector"),
        ));
    }
    Ok(kind)
}

/// Spawn at the action boundary: the action must list `spawn:<op>`.
pub fn check_spawn_declared(subset: &CapabilitySubset, op: &str) -> Result<(), Failure> {
    if subset.declares_spawn(op) {
        return Ok(());
    }
    Err(action_denied(subset, format!("spawn:{op}"), format!("the action does not declare spawn:{op}")))
}

/// Spawn at both boundaries: the manifest must declare the operation, then the action must list it.
pub fn check_spawn_op(manifest: &ConnectorManifest, subset: &CapabilitySubset, op: &str) -> Result<(), Failure> {
    let declared = manifest.spawn.as_ref().is_some_and(|spawn| spawn.operation(op).is_some());
    if !declared {
        let granted: Vec<String> =
            manifest.spawn.iter().flat_map(|spawn| spawn.operations.keys().map(|op| format!("spawn:{op}"))).collect();
        return Err(sandbox_denied(
            manifest,
            Some(format!("spawn:{op}")),
            format!("the connector manifest declares no spawn operation `{op}`"),
        )
        .with_detail("granted", granted));
    }
    check_spawn_declared(subset, op)
}

/// Install-time consistency of an action's subset with the manifest it will run against: an action
/// must not claim what the connector can never do. Lists every problem.
pub fn check_subset_against_manifest(subset: &CapabilitySubset, manifest: &ConnectorManifest) -> Result<(), String> {
    let mut problems = Vec::new();
    let connector = manifest.reference();
    for host_port in subset.network_hosts() {
        if !manifest.network_hosts().iter().any(|h| h == host_port) {
            problems.push(format!("network:{host_port} is not among the hosts of {connector}"));
        }
    }
    for kind in subset.credential_kinds() {
        match manifest.credential_kind() {
            None => problems.push(format!("{kind}: {connector} declares no credential")),
            Some(declared) if declared != kind => {
                problems.push(format!("{kind}: {connector} declares the credential kind {declared}"))
            }
            Some(_) => {}
        }
    }
    for op in subset.spawn_ops() {
        let declared = manifest.spawn.as_ref().is_some_and(|spawn| spawn.operation(op).is_some());
        if !declared {
            problems.push(format!("spawn:{op}: {connector} declares no spawn operation `{op}`"));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// Op names: what `[[execute]] op`, `spawn:<op>` and op capability entries may contain.
pub fn validate_op_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid { Ok(()) } else { Err(format!("{name:?} is not a valid op name: use letters, digits, `_`, `.` and `-`")) }
}

/// `host:port` exactly as the egress check compares it: lowercase host (DNS name, canonical IPv4 or
/// bracketed canonical IPv6), port 1..=65535 without leading zeros; no scheme, path, user info or
/// wildcard.
pub fn validate_host_port(value: &str) -> Result<(), String> {
    if value.contains("://") {
        return Err(format!("`{value}` has a scheme: write only host:port, e.g. `api.github.com:443`"));
    }
    if value.contains('*') {
        return Err(format!("`{value}` has a wildcard: list each host:port exactly"));
    }
    if value.contains(['/', '?', '#']) {
        return Err(format!("`{value}` has a path: write only host:port"));
    }
    if value.contains('@') {
        return Err(format!("`{value}` has user info: write only host:port"));
    }
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (address, port) = rest
            .split_once("]:")
            .ok_or_else(|| format!("`{value}` needs a port after the IPv6 address, e.g. `[::1]:8080`"))?;
        let parsed: Ipv6Addr = address.parse().map_err(|_| format!("`[{address}]` is not a valid IPv6 address"))?;
        // Canonical as the URL parser writes it, which is what the egress check compares: std
        // writes an IPv4-mapped address dotted (`::ffff:127.0.0.1`), the URL parser in hex.
        let canonical = url::Host::<String>::Ipv6(parsed).to_string();
        if canonical != format!("[{address}]") {
            return Err(format!("write the IPv6 address in its canonical form: `{canonical}:{port}`"));
        }
        (None, port)
    } else {
        let (host, port) = value
            .rsplit_once(':')
            .ok_or_else(|| format!("`{value}` has no port: write host:port, e.g. `{value}:443`"))?;
        if host.contains(':') {
            return Err(format!("`{value}`: an IPv6 address must be bracketed, e.g. `[::1]:8080`"));
        }
        (Some(host), port)
    };
    let port_valid = !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && !port.starts_with('0')
        && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
    if !port_valid {
        return Err(format!("`{value}`: the port must be a number from 1 to 65535"));
    }
    if let Some(host) = host {
        validate_host(host).map_err(|reason| format!("`{value}`: {reason}"))?;
    }
    Ok(())
}

fn validate_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("the host is missing".to_string());
    }
    if !host.is_ascii() {
        return Err("write the host in its ASCII (punycode) form".to_string());
    }
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(format!("the host must be lowercase (`{}`)", host.to_ascii_lowercase()));
    }
    if host.len() > 253 {
        return Err("the host is longer than 253 characters".to_string());
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err("the host has an empty label (leading, trailing or double dot)".to_string());
        }
        if label.len() > 63 {
            return Err(format!("the label `{label}` is longer than 63 characters"));
        }
        if !label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            return Err(format!("the label `{label}` may only contain letters, digits and `-`"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("the label `{label}` must not start or end with `-`"));
        }
    }
    // URL parsers read a host whose last label is numeric as an IPv4 address, so such a host must be
    // one, written canonically, or it could never match what the egress check sees.
    let last = host.rsplit('.').next().unwrap_or(host);
    if last.bytes().all(|b| b.is_ascii_digit()) {
        let canonical = host.parse::<Ipv4Addr>().ok().filter(|ip| ip.to_string() == host);
        if canonical.is_none() {
            return Err(format!("`{host}` is not a canonical IPv4 address"));
        }
    }
    // Likewise for what else the URL parser rewrites or refuses: a hexadecimal last label (`0x`,
    // `a.0x1f`) makes an IPv4 address, and an `xn--` label must be valid punycode.
    match url::Host::parse(host) {
        Ok(parsed) if parsed.to_string() == host => Ok(()),
        Ok(parsed) => Err(format!("a URL with the host `{host}` reaches `{parsed}`: write that instead")),
        Err(error) => Err(format!("`{host}` is not a host a URL can name ({error})")),
    }
}
