//! Sizing a send by its receivers' loss, driven by hand on a bare
//! `Server`: the idle-link odds bought only where they cost less than a
//! NAK round, early loss reports that trim a send once every receiver has
//! reported, and a peer whose stream of reports cannot have the send
//! announced again and again.

use repocast_core::client::max_hints;
use repocast_core::server::{IdleFec, ItemInfo, Server, ServerConfig};
use repocast_core::wire::{BlockNeed, ClientMsg, ItemSel, NakRepr};
use repocast_core::{BlockId, ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::{drain, ids_sent};

/// A server of one item of `blocks` blocks of 100 64-byte symbols, under
/// `FEC(maxloss+0)`, one packet a millisecond, with the idle-link odds
/// (`idle_fec`) and a NAK window of 5-`window_ms` ms.
fn one_item_server(blocks: u64, window_ms: u64) -> Server {
    let cfg = ServerConfig {
        scheme: "FEC(maxloss+0)+R(inf)".parse().expect("scheme"),
        symbol_size: 64,
        max_block_symbols: 100,
        packet_interval: Duration::from_millis(1),
        nak_window: (Duration::from_millis(5), Duration::from_millis(window_ms)),
        idle_fec: Some(IdleFec {
            odds: 0.99,
            backlog: Duration::from_millis(5),
        }),
        payloads: false,
        hasten: true,
        ..ServerConfig::default()
    };
    let item = ItemInfo {
        name: "f".into(),
        size: blocks * 100 * 64,
        hash: [0; 32],
        block_hashes: vec![],
    };
    Server::new(cfg, vec![item]).expect("server")
}

/// Host `n`'s address.
fn host(n: u8) -> Option<std::net::IpAddr> {
    Some(std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, n)))
}

/// A request for the item from a new connection from host `n` at `at`.
fn ask_from(s: &mut Server, at: Instant, n: u8) -> ClientId {
    let c = s.handle_connect_from(at, host(n));
    let want = ClientMsg::Request {
        items: vec![ItemSel::Id(ItemId(0))],
    };
    s.handle_client_msg(at, c, want);
    c
}

/// Host `n` fetches the item (`blocks` of 100 symbols) from `at` and
/// reports 20% loss on 1,000 packets; returns when it is done.
fn host_reports_20_percent(s: &mut Server, at: Instant, n: u8, blocks: u64) -> Instant {
    let c = ask_from(s, at, n);
    let ms = 200 * blocks;
    let sent = ids_sent(s, at, ms, 0).len() as u64;
    assert!(sent >= 100 * blocks, "{sent}");
    let end = at + Duration::from_millis(ms);
    let done = ClientMsg::ItemDone {
        item: ItemId(0),
        transmission: TransmissionId(0),
        received: 800,
        expected: 1000,
    };
    s.handle_client_msg(end, c, done);
    s.handle_disconnect(end, c);
    end
}

/// The first announcement of a send of the item to a new connection from
/// a host whose earlier connection reported 20% loss on 1,000 packets.
fn send_at_20_percent(s: &mut Server, blocks: u64) -> repocast_core::wire::AnnounceRepr {
    let end = host_reports_20_percent(s, Instant::ZERO, 1, blocks);
    ask_from(s, end, 1);
    let (ann, _, _) = drain(s, end);
    ann.into_iter().next().expect("announced")
}

/// The idle-link odds are bought only when they cost less than the NAK
/// round they spare: a one-block item at 20% loss gets them (19 symbols,
/// under a 50 ms window's worth of packets), not under a 6 ms window; the
/// same odds over 20 blocks would add a binomial margin to every block,
/// 10 times the 50 ms window's worth, so that send carries the FEC
/// policy's count.
#[test]
fn the_idle_odds_are_bought_only_when_cheaper_than_a_nak_round() {
    use repocast_core::policy::odds::symbols_for_odds;
    let plan = |blocks: u64, window_ms: u64| {
        let mut s = one_item_server(blocks, window_ms);
        send_at_20_percent(&mut s, blocks).total_packets
    };
    let policy = 120;
    let odds = symbols_for_odds(100, 0.2, 0.99, policy);
    assert!((policy + 6..policy + 45).contains(&odds), "{odds}");
    assert_eq!(plan(1, 50), odds);
    assert_eq!(plan(1, 6), policy);
    let per_block = symbols_for_odds(100, 0.2, 0.99f64.powf(1.0 / 20.0), policy);
    assert!((per_block - policy) * 20 > 50, "{per_block}");
    assert_eq!(plan(20, 50), 20 * policy);
}

