//! `repocast serve DIR`: options in, [`repocast_net::server`] out.

use repocast_core::fec::CodeKind;
use repocast_core::policy::Scheme;
use repocast_core::sched::SchedulerKind;
use repocast_net::addr;
use repocast_net::server::{self, ServeOptions};
use repocast_net::socket::Interface;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `repocast serve`. Each flag, when given, overrides the
/// `--config` file, which overrides the defaults (shown in brackets).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The repository: every regular file under it is an item (or `dir` in --config).
    pub dir: Option<PathBuf>,
    /// A TOML file with any of these settings (flags given here win).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data rate cap in bit/s (100M, 1G, 250k) [100M].
    #[arg(long)]
    pub rate: Option<String>,
    /// Interface to send on: an IPv4 address or a name (eth0).
    #[arg(long)]
    pub interface: Option<String>,
    /// TCP address for request connections [0.0.0.0:4700].
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Data channel group:port (IPv6 groups work too, e.g. [ff15::4701]:4701) [239.255.47.1:4701].
    #[arg(long)]
    pub data_group: Option<SocketAddr>,
    /// Announcement channel group:port [239.255.47.2:4702].
    #[arg(long)]
    pub announce_group: Option<SocketAddr>,
    /// Multicast TTL (hop limit) [1].
    #[arg(long)]
    pub ttl: Option<u32>,
    /// Whole scheme in one string, e.g. "FEC(0.01R)+R(0)+notify" or "ARM"
    /// [FEC(maxloss+0.02)+R(inf)+notify].
    #[arg(long, conflicts_with_all = ["fec", "retransmit", "notify"])]
    pub scheme: Option<String>,
    /// FEC policy: 0.1, 0.01R, 0.2/R, maxloss+0.05, or arm (default maxloss+0.02).
    #[arg(long)]
    pub fec: Option<String>,
    /// Retransmission: inf, 0 (reschedule only) or a symbol count p (default inf).
    #[arg(long)]
    pub retransmit: Option<String>,
    /// Tell late joiners about the transmission in progress (with --fec/--retransmit).
    #[arg(long)]
    pub notify: bool,
    /// Scheduler: rq, rq-fill, fifo, popular, rxw, mad, flat [rq].
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Erasure code: raptorq, rs, xor, exact [raptorq].
    #[arg(long)]
    pub code: Option<String>,
    /// Bytes per symbol [the largest whose packet fits the interface's
    /// MTU, at most a 1,500-byte frame's: 1420 on IPv4 Ethernet].
    #[arg(long)]
    pub symbol_size: Option<u16>,
    /// Largest source block in symbols [raptorq: 1000; rs: 1024].
    #[arg(long)]
    pub block_symbols: Option<u32>,
    /// HTTP address for /metrics and /status [127.0.0.1:4703; give 0.0.0.0:4703 to expose it].
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Do not serve /metrics and /status.
    #[arg(long)]
    pub no_metrics: bool,
    /// This server's address, for clients' source-specific joins.
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Seed for the server's random choices [1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// The server's identity key (`repocast keygen`); created if missing
    /// [~/.config/repocast/server.key].
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// Only these networks may connect (repeatable): ADDRESS or ADDRESS/PREFIX [any].
    #[arg(long = "allow", value_name = "NETWORK")]
    pub allow: Vec<String>,
    /// Encrypt the data on the multicast groups (AES-128 under the session
    /// key), so only clients this server welcomed can read it [off].
    #[arg(long)]
    pub encrypt: bool,
    /// Vouch for every data packet in batches signed with the server key,
    /// so not even a client holding the session key can forge symbols
    /// other clients accept (about 2.6% of the rate) [off].
    #[arg(long)]
    pub sign_symbols: bool,
    /// With --sign-symbols: in how many batches each packet is listed, 1
    /// to 8; more costs rate (1.3% each), fewer loses packets whose every
    /// batch was lost (p^N) [3].
    #[arg(long, value_name = "N")]
    pub sign_copies: Option<u8>,
    /// Require an access token: FILE holds the tokens accepted, one per
    /// line (`LABEL TOKEN` or `TOKEN`; `repocast keygen --token` makes one).
    /// Re-read when it changes (and on SIGHUP): connections whose token is
    /// gone are closed and the session key rotates [none required].
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Rotate the session key every SECONDS (0: never); clients that left
    /// cannot read or forge what is sent after the next rotation [3600].
    #[arg(long, value_name = "SECONDS")]
    pub rekey_secs: Option<u64>,
    /// Batching hold, up to MS milliseconds (0: off): on a busy server an
    /// item just asked for waits, in proportion to the work queued beside
    /// it, behind items asked for long ago, so more requests join its
    /// transmission and the tail of delays shortens [4000].
    #[arg(long, value_name = "MS")]
    pub batch_hold: Option<u64>,
    /// The batching hold engages only once the server has had work
    /// without a break for MS milliseconds (0: from the first request)
    /// [4000].
    #[arg(long, value_name = "MS")]
    pub batch_hold_after: Option<u64>,
    /// When every waiting item is held, leave the link idle until the
    /// first hold ends: fewer bytes sent, more delay (without it the
    /// link never idles while anyone waits).
    #[arg(long)]
    pub batch_hold_idle: bool,
}

