//! CPU work the pumps hand to tokio's blocking pool, so no pump stalls for
//! it: block encoders prepared for `serve` and `push`
//! (`Server::poll_prepare`: a fountain encoder's intermediate symbols, a
//! few milliseconds a block) and blocks decoded for `get` and `listen`
//! (`Client::poll_decode`: a block's decode and hash check, 5-20 ms), and
//! verified packs cut into their files for `listen`
//! (`ListenEndpoint::poll_unpack`: file creation, about half a millisecond
//! a file on the lab's disk). The
//! core decides what to hand out, and what a job that comes back late
//! does (`server::encoders::prepare`, `client::decode`); this runs them
//! and gives each back.

use repocast_core::Instant;
use repocast_core::client::decode::DecodeJob;
use repocast_core::endpoint::client::ClientEndpoint;
use repocast_core::endpoint::listen::ListenEndpoint;
use repocast_core::endpoint::store::BlockStore;
use repocast_core::endpoint::unpack::UnpackJob;
use repocast_core::server::encoders::PrepareJob;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// A job the blocking pool can run.
pub(crate) trait Job: Send + 'static {
    fn run(&mut self);
    /// Its thread panicked: mark it as not done (it still goes back).
    fn lose(&mut self) {}
}

impl Job for PrepareJob {
    fn run(&mut self) {
        PrepareJob::run(self);
    }
}

impl Job for UnpackJob {
    fn run(&mut self) {
        UnpackJob::run(self);
    }
    fn lose(&mut self) {
        UnpackJob::lose(self);
    }
}

impl Job for DecodeJob {
    fn run(&mut self) {
        DecodeJob::run(self);
    }
    fn lose(&mut self) {
        DecodeJob::lose(self);
    }
}

/// A job tagged with whose it is (the host agent's request slot).
impl<J: Job> Job for (u64, J) {
    fn run(&mut self) {
        self.1.run();
    }
    fn lose(&mut self) {
        self.1.lose();
    }
}

/// Jobs out on the blocking pool, and the way they come back (the core
/// bounds how many are out at once).
pub(crate) struct Jobs<J> {
    tx: mpsc::UnboundedSender<J>,
    rx: mpsc::UnboundedReceiver<J>,
    /// Jobs started and not yet taken back.
    out: AtomicUsize,
}

impl<J: Job> Jobs<J> {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Jobs {
            tx,
            rx,
            out: AtomicUsize::new(0),
        }
    }

    /// Runs `job` on the blocking pool; it comes back by
    /// [`Jobs::done`] even if it panics (marked lost).
    pub(crate) fn start(&self, mut job: J) {
        self.out.fetch_add(1, Ordering::Relaxed);
        let done = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()));
            if ran.is_err() {
                job.lose();
            }
            let _ = done.send(job);
        });
    }

    /// A job done, if one is back (without waiting): a busy pump takes
    /// them at the top of every turn, not only when `select!` happens to
    /// pick [`Jobs::done`] over a socket that is always readable.
    pub(crate) fn try_done(&mut self) -> Option<J> {
        let job = self.rx.try_recv().ok()?;
        self.back();
        Some(job)
    }

    /// The next job done (never `None`: a sender lives here).
    pub(crate) async fn done(&mut self) -> Option<J> {
        let job = self.rx.recv().await?;
        self.back();
        Some(job)
    }

    /// A job was taken back.
    fn back(&self) {
        let _ = (self.out).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Whether a job started has not been taken back.
    pub(crate) fn any_out(&self) -> bool {
        self.out.load(Ordering::Relaxed) > 0
    }
}

/// An endpoint that hands out blocks to decode: `get`'s and `listen`'s.
pub(crate) trait Decodes {
    fn poll_decode(&mut self) -> Option<DecodeJob>;
    fn decoded(&mut self, now: Instant, job: DecodeJob);
}

impl<S: BlockStore> Decodes for ClientEndpoint<S> {
    fn poll_decode(&mut self) -> Option<DecodeJob> {
        ClientEndpoint::poll_decode(self)
    }
    fn decoded(&mut self, now: Instant, job: DecodeJob) {
        ClientEndpoint::decoded(self, now, job);
    }
}

impl<S: BlockStore> Decodes for ListenEndpoint<S> {
    fn poll_decode(&mut self) -> Option<DecodeJob> {
        ListenEndpoint::poll_decode(self)
    }
    fn decoded(&mut self, now: Instant, job: DecodeJob) {
        ListenEndpoint::decoded(self, now, job);
    }
}

impl Jobs<DecodeJob> {
    /// Takes back every block out being decoded (a few milliseconds
    /// each), and hands out and takes back those waiting to go (the core
    /// holds at most its few jobs' worth), so a run that stops keeps what
    /// they verify. No new job comes of it: only symbols make one.
    pub(crate) async fn settle(&mut self, ep: &mut impl Decodes, start: std::time::Instant) {
        loop {
            while let Some(job) = ep.poll_decode() {
                self.start(job);
            }
            if !self.any_out() {
                return;
            }
            match self.done().await {
                Some(job) => ep.decoded(crate::core_now(start), job),
                None => return,
            }
        }
    }

    /// Takes back the blocks decoded and hands out those ready. A
    /// receiving loop calls it after every datagram, not only between
    /// batches: a batch can hold several blocks' last symbols.
    pub(crate) fn trade(&mut self, ep: &mut impl Decodes, start: std::time::Instant) {
        while let Some(job) = self.try_done() {
            ep.decoded(crate::core_now(start), job);
        }
        while let Some(job) = ep.poll_decode() {
            self.start(job);
        }
    }
}
