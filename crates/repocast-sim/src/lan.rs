//! Payload runs on a virtual LAN: the core's *endpoints* (the very code
//! `repocast serve` and `repocast get` run, with a [`Profile`]'s settings)
//! driven through their byte interfaces on a virtual clock, with seeded
//! loss per receiver on both multicast groups, a one-way delay on the
//! request connection, receivers joining late, and receivers that crash
//! and restart with what their store had made durable.
//!
//! It is the deterministic twin of the tokio driver: the same endpoint
//! calls in the same order (`handle_*`, then drain `poll_transmit`,
//! `poll_close`, `poll_event`, then sleep until `poll_timeout`), with a
//! star network in place of sockets. The accounting runs of the simulator
//! ([`crate::engine`]) drive the state machines directly instead, for speed.
//!
//! With [`Profile::Lan`] the session is authenticated as `serve` runs it:
//! a session key (seeded here, random in `serve`) tags every packet, the
//! server signs its announcements, and every receiver pins the server's
//! key. [`VirtualLan::inject`] puts an attacker's datagrams on the groups;
//! [`VirtualLan::pollute`] adds an insider answering the server's packets.

use crate::source::MemorySource;
use repocast_core::auth::{Identity, PublicKey, SessionKey, Verified};
use repocast_core::client::ClientStats;
use repocast_core::endpoint::client::{
    ClientEndpoint, ClientEndpointConfig, ClientEndpointStats, Event, Outcome, Want,
};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::loss::{LossModel, LossSpec};
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::{ServerConfig, ServerError, ServerEvent};
use repocast_core::{ClientId, Instant};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

/// A receiver host of a run.
#[derive(Debug, Clone)]
pub struct LanClient {
    /// What it asks for.
    pub want: Want,
    /// Loss on its link (both groups; the request connection is reliable).
    pub loss: LossSpec,
    /// When it starts.
    pub join_at: Instant,
    /// When it is killed (it restarts at once with what its store holds).
    pub crash_at: Option<Instant>,
    /// When it is stopped short (it restarts at once): unlike a kill, its
    /// store keeps its partly received blocks' symbols
    /// ([`ClientEndpoint::suspend`]).
    pub stop_at: Option<Instant>,
    /// The host it runs on, if it shares one with others (None: a host of
    /// its own). Requests on one host share its receiver, as `get`s do
    /// (`repocast_net::host`): one loss draw per packet for the host (the
    /// first request's loss), and a request starting there takes what the
    /// running ones have verified of its items.
    pub host: Option<usize>,
}

/// One receiver's outcome.
#[derive(Debug, Clone)]
pub struct LanReport {
    /// Every requested item, verified or failed with a reason.
    pub outcomes: Vec<Outcome>,
    /// From its start to its last item ending (None: did not finish).
    pub delay: Option<Duration>,
    /// Verified items' bytes, by name.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Blocks its store wrote (a measure of resume).
    pub blocks_written: u64,
    /// Counters of its (last) endpoint.
    pub stats: ClientEndpointStats,
    /// Multicast datagrams that reached its host (before its link's loss),
    /// as a socket counts them.
    pub datagrams: u64,
    /// Its state machine's counters, summed across restarts.
    pub client: ClientStats,
}

fn add(a: ClientStats, b: ClientStats) -> ClientStats {
    ClientStats {
        useful: a.useful + b.useful,
        useless: a.useless + b.useless,
        naks: a.naks + b.naks,
        hints: a.hints + b.hints,
        corrupt_blocks: a.corrupt_blocks + b.corrupt_blocks,
        screened_blocks: a.screened_blocks + b.screened_blocks,
        screens_failed: a.screens_failed + b.screens_failed,
        reopened: a.reopened + b.reopened,
        decode_jobs: a.decode_jobs + b.decode_jobs,
        placing_reports: a.placing_reports + b.placing_reports,
        missed_starts: a.missed_starts + b.missed_starts,
    }
}

