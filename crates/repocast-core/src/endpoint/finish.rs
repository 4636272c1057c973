//! A verified item's last I/O off the receiving path.
//!
//! When every block of an item is in, the store makes it durable and puts
//! it in place: an fsync, the whole file's hash, a rename. On the lab's
//! disk the fsync alone costs about 0.35 ms, and a `get` of 20,000 small
//! files spent about 4 of its 15 s waiting in it on its receiving loop
//! (session 54). A store that can ([`BlockStore::finish_work`]) hands the
//! work over, the item's file moved into it; the client endpoint queues
//! it as a [`FinishJob`] (`ClientEndpoint::poll_finish`, at most
//! [`MAX_FINISH_JOBS`] out at once), the driver runs it on another thread
//! and hands it back (`ClientEndpoint::finished`), and only then does the
//! item count as verified and its done report go to the server. A store
//! that cannot (the simulator's memory) finishes where the endpoint asks.
//!
//! [`BlockStore::finish_work`]: super::store::BlockStore::finish_work

use super::store::{FinishWork, StoreError};
use crate::ItemId;

/// Finish jobs a client endpoint has out at once. Fsyncs in flight
/// together share the file system's journal commits: a `get` of 20,000
/// small files onto a fresh ext4 took 4.73-5.38 s (median 4.93) with 16
/// out, against 5.17-5.67 s (5.51) with 4, and 4.71-5.12 s (4.79) with
/// no fsync at all (session 63, `bench/many-files.sh`). Each holds a
/// partial file open and a blocking-pool thread while it waits.
pub const MAX_FINISH_JOBS: usize = 16;

/// An item to finish, out of the endpoint until it comes back.
pub struct FinishJob {
    pub(super) item: ItemId,
    work: Option<FinishWork>,
    pub(super) result: Option<Result<bool, StoreError>>,
}

impl FinishJob {
    pub(super) fn new(item: ItemId, work: FinishWork) -> Self {
        FinishJob {
            item,
            work: Some(work),
            result: None,
        }
    }

    /// Does the item's I/O (run it off the receiving path).
    pub fn run(&mut self) {
        if let Some(work) = self.work.take() {
            self.result = Some(work());
        }
    }

    /// Its thread panicked: the item fails with a reason.
    pub fn lose(&mut self) {
        self.work = None;
        self.result = None;
    }

    /// The item it finishes.
    pub fn item(&self) -> ItemId {
        self.item
    }
}

impl std::fmt::Debug for FinishJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinishJob")
            .field("item", &self.item)
            .field("done", &self.work.is_none())
            .finish()
    }
}
