//! Issue 12's request workload replayed through the real endpoints
//! (`Profile::Lan`, what `serve` and `get` run) on the virtual LAN, one
//! endpoint per request as one `repocast get` per request, the requests of
//! a host sharing its receiver as `get`s do (one loss draw per packet per
//! host, and a request takes what the running ones there have verified of
//! its items), beside the two fluid references. Deterministic: same
//! arguments, same numbers.
//!
//!     cargo run --release -p repocast-sim --example requests -- [SEED] [LOSS] [HOSTS] [RATE_MBPS] [DURATION_S] [KEY=VALUE...]
//!
//! LOSS is one loss for every host or a comma list cycled over the hosts;
//! each a probability or `ge:MEAN:BURST` (bursts, as the lab's links).
//! KEY=VALUE: `gap=` mean seconds between a host's requests, `files=`,
//! `sizes=LO-HI` (bytes), `zipf=` (0: uniform), `per-request=LO-HI`;
//! and of the server, `hold=MS`: the batching hold's cap (`serve
//! --batch-hold`; 0: off), `after=MS`: its gate (`--batch-hold-after`),
//! and `idle=1`: it may idle the link (`--batch-hold-idle`), `scheme=`:
//! the reliability scheme (`serve --scheme`, e.g. `FEC(0)+R(inf)`), `sched=`:
//! the scheduler (`serve --scheduler`: rq, rq-fill, fifo, popular, rxw); as shipped
//! unless given; `shared=0`: every request receives alone (`get
//! --no-share`), with its own loss draws; `tiers=0`: scheduled sends
//! block after block whatever the receivers' losses (no loss tiers);
//! `ties=id`: the scheduler's ties go to the lowest id, not the smallest
//! item; `preempt=0`: a repair never interrupts a scheduled send;
//! `repair_share=F`: a long NAK for more than F of its item goes back to the
//! scheduler (1: every NAK is repaired, as before session 25);
//! `delays=1`: each request's delay on stderr (`delay INDEX SECONDS`);
//! `events=1`: the server's events on stderr (`event SECONDS EVENT`), what
//! `serve` logs at debug level.
//! With `plan` as the first argument it prints the workload instead (for
//! `bench/requests.py`, which runs it through the network-namespace lab):
//! `file INDEX SIZE`, `request INDEX HOST AT_S FILE,FILE..` and the fluid
//! references, one per line, tab-separated.

