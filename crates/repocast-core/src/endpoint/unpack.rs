//! A verified pack's members cut out off the receiving path.
//!
//! Cutting a pack writes a file per member: on the lab's disk creating a
//! small file costs about half a millisecond, so a pack of a hundred files
//! held the listener's receiving loop for 100-150 ms, and a 5% listener of
//! a site of 1,000 small files spent most of its time there, not on the
//! link. A store that can ([`BlockStore::unpack_work`]) hands the work
//! over, its files moved into it; the listen endpoint queues it as an
//! [`UnpackJob`] (`ListenEndpoint::poll_unpack`), the driver runs it on
//! another thread and hands it back (`ListenEndpoint::unpacked`), and the
//! members get their outcomes then. A store that cannot (the simulator's
//! memory) cuts the pack where the endpoint asks.
//!
//! [`BlockStore::unpack_work`]: super::store::BlockStore::unpack_work

use super::store::{PackMember, StoreError, UnpackWork};
use crate::ItemId;

/// A pack to cut, out of the endpoint until it comes back.
pub struct UnpackJob {
    pub(super) pack: ItemId,
    pub(super) members: Vec<PackMember>,
    work: Option<UnpackWork>,
    pub(super) results: Vec<Result<bool, StoreError>>,
    /// The listener's version count when it was queued.
    pub(super) generation: u64,
}

impl UnpackJob {
    pub(super) fn new(
        pack: ItemId,
        members: Vec<PackMember>,
        work: UnpackWork,
        generation: u64,
    ) -> Self {
        UnpackJob {
            pack,
            members,
            work: Some(work),
            results: Vec::new(),
            generation,
        }
    }

    /// Cuts the members out (file I/O: run it off the receiving path).
    pub fn run(&mut self) {
        if let Some(work) = self.work.take() {
            self.results = work();
        }
    }

    /// The files it cuts out.
    pub fn members(&self) -> &[PackMember] {
        &self.members
    }

    /// Its thread panicked: no member was cut (each fails with a reason).
    pub fn lose(&mut self) {
        self.work = None;
        self.results.clear();
    }
}

impl std::fmt::Debug for UnpackJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnpackJob")
            .field("pack", &self.pack)
            .field("members", &self.members.len())
            .field("done", &self.work.is_none())
            .finish()
    }
}
