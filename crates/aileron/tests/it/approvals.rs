//! The approval gate through the HTTP API: 202 + review URL, decide once, results, denial,
//! concurrent decides, session tokens that cannot decide, the cookie + CSRF web session, and an
//! approval bound to the exact action bytes.

use std::sync::Arc;
use std::time::Duration;

use crate::fake_github::FakeGithub;
use aileron::platform::principal::SESSION_SCOPES;
use http::{Request, StatusCode};
use serde_json::{Value, json};

use crate::support::{ActionSpec, Harness, PORT, TOKEN, guest_wasm, manifest};

/// A gated action that GETs `url` on the fake upstream.
pub async fn gated(harness: &Harness, upstream: &FakeGithub) -> String {
    let hash =
        harness.install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], "")).await;
    let spec = ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    };
    assert_eq!(harness.add_action("fetch.md", &spec.render()).await.status, StatusCode::CREATED);
    hash
}

/// Installs `http_get` and a gated action `previewed` whose preview GETs the call's `url`,
/// rendered by `render` (the `[approval.preview]` lines after `op` and `args`).
async fn previewed(harness: &Harness, upstream: &FakeGithub, render: &str) {
    let hash =
        harness.install("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], "")).await;
    let spec = ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("previewed", "http_get", &hash, "get")
    };
    let text = spec.render().replace(
        "[approval]\nrequired = true\n",
        &format!("[approval]\nrequired = true\n[approval.preview]\nop = \"get\"\nargs = {{ url = \"${{args.url}}\" }}\n{render}"),
    );
    assert_eq!(harness.add_action("previewed.md", &text).await.status, StatusCode::CREATED, "{text}");
}

pub async fn wait_for_status(harness: &Harness, id: &str, wanted: &[&str]) -> Value {
    for _ in 0..500 {
        let view = harness.request("GET", &format!("/v1/action-approvals/{id}/result"), None).await.body;
        if wanted.contains(&view["status"].as_str().unwrap_or_default()) {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("approval {id} never reached {wanted:?}");
}

async fn events_of(harness: &Harness, event_type: &str) -> Vec<Value> {
    harness.audit().await.into_iter().filter(|r| r["event_type"] == event_type).collect()
}

#[tokio::test]
async fn a_gated_action_waits_for_approval_then_runs_once() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let url = format!("{}/status/200", upstream.base_url());

    let pending = harness.run("fetch", json!({ "url": url })).await;
    assert_eq!(pending.status, StatusCode::ACCEPTED, "{}", pending.body);
    assert_eq!(pending.body["status"], "pending_approval");
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("act-"));
    let review_url = pending.body["review_url"].as_str().unwrap();
    assert_eq!(review_url, format!("http://127.0.0.1:{PORT}/approvals?focus={id}"));
    let message = pending.body["message"].as_str().unwrap();
    for needle in ["fetch", review_url, &format!("aileron open approval {id}")] {
        assert!(message.contains(needle), "the message names {needle}: {message}");
    }
    assert_eq!(upstream.recorder.count(), 0, "nothing executes before approval");
    let requested = events_of(&harness, "approval.requested").await;
    assert_eq!(requested.len(), 1);
    assert_eq!(requested[0]["payload"]["aileron.approval.id"], id.as_str());
    assert_eq!(
        requested[0]["audit_id"], pending.body["audit_id"],
        "the 202 carries the id of its approval.requested record"
    );

    let listing = harness.request("GET", "/v1/action-approvals", None).await;
    assert_eq!(listing.body["items"][0]["id"], id.as_str());
    assert_eq!(listing.body["items"][0]["args"]["url"], url.as_str());
    assert_eq!(
        harness.request("GET", &format!("/v1/action-approvals/{id}/result"), None).await.body["status"],
        "pending_approval"
    );

    let decided =
        harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({"approved": true}))).await;
    assert_eq!(decided.status, StatusCode::NO_CONTENT, "{}", decided.body);
    let approved = events_of(&harness, "approval.approved").await;
    assert_eq!(approved.len(), 1, "approval.approved is on disk before the 204");
    assert!(approved[0]["payload"]["aileron.approval.wait_ms"].is_u64());

    let view = wait_for_status(&harness, &id, &["completed", "failed"]).await;
    assert_eq!(view["status"], "completed", "{view}");
    assert_eq!(view["result"]["output"]["status"], 200);
    let executed = harness.audit_for(view["audit_id"].as_str().unwrap()).await;
    assert_eq!(executed[0]["event_type"], "action.executed");
    assert_eq!(executed[0]["payload"]["aileron.approval.id"], id.as_str());
    assert_eq!(upstream.recorder.count(), 1);

    let again =
        harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({"approved": true}))).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "a decision is accepted once");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(upstream.recorder.count(), 1, "and the action ran exactly once");
}

