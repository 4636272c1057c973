//! The server state machine driven by hand, without the harness: the NAK
//! window widens under NAK load, forged or unknown requests are refused and
//! counted, and accounting mode never asks the block source for bytes.

use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::profile::Profile;
use repocast_core::server::{IdleFec, ItemInfo, NoPayload, Server, ServerConfig, Transmit};
use repocast_core::wire::{AnnounceKind, BlockNeed, ClientMsg, ItemSel, NakRepr, ServerMsg};
use repocast_core::{BlockId, ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

#[allow(dead_code)] // not every test file uses every helper
mod common;
use common::{drain, ids_sent, small_item_infos, small_items};

fn server(scheme: &str) -> Server {
    small_items(3, |c| {
        c.scheme = scheme.parse().expect("scheme");
        c.nak_widen_threshold = 2;
    })
}

/// A new request connection at `at` asking for `items`; returns its id.
fn ask(s: &mut Server, at: Instant, items: Vec<ItemSel>) -> ClientId {
    let c = s.handle_connect(at);
    s.handle_client_msg(at, c, ClientMsg::Request { items });
    c
}

fn nak(t: u32, item: u32, count: u32) -> ClientMsg {
    ClientMsg::Nak(NakRepr {
        transmission: TransmissionId(t),
        item: ItemId(item),
        received: 5,
        expected: 10,
        needs: vec![BlockNeed {
            block: BlockId(0),
            count,
            missing: vec![],
        }],
    })
}

#[test]
fn nak_window_widens_under_load_and_is_announced() {
    let mut s = server("FEC(0)+R(inf)");
    let clients: Vec<ClientId> = (0..5).map(|_| s.handle_connect(Instant::ZERO)).collect();
    for &c in &clients {
        s.handle_client_msg(
            Instant::ZERO,
            c,
            ClientMsg::Request {
                items: vec![ItemSel::Id(ItemId(0))],
            },
        );
    }
    // Transmission 1 (10 packets at 1 ms): send it all.
    let mut now = Instant::ZERO;
    for _ in 0..20 {
        drain(&mut s, now);
        now = now + Duration::from_millis(1);
    }
    let base = s.nak_window();
    assert_eq!(base.1, Duration::from_millis(210));
    // Five NAKs (threshold 2) answer it; the repair they cause is
    // transmission 2, and when it ends the window has doubled.
    for &c in &clients {
        s.handle_client_msg(now, c, nak(1, 0, 3));
    }
    let mut announced = vec![];
    for _ in 0..20 {
        let (a, _, _) = drain(&mut s, now);
        announced.extend(a);
        now = now + Duration::from_millis(1);
    }
    let repair = announced
        .iter()
        .find(|a| a.kind == AnnounceKind::Repair)
        .expect("a repair");
    assert_eq!(repair.total_packets, 3, "largest NAK, not the sum");
    assert_eq!(s.nak_window().1, Duration::from_millis(420));
    let end = announced
        .iter()
        .rfind(|a| a.kind == AnnounceKind::End)
        .expect("end");
    assert_eq!(end.nak_window_max_us, 420_000);
    assert_eq!(s.stats().naks, 5);
}

#[test]
fn forged_and_unknown_requests_are_refused_and_counted() {
    let mut s = server("FEC(0)+R(inf)");
    let c = ask(
        &mut s,
        Instant::ZERO,
        vec![
            ItemSel::Name("nope".into()),
            ItemSel::Id(ItemId(99)),
            ItemSel::Name("f1".into()),
        ],
    );
    let (_, ctl, _) = drain(&mut s, Instant::ZERO);
    let failed = ctl
        .iter()
        .filter(|(_, m)| matches!(m, ServerMsg::Failed { item: None, .. }))
        .count();
    let manifests = ctl
        .iter()
        .filter(|(_, m)| matches!(m, ServerMsg::Manifest { .. }))
        .count();
    assert_eq!((failed, manifests), (2, 1));
    // A NAK for an item it did not request, for a block that does not
    // exist, for a transmission not yet sent, or asking for absurd counts.
    s.handle_client_msg(Instant::ZERO, c, nak(1, 0, 3));
    s.handle_client_msg(
        Instant::ZERO,
        c,
        ClientMsg::Nak(NakRepr {
            transmission: TransmissionId(0),
            item: ItemId(1),
            received: 0,
            expected: 0,
            needs: vec![BlockNeed {
                block: BlockId(7),
                count: 1,
                missing: vec![],
            }],
        }),
    );
    s.handle_client_msg(Instant::ZERO, c, nak(999, 1, 1));
    s.handle_client_msg(Instant::ZERO, c, nak(0, 1, u32::MAX));
    // Early loss reports: for an item it did not request, with more
    // received than sent, with nothing sent, for a transmission not yet
    // started.
    let report = |t: u32, item: u32, received: u32, expected: u32| ClientMsg::LossReport {
        transmission: TransmissionId(t),
        item: ItemId(item),
        received,
        expected,
    };
    for m in [
        report(1, 0, 5, 10),
        report(1, 1, 11, 10),
        report(1, 1, 0, 0),
        report(999, 1, 5, 10),
    ] {
        s.handle_client_msg(Instant::ZERO, c, m);
    }
    // A message from a connection the server never opened.
    s.handle_client_msg(Instant::ZERO, ClientId(77), ClientMsg::ListCatalogue);
    assert_eq!(s.stats().bad_requests, 2 + 4 + 4 + 1);
    assert_eq!((s.stats().naks, s.stats().grown_packets), (0, 0));
}

#[test]
fn done_and_disconnect_clear_demand() {
    let mut s = server("FEC(0)+R(0)");
    let a = s.handle_connect(Instant::ZERO);
    let b = s.handle_connect(Instant::ZERO);
    for c in [a, b] {
        s.handle_client_msg(
            Instant::ZERO,
            c,
            ClientMsg::Request {
                items: vec![ItemSel::Id(ItemId(2))],
            },
        );
    }
    assert_eq!(s.queue_len(), 1);
    s.handle_disconnect(Instant::ZERO, a);
    assert_eq!(s.client_count(), 1);
    s.handle_client_msg(
        Instant::ZERO,
        b,
        ClientMsg::ItemDone {
            item: ItemId(2),
            transmission: TransmissionId(0),
            received: 10,
            expected: 10,
        },
    );
    assert_eq!(s.queue_len(), 0);
    let (_, ctl, data) = drain(&mut s, Instant::ZERO);
    assert_eq!(data, 0, "nobody waits: nothing is sent");
    assert!(ctl.iter().any(|(c, m)| *c == b && *m == ServerMsg::Done));
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn a_receiver_that_never_reports_gets_the_item_rescheduled() {
    let mut s = server("FEC(0)+R(inf)");
    let a = ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(1))]);
    let mut now = Instant::ZERO;
    for _ in 0..20 {
        drain(&mut s, now);
        s.handle_timeout(now);
        now = now + Duration::from_millis(1);
    }
    // Sent, and nobody waits: until the report deadline passes.
    assert_eq!(s.queue_len(), 0);
    let due = s.poll_timeout().expect("a report deadline");
    assert!(
        due > now && due <= now + Duration::from_millis(2_300),
        "{due:?}"
    );
    s.handle_timeout(due);
    assert_eq!(s.stats().report_timeouts, 1);
    assert_eq!(s.queue_len(), 1, "rescheduled for the silent receiver");
    // A late report for the old transmission is still taken.
    s.handle_client_msg(
        due,
        a,
        ClientMsg::ItemDone {
            item: ItemId(1),
            transmission: TransmissionId(1),
            received: 10,
            expected: 10,
        },
    );
    assert_eq!(s.queue_len(), 0);
}

