//! The confined run of one spawned program on Linux (SPEC §5; docs/decisions/0012-spawn.md).
//!
//! The daemon is multithreaded and a multithreaded process cannot enter a new user namespace, so
//! every spawn goes through `aileron __spawn`, a helper that reads its [`JailPlan`] from stdin (a
//! length-prefixed JSON frame; anything after it is the program's stdin), reports on fd 3 (JSON
//! lines, see [`Report`]) and builds, with no privilege at all:
//!
//! - the program, opened once with every path component checked not to be a symlink
//!   (`openat2` with `RESOLVE_NO_SYMLINKS`), refused when it is not a regular file or is setuid or
//!   setgid, hashed when the manifest pins it, and executed from that open descriptor
//!   (`execveat`), so the bytes checked are the bytes run;
//! - user, mount, PID, network, IPC and UTS namespaces: no process outside is visible (`/proc`
//!   is the namespace's own), the Aileron home and audit directory are covered by empty tmpfs
//!   mounts, and the only network is a loopback on which, when the manifest names hosts, a
//!   forwarder takes connections to the per-spawn CONNECT proxy of the daemon;
//! - every `fs_read`/`fs_write` root opened once inside the mount namespace without following a
//!   symlink, and the working directory opened beneath the scope it lies in ([`Scopes`]): those
//!   descriptors are what Landlock grants and where the program starts (`fchdir`);
//! - in the program's process: no capabilities, `no_new_privs`, Landlock (read-only system
//!   directories and `fs_read`, read-write `fs_write` and the scratch directory; the working
//!   directory has its scope's access, no more; TCP only to the forwarder, no abstract Unix
//!   sockets, no signals out of the domain), a seccomp filter (ptrace, mount, namespaces, kernel
//!   modules, keyrings, BPF, io_uring, Unix sockets by `socket`, `socketpair` or `sendto`,
//!   terminal injection), rlimits (processes, address space, file size, CPU, open files, no core
//!   dumps), and no inherited file descriptor beyond stdin, stdout and stderr.
//!
//! Processes: the helper (`P`, in the daemon's PID namespace: enforces the wall time and reports),
//! PID 1 of the new namespace (`C`: mounts, forwarder, reaps; its exit kills everything left in
//! the namespace, double-forked or not), the optional forwarder (`F`), and the program (`A`).

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use aileron_core::sha256::Sha256;
use nix::mount::{MsFlags, mount};
use nix::sched::CloneFlags;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};
use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

use crate::platform::confinement::open_path;
use crate::platform::secret::Secret;

/// The hidden subcommand the daemon runs for each spawn.
pub const SUBCOMMAND: &str = "__spawn";
/// The option naming the descriptor the helper reports on (`__spawn --report-fd N`).
pub const REPORT_FD_FLAG: &str = "--report-fd";
/// The report descriptor when the option is absent.
pub const REPORT_FD: RawFd = 3;
/// The forwarder's port on the namespace's own loopback (`HTTPS_PROXY=http://127.0.0.1:3128`).
pub const FORWARDER_PORT: u16 = 3128;
/// Largest plan frame accepted.
const MAX_PLAN_BYTES: u32 = 4 << 20;
/// Processes a spawned program's namespace may hold (the PID namespace's `pid_max`, and
/// `RLIMIT_NPROC` for users other than root).
pub const MAX_PROCESSES: u64 = 512;

/// Everything the helper needs; written by the daemon after the gate allowed the spawn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JailPlan {
    /// The program, every symlink already resolved.
    pub program: PathBuf,
    /// `sha256:<hex>` when the manifest pins the binary.
    pub hash: Option<String>,
    pub argv: Vec<String>,
    /// The program's environment, but for its credential.
    pub env: Vec<(String, String)>,
    /// The bound credential under each `credential_env_keys` name: a [`Secret`] (never printed,
    /// zeroized when dropped) until it becomes the program's environment at exec.
    #[serde(default, with = "crate::platform::secret::exposed_pairs")]
    pub credential_env: Vec<(String, Secret)>,
    pub cwd: PathBuf,
    /// Read-only (and executable) for the program, besides the system directories.
    pub read: Vec<PathBuf>,
    /// Read-write for the program.
    pub write: Vec<PathBuf>,
    /// Directories covered by an empty tmpfs in the program's mount namespace.
    pub masks: Vec<PathBuf>,
    /// The daemon's per-spawn CONNECT proxy (a Unix socket); `None` = no network at all.
    pub proxy: Option<PathBuf>,
    pub wall_time_ms: u64,
    pub max_memory_bytes: u64,
    pub max_file_bytes: u64,
}

