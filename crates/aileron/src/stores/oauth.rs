//! OAuth2 Authorization Code + PKCE (S256) for `oauth2` bindings (SPEC §6, ADR-0002 "OAuth
//! credentials are publisher-owned"): pending authorization sessions, the code exchange and the
//! refresh, with the `oauth2` crate over our reqwest 0.13 client.
//!
//! Invariant: a session is single-use and lives at most 10 minutes; its PKCE verifier and state
//! are 32 fresh random bytes each; a code is exchanged only with the session whose state it
//! carries (compared in constant time). The redirect is always a loopback URL.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aileron_core::manifest::OAuth2Provider;
use oauth2::basic::BasicClient;
use oauth2::{
    AsyncHttpClient, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, HttpRequest, HttpResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};
use zeroize::Zeroizing;

use crate::stores::bindings::{TokenEnvelope, TokenRefresher};

/// How long an authorization may take (SPEC §6).
pub const SESSION_TTL: Duration = Duration::from_secs(600);
/// Token endpoint answers larger than this are refused.
const MAX_TOKEN_RESPONSE_BYTES: usize = 256 * 1024;
/// How long a token endpoint may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Who serves the redirect: the CLI on its own loopback port, or the daemon's callback route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Cli,
    /// The daemon's callback redirects the browser to this loopback URL when done.
    Daemon {
        return_to: url::Url,
    },
}

/// What the binding will be once the code is exchanged.
#[derive(Debug, Clone)]
pub struct Target {
    pub connector: String,
    pub identity: String,
    /// `Some(name)` when reauthorizing an existing binding.
    pub rebind: Option<String>,
}

struct Pending {
    target: Target,
    provider: OAuth2Provider,
    redirect_uri: String,
    verifier: Zeroizing<String>,
    state: Zeroizing<String>,
    mode: Mode,
    created: Instant,
}

/// A started authorization: what the user's browser opens.
#[derive(Debug, Clone)]
pub struct Started {
    pub session_id: String,
    pub authorize_url: String,
    pub redirect_uri: String,
}

/// A session whose code was exchanged.
pub struct Completed {
    pub target: Target,
    pub envelope: TokenEnvelope,
    pub mode: Mode,
}

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Invalid(String),
    #[error("no pending authorization matches (unknown, already used, or older than 10 minutes)")]
    UnknownSession,
    #[error("the authorization's state does not match; nothing was bound")]
    StateMismatch,
    #[error("the provider refused the authorization: {0}")]
    Denied(String),
    #[error("exchanging the authorization code failed: {0}")]
    Exchange(String),
}

impl OAuthError {
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::Invalid(_) => "invalid_request",
            OAuthError::UnknownSession => "unknown_session",
            OAuthError::StateMismatch => "state_mismatch",
            OAuthError::Denied(_) => "authorization_denied",
            OAuthError::Exchange(_) => "token_exchange_failed",
        }
    }
}

/// Pending authorizations and the client that talks to token endpoints.
pub struct OAuthFlows {
    sessions: Mutex<HashMap<String, Pending>>,
    http: OAuthHttp,
}

impl OAuthFlows {
    pub fn new() -> anyhow::Result<OAuthFlows> {
        Ok(OAuthFlows { sessions: Mutex::new(HashMap::new()), http: OAuthHttp::new()? })
    }

