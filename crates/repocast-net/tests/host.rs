//! The host's shared receiver on loopback multicast: `get`s that share it
//! each get exactly their own items, verified, with only their own items'
//! packets handed to them; a `get` takes what another one on the host has
//! already verified of its items; a `get` that goes away leaves the others
//! receiving; with no receiver, or none with room for its open files, a
//! `get` runs on its own; a `get` of patterns and folders through the
//! receiver.

mod common;

use common::*;
use repocast_core::loss::LossSpec;
use repocast_net::client::{GetOptions, GetReport};
use repocast_net::host::{self, HostKey, agent::Receiver};
use repocast_net::server::ServerHandle;

fn opts(srv: &ServerHandle, out: &std::path::Path, items: &[&str], seed: u64) -> GetOptions {
    let mut o = get_opts(srv, out, items, 0.0, seed);
    o.loss = LossSpec::NONE;
    o
}

/// The receiver name the `get`s of `srv` on loopback look for.
fn key(srv: &ServerHandle) -> HostKey {
    HostKey {
        server: srv.request_addr,
        interface: lo().spec(),
        ssm: true,
    }
}

/// A receiver for `srv`'s `get`s on loopback, serving in the background.
fn receiver(srv: &ServerHandle) -> tokio::task::JoinHandle<()> {
    let r = Receiver::bind(key(srv)).expect("bind").expect("name free");
    tokio::spawn(async move { r.run().await.expect("receiver") })
}

async fn shared_get(o: GetOptions) -> GetReport {
    host::get(o, None, None).await.expect("get")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gets_on_one_host_share_its_receiver_and_each_get_their_own_items() {
    let files = [
        ("large.bin", 4_000_000),
        ("mid.bin", 700_000),
        ("small.bin", 20_000),
    ];
    let repo = seeded_repo(&files, 5);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 60_000_000).await;
    let r = receiver(&srv);
    let wants: [&[&str]; 3] = [&["large.bin", "small.bin"], &["mid.bin"], &["large.bin"]];
    let outs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let gets: Vec<_> = wants
        .iter()
        .zip(&outs)
        .enumerate()
        .map(|(i, (w, out))| tokio::spawn(shared_get(opts(&srv, out.path(), w, i as u64 + 1))))
        .collect();
    let mut reports = Vec::new();
    for g in gets {
        reports.push(g.await.expect("join"));
    }
    for (i, rep) in reports.iter().enumerate() {
        assert!(rep.all_ok(), "get {i}: {:?}", rep.items);
        assert!(rep.shared, "get {i} ran alone");
        assert_delivered(repo.path(), outs[i].path(), wants[i]);
        for (name, _) in files.iter().filter(|(n, _)| !wants[i].contains(n)) {
            assert!(!outs[i].path().join(name).exists(), "get {i} wrote {name}");
        }
    }
    // Each request was handed only what it asked for (and the
    // announcements): the mid-only `get` did not read the large item.
    let large_packets = 4_000_000 / served_symbol_size();
    assert!(reports[0].datagrams >= large_packets);
    assert!(
        reports[1].datagrams < large_packets / 2,
        "the mid-only get was handed {} datagrams; the large item has {large_packets}",
        reports[1].datagrams
    );
    r.abort();
    srv.stop().await.expect("stop");
}

