//! A `get` stopped part-way (a signal: `get_until`'s stop), on its own
//! and through the host's shared receiver, and one that goes away from
//! the receiver: its report says why each item is not there, and a rerun
//! on the same folder goes on with what it had received, the blocks it
//! verified and the symbols of those it had only begun.

mod common;

use common::*;
use repocast_core::loss::LossSpec;
use repocast_net::client::{self, GetOptions, GetReport, STOPPED};
use repocast_net::host::{self, HostKey, agent::Receiver};
use repocast_net::server::ServerHandle;
use std::path::Path;
use tokio::sync::mpsc::UnboundedReceiver;

const SIZE: usize = 7_000_000;

async fn server() -> (tempfile::TempDir, ServerHandle) {
    let repo = seeded_repo(&[("large.bin", SIZE)], 9);
    // About 5 s for the item, in 5 blocks of about 990 symbols.
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 12_000_000).await;
    (repo, srv)
}

fn opts(srv: &ServerHandle, out: &Path, seed: u64) -> GetOptions {
    let mut o = get_opts(srv, out, &["large.bin"], 0.0, seed);
    o.loss = LossSpec::NONE;
    o
}

fn receiver(srv: &ServerHandle) -> tokio::task::JoinHandle<()> {
    let key = HostKey {
        server: srv.request_addr,
        interface: lo().spec(),
        ssm: true,
    };
    let r = Receiver::bind(key).expect("bind").expect("name free");
    tokio::spawn(async move { r.run().await.expect("receiver") })
}

/// Until the `get` of `rx` has verified a block and the server has sent
/// a few hundred symbols of the next (which on loopback the `get` has
/// long taken in by the time the server's counters show them).
async fn part_way(srv: &ServerHandle, rx: &mut UnboundedReceiver<client::Progress>) {
    wait_for_bytes(rx).await;
    eventually(async || srv.snapshot().stats.data_packets >= 1_300).await;
}

/// Runs a `get` of the large item, stops it part-way (a block verified,
/// the next begun), and returns its report.
async fn stopped(srv: &ServerHandle, out: &Path, shared: bool) -> GetReport {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let o = opts(srv, out, 1);
    let get = tokio::spawn(async move {
        if shared {
            host::get_until(o, Some(tx), None, Some(stop)).await
        } else {
            client::get_until(o, Some(tx), Some(stop)).await
        }
    });
    part_way(srv, &mut rx).await;
    stop_tx.send(true).expect("stop");
    get.await.expect("join").expect("report")
}

/// The rerun on the same folder: it verifies, and went on with both what
/// the stopped run verified and what it had partly received.
async fn goes_on(srv: &ServerHandle, repo: &Path, out: &Path) {
    let rep = client::get(opts(srv, out, 2), None).await.expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo, out, &["large.bin"]);
    assert!(rep.resumed_blocks >= 1, "{rep:?}");
    assert!(rep.kept_blocks >= 1 && rep.kept_symbols >= 1, "{rep:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_stopped_part_way_reports_why_and_a_rerun_goes_on() {
    let (repo, srv) = server().await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = stopped(&srv, out.path(), false).await;
    assert!(!rep.shared);
    assert_eq!(rep.items[0].result, Err(STOPPED.into()));
    assert!(!out.path().join("large.bin").exists());
    goes_on(&srv, repo.path(), out.path()).await;
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_through_the_host_receiver_stopped_part_way_reports_and_keeps() {
    let (repo, srv) = server().await;
    let r = receiver(&srv);
    let out = tempfile::tempdir().expect("tmp");
    let rep = stopped(&srv, out.path(), true).await;
    assert!(rep.shared, "the receiver's report");
    assert_eq!(rep.items[0].result, Err(STOPPED.into()));
    goes_on(&srv, repo.path(), out.path()).await;
    r.abort();
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_goes_away_from_the_receiver_leaves_what_it_received() {
    let (repo, srv) = server().await;
    let r = receiver(&srv);
    let out = tempfile::tempdir().expect("tmp");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let o = opts(&srv, out.path(), 1);
    let gone = tokio::spawn(async move { host::get(o, Some(tx), None).await });
    part_way(&srv, &mut rx).await;
    // Killed: its socket to the receiver closes mid-request.
    gone.abort();
    // The receiver keeps what the request had once it notices, and lets
    // go of its partial file (until then a get into the same folder would
    // use a partial file of its own).
    eventually(async || let_go(out.path())).await;
    goes_on(&srv, repo.path(), out.path()).await;
    r.abort();
    srv.stop().await.expect("stop");
}

/// Whether the partial file under `out` is there and locked by nobody.
fn let_go(out: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(dir) = std::fs::read_dir(out.join(".repocast/partial")) else {
        return false;
    };
    let part = dir
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "part"));
    let Some(f) = part.and_then(|p| std::fs::File::open(p).ok()) else {
        return false;
    };
    // SAFETY: flock on a descriptor `f` owns; the lock goes with it.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}
