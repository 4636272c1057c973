//! Named settings profiles: the exact configurations the shipped commands
//! run, so a deterministic test can run what `repocast serve` and
//! `repocast get` run, and the simulator can run either.
//!
//! - [`Profile::Lan`]: what `serve` and `get` ship with. Redundancy sized
//!   to the worst receiver's measured loss plus 2%, repair until done,
//!   late joiners keep what they catch (`FEC(maxloss+0.02)+R(inf)+notify`),
//!   and while little else waits for the link, enough symbols per block
//!   that such a receiver decodes it without a NAK round 99% of the time;
//!   a 5-50 ms NAK window (narrower for a transmission with fewer than 16
//!   receivers waiting on it) and a 500 ms report timeout (LAN round trips
//!   are well under a millisecond); repairs sized for one round per NAKing
//!   receiver; receivers send an early loss report into long transmissions;
//!   each announcement is sent three times (the announcement channel is
//!   multicast and may lose packets too). Once the server has had work
//!   without a break for 4 s, the batching hold (`crate::sched::hold`,
//!   up to 4 s) sends items asked for long ago before those just asked
//!   for; it never leaves the link idle. Symbols fill a 1,500-byte IPv4
//!   frame with the packet's authentication tag (1,420 bytes; `serve`
//!   sizes them to the MTU of the link it sends on).
//! - [`Profile::Study`]: the published study's settings, which the
//!   simulator's sweeps reproduce: `FEC(0.01R)+R(0)`, the base case's
//!   30-210 ms NAK window, repairs sized by the largest NAK alone, no early
//!   reports, one copy of each announcement.
//!
//! - [`Profile::Push`]: what `repocast push` and `repocast listen` ship
//!   with. Fcast passes (SPEC 3.6): each pass sends exactly k fresh symbols
//!   of every block, round by round over the blocks; redundancy comes from
//!   the passes that follow; MAD picks the item (flat with no popularity).
//!   No NAKs, no reports: there is no back channel. Symbols fill a
//!   1,500-byte IPv4 frame (1,440 bytes; `push` sizes them to the MTU of
//!   the link it sends on, [`symbol_size_for_mtu`]). RaptorQ blocks of
//!   up to 1,250 symbols ([`push_block_symbols`]), not request mode's
//!   1,000: with no repair on demand, a lossy listener waits for its
//!   unluckiest block, and larger blocks narrow that spread. Reed-Solomon
//!   blocks of up to 1,024 ([`RS_BLOCK_SYMBOLS`], as `serve`'s), not the
//!   code's GF(2^8)-era 32, for the same reason.
//!
//! A profile gives a [`ServerConfig`], a [`ClientConfig`] and the endpoint
//! limits; callers change single fields afterwards (rate, seed, channels).

use crate::client::ClientConfig;
use crate::fec::CodeKind;
use crate::fec::layout::BlockGrowth;
use crate::policy::{FecPolicy, Retransmit, Scheme};
use crate::server::{IdleFec, ServerConfig, ServerError};
use crate::wire::data::{DATA_OVERHEAD, DATA_PROBE_OVERHEAD, DATA_TAG_OVERHEAD};
use std::time::Duration;

/// Bytes of IPv4 and UDP headers in front of every datagram.
pub const IPV4_UDP_HEADERS: u64 = 28;
/// Bytes of IPv6 and UDP headers in front of every datagram.
pub const IPV6_UDP_HEADERS: u64 = 48;
/// How much sending the token bucket may catch up after a stall: tokio
/// wakes about once a millisecond and a busy host can keep the sender off
/// the CPU for several, so the bucket holds this much time of packets...
pub const BURST_TIME: Duration = Duration::from_millis(10);
/// ...but never fewer or more packets than these.
pub const BURST_PACKETS: (u32, u32) = (16, 256);
/// What an idle link's first transmission may send at once under `serve`
/// ([`ServerConfig::start_credit`]): tokio's timer tick, the most the
/// pacing waits between two wake-ups anyway.
pub const START_CREDIT: Duration = Duration::from_millis(1);
/// Slowest and fastest data rates the pacing accepts, bits per second.
pub const RATE_RANGE: (u64, u64) = (8_000, 1_000_000_000_000);

