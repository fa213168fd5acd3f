//! The witness (SPEC §17): a second key, kept outside the home (`<home>-witness` beside it, or
//! `AILERON_WITNESS_DIR`; masked from launched agents like the home), that cosigns a checkpoint
//! (c2sp.org/tlog-cosignature, Ed25519 v1) only after checking it is consistent with the last one
//! it cosigned: its own record of that (`witness.state`) and an RFC 6962 consistency proof from
//! the tree. Someone who holds the home — and so the log's key — can re-sign a rewritten log's
//! checkpoints, but not cosign them; a copy of cosigned checkpoints kept elsewhere
//! (`aileron audit publish`) then shows a rolled-back or rewritten log.

use std::io;
use std::path::{Path, PathBuf};

use aileron_core::tlog::merkle;
use aileron_core::tlog::{Checkpoint, CosignatureVerifier, Cosigner, NoteVerifier, SignedNote};
use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use crate::platform::home::{create_private_dir, write_atomic};

const KEY_FILE: &str = "witness.key";
const STATE_FILE: &str = "witness.state";
const KEY_HEADER: &str = "aileron audit witness key v1";

pub struct Witness {
    dir: PathBuf,
    cosigner: Cosigner,
}

impl Witness {
    /// Opens the witness in `dir`, making its key (0600) at first use.
    pub fn open(dir: &Path) -> anyhow::Result<Witness> {
        create_private_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Its own, not a link, and its key and record too: whoever else could write them could
        // cosign a rewritten log or make the witness forget (the ninth re-attack).
        crate::platform::home::secure_own_dir(dir)?;
        for file in [KEY_FILE, STATE_FILE] {
            ours_if_there(&dir.join(file))?;
        }
        let seed = super::key_file::seed(&dir.join(KEY_FILE), KEY_HEADER, "a witness key")?;
        let public = Cosigner::new("x", &seed)?.public_key();
        let id = super::key_file::public_key_id(&public);
        let cosigner = Cosigner::new(&format!("aileron.local/witness/{id}"), &seed)?;
        Ok(Witness { dir: dir.to_path_buf(), cosigner })
    }

    pub fn verifier_key(&self) -> String {
        self.cosigner.verifier_key()
    }

    pub fn verifier(&self) -> CosignatureVerifier {
        self.cosigner.verifier()
    }

    /// Lets the witness follow a log of a new key from its next checkpoint, keeping what it
    /// cosigned of the log it followed (after the user replaced the home or its log on purpose:
    /// `aileron audit accept-log`). What it followed, if anything.
    pub fn accept_new_log(&self) -> anyhow::Result<Option<Cosigned>> {
        let mut record = read_record(&self.dir)?;
        let followed = record.following.take();
        record.earlier.extend(followed.clone());
        write_record(&self.dir, &record)?;
        Ok(followed)
    }

    /// Cosigns the log's signed checkpoint `note` when it is signed by `log` and consistent with
    /// the last one this witness cosigned (proved from `tree`); the note with its cosignature.
    pub fn cosign(&self, note: &str, log: &NoteVerifier, tree: &impl merkle::Hashes) -> anyhow::Result<String> {
        let signed = SignedNote::parse(note)?;
        anyhow::ensure!(log.verifies(&signed), "the checkpoint is not signed by the log's key {}", log.name);
        let checkpoint = Checkpoint::parse(&signed.body)?;
        let mut record = read_record(&self.dir)?;
        // Bound to the log it follows: a log of another key was the home's log deleted and begun
        // again, which this witness would otherwise have cosigned at once, forgetting the old one
        // (the ninth re-attack).
        if let Some(followed) = record.following.as_ref().filter(|followed| followed.origin != checkpoint.origin) {
            anyhow::bail!(
                "this witness follows the log signed by {} ({} records cosigned); a checkpoint of the log signed by {} \
                 is not cosigned: the log's key was replaced or its log begun again\nhint: if you replaced the home \
                 or its audit log on purpose, run `aileron audit accept-log`",
                followed.origin,
                followed.size,
                checkpoint.origin
            );
        }
        if let Some(Cosigned { size, root, .. }) = record.following {
            let consistent = if checkpoint.size == size {
                checkpoint.root == root
            } else if checkpoint.size > size {
                let proof = merkle::consistency_proof(tree, size, checkpoint.size).map_err(anyhow::Error::msg)?;
                merkle::verify_consistency(size, checkpoint.size, &root, &checkpoint.root, &proof)
            } else {
                false
            };
            anyhow::ensure!(
                consistent,
                "checkpoint {} is not consistent with checkpoint {size}, which this witness cosigned: the log was \
                 rewritten or rolled back",
                checkpoint.size
            );
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let line = self.cosigner.cosignature_line(&signed.body, now);
        record.following =
            Some(Cosigned { origin: checkpoint.origin.clone(), size: checkpoint.size, root: checkpoint.root });
        write_record(&self.dir, &record)?;
        Ok(format!("{note}{line}"))
    }
}

/// A witness file that is there must be a regular file of the user's, writable by nobody else.
fn ours_if_there(path: &Path) -> anyhow::Result<()> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return Ok(()) };
    anyhow::ensure!(
        metadata.is_file() && crate::platform::home::is_ours_and_private(&metadata),
        "{} is not a private file of yours: another user could have written it\nhint: remove the witness directory \
         {} if you did not make it, and keep it beside your own home",
        path.display(),
        path.parent().map(Path::display).map(|d| d.to_string()).unwrap_or_default()
    );
    Ok(())
}

