//! `aileron auth import gh`: brings a credential you already have under Aileron (SPEC §15). The
//! token `gh` uses (`GH_TOKEN`, `GITHUB_TOKEN`, else `oauth_token` for github.com in gh's
//! `hosts.yml`) is bound to the bundled spec-only connector `github://aileron/github-cli`,
//! installed first with the consent screen like any other. A launched agent's own `gh`, `curl`
//! and scripts then reach GitHub's API with it while holding only a placeholder. Nothing is
//! deleted: the original stays where it was (hidden from launched agents).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::json;
use zeroize::Zeroizing;

use super::install::{Install, install};
use super::vault::send;
use super::{CliError, CliResult, ExitStatus, escape};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;

/// The bundled GitHub spec (`connectors/specs/github-cli`), shipped in the binary.
pub const GITHUB_CLI_MANIFEST: &str = include_str!("../../../../../connectors/specs/github-cli/manifest.toml");
pub const GITHUB_CLI: &str = "github://aileron/github-cli";

#[derive(Args)]
pub struct AuthArgs {
    #[command(subcommand)]
    command: AuthCommand,
}

#[derive(Subcommand)]
enum AuthCommand {
    /// Copy a credential a tool of yours already holds into the vault and bind it to the bundled
    /// connector for its service, so launched agents use it without seeing it
    Import {
        /// Whose credential: `gh` (GitHub CLI)
        tool: Tool,
        /// Accept the connector's consent screen without asking
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Tool {
    Gh,
}

pub async fn run(home: &Home, args: AuthArgs) -> CliResult {
    match args.command {
        AuthCommand::Import { tool: Tool::Gh, yes } => import_gh(home, yes).await,
    }
}

async fn import_gh(home: &Home, yes: bool) -> CliResult {
    let (token, source) = gh_token()?;
    // The bundled spec, installed (or found installed) with consent like any package.
    let package = tempfile::tempdir().map_err(|e| CliError::failure(format!("making a temporary directory: {e}")))?;
    std::fs::write(package.path().join("manifest.toml"), GITHUB_CLI_MANIFEST)
        .map_err(|e| CliError::failure(format!("writing the bundled GitHub spec: {e}")))?;
    let manifest = aileron_core::manifest::parse_manifest(GITHUB_CLI_MANIFEST, "manifest.toml")
        .map_err(|e| CliError::failure(format!("the bundled GitHub spec does not parse: {e}")))?;
    let reference = manifest.reference().to_string();
    let installed = install(
        home,
        Install { from: Some(package.path().to_path_buf()), reference, hash: None, yes, allow_unsigned: true },
    )
    .await?;
    if !matches!(installed, ExitStatus::Ok) {
        return Ok(installed);
    }
    let client = DaemonClient::connect(home).await?;
    let body = json!({ "connector": GITHUB_CLI, "identity": "gh", "api_key": token.as_str() });
    let created = send(&client, Method::POST, "/v1/bindings/setup", body).await?;
    eprintln!(
        "bound {} from {source}; launched agents' gh, curl and scripts now reach GitHub's API with it and see only \
         a placeholder (the original is left where it was)",
        escape(created["name"].as_str().unwrap_or("?")),
    );
    Ok(ExitStatus::Ok)
}

/// The token gh itself would use, and where it was found.
fn gh_token() -> Result<(Zeroizing<String>, String), CliError> {
    for name in ["GH_TOKEN", "GITHUB_TOKEN"] {
        if let Some(token) = crate::platform::env::get(name).filter(|token| !token.trim().is_empty()) {
            return Ok((Zeroizing::new(token.trim().to_string()), format!("${name}")));
        }
    }
    let hosts = gh_config_dir().join("hosts.yml");
    let text = std::fs::read_to_string(&hosts).map_err(|e| {
        CliError::failure(format!(
            "no GitHub token to import: GH_TOKEN and GITHUB_TOKEN are unset and {} cannot be read ({e})\nhint: log \
             in with `gh auth login`, or pipe the token in: `gh auth token | aileron binding setup {GITHUB_CLI}` \
             after `aileron connector install` of the bundled spec",
            hosts.display()
        ))
    })?;
    match oauth_token(&text, "github.com") {
        Some(token) => Ok((token, hosts.display().to_string())),
        None => Err(CliError::failure(format!(
            "{} holds no oauth_token for github.com (gh may keep it in your system keyring)\nhint: `gh auth token | \
             GH_TOKEN=$(cat) aileron auth import gh`, or set GH_TOKEN for this command",
            hosts.display()
        ))),
    }
}

/// gh's configuration directory: `$GH_CONFIG_DIR`, `$XDG_CONFIG_HOME/gh`, `~/.config/gh`.
fn gh_config_dir() -> PathBuf {
    if let Some(dir) = crate::platform::env::get("GH_CONFIG_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(config) = crate::platform::env::get("XDG_CONFIG_HOME").filter(|dir| !dir.is_empty()) {
        return Path::new(&config).join("gh");
    }
    Path::new(&crate::platform::env::get("HOME").unwrap_or_default()).join(".config/gh")
}

/// `oauth_token` of `host` in gh's `hosts.yml` (a mapping of hosts, each a mapping of scalars):
/// the host's line at column 0, then its indented keys.
fn oauth_token(text: &str, host: &str) -> Option<Zeroizing<String>> {
    let mut in_host = false;
    for line in text.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with([' ', '\t']) {
            in_host = line.trim_end().trim_end_matches(':').trim_matches(['"', '\'']) == host;
            continue;
        }
        if in_host && let Some(value) = line.trim_start().strip_prefix("oauth_token:") {
            let value = value.trim().trim_matches(['"', '\'']);
            return (!value.is_empty()).then(|| Zeroizing::new(value.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_its_host_only() {
        let hosts = "# gh's hosts\ngithub.example.com:\n    oauth_token: ghe_other\ngithub.com:\n    user: octocat\n    oauth_token: \"gho_theToken\"\n    git_protocol: https\n";
        assert_eq!(oauth_token(hosts, "github.com").as_deref().map(String::as_str), Some("gho_theToken"));
        assert_eq!(oauth_token(hosts, "github.example.com").as_deref().map(String::as_str), Some("ghe_other"));
        assert!(oauth_token("github.com:\n    user: octocat\n", "github.com").is_none(), "kept in the keyring");
        assert!(oauth_token("", "github.com").is_none());
    }
}
