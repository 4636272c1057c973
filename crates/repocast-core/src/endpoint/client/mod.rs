//! The client endpoint: the [`Client`] state machine behind a byte
//! interface, with its storage, memory bound and outcomes.
//!
//! A driver (`repocast get`, the simulator's payload runs, the fuzz target)
//! reports bytes read from the request connection
//! ([`ClientEndpoint::handle_stream`]), datagrams from the groups
//! ([`ClientEndpoint::handle_datagram`]) and the connection's close, wakes
//! the endpoint at [`ClientEndpoint::poll_timeout`], and after every call
//! writes the frames of [`ClientEndpoint::poll_transmit`] and acts on
//! [`ClientEndpoint::poll_event`] (join the groups a welcome names, then
//! say so with [`ClientEndpoint::joined`]: the request waits for it; show
//! progress). It stops once [`ClientEndpoint::is_finished`] and the
//! transmit queue is empty. Every requested item ends verified or failed
//! with a reason: a server that breaks the protocol, closes, or goes silent
//! for the idle timeout fails what is left.
//!
//! When the welcome hands over a session key, every datagram must carry
//! a valid tag (and each announcement the pinned server's signature, if a
//! key is pinned) before it is parsed further: anything else is counted as
//! forged and dropped, and does not count as heard (`crate::auth`). When
//! the welcome (or, for a listener, the signed catalogue) says symbols are
//! signed, a data packet that passed its tag also waits until a batch
//! signed by the pinned key lists it ([`super::signing`]).
//!
//! This module holds the request, control and event side; `admit` the
//! checks a datagram passes before it is parsed further, and `memory` the
//! memory bound (partial blocks spilled to the store and brought back).

mod admit;
mod finishing;
mod jobs;
mod memory;
mod request;
mod stall;
mod wanted;

use super::Channel;
use super::finish::FinishJob;
use super::signing::{BatchVerifier, VerifierStats};
use super::store::{BlockStore, Resume};
use crate::auth::{self, PublicKey, SessionKey};
use crate::client::{Client, ClientConfig, ClientEvent, ClientStats};
use crate::fec::layout::Layout;
use crate::hash::FastMap;
use crate::wire::control::{CatalogueEntry, Channels};
use crate::wire::frame::{FrameDecoder, encode_frame};
use crate::wire::{self, AnnounceRepr, ClientMsg, ServerMsg, parse_announcements};
use crate::{Instant, ItemId};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Most catalogue entries a client accepts in all (a server cannot grow
/// `repocast ls` without bound).
pub const MAX_CATALOGUE_TOTAL: usize = 1 << 20;

/// The shipped [`ClientEndpointConfig::stall_timeout`]: far beyond any
/// wait measured under load (at issue 12's defaults the longest request
/// took 20.5 s in all), short enough that a lost request does not sit
/// for good.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What the client wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// These items, by name.
    Items(Vec<String>),
    /// Every item in the catalogue.
    All,
    /// The items these selectors name in the catalogue: exact names,
    /// patterns and folders ([`crate::endpoint::select`]). A pattern or
    /// folder that names nothing fails as itself, with that reason.
    Select(Vec<String>),
    /// Only the catalogue (`repocast ls`).
    Catalogue,
}

/// Rotated session keys a client keeps (the one in use, the one before,
/// the one to come).
const MAX_ROTATED_KEYS: usize = 3;

/// Client endpoint settings.
#[derive(Debug, Clone)]
pub struct ClientEndpointConfig {
    /// The state machine's settings (from a [`crate::profile::Profile`]).
    pub client: ClientConfig,
    /// What to fetch.
    pub want: Want,
    /// Give up on what is left when nothing useful (a control frame, a
    /// valid announcement of our session, a useful data packet) has
    /// arrived for this long.
    pub idle_timeout: Duration,
    /// Give up on what is left when the request itself has not moved (no
    /// useful symbol, manifest, catalogue page or item settled) for this
    /// long, however much else the server sends (`stall`); `None`: wait
    /// while the server is heard (push, whose carousel comes round).
    pub stall_timeout: Option<Duration>,
    /// Bytes of partly received blocks kept in memory; beyond it the least
    /// recently fed blocks go to the store's spill.
    pub memory_budget: u64,
    /// The server's key as pinned and checked by the driver (TLS). With
    /// it the client insists on an authenticated session and checks the
    /// signature on every announcement.
    pub server_key: Option<PublicKey>,
    /// Signatures already checked, shared by the endpoints of one
    /// receiver ([`auth::Verified`]): a host's shared receiver gives all
    /// its requests one, so each announcement's signature is checked once.
    pub verified: auth::Verified,
}

