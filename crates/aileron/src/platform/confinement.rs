//! What the two confinements share (a launched agent, `launch/confine.rs`; a spawned program,
//! `spawn/jail.rs`): the directories hidden from confined processes, the identity maps of a new
//! user namespace, and dropping every capability before exec.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

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
pub(crate) fn read_only_outside(writable: &[PathBuf]) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    if let Err(error) = set_mount_attributes(std::path::Path::new("/"), MOUNT_ATTR_RDONLY, 0) {
        log_line!(
            "aileron: warning: the filesystem could not be made read-only to the confined program ({error}): it can \
             still change modes, times and extended attributes outside its write list"
        );
        return Ok(());
    }
    let none: Option<&str> = None;
    // Device nodes are written through a read-only mount all the same, and must not be bound:
    // `/dev/ptmx` bound onto itself no longer finds its `pts` (openpty fails with ENOENT). Nor is
    // `/dev/pts` bound writable: new terminals open on it read-only, and the agent could otherwise
    // `chmod a+rw` the user's terminal for every local user to write to (the seventh re-attack).
    let files_or_directories = |path: &&PathBuf| std::fs::metadata(path).is_ok_and(|m| m.is_dir() || m.is_file());
    for path in writable.iter().filter(|path| !path.starts_with("/dev")).filter(files_or_directories) {
        mount(Some(path), path, none, MsFlags::MS_BIND | MsFlags::MS_REC, none)
            .map_err(|e| format!("binding {} for writing: {e}", path.display()))?;
        set_mount_attributes(path, 0, MOUNT_ATTR_RDONLY)
            .map_err(|e| format!("making {} writable again: {e}", path.display()))?;
    }
    Ok(())
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

/// Sets and clears mount attributes on the mount at `path` and every mount beneath it.
fn set_mount_attributes(path: &std::path::Path, set: u64, clear: u64) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut attributes = MountAttributes { set, clear, propagation: 0, userns_fd: 0 };
    // SAFETY: a NUL-terminated path, a `struct mount_attr` and its size, as mount_setattr(2) takes them.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
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
