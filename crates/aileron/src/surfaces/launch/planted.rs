//! Files a confined agent must not create (the re-attack of 2026-12-05): a `commondir` in a
//! repository's git directory makes git read its config, `core.fsmonitor` and hooks included,
//! from wherever the agent points it, and the git that reads it is the user's, outside the
//! launch. A file that does not exist yet cannot be bound read-only, so the launcher, outside
//! the agent's namespaces, watches the directories these files would appear in (inotify) and
//! moves each aside into the session's quarantine the moment it appears; once the agent has
//! exited it looks once more, and the session's end record lists what was moved.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A planted file moved out of the agent's reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Where the agent created it.
    pub path: PathBuf,
    /// Where it is kept now (`None` when it could only be removed), or why it could not be moved.
    pub outcome: Result<Option<PathBuf>, String>,
    /// A kept link the agent replaced or removed, now put back.
    pub link_put_back: bool,
}

impl Moved {
    /// What the user is told once the agent has exited.
    pub fn report(&self, agent: &str) -> String {
        if self.link_put_back {
            return match &self.outcome {
                Ok(Some(kept)) => format!(
                    "{agent} replaced your link {}, which git runs through: the link is back, and what it put there \
                     is in {}",
                    super::shown(&self.path),
                    super::shown(kept)
                ),
                Ok(None) => {
                    format!("{agent} removed or replaced your link {}: the link is back", super::shown(&self.path))
                }
                Err(error) => format!(
                    "{agent} replaced your link {}, and it could not be put back ({error})\nhint: put it back before \
                     you run git there",
                    super::shown(&self.path)
                ),
            };
        }
        let planted = format!("{agent} created {}, which would run what it chose as you", super::shown(&self.path));
        match &self.outcome {
            Ok(Some(kept)) => format!("{planted}; moved to {}", super::shown(kept)),
            Ok(None) => format!("{planted}; removed"),
            Err(error) => {
                format!("{planted}, and it could not be moved ({error})\nhint: delete it before you run git there")
            }
        }
    }
}

