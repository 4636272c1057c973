//! The request handshake through the endpoints' byte interfaces: a client
//! says hello at once but asks for its items only after its driver says it
//! is on the groups the welcome names ([`ClientEndpoint::joined`]), so the
//! server sends no symbol of them before the receiver can hear it.

use repocast_core::Instant;
use repocast_core::endpoint::Dest;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Outcome, Want};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::profile::Profile;
use repocast_sim::source::MemorySource;
use std::time::Duration;

/// What the server sends by `now`: (frames to the client, data packets).
fn drain(
    server: &mut ServerEndpoint,
    source: &mut MemorySource,
    now: Instant,
) -> (Vec<Vec<u8>>, usize) {
    let (mut frames, mut data, mut buf) = (Vec::new(), 0, Vec::new());
    while let Some(d) = server.poll_transmit(now, source, &mut buf) {
        match d {
            Dest::Conn(_) => frames.push(buf.clone()),
            Dest::Data => data += 1,
            Dest::Announce => {}
        }
    }
    (frames, data)
}

#[test]
fn the_request_waits_until_the_receiver_is_on_the_groups() {
    let mut cfg = Profile::Lan.server();
    cfg.symbol_size = 64;
    let fec = cfg.base_fec();
    let bytes = vec![5u8; 4000];
    let infos = vec![MemorySource::item_info("a", &bytes, &fec).expect("item")];
    let mut source = MemorySource::new(vec![bytes]);
    let mut server = ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).expect("server");
    let conn = server.accept(Instant::ZERO).expect("accepted");
    let want = Want::Items(vec!["a".into()]);
    let mut client = ClientEndpoint::new(
        Instant::ZERO,
        ClientEndpointConfig::new(Profile::Lan.client(), want),
        MemoryStore::default(),
    );
    let mut now = Instant::ZERO;
    // Frames the client writes, handed to the server at `now`.
    let to_server =
        |client: &mut ClientEndpoint<MemoryStore>, server: &mut ServerEndpoint, now: Instant| {
            let (mut n, mut buf) = (0, Vec::new());
            while client.poll_transmit(&mut buf) {
                server.handle_stream(now, conn, &buf);
                n += 1;
            }
            n
        };

    // The hello alone: the server welcomes the client and sends nothing.
    assert_eq!(
        to_server(&mut client, &mut server, now),
        1,
        "only the hello"
    );
    let (welcome, data) = drain(&mut server, &mut source, now);
    assert!(!welcome.is_empty());
    assert_eq!(data, 0, "no request yet");
    for f in &welcome {
        client.handle_stream(now, f);
    }
    let events: Vec<Event> = std::iter::from_fn(|| client.poll_event()).collect();
    assert!(matches!(events.as_slice(), [Event::Join(_)]), "{events:?}");

    // Welcomed but not yet on the groups: still no request, however long.
    now = now + Duration::from_millis(50);
    client.handle_timeout(now);
    assert_eq!(
        to_server(&mut client, &mut server, now),
        0,
        "asked before joining"
    );
    assert_eq!(drain(&mut server, &mut source, now).1, 0);
    assert!(!client.is_finished());
    let pending: Vec<Outcome> = client.outcomes();
    assert_eq!(pending.len(), 1, "the request is recorded: {pending:?}");

    // On the groups: the request goes out and the item is sent.
    client.joined(now);
    assert!(to_server(&mut client, &mut server, now) >= 1);
    let mut sent = 0;
    for _ in 0..100 {
        now = now + Duration::from_millis(1);
        server.handle_timeout(now);
        sent += drain(&mut server, &mut source, now).1;
    }
    assert!(sent > 0, "the item went out once asked for");
}
