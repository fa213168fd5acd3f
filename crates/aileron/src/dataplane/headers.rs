//! HTTP header rules shared by the LLM gateway and connector egress: which headers belong to one
//! connection rather than to the message (RFC 9110 §7.6.1), and so are never forwarded.

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
