//! `repocast listen`: the core's [`ListenEndpoint`] on real sockets.
//!
//! One task owns the endpoint and its [`Store`]. It joins the two groups
//! (through the optional [`crate::fault::LossySocket`] emulation), feeds the endpoint
//! what they deliver, runs its decode and unpack jobs on the blocking pool
//! (`crate::jobs`), wakes it at its deadline, and passes its events on
//! (progress bars, logs). No packet goes back: push mode has no back
//! channel. Signatures, versions, selection, decoding, the memory bound,
//! storing, verifying and outcomes are the endpoint's. The newest
//! catalogue version taken from a pinned key is recorded in the output
//! folder, so a restarted listener refuses older (replayed) ones too.

use crate::repo::STATE_DIR;
use crate::socket::Interface;
use crate::store::Store;
use crate::{NetError, core_now};
use repocast_core::auth::PublicKey;
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::Outcome;
use repocast_core::endpoint::listen::{ListenConfig, ListenEndpoint, ListenEvent, ListenStats};
use repocast_core::endpoint::signing::VerifierStats;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// What to receive and how.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    /// Data group and port.
    pub data_group: SocketAddr,
    /// Catalogue group and port.
    pub announce_group: SocketAddr,
    /// Interface to join on.
    pub interface: Interface,
    /// The pusher's address, to join both groups source-specifically
    /// (`--source`; needed in the source-specific range, 232.0.0.0/8 and
    /// ff3x::/32). None: any source.
    pub source: Option<IpAddr>,
    /// Output folder.
    pub out: PathBuf,
    /// Item name patterns (empty: all).
    pub select: Vec<String>,
    /// Stay tuned for new versions.
    pub satellite: bool,
    /// The signer to accept (None: the first seen).
    pub trust: Option<PublicKey>,
    /// TIDDO: give up after this long without a catalogue or progress.
    pub timeout: Duration,
    /// Emulated loss on received datagrams (seeded).
    pub loss: LossSpec,
    /// Seed of the loss emulation.
    pub seed: u64,
    /// Bytes of partly received blocks kept in memory.
    pub memory_budget: u64,
    /// Replace existing files that differ (always in satellite mode).
    pub overwrite: bool,
}

impl ListenOptions {
    /// Defaults: the push groups, all items, into `out`.
    pub fn new(out: PathBuf) -> Self {
        ListenOptions {
            data_group: (crate::addr::PUSH_DATA_GROUP_V4, crate::addr::PUSH_DATA_PORT).into(),
            announce_group: (
                crate::addr::PUSH_ANNOUNCE_GROUP_V4,
                crate::addr::PUSH_ANNOUNCE_PORT,
            )
                .into(),
            interface: Interface::default(),
            source: None,
            out,
            select: Vec::new(),
            satellite: false,
            trust: None,
            timeout: Duration::from_secs(60),
            loss: LossSpec::NONE,
            seed: 1,
            memory_budget: MEMORY_BUDGET,
            overwrite: false,
        }
    }
}

/// How a listen went.
#[derive(Debug, Clone)]
pub struct ListenReport {
    /// Every selected item, verified or failed with a reason.
    pub items: Vec<Outcome>,
    /// Why the run ended early, if it did.
    pub ended: Option<String>,
    /// From start to the end.
    pub elapsed: Duration,
    /// The signer accepted.
    pub signer: Option<PublicKey>,
    /// The catalogue version received.
    pub version: Option<u64>,
    /// The endpoint's counters.
    pub stats: ListenStats,
    /// Datagrams received from the groups.
    pub datagrams: u64,
    /// Datagrams dropped by the loss emulation.
    pub emulated_losses: u64,
    /// Blocks taken from a previous run's journal.
    pub resumed_blocks: u64,
    /// Partly received blocks found with the symbols a previous run kept
    /// when it stopped short, and those symbols.
    pub kept_blocks: u64,
    pub kept_symbols: u64,
    /// Decoded blocks that failed their signed hash (forged or corrupt
    /// symbols; the block was received again).
    pub corrupt_blocks: u64,
    /// Blocks decoded off the receiving thread (`client::decode`).
    pub decode_jobs: u64,
    /// Signed symbol batches checked and refused, and data packets no
    /// batch vouched for (dropped), when the pusher signs its symbols.
    pub signing: VerifierStats,
}

impl ListenReport {
    /// Whether every selected item verified (and there was one).
    pub fn all_ok(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|o| o.result.is_ok())
    }
}

/// Default memory for partly received blocks: above the pusher's span
/// (64 MiB in [`Profile::Push`]), so the blocks of a span all stay in
/// memory while it is on air, and as low as that allows: a listener's
/// whole process peaks at 88-93 MiB receiving 1 and 2 GiB at 1 Gbit/s
/// (`tests/push-memory.sh`).
pub const MEMORY_BUDGET: u64 = 72 << 20;

/// The file recording the newest version taken per signer.
const VERSIONS_FILE: &str = "push-versions";

/// The newest version recorded for `key` under `out`.
fn recorded_version(out: &Path, key: &PublicKey) -> u64 {
    let k = key.to_string();
    std::fs::read_to_string(out.join(STATE_DIR).join(VERSIONS_FILE))
        .ok()
        .and_then(|t| {
            t.lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(a, _)| *a == k)
                .filter_map(|(_, v)| v.trim().parse().ok())
                .max()
        })
        .unwrap_or(0)
}