#[tokio::test]
async fn a_denied_action_never_runs_and_the_reason_is_audited() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let pending = harness.run("fetch", json!({ "url": format!("{}/status/200", upstream.base_url()) })).await;
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let body = json!({"approved": false, "reason": "  wrong repository  "});
    let denied = harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(body)).await;
    assert_eq!(denied.status, StatusCode::NO_CONTENT);
    let view = harness.request("GET", &format!("/v1/action-approvals/{id}/result"), None).await.body;
    assert_eq!(view, json!({"status": "denied", "reason": "wrong repository"}));
    let records = events_of(&harness, "approval.denied").await;
    assert_eq!(records[0]["payload"]["aileron.approval.reason"], "wrong repository");
    assert_eq!(records[0]["payload"]["aileron.approval.decision"], "denied");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(upstream.recorder.count(), 0);
    assert_eq!(harness.request("GET", "/v1/action-approvals", None).await.body["items"], json!([]));
}

#[tokio::test]
async fn concurrent_decides_execute_exactly_once() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Arc::new(Harness::new());
    gated(&harness, &upstream).await;
    for round in 0..5 {
        let pending = harness.run("fetch", json!({ "url": format!("{}/status/200", upstream.base_url()) })).await;
        let id = pending.body["approval_id"].as_str().unwrap().to_string();
        let mut tasks = Vec::new();
        for i in 0..12 {
            let (harness, id) = (harness.clone(), id.clone());
            tasks.push(tokio::spawn(async move {
                let body = json!({"approved": i % 3 != 0});
                harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(body)).await.status
            }));
        }
        let mut accepted = 0;
        for task in tasks {
            match task.await.unwrap() {
                StatusCode::NO_CONTENT => accepted += 1,
                StatusCode::NOT_FOUND => {}
                other => panic!("unexpected status {other}"),
            }
        }
        assert_eq!(accepted, 1, "round {round}: exactly one decision is accepted");
        wait_for_status(&harness, &id, &["completed", "denied"]).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let approvals = events_of(&harness, "approval.approved").await.len();
    assert_eq!(upstream.recorder.count(), approvals, "every approval ran once, every denial never");
}

