//! The whole web console in a real browser, driven by `tests/browser/console.mjs`: a real daemon
//! with connectors and actions against loopback fakes (`FakeGithub` as the upstream, `FakeOAuth`
//! as an API-key API and an OAuth2 provider), a person signed in by `aileron open activity`.
//!
//! Each page is checked for what it shows (read back from the DOM) and for what its buttons do
//! (read back through the CLI or the HTTP API, never from the page alone): runs appear on the
//! activity page live and open to their steps and proxied calls; an action is disabled and enabled;
//! a connector in use is not removed, an unused one is; the vault is unlocked, an API key bound and
//! an OAuth2 account connected through the provider and revoked; agent sessions appear live and
//! one is ended; an approval card says who asked and what the action may touch, with hostile text
//! shown as text. Then the security rules: no cookie, a foreign `Origin`, no CSRF secret or an
//! agent's session token get no data and change nothing. Last, one full-page screenshot per page,
//! written to `docs/console/` when `AILERON_UPDATE_SCREENSHOTS=1`.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{BrowserDriver, HEADER_BACKGROUND, assert_no_page_problems, browser_available, check_png};
use crate::cli::Cli;
use crate::fake_github::FakeGithub;
use crate::fake_oauth::FakeOAuth;
use crate::support::{ActionSpec, guest_wasm, manifest};

const PASSPHRASE: &str = "console test passphrase 4711";
const API_KEY: &str = "console-key-5a1f0e77c3d2a9b8";
/// An argument an agent controls: the card must show it as text, markup escaped and the
/// right-to-left override made visible instead of reordering what the reviewer reads.
const HOSTILE_URL: &str = "https://status.example/<b>x</b>\u{202e}gpj.exe";
/// Set to `1` to write the screenshots into `docs/console/` (they are committed).
const UPDATE_SCREENSHOTS: &str = "AILERON_UPDATE_SCREENSHOTS";
const PAGES: [&str; 6] = ["activity", "actions", "connectors", "accounts", "agents", "approvals"];
const KEYED: &str = "github://aileron-tests/keyed";
const OAUTH: &str = "github://aileron-tests/oauth";

/// The running daemon's URL and admin token, and a client for requests the test forges.
struct Daemon {
    url: String,
    token: String,
    client: reqwest::blocking::Client,
}

impl Daemon {
    fn of(cli: &Cli) -> Daemon {
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).expect("daemon.json"))
                .expect("daemon.json is JSON");
        let client = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
        Daemon {
            url: info["url"].as_str().unwrap().to_string(),
            token: info["token"].as_str().unwrap().to_string(),
            client,
        }
    }

    /// `(status, body)` of a request with exactly these headers.
    fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<Value>) -> (u16, String) {
        let mut request = self.client.request(method.parse().unwrap(), format!("{}{path}", self.url));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().expect("the daemon answers");
        (response.status().as_u16(), response.text().unwrap_or_default())
    }

    fn as_token(&self, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let (status, text) = self.send(method, path, &[("authorization", &format!("Bearer {token}"))], body);
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.as_token(&self.token, method, path, body)
    }

    /// A launch session started as `aileron launch` would; returns `(session id, token)`.
    fn start_session(&self, agent: &str, confinement: &str) -> (String, String) {
        let (status, started) =
            self.admin("POST", "/v1/sessions", Some(json!({ "agent": agent, "confinement": confinement })));
        assert_eq!(status, 201, "{started}");
        (started["session_id"].as_str().unwrap().to_string(), started["token"].as_str().unwrap().to_string())
    }
}

/// The console driver with one method per command of `console.mjs`.
struct Console(BrowserDriver);

impl Console {
    fn goto(&mut self, path: &str, wait: Option<&str>, texts: &[&str]) -> Value {
        let reply = self.0.send(json!({ "cmd": "goto", "path": path, "wait": wait, "texts": texts, "count": texts }));
        assert_eq!(reply["status"], 200, "{path}: {}", reply["text"]);
        reply
    }

    fn fill(&mut self, selector: &str, value: &str) {
        self.0.send(json!({ "cmd": "fill", "selector": selector, "value": value }));
    }

    fn click(&mut self, selector: &str, texts: &[&str]) -> Value {
        self.0.send(json!({ "cmd": "click", "selector": selector, "texts": texts, "visible": texts }))
    }

