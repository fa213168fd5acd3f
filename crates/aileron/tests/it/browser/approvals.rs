//! The review page (`/approvals`) in a real browser, driven by `tests/browser/approvals.mjs`.
//!
//! The scenario follows a human: `aileron open approval <id> --print` gives a sign-in URL for a
//! request made before the page opens; the browser redeems the ticket (cookie, then a page that
//! navigates itself on), sees the focused card, sees a second request appear live (SSE, no
//! reload), approves one and denies the other with a reason, and sees both resolve. Then a browser
//! context without the cookie gets no data and cannot decide, and a sign-in link followed from
//! another site's page still signs in. The upstream counts calls, so "ran exactly once" is checked where it
//! happens, and the audit log must carry both decisions with a human actor.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{BrowserDriver, HEADER_BACKGROUND, assert_no_page_problems, browser_available, check_png};
use crate::cli::Cli;
use crate::fake_github::FakeGithub;
use crate::support::ActionSpec;

const DENY_REASON: &str = "wrong repository <b>not bold</b>";

/// `aileron action run fetch` for `url`: exits 75 with the pending approval; returns its id.
fn request_approval(cli: &Cli, url: &str) -> String {
    let output = cli.run(&["action", "run", "fetch", "--arg", &format!("url={url}")]);
    assert_eq!(output.status.code(), Some(75), "a gated run is pending: {}", String::from_utf8_lossy(&output.stderr));
    let pending: Value = serde_json::from_slice(&output.stdout).expect("the pending answer is JSON");
    pending["approval_id"].as_str().expect("an approval id").to_string()
}

fn approval_status(cli: &Cli, id: &str) -> Value {
    serde_json::from_str(&cli.ok(&["approval", "status", id, "--json"])).expect("status JSON")
}

