//! A request the server never serves, though the server keeps sending to
//! others, ends with a reason at the stall timeout
//! ([`ClientEndpointConfig::stall_timeout`]); without the bound it waits
//! as long as the server is heard, whatever its idle timeout.
//!
//! Session 60 found such a request in the lab: its request frame sat in a
//! TLS buffer, so the server never had it, and announcements of other
//! requests' sends kept resetting its idle timer. Here the request frame
//! is dropped on its way to the server.

use repocast_core::Instant;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::profile::Profile;
use repocast_sim::source::MemorySource;
use std::time::Duration;

type Client = ClientEndpoint<MemoryStore>;

fn client(items: Vec<String>, stall: Option<Duration>) -> Client {
    let mut cfg = ClientEndpointConfig::new(Profile::Lan.client(), Want::Items(items));
    cfg.idle_timeout = Duration::from_secs(1);
    cfg.stall_timeout = stall;
    ClientEndpoint::new(Instant::ZERO, cfg, MemoryStore::default())
}

/// Runs a server for three clients: `a` asks for 60 small items, `lost`
/// and `waiting` for one more, but their frames after the hello never
/// reach the server. Returns when `a` is done (or at 30 s): the time,
/// and the three clients.
fn run(stall: Duration) -> (Instant, [Client; 3]) {
    let mut cfg = Profile::Lan.server();
    cfg.symbol_size = 256;
    // 60 items of 12 packets at one packet per 10 ms: about 7 s on air,
    // a transmission starting about every 120 ms.
    cfg.packet_interval = Duration::from_millis(10);
    let fec = cfg.base_fec();
    let names: Vec<String> = (0..61).map(|i| format!("f{i}")).collect();
    let files: Vec<Vec<u8>> = (0..61u32).map(|i| vec![i as u8; 3000]).collect();
    let infos = (names.iter().zip(&files))
        .map(|(n, f)| MemorySource::item_info(n, f, &fec).expect("item"))
        .collect();
    let mut source = MemorySource::new(files);
    let mut server = ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).expect("server");
    let mut clients = [
        client(names[..60].to_vec(), Some(stall)),
        client(vec![names[60].clone()], Some(stall)),
        client(vec![names[60].clone()], None),
    ];
    let conns: Vec<_> = (0..3)
        .map(|_| server.accept(Instant::ZERO).expect("accepted"))
        .collect();
    let mut frames_sent = [0usize; 3];
    let (mut now, mut buf) = (Instant::ZERO, Vec::new());
    while now < Instant::from_micros(30_000_000) {
        for (i, c) in clients.iter_mut().enumerate() {
            while c.poll_transmit(&mut buf) {
                frames_sent[i] += 1;
                // The hello goes through; the others' request is lost.
                if i == 0 || frames_sent[i] == 1 {
                    server.handle_stream(now, conns[i], &buf);
                }
            }
            while let Some(ev) = c.poll_event() {
                if let Event::Join(_) = ev {
                    c.joined(now);
                }
            }
        }
        while let Some(d) = server.poll_transmit(now, &mut source, &mut buf) {
            match d {
                Dest::Conn(to) => {
                    if let Some(i) = conns.iter().position(|&c| c == to) {
                        clients[i].handle_stream(now, &buf);
                    }
                }
                Dest::Data => {
                    for c in &mut clients {
                        c.handle_datagram(now, Channel::Data, &buf);
                        c.decode_here(now);
                    }
                }
                Dest::Announce => {
                    for c in &mut clients {
                        c.handle_datagram(now, Channel::Announce, &buf);
                    }
                }
            }
        }
        if clients[0].is_finished() {
            break;
        }
        now = now + Duration::from_millis(1);
        server.handle_timeout(now);
        for c in &mut clients {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
    }
    (now, clients)
}

#[test]
fn a_request_the_server_never_serves_ends_at_the_stall_timeout() {
    let stall = Duration::from_secs(2);
    let (end, [a, lost, waiting]) = run(stall);
    assert!(
        a.outcomes().iter().all(|o| o.result.is_ok()),
        "the served request verified: {:?}",
        a.outcomes()
    );
    assert!(
        end > Instant::from_micros(3_000_000),
        "the server was busy past the stall timeout: {end:?}"
    );

    // Lost, with the bound: failed with the reason, at the timeout.
    assert!(lost.is_finished());
    let reason = lost.outcomes()[0].result.clone().expect_err("failed");
    assert!(
        reason.contains("sent nothing for this request (1 items left) for 2 s"),
        "{reason}"
    );

    // Lost, without the bound: still waiting, though its idle timeout is
    // 1 s, because the server's announcements to others kept it "heard".
    assert!(!waiting.is_finished(), "{:?}", waiting.outcomes());
}
