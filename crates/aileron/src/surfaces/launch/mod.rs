//! `aileron launch <agent>` (SPEC §13): ensure the daemon, confine the agent (`confine`: user,
//! mount and PID namespaces hiding the Aileron home; `--unconfined` opts out, audited), start a
//! session (a token limited to listing and running actions and polling approvals), register
//! `aileron-mcp` in the agent's own MCP config, point the agent's LLM base URL at the gateway
//! where the agent reads one from its environment, run the agent in the user's terminal, and end
//! the session with the agent's exit code.
//!
//! The session's URL, token and id reach `aileron-mcp` only through the agent's environment
//! (`AILERON_URL`, `AILERON_TOKEN`, `AILERON_SESSION_ID`): no file we write holds a token or a
//! per-launch URL, so the entry in a user's config is stable (a second launch changes nothing)
//! and no token outlives its session on disk. Each agent's way to hand its environment on comes
//! from its own documentation (sources in docs/decisions/0014-mcp-sessions-launch.md):
//! - claude: a per-launch `--mcp-config` JSON file (`mcpServers`) in the launch runtime
//!   directory, removed when the agent exits; stdio servers inherit Claude Code's environment;
//!   `ANTHROPIC_BASE_URL`.
//! - codex: `[mcp_servers.aileron]` in `$CODEX_HOME/config.toml` (default `~/.codex`) with
//!   `env_vars`, the names Codex passes through from its own environment; the base URL as a
//!   per-process `-c openai_base_url="…/v1"` (current Codex ignores `OPENAI_BASE_URL`).
//! - opencode: `mcp.aileron` (`type = "local"`) in `opencode.json[c]` (`OPENCODE_CONFIG`, else
//!   `~/.config/opencode/`) with `{env:NAME}` values, OpenCode's config substitution; provider
//!   `baseURL`s through `OPENCODE_CONFIG_CONTENT`, the inline config OpenCode merges last.
//! - goose: `extensions.aileron` (`type: stdio`) in `~/.config/goose/config.yaml` with
//!   `env_keys`, which Goose resolves from its environment; `ANTHROPIC_HOST` / `OPENAI_HOST`.
//! - pi: Pi has no MCP client of its own; the `pi-mcp-adapter` extension reads `mcpServers` from
//!   `~/.pi/agent/mcp.json` (`PI_CODING_AGENT_DIR`) and interpolates `${NAME}` from its
//!   environment. Pi reads no environment variable for provider base URLs, but loads an extension
//!   for one run with `-e <file>`, and an extension may override a built-in provider's `baseUrl`
//!   (`pi.registerProvider`, Pi's documented proxy route). So a per-launch extension in the launch
//!   runtime directory (removed when Pi exits) points Pi's `anthropic` and `openai` providers at
//!   the gateway; nothing under `~/.pi` changes for it.
//!
//! Edits set only our own entry; every other byte of the user's file is kept, a second launch
//! changes nothing, and the first edit leaves `<file>.aileron-backup`. A base URL variable the
//! user already set is kept (their traffic then bypasses the gateway, and we say so).

pub mod allow_list;
mod cache_tree;
mod child;
pub mod config_file;
pub mod confine;
mod git;
mod hidden_changes;
mod home_view;
pub mod jsonc;
pub mod network;
mod pack;
mod planted;
mod reftable;
mod repositories;
mod sourced;
pub mod toml_table;
mod withheld_config;
pub mod yaml_block;

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};

use crate::platform::env;
use crate::platform::home::Home;
use crate::stores::sessions::Confinement;
use crate::surfaces::client::DaemonClient;
use crate::wire::{EndSession, NetworkHandover, SessionNetwork, SessionStarted, StartSession};
use config_file::{ConfigEdit, read_existing};
use yaml_block::YamlValue;

/// The name every agent's config knows us by.
pub const SERVER_NAME: &str = "aileron";

/// Variables of other programs that the launch plan reads (the agents' own settings).
const CODEX_HOME: &str = "CODEX_HOME";
const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
const OPENCODE_CONFIG: &str = "OPENCODE_CONFIG";
const OPENCODE_CONFIG_CONTENT: &str = "OPENCODE_CONFIG_CONTENT";
const PI_CODING_AGENT_DIR: &str = "PI_CODING_AGENT_DIR";
const ANTHROPIC_BASE_URL: &str = "ANTHROPIC_BASE_URL";
const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
const ANTHROPIC_HOST: &str = "ANTHROPIC_HOST";
const OPENAI_HOST: &str = "OPENAI_HOST";
const PATH: &str = "PATH";
const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";
/// The directory in the Aileron home where live sessions record their kept links (`planted::LinkRecord`).
const KEPT_LINKS: &str = "launch-links";
/// The shell's name for its working directory (links as the user followed them).
const PWD: &str = "PWD";
const FOREIGN_VARIABLES: [&str; 32] = [
    PWD,
    // What mise trusts with no link, and the dotenv file it loads in every directory (read by
    // `allow_list`: the thirty-fifth re-attack's G6, the fortieth's L13; the first was read only
    // in tests before, never from the user's environment).
    allow_list::MISE_TRUSTED_CONFIG_PATHS,
    allow_list::MISE_ENV_FILE,
    // Where mise's global settings are (the forty-second re-attack's N3, N8).
    allow_list::MISE_CONFIG_DIR,
    allow_list::MISE_GLOBAL_CONFIG_FILE,
    allow_list::MISE_SYSTEM_CONFIG_DIR,
    // The other names the user's mise reads its version file and configs by (P4).
    allow_list::MISE_OVERRIDE_TOOL_VERSIONS_FILENAMES,
    allow_list::MISE_OVERRIDE_CONFIG_FILENAMES,
    CODEX_HOME,
    XDG_CONFIG_HOME,
    OPENCODE_CONFIG,
    OPENCODE_CONFIG_CONTENT,
    PI_CODING_AGENT_DIR,
    ANTHROPIC_BASE_URL,
    OPENAI_BASE_URL,
    ANTHROPIC_HOST,
    OPENAI_HOST,
    PATH,
    XDG_RUNTIME_DIR,
    allow_list::XDG_DATA_HOME,
    allow_list::XDG_STATE_HOME,
    allow_list::XDG_CACHE_HOME,
    allow_list::CLAUDE_CONFIG_DIR,
    // Where the user's git finds its own config (the seventh re-attack: a global config named by
    // `GIT_CONFIG_GLOBAL` setting `core.hooksPath = .githooks` went unread, and unprotected).
    repositories::GIT_CONFIG_GLOBAL,
    repositories::GIT_CONFIG_SYSTEM,
    repositories::GIT_CONFIG_NOSYSTEM,
    // Where zsh finds the user's start-up files: protected there, never kept (its files export
    // tokens and its history holds them: the twenty-third re-attack read both).
    allow_list::ZDOTDIR,
    repositories::GIT_CONFIG_COUNT,
    // Where tmux and screen make their sockets (covered in the agent's namespace).
    network::TMUX_TMPDIR,
    network::SCREENDIR,
    // The user's temp directory (covered in the agent's namespace, as `/tmp` is).
    network::TMPDIR,
    // Where pipx keeps the arguments its packages were installed with (hidden).
    network::PIPX_HOME,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Agent {
    Claude,
    Codex,
    Opencode,
    Goose,
    Pi,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Opencode => "opencode",
            Agent::Goose => "goose",
            Agent::Pi => "pi",
        }
    }

    /// The executable looked up on PATH (each agent's own command name).
    pub fn program(self) -> &'static str {
        self.name()
    }

    fn install_hint(self) -> &'static str {
        match self {
            Agent::Claude => "npm install -g @anthropic-ai/claude-code",
            Agent::Codex => "npm install -g @openai/codex",
            Agent::Opencode => "npm install -g opencode-ai",
            Agent::Goose => "see https://block.github.io/goose/docs/getting-started/installation",
            Agent::Pi => "npm install -g @earendil-works/pi-coding-agent; it needs Node 22 or later",
        }
    }
}

/// How an agent starts `aileron-mcp`. No literal environment values: every value the server
/// needs is per-launch, so it comes from the agent's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    pub command: String,
    pub args: Vec<String>,
    /// Names the agent passes on from its own environment.
    pub pass_env: Vec<String>,
}

/// What `aileron-mcp` reads from the launched agent's environment: the session's wiring.
pub const SESSION_VARIABLES: [&str; 3] = [env::AILERON_URL, env::AILERON_TOKEN, env::AILERON_SESSION_ID];

/// Variables never handed to a launched agent: the vault passphrase would unlock everything.
pub const WITHHELD_VARIABLES: [&str; 1] = [env::AILERON_VAULT_PASSPHRASE];

/// The per-launch facts a plan is built from.
#[derive(Debug, Clone)]
pub struct Wiring {
    /// The daemon's base URL, which is also the gateway's.
    pub daemon_url: String,
    pub token: String,
    pub session_id: String,
    pub mcp_command: PathBuf,
}

impl Wiring {
    fn mcp_server(&self) -> McpServer {
        McpServer {
            command: self.mcp_command.display().to_string(),
            args: vec![],
            pass_env: SESSION_VARIABLES.iter().map(|name| name.to_string()).collect(),
        }
    }

    /// The session's wiring, set in the agent's own environment.
    fn session_env(&self) -> Vec<(String, String)> {
        vec![
            (env::AILERON_URL.to_string(), self.daemon_url.clone()),
            (env::AILERON_TOKEN.to_string(), self.token.clone()),
            (env::AILERON_SESSION_ID.to_string(), self.session_id.clone()),
        ]
    }

    /// `{NAME: <reference to $NAME>}` in an agent's own reference syntax.
    fn env_references(reference: impl Fn(&str) -> String) -> Value {
        Value::Object(SESSION_VARIABLES.iter().map(|name| (name.to_string(), Value::String(reference(name)))).collect())
    }
}

/// What a plan reads from the outside world, so tests can supply their own.
#[derive(Debug, Clone)]
pub struct LaunchEnv {
    pub vars: HashMap<String, String>,
    pub home_dir: PathBuf,
    /// Private directory for per-launch files (none holds a secret), outside `AILERON_HOME`,
    /// which a confined agent cannot see.
    pub launch_dir: PathBuf,
    /// The home the user's account names (its passwd entry's) when `HOME` is another directory
    /// (a test's temporary home, `sudo -E`, a container's `HOME=/workspace`): covered and its
    /// credential stores hidden as `HOME`'s are.
    pub account_home: Option<PathBuf>,
}

impl LaunchEnv {
    pub fn from_process() -> anyhow::Result<LaunchEnv> {
        // Those the launch reads, and those that name where a tool keeps its credentials.
        let mut vars: HashMap<String, String> = FOREIGN_VARIABLES
            .iter()
            .chain(&network::STORE_VARIABLES)
            .chain(&home_view::TOOL_VARIABLES)
            .chain(&allow_list::CODE_VARIABLES)
            .filter_map(|name| env::get(name).map(|value| (name.to_string(), value)))
            .collect();
        // npm's settings that name code, in whatever spelling npm takes them (N4), each under
        // its one name (two spellings set: both values, a line each).
        for (name, value) in env::named_like(|name| allow_list::npm_code_variable(name).is_some_and(|one| one != name))
        {
            let one = allow_list::npm_code_variable(&name).unwrap_or_default();
            vars.entry(one.to_string()).and_modify(|held| *held = format!("{held}\n{value}")).or_insert(value);
        }
        // `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>`, as many as `GIT_CONFIG_COUNT` says.
        let count = vars.get(repositories::GIT_CONFIG_COUNT).and_then(|count| count.parse::<usize>().ok());
        for name in (0..count.unwrap_or(0).min(1024)).flat_map(repositories::git_config_pair) {
            if let Some(value) = env::get(&name) {
                vars.insert(name, value);
            }
        }
        let home_dir = std::env::home_dir()
            .filter(|dir| dir.is_absolute())
            .ok_or_else(|| anyhow!("cannot locate your home directory to find the agent's config\nhint: set HOME"))?;
        let account_home =
            nix::unistd::User::from_uid(nix::unistd::getuid()).ok().flatten().map(|user| user.dir).filter(|dir| {
                dir.is_absolute() && std::fs::canonicalize(dir).ok() != std::fs::canonicalize(&home_dir).ok()
            });
        let env = LaunchEnv { vars, home_dir, launch_dir: PathBuf::new(), account_home };
        let launch_dir = runtime_dir(env.var(XDG_RUNTIME_DIR))?.join("launch");
        Ok(LaunchEnv { launch_dir, ..env })
    }

    /// This environment with the account's own home as its home (`account_home`), if that is
    /// another: what of it the agent sees, and which credential stores it holds, are found by the
    /// same rules as `HOME`'s.
    pub fn account_env(&self) -> Option<LaunchEnv> {
        self.account_home.as_deref().map(|home| self.with_home(home))
    }

    /// This environment with `home` as its home (and no other account home).
    fn with_home(&self, home: &Path) -> LaunchEnv {
        LaunchEnv { home_dir: home.to_path_buf(), account_home: None, ..self.clone() }
    }

    /// A variable's value; unset and empty are the same here.
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|value| !value.is_empty())
    }

    pub(super) fn config_home(&self) -> PathBuf {
        self.var(XDG_CONFIG_HOME)
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .unwrap_or_else(|| self.home_dir.join(".config"))
    }
}