/// Watches for the planted files until [`PlantWatch::finish`].
pub struct PlantWatch {
    watched: Arc<[PathBuf]>,
    kept: Arc<[(PathBuf, PathBuf)]>,
    quarantine: PathBuf,
    moved: Arc<Mutex<Vec<Moved>>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl PlantWatch {
    /// Starts watching `watched` (paths that must not appear) and `kept` (links that must stay
    /// as they are: a link and what it says), moving what appears, or what replaced a kept link,
    /// into `quarantine` (made 0700 when first needed) and putting the link back. A directory that
    /// cannot be watched (gone, or inotify's limits reached) is still looked at when the session
    /// ends.
    pub fn start(watched: Vec<PathBuf>, kept: Vec<(PathBuf, PathBuf)>, quarantine: PathBuf) -> PlantWatch {
        let mut watch = PlantWatch {
            watched: watched.into(),
            kept: kept.into(),
            quarantine,
            moved: Arc::new(Mutex::new(Vec::new())),
            task: None,
        };
        if watch.watched.is_empty() && watch.kept.is_empty() {
            return watch;
        }
        // The names the watch looks for: those that must not appear, and the kept links'.
        let names: Arc<[PathBuf]> =
            watch.watched.iter().chain(watch.kept.iter().map(|(link, _)| link)).cloned().collect();
        match Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK) {
            Ok(inotify) => {
                let mut armed = Armed::default();
                armed.arm(&inotify, &names);
                let (watched, kept, quarantine, moved) =
                    (watch.watched.clone(), watch.kept.clone(), watch.quarantine.clone(), watch.moved.clone());
                watch.task = Some(tokio::spawn(async move {
                    // SAFETY: `Events` owns the descriptor and keeps it open, the same one, until the
                    // `AsyncFd` holding it is dropped.
                    let registered = unsafe { AsyncFd::register_with_interest(Events(inotify), Interest::READABLE) };
                    let Ok(inotify) = registered else { return };
                    while let Some(events) = next_events(&inotify).await {
                        // A missing directory on the way was made: watched from now on, and
                        // looked in at once (the file may be there already).
                        if events.iter().any(|event| armed.ancestors.contains(&event.wd)) {
                            armed.arm(&inotify.get_ref().0, &names);
                            sweep(&watched, &kept, &quarantine, &moved);
                            continue;
                        }
                        // Any planted name (or a lost event) and every watched path is looked at.
                        let planted = events.iter().any(|event| {
                            event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)
                                || event.name.as_ref().is_some_and(|name| {
                                    armed.names.get(&event.wd).is_some_and(|watched| watched.contains(name))
                                })
                        });
                        if planted {
                            sweep(&watched, &kept, &quarantine, &moved);
                        }
                    }
                }));
            }
            Err(error) => {
                log_line!(
                    "aileron: warning: cannot watch the repositories for planted files ({error}); they are \
                     checked when the session ends"
                );
            }
        }
        // Planted before the watch began (by an earlier session that was killed): moved now.
        sweep(&watch.watched, &watch.kept, &watch.quarantine, &watch.moved);
        watch
    }

    /// Stops watching, looks once more and returns everything moved.
    pub async fn finish(mut self) -> Vec<Moved> {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        sweep(&self.watched, &self.kept, &self.quarantine, &self.moved);
        std::mem::take(&mut *self.moved.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// The kept links as this session keeps them, recorded in the Aileron home for the sessions that
/// start while it runs (`launch-links/<pid>-<start>`, removed when it ends). Each launcher puts a kept
/// link back to the text it read at its own launch; a second session in the same workspace that
/// read a link while the first one's agent had swapped it (`.git/hooks -> ../evil`) then put the
/// agent's text back against the first launcher, and had the last word (the twenty-seventh
/// re-attack's R7: the user's next commit ran the agent's hook). So a launch compares each kept
/// link's text with what the live sessions recorded, and is refused when they differ (its binds
/// and pins came from its own look: the twenty-eighth re-attack's K1).
pub struct LinkRecord {
    file: PathBuf,
}

impl LinkRecord {
    /// Compares `kept` with the live sessions' records in `dir` (a record whose launcher is gone is
    /// removed), then records `kept` for this launcher (`<pid>-<start>`). Returns the record
    /// (removed by [`LinkRecord::remove`]) and a line for each link whose text differs from what
    /// the longest-running live session recorded.
    pub fn agree(dir: &Path, kept: &[(PathBuf, PathBuf)]) -> (Option<LinkRecord>, Vec<String>) {
        let mut notes = Vec::new();
        if kept.is_empty() {
            return (None, notes);
        }
        let mut live: Vec<(u64, Vec<(PathBuf, PathBuf)>)> = Vec::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
            let mut lines = text.lines();
            let launcher = lines
                .next()
                .and_then(|line| line.split_once(' '))
                .and_then(|(pid, started)| Some((pid.parse::<i32>().ok()?, started.parse::<u64>().ok()?)));
            match launcher {
                Some((pid, started)) if process_start(pid) == Some(started) => {
                    live.push((started, lines.filter_map(decode_pair).collect()));
                }
                _ => {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        live.sort_by_key(|(started, _)| *started);
        for (link, said) in kept {
            let recorded = live.iter().find_map(|(_, links)| links.iter().find(|(other, _)| other == link));
            if let Some((_, text)) = recorded
                && text != said
            {
                notes.push(format!(
                    "your link {} says {} now, but said {} when a session still running began",
                    super::shown(link),
                    said.display(),
                    text.display()
                ));
            }
        }
        let Some(started) = process_start(std::process::id() as i32) else { return (None, notes) };
        let session = format!("{}-{started}", std::process::id());
        let mut text = format!("{} {started}\n", std::process::id());
        for (link, said) in kept.iter() {
            use std::os::unix::ffi::OsStrExt as _;
            text.push_str(&format!(
                "{} {}\n",
                hex::encode(link.as_os_str().as_bytes()),
                hex::encode(said.as_os_str().as_bytes())
            ));
        }
        let file = dir.join(session);
        let written = crate::platform::home::create_private_dir(dir)
            .and_then(|()| crate::platform::home::write_atomic(&file, text.as_bytes(), 0o600));
        (written.ok().map(|()| LinkRecord { file }), notes)
    }

    /// Removes the record (the session ended).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// `hex(link) hex(text)`, a line of a record.
fn decode_pair(line: &str) -> Option<(PathBuf, PathBuf)> {
    use std::os::unix::ffi::OsStringExt as _;
    let (link, said) = line.split_once(' ')?;
    let path = |hex_text: &str| hex::decode(hex_text).ok().map(|bytes| PathBuf::from(OsString::from_vec(bytes)));
    Some((path(link)?, path(said)?))
}

/// When process `pid` started (clock ticks since boot, `/proc/<pid>/stat`'s 22nd field), if it
/// runs: with its pid, what names a launcher across pid reuse.
fn process_start(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: the fields after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Binds a protected file again inside the agent's namespaces when a tool of the user's replaces
/// it while the agent runs (the twenty-eighth re-attack's W1): a rename over the file (`git
/// config`'s `config.lock`, `sed -i`, an editor's atomic save) takes the read-only bind or the
/// copy without credentials away with the old entry, in every namespace. The launcher watches
/// each such file's directory and, for a name replaced there, runs `aileron __confine-rebind`
/// with the confinement helper's pid (a copy made again from the new content first).
pub struct BindWatch {
    task: Option<tokio::task::JoinHandle<()>>,
    take_outs: Arc<Mutex<TakeOuts>>,
}

/// The git configs a bind watch protects, with what in each is not known to be harmless
/// ([`suspect_in`]); those
/// replaced and not looked at since; what was taken out.
#[derive(Default)]
struct TakeOuts {
    armed: HashMap<PathBuf, Vec<super::git::Entry>>,
    pending: HashSet<PathBuf>,
    done: Vec<TakenOut>,
    quarantine: PathBuf,
}

impl TakeOuts {
    /// Looks at `file` (replaced) and takes out what it gained.
    fn look(&mut self, file: &Path) {
        self.pending.remove(file);
        let n = self.done.len() + 1;
        let Some(known) = self.armed.get_mut(file) else { return };
        if let Some(taken) = take_out_gained(file, known, &self.quarantine, n) {
            log_line!("aileron: warning: {}", taken.report("the agent"));
            self.done.push(taken);
        }
    }
}

/// What a git config gained while the agent ran, in the moment a tool of the user's replaced it
/// (the window between the rename and the rebind, W1: the agent, watching the file, can write
/// then), taken out by the launcher; and lines that run something a file gained while the agent
/// ran, taken out at its end ([`take_out_lines`]): the file, what was taken out (each as `git
/// config` names the variable, or the line), and where the file as it was is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenOut {
    pub file: PathBuf,
    pub taken: Vec<String>,
    pub kept: Result<PathBuf, String>,
}

impl TakenOut {
    /// What the user is told of a git config's, when it happens and once the agent has exited.
    pub fn report(&self, agent: &str) -> String {
        format!(
            "{} gained {} while {agent} ran, when it was replaced (by you, or by {agent} in that moment): taken out, \
             left as comments; {}\nhint: if you set it yourself, remove the `{}` in front of it",
            super::shown(&self.file),
            self.taken.join(", "),
            self.kept_where(),
            super::git::TAKEN_OUT.trim_end()
        )
    }

    /// Where the agent's version is kept when the file was put back as it was at launch, as the
    /// user is told.
    pub fn agents_version_kept(&self) -> String {
        match &self.kept {
            Ok(kept) => format!("the agent's version is {}", super::shown(kept)),
            Err(why) => format!("the agent's version was not kept ({why})"),
        }
    }

    /// Where the file as it was is kept, as the user is told.
    pub fn kept_where(&self) -> String {
        match &self.kept {
            Ok(kept) => format!("the file as it was is {}", super::shown(kept)),
            Err(error) => format!("the file as it was could not be kept ({error})"),
        }
    }
}

/// `bytes` (a file as it was before what was taken out of it) kept as `quarantine`/`name`, the
/// quarantine made private first.
fn kept_in(quarantine: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, String> {
    let kept_at = quarantine.join(name);
    crate::platform::home::create_private_dir(quarantine)
        .and_then(|()| crate::platform::home::write_atomic(&kept_at, bytes, 0o600))
        .map(|()| kept_at)
        .map_err(|error| error.to_string())
}

/// A git config the bind watch protects, and the variables in it not known to be harmless (what
/// it held at launch, and since after each replacement).
fn suspect_in(file: &Path) -> Option<Vec<super::git::Entry>> {
    let bytes = super::git::read_limited(file, false).ok()?;
    Some(super::git::not_known_harmless(&super::git::parse(&String::from_utf8_lossy(&bytes))))
}

/// Takes out of the git config `file` what is not known to be harmless
/// ([`super::git::not_known_harmless`]) and was not there before (`known`),
/// writing the file in place (a rename would take the agent's bind away again), the file as it
/// was kept in `quarantine` first; `known` becomes what it holds now.
fn take_out_gained(file: &Path, known: &mut Vec<super::git::Entry>, quarantine: &Path, n: usize) -> Option<TakenOut> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let bytes = super::git::read_limited(file, false).ok()?;
    let text = String::from_utf8_lossy(&bytes).to_string();
    let suspect = super::git::not_known_harmless(&super::git::parse(&text));
    let gained: Vec<super::git::Entry> = suspect.iter().filter(|entry| !known.contains(entry)).cloned().collect();
    if gained.is_empty() {
        *known = suspect;
        return None;
    }
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let kept = kept_in(quarantine, &format!("{n}-taken-out-{name}"), &bytes);
    let without = super::git::taken_out(&text, &gained);
    let written =
        std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW).open(file).and_then(|mut opened| {
            opened.write_all(without.as_bytes())?;
            opened.set_len(without.len() as u64)?;
            opened.sync_all()
        });
    let taken = gained
        .iter()
        .map(|entry| format!("{} = {}", super::git::named(entry), entry.value.as_deref().unwrap_or("true")))
        .collect();
    match written {
        Ok(()) => *known = super::git::not_known_harmless(&super::git::parse(&without)),
        Err(error) => log_line!("aileron: warning: {} could not be written without them: {error}", super::shown(file)),
    }
    Some(TakenOut { file: file.to_path_buf(), taken, kept })
}

/// The lines of `file` (a plain file, read without following a link) for which `runs` holds.
pub fn lines_that_run(file: &Path, runs: fn(&str) -> bool) -> Vec<String> {
    match super::git::read_capped(file, true, MAX_TAKE_OUT_BYTES) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).lines().filter(|line| runs(line)).map(str::to_string).collect(),
        Err(_) => Vec::new(),
    }
}

/// The most of a file [`take_out_lines`] reads: a todo list, an ignore list or a version file of
/// the user's is a few KiB.
const MAX_TAKE_OUT_BYTES: u64 = 64 * 1024 * 1024;

/// The kinds of file whose lines the agent added the exit takes out (left as comments, or
/// emptied in place, the file as it was kept in the quarantine), each with the test of a line
/// and what the user is told.
#[derive(Debug, Clone, Copy)]
pub enum AddedLines {
    /// A rebase left in progress whose next steps run commands (the thirty-fourth re-attack's
    /// F9: `exec …`, run by the user's `git rebase --continue`).
    RebaseSteps,
    /// Patterns added to a repository's own ignore list, which hide what the agent made from
    /// `git status` (the fortieth re-attack's L8: a new `tests/conftest.py`, which `pytest` runs).
    IgnorePatterns,
    /// Attributes added to a repository's own attributes, never seen in `git status` (the
    /// forty-seventh re-attack's A1: `tool.py -diff` made `git diff` show "Binary files differ"
    /// in place of the line the agent added to it).
    Attributes,
    /// A `.gitignore` the agent made that hides itself, and with it what it lists.
    SelfHidingIgnore,
    /// Lines the agent added to a `.gitignore` the user had that hide it (the fiftieth
    /// re-attack's E1: `*` added to an uncommitted one hid it and a new test beside it).
    SelfHidingLines,
    /// Any pattern the agent added to a `.gitignore` no index tracked at launch, whose changes no
    /// `git status` or `git diff` shows (the fifty-first re-attack's Y4: `conftest.py` appended to
    /// the user's uncommitted one hid a new `tests/conftest.py`); and the file put back as it was
    /// when the agent took out or moved a line of the user's (Y5: the negations of a whitelist
    /// deleted, or its `*` written again after them).
    UntrackedIgnore,
    /// A version file that runs a tool from a directory of the project (F12, `package.json`'s
    /// strings among them).
    LocalTools,
}

impl AddedLines {
    /// Takes out of `file` the lines of this kind not among `known` (those it held at launch, as
    /// many times as it held each); the file as it was kept as the `n`th of its kind. `at_launch`:
    /// the file's bytes at launch, put back by [`AddedLines::UntrackedIgnore`].
    pub fn take_out(
        self,
        file: &Path,
        known: &[String],
        at_launch: Option<&[u8]>,
        quarantine: &Path,
        n: usize,
    ) -> Option<TakenOut> {
        let (kept_as, runs): (&str, fn(&str) -> bool) = match self {
            AddedLines::UntrackedIgnore => {
                let kept_as = format!("{n}-gitignore-untracked");
                return put_back_or_take_out(file, known, at_launch, quarantine, &kept_as);
            }
            AddedLines::RebaseSteps => ("rebase-todo", super::git::runs_a_command),
            AddedLines::IgnorePatterns => ("info-exclude", super::git::is_a_pattern),
            AddedLines::Attributes => ("info-attributes", super::git::is_a_pattern),
            AddedLines::SelfHidingIgnore => ("gitignore", super::git::hides_a_gitignore),
            AddedLines::SelfHidingLines => ("gitignore-lines", super::git::hides_a_gitignore),
            AddedLines::LocalTools => {
                return take_out_local_tools(file, known, quarantine, &format!("{n}-tool-versions"));
            }
        };
        take_out_lines(file, runs, known, quarantine, &format!("{n}-{kept_as}"))
    }

    /// What `agent`'s user is told of what was taken out.
    pub fn told(self, agent: &str, taken: &TakenOut) -> String {
        let (file, lines, kept) = (super::shown(&taken.file), taken.taken.join("; "), taken.kept_where());
        match self {
            AddedLines::RebaseSteps => format!(
                "{agent} left a rebase in progress whose next steps run commands ({lines}): taken out of {file}, left \
                 as comments; {kept}\nhint: look at what is left with `git rebase --edit-todo` before `git rebase \
                 --continue`, or `git rebase --abort`"
            ),
            AddedLines::IgnorePatterns => format!(
                "{agent} added to {file} patterns that hide files from `git status` ({lines}): taken out, left as \
                 comments, so what they hid shows; {kept}\nhint: look at what `git status` now shows before you run it"
            ),
            AddedLines::Attributes => format!(
                "{agent} added to {file} attributes, which change how git shows, diffs and checks out files and are \
                 never shown by `git status` ({lines}): taken out, left as comments; {kept}\nhint: look at `git \
                 diff` again before you run what changed"
            ),
            AddedLines::SelfHidingIgnore => format!(
                "{agent} made {file}, whose patterns hide it from `git status` ({lines}), and with it what it lists: \
                 taken out, left as comments, so it shows; {kept}\nhint: look at what it lists before you run what \
                 is there (`git status --ignored`)"
            ),
            AddedLines::SelfHidingLines => format!(
                "{agent} added to {file} patterns that hide it from `git status` ({lines}), and with it what it \
                 lists: taken out, left as comments, so it shows; {kept}\nhint: look at what it lists before you run \
                 what is there (`git status --ignored`)"
            ),
            AddedLines::UntrackedIgnore if taken.taken.first().is_some_and(|line| line == PUT_BACK) => {
                let added = &taken.taken[1..];
                let added = if added.is_empty() { String::new() } else { format!(" and added {}", added.join("; ")) };
                format!(
                    "{agent} took out or moved patterns of {file}{added}, and git does not track it, so neither `git \
                     status` nor `git diff` shows that: put back as it was at launch, so it shows again what it \
                     showed; {}\nhint: look at what `git status` now shows before you run it",
                    taken.agents_version_kept()
                )
            }
            AddedLines::UntrackedIgnore => format!(
                "{agent} added to {file}, which git does not track, so neither `git status` nor `git diff` shows its \
                 changes, patterns that hide files from `git status` ({lines}): taken out, left as comments, so what \
                 they hid shows; {kept}\nhint: look at what `git status` now shows before you run it"
            ),
            AddedLines::LocalTools if is_package_json(&taken.file) => format!(
                "{agent} wrote into {file} a tool to run from a directory of the project ({lines}): mise would run \
                 it at your next use of the tool there; taken out (the rest of the file is as it was); {kept}\nhint: \
                 put back what you want from the copy kept"
            ),
            AddedLines::LocalTools => format!(
                "{agent} wrote into {file} a tool to run from a directory of the project ({lines}): mise, asdf or \
                 rustup would run it at your next use of the tool there; taken out, left as comments; {kept}\nhint: \
                 remove the `#` in front of a line you want"
            ),
        }
    }
}

/// Takes out of `file` the lines for which `runs` holds that are not among `known` (those at
/// launch), each left as a comment (`#`, which git's todo lists and `.tool-versions` skip), the
/// file as it was kept in `quarantine` as `kept_as` first.
pub fn take_out_lines(
    file: &Path,
    runs: fn(&str) -> bool,
    known: &[String],
    quarantine: &Path,
    kept_as: &str,
) -> Option<TakenOut> {
    // Read whole, as git and mise read it (the first 4 MiB alone let a line after that much
    // padding through: the forty-first re-attack's M1), and through a link as they do (M2: a
    // `.tool-versions` made a link to a file of the agent's), which the file written back
    // replaces. One too large to read whole is taken out whole.
    let size = std::fs::metadata(file).ok()?.len();
    if size > MAX_TAKE_OUT_BYTES {
        // Moved into the quarantine, not read (it may be any size).
        let kept_at = quarantine.join(kept_as);
        let kept = crate::platform::home::create_private_dir(quarantine)
            .and_then(|()| std::fs::rename(file, &kept_at))
            .map(|()| kept_at)
            .map_err(|error| error.to_string());
        crate::platform::home::write_atomic(file, b"", 0o644).ok()?;
        let taken = vec![format!("all of it ({size} bytes, past what is read)")];
        return Some(TakenOut { file: file.to_path_buf(), taken, kept });
    }
    let bytes = super::git::read_capped(file, true, MAX_TAKE_OUT_BYTES).ok()?;
    let text = String::from_utf8_lossy(&bytes).to_string();
    let added = added_lines(&text, runs, known);
    let lines: Vec<String> = added.iter().filter(|(_, added)| *added).map(|(line, _)| line.to_string()).collect();
    if lines.is_empty() {
        return None;
    }
    let kept = kept_in(quarantine, kept_as, &bytes);
    written_back(file, without_added(&text, &added).as_bytes())?;
    Some(TakenOut { file: file.to_path_buf(), taken: lines, kept })
}

/// Each line of `text` (its end taken off) with whether it is added: `runs` holds for it and
/// `known` held it fewer times before it (a second `*` after the user's one is the agent's).
fn added_lines<'a>(text: &'a str, runs: fn(&str) -> bool, known: &[String]) -> Vec<(&'a str, bool)> {
    let mut left: HashMap<&str, usize> = HashMap::new();
    for line in known {
        *left.entry(line.as_str()).or_default() += 1;
    }
    text.split_inclusive('\n')
        .map(|line| {
            // One `\r` before the `\n`, as git and `lines` take it off (the fifty-fourth
            // re-attack's Z3: `!*.js\r\r` is no longer the user's negation to git).
            let line = line.strip_suffix('\n').unwrap_or(line);
            let line = line.strip_suffix('\r').unwrap_or(line);
            let added = runs(line)
                && match left.get_mut(line) {
                    Some(count) if *count > 0 => {
                        *count -= 1;
                        false
                    }
                    _ => true,
                };
            (line, added)
        })
        .collect()
}

/// `text` with each of its [added](added_lines) lines left as a comment.
fn without_added(text: &str, added: &[(&str, bool)]) -> String {
    text.split_inclusive('\n')
        .zip(added)
        .map(|(line, (_, added))| if *added { format!("{}{line}", super::git::TAKEN_OUT) } else { line.to_string() })
        .collect()
}

/// A small file as it is, to be put back whole ([`put_back_whole`]): `Ok(None)` when there is
/// none, its bytes when it is a regular file (not through a link) of at most
/// [`MAX_PUT_BACK_BYTES`], `Err` otherwise.
pub fn file_as_it_is(file: &Path) -> Result<Option<Vec<u8>>, ()> {
    match std::fs::symlink_metadata(file) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Ok(metadata) if metadata.is_file() && metadata.len() <= MAX_PUT_BACK_BYTES => {
            let bytes = super::git::read_capped(file, false, MAX_PUT_BACK_BYTES + 1).map_err(|_| ())?;
            if bytes.len() as u64 > MAX_PUT_BACK_BYTES { Err(()) } else { Ok(Some(bytes)) }
        }
        _ => Err(()),
    }
}

