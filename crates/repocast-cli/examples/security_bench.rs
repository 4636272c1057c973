//! Issue 13's measured goals on loopback, in one run:
//! 1. a forged-packet flood at ten times the server's own packet rate
//!    (real headers sniffed off the group, random symbols and tags) against
//!    a legitimate `get`: its time next to the same `get` without the flood;
//! 2. resume: a `get` killed at half its bytes, then rerun: the rerun's time
//!    next to a fresh `get`'s;
//! 3. hostile connections against a `repocast serve` process: idle TCP
//!    (slowloris), TLS peers holding a partial 40 MiB frame, and peers that
//!    send requests and never read: the server's peak RSS, and a
//!    legitimate `get`'s time while they hold on.
//!
//! Run:
//!
//!     cargo build --release -p repocast-cli && \
//!     cargo run --release -p repocast-cli --example security_bench -- [SIZE_MB] [RATE_MBPS] [CONNECTIONS]

use repocast_core::rng::Rng;
use repocast_core::wire::{ClientMsg, DataRepr};
use repocast_net::client::{self, GetOptions};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use repocast_net::tls::{self, Trust};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

fn opts(repo: &Path, rate: u64, port: u16) -> ServeOptions {
    let mut o = ServeOptions::new(repo.to_path_buf());
    o.listen = (Ipv4Addr::LOCALHOST, 0).into();
    o.data_group = (Ipv4Addr::new(239, 255, 91, 1), port).into();
    o.announce_group = (Ipv4Addr::new(239, 255, 91, 2), port + 1).into();
    o.interface = lo();
    o.rate_bps = rate;
    o.metrics = None;
    o
}

fn lo() -> Interface {
    Interface::parse(Some("127.0.0.1")).unwrap_or_default()
}

fn get_opts(srv: SocketAddr, key: repocast_core::auth::PublicKey, out: &Path) -> GetOptions {
    let mut g = GetOptions::new(srv, out.to_path_buf(), vec!["f".into()]);
    g.interface = lo();
    g.trust = Trust::Key(key);
    g.idle_timeout = Duration::from_secs(60);
    g
}

/// Joins `group` on loopback, waits for one data packet, then sends
/// forgeries of it (random symbol ids, payloads and tags) at `pps` until
/// `stop`. Returns the number sent.
fn flood(
    rx: UdpSocket,
    group: SocketAddr,
    pps: f64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> u64 {
    let _ = rx.set_nonblocking(false);
    let _ = rx.set_read_timeout(Some(Duration::from_millis(200)));
    let Ok(tx) = UdpSocket::bind("127.0.0.1:0") else {
        return 0;
    };
    let mut buf = vec![0u8; 2048];
    let real = loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        if let Ok(n) = rx.recv(&mut buf) {
            if let Ok(p) = DataRepr::parse(&buf[..n]) {
                break p;
            }
        }
    };
    let mut rng = Rng::new(7);
    let (mut sent, start) = (0u64, Instant::now());
    let mut out = Vec::with_capacity(2048);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let due = (start.elapsed().as_secs_f64() * pps) as u64;
        while sent < due {
            let mut p = real.clone();
            p.symbol = rng.next_u64() as u32 % 2000;
            p.block = repocast_core::BlockId(rng.next_u64() as u32 % 26);
            for b in p.payload.iter_mut() {
                *b = rng.next_u64() as u8;
            }
            p.tag = (0..repocast_core::auth::TAG_LEN)
                .map(|_| rng.next_u64() as u8)
                .collect();
            out.clear();
            p.emit(&mut out);
            let _ = tx.send_to(&out, group);
            sent += 1;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    sent
}

fn rss_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let size = (args.first().copied().unwrap_or(32.0) * 1e6) as usize;
    let rate = (args.get(1).copied().unwrap_or(100.0) * 1e6) as u64;
    let conns = args.get(2).copied().unwrap_or(2000.0) as usize;
    let Ok(work) = tempfile::tempdir() else {
        return;
    };
    let repo = work.path().join("repo");
    let mut rng = Rng::new(3);
    let bytes: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
    if std::fs::create_dir_all(&repo)
        .and_then(|_| std::fs::write(repo.join("f"), &bytes))
        .is_err()
    {
        eprintln!("cannot write the repository");
        return;
    }
    let o = opts(&repo, rate, 47_100);
    let group = o.data_group;
    let Ok(srv) = server::start(o).await else {
        eprintln!("cannot serve");
        return;
    };
    let timed = |dir: &str| {
        let g = get_opts(srv.request_addr, srv.key, &work.path().join(dir));
        async move {
            let t = Instant::now();
            let r = client::get(g, None).await;
            (t.elapsed().as_secs_f64(), r.map(|r| (r.all_ok(), r.forged)))
        }
    };
    // 1. Flood.
    let (t0, r0) = timed("clean").await;
    let pps = 10.0 * rate as f64 / ((1280 + 31 + 21 + 28) * 8) as f64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let Some(rx) = repocast_net::socket::receiver(&group, &lo(), None)
        .ok()
        .and_then(|s| s.into_std().ok())
    else {
        eprintln!("cannot join the data group");
        return;
    };
    let flooder = std::thread::spawn(move || flood(rx, group, pps, s2));
    let (t1, r1) = timed("flooded").await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flooder.join().unwrap_or(0);
    println!(
        "flood: clean get {t0:.2} s {r0:?}; under a flood of {sent} forged packets ({:.0}/s, 10x the server's rate) {t1:.2} s {r1:?}: {:.2}x",
        sent as f64 / t1,
        t1 / t0
    );
    // 2. Resume at half.
    let half = work.path().join("half");
    let g = get_opts(srv.request_addr, srv.key, &half);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = tokio::spawn(client::get(g, Some(tx)));
    let mut got = 0u64;
    while let Some(p) = rx.recv().await {
        if let client::Progress::Bytes { bytes, .. } = p {
            got += bytes;
            if got as usize >= size / 2 {
                break;
            }
        }
    }
    job.abort();
    let _ = job.await;
    let before = srv.snapshot().stats.data_packets;
    let (t2, r2) = timed("half").await;
    let sent = srv.snapshot().stats.data_packets - before;
    println!(
        "resume: killed at {:.0}% of the bytes; rerun {t2:.2} s {r2:?} ({sent} packets sent for it, {} resumed requests), against {t0:.2} s fresh: {:.2}x",
        got as f64 * 100.0 / size as f64,
        srv.snapshot().stats.resumed_requests,
        t2 / t0
    );
    let _ = srv.stop().await;
    hostile_connections(&repo, work.path(), rate, conns).await;
}

