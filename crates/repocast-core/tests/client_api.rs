//! The client state machine driven by hand against a real server: how it
//! treats announcements that arrive out of order with the data (on a real
//! network they come on their own socket, and each is sent three times).

use repocast_core::client::{Client, ClientConfig, ClientEvent};
use repocast_core::fec::CodeKind;
use repocast_core::server::{ItemInfo, NoPayload, Server, ServerConfig, Transmit};
use repocast_core::wire::{
    AnnounceKind, AnnounceRepr, BlockNeed, ClientMsg, DataRepr, ItemSel, NakRepr,
};
use repocast_core::{BlockId, ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

/// Accounting-mode server with 64-byte symbols, 1 ms per packet and a
/// short NAK window (a premature report would go out within a few ms),
/// serving items of these sizes.
fn server_of(scheme: &str, max_block: u32, sizes: &[u64]) -> Server {
    server_with(scheme, max_block, sizes, |_| {})
}

/// [`server_of`], with `tweak` applied to its configuration.
fn server_with(
    scheme: &str,
    max_block: u32,
    sizes: &[u64],
    tweak: impl FnOnce(&mut ServerConfig),
) -> Server {
    let mut cfg = ServerConfig {
        scheme: scheme.parse().expect("scheme"),
        code: CodeKind::RaptorQ,
        symbol_size: 64,
        max_block_symbols: max_block,
        packet_interval: Duration::from_millis(1),
        nak_window: (Duration::from_millis(1), Duration::from_millis(2)),
        payloads: false,
        ..ServerConfig::default()
    };
    tweak(&mut cfg);
    let items = (sizes.iter().enumerate())
        .map(|(i, &size)| ItemInfo {
            name: format!("f{i}"),
            size,
            hash: [0; 32],
            block_hashes: vec![],
        })
        .collect();
    Server::new(cfg, items).expect("server")
}

/// Item 0 of one packet, item 1 of 100 packets.
fn server() -> Server {
    server_of("FEC(0)+R(inf)", 100, &[64, 6400])
}

/// An accounting-mode client, connected to `s`, asking for items 0 and 1.
fn asking_for_both(s: &mut Server) -> (Client, ClientId) {
    let mut c = Client::new(ClientConfig {
        payloads: false,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(
        Instant::ZERO,
        vec![ItemSel::Id(ItemId(0)), ItemSel::Id(ItemId(1))],
    );
    (c, id)
}

enum Out {
    Ann(AnnounceRepr),
    Data(DataRepr),
}

/// Everything the server sends by `now`; control messages go straight to
/// the client, multicast is returned in order.
fn step(s: &mut Server, c: &mut Client, id: ClientId, now: Instant) -> Vec<Out> {
    while let Some(m) = c.poll_transmit() {
        s.handle_client_msg(now, id, m);
    }
    s.handle_timeout(now);
    let mut out = Vec::new();
    while let Some(t) = s.poll_transmit(now, &mut NoPayload) {
        match t {
            Transmit::Control(to, m) if to == id => c.handle_server_msg(now, m),
            Transmit::Control(..) => {}
            Transmit::Announce(a) => out.push(Out::Ann(a)),
            Transmit::Data(d) => out.push(Out::Data(d)),
        }
    }
    out
}

#[test]
fn a_late_copy_of_an_older_announcement_does_not_end_the_current_transmission() {
    let mut s = server();
    let (mut c, id) = asking_for_both(&mut s);
    let mut stale: Vec<AnnounceRepr> = Vec::new();
    let mut heard_of_item1 = 0;
    let mut now = Instant::ZERO;
    // Deliver everything in order until 10 packets of item 1 are in.
    while heard_of_item1 < 10 {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => {
                    if a.item == ItemId(0) {
                        stale.push(a.clone());
                    }
                    c.handle_announce(now, &a);
                }
                Out::Data(d) => {
                    if d.item == ItemId(1) {
                        heard_of_item1 += 1;
                    }
                    c.handle_data(now, &d);
                }
            }
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        now = now + Duration::from_micros(500);
        assert!(
            now < Instant::ZERO + Duration::from_secs(1),
            "item 1 never came"
        );
    }
    let kinds: Vec<AnnounceKind> = stale.iter().map(|a| a.kind).collect();
    assert!(kinds.contains(&AnnounceKind::End), "{kinds:?}");
    assert!(stale.iter().all(|a| a.transmission == TransmissionId(1)));
    // Now the late copies of item 0's announcements are read; item 1's
    // data stops for a moment (the client keeps its own timers).
    for a in &stale {
        c.handle_announce(now, a);
    }
    let until = now + Duration::from_millis(20);
    while now < until {
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while let Some(m) = c.poll_transmit() {
            assert!(
                !matches!(m, ClientMsg::Nak(_) | ClientMsg::ItemDone { .. }),
                "reported on a transmission still on air: {m:?}"
            );
        }
        now = now + Duration::from_millis(1);
    }
    // The rest of item 1 completes it.
    let mut done = false;
    for _ in 0..400 {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => c.handle_announce(now, &a),
                Out::Data(d) => {
                    c.handle_data(now, &d);
                }
            }
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while c.poll_event().is_some() {}
        done |= c.is_finished();
        now = now + Duration::from_millis(1);
    }
    assert!(done, "item 1 never completed");
}

/// One 5,000-packet item (5 blocks of 1,000) under `FEC(maxloss+0.02)` to
/// one receiver that loses every tenth data packet; returns the server's
/// counters, the announced lengths of the first transmission, and the
/// receiver's first NAK of it.
fn first_send_with_loss(loss_reports: bool) -> (ServerStatsView, Vec<u32>, Option<NakSeen>) {
    let mut s = server_of("FEC(maxloss+0.02)+R(inf)", 1000, &[5000 * 64]);
    let mut c = Client::new(ClientConfig {
        payloads: false,
        loss_reports,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let (mut lengths, mut nak, mut n) = (Vec::new(), None, 0u64);
    let mut reports = Vec::new();
    let mut now = Instant::ZERO;
    while !c.is_finished() && now < Instant::ZERO + Duration::from_secs(30) {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => {
                    if a.transmission == TransmissionId(1) && a.kind == AnnounceKind::First {
                        lengths.push(a.total_packets);
                    }
                    c.handle_announce(now, &a);
                }
                Out::Data(d) => {
                    n += 1;
                    if n % 10 != 0 {
                        c.handle_data(now, &d);
                    }
                }
            }
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        // Look at what the client says before the server takes it.
        let msgs: Vec<ClientMsg> = std::iter::from_fn(|| c.poll_transmit()).collect();
        for m in msgs {
            if let ClientMsg::LossReport { expected, .. } = &m {
                reports.push(*expected);
            }
            if let ClientMsg::Nak(k) = &m {
                // Its report at the end (a NAK while the send is on air,
                // on the packets heard so far, is a short-block hint).
                let end = lengths.last().is_some_and(|&l| k.expected >= l);
                if k.transmission == TransmissionId(1) && nak.is_none() && end {
                    nak = Some(NakSeen {
                        expected: k.expected,
                        blocks: k.needs.iter().filter(|b| b.count > 0).count(),
                    });
                }
            }
            s.handle_client_msg(now, id, m);
        }
        while c.poll_event().is_some() {}
        now = now + Duration::from_millis(1);
    }
    assert!(c.is_finished(), "the item never completed");
    let st = s.stats();
    (
        ServerStatsView {
            grown: st.grown_packets,
            repaired: st.repair_packets,
            reports,
        },
        lengths,
        nak,
    )
}

struct ServerStatsView {
    grown: u64,
    repaired: u64,
    /// The packets each of the receiver's early loss reports rested on.
    reports: Vec<u32>,
}

struct NakSeen {
    expected: u32,
    blocks: usize,
}

/// A client with early loss reports on, asking for a 5,000-packet item
/// (`FEC(maxloss+0.02)`), that has heard the first data packet (seq 0) of
/// its send and nothing after it; returns it, that packet and the time.
fn reporting_client_at_first_packet() -> (Client, DataRepr, Instant) {
    let mut s = server_of("FEC(maxloss+0.02)+R(inf)", 1000, &[5000 * 64]);
    let mut c = Client::new(ClientConfig {
        payloads: false,
        loss_reports: true,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let mut now = Instant::ZERO;
    let mut first = None;
    while first.is_none() && now < Instant::ZERO + Duration::from_secs(1) {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => c.handle_announce(now, &a),
                Out::Data(d) if d.seq == 0 => {
                    c.handle_data(now, &d);
                    first = Some(d);
                }
                Out::Data(_) => {}
            }
        }
        now = now + Duration::from_millis(1);
    }
    (c, first.expect("a data packet"), now)
}

#[test]
fn sequence_numbers_at_the_top_of_the_range_do_not_make_every_packet_a_report() {
    // A server (hostile, or broken) numbers a long transmission's packets
    // up to u32::MAX. Each early loss report waits for twice the packets of
    // the one before, so a transmission gets at most 22, whatever its
    // numbers say; a packet at the top of the range is reported on once.
    let reports = |c: &mut Client| {
        std::iter::from_fn(|| c.poll_transmit())
            .filter(|m| matches!(m, ClientMsg::LossReport { .. }))
            .count()
    };
    let (mut c, d, now) = reporting_client_at_first_packet();
    reports(&mut c);
    let mut n = 0;
    for seq in [u32::MAX, u32::MAX, u32::MAX - 1, u32::MAX, u32::MAX] {
        for _ in 0..20 {
            c.handle_data(now, &DataRepr { seq, ..d.clone() });
            n += reports(&mut c);
        }
    }
    assert_eq!(n, 1, "{n} reports on 100 packets");
    // Doubling from 1,024 packets, the thresholds run out after 22.
    let (mut c, d, now) = reporting_client_at_first_packet();
    reports(&mut c);
    let mut n = 0;
    let mut seq = 1023u32;
    loop {
        c.handle_data(now, &DataRepr { seq, ..d.clone() });
        n += reports(&mut c);
        if seq == u32::MAX {
            break;
        }
        seq = seq.saturating_mul(2).saturating_add(1);
    }
    for _ in 0..10 {
        c.handle_data(now, &DataRepr { seq, ..d.clone() });
        n += reports(&mut c);
    }
    assert_eq!(n, 22);
}

#[test]
fn an_early_loss_report_grows_the_rest_of_a_first_transmission() {
    // Without reports: 2% redundancy everywhere, so at 10% loss every
    // block ends short and the NAK names all five.
    let (plain, lengths, nak) = first_send_with_loss(false);
    assert_eq!(plain.grown, 0);
    assert!(plain.reports.is_empty());
    assert_eq!(lengths, vec![5100]);
    let nak = nak.expect("a NAK after the first send");
    assert_eq!(nak.blocks, 5);
    assert_eq!(nak.expected, 5100);
    // With them: after 1,024 packets the receiver reports about 10% loss;
    // every block grows to 12% redundancy (those not yet sent in place,
    // the ones already on air by a segment at the end of the send) and
    // the server announces the new length. Nothing is left to repair.
    // It reports again on twice the packets, and again: the estimates
    // agree with the first, so nothing more changes.
    let (grown, lengths, nak) = first_send_with_loss(true);
    assert_eq!(grown.reports, vec![1024, 2048, 4096]);
    assert!(grown.grown >= 5 * 90, "{}", grown.grown);
    assert_eq!(lengths.len(), 2, "{lengths:?}");
    assert_eq!(lengths[1] as u64, 5100 + grown.grown);
    assert!(
        nak.is_none(),
        "a NAK for {} blocks",
        nak.map_or(0, |n| n.blocks)
    );
    assert_eq!(grown.repaired, 0);
    assert!(plain.repaired > 0);
}

/// What one receiver saw of a send interrupted by another's repair.
struct Interrupted {
    /// When the repair started, and when the receiver's item completed.
    repair_at: Instant,
    done: Instant,
    preemptions: u64,
    early_naks: u64,
    repairs: u64,
    reopened: u64,
}

/// The NAK of a receiver that lost eight packets of the 10-packet item 0
/// in transmission 1.
fn lost_eight() -> ClientMsg {
    ClientMsg::Nak(NakRepr {
        transmission: TransmissionId(1),
        item: ItemId(0),
        received: 2,
        expected: 10,
        needs: vec![BlockNeed {
            block: BlockId(0),
            count: 8,
            missing: vec![],
        }],
    })
}

/// Two receivers: one asks for a 10-packet item and loses eight of its
/// packets (its NAK is written by hand), the other asks for a 2,000-packet
/// item, sent next, and loses nothing. The NAK comes while the large item
/// is on air: with `preempt` the repair interrupts it, and it then resumes
/// (its announcement heard again by the receiver, or only its data if
/// `hear_resume` is false).
fn interrupted(preempt: bool, hear_resume: bool) -> Interrupted {
    let mut s = server_with("FEC(0)+R(inf)", 100, &[640, 2000 * 64], |c| {
        c.preempt = preempt
    });
    let small = s.handle_connect(Instant::ZERO);
    let items = vec![ItemSel::Id(ItemId(0))];
    s.handle_client_msg(Instant::ZERO, small, ClientMsg::Request { items });
    let mut c = Client::new(ClientConfig {
        payloads: false,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(1))]);
    let (mut repair_at, mut done) = (None, None);
    let mut now = Instant::ZERO;
    while done.is_none() && now < Instant::ZERO + Duration::from_secs(30) {
        if now == Instant::from_millis(12) {
            s.handle_client_msg(now, small, lost_eight());
        }
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => {
                    if a.kind == AnnounceKind::Repair {
                        repair_at.get_or_insert(now);
                    }
                    // The large send's announcement after the repair's.
                    let again = a.transmission == TransmissionId(2)
                        && a.kind == AnnounceKind::First
                        && repair_at.is_some();
                    if !again || hear_resume {
                        c.handle_announce(now, &a);
                    }
                }
                Out::Data(d) => {
                    c.handle_data(now, &d);
                }
            }
        }
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while let Some(e) = c.poll_event() {
            if matches!(e, ClientEvent::ItemComplete(_)) {
                done = Some(now);
            }
        }
        now = now + Duration::from_millis(1);
    }
    let st = s.stats();
    Interrupted {
        repair_at: repair_at.expect("a repair"),
        done: done.expect("the large item never completed"),
        preemptions: st.preemptions,
        early_naks: st.early_naks,
        repairs: st.repair_transmissions,
        reopened: c.stats().reopened,
    }
}