/// The largest file [`file_as_it_is`] keeps.
const MAX_PUT_BACK_BYTES: u64 = 1024 * 1024;

/// `file` put back whole as it was at launch (`at_launch`, from [`file_as_it_is`]; removed when
/// there was none), whatever the agent left there moved into `quarantine`; `None` when it is as
/// it was.
pub fn put_back_whole(file: &Path, at_launch: Option<&[u8]>, quarantine: &Path) -> Option<TakenOut> {
    if file_as_it_is(file).is_ok_and(|now| now.as_deref() == at_launch) {
        return None;
    }
    let mut moved = Vec::new();
    move_all(&[file.to_path_buf()], &[], quarantine, &mut moved);
    let kept = match moved.pop().map(|moved| moved.outcome) {
        Some(Ok(Some(kept))) => Ok(kept),
        Some(Ok(None)) | None => Err("it was gone".to_string()),
        Some(Err(error)) => Err(error),
    };
    if let Some(bytes) = at_launch {
        crate::platform::home::write_atomic(file, bytes, 0o644).ok()?;
    }
    Some(TakenOut { file: file.to_path_buf(), taken: vec![PUT_BACK.to_string()], kept })
}

/// The first of [`TakenOut::taken`] when a file was put back as it was at launch.
const PUT_BACK: &str = "the file as it was at launch put back";

/// A `.gitignore` no index tracked at launch: put back as it was (`at_launch`) when the agent
/// took out or moved a pattern of the user's (`known`, in order), which may show less; else the
/// patterns it added taken out, as [`take_out_lines`] does. One read whole at launch only can be
/// put back.
fn put_back_or_take_out(
    file: &Path,
    known: &[String],
    at_launch: Option<&[u8]>,
    quarantine: &Path,
    kept_as: &str,
) -> Option<TakenOut> {
    let runs: fn(&str) -> bool = super::git::is_a_pattern;
    let Some(at_launch) = at_launch else { return take_out_lines(file, runs, known, quarantine, kept_as) };
    let bytes = super::git::read_capped(file, true, MAX_TAKE_OUT_BYTES).ok()?;
    if bytes == at_launch {
        return None;
    }
    let text = String::from_utf8_lossy(&bytes).to_string();
    let added = added_lines(&text, runs, known);
    let users: Vec<&str> = added.iter().filter(|(line, added)| !added && runs(line)).map(|(line, _)| *line).collect();
    if users.iter().copied().eq(known.iter().map(String::as_str)) {
        return take_out_lines(file, runs, known, quarantine, kept_as);
    }
    let kept = kept_in(quarantine, kept_as, &bytes);
    written_back(file, at_launch)?;
    let mut taken = vec![PUT_BACK.to_string()];
    taken.extend(added.iter().filter(|(_, added)| *added).map(|(line, _)| line.to_string()));
    Some(TakenOut { file: file.to_path_buf(), taken, kept })
}

