//! `repocast get` and `repocast ls`: the core's [`Client`] on real sockets.
//!
//! One task owns the state machine and the [`Store`]. It says hello on the
//! request connection, learns the multicast groups from the welcome, joins
//! them, then requests; it selects over control frames, data and
//! announcement datagrams (through the optional loss emulation), and the
//! core's next deadline; verified blocks go to disk as they come, and an
//! assembled item is hashed and renamed into place before the core is told.

use crate::socket::{self, Interface};
use crate::store::{Resume, Store};
use crate::{NetError, core_now};
use repocast_core::ItemId;
use repocast_core::client::{Client, ClientConfig, ClientEvent, ClientStats};
use repocast_core::loss::{LossModel, LossSpec};
use repocast_core::wire::control::{CatalogueEntry, Channels};
use repocast_core::wire::frame::{FrameDecoder, encode_frame};
use repocast_core::wire::{AnnounceRepr, ClientMsg, DataRepr, ItemSel, ServerMsg};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

/// What to fetch and how.
#[derive(Debug, Clone)]
pub struct GetOptions {
    /// The server's request address.
    pub server: SocketAddr,
    /// Interface to join the groups on.
    pub interface: Interface,
    /// Output folder.
    pub out: PathBuf,
    /// Item names to fetch (ignored with `all`).
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
    /// Verified bytes between journal commits ([`crate::store::JOURNAL_BATCH`]).
    pub journal_batch: u64,
    /// Bytes of partially received blocks kept in memory; beyond it the
    /// least recently fed blocks go to a spill file ([`MEMORY_BUDGET`]).
    pub memory_budget: u64,
}

/// Default memory for partially received blocks.
pub const MEMORY_BUDGET: u64 = 64 << 20;

/// Keeps partially received blocks within `budget` bytes: when over it,
/// moves the least recently fed blocks' symbols to the store's spill file
/// until half the budget is in use.
fn evict(
    client: &mut Client,
    store: &mut Store,
    lru: &mut HashMap<(ItemId, u32), u64>,
    symbol_sizes: &HashMap<ItemId, u64>,
    budget: u64,
) -> Result<u64, NetError> {
    let held = |c: &Client, (i, b): (ItemId, u32)| {
        c.held_symbols(i, b) as u64 * symbol_sizes.get(&i).copied().unwrap_or(0)
    };
    let mut total: u64 = lru.keys().map(|k| held(client, *k)).sum();
    if total <= budget {
        return Ok(0);
    }
    let mut spilled = 0;
    let mut order: Vec<((ItemId, u32), u64)> = lru.iter().map(|(k, v)| (*k, *v)).collect();
    order.sort_by_key(|(_, t)| *t);
    for (key, _) in order {
        if total <= budget / 2 {
            break;
        }
        let bytes = held(client, key);
        if let Some(syms) = client.evict(key.0, key.1) {
            store.spill(key.0, key.1, &syms)?;
            total = total.saturating_sub(bytes);
            spilled += 1;
        }
        lru.remove(&key);
    }
    Ok(spilled)
}

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
            journal_batch: crate::store::JOURNAL_BATCH,
            memory_budget: MEMORY_BUDGET,
        }
    }
}

/// Progress, for a display.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// An item's manifest: its name and size, and bytes already on disk.
    Item {
        item: ItemId,
        name: String,
        size: u64,
        resumed: u64,
    },
    /// Bytes verified and written for an item.
    Bytes { item: ItemId, bytes: u64 },
    /// An item is verified and in place.
    Complete { item: ItemId },
    /// An item failed.
    Failed { name: String, reason: String },
}

/// One item's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Its name.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Verified and in place; otherwise why not.
    pub result: Result<(), String>,
}

/// How a `get` went.
#[derive(Debug, Clone)]
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
    /// Blocks taken from a previous run's journal.
    pub resumed_blocks: u64,
    /// Partial blocks moved to disk to stay within the memory budget.
    pub spilled_blocks: u64,
}

impl GetReport {
    /// Whether every requested item verified.
    pub fn all_ok(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|o| o.result.is_ok())
    }
}

async fn send(wr: &mut OwnedWriteHalf, m: &ClientMsg) -> Result<(), NetError> {
    let mut body = Vec::new();
    m.emit(&mut body);
    let mut frame = Vec::new();
    encode_frame(&body, &mut frame);
    wr.write_all(&frame)
        .await
        .map_err(|e| NetError::Connection(e.to_string()))
}

