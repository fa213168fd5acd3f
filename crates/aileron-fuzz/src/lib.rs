//! Fuzz targets for every parser of untrusted input (issue 18): one plain function per target,
//! `fn(&[u8])`, that feeds the bytes to the product's real parser and checks the parser's own
//! invariants — it never panics, what parses re-serialises (or re-parses) to the same value where the
//! format has a writer, and an error carries a message (and, for user-authored files, a `hint:`).
//!
//! Two drivers call [`TARGETS`]: cargo-fuzz (`fuzz/fuzz_targets/<target>.rs`, coverage-guided
//! libFuzzer) and `tests/replay.rs` (every checked-in corpus and regression file, then a short blind
//! mutation loop, under a plain `cargo test`). A panic is a finding; see RELIABILITY.md.
//!
//! Targets that read files (package tarballs, the audit log, the journals, the vault) write the bytes
//! to a temporary file and call the same reader the daemon calls on start-up; the HTTP bodies and MCP
//! messages go through the daemon's real router, built in-process on a temporary home (`daemon`).

mod daemon;

use std::path::{Path, PathBuf};

use aileron::stores::audit_log::AuditFilter;
use aileron_core::action::{parse_action, parse_packaged_action};
use aileron_core::approval::{ApprovalId, replay};
use aileron_core::audit::{AuditRecord, GENESIS_PREV, log_lines, seal, verify_chain};
use aileron_core::identity::parse_version;
use aileron_core::manifest::parse_manifest;
use aileron_core::parse_error::ParseError;
use aileron_core::policy::{SpawnEnvelope, plan_envelope, plan_operation, spawn_args};
use aileron_core::signing::{Keyring, PublicKey, parse_authority};
use aileron_core::vault::VaultFile;
use aileron_core::{ConnectorRef, ContentHash, FailureClass, Fqn};
use aileron_sandbox::guest_json::{Printed, parse_request, parse_stdout};
use serde_json::{Value, json};

pub use daemon::{http_body, mcp_message};

/// Every target by name: the name is the corpus directory and the cargo-fuzz target.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("action_file", action_file),
    ("manifest", manifest),
    ("identity", identity),
    ("package_tarball", package_tarball),
    ("action_tarball", action_tarball),
    ("guest_stdout", guest_stdout),
    ("guest_http_request", guest_http_request),
    ("guest_spawn", guest_spawn),
    ("audit_log", audit_log),
    ("approvals_journal", approvals_journal),
    ("sessions_journal", sessions_journal),
    ("vault_file", vault_file),
    ("keyring", keyring),
    ("mcp_message", mcp_message),
    ("http_body", http_body),
    ("agent_proxy_head", agent_proxy_head),
    ("egress_policy", egress_policy),
    ("proxy_operation", proxy_operation),
];

/// A `ParseError` must say where, what and what to do.
fn check_parse_error(error: &ParseError, file: &str, text: &str) {
    assert_eq!(error.file, file, "{error}");
    assert!(!error.message.trim().is_empty(), "a parse error without a message: {error:?}");
    assert!(!error.hint.trim().is_empty(), "a parse error without a hint: {error:?}");
    if let Some(line) = error.line {
        assert!(line >= 1 && line <= text.lines().count().max(1) + 1, "line {line} is outside the file: {error:?}");
    }
    assert!(error.to_string().contains("\nhint: "), "{error}");
}

/// Action files (SPEC §2): `parse_action` (installed `<name>.md`) and `parse_packaged_action`
/// (the `action.md` of a release tarball).
pub fn action_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_action(&text, "fuzz.md") {
        Ok(action) => {
            assert_eq!(action.name, "fuzz", "the file stem is the action's name");
            assert_eq!(*action.sha256(), aileron_core::ContentHash::of_bytes(text.as_bytes()));
            assert_eq!(parse_action(&text, "fuzz.md").as_ref(), Ok(&action), "parsing is deterministic");
            assert!(action.input_schema().is_object());
            assert!(!action.tool_name().is_empty());
            let _ = action.validate_call_args(&serde_json::Map::new());
        }
        Err(error) => check_parse_error(&error, "fuzz.md", &text),
    }
    match parse_packaged_action(&text, "action.md") {
        // The installer stores a packaged action as `<name>.md`; the registry must load it back.
        Ok(action) => {
            let stored = format!("{}.md", action.name);
            let reloaded = parse_action(&text, &stored);
            assert_eq!(reloaded.as_ref(), Ok(&action), "a packaged action stored as {stored} must load");
        }
        Err(error) => check_parse_error(&error, "action.md", &text),
    }
}

