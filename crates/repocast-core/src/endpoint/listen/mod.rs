//! The listen endpoint: `repocast listen` as datagrams in, no back channel.
//!
//! A listener hears two groups. On the announcement group come the
//! pusher's signed catalogue pieces (`listen/intake.rs`): each is checked
//! alone (signature, signer pinned with `--trust` or the first one seen,
//! version no older than the newest seen) and assembled
//! ([`super::assembly`]) until the version's catalogue is complete for the
//! selected items (for files named without wildcards, once their own
//! pieces are in). Then (`listen/activate.rs`) a
//! [`ClientEndpoint`] in push mode receives those items from the data
//! group: packets of the version's session only, decoded blocks checked
//! against the signed block hashes and written to the [`BlockStore`]
//! (resume journal included), each item ending verified or failed. Its
//! events become one outcome per selected file (`listen/outcomes.rs`).
//!
//! A selected file that travels in a pack makes the listener receive the
//! pack; once it verifies, the store cuts out the selected members
//! ([`BlockStore::unpack`]; off the receiving path as an [`UnpackJob`] if
//! the store can, [`super::unpack`], queued in `listen/cuts.rs`), each
//! checked against its own hash and given its own outcome.
//!
//! TIDDO (the default) finishes once every selected item has an outcome
//! for the newest version it took: a file it verified that a newer version
//! changed is received again, so it ends with one version's files, up to
//! [`MAX_CHANGES_FOLLOWED`] changes of a file. In satellite mode the
//! listener never finishes: a newer version is assembled while the current
//! one is received, and once complete it replaces it; unchanged files
//! already verified are kept, changed ones are received again. Data
//! packets of one version never feed another; the partly received blocks
//! of a file the new version keeps unchanged go over to its item
//! ([`crate::client::Partial`]), and the pusher goes on with the symbol
//! ids it had not sent, so a new version costs no restart of a large file.

mod activate;
mod cuts;
mod intake;
mod outcomes;

use super::Channel;
use super::assembly::Assembly;
use super::catalogue_code::CatalogueDecoder;
use super::client::{ClientEndpoint, Event, Outcome};
use super::store::{BlockStore, PackMember};
use super::unpack::UnpackJob;
use crate::auth::{self, PublicKey};
use crate::client::ClientConfig;
use crate::wire::DataRepr;
use crate::{Instant, SessionId};
use cuts::Cuts;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Data of a version whose catalogue is still coming is kept up to this
/// fraction of the memory budget (1/2: 36 MiB of `listen`'s 72, about
/// three seconds at 100 Mbit/s; the catalogue comes within about one).
/// An eighth cost the push lab's listeners 1-2% of their time.
const EARLY_SHARE: usize = 2;

/// Data of a session not heard of, while a version is being received, is
/// kept up to this fraction of the memory budget (1/8: 9 MiB of `listen`'s
/// 72, about 0.7 s at 100 Mbit/s) for the next version, whose catalogue
/// a lossy listener may take a few copies to hear.
const NEXT_SHARE: usize = 8;

/// A listener that drops out (TIDDO) follows a selected file through at
/// most this many changes of its content (newer versions with another
/// hash for it): a file that never holds still long enough to be received
/// would otherwise keep it receiving for ever. One changed more often
/// fails with the reason; `--satellite` follows every change.
pub const MAX_CHANGES_FOLLOWED: u32 = 4;

/// Verified packs out being cut at once ([`ListenEndpoint::poll_unpack`]).
/// Creating a file is mostly the disk's work, but not all of it: with
/// disks of their own, the lab's listeners of a 10,000-file set took 8%
/// less time with two at once (docs/benchmarks.md, session 41). Packs of
/// one version never share a file; a newer version's jobs wait until the
/// older version's are back, so a file is never cut twice at once.
pub const CUT_JOBS: usize = 2;

/// Listen endpoint settings.
#[derive(Debug, Clone)]
pub struct ListenConfig {
    /// The state machine's settings ([`crate::profile::Profile::Push`]).
    pub client: ClientConfig,
    /// The signer to accept; `None`: the first valid signer seen.
    pub trust: Option<PublicKey>,
    /// Items to receive: names, patterns or folders
    /// ([`super::select`]); empty: all.
    pub select: Vec<String>,
    /// Stay tuned for new versions instead of finishing.
    pub satellite: bool,
    /// TIDDO: give up when no catalogue, or nothing useful, has come for
    /// this long.
    pub timeout: Duration,
    /// Bytes of partly received blocks kept in memory.
    pub memory_budget: u64,
    /// Versions below this are replays (the newest a previous run took).
    pub min_version: u64,
}

