//! Installing by name from GitHub and GitLab releases with verified signatures (SPEC §3): a
//! publisher makes a key and packs a signed release with the CLI, a fake forge on loopback serves
//! it, the user trusts the key and installs by FQN; then each way a release can be wrong is tried
//! and must be refused with a clear message and a hint.

use serde_json::{Value, json};

use crate::cli::Cli;
use crate::fake_forge::{Answer, FakeForge};
use crate::support::{guest_wasm, manifest};

struct Setup {
    cli: Cli,
    forge: FakeForge,
    runtime: tokio::runtime::Runtime,
}

impl Setup {
    fn new() -> Setup {
        aileron::platform::process::install_crypto_provider();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let forge = runtime.block_on(FakeForge::start());
        Setup { cli: Cli::new(), forge, runtime }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        self.forge.env()
    }

    /// Runs the CLI with the forge environment; returns (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let output = self.cli.run_with(args, &env, None);
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, stdout, stderr) = self.run(args);
        assert_eq!(code, 0, "aileron {args:?}:\n{stdout}\n{stderr}");
        stdout
    }

    /// Runs the CLI on a real terminal (a pseudo-terminal from util-linux `script`), typing
    /// `input` ahead, as a person at a prompt would; returns the exit code and the screen
    /// (stdout and stderr as the terminal showed them, with the typed answers echoed).
    fn on_terminal(&self, args: &[&str], input: &str) -> (i32, String) {
        use std::io::Write;
        let quote = |word: &str| format!("'{}'", word.replace('\'', r"'\''"));
        let command_line: Vec<String> =
            std::iter::once(env!("CARGO_BIN_EXE_aileron")).chain(args.iter().copied()).map(quote).collect();
        let mut child = std::process::Command::new("script")
            .args(["--quiet", "--return", "--command", &command_line.join(" "), "/dev/null"])
            .env("AILERON_HOME", &self.cli.home)
            .env_remove("AILERON_URL")
            .env_remove("AILERON_TOKEN")
            .env_remove("AILERON_AUDIT_DIR")
            .envs(self.env())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("util-linux `script` runs the CLI on a pseudo-terminal");
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        let screen = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        (output.status.code().unwrap_or(-1), screen.replace("\r\n", "\n"))
    }

    /// A package directory for `fqn@version` (the http_get guest) and its signed tarball.
    fn pack(&self, fqn: &str, version: &str, key: Option<&str>) -> Vec<u8> {
        self.pack_with_hosts(fqn, version, key, &[])
    }

    fn pack_with_hosts(&self, fqn: &str, version: &str, key: Option<&str>, hosts: &[String]) -> Vec<u8> {
        self.pack_with(fqn, version, key, hosts, "")
    }

    /// [`Setup::pack_with_hosts`] with `extra` manifest text (a credential, say).
    fn pack_with(&self, fqn: &str, version: &str, key: Option<&str>, hosts: &[String], extra: &str) -> Vec<u8> {
        let name = fqn.replace("://", "-").replace('/', "-");
        let dir = self.cli.scratch().join(format!("src-{name}-{version}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connector.wasm"), guest_wasm("http_get")).unwrap();
        let text = manifest("http_get", hosts, extra)
            .replace("github://aileron-tests/http_get", fqn)
            .replace("version = \"1.0.0\"", &format!("version = \"{version}\""));
        std::fs::write(dir.join("manifest.toml"), text).unwrap();
        let out = self.cli.scratch().join(format!("{name}-{version}.tar.gz"));
        let mut args = vec!["connector", "pack", dir.to_str().unwrap(), "--out", out.to_str().unwrap()];
        if let Some(key) = key {
            args.extend(["--key", key]);
        }
        let hash = self.ok(&args);
        assert!(hash.trim().starts_with("sha256:"), "pack prints the hash: {hash}");
        std::fs::read(out).unwrap()
    }

    /// `aileron connector keygen --out <dir>`; returns (private key path, public key PEM).
    fn keygen(&self, label: &str) -> (String, String) {
        let dir = self.cli.scratch().join(format!("keys-{label}"));
        self.ok(&["connector", "keygen", "--out", dir.to_str().unwrap()]);
        let private = dir.join("publisher.key");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600, "the private key is 0600");
        (private.to_str().unwrap().to_string(), std::fs::read_to_string(dir.join("publisher.pub")).unwrap())
    }
}

fn unpack(tarball: &[u8]) -> (Vec<u8>, Vec<u8>, Option<Vec<u8>>) {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    let mut files = std::collections::HashMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
        files.insert(name, bytes);
    }
    (files.remove("connector.wasm").unwrap(), files.remove("manifest.toml").unwrap(), files.remove("signature.sig"))
}