/// Connector manifests (SPEC §3.1, §5).
pub fn manifest(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse_manifest(&text, "manifest.toml") {
        Ok(manifest) => {
            let reference = manifest.reference();
            assert_eq!(ConnectorRef::parse(&reference.to_string()).as_ref(), Ok(&reference));
            let _ = manifest.describe_capabilities();
            assert_eq!(parse_manifest(&text, "manifest.toml").map(|m| m.reference()), Ok(reference));
        }
        Err(error) => check_parse_error(&error, "manifest.toml", &text),
    }
}

/// FQNs, `<fqn>@<semver>` references, versions, content hashes, approval ids, keyring authorities
/// and publisher keys: every identifier a request or a file names. What parses prints back to
/// text that parses to the same value.
pub fn identity(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();
    fn round_trip<T: PartialEq + std::fmt::Debug, E: std::fmt::Display>(
        parsed: Result<T, E>,
        print: impl Fn(&T) -> String,
        parse: impl Fn(&str) -> Result<T, E>,
    ) {
        match parsed {
            Ok(value) => {
                let printed = print(&value);
                match parse(&printed) {
                    Ok(again) => assert_eq!(again, value, "`{printed}` parses to another value"),
                    Err(error) => panic!("`{printed}`, printed from a parsed value, does not parse: {error}"),
                }
            }
            Err(error) => assert!(!error.to_string().trim().is_empty()),
        }
    }
    round_trip(Fqn::parse(text), Fqn::to_string, Fqn::parse);
    round_trip(ConnectorRef::parse(text), ConnectorRef::to_string, ConnectorRef::parse);
    round_trip(parse_version(text), semver::Version::to_string, parse_version);
    round_trip(ContentHash::parse(text), ContentHash::to_string, ContentHash::parse);
    round_trip(ApprovalId::parse(text), |id| id.as_str().to_string(), ApprovalId::parse);
    round_trip(parse_authority(text), Clone::clone, parse_authority);
    round_trip(PublicKey::parse(text).map(|k| k.to_base64()), Clone::clone, |t| {
        PublicKey::parse(t).map(|k| k.to_base64())
    });
}

/// A scratch directory per thread for the targets that read files (libFuzzer runs one thread; the
/// replay test runs targets on its own threads).
fn scratch(name: &str) -> PathBuf {
    thread_local! {
        static DIR: tempfile::TempDir = tempfile::tempdir().expect("a temporary directory");
    }
    DIR.with(|dir| dir.path().join(name))
}

/// Connector packages (`aileron.tar.gz`: `connector.wasm`, `manifest.toml`, `signature.sig`), read
/// from a file exactly as `connector install` reads a download, then checked against an empty
/// keyring as the install pipeline does.
pub fn package_tarball(data: &[u8]) {
    let path = scratch("aileron.tar.gz");
    std::fs::write(&path, data).expect("writing the scratch package");
    match aileron::stores::package::load_package(&path) {
        Ok(package) => {
            assert_eq!(package.hash, ContentHash::of_connector(&package.wasm, package.manifest_text.as_bytes()));
            if let Some(signature) = &package.signature {
                assert_eq!(signature.len(), aileron::stores::package::SIGNATURE_BYTES);
            }
            let message = [package.wasm.as_slice(), package.manifest_text.as_bytes()].concat();
            let fqn = package.manifest.reference().fqn;
            let _ = aileron_core::signing::verify(&Keyring::empty(), &fqn, &message, package.signature.as_deref());
            // What the packer writes, the reader reads back to the same package.
            let packed = aileron::stores::package::pack_tarball(
                &package.wasm,
                &package.manifest_text,
                package.signature.as_deref(),
            )
            .expect("packing in memory");
            std::fs::write(&path, packed).expect("writing the scratch package");
            let again = aileron::stores::package::load_package(&path).expect("a packed package reads back");
            assert_eq!(again.hash, package.hash);
            assert_eq!(again.signature, package.signature);
        }
        Err(error) => {
            assert!(!error.to_string().trim().is_empty());
            assert!(!error.hint().trim().is_empty(), "{error}");
            assert!(!error.code().is_empty());
        }
    }
}

