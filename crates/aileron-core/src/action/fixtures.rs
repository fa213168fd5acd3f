//! Realistic action files shared by the action and template tests.

/// A two-step read-only action: resolve the repository, then list its issues.
pub(crate) const LIST_ISSUES: &str = r#"+++
name = "list-issues"
version = "1.0.0"
source = "github://aileron/actions/list-issues@1.0.0"

[[requires.connectors]]
name = "github://aileron/github"
version = "1.2.0"
hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
capabilities = ["get_repo", "list_issues", "oauth2", "network:api.github.com:443"]

[match]
intent = "list open issues in a GitHub repository"

[[inputs]]
name = "owner"
type = "string"
label = "Owner"
description = "User or organisation that owns the repository"

[[inputs]]
name = "repo"
type = "string"
description = "Repository name"

[[inputs]]
name = "state"
type = "string"
required = false
description = "open, closed or all (default open)"

[[inputs]]
name = "labels"
type = "array"
items_type = "string"
required = false
description = "Only issues that carry all of these labels"

[[inputs]]
name = "limit"
type = "integer"
required = false
description = "Maximum number of issues to return"

[[execute]]
id = "repo"
connector = "github://aileron/github"
op = "get_repo"

[execute.inputs]
owner = "${args.owner}"
repo = "${args.repo}"

[[execute]]
id = "issues"
connector = "github://aileron/github"
op = "list_issues"
idempotent = true
timeout_seconds = 60

[execute.inputs]
repository = "${repo.full_name}"
state = "${args.state}"
per_page = "${args.limit}"
labels = "${args.labels}"
query = "repo:${repo.full_name} is:issue $${not_a_ref}"
sort = "updated"
+++
# List GitHub issues

Lists the issues of a GitHub repository, most recently updated first. Use it when the user asks
what is open, what needs triage, or which issues carry a label.
"#;

/// A gated action with an approval preview whose render labels are not in alphabetical order.
pub(crate) const CREATE_ISSUE: &str = r#"+++
name = "create-issue"
version = "0.3.1"

[[requires.connectors]]
name = "github://aileron/github"
version = "1.2.0"
hash = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
capabilities = ["create_issue", "get_repo", "oauth2"]

[match]
intent = "file a new issue in a GitHub repository"

[[inputs]]
name = "owner"
type = "string"
description = "User or organisation that owns the repository"

[[inputs]]
name = "repo"
type = "string"
description = "Repository name"

[[inputs]]
name = "title"
type = "string"
label = "Title"
description = "Issue title"

[[inputs]]
name = "body"
type = "string"
required = false
multiline = true
description = "Issue body in Markdown"

[[execute]]
id = "create"
connector = "github://aileron/github"
op = "create_issue"
idempotent = false

[execute.inputs]
owner = "${args.owner}"
repo = "${args.repo}"
title = "${args.title}"
body = "${args.body}"

[approval]
required = true

[approval.preview]
op = "get_repo"
args = { owner = "${args.owner}", repo = "${args.repo}", include = ["visibility"] }
multiline = ["About"]

[approval.preview.render]
Repository = "full_name"
Visibility = "visibility"
"Open issues" = "open_issues_count"
About = "description"
+++
Files a new issue in a GitHub repository on the user's behalf.
"#;
