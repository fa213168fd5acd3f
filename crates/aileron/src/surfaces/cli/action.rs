//! `aileron action add|pack|list|show|remove|enable|disable|run`. `add` takes a local file, or
//! `<fqn>@<version>` of a published action package: it fetches the release, installs each
//! connector the action pins that is not installed yet (same pipeline, one consent each, the
//! action's hash pinned), then the action, whose signature the daemon verifies.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{ApiFailure, DaemonClient};
use crate::wire::{ActionList, ActionView, RunBody, RunCompleted};
use aileron_core::approval::PendingApproval;

#[derive(Args)]
pub struct ActionArgs {
    #[command(subcommand)]
    command: ActionCommand,
}

#[derive(Subcommand)]
enum ActionCommand {
    /// Install an action: a local file (Markdown with +++ TOML frontmatter), or a published one
    /// by `<fqn>@<version>` (e.g. github://acme/widget/actions/post@1.2.0) with its connectors
    Add {
        /// A file path, or `<fqn>@<version>`
        target: String,
        /// Consent to each connector it installs without a prompt
        #[arg(long)]
        yes: bool,
        /// Accept unsigned packages (the action's and its connectors')
        #[arg(long)]
        allow_unsigned: bool,
        /// Replace a different installed action of the same name
        #[arg(long)]
        force: bool,
        /// Pin placeholder connector hashes (the original project's `sha256:bound-at-release`)
        /// to the installed connector of that name and version, after showing it and asking
        #[arg(long)]
        pin: bool,
    },
    /// Pack (and sign) an action file into an action package aileron.tar.gz
    Pack {
        file: PathBuf,
        #[arg(long)]
        key: Option<PathBuf>,
        #[arg(long, default_value = "aileron.tar.gz")]
        out: PathBuf,
    },
    /// List installed actions
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one action: inputs, connectors, steps and its file
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove an installed action
    Remove { name: String },
    /// Make an action callable again
    Enable { name: String },
    /// Keep an action installed but refuse to run it
    Disable { name: String },
    /// Run an action through the daemon (the same path agents use)
    Run {
        name: String,
        /// One argument as key=value (repeatable); the value is converted to the input's declared type
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        arg: Vec<String>,
        /// All arguments as one JSON object
        #[arg(long, value_name = "JSON", conflicts_with = "arg")]
        args: Option<String>,
        /// Also print the connector's log lines (stderr), per step
        #[arg(long, short)]
        verbose: bool,
    },
}