fn wait_for_status(cli: &Cli, id: &str, wanted: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let view = approval_status(cli, id);
        if wanted.contains(&view["status"].as_str().unwrap_or_default()) {
            return view;
        }
        assert!(Instant::now() < deadline, "approval {id} never reached {wanted:?}: {view}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn audit_events(cli: &Cli, event_type: &str) -> Vec<Value> {
    let listing: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", event_type])).expect("audit JSON");
    listing["items"].as_array().cloned().unwrap_or_default()
}

/// The cards a reply reports, as `(id, focused, url argument)`.
fn cards(reply: &Value) -> Vec<(String, bool, String)> {
    reply["cards"]
        .as_array()
        .expect("cards")
        .iter()
        .map(|card| {
            let url = card["args"]["url"].as_str().unwrap_or_default().to_string();
            (card["id"].as_str().unwrap_or_default().to_string(), card["focused"] == true, url)
        })
        .collect()
}

/// The resolved list a reply reports, as id → status.
fn statuses(reply: &Value) -> BTreeMap<String, String> {
    let items = reply["resolved"].as_array().expect("resolved");
    let status = |item: &Value, key: &str| item[key].as_str().unwrap_or_default().to_string();
    items.iter().map(|item| (status(item, "id"), status(item, "status"))).collect()
}

#[test]
fn the_review_page_signs_in_updates_live_and_decides_in_a_real_browser() {
    if !browser_available() {
        return;
    }

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(FakeGithub::start()).unwrap();
    let cli = Cli::new();
    cli.ok(&["daemon", "start"]);
    let hash = cli.install_guest("http_get", &[upstream.host_port()]);
    cli.add_action(&ActionSpec {
        inputs: &[("url", "string", true)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    let url_of = |card: &str| format!("{}/status/200?card={card}", upstream.base_url());
    let calls_for = |card: &str| {
        let marker = format!("card={card}");
        upstream.recorder.requests().iter().filter(|r| r.path_and_query.ends_with(&marker)).count()
    };

    // 1. A request made before the page opens, and the sign-in URL `aileron open` prints for it.
    let first = request_approval(&cli, &url_of("first"));
    let login_url = cli.ok(&["open", "approval", &first, "--print"]).trim().to_string();
    assert!(
        login_url.contains("/approvals/login?ticket=") && login_url.ends_with(&format!("&focus={first}")),
        "{login_url}"
    );
    let mut browser = BrowserDriver::start("approvals.mjs", &login_url);
    let signed_in = browser.reply("sign-in");
    assert_eq!(signed_in["status"], 200, "{signed_in}");
    assert!(
        signed_in["url"].as_str().unwrap().ends_with(&format!("/approvals?focus={first}")),
        "the ticket is gone from the address bar: {signed_in}"
    );
    let cookies = signed_in["cookies"].as_array().unwrap();
    assert_eq!(cookies.len(), 1, "{signed_in}");
    assert_eq!(
        (&cookies[0]["name"], &cookies[0]["httpOnly"], &cookies[0]["sameSite"]),
        (&json!("aileron_web"), &json!(true), &json!("Strict"))
    );
    assert_eq!(signed_in["document_cookie"], "", "the session cookie is HttpOnly: scripts cannot read it");
    assert_eq!(cards(&signed_in), vec![(first.clone(), true, url_of("first"))], "the focused card with its arguments");
    assert_eq!(signed_in["cards"][0]["action"], "fetch");
    assert_eq!(signed_in["cards"][0]["buttons"], json!(["Approve", "Deny", "Withdraw"]));
    assert_no_page_problems(&signed_in, "sign-in");

    // 2. A second request while the page is open appears without a reload.
    let second = request_approval(&cli, &url_of("second"));
    let live = browser.send(json!({"cmd": "expect_card", "id": second}));
    assert_eq!(
        (live["same_document"].clone(), live["navigations"].clone()),
        (json!(true), json!(0)),
        "no reload: {live}"
    );
    assert_eq!(cards(&live), vec![(first.clone(), true, url_of("first")), (second.clone(), false, url_of("second"))]);
    assert_no_page_problems(&live, "live card");
    let screenshot = cli.scratch().join("approvals-pending.png");
    browser.send(json!({"cmd": "screenshot", "path": screenshot}));
    check_png(&screenshot);
    assert_eq!(upstream.recorder.count(), 0, "nothing ran before a decision");

    // 3. Approve the first, deny the second with a reason; both move to the resolved list.
    let decided = browser.send(json!({"cmd": "decide", "approve": first, "deny": second, "reason": DENY_REASON}));
    assert_no_page_problems(&decided, "decide");
    assert_eq!(decided["same_document"], true);
    let expected = BTreeMap::from([(first.clone(), "completed".to_string()), (second.clone(), "denied".to_string())]);
    assert_eq!(statuses(&decided), expected, "{decided}");
    let denied_line =
        decided["resolved"].as_array().unwrap().iter().find(|item| item["id"] == second.as_str()).unwrap();
    assert!(denied_line["text"].as_str().unwrap().contains(DENY_REASON), "the reason is shown as text: {denied_line}");
    assert_eq!(decided["cards"], json!([]), "no card is left pending");
    assert_eq!(decided["empty_notice_visible"], true);
    let one_each = json!({ first.as_str(): 1, second.as_str(): 1 });
    assert_eq!(decided["decide_requests"], one_each, "a double click sends one decision");
    let resolved_screenshot = cli.scratch().join("approvals-resolved.png");
    browser.send(json!({"cmd": "screenshot", "path": resolved_screenshot}));
    check_png(&resolved_screenshot);

    // 4. What happened, from the daemon's side.
    let completed = wait_for_status(&cli, &first, &["completed", "failed"]);
    assert_eq!(completed["status"], "completed", "{completed}");
    assert_eq!(approval_status(&cli, &second), json!({"status": "denied", "reason": DENY_REASON}));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        (calls_for("first"), calls_for("second")),
        (1, 0),
        "the approved action ran exactly once, the denied one never"
    );
    assert_eq!(upstream.recorder.count(), 1);
    let approved = audit_events(&cli, "approval.approved");
    assert_eq!(approved.len(), 1, "{approved:?}");
    assert_eq!(approved[0]["payload"]["aileron.approval.id"], first.as_str());
    assert_eq!(approved[0]["actor"]["type"], "human", "{}", approved[0]);
    let denied = audit_events(&cli, "approval.denied");
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert_eq!(denied[0]["payload"]["aileron.approval.id"], second.as_str());
    assert_eq!(denied[0]["payload"]["aileron.approval.reason"], DENY_REASON);
    assert_eq!(denied[0]["actor"]["type"], "human", "{}", denied[0]);

    // 4b. Withdrawn from the page: not decided, never run, on record as the human's withdrawal.
    let withdrawn = request_approval(&cli, &url_of("withdrawn"));
    browser.send(json!({"cmd": "expect_card", "id": withdrawn}));
    let after = browser.send(json!({"cmd": "withdraw", "id": withdrawn}));
    assert_no_page_problems(&after, "withdraw");
    assert_eq!(statuses(&after).get(&withdrawn).map(String::as_str), Some("cancelled"), "{after}");
    assert_eq!(after["cards"], json!([]), "{after}");
    assert_eq!(approval_status(&cli, &withdrawn)["status"], "cancelled");
    let cancelled = audit_events(&cli, "approval.cancelled");
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["actor"]["type"], "human", "{}", cancelled[0]);
    assert_eq!(calls_for("withdrawn"), 0, "a withdrawn action never runs");

    // 4c. A card that takes another's place as the person clicks takes no decision: an agent that
    //     withdrew its own card above moved another's Approve under the pointer (the
    //     twenty-fourth re-attack). Here the card above is denied from the terminal.
    let above = request_approval(&cli, &url_of("above"));
    let below = request_approval(&cli, &url_of("below"));
    browser.send(json!({"cmd": "expect_card", "id": below}));
    std::thread::sleep(Duration::from_millis(1200));
    cli.ok(&["approval", "deny", &above]);
    let moved = browser.send(json!({"cmd": "click_top_once_moved", "gone": above}));
    assert_eq!(moved["top"], below.as_str(), "{moved}");
    assert_eq!(moved["decide_requests_sent"], 0, "a click on a card that just moved decides nothing: {moved}");
    assert!(moved["status"].as_str().unwrap().contains("just moved"), "{moved}");
    assert_eq!(approval_status(&cli, &below)["status"], "pending_approval");
    cli.ok(&["approval", "deny", &below]);
    // The twenty-sixth: the card below the target leaves while the page is scrolled to its end;
    // the target moves down on the screen, its place in the list unchanged.
    let target = request_approval(&cli, &url_of("target"));
    let last = request_approval(&cli, &url_of("last"));
    browser.send(json!({"cmd": "expect_card", "id": last}));
    std::thread::sleep(Duration::from_millis(1200));
    let shift = std::thread::scope(|scope| {
        let shifted = scope.spawn(|| browser.send(json!({"cmd": "click_after_shift", "gone": last, "target": target})));
        std::thread::sleep(Duration::from_millis(500));
        cli.ok(&["approval", "deny", &last]);
        shifted.join().unwrap()
    });
    assert_ne!(shift["moved_by"], 0.0, "the target moved on the screen: {shift}");
    assert_eq!(shift["decide_requests_sent"], 0, "{shift}");
    assert!(shift["status"].as_str().unwrap().contains("just moved"), "{shift}");
    assert_eq!(approval_status(&cli, &target)["status"], "pending_approval");
    cli.ok(&["approval", "deny", &target]);

    // 5. A browser without the cookie, on the review URL an agent is given: no data, no decision.
    let third = request_approval(&cli, &url_of("third"));
    let anonymous = browser.send(json!({"cmd": "anonymous", "id": third}));
    assert_eq!(anonymous["status"], 200);
    assert!(anonymous["text"].as_str().unwrap().contains("Not signed in"), "{anonymous}");
    let html = anonymous["html"].as_str().unwrap();
    for secret in [third.as_str(), "card=third", "card-act-", "Approve"] {
        assert!(!html.contains(secret), "the signed-out page shows no `{secret}`: {html}");
    }
    assert_eq!(anonymous["cards"], 0);
    assert_eq!(anonymous["header_background"], HEADER_BACKGROUND, "the signed-out page is styled (CSP nonce)");
    assert_eq!(anonymous["cookies"], json!([]), "the fresh context has no session");
    for (attempt, status) in anonymous["attempts"].as_object().unwrap() {
        assert!(matches!(status.as_u64(), Some(401 | 403)), "{attempt} is refused without the cookie: {status}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(approval_status(&cli, &third)["status"], "pending_approval", "nothing decided the third request");
    assert_eq!(calls_for("third"), 0);
    assert_eq!(upstream.recorder.count(), 1, "nothing else ran");
    assert_eq!(audit_events(&cli, "approval.approved").len(), 1);

    // A tab of the signed-in browser that the sign-in did not open holds the cookie (as another
    // local service on 127.0.0.1 would) but not the page secret: it shows, it cannot decide.
    let cookie_only = browser.send(json!({"cmd": "cookie_only", "id": third}));
    assert_eq!(cookie_only["read_only_notice"], true, "{cookie_only}");
    assert_eq!(cookie_only["decide_status"], 403, "{cookie_only}");
    assert_eq!(cookie_only["html_has_no_secret"], true, "{cookie_only}");
    assert_eq!(approval_status(&cli, &third)["status"], "pending_approval", "the cookie alone decided nothing");

    let reused = browser.send(json!({"cmd": "visit", "url": login_url, "fresh": true}));
    assert_eq!(reused["status"], 403, "a sign-in link works once");
    assert!(reused["text"].as_str().unwrap().contains("expired or was already used"), "{reused}");
    assert_eq!(reused["header_background"], HEADER_BACKGROUND, "the expired-link page is styled (CSP nonce)");
    assert_eq!(reused["cards"], json!([]));

    // 6. The link of an approval decided meanwhile says where it stands, among the recently
    //    resolved ones; the rest stays live.
    let base_url = login_url.split("/approvals/login").next().unwrap();
    let focused_decided = browser.send(json!({"cmd": "visit", "url": format!("{base_url}/approvals?focus={first}")}));
    assert_no_page_problems(&focused_decided, "reopened page");
    let mut expected = expected;
    expected.insert(withdrawn.clone(), "cancelled".to_string());
    expected.insert(above.clone(), "denied".to_string());
    expected.insert(below.clone(), "denied".to_string());
    expected.insert(target.clone(), "denied".to_string());
    expected.insert(last.clone(), "denied".to_string());
    assert_eq!(statuses(&focused_decided), expected, "the decisions, rendered by the server");
    assert_eq!(cards(&focused_decided), vec![(third.clone(), false, url_of("third"))]);

    // 7. An approved run that fails says why in the resolved list, live and when the page is
    //    reloaded: here the agent asked for a host the connector's manifest does not declare.
    let doomed = request_approval(&cli, "https://undeclared.example/x");
    assert_eq!(browser.send(json!({"cmd": "expect_card", "id": doomed}))["navigations"], 0);
    cli.ok(&["approval", "approve", &doomed]);
    let resolved_line = |reply: &Value| {
        let items = reply["resolved"].as_array().expect("resolved");
        let item = items.iter().find(|item| item["id"] == doomed.as_str()).expect("the failed run is listed");
        (item["status"].as_str().unwrap().to_string(), item["text"].as_str().unwrap().to_string())
    };
    let live = browser.send(json!({"cmd": "expect_resolved", "id": doomed}));
    assert_no_page_problems(&live, "failed run, live");
    let (status, text) = resolved_line(&live);
    assert_eq!(status, "failed", "{text}");
    assert!(text.contains("failed (capability_denied: "), "the failure class and message are shown: {text}");
    // The page's link to a decided approval (`?focus=`) renders its line server-side.
    let reloaded = browser.send(json!({"cmd": "visit", "url": format!("{base_url}/approvals?focus={doomed}")}));
    assert_eq!(resolved_line(&reloaded), (status, text), "the server renders the same line");

    // 8. A sign-in link followed from another site's page still signs in (the Strict cookie is
    //    set by a page that then navigates itself, not by a redirect).
    let cross_site_url = cli.ok(&["open", "approval", &third, "--print"]).trim().to_string();
    let cross_site = browser.send(json!({"cmd": "cross_site", "url": cross_site_url}));
    assert_no_page_problems(&cross_site, "cross-site sign-in");
    assert_eq!((&cross_site["signed_in"], &cross_site["signed_out"]), (&json!(true), &json!(false)), "{cross_site}");
    assert!(cross_site["url"].as_str().unwrap().ends_with(&format!("/approvals?focus={third}")), "{cross_site}");
    assert_eq!(cards(&cross_site), vec![(third.clone(), true, url_of("third"))]);

    // 8b. Edited before approving: previewed first, then the run uses the edit, never the request.
    let to_edit = request_approval(&cli, &url_of("asked"));
    browser.send(json!({"cmd": "expect_card", "id": to_edit}));
    let edited = browser.send(json!({"cmd": "edit", "id": to_edit, "args": {"url": url_of("edited")}}));
    assert_no_page_problems(&edited, "edit");
    assert_eq!(edited["approve_disabled_before_preview"], true, "an edit is approved only after its preview");
    assert!(!edited["preview_rows"].as_array().unwrap().is_empty(), "{edited}");
    let view = wait_for_status(&cli, &to_edit, &["completed", "failed"]);
    assert_eq!(view["status"], "completed", "{view}");
    assert_eq!(view["edited_args"], json!({"url": url_of("edited")}), "{view}");
    assert_eq!((calls_for("asked"), calls_for("edited")), (0, 1), "the edit ran, the request did not");
    let approved = audit_events(&cli, "approval.approved");
    let record = approved.iter().find(|r| r["payload"]["aileron.approval.id"] == to_edit.as_str()).unwrap();
    assert_eq!(record["payload"]["aileron.approval.edited"], true, "{record}");

    // 9. The daemon goes away: the page says so, and a decision it cannot deliver is reported.
    cli.ok(&["daemon", "stop"]);
    let disconnected = browser.send(json!({"cmd": "wait_disconnected"}));
    assert!(disconnected["text"].as_str().unwrap().contains("Lost the connection to the daemon"), "{disconnected}");
    let offline = browser.send(json!({"cmd": "try_approve", "id": third}));
    assert_eq!(offline["status"], "failed: the daemon did not answer", "{offline}");
    assert_eq!(offline["buttons_disabled"], json!([false, false, false]), "the buttons work again after a failure");
    assert_eq!(offline["still_shown"], true);
    assert_eq!(browser.send(json!({"cmd": "quit"}))["closed"], true);
    assert_eq!(approval_status(&cli, &third)["status"], "pending_approval", "still pending after a restart");
    assert_eq!(upstream.recorder.count(), 2, "the first approval's run and the edited one's");
}
