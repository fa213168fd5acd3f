//! A pack of git's objects held against the names its index gives them, without running git.
//!
//! Git looks an object up in the packs before the loose objects and never checks a packed
//! entry against its name on reading: a one-object pack with a hand-made `.idx` naming the blob
//! the agent committed made `git log -p` and `git show` show a harmless diff of a file whose
//! checked-out version ran the agent's code (the fifty-second re-attack's F2; the thirty-ninth's
//! K1, a rewritten loose object, through a pack). What `git index-pack --verify` does is done
//! here for the packs written in the session: every entry the index names is inflated, its
//! deltas applied, and its name computed.

use std::collections::HashMap;
use std::io::Read as _;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use super::git;

/// A pack against its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    /// Every name the index gives is the name of what the pack holds there.
    True,
    /// A name the index gives is not what the pack holds there, or the pack is not one git
    /// writes (an entry that does not parse, a delta on a base outside the pack, an offset past
    /// its end): git would take what it finds for what the name says.
    Forged,
    /// Past what is read here ([`MAX_INDEX_ENTRIES`], [`MAX_INFLATED_BYTES`]).
    TooLarge,
}

/// The most entries of one index held against the pack (each a positioned read of its name and
/// offset, and its object made and hashed); past it, the pack is too large to check here. The
/// index is read where each entry is, whatever its length: a sparse index of 8,000,000 entries,
/// 288 MB long and 16 KiB on disk, was left unchecked for its length alone (the sixtieth
/// re-attack's R1), and so was a pack of one forged entry and a hole (the fifty-seventh's R2).
const MAX_INDEX_ENTRIES: u64 = 1 << 22;
/// The most a pack's entries are inflated to, their deltas make and their names are computed
/// over, in all (a zlib stream of a few KiB can inflate to many GiB; a delta of 12 bytes can copy
/// 16 MiB of its base: 400 of them made the exit ask for 6.4 GiB and die, the fifty-seventh
/// re-attack's R5; and one large object named a million times was hashed a million times, the
/// sixtieth's R2).
const MAX_INFLATED_BYTES: usize = 1 << 30;
/// The most the bodies kept to be the bases of later deltas weigh (git's own
/// `core.deltaBaseCacheLimit` is 96 MiB); past it, a base is made again when needed, within
/// [`MAX_INFLATED_BYTES`].
const MAX_CACHED_BYTES: usize = 96 << 20;
/// The longest chain of deltas followed (git's own `pack.depth` is at most 4095).
const MAX_DELTA_CHAIN: usize = 4096;
/// Entries of an index read at once.
const ENTRIES_AT_ONCE: u64 = 4096;
/// What looking at one entry of a pack costs, in bytes of the budget, beside what it reads and
/// makes.
const ENTRY_COST: usize = 64;

/// The pack `pack_file` against its index `idx` (`pack-<sum>.pack` beside `pack-<sum>.idx`), for
/// object names of `hash_len` bytes, the work it does added to `spent` and held, with it, within
/// [`MAX_INFLATED_BYTES`]: one budget for every pack of an exit's look (2,000 hard links to one pack that inflates past
/// 1 GiB held the exit for hours, each checked on a budget of its own: the sixty-first
/// re-attack's R4).
pub fn check_within(idx: &Path, pack_file: &Path, hash_len: usize, spent: &mut usize) -> Checked {
    let (Some(index), Ok(pack)) = (Index::open(idx, hash_len), git::open_file(pack_file, true)) else {
        return Checked::Forged;
    };
    let len = match pack.metadata() {
        Ok(metadata) if metadata.is_file() => metadata.len(),
        _ => return Checked::Forged,
    };
    let mut magic = [0; 4];
    if len < 12 || pack.read_exact_at(&mut magic, 0).is_err() || &magic != b"PACK" {
        return Checked::Forged;
    }
    let mut reader =
        Reader { pack: &pack, len, hash_len, index: &index, objects: HashMap::new(), produced: *spent, cached: 0 };
    let checked = reader.held_against_the_index();
    *spent = reader.produced;
    checked
}

