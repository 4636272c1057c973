//! A push-mode server keeps an item's encoders between passes when the
//! item's blocks fit its budget (each block is read once, and the fountain
//! code's repair work is done ahead, spread over the source pass), and
//! streams a larger item: still one symbol of every block per round, its
//! source symbols read as they go, its repair symbols made ahead in
//! batches (each block read once per batch, the symbols held bounded).

use repocast_core::fec::layout::Layout;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::{BlockSource, ItemInfo, Server, SourceError, Transmit};
use repocast_core::wire::FecParams;
use repocast_core::{Instant, ItemId};
use std::time::Duration;

/// One item in memory, counting reads of whole blocks and of less.
struct Counting {
    bytes: Vec<u8>,
    reads: u64,
    small_reads: u64,
}

impl BlockSource for Counting {
    fn read(
        &mut self,
        _: ItemId,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        if len > 64 {
            self.reads += 1;
        } else {
            self.small_reads += 1;
        }
        let s = off as usize;
        out.extend_from_slice(self.bytes.get(s..s + len).ok_or(SourceError::PastEnd)?);
        Ok(())
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
    /// Most repair symbols held made ahead.
    peak_ahead: usize,
}

fn three_passes(blocks: usize, budget_blocks: u64, interval: Duration) -> Passes {
    let mut cfg = Profile::Push.server();
    cfg.symbol_size = 64;
    cfg.max_block_symbols = 50;
    cfg.packet_interval = interval;
    cfg.push_span_bytes = budget_blocks * 50 * 64;
    let fec = FecParams {
        code: cfg.code,
        symbol_size: cfg.symbol_size,
        max_block_symbols: cfg.max_block_symbols,
    };
    let mut r = Rng::new(5);
    let bytes: Vec<u8> = (0..blocks * 50 * 64).map(|_| r.next_u64() as u8).collect();
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
        reference.push(fec.code.encoder(50, 64, data).expect("encoder"));
    }
    let mut src = Counting {
        bytes,
        reads: 0,
        small_reads: 0,
    };
    let mut now = Instant::ZERO;
    let mut order = Vec::new();
    let mut esis = std::collections::HashSet::new();
    let mut peak_ahead = 0;
    let mut want = Vec::new();
    while order.len() < 3 * blocks * 50 {
        while let Some(t) = s.poll_transmit(now, &mut src) {
            if let Transmit::Data(d) = t {
                order.push(d.block.0);
                assert!(esis.insert((d.block.0, d.symbol)), "an id sent twice");
                reference[d.block.0 as usize].symbol(d.symbol, &mut want);
                assert_eq!(d.payload, want, "block {} symbol {}", d.block.0, d.symbol);
            }
        }
        peak_ahead = peak_ahead.max(s.push_symbols_ahead());
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
