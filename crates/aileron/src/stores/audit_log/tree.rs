//! The Merkle tree over the log's record lines and its signed checkpoints (SPEC §17).
//!
//! - `audit/tree/level-<k>`: the hashes of the complete subtrees at level `k`, 32 bytes each, in
//!   order (level 0: one leaf per record, record seq `i + 1` at index `i`). The writer appends a
//!   batch's leaves and the parents they complete after the batch is acknowledged; nothing is
//!   synced: the tree is derived data, and at open it is checked against the log's length and
//!   caught up from the log's lines (a crash loses only a tail that is re-hashed), so a restart
//!   never re-hashes history.
//! - `audit/log.key`: the log's Ed25519 seed (0600, made at first open), in the audit directory
//!   so that it is masked from launched agents with it; its key name is the log's origin,
//!   `aileron.local/<16 hex digits of SHA-256(public key)>`.
//! - `audit/checkpoints/<size, 20 digits>.checkpoint`: C2SP signed checkpoints, every
//!   [`CHECKPOINT_EVERY_RECORDS`] records (at most one per [`CHECKPOINT_MIN_GAP`]) or
//!   [`CHECKPOINT_EVERY`], at shutdown, and on request.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use aileron_core::sha256::Sha256;
use aileron_core::tlog::merkle::{self, Hash, Hashes, leaf_hash};
use aileron_core::tlog::{Checkpoint, CosignatureVerifier, NoteSigner, NoteVerifier, SignedNote};
use anyhow::Context;

use crate::platform::home::{create_private_dir, write_atomic};

pub const TREE_DIR: &str = "tree";
pub const CHECKPOINTS_DIR: &str = "checkpoints";
pub const KEY_FILE: &str = "log.key";
const KEY_HEADER: &str = "aileron audit log key v1";
/// A checkpoint is issued once this many records are past the last one (but not sooner than
/// [`CHECKPOINT_MIN_GAP`] after it), or [`CHECKPOINT_EVERY`] after it when any are.
pub const CHECKPOINT_EVERY_RECORDS: u64 = 1000;
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(10);
/// However fast records come, checkpoints are at least this far apart: each costs a few synced
/// files (the note, the witness's state), which at 1,000 records apiece would compete a dozen
/// times a second with the log's own syncs under load.
pub const CHECKPOINT_MIN_GAP: Duration = Duration::from_secs(1);
/// How long a receipt waits for the tree to take in a record the log already holds: the tree's
/// thread extends it just after the writer acknowledges a batch (the log never waits on it), so
/// a receipt asked for right after a run may be a moment ahead of it.
const TREE_CATCH_UP: Duration = Duration::from_secs(2);
const HASH_BYTES: u64 = 32;
/// How long the tree's thread lets batches gather after taking one (see [`TreeKeeper::run`]).
/// 1 ms rather than 5: the larger bursts of tree work after 5 ms put the runs' p99 at 16 clients
/// 1.13–1.17× the same run's with the tree off (goal ≤ 1.05×), against 0.85–1.01× at 1 ms, for
/// the same context switches and CPU per run (BENCHMARKS.md, issue 49, "Work per run").
const TREE_GATHER: Duration = Duration::from_millis(1);

/// Leaves a catch-up appends between two flushes.
const CATCH_UP_FLUSH_EVERY: u64 = 2048;

/// The stored levels of the tree.
pub struct Tree {
    dir: PathBuf,
    levels: Vec<File>,
    /// Leaves appended: the tree's size (those not yet flushed included).
    size: u64,
    /// Per level, what [`Tree::append`] added since the last [`Tree::flush`], and the level's
    /// newest hash.
    tails: Vec<LevelTail>,
}

/// The end of one level as the appending tree holds it. Its newest hash is the left sibling the
/// level's next parent is made from, so an append reads nothing back from the files; its unwritten
/// hashes are written in one `pwrite` per level at [`Tree::flush`] (a syscall or two per record
/// before: BENCHMARKS.md, issue 49).
#[derive(Default)]
struct LevelTail {
    /// Index of the first hash in `unwritten`.
    from: u64,
    unwritten: Vec<u8>,
    newest: Option<(u64, Hash)>,
}

impl LevelTail {
    fn get(&self, index: u64) -> Option<Hash> {
        if let Some((at, hash)) = self.newest
            && at == index
        {
            return Some(hash);
        }
        let start = usize::try_from(index.checked_sub(self.from)? * HASH_BYTES).ok()?;
        self.unwritten.get(start..start + HASH_BYTES as usize).map(|bytes| bytes.try_into().expect("32 bytes"))
    }
}

