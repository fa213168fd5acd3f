//! Receipts anyone can verify (SPEC §17): the daemon keeps an RFC 6962 tree over the audit
//! log's lines and signs C2SP checkpoints; `aileron audit receipt` writes a C2SP tlog-proof that
//! `aileron audit verify --receipt --key` checks with no access to the log — and so do
//! independent implementations of the formats from crates.io (`signed_note`, `tlog_tiles`).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use crate::cli::Cli;
use crate::support::copy_dir;

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The parts of a tlog-proof, read by hand (not with our parser): `(record line, index, proof
/// hashes, signed checkpoint)`.
fn read_proof(text: &str) -> (Vec<u8>, u64, Vec<[u8; 32]>, String) {
    let (head, checkpoint) = text.split_once("\n\n").expect("a blank line before the checkpoint");
    let mut lines = head.lines();
    assert_eq!(lines.next(), Some("c2sp.org/tlog-proof@v1"));
    let extra = B64.decode(lines.next().unwrap().strip_prefix("extra ").expect("the record as extra")).unwrap();
    let index = lines.next().unwrap().strip_prefix("index ").unwrap().parse().unwrap();
    let hashes = lines.map(|line| B64.decode(line).unwrap().try_into().unwrap()).collect();
    (extra, index, hashes, checkpoint.to_string())
}

#[test]
fn a_receipt_proves_a_record_offline_to_us_and_to_independent_verifiers() {
    let cli = Cli::with_echo_action("count");
    cli.ok(&["daemon", "start"]);
    for _ in 0..6 {
        cli.ok(&["action", "run", "count"]);
    }
    let key = cli.ok(&["audit", "key"]).trim().to_string();
    assert!(key.starts_with("aileron.local/") && key.split('+').count() >= 3, "{key}");
    let listed: Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--json", "--event-type", "action.executed"])).unwrap();
    let run = &listed["items"][2];
    let audit_id = run["audit_id"].as_str().unwrap();
    let receipt = cli.scratch().join("run.tlog-proof");
    cli.ok(&["audit", "receipt", audit_id, "--out", receipt.to_str().unwrap()]);

    // Offline: only the receipt and the key. The daemon is stopped and the home is gone from
    // the picture (the check reads neither).
    cli.ok(&["daemon", "stop"]);
    let offline = Cli::new();
    let checked = offline.ok(&["audit", "verify", "--receipt", receipt.to_str().unwrap(), "--key", &key]);
    assert!(checked.starts_with("ok: record") && checked.contains(audit_id), "{checked}");

    // Independently: the note verifies with `signed_note`, the checkpoint parses with
    // `tlog_tiles`, and its record proof checks with `tlog_tiles::check_record`.
    let text = std::fs::read_to_string(&receipt).unwrap();
    let (line, index, hashes, checkpoint) = read_proof(&text);
    let record: Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(record["audit_id"], audit_id);
    assert_eq!(index, record["seq"].as_u64().unwrap() - 1);
    let verifier = signed_note::StandardVerifier::new(&key).expect("our verifier key parses");
    let note = signed_note::Note::from_bytes(checkpoint.as_bytes()).expect("our note parses");
    let verifiers = signed_note::VerifierList::new(vec![Box::new(verifier)]);
    note.verify(&verifiers).expect("our signature verifies");
    let parsed = tlog_tiles::Checkpoint::from_bytes(note.text()).expect("our checkpoint parses");
    assert_eq!(parsed.origin(), key.split('+').next().unwrap());
    let proof: Vec<tlog_tiles::Hash> = hashes.iter().map(|h| tlog_tiles::Hash(*h)).collect();
    tlog_tiles::check_record(&proof, parsed.size(), *parsed.hash(), index, tlog_tiles::record_hash(&line))
        .expect("our inclusion proof checks");

    // A receipt whose record was changed, or checked with another log's key, fails.
    let forged_line = String::from_utf8(line.clone()).unwrap().replace(audit_id, "aud-forged");
    assert_ne!(forged_line.as_bytes(), line.as_slice());
    let forged = text.replacen(&B64.encode(&line), &B64.encode(forged_line.as_bytes()), 1);
    std::fs::write(cli.scratch().join("forged.tlog-proof"), forged).unwrap();
    let refused = offline.run(&[
        "audit",
        "verify",
        "--receipt",
        cli.scratch().join("forged.tlog-proof").to_str().unwrap(),
        "--key",
        &key,
    ]);
    assert!(!refused.status.success() && stderr(&refused).contains("not entry"), "{}", stderr(&refused));
    let other_key = {
        let other = Cli::with_echo_action("other");
        other.ok(&["daemon", "start"]);
        other.ok(&["audit", "key"]).trim().to_string()
    };
    let wrong = offline.run(&["audit", "verify", "--receipt", receipt.to_str().unwrap(), "--key", &other_key]);
    assert!(!wrong.status.success() && stderr(&wrong).contains("not signed by"), "{}", stderr(&wrong));

    // The tenth re-attack: the log's key alone proves a receipt, and whoever holds the home holds
    // it. With the witness's key (published beside the checkpoints) the cosignature is required:
    // the receipt as issued passes, one whose checkpoint kept only the log's signature does not.
    let published = cli.scratch().join("published");
    cli.ok(&["audit", "publish", "--to", published.to_str().unwrap()]);
    let witness_key = std::fs::read_to_string(published.join("witness.vkey")).unwrap().trim().to_string();
    let with_witness = |file: &std::path::Path| {
        let args =
            ["audit", "verify", "--receipt", file.to_str().unwrap(), "--key", &key, "--witness-key", &witness_key];
        offline.run(&args)
    };
    assert!(with_witness(&receipt).status.success(), "{}", stderr(&with_witness(&receipt)));
    let witness_name = witness_key.split('+').next().unwrap();
    let uncosigned: String = text
        .lines()
        .filter(|line| !line.starts_with(&format!("— {witness_name} ")))
        .map(|line| format!("{line}\n"))
        .collect();
    assert_ne!(uncosigned, text, "the receipt carried the witness's cosignature");
    let stripped = cli.scratch().join("uncosigned.tlog-proof");
    std::fs::write(&stripped, &uncosigned).unwrap();
    let alone = offline.run(&["audit", "verify", "--receipt", stripped.to_str().unwrap(), "--key", &key]);
    assert!(alone.status.success(), "the log's key alone still proves it: {}", stderr(&alone));
    let refused = with_witness(&stripped);
    assert!(
        !refused.status.success() && stderr(&refused).contains("not cosigned by the witness"),
        "{}",
        stderr(&refused)
    );
}

