//! Containment of a launched agent on Linux (SPEC §13, docs/decisions/0013-launch-containment.md).
//!
//! `aileron launch` runs the agent through `aileron __confine [--mask DIR]... -- PROGRAM ARGS...`,
//! a helper that runs before any thread exists (a multithreaded process cannot enter a new user
//! namespace) and builds, with no privilege at all:
//!
//! - a user namespace mapping the user's own uid and gid to themselves (so agents that refuse to
//!   run as root still run, and files keep their owners);
//! - a mount namespace in which every `--mask` directory (the Aileron home, and the audit
//!   directory when it lives elsewhere) is covered by an empty private tmpfs: `daemon.json` and
//!   its daemon token, the vault, the journals, the audit log and every other session's files are
//!   not there. The agent's own wiring reaches it through its environment instead;
//! - an IPC namespace, with its own `/dev/shm` (a tmpfs) and `/dev/mqueue`: nothing the agent
//!   leaves in shared memory or a message queue reaches the user's other programs or outlives it;
//! - a PID namespace with its own `/proc`: no process outside the agent's tree is visible, so
//!   neither `/proc/<pid>/root` (the unmasked filesystem of any other process of the user) nor
//!   `/proc/<pid>/environ|mem|fd` of the launcher or the daemon can be reached, and when the
//!   agent exits every process it left behind is killed with the namespace.
//!
//! - a write allow-list (Landlock, see [`write_allow_list`]): the agent writes only beneath the
//!   `--writable` paths (its workspace, its own config and state directories, a private temp
//!   directory, what the user added with `--writable`); the rest of the filesystem is read-only
//!   to it, so nothing it leaves behind runs later as the user (`~/.bashrc`, `~/.local/bin`,
//!   autostart entries, systemd units). Inside the workspace each repository's `.git` is pinned
//!   (bound onto itself: it cannot be renamed or replaced) and its `hooks` and `config` are bound
//!   read-only (`--read-only`), so no hook, `core.hooksPath` or `core.fsmonitor` is planted for
//!   the user's next git command.
//!
//! The agent itself runs with an empty capability bounding set (it keeps none of the namespace's
//! capabilities, so it cannot unmount a mask even when the user is root) and a seccomp filter
//! that refuses `TIOCSTI` and `TIOCLINUX`, the ioctls that push keystrokes into the terminal's
//! input queue (text typed there runs in the user's shell once the agent exits).
//!
//! The network (SPEC §15, unless `--network=open`): a network namespace with only `lo`, on which
//! the helper listens at the session's two ports before anything else runs and hands both
//! listeners to the daemon (through the launcher, over an inherited Unix socket): the daemon
//! serves its API, `/mcp` and the gateway on one, the session's egress proxy on the other, and is
//! the only process holding them. Every other destination is unreachable, host loopback and the
//! host's abstract Unix sockets included. The user's credential stores and the host's listening
//! path Unix sockets (`--hide`) are covered: a directory by an empty tmpfs, a file by `/dev/null`.
//!
//! Processes: the helper (`P`, which stays in the launcher's PID namespace and forwards
//! signals), PID 1 of the new namespace (`C`, which mounts, then reaps and forwards), and the
//! agent (`A`, PID 2). `P` exits with `A`'s exit code. Nothing here is async: the helper never
//! builds a runtime.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

/// A launch's network namespace: which ports the daemon serves inside it, and the inherited
/// socket the listeners go out through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    /// A Unix stream socket the launcher keeps the other end of (absent in a probe).
    pub channel: Option<std::os::fd::RawFd>,
    /// The API, `/mcp` and the gateway.
    pub api_port: u16,
    /// The egress proxy.
    pub proxy_port: u16,
}

/// A directory covered but for what it keeps (`--cover DIR`, then its `--see PATH` and
/// `--link PATH TEXT`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cover {
    pub dir: PathBuf,
    /// Paths in `dir` (none inside another, none through a link) put back as they were at launch:
    /// writable where they were writable, read-only elsewhere.
    pub seen: Vec<PathBuf>,
    /// Links in `dir` on the way to what is seen (`~/.claude -> dotfiles/claude`), made again at
    /// their place: a link's path and what it says.
    pub links: Vec<(PathBuf, PathBuf)>,
}

/// The hidden subcommand `aileron launch` runs the agent through.
pub const SUBCOMMAND: &str = "__confine";
/// The exit code of a helper that could not build the containment (the agent never ran).
pub const SETUP_FAILED: i32 = 125;