/// Listeners `serve` spreads a transmission's NAKs over its whole 5-50 ms
/// window for; fewer get a narrower one
/// ([`ServerConfig::nak_spread_listeners`]): a lone receiver NAKs 5-8 ms
/// after a transmission ends, not 5-50.
pub const NAK_SPREAD_LISTENERS: u32 = 16;

/// The odds of decoding without a NAK round that `serve` gives each block
/// of a first send while little else waits for the link
/// ([`ServerConfig::idle_fec`]): at 5% loss a 47-symbol block goes out as
/// 54 symbols instead of 51, a 1,000-symbol one as the policy's 1,070.
pub const IDLE_FEC_ODDS: f64 = 0.99;
/// Waiting work below which `serve` counts the link as having time to
/// spare for [`IDLE_FEC_ODDS`]: a few small items, as one request for
/// several files leaves waiting while the first goes out.
pub const IDLE_FEC_BACKLOG: Duration = Duration::from_millis(20);

/// The share of an item above which `serve` answers a NAK (of at least
/// 128 symbols) by queueing its receiver for the item's next send rather
/// than by a repair ([`ServerConfig::repair_share`]): a receiver that lacks
/// more than half of an item heard less than half of it (it joined late),
/// and a repair of that size for it alone would go ahead of sends that
/// finish more requests. In the simulator's request runs (seeds 1-8,
/// 8 hosts) it cut the mean delay 2-5% at 5%, 20%, 50% and mixed loss, and
/// p95 5-7% (docs/benchmarks.md, session 25).
pub const REPAIR_SHARE: f64 = 0.5;

/// A named set of shipped settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `repocast serve` / `repocast get` on a LAN.
    Lan,
    /// The published study's settings (the simulator's sweeps).
    Study,
    /// `repocast push` / `repocast listen`.
    Push,
}

/// Limits of the endpoints: what one peer can make an endpoint hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointLimits {
    /// Copies of each announcement put on the announcement channel.
    pub announce_repeats: u8,
    /// Request connections open at once; more are refused.
    pub max_connections: usize,
    /// Bytes of incomplete frames buffered across all connections; the
    /// connection whose bytes would go over is closed.
    pub max_buffered_bytes: usize,
    /// Bytes of frames waiting to be written to one connection; a peer
    /// that leaves more unread is closed. The driver counts each frame a
    /// few bytes more than its length (its slot and allocation), so many
    /// small frames are bounded as their memory is: a request for every
    /// file of a large repository is answered with a manifest per file at
    /// once, and 20,000 of them count about 4 MiB.
    pub max_queued_bytes: usize,
    /// After a key rotation is asked for, how long the old key stays in
    /// use while the new one reaches every client over its connection.
    pub rekey_grace: Duration,
}

impl Default for EndpointLimits {
    fn default() -> Self {
        Profile::Lan.limits()
    }
}