/// The scheme the flags name, if they name one.
fn scheme(a: &ServeArgs) -> Result<Option<Scheme>, String> {
    let text = match (&a.scheme, &a.fec, &a.retransmit, a.notify) {
        (Some(s), ..) => s.clone(),
        (None, None, None, false) => return Ok(None),
        (None, fec, r, notify) => {
            let fec = fec.as_deref().unwrap_or("maxloss+0.02");
            let r = r.as_deref().unwrap_or("inf");
            let n = if notify { "+notify" } else { "" };
            if fec.eq_ignore_ascii_case("arm") {
                format!("ARM+R({r}){n}")
            } else {
                format!("FEC({fec})+R({r}){n}")
            }
        }
    };
    text.parse().map(Some).map_err(|e| format!("{e}"))
}

/// The settings: defaults, then the `--config` file, then the flags given.
pub fn options(a: &ServeArgs) -> Result<ServeOptions, String> {
    let mut o = match &a.config {
        Some(path) => crate::config::load(path)?,
        None => ServeOptions::default(),
    };
    let e = |e: repocast_net::NetError| e.to_string();
    if let Some(d) = &a.dir {
        o.dir = d.clone();
    }
    if let Some(r) = &a.rate {
        o.rate_bps = addr::parse_rate(r).map_err(e)?;
    }
    if a.interface.is_some() {
        o.interface = Interface::parse(a.interface.as_deref()).map_err(e)?;
    }
    if let Some(s) = scheme(a)? {
        o.scheme = s;
    }
    if let Some(s) = &a.scheduler {
        o.scheduler = SchedulerKind::try_from(s.clone())?;
    }
    if let Some(c) = &a.code {
        o.code = CodeKind::try_from(c.clone())?;
    }
    o.listen = a.listen.unwrap_or(o.listen);
    o.data_group = a.data_group.unwrap_or(o.data_group);
    o.announce_group = a.announce_group.unwrap_or(o.announce_group);
    o.ttl = a.ttl.unwrap_or(o.ttl);
    o.symbol_size = a.symbol_size.or(o.symbol_size);
    o.max_block = a.block_symbols.or(o.max_block);
    o.source = a.source.or(o.source);
    o.seed = a.seed.unwrap_or(o.seed);
    if a.metrics.is_some() {
        o.metrics = a.metrics;
    }
    if a.no_metrics {
        o.metrics = None;
    }
    if a.key.is_some() {
        o.key = a.key.clone();
    }
    if o.key.is_none() {
        o.key = repocast_net::keys::config_dir().map(|d| d.join("server.key"));
    }
    for n in &a.allow {
        o.allow.push(n.parse().map_err(e)?);
    }
    o.encrypt |= a.encrypt;
    o.sign_symbols |= a.sign_symbols;
    if let Some(n) = a.sign_copies {
        o.sign_copies = n;
    }
    if a.tokens.is_some() {
        o.tokens = a.tokens.clone();
    }
    o.rekey_secs = a.rekey_secs.unwrap_or(o.rekey_secs);
    o.batch_hold_ms = a.batch_hold.unwrap_or(o.batch_hold_ms);
    o.batch_hold_after_ms = a.batch_hold_after.unwrap_or(o.batch_hold_after_ms);
    o.batch_hold_idle |= a.batch_hold_idle;
    o.validate().map_err(e)?;
    Ok(o)
}

pub async fn run(a: ServeArgs) -> ExitCode {
    let opts = match options(&a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("repocast serve: {e}");
            return ExitCode::from(2);
        }
    };
    let srv = match server::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("repocast serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", srv.banner);
    wait_for_signal().await;
    eprintln!("repocast serve: shutting down");
    match srv.stop().await {
        Ok(s) => {
            println!(
                "served {} transmissions ({} repair), {} symbols ({} repair), {} NAKs, {} rescheduled, {} items done",
                s.transmissions,
                s.repair_transmissions,
                s.data_packets,
                s.repair_packets,
                s.naks,
                s.rescheduled,
                s.items_done
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("repocast serve: {e}");
            ExitCode::FAILURE
        }
    }
}

pub async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}
