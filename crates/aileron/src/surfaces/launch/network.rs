//! A confined launch's network and credential stores (SPEC §15), the launcher's half: which
//! ports the daemon serves inside the agent's namespace, the proxy variables the agent gets,
//! what is hidden from it, and the hand-over of the namespace's listeners to the daemon
//! (`surfaces/daemon/session_network.rs` is the other end).

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::wire::{NetworkHandover as Handover, NetworkHandoverAnswer};

/// The egress proxy's port inside the namespace (the API keeps the daemon's own port, so every
/// URL the agent was given before still reads the same).
pub const PROXY_PORT: u16 = 3128;

/// The two ports the daemon serves inside the namespace: the API (`api_port`, the daemon's own)
/// and the proxy.
pub fn ports(api_port: u16) -> (u16, u16) {
    (api_port, if api_port == PROXY_PORT { PROXY_PORT + 1 } else { PROXY_PORT })
}

/// The proxy variables of SPEC §15, upper and lower case (tools read one or the other).
pub fn proxy_env(proxy_port: u16) -> Vec<(String, String)> {
    let proxy = format!("http://127.0.0.1:{proxy_port}");
    let mut env = Vec::new();
    for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
        env.push((name.to_string(), proxy.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.to_string(), "localhost,127.0.0.1,::1".to_string()));
    }
    // Node's `fetch`, `http` and `https` ignore the variables above unless told (Node 22.21 and
    // later; older Node fails at once: no route).
    env.push(("NODE_USE_ENV_PROXY".to_string(), "1".to_string()));
    env
}

/// Most `--allow-tcp` destinations a launch may name.
pub const MAX_TCP_FORWARDS: usize = 8;

/// One `--allow-tcp HOST:PORT`: the destination the daemon dials (resolved on the host), and the
/// loopback address inside the namespace the agent connects to instead. A loopback HOST keeps its
/// own address; a name gets an alias of its own (127.0.0.10, .11, …), mapped in `/etc/hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpForward {
    pub destination: String,
    pub host: String,
    pub inside: std::net::SocketAddrV4,
}

/// Parses the `--allow-tcp` values: `HOST:PORT` each, at most [`MAX_TCP_FORWARDS`], none on the
/// session's own ports.
pub fn tcp_forwards(values: &[String], taken: &[u16]) -> anyhow::Result<Vec<TcpForward>> {
    forwards_of(values, taken)
        .map_err(|problem| anyhow::anyhow!("{problem}\nhint: --allow-tcp takes HOST:PORT, for example github.com:22"))
}

fn forwards_of(values: &[String], taken: &[u16]) -> Result<Vec<TcpForward>, String> {
    if values.len() > MAX_TCP_FORWARDS {
        return Err(format!("at most {MAX_TCP_FORWARDS} --allow-tcp destinations"));
    }
    let mut forwards = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let bad = || format!("--allow-tcp `{value}`: write HOST:PORT (e.g. github.com:22 or 127.0.0.1:5432)");
        let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().ok().filter(|port| *port != 0).ok_or_else(bad)?;
        let host = host.to_ascii_lowercase();
        let valid =
            !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        if !valid {
            return Err(bad());
        }
        let inside = match host.parse::<std::net::Ipv4Addr>() {
            Ok(ip) if ip.is_loopback() => {
                if taken.contains(&port) {
                    return Err(format!("--allow-tcp {value}: port {port} is the session's own inside the namespace"));
                }
                std::net::SocketAddrV4::new(ip, port)
            }
            _ => std::net::SocketAddrV4::new(std::net::Ipv4Addr::new(127, 0, 0, 10 + index as u8), port),
        };
        forwards.push(TcpForward { destination: format!("{host}:{port}"), host, inside });
    }
    Ok(forwards)
}

/// The agent's `/etc/hosts`: each forwarded name at its alias, ahead of the host's own entries.
pub fn hosts_file(forwards: &[TcpForward]) -> String {
    let mut text = String::from("# aileron launch: --allow-tcp names, then this machine's /etc/hosts\n");
    for forward in forwards.iter().filter(|forward| forward.host.parse::<std::net::Ipv4Addr>().is_err()) {
        text.push_str(&format!("{} {}\n", forward.inside.ip(), forward.host));
    }
    text.push_str(&std::fs::read_to_string("/etc/hosts").unwrap_or_default());
    text
}

/// The system certificate bundles the session's trust bundle is mounted over (those that exist).
pub const SYSTEM_BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cacert.pem",
];

/// The variables of SPEC §15 that point each kind of tool at the trust bundle (curl, OpenSSL and
/// Python's `ssl`, Python `requests`, Node, git, the AWS CLI, pip, cargo, Deno; Go reads
/// `SSL_CERT_FILE`).
pub fn trust_env(bundle: &Path) -> Vec<(String, String)> {
    [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
        "AWS_CA_BUNDLE",
        "PIP_CERT",
        "CARGO_HTTP_CAINFO",
        "DENO_CERT",
    ]
    .iter()
    .map(|name| (name.to_string(), bundle.display().to_string()))
    .collect()
}

/// Writes the agent's trust bundle: the roots the user's tools trusted until now (the launcher's
/// `SSL_CERT_FILE`, else the first system bundle) followed by the session CA.
pub fn write_bundle(path: &Path, ca_pem: &str) -> Result<(), String> {
    let roots = crate::platform::env::get(crate::platform::env::SSL_CERT_FILE)
        .filter(|file| !file.is_empty())
        .into_iter()
        .chain(SYSTEM_BUNDLES.iter().map(|file| file.to_string()))
        .find_map(|file| std::fs::read_to_string(file).ok())
        .unwrap_or_default();
    let mut bundle = roots;
    if !bundle.is_empty() && !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str(ca_pem);
    crate::platform::home::write_atomic(path, bundle.as_bytes(), 0o644)
        .map_err(|e| format!("writing the trust bundle {}: {e}", path.display()))
}

