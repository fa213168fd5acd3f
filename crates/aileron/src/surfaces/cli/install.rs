//! The install pipeline's CLI half, shared by `connector install`, `connector upgrade` and
//! `action add`: fetch the release by name (or read `--from`), run the daemon's pipeline up to
//! consent (preview: layout, identity, signature against the keyring, hash), trust the publisher
//! when asked, show the consent screen, ask, then install exactly the bytes consented to — or
//! record that the user declined.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};

use super::{CliError, CliResult, ExitStatus};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;

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

pub(super) struct Install {
    pub(super) from: Option<PathBuf>,
    pub(super) reference: String,
    pub(super) hash: Option<String>,
    pub(super) yes: bool,
    pub(super) allow_unsigned: bool,
}

pub(super) async fn install(home: &Home, request: Install) -> CliResult {
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
    let compiling = compiling_spinner();
    let installed = client.post("/v1/connectors/install", &body).await;
    compiling.finish_and_clear();
    let installed = installed?;
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

/// What the user sees while the daemon installs: it compiles the module to native code then,
/// which takes seconds for a large (Go) module. A spinner with the elapsed time on a terminal,
/// one line otherwise.
fn compiling_spinner() -> indicatif::ProgressBar {
    const WHY: &str = "compiling the connector to native code (once, at install: every run starts from the \
                       cached result; a large module, such as a Go one, takes several seconds)";
    if !std::io::stderr().is_terminal() {
        eprintln!("{WHY}");
        return indicatif::ProgressBar::hidden();
    }
    let spinner = indicatif::ProgressBar::new_spinner();
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
        spinner.set_style(style);
    }
    spinner.set_message(WHY);
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner
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
    let url = crate::stores::forge::release_url(&reference.fqn, &reference.version);
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
    let fetched = crate::stores::forge::fetch(&url, crate::stores::forge::MAX_DOWNLOAD_BYTES, &mut progress).await;
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
        return Err(CliError::failure(crate::surfaces::client::ApiFailure { status, body: answer }.to_string()));
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
    Err(CliError::failure(crate::surfaces::client::ApiFailure { status, body: answer }.to_string()))
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
            text.push_str(&format!("Publisher   {} (the package's own words)\n", package_words(publisher)))
        }
        None => text.push_str("Publisher   (not declared)\n"),
    }
    if preview["already_installed"] == true {
        text.push_str("Status      already installed (identical bytes)\n");
    }
    text.push_str("It will be allowed to:\n");
    for capability in preview["capabilities"].as_array().into_iter().flatten() {
        text.push_str(&format!("  - {}\n", package_words(capability.as_str().unwrap_or("?"))));
    }
    text
}

/// Words the package wrote, escaped, with long runs of spaces counted rather than drawn.
fn package_words(text: &str) -> String {
    aileron_core::untrusted_text::spaces_counted(&super::escape(text))
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
        // The ninth re-attack: a run of spaces wrapped the package's words onto a line of their own.
        let wrapped = serde_json::json!({
            "publisher": format!("Aileron{}Signature   verified (github://aileron)", " ".repeat(200)),
            "signature": "unsigned",
            "capabilities": [format!("use an API key: read issues{}Nothing else.", " ".repeat(60))],
        });
        let text = consent_text(&wrapped);
        assert!(text.contains("Aileron ␣×200 Signature   verified") && text.contains("issues ␣×60 Nothing"), "{text}");
    }
}
