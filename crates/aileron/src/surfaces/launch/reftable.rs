//! The replace refs of a repository that keeps its refs in a reftable stack (`git init
//! --ref-format=reftable`: `<common dir>/reftable/`, its tables named in order by
//! `tables.list`), read as git reads them, without running git (the fortieth re-attack's L2: a
//! `git replace` there was seen by no watch, since no file appears under `refs/replace`).
//!
//! Git's view of a stack is each name's record in the newest table that holds it, a deletion
//! taking the name out; a seek for `refs/replace/` goes through a table's index and its blocks'
//! restart points. So that the records read here are the records git would reach, a table is
//! read only when its blocks, restart points and index agree with a plain walk of its records
//! in order; anything else is said unreadable, never taken as "no replace refs".

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use super::git;

/// The names whose records the exit compares.
const REPLACE_REFS: &[u8] = b"refs/replace/";

/// Bytes of one stack's tables read at one look, at most, and how many tables: past either the
/// stack is said unreadable.
const MAX_STACK_BYTES: u64 = 64 * 1024 * 1024;
const MAX_TABLES: usize = 4096;

/// How deep an index may nest (git writes a level for every few hundred blocks).
const MAX_INDEX_DEPTH: usize = 8;

/// The replace refs git shows from the reftable stack in `dir`, each as its name, a space and
/// its value (the object it names; a symbolic one, where it points): empty when there is no
/// stack. `Err` says why the stack could not be read as git reads it.
pub fn replace_refs(dir: &Path) -> Result<HashSet<Vec<u8>>, String> {
    let refs = refs(dir, |name| name.starts_with(REPLACE_REFS))?;
    Ok(refs.into_iter().map(|(name, value)| [name, b" ".to_vec(), value].concat()).collect())
}

/// The value of the ref `name` in the stack in `dir` as git reads it (`None`: none there),
/// spelled as [`replace_refs`] spells values (a symbolic ref's as `ref: <target>`).
pub fn value_of(dir: &Path, name: &[u8]) -> Result<Option<Vec<u8>>, String> {
    Ok(refs(dir, |key| key == name)?.remove(name))
}

/// The live refs of the stack in `dir` whose names are `wanted`, each with its value.
fn refs(dir: &Path, wanted: impl Fn(&[u8]) -> bool) -> Result<HashMap<Vec<u8>, Vec<u8>>, String> {
    let list = match git::read_capped(&dir.join("tables.list"), true, MAX_STACK_BYTES + 1) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(error) => return Err(format!("tables.list: {error}")),
        // Git reads all of it (64 MiB of blank lines before the names hid them from a read cut
        // there: the forty-sixth re-attack's S1).
        Ok(list) if list.len() as u64 > MAX_STACK_BYTES => {
            return Err(format!("tables.list is larger than {} MiB", MAX_STACK_BYTES >> 20));
        }
        Ok(list) => list,
    };
    let names: Vec<&[u8]> = list.split(|&byte| byte == b'\n').filter(|name| !name.is_empty()).collect();
    if names.len() > MAX_TABLES {
        return Err(format!("tables.list names more than {MAX_TABLES} tables"));
    }
    let mut budget = MAX_STACK_BYTES;
    // Oldest first: a newer table's record of a name stands in for an older one's.
    let mut refs: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
    for name in names {
        let shown = String::from_utf8_lossy(name);
        if name.contains(&b'/') || name == b"." || name == b".." {
            return Err(format!("tables.list names {shown:?}, not a table in the directory"));
        }
        let bytes = git::read_capped(&dir.join(OsStr::from_bytes(name)), true, budget + 1)
            .map_err(|error| format!("{shown}: {error}"))?;
        budget = budget
            .checked_sub(bytes.len() as u64)
            .ok_or_else(|| format!("the tables hold more than {} MiB", MAX_STACK_BYTES >> 20))?;
        let table = Table::parse(&bytes).map_err(|error| format!("{shown}: {error}"))?;
        for (key, value) in table.refs().map_err(|error| format!("{shown}: {error}"))? {
            if wanted(&key) {
                refs.insert(key, value);
            }
        }
    }
    Ok(refs.into_iter().filter_map(|(name, value)| Some((name, value?))).collect())
}

