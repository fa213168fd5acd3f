//! `aileron binding setup|list|inspect|rebind|reauthorize|revoke`: give a connector an account.
//! `setup` asks for exactly what the connector's manifest declares: an API key (hidden prompt,
//! `--from-env VAR` or standard input), an AWS key pair, or an OAuth2 authorization in the
//! browser (PKCE; this command serves `http://127.0.0.1:<port>/callback` once).

use aileron_core::manifest::CredentialKind;
use std::time::Duration;

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::vault::{read_secret_value, send};
use super::{CliError, CliResult, ExitStatus, escape, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{ApiFailure, DaemonClient};

/// How long `setup` waits for the provider to send the browser back (the session's own limit).
const CALLBACK_WAIT: Duration = Duration::from_secs(600);

#[derive(Args)]
pub struct BindingArgs {
    #[command(subcommand)]
    command: BindingCommand,
}

#[derive(Args, Clone, Default)]
struct MaterialArgs {
    /// api_key / aws_sigv4 secret: read it from this environment variable (else standard input or a prompt)
    #[arg(long, value_name = "VAR")]
    from_env: Option<String>,
    /// aws_sigv4: the access key id (the secret key comes from --from-env, standard input or a prompt)
    #[arg(long)]
    access_key_id: Option<String>,
    /// aws_sigv4: read a session token from this environment variable
    #[arg(long, value_name = "VAR")]
    session_token_from_env: Option<String>,
    /// oauth2: print the authorization URL instead of starting a browser
    #[arg(long)]
    no_browser: bool,
    /// oauth2: import a refresh token you already hold (another tool's login) from this
    /// environment variable instead of running the authorization flow; the first use refreshes it
    #[arg(long, value_name = "VAR")]
    refresh_token_from_env: Option<String>,
}

#[derive(Subcommand)]
enum BindingCommand {
    /// Bind an account to a connector: asks for what its manifest declares (api_key, aws_sigv4, oauth2)
    Setup {
        /// The connector's FQN, e.g. github://aileron/github-issues
        connector: String,
        /// A label for the account (default `default`), e.g. `work`
        #[arg(long)]
        identity: Option<String>,
        #[command(flatten)]
        material: MaterialArgs,
    },
    /// List bindings (no secret bytes); works while the vault is locked
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one binding
    Inspect {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Replace a binding's key (api_key, aws_sigv4) with a new one
    Rebind {
        name: String,
        #[command(flatten)]
        material: MaterialArgs,
    },
    /// Authorize an oauth2 binding again in the browser (after it went stale)
    Reauthorize {
        name: String,
        #[arg(long)]
        no_browser: bool,
    },
    /// Remove a binding and its credential from the vault
    Revoke { name: String },
}

pub async fn run(home: &Home, args: BindingArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        BindingCommand::Setup { connector, identity, material } => {
            setup(home, &client, &connector, identity, &material).await
        }
        BindingCommand::List { json } => {
            let listing = client.get("/v1/bindings").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            let items = listing["items"].as_array().cloned().unwrap_or_default();
            if items.is_empty() {
                eprintln!("no bindings; bind a connector with `aileron binding setup <connector>`");
            }
            for item in items {
                outln!("{}", summary_line(&item));
            }
            Ok(ExitStatus::Ok)
        }
        BindingCommand::Inspect { name, json } => {
            let binding = client.get(&format!("/v1/bindings/{}", crate::wire::path_segment(&name))).await?;
            if json {
                print_json(&binding);
            } else {
                for (key, value) in binding.as_object().into_iter().flatten() {
                    let text = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
                    outln!("{key:<14} {}", escape(&text));
                }
            }
            Ok(ExitStatus::Ok)
        }
        BindingCommand::Rebind { name, material } => {
            let binding = client.get(&format!("/v1/bindings/{}", crate::wire::path_segment(&name))).await?;
            let kind = credential_kind(&binding["kind"])?;
            if kind == CredentialKind::OAuth2 && material.refresh_token_from_env.is_none() {
                return authorize(home, &client, json!({ "rebind": name }), material.no_browser).await;
            }
            let body = material_body(kind, &material)?;
            let rebound =
                send(&client, Method::POST, &format!("/v1/bindings/{}/rebind", crate::wire::path_segment(&name)), body)
                    .await?;
            eprintln!("rebound {}", escape(rebound["name"].as_str().unwrap_or(&name)));
            Ok(ExitStatus::Ok)
        }
        BindingCommand::Reauthorize { name, no_browser } => {
            authorize(home, &client, json!({ "rebind": name }), no_browser).await
        }
        BindingCommand::Revoke { name } => {
            let (status, body) = client
                .call_raw(Method::DELETE, &format!("/v1/bindings/{}", crate::wire::path_segment(&name)), None)
                .await?;
            if !status.is_success() {
                return Err(CliError::failure(ApiFailure { status, body }.to_string()));
            }
            eprintln!("revoked {name}; its credential is gone from the vault");
            Ok(ExitStatus::Ok)
        }
    }
}

async fn setup(
    home: &Home,
    client: &DaemonClient,
    connector: &str,
    identity: Option<String>,
    material: &MaterialArgs,
) -> CliResult {
    // Checked before anything is asked for; the daemon checks again.
    if let Some(identity) = &identity {
        crate::stores::bindings::validate_identity(identity).map_err(|message| {
            CliError::usage(format!("{}\nhint: {}", escape(&message), crate::stores::bindings::IDENTITY_HINT))
        })?;
    }
    // The canonical spelling (lowercase), as the connector list has it.
    let canonical = aileron_core::Fqn::parse(connector).map(|fqn| fqn.to_string());
    let connector = canonical.as_deref().unwrap_or(connector);
    let connectors = client.get("/v1/connectors").await?;
    let installed = connectors["items"].as_array().into_iter().flatten().rfind(|c| c["fqn"] == connector).cloned();
    let Some(installed) = installed else {
        return Err(CliError::failure(format!(
            "connector {connector} is not installed\nhint: install it with `aileron connector install`; `aileron connector list` shows what is installed"
        )));
    };
    if installed["credential"].is_null() {
        return Err(CliError::failure(format!(
            "connector {connector} declares no credential; nothing to bind\nhint: only connectors whose manifest has [capabilities.credential] take a binding"
        )));
    };
    let mut body = json!({ "connector": connector });
    if let Some(identity) = identity {
        body["identity"] = identity.into();
    }
    let kind = credential_kind(&installed["credential"])?;
    if kind == CredentialKind::OAuth2 && material.refresh_token_from_env.is_none() {
        return authorize(home, client, body, material.no_browser).await;
    }
    let material_body = material_body(kind, material)?;
    for (key, value) in material_body.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    let created = send(client, Method::POST, "/v1/bindings/setup", body).await?;
    eprintln!(
        "bound {} ({}); the connector never sees the credential: the daemon injects it into requests to its declared hosts",
        escape(created["name"].as_str().unwrap_or("?")),
        kind
    );
    Ok(ExitStatus::Ok)
}

/// A credential kind the daemon named; a kind this CLI does not know (a newer daemon) is an error.
fn credential_kind(kind: &Value) -> Result<CredentialKind, CliError> {
    serde_json::from_value(kind.clone()).map_err(|_| {
        CliError::failure(format!(
            "the daemon names a credential kind this aileron does not know: {}\nhint: use the aileron that started the daemon",
            escape(&kind.to_string())
        ))
    })
}

/// The api_key / aws body, read from the flags, standard input or hidden prompts.
fn material_body(kind: CredentialKind, material: &MaterialArgs) -> Result<Value, CliError> {
    match kind {
        CredentialKind::ApiKey => {
            let key = read_secret_value(material.from_env.as_deref(), "API key (hidden): ")?;
            Ok(json!({ "api_key": key.as_str() }))
        }
        CredentialKind::AwsSigv4 => {
            let Some(access_key_id) = &material.access_key_id else {
                return Err(CliError::failure(
                    "an aws_sigv4 binding needs --access-key-id\nhint: aileron binding setup <connector> --access-key-id AKIA... (the secret key is prompted for)",
                ));
            };
            let secret = read_secret_value(material.from_env.as_deref(), "AWS secret access key (hidden): ")?;
            let mut aws = json!({ "access_key_id": access_key_id, "secret_access_key": secret.as_str() });
            if let Some(var) = &material.session_token_from_env {
                let token = read_secret_value(Some(var), "")?;
                aws["session_token"] = token.as_str().into();
            }
            Ok(json!({ "aws": aws }))
        }
        CredentialKind::OAuth2 => {
            let Some(var) = &material.refresh_token_from_env else {
                return Err(CliError::failure("oauth2 bindings are made through the authorization flow"));
            };
            let token = read_secret_value(Some(var), "")?;
            Ok(json!({ "oauth2": { "refresh_token": token.as_str() } }))
        }
    }
}

/// OAuth2 in CLI mode: listen on a loopback port, start the flow, open the browser (or print the
/// URL), catch one redirect, and let the daemon exchange the code.
async fn authorize(home: &Home, client: &DaemonClient, mut body: Value, no_browser: bool) -> CliResult {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|error| CliError::failure(format!("listening on a loopback port for the OAuth redirect: {error}")))?;
    let port = listener.local_addr().map_err(|e| CliError::failure(e.to_string()))?.port();
    body["mode"] = "cli".into();
    body["redirect_port"] = port.into();
    let started = send(client, Method::POST, "/v1/bindings/setup/oauth2/init", body).await?;
    let url = started["authorize_url"].as_str().unwrap_or_default().to_string();
    let session_id = started["session_id"].as_str().unwrap_or_default().to_string();
    if no_browser || !super::approval::open_browser(home, &url) {
        eprintln!("open this URL in a browser to authorize (waiting up to 10 minutes):");
        outln!("{url}");
    } else {
        eprintln!("opened the provider's consent page in your browser; waiting for it to send you back…");
    }
    // The redirect to act on is the one carrying the state the daemon put in this URL: any local
    // process can reach the loopback port, and must not end the wait with a callback of its own.
    let expected_state = url::Url::parse(&url)
        .ok()
        .and_then(|url| url.query_pairs().find(|(key, _)| key == "state").map(|(_, value)| value.into_owned()))
        .ok_or_else(|| {
            CliError::failure("the daemon's authorization URL carries no state\nhint: run the command again")
        })?;
    let (code, state) = tokio::time::timeout(CALLBACK_WAIT, catch_callback(listener, &expected_state))
        .await
        .map_err(|_| CliError::failure("no authorization arrived within 10 minutes\nhint: run the command again"))??;
    let finished = send(
        client,
        Method::POST,
        "/v1/bindings/setup/oauth2/finish",
        json!({ "session_id": session_id, "code": code, "state": state }),
    )
    .await?;
    eprintln!(
        "bound {} (oauth2); tokens are refreshed automatically",
        escape(finished["name"].as_str().unwrap_or("?"))
    );
    Ok(ExitStatus::Ok)
}

