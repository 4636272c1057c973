//! A push-mode server keeps an item's encoders between passes when the
//! item's blocks fit its budget (each block is read once, and the fountain
//! code's repair work is done ahead, spread over the source pass), and
//! streams a larger item: still one symbol of every block per round, its
//! source symbols read as they go, its repair symbols made ahead in
//! batches (each block read once per batch, the symbols held bounded),
//! in memory or, when the item is too large for that at the rate, in the
//! driver's spool (a batch of a block's worth, so each block is read about
//! once per pass).

use repocast_core::fec::layout::Layout;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::spool::{MemorySpool, SpoolError, SymbolSpool};
use repocast_core::server::{BlockSource, ItemInfo, Server, SourceError, Transmit};
use repocast_core::wire::FecParams;
use repocast_core::{Instant, ItemId};
use std::time::Duration;

/// One item in memory, counting reads of whole blocks and of less, with
/// a spool if given one (that fails from its `fail_at`-th write, or its
/// `read_fail_at`-th read, on).
struct Counting {
    bytes: Vec<u8>,
    reads: u64,
    small_reads: u64,
    symbol: usize,
    spool: Option<Failing>,
}

struct Failing {
    spool: MemorySpool,
    writes: u64,
    fail_at: u64,
    reads: u64,
    read_fail_at: u64,
}

impl SymbolSpool for Failing {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SpoolError> {
        self.writes += 1;
        if self.writes >= self.fail_at {
            return Err(SpoolError::Io(std::io::Error::other("disk full")));
        }
        self.spool.write_at(offset, bytes)
    }

    fn read_at(&mut self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), SpoolError> {
        self.reads += 1;
        if self.reads >= self.read_fail_at {
            return Err(SpoolError::Io(std::io::Error::other("bad sector")));
        }
        self.spool.read_at(offset, len, out)
    }
}

impl BlockSource for Counting {
    fn read(
        &mut self,
        _: ItemId,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        if len > self.symbol {
            self.reads += 1;
        } else {
            self.small_reads += 1;
        }
        let s = off as usize;
        out.extend_from_slice(self.bytes.get(s..s + len).ok_or(SourceError::PastEnd)?);
        Ok(())
    }

    fn spool(&mut self) -> Option<&mut dyn SymbolSpool> {
        self.spool.as_mut().map(|s| s as &mut dyn SymbolSpool)
    }
}

/// What the push server did over three passes of one item of `blocks`
/// blocks of 50 symbols, with a budget of `budget_blocks` blocks, sending
/// a packet every `interval`.
struct Passes {
    /// Whole-block reads.
    reads: u64,
    /// Reads of one symbol.
    small_reads: u64,
    blocks: u64,
    /// Blocks of the data packets, in sending order.
    order: Vec<u32>,
    /// Most repair symbols held made ahead in memory.
    peak_ahead: usize,
    /// Most held in the spool.
    peak_spooled: usize,
    /// The spool's extent (the disk a file spool takes).
    spool_extent: u64,
    spool_errors: u64,
}

fn three_passes(blocks: usize, budget_blocks: u64, interval: Duration) -> Passes {
    passes(Setup {
        blocks,
        k: 50,
        symbol: 64,
        budget_blocks,
        interval,
        spool: None,
    })
}

struct Setup {
    blocks: usize,
    /// Symbols per block.
    k: u32,
    /// Bytes per symbol.
    symbol: u16,
    budget_blocks: u64,
    interval: Duration,
    /// The spool's budget in bytes and the write and read it fails at,
    /// if any.
    spool: Option<(u64, u64, u64)>,
}

