//! The in-process harness: one server, N clients, per-link seeded loss and
//! a virtual clock, in the manner of quinn's `Pair` but one-to-many.
//!
//! It drives the core's state machines directly, in accounting mode (the
//! codecs count symbols instead of decoding bytes; no hashes), so that a
//! simulated day of tens of thousands of clients runs in well under a
//! second. Payload runs, with real bytes through the very endpoints `serve`,
//! `get`, `push` and `listen` run, are [`crate::lan`] and [`crate::push_lan`].
//!
//! It drains `poll_transmit` in one order ([`Harness::drain`]), moves
//! control messages with a one-way delay, delivers announcements
//! (lossless unless `announce_loss` is set), runs every data packet
//! through the server link's loss model and then each client's, and jumps
//! the clock to the earliest deadline. Clients join at chosen times.
//!
//! The default network is a star (server link, lossless backbone, one link
//! per client). [`Harness::add_link`] and [`Harness::set_path`] make it a
//! tree: shared links each lose a packet once for every receiver below
//! them, and their delays add up along a receiver's path: its data and
//! announcements arrive that much after they are sent, and its control
//! messages take that much longer each way.

use repocast_core::client::{Client, ClientConfig, ClientEvent};
use repocast_core::loss::{LossModel, LossSpec};
use repocast_core::server::{ItemInfo, NoPayload, Server, ServerConfig, ServerError, Transmit};
use repocast_core::wire::{AnnounceRepr, ClientMsg, DataRepr, ItemSel, ServerMsg};
use repocast_core::{ClientId, Instant, ItemId};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// A client to add to a run.
#[derive(Debug, Clone)]
pub struct ClientSpec {
    /// Items to request.
    pub items: Vec<ItemId>,
    /// Loss on this client's link.
    pub loss: LossSpec,
    /// When it connects and requests.
    pub join_at: Instant,
}

/// One client's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientReport {
    /// Request to completion (None: not complete).
    pub delay: Option<Duration>,
    /// Items completed.
    pub completed: usize,
    /// Failure reasons.
    pub failures: Vec<String>,
    /// Fraction of data packets this client's link lost.
    pub measured_loss: f64,
    /// The client's counters.
    pub stats: repocast_core::client::ClientStats,
    /// From its request to the first packet it could use (push mode's
    /// seek time ends with that packet).
    pub first_useful: Option<Duration>,
}

struct Node {
    spec: ClientSpec,
    client: Client,
    id: Option<ClientId>,
    loss: LossModel,
    completed: usize,
    done_at: Option<Instant>,
    failures: Vec<String>,
    offered: u64,
    lost: u64,
    /// The deadline filed in the timer heap for this client.
    timer: Option<Instant>,
    /// Shared tree links between the backbone and this client's own link.
    path: Vec<usize>,
    /// Their one-way delay, added to every control message.
    path_delay: Duration,
    /// Latest arrival scheduled on its connection, each way (messages on
    /// one connection arrive in order, as on TCP).
    last_up: Instant,
    last_down: Instant,
    /// The client's counters, kept when it finishes and its state machine
    /// is dropped (a simulated day has tens of thousands of clients).
    final_stats: Option<repocast_core::client::ClientStats>,
    first_useful: Option<Instant>,
    /// Packets of items it has complete, dropped at its door (the client
    /// would discard them unread): counted as useless.
    skipped_useless: u64,
}

/// A control message in flight (the value itself: byte encodings are the
/// payload runs' business).
enum Pending {
    ToServer(usize, ClientMsg),
    ToClient(usize, ServerMsg),
    /// Multicast to a receiver below delayed tree links (its fate was
    /// drawn when sent).
    Data(usize, DataRepr),
    Announce(usize, AnnounceRepr),
}

/// Whether a packet sent now reaches node `n` (the server's link, the tree
/// links above it, its own link), counting it either way.
#[inline(always)]
fn reaches(n: &mut Node, server_lost: bool, link_lost: &[bool]) -> bool {
    n.offered += 1;
    if server_lost || n.loss.lose() || n.path.iter().any(|&l| link_lost[l]) {
        n.lost += 1;
        return false;
    }
    true
}

/// Hands a data packet that reached node `i` to its client.
#[inline(always)]
fn receive(
    n: &mut Node,
    i: usize,
    now: Instant,
    p: &DataRepr,
    finished: bool,
    events: &mut u64,
    touched: &mut Vec<usize>,
) {
    // A finished item's packets only count as useless to the client (the
    // caller says whether to skip them).
    if finished {
        n.skipped_useless += 1;
        return;
    }
    if n.client.handle_data(now, p) && n.first_useful.is_none() {
        n.first_useful = Some(now);
    }
    while let Some(mut job) = n.client.poll_decode() {
        job.run();
        n.client.decoded(job);
    }
    *events += 1;
    if n.client.has_pending() {
        touched.push(i);
    }
}

