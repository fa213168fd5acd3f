//! The install consent prompt's capability list: every grant the manifest asks for, in plain words.
//! A capability missing from this list would be granted without the user having read it, so each
//! section of the manifest contributes its own lines.

use super::{ConnectorManifest, CredentialMethod};

/// What an address written literally reaches, when it is not somewhere on the internet: a
/// manifest reaches such an address only by naming it, so the consent is where the user learns
/// that `0.0.0.0` or `[::ffff:7f00:1]` is this computer (the ninth re-attack).
fn address_kind(host: &str) -> Option<&'static str> {
    use std::net::IpAddr;
    let ip: IpAddr = host.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let metadata = [IpAddr::from([169, 254, 169, 254]), IpAddr::from([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254])];
    Some(match ip {
        ip if ip.is_unspecified() => "this computer: every address it listens on",
        ip if ip.is_loopback() => "this computer",
        ip if metadata.contains(&ip) => "the cloud metadata service, which hands out this machine's credentials",
        IpAddr::V4(v4) if v4.is_private() || v4.octets()[0] == 100 && v4.octets()[1] & 0xc0 == 64 => {
            "an address of your local network"
        }
        IpAddr::V4(v4) if v4.is_link_local() => "a link-local address of your network",
        IpAddr::V6(v6) if v6.segments()[0] & 0xfe00 == 0xfc00 => "an address of your local network",
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => "a link-local address of your network",
        _ => return None,
    })
}

pub(super) fn describe(manifest: &ConnectorManifest) -> Vec<String> {
    let mut lines = Vec::new();
    let hosts = manifest.network_hosts();
    if hosts.is_empty() {
        lines.push("no network access".to_string());
    }
    for host_port in hosts {
        // Hosts are validated as `host:port`; an IPv6 host keeps its brackets.
        let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port.as_str(), ""));
        let what = address_kind(host).map(|what| format!(" ({what})")).unwrap_or_default();
        lines.push(format!("connect to {host}{what} on port {port}"));
    }
    if let Some(credential) = &manifest.credential {
        let scope = credential.scope.as_deref().map(|s| format!(": {s}")).unwrap_or_default();
        lines.push(match &credential.method {
            CredentialMethod::ApiKey(api_key) => {
                format!("use an API key you bind (sent as the {} header){scope}", api_key.header)
            }
            CredentialMethod::OAuth2(oauth) => {
                let host = |url: &str| {
                    url::Url::parse(url)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_string))
                        .unwrap_or_else(|| url.into())
                };
                let (provider, tokens) = (host(&oauth.authorize_url), host(&oauth.token_url));
                // The token endpoint gets the sign-in's code and every refresh token: a package
                // naming the provider's sign-in and its own token endpoint took both (the ninth
                // re-attack), so another host is named, and said to be another.
                let elsewhere = if tokens == provider {
                    String::new()
                } else {
                    format!(
                        "; its tokens come from {tokens}, another host than the sign-in's: your authorization and \
                         refresh tokens are sent there"
                    )
                };
                format!(
                    "use an account you authorize with OAuth2 at {provider} (scopes: {}){elsewhere}{scope}",
                    oauth.scopes.join(", ")
                )
            }
            CredentialMethod::AwsSigv4(aws) => {
                let region = aws.region.as_deref().map(|r| format!(" in {r}")).unwrap_or_default();
                format!("sign requests to the AWS service {}{region} with AWS credentials you bind{scope}", aws.service)
            }
        });
    }
    if let Some(spawn) = &manifest.spawn {
        for (name, operation) in &spawn.operations {
            lines.push(format!(
                "run {} with: {} ({name}: {})",
                operation.program, operation.argv, operation.description
            ));
        }
        for program in spawn.programs.iter().filter(|p| !spawn.operations.values().any(|o| o.program == p.path)) {
            lines.push(format!("run {}", program.path));
        }
        let plain_env: Vec<&str> = spawn
            .env_passthrough
            .iter()
            .filter(|key| !spawn.credential_env_keys.contains(key))
            .map(String::as_str)
            .collect();
        if !plain_env.is_empty() {
            lines.push(format!("pass the environment variables {} to programs it runs", plain_env.join(", ")));
        }
        if !spawn.credential_env_keys.is_empty() {
            lines.push(format!(
                "give programs it runs your bound credential in the environment variables {}",
                spawn.credential_env_keys.join(", ")
            ));
        }
        if !spawn.fs_read.is_empty() {
            lines.push(format!("let programs it runs read {}", spawn.fs_read.join(", ")));
        }
        if !spawn.fs_write.is_empty() {
            lines.push(format!("let programs it runs write to {}", spawn.fs_write.join(", ")));
        }
        if let Some(cwd) = &spawn.cwd {
            let writable = spawn.fs_write.iter().any(|scope| super::spawn::path_within(cwd, scope));
            let access = if writable { "which they may write to" } else { "read-only" };
            lines.push(format!("start programs it runs in {cwd} ({access})"));
        }
    }
    if let Some(proxy) = &manifest.proxy {
        let credentialed = if manifest.credential.is_some() {
            "with your bound credential"
        } else {
            "without a credential (none is declared)"
        };
        for operation in &proxy.operations {
            let (host, port) = operation.host.rsplit_once(':').unwrap_or((operation.host.as_str(), ""));
            let approval = if operation.approval { ", each one only after you approve it" } else { "" };
            let graphql = operation
                .graphql
                .as_deref()
                .map(|field| format!(" naming the GraphQL field {field}"))
                .unwrap_or_default()
                + &operation.query.as_deref().map(|name| format!(" with ?{name} in the query")).unwrap_or_default()
                + &if operation.headers.is_empty() {
                    String::new()
                } else {
                    format!(" carrying a {} header", operation.headers.join(" or "))
                };
            lines.push(format!(
                "send a launched agent's {} {}{}{graphql} requests to {host} (port {port}) {credentialed}{approval} ({})",
                operation.method,
                operation.path.as_str(),
                if operation.path.rest { " (and everything under it)" } else { "" },
                operation.name
            ));
        }
        if !proxy.placeholder_env.is_empty() {
            lines.push(format!(
                "set {} to a placeholder in launched agents, so their own tools send requests the proxy credentials",
                proxy.placeholder_env.join(", ")
            ));
        }
    }
    if let Some(imports) = manifest.runtime_imports() {
        lines.push(if imports.is_empty() {
            "call no host functions".to_string()
        } else {
            format!("call the host functions {}", imports.join(", "))
        });
    }
    lines
}
