//! What the two confinements share (a launched agent, `launch/confine.rs`; a spawned program,
//! `spawn/jail.rs`): the directories hidden from confined processes, the identity maps of a new
//! user namespace, and dropping every capability before exec.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::platform::home::Home;

/// What the confined agent must not see: the Aileron home, and the audit log when it lives
/// elsewhere. Canonical paths, so a symlinked home is masked where it really is.
pub fn masked_directories(home: &Home) -> Vec<PathBuf> {
    let mut masks = vec![home.root().to_path_buf()];
    if let Some(parent) = home.audit_parent() {
        masks.push(parent.join("audit"));
    }
    // The audit witness's key: an agent that could read it could cosign a rewritten log.
    masks.push(home.witness_dir());
    let mut canonical: Vec<PathBuf> =
        masks.iter().map(|dir| std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())).collect();
    canonical.sort();
    canonical.dedup();
    canonical
}

/// Enters new `namespaces` (a user namespace among them) with the user's own uid and gid mapped
/// to themselves, so files keep their owners and agents that refuse to run as root still run.
/// The calling process must be single-threaded.
pub(crate) fn enter_namespaces(namespaces: nix::sched::CloneFlags) -> Result<(), String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    nix::sched::unshare(namespaces).map_err(|e| {
        format!(
            "creating user, mount, PID and network namespaces: {e} (unprivileged user namespaces may be disabled here)"
        )
    })?;
    write_proc("/proc/self/setgroups", "deny")?;
    write_proc("/proc/self/uid_map", &format!("{uid} {uid} 1\n"))?;
    write_proc("/proc/self/gid_map", &format!("{gid} {gid} 1\n"))
}

/// Writes a `/proc/self/*` control file (uid/gid maps, setgroups).
fn write_proc(path: &str, content: &str) -> Result<(), String> {
    std::fs::write(path, content).map_err(|e| format!("writing {path}: {e}"))
}

/// Every mount read-only but the `writable` paths, each bound back writable (the second
/// re-attack of 2026-12-05): Landlock refuses writes outside the allow-list but not `chmod`,
/// `chown`, `utimes` or extended attributes, so a confined agent could make `~/.bashrc` writable
/// to other users, and a spawned program `~/.ssh/id_rsa` readable to them (the eleventh
/// re-attack); on a read-only mount each fails (EROFS). Called in the confined process's own
/// mount namespace, before anything of the confined program runs. Kernels before 5.12 have no
/// `mount_setattr`: there it says what stays open and goes on, Landlock still holding every write.
///
/// Each path is opened as it was resolved ([`open_resolved`]) and bound from that descriptor, so
/// a path swapped for a link after it was checked is refused, never followed.
pub(crate) fn read_only_outside(writable: &[PathBuf]) -> Result<(), String> {
    if let Err(error) =
        set_mount_attributes(libc::AT_FDCWD, c"/", libc::AT_RECURSIVE as libc::c_uint, MOUNT_ATTR_RDONLY, 0)
    {
        log_line!(
            "aileron: warning: the filesystem could not be made read-only to the confined program ({error}): it can \
             still change modes, times and extended attributes outside its write list"
        );
        return Ok(());
    }
    // Device nodes are written through a read-only mount all the same, and must not be bound:
    // `/dev/ptmx` bound onto itself no longer finds its `pts` (openpty fails with ENOENT). Nor is
    // `/dev/pts` bound writable: new terminals open on it read-only, and the agent could otherwise
    // `chmod a+rw` the user's terminal for every local user to write to (the seventh re-attack).
    for path in writable.iter().filter(|path| !path.starts_with("/dev")) {
        let Some(fd) = open_resolved(path)? else { continue };
        let kind = file_type(&fd);
        if kind != libc::S_IFDIR && kind != libc::S_IFREG {
            continue;
        }
        let tree = clone_tree(&fd).map_err(|e| format!("binding {} for writing: {e}", path.display()))?;
        match set_tree_attributes(&tree, 0, MOUNT_ATTR_RDONLY) {
            Ok(()) => {}
            // A mount inside it that the host made read-only is locked so in this namespace (the
            // change is refused whole, EPERM): that one stays read-only, the path itself is made
            // writable, and the launch goes on (the twenty-seventh re-attack's R8: a read-only
            // bind in the workspace refused every launch).
            Err(error) if error.raw_os_error() == Some(libc::EPERM) => {
                set_mount_attributes(tree.as_raw_fd(), c"", libc::AT_EMPTY_PATH as libc::c_uint, 0, MOUNT_ATTR_RDONLY)
                    .map_err(|e| format!("making {} writable again: {e}", path.display()))?;
                log_line!(
                    "aileron: note: {} holds a mount the system made read-only: the mounts inside it stay read-only \
                     to the agent",
                    path.display()
                );
            }
            Err(error) => return Err(format!("making {} writable again: {error}", path.display())),
        }
        attach_tree(&tree, Target::Descriptor(&fd))
            .map_err(|e| format!("binding {} for writing: {e}", path.display()))?;
    }
    Ok(())
}