struct Node {
    spec: LanClient,
    ep: Option<ClientEndpoint<MemoryStore>>,
    conn: Option<ClientId>,
    joined: bool,
    /// Endpoints started so far (a join under way belongs to one).
    starts: u64,
    loss: LossModel,
    done_at: Option<Instant>,
    /// Multicast datagrams offered to its link while it listened.
    offered: u64,
    /// Counters of endpoints it ran before a crash.
    prior: ClientStats,
    /// Latest arrival scheduled each way (TCP keeps order).
    last_up: Instant,
    last_down: Instant,
    /// Its memory of checked signatures: its host's, shared by the
    /// requests there (as the host's shared receiver does), or its own.
    verified: Verified,
}

enum Ev {
    Start(usize),
    Crash(usize),
    Stop(usize),
    ToServer(usize, Vec<u8>),
    ToClient(usize, Vec<u8>),
    Closed(usize),
    /// The receiver finished and closed its connection.
    Left(usize),
    /// The receiver's join of the groups (of its `starts`-th endpoint)
    /// takes effect.
    Joined(usize, u64),
    /// A datagram from outside the server, to every listening receiver.
    Inject(Channel, Vec<u8>),
    /// The server rotates its session key to this one.
    Rotate(Box<SessionKey>),
}

/// A server endpoint and receiver endpoints on a virtual star network.
pub struct VirtualLan {
    /// Current virtual time.
    pub now: Instant,
    server: ServerEndpoint,
    source: MemorySource,
    nodes: Vec<Node>,
    by_conn: BTreeMap<ClientId, usize>,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    events: BTreeMap<u64, Ev>,
    seq: u64,
    /// One-way delay of the request connection.
    pub control_delay: Duration,
    /// How long a receiver takes from reading the welcome to hearing the
    /// groups (its driver's socket calls, the host's IGMP report); a
    /// request on a host whose shared receiver is on them already hears
    /// them at once. None by default.
    pub join_delay: Duration,
    server_loss: LossModel,
    /// Each shared host's link loss.
    host_loss: BTreeMap<usize, LossModel>,
    /// Each shared host's memory of checked signatures.
    host_verified: BTreeMap<usize, Verified>,
    profile: Profile,
    seed: u64,
    /// Idle timeout the receivers run with.
    pub idle_timeout: Duration,
    /// Blocks a receiver hands out as decode jobs at once (the profile's
    /// unless set; the simulator runs each at once).
    pub decode_jobs: Option<usize>,
    /// The key receivers pin (the server's identity, if it has one).
    server_key: Option<PublicKey>,
    /// Data datagrams an eavesdropper on the server's link copied, and how
    /// many more it copies ([`VirtualLan::tap_data`]).
    tapped: Vec<Vec<u8>>,
    tap_left: usize,
    polluter: Option<crate::insider::Polluter>,
    /// The server's events with their times, kept when set to `Some`
    /// (what `serve` logs at debug level), for tracing a run.
    pub server_events: Option<Vec<(Instant, ServerEvent)>>,
}

