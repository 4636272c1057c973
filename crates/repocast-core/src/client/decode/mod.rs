//! Blocks decoded off the receiving path. A block's decode (RaptorQ's
//! solve, Reed-Solomon's transforms: 4-11 ms for 1,000-1,250 symbols) is
//! CPU the receiving thread cannot spend on packets, and with interleaved
//! blocks most of them become decodable in the last few hundred
//! milliseconds of a file, one after another. With
//! [`super::ClientConfig::decode_jobs`] set, a block that has enough
//! symbols leaves the state machine as a [`DecodeJob`] (its decoder, and
//! the hash and length its bytes must have); the driver runs it on any
//! thread and hands it back ([`Client::decoded`]). The machine meanwhile
//! takes no symbols for the block and asks for none. A decode that fails
//! (a RaptorQ block short of rank) puts the decoder back to take more
//! symbols; a RaptorQ or Reed-Solomon block whose bytes fail their hash
//! keeps its symbols to screen them for the bad one (`decode_checked`),
//! any other starts over; and a job
//! for a block the machine no longer waits on (its item failed, the
//! block was resumed from disk meanwhile, or the job is a replaced
//! client's: [`Client::carry_jobs`]) is dropped.
//!
//! Bounds: at most `decode_jobs` blocks away at once; past that a block is
//! decoded on the receiving path, as without jobs. Each job holds one
//! block's symbols and its decoder's work space. A driver must hand every
//! job back: a block whose job never returns is never decoded.
use super::Client;
use super::item::ItemPhase;
use crate::ItemId;
use crate::fec::{BlockDecoder, Rejected};

/// Blocks out at once as decode jobs in what `get` and `listen` ship
/// ([`crate::profile::Profile::Lan`], [`crate::profile::Profile::Push`]):
/// with interleaved blocks several become decodable within a few
/// milliseconds of each other at the end of a file, and two jobs beside
/// the receiving thread keep a two-core receiver busy.
pub const DECODE_JOBS: usize = 2;

/// What became of a job's decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeOutcome {
    /// Not run yet.
    Pending,
    /// Decoded, and the bytes match the block's hash.
    Verified,
    /// Decoded, but the bytes do not match the block's hash (a forged or
    /// corrupt symbol), and the decoder keeps its symbols to screen them
    /// ([`crate::fec::BlockDecoder::reject`]): the block needs more.
    Suspect,
    /// Decoded, but the bytes do not match the block's hash, and the
    /// decoder cannot screen its symbols: the block starts over.
    Corrupt,
    /// Screened, and no share left out gave the block's bytes (more than
    /// one bad symbol): the block starts over.
    Exhausted,
    /// Screened, and with one share left out the bytes match the block's
    /// hash.
    Screened,
    /// The symbols were not enough (RaptorQ fails at K symbols about once
    /// in 200 blocks): the block needs more.
    Short,
    /// The driver could not run it (its thread panicked): the block starts
    /// over.
    Lost,
}

/// A client's decode jobs still out, for the client that replaces it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobsOut {
    next: u64,
    away: usize,
}

/// One block to decode and check, off the state machine.
pub struct DecodeJob {
    id: u64,
    item: ItemId,
    block: u32,
    decoder: Box<dyn BlockDecoder>,
    /// The block's length (the last one is short) and hash.
    len: usize,
    hash: [u8; 32],
    /// Whether bytes that fail their hash may be screened for.
    screen: bool,
    bytes: Vec<u8>,
    outcome: DecodeOutcome,
}

impl DecodeJob {
    /// Decodes the block and checks it against its hash.
    pub fn run(&mut self) {
        let hash = Some(&self.hash);
        (self.outcome, self.bytes) =
            decode_checked(self.decoder.as_mut(), self.len, hash, self.screen);
    }

    /// Marks the job as not run for good (its thread failed).
    pub fn lose(&mut self) {
        self.outcome = DecodeOutcome::Lost;
    }

    /// The item the block is of.
    pub fn item(&self) -> ItemId {
        self.item
    }

    /// The block.
    pub fn block(&self) -> u32 {
        self.block
    }

    /// What the decode came to.
    pub fn outcome(&self) -> DecodeOutcome {
        self.outcome
    }
}

/// Cuts a decoded block's `bytes` to its length (the last block is
/// short) and checks them against its hash: in a job, or where the
/// block's last symbol arrived.
pub(super) fn block_matches(bytes: &mut Vec<u8>, len: usize, hash: &[u8; 32]) -> bool {
    bytes.truncate(len);
    blake3::hash(bytes).as_bytes() == hash
}