/// A `get` that starts while another on the host is part-way through an
/// item it wants takes the blocks verified so far from there: it tells
/// the server it holds them (a resumed request), so the transmission on
/// air is not stretched to send it those blocks again, and it is handed
/// only the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_takes_what_another_on_the_host_has_verified() {
    let size = 7_000_000;
    let repo = seeded_repo(&[("large.bin", size)], 8);
    // Slow enough that the first `get` is still receiving when the
    // second one starts.
    let srv = start(repo.path(), "FEC(0)+R(inf)+notify", |o| {
        o.rate_bps = 12_000_000
    })
    .await;
    let r = receiver(&srv);
    let (first, second) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = opts(&srv, first.path(), &["large.bin"], 1);
    let a = tokio::spawn(async move { host::get(o, Some(tx), None).await });
    // Two of its five blocks verified.
    for _ in 0..2 {
        wait_for_bytes(&mut rx).await;
    }
    let rep = shared_get(opts(&srv, second.path(), &["large.bin"], 2)).await;
    assert!(rep.all_ok() && rep.shared, "{:?}", rep.items);
    assert_delivered(repo.path(), second.path(), &["large.bin"]);
    let blocks = (size as u64).div_ceil(served_symbol_size() * 1000);
    assert_eq!(blocks, 5);
    assert!(
        (2..=blocks).contains(&rep.resumed_blocks),
        "lent {} blocks",
        rep.resumed_blocks
    );
    assert_eq!(rep.lent_blocks, rep.resumed_blocks, "all of them lent");
    let packets = size as u64 / served_symbol_size();
    assert!(
        rep.datagrams < packets * 4 / 5,
        "handed {} datagrams; the item is {packets} packets",
        rep.datagrams
    );
    let first_rep = a.await.expect("join").expect("get");
    assert!(
        first_rep.all_ok() && first_rep.shared,
        "{:?}",
        first_rep.items
    );
    assert_eq!((first_rep.resumed_blocks, first_rep.lent_blocks), (0, 0));
    assert_delivered(repo.path(), first.path(), &["large.bin"]);
    r.abort();
    let stats = srv.stop().await.expect("stop");
    assert_eq!(stats.resumed_requests, 1, "the server was told");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_goes_away_leaves_the_others_receiving() {
    let repo = seeded_repo(&[("large.bin", 6_000_000), ("small.bin", 30_000)], 6);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 40_000_000).await;
    let r = receiver(&srv);
    let (gone, stays) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = opts(&srv, gone.path(), &["large.bin"], 1);
    let first = tokio::spawn(async move { host::get(o, Some(tx), None).await });
    wait_for_bytes(&mut rx).await;
    // Killed: its socket to the receiver closes mid-request.
    first.abort();
    let rep = shared_get(opts(&srv, stays.path(), &["large.bin", "small.bin"], 2)).await;
    assert!(rep.all_ok() && rep.shared, "{:?}", rep.items);
    assert_delivered(repo.path(), stays.path(), &["large.bin", "small.bin"]);
    r.abort();
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_the_receivers_open_files_cannot_fit_runs_on_its_own() {
    let repo = seeded_repo(&[("large.bin", 6_000_000), ("small.bin", 30_000)], 9);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 20_000_000).await;
    // Room for one request of one item.
    let one = repocast_net::fd_limit::request_files(false, &["large.bin".into()]);
    let rcv = Receiver::bind(key(&srv)).expect("bind").expect("name free");
    let r = tokio::spawn(async move { rcv.with_file_budget(one).run().await.expect("receiver") });
    let outs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = opts(&srv, outs[0].path(), &["large.bin"], 1);
    let first = tokio::spawn(async move { host::get(o, Some(tx), None).await });
    wait_for_bytes(&mut rx).await;
    // The receiver is full: the second request is refused, and its `get`
    // receives on its own, all the same.
    let second = shared_get(opts(&srv, outs[1].path(), &["small.bin"], 2)).await;
    assert!(second.all_ok() && !second.shared, "{:?}", second.items);
    assert_delivered(repo.path(), outs[1].path(), &["small.bin"]);
    let first = first.await.expect("join").expect("get");
    assert!(first.all_ok() && first.shared, "{:?}", first.items);
    assert_delivered(repo.path(), outs[0].path(), &["large.bin"]);
    // The first one's room was given back when it ended.
    let third = shared_get(opts(&srv, outs[2].path(), &["small.bin"], 3)).await;
    assert!(third.all_ok() && third.shared, "{:?}", third.items);
    r.abort();
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_receiver_a_get_runs_on_its_own() {
    let repo = seeded_repo(&[("a.bin", 300_000)], 7);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    // No receiver, and none to start: the same request, alone.
    let rep = shared_get(opts(&srv, out.path(), &["a.bin"], 1)).await;
    assert!(rep.all_ok() && !rep.shared, "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["a.bin"]);
    // A second receiver for the same key finds the name taken.
    let _r = receiver(&srv);
    assert!(Receiver::bind(key(&srv)).expect("bind").is_none());
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_of_patterns_and_folders_through_the_receiver_gets_what_they_name() {
    let files = [
        ("a.iso", 50_000),
        ("b.txt", 3_000),
        ("docs/x.txt", 2_000),
        ("docs/deep/y.txt", 1_000),
        ("other/z.txt", 500),
    ];
    let repo = seeded_repo(&files, 8);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let r = receiver(&srv);
    let out = tempfile::tempdir().expect("tmp");
    let rep = shared_get(opts(
        &srv,
        out.path(),
        &["*.iso", "docs/", "b.txt", "*.zip"],
        1,
    ))
    .await;
    assert!(rep.shared);
    let names: Vec<&str> = rep.items.iter().map(|o| o.name.as_str()).collect();
    // The catalogue is in path order, and so is what a folder names.
    assert_eq!(
        names,
        ["a.iso", "docs/deep/y.txt", "docs/x.txt", "b.txt", "*.zip"]
    );
    let (got, missed) = rep.items.split_at(4);
    assert!(got.iter().all(|o| o.result.is_ok()), "{:?}", rep.items);
    assert_eq!(
        missed[0].result,
        Err("names no item in the server's catalogue".into())
    );
    assert_delivered(repo.path(), out.path(), &names[..4]);
    assert!(!out.path().join("other/z.txt").exists());
    r.abort();
    srv.stop().await.expect("stop");
}
