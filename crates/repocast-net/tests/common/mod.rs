//! Helpers shared by the loopback test binaries: distinct groups per
//! test, repositories of seeded bytes, and the options a test's server
//! and clients run with (the shipped defaults on loopback).
#![allow(dead_code)]

use repocast_core::loss::LossSpec;
use repocast_net::client::{self, GetOptions};
use repocast_net::server::{self, ServeOptions, ServerHandle};
use repocast_net::socket::Interface;
use repocast_net::tls::Trust;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};

/// A distinct group pair and ports per test (tests run in parallel).
pub fn groups() -> (SocketAddr, SocketAddr) {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // Below the ephemeral range (32768+), where senders bind.
    let base = 10000 + (std::process::id() as u16 % 100) * 200 + n * 2;
    let g = (std::process::id() % 250) as u8;
    (
        (Ipv4Addr::new(239, 255, g, 10 + 2 * n as u8), base).into(),
        (Ipv4Addr::new(239, 255, g, 11 + 2 * n as u8), base + 1).into(),
    )
}

/// A repository of `files` (name, size) of seeded bytes in a temporary
/// folder, removed when the value drops.
pub fn seeded_repo(files: &[(&str, usize)], seed: u64) -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("tmp");
    write_repo(repo.path(), files, seed);
    repo
}

/// Serves `repo` on loopback with [`serve_opts`] under `scheme`, changed
/// by `tune`.
pub async fn start(
    repo: &Path,
    scheme: &str,
    tune: impl FnOnce(&mut ServeOptions),
) -> ServerHandle {
    let mut o = serve_opts(repo, scheme);
    tune(&mut o);
    server::start(o).await.expect("serve")
}

/// Each of `names` under `out` is byte for byte the one under `repo`.
pub fn assert_delivered(repo: &Path, out: &Path, names: &[&str]) {
    for n in names {
        assert!(
            same(&repo.join(n), &out.join(n)),
            "{n} differs or is missing"
        );
    }
}

pub fn write_repo(dir: &Path, files: &[(&str, usize)], seed: u64) {
    let mut r = repocast_core::rng::Rng::new(seed);
    for (name, size) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let bytes: Vec<u8> = (0..*size).map(|_| r.next_u64() as u8).collect();
        std::fs::write(p, bytes).expect("write");
    }
}

pub fn lo() -> Interface {
    Interface::parse(Some("127.0.0.1")).expect("loopback")
}

pub fn serve_opts(dir: &Path, scheme: &str) -> ServeOptions {
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

pub fn get_opts(
    srv: &ServerHandle,
    out: &Path,
    items: &[&str],
    loss: f64,
    seed: u64,
) -> GetOptions {
    let mut g = GetOptions::new(
        srv.request_addr,
        out.to_path_buf(),
        items.iter().map(|s| s.to_string()).collect(),
    );
    g.trust = Trust::Key(srv.key);
    g.interface = lo();
    g.loss = LossSpec::Bernoulli { p: loss };
    g.seed = seed;
    g.idle_timeout = std::time::Duration::from_secs(20);
    g
}

/// Waits (bounded) until a client reports verified bytes written.
pub async fn wait_for_bytes(rx: &mut tokio::sync::mpsc::UnboundedReceiver<client::Progress>) {
    let deadline = std::time::Duration::from_secs(30);
    tokio::time::timeout(deadline, async {
        while let Some(p) = rx.recv().await {
            if matches!(p, client::Progress::Bytes { .. }) {
                return;
            }
        }
    })
    .await
    .expect("bytes within 30 s");
}

/// Polls `f` until it holds (bounded at 10 s): for state published on a
/// timer tick.
pub async fn eventually(mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("condition not reached in 10 s");
}

/// The whole HTTP/1.0 answer to `GET path` from `addr` (the metrics port).
pub async fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.0\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
        .await
        .expect("w");
    let mut body = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut s, &mut body)
        .await
        .expect("r");
    body
}

pub fn same(a: &Path, b: &Path) -> bool {
    std::fs::read(a).ok() == std::fs::read(b).ok() && std::fs::read(a).is_ok()
}

/// The symbol size `serve` picks on loopback: a 1,500-byte IPv4 frame's
/// (loopback's larger MTU is capped), its packets tagged.
pub fn served_symbol_size() -> u64 {
    let t = repocast_core::profile::Profile::Lan.server().symbol_size;
    assert_eq!(t, 1420);
    u64::from(t)
}
