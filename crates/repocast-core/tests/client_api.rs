//! The client state machine driven by hand against a real server: how it
//! treats announcements that arrive out of order with the data (on a real
//! network they come on their own socket, and each is sent three times).

use repocast_core::client::{Client, ClientConfig};
use repocast_core::fec::CodeKind;
use repocast_core::server::{ItemInfo, NoPayload, Server, ServerConfig, Transmit};
use repocast_core::wire::{AnnounceKind, AnnounceRepr, ClientMsg, DataRepr, ItemSel};
use repocast_core::{ClientId, Instant, ItemId, TransmissionId};
use std::time::Duration;

/// Item 0 of one packet, item 1 of 100 packets; 1 ms per packet; a short
/// NAK window so a premature report would go out within a few ms.
fn server() -> Server {
    let cfg = ServerConfig {
        scheme: "FEC(0)+R(inf)".parse().expect("scheme"),
        code: CodeKind::RaptorQ,
        symbol_size: 64,
        max_block_symbols: 100,
        packet_interval: Duration::from_millis(1),
        nak_window: (Duration::from_millis(1), Duration::from_millis(2)),
        payloads: false,
        ..ServerConfig::default()
    };
    let items = [64u64, 6400]
        .iter()
        .enumerate()
        .map(|(i, &size)| ItemInfo {
            name: format!("f{i}"),
            size,
            hash: [0; 32],
            block_hashes: vec![],
        })
        .collect();
    Server::new(cfg, items).expect("server")
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
    let mut c = Client::new(ClientConfig {
        payloads: false,
        ..ClientConfig::default()
    });
    let id = s.handle_connect(Instant::ZERO);
    c.request(
        Instant::ZERO,
        vec![ItemSel::Id(ItemId(0)), ItemSel::Id(ItemId(1))],
    );
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
