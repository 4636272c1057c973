//! Verified packs on their way into place: the listen endpoint's cut jobs
//! ([`UnpackJob`]) waiting or out, and the files they carry.
//!
//! Up to [`CUT_JOBS`] are out at once, all of one version: a newer
//! version's jobs wait until the older version's are back, so no file is
//! cut by two jobs at once. The files a job carries are known by name and
//! hash until it is back: a newer version with the same file does not
//! receive it again (the job gives its outcome), and one with other
//! content for that name waits for the job before it is taken, so the
//! older content cannot land over the newer.

use super::CUT_JOBS;
use crate::ItemId;
use crate::endpoint::store::{PackMember, UnpackWork};
use crate::endpoint::unpack::UnpackJob;
use std::collections::{BTreeMap, VecDeque};

/// The listen endpoint's packs being cut out.
#[derive(Default)]
pub(super) struct Cuts {
    waiting: VecDeque<UnpackJob>,
    out: usize,
    /// Versions taken so far (each job is marked with it), and the one
    /// whose jobs are out.
    generation: u64,
    out_generation: u64,
    /// The files of the jobs waiting or out, by name, with their hashes.
    carried: BTreeMap<String, [u8; 32]>,
}

impl Cuts {
    /// A version is taken: jobs queued from now on are its.
    pub(super) fn next_version(&mut self) {
        self.generation += 1;
    }

    /// Queues the cut of a verified pack into `members`.
    pub(super) fn queue(&mut self, pack: ItemId, members: Vec<PackMember>, work: UnpackWork) {
        let carried = members.iter().map(|m| (m.name.clone(), m.hash));
        self.carried.extend(carried);
        let job = UnpackJob::new(pack, members, work, self.generation);
        self.waiting.push_back(job);
    }

    /// The next job to run, if one may go out now.
    pub(super) fn poll(&mut self) -> Option<UnpackJob> {
        let next = self.waiting.front()?.generation;
        let busy = self.out > 0 && next != self.out_generation;
        if busy || self.out >= CUT_JOBS {
            return None;
        }
        let job = self.waiting.pop_front()?;
        self.out_generation = next;
        self.out += 1;
        Some(job)
    }

    /// A job is back.
    pub(super) fn back(&mut self) {
        self.out = self.out.saturating_sub(1);
    }

    /// Its member `name` with `hash` has its outcome (no longer carried).
    pub(super) fn landed(&mut self, name: &str, hash: &[u8; 32]) {
        if self.carried.get(name) == Some(hash) {
            self.carried.remove(name);
        }
    }

    /// Whether a job waiting or out is cutting `name` with `hash`.
    pub(super) fn carries(&self, name: &str, hash: &[u8; 32]) -> bool {
        self.carried.get(name) == Some(hash)
    }

    /// Whether a job waiting or out is cutting `name` with other content
    /// than `hash`.
    pub(super) fn carries_other(&self, name: &str, hash: &[u8; 32]) -> bool {
        self.carried.get(name).is_some_and(|h| h != hash)
    }

    /// Whether jobs wait or are out.
    pub(super) fn busy(&self) -> bool {
        self.out > 0 || !self.waiting.is_empty()
    }
}
