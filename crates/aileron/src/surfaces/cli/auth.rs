//! `aileron auth import gh|git|netrc|aws`: brings a credential you already have under Aileron
//! (SPEC §15). The token `gh` uses (`GH_TOKEN`, `GITHUB_TOKEN`, else `oauth_token` for github.com
//! in gh's `hosts.yml`), or github.com's password in git's credential store or in `~/.netrc`, is
//! bound to the bundled spec-only connector `github://aileron/github-cli`; the
//! keys the AWS CLI uses (`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, else the `AWS_PROFILE`
//! or `default` profile of its shared credentials file) to `github://aileron/aws-cli`; the refresh
//! token of gcloud's Application Default Credentials to `github://aileron/google-cloud`. Each is
//! installed first with the consent screen like any other package. A launched agent's own tools
//! then reach the service with it while holding only placeholders. Nothing is deleted: the
//! original stays where it was (hidden from launched agents).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::json;
use zeroize::Zeroizing;

use super::install::{Install, install};
use super::vault::send;
use super::{CliError, CliResult, ExitStatus, escape};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;

/// The bundled GitHub spec (`connectors/specs/github-cli`), shipped in the binary.
pub const GITHUB_CLI_MANIFEST: &str = include_str!("../../../../../connectors/specs/github-cli/manifest.toml");
pub const GITHUB_CLI: &str = "github://aileron/github-cli";
/// The bundled AWS spec (`connectors/specs/aws-cli`): S3 and STS.
pub const AWS_CLI_MANIFEST: &str = include_str!("../../../../../connectors/specs/aws-cli/manifest.toml");
pub const AWS_CLI: &str = "github://aileron/aws-cli";
/// The bundled Google Cloud spec (`connectors/specs/google-cloud`): Cloud Storage, OAuth2.
pub const GOOGLE_CLOUD_MANIFEST: &str = include_str!("../../../../../connectors/specs/google-cloud/manifest.toml");
pub const GOOGLE_CLOUD: &str = "github://aileron/google-cloud";

#[derive(Args)]
pub struct AuthArgs {
    #[command(subcommand)]
    command: AuthCommand,
}

