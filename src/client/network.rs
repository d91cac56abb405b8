//! Networks: the prefix of a client address that a limit or a token binding counts by.
//!
//! One place for every prefix the room uses: an admission token is bound to the IPv4 /24 or IPv6
//! /48 of its visitor ([`Network`]); the new-visitor limit counts an IPv4 address as it is and an
//! IPv6 address by its /64 ([`client_group`]). An IPv4-mapped IPv6 address always counts as IPv4.

use std::net::{IpAddr, Ipv6Addr};

/// The network an admission token is bound to: the /24 of an IPv4 address, the /48 of an IPv6
/// address (an IPv4-mapped IPv6 address counts as IPv4), or `Unknown` when the client IP could
/// not be found. It is signed into the token (inside the MAC), so it cannot be edited.
/// Its text form inside a token is written and read by the token format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Network {
    /// No client IP was known.
    Unknown,
    /// An IPv4 /24.
    V4([u8; 3]),
    /// An IPv6 /48.
    V6([u8; 6]),
}

impl Network {
    /// The network of a client IP, or `Unknown` without one.
    pub(crate) fn of(ip: Option<IpAddr>) -> Self {
        match ip.map(|ip| ip.to_canonical()) {
            None => Network::Unknown,
            Some(IpAddr::V4(v4)) => {
                let o = v4.octets();
                Network::V4([o[0], o[1], o[2]])
            }
            Some(IpAddr::V6(v6)) => {
                let o = v6.octets();
                Network::V6([o[0], o[1], o[2], o[3], o[4], o[5]])
            }
        }
    }
}

/// The client an address counts as for the new-visitor limit: an IPv4 address as it is, an
/// IPv4-mapped IPv6 address as its IPv4 address, any other IPv6 address as its /64 (the last 64
/// bits zeroed).
pub(crate) fn client_group(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn network_of_an_address() {
        assert_eq!(Network::of(ip("203.0.113.7")), Network::V4([203, 0, 113]));
        assert_eq!(
            Network::of(ip("203.0.113.7")),
            Network::of(ip("203.0.113.99"))
        );
        assert_ne!(
            Network::of(ip("203.0.113.7")),
            Network::of(ip("203.0.112.7"))
        );
        // An IPv4-mapped IPv6 address is its IPv4 address.
        assert_eq!(
            Network::of(ip("::ffff:203.0.113.200")),
            Network::V4([203, 0, 113])
        );
        assert_eq!(
            Network::of(ip("2001:db8:1:2::1")),
            Network::of(ip("2001:db8:1:ffff::9"))
        );
        assert_ne!(
            Network::of(ip("2001:db8:1::1")),
            Network::of(ip("2001:db8:2::1"))
        );
        assert_eq!(Network::of(None), Network::Unknown);
    }

    fn addr(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn client_groups() {
        assert_eq!(client_group(addr("203.0.113.7")), addr("203.0.113.7"));
        assert_eq!(
            client_group(addr("::ffff:203.0.113.7")),
            addr("203.0.113.7")
        );
        assert_eq!(
            client_group(addr("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            addr("2001:db8:1:2::")
        );
        assert_eq!(client_group(addr("2001:db8:1:2::")), addr("2001:db8:1:2::"));
        assert_eq!(client_group(addr("::1")), addr("::"));
        // Only the mapped form is IPv4; the deprecated compatible form `::a.b.c.d` is IPv6.
        assert_eq!(client_group(addr("::203.0.113.7")), addr("::"));
    }
}