/// Records cut from the log's end with the chain's own safeguards removed too (the head anchor
/// and the journal, which the chain check relies on to see a cut end) are still caught: a signed
/// checkpoint covers more records than the log then holds.
#[test]
fn a_log_cut_below_a_signed_checkpoint_fails_verification() {
    let cli = Cli::with_echo_action("count");
    cli.ok(&["daemon", "start"]);
    for _ in 0..4 {
        cli.ok(&["action", "run", "count"]);
    }
    cli.ok(&["daemon", "stop"]);
    let checkpoint = cli.ok(&["audit", "checkpoint"]);
    let size: u64 = checkpoint.lines().nth(1).unwrap().parse().unwrap();
    let verified = cli.ok(&["audit", "verify"]);
    assert!(verified.contains("signed checkpoint(s) match the log"), "{verified}");

    cut_last_records(&cli.home.join("audit"), 2);
    let broken = cli.run(&["audit", "verify"]);
    assert!(!broken.status.success(), "the cut end is caught");
    assert!(stderr(&broken).contains(&format!("checkpoint {size} covers more")), "{}", stderr(&broken));
}

/// Someone holding the home cuts the log and, to cover it, removes the checkpoints and the tree
/// and lets the daemon sign new ones with the log's key: the witness refuses to cosign them (it
/// cosigned a longer tree), so `verify` names the uncosigned checkpoint.
#[test]
fn a_cut_log_signed_again_with_the_logs_key_lacks_the_witness() {
    let cli = Cli::with_echo_action("count");
    cli.ok(&["daemon", "start"]);
    for _ in 0..4 {
        cli.ok(&["action", "run", "count"]);
    }
    cli.ok(&["daemon", "stop"]);
    assert!(cli.ok(&["audit", "verify"]).contains("signed checkpoint(s) match the log"));
    let audit = cli.home.join("audit");
    cut_last_records(&audit, 2);
    std::fs::remove_dir_all(audit.join("checkpoints")).unwrap();
    std::fs::remove_dir_all(audit.join("tree")).unwrap();
    // The daemon rebuilds the tree from the cut log and checkpoints it at shutdown.
    cli.ok(&["daemon", "start"]);
    cli.ok(&["daemon", "stop"]);
    let daemon_log = std::fs::read_to_string(cli.home.join("daemon.log")).unwrap_or_default();
    assert!(daemon_log.contains("witness did not cosign"), "{daemon_log}");
    let caught = cli.run(&["audit", "verify"]);
    assert!(!caught.status.success());
    assert!(stderr(&caught).contains("not cosigned by the witness"), "{}", stderr(&caught));
}

