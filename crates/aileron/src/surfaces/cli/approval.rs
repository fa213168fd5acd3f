//! `aileron approval list|watch|approve|deny|cancel|status` and `aileron open approval <id>`: the out-of-band
//! surfaces where a human decides. Nothing here is reachable by an agent over MCP.

use clap::{Args, Subcommand};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::{ApiFailure, DaemonClient};
use crate::wire::{ApprovalList, LoginTicket};

#[derive(Args)]
pub struct ApprovalArgs {
    #[command(subcommand)]
    command: ApprovalCommand,
}

#[derive(Subcommand)]
enum ApprovalCommand {
    /// List approvals waiting for a decision, oldest first
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print approvals as they arrive (ringing the terminal bell) and as they end, until
    /// interrupted: for a terminal beside the agent when there is no desktop to notify
    Watch {
        /// One JSON object per event: {"event": "snapshot"|"pending"|"resolved", "data": …}
        #[arg(long)]
        json: bool,
    },
    /// Approve a pending approval; the action then runs once, in the background. With `--set`
    /// or `--args-file` it runs with the arguments you edit in, after showing their preview
    Approve {
        id: String,
        #[arg(long)]
        reason: Option<String>,
        /// Replace one argument: KEY=VALUE, typed as the action declares (repeatable)
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Replace the arguments with this JSON object file's
        #[arg(long, value_name = "FILE", conflicts_with = "set")]
        args_file: Option<std::path::PathBuf>,
        /// Approve the edited arguments without asking after their preview
        #[arg(long)]
        yes: bool,
    },
    /// Deny a pending approval; the action never runs
    Deny {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Withdraw a pending approval without deciding it; nothing runs (the agent is told it was
    /// withdrawn)
    Cancel {
        id: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Show where an approval stands: pending, running, completed, denied, failed, expired or cancelled
    Status {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct OpenArgs {
    #[command(subcommand)]
    target: OpenTarget,
}

#[derive(Subcommand)]
enum OpenTarget {
    /// Open the review page for one approval in the browser (signed in with a one-time ticket)
    Approval {
        id: String,
        /// Print the sign-in URL instead of starting a browser
        #[arg(long)]
        print: bool,
    },
    /// Open the review page listing every pending approval
    Approvals {
        #[arg(long)]
        print: bool,
    },
    /// Open the console's activity page: the audit log as a timeline
    Activity {
        #[arg(long)]
        print: bool,
    },
    /// Open the console's actions page: installed actions, enable and disable
    Actions {
        #[arg(long)]
        print: bool,
    },
    /// Open the console's connectors page: installed versions, signatures, remove
    Connectors {
        #[arg(long)]
        print: bool,
    },
    /// Open the console's accounts page: the vault and credential bindings
    Accounts {
        #[arg(long)]
        print: bool,
    },
    /// Open the console's agents page: live and past launch sessions
    Agents {
        #[arg(long)]
        print: bool,
    },
}

pub async fn run(home: &Home, args: ApprovalArgs) -> CliResult {
    let client = DaemonClient::connect(home).await?;
    match args.command {
        ApprovalCommand::List { json } => {
            let listing: ApprovalList = client.get_as("/v1/action-approvals").await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            if listing.items.is_empty() {
                eprintln!("no approvals are waiting");
            }
            // Sessions launched with `--network=open` are marked like unconfined ones.
            let open_network: Vec<String> = if listing.items.iter().any(|item| item.session_id.is_some()) {
                let sessions: crate::wire::SessionList = client.get_as("/v1/sessions").await?;
                sessions
                    .items
                    .into_iter()
                    .filter(|s| {
                        s.confinement == crate::stores::sessions::Confinement::Namespaces && !s.network_enforced
                    })
                    .map(|s| s.session_id)
                    .collect()
            } else {
                Vec::new()
            };
            for item in listing.items {
                let open_network = item.session_id.as_ref().is_some_and(|id| open_network.contains(id));
                for line in item_lines(&item, open_network) {
                    outln!("{line}");
                }
            }
            Ok(ExitStatus::Ok)
        }
        ApprovalCommand::Watch { json } => watch(&client, json).await,
        ApprovalCommand::Approve { id, reason, set, args_file, yes } => {
            if set.is_empty() && args_file.is_none() {
                return decide(&client, &id, true, reason, None).await;
            }
            let Some(args) = edited_args(&client, &id, &set, args_file.as_deref()).await? else {
                return decide(&client, &id, true, reason, None).await;
            };
            let preview = client
                .call_raw(Method::POST, &format!("/v1/action-approvals/{id}/preview"), Some(&json!({ "args": args })))
                .await?;
            if preview.0 != StatusCode::OK {
                return Err(CliError::failure(ApiFailure { status: preview.0, body: preview.1 }.to_string()));
            }
            show_edit(&preview.1);
            if !yes && !confirmed("approve with these arguments? [y/N] ")? {
                eprintln!("not approved; {id} still waits");
                return Ok(ExitStatus::Ok);
            }
            decide(&client, &id, true, reason, Some(args)).await
        }

        ApprovalCommand::Deny { id, reason } => decide(&client, &id, false, reason, None).await,
        ApprovalCommand::Cancel { id, reason } => {
            let body = json!({ "reason": reason });
            let (status, answer) =
                client.call_raw(Method::POST, &format!("/v1/action-approvals/{id}/cancel"), Some(&body)).await?;
            if status != StatusCode::NO_CONTENT {
                return Err(CliError::failure(ApiFailure { status, body: answer }.to_string()));
            }
            eprintln!("cancelled {id}; it will not run, and the agent is told it was withdrawn");
            Ok(ExitStatus::Ok)
        }
        ApprovalCommand::Status { id, json } => {
            let view = client.get(&format!("/v1/action-approvals/{id}/result")).await?;
            if json {
                print_json(&view);
            } else {
                outln!("{}", status_line(&view));
            }
            Ok(ExitStatus::Ok)
        }
    }
}

/// How `approval list` and `approval watch` show one pending approval: what it would do (an
/// action and its arguments, or a launched agent's held request), its expiry, and whether its
/// agent runs unconfined (or with an open network). Text from the agent is shown visibly.
fn item_lines(item: &aileron_core::approval::ApprovalEntry, open_network: bool) -> Vec<String> {
    let visible = |text: &str| aileron_core::untrusted_text::visible(text, 2000);
    let mut lines = Vec::new();
    if item.kind == aileron_core::approval::ApprovalKind::HttpRequest {
        // A launched agent's own request held at its proxy: what it would do, then whose.
        let arg = |name: &str| item.args.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        lines.push(format!(
            "{}  {} {}  ({}) requested {}  body {} bytes {}",
            visible(&item.id.to_string()),
            visible(&arg("method")),
            visible(&arg("host")),
            visible(&item.action),
            visible(&item.requested_at),
            item.args.get("body_bytes").and_then(|v| v.as_u64()).unwrap_or(0),
            visible(&arg("body_sha256")),
        ));
        // The path and query on a line of their own, cut with a count: cut with the rest of the
        // line at 2,000 characters, a query's `&merge_method=merge` never showed (the
        // twenty-sixth re-attack).
        if let Some(path) = item.args.get("path") {
            lines.extend(arg_lines(&serde_json::Map::from_iter([("path".to_string(), path.clone())])));
        }
        // The body and each header on lines of their own, each cut on its own and saying how much
        // it hides: the headers as one line cut at 2,000 characters let a padding header that
        // sorts first push `x-amz-acl` out of sight, and the body was not shown at all (the
        // twenty-fourth re-attack).
        if let Some(body) = item.args.get("body") {
            lines.extend(arg_lines(&serde_json::Map::from_iter([("body".to_string(), body.clone())])));
        }
        if let Some(headers) = item.args.get("headers").and_then(|headers| headers.as_object()) {
            lines.push("    headers:".to_string());
            lines.extend(arg_lines(headers).into_iter().map(|line| format!("  {line}")));
        }
    } else {
        lines.push(format!(
            "{}  {:<20} requested {}",
            visible(&item.id.to_string()),
            visible(&item.action),
            visible(&item.requested_at)
        ));
        lines.extend(arg_lines(&item.args));
    }
    if let Some(reason) = &item.policy_reason {
        lines.push(format!("    asked by a policy rule: {}", visible(reason)));
    }
    if let Some(left) = item.expires_in_ms(&crate::stores::approvals::now()) {
        lines.push(format!("    expires in {}", crate::surfaces::daemon::web::approvals::duration_words(left)));
    }
    if item.unconfined {
        lines.push(format!("    ! {}", crate::surfaces::daemon::web::approvals::UNCONFINED_NOTICE));
    } else if open_network {
        lines.push(format!("    ! {}", crate::surfaces::daemon::web::approvals::OPEN_NETWORK_NOTICE));
    }
    lines
}

/// The most of one argument's value a listing shows.
const ARG_SHOWN_CHARS: usize = 400;

/// An approval's arguments, one line each in name order (not the order the agent sent them in),
/// each value cut on its own and saying how much it hides: one long value made the whole
/// argument list a line cut at 2,000 characters, and the agent, choosing the order, pushed the
/// recipient and the amount past the cut (the tenth re-attack).
fn arg_lines(args: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut names: Vec<&String> = args.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let value = args[name].to_string();
            let length = value.chars().count();
            let shown = aileron_core::untrusted_text::spaces_counted(&aileron_core::untrusted_text::visible(
                &value,
                ARG_SHOWN_CHARS,
            ));
            let hidden = if length > ARG_SHOWN_CHARS {
                format!(" ({} more characters: `aileron approval list --json` shows them)", length - ARG_SHOWN_CHARS)
            } else {
                String::new()
            };
            format!("    {} = {shown}{hidden}", aileron_core::untrusted_text::visible(name, 200))
        })
        .collect()
}

/// `approval watch`: the daemon's approval stream (`GET /v1/action-approvals/watch`, SSE) as
/// lines — each pending approval once (the bell rung for it), each ending — until the daemon
/// stops or the user interrupts.
async fn watch(client: &DaemonClient, json: bool) -> CliResult {
    let response = client
        .request(Method::GET, "/v1/action-approvals/watch")
        .send()
        .await
        .map_err(|e| CliError::failure(format!("watching approvals: {e}")))?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.json::<Value>().await.unwrap_or(Value::Null);
        return Err(CliError::failure(ApiFailure { status, body }.to_string()));
    }
    if !json {
        eprintln!("watching for approvals (Ctrl-C to stop); decide with `aileron approval approve|deny <id>`");
    }
    let mut response = response;
    let mut buffer = String::new();
    let mut shown = std::collections::BTreeSet::new();
    let (mut event, mut data) = (String::new(), String::new());
    while let Some(chunk) = response.chunk().await.map_err(|e| CliError::failure(format!("watching approvals: {e}")))? {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(newline) = buffer.find('\n') {
            let line = buffer[..newline].trim_end_matches('\r').to_string();
            buffer.drain(..=newline);
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_string();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            } else if line.is_empty() && !event.is_empty() {
                show_event(&event, &data, json, &mut shown);
                (event, data) = (String::new(), String::new());
            }
        }
    }
    eprintln!("the daemon closed the stream (it stopped)");
    Ok(ExitStatus::Ok)
}

/// Prints one watch event; a pending approval already shown is not shown again.
fn show_event(event: &str, data: &str, json: bool, shown: &mut std::collections::BTreeSet<String>) {
    let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
    if json {
        outln!("{}", json!({ "event": event, "data": value }));
        return;
    }
    let pending: Vec<aileron_core::approval::ApprovalEntry> = match event {
        "snapshot" => serde_json::from_value::<ApprovalList>(value).map(|list| list.items).unwrap_or_default(),
        "pending" => serde_json::from_value(value).into_iter().collect(),
        "resolved" => {
            if let Ok(entry) = serde_json::from_value::<aileron_core::approval::ApprovalEntry>(value)
                && shown.remove(entry.id.as_str())
            {
                outln!("{}  {}", aileron_core::untrusted_text::visible(entry.id.as_str(), 200), entry.state);
            }
            return;
        }
        _ => return,
    };
    for item in pending.into_iter().filter(|item| shown.insert(item.id.to_string())) {
        // The bell: a terminal left beside the agent gets the user's attention.
        eprint!("\x07");
        for line in item_lines(&item, false) {
            outln!("{line}");
        }
    }
}

/// The pending approval's arguments with `--set` pairs (typed as the action declares) or the
/// `--args-file` object in their place; `None` when they equal the requested ones.
async fn edited_args(
    client: &DaemonClient,
    id: &str,
    set: &[String],
    args_file: Option<&std::path::Path>,
) -> Result<Option<serde_json::Map<String, Value>>, CliError> {
    let listing: ApprovalList = client.get_as("/v1/action-approvals").await?;
    let Some(entry) = listing.items.into_iter().find(|entry| entry.id.as_str() == id) else {
        return Err(CliError::failure(format!(
            "approval `{id}` is not waiting\nhint: aileron approval list shows what waits; aileron approval status {id} how it ended"
        )));
    };
    let args = match args_file {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| CliError::usage(format!("reading {}: {e}", file.display())))?;
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(args)) => args,
                _ => {
                    return Err(CliError::usage(format!(
                        "{} is not one JSON object\nhint: write the arguments as {{\"key\": value, ...}}",
                        file.display()
                    )));
                }
            }
        }
        None => {
            let action: crate::wire::ActionView = client.get_as(&format!("/v1/actions/{}", entry.action)).await?;
            let mut args = entry.args.clone();
            args.extend(super::action::typed_args(set, &action.input_schema)?);
            args
        }
    };
    Ok((args != entry.args).then_some(args))
}

