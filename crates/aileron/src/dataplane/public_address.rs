//! Which addresses count as the public internet (SPEC §4.4): connector egress and a spawned
//! program's proxy resolve names to public addresses only and dial what they checked.

/// Resolves a connector's host names to public addresses only (SPEC §4.4): loopback, private,
/// link-local, shared, unique-local and unspecified addresses are refused, so a name cannot lead a
/// connector to the daemon itself or into the local network. An address the manifest names
/// literally (`127.0.0.1:8080` for a local fake) is never resolved, so it is unaffected. The
/// connection goes to the addresses returned here: what was checked is what is dialled.
pub struct PublicOnlyResolver;

/// The words that mark a refused resolution in an error chain.
pub const NON_PUBLIC_REFUSAL: &str = "resolves only to non-public addresses";

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<std::net::SocketAddr> = found.into_iter().filter(|addr| is_public(addr.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} {NON_PUBLIC_REFUSAL}").into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether an address is on the public internet.
pub fn is_public(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        std::net::IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(std::net::IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback() || v6.is_unspecified() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_public;

    #[test]
    fn only_public_addresses_are_public() {
        for (ip, public) in [
            ("93.184.216.34", true),
            ("2606:4700::1111", true),
            ("127.0.0.1", false),
            ("10.1.2.3", false),
            ("172.20.0.1", false),
            ("192.168.1.1", false),
            ("169.254.169.254", false),
            ("100.64.0.1", false),
            ("0.0.0.0", false),
            ("::1", false),
            ("::", false),
            ("fd00::1", false),
            ("fe80::1", false),
            ("::ffff:127.0.0.1", false),
        ] {
            assert_eq!(is_public(ip.parse().unwrap()), public, "{ip}");
        }
    }
}