#[tokio::test]
async fn session_tokens_can_run_and_poll_but_never_decide() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let session_token = harness.state.services.tokens.mint_session("sess-1", SESSION_SCOPES.to_vec(), true);
    let as_agent = |method: &str, path: String| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {}", session_token.expose()))
    };
    let body = json!({"args": {"url": format!("{}/status/200", upstream.base_url())}});
    let pending = harness.send(as_agent("POST", "/v1/actions/fetch/run".into()), Some(body)).await;
    assert_eq!(pending.status, StatusCode::ACCEPTED, "{}", pending.body);
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let requested = events_of(&harness, "approval.requested").await;
    assert_eq!(requested[0]["payload"]["aileron.session.id"], "sess-1");
    assert_eq!(requested[0]["actor"]["type"], "agent");

    for decision in [json!({"approved": true}), json!({"approved": false})] {
        let attempt = harness.send(as_agent("POST", format!("/v1/action-approvals/{id}/decide")), Some(decision)).await;
        assert_eq!(attempt.status, StatusCode::FORBIDDEN, "a session token never decides");
    }
    for path in ["/v1/web/login-tickets", "/v1/connectors/install", "/v1/actions/install"] {
        let attempt = harness.send(as_agent("POST", path.to_string()), Some(json!({}))).await;
        assert!(
            matches!(
                attempt.status,
                StatusCode::FORBIDDEN | StatusCode::UNPROCESSABLE_ENTITY | StatusCode::BAD_REQUEST
            ),
            "{path}: {}",
            attempt.status
        );
        assert_ne!(attempt.status, StatusCode::CREATED);
    }
    let polled = harness.send(as_agent("GET", format!("/v1/action-approvals/{id}/result")), None).await;
    assert_eq!(polled.body["status"], "pending_approval");
    assert_eq!(upstream.recorder.count(), 0);

    // The same call again from the same session gets the same approval; an oversized or a
    // 21st different one is refused (and audited).
    let again = harness
        .send(
            as_agent("POST", "/v1/actions/fetch/run".into()),
            Some(json!({"args": {"url": format!("{}/status/200", upstream.base_url())}})),
        )
        .await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.body["approval_id"], id.as_str(), "an identical pending request returns the existing approval");
    let huge = "x".repeat(70 * 1024);
    let oversized =
        harness.send(as_agent("POST", "/v1/actions/fetch/run".into()), Some(json!({"args": {"url": huge}}))).await;
    assert_eq!(oversized.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", oversized.body);
    for i in 0..19 {
        let more = harness
            .send(
                as_agent("POST", "/v1/actions/fetch/run".into()),
                Some(json!({"args": {"url": format!("{}/status/200?n={i}", upstream.base_url())}})),
            )
            .await;
        assert_eq!(more.status, StatusCode::ACCEPTED, "{i}: {}", more.body);
    }
    let flood = harness
        .send(
            as_agent("POST", "/v1/actions/fetch/run".into()),
            Some(json!({"args": {"url": format!("{}/status/200?n=20", upstream.base_url())}})),
        )
        .await;
    assert_eq!(flood.status, StatusCode::TOO_MANY_REQUESTS, "{}", flood.body);
    assert_eq!(flood.body["error"]["code"], "too_many_pending");
    assert_eq!(harness.state.services.approvals.pending().len(), 20, "one session holds at most 20 waiting approvals");

    // Another session sees none of it: not in the list, not by id.
    let other_token = harness.state.services.tokens.mint_session("sess-2", SESSION_SCOPES.to_vec(), true);
    let as_other = |method: &str, path: String| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {}", other_token.expose()))
    };
    let listed = harness.send(as_other("GET", "/v1/action-approvals".into()), None).await;
    assert_eq!(listed.body["items"], json!([]), "another session's approvals are not listed: {}", listed.body);
    let peeked = harness.send(as_other("GET", format!("/v1/action-approvals/{id}/result")), None).await;
    assert_eq!(peeked.status, StatusCode::NOT_FOUND, "another session's approval is unknown to this token");
    let own = harness.send(as_agent("GET", "/v1/action-approvals".into()), None).await;
    assert_eq!(own.body["items"].as_array().map(Vec::len), Some(20), "{}", own.body);
    let everyone = harness.request("GET", "/v1/action-approvals", None).await;
    assert_eq!(everyone.body["items"].as_array().map(Vec::len), Some(20), "the local user sees all");

    // What the agent tried and was refused is on record, as the agent of its session.
    let refused = events_of(&harness, "approval.decide_refused").await;
    assert_eq!(refused.len(), 2, "both decide attempts are audited");
    assert_eq!(
        (refused[0]["actor"]["type"].as_str(), refused[0]["session_id"].as_str()),
        (Some("agent"), Some("sess-1"))
    );
    for (action, args, code) in
        [("no-such-action", json!({}), "not_found"), ("fetch", json!({"url": "x", "undeclared": 1}), "invalid_args")]
    {
        let attempt =
            harness.send(as_agent("POST", format!("/v1/actions/{action}/run")), Some(json!({ "args": args }))).await;
        assert!(attempt.status.is_client_error(), "{action}: {}", attempt.status);
        let rejected = events_of(&harness, "action.rejected").await;
        let record = rejected
            .iter()
            .find(|r| r["payload"]["aileron.rejection.code"] == code)
            .unwrap_or_else(|| panic!("{code} audited: {rejected:?}"));
        assert_eq!(record["payload"]["aileron.action.name"], action);
        assert_eq!(record["actor"]["type"], "agent");
        assert!(!record.to_string().contains("\"x\""), "argument values are not audited: {record}");
    }
    // A disabled action refuses, on record too.
    let disabled = harness.request("PATCH", "/v1/actions/fetch", Some(json!({ "enabled": false }))).await;
    assert!(disabled.status.is_success(), "{}", disabled.body);
    let attempt =
        harness.send(as_agent("POST", "/v1/actions/fetch/run".into()), Some(json!({ "args": { "url": "y" } }))).await;
    assert!(attempt.status.is_client_error(), "{}", attempt.status);
    let rejected = events_of(&harness, "action.rejected").await;
    let record = rejected
        .iter()
        .find(|r| r["payload"]["aileron.rejection.code"] == "disabled")
        .unwrap_or_else(|| panic!("disabled audited: {rejected:?}"));
    assert_eq!(
        (record["payload"]["aileron.action.name"].as_str(), record["actor"]["type"].as_str()),
        (Some("fetch"), Some("agent"))
    );
}