/// Everything a launch does, computed before anything is written.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    pub agent: Agent,
    pub edits: Vec<ConfigEdit>,
    /// Variables set for the agent process.
    pub env: Vec<(String, String)>,
    /// The agent's arguments (the user's, plus ours where the agent takes config as flags).
    pub args: Vec<OsString>,
    /// Things the user should know (kept base URLs, Pi's adapter).
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    File(#[from] config_file::ConfigFileError),
    #[error("{path}: {detail}\nhint: fix the file (or restore {path}{suffix}) and launch again; nothing was changed")]
    Syntax { path: PathBuf, detail: String, suffix: &'static str },
}

fn syntax(path: &Path, detail: impl std::fmt::Display) -> LaunchError {
    LaunchError::Syntax { path: path.to_path_buf(), detail: detail.to_string(), suffix: config_file::BACKUP_SUFFIX }
}

/// `$XDG_RUNTIME_DIR/aileron`, else `<temp>/aileron-<uid>`: created private (0700) when missing,
/// refused when it is not a directory of ours that only we can enter (another user could have
/// planted it in a shared temp directory).
fn runtime_dir(xdg_runtime_dir: Option<&str>) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid().as_raw();
    let dir = match xdg_runtime_dir.map(PathBuf::from).filter(|dir| dir.is_absolute()) {
        Some(runtime) => runtime.join("aileron"),
        None => std::env::temp_dir().join(format!("aileron-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => bail!("creating {}: {error}\nhint: set XDG_RUNTIME_DIR to a private directory", dir.display()),
    }
    let meta = std::fs::symlink_metadata(&dir).with_context(|| format!("reading {}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        bail!(
            "{} is not a private directory of yours (a directory, owned by you, mode 0700)\nhint: remove it, or set \
             XDG_RUNTIME_DIR to a private directory",
            dir.display()
        );
    }
    Ok(dir)
}

/// Pi reaches MCP servers only through the `pi-mcp-adapter` extension, whose versions follow
/// Pi's: every adapter on npm (2.11.0 and later) imports the `@earendil-works/pi-*` packages Pi
/// was renamed to at 0.74, so none loads in `@mariozechner/pi-coding-agent` 0.73 and before; the
/// newest, 2.36.0, declares `@earendil-works/pi-ai` 0.84–0.86 (npm metadata, 2026-11-29).
const PI_ADAPTER_HINT: &str = "pi has no built-in MCP client: Aileron's tools reach it through the pi-mcp-adapter \
extension, which reads mcp.json\nhint: pi install npm:pi-mcp-adapter@2.36.0 (for @earendil-works/pi-coding-agent \
0.84 to 0.86); no adapter loads in the older @mariozechner/pi-coding-agent (0.73 and before): upgrade pi first with \
npm install -g @earendil-works/pi-coding-agent@0.86";

/// Computes the launch for `agent`: reads the agent's config, never writes.
pub fn plan(agent: Agent, wiring: &Wiring, env: &LaunchEnv, user_args: &[OsString]) -> Result<LaunchPlan, LaunchError> {
    let mut plan =
        LaunchPlan { agent, edits: vec![], env: wiring.session_env(), args: user_args.to_vec(), notes: vec![] };
    let url = wiring.daemon_url.trim_end_matches('/').to_string();
    let command = wiring.mcp_command.display().to_string();
    match agent {
        Agent::Claude => {
            let path = env.launch_dir.join(format!("{}-claude-mcp.json", wiring.session_id));
            // No `env`: Claude Code starts stdio servers with its own environment, which holds the
            // session's wiring.
            let config = json!({ "mcpServers": { SERVER_NAME: { "type": "stdio", "command": command, "args": [] }}});
            let after = serde_json::to_string_pretty(&config).expect("values serialize") + "\n";
            plan.args = with_flag(user_args, "--mcp-config", path.as_os_str());
            plan.edits.push(ConfigEdit { path, before: None, after, temporary: true });
            point(&mut plan, env, ANTHROPIC_BASE_URL, url);
        }
        Agent::Codex => {
            let codex_home = env.var(CODEX_HOME).map(PathBuf::from).unwrap_or_else(|| env.home_dir.join(".codex"));
            let path = codex_home.join("config.toml");
            let before = read_existing(&path)?;
            let after =
                toml_table::upsert_mcp_server(before.as_deref().unwrap_or(""), SERVER_NAME, &wiring.mcp_server())
                    .map_err(|e| syntax(&path, e))?;
            let user_choice = codex_base_url_choice(before.as_deref().unwrap_or(""), env);
            plan.edits.push(ConfigEdit { path, before, after, temporary: false });
            match user_choice {
                // A per-process override: the gateway's address never lands in the user's file.
                None => {
                    plan.args = [OsString::from("-c"), format!("openai_base_url=\"{url}/v1\"").into()]
                        .into_iter()
                        .chain(user_args.iter().cloned())
                        .collect()
                }
                Some(choice) => plan.notes.push(format!(
                    "{choice} is kept, so codex's LLM traffic does not go through the Aileron gateway\n\
                     hint: the daemon's upstream is set by AILERON_OPENAI_UPSTREAM"
                )),
            }
        }
        Agent::Opencode => {
            let path = match env.var(OPENCODE_CONFIG) {
                Some(custom) => PathBuf::from(custom),
                None => {
                    let dir = env.config_home().join("opencode");
                    let jsonc = dir.join("opencode.jsonc");
                    if jsonc.exists() { jsonc } else { dir.join("opencode.json") }
                }
            };
            let environment = Wiring::env_references(|name| format!("{{env:{name}}}"));
            let entry = json!({ "type": "local", "command": [command], "environment": environment, "enabled": true });
            let before = read_existing(&path)?;
            let after = jsonc::upsert(before.as_deref().unwrap_or(""), &["mcp", SERVER_NAME], &entry)
                .map_err(|e| syntax(&path, e))?;
            plan.edits.push(ConfigEdit { path, before, after, temporary: false });
            let providers = json!({ "provider": {
                "anthropic": { "options": { "baseURL": format!("{url}/v1") } },
                "openai": { "options": { "baseURL": format!("{url}/v1") } },
            }});
            point(&mut plan, env, OPENCODE_CONFIG_CONTENT, providers.to_string());
        }
        Agent::Goose => {
            let path = env.config_home().join("goose").join("config.yaml");
            let text = |value: &str| YamlValue::Str(value.to_string());
            let keys: Vec<String> = SESSION_VARIABLES.iter().map(|name| name.to_string()).collect();
            let entry = vec![
                ("enabled".to_string(), YamlValue::Bool(true)),
                ("type".to_string(), text("stdio")),
                ("name".to_string(), text(SERVER_NAME)),
                ("display_name".to_string(), text("Aileron")),
                ("description".to_string(), text("Aileron actions: sandboxed, approved by you, audited")),
                ("cmd".to_string(), text(&command)),
                ("args".to_string(), YamlValue::List(vec![])),
                ("envs".to_string(), YamlValue::Map(vec![])),
                ("env_keys".to_string(), YamlValue::List(keys)),
                ("timeout".to_string(), YamlValue::Int(300)),
            ];
            let before = read_existing(&path)?;
            let after = yaml_block::upsert_entry(before.as_deref().unwrap_or(""), "extensions", SERVER_NAME, &entry)
                .map_err(|e| syntax(&path, e))?;
            plan.edits.push(ConfigEdit { path, before, after, temporary: false });
            point(&mut plan, env, ANTHROPIC_HOST, url.clone());
            point(&mut plan, env, OPENAI_HOST, url);
        }
        Agent::Pi => {
            let dir = env
                .var(PI_CODING_AGENT_DIR)
                .map(PathBuf::from)
                .unwrap_or_else(|| env.home_dir.join(".pi").join("agent"));
            let path = dir.join("mcp.json");
            let entry =
                json!({ "command": command, "args": [], "env": Wiring::env_references(|name| format!("${{{name}}}")) });
            let before = read_existing(&path)?;
            let after = jsonc::upsert(before.as_deref().unwrap_or(""), &["mcpServers", SERVER_NAME], &entry)
                .map_err(|e| syntax(&path, e))?;
            plan.edits.push(ConfigEdit { path, before, after, temporary: false });
            let settings = read_existing(&dir.join("settings.json"))?.unwrap_or_default();
            if !settings.contains("pi-mcp-adapter") {
                plan.notes.push(PI_ADAPTER_HINT.to_string());
            }
            // Pi's provider base URLs have no environment override; a one-run extension does it.
            let extension = env.launch_dir.join(format!("{}-pi-gateway.ts", wiring.session_id));
            let source = format!(
                "// Written by `aileron launch pi` for one run (removed when pi exits): pi's Anthropic and\n\
                 // OpenAI traffic goes through the Aileron gateway. Nothing under ~/.pi is changed.\n\
                 export default function (pi: any) {{\n  \
                 pi.registerProvider(\"anthropic\", {{ baseUrl: {anthropic} }});\n  \
                 pi.registerProvider(\"openai\", {{ baseUrl: {openai} }});\n}}\n",
                anthropic = serde_json::to_string(&url).expect("strings serialize"),
                openai = serde_json::to_string(&format!("{url}/v1")).expect("strings serialize"),
            );
            plan.args = [OsString::from("-e"), extension.clone().into_os_string()]
                .into_iter()
                .chain(user_args.iter().cloned())
                .collect();
            plan.edits.push(ConfigEdit { path: extension, before: None, after: source, temporary: true });
        }
    }
    Ok(plan)
}

/// Where the user already routes Codex's model traffic, if they do: then it is left alone.
/// Current Codex reads the built-in provider's URL from the `openai_base_url` key (older versions
/// from `OPENAI_BASE_URL`); a `model_provider` other than `openai` is the user's own endpoint.
fn codex_base_url_choice(config: &str, env: &LaunchEnv) -> Option<String> {
    if let Some(value) = env.var(OPENAI_BASE_URL) {
        return Some(format!("OPENAI_BASE_URL ({value})"));
    }
    let document: toml_edit::DocumentMut = config.parse().ok()?;
    if let Some(value) = document.get("openai_base_url").and_then(toml_edit::Item::as_str) {
        return Some(format!("openai_base_url ({value}) in config.toml"));
    }
    match document.get("model_provider").and_then(toml_edit::Item::as_str) {
        Some(provider) if provider != "openai" => Some(format!("model_provider \"{provider}\" in config.toml")),
        _ => None,
    }
}

/// Sets `name` for the agent unless the user already chose a value, which wins.
fn point(plan: &mut LaunchPlan, env: &LaunchEnv, name: &str, value: String) {
    match env.var(name) {
        Some(existing) if existing != value => plan.notes.push(format!(
            "{name} is already set ({existing}) and is kept, so {}'s LLM traffic does not go through the Aileron gateway\n\
             hint: unset it to route through the gateway; the daemon's upstream is set by AILERON_ANTHROPIC_UPSTREAM / \
             AILERON_OPENAI_UPSTREAM",
            plan.agent.name()
        )),
        _ => plan.env.push((name.to_string(), value)),
    }
}

/// The user's arguments with `flag value` added where an option is still parsed: before a `--`,
/// else at the end (Claude Code's `--mcp-config` takes several values, so a positional prompt
/// after it would be read as a config file).
fn with_flag(user_args: &[OsString], flag: &str, value: &std::ffi::OsStr) -> Vec<OsString> {
    let at = user_args.iter().position(|arg| arg == "--").unwrap_or(user_args.len());
    let mut args = user_args[..at].to_vec();
    args.push(flag.into());
    args.push(value.to_os_string());
    args.extend_from_slice(&user_args[at..]);
    args
}

/// `program` on `path` (a `PATH` value), if it names an executable file.
pub fn find_program(program: &str, path: Option<&str>) -> Option<PathBuf> {
    path?.split(':').filter(|dir| !dir.is_empty()).map(|dir| Path::new(dir).join(program)).find(|candidate| {
        std::fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    })
}

/// `aileron-mcp` next to this executable (both are installed together).
pub fn mcp_server_path() -> anyhow::Result<PathBuf> {
    let current = std::env::current_exe().context("locating the running executable")?;
    Ok(current.with_file_name("aileron-mcp"))
}

pub struct LaunchOptions {
    pub agent: Agent,
    pub dry_run: bool,
    /// Run the agent without containment (it could read the home and approve its own actions).
    pub unconfined: bool,
    /// More paths the confined agent may write, besides its workspace and its own directories.
    pub writable: Vec<PathBuf>,
    /// `--network`: the agent's own namespace behind the egress proxy, or the host's network.
    pub network: SessionNetwork,
    /// `--allow-private HOST:PORT`: non-public destinations the proxy may reach.
    pub allow_private: Vec<String>,
    /// `--allow-tcp HOST:PORT`: non-HTTP destinations relayed as they are (git over ssh).
    pub allow_tcp: Vec<String>,
    /// `--expose PATH`: credential stores left visible.
    pub expose: Vec<PathBuf>,
    /// `--expose-env NAME`: credential variables passed on.
    pub expose_env: Vec<String>,
    /// `--approval-hold SECONDS`: how long a request held for approval at the proxy waits.
    pub approval_hold: u64,
    pub agent_args: Vec<OsString>,
}

/// Whether this machine can confine an agent: the helper builds the namespaces and masks once
/// and exits. `Err` carries its reason.
async fn probe_containment(request: &confine::Request) -> Result<(), String> {
    let helper = std::env::current_exe().map_err(|e| format!("locating the aileron executable: {e}"))?;
    let probe = confine::Request { probe: true, program: OsString::new(), args: vec![], ..request.clone() };
    let output = tokio::process::Command::new(&helper)
        .args(probe.arguments())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("running {}: {e}", helper.display()))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(stderr.trim().trim_start_matches("aileron: cannot confine the agent: ").to_string())
}

/// What of the home a confined agent sees (`home_view`): what it writes (and its own directories
/// by the names it uses), what the user's git reads, a worktree's git directories, what
/// `--expose` names, the launch's own files, and what `programs` (the agent, `aileron-mcp`) and
/// the user's toolchains need — never through a link inside what an agent may write or wrote at an
/// earlier launch (`recorded`).
fn views_of_home(
    agent: Agent,
    env: &LaunchEnv,
    access: &allow_list::WriteAccess,
    expose: &[PathBuf],
    programs: &[PathBuf],
    recorded: &[PathBuf],
) -> Vec<home_view::HomeView> {
    let homes = [Some(env.home_dir.clone()), env.account_home.clone()];
    let views =
        homes.into_iter().flatten().filter_map(|home| view_of(agent, env, &home, access, expose, programs, recorded));
    views.collect()
}

/// What of the shared temp directories (`network::temp_directories`) a confined agent sees under
/// the enforced network: what [`view_of`] keeps of a home (what the agent writes, the launch's own
/// files, the home when it lies there, `--expose`, its programs and the user's toolchains), and
/// nothing else, so a socket a program of the user's makes there during the session is out of its
/// sight (S1). The Aileron home's `masks` stay where they are, empty (the `aileron` the agent runs
/// finds its home there). Not one the agent writes whole, nor one inside a home (that home's view
/// covers it).
fn views_of_temp(
    agent: Agent,
    env: &LaunchEnv,
    access: &allow_list::WriteAccess,
    expose: &[PathBuf],
    masks: &[PathBuf],
    programs: &[PathBuf],
    recorded: &[PathBuf],
) -> Vec<home_view::HomeView> {
    let named: Vec<PathBuf> = expose.iter().chain(masks).cloned().collect();
    let homes: Vec<PathBuf> = [Some(&env.home_dir), env.account_home.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|home| std::fs::canonicalize(home).ok())
        .collect();
    network::temp_directories(env)
        .into_iter()
        .filter(|dir| !access.writable.iter().any(|root| dir.starts_with(root)))
        .filter(|dir| !homes.iter().any(|home| dir.starts_with(home)))
        .filter_map(|dir| view_of(agent, env, &dir, access, &named, programs, recorded))
        .collect()
}

/// What of `home` (`HOME`, or the account's own home beside it) the agent sees: the account's
/// keeps `HOME` when it holds it (a temporary home in it keeps its own cover).
fn view_of(
    agent: Agent,
    env: &LaunchEnv,
    home: &Path,
    access: &allow_list::WriteAccess,
    expose: &[PathBuf],
    programs: &[PathBuf],
    recorded: &[PathBuf],
) -> Option<home_view::HomeView> {
    let mut named: Vec<PathBuf> = access.writable.iter().chain(expose).chain([&env.launch_dir]).cloned().collect();
    if home != env.home_dir {
        named.push(env.home_dir.clone());
    }
    let covered = env.with_home(home);
    // Not one that holds the home (`CLAUDE_CONFIG_DIR=$HOME` turned the cover off: the
    // twenty-first re-attack).
    let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
    named.extend(
        allow_list::agent_directories(agent, env)
            .into_iter()
            .filter(|dir| !home.starts_with(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()))),
    );
    named.extend(allow_list::agent_files(agent, env).into_iter().filter(|file| file.exists()));
    // A worktree's git directory and the repository's own (`git worktree add`: the seventeenth
    // re-attack's workspace was no repository inside the launch), each a git directory, as the
    // user's git settings are: never the home nor a directory too wide (the nineteenth re-attack
    // wrote a `commondir` naming the home).
    let mut untrusted = untrusted_roots(env, &access.writable, recorded);
    untrusted.retain(|root| !root.starts_with("/dev"));
    let mut configured = access.git_reads.clone();
    for (git_dir, worktree) in &access.worktrees {
        // A worktree's own only: its git directory says where the worktree is (`gitdir`), which
        // a `.git` file the agent forged in its workspace cannot (the twenty-first re-attack
        // named another repository's git directory, and read its history).
        let said = std::fs::read_to_string(git_dir.join("gitdir")).ok().map(|said| PathBuf::from(said.trim()));
        let points_back =
            said.and_then(|said| std::fs::canonicalize(said).ok()) == std::fs::canonicalize(worktree.join(".git")).ok();
        if !points_back || git_dir.starts_with(worktree) {
            continue;
        }
        // And only a git directory an agent could not have written (its `gitdir` and `commondir`
        // are then the agent's words: the twenty-third re-attack left `~/.claude/.git` naming one
        // in its old workspace whose `commondir` named `~/private/.git`), unless it is where git
        // puts a worktree's, `<repository>/.git/worktrees/<name>`, with that repository as its
        // common directory: what it shows is then the repository it lies in.
        let common = git::common_dir(git_dir);
        let canonical = |dir: &Path| std::fs::canonicalize(dir).ok();
        let written_by_an_agent =
            canonical(git_dir).is_none_or(|dir| untrusted.iter().any(|root| dir.starts_with(root)));
        let in_its_repository = git_dir.parent().is_some_and(|parent| parent.file_name() == Some("worktrees".as_ref()))
            && common
                .as_deref()
                .and_then(canonical)
                .is_some_and(|common| Some(common) == canonical(&git_dir.join("../..")));
        if written_by_an_agent && !in_its_repository {
            continue;
        }
        configured
            .extend([Some(git_dir.clone()), common].into_iter().flatten().filter(|dir| git::is_git_directory(dir)));
    }
    home_view::home_view(&covered, &named, &configured, programs, &untrusted)
}

