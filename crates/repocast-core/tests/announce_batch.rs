//! Announcement signatures checked as a batch
//! (`ClientEndpoint::prepare_announcements`): the datagrams a driver reads
//! together have the signatures of those that bear on the request
//! checked at once, so each is then answered from memory; a batch with an
//! insider's forgery in it (the session key's tag right, the signature
//! not the server's) leaves nothing remembered, every datagram is then
//! checked on its own, and the forgery is refused and counted.

use repocast_core::auth::{self, Identity, SessionKey};
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::profile::Profile;
use repocast_core::wire::control::Channels;
use repocast_core::wire::frame::encode_frame;
use repocast_core::wire::{AnnounceKind, AnnounceRepr, ServerMsg};
use repocast_core::{Instant, ItemId, SessionId, TransmissionId};

const KEY: [u8; 32] = [0x42; 32];
const SESSION: SessionId = SessionId(9);

/// A client that pins `server`'s key, welcomed and on the groups, its
/// request out (so every announcement bears on it until its manifests
/// come).
fn client(server: &Identity) -> (ClientEndpoint<MemoryStore>, auth::Verified) {
    let mut cfg = ClientEndpointConfig::new(Profile::Lan.client(), Want::Items(vec!["a".into()]));
    cfg.server_key = Some(server.public());
    let verified = cfg.verified.clone();
    let mut c = ClientEndpoint::new(Instant::ZERO, cfg, MemoryStore::default());
    let welcome = ServerMsg::Welcome {
        session: SESSION,
        items: 1,
        channels: Channels {
            data: Some("239.1.1.1:5000".parse().expect("addr")),
            announce: Some("239.1.1.2:5000".parse().expect("addr")),
            source: None,
            rate_bps: 0,
        },
        session_key: Some(KEY),
        signed_symbols: false,
    };
    let (mut body, mut frame) = (Vec::new(), Vec::new());
    welcome.emit(&mut body);
    encode_frame(&body, &mut frame);
    c.handle_stream(Instant::ZERO, &frame);
    while let Some(e) = c.poll_event() {
        if let Event::Join(_) = e {
            c.joined(Instant::ZERO);
        }
    }
    let mut buf = Vec::new();
    while c.poll_transmit(&mut buf) {}
    (c, verified)
}

/// Transmission `t`'s start, sealed under the session key and signed by
/// `signer`.
fn announcement(t: u32, signer: &Identity) -> Vec<u8> {
    let a = AnnounceRepr {
        session: SESSION,
        transmission: TransmissionId(t),
        item: ItemId(0),
        kind: AnnounceKind::First,
        first_block: 0,
        block_count: 1,
        total_packets: 1,
        duration_us: 100,
        nak_window_min_us: 1000,
        nak_window_max_us: 2000,
    };
    let mut buf = Vec::new();
    a.emit(&mut buf);
    auth::seal_announce(&SessionKey::from_bytes(KEY), signer, &mut buf);
    buf
}

#[test]
fn a_batch_is_checked_once_and_each_then_comes_from_memory() {
    let server = Identity::from_seed([1; 32]);
    let (mut c, verified) = client(&server);
    let batch: Vec<Vec<u8>> = (1..=6).map(|t| announcement(t, &server)).collect();
    // Three copies of each, as the server sends them.
    let read: Vec<&[u8]> = batch
        .iter()
        .flat_map(|d| [&d[..], &d[..], &d[..]])
        .collect();
    c.prepare_announcements(read.iter().copied());
    assert_eq!(verified.counts(), (6, 0), "one check for each distinct one");
    for d in &read {
        c.handle_datagram(Instant::ZERO, Channel::Announce, d);
    }
    assert_eq!(verified.counts(), (6, 18), "every one handled from memory");
    assert_eq!(c.stats().forged, 0);
}

#[test]
fn a_forgery_in_a_batch_leaves_each_checked_on_its_own_and_is_refused() {
    let server = Identity::from_seed([1; 32]);
    let insider = Identity::from_seed([2; 32]);
    let (mut c, verified) = client(&server);
    let mut read: Vec<Vec<u8>> = (1..=4).map(|t| announcement(t, &server)).collect();
    read.insert(2, announcement(9, &insider));
    c.prepare_announcements(read.iter().map(|d| &d[..]));
    let (checked, hits) = verified.counts();
    assert_eq!((checked, hits), (5, 0));
    for d in &read {
        c.handle_datagram(Instant::ZERO, Channel::Announce, d);
    }
    // Nothing was remembered from the batch: the four good ones and the
    // forgery are each checked again, and only the forgery fails.
    assert_eq!(verified.counts(), (10, 0));
    assert_eq!(c.stats().forged, 1);
}