/// One server and its clients on a virtual clock.
pub struct Harness {
    /// Current virtual time.
    pub now: Instant,
    /// The server under test.
    pub server: Server,
    nodes: Vec<Node>,
    server_loss: LossModel,
    /// Shared links of a tree topology, and whether each lost the packet
    /// being delivered.
    links: Vec<LossModel>,
    link_lost: Vec<bool>,
    /// One-way delay of the request connection: at least this...
    pub control_delay: Duration,
    /// ...plus an exponentially distributed extra with this mean (zero:
    /// fixed delay). The SPEC's base case is 80 ms plus a 20 ms mean tail.
    /// Messages on one connection still arrive in order, as on TCP.
    pub control_tail: Duration,
    delay_rng: repocast_core::rng::Rng,
    /// Loss of announcements, drawn per client (the real announcement
    /// channel is multicast too); none unless set.
    pub announce_loss: Option<LossModel>,
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// Clients not yet joined, by join time.
    joins: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Joined clients that have not yet heard Done.
    unfinished: usize,
    by_id: repocast_core::hash::FastMap<ClientId, usize>,
    /// Joined, unfinished clients by the items they asked for: data and
    /// announcements of an item go to these only. With each, whether it has
    /// the item complete (its packets then stop at its door).
    interest: repocast_core::hash::FastMap<ItemId, Vec<(usize, bool)>>,
    /// Client deadlines (lazily invalidated against `Node::timer`).
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Clients that received something this step, to drain and re-time.
    touched: Vec<usize>,
    touched_scratch: Vec<usize>,
    /// Receivers of the packet being sent that sit below delayed links.
    delayed: Vec<usize>,
    /// Whether any receiver has a path delay (a star has none).
    any_delay: bool,
    /// Messages in flight, by slot (the queue holds their slot numbers);
    /// freed slots are reused.
    pending: Vec<Option<Pending>>,
    free_slots: Vec<usize>,
    seq: u64,
    /// Push mode: clients subscribe to the carousel with the manifests
    /// instead of connecting and requesting.
    push: bool,
    seed: u64,
    /// Events simulated: packets and announcements handed to a receiver,
    /// control messages delivered, timers fired, clients joined.
    events: u64,
    /// Settings of every client added (seed, name and mode are set per
    /// client).
    pub client_config: ClientConfig,
}

impl Harness {
    /// An accounting-mode harness (no payload bytes, no hashes) over items
    /// of these sizes, named `i0`, `i1`, ...: what the simulator runs.
    pub fn accounting(
        mut cfg: ServerConfig,
        sizes: &[u64],
        server_loss: LossSpec,
    ) -> Result<Harness, ServerError> {
        cfg.payloads = false;
        let infos = (sizes.iter().enumerate())
            .map(|(i, &size)| ItemInfo {
                name: format!("i{i}"),
                size,
                hash: [0; 32],
                block_hashes: Vec::new(),
            })
            .collect();
        Self::build(cfg, infos, server_loss)
    }

    fn build(
        cfg: ServerConfig,
        infos: Vec<ItemInfo>,
        server_loss: LossSpec,
    ) -> Result<Harness, ServerError> {
        let push = cfg.scheduler.is_push();
        let seed = cfg.seed;
        Ok(Harness {
            now: Instant::ZERO,
            server: Server::new(cfg, infos)?,
            nodes: Vec::new(),
            server_loss: LossModel::new(server_loss, seed ^ 0x5e),
            links: Vec::new(),
            link_lost: Vec::new(),
            control_delay: Duration::from_millis(5),
            control_tail: Duration::ZERO,
            delay_rng: repocast_core::rng::Rng::new(seed ^ 0xde1a),
            announce_loss: None,
            queue: BinaryHeap::new(),
            joins: BinaryHeap::new(),
            unfinished: 0,
            by_id: Default::default(),
            interest: Default::default(),
            timers: BinaryHeap::new(),
            touched: Vec::new(),
            touched_scratch: Vec::new(),
            delayed: Vec::new(),
            any_delay: false,
            pending: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            push,
            seed,
            events: 0,
            client_config: ClientConfig::default(),
        })
    }

