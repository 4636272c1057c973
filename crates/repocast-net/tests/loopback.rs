//! End to end on loopback multicast: a real server and real clients, with
//! emulated loss, overlapping requests, an empty file and one-symbol
//! plus/minus one byte files; every file must arrive byte-identical.

use repocast_core::loss::LossSpec;
use repocast_net::client::{self, GetOptions};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};

/// A distinct group pair and ports per test (tests run in parallel).
fn groups() -> (SocketAddr, SocketAddr) {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let base = 20000 + (std::process::id() as u16 % 200) * 100 + n * 2;
    let g = (std::process::id() % 250) as u8;
    (
        (Ipv4Addr::new(239, 255, g, 10 + 2 * n as u8), base).into(),
        (Ipv4Addr::new(239, 255, g, 11 + 2 * n as u8), base + 1).into(),
    )
}

fn write_repo(dir: &Path, files: &[(&str, usize)], seed: u64) {
    let mut r = repocast_core::rng::Rng::new(seed);
    for (name, size) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let bytes: Vec<u8> = (0..*size).map(|_| r.next_u64() as u8).collect();
        std::fs::write(p, bytes).expect("write");
    }
}

fn lo() -> Interface {
    Interface::parse(Some("127.0.0.1")).expect("loopback")
}

fn serve_opts(dir: &Path, scheme: &str) -> ServeOptions {
    let (data, ann) = groups();
    let mut o = ServeOptions::new(dir.to_path_buf());
    o.listen = (Ipv4Addr::LOCALHOST, 0).into();
    o.data_group = data;
    o.announce_group = ann;
    o.interface = lo();
    o.rate_bps = 200_000_000;
    o.metrics = Some((Ipv4Addr::LOCALHOST, 0).into());
    o.scheme = scheme.parse().expect("scheme");
    o
}

fn get_opts(server: SocketAddr, out: &Path, items: &[&str], loss: f64, seed: u64) -> GetOptions {
    let mut g = GetOptions::new(
        server,
        out.to_path_buf(),
        items.iter().map(|s| s.to_string()).collect(),
    );
    g.interface = lo();
    g.loss = LossSpec::Bernoulli { p: loss };
    g.seed = seed;
    g.idle_timeout = std::time::Duration::from_secs(20);
    g
}

fn same(a: &Path, b: &Path) -> bool {
    std::fs::read(a).ok() == std::fs::read(b).ok() && std::fs::read(a).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_clients_with_overlapping_requests_get_identical_files() {
    let repo = tempfile::tempdir().expect("tmp");
    let files = [
        ("empty", 0),
        ("one-minus", 1279),
        ("one", 1280),
        ("one-plus", 1281),
        ("dir/big.bin", 3_000_000),
        ("dir/sub/mid.bin", 400_000),
        ("small.txt", 5_000),
    ];
    write_repo(repo.path(), &files, 1);
    let srv = server::start(serve_opts(repo.path(), "FEC(maxloss+0.02)+R(inf)"))
        .await
        .expect("serve");
    let wants: [(&[&str], f64); 3] = [
        (&["empty", "one-minus", "dir/big.bin", "small.txt"], 0.0),
        (&["one", "one-plus", "dir/big.bin", "dir/sub/mid.bin"], 0.2),
        (
            &[
                "empty",
                "one",
                "dir/sub/mid.bin",
                "small.txt",
                "dir/big.bin",
            ],
            0.5,
        ),
    ];
    let outs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let mut tasks = Vec::new();
    for (i, (items, loss)) in wants.iter().enumerate() {
        let o = get_opts(srv.request_addr, outs[i].path(), items, *loss, i as u64 + 1);
        tasks.push(tokio::spawn(client::get(o, None)));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let rep = t.await.expect("join").expect("get");
        assert!(rep.all_ok(), "client {i}: {:?}", rep.items);
        for name in wants[i].0 {
            assert!(
                same(&repo.path().join(name), &outs[i].path().join(name)),
                "client {i} {name}"
            );
        }
        if wants[i].1 > 0.0 {
            assert!(rep.emulated_losses > 0);
        }
        // Nothing unverified is left behind.
        let partial = outs[i].path().join(".repocast/partial");
        assert_eq!(std::fs::read_dir(partial).expect("dir").count(), 0);
    }
    let snap = srv.snapshot();
    let stats = srv.stop().await.expect("stop");
    assert!(stats.data_packets > 0 && stats.naks > 0, "{stats:?}");
    assert_eq!(snap.items, files.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_items_fail_with_a_reason_and_ls_lists_the_catalogue() {
    let repo = tempfile::tempdir().expect("tmp");
    write_repo(repo.path(), &[("a", 10), ("b/c", 20)], 2);
    let srv = server::start(serve_opts(repo.path(), "FEC(0)+R(0)"))
        .await
        .expect("serve");
    let cat = client::list(srv.request_addr).await.expect("ls");
    let names: Vec<_> = cat.iter().map(|e| (e.name.as_str(), e.size)).collect();
    assert_eq!(names, vec![("a", 10), ("b/c", 20)]);
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(
        get_opts(srv.request_addr, out.path(), &["a", "nope"], 0.0, 1),
        None,
    )
    .await
    .expect("get");
    assert!(!rep.all_ok());
    assert!(rep.items.iter().any(|o| o.name == "a" && o.result.is_ok()));
    assert!(
        rep.items
            .iter()
            .any(|o| o.name == "nope"
                && o.result.as_ref().is_err_and(|e| e.contains("no such item")))
    );
    assert!(!out.path().join("nope").exists());
    srv.stop().await.expect("stop");
}