use repocast_core::Instant;
use repocast_core::endpoint::client::Want;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_sim::lan::{LanClient, VirtualLan};
use repocast_sim::requests::{
    RequestWorkload, fluid_multicast_run, fluid_unicast, from_args, loss_list, mean_loss, summary,
};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let plan = args.first().is_some_and(|a| a == "plan");
    if plan {
        args.remove(0);
    }
    let (params, losses, rate_mbps) = from_args(&args);
    let (seed, hosts) = (params.seed, params.hosts);
    let w = RequestWorkload::generate(&params);
    if plan {
        print_plan(&w, &losses, rate_mbps);
        return;
    }
    let mut rng = Rng::new(seed ^ 0xf11e);
    let files: Vec<(String, Vec<u8>)> = (w.sizes.iter().enumerate())
        .map(|(i, &n)| {
            let bytes = (0..n).map(|_| rng.next_u64() as u8).collect();
            (format!("f{i:02}.bin"), bytes)
        })
        .collect();
    let rate = (rate_mbps * 1e6) as u64;
    let ms = |key: &str| {
        (args.iter().filter_map(|a| a.strip_prefix(key)))
            .find_map(|v| v.parse().ok())
            .map(std::time::Duration::from_millis)
    };
    let (hold, after) = (ms("hold="), ms("after="));
    let tweak = |c: &mut repocast_core::server::ServerConfig| {
        c.seed = seed;
        if let Some(cap) = hold {
            c.batch_hold = Some(cap).filter(|d| !d.is_zero());
        }
        if let Some(a) = after {
            c.batch_hold_after = a;
        }
        c.batch_hold_idle |= args.iter().any(|a| a == "idle=1");
        c.loss_tiers &= !args.iter().any(|a| a == "tiers=0");
        c.size_ties &= !args.iter().any(|a| a == "ties=id");
        c.preempt &= !args.iter().any(|a| a == "preempt=0");
        if let Some(v) = args.iter().find_map(|a| a.strip_prefix("repair_share=")) {
            c.repair_share = v.parse().ok().filter(|f: &f64| f.is_finite() && *f < 1.0);
        }
        if let Some(s) = args.iter().find_map(|a| a.strip_prefix("sched=")) {
            match repocast_core::sched::SchedulerKind::from_name(s) {
                Some(k) => c.scheduler = k,
                None => eprintln!("sched={s}: unknown; the shipped scheduler runs"),
            }
        }
        if let Some(s) = args.iter().find_map(|a| a.strip_prefix("scheme=")) {
            match s.parse() {
                Ok(scheme) => c.scheme = scheme,
                Err(e) => eprintln!("scheme={s}: {e}; the shipped scheme runs"),
            }
        }
        let _ = c.set_rate(rate, false);
    };
    let Ok(mut lan) = VirtualLan::new(Profile::Lan, tweak, files.clone(), LossSpec::NONE) else {
        eprintln!("cannot build the server");
        return;
    };
    let loss_of =
        |h: usize| (losses.get(h % losses.len().max(1)).copied()).unwrap_or(LossSpec::NONE);
    let shared = !args.iter().any(|a| a == "shared=0");
    for r in &w.requests {
        lan.add_client(LanClient {
            want: Want::Items(r.files.iter().map(|&f| files[f].0.clone()).collect()),
            loss: loss_of(r.host),
            join_at: Instant::from_micros((r.at_s * 1e6) as u64),
            crash_at: None,
            stop_at: None,
            host: shared.then_some(r.host),
        });
    }
    let trace = args.iter().any(|a| a == "events=1");
    if trace {
        lan.server_events = Some(Vec::new());
    }
    let t0 = std::time::Instant::now();
    let all = lan.run(Instant::from_micros(3_600_000_000));
    let wall = t0.elapsed().as_secs_f64();
    let reps = lan.reports();
    let failed = (reps.iter())
        .filter(|r| r.delay.is_none() || r.outcomes.iter().any(|o| o.result.is_err()))
        .count();
    let delays: Vec<f64> = reps
        .iter()
        .filter_map(|r| r.delay)
        .map(|d| d.as_secs_f64())
        .collect();
    if args.iter().any(|a| a == "delays=1") {
        for (i, r) in reps.iter().enumerate() {
            eprintln!(
                "delay\t{i}\t{:.4}",
                r.delay.map_or(-1.0, |d| d.as_secs_f64())
            );
        }
    }
    for (at, ev) in lan.server_events.iter().flatten() {
        eprintln!("event\t{:.6}\t{ev:?}", at.as_micros() as f64 / 1e6);
    }
    let st = lan.server().server().stats();
    let sends = st.transmissions - st.repair_transmissions;
    let (packet, t) = lan_packet();
    // Each packet's headers, and its symbol's own bytes (small items'
    // symbols are fitted to them).
    let wire = st.data_packets as f64 * (packet - t) + st.symbol_bytes as f64;
    let requested = w.requested_bytes() as f64;
    let fluid = fluid_multicast_run(&w, rate as f64 * t / packet, 1.0 - mean_loss(&losses));
    let fm = summary(&fluid.delays);
    let fu = summary(&fluid_unicast(&w, rate as f64 * t / packet));
    let (mean, med, p95, max) = summary(&delays);
    let busy = st.data_packets as f64 * packet * 8.0 / rate as f64;
    let last = w.requests.last().map_or(0.0, |r| r.at_s);
    println!(
        "seed {seed}, {hosts} hosts, loss {}, {rate_mbps} Mbit/s: {} requests, {} item-requests, {:.0} MiB requested, {:.0} MiB distinct",
        loss_list(&losses),
        w.requests.len(),
        w.item_requests(),
        requested / 1048576.0,
        w.sizes.iter().sum::<u64>() as f64 / 1048576.0
    );
    println!("| system | ok | mean | median | p95 | max |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| repocast (endpoints, virtual LAN) | {}/{} | {mean:.3} s | {med:.3} s | {p95:.3} s | {max:.3} s |",
        w.requests.len() - failed,
        w.requests.len()
    );
    println!(
        "| fluid multicast bound | | {:.3} s | {:.3} s | {:.3} s | {:.3} s | (wire {:.2}x requested)",
        fm.0,
        fm.1,
        fm.2,
        fm.3,
        fluid.sent_bytes * packet / t / requested
    );
    println!(
        "| fluid unicast (processor sharing) | | {:.3} s | {:.3} s | {:.3} s | {:.3} s |",
        fu.0, fu.1, fu.2, fu.3
    );
    println!(
        "data packets {}: scheduled sends {} (of which {} grown on early reports), repairs {}",
        st.data_packets,
        st.data_packets - st.repair_packets,
        st.grown_packets,
        st.repair_packets
    );
    println!(
        "scheduled sends {sends} ({:.2} item-requests per send), repairs {} ({} packets, {} pre-empting, {} early NAKs), report timeouts {}, wire bytes {:.3}x requested; channel busy {busy:.1} s, held idle {:.1} s ({} holds), last request at {last:.1} s, last done at {:.1} s; all finished: {all}; wall {wall:.1} s",
        w.item_requests() as f64 / sends.max(1) as f64,
        st.repair_transmissions,
        st.repair_packets,
        st.preemptions,
        st.early_naks,
        st.report_timeouts,
        wire / requested,
        st.hold_idle_us as f64 / 1e6,
        st.holds,
        lan.now.as_micros() as f64 / 1e6,
    );
}