#[test]
fn a_signed_release_installs_by_name_once_its_publisher_is_trusted() {
    let setup = Setup::new();
    let (key, public_pem) = setup.keygen("acme");
    let tarball = setup.pack("github://acme/widget", "1.2.0", Some(&key));
    setup.forge.answer("/acme/widget/releases/download/v1.2.0/aileron.tar.gz", Answer::Bytes(tarball.clone()));
    setup.forge.answer("/acme/widget/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.into_bytes()));

    // Signed by a key nobody trusts yet: refused, whatever the flags, with the command to fix it.
    let (code, _, stderr) =
        setup.run(&["connector", "install", "github://acme/widget@1.2.0", "--yes", "--allow-unsigned"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("signature_failure") && stderr.contains("aileron keyring trust github://acme/widget"),
        "{stderr}"
    );

    let fingerprint = setup.ok(&["keyring", "trust", "github://acme/widget", "--yes"]);
    assert!(fingerprint.trim().starts_with("sha256:"), "{fingerprint}");
    let (code, stdout, stderr) = setup.run(&["connector", "install", "github://acme/widget@1.2.0", "--yes"]);
    assert_eq!(code, 0, "a verified signature needs no --allow-unsigned: {stderr}");
    assert!(stderr.contains(&format!("signed by github://acme/widget (key {})", fingerprint.trim())), "{stderr}");
    let hash = stdout.trim().to_string();

    // Already installed: no network.
    let before = setup.forge.request_count();
    let (code, stdout, stderr) =
        setup.run(&["connector", "install", "github://acme/widget@1.2.0", "--yes", "--hash", &hash]);
    assert_eq!((code, stdout.trim()), (0, hash.as_str()), "{stderr}");
    assert_eq!(setup.forge.request_count(), before, "an installed (fqn, version, hash) fetches nothing");

    // `connector check` lists newer releases (pre-releases only with --pre).
    let listing =
        json!([{"tag_name": "v1.2.0"}, {"tag_name": "v1.3.0"}, {"tag_name": "v2.0.0-beta.1"}, {"tag_name": "nightly"}]);
    setup.forge.answer("/repos/acme/widget/releases", Answer::Bytes(listing.to_string().into_bytes()));
    let checked = setup.ok(&["connector", "check"]);
    assert!(
        checked.contains("github://acme/widget: installed 1.2.0, newer: 1.3.0") && !checked.contains("beta"),
        "{checked}"
    );
    let checked = setup.ok(&["connector", "check", "--pre"]);
    assert!(checked.contains("newer: 1.3.0, 2.0.0-beta.1"), "{checked}");

    // The audit trail names the signer; the keyring lists the key.
    let installed: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "connector.installed"])).unwrap();
    let record = &installed["items"][0]["payload"];
    assert_eq!(record["aileron.connector.signer_fingerprint"], fingerprint.trim(), "{record}");
    let keys: Value = serde_json::from_str(&setup.ok(&["keyring", "list", "--json"])).unwrap();
    assert_eq!(keys["items"][0]["authority"], "github://acme/widget");
    let trusted: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "keyring.trusted"])).unwrap();
    assert_eq!(trusted["items"].as_array().unwrap().len(), 1);

    // Revoked, the same signature no longer verifies for a new version.
    let tarball = setup.pack("github://acme/widget", "1.3.0", Some(&key));
    setup.forge.answer("/acme/widget/releases/download/v1.3.0/aileron.tar.gz", Answer::Bytes(tarball));
    setup.ok(&["keyring", "revoke", "--key", fingerprint.trim()]);
    let (code, _, stderr) = setup.run(&["connector", "install", "github://acme/widget@1.3.0", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("signature_failure"), "{stderr}");
    drop(setup.runtime);
}

#[test]
fn tampered_or_foreign_signatures_are_refused_and_never_bypassable() {
    let setup = Setup::new();
    let (acme_key, acme_pub) = setup.keygen("acme");
    let (other_key, other_pub) = setup.keygen("other");
    setup.forge.answer("/acme/widget/HEAD/keys/publisher.pub", Answer::Bytes(acme_pub.clone().into_bytes()));
    setup.forge.answer("/other/.github/HEAD/keys/publisher.pub", Answer::Bytes(other_pub.into_bytes()));
    setup.ok(&["keyring", "trust", "github://acme/widget", "--yes"]);
    // A key trusted for another owner never signs for acme.
    setup.ok(&["keyring", "trust", "github://other", "--yes"]);

    let good = setup.pack("github://acme/widget", "2.0.0", Some(&acme_key));
    let (wasm, manifest_bytes, signature) = unpack(&good);
    let signature = signature.unwrap();
    let other = setup.pack("github://acme/widget", "2.0.0", Some(&other_key));
    let (_, _, other_signature) = unpack(&other);
    let mut flipped = signature.clone();
    flipped[0] ^= 1;
    let mut tampered_manifest = manifest_bytes.clone();
    tampered_manifest.extend_from_slice(b"\n# edited after signing\n");
    let manifest_text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
    // acme's own key, signing other bytes (the next version's package).
    let next = setup.pack("github://acme/widget", "2.0.1", Some(&acme_key));
    let (_, _, next_signature) = unpack(&next);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("signed by a key of another owner", other),
        (
            "acme's valid signature over a swapped binary",
            aileron::stores::package::pack_tarball(
                &guest_wasm("echo"),
                &manifest_text(&manifest_bytes),
                Some(&signature),
            )
            .unwrap(),
        ),
        (
            "acme's key, signing other bytes",
            aileron::stores::package::pack_tarball(
                &wasm,
                &manifest_text(&manifest_bytes),
                Some(&next_signature.unwrap()),
            )
            .unwrap(),
        ),
        (
            "a corrupted signature",
            aileron::stores::package::pack_tarball(&wasm, &manifest_text(&manifest_bytes), Some(&flipped)).unwrap(),
        ),
        (
            "the manifest edited after signing",
            aileron::stores::package::pack_tarball(&wasm, &manifest_text(&tampered_manifest), Some(&signature))
                .unwrap(),
        ),
        (
            "a signature over other bytes",
            aileron::stores::package::pack_tarball(
                &guest_wasm("echo"),
                &manifest_text(&manifest_bytes),
                Some(&other_signature.unwrap()),
            )
            .unwrap(),
        ),
    ];
    for (case, tarball) in cases {
        setup.forge.answer("/acme/widget/releases/download/v2.0.0/aileron.tar.gz", Answer::Bytes(tarball));
        let (code, _, stderr) =
            setup.run(&["connector", "install", "github://acme/widget@2.0.0", "--yes", "--allow-unsigned"]);
        assert_eq!(code, 1, "{case}: {stderr}");
        assert!(stderr.contains("signature_failure") && stderr.contains("hint:"), "{case}: {stderr}");
    }
    // Not through the HTTP API either, whatever consent it claims.
    let tarball = setup.cli.scratch().join("forged.tar.gz");
    std::fs::write(
        &tarball,
        aileron::stores::package::pack_tarball(&wasm, &manifest_text(&manifest_bytes), Some(&flipped)).unwrap(),
    )
    .unwrap();
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(setup.cli.home.join("daemon.json")).unwrap()).unwrap();
    let client = reqwest::blocking::Client::new();
    let url = info["url"].as_str().unwrap();
    let token = info["token"].as_str().unwrap();
    let body = json!({ "source": tarball, "reference": "github://acme/widget@2.0.0", "expected_hash": "sha256:00", "consent": "flag", "allow_unsigned": true });
    let answer: Value = client
        .post(format!("{url}/v1/connectors/install"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(answer["error"]["class"], "signature_failure", "{answer}");

    // An unsigned package with consent by flag needs allow_unsigned, enforced by the daemon.
    let unsigned = setup.cli.scratch().join("unsigned.tar.gz");
    std::fs::write(
        &unsigned,
        aileron::stores::package::pack_tarball(&wasm, &manifest_text(&manifest_bytes), None).unwrap(),
    )
    .unwrap();
    let preview: Value = client
        .post(format!("{url}/v1/connectors/preview"))
        .bearer_auth(token)
        .json(&json!({ "source": unsigned, "reference": "github://acme/widget@2.0.0" }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(preview["signature"], "unsigned");
    let body = json!({ "source": unsigned, "reference": "github://acme/widget@2.0.0", "expected_hash": preview["hash"], "consent": "flag" });
    let response = client.post(format!("{url}/v1/connectors/install")).bearer_auth(token).json(&body).send().unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(response.json::<Value>().unwrap()["error"]["code"], "unsigned_refused");

    // Every refusal is in the audit log (SPEC §0: every failure leaves a record), none installed.
    let refused: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "connector.install_refused"]))
            .unwrap();
    let codes: Vec<&str> = refused["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["payload"]["aileron.install.refusal"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "signature_failure").count(),
        7,
        "six by the CLI, one through the API: {codes:?}"
    );
    assert_eq!(codes.iter().filter(|c| **c == "unsigned_refused").count(), 1, "{codes:?}");
    assert!(
        refused["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["payload"]["aileron.install.reference"] == "github://acme/widget@2.0.0")
    );
    let installed: Value = serde_json::from_str(&setup.ok(&["connector", "list", "--json"])).unwrap();
    assert_eq!(installed["items"], json!([]), "nothing was installed: {installed}");

    // Revoking an authority removes its keys at once, and is audited.
    setup.ok(&["keyring", "revoke", "github://other"]);
    let listed = setup.ok(&["keyring", "list"]);
    assert!(!listed.contains("github://other") && listed.contains("github://acme/widget"), "{listed}");
    let revoked: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "keyring.revoked"])).unwrap();
    assert_eq!(revoked["items"].as_array().unwrap().len(), 1, "{revoked}");
    assert!(revoked.to_string().contains("github://other"), "{revoked}");
    drop(setup.runtime);
}