/// The tenth re-attack: with the daemon stopped, the log cut and re-chained and its checkpoints,
/// tree, anchor and journal removed, `verify` said "ok" although the witness on this machine had
/// cosigned the longer log. The witness's own record (outside the home) is checked too.
#[test]
fn a_log_cut_with_its_checkpoints_removed_falls_short_of_what_the_witness_cosigned() {
    let cli = Cli::with_echo_action("count");
    cli.session_of_runs("count", 4);
    let verified = cli.ok(&["audit", "verify"]);
    assert!(verified.contains("the witness on this machine last cosigned its first"), "{verified}");
    let audit = cli.home.join("audit");
    cut_last_records(&audit, 2);
    std::fs::remove_dir_all(audit.join("checkpoints")).unwrap();
    std::fs::remove_dir_all(audit.join("tree")).unwrap();
    let caught = cli.run(&["audit", "verify"]);
    assert!(!caught.status.success(), "{}", String::from_utf8_lossy(&caught.stdout));
    assert!(stderr(&caught).contains("the witness on this machine cosigned a checkpoint of"), "{}", stderr(&caught));
    // A record edited in place and the chain recomputed is caught the same way (the root differs);
    // here the log's key itself replaced: named as such.
    std::fs::remove_file(audit.join("log.key")).unwrap();
    let caught = cli.run(&["audit", "verify"]);
    assert!(!caught.status.success());
    assert!(stderr(&caught).contains("the log's key was replaced or removed"), "{}", stderr(&caught));
}

/// The ninth re-attack: the audit directory deleted whole (log and key) and a new log begun was
/// cosigned at once, the witness forgetting the log it followed. It now cosigns no log of another
/// key until the user says so (`aileron audit accept-log`, which offers the new log's checkpoints
/// again), and `verify` fails meanwhile.
#[test]
fn a_log_begun_again_is_not_cosigned_until_the_user_accepts_it() {
    let cli = Cli::with_echo_action("count");
    cli.session_of_runs("count", 3);
    assert!(cli.ok(&["audit", "verify"]).contains("the witness on this machine last cosigned"));
    std::fs::remove_dir_all(cli.home.join("audit")).unwrap();
    cli.session_of_runs("count", 1);
    let daemon_log = std::fs::read_to_string(cli.home.join("daemon.log")).unwrap_or_default();
    assert!(daemon_log.contains("this witness follows the log signed by"), "{daemon_log}");
    let caught = cli.run(&["audit", "verify"]);
    assert!(!caught.status.success());
    // The new log's own checkpoint, which the witness refused, is named first.
    assert!(stderr(&caught).contains("checkpoint 1 is not cosigned by the witness"), "{}", stderr(&caught));
    assert!(stderr(&caught).contains("aileron audit accept-log"), "{}", stderr(&caught));
    let accepted = cli.run(&["audit", "accept-log"]);
    assert!(accepted.status.success() && stderr(&accepted).contains("kept in its record"), "{}", stderr(&accepted));
    cli.ok(&["audit", "checkpoint"]);
    let verified = cli.ok(&["audit", "verify"]);
    assert!(verified.contains("the witness on this machine last cosigned"), "{verified}");
    let state = std::fs::read_to_string(cli.scratch().join("home-witness/witness.state")).unwrap();
    assert_eq!(state.lines().filter(|line| line.starts_with("earlier aileron.local/")).count(), 1, "{state}");
}

