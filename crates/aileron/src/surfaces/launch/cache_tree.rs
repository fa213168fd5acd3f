//! The index's cached trees (its `TREE` extension) held against the entries they stand for (the
//! thirty-sixth re-attack's H13). Git keeps, for each directory, the tree its entries make and how
//! many entries that is, and trusts it while it is marked valid: `git commit` writes the cached
//! tree of every directory nothing was staged in, and `git status` and `git diff --cached` skip a
//! directory whose cached tree is `HEAD`'s. The index is the agent's to write, so it could record
//! its own `githooks/` tree beside the user's entries: `git status` shows nothing, and the
//! user's next `git add README; git commit` commits the agent's hooks. A cache that does not agree
//! with the entries is not one git writes; at the exit it is dropped (git makes it again from the
//! entries at the next commit), and the user is told. Read and written without running git.

use std::collections::HashMap;
use std::path::Path;

use super::git::{self, IndexEntry};

/// What [`look`] found in an index.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// No cached trees, or all of them the entries' own.
    Agrees,
    /// The directories (relative to the worktree; empty for its top) whose cached tree is not
    /// the one their entries make.
    Forged(Vec<Vec<u8>>),
    /// Cached trees that could not be held against the entries: a split index (the entries
    /// are partly in a shared index), or an index or a cache this reading does not follow.
    Untold,
}

/// An index's entries as cached trees are made of them.
struct Entry {
    name: Vec<u8>,
    mode: u32,
    object_name: Vec<u8>,
    /// A conflict's stage (1–3), or 0.
    stage: u16,
    /// Added with `git add -N`: in the index, in no tree.
    intent_to_add: bool,
}

impl Entry {
    fn of(entry: &IndexEntry) -> Entry {
        Entry {
            name: entry.name.to_vec(),
            mode: entry.mode(),
            object_name: entry.object_name().to_vec(),
            stage: (entry.flags() >> 12) & 3,
            intent_to_add: entry.extended & 0x2000 != 0,
        }
    }
}

/// One extension of an index: its signature and where it lies in the file (header included).
struct Extension {
    signature: [u8; 4],
    at: std::ops::Range<usize>,
}

/// An index file read whole: its entries and its extensions; `None` when it does not parse.
fn parse(bytes: &[u8], hash_len: usize) -> Option<(Vec<Entry>, Vec<Extension>)> {
    let mut entries = Vec::new();
    let extensions = layout(&mut std::io::Cursor::new(bytes), bytes.len(), hash_len, |entry| {
        entries.push(Entry::of(entry));
    });
    Some((entries, extensions.ok()?))
}

/// The extensions of the index `reader` holds (`size` bytes), each entry given to `visit` on the
/// way: read in a stream, whatever the index's size; an error when it does not parse.
fn layout<R: std::io::BufRead + std::io::Seek>(
    reader: &mut R,
    size: usize,
    hash_len: usize,
    mut visit: impl FnMut(&IndexEntry),
) -> std::io::Result<Vec<Extension>> {
    use std::io::SeekFrom;
    let unparsed = || std::io::Error::other("the index does not parse");
    let mut header = [0u8; 12];
    reader.read_exact(&mut header)?;
    reader.rewind()?;
    let count = u32::from_be_bytes(header[8..12].try_into().unwrap()) as usize;
    let mut read = 0usize;
    git::index_entries(&mut *reader, hash_len, |entry| {
        read += 1;
        visit(entry);
    });
    if read != count {
        return Err(unparsed());
    }
    let body_end = size.checked_sub(hash_len).ok_or_else(unparsed)?;
    let mut at = reader.stream_position()? as usize;
    let mut extensions = Vec::new();
    while at < body_end {
        let mut extension = [0u8; 8];
        reader.seek(SeekFrom::Start(at as u64))?;
        reader.read_exact(&mut extension)?;
        let end = at + 8 + u32::from_be_bytes(extension[4..8].try_into().unwrap()) as usize;
        if end > body_end {
            return Err(unparsed());
        }
        extensions.push(Extension { signature: extension[..4].try_into().unwrap(), at: at..end });
        at = end;
    }
    Ok(extensions)
}

