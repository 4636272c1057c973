//! `repocast push`: the core's [`PushEndpoint`] on real sockets.
//!
//! One task owns the endpoint. It sends what `poll_transmit` gives (signed
//! catalogue pieces to the announcement group, Fcast passes to the data
//! group, paced by the core), hands the block encoders the core wants
//! prepared to the blocking pool (`crate::jobs`), sleeps until the
//! endpoint's next deadline, and publishes counters for `/metrics`. With
//! `watch` on, changes in the folder (inotify through `notify`, or SIGHUP)
//! trigger a rescan a second after things go quiet (at most five seconds
//! after the first change: `rescan`); a changed file set goes
//! out as a new catalogue version (numbered by the wall clock in
//! milliseconds, so a restarted pusher's versions are newer still). It
//! stops on [`PushHandle::stop`] or once the target redundancy is sent.

pub mod options;
pub mod popularity;
pub mod rescan;
pub mod resume;
pub mod spool;

use crate::metrics::{self, Shared, Snapshot};
use crate::repo::{FileSource, Repository, STATE_DIR};
use crate::{NetError, core_now, keys, socket};
pub use options::{PushOptions, PushScheduler};
use repocast_core::auth::PublicKey;
use repocast_core::endpoint::Dest;
use repocast_core::endpoint::pack::PushSet;
use repocast_core::endpoint::push::{PushConfig, PushEndpoint, PushItem, PushStats, plan_set};
use repocast_core::fec::layout::BlockGrowth;
use repocast_core::profile::push_blocks;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::ResumePoint;
use repocast_core::wire::FecParams;
use rescan::{RESCAN_QUIET, Rescan};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// A running pusher.
pub struct PushHandle {
    /// One line for the operator.
    pub banner: String,
    /// The signing key's public half (what listeners pin).
    pub key: PublicKey,
    /// Where metrics listen, if on.
    pub metrics_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<PushStats, NetError>>,
    shared: Shared,
}

impl PushHandle {
    /// Stops the pusher and returns its counters.
    pub async fn stop(self) -> Result<PushStats, NetError> {
        let _ = self.shutdown.send(true);
        self.task.await.map_err(NetError::Task)?
    }

