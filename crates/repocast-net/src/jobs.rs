//! CPU work the pumps hand to tokio's blocking pool, so no pump stalls for
//! it: block encoders prepared for `serve` and `push`
//! (`Server::poll_prepare`: a fountain encoder's intermediate symbols, a
//! few milliseconds a block) and blocks decoded for `get` and `listen`
//! (`Client::poll_decode`: a block's decode and hash check, 5-20 ms), and
//! verified packs cut into their files for `listen`
//! (`ListenEndpoint::poll_unpack`: file creation, about half a millisecond
//! a file on the lab's disk), and verified items fsynced and renamed into
//! place for `get` (`ClientEndpoint::poll_finish`: about 0.35 ms a file
//! on the lab's disk). The
//! core decides what to hand out, and what a job that comes back late
//! does (`server::encoders::prepare`, `client::decode`); this runs them
//! and gives each back.

use repocast_core::Instant;
use repocast_core::client::decode::DecodeJob;
use repocast_core::endpoint::client::ClientEndpoint;
use repocast_core::endpoint::finish::FinishJob;
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

impl Job for FinishJob {
    fn run(&mut self) {
        FinishJob::run(self);
    }
    fn lose(&mut self) {
        FinishJob::lose(self);
    }
}

/// A receiving endpoint's job: a block to decode or an item to put in
/// place.
pub(crate) enum Work {
    Decode(DecodeJob),
    Finish(FinishJob),
}

impl Job for Work {
    fn run(&mut self) {
        match self {
            Work::Decode(j) => j.run(),
            Work::Finish(j) => j.run(),
        }
    }
    fn lose(&mut self) {
        match self {
            Work::Decode(j) => j.lose(),
            Work::Finish(j) => j.lose(),
        }
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

/// An endpoint that hands out blocks to decode (`get`'s and `listen`'s)
/// and items to put in place (`get`'s).
pub(crate) trait HandsOutJobs {
    fn poll_decode(&mut self) -> Option<DecodeJob>;
    fn decoded(&mut self, now: Instant, job: DecodeJob);
    fn poll_finish(&mut self) -> Option<FinishJob> {
        None
    }
    fn finished(&mut self, _now: Instant, _job: FinishJob) {}

    /// The next job to hand out, if any.
    fn poll_work(&mut self) -> Option<Work> {
        (self.poll_decode().map(Work::Decode)).or_else(|| self.poll_finish().map(Work::Finish))
    }

    /// Takes a job back.
    fn work_done(&mut self, now: Instant, work: Work) {
        match work {
            Work::Decode(j) => self.decoded(now, j),
            Work::Finish(j) => self.finished(now, j),
        }
    }
}

impl<S: BlockStore> HandsOutJobs for ClientEndpoint<S> {
    fn poll_decode(&mut self) -> Option<DecodeJob> {
        ClientEndpoint::poll_decode(self)
    }
    fn decoded(&mut self, now: Instant, job: DecodeJob) {
        ClientEndpoint::decoded(self, now, job);
    }
    fn poll_finish(&mut self) -> Option<FinishJob> {
        ClientEndpoint::poll_finish(self)
    }
    fn finished(&mut self, now: Instant, job: FinishJob) {
        ClientEndpoint::finished(self, now, job);
    }
}

impl<S: BlockStore> HandsOutJobs for ListenEndpoint<S> {
    fn poll_decode(&mut self) -> Option<DecodeJob> {
        ListenEndpoint::poll_decode(self)
    }
    fn decoded(&mut self, now: Instant, job: DecodeJob) {
        ListenEndpoint::decoded(self, now, job);
    }
}

impl Jobs<Work> {
    /// Takes back every job out (blocks being decoded, a few milliseconds
    /// each; items being put in place), and hands out and takes back
    /// those waiting to go (the core holds at most its few jobs' worth),
    /// so a run that stops keeps what they verify. No new job comes of
    /// it but an item a decoded block completes.
    pub(crate) async fn settle(&mut self, ep: &mut impl HandsOutJobs, start: std::time::Instant) {
        loop {
            while let Some(job) = ep.poll_work() {
                self.start(job);
            }
            if !self.any_out() {
                return;
            }
            match self.done().await {
                Some(job) => ep.work_done(crate::core_now(start), job),
                None => return,
            }
        }
    }

    /// Takes back the jobs done and hands out those ready. A receiving
    /// loop calls it after every datagram, not only between batches: a
    /// batch can hold several blocks' last symbols.
    pub(crate) fn trade(&mut self, ep: &mut impl HandsOutJobs, start: std::time::Instant) {
        while let Some(job) = self.try_done() {
            ep.work_done(crate::core_now(start), job);
        }
        while let Some(job) = ep.poll_work() {
            self.start(job);
        }
    }
}
