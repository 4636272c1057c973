//! `repocast serve`'s settings: [`ServeOptions`], the one settings type
//! of the serving side (library, `--config` file, command-line flags), and
//! its validation. Used by [`crate::server`].

use crate::NetError;
use crate::addr;
use crate::socket::Interface;
use repocast_core::endpoint::signing;
use repocast_core::fec::CodeKind;
use repocast_core::policy::Scheme;
use repocast_core::profile::Profile;
use repocast_core::sched::SchedulerKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Everything `repocast serve` can be told: the one settings type of the
/// serving side, used by the library, read from `--config` files (TOML,
/// the keys below; `rate` as `"100M"`, `interface` as an address or name,
/// `metrics` as an address or `"off"`, `block_symbols` for `max_block`) and
/// overlaid by the command line's flags. Checked as a whole by
/// [`crate::server::start`] ([`ServeOptions::validate`]); protocol defaults come from
/// [`Profile::Lan`].
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeOptions {
    /// The repository folder.
    pub dir: PathBuf,
    /// Where the request connection listens.
    pub listen: SocketAddr,
    /// Data channel group and port.
    pub data_group: SocketAddr,
    /// Announcement channel group and port.
    pub announce_group: SocketAddr,
    /// Interface to send on.
    #[serde(deserialize_with = "de::interface")]
    pub interface: Interface,
    /// Multicast TTL / hop limit.
    pub ttl: u32,
    /// Data rate cap, bits per second.
    #[serde(rename = "rate", deserialize_with = "de::rate")]
    pub rate_bps: u64,
    /// Reliability scheme.
    pub scheme: Scheme,
    /// Scheduler.
    pub scheduler: SchedulerKind,
    /// Erasure code.
    pub code: CodeKind,
    /// Bytes per symbol (None: the largest whose tagged data packet fits
    /// the MTU of the link the data group leaves by, at most a 1,500-byte
    /// frame's: 1,420 on IPv4 Ethernet, [`crate::socket::symbol_size`]).
    pub symbol_size: Option<u16>,
    /// Largest block in symbols (None: the code's default).
    #[serde(rename = "block_symbols")]
    pub max_block: Option<u32>,
    /// Where `/metrics` and `/status` listen (None: off).
    #[serde(deserialize_with = "de::metrics")]
    pub metrics: Option<SocketAddr>,
    /// Source address advertised for source-specific joins.
    pub source: Option<IpAddr>,
    /// Seed for the core's random choices.
    pub seed: u64,
    /// NAK delay window the server starts from (it widens it under load).
    #[serde(skip)]
    pub nak_window: (Duration, Duration),
    /// How long past a transmission's end (plus the NAK window) a silent
    /// receiver is waited for before its item is rescheduled.
    #[serde(skip)]
    pub report_timeout: Duration,
    /// The server's identity key file (`repocast keygen`); None: a key
    /// made for this run only (clients that pinned an earlier one refuse
    /// it). `repocast serve` defaults to `~/.config/repocast/server.key`.
    pub key: Option<PathBuf>,
    /// Networks allowed to open request connections (empty: any).
    pub allow: Vec<addr::Cidr>,
    /// Encrypt the data on the multicast groups under the session key, so
    /// that only welcomed clients can read it (`--encrypt`).
    pub encrypt: bool,
    /// Vouch for every data packet in batches signed with the server key,
    /// so not even a welcomed client can forge symbols others accept
    /// (`--sign-symbols`; about 2.6% of the rate).
    pub sign_symbols: bool,
    /// With `sign_symbols`: batches listing each packet, 1 to 8
    /// (`--sign-copies`; default 3).
    pub sign_copies: u8,
    /// A file of access tokens (`keys::read_token_hashes`); with it a
    /// client must present one of them (`--tokens`).
    pub tokens: Option<PathBuf>,
    /// Seconds between session key rotations (0: never). A client that
    /// left stops being able to read or forge packets at the next one.
    pub rekey_secs: u64,
    /// The batching hold's cap in milliseconds (`--batch-hold`; 0: off;
    /// shipped: 4000, [`repocast_core::profile::BATCH_HOLD`]). On a busy
    /// server an item may wait, up to this long, behind items asked for
    /// earlier, so more requests join its transmission
    /// (`repocast_core::sched::hold`): a shorter tail of delays. At most
    /// [`MAX_BATCH_HOLD_MS`].
    pub batch_hold_ms: u64,
    /// The hold engages only once the server has had work without a break
    /// for this many milliseconds (`--batch-hold-after`; shipped: 4000;
    /// 0: from the first request). At most [`MAX_BATCH_HOLD_MS`].
    pub batch_hold_after_ms: u64,
    /// When every waiting item is held, idle the link until the first
    /// hold ends (`--batch-hold-idle`: fewer bytes on the link, more
    /// delay). Off, as shipped: the hold only reorders, and the link never
    /// idles while anyone waits.
    pub batch_hold_idle: bool,
}

