//! Operation specs at a launched agent's proxy (SPEC §15 "Each request", decision 0017): which
//! installed connector's `[[proxy.operations]]` a request is, and the credential its binding
//! puts on it. The agent's tools send a placeholder; the bound credential replaces whatever they
//! sent in that header, and an upstream that echoes it back has it redacted from the response.

use std::collections::BTreeMap;
use std::sync::Arc;

use aileron_core::manifest::ConnectorManifest;
use aileron_core::policy::{OperationIndex, OperationMatch};
use aileron_core::{Failure, FailureClass};

use crate::stores::bindings::{CredentialSource, ResolvedCredential, Secret};
use crate::stores::oauth::OAuthFlows;
use crate::stores::store::Store;

/// An installed connector with operations: the newest verified version of its FQN.
#[derive(Debug)]
pub struct SealedConnector {
    pub manifest: Arc<ConnectorManifest>,
}

impl SealedConnector {
    pub fn fqn(&self) -> &aileron_core::Fqn {
        &self.manifest.name
    }
}

/// The session's view of every installed connector's operations, taken when its network was
/// attached, and where their credentials come from.
pub struct Credentialing {
    index: OperationIndex<Arc<SealedConnector>>,
    credentials: Option<(Arc<dyn CredentialSource>, Arc<OAuthFlows>)>,
    /// Where `approval = true` operations wait; without it they are refused.
    pub approvals: Option<Arc<dyn super::RequestApprovals>>,
}

/// What the proxy does with one request.
pub enum Decision<'a> {
    /// No operation covers it: forwarded unmodified (`sandbox.proxy.passthrough`).
    Passthrough,
    /// Equally specific operations (`fqn/operation` each): forwarded without a credential.
    Tied(Vec<String>),
    /// A path a server could read as another path, to an operation's host: refused.
    NotCanonical,
    Matched {
        connector: &'a SealedConnector,
        operation: &'a aileron_core::manifest::ProxyOperation,
    },
}

/// The credential for a matched request, and what to redact.
pub struct Sealed {
    pub resolved: ResolvedCredential,
    pub injection: SealedInjection,
}

impl Sealed {
    /// What an upstream must not echo back to the agent: the secret, and the whole header value
    /// it went in (a `Basic` header's base64 carries the key too).
    pub fn echo_candidates(&self) -> Vec<&str> {
        let mut candidates = self.resolved.echo_candidates();
        if let SealedInjection::Header(_, value) = &self.injection {
            candidates.push(value.expose());
        }
        // The user's access key id, which a request signed here carries.
        if let crate::stores::bindings::Injection::Aws(credentials) = &self.resolved.injection {
            candidates.push(&credentials.access_key_id);
        }
        candidates
    }
}

/// How the credential goes on the request.
pub enum SealedInjection {
    /// One header (api_key, oauth2), replacing whatever the tool sent in it.
    Header(String, Secret),
    /// The tool's AWS signature stripped and the request signed again with the bound keys.
    Aws { region: String, service: String },
}

/// The access key id a launched agent's AWS tools sign with (shaped like one: 20 uppercase
/// letters and digits).
pub const AWS_PLACEHOLDER_KEY_ID: &str = "AKIAAILERONSEALED000";

/// GraphQL bodies the proxy reads whole to find which operation they are.
pub const MAX_GRAPHQL_BODY_BYTES: usize = 1024 * 1024;

/// Bodies the proxy reads whole to hash for a signature (a request that states no
/// `x-amz-content-sha256`); larger ones are refused with a hint.
pub const MAX_SIGNED_BODY_BYTES: usize = 16 * 1024 * 1024;

impl Credentialing {
    /// No operations: every request is a passthrough.
    pub fn none() -> Credentialing {
        Credentialing { index: OperationIndex::default(), credentials: None, approvals: None }
    }