/// One line on the report descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// The program is not what may run (setuid, not a regular file, hash mismatch, a symlink).
    Refused { class: String, message: String },
    /// The confinement could not be built here: nothing ran.
    Unavailable(String),
    /// The program could not be executed (after confinement).
    ExecFailed(String),
    /// The program exited with this code.
    Exited(i32),
    /// The program was killed by this signal.
    Signaled(i32),
    /// The wall time ran out; the namespace and everything in it were killed.
    TimedOut,
}

/// Directories every program may read and execute from (libraries, the loader, configuration).
const SYSTEM_READ: [&str; 8] = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc"];
/// Devices every program may read; `/dev/null` may also be written.
const DEVICES_READ: [&str; 4] = ["/dev/zero", "/dev/urandom", "/dev/random", "/dev/full"];

/// The helper's entry point: must run before any other thread exists. Returns the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().collect();
    let named =
        args.iter().position(|arg| arg == REPORT_FD_FLAG).and_then(|at| args.get(at + 1)?.parse::<RawFd>().ok());
    let report_fd = named.filter(|fd| *fd > 2).unwrap_or(REPORT_FD);
    // SAFETY: the daemon handed this process the report pipe's write end under this number
    // (`spawn::run_helper`); nothing else in this process owns it.
    let mut report = unsafe { std::fs::File::from_raw_fd(report_fd) };
    set_cloexec(report_fd);
    let plan = match read_plan() {
        Ok(plan) => plan,
        Err(problem) => {
            send(&mut report, &Report::Unavailable(format!("reading the spawn plan: {problem}")));
            return 2;
        }
    };
    let program = match open_program(&plan) {
        Ok(program) => program,
        Err(report_line) => {
            send(&mut report, &report_line);
            return 1;
        }
    };
    match enter(&plan, &program, &mut report) {
        Ok(code) => code,
        Err(reason) => {
            send(&mut report, &Report::Unavailable(reason));
            1
        }
    }
}

fn send(report: &mut std::fs::File, line: &Report) {
    let mut text = serde_json::to_vec(line).expect("a report serializes");
    text.push(b'\n');
    // A daemon that stopped listening learns nothing more; the run goes on to its end.
    let _ = report.write_all(&text);
}

