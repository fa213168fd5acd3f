//! Which connector operation a launched agent's request is (SPEC §15 "Each request"): method, host
//! and path against every installed connector's `[[proxy.operations]]`. The most specific match
//! wins (at the first segment where two templates differ, a literal beats a `{name}`, which beats
//! a `/**` rest); a tie is ambiguous and the request goes out without a credential.
//!
//! The path is compared the way a server would read it ([`normalise_segment`]): a request to an
//! operation's host whose path a server could read as another path (`..`, `%2e%2e`, an encoded `/`
//! or `\`, an empty segment) matches nothing and is refused, so it can never be credentialed under
//! a less-guarded operation and then land on a guarded one.

use std::collections::BTreeSet;

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

    /// Whether matching `method` `host` `path` depends on the request's GraphQL document: an
    /// operation with `graphql` covers that path. The caller then reads the body
    /// ([`graphql_names`]) and calls [`OperationIndex::match_graphql`].
    pub fn needs_graphql(&self, method: &str, host: &str, path: &str) -> bool {
        self.covers_graphql(Some(method), host, path)
    }

    /// Whether a GraphQL operation covers `path` on `host`, with `method` or (`None`) any.
    pub fn covers_graphql(&self, method: Option<&str>, host: &str, path: &str) -> bool {
        let mut candidates = self.entries.iter().map(|(_, operation)| operation).filter(|operation| {
            operation.graphql.is_some()
                && method.is_none_or(|method| operation.method == method)
                && operation.host.eq_ignore_ascii_case(host)
        });
        // Most requests meet no GraphQL operation: their path is not read at all.
        let Some(first) = candidates.next() else { return false };
        let Some(segments) = request_segments(path) else { return false };
        std::iter::once(first).chain(candidates).any(|operation| matches(operation, &segments))
    }

    /// Matches `method` `host` (`host:port`) `path` (the request target's path, without its query).
    pub fn match_request(&self, method: &str, host: &str, path: &str) -> OperationMatch<'_, K> {
        self.match_request_with(method, host, path, None, &[], None)
    }

    /// [`OperationIndex::match_request`] for a request with `query` (the target's, without `?`),
    /// the header names `headers` (lowercase) and a GraphQL document naming `graphql`: an operation
    /// with a `query` parameter matches only when the query names it, one with `headers` only when
    /// the request carries one of them, one with a `graphql` field only when its field is named,
    /// and each wins over the operations of its path without one.
    pub fn match_request_with(
        &self,
        method: &str,
        host: &str,
        path: &str,
        query: Option<&str>,
        headers: &[&str],
        graphql: Option<&BTreeSet<String>>,
    ) -> OperationMatch<'_, K> {
        let on_host: Vec<&(K, ProxyOperation)> =
            self.entries.iter().filter(|(_, operation)| operation.host.eq_ignore_ascii_case(host)).collect();
        if on_host.is_empty() {
            return OperationMatch::None;
        }
        let Some(segments) = request_segments(path) else {
            return OperationMatch::NotCanonical;
        };
        let named = |operation: &ProxyOperation| match (&operation.graphql, graphql) {
            (None, _) => true,
            (Some(field), Some(names)) => names.contains(field),
            (Some(_), None) => false,
        };
        let queried = |operation: &ProxyOperation| match &operation.query {
            None => true,
            Some(name) => query.is_some_and(|query| names_parameter(query, name)),
        };
        let carried = |operation: &ProxyOperation| {
            operation.headers.is_empty()
                || operation.headers.iter().any(|wanted| headers.iter().any(|name| header_matches(wanted, name)))
        };
        let candidates: Vec<&(K, ProxyOperation)> = on_host
            .into_iter()
            .filter(|(_, operation)| {
                operation.method == method
                    && matches(operation, &segments)
                    && named(operation)
                    && queried(operation)
                    && carried(operation)
            })
            .collect();
        // A named GraphQL field, or a query parameter named, makes its operations the only
        // candidates.
        let any_graphql = candidates.iter().any(|(_, operation)| operation.graphql.is_some());
        let any_query = candidates.iter().any(|(_, operation)| operation.query.is_some());
        let any_header = candidates.iter().any(|(_, operation)| !operation.headers.is_empty());
        let mut best: Vec<&(K, ProxyOperation)> = Vec::new();
        for entry in candidates {
            let operation = &entry.1;
            if (any_graphql && operation.graphql.is_none())
                || (any_query && operation.query.is_none())
                || (any_header && !any_query && operation.headers.is_empty())
            {
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

/// Whether the header `name` (lowercase) is `wanted`, or starts with it when it ends in `*`.
fn header_matches(wanted: &str, name: &str) -> bool {
    match wanted.strip_suffix('*') {
        Some(prefix) => name.len() > prefix.len() && name.starts_with(prefix),
        None => name == wanted,
    }
}

/// Whether `query` names the parameter `name` (`acl`, `acl=`, `x=1&acl`), read as widely as a
/// server could: `;` separates too, escapes are decoded, ASCII case is folded — a wider reading
/// only makes the operation naming it match more often.
pub fn names_parameter(query: &str, name: &str) -> bool {
    query.split(['&', ';']).any(|pair| {
        let named = pair.split_once('=').map_or(pair, |(named, _)| named);
        let decoded = percent_encoding::percent_decode_str(&named.replace('+', " ")).collect::<Vec<u8>>();
        decoded.trim_ascii().eq_ignore_ascii_case(name.as_bytes())
    })
}

/// The identifiers of a GraphQL request body (`{"query": …}`, or a batch of them): every name the
/// documents hold, strings and comments included — a wider set only makes more operations match,
/// which can ask for an approval more often, never less. An error when the body holds no
/// document (not JSON, no `query`): a request to a gated GraphQL path that cannot be read is
/// refused rather than guessed.
pub fn graphql_names(body: &[u8]) -> Result<BTreeSet<String>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("the GraphQL request is not JSON: {e}"))?;
    let documents: Vec<&serde_json::Value> = match &value {
        serde_json::Value::Array(batch) => batch.iter().collect(),
        single => vec![single],
    };
    let mut names = BTreeSet::new();
    for document in documents {
        let query = document
            .get("query")
            .and_then(serde_json::Value::as_str)
            .ok_or("the GraphQL request has no `query` document")?;
        let mut name = String::new();
        for c in query.chars().chain(std::iter::once(' ')) {
            if c.is_ascii_alphanumeric() || c == '_' {
                name.push(c);
            } else if !name.is_empty() {
                if !name.starts_with(|c: char| c.is_ascii_digit()) {
                    names.insert(std::mem::take(&mut name));
                }
                name.clear();
            }
        }
    }
    Ok(names)
}

