//! Encoders prepared off the sending path: jobs a server (request or push
//! mode) hands its driver.
//!
//! A fountain encoder's first repair symbol costs its block's whole
//! intermediate-symbol computation (3-7 ms for 1,000 symbols of 1,280 bytes
//! on the project machine). Done on the sending path it is a gap in the
//! packets that pacing cannot make up at line rate: about once per block of
//! every send. So when a transmission loads a block, or starts a segment,
//! that sends source symbols first and repair symbols after, a cache that
//! offloads ([`EncoderCache::offloading`], `ServerConfig::prepare_jobs`)
//! also builds a second encoder over a copy of the block
//! ([`BlockEncoder::spare`]) and queues it as a [`PrepareJob`]. The driver
//! takes it ([`crate::server::Server::poll_prepare`]), runs
//! [`PrepareJob::run`] where it likes (the net crate on a blocking thread,
//! the simulator at once) and gives it back
//! ([`crate::server::Server::prepared`]). The kept encoder, which serves
//! the source symbols meanwhile, is swapped for the prepared one unless it
//! had to do the work itself first (the job came back too late) or was
//! dropped. Both give the same symbols, so when a job comes back changes
//! the work behind the packets, never the packets.
//!
//! A push-mode pass offers one of its item's kept blocks every half block
//! of packets ([`EncoderCache::offer_next_job`]) where it would otherwise
//! prepare it on the sending path itself (`prepare_one`).
//!
//! At most `limit` jobs are out at once (queued or running), each holding a
//! copy of its block; past that, a block is prepared on the sending path at
//! its first repair symbol. A driver that never runs jobs gets that for
//! every block after the first `limit`, and holds their copies.

use super::EncoderCache;
use crate::ItemId;
use crate::fec::BlockEncoder;
use std::collections::{BTreeSet, VecDeque};

/// Fewest source symbols a block needs for its preparation to go out as
/// a job. A smaller block's source symbols are over before a job could
/// come back (a one-packet file's repair symbol follows its only source
/// symbol), and its preparation costs little on the sending path (tens of
/// microseconds), so it is done there: `serve` handed out a job for each
/// of 20,000 small files and every one came back too late, each a wasted
/// encoder build and copy on the machine's other core (session 54). At 32
/// the source symbols last 0.4 ms even at 1 Gbit/s.
pub const MIN_JOB_SYMBOLS: u32 = 32;

/// One block's encoder to prepare off the sending path.
pub struct PrepareJob {
    /// The cache's epoch when it was offered: a job back in a cache of
    /// another epoch (a pusher's next version, whose item ids mean other
    /// files) is not taken.
    epoch: u64,
    item: ItemId,
    block: u32,
    encoder: Box<dyn BlockEncoder>,
}

impl PrepareJob {
    /// Does the work (the block's intermediate symbols). Call it anywhere,
    /// on any thread, then hand the job back.
    pub fn run(&mut self) {
        self.encoder.prepare();
    }

    /// The item whose block it prepares.
    pub fn item(&self) -> ItemId {
        self.item
    }

    /// The block it prepares.
    pub fn block(&self) -> u32 {
        self.block
    }
}

impl std::fmt::Debug for PrepareJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrepareJob")
            .field("item", &self.item)
            .field("block", &self.block)
            .field("needs_prepare", &self.encoder.needs_prepare())
            .finish()
    }
}

/// How a cache's preparation jobs stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Jobs handed out.
    pub offered: u64,
    /// Jobs that came back in time: their encoder replaced the kept one.
    pub used: u64,
    /// Jobs that came back too late (the kept encoder had done the work,
    /// or was dropped).
    pub late: u64,
}

/// The jobs of one cache.
#[derive(Default)]
pub(super) struct Jobs {
    /// Whose jobs these are ([`EncoderCache::for_epoch`]).
    pub(super) epoch: u64,
    /// Most jobs out at once (0: none offered).
    limit: usize,
    /// Jobs not yet taken by the driver.
    queued: VecDeque<PrepareJob>,
    /// Blocks whose job is out (queued or running).
    away: BTreeSet<(ItemId, u32)>,
    counts: JobCounts,
}

impl EncoderCache {
    /// The same, handing out up to `limit` blocks' preparation at a time
    /// as jobs (0: none; blocks are prepared on the sending path).
    pub fn offloading(mut self, limit: usize) -> Self {
        self.jobs.limit = limit;
        self
    }

    /// Forgets the jobs out and queued (they will not be taken back) and
    /// marks new ones with `epoch`.
    pub(super) fn renew_jobs(&mut self, epoch: u64) {
        self.jobs.queued.clear();
        self.jobs.away.clear();
        self.jobs.epoch = epoch;
    }

    /// The same, its jobs marked with `epoch` (a server's session): only
    /// jobs of its own epoch are taken back.
    pub fn for_epoch(mut self, epoch: u64) -> Self {
        self.jobs.epoch = epoch;
        self
    }

    /// Whether it hands out jobs at all.
    pub fn offloads(&self) -> bool {
        self.jobs.limit > 0
    }