/// The names of the entries a split index's `index` replaces in its shared index, in the order
/// its nameless entries come (git takes the k-th nameless entry for the shared index's entry at
/// the k-th position the `link` extension's replace bitmap sets): what the agent staged in a split
/// index is named so (the thirty-sixth re-attack's H23). `None` when `index` is not split, or its
/// shared index or bitmaps do not read.
pub fn replaced_names(git_dir: &Path, hash_len: usize) -> Option<Vec<Vec<u8>>> {
    let bytes = git::read_capped(&git_dir.join("index"), true, git::MAX_INDEX_BYTES).ok()?;
    let (_, extensions) = parse(&bytes, hash_len)?;
    let link = extensions.iter().find(|extension| &extension.signature == b"link")?;
    let data = &bytes[link.at.start + 8..link.at.end];
    let shared = hex::encode(data.get(..hash_len)?);
    let (_deleted, rest) = ewah_bits(&data[hash_len..], usize::MAX)?;
    let shared = git::read_capped(&git_dir.join(format!("sharedindex.{shared}")), true, git::MAX_INDEX_BYTES).ok()?;
    let (entries, _) = parse(&shared, hash_len)?;
    let (replaced, _) = ewah_bits(rest, entries.len())?;
    replaced.into_iter().map(|at| entries.get(at).map(|entry| entry.name.clone())).collect()
}

/// The positions an EWAH bitmap (git's `ewah_io.c` serialisation) sets, and the bytes after it;
/// `None` when it does not parse or sets a position past `below`.
fn ewah_bits(data: &[u8], below: usize) -> Option<(Vec<usize>, &[u8])> {
    let word32 = |at: usize| data.get(at..at + 4).map(|bytes| u32::from_be_bytes(bytes.try_into().unwrap()));
    let words = word32(4)? as usize;
    let end = 8usize.checked_add(words.checked_mul(8)?)?.checked_add(4)?;
    if data.len() < end {
        return None;
    }
    let word = |k: usize| u64::from_be_bytes(data[8 + 8 * k..16 + 8 * k].try_into().unwrap());
    let (mut set, mut position, mut k) = (Vec::new(), 0usize, 0usize);
    while k < words {
        let marker = word(k);
        let running = ((marker >> 1) & 0xffff_ffff) as usize * 64;
        if marker & 1 == 1 {
            if position.checked_add(running)? > below {
                return None;
            }
            set.extend(position..position + running);
        }
        position = position.checked_add(running)?;
        k += 1;
        for _ in 0..(marker >> 33) {
            if k >= words {
                return None;
            }
            let literal = word(k);
            for bit in 0..64 {
                if literal & (1 << bit) != 0 {
                    if position + bit >= below {
                        return None;
                    }
                    set.push(position + bit);
                }
            }
            position += 64;
            k += 1;
        }
    }
    Some((set, &data[end..]))
}

/// Whether the cached trees of the index at `index` (of a repository whose object names are
/// `hash_len` bytes) are the ones its entries make.
pub fn look(index: &Path, hash_len: usize) -> Look {
    // An index larger than is read here is not taken cut short (the thirty-seventh re-attack's I3
    // ended the first 256 MiB like a whole index and put its cache after them, where git reads on).
    let too_large = std::fs::metadata(index).is_ok_and(|metadata| metadata.len() > git::MAX_INDEX_BYTES);
    let Ok(bytes) = git::read_capped(index, true, git::MAX_INDEX_BYTES) else { return Look::Agrees };
    if too_large {
        return Look::Untold;
    }
    if !bytes.starts_with(b"DIRC") {
        // Not an index git reads (it refuses to work): no cache of it is used.
        return Look::Agrees;
    }
    let Some((entries, extensions)) = parse(&bytes, hash_len) else { return Look::Untold };
    let trees: Vec<&Extension> = extensions.iter().filter(|extension| &extension.signature == b"TREE").collect();
    if trees.is_empty() {
        return Look::Agrees;
    }
    if extensions.iter().any(|extension| &extension.signature == b"link") {
        return Look::Untold;
    }
    let Some(made) = trees_made(&entries, hash_len) else { return Look::Untold };
    // Every one: git keeps the last it reads (I3's sibling, I13: a true cache, then a forged one).
    let mut forged: Vec<Vec<u8>> = Vec::new();
    for tree in trees {
        let Some(cached) = cached_trees(&bytes[tree.at.start + 8..tree.at.end], hash_len) else { return Look::Untold };
        forged.extend(
            cached
                .into_iter()
                .filter(|cached| {
                    let made = made.get(cached.path.as_slice());
                    made.is_none_or(|tree| tree.count != cached.count || tree.object_name != cached.object_name)
                })
                .map(|cached| cached.path),
        );
    }
    forged.sort();
    forged.dedup();
    if forged.is_empty() { Look::Agrees } else { Look::Forged(forged) }
}

