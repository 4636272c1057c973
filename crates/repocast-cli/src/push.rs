//! `repocast push DIR` and `repocast listen`: options in,
//! [`repocast_net::push`] and [`repocast_net::listen`] out.

use crate::progress::Display;
use repocast_core::endpoint::listen::ListenEvent;
use repocast_core::fec::CodeKind;
use repocast_net::addr;
use repocast_net::listen::{self, ListenOptions};
use repocast_net::push::options::announce_group_for;
use repocast_net::push::{self, PushOptions, PushScheduler};
use repocast_net::socket::Interface;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `repocast push`. Each flag, when given, overrides the
/// `--config` file, which overrides the defaults (in brackets).
#[derive(clap::Args, Debug)]
pub struct PushArgs {
    /// The folder: every regular file under it is pushed (or `dir` in --config).
    pub dir: Option<PathBuf>,
    /// A TOML file with any of these settings (flags given here win).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Data rate cap in bit/s, the catalogue included (100M, 1G) [100M].
    #[arg(long)]
    pub rate: Option<String>,
    /// Interface to send on: an IPv4 address or a name.
    #[arg(long)]
    pub interface: Option<String>,
    /// Data group:port [239.255.47.11:4711].
    #[arg(long)]
    pub group: Option<SocketAddr>,
    /// Catalogue group:port [the next address and port after --group].
    #[arg(long)]
    pub announce_group: Option<SocketAddr>,
    /// Send from this address of the host, for listeners joining
    /// source-specifically (`listen --source`) [the system's choice].
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Multicast TTL (hop limit) [1].
    #[arg(long)]
    pub ttl: Option<u32>,
    /// mad (hot files more often, by --popularity) or flat [mad].
    #[arg(long)]
    pub scheduler: Option<String>,
    /// Weights per file: TOML ("name" = weight), CSV (name,weight) or a
    /// Common Log Format web log (requests counted per path).
    #[arg(long)]
    pub popularity: Option<PathBuf>,
    /// Stop once every file has been sent this many times its size [run until stopped].
    #[arg(long)]
    pub redundancy: Option<f64>,
    /// The loss each file's pass is sized for: a listener at this loss
    /// that hears one pass of every file has them all with 90% odds,
    /// where passes of exactly each file's size leave a file of a large
    /// set short and its listener waiting a whole cycle for it. Higher
    /// serves lossier listeners of many files and costs the others; 0 to
    /// 0.5 [0.05].
    #[arg(long, value_name = "LOSS")]
    pub pass_loss: Option<f64>,
    /// Vouch for every data packet in batches signed with the key, so
    /// listeners take no forged symbol (about 2.6% of the rate) [off].
    #[arg(long)]
    pub sign_symbols: bool,
    /// With --sign-symbols: in how many batches each packet is listed, 1
    /// to 8; more costs rate (1.3% each), fewer loses packets whose every
    /// batch was lost (p^N) [3].
    #[arg(long, value_name = "N")]
    pub sign_copies: Option<u8>,
    /// Send every file alone: by default files under an eighth of a block
    /// (about 220 KiB) share packs of up to a block (with --popularity, of
    /// at most 1/128 of the set), so a set of many small files takes about
    /// the time its bytes need; a listener after one of them receives its
    /// whole pack. Config file: packs = false.
    #[arg(long)]
    pub no_packs: bool,
    /// Erasure code: raptorq or rs [raptorq].
    #[arg(long)]
    pub code: Option<String>,
    /// Bytes per symbol [the largest whose packet fits the interface's
    /// MTU, at most a 1,500-byte frame's: 1440 on IPv4 Ethernet].
    #[arg(long)]
    pub symbol_size: Option<u16>,
    /// Largest source block in symbols (kmax) for every file [raptorq:
    /// 1250, grown for files above 32 blocks to keep to 32, up to 1800;
    /// rs: 1024].
    #[arg(long)]
    pub block_symbols: Option<u32>,
    /// The signing key (`repocast keygen`); created if missing
    /// [~/.config/repocast/server.key].
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// HTTP address for /metrics and /status [127.0.0.1:4713].
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Do not serve /metrics and /status.
    #[arg(long)]
    pub no_metrics: bool,
    /// Do not watch the folder for changes (SIGHUP still rescans).
    #[arg(long)]
    pub no_watch: bool,
    /// Seed for the block order [1].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Disk for repair symbols made ahead, in MiB: an unnamed file in
    /// DIR/.repocast, used only for a file too large to make them ahead in
    /// memory at the rate (it then writes about the repair it sends); 0:
    /// none, such a file goes in spans and a listener that lost a few
    /// symbols of every block waits for most of a pass [4096].
    #[arg(long, value_name = "MIB")]
    pub spool_mib: Option<u64>,
}

