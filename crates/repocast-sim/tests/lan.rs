//! The shipped configuration (`Profile::Lan`: what `serve` and `get` run)
//! through the endpoints' byte interfaces on a virtual LAN: overlapping
//! requests at 2-50% loss, a late joiner, a receiver killed and restarted,
//! bad names, and a silent server. Every item ends verified (compared with
//! the source bytes) or failed with a reason.
//! Replay a failing seed with `REPOCAST_SEED=<n>`.

mod common;

use repocast_core::Instant;
use repocast_core::endpoint::client::Want;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::server::ServerConfig;
use repocast_sim::lan::{LanClient, VirtualLan};
use std::time::Duration;

fn seed() -> u64 {
    common::seed_or(11)
}

/// Items of 0 bytes to 1.2 MiB (several blocks at 1,420-byte symbols).
fn items(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut r = Rng::new(seed);
    let sizes = [0usize, 1, 1280, 70_000, 300_000, 1_200_000, 5_000, 40_000];
    (sizes.iter().enumerate())
        .map(|(i, &n)| {
            let bytes = (0..n).map(|_| r.next_u64() as u8).collect();
            (format!("dir/item{i}.bin"), bytes)
        })
        .collect()
}

fn names(ids: &[usize]) -> Want {
    Want::Items(ids.iter().map(|i| format!("dir/item{i}.bin")).collect())
}

fn lan(seed: u64, data: &[(String, Vec<u8>)]) -> VirtualLan {
    lan_held(seed, data, Hold::Shipped)
}

/// The batching hold a test runs.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// As `serve` ships it: engaged after 4 s of load.
    Shipped,
    /// Work-conserving.
    Off,
    /// This cap, engaged from the first request, idling the link when
    /// every waiting item is held (`--batch-hold-after 0
    /// --batch-hold-idle`).
    Always(Duration),
}

impl Hold {
    fn set(self, c: &mut ServerConfig) {
        match self {
            Hold::Shipped => {}
            Hold::Off => c.batch_hold = None,
            Hold::Always(cap) => {
                c.batch_hold = Some(cap);
                c.batch_hold_after = Duration::ZERO;
                c.batch_hold_idle = true;
            }
        }
    }
}

/// [`lan`] with the given batching hold.
fn lan_held(seed: u64, data: &[(String, Vec<u8>)], hold: Hold) -> VirtualLan {
    VirtualLan::new(
        Profile::Lan,
        |c| {
            c.seed = seed;
            hold.set(c);
            // Many blocks per item, as in files of hundreds of MiB.
            c.max_block_symbols = 64;
            c.set_rate(20_000_000, false).expect("rate");
        },
        data.to_vec(),
        LossSpec::NONE,
    )
    .expect("server")
}

fn client(want: Want, loss: f64, join_ms: u64) -> LanClient {
    LanClient {
        want,
        loss: LossSpec::Bernoulli { p: loss },
        join_at: Instant::from_micros(join_ms * 1000),
        crash_at: None,
        stop_at: None,
        host: None,
    }
}

/// Every outcome verified, and each file equal to its source.
fn assert_verified(h: &VirtualLan, data: &[(String, Vec<u8>)], seed: u64) {
    for (i, r) in h.reports().iter().enumerate() {
        assert!(
            !r.outcomes.is_empty(),
            "seed {seed}: client {i} had nothing"
        );
        common::assert_all_verified(&format!("seed {seed}: client {i}"), r, data);
    }
}

#[test]
fn four_overlapping_clients_at_2_to_50_percent_loss_all_verify() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    let plan: [(&[usize], f64); 4] = [
        (&[0, 1, 5, 3], 0.02),
        (&[5, 4, 2], 0.05),
        (&[4, 3, 6, 7], 0.20),
        (&[5, 6, 1], 0.50),
    ];
    for (ids, loss) in plan {
        h.add_client(client(names(ids), loss, 0));
    }
    assert!(
        h.run(Instant::from_micros(120_000_000)),
        "seed {s}: unfinished"
    );
    assert_verified(&h, &data, s);
    let st = h.server().server().stats();
    // Overlapping requests aggregate: each non-empty item is scheduled
    // once (then repaired), and the channel carries little more than the
    // 50% client alone needs of what it shares with the others.
    assert_eq!(
        st.transmissions - st.repair_transmissions,
        7,
        "seed {s}: {st:?}"
    );
    let distinct: u64 = data.iter().map(|d| d.1.len().div_ceil(1280) as u64).sum();
    assert!(
        (st.data_packets as f64) < distinct as f64 / 0.5 * 1.2,
        "seed {s}: {st:?}"
    );
}

