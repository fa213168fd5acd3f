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