impl Tree {
    /// Opens (creating) `audit/tree` for writing; [`Tree::catch_up`] then matches it to the log.
    pub fn open(audit_dir: &Path) -> anyhow::Result<Tree> {
        let dir = audit_dir.join(TREE_DIR);
        create_private_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut tree = Tree { dir, levels: Vec::new(), size: 0, tails: Vec::new() };
        tree.size = tree.stored_len(0)?;
        Ok(tree)
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The stored tree as another process reads it while the writer appends: its levels opened
    /// read-only, its size the longest prefix every level covers.
    pub fn read_only(audit_dir: &Path) -> anyhow::Result<Tree> {
        let dir = audit_dir.join(TREE_DIR);
        let mut tree = Tree { dir, levels: Vec::new(), size: 0, tails: Vec::new() };
        while let Ok(file) = File::open(tree.level_path(tree.levels.len() as u32)) {
            tree.levels.push(file);
        }
        tree.size = covered(u64::MAX, |level| {
            let file = tree.levels.get(level as usize);
            Ok(file.map(|f| f.metadata().map(|m| m.len() / HASH_BYTES)).transpose()?.unwrap_or(0))
        })?;
        Ok(tree)
    }

    fn level_path(&self, level: u32) -> PathBuf {
        self.dir.join(format!("level-{level}"))
    }

    fn level(&mut self, level: u32) -> io::Result<&File> {
        while self.levels.len() <= level as usize {
            let path = self.level_path(self.levels.len() as u32);
            let file =
                OpenOptions::new().create(true).truncate(false).read(true).write(true).mode(0o600).open(&path)?;
            self.levels.push(file);
        }
        Ok(&self.levels[level as usize])
    }

    /// Whole hashes stored at `level`.
    fn stored_len(&mut self, level: u32) -> io::Result<u64> {
        Ok(self.level(level)?.metadata()?.len() / HASH_BYTES)
    }

    /// Makes the stored tree exactly the first `records` leaves of the log: longer levels are
    /// cut, a torn hash dropped, missing parents recomputed and missing leaves hashed from the
    /// log's lines (only the lines past what is stored are read).
    pub fn catch_up(&mut self, audit_dir: &Path, records: u64) -> anyhow::Result<()> {
        self.flush()?;
        // Cut below, a level's newest hash may be gone: the next append reads it from the file.
        self.tails.clear();
        let keep = covered(records, |level| self.stored_len(level))?;
        // Every level file there is, so no hash of a longer, older tree stays past the end.
        let mut level = 0;
        while level == 0 || self.level_path(level).exists() {
            self.level(level)?.set_len((keep >> level) * HASH_BYTES)?;
            level += 1;
        }
        self.size = keep;
        if keep < records {
            let mut next = keep;
            for_each_line(audit_dir, keep, |line| {
                if next < records {
                    self.append(line)?;
                    next += 1;
                    // A long catch-up (a deleted tree under a large log) holds ~128 KiB at most.
                    if next % CATCH_UP_FLUSH_EVERY == 0 {
                        self.flush()?;
                    }
                }
                Ok(next < records)
            })?;
            anyhow::ensure!(next == records, "the log has {next} lines, not {records}");
        }
        Ok(self.flush()?)
    }

    /// Appends one record line (without its newline) and the parents it completes; they reach
    /// the files at the next [`Tree::flush`] (this tree answers them meanwhile).
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let stored = merkle::completed_by(self.size, leaf_hash(line), |level, index| self.hash(level, index))
            .map_err(io::Error::other)?;
        for (level, index, hash) in stored {
            let level = level as usize;
            if self.tails.len() <= level {
                self.tails.resize_with(level + 1, LevelTail::default);
            }
            let tail = &mut self.tails[level];
            if tail.unwritten.is_empty() {
                tail.from = index;
            }
            debug_assert_eq!(tail.from + tail.unwritten.len() as u64 / HASH_BYTES, index, "a level grows in order");
            tail.unwritten.extend_from_slice(&hash);
            tail.newest = Some((index, hash));
        }
        self.size += 1;
        Ok(())
    }

    /// Writes what was appended since the last flush: one `pwrite` per level, the leaves first,
    /// so a level on disk never runs ahead of the one below it.
    pub fn flush(&mut self) -> io::Result<()> {
        for level in 0..self.tails.len() {
            if self.tails[level].unwritten.is_empty() {
                continue;
            }
            // Opened (created) at its first hash.
            self.level(level as u32)?;
            let tail = &mut self.tails[level];
            self.levels[level].write_all_at(&tail.unwritten, tail.from * HASH_BYTES)?;
            tail.unwritten.clear();
        }
        Ok(())
    }

    pub fn root(&self, size: u64) -> Result<Hash, String> {
        merkle::tree_hash(self, size)
    }
}

/// The longest prefix of at most `limit` leaves every stored level covers, `stored(k)` being the
/// hashes level `k` holds: level k must hold `size >> k` of them, so a level that lags (a crash
/// between a leaf and its parents, or a writer still appending) limits it.
fn covered(limit: u64, mut stored: impl FnMut(u32) -> io::Result<u64>) -> io::Result<u64> {
    let mut size = stored(0)?.min(limit);
    let mut level = 1;
    while (size >> level) > 0 {
        size = size.min(((stored(level)? + 1) << level) - 1);
        level += 1;
    }
    Ok(size)
}

impl Hashes for Tree {
    fn hash(&self, level: u32, index: u64) -> Result<Hash, String> {
        if let Some(hash) = self.tails.get(level as usize).and_then(|tail| tail.get(index)) {
            return Ok(hash);
        }
        let file = self.levels.get(level as usize).ok_or_else(|| format!("no level {level} in the tree"))?;
        let mut hash = [0u8; 32];
        file.read_exact_at(&mut hash, index * HASH_BYTES)
            .map_err(|e| format!("reading the tree at {level}/{index}: {e}"))?;
        Ok(hash)
    }
}

/// The writer's handle on the tree's thread. Hashing the leaves, writing the levels and issuing
/// checkpoints (signing, cosigning, two synced files) all happen there, so the writer, between
/// two batches, only hands over the batch's lines — nothing of the tree delays the next batch.
/// Messages are handled in order, so the tree follows the log exactly (a recovery's cut
/// included); dropping the handle waits for the thread, which issues the shutdown checkpoint.
pub(super) struct TreeState {
    work: Option<(std::sync::mpsc::Sender<TreeWork>, std::thread::JoinHandle<()>)>,
}

enum TreeWork {
    /// A committed batch's lines, each ending in `\n`.
    Lines(Vec<u8>),
    /// The log was recovered to this many records: the tree follows.
    Resync(u64),
}

/// The tree's thread's state: the tree, the log key, the witness, the last checkpoint.
struct TreeKeeper {
    audit_dir: PathBuf,
    tree: Tree,
    signer: NoteSigner,
    witness: Option<super::witness::Witness>,
    /// The size of the newest checkpoint, and when it was issued.
    checkpointed: u64,
    at: std::time::Instant,
}

impl TreeState {
    /// Opens the tree and catches it up to the log's `records` (here, before the writer starts),
    /// loads (or makes) the log key and starts the tree's thread.
    pub(super) fn open(audit_dir: &Path, records: u64, witness: Option<&Path>) -> anyhow::Result<TreeState> {
        let mut tree = Tree::open(audit_dir)?;
        tree.catch_up(audit_dir, records)?;
        let signer = log_signer(audit_dir)?;
        let checkpointed = newest_checkpoint(audit_dir)?.min(records);
        let witness = witness.map(super::witness::Witness::open).transpose()?;
        let mut keeper = TreeKeeper {
            audit_dir: audit_dir.to_path_buf(),
            tree,
            signer,
            witness,
            checkpointed,
            at: std::time::Instant::now(),
        };
        let (work, received) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("aileron-audit-tree".into())
            .spawn(move || keeper.run(&received))
            .context("starting the audit tree thread")?;
        Ok(TreeState { work: Some((work, thread)) })
    }