/// A cached tree marked valid: its directory's path (empty for the top), the entries it
/// covers, its tree's name.
struct Cached {
    path: Vec<u8>,
    count: i64,
    object_name: Vec<u8>,
}

/// The cached trees marked valid, as git reads them (`read_one` in git's `cache-tree.c`); `None` when the extension
/// does not parse. One whose top is not the worktree's is not read by git, and none is returned.
fn cached_trees(mut data: &[u8], hash_len: usize) -> Option<Vec<Cached>> {
    if data.first() != Some(&0) {
        return Some(Vec::new());
    }
    let mut valid = Vec::new();
    // The directories read whose subtrees are still to come: their paths and how many.
    let mut open: Vec<(Vec<u8>, u64)> = Vec::new();
    loop {
        let nul = data.iter().position(|&byte| byte == 0)?;
        let name = &data[..nul];
        let line_end = nul + data[nul..].iter().position(|&byte| byte == b'\n')?;
        let line = std::str::from_utf8(&data[nul + 1..line_end]).ok()?;
        let mut numbers = line.split(' ');
        let count: i64 = numbers.next()?.parse().ok()?;
        let subtrees: u64 = numbers.next()?.parse().ok()?;
        if numbers.next().is_some() {
            return None;
        }
        data = &data[line_end + 1..];
        let path = match open.last() {
            None => name.to_vec(),
            Some((parent, _)) if parent.is_empty() => name.to_vec(),
            Some((parent, _)) => [parent.as_slice(), b"/", name].concat(),
        };
        if count >= 0 {
            valid.push(Cached { path: path.clone(), count, object_name: data.get(..hash_len)?.to_vec() });
            data = &data[hash_len..];
        }
        if let Some((_, left)) = open.last_mut() {
            *left -= 1;
        }
        open.push((path, subtrees));
        while open.last().is_some_and(|(_, left)| *left == 0) {
            open.pop();
        }
        if open.is_empty() {
            return Some(valid);
        }
    }
}

/// A directory's tree as its entries make it.
struct Made {
    /// The entries it covers (git's `entry_count`).
    count: i64,
    /// Its tree's name; empty where git would not cache one (an entry added with `-N`, or in
    /// conflict, lies below).
    object_name: Vec<u8>,
}

/// The tree each directory's entries make, by the directory's path, as git makes them
/// (`update_one` in git's `cache-tree.c`); `None` when the entries do not make trees git would.
fn trees_made(entries: &[Entry], hash_len: usize) -> Option<HashMap<Vec<u8>, Made>> {
    let mut made = HashMap::new();
    let (consumed, _) = make(entries, b"", hash_len, &mut made)?;
    (consumed == entries.len()).then_some(made)
}

/// The tree of the entries from `entries[0]` on that lie below `dir` (empty, or ending in `/`),
/// recorded in `made` with those of the directories below it: how many entries it took, and
/// its name (`None` where git would not cache it).
fn make(
    entries: &[Entry],
    dir: &[u8],
    hash_len: usize,
    made: &mut HashMap<Vec<u8>, Made>,
) -> Option<(usize, Option<Vec<u8>>)> {
    // A sparse index's directory entry for this very directory: its tree, one entry.
    if let Some(first) = entries.first()
        && first.mode & 0o170000 == 0o040000
        && first.name == dir
    {
        return Some((1, Some(first.object_name.clone())));
    }
    let mut body = Vec::new();
    let mut cacheable = true;
    let mut at = 0;
    while let Some(entry) = entries.get(at) {
        if entry.name.len() <= dir.len() || !entry.name.starts_with(dir) {
            break;
        }
        let rest = &entry.name[dir.len()..];
        if let Some(slash) = rest.iter().position(|&byte| byte == b'/') {
            let below = &entry.name[..dir.len() + slash + 1];
            let (taken, tree) = make(&entries[at..], below, hash_len, made)?;
            if taken == 0 {
                // Git stops here ("index cache-tree records empty sub-tree").
                return None;
            }
            made.insert(
                below[..below.len() - 1].to_vec(),
                Made { count: taken as i64, object_name: tree.clone().unwrap_or_default() },
            );
            at += taken;
            match tree {
                Some(tree) => {
                    body.extend_from_slice(b"40000 ");
                    body.extend_from_slice(&rest[..slash]);
                    body.push(0);
                    body.extend_from_slice(&tree);
                }
                // What git writes of it then does not matter: this tree is not cached either.
                None => cacheable = false,
            }
        } else {
            at += 1;
            if entry.stage != 0 || entry.intent_to_add {
                cacheable = false;
                continue;
            }
            body.extend_from_slice(format!("{:o} ", entry.mode).as_bytes());
            body.extend_from_slice(rest);
            body.push(0);
            body.extend_from_slice(&entry.object_name);
        }
    }
    let tree = cacheable.then(|| git::object_name(b"tree", &body, hash_len));
    if dir.is_empty() {
        made.insert(Vec::new(), Made { count: at as i64, object_name: tree.clone().unwrap_or_default() });
    }
    Some((at, tree))
}