/// Action packages (`aileron.tar.gz` with `action.md` and `signature.sig`), then the action inside.
pub fn action_tarball(data: &[u8]) {
    let path = Path::new("aileron.tar.gz");
    match aileron::stores::package::read_action_tarball(path, data) {
        Ok((action, signature)) => {
            let packed = aileron::stores::package::pack_action_tarball(&action, signature.as_deref())
                .expect("packing in memory");
            let again =
                aileron::stores::package::read_action_tarball(path, &packed).expect("a packed action reads back");
            assert_eq!(again, (action.clone(), signature));
            if let Err(error) = parse_packaged_action(&action, "action.md") {
                check_parse_error(&error, "action.md", &action);
            }
        }
        Err(error) => {
            assert!(!error.to_string().trim().is_empty());
            assert!(!error.hint().trim().is_empty(), "{error}");
        }
    }
}

/// What a guest prints on stdout: nothing, `{"output": ..}` or `{"error": ..}` (SPEC §4.1).
pub fn guest_stdout(data: &[u8]) {
    match parse_stdout(data) {
        Printed::Nothing => assert!(data.iter().all(u8::is_ascii_whitespace)),
        Printed::Output(output) => {
            let printed = serde_json::to_vec(&json!({ "output": output })).expect("JSON values serialize");
            match parse_stdout(&printed) {
                Printed::Output(again) => assert!(same_json(&again, &output), "{again} is not {output}"),
                other => panic!("a re-printed output reads as {other:?}"),
            }
        }
        // A guest may only report these three classes; anything else is confined.
        Printed::Error(failure) => assert!(
            matches!(
                failure.class,
                FailureClass::ExternalApiError | FailureClass::NetworkError | FailureClass::ConnectorRuntimeError
            ),
            "a guest reported {:?}",
            failure.class
        ),
        Printed::Malformed(reason) => assert!(!reason.trim().is_empty()),
    }
}

/// JSON equality up to one or two ulps of a float: serde_json (without its `float_roundtrip`
/// feature, which the product does not enable) may parse a printed float to a neighbour of the value
/// printed (`regressions/guest_stdout/float-ulp`). Nothing re-parses a guest's output, so that is not
/// a defect; anything more than that is.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or_default(), y.as_f64().unwrap_or_default());
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 4.0 * f64::EPSILON
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same_json(vx, vy))
        }
        _ => a == b,
    }
}

/// The JSON a guest passes to `aileron_host.http_request`.
pub fn guest_http_request(data: &[u8]) {
    match parse_request(data) {
        Ok(request) => {
            assert!(!request.method.trim().is_empty());
            // Re-written in the pairs form, it parses to the same request.
            let body =
                request.body.as_deref().map(|b| String::from_utf8(b.to_vec()).expect("the body was a JSON string"));
            let printed = json!({
                "method": request.method,
                "url": request.url,
                "headers": request.headers,
                "body": body,
                "credential": request.credential,
            });
            let again = parse_request(printed.to_string().as_bytes()).expect("a re-written request parses");
            assert_eq!(again, request);
        }
        Err(error) => assert!(!error.to_string().trim().is_empty()),
    }
}

/// The manifest and action the spawn target checks envelopes against: the example git connector.
fn git_connector() -> &'static (aileron_core::manifest::ConnectorManifest, aileron_core::policy::CapabilitySubset) {
    static GIT: std::sync::OnceLock<(
        aileron_core::manifest::ConnectorManifest,
        aileron_core::policy::CapabilitySubset,
    )> = std::sync::OnceLock::new();
    GIT.get_or_init(|| {
        let manifest = parse_manifest(include_str!("../../../connectors/git/manifest.toml"), "manifest.toml")
            .expect("the git connector's manifest parses");
        // The example actions are templates the build fills with the connector's identity.
        let reference = manifest.reference();
        let text = include_str!("../../../connectors/git/actions/git-log.md")
            .replace("{{CONNECTOR_FQN}}", &reference.fqn.to_string())
            .replace("{{CONNECTOR_VERSION}}", &reference.version.to_string())
            .replace("{{CONNECTOR_HASH}}", &ContentHash::of_bytes(b"git").to_string());
        let action = parse_action(&text, "git-log.md").expect("the git-log action parses");
        (manifest, action.requires[0].subset())
    })
}

