//! `aileron connector install|list|keygen|pack`. Install fetches the release by name (or reads
//! `--from`), runs the pipeline in the daemon up to consent (preview: layout, identity, signature
//! against the keyring, hash), asks the user, then installs exactly the bytes consented to.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::client::DaemonClient;
use crate::home::Home;

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
            install(home, Install { from, reference, hash, yes, allow_unsigned }).await
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
            let public = crate::publish::keygen(&out)?;
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
            let (tarball, hash, signer) = crate::publish::pack(&dir, key.as_deref())?;
            crate::home::write_atomic(&out, &tarball, 0o644).with_context(|| format!("writing {}", out.display()))?;
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

/// Installs `<fqn>@<version>`, fetched or from a local package, for `connector upgrade`.
pub(super) async fn install_for_upgrade(
    home: &Home,
    reference: &str,
    from: Option<PathBuf>,
    yes: bool,
    allow_unsigned: bool,
) -> CliResult {
    install(home, Install { from, reference: reference.to_string(), hash: None, yes, allow_unsigned }).await
}

/// Installs `<fqn>@<version>` by name with its hash pinned (for `action add`).
pub(super) async fn install_pinned(
    home: &Home,
    reference: &str,
    hash: &str,
    yes: bool,
    allow_unsigned: bool,
) -> CliResult {
    install(
        home,
        Install { from: None, reference: reference.to_string(), hash: Some(hash.to_string()), yes, allow_unsigned },
    )
    .await
}

struct Install {
    from: Option<PathBuf>,
    reference: String,
    hash: Option<String>,
    yes: bool,
    allow_unsigned: bool,
}