    /// Every installed FQN's newest version whose manifest has `[proxy]`, verified against its
    /// pinned hash (a manifest edited after install adds no operation); entries that fail to
    /// verify are left out with a warning.
    pub fn from_store(store: &Store, credentials: Arc<dyn CredentialSource>, oauth: Arc<OAuthFlows>) -> Credentialing {
        let mut connectors = Vec::new();
        for entry in newest_with_operations(store) {
            match store.load_verified(&entry.hash) {
                Ok(verified) => connectors.push(SealedConnector { manifest: verified.manifest }),
                Err(failure) => {
                    log_line!("aileron daemon: warning: {}'s operations are not used: {}", entry.fqn, failure.message)
                }
            }
        }
        Credentialing::new(connectors, Some((credentials, oauth)))
    }

    /// What a launched agent finds in each connector's `placeholder_env` (SPEC §15): the
    /// placeholder, for connectors with operations whose credential is bound, so unmodified tools
    /// send requests the proxy then credentials. Sorted by name; the newest version of each FQN.
    pub fn placeholder_env(store: &Store, bindings: &crate::stores::bindings::Bindings) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for entry in newest_with_operations(store) {
            let (fqn, manifest) = (entry.fqn.to_string(), entry.manifest);
            let kind = manifest.credential_kind();
            if kind.is_none_or(|kind| bindings.for_connector(&fqn, kind).is_none()) {
                continue;
            }
            for name in manifest.proxy.iter().flat_map(|proxy| proxy.placeholder_env.iter()) {
                env.insert(name.clone(), aileron_core::manifest::PLACEHOLDER.to_string());
            }
            if kind == Some(aileron_core::manifest::CredentialKind::AwsSigv4) {
                // Keys for the AWS tools to sign with; the proxy strips their signature and signs
                // again with the bound ones.
                env.insert("AWS_ACCESS_KEY_ID".to_string(), AWS_PLACEHOLDER_KEY_ID.to_string());
                env.insert("AWS_SECRET_ACCESS_KEY".to_string(), aileron_core::manifest::PLACEHOLDER.to_string());
            }
        }
        env
    }

    /// The same operations, holding `approval = true` ones in `approvals`.
    pub fn with_approvals(mut self, approvals: Arc<dyn super::RequestApprovals>) -> Credentialing {
        self.approvals = Some(approvals);
        self
    }

    pub fn new(
        connectors: Vec<SealedConnector>,
        credentials: Option<(Arc<dyn CredentialSource>, Arc<OAuthFlows>)>,
    ) -> Credentialing {
        let mut entries = Vec::new();
        for connector in connectors.into_iter().map(Arc::new) {
            for operation in connector.manifest.proxy.iter().flat_map(|proxy| proxy.operations.iter()) {
                entries.push((connector.clone(), operation.clone()));
            }
        }
        Credentialing { index: OperationIndex::new(entries), credentials, approvals: None }
    }

    /// Whether an operation names `destination` (`host:port`) literally: such a host is reached
    /// even when private, and is on the allowlist (SPEC §15).
    pub fn names_host(&self, destination: &str) -> bool {
        self.index.names_host(destination)
    }

    /// Whether deciding this request needs its GraphQL document ([`Credentialing::decide`]).
    pub fn needs_graphql(&self, method: &str, destination: &str, path: &str) -> bool {
        self.index.needs_graphql(method, destination, path)
    }

    /// Whether a GraphQL operation covers `path` on `destination`, whatever the method.
    pub fn covers_graphql(&self, destination: &str, path: &str) -> bool {
        self.index.covers_graphql(None, destination, path)
    }

    /// `query`: the request target's query; `headers`: its header names; `graphql`: the names of
    /// the request's GraphQL document, when [`Credentialing::needs_graphql`].
    pub fn decide(
        &self,
        method: &str,
        destination: &str,
        path: &str,
        query: Option<&str>,
        headers: &[&str],
        graphql: Option<&std::collections::BTreeSet<String>>,
    ) -> Decision<'_> {
        match self.index.match_request_with(method, destination, path, query, headers, graphql) {
            OperationMatch::None => Decision::Passthrough,
            OperationMatch::NotCanonical => Decision::NotCanonical,
            OperationMatch::Ambiguous(tied) => Decision::Tied(
                tied.iter().map(|(connector, operation)| format!("{}/{}", connector.fqn(), operation.name)).collect(),
            ),
            OperationMatch::Matched { connector, operation } => Decision::Matched { connector, operation },
        }
    }

    /// The credential bound to `connector`: `Ok(None)` when none is bound (the request goes
    /// without one, SPEC §15), a failure when one is bound but cannot be used (vault locked,
    /// refresh failed, a value no header can carry).
    pub async fn seal(
        &self,
        connector: &SealedConnector,
        operation: &aileron_core::manifest::ProxyOperation,
        destination: &str,
    ) -> Result<Option<Sealed>, Failure> {
        let (Some((credentials, oauth)), Some(kind)) = (&self.credentials, connector.manifest.credential_kind()) else {
            return Ok(None);
        };
        let resolved = match credentials.resolve(&connector.fqn().to_string(), kind, oauth.as_ref()).await {
            Ok(resolved) => resolved,
            Err(failure) if failure.class == FailureClass::BindingRequired => return Ok(None),
            Err(failure) => return Err(failure),
        };
        // An operation's own api_key format (git over https: `Basic {basic:x-access-token}`).
        if let (
            Some(format),
            Some(aileron_core::manifest::CredentialMethod::ApiKey(api_key)),
            crate::stores::bindings::Injection::Token(secret),
        ) = (&operation.format, connector.manifest.credential.as_ref().map(|c| &c.method), &resolved.injection)
        {
            let Some(value) = api_key.with_format(format).header_value(secret.expose()) else {
                return Err(Failure::new(
                    FailureClass::BindingFailed,
                    aileron_core::Boundary::Runtime,
                    "the bound credential is not a valid header value",
                ));
            };
            let injection = SealedInjection::Header(api_key.header.clone(), Secret::new(value));
            return Ok(Some(Sealed { injection, resolved }));
        }
        if let Some(header) = crate::dataplane::egress::token_header(&connector.manifest, &resolved) {
            let (name, value) = header?;
            return Ok(Some(Sealed { injection: SealedInjection::Header(name, value), resolved }));
        }
        let Some(aileron_core::manifest::CredentialMethod::AwsSigv4(signing)) =
            connector.manifest.credential.as_ref().map(|credential| &credential.method)
        else {
            return Err(Failure::new(
                FailureClass::BindingFailed,
                aileron_core::Boundary::Runtime,
                format!(
                    "binding `{}` is of another kind than {}'s manifest declares",
                    resolved.binding.name,
                    connector.fqn()
                ),
            ));
        };
        let host = destination.rsplit_once(':').map_or(destination, |(host, _)| host);
        let service = operation.service.as_ref().unwrap_or(&signing.service);
        let (region, service) = match &signing.region {
            Some(region) => (region.clone(), service.clone()),
            None => aileron_core::sigv4::region_and_service(host, Some(service)).ok_or_else(|| {
                Failure::new(
                    FailureClass::BindingFailed,
                    aileron_core::Boundary::Runtime,
                    format!(
                        "cannot derive the AWS region from host {host}; {}'s manifest should declare it",
                        connector.fqn()
                    ),
                )
            })?,
        };
        Ok(Some(Sealed { injection: SealedInjection::Aws { region, service }, resolved }))
    }
}