/// Extracts `aileron_web=<value>` from a Set-Cookie header.
fn cookie_of(response: &crate::support::TestResponse) -> String {
    let set_cookie = response.headers["set-cookie"].to_str().unwrap().to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    set_cookie.split(';').next().unwrap().to_string()
}

/// The tenth re-attack: an argument of `alice`, 120 line breaks and another account showed as
/// `alice` and a blank stretch on the card. Each line break is marked and the lines are counted
/// beside the argument's name.
#[tokio::test]
async fn line_breaks_in_an_argument_are_shown_and_counted_on_the_card() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let url = format!("{}/status/200{}?to=ATTACKER-IBAN", upstream.base_url(), "\n".repeat(120));
    let pending = harness.run("fetch", json!({ "url": url })).await;
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let host = format!("127.0.0.1:{PORT}");
    let ticket = harness.request("POST", "/v1/web/login-tickets", Some(json!({}))).await.body["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let login = harness
        .send(Request::builder().uri(format!("/approvals/login?ticket={ticket}")).header("host", &host), None)
        .await;
    let cookie = cookie_of(&login);
    let page = harness
        .send(
            Request::builder().uri(format!("/approvals?focus={id}")).header("host", &host).header("cookie", cookie),
            None,
        )
        .await;
    let page = page.body.as_str().unwrap().to_string();
    let row = page.split("<th>url").nth(1).expect(&page).split("</tr>").next().unwrap();
    assert!(row.starts_with("<br><small>121 lines</small></th>"), "{row}");
    assert_eq!(row.matches("<span class=\"eol\">↵</span>\n").count(), 120, "{row}");
    assert!(row.contains("ATTACKER-IBAN"), "{row}");
}