#[test]
fn monorepo_gitlab_hash_pins_and_fetch_failures() {
    let setup = Setup::new();
    let (acme_key, acme_pub) = setup.keygen("acme");
    // Monorepo subpath: tag `connectors/slack/v2.0.0`, `/` escaped; signed by the owner's key.
    let slack = setup.pack("github://acme/integrations/connectors/slack", "2.0.0", Some(&acme_key));
    setup.forge.answer(
        "/acme/integrations/releases/download/connectors%2Fslack%2Fv2.0.0/aileron.tar.gz",
        Answer::Bytes(slack),
    );
    setup.forge.answer("/acme/.github/HEAD/keys/publisher.pub", Answer::Bytes(acme_pub.into_bytes()));
    setup.ok(&["keyring", "trust", "github://acme", "--yes"]);
    setup.ok(&["connector", "install", "github://acme/integrations/connectors/slack@2.0.0", "--yes"]);

    // GitLab layout, unsigned: --yes needs --allow-unsigned.
    let linear = setup.pack("gitlab://team/linear", "0.3.1", None);
    setup.forge.answer("/team/linear/-/releases/v0.3.1/downloads/aileron.tar.gz", Answer::Bytes(linear));
    let (code, _, stderr) = setup.run(&["connector", "install", "gitlab://team/linear@0.3.1", "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("--allow-unsigned"), "{stderr}");
    // A wrong pinned hash is refused.
    let (code, _, stderr) = setup.run(&[
        "connector",
        "install",
        "gitlab://team/linear@0.3.1",
        "--yes",
        "--allow-unsigned",
        "--hash",
        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    ]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("hash_mismatch") && stderr.contains("hint: these are not the bytes you pinned"),
        "{stderr}"
    );
    let hash = setup.ok(&["connector", "install", "gitlab://team/linear@0.3.1", "--yes", "--allow-unsigned"]);
    assert!(hash.trim().starts_with("sha256:"));

    // The manifest must be the requested connector.
    let impostor = setup.pack("github://acme/other", "1.0.0", Some(&acme_key));
    setup.forge.answer("/acme/widget/releases/download/v1.0.0/aileron.tar.gz", Answer::Bytes(impostor));
    let (code, _, stderr) = setup.run(&["connector", "install", "github://acme/widget@1.0.0", "--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("fqn_mismatch"), "{stderr}");

    // Fetch failures: 404 (not retriable), 500 (retriable), a redirect to another host, a scheme we do not know.
    setup.forge.answer("/acme/gone/releases/download/v1.0.0/aileron.tar.gz", Answer::Status(404));
    let (_, _, stderr) = setup.run(&["connector", "install", "github://acme/gone@1.0.0", "--yes"]);
    assert!(
        stderr.contains("fetch_failed") && stderr.contains("404") && stderr.contains("hint: check the name"),
        "{stderr}"
    );
    setup.forge.answer("/acme/flaky/releases/download/v1.0.0/aileron.tar.gz", Answer::Status(500));
    let (_, _, stderr) = setup.run(&["connector", "install", "github://acme/flaky@1.0.0", "--yes"]);
    assert!(stderr.contains("fetch_failed") && stderr.contains("500") && stderr.contains("try again"), "{stderr}");
    // Over the API the error says so itself: the 404 is final, the 500 may be tried again.
    let daemon: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(setup.cli.home.join("daemon.json")).unwrap()).unwrap();
    aileron::platform::process::install_crypto_provider();
    let preview = |reference: &str| -> serde_json::Value {
        reqwest::blocking::Client::new()
            .post(format!("{}/v1/connectors/preview", daemon["url"].as_str().unwrap()))
            .bearer_auth(daemon["token"].as_str().unwrap())
            .json(&serde_json::json!({ "reference": reference }))
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let (gone, flaky) = (preview("github://acme/gone@1.0.0"), preview("github://acme/flaky@1.0.0"));
    assert_eq!(
        (&gone["error"]["code"], &gone["error"]["retriable"]),
        (&serde_json::json!("fetch_failed"), &serde_json::json!(false)),
        "{gone}"
    );
    assert_eq!(
        (&flaky["error"]["code"], &flaky["error"]["retriable"]),
        (&serde_json::json!("fetch_failed"), &serde_json::json!(true)),
        "{flaky}"
    );
    setup.forge.answer(
        "/acme/moved/releases/download/v1.0.0/aileron.tar.gz",
        Answer::Redirect("http://127.0.0.2:9/aileron.tar.gz".into()),
    );
    let (_, _, stderr) = setup.run(&["connector", "install", "github://acme/moved@1.0.0", "--yes"]);
    assert!(stderr.contains("redirects to another host"), "{stderr}");
    // A same-host redirect is followed.
    let here = setup.pack("github://acme/here", "1.0.0", None);
    setup.forge.answer("/assets/here.tar.gz", Answer::Bytes(here));
    setup.forge.answer(
        "/acme/here/releases/download/v1.0.0/aileron.tar.gz",
        Answer::Redirect(format!("{}/assets/here.tar.gz", setup.forge.base_url())),
    );
    setup.ok(&["connector", "install", "github://acme/here@1.0.0", "--yes", "--allow-unsigned"]);
    let (code, _, stderr) = setup.run(&["connector", "install", "svn://acme/x@1.0.0", "--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("unknown_scheme"), "{stderr}");

    // The daemon fetches too when an API client gives no source.
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(setup.cli.home.join("daemon.json")).unwrap()).unwrap();
    let preview: Value = reqwest::blocking::Client::new()
        .post(format!("{}/v1/connectors/preview", info["url"].as_str().unwrap()))
        .bearer_auth(info["token"].as_str().unwrap())
        .json(&json!({ "reference": "gitlab://team/linear@0.3.1" }))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(preview["hash"], hash.trim(), "{preview}");
    drop(setup.runtime);
}

/// An action file published as a release of its own (`<fqn>/actions/<name>`).
fn action_text(source: &str, connector: &str, version: &str, hash: &str) -> String {
    format!(
        "+++\nname = \"fetch\"\nversion = \"{version}\"\nsource = \"{source}\"\n\n[[requires.connectors]]\nname = \"{connector}\"\n\
         version = \"{version}\"\nhash = \"{hash}\"\ncapabilities = [\"get\"]\n\n[match]\nintent = \"fetch a page\"\n\n\
         [[inputs]]\nname = \"url\"\ntype = \"string\"\ndescription = \"the url\"\n\n[[execute]]\nid = \"main\"\n\
         connector = \"{connector}\"\nop = \"get\"\n+++\n# Fetch\n\nFetches a page.\n"
    )
}

/// `keyring trust` + `action add <fqn>@<version>`: from nothing to a running third-party action,
/// its connector installed on the way with the action's hash pinned.
#[test]
fn action_add_by_name_installs_its_connectors_and_runs() {
    let setup = Setup::new();
    let upstream = setup.runtime.block_on(crate::fake_github::FakeGithub::start()).unwrap();
    let (key, public_pem) = setup.keygen("acme");
    // The connector takes an API key the action's capabilities do not list (a run of its `get`
    // without one still runs; one that asked for the key would be denied): said at add time.
    let credential = "[capabilities.credential]\nkind = \"api_key\"\nscope = \"your widgets\"\n";
    let tarball = setup.pack_with("github://acme/widget", "1.2.0", Some(&key), &[upstream.host_port()], credential);
    let (wasm, manifest_bytes, _) = unpack(&tarball);
    let hash = aileron_core::ContentHash::of_connector(&wasm, &manifest_bytes).to_string();
    setup.forge.answer("/acme/widget/releases/download/v1.2.0/aileron.tar.gz", Answer::Bytes(tarball));
    setup.forge.answer("/acme/.github/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.into_bytes()));
    let source = "github://acme/widget/actions/fetch@1.2.0";
    let file = setup.cli.scratch().join("fetch.md");
    std::fs::write(&file, action_text(source, "github://acme/widget", "1.2.0", &hash)).unwrap();
    let out = setup.cli.scratch().join("fetch.tar.gz");
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--key", &key, "--out", out.to_str().unwrap()]);
    setup.forge.answer(
        "/acme/widget/releases/download/actions%2Ffetch%2Fv1.2.0/aileron.tar.gz",
        Answer::Bytes(std::fs::read(&out).unwrap()),
    );

    setup.ok(&["keyring", "trust", "github://acme", "--yes"]);
    let (code, _, stderr) = setup.run(&["action", "add", source, "--yes"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("needs connector github://acme/widget@1.2.0") && stderr.contains("added action fetch"),
        "{stderr}"
    );
    // Checked once its connector is installed, so the warning is there for a package too.
    assert!(stderr.contains("injects an api_key credential") && stderr.contains("ask them to declare it"), "{stderr}");
    let (code, stdout, stderr) =
        setup.run(&["action", "run", "fetch", "--arg", &format!("url={}/echo", upstream.base_url())]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let installed: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "action.installed"])).unwrap();
    assert!(
        installed["items"][0]["payload"]["aileron.action.signature"]
            .as_str()
            .unwrap()
            .starts_with("signed by github://acme"),
        "{installed}"
    );

    // Adding again is idempotent; a different action under the same name needs --force.
    setup.ok(&["action", "add", source, "--yes"]);
    let changed = action_text(source, "github://acme/widget", "1.2.0", &hash)
        .replace("Fetches a page.", "Fetches a page, differently.");
    std::fs::write(&file, changed).unwrap();
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--key", &key, "--out", out.to_str().unwrap()]);
    setup.forge.answer(
        "/acme/widget/releases/download/actions%2Ffetch%2Fv1.2.0/aileron.tar.gz",
        Answer::Bytes(std::fs::read(&out).unwrap()),
    );
    let (code, _, stderr) = setup.run(&["action", "add", source, "--yes"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("action_exists") && stderr.contains("--force"), "{stderr}");
    setup.ok(&["action", "add", source, "--yes", "--force"]);

    // A tampered action package (edited after signing) is refused.
    let (_, signature) =
        aileron::stores::package::read_action_tarball(std::path::Path::new("x"), &std::fs::read(&out).unwrap())
            .unwrap();
    let tampered = action_text(source, "github://acme/widget", "1.2.0", &hash).replace("Fetches", "Exfiltrates");
    let forged = aileron::stores::package::pack_action_tarball(&tampered, signature.as_deref()).unwrap();
    setup.forge.answer("/acme/widget/releases/download/actions%2Ffetch%2Fv1.2.0/aileron.tar.gz", Answer::Bytes(forged));
    let (code, _, stderr) = setup.run(&["action", "add", source, "--yes", "--force"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("signature_failure"), "{stderr}");

    // A forged package naming a connector that is not installed is refused before that connector
    // is fetched or installed, even with --yes --allow-unsigned: the package is checked first.
    let lure = setup.pack_with_hosts("github://acme/lure", "6.6.6", None, &[upstream.host_port()]);
    let (lure_wasm, lure_manifest, _) = unpack(&lure);
    let lure_hash = aileron_core::ContentHash::of_connector(&lure_wasm, &lure_manifest).to_string();
    setup.forge.answer("/acme/lure/releases/download/v6.6.6/aileron.tar.gz", Answer::Bytes(lure));
    let lured = action_text(source, "github://acme/lure", "6.6.6", &lure_hash).replacen(
        "version = \"6.6.6\"",
        "version = \"1.2.0\"",
        1,
    );
    let forged = aileron::stores::package::pack_action_tarball(&lured, signature.as_deref()).unwrap();
    setup.forge.answer("/acme/widget/releases/download/actions%2Ffetch%2Fv1.2.0/aileron.tar.gz", Answer::Bytes(forged));
    let requests_before = setup.forge.requests().len();
    let (code, _, stderr) = setup.run(&["action", "add", source, "--yes", "--allow-unsigned", "--force"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("signature_failure") && !stderr.contains("needs connector"), "{stderr}");
    let fetched: Vec<String> = setup.forge.requests()[requests_before..].to_vec();
    assert!(
        !fetched.iter().any(|path| path.contains("/acme/lure/")),
        "the lure connector was never fetched: {fetched:?}"
    );
    let listing: Value = serde_json::from_str(&setup.ok(&["connector", "list", "--json"])).unwrap();
    assert!(!listing.to_string().contains("github://acme/lure"), "nothing was installed: {listing}");
    let refused: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "action.install_refused"]))
            .unwrap();
    let items = refused["items"].as_array().unwrap();
    assert!(
        items.iter().filter(|r| r["payload"]["aileron.install.refusal"] == "signature_failure").count() >= 2,
        "{refused}"
    );
    assert!(items.iter().any(|r| r["payload"]["aileron.install.refusal"] == "action_exists"), "{refused}");
    let installed: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "action.installed"])).unwrap();
    let payload = &installed["items"][0]["payload"];
    assert_eq!(payload["aileron.consent.decision"], "approved", "{payload}");
    assert!(payload["aileron.action.signer_fingerprint"].as_str().unwrap().starts_with("sha256:"), "{payload}");
    drop(setup.runtime);
}

/// `connector show | remove | gc`: removing is refused while an action needs the connector (the
/// error names it); gc removes what no action uses and compiled-cache files of removed modules.
#[test]
fn connectors_are_shown_removed_only_when_unused_and_collected() {
    let setup = Setup::new();
    let intents = "[provides]\nintents = [\"fetch a web page\", \"check a URL\"]\n";
    let hash = setup.cli.install_package(
        "http_get",
        &crate::support::guest_wasm("http_get"),
        &crate::support::manifest("http_get", &[], intents),
    );
    setup.cli.install_guest("echo", &[]);
    setup.cli.add_action(&crate::support::ActionSpec::new("fetch", "http_get", &hash, "get"));
    let shown = setup.ok(&["connector", "show", "github://aileron-tests/http_get"]);
    assert!(shown.contains(&hash) && shown.contains("used by    fetch"), "{shown}");
    // What the publisher says it is for (`[provides] intents`, seed 004): shown, granting nothing.
    assert!(shown.contains("for        fetch a web page, check a URL"), "{shown}");

    let (code, _, stderr) = setup.run(&["connector", "remove", "github://aileron-tests/http_get@1.0.0"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("connector_in_use") && stderr.contains("fetch") && stderr.contains("hint:"), "{stderr}");

    // A compiled artifact of a module that is not in the store any more.
    let cache = setup.cli.home.join("store/cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join(format!("{}-0000000000000000.cwasm", "ab".repeat(32))), b"stale").unwrap();
    setup.ok(&["connector", "gc"]);
    let listing: Value = serde_json::from_str(&setup.ok(&["connector", "list", "--json"])).unwrap();
    let left: Vec<&str> = listing["items"].as_array().unwrap().iter().map(|i| i["fqn"].as_str().unwrap()).collect();
    assert_eq!(left, ["github://aileron-tests/http_get"], "gc removed the unused echo only");
    assert!(!cache.join(format!("{}-0000000000000000.cwasm", "ab".repeat(32))).exists(), "the orphan artifact is gone");

    setup.ok(&["action", "remove", "fetch"]);
    setup.ok(&["connector", "remove", "github://aileron-tests/http_get@1.0.0"]);
    let listing: Value = serde_json::from_str(&setup.ok(&["connector", "list", "--json"])).unwrap();
    assert!(listing["items"].as_array().unwrap().is_empty());
    let removed: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "connector.removed"])).unwrap();
    assert_eq!(removed["items"].as_array().unwrap().len(), 2, "{removed}");
    drop(setup.runtime);
}

/// Writes the echo guest as a package directory and previews it; returns the preview and the
/// install body (consent by flag, unsigned accepted).
async fn echo_package(harness: &crate::support::Harness, dir_name: &str) -> (crate::support::TestResponse, Value) {
    let dir = harness.temp.path().join(dir_name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("connector.wasm"), guest_wasm("echo")).unwrap();
    std::fs::write(dir.join("manifest.toml"), manifest("echo", &[], "")).unwrap();
    let reference = "github://aileron-tests/echo@1.0.0";
    let preview =
        harness.request("POST", "/v1/connectors/preview", Some(json!({"source": dir, "reference": reference}))).await;
    let body = json!({"source": dir, "reference": reference, "expected_hash": preview.body["hash"], "consent": "flag", "allow_unsigned": true});
    (preview, body)
}

/// Eight installs of the same package at once: all succeed, one store entry, intact, one index line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_installs_of_one_connector_leave_one_intact_entry() {
    let harness = std::sync::Arc::new(crate::support::Harness::new());
    let (preview, body) = echo_package(&harness, "pkg-race").await;
    let installs: Vec<_> = (0..8)
        .map(|_| {
            let (harness, body) = (harness.clone(), body.clone());
            tokio::spawn(async move { harness.request("POST", "/v1/connectors/install", Some(body)).await.status })
        })
        .collect();
    for install in installs {
        assert_eq!(install.await.unwrap(), http::StatusCode::CREATED);
    }
    let entries = std::fs::read_dir(harness.home.store_dir().join("connectors/sha256")).unwrap().count();
    assert_eq!(entries, 1, "one content-addressed entry");
    let hash = aileron_core::ContentHash::parse(preview.body["hash"].as_str().unwrap()).unwrap();
    assert!(harness.state.services.store.load_verified(&hash).is_ok(), "the entry verifies");
    let index: Value =
        serde_json::from_slice(&std::fs::read(harness.home.store_dir().join("index/connectors.json")).unwrap())
            .unwrap();
    assert_eq!(index.as_object().unwrap().len(), 1, "{index}");
}