/// Whether a request's URL query (`query`, without its `?`) could carry a GraphQL document or a
/// stand-in for one: a `query` parameter (a server built on Rails takes the URL's over the body's,
/// and answers a `GET`), an `extensions` one (a persisted query names its document by a hash),
/// however their names are encoded or nested (`qu%65ry`, `query[]`). Such a document is never
/// read, so a request carrying one to a GraphQL path is refused (the fourteenth re-attack sent
/// `mergePullRequest` in the URL beside a harmless body).
pub fn graphql_in_query(query: &str) -> bool {
    query.split(';').flat_map(|part| url::form_urlencoded::parse(part.as_bytes())).any(|(name, _)| {
        let name = name.trim().to_ascii_lowercase();
        let name = name.split('[').next().unwrap_or_default();
        matches!(name, "query" | "extensions" | "queryid" | "documentid" | "doc_id" | "id")
    })
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
        Segment::Literal(literal) => literal == actual || with_format_suffix(actual, literal),
        Segment::Parameter(_) => true,
    })
}

/// `merge.json` for the literal `merge`: Rails (GitHub's API among its users) routes an optional
/// `.:format` suffix to the same action, so the segment matches the literal, and the operation
/// that guards it wins over a broader one (the eighth re-attack: `…/pulls/7/merge.json` and
/// `/graphql.json` fell to ungated operations).
fn with_format_suffix(actual: &str, literal: &str) -> bool {
    actual
        .strip_prefix(literal)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|format| !format.is_empty() && format.bytes().all(|byte| byte.is_ascii_alphanumeric()))
}

