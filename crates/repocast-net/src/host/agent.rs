//! The host's shared receiver (`repocast host-receiver`): one process
//! that runs the requests of every `get` of a user on this host from one
//! server, on one pair of multicast sockets (see [`super`]).
//!
//! One task (the hub) owns the endpoints and the shared sockets: it feeds
//! each endpoint what its TLS connection delivers and the datagrams it
//! wants, wakes it at its deadline, and after every call hands its frames
//! to its connection's writer and its progress to its `get`. Each `get`
//! has a task of its own that reads its request, connects to the server
//! (the same TLS and pinning as a `get` on its own), takes copies of what
//! the running requests have verified of its items (`crate::store::share`),
//! builds the same endpoint, and relays what the hub tells it.

use super::budget::FileBudget;
use super::msg::{self, Ask, Order, Tell};
use super::{HostKey, IDLE_EXIT, same_user};
use crate::client::{self, Groups, Progress, readable};
use crate::jobs::{HandsOutJobs, Work};
use crate::socket::{self, Interface};
use crate::store::{Source, Store};
use crate::{NetError, core_now};
use repocast_core::ItemId;
use repocast_core::auth::Verified;
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::ClientEndpoint;
use repocast_core::endpoint::select;
use repocast_core::loss::LossSpec;
use repocast_core::wire::DataRepr;
use repocast_core::wire::control::Channels;
use std::time::Instant as StdInstant;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::oneshot;

/// Most items a request's list of wanted items holds for handing it only
/// their packets (a binary search per packet); a request wanting more
/// takes every packet, as it would alone past the kernel filter's bound
/// (the same, `socket::MAX_FILTER_ITEMS`). The list is made again
/// whenever the request's items change, so its length bounds that cost.
const ROUTE_ITEMS: usize = socket::MAX_FILTER_ITEMS;

/// How long a connected `get` may take to send its request.
const ASK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the per-`get` tasks tell the hub.
enum HubMsg {
    /// A request ready to run.
    New(Box<Slot>),
    /// Bytes from a request's TLS connection.
    Stream(u64, Vec<u8>),
    /// Its TLS connection closed.
    Closed(u64),
    /// Its `get` asks it to stop.
    Stop(u64),
    /// Its `get` went away: stop the request, nobody hears its end.
    Gone(u64),
    /// A request about to start asks what the running ones can lend it
    /// of these items.
    Lend(Vec<String>, oneshot::Sender<Vec<Source>>),
}

/// One `get`'s request.
struct Slot {
    id: u64,
    ep: ClientEndpoint<Store>,
    started: StdInstant,
    to_server: UnboundedSender<Vec<u8>>,
    to_get: UnboundedSender<Tell>,
    /// On the shared groups (after its welcome).
    joined: bool,
    /// The items it wants, sorted (None: every item).
    want: Option<Vec<ItemId>>,
    /// Datagrams handed to it.
    datagrams: u64,
}

/// A host receiver that holds its name, ready to [`Receiver::run`].
pub struct Receiver {
    listener: UnixListener,
    key: HostKey,
    files: FileBudget,
}

impl Receiver {
    /// Takes `key`'s name: `None` if another receiver already holds it.
    /// Needs a tokio runtime.
    pub fn bind(key: HostKey) -> Result<Option<Receiver>, NetError> {
        let addr = key
            .address()
            .map_err(|e| NetError::socket("host receiver name", e))?;
        let l = match std::os::unix::net::UnixListener::bind_addr(&addr) {
            Ok(l) => l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Ok(None),
            Err(e) => return Err(NetError::socket("bind the host receiver socket", e)),
        };
        l.set_nonblocking(true)
            .map_err(|e| NetError::socket("host receiver socket", e))?;
        let listener =
            UnixListener::from_std(l).map_err(|e| NetError::socket("host receiver socket", e))?;
        let files = FileBudget::from_limit();
        Ok(Some(Receiver {
            listener,
            key,
            files,
        }))
    }

    /// Shares out `files` open files among its requests instead of what
    /// the open-file limit leaves ([`FileBudget::from_limit`]).
    pub fn with_file_budget(mut self, files: u64) -> Self {
        self.files = FileBudget::new(files);
        self
    }