/// `file` written again as `bytes`, with the mode it had (a `.tool-versions` kept private stays
/// so); a link is replaced by the file, with the mode of the file it led to (not the link's own
/// 0777: the forty-second re-attack's N9).
fn written_back(file: &Path, bytes: &[u8]) -> Option<()> {
    let mode = std::fs::metadata(file).map_or(0o644, |metadata| {
        use std::os::unix::fs::PermissionsExt as _;
        metadata.permissions().mode() & 0o7777
    });
    crate::platform::home::write_atomic(file, bytes, mode).ok()
}

/// Whether a line of a `.tool-versions` (mise's and asdf's) runs a tool from a directory it
/// names (`node path:/…/work/.cache/n`): no trust asked, the user's next `node` in the project ran
/// the agent's (the thirty-fourth re-attack's F12).
pub fn runs_a_local_tool(line: &str) -> bool {
    let line = line.split('#').next().unwrap_or_default();
    // `java=path:…` in `.sdkmanrc` (the fortieth re-attack's L9), `vpath:` and `ruby-path:` (the
    // forty-first's M4).
    line.split_whitespace().any(|version| version.contains("path:"))
}

fn is_package_json(file: &Path) -> bool {
    file.file_name().is_some_and(|name| name == "package.json")
}

/// Whether a line of a `rust-toolchain.toml` (or the file without its extension, which rustup
/// reads as TOML when it can) names a toolchain by its directory (`path = "…"`, also inside an
/// inline table): rustup runs that directory's `cargo` and `rustc` at the user's next build (the
/// forty-fourth re-attack's Q8).
pub fn names_a_toolchain_path(line: &str) -> bool {
    // A quoted key's escapes read as TOML reads them (`"p\u0061th"` is `path`: the forty-fifth
    // re-attack's R2).
    let line = toml_unescaped(line);
    let line = line.split('#').next().unwrap_or_default();
    line.match_indices("path").any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + 4..].trim_start_matches([' ', '\t', '"', '\'']);
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-') && after.starts_with('=')
    })
}

/// `line` with TOML's `\uXXXX` and `\UXXXXXXXX` escapes read as the characters they name.
fn toml_unescaped(line: &str) -> String {
    let mut read = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('\\') {
        read.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = match after.chars().next() {
            Some('u') => 4,
            Some('U') => 8,
            _ => 0,
        };
        let named = after.get(1..1 + digits).and_then(|hex| u32::from_str_radix(hex, 16).ok()).and_then(char::from_u32);
        match named {
            Some(character) if digits > 0 => {
                read.push(character);
                rest = &after[1 + digits..];
            }
            _ => {
                read.push('\\');
                rest = after;
            }
        }
    }
    read.push_str(rest);
    read
}

/// The line test of a version file: rustup's toolchain files name a directory by `path`, mise's
/// and asdf's by a `path:` version.
fn runs_from_a_directory(file: &Path) -> fn(&str) -> bool {
    let rustup = file.file_name().is_some_and(|name| name == "rust-toolchain.toml" || name == "rust-toolchain");
    if rustup { names_a_toolchain_path } else { runs_a_local_tool }
}

/// What a version file runs from a directory of its own naming: its lines that do
/// ([`runs_a_local_tool`], [`names_a_toolchain_path`]), or a `package.json`'s strings that do ([`json_strings`]: mise reads
/// a tool's version from `devEngines`, `packageManager` and more, the forty-third re-attack's
/// P1; any string of the file is looked at).
pub fn local_tools(file: &Path) -> Vec<String> {
    if !is_package_json(file) {
        return lines_that_run(file, runs_from_a_directory(file));
    }
    let Ok(bytes) = super::git::read_capped(file, true, MAX_TAKE_OUT_BYTES) else { return Vec::new() };
    json_strings(&bytes).into_iter().map(|(_, text)| text).filter(|text| runs_a_local_tool(text)).collect()
}

/// Takes out of the version file `file` the tools it runs from a directory that are not among
/// `known` (those at launch): [`take_out_lines`], or for a `package.json` (JSON has no comment to
/// leave a line as) each string naming one emptied (`""`), every other byte as it was; the file
/// as it was kept in `quarantine` as `kept_as` first.
pub fn take_out_local_tools(file: &Path, known: &[String], quarantine: &Path, kept_as: &str) -> Option<TakenOut> {
    let too_large = || std::fs::metadata(file).is_ok_and(|metadata| metadata.len() > MAX_TAKE_OUT_BYTES);
    if !is_package_json(file) || too_large() {
        return take_out_lines(file, runs_from_a_directory(file), known, quarantine, kept_as);
    }
    let bytes = super::git::read_capped(file, true, MAX_TAKE_OUT_BYTES).ok()?;
    let added: Vec<(std::ops::Range<usize>, String)> =
        json_strings(&bytes).into_iter().filter(|(_, text)| runs_a_local_tool(text) && !known.contains(text)).collect();
    if added.is_empty() {
        return None;
    }
    let mut without = Vec::with_capacity(bytes.len());
    let mut at = 0;
    for (span, _) in &added {
        without.extend_from_slice(&bytes[at..span.start + 1]);
        without.push(bytes[span.start]);
        at = span.end;
    }
    without.extend_from_slice(&bytes[at..]);
    let kept = kept_in(quarantine, kept_as, &bytes);
    written_back(file, &without)?;
    Some(TakenOut { file: file.to_path_buf(), taken: added.into_iter().map(|(_, text)| text).collect(), kept })
}

/// The string literals of a JSON text, each as its span (its quotes included) and its text
/// decoded as JSON decodes it: read token by token whatever the rest of the text is, so that a
/// file a strict parser refuses and mise still reads (a byte-order mark, a number past a
/// double's range, a lone surrogate, nesting 129 deep: the forty-third re-attack's P2) is looked
/// through all the same. Comments are skipped and single-quoted strings read, as JSON5 and JSONC
/// parsers take them, so that no parser's strings lie outside what is read here.
fn json_strings(bytes: &[u8]) -> Vec<(std::ops::Range<usize>, String)> {
    let mut strings = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            quote @ (b'"' | b'\'') => {
                let start = at;
                let mut decoded = Vec::new();
                at += 1;
                while at < bytes.len() && bytes[at] != quote {
                    if bytes[at] == b'\\' && at + 1 < bytes.len() {
                        at += 1;
                        let escaped = match bytes[at] {
                            b'b' => "\u{8}".to_string(),
                            b'f' => "\u{c}".to_string(),
                            b'n' => "\n".to_string(),
                            b'r' => "\r".to_string(),
                            b't' => "\t".to_string(),
                            b'u' => {
                                let (character, used) = unicode_escape(&bytes[at + 1..]);
                                at += used;
                                character.to_string()
                            }
                            other => {
                                decoded.push(other);
                                at += 1;
                                continue;
                            }
                        };
                        decoded.extend_from_slice(escaped.as_bytes());
                        at += 1;
                        continue;
                    }
                    decoded.push(bytes[at]);
                    at += 1;
                }
                at = (at + 1).min(bytes.len());
                strings.push((start..at, String::from_utf8_lossy(&decoded).into_owned()));
            }
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = bytes[at..].iter().position(|&byte| byte == b'\n').map_or(bytes.len(), |end| at + end);
            }
            b'/' if bytes.get(at + 1) == Some(&b'*') => {
                let rest = &bytes[at + 2..];
                at = rest.windows(2).position(|pair| pair == b"*/").map_or(bytes.len(), |end| at + 2 + end + 2);
            }
            _ => at += 1,
        }
    }
    strings
}