/// Signs `request` again for AWS with the bound keys: the tool's `authorization`, `x-amz-date`
/// and `x-amz-security-token` are dropped; the payload hash is the one the tool stated in
/// `x-amz-content-sha256` (a hex digest, `UNSIGNED-PAYLOAD`, a `STREAMING-*` chunked upload: the
/// body streams through and the service checks it), else the body is read (at most
/// [`MAX_SIGNED_BODY_BYTES`]) and hashed. Signed: `host`, every `x-amz-*` header, `content-md5`
/// and `content-type`.
pub async fn sign_aws(
    request: hyper::Request<axum::body::Body>,
    credentials: &aileron_core::sigv4::AwsCredentials,
    region: &str,
    service: &str,
    destination: &str,
) -> Result<hyper::Request<axum::body::Body>, Failure> {
    use aileron_core::sigv4::{SignOptions, SigningParams, sign_payload_hash};
    let refused = |message: String| Failure::new(FailureClass::BindingFailed, aileron_core::Boundary::Runtime, message);
    let (mut parts, body) = request.into_parts();
    for name in ["authorization", "x-amz-date", "x-amz-security-token"] {
        parts.headers.remove(name);
    }
    let stated = parts.headers.remove("x-amz-content-sha256").and_then(|value| value.to_str().ok().map(str::to_string));
    let (payload_hash, body, hash_header) = match stated {
        Some(stated) => (stated, body, true),
        None => {
            let bytes = axum::body::to_bytes(body, MAX_SIGNED_BODY_BYTES).await.map_err(|_| {
                Failure::resource_limit(
                    "request_body",
                    format!("a request to sign may carry at most {MAX_SIGNED_BODY_BYTES} bytes unless it states x-amz-content-sha256"),
                )
            })?;
            let hash = hex::encode(aileron_core::sha256::Sha256::digest(&bytes));
            (
                hash,
                axum::body::Body::from(bytes),
                aileron_core::sigv4::PathStyle::for_service(service) == aileron_core::sigv4::PathStyle::S3,
            )
        }
    };
    let host = parts
        .headers
        .get(hyper::header::HOST)
        .and_then(|host| host.to_str().ok())
        .map(str::to_string)
        .or_else(|| parts.uri.authority().map(|authority| authority.to_string()))
        .unwrap_or_else(|| destination.to_string());
    let target = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    let url = url::Url::parse(&format!("https://{host}{target}")).map_err(|e| refused(format!("signing: {e}")))?;
    let mut signed: Vec<(String, String)> = vec![("host".to_string(), host.clone())];
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if name.starts_with("x-amz-") || name == "content-md5" || name == "content-type" {
            let value = value.to_str().map_err(|_| refused(format!("signing: header {name} is not text")))?;
            signed.push((name.to_string(), value.to_string()));
        }
    }
    let amz_date = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let params = SigningParams { region, service, amz_date: &amz_date };
    let options = SignOptions { content_sha256_header: hash_header };
    let added = sign_payload_hash(parts.method.as_str(), &url, &signed, &payload_hash, credentials, &params, options)
        .map_err(|error| refused(format!("signing the request: {error}")))?;
    for (name, value) in added {
        let name = hyper::header::HeaderName::from_bytes(name.as_bytes()).map_err(|e| refused(e.to_string()))?;
        let mut value = hyper::header::HeaderValue::from_str(&value).map_err(|e| refused(e.to_string()))?;
        value.set_sensitive(true);
        parts.headers.insert(name, value);
    }
    Ok(hyper::Request::from_parts(parts, body))
}

/// Each installed FQN's newest version whose manifest has `[proxy]` (a store that cannot be read
/// has none, with a warning).
fn newest_with_operations(store: &Store) -> Vec<crate::stores::store::StoreEntry> {
    let entries = store.list().unwrap_or_else(|error| {
        log_line!("aileron daemon: warning: reading the connector store for proxy operations: {error}");
        Vec::new()
    });
    let mut newest: BTreeMap<String, crate::stores::store::StoreEntry> = BTreeMap::new();
    for entry in entries.into_iter().filter(|entry| entry.manifest.proxy.is_some()) {
        let fqn = entry.fqn.to_string();
        if newest.get(&fqn).is_none_or(|kept| kept.version < entry.version) {
            newest.insert(fqn, entry);
        }
    }
    newest.into_values().collect()
}
