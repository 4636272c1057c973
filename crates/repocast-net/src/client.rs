//! `repocast get` and `repocast ls`: the core's [`ClientEndpoint`] on real
//! sockets.
//!
//! One task owns the endpoint and its [`Store`]. It connects, feeds the
//! endpoint what the request connection and the two groups deliver
//! (through the optional [`LossySocket`] emulation), wakes it at its
//! deadline, writes the frames it gives, and joins the groups when the
//! endpoint says so. The request connection is TLS, pinned to the
//! server's key ([`crate::tls`]), and the key it verified is handed to the
//! endpoint, which then insists on tagged packets and signed
//! announcements. Requesting, decoding, the memory bound, storing,
//! verifying and every outcome are the endpoint's.

use crate::fault::LossySocket;
use crate::socket::{self, Interface};
use crate::store::{Source, Store};
use crate::tls::{self, ClientStream, Trust};
use crate::{NetError, core_now};
use repocast_core::ItemId;
use repocast_core::auth::{PublicKey, Verified};
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Want};
use repocast_core::endpoint::select;
use repocast_core::endpoint::signing::VerifierStats;
use repocast_core::endpoint::store::{BlockStore, MemoryStore};
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::wire::control::{CatalogueEntry, Channels};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tokio::sync::{mpsc, watch};

pub use repocast_core::client::ClientStats;
pub use repocast_core::endpoint::client::{Event as Progress, Outcome};

/// What to fetch and how.
#[derive(Debug, Clone)]
pub struct GetOptions {
    /// The server's request address.
    pub server: SocketAddr,
    /// Interface to join the groups on.
    pub interface: Interface,
    /// Output folder.
    pub out: PathBuf,
    /// Items to fetch (ignored with `all`): exact names, and patterns
    /// and folders, which are resolved against the server's catalogue
    /// ([`repocast_core::endpoint::select`]).
    pub items: Vec<String>,
    /// Fetch the whole catalogue.
    pub all: bool,
    /// Emulated loss on received datagrams (seeded).
    pub loss: LossSpec,
    /// Seed for the loss emulation and the core's NAK delays.
    pub seed: u64,
    /// Join the groups source-specifically when the server names a source.
    pub ssm: bool,
    /// Give up when nothing at all has been heard for this long.
    pub idle_timeout: Duration,
    /// Give up when the server, though heard, has sent nothing for this
    /// request for this long (`None`: never).
    pub stall_timeout: Option<Duration>,
    /// Bytes of partially received blocks kept in memory; beyond it the
    /// least recently fed blocks go to a spill file ([`MEMORY_BUDGET`]).
    pub memory_budget: u64,
    /// Which server keys to accept.
    pub trust: Trust,
    /// Replace existing files that differ from the item.
    pub overwrite: bool,
    /// Access token, for a server that requires one.
    pub token: Option<String>,
}

/// Default memory for partially received blocks.
pub const MEMORY_BUDGET: u64 = 64 << 20;

impl GetOptions {
    /// Defaults for fetching `items` from `server` into `out`.
    pub fn new(server: SocketAddr, out: PathBuf, items: Vec<String>) -> Self {
        GetOptions {
            server,
            interface: Interface::default(),
            out,
            all: items.is_empty(),
            items,
            loss: LossSpec::NONE,
            seed: 1,
            ssm: true,
            idle_timeout: Duration::from_secs(60),
            stall_timeout: Some(repocast_core::endpoint::client::STALL_TIMEOUT),
            memory_budget: MEMORY_BUDGET,
            trust: Trust::KnownServers(tls::default_known_servers()),
            overwrite: false,
            token: None,
        }
    }
}

/// How a `get` went.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GetReport {
    /// Every requested item, verified or failed with a reason.
    pub items: Vec<Outcome>,
    /// From connecting to the last item.
    pub elapsed: Duration,
    /// The core's counters.
    pub stats: ClientStats,
    /// Datagrams received from the groups.
    pub datagrams: u64,
    /// Datagrams dropped by the loss emulation.
    pub emulated_losses: u64,
    /// Datagrams that did not parse or belong to another session.
    pub malformed: u64,
    /// Blocks already verified when their items opened: from a previous
    /// run's journal, or lent by another request on the host.
    pub resumed_blocks: u64,
    /// Of those, blocks lent by another request on the host
    /// ([`crate::store::share`]).
    #[serde(default)]
    pub lent_blocks: u64,
    /// Partly received blocks found with the symbols a previous run kept
    /// (`ClientEndpoint::suspend`), and those symbols.
    #[serde(default)]
    pub kept_blocks: u64,
    #[serde(default)]
    pub kept_symbols: u64,
    /// Partial blocks moved to disk to stay within the memory budget.
    pub spilled_blocks: u64,
    /// Datagrams with a missing or wrong tag or signature (dropped).
    pub forged: u64,
    /// Signed symbol batches checked and refused, and data packets no
    /// batch vouched for (dropped), when the server signs its symbols.
    pub signing: VerifierStats,
    /// Received through the host's shared receiver ([`crate::host`]).
    pub shared: bool,
}