/// A guest's spawn requests (SPEC §5): the `spawn` envelope JSON, and the `spawn_op` arguments,
/// through the gate's pure half (`plan_envelope`, `spawn_args` + `plan_operation`).
pub fn guest_spawn(data: &[u8]) {
    let (manifest, subset) = git_connector();
    if let Ok(envelope) = serde_json::from_slice::<SpawnEnvelope>(data) {
        let program = envelope.program.clone();
        match plan_envelope(manifest, subset, envelope) {
            Ok(plan) => assert_eq!(plan.program, program),
            Err(failure) => assert!(!failure.message.trim().is_empty()),
        }
    }
    if let Ok(args) = serde_json::from_slice::<Value>(data) {
        match spawn_args(&args) {
            Ok(values) => {
                for op in ["log", "status", "diff_stat", "push"] {
                    match plan_operation(manifest, subset, op, &values) {
                        Ok(plan) => assert_eq!(plan.op, op),
                        Err(failure) => assert!(!failure.message.trim().is_empty()),
                    }
                }
            }
            Err(problem) => assert!(!problem.trim().is_empty()),
        }
    }
}

/// The audit log reader and verifier: the bytes are one daily file; `audit verify`, `audit list`
/// and the daemon's start-up recovery read it. Then every line that is a record is re-sealed into
/// a fresh chain, which must verify and list.
pub fn audit_log(data: &[u8]) {
    let parent = tempfile::tempdir().expect("a temporary directory");
    let audit_dir = parent.path().join("audit");
    std::fs::create_dir(&audit_dir).expect("creating audit/");
    let file = audit_dir.join("audit-2026-11-25.jsonl");
    std::fs::write(&file, data).expect("writing the scratch log");
    let text = String::from_utf8_lossy(data);
    let core = verify_chain(log_lines("audit-2026-11-25.jsonl", &text, true));
    match aileron::stores::audit_log::verify(parent.path()) {
        Ok(report) => {
            let core = core.expect("the core verifier agrees with the log's");
            assert_eq!(
                (report.records, report.last_seq, &report.last_hash),
                (core.records, core.last_seq, &core.last_hash)
            );
        }
        Err(error) => {
            assert!(!error.to_string().trim().is_empty());
            assert!(!error.hint().trim().is_empty());
        }
    }
    if let Err(error) = aileron::stores::audit_log::query(parent.path(), &AuditFilter::default()) {
        assert!(!error.to_string().trim().is_empty());
    }

    // The chain the product's own sealing makes from these records always verifies.
    let mut prev = GENESIS_PREV.to_string();
    let mut sealed = String::new();
    let mut count = 0u64;
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<AuditRecord>(line) else { continue };
        count += 1;
        let record = seal(record.unsealed(), count, prev);
        prev = record.hash.clone();
        sealed.push_str(&record.to_line());
        sealed.push('\n');
    }
    if count > 0 {
        std::fs::write(&file, &sealed).expect("writing the scratch log");
        let report = aileron::stores::audit_log::verify(parent.path())
            .unwrap_or_else(|error| panic!("a freshly sealed chain does not verify: {error}\n{sealed}"));
        assert_eq!(report.records, count);
        let listed = aileron::stores::audit_log::query(
            parent.path(),
            &AuditFilter { limit: Some(10_000), ..AuditFilter::default() },
        )
        .unwrap_or_else(|error| panic!("a freshly sealed chain does not list: {error}\n{sealed}"));
        assert!(listed.len() as u64 <= count);
    }
}

/// `approvals.jsonl`: the pure replay, then the queue's start-up (torn-tail truncation, recovery
/// of running entries) on a file. A restart after a restart changes nothing more.
pub fn approvals_journal(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let replayed = replay(&text);
    assert!(replayed.intact_len <= text.len() && text.is_char_boundary(replayed.intact_len));
    for id in replayed.to_resume.iter().chain(replayed.recovered.iter().map(|(id, _)| id)) {
        assert!(replayed.entries.contains_key(id), "{id} is resumed or recovered but not an entry");
    }
    for error in &replayed.errors {
        assert!(!error.to_string().trim().is_empty());
    }
    assert_eq!(replay(&text[..replayed.intact_len]).entries, replayed.entries, "the intact prefix replays the same");

    let path = scratch("approvals.jsonl");
    std::fs::write(&path, data).expect("writing the scratch journal");
    if let Some(unreadable) = &replayed.unreadable {
        // A damaged line with events after it: the start is refused (its event may be what keeps
        // an action from running twice), naming the line, with a hint, and the file left as it was.
        let error = format!(
            "{:#}",
            aileron::stores::approvals::ApprovalQueue::open(&path).err().expect("a damaged journal is refused")
        );
        assert!(error.contains(&format!(":{}: ", unreadable.line)) && error.contains("\nhint: "), "{error}");
        assert_eq!(
            std::fs::read(&path).expect("reading the scratch journal"),
            data,
            "a refused journal is left as it was"
        );
        return;
    }
    let (queue, first) =
        aileron::stores::approvals::ApprovalQueue::open(&path).expect("the queue opens on any journal it can replay");
    for id in first.to_resume.iter().chain(&first.recovered) {
        assert!(queue.get(id).is_some());
    }
    drop(queue);
    let (_, second) = aileron::stores::approvals::ApprovalQueue::open(&path).expect("the queue reopens");
    assert!(
        second.recovered.is_empty(),
        "recovered twice: {:?} (the first recovery was not journaled)",
        second.recovered
    );
    assert_eq!(second.to_resume, first.to_resume);
}