/// One NAK can ask for no more than a block can need (its k symbols): a
/// NAK for k + 1 is refused and counted; one for k is taken.
#[test]
fn a_nak_cannot_ask_for_more_than_the_block_holds() {
    let mut s = server("FEC(0)+R(inf)");
    let c = ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(1))]);
    // Until the transmission has ended (a NAK for one on air is early).
    for ms in 0..100 {
        drain(&mut s, Instant::from_millis(ms));
    }
    // f1 is 640 bytes of 64-byte symbols: one block of k = 10.
    s.handle_client_msg(Instant::from_millis(100), c, nak(1, 1, 11));
    assert_eq!((s.stats().bad_requests, s.stats().naks), (1, 0));
    s.handle_client_msg(Instant::from_millis(100), c, nak(1, 1, 10));
    assert_eq!((s.stats().bad_requests, s.stats().naks), (1, 1));
}

/// A server endpoint (the shipped settings) serving one empty item.
fn one_empty_item_endpoint() -> ServerEndpoint {
    let info = ItemInfo {
        name: "a".into(),
        size: 0,
        hash: [0; 32],
        block_hashes: vec![],
    };
    let (cfg, limits) = (Profile::Lan.server(), Profile::Lan.limits());
    ServerEndpoint::new(cfg, limits, vec![info]).expect("ep")
}

