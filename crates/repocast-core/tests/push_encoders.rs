//! A push-mode server keeps an item's encoders between passes when the
//! item fits one span (each block is read once, and the fountain code's
//! repair work is done ahead, spread over the source pass), and re-reads
//! an item larger than a span on every pass (memory stays bounded).

use repocast_core::fec::layout::Layout;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::{BlockSource, ItemInfo, Server, SourceError, Transmit};
use repocast_core::wire::FecParams;
use repocast_core::{Instant, ItemId};
use std::time::Duration;

/// One item in memory, counting block reads.
struct Counting {
    bytes: Vec<u8>,
    reads: u64,
}

impl BlockSource for Counting {
    fn read(
        &mut self,
        _: ItemId,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        self.reads += 1;
        let s = off as usize;
        out.extend_from_slice(self.bytes.get(s..s + len).ok_or(SourceError::PastEnd)?);
        Ok(())
    }
}

/// Block reads while the push server sends three passes of one item of
/// `blocks` blocks of 50 symbols, with spans of `span_blocks` blocks.
fn reads_over_three_passes(blocks: usize, span_blocks: u64) -> (u64, u64) {
    let mut cfg = Profile::Push.server();
    cfg.symbol_size = 64;
    cfg.max_block_symbols = 50;
    cfg.packet_interval = Duration::from_micros(100);
    cfg.push_span_bytes = span_blocks * 50 * 64;
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
    let mut src = Counting { bytes, reads: 0 };
    let mut now = Instant::ZERO;
    let mut packets = 0u64;
    let mut esis = std::collections::HashSet::new();
    while packets < 3 * blocks as u64 * 50 {
        while let Some(t) = s.poll_transmit(now, &mut src) {
            if let Transmit::Data(d) = t {
                packets += 1;
                assert!(esis.insert((d.block.0, d.symbol)), "an id sent twice");
                assert_eq!(d.payload.len(), 64);
            }
        }
        now = s
            .poll_timeout()
            .expect("a push server always has a next send");
    }
    (src.reads, layout.blocks() as u64)
}

#[test]
fn an_item_within_one_span_is_read_once_across_passes() {
    let (reads, blocks) = reads_over_three_passes(6, 8);
    assert_eq!(reads, blocks);
}

#[test]
fn an_item_larger_than_a_span_is_read_again_each_pass() {
    let (reads, blocks) = reads_over_three_passes(6, 2);
    assert!(reads >= 3 * blocks, "{reads} reads of {blocks} blocks");
}
