//! Planted secrets, searched for everywhere a user or an agent could see bytes: a real daemon
//! process with file traces on, a thousand distinct API keys (250 in the suite) each stored in the vault, bound,
//! and injected into a real call (the upstream checks it received each one), calls over
//! `aileron-mcp`, refused calls and errors, and the connector's whole linear memory after an
//! injected call. Every HTTP answer, MCP result, CLI output, guest memory window and every file
//! under the test's directory (home, `daemon.log`, audit log, vault, traces) is then searched
//! for each secret and the passphrase, raw and base64, base64url, hex and percent-encoded.

use std::collections::HashSet;

use base64::Engine;
use serde_json::{Value, json};

use crate::cli::Cli;
use crate::fake_oauth::FakeOAuth;
use crate::mcp::{Session, StdioSession};
use crate::support::{ActionSpec, every_file, guest_wasm, manifest};

const PASSPHRASE: &str = "leak-scan passphrase 7f3a9c21";
const CONNECTOR: &str = "github://aileron-tests/http_get";

/// The secret number `i`: fixed length, a prefix nothing else contains, and `+`, `/`, `=` so
/// its percent-encoded and base64 forms differ from the raw one.
fn planted(i: usize) -> String {
    format!("PLANTED+{i:04}/{:016x}=", 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1))
}

/// Every form a secret could leak in: raw, base64 (standard and URL-safe without padding), hex
/// and percent-encoded (what a query string or form body would carry).
fn encodings(secret: &str) -> Vec<(&'static str, Vec<u8>)> {
    let bytes = secret.as_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let percent: String = url::form_urlencoded::byte_serialize(bytes).collect();
    vec![
        ("raw", bytes.to_vec()),
        ("base64", base64::engine::general_purpose::STANDARD.encode(bytes).into_bytes()),
        ("base64url", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes).into_bytes()),
        ("hex", hex.into_bytes()),
        ("percent", percent.into_bytes()),
    ]
}

/// Every encoded form of every secret, found in one pass per form: each form's patterns share a
/// prefix (the secrets do), so the scan looks for the prefix and checks the pattern at each hit.
struct Needles {
    forms: Vec<Form>,
}

/// One encoding of all the secrets: its name, the prefix its patterns share, the patterns.
struct Form {
    name: &'static str,
    prefix: Vec<u8>,
    patterns: HashSet<Vec<u8>>,
}

impl Needles {
    fn new(secrets: &[String]) -> Needles {
        let mut forms: Vec<Form> = Vec::new();
        for secret in secrets {
            for (index, (name, pattern)) in encodings(secret).into_iter().enumerate() {
                if forms.len() <= index {
                    forms.push(Form { name, prefix: pattern.clone(), patterns: HashSet::new() });
                }
                let form = &mut forms[index];
                let common = form.prefix.iter().zip(&pattern).take_while(|(a, b)| a == b).count();
                form.prefix.truncate(common);
                form.patterns.insert(pattern);
            }
        }
        for form in &forms {
            assert!(form.prefix.len() >= 6, "the {} forms share a usable prefix", form.name);
        }
        Needles { forms }
    }

    /// `(form, pattern)` of every secret found in `haystack`.
    fn find(&self, haystack: &[u8]) -> Vec<(&'static str, String)> {
        let mut found = Vec::new();
        for form in &self.forms {
            let length = form.patterns.iter().next().map_or(0, Vec::len);
            for start in memchr::memmem::find_iter(haystack, &form.prefix) {
                if let Some(candidate) = haystack.get(start..start + length)
                    && form.patterns.contains(candidate)
                {
                    found.push((form.name, String::from_utf8_lossy(candidate).into_owned()));
                }
            }
        }
        found
    }
}

