//! Process-wide facts and setup that every layer needs, kept in a leaf so that nothing below the
//! daemon has to import it: the version, the TLS crypto provider, `daemon.json`'s format, the
//! socket option every server here uses, and the allocator's purge delay and collection.

use serde::{Deserialize, Serialize};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Accepted connections with `TCP_NODELAY`: the gateway streams SSE events of a few hundred
/// bytes, and Nagle's algorithm would hold each one until the previous was acknowledged (up to
/// the client's 40 ms delayed ACK). Every server in the product and its benchmarks uses this.
pub fn no_delay(
    listener: tokio::net::TcpListener,
) -> axum::serve::TapIo<tokio::net::TcpListener, fn(&mut tokio::net::TcpStream)> {
    use axum::serve::ListenerExt;
    fn set(stream: &mut tokio::net::TcpStream) {
        if let Err(error) = stream.set_nodelay(true) {
            log_line!("aileron: cannot set TCP_NODELAY on a connection: {error}");
        }
    }
    listener.tap_io(set as fn(&mut tokio::net::TcpStream))
}

/// rustls needs one process-wide provider; we use ring (see DEPENDENCIES.md: aws-lc is a slow C build).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// mimalloc's `mi_option_purge_delay`: its place in `mi_option_t` (`mimalloc.h`, the same in its v2
/// and v3), for which `libmimalloc-sys` names no constant. A test starts a daemon with
/// `MIMALLOC_PURGE_DELAY` set and reads it back through this index (`it cli`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Makes the allocator hand memory back to the system as soon as it is freed, not a second later
/// and only once the freeing thread allocates again (mimalloc's default): the threads that compile
/// connectors at install would otherwise go idle holding what they freed (100 installed
/// connectors: 160 MiB against 136 MiB; docs/decisions/0004-actions-and-runs.md, "Allocator"). A `MIMALLOC_PURGE_DELAY`
/// the user set, which mimalloc read as the process loaded, is kept. Called as the daemon starts,
/// however it was started (auto-start, `aileron daemon start`, or `aileron daemon run` by hand).
pub fn return_freed_memory_at_once() {
    if crate::platform::env::get(crate::platform::env::MIMALLOC_PURGE_DELAY).is_none() {
        // SAFETY: sets one integer option, which mimalloc reads atomically wherever it purges.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
}

/// Hands back to the system what a connector's compile freed, on the threads that compiled it:
/// this one and rayon's, on which wasmtime compiles a module's functions in parallel. mimalloc
/// keeps a thread's freed pages for that thread's own next allocations, however short the purge
/// delay, and those threads may not allocate again for the daemon's life: installing one small
/// connector left 8 MiB resident that way (BENCHMARKS.md, issue 49, "Start and memory at
/// scale"). The sandbox calls it right after each compile (`RuntimeConfig::after_compile`).
pub fn return_compile_memory() {
    fn collect() {
        // SAFETY: `mi_collect` frees and purges only what the calling thread's heap no longer uses.
        unsafe { libmimalloc_sys::mi_collect(true) };
    }
    collect();
    rayon::broadcast(|_| collect());
}

/// The allocator's purge delay in effect, in milliseconds (`/v1/status`'s `allocator`).
#[allow(clippy::useless_conversion, reason = "`c_long` is `i32` on 32-bit targets")]
pub fn allocator_purge_delay_ms() -> i64 {
    // SAFETY: reads one integer option.
    i64::from(unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) })
}

/// `daemon.json`: how clients find and authenticate to the running daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub url: String,
    pub pid: u32,
    pub version: String,
    pub started_at: String,
    #[serde(with = "crate::platform::secret::exposed")]
    pub token: crate::platform::secret::Secret,
}

