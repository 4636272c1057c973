//! A receiver whose blocks are out being decoded when its report falls
//! due reports that it needs nothing, and the server takes that as a
//! report: it waits for the done report. Until session 61 it sent the
//! item again, and again, a transmission every few milliseconds for as
//! long as a decode took. A block that comes back failed is asked for
//! as soon as it is back.

use repocast_core::Instant;
use repocast_core::client::decode::DecodeJob;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::profile::Profile;
use repocast_core::wire::ClientMsg;
use repocast_core::wire::frame::FrameDecoder;
use repocast_sim::source::MemorySource;
use std::time::Duration;

/// A server and one client of one item of two 32-symbol blocks, the
/// client's decode jobs kept by the test until it hands them back.
struct Net {
    server: ServerEndpoint,
    source: MemorySource,
    conn: repocast_core::ClientId,
    client: ClientEndpoint<MemoryStore>,
    now: Instant,
    /// Decode jobs out, not yet handed back.
    jobs: Vec<DecodeJob>,
    /// What the client sent the server.
    sent: Vec<ClientMsg>,
    bytes: Vec<u8>,
}

impl Net {
    fn new() -> Net {
        let mut cfg = Profile::Lan.server();
        cfg.symbol_size = 64;
        cfg.max_block_symbols = 32;
        let fec = cfg.base_fec();
        let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let infos = vec![MemorySource::item_info("a", &bytes, &fec).expect("item")];
        let mut server = ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).expect("server");
        let conn = server.accept(Instant::ZERO).expect("accepted");
        let client = ClientEndpoint::new(
            Instant::ZERO,
            ClientEndpointConfig::new(Profile::Lan.client(), Want::Items(vec!["a".into()])),
            MemoryStore::default(),
        );
        Net {
            server,
            source: MemorySource::new(vec![bytes.clone()]),
            conn,
            client,
            now: Instant::ZERO,
            jobs: Vec::new(),
            sent: Vec::new(),
            bytes,
        }
    }

    /// Runs for `ms` milliseconds, in steps of 200 µs.
    fn run(&mut self, ms: u64) {
        let (mut buf, mut frames) = (Vec::new(), FrameDecoder::default());
        for _ in 0..ms * 5 {
            while self.client.poll_transmit(&mut buf) {
                self.server.handle_stream(self.now, self.conn, &buf);
                frames.extend(&buf);
                while let Ok(Some(f)) = frames.next_frame() {
                    self.sent.push(ClientMsg::parse(&f).expect("a frame"));
                }
            }
            while let Some(ev) = self.client.poll_event() {
                if let Event::Join(_) = ev {
                    self.client.joined(self.now);
                }
            }
            let now = self.now;
            while let Some(d) = self.server.poll_transmit(now, &mut self.source, &mut buf) {
                match d {
                    Dest::Conn(_) => self.client.handle_stream(now, &buf),
                    Dest::Data => self.client.handle_datagram(now, Channel::Data, &buf),
                    Dest::Announce => self.client.handle_datagram(now, Channel::Announce, &buf),
                }
                self.jobs
                    .extend(std::iter::from_fn(|| self.client.poll_decode()));
            }
            self.now = self.now + Duration::from_micros(200);
            self.server.handle_timeout(self.now);
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
        }
    }

    fn naks(&self) -> Vec<&repocast_core::wire::NakRepr> {
        (self.sent.iter())
            .filter_map(|m| match m {
                ClientMsg::Nak(n) => Some(n),
                _ => None,
            })
            .collect()
    }

    fn done_sent(&self) -> bool {
        (self.sent.iter()).any(|m| matches!(m, ClientMsg::ItemDone { .. }))
    }
}

#[test]
fn a_report_needing_nothing_while_blocks_are_decoded_is_taken_as_a_report() {
    let mut n = Net::new();
    // Long enough for the send, its end, the report's delay, and many
    // report rounds after it.
    n.run(1000);
    assert_eq!(n.jobs.len(), 2, "both blocks out being decoded");
    let naks = n.naks();
    assert_eq!(naks.len(), 1, "one report: {naks:?}");
    assert!(naks[0].needs.is_empty(), "{naks:?}");
    assert!(!n.done_sent());
    let st = n.server.server().stats();
    assert_eq!(st.transmissions, 1, "the item sent again: {st:?}");
    assert_eq!((st.empty_naks, st.report_timeouts), (1, 0));

    // Back: verified, and reported done.
    let now = n.now;
    for mut job in n.jobs.drain(..) {
        job.run();
        n.client.decoded(now, job);
    }
    n.run(100);
    assert!(n.done_sent());
    assert_eq!(n.naks().len(), 1);
    assert_eq!(n.client.outcomes()[0].result, Ok(()));
    assert_eq!(n.client.store().file("a"), Some(&n.bytes[..]));
    assert_eq!(n.server.server().stats().transmissions, 1);
}

#[test]
fn a_block_that_comes_back_failed_is_asked_for_then() {
    let mut n = Net::new();
    n.run(1000);
    assert_eq!(n.jobs.len(), 2);
    // One decodes; the other's thread is lost with its symbols.
    let now = n.now;
    let mut jobs = std::mem::take(&mut n.jobs);
    let mut lost = jobs.remove(1);
    let block = lost.block();
    let mut good = jobs.remove(0);
    good.run();
    n.client.decoded(now, good);
    n.run(50);
    assert_eq!(n.naks().len(), 1, "one block still out: no second report");
    lost.lose();
    n.client.decoded(now, lost);
    n.run(5);
    let naks = n.naks();
    assert_eq!(naks.len(), 2, "{naks:?}");
    assert_eq!(naks[1].needs.len(), 1);
    assert_eq!(naks[1].needs[0].block.0, block);
    assert_eq!(naks[1].needs[0].count, 32, "the whole block again");
    assert_eq!((naks[1].received, naks[1].expected), (0, 0), "counted once");

    // Repaired; its decode handed back at once from here on.
    for _ in 0..500 {
        n.run(2);
        let now = n.now;
        for mut job in n.jobs.drain(..) {
            job.run();
            n.client.decoded(now, job);
        }
    }
    assert_eq!(n.client.outcomes()[0].result, Ok(()));
    assert_eq!(n.client.store().file("a"), Some(&n.bytes[..]));
    let st = n.server.server().stats();
    // One repair, whatever the reports said meanwhile (the repaired
    // block may be out being decoded at its report too).
    assert_eq!(
        (st.transmissions, st.repair_transmissions),
        (2, 1),
        "{st:?}"
    );
}