impl ClientEndpointConfig {
    /// Defaults for `want` with `client` settings.
    pub fn new(client: ClientConfig, want: Want) -> Self {
        ClientEndpointConfig {
            client,
            want,
            idle_timeout: Duration::from_secs(60),
            stall_timeout: Some(STALL_TIMEOUT),
            memory_budget: 64 << 20,
            server_key: None,
            verified: auth::Verified::new(),
        }
    }
}

/// Progress and requests for the driver.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The server's welcome: join these groups (once per endpoint), then
    /// call [`ClientEndpoint::joined`]. The request goes out only then, so
    /// the server starts no transmission for it before this receiver can
    /// hear it (a symbol sent in between would be lost to it, and a small
    /// item would need a NAK round to finish).
    Join(Channels),
    /// The whole request, when it is known before the manifests come (a
    /// request for the whole catalogue: the catalogue gives every item's
    /// size), so a progress display can show the total from the start
    /// rather than grow it with each manifest (the server sends those as
    /// it lets items in: `ServerConfig::request_window`).
    Requested {
        /// Items asked for.
        items: u64,
        /// Their bytes in all.
        bytes: u64,
    },
    /// An item's manifest: its name and size, and bytes already held.
    Item {
        /// The item.
        item: ItemId,
        /// Its name.
        name: String,
        /// Its size.
        size: u64,
        /// Bytes already verified (resumed).
        resumed: u64,
    },
    /// Bytes verified and stored for an item.
    Bytes {
        /// The item.
        item: ItemId,
        /// How many.
        bytes: u64,
    },
    /// An item is verified and in place.
    Complete {
        /// The item.
        item: ItemId,
    },
    /// An item failed.
    Failed {
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// One item's outcome.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// Its name.
    pub name: String,
    /// Its size (0 if its manifest never came).
    pub size: u64,
    /// Verified and in place; otherwise why not.
    pub result: Result<(), String>,
}

/// Counters of the endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientEndpointStats {
    /// Datagrams handed in.
    pub datagrams: u64,
    /// Datagrams that did not parse (dropped).
    pub malformed: u64,
    /// Blocks found verified in the store (resumed).
    pub resumed_blocks: u64,
    /// Partly received blocks moved to the spill.
    pub spilled_blocks: u64,
    /// Spilled blocks read back (each once its next symbol could
    /// complete it).
    pub restored_blocks: u64,
    /// Most bytes of partly received blocks in memory at a budget check.
    pub peak_held_bytes: u64,
    /// Partly received blocks found with symbols an earlier run kept
    /// ([`ClientEndpoint::suspend`]).
    pub kept_blocks_found: u64,
    /// Symbols those blocks held (as the store counted them).
    pub kept_symbols_found: u64,
    /// Symbols of the partly received blocks an older catalogue version
    /// handed over ([`ClientEndpoint::adopt_partial`]).
    pub adopted_symbols: u64,
    /// Blocks or items whose symbols could not be kept at a stop (the
    /// store failed; those symbols are received again).
    pub keep_failures: u64,
    /// Datagrams of an authenticated session with a missing or wrong tag
    /// or signature (dropped before parsing further).
    pub forged: u64,
    /// Announcements that do not bear on this request (of items it does
    /// not wait for, ending nothing it listens to), checked on their
    /// session tag only and otherwise ignored
    /// (`Client::handle_stray_announce`).
    pub stray_announcements: u64,
    /// With signed symbols ([`super::signing`]): batches checked, batch
    /// datagrams refused, and data packets dropped because no verified
    /// batch listed them in time.
    pub signing: VerifierStats,
}