/// Probe 5's looping peer: the endpoint closes a connection that repeats
/// hello, catalogue or request messages past `MAX_ONE_OFF`, and counts it.
#[test]
fn a_peer_repeating_one_off_messages_is_closed() {
    use repocast_core::endpoint::{CloseReason, MAX_ONE_OFF};
    use repocast_core::wire::frame::encode_frame;
    let mut ep = one_empty_item_endpoint();
    let now = Instant::ZERO;
    let c = ep.accept(now).expect("accepted");
    let mut body = Vec::new();
    ClientMsg::ListCatalogue.emit(&mut body);
    let mut frame = Vec::new();
    encode_frame(&body, &mut frame);
    for _ in 0..MAX_ONE_OFF {
        ep.handle_stream(now, c, &frame);
    }
    assert_eq!(ep.poll_close(), None, "a few catalogue requests are fine");
    ep.handle_stream(now, c, &frame);
    assert!(matches!(
        ep.poll_close(),
        Some((id, CloseReason::Repeated(_))) if id == c
    ));
    assert_eq!(ep.stats().closed_repeating, 1);
    assert_eq!(ep.connections(), 0);
}

/// `m` as one frame on the request connection.
fn frame(m: ClientMsg) -> Vec<u8> {
    let (mut body, mut f) = (Vec::new(), Vec::new());
    m.emit(&mut body);
    repocast_core::wire::frame::encode_frame(&body, &mut f);
    f
}

fn hello(token: Option<&str>) -> Vec<u8> {
    frame(ClientMsg::Hello {
        name: "x".into(),
        token: token.map(str::to_owned),
    })
}

/// What the endpoint sends connection `c` now, parsed.
fn replies(
    ep: &mut repocast_core::endpoint::server::ServerEndpoint,
    c: repocast_core::ClientId,
) -> Vec<repocast_core::wire::ServerMsg> {
    use repocast_core::endpoint::Dest;
    let (mut buf, mut dec, mut out) = (
        Vec::new(),
        repocast_core::wire::frame::FrameDecoder::default(),
        Vec::new(),
    );
    let mut src = repocast_core::server::NoPayload;
    while let Some(d) = ep.poll_transmit(Instant::ZERO, &mut src, &mut buf) {
        if d == Dest::Conn(c) {
            dec.extend(&buf);
        }
    }
    while let Ok(Some(f)) = dec.next_frame() {
        out.push(repocast_core::wire::ServerMsg::parse(&f).expect("the endpoint's own frame"));
    }
    out
}

/// Access tokens: with them required, a connection that opens with
/// anything but a hello carrying a known token is answered with the reason
/// and closed; one with a known token is served as before.
#[test]
fn without_a_known_token_a_connection_gets_a_reason_and_is_closed() {
    use repocast_core::auth::token_hash;
    use repocast_core::endpoint::CloseReason;
    use repocast_core::wire::ServerMsg;
    let good = "a-token-of-sixteen-or-more";
    let mut ep = one_empty_item_endpoint().with_tokens(vec![token_hash(good)]);
    let now = Instant::ZERO;
    let cases = [
        (frame(ClientMsg::ListCatalogue), "requires an access token"),
        (hello(None), "requires an access token"),
        (
            hello(Some("not-the-token-at-all")),
            "does not know this token",
        ),
    ];
    for (i, (first, why)) in cases.into_iter().enumerate() {
        let c = ep.accept(now).expect("accepted");
        // Whatever follows the refused message is not looked at.
        let mut bytes = first;
        bytes.extend(hello(Some(good)));
        ep.handle_stream(now, c, &bytes);
        let got = replies(&mut ep, c);
        assert!(
            matches!(&got[..], [ServerMsg::Failed { item: None, reason, .. }] if reason.contains(why)),
            "case {i}: {got:?}"
        );
        assert_eq!(ep.poll_close(), Some((c, CloseReason::Unauthorized)));
        assert_eq!(ep.stats().refused_unauthorized, i as u64 + 1);
    }
    assert_eq!(ep.connections(), 0);
    // The known token, with surrounding blanks as a file would have them.
    let c = ep.accept(now).expect("accepted");
    let mut bytes = hello(Some(&format!(" {good}\n")));
    bytes.extend(frame(ClientMsg::ListCatalogue));
    ep.handle_stream(now, c, &bytes);
    let got = replies(&mut ep, c);
    assert!(
        matches!(got.first(), Some(ServerMsg::Welcome { .. })),
        "{got:?}"
    );
    assert!(got.iter().any(|m| matches!(m, ServerMsg::Catalogue { .. })));
    assert_eq!(ep.poll_close(), None);
    assert_eq!(ep.stats().refused_unauthorized, 3);
}