/// The character of a `\uXXXX` escape whose hex digits begin `after` (a surrogate pair read as
/// one, a lone surrogate or a short escape as U+FFFD), and how many bytes it used.
fn unicode_escape(after: &[u8]) -> (char, usize) {
    let hex = |digits: &[u8]| -> Option<u32> {
        let digits = std::str::from_utf8(digits.get(..4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let Some(first) = hex(after) else { return (char::REPLACEMENT_CHARACTER, 0) };
    if (0xd800..0xdc00).contains(&first)
        && after.get(4..6) == Some(b"\\u")
        && let Some(second) = hex(&after[6..]).filter(|second| (0xdc00..0xe000).contains(second))
    {
        let combined = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
        return (char::from_u32(combined).unwrap_or(char::REPLACEMENT_CHARACTER), 10);
    }
    (char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER), 4)
}

/// A file the agent reads as a copy without credentials: the file, its copy, and how to write one.
pub type Withheld = (PathBuf, PathBuf, super::withheld_config::Format);

impl BindWatch {
    /// Starts watching `read_only` (files bound read-only) and `withheld` for replacement; `helper`
    /// is this executable, `pid` the confinement helper's once it runs (0 before).
    /// A git config among them that gains what is not known to be harmless when it is replaced has that taken
    /// out again (into `quarantine`, [`TakenOut`]).
    pub fn start(
        read_only: Vec<PathBuf>,
        withheld: Vec<Withheld>,
        helper: PathBuf,
        pid: Arc<std::sync::atomic::AtomicI32>,
        quarantine: PathBuf,
    ) -> BindWatch {
        let take_outs = Arc::new(Mutex::new(TakeOuts { quarantine, ..TakeOuts::default() }));
        let files: Vec<PathBuf> = read_only.iter().chain(withheld.iter().map(|(file, _, _)| file)).cloned().collect();
        if files.is_empty() {
            return BindWatch { task: None, take_outs };
        }
        let Ok(inotify) = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK) else {
            return BindWatch { task: None, take_outs };
        };
        // The git configs among them, with what in each is not known to be harmless now, before the
        // agent runs.
        let is_git_config = |file: &PathBuf| {
            let named = file.file_name().is_some_and(|name| name == "config" || name == "config.worktree");
            (named && file.is_file())
                || withheld
                    .iter()
                    .any(|(withheld, _, format)| withheld == file && *format == super::withheld_config::Format::Git)
        };
        let armed =
            files.iter().filter(|file| is_git_config(file)).filter_map(|file| Some((file.clone(), suspect_in(file)?)));
        take_outs.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).armed = armed.collect();
        let watched = take_outs.clone();
        let mut names: HashMap<WatchDescriptor, Vec<(OsString, PathBuf)>> = HashMap::new();
        for file in &files {
            let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else { continue };
            if let Ok(wd) = inotify.add_watch(dir, AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_CREATE) {
                names.entry(wd).or_default().push((name.to_os_string(), file.clone()));
            }
        }
        let task = tokio::spawn(async move {
            // SAFETY: `Events` owns the descriptor and keeps it open until the `AsyncFd` is dropped.
            let Ok(inotify) = (unsafe { AsyncFd::register_with_interest(Events(inotify), Interest::READABLE) }) else {
                return;
            };
            while let Some(events) = next_events(&inotify).await {
                let mut replaced: Vec<PathBuf> = Vec::new();
                // Events were lost (an agent flooding the directory: the twenty-ninth re-attack's
                // A4): any file may have been replaced, so every one is bound again.
                if events.iter().any(|event| event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW)) {
                    replaced.clone_from(&files);
                }
                for event in &events {
                    let Some(watched) = names.get(&event.wd) else { continue };
                    for (name, file) in watched {
                        if event.name.as_ref() == Some(name) && !replaced.contains(file) {
                            replaced.push(file.clone());
                        }
                    }
                }
                let target = pid.load(std::sync::atomic::Ordering::SeqCst);
                if replaced.is_empty() || target <= 0 {
                    continue;
                }
                let mut args: Vec<OsString> = vec![super::confine::REBIND.into(), target.to_string().into()];
                for file in &replaced {
                    // The copy without the credentials the new content holds (itself read-only),
                    // else the file bound read-only again: one mount, so there is no moment in
                    // which the file's own content shows under a read-only bind.
                    let copy = withheld
                        .iter()
                        .find(|(withheld, _, _)| withheld == file)
                        .filter(|(_, copy, format)| super::withheld_config::copy_again(file, copy, *format));
                    if let Some((_, copy, _)) = copy {
                        args.extend([
                            "--substitute".into(),
                            file.clone().into_os_string(),
                            copy.clone().into_os_string(),
                        ]);
                    } else if read_only.contains(file) {
                        args.extend(["--read-only".into(), file.clone().into_os_string()]);
                    }
                }
                watched
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .pending
                    .extend(replaced.iter().cloned());
                let helper = helper.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    let ran = std::process::Command::new(&helper).args(&args).status();
                    if !ran.is_ok_and(|status| status.success()) {
                        log_line!(
                            "aileron: warning: a file replaced while the agent runs could not be protected again"
                        );
                    }
                })
                .await;
                // Bound again: what the file holds now is no longer the agent's to change. What it
                // wrote in the moment before is taken out (W1).
                let mut take_outs = watched.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                for file in &replaced {
                    take_outs.look(file);
                }
            }
        });
        BindWatch { task: Some(task), take_outs }
    }

    /// Stops watching (the agent has exited); what was taken out of a git config meanwhile, those
    /// replaced but not looked at yet (the agent exited first) looked at now.
    pub async fn finish(mut self) -> Vec<TakenOut> {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        let mut take_outs = self.take_outs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let pending: Vec<PathBuf> = take_outs.pending.iter().cloned().collect();
        for file in pending {
            take_outs.look(&file);
        }
        std::mem::take(&mut take_outs.done)
    }
}

/// The next batch of events, when the instance has some (`None`: it can no longer be read).
async fn next_events(inotify: &AsyncFd<Events>) -> Option<Vec<nix::sys::inotify::InotifyEvent>> {
    loop {
        let mut ready = inotify.readable().await.ok()?;
        match inotify.get_ref().0.read_events() {
            Ok(events) => return Some(events),
            Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
            Err(_) => return None,
        }
    }
}

/// The inotify instance, as the reactor registers it.
struct Events(Inotify);

impl std::os::fd::AsRawFd for Events {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsFd::as_fd(&self.0).as_raw_fd()
    }
}

/// What an inotify instance watches: each watched path's directory, for names created or moved
/// in (which names matter in each), and, where that directory is missing, the nearest one above
/// it that exists, so the watch follows as the directories are made.
#[derive(Default)]
struct Armed {
    names: HashMap<WatchDescriptor, Vec<OsString>>,
    ancestors: HashSet<WatchDescriptor>,
}

impl Armed {
    /// Adds what is not watched yet (adding a directory again keeps its descriptor). A watch
    /// that cannot be added (inotify's limits) leaves that path to the looks at each event and
    /// at the end.
    fn arm(&mut self, inotify: &Inotify, watched: &[PathBuf]) {
        // Removals too: a kept link deleted or renamed away is put back.
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_ONLYDIR;
        for path in watched {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { continue };
            if let Ok(wd) = inotify.add_watch(dir, flags) {
                let names = self.names.entry(wd).or_default();
                if !names.iter().any(|known| known == name) {
                    names.push(name.to_os_string());
                }
                continue;
            }
            let nearest = dir.ancestors().skip(1).find(|ancestor| ancestor.is_dir());
            if let Some(wd) = nearest.and_then(|ancestor| inotify.add_watch(ancestor, flags).ok()) {
                self.ancestors.insert(wd);
            }
        }
    }
}

/// Moves every watched path that exists into `quarantine`, and what replaced a kept link, putting
/// the link back; one look at a time (the watch's and the end's never race for a file).
fn sweep(watched: &[PathBuf], kept: &[(PathBuf, PathBuf)], quarantine: &Path, moved: &Mutex<Vec<Moved>>) {
    let mut moved = moved.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    move_all(watched, kept, quarantine, &mut moved);
    for (link, said) in kept {
        if std::fs::read_link(link).ok().as_ref() == Some(said) {
            continue;
        }
        let outcome = put_back(link, said, quarantine, moved.len() + 1);
        moved.push(Moved { path: link.clone(), outcome, link_put_back: true });
    }
}

/// Puts the link `link` (saying `said`) back: what is there in its place is moved into
/// `quarantine` first (as `<n>-<name>`). Done from the link's directory opened without following
/// links, as [`move_aside`] is.
fn put_back(link: &Path, said: &Path, quarantine: &Path, n: usize) -> Result<Option<PathBuf>, String> {
    let (Some(parent), Some(name)) = (link.parent(), link.file_name()) else { return Err("no name".to_string()) };
    let mut kept = None;
    if std::fs::symlink_metadata(link).is_ok() {
        let into = quarantine.join(format!("{n}-{}", name.to_string_lossy()));
        kept = move_aside(link, quarantine, &into).map_err(|error| error.to_string())?;
    }
    let dir = open_without_links(parent).map_err(|error| error.to_string())?;
    reclaiming(&dir, || Ok(nix::unistd::symlinkat(said, &dir, name)?))
        .map_err(|error| format!("the link could not be put back ({error})"))?;
    Ok(kept)
}

/// Moves each of `paths` that exists into `quarantine`, adding it to `moved`. A path reached
/// through a link on the way that is not one of the `kept` links (which were there at launch) has
/// that link moved instead: the agent made it, to a directory holding the file (the seventh
/// re-attack: a missing include's directory made a link, which left the include live).
pub fn move_all(paths: &[PathBuf], kept: &[(PathBuf, PathBuf)], quarantine: &Path, moved: &mut Vec<Moved>) {
    let mut done = std::collections::HashSet::new();
    for path in paths.iter().filter(|path| std::fs::symlink_metadata(path).is_ok()) {
        let on_the_way = path
            .ancestors()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .find(|dir| std::fs::symlink_metadata(dir).is_ok_and(|metadata| metadata.is_symlink()));
        let moving = match on_the_way {
            Some(link) if !kept.iter().any(|(kept, _)| kept == link) => link.to_path_buf(),
            _ => path.clone(),
        };
        if !done.insert(moving.clone()) {
            continue;
        }
        let name = moving.file_name().unwrap_or_default().to_string_lossy();
        let into = quarantine.join(format!("{}-{name}", moved.len() + 1));
        let outcome = move_aside(&moving, quarantine, &into).map_err(|error| error.to_string());
        moved.push(Moved { path: moving, outcome, link_put_back: false });
    }
}

