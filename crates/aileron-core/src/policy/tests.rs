//! Table tests for every capability decision at both boundaries.

use serde_json::{Value, json};

use super::*;
use crate::failure::FailureClass;
use crate::manifest::parse_manifest;

/// A connector with two hosts (one IPv6 loopback), an api_key credential and two spawn operations.
const MANIFEST: &str = r#"[connector]
name = "github://acme/tracker"
version = "1.0.0"

[capabilities.network]
hosts = ["api.github.com:443", "uploads.github.com:443", "[::1]:8080", "localhost:80"]

[capabilities.credential]
kind = "api_key"

[capabilities.spawn]
programs = [{ path = "/usr/bin/git" }]

[capabilities.spawn.operations.log]
argv = "git log"
description = "List commits"

[capabilities.spawn.operations.status]
argv = "git status"
description = "Show status"
"#;

const NO_NETWORK: &str = "[connector]\nname = \"github://acme/offline\"\nversion = \"0.1.0\"\n";

fn manifest(text: &str) -> ConnectorManifest {
    parse_manifest(text, "manifest.toml").unwrap()
}

fn subset(entries: &[&str]) -> CapabilitySubset {
    CapabilitySubset::parse(entries).unwrap()
}

#[test]
fn host_port_validation() {
    let ok = [
        "api.github.com:443",
        "localhost:8080",
        "127.0.0.1:80",
        "[::1]:8080",
        "[2001:db8::1]:443",
        "a-b.example:1",
        "example.com:65535",
        "xn--bcher-kva.example:443",
        "[::ffff:7f00:1]:80",
    ];
    for value in ok {
        assert_eq!(validate_host_port(value), Ok(()), "{value}");
    }
    let bad = [
        (
            "https://api.github.com:443",
            "`https://api.github.com:443` has a scheme: write only host:port, e.g. `api.github.com:443`",
        ),
        ("*.github.com:443", "`*.github.com:443` has a wildcard: list each host:port exactly"),
        ("api.github.com:443/repos", "`api.github.com:443/repos` has a path: write only host:port"),
        ("api.github.com:443?x", "`api.github.com:443?x` has a path: write only host:port"),
        ("user@api.github.com:443", "`user@api.github.com:443` has user info: write only host:port"),
        ("api.github.com", "`api.github.com` has no port: write host:port, e.g. `api.github.com:443`"),
        ("api.github.com:", "`api.github.com:`: the port must be a number from 1 to 65535"),
        ("api.github.com:0", "`api.github.com:0`: the port must be a number from 1 to 65535"),
        ("api.github.com:65536", "`api.github.com:65536`: the port must be a number from 1 to 65535"),
        ("api.github.com:0443", "`api.github.com:0443`: the port must be a number from 1 to 65535"),
        ("api.github.com:+443", "`api.github.com:+443`: the port must be a number from 1 to 65535"),
        ("api.github.com:https", "`api.github.com:https`: the port must be a number from 1 to 65535"),
        ("API.GitHub.com:443", "`API.GitHub.com:443`: the host must be lowercase (`api.github.com`)"),
        (":443", "`:443`: the host is missing"),
        ("bücher.example:443", "`bücher.example:443`: write the host in its ASCII (punycode) form"),
        ("api..github.com:443", "`api..github.com:443`: the host has an empty label (leading, trailing or double dot)"),
        ("api.github.com.:443", "`api.github.com.:443`: the host has an empty label (leading, trailing or double dot)"),
        (
            "api_v2.github.com:443",
            "`api_v2.github.com:443`: the label `api_v2` may only contain letters, digits and `-`",
        ),
        ("-api.github.com:443", "`-api.github.com:443`: the label `-api` must not start or end with `-`"),
        ("127.000.0.1:80", "`127.000.0.1:80`: `127.000.0.1` is not a canonical IPv4 address"),
        ("1.2.3:80", "`1.2.3:80`: `1.2.3` is not a canonical IPv4 address"),
        ("::1:8080", "`::1:8080`: an IPv6 address must be bracketed, e.g. `[::1]:8080`"),
        ("[::1]", "`[::1]` needs a port after the IPv6 address, e.g. `[::1]:8080`"),
        ("[::g]:80", "`[::g]` is not a valid IPv6 address"),
        ("[0:0:0:0:0:0:0:1]:8080", "write the IPv6 address in its canonical form: `[::1]:8080`"),
        ("[::1]:99999", "`[::1]:99999`: the port must be a number from 1 to 65535"),
        // Hosts no URL reaches as written (found by `properties::capability_decisions_agree_with_a_set_model`).
        ("[::ffff:127.0.0.1]:80", "write the IPv6 address in its canonical form: `[::ffff:7f00:1]:80`"),
        ("0x:443", "`0x:443`: a URL with the host `0x` reaches `0.0.0.0`: write that instead"),
        ("a.0x1f:443", "`a.0x1f:443`: `a.0x1f` is not a host a URL can name (invalid IPv4 address)"),
        (
            "xn--zz.example:443",
            "`xn--zz.example:443`: `xn--zz.example` is not a host a URL can name (invalid international domain name)",
        ),
    ];
    for (value, message) in bad {
        assert_eq!(validate_host_port(value), Err(message.to_string()), "{value}");
    }
    let long_label = format!("{}.com:443", "a".repeat(64));
    assert!(validate_host_port(&long_label).unwrap_err().contains("is longer than 63 characters"));
    let long_host = format!("{}com:443", "abcdefghi.".repeat(26));
    assert!(validate_host_port(&long_host).unwrap_err().ends_with("the host is longer than 253 characters"));
}

