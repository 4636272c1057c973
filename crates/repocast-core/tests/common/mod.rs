//! Helpers the server tests share (`server_api.rs`, `send_sizing.rs`,
//! `report_lag.rs`, `request_window.rs`): driving a bare `Server` by
//! hand, one packet a millisecond.

use repocast_core::fec::CodeKind;
use repocast_core::server::{ItemInfo, NoPayload, Server, ServerConfig, Transmit};
use repocast_core::wire::{AnnounceRepr, BlockNeed, ClientMsg, NakRepr, ServerMsg};
use repocast_core::{BlockId, ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

/// `items` items of 640 bytes (10 packets each, one a millisecond), FEC
/// off, accounting mode, with `cfg`'s changes to those settings.
pub fn small_items(items: u32, cfg: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig {
        scheme: "FEC(0)+R(inf)".parse().expect("scheme"),
        code: CodeKind::RaptorQ,
        symbol_size: 64,
        max_block_symbols: 100,
        packet_interval: Duration::from_millis(1),
        payloads: false,
        ..ServerConfig::default()
    };
    cfg(&mut c);
    Server::new(c, small_item_infos(items)).expect("server")
}

/// The items of [`small_items`]: `n` of 640 bytes, named `f0`, `f1`, ...
pub fn small_item_infos(n: u32) -> Vec<ItemInfo> {
    (0..n)
        .map(|i| ItemInfo {
            name: format!("f{i}"),
            size: 640,
            hash: [0; 32],
            block_hashes: vec![],
        })
        .collect()
}

/// A NAK on transmission `t` of a [`small_items`] item from a receiver
/// that heard none of it: all 10 symbols of its one block.
pub fn nak_whole(t: TransmissionId, item: ItemId) -> ClientMsg {
    ClientMsg::Nak(NakRepr {
        transmission: t,
        item,
        received: 0,
        expected: 10,
        needs: vec![BlockNeed {
            block: BlockId(0),
            count: 10,
            missing: vec![],
        }],
    })
}

/// Drains everything due by `now`, returning announcements and control messages.
pub fn drain(s: &mut Server, now: Instant) -> (Vec<AnnounceRepr>, Vec<(ClientId, ServerMsg)>, u32) {
    let (mut ann, mut ctl, mut data) = (vec![], vec![], 0);
    while let Some(t) = s.poll_transmit(now, &mut NoPayload) {
        match t {
            Transmit::Announce(a) => ann.push(a),
            Transmit::Control(c, m) => ctl.push((c, m)),
            Transmit::Data(_) => data += 1,
        }
    }
    (ann, ctl, data)
}

/// Symbol ids of item `item`'s data packets sent from `from` for `ms`
/// milliseconds (one packet a millisecond).
pub fn ids_sent(s: &mut Server, from: Instant, ms: u64, item: u32) -> Vec<u32> {
    let mut ids = vec![];
    for t in 0..ms {
        while let Some(x) = s.poll_transmit(from + Duration::from_millis(t), &mut NoPayload) {
            if let Transmit::Data(d) = x {
                if d.item == ItemId(item) {
                    ids.push(d.symbol);
                }
            }
        }
    }
    ids
}