/// One 6 MB file (17 blocks of 256 symbols) at 20 Mbit/s, fetched whole
/// by three receivers that start together, at `losses`, from a server
/// `set` adjusts (seeded `s`): each receiver's time, every file verified,
/// the server's counters, the bytes read from the source and how the
/// encoder preparation jobs went.
fn three_fetch_one_file(s: u64, losses: [LossSpec; 3], set: impl Fn(&mut ServerConfig)) -> Fetched {
    three_fetch_with(s, losses, set, None)
}

/// [`three_fetch_one_file`] with receivers handing out `decode_jobs`
/// decode jobs at once (the profile's if `None`).
fn three_fetch_with(
    s: u64,
    losses: [LossSpec; 3],
    set: impl Fn(&mut ServerConfig),
    decode_jobs: Option<usize>,
) -> Fetched {
    let mut r = Rng::new(s);
    let data = vec![(
        "dir/big.bin".to_string(),
        (0..6_000_000)
            .map(|_| r.next_u64() as u8)
            .collect::<Vec<u8>>(),
    )];
    let mut h = VirtualLan::new(
        Profile::Lan,
        |c| {
            c.seed = s;
            c.max_block_symbols = 256;
            set(c);
            c.set_rate(20_000_000, false).expect("rate");
        },
        data.clone(),
        LossSpec::NONE,
    )
    .expect("server");
    h.decode_jobs = decode_jobs;
    for loss in losses {
        let mut c = client(Want::Items(vec!["dir/big.bin".into()]), 0.0, 0);
        c.loss = loss;
        h.add_client(c);
    }
    assert!(h.run(Instant::from_micros(120_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    let secs: Vec<f64> = (h.reports().iter())
        .map(|r| r.delay.expect("done").as_secs_f64())
        .collect();
    Fetched {
        secs,
        stats: h.server().server().stats(),
        read: h.read_bytes(),
        jobs: h.server().server().prepare_jobs(),
        decode_jobs: h.reports().iter().map(|r| r.client.decode_jobs).collect(),
    }
}

/// What [`three_fetch_one_file`] measured.
struct Fetched {
    secs: Vec<f64>,
    stats: repocast_core::server::ServerStats,
    read: u64,
    jobs: repocast_core::server::encoders::JobCounts,
    /// Blocks each receiver decoded in a decode job.
    decode_jobs: Vec<u64>,
}

/// The server keeps recent blocks' encoders (`encoder_cache_bytes`, as
/// `serve` ships): with loss in bursts, the repairs after the send need a
/// few symbols of many blocks, and each block it had to read and encode
/// again (a fountain encoder's first repair symbol costs the block's whole
/// intermediate-symbol computation: a stall of the sending path, which the
/// lab showed as 3-9 ms gaps between a repair's packets) is now read once.
/// And the send has each block's encoder prepared off the sending path, as
/// a job the driver runs (`prepare_jobs`; the lab showed a 3-7 ms gap once
/// per block of the send). The packets are the same, to the packet: only
/// the work behind them changes.
#[test]
fn repairs_use_the_encoders_the_send_built() {
    let losses = [LossSpec::bursty(0.05, 8.0); 3];
    let s = seed();
    for s in s..s + 3 {
        let kept = three_fetch_one_file(s, losses, |_| {});
        let one = three_fetch_one_file(s, losses, |c| c.encoder_cache_bytes = 0);
        assert!(kept.stats.repair_packets > 0, "seed {s}: no repair");
        assert_eq!((&kept.secs, kept.stats), (&one.secs, one.stats), "seed {s}");
        // Each block read once, whole; one at a time, again for repairs.
        assert_eq!(kept.read, 6_000_000, "seed {s}");
        assert!(one.read > kept.read, "seed {s}: {} bytes read", one.read);
        // Every block's encoder was prepared off the sending path (the
        // simulator runs each job at once, so each is back in time) and
        // none with one encoder at a time.
        let jobs = kept.jobs;
        assert_eq!(
            (jobs.offered, jobs.used, jobs.late),
            (17, 17, 0),
            "seed {s}"
        );
        assert_eq!(one.jobs.offered, 0, "seed {s}");
        // Jobs or none, the same packets.
        let inline = three_fetch_one_file(s, losses, |c| c.prepare_jobs = 0);
        assert_eq!((&inline.secs, inline.stats), (&kept.secs, kept.stats));
        assert_eq!((inline.read, inline.jobs.offered), (kept.read, 0));
    }
}

/// Receivers as `get` ships decode every block in a job off the
/// receiving path (the driver's thread pool; here, at once), and the run
/// is the same as with every block decoded in place.
#[test]
fn receivers_decode_their_blocks_in_jobs() {
    let losses = [0.05, 0.05, 0.5].map(|p| LossSpec::Bernoulli { p });
    let s = seed();
    let jobs = three_fetch_with(s, losses, |_| {}, None);
    let here = three_fetch_with(s, losses, |_| {}, Some(0));
    assert_eq!(jobs.decode_jobs, vec![17, 17, 17], "seed {s}");
    assert_eq!(here.decode_jobs, vec![0, 0, 0], "seed {s}");
    assert_eq!(
        (&jobs.secs, jobs.stats),
        (&here.secs, here.stats),
        "seed {s}"
    );
}

/// The time of one copy of [`three_fetch_one_file`]'s file at 20 Mbit/s
/// over `1 - loss`: a receiver's ideal.
fn ideal_at_20_mbit(loss: f64) -> f64 {
    let mut cfg = Profile::Lan.server();
    cfg.set_rate(20_000_000, false).expect("rate");
    let copy =
        (6_000_000.0 / f64::from(cfg.symbol_size)).ceil() * cfg.packet_interval.as_secs_f64();
    copy / (1.0 - loss)
}

/// One lossy receiver does not hold back the rest: three receivers at
/// 5%, 5% and 50% ask for one 6 MB item (17 blocks here). As `serve`
/// ships (loss tiers, `policy::tiers`) the send gives every block the
/// 5% receivers' share first, then the rest for the 50% one, so the 5%
/// receivers finish in little more than their own time; sent block after
/// block, they mostly finish with the 50% receiver. The 50% receiver is
/// no later, and the channel carries no more.
#[test]
fn a_lossy_receiver_does_not_hold_back_the_others() {
    let s = seed();
    let losses = [0.05, 0.05, 0.5].map(|p| LossSpec::Bernoulli { p });
    let run = |tiers: bool| {
        let f = three_fetch_one_file(s, losses, |c| c.loss_tiers = tiers);
        (f.secs, f.stats.data_packets)
    };
    let (tiered, tiered_packets) = run(true);
    let (flat, flat_packets) = run(false);
    let ideal = ideal_at_20_mbit(0.05);
    for i in [0, 1] {
        assert!(
            tiered[i] < 1.3 * ideal && tiered[i] < 0.7 * tiered[2],
            "seed {s}: tiered {tiered:?}, ideal {ideal:.2} s"
        );
        assert!(
            flat[i] > 1.2 * tiered[i],
            "seed {s}: block after block {flat:?}, tiered {tiered:?}"
        );
    }
    assert!(
        tiered[2] < flat[2] * 1.05,
        "seed {s}: 50% receiver {tiered:?} against {flat:?}"
    );
    assert!(
        (tiered_packets as f64) < flat_packets as f64 * 1.05,
        "seed {s}: {tiered_packets} packets against {flat_packets}"
    );
}

/// The same with loss in bursts (Gilbert-Elliott, bursts of 8 packets):
/// a 5% receiver's blocks then end the first tier short far more often
/// than the binomial margin allows, and the rest of a short block comes
/// with the tail, block by block, for the 50% receiver. Its short-block
/// hint (a NAK on the send on air, `server::early`) has the tail's
/// symbols of that block sent at once instead: the 5% receivers finish
/// with the first tier, as with independent loss. Three seeds, each run
/// with and without (`ServerConfig::hasten`); the comparisons are on
/// their sums, as one seed may leave no block short at the wrong place.
#[test]
fn a_bursty_receiver_is_not_held_back_by_a_lossy_one_either() {
    let losses = [0.05, 0.05, 0.5].map(|p| LossSpec::bursty(p, 8.0));
    let run = |s: u64, hasten: bool| three_fetch_one_file(s, losses, |c| c.hasten = hasten);
    let ideal = ideal_at_20_mbit(0.05);
    let s = seed();
    let (mut fast, mut slow, mut lossy) = ([0.0; 2], [0.0; 2], [0.0; 2]);
    for s in s..s + 3 {
        let f = run(s, true);
        let (hinted, st) = (f.secs, f.stats);
        let unhinted = run(s, false).secs;
        assert!(st.hastened > 0, "seed {s}: no hint moved anything");
        for i in [0, 1] {
            assert!(
                hinted[i] < 1.3 * ideal && hinted[i] < 0.7 * hinted[2],
                "seed {s}: with hints {hinted:?}, ideal {ideal:.2} s"
            );
        }
        fast[0] += hinted[0].max(hinted[1]);
        slow[0] += unhinted[0].max(unhinted[1]);
        lossy[0] += hinted[2];
        lossy[1] += unhinted[2];
        fast[1] = fast[1].max(hinted[0].max(hinted[1]) / ideal);
        slow[1] = slow[1].max(unhinted[0].max(unhinted[1]) / ideal);
    }
    assert!(
        slow[0] > 1.15 * fast[0],
        "seed {s}: the 5% receivers' times summed over 3 seeds, {:.2} s with hints, {:.2} s without (worst {:.2}x, {:.2}x ideal)",
        fast[0],
        slow[0],
        fast[1],
        slow[1]
    );
    assert!(
        lossy[0] < lossy[1] * 1.05,
        "seed {s}: the 50% receiver's, {:.2} s with hints, {:.2} s without",
        lossy[0],
        lossy[1]
    );
}

#[test]
fn announcements_go_out_three_times_and_survive_loss() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.add_client(client(names(&[2, 3]), 0.3, 0));
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    let r = &h.reports()[0];
    // Three copies of each announcement reach the client's socket (each
    // then through its 30% loss): more datagrams than data packets used.
    assert!(
        r.stats.datagrams > r.client.useful,
        "{:?} {:?}",
        r.stats,
        r.client
    );
}

#[test]
fn a_late_joiner_catches_the_transmission_on_air() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.add_client(client(names(&[5]), 0.05, 0));
    // Joins a quarter into item 5's first transmission (about 0.5 s).
    h.add_client(client(names(&[5]), 0.05, 120));
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    let st = h.server().server().stats();
    assert_eq!(st.transmissions - st.repair_transmissions, 1, "{st:?}");
}

/// A request reaches the server only once its receiver is on the groups.
/// Before, it went out with the hello: the server started sending the
/// item while the welcome was on its way and the receiver joining (about
/// 2 ms for `get`: 17 symbols at 100 Mbit/s), so a lone lossless client
/// lost the first symbols and needed a NAK round for each small item.
#[test]
fn a_request_to_an_idle_server_loses_nothing_to_its_own_join() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.join_delay = Duration::from_millis(2);
    h.add_client(client(names(&[3]), 0.0, 0));
    // A second lone request long after the first ended, on an idle link.
    h.add_client(client(names(&[6, 7]), 0.0, 2_000));
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    for (i, r) in h.reports().iter().enumerate() {
        assert_eq!(r.client.naks, 0, "seed {s}: client {i}: {:?}", r.client);
    }
    let st = h.server().server().stats();
    assert_eq!(st.repair_transmissions, 0, "seed {s}: {st:?}");
}