/// A store that cannot be written: a clear error naming the store and a hint; nothing installed,
/// nothing audited as installed.
#[tokio::test]
async fn an_unwritable_store_fails_the_install_cleanly() {
    let harness = crate::support::Harness::new();
    let entries = harness.home.store_dir().join("connectors/sha256");
    std::fs::remove_dir_all(&entries).unwrap();
    // Running as root, permissions would not stop us: a file where the directory must be does.
    std::fs::write(&entries, b"not a directory").unwrap();
    let (_, body) = echo_package(&harness, "pkg").await;
    let install = harness.request("POST", "/v1/connectors/install", Some(body)).await;
    assert_eq!(install.status.as_u16(), 507, "{}", install.body);
    assert_eq!(install.body["error"]["code"], "store_unwritable");
    assert!(install.body["error"]["hint"].as_str().unwrap().contains("nothing was installed"), "{}", install.body);
    assert!(harness.audit().await.iter().all(|r| r["event_type"] != "connector.installed"));
}

/// A manifest's `provenance_hash` must be the SHA-256 of the binary it ships with.
#[tokio::test]
async fn a_provenance_hash_that_does_not_match_the_binary_is_refused() {
    let harness = crate::support::Harness::new();
    let wasm = guest_wasm("echo");
    for (label, provenance, expected) in [
        ("matching", aileron_core::ContentHash::of_connector(&wasm, b"").to_string(), 200),
        ("wrong", format!("sha256:{}", "00".repeat(32)), 422),
    ] {
        let dir = harness.temp.path().join(format!("pkg-{label}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connector.wasm"), &wasm).unwrap();
        let text = manifest("echo", &[], "")
            .replace("version = \"1.0.0\"", &format!("version = \"1.0.0\"\nprovenance_hash = \"{provenance}\""));
        std::fs::write(dir.join("manifest.toml"), text).unwrap();
        let preview = harness
            .request(
                "POST",
                "/v1/connectors/preview",
                Some(json!({"source": dir, "reference": "github://aileron-tests/echo@1.0.0"})),
            )
            .await;
        assert_eq!(preview.status.as_u16(), expected, "{label}: {}", preview.body);
        if expected == 422 {
            assert_eq!(preview.body["error"]["class"], "hash_mismatch", "{}", preview.body);
        }
    }
}

