//! `repocast serve`: the core's [`ServerEndpoint`] on real sockets.
//!
//! One task owns the endpoint. It selects over new request connections,
//! bytes read from them, the endpoint's next deadline (the core paces the data
//! channel with its token bucket), a metrics tick and shutdown, and after
//! each wake-up drains `poll_transmit` (datagrams to the data or
//! announcement group, frames to the connection they are for) and
//! `poll_close`, handing the encoder preparation jobs the core gives
//! (`Server::poll_prepare`) to tokio's blocking pool. Each connection has a
//! reader task (bytes in, through a bounded channel, so a fast peer waits
//! on TCP rather than growing memory) and a writer task (frames out,
//! through a queue of the endpoint's limit: a peer that does not read is
//! closed), both on the connection's TLS stream ([`crate::tls`]; the
//! handshake runs in the connection's task, never in the pump). Peers
//! outside `--allow` are closed at accept. Framing, parsing and every limit
//! are the endpoint's.

use crate::metrics::{self, Shared, Snapshot};
use crate::repo::Repository;
use crate::{NetError, core_now};
use crate::{keys, socket, tls};

pub use crate::settings::ServeOptions;
use repocast_core::auth::PublicKey;
use repocast_core::endpoint::Dest;
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::profile::{Profile, serve_block_symbols};
use repocast_core::server::ServerStats;
use repocast_core::wire::FecParams;
use repocast_core::wire::control::Channels;
use repocast_core::{ClientId, SessionId};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// A running server.
pub struct ServerHandle {
    /// Where the request connection listens.
    pub request_addr: SocketAddr,
    /// Where metrics listen, if on.
    pub metrics_addr: Option<SocketAddr>,
    /// One line for the operator: addresses and scheme.
    pub banner: String,
    /// The server's public key (what clients pin).
    pub key: PublicKey,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<ServerStats, NetError>>,
    shared: Shared,
}