/// Requests on one host share its receiver: one that starts part-way
/// through another's item takes the blocks verified so far and decodes
/// only the rest; the server is told (a resumed request) and sends the
/// item once. Alone (hosts of their own), the late one decodes it all.
#[test]
fn a_request_takes_the_blocks_another_on_its_host_has_verified() {
    let s = seed();
    let data = items(s);
    let t = Profile::Lan.server().symbol_size as usize;
    let blocks = data[5].1.len().div_ceil(t).div_ceil(64) as u64;
    let run = |host: Option<usize>| {
        let mut h = lan(s, &data);
        for join_ms in [0, 300] {
            let mut c = client(names(&[5]), 0.05, join_ms);
            c.host = host;
            h.add_client(c);
        }
        assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        let late = h.reports()[1].clone();
        (late, h.server().server().stats())
    };
    let (late, st) = run(Some(0));
    let (resumed, written) = (late.stats.resumed_blocks, late.blocks_written);
    assert!(
        resumed > 0 && resumed < blocks,
        "seed {s}: lent {resumed} of {blocks}"
    );
    assert_eq!(written + resumed, blocks, "seed {s}");
    assert_eq!(st.resumed_requests, 1, "seed {s}: {st:?}");
    assert_eq!(st.transmissions - st.repair_transmissions, 1, "{st:?}");
    let (alone, st) = run(None);
    assert_eq!(alone.stats.resumed_blocks, 0);
    assert_eq!(alone.blocks_written, blocks);
    assert_eq!(st.resumed_requests, 0);
    assert!(
        late.client.useful < alone.client.useful,
        "seed {s}: {:?} against {:?}",
        late.client,
        alone.client
    );
}

