//! A request stopped while blocks are out being decoded: the blocks the
//! decode jobs verify after the stop are still written, so a driver that
//! takes its jobs back before it lets go of the endpoint loses none of
//! them (here the item's last two blocks, so the item verifies).

use repocast_core::Instant;
use repocast_core::client::decode::DecodeJob;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::profile::Profile;
use repocast_sim::source::MemorySource;
use std::time::Duration;

type Client = ClientEndpoint<MemoryStore>;

/// Runs a server and a client of one item `bytes` until the client has
/// handed out `jobs` decode jobs and holds nothing else to decode: the
/// jobs, not run, and the client.
fn with_jobs_out(bytes: &[u8], jobs: usize) -> (Vec<DecodeJob>, Client) {
    let mut cfg = Profile::Lan.server();
    cfg.symbol_size = 64;
    cfg.max_block_symbols = 32;
    let fec = cfg.base_fec();
    let infos = vec![MemorySource::item_info("a", bytes, &fec).expect("item")];
    let mut source = MemorySource::new(vec![bytes.to_vec()]);
    let mut server = ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).expect("server");
    let conn = server.accept(Instant::ZERO).expect("accepted");
    let want = Want::Items(vec!["a".into()]);
    let mut client = ClientEndpoint::new(
        Instant::ZERO,
        ClientEndpointConfig::new(Profile::Lan.client(), want),
        MemoryStore::default(),
    );
    let (mut now, mut buf, mut out) = (Instant::ZERO, Vec::new(), Vec::new());
    for _ in 0..20_000 {
        while client.poll_transmit(&mut buf) {
            server.handle_stream(now, conn, &buf);
        }
        while let Some(ev) = client.poll_event() {
            if let Event::Join(_) = ev {
                client.joined(now);
            }
        }
        while let Some(d) = server.poll_transmit(now, &mut source, &mut buf) {
            match d {
                Dest::Conn(_) => client.handle_stream(now, &buf),
                Dest::Data => client.handle_datagram(now, Channel::Data, &buf),
                Dest::Announce => client.handle_datagram(now, Channel::Announce, &buf),
            }
            while let Some(job) = client.poll_decode() {
                out.push(job);
            }
            if out.len() == jobs {
                return (out, client);
            }
        }
        now = now + Duration::from_micros(200);
        server.handle_timeout(now);
        client.handle_timeout(now);
    }
    panic!("{} jobs out, not {jobs}", out.len());
}

#[test]
fn blocks_decoded_after_a_stop_are_written_and_can_complete_the_item() {
    // Two blocks of 32 symbols: both become decodable at the end, and
    // both go out as jobs (the shipped client hands out two at once).
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 + i / 13) as u8).collect();
    let (mut jobs, mut client) = with_jobs_out(&bytes, 2);
    assert_eq!(client.decodes_away(), 2);
    client.stop("stopped");
    assert!(client.is_finished());
    assert_eq!(client.outcomes()[0].result, Err("stopped".into()));
    let now = Instant::from_micros(10_000_000);
    for mut job in jobs.drain(..) {
        job.run();
        client.decoded(now, job);
    }
    assert_eq!(client.decodes_away(), 0);
    assert_eq!(client.outcomes()[0].result, Ok(()), "the item verified");
    assert_eq!(client.store().file("a"), Some(&bytes[..]));
}

#[test]
fn a_block_back_after_a_stop_is_written_and_the_item_stays_unfinished() {
    // Three blocks, the first to be ready out as a job at the stop: it is
    // written when it comes back, and the item is not claimed verified.
    let bytes: Vec<u8> = (0..6000u32).map(|i| (i * 11 + i / 7) as u8).collect();
    let (mut jobs, mut client) = with_jobs_out(&bytes, 1);
    client.stop("stopped");
    let mut job = jobs.remove(0);
    let (item, block) = (job.item(), job.block());
    assert!(!client.store().written_blocks(item).contains(&block));
    job.run();
    client.decoded(Instant::from_micros(10_000_000), job);
    assert_eq!(client.outcomes()[0].result, Err("stopped".into()));
    let written = client.store().written_blocks(item);
    assert_eq!(written, vec![block], "only the block decoded is written");
}