    /// Starts an authorization: fresh PKCE verifier and state, the provider's authorize URL.
    pub fn start(
        &self,
        provider: &OAuth2Provider,
        target: Target,
        redirect_uri: String,
        mode: Mode,
    ) -> Result<Started, OAuthError> {
        check_endpoint("authorize_url", &provider.authorize_url)?;
        check_endpoint("token_url", &provider.token_url)?;
        if !is_loopback_http(&redirect_uri) {
            return Err(OAuthError::Invalid(format!("redirect URI `{redirect_uri}` is not a loopback http URL")));
        }
        let client = client(provider, &redirect_uri)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256_len(32);
        let state = CsrfToken::new_random_len(32);
        let state_value = state.secret().clone();
        let (authorize_url, _) = client
            .authorize_url(|| state)
            .add_scopes(provider.scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .url();
        let session_id = format!("oauth-{}", uuid::Uuid::new_v4().simple());
        let mut sessions = self.sessions.lock().expect("oauth sessions poisoned");
        sessions.retain(|_, pending| pending.created.elapsed() < SESSION_TTL);
        sessions.insert(
            session_id.clone(),
            Pending {
                target,
                provider: provider.clone(),
                redirect_uri: redirect_uri.clone(),
                verifier: Zeroizing::new(verifier.into_secret()),
                state: Zeroizing::new(state_value),
                mode,
                created: Instant::now(),
            },
        );
        Ok(Started { session_id, authorize_url: authorize_url.to_string(), redirect_uri })
    }

    /// CLI mode: the CLI caught `code` and `state` on its loopback port.
    pub async fn finish(&self, session_id: &str, code: &str, state: &str) -> Result<Completed, OAuthError> {
        let pending = self.take(|id, _| id == session_id)?;
        if !aileron_core::constant_time::eq(pending.state.as_bytes(), state.as_bytes()) {
            return Err(OAuthError::StateMismatch);
        }
        self.exchange(pending, code).await
    }

    /// Daemon mode: the provider redirected the browser to the daemon with `state` and `code`
    /// (or `error`). The session is found by its state and consumed either way.
    pub async fn callback(
        &self,
        state: &str,
        code: Option<&str>,
        error: Option<&str>,
    ) -> Result<Completed, (OAuthError, Option<Mode>)> {
        let pending = self
            .take(|_, pending| {
                matches!(pending.mode, Mode::Daemon { .. })
                    && aileron_core::constant_time::eq(pending.state.as_bytes(), state.as_bytes())
            })
            .map_err(|error| (error, None))?;
        let mode = pending.mode.clone();
        if let Some(error) = error {
            return Err((OAuthError::Denied(error.chars().take(200).collect()), Some(mode)));
        }
        let Some(code) = code else {
            return Err((OAuthError::Invalid("the callback carried no code".into()), Some(mode)));
        };
        self.exchange(pending, code).await.map_err(|error| (error, Some(mode)))
    }

    fn take(&self, matches: impl Fn(&str, &Pending) -> bool) -> Result<Pending, OAuthError> {
        let mut sessions = self.sessions.lock().expect("oauth sessions poisoned");
        sessions.retain(|_, pending| pending.created.elapsed() < SESSION_TTL);
        let id = sessions.iter().find(|(id, pending)| matches(id, pending)).map(|(id, _)| id.clone());
        id.and_then(|id| sessions.remove(&id)).ok_or(OAuthError::UnknownSession)
    }

    async fn exchange(&self, pending: Pending, code: &str) -> Result<Completed, OAuthError> {
        let client = client(&pending.provider, &pending.redirect_uri)?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(pending.verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|error| {
                let secrets =
                    [code, pending.verifier.as_str(), pending.provider.client_secret.as_deref().unwrap_or("")];
                OAuthError::Exchange(describe_token_error(&error, &secrets))
            })?;
        let envelope = envelope_from(&response, &pending.provider, None);
        Ok(Completed { target: pending.target, envelope, mode: pending.mode })
    }

    /// Number of authorizations waiting (tests and status).
    pub fn pending_count(&self) -> usize {
        let mut sessions = self.sessions.lock().expect("oauth sessions poisoned");
        sessions.retain(|_, pending| pending.created.elapsed() < SESSION_TTL);
        sessions.len()
    }
}

impl TokenRefresher for OAuthFlows {
    fn refresh<'a>(
        &'a self,
        envelope: &'a TokenEnvelope,
    ) -> Pin<Box<dyn Future<Output = Result<TokenEnvelope, String>> + Send + 'a>> {
        Box::pin(async move {
            let refresh_token = envelope.refresh_token.clone().ok_or("no refresh token")?;
            let provider = OAuth2Provider {
                // The authorize URL plays no part in a refresh; the token URL is the one bound.
                authorize_url: envelope.token_url.clone(),
                token_url: envelope.token_url.clone(),
                client_id: envelope.client_id.clone(),
                client_secret: envelope.client_secret.clone(),
                scopes: envelope.scopes.clone(),
            };
            let client = client_without_redirect(&provider).map_err(|error| error.to_string())?;
            let response = client
                .exchange_refresh_token(&RefreshToken::new(refresh_token.clone()))
                .request_async(&self.http)
                .await
                .map_err(|error| {
                    let secrets = [refresh_token.as_str(), envelope.client_secret.as_deref().unwrap_or("")];
                    format!("the token endpoint refused the refresh: {}", describe_token_error(&error, &secrets))
                })?;
            Ok(envelope_from(&response, &provider, envelope.refresh_token.as_deref()))
        })
    }
}

