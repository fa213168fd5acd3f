//! The GitHub REST calls and the compact shapes returned to the agent.
//!
//! Issues come back compact (`number`, `title`, `state`, `url`, `user`) because the output goes
//! into an LLM's context: GitHub's full issue objects are ~3 KB each, mostly URLs and ids.

use aileron_connector_sdk::http::{self, Request, Response};
use aileron_connector_sdk::{ConnectorError, Level, log};
use serde_json::{Map, Value, json};

use crate::args::{CreateIssue, GetIssue, ListIssues};

/// The credential kind of the manifest; the host injects the bound key as `Authorization`.
const CREDENTIAL: &str = "api_key";

pub fn list_issues(op: &ListIssues) -> Result<Value, ConnectorError> {
    let repository = &op.repository;
    log(Level::Debug, &format!("listing {} issues of {}/{}", op.state.as_str(), repository.owner, repository.repo));
    let url = format!("{}/issues?state={}&per_page={}", repository.url(), op.state.as_str(), op.per_page);
    let issues = call(Request::get(url))?;
    let Value::Array(issues) = issues else { return Err(unexpected_shape("a list of issues")) };
    Ok(issues.iter().map(compact_issue).collect())
}

pub fn get_issue(op: &GetIssue) -> Result<Value, ConnectorError> {
    let repository = &op.repository;
    log(Level::Debug, &format!("reading issue #{} of {}/{}", op.number, repository.owner, repository.repo));
    let issue = call(Request::get(format!("{}/issues/{}", repository.url(), op.number)))?;
    if !issue.is_object() {
        return Err(unexpected_shape("an issue object"));
    }
    Ok(detailed_issue(&issue))
}

pub fn create_issue(op: &CreateIssue) -> Result<Value, ConnectorError> {
    let repository = &op.repository;
    log(Level::Info, &format!("creating an issue in {}/{}", repository.owner, repository.repo));
    let mut payload = Map::new();
    payload.insert("title".to_owned(), Value::String(op.title.clone()));
    if let Some(body) = &op.body {
        payload.insert("body".to_owned(), Value::String(body.clone()));
    }
    let request =
        Request::post(format!("{}/issues", repository.url())).json(&Value::Object(payload)).credential(CREDENTIAL);
    let issue = call(request)?;
    if !issue.is_object() {
        return Err(unexpected_shape("the created issue"));
    }
    Ok(compact_issue(&issue))
}

/// Sends a request with GitHub's recommended headers and returns the JSON body of a 2xx answer.
fn call(request: Request) -> Result<Value, ConnectorError> {
    let request = request
        .header("Accept", "application/vnd.github+json")
        .header("User-Agent", "aileron-github-issues")
        .header("X-GitHub-Api-Version", "2022-11-28");
    let response = http::send(&request)?;
    interpret(&response)
}

/// Maps an HTTP answer to the op's result: 2xx → parsed JSON; anything else →
/// `external_api_error` with the upstream status (the host retries only 429 and 5xx).
fn interpret(response: &Response) -> Result<Value, ConnectorError> {
    let status = response.status;
    if response.is_success() {
        return serde_json::from_slice(&response.body).map_err(|_| {
            ConnectorError::external_api(status, format!("GitHub answered HTTP {status} with a body that is not JSON"))
        });
    }
    if (300..400).contains(&status) {
        // The ABI does not expose `Location`, and following it would need a second request the
        // host re-checks anyway; a moved repository is reported instead.
        return Err(ConnectorError::external_api(
            status,
            format!("GitHub answered HTTP {status} (a redirect; the repository may have been renamed or moved)"),
        ));
    }
    let body: Option<Value> = serde_json::from_slice(&response.body).ok();
    let api_message = body.as_ref().and_then(|body| body.get("message")).and_then(Value::as_str);
    let mut error = match api_message {
        Some(message) => ConnectorError::external_api(status, format!("GitHub answered HTTP {status}: {message}"))
            .with_detail("github_message", message),
        None => ConnectorError::external_api(status, format!("GitHub answered HTTP {status}")),
    };
    if let Some(documentation) = body.as_ref().and_then(|body| body.get("documentation_url")).and_then(Value::as_str) {
        error = error.with_detail("documentation_url", documentation);
    }
    Err(error)
}

fn unexpected_shape(expected: &str) -> ConnectorError {
    ConnectorError::external_api(200, format!("GitHub answered with JSON that is not {expected}"))
}

fn compact_issue(issue: &Value) -> Value {
    json!({
        "number": issue["number"],
        "title": issue["title"],
        "state": issue["state"],
        "url": issue["html_url"],
        "user": issue["user"]["login"],
    })
}

/// The compact issue plus what a reader of one issue needs: body, labels, counts and dates.
fn detailed_issue(issue: &Value) -> Value {
    let mut detailed = compact_issue(issue);
    let labels: Vec<Value> = issue["labels"]
        .as_array()
        .map(|labels| labels.iter().map(|label| label["name"].clone()).filter(Value::is_string).collect())
        .unwrap_or_default();
    let extra = [
        ("body", issue["body"].clone()),
        ("labels", Value::Array(labels)),
        ("comments", issue["comments"].clone()),
        ("created_at", issue["created_at"].clone()),
        ("updated_at", issue["updated_at"].clone()),
        ("closed_at", issue["closed_at"].clone()),
        ("is_pull_request", Value::Bool(issue.get("pull_request").is_some())),
    ];
    if let Value::Object(fields) = &mut detailed {
        fields.extend(extra.into_iter().map(|(key, value)| (key.to_owned(), value)));
    }
    detailed
}
