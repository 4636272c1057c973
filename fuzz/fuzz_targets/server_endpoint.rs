//! Fuzz target: the server endpoint takes arbitrary bytes from many
//! request connections (and connects, closes and time passing in any
//! order) without panicking, and stays within its limits. Its items are
//! sent (their block hashes match what the source reads), and one is long
//! enough for its sends to be pre-empted (the corpus's `preempt` input,
//! from `examples/fuzz_seeds.rs`, does). Each step sends at most a bounded
//! number of packets. The session is authenticated as `serve` runs it (a
//! session key, key rotations at any time); inputs of odd length also
//! require an access token ("fuzz-token-0123456789") and encrypt the data.
//! The encoder preparation jobs it hands out come back late, early, out
//! of order, unrun or never.
#![no_main]
#[path = "common/zeros.rs"]
mod zeros;
use libfuzzer_sys::fuzz_target;
use repocast_core::auth::{SessionKey, token_hash};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::fec::layout::Layout;
use repocast_core::profile::{EndpointLimits, Profile};
use repocast_core::server::{BlockSource, ItemInfo, SourceError};
use repocast_core::{ClientId, Instant, ItemId};

/// Blocks of zeros (the items' block hashes are theirs).
struct Zeros;
impl BlockSource for Zeros {
    fn read(
        &mut self,
        _: ItemId,
        _: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        out.resize(out.len() + len, 0);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut cfg = Profile::Lan.server();
    cfg.symbol_size = 64;
    cfg.max_block_symbols = 8;
    cfg.session_key = Some(SessionKey::from_bytes([5; 32]));
    let strict = data.len() % 2 == 1;
    cfg.encrypt = strict;
    // The hashes of the zero blocks the source reads, so sends go out
    // (with any others every item fails at its first read, "changed on
    // disk", and nothing is ever sent).
    let item = |name: &str, size: u64| {
        let layout = Layout::new(size, &cfg.item_fec(size)).expect("layout");
        let block_hashes = zeros::zero_block_hashes(&layout);
        ItemInfo {
            name: name.into(),
            size,
            hash: [1; 32],
            block_hashes,
        }
    };
    // "d" is long enough (313 symbols) for its sends to be interrupted by
    // another's repair or send and resumed (`server::preempt`).
    let items = vec![item("a", 1000), item("b/c", 10), item("d", 20_000)];
    let limits = EndpointLimits {
        max_connections: 8,
        max_buffered_bytes: 1 << 16,
        ..Profile::Lan.limits()
    };
    let Ok(ep) = ServerEndpoint::new(cfg, limits, items) else {
        return;
    };
    let tokens = if strict {
        vec![token_hash("fuzz-token-0123456789")]
    } else {
        Vec::new()
    };
    let mut ep = ep.with_tokens(tokens);
    let mut conns: Vec<ClientId> = Vec::new();
    let mut now = Instant::ZERO;
    let mut buf = Vec::new();
    let mut jobs = Vec::new();
    let mut rest = data;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op % 4 {
            0 => {
                if let Ok(c) = ep.accept(now) {
                    conns.push(c);
                }
            }
            1 | 2 => {
                let Some((&n, tail)) = rest.split_first() else {
                    break;
                };
                let n = (n as usize).min(tail.len());
                let (bytes, tail) = tail.split_at(n);
                rest = tail;
                if let Some(&c) = conns.get((op as usize / 4) % conns.len().max(1)) {
                    ep.handle_stream(now, c, bytes);
                }
            }
            _ => {
                if op & 0x80 != 0 {
                    if let Some(&c) = conns.get((op as usize / 4) % conns.len().max(1)) {
                        ep.handle_close(now, c);
                    }
                } else if op & 0x60 == 0x60 {
                    // The token file edited: none, nobody, or the one token.
                    let list = match op % 3 {
                        0 => None,
                        1 => Some(Vec::new()),
                        _ => Some(vec![token_hash("fuzz-token-0123456789")]),
                    };
                    ep.set_tokens(now, list);
                } else if op & 0x40 != 0 {
                    ep.rotate_key(now, SessionKey::from_bytes([op; 32]));
                } else {
                    now = now + std::time::Duration::from_millis(op as u64);
                }
            }
        }
        ep.handle_timeout(now);
        for _ in 0..4096 {
            if ep.poll_transmit(now, &mut Zeros, &mut buf).is_none() {
                break;
            }
        }
        // Encoder jobs come back in any order, run or not, at a step the
        // input picks (or never).
        while let Some(j) = ep.poll_prepare() {
            jobs.push(j);
        }
        if op & 0x10 != 0 {
            for mut j in jobs.drain(..).rev() {
                if op & 0x08 != 0 {
                    j.run();
                }
                ep.prepared(j);
            }
        }
        while ep.poll_close().is_some() {}
        while ep.poll_event().is_some() {}
        assert!(ep.buffered_bytes() <= limits.max_buffered_bytes);
        assert!(ep.connections() <= limits.max_connections);
    }
});