/// What the helper was asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The read end of a pipe whose write end only the launcher holds: when it reads end of file
    /// the launcher is gone (killed with `kill -9`, say), and the helper ends the namespace, the
    /// agent with it, instead of leaving it running with nothing watching for planted files.
    pub lifeline: Option<std::os::fd::RawFd>,
    /// Directories to cover with an empty tmpfs.
    pub masks: Vec<PathBuf>,
    /// The agent's write allow-list (Landlock): everything else is read-only to it.
    pub writable: Vec<PathBuf>,
    /// Directories bound onto themselves, so they cannot be renamed or removed from under the
    /// read-only paths inside them (a repository's `.git`).
    pub pinned: Vec<PathBuf>,
    /// Files and directories bound read-only inside a writable tree (`.git/hooks`, `.git/config`).
    pub read_only: Vec<PathBuf>,
    /// The user's credential stores and the host's Unix sockets, hidden from the agent (SPEC §15):
    /// a directory is covered by an empty tmpfs, anything else by `/dev/null`.
    pub hidden: Vec<PathBuf>,
    /// Files the agent reads as another: a git config holding a credential (the file) and the copy
    /// without it, bound read-only over the file (`--substitute FILE COPY`, `withheld_config`).
    pub substitutes: Vec<(PathBuf, PathBuf)>,
    /// Directories covered by an empty read-only tmpfs into which only what each keeps is put
    /// back: the user's home as a read list (`home_view`), the launch directory with this
    /// session's own temp directory and files only.
    pub covers: Vec<Cover>,
    /// The agent's own network namespace (SPEC §15): `lo` only, and on it the two listeners the
    /// daemon serves for this session, made here and handed over through `channel`.
    pub network: Option<Network>,
    /// The session's trust bundle (the host's roots and the session CA), bound read-only over
    /// every system certificate bundle that exists. Written by the launcher once the daemon took
    /// the listeners, so it exists by the time the mounts are made.
    pub trust_bundle: Option<PathBuf>,
    /// `--allow-tcp`: the loopback addresses inside the namespace whose listeners the daemon
    /// relays to each allowed destination (handed over after the API's and the proxy's).
    pub forwards: Vec<std::net::SocketAddrV4>,
    /// A hosts file bound over `/etc/hosts` (the allowed hosts' names mapped to their addresses).
    pub hosts_file: Option<PathBuf>,
    /// Build everything, run nothing, exit 0: `aileron launch` asks this first, so a machine
    /// without namespaces or Landlock refuses before any session or config file exists.
    pub probe: bool,
    /// Whether a Ctrl-C at the terminal already reaches the agent (then it is not forwarded).
    pub interrupts_reach_agent: bool,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl Request {
    /// The helper's command line, for `aileron launch` to run (the inverse of [`parse`]).
    pub fn arguments(&self) -> Vec<OsString> {
        let mut line = vec![OsString::from(SUBCOMMAND)];
        for (flag, paths) in [
            ("--mask", &self.masks),
            ("--writable", &self.writable),
            ("--pin", &self.pinned),
            ("--read-only", &self.read_only),
            ("--hide", &self.hidden),
        ] {
            for path in paths {
                line.push(flag.into());
                line.push(path.clone().into_os_string());
            }
        }
        for cover in &self.covers {
            line.push("--cover".into());
            line.push(cover.dir.clone().into_os_string());
            for seen in &cover.seen {
                line.push("--see".into());
                line.push(seen.clone().into_os_string());
            }
            for (link, said) in &cover.links {
                line.push("--link".into());
                line.push(link.clone().into_os_string());
                line.push(said.clone().into_os_string());
            }
        }
        for (file, copy) in &self.substitutes {
            line.push("--substitute".into());
            line.push(file.clone().into_os_string());
            line.push(copy.clone().into_os_string());
        }
        if let Some(network) = &self.network {
            line.push("--network".into());
            line.push(format!("{}:{}", network.api_port, network.proxy_port).into());
            if let Some(channel) = network.channel {
                line.push("--channel".into());
                line.push(channel.to_string().into());
            }
        }
        if let Some(lifeline) = self.lifeline {
            line.push("--lifeline".into());
            line.push(lifeline.to_string().into());
        }
        if let Some(bundle) = &self.trust_bundle {
            line.push("--trust-bundle".into());
            line.push(bundle.clone().into_os_string());
        }
        for forward in &self.forwards {
            line.push("--forward".into());
            line.push(forward.to_string().into());
        }
        if let Some(hosts) = &self.hosts_file {
            line.push("--hosts".into());
            line.push(hosts.clone().into_os_string());
        }
        if self.probe {
            line.push("--probe".into());
        }
        if self.interrupts_reach_agent {
            line.push("--terminal-interrupts".into());
        }
        line.push("--".into());
        line.push(self.program.clone());
        line.extend(self.args.iter().cloned());
        line
    }
}

/// `__confine [--probe] [--terminal-interrupts] [--network API:PROXY [--channel FD]] [--mask DIR]...
/// [--writable PATH]... [--pin DIR]... [--read-only PATH]... [--hide PATH]... [--substitute FILE COPY]...
/// [--cover DIR [--see PATH]... [--link PATH TEXT]...]...
/// -- PROGRAM [ARGS...]`
/// (`PROGRAM` may be absent with `--probe`).
pub fn parse(args: &[OsString]) -> Result<Request, String> {
    let mut request = Request::default();
    let mut channel = None;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let list = match arg.to_str() {
            Some("--network") => {
                let ports = rest.next().and_then(|ports| ports.to_str()).unwrap_or_default();
                let parsed =
                    ports.split_once(':').and_then(|(api, proxy)| Some((api.parse().ok()?, proxy.parse().ok()?)));
                let (api_port, proxy_port) =
                    parsed.ok_or_else(|| format!("--network needs API:PROXY ports, got `{ports}`"))?;
                request.network = Some(Network { channel: None, api_port, proxy_port });
                continue;
            }
            Some("--forward") => {
                let address = rest.next().and_then(|address| address.to_str()).unwrap_or_default();
                let parsed: std::net::SocketAddrV4 =
                    address.parse().map_err(|_| format!("--forward needs a loopback ADDRESS:PORT, got `{address}`"))?;
                if !parsed.ip().is_loopback() {
                    return Err(format!("--forward {parsed} is not a loopback address"));
                }
                request.forwards.push(parsed);
                continue;
            }
            Some("--hosts") => {
                let path = PathBuf::from(rest.next().ok_or("--hosts needs a path")?);
                if !path.is_absolute() {
                    return Err(format!("--hosts {} is not an absolute path", path.display()));
                }
                request.hosts_file = Some(path);
                continue;
            }
            Some("--cover") => {
                let path = PathBuf::from(rest.next().ok_or("--cover needs a path")?);
                if !path.is_absolute() || path.parent().is_none() {
                    return Err(format!("--cover {} is not an absolute path below /", path.display()));
                }
                request.covers.push(Cover { dir: path, ..Cover::default() });
                continue;
            }
            Some(flag @ ("--see" | "--link")) => {
                let path = PathBuf::from(rest.next().ok_or_else(|| format!("{flag} needs a path"))?);
                let cover = request.covers.last_mut().ok_or_else(|| format!("{flag} before any --cover"))?;
                if !path.starts_with(&cover.dir) || path == cover.dir {
                    return Err(format!("{flag} {} is not a path in --cover {}", path.display(), cover.dir.display()));
                }
                if flag == "--see" {
                    cover.seen.push(path);
                } else {
                    let said = PathBuf::from(rest.next().ok_or("--link needs what the link says")?);
                    cover.links.push((path, said));
                }
                continue;
            }
            Some("--substitute") => {
                let file = PathBuf::from(rest.next().ok_or("--substitute needs a file and its copy")?);
                let copy = PathBuf::from(rest.next().ok_or("--substitute needs a file and its copy")?);
                if !file.is_absolute() || !copy.is_absolute() {
                    return Err(format!("--substitute {} {}: not absolute paths", file.display(), copy.display()));
                }
                request.substitutes.push((file, copy));
                continue;
            }
            Some("--trust-bundle") => {
                let path = PathBuf::from(rest.next().ok_or("--trust-bundle needs a path")?);
                if !path.is_absolute() {
                    return Err(format!("--trust-bundle {} is not an absolute path", path.display()));
                }
                request.trust_bundle = Some(path);
                continue;
            }
            Some("--channel") => {
                channel = Some(descriptor(rest.next(), "--channel")?);
                continue;
            }
            Some("--lifeline") => {
                request.lifeline = Some(descriptor(rest.next(), "--lifeline")?);
                continue;
            }
            Some("--probe") => {
                request.probe = true;
                continue;
            }
            Some("--terminal-interrupts") => {
                request.interrupts_reach_agent = true;
                continue;
            }
            Some("--mask") => &mut request.masks,
            Some("--writable") => &mut request.writable,
            Some("--pin") => &mut request.pinned,
            Some("--read-only") => &mut request.read_only,
            Some("--hide") => &mut request.hidden,
            Some("--") => {
                if let Some(program) = rest.next() {
                    request.program = program.clone();
                    request.args = rest.cloned().collect();
                }
                break;
            }
            _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
        };
        let path = PathBuf::from(rest.next().ok_or_else(|| format!("{} needs a path", arg.to_string_lossy()))?);
        if !path.is_absolute() {
            return Err(format!("{} {} is not an absolute path", arg.to_string_lossy(), path.display()));
        }
        list.push(path);
    }
    if request.program.is_empty() && !request.probe {
        return Err("no program to run after --".to_string());
    }
    match (&mut request.network, channel) {
        (Some(network), channel) => network.channel = channel,
        (None, Some(_)) => return Err("--channel without --network".to_string()),
        (None, None) => {}
    }
    if request.network.is_some_and(|network| network.channel.is_none()) && !request.probe {
        return Err("--network needs --channel (only a probe runs without one)".to_string());
    }
    Ok(request)
}

