//! Sealed credentials end to end (SPEC §4.4, §6, §8 `awaiting_vault`, §12): the vault's life
//! (absent → unlocked → locked, a wrong passphrase changes nothing), API-key, AWS SigV4 and OAuth2
//! bindings injected host-side against loopback fakes, echoes redacted, the transport rule, the
//! exact `binding_setup` command in `binding_required`, stale bindings, approved runs that wait
//! for the vault (also across a restart), the gateway's 423, the CLI, and planted secrets looked
//! for everywhere.

use std::sync::atomic::Ordering;
use std::time::Duration;

use aileron::surfaces::daemon::StateOptions;
use http::StatusCode;
use serde_json::{Value, json};

use crate::cli::Cli;
use crate::fake_oauth::FakeOAuth;
use crate::support::{ActionSpec, Harness, files_containing, guest_wasm, manifest};

const PASSPHRASE: &str = "correct horse battery staple";

fn api_key_credential(header: &str, format: &str) -> String {
    format!(
        "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test key\"\nheader = \"{header}\"\nformat = \"{format}\"\n"
    )
}

async fn init_vault(harness: &Harness) {
    let created = harness.request("POST", "/v1/vault/init", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
}

/// Installs `http_get` with `credential_block` for `host` and an action `fetch` declaring `kind`.
async fn credential_action(
    harness: &Harness,
    hosts: &[String],
    credential_block: &str,
    kind: &str,
    approval: bool,
) -> String {
    let hash =
        harness.install("http_get", &guest_wasm("http_get"), &manifest("http_get", hosts, credential_block)).await;
    let spec = ActionSpec {
        capabilities: &["get", kind],
        inputs: &[("url", "string", true), ("credential", "string", false), ("headers", "object", false)],
        approval,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    };
    let added = harness.add_action("fetch.md", &spec.render()).await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    hash
}

const CONNECTOR: &str = "github://aileron-tests/http_get";

#[tokio::test]
async fn the_vault_starts_locked_and_a_wrong_passphrase_changes_nothing() {
    let harness = Harness::new();
    let status = harness.request("GET", "/v1/vault/status", None).await;
    assert_eq!(status.body["state"], "absent");
    let unlock = harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(unlock.body["error"]["code"], "vault_absent", "{}", unlock.body);
    assert!(unlock.body["error"]["hint"].as_str().unwrap().contains("aileron vault init"));

    init_vault(&harness).await;
    assert_eq!(harness.request("GET", "/v1/vault/status", None).await.body["state"], "unlocked");
    let again = harness.request("POST", "/v1/vault/init", Some(json!({ "passphrase": "other" }))).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "a vault is never overwritten: {}", again.body);

    let set = harness
        .request("POST", "/v1/secrets", Some(json!({ "path": "smtp/password", "value": "hunter2-hunter2" })))
        .await;
    assert_eq!(set.status, StatusCode::CREATED, "{}", set.body);
    assert_eq!(harness.request("POST", "/v1/vault/lock", Some(json!({}))).await.body["state"], "locked");

    let file = harness.home.secrets();
    let before = std::fs::read(&file).unwrap();
    let wrong = harness
        .request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": "Correct horse battery staple" })))
        .await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{}", wrong.body);
    assert_eq!(wrong.body["error"]["code"], "wrong_passphrase");
    assert_eq!(std::fs::read(&file).unwrap(), before, "a wrong passphrase writes nothing");
    assert_eq!(harness.request("GET", "/v1/vault/status", None).await.body["state"], "locked");
    let listed = harness.request("GET", "/v1/secrets", None).await;
    assert_eq!(listed.body["items"][0]["path"], "smtp/password", "listing works while locked: {}", listed.body);

    let right = harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(right.status, StatusCode::OK, "{}", right.body);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);

    let events: Vec<String> =
        harness.audit().await.iter().map(|r| r["event_type"].as_str().unwrap().to_string()).collect();
    for expected in ["vault.initialized", "secret.set", "vault.locked", "vault.unlock_failed", "vault.unlocked"] {
        assert!(events.iter().any(|e| e == expected), "{expected} is audited: {events:?}");
    }
    harness.state.services.audit.flush().await;
    for needle in [PASSPHRASE, "hunter2-hunter2"] {
        assert_eq!(
            files_containing(harness.temp.path(), needle.as_bytes()),
            Vec::<String>::new(),
            "no file holds {needle}"
        );
    }
}

/// An upstream whose `/api/echo` takes `key` and echoes it back, and the `fetch` action of
/// `http_get` injecting it as `Authorization` (not yet bound).
async fn api_key_echo(key: &str) -> (FakeOAuth, Harness) {
    let upstream = FakeOAuth::start().await;
    *upstream.state.api_key.lock().unwrap() = Some(key.to_string());
    let harness = Harness::new();
    let credential = api_key_credential("Authorization", "{key}");
    credential_action(&harness, &[upstream.host_port()], &credential, "api_key", false).await;
    (upstream, harness)
}

#[tokio::test]
async fn an_api_key_is_injected_with_the_manifest_format_and_its_echo_reaches_the_guest_redacted() {
    let key = "lin_api_SECRET-9f8e7d6c5b4a39281706";
    let (upstream, harness) = api_key_echo(key).await;
    let url = format!("{}/api/echo", upstream.base_url());

    // Vault exists, no binding: the failure names the exact command, for the agent to relay.
    init_vault(&harness).await;
    let missing = harness.run("fetch", json!({ "url": url, "credential": "api_key" })).await;
    assert_eq!(missing.status.as_u16(), 412, "{}", missing.body);
    assert_eq!(missing.body["error"]["class"], "binding_required");
    assert!(
        missing.body["error"]["message"].as_str().unwrap().contains(&format!("aileron binding setup {CONNECTOR}")),
        "{}",
        missing.body
    );
    assert_eq!(upstream.state.api_requests.lock().unwrap().len(), 0, "nothing leaves without its credential");

    let bound =
        harness.request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": key }))).await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.body);
    let name = bound.body["name"].as_str().unwrap().to_string();
    assert_eq!(name, "api_key/github:aileron-tests:http_get/default");
    let twice = harness
        .request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": "other-key-123456" })))
        .await;
    assert_eq!(twice.status, StatusCode::CONFLICT, "{}", twice.body);
    assert!(twice.body["error"]["hint"].as_str().unwrap().contains("aileron binding rebind"));

    let response = harness.run("fetch", json!({ "url": url, "credential": "api_key" })).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let seen = upstream.state.api_requests.lock().unwrap().clone();
    let header = seen[0].iter().find(|(n, _)| n == "authorization").map(|(_, v)| v.clone());
    assert_eq!(header.as_deref(), Some(key), "`format = \"{{key}}\"` sends the raw key");
    let output = response.body["result"]["output"].to_string();
    assert!(!output.contains(key), "the echoed key reaches the guest redacted: {output}");
    assert!(output.contains("[REDACTED]"), "{output}");

    // The audit says which account acted, never the key.
    let records = harness.audit().await;
    let proxied = records.iter().find(|r| r["event_type"] == "connector.proxy.proxied").unwrap();
    assert_eq!(proxied["payload"]["aileron.binding.name"], name.as_str(), "{proxied}");
    // Proxy records use the same keys as the run's records and spans (`audit list` shows the op).
    assert_eq!(proxied["payload"]["aileron.connector.op"], "get", "{proxied}");
    assert_eq!(proxied["payload"]["aileron.audit.id"], response.body["audit_id"], "{proxied}");
    let executed = records.iter().find(|r| r["event_type"] == "action.executed").unwrap();
    assert_eq!(executed["payload"]["aileron.action.steps"][0]["aileron.binding.name"], name.as_str(), "{executed}");
    for record in &records {
        assert!(!record.to_string().contains(key), "audit record leaked the key: {record}");
    }
    assert!(records.iter().any(|r| r["event_type"] == "binding.created"));

    // Rebind and revoke are audited; a revoked binding is required again.
    let encoded = name.replace('/', "%2F");
    let rebound = harness
        .request(
            "POST",
            &format!("/v1/bindings/{encoded}/rebind"),
            Some(json!({ "api_key": "rotated-key-0000000000" })),
        )
        .await;
    assert_eq!(rebound.status, StatusCode::OK, "{}", rebound.body);
    let revoked = harness.request("DELETE", &format!("/v1/bindings/{encoded}"), None).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    let after = harness.run("fetch", json!({ "url": url, "credential": "api_key" })).await;
    assert_eq!(after.body["error"]["class"], "binding_required");
    let events: Vec<Value> = harness.audit().await.iter().map(|r| r["event_type"].clone()).collect();
    assert!(events.contains(&json!("binding.rebound")) && events.contains(&json!("binding.revoked")), "{events:?}");
    harness.state.services.audit.flush().await;
    assert_eq!(
        files_containing(harness.temp.path(), key.as_bytes()),
        Vec::<String>::new(),
        "the vault holds the key encrypted"
    );
}