/// Live revocation: replacing the accepted tokens closes, with a reason,
/// every admitted connection whose token was withdrawn; the others go on;
/// an empty list lets nobody in, no list lets everybody in.
#[test]
fn a_withdrawn_token_closes_its_connections_with_a_reason() {
    use repocast_core::auth::token_hash;
    use repocast_core::endpoint::CloseReason;
    use repocast_core::wire::ServerMsg;
    let (a, b) = ("token-a-sixteen-chars", "token-b-sixteen-chars");
    let mut ep = one_empty_item_endpoint().with_tokens(vec![token_hash(a), token_hash(b)]);
    let now = Instant::ZERO;
    let [ca, cb, later] = [0; 3].map(|_| ep.accept(now).expect("accepted"));
    for (c, t) in [(ca, a), (cb, b)] {
        ep.handle_stream(now, c, &hello(Some(t)));
        assert!(matches!(
            replies(&mut ep, c).first(),
            Some(ServerMsg::Welcome { .. })
        ));
    }
    assert_eq!(ep.set_tokens(now, Some(vec![token_hash(b)])), 1);
    let got = replies(&mut ep, ca);
    assert!(
        matches!(&got[..], [ServerMsg::Failed { item: None, reason, .. }] if reason.contains("revoked")),
        "{got:?}"
    );
    assert_eq!(ep.poll_close(), Some((ca, CloseReason::Unauthorized)));
    assert_eq!(ep.poll_close(), None, "b's connection goes on");
    assert_eq!(ep.stats().revoked, 1);
    // A connection that had not shown a token yet meets the new list.
    ep.handle_stream(now, later, &hello(Some(a)));
    assert_eq!(ep.poll_close(), Some((later, CloseReason::Unauthorized)));
    // No list: a connection needs no token.
    assert_eq!(ep.set_tokens(now, None), 0);
    let open = ep.accept(now).expect("accepted");
    ep.handle_stream(now, open, &frame(ClientMsg::ListCatalogue));
    assert!(
        replies(&mut ep, open)
            .iter()
            .any(|m| matches!(m, ServerMsg::Catalogue { .. }))
    );
    // An empty list: everybody admitted goes, tokenless or not.
    assert_eq!(ep.set_tokens(now, Some(Vec::new())), 2);
    assert_eq!(ep.connections(), 0);
    assert_eq!(ep.stats().revoked, 3);
}

