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
        // A header named in the query too: S3 reads `x-amz-*` from the query as from the headers
        // (what its presigned URLs carry), so `?x-amz-acl=public-read` on a PUT signed with the
        // user's keys made an object public (the fifty-ninth re-attack's R1).
        // Read only where an operation on the host names headers (none of GitHub's does).
        let any_headers = on_host.iter().any(|(_, operation)| !operation.headers.is_empty());
        let in_query: Vec<String> = match query {
            Some(query) if any_headers => {
                parameter_names(query).map(|name| String::from_utf8_lossy(&name).to_ascii_lowercase()).collect()
            }
            _ => Vec::new(),
        };
        let carried = |operation: &ProxyOperation| {
            operation.headers.is_empty()
                || operation.headers.iter().any(|wanted| {
                    headers
                        .iter()
                        .copied()
                        .chain(in_query.iter().map(String::as_str))
                        .any(|name| header_matches(wanted, name))
                })
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

/// The parameter names of `query`, read as widely as a server could: `;` separates too, `+` is a
/// space, escapes are decoded, the ends trimmed.
fn parameter_names(query: &str) -> impl Iterator<Item = Vec<u8>> + '_ {
    query.split(['&', ';']).map(|pair| {
        let named = pair.split_once('=').map_or(pair, |(named, _)| named);
        let decoded = percent_encoding::percent_decode_str(&named.replace('+', " ")).collect::<Vec<u8>>();
        decoded.trim_ascii().to_vec()
    })
}

/// Whether `query` names the parameter `name` (`acl`, `acl=`, `x=1&acl`), its names read by
/// [`parameter_names`], ASCII case folded — a wider reading only makes the operation naming it
/// match more often.
pub fn names_parameter(query: &str, name: &str) -> bool {
    parameter_names(query).any(|named| named.eq_ignore_ascii_case(name.as_bytes()))
}

/// What a request member (a body's JSON key, a form's or URL query's parameter, keyed as a server
/// keys it) is to a GraphQL server: the document itself, or a stand-in naming a stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GraphqlMember {
    Document,
    StandIn,
}

/// `key` as a GraphQL member, `_` and `-` ignored: `query` in any case (Go's `encoding/json`
/// matches keys so, the last one winning); `extensions` (a persisted query's hash), `documentId`,
/// `doc_id`, `queryId`, `id`, `persistedQuery` (a persisted document's name). Case is folded as
/// Go folds it, Unicode's simple folding: `ſ` (U+017F) is `s` and `K` (U+212A) is `k` to it, and
/// `extenſions` named a stored document the proxy did not see (the fifty-sixth re-attack's N6).
fn graphql_member(key: &str) -> Option<GraphqlMember> {
    let folded: String = key
        .chars()
        .filter(|c| !matches!(c, '_' | '-'))
        .flat_map(|c| if c == '\u{17f}' { 's' } else { c }.to_lowercase())
        .collect();
    match folded.as_str() {
        "query" => Some(GraphqlMember::Document),
        "extensions" | "queryid" | "documentid" | "docid" | "id" | "persistedquery" => Some(GraphqlMember::StandIn),
        _ => None,
    }
}