/// The `--writable` paths resolved, each once, here: refused when reached through a link an agent
/// could have made (inside the roots earlier launches let agents write, or an agent's own
/// directory): an agent in `~/code/app` that made `shared` a link to `~/.config` was granted and
/// shown all of it by the next `--writable ~/code/app/shared` (the twenty-third re-attack). What
/// this returns is what the allow-list grants and the helper opens with no link followed, so a
/// link swapped in after this look is refused there, not followed (N5).
fn resolve_writable(env: &LaunchEnv, writable: &[PathBuf], recorded: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    // What earlier launches let agents write and every agent's own directories: this launch's
    // writable paths are what is being checked.
    let untrusted = untrusted_roots(env, &[], recorded);
    let mut resolved = Vec::new();
    for path in writable {
        let absolute = if path.is_absolute() { path.clone() } else { std::env::current_dir()?.join(path) };
        match home_view::resolve_following_trusted_links(&absolute, &untrusted) {
            Ok(real) => resolved.push(real),
            Err(Some(link)) => bail!(
                "--writable {}: {} on its way is a link in what an agent could write at an earlier launch, so it is \
                 not followed\nhint: name the directory you mean by its own path, if you trust where the link \
                 leads ({})",
                path.display(),
                link.display(),
                std::fs::canonicalize(&link)
                    .map_or_else(|_| "nowhere now".to_string(), |real| real.display().to_string())
            ),
            Err(None) => bail!(
                "--writable {}: {}\nhint: name a file or directory that exists",
                path.display(),
                std::fs::canonicalize(&absolute)
                    .err()
                    .map_or_else(|| "too many links on its way".to_string(), |e| e.to_string())
            ),
        }
    }
    Ok(resolved)
}

/// The working directory, where it really is; refused when the shell's own name for it (`$PWD`,
/// when it names the same directory) came through a link an agent could have made: `cd
/// ~/proj/deploy`, a link an earlier agent left to `~/.config/systemd/user`, made that the
/// workspace (the twenty-seventh re-attack).
fn working_directory(env: &LaunchEnv, untrusted: &[PathBuf]) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let cwd = std::env::current_dir().and_then(std::fs::canonicalize).context("reading the working directory")?;
    let Some(logical) = env.var(PWD).map(PathBuf::from).filter(|path| path.is_absolute()) else { return Ok(cwd) };
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if logical != cwd
        && same(&logical, &cwd)
        && let Err(Some(link)) = home_view::resolve_following_trusted_links(&logical, untrusted)
    {
        bail!(
            "{} is reached through {}, a link in what an agent could write at an earlier launch, so it is not taken \
             as the workspace (it leads to {})\nhint: launch from the directory you mean by its own path",
            logical.display(),
            link.display(),
            cwd.display()
        );
    }
    Ok(cwd)
}

/// What an agent may write or could have written, canonical: this launch's writable paths, every
/// agent's own directories, and the writable roots of earlier launches.
fn untrusted_roots(env: &LaunchEnv, writable: &[PathBuf], recorded: &[PathBuf]) -> Vec<PathBuf> {
    let agents = <Agent as clap::ValueEnum>::value_variants().iter();
    let own = agents.flat_map(|agent| allow_list::agent_directories(*agent, env));
    let mut roots: Vec<PathBuf> = writable.iter().chain(recorded).cloned().chain(own).collect();
    for root in &mut roots {
        if let Ok(resolved) = std::fs::canonicalize(&root) {
            *root = resolved;
        }
    }
    roots.sort();
    roots.dedup();
    roots
}

/// The config files the agent reads that may hold a credential (`withheld_config`): git's read at
/// launch, and cargo's outside what the agent may write.
fn config_files(env: &LaunchEnv, access: &allow_list::WriteAccess) -> Vec<(PathBuf, withheld_config::Format)> {
    // Those git read at launch; the user's own wherever `GIT_CONFIG_GLOBAL` points git (they stay
    // in the home's view); each git directory's config and worktree configs (a linked worktree's
    // main repository: the twenty-eighth re-attack read both there).
    let usual = repositories::user_config_files(env, &env.home_dir);
    let mut git: Vec<PathBuf> =
        access.git_configs.iter().cloned().chain(usual).chain([env.home_dir.join(".config/git/config")]).collect();
    for dir in &access.git_dirs {
        git.extend([dir.join("config"), dir.join("config.worktree")]);
        let worktrees = std::fs::read_dir(dir.join("worktrees")).into_iter().flatten().flatten().take(1024);
        git.extend(worktrees.map(|entry| entry.path().join("config.worktree")));
    }
    let git = git.into_iter().filter(|file| file.is_file()).map(|file| (file, withheld_config::Format::Git));
    let cargo = withheld_config::cargo_configs(env, access.workspace.as_deref(), &access.writable);
    let mise = withheld_config::mise_configs(env, &access.writable);
    git.chain(cargo.into_iter().chain(mise).map(|file| (file, withheld_config::Format::Toml))).collect()
}

