//! `repocast bench`: loss-free goodput of one receiver on loopback
//! multicast (a file of `--size` bytes, sent at up to `--rate`).

use repocast_core::rng::Rng;
use repocast_net::client::{self, GetOptions};
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// File size in MiB.
    #[arg(long, default_value_t = 256)]
    pub size_mib: u64,
    /// Rate cap (bit/s).
    #[arg(long, default_value = "1500M")]
    pub rate: String,
    /// Reliability scheme.
    #[arg(long, default_value = "FEC(0)+R(inf)")]
    pub scheme: String,
    /// Encrypt the data, as `serve --encrypt`.
    #[arg(long)]
    pub encrypt: bool,
    /// Sign symbol batches, as `serve --sign-symbols`.
    #[arg(long)]
    pub sign_symbols: bool,
}

pub async fn run(a: BenchArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("repocast bench: {e}");
        ExitCode::FAILURE
    };
    let (Ok(rate), Ok(scheme)) = (repocast_net::addr::parse_rate(&a.rate), a.scheme.parse()) else {
        return fail("bad --rate or --scheme".into());
    };
    let Ok(work) = tempfile::tempdir() else {
        return fail("no temporary folder".into());
    };
    let repo = work.path().join("repo");
    let size = (a.size_mib << 20) as usize;
    let mut bytes = vec![0u8; size];
    let mut rng = Rng::new(7);
    for c in bytes.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
    if let Err(e) =
        std::fs::create_dir_all(&repo).and_then(|_| std::fs::write(repo.join("file"), &bytes))
    {
        return fail(e.to_string());
    }
    drop(bytes);
    let lo = Interface {
        v4: Some(Ipv4Addr::LOCALHOST),
        ..Default::default()
    };
    let mut so = ServeOptions::new(repo);
    so.listen = (Ipv4Addr::LOCALHOST, 0).into();
    so.data_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 121), 4721));
    so.announce_group = SocketAddr::from((Ipv4Addr::new(239, 255, 47, 122), 4722));
    so.interface = lo.clone();
    so.rate_bps = rate;
    so.metrics = None;
    so.scheme = scheme;
    so.encrypt = a.encrypt;
    so.sign_symbols = a.sign_symbols;
    let srv = match server::start(so).await {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let mut g = GetOptions::new(
        srv.request_addr,
        work.path().join("out"),
        vec!["file".into()],
    );
    g.interface = lo;
    g.trust = repocast_net::tls::Trust::Key(srv.key);
    g.idle_timeout = Duration::from_secs(30);
    let rep = match client::get(g, None).await {
        Ok(r) => r,
        Err(e) => return fail(e.to_string()),
    };
    let stats = srv.stop().await.ok();
    let secs = rep.elapsed.as_secs_f64();
    let goodput = size as f64 * 8.0 / secs / 1e6;
    println!(
        "bench: {} MiB to one receiver on loopback in {secs:.2} s: goodput {goodput:.0} Mbit/s (rate cap {:.0} Mbit/s, scheme {}{}); {} datagrams heard, {} NAKs, server sent {} symbols ({} repair); verified: {}{}",
        a.size_mib,
        rate as f64 / 1e6,
        a.scheme,
        match (a.encrypt, a.sign_symbols) {
            (true, true) => ", encrypted, symbols signed",
            (true, false) => ", encrypted",
            (false, true) => ", symbols signed",
            (false, false) => "",
        },
        rep.datagrams,
        rep.stats.naks,
        stats.map_or(0, |s| s.data_packets),
        stats.map_or(0, |s| s.repair_packets),
        if rep.all_ok() { "yes" } else { "NO" },
        crate::progress::signing_note(&rep.signing),
    );
    if rep.all_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
