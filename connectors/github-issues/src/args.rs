//! Validated op arguments. Every op's args are checked before a request leaves the guest, so a
//! bad owner, repository or number is a `bad_input` naming the field, never a confusing 404 or
//! a path that escapes `/repos/{owner}/{repo}`.

use aileron_connector_sdk::ConnectorError;
use serde_json::{Map, Value};

pub const DEFAULT_API_BASE: &str = "https://api.github.com";
const DEFAULT_PER_PAGE: u64 = 30;
/// GitHub's own maximum page size.
const MAX_PER_PAGE: u64 = 100;
/// GitHub rejects longer titles.
const MAX_TITLE_CHARS: usize = 256;

/// The repository an op addresses, and the API it lives behind.
#[derive(Debug, PartialEq)]
pub struct Repository {
    /// Without a trailing `/`; `https://api.github.com` or a GitHub Enterprise `.../api/v3`.
    pub api_base: String,
    pub owner: String,
    pub repo: String,
}

impl Repository {
    /// `{api_base}/repos/{owner}/{repo}`; the names are validated, so no escaping is needed.
    pub fn url(&self) -> String {
        format!("{}/repos/{}/{}", self.api_base, self.owner, self.repo)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IssueState {
    Open,
    Closed,
    All,
}

impl IssueState {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueState::Open => "open",
            IssueState::Closed => "closed",
            IssueState::All => "all",
        }
    }
}

#[derive(Debug, PartialEq)]
pub struct ListIssues {
    pub repository: Repository,
    pub state: IssueState,
    pub per_page: u64,
}

#[derive(Debug, PartialEq)]
pub struct GetIssue {
    pub repository: Repository,
    pub number: u64,
}

#[derive(Debug, PartialEq)]
pub struct CreateIssue {
    pub repository: Repository,
    pub title: String,
    pub body: Option<String>,
}

impl ListIssues {
    pub fn parse(args: Value) -> Result<ListIssues, ConnectorError> {
        let args = Fields::new(args, &["owner", "repo", "state", "per_page", "api_base"])?;
        let state = match args.optional_str("state")? {
            None | Some("open") => IssueState::Open,
            Some("closed") => IssueState::Closed,
            Some("all") => IssueState::All,
            Some(other) => {
                return Err(ConnectorError::bad_input(format!(
                    "`state` must be one of open, closed, all (got {other:?})"
                )));
            }
        };
        let per_page = match args.optional_integer("per_page")? {
            None => DEFAULT_PER_PAGE,
            Some(n @ 1..=MAX_PER_PAGE) => n,
            Some(n) => {
                return Err(ConnectorError::bad_input(format!(
                    "`per_page` must be between 1 and {MAX_PER_PAGE} (got {n})"
                )));
            }
        };
        Ok(ListIssues { repository: args.repository()?, state, per_page })
    }
}

impl GetIssue {
    pub fn parse(args: Value) -> Result<GetIssue, ConnectorError> {
        let args = Fields::new(args, &["owner", "repo", "number", "api_base"])?;
        let number = match args.optional_integer("number")? {
            None => return Err(ConnectorError::bad_input("`number` is required")),
            Some(0) => return Err(ConnectorError::bad_input("`number` must be a positive issue number (got 0)")),
            Some(number) => number,
        };
        Ok(GetIssue { repository: args.repository()?, number })
    }
}

impl CreateIssue {
    pub fn parse(args: Value) -> Result<CreateIssue, ConnectorError> {
        let args = Fields::new(args, &["owner", "repo", "title", "body", "api_base"])?;
        let title = args.required_str("title")?.trim();
        if title.is_empty() {
            return Err(ConnectorError::bad_input("`title` must not be blank"));
        }
        if title.chars().count() > MAX_TITLE_CHARS {
            return Err(ConnectorError::bad_input(format!("`title` must be at most {MAX_TITLE_CHARS} characters")));
        }
        let body = args.optional_str("body")?.map(str::to_owned);
        Ok(CreateIssue { repository: args.repository()?, title: title.to_owned(), body })
    }
}

/// An op's argument object restricted to its known keys. An unknown key is an error rather
/// than ignored: a typo such as `per-page` would otherwise silently change the result.
struct Fields {
    map: Map<String, Value>,
}

impl Fields {
    fn new(args: Value, known: &[&str]) -> Result<Fields, ConnectorError> {
        let Value::Object(map) = args else { return Err(ConnectorError::bad_input("args must be a JSON object")) };
        if let Some(unknown) = map.keys().find(|key| !known.contains(&key.as_str())) {
            return Err(ConnectorError::bad_input(format!(
                "unknown argument `{unknown}`; this op takes {}",
                known.join(", ")
            )));
        }
        Ok(Fields { map })
    }