/// `openat2(dir or AT_FDCWD, path, flags|O_CLOEXEC, resolve)`; the errno when it fails. No
/// fallback: a kernel without `openat2` (before 5.6) has no Landlock either, so a confinement is
/// refused there anyway.
pub(crate) fn open_path(dir: Option<&OwnedFd>, path: &Path, flags: libc::c_int, resolve: u64) -> Result<OwnedFd, i32> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: open_how is plain data; zero is "no flags".
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    let dir = dir.map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    // SAFETY: openat2 with a valid C string and a properly sized `open_how`.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    } as i32;
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A path the launcher or the daemon resolved (absolute, no link on its way), opened again
/// (`O_PATH`) without following a link anywhere on its way: `None` when it is gone since. A link
/// on its way now means it changed after it was checked (a directory swapped for a link to
/// `~/.config` by another agent writing there: the twenty-seventh re-attack's N5), and is refused.
pub(crate) fn open_resolved(path: &Path) -> Result<Option<OwnedFd>, String> {
    match open_path(None, path, libc::O_PATH, libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS) {
        Ok(fd) => Ok(Some(fd)),
        Err(libc::ENOENT) => Ok(None),
        Err(libc::ELOOP) => Err(format!(
            "{} is reached through a symbolic link now: it changed after it was checked, so it is not granted",
            path.display()
        )),
        Err(errno) => Err(format!("opening {}: {}", path.display(), std::io::Error::from_raw_os_error(errno))),
    }
}

/// The `S_IFMT` bits of what `fd` is (0 when it cannot be read).
pub(crate) fn file_type(fd: &OwnedFd) -> libc::mode_t {
    // SAFETY: fstat fills a zeroed stat for a descriptor we own.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } == 0 { stat.st_mode & libc::S_IFMT } else { 0 }
}

/// A Landlock rule granting `access` beneath what `fd` is; a file gets only the rights a file can
/// have (as `landlock::path_beneath_rules` does for paths).
pub(crate) fn beneath(fd: &OwnedFd, access: landlock::BitFlags<landlock::AccessFs>) -> landlock::PathBeneath<&OwnedFd> {
    use landlock::{ABI, AccessFs};
    let access = if file_type(fd) == libc::S_IFDIR { access } else { access & AccessFs::from_file(ABI::V6) };
    landlock::PathBeneath::new(fd, access)
}

/// A detached copy of the mount tree at `fd`, with every mount beneath it (`open_tree(2)` with
/// `OPEN_TREE_CLONE | AT_RECURSIVE`), to be attached elsewhere with [`attach_tree`].
pub(crate) fn clone_tree(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let flags = OPEN_TREE_CLONE
        | libc::O_CLOEXEC as libc::c_uint
        | libc::AT_RECURSIVE as libc::c_uint
        | libc::AT_EMPTY_PATH as libc::c_uint;
    // SAFETY: a descriptor, an empty NUL-terminated path and integer flags, as open_tree(2) takes them.
    let tree = unsafe { libc::syscall(libc::SYS_open_tree, fd.as_raw_fd(), c"".as_ptr(), flags) };
    if tree < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: open_tree returned a new descriptor, owned from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(tree as i32) })
}

/// A read-only detached copy of the mount tree at `fd` ([`clone_tree`] made read-only whole).
pub(crate) fn read_only_clone(fd: &OwnedFd) -> std::io::Result<OwnedFd> {
    let tree = clone_tree(fd)?;
    set_tree_attributes(&tree, MOUNT_ATTR_RDONLY, 0)?;
    Ok(tree)
}