/// Longest batching hold accepted, in milliseconds.
pub const MAX_BATCH_HOLD_MS: u64 = 60_000;

impl Default for ServeOptions {
    /// The defaults, with no repository folder yet.
    fn default() -> Self {
        ServeOptions::new(PathBuf::new())
    }
}

/// Deserializers for the settings file's friendlier forms.
pub(crate) mod de {
    use crate::socket::Interface;
    use serde::{Deserialize, Deserializer, de::Error};
    use std::net::SocketAddr;

    pub fn rate<'d, D: Deserializer<'d>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        crate::addr::parse_rate(&s).map_err(D::Error::custom)
    }

    pub fn interface<'d, D: Deserializer<'d>>(d: D) -> Result<Interface, D::Error> {
        let s = String::deserialize(d)?;
        Interface::parse(Some(&s)).map_err(D::Error::custom)
    }

    pub fn metrics<'d, D: Deserializer<'d>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let s = String::deserialize(d)?;
        if s == "off" {
            return Ok(None);
        }
        s.parse().map(Some).map_err(D::Error::custom)
    }
}

impl ServeOptions {
    /// Defaults for serving `dir` on the LAN (see [`crate::addr`]), with
    /// the protocol settings of [`Profile::Lan`].
    pub fn new(dir: PathBuf) -> Self {
        let lan = Profile::Lan.server();
        ServeOptions {
            dir,
            listen: (Ipv4Addr::UNSPECIFIED, addr::REQUEST_PORT).into(),
            data_group: (addr::DATA_GROUP_V4, addr::DATA_PORT).into(),
            announce_group: (addr::ANNOUNCE_GROUP_V4, addr::ANNOUNCE_PORT).into(),
            interface: Interface::default(),
            ttl: 1,
            rate_bps: 100_000_000,
            scheme: lan.scheme,
            scheduler: lan.scheduler,
            code: lan.code,
            symbol_size: None,
            max_block: None,
            metrics: Some((Ipv4Addr::LOCALHOST, addr::METRICS_PORT).into()),
            source: None,
            seed: lan.seed,
            nak_window: lan.nak_window,
            report_timeout: lan.report_timeout,
            key: None,
            allow: Vec::new(),
            encrypt: false,
            sign_symbols: false,
            sign_copies: signing::DEFAULT_COPIES,
            tokens: None,
            rekey_secs: 3600,
            batch_hold_ms: lan.batch_hold.map_or(0, |d| d.as_millis() as u64),
            batch_hold_after_ms: lan.batch_hold_after.as_millis() as u64,
            batch_hold_idle: lan.batch_hold_idle,
        }
    }
}

impl ServeOptions {
    /// Checks the settings as a whole (what the core checks again on
    /// building the server: rate, symbol and block sizes).
    pub fn validate(&self) -> Result<(), NetError> {
        if self.dir.as_os_str().is_empty() {
            return Err(NetError::Setting(
                "no repository folder (DIR, or dir in --config)",
            ));
        }
        check_groups(self.data_group, self.announce_group)?;
        // Clients join source-specifically only to a source the server
        // names (in its Welcome).
        check_source(self.data_group, self.source)?;
        check_source_named(self.data_group, self.source)?;
        if !(1..=255).contains(&self.ttl) {
            return Err(NetError::Setting("ttl must be 1 to 255"));
        }
        if self.batch_hold_ms > MAX_BATCH_HOLD_MS {
            return Err(NetError::Setting("batch-hold must be at most 60000 ms"));
        }
        if self.batch_hold_after_ms > MAX_BATCH_HOLD_MS {
            return Err(NetError::Setting(
                "batch-hold-after must be at most 60000 ms",
            ));
        }
        check_copies(self.sign_copies)
    }
}

