//! Which connector operation a launched agent's request is (SPEC §15 "Each request"): method, host
//! and path against every installed connector's `[[proxy.operations]]`. The most specific match
//! wins (at the first segment where two templates differ, a literal beats a `{name}`, which beats
//! a `/**` rest); a tie is ambiguous and the request goes out without a credential.
//!
//! The path is compared the way a server would read it ([`normalise_segment`]): a request to an
//! operation's host whose path a server could read as another path (`..`, `%2e%2e`, an encoded `/`
//! or `\`, an empty segment) matches nothing and is refused, so it can never be credentialed under
//! a less-guarded operation and then land on a guarded one.

use crate::manifest::{ProxyOperation, Segment, normalise_segment};

/// Every installed connector's operations; `K` names the connector (its reference).
#[derive(Debug, Clone)]
pub struct OperationIndex<K> {
    entries: Vec<(K, ProxyOperation)>,
}

/// What a request is.
#[derive(Debug, PartialEq, Eq)]
pub enum OperationMatch<'a, K> {
    /// No operation covers it: passthrough, unmodified.
    None,
    Matched {
        connector: &'a K,
        operation: &'a ProxyOperation,
    },
    /// Two or more equally specific operations: passthrough without a credential, recorded.
    Ambiguous(Vec<(&'a K, &'a ProxyOperation)>),
    /// A path a server could read as another path, to a host that has operations: refused.
    NotCanonical,
}

impl<K> Default for OperationIndex<K> {
    fn default() -> Self {
        OperationIndex { entries: Vec::new() }
    }
}

impl<K> OperationIndex<K> {
    pub fn new(entries: Vec<(K, ProxyOperation)>) -> OperationIndex<K> {
        OperationIndex { entries }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every operation's `host:port`, for the allowlist (SPEC §15: "plus every operation's host").
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(_, operation)| operation.host.as_str())
    }

    /// Whether any operation names `host` (`host:port`) literally.
    pub fn names_host(&self, host: &str) -> bool {
        self.hosts().any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Matches `method` `host` (`host:port`) `path` (the request target's path, without its query).
    pub fn match_request(&self, method: &str, host: &str, path: &str) -> OperationMatch<'_, K> {
        let on_host: Vec<&(K, ProxyOperation)> =
            self.entries.iter().filter(|(_, operation)| operation.host.eq_ignore_ascii_case(host)).collect();
        if on_host.is_empty() {
            return OperationMatch::None;
        }
        let Some(segments) = request_segments(path) else {
            return OperationMatch::NotCanonical;
        };
        let mut best: Vec<&(K, ProxyOperation)> = Vec::new();
        for entry in on_host {
            let operation = &entry.1;
            if operation.method != method || !matches(operation, &segments) {
                continue;
            }
            match best.first().map(|(_, leader)| specificity(operation, leader, segments.len())) {
                None | Some(std::cmp::Ordering::Equal) => best.push(entry),
                Some(std::cmp::Ordering::Greater) => best = vec![entry],
                Some(std::cmp::Ordering::Less) => {}
            }
        }
        match best.as_slice() {
            [] => OperationMatch::None,
            [(connector, operation)] => OperationMatch::Matched { connector, operation },
            many => OperationMatch::Ambiguous(many.iter().map(|(k, o)| (k, o)).collect()),
        }
    }
}

/// The request path's segments, normalised; `None` when a server could read it as another path.
/// One trailing `/` is ignored (`/user/` is `/user`); `/` alone has no segments.
fn request_segments(path: &str) -> Option<Vec<String>> {
    let body = path.strip_prefix('/')?;
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Some(Vec::new());
    }
    body.split('/').map(normalise_segment).collect()
}

fn matches(operation: &ProxyOperation, segments: &[String]) -> bool {
    let template = &operation.path;
    let fixed = template.segments.len();
    if segments.len() < fixed || (!template.rest && segments.len() != fixed) {
        return false;
    }
    template.segments.iter().zip(segments).all(|(expected, actual)| match expected {
        Segment::Literal(literal) => literal == actual,
        Segment::Parameter(_) => true,
    })
}