/// The identifiers of a GraphQL request body: every name the documents hold, strings and
/// comments included — a wider set only makes more operations match, which can ask for an
/// approval more often, never less. The body is read every way a server could read it, and the
/// names of every reading are taken (the fifty-third re-attack's F2 and F5):
///
/// - as JSON when it starts like JSON (`{…}` or a batch `[…]`, after a UTF-8 BOM: the
///   fifty-sixth re-attack's N5): its first value (a Go `json.Decoder` ignores what follows),
///   invalid UTF-8 replaced (as Go does), every member that is `query` in any case and every
///   duplicate (parsers differ on which one wins);
/// - as a URL-encoded form when its `Content-Type` lets a server read one (`forms`, see
///   [`crate::policy::form_readings`]: Rails reads `params[:query]` from a form), every
///   parameter keyed `query` as Rack or PHP keys it.
///
/// An error, so the request is refused rather than guessed, when: it is not UTF-8 (a UTF-16 or
/// UTF-32 byte order mark, or a NUL byte, which no JSON or URL-encoded UTF-8 body holds); it
/// starts like JSON and is not JSON; no reading holds a document (a `query` string); a document
/// is stood in for by a persisted query's name (`documentId`, `doc_id`, `id`, `queryId`, a
/// non-empty `extensions`), which is not read, as [`graphql_in_query`] refuses them in the URL;
/// or the body may be read as multipart, whose parts are not parsed.
pub fn graphql_names(body: &[u8], forms: crate::policy::FormReadings) -> Result<BTreeSet<String>, String> {
    if forms.multipart {
        return Err("a multipart GraphQL request is not read (its parts could hold any document); send it as \
                    JSON"
            .to_string());
    }
    // A body in UTF-16 or UTF-32 (a BOM, or the NUL bytes an ASCII character has there) is JSON
    // to a server that detects its encoding (Python's `json.loads`) and bytes to this reading.
    if body.starts_with(&[0xfe, 0xff]) || body.starts_with(&[0xff, 0xfe]) || body.contains(&0) {
        return Err("the GraphQL request is not UTF-8 (it has a UTF-16 or UTF-32 byte order mark, or a NUL \
                    byte); send it as UTF-8"
            .to_string());
    }
    // A UTF-8 BOM is dropped by the server's decoding (a fetch API's `json()`): read past it.
    let body = body.strip_prefix("\u{feff}".as_bytes()).unwrap_or(body);
    let mut names = BTreeSet::new();
    let mut documents = Vec::new();
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    // Ruby's JSON readings (the `json` gem, yajl) skip `/* … */` and `// …` comments as
    // whitespace: `/*&query={viewer}&*/{"query":"mutation …"}` was a harmless form to this reading
    // and the mutation to GitHub's, which reads any `/graphql` body as JSON (the fifty-eighth
    // re-attack's R1). No JSON or form body a GraphQL client sends starts with one.
    if trimmed.starts_with('/') {
        return Err("the GraphQL request starts with a comment, which a JSON reading that skips comments reads \
                    past to a document this one does not see; send it as plain JSON"
            .to_string());
    }
    if trimmed.starts_with(['{', '[']) {
        json_documents(trimmed, &mut documents)?;
    }
    if forms.urlencoded {
        for (name, value) in crate::policy::form_pairs(body) {
            match graphql_member(&crate::policy::parameter_key(&name)) {
                Some(GraphqlMember::Document) => documents.push(value),
                Some(GraphqlMember::StandIn) if value.is_empty() => {}
                Some(GraphqlMember::StandIn) => return Err(stand_in(&name)),
                None => {}
            }
        }
    }
    if documents.is_empty() {
        return Err("the GraphQL request has no `query` document".to_string());
    }
    for document in &documents {
        let mut name = String::new();
        for c in document.chars().chain(std::iter::once(' ')) {
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

/// Why a request whose document is stood in for by `name` is refused.
fn stand_in(name: &str) -> String {
    let shown: String = name.chars().take(64).collect();
    format!("the GraphQL request names a stored document (`{shown}`), which is not read to know which operation it is")
}

/// The documents of a JSON GraphQL request `text` (one object, or a batch of them), its first
/// value only, each `query` member in any case and every duplicate; every object must hold one.
fn json_documents(text: &str, documents: &mut Vec<String>) -> Result<(), String> {
    use serde::de::Deserializer as _;
    let mut refusal = None;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read = deserializer.deserialize_any(JsonRequest { documents, refusal: &mut refusal });
    match (refusal, read) {
        (Some(refusal), _) => Err(refusal),
        (None, Ok(())) => Ok(()),
        (None, Err(e)) => Err(format!("the GraphQL request is not JSON: {e}")),
    }
}

/// A JSON GraphQL request's top level: a document, or a batch of them.
struct JsonRequest<'a> {
    documents: &'a mut Vec<String>,
    refusal: &'a mut Option<String>,
}

impl<'de> serde::de::Visitor<'de> for JsonRequest<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a GraphQL request object or a batch of them")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        JsonDocument { documents: self.documents, refusal: self.refusal }.visit_map(map)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut batch: A) -> Result<(), A::Error> {
        while batch
            .next_element_seed(JsonDocument { documents: &mut *self.documents, refusal: &mut *self.refusal })?
            .is_some()
        {}
        Ok(())
    }
}