pub async fn run(home: &Home, args: ActionArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        ActionCommand::Pack { file, key, out } => {
            let (tarball, signer) = crate::stores::publish::pack_action(&file, key.as_deref())?;
            crate::platform::home::write_atomic(&out, &tarball, 0o644)
                .with_context(|| format!("writing {}", out.display()))?;
            match signer {
                Some(signer) => eprintln!("wrote {} signed with key {}", out.display(), signer.fingerprint()),
                None => eprintln!("wrote {} (unsigned: pass --key to sign it)", out.display()),
            }
            Ok(ExitStatus::Ok)
        }
        ActionCommand::Add { pin: true, target, .. } if target.contains("://") => Err(CliError::usage(format!(
            "--pin applies to local action files; {target} is a published package, installed as signed\nhint: \
             aileron action add {target}"
        ))),
        ActionCommand::Add { target, yes, allow_unsigned, force, .. } if target.contains("://") => {
            add_published(home, &client, &target, AddFlags { yes, allow_unsigned, force }).await
        }
        ActionCommand::Add { target, yes, allow_unsigned, force, pin } => {
            let path = PathBuf::from(target);
            if !path.is_dir() {
                let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                if crate::stores::package::is_gzip(&bytes) {
                    let flags = AddFlags { yes, allow_unsigned, force };
                    return add_local_package(home, &client, &path, &bytes, flags).await;
                }
            }
            super::action_files::add_files(&client, &path, super::action_files::LocalAdd { yes, force, pin }).await
        }
        ActionCommand::List { json } => {
            let listing: ActionList = client.get_as("/v1/actions").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            if listing.items.is_empty() {
                eprintln!("no actions installed");
            }
            for item in &listing.items {
                outln!(
                    "{:<24} {:<10} {:<9} {}",
                    super::escape(&item.name),
                    super::escape(&item.version),
                    if item.enabled { "enabled" } else { "disabled" },
                    if item.requires_approval { "approval required" } else { "" },
                );
            }
            for error in &listing.load_errors {
                eprintln!("warning: {} failed to load: {}", error.file, error.message);
            }
            Ok(ExitStatus::Ok)
        }
        ActionCommand::Show { name, json } => {
            let action: ActionView = client.get_as(&format!("/v1/actions/{name}")).await?;
            if json {
                print_json(&action);
                return Ok(ExitStatus::Ok);
            }
            // Everything but the fixed words comes from the action file or a manifest: escaped
            // (the re-attack's L2), the file itself with its line breaks kept.
            let escape = super::escape;
            outln!("name         {}", escape(&action.name));
            outln!("version      {}", escape(&action.version));
            outln!("status       {}", if action.enabled { "enabled" } else { "disabled" });
            outln!("tool         {}", escape(&action.tool_name));
            outln!("approval     {}", if action.requires_approval { "required" } else { "not required" });
            outln!("inputs:");
            let required: Vec<&str> =
                action.input_schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            for (input, schema) in action.input_schema["properties"].as_object().into_iter().flatten() {
                outln!(
                    "  {} ({}{}) {}",
                    escape(input),
                    escape(&aileron_core::action::schema_type_label(schema)),
                    if required.contains(&input.as_str()) { ", required" } else { "" },
                    escape(schema["description"].as_str().unwrap_or(""))
                );
            }
            outln!("connectors:");
            for connector in &action.connectors {
                outln!(
                    "  {}@{} {} capabilities {}",
                    escape(&connector.name),
                    escape(&connector.version),
                    escape(&connector.hash),
                    escape(&serde_json::Value::from(connector.capabilities.clone()).to_string())
                );
            }
            match &action.source {
                Some(text) => outln!("\n{}", super::escape_lines(text)),
                None => outln!(
                    "\n(the file of this action changed on disk since the daemon loaded it; what runs is what was \
                     loaded)\nhint: `aileron action add <file> --force` loads the edited file"
                ),
            }
            Ok(ExitStatus::Ok)
        }
        ActionCommand::Remove { name } => {
            client.call(Method::DELETE, &format!("/v1/actions/{name}"), None).await?;
            eprintln!("removed action {name}");
            Ok(ExitStatus::Ok)
        }
        ActionCommand::Enable { name } => set_enabled(&client, &name, true).await,
        ActionCommand::Disable { name } => set_enabled(&client, &name, false).await,
        ActionCommand::Run { name, arg, args, verbose } => {
            run_action(&client, &name, &arg, args.as_deref(), verbose).await
        }
    }
}

async fn set_enabled(client: &DaemonClient, name: &str, enabled: bool) -> CliResult {
    client.call(Method::PATCH, &format!("/v1/actions/{name}"), Some(&json!({ "enabled": enabled }))).await?;
    eprintln!("{} action {name}", if enabled { "enabled" } else { "disabled" });
    Ok(ExitStatus::Ok)
}

async fn run_action(
    client: &DaemonClient,
    name: &str,
    pairs: &[String],
    json_args: Option<&str>,
    verbose: bool,
) -> CliResult {
    let args = match json_args {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                let kind = match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                };
                return Err(CliError::usage(format!(
                    "--args must be a JSON object, not {kind}\nhint: --args '{{\"owner\":\"acme\"}}'"
                )));
            }
            Err(error) => {
                return Err(CliError::usage(format!(
                    "--args is not valid JSON: {error}\nhint: pass one JSON object, e.g. --args '{{\"owner\":\"acme\"}}'"
                )));
            }
        },
        None => {
            // The form of each pair is checked before the daemon is asked for the input types.
            if let Some(pair) = pairs.iter().find(|pair| !pair.contains('=')) {
                return Err(CliError::usage(format!("--arg `{pair}` is not key=value\nhint: --arg owner=acme")));
            }
            let (status, body) = client.call_raw(Method::GET, &format!("/v1/actions/{name}"), None).await?;
            match status {
                // No such action: the run is requested anyway (its arguments as strings), so the
                // daemon's refusal is audited like an agent's (SPEC §10) and answered as usual.
                StatusCode::NOT_FOUND => pairs
                    .iter()
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(key, value)| (key.to_string(), Value::String(value.to_string())))
                    .collect(),
                status if status.is_success() => {
                    let action: ActionView = serde_json::from_value(body).context("the daemon's action answer")?;
                    typed_args(pairs, &action.input_schema)?
                }
                _ => return Err(CliError::failure(ApiFailure { status, body }.to_string())),
            }
        }
    };
    let request = serde_json::to_value(RunBody { args }).map_err(anyhow::Error::from)?;
    let (status, body) = client.call_raw(Method::POST, &format!("/v1/actions/{name}/run"), Some(&request)).await?;
    if verbose {
        print_logs(&body);
    }
    match status {
        StatusCode::OK => {
            let done: RunCompleted = serde_json::from_value(body).context("the daemon's run answer")?;
            print_json(&done.result);
            eprintln!("audit {}", done.audit_id);
            Ok(ExitStatus::Ok)
        }
        StatusCode::ACCEPTED => {
            let pending: PendingApproval =
                serde_json::from_value(body).context("the daemon's pending-approval answer")?;
            eprintln!("{}", pending.message);
            print_json(&pending);
            Ok(ExitStatus::Pending)
        }
        _ => Err(CliError::failure(ApiFailure { status, body }.to_string())),
    }
}