/// How `a` compares to `b` for a request of `length` segments both match: at the first position
/// where they differ, literal > parameter > rest.
fn specificity(a: &ProxyOperation, b: &ProxyOperation, length: usize) -> std::cmp::Ordering {
    let kind = |operation: &ProxyOperation, index: usize| match operation.path.segments.get(index) {
        Some(Segment::Literal(_)) => 2,
        Some(Segment::Parameter(_)) => 1,
        None => 0,
    };
    (0..length)
        .map(|index| kind(a, index).cmp(&kind(b, index)))
        .find(|ordering| ordering.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::PathTemplate;

    fn operation(name: &str, method: &str, path: &str, approval: bool) -> ProxyOperation {
        ProxyOperation {
            name: name.to_string(),
            method: method.to_string(),
            host: "api.github.com:443".to_string(),
            path: PathTemplate::parse(path).unwrap(),
            approval,
        }
    }

    fn github() -> OperationIndex<&'static str> {
        OperationIndex::new(vec![
            ("gh", operation("merge", "PUT", "/repos/{owner}/{repo}/pulls/{number}/merge", true)),
            ("gh", operation("contents", "PUT", "/repos/{owner}/{repo}/contents/**", false)),
            ("gh", operation("repo_write", "PUT", "/repos/{owner}/{repo}/**", false)),
            ("gh", operation("user", "GET", "/user", false)),
            ("gh", operation("any_get", "GET", "/**", false)),
            ("gh", operation("issues", "GET", "/repos/{owner}/{repo}/issues", false)),
            ("other", operation("issues_too", "GET", "/repos/{o}/{r}/issues", false)),
        ])
    }

    fn name<'a>(found: OperationMatch<'a, &'static str>) -> String {
        match found {
            OperationMatch::None => "none".to_string(),
            OperationMatch::Matched { operation, .. } => operation.name.clone(),
            OperationMatch::Ambiguous(all) => {
                format!("ambiguous:{}", all.iter().map(|(_, o)| o.name.as_str()).collect::<Vec<_>>().join(","))
            }
            OperationMatch::NotCanonical => "not_canonical".to_string(),
        }
    }

    #[test]
    fn the_most_specific_operation_wins_and_a_tie_is_ambiguous() {
        let index = github();
        let of = |method, path| name(index.match_request(method, "api.github.com:443", path));
        assert_eq!(of("PUT", "/repos/acme/app/pulls/7/merge"), "merge");
        assert_eq!(of("PUT", "/repos/acme/app/contents/src/main.rs"), "contents");
        assert_eq!(of("PUT", "/repos/acme/app/contents"), "contents", "a rest matches zero segments");
        assert_eq!(of("PUT", "/repos/acme/app/topics"), "repo_write");
        assert_eq!(of("GET", "/user"), "user", "a literal beats a rest");
        assert_eq!(of("GET", "/user/"), "user", "one trailing slash is the same path");
        assert_eq!(of("GET", "/users/someone"), "any_get");
        assert_eq!(of("GET", "/"), "any_get");
        assert_eq!(of("DELETE", "/user"), "none", "the method is part of the match");
        assert_eq!(of("GET", "/repos/acme/app/issues"), "ambiguous:issues,issues_too");
        assert_eq!(name(index.match_request("GET", "example.com:443", "/user")), "none");
        assert_eq!(name(index.match_request("GET", "API.GitHub.com:443", "/user")), "user");
    }

    #[test]
    fn a_path_a_server_could_read_differently_never_matches_a_less_guarded_operation() {
        let index = github();
        let of = |path| name(index.match_request("PUT", "api.github.com:443", path));
        // Each of these is, to some server, the gated merge: none may ride on `contents/**`.
        for path in [
            "/repos/acme/app/contents/../pulls/7/merge",
            "/repos/acme/app/contents/%2e%2e/pulls/7/merge",
            "/repos/acme/app/contents/%2E./pulls/7/merge",
            "/repos/acme/app/contents/.%2e/pulls/7/merge",
            "/repos/acme/app/contents/./../pulls/7/merge",
            "/repos/acme/app/contents/x%2f..%2f..%2fpulls/7/merge",
            "/repos/acme/app/contents/x%5C..%5Cpulls",
            "/repos/acme/app/contents\\..\\pulls/7/merge",
            "/repos/acme/app//pulls/7/merge",
            "/repos/acme/app/contents/%",
            "/repos/acme/app/contents/%zz",
            "repos/acme/app/pulls/7/merge",
        ] {
            assert_eq!(of(path), "not_canonical", "{path}");
        }
        // Encodings that name the same segment are the same segment, and case is ignored.
        assert_eq!(of("/repos/acme/app/pull%73/7/merge"), "merge");
        assert_eq!(of("/REPOS/acme/app/PULLS/7/Merge"), "merge");
        assert_eq!(of("/repos/acme/app/contents/a%20b"), "contents");
        // A host without operations is not inspected at all.
        assert_eq!(name(index.match_request("PUT", "example.com:443", "/a/../b")), "none");
    }

    #[test]
    fn templates_are_checked_when_the_manifest_is_read() {
        assert!(PathTemplate::parse("/repos/{owner}/**").unwrap().rest);
        assert!(PathTemplate::parse("/**").unwrap().segments.is_empty());
        for bad in [
            "repos",
            "/repos//x",
            "/repos/",
            "/a/{b",
            "/a/x{b}",
            "/a/{b}/{b}",
            "/a/**/b",
            "/a/b**",
            "/a/../b",
            "/a/%2e%2e/b",
            "/a/%2f",
            "/a?x=1",
            "/a/{1b}",
        ] {
            assert!(PathTemplate::parse(bad).is_err(), "{bad}");
        }
    }
}