/// Whether a block of `it` whose bytes fail their hash may have its
/// symbols screened: while the item's screenings that found nothing are
/// at most two more than those that found the bad share. Each costs up to
/// eight more decodes, so under forged symbols too many for a screening
/// to find (more than one in a block) the item soon goes back to
/// starting such blocks over, and screening cannot be made to cost more
/// than two decodes' worth per block it saved.
fn may_screen(it: &super::item::ItemRx) -> bool {
    it.screens_lost <= it.screens_won + 2
}

/// Decodes with `dec` and checks the bytes against the block's length
/// and hash (`None`: nothing to check, the accounting codec). Bytes that
/// fail are the decoder's to answer ([`BlockDecoder::reject`]): RaptorQ
/// keeps its symbols, and once it holds an eighth more than K, tries
/// with each share of them left out in turn, here, until one gives bytes
/// that check. So one forged symbol costs a block an eighth more symbols
/// and up to eight decodes, not all its symbols.
pub(super) fn decode_checked(
    dec: &mut dyn BlockDecoder,
    len: usize,
    hash: Option<&[u8; 32]>,
    screen: bool,
) -> (DecodeOutcome, Vec<u8>) {
    for _ in 0..=crate::fec::raptorq::SCREEN_SHARES {
        let Some(mut b) = dec.try_decode() else {
            return (DecodeOutcome::Short, Vec::new());
        };
        let good = match hash {
            None => DecodeOutcome::Verified,
            Some(_) if dec.screening() => DecodeOutcome::Screened,
            Some(_) => DecodeOutcome::Verified,
        };
        if hash.is_none_or(|h| block_matches(&mut b, len, h)) {
            return (good, b);
        }
        let outcome = match dec.reject(screen) {
            Rejected::Retry => continue,
            Rejected::Collect => DecodeOutcome::Suspect,
            Rejected::GiveUp => DecodeOutcome::Corrupt,
            Rejected::Exhausted => DecodeOutcome::Exhausted,
        };
        return (outcome, Vec::new());
    }
    // A decoder that kept asking to retry: over.
    (DecodeOutcome::Exhausted, Vec::new())
}

impl Client {
    /// Block `b` of `item`, whose decoder (now `dec`, taken out of its
    /// slot) has enough symbols: into a job if one may go out, else back
    /// to the caller to decode in place.
    pub(super) fn offer_decode(
        &mut self,
        item: ItemId,
        b: u32,
        dec: Box<dyn BlockDecoder>,
    ) -> Result<(), Box<dyn BlockDecoder>> {
        if self.jobs_away >= self.cfg.decode_jobs || !self.cfg.payloads {
            return Err(dec);
        }
        let Some(it) = self.items.get_mut(&item) else {
            return Err(dec);
        };
        let (Some(layout), Some(m)) = (it.layout, it.manifest.as_ref()) else {
            return Err(dec);
        };
        let Some(&hash) = m.block_hashes.get(b as usize) else {
            return Err(dec);
        };
        self.next_job += 1;
        it.decoding.insert(b, self.next_job);
        self.jobs_away += 1;
        self.decode_jobs.push_back(DecodeJob {
            id: self.next_job,
            item,
            block: b,
            decoder: dec,
            len: layout.block_len(b) as usize,
            hash,
            screen: may_screen(it),
            bytes: Vec::new(),
            outcome: DecodeOutcome::Pending,
        });
        Ok(())
    }

    /// The next block to decode, for the driver to run
    /// ([`DecodeJob::run`]) on any thread and hand back
    /// ([`Client::decoded`]).
    pub fn poll_decode(&mut self) -> Option<DecodeJob> {
        self.decode_jobs.pop_front()
    }

    /// Jobs handed out or waiting to be, not yet back.
    pub fn decodes_away(&self) -> usize {
        self.jobs_away
    }

    /// The jobs handed out and not back, for a client that replaces this
    /// one (a listener's next catalogue version; [`Client::carry_jobs`]).
    pub fn jobs_out(&self) -> JobsOut {
        JobsOut {
            next: self.next_job,
            away: self.jobs_away.saturating_sub(self.decode_jobs.len()),
        }
    }

    /// Takes over the jobs another client handed out: they come back
    /// here, and are dropped as stale (job ids go on from the other's), not
    /// taken for this client's blocks.
    pub fn carry_jobs(&mut self, j: JobsOut) {
        self.next_job = self.next_job.max(j.next);
        self.jobs_away += j.away;
    }

