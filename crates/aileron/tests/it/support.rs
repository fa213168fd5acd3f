//! Test harness: a daemon state in a temporary home driven through `app()` with `oneshot`, real
//! guest modules compiled from `connectors/`, and helpers to write manifests and action files.

use std::sync::Arc;

use aileron::platform::home::Home;
use aileron::stores::bindings::{BindingInfo, CredentialSource, Injection, ResolvedCredential, Secret, TokenRefresher};
use aileron::surfaces::daemon::{AppState, StateOptions, app};
use aileron_core::Failure;
use aileron_core::manifest::CredentialKind;
use axum::body::Body;
use http::{HeaderMap, Request, StatusCode};
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

/// The port the oneshot harness pretends to listen on (only used for Host/Origin checks).
pub const PORT: u16 = 47_123;
pub const TOKEN: &str = "test-admin-token-0123456789abcdef";

pub fn guest_wasm(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("AILERON_GUESTS_DIR")).join(format!("{name}.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("reading guest {}: {e} (build.rs builds connectors/)", path.display()))
}

/// A manifest for a test connector `github://aileron-tests/<name>`.
pub fn manifest(name: &str, hosts: &[String], extra: &str) -> String {
    let hosts = hosts.iter().map(|h| format!("\"{h}\"")).collect::<Vec<_>>().join(", ");
    let network =
        if hosts.is_empty() { String::new() } else { format!("\n[capabilities.network]\nhosts = [{hosts}]\n") };
    format!("[connector]\nname = \"github://aileron-tests/{name}\"\nversion = \"1.0.0\"\n{network}{extra}")
}

pub struct ActionSpec<'a> {
    pub name: &'a str,
    pub connector: &'a str,
    pub hash: &'a str,
    pub capabilities: &'a [&'a str],
    pub op: &'a str,
    /// `(name, type, required)`
    pub inputs: &'a [(&'a str, &'a str, bool)],
    /// Raw TOML lines for `[execute.inputs]` (empty = none).
    pub step_inputs: &'a str,
    pub timeout_seconds: Option<u64>,
    pub approval: bool,
}

impl<'a> ActionSpec<'a> {
    pub fn new(name: &'a str, connector: &'a str, hash: &'a str, op: &'a str) -> ActionSpec<'a> {
        ActionSpec {
            name,
            connector,
            hash,
            capabilities: &[],
            op,
            inputs: &[],
            step_inputs: "",
            timeout_seconds: None,
            approval: false,
        }
    }

    pub fn render(&self) -> String {
        let capabilities = if self.capabilities.is_empty() { vec![self.op] } else { self.capabilities.to_vec() };
        let capabilities = capabilities.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
        let mut text = format!(
            "+++\nname = \"{}\"\nversion = \"1.0.0\"\n\n[[requires.connectors]]\nname = \"github://aileron-tests/{}\"\n\
             version = \"1.0.0\"\nhash = \"{}\"\ncapabilities = [{capabilities}]\n\n[match]\nintent = \"test {}\"\n",
            self.name, self.connector, self.hash, self.name
        );
        for (name, kind, required) in self.inputs {
            text.push_str(&format!(
                "\n[[inputs]]\nname = \"{name}\"\ntype = \"{kind}\"\nrequired = {required}\ndescription = \"the {name}\"\n"
            ));
        }
        text.push_str(&format!(
            "\n[[execute]]\nid = \"main\"\nconnector = \"github://aileron-tests/{}\"\nop = \"{}\"\n",
            self.connector, self.op
        ));
        if let Some(seconds) = self.timeout_seconds {
            text.push_str(&format!("timeout_seconds = {seconds}\n"));
        }
        if !self.step_inputs.is_empty() {
            text.push_str(&format!("[execute.inputs]\n{}\n", self.step_inputs));
        }
        if self.approval {
            text.push_str("\n[approval]\nrequired = true\n");
        }
        text.push_str("+++\n# Test action\n\nAn action used by the test suite.\n");
        text
    }
}