/// The descriptor number `flag` was given.
fn descriptor(value: Option<&OsString>, flag: &str) -> Result<std::os::fd::RawFd, String> {
    value.and_then(|fd| fd.to_str()?.parse().ok()).ok_or_else(|| format!("{flag} needs a descriptor number"))
}

/// The helper's entry point: must run before any other thread exists. Returns the exit code.
pub fn main(args: &[OsString]) -> i32 {
    let request = match parse(args) {
        Ok(request) => request,
        Err(problem) => {
            log_line!("aileron {SUBCOMMAND}: {problem}");
            return 2;
        }
    };
    match enter(&request) {
        Ok(code) => code,
        Err(reason) => {
            log_line!("aileron: cannot confine the agent: {reason}");
            SETUP_FAILED
        }
    }
}

/// The hidden subcommand the launcher runs to bind a protected file again inside a running
/// agent's namespaces (`__confine-rebind PID [--read-only FILE]... [--substitute FILE COPY]...`):
/// a tool of the user's that replaces a file by rename (`git config`, `sed -i`, an editor's
/// atomic save) takes every mount on the old entry away with it, in the agent's namespace too (the
/// twenty-eighth re-attack's W1: the agent then read the token and wrote a `core.fsmonitor`).
pub const REBIND: &str = "__confine-rebind";

/// [`REBIND`]'s entry point: must run while the process has one thread (`setns` into a user
/// namespace needs that). Each copy's content is read before joining, since the Aileron home it is
/// kept in is masked in there; then the helper's user and mount namespaces are joined (the user
/// owns them) and each file, opened there with no link followed, gets a read-only bind of itself,
/// or the copy attached from a tmpfs of its own.
pub fn rebind_main(args: &[OsString]) -> i32 {
    use crate::platform::confinement::{Target, attach_tree, detached_file, open_resolved, read_only_clone};
    let run = || -> Result<(), String> {
        let mut rest = args.iter();
        let pid: i32 = rest.next().and_then(|pid| pid.to_str()?.parse().ok()).ok_or("the helper's pid first")?;
        let (mut read_only, mut substitutes) = (Vec::new(), Vec::new());
        while let Some(flag) = rest.next() {
            let path = |value: Option<&OsString>| {
                value
                    .map(PathBuf::from)
                    .filter(|path| path.is_absolute())
                    .ok_or(format!("{flag:?} needs absolute paths"))
            };
            match flag.to_str() {
                Some("--read-only") => read_only.push(path(rest.next())?),
                Some("--substitute") => substitutes.push((path(rest.next())?, path(rest.next())?)),
                _ => return Err(format!("unexpected argument {flag:?}")),
            }
        }
        // Each copy's content, read here: the Aileron home it is kept in is masked in there, and a
        // mount of it taken here, in the user's own mount namespace, is refused to a process
        // without privilege (the twenty-ninth re-attack's A3: as root alone was the file bound).
        let mut copies = Vec::new();
        for (file, copy) in &substitutes {
            copies.push((file, read_copy(copy).map_err(|e| format!("reading the copy of {}: {e}", file.display()))?));
        }
        for (kind, flag) in [("user", CloneFlags::CLONE_NEWUSER), ("mnt", CloneFlags::CLONE_NEWNS)] {
            let namespace = std::fs::File::open(format!("/proc/{pid}/ns/{kind}"))
                .map_err(|e| format!("opening the agent's {kind} namespace: {e}"))?;
            nix::sched::setns(&namespace, flag).map_err(|e| format!("joining the agent's {kind} namespace: {e}"))?;
        }
        // Every file, whatever another's fails on; the failures said together. A read-only file
        // is its new self bound read-only; a copy is shown over what the host replaced.
        let mut failures = Vec::new();
        let mut attach = |target: Result<Option<std::os::fd::OwnedFd>, String>,
                          tree: &dyn Fn(&std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd>,
                          what: String| {
            let attached = target.and_then(|fd| {
                let Some(fd) = fd else { return Ok(()) };
                tree(&fd)
                    .and_then(|tree| attach_tree(&tree, Target::Descriptor(&fd)))
                    .map_err(|e| format!("{what}: {e}"))
            });
            failures.extend(attached.err());
        };
        for file in &read_only {
            attach(open_resolved(file), &read_only_clone, format!("binding {}", file.display()));
        }
        for (file, contents) in copies {
            let what = format!("showing {} without its credentials", file.display());
            attach(shown_over_what_was_replaced(file), &|_| detached_file(&contents), what);
        }
        if failures.is_empty() { Ok(()) } else { Err(failures.join("; ")) }
    };
    match run() {
        Ok(()) => 0,
        Err(reason) => {
            log_line!("aileron {REBIND}: {reason}");
            1
        }
    }
}

/// `file` in the agent's namespace, opened with no link followed, to attach a copy at
/// ([`rebind_main`]). Where it shows a file the host has replaced since (a clone the home's cover
/// put back has the old, deleted file as its root, onto which nothing can be mounted: the
/// thirtieth re-attack's B1 read the token of `~/.gitconfig` there after the user's `git config
/// --global`), the mounts showing it are taken off first, down to the cover's own entry.
fn shown_over_what_was_replaced(file: &std::path::Path) -> Result<Option<std::os::fd::OwnedFd>, String> {
    use crate::platform::confinement::open_resolved;
    use std::os::unix::fs::MetadataExt as _;
    for _ in 0..8 {
        let Some(fd) = open_resolved(file)? else { return Ok(None) };
        let deleted = std::fs::File::from(fd.try_clone().map_err(|e| e.to_string())?)
            .metadata()
            .is_ok_and(|metadata| metadata.nlink() == 0);
        if !deleted {
            return Ok(Some(fd));
        }
        nix::mount::umount2(file, nix::mount::MntFlags::MNT_DETACH | nix::mount::MntFlags::UMOUNT_NOFOLLOW)
            .map_err(|e| format!("taking the replaced {} out of sight: {e}", file.display()))?;
    }
    Err(format!("{} shows a replaced file under too many mounts", file.display()))
}

/// A copy's content ([`rebind_main`]), opened with no link followed; a config copy, so at most
/// 16 MiB.
fn read_copy(copy: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    let fd = crate::platform::confinement::open_path(None, copy, libc::O_RDONLY, resolve)
        .map_err(std::io::Error::from_raw_os_error)?;
    let mut contents = Vec::new();
    std::fs::File::from(fd).take(16 << 20).read_to_end(&mut contents)?;
    Ok(contents)
}

/// The process each forwarding handler signals (the child that stands for the agent).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let target = FORWARD_TO.load(Ordering::Relaxed);
    if target > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(target, signal) };
    }
}

