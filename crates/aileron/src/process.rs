//! Process-wide facts and setup that every layer needs, kept in a leaf so that nothing below the
//! daemon has to import it: the version, the TLS crypto provider, `daemon.json`'s format, and the
//! socket option every server here uses.

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
            eprintln!("aileron: cannot set TCP_NODELAY on a connection: {error}");
        }
    }
    listener.tap_io(set as fn(&mut tokio::net::TcpStream))
}

/// rustls needs one process-wide provider; we use ring (see DEPENDENCIES.md: aws-lc is a slow C build).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `daemon.json`: how clients find and authenticate to the running daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub url: String,
    pub pid: u32,
    pub version: String,
    pub started_at: String,
    #[serde(with = "crate::secret::exposed")]
    pub token: crate::secret::Secret,
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
}