/// How `a` compares to `b` for a request of `length` segments both match: at the first position
/// where they differ, literal > parameter > rest; when every position is alike, a template
/// without a rest beats one whose rest matched nothing (`/repos/{o}/{r}` over `/repos/{o}/{r}/**`).
fn specificity(a: &ProxyOperation, b: &ProxyOperation, length: usize) -> std::cmp::Ordering {
    let kind = |operation: &ProxyOperation, index: usize| match operation.path.segments.get(index) {
        Some(Segment::Literal(_)) => 2,
        Some(Segment::Parameter(_)) => 1,
        None => 0,
    };
    (0..length)
        .map(|index| kind(a, index).cmp(&kind(b, index)))
        .find(|ordering| ordering.is_ne())
        .unwrap_or_else(|| b.path.rest.cmp(&a.path.rest))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_graphql_document_in_the_url_is_seen_however_its_name_is_spelled() {
        for query in [
            "query=mutation%7Bx%7D",
            "a=1&qu%65ry=x",
            "QUERY=x",
            "query[]=x",
            "a=1;query=x",
            "extensions=%7B%7D",
            "+query=x",
        ] {
            assert!(graphql_in_query(query), "{query}");
        }
        for query in ["", "a=1", "querystring=x", "variables=%7B%7D", "operationName=M"] {
            assert!(!graphql_in_query(query), "{query}");
        }
    }

    use super::*;
    use crate::manifest::PathTemplate;

    fn operation(name: &str, method: &str, path: &str, approval: bool) -> ProxyOperation {
        ProxyOperation {
            name: name.to_string(),
            method: method.to_string(),
            host: "api.github.com:443".to_string(),
            path: PathTemplate::parse(path).unwrap(),
            approval,
            graphql: None,
            query: None,
            headers: Vec::new(),
            format: None,
            service: None,
        }
    }

    /// `gh pr merge` sends `mutation … { mergePullRequest(…) }` to `POST /graphql`: the gated
    /// operation naming that field wins over the plain `graphql` one, whatever the alias, batch
    /// or spacing; a document that cannot be read is an error, never a silent passthrough.
    #[test]
    fn a_graphql_field_selects_its_operation() {
        let mut merge = operation("merge_pull_request", "POST", "/graphql", true);
        merge.graphql = Some("mergePullRequest".to_string());
        let index = OperationIndex::new(vec![("gh", operation("graphql", "POST", "/graphql", false)), ("gh", merge)]);
        assert!(index.needs_graphql("POST", "api.github.com:443", "/graphql"));
        assert!(!index.needs_graphql("POST", "api.github.com:443", "/user"));
        let of = |body: &str| {
            let names = graphql_names(body.as_bytes()).unwrap();
            name(index.match_request_with("POST", "api.github.com:443", "/graphql", None, &[], Some(&names)))
        };
        assert_eq!(of(r#"{"query":"query { viewer { login } }"}"#), "graphql");
        let merging = r#"{"query":"mutation PullRequestMerge($input: MergePullRequestInput!) {\n mergePullRequest(input: $input) { clientMutationId } }","variables":{}}"#;
        assert_eq!(of(merging), "merge_pull_request");
        assert_eq!(of(r#"{"query":"mutation{x:mergePullRequest(input:{}){clientMutationId}}"}"#), "merge_pull_request");
        assert_eq!(
            of(r#"[{"query":"query{viewer{login}}"},{"query":"mutation{mergePullRequest(input:{}){a}}"}]"#),
            "merge_pull_request"
        );
        assert_eq!(of(r#"{"query":"mutation{mergePullRequestX{a}}"}"#), "graphql", "another field");
        assert_eq!(name(index.match_request("POST", "api.github.com:443", "/graphql")), "graphql");
        for unreadable in ["not json", r#"{"operationName":"x"}"#, r#"{"query": 7}"#] {
            assert!(graphql_names(unreadable.as_bytes()).is_err(), "{unreadable}");
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
        assert_eq!(of("PUT", "/repos/acme/app"), "repo_write", "a rest may match nothing");
        let exact = OperationIndex::new(vec![
            ("gh", operation("delete_in_repository", "DELETE", "/repos/{owner}/{repo}/**", true)),
            ("gh", operation("delete_repository", "DELETE", "/repos/{owner}/{repo}", true)),
        ]);
        let exact_of = |path| name(exact.match_request("DELETE", "api.github.com:443", path));
        assert_eq!(exact_of("/repos/acme/app"), "delete_repository", "exact beats a rest that matched nothing");
        assert_eq!(exact_of("/repos/acme/app/git/refs/heads/x"), "delete_in_repository");
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
        // What a server may read as the guarded segment: a format suffix matches it (so the
        // guarded operation wins), a matrix parameter or an encoded NUL is refused.
        assert_eq!(of("/repos/acme/app/pulls/7/merge.json"), "merge");
        for path in
            ["/repos/acme/app/pulls/7/merge;x", "/repos/acme/app/pulls/7/merge%00", "/repos/acme/app/pulls/7/merge%0a"]
        {
            assert_eq!(of(path), "not_canonical", "{path}");
        }
        assert_eq!(of("/repos/acme/app/contents/merge.json.tar"), "contents", "only the segment a literal names");
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