fn set_cloexec(fd: RawFd) {
    // SAFETY: fcntl on a descriptor number with integer arguments.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

fn read_plan() -> Result<JailPlan, String> {
    // Unbuffered: whatever follows the frame is the program's stdin and must stay in the pipe.
    // SAFETY: fd 0 is open for the helper's whole life; ManuallyDrop leaves it open.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let mut length = [0u8; 4];
    stdin.read_exact(&mut length).map_err(|e| e.to_string())?;
    let length = u32::from_le_bytes(length);
    if length > MAX_PLAN_BYTES {
        return Err(format!("a plan of {length} bytes is larger than {MAX_PLAN_BYTES}"));
    }
    let mut frame = vec![0u8; length as usize];
    stdin.read_exact(&mut frame).map_err(|e| e.to_string())?;
    serde_json::from_slice(&frame).map_err(|e| e.to_string())
}

/// The frame the daemon writes before the program's stdin, zeroized when dropped. It is
/// serialized into a buffer of its exact size, so no reallocation leaves a copy of the credential
/// behind in freed memory.
pub fn plan_frame(plan: &JailPlan) -> zeroize::Zeroizing<Vec<u8>> {
    /// Counts what would be written.
    struct Length(usize);
    impl std::io::Write for Length {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut length = Length(0);
    serde_json::to_writer(&mut length, plan).expect("a plan serializes");
    let mut frame = zeroize::Zeroizing::new(Vec::with_capacity(4 + length.0));
    frame.extend_from_slice(&[0; 4]);
    serde_json::to_writer(&mut *frame, plan).expect("a plan serializes");
    let length = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&length.to_le_bytes());
    frame
}

/// The program, opened and checked.
struct Program {
    fd: OwnedFd,
    /// A `#!` script: its interpreter reads it through `/proc/self/fd`, so the descriptor must
    /// survive exec.
    script: bool,
}

fn refused(class: &str, message: String) -> Report {
    Report::Refused { class: class.to_string(), message }
}

fn open_program(plan: &JailPlan) -> Result<Program, Report> {
    let shown = plan.program.display().to_string();
    if plan.program.as_os_str().as_bytes().contains(&0) {
        return Err(refused("capability_denied", format!("{shown} holds a NUL byte")));
    }
    let fd = open_path(None, &plan.program, libc::O_RDONLY, libc::RESOLVE_NO_SYMLINKS).map_err(|errno| {
        let message = if errno == libc::ELOOP || errno == libc::EXDEV {
            format!("{shown} changed into a path through a symbolic link after it was checked")
        } else {
            format!("cannot open {shown}: {}", std::io::Error::from_raw_os_error(errno))
        };
        refused("capability_denied", message)
    })?;
    // SAFETY: fstat fills a zeroed stat for a descriptor we own.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
        return Err(refused("capability_denied", format!("cannot inspect {shown}")));
    }
    if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(refused("capability_denied", format!("{shown} is not a regular file")));
    }
    if stat.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
        return Err(refused(
            "capability_denied",
            format!("{shown} is setuid or setgid: such programs are never spawned"),
        ));
    }
    let mut file = std::fs::File::from(fd);
    let mut head = [0u8; 2];
    let script = file.read(&mut head).map(|n| n == 2 && &head == b"#!").unwrap_or(false);
    if let Some(expected) = &plan.hash {
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(0))
            .map_err(|e| refused("capability_denied", format!("reading {shown}: {e}")))?;
        let mut hasher = Sha256::new();
        std::io::copy(&mut file, &mut hasher)
            .map_err(|e| refused("capability_denied", format!("reading {shown}: {e}")))?;
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if &actual != expected {
            return Err(refused(
                "hash_mismatch",
                format!("{shown} is not the binary the manifest pins (expected {expected}, found {actual})"),
            ));
        }
    }
    let fd = OwnedFd::from(file);
    if script {
        // SAFETY: clears FD_CLOEXEC on a descriptor we own.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) };
    }
    Ok(Program { fd, script })
}

/// The process the wall-time alarm kills (`C`, and with it the namespace).
static KILL_ON_ALARM: AtomicI32 = AtomicI32::new(0);
static TIMED_OUT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_alarm(_: libc::c_int) {
    let target = KILL_ON_ALARM.load(Ordering::Relaxed);
    if target > 0 {
        TIMED_OUT.store(1, Ordering::Relaxed);
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(target, libc::SIGKILL) };
    }
}

fn arm_wall_time(target: Pid, wall_time_ms: u64) -> Result<(), String> {
    KILL_ON_ALARM.store(target.as_raw(), Ordering::Relaxed);
    // SAFETY: the handler only touches atomics and calls kill(2).
    unsafe { signal(Signal::SIGALRM, SigHandler::Handler(on_alarm)) }
        .map_err(|e| format!("arming the wall-time limit: {e}"))?;
    let wall = wall_time_ms.max(1);
    let timer = libc::itimerval {
        it_interval: libc::timeval { tv_sec: 0, tv_usec: 0 },
        it_value: libc::timeval {
            tv_sec: (wall / 1000) as libc::time_t,
            tv_usec: ((wall % 1000) * 1000) as libc::suseconds_t,
        },
    };
    // SAFETY: setitimer with a valid itimerval.
    if unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, std::ptr::null_mut()) } != 0 {
        return Err("arming the wall-time limit failed".into());
    }
    Ok(())
}