/// With the batching hold, two requests for different items arriving
/// together are both held for 0.75 of the other's one-copy time (10
/// packets of 1 ms): the server sends nothing and sleeps until the first
/// hold ends; a new request wakes it to decide again; when the hold ends
/// it sends, and counts the link time it left idle.
#[test]
fn a_held_server_sleeps_until_the_hold_ends_and_wakes_for_news() {
    let mut cfg = server("FEC(0)+R(inf)").config().clone();
    cfg.batch_hold = Some(Duration::from_secs(1));
    cfg.batch_hold_after = Duration::ZERO;
    cfg.batch_hold_idle = true;
    let mut s = Server::new(cfg, small_item_infos(3)).expect("server");
    let ms = |n: u64| Instant::from_micros(n * 1000);
    let ask_for = |s: &mut Server, at: Instant, item: u32| {
        ask(s, at, vec![ItemSel::Id(ItemId(item))]);
    };
    ask_for(&mut s, ms(0), 0);
    ask_for(&mut s, ms(0), 1);
    assert_eq!(drain(&mut s, ms(0)).2, 0);
    assert_eq!(s.poll_timeout(), Some(Instant::from_micros(7_500)));
    assert_eq!(s.stats().holds, 1);
    // A third item at 1 ms: the server must decide again now, and every
    // hold is longer (0.75 x 20 ms of other items).
    ask_for(&mut s, ms(1), 2);
    assert!(s.poll_timeout().is_some_and(|t| t <= ms(1)));
    assert_eq!(drain(&mut s, ms(1)).2, 0);
    assert_eq!(s.poll_timeout(), Some(ms(15)));
    let (ann, _, data) = drain(&mut s, ms(15));
    assert_eq!(data, 1, "the first packet goes out when the hold ends");
    assert_eq!(ann.first().map(|a| a.item), Some(ItemId(0)));
    assert_eq!(s.stats().holds, 1);
    assert_eq!(s.stats().hold_idle_us, 15_000);
}

/// The hold's gate and its two modes. Item 0 is asked for at 0 ms and
/// sent at once (alone on an idle server); its ten packets end at 9 ms.
/// What goes next depends on the hold:
/// - gate closed (the server busy for less than `batch_hold_after`):
///   the scheduler's choice, at once;
/// - gate open, items 1 and 2 both asked for at 5 ms, so both held until
///   5 + 0.75 x 10 ms: with `batch_hold_idle` the link idles until then,
///   without it the best goes at once anyway;
/// - gate open, item 1 asked for at 1 ms by one client and item 2 at 8 ms
///   by three (the scheduler's favourite): item 2 is held, item 1 goes
///   first; with the gate closed item 2 goes first.
#[test]
fn the_hold_engages_after_sustained_load_and_idles_only_if_asked() {
    let next = |after_ms: u64, idle: bool, asks: &[(u64, u32)]| -> Option<(u64, ItemId)> {
        let mut cfg = server("FEC(0)+R(inf)").config().clone();
        cfg.batch_hold = Some(Duration::from_secs(1));
        cfg.batch_hold_after = Duration::from_millis(after_ms);
        cfg.batch_hold_idle = idle;
        let mut s = Server::new(cfg, small_item_infos(3)).expect("server");
        let ms = |n: u64| Instant::from_micros(n * 1000);
        let ask_for = |s: &mut Server, at: u64, item: u32| {
            ask(s, ms(at), vec![ItemSel::Id(ItemId(item))]);
        };
        ask_for(&mut s, 0, 0);
        assert_eq!(drain(&mut s, ms(0)).2, 1);
        for t in 1..=40 {
            for &(_, item) in asks.iter().filter(|a| a.0 == t) {
                ask_for(&mut s, t, item);
            }
            let (ann, _, _) = drain(&mut s, ms(t));
            if let Some(a) = ann.iter().find(|a| a.item != ItemId(0)) {
                return Some((t, a.item));
            }
        }
        None
    };
    let together = [(5, 1), (5, 2)];
    let free = next(1000, true, &together).expect("sent");
    assert_eq!(free.0, 9, "item 0's tenth packet goes at 9 ms");
    assert_eq!(
        next(3, true, &together),
        Some((13, free.1)),
        "held to 12.5 ms"
    );
    assert_eq!(next(3, false, &together), Some(free));
    let apart = [(1, 1), (8, 2), (8, 2), (8, 2)];
    assert_eq!(next(1000, false, &apart), Some((9, ItemId(2))));
    assert_eq!(next(3, false, &apart), Some((9, ItemId(1))));
    assert_eq!(next(3, true, &apart), Some((9, ItemId(1))));
}