    /// Waits until the pusher stops on its own (the target redundancy).
    pub async fn finished(&mut self) -> Result<PushStats, NetError> {
        (&mut self.task).await.map_err(NetError::Task)?
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Snapshot {
        metrics::read(&self.shared)
    }
}

/// The file set (small files packed), its weights and a source over it.
struct Scan {
    items: PushSet,
    scheduler: SchedulerKind,
    source: FileSource,
    skipped: usize,
    bytes: u64,
}

/// Scans the folder (hashing the files named in `fresh` whatever the hash
/// cache says) and plans the set.
fn scan(
    opts: &PushOptions,
    fec: &FecParams,
    growth: Option<BlockGrowth>,
    fresh: &HashSet<String>,
) -> Result<Scan, NetError> {
    let first = scan_fresh(opts, fec, growth, fresh)?;
    if first.items.left_out.is_empty() {
        return Ok(first);
    }
    // Files that did not read as the scan hashed them: hashed afresh (the
    // cache cannot tell a write in the same tick of the file system's
    // clock as the scan that cached it) and planned again once. Those
    // still changing are the next scan's.
    let fresh: HashSet<String> = (first.items.left_out.iter())
        .filter_map(|&i| Some(first.items.files.get(i)?.info.name.clone()))
        .chain(fresh.iter().cloned())
        .collect();
    let again = scan_fresh(opts, fec, growth, &fresh)?;
    if !again.items.left_out.is_empty() {
        tracing::warn!(
            "{} files changed while their packs were made; sent alone until the next scan, in {RESCAN_QUIET:?}",
            again.items.left_out.len()
        );
    }
    Ok(again)
}

fn scan_fresh(
    opts: &PushOptions,
    fec: &FecParams,
    growth: Option<BlockGrowth>,
    fresh: &HashSet<String>,
) -> Result<Scan, NetError> {
    let repo = Repository::scan_fresh(&opts.dir, fec, growth, fresh)?;
    let names: Vec<&str> = repo.files.iter().map(|f| f.info.name.as_str()).collect();
    // Popularity weights, by file: MAD's, and what packs are sized by
    // (visitors after a few files each), whichever the scheduler.
    let weights = match &opts.popularity {
        Some(p) => {
            let (w, skipped) = popularity::read(p)?;
            if skipped > 0 {
                tracing::warn!("{}: {skipped} lines skipped", p.display());
            }
            popularity::weights_for(&names, &w)
        }
        None => Vec::new(),
    };
    let scheduler = match opts.scheduler {
        PushScheduler::Flat => SchedulerKind::Flat,
        PushScheduler::Mad => SchedulerKind::Mad {
            weights: match weights.is_empty() {
                true => popularity::weights_for(&names, &HashMap::new()),
                false => weights.clone(),
            },
        },
    };
    let files = (repo.files.iter())
        .map(|f| PushItem {
            info: f.info.clone(),
            mode: f.mode,
            mtime: (f.mtime_ns / 1_000_000_000) as i64,
        })
        .collect::<Vec<_>>();
    let mut source = repo.source();
    let items = plan_set(fec, opts.packs, &weights, &scheduler, files, &mut source)?;
    Ok(Scan {
        items,
        scheduler,
        source,
        skipped: repo.skipped,
        bytes: repo.files.iter().map(|f| f.size).sum(),
    })
}

/// Names kept to hash afresh at the next scan, at most (a copy of more
/// files at once rehashes only those the hash cache does not know).
const MAX_FRESH: usize = 100_000;

/// A version number above `last`: the wall clock in milliseconds.
fn next_version(last: u64) -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    ms.max(last + 1)
}

