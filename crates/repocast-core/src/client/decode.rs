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
mod tests {
    use super::*;
    use crate::client::{ClientConfig, ClientEvent};
    use crate::fec::CodeKind;
    use crate::fec::layout::Layout;
    use crate::wire::{DataRepr, FecParams, ManifestEntry};
    use crate::{BlockId, Instant, SessionId, TransmissionId};

    const T: u16 = 64;
    const ITEM: ItemId = ItemId(3);

    /// An item of `blocks` blocks of up to `k` symbols (the last short),
    /// its manifest, and every block's packets: the source symbols but
    /// every fifth, then as many repair symbols, so each decode has work.
    fn item(code: CodeKind, k: u32, blocks: u32) -> (ManifestEntry, Vec<Vec<DataRepr>>) {
        item_and_more(code, k, blocks, 0)
    }

    /// As [`item`], with `more` further repair symbols of each block after
    /// its packets.
    fn item_and_more(
        code: CodeKind,
        k: u32,
        blocks: u32,
        more: u32,
    ) -> (ManifestEntry, Vec<Vec<DataRepr>>) {
        let size = (k * blocks) as u64 * T as u64 - 100;
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 251) as u8).collect();
        let fec = FecParams {
            code,
            symbol_size: T,
            max_block_symbols: k,
        };
        let l = Layout::new(size, &fec).expect("layout");
        let mut hashes = Vec::new();
        let mut packets = Vec::new();
        for b in 0..l.blocks() {
            let (off, len) = (l.block_offset(b) as usize, l.block_len(b) as usize);
            let bytes = &data[off..off + len];
            hashes.push(*blake3::hash(bytes).as_bytes());
            let kb = l.block_symbols(b);
            let mut padded = bytes.to_vec();
            padded.resize(kb as usize * T as usize, 0);
            let mut enc = code.encoder(kb, T, padded).expect("encoder");
            let ids = (0..kb)
                .filter(|i| i % 5 != 0)
                .chain(kb..kb + kb / 5 + 2 + more);
            packets.push(
                ids.map(|symbol| {
                    let mut payload = Vec::new();
                    enc.symbol(symbol, &mut payload);
                    DataRepr {
                        session: SessionId(1),
                        transmission: TransmissionId(1),
                        item: ITEM,
                        block: BlockId(b),
                        symbol,
                        seq: 0,
                        probe: None,
                        payload,
                        tag: Vec::new(),
                        encrypted: false,
                    }
                })
                .collect(),
            );
        }
        let m = ManifestEntry {
            item: ITEM,
            name: "f".into(),
            size,
            hash: *blake3::hash(&data).as_bytes(),
            fec,
            block_hashes: hashes,
        };
        (m, packets)
    }

    fn client(jobs: usize, m: &ManifestEntry) -> Client {
        let mut c = Client::new(ClientConfig {
            decode_jobs: jobs,
            ..ClientConfig::default()
        });
        c.subscribe(Instant::ZERO, vec![m.clone()]);
        c
    }

    /// The blocks verified so far (block, bytes), in order of block.
    fn verified(c: &mut Client) -> Vec<(u32, Vec<u8>)> {
        let mut v: Vec<_> = std::iter::from_fn(|| c.poll_event())
            .filter_map(|e| match e {
                ClientEvent::BlockVerified { block, data, .. } => Some((block, data)),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn blocks_decoded_in_jobs_come_out_as_they_would_in_place() {
        for code in [CodeKind::RaptorQ, CodeKind::ReedSolomon] {
            let (m, packets) = item(code, 40, 5);
            let mut here = client(0, &m);
            let mut away = client(2, &m);
            // The jobs come back late and out of order: each after the
            // next block's packets, the later one first.
            let mut out: Vec<DecodeJob> = Vec::new();
            for block in &packets {
                for p in block {
                    assert_eq!(
                        here.handle_data(Instant::ZERO, p),
                        away.handle_data(Instant::ZERO, p)
                    );
                }
                while let Some(mut j) = out.pop() {
                    j.run();
                    away.decoded(j);
                }
                out.extend(std::iter::from_fn(|| away.poll_decode()));
                assert!(away.decodes_away() <= 2);
            }
            for mut j in out {
                j.run();
                away.decoded(j);
            }
            let (a, b) = (verified(&mut here), verified(&mut away));
            assert_eq!(a.len(), 5, "{code:?}");
            assert_eq!(a, b, "{code:?}");
            assert_eq!(here.stats().decode_jobs, 0);
            assert_eq!(away.stats().decode_jobs, 5, "{code:?}");
            assert_eq!(away.decodes_away(), 0);
        }
    }

    #[test]
    fn a_block_away_asks_for_nothing_and_past_the_bound_blocks_decode_in_place() {
        let (m, packets) = item(CodeKind::RaptorQ, 40, 3);
        let mut c = client(1, &m);
        for p in packets.iter().flatten() {
            c.handle_data(Instant::ZERO, p);
        }
        // One job away (the first block ready); the others decoded here.
        let mut job = c.poll_decode().expect("a job");
        assert!(c.poll_decode().is_none());
        assert_eq!((job.item(), job.block()), (ITEM, 0));
        let got: Vec<u32> = verified(&mut c).into_iter().map(|v| v.0).collect();
        assert_eq!(got, vec![1, 2]);
        let it = c.items.get(&ITEM).expect("item");
        assert!(it.block_need(0).is_none(), "a block away is not asked for");
        // Symbols for it now are of no use.
        assert!(!c.handle_data(Instant::ZERO, &packets[0][0]));
        job.run();
        assert_eq!(job.outcome(), DecodeOutcome::Verified);
        c.decoded(job);
        assert_eq!(verified(&mut c).len(), 1);
        assert_eq!(c.items.get(&ITEM).map(|i| i.blocks_left), Some(0));
    }

    #[test]
    fn a_short_lost_or_corrupt_decode_takes_the_block_up_again() {
        let (m, packets) = item(CodeKind::RaptorQ, 40, 1);
        let feed = |c: &mut Client, ps: &[DataRepr]| {
            for p in ps {
                c.handle_data(Instant::ZERO, p);
            }
        };
        // Short (RaptorQ short of rank): the decoder comes back and the
        // next symbol makes another job.
        let mut c = client(2, &m);
        feed(&mut c, &packets[0]);
        let mut job = c.poll_decode().expect("job");
        job.outcome = DecodeOutcome::Short;
        c.decoded(job);
        assert!(c.items.get(&ITEM).and_then(|i| i.block_need(0)).is_some());
        // The block's last symbol came while it was away (of no use
        // then); now it is taken, and makes another job.
        let last = packets[0].last().expect("symbols");
        assert!(c.handle_data(Instant::ZERO, last));
        let mut job = c.poll_decode().expect("a second job");
        job.run();
        c.decoded(job);
        assert_eq!(verified(&mut c).len(), 1);

        // Lost (its thread panicked): the block starts over.
        let mut c = client(2, &m);
        feed(&mut c, &packets[0]);
        let mut job = c.poll_decode().expect("job");
        job.lose();
        c.decoded(job);
        let k = Layout::new(m.size, &m.fec)
            .expect("layout")
            .block_symbols(0);
        assert_eq!(
            c.items
                .get(&ITEM)
                .and_then(|i| i.block_need(0))
                .map(|n| n.count),
            Some(k)
        );
        feed(&mut c, &packets[0]);
        let mut job = c.poll_decode().expect("job again");
        job.run();
        c.decoded(job);
        assert_eq!(verified(&mut c).len(), 1);
        assert_eq!(c.stats().corrupt_blocks, 0);

        // Corrupt (the bytes fail the block's hash, and its symbols may
        // not be screened: the item's screenings kept finding nothing):
        // counted, and over. Suspect where they may: kept, more needed.
        for screen in [false, true] {
            let (m, packets) = item(CodeKind::ReedSolomon, 40, 1);
            let mut c = client(2, &m);
            feed(&mut c, &packets[0]);
            let mut job = c.poll_decode().expect("job");
            job.hash = [0; 32];
            job.screen = screen;
            job.run();
            c.decoded(job);
            assert_eq!(c.stats().corrupt_blocks, 1);
            assert!(verified(&mut c).is_empty());
            let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
            let need = need.map_or(0, |n| n.count);
            let k = Layout::new(m.size, &m.fec)
                .expect("layout")
                .block_symbols(0);
            if screen {
                // The K it decoded from (the last symbol came while it was
                // away), and an eighth more asked for.
                assert_eq!(c.held_symbols(ITEM, 0), k);
                assert!((5..=10).contains(&need), "{need} more asked");
            } else {
                assert_eq!(need, k, "over: k again");
                feed(&mut c, &packets[0]);
                assert!(c.poll_decode().is_some());
            }
        }
    }

    /// Forged symbols that keep making its blocks fail their hash fail the
    /// item, with the reason, once more than `corrupt_limit` have, where
    /// the settings say so (a listener that drops out: push has no repair
    /// budget to end it); otherwise it keeps collecting.
    /// One forged symbol among a block's: the decode fails its hash, the
    /// decoder keeps its symbols and asks for an eighth more than K; then
    /// one of the decodes with a share left out verifies. Two forged
    /// symbols in different shares: no share gives the block, which
    /// starts over. In place and as a job alike, RaptorQ and
    /// Reed-Solomon alike (a forged source symbol, 7, and a forged repair
    /// one, 180).
    #[test]
    fn a_forged_symbol_is_screened_out_of_a_block() {
        let k = 200;
        let first = k as usize + 2;
        let codes = [CodeKind::RaptorQ, CodeKind::ReedSolomon];
        for (code, (jobs, forged)) in codes.into_iter().flat_map(|c| {
            [
                (2, vec![7]),
                (0, vec![180]),
                (2, vec![7, 12]),
                (0, vec![7, 180]),
            ]
            .map(|j| (c, j))
        }) {
            let (m, packets) = item_and_more(code, k, 1, k / 3);
            let mut c = client(jobs, &m);
            for (i, p) in packets[0].iter().enumerate() {
                let mut p = p.clone();
                if forged.contains(&i) {
                    p.payload[3] ^= 0x5a;
                }
                c.handle_data(Instant::ZERO, &p);
                while let Some(mut job) = c.poll_decode() {
                    job.run();
                    c.decoded(job);
                }
                if i + 1 == first {
                    // The first decode failed its hash; its symbols kept.
                    assert_eq!(c.stats().corrupt_blocks, 1, "{code:?} {jobs} {forged:?}");
                    let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
                    let need = need.map_or(0, |n| n.count);
                    assert!((20..=40).contains(&need), "{need} more asked");
                    assert_eq!(c.held_symbols(ITEM, 0), first as u32);
                }
            }
            let got = verified(&mut c).len();
            if forged.len() == 1 {
                assert_eq!(got, 1, "{code:?} {jobs}: screened and verified");
                assert_eq!(c.stats().screened_blocks, 1);
                assert_eq!(c.stats().screens_failed, 0);
            } else {
                assert_eq!(got, 0, "{code:?} {jobs}: two bad shares");
                assert_eq!(c.stats().screens_failed, 1);
                // Started over: K symbols needed again.
                let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
                let need = need.map_or(0, |n| n.count);
                assert!(need >= k - 40, "{need} needed");
            }
            assert_eq!(c.stats().corrupt_blocks, 1);
        }
    }

    /// Forged symbols too many for a screening to find (two in a block,
    /// again and again): after three screenings that found nothing and
    /// none that found the bad share, the item's blocks start over
    /// without one (each costs up to eight more decodes).
    #[test]
    fn screenings_that_keep_finding_nothing_stop() {
        let k = 200;
        let (m, packets) = item_and_more(CodeKind::RaptorQ, k, 1, k / 3);
        let mut c = client(2, &m);
        for round in 0..8 {
            for (i, p) in packets[0].iter().enumerate() {
                let mut p = p.clone();
                // Two forged in every eight packets' window.
                if i % 8 == 3 || i % 8 == 6 {
                    p.payload[3] ^= 0x5a;
                }
                c.handle_data(Instant::ZERO, &p);
                while let Some(mut job) = c.poll_decode() {
                    job.run();
                    c.decoded(job);
                }
            }
            assert!(verified(&mut c).is_empty(), "round {round}");
        }
        let s = c.stats();
        assert_eq!((s.screened_blocks, s.screens_failed), (0, 3), "{s:?}");
        assert!(s.corrupt_blocks >= 6, "{s:?}");
    }

    #[test]
    fn an_item_whose_blocks_keep_failing_their_hash_fails() {
        // Blocks not screened (as after screenings that kept finding
        // nothing): each failure starts its block over. A screened one
        // counts the same (above).
        let (m, packets) = item(CodeKind::ReedSolomon, 40, 2);
        let limit = crate::client::corrupt_limit(2);
        assert_eq!(limit, 14);
        for fail in [true, false] {
            let mut c = Client::new(ClientConfig {
                decode_jobs: 2,
                fail_on_forgery: fail,
                ..ClientConfig::default()
            });
            c.subscribe(Instant::ZERO, vec![m.clone()]);
            let mut failed = Vec::new();
            for n in 1..=limit + 1 {
                for p in &packets[(n % 2) as usize] {
                    c.handle_data(Instant::ZERO, p);
                }
                let mut job = c.poll_decode().expect("job");
                job.hash = [0; 32];
                job.screen = false;
                job.run();
                c.decoded(job);
                failed.extend(
                    std::iter::from_fn(|| c.poll_event()).filter_map(|e| match e {
                        ClientEvent::ItemFailed { reason, .. } => Some((n, reason)),
                        _ => None,
                    }),
                );
            }
            assert_eq!(c.stats().corrupt_blocks, u64::from(limit) + 1);
            if !fail {
                assert!(failed.is_empty() && !c.is_finished(), "{failed:?}");
                continue;
            }
            assert_eq!(failed.len(), 1, "{failed:?}");
            assert_eq!(failed[0].0, limit + 1, "failed after {limit} more");
            assert!(failed[0].1.contains("failed their hash"), "{}", failed[0].1);
            assert!(c.is_finished());
            assert!(c.poll_decode().is_none());
        }
    }

    #[test]
    fn a_job_for_a_block_no_longer_waited_on_is_dropped() {
        let (m, packets) = item(CodeKind::ReedSolomon, 40, 2);
        let feed = |c: &mut Client| {
            for p in packets.iter().flatten() {
                c.handle_data(Instant::ZERO, p);
            }
        };
        // Resumed from disk meanwhile.
        let mut c = client(2, &m);
        feed(&mut c);
        let mut job = c.poll_decode().expect("job");
        c.resume_block(ITEM, job.block());
        job.run();
        c.decoded(job);
        assert!(verified(&mut c).iter().all(|v| v.0 != 0));
        assert_eq!(c.stats().decode_jobs, 0);
        // Abandoned meanwhile.
        let mut c = client(2, &m);
        feed(&mut c);
        let jobs: Vec<_> = std::iter::from_fn(|| c.poll_decode()).collect();
        c.abandon(ITEM, "gone".into());
        for mut j in jobs {
            j.run();
            c.decoded(j);
        }
        assert!(verified(&mut c).is_empty());
        assert_eq!(c.decodes_away(), 0);
        // A job of the client this one replaced (a listener's new
        // version) never counts for this one's blocks, whose ids go on.
        let mut old = client(2, &m);
        feed(&mut old);
        let stale = old.poll_decode().expect("job");
        let mut new = client(2, &m);
        new.carry_jobs(old.jobs_out());
        assert_eq!(new.decodes_away(), 1);
        feed(&mut new);
        // The old job counts against the bound: one of this one's two
        // blocks goes out, the other is decoded in place.
        let mut mine: Vec<_> = std::iter::from_fn(|| new.poll_decode()).collect();
        assert_eq!((mine.len(), new.decodes_away()), (1, 2));
        let mut stale = stale;
        stale.run();
        new.decoded(stale);
        let got: Vec<u32> = verified(&mut new).into_iter().map(|v| v.0).collect();
        assert_eq!(got, vec![1]);
        for j in &mut mine {
            j.run();
        }
        for j in mine {
            new.decoded(j);
        }
        let got: Vec<u32> = verified(&mut new).into_iter().map(|v| v.0).collect();
        assert_eq!(got, vec![0]);
        assert_eq!(new.decodes_away(), 0);
    }
}