async fn next_msg(rd: &mut OwnedReadHalf, dec: &mut FrameDecoder) -> Result<ServerMsg, NetError> {
    let mut buf = [0u8; 16 << 10];
    loop {
        if let Some(f) = dec
            .next_frame()
            .map_err(|e| NetError::Protocol(e.to_string()))?
        {
            return ServerMsg::parse(&f)
                .map_err(|e| NetError::Protocol(format!("server sent {e}")));
        }
        let n = rd
            .read(&mut buf)
            .await
            .map_err(|e| NetError::Connection(e.to_string()))?;
        if n == 0 {
            return Err(NetError::Connection("server closed the connection".into()));
        }
        dec.extend(&buf[..n]);
    }
}

async fn connect(server: SocketAddr) -> Result<(OwnedReadHalf, OwnedWriteHalf), NetError> {
    let sock = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(server))
        .await
        .map_err(|_| NetError::Connection(format!("{server}: timed out")))?
        .map_err(|e| NetError::Connection(format!("{server}: {e}")))?;
    let _ = sock.set_nodelay(true);
    Ok(sock.into_split())
}

/// Hello, then the catalogue; returns the welcome's channels too.
async fn hello_and_list(
    rd: &mut OwnedReadHalf,
    wr: &mut OwnedWriteHalf,
    dec: &mut FrameDecoder,
    list: bool,
) -> Result<(ServerMsg, Vec<CatalogueEntry>), NetError> {
    send(
        wr,
        &ClientMsg::Hello {
            name: format!("repocast-get/{}", std::process::id()),
        },
    )
    .await?;
    if list {
        send(wr, &ClientMsg::ListCatalogue).await?;
    }
    let welcome = match next_msg(rd, dec).await? {
        w @ ServerMsg::Welcome { .. } => w,
        other => {
            return Err(NetError::Protocol(format!(
                "expected welcome, got {other:?}"
            )));
        }
    };
    let mut entries = Vec::new();
    let mut more = list;
    while more {
        match next_msg(rd, dec).await? {
            ServerMsg::Catalogue {
                entries: e,
                more: m,
            } => {
                entries.extend(e);
                more = m;
            }
            other => {
                return Err(NetError::Protocol(format!(
                    "expected catalogue, got {other:?}"
                )));
            }
        }
    }
    Ok((welcome, entries))
}

/// `repocast ls`: the server's catalogue.
pub async fn list(server: SocketAddr) -> Result<Vec<CatalogueEntry>, NetError> {
    let (mut rd, mut wr) = connect(server).await?;
    let mut dec = FrameDecoder::default();
    let (_, entries) = hello_and_list(&mut rd, &mut wr, &mut dec, true).await?;
    let _ = send(&mut wr, &ClientMsg::Bye).await;
    Ok(entries)
}