/// Runs `aileron launch`; returns the agent's exit code.
pub async fn run(home: &Home, options: LaunchOptions) -> anyhow::Result<i32> {
    // The agent may make its own process group the terminal's foreground and set `tostop`: the
    // launcher's first exit warning then stopped it (SIGTTOU), warnings unsaid and the session
    // open (the twelfth re-attack). The launcher writes to the terminal whatever group leads it;
    // the agent gets the default back before it starts. SAFETY: sets a signal's disposition.
    unsafe {
        let _ = nix::sys::signal::signal(nix::sys::signal::Signal::SIGTTOU, nix::sys::signal::SigHandler::SigIgn);
    }
    let agent = options.agent;
    let env = LaunchEnv::from_process()?;
    let program = find_program(agent.program(), env.var(PATH));
    let mcp_command = mcp_server_path()?;
    if options.dry_run {
        let daemon_url = match DaemonClient::discover(home).await {
            Ok(Some(client)) => client.base_url,
            _ => "http://127.0.0.1:<daemon port>".to_string(),
        };
        let wiring = Wiring {
            daemon_url,
            token: "<session token>".into(),
            session_id: "<session id>".into(),
            mcp_command: mcp_command.clone(),
        };
        let plan = plan(agent, &wiring, &env, &options.agent_args)?;
        print!("{}", dry_run_report(&plan, program.as_deref(), &mcp_command));
        if options.unconfined {
            println!("\nconfinement: none (--unconfined); the session and its approvals are marked unconfined");
        } else {
            let mask_dirs = crate::platform::confinement::masked_directories(home);
            let masks: Vec<String> = mask_dirs.iter().map(|dir| dir.display().to_string()).collect();
            let namespaces = match options.network {
                SessionNetwork::Enforced => "user, mount, PID and network namespaces",
                SessionNetwork::Open => "user, mount and PID namespaces",
            };
            println!("\nconfinement: {namespaces}; hidden from the agent: {}", masks.join(", "));
            match options.network {
                SessionNetwork::Enforced => println!(
                    "network: its own namespace; out only through the daemon's egress proxy (HTTPS_PROXY), every \
                     request audited{}",
                    if options.allow_private.is_empty() {
                        String::new()
                    } else {
                        format!("; private destinations allowed: {}", options.allow_private.join(", "))
                    }
                ),
                SessionNetwork::Open => println!("network: the host's (--network=open): not audited"),
            }
            let (hidden, kept) = network::hidden_stores(agent, &env, &options.expose)?;
            let shown = |paths: &[PathBuf]| paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>();
            if !hidden.is_empty() {
                println!("credential stores hidden from the agent: {}", shown(&hidden).join(", "));
            }
            if !kept.is_empty() {
                println!("credential stores kept visible (--expose): {}", shown(&kept).join(", "));
            }
            let (_, mut withheld, passed) = network::withheld_variables(&options.expose_env);
            let (git_names, _) = withheld_config::environment_credentials(crate::platform::env::get);
            withheld.extend(git_names.iter().map(|name| format!("${name}")));
            if !withheld.is_empty() {
                println!("credential variables withheld from the agent: {}", withheld.join(", "));
            }
            if !passed.is_empty() {
                println!("credential variables passed on (--expose-env): {}", passed.join(", "));
            }
            let recorded = home_view::recorded_roots(&home.root().join(home_view::RECORDED_ROOTS));
            let untrusted = untrusted_roots(&env, &[], &recorded);
            let cwd = working_directory(&env, &untrusted)?;
            let extra = resolve_writable(&env, &options.writable, &recorded)?;
            let access =
                allow_list::write_access(agent, &env, &cwd, &extra, &env.launch_dir.join("<temp>"), &untrusted)?;
            let shown =
                |paths: &[PathBuf]| paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
            println!("writable by the agent (everything else is read-only to it): {}", shown(&access.writable));
            let (_, withheld_configs) = withheld_config::copies(&config_files(&env, &access), None, &[])?;
            if !withheld_configs.is_empty() {
                println!("config read as a copy without its credentials: {}", withheld_configs.join(", "));
            }
            if !access.read_only.is_empty() {
                println!("read-only inside its workspace: {}", shown(&access.read_only));
            }
            if !access.watched.is_empty() {
                println!("moved aside if the agent creates them: {}", shown(&access.watched));
            }
            let programs: Vec<PathBuf> = program.iter().chain([&mcp_command]).cloned().collect();
            let views = views_of_home(agent, &env, &access, &options.expose, &programs, &recorded);
            let home_dir = std::fs::canonicalize(&env.home_dir).unwrap_or_else(|_| env.home_dir.clone());
            if !views.iter().any(|view| view.home == home_dir) {
                println!("your home: all of it in the agent's sight");
            }
            for view in &views {
                let whose = if view.home == home_dir { "your home" } else { "your account's home (HOME is elsewhere)" };
                println!(
                    "of {whose} ({}) the agent sees only (--expose PATH for more): {}",
                    view.home.display(),
                    shown(&view.kept)
                );
            }
            if options.network == SessionNetwork::Enforced {
                for view in views_of_temp(agent, &env, &access, &options.expose, &mask_dirs, &programs, &recorded) {
                    println!(
                        "of the temp directory {} the agent sees only (--expose PATH for more): {}",
                        view.home.display(),
                        shown(&view.kept)
                    );
                }
            }
            for note in &access.notes {
                println!("note: {note}");
            }
        }
        return Ok(0);
    }
    let program = program.ok_or_else(|| {
        anyhow!("`{}` is not on PATH\nhint: install it ({}), then launch again", agent.program(), agent.install_hint())
    })?;
    if !mcp_command.exists() {
        bail!(
            "{} is missing, so {} could not reach Aileron's actions\nhint: install aileron-mcp next to aileron \
             (both come from the same release)",
            mcp_command.display(),
            agent.name()
        );
    }
    // Refused before anything starts (the session's own ports are checked again once known).
    network::tcp_forwards(&options.allow_tcp, &[])?;
    let masks = crate::platform::confinement::masked_directories(home);
    // The agent keeps its working directory across the mounts that hide the home: started inside
    // it, it would read daemon.json (and decide its own approvals) through its cwd (the
    // re-attack's M1). Refused, confined or not: nothing an agent needs lives there.
    if let Ok(cwd) = std::env::current_dir().and_then(std::fs::canonicalize)
        && let Some(mask) = masks.iter().find(|mask| cwd.starts_with(mask))
    {
        bail!(
            "{} is inside {}, which a launched agent must not see\nhint: cd to your project (or any directory outside \
             {}) and launch again",
            cwd.display(),
            mask.display(),
            mask.display()
        );
    }
    // The confined agent's private temp directory (removed with it) and write allow-list.
    crate::platform::home::create_private_dir(&env.launch_dir)
        .with_context(|| format!("creating {}", env.launch_dir.display()))?;
    let temp_dir = tempfile::Builder::new()
        .prefix("agent-tmp-")
        .tempdir_in(&env.launch_dir)
        .with_context(|| format!("creating a temp directory in {}", env.launch_dir.display()))?;
    // The agent's copies of the git config files that hold credentials (`withheld_config`), out of
    // its sight, for as long as the session lasts.
    let withheld_dir = tempfile::Builder::new()
        .prefix("withheld-")
        .tempdir_in(&env.launch_dir)
        .with_context(|| format!("creating a directory in {}", env.launch_dir.display()))?;
    let mut request = confine::Request { masks: masks.clone(), ..confine::Request::default() };
    let (mut writable, mut hidden, mut exposed, mut home_seen) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut writable_paths = Vec::new();
    // The workspace and the checkouts in it, where a `.tool-versions` is looked at (F12).
    let mut workspace_dirs: Vec<PathBuf> = Vec::new();
    let mut renamed_version_files: Vec<String> = Vec::new();
    // Where the user's tools run a project's own files, and those there at launch (G3).
    let (mut trusted_scopes, mut trusted_at_launch, mut cut_short_at_launch) = (Vec::new(), Vec::new(), Vec::new());
    let mut version_files_at_launch: Vec<PathBuf> = Vec::new();
    let (mut ignore_files_at_launch, mut ignored_skipped_at_launch): (Vec<PathBuf>, Vec<PathBuf>) =
        (Vec::new(), Vec::new());
    let mut git_entries_at_launch: Vec<PathBuf> = Vec::new();
    // What was protected at launch: the git directories there (pinned), the read-only binds.
    let (mut existing_git_dirs, mut bound_read_only, mut worktrees) = (Vec::new(), Vec::new(), Vec::new());
    let (mut watched, mut kept_links) = (Vec::new(), Vec::new());
    let mut link_record = None;
    let mut withheld_watch = Vec::new();
    let mut checkouts = repositories::Checkouts::default();
    let mut withheld_credentials = Vec::new();
    let confinement = if options.unconfined {
        log_line!(
            "aileron: warning: {} runs unconfined: it can read {} and use the daemon token in it, so the approval \
             gate holds only as far as you trust it; its session and approvals are marked unconfined",
            agent.name(),
            home.root().display()
        );
        Confinement::Unconfined
    } else {
        let roots_file = home.root().join(home_view::RECORDED_ROOTS);
        let recorded = home_view::recorded_roots(&roots_file);
        let untrusted = untrusted_roots(&env, &[], &recorded);
        let cwd = working_directory(&env, &untrusted)?;
        let extra = resolve_writable(&env, &options.writable, &recorded)?;
        let mut access = allow_list::write_access(agent, &env, &cwd, &extra, temp_dir.path(), &untrusted)?;
        access.prepare()?;
        // Before a protected file's other names are separated from it: a name in the workspace of a
        // git config holding a credential gets the copy too.
        let configs = config_files(&env, &access);
        let (substitutes, withheld_configs) =
            withheld_config::copies(&configs, Some(withheld_dir.path()), &access.read_only)
                .context("writing the agent's copies of your config files without the credentials in them")?;
        if !withheld_configs.is_empty() {
            log_line!(
                "aileron: note: credentials in your git or cargo config are withheld from {}: it reads a copy without \
                 them ({})\nhint: `aileron auth import gh` (or `git`) has the session's proxy add your GitHub login to \
                 the agent's git requests, unseen by it",
                agent.name(),
                withheld_configs.join("; ")
            );
        }
        let separated = allow_list::separate_hard_links(&access.read_only, &access.writable);
        for note in access.notes.iter().chain(&separated) {
            log_line!("aileron: note: {note}");
        }
        writable = access.writable.iter().map(|path| path.display().to_string()).collect();
        // The device entries are the host's (`/dev/shm` among them): never a place to disarm.
        writable_paths = access.writable.iter().filter(|path| !path.starts_with("/dev")).cloned().collect();
        existing_git_dirs.clone_from(&access.git_dirs);
        renamed_version_files.clone_from(&access.renamed_version_files);
        worktrees.clone_from(&access.worktrees);
        workspace_dirs =
            access.workspace.iter().chain(access.worktrees.iter().map(|(_, worktree)| worktree)).cloned().collect();
        workspace_dirs.sort();
        workspace_dirs.dedup();
        trusted_scopes.clone_from(&access.trusted);
        trusted_at_launch.clone_from(&access.trusted_files);
        cut_short_at_launch.clone_from(&access.trusted_cut_short);
        version_files_at_launch.clone_from(&access.version_files);
        ignore_files_at_launch.clone_from(&access.ignore_files);
        ignored_skipped_at_launch.clone_from(&access.ignored_skipped);
        git_entries_at_launch.clone_from(&access.skipped_git_entries);
        bound_read_only.clone_from(&access.read_only);
        let (stores, kept) = network::hidden_stores(agent, &env, &options.expose)?;
        hidden = stores.iter().map(|path| path.display().to_string()).collect();
        exposed = kept.iter().map(|path| path.display().to_string()).collect();
        let (names, hidden_variables, exposed_variables) = network::withheld_variables(&options.expose_env);
        withheld_credentials = names.into_iter().map(str::to_string).collect();
        hidden.extend(hidden_variables);
        // The environment's git config holding a credential (`GIT_CONFIG_VALUE_<n>`,
        // `GIT_CONFIG_PARAMETERS`): withheld whole, its keys named.
        let (git_names, git_keys) = withheld_config::environment_credentials(crate::platform::env::get);
        if !git_keys.is_empty() {
            log_line!(
                "aileron: note: credentials in the git config your environment passes are withheld from {} ({}): \
                 its git runs without those variables",
                agent.name(),
                git_keys.join(", ")
            );
            hidden.extend(git_names.iter().map(|name| format!("${name}")));
        }
        withheld_credentials.extend(git_names);
        exposed.extend(exposed_variables);
        request.hidden = stores;
        hidden.extend(withheld_configs);
        // Every config file that may hold a credential, where it really is, with the copy it gets
        // when one replaced while the agent runs holds one (W1).
        for (index, (config, format)) in configs.into_iter().enumerate() {
            let Ok(real) = std::fs::canonicalize(&config) else { continue };
            let copy = match substitutes.iter().find(|(file, _)| *file == real) {
                Some((_, copy)) => copy.clone(),
                None => {
                    let name = real.file_name().unwrap_or_default().to_string_lossy().to_string();
                    withheld_dir.path().join(format!("r{index}-{name}"))
                }
            };
            withheld_watch.push((real, copy, format));
        }
        request.substitutes = substitutes;
        if options.network == SessionNetwork::Enforced {
            // The host's socket files the agent could still reach through the filesystem (not
            // those in what is masked). Those in what it may write too: every one listening now
            // is a host process's (a dev server's in the workspace: the seventh re-attack); the
            // agent's own are made after this list is read.
            let (sockets, over) = network::host_unix_sockets(&masks, MAX_HIDDEN_SOCKETS);
            request.hidden.extend(sockets);
            // And every socket file in what it may write, wherever it was bound from (a name
            // relative to a directory the process has left, a path in a mount namespace of its
            // own: the thirtieth re-attack's B7 and B2).
            let more: Vec<PathBuf> =
                access.sockets.iter().filter(|socket| !request.hidden.contains(socket)).cloned().collect();
            request.hidden.extend(more);
            if over > 0 {
                log_line!(
                    "aileron: warning: {over} more of the host's socket files than the {MAX_HIDDEN_SOCKETS} hidden stay \
                     reachable by the agent through the filesystem"
                );
            }
            // Probed with the namespace too; the real ports are known once the daemon is.
            request.network = Some(confine::Network { channel: None, api_port: 0, proxy_port: 0 });
        }
        // The roots this launch lets an agent write, recorded before it runs: a later launch
        // follows no link inside them.
        let granted: Vec<PathBuf> = access
            .writable
            .iter()
            .filter(|path| !path.starts_with("/dev") && !path.starts_with(&env.launch_dir))
            .cloned()
            .collect();
        home_view::record_roots(&roots_file, &granted)
            .with_context(|| format!("recording the agent's writable paths in {}", roots_file.display()))?;
        let programs = [program.clone(), mcp_command.clone()];
        for view in views_of_home(agent, &env, &access, &options.expose, &programs, &recorded) {
            if view.left_out > 0 {
                log_line!(
                    "aileron: warning: {} more paths of your home than the {} kept are out of the agent's sight (the \
                     toolchains' and the links' on your PATH last)\nhint: --expose PATH keeps one",
                    view.left_out,
                    home_view::MAX_KEPT
                );
            }
            // The agent's own program out of its sight (reached through a link in what an
            // earlier launch let an agent write): said, rather than an ENOENT at its start.
            if let Ok(real) = std::fs::canonicalize(&program)
                && real.starts_with(&view.home)
                && !view.kept.iter().any(|kept| real.starts_with(kept))
            {
                log_line!(
                    "aileron: warning: {} leads to {}, which the agent will not see: a link on its way lies in what an \
                     earlier launch let an agent write, and such links are not followed\nhint: --expose {} shows it",
                    program.display(),
                    real.display(),
                    real.display()
                );
            }
            home_seen.extend(view.kept.iter().map(|path| path.display().to_string()));
            request.covers.push(confine::Cover { dir: view.home, seen: view.kept, links: view.links });
        }
        // The shared temp directories as a read list too, under the enforced network: a socket made
        // there during the session (an ssh-agent started in another terminal, `tmux -S`) is out of
        // the agent's sight (S1).
        if options.network == SessionNetwork::Enforced {
            for view in views_of_temp(agent, &env, &access, &options.expose, &masks, &programs, &recorded) {
                if view.left_out > 0 {
                    log_line!(
                        "aileron: warning: {} more paths of {} than the {} kept are out of the agent's sight\nhint: \
                         --expose PATH keeps one",
                        view.left_out,
                        view.home.display(),
                        home_view::MAX_KEPT
                    );
                }
                request.covers.push(confine::Cover { dir: view.home, seen: view.kept, links: view.links });
            }
        }
        watched = access.watched;
        kept_links = access.kept_links;
        // Each kept link as the live sessions keep it, and recorded for those after (R7). One that
        // says otherwise here than when a session still running began is being changed by that
        // session's agent: what this launch derived from it (the binds, the pins) is not to be
        // trusted, and the launch is refused (the twenty-eighth re-attack's K1).
        let (record, differing) = planted::LinkRecord::agree(&home.root().join(KEPT_LINKS), &kept_links);
        if !differing.is_empty() {
            if let Some(record) = record {
                record.remove();
            }
            bail!(
                "{}\nhint: another session's agent may be changing it: end that session and launch again (if you \
                 changed the link yourself, launch again once the other session has ended)",
                differing.join("\n")
            );
        }
        link_record = record;
        checkouts = access.checkouts;
        request.writable = access.writable;
        request.pinned = access.pinned;
        // A store inside what the agent writes (a dotfiles repository behind `~/.config/gh`) has
        // the directories on its way pinned: renamed, the store was no longer at its name for the
        // next launch to hide (the nineteenth re-attack).
        for store in request.hidden.iter().filter_map(|store| std::fs::canonicalize(store).ok()) {
            let Some(root) = request.writable.iter().filter(|root| store.starts_with(root) && store != **root).max()
            else {
                continue;
            };
            request
                .pinned
                .extend(store.ancestors().skip(1).take_while(|dir| *dir != root.as_path()).map(Path::to_path_buf));
        }
        request.pinned.sort_by(|a, b| a.components().count().cmp(&b.components().count()).then_with(|| a.cmp(b)));
        request.pinned.dedup();
        request.read_only = access.read_only;
        // A pin is a writable bind: inside a read-only path it stayed writable beneath the
        // read-only bind (the twenty-third re-attack wrote VS Code's and podman's configs under a
        // linked `~/.config`). A directory there needs no pin: renaming it is refused anyway.
        let read_only = &request.read_only;
        request.pinned.retain(|pin| !read_only.iter().any(|path| pin.starts_with(path) && pin != path));
        probe_containment(&request).await.map_err(|reason| {
            // What the machine lacks (namespaces, Landlock) has a way around; a path the
            // containment could not build (a link swapped in, a mount refused) is said as it is,
            // not answered with `--unconfined` (the twenty-seventh re-attack's R8).
            if !(reason.contains("namespace") || reason.contains("Landlock")) {
                return anyhow!(
                    "cannot confine {agent}: {reason}\nhint: the containment could not be built around this path; \
                     `aileron launch --dry-run {agent}` lists what it binds",
                    agent = agent.name()
                );
            }
            anyhow!(
                "cannot confine {agent} on this machine: {reason}\nhint: containment needs unprivileged user \
                 namespaces (Linux; `sysctl kernel.unprivileged_userns_clone=1` or the AppArmor userns restriction \
                 lifted); `aileron launch --unconfined {agent}` runs it without (it could then read your Aileron \
                 home and approve its own actions); when only the network namespace is missing, \
                 `--network=open` keeps the host's network (unrecorded)",
                agent = agent.name()
            )
        })?;
        Confinement::Namespaces
    };
    let client = DaemonClient::connect(home).await?;
    let tracing =
        crate::platform::telemetry::TelemetryConfig::from_env(crate::platform::telemetry::DEFAULT_SERVICE_NAME, home);
    warn_when_the_daemon_ignores_tracing(&client, &tracing).await;
    let session_network = (confinement == Confinement::Namespaces).then_some(options.network);
    let start = StartSession {
        resume: None,
        agent: agent.name().to_string(),
        pid: Some(std::process::id()),
        confinement,
        writable,
        network: session_network,
        hidden,
        exposed,
        home_seen,
    };
    let started: SessionStarted = client.post_as("/v1/sessions", &start).await.context("starting a session")?;
    let placeholders = started.placeholder_env;
    let wiring = Wiring {
        daemon_url: client.base_url.clone(),
        token: started.token.expose().to_string(),
        session_id: started.session_id,
        mcp_command,
    };
    // aileron-mcp's file exporter writes under AILERON_TRACES_DIR; the real one is in the hidden
    // home, so a confined agent's server writes to its temp directory and its spans are moved to
    // the real traces directory when it exits.
    let agent_traces = (confinement == Confinement::Namespaces
        && tracing.enabled
        && tracing.exporter == crate::platform::telemetry::ExporterKind::File.as_str())
    .then(|| temp_dir.path().join("traces-parent"));
    let mut forwards = Vec::new();
    if let Some(network) = &mut request.network {
        let port =
            url::Url::parse(&client.base_url).ok().and_then(|url| url.port()).context("reading the daemon's port")?;
        (network.api_port, network.proxy_port) = network::ports(port);
        forwards = network::tcp_forwards(&options.allow_tcp, &[network.api_port, network.proxy_port])?;
        request.forwards = forwards.iter().map(|forward| forward.inside).collect();
        if !forwards.is_empty() {
            let hosts = env.launch_dir.join(format!("hosts-{}", wiring.session_id));
            crate::platform::home::write_atomic(&hosts, network::hosts_file(&forwards).as_bytes(), 0o644)
                .with_context(|| format!("writing {}", hosts.display()))?;
            request.hosts_file = Some(hosts);
        }
    }
    // The launch directory holds every session's temp directory and files: the agent sees its
    // own only (the seventeenth re-attack read another running agent's temp files there).
    if confinement == Confinement::Namespaces
        && let (Ok(launch_dir), Ok(temp)) =
            (std::fs::canonicalize(&env.launch_dir), std::fs::canonicalize(temp_dir.path()))
    {
        let id = &wiring.session_id;
        let own = [format!("{id}-claude-mcp.json"), format!("{id}-pi-gateway.ts"), format!("{id}-aws-config")];
        let mut seen: Vec<PathBuf> = own.iter().map(|name| launch_dir.join(name)).collect();
        seen.push(launch_dir.join(format!("trust-{id}.pem")));
        seen.push(temp);
        request.covers.push(confine::Cover { dir: launch_dir.clone(), seen, links: Vec::new() });
        // The user's runtime directories whole, and the terminal multiplexers' socket directories:
        // a socket made there after the launch (a tmux server started or restarted during the
        // session, podman's, a new bus) was on no list read at launch, and led out of the
        // containment (`network::session_socket_directories`). The agent sees only the launch
        // directory there, and what it may write.
        if request.network.is_some() {
            for runtime in network::runtime_directories(&env) {
                if request.writable.iter().any(|root| runtime.starts_with(root)) {
                    continue;
                }
                let inside: Vec<&PathBuf> = std::iter::once(&launch_dir)
                    .chain(&request.writable)
                    .filter(|path| path.starts_with(&runtime) && **path != runtime)
                    .collect();
                // None inside another (a cover keeps each once; the clone carries what is below).
                let seen: Vec<PathBuf> = inside
                    .iter()
                    .filter(|path| !inside.iter().any(|other| path.starts_with(other) && other != *path))
                    .map(|path| (*path).clone())
                    .collect();
                request.covers.push(confine::Cover { dir: runtime, seen, links: Vec::new() });
            }
            let sockets = network::session_socket_directories(&env);
            request.masks.extend(
                sockets
                    .into_iter()
                    .filter(|dir| !request.writable.iter().any(|root| dir.starts_with(root) || root.starts_with(dir))),
            );
        }
    }
    let handover = request.network.map(|_| NetworkHandover {
        session_id: wiring.session_id.clone(),
        token: client.token().expose().to_string(),
        allow_private: options.allow_private.clone(),
        approval_hold_seconds: Some(options.approval_hold),
        allow_tcp: forwards.iter().map(|forward| forward.destination.clone()).collect(),
    });
    let hosts_file = request.hosts_file.clone();
    let helper_pid = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
    let containment = (confinement == Confinement::Namespaces).then_some(Contained {
        request,
        withheld: withheld_credentials,
        temp_dir: temp_dir.path(),
        traces_parent: agent_traces.as_deref(),
        handover: handover.map(|handover| (handover, home.agent_network_socket())),
        helper_pid: &helper_pid,
    });
    let quarantine = home.quarantine_dir().join(&wiring.session_id);
    let strays_at_launch = git::strays_in(&existing_git_dirs).found;
    // And each repository's list of the object directories it borrows (`info/alternates`), to
    // put back as it was: git reads objects and a commit graph from each as the repository's own
    // (the fifty-second re-attack's G1, the fifty-fourth's Z4), and an agent needs none.
    let alternates_at_launch: Vec<(PathBuf, Option<Vec<u8>>)> = {
        let mut files: Vec<PathBuf> = existing_git_dirs.iter().map(|dir| git::alternates_file(dir)).collect();
        files.sort();
        files.dedup();
        // (One that is not a small regular file at launch is the user's to keep as it is.)
        files.into_iter().filter_map(|file| Some((file.clone(), planted::file_as_it_is(&file).ok()?))).collect()
    };
    // What in a rebase's todo list and a `.tool-versions` runs something, at launch (F9, F12).
    let todo = |git_dir: &PathBuf| git_dir.join(git::REBASE_TODO);
    let rebase_commands_at_launch: HashMap<PathBuf, Vec<String>> = git::with_linked_worktrees(&existing_git_dirs)
        .into_iter()
        .map(|dir| {
            let commands = planted::lines_that_run(&todo(&dir), git::runs_a_command);
            (dir, commands)
        })
        .collect();
    // And the repository's own ignore patterns (L8) and attributes (A1).
    let patterns_at_launch: HashMap<PathBuf, Vec<String>> = existing_git_dirs
        .iter()
        .flat_map(|dir| [git::info_exclude(dir), git::info_attributes(dir)])
        .map(|file| {
            let lines = planted::lines_that_run(&file, git::is_a_pattern);
            (file, lines)
        })
        .collect();
    // And the lines of each `.gitignore` there that hide it (the user's own stay: the fiftieth
    // re-attack's E1 added `*` to an uncommitted one the user had).
    let self_hiding_at_launch: HashMap<PathBuf, Vec<String>> = ignore_files_at_launch
        .iter()
        .map(|file| (file.clone(), planted::lines_that_run(file, git::hides_a_gitignore)))
        .collect();
    // Every `.tool-versions` below the workspace (mise and asdf read the one of the directory the
    // user is in and those above it: the thirty-fifth re-attack's G7).
    let tool_version_scopes = allow_list::version_scopes(&workspace_dirs, &renamed_version_files);
    // (Those there at launch were found in the launch's walk for the trusted files.)
    let local_tools_at_launch: HashMap<PathBuf, Vec<String>> = version_files_at_launch
        .into_iter()
        .map(|file| {
            let lines = planted::local_tools(&file);
            (file, lines)
        })
        .collect();
    let indexes_at_launch = hidden_changes::IndexSnapshot::take(&worktrees, &bound_read_only)
        .with_trusted(trusted_scopes.clone())
        .with_git_dirs(&existing_git_dirs)
        .with_history(home.root().join(SESSION_OBJECTS));
    // And the patterns and bytes of each `.gitignore` no index tracks (its changes show nowhere:
    // the fifty-first re-attack's Y4, Y5), to take out what the agent adds and put back what it
    // takes out.
    let untracked_ignores_at_launch: HashMap<PathBuf, (Vec<String>, Option<Vec<u8>>)> = ignore_files_at_launch
        .iter()
        .filter(|file| !indexes_at_launch.tracked_at_launch(file))
        .map(|file| {
            let bytes = planted::file_as_it_is(file).ok().flatten();
            (file.clone(), (planted::lines_that_run(file, git::is_a_pattern), bytes))
        })
        .collect();
    let plant_watch = planted::PlantWatch::start(watched, kept_links.clone(), quarantine.clone());
    // What the launcher binds again if a tool of the user's replaces it while the agent runs (W1).
    let bind_watch = std::env::current_exe().ok().filter(|_| confinement == Confinement::Namespaces).map(|helper| {
        let pid = helper_pid.clone();
        planted::BindWatch::start(bound_read_only.clone(), withheld_watch, helper, pid, quarantine.clone())
    });
    let terminal_at_launch = TerminalAtLaunch::now();
    let outcome = launch_session(agent, &program, &wiring, &env, &options.agent_args, containment, &placeholders).await;
    // Before anything is written, and before the look: the agent shared the terminal's open
    // descriptions and could leave a write to it failing or blocking (the thirteenth re-attack).
    terminal_at_launch.restore();
    let taken_out = match bind_watch {
        Some(bind_watch) => bind_watch.finish().await,
        None => Vec::new(),
    };
    let mut quarantined = plant_watch.finish().await;
    if let Some(record) = link_record {
        record.remove();
    }
    let repositories::Look { created, unread, newly_entered, incomplete } = checkouts.look();
    // A repository the agent made that the user's git enters unasked (a submodule of one the user
    // had, a bare lookalike) has what in it would run moved aside too — never a git directory
    // there at launch, nor anything the agent could not write (the sixth re-attack: a `.git` link
    // to the user's own `.git` had the user's config and hooks moved).
    let mut looked = HashMap::new();
    // Every one, not only those git enters now: a `git add -A` at the root makes git enter any
    // of them (the seventh re-attack). What `git init` and `git clone` write stays (`git::inert`).
    for made in &created {
        let armed: Option<Vec<PathBuf>> =
            git::armed_files(&made.path, &writable_paths, &existing_git_dirs).map(|files| {
                files.into_iter().filter(|file| !bound_read_only.iter().any(|bound| file.starts_with(bound))).collect()
            });
        looked.insert(made.path.clone(), armed.is_some());
        planted::move_all(&armed.unwrap_or_default(), &[], &quarantine, &mut quarantined);
    }
    // Links and special files the agent left in the git directories there at launch (after the
    // look above, which reads their indexes as the agent left them) and in those of the
    // repositories it made (the thirteenth re-attack: the warning said what would run had been
    // moved, and a reflog link there still wrote to ~/.bashrc): the user's own git would write
    // through them (the twelfth re-attack). Those there at launch, and the kept ones, stay.
    let kept: std::collections::HashSet<&PathBuf> = kept_links.iter().map(|(link, _)| link).collect();
    let made_git_dirs: Vec<PathBuf> = created
        .iter()
        .filter_map(|made| git::git_dir(&made.path))
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter(|dir| writable_paths.iter().any(|root| dir.starts_with(root)) && !existing_git_dirs.contains(dir))
        .collect();
    let strays = git::strays_in(&existing_git_dirs.iter().chain(&made_git_dirs).cloned().collect::<Vec<_>>());
    let mut left: Vec<PathBuf> =
        strays.found.into_iter().filter(|stray| !strays_at_launch.contains(stray) && !kept.contains(stray)).collect();
    left.sort();
    planted::move_all(&left, &[], &quarantine, &mut quarantined);
    for (file, at_launch) in &alternates_at_launch {
        if let Some(taken) = planted::put_back_whole(file, at_launch.as_deref(), &quarantine) {
            log_line!(
                "aileron: warning: {} changed {}, which has git read objects from other directories as the \
                 repository's own (a commit graph there gives your commits other content in `git status` and `git \
                 log`): put back as it was at launch; {}\nhint: run `git fsck` there",
                agent.name(),
                shown(file),
                taken.agents_version_kept()
            );
        }
    }
    // A project file the user's gdb, vim, lldb or direnv runs unasked, made anywhere below where
    // their settings trust it while the agent ran (the thirty-fifth re-attack's G3).
    // And each `.tool-versions` below the workspace: one walk for both.
    // And each `.gitignore`, for those the agent made.
    let ignore_scopes = allow_list::ignore_scopes(&workspace_dirs);
    // And compiled Python (Q9).
    let python_scopes = allow_list::compiled_python_scopes(&workspace_dirs);
    let sets = [&trusted_scopes, &tool_version_scopes, &ignore_scopes, &python_scopes].map(Vec::as_slice);
    // The `.gitignore` files (the third set) are looked for in the directories the walk skips by
    // name too, as at launch.
    let mut skipped = allow_list::SkippedLookedAt {
        set: 2,
        since: Some(indexes_at_launch.launched()),
        ignored_at_launch: &ignored_skipped_at_launch,
        ignored: Vec::new(),
        git_entries: Vec::new(),
    };
    let mut walked = allow_list::trusted_files_of_sets(&sets, Some(&mut skipped)).into_iter();
    let ((made_trusted, cut_short), (tool_versions, versions_cut_short)) =
        (walked.next().unwrap_or_default(), walked.next().unwrap_or_default());
    let (ignore_files, ignores_cut_short) = walked.next().unwrap_or_default();
    // A `.git` made anywhere the walks go, in any case: git shows nothing below it (D2, and the
    // fifty-first re-attack's Y2, Y3, Y6). One of a repository the agent made is said with it.
    let made_git_entries: Vec<&PathBuf> = skipped
        .git_entries
        .iter()
        .filter(|entry| !git_entries_at_launch.contains(entry))
        .filter(|entry| !created.iter().any(|made| entry.parent() == Some(made.path.as_path())))
        .collect();
    for entry in made_git_entries.iter().take(MAX_WARNINGS_EACH) {
        log_line!(
            "aileron: warning: {} made {}: git shows nothing below a `.git`, so what is there (a test file, a \
             module) is hidden from `git status`\nhint: look at it (`ls -la {}`) and remove it unless it is a \
             repository you asked for",
            agent.name(),
            shown(entry),
            shown(entry)
        );
    }
    // (One in a directory the project's own `.gitignore` files ignore hides nothing the user's
    // choice did not: `.pytest_cache/.gitignore`, which `pytest` writes, where the project ignores
    // `.pytest_cache/`.)
    let ignored_by_the_project = |file: &PathBuf| {
        let launched = indexes_at_launch.launched();
        let dir = file.parent().unwrap_or(file);
        workspace_dirs.iter().any(|root| git::surely_ignored(root, dir, launched))
    };
    let (old_ignore_files, made_ignore_files): (Vec<PathBuf>, Vec<PathBuf>) = ignore_files
        .into_iter()
        .filter(|file| !ignored_by_the_project(file))
        .partition(|file| ignore_files_at_launch.contains(file));
    // Compiled Python written in the session: Python runs a forged one in place of its source
    // (the forty-fourth re-attack's Q9). Those in `__pycache__` removed (compiled again at the
    // next import), one with no source moved aside.
    let (compiled, compiled_cut_short) = walked.next().unwrap_or_default();
    let (compiled_removed, sourceless) = indexes_at_launch.compiled_python(&compiled);
    planted::move_all(&sourceless, &[], &quarantine, &mut quarantined);
    if compiled_removed > 0 {
        log_line!(
            "aileron: note: {compiled_removed} compiled Python file(s) written in `__pycache__` while {} ran were \
             removed: Python runs one in place of its source when its header names the source's time and size, \
             which a forged one can; Python compiles them again at the next import",
            agent.name()
        );
    }
    let made_trusted: Vec<PathBuf> =
        made_trusted.into_iter().filter(|file| !trusted_at_launch.contains(file)).collect();
    planted::move_all(&made_trusted, &[], &quarantine, &mut quarantined);
    // Said where the look went through everything at launch: the agent made it too large (the
    // thirty-sixth re-attack's H11). A tree already too large then is not said at every exit.
    let mut grown: Vec<&PathBuf> = cut_short
        .iter()
        .chain(&versions_cut_short)
        .chain(&ignores_cut_short)
        .chain(&compiled_cut_short)
        .filter(|scope| !cut_short_at_launch.contains(scope))
        .collect();
    grown.sort();
    grown.dedup();
    for scope in grown.into_iter().take(MAX_WARNINGS_EACH) {
        log_line!(
            "aileron: warning: {} holds more than {} entries, so not all of it was looked through for the project \
             files your tools run by themselves (`.envrc`, `.exrc`, `.gdbinit` and gdb's `*-gdb.py`, `.lldbinit`, \
             mise's configs, `.tool-versions` with a `path:`, a `.gitignore` that hides itself, a `.git`, below \
             which git lists nothing, compiled Python in `__pycache__`): one {} made there would run at your next use \
             of the tool, or hide from `git status`\n\
             hint: look with `find {} \\( -name '.envrc' -o -name '.exrc' -o -name '.gdbinit' -o -name '*-gdb.*' -o \
             -name '.lldbinit' -o -name '*mise*.toml' -o -name '.tool-versions' -o -name .gitignore -o -iname .git -o \
             -name '*.pyc' \\)` before you use those tools there (`find … -name '*.pyc' -delete` is safe: Python compiles \
             them again)",
            shown(scope),
            allow_list::TRUSTED_WALK_BUDGET,
            agent.name(),
            shown(scope)
        );
    }
    // A rebase or cherry-pick left in progress whose merge strategy is a path: git runs
    // `git-merge-<strategy>`, and a name with a `/` is a program of the workspace's (the
    // thirty-sixth re-attack's H19: `strategy` = `../../scripts/x.sh` beside a `git-merge-..`
    // directory, run by the user's `git rebase --continue`). Moved aside: git goes on with its own.
    // (Those of the linked worktrees too: N7.)
    let state_dirs = git::with_linked_worktrees(existing_git_dirs.iter().chain(&made_git_dirs));
    let strategies: Vec<PathBuf> = state_dirs
        .iter()
        .flat_map(|dir| git::STRATEGY_FILES.iter().map(move |file| dir.join(file)))
        .filter(|file| git::names_a_strategy_path(file))
        .collect();
    planted::move_all(&strategies, &[], &quarantine, &mut quarantined);
    // A `git am` left in progress, and conflict resolutions recorded for rerere, made in the
    // session: git applies them at the user's `am --continue` or next conflicting merge (the
    // fortieth re-attack's L4, L5). Moved aside.
    planted::move_all(&indexes_at_launch.replayed_state(&state_dirs), &[], &quarantine, &mut quarantined);
    for moved in &quarantined {
        log_line!("aileron: warning: {}", moved.report(agent.name()));
    }
    for taken in &taken_out {
        log_line!("aileron: warning: {}", taken.report(agent.name()));
    }
    // Lines the agent added that run a program or hide a change, taken out of each file they are
    // in ([`planted::AddedLines`]).
    let known = |at_launch: &HashMap<PathBuf, Vec<String>>, key: &Path| at_launch.get(key).cloned().unwrap_or_default();
    let todos: Vec<(PathBuf, Vec<String>)> =
        state_dirs.iter().map(|dir| (todo(dir), known(&rebase_commands_at_launch, dir))).collect();
    let of_git_dirs = |file: fn(&Path) -> PathBuf| {
        let mut files: Vec<PathBuf> = existing_git_dirs.iter().chain(&made_git_dirs).map(|dir| file(dir)).collect();
        files.sort();
        files.dedup();
        files.into_iter().map(|file| (file.clone(), known(&patterns_at_launch, &file))).collect()
    };
    let (untracked_ignore_files, tracked_ignore_files): (Vec<PathBuf>, Vec<PathBuf>) =
        old_ignore_files.into_iter().partition(|file| untracked_ignores_at_launch.contains_key(file));
    let take_outs = [
        (planted::AddedLines::RebaseSteps, todos),
        (planted::AddedLines::IgnorePatterns, of_git_dirs(git::info_exclude)),
        (planted::AddedLines::Attributes, of_git_dirs(git::info_attributes)),
        (
            planted::AddedLines::SelfHidingIgnore,
            made_ignore_files.iter().map(|file| (file.clone(), Vec::new())).collect(),
        ),
        (
            planted::AddedLines::SelfHidingLines,
            tracked_ignore_files.iter().map(|file| (file.clone(), known(&self_hiding_at_launch, file))).collect(),
        ),
        (
            planted::AddedLines::UntrackedIgnore,
            untracked_ignore_files
                .iter()
                .map(|file| (file.clone(), untracked_ignores_at_launch[file].0.clone()))
                .collect(),
        ),
        (
            planted::AddedLines::LocalTools,
            tool_versions.iter().map(|file| (file.clone(), known(&local_tools_at_launch, file))).collect(),
        ),
    ];
    let mut lines_taken_out = Vec::new();
    for (kind, files) in take_outs {
        for (n, (file, known)) in files.iter().enumerate() {
            let at_launch = untracked_ignores_at_launch.get(file).and_then(|(_, bytes)| bytes.as_deref());
            if let Some(taken) = kind.take_out(file, known, at_launch, &quarantine, n) {
                log_line!("aileron: warning: {}", kind.told(agent.name(), &taken));
                lines_taken_out.push(taken.file);
            }
        }
    }
    for git_dir in strays.incomplete.iter().take(MAX_WARNINGS_EACH) {
        log_line!(
            "aileron: warning: {} holds too many entries to look through them all for links or special files the \
             agent left (your git could write through one: a reflog linked to ~/.bashrc), or test files (`npm test` \
             runs a `*.test.js` there)\nhint: before you run git or your tests there, look: find {} ! -type f ! -type \
             d -print -o -type f \\( {} \\) -print",
            shown(git_dir),
            shown(git_dir),
            git::runner_code_find()
        );
    }
    // Changes the agent hid from `git status` in the repositories there at launch (the twelfth
    // re-attack: a tracked file a hook runs, changed and marked `--skip-worktree`).
    let hidden = indexes_at_launch.hidden();
    if !hidden.files.is_empty() {
        log_line!(
            "aileron: warning: {} changed {} tracked file(s) and hid the change from `git status` and `git diff` \
             (marked --skip-worktree or --assume-unchanged, or recorded in the index as unchanged): {}; a hook or \
             build that runs them runs the agent's version\nhint: run `git update-index --no-skip-worktree \
             --no-assume-unchanged -- <file>` and `git update-index --really-refresh` there, then look at `git diff`",
            agent.name(),
            hidden.files.len(),
            some_of(&hidden.files)
        );
    }
    if !hidden.staged.is_empty() {
        log_line!(
            "aileron: warning: {} staged or committed another version of {} file(s) it could not write or make (in \
             the index, or in a commit it made: on a branch, in a stash, in a rebase or merge left in progress, or not named \
             yet): {}; your `git restore`, `git stash pop`, `git checkout`, `git rebase --abort` or `git reset \
             --hard` there could write its version into them\nhint: look at `git status`, `git diff --cached -- \
             <file>`, `git log -p --all -- <file>` and `git stash list` there; put an entry back with `git restore \
             --staged -- <file>`, and drop what holds the agent's version before you run any of those",
            agent.name(),
            hidden.staged.len(),
            some_of(&hidden.staged)
        );
    }
    // An object file of git's that does not hold what its name says, rewritten in the session
    // (the thirty-ninth re-attack's K1: the user's blob of a hook, for the user's next checkout
    // to write): moved aside, and said.
    if !hidden.forged_objects.is_empty() {
        let mut moved = Vec::new();
        planted::move_all(&hidden.forged_objects, &[], &quarantine, &mut moved);
        log_line!(
            "aileron: warning: {} rewrote {} object file(s) of git's so that they no longer hold what their names \
             say, the first {}: git takes such a file for what its name says, and your next checkout would have \
             written the agent's content; moved to {} (git will call those objects missing)\nhint: run `git fsck` \
             there; get the objects back from a remote (`git fetch`) or a backup",
            agent.name(),
            hidden.forged_objects.len(),
            shown(&hidden.forged_objects[0]),
            shown(&quarantine)
        );
    }
    // A pack of git's objects written in the session whose index names an object for other
    // content (the fifty-second re-attack's F2): git shows and checks out what the pack holds.
    // Moved aside, and said.
    if !hidden.forged_packs.is_empty() {
        let mut moved = Vec::new();
        planted::move_all(&hidden.forged_packs, &[], &quarantine, &mut moved);
        log_line!(
            "aileron: warning: {} wrote a pack of git's objects whose index names objects for other content than \
             the pack holds, or a multi-pack index ({} file(s), the first {}): git takes what the pack holds for what \
             the name says, so `git log -p` and `git show` showed other content than was committed, and your next \
             checkout would write it; moved to {} (git may call some objects missing)\nhint: run `git fsck` there; \
             get missing objects back from a remote (`git fetch`) or a backup",
            agent.name(),
            hidden.forged_packs.len(),
            shown(&hidden.forged_packs[0]),
            shown(&quarantine)
        );
    }
    for index in hidden.packs_unchecked.iter().take(MAX_WARNINGS_EACH) {
        log_line!(
            "aileron: warning: {} wrote a pack of git's objects too large to check here, {}: if its index names \
             objects for other content than the pack holds, `git log -p` and `git show` show that content in place of \
             what was committed\nhint: run `git verify-pack -v {}` there before you trust `git log -p` or check \
             anything out (it computes every object's name and the pack's checksum); if it fails, move the pack and \
             its index out of `objects/pack` and run `git fsck`",
            agent.name(),
            shown(index),
            index.display()
        );
    }
    if hidden.packs_unchecked.len() > MAX_WARNINGS_EACH {
        log_line!(
            "aileron: warning: and {} more packs were not checked",
            hidden.packs_unchecked.len() - MAX_WARNINGS_EACH
        );
    }
    let untrue_trees = indexes_at_launch.drop_caches();
    for trees in &untrue_trees {
        match (&trees.dropped, trees.forged.is_empty()) {
            (Ok(()), _) => log_line!(
                "aileron: warning: {} wrote into {} cached trees that are not what its entries make (of {}): `git \
                 status` showed nothing, and your next `git commit` there would have committed the agent's trees; the \
                 cache was dropped (git makes it again from the entries)\nhint: if you committed there while the agent \
                 ran, look at `git show --stat HEAD`",
                agent.name(),
                shown(&trees.index),
                some_of(&trees.forged)
            ),
            (Err(error), forged) => log_line!(
                "aileron: warning: {} changed {}{}, and the caches git keeps in it (its cached trees, its untracked \
                 files) could not be dropped ({error}): forged, they change what your next `git status` shows and \
                 `git commit` takes\nhint: remove {}.lock if no git runs there, then run `git reset -q` (it unstages \
                 what is staged; your files keep their changes) and `git update-index --no-untracked-cache` there \
                 before you commit",
                agent.name(),
                shown(&trees.index),
                if forged {
                    String::new()
                } else {
                    format!(", whose cached trees are not what its entries make (of {})", some_of(&trees.forged))
                },
                shown(&trees.index)
            ),
        }
    }
    if !hidden.versions_unchecked.is_empty() {
        log_line!(
            "aileron: warning: what git holds of {} file(s) {} could not write could not be looked at (objects \
             packed or moved in the session, or too many), the first {}: a version of the agent's in a commit it \
             made would be written by your `git restore`, `git stash pop`, `git checkout` or `git rebase --abort` \
             there, and a pack it wrote can give an object other content than its name says, which `git log -p` and \
             `git show` then show in place of what is checked out\nhint: run `git fsck` there first (it checks \
             that every object holds what its name says), then look at `git log -p --all -- <file>`, `git stash \
             list` and `git status` before you run any of those",
            hidden.versions_unchecked.len(),
            agent.name(),
            shown(&hidden.versions_unchecked[0])
        );
    }
    for packed in &hidden.replacements {
        log_line!(
            "aileron: warning: {} wrote replace refs into {} (or moved a ref one of yours points at): git shows, \
             checks out and commits the objects they name in place of your history, and `git status`, `diff` and \
             `log` look clean\nhint: list them with `git for-each-ref refs/replace` (`git symbolic-ref <name>` tells \
             where a symbolic one points) and remove each with `git replace -d <object>` before you run anything there",
            agent.name(),
            shown(packed)
        );
    }
    for (stack, why) in &hidden.refs_unread {
        log_line!(
            "aileron: warning: the refs in {} could not be read as git reads them ({why}): a replace ref {} wrote there \
             would make git show, check out and commit the objects it names in place of your history, and `git \
             status`, `diff` and `log` would look clean\nhint: list them with `git for-each-ref refs/replace` and \
             remove each with `git replace -d <object>` before you run anything there",
            shown(stack),
            agent.name()
        );
    }
    if !hidden.unchecked.is_empty() {
        log_line!(
            "aileron: warning: {} file(s) or index(es) changed in the session could not be checked for changes hidden \
             from `git status` (too many, too large or unreadable), the first {}\nhint: look at `git ls-files -v | \
             grep -v '^H'` there, and run `git update-index --really-refresh` before you commit",
            hidden.unchecked.len(),
            shown(&hidden.unchecked[0])
        );
    }
    for index in unread.iter().take(MAX_WARNINGS_EACH) {
        log_line!(
            "aileron: warning: {} is too large to read (alone, or after the other indexes), so the submodules it \
             records were not checked\nhint: look at `git ls-files -s | grep ^160000` there before you run git",
            shown(index)
        );
    }
    if unread.len() > MAX_WARNINGS_EACH {
        log_line!("aileron: warning: and {} more indexes were not read", unread.len() - MAX_WARNINGS_EACH);
    }
    for repository in &created {
        let path = &repository.path;
        let entered = match (repository.entered, looked.get(path)) {
            (true, Some(true)) => " (git enters it unasked: what in it would run was moved aside)",
            (true, _) => " (git enters it unasked, and its git directory could not be looked in: nothing was moved)",
            (false, Some(true)) => " (what in it would run was moved aside)",
            (false, _) => " (its git directory could not be looked in: nothing was moved)",
        };
        log_line!(
            "aileron: warning: {} created a repository at {}{entered}: its hooks and config are the agent's, and git \
             runs them as you\nhint: look at {} (and `git config --list --local`) before you run git there",
            agent.name(),
            shown(path),
            // The git directory itself (a bare lookalike's is the checkout, a `.git` file names one).
            shown(&git::git_dir(path).unwrap_or_else(|| path.join(".git")))
        );
    }
    for root in &incomplete {
        log_line!(
            "aileron: warning: {} holds too many directories to search them all for repositories the agent made: a \
             repository it hid among them would run its config and hooks as you\nhint: before you run git there, look \
             for new ones: find {} \\( -name HEAD -o -iname .git \\) -newer {}",
            shown(root),
            shown(root),
            shown(&root.join(".git"))
        );
    }
    for path in &newly_entered {
        log_line!(
            "aileron: warning: {} recorded {} as a submodule: git now enters it unasked and runs what its hooks and \
             config name as you\nhint: look at `git config --list --local` and the hooks there before you run git in \
             the repository above it",
            agent.name(),
            shown(path)
        );
    }
    if let Some(hosts) = hosts_file {
        let _ = std::fs::remove_file(hosts);
    }
    if let (Some(parent), Some(traces)) = (&agent_traces, home.traces_dir()) {
        collect_agent_spans(&parent.join("traces"), &traces);
    }
    let exit_code = outcome.as_ref().ok().copied();
    let end_path = format!("/v1/sessions/{}/end", wiring.session_id);
    let quarantined = quarantined.iter().map(|moved| &moved.path).chain(taken_out.iter().map(|taken| &taken.file));
    let quarantined = quarantined.chain(&lines_taken_out);
    let quarantined = quarantined.map(|path| path.display().to_string()).collect();
    let new_repositories = created.iter().map(|made| made.path.display().to_string()).collect();
    let forged_trees = untrue_trees.iter().flat_map(|trees| &trees.forged);
    let hidden_changes =
        hidden.files.iter().chain(&hidden.staged).chain(forged_trees).map(|file| file.display().to_string()).collect();
    let end = EndSession { exit_code, quarantined, new_repositories, hidden_changes };
    if let Err(error) = client.post(&end_path, &serde_json::to_value(end)?).await {
        log_line!("aileron: warning: could not end session {}: {error:#}", wiring.session_id);
    }
    outcome
}