    /// A job from [`Client::poll_decode`], back. One not run is run here.
    pub fn decoded(&mut self, job: DecodeJob) {
        let item = job.item;
        self.take_job(job);
        self.recheck(item);
    }

    /// `item`'s last report said it needed nothing while blocks were out
    /// being decoded (`ItemRx::recheck`): once the last is back, any that
    /// failed are asked for at once. Its received and expected counts
    /// are zero: that transmission's were reported already.
    fn recheck(&mut self, item: ItemId) {
        let Some(it) = self
            .items
            .get_mut(&item)
            .filter(|it| it.decoding.is_empty())
        else {
            return;
        };
        let Some(tid) = it.recheck.take() else {
            return;
        };
        let needs = it.needs();
        if it.phase != ItemPhase::Receiving || needs.is_empty() {
            return;
        }
        self.late_nak(item, tid, needs);
    }

    fn take_job(&mut self, mut job: DecodeJob) {
        self.jobs_away = self.jobs_away.saturating_sub(1);
        let (item, b) = (job.item, job.block);
        let Some(it) = self.items.get_mut(&item) else {
            return;
        };
        if it.decoding.get(&b) != Some(&job.id) {
            return;
        }
        it.decoding.remove(&b);
        let waiting = it.phase == ItemPhase::Receiving
            && it.decoded.get(b as usize).is_some_and(|d| !*d)
            && it.decoders.get(b as usize).is_some_and(Option::is_none);
        if !waiting {
            return;
        }
        if job.outcome == DecodeOutcome::Pending {
            job.run();
        }
        if matches!(
            job.outcome,
            DecodeOutcome::Verified | DecodeOutcome::Screened
        ) {
            self.stats.decode_jobs += 1;
        }
        self.take_decoded(item, b, job.decoder, job.outcome, job.bytes);
    }

    /// Block `b` of `item`, whose decoder `dec` (out of its slot) is
    /// ready: decoded and checked here.
    pub(super) fn decode_in_place(&mut self, item: ItemId, b: u32, mut dec: Box<dyn BlockDecoder>) {
        let payloads = self.cfg.payloads;
        let Some(it) = self.items.get(&item) else {
            return;
        };
        let (Some(layout), Some(m)) = (it.layout, it.manifest.as_ref()) else {
            return;
        };
        let len = layout.block_len(b) as usize;
        let hash = m.block_hashes.get(b as usize).copied();
        if payloads && hash.is_none() {
            // Nothing to check it against: it cannot verify.
            return self.block_corrupt(item);
        }
        let (hash, screen) = (hash.as_ref().filter(|_| payloads), may_screen(it));
        let (outcome, bytes) = decode_checked(dec.as_mut(), len, hash, screen);
        self.take_decoded(item, b, dec, outcome, bytes);
    }

    /// What decoding block `b` of `item` came to (here or in a job): the
    /// block taken, its decoder back in its slot for more symbols, or the
    /// block started over (its failure counted).
    fn take_decoded(
        &mut self,
        item: ItemId,
        b: u32,
        dec: Box<dyn BlockDecoder>,
        outcome: DecodeOutcome,
        bytes: Vec<u8>,
    ) {
        let Some(slot) = (self.items.get_mut(&item)).and_then(|it| it.decoders.get_mut(b as usize))
        else {
            return;
        };
        match outcome {
            DecodeOutcome::Verified => self.block_verified(item, b, bytes),
            DecodeOutcome::Screened => {
                self.stats.screened_blocks += 1;
                if let Some(it) = self.items.get_mut(&item) {
                    it.screens_won += 1;
                }
                self.block_verified(item, b, bytes);
            }
            DecodeOutcome::Short => *slot = Some(dec),
            // A forged or corrupt symbol: screened, or the block over.
            DecodeOutcome::Suspect => {
                *slot = Some(dec);
                self.block_corrupt(item);
            }
            DecodeOutcome::Corrupt => {
                *slot = None;
                self.block_corrupt(item);
            }
            DecodeOutcome::Exhausted => {
                *slot = None;
                self.stats.screens_failed += 1;
                if let Some(it) = self.items.get_mut(&item) {
                    it.screens_lost += 1;
                }
            }
            // Its symbols are gone with the job: start over.
            DecodeOutcome::Lost | DecodeOutcome::Pending => *slot = None,
        }
    }
}

#[cfg(test)]
mod tests;