    /// Adds a client; returns its index.
    pub fn add_client(&mut self, spec: ClientSpec) -> usize {
        let i = self.nodes.len();
        self.joins.push(Reverse((spec.join_at, i)));
        let seed = self.seed.wrapping_mul(31).wrapping_add(i as u64 + 1);
        let client = Client::new(ClientConfig {
            seed,
            payloads: false,
            name: format!("c{i}"),
            ..self.client_config.clone()
        });
        self.nodes.push(Node {
            loss: LossModel::new(spec.loss, seed ^ 0xc1),
            spec,
            client,
            id: None,
            completed: 0,
            done_at: None,
            failures: Vec::new(),
            offered: 0,
            lost: 0,
            timer: None,
            path: Vec::new(),
            path_delay: Duration::ZERO,
            last_up: Instant::ZERO,
            last_down: Instant::ZERO,
            final_stats: None,
            first_useful: None,
            skipped_useless: 0,
        });
        i
    }

    /// Adds a shared link (tree topology); returns its index.
    pub fn add_link(&mut self, loss: LossSpec) -> usize {
        let i = self.links.len();
        let seed = self.seed ^ 0x11e4 ^ ((i as u64 + 1) << 20);
        self.links.push(LossModel::new(loss, seed));
        self.link_lost.push(false);
        i
    }

    /// Puts client `i` below the shared links `path` (indices from
    /// [`Harness::add_link`]; unknown ones are ignored) whose one-way delay
    /// sums to `delay` (added to its multicast and its control traffic).
    pub fn set_path(&mut self, i: usize, path: Vec<usize>, delay: Duration) {
        let known = self.links.len();
        if let Some(n) = self.nodes.get_mut(i) {
            n.path = path.into_iter().filter(|&l| l < known).collect();
            n.path_delay = delay;
            self.any_delay |= !delay.is_zero();
        }
    }

    fn schedule(&mut self, at: Instant, p: Pending) {
        self.seq += 1;
        let slot = match self.free_slots.pop() {
            Some(i) => {
                self.pending[i] = Some(p);
                i
            }
            None => {
                self.pending.push(Some(p));
                self.pending.len() - 1
            }
        };
        // Equal times go in the order sent (seq), as before.
        self.queue.push(Reverse((at, self.seq, slot)));
    }

    /// Connects clients whose time has come.
    fn join_due(&mut self) {
        while let Some(Reverse((at, i))) = self.joins.peek().copied() {
            if at > self.now {
                break;
            }
            self.joins.pop();
            self.events += 1;
            if self.push {
                self.unfinished += 1;
                for it in &self.nodes[i].spec.items {
                    self.interest.entry(*it).or_default().push((i, false));
                }
                self.touched.push(i);
                let manifests = (self.nodes[i].spec.items.iter())
                    .filter_map(|it| self.server.manifest(*it))
                    .collect();
                self.nodes[i].client.subscribe(self.now, manifests);
            } else {
                let id = self.server.handle_connect(self.now);
                self.by_id.insert(id, i);
                self.unfinished += 1;
                for it in &self.nodes[i].spec.items {
                    self.interest.entry(*it).or_default().push((i, false));
                }
                self.touched.push(i);
                let n = &mut self.nodes[i];
                n.id = Some(id);
                let sels = n.spec.items.iter().map(|i| ItemSel::Id(*i)).collect();
                n.client.request(self.now, sels);
            }
        }
    }

