//! The client endpoint's side of [`crate::endpoint::finish`]: an item
//! whose blocks are all in is finished by the store here, or, for a store
//! that hands the I/O over, queued as a job for the driver; the item is
//! verified (and reported done to the server) only when its job is back.
//!
//! Part of [`super::ClientEndpoint`].

use super::ClientEndpoint;
use crate::Instant;
use crate::ItemId;
use crate::endpoint::finish::{FinishJob, MAX_FINISH_JOBS};
use crate::endpoint::store::BlockStore;

/// Why an item fails whose finish job's thread panicked.
const LOST: &str = "the thread that put the file in place failed";

impl<S: BlockStore> ClientEndpoint<S> {
    /// Every block of `item` is in: the store finishes it, here or as a
    /// job ([`ClientEndpoint::poll_finish`]).
    pub(super) fn finish_item(&mut self, now: Instant, item: ItemId) {
        if let Some(work) = self.store.finish_work(item) {
            self.finishing.push_back(FinishJob::new(item, work));
            // Its report falls due if the job is not back by then.
            self.client.placing(now, item);
            return;
        }
        match self.store.finish(item) {
            Ok(ok) => self.client.confirm_item(now, item, ok),
            Err(e) => self.client.abandon(item, e.to_string()),
        }
    }

    /// An item's last I/O to run on another thread (at most
    /// [`MAX_FINISH_JOBS`] out at once); give it back with
    /// [`ClientEndpoint::finished`].
    pub fn poll_finish(&mut self) -> Option<FinishJob> {
        if self.finishes_out >= MAX_FINISH_JOBS {
            return None;
        }
        let job = self.finishing.pop_front()?;
        self.finishes_out += 1;
        Some(job)
    }

    /// A job from [`ClientEndpoint::poll_finish`], run (or not: it is run
    /// here then). A job back after the run ended still counts: its file
    /// is in place, so its item is verified.
    pub fn finished(&mut self, now: Instant, mut job: FinishJob) {
        self.finishes_out = self.finishes_out.saturating_sub(1);
        job.run(); // a job run (or lost) already has no work left
        let item = job.item;
        let result = job.result.take();
        self.store.finished(item, matches!(result, Some(Ok(true))));
        match result {
            Some(Ok(ok)) => self.client.confirm_item(now, item, ok),
            Some(Err(e)) => self.client.abandon(item, e.to_string()),
            None => self.client.abandon(item, LOST.into()),
        }
        self.process(now);
    }

    /// Finish jobs handed out or waiting to be, not yet back: a driver
    /// that lets go of a finished endpoint waits for these first.
    pub fn finishes_away(&self) -> usize {
        self.finishing.len() + self.finishes_out
    }
}