/// A detached read-only mount of a file holding `contents`, alone on a tmpfs of its own
/// (`fsopen`, `fsmount`, then `open_tree` of the file): what a process attaches in a mount
/// namespace it may mount in when the file it copies lies in one it may not (the user's own, for
/// a process without privilege: a clone taken there is refused, the twenty-ninth re-attack's A3).
pub(crate) fn detached_file(contents: &[u8]) -> std::io::Result<OwnedFd> {
    use std::io::Write as _;
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    const MOUNT_ATTR_NOSUID: u64 = 0x2;
    const MOUNT_ATTR_NODEV: u64 = 0x4;
    const MOUNT_ATTR_NOEXEC: u64 = 0x8;
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let owned = |fd: libc::c_long| {
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the system call returned a new descriptor, owned from here on.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    };
    // SAFETY: a NUL-terminated file system name and integer flags, as fsopen(2) takes them.
    let context = owned(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), FSOPEN_CLOEXEC) })?;
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY: the context's descriptor and the create command, which takes no key or value.
    let created = unsafe { libc::syscall(libc::SYS_fsconfig, context.as_raw_fd(), FSCONFIG_CMD_CREATE, null, null, 0) };
    if created < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let attributes = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    // SAFETY: the created context's descriptor and integer flags, as fsmount(2) takes them.
    let root = owned(unsafe { libc::syscall(libc::SYS_fsmount, context.as_raw_fd(), FSMOUNT_CLOEXEC, attributes) })?;
    // SAFETY: openat on the new tmpfs's root with a NUL-terminated name, creating the file.
    let file = owned(unsafe {
        libc::openat(root.as_raw_fd(), c"file".as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o644)
    } as libc::c_long)?;
    std::fs::File::from(file).write_all(contents)?;
    let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    // SAFETY: the tmpfs root's descriptor, a NUL-terminated name in it and integer flags.
    let tree = owned(unsafe { libc::syscall(libc::SYS_open_tree, root.as_raw_fd(), c"file".as_ptr(), flags) })?;
    set_tree_attributes(&tree, MOUNT_ATTR_RDONLY, 0)?;
    Ok(tree)
}

/// Where [`attach_tree`] attaches a tree.
pub(crate) enum Target<'a> {
    /// What a descriptor is (opened with no link followed), whatever its path says now.
    Descriptor(&'a OwnedFd),
    /// A path, resolved now.
    Path(&'a Path),
}

/// Attaches a detached tree ([`clone_tree`]) at `target` (`move_mount(2)`).
pub(crate) fn attach_tree(tree: &OwnedFd, target: Target<'_>) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
    let (dir, path, flags) = match target {
        Target::Descriptor(fd) => (fd.as_raw_fd(), std::ffi::CString::default(), MOVE_MOUNT_T_EMPTY_PATH),
        Target::Path(path) => {
            (libc::AT_FDCWD, std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?, 0)
        }
    };
    // SAFETY: a detached mount's descriptor with an empty path, and a target as a descriptor or a
    // NUL-terminated path, as move_mount(2) takes them.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            dir,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | flags,
        )
    };
    if moved < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// Sets and clears mount attributes on a detached tree ([`clone_tree`]) and every mount in it.
fn set_tree_attributes(tree: &OwnedFd, set: u64, clear: u64) -> std::io::Result<()> {
    let flags = libc::AT_EMPTY_PATH as libc::c_uint | libc::AT_RECURSIVE as libc::c_uint;
    set_mount_attributes(tree.as_raw_fd(), c"", flags, set, clear)
}

/// `mount_setattr(2)`'s attribute for read-only, and its argument (`struct mount_attr`).
const MOUNT_ATTR_RDONLY: u64 = 0x1;
#[repr(C)]
struct MountAttributes {
    set: u64,
    clear: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets and clears mount attributes on the mount at `dir` and `path` (`AT_EMPTY_PATH` in `flags`:
/// the one `dir` is), and with `AT_RECURSIVE` in `flags` on every mount beneath it.
fn set_mount_attributes(
    dir: std::os::fd::RawFd,
    path: &std::ffi::CStr,
    flags: libc::c_uint,
    set: u64,
    clear: u64,
) -> std::io::Result<()> {
    let mut attributes = MountAttributes { set, clear, propagation: 0, userns_fd: 0 };
    // SAFETY: a NUL-terminated path, a `struct mount_attr` and its size, as mount_setattr(2) takes them.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir,
            path.as_ptr(),
            flags,
            &mut attributes as *mut MountAttributes,
            std::mem::size_of::<MountAttributes>(),
        )
    };
    if done < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
}