impl ServerHandle {
    /// Stops the server gracefully and returns its final counters.
    pub async fn stop(self) -> Result<ServerStats, NetError> {
        let _ = self.shutdown.send(true);
        self.task.await.map_err(NetError::Task)?
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Snapshot {
        metrics::read(&self.shared)
    }
}

/// What a connection's reader task tells the pump.
enum ConnEvent {
    Bytes(ClientId, Vec<u8>),
    Closed(ClientId),
}

/// Frames queued for one connection's writer, and its reader (aborted when
/// the endpoint closes the connection).
struct ConnTasks {
    out: mpsc::Sender<Vec<u8>>,
    reader: tokio::task::AbortHandle,
    /// Bytes queued for its writer and not yet written.
    queued: Arc<AtomicUsize>,
}

/// What a queued frame costs beyond its bytes (its slot and allocation),
/// so a burst of many small frames is bounded as its memory is
/// ([`repocast_core::profile::EndpointLimits::max_queued_bytes`]).
const FRAME_COST: usize = 64;
/// Bytes of frames queued across all connections; past it the connection
/// holding the most is closed as not reading.
const MAX_QUEUED_TOTAL: usize = 64 << 20;
/// Bytes a connection's reader takes from the socket at a time.
const READ_CHUNK: usize = 16 << 10;

/// Scans the repository, binds every socket and starts serving.
pub async fn start(opts: ServeOptions) -> Result<ServerHandle, NetError> {
    opts.validate()?;
    let code = opts.code;
    // Every data packet carries a tag (the session key is always set);
    // ARM's carry probes too.
    let (symbol_size, sizing) = socket::symbol_size(
        opts.symbol_size,
        &opts.data_group,
        &opts.interface,
        true,
        opts.scheme.is_arm(),
    );
    let fec = FecParams {
        code,
        symbol_size,
        max_block_symbols: opts.max_block.unwrap_or(serve_block_symbols(code)),
    };
    let dir = opts.dir.clone();
    let repo = tokio::task::spawn_blocking(move || Repository::scan(&dir, &fec, None))
        .await
        .map_err(NetError::Task)??;
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|e| NetError::socket(format!("listen on {}", opts.listen), e))?;
    let request_addr = listener
        .local_addr()
        .map_err(|e| NetError::socket("local address", e))?;
    let (data, announce) = socket::senders(
        &opts.data_group,
        &opts.announce_group,
        &opts.interface,
        opts.ttl,
        opts.source,
        opts.rate_bps,
    )?;
    let mut cfg = Profile::Lan.server();
    cfg.session = SessionId(
        (opts.seed as u32) ^ std::process::id().rotate_left(16) ^ request_addr.port() as u32,
    );
    cfg.scheme = opts.scheme;
    cfg.scheduler = opts.scheduler.clone();
    cfg.code = code;
    cfg.symbol_size = symbol_size;
    cfg.max_block_symbols = fec.max_block_symbols;
    cfg.seed = opts.seed;
    cfg.nak_window = opts.nak_window;
    cfg.report_timeout = opts.report_timeout;
    // Tags on every packet (the pacing counts them).
    cfg.session_key = Some(keys::session_key()?);
    cfg.encrypt = opts.encrypt;
    cfg.sign_symbols = opts.sign_symbols;
    cfg.sign_copies = opts.sign_copies;
    cfg.batch_hold = (opts.batch_hold_ms > 0).then(|| Duration::from_millis(opts.batch_hold_ms));
    cfg.batch_hold_after = Duration::from_millis(opts.batch_hold_after_ms);
    cfg.batch_hold_idle = opts.batch_hold_idle;
    cfg.set_rate(opts.rate_bps, opts.data_group.is_ipv6())?;
    cfg.channels = Channels {
        data: Some(opts.data_group),
        announce: Some(opts.announce_group),
        source: opts.source,
        rate_bps: opts.rate_bps,
    };
    let identity = match &opts.key {
        Some(path) => keys::load_or_create(path)?,
        None => keys::generate_identity()?,
    };
    let tls = tls::server_config(&identity)?;
    let key = identity.public();
    let tokens = match &opts.tokens {
        Some(path) => keys::read_token_hashes(path)?,
        None => Vec::new(),
    };
    let endpoint = ServerEndpoint::new(cfg, Profile::Lan.limits(), repo.infos())?
        .with_identity(identity)
        .with_tokens(tokens);
    let conns = endpoint.limits().max_connections as u64;
    if let Some(fds) = crate::fd_limit::soft().filter(|&n| n < conns + crate::fd_limit::FD_SPARE) {
        tracing::warn!(
            "the open-file limit ({fds}) is below the {conns} connections serve takes: \
             past about {} clients, connections will be refused (raise `ulimit -n`)",
            fds.saturating_sub(crate::fd_limit::FD_SPARE)
        );
    }
    let shared: Shared = Arc::new(Mutex::new(Snapshot {
        items: repo.files.len(),
        scheme: opts.scheme.to_string(),
        ..Default::default()
    }));
    let metrics_addr = metrics::start(opts.metrics, &shared).await?;
    let total: u64 = repo.files.iter().map(|f| f.size).sum();
    let banner = format!(
        "repocast serve {}: {} items, {:.1} MiB ({} hashed now{}); requests on tcp {}, data {}, announcements {}, ttl {}, rate {:.1} Mbit/s, scheme {}, scheduler {}{}, code {}, {symbol_size}-byte symbols ({sizing}){}",
        opts.dir.display(),
        repo.files.len(),
        total as f64 / (1 << 20) as f64,
        repo.hashed,
        match repo.skipped {
            0 => String::new(),
            n => format!(", {n} unreadable skipped"),
        },
        request_addr,
        opts.data_group,
        opts.announce_group,
        opts.ttl,
        opts.rate_bps as f64 / 1e6,
        opts.scheme,
        opts.scheduler.name(),
        match (opts.batch_hold_ms, opts.batch_hold_after_ms) {
            (0, _) => String::new(),
            (ms, after) => format!(
                " with a batching hold of up to {ms} ms after {after} ms of load{}",
                if opts.batch_hold_idle {
                    ", idling the link"
                } else {
                    ""
                }
            ),
        },
        code.name(),
        metrics_addr.map_or(String::new(), |a| format!(", metrics http://{a}/metrics")),
    ) + &format!("; key {key}");
    let (tx, rx) = watch::channel(false);
    let pump = Pump {
        endpoint,
        source: repo.source(),
        data,
        announce,
        data_group: opts.data_group,
        announce_group: opts.announce_group,
        conns: HashMap::new(),
        shared: shared.clone(),
        start: std::time::Instant::now(),
        tls,
        allow: opts.allow.clone(),
        queued: Arc::new(AtomicUsize::new(0)),
        tokens: opts.tokens.clone().map(|p| TokenFile {
            seen: TokenFile::stamp(&p),
            path: p,
        }),
        rekey_now: false,
        rekey_secs: opts.rekey_secs,
        // An interval too long to add to the clock is never.
        next_rekey: (opts.rekey_secs > 0)
            .then(|| std::time::Instant::now().checked_add(Duration::from_secs(opts.rekey_secs)))
            .flatten(),
    };
    let task = tokio::spawn(pump.run(listener, rx));
    Ok(ServerHandle {
        request_addr,
        metrics_addr,
        banner,
        key,
        shutdown: tx,
        task,
        shared,
    })
}