/// The workload and its fluid references, tab-separated.
fn print_plan(w: &RequestWorkload, losses: &[LossSpec], rate_mbps: f64) {
    for (i, s) in w.sizes.iter().enumerate() {
        println!("file\t{i}\t{s}");
    }
    for (k, r) in w.requests.iter().enumerate() {
        let files: Vec<String> = r.files.iter().map(|f| f.to_string()).collect();
        println!(
            "request\t{k}\t{}\t{:.6}\t{}",
            r.host,
            r.at_s,
            files.join(",")
        );
    }
    let (packet, t) = lan_packet();
    let payload = rate_mbps * 1e6 * t / packet;
    let fluid = fluid_multicast_run(w, payload, 1.0 - mean_loss(losses));
    let (m, med, p95, max) = summary(&fluid.delays);
    println!("fluid\tmulticast\t{m:.3}\t{med:.3}\t{p95:.3}\t{max:.3}");
    // Server-link bytes over requested bytes, headers included as the
    // benchmark measures them.
    let wire = fluid.sent_bytes * packet / t / w.requested_bytes().max(1) as f64;
    println!("fluid\tmulticast-wire\t{wire:.4}");
    let (m, med, p95, max) = summary(&fluid_unicast(w, payload));
    println!("fluid\tunicast\t{m:.3}\t{med:.3}\t{p95:.3}\t{max:.3}");
}

/// Bytes of one data packet on the server's link as `serve` sends it on
/// the lab's 1,500-byte IPv4 links (IP and UDP headers, the tag every
/// packet carries), and of its symbol.
fn lan_packet() -> (f64, f64) {
    let t = Profile::Lan.server().symbol_size;
    let packet = repocast_core::profile::packet_bits(t, false, true) / 8;
    (packet as f64, f64::from(t))
}
