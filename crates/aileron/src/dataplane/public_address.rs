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
            let public: Vec<std::net::SocketAddr> = found.into_iter().filter(|addr| is_elsewhere(addr.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} {NON_PUBLIC_REFUSAL}").into());
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether a destination is on the public internet and not this machine: a public address of
/// one of the host's own interfaces reaches every service listening on `0.0.0.0` here, the
/// daemon's neighbours included (the re-attack of 2026-12-05).
pub fn is_elsewhere(ip: std::net::IpAddr) -> bool {
    is_public(ip) && !is_own(&own_addresses(), ip)
}

/// One of this host's interface addresses, and how much of its network reaches this host: the
/// whole network for a loopback interface's (every address of a range put on `lo` is answered
/// here), the address alone for any other interface's (its neighbours are other machines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnAddress {
    pub address: std::net::IpAddr,
    /// Leading bits of `address` that every address reaching this host shares.
    pub prefix: u8,
}

impl OwnAddress {
    fn covers(&self, ip: std::net::IpAddr) -> bool {
        let bits = |ip: std::net::IpAddr| match ip {
            std::net::IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u32),
            std::net::IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        let ((own, width), (other, other_width)) = (bits(self.address), bits(ip));
        let prefix = u32::from(self.prefix).min(width);
        width == other_width && (prefix == 0 || (own ^ other) >> (width - prefix) == 0)
    }
}

/// Whether `ip`, or the IPv4 address an IPv6 form of it carries (`[::ffff:a.b.c.d]` reaches
/// what `a.b.c.d` does; the re-attack's M1), is one of `own`.
fn is_own(own: &[OwnAddress], ip: std::net::IpAddr) -> bool {
    let carried = match ip {
        std::net::IpAddr::V6(v6) => embedded_ipv4(v6).map(std::net::IpAddr::V4),
        std::net::IpAddr::V4(_) => None,
    };
    own.iter().any(|own| own.covers(ip) || carried.is_some_and(|v4| own.covers(v4)))
}

/// How long the host's interface addresses are trusted before they are listed again (an
/// address that DHCP or a VPN adds is refused within this long).
const OWN_ADDRESSES_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// The addresses of this host's interfaces (`getifaddrs`), listed at most every
/// [`OWN_ADDRESSES_FOR`].
pub fn own_addresses() -> std::sync::Arc<[OwnAddress]> {
    type Listed = Option<(std::time::Instant, std::sync::Arc<[OwnAddress]>)>;
    static LISTED: std::sync::Mutex<Listed> = std::sync::Mutex::new(None);
    let mut listed = LISTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((at, addresses)) = listed.as_ref()
        && at.elapsed() < OWN_ADDRESSES_FOR
    {
        return addresses.clone();
    }
    let ip = |address: &nix::sys::socket::SockaddrStorage| match (address.as_sockaddr_in(), address.as_sockaddr_in6()) {
        (Some(v4), _) => Some(std::net::IpAddr::V4(v4.ip())),
        (_, Some(v6)) => Some(std::net::IpAddr::V6(v6.ip())),
        _ => None,
    };
    let addresses: std::sync::Arc<[OwnAddress]> = nix::ifaddrs::getifaddrs()
        .map(|interfaces| {
            interfaces
                .filter_map(|interface| {
                    let address = ip(interface.address.as_ref()?)?;
                    let loopback = interface.flags.contains(nix::net::if_::InterfaceFlags::IFF_LOOPBACK);
                    let whole = if address.is_ipv4() { 32 } else { 128 };
                    let netmask = interface.netmask.as_ref().and_then(ip);
                    let prefix = match netmask {
                        Some(std::net::IpAddr::V4(mask)) if loopback => u32::from(mask).leading_ones() as u8,
                        Some(std::net::IpAddr::V6(mask)) if loopback => u128::from(mask).leading_ones() as u8,
                        _ => whole,
                    };
                    Some(OwnAddress { address, prefix })
                })
                .collect()
        })
        .unwrap_or_default();
    *listed = Some((std::time::Instant::now(), addresses.clone()));
    addresses
}