/// The small item's repair goes at once, not after the large send, and
/// the interrupted send costs its receiver only the repair's packets:
/// taken back up (from its announcement, or from its data alone), it
/// completes with no repair of its own. The NAK that receiver sent while
/// the repair was on air (its NAK delay is shorter than the repair) is
/// left for the report at the send's real end.
#[test]
fn a_repair_interrupts_a_long_send_which_then_resumes() {
    let off = interrupted(false, true);
    assert!(off.repair_at >= off.done, "{:?}", off.repair_at);
    assert_eq!((off.preemptions, off.reopened, off.repairs), (0, 0, 1));
    for hear_resume in [true, false] {
        let on = interrupted(true, hear_resume);
        assert_eq!(on.preemptions, 1);
        assert!(
            on.repair_at <= Instant::from_millis(13),
            "{:?}",
            on.repair_at
        );
        assert_eq!(on.repairs, 1, "no repair of the large item");
        assert_eq!(on.reopened, 1);
        assert_eq!(on.early_naks, 1);
        assert!(
            on.done <= off.done + Duration::from_millis(10),
            "{:?} against {:?}",
            on.done,
            off.done
        );
    }
}

/// A receiver that still waits for the rest of the send on air gains
/// nothing from its repair going first (its request ends with that send
/// either way), so the repair waits: one receiver asks for both items and
/// NAKs the small one while the large one is on air.
#[test]
fn a_repair_for_a_receiver_of_the_send_on_air_does_not_interrupt_it() {
    let mut s = server_with("FEC(0)+R(inf)", 100, &[640, 2000 * 64], |c| {
        c.preempt = true
    });
    let both = s.handle_connect(Instant::ZERO);
    let items = vec![ItemSel::Id(ItemId(0)), ItemSel::Id(ItemId(1))];
    s.handle_client_msg(Instant::ZERO, both, ClientMsg::Request { items });
    let mut repair = None;
    for ms in 0..100 {
        let now = Instant::from_millis(ms);
        if ms == 12 {
            s.handle_client_msg(now, both, lost_eight());
        }
        while let Some(t) = s.poll_transmit(now, &mut NoPayload) {
            if let Transmit::Announce(a) = t {
                if a.kind == AnnounceKind::Repair {
                    repair.get_or_insert(ms);
                }
            }
        }
    }
    assert_eq!((s.stats().preemptions, repair), (0, None));
}