/// Bytes-in messages the pump may hold from all readers before they wait.
const READ_QUEUE: usize = 1024;

/// `serve --tokens FILE`, watched: its modification time and length when
/// last read.
struct TokenFile {
    path: std::path::PathBuf,
    seen: Option<(std::time::SystemTime, u64)>,
}

impl TokenFile {
    fn stamp(path: &std::path::Path) -> Option<(std::time::SystemTime, u64)> {
        let m = std::fs::metadata(path).ok()?;
        Some((m.modified().ok()?, m.len()))
    }
}

struct Pump {
    endpoint: ServerEndpoint,
    source: crate::repo::FileSource,
    data: tokio::net::UdpSocket,
    announce: tokio::net::UdpSocket,
    data_group: SocketAddr,
    announce_group: SocketAddr,
    conns: HashMap<ClientId, ConnTasks>,
    shared: Shared,
    start: std::time::Instant,
    tls: Arc<rustls::ServerConfig>,
    allow: Vec<crate::addr::Cidr>,
    /// Bytes queued for all connections' writers.
    queued: Arc<AtomicUsize>,
    /// The access token file, re-read when it changes.
    tokens: Option<TokenFile>,
    /// A token was withdrawn: rotate the session key as soon as a
    /// rotation is accepted.
    rekey_now: bool,
    /// Seconds between session key rotations (0: never).
    rekey_secs: u64,
    /// When the session key is next rotated (None: never).
    next_rekey: Option<std::time::Instant>,
}