impl GetReport {
    /// Whether every requested item verified.
    pub fn all_ok(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|o| o.result.is_ok())
    }
}

/// Connects and runs the TLS handshake: the stream and the server's key.
pub(crate) async fn connect(
    server: SocketAddr,
    trust: &Trust,
) -> Result<(ClientStream, PublicKey), NetError> {
    let sock = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(server))
        .await
        .map_err(|_| NetError::ConnectTimeout(server))?
        .map_err(|source| NetError::Connect { server, source })?;
    let _ = sock.set_nodelay(true);
    tls::connect(sock, server, trust).await
}

/// How long a TCP connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The two groups, joined once the server has said where they are (or,
/// for `listen`, at once).
pub(crate) struct Groups {
    pub(crate) data: LossySocket,
    pub(crate) announce: LossySocket,
}

impl Groups {
    /// Joins both groups on `iface` (source-specifically when `src` is
    /// given), each through the loss emulation with its own seeded stream.
    pub(crate) fn join(
        data: &SocketAddr,
        announce: &SocketAddr,
        iface: &Interface,
        src: Option<std::net::IpAddr>,
        loss: LossSpec,
        seed: u64,
    ) -> Result<Groups, NetError> {
        let data_sock = socket::receiver(data, iface, src)?;
        socket::warn_small_recv_buffer(&data_sock);
        Ok(Groups {
            data: LossySocket::new(data_sock, loss, seed ^ 0x1055),
            announce: LossySocket::new(
                socket::receiver(announce, iface, src)?,
                loss,
                seed ^ 0x00a1_055a,
            ),
        })
    }
}

/// Where to join and how to receive.
struct Join<'a> {
    interface: &'a Interface,
    ssm: bool,
    loss: LossSpec,
    seed: u64,
}

impl Join<'_> {
    fn join(&self, ch: &Channels) -> Result<Groups, NetError> {
        let (Some(data), Some(announce)) = (ch.data, ch.announce) else {
            return Err(NetError::NoGroups);
        };
        let src = if self.ssm { ch.source } else { None };
        Groups::join(&data, &announce, self.interface, src, self.loss, self.seed)
    }
}

/// Until `g` has a datagram; never, without a socket.
pub(crate) async fn readable(g: Option<&LossySocket>) {
    match g {
        Some(s) => {
            let _ = s.readable().await;
        }
        None => std::future::pending().await,
    }
}

/// Until `stop` says stop (never, without one).
pub(crate) async fn stopping(stop: Option<&mut watch::Receiver<bool>>) {
    if let Some(s) = stop {
        if s.wait_for(|stop| *stop).await.is_ok() {
            return;
        }
    }
    // None, or a sender gone (it never says stop).
    std::future::pending().await
}

/// Why the items a stopped `get` had not verified failed.
pub const STOPPED: &str = "stopped; run the same get again to go on from what was received";