#[test]
fn injected_secrets_never_appear_in_any_output_file_span_or_guest_memory() {
    // 250 in the suite, 1,000 in the leak campaign (`cargo xtask campaign leaks --long`).
    let secrets_count = crate::campaign::scaled(250, 1000);
    aileron::platform::process::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let provider = runtime.block_on(FakeOAuth::start());
    let cli = Cli::new();
    let traces = cli.scratch().join("traces");
    let daemon_env = [
        ("AILERON_OTEL_ENABLED", "true"),
        ("AILERON_OTEL_EXPORTER", "file"),
        ("AILERON_TRACES_DIR", traces.to_str().unwrap()),
    ];
    let started = cli.run_with(&["daemon", "start"], &daemon_env, None);
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"test\"\nheader = \"X-Api-Key\"\nformat = \"Token {key}\"\n";
    let hash = cli.install_package(
        "http_get",
        &guest_wasm("http_get"),
        &manifest("http_get", &[provider.host_port()], credential),
    );
    cli.add_action(&ActionSpec {
        capabilities: &["get", "api_key"],
        inputs: &[("url", "string", true), ("credential", "string", false), ("memory_window", "object", false)],
        ..ActionSpec::new("fetch", "http_get", &hash, "get")
    });
    let init = cli.run_with(&["vault", "init"], &[("AILERON_VAULT_PASSPHRASE", PASSPHRASE)], None);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));

    let secrets: Vec<String> = (0..secrets_count).map(planted).collect();
    let mut outputs: Vec<Vec<u8>> = Vec::new();
    let mut record = |output: &std::process::Output| {
        outputs.push(output.stdout.clone());
        outputs.push(output.stderr.clone());
    };
    let setup =
        cli.run_with(&["binding", "setup", CONNECTOR, "--from-env", "KEY"], &[("KEY", secrets[0].as_str())], None);
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    record(&setup);
    let binding = "api_key/github:aileron-tests:http_get/default";

    let info: Value = serde_json::from_str(&std::fs::read_to_string(cli.home.join("daemon.json")).unwrap()).unwrap();
    let (base, token) = (info["url"].as_str().unwrap().to_string(), info["token"].as_str().unwrap().to_string());
    let client = reqwest::blocking::Client::new();
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let mut call = |method: reqwest::Method, path: &str, body: Option<Value>| -> Value {
        let mut request = client.request(method, format!("{base}{path}")).bearer_auth(&token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let mut raw = format!("{:?}\n", response.headers()).into_bytes();
        let bytes = response.bytes().unwrap();
        raw.extend_from_slice(&bytes);
        answers.push(raw);
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };

    // Each secret: stored in the vault, bound (rebind), and injected into one real call.
    let url = format!("{}/api/echo", provider.base_url());
    let encoded_binding = binding.replace('/', "%2F");
    for (i, secret) in secrets.iter().enumerate() {
        let stored = call(
            reqwest::Method::POST,
            "/v1/secrets",
            Some(json!({ "path": format!("planted/s{i:04}"), "value": secret })),
        );
        assert_eq!(stored["path"], format!("planted/s{i:04}"), "{stored}");
        if i > 0 {
            let rebound = call(
                reqwest::Method::POST,
                &format!("/v1/bindings/{encoded_binding}/rebind"),
                Some(json!({ "api_key": secret })),
            );
            assert_eq!(rebound["name"], binding, "{rebound}");
        }
        *provider.state.api_key.lock().unwrap() = Some(format!("Token {secret}"));
        let ran = call(
            reqwest::Method::POST,
            "/v1/actions/fetch/run",
            Some(json!({ "args": { "url": url, "credential": "api_key" } })),
        );
        assert_eq!(ran["result"]["output"]["status"], 200, "secret {i} was accepted upstream: {ran}");
    }
    let upstream_saw: HashSet<String> = provider
        .state
        .api_requests
        .lock()
        .unwrap()
        .iter()
        .flatten()
        .filter(|(name, _)| name == "x-api-key")
        .map(|(_, value)| value.trim_start_matches("Token ").to_string())
        .collect();
    assert_eq!(upstream_saw.len(), secrets_count, "the upstream received every one of the secrets");

    // The connector's whole memory, window by window, each read right after an injected call.
    let sized = call(
        reqwest::Method::POST,
        "/v1/actions/fetch/run",
        Some(json!({ "args": { "url": url, "credential": "api_key", "memory_window": { "offset": 0, "len": 0 } } })),
    );
    let memory_size = sized["result"]["output"]["memory_size"].as_u64().unwrap() as usize;
    assert!(memory_size >= 65536, "{sized}");
    let mut guest_memory = Vec::with_capacity(memory_size);
    const WINDOW: usize = 192 * 1024;
    for offset in (0..memory_size).step_by(WINDOW) {
        let window = call(
            reqwest::Method::POST,
            "/v1/actions/fetch/run",
            Some(
                json!({ "args": { "url": url, "credential": "api_key", "memory_window": { "offset": offset, "len": WINDOW } } }),
            ),
        );
        let hex =
            window["result"]["output"]["memory_hex"].as_str().unwrap_or_else(|| panic!("window at {offset}: {window}"));
        guest_memory.extend((0..hex.len()).step_by(2).map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap()));
    }
    assert!(guest_memory.len() >= memory_size, "all {memory_size} bytes of guest memory were read");

    // Refusals and errors, which quote what they refuse.
    call(
        reqwest::Method::POST,
        "/v1/actions/fetch/run",
        Some(json!({ "args": { "url": "http://undeclared.example/", "credential": "api_key" } })),
    );
    call(
        reqwest::Method::POST,
        "/v1/actions/fetch/run",
        Some(json!({ "args": { "url": url, "credential": "oauth2" } })),
    );
    call(reqwest::Method::POST, "/v1/vault/unlock", Some(json!({ "passphrase": "not it" })));
    for path in [
        "/v1/status",
        "/v1/vault/status",
        "/v1/secrets",
        "/v1/bindings",
        &format!("/v1/bindings/{encoded_binding}"),
        "/v1/audit?limit=10000",
        "/v1/connectors",
        "/v1/actions",
    ] {
        call(reqwest::Method::GET, path, None);
    }

    // An agent's view: tool calls over aileron-mcp.
    let mut session = StdioSession::spawn(&[("AILERON_HOME", cli.home.to_str().unwrap())]);
    session.initialize("2025-06-18");
    let mut mcp_results = Vec::new();
    for arguments in [
        json!({ "url": url, "credential": "api_key" }),
        json!({ "url": "http://undeclared.example/", "credential": "api_key" }),
    ] {
        mcp_results.push(session.call("fetch", arguments).to_string().into_bytes());
    }
    let (_, mcp_stderr) = session.close();
    mcp_results.push(mcp_stderr.into_bytes());

    // A user's view: the CLI's listings and the audit trail.
    for args in [
        &["binding", "list", "--json"][..],
        &["binding", "inspect", binding],
        &["secret", "list"],
        &["status", "--json"],
        &["audit", "list", "--limit", "10000", "--json"],
        &["audit", "verify"],
    ] {
        record(&cli.run_with(args, &[], None));
    }
    record(&cli.run_with(&["daemon", "stop"], &[], None));

    // The search.
    let needles = Needles::new(&secrets);
    let passphrase = Needles {
        forms: encodings(PASSPHRASE)
            .into_iter()
            .map(|(name, p)| Form { name, prefix: p.clone(), patterns: HashSet::from([p]) })
            .collect(),
    };
    // The search itself finds each form, wherever it sits in other bytes.
    for (form, pattern) in encodings(&secrets[secrets_count / 2]).into_iter().chain(encodings(PASSPHRASE)) {
        let mut haystack = b"{\"x\":\"".to_vec();
        haystack.extend_from_slice(&pattern);
        haystack.extend_from_slice(b"\"}");
        assert!(needles.find(&haystack).len() + passphrase.find(&haystack).len() >= 1, "the scan finds a {form} form");
    }
    let mut haystacks: Vec<(String, Vec<u8>)> = Vec::new();
    haystacks.extend(answers.into_iter().enumerate().map(|(i, bytes)| (format!("HTTP answer {i}"), bytes)));
    haystacks.extend(mcp_results.into_iter().enumerate().map(|(i, bytes)| (format!("MCP result {i}"), bytes)));
    haystacks.extend(outputs.into_iter().enumerate().map(|(i, bytes)| (format!("CLI output {i}"), bytes)));
    haystacks.push(("guest memory".to_string(), guest_memory));
    let files = every_file(cli.scratch());
    let span_files =
        files.iter().filter(|(path, _)| path.starts_with(traces.to_str().unwrap()) && path.ends_with(".jsonl")).count();
    assert!(span_files >= 1, "the daemon wrote spans to {}", traces.display());
    assert!(files.iter().any(|(path, _)| path.ends_with("daemon.log")), "the daemon's log is searched too");
    let searched_bytes: usize =
        files.iter().map(|(_, b)| b.len()).sum::<usize>() + haystacks.iter().map(|(_, b)| b.len()).sum::<usize>();
    haystacks.extend(files);
    let mut leaks = Vec::new();
    for (place, bytes) in &haystacks {
        for (form, pattern) in needles.find(bytes).into_iter().chain(passphrase.find(bytes)) {
            leaks.push(format!("{place}: {form} {pattern}"));
        }
    }
    assert_eq!(leaks, Vec::<String>::new(), "planted secrets leaked");
    let mut report = crate::campaign::Report::new("leaks");
    report.set("secrets", secrets_count);
    report.set("passphrase", 1);
    report.set("forms", json!(encodings(PASSPHRASE).iter().map(|(name, _)| *name).collect::<Vec<_>>()));
    report.set("places", haystacks.len());
    report.set("bytes_searched", searched_bytes);
    report.set("guest_memory_bytes", memory_size);
    report.set("found", leaks.len());
    report.finish();
    drop(runtime);
}