/// A home rolled back whole — log, anchor, journal, checkpoints — is consistent with itself, so
/// the witness on this machine (outside the home) and a copy kept elsewhere show it: `audit
/// publish` copies the cosigned checkpoints out, and `verify --published` finds the log shorter
/// than one of them.
#[test]
fn a_home_rolled_back_whole_is_caught_by_its_published_checkpoints() {
    let cli = Cli::with_echo_action("count");
    let runs = |n: usize| cli.session_of_runs("count", n);
    runs(3);
    let audit = cli.home.join("audit");
    let saved = cli.scratch().join("audit-earlier");
    copy_dir(&audit, &saved);
    runs(3);
    let published = cli.scratch().join("published");
    cli.ok(&["audit", "publish", "--to", published.to_str().unwrap()]);
    let checked = cli.ok(&["audit", "verify", "--published", published.to_str().unwrap()]);
    assert!(checked.contains("published, cosigned checkpoint(s) match the log"), "{checked}");

    std::fs::remove_dir_all(&audit).unwrap();
    copy_dir(&saved, &audit);
    let witnessed = cli.run(&["audit", "verify"]);
    assert!(!witnessed.status.success(), "the rolled-back home falls short of its witness");
    assert!(stderr(&witnessed).contains("the witness on this machine cosigned"), "{}", stderr(&witnessed));
    let caught = cli.run(&["audit", "verify", "--published", published.to_str().unwrap()]);
    assert!(!caught.status.success());
    assert!(stderr(&caught).contains("covers more"), "{}", stderr(&caught));
}