async fn install(home: &Home, request: Install) -> CliResult {
    let reference = aileron_core::ConnectorRef::parse(&request.reference).map_err(|e| {
        super::reference_error(
            e,
            "write the reference as <scheme>://<owner>/<repo>@<semver>, e.g. github://acme/slack@1.2.0",
        )
    })?;
    // A malformed pin can never match: say what a hash looks like rather than `hash_mismatch`.
    if let Some(hash) = &request.hash
        && aileron_core::ContentHash::parse(hash).is_err()
    {
        return Err(CliError::usage(format!(
            "`{}` is not a content hash: --hash must be `sha256:` followed by 64 lowercase hex digits\nhint: copy the \
             hash that `aileron connector pack` or an earlier install printed, or leave out --hash",
            aileron_core::untrusted_text::visible(hash, 80)
        )));
    }
    let client = DaemonClient::connect(home).await?;
    let _download;
    let source = match &request.from {
        Some(from) => std::path::absolute(from).with_context(|| format!("resolving {}", from.display()))?,
        None => {
            // Already installed with these exact bytes: nothing to fetch.
            let installed = client.get("/v1/connectors").await?;
            let same = installed["items"].as_array().into_iter().flatten().find(|item| {
                item["fqn"] == reference.fqn.to_string()
                    && item["version"] == reference.version.to_string()
                    && request.hash.as_ref().is_none_or(|hash| item["hash"] == hash.as_str())
            });
            if let Some(same) = same {
                eprintln!("{} is already installed ({})", request.reference, same["hash"].as_str().unwrap_or("?"));
                outln!("{}", same["hash"].as_str().unwrap_or_default());
                return Ok(ExitStatus::Ok);
            }
            let file = download(home, &reference).await?;
            let path = file.path().to_path_buf();
            _download = file;
            path
        }
    };
    let mut preview_body = json!({ "source": source, "reference": request.reference });
    if let Some(hash) = &request.hash {
        preview_body["expected_hash"] = hash.as_str().into();
    }
    let preview = match preview_or_trust(&client, &preview_body).await? {
        Some(preview) => preview,
        None => return Ok(super::ExitStatus::Failure),
    };
    eprint!("{}", consent_text(&preview));
    let unsigned = preview["signed"] != true;
    let via = if request.yes {
        if unsigned && !request.allow_unsigned {
            return Err(CliError::failure(
                "this package is not signed, and --yes alone does not accept that\n\
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
        if !super::ask("Install this connector? [y/N] ")? {
            // The decision is on record too (the hash shown, `consent_declined`).
            let body = json!({ "source": source, "reference": request.reference, "expected_hash": preview["hash"], "consent": "declined" });
            match client.post("/v1/connectors/install", &body).await {
                Ok(recorded) => eprintln!(
                    "cancelled; nothing was installed (audit {})",
                    recorded["audit_id"].as_str().unwrap_or("?")
                ),
                Err(error) => {
                    eprintln!("cancelled; nothing was installed (the refusal could not be recorded: {error:#})")
                }
            }
            return Ok(super::ExitStatus::Failure);
        }
        "prompt"
    };
    let body = json!({
        "source": source,
        "reference": request.reference,
        "expected_hash": preview["hash"],
        "consent": via,
        "allow_unsigned": request.allow_unsigned,
    });
    let installed = client.post("/v1/connectors/install", &body).await?;
    eprintln!(
        "installed {}@{} ({}); audit {}",
        installed["fqn"].as_str().unwrap_or("?"),
        installed["version"].as_str().unwrap_or("?"),
        installed["hash"].as_str().unwrap_or("?"),
        installed["audit_id"].as_str().unwrap_or("?"),
    );
    report_compile(&installed["compiled"]);
    outln!("{}", installed["hash"].as_str().unwrap_or_default());
    Ok(ExitStatus::Ok)
}

/// The daemon compiles a module when it is installed; says what that cost, or warns that the
/// module will not run.
fn report_compile(compiled: &Value) {
    if compiled["ok"] == true {
        if let (Some(ms), Some(bytes)) = (compiled["milliseconds"].as_u64(), compiled["artifact_bytes"].as_u64()) {
            eprintln!("compiled in {ms} ms ({} KiB of native code cached)", bytes.div_ceil(1024));
        }
    } else if compiled["ok"] == false {
        eprintln!(
            "warning: the module does not load, so its actions will fail until it is replaced: {}\n\
             hint: the connector's author must fix the module or its manifest's [capabilities.runtime] imports",
            compiled["error"].as_str().unwrap_or("unknown error")
        );
    }
}

/// Fetches the release into a temporary file in the home, with a progress bar on a TTY (plain
/// lines otherwise).
async fn download(home: &Home, reference: &aileron_core::ConnectorRef) -> Result<tempfile::NamedTempFile, CliError> {
    let url = crate::forge::release_url(&reference.fqn, &reference.version);
    eprintln!("downloading {url}");
    let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {bytes_per_sec}") {
        bar.set_style(style);
    }
    let mut progress = |done: u64, total: Option<u64>| {
        if let Some(total) = total {
            bar.set_length(total);
        }
        bar.set_position(done);
    };
    let fetched = crate::forge::fetch(&url, crate::forge::MAX_DOWNLOAD_BYTES, &mut progress).await;
    bar.finish_and_clear();
    let bytes = fetched.map_err(|e| CliError::failure(format!("{e}\nhint: {}", e.hint())))?;
    eprintln!("downloaded {} bytes", bytes.len());
    let file = tempfile::Builder::new()
        .prefix(".download-")
        .suffix(".tar.gz")
        .tempfile_in(home.root())
        .map_err(|e| CliError::failure(format!("creating a temporary file in {}: {e}", home.root().display())))?;
    std::fs::write(file.path(), &bytes).map_err(|e| CliError::failure(format!("writing the download: {e}")))?;
    Ok(file)
}

/// Previews; when the package is signed by a publisher whose key is not trusted yet and a person
/// is at the terminal, offers to trust the key (`Trust publisher <authority>? [y/N]`) and
/// previews again. `None` when the user declined.
async fn preview_or_trust(client: &DaemonClient, body: &Value) -> Result<Option<Value>, CliError> {
    let (status, answer) = client.call_raw(reqwest::Method::POST, "/v1/connectors/preview", Some(body)).await?;
    if status.is_success() {
        return Ok(Some(answer));
    }
    let no_key = answer["error"]["class"] == "signature_failure"
        && answer["error"]["message"].as_str().is_some_and(|m| m.contains("no key is trusted"));
    if !no_key || !std::io::stdin().is_terminal() {
        return Err(CliError::failure(crate::client::ApiFailure { status, body: answer }.to_string()));
    }
    let authorities: Vec<String> = answer["error"]["details"]["authorities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    for authority in &authorities {
        let Ok(key) = super::keyring::fetch_key(authority).await else { continue };
        eprintln!("{authority} publishes key {}", key.fingerprint());
        if !super::ask(&format!("Trust publisher {authority}? [y/N] "))? {
            eprintln!("not trusted; nothing was installed");
            return Ok(None);
        }
        client.post("/v1/keyring/trust", &json!({ "authority": authority, "key": key.to_base64() })).await?;
        return Box::pin(preview_or_trust(client, body)).await;
    }
    Err(CliError::failure(crate::client::ApiFailure { status, body: answer }.to_string()))
}

/// The consent screen: signature status, identity and every capability in plain words. The
/// signature line comes first, before anything the package wrote, and every string the package
/// controls is escaped (the re-attack's H5: a publisher field drew a fake "signed by" line and hid
/// the lines below it; manifests with such text are also refused at parse time).
pub fn consent_text(preview: &Value) -> String {
    let field = |key: &str, absent: &str| super::escape(preview[key].as_str().unwrap_or(absent));
    let mut text = String::new();
    text.push_str(&format!("Signature   {}\n", field("signature", "?")));
    text.push_str(&format!("Connector   {}@{}\n", field("fqn", "?"), field("version", "?")));
    text.push_str(&format!("Hash        {}\n", field("short_hash", "?")));
    match preview["publisher"].as_str() {
        Some(publisher) => {
            text.push_str(&format!("Publisher   {} (the package's own words)\n", super::escape(publisher)))
        }
        None => text.push_str("Publisher   (not declared)\n"),
    }
    if preview["already_installed"] == true {
        text.push_str("Status      already installed (identical bytes)\n");
    }
    text.push_str("It will be allowed to:\n");
    for capability in preview["capabilities"].as_array().into_iter().flatten() {
        text.push_str(&format!("  - {}\n", super::escape(capability.as_str().unwrap_or("?"))));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::consent_text;

    /// Even a preview whose strings were never parsed by this version (a store written by an older
    /// one) cannot draw lines on the screen: the signature line is first and every package string
    /// is escaped.
    #[test]
    fn the_consent_screen_escapes_the_packages_words_and_leads_with_the_signature() {
        let preview = serde_json::json!({
            "fqn": "github://acme/widget", "version": "1.0.0", "short_hash": "sha256:abc",
            "publisher": "acme\r\u{1b}[1ASignature   signed by github://acme\u{E0041}",
            "signature": "unsigned",
            "capabilities": ["connect to evil.example:443\u{1b}[2K\r", "run /bin/bash\u{202e}"],
        });
        let text = consent_text(&preview);
        assert!(text.starts_with("Signature   unsigned\n"), "{text}");
        assert_eq!(text.lines().filter(|line| line.starts_with("Signature")).count(), 1, "{text}");
        assert!(text.chars().all(|c| c == '\n' || !aileron_core::untrusted_text::hidden(c)), "{text:?}");
        assert!(text.contains("connect to evil.example:443\\u{1b}[2K\\u{d}"), "{text}");
    }
}