/// The connector log lines of a run's answer (each step's, or the failed step's), escaped.
fn print_logs(body: &Value) {
    let steps = body["result"]["steps"].as_array().cloned().unwrap_or_default();
    let mut printed = false;
    for step in &steps {
        for line in step["logs"].as_array().into_iter().flatten() {
            eprintln!(
                "[{}] {}: {}",
                step["id"].as_str().unwrap_or("?"),
                line["level"].as_str().unwrap_or("?"),
                super::escape(line["message"].as_str().unwrap_or(""))
            );
            printed = true;
        }
    }
    for line in body["error"]["details"]["logs"].as_array().into_iter().flatten() {
        eprintln!(
            "[failed step] {}: {}",
            line["level"].as_str().unwrap_or("?"),
            super::escape(line["message"].as_str().unwrap_or(""))
        );
        printed = true;
    }
    if !printed {
        eprintln!("(the connector logged nothing)");
    }
}

/// Converts `key=value` pairs to the types the action declares.
pub(super) fn typed_args(pairs: &[String], schema: &Value) -> Result<Map<String, Value>, CliError> {
    let mut args = Map::new();
    for pair in pairs {
        let Some((key, raw)) = pair.split_once('=') else {
            return Err(CliError::usage(format!("--arg `{pair}` is not key=value\nhint: --arg owner=acme")));
        };
        let property = &schema["properties"][key];
        let declared = match &property["type"] {
            Value::String(declared) => declared.as_str(),
            // No type: any JSON value (GraphQL input objects, enums, `JSON`); else the text.
            _ if property.is_object() => {
                args.insert(key.to_string(), serde_json::from_str(raw).unwrap_or_else(|_| Value::from(raw)));
                continue;
            }
            _ => "string",
        };
        let value = match declared {
            "string" => Value::String(raw.to_string()),
            "integer" => raw.parse::<i64>().map(Value::from).map_err(|_| type_error(key, raw, declared))?,
            "number" => raw
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| type_error(key, raw, declared))?,
            "boolean" => raw.parse::<bool>().map(Value::from).map_err(|_| type_error(key, raw, declared))?,
            _ => serde_json::from_str(raw).map_err(|_| type_error(key, raw, declared))?,
        };
        args.insert(key.to_string(), value);
    }
    Ok(args)
}

fn type_error(key: &str, raw: &str, declared: &str) -> CliError {
    CliError::failure(format!(
        "--arg {key}={raw}: `{key}` is declared as {declared}\nhint: pass a valid {declared} (arrays and objects as JSON)"
    ))
}

struct AddFlags {
    yes: bool,
    allow_unsigned: bool,
    force: bool,
}

/// `action add <fqn>@<version>`: fetch the release, then [`add_package`].
async fn add_published(home: &Home, client: &DaemonClient, target: &str, flags: AddFlags) -> CliResult {
    let reference = aileron_core::ConnectorRef::parse(target)
        .map_err(|e| super::reference_error(e, "write it as <scheme>://<owner>/<repo>[/<path>]@<semver>"))?;
    let url = crate::stores::forge::release_url(&reference.fqn, &reference.version);
    eprintln!("downloading {url}");
    let bytes = crate::stores::forge::fetch(&url, 4 * 1024 * 1024, &mut |_, _| {})
        .await
        .map_err(|e| CliError::failure(format!("{e}\nhint: {}", e.hint())))?;
    let (text, signature) = crate::stores::package::read_action_tarball(std::path::Path::new(&url), &bytes)
        .map_err(|e| CliError::failure(e.user_message()))?;
    let file_name = format!("{}.md", reference.fqn.subpath.last().unwrap_or(&reference.fqn.repo));
    let package = ActionPackage { text, signature, file_name, reference: target.to_string() };
    add_package(home, client, package, flags, target).await
}