/// Runs `ep` on `sock` until it is finished, or stopped by `stop`; returns
/// the groups (for their counters) if it joined them.
async fn drive<S: BlockStore>(
    ep: &mut ClientEndpoint<S>,
    sock: ClientStream,
    start: std::time::Instant,
    join: Option<&Join<'_>>,
    progress: Option<&mpsc::UnboundedSender<Progress>>,
    mut stop: Option<watch::Receiver<bool>>,
) -> Result<Option<Groups>, NetError> {
    let (mut rd, mut wr) = tokio::io::split(sock);
    let mut groups: Option<Groups> = None;
    let (mut out, mut tcp, mut dgram) = (Vec::new(), vec![0u8; 64 << 10], vec![0u8; 65536]);
    let mut announced = crate::datagrams::Datagrams::default();
    // The item filter installed on the data socket (None: everything).
    let mut filter: Option<Vec<ItemId>> = None;
    let mut alarm = crate::Alarm::default();
    let mut jobs = crate::jobs::Jobs::new();
    loop {
        jobs.trade(ep, start);
        let mut wrote = false;
        while ep.poll_transmit(&mut out) {
            wrote = true;
            if wr.write_all(&out).await.is_err() {
                ep.handle_close(core_now(start));
            }
        }
        // The frames out, flushed once (see `tls::write_frame`).
        if wrote && wr.flush().await.is_err() {
            ep.handle_close(core_now(start));
        }
        let (mut changed, mut joined) = (false, false);
        while let Some(ev) = ep.poll_event() {
            match ev {
                Progress::Join(ch) => {
                    if let Some(j) = join {
                        groups = Some(j.join(&ch)?);
                        filter = None;
                        changed = true;
                    }
                    ep.joined(core_now(start));
                    joined = true;
                }
                Progress::Bytes { .. } => {
                    if let Some(tx) = progress {
                        let _ = tx.send(ev);
                    }
                }
                ev => {
                    changed = true;
                    if let Some(tx) = progress {
                        let _ = tx.send(ev);
                    }
                }
            }
        }
        // Only the wanted items' data reaches this process.
        if let Some(g) = groups.as_ref().filter(|_| changed) {
            let want = ep.wanted_items(socket::MAX_FILTER_ITEMS);
            if want != filter {
                socket::filter_items(g.data.socket(), want.as_deref())?;
                filter = want;
            }
        }
        if ep.is_finished() {
            // A run that ended short takes back its blocks out being
            // decoded, so what they verify is kept for a rerun.
            jobs.settle(ep, start).await;
            return Ok(groups);
        }
        if stop.as_ref().is_some_and(|s| *s.borrow()) {
            // Its blocks out being decoded first, so what they verify is
            // written and the rest kept with the partly received blocks.
            jobs.settle(ep, start).await;
            ep.stop(STOPPED);
            continue;
        }
        if joined {
            // On the groups: the request goes out now.
            continue;
        }
        let deadline = alarm.target(ep.poll_timeout(), start);
        tokio::select! {
            r = rd.read(&mut tcp) => match r {
                Ok(0) | Err(_) => ep.handle_close(core_now(start)),
                Ok(n) => ep.handle_stream(core_now(start), &tcp[..n]),
            },
            _ = readable(groups.as_ref().map(|g| &g.data)) => {
                if let Some(g) = groups.as_mut() {
                    take_data(ep, g, &mut dgram, &mut jobs, start);
                }
            }
            _ = readable(groups.as_ref().map(|g| &g.announce)) => {
                if let Some(g) = groups.as_mut() {
                    // All that is there first: their signatures are
                    // checked as one batch, then each is handled.
                    announced.read_from(&mut g.announce, &mut dgram);
                    ep.prepare_announcements(announced.iter());
                    for d in announced.iter() {
                        ep.handle_datagram(core_now(start), Channel::Announce, d);
                    }
                }
            }
            Some(job) = jobs.done() => crate::jobs::HandsOutJobs::work_done(ep, core_now(start), job),
            _ = crate::sleep_until(deadline) => {
                // What the host has received goes in first: a report
                // falling due now counts it (read after its end, a
                // transmission's last packets were asked for again).
                if let Some(g) = groups.as_mut() {
                    take_data(ep, g, &mut dgram, &mut jobs, start);
                }
                ep.handle_timeout(core_now(start));
            }
            // Seen at the top of the loop.
            _ = stopping(stop.as_mut()) => {}
        }
    }
}

/// Hands `ep` what the data group holds, up to a batch. Blocks ready go
/// out at once, and those back come in, not only between batches.
fn take_data<S: BlockStore>(
    ep: &mut ClientEndpoint<S>,
    g: &mut Groups,
    dgram: &mut [u8],
    jobs: &mut crate::jobs::Jobs<crate::jobs::Work>,
    start: std::time::Instant,
) {
    crate::datagrams::drain(&mut g.data, dgram, |d| {
        ep.handle_datagram(core_now(start), Channel::Data, d);
        jobs.trade(ep, start);
    });
}

/// `repocast ls`: the server's catalogue.
pub async fn list(
    server: SocketAddr,
    trust: &Trust,
    token: Option<String>,
) -> Result<Vec<CatalogueEntry>, NetError> {
    let (sock, key) = connect(server, trust).await?;
    let start = std::time::Instant::now();
    let mut client = Profile::Lan.client();
    client.token = token;
    let mut cfg = ClientEndpointConfig::new(client, Want::Catalogue);
    cfg.idle_timeout = CONNECT_TIMEOUT;
    cfg.server_key = Some(key);
    let mut ep = ClientEndpoint::new(core_now(start), cfg, MemoryStore::default());
    // The catalogue needs no groups: none are joined.
    drive(&mut ep, sock, start, None, None, None).await?;
    match ep.ended() {
        Some(why) => Err(NetError::Ended(why.to_owned())),
        None => Ok(ep.catalogue().to_vec()),
    }
}