/// Variables that hold a credential for a tool or service, withheld from a confined agent like
/// the files of [`credential_stores`] (`--expose-env NAME` keeps one; a placeholder of a bound
/// connector takes its place). The model providers' keys are not among them: the agent needs
/// its own to talk to its model unless the vault holds it (SPEC §15's LLM keys).
pub const CREDENTIAL_VARIABLES: [&str; 32] = [
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "GL_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_AUTH_ACCESS_TOKEN",
    "NPM_TOKEN",
    "NODE_AUTH_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "TWINE_PASSWORD",
    "PYPI_TOKEN",
    "UV_PUBLISH_TOKEN",
    "DOCKER_PASSWORD",
    "DOCKER_AUTH_CONFIG",
    "SLACK_TOKEN",
    "SLACK_BOT_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "VAULT_TOKEN",
    "DIGITALOCEAN_TOKEN",
    "CLOUDFLARE_API_TOKEN",
    "HEROKU_API_KEY",
    "FLY_API_TOKEN",
    "STRIPE_API_KEY",
    "SENTRY_AUTH_TOKEN",
    "PGPASSWORD",
];

/// Variables that name where a tool keeps its credentials (a file, a directory, a `:` list of
/// files; Kerberos's `FILE:`/`DIR:` cache names), read by the launcher so that what they name is
/// hidden too: podman writes its logins to `$XDG_RUNTIME_DIR/containers/auth.json` unless
/// `REGISTRY_AUTH_FILE` says otherwise, and MIT Kerberos its tickets to `/tmp/krb5cc_<uid>` unless
/// `KRB5CCNAME` does (the twelfth re-attack read both).
pub const STORE_VARIABLES: [&str; 19] = [
    "KRB5CCNAME",
    "REGISTRY_AUTH_FILE",
    "DOCKER_CONFIG",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "KUBECONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_CONFIG",
    "NETRC",
    "GH_CONFIG_DIR",
    "HISTFILE",
    "PASSWORD_STORE_DIR",
    "GNUPGHOME",
    // Tools' own directories the home's read list keeps, named elsewhere (the seventeenth
    // re-attack: an XDG `CARGO_HOME`'s `credentials.toml`, a global npm prefix's `etc/npmrc`).
    "CARGO_HOME",
    "NPM_CONFIG_PREFIX",
    "npm_config_prefix",
    "NPM_CONFIG_USERCONFIG",
    "GRADLE_USER_HOME",
    "GEM_HOME",
];