    /// Serves the `get`s that come until none has come for [`IDLE_EXIT`].
    pub async fn run(self) -> Result<(), NetError> {
        serve(self.listener, self.key, self.files).await
    }
}

/// `repocast host-receiver`: serves `key`'s `get`s until none has come
/// for [`IDLE_EXIT`]; returns at once if another receiver holds the name.
pub async fn run(key: HostKey) -> Result<(), NetError> {
    match Receiver::bind(key)? {
        Some(r) => r.run().await,
        None => Ok(()),
    }
}

async fn serve(listener: UnixListener, key: HostKey, files: FileBudget) -> Result<(), NetError> {
    tracing::debug!("open files for requests: {}", files.total());
    let interface = Interface::parse(key.interface.as_deref())?;
    let start = StdInstant::now();
    // One memory of checked signatures for every request here: each
    // announcement's signature is checked once, not once per request.
    let verified = Verified::new();
    let (hub_tx, hub_rx) = unbounded_channel();
    let accept = async {
        let mut next_id = 0u64;
        loop {
            let Ok((s, _)) = listener.accept().await else {
                // Out of descriptors, say: not a busy loop.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            };
            if !same_user(&s) {
                continue;
            }
            next_id += 1;
            tokio::spawn(serve_get(
                s,
                next_id,
                hub_tx.clone(),
                start,
                verified.clone(),
                files.clone(),
            ));
        }
    };
    tokio::select! {
        r = hub(hub_rx, &interface, key.ssm, start) => r,
        () = accept => Ok(()),
    }
}

/// One `get`: its request, its connection to the server, its endpoint
/// handed to the hub, then what the hub tells it relayed until the end.
async fn serve_get(
    s: UnixStream,
    id: u64,
    hub: UnboundedSender<HubMsg>,
    start: StdInstant,
    verified: Verified,
    files: FileBudget,
) {
    let (rd, mut wr) = s.into_split();
    let mut rd = BufReader::new(rd);
    // A `get` asks at once; a peer that says nothing is not kept waiting for.
    let Ok(Ok(Some(ask))) = tokio::time::timeout(ASK_WAIT, msg::read::<_, Ask>(&mut rd)).await
    else {
        return;
    };
    let opts = match ask.options() {
        Ok(o) => o,
        Err(e) => return drop(msg::write(&mut wr, &Tell::Refused(e)).await),
    };
    // Held until this request is over: what it may hold open is kept
    // for it (`budget`).
    let need = crate::fd_limit::request_files(opts.all, &opts.items);
    let Some(lease) = files.take(need) else {
        let (taken, _) = files.counts();
        let why = format!(
            "its open files ({taken} of {} kept for the requests it runs) leave no room for {need} more",
            files.total()
        );
        tracing::info!("request {id} refused: {why}");
        return drop(msg::write(&mut wr, &Tell::Refused(why)).await);
    };
    let mut lease = Some(lease);
    let started = StdInstant::now();
    let made = match client::connect(opts.server, &opts.trust).await {
        Ok((tls, key)) => {
            // What the requests running here have of its items, copied
            // into its folder (off the hub's thread) before it asks.
            let (tx, rx) = oneshot::channel();
            // By exact name: what a pattern names is known only once
            // the catalogue is in.
            let names = if opts.all {
                Vec::new()
            } else {
                let exact = opts.items.iter().filter(|s| !select::is_pattern(s));
                exact.cloned().collect()
            };
            let lent = match hub.send(HubMsg::Lend(names, tx)) {
                Ok(()) => rx.await.unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            let now = core_now(start);
            tokio::task::spawn_blocking(move || client::endpoint(&opts, key, now, &lent, verified))
                .await
                .map_err(NetError::from)
                .and_then(|made| made)
                .map(|ep| (tls, ep))
        }
        Err(e) => Err(e),
    };
    let (tls, ep) = match made {
        Ok(m) => m,
        Err(e) => return drop(msg::write(&mut wr, &Tell::Error(e.to_string())).await),
    };
    let (mut tls_rd, mut tls_wr) = tokio::io::split(tls);
    let (to_server, mut frames) = unbounded_channel::<Vec<u8>>();
    let (to_get, mut tells) = unbounded_channel();
    let h = hub.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match tls_rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if h.send(HubMsg::Stream(id, buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = h.send(HubMsg::Closed(id));
    });
    let h = hub.clone();
    tokio::spawn(async move {
        while let Some(f) = frames.recv().await {
            let more = !frames.is_empty();
            if crate::tls::write_frame(&mut tls_wr, &f, more)
                .await
                .is_err()
            {
                let _ = h.send(HubMsg::Closed(id));
                return;
            }
        }
        let _ = tls_wr.shutdown().await;
    });
    let slot = Slot {
        id,
        ep,
        started,
        to_server,
        to_get,
        joined: false,
        want: None,
        datagrams: 0,
    };
    if hub.send(HubMsg::New(Box::new(slot))).is_err() {
        return;
    }
    // After its request a `get` says only stop; anything else (its end of
    // the socket closed) means it is gone. Read on a task of its own (a
    // line read is not safe to cancel); a word for a request already
    // over finds no slot.
    let h = hub.clone();
    tokio::spawn(async move {
        while let Ok(Some(Order::Stop)) = msg::read::<_, Order>(&mut rd).await {
            let _ = h.send(HubMsg::Stop(id));
        }
        let _ = h.send(HubMsg::Gone(id));
    });
    while let Some(t) = tells.recv().await {
        let last = matches!(t, Tell::Done(_) | Tell::Refused(_) | Tell::Error(_));
        if last {
            // Over, its files closed: its room is free before its `get`
            // hears the end.
            lease.take();
        }
        if msg::write(&mut wr, &t).await.is_err() || last {
            if !last {
                let _ = hub.send(HubMsg::Gone(id));
            }
            return;
        }
    }
}

/// The shared groups and the requests on them.
struct Hub<'a> {
    interface: &'a Interface,
    ssm: bool,
    start: StdInstant,
    slots: Vec<Slot>,
    groups: Option<(Channels, Groups)>,
    /// What the requests want changed since the filter was last set.
    stale: bool,
    /// The item filter on the shared data socket (None: none set on this
    /// socket yet), so an unchanged union is not set again.
    installed: Option<Option<Vec<ItemId>>>,
    /// Blocks the requests decode, and items they put in place, off this
    /// task, tagged with their slot.
    jobs: crate::jobs::Jobs<(u64, Work)>,
    /// The announcements read together (`Hub::announcements`).
    announced: crate::datagrams::Datagrams,
}

async fn hub(
    mut rx: UnboundedReceiver<HubMsg>,
    interface: &Interface,
    ssm: bool,
    start: StdInstant,
) -> Result<(), NetError> {
    let mut h = Hub {
        interface,
        ssm,
        start,
        slots: Vec::new(),
        groups: None,
        stale: false,
        installed: None,
        jobs: crate::jobs::Jobs::new(),
        announced: crate::datagrams::Datagrams::default(),
    };
    let mut dgram = vec![0u8; 65536];
    let mut idle_since = Some(tokio::time::Instant::now());
    let mut alarm = crate::Alarm::default();
    loop {
        trade(&mut h.slots, &mut h.jobs, start);
        if h.service()? {
            tokio::task::yield_now().await;
        }
        if h.slots.is_empty() {
            let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= IDLE_EXIT {
                return Ok(());
            }
        } else {
            idle_since = None;
        }
        let due = h.slots.iter().filter_map(|s| s.ep.poll_timeout()).min();
        let deadline = (alarm.target(due, start)).or(idle_since.map(|t| t + IDLE_EXIT));
        let now = || core_now(start);
        tokio::select! {
            m = rx.recv() => match m {
                None => return Ok(()),
                Some(HubMsg::New(s)) => h.slots.push(*s),
                Some(HubMsg::Stream(id, b)) => {
                    if let Some(s) = h.slot(id) { s.ep.handle_stream(now(), &b) }
                }
                Some(HubMsg::Closed(id)) => {
                    if let Some(s) = h.slot(id) { s.ep.handle_close(now()) }
                }
                // Stopped, a request keeps what it received; it leaves
                // once its blocks out being decoded, and its items out
                // being put in place, are back (`service`).
                Some(HubMsg::Stop(id)) => {
                    if let Some(s) = h.slot(id) { s.ep.stop(client::STOPPED) }
                }
                Some(HubMsg::Gone(id)) => {
                    if let Some(s) = h.slot(id) { s.ep.stop("its get went away") }
                }
                Some(HubMsg::Lend(names, reply)) => {
                    let _ = reply.send(h.lend(&names));
                }
            },
            Some((id, job)) = h.jobs.done() => {
                if let Some(s) = h.slot(id) { s.ep.work_done(now(), job) }
            }
            _ = readable(h.groups.as_ref().map(|g| &g.1.data)) => h.data(&mut dgram),
            _ = readable(h.groups.as_ref().map(|g| &g.1.announce)) => h.announcements(&mut dgram),
            _ = crate::sleep_until(deadline) => {
                // What the host has received goes in first: a report
                // falling due now counts it (read after its end, a
                // transmission's last packets were asked for again).
                h.data(&mut dgram);
                let t = now();
                for s in &mut h.slots {
                    if s.ep.poll_timeout().is_some_and(|d| d <= t) {
                        s.ep.handle_timeout(t);
                    }
                }
            }
        }
    }
}

/// Hands out every request's blocks ready to decode and items ready to
/// put in place, and takes back those done (a request gone meanwhile
/// drops its own).
fn trade(slots: &mut [Slot], jobs: &mut crate::jobs::Jobs<(u64, Work)>, start: StdInstant) {
    while let Some((id, job)) = jobs.try_done() {
        if let Some(s) = slots.iter_mut().find(|s| s.id == id) {
            s.ep.work_done(core_now(start), job);
        }
    }
    for s in slots {
        while let Some(job) = s.ep.poll_work() {
            jobs.start((s.id, job));
        }
    }
}

impl Hub<'_> {
    fn slot(&mut self, id: u64) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.id == id)
    }

    /// For each of `names`, the most any running request can lend.
    fn lend(&self, names: &[String]) -> Vec<Source> {
        names
            .iter()
            .filter_map(|n| {
                self.slots
                    .iter()
                    .filter_map(|s| s.ep.store().lend(n))
                    .max_by_key(|src| src.blocks.len())
            })
            .collect()
    }

    /// Reads what the announcement group holds and hands it to every
    /// request, their signatures checked as one batch first (each
    /// request's, for what bears on it; the host's requests share one
    /// memory of checked signatures, so each is checked once), as a `get`
    /// on its own does.
    fn announcements(&mut self, dgram: &mut [u8]) {
        let Some((_, g)) = self.groups.as_mut() else {
            return;
        };
        self.announced.read_from(&mut g.announce, dgram);
        let now = core_now(self.start);
        for s in self.slots.iter_mut().filter(|s| s.joined) {
            s.ep.prepare_announcements(self.announced.iter());
        }
        for d in self.announced.iter() {
            for s in self.slots.iter_mut().filter(|s| s.joined) {
                s.datagrams += 1;
                s.ep.handle_datagram(now, Channel::Announce, d);
            }
        }
        trade(&mut self.slots, &mut self.jobs, self.start);
    }

    /// Reads a batch from the shared data group and hands each datagram
    /// to the requests that want its item.
    fn data(&mut self, dgram: &mut [u8]) {
        let start = self.start;
        let Some((_, g)) = self.groups.as_mut() else {
            return;
        };
        let (slots, jobs) = (&mut self.slots, &mut self.jobs);
        crate::datagrams::drain(&mut g.data, dgram, |bytes| {
            let item = DataRepr::peek_item(bytes);
            let now = core_now(start);
            for s in slots.iter_mut().filter(|s| s.joined) {
                let wants = match (&s.want, item) {
                    (Some(w), Some(i)) => w.binary_search(&i).is_ok(),
                    _ => true,
                };
                if wants {
                    s.datagrams += 1;
                    s.ep.handle_datagram(now, Channel::Data, bytes);
                }
            }
            // Blocks ready go out at once, not only between batches.
            trade(slots, jobs, start);
        });
    }

    /// After any input: every request's frames to its server connection,
    /// its progress to its `get`, its end; then the shared filter.
    fn service(&mut self) -> Result<bool, NetError> {
        let mut out = Vec::new();
        let mut sent = false;
        let mut i = 0;
        while i < self.slots.len() {
            let mut changed = false;
            let mut join = None;
            {
                let s = &mut self.slots[i];
                while s.ep.poll_transmit(&mut out) {
                    sent = true;
                    if s.to_server.send(std::mem::take(&mut out)).is_err() {
                        s.ep.handle_close(core_now(self.start));
                    }
                }
                while let Some(ev) = s.ep.poll_event() {
                    match ev {
                        Progress::Join(ch) => join = Some(ch),
                        Progress::Bytes { .. } => {}
                        _ => changed = true,
                    }
                    if let Some(t) = Tell::of_progress(ev) {
                        let _ = s.to_get.send(t);
                    }
                }
            }
            if let Some(ch) = join {
                if let Err(why) = self.join(i, ch) {
                    let s = self.slots.remove(i);
                    let _ = s.to_get.send(Tell::Refused(why));
                    self.stale = true;
                    continue;
                }
                // On the groups, with the filter letting its items in
                // (it wants every item until its names have ids): its
                // request goes out, on this slot's next turn (now).
                self.refilter()?;
                self.slots[i].ep.joined(core_now(self.start));
                continue;
            }
            let s = &mut self.slots[i];
            if changed {
                let want = s.ep.wanted_items(ROUTE_ITEMS);
                if want != s.want {
                    s.want = want;
                    self.stale = true;
                }
            }
            // A request that ended short waits for its blocks out being
            // decoded (milliseconds): what they verify is written, the
            // rest kept (`ClientEndpoint::decoded`); and for its items
            // out being put in place, so its report says how they ended.
            if s.ep.is_finished() && s.ep.decodes_away() == 0 && s.ep.finishes_away() == 0 {
                let s = self.slots.remove(i);
                let mut rep = client::report(&s.ep, s.started, s.datagrams, 0);
                rep.shared = true;
                rep.lent_blocks = s.ep.store().lent_blocks();
                let _ = s.to_get.send(Tell::Done(Box::new(rep)));
                self.stale = true;
                continue;
            }
            i += 1;
        }
        self.refilter()?;
        Ok(sent)
    }

    /// Puts request `i` on the groups its welcome names: joins them if
    /// none are joined (or nobody is on the old ones), refuses if others
    /// are receiving different ones (the server changed them).
    fn join(&mut self, i: usize, ch: Channels) -> Result<(), String> {
        let same = self.groups.as_ref().is_some_and(|(c, _)| *c == ch);
        if !same {
            if self.slots.iter().any(|s| s.joined) {
                return Err("the server's groups differ from those this host is receiving".into());
            }
            let (Some(data), Some(announce)) = (ch.data, ch.announce) else {
                return Err(NetError::NoGroups.to_string());
            };
            let src = if self.ssm { ch.source } else { None };
            let g = Groups::join(&data, &announce, self.interface, src, LossSpec::NONE, 0)
                .map_err(|e| e.to_string())?;
            self.groups = Some((ch, g));
            self.installed = None;
        }
        // The union now counts this request, whatever it wants (its want
        // may not have changed since before its welcome).
        self.slots[i].joined = true;
        self.stale = true;
        Ok(())
    }

    /// Keeps the shared data socket's kernel filter to the union of what
    /// the requests on it want.
    fn refilter(&mut self) -> Result<(), NetError> {
        if !self.stale {
            return Ok(());
        }
        let Some((_, g)) = self.groups.as_ref() else {
            return Ok(());
        };
        self.stale = false;
        let mut union = Some(Vec::new());
        for s in self.slots.iter().filter(|s| s.joined) {
            match (&mut union, &s.want) {
                (Some(u), Some(w)) => u.extend_from_slice(w),
                _ => union = None,
            }
        }
        if let Some(u) = union.as_mut() {
            u.sort_unstable();
            u.dedup();
        }
        if self.installed.as_ref() != Some(&union) {
            socket::filter_items(g.data.socket(), union.as_deref())?;
            self.installed = Some(union);
        }
        Ok(())
    }
}