/// `repocast get`: fetches the items into `opts.out`, resuming from a
/// previous run's journal, and reports every item verified or failed.
pub async fn get(
    opts: GetOptions,
    progress: Option<mpsc::UnboundedSender<Progress>>,
) -> Result<GetReport, NetError> {
    get_until(opts, progress, None).await
}

/// [`get`], stopped early when `stop` turns true (a signal): the items
/// not yet verified fail with [`STOPPED`], and what was received of them
/// is kept for a rerun (`ClientEndpoint::stop`).
pub async fn get_until(
    opts: GetOptions,
    progress: Option<mpsc::UnboundedSender<Progress>>,
    mut stop: Option<watch::Receiver<bool>>,
) -> Result<GetReport, NetError> {
    let started = std::time::Instant::now();
    crate::fd_limit::warn_if_low(opts.all, &opts.items);
    let (sock, key) = tokio::select! {
        c = connect(opts.server, &opts.trust) => c?,
        _ = stopping(stop.as_mut()) => return Err(NetError::Ended(STOPPED.into())),
    };
    let start = std::time::Instant::now();
    let mut ep = endpoint(&opts, key, core_now(start), &[], Verified::new())?;
    let join = Join {
        interface: &opts.interface,
        ssm: opts.ssm,
        loss: opts.loss,
        seed: opts.seed,
    };
    let groups = drive(&mut ep, sock, start, Some(&join), progress.as_ref(), stop).await?;
    let (received, dropped) = groups.as_ref().map_or((0, 0), |g| {
        (
            g.data.received + g.announce.received,
            g.data.dropped + g.announce.dropped,
        )
    });
    Ok(report(&ep, started, received, dropped))
}

/// The endpoint of one `get`, storing into `opts.out`, that talks to the
/// server whose key the TLS handshake verified (`key`). The same for a
/// `get` on its own and one run by the host's shared receiver
/// ([`crate::host`]), which first seeds the store with what the other
/// requests there lend (`lent`; a seed that fails is only not used) and
/// gives all its requests one memory of checked signatures (`verified`).
pub(crate) fn endpoint(
    opts: &GetOptions,
    key: PublicKey,
    now: repocast_core::Instant,
    lent: &[Source],
    verified: Verified,
) -> Result<ClientEndpoint<Store>, NetError> {
    // Its files are fsynced and renamed into place off the receiving
    // loop, by the driver's finish jobs.
    let mut store = Store::new(&opts.out)?
        .overwrite(opts.overwrite)
        .finish_away(true);
    for src in lent {
        match store.seed(src) {
            Ok(n) => tracing::debug!("{}: {n} blocks lent by another request", src.name),
            Err(e) => tracing::debug!("{}: not lent: {e}", src.name),
        }
    }
    let mut client = Profile::Lan.client();
    client.seed = opts.seed;
    client.token = opts.token.clone();
    let want = if opts.all {
        Want::All
    } else if opts.items.iter().any(|s| select::is_pattern(s)) {
        Want::Select(opts.items.clone())
    } else {
        Want::Items(opts.items.clone())
    };
    let mut cfg = ClientEndpointConfig::new(client, want);
    cfg.idle_timeout = opts.idle_timeout;
    cfg.stall_timeout = opts.stall_timeout;
    cfg.memory_budget = opts.memory_budget;
    cfg.server_key = Some(key);
    cfg.verified = verified;
    Ok(ClientEndpoint::new(now, cfg, store))
}

/// A finished endpoint's report: `received` datagrams from the groups,
/// `dropped` of them by the loss emulation.
pub(crate) fn report<S: BlockStore>(
    ep: &ClientEndpoint<S>,
    started: std::time::Instant,
    received: u64,
    dropped: u64,
) -> GetReport {
    let st = ep.stats();
    GetReport {
        items: ep.outcomes(),
        elapsed: started.elapsed(),
        stats: ep.client_stats(),
        datagrams: received,
        emulated_losses: dropped,
        malformed: st.malformed,
        resumed_blocks: st.resumed_blocks,
        lent_blocks: 0,
        kept_blocks: st.kept_blocks_found,
        kept_symbols: st.kept_symbols_found,
        spilled_blocks: st.spilled_blocks,
        forged: st.forged,
        signing: st.signing,
        shared: false,
    }
}