/// The stores the launch's environment names ([`STORE_VARIABLES`]), `$XDG_RUNTIME_DIR`'s podman
/// logins, and MIT Kerberos's default ticket caches (`/tmp/krb5cc_<uid>…`).
fn stores_named_by(env: &super::LaunchEnv, tmp: &Path) -> Vec<PathBuf> {
    let mut named = Vec::new();
    for variable in STORE_VARIABLES {
        let Some(value) = env.var(variable) else { continue };
        let paths: Vec<PathBuf> = match variable {
            // `FILE:/path`, `DIR:/path` (a collection of caches); a `KEYRING:` or `KCM:` cache is
            // not a file (and the agent reaches no keyring).
            "KRB5CCNAME" => match value.split_once(':') {
                Some(("FILE" | "DIR", path)) => vec![PathBuf::from(path)],
                Some(_) => continue,
                None => vec![PathBuf::from(value)],
            },
            "KUBECONFIG" => value.split(':').map(PathBuf::from).collect(),
            "DOCKER_CONFIG" => vec![Path::new(value).join("config.json")],
            "CARGO_HOME" => vec![Path::new(value).join("credentials.toml"), Path::new(value).join("credentials")],
            "NPM_CONFIG_PREFIX" | "npm_config_prefix" => vec![Path::new(value).join("etc/npmrc")],
            "GRADLE_USER_HOME" => vec![Path::new(value).join("gradle.properties")],
            "GEM_HOME" => vec![Path::new(value).join("credentials")],
            _ => vec![PathBuf::from(value)],
        };
        named.extend(paths.into_iter().filter(|path| path.is_absolute()));
    }
    if let Some(runtime) = env.var(super::XDG_RUNTIME_DIR).filter(|dir| Path::new(dir).is_absolute()) {
        named.push(Path::new(runtime).join("containers/auth.json"));
    }
    let prefix = format!("krb5cc_{}", nix::unistd::getuid());
    if let Ok(entries) = std::fs::read_dir(tmp) {
        named.extend(
            entries
                .flatten()
                .filter(|entry| {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix(&prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
                })
                .take(64)
                .map(|entry| entry.path()),
        );
    }
    named
}

/// The user's credential stores of SPEC §15 and the other well-known ones (those that exist):
/// in the home, the config home, and where the launch's environment names them.
pub fn credential_stores(env: &super::LaunchEnv) -> Vec<PathBuf> {
    let (home, config_home) = (env.home_dir.as_path(), env.config_home());
    let in_home = [
        ".aws",
        ".config/gh",
        ".ssh",
        ".netrc",
        ".git-credentials",
        ".docker/config.json",
        ".kube",
        ".npmrc",
        ".pypirc",
        ".config/gcloud",
        ".azure",
        ".terraform.d/credentials.tfrc.json",
        // Beyond SPEC §15's list (the re-attack of 2026-12-05 read each of these).
        ".cargo/credentials.toml",
        ".cargo/credentials",
        ".gnupg",
        ".password-store",
        ".vault-token",
        ".pgpass",
        ".my.cnf",
        ".m2/settings.xml",
        ".m2/settings-security.xml",
        ".gradle/gradle.properties",
        ".gem/credentials",
        ".composer/auth.json",
        ".config/composer/auth.json",
        ".config/rclone",
        ".config/hub",
        ".config/glab-cli",
        ".config/doctl",
        ".config/containers/auth.json",
        ".config/op",
        ".local/share/keyrings",
        ".boto",
        ".s3cfg",
        ".oci",
        ".databrickscfg",
        ".fly",
        // Found readable by the second re-attack of 2026-12-05: commands with tokens in shell
        // histories, browsers' cookie stores, encryption keys and more logins.
        ".bash_history",
        ".zsh_history",
        ".local/share/fish/fish_history",
        ".python_history",
        ".psql_history",
        ".mysql_history",
        ".node_repl_history",
        ".sqlite_history",
        ".mozilla",
        ".config/google-chrome",
        ".config/chromium",
        ".config/BraveSoftware",
        ".config/microsoft-edge",
        ".config/vivaldi",
        ".config/sops",
        ".age",
        ".terraformrc",
        ".wrangler",
        ".config/.wrangler",
        ".config/github-copilot",
        ".gemini",
        ".env",
        // Found readable by the twelfth re-attack: more logins, keys and shell histories.
        ".cache/huggingface/token",
        ".huggingface/token",
        ".pulumi/credentials.json",
        ".yarnrc.yml",
        ".config/pip/pip.conf",
        ".pip/pip.conf",
        ".minikube",
        ".local/share/com.vercel.cli/auth.json",
        ".config/hcloud/cli.toml",
        ".sbt/.credentials",
        ".ivy2/.credentials",
        ".nuget/NuGet/NuGet.Config",
        ".config/NuGet/NuGet.Config",
        ".config/configstore/firebase-tools.json",
        ".netlify/config.json",
        ".config/netlify/config.json",
        ".config/heroku/config.json",
        ".snowsql/config",
        ".dbt/profiles.yml",
        ".config/scw/config.yaml",
        ".zhistory",
        ".histfile",
        ".local/share/atuin",
        ".kaggle/kaggle.json",
        ".config/stripe/config.toml",
        ".sentryclirc",
        ".dockercfg",
        // Found readable by the fifteenth re-attack: keys, mail and chat logins, more CLIs.
        ".docker/key.pem",
        ".docker/cert.pem",
        ".docker/ca.pem",
        ".docker/machine",
        ".docker/contexts",
        ".thunderbird",
        ".pki",
        ".purple",
        ".msmtprc",
        ".fetchmailrc",
        ".wgetrc",
        ".lftp",
        ".vault_pass.txt",
        ".aliyun",
        ".circleci/cli.yml",
        ".cloudflared",
        ".doppler",
        ".mc",
        ".railway",
        ".supabase",
        ".ngrok2",
        ".continue/config.json",
        ".local/share/containers/auth.json",
        ".local/share/kwalletd",
        ".config/Bitwarden CLI",
        ".config/Code/User/globalStorage",
        ".config/JetBrains",
        ".config/Slack",
        ".config/discord",
        ".config/filezilla",
        ".config/gitlab-runner",
        ".config/helm/repositories.yaml",
        ".config/linode-cli",
        ".config/ngrok",
        ".config/openstack",
        ".config/remmina",
        // Found readable by the twenty-third re-attack: uv's plaintext logins, in the kept
        // `~/.local/share/uv`.
        ".local/share/uv/credentials",
    ];
    let mut stores: Vec<PathBuf> = in_home.iter().map(|relative| home.join(relative)).collect();
    stores.push(config_home.join("gh"));
    stores.push(config_home.join("git/credentials"));
    stores.push(home.join(".config/git/credentials"));
    for relative in ["rclone", "hub", "glab-cli", "doctl", "containers/auth.json", "op"] {
        stores.push(config_home.join(relative));
    }
    if let Some(data_home) = env.var(super::allow_list::XDG_DATA_HOME).filter(|dir| Path::new(dir).is_absolute()) {
        stores.push(Path::new(data_home).join("uv/credentials"));
    }
    // zsh's histories where `ZDOTDIR` puts them (its default `HISTFILE` is a shell variable,
    // seldom exported: the twenty-third re-attack read `$ZDOTDIR/.zsh_history`).
    if let Some(zdotdir) = env.var(super::allow_list::ZDOTDIR).filter(|dir| Path::new(dir).is_absolute()) {
        stores.extend([".zsh_history", ".zhistory", ".histfile"].map(|name| Path::new(zdotdir).join(name)));
    }
    stores.extend(stores_named_by(env, Path::new("/tmp")));
    // The global npmrc of every npm prefix the read list keeps (`npm config set -g` writes a
    // publish token there): `~/.npm-global`, each nvm and Volta node.
    stores.push(home.join(".npm-global/etc/npmrc"));
    for versions in [".nvm/versions/node", ".volta/tools/image/node"] {
        if let Ok(entries) = std::fs::read_dir(home.join(versions)) {
            stores.extend(entries.flatten().take(256).map(|entry| entry.path().join("etc/npmrc")));
        }
    }
    // pipx keeps the arguments each package was installed with, a token in an `--index-url`
    // among them, in its venv (kept whole behind `~/.local/bin`: the thirtieth re-attack's B11).
    let pipx_home = env.var(PIPX_HOME).map(PathBuf::from).filter(|dir| dir.is_absolute());
    for venvs in
        [pipx_home.map(|dir| dir.join("venvs")), Some(home.join(".local/share/pipx/venvs"))].into_iter().flatten()
    {
        if let Ok(entries) = std::fs::read_dir(venvs) {
            stores.extend(entries.flatten().take(1024).map(|entry| entry.path().join("pipx_metadata.json")));
        }
    }
    let mut existing: Vec<PathBuf> = stores.into_iter().filter(|path| path.symlink_metadata().is_ok()).collect();
    existing.sort();
    existing.dedup();
    existing
}

/// The credential stores hidden from a confined agent (those `--expose` names excepted) and the
/// ones kept visible.
pub fn hidden_stores(
    agent: super::Agent,
    env: &super::LaunchEnv,
    expose: &[PathBuf],
) -> anyhow::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut exposed = Vec::new();
    for path in expose {
        let absolute = if path.is_absolute() { path.clone() } else { std::env::current_dir()?.join(path) };
        exposed.push(canonical(&absolute));
    }
    // The account's own home's too, when `HOME` is elsewhere: what of it stays in sight (its
    // toolchains) may hold one (`.cargo/credentials.toml`).
    let account = env.account_env().map(|account| credential_stores(&account)).unwrap_or_default();
    let stores = credential_stores(env).into_iter().chain(account).chain(other_agents_logins(agent, env));
    let (kept, mut hidden): (Vec<PathBuf>, Vec<PathBuf>) = stores.partition(|store| {
        let store = canonical(store);
        exposed.iter().any(|exposed| store.starts_with(exposed))
    });
    // A path exposed inside a store directory (`--expose ~/.ssh/known_hosts`): the directory's
    // other entries are hidden instead of all of it, which covered the exposed one too (the
    // seventeenth re-attack: the only way to it was exposing the keys beside it).
    let mut opened = Vec::new();
    hidden.retain(|store| {
        let inside: Vec<&PathBuf> = exposed.iter().filter(|path| path.starts_with(canonical(store))).collect();
        if inside.is_empty() || !canonical(store).is_dir() {
            return true;
        }
        opened.extend(entries_beside(&canonical(store), &inside));
        false
    });
    hidden.extend(opened);
    // Where links in a hidden store directory lead outside it (profile-sync-daemon keeps a
    // browser profile in `$XDG_RUNTIME_DIR/psd`, linked from `~/.mozilla`: the nineteenth
    // re-attack read its cookies there): hidden too.
    let mut led_to = Vec::new();
    for store in hidden.iter().map(|store| canonical(store)).filter(|store| store.is_dir()) {
        led_to.extend(links_leading_out(&store, &store, 2, &mut 1024));
    }
    hidden.extend(led_to.into_iter().filter(|target| !exposed.iter().any(|exposed| target.starts_with(exposed))));
    hidden.sort();
    hidden.dedup();
    Ok((hidden, kept))
}