/// The leak scan of SPEC §15's sealed credentials: a launched agent's own requests, credentialed
/// at its proxy with a planted secret that changes before each one (250 in the suite, 1,000 in
/// the campaign), to an upstream that echoes the credential back in a header and in the body
/// (every tenth answer 200 KiB with echoes at uneven offsets, so they cross the proxy's reads).
/// The upstream must receive each secret; nothing the agent received, its environment, its
/// process's memory, no CLI output, span, record or file under the test's directory may hold any
/// secret in any encoding.
#[test]
fn sealed_secrets_never_reach_a_launched_agent_a_record_or_a_file() {
    use crate::launch::{LaunchRig, agent_script, answering, header_value, install_spec_only, text};
    use std::sync::{Arc, Mutex};
    let secrets_count = crate::campaign::scaled(250, 1000);
    let secrets: Vec<String> = (0..secrets_count).map(planted).collect();
    let rig = LaunchRig::new();
    let saw: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = saw.clone();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let accepted = asked.clone();
    let answer: crate::gateway::Answer = Arc::new(move |line: &str, headers: &[String]| {
        let authorization = header_value(headers, "authorization");
        if line.is_empty() {
            return (String::new(), String::new());
        }
        recorded.lock().unwrap().push(authorization.clone());
        let transfer_coding = header_value(headers, "te");
        accepted.lock().unwrap().push(format!("{}{transfer_coding}", header_value(headers, "accept-encoding")));
        let body = if line.starts_with("GET /big/") {
            let mut body = String::with_capacity(210 * 1024);
            for at in 0..40 {
                body.push_str(&"x".repeat(5 * 1024 + at * 37));
                body.push_str(&authorization);
            }
            body
        } else {
            json!({ "saw": authorization }).to_string()
        };
        (format!("x-echo: {authorization}\r\n"), body)
    });
    let upstream = answering(answer);
    let traces = rig.temp.path().join("traces");
    let roots = crate::gateway::TEST_UPSTREAM_CERT;
    crate::launch::start_with_a_vault_trusting(
        &rig,
        roots,
        &[
            ("AILERON_OTEL_ENABLED", "true".as_ref()),
            ("AILERON_OTEL_EXPORTER", "file".as_ref()),
            ("AILERON_TRACES_DIR", traces.as_os_str()),
        ],
    );
    let extra = format!(
        "[capabilities.credential]\nkind = \"api_key\"\nformat = \"token {{key}}\"\n\n[proxy]\n\
         placeholder_env = [\"GH_TOKEN\"]\n\n\
         [[proxy.operations]]\nname = \"read\"\nmethod = \"GET\"\nhost = \"{upstream}\"\npath = \"/**\"\n"
    );
    install_spec_only(&rig, &upstream, &extra);
    crate::launch::bind_key(&rig, &secrets[0]);
    let binding = "api_key/github:aileron-tests:http_get/default";

    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(rig.aileron_home().join("daemon.json")).unwrap()).unwrap();
    let (base, token) = (info["url"].as_str().unwrap().to_string(), info["token"].as_str().unwrap().to_string());
    let client = reqwest::blocking::Client::new();
    let shared = rig.workspace().join("markers");
    std::fs::create_dir_all(&shared).unwrap();
    let received = rig.workspace().join("received.bin");
    let memory = rig.workspace().join("memory.bin");
    agent_script(&rig, "leak_clients.py");
    let mut answers: Vec<Vec<u8>> = Vec::new();
    let output = std::thread::scope(|scope| {
        let launched = scope.spawn(|| {
            let count = secrets_count.to_string();
            let env: [(&str, &std::ffi::OsStr); 5] = [
                ("SHARED_DIR", shared.as_os_str()),
                ("SECRETS", count.as_ref()),
                ("UPSTREAM", upstream.as_ref()),
                ("RECEIVED", received.as_os_str()),
                ("MEMORY", memory.as_os_str()),
            ];
            rig.run_with_path(&["launch", "claude"], &env, std::path::Path::new("/usr/bin"))
        });
        let encoded_binding = binding.replace('/', "%2F");
        for (index, secret) in secrets.iter().enumerate() {
            if index > 0 {
                let rebound = client
                    .post(format!("{base}/v1/bindings/{encoded_binding}/rebind"))
                    .bearer_auth(&token)
                    .json(&json!({ "api_key": secret }))
                    .send()
                    .unwrap();
                let status = rebound.status();
                let bytes = rebound.bytes().unwrap().to_vec();
                assert!(status.is_success(), "{}", String::from_utf8_lossy(&bytes));
                answers.push(bytes);
            }
            std::fs::write(shared.join(format!("go-{index}")), "").unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !shared.join(format!("done-{index}")).exists() {
                assert!(!launched.is_finished(), "the agent stopped before request {index}");
                assert!(std::time::Instant::now() < deadline, "request {index} never came back");
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        launched.join().unwrap()
    });
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let upstream_saw = saw.lock().unwrap().clone();
    let expected: Vec<String> = secrets.iter().map(|secret| format!("token {secret}")).collect();
    assert_eq!(upstream_saw, expected, "the upstream received each secret, in order, once");
    // The agent asked for gzip each time (`Accept-Encoding` and `TE`); a credentialed request goes
    // out asking for no encoding, and for no transfer coding (the fourteenth re-attack).
    let asked = asked.lock().unwrap().clone();
    assert!(asked.len() == secrets_count && asked.iter().all(|asked| asked == "identity"), "{asked:?}");
    let agent_received = std::fs::read(&received).unwrap();
    let redactions = memchr::memmem::find_iter(&agent_received, b"[REDACTED]").count();
    // Each answer echoes the credential in a header and at least once in the body.
    assert!(redactions >= 2 * secrets_count, "every echo came back redacted: {redactions}");
    let memory_bytes = std::fs::metadata(&memory).unwrap().len();
    assert!(memory_bytes > 1024 * 1024, "the agent's process memory was read: {memory_bytes} bytes");

    let mut outputs = vec![output.stdout, output.stderr];
    for args in [
        &["audit", "list", "--limit", "10000", "--json"][..],
        &["binding", "inspect", binding],
        &["binding", "list", "--json"],
        &["status", "--json"],
        &["audit", "verify"],
        &["daemon", "stop"],
    ] {
        let done = rig.run(args, &[]);
        outputs.push(done.stdout);
        outputs.push(done.stderr);
    }

    let needles = Needles::new(&secrets);
    let mut haystacks: Vec<(String, Vec<u8>)> = vec![("what the agent received".to_string(), agent_received)];
    haystacks.extend(answers.into_iter().enumerate().map(|(i, bytes)| (format!("HTTP answer {i}"), bytes)));
    haystacks.extend(outputs.into_iter().enumerate().map(|(i, bytes)| (format!("CLI output {i}"), bytes)));
    let files = every_file(rig.temp.path());
    assert!(
        files.iter().any(|(path, _)| path.starts_with(traces.to_str().unwrap()) && path.ends_with(".jsonl")),
        "the daemon wrote spans to {}",
        traces.display()
    );
    assert!(files.iter().any(|(path, _)| path.ends_with("daemon.log")), "the daemon's log is searched too");
    // Each credentialed request is a span with its record's keys (SPEC §15: the same keys on a span).
    let proxy_spans: Vec<Value> = files
        .iter()
        .filter(|(path, _)| path.starts_with(traces.to_str().unwrap()))
        .flat_map(|(_, bytes)| String::from_utf8_lossy(bytes).lines().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter(|span| span["name"] == "aileron.proxy.request")
        .collect();
    assert_eq!(proxy_spans.len(), secrets_count, "one span per credentialed request");
    for span in &proxy_spans {
        let attributes = &span["attributes"];
        assert_eq!(attributes["aileron.connector.fqn"], "github://aileron-tests/http_get", "{span:#}");
        assert_eq!(attributes["aileron.connector.operation"], "read", "{span:#}");
        assert_eq!(attributes["aileron.binding.name"], binding, "{span:#}");
        assert!(attributes["aileron.audit.id"].as_str().is_some_and(|id| id.starts_with("audit-")), "{span:#}");
    }
    let searched_bytes: usize =
        files.iter().map(|(_, b)| b.len()).sum::<usize>() + haystacks.iter().map(|(_, b)| b.len()).sum::<usize>();
    haystacks.extend(files);
    let mut leaks = Vec::new();
    for (place, bytes) in &haystacks {
        for (form, pattern) in needles.find(bytes) {
            leaks.push(format!("{place}: {form} {pattern}"));
        }
    }
    assert_eq!(leaks, Vec::<String>::new(), "planted secrets leaked");
    let mut report = crate::campaign::Report::new("leaks-sealed");
    report.set("secrets", secrets_count);
    report.set("forms", json!(encodings(&secrets[0]).iter().map(|(name, _)| *name).collect::<Vec<_>>()));
    report.set("places", haystacks.len());
    report.set("bytes_searched", searched_bytes);
    report.set("agent_memory_bytes", memory_bytes);
    report.set("found", leaks.len());
    report.finish();
}
