//! Connector manifests (`manifest.toml`, SPEC §3.1 and §5): strict decoding, validation, and the
//! plain-words capability list shown in the install consent prompt.
//!
//! The manifest is the connector's request for capabilities; nothing it does not declare is ever
//! granted (the sandbox boundary). This module only decodes and validates the declaration: the egress
//! decisions live in `policy`, spawn enforcement in the shell.

mod describe;
mod proxy;
mod raw;
mod spawn;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::identity::{ConnectorRef, ContentHash, Fqn};
use crate::parse_error::{FieldPath, ParseError, TomlSource};
use crate::policy::validate_host_port;

pub use proxy::{PLACEHOLDER, PathTemplate, ProxyOperation, ProxySpec, Segment, normalise_segment};
pub use spawn::{SpawnCapability, SpawnLimits, SpawnOperation, SpawnProgram};

/// The credential kinds a connector may ask for: one enum the compiler follows wherever a kind
/// decides something (injection, bindings, the console, the CLI); its string form only on the
/// wire and on disk.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum CredentialKind {
    #[serde(rename = "api_key")]
    ApiKey,
    #[serde(rename = "oauth2")]
    OAuth2,
    #[serde(rename = "aws_sigv4")]
    AwsSigv4,
}

impl CredentialKind {
    pub const ALL: [CredentialKind; 3] = [CredentialKind::ApiKey, CredentialKind::OAuth2, CredentialKind::AwsSigv4];

    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::ApiKey => "api_key",
            CredentialKind::OAuth2 => "oauth2",
            CredentialKind::AwsSigv4 => "aws_sigv4",
        }
    }

    pub fn parse(kind: &str) -> Option<CredentialKind> {
        CredentialKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl fmt::Display for CredentialKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[connector.idempotency] default`: whether the runtime may retry this connector's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Idempotency {
    #[default]
    Idempotent,
    NotIdempotent,
}

/// A decoded and validated `manifest.toml`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectorManifest {
    pub name: Fqn,
    pub version: semver::Version,
    pub provenance_hash: Option<ContentHash>,
    pub publisher: Option<String>,
    pub idempotency: Idempotency,
    /// `None` when `[capabilities.network]` is absent: no network at all.
    pub network: Option<NetworkCapability>,
    pub credential: Option<CredentialCapability>,
    pub runtime: Option<RuntimeCapability>,
    pub spawn: Option<SpawnCapability>,
    /// `[provides] intents`, for discovery only.
    pub intents: Vec<String>,
    /// `[proxy]`: requests of a launched agent's own tools this connector credentials (SPEC §15).
    pub proxy: Option<ProxySpec>,
}

/// `[capabilities.network]`: exact `host:port` pairs, lowercase host, no wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkCapability {
    pub hosts: Vec<String>,
}

/// `[capabilities.credential]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialCapability {
    /// Human prose shown in the consent prompt.
    pub scope: Option<String>,
    pub method: CredentialMethod,
}

impl CredentialCapability {
    pub fn kind(&self) -> CredentialKind {
        match self.method {
            CredentialMethod::ApiKey(_) => CredentialKind::ApiKey,
            CredentialMethod::OAuth2(_) => CredentialKind::OAuth2,
            CredentialMethod::AwsSigv4(_) => CredentialKind::AwsSigv4,
        }
    }
}

/// How the host injects the bound credential, per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialMethod {
    ApiKey(ApiKeyHeader),
    OAuth2(OAuth2Provider),
    AwsSigv4(AwsSigv4Signing),
}

/// api_key injection: `<header>: <format with {key} substituted>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyHeader {
    pub header: String,
    pub format: String,
}

impl ApiKeyHeader {
    pub const DEFAULT_HEADER: &'static str = "Authorization";
    pub const DEFAULT_FORMAT: &'static str = "Bearer {key}";

    /// The header value for a bound key; `None` when the key itself would break the header (CR, LF or
    /// another control character), so a bad binding can never smuggle in extra headers.
    pub fn header_value(&self, key: &str) -> Option<String> {
        render_key_format(&self.format, key)
    }
}

/// `format` with `{key}` replaced by the key and `{basic:USER}` by HTTP Basic credentials for
/// `USER` and the key (`base64("USER:key")`, what git sends over https); `None` when the key
/// holds a control character.
pub fn render_key_format(format: &str, key: &str) -> Option<String> {
    use base64::Engine as _;
    if key.chars().any(|c| c.is_control()) {
        return None;
    }
    let mut out = format.replace("{key}", key);
    while let Some(start) = out.find("{basic:") {
        let end = start + out[start..].find('}')?;
        let user = &out[start + "{basic:".len()..end];
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{key}"));
        out.replace_range(start..=end, &encoded);
    }
    Some(out)
}