/// A descriptor that turns readable when process `pid` has exited (pidfd_open(2)); an error
/// when there is no such process or the kernel has no pidfds (before Linux 5.3).
pub fn pidfd(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int;
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours alone; owning it closes it when dropped.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The owners (uids, as this process's user namespace sees them) of every listening TCP socket
/// on `port`, whatever its address, from `/proc/net/tcp` and `/proc/net/tcp6`; `None` where
/// `/proc` does not tell. A client checks the daemon's port with it before it sends a token: a
/// port is any local user's to take once the daemon has let it go (the re-attack's H1).
pub fn tcp_listener_owners(port: u16) -> Option<Vec<u32>> {
    let mut owners = Vec::new();
    let mut read_any = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        read_any = true;
        owners.extend(listeners_in(&text, port));
    }
    read_any.then_some(owners)
}

/// The owner (uid, as this process's user namespace sees it) of the TCP socket at the other end
/// of a loopback connection that this process accepted (`local` is this end, `peer` the other):
/// one exact lookup through the kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, what `ss` uses),
/// not a walk of `/proc/net/tcp`. `Ok(None)` when no such socket is found (the peer is gone, or
/// lives in another network namespace); `Err` when the kernel cannot be asked.
pub fn tcp_peer_uid(local: std::net::SocketAddr, peer: std::net::SocketAddr) -> std::io::Result<Option<u32>> {
    use nix::sys::socket::{AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType};
    /// `SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST`, `NLMSG_ERROR`, `INET_DIAG_NOCOOKIE` (linux/sock_diag.h,
    /// linux/netlink.h, linux/inet_diag.h).
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLMSG_ERROR: u16 = 2;
    const HEADER: usize = 16;
    // In the `inet_diag_msg` answer: family, state, timer, retrans (4), the socket id (48), then
    // expires, rqueue, wqueue (12) before the uid.
    const UID_AT: usize = HEADER + 4 + 48 + 12;
    let address = |addr: std::net::SocketAddr| -> [u8; 16] {
        let mut bytes = [0u8; 16];
        match addr.ip() {
            std::net::IpAddr::V4(ip) => bytes[..4].copy_from_slice(&ip.octets()),
            std::net::IpAddr::V6(ip) => bytes = ip.octets(),
        }
        bytes
    };
    let family = if peer.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // `nlmsghdr`, then `inet_diag_req_v2` naming the peer's socket as the peer sees it: its own
    // address and port first (`src`, `sport`), ours as its remote end.
    let mut request = Vec::with_capacity(HEADER + 56);
    request.extend_from_slice(&((HEADER + 56) as u32).to_ne_bytes());
    request.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    request.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    request.extend_from_slice(&[0u8; 8]); // sequence number, port id
    request.extend_from_slice(&[family as u8, libc::IPPROTO_TCP as u8, 0, 0]);
    request.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    request.extend_from_slice(&peer.port().to_be_bytes());
    request.extend_from_slice(&local.port().to_be_bytes());
    request.extend_from_slice(&address(peer));
    request.extend_from_slice(&address(local));
    request.extend_from_slice(&0u32.to_ne_bytes()); // any interface
    request.extend_from_slice(&[0xff; 8]); // no cookie
    let socket = nix::sys::socket::socket(
        AddressFamily::Netlink,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    use std::os::fd::AsRawFd as _;
    nix::sys::socket::sendto(socket.as_raw_fd(), &request, &NetlinkAddr::new(0, 0), MsgFlags::empty())?;
    let mut answer = [0u8; 512];
    let read = nix::sys::socket::recv(socket.as_raw_fd(), &mut answer, MsgFlags::empty())?;
    let answer = &answer[..read];
    let field = |at: usize| answer.get(at..at + 4).map(|bytes| [bytes[0], bytes[1], bytes[2], bytes[3]]);
    let kind = answer.get(4..6).map(|bytes| u16::from_ne_bytes([bytes[0], bytes[1]]));
    match kind {
        Some(SOCK_DIAG_BY_FAMILY) => match field(UID_AT) {
            Some(uid) => Ok(Some(u32::from_ne_bytes(uid))),
            None => Err(std::io::Error::other("a short socket diagnostics answer")),
        },
        Some(NLMSG_ERROR) => match field(HEADER).map(i32::from_ne_bytes) {
            Some(error) if -error == libc::ENOENT => Ok(None),
            Some(error) => Err(std::io::Error::from_raw_os_error(-error)),
            None => Err(std::io::Error::other("a short socket diagnostics answer")),
        },
        _ => Err(std::io::Error::other("an unexpected socket diagnostics answer")),
    }
}

/// The uids of the `LISTEN` (`0A`) rows of one `/proc/net/tcp*` table whose local port is `port`.
fn listeners_in(table: &str, port: u16) -> impl Iterator<Item = u32> + '_ {
    table.lines().skip(1).filter_map(move |line| {
        let columns: Vec<&str> = line.split_whitespace().collect();
        let (local, state, uid) = (columns.get(1)?, columns.get(3)?, columns.get(7)?);
        let (_, local_port) = local.rsplit_once(':')?;
        (*state == "0A" && u16::from_str_radix(local_port, 16).ok()? == port).then(|| uid.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use axum::serve::Listener;

    #[tokio::test]
    async fn accepted_connections_have_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::no_delay(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await;
        assert!(stream.nodelay().unwrap(), "SSE events must not wait for Nagle's algorithm");
    }

    /// The other end of an accepted loopback connection is found, with its owner, in both
    /// families; a connection that is not there is not found.
    #[test]
    fn a_loopback_peers_owner_is_found() {
        let me = nix::unistd::geteuid().as_raw();
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = std::net::TcpListener::bind(bind) else { continue };
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (accepted, peer) = listener.accept().unwrap();
            let local = accepted.local_addr().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(super::tcp_peer_uid(local, peer).unwrap(), Some(me), "{bind}");
            let elsewhere = std::net::SocketAddr::new(peer.ip(), 1);
            assert_eq!(super::tcp_peer_uid(local, elsewhere).unwrap(), None, "{bind}");
        }
    }

    #[test]
    fn listeners_are_found_by_port_in_both_tables_with_their_owners() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:4758 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 100 0 0 10 0\n\
            1: 00000000:4758 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 112 1 0 100 0 0 10 0\n\
            2: 0100007F:4758 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1002        0 113 1 0 20 4 30 10 -1\n\
            3: 0100007F:4759 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1003        0 114 1 0 100 0 0 10 0\n";
        assert_eq!(super::listeners_in(tcp, 0x4758).collect::<Vec<_>>(), vec![1000, 1001], "listening rows only");
        let tcp6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 00000000000000000000000000000000:4758 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   65534        0 115 1 0 100 0 0 10 0\n";
        assert_eq!(super::listeners_in(tcp6, 0x4758).collect::<Vec<_>>(), vec![65534]);
        // This process's own listener is seen, with its own uid.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let owners = super::tcp_listener_owners(listener.local_addr().unwrap().port()).unwrap();
        assert_eq!(owners, vec![nix::unistd::geteuid().as_raw()]);
    }
}