/// SIGTERM and SIGHUP go to `target`; so do SIGINT and SIGQUIT unless the terminal already
/// delivers them to the agent (its process group is the terminal's foreground group), where a
/// forwarded copy would turn one Ctrl-C into two.
fn forward_signals_to(target: Pid, interrupts_reach_agent: bool) -> Result<(), String> {
    FORWARD_TO.store(target.as_raw(), Ordering::Relaxed);
    let mut forwarded = vec![Signal::SIGTERM, Signal::SIGHUP];
    let interrupts = [Signal::SIGINT, Signal::SIGQUIT];
    for interrupt in interrupts {
        if interrupts_reach_agent {
            // SAFETY: installs SIG_IGN, no handler code runs.
            unsafe { signal(interrupt, SigHandler::SigIgn) }.map_err(|e| format!("ignoring {interrupt}: {e}"))?;
        } else {
            forwarded.push(interrupt);
        }
    }
    for signal_kind in forwarded {
        // SAFETY: `forward` only reads an atomic and calls kill(2), both async-signal-safe.
        unsafe { signal(signal_kind, SigHandler::Handler(forward)) }
            .map_err(|e| format!("forwarding {signal_kind}: {e}"))?;
    }
    Ok(())
}

/// [`wait_for`] `child` while watching the lifeline ([`Request::lifeline`]): the launcher never
/// writes to it, so it turns readable (end of file) only when the launcher's end is gone, and
/// then the namespace's first process is killed, which ends every process of the agent's (the
/// re-attack of 2026-12-05, F9). One `poll` on the lifeline and the child's pidfd: this process
/// cannot start a thread (it has unshared its PID namespace: the kernel refuses `CLONE_THREAD`).
fn wait_for_unless_the_launcher_goes(child: Pid, lifeline: std::os::fd::RawFd) -> i32 {
    use std::os::fd::AsRawFd as _;
    let Ok(pidfd) = crate::platform::process::pidfd(child.as_raw()) else {
        log_line!("aileron: warning: the agent is not ended with its launcher (no pidfd on this kernel)");
        return wait_for(child);
    };
    loop {
        let mut watched = [
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: lifeline, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: two initialised `pollfd`s, their count, no timeout.
        let ready = unsafe { libc::poll(watched.as_mut_ptr(), 2, -1) };
        if ready < 0 && nix::errno::Errno::last() == nix::errno::Errno::EINTR {
            continue;
        }
        if ready > 0 && watched[0].revents == 0 && watched[1].revents != 0 {
            let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
        }
        break;
    }
    wait_for(child)
}

/// Waits for `child`, retrying when a forwarded signal interrupts the wait; its exit code.
fn wait_for(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, signal, _)) => return 128 + signal as i32,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return SETUP_FAILED,
        }
    }
}

fn enter(request: &Request) -> Result<i32, String> {
    if let Some(lifeline) = request.lifeline {
        // Not passed on to the agent: its exec closes it.
        // SAFETY: the launcher passed this descriptor for the helper alone.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(lifeline) };
        nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))
            .map_err(|e| format!("keeping the lifeline from the agent: {e}"))?;
    }
    // IPC: System V IPC and POSIX message queues of the agent's own, not the user's other programs'.
    let mut namespaces =
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWIPC;
    if request.network.is_some() {
        namespaces |= CloneFlags::CLONE_NEWNET;
    }
    crate::platform::confinement::enter_namespaces(namespaces)?;
    if let Some(network) = &request.network {
        crate::platform::confinement::loopback_up()?;
        if let Some(channel) = network.channel {
            hand_over_listeners(channel, network, &request.forwards)?;
        }
    }
    // SAFETY: this process is single-threaded (the helper runs before anything starts a thread).
    match unsafe { fork() }.map_err(|e| format!("starting the namespace's first process: {e}"))? {
        ForkResult::Child => {
            // Killed with the helper, whatever kills it: the whole namespace, the agent with it,
            // ends then (the helper is the launcher's, and the launcher then ends the session).
            // SAFETY: a plain prctl on this process.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) };
            let code = match init(request) {
                Ok(code) => code,
                Err(reason) => {
                    log_line!("aileron: cannot confine the agent: {reason}");
                    SETUP_FAILED
                }
            };
            // SAFETY: ends this process without running the parent's atexit handlers twice.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            forward_signals_to(child, request.interrupts_reach_agent)?;
            Ok(match request.lifeline {
                Some(lifeline) => wait_for_unless_the_launcher_goes(child, lifeline),
                None => wait_for(child),
            })
        }
    }
}