/// The edited arguments and their preview, before the user confirms.
fn show_edit(answer: &Value) {
    let visible = |text: &str| aileron_core::untrusted_text::visible(text, 2000);
    outln!("edited arguments: {}", visible(&answer["args"].to_string()));
    match &answer["preview"] {
        Value::Null => outln!("(this action shows no preview)"),
        preview => match serde_json::from_value::<aileron_core::approval::ApprovalPreview>(preview.clone()) {
            Ok(aileron_core::approval::ApprovalPreview::Fields(fields)) => {
                outln!("preview with them:");
                for field in fields {
                    outln!("  {}: {}", visible(&field.label), visible(field.value.as_deref().unwrap_or("—")));
                }
            }
            Ok(aileron_core::approval::ApprovalPreview::Unavailable { reason }) => {
                outln!("preview unavailable: {}", visible(&reason));
            }
            Err(_) => outln!("preview: {}", visible(&preview.to_string())),
        },
    }
}

/// Asks on the terminal; no terminal is a refusal with the way out.
fn confirmed(question: &str) -> Result<bool, CliError> {
    use std::io::IsTerminal;
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "approving edited arguments asks for confirmation after their preview, and there is no terminal\nhint: add --yes to approve them as shown",
        ));
    }
    eprint!("{question}");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).map_err(|e| CliError::failure(e.to_string()))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