/// Records `version` as the newest taken from `key`.
fn record_version(out: &Path, key: &PublicKey, version: u64) {
    let dir = out.join(STATE_DIR);
    let path = dir.join(VERSIONS_FILE);
    let k = key.to_string();
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with(&k))
        .map(str::to_owned)
        .collect();
    lines.push(format!("{k} {version}"));
    if let Err(e) = crate::state_file::write_whole(&path, lines.join("\n") + "\n") {
        tracing::warn!("{}: {e}", path.display());
    }
}

/// `repocast listen`: receives the selected items into `opts.out`. Ends
/// when every item has an outcome (TIDDO), or on `stop` (satellite).
pub async fn listen(
    opts: ListenOptions,
    progress: Option<mpsc::UnboundedSender<ListenEvent>>,
    mut stop: Option<watch::Receiver<bool>>,
) -> Result<ListenReport, NetError> {
    crate::settings::check_groups(opts.data_group, opts.announce_group)?;
    crate::settings::check_source(opts.data_group, opts.source)?;
    crate::settings::check_source_named(opts.data_group, opts.source)?;
    let started = std::time::Instant::now();
    let store = Store::new(&opts.out)?.overwrite(opts.overwrite || opts.satellite);
    let mut cfg = ListenConfig::new(Profile::Push.client());
    cfg.trust = opts.trust;
    cfg.select = opts.select.clone();
    cfg.satellite = opts.satellite;
    cfg.timeout = opts.timeout;
    cfg.memory_budget = opts.memory_budget;
    cfg.min_version = opts.trust.map_or(0, |k| recorded_version(&opts.out, &k));
    let start = std::time::Instant::now();
    let mut ep = ListenEndpoint::new(core_now(start), cfg, store);
    let crate::client::Groups {
        mut data,
        mut announce,
    } = crate::client::Groups::join(
        &opts.data_group,
        &opts.announce_group,
        &opts.interface,
        opts.source,
        opts.loss,
        opts.seed,
    )?;
    let mut dgram = vec![0u8; 65536];
    let mut alarm = crate::Alarm::default();
    let mut jobs = crate::jobs::Jobs::new();
    let mut unpacks = crate::jobs::Jobs::new();
    let mut stopped = false;
    loop {
        jobs.trade(&mut ep, start);
        while let Some(job) = ep.poll_unpack() {
            unpacks.start(job);
        }
        while let Some(ev) = ep.poll_event() {
            if let (ListenEvent::Version { version, .. }, Some(k)) = (&ev, ep.signer()) {
                record_version(&opts.out, &k, *version);
            }
            if let Some(tx) = &progress {
                let _ = tx.send(ev);
            }
        }
        if ep.is_finished() {
            break;
        }
        let deadline = alarm.target(ep.poll_timeout(), start);
        let stopping = async {
            match stop.as_mut() {
                Some(s) => {
                    let _ = s.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = data.readable() => {
                crate::datagrams::drain(&mut data, &mut dgram, |d| {
                    ep.handle_datagram(core_now(start), Channel::Data, d);
                    // Blocks ready go out at once, and those back come in,
                    // not only between batches.
                    jobs.trade(&mut ep, start);
                });
            }
            _ = announce.readable() => {
                crate::datagrams::drain(&mut announce, &mut dgram, |d| {
                    ep.handle_datagram(core_now(start), Channel::Announce, d);
                });
            }
            Some(job) = jobs.done() => crate::jobs::HandsOutJobs::work_done(&mut ep, core_now(start), job),
            Some(job) = unpacks.done() => ep.unpacked(core_now(start), job),
            _ = crate::sleep_until(deadline) => ep.handle_timeout(core_now(start)),
            _ = stopping => {
                stopped = true;
                break;
            }
        }
    }
    // Blocks out being decoded come back first, so what they verify is
    // written; then, stopped, what is partly received is kept for the
    // next run on this folder (a listener that gave up has done so).
    jobs.settle(&mut ep, start).await;
    if stopped {
        ep.suspend();
    }
    // Stopped (or finished) with verified packs not yet cut out: they are
    // finished first, so what verified is in place.
    while ep.unpacking() {
        while let Some(job) = ep.poll_unpack() {
            unpacks.start(job);
        }
        match unpacks.done().await {
            Some(job) => ep.unpacked(core_now(start), job),
            None => break,
        }
    }
    let client = ep.receiver().map(|r| r.client_stats()).unwrap_or_default();
    let rx = ep.receiver().map(|r| r.stats()).unwrap_or_default();
    let signing = ep.receiver().map(|r| r.stats().signing).unwrap_or_default();
    Ok(ListenReport {
        items: ep.outcomes(),
        ended: ep.ended().map(str::to_owned),
        elapsed: started.elapsed(),
        signer: ep.signer(),
        version: ep.version(),
        stats: ep.stats(),
        datagrams: data.received + announce.received,
        emulated_losses: data.dropped + announce.dropped,
        resumed_blocks: rx.resumed_blocks,
        kept_blocks: rx.kept_blocks_found,
        kept_symbols: rx.kept_symbols_found,
        corrupt_blocks: client.corrupt_blocks,
        decode_jobs: client.decode_jobs,
        signing,
    })
}