/// Listens on the namespace's loopback at the session's two ports and sends both listeners out
/// through `channel` (to the launcher, which hands them to the daemon); waits for the one-byte
/// answer that the daemon serves them. Nothing of them stays in this process: the daemon's copies
/// are the only ones, so the agent can neither take a port over nor accept on it.
fn hand_over_listeners(
    channel: std::os::fd::RawFd,
    network: &Network,
    forwards: &[std::net::SocketAddrV4],
) -> Result<(), String> {
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: the launcher passed this descriptor for us alone; owning it closes it at return.
    let mut channel = unsafe { std::os::unix::net::UnixStream::from_raw_fd(channel) };
    let listen = |port: u16| {
        std::net::TcpListener::bind(("127.0.0.1", port))
            .map_err(|e| format!("listening on 127.0.0.1:{port} inside the agent's network namespace: {e}"))
    };
    let (api, proxy) = (listen(network.api_port)?, listen(network.proxy_port)?);
    let mut forwarded = Vec::new();
    for address in forwards {
        forwarded.push(std::net::TcpListener::bind(address).map_err(|e| {
            format!("listening on {address} inside the agent's network namespace (for --allow-tcp): {e}")
        })?);
    }
    let fds: Vec<_> =
        [api.as_raw_fd(), proxy.as_raw_fd()].into_iter().chain(forwarded.iter().map(AsRawFd::as_raw_fd)).collect();
    crate::platform::confinement::send_fds(&channel, b"listeners\n", &fds)
        .map_err(|e| format!("handing the session's listeners to the launcher: {e}"))?;
    let mut answer = [0u8; 1];
    match channel.read(&mut answer) {
        Ok(1) if answer[0] == b'1' => Ok(()),
        _ => Err("the daemon did not take the session's listeners (the launcher says why)".to_string()),
    }
}

/// PID 1 of the namespace: builds the mounts, starts the agent, reaps until it exits.
fn init(request: &Request) -> Result<i32, String> {
    let none: Option<&str> = None;
    // Nothing mounted here propagates back to the user's namespace.
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making mounts private: {e}"))?;
    // The copies the agent reads instead of files holding credentials, taken before the Aileron
    // home they are kept in is masked.
    let substitutes = copies_to_substitute(&request.substitutes)?;
    crate::platform::confinement::read_only_outside(&request.writable)?;
    let hardened = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), hardened, none)
        .map_err(|e| format!("mounting /proc for the namespace: {e}"))?;
    // `/dev` stays writable (terminals, /dev/null), but its shared memory and message queues are
    // the agent's own and go with it: through the host's, a file left in /dev/shm outlived the
    // session and reached the user's other programs (the re-attack of 2026-12-05).
    let private = MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if std::path::Path::new("/dev/shm").is_dir() {
        mount(Some("tmpfs"), "/dev/shm", Some("tmpfs"), private, Some("mode=1777"))
            .map_err(|e| format!("giving the namespace its own /dev/shm: {e}"))?;
    }
    if std::path::Path::new("/dev/mqueue").is_dir() {
        // Where the namespace's own queues cannot be mounted, the host's are covered all the same.
        mount(Some("mqueue"), "/dev/mqueue", Some("mqueue"), private | MsFlags::MS_NOEXEC, none)
            .or_else(|_| mount(Some("tmpfs"), "/dev/mqueue", Some("tmpfs"), hardened, Some("mode=0500,size=4k")))
            .map_err(|e| format!("giving the namespace its own /dev/mqueue: {e}"))?;
    }
    own_terminals();
    no_host_consoles();
    if let Some(hosts) = &request.hosts_file {
        let etc_hosts = std::path::Path::new("/etc/hosts");
        mount(Some(hosts.as_path()), etc_hosts, none, MsFlags::MS_BIND, none)
            .and_then(|()| {
                let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID;
                mount(none, etc_hosts, none, read_only, none)
            })
            .map_err(|e| format!("mapping the --allow-tcp hosts in /etc/hosts: {e}"))?;
    }
    if let Some(bundle) = &request.trust_bundle {
        for system in super::network::SYSTEM_BUNDLES.iter().map(std::path::Path::new).filter(|path| path.exists()) {
            mount(Some(bundle), system, none, MsFlags::MS_BIND, none)
                .and_then(|()| {
                    let read_only = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID;
                    mount(none, system, none, read_only, none)
                })
                .map_err(|e| format!("trusting the session's CA at {}: {e}", system.display()))?;
        }
    }
    for mask in &request.masks {
        if !mask.is_dir() {
            continue; // nothing there to hide
        }
        mount(Some("tmpfs"), mask, Some("tmpfs"), hardened, Some("mode=0700,size=64k"))
            .map_err(|e| format!("masking {}: {e}", mask.display()))?;
    }
    // The user's credential stores and the host's Unix sockets: out of sight, not just unreadable.
    for hidden in &request.hidden {
        // A symlinked store is hidden where it leads (mount follows the link).
        let Ok(metadata) = std::fs::metadata(hidden) else { continue };
        if metadata.is_dir() {
            mount(Some("tmpfs"), hidden, Some("tmpfs"), hardened, Some("mode=0500,size=4k"))
        } else {
            mount(Some("/dev/null"), hidden, none, MsFlags::MS_BIND, none)
        }
        .map_err(|e| format!("hiding {}: {e}", hidden.display()))?;
    }
    // After the masks and the hidden stores, on the whole tree: the clones of what a cover keeps
    // carry them, wherever a kept path shows a store (`~/dotfiles/ssh` behind `~/.ssh`: the
    // seventeenth re-attack). The deepest cover first: a shallower one's clones carry it.
    let mut covers: Vec<&Cover> = request.covers.iter().collect();
    covers.sort_by_key(|cover| std::cmp::Reverse(cover.dir.components().count()));
    for cover in covers {
        cover_dir(cover)?;
    }
    // A mount point cannot be renamed or removed (EBUSY): `.git` stays where the read-only
    // `.git/hooks` and `.git/config` inside it are, so a new `.git` cannot take its place.
    // Recursive: a pin over a directory holding a hidden store keeps the mount that hides it (a
    // plain bind covered it: the twenty-first re-attack read the stores a pin was to keep in place).
    for pinned in request.pinned.iter().filter(|path| path.is_dir()) {
        mount(Some(pinned), pinned, none, MsFlags::MS_BIND | MsFlags::MS_REC, none)
            .map_err(|e| format!("pinning {}: {e}", pinned.display()))?;
    }
    // Recursive, so that the agent's own directories beneath a read-only one (`~/.config` kept in
    // the workspace, `opencode` in it) stay writable: only the top is made read-only.
    for path in request.read_only.iter().filter(|path| path.exists()) {
        mount(Some(path), path, none, MsFlags::MS_BIND | MsFlags::MS_REC, none)
            .map_err(|e| format!("binding {}: {e}", path.display()))?;
        let read_only =
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
        mount(none, path, none, read_only, none).map_err(|e| format!("making {} read-only: {e}", path.display()))?;
    }
    // Last, over the covers' clones and the read-only binds: a file holding a credential shows
    // its copy without it.
    attach_copies(substitutes)?;
    // The working directory was entered before these mounts, on the mount now read-only beneath
    // the workspace's writable bind: entered again by its name, it is on the bind.
    if let Ok(cwd) = std::env::current_dir() {
        std::env::set_current_dir(&cwd).map_err(|e| format!("entering {} again: {e}", cwd.display()))?;
    }
    if request.probe {
        // The allow-list must be enforceable here: applied to this process, which exits next.
        write_allow_list(&request.writable)?;
        return Ok(0);
    }
    let filter = terminal_injection_filter()?;
    // SAFETY: PID 1 is single-threaded, like the helper it was forked from.
    match unsafe { fork() }.map_err(|e| format!("starting the agent: {e}"))? {
        ForkResult::Child => {
            let error = exec_agent(request, &filter);
            log_line!("aileron: cannot run {}: {error}", request.program.to_string_lossy());
            // SAFETY: see `enter`.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            forward_signals_to(child, request.interrupts_reach_agent)?;
            // Reap every orphan re-parented to us; the agent's exit ends the namespace (the
            // kernel kills whatever it left running when PID 1 exits).
            loop {
                match waitpid(Pid::from_raw(-1), None) {
                    Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(code),
                    Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => return Ok(128 + signal as i32),
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(error) => return Err(format!("waiting for the agent: {error}")),
                }
            }
        }
    }
}

