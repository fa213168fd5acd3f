//! The original project's published actions, brought along unchanged (issue 46). The fixtures
//! are written for this test in the original's format — the layout `actions/<name>/action.md`,
//! its generator's GraphQL type names and camelCase inputs, nested input objects, the placeholder
//! hash `sha256:bound-at-release`, a credentialed connector whose FQN has upper-case letters —
//! and run through the real CLI, the real `aileron-mcp` and a real WASM GraphQL connector
//! (`connectors/test-guests/src/bin/graphql.rs`) against a loopback GraphQL fake that checks the
//! bound key.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::cli::Cli;
use crate::mcp::{Session, StdioSession};
use crate::support::guest_wasm;

/// The original's spelling; the canonical form is lowercase (ARCHITECTURE.md, FQNs).
const CONNECTOR: &str = "github://Aileron-Tests/GraphQL-Like";
const CANONICAL: &str = "github://aileron-tests/graphql-like";
const PLACEHOLDER: &str = "sha256:bound-at-release";
const KEY: &str = "lin_api_OriginalFormatKey000000000000000000";

/// What the fake saw: `(Authorization, body)` per request.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A GraphQL endpoint: refuses a request without the key (401), else answers
/// `{data: {operation, variables}}` so the test sees exactly what the connector sent.
async fn graphql_fake(seen: Seen) -> SocketAddr {
    let app = axum::Router::new().route(
        "/graphql",
        axum::routing::post(move |headers: http::HeaderMap, axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
                seen.lock().unwrap().push((authorization.clone(), body.clone()));
                if authorization.as_deref() != Some(KEY) {
                    return (http::StatusCode::UNAUTHORIZED, axum::Json(json!({"errors": [{"message": "no key"}]})));
                }
                let data = json!({ "operation": body["query"], "variables": body["variables"] });
                (http::StatusCode::OK, axum::Json(json!({ "data": data })))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// One published action file, as the original's generator writes it (inputs after `[approval]`,
/// no body text), plus the step's `endpoint` (a real connector has its API's URL built in).
fn action_file(
    name: &str,
    op: &str,
    capability: &str,
    approval: bool,
    inputs: &[(&str, &str, bool)],
    endpoint: &str,
) -> String {
    let mut text = format!(
        "+++\nname = \"{name}\"\nversion = \"0.0.0-dev\"\nsource = \"{CONNECTOR}/actions/{name}@0.0.0-dev\"\n\n\
         [[requires.connectors]]\nname = \"{CONNECTOR}\"\nversion = \"0.0.0-dev\"\nhash = \"{PLACEHOLDER}\"\n\
         capabilities = [\"{capability}\"]\n\n[match]\nintent = \"The {name} operation.\"\n\n[[execute]]\nid = \"{op}\"\n\
         connector = \"{CONNECTOR}\"\nop = \"{op}\"\nidempotent = {}\n[execute.inputs]\nendpoint = \"{endpoint}\"\n",
        !approval
    );
    if approval {
        text.push_str("\n[approval]\nrequired = true\n");
    }
    for (input, kind, required) in inputs {
        text.push_str(&format!(
            "\n[[inputs]]\nname = \"{input}\"\ntype = \"{kind}\"\ndescription = \"The {input}.\"\nrequired = {required}\n"
        ));
    }
    text.push_str("+++\n");
    text
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_original_projects_action_files_install_with_pin_and_run_through_mcp() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen: Seen = Arc::default();
    let fake = runtime.block_on(graphql_fake(seen.clone()));
    let endpoint = format!("http://{fake}/graphql");
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);

    // The connector, under the original's spelling; installing says why it takes a moment (F6).
    let package = cli.scratch().join("graphql-like");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("connector.wasm"), guest_wasm("graphql")).unwrap();
    let manifest = format!(
        "[connector]\nname = \"{CONNECTOR}\"\nversion = \"0.0.0-dev\"\n\n[capabilities.network]\nhosts = [\"{fake}\"]\n\n\
         [capabilities.credential]\nkind = \"api_key\"\nscope = \"your issues\"\nheader = \"Authorization\"\nformat = \"{{key}}\"\n"
    );
    std::fs::write(package.join("manifest.toml"), manifest).unwrap();
    let reference = format!("{CONNECTOR}@0.0.0-dev");
    let install = cli.install_from(&package, &reference);
    assert!(install.status.success(), "{}", stderr(&install));
    assert!(stderr(&install).contains("compiling the connector to native code"), "{}", stderr(&install));
    let hash = String::from_utf8_lossy(&install.stdout).trim().to_string();

    // D1: a binding for the upper-case FQN (the vault refused its path before).
    let init = cli.run_with(&["vault", "init"], &[("AILERON_VAULT_PASSPHRASE", "original actions passphrase")], None);
    assert!(init.status.success(), "{}", stderr(&init));
    let bound =
        cli.run_with(&["binding", "setup", CONNECTOR, "--from-env", "LINEAR_KEY"], &[("LINEAR_KEY", KEY)], None);
    assert!(bound.status.success(), "{}", stderr(&bound));
    let bindings: Value = serde_json::from_slice(&cli.run(&["binding", "list", "--json"]).stdout).unwrap();
    assert_eq!(bindings["items"][0]["name"], "api_key/github:aileron-tests:graphql-like/default", "{bindings}");
    assert_eq!(bindings["items"][0]["connector"], CANONICAL, "{bindings}");

    // The published tree (F1), with the generator's types (F5) and one F4 capability name.
    let tree = cli.scratch().join("actions");
    let files = [
        (
            "issues",
            action_file(
                "issues",
                "issues",
                "issues",
                false,
                &[
                    ("first", "Int", false),
                    ("filter", "IssueFilter", false),
                    ("orderBy", "PaginationOrderBy", false),
                    ("includeArchived", "Boolean", false),
                    ("createdAt", "DateTime", false),
                    ("metadata", "JSONObject", false),
                ],
                &endpoint,
            ),
        ),
        (
            "comment-create",
            action_file(
                "comment-create",
                "comment_create",
                "comment_create",
                true,
                &[("body", "String", true), ("issueId", "String", true)],
                &endpoint,
            ),
        ),
        ("viewer", action_file("viewer", "viewer", "get_viewer", false, &[], &endpoint)),
    ];
    for (name, text) in &files {
        std::fs::create_dir_all(tree.join(name)).unwrap();
        std::fs::write(tree.join(name).join("action.md"), text).unwrap();
    }
    let tree_arg = tree.to_str().unwrap();

    // F2: without --pin the placeholder is an error that says how to pin; nothing is added.
    let unpinned = cli.run(&["action", "add", tree_arg]);
    assert!(!unpinned.status.success());
    assert!(stderr(&unpinned).contains(PLACEHOLDER) && stderr(&unpinned).contains("--pin"), "{}", stderr(&unpinned));
    // --pin asks; with no terminal and no --yes it refuses, still adding nothing.
    let unasked = cli.run(&["action", "add", tree_arg, "--pin"]);
    assert!(!unasked.status.success());
    assert!(stderr(&unasked).contains("no terminal to ask on"), "{}", stderr(&unasked));
    let listed: Value = serde_json::from_str(&cli.ok(&["action", "list", "--json"])).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 0, "{listed}");

    // --pin --yes: one consent for the connector (its hash shown), the credential offered (F3).
    let pinned = cli.run(&["action", "add", tree_arg, "--pin", "--yes"]);
    let said = stderr(&pinned);
    assert!(pinned.status.success(), "{said}");
    assert_eq!(said.matches("pin to the installed connector").count(), 1, "one consent per connector: {said}");
    assert!(said.contains(&format!("{hash} (installed, unsigned)")), "{said}");
    assert_eq!(said.matches("Add \"api_key\"").count(), 1, "{said}");
    assert!(said.contains("calls the op `viewer`") && said.contains("capability_denied"), "F4 kept: {said}");
    assert!(!said.contains("warning: action issues"), "the credential was declared: {said}");
    let listed: Value = serde_json::from_str(&cli.ok(&["action", "list", "--json"])).unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 3, "{listed}");
    let shown: Value = serde_json::from_str(&cli.ok(&["action", "show", "issues", "--json"])).unwrap();
    assert_eq!(shown["connectors"][0]["name"], CANONICAL);
    assert_eq!(shown["connectors"][0]["hash"], hash.as_str(), "pinned to the installed connector");
    assert_eq!(shown["connectors"][0]["capabilities"], json!(["issues", "api_key"]));
    // The consent is on record: what the file said, and what it was given.
    let installed: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.installed"])).unwrap();
    let record =
        installed["items"].as_array().unwrap().iter().find(|r| r["payload"]["aileron.action.name"] == "issues");
    let pin = &record.expect("issues was installed on record")["payload"]["aileron.action.connectors"][0];
    assert_eq!((pin["pinned_from"].as_str(), pin["granted"].as_str()), (Some(PLACEHOLDER), Some("api_key")), "{pin}");

    // The tools, through aileron-mcp: the generator's types as JSON Schema.
    let mut session = StdioSession::spawn(&[("AILERON_HOME", cli.home.to_str().unwrap())]);
    session.initialize("2025-06-18");
    let tools = session.tools();
    let issues = tools.iter().find(|tool| tool["name"] == "issues").expect("the issues tool");
    let properties = &issues["inputSchema"]["properties"];
    assert!(properties["filter"].get("type").is_none(), "any value, passed as given: {issues}");
    assert!(properties["filter"]["description"].as_str().unwrap().contains("GraphQL `IssueFilter`"), "{issues}");
    assert_eq!(
        (properties["first"]["type"].as_str(), properties["createdAt"]["format"].as_str()),
        (Some("integer"), Some("date-time"))
    );
    assert_eq!(properties["metadata"]["type"], "object");

    // A run with nested input objects: they reach the API as given, with the bound key.
    let filter = json!({"and": [{"title": {"containsIgnoreCase": "crash"}}, {"priority": {"lte": 2}}]});
    let result =
        session.call("issues", json!({"first": 5, "filter": filter, "orderBy": "updatedAt", "includeArchived": false}));
    assert_ne!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    let (authorization, body) = seen.lock().unwrap().last().cloned().expect("the API was called");
    assert_eq!(authorization.as_deref(), Some(KEY), "the key from the vault, raw (format = \"{{key}}\")");
    assert_eq!(body["query"], "issues");
    assert_eq!(
        body["variables"],
        json!({"first": 5, "filter": filter, "orderBy": "updatedAt", "includeArchived": false})
    );
    assert!(text.contains("containsIgnoreCase") && !text.contains(KEY), "{text}");

    // F4: the op whose capability is named unlike it was warned about at add time, and that
    // warning is true: its run is denied before anything is sent.
    let before = seen.lock().unwrap().len();
    let viewer = session.call("viewer", json!({}));
    assert_eq!(viewer["isError"], true, "{viewer}");
    assert!(viewer.to_string().contains("capability_denied"), "{viewer}");
    assert_eq!(seen.lock().unwrap().len(), before, "nothing was sent");

    // A gated mutation: pending, approved by the user, then it ran once.
    let before = seen.lock().unwrap().len();
    let pending = session.call("comment_create", json!({"body": "Fixed in **main**.", "issueId": "ISS-1"}));
    let handle: Value = serde_json::from_str(pending["content"][1]["text"].as_str().unwrap()).unwrap();
    let id = handle["approval_id"].as_str().unwrap().to_string();
    assert_eq!(seen.lock().unwrap().len(), before, "nothing ran before the decision");
    cli.ok(&["approval", "approve", &id]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let done = loop {
        let status = session.call("check_action_status", json!({"approval_id": id}));
        if status["content"][0]["text"].as_str().unwrap_or_default().starts_with("completed") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "never completed: {status}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_ne!(done["isError"], true, "{done}");
    let (_, body) = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (body["query"].as_str(), body["variables"]["issueId"].as_str()),
        (Some("comment_create"), Some("ISS-1"))
    );
    assert_eq!(seen.lock().unwrap().len(), before + 1, "ran once");

    // F3 without --pin: a file whose capabilities lack the connector's credential is added with
    // the exact fix, and the warning is true: its run is denied.
    let plain = files[0].1.replace(PLACEHOLDER, &hash).replace("name = \"issues\"", "name = \"issues-plain\"");
    let plain_path = cli.scratch().join("issues-plain.md");
    std::fs::write(&plain_path, plain).unwrap();
    let added = cli.run(&["action", "add", plain_path.to_str().unwrap()]);
    assert!(added.status.success(), "{}", stderr(&added));
    assert!(
        stderr(&added).contains("injects an api_key credential") && stderr(&added).contains("add \"api_key\""),
        "{}",
        stderr(&added)
    );
    let denied = session.call("issues_plain", json!({"first": 1}));
    assert_eq!(denied["isError"], true, "{denied}");
    assert!(denied.to_string().contains("capability_denied"), "{denied}");
}