/// The re-attack of 2026-12-05: a connector that asked for `Accept-Encoding: gzip` got the
/// upstream's echo of its credential compressed, where the byte-for-byte redaction could not see
/// it, and decompressed it itself. A credentialed request now asks for the body as it is, and an
/// encoded answer to one is never handed to the guest.
#[tokio::test]
async fn a_compressed_echo_of_the_credential_never_reaches_the_guest() {
    let key = "lin_api_SECRET-0a1b2c3d4e5f60718293";
    let (upstream, harness) = api_key_echo(key).await;
    init_vault(&harness).await;
    let bound =
        harness.request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": key }))).await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.body);
    let url = format!("{}/api/echo", upstream.base_url());
    let args = json!({ "url": url, "credential": "api_key", "headers": { "Accept-Encoding": "gzip" } });

    // The guest's wish for gzip does not go upstream: the echo comes back plain, and redacted.
    let response = harness.run("fetch", args.clone()).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let seen = upstream.state.api_requests.lock().unwrap().clone();
    let accept = seen[0].iter().filter(|(n, _)| n == "accept-encoding").map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    assert_eq!(accept, ["identity"], "{seen:?}");
    let output = response.body["result"]["output"].to_string();
    assert!(!output.contains(key) && output.contains("[REDACTED]"), "{output}");

    // An upstream that encodes anyway: the run fails and the body stays with the daemon.
    *upstream.state.always_encode.lock().unwrap() = true;
    let refused = harness.run("fetch", args).await;
    assert!(!refused.body.to_string().contains(key), "{}", refused.body);
    assert!(
        refused.body.to_string().contains("content-encoding: gzip"),
        "the refusal names the encoding: {}",
        refused.body
    );
    assert!(!refused.body.to_string().contains("[REDACTED]"), "no body reached the guest: {}", refused.body);
}

#[tokio::test]
async fn credentials_are_injected_only_over_https_or_to_a_declared_loopback_address() {
    let harness = Harness::with_options(|_| {});
    // A plain-http host that is not loopback: declared in the manifest, still never sent a key.
    credential_action(
        &harness,
        &["api.example.com:80".to_string()],
        &api_key_credential("X-Api-Key", "{key}"),
        "api_key",
        false,
    )
    .await;
    init_vault(&harness).await;
    let bound = harness
        .request(
            "POST",
            "/v1/bindings/setup",
            Some(json!({ "connector": CONNECTOR, "api_key": "plain-http-key-12345" })),
        )
        .await;
    assert_eq!(bound.status, StatusCode::CREATED);
    let response = harness.run("fetch", json!({ "url": "http://api.example.com/x", "credential": "api_key" })).await;
    assert_eq!(response.body["error"]["class"], "capability_denied", "{}", response.body);
    assert!(response.body["error"]["message"].as_str().unwrap().contains("https"), "{}", response.body);
}