async fn decide(
    client: &DaemonClient,
    id: &str,
    approved: bool,
    reason: Option<String>,
    args: Option<serde_json::Map<String, Value>>,
) -> CliResult {
    let mut body = json!({ "approved": approved });
    if let Some(reason) = reason {
        body["reason"] = reason.into();
    }
    let edited = args.is_some();
    if let Some(args) = args {
        body["args"] = Value::Object(args);
    }
    // What is decided, said after the decision: an id an agent handed the user could name another
    // approval than the one it described (the twenty-fourth re-attack).
    let listing: ApprovalList = client.get_as("/v1/action-approvals").await?;
    let entry = listing.items.into_iter().find(|item| item.id.as_str() == id);
    let (status, answer) =
        client.call_raw(Method::POST, &format!("/v1/action-approvals/{id}/decide"), Some(&body)).await?;
    if status != StatusCode::NO_CONTENT {
        return Err(CliError::failure(ApiFailure { status, body: answer }.to_string()));
    }
    if let Some(entry) = &entry {
        for line in item_lines(entry, false) {
            eprintln!("{line}");
        }
    }
    if edited {
        eprintln!("approved {id} with the edited arguments; it runs with them now, and the agent is told");
    } else if approved {
        eprintln!(
            "approved {id}; it runs now (an action in the background; an agent's held request goes out once) — \
             follow it with: aileron approval status {id}"
        );
    } else {
        eprintln!("denied {id}; it will not run");
    }
    Ok(ExitStatus::Ok)
}