impl Pump {
    async fn run(
        mut self,
        listener: TcpListener,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<ServerStats, NetError> {
        let (ev_tx, mut ev_rx) = mpsc::channel::<ConnEvent>(READ_QUEUE);
        let mut prep = crate::jobs::Jobs::new();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut buf = Vec::with_capacity(2048);
        let mut alarm = crate::Alarm::default();
        // SIGHUP re-reads the token file at once (it is also checked for
        // changes every tick).
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            self.drain(&mut buf, &prep, &mut ev_rx).await;
            let deadline = alarm.target(self.endpoint.poll_timeout(), self.start);
            tokio::select! {
                acc = listener.accept() => match acc {
                    Ok((sock, peer)) => self.connect(sock, peer, ev_tx.clone()),
                    // Out of file descriptors (or another passing error):
                    // back off instead of spinning on accept.
                    Err(e) => {
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                Some(ev) = ev_rx.recv() => self.on_conn(ev),
                Some(job) = prep.done() => self.endpoint.prepared(job),
                _ = crate::sleep_until(deadline) => {
                    // What the connections sent before the deadline goes
                    // in first: a busy pump must not count a report that
                    // came in time, but was not read yet, as missing.
                    while let Ok(ev) = ev_rx.try_recv() {
                        self.on_conn(ev);
                    }
                    self.endpoint.handle_timeout(core_now(self.start));
                }
                _ = tick.tick() => {
                    self.reload_tokens(false);
                    self.publish();
                    self.maybe_rekey();
                }
                Some(()) = async {
                    match hangup.as_mut() {
                        Some(h) => h.recv().await,
                        None => std::future::pending().await,
                    }
                } => self.reload_tokens(true),
                _ = shutdown.changed() => break,
            }
        }
        self.publish();
        Ok(self.endpoint.server().stats())
    }

    /// Bytes from a connection, or its close.
    fn on_conn(&mut self, ev: ConnEvent) {
        let now = core_now(self.start);
        match ev {
            ConnEvent::Bytes(c, b) => self.endpoint.handle_stream(now, c, &b),
            ConnEvent::Closed(c) => {
                self.forget(c);
                self.endpoint.handle_close(now, c);
            }
        }
    }

    fn connect(&mut self, sock: TcpStream, peer: SocketAddr, events: mpsc::Sender<ConnEvent>) {
        if !self.allow.is_empty() && !self.allow.iter().any(|c| c.contains(peer.ip())) {
            tracing::debug!("refused {peer}: not in --allow");
            return;
        }
        let id = match (self.endpoint)
            .accept_from(core_now(self.start), Some(peer.ip().to_canonical()))
        {
            Ok(id) => id,
            Err(why) => {
                tracing::debug!("refused a connection: {why}");
                return;
            }
        };
        let _ = sock.set_nodelay(true);
        // As many frames as the bound on bytes lets in (empty ones).
        let slots = self.endpoint.limits().max_queued_bytes / FRAME_COST;
        let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(slots.max(1));
        let cfg = self.tls.clone();
        let queued = Arc::new(AtomicUsize::new(0));
        let (mine, total) = (queued.clone(), self.queued.clone());
        let reader = tokio::spawn(async move {
            let stream = match tls::accept(cfg, sock).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!("{peer}: {e}");
                    let _ = events.send(ConnEvent::Closed(id)).await;
                    return;
                }
            };
            let (mut rd, mut wr) = tokio::io::split(stream);
            tokio::spawn(async move {
                while let Some(frame) = out_rx.recv().await {
                    let more = !out_rx.is_empty();
                    if tls::write_frame(&mut wr, &frame, more).await.is_err() {
                        break;
                    }
                    // Written: no longer held. Only what this connection
                    // still counted comes off the total (a released
                    // connection's count was taken off already).
                    let n = frame.len() + FRAME_COST;
                    let prev = mine
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                            Some(x.saturating_sub(n))
                        })
                        .unwrap_or(0);
                    let taken = prev.min(n);
                    let _ = total.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                        Some(x.saturating_sub(taken))
                    });
                }
                let _ = wr.shutdown().await;
            });
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if events
                            .send(ConnEvent::Bytes(id, buf[..n].to_vec()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
            let _ = events.send(ConnEvent::Closed(id)).await;
        });
        let reader = reader.abort_handle();
        self.conns.insert(
            id,
            ConnTasks {
                out: out_tx,
                reader,
                queued,
            },
        );
    }

    async fn drain(
        &mut self,
        buf: &mut Vec<u8>,
        prep: &crate::jobs::Jobs<repocast_core::server::encoders::PrepareJob>,
        events: &mut mpsc::Receiver<ConnEvent>,
    ) {
        let mut since = core_now(self.start);
        loop {
            let now = core_now(self.start);
            let Some(dest) = self.endpoint.poll_transmit(now, &mut self.source, buf) else {
                break;
            };
            // A block's encoder is prepared on another core, not in the
            // pump (a stall of several milliseconds at its first repair
            // symbol otherwise).
            while let Some(job) = self.endpoint.poll_prepare() {
                prep.start(job);
            }
            // A pump that cannot keep up with its rate would otherwise
            // never leave this loop: let the connections' tasks (and, in
            // `repocast bench`, the receiver) run, and take in what they
            // read, so reports and requests are not left unread (a report
            // read late times out, and its item is sent again).
            if now - since > YIELD_AFTER {
                tokio::task::yield_now().await;
                while let Ok(ev) = events.try_recv() {
                    self.on_conn(ev);
                }
                since = core_now(self.start);
            }
            match dest {
                Dest::Data => send_datagram(&self.data, buf, self.data_group).await,
                Dest::Announce => send_datagram(&self.announce, buf, self.announce_group).await,
                Dest::Conn(c) => self.queue_frame(now, c, buf),
            }
        }
        while let Some((c, why)) = self.endpoint.poll_close() {
            tracing::debug!("client {c}: closing: {why}");
            self.forget(c);
        }
        while let Some(ev) = self.endpoint.poll_event() {
            tracing::debug!("{ev:?}");
        }
    }

    /// Queues a frame for connection `c`'s writer, within the per
    /// connection and total byte bounds (a peer that does not read is
    /// closed, the one holding the most first).
    fn queue_frame(&mut self, now: repocast_core::Instant, c: ClientId, frame: &[u8]) {
        let Some(t) = self.conns.get(&c) else {
            return;
        };
        let len = frame.len() + FRAME_COST;
        let mine = t.queued.load(Ordering::Relaxed);
        let mut victim = None;
        let bound = self.endpoint.limits().max_queued_bytes;
        if mine + len > bound || t.out.try_send(frame.to_vec()).is_err() {
            victim = Some(c);
        } else {
            t.queued.fetch_add(len, Ordering::Relaxed);
            if self.queued.fetch_add(len, Ordering::Relaxed) + len > MAX_QUEUED_TOTAL {
                victim = (self.conns.iter())
                    .max_by_key(|(_, t)| t.queued.load(Ordering::Relaxed))
                    .map(|(id, _)| *id);
            }
        }
        if let Some(v) = victim {
            // What it holds stops counting now (its writer goes with it),
            // so the next frame does not elect it again.
            self.release(v);
            self.endpoint.handle_backlog(now, v);
        }
    }

    /// Takes connection `c`'s queued bytes off the total.
    fn release(&mut self, c: ClientId) {
        if let Some(t) = self.conns.get(&c) {
            let q = t.queued.swap(0, Ordering::Relaxed);
            let _ = self
                .queued
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                    Some(x.saturating_sub(q))
                });
        }
    }

    /// Drops a connection's tasks; what was queued for it no longer counts.
    fn forget(&mut self, c: ClientId) {
        self.release(c);
        if let Some(t) = self.conns.remove(&c) {
            t.reader.abort();
        }
    }

    /// Re-reads the token file when it changed (or `force`d): connections
    /// whose token was withdrawn are closed and the session key rotates.
    /// A file that cannot be read or has a bad line leaves the tokens as
    /// they were (to admit nobody, leave the file empty).
    fn reload_tokens(&mut self, force: bool) {
        let Some(tf) = self.tokens.as_mut() else {
            return;
        };
        let stamp = TokenFile::stamp(&tf.path);
        if !force && stamp == tf.seen {
            return;
        }
        tf.seen = stamp;
        match keys::read_token_list(&tf.path) {
            Ok(list) => {
                let n = list.len();
                let closed = self.endpoint.set_tokens(core_now(self.start), Some(list));
                tracing::info!(
                    "{}: {n} tokens accepted; {closed} connections closed",
                    tf.path.display()
                );
                self.rekey_now |= closed > 0;
            }
            Err(e) => tracing::warn!("tokens kept as they were: {e}"),
        }
    }

    /// Rotates the session key when its interval is up, or at once after
    /// a revocation: a fresh key from the OS, handed to the endpoint
    /// (which tells every client first).
    fn maybe_rekey(&mut self) {
        let now = std::time::Instant::now();
        if self.rekey_now {
            // After a revocation: the key the revoked clients hold goes.
            if let Ok(k) = keys::session_key() {
                if self.endpoint.rotate_key(core_now(self.start), k) {
                    self.rekey_now = false;
                    tracing::info!("session key rotating after a revocation");
                }
            }
            return;
        }
        if self.next_rekey.is_none_or(|t| now < t) {
            return;
        }
        self.next_rekey = now.checked_add(Duration::from_secs(self.rekey_secs));
        match keys::session_key() {
            Ok(k) => {
                if self.endpoint.rotate_key(core_now(self.start), k) {
                    let epoch = self.endpoint.key_epoch().wrapping_add(1);
                    tracing::info!("session key rotating to epoch {epoch}");
                }
            }
            Err(e) => tracing::warn!("session key not rotated: {e}"),
        }
    }

    fn publish(&mut self) {
        let server = self.endpoint.server();
        let clients: Vec<(u32, _)> = {
            let mut ids: Vec<ClientId> = self.conns.keys().copied().collect();
            ids.sort();
            ids.into_iter()
                .filter_map(|c| server.client_summary(c).map(|s| (c.0, s)))
                .collect()
        };
        let snap = Snapshot {
            stats: server.stats(),
            clients,
            queue: server.queue_len(),
            malformed: self.endpoint.stats().malformed_frames,
            refused_unauthorized: self.endpoint.stats().refused_unauthorized,
            revoked: self.endpoint.stats().revoked,
            prepare_jobs: server.prepare_jobs(),
            key_epoch: self.endpoint.key_epoch(),
            uptime_s: self.start.elapsed().as_secs_f64(),
            ..metrics::read(&self.shared)
        };
        if let Ok(mut g) = self.shared.lock() {
            *g = snap;
        }
    }
}

/// How long the pump sends without a break before it lets other tasks
/// run (only a pump behind its rate sends that long at once).
const YIELD_AFTER: std::time::Duration = std::time::Duration::from_millis(20);

/// Sends one datagram, waiting for room only when the socket buffer is
/// full (which is how a link slower than the rate holds the pump back:
/// [`socket::send_buffer`]).
pub(crate) async fn send_datagram(sock: &tokio::net::UdpSocket, buf: &[u8], to: SocketAddr) {
    match sock.try_send_to(buf, to) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
            if let Err(e) = sock.send_to(buf, to).await {
                tracing::warn!("send to {to}: {e}");
            }
        }
        Err(e) => tracing::warn!("send to {to}: {e}"),
    }
}