    /// `null` counts as absent: hosts and agents use it for "not provided".
    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    fn optional_str(&self, key: &str) -> Result<Option<&str>, ConnectorError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(value)) => Ok(Some(value)),
            Some(other) => Err(ConnectorError::bad_input(format!("`{key}` must be a string (got {other})"))),
        }
    }

    fn required_str(&self, key: &str) -> Result<&str, ConnectorError> {
        self.optional_str(key)?.ok_or_else(|| ConnectorError::bad_input(format!("`{key}` is required")))
    }

    fn optional_integer(&self, key: &str) -> Result<Option<u64>, ConnectorError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                ConnectorError::bad_input(format!("`{key}` must be a non-negative integer (got {value})"))
            }),
        }
    }

    fn repository(&self) -> Result<Repository, ConnectorError> {
        let owner = self.required_str("owner")?;
        if !is_owner_name(owner) {
            return Err(ConnectorError::bad_input(format!(
                "`owner` must be a GitHub account name (letters, digits, `-`, `_`; at most 39) (got {owner:?})"
            )));
        }
        let repo = self.required_str("repo")?;
        if !is_repository_name(repo) {
            return Err(ConnectorError::bad_input(format!(
                "`repo` must be a repository name (letters, digits, `.`, `-`, `_`; at most 100) (got {repo:?})"
            )));
        }
        let api_base = match self.optional_str("api_base")? {
            None => DEFAULT_API_BASE.to_owned(),
            Some(base) => parse_api_base(base)?,
        };
        Ok(Repository { api_base, owner: owner.to_owned(), repo: repo.to_owned() })
    }
}

