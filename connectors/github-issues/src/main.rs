//! `github://aileron/github-issues`: list, read and create GitHub issues.
//!
//! Ops (args → output):
//! - `list_issues {owner, repo, state?: open|closed|all, per_page?: 1..=100, api_base?}` →
//!   `[{number, title, state, url, user}]`
//! - `get_issue {owner, repo, number, api_base?}` → the compact issue plus `body`, `labels`,
//!   `comments`, `created_at`, `updated_at`, `closed_at`, `is_pull_request`
//! - `create_issue {owner, repo, title, body?, api_base?}` → the created compact issue; sent
//!   with `credential: "api_key"`, so the host injects the user's token and the guest never
//!   sees it.
//!
//! Reads are unauthenticated (public repositories, 60 requests/hour). `api_base` defaults to
//! `https://api.github.com`; whatever it names must still be in the manifest's `hosts`.

mod args;
mod github;

use aileron_connector_sdk::{ConnectorError, run};
use serde_json::Value;

use crate::args::{CreateIssue, GetIssue, ListIssues};

fn main() {
    run(handle);
}

fn handle(op: &str, args: Value) -> Result<Value, ConnectorError> {
    match op {
        "list_issues" => github::list_issues(&ListIssues::parse(args)?),
        "get_issue" => github::get_issue(&GetIssue::parse(args)?),
        "create_issue" => github::create_issue(&CreateIssue::parse(args)?),
        other => Err(ConnectorError::unknown_op(other).with_detail("ops", "list_issues, get_issue, create_issue")),
    }
}