/// Where the links in `dir` (and its directories, `depth` levels down, at most `budget` entries)
/// lead outside `store`.
fn links_leading_out(store: &Path, dir: &Path, depth: usize, budget: &mut usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_symlink() {
            if let Ok(target) = std::fs::canonicalize(entry.path())
                && !target.starts_with(store)
            {
                out.push(target);
            }
        } else if kind.is_dir() && depth > 0 {
            out.extend(links_leading_out(store, &entry.path(), depth - 1, budget));
        }
    }
    out
}

/// The entries of `dir` (and of its directories on the way to each of `exposed`) other than those
/// on the way to `exposed`: what hides a store directory but for what is exposed in it.
fn entries_beside(dir: &Path, exposed: &[&PathBuf]) -> Vec<PathBuf> {
    let mut beside = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return beside };
    for entry in entries.flatten().take(4096) {
        let path = entry.path();
        let on_the_way: Vec<&PathBuf> = exposed.iter().copied().filter(|exposed| exposed.starts_with(&path)).collect();
        if on_the_way.is_empty() {
            beside.push(path);
        } else if on_the_way.iter().all(|exposed| **exposed != path)
            && entry.file_type().is_ok_and(|kind| kind.is_dir())
        {
            beside.extend(entries_beside(&path, &on_the_way));
        }
    }
    beside
}

/// The credential variables withheld from a confined agent (all of
/// [`CREDENTIAL_VARIABLES`] but those `--expose-env` names), and, of those the user's
/// environment holds, the ones withheld and the ones passed on, as the audit record lists them
/// (`$NAME`).
pub fn withheld_variables(expose_env: &[String]) -> (Vec<&'static str>, Vec<String>, Vec<String>) {
    let (kept, withheld): (Vec<&'static str>, Vec<&'static str>) =
        CREDENTIAL_VARIABLES.into_iter().partition(|name| expose_env.iter().any(|exposed| exposed == name));
    // Whether the user's environment holds each; the values are never read.
    let present = |names: &[&str]| -> Vec<String> {
        names.iter().filter(|name| crate::platform::env::holds_value(name)).map(|name| format!("${name}")).collect()
    };
    let (hidden, exposed) = (present(&withheld), present(&kept));
    (withheld, hidden, exposed)
}

/// The other agents' logins, hidden from the launched one like the credential stores: an agent
/// launched as Pi had read Claude Code's and Codex's (the re-attack of 2026-12-05). Its own stay.
/// Each is looked for in that agent's own directories (`allow_list::agent_directories`, which
/// follow `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, the XDG variables and `PI_CODING_AGENT_DIR`).
pub fn other_agents_logins(agent: super::Agent, env: &super::LaunchEnv) -> Vec<PathBuf> {
    use super::Agent;
    let login = |other: Agent| match other {
        Agent::Claude => ".credentials.json",
        Agent::Codex | Agent::Opencode => "auth.json",
        Agent::Goose => "secrets.yaml",
        Agent::Pi => "agent/auth.json",
    };
    <Agent as clap::ValueEnum>::value_variants()
        .iter()
        .filter(|other| **other != agent)
        .flat_map(|other| {
            super::allow_list::agent_directories(*other, env).into_iter().map(|dir| dir.join(login(*other)))
        })
        .filter(|path| path.symlink_metadata().is_ok())
        .collect()
}