impl Profile {
    /// The server's settings (rate: 100 Mbit/s over IPv4; change with
    /// [`ServerConfig::set_rate`]).
    pub fn server(self) -> ServerConfig {
        match self {
            Profile::Lan => {
                let mut c = ServerConfig {
                    scheme: lan_scheme(),
                    nak_window: (Duration::from_millis(5), Duration::from_millis(50)),
                    nak_spread_listeners: Some(NAK_SPREAD_LISTENERS),
                    start_credit: START_CREDIT,
                    loss_tiers: true,
                    hasten: true,
                    size_ties: true,
                    preempt: true,
                    repair_share: Some(REPAIR_SHARE),
                    idle_fec: Some(IdleFec {
                        odds: IDLE_FEC_ODDS,
                        backlog: IDLE_FEC_BACKLOG,
                    }),
                    report_timeout: Duration::from_millis(500),
                    report_timeout_max: Some(REPORT_TIMEOUT_MAX),
                    loss_aware_repairs: true,
                    share_repairs: true,
                    drop_orphans: true,
                    repair_budget: Some(REPAIR_BUDGET),
                    request_window: Some(REQUEST_WINDOW),
                    encoder_cache_bytes: crate::server::config::REQUEST_ENCODER_BYTES,
                    prepare_jobs: crate::server::config::PREPARE_JOBS,
                    batch_hold: Some(BATCH_HOLD),
                    batch_hold_after: BATCH_HOLD,
                    // What `serve` picks on a 1,500-byte IPv4 link (it
                    // sizes symbols to the link it sends on; its packets
                    // carry an authentication tag).
                    symbol_size: symbol_size_for_mtu(AUTO_MTU_CAP, false, true, false),
                    ..ServerConfig::default()
                };
                // 100 Mbit/s is in range: this cannot fail.
                let _ = c.set_rate(100_000_000, false);
                c
            }
            Profile::Study => ServerConfig::default(),
            Profile::Push => {
                let mut c = ServerConfig {
                    scheme: crate::policy::Scheme {
                        fec: FecPolicy::Fixed(0.0),
                        retransmit: Retransmit::Reschedule,
                        notify: false,
                    },
                    scheduler: crate::sched::SchedulerKind::Mad {
                        weights: Vec::new(),
                    },
                    push_span_bytes: 64 << 20,
                    push_pass_odds: Some(crate::server::config::PUSH_PASS_ODDS),
                    push_spool_bytes: PUSH_SPOOL_BYTES,
                    prepare_jobs: crate::server::config::PREPARE_JOBS,
                    // What `push` picks on a 1,500-byte IPv4 link (it
                    // sizes symbols to the link it sends on).
                    symbol_size: symbol_size_for_mtu(AUTO_MTU_CAP, false, false, false),
                    max_block_symbols: push_block_symbols(CodeKind::RaptorQ),
                    block_growth: push_block_growth(CodeKind::RaptorQ, None),
                    ..ServerConfig::default()
                };
                let _ = c.set_rate(100_000_000, false);
                c
            }
        }
    }

    /// The client's settings.
    pub fn client(self) -> ClientConfig {
        match self {
            Profile::Lan => ClientConfig {
                name: "get".into(),
                loss_reports: true,
                decode_jobs: crate::client::decode::DECODE_JOBS,
                ..ClientConfig::default()
            },
            Profile::Study => ClientConfig::default(),
            Profile::Push => ClientConfig {
                name: "listen".into(),
                decode_jobs: crate::client::decode::DECODE_JOBS,
                fail_on_forgery: true,
                ..ClientConfig::default()
            },
        }
    }

    /// The endpoints' limits.
    pub fn limits(self) -> EndpointLimits {
        EndpointLimits {
            announce_repeats: match self {
                Profile::Lan => 3,
                Profile::Study | Profile::Push => 1,
            },
            max_connections: 4096,
            max_buffered_bytes: 64 << 20,
            max_queued_bytes: 32 << 20,
            rekey_grace: Duration::from_secs(2),
        }
    }
}

/// Symbols a client may ask for in NAKs per item, in multiples of the
/// item's size: a receiver at 50% loss asks for about one item's worth in
/// all (its needs halve each round), so eight is far past any honest one.
/// Also the sends of an item in a row a client may leave without a report
/// before the item fails for it: an honest receiver misses a send's
/// report only when it missed all of the send's end announcements (three
/// copies) or its report came later than its wait (which follows its
/// lateness, [`REPORT_TIMEOUT_MAX`]).
pub const REPAIR_BUDGET: u32 = 8;

/// Most of one client's requested items `serve` works on at a time
/// ([`crate::server::ServerConfig::request_window`]; half in the order
/// asked, half joining sends others cause). A receiver takes in a small
/// file in about a millisecond (creating, writing, hashing and renaming
/// it; 0.9-1.2 ms a file for `get` of 3,000 on loopback, session 53), so
/// 256 open items keep it at most about a quarter of a second behind,
/// within the fixed report wait; the 128 in order are still 43 ms of
/// one-packet items at the link's rate, far more than a LAN's round trip.
pub const REQUEST_WINDOW: u32 = 256;

/// The longest the server waits for the report of a receiver whose
/// reports come late ([`crate::server::lag`]). Past it, a silent
/// receiver's item is sent again even if it is only behind: ten seconds
/// behind is a receiver in trouble, and an item it really missed must not
/// wait longer than that.
pub const REPORT_TIMEOUT_MAX: Duration = Duration::from_secs(10);

/// The shipped batching hold ([`Profile::Lan`]): its cap, and how long the
/// server must have had work without a break before it engages.
pub const BATCH_HOLD: Duration = Duration::from_secs(4);