/// A transmission the server trims (every receiver reported less loss than
/// it was sized for) is announced again shorter: a receiver on it moves its
/// deadline earlier by the packets taken off, so it reports when the send
/// ends, not when the longer one would have; an announcement shorter than
/// what it has heard of the send moves it no earlier than that.
#[test]
fn an_announced_trim_brings_the_receivers_deadline_forward() {
    let mut s = server_of("FEC(0)+R(inf)", 1000, &[5000 * 64]);
    let mut c = Client::new(ClientConfig {
        payloads: false,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let (mut first, mut heard, mut now) = (None, 0u32, Instant::ZERO);
    while heard < 100 {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) => {
                    first.get_or_insert(a.clone());
                    c.handle_announce(now, &a);
                }
                Out::Data(d) => {
                    heard += 1;
                    c.handle_data(now, &d);
                }
            }
        }
        now = now + Duration::from_millis(1);
    }
    let a = first.expect("announced");
    assert_eq!(a.total_packets, 5000);
    let before = c.poll_timeout().expect("a deadline");
    let per = Duration::from_micros(a.duration_us) / a.total_packets;
    let shorter = AnnounceRepr {
        total_packets: 4000,
        duration_us: a.duration_us * 4 / 5,
        ..a.clone()
    };
    c.handle_announce(now, &shorter);
    assert_eq!(c.poll_timeout(), Some(before.saturating_sub(per * 1000)));
    // Shorter than the 100 heard: taken as 100.
    let absurd = AnnounceRepr {
        total_packets: 10,
        duration_us: a.duration_us / 500,
        ..a
    };
    c.handle_announce(now, &absurd);
    let floor = before.saturating_sub(per * 4900);
    assert_eq!(c.poll_timeout(), Some(floor));
}