/// Whether `format` names where the key goes: `{key}`, or `{basic:USER}` with a user name.
pub fn key_format_is_valid(format: &str) -> bool {
    let basic_ok = format.match_indices("{basic:").all(|(at, _)| {
        format[at + "{basic:".len()..].split_once('}').is_some_and(|(user, _)| {
            !user.is_empty() && user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        })
    });
    (format.contains("{key}") || format.contains("{basic:"))
        && basic_ok
        && !format.chars().any(|c| c.is_control() && c != '\t')
}

impl ApiKeyHeader {
    /// The same header with another format (an operation's own, SPEC §15).
    pub fn with_format(&self, format: &str) -> ApiKeyHeader {
        ApiKeyHeader { header: self.header.clone(), format: format.to_string() }
    }
}

/// `[capabilities.credential.oauth2]`: the publisher's OAuth app.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuth2Provider {
    pub authorize_url: String,
    pub token_url: String,
    pub client_id: String,
    /// Provider plumbing rather than a real secret (SPEC §6), but still kept out of Debug output.
    pub client_secret: Option<String>,
    pub scopes: Vec<String>,
}

impl fmt::Debug for OAuth2Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth2Provider")
            .field("authorize_url", &self.authorize_url)
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "****"))
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// aws_sigv4 signing: the service is required; the region may also come from the binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSigv4Signing {
    pub service: String,
    pub region: Option<String>,
}

/// `[capabilities.runtime] imports`: the host functions the module may import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeCapability {
    pub imports: Vec<String>,
}

impl ConnectorManifest {
    /// The manifest's hosts; empty when the connector has no network access.
    pub fn network_hosts(&self) -> &[String] {
        self.network.as_ref().map(|n| n.hosts.as_slice()).unwrap_or(&[])
    }

    pub fn credential_kind(&self) -> Option<CredentialKind> {
        self.credential.as_ref().map(CredentialCapability::kind)
    }

    pub fn is_idempotent(&self) -> bool {
        self.idempotency == Idempotency::Idempotent
    }

    /// `None` when `[capabilities.runtime]` is absent (no import restriction).
    pub fn runtime_imports(&self) -> Option<&[String]> {
        self.runtime.as_ref().map(|r| r.imports.as_slice())
    }

    /// `<fqn>@<version>`.
    pub fn reference(&self) -> ConnectorRef {
        ConnectorRef { fqn: self.name.clone(), version: self.version.clone() }
    }

    /// Every capability in plain words, for the install consent prompt.
    pub fn describe_capabilities(&self) -> Vec<String> {
        describe::describe(self)
    }
}

/// Decodes and validates a connector manifest. `file` names it in errors (e.g. `manifest.toml`).
pub fn parse_manifest(text: &str, file: &str) -> Result<ConnectorManifest, ParseError> {
    let source = TomlSource::new(file, text, 1);
    let raw: raw::RawManifest = source.decode()?;
    // Every string of a manifest may reach a consent screen, a page or a terminal: one that
    // hides characters could draw a fake line there or hide a capability (the re-attack's H5).
    if let Some((path, c)) = source.first_hidden_text() {
        return Err(source.error(
            &path,
            format!("contains the invisible or control character U+{:04X}", c as u32),
            "manifest text is shown to the user as it is written: remove control, formatting and invisible characters",
        ));
    }
    ManifestValidator { source: &source }.validate(raw)
}

struct ManifestValidator<'s, 'a> {
    source: &'s TomlSource<'a>,
}

fn root() -> FieldPath {
    FieldPath::root()
}

impl ManifestValidator<'_, '_> {
    fn err(&self, path: &FieldPath, message: impl Into<String>, hint: impl Into<String>) -> ParseError {
        self.source.error(path, message, hint)
    }

    fn required<T>(&self, value: Option<T>, path: &FieldPath, hint: &str) -> Result<T, ParseError> {
        let key = match path.segments().last() {
            Some(crate::parse_error::PathSegment::Key(key)) => key.clone(),
            _ => path.to_string(),
        };
        value.ok_or_else(|| self.err(path, format!("missing required key `{key}`"), hint))
    }

    fn non_blank(&self, value: String, path: &FieldPath, hint: &str) -> Result<String, ParseError> {
        if value.trim().is_empty() {
            return Err(self.err(path, "must not be empty", hint));
        }
        Ok(value)
    }