/// `FEC(maxloss+0.02)+R(inf)+notify`, the scheme `repocast serve` ships.
pub fn lan_scheme() -> Scheme {
    Scheme {
        fec: FecPolicy::MaxLoss(0.02),
        retransmit: Retransmit::Always,
        notify: true,
    }
}

/// Bits one data packet of `symbol_size` bytes takes on the wire (with
/// its authentication tag if `tagged`).
pub fn packet_bits(symbol_size: u16, ipv6: bool, tagged: bool) -> u64 {
    let ip = if ipv6 {
        IPV6_UDP_HEADERS
    } else {
        IPV4_UDP_HEADERS
    };
    let tag = if tagged { DATA_TAG_OVERHEAD as u64 } else { 0 };
    (symbol_size as u64 + DATA_OVERHEAD as u64 + tag + ip) * 8
}

/// Largest RaptorQ source block push uses unless told otherwise.
///
/// Without a back channel a listener finishes when its unluckiest block
/// has k symbols (SPEC 3.6's P^G), and that wait shrinks as blocks grow
/// (about 1.9 standard deviations of a block's count over 24 blocks of 971
/// symbols, 4.4% of a 50%-loss listener's time; 3.7% at 19 blocks of
/// 1,227), while every block is still decoded at the end, on the listener's
/// receiving thread, by those that lose little. 1,250 balanced the two in
/// the lab (docs/benchmarks.md, "Session 13"); request mode repairs on
/// demand and keeps the code's default.
pub const PUSH_RAPTORQ_BLOCK_SYMBOLS: u32 = 1250;

/// How `push` grows RaptorQ blocks for large files: up to 32 blocks of
/// [`PUSH_RAPTORQ_BLOCK_SYMBOLS`] (about 54 MiB at 1,420-byte symbols) the
/// blocks are as set; past that they grow to keep to 32, up to 1,800
/// symbols (about 78 MiB), and past that the count grows again (128 MiB:
/// 53 blocks of 1,800, not 76 of 1,250; 1 GiB: 420, not 605).
///
/// Larger blocks shorten a lossy listener's wait for its unluckiest block
/// but leave more of a listener's decoding for the end when it loses
/// little, and the more so the larger the file. In the lab
/// (docs/benchmarks.md, "Session 15"), the worst listener of 2-9 runs:
/// at 128 MiB, 1,250 went to 1.112 (the 50% listener; session 14, with
/// smaller receive buffers), 1,800 to 1.110 and 2,500 to 1.096; at 1 GiB
/// (5/5/20%), 1,250 went to 1.105, 1,800 to 1.102 and 2,500 to 1.116.
/// Medium files keep 1,250: at 32 MiB, blocks of 2,500 put the 5%
/// listeners above 1.10 in 3 of 6 runs.
pub const PUSH_BLOCK_GROWTH: BlockGrowth = BlockGrowth {
    blocks: 32,
    max_symbols: 1800,
};

/// [`ServerConfig::block_growth`] for `push` with `code`: RaptorQ's blocks
/// grow ([`PUSH_BLOCK_GROWTH`]) unless the user set the block size
/// (`max_block`); Reed-Solomon keeps its small Fcast blocks.
pub fn push_block_growth(code: CodeKind, max_block: Option<u32>) -> Option<BlockGrowth> {
    match (code, max_block) {
        (CodeKind::RaptorQ, None) => Some(PUSH_BLOCK_GROWTH),
        _ => None,
    }
}

/// [`ServerConfig::push_spool_bytes`] for `push`: at most 4 GiB of repair
/// symbols made ahead kept in the driver's spool, used only for an item too
/// large to make them ahead in memory at the rate (`server::encoders`).
pub const PUSH_SPOOL_BYTES: u64 = 4 << 30;