/// Renames `path` to `kept`; across filesystems a regular file's bytes (a link's target) are
/// copied there and the original removed. Something that cannot be kept is removed all the same.
///
/// Never through a link on the way: a directory the agent made a link (to `~/.ssh`) would have
/// the launcher, which is the user, move the user's own files (the fifth re-attack). So `path`'s
/// directory is opened one step at a time without following a link, and every change is made
/// relative to that descriptor: a directory swapped for a link after the look changes nothing
/// (the look-then-rename race of the sixth).
fn move_aside(path: &Path, quarantine: &Path, kept: &Path) -> std::io::Result<Option<PathBuf>> {
    use nix::fcntl::AtFlags;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other("not a file in a directory"));
    };
    let (Some(quarantine_name), Some(kept_name)) = (kept.parent(), kept.file_name()) else {
        return Err(std::io::Error::other("no place to keep it"));
    };
    crate::platform::home::create_private_dir(quarantine)?;
    let dir = open_without_links(parent)?;
    // The quarantine is the launcher's own (in the Aileron home, which the agent cannot see).
    let keep = nix::fcntl::open(
        quarantine_name,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    match reclaiming(&dir, || Ok(nix::fcntl::renameat(&dir, name, &keep, kept_name)?)) {
        Ok(()) => return Ok(Some(kept.to_path_buf())),
        Err(error) if error.raw_os_error() != Some(libc::EXDEV) => return Err(error),
        Err(_) => {}
    }
    let kind = nix::sys::stat::fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?.st_mode & libc::S_IFMT;
    let at = fd_path(&dir).join(name);
    let bytes = if kind == libc::S_IFLNK {
        nix::fcntl::readlinkat(&dir, name).ok().map(|target| target.into_encoded_bytes())
    } else {
        super::git::read_capped(&at, false, MAX_KEPT_BYTES).ok()
    };
    let kept_as = bytes
        .and_then(|bytes| crate::platform::home::write_atomic(kept, &bytes, 0o600).ok())
        .map(|()| kept.to_path_buf());
    reclaiming(&dir, || match kind {
        // The descriptor's path, then a name std's removal opens without following a link.
        libc::S_IFDIR => std::fs::remove_dir_all(&at),
        _ => Ok(nix::unistd::unlinkat(&dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir)?),
    })?;
    Ok(kept_as)
}

/// At most this much of a planted file is kept (git's `commondir` and config files are small).
/// Read without following a link and without waiting: the agent can swap a FIFO (or a device)
/// in after the launcher looked, and a read of it would block the watch and the launcher's end
/// for good (the re-attack of 2026-12-05, F2).
const MAX_KEPT_BYTES: u64 = 1024 * 1024;

/// `dir` (absolute), opened one component at a time from `/`, refusing a component that is a
/// link (or `..`). A directory of the user's that the agent took the search bit from
/// (`chmod 0600 .git`) is given it back on the way.
fn open_without_links(dir: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    use std::path::Component;
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mode = nix::sys::stat::Mode::empty();
    let mut at = nix::fcntl::open("/", flags, mode)?;
    for component in dir.components() {
        let name = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(name) => name,
            Component::ParentDir | Component::Prefix(_) => {
                return Err(std::io::Error::other(format!("{} is not a plain absolute path", dir.display())));
            }
        };
        let open = |at: &OwnedFd| nix::fcntl::openat(at, name, flags, mode);
        let next = match open(&at) {
            Err(nix::errno::Errno::EACCES) if give_back(&at, 0o100) => open(&at),
            opened => opened,
        };
        at = next.map_err(|errno| match errno {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => std::io::Error::other(format!(
                "it is reached through a link ({} is not a directory), so it was left where it is",
                dir.display()
            )),
            errno => errno.into(),
        })?;
    }
    Ok(at)
}

/// `change` (a rename or removal in `dir`), once more after giving the user back the write and
/// search bits the agent took from `dir` (`chmod 0500 .git` made every move fail: the re-attack of
/// 2026-12-05, F1).
fn reclaiming(dir: &OwnedFd, change: impl Fn() -> std::io::Result<()>) -> std::io::Result<()> {
    match change() {
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied && give_back(dir, 0o300) => change(),
        done => done,
    }
}

/// Adds `bits` to the mode of the directory `dir` when it is the user's own and lacks some of
/// them (the launcher is the user, and only the user's own directories are touched); whether it
/// did.
fn give_back(dir: &OwnedFd, bits: u32) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(stat) = nix::sys::stat::fstat(dir) else { return false };
    let mode = stat.st_mode & 0o7777;
    if stat.st_uid != nix::unistd::geteuid().as_raw() || mode & bits == bits {
        return false;
    }
    std::fs::set_permissions(fd_path(dir), std::fs::Permissions::from_mode(mode | bits)).is_ok()
}