#[tokio::test]
async fn the_web_session_needs_a_one_time_ticket_csrf_and_same_origin() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let pending = harness.run("fetch", json!({ "url": format!("{}/status/200", upstream.base_url()) })).await;
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let host = format!("127.0.0.1:{PORT}");
    let origin = format!("http://127.0.0.1:{PORT}");

    // The review URL the agent got carries no ticket: no data without a session.
    let anonymous =
        harness.send(Request::builder().uri(format!("/approvals?focus={id}")).header("host", &host), None).await;
    let page = anonymous.body.as_str().unwrap_or_default().to_string();
    assert!(page.contains("Not signed in") && !page.contains("status/200") && !page.contains("card-act-"), "{page}");
    let no_cookie = harness.send(Request::builder().uri("/v1/action-approvals").header("host", &host), None).await;
    assert_eq!(no_cookie.status, StatusCode::UNAUTHORIZED);

    let ticket = harness.request("POST", "/v1/web/login-tickets", Some(json!({}))).await.body["ticket"]
        .as_str()
        .unwrap()
        .to_string();
    let login = harness
        .send(
            Request::builder().uri(format!("/approvals/login?ticket={ticket}&focus={id}")).header("host", &host),
            None,
        )
        .await;
    // A page that moves on by itself (not a redirect, which would keep a cross-site context).
    assert_eq!(login.status, StatusCode::OK);
    let page = login.body.as_str().unwrap();
    assert!(page.contains(&format!("location.replace(\"/approvals?focus={id}\")")), "{page}");
    assert!(login.headers["content-security-policy"].to_str().unwrap().contains("script-src 'nonce-"));
    let cookie = cookie_of(&login);
    // The page secret travels once, in the sign-in page, into the tab's sessionStorage.
    let csrf = page
        .split("sessionStorage.setItem(\"aileron-page-secret\", \"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    let reused = harness
        .send(Request::builder().uri(format!("/approvals/login?ticket={ticket}")).header("host", &host), None)
        .await;
    assert_eq!(reused.status, StatusCode::FORBIDDEN, "a ticket works once");

    let signed_in = harness
        .send(
            Request::builder().uri(format!("/approvals?focus={id}")).header("host", &host).header("cookie", &cookie),
            None,
        )
        .await;
    let page = signed_in.body.as_str().unwrap().to_string();
    assert!(
        page.contains(&format!("card-{id}")) && page.contains("status/200"),
        "the page shows the card and its arguments"
    );
    assert!(!page.contains(&csrf), "no later page carries the secret: a captured cookie gets pages, not the secret");
    assert!(signed_in.headers["content-security-policy"].to_str().unwrap().contains("script-src 'nonce-"));

    let decide = |csrf: Option<&str>, origin: Option<&str>, host: &str| {
        let mut builder = Request::builder()
            .method("POST")
            .uri(format!("/v1/action-approvals/{id}/decide"))
            .header("host", host)
            .header("cookie", &cookie);
        if let Some(csrf) = csrf {
            builder = builder.header("x-csrf-token", csrf);
        }
        if let Some(origin) = origin {
            builder = builder.header("origin", origin);
        }
        builder
    };
    let body = json!({"approved": true});
    // Everything a captured cookie yields (every page it can fetch) does not decide.
    let scraped: Vec<String> = page
        .split('"')
        .filter(|word| word.len() >= 32 && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .map(str::to_string)
        .collect();
    for guess in &scraped {
        assert_eq!(
            harness.send(decide(Some(guess), Some(&origin), &host), Some(json!({"approved": true}))).await.status,
            StatusCode::FORBIDDEN
        );
    }
    let cases = [
        ("no csrf", decide(None, Some(&origin), &host), StatusCode::FORBIDDEN),
        ("wrong csrf", decide(Some("nope"), Some(&origin), &host), StatusCode::FORBIDDEN),
        ("no origin", decide(Some(&csrf), None, &host), StatusCode::FORBIDDEN),
        ("foreign origin", decide(Some(&csrf), Some("http://evil.example"), &host), StatusCode::FORBIDDEN),
        ("rebinding host", decide(Some(&csrf), Some(&origin), "evil.example:80"), StatusCode::FORBIDDEN),
    ];
    for (label, builder, expected) in cases {
        assert_eq!(harness.send(builder, Some(body.clone())).await.status, expected, "{label}");
    }
    assert_eq!(upstream.recorder.count(), 0, "no forged decide got through");
    let accepted = harness.send(decide(Some(&csrf), Some(&origin), &host), Some(body)).await;
    assert_eq!(accepted.status, StatusCode::NO_CONTENT, "{}", accepted.body);
    let view = wait_for_status(&harness, &id, &["completed", "failed"]).await;
    assert_eq!(view["status"], "completed");
    let approved = events_of(&harness, "approval.approved").await;
    assert_eq!(approved[0]["actor"]["type"], "human");

    // The cookie never grants admin routes (it reads what the console shows, `/v1/audit` included).
    for path in ["/v1/status", "/v1/keyring", "/v1/secrets"] {
        let admin =
            harness.send(Request::builder().uri(path).header("host", &host).header("cookie", &cookie), None).await;
        assert_eq!(admin.status, StatusCode::FORBIDDEN, "{path}");
    }
    let console =
        harness.send(Request::builder().uri("/v1/audit").header("host", &host).header("cookie", &cookie), None).await;
    assert_eq!(console.status, StatusCode::OK, "{}", console.body);
    // Nor runs: the page decides, it does not call actions. The attempt is on record.
    let run = Request::builder()
        .method("POST")
        .uri("/v1/actions/fetch/run")
        .header("host", &host)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .header("origin", &origin);
    let refused = harness.send(run, Some(json!({ "args": { "url": "z" } }))).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let rejected = events_of(&harness, "action.rejected").await;
    let record = rejected
        .iter()
        .find(|r| r["payload"]["aileron.rejection.code"] == "forbidden")
        .unwrap_or_else(|| panic!("forbidden audited: {rejected:?}"));
    assert_eq!((record["actor"]["type"].as_str(), record["actor"]["id"].as_str()), (Some("human"), Some("web")));
}

#[tokio::test]
async fn an_approval_binds_to_the_exact_action_file() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    let hash = gated(&harness, &upstream).await;
    let pending = harness.run("fetch", json!({ "url": format!("{}/status/200", upstream.base_url()) })).await;
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    // The action file changes (same name) after the request.
    let spec = ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    };
    let edited = spec.render().replace("An action used by the test suite.", "Edited after the request.");
    assert_eq!(harness.replace_action("fetch.md", &edited).await.status, StatusCode::CREATED);
    harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({"approved": true}))).await;
    let view = wait_for_status(&harness, &id, &["completed", "failed"]).await;
    assert_eq!(view["status"], "failed", "{view}");
    assert_eq!(view["failure"]["class"], "hash_mismatch");
    assert_eq!(upstream.recorder.count(), 0, "the edited action did not run under the old approval");
}