/// Scans the folder, binds the sockets and starts pushing.
pub async fn start(opts: PushOptions) -> Result<PushHandle, NetError> {
    opts.validate()?;
    let (symbol_size, sizing) = socket::symbol_size(
        opts.symbol_size,
        &opts.data_group,
        &opts.interface,
        false,
        false,
    );
    let (max_block_symbols, growth) = push_blocks(opts.code, opts.max_block);
    let fec = FecParams {
        code: opts.code,
        symbol_size,
        max_block_symbols,
    };
    let o = opts.clone();
    let mut first = tokio::task::spawn_blocking(move || scan(&o, &fec, growth, &HashSet::new()))
        .await
        .map_err(NetError::Task)??;
    let identity = match &opts.key {
        Some(path) => keys::load_or_create(path)?,
        None => keys::generate_identity()?,
    };
    let key = identity.public();
    let mut cfg = PushConfig::shipped(
        &fec,
        growth,
        first.scheduler.clone(),
        opts.seed,
        opts.rate_bps,
        opts.data_group.is_ipv6(),
        opts.redundancy,
    )?;
    cfg.server.push_pass_odds = options::pass_odds(opts.pass_loss);
    cfg.server.sign_symbols = opts.sign_symbols;
    cfg.server.sign_copies = opts.sign_copies;
    (first.source.spool, cfg.server.push_spool_bytes) = open_spool(&opts);
    let start = std::time::Instant::now();
    let version = next_version(0);
    let n = first.items.files.len();
    let packs = first.items.packs.len();
    let left_out = first.items.left_out.clone();
    let mut endpoint = PushEndpoint::new(core_now(start), cfg, identity, version, first.items)?;
    // A run before this one on the folder: its items' ids go on.
    let record = resume::record_path(&opts.dir, &opts.data_group);
    let went_on = endpoint.resume(&resume::load(&record));
    let (data, announce) = socket::senders(
        &opts.data_group,
        &opts.announce_group,
        &opts.interface,
        opts.ttl,
        opts.source,
        opts.rate_bps,
    )?;
    let shared: Shared = Arc::new(Mutex::new(Snapshot {
        items: n,
        scheme: "push".into(),
        ..Default::default()
    }));
    let metrics_addr = metrics::start(opts.metrics, &shared).await?;
    let banner = format!(
        "repocast push {}: {n} files{}, {:.1} MiB{}{}; data {}, catalogue {}{}, ttl {}, rate {:.1} Mbit/s, scheduler {}, code {}, {symbol_size}-byte symbols ({sizing}), {}{}; version {version}; key {key}",
        opts.dir.display(),
        match packs {
            0 => String::new(),
            1 => " (small ones in 1 pack)".into(),
            k => format!(" (small ones in {k} packs)"),
        },
        first.bytes as f64 / (1 << 20) as f64,
        match first.skipped {
            0 => String::new(),
            k => format!(" ({k} unreadable skipped)"),
        },
        match went_on {
            0 => String::new(),
            k => format!(" ({k} going on from the last run's symbol ids)"),
        },
        opts.data_group,
        opts.announce_group,
        source_note(&opts),
        opts.ttl,
        opts.rate_bps as f64 / 1e6,
        match opts.scheduler {
            PushScheduler::Mad if opts.popularity.is_some() => "mad (by popularity)",
            PushScheduler::Mad => "mad (no popularity: flat)",
            PushScheduler::Flat => "flat",
        },
        opts.code.name(),
        match opts.redundancy {
            Some(r) => format!("stop after {r}x each file"),
            None => "until stopped".into(),
        },
        metrics_addr.map_or(String::new(), |a| format!(", metrics http://{a}/metrics")),
    );
    let (tx, rx) = watch::channel(false);
    let pump = Pump {
        endpoint,
        source: first.source,
        data,
        announce,
        opts,
        shared: shared.clone(),
        start,
        spool_errors: 0,
        left_out,
        rescan: Rescan::default(),
        fresh: HashSet::new(),
        record,
        saving: None,
        save_errors: 0,
    };
    let task = tokio::spawn(pump.run(rx));
    Ok(PushHandle {
        banner,
        key,
        metrics_addr,
        shutdown: tx,
        task,
        shared,
    })
}

struct Pump {
    endpoint: PushEndpoint,
    source: FileSource,
    data: tokio::net::UdpSocket,
    announce: tokio::net::UdpSocket,
    opts: PushOptions,
    shared: Shared,
    start: std::time::Instant,
    /// Spool failures already logged.
    spool_errors: u64,
    /// Files the version on air sends alone that its plan meant to pack
    /// (they changed while it read them): while there are any, the folder
    /// is scanned again.
    left_out: Vec<usize>,
    /// When the folder is scanned again.
    rescan: Rescan,
    /// Files to hash afresh at the next scan, whatever the hash cache says
    /// (it cannot tell a write in the same tick of the file system's clock
    /// as the scan that cached it): those the folder's watch saw change (up
    /// to [`MAX_FRESH`]), and those whose items failed.
    fresh: HashSet<String>,
    /// Where the items' next symbol ids are kept for the next run
    /// (`resume`), the write in progress, and the failures logged.
    record: std::path::PathBuf,
    saving: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    save_errors: u64,
}

