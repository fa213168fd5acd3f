//! `aileron vault init|unlock|lock|status` and `aileron secret set|list|remove`. The passphrase
//! comes from `--passphrase-file`, `AILERON_VAULT_PASSPHRASE`, or a hidden terminal prompt, and
//! goes to the daemon only in the body of one loopback request; it is never written anywhere.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};
use zeroize::Zeroizing;

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{ApiFailure, DaemonClient};

#[derive(Args)]
pub struct VaultArgs {
    #[command(subcommand)]
    command: VaultCommand,
}

#[derive(Subcommand)]
enum VaultCommand {
    /// Create the encrypted vault (secrets.json) and leave it unlocked
    Init {
        /// Read the passphrase from this file (first line) instead of AILERON_VAULT_PASSPHRASE or a prompt
        #[arg(long)]
        passphrase_file: Option<PathBuf>,
    },
    /// Unlock the vault in the running daemon (it starts locked); approved runs waiting for it run now
    Unlock {
        #[arg(long)]
        passphrase_file: Option<PathBuf>,
    },
    /// Forget the vault's key in the daemon; credentials and the LLM gateway stop until unlocked
    Lock,
    /// Show whether a vault exists and is unlocked
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct SecretArgs {
    #[command(subcommand)]
    command: SecretCommand,
}

#[derive(Subcommand)]
enum SecretCommand {
    /// Store a secret in the vault (value from --from-env, standard input, or a hidden prompt)
    Set {
        /// Where to keep it, e.g. `smtp/password` (a-z, 0-9, `_.:@-`, `/` between parts)
        path: String,
        /// Read the value from this environment variable
        #[arg(long, value_name = "VAR")]
        from_env: Option<String>,
        #[arg(long)]
        description: Option<String>,
        /// Replace a secret already stored at this path (without it, that is refused)
        #[arg(long)]
        force: bool,
    },
    /// List secrets (paths and descriptions, never values); works while the vault is locked
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret
    Remove { path: String },
}

pub async fn run(home: &Home, args: VaultArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        VaultCommand::Init { passphrase_file } => {
            let passphrase = read_passphrase(passphrase_file.as_ref(), true)?;
            let view =
                send(&client, Method::POST, "/v1/vault/init", json!({ "passphrase": passphrase.as_str() })).await?;
            eprintln!("created the vault at {} (unlocked)", view["path"].as_str().unwrap_or("?"));
            eprintln!(
                "the passphrase is not stored anywhere: keep it safe; `aileron vault unlock` asks for it after each daemon start"
            );
            Ok(ExitStatus::Ok)
        }
        VaultCommand::Unlock { passphrase_file } => {
            let passphrase = read_passphrase(passphrase_file.as_ref(), false)?;
            let view =
                send(&client, Method::POST, "/v1/vault/unlock", json!({ "passphrase": passphrase.as_str() })).await?;
            eprintln!("vault unlocked ({} binding(s), {} secret(s))", view["bindings"], view["secrets"]);
            Ok(ExitStatus::Ok)
        }
        VaultCommand::Lock => {
            send(&client, Method::POST, "/v1/vault/lock", json!({})).await?;
            eprintln!("vault locked: credentials and the LLM gateway wait for `aileron vault unlock`");
            Ok(ExitStatus::Ok)
        }
        VaultCommand::Status { json } => {
            let view = client.get("/v1/vault/status").await?;
            if json {
                print_json(&view);
            } else {
                outln!(
                    "vault: {} ({}) · {} binding(s), {} secret(s), {} approved run(s) waiting for it",
                    view["state"].as_str().unwrap_or("?"),
                    view["path"].as_str().unwrap_or("?"),
                    view["bindings"],
                    view["secrets"],
                    view["awaiting_vault"]
                );
            }
            Ok(ExitStatus::Ok)
        }
    }
}