fn enter(plan: &JailPlan, program: &Program, report: &mut std::fs::File) -> Result<i32, String> {
    let namespaces = CloneFlags::CLONE_NEWUSER
        | CloneFlags::CLONE_NEWNS
        | CloneFlags::CLONE_NEWPID
        | CloneFlags::CLONE_NEWNET
        | CloneFlags::CLONE_NEWIPC
        | CloneFlags::CLONE_NEWUTS;
    crate::platform::confinement::enter_namespaces(namespaces)?;
    // SAFETY: this process is single-threaded (the helper runs before anything starts a thread).
    match unsafe { fork() }.map_err(|e| format!("starting the namespace's first process: {e}"))? {
        ForkResult::Child => {
            // SAFETY: PR_SET_PDEATHSIG with a signal number; the helper is single-threaded, so
            // "the parent" is the helper process itself.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
            let code = match init(plan, program, report) {
                Ok(code) => code,
                Err(reason) => {
                    send(report, &Report::Unavailable(reason));
                    125
                }
            };
            // SAFETY: ends this process without running the parent's atexit handlers twice.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            arm_wall_time(child, plan.wall_time_ms)?;
            loop {
                match waitpid(child, None) {
                    Ok(WaitStatus::Exited(_, code)) => return Ok(code),
                    Ok(WaitStatus::Signaled(..)) => {
                        if TIMED_OUT.load(Ordering::Relaxed) == 1 {
                            send(report, &Report::TimedOut);
                        }
                        return Ok(124);
                    }
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(error) => return Err(format!("waiting for the namespace: {error}")),
                }
            }
        }
    }
}

/// PID 1 of the namespace: mounts, the forwarder, then the program; reaps until it exits.
fn init(plan: &JailPlan, program: &Program, report: &mut std::fs::File) -> Result<i32, String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("making mounts private: {e}"))?;
    // Landlock governs writes, not `chmod`, `utime` or `setxattr`: a program scoped to `~/out`
    // made `~/.ssh/id_rsa` 0644 and `~/.bashrc` 0666 (the eleventh re-attack). Everything but its
    // write scopes (the scratch directory among them) is a read-only mount to it.
    crate::platform::confinement::read_only_outside(&plan.write)?;
    let hardened = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(Some("proc"), "/proc", Some("proc"), hardened, none)
        .map_err(|e| format!("mounting /proc for the namespace: {e}"))?;
    for mask in &plan.masks {
        if mask.is_dir() {
            mount(Some("tmpfs"), mask, Some("tmpfs"), hardened, Some("mode=0700,size=64k"))
                .map_err(|e| format!("masking {}: {e}", mask.display()))?;
        }
    }
    // Kernels from 6.14 keep pid_max per PID namespace: a fork bomb stops here even for root,
    // whom RLIMIT_NPROC does not bind. Older kernels refuse the write; the rlimit remains.
    let _ = std::fs::write("/proc/sys/kernel/pid_max", MAX_PROCESSES.to_string());
    let forwarder = match &plan.proxy {
        Some(proxy) => Some(start_forwarder(proxy)?),
        None => None,
    };
    let confinement = match Confinement::prepare(plan)? {
        Ok(confinement) => confinement,
        Err(refusal) => {
            send(report, &refusal);
            return Ok(126);
        }
    };
    // SAFETY: PID 1 is single-threaded, like the helper it was forked from.
    match unsafe { fork() }.map_err(|e| format!("starting the program: {e}"))? {
        ForkResult::Child => {
            let error = confinement.exec(plan, program);
            send(report, &Report::ExecFailed(error));
            // SAFETY: see `enter`.
            unsafe { libc::_exit(127) }
        }
        ForkResult::Parent { child } => {
            drop(forwarder);
            loop {
                match waitpid(Pid::from_raw(-1), None) {
                    Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                        send(report, &Report::Exited(code));
                        return Ok(code);
                    }
                    Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                        send(report, &Report::Signaled(signal as i32));
                        return Ok(128 + signal as i32);
                    }
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(error) => return Err(format!("waiting for the program: {error}")),
                }
            }
        }
    }
}