/// One JSON GraphQL request object.
struct JsonDocument<'a> {
    documents: &'a mut Vec<String>,
    refusal: &'a mut Option<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for JsonDocument<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for JsonDocument<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a GraphQL request object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error as _;
        let mut found = false;
        while let Some(key) = map.next_key::<String>()? {
            let value: serde_json::Value = map.next_value()?;
            match (graphql_member(&key.to_ascii_lowercase()), value) {
                (None, _) => {}
                (Some(GraphqlMember::Document), serde_json::Value::String(document)) => {
                    self.documents.push(document);
                    found = true;
                }
                // Go leaves its field as it was for a `null`.
                (Some(GraphqlMember::Document), serde_json::Value::Null) => {}
                (Some(GraphqlMember::Document), _) => {
                    *self.refusal = Some(format!("the GraphQL request's `{key}` is not a string"));
                    return Err(A::Error::custom("refused"));
                }
                (Some(GraphqlMember::StandIn), serde_json::Value::Null) => {}
                (Some(GraphqlMember::StandIn), serde_json::Value::Object(members)) if members.is_empty() => {}
                (Some(GraphqlMember::StandIn), _) => {
                    *self.refusal = Some(stand_in(&key));
                    return Err(A::Error::custom("refused"));
                }
            }
        }
        if !found {
            *self.refusal = Some("the GraphQL request has no `query` document".to_string());
            return Err(A::Error::custom("refused"));
        }
        Ok(())
    }
}