// The fake host exists only off wasm; the tests need it.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    //! The handler against the SDK's fake host: what goes out (URL, headers, credential, body)
    //! and what comes back for each kind of GitHub answer.

    use aileron_connector_sdk::fake_host;
    use serde_json::{Value, json};

    use super::handle;

    const GITHUB_HEADERS: &str = r#"{
        "Accept": "application/vnd.github+json",
        "User-Agent": "aileron-github-issues",
        "X-GitHub-Api-Version": "2022-11-28"
    }"#;

    struct Exchange {
        op: &'static str,
        args: Value,
        /// `None` scripts a host denial (−1).
        response: Option<(u16, String)>,
        /// Expected request envelope; `None` when no request may be sent.
        request: Option<Value>,
        result: Result<Value, Value>,
    }

    fn check(exchange: Exchange) {
        fake_host::reset();
        match exchange.response {
            Some((status, body)) => fake_host::respond(status, body),
            None => fake_host::deny(),
        }
        let result = handle(exchange.op, exchange.args.clone()).map_err(|error| error.envelope()["error"].clone());
        assert_eq!(result, exchange.result, "{} {}", exchange.op, exchange.args);
        let expected_requests: Vec<Value> = exchange.request.into_iter().collect();
        assert_eq!(fake_host::requests(), expected_requests, "{} {}", exchange.op, exchange.args);
    }

    fn get(url: &str) -> Value {
        json!({"method": "GET", "url": url, "headers": serde_json::from_str::<Value>(GITHUB_HEADERS).unwrap()})
    }

    const ISSUE: &str = r#"{
        "number": 7, "title": "Crash", "state": "open", "html_url": "https://github.com/o/r/issues/7",
        "url": "https://api.github.com/repos/o/r/issues/7", "user": {"login": "mona", "id": 1},
        "body": "It crashes.", "labels": [{"name": "bug"}, {"name": "p1"}], "comments": 2,
        "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z", "closed_at": null
    }"#;

    fn compact_issue() -> Value {
        json!({
            "number": 7, "title": "Crash", "state": "open", "url": "https://github.com/o/r/issues/7", "user": "mona",
        })
    }

    #[test]
    fn list_issues() {
        check(Exchange {
            op: "list_issues",
            args: json!({"owner": "o", "repo": "r"}),
            response: Some((200, format!("[{ISSUE}, {{\"number\": 8, \"title\": \"PR\", \"state\": \"closed\"}}]"))),
            request: Some(get("https://api.github.com/repos/o/r/issues?state=open&per_page=30")),
            result: Ok(json!([
                compact_issue(),
                {"number": 8, "title": "PR", "state": "closed", "url": null, "user": null},
            ])),
        });
        check(Exchange {
            op: "list_issues",
            args: json!({"owner": "o", "repo": "r", "state": "all", "per_page": 5, "api_base": "http://127.0.0.1:9/"}),
            response: Some((200, "[]".to_owned())),
            request: Some(get("http://127.0.0.1:9/repos/o/r/issues?state=all&per_page=5")),
            result: Ok(json!([])),
        });
        check(Exchange {
            op: "list_issues",
            args: json!({"owner": "o", "repo": "r"}),
            response: Some((200, r#"{"not": "a list"}"#.to_owned())),
            request: Some(get("https://api.github.com/repos/o/r/issues?state=open&per_page=30")),
            result: Err(json!({
                "class": "external_api_error",
                "message": "GitHub answered with JSON that is not a list of issues",
                "details": {"status": 200},
            })),
        });
    }

    #[test]
    fn get_issue() {
        let mut detailed = compact_issue();
        detailed.as_object_mut().unwrap().extend(
            json!({
                "body": "It crashes.", "labels": ["bug", "p1"], "comments": 2, "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-02T00:00:00Z", "closed_at": null, "is_pull_request": false,
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        check(Exchange {
            op: "get_issue",
            args: json!({"owner": "o", "repo": "r", "number": 7}),
            response: Some((200, ISSUE.to_owned())),
            request: Some(get("https://api.github.com/repos/o/r/issues/7")),
            result: Ok(detailed),
        });
    }

    #[test]
    fn create_issue_asks_the_host_for_the_credential() {
        let mut headers: Value = serde_json::from_str(GITHUB_HEADERS).unwrap();
        headers["Content-Type"] = json!("application/json");
        check(Exchange {
            op: "create_issue",
            args: json!({"owner": "o", "repo": "r", "title": "Crash", "body": "It crashes."}),
            response: Some((201, ISSUE.to_owned())),
            request: Some(json!({
                "method": "POST", "url": "https://api.github.com/repos/o/r/issues", "headers": headers,
                "body": r#"{"body":"It crashes.","title":"Crash"}"#, "credential": "api_key",
            })),
            result: Ok(compact_issue()),
        });
        assert_eq!(fake_host::logs(), vec![("info".to_owned(), "creating an issue in o/r".to_owned())]);
    }

    #[test]
    fn error_statuses_become_external_api_errors() {
        let list = get("https://api.github.com/repos/o/r/issues?state=open&per_page=30");
        let cases: [((u16, &str), Value); 4] = [
            (
                (404, r#"{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}"#),
                json!({
                    "class": "external_api_error", "message": "GitHub answered HTTP 404: Not Found",
                    "details": {
                        "status": 404, "github_message": "Not Found",
                        "documentation_url": "https://docs.github.com/rest",
                    },
                }),
            ),
            (
                (403, r#"{"message": "API rate limit exceeded"}"#),
                json!({
                    "class": "external_api_error", "message": "GitHub answered HTTP 403: API rate limit exceeded",
                    "details": {"status": 403, "github_message": "API rate limit exceeded"},
                }),
            ),
            (
                (502, "<html>bad gateway</html>"),
                json!({
                    "class": "external_api_error", "message": "GitHub answered HTTP 502", "details": {"status": 502},
                }),
            ),
            (
                (301, r#"{"message": "Moved Permanently"}"#),
                json!({
                    "class": "external_api_error",
                    "message": "GitHub answered HTTP 301 (a redirect; the repository may have been renamed or moved)",
                    "details": {"status": 301},
                }),
            ),
        ];
        for (response, error) in cases {
            check(Exchange {
                op: "list_issues",
                args: json!({"owner": "o", "repo": "r"}),
                response: Some((response.0, response.1.to_owned())),
                request: Some(list.clone()),
                result: Err(error),
            });
        }
    }

    #[test]
    fn host_denials_and_bad_input_and_unknown_ops() {
        check(Exchange {
            op: "get_issue",
            args: json!({"owner": "o", "repo": "r", "number": 1}),
            response: None,
            request: Some(get("https://api.github.com/repos/o/r/issues/1")),
            result: Err(json!({
                "class": "connector_runtime_error",
                "message": "the host denied or failed the request (its recorded failure is authoritative)",
                "details": {"host_code": -1},
            })),
        });
        check(Exchange {
            op: "create_issue",
            args: json!({"owner": "o", "repo": "r", "title": ""}),
            response: Some((201, ISSUE.to_owned())),
            request: None,
            result: Err(json!({"class": "bad_input", "message": "`title` must not be blank"})),
        });
        check(Exchange {
            op: "close_issue",
            args: json!({}),
            response: Some((200, "{}".to_owned())),
            request: None,
            result: Err(json!({
                "class": "unknown_op", "message": "this connector has no op `close_issue`",
                "details": {"op": "close_issue", "ops": "list_issues, get_issue, create_issue"},
            })),
        });
    }
}