/// `sessions.jsonl`: replay on start-up, then one session started and the journal replayed again.
pub fn sessions_journal(data: &[u8]) {
    use aileron::stores::sessions::{Confinement, SessionRegistry};
    let path = scratch("sessions.jsonl");
    std::fs::write(&path, data).expect("writing the scratch journal");
    let registry = SessionRegistry::open(path.clone());
    assert!(registry.active().is_empty(), "a session from a previous daemon is never active");
    let before = registry.all().len();
    let tokens = aileron::platform::principal::TokenRegistry::new("fuzz-admin-token".into());
    let started = registry.start(&tokens, "fuzz", None, Confinement::Unconfined, false).expect("journaling a session");
    drop(registry);
    let reopened = SessionRegistry::open(path);
    assert!(
        reopened.get(&started.session.session_id).is_some(),
        "a session journaled after this journal's last line is lost on replay"
    );
    assert_eq!(reopened.all().len(), before + 1);
}

/// `secrets.json`: the format's parse (no key needed) and the daemon's `Vault::open`.
pub fn vault_file(data: &[u8]) {
    match VaultFile::parse(data) {
        Ok(file) => {
            assert_eq!(file.to_bytes(), data, "only the canonical form parses");
            for (path, _) in file.entries() {
                assert!(file.metadata(path).is_some());
            }
        }
        Err(error) => assert!(!error.to_string().trim().is_empty()),
    }
    let path = scratch("secrets.json");
    std::fs::write(&path, data).expect("writing the scratch vault");
    match aileron::stores::vault::Vault::open(&path) {
        Ok(vault) => {
            assert_eq!(vault.state(), aileron::stores::vault::VaultState::Locked, "a vault file opens locked");
            let _ = vault.list();
        }
        Err(error) => assert!(!error.to_string().trim().is_empty()),
    }
}

/// `keyring.json` (trusted publisher keys).
pub fn keyring(data: &[u8]) {
    match Keyring::parse(data) {
        Ok(keyring) => {
            let again = Keyring::parse(&keyring.to_bytes()).expect("a written keyring parses");
            assert_eq!(again, keyring);
            let _ = keyring.entries();
        }
        Err(error) => assert!(!error.to_string().trim().is_empty()),
    }
}

/// What a launched agent sends its egress proxy first (`dataplane::agent_egress::ProxyHead`): never
/// panics; a CONNECT it accepts names a host of hostname bytes (or an IPv6 literal) and a non-zero
/// port, and its destination reads back as the same CONNECT; a refused request's record holds no
/// path or query.
pub fn agent_proxy_head(data: &[u8]) {
    use aileron::dataplane::agent_egress::ProxyHead;
    let head = String::from_utf8_lossy(data);
    match ProxyHead::parse(&head) {
        ProxyHead::Connect { host, port, destination } => {
            assert_ne!(port, 0);
            let plain = host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
            assert!(plain && !host.is_empty() && host.len() <= 253, "{host:?}");
            assert_eq!(host, host.to_ascii_lowercase());
            let again = ProxyHead::parse(&format!("CONNECT {destination} HTTP/1.1\r\n\r\n"));
            assert_eq!(again, ProxyHead::Connect { host, port, destination });
        }
        ProxyHead::NotConnect { method, shown } => {
            assert!(method.chars().count() <= 32);
            assert!(!shown.contains('/') && !shown.contains('?'), "a path or query in {shown:?}");
        }
        ProxyHead::Malformed { shown } => assert!(shown.chars().count() <= 256),
    }
}