/// Largest Reed-Solomon source block `serve` and `push` use unless told
/// otherwise.
///
/// SPEC 3.6's small kmax (32) is for codes over GF(2^8), whose blocks
/// cannot be longer than 255 symbols. `reed-solomon-simd` works over
/// GF(2^16), so Reed-Solomon blocks can be as large as RaptorQ's.
/// - Push: a listener's wait for its unluckiest block shrinks as blocks
///   grow. With blocks of 32, a 32 MiB file is 740 blocks, and a 5%-loss
///   listener needs about 1.19x the symbols, a 50% one about 1.48x (the
///   lab measured 1.24-1.32 and 1.52-1.72; with 1,024, 1.10-1.14 and
///   1.08-1.12).
/// - Request mode: a send's margin covers a large block's loss far more
///   evenly than 32-symbol blocks', which leave many blocks short for the
///   NAK rounds (the lab's 32 MiB file: 1.34-1.37 of ideal with blocks of
///   32, 1.14-1.16 with 256, 1.10-1.12 with 1,024, as with RaptorQ).
///
/// 1,024, not RaptorQ's 1,000-1,250: the decoder transforms a power of
/// two of symbols at least k rounded up to a power of two plus the 2k
/// repair ids (4,096 up to k = 1,024, 8,192 past it), so blocks of 1,244
/// cost 1.6 times as much decoding per byte as blocks of 985-1,024
/// (docs/benchmarks.md, session 33). The simulator's own runs keep the
/// code's default (32), as in the study.
pub const RS_BLOCK_SYMBOLS: u32 = 1024;

/// The largest source block `serve` uses for `code` unless told
/// otherwise: [`RS_BLOCK_SYMBOLS`] for Reed-Solomon, the code's default
/// for the others.
pub fn serve_block_symbols(code: CodeKind) -> u32 {
    match code {
        CodeKind::ReedSolomon => RS_BLOCK_SYMBOLS,
        other => other.default_block_symbols(),
    }
}

/// The largest source block push uses for `code` unless told otherwise:
/// [`PUSH_RAPTORQ_BLOCK_SYMBOLS`] for RaptorQ, [`RS_BLOCK_SYMBOLS`] for
/// Reed-Solomon, the code's default for the baselines.
pub fn push_block_symbols(code: CodeKind) -> u32 {
    match code {
        CodeKind::RaptorQ => PUSH_RAPTORQ_BLOCK_SYMBOLS,
        CodeKind::ReedSolomon => RS_BLOCK_SYMBOLS,
        other => other.default_block_symbols(),
    }
}

/// The blocks `push --code CODE [--block-symbols N]` gives its items: the
/// largest source block (`max_block`, else [`push_block_symbols`]) and
/// whether blocks grow for large items ([`push_block_growth`]).
pub fn push_blocks(code: CodeKind, max_block: Option<u32>) -> (u32, Option<BlockGrowth>) {
    (
        max_block.unwrap_or(push_block_symbols(code)),
        push_block_growth(code, max_block),
    )
}

/// The largest link MTU an automatic symbol size fills: packets stay
/// within a standard Ethernet frame unless the user asks for more (a
/// jumbo-frame interface may still have receivers behind 1,500-byte
/// links; loopback reports 65,536).
pub const AUTO_MTU_CAP: u32 = 1500;

/// The largest symbol size whose data packet (IP and UDP headers, the
/// authentication tag if `tagged`, an ARM probe if `probes`) fits in a
/// link MTU of `mtu` bytes, capped at [`AUTO_MTU_CAP`]: even (Reed-Solomon
/// needs it) and within what the wire accepts. 1,440 bytes on a
/// 1,500-byte IPv4 link, 1,420 on IPv6; 1,420 and 1,400 tagged.
pub fn symbol_size_for_mtu(mtu: u32, ipv6: bool, tagged: bool, probes: bool) -> u16 {
    let probe = if probes {
        DATA_PROBE_OVERHEAD as u64
    } else {
        0
    };
    let fixed = packet_bits(0, ipv6, tagged) / 8 + probe;
    let room = u64::from(mtu.min(AUTO_MTU_CAP)).saturating_sub(fixed) & !1;
    room.clamp(
        u64::from(crate::wire::manifest::MIN_SYMBOL_SIZE),
        crate::wire::data::MAX_SYMBOL_SIZE as u64,
    ) as u16
}