/// A send sized on a loss estimated from few packets is trimmed once every
/// receiver has reported on it with less loss: two hosts known at 20% ask
/// for an item of 20 blocks (120 symbols each under `FEC(maxloss+0)`);
/// 1,000 packets in, one reports 5% and nothing changes (the other may
/// still lose 20%); once the other reports the same, the blocks not yet
/// begun shrink to the 12.5% both now stand at, the new length is
/// announced, and exactly that many packets go out.
#[test]
fn a_send_is_trimmed_once_every_receiver_reports_less_loss() {
    let mut s = one_item_server(20, 6);
    let t = host_reports_20_percent(&mut s, Instant::ZERO, 1, 20);
    let t = host_reports_20_percent(&mut s, t, 2, 20);
    let (a, b) = (ask_from(&mut s, t, 1), ask_from(&mut s, t, 2));
    let (ann, _, mut sent) = drain(&mut s, t);
    let first = ann.first().expect("announced").clone();
    assert_eq!(first.total_packets, 20 * 120);
    let report = ClientMsg::LossReport {
        transmission: first.transmission,
        item: ItemId(0),
        received: 950,
        expected: 1000,
    };
    let mut at = t;
    for _ in 0..1000 {
        at = at + Duration::from_millis(1);
        sent += drain(&mut s, at).2;
    }
    s.handle_client_msg(at, a, report.clone());
    let (ann, _, n) = drain(&mut s, at);
    sent += n;
    assert!(ann.is_empty(), "{ann:?}");
    assert_eq!(s.stats().trimmed_packets, 0);
    s.handle_client_msg(at, b, report);
    let (ann, _, n) = drain(&mut s, at);
    sent += n;
    let trimmed = s.stats().trimmed_packets;
    // Blocks 9-19 not yet begun: 120 -> 113 each (100 x 1.125, rounded up).
    assert_eq!(trimmed, 11 * 7, "{:?}", s.stats());
    let again = ann.iter().find(|x| x.transmission == first.transmission);
    assert_eq!(
        again.expect("re-announced").total_packets as u64,
        2400 - trimmed
    );
    for _ in 0..3000 {
        at = at + Duration::from_millis(1);
        sent += drain(&mut s, at).2;
    }
    assert_eq!(sent as u64, 2400 - trimmed);
}

#[test]
fn a_peer_writing_loss_reports_cannot_make_the_send_announce_again_and_again() {
    // One receiver on a 2,400-packet send, writing early loss reports as
    // fast as it can, alternating 90% and no loss on the same packets:
    // every one that moved the send's size would re-announce it. A
    // receiver reports on twice the packets each time and never on more
    // than were sent, so the server takes only such reports.
    let mut s = one_item_server(20, 6);
    let t = host_reports_20_percent(&mut s, Instant::ZERO, 1, 20);
    let a = ask_from(&mut s, t, 1);
    let (ann, _, _) = drain(&mut s, t);
    let first = ann.first().expect("announced").clone();
    let mut at = t;
    for _ in 0..1000 {
        at = at + Duration::from_millis(1);
        drain(&mut s, at);
    }
    let report = |received, expected| ClientMsg::LossReport {
        transmission: first.transmission,
        item: ItemId(0),
        received,
        expected,
    };
    let bad = s.stats().bad_requests;
    let mut again = 0;
    for i in 0..200u32 {
        let received = if i % 2 == 0 { 100 } else { 1000 };
        s.handle_client_msg(at, a, report(received, 1000));
        let (ann, _, _) = drain(&mut s, at);
        again += ann.len();
    }
    // The first report resized the send (it was sized for 20%): one
    // announcement. The other 199 were refused and counted.
    assert_eq!(again, 1);
    assert_eq!(s.stats().bad_requests - bad, 199);
    // More packets than the send has put out (about 1,000): refused too.
    s.handle_client_msg(at, a, report(2000, 100_000));
    assert!(drain(&mut s, at).0.is_empty());
    assert_eq!(s.stats().bad_requests - bad, 200);
    // On twice the packets it is a receiver's next report, and taken: at
    // 50% now, the blocks not yet begun shrink from the 90% it was grown to.
    for _ in 0..1000 {
        at = at + Duration::from_millis(1);
        drain(&mut s, at);
    }
    let trimmed = s.stats().trimmed_packets;
    s.handle_client_msg(at, a, report(1000, 2000));
    assert_eq!(s.stats().bad_requests - bad, 200);
    assert!(s.stats().trimmed_packets > trimmed, "{:?}", s.stats());
    assert_eq!(drain(&mut s, at).0.len(), 1);
}

/// Short-block hints (NAKs on the send on air, `server::early`) only
/// reorder what the send carries: a peer writing them as fast as it can
/// adds no packet and no announcement, and past twice what a receiver
/// sends on one send (`client::max_hints`) they are refused and counted.
#[test]
fn a_peer_writing_short_block_hints_adds_no_packet_and_is_bounded() {
    let run = |flood: bool| {
        let mut s = one_item_server(20, 6);
        let a = ask_from(&mut s, Instant::ZERO, 1);
        let (ann, _, _) = drain(&mut s, Instant::ZERO);
        let first = ann.first().expect("announced").clone();
        let mut sent = ids_sent(&mut s, Instant::ZERO, 500, 0).len();
        let at = Instant::ZERO + Duration::from_millis(500);
        let bad = s.stats().bad_requests;
        if flood {
            for i in 0..1000u32 {
                let hint = ClientMsg::Nak(NakRepr {
                    transmission: first.transmission,
                    item: ItemId(0),
                    received: 400,
                    expected: 500,
                    needs: vec![BlockNeed {
                        block: BlockId(i % 20),
                        count: 50,
                        missing: vec![],
                    }],
                });
                s.handle_client_msg(at, a, hint);
                let (ann, _, data) = drain(&mut s, at);
                assert!(ann.is_empty(), "a hint announced");
                sent += data as usize;
            }
        }
        let refused = s.stats().bad_requests - bad;
        sent += ids_sent(&mut s, at, 60_000, 0).len();
        (sent, refused, s.stats().early_naks)
    };
    let (plain, none, _) = run(false);
    let (flooded, refused, early) = run(true);
    assert_eq!(none, 0);
    assert_eq!(flooded, plain, "hints changed what was sent");
    assert_eq!(early, 1000);
    assert_eq!(refused, 1000 - u64::from(2 * max_hints(20)));
}