impl Reader<'_> {
    /// Each entry of the index held against what the pack holds there.
    fn held_against_the_index(&mut self) -> Checked {
        let (index, hash_len) = (self.index, self.hash_len);
        if self.produced > MAX_INFLATED_BYTES {
            return Checked::TooLarge;
        }
        // Git writes one entry an object and names each once: a second name at an offset already
        // held is not a pack git writes (and would have the same body hashed again for each).
        let mut held = std::collections::HashSet::new();
        let mut first = 0;
        while first < index.count {
            if first >= MAX_INDEX_ENTRIES {
                return Checked::TooLarge;
            }
            let Some(entries) = index.entries(first, ENTRIES_AT_ONCE.min(index.count - first)) else {
                return Checked::Forged;
            };
            first += entries.len() as u64;
            for (name, offset) in entries {
                if !held.insert(offset) {
                    return Checked::Forged;
                }
                match self.object(offset) {
                    Ok((kind, body)) => {
                        if self.spend(body.len()).is_err() {
                            return Checked::TooLarge;
                        }
                        if git::object_name(kind.name(), &body, hash_len) != name {
                            return Checked::Forged;
                        }
                    }
                    Err(Unread::Broken) => return Checked::Forged,
                    Err(Unread::TooLarge) => return Checked::TooLarge,
                }
            }
        }
        Checked::True
    }
}

/// A pack's index as git reads a version 2 one (`\377tOc`, 2: the fan-out, the names, their
/// checksums, their offsets, the large offsets) and a version 1 one (the fan-out, then each
/// offset beside its name), read where an entry is as it is asked for.
struct Index {
    file: std::fs::File,
    v2: bool,
    hash_len: usize,
    fanout: [u32; 256],
    /// The entries it holds (the fan-out's last count).
    count: u64,
}

impl Index {
    /// `None` when it is neither version, or no regular file.
    fn open(path: &Path, hash_len: usize) -> Option<Index> {
        let file = git::open_file(path, true).ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut head = [0; 8];
        file.read_exact_at(&mut head, 0).ok()?;
        let v2 = head.starts_with(b"\xfftOc");
        if v2 && head[4..] != [0, 0, 0, 2] {
            return None;
        }
        let mut table = [0; 1024];
        file.read_exact_at(&mut table, if v2 { 8 } else { 0 }).ok()?;
        let mut fanout = [0; 256];
        for (bucket, word) in fanout.iter_mut().zip(table.chunks_exact(4)) {
            *bucket = u32::from_be_bytes(word.try_into().ok()?);
        }
        Some(Index { file, v2, hash_len, count: u64::from(fanout[255]), fanout })
    }

    fn names_at(&self) -> u64 {
        if self.v2 { 8 + 1024 } else { 1024 }
    }

    /// `wanted` entries from the `first`: each name and offset; `None` when the index ends first.
    fn entries(&self, first: u64, wanted: u64) -> Option<Vec<(Vec<u8>, u64)>> {
        let hash_len = self.hash_len as u64;
        let mut entries = Vec::with_capacity(usize::try_from(wanted).ok()?);
        if !self.v2 {
            let mut bytes = vec![0; usize::try_from(wanted * (4 + hash_len)).ok()?];
            self.file.read_exact_at(&mut bytes, self.names_at() + first * (4 + hash_len)).ok()?;
            for entry in bytes.chunks_exact(4 + self.hash_len) {
                let offset = u64::from(u32::from_be_bytes(entry[..4].try_into().ok()?));
                entries.push((entry[4..].to_vec(), offset));
            }
            return Some(entries);
        }
        let mut names = vec![0; usize::try_from(wanted * hash_len).ok()?];
        self.file.read_exact_at(&mut names, self.names_at() + first * hash_len).ok()?;
        let offsets_at = self.names_at() + self.count.checked_mul(hash_len + 4)?;
        let mut offsets = vec![0; usize::try_from(wanted * 4).ok()?];
        self.file.read_exact_at(&mut offsets, offsets_at + first * 4).ok()?;
        let large_at = offsets_at + self.count * 4;
        for (name, small) in names.chunks_exact(self.hash_len).zip(offsets.chunks_exact(4)) {
            let small = u32::from_be_bytes(small.try_into().ok()?);
            let offset = if small & 0x8000_0000 == 0 {
                u64::from(small)
            } else {
                let mut large = [0; 8];
                self.file.read_exact_at(&mut large, large_at + u64::from(small & 0x7fff_ffff) * 8).ok()?;
                u64::from_be_bytes(large)
            };
            entries.push((name.to_vec(), offset));
        }
        Some(entries)
    }