/// Three passes of one item, as [`Setup`] says.
fn passes(setup: Setup) -> Passes {
    let Setup {
        blocks,
        k,
        symbol,
        budget_blocks,
        interval,
        spool,
    } = setup;
    let block_bytes = k as usize * symbol as usize;
    let mut cfg = Profile::Push.server();
    cfg.symbol_size = symbol;
    cfg.max_block_symbols = k;
    cfg.packet_interval = interval;
    cfg.push_span_bytes = budget_blocks * block_bytes as u64;
    cfg.push_spool_bytes = spool.map_or(0, |(b, _, _)| b);
    // Passes of exactly k symbols a block, so three passes are 3 x blocks
    // x k packets (not sized for a loss: `PassOdds`).
    cfg.push_pass_odds = None;
    let fec = FecParams {
        code: cfg.code,
        symbol_size: cfg.symbol_size,
        max_block_symbols: cfg.max_block_symbols,
    };
    let mut r = Rng::new(5);
    let bytes: Vec<u8> = (0..blocks * block_bytes)
        .map(|_| r.next_u64() as u8)
        .collect();
    let layout = Layout::new(bytes.len() as u64, &fec).expect("layout");
    let block_hashes = (0..layout.blocks())
        .map(|b| {
            let o = layout.block_offset(b) as usize;
            *blake3::hash(&bytes[o..o + layout.block_len(b) as usize]).as_bytes()
        })
        .collect();
    let info = ItemInfo {
        name: "f".into(),
        size: bytes.len() as u64,
        hash: *blake3::hash(&bytes).as_bytes(),
        block_hashes,
    };
    let mut s = Server::new(cfg, vec![info]).expect("server");
    // The symbols a fresh encoder gives, to check every packet against.
    let mut reference = Vec::new();
    for b in 0..layout.blocks() {
        let o = layout.block_offset(b) as usize;
        let data = bytes[o..o + layout.block_len(b) as usize].to_vec();
        reference.push(fec.code.encoder(k, symbol, data).expect("encoder"));
    }
    let mut src = Counting {
        bytes,
        reads: 0,
        small_reads: 0,
        symbol: symbol as usize,
        spool: spool.map(|(_, fail_at, read_fail_at)| Failing {
            spool: MemorySpool::new(),
            writes: 0,
            fail_at,
            reads: 0,
            read_fail_at,
        }),
    };
    let mut now = Instant::ZERO;
    let mut order = Vec::new();
    let mut esis = std::collections::HashSet::new();
    let (mut peak_ahead, mut peak_spooled) = (0, 0);
    let mut want = Vec::new();
    while order.len() < 3 * blocks * k as usize {
        while let Some(t) = s.poll_transmit(now, &mut src) {
            if let Transmit::Data(d) = t {
                order.push(d.block.0);
                assert!(esis.insert((d.block.0, d.symbol)), "an id sent twice");
                reference[d.block.0 as usize].symbol(d.symbol, &mut want);
                assert_eq!(d.payload, want, "block {} symbol {}", d.block.0, d.symbol);
            }
        }
        peak_ahead = peak_ahead.max(s.push_symbols_ahead());
        peak_spooled = peak_spooled.max(s.push_symbols_spooled());
        now = s
            .poll_timeout()
            .expect("a push server always has a next send");
    }
    Passes {
        reads: src.reads,
        small_reads: src.small_reads,
        blocks: layout.blocks() as u64,
        order,
        peak_ahead,
        peak_spooled,
        spool_extent: src.spool.as_ref().map_or(0, |s| s.spool.extent()),
        spool_errors: s.push_spool_errors(),
    }
}

/// Every round (each run of `blocks` packets) has one symbol of every block.
fn every_round_takes_every_block(p: &Passes) {
    for (r, round) in p.order.chunks(p.blocks as usize).enumerate() {
        let mut seen: Vec<u32> = round.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len() as u64, p.blocks, "round {r}: {round:?}");
    }
}

#[test]
fn an_item_within_the_budget_is_read_once_across_passes() {
    let p = three_passes(6, 8, Duration::from_micros(100));
    assert_eq!((p.reads, p.small_reads), (p.blocks, 0));
    assert_eq!(p.peak_ahead, 0);
    every_round_takes_every_block(&p);
}

#[test]
fn an_item_larger_than_the_budget_is_streamed_round_by_round() {
    // A budget of 2 blocks of 50 symbols for 20 blocks: 64 repair symbols
    // made ahead per block (the floor; the budget would give 5).
    let p = three_passes(20, 2, Duration::from_micros(100));
    every_round_takes_every_block(&p);
    // Source symbols are read one by one, once each.
    assert_eq!(p.small_reads, p.blocks * 50);
    // Two passes of 50 repair symbols per block, made 32 to 64 at a time.
    assert!(
        p.reads >= p.blocks * 100 / 64 && p.reads <= p.blocks * (100 / 32 + 2),
        "{} block reads for {} blocks",
        p.reads,
        p.blocks
    );
    assert!(p.peak_ahead <= 20 * 64, "{} symbols held", p.peak_ahead);
}