/// `$AILERON_HOME/egress.toml`: never panics; an error names the file and says what to do; an
/// accepted allowlist's decisions do not depend on the host's case or a trailing dot.
pub fn egress_policy(data: &[u8]) {
    use aileron_core::policy::{AgentEgressPolicy, EgressMode};
    let Ok(text) = std::str::from_utf8(data) else { return };
    match AgentEgressPolicy::parse("egress.toml", text) {
        Ok(policy) => {
            for host in ["api.github.com", "WWW.Example.Org", "example.org", "127.0.0.1", ""] {
                let allowed = policy.allows(host);
                assert_eq!(allowed, policy.allows(&host.to_ascii_uppercase()), "{host}");
                assert_eq!(allowed, policy.allows(&format!("{host}.")), "{host}");
                if policy.mode == EgressMode::Open {
                    assert!(allowed);
                }
            }
        }
        Err(error) => check_parse_error(&error, "egress.toml", text),
    }
}

/// A launched agent's request against `[[proxy.operations]]` (SPEC §15, decision 0017). The bytes
/// are a request line's path, then after the first newline a GraphQL body. Never panics; a match
/// is one that the path, read as a server reads it, really satisfies (so no encoding makes a path
/// match a template it does not name; a literal is satisfied by itself with a format suffix too); the GraphQL reader either errs or finds every field the
/// document names.
pub fn proxy_operation(data: &[u8]) {
    use aileron_core::manifest::{PathTemplate, ProxyOperation, Segment, normalise_segment};
    use aileron_core::policy::{OperationIndex, OperationMatch, graphql_names};
    let text = String::from_utf8_lossy(data);
    let (path, body) = text.split_once('\n').unwrap_or((&text, ""));
    let operation = |name: &str, method: &str, template: &str, graphql: Option<&str>| ProxyOperation {
        name: name.to_string(),
        method: method.to_string(),
        host: "api.github.com:443".to_string(),
        path: PathTemplate::parse(template).expect("a valid template"),
        approval: graphql.is_some() || name.contains("merge"),
        graphql: graphql.map(str::to_string),
        query: None,
        headers: Vec::new(),
        format: None,
        service: None,
    };
    let index = OperationIndex::new(vec![
        ((), operation("merge", "PUT", "/repos/{owner}/{repo}/pulls/{number}/merge", None)),
        ((), operation("contents", "PUT", "/repos/{owner}/{repo}/contents/**", None)),
        ((), operation("write", "PUT", "/**", None)),
        ((), operation("graphql", "PUT", "/graphql", None)),
        ((), operation("graphql_merge", "PUT", "/graphql", Some("mergePullRequest"))),
    ]);
    let names = graphql_names(body.as_bytes(), aileron_core::policy::FormReadings::default());
    let _ = PathTemplate::parse(path);
    let found = index.match_request_with("PUT", "api.github.com:443", path, None, &[], names.as_ref().ok());
    let segments: Option<Vec<String>> = {
        let body = path.strip_prefix('/').map(|body| body.strip_suffix('/').unwrap_or(body));
        match body {
            None => None,
            Some("") => Some(Vec::new()),
            Some(body) => body.split('/').map(normalise_segment).collect(),
        }
    };
    match found {
        OperationMatch::NotCanonical => assert!(segments.is_none(), "{path:?} was canonical"),
        OperationMatch::None => panic!("`/**` covers every canonical path: {path:?}"),
        OperationMatch::Ambiguous(tied) => panic!("no two operations here tie: {path:?} {tied:?}"),
        OperationMatch::Matched { operation, .. } => {
            let segments = segments.expect("a match is canonical");
            let template = &operation.path;
            assert!(segments.len() >= template.segments.len(), "{path:?}");
            assert!(template.rest || segments.len() == template.segments.len(), "{path:?}");
            for (expected, actual) in template.segments.iter().zip(&segments) {
                if let Segment::Literal(literal) = expected {
                    // The literal itself, or with a format suffix as Rails routes it (`merge.json`
                    // is `merge`): decision 0017, the eighth re-attack.
                    let format = actual.strip_prefix(literal.as_str()).and_then(|rest| rest.strip_prefix('.'));
                    let suffixed = format
                        .is_some_and(|format| !format.is_empty() && format.chars().all(|c| c.is_ascii_alphanumeric()));
                    assert!(literal == actual || suffixed, "{path:?} matched {}", template.as_str());
                }
            }
            if let Some(field) = &operation.graphql {
                assert!(names.as_ref().is_ok_and(|names| names.contains(field)), "{path:?} {body:?}");
            }
        }
    }
    if let Ok(names) = names {
        for name in &names {
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty(), "{name:?}");
            assert!(body.contains(name.as_str()), "{name:?} not in the body");
        }
    }
}