/// seccomp rules (each refused with the filter's errno) for a set-user-ID or set-group-ID mode
/// given to a file: a confined program could `chmod 4755` a file in its write scopes (or create
/// it so) and leave a program that any local user runs as the user (the eleventh re-attack). The
/// mode's argument is checked bit by bit in every call that sets one; `openat2` passes its mode
/// in memory, out of a filter's reach, and is refused whole (the C libraries do not use it).
pub(crate) fn set_id_mode_rules() -> Result<Vec<(i64, Vec<seccompiler::SeccompRule>)>, String> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let set_id_bit = |arg: u8| -> Result<Vec<SeccompRule>, String> {
        [libc::S_ISUID, libc::S_ISGID]
            .into_iter()
            .map(|bit| {
                SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(u64::from(bit)),
                    u64::from(bit),
                )
                .and_then(|condition| SeccompRule::new(vec![condition]))
                .map_err(|e| e.to_string())
            })
            .collect()
    };
    // (call, the index of its mode argument)
    #[allow(unused_mut)]
    let mut calls = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (libc::SYS_fchmodat2, 2),
        (libc::SYS_openat, 3),
        (libc::SYS_mknodat, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([(libc::SYS_chmod, 1), (libc::SYS_open, 2), (libc::SYS_creat, 1), (libc::SYS_mknod, 1)]);
    let mut rules =
        calls.into_iter().map(|(call, arg)| Ok((call, set_id_bit(arg)?))).collect::<Result<Vec<_>, String>>()?;
    rules.push((libc::SYS_openat2, Vec::new()));
    Ok(rules)
}

/// Empties the capability bounding set: whatever runs after the next exec keeps none of the user
/// namespace's capabilities, even as uid 0 inside it.
pub(crate) fn drop_capability_bounding_set() {
    let last_capability = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    for capability in 0..=last_capability {
        // SAFETY: prctl with integer arguments; EINVAL for capabilities this kernel lacks is fine.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, capability, 0, 0, 0) };
    }
}

/// `ip link set lo up`, by ioctl: the namespace's loopback starts down.
pub(crate) fn loopback_up() -> Result<(), String> {
    // SAFETY: a plain socket for interface ioctls, closed below.
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if socket < 0 {
        return Err(format!("bringing the loopback up: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the descriptor is ours.
    let socket = unsafe { OwnedFd::from_raw_fd(socket) };
    // SAFETY: a zeroed ifreq with its name set is a valid argument for SIOCGIFFLAGS/SIOCSIFFLAGS.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: see above.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } < 0 {
        return Err(format!("reading the loopback's flags: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: the union's flags member is what SIOCGIFFLAGS filled.
    unsafe { request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: see above.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } < 0 {
        return Err(format!("bringing the loopback up: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Sends `fds` with a one-line `message` over a Unix stream socket (`SCM_RIGHTS`): the
/// confinement helper hands the listeners it made inside the agent's network namespace to the
/// launcher, and the launcher hands them on to the daemon.
pub fn send_fds(socket: &impl AsRawFd, message: &[u8], fds: &[std::os::fd::RawFd]) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    let iov = [std::io::IoSlice::new(message)];
    let control = [ControlMessage::ScmRights(fds)];
    let sent = sendmsg::<()>(socket.as_raw_fd(), &iov, &control, MsgFlags::empty(), None)?;
    if sent != message.len() {
        return Err(std::io::Error::other("the message was cut short"));
    }
    Ok(())
}

/// Receives one message of at most `MAX_MESSAGE` bytes and the descriptors sent with it
/// ([`send_fds`]); every received descriptor is close-on-exec.
pub fn receive_fds(socket: &impl AsRawFd) -> std::io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    const MAX_MESSAGE: usize = 4096;
    let mut buffer = vec![0u8; MAX_MESSAGE];
    let mut control = nix::cmsg_space!([std::os::fd::RawFd; 16]);
    let (length, fds) = {
        let mut iov = [std::io::IoSliceMut::new(&mut buffer)];
        let received = recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut control), MsgFlags::MSG_CMSG_CLOEXEC)?;
        let mut fds = Vec::new();
        for message in received.cmsgs()? {
            if let ControlMessageOwned::ScmRights(received) = message {
                // SAFETY: the kernel just installed these descriptors in this process for us.
                fds.extend(received.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        (received.bytes, fds)
    };
    buffer.truncate(length);
    Ok((buffer, fds))
}
