//! `[proxy]` and `[[proxy.operations]]` (SPEC §15 "Operation specs"): the requests of a launched
//! agent's own tools (`gh`, `git`, `aws`, `curl`) that a connector credentials, matched by method,
//! host and path template at the agent's egress proxy. Decoded and validated here; matched by
//! [`crate::policy::operations`].

use super::ManifestValidator;
use super::raw::{RawProxy, RawProxyOperation};
use crate::parse_error::{FieldPath, ParseError};
use crate::policy::validate_host_port;

/// The value a launched agent finds in each `placeholder_env` variable: something for its tools to
/// send, which the proxy replaces with the bound credential.
pub const PLACEHOLDER: &str = "aileron-sealed";

/// `[proxy]`: the operations and the variables a launched agent gets a placeholder in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProxySpec {
    pub placeholder_env: Vec<String>,
    pub operations: Vec<ProxyOperation>,
}

/// One `[[proxy.operations]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyOperation {
    /// `aileron.connector.operation`.
    pub name: String,
    /// An HTTP method, uppercase.
    pub method: String,
    /// `host:port`, one of the manifest's network hosts.
    pub host: String,
    pub path: PathTemplate,
    /// A human decides each request (an `http_request` approval).
    pub approval: bool,
    /// A GraphQL field (`mergePullRequest`): the operation covers only requests whose GraphQL
    /// document names it, and beats an operation of the same path without one (decision 0017).
    pub graphql: Option<String>,
    /// A query parameter's name (`acl`, as S3's `PUT /{bucket}/{key}?acl` names the object's
    /// access list): the operation covers only requests whose query names it, and beats an
    /// operation of the same path without one (decision 0017).
    pub query: Option<String>,
    /// Request header names (lowercase; a final `*` for a prefix: `x-amz-grant-*`): the operation
    /// covers only requests carrying one of them (S3's `x-amz-acl` on an upload sets the access
    /// list as `?acl` does), and beats an operation of the same path without any (decision 0017).
    pub headers: Vec<String>,
    /// api_key only: this operation's own header format (`"Basic {basic:x-access-token}"` for git
    /// over https), in place of `[capabilities.credential] format`.
    pub format: Option<String>,
    /// aws_sigv4 only: the AWS service this operation's requests are signed for (`sts`), in place
    /// of `[capabilities.credential] service`: one connector signs for each service it reaches.
    pub service: Option<String>,
}

/// A path template: literal segments, `{name}` for exactly one segment, and a final `/**` for the
/// rest (zero or more segments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    pub segments: Vec<Segment>,
    /// Ends in `/**`.
    pub rest: bool,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Compared with the request's segment after both are normalised ([`normalise_segment`]).
    Literal(String),
    Parameter(String),
}

impl PathTemplate {
    /// Parses `/repos/{owner}/{repo}/issues` or `/repos/{owner}/**`.
    pub fn parse(text: &str) -> Result<PathTemplate, String> {
        let Some(body) = text.strip_prefix('/') else {
            return Err(format!("`{text}` must start with `/`"));
        };
        if text.contains(['?', '#']) {
            return Err(format!("`{text}` has a query or fragment: a template matches the path only"));
        }
        let (body, rest) = match body.strip_suffix("**") {
            Some(head) if head.is_empty() || head.ends_with('/') => (head.strip_suffix('/').unwrap_or(head), true),
            _ => (body, false),
        };
        let mut segments = Vec::new();
        if !body.is_empty() {
            for segment in body.split('/') {
                segments.push(template_segment(text, segment)?);
            }
        }
        let mut names: Vec<&str> = segments
            .iter()
            .filter_map(|s| if let Segment::Parameter(n) = s { Some(n.as_str()) } else { None })
            .collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(format!("`{text}` names `{{{}}}` twice", pair[0]));
        }
        Ok(PathTemplate { segments, rest, text: text.to_string() })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn template_segment(text: &str, segment: &str) -> Result<Segment, String> {
    if segment.is_empty() {
        return Err(format!("`{text}` has an empty segment (`//` or a trailing `/`)"));
    }
    if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return if valid {
            Ok(Segment::Parameter(name.to_string()))
        } else {
            Err(format!("`{{{name}}}` is not a parameter name"))
        };
    }
    if segment.contains(['{', '}', '*', '\\']) {
        return Err(format!(
            "`{segment}` mixes a literal with `{{`, `}}`, `*` or `\\`: a segment is all literal or one {{name}}"
        ));
    }
    let normalised = normalise_segment(segment).ok_or_else(|| {
        format!("`{segment}` is not a path segment as it would be sent (`.`/`..`, or an encoded `/`, `\\` or `.`)")
    })?;
    Ok(Segment::Literal(normalised))
}