    fn validate(&self, raw: raw::RawManifest) -> Result<ConnectorManifest, ParseError> {
        let connector_path = root().key("connector");
        let connector = self.required(
            raw.connector,
            &connector_path,
            "start the manifest with a [connector] table holding name and version",
        )?;
        let name_path = connector_path.key("name");
        let name = self.required(connector.name, &name_path, "add name = \"github://<owner>/<repo>\"")?;
        let name = Fqn::parse(&name).map_err(|e| {
            self.err(
                &name_path,
                e.to_string(),
                "use the FQN the connector is published under, e.g. github://acme/slack",
            )
        })?;
        let version_path = connector_path.key("version");
        let version = self.required(connector.version, &version_path, "add version = \"1.0.0\"")?;
        let version = semver::Version::parse(&version).map_err(|e| {
            self.err(
                &version_path,
                format!("`{version}` is not a strict SemVer version: {e}"),
                "write MAJOR.MINOR.PATCH, e.g. \"1.2.0\" (no `v` prefix, no ranges)",
            )
        })?;
        let provenance_hash = match connector.provenance_hash {
            None => None,
            Some(hash) => Some(ContentHash::parse(&hash).map_err(|e| {
                self.err(
                    &connector_path.key("provenance_hash"),
                    e.to_string(),
                    "write sha256: and 64 lowercase hex digits",
                )
            })?),
        };
        let publisher = match connector.publisher {
            None => None,
            Some(p) => {
                Some(self.non_blank(p, &connector_path.key("publisher"), "name the publisher or drop the key")?)
            }
        };
        let idempotency = self.idempotency(connector.idempotency, &connector_path.key("idempotency"))?;

        let capabilities = raw.capabilities.unwrap_or_default();
        let capabilities_path = root().key("capabilities");
        let network = match capabilities.network {
            None => None,
            Some(network) => Some(self.network(network, &capabilities_path.key("network"))?),
        };
        let credential = match capabilities.credential {
            None => None,
            Some(credential) => Some(self.credential(credential, &capabilities_path.key("credential"))?),
        };
        let runtime = match capabilities.runtime {
            None => None,
            Some(runtime) => Some(self.runtime(runtime, &capabilities_path.key("runtime"))?),
        };
        let spawn = match capabilities.spawn {
            None => None,
            Some(spawn) => Some(self.spawn(spawn, &capabilities_path.key("spawn"), credential.is_some())?),
        };
        let proxy = match raw.proxy {
            None => None,
            Some(proxy) => Some(self.proxy(
                proxy,
                &root().key("proxy"),
                network.as_ref().map(|n| n.hosts.as_slice()).unwrap_or(&[]),
            )?),
        };
        // An operation's own `format` or `service` refines one credential kind only.
        let kind = credential.as_ref().map(CredentialCapability::kind);
        for (field, owner, present) in [
            (
                "format",
                CredentialKind::ApiKey,
                (|o: &ProxyOperation| o.format.is_some()) as fn(&ProxyOperation) -> bool,
            ),
            ("service", CredentialKind::AwsSigv4, |o: &ProxyOperation| o.service.is_some()),
        ] {
            let misplaced = proxy.iter().flat_map(|proxy| proxy.operations.iter()).position(present);
            if let Some(index) = misplaced.filter(|_| kind != Some(owner)) {
                return Err(self.err(
                    &root().key("proxy").key("operations").index(index).key(field),
                    format!("an operation's `{field}` applies only to an {owner} credential"),
                    format!("remove `{field}`, or declare [capabilities.credential] kind = \"{owner}\""),
                ));
            }
        }
        let intents = match raw.provides {
            None => Vec::new(),
            Some(provides) => {
                self.intents(provides.intents.unwrap_or_default(), &root().key("provides").key("intents"))?
            }
        };
        Ok(ConnectorManifest {
            name,
            version,
            provenance_hash,
            publisher,
            idempotency,
            network,
            credential,
            runtime,
            spawn,
            intents,
            proxy,
        })
    }

    fn idempotency(&self, raw: Option<raw::RawIdempotency>, path: &FieldPath) -> Result<Idempotency, ParseError> {
        let Some(default) = raw.and_then(|r| r.default) else {
            return Ok(Idempotency::default());
        };
        match default.as_str() {
            "idempotent" => Ok(Idempotency::Idempotent),
            "not_idempotent" => Ok(Idempotency::NotIdempotent),
            other => Err(self.err(
                &path.key("default"),
                format!("`{other}` is not an idempotency; expected \"idempotent\" or \"not_idempotent\""),
                "use \"not_idempotent\" when retrying a call could repeat a side effect",
            )),
        }
    }