#[tokio::test]
async fn a_failing_preview_never_blocks_the_approval() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    previewed(
        &harness,
        &upstream,
        "render = { \"Status\" = \"status\", \"Body\" = \"body\" }\nmultiline = [\"Body\"]\n",
    )
    .await;

    let ok = harness.run("previewed", json!({ "url": format!("{}/status/200", upstream.base_url()) })).await;
    assert_eq!(ok.status, StatusCode::ACCEPTED);
    let entry = &harness.request("GET", "/v1/action-approvals", None).await.body["items"][0];
    assert_eq!(entry["preview"]["fields"][0], json!({"label": "Status", "value": "200", "multiline": false}));
    assert_eq!(entry["preview"]["fields"][1]["multiline"], true);

    let denied = harness.run("previewed", json!({ "url": "http://evil.example/" })).await;
    assert_eq!(denied.status, StatusCode::ACCEPTED, "a failing preview does not block: {}", denied.body);
    let id = denied.body["approval_id"].as_str().unwrap();
    let items = harness.request("GET", "/v1/action-approvals", None).await.body["items"].clone();
    let entry = items.as_array().unwrap().iter().find(|e| e["id"] == id).unwrap().clone();
    let reason = entry["preview"]["unavailable"]["reason"].as_str().unwrap();
    assert!(reason.contains("capability_denied"), "{reason}");
    let _ = TOKEN;
}

/// The audit actor comes from the principal the token or cookie authenticates, never from a
/// request header (SPEC §0, invariant 4): an agent claiming to be a human is recorded as the
/// agent of its session (and still cannot decide), and headers naming an actor or a session are
/// ignored for the daemon token too. An unconfined session's approval says so.
#[tokio::test]
async fn no_header_chooses_the_audit_actor() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let forged = |builder: http::request::Builder| {
        builder
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("x-aileron-actor-type", "human")
            .header("x-aileron-actor-id", "cli")
            .header("x-aileron-session-id", "sess-forged")
    };
    let agent_token = harness.state.services.tokens.mint_session("sess-7", SESSION_SCOPES.to_vec(), false);
    let as_agent = |method: &str, path: String| {
        forged(Request::builder().method(method).uri(path))
            .header("authorization", format!("Bearer {}", agent_token.expose()))
    };
    let url = format!("{}/status/200", upstream.base_url());
    let pending =
        harness.send(as_agent("POST", "/v1/actions/fetch/run".into()), Some(json!({ "args": { "url": url } }))).await;
    assert_eq!(pending.status, StatusCode::ACCEPTED, "{}", pending.body);
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let decided = harness
        .send(as_agent("POST", format!("/v1/action-approvals/{id}/decide")), Some(json!({ "approved": true })))
        .await;
    assert_eq!(decided.status, StatusCode::FORBIDDEN, "claiming to be a human decides nothing");
    let requested = events_of(&harness, "approval.requested").await;
    assert_eq!(requested[0]["actor"], json!({"type": "agent", "id": "sess-7"}), "{}", requested[0]);
    assert_eq!(requested[0]["session_id"], "sess-7");
    let refused = events_of(&harness, "approval.decide_refused").await;
    assert_eq!(refused[0]["actor"], json!({"type": "agent", "id": "sess-7"}), "{}", refused[0]);
    // The session was not contained: the pending approval says so wherever it is listed.
    let listed = harness.request("GET", "/v1/action-approvals", None).await;
    assert_eq!(listed.body["items"][0]["unconfined"], true, "{}", listed.body);

    // The daemon token's holder is the local user, whatever the headers claim.
    let admin = forged(Request::builder().method("POST").uri(format!("/v1/action-approvals/{id}/decide")))
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("x-aileron-actor-type", "agent");
    assert_eq!(
        harness.send(admin, Some(json!({ "approved": false, "reason": "no" }))).await.status,
        StatusCode::NO_CONTENT
    );
    let denied = events_of(&harness, "approval.denied").await;
    assert_eq!(denied[0]["actor"], json!({"type": "human", "id": "local-user"}), "{}", denied[0]);
    assert_eq!(denied[0]["session_id"], "sess-7", "the approval's own session, never a claimed one: {}", denied[0]);
    assert!(
        !harness.audit().await.iter().any(|r| r.to_string().contains("sess-forged")),
        "no record took the claimed session"
    );
}