pub async fn run_secret(home: &Home, args: SecretArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        SecretCommand::Set { path, from_env, description, force } => {
            // Refused before the value is asked for; the daemon checks again when it stores.
            let listing = client.get("/v1/secrets").await?;
            let exists =
                listing["items"].as_array().is_some_and(|items| items.iter().any(|i| i["path"] == path.as_str()));
            if exists && !force {
                return Err(CliError::failure(format!(
                    "secret_exists: a secret is already stored at `{path}`\nhint: pass --force to replace it (the old value is not kept)"
                )));
            }
            let value = read_secret_value(from_env.as_deref(), &format!("Value for {path}: "))?;
            let mut body = json!({ "path": path, "value": value.as_str(), "force": force });
            if let Some(description) = description {
                body["description"] = description.into();
            }
            let stored = send(&client, Method::POST, "/v1/secrets", body).await?;
            let verb = if stored["replaced"] == true { "replaced" } else { "stored" };
            eprintln!("{verb} secret `{path}`");
            Ok(ExitStatus::Ok)
        }
        SecretCommand::List { json } => {
            let listing = client.get("/v1/secrets").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            let items = listing["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                eprintln!("no secrets (vault {})", listing["vault"].as_str().unwrap_or("?"));
            }
            for item in items {
                let description = item["metadata"]["description"].as_str().unwrap_or("");
                outln!("{}  {}", super::escape(item["path"].as_str().unwrap_or("?")), super::escape(description));
            }
            Ok(ExitStatus::Ok)
        }
        SecretCommand::Remove { path } => {
            let (status, body) = client.call_raw(Method::DELETE, &format!("/v1/secrets/{path}"), None).await?;
            if !status.is_success() {
                return Err(CliError::failure(ApiFailure { status, body }.to_string()));
            }
            eprintln!("removed secret `{path}`");
            Ok(ExitStatus::Ok)
        }
    }
}

/// POSTs and turns a non-2xx answer into the daemon's message and hint.
pub(super) async fn send(client: &DaemonClient, method: Method, path: &str, body: Value) -> Result<Value, CliError> {
    let (status, answer) = client.call_raw(method, path, Some(&body)).await?;
    if !status.is_success() {
        return Err(CliError::failure(ApiFailure { status, body: answer }.to_string()));
    }
    Ok(answer)
}

/// `--passphrase-file`, then `AILERON_VAULT_PASSPHRASE`, then a hidden prompt (twice for a new vault).
fn read_passphrase(file: Option<&PathBuf>, confirm: bool) -> Result<Zeroizing<String>, CliError> {
    if let Some(file) = file {
        let text = Zeroizing::new(std::fs::read_to_string(file).map_err(|error| {
            CliError::failure(format!(
                "reading the passphrase file {}: {error}\nhint: the file's first line is the passphrase",
                file.display()
            ))
        })?);
        let first = text.lines().next().unwrap_or_default();
        return non_empty(Zeroizing::new(first.to_string()));
    }
    if let Some(value) =
        crate::platform::env::get(crate::platform::env::AILERON_VAULT_PASSPHRASE).filter(|v| !v.is_empty())
    {
        return Ok(Zeroizing::new(value));
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::failure(
            "no passphrase given and no terminal to ask on\nhint: set AILERON_VAULT_PASSPHRASE or pass --passphrase-file FILE",
        ));
    }
    let first = Zeroizing::new(prompt("Vault passphrase: ")?);
    if confirm {
        let second = Zeroizing::new(prompt("Repeat the passphrase: ")?);
        if *first != *second {
            return Err(CliError::failure(
                "the passphrases differ; nothing was created\nhint: run `aileron vault init` again",
            ));
        }
    }
    non_empty(first)
}

fn non_empty(value: Zeroizing<String>) -> Result<Zeroizing<String>, CliError> {
    if value.is_empty() {
        return Err(CliError::failure("the passphrase is empty\nhint: choose a non-empty passphrase"));
    }
    Ok(value)
}

fn prompt(text: &str) -> Result<String, CliError> {
    rpassword::prompt_password(text).map_err(|error| CliError::failure(format!("reading from the terminal: {error}")))
}

/// A secret value for a script or a person: `--from-env VAR`, else standard input when it is not
/// a terminal (first line), else a hidden prompt.
pub(super) fn read_secret_value(from_env: Option<&str>, prompt_text: &str) -> Result<Zeroizing<String>, CliError> {
    if let Some(var) = from_env {
        return match crate::platform::env::get(var).filter(|v| !v.is_empty()) {
            Some(value) => Ok(Zeroizing::new(value)),
            None => Err(CliError::failure(format!(
                "environment variable {var} is not set or empty\nhint: export it first, or omit --from-env to be prompted"
            ))),
        };
    }
    let value = if std::io::stdin().is_terminal() {
        Zeroizing::new(prompt(prompt_text)?)
    } else {
        let mut line = Zeroizing::new(String::new());
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|error| CliError::failure(format!("reading standard input: {error}")))?;
        Zeroizing::new(line.trim_end_matches(['\r', '\n']).to_string())
    };
    if value.is_empty() {
        return Err(CliError::failure(
            "the value is empty\nhint: pipe it on standard input, use --from-env VAR, or type it at the prompt",
        ));
    }
    Ok(value)
}
