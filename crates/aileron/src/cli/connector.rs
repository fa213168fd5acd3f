//! `aileron connector install|list`. Install runs the pipeline in the daemon up to consent
//! (preview), asks the user, then installs exactly the bytes consented to (the hash is re-checked).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{CliError, CliResult, EXIT_OK, print_json};
use crate::client::DaemonClient;
use crate::home::Home;

#[derive(Args)]
pub struct ConnectorArgs {
    #[command(subcommand)]
    command: ConnectorCommand,
}

#[derive(Subcommand)]
enum ConnectorCommand {
    /// Install a connector package after showing every capability it asks for
    Install {
        /// A package directory (connector.wasm, manifest.toml[, signature.sig]) or an aileron.tar.gz
        #[arg(long = "from", value_name = "DIR|TARBALL")]
        from: PathBuf,
        /// `<fqn>@<version>`, e.g. github://aileron/github-issues@0.1.0
        reference: String,
        /// Consent without a prompt
        #[arg(long)]
        yes: bool,
        /// With --yes: accept a package that carries no signature
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// List installed connectors
    List {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(home: &Home, args: ConnectorArgs) -> CliResult {
    match args.command {
        ConnectorCommand::Install { from, reference, yes, allow_unsigned } => {
            install(home, from, reference, yes, allow_unsigned).await
        }
        ConnectorCommand::List { json } => {
            let client = DaemonClient::connect(home).await?;
            let listing = client.get("/v1/connectors").await?;
            if json {
                print_json(&listing);
                return Ok(EXIT_OK);
            }
            let items = listing["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                eprintln!("no connectors installed");
            }
            for item in items {
                println!(
                    "{}@{}  {}  {}",
                    item["fqn"].as_str().unwrap_or("?"),
                    item["version"].as_str().unwrap_or("?"),
                    item["hash"].as_str().unwrap_or("?"),
                    item["signature"].as_str().unwrap_or("?"),
                );
            }
            Ok(EXIT_OK)
        }
    }
}

async fn install(home: &Home, from: PathBuf, reference: String, yes: bool, allow_unsigned: bool) -> CliResult {
    let source = std::path::absolute(&from).with_context(|| format!("resolving {}", from.display()))?;
    let client = DaemonClient::connect(home).await?;
    let preview = client.post("/v1/connectors/preview", &json!({ "source": source, "reference": reference })).await?;
    eprint!("{}", consent_text(&preview));
    let unsigned = preview["signature"].as_str() != Some("signed");
    let via = if yes {
        if unsigned && !allow_unsigned {
            return Err(CliError::failure(
                "this package is not signed (or its signature cannot be verified yet), and --yes alone does not accept that\n\
                 hint: re-run with --yes --allow-unsigned if you trust where the package came from",
            ));
        }
        "flag"
    } else {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::failure(
                "installing needs your consent, and there is no terminal to ask on\n\
                 hint: review the capabilities above and re-run with --yes (plus --allow-unsigned for unsigned packages)",
            ));
        }
        if !ask("Install this connector? [y/N] ")? {
            eprintln!("cancelled; nothing was installed");
            return Ok(super::EXIT_FAILURE);
        }
        "prompt"
    };
    let body = json!({
        "source": source,
        "reference": reference,
        "expected_hash": preview["hash"],
        "consent": via,
    });
    let installed = client.post("/v1/connectors/install", &body).await?;
    eprintln!(
        "installed {}@{} ({}); audit {}",
        installed["fqn"].as_str().unwrap_or("?"),
        installed["version"].as_str().unwrap_or("?"),
        installed["hash"].as_str().unwrap_or("?"),
        installed["audit_id"].as_str().unwrap_or("?"),
    );
    println!("{}", installed["hash"].as_str().unwrap_or_default());
    Ok(EXIT_OK)
}

/// The consent screen: identity, signature status and every capability in plain words.
pub fn consent_text(preview: &Value) -> String {
    let mut text = String::new();
    text.push_str(&format!(
        "Connector   {}@{}\n",
        preview["fqn"].as_str().unwrap_or("?"),
        preview["version"].as_str().unwrap_or("?")
    ));
    text.push_str(&format!("Hash        {}\n", preview["short_hash"].as_str().unwrap_or("?")));
    text.push_str(&format!("Publisher   {}\n", preview["publisher"].as_str().unwrap_or("(not declared)")));
    text.push_str(&format!("Signature   {}\n", preview["signature"].as_str().unwrap_or("?")));
    if preview["already_installed"] == true {
        text.push_str("Status      already installed (identical bytes)\n");
    }
    text.push_str("It will be allowed to:\n");
    for capability in preview["capabilities"].as_array().into_iter().flatten() {
        text.push_str(&format!("  - {}\n", capability.as_str().unwrap_or("?")));
    }
    text
}

fn ask(question: &str) -> Result<bool, CliError> {
    eprint!("{question}");
    std::io::stderr().flush().ok();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| CliError::failure(format!("reading the answer: {e}")))?;
    Ok(matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"))
}
