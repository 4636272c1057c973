//! Defaults and parsing: ports, groups, rates, server addresses.
//!
//! Defaults work on a LAN out of the box: administratively scoped IPv4
//! groups in 239.255.0.0/16, TTL 1.
//!
//! | what | default |
//! |---|---|
//! | request connection (TCP) | port 4700 |
//! | data channel | 239.255.47.1 port 4701 (IPv6: ff15::4701) |
//! | announcement channel | 239.255.47.2 port 4702 (IPv6: ff15::4702) |
//! | metrics and status (HTTP) | port 4703 |

use crate::NetError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// TCP port of the request connection.
pub const REQUEST_PORT: u16 = 4700;
/// UDP port of the data channel.
pub const DATA_PORT: u16 = 4701;
/// UDP port of the announcement channel.
pub const ANNOUNCE_PORT: u16 = 4702;
/// HTTP port of `/metrics` and `/status`.
pub const METRICS_PORT: u16 = 4703;
/// Default IPv4 data group.
pub const DATA_GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 47, 1);
/// Default IPv4 announcement group.
pub const ANNOUNCE_GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 47, 2);
/// Default IPv6 data group (site-local scope).
pub const DATA_GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff15, 0, 0, 0, 0, 0, 0, 0x4701);
/// Default IPv6 announcement group.
pub const ANNOUNCE_GROUP_V6: Ipv6Addr = Ipv6Addr::new(0xff15, 0, 0, 0, 0, 0, 0, 0x4702);

/// UDP port of push mode's data group.
pub const PUSH_DATA_PORT: u16 = 4711;
/// UDP port of push mode's catalogue (announcement) group.
pub const PUSH_ANNOUNCE_PORT: u16 = 4712;
/// HTTP port of `repocast push`'s `/metrics` and `/status`.
pub const PUSH_METRICS_PORT: u16 = 4713;
/// Default IPv4 group of push mode's data.
pub const PUSH_DATA_GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 47, 11);
/// Default IPv4 group of push mode's catalogue.
pub const PUSH_ANNOUNCE_GROUP_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 47, 12);

/// Parses a rate in bits per second: `100M`, `1G`, `250k`, `1.5G`, `80000`.
pub fn parse_rate(s: &str) -> Result<u64, NetError> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1e3),
        Some((i, 'm' | 'M')) => (&s[..i], 1e6),
        Some((i, 'g' | 'G')) => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| NetError::Rate(s.to_owned()))?;
    let bps = v * mult;
    if !(bps.is_finite() && (1e3..=1e12).contains(&bps)) {
        return Err(NetError::Rate(s.to_owned()));
    }
    Ok(bps as u64)
}

/// Resolves `HOST[:PORT]` (default port [`REQUEST_PORT`]); IPv6 literals in
/// brackets.
pub fn resolve_server(s: &str) -> Result<SocketAddr, NetError> {
    let with_port = if s.parse::<SocketAddr>().is_ok() {
        s.to_owned()
    } else if s.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6()) {
        format!("[{s}]:{REQUEST_PORT}")
    } else if s
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        s.to_owned()
    } else {
        format!("{s}:{REQUEST_PORT}")
    };
    with_port
        .to_socket_addrs()
        .map_err(|source| NetError::Resolve {
            host: s.to_owned(),
            source,
        })?
        .next()
        .ok_or_else(|| NetError::NoAddress(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_addresses_parse() {
        assert_eq!(parse_rate("100M").ok(), Some(100_000_000));
        assert_eq!(parse_rate("1.5G").ok(), Some(1_500_000_000));
        assert_eq!(parse_rate("250k").ok(), Some(250_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
        assert_eq!(
            resolve_server("127.0.0.1").ok(),
            "127.0.0.1:4700".parse().ok()
        );
        assert_eq!(
            resolve_server("127.0.0.1:9").ok(),
            "127.0.0.1:9".parse().ok()
        );
        assert_eq!(resolve_server("::1").ok(), "[::1]:4700".parse().ok());
        assert_eq!(
            resolve_server("localhost:5").map(|a| a.port()).ok(),
            Some(5)
        );
    }
}

/// A network in CIDR form (`10.0.0.0/8`, `fd00::/8`, or one address): an
/// entry of `serve --allow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` is in the network (an IPv4-mapped IPv6 peer counts as
    /// its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - self.prefix as u32).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - self.prefix as u32).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl std::str::FromStr for Cidr {
    type Err = NetError;

    fn from_str(s: &str) -> Result<Self, NetError> {
        let bad = || NetError::Setting("an allowed network is ADDRESS or ADDRESS/PREFIX");
        let (a, p) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let net: IpAddr = a.parse().map_err(|_| bad())?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.parse::<u8>().map_err(|_| bad())?,
            None => max,
        };
        if prefix > max {
            return Err(bad());
        }
        Ok(Cidr { net, prefix })
    }
}

impl<'d> serde::Deserialize<'d> for Cidr {
    fn deserialize<D: serde::Deserializer<'d>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod cidr_tests {
    use super::*;

    #[test]
    fn networks_contain_what_they_should() {
        let c: Cidr = "10.77.0.0/24".parse().expect("cidr");
        assert!(c.contains("10.77.0.9".parse().expect("ip")));
        assert!(c.contains("::ffff:10.77.0.9".parse().expect("ip")));
        assert!(!c.contains("10.77.1.9".parse().expect("ip")));
        assert!(!c.contains("fd00::1".parse().expect("ip")));
        let all: Cidr = "0.0.0.0/0".parse().expect("cidr");
        assert!(all.contains("192.0.2.1".parse().expect("ip")));
        let one: Cidr = "fd00::1".parse().expect("cidr");
        assert!(one.contains("fd00::1".parse().expect("ip")));
        assert!(!one.contains("fd00::2".parse().expect("ip")));
        for bad in ["10.0.0.0/33", "x/8", "10.0.0.0/", "::/129"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }
}