/// A confined launch: the helper's request (masks and the write allow-list) and the agent's
/// private temp directory.
struct Contained<'a> {
    request: confine::Request,
    /// The credential variables withheld from it, besides [`WITHHELD_VARIABLES`].
    withheld: Vec<String>,
    temp_dir: &'a Path,
    /// Where the agent's `aileron-mcp` writes its spans (`AILERON_TRACES_DIR`), when it traces to files.
    traces_parent: Option<&'a Path>,
    /// With an enforced network: what the launcher sends the daemon with the namespace's
    /// listeners, and where.
    handover: Option<(NetworkHandover, PathBuf)>,
    /// Where the confinement helper's pid is stored once it runs (`planted::BindWatch` joins its
    /// namespaces).
    helper_pid: &'a std::sync::atomic::AtomicI32,
}

/// The first [`MAX_WARNINGS_EACH`] of `paths` as the user is shown them, and how many more.
fn some_of(paths: &[PathBuf]) -> String {
    let shown_paths: Vec<String> = paths.iter().take(MAX_WARNINGS_EACH).map(|path| shown(path)).collect();
    match paths.len().saturating_sub(MAX_WARNINGS_EACH) {
        0 => shown_paths.join(", "),
        more => format!("{} and {more} more", shown_paths.join(", ")),
    }
}