impl ListenConfig {
    /// Defaults with `client` settings.
    pub fn new(client: ClientConfig) -> Self {
        ListenConfig {
            client,
            trust: None,
            select: Vec::new(),
            satellite: false,
            timeout: Duration::from_secs(60),
            memory_budget: 64 << 20,
            min_version: 0,
        }
    }
}

/// What the driver hears of.
#[derive(Debug, Clone, PartialEq)]
pub enum ListenEvent {
    /// The signer accepted: pinned by the user, or the first seen.
    Signer {
        /// Its key.
        key: PublicKey,
        /// Whether the user pinned it.
        pinned: bool,
    },
    /// A catalogue version is complete and being received.
    Version {
        /// The version.
        version: u64,
        /// Items in it.
        items: u32,
        /// Items selected (and not already verified).
        receiving: usize,
    },
    /// Progress of an item (the client endpoint's event).
    Item(Event),
    /// An item's attributes, for the file once verified.
    Attributes {
        /// The item.
        item: crate::ItemId,
        /// Unix permission bits.
        mode: u32,
        /// Modification time, seconds since the epoch.
        mtime: i64,
    },
}

/// Counters of the listen endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenStats {
    /// Datagrams handed in.
    pub datagrams: u64,
    /// Datagrams that did not parse.
    pub malformed: u64,
    /// Catalogue pieces whose signature does not verify.
    pub forged: u64,
    /// Pieces signed by a key other than the one accepted.
    pub foreign: u64,
    /// Pieces of a version older than the newest seen (replays).
    pub stale: u64,
    /// Data packets of a session other than the version's being received
    /// (another pusher's, or the next version's: those are held, within
    /// an eighth of the memory budget, in case its catalogue comes).
    pub other_session: u64,
    /// Data packets that came before their version's catalogue was
    /// complete (held, within half the memory budget, until it is).
    pub early: u64,
    /// Repair pieces of a coded catalogue taken (signature checked).
    pub repairs: u64,
    /// Pieces of a coded catalogue decoded from pieces and repairs.
    pub decoded_pieces: u64,
    /// Partly received blocks carried over to a newer version that has
    /// their file unchanged.
    pub carried_blocks: u64,
}

/// The receiving side of push mode.
pub struct ListenEndpoint<S: BlockStore> {
    cfg: ListenConfig,
    signer: Option<PublicKey>,
    /// Catalogue pieces come again every quarter second: a repeat's
    /// signature is answered from memory.
    verified: auth::Verified,
    /// The version in assembly (newer than the active one).
    assembly: Option<Assembly>,
    /// The version in assembly, complete but held until older pack cuts
    /// are back (`take_when_clear`).
    held: Option<u64>,
    /// Its pieces and repairs, when its catalogue is coded.
    coded: Option<CatalogueDecoder>,
    /// The version being received: its number, session and names.
    active: Option<(u64, SessionId, Vec<String>)>,
    /// Whether the active version vouches for every data packet.
    active_signed: bool,
    inner: Option<ClientEndpoint<S>>,
    spare: Option<S>,
    /// Outcomes by name, with the hash they were for.
    results: BTreeMap<String, ([u8; 32], Outcome)>,
    /// The active version's names with no outcome yet (what
    /// [`ListenEndpoint::is_finished`] asks after every datagram: counted,
    /// not looked up name by name).
    unresolved: usize,
    /// Hashes and sizes of the active version's items, by name.
    hashes: BTreeMap<String, ([u8; 32], u64)>,
    /// TIDDO: how many newer versions changed each selected file's content.
    changes: BTreeMap<String, u32>,
    /// Names of the active version's items on the data channel, by id.
    names: BTreeMap<crate::ItemId, String>,
    /// The active version's packs being received: their selected members.
    packs: BTreeMap<crate::ItemId, Vec<PackMember>>,
    /// Verified packs to cut out off the receiving path.
    cuts: Cuts,
    events: VecDeque<ListenEvent>,
    /// Data packets held until their version's catalogue is complete.
    early: VecDeque<Vec<u8>>,
    early_bytes: usize,
    started: Instant,
    ended: Option<String>,
    stats: ListenStats,
}