/// A driver that wakes later than the pacing asks (a timer's granularity,
/// a busy CPU) is owed the slots it missed, within the burst, across
/// transmissions as within one: three 10-packet items back to back at 1
/// ms a packet, polled every 7 ms, have all gone out by the poll after
/// their 30th slot (35 ms). Starting each transmission afresh at the poll
/// lost the lag at every boundary (the last packet went at 42 ms).
#[test]
fn a_late_driver_keeps_the_rate_across_transmissions() {
    let mut s = server("FEC(0)+R(0)");
    ask(
        &mut s,
        Instant::ZERO,
        (0..3).map(|i| ItemSel::Id(ItemId(i))).collect(),
    );
    let (mut sent, mut last) = (0, None);
    let mut now = Instant::ZERO;
    while now < Instant::ZERO + Duration::from_millis(100) {
        let (_, _, data) = drain(&mut s, now);
        if data > 0 {
            sent += data;
            last = Some(now);
        }
        now = now + Duration::from_millis(7);
    }
    assert_eq!(sent, 30);
    assert_eq!(last, Some(Instant::ZERO + Duration::from_millis(35)));
    // After the link had nothing to send (here for a second), the next
    // transmission starts at the poll, not with a burst of old slots.
    let later = Instant::ZERO + Duration::from_secs(1);
    ask(&mut s, later, vec![ItemSel::Id(ItemId(0))]);
    let (_, _, data) = drain(&mut s, later);
    assert_eq!(data, 1, "one packet at the poll, the rest paced");
}

/// Symbols of the transmission started for `items` by a connection from
/// `peer` at `at` (the item's send, one packet a millisecond).
fn first_send(s: &mut Server, at: Instant, peer: Option<std::net::IpAddr>, item: u32) -> u32 {
    let c = s.handle_connect_from(at, peer);
    s.handle_client_msg(
        at,
        c,
        ClientMsg::Request {
            items: vec![ItemSel::Id(ItemId(item))],
        },
    );
    let mut sent = 0;
    for ms in 0..40 {
        sent += drain(s, at + Duration::from_millis(ms)).2;
    }
    s.handle_disconnect(at + Duration::from_millis(40), c);
    sent
}

/// Every `get` is a new connection: one from an address whose earlier
/// connections reported 20% loss starts with it, so under `FEC(maxloss+0)`
/// its first transmission carries 20% more symbols, as if it had reported
/// already; one from another address, or with none, starts at no loss.
#[test]
fn a_new_connection_starts_with_the_loss_its_host_reported() {
    use std::net::{IpAddr, Ipv4Addr};
    let ip = |n| Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)));
    let mut s = server("FEC(maxloss+0)+R(inf)");
    let t = Instant::from_micros(0);
    let c = s.handle_connect_from(t, ip(1));
    s.handle_client_msg(
        t,
        c,
        ClientMsg::Request {
            items: vec![ItemSel::Id(ItemId(0))],
        },
    );
    for ms in 0..40 {
        drain(&mut s, t + Duration::from_millis(ms));
    }
    let done = ClientMsg::ItemDone {
        item: ItemId(0),
        transmission: TransmissionId(0),
        received: 80,
        expected: 100,
    };
    s.handle_client_msg(t + Duration::from_millis(40), c, done);
    s.handle_disconnect(t + Duration::from_millis(41), c);
    let at = |ms: u64| Instant::from_micros(ms * 1000);
    assert_eq!(
        first_send(&mut s, at(100), ip(1), 1),
        12,
        "10 symbols + 20%"
    );
    assert_eq!(first_send(&mut s, at(200), ip(2), 2), 10);
    assert_eq!(first_send(&mut s, at(300), None, 0), 10);
}

/// The NAK window a transmission announces narrows with fewer receivers
/// waiting on it (`nak_spread_listeners`): a lone one NAKs early in the
/// window, enough of them spread over all of it; without the setting every
/// transmission announces the whole window.
#[test]
fn the_nak_window_narrows_for_few_receivers() {
    let window = |spread: Option<u32>, clients: u32| {
        let cfg = ServerConfig {
            scheme: "FEC(0)+R(inf)".parse().expect("scheme"),
            symbol_size: 64,
            packet_interval: Duration::from_millis(1),
            nak_spread_listeners: spread,
            payloads: false,
            ..ServerConfig::default()
        };
        let mut s = Server::new(cfg, small_item_infos(3)).expect("server");
        let t = Instant::from_micros(0);
        for _ in 0..clients {
            ask(&mut s, t, vec![ItemSel::Id(ItemId(0))]);
        }
        let (ann, _, _) = drain(&mut s, t);
        let a = ann.first().expect("an announcement");
        (a.nak_window_min_us / 1000, a.nak_window_max_us / 1000)
    };
    // The default window is 30-210 ms.
    assert_eq!(window(Some(4), 1), (30, 75));
    assert_eq!(window(Some(4), 2), (30, 120));
    assert_eq!(window(Some(4), 4), (30, 210));
    assert_eq!(window(Some(4), 9), (30, 210));
    assert_eq!(window(None, 1), (30, 210));
}

