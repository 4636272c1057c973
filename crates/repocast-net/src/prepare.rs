//! Block encoders prepared off the pump: the `serve` and `push` pumps hand
//! the jobs their endpoint gives (`Server::poll_prepare`: a fountain
//! encoder's intermediate symbols, a few milliseconds of CPU a block) to
//! tokio's blocking pool and give each back when it is done, so the pump
//! never stalls for one. What to prepare, and what a job that comes back
//! late does, are the core's (`server::encoders::prepare`).

use repocast_core::server::encoders::PrepareJob;
use tokio::sync::mpsc;

/// Jobs out on the blocking pool, and the way they come back (at most the
/// core's `prepare_jobs` are out at once).
pub(crate) struct Preparer {
    tx: mpsc::UnboundedSender<PrepareJob>,
    rx: mpsc::UnboundedReceiver<PrepareJob>,
}

impl Preparer {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Preparer { tx, rx }
    }

    /// Runs `job` on the blocking pool.
    pub(crate) fn start(&self, mut job: PrepareJob) {
        let done = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            job.run();
            let _ = done.send(job);
        });
    }

    /// The next job done (never `None`: the sender lives here).
    pub(crate) async fn done(&mut self) -> Option<PrepareJob> {
        self.rx.recv().await
    }
}