/// Brings the namespace's loopback up, listens on [`FORWARDER_PORT`] and forks the forwarder,
/// which relays each connection to the daemon's proxy socket. Returns the listener (closed in
/// PID 1 once the program has its own copy closed too).
fn start_forwarder(proxy: &Path) -> Result<std::net::TcpListener, String> {
    crate::platform::confinement::loopback_up()?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", FORWARDER_PORT))
        .map_err(|e| format!("listening on the namespace's loopback: {e}"))?;
    // SAFETY: PID 1 is single-threaded; the forwarder may start threads after the fork.
    match unsafe { fork() }.map_err(|e| format!("starting the forwarder: {e}"))? {
        ForkResult::Child => {
            forward(&listener, proxy);
            // SAFETY: see `enter`.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { .. } => Ok(listener),
    }
}

fn forward(listener: &std::net::TcpListener, proxy: &Path) {
    for inbound in listener.incoming() {
        let Ok(inbound) = inbound else { continue };
        let proxy = proxy.to_path_buf();
        std::thread::spawn(move || {
            let Ok(outbound) = std::os::unix::net::UnixStream::connect(&proxy) else { return };
            let (Ok(mut inbound_reader), Ok(mut outbound_writer)) = (inbound.try_clone(), outbound.try_clone()) else {
                return;
            };
            let upstream = std::thread::spawn(move || {
                let _ = std::io::copy(&mut inbound_reader, &mut outbound_writer);
                let _ = outbound_writer.shutdown(std::net::Shutdown::Write);
            });
            let (mut outbound_reader, mut inbound_writer) = (outbound, inbound);
            let _ = std::io::copy(&mut outbound_reader, &mut inbound_writer);
            let _ = inbound_writer.shutdown(std::net::Shutdown::Write);
            let _ = upstream.join();
        });
    }
}

/// What the program's process applies to itself just before exec, prepared in PID 1 so that a
/// failure is reported as `spawn_sandbox_unavailable` before anything runs.
struct Confinement {
    filter: seccompiler::BpfProgram,
    argv: Vec<CString>,
    env: Vec<CString>,
    scopes: Scopes,
}

/// The plan's directories, each opened once, in the namespace, without following a symbolic
/// link anywhere on its path: the descriptors are what Landlock grants and where the program
/// starts, so a directory swapped for a link after the daemon resolved it is refused, never
/// followed (the re-attack's H2: a `renameat2(RENAME_EXCHANGE)` during concurrent runs).
struct Scopes {
    read: Vec<OwnedFd>,
    write: Vec<OwnedFd>,
    /// The working directory, opened beneath the scope it lies in.
    cwd: OwnedFd,
}

impl Scopes {
    /// `Err(report)`: the plan's paths are not what the daemon checked (nothing runs).
    fn open(plan: &JailPlan) -> Result<Scopes, Report> {
        let changed = |path: &Path, errno: i32| {
            let message = if errno == libc::ELOOP || errno == libc::EXDEV {
                format!("{} changed into a path through a symbolic link after it was checked", path.display())
            } else {
                format!("cannot open {}: {}", path.display(), std::io::Error::from_raw_os_error(errno))
            };
            refused("capability_denied", message)
        };
        let open_root = |path: &PathBuf| -> Result<(PathBuf, OwnedFd), Report> {
            let fd =
                open_path(None, path, libc::O_PATH, libc::RESOLVE_NO_SYMLINKS).map_err(|errno| changed(path, errno))?;
            Ok((path.clone(), fd))
        };
        let read = plan.read.iter().map(open_root).collect::<Result<Vec<_>, _>>()?;
        let write = plan.write.iter().map(open_root).collect::<Result<Vec<_>, _>>()?;
        // The deepest scope holding the working directory; it gets that scope's access and no more.
        let (root, root_fd) = read
            .iter()
            .chain(&write)
            .filter(|(root, _)| plan.cwd.starts_with(root))
            .max_by_key(|(root, _)| root.components().count())
            .ok_or_else(|| {
                refused(
                    "capability_denied",
                    format!("the working directory {} is not within a granted scope", plan.cwd.display()),
                )
            })?;
        let below = plan.cwd.strip_prefix(root).expect("the root is a prefix");
        let below = if below.as_os_str().is_empty() { Path::new(".") } else { below };
        let cwd = open_path(
            Some(root_fd),
            below,
            libc::O_PATH | libc::O_DIRECTORY,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS,
        )
        .map_err(|errno| changed(&plan.cwd, errno))?;
        Ok(Scopes {
            read: read.into_iter().map(|(_, fd)| fd).collect(),
            write: write.into_iter().map(|(_, fd)| fd).collect(),
            cwd,
        })
    }
}

impl Drop for Confinement {
    /// PID 1 keeps its copy of the program's environment until the program exits: the credential
    /// in it is zeroized when it goes.
    fn drop(&mut self) {
        for entry in std::mem::take(&mut self.env) {
            entry.into_bytes_with_nul().zeroize();
        }
    }
}

impl Confinement {
    /// `Err`: the confinement cannot be built (`spawn_sandbox_unavailable`); `Ok(Err(report))`:
    /// the plan's directories are not what was checked (refused).
    fn prepare(plan: &JailPlan) -> Result<Result<Confinement, Report>, String> {
        let c = |text: &[u8], what: &str| CString::new(text).map_err(|_| format!("{what} holds a NUL byte"));
        let argv = plan.argv.iter().map(|arg| c(arg.as_bytes(), "an argument")).collect::<Result<Vec<_>, _>>()?;
        let plain = plan.env.iter().map(|(key, value)| (key.as_str(), value.as_str()));
        let credential = plan.credential_env.iter().map(|(key, secret)| (key.as_str(), secret.expose()));
        let env = plain
            .chain(credential)
            .map(|(key, value)| {
                let entry = zeroize::Zeroizing::new(format!("{key}={value}"));
                c(entry.as_bytes(), "an environment value")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let filter = filter()?;
        Ok(Scopes::open(plan).map(|scopes| Confinement { filter, argv, env, scopes }))
    }

    /// In the program's process; returns only on failure.
    fn exec(&self, plan: &JailPlan, program: &Program) -> String {
        if let Err(error) = self.confine(plan, program) {
            return error;
        }
        let argv: Vec<*mut libc::c_char> = self
            .argv
            .iter()
            .map(|a| a.as_ptr() as *mut libc::c_char)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect();
        let env: Vec<*mut libc::c_char> = self
            .env
            .iter()
            .map(|e| e.as_ptr() as *mut libc::c_char)
            .chain(std::iter::once(std::ptr::null_mut()))
            .collect();
        let empty = c"";
        // SAFETY: execveat with null-terminated arrays of valid C strings that outlive the call.
        unsafe {
            libc::execveat(program.fd.as_raw_fd(), empty.as_ptr(), argv.as_ptr(), env.as_ptr(), libc::AT_EMPTY_PATH)
        };
        format!("cannot execute {}: {}", plan.program.display(), std::io::Error::last_os_error())
    }

    fn confine(&self, plan: &JailPlan, program: &Program) -> Result<(), String> {
        // SAFETY: fchdir on a directory descriptor we own.
        if unsafe { libc::fchdir(self.scopes.cwd.as_raw_fd()) } != 0 {
            return Err(format!("cannot enter {}: {}", plan.cwd.display(), std::io::Error::last_os_error()));
        }
        // Every descriptor but stdio (and a script's own) closes at exec.
        // SAFETY: close_range with the CLOEXEC flag only marks descriptors.
        unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) };
        if program.script {
            // SAFETY: clears FD_CLOEXEC on the script's descriptor.
            unsafe { libc::fcntl(program.fd.as_raw_fd(), libc::F_SETFD, 0) };
        }
        set_limits(plan)?;
        crate::platform::confinement::drop_capability_bounding_set();
        landlock(plan, program, &self.scopes)?;
        seccompiler::apply_filter(&self.filter).map_err(|e| format!("installing the seccomp filter: {e}"))?;
        Ok(())
    }
}

fn set_limits(plan: &JailPlan) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    let cpu_seconds = plan.wall_time_ms.div_ceil(1000) + 1;
    let limits = [
        (Resource::RLIMIT_NPROC, MAX_PROCESSES),
        (Resource::RLIMIT_AS, plan.max_memory_bytes),
        (Resource::RLIMIT_FSIZE, plan.max_file_bytes),
        (Resource::RLIMIT_CPU, cpu_seconds),
        (Resource::RLIMIT_NOFILE, 1024),
        (Resource::RLIMIT_CORE, 0),
    ];
    for (resource, limit) in limits {
        setrlimit(resource, limit, limit).map_err(|e| format!("setting {resource:?}: {e}"))?;
    }
    Ok(())
}