    fn wait_text(&mut self, selector: &str, text: &str, texts: &[&str]) -> Value {
        self.0.send(json!({ "cmd": "wait_text", "selector": selector, "text": text, "texts": texts }))
    }

    fn wait_text_gone(&mut self, selector: &str, text: &str, texts: &[&str]) -> Value {
        self.0.send(json!({ "cmd": "wait_text", "selector": selector, "text": text, "absent": true, "texts": texts }))
    }

    fn wait_for(&mut self, selector: &str) -> Value {
        self.0.send(json!({ "cmd": "wait_count", "selector": selector, "at_least": 1 }))
    }

    fn wait_gone(&mut self, selector: &str, count: &[&str]) -> Value {
        self.0.send(json!({ "cmd": "wait_gone", "selector": selector, "count": count }))
    }

    fn wait_url(&mut self, text: &str, count: &[&str]) -> Value {
        self.0.send(json!({ "cmd": "wait_url", "text": text, "count": count }))
    }

    fn screenshot(&mut self, path: &std::path::Path) {
        self.0.send(json!({ "cmd": "screenshot", "path": path }));
        check_png(path);
    }
}

/// All the texts a reply gives for `selector`, joined.
fn text_of(reply: &Value, selector: &str) -> String {
    let texts =
        reply["texts"][selector].as_array().unwrap_or_else(|| panic!("no texts for {selector}: {}", reply["texts"]));
    texts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n")
}

fn count_of(reply: &Value, selector: &str) -> u64 {
    reply["counts"][selector].as_u64().unwrap_or_else(|| panic!("no count for {selector}: {}", reply["counts"]))
}

/// The page changed in place: no reload, no navigation since the previous reply.
fn assert_live(reply: &Value, step: &str) {
    assert_eq!(
        (&reply["navigations"], &reply["same_document"]),
        (&json!(0), &json!(true)),
        "{step}: updated live, without navigating"
    );
}

/// Only console errors for failed requests with this HTTP status (the answer the step expects).
fn assert_problems_only(reply: &Value, status: u16, step: &str) {
    for problem in reply["problems"].as_array().unwrap() {
        assert!(
            problem.as_str().unwrap().contains(&format!("status of {status}")),
            "{step}: unexpected page problem {problem}"
        );
    }
}

/// The value of `attribute` in the element whose start tag contains `marker`.
fn attribute(html: &str, marker: &str, attribute: &str) -> String {
    let at = html.find(marker).unwrap_or_else(|| panic!("{marker} in the page"));
    let tag = &html[html[..at].rfind('<').unwrap()..at + html[at..].find('>').unwrap()];
    let start =
        tag.find(&format!("{attribute}=\"")).unwrap_or_else(|| panic!("{attribute} in {tag}")) + attribute.len() + 2;
    tag[start..start + tag[start..].find('"').unwrap()].to_string()
}

/// Writes the action with a description of its own (the spec's is the test suite's).
fn add_action(cli: &Cli, spec: &ActionSpec, title: &str, description: &str) {
    let text = spec
        .render()
        .replace("# Test action\n\nAn action used by the test suite.", &format!("# {title}\n\n{description}"));
    let file = cli.scratch().join(format!("{}.md", spec.name));
    std::fs::write(&file, text).unwrap();
    cli.ok(&["action", "add", file.to_str().unwrap()]);
}

fn json_of(cli: &Cli, args: &[&str]) -> Value {
    serde_json::from_str(&cli.ok(args)).unwrap_or_else(|e| panic!("aileron {args:?} prints JSON: {e}"))
}

fn enabled(cli: &Cli, action: &str) -> bool {
    let listing = json_of(cli, &["action", "list", "--json"]);
    let item =
        listing["items"].as_array().unwrap().iter().find(|item| item["name"] == action).expect("the action is listed");
    item["enabled"].as_bool().expect("enabled is a bool")
}

/// The newest audit id of `event_type`.
fn newest_audit_id(cli: &Cli, event_type: &str) -> String {
    let listing = json_of(cli, &["audit", "list", "--json", "--event-type", event_type]);
    listing["items"][0]["audit_id"].as_str().unwrap_or_else(|| panic!("no {event_type} record: {listing}")).to_string()
}