/// Requests on one host check each signed announcement once between
/// them, as the host's shared receiver does: six requests there (which
/// overlap in time, but not wholly) check under half the signatures six
/// requests alone check, and answer the rest from memory; each still
/// accepts only what verified.
#[test]
fn requests_on_a_host_check_each_signature_once() {
    let s = seed();
    let data = items(s);
    let run = |host: Option<usize>| {
        let mut h = lan(s, &data);
        for (k, ids) in [[5, 3], [4, 5], [5, 7], [3, 4], [6, 5], [7, 4]]
            .iter()
            .enumerate()
        {
            let mut c = client(names(ids), 0.05, 40 * k as u64);
            c.host = host;
            h.add_client(c);
        }
        assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        h.signatures()
    };
    let (shared, hits) = run(Some(0));
    let (alone, alone_hits) = run(None);
    assert!(
        shared > 0 && alone > 0,
        "seed {s}: nothing signed was checked"
    );
    assert!(
        shared * 2 < alone,
        "seed {s}: {shared} checked on one host against {alone} alone"
    );
    assert!(hits > alone - shared, "seed {s}: {hits} from memory");
    // Alone, only repeats of an announcement come from memory (about two
    // of its three copies); on one host, also what another request there
    // checked. (Counts, not shares, differ with how many announcements
    // each run's requests hear.)
    let share = |checked: u64, hits: u64| hits as f64 / (checked + hits) as f64;
    assert!(
        share(alone, alone_hits) < share(shared, hits),
        "seed {s}: {alone_hits} of {} from memory alone, {hits} of {} on one host",
        alone + alone_hits,
        shared + hits
    );
}