fn is_owner_name(name: &str) -> bool {
    (1..=39).contains(&name.len())
        && !name.starts_with('-')
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

fn is_repository_name(name: &str) -> bool {
    (1..=100).contains(&name.len())
        && name != "."
        && name != ".."
        && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'))
}

/// Accepts an `http(s)://host[:port][/path]` base without query or fragment. Which hosts may
/// actually be reached is the host's decision (the manifest's allow-list), not the guest's.
fn parse_api_base(base: &str) -> Result<String, ConnectorError> {
    let rest = base.strip_prefix("https://").or_else(|| base.strip_prefix("http://"));
    let valid = rest.is_some_and(|rest| {
        let authority = rest.split('/').next().unwrap_or_default();
        !authority.is_empty() && !rest.contains(['?', '#', '@']) && !rest.chars().any(char::is_whitespace)
    });
    if !valid {
        return Err(ConnectorError::bad_input(format!(
            "`api_base` must be an http(s) URL such as {DEFAULT_API_BASE} (got {base:?})"
        )));
    }
    Ok(base.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{CreateIssue, DEFAULT_API_BASE, GetIssue, IssueState, ListIssues, Repository};

    fn repository(owner: &str, repo: &str) -> Repository {
        Repository { api_base: DEFAULT_API_BASE.to_owned(), owner: owner.to_owned(), repo: repo.to_owned() }
    }

    fn check_rejected<T: std::fmt::Debug>(
        parse: fn(Value) -> Result<T, aileron_connector_sdk::ConnectorError>,
        args: Value,
        message: &str,
    ) {
        let error = parse(args.clone()).expect_err(&format!("{args} should be rejected"));
        assert_eq!((error.class.as_str(), error.message.as_str()), ("bad_input", message), "args: {args}");
    }

    #[test]
    fn list_issues_defaults_and_bounds() {
        let check = |args: Value, expected: ListIssues| assert_eq!(ListIssues::parse(args).unwrap(), expected);
        check(
            json!({"owner": "octo-org", "repo": "hello.world"}),
            ListIssues { repository: repository("octo-org", "hello.world"), state: IssueState::Open, per_page: 30 },
        );
        check(
            json!({
                "owner": "a", "repo": "b", "state": "all", "per_page": 100,
                "api_base": "http://127.0.0.1:8080/api/v3/",
            }),
            ListIssues {
                repository: Repository {
                    api_base: "http://127.0.0.1:8080/api/v3".to_owned(),
                    owner: "a".to_owned(),
                    repo: "b".to_owned(),
                },
                state: IssueState::All,
                per_page: 100,
            },
        );
        check(
            json!({"owner": "a", "repo": "b", "state": null, "per_page": null, "api_base": null}),
            ListIssues { repository: repository("a", "b"), state: IssueState::Open, per_page: 30 },
        );
        check(
            json!({"owner": "a", "repo": "b", "state": "closed", "per_page": 1}),
            ListIssues { repository: repository("a", "b"), state: IssueState::Closed, per_page: 1 },
        );
    }

    #[test]
    fn list_issues_rejects_bad_input() {
        let check = |args: Value, message: &str| check_rejected(ListIssues::parse, args, message);
        check(json!({"repo": "b"}), "`owner` is required");
        check(json!({"owner": "a"}), "`repo` is required");
        check(json!({"owner": 5, "repo": "b"}), "`owner` must be a string (got 5)");
        check(
            json!({"owner": "../../admin", "repo": "b"}),
            "`owner` must be a GitHub account name (letters, digits, `-`, `_`; at most 39) (got \"../../admin\")",
        );
        check(
            json!({"owner": "-a", "repo": "b"}),
            "`owner` must be a GitHub account name (letters, digits, `-`, `_`; at most 39) (got \"-a\")",
        );
        check(
            json!({"owner": "a", "repo": ".."}),
            "`repo` must be a repository name (letters, digits, `.`, `-`, `_`; at most 100) (got \"..\")",
        );
        check(
            json!({"owner": "a", "repo": "b/issues"}),
            "`repo` must be a repository name (letters, digits, `.`, `-`, `_`; at most 100) (got \"b/issues\")",
        );
        check(
            json!({"owner": "a", "repo": "b", "state": "merged"}),
            "`state` must be one of open, closed, all (got \"merged\")",
        );
        check(json!({"owner": "a", "repo": "b", "per_page": 0}), "`per_page` must be between 1 and 100 (got 0)");
        check(json!({"owner": "a", "repo": "b", "per_page": 101}), "`per_page` must be between 1 and 100 (got 101)");
        check(json!({"owner": "a", "repo": "b", "per_page": -3}), "`per_page` must be a non-negative integer (got -3)");
        check(
            json!({"owner": "a", "repo": "b", "per_page": "10"}),
            "`per_page` must be a non-negative integer (got \"10\")",
        );
        check(
            json!({"owner": "a", "repo": "b", "per-page": 10}),
            "unknown argument `per-page`; this op takes owner, repo, state, per_page, api_base",
        );
        for base in ["ftp://x", "https://", "https://x/?q=1", "https://user@x", "api.github.com", "https://a b"] {
            check(
                json!({"owner": "a", "repo": "b", "api_base": base}),
                &format!("`api_base` must be an http(s) URL such as https://api.github.com (got {base:?})"),
            );
        }
        check(json!([1]), "args must be a JSON object");
    }

    #[test]
    fn get_issue_needs_a_positive_number() {
        assert_eq!(
            GetIssue::parse(json!({"owner": "a", "repo": "b", "number": 42})).unwrap(),
            GetIssue { repository: repository("a", "b"), number: 42 }
        );
        let check = |args: Value, message: &str| check_rejected(GetIssue::parse, args, message);
        check(json!({"owner": "a", "repo": "b"}), "`number` is required");
        check(json!({"owner": "a", "repo": "b", "number": 0}), "`number` must be a positive issue number (got 0)");
        check(json!({"owner": "a", "repo": "b", "number": 1.5}), "`number` must be a non-negative integer (got 1.5)");
        check(
            json!({"owner": "a", "repo": "b", "number": 1, "state": "open"}),
            "unknown argument `state`; this op takes owner, repo, number, api_base",
        );
    }

    #[test]
    fn create_issue_trims_and_bounds_the_title() {
        assert_eq!(
            CreateIssue::parse(json!({"owner": "a", "repo": "b", "title": "  Crash on start \n", "body": "steps"}))
                .unwrap(),
            CreateIssue {
                repository: repository("a", "b"),
                title: "Crash on start".to_owned(),
                body: Some("steps".to_owned())
            }
        );
        assert_eq!(
            CreateIssue::parse(json!({"owner": "a", "repo": "b", "title": "t"})).unwrap(),
            CreateIssue { repository: repository("a", "b"), title: "t".to_owned(), body: None }
        );
        let check = |args: Value, message: &str| check_rejected(CreateIssue::parse, args, message);
        check(json!({"owner": "a", "repo": "b"}), "`title` is required");
        check(json!({"owner": "a", "repo": "b", "title": " \t"}), "`title` must not be blank");
        check(json!({"owner": "a", "repo": "b", "title": "x".repeat(257)}), "`title` must be at most 256 characters");
        check(json!({"owner": "a", "repo": "b", "title": "t", "body": 3}), "`body` must be a string (got 3)");
    }
}