#[test]
fn an_item_too_large_to_stream_at_the_rate_goes_in_spans() {
    // At 20 million packets a second, making 64 symbols ahead per read of
    // a 3,200-byte block would take more than half a core: spans of 2
    // blocks, every round of one span before the next, each block read
    // again each pass (and never a symbol at a time).
    let p = three_passes(20, 2, Duration::from_nanos(50));
    assert_eq!(p.small_reads, 0);
    assert!(
        p.reads >= 3 * p.blocks,
        "{} reads of {} blocks",
        p.reads,
        p.blocks
    );
    assert_eq!(p.peak_ahead, 0);
    // The first 50 rounds of a pass: blocks 0 and 1 only.
    let mut first: Vec<u32> = p.order[..100].to_vec();
    first.sort_unstable();
    first.dedup();
    assert_eq!(first, vec![0, 1]);
}

/// 20 blocks of 400 symbols of 256 bytes, a memory budget of 2 blocks, a
/// packet every 10 µs: made ahead in memory, 64 symbols per read of a
/// 100 KiB block would take more than half a core at that rate.
fn spooled(spool: Option<(u64, u64, u64)>) -> Passes {
    passes(Setup {
        blocks: 20,
        k: 400,
        symbol: 256,
        budget_blocks: 2,
        interval: Duration::from_micros(10),
        spool,
    })
}

#[test]
fn an_item_too_large_to_stream_in_memory_streams_through_the_spool() {
    let p = spooled(Some((1 << 30, u64::MAX, u64::MAX)));
    every_round_takes_every_block(&p);
    assert_eq!(p.small_reads, p.blocks * 400, "source symbols read once");
    // A block's worth per batch, topped up from under half: two repair
    // passes of 400 symbols per block take 2 to 5 reads of it.
    assert!(
        p.reads >= 2 * p.blocks && p.reads <= 5 * p.blocks,
        "{} block reads for {} blocks",
        p.reads,
        p.blocks
    );
    assert_eq!(p.peak_ahead, 0, "nothing held in memory");
    assert!(p.peak_spooled > 20 * 64 && p.peak_spooled <= 20 * 400);
    // The spool never grows past a batch of every block.
    assert_eq!(p.spool_extent, 20 * 400 * 256);
    assert_eq!(p.spool_errors, 0);
    // Without a spool the same item goes in spans (each block read once a
    // pass, every round of one span before the next's).
    let q = spooled(None);
    assert_eq!(q.small_reads, 0);
    let mut first: Vec<u32> = q.order[..800].to_vec();
    first.sort_unstable();
    first.dedup();
    assert_eq!(first, vec![0, 1]);
}

#[test]
fn a_spool_smaller_than_the_item_takes_smaller_batches_within_its_budget() {
    // Room for 200 symbols of each block: about twice the reads, no more
    // disk than the budget.
    let budget = 20 * 200 * 256;
    let p = spooled(Some((budget, u64::MAX, u64::MAX)));
    every_round_takes_every_block(&p);
    assert!(p.spool_extent <= budget, "{} bytes", p.spool_extent);
    assert!(
        p.reads >= 4 * p.blocks && p.reads <= 9 * p.blocks,
        "{} block reads for {} blocks",
        p.reads,
        p.blocks
    );
    assert_eq!(p.peak_ahead, 0);
}

#[test]
fn a_failing_spool_falls_back_to_memory_with_the_same_symbols() {
    // The spool fails at its 10th write, or its 1,000th read (in the
    // first repair pass): every packet is still the right symbol and no id
    // goes out twice (both checked as they are sent), the failure is
    // counted, and memory holds at most the floor's batch.
    for (fail_write, fail_read) in [(10, u64::MAX), (u64::MAX, 1000)] {
        let p = spooled(Some((1 << 30, fail_write, fail_read)));
        every_round_takes_every_block(&p);
        assert_eq!(p.spool_errors, 1);
        let held = p.peak_ahead;
        assert!(held > 0 && held <= 20 * 64, "{held} symbols held");
        assert!(p.peak_spooled > 0);
        assert_eq!(p.small_reads, p.blocks * 400);
    }
}