fn item_done(s: &mut Server, at: Instant, c: ClientId, t: u32) {
    let done = ClientMsg::ItemDone {
        item: ItemId(0),
        transmission: TransmissionId(t),
        received: 12,
        expected: 12,
    };
    s.handle_client_msg(at, c, done);
}

/// A send of an item nobody can hold a symbol of starts again from its
/// source symbols (no encoding on the server, no decoding at a receiver
/// that loses none); a receiver that heard part of an earlier send gets
/// fresh ids instead, so nothing it holds is sent to it again.
#[test]
fn a_send_nobody_can_hold_starts_from_the_source_symbols() {
    let mut s = server("FEC(0.2)+R(inf)");
    let at = |ms: u64| Instant::from_micros(ms * 1000);
    let source: Vec<u32> = (0..12).collect();
    // The first send: source symbols, then repair.
    let a = ask(&mut s, at(0), vec![ItemSel::Id(ItemId(0))]);
    assert_eq!(ids_sent(&mut s, at(0), 40, 0), source);
    item_done(&mut s, at(40), a, 0);
    s.handle_disconnect(at(41), a);
    // Asked for after it: nobody holds any of it, so the same again.
    let b = ask(&mut s, at(100), vec![ItemSel::Id(ItemId(0))]);
    assert_eq!(ids_sent(&mut s, at(100), 3, 0), vec![0, 1, 2]);
    // Asked for while it is on air: this one hears the rest of it.
    let c = ask(&mut s, at(103), vec![ItemSel::Id(ItemId(0))]);
    assert_eq!(ids_sent(&mut s, at(103), 9, 0), (3..12).collect::<Vec<_>>());
    item_done(&mut s, at(112), b, 1);
    // Its own send comes next, of ids nobody was sent.
    let next = ids_sent(&mut s, at(112), 40, 0);
    assert_eq!(next, (12..24).collect::<Vec<_>>());
    item_done(&mut s, at(152), c, 2);
    s.handle_disconnect(at(153), b);
    s.handle_disconnect(at(153), c);
    // And once nobody holds any again, from the source symbols.
    ask(&mut s, at(200), vec![ItemSel::Id(ItemId(0))]);
    assert_eq!(ids_sent(&mut s, at(200), 40, 0), source);
}

/// While little else waits for the link (`idle_fec`), a first send carries
/// enough symbols that its receivers, at the largest loss estimated among
/// them, decode each block without a NAK round at the configured odds; a
/// send while another receiver's item waits carries what the FEC policy
/// says. An item waited for only by the send's own receivers does not
/// count as waiting: they finish no sooner for it going first.
#[test]
fn an_idle_link_sends_enough_to_spare_a_nak_round() {
    use repocast_core::policy::odds::symbols_for_odds;
    let idle = symbols_for_odds(10, 0.2, 0.99, 12);
    assert!(idle > 12, "{idle}");
    // Items 1 and 2 asked for at once by the first receiver (`c`), or by
    // it and another (`d`): the sizes of their two sends.
    let sends = |same_receiver: bool| {
        let cfg = ServerConfig {
            scheme: "FEC(maxloss+0)+R(inf)".parse().expect("scheme"),
            symbol_size: 64,
            packet_interval: Duration::from_millis(1),
            idle_fec: Some(IdleFec {
                odds: 0.99,
                backlog: Duration::from_millis(5),
            }),
            payloads: false,
            ..ServerConfig::default()
        };
        let mut s = Server::new(cfg, small_item_infos(3)).expect("server");
        let at = |ms: u64| Instant::from_micros(ms * 1000);
        // Two receivers alone at no measured loss: the policy's 10
        // symbols; both then report 20% loss.
        let c = ask(&mut s, at(0), vec![ItemSel::Id(ItemId(0))]);
        let d = ask(&mut s, at(0), vec![ItemSel::Id(ItemId(0))]);
        assert_eq!(ids_sent(&mut s, at(0), 40, 0).len(), 10);
        for x in [c, d] {
            let done = ClientMsg::ItemDone {
                item: ItemId(0),
                transmission: TransmissionId(0),
                received: 80,
                expected: 100,
            };
            s.handle_client_msg(at(40), x, done);
        }
        // Two items at once, 10 ms of symbols each (over the 5 ms backlog).
        let (x, y) = if same_receiver { (c, c) } else { (c, d) };
        let request = |i| ClientMsg::Request {
            items: vec![ItemSel::Id(ItemId(i))],
        };
        s.handle_client_msg(at(50), x, request(1));
        s.handle_client_msg(at(50), y, request(2));
        let mut sizes = [0u32; 2];
        for t in 50..150 {
            while let Some(x) = s.poll_transmit(at(t), &mut NoPayload) {
                if let Transmit::Data(d) = x {
                    sizes[d.item.0 as usize - 1] += 1;
                }
            }
        }
        sizes.sort();
        sizes
    };
    // Another receiver's item waits: the first send gets the policy's 12,
    // the second, alone, the odds' count.
    assert_eq!(sends(false), [12, idle]);
    // Only the send's own receiver waits for the other: both get the odds.
    assert_eq!(sends(true), [idle, idle]);
}