impl VirtualLan {
    /// A server with `profile`'s settings (changed by `tweak`) serving
    /// `items`, losing `server_loss` of its multicast packets.
    pub fn new(
        profile: Profile,
        tweak: impl FnOnce(&mut ServerConfig),
        items: Vec<(String, Vec<u8>)>,
        server_loss: LossSpec,
    ) -> Result<Self, ServerError> {
        let mut cfg = profile.server();
        let mut identity = None;
        if profile == Profile::Lan {
            let mut r = Rng::new(cfg.seed ^ 0xa17);
            let mut key = || std::array::from_fn(|_| r.next_u64() as u8);
            cfg.session_key = Some(SessionKey::from_bytes(key()));
            identity = Some(Identity::from_seed(key()));
        }
        tweak(&mut cfg);
        let fec = cfg.base_fec();
        let infos = (items.iter())
            .map(|(n, b)| MemorySource::item_info(n, b, &fec))
            .collect::<Result<_, _>>()?;
        let seed = cfg.seed;
        let mut server = ServerEndpoint::new(cfg, profile.limits(), infos)?;
        let server_key = identity.as_ref().map(Identity::public);
        if let Some(id) = identity {
            server = server.with_identity(id);
        }
        Ok(VirtualLan {
            server_key,
            now: Instant::ZERO,
            server,
            source: MemorySource::new(items.into_iter().map(|(_, b)| b).collect()),
            nodes: Vec::new(),
            by_conn: BTreeMap::new(),
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            seq: 0,
            control_delay: Duration::from_micros(100),
            join_delay: Duration::ZERO,
            server_loss: LossModel::new(server_loss, seed ^ 0x5e),
            host_loss: BTreeMap::new(),
            host_verified: BTreeMap::new(),
            profile,
            seed,
            idle_timeout: Duration::from_secs(60),
            decode_jobs: None,
            tapped: Vec::new(),
            tap_left: 0,
            polluter: None,
            server_events: None,
        })
    }

    /// Adds an insider that answers the server's data packets with
    /// polluted ones (`crate::insider`), 10 µs after each.
    pub fn pollute(&mut self, p: crate::insider::Polluter) {
        self.polluter = Some(p);
    }

    /// The insider, if any (its counters).
    pub fn polluter(&self) -> Option<&crate::insider::Polluter> {
        self.polluter.as_ref()
    }

    /// Copies the next `n` data datagrams the server sends, as an
    /// eavesdropper on its link would see them ([`VirtualLan::tapped`]).
    pub fn tap_data(&mut self, n: usize) {
        self.tap_left = n;
    }

    /// The data datagrams [`VirtualLan::tap_data`] copied.
    pub fn tapped(&self) -> &[Vec<u8>] {
        &self.tapped
    }

    /// Delivers `bytes` on channel `ch` at `at` to every receiver then
    /// listening, as a datagram from another sender would arrive.
    pub fn inject(&mut self, at: Instant, ch: Channel, bytes: Vec<u8>) {
        self.schedule(at, Ev::Inject(ch, bytes));
    }

    /// Has the server rotate its session key to `key` at `at`, as `serve`
    /// does every `--rekey` interval.
    pub fn rotate_key_at(&mut self, at: Instant, key: SessionKey) {
        self.schedule(at, Ev::Rotate(Box::new(key)));
    }

    /// Bytes the server has read from its items so far.
    pub fn read_bytes(&self) -> u64 {
        self.source.read_bytes
    }

    /// The server endpoint (counters, summaries).
    pub fn server(&self) -> &ServerEndpoint {
        &self.server
    }

    /// Adds a receiver; returns its index.
    pub fn add_client(&mut self, spec: LanClient) -> usize {
        let i = self.nodes.len();
        let seed = self.seed.wrapping_mul(31).wrapping_add(i as u64 + 1);
        if let Some(h) = spec.host {
            let host_seed = self.seed.wrapping_mul(37).wrapping_add(h as u64) ^ 0x4057;
            (self.host_loss)
                .entry(h)
                .or_insert_with(|| LossModel::new(spec.loss, host_seed));
        }
        let verified = match spec.host {
            Some(h) => self.host_verified.entry(h).or_default().clone(),
            None => Verified::new(),
        };
        self.schedule(spec.join_at, Ev::Start(i));
        if let Some(t) = spec.crash_at {
            self.schedule(t, Ev::Crash(i));
        }
        if let Some(t) = spec.stop_at {
            self.schedule(t, Ev::Stop(i));
        }
        self.nodes.push(Node {
            loss: LossModel::new(spec.loss, seed ^ 0xc1),
            spec,
            ep: None,
            conn: None,
            joined: false,
            starts: 0,
            done_at: None,
            offered: 0,
            prior: ClientStats::default(),
            last_up: Instant::ZERO,
            last_down: Instant::ZERO,
            verified,
        });
        i
    }