    /// After a recovery: the tree matches the log's `records` again.
    pub(super) fn resync(&self, records: u64) {
        self.send(TreeWork::Resync(records));
    }

    /// Hands over a committed batch's lines (each ending in `\n`).
    pub(super) fn extend(&self, lines: Vec<u8>) {
        self.send(TreeWork::Lines(lines));
    }

    fn send(&self, work: TreeWork) {
        // A thread that stopped has said why; the log goes on without it.
        if let Some((sender, _)) = &self.work {
            let _ = sender.send(work);
        }
    }
}

impl Drop for TreeState {
    fn drop(&mut self) {
        if let Some((sender, thread)) = self.work.take() {
            drop(sender);
            let _ = thread.join();
        }
    }
}

impl TreeKeeper {
    /// Until the writer hangs up: each message in order; a checkpoint once due (after enough
    /// records, or enough time with any); the shutdown checkpoint at the end. A tree that cannot
    /// be written is given up with a warning (the log never waits on it; `verify` then names the
    /// checkpoints that no longer cover the log).
    ///
    /// When batches come less than [`TREE_GATHER`] apart, it sleeps that long after taking one and
    /// then takes every batch that came meanwhile: under load the writer's batches wait in the
    /// channel instead of each waking this thread (a wake-up, and the writer preempted by it, per
    /// batch: a third of a run's context switches; BENCHMARKS.md, issue 49). The tree then lags
    /// the log by at most that much; slower batches are each taken as they come.
    fn run(&mut self, received: &std::sync::mpsc::Receiver<TreeWork>) {
        // When the thread last finished taking work (none yet: the first batch is taken as it comes).
        let mut finished: Option<std::time::Instant> = None;
        loop {
            let work = match self.due_in() {
                Some(wait) => match received.recv_timeout(wait) {
                    Ok(work) => work,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if !self.checkpoint() {
                            return;
                        }
                        continue;
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                },
                None => match received.recv() {
                    Ok(work) => work,
                    Err(_) => break,
                },
            };
            let busy = finished.is_some_and(|at| at.elapsed() < TREE_GATHER);
            if !self.take(work) {
                return;
            }
            if busy {
                std::thread::sleep(TREE_GATHER);
                // Empty, or the writer hung up: the next wait above sees which.
                while let Ok(work) = received.try_recv() {
                    if !self.take(work) {
                        return;
                    }
                }
            }
            // What was taken reaches the files together: a `pwrite` per level, not per hash.
            if !kept(self.tree.flush().map_err(|e| ("writing", anyhow::Error::from(e)))) {
                return;
            }
            finished = Some(std::time::Instant::now());
            if self.due_in() == Some(Duration::ZERO) && !self.checkpoint() {
                return;
            }
        }
        self.checkpoint();
    }

    /// Takes one message; `false` when the tree could not be written (warned: given up).
    fn take(&mut self, work: TreeWork) -> bool {
        let done = match work {
            TreeWork::Lines(lines) => self.extend(&lines).map_err(|e| ("extending", anyhow::Error::from(e))),
            TreeWork::Resync(records) => self.resync(records).map_err(|e| ("catching up", e)),
        };
        kept(done)
    }

    fn resync(&mut self, records: u64) -> anyhow::Result<()> {
        self.tree.catch_up(&self.audit_dir, records)?;
        self.checkpointed = self.checkpointed.min(records);
        Ok(())
    }

    fn extend(&mut self, lines: &[u8]) -> io::Result<()> {
        for line in batch_lines(lines) {
            self.tree.append(line)?;
        }
        Ok(())
    }

    /// How long until a checkpoint is due (`None`: nothing to checkpoint; zero: now).
    fn due_in(&self) -> Option<Duration> {
        let pending = self.tree.size().saturating_sub(self.checkpointed);
        match pending {
            0 => None,
            n if n >= CHECKPOINT_EVERY_RECORDS => Some(CHECKPOINT_MIN_GAP.saturating_sub(self.at.elapsed())),
            _ => Some(CHECKPOINT_EVERY.saturating_sub(self.at.elapsed())),
        }
    }

    /// Issues a checkpoint of the whole tree when it grew since the last one; `false` when that
    /// failed (warned).
    fn checkpoint(&mut self) -> bool {
        let size = self.tree.size();
        if size > self.checkpointed {
            if let Err(error) = issue_checkpoint(&self.audit_dir, &self.tree, &self.signer, size, self.witness.as_ref())
            {
                log_line!(
                    "aileron: warning: checkpointing the audit log's Merkle tree failed ({error:#}); no more \
                     checkpoints until the daemon restarts"
                );
                return false;
            }
            self.checkpointed = size;
            self.at = std::time::Instant::now();
        }
        true
    }
}

/// Whether the tree's thread goes on after a step: a failed one is warned about and gives the
/// tree up.
fn kept(done: Result<(), (&str, anyhow::Error)>) -> bool {
    if let Err((doing, error)) = &done {
        log_line!(
            "aileron: warning: {doing} the audit log's Merkle tree failed ({error:#}); no more checkpoints until the \
             daemon restarts"
        );
    }
    done.is_ok()
}

/// Calls `each` with every record line (no newline) from the `skip`-th on, in order, until it
/// answers `false`.
fn for_each_line(audit_dir: &Path, skip: u64, mut each: impl FnMut(&[u8]) -> io::Result<bool>) -> anyhow::Result<()> {
    let mut lines = super::daily_file::ForwardLines::at(audit_dir, skip)?;
    loop {
        let batch = lines.next_lines(u64::MAX, 4096)?;
        if batch.is_empty() {
            return Ok(());
        }
        for line in &batch {
            if !each(line)? {
                return Ok(());
            }
        }
    }
}

/// The log's signing key, made (0600) at first use.
pub fn log_signer(audit_dir: &Path) -> anyhow::Result<NoteSigner> {
    let seed = super::key_file::seed(&audit_dir.join(KEY_FILE), KEY_HEADER, "an audit log key")?;
    let public = NoteSigner::new("x", &seed)?.public_key();
    let id = super::key_file::public_key_id(&public);
    Ok(NoteSigner::new(&format!("aileron.local/{id}"), &seed)?)
}