impl Pump {
    async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> Result<PushStats, NetError> {
        let (change_tx, mut change_rx) = mpsc::channel::<Vec<String>>(256);
        // Kept alive for the run: dropping it stops the watch.
        let _watcher = if self.opts.watch {
            Some(watch_dir(&self.opts.dir, change_tx.clone())?)
        } else {
            None
        };
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| NetError::socket("SIGHUP handler", e))?;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut save = tokio::time::interval(resume::SAVE_EVERY);
        if !self.left_out.is_empty() {
            self.rescan.changed(tokio::time::Instant::now());
        }
        let mut buf = Vec::with_capacity(2048);
        let mut alarm = crate::Alarm::default();
        let mut prep = crate::jobs::Jobs::new();
        loop {
            self.drain(&mut buf, &prep).await;
            if self.endpoint.is_finished() {
                break;
            }
            let deadline = alarm.target(self.endpoint.poll_timeout(), self.start);
            tokio::select! {
                _ = crate::sleep_until(deadline) => {}
                Some(job) = prep.done() => self.endpoint.prepared(job),
                Some(names) = change_rx.recv() => {
                    if self.fresh.len() < MAX_FRESH {
                        self.fresh.extend(names);
                    }
                    self.rescan.changed(tokio::time::Instant::now());
                }
                _ = hup.recv() => self.rescan.now(tokio::time::Instant::now()),
                _ = crate::sleep_until(self.rescan.due()) => {
                    self.rescan.scanned();
                    if self.scan_again().await {
                        self.rescan.changed(tokio::time::Instant::now());
                    }
                }
                _ = tick.tick() => self.publish(),
                _ = save.tick() => self.save(false).await,
                _ = shutdown.changed() => break,
            }
        }
        self.save(true).await;
        self.publish();
        Ok(self.endpoint.stats())
    }

    async fn drain(
        &mut self,
        buf: &mut Vec<u8>,
        prep: &crate::jobs::Jobs<repocast_core::server::encoders::PrepareJob>,
    ) {
        let now = core_now(self.start);
        while let Some(dest) = self.endpoint.poll_transmit(now, &mut self.source, buf) {
            // Encoders prepared on another core, not in the pump.
            while let Some(job) = self.endpoint.poll_prepare() {
                prep.start(job);
            }
            let (sock, to) = match dest {
                Dest::Announce => (&self.announce, self.opts.announce_group),
                _ => (&self.data, self.opts.data_group),
            };
            crate::server::send_datagram(sock, buf, to).await;
        }
        // Files that no longer read as scanned: scanned again, hashed
        // afresh whatever the hash cache says.
        while let Some(f) = self.endpoint.poll_failed() {
            tracing::warn!(
                "not sending {}: {}; scanning again",
                f.names.join(", "),
                f.reason
            );
            self.fresh.extend(f.names);
            self.rescan.changed(tokio::time::Instant::now());
        }
    }

    /// Rescans the folder; a changed file set becomes a new version.
    /// Returns whether to scan again (the folder was changing: the scan
    /// failed, or files changed while their packs were made).
    async fn scan_again(&mut self) -> bool {
        // The FEC parameters the pusher started with (`--block-symbols`
        // or growth), from its settings.
        let server = &self.endpoint.config().server;
        let (o, fec, growth) = (self.opts.clone(), server.base_fec(), server.block_growth);
        let fresh = self.fresh.clone();
        let scanned = tokio::task::spawn_blocking(move || scan(&o, &fec, growth, &fresh)).await;
        let s = match scanned.map_err(NetError::Task).and_then(|r| r) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("rescan: {e}; again in {RESCAN_QUIET:?}");
                return true;
            }
        };
        self.fresh.clear();
        let again = !s.items.left_out.is_empty();
        let key = |i: &PushItem| (i.info.name.clone(), i.info.hash, i.mode, i.mtime);
        let now_set: Vec<_> = s.items.files.iter().map(key).collect();
        if now_set == self.endpoint.items().iter().map(key).collect::<Vec<_>>()
            && s.items.left_out == self.left_out
        {
            return again;
        }
        let left_out = s.items.left_out.clone();
        let version = next_version(self.endpoint.version());
        self.endpoint.set_scheduler(s.scheduler);
        let n = s.items.files.len();
        match self
            .endpoint
            .replace(core_now(self.start), version, s.items)
        {
            Ok(()) => {
                let spool = self.source.spool.take();
                self.source = s.source;
                self.source.spool = spool;
                self.left_out = left_out;
                tracing::info!("catalogue version {version}: {n} files");
            }
            Err(e) => tracing::warn!("new version: {e}"),
        }
        again
    }

    /// Writes where the items stand for the next run, off the pump (a
    /// write still going is left to finish, unless `last`: then it is
    /// awaited and this one too).
    async fn save(&mut self, last: bool) {
        if let Some(w) = self.saving.take() {
            if !w.is_finished() && !last {
                self.saving = Some(w);
                return;
            }
            self.saved(w.await);
        }
        let bytes = ResumePoint::encode_all(&self.endpoint.resume_points());
        let path = self.record.clone();
        let w = tokio::task::spawn_blocking(move || crate::state_file::write_whole(&path, bytes));
        match last {
            true => self.saved(w.await),
            false => self.saving = Some(w),
        }
    }

    fn saved(&mut self, r: Result<std::io::Result<()>, tokio::task::JoinError>) {
        if let Ok(Err(e)) = r {
            if self.save_errors == 0 {
                tracing::warn!(
                    "cannot keep the symbol ids for the next run in {}: {e}",
                    self.record.display()
                );
            }
            self.save_errors += 1;
        }
    }

    fn publish(&mut self) {
        // Counted per catalogue version (a new version starts at zero).
        let errors = self.endpoint.server().push_spool_errors();
        if errors > self.spool_errors {
            tracing::warn!(
                "the spool failed ({errors} times); repair symbols made ahead are held in memory instead"
            );
        }
        self.spool_errors = errors;
        let snap = Snapshot {
            stats: self.endpoint.server().stats(),
            items: self.endpoint.items().len(),
            uptime_s: self.start.elapsed().as_secs_f64(),
            push: Some((self.endpoint.version(), self.endpoint.stats())),
            // Counted per catalogue version, like the spool's errors.
            prepare_jobs: self.endpoint.server().prepare_jobs(),
            scheme: "push".into(),
            ..Default::default()
        };
        if let Ok(mut g) = self.shared.lock() {
            *g = snap;
        }
    }
}

