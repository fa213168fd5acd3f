//! `aileron audit list|show|verify|key|checkpoint|receipt`. `verify`, `key`, `checkpoint` and
//! `receipt` read the files directly, so they work with the daemon stopped (and after a crash).

use aileron_core::tlog::{CosignatureVerifier, NoteVerifier};
use aileron_core::vocabulary::keys;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::{CliError, CliResult, ExitStatus, print_json};
use crate::platform::home::Home;
use crate::surfaces::client::DaemonClient;

#[derive(Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

/// `aileron audit list`: each filter maps to the `GET /v1/audit` parameter of the same name.
#[derive(Args)]
struct ListArgs {
    /// Only records at or after this RFC 3339 timestamp or YYYY-MM-DD date
    #[arg(long)]
    since: Option<String>,
    /// Only records before this RFC 3339 timestamp or YYYY-MM-DD date
    #[arg(long)]
    until: Option<String>,
    #[arg(long)]
    event_type: Option<String>,
    /// Only event types of this family (e.g. approval, connector.proxy)
    #[arg(long)]
    family: Option<String>,
    /// Only failures of this class (e.g. capability_denied)
    #[arg(long)]
    class: Option<String>,
    /// Only records about this action
    #[arg(long)]
    action: Option<String>,
    #[arg(long)]
    session_id: Option<String>,
    /// Only this run: its record and its proxied calls and spawns
    #[arg(long, value_name = "AUDIT_ID")]
    run: Option<String>,
    /// Only records before this seq (the last seq of the previous page)
    #[arg(long)]
    before_seq: Option<u64>,
    /// Leave out the records that belong to a run
    #[arg(long)]
    top_level: bool,
    #[arg(long, default_value_t = 50)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// List audit records, newest first
    List(ListArgs),
    /// Show one record in full (also `audit get`, the observability design's name)
    #[command(visible_alias = "get")]
    Show { audit_id: String },
    /// Verify the hash chain across every audit file and the signed checkpoints of its Merkle
    /// tree; with --receipt, check one receipt offline against a log's verifier key instead
    Verify {
        #[arg(long)]
        json: bool,
        /// A receipt (`aileron audit receipt`) to check without the log
        #[arg(long, requires = "key")]
        receipt: Option<std::path::PathBuf>,
        /// The log's verifier key (`aileron audit key` prints it)
        #[arg(long, requires = "receipt")]
        key: Option<String>,
        /// Also require the receipt's checkpoint cosigned by this witness key (`witness.vkey` of
        /// `aileron audit publish`): the log's key alone can be used by whoever holds the home
        #[arg(long, requires = "receipt")]
        witness_key: Option<String>,
        /// Also check the log against the checkpoints `aileron audit publish` copied to DIR
        #[arg(long, value_name = "DIR", conflicts_with = "receipt")]
        published: Option<std::path::PathBuf>,
        /// Instead, check the records an OTLP collector's file exporter wrote (AILERON_AUDIT_EXPORT)
        #[arg(long, value_name = "FILE", conflicts_with_all = ["receipt", "published"])]
        otlp_json: Option<std::path::PathBuf>,
    },
    /// Print the log's verifier key (C2SP signed-note form), what a receipt is checked with
    Key,
    /// Sign a checkpoint of the log's Merkle tree now and print it
    Checkpoint,
    /// Copy the witness-cosigned checkpoints, with the log's and the witness's verifier keys,
    /// to a directory kept elsewhere; `verify --published DIR` later checks the log against it
    Publish {
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Let the witness follow this home's audit log from its next checkpoint, after you replaced
    /// the home or its audit log on purpose (the witness keeps what it cosigned of the log it
    /// followed; it cosigns no log of another key until told so)
    AcceptLog,
    /// Write a receipt for one record: a C2SP tlog-proof anyone can check offline
    Receipt {
        audit_id: String,
        /// Write it here instead of standard output
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

/// `<home>/audit` (or the configured audit directory), or the error of a log kept in memory.
fn audit_dir(home: &Home) -> Result<std::path::PathBuf, CliError> {
    home.audit_parent().map(|parent| parent.join("audit")).ok_or_else(|| {
        CliError::failure(
            "the audit log is in memory (AILERON_AUDIT_DIR is empty); there is nothing on disk\n\
             hint: unset AILERON_AUDIT_DIR to keep the log on disk",
        )
    })
}

/// The witness of this home (making its key at first use).
fn witness(home: &Home) -> Result<crate::stores::audit_log::witness::Witness, CliError> {
    crate::stores::audit_log::witness::Witness::open(&home.witness_dir()).map_err(tree_error)
}

const PUBLISHED_LOG_KEY: &str = "log.vkey";
const PUBLISHED_WITNESS_KEY: &str = "witness.vkey";

/// The published copy in `dir`: its checkpoints and the two verifier keys beside them.
fn read_published(dir: &std::path::Path) -> Result<(Vec<(u64, String)>, NoteVerifier, CosignatureVerifier), CliError> {
    let read = |path: std::path::PathBuf| {
        std::fs::read_to_string(&path).map_err(|e| {
            CliError::failure(format!(
                "reading {}: {e}\nhint: `aileron audit publish --to {}` writes it",
                path.display(),
                dir.display()
            ))
        })
    };
    let log = NoteVerifier::parse(&read(dir.join(PUBLISHED_LOG_KEY))?).map_err(tree_error)?;
    let witness = CosignatureVerifier::parse(&read(dir.join(PUBLISHED_WITNESS_KEY))?).map_err(tree_error)?;
    let mut checkpoints = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| CliError::failure(format!("reading {}: {e}", dir.display())))? {
        let path = entry.map_err(|e| CliError::failure(e.to_string()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if let Some(size) = name.strip_suffix(".checkpoint").and_then(|n| n.parse::<u64>().ok()) {
            checkpoints.push((size, read(path)?));
        }
    }
    checkpoints.sort_by_key(|(size, _)| *size);
    Ok((checkpoints, log, witness))
}

fn tree_error(error: impl std::fmt::Display) -> CliError {
    CliError::failure(format!("{error}\nhint: `aileron audit verify` checks the log and its checkpoints"))
}

pub async fn run(home: &Home, args: AuditArgs) -> CliResult {
    match args.command {
        AuditCommand::List(list) => {
            let ListArgs {
                since,
                until,
                event_type,
                family,
                class,
                action,
                session_id,
                run,
                before_seq,
                top_level,
                limit,
                json,
            } = list;
            let client = DaemonClient::connect(home).await?;
            let mut query = vec![format!("limit={limit}")];
            let before_seq = before_seq.map(|seq| seq.to_string());
            let top_level = top_level.then(|| "true".to_string());
            for (key, value) in [
                ("since", since),
                ("until", until),
                ("event_type", event_type),
                ("family", family),
                ("class", class),
                ("action", action),
                ("session_id", session_id),
                ("run", run),
                ("before_seq", before_seq),
                ("top_level", top_level),
            ] {
                if let Some(value) = value {
                    query.push(format!("{key}={}", percent_encode(&value)));
                }
            }
            let listing = client.get(&format!("/v1/audit?{}", query.join("&"))).await?;
            if json {
                print_json(&listing);
                return Ok(ExitStatus::Ok);
            }
            for record in listing["items"].as_array().into_iter().flatten() {
                outln!("{}", summary_line(record));
            }
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Show { audit_id } => {
            let client = DaemonClient::connect(home).await?;
            let record = client.get(&format!("/v1/audit/{}", percent_encode(&audit_id))).await?;
            print_json(&record);
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Verify { receipt: Some(file), key: Some(key), witness_key, json, .. } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CliError::failure(format!("reading {}: {e}", file.display())))?;
            let (line, checkpoint) = crate::stores::audit_log::tree::check_receipt(&text, &key, witness_key.as_deref())
                .map_err(|e| {
                    CliError::failure(format!(
                        "{}: {e}\nhint: the receipt does not prove its record was in the log that key signs",
                        file.display()
                    ))
                })?;
            let record: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            if json {
                print_json(&serde_json::json!({ "ok": true, "tree_size": checkpoint.size, "record": record }));
            } else {
                outln!(
                    "ok: record {} ({}, audit id {}) is entry {} of {}'s signed tree of {} records",
                    record["seq"],
                    record["event_type"].as_str().unwrap_or("?"),
                    record["audit_id"].as_str().unwrap_or("?"),
                    record["seq"].as_u64().map_or(0, |seq| seq.saturating_sub(1)),
                    checkpoint.origin,
                    checkpoint.size
                );
            }
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Verify { otlp_json: Some(file), json, .. } => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| CliError::failure(format!("reading {}: {e}", file.display())))?;
            let report = crate::stores::audit_log::export::check_otlp_json(&text).map_err(|broken| {
                CliError::failure(format!(
                    "{}: {broken}\nhint: a collector that dropped or altered records, or a file exporter that rotated \
                     the file; compare with `aileron audit verify` on this machine",
                    file.display()
                ))
            })?;
            if json {
                print_json(&serde_json::to_value(&report).unwrap_or(Value::Null));
            } else {
                outln!(
                    "ok: records {}–{} ({}) arrived whole and chained, none missing; {} duplicate(s) (at-least-once)",
                    report.first_seq,
                    report.last_seq,
                    report.records,
                    report.duplicates
                );
            }
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Key => {
            let signer = crate::stores::audit_log::tree::log_signer(&audit_dir(home)?).map_err(tree_error)?;
            outln!("{}", signer.verifier_key());
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Checkpoint => {
            let dir = audit_dir(home)?;
            let signer = crate::stores::audit_log::tree::log_signer(&dir).map_err(tree_error)?;
            let tree = crate::stores::audit_log::tree::Tree::read_only(&dir).map_err(tree_error)?;
            if tree.size() == 0 {
                return Err(CliError::failure(
                    "the log's Merkle tree is empty: nothing to checkpoint\nhint: the daemon builds the tree as \
                     records are written; start it first",
                ));
            }
            let witness = witness(home)?;
            let note =
                crate::stores::audit_log::tree::issue_checkpoint(&dir, &tree, &signer, tree.size(), Some(&witness))
                    .map_err(tree_error)?;
            out!("{note}");
            Ok(ExitStatus::Ok)
        }
        AuditCommand::AcceptLog => {
            let dir = audit_dir(home)?;
            let signer = crate::stores::audit_log::tree::log_signer(&dir).map_err(tree_error)?;
            let origin = signer.name().to_string();
            let witness = witness(home)?;
            let followed = witness.accept_new_log().map_err(tree_error)?;
            // The log's checkpoints the witness refused while it followed the other log are
            // offered again, oldest first (each re-signed and, consistent, cosigned).
            let tree = crate::stores::audit_log::tree::Tree::read_only(&dir).map_err(tree_error)?;
            let mut sizes: Vec<u64> = crate::stores::audit_log::tree::checkpoints(&dir)
                .map_err(tree_error)?
                .into_iter()
                .map(|(size, _)| size)
                .collect();
            sizes.sort_unstable();
            for size in sizes {
                if size <= tree.size() {
                    crate::stores::audit_log::tree::issue_checkpoint(&dir, &tree, &signer, size, Some(&witness))
                        .map_err(tree_error)?;
                }
            }
            match followed {
                Some(followed) if followed.origin == origin => eprintln!(
                    "the witness followed this log ({origin}) up to {} records; it now cosigns its next checkpoint \
                     whatever it holds",
                    followed.size
                ),
                Some(followed) => eprintln!(
                    "the witness followed the log signed by {} ({} records cosigned, kept in its record); it now \
                     cosigns this log ({origin}) from its next checkpoint",
                    followed.origin, followed.size
                ),
                None => eprintln!(
                    "the witness followed no log yet; it cosigns this log ({origin}) from its next checkpoint"
                ),
            }
            eprintln!("hint: `aileron audit checkpoint` makes one now");
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Publish { to } => {
            let dir = audit_dir(home)?;
            let witness = witness(home)?;
            let log = crate::stores::audit_log::tree::log_signer(&dir).map_err(tree_error)?;
            let (signed_by, cosigned_by) = (log.verifier(), witness.verifier());
            std::fs::create_dir_all(&to).map_err(|e| CliError::failure(format!("creating {}: {e}", to.display())))?;
            let write = |name: &str, text: &str| {
                crate::platform::home::write_atomic(&to.join(name), text.as_bytes(), 0o644)
                    .map_err(|e| CliError::failure(format!("writing {}: {e}", to.join(name).display())))
            };
            write(PUBLISHED_LOG_KEY, &format!("{}\n", log.verifier_key()))?;
            write(PUBLISHED_WITNESS_KEY, &format!("{}\n", witness.verifier_key()))?;
            let mut copied = 0;
            for (size, text) in crate::stores::audit_log::tree::checkpoints(&dir).map_err(tree_error)? {
                let checked =
                    crate::stores::audit_log::tree::open_checkpoint(&signed_by, Some(&cosigned_by), size, &text);
                if checked.is_ok() {
                    write(&format!("{size:020}.checkpoint"), &text)?;
                    copied += 1;
                }
            }
            eprintln!("published {copied} cosigned checkpoint(s) and both verifier keys to {}", to.display());
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Receipt { audit_id, out } => {
            let dir = audit_dir(home)?;
            let (record, line) = crate::stores::audit_log::record_line(&dir, &audit_id)
                .map_err(|e| CliError::failure(e.to_string()))?
                .ok_or_else(|| {
                    CliError::failure(format!(
                        "no audit record has the id `{audit_id}`\nhint: `aileron audit list` shows the ids"
                    ))
                })?;
            let witness = witness(home)?;
            // A record just written is in the tree a moment after the daemon acknowledged it:
            // `receipt` waits that out (up to 2 s).
            let proof =
                crate::stores::audit_log::tree::receipt(&dir, record.seq, line, Some(&witness)).map_err(tree_error)?;
            let text = proof.format();
            match out {
                Some(path) => {
                    crate::platform::home::write_atomic(&path, text.as_bytes(), 0o644)
                        .map_err(|e| CliError::failure(format!("writing {}: {e}", path.display())))?;
                    eprintln!("wrote the receipt for record {} to {}", record.seq, path.display());
                }
                None => out!("{text}"),
            }
            Ok(ExitStatus::Ok)
        }
        AuditCommand::Verify { json, published, .. } => {
            let Some(dir) = home.audit_parent() else {
                return Err(CliError::failure(
                    "the audit log is in memory (AILERON_AUDIT_DIR is empty); there is nothing on disk to verify\n\
                     hint: unset AILERON_AUDIT_DIR to keep the log on disk",
                ));
            };
            match crate::stores::audit_log::verify(&dir) {
                Ok(report) => {
                    // Then the tree: every signed checkpoint must match the log as it is now.
                    let audit = dir.join("audit");
                    let cosigner =
                        crate::stores::audit_log::witness::verifier_key(&home.witness_dir()).map_err(tree_error)?;
                    let checked = match &published {
                        Some(copy) => {
                            let (stored, log, witness) = read_published(copy)?;
                            crate::stores::audit_log::tree::verify_against(&audit, &stored, &log, Some(&witness))
                        }
                        None => crate::stores::audit_log::tree::verify_checkpoints(&audit, cosigner.as_ref()),
                    };
                    // And what the witness on this machine last cosigned, which is not in the home:
                    // a log rolled back with its checkpoints removed still falls short of it.
                    let witnessed =
                        crate::stores::audit_log::witness::last_cosigned(&home.witness_dir()).map_err(tree_error)?;
                    let checked = checked.and_then(|report| match &witnessed {
                        Some(cosigned) => {
                            crate::stores::audit_log::tree::verify_witnessed(&audit, cosigned).map(|()| report)
                        }
                        None => Ok(report),
                    });
                    let checkpoints = checked.map_err(|broken| {
                        CliError::failure(format!(
                            "{broken}\nhint: the log no longer matches a checkpoint its key signed or its witness \
                             cosigned; keep a copy of the audit directory and the witness directory for investigation \
                             (if you replaced the home or its audit log on purpose, `aileron audit accept-log` lets the \
                             witness follow the new log)"
                        ))
                    })?;
                    if json {
                        let mut value = serde_json::to_value(&report).unwrap_or(Value::Null);
                        value["checkpoints"] = serde_json::to_value(&checkpoints).unwrap_or(Value::Null);
                        value["witnessed_records"] =
                            witnessed.as_ref().map_or(Value::Null, |cosigned| cosigned.size.into());
                        print_json(&value);
                    } else {
                        outln!("{report}");
                        let whose = if published.is_some() { "published, cosigned" } else { "signed" };
                        match checkpoints.verified {
                            0 => outln!("no {whose} checkpoint yet"),
                            n => outln!(
                                "{n} {whose} checkpoint(s) match the log; the newest covers its first {} records",
                                checkpoints.newest
                            ),
                        }
                        if let Some(cosigned) = &witnessed {
                            outln!(
                                "the witness on this machine last cosigned its first {} records: they match",
                                cosigned.size
                            );
                        }
                    }
                    // The chain that is there is intact; its end could not be checked (stderr,
                    // so `--json` stays data only and the exit status stays 0, see docs/decisions/0006-audit-log.md).
                    if let Some(warning) = report.warning() {
                        eprintln!(
                            "warning: {warning}\nhint: if the daemon was not just upgraded or the machine did not lose power, keep a copy of the audit directory for investigation"
                        );
                    }
                    Ok(ExitStatus::Ok)
                }
                // The error says what broke ("audit chain broken at line …", "the log was cut
                // short: …", "reading …"); its hint what to do about that kind.
                Err(broken) => Err(CliError::failure(format!("{broken}\nhint: {}", broken.hint()))),
            }
        }
    }
}

/// One line per record: time, event, id, and the most telling payload keys.
pub fn summary_line(record: &Value) -> String {
    let payload = &record["payload"];
    let mut detail = Vec::new();
    for key in [
        keys::ACTION_NAME,
        keys::CONNECTOR_FQN,
        keys::CONNECTOR_OP,
        keys::PROXY_UPSTREAM_HOST,
        keys::PROXY_UPSTREAM_STATUS,
        keys::FAILURE_CLASS,
        keys::FAILURE_MESSAGE,
    ] {
        if let Some(value) = payload.get(key) {
            let value = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
            detail.push(format!("{}={value}", key.trim_start_matches("aileron.")));
        }
    }
    // Failure messages quote connectors and upstreams: shown escaped, never obeyed by the terminal.
    super::escape(&format!(
        "{}  {:<26} {}  {}",
        record["timestamp"].as_str().unwrap_or("?"),
        record["event_type"].as_str().unwrap_or("?"),
        record["audit_id"].as_str().unwrap_or("?"),
        detail.join(" ")
    ))
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