/// Cuts the last `n` records from the newest daily file, with the chain's own safeguards (head
/// anchor, journal) removed as someone covering a cut would.
fn cut_last_records(audit: &std::path::Path, n: usize) {
    let mut daily: Vec<_> = std::fs::read_dir(audit)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    daily.sort();
    let newest = daily.last().unwrap();
    let text = std::fs::read_to_string(newest).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    std::fs::write(newest, kept[..kept.len() - n].iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    std::fs::remove_file(audit.join("chain-head")).unwrap();
    std::fs::remove_file(audit.join("journal")).unwrap();
}

/// A record removed from the middle of the log breaks the chain at the next one.
#[test]
fn a_record_removed_mid_log_fails_verification() {
    let cli = Cli::with_echo_action("count");
    cli.ok(&["daemon", "start"]);
    for _ in 0..4 {
        cli.ok(&["action", "run", "count"]);
    }
    cli.ok(&["daemon", "stop"]);
    let audit = cli.home.join("audit");
    let daily = std::fs::read_dir(&audit)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&daily).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(lines.len() / 2);
    std::fs::write(&daily, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let broken = cli.run(&["audit", "verify"]);
    assert!(!broken.status.success());
    assert!(stderr(&broken).contains("broken"), "{}", stderr(&broken));
}

/// The console's run view offers the run's receipt as a file; it checks offline with the log's
/// key, and a request without the console's cookie is refused.
#[tokio::test]
async fn the_console_offers_a_runs_receipt_for_download() {
    use crate::support::{ActionSpec, Harness, PORT, guest_wasm, manifest};
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    let added = harness.add_action("count.md", &ActionSpec::new("count", "echo", &hash, "echo").render()).await;
    assert_eq!(added.status, http::StatusCode::CREATED, "{}", added.body);
    let ran = harness.run("count", serde_json::json!({})).await;
    let audit_id = ran.body["audit_id"].as_str().unwrap().to_string();
    let cookie = harness.console_cookie().await;
    let get = |path: String, cookie: Option<String>| {
        let harness = &harness;
        async move {
            let mut request = http::Request::builder().uri(path).header("host", format!("127.0.0.1:{PORT}"));
            if let Some(cookie) = cookie {
                request = request.header("cookie", cookie);
            }
            harness.send(request, None).await
        }
    };
    let page = get(format!("/activity?run={audit_id}"), Some(cookie.clone())).await;
    assert!(page.body.as_str().unwrap_or_default().contains(&format!("/activity/receipt/{audit_id}")));
    let download = get(format!("/activity/receipt/{audit_id}"), Some(cookie)).await;
    assert_eq!(download.status, http::StatusCode::OK, "{:?}", download.body);
    assert!(download.headers["content-disposition"].to_str().unwrap().contains(".tlog-proof"));
    let text = download.body.as_str().unwrap().to_string();
    let audit_dir = harness.home.audit_parent().unwrap().join("audit");
    let key = aileron::stores::audit_log::tree::log_signer(&audit_dir).unwrap().verifier_key();
    let (line, _) = aileron::stores::audit_log::tree::check_receipt(&text, &key, None).unwrap();
    assert!(String::from_utf8(line).unwrap().contains(&audit_id));
    let refused = get(format!("/activity/receipt/{audit_id}"), None).await;
    assert_ne!(refused.status, http::StatusCode::OK, "the console's cookie is needed");
}

/// The daemon's `GET /v1/audit/verify?checkpoints=true` checks the signed checkpoints too (the
/// crash campaign asks it after every kill); without the parameter it stays the chain check.
#[tokio::test]
async fn the_daemons_verification_checks_the_checkpoints_when_asked() {
    use crate::support::{ActionSpec, Harness, guest_wasm, manifest};
    let harness = Harness::new();
    let hash = harness.install("echo", &guest_wasm("echo"), &manifest("echo", &[], "")).await;
    harness.add_action("count.md", &ActionSpec::new("count", "echo", &hash, "echo").render()).await;
    for _ in 0..3 {
        harness.run("count", serde_json::json!({})).await;
    }
    let audit = harness.home.audit_parent().unwrap().join("audit");
    let witness = aileron::stores::audit_log::witness::Witness::open(&harness.home.witness_dir()).unwrap();
    let tree = aileron::stores::audit_log::tree::Tree::read_only(&audit).unwrap();
    let signer = aileron::stores::audit_log::tree::log_signer(&audit).unwrap();
    aileron::stores::audit_log::tree::issue_checkpoint(&audit, &tree, &signer, tree.size(), Some(&witness)).unwrap();
    let plain = harness.request("GET", "/v1/audit/verify", None).await;
    assert_eq!((plain.body["ok"].as_bool(), plain.body.get("checkpoints")), (Some(true), None), "{}", plain.body);
    let checked = harness.request("GET", "/v1/audit/verify?checkpoints=true", None).await;
    assert_eq!(checked.body["ok"], true, "{}", checked.body);
    assert_eq!(checked.body["checkpoints"]["verified"], 1, "{}", checked.body);
    assert_eq!(checked.body["checkpoints"]["newest"], tree.size(), "{}", checked.body);
    // A checkpoint someone signed with the log's key alone (no witness) fails it.
    std::fs::remove_dir_all(audit.join(aileron::stores::audit_log::tree::CHECKPOINTS_DIR)).unwrap();
    aileron::stores::audit_log::tree::issue_checkpoint(&audit, &tree, &signer, tree.size(), None).unwrap();
    let refused = harness.request("GET", "/v1/audit/verify?checkpoints=true", None).await;
    assert_eq!(refused.body["ok"], false, "{}", refused.body);
    assert!(refused.body["problem"].as_str().unwrap().contains("not cosigned"), "{}", refused.body);
}