/// `repocast get`: fetches the items into `opts.out`, resuming from a
/// previous run's journal, and reports every item verified or failed.
pub async fn get(
    opts: GetOptions,
    progress: Option<mpsc::UnboundedSender<Progress>>,
) -> Result<GetReport, NetError> {
    let started = std::time::Instant::now();
    let (mut rd, mut wr) = connect(opts.server).await?;
    let mut dec = FrameDecoder::default();
    let (welcome, catalogue) = hello_and_list(&mut rd, &mut wr, &mut dec, opts.all).await?;
    let ServerMsg::Welcome { channels, .. } = welcome.clone() else {
        return Err(NetError::Protocol("no welcome".into()));
    };
    let Channels {
        data: Some(data_group),
        announce: Some(ann_group),
        source,
        ..
    } = channels
    else {
        return Err(NetError::Protocol(
            "the server named no multicast groups".into(),
        ));
    };
    let src = if opts.ssm { source } else { None };
    let data = socket::receiver(&data_group, &opts.interface, src)?;
    let ann = socket::receiver(&ann_group, &opts.interface, src)?;
    let names: Vec<String> = if opts.all {
        catalogue.into_iter().map(|e| e.name).collect()
    } else {
        opts.items.clone()
    };
    let mut store = Store::new(&opts.out, opts.journal_batch)?;
    let mut client = Client::new(ClientConfig {
        seed: opts.seed,
        payloads: true,
        name: "get".into(),
        loss_reports: true,
        ..Default::default()
    });
    let mut loss = LossModel::new(opts.loss, opts.seed ^ 0x1055);
    let report = |p: Progress| {
        if let Some(tx) = &progress {
            let _ = tx.send(p);
        }
    };
    let start = std::time::Instant::now();
    client.handle_server_msg(core_now(start), welcome);
    if names.is_empty() {
        return Ok(GetReport {
            items: vec![],
            elapsed: started.elapsed(),
            stats: client.stats(),
            datagrams: 0,
            emulated_losses: 0,
            malformed: 0,
            resumed_blocks: 0,
            spilled_blocks: 0,
        });
    }
    client.request(
        core_now(start),
        names.iter().cloned().map(ItemSel::Name).collect(),
    );
    let mut outcomes: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut sizes: BTreeMap<ItemId, (String, u64)> = BTreeMap::new();
    let (mut datagrams, mut dropped, mut malformed, mut resumed) = (0u64, 0u64, 0u64, 0u64);
    let mut dbuf = vec![0u8; 65536];
    let mut abuf = vec![0u8; 65536];
    let mut tcp_buf = vec![0u8; 64 << 10];
    let mut last_heard = std::time::Instant::now();
    // Partial blocks in memory, by when they last gained a symbol.
    let mut lru: HashMap<(ItemId, u32), u64> = HashMap::new();
    let mut tick = 0u64;
    let mut spilled = 0u64;
    let mut symbol_sizes: HashMap<ItemId, u64> = HashMap::new();
    loop {
        // Drain the core: messages to the server, events to disk.
        while let Some(m) = client.poll_transmit() {
            tracing::trace!("to server: {m:?}");
            send(&mut wr, &m).await?;
        }
        while let Some(ev) = client.poll_event() {
            let now = core_now(start);
            match ev {
                ClientEvent::Welcome(_) | ClientEvent::Done => {}
                ClientEvent::Manifest(m) => {
                    sizes.insert(m.item, (m.name.clone(), m.size));
                    symbol_sizes.insert(m.item, m.fec.symbol_size as u64);
                    match store.open(&m) {
                        Ok(Resume::Complete) => {
                            let layout = repocast_core::fec::layout::Layout::new(m.size, &m.fec)
                                .map_err(|e| NetError::Protocol(e.to_string()))?;
                            report(Progress::Item {
                                item: m.item,
                                name: m.name.clone(),
                                size: m.size,
                                resumed: m.size,
                            });
                            for b in 0..layout.blocks() {
                                client.resume_block(m.item, b);
                            }
                        }
                        Ok(Resume::Blocks(bs)) => {
                            let layout = repocast_core::fec::layout::Layout::new(m.size, &m.fec)
                                .map_err(|e| NetError::Protocol(e.to_string()))?;
                            let bytes: u64 = bs.iter().map(|&b| layout.block_len(b)).sum();
                            report(Progress::Item {
                                item: m.item,
                                name: m.name.clone(),
                                size: m.size,
                                resumed: bytes,
                            });
                            resumed += bs.len() as u64;
                            for b in bs {
                                client.resume_block(m.item, b);
                            }
                        }
                        Err(e) => client.abandon(m.item, e.to_string()),
                    }
                }
                ClientEvent::BlockVerified {
                    item,
                    block,
                    offset,
                    data,
                } => {
                    lru.remove(&(item, block));
                    match store.write_block(item, block, offset, &data) {
                        Ok(()) => report(Progress::Bytes {
                            item,
                            bytes: data.len() as u64,
                        }),
                        Err(e) => client.abandon(item, e.to_string()),
                    }
                }
                ClientEvent::ItemAssembled(item) => {
                    let t = std::time::Instant::now();
                    let finished = store.finish(item);
                    tracing::debug!(
                        "item {}: every block in; synced, hashed and renamed in {:?}",
                        item.0,
                        t.elapsed()
                    );
                    let ok = match finished {
                        Ok(ok) => ok,
                        Err(e) => {
                            client.abandon(item, e.to_string());
                            continue;
                        }
                    };
                    client.confirm_item(now, item, ok);
                }
                ClientEvent::ItemComplete(item) => {
                    report(Progress::Complete { item });
                    if let Some((name, size)) = sizes.get(&item) {
                        outcomes.insert(
                            name.clone(),
                            Outcome {
                                name: name.clone(),
                                size: *size,
                                result: Ok(()),
                            },
                        );
                    }
                }
                ClientEvent::ItemFailed { item, name, reason } => {
                    let name = item
                        .and_then(|i| sizes.get(&i).map(|s| s.0.clone()))
                        .unwrap_or(name);
                    let size = item.and_then(|i| sizes.get(&i).map(|s| s.1)).unwrap_or(0);
                    report(Progress::Failed {
                        name: name.clone(),
                        reason: reason.clone(),
                    });
                    outcomes.insert(
                        name.clone(),
                        Outcome {
                            name,
                            size,
                            result: Err(reason),
                        },
                    );
                }
            }
        }
        if client.is_finished() {
            // The last events may have queued reports (the final item's
            // done): send them before leaving. (Testing for them with
            // `poll_transmit` would take one off the queue unsent, and the
            // server would wait out its report timeout and send the item
            // again.)
            while let Some(m) = client.poll_transmit() {
                tracing::trace!("to server: {m:?}");
                send(&mut wr, &m).await?;
            }
            break;
        }
        if last_heard.elapsed() > opts.idle_timeout {
            break;
        }
        let deadline = client.poll_timeout().map(|t| {
            // Capped: a deadline from the wire must not overflow the timer.
            let wait =
                Duration::from_nanos(t.as_nanos().saturating_sub(core_now(start).as_nanos()))
                    .min(Duration::from_secs(3600));
            tokio::time::Instant::now() + wait
        });
        let idle = tokio::time::Instant::now() + opts.idle_timeout;
        tokio::select! {
            r = rd.read(&mut tcp_buf) => {
                let n = r.map_err(|e| NetError::Connection(e.to_string()))?;
                if n == 0 {
                    break;
                }
                last_heard = std::time::Instant::now();
                dec.extend(&tcp_buf[..n]);
                while let Some(f) = dec.next_frame().map_err(|e| NetError::Protocol(e.to_string()))? {
                    match ServerMsg::parse(&f) {
                        Ok(m) => client.handle_server_msg(core_now(start), m),
                        Err(e) => return Err(NetError::Protocol(format!("server sent {e}"))),
                    }
                }
            }
            r = data.readable() => {
                if r.is_ok() {
                    // Drain what the socket holds (bounded) before looking
                    // at anything else: one wake-up per batch, not per packet.
                    for _ in 0..512 {
                        let Ok((n, _)) = data.try_recv_from(&mut dbuf) else { break };
                        datagrams += 1;
                        if loss.lose() {
                            dropped += 1;
                            continue;
                        }
                        match DataRepr::parse(&dbuf[..n]) {
                                                        Ok(p) => {
                                let key = (p.item, p.block.0);
                                if store.is_spilled(p.item, p.block.0) {
                                    let syms = store.unspill(p.item, p.block.0)?;
                                    client.restore(p.item, p.block.0, syms);
                                }
                                if client.handle_data(core_now(start), &p) {
                                    tick += 1;
                                    lru.insert(key, tick);
                                }
                                if tick % 256 == 0 {
                                    spilled += evict(&mut client, &mut store, &mut lru, &symbol_sizes, opts.memory_budget)?;
                                }
                            }
                            Err(_) => malformed += 1,
                        }
                    }
                    last_heard = std::time::Instant::now();
                }
            }
            r = ann.readable() => {
                if r.is_ok() {
                    for _ in 0..64 {
                        let Ok((n, _)) = ann.try_recv_from(&mut abuf) else { break };
                        datagrams += 1;
                        if loss.lose() {
                            dropped += 1;
                            continue;
                        }
                        match AnnounceRepr::parse(&abuf[..n]) {
                            Ok(a) => client.handle_announce(core_now(start), &a),
                            Err(_) => malformed += 1,
                        }
                    }
                }
            }
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => {
                client.handle_timeout(core_now(start));
            }
            _ = tokio::time::sleep_until(idle) => {}
        }
    }
    let _ = send(&mut wr, &ClientMsg::Bye).await;
    for n in &names {
        outcomes.entry(n.clone()).or_insert_with(|| Outcome {
            name: n.clone(),
            size: 0,
            result: Err(
                "not received: the server went away or nothing was heard for too long".into(),
            ),
        });
    }
    let stats = client.stats();
    Ok(GetReport {
        items: names.iter().filter_map(|n| outcomes.remove(n)).collect(),
        elapsed: started.elapsed(),
        stats,
        datagrams,
        emulated_losses: dropped,
        malformed,
        resumed_blocks: resumed,
        spilled_blocks: spilled,
    })
}