/// A person at a terminal: a package signed by a publisher whose key is not trusted yet offers
/// `Trust publisher <authority>? [y/N]` (declining installs nothing), then the consent screen
/// once; the download shows a progress bar there. `action add` asks one consent per connector it
/// installs and none for a connector already present.
#[test]
fn at_a_terminal_the_user_trusts_the_publisher_and_consents_once_per_missing_connector() {
    let setup = Setup::new();
    setup.ok(&["daemon", "start"]);
    let (key, public_pem) = setup.keygen("acme");
    setup.forge.answer(
        "/acme/widget/releases/download/v1.2.0/aileron.tar.gz",
        Answer::Bytes(setup.pack("github://acme/widget", "1.2.0", Some(&key))),
    );
    setup.forge.answer("/acme/widget/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.clone().into_bytes()));

    let (code, screen) = setup.on_terminal(&["connector", "install", "github://acme/widget@1.2.0"], "n\n");
    assert_eq!(code, 1, "{screen}");
    assert!(
        screen.contains("Trust publisher github://acme/widget? [y/N]") && screen.contains("nothing was installed"),
        "{screen}"
    );
    assert!(!setup.ok(&["keyring", "list"]).contains("github://acme/widget"), "declined: not trusted");

    // Trusted, then the consent declined: nothing installed, and the decision is on record with
    // the hash that was shown (seed 004: consent is a decision like any other).
    let (code, screen) = setup.on_terminal(&["connector", "install", "github://acme/widget@1.2.0"], "y\nn\n");
    assert_eq!(code, 1, "{screen}");
    assert!(screen.contains("cancelled; nothing was installed (audit audit-"), "{screen}");
    let refused: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "connector.install_refused"]))
            .unwrap();
    let declined: Vec<&Value> = refused["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payload"]["aileron.install.refusal"] == "consent_declined")
        .collect();
    assert_eq!(declined.len(), 1, "{refused}");
    assert_eq!(declined[0]["payload"]["aileron.consent.decision"], "declined");
    assert_eq!(declined[0]["payload"]["aileron.install.reference"], "github://acme/widget@1.2.0");
    assert!(declined[0]["payload"]["aileron.connector.hash"].as_str().unwrap().starts_with("sha256:"), "{refused}");
    setup.ok(&["keyring", "revoke", "github://acme/widget"]);

    let (code, screen) = setup.on_terminal(&["connector", "install", "github://acme/widget@1.2.0"], "y\ny\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Trust publisher github://acme/widget? [y/N]"), "{screen}");
    assert!(
        screen.contains("signed by github://acme/widget (key sha256:"),
        "the consent screen names the signer: {screen}"
    );
    assert_eq!(screen.matches("[y/N]").count(), 2, "one trust question, one consent: {screen}");
    assert!(screen.contains("KiB/") && screen.contains('█'), "a progress bar on the terminal: {screen}");
    assert!(setup.ok(&["keyring", "list"]).contains("github://acme/widget"));

    // An action needing widget (present) and gadget (missing): one consent, for gadget only.
    let (gadget_wasm, gadget_manifest, _) = unpack(&setup.pack("github://acme/gadget", "0.3.1", Some(&key)));
    let gadget_hash = aileron_core::ContentHash::of_connector(&gadget_wasm, &gadget_manifest).to_string();
    setup.forge.answer(
        "/acme/gadget/releases/download/v0.3.1/aileron.tar.gz",
        Answer::Bytes(setup.pack("github://acme/gadget", "0.3.1", Some(&key))),
    );
    setup.forge.answer("/acme/.github/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.into_bytes()));
    setup.ok(&["keyring", "trust", "github://acme", "--yes"]);
    let listing: Value = serde_json::from_str(&setup.ok(&["connector", "list", "--json"])).unwrap();
    let widget_hash = listing["items"][0]["hash"].as_str().unwrap().to_string();
    let source = "github://acme/widget/actions/both@1.2.0";
    let text = format!(
        "+++\nname = \"both\"\nversion = \"1.2.0\"\nsource = \"{source}\"\n\n\
         [[requires.connectors]]\nname = \"github://acme/widget\"\nversion = \"1.2.0\"\nhash = \"{widget_hash}\"\ncapabilities = [\"get\"]\n\n\
         [[requires.connectors]]\nname = \"github://acme/gadget\"\nversion = \"0.3.1\"\nhash = \"{gadget_hash}\"\ncapabilities = [\"get\"]\n\n\
         [match]\nintent = \"fetch twice\"\n\n[[inputs]]\nname = \"url\"\ntype = \"string\"\ndescription = \"the url\"\n\n\
         [[execute]]\nid = \"one\"\nconnector = \"github://acme/widget\"\nop = \"get\"\n\n\
         [[execute]]\nid = \"two\"\nconnector = \"github://acme/gadget\"\nop = \"get\"\n+++\nFetches twice.\n"
    );
    let file = setup.cli.scratch().join("both.md");
    std::fs::write(&file, text).unwrap();
    let out = setup.cli.scratch().join("both.tar.gz");
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--key", &key, "--out", out.to_str().unwrap()]);
    setup.forge.answer(
        "/acme/widget/releases/download/actions%2Fboth%2Fv1.2.0/aileron.tar.gz",
        Answer::Bytes(std::fs::read(&out).unwrap()),
    );
    let (code, screen) = setup.on_terminal(&["action", "add", source], "y\n");
    assert_eq!(code, 0, "{screen}");
    assert_eq!(screen.matches("[y/N]").count(), 1, "one consent, for the missing connector: {screen}");
    assert!(
        screen.contains("github://acme/gadget@0.3.1") && !screen.contains("needs connector github://acme/widget"),
        "{screen}"
    );
    assert!(screen.contains("added action both"), "{screen}");
    drop(setup.runtime);
}