/// One path segment in the form matching compares: percent-encoded unreserved characters decoded
/// (RFC 3986 §6.2.2.2: `pull%73` is `pulls` to any server), other escapes with uppercase hex,
/// ASCII lowercase (a server that ignores case must not see a guarded path slip past its
/// operation). `None` for a segment a server may read as something other than one segment:
/// empty, `.` or `..` (also encoded), or with an encoded `/` or `\`, a raw `\` or `;`, or an
/// encoded control character.
pub fn normalise_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = String::with_capacity(segment.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        if byte == b'%' {
            let hex = bytes.get(index + 1..index + 3)?;
            let value = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            // An encoded control character (`%00`): some servers end the path there.
            if matches!(value, b'/' | b'\\') || value.is_ascii_control() {
                return None;
            }
            if value.is_ascii_alphanumeric() || matches!(value, b'-' | b'.' | b'_' | b'~') {
                out.push(value.to_ascii_lowercase() as char);
            } else {
                out.push('%');
                out.push_str(&format!("{value:02X}"));
            }
            index += 3;
            continue;
        }
        // `;`: servers that strip matrix parameters read `merge;x` as `merge` (the eighth
        // re-attack), so it could be a guarded segment to them and another one here.
        if byte == b'\\' || byte == b';' || byte.is_ascii_control() {
            return None;
        }
        out.push(byte.to_ascii_lowercase() as char);
        index += 1;
    }
    if out.is_empty() || out == "." || out == ".." {
        return None;
    }
    Some(out)
}

/// Names `placeholder_env` may hold: a credential's variable, never one that steers a program
/// (`PATH`, `LD_PRELOAD`, the proxy and trust variables the launcher sets).
fn is_credential_variable(name: &str) -> bool {
    let shaped = name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let credential = ["TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH", "PAT"]
        .iter()
        .any(|word| name.split('_').any(|part| part == *word || part == format!("{word}S")));
    shaped && credential && !name.starts_with("AILERON_") && !name.starts_with("LD_")
}

const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

impl ManifestValidator<'_, '_> {
    pub(super) fn proxy(&self, raw: RawProxy, path: &FieldPath, hosts: &[String]) -> Result<ProxySpec, ParseError> {
        let env_path = path.key("placeholder_env");
        let placeholder_env = raw.placeholder_env.unwrap_or_default();
        for (index, name) in placeholder_env.iter().enumerate() {
            if !is_credential_variable(name) {
                return Err(self.err(
                    &env_path.index(index),
                    format!("`{name}` is not a credential variable"),
                    "list the variables the service's tools read a token from, e.g. [\"GH_TOKEN\", \"GITHUB_TOKEN\"] (uppercase, naming a TOKEN, KEY, SECRET, PASSWORD, CREDENTIAL, AUTH or PAT)",
                ));
            }
            if placeholder_env[..index].contains(name) {
                return Err(self.err(
                    &env_path.index(index),
                    format!("`{name}` is listed twice"),
                    "remove the duplicate",
                ));
            }
        }
        let operations_path = path.key("operations");
        let mut operations: Vec<ProxyOperation> = Vec::new();
        for (index, raw) in raw.operations.unwrap_or_default().into_iter().enumerate() {
            let operation = self.proxy_operation(raw, &operations_path.index(index), hosts)?;
            if operations.iter().any(|o| o.name == operation.name) {
                return Err(self.err(
                    &operations_path.index(index).key("name"),
                    format!("operation `{}` is defined twice", operation.name),
                    "give each operation its own name",
                ));
            }
            operations.push(operation);
        }
        if operations.is_empty() {
            return Err(self.err(
                &operations_path,
                "[proxy] lists no [[proxy.operations]]",
                "add the requests this connector credentials, or remove [proxy]",
            ));
        }
        Ok(ProxySpec { placeholder_env, operations })
    }