    fn network(&self, raw: raw::RawNetwork, path: &FieldPath) -> Result<NetworkCapability, ParseError> {
        let hosts_path = path.key("hosts");
        let hosts = self.required(raw.hosts, &hosts_path, "list the hosts, e.g. hosts = [\"api.github.com:443\"]")?;
        for (index, host) in hosts.iter().enumerate() {
            let element = hosts_path.index(index);
            validate_host_port(host).map_err(|reason| {
                self.err(&element, reason, "write each host exactly as `host:port`, e.g. \"api.github.com:443\"")
            })?;
            if hosts[..index].contains(host) {
                return Err(self.err(&element, format!("`{host}` is listed twice"), "remove the duplicate"));
            }
        }
        Ok(NetworkCapability { hosts })
    }

    fn credential(&self, raw: raw::RawCredential, path: &FieldPath) -> Result<CredentialCapability, ParseError> {
        let kind_path = path.key("kind");
        let kind_text = self.required(raw.kind, &kind_path, "add kind = \"api_key\", \"oauth2\" or \"aws_sigv4\"")?;
        let kind = CredentialKind::parse(&kind_text).ok_or_else(|| {
            self.err(
                &kind_path,
                format!("`{kind_text}` is not a credential kind; expected api_key, oauth2 or aws_sigv4"),
                "pick the kind the service's API uses",
            )
        })?;
        let scope = match raw.scope {
            None => None,
            Some(scope) => {
                Some(self.non_blank(scope, &path.key("scope"), "describe in plain words what the credential allows")?)
            }
        };
        // Keys that belong to another kind are errors rather than silently ignored.
        let foreign: [(&str, bool, CredentialKind); 4] = [
            ("header", raw.header.is_some(), CredentialKind::ApiKey),
            ("format", raw.format.is_some(), CredentialKind::ApiKey),
            ("service", raw.service.is_some(), CredentialKind::AwsSigv4),
            ("region", raw.region.is_some(), CredentialKind::AwsSigv4),
        ];
        for (key, present, owner) in foreign {
            if present && kind != owner {
                return Err(self.err(
                    &path.key(key),
                    format!("`{key}` applies only to kind = \"{owner}\", not \"{kind}\""),
                    format!("remove `{key}` or change the kind"),
                ));
            }
        }
        if raw.oauth2.is_some() && kind != CredentialKind::OAuth2 {
            return Err(self.err(
                &path.key("oauth2"),
                format!("[capabilities.credential.oauth2] applies only to kind = \"oauth2\", not \"{kind}\""),
                "remove the table or change the kind",
            ));
        }
        let method = match kind {
            CredentialKind::ApiKey => CredentialMethod::ApiKey(self.api_key(raw.header, raw.format, path)?),
            CredentialKind::AwsSigv4 => {
                let service_path = path.key("service");
                let service = self.required(
                    raw.service,
                    &service_path,
                    "name the AWS service to sign for, e.g. service = \"s3\"",
                )?;
                let service = aws_name(service, &service_path, "service", self)?;
                let region = match raw.region {
                    None => None,
                    Some(region) => Some(aws_name(region, &path.key("region"), "region", self)?),
                };
                CredentialMethod::AwsSigv4(AwsSigv4Signing { service, region })
            }
            CredentialKind::OAuth2 => {
                let oauth_path = path.key("oauth2");
                let oauth = self.required(
                    raw.oauth2,
                    &oauth_path,
                    "add a [capabilities.credential.oauth2] table with authorize_url, token_url, client_id and scopes",
                )?;
                CredentialMethod::OAuth2(self.oauth2(oauth, &oauth_path)?)
            }
        };
        Ok(CredentialCapability { scope, method })
    }

    fn api_key(
        &self,
        header: Option<String>,
        format: Option<String>,
        path: &FieldPath,
    ) -> Result<ApiKeyHeader, ParseError> {
        let header = header.unwrap_or_else(|| ApiKeyHeader::DEFAULT_HEADER.to_string());
        if !is_http_token(&header) {
            return Err(self.err(
                &path.key("header"),
                format!("`{header}` is not a valid HTTP header name (RFC 7230 token)"),
                "use letters, digits and !#$%&'*+-.^_`|~ only, e.g. header = \"X-API-Key\"",
            ));
        }
        let format = format.unwrap_or_else(|| ApiKeyHeader::DEFAULT_FORMAT.to_string());
        let format_path = path.key("format");
        if format.chars().any(|c| c.is_control() && c != '\t') {
            return Err(self.err(
                &format_path,
                "`format` must not contain CR, LF or other control characters",
                "keep the header value on one line, e.g. format = \"Token {key}\"",
            ));
        }
        if !format.contains("{key}") {
            return Err(self.err(
                &format_path,
                format!("`format` must contain the placeholder `{{key}}` (got {format:?})"),
                "write where the key goes, e.g. format = \"Bearer {key}\" or format = \"{key}\"",
            ));
        }
        Ok(ApiKeyHeader { header, format })
    }