/// Each copy of [`Request::substitutes`] as a detached read-only mount of it, with the file it
/// is to be shown at.
fn copies_to_substitute(substitutes: &[(PathBuf, PathBuf)]) -> Result<Vec<(&PathBuf, std::os::fd::OwnedFd)>, String> {
    use crate::platform::confinement::{open_resolved, read_only_clone};
    let mut trees = Vec::new();
    for (file, copy) in substitutes {
        let fd = open_resolved(copy)?.ok_or_else(|| format!("the copy of {} is gone", file.display()))?;
        let tree = read_only_clone(&fd).map_err(|e| format!("taking the copy of {}: {e}", file.display()))?;
        trees.push((file, tree));
    }
    Ok(trees)
}

/// Shows each file at its copy ([`copies_to_substitute`]), the file opened with no link followed;
/// one gone since is left out. One that cannot be covered stops the caller (the agent would read
/// it).
fn attach_copies(copies: Vec<(&PathBuf, std::os::fd::OwnedFd)>) -> Result<(), String> {
    use crate::platform::confinement::{Target, attach_tree, open_resolved};
    for (file, copy) in copies {
        let Some(target) = open_resolved(file)? else { continue };
        attach_tree(&copy, Target::Descriptor(&target))
            .map_err(|e| format!("showing {} without its credentials: {e}", file.display()))?;
    }
    Ok(())
}

/// A directory as a read list (`home_view`, the launch directory): each path `cover.seen` keeps is
/// opened without following any link (the launcher resolved them; a link made since is not
/// followed: the seventeenth re-attack turned a kept path into a link to `/`) and cloned as it is,
/// with the mounts beneath it (writable where they are: the workspace, the agent's own
/// directories; the masks and hidden stores); then the directory is covered by an empty tmpfs, the
/// links on the way made again, each clone put back at its own name, and the tmpfs made read-only.
/// A path gone since the launcher looked is left out.
fn cover_dir(cover: &Cover) -> Result<(), String> {
    use crate::platform::confinement::{Target, attach_tree, clone_tree, file_type, open_path};
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let Ok(dir_metadata) = std::fs::metadata(&cover.dir) else { return Ok(()) };
    let mut clones = Vec::new();
    for path in &cover.seen {
        let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        let Ok(fd) = open_path(None, path, libc::O_PATH, resolve) else {
            continue; // gone, or reached through a link now: not kept
        };
        let is_dir = file_type(&fd) == libc::S_IFDIR;
        let tree = clone_tree(&fd).map_err(|e| format!("keeping {} in sight: {e}", path.display()))?;
        clones.push((path, is_dir, tree));
    }
    let none: Option<&str> = None;
    let hardened = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let options = format!("mode={:o},size=1m", dir_metadata.mode() & 0o7777);
    mount(Some("tmpfs"), &cover.dir, Some("tmpfs"), hardened, Some(options.as_str()))
        .map_err(|e| format!("covering {}: {e}", cover.dir.display()))?;
    let parents = |path: &std::path::Path| {
        path.parent().map_or(Ok(()), |parent| std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent))
    };
    for (link, said) in &cover.links {
        // A link a kept path holds is in its clone already; one that cannot be made is left out.
        let _ = parents(link).and_then(|()| std::os::unix::fs::symlink(said, link));
    }
    for (path, is_dir, tree) in clones {
        let made = parents(path).and_then(|()| {
            if is_dir {
                std::fs::DirBuilder::new().mode(0o755).create(path)
            } else {
                std::fs::File::create(path).map(drop)
            }
        });
        made.map_err(|e| format!("making {} in the covered {}: {e}", path.display(), cover.dir.display()))?;
        attach_tree(&tree, Target::Path(path)).map_err(|e| format!("putting {} back in sight: {e}", path.display()))?;
    }
    let read_only = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | hardened;
    mount(none, &cover.dir, none, read_only, none)
        .map_err(|e| format!("making the covered {} read-only: {e}", cover.dir.display()))
}