/// The route of the table `method path` reaches, with its declared JSON success status and check.
pub fn declared_answer(method: &str, path: &str) -> Option<(&'static str, u16, fn(&Value) -> Result<(), String>)> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    aileron::surfaces::daemon::api::ROUTES
        .iter()
        .filter(|route| route.method == method)
        .find(|route| {
            let pattern: Vec<&str> = route.path.split('/').collect();
            let rest = pattern.last().is_some_and(|last| last.starts_with("{*"));
            let fixed = if rest { pattern.len() - 1 } else { pattern.len() };
            (if rest { segments.len() > fixed } else { segments.len() == fixed })
                && pattern[..fixed]
                    .iter()
                    .zip(&segments)
                    .all(|(want, have)| want == have || (want.starts_with('{') && !have.is_empty()))
        })
        .and_then(|route| route.answers.as_ref()?.json().map(|(status, conforms)| (route.path, status, conforms)))
}

pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

/// Fields drop in order: the daemon's state (its audit writer's shutdown checkpoint) before the
/// temporary directory it writes in.
pub struct Harness {
    pub home: Home,
    pub state: Arc<AppState>,
    pub router: aileron::surfaces::daemon::Surface,
    pub temp: TempDir,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with_options(|_| {})
    }

    pub fn with_credentials(credentials: Arc<dyn CredentialSource>) -> Harness {
        Harness::with_options(|options| options.credentials = Some(credentials))
    }

    pub fn with_options(tweak: impl FnOnce(&mut StateOptions)) -> Harness {
        let temp = tempfile::tempdir().expect("tempdir");
        let home = Home::at(temp.path().join("home")).expect("home");
        let mut options = StateOptions::new(TOKEN.into());
        options.listen_port = PORT;
        // Spawned programs run through the real `aileron __spawn` helper, with `~/` in the
        // temporary directory.
        options.spawn_helper = Some(env!("CARGO_BIN_EXE_aileron-spawn").into());
        options.spawn_user_home = Some(temp.path().join("user-home"));
        tweak(&mut options);
        let state = AppState::open(home.clone(), options).expect("daemon state");
        let router = app(state.clone());
        Harness { temp, home, state, router }
    }

    /// A request with the right Host and the admin token.
    pub async fn request(&self, method: &str, path: &str, body: Option<Value>) -> TestResponse {
        let builder = Request::builder()
            .method(method)
            .uri(path)
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {TOKEN}"));
        self.send(builder, body).await
    }

    pub async fn send(&self, builder: http::request::Builder, body: Option<Value>) -> TestResponse {
        let declared = builder
            .method_ref()
            .zip(builder.uri_ref())
            .and_then(|(method, uri)| declared_answer(method.as_str(), uri.path()));
        let request = match body {
            Some(body) => builder.header("content-type", "application/json").body(Body::from(body.to_string())),
            None => builder.body(Body::empty()),
        }
        .expect("request");
        let response = self.router.clone().oneshot(request).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024 * 1024).await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        // Every answer a test sees at a route's declared success status is checked against the
        // wire type the route table declares for it (docs/http-api.json).
        if let Some((path, success, conforms)) = declared
            && status.as_u16() == success
            && let Err(problem) = conforms(&body)
        {
            panic!("{path} answered {status} with a body that is not its declared type: {problem}\n{body:#}");
        }
        TestResponse { status, headers, body }
    }

    /// Writes a package directory and installs it through preview + install; returns the hash.
    pub async fn install(&self, name: &str, wasm: &[u8], manifest: &str) -> String {
        self.install_answer(name, wasm, manifest).await["hash"].as_str().unwrap().to_string()
    }

    /// Installs as [`Harness::install`] does and returns the daemon's whole answer.
    pub async fn install_answer(&self, name: &str, wasm: &[u8], manifest: &str) -> Value {
        let dir = self.temp.path().join(format!("pkg-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connector.wasm"), wasm).unwrap();
        std::fs::write(dir.join("manifest.toml"), manifest).unwrap();
        let reference = format!("github://aileron-tests/{name}@1.0.0");
        let preview =
            self.request("POST", "/v1/connectors/preview", Some(json!({"source": dir, "reference": reference}))).await;
        assert_eq!(preview.status, StatusCode::OK, "preview: {}", preview.body);
        let body = json!({"source": dir, "reference": reference, "expected_hash": preview.body["hash"], "consent": "flag", "allow_unsigned": true});
        let installed = self.request("POST", "/v1/connectors/install", Some(body)).await;
        assert_eq!(installed.status, StatusCode::CREATED, "install: {}", installed.body);
        installed.body
    }

    /// Installs a guest under its own name with the given manifest extras and one action for `op`.
    pub async fn guest_action(
        &self,
        guest: &str,
        hosts: &[String],
        op: &str,
        tweak: impl FnOnce(&mut ActionSpec),
    ) -> String {
        let hash = self.install(guest, &guest_wasm(guest), &manifest(guest, hosts, "")).await;
        let mut spec = ActionSpec::new(guest, guest, &hash, op);
        tweak(&mut spec);
        let name = format!("{}.md", spec.name);
        let added = self.add_action(&name, &spec.render()).await;
        assert_eq!(added.status, StatusCode::CREATED, "add action: {}", added.body);
        hash
    }

    pub async fn add_action(&self, file_name: &str, content: &str) -> TestResponse {
        self.request("POST", "/v1/actions/install", Some(json!({"file_name": file_name, "content": content}))).await
    }

    /// [`Harness::add_action`] replacing a different installed action of the same name
    /// (`force`, as `aileron action add --force` sends).
    pub async fn replace_action(&self, file_name: &str, content: &str) -> TestResponse {
        self.request(
            "POST",
            "/v1/actions/install",
            Some(json!({"file_name": file_name, "content": content, "force": true})),
        )
        .await
    }

    /// Signs in to the web console as `aileron open` does (a one-time ticket, then its login
    /// page) and returns the `aileron_web=…` cookie the pages answer to.
    pub async fn console_cookie(&self) -> String {
        let ticket = self.request("POST", "/v1/web/login-tickets", Some(json!({}))).await;
        let login = format!("/approvals/login?ticket={}", ticket.body["ticket"].as_str().unwrap());
        let signed_in =
            self.send(Request::builder().uri(&login).header("host", format!("127.0.0.1:{PORT}")), None).await;
        signed_in.headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string()
    }

    pub async fn run(&self, name: &str, args: Value) -> TestResponse {
        self.request("POST", &format!("/v1/actions/{name}/run"), Some(json!({ "args": args }))).await
    }

    pub async fn audit(&self) -> Vec<Value> {
        let listing = self.request("GET", "/v1/audit?limit=10000", None).await;
        assert_eq!(listing.status, StatusCode::OK);
        listing.body["items"].as_array().cloned().unwrap_or_default()
    }

    pub async fn audit_for(&self, audit_id: &str) -> Vec<Value> {
        self.audit().await.into_iter().filter(|r| r["audit_id"] == audit_id).collect()
    }
}

/// A credential source that hands every connector the same planted key, bound as
/// `<kind>/<service>/planted` (tests of injection and of where a secret must never appear).
pub struct PlantedKey(pub &'static str);

impl CredentialSource for PlantedKey {
    fn resolve<'a>(
        &'a self,
        connector_fqn: &'a str,
        kind: CredentialKind,
        _refresher: &'a dyn TokenRefresher,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<ResolvedCredential, Failure>> + Send + 'a>> {
        Box::pin(async move {
            Ok(ResolvedCredential {
                binding: BindingInfo::new(kind, connector_fqn, "planted"),
                injection: Injection::Token(Secret::new(self.0)),
            })
        })
    }
}

/// Every file under `root` whose bytes contain `needle` (where a secret must never be).
pub fn files_containing(root: &std::path::Path, needle: &[u8]) -> Vec<String> {
    every_file(root)
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle))
        .map(|(path, _)| path)
        .collect()
}

/// Every file under `root`, with its bytes.
pub fn every_file(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                files.push((path.display().to_string(), bytes));
            }
        }
    }
    files
}

/// Copies a directory tree (the tamper tests' snapshots of an audit directory).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A child process killed (and reaped) when the test is done with it, panicking or not: a server
/// left running would keep the test harness's output open.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
