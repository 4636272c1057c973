//! Push payload runs on a virtual LAN: the core's push and listen
//! endpoints (the code `repocast push` and `repocast listen` run, with
//! [`Profile::Push`] settings) driven through their byte interfaces on a
//! virtual clock, with seeded loss per listener on both groups, listeners
//! tuning in at any time, crashing and restarting with what their store
//! made durable, a file set replaced mid-run, and an attacker's datagrams
//! ([`PushLan::inject`]). The deterministic twin of the tokio pumps.

use crate::source::MemorySource;
use repocast_core::Instant;
use repocast_core::auth::{Identity, PublicKey};
use repocast_core::client::ClientStats;
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::{ClientEndpointStats, Outcome};
use repocast_core::endpoint::listen::{ListenConfig, ListenEndpoint, ListenStats};
use repocast_core::endpoint::push::{PushConfig, PushEndpoint, PushItem};
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::fec::CodeKind;
use repocast_core::loss::{LossModel, LossSpec};
use repocast_core::profile::Profile;
use repocast_core::server::{ResumePoint, ServerError};
use repocast_core::wire::FecParams;
use std::collections::BTreeMap;
use std::time::Duration;

/// A listener host.
#[derive(Debug, Clone)]
pub struct PushListener {
    /// Its settings.
    pub cfg: ListenConfig,
    /// Loss on its link (both groups).
    pub loss: LossSpec,
    /// When it tunes in.
    pub join_at: Instant,
    /// When it is killed (restarting at once with its store).
    pub crash_at: Option<Instant>,
    /// When it is stopped by a signal (restarting at once with its store):
    /// unlike a kill, it keeps its partly received blocks' symbols
    /// ([`ListenEndpoint::suspend`]).
    pub stop_at: Option<Instant>,
}

impl PushListener {
    /// A TIDDO listener with `listen`'s shipped settings
    /// ([`Profile::Push`]), pinned to `signer`, at Bernoulli `loss`,
    /// tuning in at `join_at`.
    pub fn shipped(signer: PublicKey, loss: f64, join_at: Instant) -> Self {
        let mut cfg = ListenConfig::new(Profile::Push.client());
        cfg.trust = Some(signer);
        PushListener {
            cfg,
            loss: LossSpec::Bernoulli { p: loss },
            join_at,
            crash_at: None,
            stop_at: None,
        }
    }
}

/// The pusher the tests and examples run: [`Profile::Push`] as shipped,
/// packs on, no popularity, until stopped.
pub fn shipped_pusher() -> PushConfig {
    PushConfig {
        server: Profile::Push.server(),
        redundancy: None,
        packs: true,
        popularity: Vec::new(),
    }
}

/// [`shipped_pusher`] with `code` and the blocks `push --code` gives it.
pub fn shipped_pusher_with(code: CodeKind) -> PushConfig {
    let mut cfg = shipped_pusher();
    cfg.server.code = code;
    (cfg.server.max_block_symbols, cfg.server.block_growth) =
        repocast_core::profile::push_blocks(code, None);
    cfg
}

/// One listener's outcome.
#[derive(Debug, Clone)]
pub struct PushReport {
    /// Every selected item, verified or failed.
    pub outcomes: Vec<Outcome>,
    /// From tuning in to finishing (None: did not finish).
    pub delay: Option<Duration>,
    /// Data packets sent on the group while it was tuned in and not done.
    pub data_sent: u64,
    /// Of those, the ones that reached it (after its link's loss).
    pub data_heard: u64,
    /// Verified files, by name.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Blocks its store wrote.
    pub blocks_written: u64,
    /// Counters of its (last) endpoint.
    pub stats: ListenStats,
    /// Counters of that endpoint's receiver (memory, spill), if it began.
    pub receiver: Option<ClientEndpointStats>,
    /// Counters of that receiver's state machine (decodes, blocks that
    /// failed their hash, screenings), if it began.
    pub client: Option<ClientStats>,
    /// Catalogue versions it took, in order.
    pub versions: Vec<u64>,
    /// Outcomes its endpoint remembers (`ListenEndpoint::outcomes_held`).
    pub outcomes_held: usize,
}

struct Host {
    spec: PushListener,
    ep: Option<ListenEndpoint<MemoryStore>>,
    loss: [LossModel; 2],
    done_at: Option<Instant>,
    data_sent: u64,
    data_heard: u64,
    blocks_written: u64,
    versions: Vec<u64>,
}

impl Host {
    fn ep(&mut self) -> Option<&mut ListenEndpoint<MemoryStore>> {
        self.ep.as_mut()
    }
}

/// A pusher and its listeners on a virtual clock.
pub struct PushLan {
    push: PushEndpoint,
    source: MemorySource,
    hosts: Vec<Host>,
    now: Instant,
    injected: Vec<(Instant, Channel, Vec<u8>)>,
    polluter: Option<crate::insider::Polluter>,
}

