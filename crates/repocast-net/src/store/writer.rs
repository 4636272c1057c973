//! The store's writer thread. Verified blocks are written at their offsets
//! in their partial files, made durable and recorded in the journal here,
//! off the receiving thread: the decodes that finish a transfer come in a
//! burst, and neither their writes nor the journal's fsyncs then hold up
//! the packets still arriving (measured in the push lab: 30-50 ms of a
//! 32 MiB transfer's last 150 ms were spent writing on the receiving
//! thread).
//!
//! [`Writer::write`] queues a block and waits only while more than
//! [`WRITE_AHEAD`] bytes are queued, so memory stays bounded.
//! [`Writer::close`] waits until every block queued for an item is
//! written (and, if asked, journaled) and hands back the first error.
//! A write error stops the item's writing and is also returned by the
//! item's next [`Writer::write`].

use repocast_core::ItemId;
use repocast_core::endpoint::store::StoreError;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Most bytes of verified blocks queued for writing (one larger block is
/// still taken when nothing is queued).
pub const WRITE_AHEAD: u64 = 8 << 20;

/// Longest time a verified block waits for its journal entry: a block is
/// committed at once unless the last commit was more recent than this (so
/// slow transfers commit every block, and fast ones fsync ten times a
/// second rather than on every block); a block written while no other
/// comes is committed this long after.
pub const COMMIT_EVERY: Duration = Duration::from_millis(100);

/// An item's partial file and journal, as the writer thread holds them.
pub struct Sink {
    /// The partial file (shared with the store, which spills symbols in
    /// it and finishes it).
    pub file: Arc<File>,
    /// Its path, for errors.
    pub tmp: PathBuf,
    /// The journal, open for appending.
    pub journal: File,
    /// Its path, for errors.
    pub journal_path: PathBuf,
}

/// A [`Sink`] and the blocks written to it since the last commit.
struct Open {
    sink: Sink,
    pending: Vec<u32>,
    pending_bytes: u64,
    last_commit: Option<Instant>,
    failed: bool,
}

impl Open {
    /// Makes the written blocks durable, then records them in the journal
    /// (data first, so the journal never names a block not on disk).
    fn commit(&mut self) -> Result<(), StoreError> {
        self.last_commit = Some(Instant::now());
        if self.pending.is_empty() {
            return Ok(());
        }
        let s = &mut self.sink;
        s.file.sync_data().map_err(|e| StoreError::io(&s.tmp, e))?;
        let entries: Vec<u8> = self.pending.drain(..).flat_map(u32::to_le_bytes).collect();
        s.journal
            .write_all(&entries)
            .map_err(|e| StoreError::io(&s.journal_path, e))?;
        s.journal
            .sync_data()
            .map_err(|e| StoreError::io(&s.journal_path, e))?;
        self.pending_bytes = 0;
        Ok(())
    }
}

enum Job {
    Open(ItemId, Sink),
    Write {
        item: ItemId,
        block: u32,
        offset: u64,
        data: Vec<u8>,
    },
    Close {
        item: ItemId,
        commit: bool,
        reply: mpsc::Sender<Result<(), StoreError>>,
    },
}

/// What the store and the thread share.
#[derive(Default)]
struct Shared {
    /// Bytes queued and not yet written.
    queued: Mutex<u64>,
    /// Signalled as queued bytes are written.
    drained: Condvar,
    /// The first write error of each item, until the store takes it.
    errors: Mutex<HashMap<ItemId, StoreError>>,
}

/// The handle the store keeps; dropping it lets the thread finish what is
/// queued and waits for it.
pub struct Writer {
    tx: Option<mpsc::Sender<Job>>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Starts the thread; blocks are committed every `batch` bytes or
    /// [`COMMIT_EVERY`].
    pub fn start(batch: u64) -> Result<Writer, std::io::Error> {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("repocast-store".into())
            .spawn(move || run(rx, &s, batch))?;
        Ok(Writer {
            tx: Some(tx),
            shared,
            thread: Some(thread),
        })
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or(StoreError::NotOpen("writer thread"))
    }

    /// Takes over an item's partial file and journal.
    pub fn open(&self, item: ItemId, sink: Sink) -> Result<(), StoreError> {
        self.shared.errors.lock().map(|mut e| e.remove(&item)).ok();
        self.send(Job::Open(item, sink))
    }

    /// Queues a verified block; returns an earlier write error of the item.
    pub fn write(
        &self,
        item: ItemId,
        block: u32,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<(), StoreError> {
        if let Some(e) = self.take_error(item) {
            return Err(e);
        }
        let len = data.len() as u64;
        let full = |q: &mut u64| *q > 0 && *q + len > WRITE_AHEAD;
        if let Ok(q) = self.shared.queued.lock() {
            if let Ok(mut q) = self.shared.drained.wait_while(q, full) {
                *q += len;
            }
        }
        self.send(Job::Write {
            item,
            block,
            offset,
            data,
        })
    }

    /// Waits until the item's queued blocks are written (and journaled if
    /// `commit`), and lets its files go; returns its first write error.
    pub fn close(&self, item: ItemId, commit: bool) -> Result<(), StoreError> {
        let (reply, rx) = mpsc::channel();
        self.send(Job::Close {
            item,
            commit,
            reply,
        })?;
        let done = rx
            .recv()
            .unwrap_or(Err(StoreError::NotOpen("writer thread")));
        match self.take_error(item) {
            Some(e) => Err(e),
            None => done,
        }
    }

    fn take_error(&self, item: ItemId) -> Option<StoreError> {
        self.shared.errors.lock().ok()?.remove(&item)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: runs jobs in order, committing written blocks when due and
/// when nothing has come for [`COMMIT_EVERY`].
fn run(rx: mpsc::Receiver<Job>, shared: &Shared, batch: u64) {
    let mut open: HashMap<ItemId, Open> = HashMap::new();
    let fail = |item: ItemId, o: &mut Open, e: StoreError| {
        o.failed = true;
        if let Ok(mut errs) = shared.errors.lock() {
            errs.entry(item).or_insert(e);
        }
    };
    loop {
        let waiting = open.values().any(|o| !o.pending.is_empty() && !o.failed);
        let job = if waiting {
            match rx.recv_timeout(COMMIT_EVERY) {
                Ok(j) => Some(j),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(j) => Some(j),
                Err(_) => break,
            }
        };
        match job {
            None => {
                for (&item, o) in open.iter_mut().filter(|(_, o)| !o.failed) {
                    if let Err(e) = o.commit() {
                        fail(item, o, e);
                    }
                }
            }
            Some(Job::Open(item, sink)) => {
                let o = Open {
                    sink,
                    pending: Vec::new(),
                    pending_bytes: 0,
                    last_commit: None,
                    failed: false,
                };
                open.insert(item, o);
            }
            Some(Job::Write {
                item,
                block,
                offset,
                data,
            }) => {
                if let Some(o) = open.get_mut(&item).filter(|o| !o.failed) {
                    let s = &o.sink;
                    match s.file.write_all_at(&data, offset) {
                        Ok(()) => {
                            o.pending.push(block);
                            o.pending_bytes += data.len() as u64;
                            let due = o.last_commit.is_none_or(|t| t.elapsed() >= COMMIT_EVERY);
                            if o.pending_bytes >= batch || due {
                                if let Err(e) = o.commit() {
                                    fail(item, o, e);
                                }
                            }
                        }
                        Err(e) => {
                            let e = StoreError::io(&s.tmp, e);
                            fail(item, o, e);
                        }
                    }
                }
                if let Ok(mut q) = shared.queued.lock() {
                    *q = q.saturating_sub(data.len() as u64);
                }
                shared.drained.notify_all();
            }
            Some(Job::Close {
                item,
                commit,
                reply,
            }) => {
                let mut r = Ok(());
                if let Some(mut o) = open.remove(&item) {
                    if commit && !o.failed {
                        r = o.commit();
                    }
                }
                let _ = reply.send(r);
            }
        }
    }
    // The store is gone: what was written is made durable and journaled.
    for o in open.values_mut().filter(|o| !o.failed) {
        let _ = o.commit();
    }
}