/// The client side of repocast as bytes in, bytes out.
pub struct ClientEndpoint<S: BlockStore> {
    client: Client,
    store: S,
    cfg: ClientEndpointConfig,
    frames: FrameDecoder,
    out: VecDeque<ClientMsg>,
    events: VecDeque<Event>,
    /// The welcome's groups went out as [`Event::Join`].
    joined: bool,
    /// The driver has joined them ([`ClientEndpoint::joined`]).
    listening: bool,
    /// Names are recorded but their request is not sent yet (it waits
    /// for `listening`).
    unasked: bool,
    /// Names requested (None until the catalogue is in, with `All`).
    names: Option<Vec<String>>,
    /// The same names as a set (a manifest's name is checked against it).
    requested: std::collections::HashSet<String>,
    /// Requested names with an outcome (finished when all have one).
    settled: usize,
    catalogue: Vec<CatalogueEntry>,
    outcomes: BTreeMap<String, Outcome>,
    sizes: FastMap<ItemId, (String, u64)>,
    /// The items still wanted, by name and id.
    wanted: wanted::Wanted,
    /// Bytes per symbol of each item with a manifest.
    symbol_sizes: FastMap<ItemId, u64>,
    /// Partial blocks in memory, by when they last gained a symbol.
    lru: FastMap<(ItemId, u32), u64>,
    tick: u64,
    /// Symbols of spilled blocks not yet written to the store.
    spill_batch: FastMap<(ItemId, u32), super::store::Symbols>,
    batched: usize,
    last_heard: Instant,
    /// When the request itself last moved.
    stall: stall::Stall,
    /// The run ended early (protocol error, close, idle): why.
    ended: Option<String>,
    bye_sent: bool,
    /// The session's key, from the welcome.
    session_key: Option<SessionKey>,
    /// Keys of later epochs, from rotations (`Rekey`), newest last; a
    /// packet of an epoch not here is checked under the welcome's key.
    rotated: Vec<(u8, SessionKey)>,
    /// With signed symbols: which data packets signed batches vouched for.
    verifier: Option<BatchVerifier>,
    /// Items assembled whose last I/O waits to be handed out, and how
    /// many such jobs are out ([`finishing`]).
    finishing: VecDeque<FinishJob>,
    finishes_out: usize,
    stats: ClientEndpointStats,
}