/// One table's bytes and what its header and footer say of them.
struct Table<'a> {
    bytes: &'a [u8],
    header_len: usize,
    /// Where its blocks end (its footer starts).
    end: usize,
    /// The size its blocks are padded to (0: not padded).
    block_size: usize,
    hash_len: usize,
    /// Where its refs' index starts (0: none).
    ref_index: u64,
}

/// A table's ref records in order: each name and its value (`None`: deleted).
type Refs = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// A record's value: a ref's (`None`: deleted) or an index record's block position.
enum Value {
    Ref(Option<Vec<u8>>),
    Position(u64),
}

/// A block read: where it starts and its records in order.
struct Block {
    start: usize,
    records: Vec<(Vec<u8>, Value)>,
}

impl<'a> Table<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Table<'a>, String> {
        if bytes.get(..4) != Some(b"REFT") {
            return Err("not a reftable (no REFT header)".into());
        }
        let (header_len, footer_len, hash_len) = match bytes.get(4) {
            Some(1) => (24, 68, 20),
            Some(2) => match bytes.get(24..28) {
                Some(b"sha1") => (28, 72, 20),
                Some(b"s256") => (28, 72, 32),
                _ => return Err("an unknown hash in its header".into()),
            },
            _ => return Err("a format version git does not write".into()),
        };
        let end = bytes.len().checked_sub(footer_len).filter(|&end| end >= header_len).ok_or("cut short")?;
        let footer = &bytes[end..];
        // Git refuses a table whose footer does not repeat its header.
        if footer[..header_len] != bytes[..header_len] {
            return Err("its footer does not repeat its header".into());
        }
        Ok(Table {
            bytes,
            header_len,
            end,
            block_size: be(&bytes[5..8]) as usize,
            hash_len,
            ref_index: be(&footer[header_len..header_len + 8]),
        })
    }

    /// Every ref record in the table, in order, after checking that git's seeks reach no other.
    /// The blocks are walked as git steps from one to the next, up to its logs (compressed, and
    /// always written last): the ref blocks must all come first, and every index block met must
    /// name only blocks the walk met. Git's search of an index reads on into the index blocks
    /// after the one the footer names, and through an upper level's record to any block: a ref
    /// block put after the index and named from a second index block (the forty-sixth
    /// re-attack's S2, S3) was read by git and by no walk of the ref blocks.
    fn refs(&self) -> Result<Refs, String> {
        let (mut blocks, mut indexes, mut others) = (Vec::new(), Vec::new(), HashSet::new());
        // The index blocks of the refs' section (those after the objects' are theirs).
        let mut ref_indexes = HashSet::new();
        // The first block shares its bytes with the header; a table of logs alone has none.
        let mut start = 0;
        while start.max(self.header_len) < self.end {
            let header = if start == 0 { self.header_len } else { 0 };
            let kind = self.bytes.get(start + header..start + header + 4).ok_or("a block cut short")?[0];
            match kind {
                b'r' if indexes.is_empty() && others.is_empty() => blocks.extend(self.block(start, b'r')?),
                b'r' => return Err(format!("a ref block at {start}, after its index")),
                b'i' => {
                    if others.is_empty() {
                        ref_indexes.insert(start);
                    }
                    indexes.extend(self.block(start, b'i')?);
                }
                b'o' => {
                    others.insert(start);
                }
                b'g' => break,
                _ => return Err(format!("a block of an unknown type at {start}")),
            }
            start = self.next_block(start)?;
        }
        let met: HashSet<usize> =
            blocks.iter().chain(&indexes).map(|block| block.start).chain(others.iter().copied()).collect();
        for index in &indexes {
            for (_, value) in &index.records {
                let Value::Position(position) = value else { continue };
                if !usize::try_from(*position).is_ok_and(|position| met.contains(&position)) {
                    return Err(format!("an index block at {} names a block the walk did not meet", index.start));
                }
            }
        }
        if self.ref_index != 0 && !indexes.iter().any(|index| index.start as u64 == self.ref_index) {
            return Err("its index is not among its blocks".into());
        }
        let keys: Vec<&Vec<u8>> = blocks.iter().flat_map(|block| block.records.iter().map(|(key, _)| key)).collect();
        if keys.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err("its refs are not in order".into());
        }
        if self.ref_index != 0 {
            self.check_index(&blocks, &ref_indexes)?;
        }
        let records = blocks.into_iter().flat_map(|block| block.records);
        Ok(records
            .filter_map(|(key, value)| match value {
                Value::Ref(value) => Some((key, value)),
                Value::Position(_) => None,
            })
            .collect())
    }

    /// The index (every level of it) names each ref block, in order, by its last key, as git
    /// writes it: then git's seek through it lands where a walk does. Each record of an upper
    /// level names its child by the child's last key, the keys of each block rise, every index
    /// block of the refs' section is in the tree, and none follows its top (which git's search
    /// would read on into). An upper key naming a lower block by another key sent git's seek past
    /// a deletion the walk read (the forty-seventh re-attack's D1), and a second top block after
    /// the footer's took it elsewhere (D1b).
    fn check_index(&self, blocks: &[Block], ref_indexes: &HashSet<usize>) -> Result<(), String> {
        let top = usize::try_from(self.ref_index).map_err(|_| "its index is past its end")?;
        let (mut leaves, mut tree) = (Vec::new(), HashSet::new());
        self.index_tree(top, 0, &mut tree, &mut leaves)?;
        let named: Vec<(usize, &Vec<u8>)> =
            blocks.iter().filter_map(|block| Some((block.start, &block.records.last()?.0))).collect();
        let indexed: Vec<(usize, &Vec<u8>)> = leaves.iter().map(|(position, key)| (*position, key)).collect();
        if named != indexed {
            return Err("its index does not name its ref blocks as they are".into());
        }
        if !ref_indexes.is_subset(&tree) {
            return Err("an index block outside its index".into());
        }
        let after = self.next_block(top)?;
        if after.max(self.header_len) < self.end && self.bytes.get(after) == Some(&b'i') {
            return Err("an index block right after its index's top".into());
        }
        Ok(())
    }

    /// The index block at `start` and those below it: its leaves' records (a ref block's position
    /// and key) in order, the blocks met put in `tree`; its last key.
    fn index_tree(
        &self,
        start: usize,
        depth: usize,
        tree: &mut HashSet<usize>,
        leaves: &mut Vec<(usize, Vec<u8>)>,
    ) -> Result<Vec<u8>, String> {
        if depth > MAX_INDEX_DEPTH || start >= self.end || !tree.insert(start) {
            return Err("its index is past its end, nested too deep or names a block twice".into());
        }
        let block = self.block(start, b'i')?.ok_or("its index points at no index block")?;
        if block.records.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            return Err(format!("an index block at {start} whose keys do not rise"));
        }
        for (key, value) in &block.records {
            let Value::Position(position) = value else { continue };
            let position = usize::try_from(*position).map_err(|_| "its index is past its end")?;
            match self.bytes.get(position + if position == 0 { self.header_len } else { 0 }) {
                Some(b'i') => {
                    if self.index_tree(position, depth + 1, tree, leaves)? != *key {
                        return Err(format!("an index block at {start} names a lower one by another key"));
                    }
                }
                _ => leaves.push((position, key.clone())),
            }
        }
        block.records.last().map(|(key, _)| key.clone()).ok_or_else(|| format!("an empty index block at {start}"))
    }

    /// Where git reads the block after the one at `start`: the next multiple of the block size
    /// when the block is padded, right after it when not.
    fn next_block(&self, start: usize) -> Result<usize, String> {
        let header = if start == 0 { self.header_len } else { 0 };
        let len = be(&self.bytes[start + header + 1..start + header + 4]) as usize;
        if self.block_size == 0 {
            return Ok(start + len);
        }
        // Git reads a block's size in bytes, or more when the block says it is larger, then looks
        // at the byte after the block's data.
        let left = self.bytes.len() - start;
        let read = if len > self.block_size.min(left) { len.min(left) } else { self.block_size.min(left) };
        if len < self.block_size && len < read && self.bytes[start + len] != 0 {
            return Ok(start + len);
        }
        Ok(start + self.block_size)
    }

    /// The block at `start` when it is of type `want` (`None` when of another type git writes,
    /// which ends a section), its records read in order and its restart points checked to be
    /// among them.
    fn block(&self, start: usize, want: u8) -> Result<Option<Block>, String> {
        let header = if start == 0 { self.header_len } else { 0 };
        let kind = *self.bytes.get(start + header).ok_or("a block past its end")?;
        if !matches!(kind, b'r' | b'i' | b'o' | b'g') {
            return Err(format!("a block of an unknown type at {start}"));
        }
        if kind != want {
            return Ok(None);
        }
        let len = self.bytes.get(start + header + 1..start + header + 4).map(be).ok_or("cut short")? as usize;
        let data = self
            .bytes
            .get(start..start + len)
            .filter(|_| start + len <= self.end && len >= header + 6)
            .ok_or_else(|| format!("a block at {start} runs past the table's end"))?;
        let restarts = be(&data[len - 2..]) as usize;
        let records_end = (len - 2)
            .checked_sub(3 * restarts)
            .filter(|&end| end >= header + 4)
            .ok_or_else(|| format!("a block at {start} has more restart points than room"))?;
        let restart_points: Vec<usize> = (0..restarts)
            .map(|index| be(&data[records_end + 3 * index..records_end + 3 * index + 3]) as usize)
            .collect();
        // Git writes the first record as a restart point, and its search takes them in order:
        // with none, it reads an offset from the bytes after the block and starts there (the
        // forty-eighth re-attack's R1 hid a record that way).
        if restart_points.first() != Some(&(header + 4)) || restart_points.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(format!("a block at {start} whose restart points are not its records in order"));
        }
        let mut records = Vec::new();
        let (mut at, mut key) = (header + 4, Vec::new());
        let mut starts = HashSet::new();
        while at < records_end {
            starts.insert(at);
            let mut input = &data[at..records_end];
            let prefix = varint(&mut input)? as usize;
            let suffix_and_kind = varint(&mut input)?;
            let suffix = usize::try_from(suffix_and_kind >> 3).map_err(|_| "a key too long")?;
            if prefix > key.len() || suffix > input.len() || (restart_points.contains(&at) && prefix != 0) {
                return Err(format!("a record at {} whose key does not follow", start + at));
            }
            key.truncate(prefix);
            key.extend_from_slice(&input[..suffix]);
            input = &input[suffix..];
            if key.is_empty() {
                return Err(format!("a record at {} with no key", start + at));
            }
            let value = match want {
                b'r' => Value::Ref(self.ref_value(&mut input, (suffix_and_kind & 7) as u8)?),
                _ => Value::Position(varint(&mut input)?),
            };
            records.push((key.clone(), value));
            at = records_end - input.len();
        }
        if restart_points.iter().any(|point| !starts.contains(point)) {
            return Err(format!("a block at {start} whose restart points are not its records"));
        }
        Ok(Some(Block { start, records }))
    }

    /// A ref record's value after its key: its update index, then nothing (a deletion), one or
    /// two object names, or a symbolic ref's target.
    fn ref_value(&self, input: &mut &[u8], kind: u8) -> Result<Option<Vec<u8>>, String> {
        varint(input)?;
        let take = |input: &mut &[u8], len: usize| -> Result<Vec<u8>, String> {
            let taken = input.get(..len).ok_or("a value cut short")?.to_vec();
            *input = &input[len..];
            Ok(taken)
        };
        match kind {
            0 => Ok(None),
            1 => Ok(Some(take(input, self.hash_len)?)),
            2 => {
                let value = take(input, self.hash_len)?;
                take(input, self.hash_len)?;
                Ok(Some(value))
            }
            3 => {
                let len = usize::try_from(varint(input)?).map_err(|_| "a target too long")?;
                Ok(Some([b"ref: ".to_vec(), take(input, len)?].concat()))
            }
            _ => Err(format!("a ref value of unknown type {kind}")),
        }
    }
}