/// The push items of `files`, each hashed with its FEC parameters
/// (`fec_of` its size), and a source over them.
pub fn push_items(
    files: &[(String, Vec<u8>)],
    fec_of: impl Fn(u64) -> FecParams,
) -> Result<(Vec<PushItem>, MemorySource), ServerError> {
    let items = (files.iter())
        .map(|(n, b)| {
            MemorySource::item_info(n, b, &fec_of(b.len() as u64)).map(|info| PushItem {
                info,
                mode: 0o644,
                mtime: 1_700_000_000,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let source = MemorySource::new(files.iter().map(|f| f.1.clone()).collect());
    Ok((items, source))
}

impl PushLan {
    /// A pusher of `files` as `version`, signed by `identity`.
    pub fn new(
        cfg: PushConfig,
        identity: Identity,
        version: u64,
        files: &[(String, Vec<u8>)],
    ) -> Result<Self, ServerError> {
        let (items, mut source) = push_items(files, |size| cfg.server.item_fec(size))?;
        let set = cfg.plan(items, &mut source)?;
        let push = PushEndpoint::new(Instant::ZERO, cfg, identity, version, set)?;
        Ok(PushLan {
            push,
            source,
            hosts: Vec::new(),
            now: Instant::ZERO,
            injected: Vec::new(),
            polluter: None,
        })
    }

    /// Adds a listener (seeded loss from `seed`).
    pub fn listener(&mut self, spec: PushListener, seed: u64) {
        let loss = [
            LossModel::new(spec.loss, seed ^ 0xda7a),
            LossModel::new(spec.loss, seed ^ 0xa110),
        ];
        self.hosts.push(Host {
            spec,
            ep: None,
            loss,
            done_at: None,
            data_sent: 0,
            data_heard: 0,
            blocks_written: 0,
            versions: Vec::new(),
        });
    }

    /// Puts `bytes` on a group at `at`, to every listener tuned in.
    pub fn inject(&mut self, at: Instant, ch: Channel, bytes: Vec<u8>) {
        self.injected.push((at, ch, bytes));
        self.injected.sort_by_key(|i| std::cmp::Reverse(i.0));
    }

    /// Someone on the data group answering a share of the pusher's data
    /// packets with forged ones of the same item and block
    /// ([`crate::insider`]), delivered right after each.
    pub fn pollute(&mut self, p: crate::insider::Polluter) {
        self.polluter = Some(p);
    }

    /// The polluter gone (`None` if there was none).
    pub fn stop_polluting(&mut self) -> Option<crate::insider::Polluter> {
        self.polluter.take()
    }

    /// The pusher.
    pub fn pusher(&self) -> &PushEndpoint {
        &self.push
    }

    /// The pusher's spool (what `push` would write to its spool file).
    pub fn spool(&self) -> &repocast_core::server::spool::MemorySpool {
        &self.source.spool
    }

    /// Replaces the file set with `files` as `version` at the current time.
    pub fn replace(
        &mut self,
        version: u64,
        files: &[(String, Vec<u8>)],
    ) -> Result<(), ServerError> {
        let (items, mut source) =
            push_items(files, |size| self.push.config().server.item_fec(size))?;
        let set = self.push.config().plan(items, &mut source)?;
        self.source = source;
        self.push.replace(self.now, version, set)
    }

    /// The pusher stopped and started again at the current time, as
    /// `repocast push` run again on the folder: a new endpoint for `files`
    /// as `version` (so a new session), signed by `identity`, going on from
    /// `points` if given (what `push` reads at start: the stopped run's
    /// [`PushEndpoint::resume_points`], or any record). Returns the items
    /// that went on.
    pub fn restart(
        &mut self,
        identity: Identity,
        version: u64,
        files: &[(String, Vec<u8>)],
        points: Option<&[ResumePoint]>,
    ) -> Result<usize, ServerError> {
        let cfg = self.push.config().clone();
        let (items, mut source) = push_items(files, |size| cfg.server.item_fec(size))?;
        let set = cfg.plan(items, &mut source)?;
        let mut push = PushEndpoint::new(self.now, cfg, identity, version, set)?;
        let n = points.map_or(0, |p| push.resume(p));
        self.push = push;
        self.source = source;
        Ok(n)
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    fn deliver(&mut self, ch: Channel, bytes: &[u8], attack: bool) {
        let now = self.now;
        for h in &mut self.hosts {
            if now < h.spec.join_at || h.done_at.is_some() && !h.spec.cfg.satellite {
                continue;
            }
            let Some(ep) = h.ep.as_mut() else { continue };
            let lost = h.loss[matches!(ch, Channel::Announce) as usize].lose();
            if ch == Channel::Data && !attack {
                h.data_sent += 1;
                if !lost {
                    h.data_heard += 1;
                }
            }
            if !lost {
                ep.handle_datagram(now, ch, bytes);
                ep.decode_here(now);
            }
        }
    }

    /// Starts, crashes and times out listeners due at `now`.
    fn wake_hosts(&mut self) {
        let now = self.now;
        for h in &mut self.hosts {
            if h.ep.is_none() && now >= h.spec.join_at && h.done_at.is_none() {
                h.ep = Some(ListenEndpoint::new(
                    now,
                    h.spec.cfg.clone(),
                    MemoryStore::default(),
                ));
            }
            let stop = h.spec.stop_at.take_if(|c| now >= *c).is_some();
            let crash = h.spec.crash_at.take_if(|c| now >= *c).is_some();
            if stop {
                if let Some(ep) = h.ep() {
                    ep.suspend();
                }
            }
            if stop || crash {
                if let Some(store) = h.ep.take().and_then(ListenEndpoint::into_store) {
                    h.blocks_written += store.blocks_written;
                    h.ep = Some(ListenEndpoint::new(now, h.spec.cfg.clone(), store.crash()));
                }
            }
            if let Some(ep) = h.ep() {
                if ep.poll_timeout().is_some_and(|t| t <= now) {
                    ep.handle_timeout(now);
                }
            }
        }
        for h in &mut self.hosts {
            let Some(ep) = h.ep.as_mut() else { continue };
            while let Some(ev) = ep.poll_event() {
                if let repocast_core::endpoint::listen::ListenEvent::Version { version, .. } = ev {
                    h.versions.push(version);
                }
            }
            if h.done_at.is_none() && ep.is_finished() {
                h.done_at = Some(now);
            }
        }
    }

    /// Runs until every listener has finished or `until`.
    pub fn run(&mut self, until: Instant) {
        let mut buf = Vec::with_capacity(2048);
        loop {
            self.wake_hosts();
            while let Some(dest) = self
                .push
                .poll_transmit(self.now, &mut self.source, &mut buf)
            {
                // Prepared at once (the net pump uses another thread; the
                // packets do not depend on when).
                while let Some(mut job) = self.push.poll_prepare() {
                    job.run();
                    self.push.prepared(job);
                }
                // A pusher sends to its groups only.
                let Some(ch) = dest.channel() else { continue };
                let bytes = std::mem::take(&mut buf);
                self.deliver(ch, &bytes, false);
                let forged = (self.polluter.as_mut())
                    .filter(|_| ch == Channel::Data)
                    .map(|p| p.answer(&bytes));
                for f in forged.into_iter().flatten() {
                    self.deliver(ch, &f, true);
                }
                buf = bytes;
            }
            while self.injected.last().is_some_and(|i| i.0 <= self.now) {
                if let Some((_, ch, bytes)) = self.injected.pop() {
                    self.deliver(ch, &bytes, true);
                }
            }
            self.wake_hosts();
            let all_done = self.hosts.iter().all(|h| {
                h.done_at.is_some() && !h.spec.cfg.satellite
                    || h.ep.as_ref().is_some_and(|e| e.ended().is_some())
            });
            if all_done && !self.hosts.is_empty() {
                return;
            }
            let next = [
                self.push.poll_timeout(),
                self.injected.last().map(|i| i.0),
                (self.hosts.iter())
                    .filter_map(|h| match &h.ep {
                        Some(e) => e.poll_timeout(),
                        None => Some(h.spec.join_at),
                    })
                    .min(),
                (self.hosts.iter())
                    .flat_map(|h| [h.spec.crash_at, h.spec.stop_at])
                    .flatten()
                    .min(),
            ]
            .into_iter()
            .flatten()
            .filter(|t| *t > self.now)
            .min();
            match next {
                Some(t) if t <= until => self.now = t,
                _ => {
                    self.now = until;
                    self.wake_hosts();
                    return;
                }
            }
        }
    }

    /// Every listener's report.
    pub fn reports(&self) -> Vec<PushReport> {
        (self.hosts.iter())
            .map(|h| {
                let inner = h.ep.as_ref().and_then(|e| e.receiver());
                let receiver = inner.map(|r| r.stats());
                let client = inner.map(|r| r.client_stats());
                let (outcomes, files, stats, written, held) = match &h.ep {
                    Some(e) => {
                        let store = e.store();
                        (
                            e.outcomes(),
                            store.map(|s| s.files().clone()).unwrap_or_default(),
                            e.stats(),
                            store.map_or(0, |s| s.blocks_written),
                            e.outcomes_held(),
                        )
                    }
                    None => Default::default(),
                };
                PushReport {
                    outcomes,
                    delay: h.done_at.map(|d| d.saturating_since(h.spec.join_at)),
                    data_sent: h.data_sent,
                    data_heard: h.data_heard,
                    files,
                    blocks_written: h.blocks_written + written,
                    stats,
                    receiver,
                    client,
                    versions: h.versions.clone(),
                    outcomes_held: held,
                }
            })
            .collect()
    }
}