#[tokio::test]
async fn aws_requests_are_signed_host_side_with_sigv4() {
    let upstream = FakeOAuth::start().await;
    let harness = Harness::new();
    let block = "[capabilities.credential]\nkind = \"aws_sigv4\"\nscope = \"read\"\nservice = \"execute-api\"\nregion = \"eu-west-1\"\n";
    credential_action(&harness, &[upstream.host_port()], block, "aws_sigv4", false).await;
    init_vault(&harness).await;
    let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let bound = harness
        .request(
            "POST",
            "/v1/bindings/setup",
            Some(json!({ "connector": CONNECTOR, "aws": { "access_key_id": "AKIDEXAMPLE", "secret_access_key": secret, "session_token": "session-token-SECRET-0042" } })),
        )
        .await;
    assert_eq!(bound.status, StatusCode::CREATED, "{}", bound.body);
    assert_eq!(bound.body["access_key_id"], "AKIDEXAMPLE");
    *upstream.state.api_key.lock().unwrap() = None;
    let response = harness
        .run("fetch", json!({ "url": format!("{}/api/echo?b=2&a=1", upstream.base_url()), "credential": "aws_sigv4" }))
        .await;
    // The fake API does not know SigV4 (401), but it recorded exactly what was sent.
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    let seen = upstream.state.api_requests.lock().unwrap().clone();
    let header = |name: &str| seen[0].iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default();
    let authorization = header("authorization");
    let amz_date = header("x-amz-date");
    assert!(
        authorization.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/eu-west-1/execute-api/aws4_request",
            &amz_date[..8]
        )),
        "{authorization}"
    );
    assert_eq!(header("x-amz-security-token"), "session-token-SECRET-0042");
    assert_eq!(header("x-amz-content-sha256"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // Recompute the signature over what the upstream received: it must match.
    let url = url::Url::parse(&format!("{}/api/echo?b=2&a=1", upstream.base_url())).unwrap();
    let signed_names: Vec<String> = authorization
        .split("SignedHeaders=")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .split(';')
        .map(str::to_string)
        .collect();
    let headers: Vec<(String, String)> = signed_names
        .iter()
        .filter(|n| {
            !["x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "authorization"].contains(&n.as_str())
        })
        .map(|n| (n.clone(), header(n)))
        .collect();
    let credentials = aileron_core::sigv4::AwsCredentials {
        access_key_id: "AKIDEXAMPLE".into(),
        secret_access_key: zeroize::Zeroizing::new(secret.to_string()),
        session_token: Some(zeroize::Zeroizing::new("session-token-SECRET-0042".to_string())),
    };
    let params =
        aileron_core::sigv4::SigningParams { region: "eu-west-1", service: "execute-api", amz_date: &amz_date };
    let expected = aileron_core::sigv4::sign("GET", &url, &headers, b"", &credentials, &params).unwrap();
    let expected_authorization =
        expected.iter().find(|(n, _)| n.eq_ignore_ascii_case("authorization")).unwrap().1.clone();
    assert_eq!(authorization, expected_authorization, "the signature verifies over the received request");
    let output = response.body.to_string();
    assert!(!output.contains(secret) && !output.contains("session-token-SECRET-0042"), "{output}");
}

/// `aileron binding setup` for an aws_sigv4 connector: the key id on the command line, the secret
/// key and session token from the environment (never on a command line); a key id that could
/// not go into the `Authorization` header unquoted is refused at setup with a hint, not at the
/// first call. The upstream then gets requests signed with the bound key pair.
#[test]
fn the_cli_binds_an_aws_key_pair_and_refuses_a_malformed_key_id() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(FakeOAuth::start());
    let cli = Cli::new();
    let block = "[capabilities.credential]\nkind = \"aws_sigv4\"\nscope = \"read\"\nservice = \"execute-api\"\nregion = \"eu-west-1\"\n";
    let hash =
        cli.install_package("http_get", &guest_wasm("http_get"), &manifest("http_get", &[upstream.host_port()], block));
    cli.add_action(&ActionSpec {
        capabilities: &["get", "aws_sigv4"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    assert!(cli.run_with(&["vault", "init"], &[("AILERON_VAULT_PASSPHRASE", PASSPHRASE)], None).status.success());
    let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    let env = [("AWS_SECRET", secret), ("AWS_TOKEN", "cli-session-token-0077")];
    let bad = cli.run_with(
        &["binding", "setup", CONNECTOR, "--access-key-id", "AKID/EXAMPLE", "--from-env", "AWS_SECRET"],
        &env,
        None,
    );
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("access key id") && stderr.contains("hint:"), "{stderr}");
    let bound = cli.run_with(
        &[
            "binding",
            "setup",
            CONNECTOR,
            "--access-key-id",
            "AKIDEXAMPLE",
            "--from-env",
            "AWS_SECRET",
            "--session-token-from-env",
            "AWS_TOKEN",
        ],
        &env,
        None,
    );
    assert!(bound.status.success(), "{}", String::from_utf8_lossy(&bound.stderr));
    let listed: Value = serde_json::from_str(&cli.ok(&["binding", "list", "--json"])).unwrap();
    assert_eq!(listed["items"][0]["kind"], "aws_sigv4", "{listed}");

    let url = format!("{}/api/echo", upstream.base_url());
    let run = cli.run_with(
        &["action", "run", "fetch", "--arg", &format!("url={url}"), "--arg", "credential=aws_sigv4"],
        &[],
        None,
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let seen = upstream.state.api_requests.lock().unwrap().clone();
    let header = |name: &str| seen[0].iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_default();
    assert!(
        header("authorization").starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
        "{}",
        header("authorization")
    );
    assert_eq!(header("x-amz-security-token"), "cli-session-token-0077");
    let output = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(!output.contains(secret) && !output.contains("cli-session-token-0077"), "{output}");
    cli.run_with(&["daemon", "stop"], &[], None);
    assert_eq!(files_containing(&cli.home, secret.as_bytes()), Vec::<String>::new());
    drop(runtime);
}

/// Runs the OAuth2 authorization as a browser would: GET the authorize URL (the fake provider
/// answers with a redirect carrying code and state) and return the redirect's query.
async fn follow_authorize(authorize_url: &str) -> url::Url {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let response = client.get(authorize_url).send().await.unwrap();
    assert_eq!(response.status(), 303, "the provider redirects back");
    url::Url::parse(response.headers()["location"].to_str().unwrap()).unwrap()
}

fn query(url: &url::Url, name: &str) -> String {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.to_string()).unwrap_or_default()
}

#[tokio::test]
async fn oauth2_pkce_binds_refreshes_and_goes_stale_with_the_command_to_fix_it() {
    let provider = FakeOAuth::start().await;
    let harness = Harness::new();
    credential_action(&harness, &[provider.host_port()], &provider.manifest_credential(None), "oauth2", false).await;
    init_vault(&harness).await;

    let init = |port: u16| json!({ "connector": CONNECTOR, "mode": "cli", "redirect_port": port });
    let started = harness.request("POST", "/v1/bindings/setup/oauth2/init", Some(init(40001))).await;
    assert_eq!(started.status, StatusCode::OK, "{}", started.body);
    let authorize_url = url::Url::parse(started.body["authorize_url"].as_str().unwrap()).unwrap();
    assert_eq!(query(&authorize_url, "code_challenge_method"), "S256");
    assert_eq!(query(&authorize_url, "redirect_uri"), "http://127.0.0.1:40001/callback");
    assert_eq!(query(&authorize_url, "state").len(), 43, "32 random bytes, base64url");
    let other = harness.request("POST", "/v1/bindings/setup/oauth2/init", Some(init(40002))).await;
    let other_url = url::Url::parse(other.body["authorize_url"].as_str().unwrap()).unwrap();
    assert_ne!(query(&authorize_url, "state"), query(&other_url, "state"), "fresh state per session");
    assert_ne!(
        query(&authorize_url, "code_challenge"),
        query(&other_url, "code_challenge"),
        "fresh verifier per session"
    );

    // A forged state is refused, and the session is spent.
    let callback = follow_authorize(authorize_url.as_str()).await;
    let session_id = started.body["session_id"].as_str().unwrap();
    let forged = harness
        .request(
            "POST",
            "/v1/bindings/setup/oauth2/finish",
            Some(json!({ "session_id": session_id, "code": query(&callback, "code"), "state": "forged" })),
        )
        .await;
    assert_eq!(forged.body["error"]["code"], "state_mismatch", "{}", forged.body);
    let replay = harness
        .request("POST", "/v1/bindings/setup/oauth2/finish", Some(json!({ "session_id": session_id, "code": query(&callback, "code"), "state": query(&callback, "state") })))
        .await;
    assert_eq!(replay.body["error"]["code"], "unknown_session", "single use: {}", replay.body);

    // The real flow.
    let started = harness.request("POST", "/v1/bindings/setup/oauth2/init", Some(init(40003))).await;
    let callback = follow_authorize(started.body["authorize_url"].as_str().unwrap()).await;
    let finished = harness
        .request(
            "POST",
            "/v1/bindings/setup/oauth2/finish",
            Some(json!({ "session_id": started.body["session_id"], "code": query(&callback, "code"), "state": query(&callback, "state") })),
        )
        .await;
    assert_eq!(finished.status, StatusCode::CREATED, "{}", finished.body);
    let name = finished.body["name"].as_str().unwrap().to_string();
    assert_eq!(finished.body["scopes"], json!(["read", "write"]));

    let url = format!("{}/api/echo", provider.base_url());
    let response = harness.run("fetch", json!({ "url": url, "credential": "oauth2" })).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    assert_eq!(
        response.body["result"]["output"]["status"], 200,
        "the API accepted the bearer token: {}",
        response.body
    );
    let token = provider.latest_access_token().unwrap();
    assert!(!response.body.to_string().contains(&token), "the echoed token is redacted");

    // A token about to expire is refreshed first (60 s margin), and the refresh is audited.
    provider.state.expires_in.store(30, Ordering::SeqCst);
    let encoded = name.replace('/', "%2F");
    let reauthorized = harness
        .request(
            "POST",
            "/v1/bindings/setup/oauth2/init",
            Some(json!({ "rebind": name, "mode": "cli", "redirect_port": 40004 })),
        )
        .await;
    let callback = follow_authorize(reauthorized.body["authorize_url"].as_str().unwrap()).await;
    let rebound = harness
        .request(
            "POST",
            "/v1/bindings/setup/oauth2/finish",
            Some(json!({ "session_id": reauthorized.body["session_id"], "code": query(&callback, "code"), "state": query(&callback, "state") })),
        )
        .await;
    assert_eq!(rebound.status, StatusCode::OK, "{}", rebound.body);
    let refreshes_before = provider.state.refreshes.load(Ordering::SeqCst);
    let response = harness.run("fetch", json!({ "url": url, "credential": "oauth2" })).await;
    assert_eq!(response.body["result"]["output"]["status"], 200, "{}", response.body);
    assert_eq!(provider.state.refreshes.load(Ordering::SeqCst), refreshes_before + 1, "refreshed before injection");
    assert!(harness.audit().await.iter().any(|r| r["event_type"] == "binding.refreshed"));

    // The refreshed envelope was persisted: the provider rotated the refresh token (the old one
    // is dead), and after the vault is locked and unlocked (nothing kept in memory) the next
    // refresh succeeds only with the new one read back from the file.
    harness.request("POST", "/v1/vault/lock", Some(json!({}))).await;
    harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    let response = harness.run("fetch", json!({ "url": url, "credential": "oauth2" })).await;
    assert_eq!(
        response.body["result"]["output"]["status"], 200,
        "the rotated refresh token was persisted: {}",
        response.body
    );
    assert_eq!(provider.state.refreshes.load(Ordering::SeqCst), refreshes_before + 2, "refreshed again from the file");

    // A failed refresh marks the binding stale with the reason and the exact command.
    provider.state.fail_refresh.store(true, Ordering::SeqCst);
    let response = harness.run("fetch", json!({ "url": url, "credential": "oauth2" })).await;
    assert_eq!(response.body["error"]["class"], "binding_failed", "{}", response.body);
    assert!(
        response.body["error"]["message"].as_str().unwrap().contains(&format!("aileron binding reauthorize {name}")),
        "{}",
        response.body
    );
    let binding = harness.request("GET", &format!("/v1/bindings/{encoded}"), None).await;
    assert_eq!(binding.body["state"], "stale", "{}", binding.body);
    assert!(binding.body["stale_reason"].as_str().unwrap().contains("invalid_grant"), "{}", binding.body);
    assert!(harness.audit().await.iter().any(|r| r["event_type"] == "binding.stale"));
    harness.state.services.audit.flush().await;
    assert_eq!(files_containing(harness.temp.path(), token.as_bytes()), Vec::<String>::new());
}

#[tokio::test]
async fn daemon_mode_oauth_redirects_to_a_loopback_return_to_only() {
    let provider = FakeOAuth::start().await;
    let harness = Harness::new();
    credential_action(
        &harness,
        &[provider.host_port()],
        &provider.manifest_credential(Some("bound-at-release")),
        "oauth2",
        false,
    )
    .await;
    init_vault(&harness).await;
    for return_to in
        ["https://evil.example/steal", "http://10.0.0.1/x", "http://127.0.0.1.evil.example/", "javascript:alert(1)"]
    {
        let refused = harness
            .request(
                "POST",
                "/v1/bindings/setup/oauth2/init",
                Some(json!({ "connector": CONNECTOR, "mode": "daemon", "return_to": return_to })),
            )
            .await;
        assert_eq!(refused.body["error"]["code"], "invalid_return_to", "{return_to}: {}", refused.body);
    }
    let started = harness
        .request(
            "POST",
            "/v1/bindings/setup/oauth2/init",
            Some(json!({ "connector": CONNECTOR, "mode": "daemon", "return_to": "http://127.0.0.1:47123/accounts" })),
        )
        .await;
    assert_eq!(started.status, StatusCode::OK, "{}", started.body);
    let callback = follow_authorize(started.body["authorize_url"].as_str().unwrap()).await;
    assert_eq!(callback.path(), "/v1/bindings/setup/oauth2/callback");
    // The browser arrives without any token.
    let path = format!("{}?{}", callback.path(), callback.query().unwrap());
    let request =
        http::Request::builder().method("GET").uri(&path).header("host", format!("127.0.0.1:{}", crate::support::PORT));
    let answer = harness.send(request, None).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{:?}", answer.body);
    let location = answer.headers["location"].to_str().unwrap();
    assert!(location.starts_with("http://127.0.0.1:47123/accounts?status=ok&binding=oauth2"), "{location}");
    // Replaying the same callback binds nothing more.
    let again = harness
        .send(
            http::Request::builder()
                .method("GET")
                .uri(&path)
                .header("host", format!("127.0.0.1:{}", crate::support::PORT)),
            None,
        )
        .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST, "{:?}", again.body);
    assert_eq!(harness.request("GET", "/v1/bindings", None).await.body["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn an_approved_run_waits_for_the_locked_vault_and_runs_once_on_unlock() {
    let upstream = FakeOAuth::start().await;
    let key = "waiting-key-3141592653589793";
    *upstream.state.api_key.lock().unwrap() = Some(key.to_string());
    let harness = Harness::new();
    credential_action(&harness, &[upstream.host_port()], &api_key_credential("X-Api-Key", "{key}"), "api_key", true)
        .await;
    init_vault(&harness).await;
    harness.request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": key }))).await;
    harness.request("POST", "/v1/vault/lock", Some(json!({}))).await;

    let url = format!("{}/api/echo", upstream.base_url());
    let pending = harness.run("fetch", json!({ "url": url, "credential": "api_key" })).await;
    assert_eq!(pending.status, StatusCode::ACCEPTED, "{}", pending.body);
    let id = pending.body["approval_id"].as_str().unwrap().to_string();
    let decided =
        harness.request("POST", &format!("/v1/action-approvals/{id}/decide"), Some(json!({ "approved": true }))).await;
    assert_eq!(decided.status, StatusCode::NO_CONTENT);
    let view = crate::approvals::wait_for_status(&harness, &id, &["awaiting_vault"]).await;
    assert_eq!(view["status"], "awaiting_vault");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(upstream.state.api_requests.lock().unwrap().len(), 0, "nothing ran while locked");

    let unlocked = harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(unlocked.status, StatusCode::OK);
    let view = crate::approvals::wait_for_status(&harness, &id, &["completed", "failed"]).await;
    assert_eq!(view["status"], "completed", "{view}");
    // Lock and unlock again: the entry never runs twice.
    harness.request("POST", "/v1/vault/lock", Some(json!({}))).await;
    harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(upstream.state.api_requests.lock().unwrap().len(), 1, "ran exactly once");
}

#[tokio::test]
async fn the_gateway_answers_423_in_the_providers_shape_while_the_vault_is_locked() {
    let harness = Harness::with_options(|options: &mut StateOptions| {
        options.gateway_upstreams = Some(("http://127.0.0.1:9".into(), "http://127.0.0.1:9".into()));
    });
    init_vault(&harness).await;
    harness.request("POST", "/v1/vault/lock", Some(json!({}))).await;
    let anthropic = harness.request("POST", "/v1/messages", Some(json!({ "model": "m", "messages": [] }))).await;
    assert_eq!(anthropic.status, StatusCode::LOCKED);
    assert_eq!(anthropic.body["type"], "error");
    assert!(
        anthropic.body["error"]["message"].as_str().unwrap().contains("aileron vault unlock"),
        "{}",
        anthropic.body
    );
    let openai = harness.request("POST", "/v1/chat/completions", Some(json!({ "model": "m", "messages": [] }))).await;
    assert_eq!(openai.status, StatusCode::LOCKED);
    assert!(openai.body["error"]["message"].as_str().unwrap().contains("aileron vault unlock"), "{}", openai.body);
    // Unlocked, traffic flows again (here to an upstream that is not there: 502, not 423).
    harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(harness.request("POST", "/v1/messages", Some(json!({}))).await.status, StatusCode::BAD_GATEWAY);
}

#[tokio::test]
async fn planted_secrets_never_appear_in_any_output() {
    let upstream = FakeOAuth::start().await;
    let harness = Harness::new();
    credential_action(
        &harness,
        &[upstream.host_port()],
        &api_key_credential("X-Api-Key", "Token {key}"),
        "api_key",
        false,
    )
    .await;
    init_vault(&harness).await;
    // 200 in the suite, 1,000 in the leak campaign (`cargo xtask campaign leaks --long`).
    let count = crate::campaign::scaled(200, 1000);
    let planted: Vec<String> =
        (0..count).map(|i| format!("PLANTED-{i:04}-{:016x}", 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1))).collect();
    for (i, secret) in planted.iter().enumerate() {
        let set = harness
            .request("POST", "/v1/secrets", Some(json!({ "path": format!("planted/s{i:04}"), "value": secret })))
            .await;
        assert_eq!(set.status, StatusCode::CREATED, "{}", set.body);
    }
    let key = &planted[count as usize - 1];
    *upstream.state.api_key.lock().unwrap() = Some(format!("Token {key}"));
    harness.request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": key }))).await;

    let mut outputs = Vec::new();
    let url = format!("{}/api/echo", upstream.base_url());
    outputs.push(harness.run("fetch", json!({ "url": url, "credential": "api_key" })).await.body);
    outputs
        .push(harness.run("fetch", json!({ "url": "http://undeclared.example/", "credential": "api_key" })).await.body);
    harness.guest_action("secret_probe", &[], "run", |_| {}).await;
    outputs.push(harness.run("secret_probe", json!({})).await.body);
    for path in [
        "/v1/status",
        "/v1/vault/status",
        "/v1/secrets",
        "/v1/bindings",
        "/v1/audit?limit=5000",
        "/v1/connectors",
        "/v1/actions",
    ] {
        outputs.push(harness.request("GET", path, None).await.body);
    }
    outputs.push(harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": "wrong" }))).await.body);
    // The console, signed in: every page and its live fragment.
    let cookie = harness.console_cookie().await;
    for page in ["/activity", "/actions", "/connectors", "/accounts", "/agents", "/approvals"] {
        for fragment in [false, true] {
            let mut request = http::Request::builder()
                .uri(page)
                .header("host", format!("127.0.0.1:{}", crate::support::PORT))
                .header("cookie", &cookie);
            if fragment {
                request = request.header("x-aileron-fragment", "1");
            }
            let answer = harness.send(request, None).await;
            assert_eq!(answer.status, StatusCode::OK, "{page}");
            assert!(answer.body.as_str().unwrap().contains("id=\"nav-accounts\"") || fragment, "{page} is signed in");
            outputs.push(answer.body);
        }
    }
    let text: String = outputs.iter().map(Value::to_string).collect();
    harness.state.services.audit.flush().await;
    let upstream_saw =
        upstream.state.api_requests.lock().unwrap().iter().flatten().any(|(_, v)| v.contains(key.as_str()));
    assert!(upstream_saw, "the bound key did reach the upstream");
    // Raw, and in the encodings a careless path would produce (base64 as in Basic auth, hex).
    let encodings = |secret: &str| {
        use base64::Engine as _;
        [
            secret.to_string(),
            base64::engine::general_purpose::STANDARD.encode(secret),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret),
            hex::encode(secret),
        ]
    };
    for secret in &planted {
        for form in encodings(secret) {
            assert!(!text.contains(form.as_str()), "an HTTP answer or console page leaked {secret} as {form}");
        }
    }
    // Files: the vault holds them only encrypted; nothing else on disk holds any.
    let all_files = {
        let mut bytes = Vec::new();
        let mut stack = vec![harness.temp.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    bytes.extend(std::fs::read(&path).unwrap_or_default());
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    };
    for secret in &planted {
        for form in encodings(secret) {
            assert!(!all_files.contains(form.as_str()), "a file holds {secret} as {form}");
        }
    }
    // Debug of every type that holds one.
    let vault_debug = format!("{:?}", harness.state.services.bindings.list());
    assert!(!vault_debug.contains(key.as_str()));
}

#[test]
fn the_cli_inits_unlocks_binds_and_lists_without_echoing_secrets() {
    let cli = Cli::new();
    let env = [("AILERON_VAULT_PASSPHRASE", PASSPHRASE)];
    let init = cli.run_with(&["vault", "init"], &env, None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let package_manifest = manifest(
        "http_get",
        &["api.example.com:443".to_string()],
        &api_key_credential("Authorization", "Bearer {key}"),
    );
    cli.install_package("http_get", &guest_wasm("http_get"), &package_manifest);

    // From standard input (scripts), then list as JSON.
    let key = "ghp_cliKeyFromStdin00000000000000000000";
    let setup = cli.run_with(&["binding", "setup", CONNECTOR, "--identity", "work"], &[], Some(&format!("{key}\n")));
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    let listed: Value =
        serde_json::from_slice(&cli.run_with(&["binding", "list", "--json"], &[], None).stdout).unwrap();
    assert_eq!(listed["items"][0]["name"], "api_key/github:aileron-tests:http_get/work");
    let inspect = cli.run_with(&["binding", "inspect", "api_key/github:aileron-tests:http_get/work"], &[], None);
    assert!(inspect.status.success(), "{}", String::from_utf8_lossy(&inspect.stderr));

    // From an environment variable; a second setup for the same connector is refused with the fix.
    let again = cli.run_with(
        &["binding", "setup", CONNECTOR, "--from-env", "MY_KEY"],
        &[("MY_KEY", "another-key-000000000")],
        None,
    );
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("hint: replace its credential with `aileron binding rebind")
    );

    // Lock, then a wrong passphrase: a clear error with a hint.
    assert!(cli.run_with(&["vault", "lock"], &[], None).status.success());
    let wrong = cli.run_with(&["vault", "unlock"], &[("AILERON_VAULT_PASSPHRASE", "nope")], None);
    assert!(!wrong.status.success());
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(stderr.contains("wrong_passphrase") && stderr.contains("hint:"), "{stderr}");
    let file = cli.scratch().join("pass");
    std::fs::write(&file, format!("{PASSPHRASE}\n")).unwrap();
    let unlock = cli.run_with(&["vault", "unlock", "--passphrase-file", file.to_str().unwrap()], &[], None);
    assert!(unlock.status.success(), "{}", String::from_utf8_lossy(&unlock.stderr));
    let status = cli.run_with(&["vault", "status", "--json"], &[], None);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["state"], "unlocked");
    assert_eq!(status["bindings"], 1);

    // No passphrase and no terminal: a clear error, nothing asked.
    assert!(cli.run_with(&["vault", "lock"], &[], None).status.success());
    let none = cli.run_with(&["vault", "unlock"], &[], None);
    assert!(String::from_utf8_lossy(&none.stderr).contains("AILERON_VAULT_PASSPHRASE"));
    // Secrets from standard input.
    cli.run_with(&["vault", "unlock"], &env, None);
    let set =
        cli.run_with(&["secret", "set", "smtp/password", "--description", "mail"], &[], Some("s3cr3t-value-xyz\n"));
    assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
    let secrets = String::from_utf8_lossy(&cli.run_with(&["secret", "list"], &[], None).stdout).into_owned();
    assert!(secrets.contains("smtp/password") && !secrets.contains("s3cr3t"), "{secrets}");
    assert!(cli.run_with(&["secret", "remove", "smtp/password"], &[], None).status.success());

    // No output of any of this held the key, and neither does any file.
    cli.run_with(&["daemon", "stop"], &[], None);
    assert_eq!(files_containing(&cli.home, key.as_bytes()), Vec::<String>::new());
    assert_eq!(files_containing(&cli.home, PASSPHRASE.as_bytes()), Vec::<String>::new());
}

/// An approved entry waiting for the vault survives a daemon restart (the daemon starts locked)
/// and runs once after the unlock.
#[test]
fn awaiting_vault_survives_a_restart_and_runs_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    aileron::platform::process::install_crypto_provider();
    let upstream = runtime.block_on(FakeOAuth::start());
    let key = "restart-key-2718281828459045";
    *upstream.state.api_key.lock().unwrap() = Some(key.to_string());
    let cli = Cli::new();
    let env = [("AILERON_VAULT_PASSPHRASE", PASSPHRASE)];
    let hash = cli.install_package(
        "http_get",
        &guest_wasm("http_get"),
        &manifest("http_get", &[upstream.host_port()], &api_key_credential("X-Api-Key", "{key}")),
    );
    cli.add_action(&ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        approval: true,
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    assert!(cli.run_with(&["vault", "init"], &env, None).status.success());
    assert!(cli.run_with(&["binding", "setup", CONNECTOR, "--from-env", "K"], &[("K", key)], None).status.success());
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["daemon", "start"]);

    let url = format!("{}/api/echo", upstream.base_url());
    let run = cli.run_with(
        &["action", "run", "fetch", "--arg", &format!("url={url}"), "--arg", "credential=api_key"],
        &[],
        None,
    );
    assert_eq!(run.status.code(), Some(75), "{}", String::from_utf8_lossy(&run.stderr));
    let pending: Value = serde_json::from_str(&cli.ok(&["approval", "list", "--json"])).unwrap();
    let id = pending["items"][0]["id"].as_str().unwrap().to_string();
    cli.ok(&["approval", "approve", &id]);
    let status_of = |cli: &Cli| -> String {
        let view: Value = serde_json::from_str(&cli.ok(&["approval", "status", &id, "--json"])).unwrap();
        view["status"].as_str().unwrap().to_string()
    };
    for _ in 0..1000 {
        if status_of(&cli) == "awaiting_vault" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status_of(&cli), "awaiting_vault");
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["daemon", "start"]);
    assert_eq!(status_of(&cli), "awaiting_vault", "still waiting after the restart");
    assert!(cli.run_with(&["vault", "unlock"], &env, None).status.success());
    for _ in 0..1500 {
        if status_of(&cli) == "completed" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(status_of(&cli), "completed");
    cli.ok(&["daemon", "stop"]);
    cli.ok(&["daemon", "start"]);
    assert!(cli.run_with(&["vault", "unlock"], &env, None).status.success());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(upstream.state.api_requests.lock().unwrap().len(), 1, "ran exactly once across restarts");
    drop(runtime);
}

/// Drives an `aileron binding setup|reauthorize … --no-browser` child as a user's browser would:
/// reads the consent URL it prints, follows the provider's redirect to the CLI's own loopback
/// callback (after a stray request the CLI must ignore), and waits for the command to finish.
fn complete_cli_oauth(cli: &Cli, args: &[&str]) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_aileron"))
        .args(args)
        .env("AILERON_HOME", &cli.home)
        .env_remove("AILERON_URL")
        .env_remove("AILERON_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    stdout.read_line(&mut url).unwrap();
    let client = reqwest::blocking::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let consent = client.get(url.trim()).send().unwrap();
    assert_eq!(consent.status(), 303, "the provider redirects to the CLI");
    let callback = consent.headers()["location"].to_str().unwrap().to_string();
    assert!(callback.starts_with("http://127.0.0.1:") && callback.contains("/callback?"), "{callback}");
    let origin = callback.split("/callback").next().unwrap();
    // The re-attack's L7: a local process that connects and sends nothing (here two, one with half
    // a request line) held the one-at-a-time callback server, and the browser's redirect waited
    // behind it forever. Each connection is served on its own, so the flow below goes through
    // while these stay open.
    let port_address = origin.trim_start_matches("http://");
    let _idle = std::net::TcpStream::connect(port_address).unwrap();
    let mut half = std::net::TcpStream::connect(port_address).unwrap();
    std::io::Write::write_all(&mut half, b"GET /callback?code=x").unwrap();
    // A stray request first (a browser's favicon): answered 404, the CLI keeps waiting.
    assert_eq!(client.get(format!("{origin}/favicon.ico")).send().unwrap().status(), 404);
    // Any local process can reach the port (a launched agent too): a callback that does not carry
    // the flow's state is turned away, and the wait goes on for the real one.
    for forged in [
        format!("{origin}/callback?code=ATTACKER&state=guess"),
        format!("{origin}/callback?code=ATTACKER"),
        format!("{origin}/callback?error=access_denied"),
    ] {
        assert_eq!(client.get(&forged).send().unwrap().status(), 400, "{forged}");
    }
    let page = client.get(&callback).send().unwrap().text().unwrap();
    assert!(page.contains("You can close this tab"), "{page}");
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// `aileron binding setup` for an oauth2 connector, as a user runs it: it prints the consent URL
/// (no browser here), serves the redirect on its own loopback port once, and the daemon binds.
/// When a refresh later fails the binding goes stale, calls name `aileron binding reauthorize`,
/// and running exactly that command makes the binding, and the calls, work again.
#[test]
fn the_cli_runs_the_oauth_flow_on_its_own_loopback_port() {
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(FakeOAuth::start());
    let cli = Cli::new();
    let env = [("AILERON_VAULT_PASSPHRASE", PASSPHRASE)];
    let hash = cli.install_package(
        "http_get",
        &guest_wasm("http_get"),
        &manifest("http_get", &[provider.host_port()], &provider.manifest_credential(None)),
    );
    cli.add_action(&ActionSpec {
        capabilities: &["get", "oauth2"],
        inputs: &[("url", "string", true), ("credential", "string", false)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    assert!(cli.run_with(&["vault", "init"], &env, None).status.success());

    complete_cli_oauth(&cli, &["binding", "setup", CONNECTOR, "--identity", "me", "--no-browser"]);
    let name = "oauth2/github:aileron-tests:http_get/me";
    let listed: Value = serde_json::from_str(&cli.ok(&["binding", "list", "--json"])).unwrap();
    assert_eq!(listed["items"][0]["name"], name, "{listed}");
    assert_eq!(listed["items"][0]["state"], "ok");
    let url = format!("{}/api/echo", provider.base_url());
    let fetch = |cli: &Cli| -> Value {
        let run = cli.run_with(
            &["action", "run", "fetch", "--arg", &format!("url={url}"), "--arg", "credential=oauth2"],
            &[],
            None,
        );
        serde_json::from_slice(&run.stdout)
            .unwrap_or_else(|_| json!({ "stderr": String::from_utf8_lossy(&run.stderr) }))
    };
    assert_eq!(fetch(&cli)["output"]["status"], 200, "bound: the API accepts the token");

    // `inspect` shows what the binding is, never what it holds.
    let token = provider.latest_access_token().unwrap();
    let inspected: Value = serde_json::from_str(&cli.ok(&["binding", "inspect", name, "--json"])).unwrap();
    assert_eq!(
        (inspected["name"].as_str(), inspected["kind"].as_str(), inspected["state"].as_str()),
        (Some(name), Some("oauth2"), Some("ok")),
        "{inspected}"
    );
    let text = cli.ok(&["binding", "inspect", name]);
    assert!(text.contains(name) && text.contains("oauth2"), "{text}");
    assert!(!inspected.to_string().contains(&token) && !text.contains(&token), "inspect never shows the token");

    // The token nears expiry and the provider refuses the refresh: stale, with the exact command.
    provider.state.expires_in.store(30, Ordering::SeqCst);
    complete_cli_oauth(&cli, &["binding", "reauthorize", name, "--no-browser"]);
    provider.state.fail_refresh.store(true, Ordering::SeqCst);
    let failed = fetch(&cli);
    let message = failed.to_string();
    assert!(message.contains(&format!("aileron binding reauthorize {name}")), "{message}");
    let inspected: Value = serde_json::from_str(&cli.ok(&["binding", "inspect", name, "--json"])).unwrap();
    assert_eq!(inspected["state"], "stale", "{inspected}");

    // Exactly the command the error named: the binding is ok again and calls work again.
    provider.state.fail_refresh.store(false, Ordering::SeqCst);
    provider.state.expires_in.store(3600, Ordering::SeqCst);
    complete_cli_oauth(&cli, &["binding", "reauthorize", name, "--no-browser"]);
    let inspected: Value = serde_json::from_str(&cli.ok(&["binding", "inspect", name, "--json"])).unwrap();
    assert_eq!(inspected["state"], "ok", "{inspected}");
    assert_eq!(fetch(&cli)["output"]["status"], 200, "reauthorized: calls work again");

    // Revoked from the CLI: gone, and calls need a binding again.
    cli.ok(&["binding", "revoke", name]);
    let listed: Value = serde_json::from_str(&cli.ok(&["binding", "list", "--json"])).unwrap();
    assert_eq!(listed["items"], json!([]), "{listed}");
    assert!(fetch(&cli).to_string().contains("binding_required"));
    cli.run_with(&["daemon", "stop"], &[], None);
    for token in provider.state.access_tokens_issued() {
        assert_eq!(
            files_containing(&cli.home, token.as_bytes()),
            Vec::<String>::new(),
            "no file holds an access token in clear"
        );
    }
    drop(runtime);
}

/// A damaged vault file does not stop the daemon: it starts, shows the vault locked, runs what
/// needs no credential, and unlocking names the damage with a hint; nothing overwrites the file.
#[tokio::test]
async fn a_damaged_vault_file_is_reported_on_unlock_and_never_overwritten() {
    let temp = tempfile::tempdir().unwrap();
    let home = aileron::platform::home::Home::at(temp.path().join("home")).unwrap();
    std::fs::create_dir_all(home.root()).unwrap();
    std::fs::write(home.secrets(), b"{\"version\": 1, \"truncated").unwrap();
    let mut options = StateOptions::new(crate::support::TOKEN.into());
    options.listen_port = crate::support::PORT;
    let state = aileron::surfaces::daemon::AppState::open(home.clone(), options).expect("the daemon starts");
    let router = aileron::surfaces::daemon::app(state.clone());
    let harness = crate::support::Harness { temp, home, state, router };
    assert_eq!(harness.request("GET", "/v1/vault/status", None).await.body["state"], "locked");
    let unlock = harness.request("POST", "/v1/vault/unlock", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(unlock.body["error"]["code"], "vault_damaged", "{}", unlock.body);
    assert!(unlock.body["error"]["hint"].as_str().unwrap().contains("secrets.json"), "{}", unlock.body);
    let init = harness.request("POST", "/v1/vault/init", Some(json!({ "passphrase": PASSPHRASE }))).await;
    assert_eq!(init.status, StatusCode::CONFLICT, "a damaged vault is never silently replaced: {}", init.body);
    assert_eq!(std::fs::read(harness.home.secrets()).unwrap(), b"{\"version\": 1, \"truncated");
}

/// The JSON routes no other harness test reaches answer their declared types as well (the harness
/// checks every success against its route's declaration, `support::declared_answer`): one audit
/// record, an action's patch, the secrets list, a binding's revocation, keyring trust and revoke,
/// and a connector's removal.
#[tokio::test]
async fn the_json_routes_other_tests_leave_out_answer_their_declared_types() {
    let harness = Harness::new();
    credential_action(
        &harness,
        &["127.0.0.1:9".to_string()],
        &api_key_credential("Authorization", "{key}"),
        "api_key",
        false,
    )
    .await;
    init_vault(&harness).await;
    let ok = |answer: &crate::support::TestResponse, status: u16| {
        assert_eq!(answer.status.as_u16(), status, "{}", answer.body);
    };
    let set =
        harness.request("POST", "/v1/secrets", Some(json!({ "path": "llm/test", "value": "v-1234567890" }))).await;
    ok(&set, 201);
    ok(&harness.request("GET", "/v1/secrets", None).await, 200);
    let bound = harness
        .request("POST", "/v1/bindings/setup", Some(json!({ "connector": CONNECTOR, "api_key": "k-1234567890" })))
        .await;
    ok(&bound, 201);
    let name = aileron::wire::path_segment(bound.body["name"].as_str().unwrap());
    ok(&harness.request("DELETE", &format!("/v1/bindings/{name}"), None).await, 200);
    let trusted = harness
        .request(
            "POST",
            "/v1/keyring/trust",
            Some(json!({ "authority": "github://q", "key": "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=" })),
        )
        .await;
    ok(&trusted, 201);
    ok(&harness.request("POST", "/v1/keyring/revoke", Some(json!({ "authority": "github://q" }))).await, 200);
    ok(&harness.request("PATCH", "/v1/actions/fetch", Some(json!({ "enabled": false }))).await, 200);
    let records = harness.audit().await;
    let id = records.iter().find_map(|r| r["audit_id"].as_str()).unwrap().to_string();
    ok(&harness.request("GET", &format!("/v1/audit/{id}"), None).await, 200);
    ok(&harness.request("DELETE", "/v1/actions/fetch", None).await, 204);
    let removed = harness
        .request("POST", "/v1/connectors/remove", Some(json!({ "reference": format!("{CONNECTOR}@1.0.0") })))
        .await;
    ok(&removed, 200);
}

/// `aileron auth import gh` (SPEC §15): the token gh keeps in `~/.config/gh/hosts.yml` goes into the
/// vault, bound to the bundled spec-only connector `github://aileron/github-cli` (installed with
/// its consent first); the original file is left as it was; nothing prints the token; a second
/// import says how to replace the binding; with no token anywhere the error says where to get one.
#[test]
fn auth_import_gh_binds_the_token_gh_already_has_to_the_bundled_spec() {
    const TOKEN: &str = "gho_importedFromGhHosts0000000000000000";
    let cli = Cli::new();
    let user = cli.scratch().join("user");
    let hosts = user.join(".config/gh/hosts.yml");
    std::fs::create_dir_all(hosts.parent().unwrap()).unwrap();
    let hosts_text = format!("github.com:\n    user: octocat\n    oauth_token: {TOKEN}\n    git_protocol: https\n");
    std::fs::write(&hosts, &hosts_text).unwrap();
    let home = user.to_str().unwrap();
    let env = [
        ("HOME", home),
        ("AILERON_VAULT_PASSPHRASE", PASSPHRASE),
        ("GH_TOKEN", ""),
        ("GITHUB_TOKEN", ""),
        ("GH_CONFIG_DIR", ""),
        ("XDG_CONFIG_HOME", ""),
    ];
    let init = cli.run_with(&["vault", "init"], &env, None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));

    let imported = cli.run_with(&["auth", "import", "gh", "--yes"], &env, None);
    let (stdout, stderr) = (String::from_utf8_lossy(&imported.stdout), String::from_utf8_lossy(&imported.stderr));
    assert!(imported.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("bound api_key/github:aileron:github-cli/gh from"), "{stderr}");
    assert!(stderr.contains(hosts.to_str().unwrap()), "names where the token came from: {stderr}");
    assert!(!stdout.contains(TOKEN) && !stderr.contains(TOKEN), "the token is never printed");
    assert_eq!(std::fs::read_to_string(&hosts).unwrap(), hosts_text, "the original is left as it was");
    let listed: Value =
        serde_json::from_slice(&cli.run_with(&["binding", "list", "--json"], &env, None).stdout).unwrap();
    assert_eq!(listed["items"][0]["name"], "api_key/github:aileron:github-cli/gh", "{listed:#}");
    let shown = cli.run_with(&["connector", "show", "github://aileron/github-cli"], &env, None);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("mergePullRequest"), "the bundled spec is installed");

    let again = cli.run_with(&["auth", "import", "gh", "--yes"], &env, None);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("aileron binding rebind"), "{again:?}");

    std::fs::remove_file(&hosts).unwrap();
    let none = cli.run_with(&["auth", "import", "gh", "--yes"], &env, None);
    assert!(!none.status.success());
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(
        stderr.contains("no GitHub token to import") && stderr.contains("hint:") && stderr.contains("gh auth"),
        "{stderr}"
    );
}

/// `aileron auth import git` and `netrc`: github.com's password in git's credential store or in
/// `~/.netrc` is bound to the bundled GitHub spec, the file left as it was; a store without one is
/// refused with a hint.
#[test]
fn auth_import_git_and_netrc_bind_githubs_stored_password() {
    for (tool, file, text, token) in [
        (
            "git",
            ".git-credentials",
            "https://octo:glpat-other@gitlab.com\nhttps://octo:ghp_fromGitStore%2F0000000000000000000@github.com\n",
            "ghp_fromGitStore/0000000000000000000",
        ),
        (
            "netrc",
            ".netrc",
            "machine example.com login a password b\nmachine github.com\n  login octo\n  password ghp_fromNetrc00000000000000000000000\n",
            "ghp_fromNetrc00000000000000000000000",
        ),
    ] {
        let cli = Cli::new();
        let user = cli.scratch().join("user");
        std::fs::create_dir_all(&user).unwrap();
        let home = user.to_str().unwrap();
        let env = [("HOME", home), ("AILERON_VAULT_PASSPHRASE", PASSPHRASE), ("XDG_CONFIG_HOME", ""), ("NETRC", "")];
        let init = cli.run_with(&["vault", "init"], &env, None);
        assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
        let none = cli.run_with(&["auth", "import", tool, "--yes"], &env, None);
        let stderr = String::from_utf8_lossy(&none.stderr);
        assert!(!none.status.success() && stderr.contains("hint:"), "{tool}: {stderr}");

        std::fs::write(user.join(file), text).unwrap();
        let imported = cli.run_with(&["auth", "import", tool, "--yes"], &env, None);
        let (stdout, stderr) = (String::from_utf8_lossy(&imported.stdout), String::from_utf8_lossy(&imported.stderr));
        assert!(imported.status.success(), "{tool}: {stdout}{stderr}");
        assert!(stderr.contains(&format!("bound api_key/github:aileron:github-cli/{tool} from")), "{stderr}");
        assert!(stderr.contains(file), "names the file: {stderr}");
        assert!(!stdout.contains(token) && !stderr.contains(token), "the token is never printed");
        assert_eq!(std::fs::read_to_string(user.join(file)).unwrap(), text, "the original is left as it was");
        let inspected =
            cli.run_with(&["binding", "inspect", &format!("api_key/github:aileron:github-cli/{tool}")], &env, None);
        assert!(inspected.status.success(), "{}", String::from_utf8_lossy(&inspected.stderr));
    }
}

/// `aileron auth import gcloud`: the refresh token of an `authorized_user` Application Default
/// Credentials file is bound (oauth2) to the bundled Google Cloud spec, the file left as it was; a
/// service account key, or no file, is refused with a hint.
#[test]
fn auth_import_gcloud_binds_the_application_default_login() {
    const REFRESH: &str = "1//0gcloudRefreshTokenTheAgentNeverSees000000";
    let cli = Cli::new();
    let user = cli.scratch().join("user");
    let adc = user.join(".config/gcloud/application_default_credentials.json");
    std::fs::create_dir_all(adc.parent().unwrap()).unwrap();
    let home = user.to_str().unwrap();
    let env = [
        ("HOME", home),
        ("AILERON_VAULT_PASSPHRASE", PASSPHRASE),
        ("GOOGLE_APPLICATION_CREDENTIALS", ""),
        ("CLOUDSDK_CONFIG", ""),
    ];
    let init = cli.run_with(&["vault", "init"], &env, None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let none = cli.run_with(&["auth", "import", "gcloud", "--yes"], &env, None);
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success() && stderr.contains("gcloud auth application-default login"), "{stderr}");

    std::fs::write(&adc, r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}"#).unwrap();
    let service = cli.run_with(&["auth", "import", "gcloud", "--yes"], &env, None);
    let stderr = String::from_utf8_lossy(&service.stderr);
    assert!(!service.status.success() && stderr.contains("service_account") && stderr.contains("hint:"), "{stderr}");

    let login = json!({
        "account": "",
        "client_id": "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com",
        "client_secret": "d-FL95Q19q7MQmFpd7hHD0Ty",
        "quota_project_id": "acme-dev",
        "refresh_token": REFRESH,
        "type": "authorized_user",
        "universe_domain": "googleapis.com"
    })
    .to_string();
    std::fs::write(&adc, &login).unwrap();
    let imported = cli.run_with(&["auth", "import", "gcloud", "--yes"], &env, None);
    let (stdout, stderr) = (String::from_utf8_lossy(&imported.stdout), String::from_utf8_lossy(&imported.stderr));
    assert!(imported.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("bound oauth2/github:aileron:google-cloud/gcloud from"), "{stderr}");
    assert!(stderr.contains("application_default_credentials.json"), "names the file: {stderr}");
    assert!(!stdout.contains(REFRESH) && !stderr.contains(REFRESH), "the token is never printed");
    assert_eq!(std::fs::read_to_string(&adc).unwrap(), login, "the original is left as it was");
    let shown = cli.run_with(&["connector", "show", "github://aileron/google-cloud"], &env, None);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(
            "DELETE /storage/v1/b/{bucket}/o/** (and everything under it) requests to storage.googleapis.com"
        ),
        "{shown}"
    );
    let inspected: Value = serde_json::from_slice(
        &cli.run_with(&["binding", "inspect", "oauth2/github:aileron:google-cloud/gcloud", "--json"], &env, None)
            .stdout,
    )
    .unwrap();
    assert_eq!(inspected["kind"], "oauth2", "{inspected:#}");
    assert!(!inspected.to_string().contains(REFRESH), "{inspected:#}");
}

/// `aileron auth import aws`: the keys of the `AWS_PROFILE` profile (with its session token) are
/// bound to the bundled AWS spec, the credentials file left as it was; a profile without keys, or
/// no file at all, is refused with a hint.
#[test]
fn auth_import_aws_binds_the_profiles_keys_to_the_bundled_spec() {
    const SECRET: &str = "workProfileSecretAccessKey00000000000000";
    let cli = Cli::new();
    let user = cli.scratch().join("user");
    let credentials = user.join(".aws/credentials");
    std::fs::create_dir_all(credentials.parent().unwrap()).unwrap();
    let text = format!(
        "[default]\naws_access_key_id = AKIADEFAULT000000000\naws_secret_access_key = defaultSecret\n\n[work]\n\
         aws_access_key_id = AKIAWORK000000000000\naws_secret_access_key = {SECRET}\naws_session_token = IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN\n[empty]\n"
    );
    std::fs::write(&credentials, &text).unwrap();
    let home = user.to_str().unwrap();
    let env = |profile: &'static str| {
        [
            ("HOME", home),
            ("AILERON_VAULT_PASSPHRASE", PASSPHRASE),
            ("AWS_ACCESS_KEY_ID", ""),
            ("AWS_SECRET_ACCESS_KEY", ""),
            ("AWS_SHARED_CREDENTIALS_FILE", ""),
            ("AWS_PROFILE", profile),
        ]
    };
    let init = cli.run_with(&["vault", "init"], &env("work"), None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));

    let empty = cli.run_with(&["auth", "import", "aws", "--yes"], &env("empty"), None);
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(!empty.status.success());
    assert!(stderr.contains("profile `empty`") && stderr.contains("hint:"), "{stderr}");

    let imported = cli.run_with(&["auth", "import", "aws", "--yes"], &env("work"), None);
    let (stdout, stderr) = (String::from_utf8_lossy(&imported.stdout), String::from_utf8_lossy(&imported.stderr));
    assert!(imported.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("bound aws_sigv4/github:aileron:aws-cli/aws from profile work of"), "{stderr}");
    assert!(stderr.contains("temporary keys"), "a session token is said to expire: {stderr}");
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "the secret is never printed");
    assert_eq!(std::fs::read_to_string(&credentials).unwrap(), text, "the original is left as it was");
    let shown = cli.run_with(&["connector", "show", "github://aileron/aws-cli"], &env("work"), None);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("DELETE /{bucket}/** (and everything under it) requests to s3.amazonaws.com"), "{shown}");

    std::fs::remove_file(&credentials).unwrap();
    let none = cli.run_with(&["auth", "import", "aws", "--yes"], &env("work"), None);
    let stderr = String::from_utf8_lossy(&none.stderr);
    assert!(!none.status.success());
    assert!(stderr.contains("no AWS keys to import") && stderr.contains("hint:"), "{stderr}");
}
