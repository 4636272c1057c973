//! `repocast serve`: the core's [`Server`] on real sockets.
//!
//! One task owns the state machine. It selects over new request
//! connections, control frames from them, the core's next deadline (the
//! core paces the data channel with its token bucket), a metrics tick and
//! shutdown, and after each wake-up drains `poll_transmit`: data to the data
//! group, announcements to the announcement group, control messages to the
//! connection they are for. Each connection has a reader task (frames in,
//! parsed and checked) and a writer task (frames out).

use crate::addr;
use crate::metrics::{self, Shared, Snapshot};
use crate::repo::Repository;
use crate::socket::{self, Interface};
use crate::{NetError, core_now};
use repocast_core::fec::CodeKind;
use repocast_core::policy::Scheme;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::{Server, ServerConfig, ServerStats, Transmit};
use repocast_core::wire::control::Channels;
use repocast_core::wire::frame::{FrameDecoder, encode_frame};
use repocast_core::wire::{ClientMsg, FecParams};
use repocast_core::{ClientId, SessionId};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

/// Everything `repocast serve` can be told.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The repository folder.
    pub dir: PathBuf,
    /// Where the request connection listens.
    pub listen: SocketAddr,
    /// Data channel group and port.
    pub data_group: SocketAddr,
    /// Announcement channel group and port.
    pub announce_group: SocketAddr,
    /// Interface to send on.
    pub interface: Interface,
    /// Multicast TTL / hop limit.
    pub ttl: u32,
    /// Data rate cap, bits per second.
    pub rate_bps: u64,
    /// Reliability scheme.
    pub scheme: Scheme,
    /// Scheduler.
    pub scheduler: SchedulerKind,
    /// Erasure code.
    pub code: CodeKind,
    /// Bytes per symbol.
    pub symbol_size: u16,
    /// Largest block in symbols (None: the code's default).
    pub max_block: Option<u32>,
    /// Where `/metrics` and `/status` listen (None: off).
    pub metrics: Option<SocketAddr>,
    /// Source address advertised for source-specific joins.
    pub source: Option<IpAddr>,
    /// Seed for the core's random choices.
    pub seed: u64,
    /// NAK delay window the server starts from (it widens it under load).
    pub nak_window: (Duration, Duration),
    /// How long past a transmission's end (plus the NAK window) a silent
    /// receiver is waited for before its item is rescheduled.
    pub report_timeout: Duration,
}

impl ServeOptions {
    /// Defaults for serving `dir` on the LAN (see [`crate::addr`]).
    pub fn new(dir: PathBuf) -> Self {
        ServeOptions {
            dir,
            listen: (Ipv4Addr::UNSPECIFIED, addr::REQUEST_PORT).into(),
            data_group: (addr::DATA_GROUP_V4, addr::DATA_PORT).into(),
            announce_group: (addr::ANNOUNCE_GROUP_V4, addr::ANNOUNCE_PORT).into(),
            interface: Interface::default(),
            ttl: 1,
            rate_bps: 100_000_000,
            scheme: default_scheme(),
            scheduler: SchedulerKind::Rq,
            code: CodeKind::RaptorQ,
            symbol_size: 1280,
            max_block: None,
            metrics: Some((Ipv4Addr::UNSPECIFIED, addr::METRICS_PORT).into()),
            source: None,
            seed: 1,
            nak_window: (Duration::from_millis(5), Duration::from_millis(50)),
            report_timeout: Duration::from_millis(500),
        }
    }
}

/// The real server's default scheme, `FEC(maxloss+0.02)+R(inf)+notify`:
/// redundancy matched to the worst receiver's measured loss, repair until
/// done, and late joiners keep what they catch. (The core's default,
/// FEC(0.01R)+R(0), is the study's best for large anonymous audiences.)
pub fn default_scheme() -> Scheme {
    Scheme {
        fec: repocast_core::policy::FecPolicy::MaxLoss(0.02),
        retransmit: repocast_core::policy::Retransmit::Always,
        notify: true,
    }
}

/// A running server.
pub struct ServerHandle {
    /// Where the request connection listens.
    pub request_addr: SocketAddr,
    /// Where metrics listen, if on.
    pub metrics_addr: Option<SocketAddr>,
    /// One line for the operator: addresses and scheme.
    pub banner: String,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<ServerStats, NetError>>,
    shared: Shared,
}