fn binding_names(cli: &Cli) -> Vec<String> {
    let listing = json_of(cli, &["binding", "list", "--json"]);
    listing["items"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap().to_string()).collect()
}

fn connector_installed(cli: &Cli, fqn: &str) -> bool {
    let listing = json_of(cli, &["connector", "list", "--json"]);
    listing["items"].as_array().unwrap().iter().any(|c| c["fqn"] == fqn)
}

/// Where the screenshots go: the repository's `docs/console/` when updating them, else scratch.
fn screenshot_dir(cli: &Cli) -> PathBuf {
    if std::env::var_os(UPDATE_SCREENSHOTS).is_some_and(|value| value == "1") {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/console");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    } else {
        cli.scratch().to_path_buf()
    }
}

#[test]
fn the_console_pages_show_live_state_and_change_it_in_a_real_browser() {
    if !browser_available() {
        return;
    }
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(FakeGithub::start()).unwrap();
    let provider = runtime.block_on(FakeOAuth::start());
    *provider.state.api_key.lock().unwrap() = Some(API_KEY.to_string());
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let daemon = Daemon::of(&cli);

    let web_hash = cli.install_guest("http_get", &[upstream.host_port()]);
    let api_key_block = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"read the status API\"\nheader = \"X-Api-Key\"\nformat = \"{key}\"\n";
    let keyed_hash = cli.install_package(
        "keyed",
        &guest_wasm("http_get"),
        &manifest("keyed", &[provider.host_port()], api_key_block),
    );
    let oauth_hash = cli.install_package(
        "oauth",
        &guest_wasm("http_get"),
        &manifest("oauth", &[provider.host_port()], &provider.manifest_credential(None)),
    );
    let echo_hash = cli.install_guest("echo", &[]);
    let url_input = [("url", "string", true)];
    let credential_inputs = [("url", "string", true), ("credential", "string", false)];
    add_action(
        &cli,
        &ActionSpec { inputs: &url_input, ..ActionSpec::new("check-status", "http_get", &web_hash, "get") },
        "Check a status page",
        "Fetches a service's status page and returns its HTTP status and body.",
    );
    add_action(
        &cli,
        &ActionSpec {
            inputs: &url_input,
            approval: true,
            ..ActionSpec::new("post-status", "http_get", &web_hash, "get")
        },
        "Post a status update",
        "Posts an update to the team's status page; a person approves every update.",
    );
    add_action(
        &cli,
        &ActionSpec {
            inputs: &credential_inputs,
            capabilities: &["get", "api_key"],
            ..ActionSpec::new("lookup-key", "keyed", &keyed_hash, "get")
        },
        "Look up with an API key",
        "Reads the status API with the bound API key.",
    );
    add_action(
        &cli,
        &ActionSpec {
            inputs: &credential_inputs,
            capabilities: &["get", "oauth2"],
            ..ActionSpec::new("lookup-account", "oauth", &oauth_hash, "get")
        },
        "Look up with an account",
        "Reads the status API as the connected account.",
    );
    add_action(
        &cli,
        &ActionSpec::new("echo-note", "echo", &echo_hash, "echo"),
        "Echo a note",
        "Returns what it was given.",
    );
    let status_url = |query: &str| format!("{}/status/200?{query}", upstream.base_url());
    let upstream_host = upstream.host_port();
    let upstream_port = upstream.addr.port();

    // 1. Sign-in: `aileron open activity --print` lands on /activity, styled, with the nav bar.
    let login_url = cli.ok(&["open", "activity", "--print"]).trim().to_string();
    assert!(login_url.contains("/approvals/login?ticket=") && login_url.contains("page=activity"), "{login_url}");
    let mut console = Console(BrowserDriver::start("console.mjs", &login_url));
    let signed_in = console.0.reply("sign-in");
    assert!(signed_in["url"].as_str().unwrap().ends_with("/activity"), "{}", signed_in["url"]);
    assert_eq!(signed_in["status"], 200);
    assert_eq!(
        (count_of(&signed_in, "nav a"), count_of(&signed_in, "nav a[aria-current=page]")),
        (6, 1),
        "the nav bar"
    );
    assert_eq!(signed_in["header_background"], HEADER_BACKGROUND, "styled: the CSP nonce lets the styles in");
    assert!(!signed_in["text"].as_str().unwrap().contains("Not signed in"));
    assert_no_page_problems(&signed_in, "sign-in");

    // 2. Activity: runs appear live, open to their steps and calls; filters; chain; chart.
    cli.ok(&["action", "run", "check-status", "--arg", &format!("url={}", status_url("probe=live"))]);
    let ok_run = newest_audit_id(&cli, "action.executed");
    let live = console.wait_text(&format!("#rec-{ok_run}"), "check-status", &[]);
    assert_live(&live, "a run appears");
    assert_no_page_problems(&live, "a run appears");
    let failed = cli.run(&["action", "run", "check-status", "--arg", "url=http://undeclared.example/health"]);
    assert!(!failed.status.success(), "a host the manifest does not declare is refused");
    let failed_run = newest_audit_id(&cli, "execution.failed");
    let live = console.wait_text(&format!("#rec-{failed_run}"), "capability_denied", &[]);
    assert_live(&live, "a failed run appears with its class");

    let record = format!("#rec-{ok_run}");
    let (steps, calls) = (format!("{record} table.steps"), format!("{record} table.calls tr.call"));
    let opened = console.click(&format!("{record} > summary"), &[&steps, &calls]);
    assert_eq!((&opened["visible"][&steps], &opened["visible"][&calls]), (&json!(true), &json!(true)), "the run opens");
    let step = text_of(&opened, &steps);
    assert!(step.contains("github://aileron-tests/http_get") && step.contains("get"), "{step}");
    let call = text_of(&opened, &calls);
    assert!(call.contains(&format!("{upstream_host}/status/200")) && call.contains("GET"), "the proxied call: {call}");
    let cells: Vec<&str> = call.split('\t').map(str::trim).collect();
    assert_eq!(cells.get(2), Some(&"200"), "its upstream status: {call}");
    assert!(cells.get(3).is_some_and(|duration| duration.ends_with(" ms")), "its duration: {call}");
    let failure = format!("#rec-{failed_run} table.failure");
    let opened = console.click(&format!("#rec-{failed_run} > summary"), &[&failure]);
    let failure_text = text_of(&opened, &failure);
    assert!(
        failure_text.contains("capability_denied") && failure_text.contains("undeclared.example"),
        "{failure_text}"
    );

    console.fill("#f-action", "check-status");
    console.click("#apply-filters", &[]);
    let filtered_url = console.wait_url("action=check-status", &[]);
    assert!(
        filtered_url["url"].as_str().unwrap().ends_with("/activity?action=check-status"),
        "{}",
        filtered_url["url"]
    );
    let filtered = console.wait_text_gone("#records", "connector.installed", &["#records .subject"]);
    assert_live(&filtered, "filtering");
    let subjects = text_of(&filtered, "#records .subject");
    assert!(
        subjects.lines().count() >= 2 && subjects.lines().all(|s| s == "check-status"),
        "only its records: {subjects}"
    );
    let reloaded = console.goto("/activity?action=check-status", None, &["#records .subject"]);
    assert_eq!(text_of(&reloaded, "#records .subject"), subjects, "the URL carries the filter");
    assert!(reloaded["html"].as_str().unwrap().contains("id=\"f-action\" name=\"action\""), "the filter bar");

    let activity = console.goto("/activity", Some("#chain[data-checked]"), &["#chain"]);
    assert!(text_of(&activity, "#chain").starts_with("Hash chain intact"), "{}", text_of(&activity, "#chain"));
    let html = activity["html"].as_str().unwrap();
    let runs: u64 = attribute(html, "id=\"chart\"", "data-runs").parse().unwrap();
    let failures: u64 = attribute(html, "id=\"chart\"", "data-failures").parse().unwrap();
    assert!(runs >= 2 && failures >= 1, "the chart counts the runs: {runs} runs, {failures} failed");
    assert_no_page_problems(&activity, "activity");

    // 3. Actions: what each takes and may touch, in plain words; disable and enable.
    let action = "#action-check-status";
    console.goto("/actions", None, &[]);
    // The search (here by description) narrows the list and goes into the URL.
    console.fill("#f-q", "approves every");
    console.click("#apply-search", &[]);
    let searched_url = console.wait_url("q=approves", &[]);
    assert!(searched_url["url"].as_str().unwrap().ends_with("/actions?q=approves+every"), "{}", searched_url["url"]);
    let titles = "#content details > summary strong";
    let searched = console.wait_text_gone("#content", "check-status", &[titles]);
    assert_live(&searched, "searching");
    assert_eq!(text_of(&searched, titles), "post-status", "only the action the search finds");
    console.goto("/actions", None, &[]);
    let opened = console.click(&format!("{action} > summary"), &[action]);
    let shown = text_of(&opened, action);
    for expected in [
        "check-status",
        "tool check_status",
        "enabled",
        "runs without approval",
        "Fetches a service's status page",
        "url\tstring\trequired\tthe url",
        "github://aileron-tests/http_get@1.0.0",
        "unsigned",
        &format!("connect to 127.0.0.1 (this computer) on port {upstream_port}"),
        "This action narrows it to: get",
    ] {
        assert!(shown.contains(expected), "the actions page shows `{expected}`: {shown}");
    }
    let disabled = console.click(&format!("{action} button.toggle"), &[]);
    assert_eq!(disabled["status"], "done", "{}", disabled["text"]);
    assert!(!enabled(&cli, "check-status"), "the button disabled the action");
    let badge = console.wait_text(&format!("{action} .enabled"), "disabled", &[&format!("{action} button.toggle")]);
    assert_live(&badge, "the badge");
    assert_eq!(text_of(&badge, &format!("{action} button.toggle")), "Enable");
    let refused =
        cli.run(&["action", "run", "check-status", "--arg", &format!("url={}", status_url("probe=disabled"))]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("disabled"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(
        !upstream.recorder.requests().iter().any(|r| r.path_and_query.ends_with("probe=disabled")),
        "a disabled action never runs"
    );
    let enabled_again = console.click(&format!("{action} button.toggle"), &[]);
    assert_eq!(enabled_again["status"], "done");
    assert!(enabled(&cli, "check-status"), "the button enabled the action");
    assert_live(&console.wait_text(&format!("{action} .enabled"), "enabled", &[]), "the badge again");
    assert_no_page_problems(&enabled_again, "actions");

    // 4. Connectors: identity, signature, capabilities and users; remove refused while in use.
    let web_card = "[data-reference=\"github://aileron-tests/http_get@1.0.0\"]";
    let echo_card = "[data-reference=\"github://aileron-tests/echo@1.0.0\"]";
    let connectors = console.goto("/connectors", None, &[web_card, echo_card]);
    let card = text_of(&connectors, web_card);
    for expected in [
        "1.0.0",
        web_hash.as_str(),
        "unsigned",
        &format!("connect to 127.0.0.1 (this computer) on port {upstream_port}"),
        "Used by ",
        "check-status",
        "post-status",
    ] {
        assert!(card.contains(expected), "the connector card shows `{expected}`: {card}");
    }
    assert!(text_of(&connectors, echo_card).contains("Used by echo-note"), "{}", text_of(&connectors, echo_card));
    let refused = console.click(&format!("{echo_card} button.remove"), &[]);
    assert_eq!(refused["dialogs"], json!(["Remove github://aileron-tests/echo@1.0.0 from this machine?"]));
    let status = refused["status"].as_str().unwrap();
    assert!(status.starts_with("failed: ") && status.contains("echo-note"), "the refusal names the action: {status}");
    assert_problems_only(&refused, 409, "remove in use");
    assert!(connector_installed(&cli, "github://aileron-tests/echo"), "the connector stays");
    cli.ok(&["action", "remove", "echo-note"]);
    let unused = console.wait_text(&format!("{echo_card} .used-by"), "No installed action uses this version", &[]);
    assert_live(&unused, "the card follows the action's removal");
    let removed = console.click(&format!("{echo_card} button.remove"), &[]);
    assert_eq!(removed["status"], "done", "{}", removed["text"]);
    let gone = console.wait_gone(echo_card, &[web_card]);
    assert_live(&gone, "the removed card disappears");
    assert_eq!(count_of(&gone, web_card), 1, "the others stay");
    assert!(!connector_installed(&cli, "github://aileron-tests/echo"));
    assert_no_page_problems(&gone, "connectors");

    // 5. Accounts: unlock the vault, bind an API key, connect an OAuth2 account, revoke it.
    let init = cli.run_with(&["vault", "init"], &[("AILERON_VAULT_PASSPHRASE", PASSPHRASE)], None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    cli.ok(&["vault", "lock"]);
    let accounts = console.goto("/accounts", None, &["#vault[data-state=locked]"]);
    assert_eq!(count_of(&accounts, "#vault[data-state=locked]"), 1, "{}", accounts["text"]);
    console.fill("#passphrase", PASSPHRASE);
    let unlocked = console.click("#vault button.unlock", &[]);
    assert_eq!(unlocked["status"], "done", "{}", unlocked["text"]);
    assert_eq!(json_of(&cli, &["vault", "status", "--json"])["state"], "unlocked");
    assert_live(&console.wait_for("#vault[data-state=unlocked]"), "the vault card");

    let keyed_row = "#connect-github---aileron-tests-keyed";
    console.fill(&format!("{keyed_row} input[data-field=api_key]"), API_KEY);
    let saved = console.click(&format!("{keyed_row} button.connect"), &[]);
    assert_eq!(saved["status"], "done", "{}", saved["text"]);
    let keyed_binding = "api_key/github:aileron-tests:keyed/default";
    let listed = console.wait_for(&format!("tr.binding[data-name=\"{keyed_binding}\"][data-state=ok]"));
    assert_live(&listed, "the new binding");
    assert!(binding_names(&cli).contains(&keyed_binding.to_string()));
    let echo_url = format!("{}/api/echo", provider.base_url());
    let run =
        cli.ok(&["action", "run", "lookup-key", "--arg", &format!("url={echo_url}"), "--arg", "credential=api_key"]);
    let output: Value = serde_json::from_str(&run).unwrap();
    assert_eq!(output["output"]["status"], 200, "the upstream accepted the key bound in the page: {run}");
    let reloaded = console.goto("/accounts", None, &[]);
    for page in [&saved, &listed, &reloaded] {
        let html = page["html"].as_str().unwrap();
        assert!(
            !html.contains(API_KEY) && !html.contains(PASSPHRASE),
            "neither the key nor the passphrase appears in the page"
        );
    }

    let oauth_row = "#connect-github---aileron-tests-oauth";
    let connect = console.click(&format!("{oauth_row} button.connect"), &[]);
    assert_eq!(connect["status"], Value::Null, "the page went to the provider: {}", connect["text"]);
    let connected = console.wait_url("status=ok", &["#connected", "tr.binding[data-name^=\"oauth2/\"][data-state=ok]"]);
    let back = connected["url"].as_str().unwrap();
    assert!(
        back.starts_with(&format!("{}/accounts?status=ok&binding=oauth2", daemon.url)),
        "back on the accounts page: {back}"
    );
    assert_eq!(count_of(&connected, "#connected"), 1, "{}", connected["text"]);
    assert_eq!(count_of(&connected, "tr.binding[data-name^=\"oauth2/\"][data-state=ok]"), 1, "{}", connected["text"]);
    assert_no_page_problems(&connected, "OAuth round-trip");
    let oauth_binding =
        binding_names(&cli).into_iter().find(|name| name.starts_with("oauth2/")).expect("an OAuth2 binding");
    assert!(oauth_binding.contains("github:aileron-tests:oauth"), "{oauth_binding}");
    let run =
        cli.ok(&["action", "run", "lookup-account", "--arg", &format!("url={echo_url}"), "--arg", "credential=oauth2"]);
    assert_eq!(serde_json::from_str::<Value>(&run).unwrap()["output"]["status"], 200, "the account works: {run}");
    let html = connected["html"].as_str().unwrap();
    for token in provider.state.access_tokens_issued() {
        assert!(!html.contains(&token), "no access token in the page");
    }
    let shots = screenshot_dir(&cli);
    console.screenshot(&shots.join("accounts.png"));
    let oauth_selector = format!("tr.binding[data-name=\"{oauth_binding}\"]");
    let revoked = console.click(&format!("{oauth_selector} button.revoke"), &[]);
    assert_eq!(
        revoked["dialogs"],
        json!([format!("Revoke {oauth_binding} and delete its credential from the vault?")])
    );
    assert_eq!(revoked["status"], "done", "{}", revoked["text"]);
    assert_live(&console.wait_gone(&oauth_selector, &[]), "the revoked binding disappears");
    assert_eq!(binding_names(&cli), vec![keyed_binding.to_string()], "revoked");

    // 6. Agents: sessions appear live with their runs; End ends one and kills its token.
    console.goto("/agents", None, &[]);
    let (claude, claude_token) = daemon.start_session("claude", "namespaces");
    assert_live(&console.wait_text(&format!("#session-{claude}"), "claude", &[]), "a new session");
    let (codex, codex_token) = daemon.start_session("codex", "unconfined");
    for probe in ["agent=1", "agent=2"] {
        let (status, ran) = daemon.as_token(
            &codex_token,
            "POST",
            "/v1/actions/check-status/run",
            Some(json!({ "args": { "url": status_url(probe) } })),
        );
        assert_eq!(status, 200, "{ran}");
    }
    let row = format!("#session-{codex}");
    let counted = console.wait_text(&row, "2 runs", &[&row]);
    assert_live(&counted, "the session's runs");
    let shown = text_of(&counted, &row);
    assert!(shown.contains("codex") && shown.contains("unconfined") && shown.contains("live"), "{shown}");
    assert_no_page_problems(&counted, "agents");

    // 7. Approvals: who asked, what it does, what it may touch; hostile text stays text.
    console.goto("/approvals", None, &[]);
    let request = |url: &str| {
        let (status, pending) = daemon.as_token(
            &claude_token,
            "POST",
            "/v1/actions/post-status/run",
            Some(json!({ "args": { "url": url } })),
        );
        assert_eq!(status, 202, "a gated run waits: {pending}");
        pending["approval_id"].as_str().unwrap().to_string()
    };
    let hostile = request(HOSTILE_URL);
    let card = format!("#card-{hostile}");
    let live = console.wait_text(&card, "post-status", &[&card]);
    assert_live(&live, "a new card");
    let shown = text_of(&live, &card);
    for expected in [
        &format!("asked by claude in session {claude} (contained by launch)"),
        "Posts an update to the team's status page",
        "github://aileron-tests/http_get@1.0.0",
        "unsigned",
        &format!("connect to 127.0.0.1 (this computer) on port {upstream_port}"),
        "https://status.example/<b>x</b>\\u{202e}gpj.exe",
    ] {
        assert!(shown.contains(expected), "the card shows `{expected}`: {shown}");
    }
    let html = live["html"].as_str().unwrap();
    assert!(html.contains("https://status.example/&lt;b&gt;x&lt;/b&gt;\\u{202e}gpj.exe"), "escaped in the HTML");
    assert!(!html.contains("<b>x</b>") && !html.contains('\u{202e}'), "neither markup nor the override reach the page");
    let pending = request(&status_url("update=deploy-finished"));
    console.wait_for(&format!("#card-{pending}"));
    console.fill(&format!("#reason-{hostile}"), "not a status page");
    console.click(&format!("{card} button.deny"), &[]);
    let line = format!("#resolved-{hostile}");
    let decided = console.wait_text(&line, "decided by", &[&line]);
    assert_live(&decided, "the decision");
    let resolved = text_of(&decided, &line);
    assert!(resolved.contains("post-status") && resolved.contains("denied (not a status page)"), "{resolved}");
    assert_eq!(json_of(&cli, &["approval", "status", &hostile, "--json"])["status"], "denied");
    assert_no_page_problems(&decided, "approvals");

    // 8. Security rules.
    let cookie = console.0.send(json!({ "cmd": "cookie" }));
    let (cookie, csrf) =
        (format!("aileron_web={}", cookie["value"].as_str().unwrap()), cookie["csrf"].as_str().unwrap().to_string());
    let own_origin = daemon.url.clone();
    let disable = || Some(json!({ "enabled": false }));
    let patch = "/v1/actions/check-status";
    let foreign = daemon.send(
        "PATCH",
        patch,
        &[("cookie", &cookie), ("x-csrf-token", &csrf), ("origin", "http://evil.example")],
        disable(),
    );
    assert_eq!(foreign.0, 403, "a foreign Origin is refused even with the cookie and the secret: {}", foreign.1);
    let no_csrf = daemon.send("PATCH", patch, &[("cookie", &cookie), ("origin", &own_origin)], disable());
    assert_eq!(no_csrf.0, 403, "the cookie alone changes nothing: {}", no_csrf.1);
    let wrong_csrf = daemon.send(
        "PATCH",
        patch,
        &[("cookie", &cookie), ("x-csrf-token", &"0".repeat(64)), ("origin", &own_origin)],
        disable(),
    );
    assert_eq!(wrong_csrf.0, 403, "{}", wrong_csrf.1);
    assert!(enabled(&cli, "check-status"), "no forged request disabled it");
    // The same request with the tab's own headers works: the refusals above were the headers'.
    let genuine = daemon.send(
        "PATCH",
        patch,
        &[("cookie", &cookie), ("x-csrf-token", &csrf), ("origin", &own_origin)],
        Some(json!({ "enabled": true })),
    );
    assert_eq!(genuine.0, 200, "{}", genuine.1);

    let data =
        [claude.as_str(), codex.as_str(), "check-status", "post-status", keyed_binding, hostile.as_str(), KEYED, OAUTH];
    for page in PAGES {
        let url = format!("{}/{page}", daemon.url);
        let stranger = console.0.send(json!({ "cmd": "fresh", "url": url }));
        assert_eq!(stranger["status"], 200, "{page}");
        assert!(stranger["text"].as_str().unwrap().contains("Not signed in"), "{page}: {}", stranger["text"]);
        assert_eq!(
            (&stranger["buttons"], &stranger["cookies"]),
            (&json!(0), &json!([])),
            "{page}: no control, no session"
        );
        assert_eq!(stranger["header_background"], HEADER_BACKGROUND, "{page}: styled");
        assert_no_page_problems(&stranger, page);
        let agent =
            daemon.send("GET", &format!("/{page}"), &[("authorization", &format!("Bearer {claude_token}"))], None);
        assert_eq!(agent.0, 200, "{page}");
        assert!(
            agent.1.contains("Not signed in") && !agent.1.contains("data-path"),
            "{page} with a session token: {}",
            agent.1
        );
        for html in [stranger["html"].as_str().unwrap(), agent.1.as_str()] {
            for secret in data {
                assert!(!html.contains(secret), "{page} shows no `{secret}` without the cookie");
            }
        }
    }
    assert_eq!(daemon.as_token(&claude_token, "GET", "/v1/audit", None).0, 403, "the audit log is the console's");
    assert_eq!(daemon.as_token(&claude_token, "PATCH", patch, disable()).0, 403, "an agent cannot switch actions");
    assert!(enabled(&cli, "check-status"));

    // 6, continued. End the codex session from the page: its token dies at once.
    console.goto("/agents", None, &[]);
    let ended = console.click(&format!("{row} button.end"), &[]);
    assert_eq!(ended["dialogs"], json!(["End the codex session? Its token stops working at once."]));
    assert_eq!(ended["status"], "done", "{}", ended["text"]);
    assert_eq!(daemon.admin("GET", &format!("/v1/sessions/{codex}"), None).1["status"], "ended");
    let (status, _) = daemon.as_token(
        &codex_token,
        "POST",
        "/v1/actions/check-status/run",
        Some(json!({ "args": { "url": status_url("agent=3") } })),
    );
    assert_eq!(status, 401, "the ended session's token is dead");
    assert_live(&console.wait_for(&format!("{row}[data-status=ended]")), "the session moves to the past ones");

    // 9. One screenshot per page with what the scenario left (the accounts page's was taken
    //    with both accounts bound).
    for page in PAGES.into_iter().filter(|page| *page != "accounts") {
        let shown = console.goto(&format!("/{page}"), (page == "activity").then_some("#chain[data-checked]"), &[]);
        assert_no_page_problems(&shown, page);
        // Open the newest run and the first action, as a reader would.
        let open = match page {
            "activity" => Some("#records details.record[data-event=\"action.executed\"] > summary".to_string()),
            "actions" => Some(format!("{action} > summary")),
            _ => None,
        };
        if let Some(summary) = open {
            console.click(&summary, &[]);
        }
        console.screenshot(&shots.join(format!("{page}.png")));
    }
    assert_eq!(console.0.send(json!({ "cmd": "quit" }))["closed"], true);
}