/// A big-endian number of up to eight bytes.
fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |number, &byte| number << 8 | u64::from(byte))
}

/// Reftable's variable-length number: seven bits a byte, most significant first, each
/// continuation adding one before the shift (so each number has one spelling).
fn varint(input: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for (index, &byte) in input.iter().enumerate() {
        value = if index == 0 {
            u64::from(byte & 0x7f)
        } else {
            value.checked_add(1).and_then(|value| value.checked_mul(128)).ok_or("a number too large")?
                | u64::from(byte & 0x7f)
        };
        if byte & 0x80 == 0 {
            *input = &input[index + 1..];
            return Ok(value);
        }
    }
    Err("a number cut short".into())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::surfaces::launch::cache_tree::tests::git_output;

    /// `git` in `repo` as an author of no config; its output, or `None` when it failed.
    fn git(repo: &Path, args: &[&str]) -> Option<String> {
        let args = [&["-c", "user.name=U", "-c", "user.email=u@x"][..], args].concat();
        let output = git_output(repo, &args, &[]).ok().filter(|output| output.status.success())?;
        Some(String::from_utf8(output.stdout).unwrap())
    }

    /// A reftable repository with two commits, or `None` where git cannot make one.
    fn repository() -> Option<(tempfile::TempDir, PathBuf)> {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path().to_path_buf();
        git(&repo, &["init", "-q", "--ref-format=reftable"])?;
        for message in ["a", "b"] {
            git(&repo, &["commit", "-q", "--allow-empty", "-m", message]).unwrap();
        }
        Some((temp, repo))
    }

    /// The replace refs as `git for-each-ref` lists them, spelled as [`replace_refs`] gives them.
    fn as_git_shows(repo: &Path) -> HashSet<Vec<u8>> {
        let listed = git(repo, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/replace/"]).unwrap();
        listed
            .lines()
            .map(|line| {
                let (name, object) = line.split_once(' ').unwrap();
                let object: Vec<u8> = (0..object.len())
                    .step_by(2)
                    .map(|at| u8::from_str_radix(&object[at..at + 2], 16).unwrap())
                    .collect();
                [name.as_bytes(), b" ", &object].concat()
            })
            .collect()
    }

    /// 3,000 tags on `object` in `repo`, then its stack compacted into one table (many blocks,
    /// with an index).
    fn with_many_refs(repo: &Path, object: &str) {
        let many: String = (0..3000).map(|n| format!("create refs/tags/t{n:05} {object}\n")).collect();
        let mut update = std::process::Command::new("git")
            .args(["update-ref", "--stdin"])
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut update.stdin.take().unwrap(), many.as_bytes()).unwrap();
        assert!(update.wait().unwrap().success());
        git(repo, &["pack-refs", "--all"]).unwrap();
    }

    fn tables(repo: &Path) -> Vec<PathBuf> {
        let list = std::fs::read_to_string(repo.join(".git/reftable/tables.list")).unwrap();
        list.lines().map(|name| repo.join(".git/reftable").join(name)).collect()
    }

    /// What git shows is what is read: a replace ref added, one deleted in a newer table, and a
    /// table of thousands of refs in many blocks with an index, compacted or not.
    #[test]
    fn the_replace_refs_read_are_those_git_shows() {
        let Some((_temp, repo)) = repository() else { return };
        let stack = repo.join(".git/reftable");
        assert_eq!(replace_refs(&stack).unwrap(), HashSet::new());
        let (head, parent) =
            (git(&repo, &["rev-parse", "HEAD"]).unwrap(), git(&repo, &["rev-parse", "HEAD~1"]).unwrap());
        git(&repo, &["replace", head.trim(), parent.trim()]).unwrap();
        git(&repo, &["replace", parent.trim(), head.trim()]).unwrap();
        assert_eq!(replace_refs(&stack).unwrap().len(), 2);
        assert_eq!(replace_refs(&stack).unwrap(), as_git_shows(&repo));
        git(&repo, &["replace", "-d", parent.trim()]).unwrap();
        assert_eq!(replace_refs(&stack).unwrap().len(), 1);
        assert_eq!(replace_refs(&stack).unwrap(), as_git_shows(&repo));

        // Thousands of refs, then all compacted into one table.
        with_many_refs(&repo, head.trim());
        assert_eq!(tables(&repo).len(), 1, "compacted");
        let bytes = std::fs::read(&tables(&repo)[0]).unwrap();
        let table = Table::parse(&bytes).unwrap();
        assert_ne!(table.ref_index, 0, "a table this large has an index");
        assert!(table.refs().unwrap().len() > 3000);
        assert_eq!(replace_refs(&stack).unwrap(), as_git_shows(&repo));
    }

    /// Reftable's number, as git writes it.
    fn number(mut value: u64) -> Vec<u8> {
        let mut bytes = vec![(value & 0x7f) as u8];
        value >>= 7;
        while value != 0 {
            value -= 1;
            bytes.push(0x80 | (value & 0x7f) as u8);
            value >>= 7;
        }
        bytes.reverse();
        bytes
    }

    /// A record: no prefix, its key, its value's type and its value.
    fn record(key: &[u8], kind: u64, value: &[u8]) -> Vec<u8> {
        [number(0), number((key.len() as u64) << 3 | kind), key.to_vec(), value.to_vec()].concat()
    }

    /// A block of `kind` holding `records`, each a restart point, after `header` (the table's, for
    /// the first block).
    fn block_of(kind: u8, records: &[Vec<u8>], header: &[u8]) -> Vec<u8> {
        let mut at = header.len() + 4;
        let restarts: Vec<usize> = records
            .iter()
            .map(|record| {
                at += record.len();
                at - record.len()
            })
            .collect();
        block_with_restarts(kind, records, header, &restarts)
    }

    /// A block of `kind` holding `records` whose restart points are `restarts` (offsets in the
    /// block), after `header`.
    fn block_with_restarts(kind: u8, records: &[Vec<u8>], header: &[u8], restarts: &[usize]) -> Vec<u8> {
        let body = records.concat();
        let points: Vec<u8> = restarts.iter().flat_map(|at| (*at as u32).to_be_bytes()[1..].to_vec()).collect();
        let len = header.len() + 4 + body.len() + points.len() + 2;
        let count = (restarts.len() as u16).to_be_bytes();
        [header, &[kind], &(len as u32).to_be_bytes()[1..], &body, &points, &count].concat()
    }

    /// The forty-seventh re-attack's D1 and D1b: a newer table's deletion of a replace ref that
    /// git's search through the index never reaches (so git still shows the ref), read by a walk.
    /// D1: the upper level names a lower index block by another key than its last; D1b: a second
    /// top block after the footer's, whose first key sends git's search into it. Both said
    /// unreadable; the same table with its index as git writes it reads the deletion.
    #[test]
    fn a_deletion_git_would_not_reach_is_not_taken_for_one() {
        let header = [&b"REFT\x01\x00\x10\x00"[..], &4u64.to_be_bytes(), &4u64.to_be_bytes()].concat();
        let replaced = format!("refs/replace/{}", "b".repeat(40));
        let (k1, k2, k3) = (&b"refs/heads/zz-none"[..], replaced.as_bytes(), &b"refs/zzz-none"[..]);
        let deletion = |key: &[u8], header: &[u8]| block_of(b'r', &[record(key, 0, &number(0))], header);
        let index = |records: &[(&[u8], usize)]| {
            let records: Vec<Vec<u8>> = records.iter().map(|(key, at)| record(key, 0, &number(*at as u64))).collect();
            block_of(b'i', &records, &[])
        };
        let footer = |index_at: usize| [&header[..], &(index_at as u64).to_be_bytes(), &[0; 32], &[0; 4]].concat();
        // Over an older table where the replace ref is live.
        let live = block_of(b'r', &[record(k2, 1, &[number(0), vec![7; 20]].concat())], &header);
        let older = [&live[..], &footer(0)].concat();
        let read = |table: &[u8]| {
            let temp = tempfile::tempdir().unwrap();
            std::fs::write(temp.path().join("tables.list"), "old.ref\nt.ref\n").unwrap();
            std::fs::write(temp.path().join("old.ref"), &older).unwrap();
            std::fs::write(temp.path().join("t.ref"), table).unwrap();
            replace_refs(temp.path())
        };
        let (r1, r2, r3) = (deletion(k1, &header), deletion(k2, &[]), deletion(k3, &[]));
        let (p2, p3) = (r1.len(), r1.len() + r2.len());
        let la_at = p3 + r3.len();
        let la = index(&[(k1, 0), (k2, p2)]);
        let lb_at = la_at + la.len();
        let lb = index(&[(k3, p3)]);
        let top_at = lb_at + lb.len();
        let two_levels = |top_key: &[u8]| {
            [&r1[..], &r2, &r3, &la, &lb, &index(&[(top_key, la_at), (k3, lb_at)]), &footer(top_at)].concat()
        };
        assert_eq!(read(&[&r1[..], &footer(0)].concat()).map(|refs| refs.len()), Ok(1), "live in the older");
        assert_eq!(read(&two_levels(k2)), Ok(HashSet::new()), "as git writes it: the deletion read");
        let forged = read(&two_levels(k1));
        assert!(forged.as_ref().is_err_and(|why| why.contains("another key")), "D1: {forged:?}");

        let i1_at = p3;
        let i1 = index(&[(k1, 0), (k2, p2)]);
        let i2 = index(&[(k1, 0)]);
        let d1b = [&r1[..], &r2, &i1, &i2, &footer(i1_at)].concat();
        let forged = read(&d1b);
        assert!(forged.as_ref().is_err_and(|why| why.contains("outside its index")), "D1b: {forged:?}");
    }

    /// The forty-eighth re-attack's R1: a ref block with no restart points. Git's search then
    /// reads a restart offset from the bytes after the block and starts there, past a deletion a
    /// walk reads; so do restart points out of order. Both said unreadable.
    #[test]
    fn a_block_whose_restart_points_git_would_misread_is_unreadable() {
        let header = [&b"REFT\x01\x00\x10\x00"[..], &4u64.to_be_bytes(), &4u64.to_be_bytes()].concat();
        let records = [record(b"refs/heads/a", 0, &number(0)), record(b"refs/replace/b", 0, &number(0))];
        let with_restarts = |restarts: &[usize]| {
            let block = block_with_restarts(b'r', &records, &header, restarts);
            [block, header.clone(), 0u64.to_be_bytes().to_vec(), vec![0; 36]].concat()
        };
        let read = |table: &[u8]| {
            let temp = tempfile::tempdir().unwrap();
            std::fs::write(temp.path().join("tables.list"), "t.ref\n").unwrap();
            std::fs::write(temp.path().join("t.ref"), table).unwrap();
            replace_refs(temp.path())
        };
        let (first, second) = (header.len() + 4, header.len() + 4 + records[0].len());
        assert_eq!(read(&with_restarts(&[first, second])), Ok(HashSet::new()), "as git writes it");
        assert_eq!(read(&with_restarts(&[first])), Ok(HashSet::new()), "one restart point is enough");
        for forged in [&[][..], &[second, first], &[second]] {
            let read = read(&with_restarts(forged));
            assert!(read.as_ref().is_err_and(|why| why.contains("restart points")), "{forged:?}: {read:?}");
        }
    }

    /// The forty-sixth re-attack's S2: a second index block after the one the footer names,
    /// naming a ref block put after the index. Git's search for `refs/replace/` reads on into it
    /// and reaches the ref; a walk of the ref blocks does not. Said unreadable.
    #[test]
    fn a_ref_block_put_after_the_index_is_not_taken_for_none() {
        let header = [&b"REFT\x01\x00\x10\x00"[..], &4u64.to_be_bytes(), &4u64.to_be_bytes()].concat();
        let padding_key = b"refs/heads/zz-none";
        let first = block_of(b'r', &[record(padding_key, 0, &number(0))], &header);
        let index = block_of(b'i', &[record(padding_key, 0, &number(0))], &[]);
        let second_at = first.len() + index.len();
        let second = |at: u64| block_of(b'i', &[record(b"refs/replace/", 0, &number(at))], &[]);
        let hidden_at = (second_at + second(0).len()) as u64;
        assert_eq!(second(hidden_at).len(), second(0).len());
        let name = format!("refs/replace/{}", "b".repeat(40));
        let hidden = block_of(b'r', &[record(name.as_bytes(), 1, &[number(0), vec![7; 20]].concat())], &[]);
        let footer = [&header[..], &(first.len() as u64).to_be_bytes(), &[0; 32], &[0; 4]].concat();
        let table = [first, index, second(hidden_at), hidden, footer].concat();
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(temp.path().join("tables.list"), "t.ref\n").unwrap();
        std::fs::write(temp.path().join("t.ref"), &table).unwrap();
        let read = replace_refs(temp.path());
        assert!(read.as_ref().is_err_and(|why| why.contains("after its index")), "{read:?}");
    }

    /// A table whose seeks git would take elsewhere than a walk of its records (a restart point
    /// moved, an index naming another block, records out of order), or that is cut short, is
    /// said unreadable: never read as holding no replace refs.
    #[test]
    fn a_table_git_would_read_otherwise_is_unreadable() {
        let Some((_temp, repo)) = repository() else { return };
        let stack = repo.join(".git/reftable");
        let head = git(&repo, &["rev-parse", "HEAD"]).unwrap();
        with_many_refs(&repo, head.trim());
        let path = tables(&repo)[0].clone();
        let bytes = std::fs::read(&path).unwrap();
        let table = Table::parse(&bytes).unwrap();
        assert!(replace_refs(&stack).is_ok());
        let tampered = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut forged = bytes.clone();
            change(&mut forged);
            std::fs::write(&path, &forged).unwrap();
            let read = replace_refs(&stack);
            std::fs::write(&path, &bytes).unwrap();
            read
        };
        // The first block's last restart point moved one byte on.
        let first_len = be(&bytes[25..28]) as usize;
        let restarts = be(&bytes[first_len - 2..first_len]) as usize;
        let last = first_len - 2 - 3;
        assert!(restarts > 1);
        let err = tampered(&|forged| {
            let moved = be(&forged[last..last + 3]) + 1;
            forged[last..last + 3].copy_from_slice(&moved.to_be_bytes()[5..]);
        })
        .unwrap_err();
        assert!(err.contains("restart points"), "{err}");
        // The index's first record pointed at the second block.
        let index = usize::try_from(table.ref_index).unwrap();
        assert_eq!(bytes[index], b'i');
        let err = tampered(&|forged| {
            // Its first record: prefix 0, its key's length and type, the key, then the position 0.
            let mut at = &forged[index + 4..];
            varint(&mut at).unwrap();
            let suffix = usize::try_from(varint(&mut at).unwrap() >> 3).unwrap();
            let position = forged.len() - at.len() + suffix;
            assert_eq!(forged[position], 0, "the first block is at 0");
            forged[position] = 0x7f;
        })
        .unwrap_err();
        assert!(err.contains("index") || err.contains("block"), "{err}");
        // Two keys swapped in order: the first record's first byte of key past the prefix.
        let err = tampered(&|forged| forged[24 + 4 + 2] = b'z').unwrap_err();
        assert!(err.contains("order"), "{err}");
        let err = tampered(&|forged| forged.truncate(forged.len() - 1)).unwrap_err();
        assert!(err.contains("header") || err.contains("short"), "{err}");
        // A `tables.list` larger than the read (the forty-sixth re-attack's S1: 64 MiB of blank
        // lines before the names).
        let list = std::fs::read(stack.join("tables.list")).unwrap();
        let mut padded = vec![b'\n'; (MAX_STACK_BYTES + 1) as usize];
        padded.extend_from_slice(&list);
        std::fs::write(stack.join("tables.list"), &padded).unwrap();
        assert!(replace_refs(&stack).unwrap_err().contains("larger than"));
        std::fs::write(stack.join("tables.list"), &list).unwrap();
        // A table named outside the stack's directory.
        std::fs::write(stack.join("tables.list"), b"../packed-refs\n").unwrap();
        assert!(replace_refs(&stack).unwrap_err().contains("not a table"));
        std::fs::write(stack.join("tables.list"), list).unwrap();
        assert!(replace_refs(&stack).is_ok());
    }
}