    /// Drains every output of the server and the clients at `now`, in one
    /// fixed order: server transmits, then each client's messages and events.
    pub fn drain(&mut self) {
        let now = self.now;
        while let Some(t) = self.server.poll_transmit(now, &mut NoPayload) {
            match t {
                Transmit::Data(d) => self.deliver_data(&d),
                Transmit::Announce(a) => {
                    let nodes = &mut self.nodes;
                    let delay = self.any_delay;
                    let mut delayed = std::mem::take(&mut self.delayed);
                    if let Some(list) = self.interest.get_mut(&a.item) {
                        for &(i, _) in list.iter() {
                            if self.announce_loss.as_mut().is_some_and(|l| l.lose()) {
                                continue;
                            }
                            if delay && !nodes[i].path_delay.is_zero() {
                                delayed.push(i);
                                continue;
                            }
                            nodes[i].client.handle_announce(now, &a);
                            self.events += 1;
                            self.touched.push(i);
                        }
                    }
                    if delay {
                        for &i in &delayed {
                            let at = now + self.nodes[i].path_delay;
                            self.schedule(at, Pending::Announce(i, a.clone()));
                        }
                        delayed.clear();
                    }
                    self.delayed = delayed;
                }
                Transmit::Control(c, msg) => {
                    if let Some(&i) = self.by_id.get(&c) {
                        let at = self.arrival(now, i, false);
                        self.schedule(at, Pending::ToClient(i, msg));
                    }
                }
            }
        }
        while self.server.poll_event().is_some() {}
        self.touched.sort_unstable();
        self.touched.dedup();
        // Reuse one buffer across steps (a fresh one per step showed up in
        // profiles).
        let mut touched = std::mem::take(&mut self.touched_scratch);
        std::mem::swap(&mut touched, &mut self.touched);
        for &i in &touched {
            // Events first: handling one (confirming an item) can queue a
            // message, which the transmit loop below then sends.
            while let Some(e) = self.nodes[i].client.poll_event() {
                self.on_event(i, e);
            }
            while let Some(m) = self.nodes[i].client.poll_transmit() {
                let at = self.arrival(now, i, true);
                self.schedule(at, Pending::ToServer(i, m));
            }
            if self.nodes[i].done_at.is_some() {
                self.retire(i);
                continue;
            }
            let t = self.nodes[i].client.poll_timeout();
            if t != self.nodes[i].timer {
                self.nodes[i].timer = t;
                if let Some(t) = t {
                    self.timers.push(Reverse((t, i)));
                }
            }
        }
        touched.clear();
        self.touched_scratch = touched;
    }

    /// When a control message sent now on node `i`'s connection arrives.
    fn arrival(&mut self, now: Instant, i: usize, to_server: bool) -> Instant {
        let mut d = self.control_delay + self.nodes[i].path_delay;
        if !self.control_tail.is_zero() {
            let u = self.delay_rng.next_f64();
            d += self.control_tail.mul_f64(-(1.0 - u).ln());
        }
        let n = &mut self.nodes[i];
        let last = if to_server {
            &mut n.last_up
        } else {
            &mut n.last_down
        };
        let at = (now + d).max(*last);
        *last = at;
        at
    }

    /// Runs the timers of clients whose deadline has come.
    fn fire_timers(&mut self) {
        while let Some(Reverse((t, i))) = self.timers.peek().copied() {
            if t > self.now {
                break;
            }
            self.timers.pop();
            if self.nodes[i].timer == Some(t) && self.nodes[i].done_at.is_none() {
                self.nodes[i].timer = None;
                self.nodes[i].client.handle_timeout(self.now);
                self.events += 1;
                self.touched.push(i);
            }
        }
    }

    fn deliver_data(&mut self, p: &DataRepr) {
        let server_lost = self.server_loss.lose();
        for (lost, link) in self.link_lost.iter_mut().zip(&mut self.links) {
            *lost = link.lose();
        }
        let link_lost = &self.link_lost;
        let nodes = &mut self.nodes;
        let Some(list) = self.interest.get_mut(&p.item) else {
            return;
        };
        // (With lossy announcements packets of finished items still go in:
        // a packet of a later transmission is how a client learns one has
        // ended.)
        let skip = self.announce_loss.is_none();
        // A star (or a tree without delays) hands every packet straight to
        // the clients; below delayed links it arrives later.
        let any_delay = self.any_delay;
        let mut delayed = std::mem::take(&mut self.delayed);
        for &(i, done) in list.iter() {
            let n = &mut nodes[i];
            if !reaches(n, server_lost, link_lost) {
                continue;
            }
            if any_delay && !n.path_delay.is_zero() {
                delayed.push(i);
                continue;
            }
            let finished = skip && done;
            receive(
                n,
                i,
                self.now,
                p,
                finished,
                &mut self.events,
                &mut self.touched,
            );
        }
        for &i in &delayed {
            let at = self.now + self.nodes[i].path_delay;
            self.schedule(at, Pending::Data(i, p.clone()));
        }
        delayed.clear();
        self.delayed = delayed;
    }

    /// Drops a finished client's state machine, keeping its counters, and
    /// closes its connection (as a real client does once told Done).
    fn retire(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        if n.final_stats.is_none() {
            n.final_stats = Some(n.client.stats());
            // An idle stand-in (no name, nothing requested), and nothing
            // else kept that the report does not need.
            n.client = Client::new(ClientConfig {
                name: String::new(),
                ..ClientConfig::default()
            });
            n.spec.items = Vec::new();
            n.timer = None;
            if let Some(id) = n.id {
                self.server.handle_disconnect(self.now, id);
                self.by_id.remove(&id);
            }
        }
    }