impl<S: BlockStore> ListenEndpoint<S> {
    /// A listener tuning in at `now`, storing into `store`.
    pub fn new(now: Instant, cfg: ListenConfig, store: S) -> Self {
        ListenEndpoint {
            signer: cfg.trust,
            verified: auth::Verified::new(),
            cfg,
            assembly: None,
            held: None,
            coded: None,
            active: None,
            active_signed: false,
            inner: None,
            spare: Some(store),
            results: BTreeMap::new(),
            unresolved: 0,
            hashes: BTreeMap::new(),
            changes: BTreeMap::new(),
            names: BTreeMap::new(),
            packs: BTreeMap::new(),
            cuts: Cuts::default(),
            events: VecDeque::new(),
            early: VecDeque::new(),
            early_bytes: 0,
            started: now,
            ended: None,
            stats: ListenStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> ListenStats {
        self.stats
    }

    /// The client endpoint receiving the active version, if any.
    pub fn receiver(&self) -> Option<&ClientEndpoint<S>> {
        self.inner.as_ref()
    }

    /// Outcomes remembered: one per file of the active version at most
    /// (those of files gone from it are forgotten as it is taken).
    pub fn outcomes_held(&self) -> usize {
        self.results.len()
    }

    /// Signatures checked with Ed25519, and those answered from memory.
    pub fn signatures_checked(&self) -> (u64, u64) {
        self.verified.counts()
    }

    /// The signer accepted, if any yet.
    pub fn signer(&self) -> Option<PublicKey> {
        self.signer
    }

    /// The version being received.
    pub fn version(&self) -> Option<u64> {
        self.active.as_ref().map(|a| a.0)
    }

    /// The store (between versions, or inside the receiver).
    pub fn store(&self) -> Option<&S> {
        self.inner
            .as_ref()
            .map(|i| i.store())
            .or(self.spare.as_ref())
    }

    /// Takes the store out (a test's crash and restart).
    pub fn into_store(self) -> Option<S> {
        self.inner.map(ClientEndpoint::into_store).or(self.spare)
    }

    /// A datagram from one of the groups.
    pub fn handle_datagram(&mut self, now: Instant, from: Channel, bytes: &[u8]) {
        self.stats.datagrams += 1;
        if self.ended.is_some() {
            return;
        }
        match from {
            Channel::Announce => self.on_piece(now, bytes),
            Channel::Data => {
                let s = DataRepr::peek_session(bytes);
                let active = self.active.as_ref().map(|a| a.1);
                let assembling = self.assembly.as_ref().map(|a| a.session);
                if s.is_some() && s == active {
                    if let Some(inner) = self.inner.as_mut() {
                        inner.handle_datagram(now, Channel::Data, bytes);
                    }
                    self.drain();
                } else if s.is_some() && s == assembling || assembling.is_none() && active.is_none()
                {
                    // Data of a version whose catalogue is still coming:
                    // kept (within a bound) for when it is complete, so a
                    // lost catalogue piece costs no data.
                    self.stats.early += 1;
                    self.keep_early(bytes, EARLY_SHARE);
                } else if s.is_some() && assembling.is_none() {
                    // A session not heard of while a version is on: most
                    // likely the next version's, whose catalogue is on its
                    // way (one of a single piece is never seen assembling).
                    // Kept within a smaller bound: it may be another
                    // pusher's.
                    self.stats.other_session += 1;
                    self.keep_early(bytes, NEXT_SHARE);
                } else {
                    self.stats.other_session += 1;
                }
            }
        }
    }

    /// Keeps a data packet for a version still to come, dropping the
    /// oldest kept beyond `1/share` of the memory budget.
    fn keep_early(&mut self, bytes: &[u8], share: usize) {
        self.early_bytes += bytes.len();
        self.early.push_back(bytes.to_vec());
        while self.early_bytes > self.cfg.memory_budget as usize / share {
            match self.early.pop_front() {
                Some(b) => self.early_bytes -= b.len(),
                None => break,
            }
        }
    }

    /// The next verified pack to cut out off the receiving path (up to
    /// [`CUT_JOBS`] at a time, of one version): run it on any thread, then
    /// hand it back with [`ListenEndpoint::unpacked`]. The listener is not
    /// finished while one is waiting or out.
    pub fn poll_unpack(&mut self) -> Option<UnpackJob> {
        self.cuts.poll()
    }

    /// Whether verified packs wait to be cut out, or one is out: a driver
    /// stopping a satellite listener finishes them first, so what verified
    /// is in place.
    pub fn unpacking(&self) -> bool {
        self.cuts.busy()
    }

    /// A job from [`ListenEndpoint::poll_unpack`], back: its members'
    /// outcomes.
    pub fn unpacked(&mut self, now: Instant, job: UnpackJob) {
        self.cuts.back();
        let UnpackJob {
            members, results, ..
        } = job;
        self.cut(&Ok(()), members, results);
        if self.held.is_some() {
            self.take_when_clear(now);
        }
    }

    /// The next block to decode off the receiving path
    /// ([`ClientEndpoint::poll_decode`]): run it on any thread, then hand
    /// it back with [`ListenEndpoint::decoded`].
    pub fn poll_decode(&mut self) -> Option<crate::client::decode::DecodeJob> {
        self.inner.as_mut()?.poll_decode()
    }

    /// A job from [`ListenEndpoint::poll_decode`], back.
    pub fn decoded(&mut self, now: Instant, job: crate::client::decode::DecodeJob) {
        if let Some(inner) = self.inner.as_mut() {
            inner.decoded(now, job);
        }
        self.drain();
    }

    /// Runs the decode jobs waiting, here and now, and hands them back
    /// ([`ClientEndpoint::decode_here`]); then the packs waiting to be
    /// cut out.
    pub fn decode_here(&mut self, now: Instant) {
        if let Some(inner) = self.inner.as_mut() {
            inner.decode_here(now);
        }
        self.drain();
        while let Some(mut job) = self.poll_unpack() {
            job.run();
            self.unpacked(now, job);
        }
    }

    /// The driver stops the run (a signal): what is partly received is
    /// kept in the store for the next run on the same folder
    /// ([`ClientEndpoint::suspend`]). Take decode jobs back first.
    pub fn suspend(&mut self) {
        if let Some(inner) = self.inner.as_mut() {
            inner.suspend();
        }
    }

    /// Timers: the receiver's, and the wait for a first catalogue.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        if self.active.is_none() && !self.cfg.satellite && now >= self.started + self.cfg.timeout {
            let (heads, items) = self.assembly.as_ref().map_or((0, 0), |a| a.progress());
            let who = match (self.cfg.trust, self.signer) {
                (Some(k), _) => format!("signed by {k}"),
                (None, Some(k)) => format!("from {k}"),
                (None, None) => "from any pusher".into(),
            };
            return self.end(format!(
                "no complete catalogue {who} within {} s ({heads} of {items} items described)",
                self.cfg.timeout.as_secs_f64()
            ));
        }
        if let Some(inner) = self.inner.as_mut() {
            inner.handle_timeout(now);
        }
        self.drain();
    }

    /// When to call [`ListenEndpoint::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            return None;
        }
        match &self.inner {
            Some(i) => i.poll_timeout(),
            None if self.cfg.satellite => None,
            None => Some(self.started + self.cfg.timeout),
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<ListenEvent> {
        self.events.pop_front()
    }

    /// Whether every selected item of the version received has an outcome
    /// (never in satellite mode, unless the run ended).
    pub fn is_finished(&self) -> bool {
        self.ended.is_some() || !self.cfg.satellite && self.active.is_some() && self.unresolved == 0
    }

    /// Why the run ended early, if it did.
    pub fn ended(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// Every selected item's outcome (those not ended say why not).
    pub fn outcomes(&self) -> Vec<Outcome> {
        let pending = self.ended.clone().unwrap_or_else(|| "not received".into());
        let Some((_, _, names)) = &self.active else {
            return Vec::new();
        };
        (names.iter())
            .map(|n| match self.results.get(n) {
                Some((_, o)) => o.clone(),
                None => Outcome {
                    name: n.clone(),
                    size: 0,
                    result: Err(pending.clone()),
                },
            })
            .collect()
    }

    fn end(&mut self, reason: String) {
        if self.ended.is_none() {
            self.ended = Some(reason);
        }
    }
}