impl ServerConfig {
    /// Paces the data channel at `rate_bps` (IP and UDP headers counted):
    /// sets the packet interval and a token bucket of [`BURST_TIME`].
    pub fn set_rate(&mut self, rate_bps: u64, ipv6: bool) -> Result<(), ServerError> {
        if !(RATE_RANGE.0..=RATE_RANGE.1).contains(&rate_bps) {
            return Err(ServerError::Rate(rate_bps));
        }
        let tagged = self.session_key.is_some();
        let ns =
            packet_bits(self.symbol_size, ipv6, tagged) as u128 * 1_000_000_000 / rate_bps as u128;
        self.packet_interval = Duration::from_nanos(ns.max(1) as u64);
        let burst = BURST_TIME.as_nanos().div_ceil(ns.max(1));
        self.burst = (burst.min(u32::MAX as u128) as u32).clamp(BURST_PACKETS.0, BURST_PACKETS.1);
        self.channels.rate_bps = rate_bps;
        self.rate_set = Some((rate_bps, ipv6, self.packet_interval));
        Ok(())
    }

    /// Paces the rate [`ServerConfig::set_rate`] was given again, with the
    /// symbol size and session key the config has now, unless the packet
    /// interval was changed by hand since ([`ServerConfig::rate_set`]).
    /// `Server::new` calls it.
    pub fn repace(&mut self) -> Result<(), ServerError> {
        match self.rate_set {
            Some((rate, ipv6, interval)) if interval == self.packet_interval => {
                self.set_rate(rate, ipv6)
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::DataRepr;
    use crate::{BlockId, ItemId, SessionId, TransmissionId};

    #[test]
    fn data_overhead_is_what_a_plain_packet_adds() {
        let p = DataRepr {
            session: SessionId(1),
            transmission: TransmissionId(2),
            item: ItemId(3),
            block: BlockId(4),
            symbol: 5,
            seq: 6,
            probe: None,
            payload: vec![7; 1280],
            tag: vec![],
            encrypted: false,
        };
        let mut b = Vec::new();
        p.emit(&mut b);
        assert_eq!(b.len(), 1280 + DATA_OVERHEAD);
        assert_eq!(DATA_OVERHEAD, 31);
        let probed = DataRepr {
            probe: Some(crate::wire::data::Probe {
                pts: 8,
                timestamp_us: 9,
            }),
            ..p
        };
        b.clear();
        probed.emit(&mut b);
        assert_eq!(b.len(), 1280 + DATA_OVERHEAD + DATA_PROBE_OVERHEAD);
    }

    #[test]
    fn push_takes_larger_raptorq_blocks_than_request_mode() {
        let push = Profile::Push.server();
        assert_eq!(push.max_block_symbols, PUSH_RAPTORQ_BLOCK_SYMBOLS);
        assert!(push.max_block_symbols > Profile::Lan.server().max_block_symbols);
        // Reed-Solomon over GF(2^16): blocks as long as the decoder's
        // work of 4,096 allows, not SPEC 3.6's GF(2^8) kmax.
        let rs = push_block_symbols(CodeKind::ReedSolomon);
        assert_eq!(rs, RS_BLOCK_SYMBOLS);
        assert_eq!(serve_block_symbols(CodeKind::ReedSolomon), rs);
        assert_eq!(
            serve_block_symbols(CodeKind::RaptorQ),
            Profile::Lan.server().max_block_symbols
        );
        assert!(rs > CodeKind::ReedSolomon.default_block_symbols());
        assert!(crate::fec::reed_solomon::repair_count(rs) == 2 * rs);
        assert!((rs.next_power_of_two() + 2 * rs).next_power_of_two() <= 4096);
        // The lab's 32 MiB file: 19 blocks of about 1,227 symbols, not 24
        // of 971.
        let fec = crate::wire::FecParams {
            code: push.code,
            symbol_size: push.symbol_size,
            max_block_symbols: push.max_block_symbols,
        };
        let l = crate::fec::layout::Layout::new(32 << 20, &fec).expect("layout");
        assert_eq!(l.blocks(), 19);
        assert!((0..19).all(|b| (1226..=1227).contains(&l.block_symbols(b))));
    }

    #[test]
    fn automatic_symbols_fill_the_mtu_and_no_more() {
        // 1,440 + 31 + 28 = 1,499 bytes on IPv4; 1,420 + 31 + 48 = 1,499 on
        // IPv6 (a 1,441-byte symbol would be odd).
        assert_eq!(symbol_size_for_mtu(1500, false, false, false), 1440);
        assert_eq!(symbol_size_for_mtu(1500, true, false, false), 1420);
        let tag = DATA_TAG_OVERHEAD as u16;
        assert_eq!(
            symbol_size_for_mtu(1500, false, true, false),
            (1441 - tag) & !1
        );
        // `serve`'s tagged packets: 1,420 + 31 + 21 + 28 = 1,500.
        assert_eq!(symbol_size_for_mtu(1500, false, true, false), 1420);
        assert_eq!(Profile::Lan.server().symbol_size, 1420);
        // ARM's probes: 12 bytes fewer, so a packet carrying one fits too.
        assert_eq!(symbol_size_for_mtu(1500, false, true, true), 1408);
        // Loopback and jumbo interfaces: capped at a standard frame.
        assert_eq!(symbol_size_for_mtu(65_536, false, false, false), 1440);
        // A tunnel's smaller MTU: smaller symbols.
        assert_eq!(symbol_size_for_mtu(1400, false, false, false), 1340);
        // Every size fits its MTU and is a size the wire takes.
        for mtu in [0, 68, 100, 576, 1280, 1280 + 79, 1492, 1500] {
            for ipv6 in [false, true] {
                for (tagged, probes) in [(false, false), (true, false), (true, true)] {
                    let t = symbol_size_for_mtu(mtu, ipv6, tagged, probes);
                    assert!(t % 2 == 0 && t >= crate::wire::manifest::MIN_SYMBOL_SIZE);
                    let probe = if probes {
                        DATA_PROBE_OVERHEAD as u64
                    } else {
                        0
                    };
                    let fits = packet_bits(t, ipv6, tagged) / 8 + probe <= u64::from(mtu);
                    assert!(
                        fits || t == crate::wire::manifest::MIN_SYMBOL_SIZE,
                        "{mtu} {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn rate_sets_interval_and_bucket_and_refuses_zero() {
        let mut c = Profile::Lan.server();
        // 1,479 bytes per packet at 100 Mbit/s: 118.32 us, 85 packets in 10 ms.
        assert_eq!(c.packet_interval, Duration::from_nanos(118_320));
        assert_eq!(c.burst, 85);
        assert_eq!(c.set_rate(0, false), Err(ServerError::Rate(0)));
        c.set_rate(1_000_000_000_000, true).expect("fastest rate");
        assert_eq!(c.burst, BURST_PACKETS.1);
        c.set_rate(10_000, false).expect("slow rate");
        assert_eq!(c.burst, BURST_PACKETS.0);
    }

    #[test]
    fn a_rate_set_before_the_key_or_symbol_size_is_paced_for_them_when_the_server_is_built() {
        let key = crate::auth::SessionKey::from_bytes([7; 32]);
        let built = |c: ServerConfig| {
            let s = crate::server::Server::new(c, vec![]).expect("server");
            s.config().packet_interval
        };
        // The profile set 100 Mbit/s for untagged packets (1,479 bytes);
        // the key comes after, as `serve` and the simulator give it.
        let mut c = Profile::Lan.server();
        c.session_key = Some(key.clone());
        // 1,500 bytes per tagged packet at 100 Mbit/s: 120 us.
        assert_eq!(built(c.clone()), Duration::from_micros(120));
        // The symbol size set afterwards counts too: 1,000 + 80 bytes.
        c.symbol_size = 1000;
        assert_eq!(built(c.clone()), Duration::from_nanos(86_400));
        // An interval set by hand stays as it is.
        c.packet_interval = Duration::from_millis(1);
        assert_eq!(built(c), Duration::from_millis(1));
        let mut plain = Profile::Study.server();
        plain.packet_interval = Duration::from_micros(500);
        assert_eq!(built(plain), Duration::from_micros(500));
    }

    #[test]
    fn profiles_differ_where_documented() {
        let (lan, study) = (Profile::Lan.server(), Profile::Study.server());
        assert_eq!(lan.scheme.to_string(), "FEC(maxloss+0.02)+R(inf)+notify");
        assert_eq!(study.scheme, Scheme::default());
        assert!(lan.loss_aware_repairs && !study.loss_aware_repairs);
        assert!(Profile::Lan.client().loss_reports && !Profile::Study.client().loss_reports);
        assert_eq!(Profile::Lan.limits().announce_repeats, 3);
        assert_eq!(Profile::Study.limits().announce_repeats, 1);
    }
}
