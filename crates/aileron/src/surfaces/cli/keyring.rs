//! `aileron keyring trust|list|revoke`: which publisher keys may sign packages (SPEC §3.5).
//! `trust` fetches `keys/publisher.pub` from the authority's repository (or reads `--key FILE`),
//! shows its fingerprint and hands it to the daemon, which stores and audits it.

use std::io::IsTerminal;
use std::path::PathBuf;

use aileron_core::signing::{KeyError, PublicKey};
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{ApiFailure, DaemonClient};

#[derive(Args)]
pub struct KeyringArgs {
    #[command(subcommand)]
    command: KeyringCommand,
}

#[derive(Subcommand)]
enum KeyringCommand {
    /// Trust the key an owner (github://acme) or a repository (github://acme/widget) publishes
    Trust {
        authority: String,
        /// Read the public key from this file instead of fetching keys/publisher.pub
        #[arg(long)]
        key: Option<PathBuf>,
        /// Do not ask for confirmation
        #[arg(long)]
        yes: bool,
    },
    /// List trusted keys with their fingerprints
    List {
        #[arg(long)]
        json: bool,
    },
    /// Stop trusting every key of an authority, or one key by fingerprint (--key sha256:…)
    Revoke {
        authority: Option<String>,
        #[arg(long = "key", value_name = "FINGERPRINT")]
        fingerprint: Option<String>,
    },
}

/// Fetches and parses `keys/publisher.pub` of `authority`.
pub async fn fetch_key(authority: &str) -> Result<PublicKey, CliError> {
    let url = crate::stores::forge::publisher_key_url(authority).map_err(|e| {
        CliError::failure(format!("{e}\nhint: an authority is github://<owner>[/<repo>] or gitlab://…"))
    })?;
    let bytes = crate::stores::forge::fetch(&url, 64 * 1024, &mut |_, _| {}).await.map_err(|e| {
        CliError::failure(format!(
            "{e}\nhint: the publisher must commit its public key as keys/publisher.pub; or pass --key FILE"
        ))
    })?;
    PublicKey::parse(&String::from_utf8_lossy(&bytes))
        .map_err(|e| CliError::failure(format!("{url}: {e}\nhint: ask the publisher to fix keys/publisher.pub")))
}

/// Reads `--key FILE`; each way it can be wrong gets its own hint.
fn read_key_file(path: &std::path::Path) -> Result<PublicKey, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::failure(format!(
            "reading {}: {e}\nhint: pass the publisher's public key file, usually keys/publisher.pub in its repository",
            path.display()
        ))
    })?;
    PublicKey::parse(&text).map_err(|e| {
        let hint = match e {
            KeyError::PrivateKey => {
                "never share publisher.key; the public key is publisher.pub, written next to it by `aileron connector keygen`"
            }
            KeyError::Invalid(_) => {
                "the file must hold one ed25519 public key: a PEM `-----BEGIN PUBLIC KEY-----` block or base64 of its 32 bytes"
            }
        };
        CliError::failure(format!("{}: {e}\nhint: {hint}", path.display()))
    })
}

pub async fn run(home: &Home, args: KeyringArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        KeyringCommand::Trust { authority, key, yes } => {
            let authority = aileron_core::signing::parse_authority(&authority).map_err(|e| {
                CliError::failure(format!("{e}\nhint: an authority is github://<owner> or github://<owner>/<repo>"))
            })?;
            let key = match key {
                Some(path) => read_key_file(&path)?,
                None => fetch_key(&authority).await?,
            };
            eprintln!("{authority} key {}", key.fingerprint());
            // The same consent rule as `connector install`: a person answers at a terminal, a
            // script says `--yes`; no terminal and no `--yes` is a refusal, not a silent yes.
            if !yes {
                if !std::io::stdin().is_terminal() {
                    return Err(CliError::failure(format!(
                        "trusting {authority}'s key needs your consent, and there is no terminal to ask on\n\
                         hint: check the fingerprint above with the publisher and re-run with --yes"
                    )));
                }
                if !super::ask(&format!("Trust publisher {authority}? [y/N] "))? {
                    eprintln!("not trusted");
                    return Ok(super::ExitStatus::Failure);
                }
            }
            let answer =
                client.post("/v1/keyring/trust", &json!({ "authority": authority, "key": key.to_base64() })).await?;
            if answer["added"] == true {
                eprintln!("trusted {authority} ({})", key.fingerprint());
            } else {
                eprintln!("{authority} ({}) was already trusted", key.fingerprint());
            }
            outln!("{}", key.fingerprint());
            Ok(ExitStatus::Ok)
        }
        KeyringCommand::List { json } => {
            let listing = client.get("/v1/keyring").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            let items = listing["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                eprintln!("no trusted keys; trust a publisher with `aileron keyring trust github://<owner>[/<repo>]`");
            }
            for item in items {
                outln!(
                    "{}  {}",
                    item["fingerprint"].as_str().unwrap_or("?"),
                    item["authority"].as_str().unwrap_or("?")
                );
            }
            Ok(ExitStatus::Ok)
        }
        KeyringCommand::Revoke { authority, fingerprint } => {
            let body = match (authority, fingerprint) {
                (Some(authority), None) => json!({ "authority": authority }),
                (None, Some(fingerprint)) => json!({ "fingerprint": fingerprint }),
                (None, None) => {
                    return Err(CliError::usage(
                        "say which key to stop trusting: an authority or --key <fingerprint>\nhint: `aileron keyring list` shows the trusted keys; e.g. aileron keyring revoke github://acme",
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(CliError::usage(
                        "give an authority or --key <fingerprint>, not both\nhint: aileron keyring revoke github://acme revokes every key of that authority",
                    ));
                }
            };
            let (status, answer) = client.call_raw(Method::POST, "/v1/keyring/revoke", Some(&body)).await?;
            if !status.is_success() {
                return Err(CliError::failure(ApiFailure { status, body: answer }.to_string()));
            }
            let authorities: Vec<&str> =
                answer["authorities"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            eprintln!("revoked {} key(s) of {}", answer["removed"], super::escape(&authorities.join(", ")));
            Ok(ExitStatus::Ok)
        }
    }
}