/// The groups from `--group` and `--announce-group` over `current`: a
/// data group given alone takes its catalogue group with it (the same rule
/// for `push` and `listen`, so they agree).
fn groups(
    group: Option<SocketAddr>,
    announce: Option<SocketAddr>,
    current: (SocketAddr, SocketAddr),
) -> (SocketAddr, SocketAddr) {
    let (data, ann) = match group {
        Some(g) => (g, announce_group_for(g)),
        None => current,
    };
    (data, announce.unwrap_or(ann))
}

/// The settings: defaults, then the `--config` file, then the flags.
pub fn options(a: &PushArgs) -> Result<PushOptions, String> {
    let mut o: PushOptions = match &a.config {
        Some(path) => crate::config::load(path)?,
        None => PushOptions::default(),
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
    (o.data_group, o.announce_group) =
        groups(a.group, a.announce_group, (o.data_group, o.announce_group));
    o.ttl = a.ttl.unwrap_or(o.ttl);
    o.source = a.source.or(o.source);
    if let Some(s) = &a.scheduler {
        o.scheduler = match s.as_str() {
            "mad" => PushScheduler::Mad,
            "flat" => PushScheduler::Flat,
            _ => return Err(format!("unknown push scheduler {s:?} (mad, flat)")),
        };
    }
    if a.popularity.is_some() {
        o.popularity = a.popularity.clone();
    }
    o.redundancy = a.redundancy.or(o.redundancy);
    o.pass_loss = a.pass_loss.unwrap_or(o.pass_loss);
    o.sign_symbols |= a.sign_symbols;
    o.packs &= !a.no_packs;
    if let Some(n) = a.sign_copies {
        o.sign_copies = n;
    }
    if let Some(c) = &a.code {
        o.code = CodeKind::try_from(c.clone())?;
    }
    o.symbol_size = a.symbol_size.or(o.symbol_size);
    o.max_block = a.block_symbols.or(o.max_block);
    o.seed = a.seed.unwrap_or(o.seed);
    o.spool_mib = a.spool_mib.unwrap_or(o.spool_mib);
    if a.metrics.is_some() {
        o.metrics = a.metrics;
    }
    if a.no_metrics {
        o.metrics = None;
    }
    if a.no_watch {
        o.watch = false;
    }
    if a.key.is_some() {
        o.key = a.key.clone();
    }
    if o.key.is_none() {
        o.key = repocast_net::keys::config_dir().map(|d| d.join("server.key"));
    }
    o.validate().map_err(e)?;
    Ok(o)
}

pub async fn run(a: PushArgs) -> ExitCode {
    let opts = match options(&a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("repocast push: {e}");
            return ExitCode::from(2);
        }
    };
    let mut h = match push::start(opts).await {
        Ok(h) => h,
        Err(e) => {
            eprintln!("repocast push: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", h.banner);
    println!("listeners: repocast listen --trust {} ...", h.key);
    let mut status = tokio::time::interval(Duration::from_secs(5));
    let result = loop {
        tokio::select! {
            r = h.finished() => break r,
            _ = crate::serve::wait_for_signal() => {
                eprintln!("repocast push: stopping");
                break h.stop().await;
            }
            _ = status.tick() => {
                let s = h.snapshot();
                if let Some((v, p)) = s.push {
                    eprintln!(
                        "version {v}: {} data packets, {} passes, {} catalogue pieces, {:.0} s",
                        p.data_packets, p.passes, p.catalogue_pieces, s.uptime_s
                    );
                }
            }
        }
    };
    match result {
        Ok(p) => {
            println!(
                "pushed {} data packets in {} passes; catalogue: {} pieces, {} versions",
                p.data_packets, p.passes, p.catalogue_pieces, p.versions
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("repocast push: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Options of `repocast listen`.
#[derive(clap::Args, Debug)]
pub struct ListenArgs {
    /// Items to receive: names or globs (`*` within a folder, `**` across) [all].
    pub items: Vec<String>,
    /// Data group:port [239.255.47.11:4711].
    #[arg(long)]
    pub group: Option<SocketAddr>,
    /// Catalogue group:port [the next address and port after --group].
    #[arg(long)]
    pub announce_group: Option<SocketAddr>,
    /// Interface to join on: an IPv4 address or a name.
    #[arg(long)]
    pub interface: Option<String>,
    /// Hear only this pusher's address: join both groups source-specifically
    /// (needed in the source-specific range, 232.0.0.0/8 and ff3x::/32) [any source].
    #[arg(long)]
    pub source: Option<IpAddr>,
    /// Output folder.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Accept only this signer: `ed25519:...` or a `.pub` file [the first seen, printed].
    #[arg(long, value_name = "KEY")]
    pub trust: Option<String>,
    /// Stay tuned: take every new catalogue version, update changed files.
    #[arg(long)]
    pub satellite: bool,
    /// Give up after this many seconds without a catalogue or progress.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Replace existing files that differ (always with --satellite).
    #[arg(long)]
    pub overwrite: bool,
    /// Emulated loss: a probability (0.2) or ge:MEAN:BURST.
    #[arg(long)]
    pub emulate_loss: Option<String>,
    /// Seed of the loss emulation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print a JSON summary instead of the text one.
    #[arg(long)]
    pub json: bool,
}

fn listen_options(a: &ListenArgs) -> Result<ListenOptions, String> {
    let e = |e: repocast_net::NetError| e.to_string();
    let mut o = ListenOptions::new(a.out.clone());
    (o.data_group, o.announce_group) =
        groups(a.group, a.announce_group, (o.data_group, o.announce_group));
    o.interface = Interface::parse(a.interface.as_deref()).map_err(e)?;
    o.source = a.source;
    o.select = a.items.clone();
    o.satellite = a.satellite;
    o.timeout = Duration::from_secs(a.timeout.max(1));
    o.overwrite = a.overwrite;
    if let Some(k) = &a.trust {
        o.trust = Some(repocast_net::keys::parse_trust(k).map_err(e)?);
    }
    if let Some(l) = &a.emulate_loss {
        o.loss = crate::get::parse_loss(l)?;
    }
    o.seed = a.seed;
    Ok(o)
}

pub async fn listen(a: ListenArgs) -> ExitCode {
    let opts = match listen_options(&a) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("repocast listen: {e}");
            return ExitCode::from(2);
        }
    };
    let pinned = opts.trust.is_some();
    let satellite = opts.satellite;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let job = tokio::spawn(listen::listen(opts, Some(tx), Some(stop_rx)));
    let mut display = Display::new("", !satellite && !a.json, !a.json);
    let signal = crate::serve::wait_for_signal();
    tokio::pin!(signal);
    // The signal future is done once it fires: polled again it would
    // panic, so the loop stops asking once the run was told to stop.
    let mut signalled = false;
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ListenEvent::Item(p)) => display.show(&p),
                Some(ListenEvent::Signer { key, .. }) if !pinned => eprintln!(
                    "repocast listen: accepting the first signer seen, {key}; pin it next time with --trust {key}"
                ),
                Some(ListenEvent::Version { version, items, receiving }) => eprintln!(
                    "repocast listen: catalogue version {version}: {items} items, receiving {receiving}"
                ),
                Some(_) => {}
                None => break,
            },
            _ = &mut signal, if !signalled => {
                signalled = true;
                let _ = stop_tx.send(true);
            }
        }
    }
    display.finish();
    let rep = match job.await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            eprintln!("repocast listen: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("repocast listen: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (ok, bytes) = crate::summary::verified(&rep.items);
    if a.json {
        let summary = serde_json::json!({
            "verified": ok,
            "items": crate::summary::items(&rep.items),
            "bytes": bytes,
            "elapsed_s": rep.elapsed.as_secs_f64(),
            "version": rep.version.unwrap_or(0),
            "signer": rep.signer.map(|k| k.to_string()).unwrap_or_default(),
            "datagrams": rep.datagrams,
            "emulated_losses": rep.emulated_losses,
            "forged": rep.stats.forged,
            "foreign": rep.stats.foreign,
            "stale": rep.stats.stale,
            "resumed_blocks": rep.resumed_blocks,
            "kept_blocks": rep.kept_blocks,
            "kept_symbols": rep.kept_symbols,
            "carried_blocks": rep.stats.carried_blocks,
            "corrupt_blocks": rep.corrupt_blocks,
            "decode_jobs": rep.decode_jobs,
            "signed_batches": rep.signing.batches,
            "unlisted_dropped": rep.signing.unsigned_dropped,
            "peak_rss_bytes": repocast_net::peak_rss_bytes().unwrap_or(0),
        });
        println!("{summary}");
    } else {
        println!(
            "{ok} of {} items verified ({:.1} MiB) in {:.2} s; {} datagrams, {} blocks resumed{}{}{}{}",
            rep.items.len(),
            bytes as f64 / (1 << 20) as f64,
            rep.elapsed.as_secs_f64(),
            rep.datagrams,
            rep.resumed_blocks,
            crate::progress::kept_note(rep.kept_blocks, rep.kept_symbols),
            match rep.emulated_losses {
                0 => String::new(),
                n => format!(", {n} dropped by --emulate-loss"),
            },
            match rep.stats.forged + rep.stats.foreign + rep.stats.stale {
                0 => String::new(),
                n => format!(", {n} catalogue pieces refused (forged, other signer or older)"),
            },
            crate::progress::signing_note(&rep.signing),
        );
    }
    if let Some(why) = &rep.ended {
        eprintln!("repocast listen: {why}");
    }
    crate::summary::print_failed(&rep.items);
    // A version with nothing selected: an empty folder is nothing to do;
    // patterns that match nothing are the user's mistake.
    let nothing = rep.items.is_empty() && rep.ended.is_none();
    if let (true, Some(v)) = (nothing && !satellite, rep.version) {
        if a.items.is_empty() {
            eprintln!("repocast listen: catalogue version {v} is empty: nothing to fetch");
            return ExitCode::SUCCESS;
        }
        eprintln!(
            "repocast listen: no item of catalogue version {v} matches {:?}",
            a.items
        );
    }
    if rep.all_ok() || satellite && rep.ended.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Push {
        #[command(flatten)]
        a: PushArgs,
    }

    #[derive(Parser)]
    struct Listen {
        #[command(flatten)]
        a: ListenArgs,
    }

    #[test]
    fn a_source_is_taken_from_the_flags_and_the_config_file() {
        let src: IpAddr = "10.77.0.1".parse().expect("ip");
        let p = Push::try_parse_from(["push", "site", "--source", "10.77.0.1"]).expect("args");
        assert_eq!(options(&p.a).expect("options").source, Some(src));
        let dir = tempfile::tempdir().expect("tmp");
        let cfg = dir.path().join("push.toml");
        std::fs::write(&cfg, "dir = \"site\"\nsource = \"10.77.0.1\"\n").expect("write");
        let cfg = cfg.to_string_lossy().into_owned();
        let p = Push::try_parse_from(["push", "--config", cfg.as_str()]).expect("args");
        assert_eq!(options(&p.a).expect("options").source, Some(src));
        let l = Listen::try_parse_from(["listen", "--source", "10.77.0.1"]).expect("args");
        assert_eq!(listen_options(&l.a).expect("options").source, Some(src));
        let l = Listen::try_parse_from(["listen"]).expect("args");
        assert_eq!(listen_options(&l.a).expect("options").source, None);
    }
}
