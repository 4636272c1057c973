//! Helpers the server tests share (`server_api.rs`, `send_sizing.rs`):
//! driving a bare `Server` by hand, one packet a millisecond.

use repocast_core::server::{NoPayload, Server, Transmit};
use repocast_core::wire::{AnnounceRepr, ServerMsg};
use repocast_core::{ClientId, Instant, ItemId};
use std::time::Duration;

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
