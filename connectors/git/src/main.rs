//! `github://aileron/git`: read-only git commands on a local repository, run by the host.
//!
//! Ops (args → output):
//! - `log {repo, count?: 1..=100 (default 10)}` → `[{hash, author, date, subject}]`
//! - `status {repo}` → `{branch, changes: [{status, path}]}`
//! - `diff_stat {repo}` → `{files: [{path, changes}], summary}`
//!
//! The module cannot start programs: it asks the host for a declared operation
//! (`aileron_host.spawn_op`), which fills the manifest's argv template with `repo` and `count`,
//! runs `/usr/bin/git` confined, and hands back the exit code and the output.

use aileron_connector_sdk::spawn::{self, Output};
use aileron_connector_sdk::{ConnectorError, run};
use serde_json::{Value, json};

fn main() {
    run(handle);
}

fn handle(op: &str, args: Value) -> Result<Value, ConnectorError> {
    let repo = repo(&args)?;
    match op {
        "log" => {
            let count = count(&args)?;
            let output = git("log", json!({ "repo": repo, "count": count.to_string() }))?;
            Ok(parse_log(&output.stdout_text()))
        }
        "status" => Ok(parse_status(&git("status", json!({ "repo": repo }))?.stdout_text())),
        "diff_stat" => Ok(parse_diff_stat(&git("diff_stat", json!({ "repo": repo }))?.stdout_text())),
        other => Err(ConnectorError::unknown_op(other).with_detail("ops", "log, status, diff_stat")),
    }
}

fn repo(args: &Value) -> Result<String, ConnectorError> {
    let repo = args
        .get("repo")
        .and_then(Value::as_str)
        .ok_or_else(|| ConnectorError::bad_input("`repo` (a path) is required"))?;
    if !repo.starts_with('/') {
        return Err(ConnectorError::bad_input("`repo` must be an absolute path to a git repository"));
    }
    Ok(repo.to_string())
}

fn count(args: &Value) -> Result<u64, ConnectorError> {
    match args.get("count") {
        None | Some(Value::Null) => Ok(10),
        Some(value) => match value.as_u64() {
            Some(count) if (1..=100).contains(&count) => Ok(count),
            _ => Err(ConnectorError::bad_input("`count` must be a whole number from 1 to 100")),
        },
    }
}

/// Runs a declared operation; a non-zero exit is an error carrying git's own message.
fn git(op: &str, values: Value) -> Result<Output, ConnectorError> {
    let output = spawn::run_op(op, &values)?;
    if !output.success() {
        let message = output.stderr_text().trim().to_string();
        return Err(ConnectorError::runtime(format!("git {op} exited with {}: {message}", output.status))
            .with_detail("exit_code", output.status));
    }
    Ok(output)
}

fn parse_log(text: &str) -> Value {
    let commits: Vec<Value> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(4, '\t');
            Some(json!({
                "hash": fields.next()?,
                "author": fields.next()?,
                "date": fields.next()?,
                "subject": fields.next().unwrap_or_default(),
            }))
        })
        .collect();
    Value::Array(commits)
}

fn parse_status(text: &str) -> Value {
    let mut branch = Value::Null;
    let mut changes = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("## ") {
            branch = Value::String(rest.to_string());
        } else if line.len() > 3 {
            changes.push(json!({ "status": line[..2].trim(), "path": &line[3..] }));
        }
    }
    json!({ "branch": branch, "changes": changes })
}

fn parse_diff_stat(text: &str) -> Value {
    let lines: Vec<&str> = text.lines().collect();
    let (summary, files) = match lines.split_last() {
        Some((last, rest)) if last.contains("changed") => (Value::String(last.trim().to_string()), rest),
        _ => (Value::Null, &lines[..]),
    };
    let files: Vec<Value> = files
        .iter()
        .filter_map(|line| line.split_once('|'))
        .map(|(path, changes)| json!({ "path": path.trim(), "changes": changes.trim() }))
        .collect();
    json!({ "files": files, "summary": summary })
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use aileron_connector_sdk::fake_host;
    use serde_json::json;

    use super::handle;

    #[test]
    fn log_asks_for_the_declared_operation_and_parses_commits() {
        fake_host::reset();
        fake_host::spawn_finishes(0, "abc1234\tAda\t2026-11-25\tFirst: tabs\tkept\n", "");
        let output = handle("log", json!({"repo": "/home/u/code/x", "count": 3})).unwrap();
        assert_eq!(
            output,
            json!([{"hash": "abc1234", "author": "Ada", "date": "2026-11-25", "subject": "First: tabs\tkept"}])
        );
        assert_eq!(fake_host::spawned(), vec![json!({"op": "log", "args": {"repo": "/home/u/code/x", "count": "3"}})]);
    }

    #[test]
    fn status_and_diff_stat_are_structured() {
        fake_host::reset();
        fake_host::spawn_finishes(0, "## main...origin/main\n M src/lib.rs\n?? new.txt\n", "");
        let status = handle("status", json!({"repo": "/r"})).unwrap();
        assert_eq!(
            status,
            json!({"branch": "main...origin/main", "changes": [{"status": "M", "path": "src/lib.rs"}, {"status": "??", "path": "new.txt"}]})
        );
        fake_host::spawn_finishes(0, " src/lib.rs | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n", "");
        let diff = handle("diff_stat", json!({"repo": "/r"})).unwrap();
        assert_eq!(
            diff,
            json!({"files": [{"path": "src/lib.rs", "changes": "3 ++-"}], "summary": "1 file changed, 2 insertions(+), 1 deletion(-)"})
        );
    }

    #[test]
    fn bad_input_never_reaches_the_host_and_git_failures_carry_its_message() {
        fake_host::reset();
        for args in [
            json!({}),
            json!({"repo": "relative"}),
            json!({"repo": "/r", "count": 0}),
            json!({"repo": "/r", "count": 101}),
        ] {
            assert!(handle("log", args.clone()).is_err(), "{args}");
        }
        assert!(fake_host::spawned().is_empty());
        fake_host::spawn_finishes(128, "", "fatal: not a git repository\n");
        let error = handle("status", json!({"repo": "/tmp"})).unwrap_err();
        assert!(format!("{error:?}").contains("not a git repository"), "{error:?}");
    }
}
