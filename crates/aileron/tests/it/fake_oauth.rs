//! A fake OAuth2 provider and API on loopback, strict the way real providers are: `/authorize`
//! answers with a redirect carrying a code (as if the user clicked Allow), `/token` exchanges a
//! code only with the right PKCE verifier (S256), client id and redirect URI, once, and
//! refreshes with a valid refresh token (rotating it). `/api/echo` requires a current access
//! token or API key and echoes every request header back, in the body and in a response header,
//! so tests can check that an echoed secret reaches the guest redacted.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aileron_core::sha256::Sha256;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};

pub const CLIENT_ID: &str = "aileron-test-client";

#[derive(Default)]
pub struct ProviderState {
    /// code → (challenge, redirect_uri)
    codes: Mutex<HashMap<String, (String, String)>>,
    access_tokens: Mutex<Vec<String>>,
    refresh_tokens: Mutex<Vec<String>>,
    /// Lifetime of issued access tokens (seconds).
    pub expires_in: AtomicI64,
    /// Refresh requests fail with `invalid_grant`.
    pub fail_refresh: AtomicBool,
    /// `/authorize` answers `error=access_denied`.
    pub deny: AtomicBool,
    pub token_requests: AtomicUsize,
    pub refreshes: AtomicUsize,
    /// The API accepts this key too (`X-Api-Key` or raw `Authorization`).
    pub api_key: Mutex<Option<String>>,
    /// Every `/api/echo` request's headers.
    pub api_requests: Mutex<Vec<Vec<(String, String)>>>,
    /// `/api/echo` answers `Content-Encoding: gzip` whatever it was asked.
    pub always_encode: Mutex<bool>,
    /// The client secret the provider registered for [`CLIENT_ID`] (set by
    /// [`FakeOAuth::manifest_credential`]): token requests must present exactly this one, and a
    /// public client (none) must present none.
    client_secret: Mutex<Option<String>>,
}

pub struct FakeOAuth {
    pub addr: SocketAddr,
    pub state: Arc<ProviderState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOAuth {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOAuth {
    pub async fn start() -> FakeOAuth {
        let state = Arc::new(ProviderState { expires_in: AtomicI64::new(3600), ..ProviderState::default() });
        let app = Router::new()
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/api/echo", get(echo))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeOAuth { addr, state, task }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// The `[capabilities.credential]` block of an oauth2 connector using this provider.
    pub fn manifest_credential(&self, client_secret: Option<&str>) -> String {
        *self.state.client_secret.lock().unwrap() = client_secret.map(str::to_string);
        let secret = client_secret.map(|s| format!("client_secret = \"{s}\"\n")).unwrap_or_default();
        format!(
            "[capabilities.credential]\nkind = \"oauth2\"\nscope = \"read your things\"\n\n[capabilities.credential.oauth2]\n\
             authorize_url = \"{base}/authorize\"\ntoken_url = \"{base}/token\"\nclient_id = \"{CLIENT_ID}\"\n{secret}scopes = [\"read\", \"write\"]\n",
            base = self.base_url()
        )
    }

    /// A refresh token this provider will honour, as if another tool (gcloud, a CLI's own login)
    /// had completed the authorization flow: what `--refresh-token-from-env` imports.
    pub fn mint_refresh_token(&self) -> String {
        let refresh = random_token("rt-");
        self.state.refresh_tokens.lock().unwrap().push(refresh.clone());
        refresh
    }

    pub fn latest_access_token(&self) -> Option<String> {
        self.state.access_tokens.lock().unwrap().last().cloned()
    }
}

impl ProviderState {
    /// Every access token this provider issued.
    pub fn access_tokens_issued(&self) -> Vec<String> {
        self.access_tokens.lock().unwrap().clone()
    }
}

fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 18];
    getrandom::fill(&mut bytes).unwrap();
    format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

async fn authorize(State(state): State<Arc<ProviderState>>, Query(query): Query<HashMap<String, String>>) -> Response {
    let get = |key: &str| query.get(key).cloned().unwrap_or_default();
    if get("client_id") != CLIENT_ID || get("response_type") != "code" || get("code_challenge_method") != "S256" {
        return (StatusCode::BAD_REQUEST, "bad authorize request").into_response();
    }
    let mut redirect = url::Url::parse(&get("redirect_uri")).unwrap();
    if state.deny.load(Ordering::SeqCst) {
        redirect.query_pairs_mut().append_pair("error", "access_denied").append_pair("state", &get("state"));
        return Redirect::to(redirect.as_str()).into_response();
    }
    let code = random_token("code-");
    state.codes.lock().unwrap().insert(code.clone(), (get("code_challenge"), get("redirect_uri")));
    redirect.query_pairs_mut().append_pair("code", &code).append_pair("state", &get("state"));
    Redirect::to(redirect.as_str()).into_response()
}

fn token_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({ "error": error, "error_description": format!("fake provider: {error}") })))
        .into_response()
}

