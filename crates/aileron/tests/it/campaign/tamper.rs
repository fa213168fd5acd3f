//! The tamper campaign (SPEC §17, issue 47): a real log, checkpointed and cosigned by the
//! daemon and published elsewhere, damaged again and again — each round one kind of damage at a
//! seeded random place, made the way its attacker would — and `aileron audit verify` (or, for a
//! home rolled back whole, `verify --published`) must name every one. The kinds: a record edited,
//! a record removed mid-log, the tail cut (anchor and journal removed too), the tail cut and the
//! checkpoints signed again with the log's key, the whole audit directory rolled back, and a
//! record edited with every later record re-chained and the checkpoints signed again (someone
//! holding the home, and so its log key, but not the witness's).

use std::path::Path;

use aileron_core::audit::{AuditRecord, seal_to_line};

use super::{Report, scaled};
use crate::cli::Cli;
use crate::support::copy_dir;

const KINDS: [&str; 6] = ["edit", "remove", "cut", "cut_resigned", "rollback", "rechain"];

/// A small deterministic generator (xorshift64*), seeded per campaign.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

fn daily_file(audit: &Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(audit)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 1, "the campaign's log is one day's file: {files:?}");
    files.remove(0)
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
}

/// What someone covering a cut does to the chain's own safeguards.
fn defeat_anchor(audit: &Path) {
    let _ = std::fs::remove_file(audit.join("chain-head"));
    let _ = std::fs::remove_file(audit.join("journal"));
}

/// Rebuilds the tree from the (damaged) log and signs a checkpoint of it with the log's key —
/// what the holder of the home can do; the witness's key is not in it.
fn resign(audit: &Path, records: u64) {
    use aileron::stores::audit_log::tree;
    let _ = std::fs::remove_dir_all(audit.join(tree::TREE_DIR));
    let _ = std::fs::remove_dir_all(audit.join(tree::CHECKPOINTS_DIR));
    let mut stored = tree::Tree::open(audit).unwrap();
    stored.catch_up(audit, records).unwrap();
    let signer = tree::log_signer(audit).unwrap();
    tree::issue_checkpoint(audit, &stored, &signer, records, None).unwrap();
}

#[test]
fn every_kind_of_damage_under_a_checkpoint_is_detected() {
    let rounds = scaled(60, 600);
    let seed = 0x5EED_0047_u64 ^ rounds as u64;
    let mut rng = Rng(seed);
    // The log: runs, a stop (a cosigned checkpoint), a snapshot for the rollback, more runs, a
    // stop, and the cosigned checkpoints published elsewhere.
    let cli = Cli::with_echo_action("count");
    let runs = |n: usize| cli.session_of_runs("count", n);
    runs(5);
    let audit = cli.home.join("audit");
    let earlier = cli.scratch().join("audit-earlier");
    copy_dir(&audit, &earlier);
    runs(8);
    let published = cli.scratch().join("published");
    cli.ok(&["audit", "publish", "--to", published.to_str().unwrap()]);
    let pristine = cli.scratch().join("audit-pristine");
    copy_dir(&audit, &pristine);
    let published_arg = published.to_str().unwrap().to_string();
    assert!(cli.run(&["audit", "verify"]).status.success(), "the intact log verifies");
    assert!(cli.run(&["audit", "verify", "--published", &published_arg]).status.success(), "and against its copy");

    let mut done = [0u64; KINDS.len()];
    let mut detected = [0u64; KINDS.len()];
    for round in 0..rounds {
        std::fs::remove_dir_all(&audit).unwrap();
        copy_dir(&pristine, &audit);
        let kind = rng.below(KINDS.len());
        let file = daily_file(&audit);
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let n = lines.len();
        match KINDS[kind] {
            "edit" => {
                let at = rng.below(n);
                let mut record: serde_json::Value = serde_json::from_str(&lines[at]).unwrap();
                record["payload"]["tampered"] = serde_json::Value::from(round as u64);
                lines[at] = aileron_core::audit::canonical_json(&record);
                write_lines(&file, &lines);
            }
            "remove" => {
                lines.remove(rng.below(n - 1));
                write_lines(&file, &lines);
            }
            "cut" | "cut_resigned" => {
                let cut = 1 + rng.below(3.min(n - 1));
                lines.truncate(n - cut);
                write_lines(&file, &lines);
                defeat_anchor(&audit);
                if KINDS[kind] == "cut_resigned" {
                    resign(&audit, (n - cut) as u64);
                }
            }
            "rollback" => {
                std::fs::remove_dir_all(&audit).unwrap();
                copy_dir(&earlier, &audit);
            }
            _ => {
                // Re-chained: one record changed, every later one sealed again after it.
                let at = rng.below(n);
                let mut prev = if at == 0 {
                    serde_json::from_str::<AuditRecord>(&lines[0]).unwrap().prev
                } else {
                    serde_json::from_str::<AuditRecord>(&lines[at - 1]).unwrap().hash
                };
                for (index, line) in lines.iter_mut().enumerate().skip(at) {
                    let record: AuditRecord = serde_json::from_str(line).unwrap();
                    let seq = record.seq;
                    let mut unsealed = record.unsealed();
                    if index == at {
                        unsealed.payload.insert("tampered".into(), serde_json::Value::from(round as u64));
                    }
                    let (sealed, text) = seal_to_line(unsealed, seq, prev);
                    prev = sealed.hash;
                    *line = text;
                }
                write_lines(&file, &lines);
                defeat_anchor(&audit);
                resign(&audit, n as u64);
            }
        }
        done[kind] += 1;
        let local = cli.run(&["audit", "verify"]);
        let against_copy = cli.run(&["audit", "verify", "--published", &published_arg]);
        let caught = match KINDS[kind] {
            // A home rolled back whole agrees with itself: only the copy kept elsewhere shows it.
            "rollback" => !against_copy.status.success(),
            _ => !local.status.success(),
        };
        if caught {
            detected[kind] += 1;
        } else {
            eprintln!(
                "round {round} ({}): not detected\nlocal: {}\ncopy: {}",
                KINDS[kind],
                String::from_utf8_lossy(&local.stderr),
                String::from_utf8_lossy(&against_copy.stderr)
            );
        }
    }
    let mut report = Report::new("tamper");
    report.set("rounds", rounds as u64);
    report.set("seed", format!("{seed:#x}"));
    let records = std::fs::read_to_string(daily_file(&pristine)).unwrap().lines().count();
    report.set("records", records as u64);
    for (index, kind) in KINDS.iter().enumerate() {
        report.set(&format!("{kind}_rounds"), done[index]);
        report.set(&format!("{kind}_detected"), detected[index]);
    }
    report.finish();
    for (index, kind) in KINDS.iter().enumerate() {
        assert!(done[index] > 0, "{kind} was never tried in {rounds} rounds (seed {seed:#x})");
        assert_eq!(detected[index], done[index], "{kind}: detected {} of {}", detected[index], done[index]);
    }
}
