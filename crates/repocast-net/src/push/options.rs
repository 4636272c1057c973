//! `repocast push`'s settings: [`PushOptions`], the one settings type of
//! the pushing side (library, `--config` file, command-line flags), and
//! its validation. Protocol defaults come from [`Profile::Push`].

use crate::NetError;
use crate::addr;
use crate::settings::{check_groups, check_source, de};
use crate::socket::Interface;
use repocast_core::fec::CodeKind;
use repocast_core::profile::Profile;
#[cfg(doc)]
use repocast_core::profile::symbol_size_for_mtu;
use repocast_core::server::config::{PUSH_PASS_ODDS, PassOdds};
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
    /// The address the packets are sent from (bound; `--source`), which
    /// listeners joining source-specifically name (None: the system's
    /// choice for the interface).
    pub source: Option<IpAddr>,
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
    /// The loss a pass of each file is sized for (`--pass-loss`): a
    /// listener at this loss that hears one pass of every file has them
    /// all with 90% odds ([`PassOdds`]); 0: passes of exactly each file's
    /// source symbols.
    pub pass_loss: f64,
    /// Vouch for every data packet in batches signed with the key, so
    /// listeners take no forged symbol (`--sign-symbols`; about 2.6% of
    /// the rate).
    pub sign_symbols: bool,
    /// With `sign_symbols`: batches listing each packet, 1 to 8
    /// (`--sign-copies`; default 3; more for listeners at high loss).
    pub sign_copies: u8,
    /// Small files share packs ([`repocast_core::endpoint::pack`]):
    /// many small files take about the time their bytes need; a listener
    /// that wants one of them receives its whole pack (at most a block).
    /// `--no-packs` sends every file alone.
    pub packs: bool,
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
            source: None,
            ttl: 1,
            rate_bps: 100_000_000,
            scheduler: PushScheduler::Mad,
            popularity: None,
            redundancy: None,
            pass_loss: p.push_pass_odds.map_or(0.0, |o| o.loss),
            sign_symbols: false,
            sign_copies: repocast_core::endpoint::signing::DEFAULT_COPIES,
            packs: true,
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
        check_source(self.data_group, self.source)?;
        if !(1..=255).contains(&self.ttl) {
            return Err(NetError::Setting("ttl must be 1 to 255"));
        }
        if self.redundancy.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
            return Err(NetError::Setting("redundancy must be a positive number"));
        }
        if !(0.0..=MAX_PASS_LOSS).contains(&self.pass_loss) {
            return Err(NetError::Setting("pass loss must be 0 to 0.5"));
        }
        crate::settings::check_copies(self.sign_copies)
    }
}

/// Largest `--pass-loss`: the highest loss the odds count with
/// ([`repocast_core::policy::odds::MAX_LOSS`]).
pub const MAX_PASS_LOSS: f64 = repocast_core::policy::odds::MAX_LOSS;

/// The [`PassOdds`] a pass loss ships with (None for 0).
pub fn pass_odds(loss: f64) -> Option<PassOdds> {
    (loss > 0.0).then_some(PassOdds {
        loss,
        odds: PUSH_PASS_ODDS.odds,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pass_loss_is_checked_and_shipped() {
        let mut o = PushOptions::new(PathBuf::from("site"));
        assert_eq!(o.pass_loss, PUSH_PASS_ODDS.loss);
        assert!(o.validate().is_ok());
        for bad in [-0.1, 0.51, f64::NAN] {
            o.pass_loss = bad;
            assert!(o.validate().is_err(), "{bad} accepted");
        }
        assert_eq!(pass_odds(0.0), None);
        assert_eq!(pass_odds(0.2).map(|p| p.loss), Some(0.2));
        let o: PushOptions = toml::from_str("dir = \"site\"\npass_loss = 0.2").expect("toml");
        assert_eq!(o.pass_loss, 0.2);
    }
}