/// The Landlock domain of the program: the system directories readable, the plan's read scopes
/// read-only and its write scopes (the scratch directory among them) read-write, by the
/// descriptors [`Scopes`] opened. The working directory has no rule of its own: it has the access
/// of the scope it lies in (the re-attack's H1: it was always writable). Refuses (the run fails
/// closed) when the kernel enforces no filesystem restriction at all.
fn landlock(plan: &JailPlan, program: &Program, scopes: &Scopes) -> Result<(), String> {
    use crate::platform::confinement::beneath;
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    let system: Vec<PathBuf> =
        SYSTEM_READ.iter().chain(DEVICES_READ.iter()).map(PathBuf::from).filter(|path| path.exists()).collect();
    let error = |e: landlock::RulesetError| format!("building the Landlock ruleset: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(error)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(error)?
        .scope(Scope::from_all(abi))
        .map_err(error)?
        .create()
        .map_err(error)?
        .add_rules(path_beneath_rules(&system, read))
        .map_err(error)?
        .add_rules(path_beneath_rules(["/dev/null"], all))
        .map_err(error)?
        .add_rule(beneath(&program.fd, read))
        .map_err(error)?
        .add_rules(scopes.read.iter().map(|fd| Ok::<_, landlock::RulesetError>(beneath(fd, read))))
        .map_err(error)?
        .add_rules(scopes.write.iter().map(|fd| Ok::<_, landlock::RulesetError>(beneath(fd, all))))
        .map_err(error)?;
    if plan.proxy.is_some() {
        ruleset = ruleset.add_rule(NetPort::new(FORWARDER_PORT, AccessNet::ConnectTcp)).map_err(error)?;
    }
    let status = ruleset.restrict_self().map_err(error)?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(
            "this kernel does not enforce Landlock (Linux 5.13 or later with Landlock enabled is needed)".into()
        );
    }
    Ok(())
}