/// Where a session's trust bundle is written (outside anything the agent may write).
fn trust_bundle_path(env: &LaunchEnv, session_id: &str) -> PathBuf {
    env.launch_dir.join(format!("trust-{session_id}.pem"))
}

/// Where, in the Aileron home (masked from every agent), the git objects each session made are
/// listed, a file a repository ([`hidden_changes::IndexSnapshot::with_history`]).
const SESSION_OBJECTS: &str = "launch-objects";

/// Host socket files hidden from an agent at most (mounts cost a little each).
const MAX_HIDDEN_SOCKETS: usize = 2048;

/// Says so when the launcher's environment asks for traces the running daemon was not started
/// with: `AILERON_OTEL_*` are read when a process starts, so the daemon's spans follow its own.
async fn warn_when_the_daemon_ignores_tracing(
    client: &DaemonClient,
    wanted: &crate::platform::telemetry::TelemetryConfig,
) {
    let Ok(status) = client.get("/v1/status").await else { return };
    let running = &status["traces"];
    let (enabled, exporter) = (running["enabled"].as_bool().unwrap_or(false), running["exporter"].as_str());
    let wanted_exporter = crate::platform::telemetry::ExporterKind::parse(&wanted.exporter).map(|kind| kind.as_str());
    let differs = if wanted.enabled { !enabled || exporter != wanted_exporter } else { enabled };
    if differs {
        let has = if enabled { format!("traces on ({})", exporter.unwrap_or("?")) } else { "traces off".to_string() };
        let asked = if wanted.enabled {
            format!("traces on ({})", wanted_exporter.unwrap_or("?"))
        } else {
            "traces off".to_string()
        };
        log_line!(
            "aileron: warning: your environment asks for {asked}, but the running daemon was started with {has}; \
             its spans follow its own settings\nhint: `aileron daemon stop`, then launch again: the daemon starts \
             with this environment"
        );
    }
}