/// The path sockets of the host a program could reach (`/proc/net/unix`, read in the host's
/// network namespace): the agent's new namespace already cuts it off from abstract sockets, but
/// a socket file is reached through the filesystem (the user's ssh-agent, the session bus,
/// docker, the journal's `/dev/log`, a dev server's in the workspace). Also those bound in
/// another network namespace of the user's processes (`unshare -rn`, a sandboxed service: a
/// socket file is reached from any), read from one of its processes' tables, and those bound by
/// a relative name (`nvim --listen nvim.sock`), found where the process holding the socket works
/// (the twenty-ninth re-attack's A5). Those under `except` (the masked directories, hidden whole)
/// are left out; at most `limit`, the rest counted in the second value.
pub fn host_unix_sockets(except: &[PathBuf], limit: usize) -> (Vec<PathBuf>, usize) {
    use std::os::unix::fs::FileTypeExt;
    let processes = user_processes();
    let mut tables: Vec<String> = std::fs::read_to_string("/proc/net/unix").into_iter().collect();
    let own = std::fs::read_link("/proc/self/ns/net").ok();
    let mut namespaces: HashSet<PathBuf> = own.into_iter().collect();
    for pid in &processes {
        if let Ok(namespace) = std::fs::read_link(format!("/proc/{pid}/ns/net"))
            && namespaces.insert(namespace)
        {
            tables.extend(std::fs::read_to_string(format!("/proc/{pid}/net/unix")));
        }
    }
    let bound: Vec<(String, u64)> = tables.iter().flat_map(|table| reachable_sockets(table)).collect();
    let relative: HashMap<u64, &str> =
        bound.iter().filter(|(path, _)| !path.starts_with('/')).map(|(path, inode)| (*inode, path.as_str())).collect();
    let mut paths: Vec<PathBuf> =
        bound.iter().filter(|(path, _)| path.starts_with('/')).map(|(path, _)| path.into()).collect();
    if !relative.is_empty() {
        paths.extend(relative_socket_paths(&processes, &relative));
    }
    let mut sockets: Vec<PathBuf> = paths
        .into_iter()
        .filter(|path| !except.iter().any(|dir| path.starts_with(dir)))
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_socket()))
        .collect();
    sockets.sort();
    sockets.dedup();
    let over = sockets.len().saturating_sub(limit);
    sockets.truncate(limit);
    (sockets, over)
}

/// Processes looked at for other network namespaces and relative sockets, at most, and the
/// descriptors looked at among them.
const MAX_PROCESSES: usize = 4096;
const MAX_DESCRIPTORS: usize = 65_536;

/// The pids of this user's processes (those whose `/proc` entry the user owns), at most
/// [`MAX_PROCESSES`].
fn user_processes() -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let uid = nix::unistd::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok().map(|pid| (pid, entry)))
        .filter(|(_, entry)| entry.metadata().is_ok_and(|metadata| metadata.uid() == uid))
        .map(|(pid, _)| pid)
        .take(MAX_PROCESSES)
        .collect()
}

/// Where each socket bound by a relative name (`relative`: its inode and name) is: the name in the
/// working directory of a process holding it (`/proc/<pid>/fd/*` naming `socket:[<inode>]`).
fn relative_socket_paths(processes: &[u32], relative: &HashMap<u64, &str>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = MAX_DESCRIPTORS;
    for pid in processes {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { continue };
        for fd in fds.flatten() {
            let Some(left) = budget.checked_sub(1) else { return found };
            budget = left;
            let Ok(target) = std::fs::read_link(fd.path()) else { continue };
            let inode = target.to_str().and_then(|text| text.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok());
            if let Some(name) = inode.and_then(|inode: u64| relative.get(&inode))
                && let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd"))
            {
                found.push(cwd.join(name));
            }
        }
    }
    found
}