    /// Where the index says the object `name` is, found as git finds it: a binary search among
    /// the names its first byte's fan-out bounds.
    fn find(&self, name: &[u8]) -> Option<u64> {
        let first = usize::from(*name.first()?);
        let (mut low, mut high) =
            (if first == 0 { 0 } else { u64::from(self.fanout[first - 1]) }, u64::from(self.fanout[first]));
        while low < high {
            let middle = low + (high - low) / 2;
            let (found, offset) = self.entries(middle, 1)?.pop()?;
            match found.as_slice().cmp(name) {
                std::cmp::Ordering::Equal => return Some(offset),
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
            }
        }
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Commit,
    Tree,
    Blob,
    Tag,
}

impl Kind {
    fn name(self) -> &'static [u8] {
        match self {
            Kind::Commit => b"commit",
            Kind::Tree => b"tree",
            Kind::Blob => b"blob",
            Kind::Tag => b"tag",
        }
    }
}

enum Unread {
    Broken,
    TooLarge,
}

/// An entry's head: what it is, and where its data starts.
enum Entry {
    Whole(Kind),
    /// A delta on the entry at that offset.
    OnOffset(u64),
    /// A delta on the object of that name.
    OnName(Vec<u8>),
}

struct Reader<'a> {
    pack: &'a std::fs::File,
    /// The pack's length.
    len: u64,
    hash_len: usize,
    /// Where each name is.
    index: &'a Index,
    /// Entries made so far, by offset (a delta's base is often another's), within
    /// [`MAX_CACHED_BYTES`].
    objects: HashMap<u64, (Kind, std::rc::Rc<Vec<u8>>)>,
    /// What inflating and applying deltas made, in all.
    produced: usize,
    /// What `objects` holds.
    cached: usize,
}

/// A pack's bytes from an offset, read as they are asked for.
struct ReadAt<'a> {
    pack: &'a std::fs::File,
    at: u64,
}