/// The extensions that only spare git work, each of which the agent could forge to change what
/// git shows or commits: the cached trees (`TREE`: H13), the untracked cache (`UNTR`: a new file
/// left out of `git status`, the thirty-seventh re-attack's I10), the file-system monitor's token
/// (`FSMN`), and the offsets that let git read the entries elsewhere than in sequence (`EOIE`,
/// `IEOT`: I11 hid its entries where only git's threaded reader found them). Git makes each again.
const CACHES: [&[u8; 4]; 5] = [b"TREE", b"UNTR", b"FSMN", b"EOIE", b"IEOT"];

/// Drops [`CACHES`] from the index at `index` (nothing is written when it has none), as git takes
/// an index for writing: its `index.lock` made new, the index copied into it without them and
/// with its checksum made again (left zero where `index.skipHash` wrote it so), synced, renamed
/// over the index. Read in a stream, whatever its size (I3).
pub fn drop_caches(index: &Path, hash_len: usize) -> std::io::Result<()> {
    use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, git::open_regular(index)?);
    let metadata = reader.get_ref().metadata()?;
    let (size, modified) = (metadata.len() as usize, metadata.modified()?);
    let extensions = layout(&mut reader, size, hash_len, |_| {})?;
    if !extensions.iter().any(|extension| CACHES.contains(&&extension.signature)) {
        return Ok(());
    }
    // What stays: the header and entries, and each extension that is not a cache.
    let entries_end = extensions.first().map_or(size - hash_len, |extension| extension.at.start);
    let kept = std::iter::once(0..entries_end).chain(
        extensions
            .into_iter()
            .filter(|extension| !CACHES.contains(&&extension.signature))
            .map(|extension| extension.at),
    );
    let kept: Vec<std::ops::Range<usize>> = kept.collect();
    let mut trailer = vec![0u8; hash_len];
    reader.seek(SeekFrom::Start((size - hash_len) as u64))?;
    reader.read_exact(&mut trailer)?;
    let lock = index
        .with_file_name(format!("{}.lock", index.file_name().map(|name| name.to_string_lossy()).unwrap_or_default()));
    // `create_new`: a lock there (git at work, or one the agent left) is not taken, nor followed.
    let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o666).open(&lock)?;
    let written = (|| {
        let digest = ring::digest::Context::new(git::object_hash(hash_len));
        let mut out = Hashing { file: std::io::BufWriter::new(file), digest };
        for range in kept {
            reader.seek(SeekFrom::Start(range.start as u64))?;
            std::io::copy(&mut (&mut reader).take((range.end - range.start) as u64), &mut out)?;
        }
        let Hashing { mut file, digest } = out;
        // An index written without its checksum (`index.skipHash`) stays so.
        let checksum = if trailer.iter().all(|&byte| byte == 0) { trailer } else { digest.finish().as_ref().to_vec() };
        file.write_all(&checksum)?;
        let file = file.into_inner().map_err(|error| error.into_error())?;
        // The index's own time kept: git takes an entry as unchanged by its stat data only when
        // its file is older than the index, and a later time would make a racily clean entry
        // look settled.
        file.set_modified(modified)?;
        file.sync_all()?;
        std::fs::rename(&lock, index)?;
        if let Some(dir) = index.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&lock);
    }
    written
}