    fn on_event(&mut self, i: usize, e: ClientEvent) {
        let now = self.now;
        let n = &mut self.nodes[i];
        match e {
            // No bytes in accounting mode: nothing to store or check.
            ClientEvent::Manifest(_) | ClientEvent::BlockVerified { .. } => {}
            // An accounting client completes items itself and never asks
            // for the whole-item check; were it to, there are no bytes to
            // check.
            ClientEvent::ItemAssembled(item) => n.client.confirm_item(now, item, false),
            ClientEvent::ItemComplete(item) => {
                n.completed += 1;
                if let Some(list) = self.interest.get_mut(&item) {
                    for e in list.iter_mut().filter(|e| e.0 == i) {
                        e.1 = true;
                    }
                }
            }
            ClientEvent::Welcome(_) => {}
            ClientEvent::ItemFailed { name, reason, .. } => {
                n.failures.push(format!("{name}: {reason}"))
            }
            ClientEvent::Done => {
                if n.done_at.is_none() {
                    self.unfinished -= 1;
                    // It leaves the groups: no more data or announcements.
                    for it in &n.spec.items {
                        if let Some(list) = self.interest.get_mut(it) {
                            list.retain(|e| e.0 != i);
                        }
                    }
                }
                n.done_at = Some(now);
            }
        }
    }

    fn deliver_due(&mut self) {
        while let Some(Reverse((at, _, slot))) = self.queue.peek().copied() {
            if at > self.now {
                break;
            }
            self.queue.pop();
            self.events += 1;
            let p = self.pending.get_mut(slot).and_then(Option::take);
            self.free_slots.push(slot);
            match p {
                Some(Pending::ToServer(i, m)) => {
                    if let Some(id) = self.nodes[i].id {
                        self.server.handle_client_msg(self.now, id, m);
                    }
                }
                Some(Pending::ToClient(i, m)) if self.nodes[i].final_stats.is_none() => {
                    self.nodes[i].client.handle_server_msg(self.now, m);
                    self.touched.push(i);
                }
                Some(Pending::Data(i, d)) if self.nodes[i].done_at.is_none() => {
                    let done = (self.interest.get(&d.item))
                        .is_some_and(|l| l.iter().any(|&(j, done)| j == i && done));
                    let finished = self.announce_loss.is_none() && done;
                    let n = &mut self.nodes[i];
                    receive(
                        n,
                        i,
                        self.now,
                        &d,
                        finished,
                        &mut self.events,
                        &mut self.touched,
                    );
                }
                Some(Pending::Announce(i, a)) if self.nodes[i].done_at.is_none() => {
                    self.nodes[i].client.handle_announce(self.now, &a);
                    self.touched.push(i);
                }
                Some(Pending::ToClient(..) | Pending::Data(..) | Pending::Announce(..)) | None => {}
            }
        }
    }

    /// Runs until nothing is left to do or `limit` is reached; returns
    /// whether it went idle (rather than hitting the limit).
    pub fn run(&mut self, limit: Instant) -> bool {
        loop {
            self.join_due();
            self.deliver_due();
            self.fire_timers();
            self.server.handle_timeout(self.now);
            self.drain();
            let next = [
                self.server.poll_timeout().map(|t| t.max(self.now)),
                self.queue.peek().map(|r| r.0.0),
                self.timers.peek().map(|r| r.0.0),
                self.joins.peek().map(|r| r.0.0),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                None => return true,
                Some(t) if t > limit => return false,
                Some(t) => self.now = t.max(self.now),
            }
            if self.unfinished == 0
                && self.joins.is_empty()
                && self.queue.is_empty()
                && !self.nodes.is_empty()
            {
                return true;
            }
        }
    }

    /// Events simulated so far: data packets and announcements handed to a
    /// receiver, control messages delivered, client timers fired, joins.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Each client's outcome.
    pub fn reports(&self) -> Vec<ClientReport> {
        self.nodes
            .iter()
            .map(|n| ClientReport {
                delay: n.done_at.map(|t| t - n.spec.join_at),
                completed: n.completed,
                failures: n.failures.clone(),
                measured_loss: if n.offered == 0 {
                    0.0
                } else {
                    n.lost as f64 / n.offered as f64
                },
                stats: {
                    let mut st = n.final_stats.unwrap_or_else(|| n.client.stats());
                    st.useless += n.skipped_useless;
                    st
                },
                first_useful: n.first_useful.map(|t| t - n.spec.join_at),
            })
            .collect()
    }
}