/// How long one connection to the callback port may take to send its request line and headers.
const CALLBACK_REQUEST_WAIT: Duration = Duration::from_secs(10);

/// Serves `GET /callback?code=…&state=…` once, for the redirect that carries `expected_state`;
/// other requests (a favicon) get a 404, and a callback with another state (or none) a 400 while
/// the wait goes on. Each connection is served on its own task with a deadline for its request,
/// so a local process that connects and sends nothing cannot hold the port against the browser's
/// redirect (the re-attack's L7).
async fn catch_callback(listener: tokio::net::TcpListener, expected_state: &str) -> Result<(String, String), CliError> {
    let expected_state: std::sync::Arc<str> = expected_state.into();
    let (sender, mut outcomes) = tokio::sync::mpsc::channel::<Result<(String, String), CliError>>(1);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted.map_err(|e| CliError::failure(format!("accepting the redirect: {e}")))?;
                let (expected_state, sender) = (expected_state.clone(), sender.clone());
                connections.spawn(async move {
                    if let Ok(Some(outcome)) =
                        tokio::time::timeout(CALLBACK_REQUEST_WAIT, answer_callback(stream, &expected_state)).await
                    {
                        let _ = sender.send(outcome).await;
                    }
                });
            }
            Some(outcome) = outcomes.recv() => return outcome,
        }
    }
}