/// The banner's word on where the packets come from: the `--source`
/// given, or the interface's address the kernel sends from, with the
/// `listen --source` that hears only this pusher when the source was
/// named or the groups are source-specific (where listeners need it).
fn source_note(opts: &PushOptions) -> String {
    let named = opts.source.is_some();
    let ssm = crate::settings::is_ssm_range(opts.data_group.ip());
    match opts
        .source
        .or_else(|| socket::default_source(&opts.data_group, &opts.interface))
    {
        Some(s) if named || ssm => format!(", from {s} (listeners: listen --source {s})"),
        Some(s) => format!(", from {s}"),
        None => String::new(),
    }
}

/// The spool for `opts`, and the bytes the core may keep in it (none if
/// it is off or could not be made: a large item at a high rate then goes
/// in spans).
fn open_spool(opts: &PushOptions) -> (Option<spool::FileSpool>, u64) {
    let bytes = opts.spool_mib.saturating_mul(1 << 20);
    if bytes == 0 {
        return (None, 0);
    }
    let dir = opts.dir.join(STATE_DIR);
    match spool::FileSpool::create(&dir, bytes) {
        Ok(s) => (Some(s), bytes),
        Err(e) => {
            tracing::warn!(
                "no spool in {}: {e}; a file too large to make its repair symbols ahead in memory at this rate goes in spans",
                dir.display()
            );
            (None, 0)
        }
    }
}