impl ServerHandle {
    /// Stops the server gracefully and returns its final counters.
    pub async fn stop(self) -> Result<ServerStats, NetError> {
        let _ = self.shutdown.send(true);
        self.task
            .await
            .map_err(|e| NetError::Connection(format!("server task: {e}")))?
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Snapshot {
        match self.shared.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

enum ConnEvent {
    Msg(ClientId, ClientMsg),
    Malformed,
    Closed(ClientId),
}

/// Packet bytes on the wire for a symbol: our 31-byte header plus IP/UDP.
fn packet_bits(symbol: u16, v6: bool) -> f64 {
    (symbol as f64 + 31.0 + if v6 { 48.0 } else { 28.0 }) * 8.0
}

/// Scans the repository, binds every socket and starts serving.
pub async fn start(opts: ServeOptions) -> Result<ServerHandle, NetError> {
    let code = opts.code;
    let fec = FecParams {
        code,
        symbol_size: opts.symbol_size,
        max_block_symbols: opts.max_block.unwrap_or(code.default_block_symbols()),
    };
    let dir = opts.dir.clone();
    let fec2 = fec;
    let repo = tokio::task::spawn_blocking(move || Repository::scan(&dir, &fec2))
        .await
        .map_err(|e| NetError::Config(format!("scan: {e}")))??;
    let listener = TcpListener::bind(opts.listen)
        .await
        .map_err(|e| NetError::socket(format!("listen on {}", opts.listen), e))?;
    let request_addr = listener
        .local_addr()
        .map_err(|e| NetError::socket("local address", e))?;
    let data = socket::sender(&opts.data_group, &opts.interface, opts.ttl, opts.source)?;
    let announce = socket::sender(&opts.announce_group, &opts.interface, opts.ttl, opts.source)?;
    let interval = Duration::from_secs_f64(
        packet_bits(opts.symbol_size, opts.data_group.is_ipv6()) / opts.rate_bps as f64,
    );
    // Tokio wakes about once a millisecond, and a busy host can keep the
    // sender off the CPU for several: let the bucket hold 10 ms of packets
    // (between 16 and 256) so the long-run rate holds through such stalls.
    let burst = ((0.010 / interval.as_secs_f64()).ceil() as u32).clamp(16, 256);
    let cfg = ServerConfig {
        session: SessionId(
            (opts.seed as u32) ^ std::process::id().rotate_left(16) ^ request_addr.port() as u32,
        ),
        scheme: opts.scheme,
        scheduler: opts.scheduler.clone(),
        code,
        symbol_size: opts.symbol_size,
        max_block_symbols: fec.max_block_symbols,
        packet_interval: interval,
        burst,
        payloads: true,
        seed: opts.seed,
        channels: Channels {
            data: Some(opts.data_group),
            announce: Some(opts.announce_group),
            source: opts.source,
            rate_bps: opts.rate_bps,
        },
        loss_aware_repairs: true,
        nak_window: opts.nak_window,
        report_timeout: opts.report_timeout,
        ..ServerConfig::default()
    };
    let server = Server::new(cfg, repo.infos()).map_err(|e| NetError::Config(e.to_string()))?;
    let shared: Shared = Arc::new(Mutex::new(Snapshot {
        items: repo.files.len(),
        scheme: opts.scheme.to_string(),
        ..Default::default()
    }));
    let metrics_addr = match opts.metrics {
        Some(a) => {
            let l = TcpListener::bind(a)
                .await
                .map_err(|e| NetError::socket(format!("metrics on {a}"), e))?;
            let la = l
                .local_addr()
                .map_err(|e| NetError::socket("local address", e))?;
            tokio::spawn(metrics::serve(l, shared.clone()));
            Some(la)
        }
        None => None,
    };
    let total: u64 = repo.files.iter().map(|f| f.size).sum();
    let banner = format!(
        "repocast serve {}: {} items, {:.1} MiB ({} hashed now); requests on tcp {}, data {} , announcements {}, ttl {}, rate {:.1} Mbit/s, scheme {}, scheduler {}, code {}{}",
        opts.dir.display(),
        repo.files.len(),
        total as f64 / (1 << 20) as f64,
        repo.hashed,
        request_addr,
        opts.data_group,
        opts.announce_group,
        opts.ttl,
        opts.rate_bps as f64 / 1e6,
        opts.scheme,
        opts.scheduler.name(),
        code.name(),
        metrics_addr.map_or(String::new(), |a| format!(", metrics http://{a}/metrics")),
    );
    let (tx, rx) = watch::channel(false);
    let pump = Pump {
        server,
        source: repo.source(),
        data,
        announce,
        data_group: opts.data_group,
        announce_group: opts.announce_group,
        conns: HashMap::new(),
        malformed: Arc::new(AtomicU64::new(0)),
        shared: shared.clone(),
        start: std::time::Instant::now(),
    };
    let task = tokio::spawn(pump.run(listener, rx));
    Ok(ServerHandle {
        request_addr,
        metrics_addr,
        banner,
        shutdown: tx,
        task,
        shared,
    })
}

struct Pump {
    server: Server,
    source: crate::repo::FileSource,
    data: tokio::net::UdpSocket,
    announce: tokio::net::UdpSocket,
    data_group: SocketAddr,
    announce_group: SocketAddr,
    conns: HashMap<ClientId, mpsc::UnboundedSender<Vec<u8>>>,
    malformed: Arc<AtomicU64>,
    shared: Shared,
    start: std::time::Instant,
}

impl Pump {
    async fn run(
        mut self,
        listener: TcpListener,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<ServerStats, NetError> {
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel::<ConnEvent>();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut buf = Vec::with_capacity(2048);
        loop {
            self.drain(&mut buf).await;
            let deadline = self.server.poll_timeout().map(|t| {
                let now = core_now(self.start);
                let wait = Duration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos()))
                    .min(Duration::from_secs(3600));
                tokio::time::Instant::now() + wait
            });
            tokio::select! {
                acc = listener.accept() => {
                    if let Ok((sock, _)) = acc {
                        self.connect(sock, ev_tx.clone());
                    }
                }
                Some(ev) = ev_rx.recv() => {
                    let now = core_now(self.start);
                    match ev {
                        ConnEvent::Msg(c, m) => {
                            tracing::trace!("client {c}: {m:?}");
                            self.server.handle_client_msg(now, c, m)
                        }
                        ConnEvent::Malformed => {}
                        ConnEvent::Closed(c) => {
                            self.conns.remove(&c);
                            self.server.handle_disconnect(now, c);
                        }
                    }
                }
                _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                    self.server.handle_timeout(core_now(self.start));
                }
                _ = tick.tick() => self.publish(),
                _ = shutdown.changed() => break,
            }
        }
        self.publish();
        Ok(self.server.stats())
    }

    fn connect(&mut self, sock: TcpStream, events: mpsc::UnboundedSender<ConnEvent>) {
        let _ = sock.set_nodelay(true);
        let id = self.server.handle_connect(core_now(self.start));
        let (mut rd, mut wr) = sock.into_split();
        let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        self.conns.insert(id, out_tx);
        tokio::spawn(async move {
            while let Some(frame) = out_rx.recv().await {
                if wr.write_all(&frame).await.is_err() {
                    break;
                }
            }
        });
        let malformed = self.malformed.clone();
        tokio::spawn(async move {
            let mut dec = FrameDecoder::default();
            let mut buf = vec![0u8; 64 << 10];
            'conn: loop {
                let n = match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                dec.extend(&buf[..n]);
                loop {
                    match dec.next_frame() {
                        Ok(Some(f)) => match ClientMsg::parse(&f) {
                            Ok(m) => {
                                let _ = events.send(ConnEvent::Msg(id, m));
                            }
                            Err(e) => {
                                malformed.fetch_add(1, Ordering::Relaxed);
                                tracing::debug!("client {id}: dropped malformed frame: {e}");
                                let _ = events.send(ConnEvent::Malformed);
                            }
                        },
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!("client {id}: {e}; closing");
                            malformed.fetch_add(1, Ordering::Relaxed);
                            break 'conn;
                        }
                    }
                }
            }
            let _ = events.send(ConnEvent::Closed(id));
        });
    }

    async fn drain(&mut self, buf: &mut Vec<u8>) {
        loop {
            let now = core_now(self.start);
            let Some(t) = self.server.poll_transmit(now, &mut self.source) else {
                break;
            };
            match t {
                Transmit::Data(d) => {
                    buf.clear();
                    d.emit(buf);
                    // Non-blocking first; wait for room only when the
                    // socket buffer is full.
                    match self.data.try_send_to(buf, self.data_group) {
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            if let Err(e) = self.data.send_to(buf, self.data_group).await {
                                tracing::warn!("data send: {e}");
                            }
                        }
                        Err(e) => tracing::warn!("data send: {e}"),
                    }
                }
                Transmit::Announce(a) => {
                    buf.clear();
                    a.emit(buf);
                    // The announcement channel must be reliable enough: send
                    // each three times (clients ignore duplicates).
                    for _ in 0..3 {
                        if let Err(e) = self.announce.send_to(buf, self.announce_group).await {
                            tracing::warn!("announce send: {e}");
                        }
                    }
                }
                Transmit::Control(c, m) => {
                    if let Some(tx) = self.conns.get(&c) {
                        let mut body = Vec::new();
                        m.emit(&mut body);
                        let mut frame = Vec::with_capacity(body.len() + 4);
                        encode_frame(&body, &mut frame);
                        let _ = tx.send(frame);
                    }
                }
            }
        }
        while let Some(ev) = self.server.poll_event() {
            tracing::debug!("{ev:?}");
        }
    }

    fn publish(&mut self) {
        let clients: Vec<(u32, _)> = {
            let mut ids: Vec<ClientId> = self.conns.keys().copied().collect();
            ids.sort();
            ids.into_iter()
                .filter_map(|c| self.server.client_summary(c).map(|s| (c.0, s)))
                .collect()
        };
        let snap = Snapshot {
            stats: self.server.stats(),
            clients,
            queue: self.server.queue_len(),
            malformed: self.malformed.load(Ordering::Relaxed),
            uptime_s: self.start.elapsed().as_secs_f64(),
            ..match self.shared.lock() {
                Ok(g) => g.clone(),
                Err(p) => p.into_inner().clone(),
            }
        };
        if let Ok(mut g) = self.shared.lock() {
            *g = snap;
        }
    }
}