/// `action add <file>.tar.gz`: a local action package made by `action pack` installs as the
/// published one would — its signature checked against the keyring for the FQN its `source`
/// names, an unsigned one only with --allow-unsigned, its missing connectors installed on the way.
#[test]
fn action_add_of_a_local_package_is_verified_like_a_published_one() {
    let setup = Setup::new();
    let (key, public_pem) = setup.keygen("acme");
    let tarball = setup.pack("github://acme/widget", "1.2.0", Some(&key));
    let (wasm, manifest_bytes, _) = unpack(&tarball);
    let hash = aileron_core::ContentHash::of_connector(&wasm, &manifest_bytes).to_string();
    setup.forge.answer("/acme/widget/releases/download/v1.2.0/aileron.tar.gz", Answer::Bytes(tarball));
    setup.forge.answer("/acme/.github/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.into_bytes()));
    let text = action_text("github://acme/widget/actions/fetch@1.2.0", "github://acme/widget", "1.2.0", &hash);
    let file = setup.cli.scratch().join("fetch.md");
    std::fs::write(&file, &text).unwrap();
    let signed = setup.cli.scratch().join("signed.tar.gz");
    let unsigned = setup.cli.scratch().join("unsigned.tar.gz");
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--key", &key, "--out", signed.to_str().unwrap()]);
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--out", unsigned.to_str().unwrap()]);

    let (code, _, stderr) = setup.run(&["action", "add", signed.to_str().unwrap(), "--yes"]);
    assert_eq!(code, 1, "no key trusted yet: {stderr}");
    assert!(stderr.contains("signature_failure") && stderr.contains("keyring trust"), "{stderr}");
    let (code, _, stderr) = setup.run(&["action", "add", unsigned.to_str().unwrap(), "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("unsigned_refused") && stderr.contains("--allow-unsigned"), "{stderr}");

    setup.ok(&["keyring", "trust", "github://acme", "--yes"]);
    let (code, _, stderr) = setup.run(&["action", "add", signed.to_str().unwrap(), "--yes"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("needs connector github://acme/widget@1.2.0") && stderr.contains("added action fetch"),
        "{stderr}"
    );
    let installed: Value =
        serde_json::from_str(&setup.ok(&["audit", "list", "--json", "--event-type", "action.installed"])).unwrap();
    assert!(
        installed["items"][0]["payload"]["aileron.action.signature"]
            .as_str()
            .unwrap()
            .starts_with("signed by github://acme"),
        "{installed}"
    );

    // Edited after signing: refused, whatever the flags.
    let (_, signature) =
        aileron::stores::package::read_action_tarball(&signed, &std::fs::read(&signed).unwrap()).unwrap();
    let forged = setup.cli.scratch().join("forged.tar.gz");
    std::fs::write(
        &forged,
        aileron::stores::package::pack_action_tarball(&text.replace("Fetches", "Exfiltrates"), signature.as_deref())
            .unwrap(),
    )
    .unwrap();
    let (code, _, stderr) =
        setup.run(&["action", "add", forged.to_str().unwrap(), "--yes", "--allow-unsigned", "--force"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("signature_failure"), "{stderr}");
    // The same file unsigned: the same bytes as installed, accepted with --allow-unsigned.
    setup.ok(&["action", "add", unsigned.to_str().unwrap(), "--allow-unsigned"]);
    drop(setup.runtime);
}

/// With the publisher's key trusted, a signature that does not verify means the contents changed
/// after signing: the hint says so instead of advising to trust a key.
#[test]
fn a_package_changed_after_signing_is_named_as_such_when_its_key_is_trusted() {
    let setup = Setup::new();
    let (key, public_pem) = setup.keygen("acme");
    setup.forge.answer("/acme/.github/HEAD/keys/publisher.pub", Answer::Bytes(public_pem.into_bytes()));
    setup.ok(&["keyring", "trust", "github://acme", "--yes"]);
    let source = "github://acme/widget/actions/fetch@1.2.0";
    let text = action_text(source, "github://acme/widget", "1.2.0", &format!("sha256:{}", "0".repeat(64)));
    let file = setup.cli.scratch().join("fetch.md");
    std::fs::write(&file, &text).unwrap();
    let out = setup.cli.scratch().join("fetch.tar.gz");
    setup.ok(&["action", "pack", file.to_str().unwrap(), "--key", &key, "--out", out.to_str().unwrap()]);
    let (_, signature) = aileron::stores::package::read_action_tarball(&out, &std::fs::read(&out).unwrap()).unwrap();
    let forged =
        aileron::stores::package::pack_action_tarball(&text.replace("Fetches", "Exfiltrates"), signature.as_deref())
            .unwrap();
    setup.forge.answer("/acme/widget/releases/download/actions%2Ffetch%2Fv1.2.0/aileron.tar.gz", Answer::Bytes(forged));
    let (code, _, stderr) = setup.run(&["action", "add", source, "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    let hints: Vec<&str> = stderr.lines().filter(|l| l.starts_with("hint:")).collect();
    assert!(stderr.contains("signature_failure") && hints.len() == 1, "{stderr}");
    assert!(hints[0].contains("changed after it was signed") && !hints[0].contains("trust its key"), "{stderr}");

    // A connector package the same way: its manifest edited after signing.
    let signed = setup.cli.scratch().join("widget-signed.tar.gz");
    std::fs::write(&signed, setup.pack("github://acme/widget", "1.2.0", Some(&key))).unwrap();
    let package = aileron::stores::package::load_package(&signed).unwrap();
    let edited = format!("{}\n# edited after signing\n", package.manifest_text);
    let forged = setup.cli.scratch().join("widget-forged.tar.gz");
    std::fs::write(
        &forged,
        aileron::stores::package::pack_tarball(&package.wasm, &edited, package.signature.as_deref()).unwrap(),
    )
    .unwrap();
    let (code, _, stderr) =
        setup.run(&["connector", "install", "github://acme/widget@1.2.0", "--from", forged.to_str().unwrap(), "--yes"]);
    assert_eq!(code, 1, "{stderr}");
    let hints: Vec<&str> = stderr.lines().filter(|l| l.starts_with("hint:")).collect();
    assert!(stderr.contains("signature_failure") && hints.len() == 1, "{stderr}");
    assert!(hints[0].contains("changed after it was signed") && !hints[0].contains("trust its key"), "{stderr}");
}
