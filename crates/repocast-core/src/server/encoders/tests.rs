//! The encoder cache's budget (least recently used first, small blocks
//! charged what they hold), where memory, the spool and spans take over,
//! and preparing an item's blocks once each.

use super::*;
use crate::fec::CodeKind;

fn load(k: u32) -> Result<Box<dyn BlockEncoder>, ReadFailed> {
    CodeKind::RaptorQ
        .encoder(k, 16, vec![7; k as usize * 16])
        .map_err(|e| ReadFailed(e.into()))
}

#[test]
fn the_least_recently_used_goes_first_and_the_budget_holds() {
    let mut c = EncoderCache::new(300, 10_000);
    for b in 0..3 {
        c.get_or_load(ItemId(0), b, 100, || load(4)).expect("load");
    }
    // Touch block 0; block 1 is now the oldest.
    c.get_or_load(ItemId(0), 0, 100, || panic!("kept"))
        .expect("kept");
    c.get_or_load(ItemId(1), 0, 100, || load(4)).expect("load");
    assert_eq!((c.len(), c.bytes()), (3, 300));
    let mut reloaded = false;
    c.get_or_load(ItemId(0), 1, 100, || {
        reloaded = true;
        load(4)
    })
    .expect("load");
    assert!(reloaded, "block 1 should have been evicted");
    // One block larger than the budget is still kept, alone.
    c.get_or_load(ItemId(2), 0, 1000, || load(4)).expect("load");
    assert_eq!((c.len(), c.bytes()), (1, 1000));
}

/// A kept encoder counts what it holds: a block of one symbol is
/// charged many times its bytes (RaptorQ pads it to 10 and makes 27
/// intermediate symbols), a large block its own bytes.
#[test]
fn a_small_blocks_encoder_is_charged_what_it_holds() {
    use crate::wire::FecParams;
    let fec = |code| FecParams {
        code,
        symbol_size: 1320,
        max_block_symbols: 1000,
    };
    let rq = fec(CodeKind::RaptorQ);
    let tiny = Layout::new(100, &rq).expect("layout");
    assert!(charge(&tiny, CodeKind::RaptorQ, 0) >= 14 * 1320);
    let large = Layout::new(1000 * 1320, &rq).expect("layout");
    assert_eq!(charge(&large, CodeKind::RaptorQ, 0), 1000 * 1320);
    let fifty = Layout::new(50 * 1320, &rq).expect("layout");
    assert_eq!(charge(&fifty, CodeKind::RaptorQ, 0), 50 * 1320);
    let rs = Layout::new(1000 * 1320, &fec(CodeKind::ReedSolomon)).expect("layout");
    assert_eq!(charge(&rs, CodeKind::ReedSolomon, 0), 1000 * 1320);
    // So a budget of 32 MiB keeps about 1,400 tiny blocks' encoders
    // (under 70 MiB of memory), not all 25,000 (860 MiB).
    let mut cache = EncoderCache::new(32 << 20, 10_000);
    let bytes = charge(&tiny, CodeKind::RaptorQ, 0);
    for i in 0..25_000 {
        cache
            .get_or_load(ItemId(i), 0, bytes, || load(1))
            .expect("load");
    }
    assert_eq!(cache.len() as u64, (32 << 20) / bytes);
    assert!((1_300..1_500).contains(&cache.len()), "{}", cache.len());
}

/// Where each way of sending a large item takes over, with `push`'s
/// defaults (1,440-byte symbols, blocks of 1,250, 64 MiB in memory, a
/// 4 GiB spool): what README and docs/protocol.md say.
#[test]
fn where_memory_the_spool_and_spans_take_over() {
    use crate::profile::Profile;
    use crate::wire::FecParams;
    let fec = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: 1440,
        max_block_symbols: crate::profile::PUSH_RAPTORQ_BLOCK_SYMBOLS,
    };
    let fit = |mib: u64, mbps: u64| {
        let mut cfg = Profile::Push.server();
        cfg.set_rate(mbps * 1_000_000, false).expect("rate");
        let pps = 1_000_000_000 / cfg.packet_interval.as_nanos() as u64;
        let layout = Layout::new(mib << 20, &fec).expect("layout");
        EncoderCache::new(cfg.push_span_bytes, pps)
            .with_spool(cfg.push_spool_bytes)
            .fit(ItemId(0), &layout)
    };
    assert_eq!(fit(64, 1000), Fit::Kept);
    assert_eq!(fit(600, 100), Fit::Streamed);
    assert_eq!(fit(700, 100), Fit::Spooled);
    assert_eq!(fit(32 << 10, 100), Fit::Spooled);
    assert_eq!(fit(48 << 10, 100), Fit::Spans);
    assert_eq!(fit(200, 400), Fit::Spooled);
    assert_eq!(fit(4 << 10, 400), Fit::Spooled);
    assert_eq!(fit(1 << 10, 750), Fit::Spooled);
    assert_eq!(fit(1 << 10, 900), Fit::Spans);
    // No spool: spans from where memory stops.
    let mut c = EncoderCache::new(64 << 20, 8_000);
    let layout = Layout::new(700 << 20, &fec).expect("layout");
    assert_eq!(c.fit(ItemId(0), &layout), Fit::Spans);
}

#[test]
fn prepare_one_works_through_an_items_blocks_once_each() {
    let mut c = EncoderCache::new(1 << 20, 10_000);
    for b in 0..3 {
        c.get_or_load(ItemId(0), b, 100, || load(10)).expect("load");
    }
    c.get_or_load(ItemId(1), 0, 100, || load(10)).expect("load");
    assert!(c.prepare_one(ItemId(0)));
    assert!(c.prepare_one(ItemId(0)));
    assert!(c.prepare_one(ItemId(0)));
    assert!(!c.prepare_one(ItemId(0)), "item 0 is all prepared");
    assert!(c.prepare_one(ItemId(1)));
    // A prepared encoder still gives the same repair symbols.
    let mut fresh = load(10).expect("load");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    fresh.symbol(12, &mut a);
    c.get_or_load(ItemId(0), 0, 100, || panic!("kept"))
        .expect("kept")
        .symbol(12, &mut b);
    assert_eq!(a, b);
}