/// Whether a request's URL query (`query`, without its `?`) could carry a GraphQL document or a
/// stand-in for one: a `query` parameter (a server built on Rails takes the URL's over the body's,
/// and answers a `GET`), an `extensions` one (a persisted query names its document by a hash),
/// however their names are encoded or nested (`qu%65ry`, `query[]`) and keyed as Rack keys them
/// (Rack 2 files `[query]`, `]query` and `[[query]]` under `query`: the fifty-third re-attack's
/// F6). Such a document is never read, so a request carrying one to a GraphQL path is refused
/// (the fourteenth re-attack sent `mergePullRequest` in the URL beside a harmless body).
pub fn graphql_in_query(query: &str) -> bool {
    crate::policy::form_pairs(query.as_bytes())
        .any(|(name, _)| graphql_member(&crate::policy::parameter_key(&name)).is_some())
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

    /// The fifty-third re-attack's F6: Rack 2 keys `[query]`, `]query` and `[[query]]` as `query`,
    /// and they passed a check that read the name before its first `[`.
    #[test]
    fn a_graphql_document_in_the_url_is_seen_under_any_name_rack_keys_as_query() {
        for query in [
            "[query]=x",
            "]query=x",
            "[[query]]=x",
            "%5Bquery%5D=x",
            "%5Dquery=x",
            "a=1&[extensions]=x",
            "[documentId]=x",
            "doc-id=x",
            "[ query ]=x",
        ] {
            assert!(graphql_in_query(query), "{query}");
        }
        for query in ["[a]=query", "x[query]=1", "queryx=1"] {
            assert!(!graphql_in_query(query), "{query}");
        }
    }

    /// The fifty-third re-attack's F2 and F5: a document under `QUERY` or `Query` (Go folds JSON
    /// keys), the first of two `query`s, a first value before trailing bytes, or a form's `query`
    /// (Rails reads a form) was not read; stand-ins for a stored document were not refused.
    #[test]
    fn a_graphql_body_s_names_are_those_of_every_reading() {
        use crate::policy::FormReadings;
        let (json, form) = (FormReadings::default(), FormReadings { urlencoded: true, multipart: false });
        let names = |body: &str, forms| graphql_names(body.as_bytes(), forms);
        let merges = |body: &str, forms| names(body, forms).unwrap().contains("mergePullRequest");
        for body in [
            r#"{"query":"{a}","QUERY":"mutation{mergePullRequest{a}}"}"#,
            r#"{"query":"{a}","Query":"mutation{mergePullRequest{a}}"}"#,
            r#"{"query":"mutation{mergePullRequest{a}}","query":"{a}"}"#,
            r#"{"query":"mutation{mergePullRequest{a}}"} {"query":"{a}"}"#,
            r#"[{"query":"{a}"},{"qUeRy":"mutation{mergePullRequest{a}}"}]"#,
        ] {
            assert!(merges(body, json), "{body}");
        }
        let invalid_utf8 = b"{\"query\":\"mutation{mergePullRequest{a}}\",\"x\":\"\xff\"}";
        assert!(graphql_names(invalid_utf8, json).unwrap().contains("mergePullRequest"), "Go replaces the byte");
        let polyglot = r#"{"query":"{a}","x":"&query=mutation{merge%50ullRequest{a}}%23"}"#;
        assert!(!merges(polyglot, json), "read as JSON alone, the form's document is not seen");
        assert!(merges(polyglot, form), "{polyglot}");
        assert!(merges("a=1&%5Bquery%5D=mutation%7BmergePullRequest%7Ba%7D%7D", form));
        assert!(names("query=mutation%7BmergePullRequest%7D", json).is_err(), "a form read only as a form");
        for (body, forms) in [
            (r#"{"query":"{a}","documentId":"x"}"#, json),
            (r#"{"query":"{a}","doc_id":"x"}"#, json),
            (r#"{"query":"{a}","ID":1}"#, json),
            (r#"{"query":"{a}","queryId":"x"}"#, json),
            (r#"{"query":"{a}","extensions":{"persistedQuery":{"sha256Hash":"ab"}}}"#, json),
            (r#"{"query":"{a}","QUERY":7}"#, json),
            (r#"{"QUERY":"{a}"#, json),
            (r#"{"query":"{a}"}"#, FormReadings { urlencoded: true, multipart: true }),
            ("query=%7Ba%7D&doc_id=x", form),
            ("documentId=x", form),
        ] {
            assert!(names(body, forms).is_err(), "{body}");
        }
        // What clients send stays readable: GitHub's own `curl -d` example (JSON typed as a form),
        // an empty `extensions`, an `id` among the variables.
        for (body, forms) in [
            (r#" { "query": "query { viewer { login }}" } "#, form),
            (r#"{"query":"{a}","extensions":{},"variables":{"id":"x"},"operationName":null}"#, json),
        ] {
            assert!(names(body, forms).unwrap().contains("viewer") || names(body, forms).unwrap().contains("a"));
        }
    }

    /// The fifty-sixth re-attack's N4, N5 and N6: PHP files `query%00` under `query` (its
    /// `$_POST['query']` the mutation); a UTF-8 BOM made the proxy skip the JSON reading that a
    /// fetch-API server (GraphQL Yoga) does after dropping the BOM, and a UTF-16 body is JSON to
    /// Python's `json.loads`; Go's `encoding/json` folds `extenſions` (U+017F) into `extensions`.
    #[test]
    fn a_graphql_body_is_read_past_a_bom_and_its_names_folded_as_php_and_go_fold_them() {
        use crate::policy::FormReadings;
        let (json, form) = (FormReadings::default(), FormReadings { urlencoded: true, multipart: false });
        let merges = |body: &[u8], forms| graphql_names(body, forms).unwrap().contains("mergePullRequest");
        assert!(merges(b"query=%7Ba%7D&query%00=mutation%7BmergePullRequest%7Ba%7D%7D", form), "query%00");
        assert!(merges(b"query=%7Ba%7D&.query=x&qu.ery=mutation%7BmergePullRequest%7D", form), "qu.ery");
        for query in ["query%00=x", "query%00x=x", ".query=x", "extensions%00=x"] {
            assert!(graphql_in_query(query), "{query}");
        }
        let bom = "\u{feff}{\"query\":\"mutation{mergePullRequest{a}}\",\"x\":\"&query={viewer{login}}&\"}";
        assert!(merges(bom.as_bytes(), form), "a BOM before JSON typed JSON and a form");
        assert!(merges(bom.as_bytes(), json), "a BOM before JSON typed JSON");
        // UTF-16BE after its BOM: JSON to a server that decodes it, a harmless form to a byte reader.
        let utf16 = |text: &str| text.encode_utf16().flat_map(u16::to_be_bytes).collect::<Vec<u8>>();
        let mut polyglot = vec![0xfe, 0xff];
        polyglot.extend(utf16("{\"query\":\"mutation{mergePullRequest{a}}\",\"x\":\""));
        polyglot.extend(b"&query={viewer}&");
        polyglot.extend(utf16("\"}"));
        let utf32: Vec<u8> = "{\"query\":\"{a}\"}".chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        for body in [&polyglot[..], &polyglot[2..], &utf32[..], b"\xff\xfeq", b"query={a}&x=\0"] {
            assert!(graphql_names(body, form).is_err(), "{body:?}");
            assert!(graphql_names(body, json).is_err(), "{body:?}");
        }
        for body in [
            "{\"query\":\"\",\"exten\u{17f}ions\":{\"persistedQuery\":{\"sha256Hash\":\"ab\"}}}",
            "{\"query\":\"{a}\",\"EXTEN\u{17f}IONS\":{\"a\":1}}",
            "{\"query\":\"{a}\",\"persi\u{17f}tedQuery\":\"x\"}",
        ] {
            assert!(graphql_names(body.as_bytes(), json).is_err(), "{body}");
        }
        assert!(graphql_names("{\"query\":\"{a}\",\"exten\u{17f}ions\":{}}".as_bytes(), json).is_ok());
        assert!(merges(r#"{"query":"{a}","extenſions":null,"QUERY":"mutation{mergePullRequest}"}"#.as_bytes(), json));
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
            let names = graphql_names(body.as_bytes(), crate::policy::FormReadings::default()).unwrap();
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
            assert!(graphql_names(unreadable.as_bytes(), Default::default()).is_err(), "{unreadable}");
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