    /// Queues the preparation of `block` of `item` for the driver, if it
    /// is kept and not prepared, not out already, and fewer than the limit
    /// are out: a fresh encoder over a copy of the block
    /// ([`BlockEncoder::spare`]). Returns whether it did.
    pub fn offer_job(&mut self, item: ItemId, block: u32) -> bool {
        let key = (item, block);
        if self.jobs.away.len() >= self.jobs.limit || self.jobs.away.contains(&key) {
            return false;
        }
        let spare = (self.kept.get(&key))
            .filter(|k| k.encoder.needs_prepare())
            .and_then(|k| k.encoder.spare());
        let Some(encoder) = spare else {
            return false;
        };
        self.jobs.away.insert(key);
        self.jobs.counts.offered += 1;
        self.jobs.queued.push_back(PrepareJob {
            epoch: self.jobs.epoch,
            item,
            block,
            encoder,
        });
        true
    }

    /// [`EncoderCache::offer_job`] for the lowest kept block of `item` it
    /// takes; returns whether one was offered.
    pub fn offer_next_job(&mut self, item: ItemId) -> bool {
        if self.jobs.away.len() >= self.jobs.limit {
            return false;
        }
        let range = (item, 0)..=(item, u32::MAX);
        let next = (self.kept.range(range))
            .find(|(key, k)| k.encoder.needs_prepare() && !self.jobs.away.contains(key))
            .map(|(key, _)| key.1);
        next.is_some_and(|b| self.offer_job(item, b))
    }

    /// The next job for the driver to run.
    pub fn poll_job(&mut self) -> Option<PrepareJob> {
        self.jobs.queued.pop_front()
    }

    /// A job the driver has run: its encoder takes the kept one's place if
    /// that one still has the work to do. Returns whether it did. A job
    /// never run, or for a block not out, changes nothing.
    pub fn job_done(&mut self, job: PrepareJob) -> bool {
        let key = (job.item, job.block);
        if job.epoch != self.jobs.epoch || !self.jobs.away.remove(&key) {
            self.jobs.counts.late += 1;
            return false;
        }
        let kept = (self.kept.get_mut(&key)).filter(|k| k.encoder.needs_prepare());
        match kept {
            Some(k) if !job.encoder.needs_prepare() => {
                k.encoder = job.encoder;
                self.jobs.counts.used += 1;
                true
            }
            _ => {
                self.jobs.counts.late += 1;
                false
            }
        }
    }

    /// How the jobs stand.
    pub fn job_counts(&self) -> JobCounts {
        self.jobs.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fec::CodeKind;

    fn encoder(k: u32) -> Box<dyn BlockEncoder> {
        let data = (0..k as usize * 16).map(|i| i as u8).collect();
        CodeKind::RaptorQ.encoder(k, 16, data).expect("encoder")
    }

    fn load(c: &mut EncoderCache, block: u32) {
        c.get_or_load(ItemId(0), block, 160, || Ok(encoder(10)))
            .expect("load");
    }

    fn needs_prepare(c: &EncoderCache, block: u32) -> bool {
        let k = c.kept.get(&(ItemId(0), block)).expect("kept");
        k.encoder.needs_prepare()
    }

    #[test]
    fn a_job_back_in_time_replaces_the_kept_encoder_with_the_same_symbols() {
        let mut c = EncoderCache::new(1 << 20, 0).offloading(2);
        assert!(!c.offer_job(ItemId(0), 0), "not kept");
        load(&mut c, 0);
        assert!(c.offer_job(ItemId(0), 0));
        assert!(!c.offer_job(ItemId(0), 0), "out already");
        let mut job = c.poll_job().expect("queued");
        assert!(c.poll_job().is_none());
        job.run();
        assert!(c.job_done(job));
        assert!(!needs_prepare(&c, 0), "the prepared one is kept");
        assert!(!c.offer_job(ItemId(0), 0), "prepared");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encoder(10).symbol(13, &mut a);
        c.get_or_load(ItemId(0), 0, 160, || panic!("kept"))
            .expect("kept")
            .symbol(13, &mut b);
        assert_eq!(a, b);
        let counts = c.job_counts();
        assert_eq!((counts.offered, counts.used, counts.late), (1, 1, 0));
    }

    #[test]
    fn a_late_or_unrun_job_changes_nothing_and_jobs_out_are_bounded() {
        let mut c = EncoderCache::new(1 << 20, 0).offloading(2);
        for b in 0..3 {
            load(&mut c, b);
        }
        assert!(c.offer_next_job(ItemId(0)) && c.offer_next_job(ItemId(0)));
        assert!(!c.offer_next_job(ItemId(0)) && !c.offer_job(ItemId(0), 2));
        let (mut j0, j1) = (c.poll_job().expect("0"), c.poll_job().expect("1"));
        assert_eq!((j0.block(), j1.block()), (0, 1));
        // Block 0's kept encoder does the work itself first.
        let mut out = Vec::new();
        c.get_or_load(ItemId(0), 0, 160, || panic!("kept"))
            .expect("kept")
            .symbol(12, &mut out);
        j0.run();
        assert!(!c.job_done(j0), "late");
        // Block 1's job comes back never run: the kept one stays.
        assert!(!c.job_done(j1));
        assert!(needs_prepare(&c, 1));
        // Both are back: block 1 (not prepared) is next, then block 2.
        assert!(c.offer_next_job(ItemId(0)));
        assert_eq!(c.poll_job().map(|j| j.block()), Some(1));
        let counts = c.job_counts();
        assert_eq!((counts.offered, counts.used, counts.late), (3, 0, 2));
        // A cache that does not offload offers none.
        let mut none = EncoderCache::new(1 << 20, 0);
        none.get_or_load(ItemId(0), 0, 160, || Ok(encoder(10)))
            .expect("load");
        assert!(!none.offloads() && !none.offer_job(ItemId(0), 0));
    }
}