/// The per-session cap and the identical-request dedupe hold for calls that arrive together,
/// while each waits for a slow preview (they were checked before the preview and the entry
/// registered after it, so concurrent calls all slipped past both).
#[tokio::test]
async fn concurrent_gated_calls_with_a_slow_preview_respect_the_dedupe_and_the_cap() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    previewed(&harness, &upstream, "render = { \"Status\" = \"status\" }\n").await;
    let session_token = harness.state.services.tokens.mint_session("sess-1", SESSION_SCOPES.to_vec(), true);
    let call = |url: String| {
        let request = Request::builder()
            .method("POST")
            .uri("/v1/actions/previewed/run")
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {}", session_token.expose()));
        harness.send(request, Some(json!({ "args": { "url": url } })))
    };

    let slow = format!("{}/slow/300", upstream.base_url());
    let identical = futures_util::future::join_all((0..10).map(|_| call(slow.clone()))).await;
    let ids: std::collections::BTreeSet<String> = identical
        .iter()
        .map(|answer| {
            assert_eq!(answer.status, StatusCode::ACCEPTED, "{}", answer.body);
            answer.body["approval_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(ids.len(), 1, "ten identical calls made one approval: {ids:?}");
    assert_eq!(harness.state.services.approvals.pending().len(), 1);

    let distinct = futures_util::future::join_all((0..30).map(|n| call(format!("{slow}?n={n}")))).await;
    let accepted = distinct.iter().filter(|answer| answer.status == StatusCode::ACCEPTED).count();
    let capped = distinct.iter().filter(|answer| answer.status == StatusCode::TOO_MANY_REQUESTS).count();
    assert_eq!((accepted, capped), (19, 11), "{:?}", distinct.iter().map(|a| a.status).collect::<Vec<_>>());
    assert_eq!(harness.state.services.approvals.pending().len(), 20, "one session holds at most 20 waiting approvals");
    assert_eq!(events_of(&harness, "approval.requested").await.len(), 20);
}

/// SPEC §8's withdrawal: when a session ends, each approval it asked for that nobody decided ends
/// `cancelled` — three here, each audited once with the reason — while one it asked for and the
/// user denied keeps its decision and another session's stays pending. A session token withdraws
/// its own pending approval (never another session's), and a withdrawn one cannot be approved.
#[tokio::test]
async fn a_session_ending_withdraws_what_it_asked_for_and_nobody_decided() {
    let upstream = FakeGithub::start().await.unwrap();
    let harness = Harness::new();
    gated(&harness, &upstream).await;
    let start = |agent: &'static str| {
        let harness = &harness;
        async move {
            let started = harness.request("POST", "/v1/sessions", Some(json!({"agent": agent}))).await;
            assert_eq!(started.status, StatusCode::CREATED, "{}", started.body);
            (
                started.body["session_id"].as_str().unwrap().to_string(),
                started.body["token"].as_str().unwrap().to_string(),
            )
        }
    };
    let (session_a, token_a) = start("claude").await;
    let (_session_b, token_b) = start("codex").await;
    let as_token = |token: &str, method: &str, path: String| {
        Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {token}"))
    };
    let ask = |token: String, n: usize| {
        let (harness, upstream) = (&harness, &upstream);
        async move {
            let body = json!({"args": {"url": format!("{}/status/200?n={n}", upstream.base_url())}});
            let pending = harness.send(as_token(&token, "POST", "/v1/actions/fetch/run".into()), Some(body)).await;
            assert_eq!(pending.status, StatusCode::ACCEPTED, "{}", pending.body);
            pending.body["approval_id"].as_str().unwrap().to_string()
        }
    };
    let mut of_a = Vec::new();
    for n in 0..4 {
        of_a.push(ask(token_a.clone(), n).await);
    }
    let of_b = ask(token_b.clone(), 9).await;
    let denied = harness
        .request("POST", &format!("/v1/action-approvals/{}/decide", of_a[3]), Some(json!({"approved": false})))
        .await;
    assert_eq!(denied.status, StatusCode::NO_CONTENT);
    // B's token cannot withdraw A's approval: it is as unknown to it as a made-up id.
    let foreign = harness
        .send(as_token(&token_b, "POST", format!("/v1/action-approvals/{}/cancel", of_a[0])), Some(json!({})))
        .await;
    assert_eq!(foreign.status, StatusCode::NOT_FOUND, "{}", foreign.body);

    let ended = harness.request("POST", &format!("/v1/sessions/{session_a}/end"), Some(json!({"exit_code": 0}))).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.body);
    for id in &of_a[..3] {
        let view = harness.request("GET", &format!("/v1/action-approvals/{id}/result"), None).await.body;
        assert_eq!(view, json!({"status": "cancelled", "reason": "the session that asked ended"}), "{id}");
        let approve = harness
            .request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({"approved": true})))
            .await;
        assert_eq!(approve.status, StatusCode::NOT_FOUND, "a withdrawn approval cannot be approved");
        assert!(
            approve.body["error"]["message"].as_str().unwrap().contains("was withdrawn (session)"),
            "{}",
            approve.body
        );
    }
    let view = harness.request("GET", &format!("/v1/action-approvals/{}/result", of_a[3]), None).await.body;
    assert_eq!(view["status"], "denied", "a decision stands");
    let cancelled = events_of(&harness, "approval.cancelled").await;
    let mut ids: Vec<&str> = cancelled.iter().map(|r| r["payload"]["aileron.approval.id"].as_str().unwrap()).collect();
    ids.sort();
    let mut expected: Vec<&str> = of_a[..3].iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(ids, expected, "each withdrawn once");
    assert!(cancelled.iter().all(|r| r["session_id"] == session_a.as_str()), "{cancelled:?}");
    assert_eq!(
        harness.request("GET", &format!("/v1/action-approvals/{of_b}/result"), None).await.body["status"],
        "pending_approval"
    );

    // A reason past the limit is refused as a decision's is, and the request still waits.
    let long = "x".repeat(aileron_core::approval::MAX_REASON_CHARS + 1);
    let refused = harness
        .send(as_token(&token_b, "POST", format!("/v1/action-approvals/{of_b}/cancel")), Some(json!({"reason": long})))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "invalid_reason", "{}", refused.body);

    // B withdraws its own: its agent is the one who withdrew, and nothing ran.
    let withdrawn = harness
        .send(
            as_token(&token_b, "POST", format!("/v1/action-approvals/{of_b}/cancel")),
            Some(json!({"reason": "plan changed"})),
        )
        .await;
    assert_eq!(withdrawn.status, StatusCode::NO_CONTENT, "{}", withdrawn.body);
    let record = events_of(&harness, "approval.cancelled")
        .await
        .into_iter()
        .find(|r| r["payload"]["aileron.approval.id"] == of_b.as_str())
        .unwrap();
    assert_eq!(
        (record["actor"]["type"].as_str(), record["payload"]["aileron.approval.reason"].as_str()),
        (Some("agent"), Some("plan changed"))
    );
    let twice =
        harness.send(as_token(&token_b, "POST", format!("/v1/action-approvals/{of_b}/cancel")), Some(json!({}))).await;
    assert_eq!(twice.status, StatusCode::NOT_FOUND, "withdrawn once");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(upstream.recorder.count(), 0, "nothing ran");
}