/// The host's consoles and input devices out of sight: the virtual consoles (`/dev/ttyN`, which a
/// console login makes the user's), their screen contents (`vcs*`), serial lines, raw input,
/// sound and cameras. Landlock rules writes only, so the agent, as their owner, opened the user's
/// console for reading and took a line typed there (the thirteenth re-attack). Each device is
/// covered with `/dev/null`, each such directory with an empty tmpfs; `/dev/tty` (the agent's own
/// terminal) and the namespace's `/dev/pts` stay.
fn no_host_consoles() {
    let none: Option<&str> = None;
    let Ok(entries) = std::fs::read_dir("/dev") else { return };
    let console = |name: &str| {
        let numbered = |prefix: &str| {
            name.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit()))
        };
        name == "console"
            || name == "uinput"
            || (numbered("tty") && name != "tty")
            || ["ttyS", "ttyUSB", "ttyACM", "ttyAMA", "vcs", "vcsa", "vcsu", "hidraw", "video"]
                .into_iter()
                .any(numbered)
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        let hidden = if kind.is_dir() && ["input", "snd"].contains(&name) {
            mount(
                Some("tmpfs"),
                &path,
                Some("tmpfs"),
                MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
                Some("mode=0500,size=4k"),
            )
        } else if std::os::unix::fs::FileTypeExt::is_char_device(&kind) && console(name) {
            mount(Some("/dev/null"), &path, none, MsFlags::MS_BIND, none)
        } else {
            continue;
        };
        if let Err(error) = hidden {
            log_line!("aileron: warning: {} could not be hidden from the agent ({error})", path.display());
        }
    }
}

/// `keyctl(2)`'s operation that gives the caller a new anonymous session keyring.
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

/// The namespace's own terminals: a devpts instance of its own on `/dev/pts` (its `ptmx` bound
/// onto `/dev/ptmx`), so the agent opens new terminals but never the user's others — the twelfth
/// re-attack opened another tab's `/dev/pts/N` and read a `sudo` password typed there. The agent
/// keeps the terminal it was started on (its standard streams and `/dev/tty`); only its name is
/// not in `/dev/pts`. Read-only, as the host's was: no `chmod` of a terminal. Where the instance
/// cannot be made, the launch says so and goes on.
fn own_terminals() {
    let none: Option<&str> = None;
    if !std::path::Path::new("/dev/pts").is_dir() {
        return;
    }
    let made = mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0600"),
    )
    .and_then(|()| mount(Some("/dev/pts/ptmx"), "/dev/ptmx", none, MsFlags::MS_BIND, none))
    .and_then(|()| {
        mount(
            none,
            "/dev/pts",
            none,
            MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
            none,
        )
    });
    if let Err(error) = made {
        log_line!(
            "aileron: warning: the agent's terminals could not be its own ({error}): it can open your other terminals \
             in /dev/pts"
        );
    }
}

/// The agent's write allow-list (the re-attack's H4: a confined agent appended
/// `aileron approval approve <id>` to `~/.bashrc`, and the user's next shell approved its
/// requests as the human). Landlock handles every write right (create, write, truncate, remove,
/// rename, link) and grants them only beneath `writable`; reading and executing stay as they
/// were. Refuses when the kernel enforces no Landlock at all (the launch then refuses too, unless
/// `--unconfined`).
fn write_allow_list(writable: &[PathBuf]) -> Result<(), String> {
    use landlock::{
        ABI, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    let error = |e: landlock::RulesetError| format!("building the write allow-list: {e}");
    let writes = AccessFs::from_write(ABI::V3);
    // Each path as the launcher resolved it, with no link on its way: one swapped for a link since
    // (to `~/.config`, by another session's agent) is refused, not granted where it leads.
    let mut existing = Vec::new();
    for path in writable {
        existing.extend(crate::platform::confinement::open_resolved(path)?);
    }
    // Signals only within the agent's own processes (Landlock ABI 6): the launcher, the helper
    // and the namespace's first process share its process group, and `kill(0, SIGSTOP)` froze
    // the launcher's watch while the agent planted a file, `kill(0, SIGKILL)` ended the launcher
    // and left the agent running unwatched (the seventh re-attack). Older kernels: the first
    // process dies with the helper all the same ([`enter`]'s parent-death signal).
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(writes)
        .map_err(error)?
        .scope(Scope::Signal)
        .map_err(error)?
        .create()
        .map_err(error)?
        .add_rules(
            existing
                .iter()
                .map(|fd| Ok::<_, landlock::RulesetError>(crate::platform::confinement::beneath(fd, writes))),
        )
        .map_err(error)?
        .restrict_self()
        .map_err(error)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("this kernel does not enforce Landlock, so the agent's writes could not be confined to its \
                    workspace (Linux 5.13 or later with Landlock enabled is needed)"
            .into());
    }
    Ok(())
}

/// Refuses `ioctl(fd, TIOCSTI|TIOCLINUX, ...)`, a set-ID mode given to a file
/// ([`crate::platform::confinement::set_id_mode_rules`]), the kernel's keyrings and io_uring with
/// EPERM, allows everything else. Keyrings: a key's permissions are checked on the uid, not the
/// namespace, so the agent linked the user's own user keyring (listed by id in `/proc/keys`) into
/// its session keyring and read every key in it (the thirteenth re-attack; Docker's default
/// profile refuses these calls for the same reason). io_uring: its requests are system calls this
/// filter never sees (the thirteenth re-attack made a set-UID file through one); programs that
/// use it fall back to plain calls when it is refused.
fn terminal_injection_filter() -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
    let refused = |request: libc::c_ulong| {
        // The kernel reads the request as a 32-bit `unsigned int`: compare exactly those bits.
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
            .and_then(|condition| SeccompRule::new(vec![condition]))
    };
    let rules =
        vec![refused(libc::TIOCSTI).map_err(|e| e.to_string())?, refused(libc::TIOCLINUX).map_err(|e| e.to_string())?];
    let arch = std::env::consts::ARCH.try_into().map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut refused: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        [(libc::SYS_ioctl, rules)].into_iter().collect();
    refused.extend(crate::platform::confinement::set_id_mode_rules()?);
    for call in [
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        refused.insert(call, Vec::new());
    }
    let filter = SeccompFilter::new(refused, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(|e| e.to_string())?;
    filter.try_into().map_err(|e: seccompiler::BackendError| e.to_string())
}