    fn proxy_operation(
        &self,
        raw: RawProxyOperation,
        path: &FieldPath,
        hosts: &[String],
    ) -> Result<ProxyOperation, ParseError> {
        let name_path = path.key("name");
        let name = self.required(raw.name, &name_path, "name the operation, e.g. name = \"create_issue\"")?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(self.err(
                &name_path,
                format!("`{name}` is not an operation name"),
                "use letters, digits, `_` and `-`, e.g. \"merge_pull_request\"",
            ));
        }
        let method_path = path.key("method");
        let method = self.required(
            raw.method,
            &method_path,
            "add method = \"GET\" (or POST, PUT, PATCH, DELETE, HEAD, OPTIONS)",
        )?;
        if !METHODS.contains(&method.as_str()) {
            return Err(self.err(
                &method_path,
                format!("`{method}` is not a method an operation can name"),
                "write one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS in uppercase",
            ));
        }
        let host_path = path.key("host");
        let host = self.required(raw.host, &host_path, "add host = \"api.github.com:443\"")?;
        validate_host_port(&host)
            .map_err(|reason| self.err(&host_path, reason, "write host:port, e.g. \"api.github.com:443\""))?;
        if !hosts.contains(&host) {
            return Err(self.err(
                &host_path,
                format!("`{host}` is not in [capabilities.network] hosts"),
                format!(
                    "add \"{host}\" to [capabilities.network] hosts: an operation reaches only hosts the consent lists"
                ),
            ));
        }
        let template_path = path.key("path");
        let template = self.required(raw.path, &template_path, "add path = \"/repos/{owner}/{repo}/issues\"")?;
        let template = PathTemplate::parse(&template).map_err(|reason| {
            self.err(
                &template_path,
                reason,
                "write literal segments, {name} for one segment, and a final /** for the rest",
            )
        })?;
        let graphql = match raw.graphql {
            None => None,
            Some(field) => {
                let graphql_path = path.key("graphql");
                let valid = field.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && field.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !valid {
                    return Err(self.err(
                        &graphql_path,
                        format!("`{field}` is not a GraphQL field name"),
                        "name the mutation field, e.g. graphql = \"mergePullRequest\"",
                    ));
                }
                if method != "POST" {
                    return Err(self.err(
                        &graphql_path,
                        format!("a GraphQL operation is sent with POST, not {method}"),
                        "write method = \"POST\" for a GraphQL operation",
                    ));
                }
                Some(field)
            }
        };
        let query = match raw.query {
            None => None,
            Some(name) => {
                let unreserved = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~');
                if name.is_empty() || !name.chars().all(unreserved) {
                    return Err(self.err(
                        &path.key("query"),
                        format!("`{name}` is not a query parameter's name"),
                        "name the parameter alone, e.g. query = \"acl\" for S3's ?acl",
                    ));
                }
                Some(name)
            }
        };
        let mut headers = Vec::new();
        for (index, name) in raw.headers.unwrap_or_default().into_iter().enumerate() {
            let stem = name.strip_suffix('*').unwrap_or(&name);
            let token = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
            if stem.is_empty() || !stem.chars().all(token) {
                return Err(self.err(
                    &path.key("headers").index(index),
                    format!("`{name}` is not a lowercase header name (or a prefix of one ending in `*`)"),
                    "name the headers as HTTP/2 sends them, e.g. headers = [\"x-amz-acl\", \"x-amz-grant-*\"]",
                ));
            }
            headers.push(name);
        }
        let format = match raw.format {
            None => None,
            Some(format) if super::key_format_is_valid(&format) => Some(format),
            Some(format) => {
                return Err(self.err(
                    &path.key("format"),
                    format!("`{format}` does not say where the key goes"),
                    "write {key} or {basic:USER} in it, e.g. format = \"Basic {basic:x-access-token}\" for git over https",
                ));
            }
        };
        let service = match raw.service {
            None => None,
            Some(service) => Some(super::aws_name(service, &path.key("service"), "service", self)?),
        };
        Ok(ProxyOperation {
            name,
            method,
            host,
            path: template,
            approval: raw.approval.unwrap_or(false),
            graphql,
            query,
            headers,
            format,
            service,
        })
    }
}