/// The user's runtime directories that exist, where they really are: `$XDG_RUNTIME_DIR` and
/// `/run/user/<uid>`. The session bus, systemd's and podman's sockets, gpg-agent's, a rootless
/// docker's live there; one made after the launch is on no list read at launch.
pub fn runtime_directories(env: &super::LaunchEnv) -> Vec<PathBuf> {
    let uid = nix::unistd::getuid().as_raw();
    let named = env.var(super::XDG_RUNTIME_DIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let mut dirs: Vec<PathBuf> = named
        .into_iter()
        .chain([PathBuf::from(format!("/run/user/{uid}"))])
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter(|dir| dir.is_dir() && dir.parent().is_some_and(|parent| parent != Path::new("/")))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The shared temp directories: `/tmp`, `/var/tmp` (the thirtieth re-attack's B10 reached a server
/// started there), and `$TMPDIR` where it names another (canonical, each a
/// directory, none inside another). Any program of the user's makes its socket there when it
/// starts, an ssh-agent (`/tmp/ssh-XXXXXX/agent.<pid>`), an emacs server, `tmux -S`: one made
/// during the session was on no list read at launch, and the agent could reach it (the
/// twenty-eighth re-attack's S1). Under the enforced network each is covered, as the home is, by
/// a read list of what the agent needs there (`home_view`).
pub fn temp_directories(env: &super::LaunchEnv) -> Vec<PathBuf> {
    let named = env.var(TMPDIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let mut dirs: Vec<PathBuf> = [PathBuf::from("/tmp"), PathBuf::from("/var/tmp")]
        .into_iter()
        .chain(named)
        .filter_map(|dir| std::fs::canonicalize(dir).ok())
        .filter(|dir| dir.is_dir() && dir.parent().is_some())
        .collect();
    dirs.sort();
    dirs.dedup();
    let outer = dirs.clone();
    dirs.retain(|dir| !outer.iter().any(|other| dir.starts_with(other) && dir != other));
    dirs
}

/// Where pipx keeps its venvs, when set (read by [`credential_stores`]).
pub const PIPX_HOME: &str = "PIPX_HOME";

/// The user's temp directory, when set (read by [`temp_directories`]).
pub const TMPDIR: &str = "TMPDIR";

/// The directories terminal multiplexers make their sockets in, made now when missing (as the
/// program itself makes it: the user's own, mode 0700): `$TMUX_TMPDIR/tmux-<uid>` (`/tmp` when
/// unset), and screen's `$SCREENDIR` and `/run/screen/S-<user>` where they exist. A server the
/// user starts or restarts during the session makes its socket in the directory on the host, out
/// of the agent's sight under the empty tmpfs that covers it in its namespace: through a tmux
/// server started after the launch the twenty-seventh re-attack ran a command as the user,
/// unconfined (a socket hidden at launch by name came back when its server was restarted).
pub fn session_socket_directories(env: &super::LaunchEnv) -> Vec<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::getuid();
    let tmux_parent = env.var(TMUX_TMPDIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
    let tmux = tmux_parent.unwrap_or_else(|| PathBuf::from("/tmp")).join(format!("tmux-{}", uid.as_raw()));
    if tmux.parent().is_some_and(Path::is_dir) {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&tmux);
    }
    let user = nix::unistd::User::from_uid(uid).ok().flatten().map(|user| user.name);
    let screen = user.map(|name| PathBuf::from(format!("/run/screen/S-{name}")));
    let screendir = env.var(SCREENDIR).map(PathBuf::from).filter(|dir| dir.is_absolute());
    [Some(tmux), screen, screendir]
        .into_iter()
        .flatten()
        .filter(|dir| {
            std::fs::symlink_metadata(dir).is_ok_and(|metadata| metadata.is_dir() && metadata.uid() == uid.as_raw())
        })
        .collect()
}

/// Where tmux and screen make their sockets when told (read by [`session_socket_directories`]).
pub const TMUX_TMPDIR: &str = "TMUX_TMPDIR";
pub const SCREENDIR: &str = "SCREENDIR";

/// The paths of `/proc/net/unix` (`Num RefCount Protocol Flags Type St Inode Path`) a program
/// could send to: listening stream and seqpacket sockets (flag `00010000`) and every bound
/// datagram socket (type `0002`, which never listens: the re-attack of 2026-12-05 wrote to
/// `/dev/log` that way). The path is the rest of the line, spaces and all; a socket bound by a
/// relative name cannot be located and is left out.
fn reachable_sockets(table: &str) -> Vec<(String, u64)> {
    const LISTENING: u32 = 0x0001_0000;
    const DATAGRAM: u32 = 2;
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // Seven fields, padded (the inode is `%5lu`), then one space and the path as bound.
            let mut fields = [""; 7];
            let mut rest = line;
            for field in &mut fields {
                rest = rest.trim_start();
                let end = rest.find(' ').unwrap_or(rest.len());
                (*field, rest) = rest.split_at(end);
            }
            let flags = u32::from_str_radix(fields[3], 16).ok()?;
            let kind = u32::from_str_radix(fields[4], 16).ok()?;
            let inode = fields[6].parse().ok()?;
            let path = rest.strip_prefix(' ')?;
            let reachable = flags & LISTENING != 0 || kind == DATAGRAM;
            (reachable && !path.is_empty() && !path.starts_with('@')).then(|| (path.to_string(), inode))
        })
        .collect()
}

/// The launcher's end of the hand-over: waits for the helper's two listeners on `channel`, sends
/// them to the daemon's control socket with the session and the daemon token, writes the trust
/// bundle with the session CA the daemon answers with, and tells the helper whether the daemon
/// serves them (`1`) or not. Returns the control connection, which must stay open for as long as
/// the agent runs (closing it closes the session's listeners).
pub fn hand_over(
    channel: &UnixStream,
    control_socket: &Path,
    handover: &Handover,
    bundle: &Path,
) -> Result<UnixStream, String> {
    let attached = attach(channel, control_socket, handover)
        .and_then(|(control, ca_pem)| write_bundle(bundle, &ca_pem).map(|()| control));
    let answer: &[u8] = if attached.is_ok() { b"1" } else { b"0" };
    let _ = std::io::Write::write_all(&mut &*channel, answer);
    attached
}

fn attach(channel: &UnixStream, control_socket: &Path, handover: &Handover) -> Result<(UnixStream, String), String> {
    let (_, listeners) = crate::platform::confinement::receive_fds(channel)
        .map_err(|e| format!("receiving the namespace's listeners from the helper: {e}"))?;
    if listeners.len() != 2 + handover.allow_tcp.len() {
        return Err("the confinement helper ended before handing over its listeners".to_string());
    }
    let control = UnixStream::connect(control_socket)
        .map_err(|e| format!("reaching the daemon at {}: {e}", control_socket.display()))?;
    control.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let mut message = serde_json::to_vec(handover).map_err(|e| e.to_string())?;
    message.push(b'\n');
    let fds: Vec<_> = listeners.iter().map(AsRawFd::as_raw_fd).collect();
    crate::platform::confinement::send_fds(&control, &message, &fds)
        .map_err(|e| format!("handing the listeners to the daemon: {e}"))?;
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&control), &mut answer)
        .map_err(|e| format!("waiting for the daemon to take the listeners: {e}"))?;
    if answer.trim().is_empty() {
        return Err("the daemon closed the hand-over without an answer (is it older than this aileron?)".to_string());
    }
    let answer: NetworkHandoverAnswer =
        serde_json::from_str(&answer).map_err(|e| format!("reading the daemon's answer to the hand-over: {e}"))?;
    match (answer.ca_certificate, answer.error) {
        (Some(ca_pem), None) => Ok((control, ca_pem)),
        (_, error) => Err(format!(
            "the daemon refused the session's listeners: {}",
            error.unwrap_or_else(|| "no reason given".to_string())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_forwards_keep_loopback_addresses_and_alias_names() {
        let forwards = tcp_forwards(&["GitHub.com:22".into(), "127.0.0.1:5432".into()], &[4000, 3128]).unwrap();
        assert_eq!(forwards[0].destination, "github.com:22");
        assert_eq!(forwards[0].inside.to_string(), "127.0.0.10:22");
        assert_eq!(forwards[1].inside.to_string(), "127.0.0.1:5432");
        assert!(hosts_file(&forwards).starts_with("# aileron launch"));
        assert!(hosts_file(&forwards).contains("127.0.0.10 github.com\n"));
        for bad in ["github.com", "github.com:0", "a b:22", "127.0.0.1:3128", "http://x:1"] {
            assert!(tcp_forwards(&[bad.to_string()], &[4000, 3128]).is_err(), "{bad}");
        }
        assert!(tcp_forwards(&vec!["a:1".to_string(); MAX_TCP_FORWARDS + 1], &[]).is_err());
    }

    #[test]
    fn the_proxy_never_takes_the_api_port() {
        assert_eq!(ports(4000), (4000, PROXY_PORT));
        assert_eq!(ports(PROXY_PORT), (PROXY_PORT, PROXY_PORT + 1));
    }

    #[test]
    fn sockets_a_program_could_send_to_are_found_whatever_their_kind_or_name() {
        let table = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01    20 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 21 /dev/log\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 1234567 /tmp/with two  spaces.sock\n\
            0000000000000000: 00000002 00000000 00010000 0005 01 23 /run/seqpacket.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 24 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 25 relative.sock\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 26 @abstract\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 27\n";
        let found = reachable_sockets(table);
        let expected = [
            ("/run/user/1000/bus", 20),
            ("/dev/log", 21),
            ("/tmp/with two  spaces.sock", 1234567),
            ("/run/seqpacket.sock", 23),
            ("relative.sock", 25),
        ];
        assert_eq!(found, expected.iter().map(|(path, inode)| (path.to_string(), *inode)).collect::<Vec<_>>());
    }

    /// Another agent's login is hidden where that agent keeps it, its own directory variables
    /// followed; the launched agent's own stays.
    #[test]
    fn the_other_agents_logins_are_found_where_each_keeps_them() {
        let home = tempfile::tempdir().unwrap();
        let codex_home = home.path().join("elsewhere/codex");
        for login in [".claude/.credentials.json", "elsewhere/codex/auth.json", ".pi/agent/auth.json"] {
            std::fs::create_dir_all(home.path().join(login).parent().unwrap()).unwrap();
            std::fs::write(home.path().join(login), "{}").unwrap();
        }
        let vars = [("CODEX_HOME".to_string(), codex_home.display().to_string())].into();
        let env = super::super::LaunchEnv {
            vars,
            home_dir: home.path().to_path_buf(),
            launch_dir: PathBuf::new(),
            account_home: None,
        };
        let found = other_agents_logins(super::super::Agent::Pi, &env);
        assert_eq!(found, vec![home.path().join(".claude/.credentials.json"), codex_home.join("auth.json")]);
    }

    /// The twelfth re-attack read the Kerberos tickets `KRB5CCNAME` named and podman's logins in
    /// `$XDG_RUNTIME_DIR`: stores the environment names are hidden too.
    #[test]
    fn stores_the_environment_names_are_found() {
        let temp = tempfile::tempdir().unwrap();
        let tmp = temp.path().join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let uid = nix::unistd::getuid();
        for name in
            [format!("krb5cc_{uid}"), format!("krb5cc_{uid}_sshd"), format!("krb5cc_{uid}9"), "krb5cc_x".to_string()]
        {
            std::fs::write(tmp.join(name), "tickets").unwrap();
        }
        let vars = [
            ("KRB5CCNAME", "FILE:/k/cc"),
            ("KUBECONFIG", "/a/config:relative:/b/config"),
            ("DOCKER_CONFIG", "/d"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
            ("HISTFILE", "/h/.my_history"),
            ("REGISTRY_AUTH_FILE", ""),
        ];
        let env = super::super::LaunchEnv {
            vars: vars.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect(),
            home_dir: temp.path().join("home"),
            launch_dir: temp.path().join("run"),
            account_home: None,
        };
        let mut found = stores_named_by(&env, &tmp);
        found.sort();
        let mut expected: Vec<PathBuf> =
            ["/a/config", "/b/config", "/d/config.json", "/h/.my_history", "/k/cc", "/run/user/7/containers/auth.json"]
                .iter()
                .map(PathBuf::from)
                .chain([tmp.join(format!("krb5cc_{uid}")), tmp.join(format!("krb5cc_{uid}_sshd"))])
                .collect();
        expected.sort();
        assert_eq!(found, expected);
        let keyring = super::super::LaunchEnv {
            vars: [("KRB5CCNAME".to_string(), "KEYRING:persistent:0".to_string())].into(),
            ..env
        };
        assert!(stores_named_by(&keyring, &temp.path().join("none")).is_empty(), "a keyring cache is no file");
    }

    /// The seventeenth re-attack: `--expose ~/.ssh/known_hosts` showed nothing (the store's tmpfs
    /// lay over it), so the only way to it was exposing the keys beside it.
    #[test]
    fn a_path_exposed_inside_a_store_directory_is_seen_and_the_rest_of_it_hidden() {
        let home = tempfile::tempdir().unwrap();
        let home_dir = std::fs::canonicalize(home.path()).unwrap();
        for file in [".ssh/known_hosts", ".ssh/id_ed25519", ".ssh/config.d/work", ".ssh/config.d/private"] {
            std::fs::create_dir_all(home_dir.join(file).parent().unwrap()).unwrap();
            std::fs::write(home_dir.join(file), "x").unwrap();
        }
        let env = super::super::LaunchEnv {
            vars: std::collections::HashMap::new(),
            home_dir: home_dir.clone(),
            launch_dir: PathBuf::new(),
            account_home: None,
        };
        let expose = [home_dir.join(".ssh/known_hosts"), home_dir.join(".ssh/config.d/work")];
        let (mut hidden, kept) = hidden_stores(super::super::Agent::Claude, &env, &expose).unwrap();
        hidden.sort();
        assert_eq!(hidden, [".ssh/config.d/private", ".ssh/id_ed25519"].map(|path| home_dir.join(path)));
        assert!(kept.is_empty(), "{kept:?}");
        // The nineteenth: where a link in a hidden store leads outside it is hidden too.
        let synced = home_dir.join("run/psd/profile");
        std::fs::create_dir_all(&synced).unwrap();
        std::fs::create_dir_all(home_dir.join(".mozilla/firefox")).unwrap();
        std::os::unix::fs::symlink(&synced, home_dir.join(".mozilla/firefox/x.default")).unwrap();
        let (hidden, _) = hidden_stores(super::super::Agent::Claude, &env, &[]).unwrap();
        assert!(hidden.contains(&synced) && hidden.contains(&home_dir.join(".mozilla")), "{hidden:?}");
    }

    /// With `HOME` elsewhere, the stores of the account's own home are hidden too: its toolchains
    /// stay in sight, and a store among them (`.cargo/credentials.toml`) would have with them.
    #[test]
    fn the_stores_of_the_accounts_own_home_are_hidden_when_home_is_elsewhere() {
        let temp = tempfile::tempdir().unwrap();
        let (home_dir, account) = (temp.path().join("home"), temp.path().join("account"));
        for file in [".cargo/credentials.toml", ".aws/credentials"] {
            std::fs::create_dir_all(account.join(file).parent().unwrap()).unwrap();
            std::fs::write(account.join(file), "x").unwrap();
        }
        std::fs::create_dir_all(&home_dir).unwrap();
        let env = super::super::LaunchEnv {
            vars: std::collections::HashMap::new(),
            home_dir,
            launch_dir: PathBuf::new(),
            account_home: Some(account.clone()),
        };
        let (hidden, _) = hidden_stores(super::super::Agent::Claude, &env, &[]).unwrap();
        assert_eq!(hidden, [".aws", ".cargo/credentials.toml"].map(|path| account.join(path)));
    }

    /// The twenty-third re-attack read uv's plaintext logins in the kept `~/.local/share/uv`, and
    /// the history zsh keeps under `ZDOTDIR`.
    #[test]
    fn uvs_logins_and_the_zsh_history_under_zdotdir_are_stores() {
        let temp = tempfile::tempdir().unwrap();
        let home = temp.path().join("home");
        let (data, zsh) = (temp.path().join("data"), temp.path().join("zsh"));
        let pipx = home.join("pipx");
        for file in [
            home.join(".local/share/uv/credentials/credentials.toml"),
            data.join("uv/credentials/credentials.toml"),
            zsh.join(".zsh_history"),
            // The thirtieth re-attack's B11: pipx's record of a package's `--index-url` token.
            home.join(".local/share/pipx/venvs/tool/pipx_metadata.json"),
            pipx.join("venvs/other/pipx_metadata.json"),
        ] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "x").unwrap();
        }
        let vars = [("XDG_DATA_HOME", &data), ("ZDOTDIR", &zsh), ("PIPX_HOME", &pipx)];
        let env = super::super::LaunchEnv {
            vars: vars.iter().map(|(name, path)| (name.to_string(), path.display().to_string())).collect(),
            home_dir: home.clone(),
            launch_dir: PathBuf::new(),
            account_home: None,
        };
        let found = credential_stores(&env);
        for store in [
            home.join(".local/share/uv/credentials"),
            data.join("uv/credentials"),
            zsh.join(".zsh_history"),
            home.join(".local/share/pipx/venvs/tool/pipx_metadata.json"),
            pipx.join("venvs/other/pipx_metadata.json"),
        ] {
            assert!(found.contains(&store), "{store:?}: {found:?}");
        }
    }

    #[test]
    fn existing_credential_stores_are_found_in_the_home_and_the_config_home() {
        let home = tempfile::tempdir().unwrap();
        let config = home.path().join("xdg");
        for dir in [".aws", ".config/gh", "xdg/git", ".mozilla", ".local/share/fish"] {
            std::fs::create_dir_all(home.path().join(dir)).unwrap();
        }
        for file in [".netrc", "xdg/git/credentials", ".bash_history", ".local/share/fish/fish_history", ".env"] {
            std::fs::write(home.path().join(file), "TOKEN=x").unwrap();
        }
        let env = super::super::LaunchEnv {
            vars: [("XDG_CONFIG_HOME".to_string(), config.display().to_string())].into(),
            home_dir: home.path().to_path_buf(),
            launch_dir: home.path().join("run"),
            account_home: None,
        };
        let found = credential_stores(&env);
        let expected: Vec<PathBuf> = [
            ".aws",
            ".bash_history",
            ".config/gh",
            ".env",
            ".local/share/fish/fish_history",
            ".mozilla",
            ".netrc",
            "xdg/git/credentials",
        ]
        .iter()
        .map(|p| home.path().join(p))
        .collect();
        assert_eq!(found, expected);
    }
}