/// Data that overtakes its items' manifests is held, and used once they
/// come: both items of a request complete from packets that all arrived
/// before either manifest, with no packet sent after them (held
/// together, fed back in the order they came).
#[test]
fn data_that_overtakes_its_manifests_is_used_once_they_come() {
    use repocast_core::wire::ServerMsg;
    let mut s = server();
    let (mut c, id) = asking_for_both(&mut s);
    let (mut now, mut held, mut data) = (Instant::ZERO, Vec::new(), 0);
    // Everything reaches the client but the manifests, until the server
    // has sent both items (1 packet and 100).
    while data < 101 {
        while let Some(m) = c.poll_transmit() {
            s.handle_client_msg(now, id, m);
        }
        s.handle_timeout(now);
        while let Some(t) = s.poll_transmit(now, &mut NoPayload) {
            match t {
                Transmit::Control(to, m @ ServerMsg::Manifest { .. }) if to == id => held.push(m),
                Transmit::Control(to, m) if to == id => c.handle_server_msg(now, m),
                Transmit::Control(..) => {}
                Transmit::Announce(a) => c.handle_announce(now, &a),
                Transmit::Data(d) => {
                    data += 1;
                    c.handle_data(now, &d);
                }
            }
        }
        now = now + Duration::from_micros(500);
        assert!(now < Instant::ZERO + Duration::from_secs(1), "not sent");
    }
    assert_eq!(held.len(), 2, "both manifests held back");
    while let Some(ev) = c.poll_event() {
        assert!(!matches!(
            ev,
            ClientEvent::ItemAssembled(_) | ClientEvent::ItemComplete(_)
        ));
    }
    for m in held {
        c.handle_server_msg(now, m);
    }
    // The held data is fed back at the next input.
    c.handle_timeout(now);
    let mut assembled = Vec::new();
    while let Some(ev) = c.poll_event() {
        if let ClientEvent::ItemAssembled(i) | ClientEvent::ItemComplete(i) = ev {
            assembled.push(i);
        }
    }
    assembled.sort();
    assembled.dedup();
    assert_eq!(assembled, [ItemId(0), ItemId(1)]);
}