fn checkpoint_path(audit_dir: &Path, size: u64) -> PathBuf {
    audit_dir.join(CHECKPOINTS_DIR).join(format!("{size:020}.checkpoint"))
}

/// Signs and stores the checkpoint of the tree's first `size` records; its text.
/// `witness`: cosigns it when it finds it consistent; a refusal leaves the log's signature only
/// (warned: `aileron audit verify` then names the checkpoint).
pub fn issue_checkpoint(
    audit_dir: &Path,
    tree: &Tree,
    signer: &NoteSigner,
    size: u64,
    witness: Option<&super::witness::Witness>,
) -> anyhow::Result<String> {
    let root = tree.root(size).map_err(anyhow::Error::msg)?;
    let mut note = signer.sign(&Checkpoint { origin: signer.name().to_string(), size, root }.body());
    if let Some(witness) = witness {
        match witness.cosign(&note, &signer.verifier(), tree) {
            Ok(cosigned) => note = cosigned,
            Err(refused) => {
                log_line!("aileron: warning: the audit witness did not cosign checkpoint {size}: {refused:#}")
            }
        }
    }
    let dir = audit_dir.join(CHECKPOINTS_DIR);
    create_private_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = checkpoint_path(audit_dir, size);
    write_atomic(&path, note.as_bytes(), 0o600).with_context(|| format!("writing {}", path.display()))?;
    prune_checkpoints(audit_dir)?;
    Ok(note)
}

/// Checkpoints kept whatever their age: the newest.
const NEWEST_KEPT: usize = 64;

