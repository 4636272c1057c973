//! A pusher's new catalogue version while its listeners are in the middle
//! of a large file it leaves unchanged (a live folder gaining a file):
//! the pusher goes on with the symbol ids it had not sent, and the
//! listeners keep their partly received blocks, so the change costs them
//! what the new files cost, not a restart of the large one. A file whose
//! content changed starts again. The endpoints `repocast push` and
//! `repocast listen` run, with the shipped settings, on a virtual LAN.

mod common;

use common::push::*;
use common::seed_or;
use repocast_core::Instant;
use repocast_core::auth::Identity;
use repocast_core::endpoint::Dest;
use repocast_core::endpoint::push::PushEndpoint;
use repocast_core::wire::DataRepr;
use repocast_sim::push_lan::{PushLan, PushReport, push_items};
use repocast_sim::source::MemorySource;
use std::collections::{BTreeMap, BTreeSet};

/// One listener at `loss` of big.bin, from the start; the folder holds
/// `v1`, then the versions `later`, one every half second (a 16 MiB file
/// takes about 1.4 s at 100 Mbit/s; a live folder's versions come at
/// least a second apart, `repocast push`'s quiet time before a rescan).
fn receive(
    seed: u64,
    loss: f64,
    v1: &[(String, Vec<u8>)],
    later: &[&[(String, Vec<u8>)]],
) -> PushReport {
    let mut lan = PushLan::new(config(), Identity::from_seed([7; 32]), 1, v1).expect("lan");
    let mut l = listener(loss, 0.0);
    l.cfg.select = vec!["big.bin".to_string()];
    lan.listener(l, seed);
    for (i, v) in later.iter().enumerate() {
        lan.run(secs(0.5 * (i + 1) as f64));
        lan.replace(i as u64 + 2, v).expect("replace");
    }
    lan.run(secs(30.0));
    lan.reports().remove(0)
}

#[test]
fn a_new_version_around_a_large_file_costs_its_listeners_no_restart() {
    let seed = seed_or(11);
    let big = ("big.bin".to_string(), bytes(16 << 20, seed));
    let v1 = vec![big.clone()];
    let v2 = vec![big.clone(), ("a.txt".to_string(), bytes(3_000, seed + 1))];
    let mut v3 = v2.clone();
    v3.push(("b.txt".to_string(), bytes(4_000, seed + 2)));
    for loss in [0.0, 0.05, 0.3] {
        let steady = receive(seed, loss, &v1, &[]);
        check_files(&steady, &v1);
        let changed = receive(seed, loss, &v1, &[&v2, &v3]);
        // (A lossy listener may miss a version's catalogue altogether.)
        assert_eq!(changed.versions.last(), Some(&3), "{:?}", changed.versions);
        check_files(&changed, &v1);
        assert!(
            changed.stats.carried_blocks > 0,
            "loss {loss}: no block carried"
        );
        // Two catalogue changes and the small files' turns, not a second
        // and a third start of big.bin (which cost a third and two thirds
        // of it). A lossy listener that missed every copy of a version's
        // catalogue loses that version's data (it cannot tell what it
        // is), half a second here, but still carries its blocks over.
        let ratio = changed.data_sent as f64 / steady.data_sent as f64;
        let bound = if changed.versions.len() == 3 {
            1.03
        } else {
            1.3
        };
        assert!(
            ratio < bound,
            "loss {loss}: {} packets against {} ({ratio:.3}), versions {:?}",
            changed.data_sent,
            steady.data_sent,
            changed.versions
        );
    }
}

#[test]
fn a_file_changed_in_a_new_version_is_received_again_not_carried() {
    let seed = seed_or(12);
    let v1 = vec![("big.bin".to_string(), bytes(16 << 20, seed))];
    // The same name and size, other bytes: the same layout, so only the
    // hashes tell the two apart.
    let v2 = vec![("big.bin".to_string(), bytes(16 << 20, seed + 1))];
    let r = receive(seed, 0.05, &v1, &[&v2]);
    assert_eq!(r.versions, vec![1, 2]);
    check_files(&r, &v2);
    assert_eq!(r.stats.carried_blocks, 0);
    let client = r.client.expect("a receiver");
    assert_eq!(client.corrupt_blocks, 0, "old symbols fed the new file");
}