/// A NAK asking for more than `repair_share` of its item (and for at least
/// a short transmission's worth, `MIN_LEFT` symbols) is not repaired: its
/// receiver waits for the item's next scheduled send, with whoever else
/// asks for it meanwhile; a NAK for up to that share is repaired, and so
/// is one for most of a small item.
#[test]
fn a_nak_for_most_of_an_item_goes_back_to_the_queue() {
    // f0: 300 symbols in three blocks of 100; f1: 10 symbols.
    let items = [300u64, 10].map(|n| ItemInfo {
        name: format!("f{n}"),
        size: n * 64,
        hash: [0; 32],
        block_hashes: vec![],
    });
    let cases = [
        (0, vec![100, 50], true),
        (0, vec![100, 51], false),
        (1, vec![10], true),
    ];
    for (item, counts, repaired) in cases {
        let cfg = ServerConfig {
            scheme: "FEC(0)+R(inf)".parse().expect("scheme"),
            symbol_size: 64,
            max_block_symbols: 100,
            packet_interval: Duration::from_millis(1),
            payloads: false,
            repair_share: Some(0.5),
            ..ServerConfig::default()
        };
        let what = format!("item {item}, NAK for {counts:?}");
        let mut s = Server::new(cfg, items.to_vec()).expect("server");
        let a = ask(&mut s, Instant::ZERO, vec![ItemSel::Id(ItemId(item))]);
        for ms in 0..400 {
            drain(&mut s, Instant::from_millis(ms));
        }
        let needs = (0u32..).zip(&counts).map(|(b, &count)| BlockNeed {
            block: BlockId(b),
            count,
            missing: vec![],
        });
        let at = Instant::from_millis(400);
        let m = ClientMsg::Nak(NakRepr {
            transmission: TransmissionId(1),
            item: ItemId(item),
            received: 100,
            expected: 300,
            needs: needs.collect(),
        });
        s.handle_client_msg(at, a, m);
        assert_eq!(s.stats().naks, 1, "{what}");
        assert_eq!(s.stats().rescheduled, u64::from(!repaired), "{what}");
        assert_eq!(s.queue_len(), usize::from(!repaired), "{what}");
        // Another receiver asks for the item meanwhile.
        ask(&mut s, at, vec![ItemSel::Id(ItemId(item))]);
        let (ann, _, _) = drain(&mut s, at);
        let first = (ann.iter().find(|x| x.kind != AnnounceKind::End)).expect("a transmission");
        if repaired {
            // The repair goes first, for `a` alone.
            let asked: u32 = counts.iter().sum();
            assert_eq!(
                (first.kind, first.total_packets),
                (AnnounceKind::Repair, asked),
                "{what}"
            );
        } else {
            // One scheduled send serves both: the whole item (f0's 300).
            assert_eq!(
                (first.kind, first.total_packets),
                (AnnounceKind::First, 300),
                "{what}"
            );
            assert_eq!(s.queue_len(), 0, "{what}: both receivers are on it");
        }
    }
}