/// Keeps the newest [`NEWEST_KEPT`] checkpoints and, of the older ones, the largest in each
/// power-of-two range of sizes (a ladder back to the first records), so the directory stays
/// small and `verify` quick on a log of any age. The newest checkpoint alone covers every record
/// (its root is over all of them) and the witness remembers what it cosigned, so a pruned
/// checkpoint takes no detection away; receipts already written carry their own checkpoint.
fn prune_checkpoints(audit_dir: &Path) -> anyhow::Result<()> {
    let files = checkpoint_files(audit_dir)?;
    let Some(older) = files.len().checked_sub(NEWEST_KEPT) else { return Ok(()) };
    let range = |size: u64| u64::BITS - size.leading_zeros();
    for (index, (size, path)) in files[..older].iter().enumerate() {
        // The largest of its range among the older ones is kept.
        let largest_of_range = files[..older].get(index + 1).is_none_or(|(next, _)| range(*next) != range(*size));
        if !largest_of_range {
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Every stored checkpoint, smallest first: `(size, note text)`.
pub fn checkpoints(audit_dir: &Path) -> anyhow::Result<Vec<(u64, String)>> {
    checkpoint_files(audit_dir)?
        .into_iter()
        .map(|(size, path)| {
            let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            Ok((size, text))
        })
        .collect()
}

/// The size of the newest stored checkpoint (0: none), from the file names alone: what the
/// writer needs at start, without reading every checkpoint there is.
fn newest_checkpoint(audit_dir: &Path) -> anyhow::Result<u64> {
    Ok(checkpoint_files(audit_dir)?.last().map_or(0, |(size, _)| *size))
}

/// The checkpoint files, smallest size first.
fn checkpoint_files(audit_dir: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let dir = audit_dir.join(CHECKPOINTS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("reading {}", dir.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let size = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".checkpoint"));
        if let Some(size) = size.and_then(|n| n.parse::<u64>().ok()) {
            found.push((size, path));
        }
    }
    found.sort_by_key(|(size, _)| *size);
    Ok(found)
}

/// A stored checkpoint, checked: signed by `verifier`, cosigned by `witness` when given, of the
/// size its file name says.
pub fn open_checkpoint(
    verifier: &NoteVerifier,
    witness: Option<&CosignatureVerifier>,
    size: u64,
    text: &str,
) -> Result<Checkpoint, String> {
    let note = SignedNote::parse(text).map_err(|e| format!("checkpoint {size}: {e}"))?;
    if !verifier.verifies(&note) {
        return Err(format!("checkpoint {size} is not signed by the log's key {}", verifier.name));
    }
    if let Some(witness) = witness
        && witness.cosigned_at(&note).is_none()
    {
        return Err(format!(
            "checkpoint {size} is not cosigned by the witness {}: it was signed again by someone holding the log's \
             key, or the witness refused it as inconsistent",
            witness.name
        ));
    }
    let checkpoint = Checkpoint::parse(&note.body).map_err(|e| format!("checkpoint {size}: {e}"))?;
    if checkpoint.size != size || checkpoint.origin != verifier.name {
        return Err(format!("checkpoint {size} names size {} of {}", checkpoint.size, checkpoint.origin));
    }
    Ok(checkpoint)
}

/// A receipt for the record `seq` whose `line` the log holds (C2SP tlog-proof, the line as its
/// `extra`): against the newest checkpoint that covers it, issuing one of the stored tree when
/// none does yet. The line is checked against the tree, so a line that is not the record's fails.
pub fn receipt(
    audit_dir: &Path,
    seq: u64,
    line: Vec<u8>,
    witness: Option<&super::witness::Witness>,
) -> anyhow::Result<aileron_core::tlog::TlogProof> {
    anyhow::ensure!(seq > 0, "records are numbered from 1");
    let index = seq - 1;
    let deadline = std::time::Instant::now() + TREE_CATCH_UP;
    let tree = loop {
        let tree = Tree::read_only(audit_dir)?;
        if index < tree.size() || std::time::Instant::now() >= deadline {
            break tree;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    anyhow::ensure!(
        index < tree.size(),
        "the Merkle tree does not cover record {seq} yet (it holds {}); start the daemon, which catches it up",
        tree.size()
    );
    let signer = log_signer(audit_dir)?;
    let verifier = signer.verifier();
    let newest = checkpoints(audit_dir)?.into_iter().rev().find(|(size, _)| *size > index && *size <= tree.size());
    let (size, note) = match newest {
        Some(found) => found,
        None => (tree.size(), issue_checkpoint(audit_dir, &tree, &signer, tree.size(), witness)?),
    };
    let checkpoint = open_checkpoint(&verifier, None, size, &note).map_err(anyhow::Error::msg)?;
    let hashes = merkle::inclusion_proof(&tree, index, size).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        merkle::verify_inclusion(&leaf_hash(&line), index, size, &hashes, &checkpoint.root),
        "record {seq} is not in checkpoint {size} as the stored tree says: run `aileron audit verify`"
    );
    Ok(aileron_core::tlog::TlogProof { extra: Some(line), index, hashes, checkpoint: note })
}

/// What an offline receipt check found: the record line it proves and the checkpoint.
pub fn check_receipt(
    text: &str,
    verifier_key: &str,
    witness_key: Option<&str>,
) -> Result<(Vec<u8>, Checkpoint), String> {
    let proof = aileron_core::tlog::TlogProof::parse(text).map_err(|e| e.to_string())?;
    let verifier = NoteVerifier::parse(verifier_key).map_err(|e| e.to_string())?;
    let note = SignedNote::parse(&proof.checkpoint).map_err(|e| e.to_string())?;
    if !verifier.verifies(&note) {
        return Err(format!("the receipt's checkpoint is not signed by {}", verifier.name));
    }
    // Whoever holds the log's key can sign a checkpoint; only the witness can cosign it.
    if let Some(witness_key) = witness_key {
        let witness = CosignatureVerifier::parse(witness_key).map_err(|e| e.to_string())?;
        if witness.cosigned_at(&note).is_none() {
            return Err(format!("the receipt's checkpoint is not cosigned by the witness {}", witness.name));
        }
    }
    let checkpoint = Checkpoint::parse(&note.body).map_err(|e| e.to_string())?;
    if checkpoint.origin != verifier.name {
        return Err(format!("the checkpoint is of {}, not {}", checkpoint.origin, verifier.name));
    }
    let line = proof.extra.ok_or("the receipt carries no record (`extra`)")?;
    if !merkle::verify_inclusion(&leaf_hash(&line), proof.index, checkpoint.size, &proof.hashes, &checkpoint.root) {
        return Err(format!("the record is not entry {} of the signed tree of {}", proof.index, checkpoint.size));
    }
    Ok((line, checkpoint))
}

/// What `aileron audit verify` adds for the tree (SPEC §17).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CheckpointReport {
    /// Stored checkpoints, each signed by the log's key and matching the log.
    pub verified: usize,
    /// The size of the newest one (0: none yet).
    pub newest: u64,
}

/// Recomputes the tree from the log's lines (one pass, a frontier in memory) and checks every
/// stored checkpoint against it: a record edited, removed or re-chained below a checkpoint, or a
/// log shorter than one (truncated, rolled back), is named. Checkpoints are checked with the key
/// in the audit directory: someone who holds it can sign a rewritten log's checkpoints too, which
/// only a witness or a published copy can catch.
pub fn verify_checkpoints(audit_dir: &Path, witness: Option<&CosignatureVerifier>) -> Result<CheckpointReport, String> {
    let stored = checkpoints(audit_dir).map_err(|e| format!("{e:#}"))?;
    if stored.is_empty() {
        return Ok(CheckpointReport { verified: 0, newest: 0 });
    }
    let signer = log_signer(audit_dir).map_err(|e| format!("{e:#}"))?;
    verify_against(audit_dir, &stored, &signer.verifier(), witness)
}

/// [`verify_checkpoints`] against `stored` checkpoints (a published copy, say), each signed by
/// `log` and, when given, cosigned by `witness`.
pub fn verify_against(
    audit_dir: &Path,
    stored: &[(u64, String)],
    verifier: &NoteVerifier,
    witness: Option<&CosignatureVerifier>,
) -> Result<CheckpointReport, String> {
    verify_resuming(audit_dir, stored, verifier, witness, Resume::default()).map(|(report, _)| report)
}

/// How far a checkpoint verification got: the tree's frontier (the roots of the perfect subtrees
/// of the leaves so far, largest first) after the log's first `lines` lines, where the next line
/// starts, and the checkpoints among those lines it checked (size, SHA-256 of the note).
#[derive(Debug, Clone)]
pub struct CheckpointProgress {
    lines: u64,
    position: Option<(PathBuf, u64)>,
    frontier: Vec<(u32, Hash)>,
    checked: Vec<(u64, [u8; 32])>,
}

/// What a checkpoint verification may start from and what it should remember.
#[derive(Debug, Default)]
pub(super) struct Resume {
    /// What an earlier verification got to.
    pub earlier: Option<CheckpointProgress>,
    /// The log's first lines vouched for as unchanged since then (by the chain's verification,
    /// which hashes their bytes again): `earlier` is used only when it covers no more than these.
    pub unchanged: u64,
    /// The line count to remember the progress at: what the chain's verification proved now,
    /// so that the next one can vouch for it.
    pub remember_at: u64,
}

/// [`verify_against`], resuming from `resume.earlier` when the lines it covers are vouched for
/// and every stored checkpoint among them is one it checked, unchanged (a changed, added or
/// re-signed one, and the tree is recomputed from the first line). The progress at
/// `resume.remember_at` comes back for the next verification.
pub(super) fn verify_resuming(
    audit_dir: &Path,
    stored: &[(u64, String)],
    verifier: &NoteVerifier,
    witness: Option<&CosignatureVerifier>,
    resume: Resume,
) -> Result<(CheckpointReport, Option<CheckpointProgress>), String> {
    // Each stored note hashed once: `(size, SHA-256 of the note)`, in `stored`'s order.
    let digests: Vec<(u64, [u8; 32])> =
        stored.iter().map(|(size, text)| (*size, Sha256::digest(text.as_bytes()))).collect();
    let start = resume.earlier.filter(|earlier| {
        earlier.lines <= resume.unchanged
            && digests.iter().filter(|(size, _)| *size <= earlier.lines).all(|stored| earlier.checked.contains(stored))
    });
    let mut progress =
        start.unwrap_or(CheckpointProgress { lines: 0, position: None, frontier: Vec::new(), checked: Vec::new() });
    // Those checked before and still stored (an older one may have been pruned).
    progress.checked.retain(|checked| digests.contains(checked));
    let mut signed = Vec::new();
    for ((size, text), (_, digest)) in stored.iter().zip(&digests).filter(|((size, _), _)| *size > progress.lines) {
        signed.push((open_checkpoint(verifier, witness, *size, text)?, *digest));
    }
    let mut next = signed.iter().peekable();
    let mut lines = super::daily_file::ForwardLines::resume(audit_dir, progress.position.clone());
    let mut remembered = (progress.lines <= resume.remember_at).then(|| progress.clone());
    loop {
        // A batch ends where the progress is to be remembered.
        let available = resume.remember_at.checked_sub(progress.lines).filter(|left| *left > 0).unwrap_or(u64::MAX);
        let batch = lines.next_lines(available, 4096).map_err(|e| format!("reading the log: {e}"))?;
        if batch.is_empty() {
            break;
        }
        for line in &batch {
            push_leaf(&mut progress.frontier, line);
            progress.lines += 1;
            let count = progress.lines;
            while let Some((checkpoint, digest)) = next.next_if(|(checkpoint, _)| checkpoint.size == count) {
                if frontier_root(&progress.frontier) != checkpoint.root {
                    return Err(format!(
                        "the log's first {count} records are not what checkpoint {count} signed: a record at or \
                         before {count} was edited, removed or re-chained"
                    ));
                }
                progress.checked.push((count, *digest));
            }
        }
        if progress.lines <= resume.remember_at {
            progress.position = lines.position();
            remembered = Some(progress.clone());
        }
    }
    if let Some((missing, _)) = next.next() {
        return Err(format!(
            "the log holds {} records but checkpoint {} covers more: records were cut from its end or the log \
             was rolled back",
            progress.lines, missing.size
        ));
    }
    let newest = stored.last().map_or(0, |(size, _)| *size);
    Ok((CheckpointReport { verified: progress.checked.len(), newest }, remembered))
}

/// The log against what the witness on this machine last cosigned (SPEC §17): the log must still
/// hold that many records, with the same root. Checked by `aileron audit verify` beside the stored
/// checkpoints, since whoever cuts or rolls back the log can remove its checkpoints and tree with it
/// (the tenth re-attack: a log cut from 5 records to 3, re-chained, checkpoints removed, verified
/// "ok" while the witness had cosigned 5); the witness's own record is not in the home.
pub fn verify_witnessed(audit_dir: &Path, cosigned: &super::witness::Cosigned) -> Result<(), String> {
    if cosigned.size == 0 {
        return Ok(());
    }
    let origin =
        audit_dir.join(KEY_FILE).exists().then(|| log_signer(audit_dir).map(|signer| signer.name().to_string()));
    match origin.transpose().map_err(|e| format!("{e:#}"))? {
        Some(origin) if origin == cosigned.origin => {}
        origin => {
            return Err(format!(
                "the witness on this machine last cosigned {} records of the log signed by {}, but this log is {}: \
                 the log's key was replaced or removed",
                cosigned.size,
                cosigned.origin,
                origin.map_or("signed by no key".to_string(), |origin| format!("signed by {origin}"))
            ));
        }
    }
    let mut lines = super::daily_file::ForwardLines::resume(audit_dir, None);
    let (mut frontier, mut count): (Vec<(u32, Hash)>, u64) = (Vec::new(), 0);
    while count < cosigned.size {
        let batch = lines.next_lines(cosigned.size - count, 4096).map_err(|e| format!("reading the log: {e}"))?;
        if batch.is_empty() {
            break;
        }
        for line in &batch {
            push_leaf(&mut frontier, line);
            count += 1;
        }
    }
    if count < cosigned.size {
        return Err(format!(
            "the log holds {count} records but the witness on this machine cosigned a checkpoint of {}: records \
             were cut from its end or the log was rolled back",
            cosigned.size
        ));
    }
    if frontier_root(&frontier) != cosigned.root {
        return Err(format!(
            "the log's first {0} records are not what the witness on this machine cosigned: a record at or before \
             {0} was edited, removed or re-chained",
            cosigned.size
        ));
    }
    Ok(())
}

/// Adds a record line's leaf to a frontier (the roots of the perfect subtrees of the leaves so
/// far, largest first), merging the subtrees it completes.
fn push_leaf(frontier: &mut Vec<(u32, Hash)>, line: &[u8]) {
    let (mut level, mut hash) = (0u32, leaf_hash(line));
    while frontier.last().is_some_and(|(top, _)| *top == level) {
        let (_, left) = frontier.pop().expect("checked");
        hash = merkle::node_hash(&left, &hash);
        level += 1;
    }
    frontier.push((level, hash));
}

/// The root of the tree a non-empty frontier describes.
fn frontier_root(frontier: &[(u32, Hash)]) -> Hash {
    let mut root = frontier.last().expect("one leaf at least").1;
    for (_, left) in frontier.iter().rev().skip(1) {
        root = merkle::node_hash(left, &root);
    }
    root
}

/// The non-empty lines of a batch. The newlines are found with `memchr`: a split testing byte by
/// byte was ~3,800 instructions of every run on the tree's thread (BENCHMARKS.md, issue 49).
fn batch_lines(lines: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    memchr::memchr_iter(b'\n', lines).chain([lines.len()]).filter_map(move |end| {
        let line = &lines[start..end];
        start = end + 1;
        (!line.is_empty()).then_some(line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_log(audit_dir: &Path, lines: &[String]) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(audit_dir.join("audit-2026-01-01.jsonl"), text).unwrap();
    }

    /// A batch is cut into the lines a byte-by-byte split would give, empty ones left out.
    #[test]
    fn a_batch_is_cut_at_every_newline() {
        let batches: [&[u8]; 8] =
            [b"", b"\n", b"\n\n", b"a", b"a\n", b"a\nbc\n", b"\na\n\nbc", "é\n{\"x\":\"\\n\"}\n".as_bytes()];
        for batch in batches {
            let expected: Vec<&[u8]> = batch.split(|b| *b == b'\n').filter(|line| !line.is_empty()).collect();
            assert_eq!(batch_lines(batch).collect::<Vec<_>>(), expected, "{:?}", String::from_utf8_lossy(batch));
        }
    }

    #[test]
    fn the_stored_tree_catches_up_from_the_log_and_repairs_a_torn_or_longer_tree() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let lines: Vec<String> = (1..=37).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        write_log(dir, &lines);
        let leaves: Vec<Hash> = lines.iter().map(|l| leaf_hash(l.as_bytes())).collect();
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, 20).unwrap();
        let root20 = tree.root(20).unwrap();
        tree.catch_up(dir, 37).unwrap();
        assert_eq!(tree.size(), 37);
        let root37 = tree.root(37).unwrap();
        assert_eq!(tree.root(20).unwrap(), root20, "a prefix keeps its root");
        let proof = merkle::inclusion_proof(&tree, 5, 37).unwrap();
        assert!(merkle::verify_inclusion(&leaves[5], 5, 37, &proof, &root37));
        // Torn: half a leaf and a lost parent; reopened, it is repaired to the same root.
        drop(tree);
        let level0 = dir.join(TREE_DIR).join("level-0");
        let len = std::fs::metadata(&level0).unwrap().len();
        OpenOptions::new().write(true).open(&level0).unwrap().set_len(len - 48).unwrap();
        let level2 = dir.join(TREE_DIR).join("level-2");
        let len = std::fs::metadata(&level2).unwrap().len();
        OpenOptions::new().write(true).open(&level2).unwrap().set_len(len - 64).unwrap();
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, 37).unwrap();
        assert_eq!(tree.root(37).unwrap(), root37);
        // The log cut to 30 (a recovery): the tree follows.
        tree.catch_up(dir, 30).unwrap();
        assert_eq!(tree.size(), 30);
        tree.catch_up(dir, 37).unwrap();
        assert_eq!(tree.root(37).unwrap(), root37);
    }

    fn level_files(dir: &Path) -> Vec<Vec<u8>> {
        (0..).map(|k| std::fs::read(dir.join(TREE_DIR).join(format!("level-{k}")))).map_while(Result::ok).collect()
    }

    #[test]
    fn appends_held_until_a_flush_answer_from_memory_and_are_written_as_one_at_a_time_would_be() {
        let (one, held) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let lines: Vec<String> = (1..=70).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        let leaves: Vec<Hash> = lines.iter().map(|l| leaf_hash(l.as_bytes())).collect();
        let mut each = Tree::open(one.path()).unwrap();
        let mut roots = Vec::new();
        for line in &lines {
            each.append(line.as_bytes()).unwrap();
            each.flush().unwrap();
            roots.push(each.root(each.size()).unwrap());
        }
        let mut tree = Tree::open(held.path()).unwrap();
        let mut at = 0;
        for batch in [1, 2, 5, 13, 16, 1, 32] {
            for line in &lines[at..at + batch] {
                tree.append(line.as_bytes()).unwrap();
            }
            at += batch;
            // Unflushed: the files lag, this tree answers from what it holds.
            assert_eq!(Tree::read_only(held.path()).unwrap().size(), at as u64 - batch as u64);
            assert_eq!(tree.root(at as u64).unwrap(), roots[at - 1], "root of {at} before the flush");
            let proof = merkle::inclusion_proof(&tree, at as u64 - 1, at as u64).unwrap();
            assert!(merkle::verify_inclusion(&leaves[at - 1], at as u64 - 1, at as u64, &proof, &roots[at - 1]));
            tree.flush().unwrap();
            let stored = Tree::read_only(held.path()).unwrap();
            assert_eq!((stored.size(), stored.root(at as u64).unwrap()), (at as u64, roots[at - 1]));
        }
        assert_eq!(level_files(held.path()), level_files(one.path()), "the same bytes at every level");
        // Cut back (a recovery) with appends unflushed: they are written, then cut, and the
        // tree grows again from what is stored, not from the newest hashes it held.
        write_log(held.path(), &lines[..40]);
        tree.append(b"{\"seq\":71}").unwrap();
        tree.catch_up(held.path(), 40).unwrap();
        assert_eq!((tree.size(), tree.root(40).unwrap()), (40, roots[39]));
        for line in &lines[40..] {
            tree.append(line.as_bytes()).unwrap();
        }
        tree.flush().unwrap();
        assert_eq!(level_files(held.path()), level_files(one.path()));

        // A long catch-up writes as it goes, to the same bytes as one flush at the end.
        let (caught_up, at_once) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let many: Vec<String> = (1..=2 * CATCH_UP_FLUSH_EVERY + 5).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        write_log(caught_up.path(), &many);
        let mut tree = Tree::open(caught_up.path()).unwrap();
        tree.catch_up(caught_up.path(), many.len() as u64).unwrap();
        let mut whole = Tree::open(at_once.path()).unwrap();
        many.iter().for_each(|line| whole.append(line.as_bytes()).unwrap());
        whole.flush().unwrap();
        assert_eq!(level_files(caught_up.path()), level_files(at_once.path()));
    }

    #[test]
    fn checkpoints_are_signed_by_the_logs_key_and_read_back_checked() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let lines: Vec<String> = (1..=3).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        write_log(dir, &lines);
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, 3).unwrap();
        let signer = log_signer(dir).unwrap();
        assert_eq!(log_signer(dir).unwrap().verifier_key(), signer.verifier_key(), "the key is kept");
        issue_checkpoint(dir, &tree, &signer, 3, None).unwrap();
        let verifier = NoteVerifier::parse(&signer.verifier_key()).unwrap();
        let stored = checkpoints(dir).unwrap();
        assert_eq!(stored.len(), 1);
        let checkpoint = open_checkpoint(&verifier, None, 3, &stored[0].1).unwrap();
        assert_eq!(checkpoint.root, tree.root(3).unwrap());
        assert!(open_checkpoint(&verifier, None, 4, &stored[0].1).is_err(), "named for another size");
    }

    /// Old checkpoints are pruned to a ladder, the newest all kept; what is left still verifies.
    #[test]
    fn old_checkpoints_are_pruned_to_one_per_power_of_two() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let lines: Vec<String> = (1..=300).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        write_log(dir, &lines);
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, 300).unwrap();
        let signer = log_signer(dir).unwrap();
        for size in 1..=300 {
            issue_checkpoint(dir, &tree, &signer, size, None).unwrap();
        }
        let sizes: Vec<u64> = checkpoints(dir).unwrap().iter().map(|(size, _)| *size).collect();
        let ladder = [1, 3, 7, 15, 31, 63, 127, 236];
        let expected: Vec<u64> = ladder.into_iter().chain(237..=300).collect();
        assert_eq!(sizes, expected);
        assert_eq!(verify_checkpoints(dir, None).unwrap().verified, expected.len());
    }
}

