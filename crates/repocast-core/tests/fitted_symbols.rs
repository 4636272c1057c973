//! A small item's symbols are fitted to it (`fec::layout`), so its packets
//! are short: the server counts them by the bytes they put on the wire
//! wherever it weighs link time (pacing, announced durations, the
//! batching hold, pre-emption, the idle-link odds), not as full packets.

use repocast_core::server::{ItemInfo, NoPayload, Server, ServerConfig, Transmit};
use repocast_core::wire::{AnnounceKind, ClientMsg, ItemSel};
use repocast_core::{ClientId, Instant, ItemId};
use std::time::Duration;

/// A new request connection at `at` asking for `items`; returns its id.
fn ask(s: &mut Server, at: Instant, items: Vec<ItemSel>) -> ClientId {
    let c = s.handle_connect(at);
    s.handle_client_msg(at, c, ClientMsg::Request { items });
    c
}

/// 64-byte symbols, one packet a millisecond, no start credit.
fn config() -> ServerConfig {
    let mut c = ServerConfig {
        scheme: "FEC(0)+R(0)".parse().expect("scheme"),
        symbol_size: 64,
        max_block_symbols: 100,
        packet_interval: Duration::from_millis(1),
        burst: 1,
        payloads: false,
        ..ServerConfig::default()
    };
    c.start_credit = Duration::ZERO;
    c
}

fn item(name: &str, size: u64) -> ItemInfo {
    ItemInfo {
        name: name.into(),
        size,
        hash: [0; 32],
        block_hashes: vec![],
    }
}

/// The link time of a packet of a 56-byte symbol where a 64-byte one
/// takes 1 ms, in nanoseconds: (56 + h) / (64 + h) of it, h being a
/// packet's headers.
fn short_slot_ns() -> u64 {
    let h = repocast_core::profile::packet_bits(0, false, false) / 8;
    1_000_000 * (56 + h) / (64 + h)
}

/// A small item's symbols are fitted to it (`fec::layout`), and the
/// pacing and the announced duration count the bytes they put on the
/// wire: a 330-byte item of 64-byte symbols goes as 6 symbols of 56
/// bytes, each taking (56 + h) / (64 + h) of a 1 ms slot (h: a packet's
/// headers), where it took 6 full slots before.
#[test]
fn a_small_items_short_symbols_take_their_share_of_the_rate() {
    let mut s = Server::new(config(), vec![item("small", 330)]).expect("server");
    ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let slot_ns = short_slot_ns();
    let (mut announced, mut sent, mut last) = (None, 0, Instant::ZERO);
    let mut now = Instant::ZERO;
    while now < Instant::ZERO + Duration::from_millis(10) {
        while let Some(t) = s.poll_transmit(now, &mut NoPayload) {
            match t {
                Transmit::Announce(a) if a.kind == AnnounceKind::First => {
                    announced = Some((a.total_packets, a.duration_us))
                }
                Transmit::Data(d) => {
                    assert_eq!(d.item, ItemId(0));
                    sent += 1;
                    last = now;
                }
                _ => {}
            }
        }
        now = now + Duration::from_micros(10);
    }
    assert_eq!(announced, Some((6, 6 * slot_ns / 1000)));
    assert_eq!(sent, 6);
    // The sixth packet goes five short slots after the first, within the
    // 10 us polls (full slots would put it at 5 ms).
    let due = Duration::from_nanos(5 * slot_ns);
    assert!(last >= Instant::ZERO + due, "{last:?}");
    assert!(
        last < Instant::ZERO + due + Duration::from_micros(10),
        "{last:?}"
    );
    assert!(due < Duration::from_millis(5));
}

/// The batching hold weighs the other waiting items by their link time:
/// items 0 (330 bytes: 6 symbols of 56 bytes) and 1 (640 bytes: 10 of
/// 64), asked for at once by two clients, each wait 0.75 x the other's
/// one-copy link time. Item 1's hold ends first, at 0.75 x 6 short slots
/// (6 full slots, 4.5 ms, when every packet counted as a full one).
#[test]
fn the_batching_hold_weighs_a_small_items_short_packets_by_their_bytes() {
    let mut c = config();
    c.batch_hold = Some(Duration::from_secs(1));
    c.batch_hold_after = Duration::ZERO;
    c.batch_hold_idle = true;
    let mut s = Server::new(c, vec![item("small", 330), item("full", 640)]).expect("server");
    ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(1))]);
    while let Some(t) = s.poll_transmit(Instant::ZERO, &mut NoPayload) {
        assert!(!matches!(t, Transmit::Data(_)), "both are held");
    }
    let due = Duration::from_nanos(6 * short_slot_ns()).mul_f64(0.75);
    assert_eq!(s.poll_timeout(), Some(Instant::ZERO + due));
    assert!(due < Duration::from_micros(4_500));
    // When it ends, item 1 goes (item 0 waits 7.5 ms).
    let mut first = None;
    while let Some(t) = s.poll_transmit(Instant::ZERO + due, &mut NoPayload) {
        if let Transmit::Data(d) = t {
            first.get_or_insert(d.item);
        }
    }
    assert_eq!(first, Some(ItemId(1)));
}