fn issue(state: &ProviderState) -> Response {
    let access = random_token("at-");
    let refresh = random_token("rt-");
    state.access_tokens.lock().unwrap().push(access.clone());
    state.refresh_tokens.lock().unwrap().push(refresh.clone());
    Json(json!({
        "access_token": access,
        "token_type": "bearer",
        "expires_in": state.expires_in.load(Ordering::SeqCst),
        "refresh_token": refresh,
        "scope": "read write",
    }))
    .into_response()
}

async fn token(State(state): State<Arc<ProviderState>>, headers: HeaderMap, body: String) -> Response {
    state.token_requests.fetch_add(1, Ordering::SeqCst);
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes()).into_owned().collect();
    let get = |key: &str| form.get(key).cloned().unwrap_or_default();
    // The client authenticates in the body (public client) or with HTTP Basic (client_secret),
    // RFC 6749 §2.3.1: a confidential client must prove its secret, a public one has none to send.
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let (presented_id, presented_secret) = match basic.as_deref().and_then(|pair| pair.split_once(':')) {
        Some((id, secret)) => (id.to_string(), Some(secret.to_string())),
        None => (get("client_id"), form.get("client_secret").cloned()),
    };
    let registered = state.client_secret.lock().unwrap().clone();
    if presented_id != CLIENT_ID || presented_secret != registered {
        return token_error("invalid_client");
    }
    match get("grant_type").as_str() {
        "authorization_code" => {
            let Some((challenge, redirect_uri)) = state.codes.lock().unwrap().remove(&get("code")) else {
                return token_error("invalid_grant");
            };
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(get("code_verifier").as_bytes()));
            if computed != challenge || redirect_uri != get("redirect_uri") {
                return token_error("invalid_grant");
            }
            issue(&state)
        }
        "refresh_token" => {
            state.refreshes.fetch_add(1, Ordering::SeqCst);
            if state.fail_refresh.load(Ordering::SeqCst) {
                return token_error("invalid_grant");
            }
            let presented = get("refresh_token");
            let mut refresh_tokens = state.refresh_tokens.lock().unwrap();
            let Some(position) = refresh_tokens.iter().position(|t| *t == presented) else {
                return token_error("invalid_grant");
            };
            // Rotation: a refresh token works once.
            refresh_tokens.remove(position);
            drop(refresh_tokens);
            issue(&state)
        }
        _ => token_error("unsupported_grant_type"),
    }
}

async fn echo(State(state): State<Arc<ProviderState>>, headers: HeaderMap) -> Response {
    let pairs: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    state.api_requests.lock().unwrap().push(pairs.clone());
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let bearer_ok = authorization
        .strip_prefix("Bearer ")
        .is_some_and(|token| state.access_tokens.lock().unwrap().last().is_some_and(|latest| latest == token));
    let key_ok = state.api_key.lock().unwrap().as_deref().is_some_and(|key| key == api_key || key == authorization);
    if !bearer_ok && !key_ok {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "message": "bad credentials" }))).into_response();
    }
    let body: Value = json!({ "ok": true, "headers": pairs.iter().cloned().collect::<HashMap<_, _>>() });
    let echoed = if authorization.is_empty() { api_key } else { authorization };
    // Asked for gzip, the answer says it is compressed (its bytes are not: the receiver must
    // refuse it by its header, since it could not redact inside a real one either).
    let compressed = headers.get("accept-encoding").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("gzip"))
        || *state.always_encode.lock().unwrap();
    let mut response = ([("x-echo-credential", echoed)], Json(body)).into_response();
    if compressed {
        response.headers_mut().insert("content-encoding", axum::http::HeaderValue::from_static("gzip"));
    }
    response
}