/// The path of an open descriptor (`/proc/self/fd/N`): the kernel resolves it to that very
/// directory, whatever has been renamed or swapped since it was opened.
fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::time::Duration;

    use super::*;

    /// The fifty-first re-attack's Y4 and Y5: a `.gitignore` no index tracks shows none of its
    /// changes. Any pattern the agent adds is taken out (`conftest.py`, which hid a new test in a
    /// tracked directory; a second `*` after the user's negations); the file is put back as it was
    /// when a pattern of the user's was taken out or moved (the negations deleted); a comment
    /// added, or nothing changed, leaves it be.
    #[test]
    fn an_untracked_gitignore_shows_nothing_the_agent_did_to_it() {
        let temp = tempfile::tempdir().unwrap();
        let (file, quarantine) = (temp.path().join(".gitignore"), temp.path().join("quarantine"));
        let whitelist = "# only the sources\n*\n!.gitignore\n!*.js\n";
        let known = lines_that_run_in(whitelist);
        let take = |text: &str, n: usize| {
            std::fs::write(&file, text).unwrap();
            let taken = AddedLines::UntrackedIgnore.take_out(&file, &known, Some(whitelist.as_bytes()), &quarantine, n);
            (taken.map(|taken| taken.taken), std::fs::read_to_string(&file).unwrap())
        };
        let added = format!("{whitelist}conftest.py\n*\n");
        let (taken, now) = take(&added, 0);
        assert_eq!(taken.unwrap(), ["conftest.py", "*"]);
        let commented = format!("{whitelist}{0}conftest.py\n{0}*\n", crate::surfaces::launch::git::TAKEN_OUT);
        assert_eq!(now, commented);
        for (n, changed) in [
            "# only the sources\n*\n",
            "*\n!*.js\n!.gitignore\n",
            "!.gitignore\n!*.js\n*\nx\n",
            "# only the sources\n*\n!.gitignore\n!*.js\r\r\n",
        ]
        .into_iter()
        .enumerate()
        {
            let (taken, now) = take(changed, n + 1);
            assert_eq!(taken.unwrap()[0], PUT_BACK, "{changed:?}");
            assert_eq!(now, whitelist, "{changed:?}");
            let kept = std::fs::read_to_string(quarantine.join(format!("{}-gitignore-untracked", n + 1))).unwrap();
            assert_eq!(kept, changed, "the agent's version kept");
        }
        for unchanged in [whitelist.to_string(), format!("{whitelist}# a note\n\n")] {
            let (taken, now) = take(&unchanged, 9);
            assert_eq!(taken, None, "{unchanged:?}");
            assert_eq!(now, unchanged);
        }
        // Without the bytes of launch (a file too large to keep), added patterns are taken out.
        std::fs::write(&file, "# only the sources\n*\n").unwrap();
        assert_eq!(AddedLines::UntrackedIgnore.take_out(&file, &known, None, &quarantine, 10), None);
    }

    /// A small file put back whole: one made is moved aside, one changed or replaced by a link
    /// written back as it was, one as it was left; one that is not a small file at launch is not
    /// kept to put back.
    #[test]
    fn a_file_is_put_back_as_it_was() {
        let temp = tempfile::tempdir().unwrap();
        let (file, quarantine) = (temp.path().join("alternates"), temp.path().join("quarantine"));
        let at_launch = file_as_it_is(&file).unwrap();
        assert_eq!(put_back_whole(&file, at_launch.as_deref(), &quarantine), None);
        std::fs::write(&file, "g\n").unwrap();
        let taken = put_back_whole(&file, at_launch.as_deref(), &quarantine).unwrap();
        assert!(!file.exists());
        assert_eq!(std::fs::read_to_string(taken.kept.unwrap()).unwrap(), "g\n");
        std::fs::write(&file, "/users/own\n").unwrap();
        let at_launch = file_as_it_is(&file).unwrap();
        assert_eq!(put_back_whole(&file, at_launch.as_deref(), &quarantine), None);
        std::fs::write(&file, "/users/own\ng\n").unwrap();
        assert!(put_back_whole(&file, at_launch.as_deref(), &quarantine).is_some());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "/users/own\n");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("elsewhere", &file).unwrap();
        assert!(put_back_whole(&file, at_launch.as_deref(), &quarantine).is_some());
        assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "/users/own\n");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("elsewhere", &file).unwrap();
        assert_eq!(file_as_it_is(&file), Err(()));
    }

    fn lines_that_run_in(text: &str) -> Vec<String> {
        text.lines().filter(|line| crate::surfaces::launch::git::is_a_pattern(line)).map(str::to_string).collect()
    }

    /// The forty-first re-attack's M1 and M2: a version file whose added `path:` line lies past
    /// 4 MiB of padding, or that was made a link to a file of the agent's, read as mise reads it
    /// (whole, through the link): the line is taken out (the link replaced by the file written
    /// back); `vpath:` and `ruby-path:` too (M4). One past what is read is taken out whole.
    #[test]
    fn a_toolchain_named_by_its_directory_is_told() {
        for names in [
            "path = \"/x\"",
            "  path=\"x\"",
            "toolchain = { path = \"../t\" }",
            "\"path\" = \"x\"",
            "'path'='x'",
            // The forty-fifth re-attack's R2: the key spelled by escapes.
            "\"p\\u0061th\" = \"/x\"",
            "\"\\U00000070ath\" = \"/x\"",
            "toolchain.path = \"/x\"",
        ] {
            assert!(names_a_toolchain_path(names), "{names}");
        }
        for keeps in [
            "channel = \"stable\"",
            "# path = \"x\"",
            "components = [\"rust-src\"]",
            "xpath = 1",
            "path_x = 1",
            "paths",
        ] {
            assert!(!names_a_toolchain_path(keeps), "{keeps}");
        }
    }

    #[test]
    fn a_version_file_is_read_as_mise_reads_it() {
        let temp = tempfile::tempdir().unwrap();
        let (work, quarantine) = (temp.path().join("work"), temp.path().join("q"));
        std::fs::create_dir_all(&work).unwrap();
        let padded = work.join(".tool-versions");
        let mut text = "# padding\n".repeat(500_000);
        text.push_str("node path:./.cache/n\nruby-path:./x\n");
        std::fs::write(&padded, &text).unwrap();
        let taken = take_out_lines(&padded, runs_a_local_tool, &[], &quarantine, "0-tool-versions").unwrap();
        assert_eq!(taken.taken, ["node path:./.cache/n", "ruby-path:./x"]);
        assert!(
            std::fs::read_to_string(&padded)
                .unwrap()
                .ends_with("# aileron: written while an agent ran, taken out: ruby-path:./x\n")
        );
        let agents = work.join(".cache/tv");
        std::fs::create_dir_all(agents.parent().unwrap()).unwrap();
        std::fs::write(&agents, "nodejs 20\nnode vpath:./.cache/n\n").unwrap();
        std::fs::set_permissions(&agents, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
        let linked = work.join("svc/.node-version");
        std::fs::create_dir_all(linked.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&agents, &linked).unwrap();
        let taken = take_out_lines(&linked, runs_a_local_tool, &[], &quarantine, "1-tool-versions").unwrap();
        assert_eq!(taken.taken, ["node vpath:./.cache/n"]);
        assert!(!std::fs::symlink_metadata(&linked).unwrap().is_symlink(), "the link replaced by the file");
        // With the mode of the file it led to, not the link's 0777 (the forty-second re-attack's N9).
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&linked).unwrap().permissions().mode() & 0o7777, 0o640);
        // The user's own lines, read through the user's link at launch, stay.
        let users = work.join("users-versions");
        std::fs::write(&users, "python path:/opt/py\n").unwrap();
        let own = work.join("own/.tool-versions");
        std::fs::create_dir_all(own.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&users, &own).unwrap();
        let known = lines_that_run(&own, runs_a_local_tool);
        assert!(take_out_lines(&own, runs_a_local_tool, &known, &quarantine, "2-tool-versions").is_none());
        assert!(std::fs::symlink_metadata(&own).unwrap().is_symlink(), "left as it was");
        // Past what is read: taken out whole, kept in the quarantine.
        let huge = work.join("deep/.tool-versions");
        std::fs::create_dir_all(huge.parent().unwrap()).unwrap();
        let file = std::fs::File::create(&huge).unwrap();
        file.set_len(MAX_TAKE_OUT_BYTES + 1).unwrap();
        let taken = take_out_lines(&huge, runs_a_local_tool, &[], &quarantine, "3-tool-versions").unwrap();
        assert_eq!(std::fs::metadata(&huge).unwrap().len(), 0);
        assert_eq!(std::fs::metadata(taken.kept.unwrap()).unwrap().len(), MAX_TAKE_OUT_BYTES + 1);
    }

    /// Waits (at most 10 s) until `path` is gone; whether it went.
    async fn gone(path: &Path) -> bool {
        for _ in 0..400 {
            if std::fs::symlink_metadata(path).is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }

    /// R7 and K1: a second session whose look at a kept link differs from what a live session
    /// recorded (the first session's agent had swapped it) is told so; a dead launcher's record is
    /// removed and ignored; the record goes when the session ends.
    #[test]
    fn a_kept_link_that_differs_from_a_live_sessions_record_is_told() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("launch-links");
        let link = temp.path().join("repo/.git/hooks");
        let first = vec![(link.clone(), PathBuf::from("../githooks"))];
        let (record, notes) = LinkRecord::agree(&dir, &first);
        assert!(notes.is_empty() && record.is_some(), "{notes:?}");
        // A launcher gone (no such process): its record says otherwise, and is not taken.
        std::fs::write(
            dir.join("ses-dead"),
            format!("999999999 1\n{} {}\n", hex::encode(link.as_os_str().as_encoded_bytes()), hex::encode("../dead")),
        )
        .unwrap();
        let second = vec![(link.clone(), PathBuf::from("../evil"))];
        let (second_record, notes) = LinkRecord::agree(&dir, &second);
        assert!(notes.len() == 1 && notes[0].contains("../evil") && notes[0].contains("../githooks"), "{notes:?}");
        assert!(!dir.join("ses-dead").exists(), "a dead launcher's record is removed");
        record.unwrap().remove();
        if let Some(record) = second_record {
            record.remove();
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let alone = vec![(link.clone(), PathBuf::from("../mine"))];
        let (_, notes) = LinkRecord::agree(&dir, &alone);
        assert!(notes.is_empty(), "no live session: its own look");
    }

    /// A planted file, a link and a name renamed in are each moved aside while the watch runs,
    /// their bytes (a link's target) kept; a name not watched stays.
    #[tokio::test]
    async fn what_appears_is_moved_aside_as_it_appears() {
        let temp = tempfile::tempdir().unwrap();
        let git = temp.path().join(".git");
        std::fs::create_dir_all(&git).unwrap();
        let quarantine = temp.path().join("quarantine");
        let watch =
            PlantWatch::start(vec![git.join("commondir"), git.join("config.worktree")], vec![], quarantine.clone());
        std::fs::write(git.join("commondir"), "/elsewhere\n").unwrap();
        assert!(gone(&git.join("commondir")).await, "a planted commondir stayed");
        std::os::unix::fs::symlink("/elsewhere/config", git.join("config.worktree")).unwrap();
        assert!(gone(&git.join("config.worktree")).await, "a planted link stayed");
        std::fs::write(git.join("staged"), "/again\n").unwrap();
        std::fs::rename(git.join("staged"), git.join("commondir")).unwrap();
        assert!(gone(&git.join("commondir")).await, "a renamed-in commondir stayed");
        std::fs::write(git.join("index.lock"), "").unwrap();
        let moved = watch.finish().await;
        assert!(git.join("index.lock").exists(), "what is not watched is the agent's");
        assert_eq!(moved.len(), 3, "{moved:?}");
        let kept = |index: usize| moved[index].outcome.clone().unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(kept(0)).unwrap(), "/elsewhere\n");
        assert_eq!(std::fs::read_link(kept(1)).unwrap(), Path::new("/elsewhere/config"));
        assert_eq!(std::fs::read_to_string(kept(2)).unwrap(), "/again\n");
        assert!((0..moved.len()).all(|index| kept(index).starts_with(&quarantine)));
    }

    /// A link the user keeps (`.git/hooks -> ../githooks`) that the agent replaces with a
    /// directory of its own, or removes, is put back at once, and what it put there is kept in
    /// the quarantine (the seventh re-attack: the bind protected where the link led, not the link).
    #[tokio::test]
    async fn a_kept_link_replaced_or_removed_is_put_back() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::create_dir_all(root.join("githooks")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let link = root.join(".git/hooks");
        std::os::unix::fs::symlink("../githooks", &link).unwrap();
        let kept = vec![(link.clone(), PathBuf::from("../githooks"))];
        let watch = PlantWatch::start(vec![], kept, root.join("quarantine"));
        let is_back = |link: &Path| std::fs::read_link(link).ok() == Some(PathBuf::from("../githooks"));
        std::fs::remove_file(&link).unwrap();
        std::fs::create_dir(&link).unwrap();
        std::fs::write(link.join("pre-commit"), "#!/bin/sh\ntouch pwned\n").unwrap();
        let mut back = false;
        for _ in 0..400 {
            back = is_back(&link);
            if back {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(back, "the link was not put back");
        std::fs::remove_file(&link).unwrap();
        let moved = watch.finish().await;
        assert!(is_back(&link), "a removed link is put back at the end");
        assert!(moved.iter().all(|moved| moved.link_put_back && moved.outcome.is_ok()), "{moved:?}");
        assert!(moved.iter().any(|moved| moved.report("pi").contains("replaced your link")));
        assert!(!root.join("githooks/pre-commit").exists(), "nothing was written where the link leads");
    }

    /// A name the agent chose is printed with its control characters escaped: one holding
    /// terminal escapes wiped and concealed the warnings after it (the seventh re-attack).
    #[test]
    fn a_report_escapes_what_the_agent_named() {
        let path = PathBuf::from("/w/\r\u{1b}[2Kaileron: session ended\u{1b}[8m/.git/commondir");
        for link_put_back in [false, true] {
            let moved = Moved { path: path.clone(), outcome: Ok(None), link_put_back };
            let report = moved.report("claude");
            assert!(!report.chars().any(|c| c.is_control()), "{report:?}");
            assert!(report.contains("\\u{1b}[2K"), "{report}");
        }
    }

    /// Something planted before the watch began (a launch that was killed) is moved at the start;
    /// something planted in a directory made since the start is moved as it appears.
    #[tokio::test]
    async fn the_start_looks_and_the_watch_follows_new_directories() {
        let temp = tempfile::tempdir().unwrap();
        let git = temp.path().join(".git");
        std::fs::create_dir_all(&git).unwrap();
        std::fs::write(git.join("commondir"), "/before\n").unwrap();
        let later = temp.path().join("made-later/shared.gitconfig");
        let watch =
            PlantWatch::start(vec![git.join("commondir"), later.clone()], vec![], temp.path().join("quarantine"));
        assert!(!git.join("commondir").exists(), "moved at the start");
        std::fs::create_dir_all(later.parent().unwrap()).unwrap();
        std::fs::write(&later, "[core]\n").unwrap();
        assert!(gone(&later).await, "the watch follows a directory made since");
        let moved = watch.finish().await;
        assert_eq!(moved.iter().map(|moved| moved.path.clone()).collect::<Vec<_>>(), [git.join("commondir"), later]);
    }

    /// A flood of other names, past inotify's queue (16,384 events by default, after which the
    /// kernel drops events and says so), does not hide a planted one.
    #[tokio::test]
    async fn a_flood_of_other_files_does_not_hide_a_planted_one() {
        let temp = tempfile::tempdir().unwrap();
        let git = temp.path().join(".git");
        std::fs::create_dir_all(&git).unwrap();
        let watch = PlantWatch::start(vec![git.join("commondir")], vec![], temp.path().join("quarantine"));
        // On this one-threaded runtime the watch reads nothing until the flood is done: the
        // planted file's event comes after the queue is full, and only the overflow tells of it.
        for index in 0..17_000 {
            std::fs::File::create(git.join(format!("flood-{index}"))).unwrap();
        }
        std::fs::write(git.join("commondir"), "/elsewhere\n").unwrap();
        assert!(gone(&git.join("commondir")).await, "the planted file hid behind the flood");
        assert_eq!(watch.finish().await.len(), 1);
    }

    /// Across filesystems (the workspace on one, the home on another) a file is copied into the
    /// quarantine and removed.
    #[tokio::test]
    async fn across_filesystems_the_bytes_are_kept_and_the_file_removed() {
        let workspace = tempfile::tempdir().unwrap();
        let Ok(other) = tempfile::tempdir_in("/dev/shm") else { return };
        if std::fs::metadata(workspace.path()).unwrap().dev() == std::fs::metadata(other.path()).unwrap().dev() {
            return; // one filesystem here: the rename case is the test above
        }
        let planted = workspace.path().join("commondir");
        std::fs::write(&planted, "/elsewhere\n").unwrap();
        let kept = other.path().join("q/1-commondir");
        let outcome = move_aside(&planted, &other.path().join("q"), &kept).unwrap();
        assert_eq!(outcome.as_deref(), Some(kept.as_path()));
        assert!(!planted.exists());
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "/elsewhere\n");
        // A FIFO (swapped in after the look) is removed, not read: a read would never end.
        nix::unistd::mkfifo(&planted, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let outcome = move_aside(&planted, &other.path().join("q"), &other.path().join("q/2-commondir")).unwrap();
        assert_eq!(outcome, None, "nothing of a FIFO is kept");
        assert!(std::fs::symlink_metadata(&planted).is_err(), "the FIFO stayed");
    }

    /// A path reached through a link on the way (a directory the agent made a link to the
    /// user's `~/.ssh`) is left where it is: the launcher, the user, never acts through it.
    #[test]
    fn nothing_is_moved_through_a_link() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::create_dir_all(root.join("ssh")).unwrap();
        std::fs::write(root.join("ssh/id_ed25519"), "the user's key").unwrap();
        std::os::unix::fs::symlink(root.join("ssh"), root.join("hooks")).unwrap();
        let mut moved = Vec::new();
        move_all(
            &[root.join("hooks/id_ed25519")],
            &[(root.join("hooks"), root.join("ssh"))],
            &root.join("quarantine"),
            &mut moved,
        );
        assert_eq!(std::fs::read_to_string(root.join("ssh/id_ed25519")).unwrap(), "the user's key");
        assert!(moved[0].outcome.as_ref().is_err_and(|reason| reason.contains("link")), "{moved:?}");
    }

    /// A watched path under a directory missing at launch, which the agent makes a link to a
    /// directory of its own holding the file: the link is moved, so git no longer finds the file
    /// there, and the file where the link led stays (the seventh re-attack: the include stayed
    /// live, and the record said it was quarantined).
    #[test]
    fn a_link_the_agent_made_on_the_way_is_moved() {
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::create_dir_all(root.join("elsewhere")).unwrap();
        std::fs::write(root.join("elsewhere/git.inc"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::os::unix::fs::symlink("elsewhere", root.join("team")).unwrap();
        let mut moved = Vec::new();
        let watched = [root.join("team/git.inc"), root.join("team/other.inc")];
        std::fs::write(root.join("elsewhere/other.inc"), "").unwrap();
        move_all(&watched, &[], &root.join("quarantine"), &mut moved);
        assert!(std::fs::symlink_metadata(root.join("team")).is_err(), "the link stayed");
        assert_eq!(moved.len(), 1, "the link is moved once: {moved:?}");
        assert_eq!(moved[0].path, root.join("team"));
        assert!(moved[0].outcome.is_ok(), "{moved:?}");
        assert!(root.join("elsewhere/git.inc").exists(), "nothing is moved through the link");
    }

    /// The agent swaps a directory on the way for a link while the launcher moves a planted
    /// file (`renameat2(RENAME_EXCHANGE)` in a loop): the launcher, the user, never moves the
    /// file of that name the link leads to (the sixth re-attack's look-then-rename race).
    #[test]
    fn a_directory_swapped_for_a_link_mid_move_moves_nothing_of_the_users() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let temp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(temp.path()).unwrap();
        std::fs::create_dir_all(root.join("ssh")).unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::os::unix::fs::symlink(root.join("ssh"), root.join("link")).unwrap();
        let (git, link) = (root.join("repo/.git"), root.join("link"));
        let stop = Arc::new(AtomicBool::new(false));
        let swapper = std::thread::spawn({
            let (git, link, stop) = (git.clone(), link.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = nix::fcntl::renameat2(
                        nix::fcntl::AT_FDCWD,
                        &git,
                        nix::fcntl::AT_FDCWD,
                        &link,
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    );
                }
            }
        });
        let mut moved = Vec::new();
        let mut users_file_moved = 0;
        for _ in 0..3_000 {
            std::fs::write(root.join("ssh/commondir"), "the user's file").unwrap();
            let _ = std::fs::write(git.join("commondir"), "/elsewhere\n");
            move_all(&[git.join("commondir")], &[], &root.join("quarantine"), &mut moved);
            if !root.join("ssh/commondir").exists() {
                users_file_moved += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        assert_eq!(users_file_moved, 0, "the launcher moved the user's file through a swapped-in link");
        let kept = moved.iter().filter_map(|moved| moved.outcome.clone().ok().flatten());
        assert!(kept.count() > 0, "nothing planted was ever moved: the test did not race");
    }

    /// A directory the agent made read-only to its owner (`chmod 0500 .git`) does not keep a
    /// planted file in place: the launcher, the user, gives itself the bits back. (Run as root
    /// this holds without them: root ignores a directory's mode.)
    #[test]
    fn a_directory_made_read_only_does_not_keep_a_planted_file() {
        use std::os::unix::fs::PermissionsExt as _;
        let temp = tempfile::tempdir().unwrap();
        let git = temp.path().join(".git");
        std::fs::create_dir_all(&git).unwrap();
        std::fs::write(git.join("commondir"), "/elsewhere\n").unwrap();
        std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o500)).unwrap();
        let quarantine = temp.path().join("quarantine");
        let kept = quarantine.join("1-commondir");
        let outcome = move_aside(&git.join("commondir"), &quarantine, &kept).unwrap();
        assert_eq!(outcome.as_deref(), Some(kept.as_path()));
        assert!(!git.join("commondir").exists());
    }
}
