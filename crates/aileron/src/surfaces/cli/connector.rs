//! `aileron connector install|upgrade|show|list|remove|gc|check|keygen|pack`. The install
//! pipeline's CLI half (preview, trust, consent, install) is `cli/install.rs`; the upgrade's
//! re-pinning is `cli/upgrade.rs`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;

#[derive(Args)]
pub struct ConnectorArgs {
    #[command(subcommand)]
    command: ConnectorCommand,
}

#[derive(Subcommand)]
enum ConnectorCommand {
    /// Install a connector by name (its release on GitHub/GitLab) after showing every capability it asks for
    Install {
        /// `<fqn>@<version>`, e.g. github://aileron/github-issues@0.1.0
        reference: String,
        /// Install this local package instead of fetching the release: a directory
        /// (connector.wasm, manifest.toml[, signature.sig]) or an aileron.tar.gz
        #[arg(long = "from", value_name = "DIR|TARBALL")]
        from: Option<PathBuf>,
        /// The expected content hash (`sha256:…`); anything else is refused
        #[arg(long)]
        hash: Option<String>,
        /// Consent without a prompt
        #[arg(long)]
        yes: bool,
        /// With --yes: accept a package that carries no signature
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// Show one installed connector: versions, hashes, signature, capabilities, the actions using it
    Show {
        /// The FQN (every installed version) or `<fqn>@<version>`
        connector: String,
    },
    /// Install a newer version and re-pin the actions that use the connector to it (a visible,
    /// consented edit of each action file: version and hash, nothing else)
    Upgrade {
        /// The connector's FQN, without a version, e.g. github://acme/slack
        fqn: String,
        /// The version to move to (default: the newest release)
        #[arg(long, value_name = "VERSION")]
        to: Option<String>,
        /// Install this local package of the new version instead of fetching its release
        #[arg(long = "from", value_name = "DIR|TARBALL")]
        from: Option<PathBuf>,
        /// Consent without a prompt, to the install and to the re-pinning
        #[arg(long)]
        yes: bool,
        /// With --yes: accept a package that carries no signature
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// Remove an installed version (refused while an installed action uses it)
    Remove { reference: String },
    /// Remove installed connectors no action uses, and stale compiled-module cache files
    Gc,
    /// List newer releases of the installed connectors (pre-releases only with --pre)
    Check {
        #[arg(long)]
        pre: bool,
        #[arg(long)]
        json: bool,
    },
    /// Make a publisher key pair: <out>/publisher.key (0600, keep it secret) and <out>/publisher.pub
    Keygen {
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Pack (and sign) a connector directory into aileron.tar.gz and print its hash
    Pack {
        /// A directory with connector.wasm and manifest.toml
        dir: PathBuf,
        /// The private key made by `aileron connector keygen`; without it the package is unsigned
        #[arg(long)]
        key: Option<PathBuf>,
        /// Where to write the tarball
        #[arg(long, default_value = "aileron.tar.gz")]
        out: PathBuf,
    },
    /// List installed connectors
    List {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(home: &Home, args: ConnectorArgs) -> CliResult {
    match args.command {
        ConnectorCommand::Install { from, reference, hash, yes, allow_unsigned } => {
            super::install::install(home, super::install::Install { from, reference, hash, yes, allow_unsigned }).await
        }
        ConnectorCommand::Show { connector } => {
            let client = DaemonClient::connect(home).await?;
            let listing = client.get("/v1/connectors").await?;
            let actions = client.get("/v1/actions").await?;
            let matches: Vec<&Value> = listing["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|item| {
                    item["fqn"] == connector.as_str()
                        || format!("{}@{}", item["fqn"].as_str().unwrap_or(""), item["version"].as_str().unwrap_or(""))
                            == connector
                })
                .collect();
            if matches.is_empty() {
                return Err(CliError::failure(format!(
                    "{connector} is not installed\nhint: `aileron connector list` shows what is installed"
                )));
            }
            for item in matches {
                outln!("{}@{}", item["fqn"].as_str().unwrap_or("?"), item["version"].as_str().unwrap_or("?"));
                outln!("  hash       {}", item["hash"].as_str().unwrap_or("?"));
                outln!("  signature  {}", item["signature"].as_str().unwrap_or("?"));
                outln!("  credential {}", item["credential"].as_str().unwrap_or("none"));
                let intents: Vec<&str> =
                    item["intents"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                if !intents.is_empty() {
                    // `[provides] intents`: what the publisher says it is for; it grants nothing.
                    outln!("  for        {}", super::escape(&intents.join(", ")));
                }
                for capability in item["capabilities"].as_array().into_iter().flatten() {
                    outln!("  may        {}", super::escape(capability.as_str().unwrap_or("?")));
                }
                let users: Vec<&str> = actions["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|a| a["connectors"].as_array().into_iter().flatten().any(|c| c["hash"] == item["hash"]))
                    .filter_map(|a| a["name"].as_str())
                    .collect();
                outln!("  used by    {}", if users.is_empty() { "(no action)".to_string() } else { users.join(", ") });
            }
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::Upgrade { fqn, to, from, yes, allow_unsigned } => {
            super::upgrade::run(home, super::upgrade::Upgrade { fqn, to, from, yes, allow_unsigned }).await
        }
        ConnectorCommand::Remove { reference } => {
            let client = DaemonClient::connect(home).await?;
            let removed = client.post("/v1/connectors/remove", &json!({ "reference": reference })).await?;
            eprintln!("removed {reference} ({})", removed["hash"].as_str().unwrap_or("?"));
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::Check { pre, json } => {
            let client = DaemonClient::connect(home).await?;
            let checked = client.get(&format!("/v1/connectors/check?pre={pre}")).await?;
            if json {
                print_json(&checked);
                return Ok(ExitStatus::Ok);
            }
            for item in checked["items"].as_array().into_iter().flatten() {
                let fqn = item["fqn"].as_str().unwrap_or("?");
                let installed: Vec<&str> =
                    item["installed"].as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
                match (item["error"].as_str(), item["newer"].as_array()) {
                    (Some(error), _) => outln!("{fqn}: could not check ({error})"),
                    (None, Some(newer)) if !newer.is_empty() => {
                        let newer: Vec<&str> = newer.iter().filter_map(|v| v.as_str()).collect();
                        outln!("{fqn}: installed {}, newer: {}", installed.join(", "), newer.join(", "));
                    }
                    _ => outln!("{fqn}: installed {}, up to date", installed.join(", ")),
                }
            }
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::Gc => {
            let client = DaemonClient::connect(home).await?;
            let collected = client.post("/v1/connectors/gc", &json!({})).await?;
            for reference in collected["removed"].as_array().into_iter().flatten() {
                eprintln!("removed {}", reference.as_str().unwrap_or("?"));
            }
            eprintln!("{} compiled-cache file(s) removed", collected["compiled_artifacts_removed"]);
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::Keygen { out } => {
            let public = crate::stores::publish::keygen(&out)?;
            eprintln!(
                "wrote {} (private, 0600: keep it secret) and {}",
                out.join("publisher.key").display(),
                out.join("publisher.pub").display()
            );
            eprintln!(
                "publish publisher.pub as keys/publisher.pub on your repository's default branch; fingerprint {}",
                public.fingerprint()
            );
            outln!("{}", public.fingerprint());
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::Pack { dir, key, out } => {
            let (tarball, hash, signer) = crate::stores::publish::pack(&dir, key.as_deref())?;
            crate::platform::home::write_atomic(&out, &tarball, 0o644)
                .with_context(|| format!("writing {}", out.display()))?;
            match signer {
                Some(signer) => eprintln!("wrote {} signed with key {}", out.display(), signer.fingerprint()),
                None => eprintln!("wrote {} (unsigned: pass --key to sign it)", out.display()),
            }
            outln!("{hash}");
            Ok(ExitStatus::Ok)
        }
        ConnectorCommand::List { json } => {
            let client = DaemonClient::connect(home).await?;
            let listing = client.get("/v1/connectors").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            let items = listing["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                eprintln!("no connectors installed");
            }
            for item in items {
                outln!(
                    "{}@{}  {}  {}",
                    item["fqn"].as_str().unwrap_or("?"),
                    item["version"].as_str().unwrap_or("?"),
                    item["hash"].as_str().unwrap_or("?"),
                    item["signature"].as_str().unwrap_or("?"),
                );
            }
            Ok(ExitStatus::Ok)
        }
    }
}