/// One line describing a result view.
/// One line for `approval status`: the failure message and the denial reason may carry a
/// connector's, an upstream's or a person's words, so controls and bidi overrides are shown.
pub fn status_line(view: &Value) -> String {
    let visible = |text: &str| aileron_core::untrusted_text::visible(text, 2000);
    let status = view["status"].as_str().unwrap_or("?");
    match status {
        "completed" => format!("completed (audit {})", visible(view["audit_id"].as_str().unwrap_or("?"))),
        "denied" | "cancelled" => match view["reason"].as_str() {
            Some(reason) => format!("{status}: {}", visible(reason)),
            None => status.to_string(),
        },
        "expired" => "expired: nobody decided it in time; it did not run".to_string(),
        "failed" => format!(
            "failed: {} — {}",
            visible(view["failure"]["class"].as_str().unwrap_or("?")),
            visible(view["failure"]["message"].as_str().unwrap_or("?"))
        ),
        other => visible(other),
    }
}

pub async fn open(home: &Home, args: OpenArgs) -> CliResult {
    let (page, focus, print) = match args.target {
        OpenTarget::Approval { id, print } => ("approvals", Some(id), print),
        OpenTarget::Approvals { print } => ("approvals", None, print),
        OpenTarget::Activity { print } => ("activity", None, print),
        OpenTarget::Actions { print } => ("actions", None, print),
        OpenTarget::Connectors { print } => ("connectors", None, print),
        OpenTarget::Accounts { print } => ("accounts", None, print),
        OpenTarget::Agents { print } => ("agents", None, print),
    };
    let client = DaemonClient::connect(home).await?;
    if let Some(id) = &focus {
        // A made-up id is an error, not a sign-in to a page that shows nothing.
        client.get(&format!("/v1/action-approvals/{id}/result")).await?;
    }
    let ticket: LoginTicket = client.post_as("/v1/web/login-tickets", &json!({})).await?;
    let mut url = ticket.login_url;
    if page != "approvals" {
        url.push_str(&format!("&page={page}"));
    }
    if let Some(focus) = focus {
        url.push_str(&format!("&focus={focus}"));
    }
    if print || !open_browser(home, &url) {
        // stdout carries the URL so scripts (and people without a browser here) can use it.
        outln!("{url}");
        if !print {
            eprintln!("could not start a browser; open the URL above within 60 s (it signs you in once)");
        }
    } else {
        eprintln!("opened the {page} page in your browser");
    }
    Ok(ExitStatus::Ok)
}