/// The (block, symbol id) of every data packet of big.bin `push` sends
/// from `now` until `until`, in order (`now` moves on).
fn big_packets(
    push: &mut PushEndpoint,
    source: &mut MemorySource,
    now: &mut Instant,
    until: Instant,
) -> Vec<(u32, u32)> {
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while *now < until {
        while let Some(dest) = push.poll_transmit(*now, source, &mut buf) {
            let Some(p) = (dest == Dest::Data)
                .then(|| DataRepr::parse(&buf).ok())
                .flatten()
            else {
                continue;
            };
            let name = push.server().manifest(p.item).map(|m| m.name);
            if name.as_deref() == Some("big.bin") {
                out.push((p.block.0, p.symbol));
            }
        }
        *now = push.poll_timeout().expect("running").max(*now);
    }
    out
}

/// The pusher's side alone: across a version that keeps big.bin, no
/// (block, symbol id) of it goes out twice, each block goes on right
/// after the ids it had sent (within a round of the interrupted pass), and
/// the file new to the version goes first (big.bin was just sent; a new
/// version used to start its carousel again in item order).
#[test]
fn a_pusher_goes_on_with_the_ids_it_had_not_sent() {
    let seed = seed_or(13);
    let big = ("big.bin".to_string(), bytes(8 << 20, seed));
    let v2 = vec![big.clone(), ("z.txt".to_string(), bytes(3_000, seed + 1))];
    let cfg = config();
    let fec = |size| cfg.server.item_fec(size);
    let (items, mut source) = push_items(std::slice::from_ref(&big), fec).expect("items");
    let identity = Identity::from_seed([7; 32]);
    let mut push = PushEndpoint::new(Instant::ZERO, config(), identity, 1, items).expect("pusher");
    // 8 MiB at 100 Mbit/s: a pass takes about 0.7 s; cut it at 0.3 s.
    let mut now = Instant::ZERO;
    let before = big_packets(&mut push, &mut source, &mut now, secs(0.3));
    let last: BTreeMap<u32, u32> = before.iter().copied().collect();
    assert!(last.values().all(|&id| id > 100), "{last:?}");
    let (items, mut source) = push_items(&v2, fec).expect("items");
    let set = push.config().plan(items, &mut source).expect("plan");
    push.replace(now, 2, set).expect("replace");
    let mut buf = Vec::new();
    let first = loop {
        match push.poll_transmit(now, &mut source, &mut buf) {
            Some(Dest::Data) => break DataRepr::parse(&buf).expect("data").item,
            Some(_) => {}
            None => now = push.poll_timeout().expect("running").max(now),
        }
    };
    let name = push.server().manifest(first).map(|m| m.name);
    assert_ne!(name.as_deref(), Some("big.bin"), "big.bin went first");
    let after = big_packets(&mut push, &mut source, &mut now, secs(2.0));
    let mut seen = BTreeSet::new();
    let twice: Vec<_> = (before.iter().chain(&after))
        .filter(|p| !seen.insert(**p))
        .collect();
    assert!(
        twice.is_empty(),
        "sent again: {:?}",
        &twice[..twice.len().min(5)]
    );
    let mut firsts: BTreeMap<u32, u32> = BTreeMap::new();
    for &(b, id) in &after {
        firsts.entry(b).or_insert(id);
    }
    assert_eq!(firsts.len(), last.len());
    for (b, id) in &firsts {
        let at = last.get(b).copied().unwrap_or(0);
        assert!(
            *id > at && *id <= at + 2,
            "block {b}: went on at {id} after {at}"
        );
    }
}