/// Of one spans file of the agent's, at most this much is collected.
const MAX_SPANS_BYTES: u64 = 64 * 1024 * 1024;

/// Appends the spans a confined agent's `aileron-mcp` wrote (`<dir>/spans-<date>.jsonl`) to the
/// daily files of the real traces directory, one JSON object a line (anything else the agent may
/// have put there is left out).
fn collect_agent_spans(dir: &Path, traces: &Path) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // A link in the directory's place (to the real traces directory) is not followed.
    if !std::fs::symlink_metadata(dir).is_ok_and(|metadata| metadata.is_dir()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|name| name.starts_with("spans-") && name.ends_with(".jsonl")) else {
            continue;
        };
        // The agent wrote this directory: a link (to another of the user's files) or a FIFO (a
        // read that never ends) in a spans file's place is skipped, not followed.
        let Ok(bytes) = git::read_capped(&entry.path(), false, MAX_SPANS_BYTES) else { continue };
        let text = String::from_utf8_lossy(&bytes);
        let lines: String = text
            .lines()
            .filter(|line| serde_json::from_str::<Value>(line).is_ok_and(|value| value.is_object()))
            .map(|line| format!("{line}\n"))
            .collect();
        if lines.is_empty() {
            continue;
        }
        let appended = crate::platform::home::create_private_dir(traces).and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(traces.join(name))
                .and_then(|mut file| file.write_all(lines.as_bytes()))
        });
        if let Err(error) = appended {
            log_line!("aileron: warning: keeping the agent's spans in {}: {error}", traces.display());
        }
    }
}

/// The AWS config a launched agent's AWS tools read when its AWS keys are sealed (SPEC §15).
const AWS_AGENT_CONFIG: &str = "# Written by `aileron launch` for this session and removed when it ends: your AWS keys stay \
with Aileron,\n# which signs the agent's S3 and STS requests; S3 is addressed path-style, as its operations expect.\n\
[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n";

/// The agent reads Aileron's MCP registration from its own config file; a file inside a
/// directory hidden from it (the Aileron home, a credential store) would leave it without
/// Aileron's tools and nobody told. Refused before anything is written, with where to move it.
fn refuse_registration_in_hidden(agent: Agent, plan: &LaunchPlan, request: &confine::Request) -> anyhow::Result<()> {
    for edit in plan.edits.iter().filter(|edit| !edit.temporary) {
        // The file may not exist yet: its nearest existing ancestor says where it really is.
        let real = edit
            .path
            .ancestors()
            .find_map(|dir| Some(std::fs::canonicalize(dir).ok()?.join(edit.path.strip_prefix(dir).ok()?)))
            .unwrap_or_else(|| edit.path.clone());
        let inside = |dir: &PathBuf| edit.path.starts_with(dir) || real.starts_with(dir);
        let hint = if let Some(dir) = request.masks.iter().find(|dir| inside(dir)) {
            format!(
                "keep {}'s configuration outside {} (Aileron's own, never shown to an agent)",
                agent.name(),
                dir.display()
            )
        } else if let Some(dir) = request.hidden.iter().find(|dir| inside(dir)) {
            format!(
                "keep {}'s configuration outside {}, or launch with --expose {} if the agent may read that credential store",
                agent.name(),
                dir.display(),
                dir.display()
            )
        } else {
            continue;
        };
        bail!(
            "{} would read Aileron's registration from {}, which is hidden from the launched agent: it would start without Aileron's tools\nhint: {hint}",
            agent.name(),
            edit.path.display()
        );
    }
    Ok(())
}

/// What the agent could change of the terminal it shares with the launcher (its standard streams
/// are the launcher's open file descriptions): each stream's status flags and the terminal's
/// settings, as they were when the launch began.
struct TerminalAtLaunch {
    flags: [Option<nix::fcntl::OFlag>; 3],
    settings: Option<nix::sys::termios::Termios>,
}

impl TerminalAtLaunch {
    fn now() -> TerminalAtLaunch {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        use std::os::fd::AsFd as _;
        let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        let flags = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()]
            .map(|fd| fcntl(fd, FcntlArg::F_GETFL).ok().map(OFlag::from_bits_truncate));
        let settings = nix::sys::termios::tcgetattr(stderr.as_fd()).ok();
        TerminalAtLaunch { flags, settings }
    }

    /// Puts the streams and the terminal back as they were, output resumed, before the launcher
    /// speaks: the thirteenth re-attack set its stderr non-blocking and stopped the terminal's
    /// output (`tcflow(TCOOFF)`), the launcher's next write failed, and it ended before its look
    /// at what the agent left. Then the drawing state: `?1049l` first (leaving an alternate
    /// screen puts back what the agent saved on entering it, its colours among them: the
    /// thirteenth re-attack drew the warnings black on black again so), then colours reset and
    /// the cursor shown. Nothing here can fail the launch.
    fn restore(&self) {
        use nix::fcntl::{FcntlArg, fcntl};
        use std::io::Write as _;
        use std::os::fd::AsFd as _;
        let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
        for (fd, flags) in [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()].into_iter().zip(self.flags) {
            if let Some(flags) = flags {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
        }
        if !std::io::IsTerminal::is_terminal(&stderr) {
            return;
        }
        let _ = nix::sys::termios::tcflow(stderr.as_fd(), nix::sys::termios::FlowArg::TCOON);
        if let Some(settings) = &self.settings {
            let _ = nix::sys::termios::tcsetattr(stderr.as_fd(), nix::sys::termios::SetArg::TCSANOW, settings);
        }
        // The alternate screen left, the ASCII character set back in G0 and shifted in (the
        // fifteenth re-attack's `ESC(0` drew every warning in line-drawing glyphs), the colours
        // and palette reset, the cursor shown, line wrapping on, the scroll region the whole
        // screen (saved and restored around it: setting it moves the cursor).
        let _ = stderr.lock().write_all(
            b"\x1b[?1049l\x1b(B\x0f\x1b[0m\x1b]104\x07\x1b]110\x07\x1b]111\x07\x1b[?25h\x1b[?7h\x1b7\x1b[r\x1b8",
        );
    }
}