/// In the agent's process: signals back to their defaults, no capabilities across exec, the
/// terminal filter, then the program. Returns only on failure.
fn exec_agent(request: &Request, filter: &seccompiler::BpfProgram) -> String {
    for restored in [Signal::SIGINT, Signal::SIGQUIT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGTTOU, Signal::SIGTTIN]
    {
        // SAFETY: restores the default disposition.
        let _ = unsafe { signal(restored, SigHandler::SigDfl) };
    }
    crate::platform::confinement::drop_capability_bounding_set();
    // A session keyring of its own: the user's (Kerberos tickets, AFS tokens, what `pam_keyinit`
    // made at login) was the agent's to read (the twelfth re-attack). SAFETY: keyctl with
    // integer arguments and a null name.
    unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, std::ptr::null::<libc::c_char>()) };
    if let Err(error) = write_allow_list(&request.writable) {
        return error;
    }
    if let Err(error) = seccompiler::apply_filter(filter) {
        return format!("installing the terminal filter: {error}");
    }
    // Nothing the launcher inherited passes to the agent but its standard streams: a descriptor
    // opened outside (a shell's `exec 7>>~/.bashrc`) writes past Landlock and the read-only
    // mounts, which check only what is opened here (the seventh re-attack).
    // SAFETY: marks descriptors close-on-exec; no memory is involved.
    let closed = unsafe {
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 1u32 << 2 /* CLOSE_RANGE_CLOEXEC */)
    };
    if closed != 0 {
        return format!("closing inherited descriptors: {}", std::io::Error::last_os_error());
    }
    let to_c =
        |text: &std::ffi::OsStr| CString::new(text.as_bytes()).map_err(|_| "an argument holds a NUL byte".to_string());
    let program = match to_c(&request.program) {
        Ok(program) => program,
        Err(error) => return error,
    };
    let mut argv = vec![program.clone()];
    for arg in &request.args {
        match to_c(arg) {
            Ok(arg) => argv.push(arg),
            Err(error) => return error,
        }
    }
    match nix::unistd::execv(&program, &argv) {
        Err(error) => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line_round_trips() {
        let request = Request {
            lifeline: Some(7),
            masks: vec![PathBuf::from("/home/u/.aileron"), PathBuf::from("/var/audit")],
            writable: vec![PathBuf::from("/home/u/project"), PathBuf::from("/home/u/.claude")],
            pinned: vec![PathBuf::from("/home/u/project/.git")],
            read_only: vec![PathBuf::from("/home/u/project/.git/hooks"), PathBuf::from("/home/u/project/.git/config")],
            hidden: vec![PathBuf::from("/home/u/.aws"), PathBuf::from("/home/u/.netrc")],
            substitutes: vec![(PathBuf::from("/home/u/.gitconfig"), PathBuf::from("/home/u/.aileron/w/1-.gitconfig"))],
            covers: vec![Cover {
                dir: PathBuf::from("/home/u"),
                seen: vec![PathBuf::from("/home/u/project"), PathBuf::from("/home/u/dotfiles/claude")],
                links: vec![(PathBuf::from("/home/u/.claude"), PathBuf::from("dotfiles/claude"))],
            }],
            network: Some(Network { channel: Some(5), api_port: 4100, proxy_port: 3128 }),
            trust_bundle: Some(PathBuf::from("/run/user/1000/aileron/launch/trust-s1.pem")),
            forwards: vec!["127.0.0.10:22".parse().unwrap()],
            hosts_file: Some(PathBuf::from("/run/user/1000/aileron/launch/hosts-s1")),
            probe: false,
            interrupts_reach_agent: true,
            program: "/usr/bin/claude".into(),
            args: os(&["-p", "--", "--mask", "--writable", "/"]),
        };
        let line = request.arguments();
        assert_eq!(parse(&line[1..]).unwrap(), request);
        assert!(parse(&os(&["--mask", "relative", "--", "x"])).is_err());
        assert!(parse(&os(&["--writable", "relative", "--", "x"])).is_err());
        assert!(parse(&os(&["--read-only"])).is_err(), "a flag without its path");
        assert!(parse(&os(&["--mask", "/a"])).is_err(), "no program");
        assert!(parse(&os(&["--probe", "--mask", "/a"])).unwrap().probe);
        assert!(parse(&os(&["--network", "1:2", "--", "x"])).is_err(), "a network without its channel");
        assert!(parse(&os(&["--channel", "3", "--", "x"])).is_err(), "a channel without a network");
        assert!(parse(&os(&["--network", "1", "--channel", "3", "--", "x"])).is_err(), "one port");
        assert!(parse(&os(&["--probe", "--network", "1:2"])).unwrap().network.is_some());
        assert!(parse(&os(&["--forward", "10.0.0.1:22", "--", "x"])).is_err(), "a forward not on loopback");
        assert!(parse(&os(&["--lifeline", "x", "--", "x"])).is_err(), "a lifeline that is no descriptor");
        assert!(parse(&os(&["--see", "/home/u/x", "--", "x"])).is_err(), "a path seen without a cover");
        let outside = ["--cover", "/home/u", "--see", "/home/v/x", "--", "x"];
        assert!(parse(&os(&outside)).is_err(), "a path seen outside the cover");
        assert!(parse(&os(&["--cover", "/home/u", "--see", "/home/u", "--", "x"])).is_err(), "the cover itself");
        assert!(parse(&os(&["--cover", "/", "--", "x"])).is_err(), "the root is not covered");
        assert!(parse(&os(&["--cover", "/home/u", "--link", "/home/u/a", "--", "x"])).is_err(), "a link says nothing");
        assert!(parse(&os(&["--substitute", "/home/u/.gitconfig", "--", "x"])).is_err(), "a file without its copy");
        assert!(parse(&os(&["--substitute", "rel", "/a", "--", "x"])).is_err(), "a relative file");
    }
}