/// A client with its authorize and token endpoints set.
type Client = BasicClient<
    oauth2::EndpointSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointNotSet,
    oauth2::EndpointSet,
>;

fn client(provider: &OAuth2Provider, redirect_uri: &str) -> Result<Client, OAuthError> {
    let redirect =
        RedirectUrl::new(redirect_uri.to_string()).map_err(|e| OAuthError::Invalid(format!("redirect URI: {e}")))?;
    Ok(client_without_redirect(provider)?.set_redirect_uri(redirect))
}

fn client_without_redirect(provider: &OAuth2Provider) -> Result<Client, OAuthError> {
    let authorize =
        AuthUrl::new(provider.authorize_url.clone()).map_err(|e| OAuthError::Invalid(format!("authorize_url: {e}")))?;
    let token =
        TokenUrl::new(provider.token_url.clone()).map_err(|e| OAuthError::Invalid(format!("token_url: {e}")))?;
    let mut client =
        BasicClient::new(ClientId::new(provider.client_id.clone())).set_auth_uri(authorize).set_token_uri(token);
    // Only when the manifest has one (SPEC §6): PKCE is what binds the code to this session.
    if let Some(secret) = &provider.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.clone()));
    }
    Ok(client)
}

fn envelope_from(
    response: &oauth2::basic::BasicTokenResponse,
    provider: &OAuth2Provider,
    previous_refresh: Option<&str>,
) -> TokenEnvelope {
    let now = chrono::Utc::now().timestamp();
    TokenEnvelope {
        access_token: response.access_token().secret().clone(),
        // A provider may rotate the refresh token, or keep the old one valid and send none.
        refresh_token: response
            .refresh_token()
            .map(|t| t.secret().clone())
            .or_else(|| previous_refresh.map(str::to_string)),
        // A token endpoint's word, so bounded: `i64::MAX` seconds overflowed the addition (the
        // ninth re-attack); a token is taken as expiring within a year at the latest.
        expires_at: response.expires_in().map(|lifetime| {
            now.saturating_add(i64::try_from(lifetime.as_secs()).unwrap_or(i64::MAX).min(MAX_TOKEN_LIFETIME))
        }),
        token_type: Some(format!("{:?}", response.token_type()).to_ascii_lowercase()),
        client_id: provider.client_id.clone(),
        client_secret: provider.client_secret.clone(),
        token_url: provider.token_url.clone(),
        scopes: response
            .scopes()
            .map(|scopes| scopes.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| provider.scopes.clone()),
    }
}

/// The provider's error without anything it echoed of our request: its description cut and
/// without control characters, and `secrets` (the refresh token, the code and its verifier, the
/// client's secret) redacted in every form an echo takes (the sixteenth re-attack's token
/// endpoint echoed the refresh token into it, and it reached the agent, the audit log and the
/// vault's clear metadata).
fn describe_token_error<E: std::error::Error>(
    error: &oauth2::RequestTokenError<E, oauth2::basic::BasicErrorResponse>,
    secrets: &[&str],
) -> String {
    let text = described(error);
    let echoes = crate::dataplane::redaction::Echoes::of(secrets);
    if echoes.found_in(text.as_bytes()) {
        String::from_utf8_lossy(&echoes.redact_whole(text.as_bytes())).into_owned()
    } else {
        text
    }
}

fn described<E: std::error::Error>(error: &oauth2::RequestTokenError<E, oauth2::basic::BasicErrorResponse>) -> String {
    match error {
        oauth2::RequestTokenError::ServerResponse(response) => {
            let mut text = response.error().to_string();
            if let Some(description) = response.error_description() {
                text.push_str(": ");
                text.extend(description.chars().filter(|c| !c.is_control()).take(200));
            }
            text
        }
        oauth2::RequestTokenError::Request(error) => format!("request failed: {error}"),
        oauth2::RequestTokenError::Parse(_, _) => "the token endpoint's answer is not a valid token response".into(),
        oauth2::RequestTokenError::Other(other) => other.chars().take(200).collect(),
    }
}