/// What a witness last cosigned: the log it was of, and that log's size and root then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigned {
    pub origin: String,
    pub size: u64,
    pub root: merkle::Hash,
}

/// The witness's record (`witness.state`): the log it follows and the last checkpoint of it that
/// it cosigned (the first line, `origin size root`; `-` once the user let it go), then the logs it
/// followed before (`earlier origin size root`), never forgotten.
#[derive(Debug, Default)]
struct Record {
    following: Option<Cosigned>,
    earlier: Vec<Cosigned>,
}

fn read_record(dir: &Path) -> anyhow::Result<Record> {
    let path = dir.join(STATE_FILE);
    ours_if_there(&path)?;
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Record::default()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let parse = |line: &str| -> anyhow::Result<Cosigned> {
        let mut fields = line.split(' ');
        let (Some(origin), Some(size), Some(root), None) = (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            anyhow::bail!("{}: `{line}` is not `origin size root`", path.display());
        };
        let size = size.parse().with_context(|| format!("{}: a size", path.display()))?;
        let root = B64.decode(root).ok().and_then(|r| r.try_into().ok());
        let root = root.with_context(|| format!("{}: a root", path.display()))?;
        Ok(Cosigned { origin: origin.to_string(), size, root })
    };
    let mut record = Record::default();
    for (index, line) in text.lines().filter(|line| !line.is_empty()).enumerate() {
        match (index, line.strip_prefix("earlier ")) {
            (_, Some(earlier)) => record.earlier.push(parse(earlier)?),
            (0, None) if line == "-" => {}
            (0, None) => record.following = Some(parse(line)?),
            (_, None) => anyhow::bail!("{}: a second log followed: `{line}`", path.display()),
        }
    }
    Ok(record)
}

fn write_record(dir: &Path, record: &Record) -> anyhow::Result<()> {
    let line = |cosigned: &Cosigned| format!("{} {} {}", cosigned.origin, cosigned.size, B64.encode(cosigned.root));
    let mut text = record.following.as_ref().map_or("-".to_string(), line);
    text.push('\n');
    for earlier in &record.earlier {
        text.push_str(&format!("earlier {}\n", line(earlier)));
    }
    let path = dir.join(STATE_FILE);
    write_atomic(&path, text.as_bytes(), 0o600).with_context(|| format!("writing {}", path.display()))
}

/// The last checkpoint of the log it follows that the witness in `dir` cosigned, if any.
pub fn last_cosigned(dir: &Path) -> anyhow::Result<Option<Cosigned>> {
    Ok(read_record(dir)?.following)
}

/// The witness's verifier key as this machine knows it (none yet: `None`).
pub fn verifier_key(dir: &Path) -> anyhow::Result<Option<CosignatureVerifier>> {
    if !dir.join(KEY_FILE).exists() {
        return Ok(None);
    }
    Ok(Some(Witness::open(dir)?.verifier()))
}