/// Whether an address is on the public internet. IPv6 forms that carry an IPv4 address (mapped,
/// the deprecated compatible form, NAT64's well-known prefix, 6to4) are judged by that address,
/// so `[64:ff9b::7f00:1]` is loopback here as it is once a translator forwards it.
pub fn is_public(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (b == 18 || b == 19)))
        }
        std::net::IpAddr::V6(v6) => {
            if let Some(v4) = embedded_ipv4(v6) {
                return is_public(std::net::IpAddr::V4(v4));
            }
            let [first, second, ..] = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                // The rest of NAT64's prefix, its local-use /48 included (RFC 8215): what it reaches
                // is the local network's choice.
                || (first == 0x64 && second == 0xff9b))
        }
    }
}

/// The IPv4 address an IPv6 one carries: `::ffff:a.b.c.d`, `::a.b.c.d`, `::ffff:0:a.b.c.d`
/// (RFC 2765), `64:ff9b::a.b.c.d` (RFC 6052) or `2002:AABB:CCDD::/48` (6to4, RFC 3056).
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let v4 = |high: u16, rest: u16| std::net::Ipv4Addr::from((u32::from(high) << 16) | u32::from(rest));
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    match v6.segments() {
        // `::` and `::1` are themselves, not IPv4 addresses.
        [0, 0, 0, 0, 0, 0, high, rest] if (high, rest) > (0, 1) => Some(v4(high, rest)),
        [0x64, 0xff9b, 0, 0, 0, 0, high, rest] => Some(v4(high, rest)),
        // `::ffff:0:a.b.c.d`, IPv4-translated (SIIT, RFC 2765): the eighth re-attack's route to a
        // private address through a translator on the IPv6 default route.
        [0, 0, 0, 0, 0xffff, 0, high, rest] => Some(v4(high, rest)),
        [0x2002, high, rest, ..] => Some(v4(high, rest)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{OwnAddress, is_elsewhere, is_own, is_public, own_addresses};

    /// Every address of the host's interfaces is refused, whatever its range; a public one
    /// elsewhere is not.
    #[test]
    fn the_hosts_own_addresses_are_not_elsewhere() {
        let own = own_addresses();
        let loopback = own.iter().find(|own| own.address == "127.0.0.1".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(loopback.map(|own| own.prefix), Some(8), "lo's whole 127.0.0.0/8 reaches this host: {own:?}");
        for own in own.iter() {
            assert!(!is_elsewhere(own.address), "{own:?}");
        }
        let public: std::net::IpAddr = "93.184.216.34".parse().unwrap();
        assert!(is_elsewhere(public) || is_own(&own, public));
    }

    /// The re-attack of 2026-12-05 (M1, L1): the IPv6 form of an own IPv4 address, and any
    /// address of a range put on a loopback interface, reach this host as the address does.
    #[test]
    fn an_own_address_is_own_in_every_form_and_a_loopback_range_is_own_whole() {
        let own = [
            OwnAddress { address: "93.184.216.7".parse().unwrap(), prefix: 32 },
            OwnAddress { address: "198.51.100.1".parse().unwrap(), prefix: 24 },
            OwnAddress { address: "2001:db8::7".parse().unwrap(), prefix: 128 },
        ];
        for (ip, expected) in [
            ("93.184.216.7", true),
            ("::ffff:93.184.216.7", true),
            ("64:ff9b::5db8:d807", true),
            ("93.184.216.8", false),
            ("198.51.100.55", true),
            ("::ffff:198.51.100.200", true),
            ("198.51.101.1", false),
            ("2001:db8::7", true),
            ("2001:db8::8", false),
        ] {
            assert_eq!(is_own(&own, ip.parse().unwrap()), expected, "{ip}");
        }
    }

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
            // The re-attack of 2026-12-05: ranges and IPv6 forms the check let through.
            ("198.18.0.1", false),
            ("198.19.255.1", false),
            ("192.0.0.8", false),
            ("240.0.0.1", false),
            ("224.0.0.1", false),
            ("::127.0.0.1", false),
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::a00:1", false),
            ("2002:7f00:1::", false),
            ("2002:c0a8:101::1", false),
            ("64:ff9b:1::1", false),
            ("ff02::1", false),
            ("198.20.0.1", true),
            ("192.0.1.1", true),
            ("64:ff9b::5db8:d822", true),
            ("2002:5db8:d822::1", true),
            // The eighth re-attack: IPv4-translated addresses.
            ("::ffff:0:7f00:1", false),
            ("::ffff:0:c0a8:101", false),
            ("::ffff:0:5db8:d822", true),
        ] {
            assert_eq!(is_public(ip.parse().unwrap()), public, "{ip}");
        }
    }
}