#[test]
fn a_transmission_whose_start_was_lost_is_reported_on_from_its_end() {
    let mut s = server();
    let (mut c, id) = asking_for_both(&mut s);
    let mut now = Instant::ZERO;
    let mut end: Option<AnnounceRepr> = None;
    // Neither item 1's start nor any of its data arrives (a receiver that
    // hears any of the data joins the transmission by it); everything else
    // is delivered in order up to its end.
    while end.is_none() {
        for o in step(&mut s, &mut c, id, now) {
            match o {
                Out::Ann(a) if a.item == ItemId(1) && a.kind != AnnounceKind::End => {}
                Out::Ann(a) => {
                    if a.item == ItemId(1) {
                        end = Some(a.clone());
                    }
                    c.handle_announce(now, &a);
                }
                Out::Data(d) if d.item == ItemId(1) => {}
                Out::Data(d) => {
                    c.handle_data(now, &d);
                }
            }
        }
        now = now + Duration::from_micros(500);
        assert!(now < Instant::ZERO + Duration::from_secs(1), "no end");
    }
    let end = end.expect("end");
    // Its report goes out within the NAK window (1-2 ms), not at the
    // server's report timeout.
    let mut nak = None;
    let until = now + Duration::from_millis(5);
    while now < until && nak.is_none() {
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
        while let Some(m) = c.poll_transmit() {
            if let ClientMsg::Nak(n) = m {
                nak = Some(n);
            }
        }
        now = now + Duration::from_micros(250);
    }
    let nak = nak.expect("no report on the transmission whose start was lost");
    assert_eq!((nak.transmission, nak.item), (end.transmission, ItemId(1)));
    assert!(!nak.needs.is_empty(), "{nak:?}");
    // Nothing was counted of it: no loss sample, rather than "all lost".
    assert_eq!((nak.received, nak.expected), (0, 0));
    assert_eq!(c.stats().missed_starts, 1);
}