/// Provider endpoints are https, or http on loopback (local fakes and development).
fn check_endpoint(field: &str, value: &str) -> Result<(), OAuthError> {
    let url = url::Url::parse(value).map_err(|e| OAuthError::Invalid(format!("{field} `{value}`: {e}")))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback_http(value) => Ok(()),
        _ => Err(OAuthError::Invalid(format!("{field} must be https (or http on a loopback address), got `{value}`"))),
    }
}

/// `http://127.0.0.1…`, `http://[::1]…` or `http://localhost…`.
pub fn is_loopback_http(value: &str) -> bool {
    let Ok(url) = url::Url::parse(value) else { return false };
    if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(domain)) => domain == "localhost",
        None => false,
    }
}

/// The longest lifetime a token endpoint may give a token, in seconds (a year).
const MAX_TOKEN_LIFETIME: i64 = 365 * 24 * 3600;

/// reqwest 0.13 as the `oauth2` crate's HTTP client (its bundled one is reqwest 0.12): no
/// redirects (a token endpoint that redirects is not followed), bounded answers.
struct OAuthHttp {
    client: reqwest::Client,
}

impl OAuthHttp {
    fn new() -> anyhow::Result<OAuthHttp> {
        // A token endpoint is the manifest's: reached like a connector's hosts, at public addresses
        // only (a loopback address written literally is a local fake, as the manifest allows) and
        // never through a proxy from the environment (which would resolve the name itself).
        let client = crate::dataplane::tls::reqwest_builder(crate::dataplane::tls::Alpn::Http2AndHttp1)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(std::sync::Arc::new(crate::dataplane::public_address::PublicOnlyResolver))
            .no_proxy()
            .timeout(TOKEN_TIMEOUT)
            .build()?;
        Ok(OAuthHttp { client })
    }
}

#[derive(Debug, thiserror::Error)]
enum OAuthHttpError {
    #[error("{0}")]
    Request(String),
}