/// `--sign-copies` within 1 to [`signing::MAX_COPIES`] (serve and push).
pub(crate) fn check_copies(copies: u8) -> Result<(), NetError> {
    match (1..=signing::MAX_COPIES).contains(&copies) {
        true => Ok(()),
        false => Err(NetError::Setting("sign-copies must be 1 to 8")),
    }
}

/// A `--source` (the address a sender's packets come from, or the one a
/// receiver joins source-specifically to hear): of the groups' family, and
/// a host's address, not a group or the unspecified one (serve, push and
/// listen alike).
pub(crate) fn check_source(group: SocketAddr, source: Option<IpAddr>) -> Result<(), NetError> {
    let Some(s) = source else { return Ok(()) };
    if s.is_ipv4() != group.is_ipv4() {
        return Err(NetError::Setting(
            "--source must be of the groups' family (IPv4 or IPv6)",
        ));
    }
    if s.is_multicast() || s.is_unspecified() {
        return Err(NetError::Setting(
            "--source must be a host's address, not a group or unspecified",
        ));
    }
    Ok(())
}

/// Receivers on groups in the source-specific range must join for a named
/// source (any-source joins there are not forwarded): `serve`, whose
/// clients join the source it names, and `listen` need one there.
pub(crate) fn check_source_named(
    group: SocketAddr,
    source: Option<IpAddr>,
) -> Result<(), NetError> {
    match source.is_none() && is_ssm_range(group.ip()) {
        true => Err(NetError::Setting(
            "the groups are in the source-specific range (232.0.0.0/8, ff3x::/32): give --source, the sender's address",
        )),
        false => Ok(()),
    }
}

/// Whether `ip` is in the source-specific multicast range (232.0.0.0/8,
/// ff3x::/32), where routers forward a group only to receivers that name
/// its source.
pub fn is_ssm_range(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 232,
        // ff3x::/32 (RFC 4607); ff3x:00PL:... with a prefix length PL is
        // a unicast-prefix-based group (RFC 3306), any-source.
        IpAddr::V6(v6) => v6.segments()[0] & 0xfff0 == 0xff30 && v6.segments()[1] == 0,
    }
}

/// Both groups multicast, of one family, and different (serve, push and
/// listen alike).
pub(crate) fn check_groups(data: SocketAddr, announce: SocketAddr) -> Result<(), NetError> {
    for g in [data, announce] {
        if !g.ip().is_multicast() {
            return Err(NetError::NotMulticast(g.ip()));
        }
    }
    if data.is_ipv4() != announce.is_ipv4() {
        return Err(NetError::Setting(
            "the two groups must both be IPv4 or both IPv6",
        ));
    }
    if data == announce {
        return Err(NetError::Setting(
            "the data and announcement groups must differ",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_specific_range_and_a_source_are_checked() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        for (s, ssm) in [
            ("232.0.0.1", true),
            ("232.255.1.2", true),
            ("239.255.47.11", false),
            ("233.1.1.1", false),
            ("ff3e::8000:1", true),
            ("ff35::1", true),
            ("ff15::4701", false),
            ("ff3e:30:2001:db8::1", false),
        ] {
            assert_eq!(is_ssm_range(ip(s)), ssm, "{s}");
        }
        let g: SocketAddr = "232.1.1.1:4711".parse().expect("group");
        assert!(check_source(g, None).is_ok());
        assert!(check_source(g, Some(ip("10.0.0.1"))).is_ok());
        for bad in ["::1", "239.1.1.1", "0.0.0.0"] {
            assert!(check_source(g, Some(ip(bad))).is_err(), "{bad}");
        }
        let mut o = ServeOptions::new(PathBuf::from("repo"));
        o.data_group = g;
        o.announce_group = "232.1.1.2:4712".parse().expect("group");
        let err = o.validate().expect_err("no source in the SSM range");
        assert!(err.to_string().contains("--source"), "{err}");
        o.source = Some(ip("10.0.0.1"));
        assert!(o.validate().is_ok());
        let g6: SocketAddr = "[ff3e::1]:4711".parse().expect("group");
        assert!(check_source(g6, Some(ip("fe80::1"))).is_ok());
        assert!(check_source(g6, Some(ip("10.0.0.1"))).is_err());
    }
}