/// Opens `url` in the browser without putting it on a command line: a URL carrying a one-time
/// ticket or an OAuth state would be readable by every local user in `/proc/<pid>/cmdline` for
/// the opener's lifetime. The opener gets a `file://` page (0600, in the 0700 home) that forwards
/// the browser to `url`; such pages older than two minutes are removed on the next call. False
/// when no opener is available or it fails.
pub(super) fn open_browser(home: &Home, url: &str) -> bool {
    let dir = home.root().join("launch");
    if crate::platform::home::create_private_dir(&dir).is_err() {
        return false;
    }
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let stale = entry.file_name().to_string_lossy().starts_with("open-")
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|at| at.elapsed().is_ok_and(|age| age.as_secs() > 120));
        if stale {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let escaped = url.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;");
    let page = format!(
        "<!doctype html><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\">\
         <meta http-equiv=\"refresh\" content=\"0;url={escaped}\"><title>Aileron</title><p>Opening Aileron…</p>\n"
    );
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    let path = dir.join(format!("open-{}.html", hex::encode(random)));
    if crate::platform::home::write_atomic(&path, page.as_bytes(), 0o600).is_err() {
        return false;
    }
    let target = format!("file://{}", path.display());
    let openers: &[&str] = if cfg!(target_os = "macos") { &["open"] } else { &["xdg-open", "sensible-browser"] };
    openers.iter().any(|opener| {
        std::process::Command::new(opener)
            .arg(&target)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn status_lines_show_controls_and_bidi_overrides_instead_of_obeying_them() {
        let failed = json!({"status": "failed", "failure": {"class": "external_api_error", "message": "boom\u{1b}[2J\u{202e}evil"}});
        let line = super::status_line(&failed);
        assert!(!line.contains('\u{1b}') && !line.contains('\u{202e}'), "{line:?}");
        assert!(line.starts_with("failed: external_api_error — boom"), "{line:?}");
        let denied = json!({"status": "denied", "reason": "no\u{9b}31m"});
        assert!(!super::status_line(&denied).contains('\u{9b}'));
    }

    /// The twenty-fourth re-attack: a held request's headers were one line cut at 2,000
    /// characters, so a padding header that sorts first hid `x-amz-acl`; its body was not shown.
    #[test]
    fn a_held_requests_headers_and_body_each_show_on_a_line_of_their_own() {
        use aileron_core::approval::{ApprovalEntry, HttpRequestApproval};
        let connector = aileron_core::Fqn::parse("github://aileron/aws-cli").unwrap();
        let requested_at = crate::stores::approvals::now();
        let headers = [
            ("a-note".to_string(), format!("ok{}{}", " ".repeat(40), "x".repeat(2000))),
            ("x-amz-acl".to_string(), "public-read-write".to_string()),
        ];
        let entry = ApprovalEntry::http_request_with_headers(
            HttpRequestApproval {
                id: crate::stores::approvals::mint_id(&requested_at),
                connector: &connector,
                operation: "put_object_acl",
                method: "PUT",
                host: "s3.amazonaws.com:443",
                target: "/bucket/key",
                body: b"{\"config\": {\"url\": \"https://ci.acme.example/hook\"}}",
                requested_at,
                session_id: "ses-1",
                unconfined: false,
            },
            &headers,
        );
        let lines = super::item_lines(&entry, false);
        assert!(lines.iter().any(|line| line.contains("path = \"/bucket/key\"")), "{lines:#?}");
        let acl = lines.iter().find(|line| line.contains("x-amz-acl")).expect("x-amz-acl shown");
        assert!(acl.contains("public-read-write"), "{lines:#?}");
        let note = lines.iter().find(|line| line.contains("a-note")).unwrap();
        assert!(note.contains("more characters"), "the cut is said: {note}");
        assert!(lines.iter().any(|line| line.contains("body = ") && line.contains("ci.acme.example")), "{lines:#?}");
    }
}