/// A writer that also hashes what it writes.
struct Hashing<W> {
    file: W,
    digest: ring::digest::Context,
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes)?;
        self.digest.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// `git` run in `repo` with `env` and none of the user's config (these tests' and
    /// `hidden_changes`' own).
    pub(in super::super) fn git_output(
        repo: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> std::io::Result<std::process::Output> {
        std::process::Command::new("git")
            .args(args)
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .envs(env.iter().copied())
            .output()
    }

    /// [`git_output`] as an author of no config, which must succeed: its output, trimmed.
    pub(in super::super) fn git(repo: &Path, args: &[&str], env: &[(&str, &Path)]) -> String {
        let output =
            git_output(repo, &[&["-c", "user.name=U", "-c", "user.email=u@x"][..], args].concat(), env).unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    /// A repository with a committed hook (`githooks/pre-commit`), a file at the top and one two
    /// directories down, or `None` where git is missing.
    pub(in super::super) fn repository() -> Option<(tempfile::TempDir, std::path::PathBuf)> {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path().to_path_buf();
        std::process::Command::new("git").arg("--version").output().ok()?;
        git(&repo, &["init", "-q"], &[]);
        std::fs::create_dir_all(repo.join("githooks")).unwrap();
        std::fs::create_dir_all(repo.join("src/lib")).unwrap();
        std::fs::write(repo.join("githooks/pre-commit"), "#!/bin/sh\necho lint ok\n").unwrap();
        std::fs::write(repo.join("src/lib/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(repo.join("README"), "hello\n").unwrap();
        git(&repo, &["add", "-A"], &[]);
        git(&repo, &["commit", "-qm", "first"], &[]);
        Some((temp, repo))
    }

    /// How many valid cached trees the index at `index` holds (a look that agrees with none
    /// proves nothing).
    fn cached(index: &Path) -> usize {
        cached_of(index, 20)
    }

    fn cached_of(index: &Path, hash_len: usize) -> usize {
        let bytes = std::fs::read(index).unwrap();
        let (_, extensions) = parse(&bytes, hash_len).unwrap();
        let tree = extensions.iter().find(|extension| &extension.signature == b"TREE");
        tree.map_or(0, |tree| cached_trees(&bytes[tree.at.start + 8..tree.at.end], hash_len).unwrap().len())
    }

    /// The `TREE` extension (header included) of an index of the agent's: `repo`'s `HEAD` with
    /// its own `githooks/pre-commit`, its cached trees made by git.
    pub(in super::super) fn agents_cached_trees(repo: &Path) -> Vec<u8> {
        let scratch = tempfile::tempdir().unwrap();
        let index = scratch.path().join("index");
        let env = [("GIT_INDEX_FILE", index.as_path())];
        git(repo, &["read-tree", "HEAD"], &env);
        std::fs::write(scratch.path().join("hook"), "#!/bin/sh\ntouch pwned\n").unwrap();
        let hook = git(repo, &["hash-object", "-w", &scratch.path().join("hook").display().to_string()], &[]);
        git(repo, &["update-index", "--cacheinfo", &format!("100755,{hook},githooks/pre-commit")], &env);
        git(repo, &["write-tree"], &env);
        let theirs = std::fs::read(&index).unwrap();
        let (_, extensions) = parse(&theirs, 20).unwrap();
        let tree = &extensions.iter().find(|extension| &extension.signature == b"TREE").unwrap().at;
        theirs[tree.clone()].to_vec()
    }

    /// The index with its `TREE` extension replaced by `tree`'s (the whole extension, header
    /// included), its checksum made again: what the agent writes.
    pub(in super::super) fn with_cached_trees(index: &[u8], tree: &[u8]) -> Vec<u8> {
        let (_, extensions) = parse(index, 20).unwrap();
        let at = &extensions.iter().find(|extension| &extension.signature == b"TREE").unwrap().at;
        let mut forged = [&index[..at.start], tree, &index[at.end..index.len() - 20]].concat();
        let checksum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &forged);
        forged.extend_from_slice(checksum.as_ref());
        forged
    }

    /// The thirty-sixth re-attack's H13, as git itself takes it: the agent gives the user's index
    /// the cached trees of an index of its own whose hook is its own. `git status` is clean, and
    /// the user's next commit of something else commits the agent's hook. The look names the
    /// directories whose cache is forged; once dropped, the commit is the user's again. What git
    /// itself writes (a commit, a checkout, `add -N`, a conflict, a sparse index, `read-tree`)
    /// always agrees.
    #[test]
    fn cached_trees_that_are_not_the_entries_are_named_and_dropped() {
        let Some((_temp, repo)) = repository() else { return };
        let index = repo.join(".git/index");
        assert_eq!(look(&index, 20), Look::Agrees, "a commit's index");
        assert!(cached(&index) > 0, "a commit's index");

        let true_index = std::fs::read(&index).unwrap();
        let theirs = agents_cached_trees(&repo);
        std::fs::write(&index, with_cached_trees(&true_index, &theirs)).unwrap();

        // The route: `git status` shows nothing, and a copy's next commit takes the agent's hook.
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "", "git takes the forged cache");
        let copy = tempfile::tempdir().unwrap();
        assert!(
            std::process::Command::new("cp")
                .args(["-a", &format!("{}/.", repo.display()), &copy.path().display().to_string()])
                .status()
                .unwrap()
                .success()
        );
        std::fs::write(copy.path().join("README"), "changed\n").unwrap();
        git(copy.path(), &["add", "README"], &[]);
        git(copy.path(), &["commit", "-qm", "mine"], &[]);
        assert!(git(copy.path(), &["show", "HEAD:githooks/pre-commit"], &[]).contains("pwned"));

        let Look::Forged(mut named) = look(&index, 20) else { panic!("{:?}", look(&index, 20)) };
        named.sort();
        assert_eq!(named, vec![b"".to_vec(), b"githooks".to_vec()]);
        drop_caches(&index, 20).unwrap();
        assert_eq!(look(&index, 20), Look::Agrees);
        std::fs::write(repo.join("README"), "changed\n").unwrap();
        git(&repo, &["add", "README"], &[]);
        git(&repo, &["commit", "-qm", "mine"], &[]);
        assert_eq!(git(&repo, &["show", "HEAD:githooks/pre-commit"], &[]), "#!/bin/sh\necho lint ok");
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "");
        assert_eq!(look(&index, 20), Look::Agrees, "git's own cache again");
        assert!(cached(&index) > 0, "git's own cache again");

        // The thirty-seventh re-attack's I13: the true cache first, the agent's after it (git keeps
        // the last it reads).
        let true_now = std::fs::read(&index).unwrap();
        let (_, extensions) = parse(&true_now, 20).unwrap();
        let end = extensions.iter().find(|extension| &extension.signature == b"TREE").unwrap().at.end;
        let mut twice = [&true_now[..end], &theirs[..], &true_now[end..true_now.len() - 20]].concat();
        let checksum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &twice);
        twice.extend_from_slice(checksum.as_ref());
        std::fs::write(&index, &twice).unwrap();
        assert!(matches!(look(&index, 20), Look::Forged(named) if named.contains(&b"githooks".to_vec())));
        // (Git's own status writes the index again with the one it kept.)
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "", "git takes the second");
        drop_caches(&index, 20).unwrap();
        assert_eq!(cached(&index), 0, "every cached tree dropped");
        git(&repo, &["write-tree"], &[]);

        // Only the count forged: git would skip the entries after the directory's.
        let mut index_bytes = std::fs::read(&index).unwrap();
        let (_, extensions) = parse(&index_bytes, 20).unwrap();
        let tree = extensions.iter().find(|extension| &extension.signature == b"TREE").unwrap().at.clone();
        let at =
            tree.start + index_bytes[tree.clone()].windows(10).position(|bytes| bytes == b"githooks\x001").unwrap();
        index_bytes[at + 9] = b'2';
        let body = index_bytes.len() - 20;
        let checksum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &index_bytes[..body]);
        index_bytes[body..].copy_from_slice(checksum.as_ref());
        std::fs::write(&index, &index_bytes).unwrap();
        assert_eq!(look(&index, 20), Look::Forged(vec![b"githooks".to_vec()]));
        drop_caches(&index, 20).unwrap();

        // What git writes agrees: a file added with `-N`, a checkout, a conflict, `read-tree`.
        std::fs::write(repo.join("src/lib/b.rs"), "fn b() {}\n").unwrap();
        git(&repo, &["add", "-N", "src/lib/b.rs"], &[]);
        git(&repo, &["write-tree"], &[]);
        assert_eq!(look(&index, 20), Look::Agrees, "intent to add");
        assert!(cached(&index) > 0, "intent to add");
        std::fs::write(repo.join("README"), "b\n").unwrap();
        git(&repo, &["add", "-A"], &[]);
        git(&repo, &["commit", "-qm", "b"], &[]);
        let branch = git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"], &[]);
        git(&repo, &["checkout", "-q", "-b", "side", "HEAD~1"], &[]);
        std::fs::write(repo.join("README"), "side\n").unwrap();
        git(&repo, &["commit", "-qam", "side"], &[]);
        // (It stops in a conflict on `README`.)
        let merge = std::process::Command::new("git").args(["merge", "-q", &branch]).current_dir(&repo).output();
        assert!(!merge.unwrap().status.success());
        assert_eq!(look(&index, 20), Look::Agrees, "a conflict");
        assert!(cached(&index) > 0, "a conflict");
        git(&repo, &["merge", "--abort"], &[]);
        git(&repo, &["read-tree", "HEAD"], &[]);
        assert_eq!(look(&index, 20), Look::Agrees, "read-tree");
        assert!(cached(&index) > 0, "read-tree");
    }

    /// The thirty-seventh re-attack's I3, I10 and I11: an index larger than is read here is not
    /// taken for one that agrees, and its caches are dropped by reading it in a stream; the other
    /// caches the agent could forge (the untracked cache, the entries' offsets) go with the trees,
    /// and the index keeps its time.
    #[test]
    fn every_cache_is_dropped_whatever_the_index_size() {
        let Some((_temp, repo)) = repository() else { return };
        let index = repo.join(".git/index");
        git(&repo, &["update-index", "--untracked-cache"], &[]);
        git(&repo, &["status", "--porcelain"], &[]);
        let offsets = ["-c", "index.recordEndOfIndexEntries=true", "-c", "index.recordOffsetTable=true"];
        git(&repo, &[&offsets[..], &["update-index", "--force-write-index"]].concat(), &[]);
        let signatures = || {
            let (_, extensions) = parse(&std::fs::read(&index).unwrap(), 20).unwrap();
            extensions
                .iter()
                .map(|extension| String::from_utf8_lossy(&extension.signature).into_owned())
                .collect::<Vec<_>>()
        };
        // (Git writes `IEOT` only for an index large enough to read in several threads.)
        for cache in ["TREE", "UNTR", "EOIE"] {
            assert!(signatures().iter().any(|found| found == cache), "{cache} in {:?}", signatures());
        }
        let before = std::fs::metadata(&index).unwrap().modified().unwrap();
        drop_caches(&index, 20).unwrap();
        assert_eq!(signatures(), Vec::<String>::new());
        assert_eq!(std::fs::metadata(&index).unwrap().modified().unwrap(), before);
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "");
        drop_caches(&index, 20).unwrap();

        // Past 256 MiB: an untracked cache of nothing filling it, the agent's trees after.
        let true_index = std::fs::read(&index).unwrap();
        git(&repo, &["write-tree"], &[]);
        let with_trees = std::fs::read(&index).unwrap();
        let (_, extensions) = parse(&with_trees, 20).unwrap();
        let start = extensions[0].at.start as u64;
        let filler = git::MAX_INDEX_BYTES;
        let huge = repo.join(".git/huge-index");
        {
            use std::io::{Seek as _, Write as _};
            let mut file = std::fs::File::create(&huge).unwrap();
            // The first 256 MiB end as a whole index would: its last 20 bytes (a second untracked
            // cache, of nothing) read as its checksum.
            let filler = filler - 20 - (start + 8);
            file.write_all(&true_index[..start as usize]).unwrap();
            file.write_all(b"UNTR").unwrap();
            file.write_all(&(filler as u32).to_be_bytes()).unwrap();
            file.seek(std::io::SeekFrom::Current(filler as i64)).unwrap();
            file.write_all(b"UNTR\0\0\0\x0c").unwrap();
            file.write_all(&[0u8; 12]).unwrap();
            file.write_all(&agents_cached_trees(&repo)).unwrap();
            file.write_all(&[1u8; 20]).unwrap();
        }
        assert!(std::fs::metadata(&huge).unwrap().len() > git::MAX_INDEX_BYTES);
        assert_eq!(look(&huge, 20), Look::Untold);
        drop_caches(&huge, 20).unwrap();
        let dropped = std::fs::read(&huge).unwrap();
        assert_eq!(&dropped[..start as usize], &true_index[..start as usize]);
        assert_eq!(dropped.len(), start as usize + 20, "nothing but the entries and a checksum");
        std::fs::rename(&huge, &index).unwrap();
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "", "git reads what is left");
    }

    /// A split index's nameless entries are named by their places in the shared index, read
    /// from the `link` extension's bitmaps (runs of words and literal words, as git writes them).
    #[test]
    fn a_split_indexs_nameless_entries_are_named_by_their_places() {
        let Some((_temp, repo)) = repository() else { return };
        for n in 0..200 {
            std::fs::write(repo.join(format!("f{n:03}")), format!("{n}\n")).unwrap();
        }
        // Older than the index by far: git refreshes no entry it would take for racily clean.
        let touched = std::process::Command::new("find")
            .args([
                ".",
                "-path",
                "./.git",
                "-prune",
                "-o",
                "-type",
                "f",
                "-exec",
                "touch",
                "-d",
                "1 hour ago",
                "{}",
                "+",
            ])
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(touched.success());
        git(&repo, &["add", "-A"], &[]);
        git(&repo, &["commit", "-qm", "many"], &[]);
        let split = ["-c", "splitIndex.maxPercentChange=100"];
        git(&repo, &[&split[..], &["update-index", "--split-index"]].concat(), &[]);
        assert_eq!(replaced_names(&repo.join(".git"), 20), Some(Vec::new()));
        for n in [10, 150, 199] {
            std::fs::write(repo.join(format!("f{n:03}")), "changed\n").unwrap();
        }
        git(&repo, &[&split[..], &["add", "f010", "f150", "f199"]].concat(), &[]);
        let names = replaced_names(&repo.join(".git"), 20).unwrap();
        assert_eq!(names, [&b"f010"[..], b"f150", b"f199"].map(<[u8]>::to_vec));
        assert_eq!(replaced_names(&repo, 20), None, "not a git directory");
    }

    /// A sparse index (directory entries standing for their trees) agrees; a split index cannot
    /// be told (its entries are partly in the shared index), and its cache is dropped cleanly:
    /// git reads the index and commits the entries.
    #[test]
    fn a_sparse_index_agrees_and_a_split_one_is_dropped_cleanly() {
        let Some((_temp, repo)) = repository() else { return };
        let index = repo.join(".git/index");
        git(&repo, &["sparse-checkout", "set", "--cone", "--sparse-index", "githooks"], &[]);
        git(&repo, &["write-tree"], &[]);
        let (entries, _) = parse(&std::fs::read(&index).unwrap(), 20).unwrap();
        assert!(entries.iter().any(|entry| entry.name == b"src/"), "a sparse directory entry");
        assert_eq!(look(&index, 20), Look::Agrees, "sparse");
        assert!(cached(&index) > 0, "sparse");
        git(&repo, &["sparse-checkout", "disable"], &[]);

        git(&repo, &["update-index", "--split-index"], &[]);
        std::fs::write(repo.join("README"), "split\n").unwrap();
        git(&repo, &["add", "README"], &[]);
        git(&repo, &["write-tree"], &[]);
        assert_eq!(look(&index, 20), Look::Untold);
        drop_caches(&index, 20).unwrap();
        git(&repo, &["commit", "-qm", "split"], &[]);
        assert_eq!(git(&repo, &["show", "HEAD:README"], &[]), "split");
        assert_eq!(git(&repo, &["status", "--porcelain"], &[]), "");

        // A SHA-256 repository's trees are named by its own hash.
        let sha256 = tempfile::tempdir().unwrap();
        git(sha256.path(), &["init", "-q", "--object-format=sha256"], &[]);
        std::fs::create_dir_all(sha256.path().join("a/b")).unwrap();
        std::fs::write(sha256.path().join("a/b/c"), "c\n").unwrap();
        git(sha256.path(), &["add", "-A"], &[]);
        git(sha256.path(), &["commit", "-qm", "c"], &[]);
        let index = sha256.path().join(".git/index");
        assert_eq!(git::hash_len(&sha256.path().join(".git")), 32);
        assert_eq!(look(&index, 32), Look::Agrees);
        assert_eq!(cached_of(&index, 32), 3);
    }
}