impl std::io::Read for ReadAt<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.pack.read_at(buffer, self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

impl<'a> Reader<'a> {
    /// What the entry at `offset` holds, its deltas applied.
    fn object(&mut self, offset: u64) -> Result<(Kind, std::rc::Rc<Vec<u8>>), Unread> {
        // The chain down to a whole object, then back up applying each delta.
        let mut chain: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut at = offset;
        let (kind, mut body) = loop {
            if let Some((kind, body)) = self.objects.get(&at) {
                break (*kind, body.clone());
            }
            if chain.len() > MAX_DELTA_CHAIN || chain.iter().any(|(seen, _)| *seen == at) {
                return Err(Unread::Broken);
            }
            let (entry, data) = self.head(at)?;
            let inflated = self.inflate(data)?;
            match entry {
                Entry::Whole(kind) => {
                    let body = std::rc::Rc::new(inflated);
                    self.keep(at, kind, &body);
                    break (kind, body);
                }
                Entry::OnOffset(base) => {
                    chain.push((at, inflated));
                    at = base;
                }
                Entry::OnName(name) => {
                    // A base outside the pack: a thin pack, which git completes before it keeps one.
                    let Some(base) = self.index.find(&name) else { return Err(Unread::Broken) };
                    chain.push((at, inflated));
                    at = base;
                }
            }
        };
        while let Some((at, delta)) = chain.pop() {
            let left = MAX_INFLATED_BYTES.saturating_sub(self.produced);
            body = std::rc::Rc::new(applied(&body, &delta, left)?);
            self.produced += body.len();
            self.keep(at, kind, &body);
        }
        Ok((kind, body))
    }

    /// Counts `bytes` of work against [`MAX_INFLATED_BYTES`].
    fn spend(&mut self, bytes: usize) -> Result<(), Unread> {
        self.produced = self.produced.saturating_add(bytes);
        if self.produced > MAX_INFLATED_BYTES { Err(Unread::TooLarge) } else { Ok(()) }
    }

    /// Keeps `body`, the entry at `at`, for the deltas on it, while [`MAX_CACHED_BYTES`] allows.
    fn keep(&mut self, at: u64, kind: Kind, body: &std::rc::Rc<Vec<u8>>) {
        if self.cached + body.len() <= MAX_CACHED_BYTES {
            self.cached += body.len();
            self.objects.insert(at, (kind, body.clone()));
        }
    }

    /// The head of the entry at `offset`, and where its data starts.
    fn head(&self, offset: u64) -> Result<(Entry, u64), Unread> {
        if offset < 12 || offset >= self.len {
            return Err(Unread::Broken);
        }
        // A head is at most a size of 10 bytes, a back offset of 10 or a name of 32.
        let mut bytes = [0; 64];
        let read = self.pack.read_at(&mut bytes, offset).map_err(|_| Unread::Broken)?;
        let bytes = &bytes[..read];
        let (&first, mut used) = (bytes.first().ok_or(Unread::Broken)?, 1);
        let mut byte = first;
        // The size (a varint after the kind); the inflated length is checked by the delta or hash.
        while byte & 0x80 != 0 {
            byte = *bytes.get(used).ok_or(Unread::Broken)?;
            used += 1;
        }
        let entry = match (first >> 4) & 7 {
            1 => Entry::Whole(Kind::Commit),
            2 => Entry::Whole(Kind::Tree),
            3 => Entry::Whole(Kind::Blob),
            4 => Entry::Whole(Kind::Tag),
            6 => {
                let mut byte = *bytes.get(used).ok_or(Unread::Broken)?;
                used += 1;
                let mut back = u64::from(byte & 0x7f);
                while byte & 0x80 != 0 {
                    byte = *bytes.get(used).ok_or(Unread::Broken)?;
                    used += 1;
                    back = back.checked_add(1).and_then(|back| back.checked_mul(128)).ok_or(Unread::Broken)?
                        | u64::from(byte & 0x7f);
                }
                Entry::OnOffset(offset.checked_sub(back).filter(|_| back > 0).ok_or(Unread::Broken)?)
            }
            7 => {
                let name = bytes.get(used..used + self.hash_len).ok_or(Unread::Broken)?;
                used += self.hash_len;
                Entry::OnName(name.to_vec())
            }
            _ => return Err(Unread::Broken),
        };
        Ok((entry, offset + used as u64))
    }

    /// The zlib stream at `data` in the pack, inflated.
    fn inflate(&mut self, data: u64) -> Result<Vec<u8>, Unread> {
        let left = MAX_INFLATED_BYTES.saturating_sub(self.produced);
        let mut out = Vec::new();
        let stream = std::io::BufReader::with_capacity(16 << 10, ReadAt { pack: self.pack, at: data });
        let mut decoder = flate2::bufread::ZlibDecoder::new(stream);
        let read = (&mut decoder).take(left as u64 + 1).read_to_end(&mut out);
        read.map_err(|_| Unread::Broken)?;
        if out.len() > left {
            return Err(Unread::TooLarge);
        }
        self.produced += out.len();
        // What was read to make it counts too, and each entry looked at: a chain of deltas each
        // padded with 65 KB of empty zlib blocks made 4 bytes apiece, walked again for each of
        // 200,000 entries, held the exit for hours within the output's budget (the sixty-first
        // re-attack's R1).
        self.spend(usize::try_from(decoder.total_in()).unwrap_or(usize::MAX).saturating_add(ENTRY_COST))?;
        Ok(out)
    }
}

/// `delta` applied to `base`, as git's `patch_delta` does: `Broken` when it does not apply,
/// `TooLarge` when what it says it makes is more than `most` (before any of it is made).
fn applied(base: &[u8], delta: &[u8], most: usize) -> Result<Vec<u8>, Unread> {
    applied_within(base, delta, most).ok_or(Unread::Broken)?
}

/// [`applied`], `None` for `Broken`.
fn applied_within(base: &[u8], delta: &[u8], most: usize) -> Option<Result<Vec<u8>, Unread>> {
    let mut at = 0;
    let mut size = || -> Option<usize> {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = *delta.get(at)?;
            at += 1;
            value |= usize::from(byte & 0x7f).checked_shl(shift)?;
            shift += 7;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
    };
    let (base_size, size) = (size()?, size()?);
    if base_size != base.len() {
        return None;
    }
    if size > most {
        return Some(Err(Unread::TooLarge));
    }
    let mut out = Vec::with_capacity(size);
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let mut field = |bits: u8, count: usize| -> Option<usize> {
                let mut value = 0usize;
                for n in 0..count {
                    if op & (bits << n) != 0 {
                        value |= usize::from(*delta.get(at)?) << (8 * n);
                        at += 1;
                    }
                }
                Some(value)
            };
            let offset = field(0x01, 4)?;
            let length = match field(0x10, 3)? {
                0 => 0x10000,
                length => length,
            };
            out.extend_from_slice(base.get(offset..offset.checked_add(length)?)?);
        } else if op != 0 {
            out.extend_from_slice(delta.get(at..at + usize::from(op))?);
            at += usize::from(op);
        } else {
            return None;
        }
        if out.len() > size {
            return None;
        }
    }
    (out.len() == size).then_some(Ok(out))
}