impl<'c> AsyncHttpClient<'c> for OAuthHttp {
    type Error = OAuthHttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, OAuthHttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            // An address written literally is not resolved: judged here.
            let literal =
                parts.uri.host().and_then(|host| host.trim_matches(['[', ']']).parse::<std::net::IpAddr>().ok());
            if let Some(ip) =
                literal.filter(|ip| !ip.is_loopback() && !crate::dataplane::public_address::is_elsewhere(*ip))
            {
                return Err(OAuthHttpError::Request(format!("{ip} is not a public address")));
            }
            let response = self
                .client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|error| {
                    OAuthHttpError::Request(if error.is_timeout() {
                        "timed out".into()
                    } else {
                        "connection failed".into()
                    })
                })?;
            let mut builder = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                builder = builder.header(name, value);
            }
            let mut body = Vec::new();
            let mut response = response;
            while let Some(chunk) =
                response.chunk().await.map_err(|_| OAuthHttpError::Request("reading the answer failed".into()))?
            {
                if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
                    return Err(OAuthHttpError::Request("the token endpoint's answer is too large".into()));
                }
                body.extend_from_slice(&chunk);
            }
            builder.body(body).map_err(|error| OAuthHttpError::Request(error.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sixteenth re-attack: a token endpoint that echoed the refresh token in its
    /// `error_description` put it in the agent's 502, the audit log and the vault's metadata.
    #[test]
    fn a_token_endpoints_error_is_told_without_what_it_echoed() {
        use base64::Engine as _;
        let secret = "1//0refreshTokenTheAgentNeverSees0000000";
        let encoded = base64::engine::general_purpose::STANDARD.encode(secret);
        let response = oauth2::basic::BasicErrorResponse::new(
            oauth2::basic::BasicErrorResponseType::InvalidGrant,
            Some(format!("bad token {secret} ({encoded})\u{1b}[2J")),
            None,
        );
        let error: oauth2::RequestTokenError<std::io::Error, _> = oauth2::RequestTokenError::ServerResponse(response);
        let told = describe_token_error(&error, &[secret, ""]);
        assert!(told.starts_with("invalid_grant: bad token [REDACTED]"), "{told}");
        assert!(!told.contains(secret) && !told.contains(&encoded[..16]) && !told.contains('\u{1b}'), "{told}");
    }

    fn provider() -> OAuth2Provider {
        OAuth2Provider {
            authorize_url: "https://auth.example/authorize".into(),
            token_url: "https://auth.example/token".into(),
            client_id: "client".into(),
            client_secret: None,
            scopes: vec!["read".into()],
        }
    }

    /// The ninth re-attack: a manifest's token endpoint was reached at any address, through a
    /// proxy from the environment too. A private address, written or resolved, is not reached.
    #[tokio::test]
    async fn a_token_endpoint_at_a_private_address_is_not_reached() {
        let http = OAuthHttp::new().unwrap();
        for url in ["https://10.0.0.1/token", "https://[fd00::1]/token", "https://169.254.169.254/token"] {
            let request = http::Request::builder().method("POST").uri(url).body(Vec::new()).unwrap();
            let error = http.call(request).await.unwrap_err();
            assert!(error.to_string().contains("is not a public address"), "{url}: {error}");
        }
        let named = http::Request::builder().method("POST").uri("https://localhost:9/token").body(Vec::new()).unwrap();
        assert!(http.call(named).await.is_err(), "a name of this machine is not resolved for it");
    }

    /// The ninth re-attack: `"expires_in": 9223372036854775807` from a token endpoint overflowed
    /// the expiry's addition (a panic on every run using the binding, in a debug build).
    #[test]
    fn a_token_lifetime_is_taken_as_a_year_at_most() {
        let mut response = oauth2::basic::BasicTokenResponse::new(
            oauth2::AccessToken::new("t".into()),
            oauth2::basic::BasicTokenType::Bearer,
            oauth2::EmptyExtraTokenFields {},
        );
        response.set_expires_in(Some(&Duration::from_secs(u64::MAX)));
        let envelope = envelope_from(&response, &provider(), None);
        let left = envelope.expires_at.unwrap() - chrono::Utc::now().timestamp();
        assert!((MAX_TOKEN_LIFETIME - 5..=MAX_TOKEN_LIFETIME).contains(&left), "{left}");
    }

    fn target() -> Target {
        Target { connector: "github://acme/widget".into(), identity: "default".into(), rebind: None }
    }

    /// A session older than 10 minutes is gone: finishing it is `UnknownSession`, nothing is
    /// exchanged; and a redirect off loopback is refused at the start.
    #[tokio::test]
    async fn sessions_expire_after_ten_minutes_and_redirects_stay_on_loopback() {
        crate::platform::process::install_crypto_provider();
        let flows = OAuthFlows::new().unwrap();
        let started = flows.start(&provider(), target(), "http://127.0.0.1:1234/callback".into(), Mode::Cli).unwrap();
        let state = url::Url::parse(&started.authorize_url)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "state")
            .map(|(_, v)| v.to_string())
            .unwrap();
        assert_eq!(flows.pending_count(), 1);
        {
            let mut sessions = flows.sessions.lock().unwrap();
            let pending = sessions.get_mut(&started.session_id).unwrap();
            pending.created = Instant::now().checked_sub(SESSION_TTL + Duration::from_secs(1)).unwrap();
        }
        assert!(matches!(flows.finish(&started.session_id, "code", &state).await, Err(OAuthError::UnknownSession)));
        assert_eq!(flows.pending_count(), 0);
        for redirect in ["http://evil.example/callback", "https://127.0.0.1/callback"] {
            assert!(
                matches!(flows.start(&provider(), target(), redirect.into(), Mode::Cli), Err(OAuthError::Invalid(_))),
                "{redirect}"
            );
        }
        let mut insecure = provider();
        insecure.token_url = "http://auth.example/token".into();
        assert!(matches!(
            flows.start(&insecure, target(), "http://127.0.0.1:1/callback".into(), Mode::Cli),
            Err(OAuthError::Invalid(_))
        ));
    }

    #[test]
    fn only_loopback_http_urls_are_loopback() {
        for (url, expected) in [
            ("http://127.0.0.1:8123/callback", true),
            ("http://localhost:9/x", true),
            ("http://[::1]:80/", true),
            ("https://127.0.0.1/", false),
            ("http://127.0.0.1.evil.example/", false),
            ("http://user@127.0.0.1/", false),
            ("http://10.0.0.1/", false),
            ("http://example.com/", false),
            ("javascript:alert(1)", false),
        ] {
            assert_eq!(is_loopback_http(url), expected, "{url}");
        }
    }
}