    /// Signatures the receivers checked with Ed25519, and those answered
    /// from memory, in all: a host's requests check each signature once
    /// between them.
    pub fn signatures(&self) -> (u64, u64) {
        let own = (self.nodes.iter())
            .filter(|n| n.spec.host.is_none())
            .map(|n| &n.verified);
        (own.chain(self.host_verified.values()))
            .map(Verified::counts)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.events.insert(self.seq, ev);
        self.queue.push(Reverse((at, self.seq)));
    }

    fn start(&mut self, i: usize, store: MemoryStore) {
        // Its host's address: a shared host's, or one of its own.
        let host = match self.nodes[i].spec.host {
            Some(h) => h as u32,
            None => (1 << 24) + i as u32,
        };
        let peer = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + host));
        let Ok(conn) = self.server.accept_from(self.now, Some(peer)) else {
            return;
        };
        let n = &mut self.nodes[i];
        let seed = self.seed.wrapping_mul(31).wrapping_add(i as u64 + 1) ^ self.now.as_nanos();
        let mut client = self.profile.client();
        client.seed = seed;
        client.name = format!("c{i}");
        client.decode_jobs = self.decode_jobs.unwrap_or(client.decode_jobs);
        let mut cfg = ClientEndpointConfig::new(client, n.spec.want.clone());
        cfg.idle_timeout = self.idle_timeout;
        cfg.server_key = self.server_key;
        cfg.verified = n.verified.clone();
        n.ep = Some(ClientEndpoint::new(self.now, cfg, store));
        n.conn = Some(conn);
        n.joined = false;
        n.starts += 1;
        self.by_conn.insert(conn, i);
    }

    /// A store for request `i` holding what the running requests on its
    /// host can lend of its items (the most blocks, per item).
    fn lent_to(&self, i: usize) -> MemoryStore {
        let mut store = MemoryStore::default();
        let spec = &self.nodes[i].spec;
        let (Some(h), Want::Items(names)) = (spec.host, &spec.want) else {
            return store;
        };
        let siblings: Vec<&ClientEndpoint<MemoryStore>> = (self.nodes.iter().enumerate())
            .filter(|(j, n)| *j != i && n.spec.host == Some(h) && n.done_at.is_none())
            .filter_map(|(_, n)| n.ep.as_ref())
            .collect();
        for name in names {
            let best = (siblings.iter())
                .map(|ep| ep.store())
                .max_by_key(|s| s.lendable(name))
                .and_then(|s| s.lend(name));
            if let Some(l) = best {
                store.seed(l);
            }
        }
        store
    }

    fn crash(&mut self, i: usize) {
        let n = &mut self.nodes[i];
        let Some(ep) = n.ep.take().filter(|_| n.done_at.is_none()) else {
            return;
        };
        n.prior = add(n.prior, ep.client_stats());
        let store = ep.into_store().crash();
        if let Some(c) = n.conn.take() {
            self.by_conn.remove(&c);
            self.server.handle_close(self.now, c);
        }
        self.start(i, store);
    }

    fn arrival(&mut self, i: usize, up: bool) -> Instant {
        let n = &mut self.nodes[i];
        let last = if up { &mut n.last_up } else { &mut n.last_down };
        let at = (self.now + self.control_delay).max(*last);
        *last = at;
        at
    }

    fn deliver_due(&mut self) {
        while let Some(Reverse((at, seq))) = self.queue.peek().copied() {
            if at > self.now {
                break;
            }
            self.queue.pop();
            let Some(ev) = self.events.remove(&seq) else {
                continue;
            };
            let now = self.now;
            match ev {
                Ev::Start(i) => {
                    let store = self.lent_to(i);
                    self.start(i, store);
                }
                Ev::Crash(i) => self.crash(i),
                Ev::Stop(i) => {
                    if let Some(ep) = self.nodes[i].ep.as_mut() {
                        ep.suspend();
                    }
                    self.crash(i);
                }
                Ev::ToServer(i, bytes) => {
                    if let Some(c) = self.nodes[i].conn {
                        self.server.handle_stream(now, c, &bytes);
                    }
                }
                Ev::ToClient(i, bytes) => {
                    if let Some(ep) = self.nodes[i].ep.as_mut() {
                        ep.handle_stream(now, &bytes);
                    }
                }
                Ev::Joined(i, start) => {
                    let n = &mut self.nodes[i];
                    if let Some(ep) = n.ep.as_mut().filter(|_| n.starts == start) {
                        n.joined = true;
                        ep.joined(now);
                    }
                }
                Ev::Left(i) => {
                    if let Some(c) = self.nodes[i].conn.take() {
                        self.by_conn.remove(&c);
                        self.server.handle_close(now, c);
                    }
                }
                Ev::Closed(i) => {
                    if let Some(ep) = self.nodes[i].ep.as_mut() {
                        ep.handle_close(now);
                    }
                }
                Ev::Inject(ch, bytes) => {
                    for n in &mut self.nodes {
                        if let Some(ep) = n.ep.as_mut().filter(|_| n.joined && n.done_at.is_none())
                        {
                            ep.handle_datagram(now, ch, &bytes);
                            ep.decode_here(now);
                        }
                    }
                }
                Ev::Rotate(key) => {
                    self.server.rotate_key(now, *key);
                }
            }
        }
    }

    /// Sends what the server has, delivering multicast at once (star).
    fn drain_server(&mut self) {
        let mut buf = Vec::with_capacity(2048);
        let now = self.now;
        while let Some(dest) = self.server.poll_transmit(now, &mut self.source, &mut buf) {
            // Encoders the net driver prepares on another thread are
            // prepared here at once (the packets do not depend on when).
            while let Some(mut job) = self.server.poll_prepare() {
                job.run();
                self.server.prepared(job);
            }
            match dest {
                Dest::Data | Dest::Announce => {
                    let ch = if dest == Dest::Data {
                        Channel::Data
                    } else {
                        Channel::Announce
                    };
                    if dest == Dest::Data && self.tap_left > 0 {
                        self.tap_left -= 1;
                        self.tapped.push(buf.clone());
                    }
                    if let Some(p) = self.polluter.as_mut().filter(|_| dest == Dest::Data) {
                        let at = now + Duration::from_micros(10);
                        for b in p.answer(&buf) {
                            self.schedule(at, Ev::Inject(Channel::Data, b));
                        }
                    }
                    if self.server_loss.lose() {
                        continue;
                    }
                    // A shared host loses a packet for all its requests.
                    let mut host_lost = BTreeMap::new();
                    for n in &mut self.nodes {
                        let listening = n.joined && n.done_at.is_none();
                        let Some(ep) = n.ep.as_mut().filter(|_| listening) else {
                            continue;
                        };
                        n.offered += 1;
                        let lost = match n.spec.host {
                            Some(h) => *host_lost.entry(h).or_insert_with(|| {
                                self.host_loss.get_mut(&h).is_some_and(|l| l.lose())
                            }),
                            None => n.loss.lose(),
                        };
                        if !lost {
                            // Blocks the net driver decodes on another
                            // thread are decoded here at once.
                            ep.handle_datagram(now, ch, &buf);
                            ep.decode_here(now);
                        }
                    }
                }
                Dest::Conn(c) => {
                    if let Some(&i) = self.by_conn.get(&c) {
                        let at = self.arrival(i, false);
                        self.schedule(at, Ev::ToClient(i, buf.clone()));
                    }
                }
            }
        }
        while let Some((c, _)) = self.server.poll_close() {
            if let Some(i) = self.by_conn.remove(&c) {
                let at = self.arrival(i, false);
                self.schedule(at, Ev::Closed(i));
            }
        }
        while let Some(ev) = self.server.poll_event() {
            if let Some(log) = self.server_events.as_mut() {
                log.push((self.now, ev));
            }
        }
    }

    fn drain_clients(&mut self) {
        let mut buf = Vec::new();
        // Shared hosts whose receiver is on the groups: a request there
        // hears them at once.
        let on_groups: std::collections::BTreeSet<usize> = if self.join_delay.is_zero() {
            Default::default()
        } else {
            (self.nodes.iter())
                .filter(|o| o.joined && o.done_at.is_none())
                .filter_map(|o| o.spec.host)
                .collect()
        };
        for i in 0..self.nodes.len() {
            let now = self.now;
            let delay = match self.nodes[i].spec.host {
                Some(h) if on_groups.contains(&h) => Duration::ZERO,
                _ => self.join_delay,
            };
            let n = &mut self.nodes[i];
            let Some(ep) = n.ep.as_mut() else { continue };
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
            // Blocks made ready by any input, not only by a datagram (a
            // manifest, or data that overtook it replayed at a timeout),
            // are decoded at once, as the net driver hands out its jobs
            // after every input.
            ep.decode_here(now);
            let mut join_at = None;
            while let Some(e) = ep.poll_event() {
                if let Event::Join(_) = e {
                    if delay.is_zero() {
                        n.joined = true;
                        ep.joined(now);
                    } else {
                        join_at = Some((now + delay, n.starts));
                    }
                }
            }
            let mut frames = Vec::new();
            while ep.poll_transmit(&mut buf) {
                frames.push(buf.clone());
            }
            let left = ep.is_finished() && n.done_at.is_none();
            if left {
                n.done_at = Some(now);
            }
            if let Some((at, start)) = join_at {
                self.schedule(at, Ev::Joined(i, start));
            }
            for f in frames {
                let at = self.arrival(i, true);
                self.schedule(at, Ev::ToServer(i, f));
            }
            if left {
                let at = self.arrival(i, true);
                self.schedule(at, Ev::Left(i));
            }
        }
    }

    /// Runs until every receiver has finished or `limit`; returns whether
    /// all finished.
    pub fn run(&mut self, limit: Instant) -> bool {
        loop {
            self.deliver_due();
            self.server.handle_timeout(self.now);
            self.drain_server();
            self.drain_clients();
            let all_done = !self.nodes.is_empty()
                && self.nodes.iter().all(|n| n.done_at.is_some())
                && self.queue.is_empty();
            if all_done {
                return true;
            }
            let clients = (self.nodes.iter())
                .filter_map(|n| n.ep.as_ref().filter(|_| n.done_at.is_none()))
                .filter_map(|ep| ep.poll_timeout());
            let next = (self.server.poll_timeout().into_iter())
                .chain(self.queue.peek().map(|r| r.0.0))
                .chain(clients)
                .min();
            match next {
                None => return self.nodes.iter().all(|n| n.done_at.is_some()),
                Some(t) if t > limit => return false,
                Some(t) => self.now = t.max(self.now),
            }
        }
    }

    /// Each receiver's outcome.
    pub fn reports(&self) -> Vec<LanReport> {
        (self.nodes.iter())
            .map(|n| {
                let ep = n.ep.as_ref();
                LanReport {
                    outcomes: ep.map_or(Vec::new(), |e| e.outcomes()),
                    delay: n.done_at.map(|t| t - n.spec.join_at),
                    files: ep.map_or(BTreeMap::new(), |e| e.store().files().clone()),
                    blocks_written: ep.map_or(0, |e| e.store().blocks_written),
                    stats: ep.map_or(Default::default(), |e| e.stats()),
                    datagrams: n.offered,
                    client: add(
                        n.prior,
                        ep.map_or_else(Default::default, |e| e.client_stats()),
                    ),
                }
            })
            .collect()
    }
}