#[test]
fn a_client_killed_mid_item_resumes_with_its_verified_blocks() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    let mut c = client(names(&[5]), 0.05, 0);
    c.crash_at = Some(Instant::from_micros(300_000));
    h.add_client(c);
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    let r = &h.reports()[0];
    let t = Profile::Lan.server().symbol_size as usize;
    let blocks = data[5].1.len().div_ceil(t).div_ceil(64) as u64;
    let (resumed, written) = (r.stats.resumed_blocks, r.blocks_written);
    // Killed at 0.3 s of about 0.5 s: some blocks were verified, and they
    // are neither decoded nor written again.
    assert!(
        resumed > 0 && resumed < blocks,
        "resumed {resumed} of {blocks}"
    );
    assert_eq!(
        written + resumed,
        blocks,
        "written {written}, resumed {resumed}"
    );
}

/// Stopped short instead (a `get` giving up), the client also keeps the
/// symbols of its partly received blocks: the run after it takes them
/// back, so between them the two receive each needed symbol once, where a
/// killed client receives those blocks' symbols again.
#[test]
fn a_client_stopped_mid_item_keeps_its_partly_received_blocks() {
    let s = seed();
    let data = items(s);
    let t = Profile::Lan.server().symbol_size as u64;
    let need = (data[5].1.len() as u64).div_ceil(t);
    let run = |stop: Option<bool>| {
        let mut h = lan(s, &data);
        let mut c = client(names(&[5]), 0.05, 0);
        let at = Some(Instant::from_micros(300_000));
        match stop {
            Some(true) => c.stop_at = at,
            Some(false) => c.crash_at = at,
            None => {}
        }
        h.add_client(c);
        assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        h.reports().remove(0)
    };
    let (steady, stopped, killed) = (run(None), run(Some(true)), run(Some(false)));
    let steady = steady.client.useful;
    eprintln!(
        "need {need}: steady took {steady}, stopped {} ({} kept in {} blocks), killed {}",
        stopped.client.useful,
        stopped.stats.kept_symbols_found,
        stopped.stats.kept_blocks_found,
        killed.client.useful
    );
    assert!(stopped.stats.kept_blocks_found > 0, "seed {s}: none kept");
    assert_eq!(killed.stats.kept_blocks_found, 0);
    // What a client needs with no stop, and a few more: the new run's
    // sends do not know which ids the kept blocks hold, so now and then
    // one repeats (16 seeds: 0.4-1.9% more).
    assert!(
        stopped.client.useful <= steady + need / 25,
        "seed {s}: stopped, {} symbols against {steady}",
        stopped.client.useful
    );
    assert!(
        killed.client.useful >= steady + stopped.stats.kept_symbols_found / 2,
        "seed {s}: killed, {} symbols against {steady}",
        killed.client.useful
    );
}