/// A pusher stopped and started again on the same folder (a new run, so a
/// new session and version) while a listener is half-way through the
/// first pass of big.bin: the listener carries its blocks over either
/// way, and with the new run going on from the stopped run's ids it needs
/// about what it needs without the restart. Started again from id 0, the
/// run sends it a pass of source symbols it mostly holds.
#[test]
fn a_restarted_pusher_goes_on_from_the_ids_its_last_run_sent() {
    let seed = seed_or(14);
    let v = vec![("big.bin".to_string(), bytes(16 << 20, seed))];
    let identity = || Identity::from_seed([7; 32]);
    for loss in [0.0, 0.05, 0.3] {
        let steady = receive(seed, loss, &v, &[]);
        let run = |resume: bool| {
            let mut lan = PushLan::new(config(), identity(), 1, &v).expect("lan");
            lan.listener(listener(loss, 0.0), seed);
            lan.run(secs(0.7));
            let points = lan.pusher().resume_points();
            let went_on =
                (lan.restart(identity(), 2, &v, resume.then_some(&points[..]))).expect("restart");
            assert_eq!(went_on, usize::from(resume));
            lan.run(secs(30.0));
            lan.reports().remove(0)
        };
        let ratio = |r: &PushReport| r.data_sent as f64 / steady.data_sent as f64;
        let resumed = run(true);
        check_files(&resumed, &v);
        assert_eq!(resumed.versions, vec![1, 2]);
        assert!(
            resumed.stats.carried_blocks > 0,
            "loss {loss}: no block carried"
        );
        assert!(
            ratio(&resumed) < 1.03,
            "loss {loss}: {} packets against {} without a restart",
            resumed.data_sent,
            steady.data_sent
        );
        let again = run(false);
        check_files(&again, &v);
        assert!(
            ratio(&again) > 1.15,
            "loss {loss}: from id 0, {} packets against {}",
            again.data_sent,
            steady.data_sent
        );
    }
}

/// A record of ids from a folder we do not own may say anything: ids far
/// past what a Reed-Solomon block has are taken within its id space, so
/// the pusher sends only symbols its code can make (no panic), and a
/// listener of that run still gets the file.
#[test]
fn a_record_with_ids_past_the_code_is_taken_within_its_space() {
    use repocast_core::fec::CodeKind;
    use repocast_core::server::ResumePoint;
    use repocast_sim::push_lan::shipped_pusher_with;
    let seed = seed_or(15);
    let big = ("big.bin".to_string(), bytes(4 << 20, seed));
    let cfg = shipped_pusher_with(CodeKind::ReedSolomon);
    let (items, mut source) =
        push_items(std::slice::from_ref(&big), |s| cfg.server.item_fec(s)).expect("items");
    let identity = Identity::from_seed([7; 32]);
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, identity, 1, items).expect("pusher");
    let m = push
        .server()
        .manifest(repocast_core::ItemId(0))
        .expect("big.bin");
    let blocks = m.block_hashes.len();
    let forged = ResumePoint {
        hash: m.hash,
        size: m.size,
        fec: m.fec,
        next_ids: vec![u32::MAX - 7; blocks],
    };
    assert_eq!(push.resume(std::slice::from_ref(&forged)), 1);
    let space = CodeKind::ReedSolomon.symbol_space(m.fec.max_block_symbols);
    let mut now = Instant::ZERO;
    let sent = big_packets(&mut push, &mut source, &mut now, secs(1.0));
    assert!(!sent.is_empty());
    assert!(sent.iter().all(|&(_, id)| id < space), "ids past {space}");

    // The same on the virtual LAN, end to end.
    let files = vec![big];
    let cfg = shipped_pusher_with(CodeKind::ReedSolomon);
    let mut lan = PushLan::new(cfg, Identity::from_seed([7; 32]), 1, &files).expect("lan");
    lan.listener(listener(0.05, 0.0), seed);
    lan.run(secs(0.2));
    // Run again on the forged record instead of the last run's.
    let went_on =
        (lan.restart(Identity::from_seed([7; 32]), 2, &files, Some(&[forged]))).expect("restart");
    assert_eq!(went_on, 1);
    lan.run(secs(30.0));
    check_files(&lan.reports().remove(0), &files);
}