#[cfg(test)]
mod resume_tests {
    use super::*;

    fn signed_log(dir: &Path, lines: &[String], sizes: &[u64]) -> NoteSigner {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.join("audit-2026-01-01.jsonl"), text).unwrap();
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, lines.len() as u64).unwrap();
        let signer = log_signer(dir).unwrap();
        for size in sizes {
            issue_checkpoint(dir, &tree, &signer, *size, None).unwrap();
        }
        signer
    }

    /// A second verification starts where the first stopped for the lines vouched unchanged —
    /// shown by a line edited behind its back going unseen — and recomputes from the first line
    /// when they are not vouched for, or when a checkpoint it checked was replaced.
    #[test]
    fn a_verification_resumes_only_over_lines_vouched_unchanged() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path();
        let mut lines: Vec<String> = (1..=9000).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        let signer = signed_log(dir, &lines, &[1000, 5000]);
        let verifier = signer.verifier();
        let stored = checkpoints(dir).unwrap();
        let resume = Resume { earlier: None, unchanged: 0, remember_at: 6000 };
        let (report, progress) = verify_resuming(dir, &stored, &verifier, None, resume).unwrap();
        assert_eq!((report.verified, report.newest), (2, 5000));
        let progress = progress.unwrap();
        assert_eq!(progress.lines, 6000, "remembered where the chain's proof ends");

        // The log grows, a checkpoint covers the growth; then line 10 is edited (its length kept:
        // the remembered position is a byte offset, vouched for with the bytes before it).
        lines.extend((9001..=9500).map(|seq| format!("{{\"seq\":{seq}}}")));
        signed_log(dir, &lines, &[9500]);
        lines[9] = "{\"seq\":99}".to_string();
        std::fs::remove_dir_all(dir.join(TREE_DIR)).unwrap();
        signed_log(dir, &lines, &[]);
        let stored = checkpoints(dir).unwrap();
        let vouched = |unchanged| Resume { earlier: Some(progress.clone()), unchanged, remember_at: 9500 };
        let (resumed, _) = verify_resuming(dir, &stored, &verifier, None, vouched(6000)).unwrap();
        assert_eq!((resumed.verified, resumed.newest), (3, 9500), "resumed: line 10 was not read again");
        let error = verify_resuming(dir, &stored, &verifier, None, vouched(5999)).unwrap_err();
        assert!(error.contains("checkpoint 1000"), "not vouched for: recomputed, the edit found: {error}");

        // A checkpoint it checked, replaced (signed again over the edited log): recomputed too.
        std::fs::remove_file(checkpoint_path(dir, 1000)).unwrap();
        let mut tree = Tree::open(dir).unwrap();
        tree.catch_up(dir, lines.len() as u64).unwrap();
        issue_checkpoint(dir, &tree, &signer, 1000, None).unwrap();
        let stored = checkpoints(dir).unwrap();
        let error = verify_resuming(dir, &stored, &verifier, None, vouched(6000)).unwrap_err();
        assert!(error.contains("checkpoint 5000"), "{error}");
    }
}

