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
//! symbols, a block whose bytes fail their hash starts over, and a job
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
use crate::fec::BlockDecoder;

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
    /// corrupt symbol).
    Corrupt,
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
    bytes: Vec<u8>,
    outcome: DecodeOutcome,
}

impl DecodeJob {
    /// Decodes the block and checks it against its hash.
    pub fn run(&mut self) {
        self.outcome = match self.decoder.try_decode() {
            None => DecodeOutcome::Short,
            Some(mut b) => {
                let ok = block_matches(&mut b, self.len, &self.hash);
                self.bytes = b;
                if ok {
                    DecodeOutcome::Verified
                } else {
                    DecodeOutcome::Corrupt
                }
            }
        };
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
    pub fn decoded(&mut self, mut job: DecodeJob) {
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
        match job.outcome {
            DecodeOutcome::Verified => {
                self.stats.decode_jobs += 1;
                self.block_verified(item, b, job.bytes);
            }
            DecodeOutcome::Short => it.decoders[b as usize] = Some(job.decoder),
            // A forged or corrupt symbol: start this block over.
            DecodeOutcome::Corrupt => self.block_corrupt(item),
            // Its symbols are gone with the job: start over.
            DecodeOutcome::Lost | DecodeOutcome::Pending => {}
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
            let ids = (0..kb).filter(|i| i % 5 != 0).chain(kb..kb + kb / 5 + 2);
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

        // Corrupt (the bytes fail the block's hash): counted, and over.
        let mut c = client(2, &m);
        feed(&mut c, &packets[0]);
        let mut job = c.poll_decode().expect("job");
        job.hash = [0; 32];
        job.run();
        assert_eq!(job.outcome(), DecodeOutcome::Corrupt);
        c.decoded(job);
        assert_eq!(c.stats().corrupt_blocks, 1);
        assert!(verified(&mut c).is_empty());
        feed(&mut c, &packets[0]);
        assert!(c.poll_decode().is_some());
    }

    /// Forged symbols that keep making its blocks fail their hash fail the
    /// item, with the reason, once more than `corrupt_limit` have, where
    /// the settings say so (a listener that drops out: push has no repair
    /// budget to end it); otherwise it keeps collecting.
    #[test]
    fn an_item_whose_blocks_keep_failing_their_hash_fails() {
        let (m, packets) = item(CodeKind::RaptorQ, 40, 2);
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