impl<S: BlockStore> ClientEndpoint<S> {
    /// An endpoint that starts its request at `now`, storing into `store`.
    pub fn new(now: Instant, cfg: ClientEndpointConfig, store: S) -> Self {
        let mut e = ClientEndpoint {
            client: Client::new(cfg.client.clone()),
            store,
            frames: FrameDecoder::default(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            joined: false,
            listening: false,
            unasked: false,
            names: None,
            requested: Default::default(),
            settled: 0,
            catalogue: Vec::new(),
            outcomes: BTreeMap::new(),
            sizes: FastMap::default(),
            wanted: wanted::Wanted::default(),
            symbol_sizes: FastMap::default(),
            lru: FastMap::default(),
            spill_batch: FastMap::default(),
            batched: 0,
            tick: 0,
            last_heard: now,
            stall: stall::Stall::new(now, cfg.stall_timeout),
            ended: None,
            bye_sent: false,
            session_key: None,
            rotated: Vec::new(),
            verifier: None,
            finishing: VecDeque::new(),
            finishes_out: 0,
            stats: ClientEndpointStats::default(),
            cfg,
        };
        let talks = !matches!(&e.cfg.want, Want::Items(n) if n.is_empty());
        if talks {
            e.out.push_back(ClientMsg::Hello {
                name: e.cfg.client.name.clone(),
                token: e.cfg.client.token.clone(),
            });
        }
        match &e.cfg.want {
            Want::Items(names) => {
                let names = names.clone();
                e.request(now, names);
            }
            Want::All | Want::Select(_) | Want::Catalogue => {
                e.out.push_back(ClientMsg::ListCatalogue)
            }
        }
        e
    }

    /// The driver has joined the groups of [`Event::Join`] (or listens on
    /// them already): the request goes out.
    pub fn joined(&mut self, now: Instant) {
        self.listening = true;
        self.ask(now);
    }

    /// Push mode: receives these items from the carousel; their manifests
    /// come from a signed catalogue, not from a server's answer (see
    /// [`super::listen`]). May be called again with more items.
    pub fn subscribe(&mut self, now: Instant, entries: Vec<crate::wire::ManifestEntry>) {
        let names = self.names.get_or_insert_with(Vec::new);
        for e in &entries {
            if self.requested.insert(e.name.clone()) {
                names.push(e.name.clone());
            }
        }
        self.last_heard = now;
        self.client.subscribe(now, entries);
        self.process(now);
    }

    /// The store, to change (push mode sets files' attributes).
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Records an item's outcome (the first one stands for its count).
    fn settle(&mut self, o: Outcome) {
        if self.requested.contains(&o.name) && !self.outcomes.contains_key(&o.name) {
            self.settled += 1;
            self.wanted.settle(&o.name);
        }
        self.outcomes.insert(o.name.clone(), o);
    }

    /// The store (to read what was received, or to hand it on).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Takes the store out (a test's crash and restart).
    pub fn into_store(self) -> S {
        self.store
    }

    /// The catalogue received (with `All` or `Catalogue`).
    pub fn catalogue(&self) -> &[CatalogueEntry] {
        &self.catalogue
    }

    /// Counters of the state machine.
    pub fn client_stats(&self) -> ClientStats {
        self.client.stats()
    }

    /// Counters of the endpoint.
    pub fn stats(&self) -> ClientEndpointStats {
        let mut s = self.stats;
        if let Some(v) = &self.verifier {
            s.signing = v.stats();
        }
        s
    }

    /// Bytes read from the request connection.
    pub fn handle_stream(&mut self, now: Instant, bytes: &[u8]) {
        if self.ended.is_some() {
            return;
        }
        self.frames.extend(bytes);
        loop {
            let msg = match self.frames.next_frame() {
                Ok(Some(f)) => ServerMsg::parse(&f),
                Ok(None) => break,
                Err(e) => Err(e),
            };
            match msg {
                Ok(m) => {
                    self.last_heard = now;
                    self.on_server_msg(now, m);
                }
                Err(e) => {
                    self.end(format!("the server sent a bad message: {e}"));
                    return;
                }
            }
        }
        self.process(now);
    }

    fn on_server_msg(&mut self, now: Instant, m: ServerMsg) {
        match m {
            ServerMsg::Catalogue { entries, more } if self.names.is_none() => {
                if self.catalogue.len() + entries.len() > MAX_CATALOGUE_TOTAL {
                    self.end(format!(
                        "the server's catalogue is over {MAX_CATALOGUE_TOTAL} entries"
                    ));
                    return;
                }
                self.catalogue.extend(entries);
                if !more {
                    self.request_from_catalogue(now);
                }
            }
            ServerMsg::Welcome {
                session,
                session_key,
                signed_symbols,
                ..
            } if self.session_key.is_none() => {
                // Batches are checked under the key the driver pinned; a
                // client that knows none checks no signature at all.
                if let (true, Some(k)) = (signed_symbols, self.cfg.server_key) {
                    self.expect_signed_symbols(k, session);
                }
                match session_key {
                    Some(k) => self.session_key = Some(SessionKey::from_bytes(k)),
                    None if self.cfg.server_key.is_some() => {
                        return self
                            .end("the server does not authenticate its multicast packets".into());
                    }
                    None => {}
                }
                self.client.handle_server_msg(now, m)
            }
            ServerMsg::Rekey { epoch, key } if self.session_key.is_some() => {
                self.rotated.retain(|(e, _)| *e != epoch);
                self.rotated.push((epoch, SessionKey::from_bytes(key)));
                // The key in use, the one before and the one to come.
                if self.rotated.len() > MAX_ROTATED_KEYS {
                    self.rotated.remove(0);
                }
            }
            // Refused before any welcome (an access token missing or
            // unknown), or the connection refused later (its token
            // withdrawn; no item or name): the whole run ends with the
            // server's reason.
            ServerMsg::Failed {
                item: None,
                name,
                reason,
            } if self.client.session().is_none() || name.is_empty() => {
                self.end(format!("the server refused: {reason}"))
            }
            m => self.client.handle_server_msg(now, m),
        }
    }

    /// A datagram from one of the groups.
    pub fn handle_datagram(&mut self, now: Instant, from: Channel, bytes: &[u8]) {
        self.stats.datagrams += 1;
        if self.ended.is_some() {
            return;
        }
        match from {
            Channel::Data if wire::kind_of(bytes) == Some(wire::kind::SYMBOL_BATCH) => {
                let Some(v) = self.verifier.as_mut() else {
                    return;
                };
                v.on_batch(bytes);
                while let Some(b) = self.verifier.as_mut().and_then(BatchVerifier::take_ready) {
                    self.on_data_datagram(now, &b, false);
                }
            }
            Channel::Data => self.on_data_datagram(now, bytes, true),
            Channel::Announce => match self.open_announce(bytes, false).map(parse_announcements) {
                None => return,
                Some(Ok(list)) => {
                    if !self.on_announcements(now, bytes, &list) {
                        return;
                    }
                }
                Some(Err(_)) => self.stats.malformed += 1,
            },
        }
        self.process(now);
    }

    /// The announcements of one datagram, in order; `false` if its
    /// signature failed. The signature (about 100 µs on a small VM) is
    /// checked once, and only if one of them bears on this request when
    /// its turn comes; the rest, on their session tag, change nothing.
    fn on_announcements(&mut self, now: Instant, bytes: &[u8], list: &[AnnounceRepr]) -> bool {
        let mut signed = false;
        for a in list {
            let bears = self.client.wants_announce(a);
            if bears && !signed {
                if self.open_announce(bytes, true).is_none() {
                    return false;
                }
                signed = true;
            }
            if self.client.session() == Some(a.session) {
                self.last_heard = now;
            }
            if bears {
                self.client.handle_announce(now, a);
            } else {
                self.stats.stray_announcements += 1;
                self.client.handle_stray_announce(now, a);
            }
        }
        true
    }

    /// Timers: NAKs due, transmissions whose end never came, the idle
    /// timeout. An early call is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ended.is_some() {
            return;
        }
        if now >= self.last_heard + self.cfg.idle_timeout && !self.is_finished() {
            let from = if self.client.push { "pusher" } else { "server" };
            self.end(format!(
                "nothing heard from the {from} for {} s",
                self.cfg.idle_timeout.as_secs_f64()
            ));
            return;
        }
        self.note_progress(now);
        if let Some(secs) = self.stall.stalled(now).filter(|_| !self.is_finished()) {
            let left = self.requested.len().saturating_sub(self.settled);
            self.end(format!(
                "the server sent nothing for this request ({left} items left) for {secs:.0} s, \
                 though it was heard: it is overloaded, or not serving this request"
            ));
            return;
        }
        self.client.handle_timeout(now);
        self.process(now);
    }

    /// The driver stops the run (a signal, its user gone): everything not
    /// yet verified fails with `reason`, and what is partly received is
    /// kept for a rerun ([`ClientEndpoint::suspend`]). Take the blocks out
    /// being decoded back first (their symbols are not here to keep); a
    /// block they verify after this is still written.
    pub fn stop(&mut self, reason: impl Into<String>) {
        if !self.is_finished() {
            self.end(reason.into());
        }
    }

    /// The request connection closed.
    pub fn handle_close(&mut self, _now: Instant) {
        if !self.is_finished() {
            self.end("the server closed the connection".into());
        }
    }

    /// When to call [`ClientEndpoint::handle_timeout`], if nothing else
    /// happens first.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            return None;
        }
        let mut due = self.last_heard + self.cfg.idle_timeout;
        if let Some(stall) = self.stall.deadline() {
            due = due.min(stall);
        }
        Some(self.client.poll_timeout().map_or(due, |t| t.min(due)))
    }

    /// The next frame for the request connection, into `buf` (replacing
    /// its bytes); `false` when there is none. Once finished, the last is
    /// a goodbye.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        let m = match self.out.pop_front().or_else(|| self.client.poll_transmit()) {
            Some(m) => m,
            None if self.is_finished() && !self.bye_sent && self.ended.is_none() => {
                self.bye_sent = true;
                ClientMsg::Bye
            }
            None => return false,
        };
        let mut body = Vec::new();
        m.emit(&mut body);
        encode_frame(&body, buf);
        true
    }

    /// The next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The items whose data this receiver still wants, for a driver that
    /// drops the rest below the protocol (a kernel socket filter), so a
    /// receiver's work follows what it asked for, not the channel's rate.
    /// Sorted; `None` (take everything) while a requested name has no item
    /// id yet, or when more than `max` items are wanted (a filter that
    /// long would cost more than it saves). Costs the items returned.
    pub fn wanted_items(&self, max: usize) -> Option<Vec<ItemId>> {
        self.names.as_ref()?;
        (self.wanted).items(self.requested.len(), self.ended.is_some(), max)
    }

    /// Why the run ended early (a bad message, a close, the idle timeout),
    /// if it did.
    pub fn ended(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// Whether every requested item is verified or failed.
    pub fn is_finished(&self) -> bool {
        self.ended.is_some()
            || self.names.is_some()
                && !self.unasked
                && (self.settled == self.requested.len() || self.client.is_finished())
    }

    /// Every requested item's outcome, in request order (those not yet
    /// ended say so).
    pub fn outcomes(&self) -> Vec<Outcome> {
        let pending = self.ended.clone().unwrap_or_else(|| "not received".into());
        (self.names.iter().flatten())
            .map(|n| {
                self.outcomes.get(n).cloned().unwrap_or_else(|| Outcome {
                    name: n.clone(),
                    size: self.size_of(n),
                    result: Err(pending.clone()),
                })
            })
            .collect()
    }

    fn size_of(&self, name: &str) -> u64 {
        (self.wanted.id_of(name))
            .and_then(|i| self.sizes.get(&i))
            .map_or(0, |s| s.1)
    }

    /// Ends the run: everything not yet verified fails with `reason`. What
    /// the store holds of those items stays, for a rerun to resume from,
    /// with the symbols of their partly received blocks
    /// ([`ClientEndpoint::suspend`]).
    fn end(&mut self, reason: String) {
        if self.ended.is_none() {
            self.ended = Some(reason);
            self.suspend();
        }
    }

    /// Acts on the state machine's events until there are none.
    fn process(&mut self, now: Instant) {
        self.process_events(now);
        self.note_progress(now);
    }

    fn process_events(&mut self, now: Instant) {
        while let Some(ev) = self.client.poll_event() {
            match ev {
                ClientEvent::Welcome(ch) => {
                    if !self.joined {
                        self.joined = true;
                        self.events.push_back(Event::Join(ch));
                    }
                }
                ClientEvent::Done => {}
                ClientEvent::Manifest(m) => self.on_manifest(&m),
                ClientEvent::BlockVerified {
                    item,
                    block,
                    offset,
                    data,
                } => {
                    self.lru.remove(&(item, block));
                    match self.store.write_block(item, block, offset, &data) {
                        Ok(()) => self.events.push_back(Event::Bytes {
                            item,
                            bytes: data.len() as u64,
                        }),
                        Err(e) => self.client.abandon(item, e.to_string()),
                    }
                }
                ClientEvent::ItemAssembled(item) => self.finish_item(now, item),
                ClientEvent::ItemComplete(item) => {
                    self.events.push_back(Event::Complete { item });
                    if let Some((name, size)) = self.sizes.get(&item).cloned() {
                        self.settle(Outcome {
                            name,
                            size,
                            result: Ok(()),
                        });
                    }
                }
                ClientEvent::ItemFailed { item, name, reason } => {
                    let (name, size) = item
                        .and_then(|i| self.sizes.get(&i).cloned())
                        .unwrap_or((name, 0));
                    if let Some(i) = item {
                        self.store.discard(i);
                    }
                    self.events.push_back(Event::Failed {
                        name: name.clone(),
                        reason: reason.clone(),
                    });
                    self.settle(Outcome {
                        name,
                        size,
                        result: Err(reason),
                    });
                }
            }
        }
    }

    fn on_manifest(&mut self, m: &crate::wire::ManifestEntry) {
        if !self.requested.contains(&m.name) {
            // The server answered a name we did not ask for.
            let reason = format!("the server sent {:?}, which was not requested", m.name);
            return self.client.abandon(m.item, reason);
        }
        let previous = self.sizes.insert(m.item, (m.name.clone(), m.size));
        let settled = self.outcomes.contains_key(&m.name);
        (self.wanted).manifest(m.item, &m.name, previous.map(|p| p.0).as_deref(), settled);
        self.symbol_sizes.insert(m.item, m.fec.symbol_size as u64);
        let layout = match Layout::new(m.size, &m.fec) {
            Ok(l) => l,
            Err(e) => return self.client.abandon(m.item, e.to_string()),
        };
        let held = match self.store.open(m) {
            Ok(Resume::Complete) => (0..layout.blocks()).collect(),
            Ok(Resume::Blocks(bs)) => bs,
            Err(e) => return self.client.abandon(m.item, e.to_string()),
        };
        let resumed = held.iter().map(|&b| layout.block_len(b)).sum();
        self.events.push_back(Event::Item {
            item: m.item,
            name: m.name.clone(),
            size: m.size,
            resumed,
        });
        self.stats.resumed_blocks += held.len() as u64;
        for b in held {
            self.client.resume_block(m.item, b);
        }
        self.find_kept(m.item);
    }
}