/// `action add <file>.tar.gz`: an action package made by `action pack`, installed as the
/// published release its `source` names would be: same signature check against the keyring for
/// that FQN, same --allow-unsigned and --force rules, same connector installs.
async fn add_local_package(
    home: &Home,
    client: &DaemonClient,
    file: &std::path::Path,
    bytes: &[u8],
    flags: AddFlags,
) -> CliResult {
    let (text, signature) =
        crate::stores::package::read_action_tarball(file, bytes).map_err(|e| CliError::failure(e.user_message()))?;
    let label = format!("{}:{}", file.display(), crate::stores::package::ACTION_FILE);
    let action =
        aileron_core::action::parse_packaged_action(&text, &label).map_err(|e| CliError::failure(e.to_string()))?;
    let Some(source) = &action.source else {
        return Err(CliError::failure(format!(
            "the action in {} declares no `source`, so its package cannot be checked against a publisher's key\nhint: \
             add the action file itself (`aileron action add {}.md`), or set `source = \"<fqn>@{}\"` and pack it again",
            file.display(),
            action.name,
            action.version
        )));
    };
    let package =
        ActionPackage { file_name: format!("{}.md", action.name), reference: source.to_string(), text, signature };
    add_package(home, client, package, flags, &file.display().to_string()).await
}

/// An action package's contents and the release it claims to be.
struct ActionPackage {
    text: String,
    signature: Option<Vec<u8>>,
    /// The name the daemon stores the action file under.
    file_name: String,
    /// `<fqn>@<version>`, checked against the file's `source`; the signature is checked for its FQN.
    reference: String,
}

/// Installs a fetched or local action package: the daemon checks it first (the release it claims
/// to be, its signature, --force), then each connector it pins that is not installed is installed
/// (pinned, one consent each), then the action.
async fn add_package(
    home: &Home,
    client: &DaemonClient,
    package: ActionPackage,
    flags: AddFlags,
    origin: &str,
) -> CliResult {
    let ActionPackage { text, signature, file_name, reference } = package;
    // A parse error's text ends with its hint.
    let action = aileron_core::action::parse_action(&text, &file_name).map_err(|e| CliError::failure(e.to_string()))?;
    let previous = super::action_files::installed_action(client, &action.name).await;
    let mut body = json!({
        "file_name": file_name,
        "content": text,
        "reference": reference,
        "signature": signature.map(|s| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s)),
        "allow_unsigned": flags.allow_unsigned,
        "force": flags.force,
        "verify_only": true,
    });
    // The daemon checks the package (the release it claims to be, its signature, --force) before
    // any connector it names is fetched or installed.
    let verified = client.post("/v1/actions/install", &body).await?;
    eprintln!("action {} {}: {}", action.name, action.version, verified["signature"].as_str().unwrap_or("checked"));
    let installed = client.get("/v1/connectors").await?;
    for required in &action.requires {
        let present =
            installed["items"].as_array().into_iter().flatten().any(|item| item["hash"] == required.hash.to_string());
        if present {
            continue;
        }
        let connector = format!("{}@{}", required.name, required.version);
        eprintln!("action {} needs connector {connector} ({})", action.name, required.hash.short());
        let code = super::install::install_pinned(
            home,
            &connector,
            &required.hash.to_string(),
            flags.yes,
            flags.allow_unsigned,
        )
        .await?;
        if code != ExitStatus::Ok {
            return Ok(code);
        }
    }
    body["verify_only"] = false.into();
    let added: ActionView = client.post_as("/v1/actions/install", &body).await?;
    super::action_files::report_added(
        previous.as_ref(),
        &added,
        body["content"].as_str().unwrap_or_default(),
        Some(origin),
    );
    // Checked again now that its connectors are installed: what they inject is known.
    body["verify_only"] = true.into();
    let requirements = client.post("/v1/actions/install", &body).await.unwrap_or(verified);
    for required in requirements["requires"].as_array().into_iter().flatten() {
        if let (Some(connector), Some(kind)) = (required["name"].as_str(), required["missing_credential"].as_str()) {
            let fix = " (the publisher's signed file cannot be changed here: ask them to declare it)";
            super::action_files::warn_missing_credential(&added.name, connector, kind, fix);
        }
    }
    Ok(ExitStatus::Ok)
}