#[test]
fn capability_entries_parse_and_display() {
    let ok = [
        ("oauth2", CapabilityEntry::Credential(CredentialKind::OAuth2)),
        ("api_key", CapabilityEntry::Credential(CredentialKind::ApiKey)),
        ("aws_sigv4", CapabilityEntry::Credential(CredentialKind::AwsSigv4)),
        ("network:api.github.com:443", CapabilityEntry::Network("api.github.com:443".into())),
        ("network:[::1]:8080", CapabilityEntry::Network("[::1]:8080".into())),
        ("spawn:log", CapabilityEntry::Spawn("log".into())),
        ("list_issues", CapabilityEntry::Op("list_issues".into())),
        ("chat.postMessage", CapabilityEntry::Op("chat.postMessage".into())),
        ("get-repo", CapabilityEntry::Op("get-repo".into())),
    ];
    for (text, expected) in ok {
        let entry = CapabilityEntry::parse(text).unwrap();
        assert_eq!(entry, expected, "{text}");
        assert_eq!(entry.to_string(), text);
    }
    let bad = [
        (
            "network:api.github.com",
            "`network:api.github.com`: `api.github.com` has no port: write host:port, e.g. `api.github.com:443`",
        ),
        (
            "network:*.github.com:443",
            "`network:*.github.com:443`: `*.github.com:443` has a wildcard: list each host:port exactly",
        ),
        ("spawn:", "`spawn:`: \"\" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
        ("spawn:git log", "`spawn:git log`: \"git log\" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
        (
            "chat:write",
            "`chat:write` has the unknown prefix `chat:`; an entry is a credential kind (api_key, oauth2, aws_sigv4), \
             network:<host:port>, spawn:<op> or an op name",
        ),
        ("", "\"\" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
        ("list issues", "\"list issues\" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
        ("OAuth2 ", "\"OAuth2 \" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
        (".hidden", "\".hidden\" is not a valid op name: use letters, digits, `_`, `.` and `-`"),
    ];
    for (text, message) in bad {
        assert_eq!(CapabilityEntry::parse(text), Err(message.to_string()), "{text}");
    }
    assert!(CapabilitySubset::parse(&["list_issues", "bad entry"]).is_err());
}

#[test]
fn subset_queries() {
    let s = subset(&["list_issues", "oauth2", "network:api.github.com:443", "spawn:log", "get_repo"]);
    assert_eq!(s.ops().collect::<Vec<_>>(), ["list_issues", "get_repo"]);
    assert_eq!(s.network_hosts().collect::<Vec<_>>(), ["api.github.com:443"]);
    assert_eq!(s.credential_kinds().collect::<Vec<_>>(), [CredentialKind::OAuth2]);
    assert_eq!(s.spawn_ops().collect::<Vec<_>>(), ["log"]);
    assert_eq!(s.to_strings(), ["list_issues", "oauth2", "network:api.github.com:443", "spawn:log", "get_repo"]);
    assert!(s.declares_credential(CredentialKind::OAuth2) && !s.declares_credential(CredentialKind::ApiKey));
    assert!(s.declares_spawn("log") && !s.declares_spawn("status"));
}

/// Asserts a capability denial's boundary, message and details.
fn assert_denied(failure: &Failure, boundary: Boundary, message: &str, details: Value) {
    assert_eq!(failure.class, FailureClass::CapabilityDenied, "{failure}");
    assert_eq!(failure.boundary, boundary, "{failure}");
    assert_eq!(failure.message, message);
    assert!(!failure.retriable);
    assert_eq!(Value::Object(failure.details.clone()), details, "{failure}");
}

#[test]
fn op_checks() {
    let cases: [(&[&str], &str, bool); 6] = [
        (&["list_issues", "get_repo"], "list_issues", true),
        (&["list_issues", "get_repo"], "get_repo", true),
        (&["list_issues", "get_repo"], "delete_repo", false),
        (&["oauth2", "network:api.github.com:443"], "delete_repo", true),
        (&["spawn:log"], "anything", true),
        (&["list_issues"], "list_issues_v2", false),
    ];
    for (entries, op, allowed) in cases {
        let s = subset(entries);
        assert_eq!(s.allows_op(op), allowed, "{entries:?} {op}");
        match check_op(&s, op) {
            Ok(()) => assert!(allowed, "{entries:?} {op}"),
            Err(failure) => {
                assert!(!allowed, "{entries:?} {op}");
                assert_denied(
                    &failure,
                    Boundary::Action,
                    &format!("the action does not declare the op `{op}` for this connector"),
                    json!({"requested": format!("op:{op}"), "declared_subset": entries}),
                );
            }
        }
    }
}

#[test]
fn egress_urls_parse_and_normalise() {
    let ok = [
        ("https://api.github.com/repos/a/b/issues", "https", "api.github.com", 443, "/repos/a/b/issues"),
        ("HTTPS://API.GITHUB.COM/x", "https", "api.github.com", 443, "/x"),
        ("http://localhost", "http", "localhost", 80, "/"),
        ("http://LOCALHOST:80/", "http", "localhost", 80, "/"),
        ("https://api.github.com:443/x?token=secret#frag", "https", "api.github.com", 443, "/x"),
        ("https://api.github.com:8443/x", "https", "api.github.com", 8443, "/x"),
        ("http://[::1]:8080/v1?q=1", "http", "[::1]", 8080, "/v1"),
        ("http://[0:0:0:0:0:0:0:1]:8080/", "http", "[::1]", 8080, "/"),
        ("http://127.0.0.1:9000/a%20b", "http", "127.0.0.1", 9000, "/a%20b"),
        ("https://api.github.com:/x", "https", "api.github.com", 443, "/x"),
    ];
    for (url, scheme, host, port, path) in ok {
        let target = parse_egress_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(
            (target.scheme.as_str(), target.host.as_str(), target.port, target.path.as_str()),
            (scheme, host, port, path),
            "{url}"
        );
        assert_eq!(target.host_port, format!("{host}:{port}"));
        assert!(target.url.starts_with(&format!("{scheme}://{host}")), "{}", target.url);
    }
    let bad = [
        ("ftp://api.github.com/x", "the scheme `ftp` is not allowed: only http and https"),
        ("file:///etc/passwd", "the scheme `file` is not allowed: only http and https"),
        ("data:text/plain,hello", "the scheme `data` is not allowed: only http and https"),
        ("javascript:alert(1)", "the scheme `javascript` is not allowed: only http and https"),
        ("api.github.com/x", "the URL has no scheme"),
        ("/relative/path", "the URL has no scheme"),
        ("", "the URL has no scheme"),
        ("://api.github.com", "the URL has no scheme"),
        ("https:api.github.com/x", "expected `//` after `https:`"),
        ("https:/api.github.com/x", "expected `//` after `https:`"),
        ("https:///x", "the URL has no host"),
        ("https://", "the URL has no host"),
        (
            "https://user:pass@api.github.com/x",
            "user info (`user@`) is not allowed in a URL: credentials are injected by the host",
        ),
        (
            "https://@api.github.com/x",
            "user info (`user@`) is not allowed in a URL: credentials are injected by the host",
        ),
        ("https://api.github.com\\@evil.example/", "the URL contains whitespace, control characters or a backslash"),
        ("https://api.github.com /x", "the URL contains whitespace, control characters or a backslash"),
        (" https://api.github.com/x", "the URL contains whitespace, control characters or a backslash"),
        ("https://api.git\nhub.com/x", "the URL contains whitespace, control characters or a backslash"),
        ("https://api.github.com:99999/x", "the URL does not parse: invalid port number"),
        ("https://[::1/x", "the URL does not parse: invalid IPv6 address"),
        ("http://exa mple.com", "the URL contains whitespace, control characters or a backslash"),
        ("http://%zz/", "the URL does not parse: invalid international domain name"),
    ];
    for (url, message) in bad {
        assert_eq!(parse_egress_url(url), Err(message.to_string()), "{url}");
    }
}

#[test]
fn egress_decisions_at_both_boundaries() {
    let m = manifest(MANIFEST);
    let granted = json!([
        "network:api.github.com:443",
        "network:uploads.github.com:443",
        "network:[::1]:8080",
        "network:localhost:80"
    ]);
    let connector = "github://acme/tracker@1.0.0";
    // (url, subset, Ok(host_port) | Err((boundary, message, details)))
    type Expected = Result<&'static str, (Boundary, String, Value)>;
    let cases: Vec<(&str, &[&str], Expected)> = vec![
        ("https://api.github.com/repos", &["list_issues"], Ok("api.github.com:443")),
        ("HTTPS://API.GITHUB.COM/x", &[], Ok("api.github.com:443")),
        ("http://localhost/x", &[], Ok("localhost:80")),
        ("http://[::1]:8080/x", &[], Ok("[::1]:8080")),
        ("https://uploads.github.com/x", &["network:uploads.github.com:443"], Ok("uploads.github.com:443")),
        (
            "https://evil.example/x?token=abc",
            &[],
            Err((
                Boundary::Sandbox,
                "evil.example:443 is not among the connector manifest's hosts".into(),
                json!({"connector": connector, "requested": "network:evil.example:443", "granted": granted}),
            )),
        ),
        (
            "http://api.github.com/x",
            &[],
            Err((
                Boundary::Sandbox,
                "api.github.com:80 is not among the connector manifest's hosts".into(),
                json!({"connector": connector, "requested": "network:api.github.com:80", "granted": granted}),
            )),
        ),
        (
            "https://api.github.com:8443/x",
            &[],
            Err((
                Boundary::Sandbox,
                "api.github.com:8443 is not among the connector manifest's hosts".into(),
                json!({"connector": connector, "requested": "network:api.github.com:8443", "granted": granted}),
            )),
        ),
        (
            "http://[::1]:9090/x",
            &[],
            Err((
                Boundary::Sandbox,
                "[::1]:9090 is not among the connector manifest's hosts".into(),
                json!({"connector": connector, "requested": "network:[::1]:9090", "granted": granted}),
            )),
        ),
        (
            "https://api.github.com/x",
            &["network:uploads.github.com:443", "list_issues"],
            Err((
                Boundary::Action,
                "the action does not declare network:api.github.com:443 for this connector".into(),
                json!({
                    "requested": "network:api.github.com:443",
                    "declared_subset": ["network:uploads.github.com:443", "list_issues"]
                }),
            )),
        ),
        (
            "https://user:pass@api.github.com/",
            &[],
            Err((
                Boundary::Sandbox,
                "outbound request denied: user info (`user@`) is not allowed in a URL: credentials are injected by the \
                 host"
                    .into(),
                json!({"connector": connector, "granted": granted}),
            )),
        ),
        (
            "ftp://api.github.com/x",
            &[],
            Err((
                Boundary::Sandbox,
                "outbound request denied: the scheme `ftp` is not allowed: only http and https".into(),
                json!({"connector": connector, "granted": granted}),
            )),
        ),
        (
            "not a url",
            &[],
            Err((
                Boundary::Sandbox,
                "outbound request denied: the URL contains whitespace, control characters or a backslash".into(),
                json!({"connector": connector, "granted": granted}),
            )),
        ),
    ];
    for (url, entries, expected) in cases {
        let result = check_egress(&m, &subset(entries), url);
        match (result, expected) {
            (Ok(target), Ok(host_port)) => assert_eq!(target.host_port, host_port, "{url}"),
            (Err(failure), Err((boundary, message, details))) => {
                assert_denied(&failure, boundary, &message, details);
                assert!(!failure.to_string().contains("token=abc"), "{failure}");
            }
            (result, expected) => panic!("{url}: got {result:?}, expected {expected:?}"),
        }
    }
    let offline = manifest(NO_NETWORK);
    let failure = check_egress(&offline, &subset(&[]), "https://api.github.com/").unwrap_err();
    assert_denied(
        &failure,
        Boundary::Sandbox,
        "the connector manifest declares no network access, so it cannot reach api.github.com:443",
        json!({"connector": "github://acme/offline@0.1.0", "requested": "network:api.github.com:443", "granted": []}),
    );
}

/// Regression: std writes an IPv4-mapped IPv6 address dotted and the URL parser in hex, so the
/// manifest host the validator demanded (`[::ffff:127.0.0.1]:80`) was never what a URL reaches,
/// and the one it reaches was refused. Now the listed form is reached by every spelling.
#[test]
fn an_ipv4_mapped_host_is_reached_as_listed() {
    let mapped = manifest(
        "[connector]\nname = \"github://acme/mapped\"\nversion = \"1.0.0\"\n\
         [capabilities.network]\nhosts = [\"[::ffff:7f00:1]:80\"]\n",
    );
    for url in ["http://[::ffff:7f00:1]/x", "http://[::FFFF:127.0.0.1]/x", "http://[0:0:0:0:0:ffff:7f00:1]:80/"] {
        let target = check_egress(&mapped, &CapabilitySubset::default(), url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(target.host_port, "[::ffff:7f00:1]:80", "{url}");
    }
}

#[test]
fn credential_decisions_at_both_boundaries() {
    let api_key = manifest(MANIFEST);
    let offline = manifest(NO_NETWORK);
    let connector = "github://acme/tracker@1.0.0";
    type Expected = Result<CredentialKind, (Boundary, &'static str, Value)>;
    let cases: Vec<(&ConnectorManifest, &[&str], &str, Expected)> = vec![
        (&api_key, &["api_key"], "api_key", Ok(CredentialKind::ApiKey)),
        (&api_key, &["list_issues", "api_key"], "api_key", Ok(CredentialKind::ApiKey)),
        (
            &api_key,
            &["oauth2"],
            "oauth2",
            Err((
                Boundary::Sandbox,
                "the connector manifest declares the credential kind api_key, not oauth2",
                json!({"connector": connector, "requested": "credential:oauth2", "granted": ["credential:api_key"]}),
            )),
        ),
        (
            &api_key,
            &["list_issues"],
            "api_key",
            Err((
                Boundary::Action,
                "the action does not declare the credential kind api_key for this connector",
                json!({"requested": "credential:api_key", "declared_subset": ["list_issues"]}),
            )),
        ),
        (
            &api_key,
            &["api_key"],
            "basic",
            Err((
                Boundary::Sandbox,
                "`basic` is not a credential kind (api_key, oauth2, aws_sigv4)",
                json!({"connector": connector, "requested": "credential:basic"}),
            )),
        ),
        (
            &offline,
            &["api_key"],
            "api_key",
            Err((
                Boundary::Sandbox,
                "the connector manifest declares no credential, so it cannot use api_key",
                json!({"connector": "github://acme/offline@0.1.0", "requested": "credential:api_key"}),
            )),
        ),
    ];
    for (m, entries, requested, expected) in cases {
        match (check_credential(m, &subset(entries), requested), expected) {
            (Ok(kind), Ok(expected)) => assert_eq!(kind, expected),
            (Err(failure), Err((boundary, message, details))) => assert_denied(&failure, boundary, message, details),
            (result, expected) => panic!("{entries:?} {requested}: got {result:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn spawn_decisions() {
    let m = manifest(MANIFEST);
    let offline = manifest(NO_NETWORK);
    assert_eq!(check_spawn_declared(&subset(&["spawn:log"]), "log"), Ok(()));
    assert_denied(
        &check_spawn_declared(&subset(&["spawn:log", "list_issues"]), "status").unwrap_err(),
        Boundary::Action,
        "the action does not declare spawn:status",
        json!({"requested": "spawn:status", "declared_subset": ["spawn:log", "list_issues"]}),
    );
    assert_eq!(check_spawn_op(&m, &subset(&["spawn:status"]), "status"), Ok(()));
    assert_denied(
        &check_spawn_op(&m, &subset(&["spawn:push"]), "push").unwrap_err(),
        Boundary::Sandbox,
        "the connector manifest declares no spawn operation `push`",
        json!({
            "connector": "github://acme/tracker@1.0.0",
            "requested": "spawn:push",
            "granted": ["spawn:log", "spawn:status"]
        }),
    );
    assert_denied(
        &check_spawn_op(&m, &subset(&["api_key"]), "log").unwrap_err(),
        Boundary::Action,
        "the action does not declare spawn:log",
        json!({"requested": "spawn:log", "declared_subset": ["api_key"]}),
    );
    assert_denied(
        &check_spawn_op(&offline, &subset(&["spawn:log"]), "log").unwrap_err(),
        Boundary::Sandbox,
        "the connector manifest declares no spawn operation `log`",
        json!({"connector": "github://acme/offline@0.1.0", "requested": "spawn:log", "granted": []}),
    );
}

#[test]
fn install_time_subset_consistency() {
    let m = manifest(MANIFEST);
    let oauth = manifest(
        "[connector]\nname = \"github://acme/gh\"\nversion = \"1.0.0\"\n[capabilities.credential]\n\
         kind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://github.com/a\"\n\
         token_url = \"https://github.com/t\"\nclient_id = \"c\"\nscopes = [\"repo\"]\n",
    );
    let offline = manifest(NO_NETWORK);
    let cases: Vec<(&ConnectorManifest, &[&str], Result<(), &str>)> = vec![
        (&m, &["list_issues", "api_key", "network:api.github.com:443", "spawn:log"], Ok(())),
        (&m, &["any_op_at_all"], Ok(())),
        (
            &m,
            &["network:evil.example:443"],
            Err("network:evil.example:443 is not among the hosts of github://acme/tracker@1.0.0"),
        ),
        (&m, &["oauth2"], Err("oauth2: github://acme/tracker@1.0.0 declares the credential kind api_key")),
        (&m, &["spawn:push"], Err("spawn:push: github://acme/tracker@1.0.0 declares no spawn operation `push`")),
        (&oauth, &["oauth2"], Ok(())),
        (&oauth, &["api_key"], Err("api_key: github://acme/gh@1.0.0 declares the credential kind oauth2")),
        (
            &offline,
            &["network:api.github.com:443", "aws_sigv4", "spawn:log"],
            Err("network:api.github.com:443 is not among the hosts of github://acme/offline@0.1.0; aws_sigv4: \
                 github://acme/offline@0.1.0 declares no credential; spawn:log: github://acme/offline@0.1.0 declares \
                 no spawn operation `log`"),
        ),
    ];
    for (manifest, entries, expected) in cases {
        assert_eq!(
            check_subset_against_manifest(&subset(entries), manifest),
            expected.map_err(str::to_string),
            "{entries:?}"
        );
    }
}

/// The fifty-eighth re-attack (decision 0016): each test asserts the secure outcome; each failed
/// while its hole was open.
mod re_attack_58 {
    use std::collections::BTreeSet;

    use crate::policy::{FormReadings, OperationIndex, OperationMatch, graphql_names};

    const GITHUB_CLI_MANIFEST: &str = include_str!("../../../../connectors/specs/github-cli/manifest.toml");
    const API: &str = "api.github.com:443";

    fn bundled() -> OperationIndex<()> {
        let parsed = crate::manifest::parse_manifest(GITHUB_CLI_MANIFEST, "manifest.toml").unwrap();
        OperationIndex::new(parsed.proxy.unwrap().operations.into_iter().map(|operation| ((), operation)).collect())
    }

    /// `Ok(true)` when the request waits, is refused or goes without the credential; `Err` with
    /// the operation's name when it goes out credentialed at once.
    fn gated(index: &OperationIndex<()>, method: &str, path: &str, fields: Option<&[&str]>) -> Result<bool, String> {
        let fields: Option<BTreeSet<String>> = fields.map(|f| f.iter().map(|s| s.to_string()).collect());
        match index.match_request_with(method, API, path, None, &[], fields.as_ref()) {
            OperationMatch::Matched { operation, .. } => {
                if operation.approval {
                    Ok(true)
                } else {
                    Err(format!("ungated `{}`", operation.name))
                }
            }
            // Refused, or sent without the credential: no credentialed effect.
            _ => Ok(true),
        }
    }

    /// Asserts every `(method, path, fields)` waits, is refused or goes uncredentialed, naming all
    /// that do not.
    fn all_wait(index: &OperationIndex<()>, cases: &[(&str, &str, Option<&[&str]>)]) {
        let leaked: Vec<String> = cases
            .iter()
            .filter_map(|(method, path, fields)| {
                gated(index, method, path, *fields).err().map(|why| format!("{method} {path} {fields:?}: {why}"))
            })
            .collect();
        assert!(leaked.is_empty(), "credentialed at once:\n{}", leaked.join("\n"));
    }

    /// R58-1: Ruby's JSON parsers (the `json` gem, yajl-ruby, Oj) skip `/* */` and `//` comments
    /// as whitespace; the proxy reads a body as JSON only when it *starts* with `{`/`[`. A body
    /// typed as a form (curl -d's default, GitHub's own documented example) whose JSON sits behind
    /// a comment that holds a harmless form `query` is read by the proxy as that harmless form and
    /// by GitHub as the JSON mutation.
    #[test]
    fn re_attack_58_r1_a_json_graphql_body_behind_a_comment_is_read() {
        let form = FormReadings { urlencoded: true, multipart: false };
        let mutation = r#"{"query":"mutation{mergePullRequest(input:{pullRequestId:\"PR_1\"}){clientMutationId}}"}"#;
        match [
            format!("/*&query=%7Bviewer%7Blogin%7D%7D&*/{mutation}"),
            format!("//&query=%7Bviewer%7Blogin%7D%7D&\n{mutation}"),
            format!(" /* a */ /*&query=%7Bviewer%7D&*/\n{mutation}"),
        ]
        .iter()
        .filter_map(|body| match graphql_names(body.as_bytes(), form) {
            // Refused (an error) is secure too.
            Ok(names) if !names.contains("mergePullRequest") => Some(format!("{names:?} <- {body:?}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .as_slice()
        {
            [] => {}
            missed => panic!("read only as the form in the comment:\n{}", missed.join("\n")),
        }
    }

    /// R58-2: GitHub Pages publishes a private repository's branch to the whole internet (unless
    /// the org is on Enterprise Cloud with access control); creating a site, changing its source
    /// or flipping `public`, and deploying an artifact to it go out through the ungated
    /// `create_in_repository` / `put_repository_content`.
    #[test]
    fn re_attack_58_r2_publishing_a_repository_through_pages_waits() {
        let index = bundled();
        all_wait(
            &index,
            &[
                ("POST", "/repos/o/r/pages", None),
                ("PUT", "/repos/o/r/pages", None),
                ("POST", "/repos/o/r/pages/deployments", None),
            ],
        );
    }

    /// R58-3: a deployment branch policy added to an environment lets a branch the agent pushes
    /// deploy to it (and its jobs read the environment's secrets); changing one (`PUT …/{id}`) is
    /// gated through `set_environment`, creating one is not.
    #[test]
    fn re_attack_58_r3_opening_an_environment_to_a_branch_waits() {
        let index = bundled();
        let path = "/repos/o/r/environments/production/deployment-branch-policies";
        assert_eq!(gated(&index, "PUT", &format!("{path}/1"), None), Ok(true), "the PUT twin is gated");
        assert_eq!(gated(&index, "POST", path, None), Ok(true), "POST {path}");
    }

    /// R58-4: a branch name holds `/` (`release/1.0`); GitHub's branch routes take it unescaped,
    /// so `…/branches/release/1.0/protection` is that branch's protection, while the gated
    /// templates expect `protection` right after one `{branch}` segment and the request falls to
    /// the ungated `PUT`/`PATCH`/`POST` in a repository.
    #[test]
    fn re_attack_58_r4_a_protected_branch_with_a_slash_is_still_guarded() {
        let index = bundled();
        assert_eq!(gated(&index, "PUT", "/repos/o/r/branches/main/protection", None), Ok(true), "the control");
        all_wait(
            &index,
            &[
                ("PUT", "/repos/o/r/branches/release/1.0/protection", None),
                ("PATCH", "/repos/o/r/branches/release/1.0/protection/required_pull_request_reviews", None),
                ("POST", "/repos/o/r/branches/release/1.0/protection/required_pull_request_reviews", None),
                ("PUT", "/repos/o/r/branches/release/1.0/protection/restrictions/users", None),
            ],
        );
    }

    /// R58-5: what moves or merges a branch without the gated routes: renaming a branch (the old
    /// name is then free for an ungated `POST …/git/refs` at any commit: a force-move), syncing a
    /// fork's branch with a merge commit, and merging the base into a pull request's head.
    #[test]
    fn re_attack_58_r5_renaming_and_merging_branches_wait() {
        let index = bundled();
        all_wait(
            &index,
            &[
                ("POST", "/repos/o/r/branches/main/rename", None),
                ("POST", "/repos/o/r/merge-upstream", None),
                ("PUT", "/repos/o/r/pulls/7/update-branch", None),
            ],
        );
    }

    /// R58-6: GraphQL mutations that grant access to someone else, remove people, or change an
    /// organization's or enterprise's settings — the REST forms of which the spec gates (`POST`
    /// outside a repository waits; organization invitations and memberships are gated) or never
    /// credentials — go as the ungated `graphql`.
    #[test]
    fn re_attack_58_r6_graphql_grants_and_organization_settings_wait() {
        let index = bundled();
        let fields = [
            "grantMigratorRole",
            "grantEnterpriseOrganizationsMigratorRole",
            "removeOutsideCollaborator",
            "updateOrganizationAllowPrivateRepositoryForkingSetting",
            "updateEnterpriseDefaultRepositoryPermissionSetting",
            "updateEnterpriseMembersCanChangeRepositoryVisibilitySetting",
            "updateEnterpriseOwnerOrganizationRole",
            "inviteEnterpriseAdmin",
            "transferEnterpriseOrganization",
        ];
        let cases: Vec<(&str, &str, Option<&[&str]>)> =
            fields.iter().map(|field| ("POST", "/graphql", Some(std::slice::from_ref(field)))).collect();
        all_wait(&index, &cases);
    }
}

/// The fifty-ninth re-attack (the bundled AWS and Google Cloud specs, decision 0017): each test
/// asserts the secure outcome; each fails while its hole is open.
mod re_attack_59 {
    use crate::policy::{OperationIndex, OperationMatch};

    const AWS_CLI_MANIFEST: &str = include_str!("../../../../connectors/specs/aws-cli/manifest.toml");
    const GOOGLE_CLOUD_MANIFEST: &str = include_str!("../../../../connectors/specs/google-cloud/manifest.toml");
    const S3: &str = "s3.amazonaws.com:443";
    const GCS: &str = "storage.googleapis.com:443";

    fn bundled(text: &str) -> OperationIndex<()> {
        let parsed = crate::manifest::parse_manifest(text, "manifest.toml").unwrap();
        OperationIndex::new(parsed.proxy.unwrap().operations.into_iter().map(|operation| ((), operation)).collect())
    }

    /// `(method, path, query, headers)`: every one must wait, be refused or go uncredentialed;
    /// the ones matched by an ungated operation are named.
    fn all_wait(index: &OperationIndex<()>, host: &str, cases: &[(&str, &str, Option<&str>, &[&str])]) {
        let leaked: Vec<String> = cases
            .iter()
            .filter_map(|(method, path, query, headers)| {
                match index.match_request_with(method, host, path, *query, headers, None) {
                    OperationMatch::Matched { operation, .. } if !operation.approval => Some(format!(
                        "{method} {path}?{} {headers:?}: ungated `{}`",
                        query.unwrap_or_default(),
                        operation.name
                    )),
                    _ => None,
                }
            })
            .collect();
        assert!(leaked.is_empty(), "credentialed at once:\n{}", leaked.join("\n"));
    }

    /// R59-1: S3 reads the access-list, grant and Object Lock "headers" from the query string as
    /// well (`?x-amz-acl=public-read`: what AWS's own SDKs hoist into a presigned URL, and what
    /// the Java SDK v1's `addRequestParameter("x-amz-acl", …)` sends). The spec gates them only as
    /// headers (`headers = ["x-amz-acl", "x-amz-grant-*", "x-amz-object-lock-*"]`) or as the
    /// `?acl` / `?retention` / `?legal-hold` sub-resources, so an upload, a copy onto itself or a
    /// multipart upload carrying them in its query is the ungated `s3_put_object` /
    /// `s3_multipart`, re-signed with the user's keys (the query is part of what is signed).
    #[test]
    fn re_attack_59_r1_s3_acl_grant_and_lock_in_the_query_wait() {
        let all_users = "uri%3D%22http%3A%2F%2Facs.amazonaws.com%2Fgroups%2Fglobal%2FAllUsers%22";
        let grant_read = format!("x-amz-grant-read={all_users}");
        let grant_full = format!("X-Amz-Grant-Full-Control={all_users}");
        all_wait(
            &bundled(AWS_CLI_MANIFEST),
            S3,
            &[
                ("PUT", "/private-bucket/report.pdf", Some("x-amz-acl=public-read"), &[]),
                ("PUT", "/private-bucket/report.pdf", Some("X-Amz-Acl=public-read-write"), &[]),
                ("PUT", "/private-bucket/report.pdf", Some(&grant_read), &[]),
                ("PUT", "/private-bucket/report.pdf", Some(&grant_full), &[]),
                // A copy onto itself: the object's content unchanged, its access list public.
                ("PUT", "/private-bucket/report.pdf", Some("x-amz-acl=public-read"), &["x-amz-copy-source"]),
                // An irreversible COMPLIANCE lock (the header form is gated for this).
                (
                    "PUT",
                    "/private-bucket/report.pdf",
                    Some(
                        "x-amz-object-lock-mode=COMPLIANCE&x-amz-object-lock-retain-until-date=2099-01-01T00%3A00%3A00Z",
                    ),
                    &["x-amz-copy-source"],
                ),
                ("PUT", "/private-bucket/report.pdf", Some("x-amz-object-lock-legal-hold=ON"), &["x-amz-copy-source"]),
                ("POST", "/private-bucket/big.bin", Some("uploads&x-amz-acl=public-read"), &[]),
                ("POST", "/private-bucket/big.bin", Some(&format!("uploads&{grant_read}")), &[]),
            ],
        );
    }

    /// R59-2: Cloud Storage object retention (Object Lock): the XML API's
    /// `PUT /BUCKET/OBJECT?retention` with `<Retention><Mode>COMPLIANCE</Mode>…` sets a
    /// retention that "cannot be removed or shortened" (Google's put-object-retention page), and
    /// with `x-goog-bypass-governance-retention: true` removes a GOVERNANCE one; the JSON API's
    /// `PATCH …/o/OBJECT?overrideUnlockedRetention=true` removes or shortens an Unlocked one. The
    /// AWS spec gates the same effect (`?retention`, `?legal-hold`, `x-amz-object-lock-*`); the
    /// Google spec gates only `?acl`, so each is the ungated `xml_put_object` / `update_object`.
    #[test]
    fn re_attack_59_r2_cloud_storage_object_retention_waits() {
        all_wait(
            &bundled(GOOGLE_CLOUD_MANIFEST),
            GCS,
            &[
                ("PUT", "/user-bucket/ledger.csv", Some("retention"), &[]),
                ("PUT", "/user-bucket/ledger.csv", Some("retention"), &["x-goog-bypass-governance-retention"]),
                ("PUT", "/user-bucket/ledger.csv", Some("retention&generation=1"), &[]),
                ("PATCH", "/storage/v1/b/user-bucket/o/ledger.csv", Some("overrideUnlockedRetention=true"), &[]),
            ],
        );
    }

    /// R59-3 (LOW): an object's tags (`PUT /bucket/key?tagging`, or `x-amz-tagging` with
    /// `x-amz-tagging-directive: REPLACE` on a copy onto itself) go out ungated. What a tag does
    /// is the user's configuration: a lifecycle rule filtered on a tag expires (deletes) what the
    /// agent tags, a bucket policy on `s3:ExistingObjectTag/…` opens what it tags.
    #[test]
    fn re_attack_59_r3_s3_object_tags_wait() {
        all_wait(
            &bundled(AWS_CLI_MANIFEST),
            S3,
            &[
                ("PUT", "/private-bucket/report.pdf", Some("tagging"), &[]),
                ("PUT", "/private-bucket/report.pdf", None, &["x-amz-tagging", "x-amz-copy-source"]),
                ("PUT", "/private-bucket/report.pdf", Some("x-amz-tagging=expire%3Dnow"), &[]),
            ],
        );
    }

    /// What held this round (passes): bucket sub-resources by a trailing `/`, `?delete` on the
    /// bucket, any case of `?acl`, paths a server reads otherwise, other S3 and STS hosts and
    /// methods (no operation: no key), the STS query API's `GET`, the Cloud Storage batch and
    /// gRPC paths, HMAC keys and bucket ACL routes of the JSON API.
    #[test]
    fn re_attack_59_held() {
        let aws = bundled(AWS_CLI_MANIFEST);
        all_wait(
            &aws,
            S3,
            &[
                ("PUT", "/b/", Some("policy"), &[]),
                ("PUT", "/b/", Some("publicAccessBlock"), &[]),
                ("POST", "/b/", Some("delete"), &[]),
                ("PUT", "/b/k", Some("ACL"), &[]),
                ("PUT", "/b/k", Some("x=1;acl"), &[]),
                ("PUT", "/b/k", Some("%61cl="), &[]),
                ("PUT", "/b/k", Some("legal-hold"), &[]),
                ("PUT", "/b//k", Some("policy"), &[]),
                ("PUT", "/b/%2F", Some("policy"), &[]),
                ("PUT", "/b/..", Some("policy"), &[]),
                ("PUT", "/b;x/k", None, &[]),
                ("DELETE", "/b/k", Some("versionId=1"), &[]),
                ("PUT", "/b/k", None, &["x-amz-grant-write-acp"]),
                ("POST", "/b/k", Some("uploads"), &["x-amz-object-lock-mode"]),
            ],
        );
        for (method, host, path) in [
            ("GET", "sts.amazonaws.com:443", "/"),
            ("POST", "sts.amazonaws.com:443", "/x"),
            ("PUT", "b.s3.amazonaws.com:443", "/k"),
            ("PUT", "s3.us-east-1.amazonaws.com:443", "/b/k"),
            ("PUT", "s3.dualstack.us-east-1.amazonaws.com:443", "/b/k"),
        ] {
            assert_eq!(aws.match_request(method, host, path), OperationMatch::None, "{method} {host}{path}");
        }
        assert!(matches!(
            aws.match_request_with("POST", "sts.amazonaws.com:443", "/", Some("Action=GetFederationToken"), &[], None),
            OperationMatch::Matched { operation, .. } if operation.approval
        ));
        let gcs = bundled(GOOGLE_CLOUD_MANIFEST);
        for (method, path) in [
            ("POST", "/batch/storage/v1"),
            ("POST", "/google.storage.v2.Storage/DeleteObject"),
            ("POST", "/storage/v1/projects/p/hmacKeys"),
            ("POST", "/storage/v1/b/b/acl"),
            ("POST", "/storage/v1/b/b/lockRetentionPolicy"),
            ("PATCH", "/storage/v1/b/b/defaultObjectAcl/allUsers"),
        ] {
            assert_eq!(gcs.match_request(method, GCS, path), OperationMatch::None, "{method} {path}");
        }
        all_wait(
            &gcs,
            GCS,
            &[
                ("PUT", "/storage/v1/b/b/iam", None, &[]),
                ("PUT", "/b/", Some("cors"), &[]),
                ("PUT", "/b/o", Some("ACL"), &[]),
                ("PUT", "/b/o", None, &["x-goog-acl"]),
                ("POST", "/upload/storage/v1/b/b/o", Some("uploadType=media&name=x&PredefinedAcl=publicRead"), &[]),
                ("POST", "/storage/v1/b/b/o/s/rewriteTo/b/d/o/x", Some("destinationPredefinedAcl=publicRead"), &[]),
                ("PATCH", "/storage/v1/b/b/o/x/acl/allUsers", None, &[]),
                ("DELETE", "/storage/v1/b/b/o/x", None, &[]),
            ],
        );
    }
}