/// Warnings of one kind printed one by one at the end of a session, at most (the agent could
/// make thousands of the same).
const MAX_WARNINGS_EACH: usize = 20;

/// A path the agent may have chosen (a repository it made, a file it planted), safe to print:
/// every control or invisible character escaped (SPEC §14), so a directory named with terminal
/// escapes cannot wipe or hide the warnings that follow it (the seventh re-attack).
pub(super) fn shown(path: &Path) -> String {
    aileron_core::untrusted_text::visible(&path.to_string_lossy(), usize::MAX)
}

/// A config the launch would change that lies in the agent's own directories, which a launched
/// agent may write, must not be reached through a link below them: the link could be the
/// agent's, to `.git/config` or any file of the user's, and the launcher, which is the user, would
/// write through it (the seventh re-attack: the next launch rewrote the user's `.git/config`, and
/// its backup copy landed where the agent reads). A link above them (`~/.codex` itself linked by
/// a dotfile manager) is the user's: the agent cannot change it. A config that already holds our
/// entry is not written, so a user whose config is a link adds the entry once and is not asked again.
fn refuse_writing_through_agents_links(agent: Agent, env: &LaunchEnv, plan: &LaunchPlan) -> anyhow::Result<()> {
    for edit in plan.edits.iter().filter(|edit| !edit.temporary && edit.changes_anything()) {
        for dir in allow_list::agent_directories(agent, env) {
            let Ok(below) = edit.path.strip_prefix(&dir) else { continue };
            let mut at = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            for component in below.components() {
                at.push(component);
                let Ok(metadata) = std::fs::symlink_metadata(&at) else { break };
                if metadata.is_symlink() {
                    bail!(
                        "{} is reached through a link, {}, inside {}, which a launched {} may write: Aileron does not \
                         write through it (the agent could have made it, pointing at a file of yours)\nhint: if you \
                         made the link, add what `aileron launch {} --dry-run` shows to the file it names, or replace \
                         the link with the file itself, and launch again",
                        edit.path.display(),
                        at.display(),
                        dir.display(),
                        agent.name(),
                        agent.name()
                    );
                }
            }
        }
    }
    Ok(())
}

/// Applies the plan's edits, runs the agent (inside the namespaces when `contained`) and removes
/// the per-launch files.
async fn launch_session(
    agent: Agent,
    program: &Path,
    wiring: &Wiring,
    env: &LaunchEnv,
    agent_args: &[OsString],
    contained: Option<Contained<'_>>,
    placeholders: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let mut plan = plan(agent, wiring, env, agent_args)?;
    if let Some(contained) = &contained {
        // Its temp files go to its private directory, the only temp directory it may write.
        for name in ["TMPDIR", "TMP", "TEMP"] {
            plan.env.push((name.to_string(), contained.temp_dir.display().to_string()));
        }
        if let Some(parent) = contained.traces_parent {
            plan.env.push((env::AILERON_TRACES_DIR.to_string(), parent.display().to_string()));
        }
        if let Some(network) = &contained.request.network {
            plan.env.extend(network::proxy_env(network.proxy_port));
            plan.env.extend(network::trust_env(&trust_bundle_path(env, &wiring.session_id)));
        }
    }
    // Last: a placeholder replaces whatever the user's environment holds under its name.
    plan.env.extend(placeholders.iter().map(|(name, value)| (name.clone(), value.clone())));
    if placeholders.get("AWS_ACCESS_KEY_ID").map(String::as_str)
        == Some(crate::dataplane::agent_egress::AWS_PLACEHOLDER_KEY_ID)
    {
        // The AWS tools sign with placeholder keys: this session's config sends S3 requests
        // path-style, the form operation specs match (a bucket in the host name is not one of
        // their hosts), in the region the bundled spec signs for unless the environment names one.
        let path = env.launch_dir.join(format!("{}-aws-config", wiring.session_id));
        plan.edits.push(ConfigEdit {
            path: path.clone(),
            before: None,
            after: AWS_AGENT_CONFIG.to_string(),
            temporary: true,
        });
        plan.env.push(("AWS_CONFIG_FILE".to_string(), path.display().to_string()));
    }
    if let Some(contained) = &contained {
        refuse_registration_in_hidden(agent, &plan, &contained.request)?;
    }
    refuse_writing_through_agents_links(agent, env, &plan)?;
    let mut temporary = Vec::new();
    for edit in &plan.edits {
        let backup = edit.apply()?;
        if edit.temporary {
            temporary.push(edit.path.clone());
        } else if edit.changes_anything() {
            log_line!("aileron: registered aileron-mcp in {}", edit.path.display());
        }
        if let Some(backup) = backup {
            log_line!("aileron: your original is kept as {}", backup.display());
        }
    }
    for note in &plan.notes {
        log_line!("aileron: note: {note}");
    }
    let status = match contained {
        Some(contained) => {
            let helper_pid = contained.helper_pid;
            // A placeholder set for the session stays: it is what takes the credential's place.
            let withheld: Vec<&str> = WITHHELD_VARIABLES
                .into_iter()
                .chain(
                    contained
                        .withheld
                        .iter()
                        .map(String::as_str)
                        .filter(|name| !plan.env.iter().any(|(set, _)| set == name)),
                )
                .collect();
            log_line!("aileron: session {} started for {} (confined)", wiring.session_id, agent.name());
            let helper = std::env::current_exe().context("locating the aileron executable")?;
            // The helper's lifeline: its read end is passed on (not close-on-exec), the write end
            // stays here alone (close-on-exec) until the agent has exited.
            let (lifeline, _held) =
                nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("making the helper's lifeline")?;
            passed_on(&lifeline).context("passing the helper's lifeline on")?;
            let mut request = confine::Request {
                lifeline: Some(std::os::fd::AsRawFd::as_raw_fd(&lifeline)),
                interrupts_reach_agent: child::terminal_delivers_interrupts(),
                program: program.as_os_str().to_os_string(),
                args: plan.args.clone(),
                ..contained.request
            };
            match contained.handover {
                None => child::run(&helper, &request.arguments(), &plan.env, &withheld, Some(helper_pid)).await,
                Some((handover, socket)) => {
                    let bundle = trust_bundle_path(env, &wiring.session_id);
                    request.trust_bundle = Some(bundle.clone());
                    let (ours, theirs) =
                        std::os::unix::net::UnixStream::pair().context("making the hand-over socket")?;
                    // The helper inherits its end (and closes it before anything else runs).
                    passed_on(&theirs).context("passing the hand-over socket on")?;
                    if let Some(network) = &mut request.network {
                        network.channel = Some(std::os::fd::AsRawFd::as_raw_fd(&theirs));
                    }
                    let written = bundle.clone();
                    let attached =
                        tokio::task::spawn_blocking(move || network::hand_over(&ours, &socket, &handover, &written));
                    let status =
                        child::run(&helper, &request.arguments(), &plan.env, &withheld, Some(helper_pid)).await;
                    // Our copy of the helper's end goes, so a hand-over still waiting sees the end.
                    drop(theirs);
                    match attached.await {
                        Ok(Err(reason)) => log_line!("aileron: cannot give {} its network: {reason}", agent.name()),
                        // The control connection closes here: the daemon closes the session's listeners.
                        Ok(Ok(control)) => drop(control),
                        Err(_) => {}
                    }
                    let _ = std::fs::remove_file(&bundle);
                    status
                }
            }
        }
        None => {
            log_line!("aileron: session {} started for {} (unconfined)", wiring.session_id, agent.name());
            child::run(program, &plan.args, &plan.env, &WITHHELD_VARIABLES, None).await
        }
    };
    for path in temporary {
        let _ = std::fs::remove_file(path);
    }
    status.with_context(|| format!("running {}", program.display()))
}

/// Clears close-on-exec on `fd`, so the helper the launcher runs next inherits it.
fn passed_on(fd: &impl std::os::fd::AsFd) -> nix::Result<libc::c_int> {
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()))
}

fn dry_run_report(plan: &LaunchPlan, program: Option<&Path>, mcp_command: &Path) -> String {
    let mut out = format!("aileron launch {} --dry-run: nothing is written or started\n\n", plan.agent.name());
    let program_text = program.map_or_else(|| plan.agent.program().to_string(), |p| p.display().to_string());
    let args: Vec<String> = plan.args.iter().map(|arg| shell_quote(&arg.to_string_lossy())).collect();
    out.push_str(&format!(
        "would run: {}\n",
        [shell_quote(&program_text)].into_iter().chain(args).collect::<Vec<_>>().join(" ")
    ));
    if program.is_none() {
        out.push_str(&format!(
            "warning: {} is not on PATH (install it: {})\n",
            plan.agent.program(),
            plan.agent.install_hint()
        ));
    }
    if !plan.env.is_empty() {
        out.push_str("with environment:\n");
        for (name, value) in &plan.env {
            out.push_str(&format!("  {name}={value}\n"));
        }
    }
    if !mcp_command.exists() {
        out.push_str(&format!("warning: {} does not exist\n", mcp_command.display()));
    }
    for edit in &plan.edits {
        out.push('\n');
        out.push_str(&edit.render());
    }
    for note in &plan.notes {
        out.push_str(&format!("\nnote: {note}\n"));
    }
    out
}

fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+<>".contains(&b)) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    /// The twenty-third re-attack: the agent left `~/.claude/.git` naming a git directory it made
    /// in its old workspace, whose `commondir` named `~/private/.git`; the next launch kept that
    /// repository. A worktree's git directory that an agent could have written is kept only where
    /// git puts one, inside the repository it belongs to.
    #[test]
    fn a_worktrees_git_directory_an_agent_wrote_keeps_no_other_repository() {
        let temp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(temp.path()).unwrap();
        let git_dir = |dir: &Path| {
            for sub in ["objects", "refs"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        };
        git_dir(&home.join("private/.git"));
        git_dir(&home.join("app/.git"));
        for dir in ["ws/gd", ".claude", "wt", "app/.git/worktrees/wt", "ws2"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        std::fs::write(home.join("ws/gd/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(home.join("ws/gd/gitdir"), format!("{}\n", home.join(".claude/.git").display())).unwrap();
        std::fs::write(home.join("ws/gd/commondir"), format!("{}\n", home.join("private/.git").display())).unwrap();
        std::fs::write(home.join(".claude/.git"), format!("gitdir: {}\n", home.join("ws/gd").display())).unwrap();
        std::fs::write(home.join("app/.git/worktrees/wt/HEAD"), "ref: refs/heads/wt\n").unwrap();
        std::fs::write(home.join("app/.git/worktrees/wt/gitdir"), format!("{}\n", home.join("wt/.git").display()))
            .unwrap();
        std::fs::write(home.join("app/.git/worktrees/wt/commondir"), "../..\n").unwrap();
        std::fs::write(home.join("wt/.git"), format!("gitdir: {}\n", home.join("app/.git/worktrees/wt").display()))
            .unwrap();
        let env = LaunchEnv {
            vars: HashMap::new(),
            home_dir: home.clone(),
            launch_dir: home.join("run"),
            account_home: None,
        };
        let access = allow_list::WriteAccess {
            writable: vec![home.join("ws2"), home.join("wt"), home.join(".claude")],
            worktrees: vec![
                (home.join("ws/gd"), home.join(".claude")),
                (home.join("app/.git/worktrees/wt"), home.join("wt")),
            ],
            ..Default::default()
        };
        // Both the old workspace and the repository were written by agents at earlier launches.
        let recorded = [home.join("ws"), home.join("app")];
        let view = view_of(Agent::Claude, &env, &home, &access, &[], &[], &recorded).unwrap();
        assert!(!view.kept.iter().any(|kept| kept.starts_with(home.join("private"))), "{:?}", view.kept);
        assert!(!view.kept.contains(&home.join("ws/gd")), "{:?}", view.kept);
        assert!(view.kept.contains(&home.join("app/.git")), "the worktree's own repository: {:?}", view.kept);
    }

    #[test]
    fn our_flag_goes_where_options_are_still_parsed() {
        let check =
            |user: &[&str], expected: &[&str]| assert_eq!(with_flag(&os(user), "--f", "v".as_ref()), os(expected));
        check(&[], &["--f", "v"]);
        check(&["fix the bug"], &["fix the bug", "--f", "v"]);
        check(&["-p", "hi", "--", "--literal"], &["-p", "hi", "--f", "v", "--", "--literal"]);
    }

    #[test]
    fn user_base_urls_win_and_are_reported() {
        let env = LaunchEnv {
            vars: [(ANTHROPIC_BASE_URL.to_string(), "https://corp.example/anthropic".to_string())].into(),
            home_dir: "/home/u".into(),
            launch_dir: "/home/u/.aileron/launch".into(),
            account_home: None,
        };
        let wiring = Wiring {
            daemon_url: "http://127.0.0.1:4000".into(),
            token: "t".into(),
            session_id: "ses-1".into(),
            mcp_command: "/opt/aileron-mcp".into(),
        };
        let session_env = wiring.session_env();
        let plan = plan(Agent::Claude, &wiring, &env, &[]).unwrap();
        assert_eq!(plan.env, session_env, "only the session's wiring: {:?}", plan.env);
        assert!(plan.notes[0].contains("ANTHROPIC_BASE_URL is already set"), "{:?}", plan.notes);
        let env = LaunchEnv { vars: HashMap::new(), ..env };
        let plan = super::plan(Agent::Claude, &wiring, &env, &[]).unwrap();
        let gateway = (ANTHROPIC_BASE_URL.to_string(), "http://127.0.0.1:4000".to_string());
        assert_eq!(plan.env, [session_env, vec![gateway]].concat());
    }

    #[test]
    fn shell_quoting() {
        let check = |text: &str, expected: &str| assert_eq!(shell_quote(text), expected);
        check("--mcp-config", "--mcp-config");
        check("fix the bug", "'fix the bug'");
        check("it's", "'it'\\''s'");
        check("", "''");
    }
}