#[test]
fn unknown_names_fail_with_a_reason_and_the_rest_verify() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.add_client(client(
        Want::Items(vec!["dir/item3.bin".into(), "nope.bin".into()]),
        0.05,
        0,
    ));
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    let r = &h.reports()[0];
    assert_eq!(r.outcomes[0].result, Ok(()));
    assert_eq!(r.outcomes[1].result, Err("no such item".into()));
}

#[test]
fn all_fetches_the_whole_catalogue() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.add_client(client(Want::All, 0.1, 0));
    assert!(h.run(Instant::from_micros(120_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    assert_eq!(h.reports()[0].outcomes.len(), data.len());
}

/// `get` with patterns and folders: the catalogue resolves them, each
/// item is asked for once in the order named, and a pattern that names
/// nothing fails as itself without reaching the server.
#[test]
fn patterns_and_folders_are_resolved_against_the_catalogue() {
    let s = seed();
    let mut data = items(s);
    data.push(("other/x.txt".into(), vec![7; 3000]));
    data.push(("other/deep/y.txt".into(), vec![9; 100]));
    let mut h = lan(s, &data);
    let sels = [
        "dir/item[3]",
        "other/",
        "dir/item?.bin",
        "dir/item4.bin",
        "*.iso",
    ];
    h.add_client(client(
        Want::Select(sels.iter().map(|x| x.to_string()).collect()),
        0.05,
        0,
    ));
    assert!(h.run(Instant::from_micros(120_000_000)), "seed {s}");
    let r = &h.reports()[0];
    let names: Vec<&str> = r.outcomes.iter().map(|o| o.name.as_str()).collect();
    // Each selector's items in the catalogue's order, each item once
    // (`dir/item4.bin` came with `dir/item?.bin`); `[` is no pattern.
    let mut want = vec!["dir/item[3]"];
    let mut folder = vec!["other/x.txt", "other/deep/y.txt"];
    folder.sort_by_key(|n| data.iter().position(|d| d.0 == *n));
    want.extend(folder);
    let digits: Vec<String> = (0..8).map(|i| format!("dir/item{i}.bin")).collect();
    want.extend(digits.iter().map(String::as_str));
    want.push("*.iso");
    assert_eq!(names, want, "seed {s}");
    // The exact name that is no item is the server's to refuse; the
    // pattern that names nothing never reaches it.
    assert_eq!(r.outcomes[0].result, Err("no such item".into()));
    let last = r.outcomes.last().expect("outcomes");
    assert_eq!(
        last.result,
        Err("names no item in the server's catalogue".into())
    );
    assert_eq!(h.server().server().stats().bad_requests, 1, "seed {s}");
    let fetched = (r.outcomes.iter())
        .filter(|o| o.name != "dir/item[3]" && o.name != "*.iso")
        .cloned()
        .collect();
    let fetched = repocast_sim::lan::LanReport {
        outcomes: fetched,
        ..r.clone()
    };
    common::assert_all_verified(&format!("seed {s}"), &fetched, &data);
}

#[test]
fn a_server_that_never_sends_data_fails_the_request_at_the_idle_timeout() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.idle_timeout = Duration::from_secs(5);
    // 100% loss on the client's link: manifests come, no datagram does.
    h.add_client(client(names(&[4]), 1.0, 0));
    assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
    let r = &h.reports()[0];
    let err = r.outcomes[0].result.clone().expect_err("cannot verify");
    assert!(err.contains("nothing heard"), "{err}");
    assert!(r.delay.expect("ended") >= Duration::from_secs(5));
}

/// Link rate of the request workload tests, bits per second.
const WORKLOAD_RATE: u64 = 12_500_000;

/// Issue 12's request workload (files of 32 KiB to 1 MiB) on a
/// [`WORKLOAD_RATE`] link at 5% loss, each request a client at its
/// arrival time, with the given batching hold.
fn workload(
    s: u64,
    hold: Hold,
) -> (
    VirtualLan,
    repocast_sim::requests::RequestWorkload,
    Vec<(String, Vec<u8>)>,
) {
    use repocast_sim::requests::{RequestWorkload, WorkloadParams};
    let w = RequestWorkload::generate(&WorkloadParams {
        size_range: (32 << 10, 1 << 20),
        seed: s,
        ..WorkloadParams::default()
    });
    let mut r = Rng::new(s);
    let data: Vec<(String, Vec<u8>)> = (w.sizes.iter().enumerate())
        .map(|(i, &n)| {
            (
                format!("f{i}"),
                (0..n).map(|_| r.next_u64() as u8).collect(),
            )
        })
        .collect();
    let mut h = VirtualLan::new(
        Profile::Lan,
        |c| {
            c.seed = s;
            hold.set(c);
            c.set_rate(WORKLOAD_RATE, false).expect("rate");
        },
        data.clone(),
        LossSpec::NONE,
    )
    .expect("server");
    for q in &w.requests {
        h.add_client(LanClient {
            want: Want::Items(q.files.iter().map(|&f| data[f].0.clone()).collect()),
            loss: LossSpec::Bernoulli { p: 0.05 },
            join_at: Instant::from_micros((q.at_s * 1e6) as u64),
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    (h, w, data)
}

/// The batching hold on the same workload, engaged from the first request
/// and idling the link (`serve --batch-hold-after 0 --batch-hold-idle`):
/// every request still verifies, and fewer bytes go out than without it;
/// a request alone on an idle server is not held at all, and two requests
/// for different items arriving together wait at most the cap. As shipped
/// (engaged after 4 s of load, never idling): no more bytes (2% slack), a
/// shorter tail than without it (a mean longer only at light load), and
/// neither the lone request nor the burst on an idle server held.
#[test]
fn the_batching_hold_sends_fewer_bytes_and_never_holds_a_lone_request() {
    let s = seed();
    let cap = Duration::from_secs(4);
    let (mut packets, mut means, mut p95s) = (Vec::new(), Vec::new(), Vec::new());
    for hold in [Hold::Off, Hold::Always(cap), Hold::Shipped] {
        let (mut h, _, data) = workload(s, hold);
        assert!(h.run(Instant::from_micros(600_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        let st = h.server().server().stats();
        // Only the idling hold leaves the link idle.
        let idles = matches!(hold, Hold::Always(_));
        assert_eq!(st.holds > 0, idles, "seed {s}: {hold:?} {st:?}");
        assert_eq!(st.report_timeouts, 0, "seed {s}: {st:?}");
        packets.push(st.data_packets as f64);
        let d: Vec<f64> = (h.reports().iter())
            .map(|r| r.delay.expect("done").as_secs_f64())
            .collect();
        let sm = repocast_sim::requests::summary(&d);
        means.push(sm.0);
        p95s.push(sm.2);
    }
    let what = format!(
        "seed {s}: off, always, shipped: packets {packets:?}, mean {means:?}, p95 {p95s:?}"
    );
    assert!(packets[1] < 0.97 * packets[0], "{what}");
    // As shipped, the hold reorders (items just asked for go after those
    // asked for long ago) and never idles, so the tail shortens: seeds
    // 1-16 give 0.47 to 0.81 of the p95 without it, packets 0.95 to
    // 1.013, means 0.75 to 1.01 but for this seed, the most lightly loaded
    // (1.9 s without the hold), at 1.31: the scheduler's ties go to the
    // smallest item (`size_ties`), and the hold's reordering undoes part
    // of that where there is little to batch. (Before size ties: means
    // 0.72 to 1.18, this seed the top.)
    assert!(packets[2] <= 1.02 * packets[0], "{what}");
    assert!(means[2] < 1.35 * means[0], "{what}");
    assert!(p95s[2] < 0.9 * p95s[0], "{what}");
    let data = items(s);
    let delays = |hold: Hold, wants: &[&[usize]]| -> Vec<Duration> {
        let mut h = lan_held(s, &data, hold);
        for w in wants {
            h.add_client(client(names(w), 0.05, 0));
        }
        assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        h.reports().iter().map(|r| r.delay.expect("done")).collect()
    };
    let lone = delays(Hold::Off, &[&[5]]);
    assert_eq!(lone, delays(Hold::Always(cap), &[&[5]]));
    assert_eq!(lone, delays(Hold::Shipped, &[&[5]]));
    let burst: &[&[usize]] = &[&[5], &[4]];
    let (free, held) = (delays(Hold::Off, burst), delays(Hold::Always(cap), burst));
    for (f, h) in free.iter().zip(&held) {
        assert!(*h <= *f + cap, "seed {s}: {free:?} without, {held:?} with");
    }
    assert!(held.iter().sum::<Duration>() > free.iter().sum::<Duration>());
    assert_eq!(free, delays(Hold::Shipped, burst), "seed {s}");
}

/// Issue 12's request workload, scaled down 8x in bytes and rate (the
/// same timing), through the shipped configuration: what went wrong on the
/// real network must not happen here. Every request ends verified, no
/// report times out, sends aggregate overlapping requests, the channel
/// carries well under the bytes requested, and the mean delay stays near
/// the fluid multicast reference and far below processor-shared unicast.
#[test]
fn a_request_workload_aggregates_without_idling_or_timeouts() {
    use repocast_sim::requests::{fluid_multicast, fluid_unicast, summary};
    let s = seed();
    let (mut h, w, data) = workload(s, Hold::Shipped);
    let rate = WORKLOAD_RATE;
    assert!(h.run(Instant::from_micros(600_000_000)), "seed {s}");
    assert_verified(&h, &data, s);
    let st = h.server().server().stats();
    assert_eq!(st.report_timeouts, 0, "seed {s}: {st:?}");
    // The shipped hold reorders and never idles the link.
    assert_eq!((st.holds, st.hold_idle_us), (0, 0), "seed {s}: {st:?}");
    let sends = st.transmissions - st.repair_transmissions;
    let per_send = w.item_requests() as f64 / sends as f64;
    assert!(
        per_send > 1.5,
        "seed {s}: {per_send} item-requests per send"
    );
    let wire = st.data_packets as f64 * 1339.0 / w.requested_bytes() as f64;
    assert!(wire < 0.7, "seed {s}: wire {wire}x requested");
    let delays: Vec<f64> = (h.reports().iter())
        .map(|r| r.delay.expect("done").as_secs_f64())
        .collect();
    let mean = summary(&delays).0;
    let payload_rate = rate as f64 * 1280.0 / 1339.0;
    let fluid = summary(&fluid_multicast(&w, payload_rate, 0.95)).0;
    let unicast = summary(&fluid_unicast(&w, payload_rate)).0;
    assert!(
        mean < 2.0 * fluid + 0.5,
        "seed {s}: mean {mean}, fluid {fluid}"
    );
    assert!(
        mean < 0.5 * unicast,
        "seed {s}: mean {mean}, unicast {unicast}"
    );
}

/// A block too small for a job to be back before its first repair symbol
/// (a one-packet file's repair follows its only source symbol) is
/// prepared on the sending path: `serve` handed out a job for each of
/// 20,000 small files, every one too late (session 54). Blocks of at
/// least `MIN_JOB_SYMBOLS` still go out as jobs, and jobs or none, the
/// packets are the same.
#[test]
fn only_blocks_large_enough_are_prepared_in_jobs() {
    use repocast_core::fec::layout::Layout;
    use repocast_core::server::encoders::MIN_JOB_SYMBOLS;
    let s = seed();
    let data = items(s);
    let run = |jobs: bool| {
        let mut h = VirtualLan::new(
            Profile::Lan,
            |c| {
                c.seed = s;
                if !jobs {
                    c.prepare_jobs = 0;
                }
            },
            data.clone(),
            LossSpec::NONE,
        )
        .expect("server");
        h.add_client(client(names(&[0, 1, 2, 3, 4, 5, 6, 7]), 0.05, 0));
        assert!(h.run(Instant::from_micros(60_000_000)), "seed {s}");
        assert_verified(&h, &data, s);
        h
    };
    let with = run(true);
    let fec = with
        .server()
        .server()
        .manifest(repocast_core::ItemId(5))
        .expect("item")
        .fec;
    let (mut large, mut small) = (0, 0);
    for (_, bytes) in &data {
        let layout = Layout::new(bytes.len() as u64, &fec).expect("layout");
        for b in 0..layout.blocks() {
            match layout.block_symbols(b) >= MIN_JOB_SYMBOLS {
                true => large += 1,
                false => small += 1,
            }
        }
    }
    assert!(
        small >= 4 && large >= 3,
        "seed {s}: {small} small, {large} large"
    );
    let jobs = with.server().server().prepare_jobs();
    assert_eq!((jobs.offered, jobs.late), (large, 0), "seed {s}");
    let without = run(false);
    let stats = |h: &VirtualLan| h.server().server().stats();
    assert_eq!(stats(&with), stats(&without), "seed {s}");
}