/// Watches `dir` (recursively, its state folder aside); each change sends
/// one message, the names it touched under `dir` (dropped when the channel
/// is full: a rescan is due anyway).
fn watch_dir(
    dir: &std::path::Path,
    tx: mpsc::Sender<Vec<String>>,
) -> Result<notify::RecommendedWatcher, NetError> {
    use notify::Watcher;
    let err = |source| NetError::Watch {
        path: dir.display().to_string(),
        source,
    };
    let root = dir.to_path_buf();
    let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res {
            let ours = ev.paths.iter().all(|p| {
                p.components()
                    .any(|c| c.as_os_str() == std::ffi::OsStr::new(STATE_DIR))
            });
            if !ours && !matches!(ev.kind, notify::EventKind::Access(_)) {
                let names = (ev.paths.iter())
                    .filter_map(|p| Some(p.strip_prefix(&root).ok()?.to_str()?.to_owned()))
                    .collect();
                let _ = tx.try_send(names);
            }
        }
    })
    .map_err(err)?;
    w.watch(dir, notify::RecursiveMode::Recursive)
        .map_err(err)?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::fec::CodeKind;

    #[test]
    fn a_file_rewritten_behind_the_hash_cache_leaves_its_pack_until_hashed_afresh() {
        // Small files hashed and cached; one is then rewritten with its size
        // and time kept, and the cache still gives its old hash (a write in
        // the same tick of the file system's clock as the scan leaves even
        // the change time as it was; the test puts the file's new stamp on
        // its old cache line). Its pack leaves it out (it goes alone, where
        // the server fails it with a reason), the others are still packed,
        // and the pusher scans again.
        let dir = tempfile::tempdir().expect("tmp");
        for i in 0..6u8 {
            std::fs::write(dir.path().join(format!("f{i}")), vec![i; 3_000]).expect("write");
        }
        let fec = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 1_000,
            max_block_symbols: 100,
        };
        let opts = PushOptions::new(dir.path().to_path_buf());
        let first = scan(&opts, &fec, None, &HashSet::new()).expect("scan");
        let packed = |s: &Scan| -> Vec<usize> {
            (s.items.packs.iter())
                .flat_map(|p| p.members.clone())
                .collect()
        };
        assert!(first.items.left_out.is_empty());
        assert_eq!(packed(&first).len(), 6);
        let path = dir.path().join("f2");
        let mtime = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime");
        std::fs::write(&path, vec![9u8; 3_000]).expect("rewrite");
        let f = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_modified(mtime).expect("keep the time");
        let cache = dir.path().join(crate::repo::STATE_DIR).join("hashes.v2");
        let stamp = std::fs::metadata(&path)
            .map(|m| crate::repo::stamp(&m))
            .expect("stat");
        let text = std::fs::read_to_string(&cache).expect("cache");
        let stale: String = (text.lines())
            .map(|l| match l.split('\t').collect::<Vec<_>>()[..] {
                ["f2", size, _, ref rest @ ..] => {
                    format!("f2\t{size}\t{stamp}\t{}\n", rest.join("\t"))
                }
                _ => format!("{l}\n"),
            })
            .collect();
        assert_ne!(stale, text, "the cache has a line for f2");
        std::fs::write(&cache, stale).expect("stale cache");
        let again = scan_fresh(&opts, &fec, None, &HashSet::new()).expect("scan");
        let names = |s: &Scan, v: &[usize]| -> Vec<String> {
            v.iter()
                .map(|&i| s.items.files[i].info.name.clone())
                .collect()
        };
        assert_eq!(names(&again, &again.items.left_out), ["f2"]);
        assert_eq!(packed(&again).len(), 5);
        assert!(!names(&again, &packed(&again)).contains(&"f2".to_string()));
        // What the pusher scans: the file hashed afresh, as it now reads,
        // and packed with the others.
        let scanned = scan(&opts, &fec, None, &HashSet::new()).expect("scan");
        assert!(scanned.items.left_out.is_empty());
        let f2 = (scanned.items.files.iter())
            .find(|f| f.info.name == "f2")
            .expect("f2");
        assert_eq!(f2.info.hash, *blake3::hash(&[9u8; 3_000]).as_bytes());
        assert_eq!(packed(&scanned).len(), 6);
    }
}