#[cfg(test)]
mod witness_tests {
    use super::super::witness::Witness;
    use super::*;
    use aileron_core::tlog::CosignatureVerifier;

    /// The log holding `lines`, its tree built from them (as someone rewriting the log would).
    fn log_of(audit_dir: &Path, lines: &[String]) -> Tree {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(audit_dir.join("audit-2026-01-01.jsonl"), text).unwrap();
        let _ = std::fs::remove_dir_all(audit_dir.join(TREE_DIR));
        let mut tree = Tree::open(audit_dir).unwrap();
        tree.catch_up(audit_dir, lines.len() as u64).unwrap();
        tree
    }

    /// The witness cosigns a growing log, and refuses a checkpoint of a log rewritten below what
    /// it cosigned or rolled back — even one the log's own key signed.
    #[test]
    fn the_witness_cosigns_only_consistent_checkpoints() {
        let temp = tempfile::tempdir().unwrap();
        let (audit, witness_dir) = (temp.path().join("audit"), temp.path().join("witness"));
        std::fs::create_dir_all(&audit).unwrap();
        let witness = Witness::open(&witness_dir).unwrap();
        let cosigner = CosignatureVerifier::parse(&witness.verifier_key()).unwrap();
        let signer = log_signer(&audit).unwrap();
        let mut lines: Vec<String> = (1..=5).map(|seq| format!("{{\"seq\":{seq}}}")).collect();
        let tree = log_of(&audit, &lines);
        let first = issue_checkpoint(&audit, &tree, &signer, 5, Some(&witness)).unwrap();
        assert!(cosigner.cosigned_at(&SignedNote::parse(&first).unwrap()).is_some());
        lines.extend((6..=9).map(|seq| format!("{{\"seq\":{seq}}}")));
        let tree = log_of(&audit, &lines);
        let grown = issue_checkpoint(&audit, &tree, &signer, 9, Some(&witness)).unwrap();
        assert!(cosigner.cosigned_at(&SignedNote::parse(&grown).unwrap()).is_some(), "consistent growth");

        // Rewritten below the cosigned size, then signed with the log's key: refused.
        lines[2] = "{\"seq\":3,\"rewritten\":true}".to_string();
        lines.push("{\"seq\":10}".to_string());
        let tree = log_of(&audit, &lines);
        let log = NoteVerifier::parse(&signer.verifier_key()).unwrap();
        let note =
            signer.sign(&Checkpoint { origin: signer.name().into(), size: 10, root: tree.root(10).unwrap() }.body());
        let refused = witness.cosign(&note, &log, &tree).unwrap_err().to_string();
        assert!(refused.contains("not consistent"), "{refused}");
        // Rolled back to an earlier size: refused too.
        let older =
            signer.sign(&Checkpoint { origin: signer.name().into(), size: 5, root: tree.root(5).unwrap() }.body());
        assert!(witness.cosign(&older, &log, &tree).is_err());
        // And nothing the log's key did not sign.
        let other = aileron_core::tlog::NoteSigner::new(signer.name(), &[9; 32]).unwrap();
        let forged =
            other.sign(&Checkpoint { origin: signer.name().into(), size: 10, root: tree.root(10).unwrap() }.body());
        assert!(witness.cosign(&forged, &log, &tree).is_err());
    }
}