#[derive(Subcommand)]
enum AuthCommand {
    /// Copy a credential a tool of yours already holds into the vault and bind it to the bundled
    /// connector for its service, so launched agents use it without seeing it
    Import {
        /// Whose credential: `gh` (GitHub CLI), `git` (git's credential store: github.com),
        /// `netrc` (~/.netrc: github.com), `aws` (AWS CLI) or `gcloud` (Application Default
        /// Credentials: an OAuth2 refresh token)
        tool: Tool,
        /// Accept the connector's consent screen without asking
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Tool {
    Gh,
    Git,
    Netrc,
    Aws,
    Gcloud,
}

pub async fn run(home: &Home, args: AuthArgs) -> CliResult {
    match args.command {
        AuthCommand::Import { tool: Tool::Gh, yes } => {
            let (token, source) = gh_token()?;
            let body = json!({ "connector": GITHUB_CLI, "identity": "gh", "api_key": token.as_str() });
            let effect =
                "launched agents' gh, curl and scripts now reach GitHub's API with it and see only a placeholder";
            import(home, yes, GITHUB_CLI_MANIFEST, body, &source, effect).await
        }
        AuthCommand::Import { tool: tool @ (Tool::Git | Tool::Netrc), yes } => {
            let (token, source, identity) = match tool {
                Tool::Git => {
                    let (token, source) = git_store_token()?;
                    (token, source, "git")
                }
                _ => {
                    let (token, source) = netrc_token()?;
                    (token, source, "netrc")
                }
            };
            let body = json!({ "connector": GITHUB_CLI, "identity": identity, "api_key": token.as_str() });
            let effect =
                "launched agents' git, gh, curl and scripts now reach GitHub with it and see only a placeholder";
            import(home, yes, GITHUB_CLI_MANIFEST, body, &source, effect).await
        }
        AuthCommand::Import { tool: Tool::Gcloud, yes } => {
            let (login, source) = gcloud_login()?;
            let oauth2 = json!({
                "refresh_token": login.refresh_token.as_str(),
                "client_id": login.client_id,
                "client_secret": login.client_secret.as_ref().map(|secret| secret.as_str()),
            });
            let body = json!({ "connector": GOOGLE_CLOUD, "identity": "gcloud", "oauth2": oauth2 });
            let effect = "launched agents' tools now reach Cloud Storage with fresh access tokens from it and hold \
                          only a placeholder";
            import(home, yes, GOOGLE_CLOUD_MANIFEST, body, &source, effect).await
        }
        AuthCommand::Import { tool: Tool::Aws, yes } => {
            let (keys, source) = aws_keys()?;
            let mut aws = json!({ "access_key_id": keys.access_key_id, "secret_access_key": keys.secret.as_str() });
            if let Some(token) = &keys.session_token {
                eprintln!(
                    "note: {source} holds temporary keys (a session token): they stop working when they expire; \
                     import again after refreshing them"
                );
                aws["session_token"] = token.as_str().into();
            }
            let body = json!({ "connector": AWS_CLI, "identity": "aws", "aws": aws });
            let effect =
                "launched agents' aws CLI and SDKs now reach S3 and STS with them and hold only placeholder keys";
            import(home, yes, AWS_CLI_MANIFEST, body, &source, effect).await
        }
    }
}

/// Installs (or finds installed) the bundled spec `manifest` with consent like any package, then
/// binds `body`'s credential to it.
async fn import(
    home: &Home,
    yes: bool,
    manifest: &str,
    body: serde_json::Value,
    source: &str,
    effect: &str,
) -> CliResult {
    let package = tempfile::tempdir().map_err(|e| CliError::failure(format!("making a temporary directory: {e}")))?;
    std::fs::write(package.path().join("manifest.toml"), manifest)
        .map_err(|e| CliError::failure(format!("writing the bundled spec: {e}")))?;
    let parsed = aileron_core::manifest::parse_manifest(manifest, "manifest.toml")
        .map_err(|e| CliError::failure(format!("the bundled spec does not parse: {e}")))?;
    let reference = parsed.reference().to_string();
    let installed = install(
        home,
        Install { from: Some(package.path().to_path_buf()), reference, hash: None, yes, allow_unsigned: true },
    )
    .await?;
    if !matches!(installed, ExitStatus::Ok) {
        return Ok(installed);
    }
    let client = DaemonClient::connect(home).await?;
    let created = send(&client, Method::POST, "/v1/bindings/setup", body).await?;
    eprintln!(
        "bound {} from {source}; {effect} (the original is left where it was)",
        escape(created["name"].as_str().unwrap_or("?")),
    );
    Ok(ExitStatus::Ok)
}

/// AWS keys as the AWS CLI would find them (environment, else shared credentials file).
struct AwsKeys {
    access_key_id: String,
    secret: Zeroizing<String>,
    session_token: Option<Zeroizing<String>>,
}

/// The keys the AWS CLI itself would use, and where they were found: `AWS_ACCESS_KEY_ID` and
/// `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`), else the `AWS_PROFILE` (or `default`)
/// profile of `AWS_SHARED_CREDENTIALS_FILE` (or `~/.aws/credentials`).
fn aws_keys() -> Result<(AwsKeys, String), CliError> {
    let get = |name: &str| crate::platform::env::get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let (Some(access_key_id), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
        let keys = AwsKeys {
            access_key_id,
            secret: Zeroizing::new(secret),
            session_token: get("AWS_SESSION_TOKEN").map(Zeroizing::new),
        };
        return Ok((keys, "$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY".to_string()));
    }
    let file = get("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(&get("HOME").unwrap_or_default()).join(".aws/credentials"));
    let profile = get("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let text = Zeroizing::new(std::fs::read_to_string(&file).map_err(|e| {
        CliError::failure(format!(
            "no AWS keys to import: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are unset and {} cannot be read \
             ({e})\nhint: `aws configure` writes it; keys from SSO or a credential process can be set in the \
             environment for this command (`eval \"$(aws configure export-credentials --format env)\"`)",
            file.display()
        ))
    })?);
    let section = ini_section(&text, &profile);
    let value = |key: &str| section.iter().find(|(name, _)| name == key).map(|(_, value)| value.clone());
    match (value("aws_access_key_id"), value("aws_secret_access_key")) {
        (Some(access_key_id), Some(secret)) => {
            let keys = AwsKeys {
                access_key_id,
                secret: Zeroizing::new(secret),
                session_token: value("aws_session_token").map(Zeroizing::new),
            };
            Ok((keys, format!("profile {profile} of {}", file.display())))
        }
        _ => Err(CliError::failure(format!(
            "profile `{profile}` of {} holds no aws_access_key_id and aws_secret_access_key\nhint: name another \
             profile with AWS_PROFILE, or set the keys in the environment for this command",
            file.display()
        ))),
    }
}

/// `key = value` pairs of `[section]` in an INI file (the AWS shared credentials format).
fn ini_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut inside = false;
    let mut pairs = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside && let Some((key, value)) = line.split_once('=') {
            pairs.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    pairs
}

/// The token gh itself would use, and where it was found.
fn gh_token() -> Result<(Zeroizing<String>, String), CliError> {
    for name in ["GH_TOKEN", "GITHUB_TOKEN"] {
        if let Some(token) = crate::platform::env::get(name).filter(|token| !token.trim().is_empty()) {
            return Ok((Zeroizing::new(token.trim().to_string()), format!("${name}")));
        }
    }
    let hosts = gh_config_dir().join("hosts.yml");
    let text = std::fs::read_to_string(&hosts).map_err(|e| {
        CliError::failure(format!(
            "no GitHub token to import: GH_TOKEN and GITHUB_TOKEN are unset and {} cannot be read ({e})\nhint: log \
             in with `gh auth login`, or pipe the token in: `gh auth token | aileron binding setup {GITHUB_CLI}` \
             after `aileron connector install` of the bundled spec",
            hosts.display()
        ))
    })?;
    match oauth_token(&text, "github.com") {
        Some(token) => Ok((token, hosts.display().to_string())),
        None => Err(CliError::failure(format!(
            "{} holds no oauth_token for github.com (gh may keep it in your system keyring)\nhint: `gh auth token | \
             GH_TOKEN=$(cat) aileron auth import gh`, or set GH_TOKEN for this command",
            hosts.display()
        ))),
    }
}

/// An `authorized_user` Application Default Credentials file: the refresh token and the client
/// it was issued to.
#[derive(serde::Deserialize)]
struct GcloudLogin {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    refresh_token: Zeroizing<String>,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    client_secret: Option<Zeroizing<String>>,
}

/// gcloud's Application Default Credentials (`$GOOGLE_APPLICATION_CREDENTIALS`, else
/// `$CLOUDSDK_CONFIG/application_default_credentials.json`, else `~/.config/gcloud/…`): an
/// `authorized_user` login, and the file.
fn gcloud_login() -> Result<(GcloudLogin, String), CliError> {
    let get = |name: &str| crate::platform::env::get(name).filter(|value| !value.is_empty());
    let file = get("GOOGLE_APPLICATION_CREDENTIALS").map(PathBuf::from).unwrap_or_else(|| {
        get("CLOUDSDK_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(&get("HOME").unwrap_or_default()).join(".config/gcloud"))
            .join("application_default_credentials.json")
    });
    let text = Zeroizing::new(std::fs::read_to_string(&file).map_err(|e| {
        CliError::failure(format!(
            "no Google login to import: {} cannot be read ({e})\nhint: `gcloud auth application-default login` \
             writes it",
            file.display()
        ))
    })?);
    let login: GcloudLogin = serde_json::from_str(&text).map_err(|e| {
        CliError::failure(format!(
            "{} is not an Application Default Credentials file: {e}\nhint: `gcloud auth application-default login` \
             writes one",
            file.display()
        ))
    })?;
    if login.kind != "authorized_user" || login.refresh_token.is_empty() || login.client_id.is_empty() {
        return Err(CliError::failure(format!(
            "{} holds a `{}` credential, not a user login with a refresh token\nhint: service account keys are not \
             imported; log in with `gcloud auth application-default login`",
            file.display(),
            escape(&login.kind)
        )));
    }
    Ok((login, file.display().to_string()))
}

/// The hosts the bundled GitHub spec credentials: a stored password for one of them is the token.
const GITHUB_HOSTS: [&str; 2] = ["github.com", "api.github.com"];

/// github.com's password in git's credential store (`git credential-store`'s files:
/// `$XDG_CONFIG_HOME/git/credentials` or `~/.config/git/credentials`, then `~/.git-credentials`),
/// and the file it was in.
fn git_store_token() -> Result<(Zeroizing<String>, String), CliError> {
    let home = PathBuf::from(crate::platform::env::get("HOME").unwrap_or_default());
    let xdg = crate::platform::env::get("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| home.join(".config"), PathBuf::from);
    let files = [xdg.join("git/credentials"), home.join(".git-credentials")];
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file).map(Zeroizing::new) else { continue };
        if let Some(token) = text.lines().find_map(stored_github_password) {
            return Ok((token, file.display().to_string()));
        }
    }
    Err(CliError::failure(format!(
        "no github.com password in git's credential store ({})\nhint: `aileron auth import gh` takes gh's token; \
         a token in another helper (a keyring, the macOS keychain) can be set in GH_TOKEN for `aileron auth import gh`",
        files.iter().map(|file| file.display().to_string()).collect::<Vec<_>>().join(", ")
    )))
}

/// The password of one `git credential-store` line (`https://user:password@github.com`,
/// percent-encoded) when its host is GitHub's.
fn stored_github_password(line: &str) -> Option<Zeroizing<String>> {
    let url = url::Url::parse(line.trim()).ok()?;
    let ours = url.scheme() == "https" && url.host_str().is_some_and(|host| GITHUB_HOSTS.contains(&host));
    let password = url.password().filter(|_| ours)?;
    let decoded = url::form_urlencoded::parse(format!("p={}", password.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())?;
    (!decoded.is_empty()).then(|| Zeroizing::new(decoded))
}

/// github.com's (or api.github.com's) password in `$NETRC` or `~/.netrc`, and the file.
fn netrc_token() -> Result<(Zeroizing<String>, String), CliError> {
    let file = crate::platform::env::get("NETRC").filter(|file| !file.is_empty()).map_or_else(
        || Path::new(&crate::platform::env::get("HOME").unwrap_or_default()).join(".netrc"),
        PathBuf::from,
    );
    let text = Zeroizing::new(std::fs::read_to_string(&file).map_err(|e| {
        CliError::failure(format!(
            "no netrc to import from: {} cannot be read ({e})\nhint: name another file with NETRC",
            file.display()
        ))
    })?);
    match GITHUB_HOSTS.iter().find_map(|host| netrc_password(&text, host)) {
        Some(token) => Ok((token, file.display().to_string())),
        None => Err(CliError::failure(format!(
            "{} has no `machine github.com` (or api.github.com) with a password\nhint: other machines have no \
             bundled spec; write one for them (README: \"Give your agent GitHub without giving it your token\")",
            file.display()
        ))),
    }
}

/// The `password` of `machine <host>` in a netrc file (tokens separated by any whitespace;
/// `macdef` bodies skipped up to their blank line; `default` is not a host).
fn netrc_password(text: &str, host: &str) -> Option<Zeroizing<String>> {
    let mut in_machine = false;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut words = line.split_whitespace();
        while let Some(word) = words.next() {
            match word {
                "machine" => in_machine = words.next() == Some(host),
                "default" => in_machine = false,
                "password" if in_machine => {
                    return words.next().filter(|p| !p.is_empty()).map(|p| Zeroizing::new(p.to_string()));
                }
                "login" | "account" | "password" => {
                    words.next();
                }
                "macdef" => {
                    words.next();
                    // The macro's body runs to the next blank line.
                    for body in lines.by_ref() {
                        if body.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    None
}

/// gh's configuration directory: `$GH_CONFIG_DIR`, `$XDG_CONFIG_HOME/gh`, `~/.config/gh`.
fn gh_config_dir() -> PathBuf {
    if let Some(dir) = crate::platform::env::get("GH_CONFIG_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(config) = crate::platform::env::get("XDG_CONFIG_HOME").filter(|dir| !dir.is_empty()) {
        return Path::new(&config).join("gh");
    }
    Path::new(&crate::platform::env::get("HOME").unwrap_or_default()).join(".config/gh")
}

/// `oauth_token` of `host` in gh's `hosts.yml` (a mapping of hosts, each a mapping of scalars):
/// the host's line at column 0, then its indented keys.
fn oauth_token(text: &str, host: &str) -> Option<Zeroizing<String>> {
    let mut in_host = false;
    for line in text.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if !line.starts_with([' ', '\t']) {
            in_host = line.trim_end().trim_end_matches(':').trim_matches(['"', '\'']) == host;
            continue;
        }
        if in_host && let Some(value) = line.trim_start().strip_prefix("oauth_token:") {
            let value = value.trim().trim_matches(['"', '\'']);
            return (!value.is_empty()).then(|| Zeroizing::new(value.to_string()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eighth re-attack: through the bundled specs' ungated `POST /**`, `PUT` and `PATCH`
    /// operations the agent merged a branch without a pull request, published and transferred a
    /// repository, dropped its protection, added its own SSH and deploy keys, a collaborator and a
    /// webhook, and minted AWS session keys through STS. Each of those requests now matches a
    /// gated operation; ordinary ones stay ungated.
    #[test]
    fn the_bundled_specs_gate_what_grants_access_or_issues_keys() {
        use aileron_core::policy::{OperationIndex, OperationMatch};
        let index = |manifest: &str| {
            let parsed = aileron_core::manifest::parse_manifest(manifest, "manifest.toml").unwrap();
            OperationIndex::new(parsed.proxy.unwrap().operations.into_iter().map(|operation| ((), operation)).collect())
        };
        let (github, aws) = (index(GITHUB_CLI_MANIFEST), index(AWS_CLI_MANIFEST));
        // A path with its query; `headers` the request's header names.
        let gated_with = |index: &OperationIndex<()>, method: &str, host: &str, path: &str, headers: &[&str]| {
            let (path, query) = path.split_once('?').map_or((path, None), |(path, query)| (path, Some(query)));
            match index.match_request_with(method, host, path, query, headers, None) {
                OperationMatch::Matched { operation, .. } => operation.approval,
                other => panic!("{method} {path} {headers:?}: {other:?}"),
            }
        };
        let gated = |index: &OperationIndex<()>, method: &str, host: &str, path: &str, field: Option<&str>| {
            let fields = field.map(|field| std::collections::BTreeSet::from([field.to_string()]));
            let (path, query) = path.split_once('?').map_or((path, None), |(path, query)| (path, Some(query)));
            match index.match_request_with(method, host, path, query, &[], fields.as_ref()) {
                OperationMatch::Matched { operation, .. } => operation.approval,
                other => panic!("{method} {path} {field:?}: {other:?}"),
            }
        };
        let api = "api.github.com:443";
        for (method, path) in [
            ("POST", "/repos/o/r/merges"),
            ("POST", "/repos/o/r/transfer"),
            ("PATCH", "/repos/o/r"),
            ("PUT", "/repos/o/r/branches/main/protection"),
            ("POST", "/repos/o/r/branches/main/protection/enforce_admins"),
            ("POST", "/repos/o/r/keys"),
            ("PUT", "/repos/o/r/collaborators/attacker"),
            ("POST", "/repos/o/r/hooks"),
            ("PUT", "/repos/o/r/actions/secrets/TOKEN"),
            ("POST", "/user/keys"),
            ("POST", "/orgs/acme/invitations"),
            // The sixteenth re-attack: runner tokens, an address on the account, approving a pull
            // request as the user, environments, the workflows' permissions, other secrets.
            ("POST", "/repos/o/r/actions/runners/registration-token"),
            ("POST", "/repos/o/r/actions/runners/generate-jitconfig"),
            ("POST", "/orgs/acme/actions/runners/registration-token"),
            ("POST", "/user/emails"),
            ("POST", "/repos/o/r/pulls/7/reviews"),
            ("POST", "/repos/o/r/pulls/7/reviews/1/events"),
            ("PUT", "/repos/o/r/environments/production"),
            ("PUT", "/repos/o/r/actions/permissions/workflow"),
            ("PUT", "/repos/o/r/dependabot/secrets/TOKEN"),
            ("PUT", "/repos/o/r/codespaces/secrets/TOKEN"),
            ("PUT", "/orgs/acme/actions/secrets/TOKEN"),
            // The eighteenth: the same API by ids.
            ("POST", "/repositories/1/keys"),
            ("POST", "/repositories/1/merges"),
            ("POST", "/repositories/1/pulls/1/reviews"),
            ("POST", "/repositories/1/actions/runners/registration-token"),
            ("POST", "/organizations/1/invitations"),
            ("POST", "/teams/1/discussions"),
            ("POST", "/repos/o/r/actions/runs/1/pending_deployments"),
            ("POST", "/repos/o/r/actions/runs/1/deployment_protection_rule"),
        ] {
            assert!(gated(&github, method, api, path, None), "{method} {path} is not gated");
        }
        for field in [
            "mergeBranch",
            "deleteBranchProtectionRule",
            "updateRepository",
            "enqueuePullRequest",
            "addPullRequestReview",
            "submitPullRequestReview",
            "updateEnvironment",
            "updateTeamsRepository",
            // The twentieth: deployments approved as the user, and GraphQL twins of gated routes.
            "approveDeployments",
            "rejectDeployments",
            "deleteEnvironment",
            "createEnvironment",
            "createBranchProtectionRule",
            "createIpAllowListEntry",
            "updateIpAllowListEnabledSetting",
        ] {
            assert!(gated(&github, "POST", api, "/graphql", Some(field)), "{field} is not gated");
        }
        // A format suffix names the same route to Rails: the guarded operation still wins.
        assert!(gated(&github, "POST", api, "/graphql.json", Some("mergePullRequest")));
        assert!(gated(&github, "PUT", api, "/repos/o/r/pulls/7/merge.json", None));
        for (method, path) in
            [("POST", "/repos/o/r/issues"), ("PATCH", "/repos/o/r/issues/1"), ("PUT", "/repos/o/r/contents/a")]
        {
            assert!(!gated(&github, method, api, path, None), "{method} {path} should stay ungated");
        }
        assert!(!gated(&github, "POST", api, "/graphql", Some("createIssue")));
        for host in ["sts.amazonaws.com:443", "sts.us-east-1.amazonaws.com:443"] {
            assert!(gated(&aws, "POST", host, "/", None), "{host}");
        }
        // The sixteenth re-attack: the XML API's upload template took `storage` for a bucket and
        // matched the JSON API's bucket updates and access lists, and a `PUT` to a bucket itself.
        let gcs = index(GOOGLE_CLOUD_MANIFEST);
        let storage = "storage.googleapis.com:443";
        for path in [
            "/storage/v1/b/victim",
            "/storage/v1/b/victim/acl/allUsers",
            "/storage/v1/b/victim/defaultObjectAcl/allUsers",
            "/victim",
            "/brand-new-bucket",
            // The fifty-ninth: an object's metadata replaced in place (its body can set a
            // retention that cannot be lifted, or an access list).
            "/storage/v1/b/victim/o/report.csv",
        ] {
            assert!(gated(&gcs, "PUT", storage, path, None), "PUT {path} is not gated");
        }
        for path in ["/victim/report.csv", "/victim/dir/report.csv"] {
            assert!(!gated(&gcs, "PUT", storage, path, None), "PUT {path} should stay ungated");
        }
        // The sixteenth re-attack: a query sub-resource (`?acl`) was matched by no operation, so
        // an object's access list went out as an ungated upload. However the query spells it.
        for query in ["acl", "acl=", "x=1&acl", "ACL", "%61cl", "versionId=3;acl"] {
            assert!(gated(&gcs, "PUT", storage, &format!("/victim/report.csv?{query}"), None), "?{query}");
            assert!(gated(&aws, "PUT", "s3.amazonaws.com:443", &format!("/victim/k?{query}"), None), "?{query}");
        }
        for sub_resource in ["retention", "legal-hold"] {
            assert!(gated(&aws, "PUT", "s3.amazonaws.com:443", &format!("/b/k?{sub_resource}"), None));
        }
        for query in ["", "?x-id=PutObject", "?aclx=1", "?partNumber=1&uploadId=a"] {
            assert!(!gated(&aws, "PUT", "s3.amazonaws.com:443", &format!("/b/k{query}"), None), "{query}");
        }
        // The twentieth: the same changes by a header on an upload, a copy onto itself or a
        // multipart upload (`x-amz-acl`, a grant, an Object Lock), and on Cloud Storage by
        // `x-goog-acl`, the JSON API's access lists and its `predefinedAcl`.
        let s3 = "s3.amazonaws.com:443";
        for header in ["x-amz-acl", "x-amz-grant-read", "x-amz-grant-full-control", "x-amz-object-lock-mode"] {
            let headers = ["x-amz-date", header, "x-amz-content-sha256"];
            assert!(gated_with(&aws, "PUT", s3, "/b/k", &headers), "PUT with {header}");
            assert!(gated_with(&aws, "POST", s3, "/b/k?uploads", &headers), "POST with {header}");
        }
        assert!(!gated_with(&aws, "PUT", s3, "/b/k", &["x-amz-date", "x-amz-copy-source"]));
        assert!(gated_with(&gcs, "PUT", storage, "/victim/report.csv", &["x-goog-acl"]));
        for (method, path) in [
            ("POST", "/storage/v1/b/victim/o/report.csv/acl"),
            ("PUT", "/storage/v1/b/victim/o/report.csv/acl/allUsers"),
            ("PATCH", "/storage/v1/b/victim/o/report.csv/acl/allUsers"),
            ("PATCH", "/storage/v1/b/victim/o/report.csv?predefinedAcl=publicRead"),
            ("PUT", "/storage/v1/b/victim/o/report.csv?predefinedAcl=publicRead"),
            ("POST", "/upload/storage/v1/b/victim/o?uploadType=media&name=x&predefinedAcl=publicRead"),
            ("POST", "/storage/v1/b/victim/o/a/rewriteTo/b/victim/o/a?destinationPredefinedAcl=publicRead"),
        ] {
            assert!(gated(&gcs, method, storage, path, None), "{method} {path}");
        }
        // The fifty-ninth: any change of an object's metadata in place waits (its body is not
        // read, and can set a retention or an access list); an upload goes at once.
        assert!(gated(&gcs, "PATCH", storage, "/storage/v1/b/victim/o/report.csv", None));
        assert!(!gated(&gcs, "POST", storage, "/upload/storage/v1/b/victim/o?uploadType=media&name=x", None));
    }

    /// The fifty-third re-attack's F8: GitHub's REST API takes a `POST` wherever it takes a
    /// `PATCH` ("resource endpoints also accept POST requests"), and the bundled spec gated the
    /// `PATCH` forms of publishing a repository, moving a ref and re-pointing a webhook only: their
    /// `POST` twins went out with the user's token through `create` (`POST /**`). Every gated
    /// `PATCH` of the spec, walked, is gated as a `POST` to the same path too (a `/**` rest given
    /// segments: a `POST` to the collection itself creates, `POST …/git/refs` a new ref).
    #[test]
    fn every_gated_patch_of_the_bundled_github_spec_is_gated_as_a_post_too() {
        use aileron_core::manifest::Segment;
        use aileron_core::policy::{OperationIndex, OperationMatch};
        let parsed = aileron_core::manifest::parse_manifest(GITHUB_CLI_MANIFEST, "manifest.toml").unwrap();
        let operations = parsed.proxy.unwrap().operations;
        let index = OperationIndex::new(operations.iter().cloned().map(|operation| ((), operation)).collect());
        let gated = |method: &str, host: &str, path: &str| match index.match_request(method, host, path) {
            OperationMatch::Matched { operation, .. } => operation.approval,
            other => panic!("{method} {path}: {other:?}"),
        };
        let mut walked = 0;
        for patch in operations.iter().filter(|operation| operation.method == "PATCH" && operation.approval) {
            let mut path: String = patch
                .path
                .segments
                .iter()
                .map(|segment| match segment {
                    Segment::Literal(literal) => format!("/{literal}"),
                    Segment::Parameter(_) => "/x1".to_string(),
                })
                .collect();
            if patch.path.rest {
                path.push_str("/heads/main");
            }
            assert!(gated("PATCH", &patch.host, &path), "PATCH {path} ({})", patch.name);
            assert!(gated("POST", &patch.host, &path), "POST {path} is not gated as {} is", patch.name);
            walked += 1;
        }
        assert!(walked >= 4, "{walked} gated PATCH operations");
        let api = "api.github.com:443";
        for path in ["/repos/o/r", "/repos/o/r/git/refs/heads/main", "/repos/o/r/hooks/1", "/repos/o/r/hooks/1/config"]
        {
            assert!(gated("POST", api, path), "POST {path} is not gated");
        }
        // What a POST does there of its own stays as it was: an issue, a new ref.
        for path in ["/repos/o/r/issues", "/repos/o/r/git/refs"] {
            assert!(!gated("POST", api, path), "POST {path} should stay ungated");
        }
    }

    /// The fifty-sixth re-attack's N1: GitHub takes a `POST` to any resource that accepts a
    /// `PATCH` as that `PATCH`, and the spec's ungated `POST /**` credentialed every one outside a
    /// repository — an organization's webhook re-pointed, every member made admin, invitations
    /// accepted — which no `PATCH` operation covers at all. Outside `/repos/{owner}/{repo}/**`
    /// every `POST` of the spec to the API waits, save the listed creates (none of which GitHub
    /// takes a `PATCH` at); inside, every gated `PATCH` is gated as a `POST` too (walked above).
    /// Its N2: a repository invitation raised by `PATCH`, and GraphQL deletes, went out ungated.
    /// GraphQL's mutations, held against GitHub's published schema, are no wider than REST: what
    /// waits there (a `DELETE` in a repository, a gated route) or is not credentialed at all, and
    /// what acts outside a repository, waits; the ordinary writes in a repository go.
    #[test]
    fn every_post_outside_a_repository_waits_but_the_listed_creates() {
        use aileron_core::manifest::Segment;
        use aileron_core::policy::{OperationIndex, OperationMatch};
        const UNGATED_CREATES: [&str; 5] =
            ["/graphql", "/gists", "/gists/{gist_id}/comments", "/markdown", "/markdown/raw"];
        let parsed = aileron_core::manifest::parse_manifest(GITHUB_CLI_MANIFEST, "manifest.toml").unwrap();
        let operations = parsed.proxy.unwrap().operations;
        let api = "api.github.com:443";
        for post in operations.iter().filter(|o| o.method == "POST" && o.host == api && !o.approval) {
            let segments = &post.path.segments;
            let in_repository = matches!(
                segments.as_slice(),
                [Segment::Literal(repos), Segment::Parameter(_), Segment::Parameter(_), ..] if repos == "repos"
            );
            let mut path: String = segments
                .iter()
                .map(|segment| match segment {
                    Segment::Literal(literal) => format!("/{literal}"),
                    Segment::Parameter(name) => format!("/{{{name}}}"),
                })
                .collect();
            if post.path.rest {
                path.push_str("/**");
            }
            assert!(
                in_repository || UNGATED_CREATES.contains(&path.as_str()),
                "POST {path} ({}) goes at once outside a repository",
                post.name
            );
        }
        let index = OperationIndex::new(operations.iter().cloned().map(|operation| ((), operation)).collect());
        let gated = |method: &str, path: &str, field: Option<&str>| {
            let fields = field.map(|field| std::collections::BTreeSet::from([field.to_string()]));
            match index.match_request_with(method, api, path, None, &[], fields.as_ref()) {
                OperationMatch::Matched { operation, .. } => operation.approval,
                other => panic!("{method} {path} {field:?}: {other:?}"),
            }
        };
        for path in [
            "/orgs/o/hooks/1/config",
            "/orgs/o/hooks/1",
            "/orgs/o",
            "/orgs/o/actions/runner-groups/1",
            "/orgs/o/teams/t",
            "/orgs/o/repos",
            "/user",
            "/user/repos",
            "/user/repository_invitations/1",
            "/user/memberships/orgs/o",
            "/enterprises/e/actions/permissions",
            "/gists/1",
            "/app/hook/config",
            "/notifications/threads/1",
            "/projects/columns/cards/1",
            "/repos/o/r/invitations/1",
            "/repos/o/r/generate",
        ] {
            assert!(gated("POST", path, None), "POST {path} is not gated");
        }
        assert!(gated("PATCH", "/repos/o/r/invitations/1", None), "PATCH of an invitation is not gated");
        for path in
            ["/gists", "/gists/1/comments", "/markdown", "/repos/o/r/issues", "/repos/o/r/pulls", "/repos/o/r/forks"]
        {
            assert!(!gated("POST", path, None), "POST {path} should stay ungated");
        }
        for field in [
            "deleteIssueComment",
            "deletePullRequestReviewComment",
            "deleteDiscussion",
            "deleteDiscussionComment",
            "deleteProjectV2Item",
            "deleteLinkedBranch",
            "deleteRef",
            "createRepository",
            "cloneTemplateRepository",
            // The fifty-eighth: the GraphQL twin of the custom property values' gated PATCH.
            "setRepositoryCustomPropertyValues",
        ] {
            assert!(gated("POST", "/graphql", Some(field)), "{field} is not gated");
        }
        // A sample of each kind the schema's mutations were sorted into.
        for field in [
            // Removed in a repository only by a REST `DELETE`.
            "deleteLabel",
            "removeReaction",
            "removeSubIssue",
            "unlockLockable",
            // A repository's settings, or handed over.
            "transferIssue",
            "archivePullRequest",
            "unarchiveRepository",
            "createRepositoryRuleset",
            "updateRepositoryWebCommitSignoffSetting",
            "addPullRequestCreationCapBypassUsers",
            // The account's, sponsorships, projects.
            "addStar",
            "followUser",
            "changeUserStatus",
            "createSponsorship",
            "cancelSponsorship",
            "addProjectV2ItemById",
            "updateProjectV2",
            "updateProjectV2Collaborators",
            "moveProjectCard",
            // An organization's and an enterprise's administration, migrations.
            "removeOutsideCollaborator",
            "updateOrganizationAllowPrivateRepositoryForkingSetting",
            "addVerifiableDomain",
            "createIssueType",
            "updateIpAllowListUserLevelEnforcementEnabledSetting",
            "inviteEnterpriseAdmin",
            "updateEnterpriseDefaultRepositoryPermissionSetting",
            "updateEnterpriseTwoFactorAuthenticationRequiredSetting",
            "setEnterpriseIdentityProvider",
            "grantMigratorRole",
            "startRepositoryMigration",
        ] {
            assert!(gated("POST", "/graphql", Some(field)), "{field} is not gated");
        }
        for field in [
            "createIssue",
            "addComment",
            "viewer",
            "updateIssue",
            "closeIssue",
            "lockLockable",
            "pinIssue",
            "addReaction",
            "addLabelsToLabelable",
            "removeLabelsFromLabelable",
            "createLabel",
            "createPullRequest",
            "updatePullRequest",
            "markPullRequestReadyForReview",
            "addPullRequestReviewComment",
            "requestReviews",
            "resolveReviewThread",
            "createRef",
            "createCommitOnBranch",
            "addDiscussionComment",
        ] {
            assert!(!gated("POST", "/graphql", Some(field)), "{field} should stay ungated");
        }
    }

    /// Every GraphQL field the bundled GitHub spec names could be a mutation's (lowerCamelCase: a
    /// lowercase ASCII letter, then letters and digits), is named once, and waits, on `POST
    /// /graphql` to the API: a misspelled gate gates nothing. Two names that are not GitHub's
    /// (`addDeployKey`, `createDeployKey`) were listed before the schema was read.
    #[test]
    fn every_graphql_field_of_the_bundled_github_spec_is_a_mutation_name_named_once() {
        use aileron_core::manifest::Segment;
        let parsed = aileron_core::manifest::parse_manifest(GITHUB_CLI_MANIFEST, "manifest.toml").unwrap();
        let mut named = std::collections::BTreeSet::new();
        for operation in parsed.proxy.unwrap().operations {
            let Some(field) = &operation.graphql else { continue };
            assert!(
                field.starts_with(|c: char| c.is_ascii_lowercase()) && field.chars().all(|c| c.is_ascii_alphanumeric()),
                "`{field}` ({}) is not a lowerCamelCase name",
                operation.name
            );
            assert!(named.insert(field.clone()), "`{field}` is named twice");
            assert!(operation.approval, "{} does not wait", operation.name);
            assert_eq!((operation.method.as_str(), operation.host.as_str()), ("POST", "api.github.com:443"));
            assert_eq!(operation.path.segments, [Segment::Literal("graphql".to_string())], "{}", operation.name);
            assert!(!operation.path.rest, "{}", operation.name);
        }
        assert!(named.len() >= 190, "{} GraphQL fields", named.len());
        for not_github in ["addDeployKey", "createDeployKey"] {
            assert!(!named.contains(not_github), "{not_github} is no GitHub mutation");
        }
    }

    #[test]
    fn a_stored_git_credential_is_github_s_only() {
        let password = |line: &str| stored_github_password(line).map(|p| p.to_string());
        assert_eq!(password("https://octo:ghp_stored%2Btoken@github.com").as_deref(), Some("ghp_stored+token"));
        assert_eq!(password("https://x-access-token:ghp_2@api.github.com/").as_deref(), Some("ghp_2"));
        assert_eq!(password("https://octo:other@gitlab.com"), None);
        assert_eq!(password("http://octo:plain@github.com"), None, "only https");
        assert_eq!(password("https://octo@github.com"), None);
        assert_eq!(password("not a url"), None);
    }

    #[test]
    fn a_netrc_password_belongs_to_its_machine() {
        let text = "machine gitlab.com login a password glpat\nmacdef init\nmachine github.com password trap\n\n\
                    machine github.com\n  login octo\n  password ghp_netrc\ndefault login anon password anon\n";
        assert_eq!(netrc_password(text, "github.com").as_deref().map(String::as_str), Some("ghp_netrc"));
        assert_eq!(netrc_password(text, "gitlab.com").as_deref().map(String::as_str), Some("glpat"));
        assert_eq!(netrc_password(text, "api.github.com"), None);
        assert_eq!(netrc_password("machine github.com login password", "github.com"), None);
        let one_line = "machine github.com login octo password ghp_one";
        assert_eq!(netrc_password(one_line, "github.com").as_deref().map(String::as_str), Some("ghp_one"));
    }

    #[test]
    fn aws_keys_are_read_from_their_profile_only() {
        let file = "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = s1\n\n# work\n[work]\n\
                    AWS_ACCESS_KEY_ID=AKIAWORK\naws_secret_access_key= s2 \naws_session_token = t2\n";
        let value = |profile: &str, key: &str| {
            ini_section(file, profile).into_iter().find(|(name, _)| name == key).map(|(_, value)| value)
        };
        assert_eq!(value("default", "aws_access_key_id").as_deref(), Some("AKIADEFAULT"));
        assert_eq!(value("default", "aws_session_token"), None);
        assert_eq!(value("work", "aws_access_key_id").as_deref(), Some("AKIAWORK"));
        assert_eq!(value("work", "aws_secret_access_key").as_deref(), Some("s2"));
        assert_eq!(value("work", "aws_session_token").as_deref(), Some("t2"));
        assert!(ini_section(file, "missing").is_empty());
    }

    #[test]
    fn the_token_is_read_from_its_host_only() {
        let hosts = "# gh's hosts\ngithub.example.com:\n    oauth_token: ghe_other\ngithub.com:\n    user: octocat\n    oauth_token: \"gho_theToken\"\n    git_protocol: https\n";
        assert_eq!(oauth_token(hosts, "github.com").as_deref().map(String::as_str), Some("gho_theToken"));
        assert_eq!(oauth_token(hosts, "github.example.com").as_deref().map(String::as_str), Some("ghe_other"));
        assert!(oauth_token("github.com:\n    user: octocat\n", "github.com").is_none(), "kept in the keyring");
        assert!(oauth_token("", "github.com").is_none());
    }
}