#[cfg(test)]
pub(super) mod tests {
    use std::io::Write as _;
    use std::os::unix::fs::FileExt as _;
    use std::path::PathBuf;

    use super::*;

    /// [`check_within`] on a budget of its own.
    fn check(idx: &Path, pack_file: &Path, hash_len: usize) -> Checked {
        check_within(idx, pack_file, hash_len, &mut 0)
    }

    fn git(repo: &Path, args: &[&str]) -> Option<String> {
        let args = [&["-c", "user.name=U", "-c", "user.email=u@x"][..], args].concat();
        let output = crate::surfaces::launch::cache_tree::tests::git_output(repo, &args, &[]).ok()?;
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    fn packs(repo: &Path) -> Vec<PathBuf> {
        let dir = repo.join(".git/objects/pack");
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "idx"))
            .collect();
        found.sort();
        found
    }

    /// A version 2 index for one object at offset 12, as git lays one out.
    pub(in crate::surfaces::launch) fn index_of(name: &[u8], pack_sum: &[u8]) -> Vec<u8> {
        let mut index = b"\xfftOc\0\0\0\x02".to_vec();
        for bucket in 0..256u32 {
            index.extend_from_slice(&u32::from(bucket >= u32::from(name[0])).to_be_bytes());
        }
        index.extend_from_slice(name);
        index.extend_from_slice(&[0; 4]);
        index.extend_from_slice(&12u32.to_be_bytes());
        index.extend_from_slice(pack_sum);
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &index);
        index.extend_from_slice(sum.as_ref());
        index
    }

    /// An entry's head as git writes it: the kind in bits 4 to 6, the size in the rest.
    pub(in crate::surfaces::launch) fn head_of(kind: u8, size: usize) -> Vec<u8> {
        let (mut byte, mut size, mut head) = ((kind << 4) | (size & 0x0f) as u8, size >> 4, Vec::new());
        while size > 0 {
            head.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        head.push(byte);
        head
    }

    /// A pack of one entry (`head` then a zlib stream of `body`), with its trailing sum.
    pub(in crate::surfaces::launch) fn pack_of(head: &[u8], body: &[u8]) -> Vec<u8> {
        let mut pack = b"PACK\0\0\0\x02\0\0\0\x01".to_vec();
        pack.extend_from_slice(head);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(body).unwrap();
        pack.extend_from_slice(&zlib.finish().unwrap());
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &pack);
        pack.extend_from_slice(sum.as_ref());
        pack
    }

    /// Packs git writes, deltas and all, hold what their indexes name; a one-object pack whose
    /// hand-made index names the blob the agent committed with a harmless content in its place
    /// (the fifty-second re-attack's F2), one whose delta's base lies outside it, and one that
    /// does not parse, are forged; git itself shows the forged content.
    #[test]
    fn a_pack_is_held_against_the_names_its_index_gives() {
        let temp = tempfile::tempdir().unwrap();
        let repo = temp.path();
        if git(repo, &["init", "-q"]).is_none() {
            return;
        }
        let mut text = String::new();
        for n in 0..40 {
            text.push_str(&format!("line {n} of a file that changes a little each time\n"));
            std::fs::write(repo.join("app.py"), &text).unwrap();
            git(repo, &["add", "app.py"]).unwrap();
            git(repo, &["commit", "-qm", &format!("c{n}")]).unwrap();
        }
        // Deltas on a base named (`REF_DELTA`, found through the index as git finds it), then on
        // one at an offset (`OFS_DELTA`, what git writes by default).
        git(repo, &["-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50", "--window=50"]).unwrap();
        let written = packs(repo);
        assert_eq!(written.len(), 1);
        assert_eq!(check(&written[0], &written[0].with_extension("pack"), 20), Checked::True);
        git(repo, &["repack", "-adfq", "--depth=50", "--window=50"]).unwrap();
        let written = packs(repo);
        assert_eq!(written.len(), 1);
        assert_eq!(check(&written[0], &written[0].with_extension("pack"), 20), Checked::True);

        // The agent's: `app.py` with a line that runs, committed; a pack naming its blob with
        // the harmless version.
        std::fs::write(repo.join("app.py"), format!("{text}import os; os.system('x')\n")).unwrap();
        git(repo, &["add", "app.py"]).unwrap();
        git(repo, &["commit", "-qm", "docstring"]).unwrap();
        let blob = hex::decode(git(repo, &["rev-parse", "HEAD:app.py"]).unwrap()).unwrap();
        let harmless = format!("\"\"\"Helpers.\"\"\"\n{text}");
        let pack = pack_of(&head_of(3, harmless.len()), harmless.as_bytes());
        let stem = repo.join(".git/objects/pack/pack-forged");
        std::fs::write(stem.with_extension("pack"), &pack).unwrap();
        std::fs::write(stem.with_extension("idx"), index_of(&blob, &pack[pack.len() - 20..])).unwrap();
        let shown = git(repo, &["show", "HEAD:app.py"]).unwrap();
        assert!(shown.starts_with("\"\"\"Helpers"), "git takes the pack's content: {shown}");
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);
        assert_eq!(check(&written[0], &written[0].with_extension("pack"), 20), Checked::True);

        // The same content, true to its name, is not.
        let true_name = git::object_name(b"blob", harmless.as_bytes(), 20);
        std::fs::write(stem.with_extension("idx"), index_of(&true_name, &pack[pack.len() - 20..])).unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::True);

        // A delta on a base outside the pack (kind 7, the base's name, then the delta).
        let delta = [5u8, 5, 0x05, b'h', b'e', b'l', b'l', b'o'];
        let mut head = head_of(7, delta.len());
        head.extend_from_slice(&blob);
        let pack = pack_of(&head, &delta);
        std::fs::write(stem.with_extension("pack"), &pack).unwrap();
        std::fs::write(stem.with_extension("idx"), index_of(&true_name, &pack[pack.len() - 20..])).unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);

        // Not a pack at all.
        std::fs::write(stem.with_extension("pack"), b"PACK but nothing after").unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);
    }

    /// A pack at `stem` (`.pack`, `.idx`) of a 1 MiB blob and `count` deltas each copying all of
    /// it, every entry true to its name: `count` MiB made to check it.
    pub(in crate::surfaces::launch) fn write_delta_bomb(stem: &Path, count: u32) {
        let base = vec![b'a'; 1 << 20];
        let name = git::object_name(b"blob", &base, 20);
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&base).unwrap();
        let mut pack = b"PACK\0\0\0\x02".to_vec();
        pack.extend_from_slice(&(count + 1).to_be_bytes());
        pack.extend_from_slice(&head_of(3, base.len()));
        pack.extend_from_slice(&zlib.finish().unwrap());
        // Base and result 1 MiB (0x100000 in three 7-bit bytes), then one copy of 0x100000 bytes
        // from offset 0 (only the length's third byte given).
        let delta = [0x80, 0x80, 0x40, 0x80, 0x80, 0x40, 0x80 | 0x40, 0x10];
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&delta).unwrap();
        let delta = zlib.finish().unwrap();
        let mut offsets = vec![12u32];
        for _ in 0..count {
            let at = pack.len() as u32;
            offsets.push(at);
            pack.extend_from_slice(&head_of(6, 8));
            // The offset back to the base, as git writes one (each further byte adds one first).
            let mut back = u64::from(at - 12);
            let mut bytes = vec![(back & 0x7f) as u8];
            back >>= 7;
            while back > 0 {
                back -= 1;
                bytes.insert(0, 0x80 | (back & 0x7f) as u8);
                back >>= 7;
            }
            pack.extend_from_slice(&bytes);
            pack.extend_from_slice(&delta);
        }
        let sum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &pack);
        pack.extend_from_slice(sum.as_ref());
        let mut index = b"\xfftOc\0\0\0\x02".to_vec();
        for bucket in 0..256u32 {
            let below = if bucket >= u32::from(name[0]) { count + 1 } else { 0 };
            index.extend_from_slice(&below.to_be_bytes());
        }
        for _ in &offsets {
            index.extend_from_slice(&name);
        }
        index.extend_from_slice(&vec![0; 4 * offsets.len()]);
        for at in &offsets {
            index.extend_from_slice(&at.to_be_bytes());
        }
        index.extend_from_slice(&pack[pack.len() - 20..]);
        std::fs::write(stem.with_extension("pack"), &pack).unwrap();
        std::fs::write(stem.with_extension("idx"), &index).unwrap();
    }

    /// The fifty-seventh re-attack's R2 and R5: a pack is read where its index points, whatever
    /// its length (a forged entry, then a hole to 300 MiB: forged, not too large to look at),
    /// and what its deltas make counts against the budget before it is made (a 1 MiB blob and
    /// 1,100 deltas each copying all of it ask 1.1 GiB: too large, answered without holding it).
    #[test]
    fn a_pack_is_checked_within_its_budgets_whatever_its_length() {
        let temp = tempfile::tempdir().unwrap();
        let stem = temp.path().join("pack-x");
        let evil = b"import os\nos.system('x')\n";
        let harmless = b"# settings\n";
        let pack = pack_of(&head_of(3, harmless.len()), harmless);
        let file = std::fs::File::create(stem.with_extension("pack")).unwrap();
        file.write_all_at(&pack[..pack.len() - 20], 0).unwrap();
        file.set_len((300 << 20) - 20).unwrap();
        file.write_all_at(&[0x11; 20], (300 << 20) - 20).unwrap();
        drop(file);
        let name = git::object_name(b"blob", evil, 20);
        std::fs::write(stem.with_extension("idx"), index_of(&name, &[0x11; 20])).unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);
        // The sixtieth re-attack's R1: the index made sparse instead, 8,000,000 entries (a zero
        // name at offset 0) before the forged one: forged at its first entry, not too large.
        let count: u32 = 8_000_000;
        let file = std::fs::File::create(stem.with_extension("idx")).unwrap();
        let mut head = b"\xfftOc\0\0\0\x02".to_vec();
        for bucket in 0..256u32 {
            let below = if bucket >= u32::from(name[0]) { count } else { count - 1 };
            head.extend_from_slice(&below.to_be_bytes());
        }
        file.write_all_at(&head, 0).unwrap();
        let names_at = head.len() as u64;
        file.write_all_at(&name, names_at + u64::from(count - 1) * 20).unwrap();
        let offsets_at = names_at + u64::from(count) * 24;
        file.write_all_at(&12u32.to_be_bytes(), offsets_at + u64::from(count - 1) * 4).unwrap();
        file.set_len(offsets_at + u64::from(count) * 4 + 40).unwrap();
        drop(file);
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);
        // R2: one entry named twice (git writes one entry an object, each named once).
        let harmless_name = git::object_name(b"blob", harmless, 20);
        let mut twice = b"\xfftOc\0\0\0\x02".to_vec();
        for bucket in 0..256u32 {
            let below = u32::from(bucket >= u32::from(harmless_name[0])) * 2;
            twice.extend_from_slice(&below.to_be_bytes());
        }
        twice.extend_from_slice(&harmless_name);
        twice.extend_from_slice(&harmless_name);
        twice.extend_from_slice(&[0; 8]);
        twice.extend_from_slice(&12u32.to_be_bytes());
        twice.extend_from_slice(&12u32.to_be_bytes());
        twice.extend_from_slice(&[0x11; 40]);
        std::fs::write(stem.with_extension("idx"), &twice).unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::Forged);
        std::fs::write(stem.with_extension("idx"), index_of(&harmless_name, &[0x11; 20])).unwrap();
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::True);

        write_delta_bomb(&stem, 1_100);
        assert_eq!(check(&stem.with_extension("idx"), &stem.with_extension("pack"), 20), Checked::TooLarge);
    }

    /// Git's delta instructions: a copy of the base (offset and length each in as many bytes as
    /// its bits say, 0 meaning 0x10000), an insert, and a delta whose sizes do not match.
    #[test]
    fn a_delta_is_applied_as_git_applies_it() {
        let base = b"0123456789";
        let applied = |base: &[u8], delta: &[u8]| super::applied(base, delta, usize::MAX).ok();
        // Base size 10, result size 7: copy 3 bytes from offset 2, insert "abcd".
        let delta = [10, 7, 0x80 | 0x01 | 0x10, 2, 3, 4, b'a', b'b', b'c', b'd'];
        assert_eq!(applied(base, &delta).unwrap(), b"234abcd");
        // What it says it makes is held against what is left of the budget before it is made.
        assert!(matches!(super::applied(base, &delta, 6), Err(Unread::TooLarge)));
        assert!(super::applied(base, &delta, 7).is_ok());
        assert_eq!(applied(base, &[9, 7, 0x04, b'a', b'b', b'c', b'd']), None, "the base's size");
        assert_eq!(applied(base, &[10, 8, 0x04, b'a', b'b', b'c', b'd']), None, "the result's size");
        assert_eq!(applied(base, &[10, 3, 0x80 | 0x01 | 0x10, 9, 3]), None, "a copy past the base");
        assert_eq!(applied(base, &[10, 1, 0x00]), None, "the reserved instruction");
    }
}