    fn oauth2(&self, raw: raw::RawOAuth2, path: &FieldPath) -> Result<OAuth2Provider, ParseError> {
        let url_hint = "use the provider's https URL (plain http is accepted only for loopback test servers)";
        let authorize_path = path.key("authorize_url");
        let authorize_url = self.required(raw.authorize_url, &authorize_path, url_hint)?;
        oauth_url(&authorize_url).map_err(|reason| self.err(&authorize_path, reason, url_hint))?;
        let token_path = path.key("token_url");
        let token_url = self.required(raw.token_url, &token_path, url_hint)?;
        oauth_url(&token_url).map_err(|reason| self.err(&token_path, reason, url_hint))?;
        let client_id_path = path.key("client_id");
        let client_id_hint = "use the client id of the publisher's OAuth app";
        let client_id = self.required(raw.client_id, &client_id_path, client_id_hint)?;
        let client_id = self.non_blank(client_id, &client_id_path, client_id_hint)?;
        let client_secret = match raw.client_secret {
            None => None,
            Some(secret) => Some(self.non_blank(
                secret,
                &path.key("client_secret"),
                "remove the key when the provider does not need a client secret",
            )?),
        };
        let scopes_path = path.key("scopes");
        let scopes_hint = "list the OAuth scopes to request, e.g. scopes = [\"repo\"]";
        let scopes = self.required(raw.scopes, &scopes_path, scopes_hint)?;
        if scopes.is_empty() {
            return Err(self.err(&scopes_path, "`scopes` must list at least one scope", scopes_hint));
        }
        for (index, scope) in scopes.iter().enumerate() {
            if scope.trim().is_empty() {
                return Err(self.err(&scopes_path.index(index), "a scope must not be empty", scopes_hint));
            }
        }
        Ok(OAuth2Provider { authorize_url, token_url, client_id, client_secret, scopes })
    }

    fn runtime(&self, raw: raw::RawRuntime, path: &FieldPath) -> Result<RuntimeCapability, ParseError> {
        let imports_path = path.key("imports");
        let hint = "list the host functions the module imports, e.g. imports = [\"aileron_host.http_request\"]";
        let imports = self.required(raw.imports, &imports_path, hint)?;
        for (index, import) in imports.iter().enumerate() {
            let element = imports_path.index(index);
            if import.is_empty() || import.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(self.err(&element, format!("{import:?} is not a host function name"), hint));
            }
            if imports[..index].contains(import) {
                return Err(self.err(&element, format!("`{import}` is listed twice"), "remove the duplicate"));
            }
        }
        Ok(RuntimeCapability { imports })
    }

    fn intents(&self, intents: Vec<String>, path: &FieldPath) -> Result<Vec<String>, ParseError> {
        for (index, intent) in intents.iter().enumerate() {
            if intent.trim().is_empty() {
                return Err(self.err(
                    &path.index(index),
                    "an intent must not be empty",
                    "name what the connector does, e.g. \"list_issues\"",
                ));
            }
        }
        Ok(intents)
    }
}

fn aws_name(value: String, path: &FieldPath, key: &str, validator: &ManifestValidator) -> Result<String, ParseError> {
    let valid = !value.is_empty() && value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !valid {
        return Err(validator.err(
            path,
            format!("`{value}` is not a valid AWS {key} name"),
            format!(
                "use the lowercase AWS {key} identifier, e.g. \"{}\"",
                if key == "service" { "s3" } else { "us-east-1" }
            ),
        ));
    }
    Ok(value)
}

/// RFC 7230 `token`: the grammar of an HTTP header name.
pub fn is_http_token(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// OAuth endpoints must be https; plain http only on loopback, where the test providers run.
fn oauth_url(value: &str) -> Result<(), String> {
    let parsed = url::Url::parse(value).map_err(|e| format!("`{value}` is not a valid URL: {e}"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(domain)) => domain == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match parsed.scheme() {
        "https" if parsed.host().is_some() => Ok(()),
        "http" if loopback => Ok(()),
        "http" => Err(format!("`{value}` must use https (plain http only for loopback)")),
        _ => Err(format!("`{value}` must be an https URL")),
    }
}
