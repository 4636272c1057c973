//! `repocast push`'s settings: [`PushOptions`], the one settings type of
//! the pushing side (library, `--config` file, command-line flags), and
//! its validation. Protocol defaults come from [`Profile::Push`].

use crate::NetError;
use crate::addr;
use crate::settings::{check_groups, de};
use crate::socket::Interface;
use repocast_core::fec::CodeKind;
use repocast_core::profile::Profile;
#[cfg(doc)]
use repocast_core::profile::symbol_size_for_mtu;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

/// Which item the pusher sends next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PushScheduler {
    /// MAD: hot items more often, by popularity (flat without one).
    Mad,
    /// Every item once per cycle.
    Flat,
}

/// Everything `repocast push` can be told (TOML keys as the fields;
/// `rate` as `"100M"`, `interface` as an address or name, `metrics` as an
/// address or `"off"`, `block_symbols` for `max_block`).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PushOptions {
    /// The folder pushed.
    pub dir: PathBuf,
    /// Data group and port.
    pub data_group: SocketAddr,
    /// Catalogue (announcement) group and port.
    pub announce_group: SocketAddr,
    /// Interface to send on.
    #[serde(deserialize_with = "de::interface")]
    pub interface: Interface,
    /// Multicast TTL / hop limit.
    pub ttl: u32,
    /// Data rate cap, bits per second (the catalogue included).
    #[serde(rename = "rate", deserialize_with = "de::rate")]
    pub rate_bps: u64,
    /// MAD or flat.
    pub scheduler: PushScheduler,
    /// Weights per item: TOML (`"name" = weight`), CSV (`name,weight`) or
    /// a Common Log Format web log (requests counted per path).
    pub popularity: Option<PathBuf>,
    /// Stop once every file has been sent this many times its size
    /// (None: run until stopped).
    pub redundancy: Option<f64>,
    /// Vouch for every data packet in batches signed with the key, so
    /// listeners take no forged symbol (`--sign-symbols`; about 2.6% of
    /// the rate).
    pub sign_symbols: bool,
    /// With `sign_symbols`: batches listing each packet, 1 to 8
    /// (`--sign-copies`; default 3; more for listeners at high loss).
    pub sign_copies: u8,
    /// Erasure code.
    pub code: CodeKind,
    /// Bytes per symbol (None: the largest whose packet fits the MTU of
    /// the interface the data leaves by, at most a 1,500-byte frame's:
    /// [`symbol_size_for_mtu`]; 1,440 on IPv4 Ethernet).
    pub symbol_size: Option<u16>,
    /// Largest block in symbols (None: the code's default).
    #[serde(rename = "block_symbols")]
    pub max_block: Option<u32>,
    /// The signing key file (`repocast keygen`); None: one made for this
    /// run (listeners that pinned another refuse it).
    pub key: Option<PathBuf>,
    /// Where `/metrics` and `/status` listen (None: off).
    #[serde(deserialize_with = "de::metrics")]
    pub metrics: Option<SocketAddr>,
    /// Seed for the core's random choices (block order).
    pub seed: u64,
    /// Publish a new catalogue version when files change (inotify, and
    /// on SIGHUP).
    pub watch: bool,
    /// The most MiB of repair symbols made ahead kept in the spool (an
    /// unnamed file in the folder's `.repocast`), for an item too large to
    /// make them ahead in memory at the rate; 0: no spool (such an item
    /// goes in spans).
    pub spool_mib: u64,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions::new(PathBuf::new())
    }
}

impl PushOptions {
    /// Defaults for pushing `dir` on the LAN, with [`Profile::Push`].
    pub fn new(dir: PathBuf) -> Self {
        let p = Profile::Push.server();
        PushOptions {
            dir,
            data_group: (addr::PUSH_DATA_GROUP_V4, addr::PUSH_DATA_PORT).into(),
            announce_group: (addr::PUSH_ANNOUNCE_GROUP_V4, addr::PUSH_ANNOUNCE_PORT).into(),
            interface: Interface::default(),
            ttl: 1,
            rate_bps: 100_000_000,
            scheduler: PushScheduler::Mad,
            popularity: None,
            redundancy: None,
            sign_symbols: false,
            sign_copies: repocast_core::endpoint::signing::DEFAULT_COPIES,
            code: p.code,
            symbol_size: None,
            max_block: None,
            key: None,
            metrics: Some((Ipv4Addr::LOCALHOST, addr::PUSH_METRICS_PORT).into()),
            seed: p.seed,
            watch: true,
            spool_mib: p.push_spool_bytes >> 20,
        }
    }

    /// Checks the settings as a whole.
    pub fn validate(&self) -> Result<(), NetError> {
        if self.dir.as_os_str().is_empty() {
            return Err(NetError::Setting(
                "no folder to push (DIR, or dir in --config)",
            ));
        }
        check_groups(self.data_group, self.announce_group)?;
        if !(1..=255).contains(&self.ttl) {
            return Err(NetError::Setting("ttl must be 1 to 255"));
        }
        if self.redundancy.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err(NetError::Setting("redundancy must be a positive number"));
        }
        crate::settings::check_copies(self.sign_copies)
    }
}

/// The announcement group that goes with a data group given alone: the
/// next address (IPv4) or group id (IPv6), the next port.
pub fn announce_group_for(data: SocketAddr) -> SocketAddr {
    let ip = match data.ip() {
        IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4).wrapping_add(1))),
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6).wrapping_add(1))),
    };
    SocketAddr::new(ip, data.port().wrapping_add(1))
}