/// Runs `repocast serve` as a child, attacks it with `n` connections,
/// and reports its RSS and a legitimate get's time meanwhile.
async fn hostile_connections(repo: &Path, work: &Path, rate: u64, n: usize) {
    let bin = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("repocast")))
        .filter(|p| p.exists());
    let Some(bin) = bin else {
        println!("connections: skipped (build target/release/repocast first)");
        return;
    };
    let key = work.join("server.key");
    let Ok(id) = repocast_net::keys::load_or_create(&key) else {
        return;
    };
    let listen: SocketAddr = (Ipv4Addr::LOCALHOST, 47_300).into();
    let Ok(mut child) = std::process::Command::new(&bin)
        .args([
            "serve",
            &repo.display().to_string(),
            "--key",
            &key.display().to_string(),
        ])
        .args([
            "--listen",
            &listen.to_string(),
            "--interface",
            "127.0.0.1",
            "--no-metrics",
        ])
        .args(["--rate", &rate.to_string()])
        .args([
            "--data-group",
            "239.255.91.5:47302",
            "--announce-group",
            "239.255.91.6:47303",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
    else {
        return;
    };
    let trust = Trust::Key(id.public());
    for _ in 0..100 {
        if client::list(listen, &trust, None).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let base = rss_kb(child.id(), "VmRSS:");
    let mut held = Vec::new();
    for i in 0..n {
        let trust = trust.clone();
        held.push(tokio::spawn(async move {
            let Ok(tcp) = tokio::net::TcpStream::connect(listen).await else {
                return;
            };
            match i % 3 {
                // Slowloris: connect, say nothing.
                0 => {
                    let _tcp = tcp;
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
                // A frame declared 40 MiB, 1 MiB of it sent, then silence.
                1 => {
                    let Ok((mut s, _)) = tls::connect(tcp, listen, &trust).await else {
                        return;
                    };
                    let mut b = (40u32 << 20).to_be_bytes().to_vec();
                    b.extend(std::iter::repeat_n(0u8, 1 << 20));
                    let _ = s.write_all(&b).await;
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
                // Asks for the catalogue over and over, never reads.
                _ => {
                    let Ok((mut s, _)) = tls::connect(tcp, listen, &trust).await else {
                        return;
                    };
                    let mut body = Vec::new();
                    ClientMsg::ListCatalogue.emit(&mut body);
                    let mut frame = Vec::new();
                    repocast_core::wire::frame::encode_frame(&body, &mut frame);
                    for _ in 0..20_000 {
                        if s.write_all(&frame).await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = rss_kb(child.id(), "VmRSS:");
    let mut g = GetOptions::new(listen, work.join("legit"), vec!["f".into()]);
    g.interface = lo();
    g.trust = trust.clone();
    let t = Instant::now();
    let r = client::get(g, None).await.map(|r| r.all_ok());
    let legit = t.elapsed().as_secs_f64();
    let peak = rss_kb(child.id(), "VmHWM:");
    println!(
        "connections: {n} hostile (a third each: idle TCP, a partial 40 MiB frame, requests never read): server RSS {:.0} MiB before, {:.0} MiB while held, peak {:.0} MiB; a legitimate get meanwhile {legit:.2} s {r:?}",
        base as f64 / 1024.0,
        during as f64 / 1024.0,
        peak as f64 / 1024.0
    );
    for h in held {
        h.abort();
    }
    let _ = child.kill();
    let _ = child.wait();
}