/// Refuses, with EPERM, what a confined program never needs and an escape would: tracing other
/// processes, mounts and namespaces, kernel modules and keyrings, BPF and perf, reading other
/// processes' memory, io_uring, Unix sockets (the way to the daemon's or anyone's local
/// services; the network namespace already cuts TCP) however made — `socket`, a datagram
/// `socketpair`, an address in `sendto` —, sockets of families no namespace covers, and pushing
/// keystrokes into a terminal.
fn filter() -> Result<seccompiler::BpfProgram, String> {
    use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
    let text = |e: seccompiler::BackendError| e.to_string();
    let when = |arg: u8, op: SeccompCmpOp, value: u64| -> Result<SeccompRule, String> {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
            .and_then(|condition| SeccompRule::new(vec![condition]))
            .map_err(text)
    };
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = std::collections::BTreeMap::new();
    for call in [
        libc::SYS_ptrace,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_userfaultfd,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        // io_uring performs system calls (a socket, a connect) that this filter never sees: a
        // program made an AF_UNIX socket with IORING_OP_SOCKET and listed the user's ssh-agent
        // keys (the re-attack's H3).
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        // clone3 passes its flags in memory, out of a filter's reach: refused, so the C
        // library falls back to clone, whose flags are checked below.
        libc::SYS_clone3,
    ] {
        rules.insert(call, vec![]);
    }
    // Any namespace flag set: refused. (Rules match when the condition holds; MaskedEq(mask)
    // compares `arg & mask` with the value, so one rule per flag catches any of them.)
    let per_flag: Vec<SeccompRule> = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ]
    .into_iter()
    .map(|flag| when(0, SeccompCmpOp::MaskedEq(flag as u64), flag as u64))
    .collect::<Result<_, _>>()?;
    rules.insert(libc::SYS_clone, per_flag);
    // Sockets of the internet families (the namespace's own loopback and the forwarder) and
    // netlink (the namespace's own interfaces) only: no AF_UNIX (the way to ssh-agent, the
    // session bus and the daemon), and no family the network namespace does not cover (vsock
    // reaches the hypervisor's host). One rule whose conditions all hold: none of the allowed.
    let family_not_allowed = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK]
        .into_iter()
        .map(|family| SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, family as u64).map_err(text))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_socket, vec![SeccompRule::new(family_not_allowed).map_err(text)?]);
    // A datagram or seqpacket pair is an unbound Unix socket that `sendto` can aim at any
    // named socket (a datagram canary outside was reached that way); a stream pair cannot.
    let type_bits = |kind: libc::c_int| {
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(0xf), kind as u64).map_err(text)
    };
    rules.insert(
        libc::SYS_socketpair,
        vec![
            SeccompRule::new(vec![type_bits(libc::SOCK_DGRAM)?]).map_err(text)?,
            SeccompRule::new(vec![type_bits(libc::SOCK_SEQPACKET)?]).map_err(text)?,
        ],
    );
    // A destination address in `sendto` (defence in depth: with the rules above no socket here
    // can carry one anywhere but the namespace's own loopback).
    rules.insert(
        libc::SYS_sendto,
        vec![
            SeccompRule::new(vec![
                SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0).map_err(text)?,
            ])
            .map_err(text)?,
        ],
    );
    rules.insert(
        libc::SYS_ioctl,
        vec![when(1, SeccompCmpOp::Eq, libc::TIOCSTI)?, when(1, SeccompCmpOp::Eq, libc::TIOCLINUX)?],
    );
    rules.extend(crate::platform::confinement::set_id_mode_rules()?);
    let arch = std::env::consts::ARCH.try_into().map_err(text)?;
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch)
        .map_err(text)?;
    filter.try_into().map_err(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seccomp_filter_builds_for_this_architecture() {
        filter().unwrap();
    }

    #[test]
    fn reports_round_trip_as_json_lines() {
        for report in [
            Report::Refused { class: "hash_mismatch".into(), message: "m".into() },
            Report::Unavailable("no user namespaces".into()),
            Report::ExecFailed("x".into()),
            Report::Exited(3),
            Report::Signaled(9),
            Report::TimedOut,
        ] {
            let line = serde_json::to_string(&report).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Report>(&line).unwrap(), report);
        }
    }

    #[test]
    fn plan_frames_are_length_prefixed_json() {
        let plan = JailPlan {
            program: "/bin/true".into(),
            argv: vec!["true".into()],
            credential_env: vec![("GH_TOKEN".into(), Secret::new("planted-frame-credential"))],
            ..JailPlan::default()
        };
        let frame = plan_frame(&plan);
        let length = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length, frame.len() - 4);
        let read = serde_json::from_slice::<JailPlan>(&frame[4..]).unwrap();
        assert_eq!(read, plan);
        assert_eq!(read.credential_env[0].1.expose(), "planted-frame-credential", "the helper gets the value");
        assert!(!format!("{plan:?}").contains("planted-frame-credential"), "a plan never prints it");
    }
}
