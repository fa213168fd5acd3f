//! HTTP header rules shared by the LLM gateway, connector egress and the CONNECT proxies: which
//! headers belong to one connection rather than to the message (RFC 9110 §7.6.1), and so are never
//! forwarded, and how a proxy reads a CONNECT head.

/// Hop-by-hop headers, plus `Host`, which the client sets for the upstream.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// Whether `name` (any case) is in [`HOP_BY_HOP`].
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|hop| name.eq_ignore_ascii_case(hop))
}

/// Longest CONNECT request head a proxy reads.
pub const MAX_CONNECT_HEAD_BYTES: usize = 8 * 1024;

/// A proxy's request head, up to the blank line; `None` when the client sent none within
/// [`MAX_CONNECT_HEAD_BYTES`]. Read byte by byte: nothing after the head (a tunnel's first bytes)
/// may be consumed here.
pub async fn read_connect_head(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if head.len() >= MAX_CONNECT_HEAD_BYTES || stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}