/// Answers one connection to the callback port; `Some` when it carried the awaited redirect.
async fn answer_callback(
    mut stream: tokio::net::TcpStream,
    expected_state: &str,
) -> Option<Result<(String, String), CliError>> {
    let mut buffer = vec![0u8; 8192];
    let mut read = 0;
    while read < buffer.len() {
        let n = stream.read(&mut buffer[read..]).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        read += n;
        if buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let request = String::from_utf8_lossy(&buffer[..read]).to_string();
    let target = request.lines().next().and_then(|line| line.split_whitespace().nth(1)).unwrap_or("/").to_string();
    let url = url::Url::parse(&format!("http://127.0.0.1{target}")).ok()?;
    if url.path() != "/callback" {
        let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
        return None;
    }
    let query = |name: &str| url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.to_string());
    let ours = query("state")
        .is_some_and(|state| aileron_core::constant_time::eq(state.as_bytes(), expected_state.as_bytes()));
    if !ours {
        let html = "<!doctype html><title>Aileron</title><p>This is not the authorization Aileron is waiting for.</p>";
        let response = format!(
            "HTTP/1.1 400 Bad Request\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{html}",
            html.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        return None;
    }
    let (page, result) = match (query("code"), query("state"), query("error")) {
        (_, _, Some(error)) => (
            "Authorization was refused. You can close this tab.",
            Err(CliError::failure(format!(
                "the provider refused the authorization: {}\nhint: run the command again and approve the request",
                escape(&error)
            ))),
        ),
        (Some(code), Some(state), None) => {
            ("Aileron received the authorization. You can close this tab.", Ok((code, state)))
        }
        _ => (
            "The redirect carried no authorization code.",
            Err(CliError::failure("the provider's redirect carried no code\nhint: run the command again")),
        ),
    };
    let html = format!("<!doctype html><title>Aileron</title><p>{page}</p>");
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{html}",
        html.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    Some(result)
}

/// One line per binding: name, state, connector.
pub fn summary_line(binding: &Value) -> String {
    let state = match binding["stale_reason"].as_str() {
        Some(reason) => format!("stale: {reason}"),
        None => binding["state"].as_str().unwrap_or("?").to_string(),
    };
    escape(&format!(
        "{}  {}  {}{}",
        binding["name"].as_str().unwrap_or("?"),
        state,
        binding["connector"].as_str().unwrap_or("?"),
        binding["expires_at"].as_str().map(|at| format!("  expires {at}")).unwrap_or_default()
    ))
}
