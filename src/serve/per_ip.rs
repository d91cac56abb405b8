//! The cap on the connections one address holds open ([`Limits::max_connections_per_ip`]),
//! counted across every [`serve`](super::serve) of the process: the gateway's workers each
//! serve the same socket, and a client's connections land on any of them.
//!
//! [`Limits::max_connections_per_ip`]: super::Limits::max_connections_per_ip

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

/// Whom a connection counts against: an IPv4 address, or an IPv6 address's `/64` (a host
/// given IPv6 is routinely given a whole `/64`, so one client would otherwise have 2^64
/// addresses to spread its connections over). An IPv4 address mapped into IPv6 is its IPv4.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Owner {
    V4(u32),
    V6(u64),
}

impl Owner {
    fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Owner::V4(u32::from(v4)),
            IpAddr::V6(v6) => Owner::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

/// The connections open per owner, those of owners with none left removed.
static OPEN: LazyLock<Mutex<HashMap<Owner, usize>>> = LazyLock::new(Mutex::default);

fn open() -> MutexGuard<'static, HashMap<Owner, usize>> {
    OPEN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection counted against its owner, until dropped.
#[derive(Debug)]
pub(super) struct Held(Owner);

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = open();
        if let Some(n) = open.get_mut(&self.0) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.0);
            }
        }
    }
}

/// Counts a new connection from `ip` against `cap` (`None`: no cap, nothing counted): `Err`
/// when its owner holds `cap` already.
pub(super) fn hold(ip: IpAddr, cap: Option<usize>) -> Result<Option<Held>, ()> {
    let Some(cap) = cap else {
        return Ok(None);
    };
    let owner = Owner::of(ip);
    let mut open = open();
    let n = open.entry(owner).or_insert(0);
    if *n >= cap {
        return Err(());
    }
    *n += 1;
    Ok(Some(Held(owner)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_slash_64_counts_as_one_and_a_mapped_ipv4_as_its_ipv4() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Owner::of(a), Owner::of(b));
        assert_ne!(Owner::of(a), Owner::of(c));
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(Owner::of(v4), Owner::of(mapped));
    }

    #[test]
    fn an_owner_holds_up_to_the_cap_and_gets_room_back_as_connections_close() {
        // An address of the documentation range, which no other test uses.
        let ip: IpAddr = "203.0.113.77".parse().unwrap();
        assert!(
            matches!(hold(ip, None), Ok(None)),
            "no cap: nothing counted"
        );
        let first = hold(ip, Some(2)).unwrap();
        let second = hold(ip, Some(2)).unwrap();
        assert!(first.is_some() && second.is_some());
        assert!(hold(ip, Some(2)).is_err());
        let other: IpAddr = "203.0.113.78".parse().unwrap();
        assert!(hold(other, Some(2)).is_ok(), "another address has its own");
        drop(first);
        let third = hold(ip, Some(2)).unwrap();
        assert!(hold(ip, Some(2)).is_err());
        drop((second, third));
        assert!(!open().contains_key(&Owner::of(ip)), "forgotten at none");
    }
}
